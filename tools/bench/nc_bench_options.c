/*
 * numacoll-bench command line: everything is parsed and checked before MPI_Init,
 * so a bad option costs one line on stderr and no mpirun start-up. The numacoll
 * tunables of every configuration are checked by numacoll itself
 * (numacoll_param_set, then restored), with the same messages a user of the
 * environment variables gets.
 */
#include "nc_bench.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "numacoll.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Messages quote what the user wrote with nc_quote(): one line, cut after
 * NC_QUOTE_MAX characters, so that the valid form after it always fits. */
#define QUOTE(buf, text) nc_quote((buf), sizeof(buf), (text))

void nc_bench_usage(FILE *out)
{
    fputs(
"usage: mpirun -n P numacoll-bench [options]\n"
"Measures, interleaved size by size in one run, the MPI library's own collective\n"
"(native: PMPI_*) and numacoll's (MPI_* through libnumacoll-mpi), next to one core's\n"
"memcpy of the same bytes (and for reductions one core's reduction kernel) and the\n"
"one-way latency of a cache-line flag.\n"
"\n"
"What to measure\n"
"  -c, --collective LIST   any of bcast, barrier, reduce, allreduce, gather, gatherv,\n"
"                          scatter, scatterv, allgather, allgatherv, alltoall,\n"
"                          alltoallv, comma-separated (default bcast); the gather\n"
"                          family: -m is each member's block (MPI_BYTE), the v-forms\n"
"                          with equal counts unless --imbalance\n"
"      --imbalance X       the v-forms with uneven counts (X from 0 to 1, default 0):\n"
"                          the block of rank k (gatherv, allgatherv: the sender;\n"
"                          scatterv: the receiver; alltoallv: k = (s + d) mod p) is\n"
"                          m (1 - X k / (p - 1)) bytes: m down to m (1 - X)\n"
"  -m, --msglog A:B        sizes 0 and 2^A..2^B bytes (default 0:20), like IMB -msglog\n"
"  -m LIST                 explicit sizes, e.g. 0,8,1K,64K,1M (K, M, G: powers of 1024)\n"
"                          reduce, allreduce: a size is rounded down to whole elements\n"
"                          of --type (count = bytes / element size; below one element:\n"
"                          count 0), sizes that then coincide are measured once\n"
"      --no-zero           leave size 0 out of an A:B range\n"
"      --op OP             reduce, allreduce: sum, prod, min, max, land, lor, lxor,\n"
"                          band, bor, bxor (default sum; logical and bitwise ops on\n"
"                          integer types only)\n"
"      --type T            reduce, allreduce: double, float, int32 (or int), int64 (or\n"
"                          long), uint8 (or char: unsigned) (default double)\n"
"      --impl LIST         implementations (default native,numacoll); repeatable:\n"
"                            native                 PMPI_Bcast / PMPI_Barrier / ...\n"
"                            numacoll               MPI_* with numacoll's defaults\n"
"                            numacoll:K=V,K=V...    with these tunables\n"
"                            LABEL=numacoll:K=V...  the same, named LABEL in the output\n"
"                          K: tree (kary:K|knomial:K|flat|chain), s (queue length),\n"
"                          q (sets), f (fragment bytes), layout (paper|compact),\n"
"                          barrier.alg (rearranged|padded|dissemination|central),\n"
"                          barrier.tree, barrier.numa, or any NUMACOLL_* tunable\n"
"      --sweep K=V1,V2...  one numacoll configuration per value, named numacoll:K=V\n"
"                          (added to --impl; without --impl: native plus the sweep)\n"
"      --sweep-base K=V,.. tunables every configuration of the sweep also gets\n"
"      --no-limits         skip the memcpy, reduce-kernel, cma-copy, flag-sync and flag\n"
"                          references\n"
"\n"
"How (the methodology of IMB and of the paper)\n"
"      --iter R[,V]        at most R timed calls per size, and at most V MiB moved\n"
"                          (default 5000,250: the paper's -iter 5000,250)\n"
"      --time-per-size S   at most about S seconds of calls (with the barriers between\n"
"                          them) per implementation, size and run (default 1); never\n"
"                          fewer than min(5, R) calls\n"
"      --warmup W          untimed calls before timing (default 10; at least 2 in the\n"
"                          first run, which size the iteration count; at most a quarter\n"
"                          of the time per size)\n"
"      --off-cache[=MIB]   each call uses the next buffer of a pool of at least twice\n"
"                          the last-level cache per rank (MIB: the cache size to assume;\n"
"                          default: hwloc's LLC); without it one buffer stays in cache\n"
"      --buf-offset B      every buffer starts B bytes (0 to 4095) past a page boundary\n"
"                          (default 0); 16 is where malloc() puts large buffers\n"
"      --thp               the buffers ask for transparent huge pages (madvise\n"
"                          MADV_HUGEPAGE; what THP \"always\" gives every large buffer):\n"
"                          single copies (CMA) pin 2 MiB pages instead of 4 KiB ones\n"
"      --root R            root of the broadcast and the reduce (default 0)\n"
"      --root-shift        the root rotates over all ranks, call by call\n"
"      --runs N            repeat everything N times; with N >= 3 the runs with the\n"
"                          smallest and largest t_max are dropped, the rest averaged\n"
"      --verify-each       check the data after every call instead of after the timing\n"
"                          (bcast: refills the root's buffer; reductions: checks every\n"
"                          call's result: for correctness, not for speed)\n"
"\n"
"Output\n"
"      --stat min|avg|max  which time the ratios and the summary use (default max)\n"
"      --csv FILE          collective,impl,p,bytes,iterations,t_min_us,t_avg_us,t_max_us\n"
"                          (FILE '-': CSV on stdout instead of the table)\n"
"      --plot FILE.png     latency and ratio vs size (runs bench/plot.py, matplotlib)\n"
"  -q, --quiet             no progress lines on stderr\n"
"      --dry-run           print the plan and exit (no MPI needed)\n"
"      --np P              with --dry-run or --fake-timings: the number of ranks\n"
"      --fake-timings      testing: run the whole report on made-up times, no MPI\n"
"  -h, --help, --version\n",
        out);
}

