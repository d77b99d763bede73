/*
 * nc_fuzz targets of the tools: numacoll-bind's --cpus lists and option vectors
 * (with the placement they lead to on fixed synthetic topologies) and
 * numacoll-bench's option vectors. See nc_fuzz_main.c for the invariants.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/nc_config.h"
#include "nc_bench.h"
#include "nc_bind.h"
#include "nc_fuzz.h"
#include "numacoll.h"

/* ---- option vectors ----------------------------------------------------------------- */

#define MAXARGS 40

typedef struct fz_argv {
    int argc;
    char *argv[MAXARGS + 2];
    char store[MAXARGS + 1][600];
} fz_argv_t;

static void av_reset(fz_argv_t *a, const char *prog)
{
    a->argc = 0;
    snprintf(a->store[0], sizeof a->store[0], "%s", prog);
    a->argv[a->argc++] = a->store[0];
    a->argv[1] = NULL;
}

static void av_add(fz_argv_t *a, const char *s)
{
    if (a->argc >= MAXARGS)
        return;
    snprintf(a->store[a->argc], sizeof a->store[0], "%s", s);
    a->argv[a->argc] = a->store[a->argc];
    a->argv[++a->argc] = NULL;
}

/* The vector as one line for failure reports: words separated by blanks, each in
 * single quotes when it is not plain. */
static void av_desc(const fz_argv_t *a)
{
    static fz_buf_t d;
    fz_clear(&d);
    for (int i = 1; i < a->argc; i++) {
        const char *w = a->argv[i];
        int plain = *w != '\0';
        for (const char *c = w; *c; c++)
            if (!isalnum((unsigned char)*c) && !strchr("-_=:,./+", *c))
                plain = 0;
        fz_printf(&d, i > 1 ? plain ? " %s" : " '%s'" : plain ? "%s" : "'%s'", w);
    }
    fz_set_input_desc(d.b, d.len);
}

/* Token-level mutations: drop, duplicate, swap, split "--x=v", join "--x v", or a
 * byte-level mutation of one word. */
static void av_mutate(fz_rng_t *r, fz_argv_t *a, const char *const *dict, size_t ndict)
{
    int n = 1 + (int)fz_below(r, 3);
    for (int m = 0; m < n && a->argc > 1; m++) {
        int i = 1 + (int)fz_below(r, (uint64_t)a->argc - 1);
        switch (fz_below(r, 6)) {
        case 0: /* drop */
            for (int j = i; j < a->argc; j++) {
                memcpy(a->store[j], a->store[j + 1], sizeof a->store[0]);
                a->argv[j] = a->store[j];
            }
            a->argc--;
            a->argv[a->argc] = NULL;
            break;
        case 1: { /* duplicate */
            char w[600];
            snprintf(w, sizeof w, "%s", a->argv[i]);
            av_add(a, w);
            break;
        }
        case 2: { /* swap */
            int j = 1 + (int)fz_below(r, (uint64_t)a->argc - 1);
            char w[600];
            memcpy(w, a->store[i], sizeof w);
            memcpy(a->store[i], a->store[j], sizeof w);
            memcpy(a->store[j], w, sizeof w);
            break;
        }
        case 3: /* a dictionary word */
            av_add(a, dict[fz_below(r, ndict)]);
            break;
        default: { /* mutate one word */
            static fz_buf_t w;
            fz_clear(&w);
            fz_puts(&w, a->argv[i]);
            fz_mutate(r, &w, dict, ndict, NULL, 0);
            snprintf(a->store[i], sizeof a->store[0], "%s", w.b);
            break;
        }
        }
    }
}

/* Names of the options of a vector ("--np" of "--np=4", "-c"), for message checks. */
static void option_names(const fz_argv_t *a, const char **names, char store[][64], int max)
{
    int n = 0;
    for (int i = 1; i < a->argc && n < max - 2; i++) {
        const char *w = a->argv[i];
        if (w[0] != '-' || !w[1])
            continue;
        snprintf(store[n], 64, "%.*s", (int)strcspn(w, "="), w);
        names[n] = store[n];
        n++;
    }
    names[n] = NULL;
}

/* ---- target: --cpus lists ------------------------------------------------------------ */

/* Reference expansion, written from the grammar in docs/bind.md and nc_bind_options.c:
 * list := item {',' item}; item := number ['-' number [':' stride]]; numbers decimal
 * 0..INT_MAX; stride >= 1; at most NC_BIND_MAX_LIST entries. *errpos: the 1-based
 * position the message must name. */
static int ref_number(const char *t, size_t *i, long *v, size_t *errpos)
{
    size_t start = *i;
    if (!isdigit((unsigned char)t[*i])) {
        *errpos = *i + 1;
        return -1;
    }
    long x = 0;
    for (; isdigit((unsigned char)t[*i]); (*i)++) {
        x = x * 10 + (t[*i] - '0');
        if (x > INT_MAX) {
            *errpos = start + 1;
            return -1;
        }
    }
    *v = x;
    return 0;
}

