/*
 * Gather, Scatter, Allgather, Alltoall and their v-forms between real
 * processes (the core, no MPI). Every byte sent is a function of (call,
 * sender, receiver, offset), so every member knows what each of its receive
 * buffers must hold; every byte of every receive buffer is checked, the gaps
 * between blocks and GUARD bytes around the buffer must keep their canary,
 * and send buffers must not change.
 *
 *   test_gather all [PMIN PMAX]  the eight collectives, block sizes 0 1 7 I I+1 F-1 F F+1
 *                                3F+5 (I, F: the inline and fragment sizes in force),
 *                                every root, in place and not, v-forms with zero and uneven
 *                                counts in reversed order with gaps; p = 1..8
 *   test_gather big              8 MiB blocks at p = 4 (alltoall: 32 MiB per member), p = 2
 *   test_gather mismatch         one member passes other sizes (one byte more or less):
 *                                NUMACOLL_ERR_TRUNCATE where a block differs, every other
 *                                block right; in the v-forms also a member whose receive
 *                                sizes alone differ (two-level: the others must receive
 *                                right the blocks it carries), no hang, the team works
 *                                afterwards; p = 2 3 4
 *   test_gather interleave [SEED] seeded random gather family / bcast / barrier / allreduce
 *                                on one team, 0..256 KiB blocks; p = 2 3 4 8
 *   test_gather wrap             interleave with every counter starting near UINT32_MAX
 *   test_gather dead             a member SIGKILLs itself before a large alltoall: the others
 *                                get NUMACOLL_ERR_PEER_DEAD, no hang
 *   test_gather fault            (with TRANSPORT=cma) a receive or send buffer with a page that
 *                                is not accessible: NUMACOLL_ERR_FAULT on the member(s) whose
 *                                copy hit it, no crash, nothing written past the buffer,
 *                                the team works afterwards; p = 2
 * Arguments NAME=VALUE set tunables first (numacoll_param_set); expect_cma=1
 * checks that every call of a non-v form with blocks above the inline size
 * moved them by CMA (NUMACOLL_TRANSPORT=cma), expect_cma=0 that none did.
 * expect_numa=M (with NUMACOLL_TEST_DOMAINS=v, the members spread over v
 * virtual NUMA nodes, and NUMACOLL_ALLGATHER_NUMA_MIN=0) checks that every
 * allgather(v) call with fragments went two-level into each node of at least
 * M members: each member there carried a block of another node into it or
 * read one from its carrier; expect_numa=0 that no call did.
 */
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/nc_team.h" /* nc_test_seq0 */
#include "nc_forktest.h"
#include "numacoll.h"

#define MAXP 8
#define GUARD 256
#define CANARY 0xA5
#define GAP 8 /* bytes between the blocks of a v-form's receive buffer */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum { GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, NCOLL };
static const char *const names[NCOLL] = {"gather",    "gatherv",    "scatter",  "scatterv",
                                         "allgather", "allgatherv", "alltoall", "alltoallv"};
static const int rooted[NCOLL] = {1, 1, 1, 1, 0, 0, 0, 0};

static size_t g_I = 512, g_F = 65536;
static int g_expect_cma = -1; /* expect_cma=0|1, -1: not checked */
static int g_expect_numa = -1; /* expect_numa=0|M, -1: not checked; the virtual nodes ... */
static int g_numa_v;          /* ... NUMACOLL_TEST_DOMAINS=v: member k on node k % v */

/* Is member me on a node of at least g_expect_numa members, in a team that
 * the nodes split (1 < v < p)? */
static int numa_two(int me, int p)
{
    const int v = g_numa_v, m = v > 0 ? (p - 1 - me % v) / v + 1 : 0;
    return v > 1 && v < p && m >= g_expect_numa;
}

static inline unsigned char val(uint64_t call, int s, int d, size_t i)
{
    uint64_t x = call * 0x9E3779B97F4A7C15ull ^ (uint64_t)s << 40 ^ (uint64_t)d << 48 ^ i;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (unsigned char)(x >> 32);
}

/* Bytes of block s -> d in call `call` of collective coll with base size n:
 * uniform for the non-v forms; v-forms vary with s and d, some zero
 * (alltoallv symmetric in s, d so that its in-place form has a meaning). */
