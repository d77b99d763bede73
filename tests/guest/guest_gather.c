/*
 * Guest test (f): the gather family between forked processes spread over the
 * guest's NUMA nodes (one per CPU, pinned round-robin over the nodes):
 *   - numacoll_gather, _gatherv, _scatter, _scatterv, _allgather,
 *     _allgatherv, _alltoall, _alltoallv, every root, blocks of 0, 1, 33, 512
 *     (inline), 513, 4097, 65537 and 262147 bytes (v-forms: uneven, some
 *     zero, reversed with gaps); every byte of every receive buffer and the
 *     gaps between blocks checked;
 *   - two levels: a member whose node is carried into must have carried
 *     allgather blocks into it or read them from the member that carried them
 *     (65537 and 262147 bytes are above NUMACOLL_ALLGATHER_NUMA_MIN), so the
 *     check of the bytes above covers the forwarded path on real NUMA nodes;
 *     and no other member may have. Carried into: a node of m >= 2 members
 *     with NUMACOLL_NUMA_FORWARD=on, with auto (the default) when
 *     (m - 1)(r - 1) > 1, r the mean of d(a, b) / d(a, a) over the team's
 *     nodes from /sys (guest 4x2 boots with a SLIT of 21: two levels; 2x2
 *     with the kernel's 20: one level);
 *   - placement: afterwards every member's gather area (numacoll_team_info:
 *     rank_off + rank * rank_bytes + gather_off) must be on the member's own
 *     node (move_pages), as the first touch put it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/nc_team.h" /* gather_fwd, gather_via */
#include "guest_util.h"
#include "numacoll.h"

static g_topo_t gt;

enum { GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, NCOLL };
static const char *const names[NCOLL] = {"gather",    "gatherv",    "scatter",  "scatterv",
                                         "allgather", "allgatherv", "alltoall", "alltoallv"};
static const int rooted[NCOLL] = {1, 1, 1, 1, 0, 0, 0, 0};
static const size_t sizes[] = {0, 1, 33, 512, 513, 4097, 65537, 262147};
#define NSIZES (sizeof sizes / sizeof *sizes)
#define MAXB (262147 + 3)
#define GAP 16
#define FILL 0xee

typedef struct plan {
    int p;
    int cpu[G_MAX_CPUS], node[G_MAX_CPUS];
} plan_t;

/* Block (call, s, d) is table + off(call, s, d): fills are memcpy, checks memcmp
 * (a byte loop is slow under TCG). */
#define SLACK 4096
static unsigned char *table;

static const unsigned char *pat(uint32_t call, int s, int d)
{
    return table + ((size_t)call * 97u + (size_t)s * 31u + (size_t)d * 17u) % SLACK;
}

static size_t blk(int coll, uint32_t call, int s, int d, size_t n)
{
    if (!(coll & 1))
        return n;
    const int k = coll == ALLTOALLV ? s + d : coll == SCATTERV ? d : s;
    switch ((unsigned)(k + (int)(call % 3)) % 4) {
    case 0: return 0;
    case 1: return n;
    case 2: return n / 2 + 1;
    default: return n + 3;
    }
}

static int per_dest(int coll)
{
    return coll == SCATTER || coll == SCATTERV || coll == ALLTOALL || coll == ALLTOALLV;
}

/* Receive layout: uniform (k * n) or, for the v-forms, reversed with gaps. */
static size_t layout(int coll, uint32_t call, int me, int p, size_t n, size_t *cnt, size_t *dsp,
                     int recv)
{
    size_t at = (coll & 1) ? GAP : 0;
    for (int j = 0; j < p; j++) {
        const int k = (coll & 1) ? p - 1 - j : j;
        cnt[k] = recv ? blk(coll, call, k, me, n) : blk(coll, call, me, k, n);
        dsp[k] = at;
        at += cnt[k] + ((coll & 1) ? GAP : 0);
        if (!(coll & 1))
            dsp[k] = (size_t)k * n, at = (size_t)(k + 1) * n;
    }
    return at;
}