static int ref_cpulist(const char *t, int *list, int *pos, int *n, size_t *errpos)
{
    size_t i = 0;
    *n = 0;
    if (!*t) {
        *errpos = 1;
        return -1;
    }
    for (;;) {
        size_t item = i;
        long a, b, st = 1;
        if (ref_number(t, &i, &a, errpos))
            return -1;
        b = a;
        if (t[i] == '-') {
            i++;
            if (ref_number(t, &i, &b, errpos))
                return -1;
            if (t[i] == ':') {
                size_t sp = ++i;
                if (ref_number(t, &i, &st, errpos))
                    return -1;
                if (st < 1) {
                    *errpos = sp + 1;
                    return -1;
                }
            }
        } else if (t[i] == ':') {
            *errpos = i + 1;
            return -1;
        }
        long cnt = (a <= b ? b - a : a - b) / st + 1;
        if (*n + cnt > NC_BIND_MAX_LIST) {
            *errpos = item + 1;
            return -1;
        }
        for (long c = 0; c < cnt; c++, (*n)++) {
            list[*n] = (int)(a <= b ? a + c * st : a - c * st);
            pos[*n] = (int)item + 1;
        }
        if (!t[i])
            return 0;
        if (t[i] != ',') {
            *errpos = i + 1;
            return -1;
        }
        if (!t[++i]) {
            *errpos = i;
            return -1;
        }
    }
}

/* Items near 0..129 (the synthetic nodes' PUs), CPU numbers up to 70000, and now
 * and then a range across tens of thousands of CPUs (the NC_BIND_MAX_LIST cap):
 * rarely, since every such input costs two expansions of up to 65536 entries. */
static void gen_cpulist(fz_rng_t *r, fz_buf_t *b)
{
    int items = 1 + (int)fz_below(r, 6);
    char num[64];
    for (int k = 0; k < items; k++) {
        int big = fz_one_in(r, 4);
        int a = (int)fz_below(r, big ? 70000 : 130);
        int e = big && !fz_one_in(r, 16) ? a + (int)fz_below(r, 260) - 130 : (int)fz_below(r, 130);
        if (e < 0)
            e = 0;
        if (k)
            fz_putc(b, ',');
        if (fz_one_in(r, 20)) {
            fz_puts(b, fz_number_token(r, num, sizeof num));
            continue;
        }
        switch (fz_below(r, 4)) {
        case 0:
            fz_printf(b, "%d", a);
            break;
        case 1:
            fz_printf(b, "%d-%d", a, e);
            break;
        default:
            fz_printf(b, "%d-%d:%d", a, e, (int)fz_below(r, 9));
            break;
        }
    }
}

static int cpu_list[NC_BIND_MAX_LIST + 16], cpu_pos[NC_BIND_MAX_LIST + 16];

static void cpulist_one(fz_rng_t *r, long idx)
{
    (void)idx;
    static fz_buf_t in, other;
    static const char *const dict[] = {",", "-", ":", ":0", ":1", "0", "-0", ",,", "65535",
                                       "0-65535", "2147483647", "2147483648", " "};
    fz_clear(&in);
    int mode = fz_mode(r);
    if (mode == 0) {
        fz_random_bytes(r, &in, 40, fz_one_in(r, 2) ? "0123456789,-:" : NULL);
    } else {
        gen_cpulist(r, &in);
        if (mode == 2) {
            fz_clear(&other);
            gen_cpulist(r, &other);
            fz_mutate(r, &in, dict, sizeof dict / sizeof dict[0], &other, 0);
        }
    }
    fz_set_input_desc(in.b, in.len);
    int *list = NULL, *pos = NULL, n = -1, rn = 0;
    size_t errpos = 0;
    char err[NC_BIND_ERRLEN] = "";
    int rc = nc_bind_cpulist_parse(in.b, &list, &pos, &n, err, sizeof err);
    int ref = ref_cpulist(in.b, cpu_list, cpu_pos, &rn, &errpos);
    fz_verdict(rc == 0);
    if (rc == 0) {
        FZ_CHECK(ref == 0, "accepted, but the grammar rejects it at position %zu: %s", errpos,
                 err);
        FZ_CHECK(ref != 0 || n == rn, "%d entries, the reference expansion has %d", n, rn);
        for (int i = 0; ref == 0 && i < n && i < rn; i++)
            if (list[i] != cpu_list[i] || pos[i] != cpu_pos[i]) {
                fz_fail("entry %d: CPU %d from position %d, the reference says CPU %d from %d",
                        i, list[i], pos[i], cpu_list[i], cpu_pos[i]);
                break;
            }
        free(list);
        free(pos);
        return;
    }
    FZ_CHECK(ref != 0, "rejected (%s), but the grammar accepts it (%d entries)", err, rn);
    char want[48];
    snprintf(want, sizeof want, "position %zu:", errpos);
    FZ_CHECK(ref == 0 || strstr(err, want), "message should name %s: \"%s\"", want, err);
    static const char *const names[] = {"--cpus \"", NULL};
    static const char *const valid[] = {"valid:", "more than", NULL};
    fz_check_message("nc_bind_cpulist_parse", err, sizeof err, in.b, NULL, valid);
    FZ_CHECK(strstr(err, names[0]), "message does not say it is about --cpus: \"%s\"", err);
}

const fz_target_t fz_target_cpulist = {
    "cpulist", "nc_bind_cpulist_parse(): numacoll-bind --cpus lists", 30000, NULL, cpulist_one,
};

/* ---- target: numacoll-bind options ------------------------------------------------------ */

