/*
 * From the measured runs to what the user reads: one result per (collective,
 * implementation, size) after dropping the runs with the smallest and the largest
 * t_max (the paper's 5 runs -> 3), the table with ratios to the native MPI and
 * multiples of the in-run limits (memcpy, flag; the reduce-kernel row shows its own
 * multiple of memcpy), a summary by size range, the CSV and the plot.
 * MPI-free: only rank 0 calls it, and --fake-timings runs it with no MPI at all.
 */
#include "nc_bench.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nc_tool_data.h"

extern char **environ;

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return -1;
}

int nc_bench_results_init(struct nc_bench_results *res, const struct nc_bench_context *ctx)
{
    const struct nc_bench_opts *o = ctx->o;
    res->runs = o->runs;
    res->ncoll = o->ncoll;
    res->nimpl_all = ctx->nimpl_all;
    res->nsizes = o->nsizes > 0 ? o->nsizes : 1;
    size_t n = (size_t)res->runs * (size_t)res->ncoll * (size_t)res->nimpl_all * (size_t)res->nsizes;
    res->r = calloc(n, sizeof *res->r);
    return res->r ? 0 : -1;
}

void nc_bench_results_free(struct nc_bench_results *res)
{
    free(res->r);
    res->r = NULL;
}

struct nc_bench_result *nc_bench_result_at(struct nc_bench_results *res, int run, int coll,
                                           int impl, int size)
{
    size_t i = (((size_t)run * (size_t)res->ncoll + (size_t)coll) * (size_t)res->nimpl_all +
                (size_t)impl) * (size_t)res->nsizes + (size_t)size;
    return &res->r[i];
}

void nc_bench_aggregate(struct nc_bench_results *res, int coll, int impl, int size,
                        struct nc_bench_result *out)
{
    memset(out, 0, sizeof *out);
    int n = 0, lo = -1, hi = -1;
    for (int r = 0; r < res->runs; r++) {
        const struct nc_bench_result *x = nc_bench_result_at(res, r, coll, impl, size);
        if (!x->valid)
            continue;
        n++;
        if (lo < 0 || x->t_max < nc_bench_result_at(res, lo, coll, impl, size)->t_max)
            lo = r;
        if (hi < 0 || x->t_max >= nc_bench_result_at(res, hi, coll, impl, size)->t_max)
            hi = r;
    }
    if (!n)
        return;
    int drop = n >= 3; /* lo is the first run with the smallest t_max, hi the last largest */
    int k = 0;
    for (int r = 0; r < res->runs; r++) {
        const struct nc_bench_result *x = nc_bench_result_at(res, r, coll, impl, size);
        if (!x->valid || (drop && (r == lo || r == hi)))
            continue;
        out->t_min += x->t_min;
        out->t_avg += x->t_avg;
        out->t_max += x->t_max;
        out->iters = x->iters;
        out->fallback |= x->fallback;
        k++;
    }
    for (int r = 0; r < res->runs; r++)
        out->fallback |= nc_bench_result_at(res, r, coll, impl, size)->fallback;
    out->t_min /= k;
    out->t_avg /= k;
    out->t_max /= k;
    out->valid = 1;
}

static double stat_of(const struct nc_bench_result *x, enum nc_bench_stat s)
{
    return s == NC_STAT_MIN ? x->t_min : s == NC_STAT_AVG ? x->t_avg : x->t_max;
}

/* ---- made-up times for the format tests ------------------------------------------- */

