/*
 * Guest test (e): numacoll_allreduce and numacoll_reduce between forked
 * processes spread over the guest's NUMA nodes (one per CPU, pinned
 * round-robin over the nodes, as guest_bcast), one team for everything:
 *
 *   - double SUM of random inputs (signs and exponents 2^-32..2^31 mixed, so
 *     the order of the additions shows in the bits), checked BITWISE on every
 *     member against the serial fold in the order numacoll.h documents: with
 *     several members per node (4x2), the two-level order (each node's
 *     members in rank order, then the nodes), else rank order
 *     ((x0 + x1) + x2) ... + x(p-1); numacoll's NUMA leaders must be the
 *     pinning's;
 *   - int64 BXOR, exact;
 *   - allreduce, then reduce from every root, at 0, 1 and 7 elements and
 *     4096 +-8, 256 KiB +-8, 1 MiB + 24 and 4 MiB bytes (the small path, its
 *     limit, one and two fragments, many rounds through the slots);
 *   - in place once each: an allreduce (double, 1 MiB + 24) and a reduce
 *     (int64, 256 KiB + 8, root p-1);
 *   - two levels: the allreduce's results are forwarded inside each node
 *     (reduce_fwd) exactly where NUMACOLL_NUMA_FORWARD and the /sys distances
 *     say so (4x2 boots with a SLIT of 21: forwarded; 2x2: not);
 *   - placement: after the reductions, every member's reduction area
 *     (numacoll_team_info: rank_off + rank*rank_bytes + reduce_off,
 *     reduce_bytes) is on that member's node per move_pages(2): each member
 *     checks its own, member 0 checks every member's again from its side.
 *
 * The expected results are computed once in the parent before the members
 * are forked (inputs are a hash of type, size, rank and index, so every
 * member generates only its own). Every reader's recvbuf is checked with 64
 * guard bytes behind it, a non-root's recvbuf must stay untouched (or is
 * NULL), and sendbuf must be unchanged. One summary line per check, printed
 * by the parent from counters the members share; exit status 1 on any
 * failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <numaif.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/nc_team.h" /* reduce_fwd */
#include "guest_util.h"
#include "numacoll.h"

static g_topo_t gt;

#define GUARD 64
#define FILL 0xa5
#define MAXBYTES (4u << 20)

/* Sizes in elements of 8 bytes: 0, 1, 7 elements, then bytes / 8. */
static const size_t counts[] = {0,
                                1,
                                7,
                                (4096 - 8) / 8,
                                4096 / 8,
                                (4096 + 8) / 8,
                                (262144 - 8) / 8,
                                262144 / 8,
                                (262144 + 8) / 8,
                                ((1u << 20) + 24) / 8,
                                (4u << 20) / 8};
#define NSIZES (sizeof counts / sizeof *counts)

enum { T_DSUM = 0, T_XOR = 1, NTYPES = 2 };
static const char *const tname[NTYPES] = {"double/sum", "int64/bxor"};
static const numacoll_type_t ttype[NTYPES] = {NUMACOLL_DOUBLE, NUMACOLL_INT64};
static const numacoll_op_t top[NTYPES] = {NUMACOLL_SUM, NUMACOLL_BXOR};

/* The checks, one summary line each. */
enum {
    C_ALL_D,
    C_RED_D,
    C_ALL_X,
    C_RED_X,
    C_INPLACE,
    C_PLACE,
    NCHECKS
};
static const char *const cname[NCHECKS] = {
    "allreduce double/sum", "reduce double/sum (every root)",
    "allreduce int64/bxor", "reduce int64/bxor (every root)",
    "in place (allreduce double/sum 1 MiB+24, reduce int64/bxor 256 KiB+8 root p-1)",
    "placement of the reduction slots (move_pages)"};

/* Shared with the members (MAP_SHARED before the fork). */
typedef struct counters {
    _Atomic long calls, bad, bytes, pages, members;
    double secs; /* rank 0's wall time, barrier to barrier */
} counters_t;
static counters_t *ctr;

/* Parent-computed expected results, inherited by the members. */
static uint64_t *expect[NTYPES][NSIZES];
/* How many elements of the 4 MiB double sum come out differently in the
 * reverse order (the test's teeth), computed by the parent. */
static long order_sensitive;
static unsigned char *fillbuf; /* MAXBYTES + GUARD bytes of FILL */

typedef struct plan {
    int p;
    int cpu[G_MAX_CPUS], node[G_MAX_CPUS];
} plan_t;