static hwloc_topology_t bind_topo[2];
static FILE *devnull;

static void bind_init(void)
{
    static const char *const synth[2] = {"numa:4 core:8 pu:4",
                                         "pack:1 numa:1 core:8 pu:2(indexes=core)"};
    char err[NC_BIND_ERRLEN];
    for (int t = 0; t < 2; t++)
        if (!bind_topo[t] && nc_bind_topology_load(&bind_topo[t], synth[t], err, sizeof err)) {
            fprintf(stderr, "nc_fuzz: %s\n", err);
            exit(2);
        }
    if (!devnull)
        devnull = fopen("/dev/null", "w");
}

static const char *const bind_dict[] = {
    "--", "-", "--cpus", "-c", "--policy", "--mem", "--cores-per-rank", "--pus-per-rank",
    "--threads", "-t", "--report-wait", "--topology", "--np", "--stream-size", "--stream-ntimes",
    "-l", "-p", "--logical", "--physical", "--oversubscribe", "--report", "--dry-run", "--stream",
    "-v", "--help", "--version", "=", "auto", "-1", "none", "bind", "prefer", "accumulate",
    "distribute", "0", "4096", "4097", "65536", "65537", "1048576", "1048577", "./app",
};

static void gen_bind_value(fz_rng_t *r, const char *opt, char *v, size_t len)
{
    static fz_buf_t b;
    char num[64];
    long lo = 1, hi = 8;
    fz_clear(&b);
    if (!strcmp(opt, "--cpus") || !strcmp(opt, "-c")) {
        if (fz_one_in(r, 8))
            snprintf(v, len, "%s", fz_one_in(r, 2) ? "auto" : "-1");
        else {
            gen_cpulist(r, &b);
            snprintf(v, len, "%s", b.b);
        }
        return;
    }
    if (!strcmp(opt, "--policy")) {
        static const char *const p[] = {"distribute", "accumulate", "none", "spread"};
        snprintf(v, len, "%s", FZ_PICK(r, p));
        return;
    }
    if (!strcmp(opt, "--mem")) {
        static const char *const m[] = {"none", "prefer", "bind", "required"};
        snprintf(v, len, "%s", FZ_PICK(r, m));
        return;
    }
    if (!strcmp(opt, "--topology")) {
        static const char *const t[] = {"numa:4 core:8 pu:4", "pack:2 numa:1 core:14 pu:2",
                                        "numa:2 bogus:2", "/nonexistent.xml"};
        snprintf(v, len, "%s", FZ_PICK(r, t));
        return;
    }
    if (!strcmp(opt, "--cores-per-rank") || !strcmp(opt, "--pus-per-rank"))
        hi = fz_one_in(r, 8) ? 1 << 20 : 8;
    else if (!strcmp(opt, "--threads") || !strcmp(opt, "-t"))
        hi = fz_one_in(r, 8) ? 1 << 16 : 8;
    else if (!strcmp(opt, "--np"))
        hi = fz_one_in(r, 8) ? NC_BIND_MAX_RANKS : 40;
    else if (!strcmp(opt, "--report-wait"))
        lo = 0, hi = 3600 * 1000;
    else if (!strcmp(opt, "--stream-size"))
        lo = 1000, hi = 1L << 30;
    else if (!strcmp(opt, "--stream-ntimes"))
        lo = 2, hi = 1000;
    if (fz_one_in(r, 6))
        snprintf(v, len, "%s", fz_number_token(r, num, sizeof num));
    else if (fz_one_in(r, 6))
        snprintf(v, len, "%ld", fz_one_in(r, 2) ? lo - 1 : hi + 1);
    else
        snprintf(v, len, "%ld", lo + (long)fz_below(r, (uint64_t)(hi - lo + 1)));
}

/* One option vector of a tool, by the input's mode (fz_mode): 0 random words
 * (dictionary tokens or up to maxrand random bytes), 1 the grammar's (gen),
 * 2 the grammar's mutated. */
static void gen_argv_input(fz_rng_t *r, fz_argv_t *a, const char *prog, const char *const *dict,
                           size_t ndict, size_t maxrand, void (*gen)(fz_rng_t *, fz_argv_t *))
{
    int mode = fz_mode(r);
    if (mode == 0) {
        av_reset(a, prog);
        for (int k = (int)fz_below(r, 5); k > 0; k--) {
            static fz_buf_t w;
            fz_clear(&w);
            if (fz_one_in(r, 2))
                fz_puts(&w, dict[fz_below(r, ndict)]);
            else
                fz_random_bytes(r, &w, maxrand, NULL);
            av_add(a, w.b);
        }
    } else {
        gen(r, a);
        if (mode == 2)
            av_mutate(r, a, dict, ndict);
    }
    av_desc(a);
}

