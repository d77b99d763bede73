/*
 * numacoll-tune: measure this node, fit the paper's time model, choose f, s, q
 * and the tree, check the choice with real MPI_Bcast calls, write a tune file.
 *
 *   mpirun -np P numacoll-tune [--budget BYTES] [--quick] [--output FILE] [--plot DIR]
 *
 * Steps (rank 0 prints each):
 *   1. direct constants: t from memcpy (every member at once), t_a from
 *      contended atomic decrements of one shared counter, the one-hop flag
 *      latency (ping-pong) for comparison with the fitted t_w; on a node with
 *      several NUMA nodes, the remote / local copy-time ratio r (rank 0,
 *      from the first NUMA node's CPUs: a buffer on the second node against
 *      one on its own; nc_topo_copy_ratio()), written as NUMACOLL_NUMA_RATIO
 *      for NUMACOLL_NUMA_FORWARD=auto;
 *   2. broadcasts on numacoll teams over a design of (f, s, m) that covers the
 *      three regimes of the model; least-squares fit of t, t_w, t_wo (t_a known);
 *   3. f* = sqrt(b t_w / t) page-rounded, s* = b / f* for the budget b (default
 *      1 % of the memory per core); t_w and t also go to the tune file
 *      (NUMACOLL_BCAST_MODEL_TW_NS, _T_PS), from which a root cuts each call
 *      into fragments of about sqrt(m t_w / t) bytes, at most f (steps 2-5
 *      measure fixed fragments of f, the paper's model; 5d the per-call ones);
 *   4. tree types, then q, chosen by measurement at (f*, s*);
 *   5. MPI_Bcast through numacoll's wrapper on MPI_Comm_dup'ed communicators
 *      after numacoll_param_set(), at the choice and its neighbours at the same
 *      budget, off-cache: predicted vs measured; the model's choice is kept
 *      unless a neighbour is more than NC_TUNE_KEEP_PCT faster over the sizes;
 *   5b. reductions: MPI_Allreduce through the wrapper picks the switch point
 *      between the one-hand-off and the reduce-scatter path
 *      (NUMACOLL_REDUCE_SMALL_MAX) and the slot size (NUMACOLL_REDUCE_FRAG_SIZE),
 *      then checks the pair against the built-in defaults size by size and
 *      writes the defaults when it is slower anywhere;
 *   5c. transports: MPI_Bcast through the wrapper, off-cache, forced through
 *      the segment and by CMA (single copy) at two sizes: the lines' constants
 *      are the cost model's (NUMACOLL_COST_*, model/nc_model.h); the
 *      cooperative CMA it then predicts is checked against a measurement;
 *   5d. the whole choice (steps 3-5c) against the built-in defaults, size by
 *      size from 0 B to 16 MiB in one interleaved run: wherever the choice is
 *      slower, the tune file keeps the defaults (for the queue, for the
 *      transport, or for both), so a tune file never makes a size slower;
 *   5e. the gather family: MPI_Gather, MPI_Allgather, MPI_Alltoall and
 *      MPI_Scatter through the segment, by CMA and as the library chooses:
 *      the measured crossovers next to the model's; the largest becomes
 *      NUMACOLL_GATHER_CMA_MIN when it is faster than the library's choice
 *      somewhere and slower nowhere; without it, the switch points that the
 *      cost constants of 5c (when 5d keeps them) give the family are checked
 *      the same way, and the tune file leaves the constants out when they are
 *      slower somewhere;
 *   5f. the reductions' transports: MPI_Reduce and MPI_Allreduce through the
 *      slots and by CMA (with 5b's choice), next to the built-in rule: the
 *      measured crossovers become NUMACOLL_REDUCE_CMA_MIN and
 *      NUMACOLL_ALLREDUCE_CMA_MIN unless slower than the rule somewhere;
 *   6. the tune file section (--output), the plots (--plot).
 * Steps 2-5 tune the queue: they force NUMACOLL_TRANSPORT=shm.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/nc_tunefile.h"
#include "core/nc_team.h"
#include "model/nc_model.h"
#include "nc_tune_model.h"
#include "numacoll.h"
#include "nc_tool_abort.h"
#include "numacoll_mpi.h"
#include "nc_tool_data.h"
#include "topo/nc_topo.h"
#include "nc_tool_launcher.h"

/* Keep the model's choice unless a measured neighbour is faster by more. */
#define NC_TUNE_KEEP_PCT 5.0

#define FMAX ((size_t)64 << 20)
#define SMAX 4096

typedef struct opts {
    double budget;
    int quick;
    const char *output, *plot;
} opts_t;

static MPI_Comm node;
static int rank, p;
static size_t page;

#define say(...)                         \
    do {                                 \
        if (rank == 0) {                 \
            printf(__VA_ARGS__);         \
            fflush(stdout);              \
        }                                \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double max_all(double x)
{
    double r;
    PMPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_MAX, node);
    return r;
}

static double mean_all(double x)
{
    double r;
    PMPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_SUM, node);
    return r / p;
}

/* ---- 1. direct constants ------------------------------------------------------- */

static double measure_memcpy(size_t bytes, int reps)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double *v = malloc(sizeof(double) * (size_t)reps), t = NAN;
    if (a && b && v) {
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        PMPI_Barrier(node);
        for (int i = 0; i < reps; i++) {
            double t0 = now();
            memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
            v[i] = now() - t0;
        }
        t = median(v, reps) / (double)bytes;
    }
    free(a);
    free(b);
    free(v);
    return max_all(t);
}

typedef struct shared_words {
    _Atomic long counter;
    char pad0[64 - sizeof(long)];
    _Atomic long ping;
    char pad1[64 - sizeof(long)];
    _Atomic long pong;
} shared_words_t;

static void measure_atomic_hop(int iters, double *t_a, double *hop)
{
    MPI_Win win;
    shared_words_t *w;
    MPI_Aint sz = rank == 0 ? (MPI_Aint)sizeof *w : 0;
    MPI_Win_allocate_shared(sz, 64, MPI_INFO_NULL, node, &w, &win);
    int du;
    MPI_Aint qsz;
    MPI_Win_shared_query(win, 0, &qsz, &du, &w);
    if (rank == 0) {
        atomic_store(&w->counter, 0);
        atomic_store(&w->ping, 0);
        atomic_store(&w->pong, 0);
    }
    PMPI_Barrier(node);
    double t0 = now();
    for (int i = 0; i < iters; i++)
        atomic_fetch_sub_explicit(&w->counter, 1, memory_order_acq_rel);
    *t_a = mean_all((now() - t0) / iters);
    PMPI_Barrier(node);
    /* Ping-pong between member 0 and the last member: one-way = round trip / 2.
     * The flags are the only communication: acquire loads pair with the release
     * stores of the other side. */
    *hop = NAN;
    if (p > 1) {
        int n = iters / 10 > 100 ? iters / 10 : 100;
        t0 = now();
        if (rank == 0) {
            for (long i = 1; i <= n; i++) {
                atomic_store_explicit(&w->ping, i, memory_order_release);
                while (atomic_load_explicit(&w->pong, memory_order_acquire) != i)
                    ;
            }
        } else if (rank == p - 1) {
            for (long i = 1; i <= n; i++) {
                while (atomic_load_explicit(&w->ping, memory_order_acquire) != i)
                    ;
                atomic_store_explicit(&w->pong, i, memory_order_release);
            }
        }
        double rt = (now() - t0) / n;
        PMPI_Bcast(&rt, 1, MPI_DOUBLE, 0, node);
        *hop = rt / 2;
    }
    MPI_Win_free(&win);
}

/* ---- teams on the core API (no wrapper) ----------------------------------------- */

static int allgather(void *ctx, const void *mine, void *all, size_t len)
{
    (void)ctx;
    return PMPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, node) == MPI_SUCCESS
               ? 0
               : NUMACOLL_ERR_BOOTSTRAP;
}

static void set_params(const nc_tune_setting_t *c, const char *tree)
{
    char v[32];
    snprintf(v, sizeof v, "%zu", c->f);
    numacoll_param_set("BCAST_FRAG_SIZE", v);
    snprintf(v, sizeof v, "%d", c->s);
    numacoll_param_set("BCAST_QUEUE_LEN", v);
    snprintf(v, sizeof v, "%d", c->q);
    numacoll_param_set("BCAST_SETS", v);
    numacoll_param_set("BCAST_TREE", tree);
    /* fixed fragments of f: the paper's model, which steps 2-5 fit and check */
    numacoll_param_set("BCAST_MODEL_TW_NS", "0");
}

static numacoll_team_t *team_for(const nc_tune_setting_t *c, const char *tree)
{
    set_params(c, tree);
    numacoll_bootstrap_t bs = {.rank = rank, .size = p, .allgather = allgather};
    numacoll_team_t *t = NULL;
    int rc = numacoll_team_create(&bs, &t);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "numacoll-tune: team (f=%zu s=%d q=%d tree=%s): %s\n", c->f, c->s, c->q,
                    tree, numacoll_strerror(rc));
        nc_tool_abort(MPI_COMM_WORLD, 1);
    }
    return t;
}

/* Per call the slowest member's time (t_max, as IMB reports), then the 20th
 * percentile over the calls: a shared, busy node slows some calls down by orders
 * of magnitude, and the low percentile keeps the undisturbed ones. Frees v. */
static double robust_tmax(double *v, int n)
{
    double *mx = malloc(sizeof(double) * (size_t)n);
    PMPI_Allreduce(v, mx, n, MPI_DOUBLE, MPI_MAX, node);
    qsort(mx, (size_t)n, sizeof *mx, cmp_double);
    double r = mx[(n - 1) / 5];
    free(mx);
    free(v);
    return r;
}

/* Iterations so that a point takes about `target` seconds (same on every member). */
static int iterations(double one, double target, int lo, int hi)
{
    double it = target / (one > 1e-9 ? one : 1e-9);
    return it < lo ? lo : it > hi ? hi : (int)it;
}

/* One measured point, the way every step times its calls: two warm-up calls
 * (i = -2, -1), the last of which sizes the count (about 0.05 s, 0.01 with
 * --quick, from 3 to hi calls), then call i = 0 .. n-1 each after prep(i)
 * (untimed, may be NULL) and a barrier (numacoll_barrier(team) when team is
 * set, else PMPI_Barrier(c)); the result is t_max per call over the members,
 * 20th percentile over the calls (robust_tmax). */
typedef struct tpoint {
    MPI_Comm c;
    numacoll_team_t *team;
    int hi, hi_quick;
    void (*prep)(const struct tpoint *, int i);
    void (*call)(const struct tpoint *, int i);
    /* what the calls use */
    char *buf;
    size_t bufbytes, m, step, nwin;
    double *in, *out;
    int root, kind;
} tpoint_t;

