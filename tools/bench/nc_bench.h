/*
 * numacoll-bench: internal interface shared by the tool's files.
 *
 *   nc_bench_options.c  command line -> plan (MPI-free), --dry-run plan printer
 *   nc_bench_machine.c  last-level cache size, CPU model, cores, NUMA nodes (hwloc)
 *   nc_bench_measure.c  buffers, timing loops of the collectives, memcpy,
 *                       reduce-kernel, cma-copy and flag; the reductions' inputs and check
 *   nc_bench_report.c   runs -> one result per (implementation, size); table, summary,
 *                       CSV; --fake-timings; plot script launch
 *   nc_bench_main.c     main(): parse, MPI_Init, communicators, runs, report
 *
 * Parsing functions return 0 on success and -1 on a user error, with a one-line
 * message (no trailing newline) in the caller's err buffer.
 */
#ifndef NC_BENCH_H
#define NC_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "numacoll.h" /* numacoll_type_t, numacoll_op_t (MPI-free) */

#define NC_BENCH_ERRLEN 512
#define NC_BENCH_EXIT_USAGE 2  /* bad option: one line on stderr, nothing measured */
#define NC_BENCH_EXIT_PLOT 3   /* measurement done, CSV written, the plot failed */
#define NC_BENCH_MAX_SIZES 64
#define NC_BENCH_MAX_IMPLS 48
#define NC_BENCH_MAX_PARAMS 16
#define NC_BENCH_LABEL 256
#define NC_BENCH_CANARY 64      /* guard bytes after every message, checked after timing */
#define NC_BENCH_MIN_ITER 5     /* time cap never goes below min(this, --iter R) */
#define NC_BENCH_MAX_LIMITS 5   /* memcpy, reduce-kernel, cma-copy, flag-sync, flag */

enum nc_bench_coll {
    NC_BENCH_BCAST = 0, NC_BENCH_BARRIER, NC_BENCH_REDUCE, NC_BENCH_ALLREDUCE,
    /* the gather family: -m is the block each member sends to each receiver */
    NC_BENCH_GATHER, NC_BENCH_GATHERV, NC_BENCH_SCATTER, NC_BENCH_SCATTERV, NC_BENCH_ALLGATHER,
    NC_BENCH_ALLGATHERV, NC_BENCH_ALLTOALL, NC_BENCH_ALLTOALLV, NC_BENCH_NCOLL
};

enum nc_bench_kind {
    NC_IMPL_NATIVE,   /* PMPI_*: the MPI library's own algorithm */
    NC_IMPL_NUMACOLL, /* MPI_*: numacoll's wrapper on a communicator set up with params */
    NC_IMPL_MEMCPY,   /* one core's memcpy of the same bytes, same cache policy */
    NC_IMPL_KERNEL,   /* reductions: one core's numacoll_reduce_local (inout op= in), same
                       * bytes and cache policy */
    NC_IMPL_CMA,      /* bcast, the gather family: every rank moves the bytes the collective
                       * gives it, each block by one process_vm_readv from its sender's
                       * buffer (its own block by memcpy), all ranks at once, no protocol */
    NC_IMPL_SYNC,     /* every collective but the barrier: its waits alone, a word per rank,
                       * timed like the collective (flag_sync()) */
    NC_IMPL_FLAG      /* one-way latency of a cache-line flag between ranks 0 and 1 */
};

enum nc_bench_stat { NC_STAT_MIN = 0, NC_STAT_AVG, NC_STAT_MAX };

struct nc_bench_param {
    char key[64];   /* as the user wrote it (label, table) */
    char name[64];  /* numacoll tunable, e.g. NUMACOLL_BCAST_TREE */
    char value[96];
};

struct nc_bench_impl {
    enum nc_bench_kind kind;
    char label[NC_BENCH_LABEL]; /* table and CSV name */
    int nparams;
    struct nc_bench_param params[NC_BENCH_MAX_PARAMS];
};

