/*
 * POSIX shared-memory files of numacoll: names, creation, attach, space
 * reservation, the node-wide budget, and the clean-up of files left by
 * processes that died.
 *
 * A file has a name only for the moment it takes to create it: the creator
 * unlinks it before it returns from nc_shm_create() and the others open the
 * creator's descriptor through /proc/<pid>/fd/<fd>, which the kernel allows
 * to processes of the same user. So a process killed at any point (kill -9,
 * a launcher tearing the job down) leaves nothing in /dev/shm: the memory
 * goes when the last process holding it exits.
 * Names are /numacoll-<uid>-<pid>-<16 random hex digits>: unpredictable
 * (getrandom); the creator's uid and pid let a later process remove a file
 * whose creator died inside that moment (nc_shm_sweep). Files are created
 * 0600 with O_EXCL | O_NOFOLLOW, so a file or symlink already at the name is
 * refused, never followed or reused; an attacher checks that the file
 * belongs to its own user with mode 0600.
 *
 * Space: tmpfs allocates a page on first touch, and a touch it cannot back
 * kills the process with SIGBUS. Every byte a member will touch is reserved
 * first with posix_fallocate() by that member (so the page lands on the
 * member's NUMA node, as first touch would put it), and a reservation that
 * fails is an error the team agrees on, never a signal.
 */
#ifndef NC_SHM_H
#define NC_SHM_H

#include <stddef.h>
#include <stdint.h>

#define NC_SHM_DIR "/dev/shm"
#define NC_SHM_PREFIX "numacoll-"

/* A fresh unpredictable name ("/numacoll-..."); buf holds at least 64 bytes. */
void nc_shm_name(char *buf, size_t len);

/* Create name exclusively (0600), size it to bytes, unlink the name; returns
 * the fd (keep it open until every member attached) or a negative
 * NUMACOLL_ERR_* (logged). */
int nc_shm_create(const char *name, size_t bytes);
/* Attach to the file behind descriptor fd of process pid (the creator):
 * refuses other owners, modes other than 0600 and a size other than bytes;
 * name is for messages. Returns an fd or error (logged). */
int nc_shm_open(int pid, int fd, const char *name, size_t bytes);

/* Reserve [off, off+len) of fd. 0, or NUMACOLL_ERR_NOSPACE with a one-line
 * explanation in why (what was needed, what /dev/shm has, what lowers it). */
int nc_shm_reserve(int fd, size_t off, size_t len, const char *what, char *why, size_t whylen);

/* Size and free bytes of the file system behind shm_open (/dev/shm). */
int nc_shm_fs(uint64_t *size, uint64_t *avail);

/* "1.5 MiB" */
void nc_shm_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* Remove files of this user whose creating process is gone (once per process;
 * segments younger than a minute are left alone), and bootstrap files
 * (numacoll_bootstrap_named()) no live process holds a lock on. Returns how
 * many were removed. */
int nc_shm_sweep(void);

/*
 * The node-wide budget: the bytes of every numacoll segment of this job on
 * this node, capped by NUMACOLL_SHM_LIMIT (0: a quarter of /dev/shm). The
 * counter lives in a page shared by the job's processes on the node once
 * nc_budget_join() ran (the MPI layer does at MPI_Init); before that, or
 * without it, each process counts the segments it created.
 */
typedef struct nc_budget_state {
    uint64_t limit;     /* bytes */
    uint64_t used;      /* bytes in use when asked */
    int shared;         /* 1: node-wide counter, 0: this process only */
} nc_budget_state_t;

struct numacoll_bootstrap;
/* Collective over the node's processes: share one counter page. */
int nc_budget_join(const struct numacoll_bootstrap *bs);
void nc_budget_leave(void);
/* The limit in force (NUMACOLL_SHM_LIMIT or the automatic one). */
uint64_t nc_budget_limit(void);
/* Take bytes from the budget; 0 or NUMACOLL_ERR_NOSPACE. */
int nc_budget_take(uint64_t bytes, nc_budget_state_t *st);
void nc_budget_give(uint64_t bytes);
void nc_budget_get(nc_budget_state_t *st);

#endif