static double time_point(const tpoint_t *tp, const opts_t *o)
{
    double *v = NULL;
    int n = 0;
    for (int i = -2; i < n; i++) {
        if (i >= 0 && tp->prep)
            tp->prep(tp, i);
        if (tp->team)
            numacoll_barrier(tp->team);
        else
            PMPI_Barrier(tp->c);
        const double t0 = now();
        tp->call(tp, i);
        const double dt = now() - t0;
        if (i == -1) {
            n = iterations(max_all(dt), o->quick ? 0.01 : 0.05, 3,
                           o->quick ? tp->hi_quick : tp->hi);
            if (!(v = malloc(sizeof(double) * (size_t)n)))
                nc_tool_abort(MPI_COMM_WORLD, 1);
        } else if (i >= 0) {
            v[i] = dt;
        }
    }
    return robust_tmax(v, n); /* frees v */
}

static void team_bcast_call(const tpoint_t *tp, int i)
{
    (void)i;
    numacoll_bcast(tp->team, tp->buf, tp->m, 0);
}

/* Time of one broadcast of m bytes from member 0 (calls separated by barriers). */
static double time_team_bcast(numacoll_team_t *t, char *buf, size_t m, const opts_t *o)
{
    const tpoint_t tp = {.team = t, .hi = 200, .hi_quick = 30, .call = team_bcast_call,
                         .buf = buf, .m = m};
    return time_point(&tp, o);
}

/* Call i's window of the buffer (the warm-up calls: the first). */
static char *bcast_window(const tpoint_t *tp, int i)
{
    return i < 0 ? tp->buf : tp->buf + (size_t)i % tp->nwin * tp->step;
}

static void mpi_bcast_prep(const tpoint_t *tp, int i)
{
    memset(bcast_window(tp, i), i, tp->m);
}

static void mpi_bcast_call(const tpoint_t *tp, int i)
{
    MPI_Bcast(bcast_window(tp, i), (int)tp->m, MPI_BYTE, 0, tp->c);
}

/* The same through numacoll's MPI_Bcast wrapper, on a fresh duplicate of MPI_COMM_WORLD
 * created after numacoll_param_set(), so that its team takes these settings. */
/* Off-cache, as numacoll-bench --off-cache: call i uses the next page-aligned
 * window of buf (bufbytes > 2b, beyond the last-level cache), so the choice
 * is made with the user buffers of real programs, not with one hot one; and,
 * as the bench does, every member writes its window just before the call (the
 * root's data was just produced; a message larger than the caches is not
 * hot even so). */
static double time_mpi_bcast(MPI_Comm c, char *buf, size_t bufbytes, size_t m,
                             const opts_t *o)
{
    const size_t step = (m + page - 1) / page * page; /* page: this node's, set in main() */
    const tpoint_t tp = {.c = c, .hi = 200, .hi_quick = 30, .prep = mpi_bcast_prep,
                         .call = mpi_bcast_call, .buf = buf, .m = m, .step = step,
                         .nwin = step && bufbytes >= step ? bufbytes / step : 1};
    return time_point(&tp, o);
}

static void fmt_size(double b, char *buf, size_t len)
{
    if (b >= 1 << 20 && fmod(b, 1 << 20) == 0)
        snprintf(buf, len, "%.0fM", b / (1 << 20));
    else if (b >= 1 << 10 && fmod(b, 1 << 10) == 0)
        snprintf(buf, len, "%.0fK", b / (1 << 10));
    else
        snprintf(buf, len, "%.0f", b);
}

/* A switch point for the report: "never" (SIZE_MAX, or the tunables' 2^50
 * and above), else fmt_size(). */
static void fmt_switch(size_t v, char *buf, size_t len)
{
    if (v >= (size_t)1 << 50)
        snprintf(buf, len, "never");
    else
        fmt_size((double)v, buf, len);
}

/* ---- 5c, 5d. transports, and the choice against the defaults ------------------------ */

/* After the first call on duplicate c set numacoll up: say so if some member
 * has no team there, since then the MPI library's `what` is measured. */
static void warn_inactive(MPI_Comm c, const char *what)
{
    int active = numacoll_mpi_comm_active(c), all;
    PMPI_Allreduce(&active, &all, 1, MPI_INT, MPI_MIN, node);
    if (all != 1)
        say("   warning: numacoll is not active on the duplicate (%d): measuring the MPI "
            "library's %s\n",
            all, what);
}

/* A duplicate of MPI_COMM_WORLD whose team takes `n` tunables (name, value);
 * a NULL value restores the default. */
static MPI_Comm bcast_comm(const char *const kv[][2], int n, char *buf)
{
    for (int i = 0; i < n; i++)
        numacoll_param_set(kv[i][0],
                           kv[i][1] ? kv[i][1] : nc_param_desc(nc_param_lookup(kv[i][0]))->defval);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Bcast(buf, 1, MPI_BYTE, 0, c); /* sets numacoll up on c with these values */
    warn_inactive(c, "broadcast");
    return c;
}

typedef struct xfer_choice {
    int measured;      /* the constants below come from this node */
    nc_xfer_model_t x;
    int k;             /* CPUs of the team */
    size_t crossover;  /* measured: CMA from here on (SIZE_MAX: never), 0: not measured */
} xfer_choice_t;

static xfer_choice_t tune_transport(const opts_t *o, char *buf, size_t bufbytes)
{
    xfer_choice_t r = {0};
    /* The lines are those of the built-in queue (its f, s, q, tree). */
#define DEFAULT_QUEUE {"BCAST_FRAG_SIZE", NULL}, {"BCAST_QUEUE_LEN", NULL}, {"BCAST_SETS", NULL}, \
                      {"BCAST_TREE", NULL}, {"BCAST_MODEL_TW_NS", NULL}, {"BCAST_MODEL_T_PS", NULL}
    const char *shm[][2] = {{"TRANSPORT", "shm"}, {"CMA_COOP", NULL}, DEFAULT_QUEUE};
    const char *one[][2] = {{"TRANSPORT", "cma"}, {"CMA_COOP", "0"}, DEFAULT_QUEUE};
    const char *coop[][2] = {{"TRANSPORT", "cma"}, {"CMA_COOP", "1"}, DEFAULT_QUEUE};
#undef DEFAULT_QUEUE
    say("5c. transports: MPI_Bcast off-cache, through the segment and by CMA (single copy)\n");
    /* The single copy first: its team's probe says whether CMA is allowed. */
    MPI_Comm c = bcast_comm(one, (int)(sizeof one / sizeof one[0]), buf);
    numacoll_team_t *t = numacoll_mpi_comm_team(c);
    int ok = t && t->cma, all;
    r.k = t ? t->ncpus : 1;
    /* t is c's team, gone with c: keep what is read from it later */
    const size_t inline_max = t ? (size_t)NC_CFG_NUM(&t->cfg, BCAST_INLINE_MAX) : 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
    if (t)
        nc_team_cost_model(&t->cfg, &r.x); /* the defaults, kept if nothing is measured */
    if (!all) {
        say("   CMA is not allowed between these ranks (%s): nothing to choose\n\n",
            t ? t->cma_why : "no team");
        MPI_Comm_free(&c);
        numacoll_param_set("TRANSPORT", "shm");
        return r;
    }
    const double m1 = 256 << 10, m2 = fmin(4 << 20, (double)bufbytes / 4);
    double ts[2], tc[2], tco[2];
    MPI_Comm cs = bcast_comm(shm, (int)(sizeof shm / sizeof shm[0]), buf);
    tc[0] = time_mpi_bcast(c, buf, bufbytes, (size_t)m1, o);
    tc[1] = time_mpi_bcast(c, buf, bufbytes, (size_t)m2, o);
    MPI_Comm_free(&c);
    c = cs;
    ts[0] = time_mpi_bcast(c, buf, bufbytes, (size_t)m1, o);
    ts[1] = time_mpi_bcast(c, buf, bufbytes, (size_t)m2, o);
    MPI_Comm_free(&c);
    c = bcast_comm(coop, (int)(sizeof coop / sizeof coop[0]), buf);
    tco[0] = time_mpi_bcast(c, buf, bufbytes, (size_t)m1, o);
    tco[1] = time_mpi_bcast(c, buf, bufbytes, (size_t)m2, o);
    MPI_Comm_free(&c);
    numacoll_param_set("TRANSPORT", "shm");
    numacoll_param_set("CMA_COOP", "1");
    /* Invert the lines of model/nc_model.h for this p and k. */
    const double ss = (ts[1] - ts[0]) / (m2 - m1), sc = (tc[1] - tc[0]) / (m2 - m1);
    if (ss > 0 && sc > 0) {
        r.measured = 1;
        r.x.shm_byte = ss / fmax(1.0, (double)p / r.k);
        r.x.shm_lat = fmax(0, ts[0] - ss * m1);
        r.x.cma_byte = sc / fmax(1.0, (p - 1.0) / r.k);
        r.x.cma_lat = fmax(0, tc[0] - sc * m1);
    }
    char a[32], b2[32];
    fmt_size(m1, a, sizeof a);
    fmt_size(m2, b2, sizeof b2);
    say("   %-22s %10s %10s\n", "", a, b2);
    say("   %-22s %10.2f %10.2f us\n", "segment", ts[0] * 1e6, ts[1] * 1e6);
    say("   %-22s %10.2f %10.2f us\n", "CMA, single copy", tc[0] * 1e6, tc[1] * 1e6);
    say("   %-22s %10.2f %10.2f us (model: %.2f %.2f)\n", "CMA, cooperative", tco[0] * 1e6,
        tco[1] * 1e6, 1e6 * nc_xfer_time_cma(&r.x, m1, p, r.k, 1),
        1e6 * nc_xfer_time_cma(&r.x, m2, p, r.k, 1));
    if (!r.measured) {
        say("   the times do not grow with the size: keeping the built-in constants\n\n");
        return r;
    }
    const size_t sw = nc_cma_switch_point(&r.x, p, r.k, 1, inline_max);
    if (sw == SIZE_MAX)
        snprintf(a, sizeof a, "never");
    else
        snprintf(a, sizeof a, "%zu", sw);
    say("   constants: segment %.2f us + %.0f ps/byte, CMA %.2f us + %.0f ps/byte; "
        "the model's switch point for p=%d on %d CPUs: %s\n",
        r.x.shm_lat * 1e6, r.x.shm_byte * 1e12, r.x.cma_lat * 1e6, r.x.cma_byte * 1e12, p, r.k, a);
    /* The lines ignore what the caches do to the segment below the queue's
     * size; the switch point written is the measured crossover: the smallest
     * size from which the cooperative copy is faster at every larger size
     * measured. */
    MPI_Comm cseg = bcast_comm(shm, (int)(sizeof shm / sizeof shm[0]), buf), ccma = bcast_comm(coop, (int)(sizeof coop / sizeof coop[0]), buf);
    numacoll_param_set("TRANSPORT", "shm");
    enum { NX = 10 };
    double xm[NX], xs[NX], xc[NX];
    int nx = 0;
    say("   crossover:");
    for (double m = 32 << 10; m <= (double)bufbytes / 4 && m <= 16 << 20 && nx < NX; m *= 2) {
        xm[nx] = m;
        xs[nx] = time_mpi_bcast(cseg, buf, bufbytes, (size_t)m, o);
        xc[nx] = time_mpi_bcast(ccma, buf, bufbytes, (size_t)m, o);
        fmt_size(m, a, sizeof a);
        say(" %s %.1f/%.1f", a, xs[nx] * 1e6, xc[nx] * 1e6);
        nx++;
    }
    MPI_Comm_free(&cseg);
    MPI_Comm_free(&ccma);
    r.crossover = SIZE_MAX;
    for (int i = nx - 1; i >= 0 && xc[i] <= xs[i]; i--)
        r.crossover = (size_t)xm[i];
    fmt_switch(r.crossover, a, sizeof a);
    say(" us (segment/CMA)\n   -> measured switch point: %s (NUMACOLL_CMA_MIN)\n\n", a);
    return r;
}

