/*
 * numacoll: NUMA-aware shared-memory collectives for processes of one node.
 *
 * This header is MPI-free. A team is p processes of one node that share a
 * segment; collectives on a team are called by every member, in the same order
 * (like MPI collectives on one communicator). A team is not thread-safe: one
 * thread at a time per team, different teams from different threads are fine.
 *
 *     numacoll_bootstrap_t *bs;
 *     numacoll_bootstrap_named("myjob", rank, size, &bs);   // or your own allgather
 *     numacoll_team_t *team;
 *     numacoll_team_create(bs, &team);
 *     numacoll_bcast(team, buf, bytes, root);
 *     numacoll_barrier(team);
 *     numacoll_team_destroy(team);
 *     numacoll_bootstrap_named_free(bs);
 */
#ifndef NUMACOLL_H
#define NUMACOLL_H

#include <stddef.h>
#include <stdint.h>

#include "numacoll/bootstrap.h"
#include "numacoll/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NUMACOLL_API __attribute__((visibility("default")))

#define NUMACOLL_VERSION_MAJOR 0
#define NUMACOLL_VERSION_MINOR 1

typedef struct numacoll_team numacoll_team_t;

NUMACOLL_API const char *numacoll_strerror(int err);
NUMACOLL_API const char *numacoll_version(void);

/* ---- bootstrap by name (fork-based tests, non-MPI users) -------------------
 * Every member calls it with the same name and size and its own rank; the
 * rendezvous file in /dev/shm is unlinked as soon as all members opened it.
 * A file whose members all ended before their team formed is removed by the
 * next member of that name, or by the next numacoll process on the node
 * that bootstraps or makes a segment (each member holds a shared flock() on
 * it until numacoll_bootstrap_named_free(); a child forked in between holds
 * it too). Its allgather (numacoll_team_create()) fails with
 * NUMACOLL_ERR_PEER_DEAD within about 50 ms when a member that joined the
 * same file has died (each joined member holds a lock on a byte of its own;
 * pid namespaces do not matter), and with NUMACOLL_ERR_TIMEOUT after 120 s
 * for a member that never joins (one warning after 10 s names it; a member
 * that died alone in a file the others had not opened yet counts as never
 * joined: its file is removed); a waiting member naps past 200 ms. */
NUMACOLL_API int numacoll_bootstrap_named(const char *name, int rank, int size,
                                          numacoll_bootstrap_t **out);
NUMACOLL_API void numacoll_bootstrap_named_free(numacoll_bootstrap_t *bs);

/* ---- teams ----------------------------------------------------------------- */
NUMACOLL_API int numacoll_team_create(const numacoll_bootstrap_t *bs, numacoll_team_t **out);
NUMACOLL_API void numacoll_team_destroy(numacoll_team_t *team);

/* ---- collectives ------------------------------------------------------------
 * bcast: `bytes` from root's buf to every member's buf. A member whose bytes
 * differ from the root's still takes part (no hang), receives at most its own
 * bytes and gets NUMACOLL_ERR_TRUNCATE. Members that disagree on the root get
 * NUMACOLL_ERR_ROOT and the team stays usable: a reader that finds another
 * root announced; of two members that both pass themselves as the root, the
 * one that claims the call second (it takes part as a reader and keeps its
 * buffer); when no member passes itself, every member, once all of them
 * wait for the call. A member that passed 0 bytes returns at once and gets
 * the error from the call that resolves this one (its next call on the
 * team other than a small broadcast it roots, at the latest 32 broadcasts
 * later); the others wait for that.
 * Two roots of a call of at most NUMACOLL_BCAST_INLINE_MAX bytes that claim
 * it within the same few instructions both go on (no locked instruction on
 * that path): their readers may get either's bytes or a mix (a hang if the
 * other one's call is larger). */
NUMACOLL_API int numacoll_bcast(numacoll_team_t *team, void *buf, size_t bytes, int root);

/* Fragment-wise form for non-contiguous data: the root's pack(ctx, off, dst, len)
 * fills shared memory, the others' unpack(ctx, off, src, len) drains it. */
