/*
 * numacoll-bench: numacoll's collectives against the MPI library's own, in one
 * run, with the physical limits measured alongside. See bench/README.md.
 *
 *  1. parse the command line (any error: one line, exit 2, before MPI_Init);
 *  2. --dry-run prints the plan, --fake-timings the report on made-up times: no MPI;
 *  3. MPI_Init; rank 0 reads the machine (hwloc) and tells the others the LLC size;
 *  4. one communicator per implementation: native -> PMPI_Comm_dup; each numacoll
 *     configuration -> its tunables, MPI_Comm_dup, one MPI_Barrier (numacoll sets
 *     the communicator up on its first call, with the tunables of that moment),
 *     and every rank must then see it active;
 *  5. buffers and the flag page;
 *  6. runs x collectives x sizes x implementations, interleaved size by size (memcpy
 *     for the sized collectives, reduce-kernel for the reductions), the flag once
 *     per run;
 *  7. rank 0: table, summary, CSV; MPI_Finalize; then the plot (no fork inside MPI).
 */
#include "nc_bench_mpi.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nc_tool_abort.h"
#include "numacoll_mpi.h"
#include "nc_tool_launcher.h"

#ifndef NUMACOLL_VERSION
#define NUMACOLL_VERSION "unknown"
#endif

static int usage_error(const char *msg)
{
    if (nc_tool_launcher_rank() == 0)
        fprintf(stderr, "numacoll-bench: %s\n", msg);
    return nc_tool_exit_said(NC_BENCH_EXIT_USAGE);
}

/* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4";
 * "MPICH Version:\t4.0.2\nMPICH Release date: ...\nMPICH Device:\tch4:ucx..." -> "MPICH 4.0.2 (ch4:ucx)" */
static void mpi_library(char *out, size_t len)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int l = 0;
    MPI_Get_library_version(v, &l);
    v[l < (int)sizeof v ? l : (int)sizeof v - 1] = '\0';
    const char *ver = strstr(v, "MPICH Version:");
    if (ver) {
        char num[64] = "", dev[64] = "";
        sscanf(ver + 14, " %63s", num);
        const char *d = strstr(v, "MPICH Device:");
        if (d)
            sscanf(d + 13, " %63s", dev);
        snprintf(out, len, "MPICH %s%s%s%s", num, *dev ? " (" : "", dev, *dev ? ")" : "");
        return;
    }
    v[strcspn(v, ",\n")] = '\0';
    snprintf(out, len, "%.100s", v);
}

static void describe_cache(struct nc_bench_context *ctx, size_t llc, const char *src, size_t pool_min)
{
    char a[32], b[32], off[96] = "";
    if (ctx->o->buf_offset)
        snprintf(off, sizeof off, ", buffers %zu B past a page", ctx->o->buf_offset);
    if (ctx->o->thp)
        snprintf(off + strlen(off), sizeof off - strlen(off), ", huge pages asked for (%s)",
                 nc_bench_thp_mode());
    if (!ctx->o->off_cache) {
        snprintf(ctx->cache_policy, sizeof ctx->cache_policy,
                 "cache-resident (one buffer per rank%s)", off);
        return;
    }
    nc_bench_format_size(pool_min, a, sizeof a);
    nc_bench_format_size(llc, b, sizeof b);
    snprintf(ctx->cache_policy, sizeof ctx->cache_policy,
             "off-cache (pool of %s per rank, LLC %s from %s%s)", a, b, src, off);
}

static void build_impls(struct nc_bench_context *ctx)
{
    const struct nc_bench_opts *o = ctx->o;
    ctx->nimpl_all = o->nimpl;
    memcpy(ctx->all, o->impl, sizeof o->impl[0] * (size_t)o->nimpl);
    if (o->limits) {
        struct nc_bench_impl *m = &ctx->all[ctx->nimpl_all++];
        memset(m, 0, sizeof *m);
        m->kind = NC_IMPL_MEMCPY;
        snprintf(m->label, sizeof m->label, "memcpy");
        if (nc_bench_has_reduction(o)) {
            struct nc_bench_impl *k = &ctx->all[ctx->nimpl_all++];
            memset(k, 0, sizeof *k);
            k->kind = NC_IMPL_KERNEL;
            snprintf(k->label, sizeof k->label, "reduce-kernel");
        }
        if (nc_bench_has_copy_limit(o)) {
            struct nc_bench_impl *x = &ctx->all[ctx->nimpl_all++];
            memset(x, 0, sizeof *x);
            x->kind = NC_IMPL_CMA;
            snprintf(x->label, sizeof x->label, "cma-copy");
        }
        if (nc_bench_has_sync_limit(o)) {
            struct nc_bench_impl *y = &ctx->all[ctx->nimpl_all++];
            memset(y, 0, sizeof *y);
            y->kind = NC_IMPL_SYNC;
            snprintf(y->label, sizeof y->label, "flag-sync");
        }
        struct nc_bench_impl *f = &ctx->all[ctx->nimpl_all++];
        memset(f, 0, sizeof *f);
        f->kind = NC_IMPL_FLAG;
        snprintf(f->label, sizeof f->label, "flag");
    }
}