struct nc_bench_opts {
    int ncoll;
    enum nc_bench_coll coll[NC_BENCH_NCOLL];
    int nsizes;
    size_t sizes[NC_BENCH_MAX_SIZES];
    const char *sizes_text;
    /* reduce, allreduce: --type and --op, and the sizes rounded down to whole elements
     * (sorted, unique; a size below one element is count 0) */
    numacoll_type_t type;
    numacoll_op_t op;
    int nred_sizes;
    size_t red_sizes[NC_BENCH_MAX_SIZES];
    long iter_max;        /* --iter R */
    double iter_vol_mib;  /* --iter R,V: at most V MiB per (impl, size); 0 = no cap */
    int warmup;
    double time_per_size; /* seconds of timed calls per (impl, size, run) */
    int off_cache;
    size_t buf_offset; /* --buf-offset: buffers start this far past a page boundary */
    int thp;           /* --thp: the buffers asked for transparent huge pages */
    double cache_mib;     /* --off-cache=MIB; 0: detect the LLC */
    int root, root_shift;
    double imbalance;     /* --imbalance X: v-forms' blocks shrink to m (1 - X) */
    int runs;
    int nimpl;            /* user implementations (native, numacoll configs) */
    struct nc_bench_impl impl[NC_BENCH_MAX_IMPLS];
    int impl_given;
    const char *sweep;    /* --sweep text */
    const char *sweep_base; /* --sweep-base: tunables common to the sweep's configurations */
    int limits;           /* measure memcpy, flag (and reduce-kernel for reductions) too */
    enum nc_bench_stat stat;
    int verify_each;
    const char *csv, *plot;
    int dry_run, fake, np, quiet;
    int help, version;
};

/* nc_bench_options.c */
int nc_bench_opts_parse(int argc, char **argv, struct nc_bench_opts *o, char *err, size_t errlen);
void nc_bench_usage(FILE *out);
int nc_bench_parse_size(const char *s, size_t *out);
void nc_bench_format_size(size_t bytes, char *buf, size_t len);
const char *nc_bench_coll_name(enum nc_bench_coll c);
const char *nc_bench_stat_name(enum nc_bench_stat s);
/* Sizes measured for collective c in bytes (the barrier has the one size 0; reduce and
 * allreduce: whole elements of --type). */
int nc_bench_coll_sizes(const struct nc_bench_opts *o, enum nc_bench_coll c, const size_t **sizes);
int nc_bench_coll_is_reduction(enum nc_bench_coll c);
int nc_bench_has_reduction(const struct nc_bench_opts *o);
/* --type and --op: names as the user writes them, MPI's names, element bytes. */
const char *nc_bench_type_name(numacoll_type_t t);
const char *nc_bench_type_mpi_name(numacoll_type_t t);
size_t nc_bench_type_bytes(numacoll_type_t t);
const char *nc_bench_op_name(numacoll_op_t op);
const char *nc_bench_op_mpi_name(numacoll_op_t op);
/* Pool slot of one call of `bytes`: a reduction's send buffer, then its receive buffer at
 * nc_bench_recv_offset() (both followed by guard bytes); the message itself otherwise. */
size_t nc_bench_slot_bytes(enum nc_bench_coll c, size_t bytes, int p);
/* The gather family: 1 for its members; a slot holds p send blocks, then (at
 * nc_bench_recv_offset(p * bytes)) p receive blocks. */
int nc_bench_coll_is_exchange(enum nc_bench_coll c);
/* bcast and the gather family get the cma-copy reference row (NC_IMPL_CMA) */
int nc_bench_coll_has_copy_limit(enum nc_bench_coll c);
/* some collective of the run gets it */
int nc_bench_has_copy_limit(const struct nc_bench_opts *o);
/* every collective but the barrier gets the flag-sync reference row (NC_IMPL_SYNC) */
int nc_bench_coll_has_sync_limit(enum nc_bench_coll c);
int nc_bench_has_sync_limit(const struct nc_bench_opts *o);
size_t nc_bench_recv_offset(size_t bytes);
/* Iterations allowed by --iter R,V for a message of `bytes` (before the time cap). */
long nc_bench_iter_cap(const struct nc_bench_opts *o, size_t bytes);
/* Buffer pool geometry of one size: stride between buffers and how many rotate. */
void nc_bench_pool_geometry(const struct nc_bench_opts *o, size_t pool_min, size_t bytes,
                            size_t *stride, size_t *nbuf);