static inline uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Element e of member `rank`'s input of type t at size index s, as bits. */
static inline uint64_t gen(int t, size_t s, int rank, size_t e)
{
    uint64_t u = splitmix(((uint64_t)(t * 64 + (int)s) << 48) ^ ((uint64_t)rank << 32) ^ e);
    if (t == T_XOR)
        return u;
    /* A finite double: random sign and mantissa, exponent 2^-32 .. 2^31. */
    uint64_t sign = u >> 63, ex = (uint64_t)(1023 - 32) + (u >> 52 & 63);
    return sign << 63 | ex << 52 | (u & ((1ull << 52) - 1));
}

static inline double as_d(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}
static inline uint64_t as_u(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

static void fill_input(int t, size_t s, int rank, uint64_t *in, size_t m)
{
    for (size_t e = 0; e < m; e++)
        in[e] = gen(t, s, rank, e);
}

/* lead[k]: the lowest member on member k's node, from the pinning: the
 * domains of numacoll's two-level order (include/numacoll.h). */
static int lead[G_MAX_CPUS];
static int ndomains;

/* The serial reference: the left fold in rank order inside each node's
 * members, then over the nodes' partials (nodes by their lowest member);
 * with one member per node, the left fold in rank order. */
static double dsum(size_t s, int p, size_t e)
{
    double acc = 0;
    for (int d = 0; d < p; d++) {
        if (lead[d] != d)
            continue;
        double part = as_d(gen(T_DSUM, s, d, e));
        for (int k = d + 1; k < p; k++)
            if (lead[k] == d)
                part = part + as_d(gen(T_DSUM, s, k, e));
        acc = d == 0 ? part : acc + part;
    }
    return acc;
}

static int compute_expected(const int *node, int p)
{
    ndomains = 0;
    for (int k = 0; k < p; k++) {
        lead[k] = k;
        for (int j = 0; j < k; j++)
            if (node[j] == node[k]) {
                lead[k] = j;
                break;
            }
        ndomains += lead[k] == k;
    }
    for (int t = 0; t < NTYPES; t++)
        for (size_t s = 0; s < NSIZES; s++) {
            size_t m = counts[s];
            uint64_t *x = malloc((m ? m : 1) * sizeof *x);
            if (!x)
                return -1;
            for (size_t e = 0; e < m; e++) {
                if (t == T_DSUM) {
                    x[e] = as_u(dsum(s, p, e));
                    if (s == NSIZES - 1 && p > 2) {
                        double rev = as_d(gen(t, s, p - 1, e));
                        for (int k = p - 2; k >= 0; k--)
                            rev = rev + as_d(gen(t, s, k, e));
                        order_sensitive += as_u(rev) != x[e];
                    }
                } else {
                    uint64_t acc = gen(t, s, 0, e);
                    for (int k = 1; k < p; k++)
                        acc ^= gen(t, s, k, e);
                    x[e] = acc;
                }
            }
            expect[t][s] = x;
        }
    return 0;
}

typedef struct member {
    numacoll_team_t *team;
    numacoll_team_info_t in;
    int rank, p;
    uint64_t *send, *keep;
    unsigned char *recv;
    long msgs; /* failure messages printed by this member */
} member_t;

#define FAILMSG(mb, ...)                                                                    \
    do {                                                                                    \
        if ((mb)->msgs++ < 4)                                                               \
            g_fail_msg(__FILE__, __LINE__, __VA_ARGS__);                                    \
    } while (0)

static void describe_case(char *buf, size_t len, const char *what, int t, size_t s, int root)
{
    if (root >= 0)
        snprintf(buf, len, "%s %s count %zu (%zu bytes) root %d", what, tname[t], counts[s],
                 counts[s] * 8, root);
    else
        snprintf(buf, len, "%s %s count %zu (%zu bytes)", what, tname[t], counts[s],
                 counts[s] * 8);
}

/* recv holds a result: compare it and its guard; 1 when wrong. */
static int check_result(member_t *mb, const char *cs, int t, size_t s)
{
    const size_t m = counts[s], n = m * 8;
    const uint64_t *want = expect[t][s];
    if (memcmp(mb->recv, want, n)) {
        size_t e = 0, nbad = 0;
        uint64_t got;
        for (size_t k = 0; k < m; k++) {
            memcpy(&got, mb->recv + k * 8, 8);
            if (got != want[k] && !nbad++)
                e = k;
        }
        memcpy(&got, mb->recv + e * 8, 8);
        if (t == T_DSUM)
            FAILMSG(mb,
                    "%s: %zu of %zu elements wrong, first element %zu: got 0x%016" PRIx64
                    " (%.17g), expected 0x%016" PRIx64 " (%.17g)",
                    cs, nbad, m, e, got, as_d(got), want[e], as_d(want[e]));
        else
            FAILMSG(mb,
                    "%s: %zu of %zu elements wrong, first element %zu: got 0x%016" PRIx64
                    ", expected 0x%016" PRIx64,
                    cs, nbad, m, e, got, want[e]);
        return 1;
    }
    if (memcmp(mb->recv + n, fillbuf, GUARD)) {
        size_t i = 0;
        while (mb->recv[n + i] == FILL)
            i++;
        FAILMSG(mb, "%s: guard byte %zu behind the result is 0x%02x, written", cs, i,
                mb->recv[n + i]);
        return 1;
    }
    return 0;
}

/* sendbuf must be unchanged; 1 when not. */
static int check_send(member_t *mb, const char *cs, size_t m)
{
    if (!memcmp(mb->send, mb->keep, m * 8))
        return 0;
    size_t e = 0;
    while (mb->send[e] == mb->keep[e])
        e++;
    FAILMSG(mb, "%s: sendbuf element %zu changed from 0x%016" PRIx64 " to 0x%016" PRIx64, cs, e,
            mb->keep[e], mb->send[e]);
    return 1;
}

/* A barrier between phases; rank 0 times the phase. */
static int phase_sync(member_t *mb, const char *why)
{
    int rc = numacoll_barrier(mb->team);
    if (rc)
        FAILMSG(mb, "barrier %s: %s", why, numacoll_strerror(rc));
    return rc;
}

/* Allreduce of type t at every size. */
static int run_allreduce(member_t *mb, int t, counters_t *c)
{
    char cs[160];
    long bad = 0, calls = 0, bytes = 0;
    for (size_t s = 0; s < NSIZES; s++) {
        const size_t m = counts[s], n = m * 8;
        fill_input(t, s, mb->rank, mb->send, m);
        memcpy(mb->keep, mb->send, n);
        memset(mb->recv, FILL, n + GUARD);
        describe_case(cs, sizeof cs, "allreduce", t, s, -1);
        int rc = numacoll_allreduce(mb->team, mb->send, mb->recv, m, ttype[t], top[t]);
        calls++;
        if (rc) {
            FAILMSG(mb, "%s: %s", cs, numacoll_strerror(rc));
            bad++;
            continue;
        }
        int b = check_result(mb, cs, t, s);
        b |= check_send(mb, cs, m);
        bad += b;
        bytes += (long)n;
    }
    atomic_fetch_add(&c->calls, calls);
    atomic_fetch_add(&c->bad, bad);
    atomic_fetch_add(&c->bytes, bytes);
    return bad != 0;
}

/* Reduce of type t at every size from every root. A non-root passes NULL as
 * recvbuf for odd roots, a FILL buffer that must stay untouched otherwise. */
static int run_reduce(member_t *mb, int t, counters_t *c)
{
    char cs[160];
    long bad = 0, calls = 0, bytes = 0;
    memset(mb->recv, FILL, MAXBYTES + GUARD); /* all FILL between the calls */
    for (size_t s = 0; s < NSIZES; s++) {
        const size_t m = counts[s], n = m * 8;
        fill_input(t, s, mb->rank, mb->send, m);
        memcpy(mb->keep, mb->send, n);
        for (int root = 0; root < mb->p; root++) {
            const int me_root = root == mb->rank;
            describe_case(cs, sizeof cs, "reduce", t, s, root);
            if (me_root)
                memset(mb->recv, FILL, n + GUARD);
            void *rb = me_root || root % 2 == 0 ? mb->recv : NULL;
            int rc = numacoll_reduce(mb->team, mb->send, rb, m, ttype[t], top[t], root);
            calls++;
            if (rc) {
                FAILMSG(mb, "%s: %s", cs, numacoll_strerror(rc));
                bad++;
                continue;
            }
            int b = check_send(mb, cs, m);
            if (me_root) {
                b |= check_result(mb, cs, t, s);
                bytes += (long)n;
                /* Leave recv all FILL for the next non-root use. */
                memset(mb->recv, FILL, n + GUARD);
            } else if (rb && memcmp(mb->recv, fillbuf, n + GUARD)) {
                size_t i = 0;
                while (mb->recv[i] == FILL)
                    i++;
                FAILMSG(mb, "%s: a non-root's recvbuf was written (byte %zu is 0x%02x)", cs, i,
                        mb->recv[i]);
                memset(mb->recv, FILL, n + GUARD);
                b = 1;
            }
            bad += b;
        }
    }
    atomic_fetch_add(&c->calls, calls);
    atomic_fetch_add(&c->bad, bad);
    atomic_fetch_add(&c->bytes, bytes);
    return bad != 0;
}

static size_t find_size(size_t bytes)
{
    for (size_t s = 0; s < NSIZES; s++)
        if (counts[s] * 8 == bytes)
            return s;
    abort();
}

/* In place once each: allreduce double/sum at 1 MiB + 24, reduce int64/bxor
 * at 256 KiB + 8 to root p-1 (the root's input in recvbuf, the others' in
 * sendbuf). */
static int run_inplace(member_t *mb, counters_t *c)
{
    char cs[160];
    long bad = 0, calls = 0, bytes = 0;
    size_t s = find_size((1u << 20) + 24), m = counts[s];
    describe_case(cs, sizeof cs, "in-place allreduce", T_DSUM, s, -1);
    fill_input(T_DSUM, s, mb->rank, (uint64_t *)mb->recv, m);
    memset(mb->recv + m * 8, FILL, GUARD);
    int rc = numacoll_allreduce(mb->team, NUMACOLL_IN_PLACE, mb->recv, m, NUMACOLL_DOUBLE,
                                NUMACOLL_SUM);
    calls++;
    if (rc) {
        FAILMSG(mb, "%s: %s", cs, numacoll_strerror(rc));
        bad++;
    } else {
        bad += check_result(mb, cs, T_DSUM, s);
        bytes += (long)(m * 8);
    }

    s = find_size(262144 + 8);
    m = counts[s];
    const int root = mb->p - 1;
    describe_case(cs, sizeof cs, "in-place reduce", T_XOR, s, root);
    if (mb->rank == root) {
        fill_input(T_XOR, s, mb->rank, (uint64_t *)mb->recv, m);
        memset(mb->recv + m * 8, FILL, GUARD);
        rc = numacoll_reduce(mb->team, NUMACOLL_IN_PLACE, mb->recv, m, NUMACOLL_INT64,
                             NUMACOLL_BXOR, root);
    } else {
        fill_input(T_XOR, s, mb->rank, mb->send, m);
        memcpy(mb->keep, mb->send, m * 8);
        rc = numacoll_reduce(mb->team, mb->send, NULL, m, NUMACOLL_INT64, NUMACOLL_BXOR, root);
    }
    calls++;
    if (rc) {
        FAILMSG(mb, "%s: %s", cs, numacoll_strerror(rc));
        bad++;
    } else if (mb->rank == root) {
        bad += check_result(mb, cs, T_XOR, s);
        bytes += (long)(m * 8);
    } else {
        bad += check_send(mb, cs, m);
    }
    atomic_fetch_add(&c->calls, calls);
    atomic_fetch_add(&c->bad, bad);
    atomic_fetch_add(&c->bytes, bytes);
    return bad != 0;
}

/* move_pages(2) (numaif.h) query of the reduction area of member k: how many
 * of its pages are on `node`; the first one that is not is described. With
 * `touch`, every page is read first (this process may not have it mapped:
 * move_pages only sees the caller's page tables). */
static int query_area(member_t *mb, int k, int node, int touch, long *npages)
{
    const numacoll_team_info_t *in = &mb->in;
    const size_t page = in->page;
    char *area = (char *)in->seg_base + in->rank_off + (size_t)k * in->rank_bytes + in->reduce_off;
    const size_t n = (in->reduce_bytes + page - 1) / page;
    *npages = (long)n;
    if (!n || in->reduce_bytes == 0) {
        FAILMSG(mb, "member %d: numacoll_team_info gives an empty reduction area", k);
        return 1;
    }
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    if (!pages || !status) {
        free(pages);
        free(status);
        FAILMSG(mb, "malloc");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        pages[i] = area + i * page;
        if (touch)
            (void)*(volatile char *)pages[i];
        status[i] = -1;
    }
    long rc = move_pages(0, (unsigned long)n, pages, NULL, status, 0);
    int bad = 0;
    if (rc) {
        FAILMSG(mb, "move_pages of member %d's reduction area: %s", k, strerror(errno));
        bad = 1;
    } else {
        long on = 0, elsewhere = 0, unmapped = 0;
        size_t first = n;
        for (size_t i = 0; i < n; i++) {
            if (status[i] == node) {
                on++;
                continue;
            }
            if (status[i] >= 0)
                elsewhere++;
            else
                unmapped++;
            if (first == n)
                first = i;
        }
        if (first < n) {
            /* Page 0 holds the control lines, then the slots. */
            FAILMSG(mb,
                    "member %d's reduction area (segment offset %zu, %zu bytes): %ld of %ld "
                    "pages on node %d, %ld elsewhere, %ld not mapped; first: page %zu (%s) "
                    "status %d",
                    k, in->rank_off + (size_t)k * in->rank_bytes + in->reduce_off,
                    in->reduce_bytes, on, (long)n, node, elsewhere, unmapped, first,
                    first == 0 ? "control lines" : "slots", status[first]);
            bad = 1;
        }
    }
    free(pages);
    free(status);
    return bad;
}

static int run_placement(member_t *mb, const plan_t *pl, counters_t *c)
{
    long bad = 0, pages = 0, np;
    const int node = pl->node[mb->rank];
    if (mb->in.numa_node != node) {
        FAILMSG(mb, "cpu %d: numacoll says node %d, /sys says %d", pl->cpu[mb->rank],
                mb->in.numa_node, node);
        bad++;
    }
    bad += query_area(mb, mb->rank, node, 0, &np);
    pages += np;
    if (mb->rank == 0)
        for (int k = 1; k < mb->p; k++) {
            bad += query_area(mb, k, pl->node[k], 1, &np);
            pages += np;
        }
    atomic_fetch_add(&c->pages, pages);
    atomic_fetch_add(&c->bad, bad);
    atomic_fetch_add(&c->calls, 1);
    return bad != 0;
}

static int body(int rank, int p, const char *name, void *arg)
{
    const plan_t *pl = arg;
    G_CHECK(g_pin(pl->cpu[rank]) == 0, "pin to cpu %d", pl->cpu[rank]);
    member_t mb = {.rank = rank, .p = p};
    numacoll_bootstrap_t *bs;
    int rc = numacoll_bootstrap_named(name, rank, p, &bs);
    G_CHECK(rc == 0, "numacoll_bootstrap_named: %s", numacoll_strerror(rc));
    rc = numacoll_team_create(bs, &mb.team);
    G_CHECK(rc == 0, "numacoll_team_create: %s", numacoll_strerror(rc));
    G_CHECK(numacoll_team_info(mb.team, &mb.in) == 0, "numacoll_team_info");
    G_CHECK(mb.in.placement == NUMACOLL_PLACEMENT_OK, "placement not OK: %s",
            mb.in.placement_detail);
    G_CHECK(mb.in.seg_base, "numacoll_team_info gave no segment base");
    int leaders[G_MAX_CPUS];
    G_CHECK(numacoll_team_leaders(mb.team, leaders) == 0, "numacoll_team_leaders");
    for (int k = 0; k < p; k++)
        G_CHECK(leaders[k] == lead[k], "member %d: numacoll's NUMA leader is %d, the pinning "
                "says %d", k, leaders[k], lead[k]);
    mb.send = malloc(MAXBYTES);
    mb.keep = malloc(MAXBYTES);
    mb.recv = malloc(MAXBYTES + GUARD);
    G_CHECK(mb.send && mb.keep && mb.recv, "malloc");
    if (rank == 0)
        printf("  p=%d, %d node(s): reduction area %zu bytes per member at offset %zu of its "
               "%zu-byte block\n",
               p, gt.nnodes, mb.in.reduce_bytes, mb.in.reduce_off, mb.in.rank_bytes);

    int bad = 0;
    for (int ck = 0; ck < NCHECKS; ck++) {
        if (phase_sync(&mb, "before a check"))
            return 1;
        double t0 = g_now();
        switch (ck) {
        case C_ALL_D: bad |= run_allreduce(&mb, T_DSUM, &ctr[ck]); break;
        case C_RED_D: bad |= run_reduce(&mb, T_DSUM, &ctr[ck]); break;
        case C_ALL_X: bad |= run_allreduce(&mb, T_XOR, &ctr[ck]); break;
        case C_RED_X: bad |= run_reduce(&mb, T_XOR, &ctr[ck]); break;
        case C_INPLACE: bad |= run_inplace(&mb, &ctr[ck]); break;
        case C_PLACE: bad |= run_placement(&mb, pl, &ctr[ck]); break;
        }
        if (phase_sync(&mb, "after a check"))
            return 1;
        atomic_fetch_add(&ctr[ck].members, 1);
        if (rank == 0)
            ctr[ck].secs = g_now() - t0;
    }
    /* the allreduce's results forwarded inside each node (step 5f of
     * coll/nc_reduce.c) exactly where the rule says so, from /sys */
    int mates = 0;
    for (int k = 0; k < p; k++)
        mates += k != rank && lead[k] == lead[rank];
    const int fwd = ndomains > 1 && ndomains < p && g_numa_forward_expected(&gt, mates);
    if (fwd != (mb.team->reduce_fwd > 0)) {
        g_fail_msg(__FILE__, __LINE__, "member %d (%d others on its node, r = %.2f): expected "
                   "the allreduce's results %s, but %llu slices were forwarded or read forwarded",
                   rank, mates, g_numa_ratio(&gt), fwd ? "forwarded" : "not forwarded",
                   (unsigned long long)mb.team->reduce_fwd);
        bad = 1;
    } else if (rank == 0) {
        printf("  allreduce results %s inside the nodes (r = %.2f from /sys)\n",
               fwd ? "forwarded" : "not forwarded", g_numa_ratio(&gt));
    }
    free(mb.send);
    free(mb.keep);
    free(mb.recv);
    numacoll_team_destroy(mb.team);
    numacoll_bootstrap_named_free(bs);
    return bad;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (g_topo_read(&gt)) {
        printf("RESULT: FAIL cannot read /sys/devices/system/node\n");
        return 1;
    }
    g_topo_print(&gt);
    static plan_t pl;
    /* One member per CPU, spread round-robin over the nodes. */
    pl.p = 0;
    for (int k = 0; k < gt.nnodes; k++)
        pl.p += gt.ncpus[k];
    for (int i = 0; i < pl.p; i++) {
        pl.cpu[i] = g_rr_cpu(&gt, i);
        pl.node[i] = gt.cpu_node[pl.cpu[i]];
    }
    void *m = mmap(NULL, NCHECKS * sizeof *ctr, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    fillbuf = malloc(MAXBYTES + GUARD);
    if (m == MAP_FAILED || !fillbuf) {
        printf("RESULT: FAIL mmap/malloc\n");
        return 1;
    }
    ctr = m;
    memset(fillbuf, FILL, MAXBYTES + GUARD);
    double t0 = g_now();
    if (compute_expected(pl.node, pl.p)) {
        printf("RESULT: FAIL malloc of the expected results\n");
        return 1;
    }
    printf("members: %d (one per CPU, round-robin over %d nodes); serial reference (%s) "
           "computed in %.2f s\n",
           pl.p, gt.nnodes,
           ndomains > 1 && ndomains < pl.p ? "two-level: each node's members, then the nodes"
                                           : "rank order",
           g_now() - t0);
    if (pl.p > 2)
        printf("4 MiB double sum: %ld of %zu elements differ in reverse rank order (the order "
               "shows in the bits)\n",
               order_sensitive, counts[NSIZES - 1]);
    int prc = g_preload_numacoll();
    if (prc) {
        printf("RESULT: FAIL a one-member team in the parent: %s\n", numacoll_strerror(prc));
        return 1;
    }
    t0 = g_now();
    int frc = g_fork_run(pl.p, 80, body, &pl);
    double secs = g_now() - t0;
    int fails = frc != 0;
    for (int ck = 0; ck < NCHECKS; ck++) {
        counters_t *c = &ctr[ck];
        long bad = atomic_load(&c->bad), done = atomic_load(&c->members);
        const char *v = bad ? "FAIL" : done < pl.p ? "FAIL (not finished)" : "ok";
        if (ck == C_PLACE)
            printf("  %-80s: %ld member checks, %ld pages queried, %ld bad: %s\n", cname[ck],
                   atomic_load(&c->calls), atomic_load(&c->pages), bad, v);
        else
            printf("  %-80s: %ld calls per member, %.1f MB of results checked, %ld bad, "
                   "%.2f s: %s\n",
                   cname[ck], atomic_load(&c->calls) / pl.p,
                   (double)atomic_load(&c->bytes) / 1e6, bad, c->secs, v);
        fails += bad != 0 || done < pl.p;
    }
    printf("team of %d: %.2f s in all\n", pl.p, secs);
    if (fails) {
        const char *why = g_first_failure();
        printf("RESULT: FAIL %s\n", *why ? why : "a check did not finish");
    } else {
        printf("RESULT: PASS\n");
    }
    return fails != 0;
}