typedef void (*numacoll_copy_fn)(void *ctx, size_t offset, void *shm, size_t len);
NUMACOLL_API int numacoll_bcast_cb(numacoll_team_t *team, size_t bytes, int root,
                                   numacoll_copy_fn copy, void *ctx);

NUMACOLL_API int numacoll_barrier(numacoll_team_t *team);

/* ---- reductions (coll/nc_reduce.c) -------------------------------------------
 * count elements of `type` from every member's sendbuf are combined with `op`;
 * reduce leaves the result in root's recvbuf (the others' recvbuf is not
 * touched and may be NULL), allreduce in every member's recvbuf.
 * In place: sendbuf == NUMACOLL_IN_PLACE (or NULL) takes the input from
 * recvbuf (for reduce: at the root; a non-root passes its input in sendbuf).
 *
 * Reproducible: the result does not depend on timing. Element k of the result
 * is, for the predefined ops, the left fold in rank order
 *     ((x0[k] op x1[k]) op x2[k]) ... op x(p-1)[k]
 * and for user ops x0[k] op (x1[k] op (... op x(p-1)[k])), which is the same
 * value for an associative op, commutative or not (MPI's rule: rank order).
 * Two-level order: when the team spans several NUMA nodes with more than one
 * member on some node and NUMACOLL_REDUCE_NUMA=1 (the default), predefined
 * ops and commutative user ops fold each NUMA node's members (rank order)
 * into a partial Pd, then the partials, nodes numbered by their lowest
 * member: ((P0 op P1) op P2) ... (user ops: P0 op (P1 op ...)); with
 * NUMACOLL_REDUCE_NUMA=0, rank order on any node. Every size, same order.
 * Every member of an allreduce gets the same bits.
 *
 * Members passing different counts, types (or user element sizes), ops or
 * roots get NUMACOLL_ERR_TRUNCATE (count), NUMACOLL_ERR_MISMATCH (type, op)
 * or NUMACOLL_ERR_ROOT, on every member that compares: every member of an
 * allreduce or of a reduce larger than NUMACOLL_REDUCE_SMALL_MAX, the root of
 * a smaller reduce, never a member whose count is 0 (that call only posts);
 * no hang, the team stays usable. */
#define NUMACOLL_IN_PLACE ((const void *)1)

typedef enum numacoll_type {
    NUMACOLL_INT8 = 0, NUMACOLL_INT16, NUMACOLL_INT32, NUMACOLL_INT64,
    NUMACOLL_UINT8, NUMACOLL_UINT16, NUMACOLL_UINT32, NUMACOLL_UINT64,
    NUMACOLL_FLOAT, NUMACOLL_DOUBLE, NUMACOLL_LONG_DOUBLE,
    NUMACOLL_FLOAT_COMPLEX, NUMACOLL_DOUBLE_COMPLEX, NUMACOLL_LONG_DOUBLE_COMPLEX,
    NUMACOLL_BOOL,            /* C _Bool (logical ops only) */
    /* value-index pairs for MINLOC/MAXLOC, laid out as MPI's C pair types
     * (struct { value; int index; } with the C compiler's padding) */
    NUMACOLL_FLOAT_INT, NUMACOLL_DOUBLE_INT, NUMACOLL_LONG_INT, NUMACOLL_2INT,
    NUMACOLL_SHORT_INT, NUMACOLL_LONG_DOUBLE_INT,
    /* MPI's Fortran pairs MPI_2REAL and MPI_2DOUBLE_PRECISION: the index is
     * of the value's type (struct { float value; float index; }, and double);
     * MPI_2INTEGER is NUMACOLL_2INT */
    NUMACOLL_2FLOAT, NUMACOLL_2DOUBLE,
    NUMACOLL_TYPE_COUNT
} numacoll_type_t;

typedef enum numacoll_op {
    NUMACOLL_SUM = 0, NUMACOLL_PROD, NUMACOLL_MIN, NUMACOLL_MAX,
    NUMACOLL_LAND, NUMACOLL_LOR, NUMACOLL_LXOR,
    NUMACOLL_BAND, NUMACOLL_BOR, NUMACOLL_BXOR,
    NUMACOLL_MINLOC, NUMACOLL_MAXLOC,
    NUMACOLL_OP_COUNT
} numacoll_op_t;