/* The tunables a choice sets (NULL value: the default). */
typedef struct choice_kv {
    const char *kv[12][2];
    char v[12][32];
    int n;
} choice_kv_t;

/* Tunable k gets the number v (set) or its default (!set). */
static void choice_add(choice_kv_t *c, const char *k, int set, double v)
{
    if (c->n >= (int)(sizeof c->kv / sizeof c->kv[0]))
        abort(); /* choice_kv_t too small for choice_of(): a bug */
    snprintf(c->v[c->n], sizeof c->v[c->n], "%.0f", v);
    c->kv[c->n][0] = k;
    c->kv[c->n][1] = set ? c->v[c->n] : NULL;
    c->n++;
}

static void choice_of(choice_kv_t *c, const nc_tune_setting_t *q, const char *tree,
                      const xfer_choice_t *x)
{
    const int m = x && x->measured;
    c->n = 0;
    choice_add(c, "BCAST_FRAG_SIZE", !!q, q ? (double)q->f : 0);
    choice_add(c, "BCAST_QUEUE_LEN", !!q, q ? q->s : 0);
    choice_add(c, "BCAST_SETS", !!q, q ? q->q : 0);
    choice_add(c, "BCAST_TREE", 0, 0);
    c->kv[c->n - 1][1] = q ? tree : NULL;
    /* the per-call fragments: the fitted constants go with the tuned queue */
    const int fit = q && q->tw_ns >= 1 && q->t_ps >= 1;
    choice_add(c, "BCAST_MODEL_TW_NS", fit, fit ? q->tw_ns : 0);
    choice_add(c, "BCAST_MODEL_T_PS", fit, fit ? q->t_ps : 0);
    choice_add(c, "TRANSPORT", 0, 0);
    choice_add(c, "COST_SHM_NS", m, m ? x->x.shm_lat * 1e9 : 0);
    choice_add(c, "COST_SHM_PS", m, m ? fmax(1, x->x.shm_byte * 1e12) : 0);
    choice_add(c, "COST_CMA_NS", m, m ? x->x.cma_lat * 1e9 : 0);
    choice_add(c, "COST_CMA_PS", m, m ? fmax(1, x->x.cma_byte * 1e12) : 0);
    /* never: the largest value, which no message reaches */
    choice_add(c, "CMA_MIN", m && x->crossover,
               m && x->crossover != SIZE_MAX ? (double)x->crossover : 0x1p50);
}

/* 5d. Candidates: 0 the built-in defaults, 1 the tuned queue with the default
 * transport constants, 2 the default queue with the tuned constants, 3 both.
 * Returns the candidate to write: the one with the most tuning that is
 * nowhere slower than the defaults by more than the noise (KEEP_NOISE). */