static void gen_bind_argv(fz_rng_t *r, fz_argv_t *a)
{
    static const char *const valued[] = {"--cpus", "-c", "--policy", "--mem", "--cores-per-rank",
                                         "--pus-per-rank", "--threads", "-t", "--report-wait",
                                         "--topology", "--np", "--stream-size",
                                         "--stream-ntimes"};
    static const char *const flags[] = {"-l", "-p", "--logical", "--physical", "--oversubscribe",
                                        "--report", "--stream", "-v", "--verbose"};
    av_reset(a, "numacoll-bind");
    int dry = !fz_one_in(r, 4), dry_first = fz_one_in(r, 2);
    if (dry && dry_first)
        av_add(a, "--dry-run");
    int n = (int)fz_below(r, 6);
    for (int k = 0; k < n; k++) {
        char v[600];
        if (fz_one_in(r, 3)) {
            av_add(a, FZ_PICK(r, flags));
            continue;
        }
        const char *o = FZ_PICK(r, valued);
        gen_bind_value(r, o, v, sizeof v);
        if (o[1] == '-' && fz_one_in(r, 3)) {
            char w[700];
            snprintf(w, sizeof w, "%s=%s", o, v);
            av_add(a, w);
        } else {
            av_add(a, o);
            if (!fz_one_in(r, 30))
                av_add(a, v);
        }
    }
    if (dry && !dry_first)
        av_add(a, "--dry-run");
    if (fz_one_in(r, 20))
        av_add(a, fz_one_in(r, 2) ? "--help" : "--version");
    if (!fz_one_in(r, 3)) {
        if (!fz_one_in(r, 4))
            av_add(a, "--");
        av_add(a, "./app");
        for (int k = (int)fz_below(r, 3); k > 0; k--)
            av_add(a, fz_one_in(r, 2) ? "-n" : "two words");
    }
}

/* numacoll-bind options back to a vector (the round trip). */
static void bind_format(const struct nc_bind_opts *o, fz_argv_t *a)
{
    char w[700];
    av_reset(a, "numacoll-bind");
    if (o->cpus) { /* two words: an input word may already fill a word of the vector */
        av_add(a, "--cpus");
        av_add(a, o->cpus);
    }
    if (o->logical)
        av_add(a, "--logical");
    if (o->policy != NC_BIND_POLICY_DISTRIBUTE) {
        av_add(a, "--policy");
        av_add(a, nc_bind_policy_name(o->policy));
    }
#define NUMOPT(field, name, def)                                                        \
    if (o->field != (def)) {                                                            \
        snprintf(w, sizeof w, "%s=%ld", name, (long)o->field);                          \
        av_add(a, w);                                                                   \
    }
    NUMOPT(cores_per_rank, "--cores-per-rank", 0)
    NUMOPT(pus_per_rank, "--pus-per-rank", 0)
    NUMOPT(threads, "--threads", 0)
    NUMOPT(report_wait_ms, "--report-wait", 10000)
    NUMOPT(np, "--np", 0)
    NUMOPT(stream_n, "--stream-size", 2000000)
    NUMOPT(stream_ntimes, "--stream-ntimes", 10)
#undef NUMOPT
    if (o->mem != NC_BIND_MEM_NONE) {
        av_add(a, "--mem");
        av_add(a, nc_bind_mem_name(o->mem));
    }
    if (o->oversubscribe)
        av_add(a, "--oversubscribe");
    if (o->report)
        av_add(a, "--report");
    if (o->dry_run)
        av_add(a, "--dry-run");
    if (o->topology) {
        av_add(a, "--topology");
        av_add(a, o->topology);
    }
    if (o->stream)
        av_add(a, "--stream");
    if (o->verbose)
        av_add(a, "--verbose");
    if (o->prog) {
        av_add(a, "--");
        for (char **p = o->prog; *p; p++)
            av_add(a, *p);
    }
}

static int str_eq(const char *x, const char *y)
{
    return (!x && !y) || (x && y && !strcmp(x, y));
}