/* Apply an implementation's tunables through numacoll_param_set (after restoring the
 * values saved by nc_bench_params_save); returns 0 or -1 with err filled. */
int nc_bench_params_save(void);
int nc_bench_params_apply(const struct nc_bench_impl *impl, char *err, size_t errlen);
void nc_bench_params_restore(void);
void nc_bench_print_plan(FILE *out, const struct nc_bench_opts *o, int p, size_t llc,
                         const char *llc_source);

/* nc_bench_machine.c */
struct nc_bench_machine {
    char cpu[128];
    int cores, pus, numa_nodes;
    size_t llc;              /* bytes, 0 if unknown */
    char llc_source[64];     /* "hwloc L3", "sysconf", ... */
};
void nc_bench_machine_probe(struct nc_bench_machine *m);
/* The kernel's transparent huge page mode ("always", "madvise", "never"),
 * or "no THP" when the kernel has none. */
const char *nc_bench_thp_mode(void);

/* nc_bench_report.c */
struct nc_bench_result {
    double t_min, t_avg, t_max; /* microseconds */
    long iters;
    int fallback;               /* numacoll calls handed to PMPI during the timing */
    int valid;
};

struct nc_bench_results {
    int runs, nimpl_all, ncoll;
    /* [run][coll][impl][size]; impl indexes opts->impl then memcpy, reduce-kernel,
     * cma-copy, flag-sync, flag */
    struct nc_bench_result *r;
    int nsizes;
};

struct nc_bench_context {
    const struct nc_bench_opts *o;
    int p;
    char machine[256];      /* CPU model, cores, NUMA nodes */
    char mpi[160];          /* MPI library and version */
    char cache_policy[160]; /* off-cache pool or cache-resident */
    char notes[256];        /* timer, binding: one more header line when not empty */
    int nimpl_all;          /* opts impls + memcpy (+ reduce-kernel) (+ cma-copy) (+ flag-sync)
                               + flag */
    struct nc_bench_impl all[NC_BENCH_MAX_IMPLS + NC_BENCH_MAX_LIMITS];
    char setup[NC_BENCH_MAX_IMPLS + NC_BENCH_MAX_LIMITS][200]; /* numacoll team, per impl */
    /* the team's measured hand-off (ns; -1: hwloc's caches) and the threshold
     * it was judged by (NUMACOLL_CACHE_SHARED_NS), per impl */
    int probe_ns[NC_BENCH_MAX_IMPLS + NC_BENCH_MAX_LIMITS];
    int probe_limit[NC_BENCH_MAX_IMPLS + NC_BENCH_MAX_LIMITS];
};

int nc_bench_results_init(struct nc_bench_results *res, const struct nc_bench_context *ctx);
void nc_bench_results_free(struct nc_bench_results *res);
struct nc_bench_result *nc_bench_result_at(struct nc_bench_results *res, int run, int coll,
                                           int impl, int size);
/* Drop the runs with the smallest and largest t_max (3 runs or more), average the rest. */
void nc_bench_aggregate(struct nc_bench_results *res, int coll, int impl, int size,
                        struct nc_bench_result *out);
void nc_bench_fake_fill(struct nc_bench_results *res, const struct nc_bench_context *ctx);
void nc_bench_print_table(FILE *out, struct nc_bench_results *res,
                          const struct nc_bench_context *ctx);
int nc_bench_write_csv(const char *path, struct nc_bench_results *res,
                       const struct nc_bench_context *ctx, char *err, size_t errlen);
int nc_bench_run_plot(const char *csv, const char *png, const struct nc_bench_context *ctx,
                      char *err, size_t errlen);

#endif