static size_t blk_bytes(int coll, uint64_t call, int s, int d, size_t n)
{
    if (coll != GATHERV && coll != SCATTERV && coll != ALLGATHERV && coll != ALLTOALLV)
        return n;
    const int k = coll == ALLTOALLV ? s + d : coll == SCATTERV ? d : s;
    switch ((unsigned)(k + (int)(call % 4)) % 4) {
    case 0: return 0;
    case 1: return n;
    case 2: return n / 2 + 1;
    default: return n + 3;
    }
}

/* Who sends what to whom: the data of block s -> d (the sender-only
 * collectives send one block to all: d = 0 in the pattern). */
static int pat_d(int coll, int d)
{
    return coll == SCATTER || coll == SCATTERV || coll == ALLTOALL || coll == ALLTOALLV ? d : 0;
}

typedef struct lay {
    size_t cnt[MAXP], dsp[MAXP], total;
} lay_t;

/* A receive (or send) layout: uniform (block k at k*n) or v (reversed with
 * gaps). */
static void layout(lay_t *l, int v, int p, const size_t *cnt, size_t n)
{
    memset(l, 0, sizeof *l);
    if (!v) {
        for (int k = 0; k < p; k++) {
            l->cnt[k] = n;
            l->dsp[k] = (size_t)k * n;
        }
        l->total = (size_t)p * n;
        return;
    }
    size_t at = GAP;
    for (int k = p - 1; k >= 0; k--) {
        l->cnt[k] = cnt[k];
        l->dsp[k] = at;
        at += cnt[k] + GAP;
    }
    l->total = at;
}

typedef struct bufs {
    unsigned char *s, *r; /* GUARD bytes on both sides */
    size_t cap;
} bufs_t;