static void check_bind_accepted(const fz_argv_t *a, const struct nc_bind_opts *o, long idx)
{
    FZ_CHECK(o->cores_per_rank >= 0 && o->cores_per_rank <= 1 << 20 && o->pus_per_rank >= 0 &&
                 o->pus_per_rank <= 1 << 20 && o->threads >= 0 && o->threads <= 1 << 16 &&
                 o->np >= 0 && o->np <= NC_BIND_MAX_RANKS && o->report_wait_ms >= 0 &&
                 o->report_wait_ms <= 3600 * 1000 && o->stream_n >= 1000 &&
                 o->stream_n <= 1L << 30 && o->stream_ntimes >= 2 && o->stream_ntimes <= 1000,
             "a numeric option out of its documented range");
    FZ_CHECK(!(o->cores_per_rank && o->pus_per_rank), "--cores-per-rank with --pus-per-rank");
    FZ_CHECK(!(o->cpus && o->cores_per_rank), "--cpus with --cores-per-rank");
    FZ_CHECK(!o->topology || o->dry_run, "--topology without --dry-run");
    FZ_CHECK(!o->np || o->dry_run, "--np without --dry-run");
    FZ_CHECK(!o->dry_run || (!o->stream && !o->report), "--dry-run with --stream/--report");
    FZ_CHECK(!(o->stream && o->prog), "--stream with a program");
    FZ_CHECK(o->prog || o->dry_run || o->stream || o->report, "nothing to do accepted");
    FZ_CHECK(o->policy != NC_BIND_POLICY_NONE ||
                 (!o->cores_per_rank && !o->pus_per_rank && !o->oversubscribe),
             "--policy none with a per-rank size");
    if (o->prog) {
        int k = (int)(o->prog - a->argv);
        FZ_CHECK(k >= 1 && k < a->argc && o->prog[0] &&
                     (!strcmp(a->argv[k - 1], "--") || a->argv[k][0] != '-' ||
                      !a->argv[k][1]),
                 "program at argv[%d] is neither after \"--\" nor the first non-option", k);
    }
    /* round trip */
    static fz_argv_t b;
    struct nc_bind_opts o2;
    char err[NC_BIND_ERRLEN];
    bind_format(o, &b);
    if (nc_bind_opts_parse(b.argc, b.argv, &o2, err, sizeof err)) {
        fz_fail("the formatted options are rejected: %s", err);
        return;
    }
    int same = str_eq(o->cpus, o2.cpus) && o->logical == o2.logical && o->policy == o2.policy &&
               o->cores_per_rank == o2.cores_per_rank && o->pus_per_rank == o2.pus_per_rank &&
               o->mem == o2.mem && o->threads == o2.threads &&
               o->oversubscribe == o2.oversubscribe && o->report == o2.report &&
               o->report_wait_ms == o2.report_wait_ms && o->dry_run == o2.dry_run &&
               str_eq(o->topology, o2.topology) && o->np == o2.np && o->stream == o2.stream &&
               o->stream_n == o2.stream_n && o->stream_ntimes == o2.stream_ntimes &&
               o->verbose == o2.verbose && !o->prog == !o2.prog;
    for (int k = 0; same && o->prog && (o->prog[k] || o2.prog[k]); k++)
        same = str_eq(o->prog[k], o2.prog[k]);
    FZ_CHECK(same, "parse(format(options)) differs from the options");

    /* the placement these options give on a synthetic node (no binding) */
    hwloc_topology_t topo = bind_topo[idx & 1];
    int nranks = o->np ? o->np : 1 + (int)(idx % 9);
    struct nc_bind_plan plan = {0, NULL};
    if (nc_bind_plan_compute(topo, o, nranks, &plan, err, sizeof err)) {
        if (!strncmp(err, "--cpus \"", 8)) {
            /* the --cpus list is parsed here: a rejection of that text names it and
             * the valid form (grammar, the PUs that exist, how many are needed) */
            static const char *const valid[] = {"valid:", "more than", "PUs:", "give at least",
                                                NULL};
            FZ_CHECK(o->cpus != NULL, "a --cpus message without --cpus: \"%s\"", err);
            fz_check_message("nc_bind_plan_compute (--cpus)", err, sizeof err, o->cpus, NULL,
                             valid);
        } else {
            /* the options parse, but this node cannot hold what they ask for: not a
             * rejection of some text, so the message names the problem and the
             * remedy instead of quoting an input */
            static const char *const problem[] = {"cannot hold", "a rank needs", NULL};
            static const char *const remedy[] = {"use fewer", "use at most", NULL};
            fz_check_message("nc_bind_plan_compute (placement)", err, sizeof err, NULL, problem,
                             remedy);
        }
        return;
    }
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo);
    for (int k = 0; k < plan.nranks; k++)
        FZ_CHECK(!hwloc_bitmap_iszero(plan.rank[k].cpuset) &&
                     hwloc_bitmap_isincluded(plan.rank[k].cpuset, all),
                 "rank %d of %d: empty or foreign cpuset", k, plan.nranks);
    if (devnull && nranks <= 64) {
        nc_bind_print_plan(devnull, topo, o, &plan);
        if (o->prog)
            nc_bind_print_exec(devnull, o->prog);
    }
    nc_bind_plan_destroy(&plan);
}

static void bind_opts_one(fz_rng_t *r, long idx)
{
    static fz_argv_t a;
    gen_argv_input(r, &a, "numacoll-bind", bind_dict, sizeof bind_dict / sizeof bind_dict[0], 20,
                   gen_bind_argv);
    struct nc_bind_opts o;
    char err[NC_BIND_ERRLEN] = "";
    int rc = nc_bind_opts_parse(a.argc, a.argv, &o, err, sizeof err);
    fz_verdict(rc == 0);
    if (rc == 0) {
        if (!o.help && !o.version)
            check_bind_accepted(&a, &o, idx);
        return;
    }
    FZ_CHECK(rc == -1, "rc %d", rc);
    const char *names[MAXARGS + 4];
    char store[MAXARGS + 4][64];
    option_names(&a, names, store, MAXARGS + 2);
    int n = 0;
    while (names[n])
        n++;
    names[n++] = "no program given";
    names[n] = NULL;
    static const char *const valid[] = {"valid", "expected", "[", "exclude", "needs", "cannot",
                                        "is for", "--help", "usage:", "but", "binds nothing",
                                        NULL};
    fz_check_message("nc_bind_opts_parse", err, sizeof err, NULL, names, valid);
}

const fz_target_t fz_target_bind_opts = {
    "bind_opts", "nc_bind_opts_parse() + placement: numacoll-bind option vectors", 25000,
    bind_init, bind_opts_one,
};

/* ---- target: numacoll-bench options ------------------------------------------------------ */

static const char *const bench_short_keys[] = {"tree", "s", "q", "f", "layout", "barrier.alg",
                                               "barrier.tree", "barrier.numa"};
static const int bench_short_index[] = {NC_P_BCAST_TREE, NC_P_BCAST_QUEUE_LEN, NC_P_BCAST_SETS,
                                        NC_P_BCAST_FRAG_SIZE, NC_P_SEG_LAYOUT, NC_P_BARRIER_ALG,
                                        NC_P_BARRIER_TREE, NC_P_BARRIER_NUMA};