void nc_bench_fake_fill(struct nc_bench_results *res, const struct nc_bench_context *ctx)
{
    const struct nc_bench_opts *o = ctx->o;
    int p = ctx->p;
    for (int r = 0; r < res->runs; r++)
        for (int c = 0; c < o->ncoll; c++) {
            const size_t *sizes;
            int ns = nc_bench_coll_sizes(o, o->coll[c], &sizes);
            int barrier = o->coll[c] == NC_BENCH_BARRIER;
            int red = nc_bench_coll_is_reduction(o->coll[c]);
            double slow = o->coll[c] == NC_BENCH_ALLREDUCE ? 2 : red ? 1.5 : 1;
            for (int i = 0; i < ctx->nimpl_all; i++)
                for (int s = 0; s < ns; s++) {
                    const struct nc_bench_impl *im = &ctx->all[i];
                    double m = (double)sizes[s], t;
                    if (im->kind == NC_IMPL_NATIVE)
                        t = barrier ? 0.23 * (p > 2 ? 30 : 1)
                                    : slow * (0.25 + m / 6000.0) * (p > 2 ? 3 : 1);
                    else if (im->kind == NC_IMPL_NUMACOLL)
                        t = (barrier ? 0.1 : slow * (0.08 + m / 9000.0)) * (1 + 0.05 * i);
                    else if (im->kind == NC_IMPL_MEMCPY)
                        t = barrier ? -1 : 0.002 + m / 8500.0;
                    else if (im->kind == NC_IMPL_KERNEL)
                        t = red ? 0.003 + m / 7000.0 : -1;
                    else if (im->kind == NC_IMPL_CMA)
                        t = p > 1 && nc_bench_coll_has_copy_limit(o->coll[c]) ? 1.7 + m / 7000.0
                                                                             : -1;
                    else if (im->kind == NC_IMPL_SYNC)
                        t = p > 1 && nc_bench_coll_has_sync_limit(o->coll[c]) ? 0.06 * slow : -1;
                    else
                        t = s == 0 ? 0.052 : -1;
                    if (t < 0)
                        continue;
                    t *= 1 + 0.02 * ((r * 7 + i * 3 + s) % 5 - 2);
                    struct nc_bench_result *x = nc_bench_result_at(res, r, c, i, s);
                    const int one = im->kind == NC_IMPL_MEMCPY || im->kind == NC_IMPL_KERNEL ||
                                    im->kind == NC_IMPL_FLAG;
                    x->t_min = one ? t : 0.9 * t;
                    x->t_avg = t;
                    x->t_max = one ? t : 1.1 * t;
                    x->iters = im->kind == NC_IMPL_FLAG ? o->iter_max : nc_bench_iter_cap(o, sizes[s]);
                    x->valid = 1;
                }
        }
}

/* ---- table and summary ----------------------------------------------------------- */

static int find_kind(const struct nc_bench_context *ctx, enum nc_bench_kind k)
{
    for (int i = 0; i < ctx->nimpl_all; i++)
        if (ctx->all[i].kind == k)
            return i;
    return -1;
}

static void fmt_ratio(char *buf, size_t len, double num, double den)
{
    if (den > 0 && num >= 0)
        snprintf(buf, len, "%.2f", num / den);
    else
        snprintf(buf, len, "-");
}

static const struct { size_t lo, hi; } ranges[] = {
    {0, 256}, {257, 65536}, {65537, 524288}, {524289, (size_t)-1},
};

/* A column of the size-range summary: every numacoll configuration, and cma-copy (the
 * single copy with nothing else) and flag-sync (the waits with nothing else) where they
 * were measured. */
static int summary_column(struct nc_bench_results *res, const struct nc_bench_context *ctx, int c,
                          int i)
{
    if (ctx->all[i].kind == NC_IMPL_NUMACOLL)
        return 1;
    if (ctx->all[i].kind != NC_IMPL_CMA && ctx->all[i].kind != NC_IMPL_SYNC)
        return 0;
    struct nc_bench_result x;
    nc_bench_aggregate(res, c, i, 0, &x);
    return x.valid;
}