#define KEEP_NOISE 1.03
#define KEEP_NOISE_S 0.1e-6
static int validate(const opts_t *o, const nc_tune_setting_t *q, const char *tree,
                    const xfer_choice_t *x, char *buf, size_t bufbytes)
{
    static const double sizes[] = {0, 64, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    double tm[4][NS];
    choice_kv_t ck[4];
    choice_of(&ck[0], NULL, tree, NULL);
    choice_of(&ck[1], q, tree, NULL);
    choice_of(&ck[2], NULL, tree, x);
    choice_of(&ck[3], q, tree, x);
    MPI_Comm c[4];
    for (int i = 0; i < 4; i++)
        c[i] = bcast_comm(ck[i].kv, ck[i].n, buf);
    say("5d. the choice against the built-in defaults: MPI_Bcast off-cache, interleaved [us]\n");
    say("   %10s %10s %10s %10s %10s\n", "m", "defaults", "queue", "transport", "both");
    for (int k = 0; k < NS; k++) {
        const size_t m = (size_t)fmin(sizes[k], (double)bufbytes / 4);
        for (int i = 0; i < 4; i++)
            tm[i][k] = time_mpi_bcast(c[i], buf, bufbytes, m, o);
        /* A candidate slower than the defaults is measured twice more, with
         * the defaults, and keeps its best: one disturbed point must not
         * decide, a real slowdown stays. */
        for (int r = 0; r < 2; r++)
            for (int i = 1; i < 4; i++)
                if (tm[i][k] > tm[0][k] * KEEP_NOISE + KEEP_NOISE_S) {
                    tm[0][k] = fmin(tm[0][k], time_mpi_bcast(c[0], buf, bufbytes, m, o));
                    tm[i][k] = fmin(tm[i][k], time_mpi_bcast(c[i], buf, bufbytes, m, o));
                }
        say("   %10zu %10.2f %10.2f %10.2f %10.2f\n", m, tm[0][k] * 1e6, tm[1][k] * 1e6,
            tm[2][k] * 1e6, tm[3][k] * 1e6);
    }
    for (int i = 0; i < 4; i++)
        MPI_Comm_free(&c[i]);
    int pick = 0;
    static const int order[] = {3, 1, 2};
    for (int j = 0; j < 3 && !pick; j++) {
        int i = order[j], ok = 1;
        for (int k = 0; k < NS; k++)
            ok &= tm[i][k] <= tm[0][k] * KEEP_NOISE + KEEP_NOISE_S;
        if (ok)
            pick = i;
    }
    static const char *what[] = {"the built-in defaults (the tuned values were slower at some size)",
                                 "the tuned queue, the default transport constants",
                                 "the default queue, the tuned transport constants",
                                 "the tuned queue and transport constants"};
    say("   -> the tune file gets %s\n\n", what[pick]);
    return pick;
}

/* ---- 5e. the gather family's transports ------------------------------------------- */

/* The bytes a member sends in one exchange of kind k, m per block. */
static size_t xg_send_bytes(int k, size_t m)
{
    return k == NC_XG_ALLTOALL || k == NC_XG_SCATTER ? (size_t)p * m : m;
}

/* Time of one exchange of kind k (NC_XG_ROOTED: MPI_Gather to root 0,
 * NC_XG_SCATTER: MPI_Scatter from root 0, NC_XG_ALLGATHER, NC_XG_ALLTOALL) of
 * m bytes per block on c, each call in the next window of the pool (send
 * blocks, then receive blocks). */
static void mpi_xg_call(const tpoint_t *tp, int i)
{
    const size_t m = tp->m, sbytes = xg_send_bytes(tp->kind, m);
    char *s = tp->buf + (size_t)(i < 0 ? 0 : i) % tp->nwin * tp->step, *r = s + sbytes;
    if (tp->kind == NC_XG_SCATTER)
        MPI_Scatter(s, (int)m, MPI_BYTE, r, (int)m, MPI_BYTE, 0, tp->c);
    else if (tp->kind == NC_XG_ALLTOALL)
        MPI_Alltoall(s, (int)m, MPI_BYTE, r, (int)m, MPI_BYTE, tp->c);
    else if (tp->kind == NC_XG_ALLGATHER)
        MPI_Allgather(s, (int)m, MPI_BYTE, r, (int)m, MPI_BYTE, tp->c);
    else
        MPI_Gather(s, (int)m, MPI_BYTE, r, (int)m, MPI_BYTE, 0, tp->c);
}

static double time_mpi_xg(MPI_Comm c, int k, char *pool, size_t poolbytes, size_t m,
                          const opts_t *o)
{
    const size_t sbytes = xg_send_bytes(k, m);
    const size_t step = (sbytes + (size_t)p * m + page - 1) / page * page;
    const tpoint_t tp = {.c = c, .hi = 100, .hi_quick = 20, .call = mpi_xg_call, .buf = pool,
                         .m = m, .step = step, .nwin = poolbytes >= step ? poolbytes / step : 1,
                         .kind = k};
    return time_point(&tp, o);
}

/* 5e's comparison of a choice of transports for the family (CMA from
 * cmin[k] on for kind k) with the library's own (from lib_min[k]), at the
 * sizes where the two differ: *slower when the choice is slower somewhere,
 * *gains when it is faster somewhere, each by more than NC_TUNE_KEEP_PCT and
 * 0.1 us after two more timings there. what names the choice in the lines. */
typedef struct xg_times {
    MPI_Comm cs, cc, cl;   /* the segment, CMA, the library's choice */
    char *pool;
    size_t poolbytes;
    const double *xm;
    int nx;
    double (*ts)[8], (*tc)[8], (*tlib)[8];
} xg_times_t;

static void xg_compare(const opts_t *o, const xg_times_t *x, const size_t *cmin,
                       const size_t *lib_min, const char *what, int *slower, int *gains)
{
    const char *const *name = nc_xg_kind_name;
    *slower = *gains = 0;
    for (int k = 0; k < NC_XG_KINDS; k++)
        for (int i = 0; i < x->nx; i++) {
            const size_t m = (size_t)x->xm[i];
            const int by_cma = m >= cmin[k];
            if (by_cma == (m >= lib_min[k]))
                continue;
            double tx = by_cma ? x->tc[k][i] : x->ts[k][i], tr = x->tlib[k][i];
            const int was_faster = tx < tr * (1 - NC_TUNE_KEEP_PCT / 100) - 1e-7;
            for (int j = 0; j < 2 && (was_faster || tx > tr * (1 + NC_TUNE_KEEP_PCT / 100) + 1e-7);
                 j++) {
                tx = fmin(tx, time_mpi_xg(by_cma ? x->cc : x->cs, k, x->pool, x->poolbytes, m, o));
                tr = fmin(tr, time_mpi_xg(x->cl, k, x->pool, x->poolbytes, m, o));
            }
            if (tx > tr * (1 + NC_TUNE_KEEP_PCT / 100) + 1e-7) {
                say("   %s at %zu: %s, %s (%.1f us), is slower than the library's choice "
                    "(%.1f us)\n",
                    name[k], m, what, by_cma ? "CMA" : "the segment", tx * 1e6, tr * 1e6);
                *slower = 1;
            } else if (tx < tr * (1 - NC_TUNE_KEEP_PCT / 100) - 1e-7) {
                *gains = 1;
            }
        }
}

/* 5e: MPI_Gather (root 0), MPI_Allgather, MPI_Alltoall and MPI_Scatter (root
 * 0), off-cache, through the segment and by CMA: each kind's measured
 * crossover (the smallest size from which CMA is faster at every larger size
 * measured) next to the cost model's switch point with the constants of 5c
 * (nc_xg_switch_point). The largest of the four crossovers (CMA where every kind gains) is
 * NUMACOLL_GATHER_CMA_MIN, written only when the transport it picks is
 * faster than the library's own choice (the built-in model and rules) at
 * some size where the two differ, and slower at none (xg_compare()): a
 * value that only ties would override rules that follow the team's
 * placement (the cache probe, the streamed pair) for no measured gain.
 * Without it, the tune file's cost constants (kept: 5c's, when 5d keeps
 * them for the broadcast) move the family's switch points too: those are
 * compared with the library's choice the same way, and *drop_cost is set
 * when they are slower somewhere (the tune file then leaves the constants
 * out). Returns the value to write, 0 for nothing. */
static size_t tune_xg_transport(const opts_t *o, const xfer_choice_t *xc,
                                const xfer_choice_t *kept, char *pool, size_t poolbytes,
                                int *drop_cost)
{
    const char *shm[][2] = {{"TRANSPORT", "shm"}, {"CMA_COOP", NULL}, {"GATHER_CMA_MIN", "0"}};
    const char *cma[][2] = {{"TRANSPORT", "cma"}, {"CMA_COOP", NULL}, {"GATHER_CMA_MIN", "0"}};
    const char *lib[][2] = {{"TRANSPORT", "auto"}, {"CMA_COOP", NULL}, {"GATHER_CMA_MIN", "0"}};
    static const char *const cost_key[4] = {"COST_SHM_NS", "COST_SHM_PS", "COST_CMA_NS",
                                            "COST_CMA_PS"};
    *drop_cost = 0;
    say("5e. the gather family: MPI_Gather (root 0), MPI_Allgather, MPI_Alltoall and "
        "MPI_Scatter (root 0) off-cache, through the segment, by CMA and as the library "
        "chooses (the model) [us]\n");
    char was[3][32], cost_was[4][32], cost_new[4][32];
    numacoll_param_get("TRANSPORT", was[0], sizeof was[0], NULL);
    numacoll_param_get("GATHER_CMA_MIN", was[1], sizeof was[1], NULL);
    numacoll_param_get("CMA_COOP", was[2], sizeof was[2], NULL);
    MPI_Comm cs = bcast_comm(shm, 3, pool), cc = bcast_comm(cma, 3, pool),
             cl = bcast_comm(lib, 3, pool), ct = MPI_COMM_NULL;
    /* the library under the tune file: the same, with the cost constants it
     * will carry (the values choice_of() writes) */
    const int tuned = kept && kept->measured;
    if (tuned) {
        const double v[4] = {kept->x.shm_lat * 1e9, fmax(1, kept->x.shm_byte * 1e12),
                             kept->x.cma_lat * 1e9, fmax(1, kept->x.cma_byte * 1e12)};
        for (int i = 0; i < 4; i++) {
            numacoll_param_get(cost_key[i], cost_was[i], sizeof cost_was[i], NULL);
            snprintf(cost_new[i], sizeof cost_new[i], "%.0f", v[i]);
            numacoll_param_set(cost_key[i], cost_new[i]);
        }
        ct = bcast_comm(lib, 3, pool);
        for (int i = 0; i < 4; i++)
            numacoll_param_set(cost_key[i], cost_was[i]);
    }
    numacoll_param_set("TRANSPORT", was[0]);
    numacoll_param_set("GATHER_CMA_MIN", was[1]);
    numacoll_param_set("CMA_COOP", was[2]);
    numacoll_team_t *t = numacoll_mpi_comm_team(cc), *tl = numacoll_mpi_comm_team(cl),
                    *tshm = numacoll_mpi_comm_team(cs),
                    *tt = tuned ? numacoll_mpi_comm_team(ct) : NULL;
    /* CMA allowed, and every team active with its full slots (the budget
     * shortens them with the queue), else the times are not the library's */
    int ok = t && t->cma && tl && tshm && !t->queue_reduced && !tl->queue_reduced &&
             !tshm->queue_reduced && (!tuned || (tt && !tt->queue_reduced)),
        all;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
    if (!all) {
        say("   CMA is not allowed between these ranks, or a team is inactive or shortened by "
            "the shared-memory budget: nothing to compare%s\n\n",
            tuned ? "; the tune file leaves out the cost constants of 5c, unchecked here" : "");
        *drop_cost = tuned;
        MPI_Comm_free(&cs);
        MPI_Comm_free(&cc);
        MPI_Comm_free(&cl);
        if (tuned)
            MPI_Comm_free(&ct);
        return 0;
    }
    size_t lib_min[NC_XG_KINDS], tuned_min[NC_XG_KINDS];
    memcpy(lib_min, tl->gather_cma_min, sizeof lib_min);
    if (tuned) {
        memcpy(tuned_min, tt->gather_cma_min, sizeof tuned_min);
        MPI_Comm_free(&ct);
    }
    enum { NX = 8 };
    const char *const *name = nc_xg_kind_name;
    double xm[NX], ts[NC_XG_KINDS][NX], tc[NC_XG_KINDS][NX], tlib[NC_XG_KINDS][NX];
    int nx = 0;
    const double top = o->quick ? 1 << 20 : 4 << 20;
    say("   %8s", "m");
    for (int k = 0; k < NC_XG_KINDS; k++)
        say(" %9s seg %9s CMA %9s lib", name[k], name[k], name[k]);
    say("\n");
    for (double m = 32 << 10; m <= top && nx < NX; m *= o->quick ? 4 : 2) {
        xm[nx] = m;
        say("   %8.0f", m);
        for (int k = 0; k < NC_XG_KINDS; k++) {
            ts[k][nx] = time_mpi_xg(cs, k, pool, poolbytes, (size_t)m, o);
            tc[k][nx] = time_mpi_xg(cc, k, pool, poolbytes, (size_t)m, o);
            tlib[k][nx] = time_mpi_xg(cl, k, pool, poolbytes, (size_t)m, o);
            say(" %13.1f %13.1f %13.1f", ts[k][nx] * 1e6, tc[k][nx] * 1e6, tlib[k][nx] * 1e6);
        }
        say("\n");
        nx++;
    }
    char inl[32];
    numacoll_param_get("GATHER_INLINE_MAX", inl, sizeof inl, NULL);
    size_t choice = 0; /* the largest crossover; SIZE_MAX: never */
    for (int k = 0; k < NC_XG_KINDS; k++) {
        size_t cross = SIZE_MAX;
        for (int i = nx - 1; i >= 0 && tc[k][i] <= ts[k][i]; i--)
            cross = (size_t)xm[i];
        if (cross > choice)
            choice = cross;
        const size_t sw = nc_xg_switch_point(&xc->x, k, p, xc->k, 1,
                                             (size_t)strtoull(inl, NULL, 10));
        char m1[32], m2[32], m3[32];
        if (cross == SIZE_MAX)
            snprintf(m1, sizeof m1, "never (up to %.0f)", top);
        else
            fmt_size((double)cross, m1, sizeof m1);
        fmt_switch(sw, m2, sizeof m2);
        fmt_switch(lib_min[k], m3, sizeof m3);
        say("   -> %s: measured crossover %s, the model's switch point %s (constants %s), "
            "the library's now %s\n",
            name[k], m1, m2, xc->measured ? "of 5c" : "built in", m3);
    }
    const xg_times_t xt = {cs, cc, cl, pool, poolbytes, xm, nx, ts, tc, tlib};
    /* against the library's choice, where the two take different transports */
    size_t cmin[NC_XG_KINDS];
    for (int k = 0; k < NC_XG_KINDS; k++)
        cmin[k] = choice;
    int slower, gains;
    xg_compare(o, &xt, cmin, lib_min, "CMA for the family from the largest crossover", &slower,
               &gains);
    char c[32];
    fmt_switch(choice, c, sizeof c);
    size_t w = 0;
    if (slower)
        say("   -> CMA from %s for the family is slower than the library's choice at some "
            "size: nothing written\n", c);
    else if (!gains)
        say("   -> CMA from %s for the family is nowhere faster than the library's choice by "
            "more than %.0f %%: nothing written\n", c, NC_TUNE_KEEP_PCT);
    else
        w = choice == SIZE_MAX ? (size_t)1 << 50 : choice;
    if (!w && tuned) {
        /* the tune file's cost constants alone: the family's switch points they give */
        for (int k = 0; k < NC_XG_KINDS; k++) {
            char m1[32], m2[32];
            fmt_switch(tuned_min[k], m1, sizeof m1);
            fmt_switch(lib_min[k], m2, sizeof m2);
            say("   %s with the tune file's cost constants: CMA from %s (without: %s)\n",
                name[k], m1, m2);
        }
        xg_compare(o, &xt, tuned_min, lib_min, "with the tune file's cost constants", &slower,
                   &gains);
        if (slower) {
            *drop_cost = 1;
            say("   -> the cost constants of 5c would make the family slower at some size: "
                "the tune file leaves them out (the built-in ones stay)\n");
        }
    }
    MPI_Comm_free(&cs);
    MPI_Comm_free(&cc);
    MPI_Comm_free(&cl);
    if (w)
        say("   -> NUMACOLL_GATHER_CMA_MIN = %zu (CMA from %s for the whole family)\n", w, c);
    say("\n");
    return w;
}

/* ---- 5b. reductions ---------------------------------------------------------------- */

/* A duplicate of MPI_COMM_WORLD whose numacoll team has these reduction
 * tunables (they are read when the team is created, at its first call). */
static MPI_Comm reduce_comm(size_t small_max, size_t frag)
{
    char v[32];
    snprintf(v, sizeof v, "%zu", small_max);
    numacoll_param_set("REDUCE_SMALL_MAX", v);
    snprintf(v, sizeof v, "%zu", frag);
    numacoll_param_set("REDUCE_FRAG_SIZE", v);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    double x = 0, y;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, c); /* sets numacoll up on c */
    warn_inactive(c, "allreduce");
    return c;
}

/* Time of one MPI_Allreduce (root < 0) or MPI_Reduce to root of m bytes of
 * doubles (MPI_SUM) on c: t_max per call, 20th percentile over the calls, as
 * the broadcasts. */
static void mpi_red_call(const tpoint_t *tp, int i)
{
    (void)i;
    const int n8 = (int)(tp->m / sizeof(double));
    if (tp->root < 0)
        MPI_Allreduce(tp->in, tp->out, n8, MPI_DOUBLE, MPI_SUM, tp->c);
    else
        MPI_Reduce(tp->in, tp->out, n8, MPI_DOUBLE, MPI_SUM, tp->root, tp->c);
}

static double time_mpi_red(MPI_Comm c, double *in, double *out, size_t m, int root,
                           const opts_t *o)
{
    const tpoint_t tp = {.c = c, .hi = 200, .hi_quick = 30, .call = mpi_red_call, .m = m,
                         .in = in, .out = out, .root = root};
    return time_point(&tp, o);
}