static void gen_bench_kv(fz_rng_t *r, fz_buf_t *b)
{
    static fz_buf_t v;
    int i;
    fz_clear(&v);
    if (fz_one_in(r, 3)) {
        i = (int)fz_below(r, NC_PARAM_COUNT);
        fz_printf(b, "NUMACOLL_%s=", nc_param_desc(i)->name);
    } else {
        int k = (int)fz_below(r, sizeof bench_short_keys / sizeof bench_short_keys[0]);
        i = bench_short_index[k];
        fz_printf(b, "%s=", bench_short_keys[k]);
    }
    if (i == NC_P_BCAST_SETS)
        fz_puts(&v, fz_one_in(r, 2) ? "1" : "2");
    else
        fz_gen_tunable_value(r, i, &v);
    while (v.len && v.b[v.len - 1] == ' ')
        v.b[--v.len] = '\0';
    fz_puts(b, v.b);
}

static void gen_bench_value(fz_rng_t *r, const char *opt, fz_buf_t *b)
{
    char num[64];
    if (!strcmp(opt, "-c") || !strcmp(opt, "--collective")) {
        static const char *const c[] = {"bcast", "barrier", "bcast,barrier", "barrier,bcast",
                                        "allreduce", "bcast,bcast", "reduce", "reduce,allreduce",
                                        "allreduce,barrier,reduce,bcast", "reduce,reduce",
                                        "alltoall", "reduce,", ",", "Reduce"};
        fz_puts(b, FZ_PICK(r, c));
    } else if (!strcmp(opt, "--op")) {
        static const char *const ops[] = {"sum", "prod", "min", "max", "land", "lor", "lxor",
                                          "band", "bor", "bxor", "avg", "SUM", "", "minloc"};
        fz_puts(b, FZ_PICK(r, ops));
    } else if (!strcmp(opt, "--type")) {
        static const char *const t[] = {"double", "float", "int", "int32", "long", "int64",
                                        "char", "uint8", "half", "int8", "Double", ""};
        fz_puts(b, FZ_PICK(r, t));
    } else if (!strcmp(opt, "-m") || !strcmp(opt, "--msglog")) {
        if (fz_one_in(r, 2)) {
            fz_printf(b, "%d:%d", (int)fz_below(r, 32), (int)fz_below(r, 32));
        } else {
            static const char *const s[] = {"0", "8", "1K", "64k", "1M", "1Mi", "1MiB", "3",
                                            "1G", "2G", "4097", "1KB"};
            for (int k = (int)fz_below(r, 6); k >= 0; k--)
                fz_printf(b, "%s%s", FZ_PICK(r, s), k ? "," : "");
        }
    } else if (!strcmp(opt, "--impl")) {
        static const char *const base[] = {"native", "numacoll", "memcpy", "bogus"};
        for (int k = (int)fz_below(r, 4); k >= 0; k--) {
            switch (fz_below(r, 4)) {
            case 0:
                fz_puts(b, FZ_PICK(r, base));
                break;
            case 1:
                fz_puts(b, "numacoll:");
                gen_bench_kv(r, b);
                break;
            case 2:
                fz_printf(b, "cfg%d=numacoll:", (int)fz_below(r, 4));
                gen_bench_kv(r, b);
                if (fz_one_in(r, 2)) {
                    fz_putc(b, ',');
                    gen_bench_kv(r, b);
                }
                break;
            default:
                fz_puts(b, "numacoll:");
                gen_bench_kv(r, b);
                fz_putc(b, ',');
                gen_bench_kv(r, b);
                break;
            }
            if (k)
                fz_putc(b, ',');
        }
    } else if (!strcmp(opt, "--sweep")) {
        int k = (int)fz_below(r, sizeof bench_short_keys / sizeof bench_short_keys[0]);
        fz_printf(b, "%s=", bench_short_keys[k]);
        for (int j = (int)fz_below(r, 4); j >= 0; j--) {
            static fz_buf_t v;
            fz_clear(&v);
            fz_gen_tunable_value(r, bench_short_index[k], &v);
            fz_printf(b, "%s%s", v.b, j ? "," : "");
        }
    } else if (!strcmp(opt, "--sweep-base")) {
        gen_bench_kv(r, b);
    } else if (!strcmp(opt, "--iter")) {
        fz_printf(b, "%d", (int)fz_below(r, 10000));
        if (fz_one_in(r, 2))
            fz_printf(b, ",%g", (double)fz_below(r, 1000) / 4);
    } else if (!strcmp(opt, "--stat")) {
        static const char *const s[] = {"min", "avg", "max", "median"};
        fz_puts(b, FZ_PICK(r, s));
    } else if (!strcmp(opt, "--csv") || !strcmp(opt, "--plot")) {
        fz_puts(b, fz_one_in(r, 3) ? "-" : "out.file");
    } else if (!strcmp(opt, "--time-per-size") || !strcmp(opt, "--off-cache")) {
        fz_printf(b, "%g", (double)fz_below(r, 100000) / 64);
    } else if (fz_one_in(r, 5)) {
        fz_puts(b, fz_number_token(r, num, sizeof num));
    } else {
        fz_printf(b, "%d", (int)fz_below(r, 20));
    }
}