static void print_summary(FILE *out, struct nc_bench_results *res, const struct nc_bench_context *ctx,
                          int c, int lw)
{
    const struct nc_bench_opts *o = ctx->o;
    const char *st = nc_bench_stat_name(o->stat);
    int nat = find_kind(ctx, NC_IMPL_NATIVE), mc = find_kind(ctx, NC_IMPL_MEMCPY);
    int fl = find_kind(ctx, NC_IMPL_FLAG);
    const size_t *sizes;
    int ns = nc_bench_coll_sizes(o, o->coll[c], &sizes);
    int any = 0;
    for (int i = 0; i < ctx->nimpl_all; i++)
        any |= ctx->all[i].kind == NC_IMPL_NUMACOLL;
    if (!any)
        return;
    struct nc_bench_result fr = {0};
    if (fl >= 0)
        nc_bench_aggregate(res, c, fl, 0, &fr);
    if (o->coll[c] == NC_BENCH_BARRIER) {
        struct nc_bench_result nr = {0};
        if (nat >= 0)
            nc_bench_aggregate(res, c, nat, 0, &nr);
        fprintf(out, "# summary %s: t_%s / native, and x flag\n", nc_bench_coll_name(o->coll[c]), st);
        for (int i = 0; i < ctx->nimpl_all; i++) {
            if (ctx->all[i].kind != NC_IMPL_NUMACOLL)
                continue;
            struct nc_bench_result x;
            char r1[32], r2[32];
            nc_bench_aggregate(res, c, i, 0, &x);
            fmt_ratio(r1, sizeof r1, stat_of(&x, o->stat), nr.valid ? stat_of(&nr, o->stat) : -1);
            fmt_ratio(r2, sizeof r2, stat_of(&x, o->stat), fr.valid ? fr.t_max : -1);
            fprintf(out, "#   %-*s %8s x native %8s x flag\n", lw, ctx->all[i].label, r1, r2);
        }
        return;
    }
    fprintf(out, "# summary %s: geometric mean of t_%s(impl) / t_%s(native) by size range\n",
            nc_bench_coll_name(o->coll[c]), st, st);
    fprintf(out, "#   %-20s", "sizes");
    for (int i = 0; i < ctx->nimpl_all; i++)
        if (summary_column(res, ctx, c, i))
            fprintf(out, " %*s", lw, ctx->all[i].label);
    fprintf(out, "\n");
    for (size_t g = 0; g <= sizeof ranges / sizeof ranges[0]; g++) {
        size_t lo = g < sizeof ranges / sizeof ranges[0] ? ranges[g].lo : 0;
        size_t hi = g < sizeof ranges / sizeof ranges[0] ? ranges[g].hi : (size_t)-1;
        int first = -1, last = -1;
        for (int s = 0; s < ns; s++)
            if (sizes[s] >= lo && sizes[s] <= hi) {
                if (first < 0)
                    first = s;
                last = s;
            }
        if (first < 0)
            continue;
        char name[64], a[24], b[24];
        nc_bench_format_size(sizes[first], a, sizeof a);
        nc_bench_format_size(sizes[last], b, sizeof b);
        if (g == sizeof ranges / sizeof ranges[0])
            snprintf(name, sizeof name, "all sizes");
        else if (first == last)
            snprintf(name, sizeof name, "%s", a);
        else
            snprintf(name, sizeof name, "%s - %s", a, b);
        fprintf(out, "#   %-20s", name);
        for (int i = 0; i < ctx->nimpl_all; i++) {
            if (!summary_column(res, ctx, c, i))
                continue;
            double lsum = 0;
            int n = 0;
            for (int s = first; s <= last && nat >= 0; s++) {
                struct nc_bench_result x, y;
                nc_bench_aggregate(res, c, i, s, &x);
                nc_bench_aggregate(res, c, nat, s, &y);
                if (x.valid && y.valid && stat_of(&x, o->stat) > 0 && stat_of(&y, o->stat) > 0) {
                    lsum += log(stat_of(&x, o->stat) / stat_of(&y, o->stat));
                    n++;
                }
            }
            if (n)
                fprintf(out, " %*.2f", lw, exp(lsum / n));
            else
                fprintf(out, " %*s", lw, "-");
        }
        fprintf(out, "\n");
    }
    if (mc < 0)
        return;
    /* the physical limits named by the targets: memcpy for 1 MiB and above, flag for small;
     * for the reductions also one core's reduction kernel for 1 MiB and above */
    int kern = nc_bench_coll_is_reduction(o->coll[c]) ? find_kind(ctx, NC_IMPL_KERNEL) : -1;
    for (int lim = 0; lim < (kern >= 0 ? 3 : 2); lim++) {
        size_t lo = lim ? 1u << 20 : 0, hi = lim ? (size_t)-1 : 256;
        int any_size = 0;
        for (int s = 0; s < ns; s++)
            any_size |= sizes[s] >= lo && sizes[s] <= hi;
        if (!any_size || (!lim && !fr.valid))
            continue;
        fprintf(out, "#   %-20s", lim == 2 ? "x kernel, >= 1 MiB" : lim ? "x memcpy, >= 1 MiB"
                                                                      : "x flag, <= 256 B");
        for (int i = 0; i < ctx->nimpl_all; i++) {
            if (!summary_column(res, ctx, c, i))
                continue;
            double lsum = 0;
            int n = 0;
            for (int s = 0; s < ns; s++) {
                if (sizes[s] < lo || sizes[s] > hi)
                    continue;
                struct nc_bench_result x, y;
                nc_bench_aggregate(res, c, i, s, &x);
                if (lim)
                    nc_bench_aggregate(res, c, lim == 2 ? kern : mc, s, &y);
                else
                    y = fr;
                if (x.valid && y.valid && stat_of(&x, o->stat) > 0 && y.t_max > 0) {
                    lsum += log(stat_of(&x, o->stat) / y.t_max);
                    n++;
                }
            }
            if (n)
                fprintf(out, " %*.2f", lw, exp(lsum / n));
            else
                fprintf(out, " %*s", lw, "-");
        }
        fprintf(out, "\n");
    }
}