static double time_mpi_allreduce(MPI_Comm c, double *in, double *out, size_t m, const opts_t *o)
{
    return time_mpi_red(c, in, out, m, -1, o);
}

typedef struct red_choice {
    size_t small_max, frag;
    int defaults_kept; /* the choice was slower somewhere than the built-in defaults */
} red_choice_t;

/* 5b: the switch point between the one-hand-off and the reduce-scatter path
 * (the largest size up to which the first wins at every measured size), the
 * slot size (kept at the default unless another is NC_TUNE_KEEP_PCT faster
 * over the large sizes), then the pair against the built-in defaults at every
 * size, for MPI_Allreduce and MPI_Reduce (root 0; both take the tunables, and
 * a reduce can lose where an allreduce gains: the root alone reads a small
 * call's slots): where it is more than NC_TUNE_KEEP_PCT slower anywhere, the
 * defaults are written instead. Tuning never makes a size slower. */
static red_choice_t tune_reductions(const opts_t *o)
{
    char dsm[32], dfr[32];
    numacoll_param_get("REDUCE_SMALL_MAX", dsm, sizeof dsm, NULL);
    numacoll_param_get("REDUCE_FRAG_SIZE", dfr, sizeof dfr, NULL);
    const size_t def_small = strtoull(dsm, NULL, 10), def_frag = strtoull(dfr, NULL, 10);
    const size_t maxm = o->quick ? 1 << 20 : 4 << 20;
    double *in = malloc(maxm), *out = malloc(maxm);
    if (!in || !out)
        nc_tool_abort(MPI_COMM_WORLD, 1);
    for (size_t k = 0; k < maxm / sizeof *in; k++)
        in[k] = (double)(k % 1000) + rank;

    say("5b. MPI_Allreduce (MPI_DOUBLE, MPI_SUM) through numacoll's wrapper, cache-resident\n");
    /* the switch point */
    static const size_t sw_full[] = {512, 1024, 2048, 4096, 8192, 16384, 32768};
    static const size_t sw_quick[] = {1024, 4096, 16384};
    const size_t *sw = o->quick ? sw_quick : sw_full;
    const int nsw = o->quick ? 3 : 7;
    MPI_Comm cs = reduce_comm(65536, 65536), cl = reduce_comm(0, 65536);
    red_choice_t ch = {0, def_frag, 0};
    int small_wins = 1;
    say("   %8s %14s %14s\n", "m", "one hand-off", "reduce-scatter");
    for (int i = 0; i < nsw; i++) {
        double ts = time_mpi_allreduce(cs, in, out, sw[i], o);
        double tl = time_mpi_allreduce(cl, in, out, sw[i], o);
        say("   %8zu %11.2f us %11.2f us\n", sw[i], ts * 1e6, tl * 1e6);
        if (small_wins && ts <= tl)
            ch.small_max = sw[i];
        else
            small_wins = 0;
    }
    MPI_Comm_free(&cs);
    MPI_Comm_free(&cl);
    say("   -> NUMACOLL_REDUCE_SMALL_MAX = %zu\n", ch.small_max);

    /* the slot size */
    static const size_t fr_full[] = {65536, 262144, 1 << 20};
    static const size_t fr_quick[] = {65536, 262144};
    const size_t *fr = o->quick ? fr_quick : fr_full;
    const int nfr = o->quick ? 2 : 3;
    static const size_t big_full[] = {262144, 1 << 20, 4 << 20};
    static const size_t big_quick[] = {262144, 1 << 20};
    const size_t *big = o->quick ? big_quick : big_full;
    const int nbig = o->quick ? 2 : 3;
    double tf[3][3], score[3];
    int def_i = 0;
    for (int i = 0; i < nfr; i++) {
        if (fr[i] == def_frag)
            def_i = i;
        MPI_Comm c = reduce_comm(ch.small_max, fr[i]);
        for (int k = 0; k < nbig; k++)
            tf[i][k] = time_mpi_allreduce(c, in, out, big[k], o);
        MPI_Comm_free(&c);
    }
    int pick = def_i;
    for (int i = 0; i < nfr; i++) {
        double lsum = 0;
        for (int k = 0; k < nbig; k++) {
            double b = INFINITY;
            for (int j = 0; j < nfr; j++)
                b = fmin(b, tf[j][k]);
            lsum += log(tf[i][k] / b);
        }
        score[i] = exp(lsum / nbig);
    }
    for (int i = 0; i < nfr; i++)
        if (score[i] < score[pick] && 100 * (score[def_i] / score[i] - 1) > NC_TUNE_KEEP_PCT)
            pick = i;
    say("   %8s", "slot");
    for (int k = 0; k < nbig; k++)
        say(" %10zu B", big[k]);
    say("   time / best\n");
    for (int i = 0; i < nfr; i++) {
        say("   %8zu", fr[i]);
        for (int k = 0; k < nbig; k++)
            say(" %9.1f us", tf[i][k] * 1e6);
        say("   %.3f%s\n", score[i], i == def_i ? " (default)" : "");
    }
    ch.frag = fr[pick];
    say("   -> NUMACOLL_REDUCE_FRAG_SIZE = %zu\n", ch.frag);

    /* against the defaults, size by size */
    if (ch.small_max != def_small || ch.frag != def_frag) {
        static const size_t vs_full[] = {8,     1024,  2048,   4096,    8192,   16384,
                                         32768, 65536, 262144, 1 << 20, 4 << 20};
        static const size_t vs_quick[] = {8, 2048, 4096, 16384, 262144, 1 << 20};
        const size_t *vs = o->quick ? vs_quick : vs_full;
        const int nvs = o->quick ? 6 : 11;
        MPI_Comm cc = reduce_comm(ch.small_max, ch.frag), cd = reduce_comm(def_small, def_frag);
        say("   %10s %8s %12s %12s\n", "call", "m", "choice", "defaults");
        const size_t slo = ch.small_max < def_small ? ch.small_max : def_small;
        const size_t shi = ch.small_max < def_small ? def_small : ch.small_max;
        for (int k = 0; k < nvs; k++) {
            /* only where the two take different paths or slot sizes */
            const int differ = (vs[k] > slo && vs[k] <= shi) || (vs[k] > slo && ch.frag != def_frag);
            if (!differ)
                continue;
            for (int root = -1; root <= 0; root++) {
                double tc = time_mpi_red(cc, in, out, vs[k], root, o);
                double td = time_mpi_red(cd, in, out, vs[k], root, o);
                const int slower = tc > td * (1 + NC_TUNE_KEEP_PCT / 100);
                say("   %10s %8zu %9.2f us %9.2f us%s\n", root < 0 ? "allreduce" : "reduce",
                    vs[k], tc * 1e6, td * 1e6, slower ? "  <- the choice is slower" : "");
                ch.defaults_kept |= slower;
            }
        }
        MPI_Comm_free(&cc);
        MPI_Comm_free(&cd);
        if (ch.defaults_kept) {
            ch.small_max = def_small;
            ch.frag = def_frag;
            say("   -> slower than the defaults at some size: the defaults are written\n");
        } else {
            say("   -> nowhere slower than the defaults: kept\n");
        }
    } else {
        say("   -> the defaults\n");
    }
    say("\n");
    numacoll_param_set("REDUCE_SMALL_MAX", dsm);
    numacoll_param_set("REDUCE_FRAG_SIZE", dfr);
    free(in);
    free(out);
    return ch;
}

/* ---- 5f. the reductions' transports ---------------------------------------------- */

/* A duplicate of MPI_COMM_WORLD whose team takes reductions through the slots
 * (shm), by CMA above the one-hand-off size (cma) or by the built-in rule
 * (auto, both switch points 0), with 5b's small max and slot size. */
static MPI_Comm red_transport_comm(const char *transport, const red_choice_t *rc)
{
    numacoll_param_set("TRANSPORT", transport);
    numacoll_param_set("REDUCE_CMA_MIN", "0");
    numacoll_param_set("ALLREDUCE_CMA_MIN", "0");
    return reduce_comm(rc->small_max, rc->frag);
}

typedef struct red_xfer {
    int measured;  /* CMA is allowed between the ranks and was timed */
    size_t min[2]; /* [0] reduce, [1] allreduce: the switch point to write; 0: none
                      (the default kept: the choice was slower somewhere) */
} red_xfer_t;

/* 5f: MPI_Reduce (root 0) and MPI_Allreduce, cache-resident as in 5b, through
 * the slots and by CMA from 32 KiB to 16 MiB (quick: 64 KiB to 1 MiB),
 * interleaved with the built-in rule. The measured crossover (the smallest
 * size from which CMA is faster at every larger size measured; 2^50: never)
 * becomes NUMACOLL_REDUCE_CMA_MIN / NUMACOLL_ALLREDUCE_CMA_MIN, unless it is
 * slower than the built-in rule at some size by more than NC_TUNE_KEEP_PCT
 * (and 0.1 us) after two more timings there: then nothing is written and the
 * rule stays. Tuning never makes a reduction size slower. */