static void gen_bench_argv(fz_rng_t *r, fz_argv_t *a)
{
    static const char *const valued[] = {"-c", "--collective", "-m", "--msglog", "--impl",
                                         "--sweep", "--sweep-base", "--iter", "--time-per-size",
                                         "--warmup", "--root", "--runs", "--stat", "--csv",
                                         "--plot", "--np", "--off-cache", "--op", "--type"};
    static const char *const flags[] = {"--no-zero", "--no-limits", "--root-shift",
                                        "--verify-each", "-q", "--quiet", "--dry-run",
                                        "--fake-timings", "--off-cache"};
    av_reset(a, "numacoll-bench");
    if (!fz_one_in(r, 3))
        av_add(a, "--dry-run");
    for (int k = (int)fz_below(r, 6); k > 0; k--) {
        static fz_buf_t v;
        if (fz_one_in(r, 3)) {
            av_add(a, FZ_PICK(r, flags));
            continue;
        }
        const char *o = FZ_PICK(r, valued);
        fz_clear(&v);
        gen_bench_value(r, o, &v);
        if (o[1] == '-' && fz_one_in(r, 3)) {
            char w[700];
            snprintf(w, sizeof w, "%s=%s", o, v.b);
            av_add(a, w);
        } else {
            av_add(a, o);
            if (!fz_one_in(r, 30))
                av_add(a, v.b);
        }
    }
    if (fz_one_in(r, 40))
        av_add(a, fz_one_in(r, 2) ? "--help" : "--version");
}

static struct nc_bench_opts bench_o;

static void check_bench_accepted(const struct nc_bench_opts *o)
{
    FZ_CHECK(o->ncoll >= 1 && o->ncoll <= NC_BENCH_NCOLL, "collectives: %d", o->ncoll);
    for (int a = 0; a < o->ncoll; a++) {
        FZ_CHECK((int)o->coll[a] >= 0 && o->coll[a] < NC_BENCH_NCOLL, "collective %d",
                 (int)o->coll[a]);
        for (int b = 0; b < a; b++)
            FZ_CHECK(o->coll[a] != o->coll[b], "collective %s twice",
                     nc_bench_coll_name(o->coll[a]));
    }
    FZ_CHECK(o->nsizes >= 1 && o->nsizes <= NC_BENCH_MAX_SIZES, "%d sizes", o->nsizes);
    for (int k = 0; k < o->nsizes; k++)
        FZ_CHECK(o->sizes[k] <= (size_t)1 << 30 && (!k || o->sizes[k - 1] < o->sizes[k]),
                 "size %d = %zu (sorted, unique, at most 1 GiB)", k, o->sizes[k]);
    /* reductions: an op MPI defines on the type (logical and bitwise: integers only), and
     * the sizes rounded down to whole elements, sorted, unique, one per given size at most */
    size_t tb = nc_bench_type_bytes(o->type);
    int fp = o->type == NUMACOLL_DOUBLE || o->type == NUMACOLL_FLOAT;
    FZ_CHECK(tb == 1 || tb == 4 || tb == 8, "type %d: %zu bytes", (int)o->type, tb);
    FZ_CHECK((int)o->op >= NUMACOLL_SUM && o->op <= NUMACOLL_BXOR &&
                 (!fp || o->op <= NUMACOLL_MAX),
             "--op %s on --type %s", nc_bench_op_name(o->op), nc_bench_type_name(o->type));
    FZ_CHECK(nc_bench_has_reduction(o) || (o->type == NUMACOLL_DOUBLE && o->op == NUMACOLL_SUM),
             "--op/--type accepted without a reduction");
    FZ_CHECK(o->nred_sizes >= 1 && o->nred_sizes <= o->nsizes, "%d reduction sizes of %d",
             o->nred_sizes, o->nsizes);
    for (int k = 0; k < o->nred_sizes; k++) {
        size_t v = o->red_sizes[k];
        int from = 0;
        for (int j = 0; j < o->nsizes; j++)
            from |= o->sizes[j] / tb * tb == v;
        FZ_CHECK(v % tb == 0 && from && (!k || o->red_sizes[k - 1] < v),
                 "reduction size %d = %zu (whole %zu-byte elements of a given size, sorted, "
                 "unique)", k, v, tb);
    }
    FZ_CHECK(o->iter_max >= 1 && o->iter_max <= 1000000000L && o->warmup >= 0 &&
                 o->warmup <= 1000000 && o->time_per_size > 0 && o->time_per_size <= 3600 &&
                 o->runs >= 1 && o->runs <= 1000 && o->root >= 0 && o->root <= 1 << 24 &&
                 o->np >= 0 && o->np <= 1 << 20 &&
                 (o->iter_vol_mib == 0 || (o->iter_vol_mib >= 1e-6 && o->iter_vol_mib <= 1e9)) &&
                 (o->cache_mib == 0 || (o->cache_mib >= 0.0625 && o->cache_mib <= 65536)),
             "a numeric option out of its documented range");
    FZ_CHECK(!o->np || o->dry_run || o->fake, "--np without --dry-run/--fake-timings");
    FZ_CHECK(!o->np || o->root < o->np, "--root %d >= --np %d", o->root, o->np);
    FZ_CHECK(!(o->plot && o->csv && !strcmp(o->csv, "-")), "--plot with --csv -");
    FZ_CHECK(o->nimpl >= 1 && o->nimpl <= NC_BENCH_MAX_IMPLS, "%d implementations", o->nimpl);
    for (int a = 0; a < o->nimpl; a++) {
        const struct nc_bench_impl *im = &o->impl[a];
        size_t ll = strlen(im->label);
        FZ_CHECK(ll && ll < NC_BENCH_LABEL && !strpbrk(im->label, " \t\n\"") &&
                     im->label[strcspn(im->label, "\v\f\r")] == '\0',
                 "label \"%s\"", im->label);
        for (int b = 0; b < a; b++)
            FZ_CHECK(strcmp(im->label, o->impl[b].label), "label \"%s\" twice", im->label);
        FZ_CHECK(im->kind == NC_IMPL_NATIVE || im->kind == NC_IMPL_NUMACOLL, "kind %d",
                 (int)im->kind);
        FZ_CHECK(im->nparams >= 0 && im->nparams <= NC_BENCH_MAX_PARAMS, "%d tunables",
                 im->nparams);
        for (int k = 0; k < im->nparams; k++) {
            const struct nc_bench_param *p = &im->params[k];
            FZ_CHECK(!strncmp(p->name, "NUMACOLL_", 9) && nc_param_lookup(p->name) >= 0,
                     "tunable \"%s\" (from \"%s\")", p->name, p->key);
            for (int j = 0; j < k; j++)
                FZ_CHECK(strcmp(p->name, im->params[j].name), "%s twice in \"%s\"", p->name,
                         im->label);
            int i = nc_param_lookup(p->name);
            nc_param_value_t v = {0};
            char err[256];
            FZ_CHECK(i < 0 || !nc_param_parse(i, p->value, &v, err, sizeof err),
                     "\"%s\" accepted with %s=\"%s\": %s", im->label, p->name, p->value, err);
        }
    }
}