static int report(struct nc_bench_results *res, struct nc_bench_context *ctx)
{
    const struct nc_bench_opts *o = ctx->o;
    char err[NC_BENCH_ERRLEN];
    if (!o->csv || strcmp(o->csv, "-"))
        nc_bench_print_table(stdout, res, ctx);
    fflush(stdout);
    if (o->csv && nc_bench_write_csv(o->csv, res, ctx, err, sizeof err)) {
        fprintf(stderr, "numacoll-bench: %s\n", err);
        return 1;
    }
    return 0;
}

static int plot(struct nc_bench_results *res, struct nc_bench_context *ctx)
{
    const struct nc_bench_opts *o = ctx->o;
    char err[NC_BENCH_ERRLEN], tmp[] = "/tmp/numacoll-bench-XXXXXX.csv";
    const char *csv = o->csv;
    int rc = 0;
    if (!csv) {
        int fd = mkstemps(tmp, 4);
        if (fd < 0) {
            fprintf(stderr, "numacoll-bench: --plot: cannot create a temporary CSV\n");
            return NC_BENCH_EXIT_PLOT;
        }
        close(fd);
        if (nc_bench_write_csv(tmp, res, ctx, err, sizeof err))
            rc = NC_BENCH_EXIT_PLOT;
        csv = tmp;
    }
    if (!rc && nc_bench_run_plot(csv, o->plot, ctx, err, sizeof err)) {
        fprintf(stderr, "numacoll-bench: %s\n", err);
        rc = NC_BENCH_EXIT_PLOT;
    }
    if (!o->csv)
        unlink(tmp);
    return rc;
}

static int fake_main(struct nc_bench_context *ctx)
{
    struct nc_bench_results res;
    ctx->p = ctx->o->np ? ctx->o->np : 2;
    snprintf(ctx->machine, sizeof ctx->machine, "fake machine, 2 cores, 1 NUMA node");
    snprintf(ctx->mpi, sizeof ctx->mpi, "no MPI (--fake-timings)");
    size_t llc = ctx->o->cache_mib > 0 ? (size_t)(ctx->o->cache_mib * 1048576) : (size_t)32 << 20;
    describe_cache(ctx, llc, ctx->o->cache_mib > 0 ? "--off-cache" : "fake", 2 * llc);
    if (nc_bench_results_init(&res, ctx))
        return 1;
    nc_bench_fake_fill(&res, ctx);
    int rc = report(&res, ctx);
    if (!rc && ctx->o->plot)
        rc = plot(&res, ctx);
    nc_bench_results_free(&res);
    return rc;
}