void nc_bench_print_table(FILE *out, struct nc_bench_results *res, const struct nc_bench_context *ctx)
{
    const struct nc_bench_opts *o = ctx->o;
    int nat = find_kind(ctx, NC_IMPL_NATIVE), mc = find_kind(ctx, NC_IMPL_MEMCPY);
    int fl = find_kind(ctx, NC_IMPL_FLAG);
    int lw = 8;
    for (int i = 0; i < ctx->nimpl_all; i++)
        if ((int)strlen(ctx->all[i].label) > lw)
            lw = (int)strlen(ctx->all[i].label);
    for (int c = 0; c < o->ncoll; c++) {
        const size_t *sizes;
        int ns = nc_bench_coll_sizes(o, o->coll[c], &sizes);
        int fallback = 0;
        struct nc_bench_result fr = {0};
        if (fl >= 0)
            nc_bench_aggregate(res, c, fl, 0, &fr);
        fprintf(out, "# numacoll-bench: %s, p=%d | %s | %s\n", nc_bench_coll_name(o->coll[c]), ctx->p,
                ctx->mpi, ctx->machine);
        fprintf(out, "# %s; root %s%d; %d run%s%s; ratios of t_%s\n", ctx->cache_policy,
                o->root_shift ? "shifting from " : "", o->root, o->runs, o->runs > 1 ? "s" : "",
                o->runs >= 3 ? " (min and max of t_max dropped)" : "", nc_bench_stat_name(o->stat));
        if (ctx->notes[0])
            fprintf(out, "# %s\n", ctx->notes);
        const enum nc_bench_coll cc = o->coll[c];
        if (o->imbalance > 0 && (cc == NC_BENCH_GATHERV || cc == NC_BENCH_SCATTERV ||
                                 cc == NC_BENCH_ALLGATHERV || cc == NC_BENCH_ALLTOALLV))
            fprintf(out, "# --imbalance %g: bytes is the largest block; rank k's block is bytes x "
                    "(1 - %g k / (p - 1))\n", o->imbalance, o->imbalance);
        if (nc_bench_coll_is_reduction(o->coll[c]))
            fprintf(out, "# %s on %s: bytes = count x %zu; the first call's result of every size "
                    "checked; reduce-kernel: one core's numacoll_reduce_local (inout op= in)\n",
                    nc_bench_op_mpi_name(o->op), nc_bench_type_mpi_name(o->type),
                    nc_bench_type_bytes(o->type));
        for (int i = 0; i < ctx->nimpl_all; i++)
            if (ctx->setup[i][0])
                fprintf(out, "# %s: team %s\n", ctx->all[i].label, ctx->setup[i]);
        if (fr.valid)
            fprintf(out, "# flag: one-way cache-line hand-off between ranks 0 and 1: %.3f us\n",
                    fr.t_max);
        /* a team that measured its caches at creation, and a flag that now
         * says otherwise, not just across the threshold but 1.5 times apart:
         * the CPUs moved in between (a VM's host) */
        for (int i = 0; i < ctx->nimpl_all && fr.valid; i++) {
            const double a = ctx->probe_ns[i], f = fr.t_max * 1e3, lim = ctx->probe_limit[i];
            if (ctx->setup[i][0] && a >= 0 && (a < lim) != (f < lim) &&
                (a > 1.5 * f || f > 1.5 * a))
                fprintf(out, "# %s: the team measured %d ns at creation, the flag %.0f ns: the "
                        "CPUs moved in between; the rows ran with the team's choice "
                        "(NUMACOLL_CACHE_PROBE, docs/transport.md)\n",
                        ctx->all[i].label, ctx->probe_ns[i], fr.t_max * 1e3);
        }
        fprintf(out, "# %9s %8s %-*s %11s %11s %11s %9s %9s %8s\n", "bytes", "iter", lw, "impl",
                "t_min_us", "t_avg_us", "t_max_us", "vs_native", "x_memcpy", "x_flag");
        for (int s = 0; s < ns; s++) {
            struct nc_bench_result nr = {0}, mr = {0};
            if (nat >= 0)
                nc_bench_aggregate(res, c, nat, s, &nr);
            if (mc >= 0)
                nc_bench_aggregate(res, c, mc, s, &mr);
            for (int i = 0; i < ctx->nimpl_all; i++) {
                const struct nc_bench_impl *im = &ctx->all[i];
                struct nc_bench_result x;
                if (im->kind == NC_IMPL_FLAG)
                    continue;
                nc_bench_aggregate(res, c, i, s, &x);
                if (!x.valid)
                    continue;
                char rn[32] = "-", rm[32] = "-", rf[32] = "-";
                double v = stat_of(&x, o->stat);
                if ((im->kind == NC_IMPL_NUMACOLL || im->kind == NC_IMPL_CMA ||
                     im->kind == NC_IMPL_SYNC) && nr.valid)
                    fmt_ratio(rn, sizeof rn, v, stat_of(&nr, o->stat));
                if (im->kind != NC_IMPL_MEMCPY) {
                    if (mr.valid && sizes[s] > 0)
                        fmt_ratio(rm, sizeof rm, v, mr.t_max);
                    /* latency regime only; the kernel row is a bandwidth reference */
                    if (fr.valid && sizes[s] <= 4096 && im->kind != NC_IMPL_KERNEL)
                        fmt_ratio(rf, sizeof rf, v, fr.t_max);
                }
                fprintf(out, "  %9zu %8ld %-*s %11.3f %11.3f %11.3f %9s %9s %8s%s\n", sizes[s],
                        x.iters, lw, im->label, x.t_min, x.t_avg, x.t_max, rn, rm, rf,
                        x.fallback ? " *" : "");
                fallback |= x.fallback;
            }
        }
        if (fallback)
            fprintf(out, "# *: numacoll handed some of these calls to the MPI library (PMPI)\n");
        print_summary(out, res, ctx, c, lw < 8 ? 8 : lw);
        if (c + 1 < o->ncoll)
            fprintf(out, "\n");
    }
}