/* Bytes of one element of type; 0 for an unknown type. */
NUMACOLL_API size_t numacoll_type_size(numacoll_type_t type);
/* 1 when op is defined on type (MPI's table: arithmetic on numbers, min/max
 * not on complex, logical on integers and bool, bitwise on integers, the
 * LOC ops on pairs only); NUMACOLL_ERR_INVAL is returned for the others. */
NUMACOLL_API int numacoll_op_valid(numacoll_op_t op, numacoll_type_t type);

/* inout[k] = inout[k] op in[k] for k < count with numacoll's own kernels (the
 * ones the collectives use; no team needed). */
NUMACOLL_API int numacoll_reduce_local(const void *in, void *inout, size_t count,
                                       numacoll_type_t type, numacoll_op_t op);

NUMACOLL_API int numacoll_reduce(numacoll_team_t *team, const void *sendbuf, void *recvbuf,
                                 size_t count, numacoll_type_t type, numacoll_op_t op, int root);
NUMACOLL_API int numacoll_allreduce(numacoll_team_t *team, const void *sendbuf, void *recvbuf,
                                    size_t count, numacoll_type_t type, numacoll_op_t op);

/* User-defined operations: inout[k] = in[k] op inout[k] for k < count, on
 * elements of elem_size bytes (MPI_User_function's contract). Elements are
 * copied as bytes; fn must not keep pointers. */
typedef void (*numacoll_user_op_fn)(const void *in, void *inout, size_t count, void *ctx);
typedef struct numacoll_user_op {
    numacoll_user_op_fn fn;
    void *ctx;
    size_t elem_size;
    int commutative; /* 1: the two-level order may be used; 0: rank order always */
} numacoll_user_op_t;

NUMACOLL_API int numacoll_reduce_user(numacoll_team_t *team, const void *sendbuf, void *recvbuf,
                                      size_t count, const numacoll_user_op_t *op, int root);
NUMACOLL_API int numacoll_allreduce_user(numacoll_team_t *team, const void *sendbuf,
                                         void *recvbuf, size_t count,
                                         const numacoll_user_op_t *op);

/* ---- the gather family (coll/nc_gather.c) -----------------------------------
 * Blocks of bytes, MPI's semantics with byte counts: block k of a member's
 * buffer is at base + k * bytes (uniform forms) or base + displs[k] with
 * counts[k] bytes (v-forms; any order, gaps allowed, no overlap of received
 * blocks). Arguments named for the root only are ignored elsewhere (may be
 * NULL). In place (NUMACOLL_IN_PLACE or NULL):
 *   gather(v):    the root's sendbuf: its block is in recvbuf already;
 *   scatter(v):   the root's recvbuf: its block stays in sendbuf;
 *   allgather(v): sendbuf: every member's block is in recvbuf already;
 *   alltoall(v):  sendbuf: the blocks are taken from recvbuf (and replaced;
 *                 sent from a private copy, as the MPI libraries do).
 * A member whose receive size for a block differs from the sender's bytes
 * gets NUMACOLL_ERR_TRUNCATE (it keeps what fits and the call completes on
 * every member); every member must agree on the root. */
NUMACOLL_API int numacoll_gather(numacoll_team_t *team, const void *sendbuf, size_t bytes,
                                 void *recvbuf, int root);
NUMACOLL_API int numacoll_gatherv(numacoll_team_t *team, const void *sendbuf, size_t sendbytes,
                                  void *recvbuf, const size_t *recvbytes, const size_t *displs,
                                  int root);
NUMACOLL_API int numacoll_scatter(numacoll_team_t *team, const void *sendbuf, void *recvbuf,
                                  size_t bytes, int root);
NUMACOLL_API int numacoll_scatterv(numacoll_team_t *team, const void *sendbuf,
                                   const size_t *sendbytes, const size_t *displs, void *recvbuf,
                                   size_t recvbytes, int root);
NUMACOLL_API int numacoll_allgather(numacoll_team_t *team, const void *sendbuf, size_t bytes,
                                    void *recvbuf);
NUMACOLL_API int numacoll_allgatherv(numacoll_team_t *team, const void *sendbuf,
                                     size_t sendbytes, void *recvbuf, const size_t *recvbytes,
                                     const size_t *displs);