/* 4. */
static int make_comms(struct nc_bench_mpi *b, struct nc_bench_context *ctx, int rank)
{
    const struct nc_bench_opts *o = ctx->o;
    char err[NC_BENCH_ERRLEN];
    for (int i = 0; i < o->nimpl; i++) {
        const struct nc_bench_impl *im = &o->impl[i];
        if (im->kind == NC_IMPL_NATIVE) {
            PMPI_Comm_dup(MPI_COMM_WORLD, &b->comm[i]);
            continue;
        }
        if (nc_bench_params_apply(im, err, sizeof err)) { /* checked at parse time already */
            if (rank == 0)
                fprintf(stderr, "numacoll-bench: %s\n", err);
            return -1;
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &b->comm[i]);
        MPI_Barrier(b->comm[i]);
        int active = numacoll_mpi_comm_active(b->comm[i]), all = active;
        PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (all != 1) {
            if (rank == 0) {
                char dis[16] = "?";
                numacoll_param_get("NUMACOLL_DISABLE", dis, sizeof dis, NULL);
                fprintf(stderr,
                        "numacoll-bench: numacoll is not active on the communicator of \"%s\" "
                        "(numacoll_mpi_comm_active = %d on rank 0, NUMACOLL_DISABLE=%s): its "
                        "calls would measure the MPI library; NUMACOLL_VERBOSE=1 says why\n",
                        im->label, active, dis);
            }
            return -1;
        }
        numacoll_team_info_t ti;
        numacoll_team_t *team = numacoll_mpi_comm_team(b->comm[i]);
        if (rank == 0 && team && numacoll_team_info(team, &ti) == 0) {
            char bar[32] = "", cache[48], lim[32] = "";
            numacoll_param_get("NUMACOLL_BARRIER_ALG", bar, sizeof bar, NULL);
            numacoll_param_get("NUMACOLL_CACHE_SHARED_NS", lim, sizeof lim, NULL);
            ctx->probe_ns[i] = ti.cache_measured ? ti.handoff_ns : -1;
            ctx->probe_limit[i] = atoi(lim);
            /* what streamed stores and the reduce's CMA rule went by */
            if (ti.cache_measured)
                snprintf(cache, sizeof cache, "%s (measured, %d ns)",
                         ti.cache_shared ? "shared" : "not shared", ti.handoff_ns);
            else
                snprintf(cache, sizeof cache, "%s (hwloc)",
                         ti.cache_shared == 1 ? "shared"
                         : ti.cache_shared == 0 ? "not shared" : "unknown");
            snprintf(ctx->setup[i], sizeof ctx->setup[i],
                     "tree=%s s=%zu q=%zu f=%zu layout=%s barrier.alg=%s caches=%s "
                     "stores=%s%s",
                     ti.tree, ti.queue_len, ti.sets, ti.frag_size, ti.layout, bar, cache,
                     ti.shm_nt ? "streamed" : "cached",
                     ti.oversubscribed ? " (oversubscribed)" : "");
        }
    }
    nc_bench_params_restore();
    return 0;
}