static void bench_one(fz_rng_t *r, long idx)
{
    (void)idx;
    static fz_argv_t a;
    static const char *const dict[] = {
        "--dry-run", "--np", "--root", "--impl", "--sweep", "--sweep-base", "-m", "-c", "--iter",
        "--csv", "--plot", "-", "=", ",", ":", "numacoll:", "native", "s=", "q=", "f=", "tree=",
        "NUMACOLL_BCAST_QUEUE_LEN=", "0:30", "1G", "65", "--off-cache=", "--fake-timings",
        "--op", "--type", "reduce", "allreduce", "reduce,allreduce", "sum", "bxor", "land",
        "double", "float", "int", "uint8", "char"};
    gen_argv_input(r, &a, "numacoll-bench", dict, sizeof dict / sizeof dict[0], 30, gen_bench_argv);
    char err[NC_BENCH_ERRLEN] = "";
    int rc = nc_bench_opts_parse(a.argc, a.argv, &bench_o, err, sizeof err);
    fz_verdict(rc == 0);
    if (rc == 0) {
        if (!bench_o.help && !bench_o.version)
            check_bench_accepted(&bench_o);
        return;
    }
    FZ_CHECK(rc == -1, "rc %d", rc);
    const char *names[MAXARGS + 4];
    char store[MAXARGS + 4][64];
    option_names(&a, names, store, MAXARGS + 2);
    /* values quoted by the message ("implementation \"x\" given twice") name the input
     * too: the text between the quotes, unescaped and without the "..." of a cut, is
     * part of one of the words (an empty "" only if a word is empty) */
    int n = 0;
    while (names[n])
        n++;
    static char quoted[4][NC_BENCH_ERRLEN];
    const char *q = err;
    for (int k = 0; k < 4 && (q = strchr(q, '"')) != NULL; k++) {
        const char *e = q + 1;
        while (*e && *e != '"')
            e += e[0] == '\\' && e[1] ? 2 : 1;
        if (!*e)
            break;
        char text[NC_BENCH_ERRLEN];
        size_t tl = fz_unescape(q + 1, (size_t)(e - q - 1), text, sizeof text);
        if (tl >= 3 && !strcmp(text + tl - 3, "..."))
            text[tl -= 3] = '\0';
        int found = 0;
        for (int i = 1; i < a.argc; i++)
            found |= tl ? strstr(a.argv[i], text) != NULL : !a.argv[i][0];
        snprintf(quoted[k], sizeof quoted[k], "%.*s", (int)(e - q + 1), q);
        if (found)
            names[n++] = quoted[k];
        q = e + 1;
    }
    names[n] = NULL;
    /* the valid form: a range or list ("valid", "at most", ...), a grammar ("is not
     * A:B with ...", "is not R[,V]", "is not KEY=..."), or the rule that was broken */
    static const char *const valid[] = {"valid", "expected", "at least", "at most", "twice",
                                        "needs", "only", "--help", "takes no value", "which",
                                        "is for", "always measured", "is not A:B with",
                                        "is not R[,V]", "is not KEY=", NULL};
    fz_check_message("nc_bench_opts_parse", err, sizeof err, NULL, names, valid);
}

const fz_target_t fz_target_bench_opts = {
    "bench_opts", "nc_bench_opts_parse(): numacoll-bench option vectors", 15000, NULL, bench_one,
};