/* ---- CSV ------------------------------------------------------------------------ */

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int nc_bench_write_csv(const char *path, struct nc_bench_results *res,
                       const struct nc_bench_context *ctx, char *err, size_t errlen)
{
    const struct nc_bench_opts *o = ctx->o;
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f)
        return fail(err, errlen, "--csv %s: %s", path, strerror(errno));
    fprintf(f, "collective,impl,p,bytes,iterations,t_min_us,t_avg_us,t_max_us\n");
    for (int c = 0; c < o->ncoll; c++) {
        const size_t *sizes;
        int ns = nc_bench_coll_sizes(o, o->coll[c], &sizes);
        for (int s = 0; s < ns; s++)
            for (int i = 0; i < ctx->nimpl_all; i++) {
                struct nc_bench_result x;
                nc_bench_aggregate(res, c, i, s, &x);
                if (!x.valid)
                    continue;
                fprintf(f, "%s,", nc_bench_coll_name(o->coll[c]));
                csv_field(f, ctx->all[i].label);
                fprintf(f, ",%d,%zu,%ld,%.4f,%.4f,%.4f\n", ctx->p, sizes[s], x.iters, x.t_min,
                        x.t_avg, x.t_max);
            }
    }
    int bad = ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        fflush(f);
    if (bad)
        return fail(err, errlen, "--csv %s: %s", path, "write error");
    return 0;
}