static const char *const coll_names[NC_BENCH_NCOLL] = {
    "bcast",     "barrier",    "reduce",   "allreduce", "gather",    "gatherv",
    "scatter",   "scatterv",   "allgather", "allgatherv", "alltoall", "alltoallv"};
#define COLL_LIST                                                                      \
    "bcast, barrier, reduce, allreduce, gather, gatherv, scatter, scatterv, allgather, " \
    "allgatherv, alltoall, alltoallv"

const char *nc_bench_coll_name(enum nc_bench_coll c)
{
    return coll_names[c];
}

int nc_bench_coll_is_exchange(enum nc_bench_coll c)
{
    return c >= NC_BENCH_GATHER && c <= NC_BENCH_ALLTOALLV;
}

int nc_bench_coll_has_copy_limit(enum nc_bench_coll c)
{
    return c == NC_BENCH_BCAST || nc_bench_coll_is_exchange(c);
}

/* Some collective of the run has what `has` asks for. */
static int any_coll(const struct nc_bench_opts *o, int (*has)(enum nc_bench_coll))
{
    for (int c = 0; c < o->ncoll; c++)
        if (has(o->coll[c]))
            return 1;
    return 0;
}

int nc_bench_has_copy_limit(const struct nc_bench_opts *o)
{
    return any_coll(o, nc_bench_coll_has_copy_limit);
}

int nc_bench_coll_has_sync_limit(enum nc_bench_coll c)
{
    return c != NC_BENCH_BARRIER; /* timed back to back: the flag row is its limit */
}

int nc_bench_has_sync_limit(const struct nc_bench_opts *o)
{
    return any_coll(o, nc_bench_coll_has_sync_limit);
}

int nc_bench_coll_is_reduction(enum nc_bench_coll c)
{
    return c == NC_BENCH_REDUCE || c == NC_BENCH_ALLREDUCE;
}

int nc_bench_has_reduction(const struct nc_bench_opts *o)
{
    return any_coll(o, nc_bench_coll_is_reduction);
}

/* ---- reductions: --type and --op ------------------------------------------------ */

static const struct {
    const char *name, *alias, *mpi;
    numacoll_type_t type;
    size_t bytes;
    int integer;
} types[] = {
    {"double", NULL, "MPI_DOUBLE", NUMACOLL_DOUBLE, sizeof(double), 0},
    {"float", NULL, "MPI_FLOAT", NUMACOLL_FLOAT, sizeof(float), 0},
    {"int32", "int", "MPI_INT32_T", NUMACOLL_INT32, 4, 1},
    {"int64", "long", "MPI_INT64_T", NUMACOLL_INT64, 8, 1},
    {"uint8", "char", "MPI_UINT8_T", NUMACOLL_UINT8, 1, 1},
};
#define NTYPES (sizeof types / sizeof types[0])
#define TYPES_VALID "double, float, int32 (or int), int64 (or long), uint8 (or char)"

/* in numacoll_op_t order */
static const char *const op_names[] = {"sum", "prod", "min", "max", "land", "lor",
                                       "lxor", "band", "bor", "bxor"};
static const char *const op_mpi[] = {"MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND",
                                     "MPI_LOR", "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR"};
#define NOPS (sizeof op_names / sizeof op_names[0])
#define OPS_VALID "sum, prod, min, max, land, lor, lxor, band, bor, bxor"

static int type_index(numacoll_type_t t)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (types[i].type == t)
            return (int)i;
    return 0;
}

const char *nc_bench_type_name(numacoll_type_t t)
{
    return types[type_index(t)].name;
}

const char *nc_bench_type_mpi_name(numacoll_type_t t)
{
    return types[type_index(t)].mpi;
}

size_t nc_bench_type_bytes(numacoll_type_t t)
{
    return types[type_index(t)].bytes;
}

const char *nc_bench_op_name(numacoll_op_t op)
{
    return (size_t)op < NOPS ? op_names[op] : "?";
}

const char *nc_bench_op_mpi_name(numacoll_op_t op)
{
    return (size_t)op < NOPS ? op_mpi[op] : "?";
}

size_t nc_bench_recv_offset(size_t bytes)
{
    return (bytes + NC_BENCH_CANARY + 4095) & ~(size_t)4095;
}

size_t nc_bench_slot_bytes(enum nc_bench_coll c, size_t bytes, int p)
{
    if (nc_bench_coll_is_exchange(c))
        return nc_bench_recv_offset((size_t)p * bytes) + (size_t)p * bytes;
    return nc_bench_coll_is_reduction(c) ? nc_bench_recv_offset(bytes) + bytes : bytes;
}

const char *nc_bench_stat_name(enum nc_bench_stat s)
{
    return s == NC_STAT_MIN ? "min" : s == NC_STAT_AVG ? "avg" : "max";
}

