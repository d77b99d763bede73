/*
 * Fork-based test harness: run a body in p real processes that share nothing
 * but a bootstrap name, under a timeout; then check /dev/shm holds nothing of
 * this run.
 */
#ifndef NC_FORKTEST_H
#define NC_FORKTEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

/* body returns 0 on success; it runs in each child. */
typedef int (*nc_fork_body_fn)(int rank, int p, const char *name, void *arg);

/* 0 when every child exited 0 within timeout_s and left no segment (named
 * after its pid) nor the bootstrap file in /dev/shm; otherwise prints why and
 * returns 1 (after killing the children). expect_fail_rank >= 0: that child is
 * allowed to die by a signal (used by the dead-member test). */
int nc_fork_run(int p, int timeout_s, nc_fork_body_fn body, void *arg, int expect_fail_rank);


/* Deterministic per-call pattern: byte i of call `call`. */
void nc_pattern_fill(unsigned char *buf, size_t n, uint64_t call);
/* Index of the first wrong byte, or -1. */
long nc_pattern_check(const unsigned char *buf, size_t n, uint64_t call);



struct numacoll_team;
/* One checked broadcast of n bytes from root with the pattern of `call`. */
int one_bcast(struct numacoll_team *t, unsigned char *buf, size_t n, int root, uint64_t call,
              int rank);
#endif