NUMACOLL_API int numacoll_alltoall(numacoll_team_t *team, const void *sendbuf, void *recvbuf,
                                   size_t bytes);
NUMACOLL_API int numacoll_alltoallv(numacoll_team_t *team, const void *sendbuf,
                                    const size_t *sendbytes, const size_t *sdispls,
                                    void *recvbuf, const size_t *recvbytes,
                                    const size_t *rdispls);

/* ---- tunables ---------------------------------------------------------------
 * Names are the environment variables (e.g. "NUMACOLL_BCAST_FRAG_SIZE").
 * numacoll_param_set() changes the value for teams created afterwards; a team
 * keeps the snapshot it was created with. numacoll_param_get() writes the
 * value's text, NUL-terminated, into value (len bytes): a value that does not
 * fit is cut and NUMACOLL_ERR_TRUNCATE returned (32 bytes hold every value). */
NUMACOLL_API int numacoll_param_set(const char *name, const char *value);
NUMACOLL_API int numacoll_param_get(const char *name, char *value, size_t len,
                                    const char **source);
NUMACOLL_API int numacoll_param_count(void);
NUMACOLL_API int numacoll_param_describe(int index, const char **name, const char **unit,
                                         const char **range, const char **doc);

/* ---- what a team looks like ------------------------------------------------- */
enum numacoll_placement {
    NUMACOLL_PLACEMENT_OK = 0,        /* every page of every member on its node */
    NUMACOLL_PLACEMENT_MISPLACED = 1, /* move_pages() found pages off their node */
    NUMACOLL_PLACEMENT_UNKNOWN = 2,   /* some member unbound: no node to expect */
    NUMACOLL_PLACEMENT_UNCHECKED = 3, /* move_pages() not available here */
};

typedef struct numacoll_team_info {
    int rank, size;
    int numa_node;          /* this member's NUMA node (OS index), -1 if unbound */
    int leader;             /* leaders[rank] */
    int nleaders;           /* number of distinct leaders (NUMA groups) */
    int oversubscribed;     /* more members than CPUs they may run on */
    int ncpus;              /* CPUs the members may run on (the union of their masks) */
    void *seg_base;         /* where this member mapped the segment */
    size_t seg_bytes;       /* whole segment */
    size_t page;            /* page size used for the layout */
    size_t frag_size, queue_len, sets;  /* f, s, q */
    const char *tree;       /* e.g. "kary:2" */
    const char *layout;     /* "paper" or "compact" */
    size_t hdr_off, hdr_bytes;          /* header + leaders + pids */
    size_t calls_off, calls_bytes;      /* call ring, an ack line and two probe lines per member,
                                           claim lines */
    size_t sets_off, set_bytes;         /* q pages of op/nreaders */
    size_t rank_off, rank_bytes;        /* member i's block at rank_off + i*rank_bytes */
    size_t ctrl_bytes;                  /* control blocks at the start of a member block */
    size_t buf_stride;                  /* distance between two fragment buffers */
    size_t reduce_off, reduce_bytes;    /* reductions' slots: at rank_off + i*rank_bytes + reduce_off */
    size_t gather_off, gather_bytes;    /* the gather family's boxes and slots, likewise */
    size_t barrier_off, barrier_bytes;  /* the collectives' shared areas (barrier flags first) */
    int placement;                      /* enum numacoll_placement, team-wide */
    long misplaced_pages;               /* team-wide count */
    char placement_detail[160];         /* first misplaced block, or why unchecked */
    int cache_shared;                   /* the members share a cache: 1, 0, -1 unknown */
    int cache_measured;                 /* 1: measured (NUMACOLL_CACHE_PROBE), 0: hwloc's */
    int handoff_ns;                     /* measured: slowest neighbours' one-way hand-off, ns */
    int shm_nt;                         /* 1: this member streams its copies into the
                                           segment (NUMACOLL_SHM_NT) */
} numacoll_team_info_t;

NUMACOLL_API int numacoll_team_info(const numacoll_team_t *team, numacoll_team_info_t *info);
/* leaders[i] for every member (size ints). */
NUMACOLL_API int numacoll_team_leaders(const numacoll_team_t *team, int *leaders);

#ifdef __cplusplus
}
#endif
#endif