static red_xfer_t tune_red_transport(const opts_t *o, const red_choice_t *rc)
{
    red_xfer_t rx = {0, {0, 0}};
    static const char *const kept[] = {"TRANSPORT", "REDUCE_CMA_MIN", "ALLREDUCE_CMA_MIN",
                                       "REDUCE_SMALL_MAX", "REDUCE_FRAG_SIZE"};
    enum { NKEPT = sizeof kept / sizeof kept[0] };
    char was[NKEPT][32];
    for (int k = 0; k < NKEPT; k++)
        numacoll_param_get(kept[k], was[k], sizeof was[k], NULL);
    say("5f. the reductions' transports: MPI_Reduce (root 0) and MPI_Allreduce (MPI_DOUBLE, "
        "MPI_SUM), cache-resident, through the slots and by CMA, next to the built-in rule\n");
    MPI_Comm cc = red_transport_comm("cma", rc);
    numacoll_team_t *t = numacoll_mpi_comm_team(cc);
    int ok = t && t->cma, all;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
    if (!all) {
        say("   CMA is not allowed between these ranks (%s): nothing to choose\n\n",
            t ? t->cma_why : "no team");
        MPI_Comm_free(&cc);
        for (int k = 0; k < NKEPT; k++)
            numacoll_param_set(kept[k], was[k]);
        return rx;
    }
    MPI_Comm cs = red_transport_comm("shm", rc), cd = red_transport_comm("auto", rc);
    /* Every team active and with its full slots (the budget shortens them with
     * the queue), else the times would be the MPI library's or another F's. */
    numacoll_team_t *tshm = numacoll_mpi_comm_team(cs), *trule = numacoll_mpi_comm_team(cd);
    t = numacoll_mpi_comm_team(cc);
    ok = t && tshm && trule && !t->queue_reduced && !tshm->queue_reduced && !trule->queue_reduced;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
    /* the rule's switch points, as the library resolved them for this team */
    size_t rule_min[2] = {SIZE_MAX, SIZE_MAX};
    if (trule)
        memcpy(rule_min, trule->reduce_cma_min, sizeof rule_min);
    if (!all) {
        say("   numacoll is not active on every duplicate, or the shared-memory budget "
            "shortened its slots: nothing measured\n\n");
        MPI_Comm_free(&cc);
        MPI_Comm_free(&cs);
        MPI_Comm_free(&cd);
        for (int k = 0; k < NKEPT; k++)
            numacoll_param_set(kept[k], was[k]);
        return rx;
    }
    enum { NX = 10 };
    const size_t lo = o->quick ? 64 << 10 : 32 << 10, hi = o->quick ? 1 << 20 : 16 << 20;
    const size_t step = o->quick ? 4 : 2;
    double *in = malloc(hi), *out = malloc(hi);
    if (!in || !out)
        nc_tool_abort(MPI_COMM_WORLD, 1);
    for (size_t k = 0; k < hi / sizeof *in; k++)
        in[k] = (double)(k % 1000) + rank;
    static const char *const name[2] = {"reduce", "allreduce"};
    static const char *const key[2] = {"NUMACOLL_REDUCE_CMA_MIN", "NUMACOLL_ALLREDUCE_CMA_MIN"};
    for (int a = 0; a < 2; a++) {
        const int root = a ? -1 : 0;
        size_t xm[NX];
        double ts[NX], tc[NX], td[NX];
        int nx = 0;
        say("   %-9s %8s %11s %11s %11s\n", name[a], "m", "slots", "CMA", "rule");
        for (size_t m = lo; m <= hi && nx < NX; m *= step, nx++) {
            xm[nx] = m;
            ts[nx] = time_mpi_red(cs, in, out, m, root, o);
            tc[nx] = time_mpi_red(cc, in, out, m, root, o);
            td[nx] = time_mpi_red(cd, in, out, m, root, o);
            say("   %-9s %8zu %8.1f us %8.1f us %8.1f us\n", "", m, ts[nx] * 1e6, tc[nx] * 1e6,
                td[nx] * 1e6);
        }
        size_t cross = SIZE_MAX;
        for (int i = nx - 1; i >= 0 && tc[i] <= ts[i]; i--)
            cross = xm[i];
        /* against the rule, size by size, where the two take different transports */
        int slower = 0;
        for (int i = 0; i < nx; i++) {
            const int by_cma = xm[i] >= cross;
            double tx = by_cma ? tc[i] : ts[i], tr = td[i];
            if (by_cma == (xm[i] >= rule_min[a]) || tx <= tr * (1 + NC_TUNE_KEEP_PCT / 100) + 1e-7)
                continue;
            MPI_Comm cx = by_cma ? cc : cs;
            for (int j = 0; j < 2; j++) {
                tx = fmin(tx, time_mpi_red(cx, in, out, xm[i], root, o));
                tr = fmin(tr, time_mpi_red(cd, in, out, xm[i], root, o));
            }
            if (tx > tr * (1 + NC_TUNE_KEEP_PCT / 100) + 1e-7) {
                say("   %-9s %8zu: the crossover's %s (%.1f us) is slower than the rule "
                    "(%.1f us)\n",
                    "", xm[i], by_cma ? "CMA" : "slots", tx * 1e6, tr * 1e6);
                slower = 1;
            }
        }
        char c[32];
        fmt_switch(cross, c, sizeof c);
        if (slower) {
            say("   -> %s: measured crossover %s, slower than the rule at some size: nothing "
                "written (%s stays 0, the rule)\n",
                name[a], c, key[a]);
        } else {
            rx.min[a] = cross == SIZE_MAX ? (size_t)1 << 50 : cross;
            say("   -> %s: measured crossover %s: %s = %zu\n", name[a], c, key[a], rx.min[a]);
        }
    }
    rx.measured = 1;
    MPI_Comm_free(&cc);
    MPI_Comm_free(&cs);
    MPI_Comm_free(&cd);
    for (int k = 0; k < NKEPT; k++)
        numacoll_param_set(kept[k], was[k]);
    free(in);
    free(out);
    say("\n");
    return rx;
}

/* ---- options ------------------------------------------------------------------------ */

static int parse_size(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024; end++; break;
    case 'm': case 'M': mult = 1024 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (end == s || *end || !(v > 0))
        return -1;
    *out = v * mult;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P numacoll-tune [options]   (all P ranks on this node)\n"
            "  --budget BYTES  queue bytes s*f per member (suffix k/m/g); default 1%% of the\n"
            "                  memory per core (the paper's proposal; about the L2 size per\n"
            "                  core chose better here, docs/tools.md)\n"
            "  --quick         small budget (1 MiB unless --budget) and few points: seconds\n"
            "  --output FILE   write (or update) the tune file section for this machine and P\n"
            "  --plot DIR      figure 4 (time vs f, with its two terms) and time vs s, model and\n"
            "                  measured: CSV files and, with python3-matplotlib, PNG files\n"
            "  --version, --help\n");
}

/* ---- plots ----------------------------------------------------------------------------- */

static void plot(const opts_t *o, const nc_model_params_t *mp, const nc_tune_setting_t *best,
                 const char *tree, char *buf, size_t bufbytes, double b)
{
    double m = 2 * b; /* two queue turns: both terms of figure 4 matter */
    /* Measured points: f at the same budget, and s at f*. */
    nc_tune_setting_t fs[16], ss[8];
    int nf = 0, ns = 0;
    for (double k = 1.0 / 8; k <= 8.01 && nf < 16; k *= 2) {
        size_t f = (size_t)fmax(1, ceil((double)best->f * k / (double)page)) * page;
        int s = (int)fmin(SMAX, fmax(1, b / (double)f));
        if (f <= FMAX && (!nf || fs[nf - 1].f != f))
            fs[nf++] = (nc_tune_setting_t){.f = f, .s = s, .q = 1};
    }
    for (double k = 0.25; k <= 2.01 && ns < 8; k *= 2) {
        int s = (int)fmin(SMAX, fmax(1, round(best->s * k)));
        if (!ns || ss[ns - 1].s != s)
            ss[ns++] = (nc_tune_setting_t){.f = best->f, .s = s, .q = 1};
    }
    double tf[16], ts[8];
    for (int i = 0; i < nf; i++) {
        numacoll_team_t *t = team_for(&fs[i], tree);
        tf[i] = time_team_bcast(t, buf, (size_t)fmin(m, (double)bufbytes), o);
        numacoll_team_destroy(t);
    }
    for (int i = 0; i < ns; i++) {
        numacoll_team_t *t = team_for(&ss[i], tree);
        ts[i] = time_team_bcast(t, buf, (size_t)fmin(m, (double)bufbytes), o);
        numacoll_team_destroy(t);
    }
    if (rank != 0)
        return;
    mkdir(o->plot, 0755);
    char path[PATH_MAX];
    double c = mp->t_wo + mp->t_a;
    snprintf(path, sizeof path, "%s/fig4_model_f.csv", o->plot);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "numacoll-tune: %s: cannot write\n", path);
        return;
    }
    fprintf(fp, "# m=%.0f b=%.0f t=%g t_w=%g t_wo=%g t_a=%g f_star=%zu s_star=%d\n", m, b, mp->t,
            mp->t_w, mp->t_wo, mp->t_a, best->f, best->s);
    fprintf(fp, "f,total,queue_term,notify_term,copy_term\n");
    for (double f = (double)page; f <= 64.0 * (double)best->f && f <= b; f *= 1.05) {
        double s = b / f;
        if (s < 1)
            break;
        double turns = ceil(m / b - 1e-12);
        fprintf(fp, "%.0f,%g,%g,%g,%g\n", f, nc_model_time(mp, m, f, s, 1), turns * (c + f * mp->t),
                ceil(m / f - 1e-12) * mp->t_w, m * mp->t);
    }
    fclose(fp);
    snprintf(path, sizeof path, "%s/fig4_measured_f.csv", o->plot);
    fp = fopen(path, "w");
    fprintf(fp, "f,s,measured,model\n");
    for (int i = 0; i < nf; i++)
        fprintf(fp, "%zu,%d,%g,%g\n", fs[i].f, fs[i].s, tf[i],
                nc_model_time(mp, m, (double)fs[i].f, fs[i].s, 1));
    fclose(fp);
    snprintf(path, sizeof path, "%s/time_vs_s_model.csv", o->plot);
    fp = fopen(path, "w");
    fprintf(fp, "# m=%.0f f=%zu\ns,model\n", m, best->f);
    for (double s = 1; s <= 4.0 * best->s && s <= SMAX; s = s < 16 ? s + 1 : s * 1.05)
        fprintf(fp, "%g,%g\n", s, nc_model_time(mp, m, (double)best->f, s, 1));
    fclose(fp);
    snprintf(path, sizeof path, "%s/time_vs_s_measured.csv", o->plot);
    fp = fopen(path, "w");
    fprintf(fp, "s,measured,model\n");
    for (int i = 0; i < ns; i++)
        fprintf(fp, "%d,%g,%g\n", ss[i].s, ts[i], nc_model_time(mp, m, (double)best->f, ss[i].s, 1));
    fclose(fp);

    /* The script lives next to the executable (build tree) or in the data dir. */
    char script[PATH_MAX + 64];
    nc_tool_data_path("numacoll-tune-plot.py", NUMACOLL_TUNE_PLOT_SCRIPT, script, sizeof script);
    /* Debian's python3-matplotlib belongs to /usr/bin/python3, which may not be the
     * python3 first in PATH. */
    char cmd[2 * PATH_MAX + 128];
    snprintf(cmd, sizeof cmd,
             "{ [ -x /usr/bin/python3 ] && /usr/bin/python3 '%s' '%s' 2>/dev/null; } || "
             "python3 '%s' '%s'",
             script, o->plot, script, o->plot);
    fflush(stdout);
    int rc = system(cmd);
    if (rc)
        printf("plots: CSV files in %s; the PNG files need python3 with matplotlib "
               "(Debian: python3-matplotlib; scripts/install-deps.sh bench): %s exited %d\n",
               o->plot, script, rc);
    else
        printf("plots: %s/fig4_time_vs_f.png and %s/time_vs_s.png (CSV data beside them)\n",
               o->plot, o->plot);
}

/* ---- main --------------------------------------------------------------------------------- */

/* A usage error, found before MPI_Init on every rank: said by rank 0. */
#define usage_msg(...)                                     \
    do {                                                   \
        if (nc_tool_launcher_rank() == 0)                  \
            fprintf(stderr, __VA_ARGS__);                  \
    } while (0)

/* --output: a file that cannot be written says so now, not after the
 * measurements (it is written through FILE.tmp.PID, then renamed). */
