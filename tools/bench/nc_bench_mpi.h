/*
 * numacoll-bench: the MPI side (nc_bench_measure.c), used by main() only.
 */
#ifndef NC_BENCH_MPI_H
#define NC_BENCH_MPI_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "nc_bench.h"

struct nc_bench_mpi {
    const struct nc_bench_opts *o;
    int rank, p;
    MPI_Comm comm[NC_BENCH_MAX_IMPLS]; /* one per implementation of opts */
    unsigned char *pool, *dst;         /* this rank's buffers; dst: memcpy target, rank 0 */
    size_t pool_bytes, pool_min;       /* pool_min: 0 when cache-resident */
    /* flag and flag-sync: every rank maps one region of /dev/shm (flag_bytes):
     * flag's ping and pong (ranks 0 and 1), then the ranks' flag-sync words */
    MPI_Comm pair;
    void *flag_page;
    size_t flag_bytes;
    _Atomic uint64_t *ping, *pong, *sync_line;
    uint64_t flag_seq;
    long flag_iters; /* round trips, fixed in run 0 */
    int flag_ok;     /* on ranks 0 and 1 */
    uint64_t sync_seq; /* flag-sync calls so far, the same on every rank */
    int sync_ok;       /* every rank mapped the region, p > 1 */
    unsigned sync_spins; /* pauses before a flag-sync wait yields the CPU */
    /* cma-copy: every rank's pid and pool address; cma_ok when every rank could read
     * its neighbour's pool by process_vm_readv at set-up */
    int *pids;
    uint64_t *pools;
    int cma_ok;
    /* fixed in run 0, reused by the later runs: [coll][impl][size] */
    long iters[NC_BENCH_NCOLL][NC_BENCH_MAX_IMPLS + NC_BENCH_MAX_LIMITS][NC_BENCH_MAX_SIZES];
    int warm[NC_BENCH_NCOLL][NC_BENCH_MAX_IMPLS + NC_BENCH_MAX_LIMITS][NC_BENCH_MAX_SIZES];
};

/* Buffers (pool_min bytes per rank at least, when off-cache) and the flag region. */
int nc_bench_mpi_setup(struct nc_bench_mpi *b, const struct nc_bench_opts *o, size_t pool_min,
                       char *err, size_t errlen);
void nc_bench_mpi_teardown(struct nc_bench_mpi *b);

/* One measurement, collective over MPI_COMM_WORLD; the result is valid on rank 0.
 * c: position in opts->coll; impl: index in ctx->all; s: index in the size list. */
void nc_bench_measure(struct nc_bench_mpi *b, const struct nc_bench_context *ctx, int run, int c,
                      int impl, int s, struct nc_bench_result *out);
void nc_bench_measure_flag(struct nc_bench_mpi *b, int run, struct nc_bench_result *out);

/* Smallest difference of two back-to-back reads of the benchmark's clock, in ns. */
double nc_bench_timer_overhead_ns(void);

#endif