int main(int argc, char **argv)
{
    static struct nc_bench_opts o;
    static struct nc_bench_context ctx;
    static struct nc_bench_mpi b;
    char err[NC_BENCH_ERRLEN];

    /* 1. */
    if (nc_bench_opts_parse(argc, argv, &o, err, sizeof err))
        return usage_error(err);
    /* --help, --version: said once under a launcher, by its rank 0 */
    if (o.help) {
        if (nc_tool_launcher_rank() == 0)
            nc_bench_usage(stdout);
        return 0;
    }
    if (o.version) {
        if (nc_tool_launcher_rank() == 0)
            printf("numacoll-bench %s (numacoll %s)\n", NUMACOLL_VERSION, numacoll_version());
        return 0;
    }
    ctx.o = &o;
    build_impls(&ctx);

    /* 2. */
    if (o.dry_run) {
        struct nc_bench_machine m = {0};
        if (o.off_cache && o.cache_mib <= 0)
            nc_bench_machine_probe(&m);
        nc_bench_print_plan(stdout, &o, o.np, m.llc, m.llc_source);
        return 0;
    }
    if (o.fake)
        return fake_main(&ctx);

    /* 3. */
    MPI_Init(&argc, &argv);
    nc_tool_check_launcher("numacoll-bench");
    int rank, p;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &p);
    ctx.p = p;
    if (o.root >= p) {
        if (rank == 0)
            fprintf(stderr, "numacoll-bench: --root %d: there are only %d ranks\n", o.root, p);
        MPI_Finalize();
        return NC_BENCH_EXIT_USAGE;
    }
    struct nc_bench_machine m = {0};
    unsigned long long llc = 0;
    if (rank == 0) {
        nc_bench_machine_probe(&m);
        llc = o.cache_mib > 0 ? (unsigned long long)(o.cache_mib * 1048576.0) : m.llc;
        if (o.cache_mib > 0)
            snprintf(m.llc_source, sizeof m.llc_source, "--off-cache");
        snprintf(ctx.machine, sizeof ctx.machine, "%s, %d core%s, %d NUMA node%s", m.cpu, m.cores,
                 m.cores == 1 ? "" : "s", m.numa_nodes, m.numa_nodes == 1 ? "" : "s");
        mpi_library(ctx.mpi, sizeof ctx.mpi);
    }
    PMPI_Bcast(&llc, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    size_t pool_min = 2 * (size_t)llc;
    long phys = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (o.off_cache && phys > 0 && page > 0 && (double)pool_min * p > (double)phys * page / 4) {
        /* p pools of 2 x LLC would not fit in a quarter of the memory: the LLC is shared, so
         * the ranks' pools together still exceed it several times over */
        size_t cap = (size_t)((double)phys * page / 4 / p);
        pool_min = cap > llc / 2 ? cap : llc / 2;
        if (rank == 0)
            fprintf(stderr, "numacoll-bench: --off-cache: pool per rank reduced to %zu MiB "
                    "(p x 2 x LLC exceeds a quarter of the memory)\n", pool_min >> 20);
    }
    if (rank == 0) {
        describe_cache(&ctx, (size_t)llc, m.llc_source, pool_min);
        cpu_set_t set;
        int bound = sched_getaffinity(0, sizeof set, &set) == 0 &&
                    CPU_COUNT(&set) < sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(ctx.notes, sizeof ctx.notes,
                 "%d ranks on %d cores%s, rank 0 %s; clock_gettime read %.0f ns (not subtracted)",
                 p, m.cores, p > m.cores ? " (oversubscribed)" : "", bound ? "bound" : "unbound",
                 nc_bench_timer_overhead_ns());
    }

    /* 4. */
    int rc = make_comms(&b, &ctx, rank);
    /* 5. */
    if (!rc && nc_bench_mpi_setup(&b, &o, pool_min, err, sizeof err)) {
        if (rank == 0)
            fprintf(stderr, "numacoll-bench: %s\n", err);
        rc = -1;
    }
    if (rc) {
        MPI_Finalize();
        return 1;
    }

    /* 6. */
    struct nc_bench_results res = {0};
    if (rank == 0 && nc_bench_results_init(&res, &ctx)) {
        fprintf(stderr, "numacoll-bench: out of memory\n");
        nc_tool_abort(MPI_COMM_WORLD, 1);
    }
    struct nc_bench_result scratch, *out;
    int flag_impl = o.limits ? ctx.nimpl_all - 1 : -1;
    for (int run = 0; run < o.runs; run++) {
        double t0 = MPI_Wtime();
        struct nc_bench_result flag = {0};
        if (flag_impl >= 0)
            nc_bench_measure_flag(&b, run, &flag);
        for (int c = 0; c < o.ncoll; c++) {
            const size_t *sizes;
            int ns = nc_bench_coll_sizes(&o, o.coll[c], &sizes);
            if (rank == 0 && flag_impl >= 0)
                *nc_bench_result_at(&res, run, c, flag_impl, 0) = flag;
            for (int s = 0; s < ns; s++)
                for (int i = 0; i < ctx.nimpl_all; i++) {
                    const struct nc_bench_impl *im = &ctx.all[i];
                    int red = nc_bench_coll_is_reduction(o.coll[c]);
                    if (im->kind == NC_IMPL_FLAG ||
                        (im->kind == NC_IMPL_MEMCPY && o.coll[c] != NC_BENCH_BCAST && !red) ||
                        (im->kind == NC_IMPL_KERNEL && !red) ||
                        (im->kind == NC_IMPL_CMA &&
                         (!b.cma_ok || !nc_bench_coll_has_copy_limit(o.coll[c]))) ||
                        (im->kind == NC_IMPL_SYNC &&
                         (!b.sync_ok || !nc_bench_coll_has_sync_limit(o.coll[c]))))
                        continue;
                    out = rank == 0 ? nc_bench_result_at(&res, run, c, i, s) : &scratch;
                    nc_bench_measure(&b, &ctx, run, c, i, s, out);
                }
        }
        if (rank == 0 && !o.quiet)
            fprintf(stderr, "numacoll-bench: run %d/%d done in %.1f s\n", run + 1, o.runs,
                    MPI_Wtime() - t0);
    }

    /* 7. */
    rc = rank == 0 ? report(&res, &ctx) : 0;
    for (int i = 0; i < o.nimpl; i++) {
        if (o.impl[i].kind == NC_IMPL_NATIVE)
            PMPI_Comm_free(&b.comm[i]);
        else
            MPI_Comm_free(&b.comm[i]);
    }
    nc_bench_mpi_teardown(&b);
    PMPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0 && !rc && o.plot)
        rc = plot(&res, &ctx);
    if (rank == 0)
        nc_bench_results_free(&res);
    return rc;
}