static int output_ok(const char *out)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    const size_t n = strlen(out);
    if (!n || out[n - 1] == '/' || (!stat(out, &st) && S_ISDIR(st.st_mode))) {
        usage_msg("numacoll-tune: --output %s: a directory; name the tune file\n", out);
        return 0;
    }
    if (access(dir, W_OK | X_OK)) {
        usage_msg("numacoll-tune: --output %s: cannot write into %s (%s)\n", out, dir,
                  strerror(errno));
        return 0;
    }
    if (!access(out, F_OK) && access(out, W_OK)) {
        usage_msg("numacoll-tune: --output %s: not writable (%s)\n", out, strerror(errno));
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    opts_t o = {0};
    int help = 0, bad = 0;
    enum { O_BUDGET = 256, O_QUICK, O_OUTPUT, O_PLOT, O_VERSION };
    static const struct option longopts[] = {{"budget", required_argument, NULL, O_BUDGET},
                                             {"quick", no_argument, NULL, O_QUICK},
                                             {"output", required_argument, NULL, O_OUTPUT},
                                             {"plot", required_argument, NULL, O_PLOT},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, O_VERSION},
                                             {NULL, 0, NULL, 0}};
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_BUDGET:
            if (parse_size(optarg, &o.budget)) {
                usage_msg("numacoll-tune: --budget %s: expected a size like 1m\n", optarg);
                bad = 1;
            }
            break;
        case O_QUICK: o.quick = 1; break;
        case O_OUTPUT: o.output = optarg; break;
        case O_PLOT: o.plot = optarg; break;
        case 'h': help = 1; break;
        case O_VERSION:
            if (nc_tool_launcher_rank() == 0) /* once under a launcher */
                printf("numacoll-tune %s\n", numacoll_version());
            return 0;
        case ':':
            if (optopt > 0 && optopt < 256) /* a short option; long ones: their value, or 0 */
                usage_msg("numacoll-tune: -%c needs a value\n", optopt);
            else
                usage_msg("numacoll-tune: %s needs a value\n", argv[optind - 1]);
            bad = 1;
            break;
        default:
            /* a short option (maybe in a cluster, -xh): optopt; a long one: the word */
            if (optopt > 0 && optopt < 256)
                usage_msg("numacoll-tune: unknown option \"-%c\"\n", optopt);
            else
                usage_msg("numacoll-tune: unknown option \"%s\"\n", argv[optind - 1]);
            bad = 1;
        }
    }
    if (optind < argc) {
        usage_msg("numacoll-tune: unexpected argument \"%s\"\n", argv[optind]);
        bad = 1;
    }
    if (!bad && o.output)
        bad = !output_ok(o.output);
    if (help || bad) {
        if (nc_tool_launcher_rank() == 0) /* once under a launcher */
            usage(help ? stdout : stderr);
        return bad ? nc_tool_exit_said(2) : 0;
    }

    MPI_Init(&argc, &argv);
    nc_tool_check_launcher("numacoll-tune");
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &rank);
    MPI_Comm_size(node, &p);
    if (p != wsize) {
        int wr;
        MPI_Comm_rank(MPI_COMM_WORLD, &wr);
        if (wr == 0)
            fprintf(stderr, "numacoll-tune: run it with every rank on one node (%d of %d here)\n",
                    p, wsize);
        MPI_Finalize();
        return 2;
    }
    if (p < 2) {
        fprintf(stderr, "numacoll-tune: it measures copies between ranks: run it with at least "
                        "2 ranks on this node (mpirun -np P numacoll-tune, P up to the cores)\n");
        MPI_Finalize();
        return 2;
    }
    page = (size_t)sysconf(_SC_PAGESIZE);
    double t_start = now();
    numacoll_param_set("TRANSPORT", "shm"); /* steps 2-5 tune the queue */

    nc_tune_sig_t sig;
    if (nc_tune_sig_local(&sig)) {
        say("numacoll-tune: cannot read this machine's topology\n");
        nc_tool_abort(MPI_COMM_WORLD, 1);
    }
    sig.p = p;
    hwloc_topology_t topo;
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    double mem = (double)hwloc_get_root_obj(topo)->total_memory;
    hwloc_topology_destroy(topo);
    const char *budget_why = "--budget";
    if (!(o.budget > 0)) {
        if (o.quick) {
            o.budget = 1 << 20;
            budget_why = "--quick";
        } else {
            o.budget = mem / sig.cores / 100;
            budget_why = "1% of the memory per core";
        }
    }
    double b = floor(o.budget / (double)page) * (double)page;
    if (b < (double)page)
        b = (double)page;
    /* every member maps its queue of b bytes and the tuner's buffers */
    if (b > mem / p) {
        say("numacoll-tune: --budget %.1f GiB: more than the memory per member (%.1f GiB of "
            "the node's memory for each of %d members)\n", b / 1073741824.0,
            mem / p / 1073741824.0, p);
        MPI_Finalize();
        return 2;
    }
    char sigtext[256], bt[32];
    nc_tune_sig_format(&sig, sigtext, sizeof sigtext);
    fmt_size(b, bt, sizeof bt);
    say("numacoll-tune %s: %s\n", numacoll_version(), sigtext);
    say("budget b = %.0f bytes (%s; %s), page %zu%s\n\n", b, bt, budget_why, page,
        o.quick ? ", quick mode" : "");

    /* 1. */
    say("1. direct measurements (all %d members at once)\n", p);
    double t_copy = measure_memcpy(o.quick ? 1 << 20 : 8 << 20, o.quick ? 5 : 15);
    double t_cache = measure_memcpy(64 << 10, o.quick ? 50 : 400);
    double t_a, hop;
    measure_atomic_hop(o.quick ? 20000 : 200000, &t_a, &hop);
    say("   t  (memcpy 8 MiB, out of cache)  = %.3g s/byte (%.2f GB/s)\n", t_copy, 1e-9 / t_copy);
    say("   t  (memcpy 64 KiB, in cache)     = %.3g s/byte (%.2f GB/s)\n", t_cache, 1e-9 / t_cache);
    say("   t_A (contended atomic decrement) = %.3g s\n", t_a);
    say("   one-hop flag latency (ping-pong) = %.3g s\n", hop);
    double numa_r = 0;
    if (sig.numa_nodes > 1) {
        if (rank == 0) {
            nc_topo_t *nt = NULL;
            hwloc_obj_t n0, n1;
            int rc = nc_topo_load(&nt);
            if (!rc && (n0 = hwloc_get_obj_by_type(nt->topo, HWLOC_OBJ_NUMANODE, 0)) &&
                (n1 = hwloc_get_obj_by_type(nt->topo, HWLOC_OBJ_NUMANODE, 1)))
                rc = nc_topo_copy_ratio(nt, (int)n0->os_index, (int)n1->os_index,
                                        o.quick ? (size_t)4 << 20 : (size_t)64 << 20,
                                        o.quick ? 3 : 7, &numa_r);
            if (rc) {
                numa_r = 0;
                fprintf(stderr, "numacoll-tune: the NUMA copy ratio was not measured: %s\n",
                        numacoll_strerror(rc));
            }
            if (nt)
                nc_topo_free(nt);
        }
        MPI_Bcast(&numa_r, 1, MPI_DOUBLE, 0, node);
        if (numa_r > 0)
            say("   NUMA copy ratio r (a buffer on the second node / on the first, read from "
                "the first) = %.2f\n\n", numa_r);
        else
            say("   NUMA copy ratio r: not measured (the tune file leaves it to hwloc's "
                "distances)\n\n");
    } else {
        say("   NUMA copy ratio r: one NUMA node, nothing to measure\n\n");
    }

    /* 2. */
    nc_tune_setting_t cfgs[8];
    int ncfg = nc_tune_fit_configs(page, o.quick, cfgs, 8);
    nc_tune_point_t pts[64];
    int npt = 0;
    size_t bufbytes = (size_t)fmax(4 * 16 * 16 * (double)page, 2 * b) + page;
    char *buf = malloc(bufbytes);
    if (!buf)
        nc_tool_abort(MPI_COMM_WORLD, 1);
    memset(buf, rank, bufbytes);
    say("2. broadcasts for the fit (tree kary:2, q=1, root 0; per call t_max over members, 20th percentile over calls)\n");
    say("   %8s %5s %10s %12s\n", "f", "s", "m", "time [us]");
    for (int i = 0; i < ncfg; i++) {
        numacoll_team_t *t = team_for(&cfgs[i], "kary:2");
        double ms[8];
        int nm = nc_tune_fit_sizes(&cfgs[i], o.quick, ms, 8);
        for (int k = 0; k < nm && npt < 64; k++) {
            double tm = time_team_bcast(t, buf, (size_t)ms[k], &o);
            pts[npt++] = (nc_tune_point_t){ms[k], (double)cfgs[i].f, cfgs[i].s, 1, tm};
            say("   %8zu %5d %10.0f %12.2f\n", cfgs[i].f, cfgs[i].s, ms[k], tm * 1e6);
        }
        numacoll_team_destroy(t);
    }
    nc_model_params_t mp;
    double rms = NAN;
    int frc = nc_tune_fit(pts, npt, t_a, &mp, &rms);
    if (frc) {
        say("numacoll-tune: the fit failed (%s); measurements too noisy?\n",
            numacoll_strerror(frc));
        nc_tool_abort(MPI_COMM_WORLD, 1);
    }
    say("   fit: t = %.3g s/byte (%.2f GB/s), t_W = %.3g s, t_WO = %.3g s, t_A = %.3g s "
        "(measured); relative RMS residual %.1f %%\n\n",
        mp.t, 1e-9 / mp.t, mp.t_w, mp.t_wo, mp.t_a, 100 * rms);

    /* 3. */
    nc_tune_setting_t best;
    if (nc_tune_choose(&mp, b, page, FMAX, SMAX, &best)) {
        say("numacoll-tune: no optimum for these constants\n");
        nc_tool_abort(MPI_COMM_WORLD, 1);
    }
    say("3. model optimum for b = %s: f* = sqrt(b t_W / t) = %.0f -> %zu bytes (%zu pages), "
        "s* = b / f* = %d\n\n",
        bt, sqrt(b * fmax(mp.t_w, 0) / mp.t), best.f, best.f / page, best.s);

    /* 4. */
    static const char *trees_full[] = {"kary:2", "knomial:2", "flat", "chain", "kary:4"};
    static const char *trees_quick[] = {"kary:2", "flat", "chain"};
    const char **trees = o.quick ? trees_quick : trees_full;
    int ntrees = o.quick ? 3 : 5;
    size_t mtree = (size_t)fmin(b, 16.0 * (double)best.f);
    char tree[32] = "kary:2";
    double tbest = INFINITY;
    say("4. notification tree at f*, s*, m = %zu (a winner must be 2 %% faster)\n", mtree);
    for (int i = 0; i < ntrees; i++) {
        numacoll_team_t *t = team_for(&best, trees[i]);
        double tm = time_team_bcast(t, buf, mtree, &o);
        numacoll_team_destroy(t);
        say("   %-10s %10.2f us\n", trees[i], tm * 1e6);
        if (tm < 0.98 * tbest) {
            tbest = tm;
            snprintf(tree, sizeof tree, "%s", trees[i]);
        }
    }
    size_t mq = (size_t)fmin(2 * b, (double)bufbytes);
    say("   -> %s\n   sets q at m = %zu (two queue turns)\n", tree, mq);
    static const int qs[] = {1, 2, 4};
    tbest = INFINITY;
    int qbest = 1;
    for (int i = 0; i < 3; i++) {
        if (best.s % qs[i] || qs[i] > best.s)
            continue;
        nc_tune_setting_t c = best;
        c.q = qs[i];
        numacoll_team_t *t = team_for(&c, tree);
        double tm = time_team_bcast(t, buf, mq, &o);
        numacoll_team_destroy(t);
        say("   q=%-8d %10.2f us (model %.2f us)\n", qs[i], tm * 1e6,
            1e6 * nc_model_time(&mp, (double)mq, (double)c.f, c.s, c.q));
        if (tm < 0.98 * tbest) {
            tbest = tm;
            qbest = qs[i];
        }
    }
    best.q = qbest;
    say("   -> q=%d\n\n", qbest);

    /* 5. */
    nc_tune_setting_t set[8];
    set[0] = best;
    int nset = 1 + nc_tune_neighbours(&best, b, page, FMAX, SMAX, set + 1, 7);
    double sizes[4] = {64 << 10, 1 << 20, b, 2 * b};
    int nsz = 0;
    double msz[4];
    for (int i = 0; i < 4; i++)
        if (sizes[i] <= 2 * b && (!nsz || sizes[i] > msz[nsz - 1]))
            msz[nsz++] = sizes[i];
    double meas[8][4], pred[8][4];
    say("5. MPI_Bcast through numacoll's wrapper (a new MPI_Comm_dup per setting), tree %s\n",
        tree);
    for (int i = 0; i < nset; i++) {
        set_params(&set[i], tree);
        MPI_Comm c = bcast_comm(NULL, 0, buf);
        for (int k = 0; k < nsz; k++) {
            meas[i][k] = time_mpi_bcast(c, buf, bufbytes, (size_t)msz[k], &o);
            pred[i][k] = nc_model_time(&mp, msz[k], (double)set[i].f, set[i].s, set[i].q);
        }
        MPI_Comm_free(&c);
    }
    say("   %-24s %8s %12s %12s %9s %10s\n", "setting", "m", "model [us]", "measured[us]",
        "meas/mod", "vs best");
    for (int k = 0; k < nsz; k++) {
        double bestm = INFINITY;
        for (int i = 0; i < nset; i++)
            bestm = fmin(bestm, meas[i][k]);
        char ms[32];
        fmt_size(msz[k], ms, sizeof ms);
        for (int i = 0; i < nset; i++) {
            char st[64];
            snprintf(st, sizeof st, "%sf=%zu s=%d q=%d", i ? "  " : "* ", set[i].f, set[i].s,
                     set[i].q);
            say("   %-24s %8s %12.2f %12.2f %9.2f %+9.1f%%\n", st, ms, pred[i][k] * 1e6,
                meas[i][k] * 1e6, meas[i][k] / pred[i][k], 100 * (meas[i][k] / bestm - 1));
        }
    }
    /* The setting written is chosen by measurement: each setting's geometric
     * mean over the sizes of (its time / the best time at that size). The
     * model's choice stays unless another setting beats it by more than
     * NC_TUNE_KEEP_PCT: the model ignores caches, and a budget of 1 % of the
     * memory is far beyond them. */
    double score[8], gap;
    int pick = 0;
    for (int i = 0; i < nset; i++) {
        double lsum = 0;
        for (int k = 0; k < nsz; k++) {
            double bestk = INFINITY;
            for (int j = 0; j < nset; j++)
                bestk = fmin(bestk, meas[j][k]);
            lsum += log(meas[i][k] / bestk);
        }
        score[i] = exp(lsum / nsz);
        if (score[i] < score[pick])
            pick = i;
    }
    gap = 100 * (score[0] / score[pick] - 1);
    say("   (* = the model's choice.) Geometric mean over the sizes of time / best time:");
    for (int i = 0; i < nset; i++)
        say(" %.3f", score[i]);
    say("\n");
    if (pick && gap <= NC_TUNE_KEEP_PCT)
        pick = 0;
    if (pick)
        say("   -> the model's choice is %.1f %% slower than f=%zu s=%d q=%d over these sizes: "
            "the tune file gets the measured one\n\n",
            gap, set[pick].f, set[pick].s, set[pick].q);
    else
        say("   -> the model's choice is within %.1f %% of the best measured setting: kept\n\n",
            gap);
    const nc_tune_setting_t model_choice = best;
    best = set[pick];
    /* The per-call fragments (coll/nc_bcast.c) use the fitted t_w and t;
     * 5d checks them with the queue against the defaults. */
    best.tw_ns = mp.t_w > 0 ? fmin(round(mp.t_w * 1e9), 1e6) : 0;
    best.t_ps = mp.t > 0 ? fmin(round(mp.t * 1e12), 1e9) : 0;
    if (best.tw_ns < 1 || best.t_ps < 1)
        say("   (the fitted t_W or t rounds to 0: the per-call cut keeps its built-in constants)\n\n");

    /* 5b. */
    const red_choice_t red = tune_reductions(&o);

    /* 5c, 5d: a pool of 64 MiB (or the queue's buffer if larger), off-cache. */
    size_t vbytes = bufbytes > ((size_t)64 << 20) ? bufbytes : (size_t)64 << 20;
    char *vbuf = malloc(vbytes);
    if (!vbuf)
        nc_tool_abort(MPI_COMM_WORLD, 1);
    memset(vbuf, rank + 1, vbytes);
    const xfer_choice_t xc = tune_transport(&o, vbuf, vbytes);
    const int keep = validate(&o, &best, tree, &xc, vbuf, vbytes);
    int drop_cost = 0;
    const size_t xg_min =
        tune_xg_transport(&o, &xc, keep & 2 ? &xc : NULL, vbuf, vbytes, &drop_cost);
    free(vbuf);

    /* 5f. */
    const red_xfer_t rxf = tune_red_transport(&o, &red);

    /* 6. */
    nc_tune_section_t sec;
    memset(&sec, 0, sizeof sec);
    sec.sig = sig;
    char v[64], err[512];
    const struct { const char *k; double x; const char *fmt; } info[] = {
        {"info.t_per_byte", mp.t, "%.4g"},         {"info.t_w", mp.t_w, "%.4g"},
        {"info.t_wo", mp.t_wo, "%.4g"},            {"info.t_a", mp.t_a, "%.4g"},
        {"info.fit_rms", rms, "%.3f"},             {"info.budget", b, "%.0f"},
        {"info.t_memcpy", t_copy, "%.4g"},         {"info.hop_latency", hop, "%.4g"},
        {"info.model_choice_vs_best_pct", gap, "%.1f"},
        {"info.model_f", (double)model_choice.f, "%.0f"},
        {"info.model_s", (double)model_choice.s, "%.0f"},
    };
    int ok = 1;
    choice_kv_t ck;
    choice_of(&ck, keep & 1 ? &best : NULL, tree, keep & 2 ? &xc : NULL);
    for (int k = 0; k < ck.n; k++)
        if (ck.kv[k][1] && !(drop_cost && !strncmp(ck.kv[k][0], "COST_", 5))) /* absent: the default */
            ok &= !nc_tune_section_set(&sec, ck.kv[k][0], ck.kv[k][1], err, sizeof err);
    snprintf(v, sizeof v, "%zu", red.small_max);
    ok &= !nc_tune_section_set(&sec, "REDUCE_SMALL_MAX", v, err, sizeof err);
    snprintf(v, sizeof v, "%zu", red.frag);
    ok &= !nc_tune_section_set(&sec, "REDUCE_FRAG_SIZE", v, err, sizeof err);
    if (xg_min) {
        snprintf(v, sizeof v, "%zu", xg_min);
        ok &= !nc_tune_section_set(&sec, "GATHER_CMA_MIN", v, err, sizeof err);
    }
    static const char *const rxk[2] = {"REDUCE_CMA_MIN", "ALLREDUCE_CMA_MIN"};
    for (int k = 0; k < 2; k++)
        if (rxf.measured && rxf.min[k]) {
            snprintf(v, sizeof v, "%zu", rxf.min[k]);
            ok &= !nc_tune_section_set(&sec, rxk[k], v, err, sizeof err);
        }
    if (numa_r > 0) {
        snprintf(v, sizeof v, "%.0f", fmin(numa_r, 1000.0) * 1000.0);
        ok &= !nc_tune_section_set(&sec, "NUMA_RATIO", v, err, sizeof err);
    }
    for (size_t i = 0; i < sizeof info / sizeof info[0]; i++) {
        snprintf(v, sizeof v, info[i].fmt, info[i].x);
        ok &= !nc_tune_section_set(&sec, info[i].k, v, err, sizeof err);
    }
    time_t tnow = time(NULL);
    strftime(v, sizeof v, "%Y-%m-%dT%H:%M:%S", localtime(&tnow));
    ok &= !nc_tune_section_set(&sec, "info.date", v, err, sizeof err);
    int status = 0;
    if (rank == 0) {
        printf("6. tune file section%s\n", o.output ? "" : " (not written: no --output)");
        printf("   [tune]\n   cpu_model = %s\n   numa_nodes = %d\n   cores = %d\n   p = %d\n",
               sec.sig.cpu_model, sec.sig.numa_nodes, sec.sig.cores, sec.sig.p);
        for (int k = 0; k < sec.nkv; k++)
            printf("   %s = %s\n", sec.kv[k].key, sec.kv[k].value);
        if (!ok) {
            fprintf(stderr, "numacoll-tune: %s\n", err);
            status = 1;
        }
        if (ok && o.output) {
            nc_tunefile_t tf = {0};
            if (!access(o.output, F_OK) && nc_tunefile_read(o.output, &tf, err, sizeof err)) {
                fprintf(stderr,
                        "numacoll-tune: not overwriting %s, which is not a valid tune file: %s\n",
                        o.output, err);
                status = 1;
            } else if (nc_tunefile_put(&tf, &sec) ||
                       nc_tunefile_write(o.output, &tf, "written by numacoll-tune", err,
                                         sizeof err)) {
                fprintf(stderr, "numacoll-tune: %s\n", err);
                status = 1;
            } else {
                printf("   written to %s (%d section%s); numacoll reads it with "
                       "NUMACOLL_TUNE_FILE=%s or from $XDG_CONFIG_HOME/numacoll/tune\n",
                       o.output, tf.nsec, tf.nsec == 1 ? "" : "s", o.output);
            }
            nc_tunefile_free(&tf);
        }
        printf("\n");
        fflush(stdout);
    }
    if (o.plot)
        plot(&o, &mp, &best, tree, buf, bufbytes, b);
    say("done in %.1f s\n", now() - t_start);
    PMPI_Bcast(&status, 1, MPI_INT, 0, node);
    free(buf);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return status;
}