/* ---- plot: bench/plot.py, after MPI_Finalize (no fork inside MPI) ----------------- */

#ifndef NC_BENCH_PLOT_SCRIPT
#define NC_BENCH_PLOT_SCRIPT "bench/plot.py"
#endif
#ifndef NC_BENCH_PLOT_SCRIPT_INSTALLED
#define NC_BENCH_PLOT_SCRIPT_INSTALLED "/usr/local/share/numacoll/plot.py"
#endif

int nc_bench_run_plot(const char *csv, const char *png, const struct nc_bench_context *ctx,
                      char *err, size_t errlen)
{
    const char *script = getenv("NUMACOLL_BENCH_PLOT_SCRIPT");
    struct stat st;
    char found[PATH_MAX + 64];
    if (!script || !*script) {
        /* the source tree's, else the installed one found from this program's place */
        nc_tool_data_path("plot.py", NC_BENCH_PLOT_SCRIPT_INSTALLED, found, sizeof found);
        script = stat(NC_BENCH_PLOT_SCRIPT, &st) == 0 ? NC_BENCH_PLOT_SCRIPT : found;
    }
    char title[700], colls[96] = "";
    for (int c = 0; c < ctx->o->ncoll; c++) {
        strcat(colls, c ? "+" : "");
        strcat(colls, nc_bench_coll_name(ctx->o->coll[c]));
    }
    if (nc_bench_has_reduction(ctx->o)) {
        strcat(colls, " (");
        strcat(colls, nc_bench_op_mpi_name(ctx->o->op));
        strcat(colls, " on ");
        strcat(colls, nc_bench_type_mpi_name(ctx->o->type));
        strcat(colls, ")");
    }
    snprintf(title, sizeof title, "numacoll-bench %s, p=%d | %s | %s | %s", colls, ctx->p,
             ctx->machine, ctx->mpi, ctx->cache_policy);
    /* Debian's python3-matplotlib belongs to /usr/bin/python3, which a pyenv or venv
     * python3 earlier in PATH does not see */
    const char *py = getenv("NUMACOLL_BENCH_PYTHON");
    if (!py || !*py)
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char *argv[] = {(char *)py, (char *)script, "--csv", (char *)csv, "--out", (char *)png,
                    "--title", title, "--stat", (char *)nc_bench_stat_name(ctx->o->stat), NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, py, NULL, NULL, argv, environ);
    if (rc)
        return fail(err, errlen, "--plot: cannot start %s: %s", py, strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        char what[64];
        snprintf(what, sizeof what, "%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return fail(err, errlen, "--plot: %s failed (exit %s); is python3-matplotlib installed?",
                    script, what);
    }
    return 0;
}