/* "8", "64K", "1M", "2G" (powers of 1024). */
int nc_bench_parse_size(const char *s, size_t *out)
{
    char *end;
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (*end == 'i' && shift)
        end++;
    if (*end == 'B' || (*end == 'b' && shift))
        end++;
    if (*end || v > (1ULL << 40) >> shift)
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

void nc_bench_format_size(size_t b, char *buf, size_t len)
{
    if (b >= (1u << 30) && b % (1u << 30) == 0)
        snprintf(buf, len, "%zu GiB", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(buf, len, "%zu MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, len, "%zu KiB", b >> 10);
    else
        snprintf(buf, len, "%zu B", b);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* opt: the option as the user spelled it (-m or --msglog), for the messages */
static int parse_sizes(struct nc_bench_opts *o, int zero, const char *opt, char *err,
                       size_t errlen)
{
    const char *t = o->sizes_text;
    o->nsizes = 0;
    char q[NC_QUOTE_LEN];
    if (strchr(t, ':')) {
        long a, b;
        char lo[32], hi[32];
        const char *c = strchr(t, ':');
        size_t ll = (size_t)(c - t);
        int ok = ll < sizeof lo && strlen(c + 1) < sizeof hi;
        if (ok) {
            memcpy(lo, t, ll);
            lo[ll] = '\0';
            strcpy(hi, c + 1);
            ok = !parse_long(lo, 0, 30, &a) && !parse_long(hi, 0, 30, &b) && a <= b;
        }
        if (!ok)
            return fail(err, errlen,
                        "%s: \"%s\" is not A:B with 0 <= A <= B <= 30 (sizes 2^A..2^B bytes)",
                        opt, QUOTE(q, t));
        if (zero)
            o->sizes[o->nsizes++] = 0;
        for (long k = a; k <= b; k++)
            o->sizes[o->nsizes++] = (size_t)1 << k;
        return 0;
    }
    char buf[1024];
    if (strlen(t) >= sizeof buf)
        return fail(err, errlen, "%s: list too long (at most %zu characters)", opt,
                    sizeof buf - 1);
    strcpy(buf, t);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t v;
        if (nc_bench_parse_size(tok, &v) || v > ((size_t)1 << 30))
            return fail(err, errlen,
                        "%s: \"%s\" is not a size (bytes, or with K, M, G; at most 1G)",
                        opt, QUOTE(q, tok));
        if (o->nsizes == NC_BENCH_MAX_SIZES)
            return fail(err, errlen, "%s: too many sizes (at most %d)", opt,
                        NC_BENCH_MAX_SIZES);
        o->sizes[o->nsizes++] = v;
    }
    if (!o->nsizes)
        return fail(err, errlen, "%s: no size given (expected A:B or sizes, e.g. 0,8,1K)",
                    opt);
    qsort(o->sizes, (size_t)o->nsizes, sizeof o->sizes[0], cmp_size);
    int n = 0;
    for (int i = 0; i < o->nsizes; i++)
        if (!n || o->sizes[n - 1] != o->sizes[i])
            o->sizes[n++] = o->sizes[i];
    o->nsizes = n;
    return 0;
}

/* ---- implementations and their tunables ----------------------------------------- */

static const struct { const char *key, *name; } short_keys[] = {
    {"tree", "NUMACOLL_BCAST_TREE"},      {"s", "NUMACOLL_BCAST_QUEUE_LEN"},
    {"q", "NUMACOLL_BCAST_SETS"},         {"f", "NUMACOLL_BCAST_FRAG_SIZE"},
    {"layout", "NUMACOLL_SEG_LAYOUT"},    {"barrier.alg", "NUMACOLL_BARRIER_ALG"},
    {"barrier.tree", "NUMACOLL_BARRIER_TREE"}, {"barrier.numa", "NUMACOLL_BARRIER_NUMA"},
};

static int add_param(struct nc_bench_impl *im, const char *kv, const char *what, char *err,
                     size_t errlen)
{
    const char *eq = strchr(kv, '=');
    char q[NC_QUOTE_LEN];
    if (!eq || eq == kv || !eq[1])
        return fail(err, errlen, "%s: \"%s\" is not KEY=VALUE (e.g. s=128)", what, QUOTE(q, kv));
    if (im->nparams == NC_BENCH_MAX_PARAMS)
        return fail(err, errlen, "%s: too many tunables in one configuration (at most %d)", what,
                    NC_BENCH_MAX_PARAMS);
    struct nc_bench_param *p = &im->params[im->nparams];
    size_t kl = (size_t)(eq - kv);
    if (kl >= sizeof p->key || strlen(eq + 1) >= sizeof p->value)
        return fail(err, errlen, "%s: \"%s\" is too long (at most %zu characters before '=', "
                    "%zu after)", what, QUOTE(q, kv), sizeof p->key - 1, sizeof p->value - 1);
    memcpy(p->key, kv, kl);
    p->key[kl] = '\0';
    strcpy(p->value, eq + 1);
    p->name[0] = '\0';
    for (size_t i = 0; i < sizeof short_keys / sizeof short_keys[0]; i++)
        if (!strcmp(p->key, short_keys[i].key))
            snprintf(p->name, sizeof p->name, "%s", short_keys[i].name);
    if (!p->name[0] && !strncmp(p->key, "NUMACOLL_", 9))
        memcpy(p->name, p->key, sizeof p->name); /* both 64 bytes */
    char val[128];
    if (!p->name[0] || numacoll_param_get(p->name, val, sizeof val, NULL))
        return fail(err, errlen,
                    "%s: unknown tunable \"%s\" (valid: tree, s, q, f, layout, barrier.alg, "
                    "barrier.tree, barrier.numa, or a NUMACOLL_* name that numacoll-info "
                    "--params lists)",
                    what, QUOTE(q, p->key));
    for (int i = 0; i < im->nparams; i++)
        if (!strcmp(im->params[i].name, p->name))
            return fail(err, errlen, "%s: %s given twice in one configuration", what,
                        QUOTE(q, p->key));
    im->nparams++;
    return 0;
}

static int is_numacoll_spec(const char *s)
{
    return !strcmp(s, "numacoll") || !strncmp(s, "numacoll:", 9);
}

static int new_impl(struct nc_bench_opts *o, const char *label, const char *spec,
                    const char *what, char *err, size_t errlen)
{
    char q[NC_QUOTE_LEN];
    if (o->nimpl == NC_BENCH_MAX_IMPLS)
        return fail(err, errlen, "too many implementations (at most %d)", NC_BENCH_MAX_IMPLS);
    if (!*label || strlen(label) >= NC_BENCH_LABEL)
        return fail(err, errlen, "%s: label \"%s\" is empty or too long (valid: 1 to %d "
                    "characters, no blank or quote)", what, QUOTE(q, label), NC_BENCH_LABEL - 1);
    for (const char *c = label; *c; c++)
        if (isspace((unsigned char)*c) || *c == '"')
            return fail(err, errlen, "%s: label \"%s\" holds a blank or a quote (valid: 1 to %d "
                        "characters, no blank or quote)", what, QUOTE(q, label), NC_BENCH_LABEL - 1);
    struct nc_bench_impl *im = &o->impl[o->nimpl];
    memset(im, 0, sizeof *im);
    snprintf(im->label, sizeof im->label, "%s", label);
    if (!strcmp(spec, "native")) {
        im->kind = NC_IMPL_NATIVE;
    } else {
        im->kind = NC_IMPL_NUMACOLL;
        if (spec[8] == ':' && add_param(im, spec + 9, what, err, errlen))
            return -1;
    }
    o->nimpl++;
    return 0;
}

static int parse_impls(struct nc_bench_opts *o, const char *list, char *err, size_t errlen)
{
    char buf[2048], q[NC_QUOTE_LEN];
    if (strlen(list) >= sizeof buf)
        return fail(err, errlen, "--impl: list too long (at most %zu characters)", sizeof buf - 1);
    strcpy(buf, list);
    int labeled = 0; /* the current configuration has a user label */
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *eq = strchr(tok, '=');
        if (!strcmp(tok, "native") || is_numacoll_spec(tok)) {
            if (new_impl(o, tok, tok, "--impl", err, errlen))
                return -1;
            labeled = 0;
        } else if (!strcmp(tok, "memcpy") || !strcmp(tok, "flag") || !strcmp(tok, "cma-copy") ||
                   !strcmp(tok, "flag-sync")) {
            return fail(err, errlen,
                        "--impl: %s is always measured as a reference (--no-limits drops it)", tok);
        } else if (eq && (!strcmp(eq + 1, "native") || is_numacoll_spec(eq + 1))) {
            char label[NC_BENCH_LABEL];
            snprintf(label, sizeof label, "%.*s", (int)(eq - tok), tok);
            if (new_impl(o, label, eq + 1, "--impl", err, errlen))
                return -1;
            labeled = 1;
        } else if (eq && o->nimpl && o->impl[o->nimpl - 1].kind == NC_IMPL_NUMACOLL &&
                   o->impl[o->nimpl - 1].nparams) {
            /* KEY=VALUE continuing numacoll:KEY=VALUE,... */
            struct nc_bench_impl *im = &o->impl[o->nimpl - 1];
            if (add_param(im, tok, "--impl", err, errlen))
                return -1;
            if (!labeled) {
                size_t l = strlen(im->label);
                if (l + 1 + strlen(tok) >= sizeof im->label)
                    return fail(err, errlen, "--impl: configuration too long for its name (at "
                                "most %zu characters; name it LABEL=numacoll:...)",
                                sizeof im->label - 1);
                im->label[l] = ',';
                strcpy(im->label + l + 1, tok);
            }
        } else {
            return fail(err, errlen,
                        "--impl: \"%s\" is not an implementation (valid: native, numacoll, "
                        "numacoll:KEY=VALUE,..., LABEL=numacoll:KEY=VALUE,...)",
                        QUOTE(q, tok));
        }
    }
    return 0;
}

static int parse_sweep(struct nc_bench_opts *o, const char *text, const char *base, char *err,
                       size_t errlen)
{
    struct nc_bench_impl b = {0};
    char q[NC_QUOTE_LEN];
    if (base) {
        char bb[1024];
        if (strlen(base) >= sizeof bb)
            return fail(err, errlen, "--sweep-base: too long (at most %zu characters)",
                        sizeof bb - 1);
        strcpy(bb, base);
        char *save = NULL;
        for (char *t = strtok_r(bb, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (add_param(&b, t, "--sweep-base", err, errlen))
                return -1;
    }
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || !eq[1])
        return fail(err, errlen, "--sweep: \"%s\" is not KEY=V1,V2,... (e.g. s=8,16,32)",
                    QUOTE(q, text));
    char key[64], buf[2048];
    if ((size_t)(eq - text) >= sizeof key || strlen(eq + 1) >= sizeof buf)
        return fail(err, errlen, "--sweep: too long (at most %zu characters before '=', %zu "
                    "after)", sizeof key - 1, sizeof buf - 1);
    snprintf(key, sizeof key, "%.*s", (int)(eq - text), text);
    strcpy(buf, eq + 1);
    char *save = NULL;
    int n = 0;
    for (char *v = strtok_r(buf, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        char spec[NC_BENCH_LABEL];
        if (snprintf(spec, sizeof spec, "numacoll:%s=%s", key, v) >= (int)sizeof spec)
            return fail(err, errlen, "--sweep: value \"%s\" too long (at most %zu characters "
                        "with numacoll:KEY=)", QUOTE(q, v), sizeof spec - 1);
        for (int k = o->nimpl - n; k < o->nimpl; k++)
            if (!strcmp(o->impl[k].label, spec))
                return fail(err, errlen, "--sweep: value \"%s\" given twice", QUOTE(q, v));
        if (new_impl(o, spec, spec, "--sweep", err, errlen))
            return -1;
        struct nc_bench_impl *im = &o->impl[o->nimpl - 1];
        for (int k = 0; k < b.nparams; k++) {
            if (!strcmp(b.params[k].name, im->params[0].name))
                return fail(err, errlen, "--sweep-base sets %s, which --sweep varies",
                            QUOTE(q, b.params[k].key));
            if (im->nparams == NC_BENCH_MAX_PARAMS)
                return fail(err, errlen, "--sweep-base: too many tunables (at most %d with "
                            "the swept one)", NC_BENCH_MAX_PARAMS);
            im->params[im->nparams++] = b.params[k];
        }
        n++;
    }
    if (n < 2)
        return fail(err, errlen, "--sweep: give at least two values");
    return 0;
}

/* ---- saved tunables: every configuration starts from what the environment said -- */

static int nsaved;
static char (*saved_name)[64];
static char (*saved_value)[128];

int nc_bench_params_save(void)
{
    int n = numacoll_param_count();
    if (saved_name)
        return 0;
    saved_name = calloc((size_t)n, sizeof *saved_name);
    saved_value = calloc((size_t)n, sizeof *saved_value);
    if (!saved_name || !saved_value)
        return -1;
    for (int i = 0; i < n; i++) {
        const char *name = NULL;
        if (numacoll_param_describe(i, &name, NULL, NULL, NULL) || !name)
            continue;
        /* describe() gives the name without the NUMACOLL_ prefix */
        snprintf(saved_name[nsaved], sizeof saved_name[0], "%s%s",
                 strncmp(name, "NUMACOLL_", 9) ? "NUMACOLL_" : "", name);
        if (numacoll_param_get(saved_name[nsaved], saved_value[nsaved], sizeof saved_value[0],
                               NULL) == 0)
            nsaved++;
    }
    return 0;
}

void nc_bench_params_restore(void)
{
    for (int i = 0; i < nsaved; i++)
        numacoll_param_set(saved_name[i], saved_value[i]);
}

int nc_bench_params_apply(const struct nc_bench_impl *im, char *err, size_t errlen)
{
    nc_bench_params_restore();
    /* a benchmark communicator is set up on its first call, whatever the environment says */
    numacoll_param_set("NUMACOLL_COMM_MIN_CALLS", "0");
    for (int i = 0; i < im->nparams; i++) {
        const struct nc_bench_param *p = &im->params[i];
        if (numacoll_param_set(p->name, p->value)) {
            const char *name = NULL, *range = "see numacoll-info --params";
            for (int k = 0; k < numacoll_param_count(); k++)
                if (!numacoll_param_describe(k, &name, NULL, NULL, NULL) && name &&
                    !strcmp(name, p->name + 9)) /* describe: without NUMACOLL_ */
                    numacoll_param_describe(k, NULL, NULL, &range, NULL);
            char q1[NC_QUOTE_LEN], q2[NC_QUOTE_LEN], q3[NC_QUOTE_LEN];
            return fail(err, errlen, "%s: invalid value \"%s\" for %s (%s), valid: %s",
                        QUOTE(q1, im->label), QUOTE(q2, p->value), QUOTE(q3, p->key), p->name, range);
        }
    }
    return 0;
}

/* ---- the command line ---------------------------------------------------------- */

int nc_bench_opts_parse(int argc, char **argv, struct nc_bench_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->ncoll = 1;
    o->coll[0] = NC_BENCH_BCAST;
    o->sizes_text = "0:20";
    o->iter_max = 5000;
    o->iter_vol_mib = 250;
    o->warmup = 10;
    o->time_per_size = 1.0;
    o->runs = 1;
    o->limits = 1;
    o->stat = NC_STAT_MAX;
    o->type = NUMACOLL_DOUBLE;
    o->op = NUMACOLL_SUM;
    int zero = 1;
    const char *sizes_opt = "-m", *op_opt = NULL, *type_opt = NULL;
    char q[NC_QUOTE_LEN];
    const char *impl_lists[32];
    int nimpl_lists = 0;

    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *val = NULL;
        const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
#define IS(s) (!strcmp(name, s))
#define NEED()                                                                         \
    do {                                                                               \
        if (!val) {                                                                    \
            if (i + 1 >= argc)                                                         \
                return fail(err, errlen, "%s needs a value", name);                    \
            val = argv[++i];                                                           \
        }                                                                              \
    } while (0)
#define NOVAL()                                                                        \
    do {                                                                               \
        if (val)                                                                       \
            return fail(err, errlen, "%s takes no value", name);                       \
    } while (0)
        if (IS("-h") || IS("--help")) {
            o->help = 1;
        } else if (IS("--version")) {
            o->version = 1;
        } else if (IS("-c") || IS("--collective")) {
            NEED();
            char buf[128];
            if (strlen(val) >= sizeof buf) /* never cut a list short */
                return fail(err, errlen, "--collective: \"%s\" is too long (valid: " COLL_LIST
                            ", comma-separated)", QUOTE(q, val));
            snprintf(buf, sizeof buf, "%s", val);
            o->ncoll = 0;
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int c = 0;
                while (c < NC_BENCH_NCOLL && strcmp(t, coll_names[c]))
                    c++;
                if (c == NC_BENCH_NCOLL)
                    return fail(err, errlen,
                                "--collective: unknown collective \"%s\" (valid: " COLL_LIST ")",
                                QUOTE(q, t));
                for (int k = 0; k < o->ncoll; k++)
                    if ((int)o->coll[k] == c)
                        return fail(err, errlen, "--collective: %s given twice", t);
                o->coll[o->ncoll++] = (enum nc_bench_coll)c;
            }
            if (!o->ncoll)
                return fail(err, errlen, "--collective: no collective given (valid: " COLL_LIST
                            ", comma-separated)");
        } else if (IS("-m") || IS("--msglog")) {
            NEED();
            o->sizes_text = val;
            sizes_opt = IS("-m") ? "-m" : "--msglog";
        } else if (IS("--no-zero")) {
            NOVAL();
            zero = 0;
        } else if (IS("--op")) {
            NEED();
            size_t k = 0;
            while (k < NOPS && strcmp(val, op_names[k]))
                k++;
            if (k == NOPS)
                return fail(err, errlen, "--op: unknown operation \"%s\" (valid: " OPS_VALID ")",
                            QUOTE(q, val));
            o->op = (numacoll_op_t)k;
            op_opt = "--op";
        } else if (IS("--type")) {
            NEED();
            size_t k = 0;
            while (k < NTYPES && strcmp(val, types[k].name) &&
                   (!types[k].alias || strcmp(val, types[k].alias)))
                k++;
            if (k == NTYPES)
                return fail(err, errlen, "--type: unknown type \"%s\" (valid: " TYPES_VALID ")",
                            QUOTE(q, val));
            o->type = types[k].type;
            type_opt = "--type";
        } else if (IS("--iter")) {
            NEED();
            char buf[64];
            snprintf(buf, sizeof buf, "%s", val);
            char *c = strchr(buf, ',');
            if (c)
                *c++ = '\0';
            if (strlen(val) >= sizeof buf || parse_long(buf, 1, 1000000000L, &o->iter_max) ||
                (c && parse_double(c, 0.000001, 1e9, &o->iter_vol_mib)))
                return fail(err, errlen,
                            "--iter: \"%s\" is not R[,V] (valid: R from 1 to 1000000000 calls, V "
                            "from 0.000001 to 1e9 MiB)", QUOTE(q, val));
            if (!c)
                o->iter_vol_mib = 0;
        } else if (IS("--warmup")) {
            long w;
            NEED();
            if (parse_long(val, 0, 1000000, &w))
                return fail(err, errlen, "--warmup: \"%s\" is not a count (valid: 0 to 1000000)",
                            QUOTE(q, val));
            o->warmup = (int)w;
        } else if (IS("--time-per-size")) {
            NEED();
            if (parse_double(val, 0.000001, 3600, &o->time_per_size))
                return fail(err, errlen,
                            "--time-per-size: \"%s\" is not a number of seconds (valid: "
                            "0.000001 to 3600)", QUOTE(q, val));
        } else if (IS("--off-cache")) {
            o->off_cache = 1;
            if (val && parse_double(val, 0.0625, 1 << 16, &o->cache_mib))
                return fail(err, errlen,
                            "--off-cache: \"%s\" is not a cache size in MiB (valid: 0.0625 to "
                            "65536)", QUOTE(q, val));
        } else if (IS("--thp")) {
            NOVAL();
            o->thp = 1;
        } else if (IS("--buf-offset")) {
            long r;
            NEED();
            if (parse_long(val, 0, 4095, &r))
                return fail(err, errlen, "--buf-offset: \"%s\" is not a byte offset (valid: 0 to 4095)",
                            QUOTE(q, val));
            o->buf_offset = (size_t)r;
        } else if (IS("--root")) {
            long r;
            NEED();
            if (parse_long(val, 0, 1 << 24, &r))
                return fail(err, errlen, "--root: \"%s\" is not a rank (valid: 0 to %d)",
                            QUOTE(q, val), 1 << 24);
            o->root = (int)r;
        } else if (IS("--imbalance")) {
            NEED();
            if (parse_double(val, 0, 1, &o->imbalance))
                return fail(err, errlen,
                            "--imbalance: \"%s\" is not a fraction (valid: 0 to 1; the v-forms' "
                            "blocks then range from m down to m (1 - X))", QUOTE(q, val));
        } else if (IS("--root-shift")) {
            NOVAL();
            o->root_shift = 1;
        } else if (IS("--runs")) {
            long r;
            NEED();
            if (parse_long(val, 1, 1000, &r))
                return fail(err, errlen, "--runs: \"%s\" is not a count (valid: 1 to 1000)",
                            QUOTE(q, val));
            o->runs = (int)r;
        } else if (IS("--impl")) {
            NEED();
            if (nimpl_lists == 32)
                return fail(err, errlen, "--impl given too often (at most 32 times)");
            impl_lists[nimpl_lists++] = val;
        } else if (IS("--sweep")) {
            NEED();
            if (o->sweep)
                return fail(err, errlen, "--sweep given twice");
            o->sweep = val;
        } else if (IS("--sweep-base")) {
            NEED();
            o->sweep_base = val;
        } else if (IS("--no-limits")) {
            NOVAL();
            o->limits = 0;
        } else if (IS("--stat")) {
            NEED();
            if (!strcmp(val, "min"))
                o->stat = NC_STAT_MIN;
            else if (!strcmp(val, "avg"))
                o->stat = NC_STAT_AVG;
            else if (!strcmp(val, "max"))
                o->stat = NC_STAT_MAX;
            else
                return fail(err, errlen, "--stat: unknown value \"%s\" (valid: min, avg, max)",
                            QUOTE(q, val));
        } else if (IS("--verify-each")) {
            NOVAL();
            o->verify_each = 1;
        } else if (IS("--csv")) {
            NEED();
            o->csv = val;
        } else if (IS("--plot")) {
            NEED();
            o->plot = val;
        } else if (IS("-q") || IS("--quiet")) {
            o->quiet = 1;
        } else if (IS("--dry-run")) {
            NOVAL();
            o->dry_run = 1;
        } else if (IS("--fake-timings")) {
            NOVAL();
            o->fake = 1;
        } else if (IS("--np")) {
            long n;
            NEED();
            if (parse_long(val, 1, 1 << 20, &n))
                return fail(err, errlen, "--np: \"%s\" is not a number of ranks (valid: 1 to %d)",
                            QUOTE(q, val), 1 << 20);
            o->np = (int)n;
        } else {
            return fail(err, errlen, "unknown option \"%s\" (--help lists them)", QUOTE(q, a));
        }
#undef IS
#undef NEED
#undef NOVAL
    }
    if (o->help || o->version)
        return 0;
    if (parse_sizes(o, zero, sizes_opt, err, errlen))
        return -1;
    if (!nc_bench_has_reduction(o) && (op_opt || type_opt))
        return fail(err, errlen, "%s needs -c reduce or -c allreduce (it applies to reductions "
                    "only)", op_opt ? op_opt : type_opt);
    if (!types[type_index(o->type)].integer && o->op > NUMACOLL_MAX)
        return fail(err, errlen, "--op %s is not defined on --type %s (valid on floating types: "
                    "sum, prod, min, max)", op_names[o->op], nc_bench_type_name(o->type));
    /* whole elements; the sizes are sorted, so equal counts are neighbours */
    size_t tb = nc_bench_type_bytes(o->type);
    o->nred_sizes = 0;
    for (int k = 0; k < o->nsizes; k++) {
        size_t b = o->sizes[k] / tb * tb;
        if (!o->nred_sizes || o->red_sizes[o->nred_sizes - 1] != b)
            o->red_sizes[o->nred_sizes++] = b;
    }
    for (int k = 0; k < nimpl_lists; k++) {
        int before = o->nimpl;
        if (parse_impls(o, impl_lists[k], err, errlen))
            return -1;
        if (o->nimpl == before)
            return fail(err, errlen,
                        "--impl: \"%s\" names no implementation (valid: native, numacoll, "
                        "numacoll:KEY=VALUE,..., LABEL=numacoll:KEY=VALUE,...)",
                        QUOTE(q, impl_lists[k]));
    }
    o->impl_given = nimpl_lists > 0;
    if (!nimpl_lists) {
        new_impl(o, "native", "native", "--impl", err, errlen);
        if (!o->sweep)
            new_impl(o, "numacoll", "numacoll", "--impl", err, errlen);
    }
    if (o->sweep_base && !o->sweep)
        return fail(err, errlen, "--sweep-base needs --sweep");
    if (o->sweep && parse_sweep(o, o->sweep, o->sweep_base, err, errlen))
        return -1;
    for (int a = 0; a < o->nimpl; a++)
        for (int b = 0; b < a; b++)
            if (!strcmp(o->impl[a].label, o->impl[b].label))
                return fail(err, errlen, "implementation \"%s\" given twice",
                            QUOTE(q, o->impl[a].label));
    /* numacoll checks every value itself; the environment's values come back after */
    if (nc_bench_params_save())
        return fail(err, errlen, "out of memory");
    for (int a = 0; a < o->nimpl; a++)
        if (o->impl[a].kind == NC_IMPL_NUMACOLL && nc_bench_params_apply(&o->impl[a], err, errlen)) {
            nc_bench_params_restore();
            return -1;
        }
    nc_bench_params_restore();
    if (o->plot && o->csv && !strcmp(o->csv, "-"))
        return fail(err, errlen, "--plot needs --csv FILE (or no --csv), not --csv -");
    if (o->np && !o->dry_run && !o->fake)
        return fail(err, errlen, "--np is for --dry-run and --fake-timings (mpirun sets p)");
    if (o->np && o->root >= o->np)
        return fail(err, errlen, "--root %d: there are only %d ranks", o->root, o->np);
    return 0;
}

/* ---- plan ----------------------------------------------------------------------- */

int nc_bench_coll_sizes(const struct nc_bench_opts *o, enum nc_bench_coll c, const size_t **sizes)
{
    static const size_t zero[1] = {0};
    if (c == NC_BENCH_BARRIER) {
        *sizes = zero;
        return 1;
    }
    if (nc_bench_coll_is_reduction(c)) {
        *sizes = o->red_sizes;
        return o->nred_sizes;
    }
    *sizes = o->sizes;
    return o->nsizes;
}

long nc_bench_iter_cap(const struct nc_bench_opts *o, size_t bytes)
{
    long n = o->iter_max;
    if (o->iter_vol_mib > 0 && bytes > 0) {
        double v = o->iter_vol_mib * 1048576.0 / (double)bytes;
        if (v < (double)n)
            n = v < 1 ? 1 : (long)v;
    }
    return n;
}

void nc_bench_pool_geometry(const struct nc_bench_opts *o, size_t pool_min, size_t bytes,
                            size_t *stride, size_t *nbuf)
{
    /* page-aligned buffers; the guard bytes after each message stay inside its stride */
    size_t s = (bytes + NC_BENCH_CANARY + o->buf_offset + 4095) & ~(size_t)4095;
    size_t n = 1;
    if (o->off_cache) {
        n = (pool_min + s - 1) / s;
        if (n < 2)
            n = 2;
    }
    *stride = s;
    *nbuf = n;
}

void nc_bench_print_plan(FILE *out, const struct nc_bench_opts *o, int p, size_t llc,
                         const char *llc_source)
{
    char b1[32], b2[32];
    fprintf(out, "numacoll-bench plan\n");
    fprintf(out, "  collectives   ");
    for (int c = 0; c < o->ncoll; c++)
        fprintf(out, "%s%s", c ? "," : "", nc_bench_coll_name(o->coll[c]));
    fprintf(out, "\n");
    if (p)
        fprintf(out, "  p             %d\n", p);
    else
        fprintf(out, "  p             (the launcher's)\n");
    fprintf(out, "  root          %s%d\n", o->root_shift ? "shifting call by call, from " : "",
            o->root);
    if (o->imbalance > 0)
        fprintf(out, "  imbalance     %g: v-form blocks of m (1 - %g k / (p - 1)) bytes\n",
                o->imbalance, o->imbalance);
    if (nc_bench_has_reduction(o))
        fprintf(out, "  reduction     %s on %s (%s, %zu-byte elements; sizes rounded down to whole "
                "elements)\n", nc_bench_op_mpi_name(o->op), nc_bench_type_mpi_name(o->type),
                nc_bench_type_name(o->type), nc_bench_type_bytes(o->type));
    if (o->iter_vol_mib > 0)
        fprintf(out, "  iterations    at most %ld, at most %g MiB per size, at most %g s of calls"
                " per size, at least min(%d, %ld)\n",
                o->iter_max, o->iter_vol_mib, o->time_per_size, NC_BENCH_MIN_ITER, o->iter_max);
    else
        fprintf(out, "  iterations    at most %ld, at most %g s of calls per size, at least "
                "min(%d, %ld)\n",
                o->iter_max, o->time_per_size, NC_BENCH_MIN_ITER, o->iter_max);
    fprintf(out, "  warm-up       %d calls (at most %g s)\n", o->warmup, o->time_per_size / 4);
    fprintf(out, "  runs          %d%s\n", o->runs,
            o->runs >= 3 ? " (min and max of t_max dropped, the rest averaged)" : "");
    size_t pool_min = 0;
    if (o->off_cache) {
        if (o->cache_mib > 0) {
            llc = (size_t)(o->cache_mib * 1048576.0);
            llc_source = "--off-cache";
        }
        pool_min = 2 * llc;
        nc_bench_format_size(llc, b1, sizeof b1);
        nc_bench_format_size(pool_min, b2, sizeof b2);
        fprintf(out, "  cache         off: each call uses the next buffer of a pool of %s per rank"
                " (2 x LLC %s, %s)\n", b2, b1, llc_source);
    } else {
        fprintf(out, "  cache         resident: one buffer per rank, reused by every call\n");
    }
    fprintf(out, "  verification  %s\n", o->verify_each
            ? "after every call (root buffer refilled outside the timing)"
            : "every buffer after the timing, with guard bytes");
    if (nc_bench_has_reduction(o))
        fprintf(out, "                reductions: known inputs (a function of rank and element), "
                "%s result checked against the exact value, guard bytes of every used buffer\n",
                o->verify_each ? "every call's" : "the first call's");
    fprintf(out, "  ratios        t_%s\n", nc_bench_stat_name(o->stat));
    fprintf(out, "  implementations\n");
    int lw = o->limits && nc_bench_has_reduction(o) ? (int)strlen("reduce-kernel") : 8;
    for (int i = 0; i < o->nimpl; i++)
        if ((int)strlen(o->impl[i].label) > lw)
            lw = (int)strlen(o->impl[i].label);
    for (int i = 0; i < o->nimpl; i++) {
        const struct nc_bench_impl *im = &o->impl[i];
        fprintf(out, "    %-*s  %s", lw, im->label,
                im->kind == NC_IMPL_NATIVE ? "PMPI (the MPI library's own)" : "numacoll (MPI_*)");
        for (int k = 0; k < im->nparams; k++)
            fprintf(out, "%s%s=%s", k ? " " : ": ", im->params[k].name, im->params[k].value);
        fprintf(out, "\n");
    }
    if (o->limits) {
        fprintf(out, "    %-*s  one core's memcpy, same cache policy\n", lw, "memcpy");
        if (nc_bench_has_reduction(o))
            fprintf(out, "    %-*s  one core's numacoll_reduce_local (inout op= in), same cache "
                    "policy\n", lw, "reduce-kernel");
        if (nc_bench_has_copy_limit(o))
            fprintf(out, "    %-*s  %s: each rank's blocks by process_vm_readv from their senders, "
                    "all ranks at once, nothing else (p > 1)\n", lw, "cma-copy",
                    "bcast and the gather family");
        if (nc_bench_has_sync_limit(o))
            fprintf(out, "    %-*s  %s: the collective's waits alone, a word per rank, "
                    "timed like it (p > 1)\n", lw, "flag-sync", "every collective but barrier");
        fprintf(out, "    %-*s  one-way cache-line hand-off between ranks 0 and 1\n", lw, "flag");
    }
    double worst = 0;
    for (int c = 0; c < o->ncoll; c++) {
        const size_t *sizes;
        int ns = nc_bench_coll_sizes(o, o->coll[c], &sizes);
        int red = nc_bench_coll_is_reduction(o->coll[c]);
        fprintf(out, "  %s sizes%s\n", nc_bench_coll_name(o->coll[c]),
                red ? " (a buffer: the send buffer, then the receive buffer)" : "");
        if (red)
            fprintf(out, "    %10s %10s %10s %8s %10s\n", "bytes", "count", "iter_cap", "buffers",
                    "stride");
        else
            fprintf(out, "    %10s %10s %8s %10s\n", "bytes", "iter_cap", "buffers", "stride");
        for (int s = 0; s < ns; s++) {
            size_t stride, nbuf;
            nc_bench_pool_geometry(o, pool_min,
                                   nc_bench_slot_bytes(o->coll[c], sizes[s], p > 0 ? p : 2),
                                   &stride,
                                   &nbuf);
            if (red)
                fprintf(out, "    %10zu %10zu %10ld %8zu %10zu\n", sizes[s],
                        sizes[s] / nc_bench_type_bytes(o->type), nc_bench_iter_cap(o, sizes[s]),
                        nbuf, stride);
            else
                fprintf(out, "    %10zu %10ld %8zu %10zu\n", sizes[s],
                        nc_bench_iter_cap(o, sizes[s]), nbuf, stride);
        }
        int nim = o->nimpl;
        if (o->limits && nc_bench_coll_has_sync_limit(o->coll[c]))
            nim += 1; /* flag-sync */
        if (o->limits && o->coll[c] == NC_BENCH_BCAST)
            nim += 2; /* memcpy, cma-copy */
        else if (o->limits && nc_bench_coll_is_exchange(o->coll[c]))
            nim += 1; /* cma-copy */
        else if (o->limits && red)
            nim += 2; /* memcpy, reduce-kernel */
        worst += (double)ns * nim * o->time_per_size * 1.25;
    }
    if (o->limits)
        worst += o->time_per_size * 1.25;
    fprintf(out, "  time          at most about %.0f s of calls (%d run%s), plus set-up and"
            " verification\n", worst * o->runs, o->runs, o->runs > 1 ? "s" : "");
    if (o->csv)
        fprintf(out, "  csv           %s\n", o->csv);
    if (o->plot)
        fprintf(out, "  plot          %s\n", o->plot);
}