static int body(int rank, int p, const char *name, void *arg)
{
    const plan_t *pl = arg;
    G_CHECK(g_pin(pl->cpu[rank]) == 0, "pin to cpu %d", pl->cpu[rank]);
    numacoll_bootstrap_t *bs;
    numacoll_team_t *team;
    int rc = numacoll_bootstrap_named(name, rank, p, &bs);
    G_CHECK(rc == 0, "numacoll_bootstrap_named: %s", numacoll_strerror(rc));
    rc = numacoll_team_create(bs, &team);
    G_CHECK(rc == 0, "numacoll_team_create: %s", numacoll_strerror(rc));
    numacoll_team_info_t in;
    G_CHECK(numacoll_team_info(team, &in) == 0, "numacoll_team_info");
    G_CHECK(in.placement == NUMACOLL_PLACEMENT_OK, "placement not OK: %s", in.placement_detail);
    G_CHECK(in.numa_node == pl->node[rank], "cpu %d: numacoll says node %d, /sys says %d",
            pl->cpu[rank], in.numa_node, pl->node[rank]);

    const size_t cap = (size_t)p * (MAXB + GAP) + GAP;
    unsigned char *S = malloc(cap), *R = malloc(cap), *W = malloc(cap);
    size_t *sc = calloc((size_t)p, sizeof *sc), *sd = calloc((size_t)p, sizeof *sd);
    size_t *rc_ = calloc((size_t)p, sizeof *rc_), *rd = calloc((size_t)p, sizeof *rd);
    G_CHECK(S && R && W && sc && sd && rc_ && rd, "malloc");
    long bad = 0, calls = 0;
    uint32_t call = 0;
    double t0 = g_now();
    for (size_t si = 0; si < NSIZES; si++)
        for (int coll = 0; coll < NCOLL; coll++)
            for (int root = 0; root < (rooted[coll] ? p : 1); root++) {
                call++;
                const size_t n = sizes[si];
                const size_t stot = layout(coll, call, rank, p, n, sc, sd, 0);
                const size_t rtot = layout(coll, call, rank, p, n, rc_, rd, 1);
                /* send side: p blocks (scatter root, alltoall) or one */
                if (per_dest(coll))
                    for (int d = 0; d < p; d++)
                        memcpy(S + sd[d], pat(call, rank, d), sc[d]);
                else
                    memcpy(S, pat(call, rank, 0), sc[0]);
                memset(R, FILL, cap);
                const size_t one = sc[0], mine_r = blk(coll, call, root < 0 ? 0 : root, rank, n);
                switch (coll) {
                case GATHER: rc = numacoll_gather(team, S, n, R, root); break;
                case GATHERV: rc = numacoll_gatherv(team, S, one, R, rc_, rd, root); break;
                case SCATTER: rc = numacoll_scatter(team, S, R, n, root); break;
                case SCATTERV: rc = numacoll_scatterv(team, S, sc, sd, R, mine_r, root); break;
                case ALLGATHER: rc = numacoll_allgather(team, S, n, R); break;
                case ALLGATHERV: rc = numacoll_allgatherv(team, S, one, R, rc_, rd); break;
                case ALLTOALL: rc = numacoll_alltoall(team, S, R, n); break;
                default: rc = numacoll_alltoallv(team, S, sc, sd, R, rc_, rd); break;
                }
                calls++;
                if (rc) {
                    if (bad++ < 3)
                        g_fail_msg(__FILE__, __LINE__, "%s %zu B root %d: %s", names[coll], n,
                                   root, numacoll_strerror(rc));
                    continue;
                }
                /* the expected receive buffer */
                memset(W, FILL, cap);
                size_t upto = rtot;
                if (coll == SCATTER || coll == SCATTERV) {
                    memcpy(W, pat(call, root, rank), mine_r);
                    upto = mine_r + GAP;
                } else if (!rooted[coll] || rank == root) {
                    for (int s = 0; s < p; s++)
                        memcpy(W + rd[s], pat(call, s, per_dest(coll) ? rank : 0), rc_[s]);
                }
                (void)stot;
                if (memcmp(R, W, upto + GAP < cap ? upto + GAP : cap)) {
                    size_t i = 0;
                    while (R[i] == W[i])
                        i++;
                    if (bad++ < 3)
                        g_fail_msg(__FILE__, __LINE__,
                                   "%s %zu B root %d: byte %zu is 0x%02x, expected 0x%02x",
                                   names[coll], n, root, i, R[i], W[i]);
                }
            }
    int mates = 0; /* other members on my node */
    for (int k = 0; k < p; k++)
        mates += k != rank && pl->node[k] == pl->node[rank];
    const double r = g_numa_ratio(&gt); /* the team spans every node here */
    const char *agn = getenv("NUMACOLL_NUMA_FORWARD");
    const int expect = g_numa_forward_expected(&gt, mates);
    const uint64_t two = team->gather_fwd + team->gather_via;
    if (expect != (two > 0)) {
        g_fail_msg(__FILE__, __LINE__,
                   "member %d shares node %d with %d others (r = %.2f, NUMACOLL_NUMA_FORWARD="
                   "%s): expected %s, but it carried %llu allgather blocks into it and read "
                   "%llu from their carriers", rank, pl->node[rank], mates, r,
                   agn ? agn : "auto", expect ? "two levels" : "one level",
                   (unsigned long long)team->gather_fwd, (unsigned long long)team->gather_via);
        bad++;
    } else if (rank == 0) {
        printf("  allgather %s (r = %.2f from /sys, %d other member(s) on node %d): member 0 "
               "carried %llu blocks into its node and read %llu from their carriers\n",
               expect ? "two levels" : "one level", r, mates, pl->node[0],
               (unsigned long long)team->gather_fwd, (unsigned long long)team->gather_via);
    }
    const double secs = g_now() - t0;
    if (rank == 0)
        printf("  p=%d over %d nodes: %ld calls (8 collectives x %zu sizes, every root), "
               "%.2f s%s\n",
               p, gt.nnodes, calls, NSIZES, secs, bad ? "" : ": ok");
    /* placement of my gather area, after use */
    g_pages_t pg;
    const size_t off = in.rank_off + (size_t)rank * in.rank_bytes + in.gather_off;
    G_CHECK(in.gather_bytes > 0, "numacoll_team_info gives an empty gather area");
    G_CHECK(g_query_pages(in.seg_base, off, in.gather_bytes, in.page, pl->node[rank], &pg) == 0,
            "move_pages of the gather area");
    if (pg.on_node != pg.pages) {
        g_fail_msg(__FILE__, __LINE__,
                   "member %d's gather area (offset %zu, %zu bytes): %ld of %ld pages on node "
                   "%d, %ld elsewhere, %ld not mapped; first at +%zu (status %d)",
                   rank, off, in.gather_bytes, pg.on_node, pg.pages, pl->node[rank],
                   pg.elsewhere, pg.unmapped, pg.first_off, pg.first_status);
        bad++;
    } else if (rank == 0) {
        printf("  gather areas: %ld pages per member, all on their members' nodes\n", pg.pages);
    }
    rc = numacoll_barrier(team);
    G_CHECK(rc == 0, "final barrier: %s", numacoll_strerror(rc));
    free(S), free(R), free(W), free(sc), free(sd), free(rc_), free(rd);
    numacoll_team_destroy(team);
    numacoll_bootstrap_named_free(bs);
    return bad != 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (g_topo_read(&gt)) {
        printf("RESULT: FAIL cannot read /sys/devices/system/node\n");
        return 1;
    }
    g_topo_print(&gt);
    table = malloc(MAXB + SLACK);
    if (!table) {
        printf("RESULT: FAIL malloc\n");
        return 1;
    }
    uint32_t x = 0x9e3779b9u;
    for (size_t i = 0; i < MAXB + SLACK; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        table[i] = (unsigned char)x;
    }
    static plan_t pl;
    pl.p = 0;
    for (int k = 0; k < gt.nnodes; k++)
        pl.p += gt.ncpus[k];
    for (int i = 0; i < pl.p; i++) {
        pl.cpu[i] = g_rr_cpu(&gt, i);
        pl.node[i] = gt.cpu_node[pl.cpu[i]];
    }
    int prc = g_preload_numacoll();
    if (prc) {
        printf("RESULT: FAIL a one-member team in the parent: %s\n", numacoll_strerror(prc));
        return 1;
    }
    int fail = g_fork_run(pl.p, 150, body, &pl);
    if (fail)
        printf("RESULT: FAIL %s\n", g_first_failure());
    else
        printf("RESULT: PASS\n");
    return fail != 0;
}