static int bufs_alloc(bufs_t *b, size_t cap)
{
    b->cap = cap;
    b->s = malloc(cap + 2 * GUARD);
    b->r = malloc(cap + 2 * GUARD);
    return b->s && b->r ? 0 : -1;
}
static void bufs_free(bufs_t *b)
{
    free(b->s);
    free(b->r);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static numacoll_team_t *team_up(int rank, int p, const char *name, numacoll_bootstrap_t **bs)
{
    numacoll_team_t *t = NULL;
    int rc = numacoll_bootstrap_named(name, rank, p, bs);
    if (rc) {
        fprintf(stderr, "rank %d: bootstrap: %s\n", rank, numacoll_strerror(rc));
        return NULL;
    }
    if ((rc = numacoll_team_create(*bs, &t))) {
        fprintf(stderr, "rank %d: team_create: %s\n", rank, numacoll_strerror(rc));
        numacoll_bootstrap_named_free(*bs);
        return NULL;
    }
    return t;
}

/* A barrier first: a member that finished its calls (a gather's senders run
 * ahead by up to E - 1 calls) must not exit while the others still wait on
 * anyone, since every wait checks that all members are alive and would take
 * a normal exit for a death (MPI programs end in MPI_Finalize, which waits).
 * Its result is not checked: some modes break the team on purpose. */
static void team_down(numacoll_team_t *t, numacoll_bootstrap_t *bs)
{
    (void)numacoll_barrier(t);
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
}

typedef struct call {
    int coll, root, inplace;
    size_t n;
    uint64_t id;
    int bad_rank; /* >= 0: this member passes n + 1, or n - 1 in every other call (mismatch
                     test) ... */
    int bad_recv; /* ... only on the receive side (v-forms): it sends the right size */
} call_t;

/* One call on every member, checked; returns 0 when every check holds and the
 * return code is the one expected. */
static int run_call(numacoll_team_t *tm, int me, int p, const call_t *c, bufs_t *b)
{
    const int coll = c->coll, root = c->root, v = coll & 1;
    const size_t n = c->n;
    const int sends_all =
        coll == SCATTER || coll == SCATTERV || coll == ALLTOALL || coll == ALLTOALLV;
    const int is_root = me == root || !rooted[coll];
    size_t scnt[MAXP] = {0}, rcnt[MAXP] = {0};
    const size_t bad_n = (c->id >> 1 & 1) && n ? n - 1 : n + 1;
    size_t my_n = me == c->bad_rank ? bad_n : n; /* what this member passes */
    for (int k = 0; k < p; k++) {
        scnt[k] = blk_bytes(coll, c->id, me, k, c->bad_recv ? n : my_n);
        rcnt[k] = blk_bytes(coll, c->id, k, me, my_n);
    }
    /* real sizes sent to me by k (what k passes) */
    size_t got[MAXP];
    for (int k = 0; k < p; k++)
        got[k] = blk_bytes(coll, c->id, k, me, k == c->bad_rank && !c->bad_recv ? bad_n : n);
    lay_t sl, rl;
    layout(&sl, v, p, scnt, my_n);
    layout(&rl, v, p, rcnt, my_n);
    if (sl.total > b->cap || rl.total > b->cap)
        CHECK(0, "test buffers too small (%zu, %zu > %zu)", sl.total, rl.total, b->cap);
    unsigned char *S = b->s + GUARD, *R = b->r + GUARD;
    memset(b->s, CANARY, b->cap + 2 * GUARD);
    memset(b->r, CANARY, b->cap + 2 * GUARD);
    /* The send side. */
    const size_t one = coll == GATHERV || coll == ALLGATHERV ? scnt[0] : my_n; /* single block */
    if (sends_all) {
        if (!rooted[coll] || me == root)
            for (int d = 0; d < p; d++)
                for (size_t i = 0; i < sl.cnt[d]; i++)
                    S[sl.dsp[d] + i] = val(c->id, me, pat_d(coll, d), i);
    } else {
        for (size_t i = 0; i < one; i++)
            S[i] = val(c->id, me, 0, i);
    }
    /* In place: my own block where the collective expects it. */
    int ip = c->inplace && is_root;
    if (ip) {
        if (coll == GATHER || coll == GATHERV || coll == ALLGATHER || coll == ALLGATHERV)
            for (size_t i = 0; i < rl.cnt[me]; i++)
                R[rl.dsp[me] + i] = val(c->id, me, 0, i);
        if (coll == ALLTOALL || coll == ALLTOALLV) /* send blocks in the receive layout */
            for (int d = 0; d < p; d++)
                for (size_t i = 0; i < rl.cnt[d]; i++)
                    R[rl.dsp[d] + i] = val(c->id, me, d, i);
    }
    const void *sb = ip && coll != SCATTER && coll != SCATTERV ? NUMACOLL_IN_PLACE : S;
    void *rb = ip && (coll == SCATTER || coll == SCATTERV) ? (void *)NUMACOLL_IN_PLACE : R;
    if (ip && (c->id & 1) && sb == NUMACOLL_IN_PLACE)
        sb = NULL;
    int rc;
    const uint64_t cma0 = tm->gather_cma;
    const uint64_t numa0 = tm->gather_fwd + tm->gather_via;
    switch (coll) {
    case GATHER: rc = numacoll_gather(tm, sb, my_n, rb, root); break;
    case GATHERV: rc = numacoll_gatherv(tm, sb, one, rb, rl.cnt, rl.dsp, root); break;
    case SCATTER: rc = numacoll_scatter(tm, sb, rb, my_n, root); break;
    case SCATTERV: rc = numacoll_scatterv(tm, sb, sl.cnt, sl.dsp, rb, rcnt[root], root); break;
    case ALLGATHER: rc = numacoll_allgather(tm, sb, my_n, rb); break;
    case ALLGATHERV: rc = numacoll_allgatherv(tm, sb, one, rb, rl.cnt, rl.dsp); break;
    case ALLTOALL: rc = numacoll_alltoall(tm, sb, rb, my_n); break;
    default: rc = numacoll_alltoallv(tm, sb, sl.cnt, sl.dsp, rb, rl.cnt, rl.dsp); break;
    }
    /* Expected return: TRUNCATE where some block I receive differs in size. */
    int want = 0;
    if (c->bad_rank >= 0) {
        for (int k = 0; k < p; k++) {
            int receives = coll == SCATTER || coll == SCATTERV ? (k == root && me != root)
                           : rooted[coll]                      ? (me == root && k != me)
                                                               : k != me;
            const size_t mine = coll == SCATTER || coll == SCATTERV ? rcnt[root] : rl.cnt[k];
            if (receives && got[k] != mine)
                want = NUMACOLL_ERR_TRUNCATE;
        }
        /* its own block, copied within its buffers: sent and expected sizes */
        if (me == c->bad_rank && c->bad_recv && is_root) {
            const size_t own_s = coll == ALLTOALLV || coll == SCATTERV ? scnt[me] : one;
            const size_t own_r = coll == SCATTERV ? rcnt[root] : rl.cnt[me];
            if (own_s != own_r)
                want = NUMACOLL_ERR_TRUNCATE;
        }
    }
    CHECK(rc == want, "p=%d rank %d %s n=%zu root %d in place %d: returned %d (%s), want %d", p,
          me, names[coll], n, root, ip, rc, numacoll_strerror(rc), want);
    /* The transport: with blocks above the inline size every member of a
     * non-v form sends or reads one (the in-place scatter root included). */
    if (g_expect_cma == 0)
        CHECK(tm->gather_cma == cma0, "%s p=%d rank %d n=%zu: moved by CMA", names[coll], p, me, n);
    if (g_expect_cma == 1 && !v && p > 1 && n > g_I && c->bad_rank < 0)
        CHECK(tm->gather_cma > cma0, "%s p=%d rank %d n=%zu: not moved by CMA", names[coll], p, me,
              n);
    if (g_expect_numa == 0 || (g_expect_numa > 0 && !numa_two(me, p)))
        CHECK(tm->gather_fwd + tm->gather_via == numa0,
              "%s p=%d rank %d n=%zu: two-level into a node of fewer than %d members",
              names[coll], p, me, n, g_expect_numa);
    if (g_expect_numa > 0 && (coll == ALLGATHER || coll == ALLGATHERV) && numa_two(me, p) &&
        c->bad_rank < 0) {
        int frag = 0; /* a block of another node with fragments */
        for (int k = 0; k < p; k++)
            frag |= k % g_numa_v != me % g_numa_v && rl.cnt[k] > g_I;
        CHECK(!frag || tm->gather_fwd + tm->gather_via > numa0,
              "%s p=%d rank %d n=%zu: no block carried into its node", names[coll], p, me, n);
    }
    if (want)
        return 0; /* contents are checked where everything agrees */
    /* Guards and the send buffer. */
    for (size_t i = 0; i < GUARD; i++) {
        CHECK(b->r[i] == CANARY && b->r[GUARD + b->cap + i] == CANARY,
              "%s p=%d rank %d: guard around recvbuf written", names[coll], p, me);
    }
    if (!ip && sends_all && (!rooted[coll] || me == root))
        for (int d = 0; d < p; d++)
            for (size_t i = 0; i < sl.cnt[d]; i++)
                CHECK(S[sl.dsp[d] + i] == val(c->id, me, pat_d(coll, d), i),
                      "%s: sendbuf changed", names[coll]);
    /* The receive buffer, every byte. */
    if (coll == SCATTER || coll == SCATTERV) {
        if (ip)
            return 0;
        const size_t m = rcnt[root];
        for (size_t i = 0; i < m; i++)
            CHECK(R[i] == val(c->id, root, me, i),
                  "p=%d rank %d %s n=%zu root %d: byte %zu is %d, want %d", p, me, names[coll],
                  n, root, i, R[i], val(c->id, root, me, i));
        for (size_t i = m; i < rl.total && i < b->cap; i++)
            CHECK(R[i] == CANARY, "%s: recvbuf written past its block (byte %zu)", names[coll], i);
        return 0;
    }
    if (!is_root) {
        for (size_t i = 0; i < rl.total; i++)
            CHECK(R[i] == CANARY, "%s rank %d: a non-root's recvbuf written", names[coll], me);
        return 0;
    }
    unsigned char *want_r = malloc(rl.total ? rl.total : 1);
    CHECK(want_r, "malloc");
    memset(want_r, CANARY, rl.total);
    for (int s = 0; s < p; s++)
        for (size_t i = 0; i < rl.cnt[s]; i++)
            want_r[rl.dsp[s] + i] = val(c->id, s, pat_d(coll, me), i);
    for (size_t i = 0; i < rl.total; i++)
        if (R[i] != want_r[i]) {
            int s = -1;
            for (int k = 0; k < p; k++)
                if (i >= rl.dsp[k] && i < rl.dsp[k] + rl.cnt[k])
                    s = k;
            fprintf(stderr,
                    "FAIL p=%d rank %d %s n=%zu root %d in place %d: byte %zu (block of %d) is %d, "
                    "want %d\n",
                    p, me, names[coll], n, root, ip, i, s, R[i], want_r[i]);
            free(want_r);
            return 1;
        }
    free(want_r);
    return 0;
}

/* ---- all ------------------------------------------------------------------------------- */
static int body_all(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    const size_t sizes[] = {0, 1, 7, 32, 33, g_I, g_I + 1, g_F - 1, g_F, g_F + 1, 3 * g_F + 5};
    bufs_t b;
    CHECK(bufs_alloc(&b, (size_t)p * (3 * g_F + 8 + GAP) + GAP) == 0, "malloc");
    uint64_t id = 0;
    for (size_t si = 0; si < ARRAY_SIZE(sizes); si++)
        for (int coll = 0; coll < NCOLL; coll++)
            for (int root = 0; root < (rooted[coll] ? p : 1); root++)
                for (int inpl = 0; inpl <= 1; inpl++) {
                    call_t c = {coll, rooted[coll] ? root : -1, inpl, sizes[si], ++id, -1, 0};
                    if (run_call(tm, rank, p, &c, &b))
                        return 1;
                }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_all(int pmin, int pmax)
{
    int fails = 0;
    for (int p = pmin; p <= pmax; p++) {
        double t0 = now_s();
        int rc = nc_fork_run(p, 150, body_all, NULL, -1);
        printf("all p=%d: %s (%.1f s)\n", p, rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- big ------------------------------------------------------------------------------- */
static int body_big(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    const size_t n = (size_t)8 << 20;
    bufs_t b;
    CHECK(bufs_alloc(&b, (size_t)p * (n + 3 + GAP) + GAP) == 0, "malloc");
    static const int colls[] = {GATHER, SCATTERV, ALLGATHER, ALLTOALL, ALLTOALLV};
    uint64_t id = 1000;
    for (size_t i = 0; i < ARRAY_SIZE(colls); i++) {
        call_t c = {colls[i], rooted[colls[i]] ? (int)(i % (size_t)p) : -1, 0, n, ++id, -1, 0};
        if (run_call(tm, rank, p, &c, &b))
            return 1;
    }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

/* ---- mismatch --------------------------------------------------------------------------- */
static int body_mismatch(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    bufs_t b;
    CHECK(bufs_alloc(&b, (size_t)p * (3 * g_F + 16 + GAP) + GAP) == 0, "malloc");
    const size_t sizes[] = {5, g_I, g_F + 1, 3 * g_F};
    uint64_t id = 5000;
    for (size_t si = 0; si < ARRAY_SIZE(sizes); si++)
        for (int coll = 0; coll < NCOLL; coll++)
            for (int bad = 0; bad < p; bad += p - 1 > 0 ? p - 1 : 1) {
                call_t c = {coll, rooted[coll] ? (int)(id % (uint64_t)p) : -1, 0, sizes[si],
                            ++id, bad, 0};
                if (run_call(tm, rank, p, &c, &b))
                    return 1;
                /* v-forms: only its receive sizes differ; the others' calls
                 * must be right whoever carries their blocks */
                call_t r = {coll, c.root, 0, sizes[si], ++id, bad, 1};
                if ((coll & 1) && run_call(tm, rank, p, &r, &b))
                    return 1;
                /* and the team still works */
                call_t ok = {coll, c.root, 0, sizes[si], ++id, -1, 0};
                if (run_call(tm, rank, p, &ok, &b))
                    return 1;
            }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

/* ---- interleave -------------------------------------------------------------------------- */
typedef struct il_arg {
    uint64_t seed;
    int calls;
} il_arg_t;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int body_interleave(int rank, int p, const char *name, void *arg)
{
    const il_arg_t *a = arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    const size_t maxn = 256 << 10;
    bufs_t b;
    CHECK(bufs_alloc(&b, (size_t)p * (maxn + 3 + GAP) + GAP) == 0, "malloc");
    uint64_t s = a->seed | 1;
    for (int i = 0; i < a->calls; i++) {
        const uint64_t r = rnd(&s);
        const int what = (int)(r % 12);
        const size_t n = r >> 8 & 1 ? (size_t)(r >> 16) % 300 : (size_t)(r >> 16) % maxn;
        if (what < NCOLL) {
            call_t c = {what, rooted[what] ? (int)((r >> 40) % (uint64_t)p) : -1,
                        (int)(r >> 50 & 1), n, (uint64_t)i + 1, -1, 0};
            if (run_call(tm, rank, p, &c, &b))
                return 1;
        } else if (what == 8) {
            CHECK(numacoll_barrier(tm) == 0, "barrier");
        } else if (what == 9 || what == 10) {
            unsigned char *buf = b.r + GUARD;
            if (one_bcast(tm, buf, n, (int)((r >> 40) % (uint64_t)p), (uint64_t)i, rank))
                return 1;
        } else {
            int64_t x = rank + i, y = -1;
            CHECK(numacoll_allreduce(tm, &x, &y, 1, NUMACOLL_INT64, NUMACOLL_SUM) == 0,
                  "allreduce");
            CHECK(y == (int64_t)p * (p - 1) / 2 + (int64_t)p * i, "allreduce result %lld",
                  (long long)y);
        }
    }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_interleave(uint64_t seed, const int *ps, int nps, int calls)
{
    int fails = 0;
    for (int i = 0; i < nps; i++) {
        il_arg_t a = {seed + (uint64_t)ps[i], calls};
        double t0 = now_s();
        int rc = nc_fork_run(ps[i], 200, body_interleave, &a, -1);
        printf("interleave p=%d seed %llu: %s (%.1f s)\n", ps[i], (unsigned long long)a.seed,
               rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- fault -------------------------------------------------------------------------------- */
/* Member 1's buffer: n bytes ending (recv) or starting (send) next to a page
 * that is PROT_NONE. A scatter's reader reads the tail of its block itself
 * (the root writes the first 1/2): only it faults. A gather's sender writes
 * the first half of its block into the root (C2): its write faults, both
 * calls fail (wrc). */
static int body_fault(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 64 * pg;
    char *map = mmap(NULL, n + 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED, "mmap");
    char *root_buf = malloc(2 * n), *ok = malloc(2 * n);
    CHECK(root_buf && ok, "malloc");
    memset(map, 0x11, n + 2 * pg);
    memset(root_buf, 0x22, 2 * n);
    /* scatter: member 1 receives into [map + pg, map + pg + n) with the last
     * page of the block not accessible */
    char *rbuf = map + pg;
    if (rank == 1)
        CHECK(mprotect(rbuf + n - pg, pg, PROT_NONE) == 0, "mprotect");
    int rc = numacoll_scatter(tm, root_buf, rank == 0 ? ok : rbuf, n, 0);
    CHECK(rc == (rank == 1 ? NUMACOLL_ERR_FAULT : 0), "rank %d: scatter into a bad buffer: %d (%s)",
          rank, rc, numacoll_strerror(rc));
    if (rank == 1) {
        CHECK(mprotect(rbuf + n - pg, pg, PROT_READ | PROT_WRITE) == 0, "mprotect");
        for (size_t i = 0; i < n / 2; i++) /* the root's share arrived */
            CHECK(rbuf[i] == 0x22, "scatter: byte %zu of the root's share is %d", i, rbuf[i]);
        CHECK(map[pg - 1] == 0x11 && map[pg + n] == 0x11, "scatter: written past the block");
    }
    /* gather: member 1 sends from a block whose first page is not accessible */
    if (rank == 1)
        CHECK(mprotect(map + pg, pg, PROT_NONE) == 0, "mprotect");
    rc = numacoll_gather(tm, map + pg, n, root_buf, 0);
    CHECK(rc == NUMACOLL_ERR_FAULT, "rank %d: gather from a bad buffer: %d (%s)", rank, rc,
          numacoll_strerror(rc));
    if (rank == 1)
        CHECK(mprotect(map + pg, pg, PROT_READ | PROT_WRITE) == 0, "mprotect");
    /* the team still works */
    memset(map + pg, 0x40 + rank, n);
    CHECK(numacoll_gather(tm, map + pg, n, ok, 0) == 0, "rank %d: gather afterwards", rank);
    if (rank == 0)
        for (size_t i = 0; i < 2 * n; i++)
            CHECK(ok[i] == (char)(0x40 + (int)(i / n)), "gather afterwards: byte %zu", i);
    CHECK(tm->gather_cma >= 3, "rank %d: %llu blocks by CMA", rank,
          (unsigned long long)tm->gather_cma);
    munmap(map, n + 2 * pg);
    free(root_buf);
    free(ok);
    team_down(tm, bs);
    return 0;
}

/* ---- dead ---------------------------------------------------------------------------------- */
static int body_dead(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    const size_t n = 4 << 20;
    char *s = calloc((size_t)p, n), *r = calloc((size_t)p, n);
    CHECK(s && r, "malloc");
    CHECK(numacoll_alltoall(tm, s, r, 4096) == 0, "first alltoall");
    if (rank == p - 1)
        raise(SIGKILL);
    int rc = numacoll_alltoall(tm, s, r, n);
    CHECK(rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN,
          "rank %d: alltoall with a dead member returned %d (%s)", rank, rc, numacoll_strerror(rc));
    rc = numacoll_gather(tm, s, 8, r, 0);
    CHECK(rc != 0, "rank %d: a call after the death returned 0", rank);
    free(s);
    free(r);
    team_down(tm, bs);
    return 0;
}

int main(int argc, char **argv)
{
    const char *pos[4] = {""};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!strncmp(argv[i], "expect_numa=", 12)) {
            g_expect_numa = atoi(argv[i] + 12);
            const char *v = getenv("NUMACOLL_TEST_DOMAINS");
            g_numa_v = v ? atoi(v) : 0;
            printf("%s (NUMACOLL_TEST_DOMAINS=%d)\n", argv[i], g_numa_v);
            continue;
        }
        if (!strncmp(argv[i], "expect_cma=", 11)) {
            g_expect_cma = atoi(argv[i] + 11);
            printf("%s\n", argv[i]);
        } else if (eq) {
            *eq = 0;
            int rc = numacoll_param_set(argv[i], eq + 1);
            if (rc) {
                fprintf(stderr, "tunable %s=%s rejected: %s\n", argv[i], eq + 1,
                        numacoll_strerror(rc));
                return 2;
            }
            printf("%s=%s\n", argv[i], eq + 1);
        } else if (npos < 4) {
            pos[npos++] = argv[i];
        }
    }
    char v[32];
    if (numacoll_param_get("NUMACOLL_GATHER_INLINE_MAX", v, sizeof v, NULL) == 0)
        g_I = strtoull(v, NULL, 0);
    if (numacoll_param_get("NUMACOLL_GATHER_FRAG_SIZE", v, sizeof v, NULL) == 0)
        g_F = strtoull(v, NULL, 0);
    const long page = sysconf(_SC_PAGESIZE);
    g_F = (g_F + (size_t)page - 1) / (size_t)page * (size_t)page;
    const char *m = pos[0];
    int fails;
    if (!strcmp(m, "all")) {
        int pmin = npos > 1 ? atoi(pos[1]) : 1, pmax = npos > 2 ? atoi(pos[2]) : MAXP;
        fails = mode_all(pmin < 1 ? 1 : pmin, pmax > MAXP ? MAXP : pmax);
    } else if (!strcmp(m, "big")) {
        fails = 0;
        static const int ps[] = {2, 4};
        for (size_t i = 0; i < ARRAY_SIZE(ps); i++) {
            double t0 = now_s();
            int rc = nc_fork_run(ps[i], 200, body_big, NULL, -1);
            printf("big p=%d: %s (%.1f s)\n", ps[i], rc ? "FAIL" : "ok", now_s() - t0);
            fails += rc;
        }
    } else if (!strcmp(m, "mismatch")) {
        fails = 0;
        for (int p = 2; p <= 4; p++) {
            int rc = nc_fork_run(p, 120, body_mismatch, NULL, -1);
            printf("mismatch p=%d: %s\n", p, rc ? "FAIL" : "ok");
            fails += rc;
        }
    } else if (!strcmp(m, "interleave")) {
        static const int ps[] = {2, 3, 4, 8};
        uint64_t seed = npos > 1 ? strtoull(pos[1], NULL, 0) : 20261123;
        fails = mode_interleave(seed, ps, (int)ARRAY_SIZE(ps), 300);
    } else if (!strcmp(m, "wrap")) {
        static const int ps[] = {3, 4};
        nc_test_seq0 = UINT32_MAX - 40;
        fails = mode_interleave(99, ps, (int)ARRAY_SIZE(ps), 200);
    } else if (!strcmp(m, "fault")) {
        fails = nc_fork_run(2, 60, body_fault, NULL, -1);
        printf("fault p=2: %s\n", fails ? "FAIL" : "ok");
    } else if (!strcmp(m, "dead")) {
        fails = nc_fork_run(4, 30, body_dead, NULL, 3);
        printf("dead p=4: %s\n", fails ? "FAIL" : "ok");
    } else {
        fprintf(stderr, "usage: %s all [PMIN PMAX] | big | mismatch | interleave [SEED] | wrap | "
                        "dead  [TUNABLE=VALUE...]\n",
                argv[0]);
        return 2;
    }
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
