/*
 * Guest test (b): where numacoll's segment pages land.
 *
 * A team of forked processes, each pinned to a CPU of its own node (and a
 * second team with two members per node). Every member checks, by itself:
 *   - numacoll_team_info(): its numa_node is what /sys says for its CPU, and
 *     numacoll's own placement check reports OK with 0 misplaced pages;
 *   - move_pages() on its own block (rank_off + rank*rank_bytes, rank_bytes
 *     long: control blocks, then fragment buffers) finds every page on its
 *     node and mapped (member 0 also checks the header and set pages);
 *   - after 64 KiB broadcasts from every root and barriers, the pages have not
 *     moved.
 * The segment's base address comes from numacoll_team_info() (seg_base).
 *
 * --expect-misplaced: the negative check. Run with
 * NUMACOLL_TEST_TOUCH_ALL_FROM_RANK0=1 (member 0 touches the whole segment
 * first, i.e. first touch is broken): numacoll's placement must be MISPLACED,
 * placement_detail must name a block and a node, and the members' own
 * move_pages() checks must find their pages on member 0's node. PASS then
 * means "the breakage was detected". Without the flag the same environment
 * makes this test FAIL with numacoll's message.
 */
#include <stdlib.h>
#include <string.h>

#include "guest_util.h"
#include "numacoll.h"

static g_topo_t gt;
static int expect_misplaced;

typedef struct plan {
    int p;
    const char *layout;
    int cpu[G_MAX_CPUS], numa[G_MAX_CPUS];
} plan_t;

/* Name the page at segment offset `off`, as the check reports it. */
static void page_name(const numacoll_team_info_t *in, size_t off, char *buf, size_t len)
{
    if (off < in->sets_off)
        snprintf(buf, len, "header page %zu", off / in->page);
    else if (off < in->rank_off)
        snprintf(buf, len, "set page %zu", (off - in->sets_off) / in->page);
    else if (off < in->rank_off + (size_t)in->size * in->rank_bytes) {
        size_t r = (off - in->rank_off) / in->rank_bytes;
        size_t o = (off - in->rank_off) % in->rank_bytes;
        if (o < in->ctrl_bytes)
            snprintf(buf, len, "member %zu control page %zu", r, o / in->page);
        else
            snprintf(buf, len, "member %zu buffer %zu page %zu", r,
                     (o - in->ctrl_bytes) / in->buf_stride,
                     (o - in->ctrl_bytes) % in->buf_stride / in->page);
    } else
        snprintf(buf, len, "barrier page %zu", (off - in->barrier_off) / in->page);
}

/* One move_pages() check of [off, off+bytes); 0 when all pages are on `node`. */
static int check_range(const numacoll_team_info_t *in, const void *base, size_t off, size_t bytes,
                       int node, const char *what, g_pages_t *res)
{
    G_CHECK(g_query_pages(base, off, bytes, in->page, node, res) == 0, "move_pages query of %s",
            what);
    if (res->on_node == res->pages)
        return 0;
    char where[96];
    page_name(in, res->first_off, where, sizeof where);
    printf("  rank %d %s: %ld of %ld pages on node %d, %ld elsewhere, %ld not mapped; first: %s "
           "(offset %zu) status %d\n",
           g_rank, what, res->on_node, res->pages, node, res->elsewhere, res->unmapped, where,
           res->first_off, res->first_status);
    return 1;
}

typedef struct own {
    g_pages_t ctrl, buf, hdr;
    size_t first_bad_off;
    int first_bad_node, bad;
} own_t;

/* The member's own blocks (and member 0's header/sets) per move_pages(). */
static void check_own(const numacoll_team_info_t *in, const void *base, int rank, int node,
                      own_t *o)
{
    memset(o, 0, sizeof *o);
    size_t blk = in->rank_off + (size_t)rank * in->rank_bytes;
    g_pages_t *rs[3] = {&o->ctrl, &o->buf, &o->hdr};
    int bad[3] = {0};
    bad[0] = check_range(in, base, blk, in->ctrl_bytes, node, "control blocks", &o->ctrl);
    bad[1] = check_range(in, base, blk + in->ctrl_bytes, in->rank_bytes - in->ctrl_bytes, node,
                         "fragment buffers", &o->buf);
    if (rank == 0)
        bad[2] = check_range(in, base, 0, in->rank_off, node, "header+sets", &o->hdr);
    for (int k = 0; k < 3; k++)
        if (bad[k] && !o->bad++) {
            o->first_bad_off = rs[k]->first_off;
            o->first_bad_node = rs[k]->first_status;
        }
}

static int use_round(numacoll_team_t *t, unsigned char *buf, size_t n, int rank, int p);

static int use_team(numacoll_team_t *t, int rank, int p)
{
    size_t n = 64u << 10;
    unsigned char *buf = malloc(n);
    G_CHECK(buf, "malloc");
    /* GUEST_PLACE_SECONDS=S: keep broadcasting for S seconds (all members agree
     * through a broadcast from rank 0 of whether to go on), to watch placement
     * under long use, e.g. with the kernel's automatic NUMA balancing on. */
    const char *secs = getenv("GUEST_PLACE_SECONDS");
    double until = g_now() + (secs ? atof(secs) : 0);
    for (int round = 0;; round++) {
        int more = g_now() < until;
        int rc = numacoll_bcast(t, &more, sizeof more, 0);
        G_CHECK(rc == 0, "bcast: %s", numacoll_strerror(rc));
        if (round && !more)
            break;
        if (use_round(t, buf, n, rank, p))
            return 1;
    }
    free(buf);
    return 0;
}

static int use_round(numacoll_team_t *t, unsigned char *buf, size_t n, int rank, int p)
{
    for (int root = 0; root < p; root++) {
        memset(buf, rank == root ? 0x5a ^ root : 0, n);
        int rc = numacoll_bcast(t, buf, n, root);
        G_CHECK(rc == 0, "bcast root %d: %s", root, numacoll_strerror(rc));
        for (size_t i = 0; i < n; i++)
            G_CHECK(buf[i] == (0x5a ^ root), "bcast root %d: byte %zu wrong", root, i);
        rc = numacoll_barrier(t);
        G_CHECK(rc == 0, "barrier: %s", numacoll_strerror(rc));
    }
    return 0;
}

static int body(int rank, int p, const char *name, void *arg)
{
    const plan_t *pl = arg;
    const int node = pl->numa[rank];
    G_CHECK(g_pin(pl->cpu[rank]) == 0, "pin to cpu %d", pl->cpu[rank]);
    G_CHECK(numacoll_param_set("NUMACOLL_SEG_LAYOUT", pl->layout) == 0, "layout %s", pl->layout);
    numacoll_bootstrap_t *bs;
    numacoll_team_t *team;
    int rc = numacoll_bootstrap_named(name, rank, p, &bs);
    G_CHECK(rc == 0, "numacoll_bootstrap_named: %s", numacoll_strerror(rc));
    rc = numacoll_team_create(bs, &team);
    G_CHECK(rc == 0, "numacoll_team_create: %s", numacoll_strerror(rc));
    numacoll_team_info_t in;
    G_CHECK(numacoll_team_info(team, &in) == 0, "numacoll_team_info");
    G_CHECK(in.numa_node == node, "cpu %d: numacoll says node %d, /sys says %d", pl->cpu[rank],
            in.numa_node, node);
    void *base = in.seg_base;
    G_CHECK(base, "numacoll_team_info gave no segment base");

    own_t o;
    check_own(&in, base, rank, node, &o);
    if (rank == 0)
        printf("  layout=%s p=%d: segment %zu bytes, member block %zu bytes (control %zu, "
               "buffers %zu); numacoll placement=%d misplaced_pages=%ld%s%s\n",
               pl->layout, p, in.seg_bytes, in.rank_bytes, in.ctrl_bytes,
               in.rank_bytes - in.ctrl_bytes, in.placement, in.misplaced_pages,
               in.placement_detail[0] ? " detail: " : "", in.placement_detail);

    if (!expect_misplaced) {
        G_CHECK(in.placement == NUMACOLL_PLACEMENT_OK && in.misplaced_pages == 0,
                "numacoll placement check: %s, %ld misplaced pages: %s",
                in.placement == NUMACOLL_PLACEMENT_MISPLACED ? "MISPLACED" : "not OK",
                in.misplaced_pages, in.placement_detail);
        if (o.bad) {
            char where[96];
            page_name(&in, o.first_bad_off, where, sizeof where);
            G_CHECK(0, "move_pages: %s is on node %d, expected node %d (numacoll said %s)",
                    where, o.first_bad_node, node,
                    in.placement == NUMACOLL_PLACEMENT_OK ? "OK" : "not OK");
        }
        printf("  rank %d cpu %d node %d: control %ld/%ld, buffers %ld/%ld%s pages on node %d\n",
               rank, pl->cpu[rank], node, o.ctrl.on_node, o.ctrl.pages, o.buf.on_node,
               o.buf.pages, rank == 0 ? ", header+sets" : "", node);
        if (use_team(team, rank, p))
            return 1;
        check_own(&in, base, rank, node, &o);
        G_CHECK(!o.bad, "pages moved after broadcasts and barriers");
    } else {
        /* Negative check: first touch broken on purpose. */
        G_CHECK(in.placement == NUMACOLL_PLACEMENT_MISPLACED,
                "first touch broken but numacoll's placement is %d, not MISPLACED (detail: %s)",
                in.placement, in.placement_detail);
        G_CHECK(in.misplaced_pages > 0, "MISPLACED with 0 misplaced pages");
        G_CHECK(strstr(in.placement_detail, "member ") && strstr(in.placement_detail, "node"),
                "placement_detail does not name a block and a node: \"%s\"", in.placement_detail);
        int node0 = pl->numa[0];
        if (node != node0) {
            G_CHECK(o.bad && o.ctrl.elsewhere + o.buf.elsewhere == o.ctrl.pages + o.buf.pages,
                    "own check: %ld+%ld of %ld+%ld pages elsewhere; expected all on node %d",
                    o.ctrl.elsewhere, o.buf.elsewhere, o.ctrl.pages, o.buf.pages, node0);
            G_CHECK(o.first_bad_node == node0, "misplaced page on node %d, expected node %d",
                    o.first_bad_node, node0);
            char where[96];
            page_name(&in, o.first_bad_off, where, sizeof where);
            printf("  rank %d node %d: own move_pages check found %s on node %d (as expected)\n",
                   rank, node, where, o.first_bad_node);
        }
        if (rank == 0)
            printf("  numacoll detected it: MISPLACED, %ld pages: %s\n", in.misplaced_pages,
                   in.placement_detail);
    }
    numacoll_team_destroy(team);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    expect_misplaced = argc > 1 && !strcmp(argv[1], "--expect-misplaced");
    if (g_topo_read(&gt)) {
        printf("RESULT: FAIL cannot read /sys/devices/system/node\n");
        return 1;
    }
    g_topo_print(&gt);
    const char *bad = getenv("NUMACOLL_TEST_TOUCH_ALL_FROM_RANK0");
    if (expect_misplaced) {
        if (!bad || strcmp(bad, "1")) {
            printf("RESULT: FAIL --expect-misplaced needs NUMACOLL_TEST_TOUCH_ALL_FROM_RANK0=1\n");
            return 1;
        }
        if (gt.nnodes < 2) {
            printf("RESULT: FAIL the negative check needs at least 2 NUMA nodes\n");
            return 1;
        }
        printf("negative check: first touch broken (NUMACOLL_TEST_TOUCH_ALL_FROM_RANK0=1), "
               "expecting MISPLACED\n");
    } else if (bad && *bad == '1') {
        printf("note: NUMACOLL_TEST_TOUCH_ALL_FROM_RANK0=1: first touch is broken, this test "
               "must fail\n");
    }
    int rc = g_preload_numacoll();
    if (rc) {
        printf("RESULT: FAIL a one-member team in the parent: %s\n", numacoll_strerror(rc));
        return 1;
    }
    static plan_t pl;
    int fails = 0, cases = 0;
    /* One member per node (first CPU of the node), both layouts; then two per node. */
    const char *layouts[] = {"compact", "paper"};
    for (int li = 0; li < 2; li++) {
        memset(&pl, 0, sizeof pl);
        pl.p = gt.nnodes;
        pl.layout = layouts[li];
        for (int k = 0; k < gt.nnodes; k++) {
            pl.cpu[k] = gt.cpus[k][0];
            pl.numa[k] = gt.node_id[k];
        }
        cases++;
        fails += g_fork_run(pl.p, 60, body, &pl) != 0;
        if (expect_misplaced)
            break; /* one team shows it */
    }
    if (!expect_misplaced) {
        memset(&pl, 0, sizeof pl);
        pl.p = 2 * gt.nnodes;
        pl.layout = "compact";
        for (int i = 0; i < pl.p; i++) {
            pl.cpu[i] = g_rr_cpu(&gt, i);
            pl.numa[i] = gt.node_id[i % gt.nnodes];
        }
        cases++;
        fails += g_fork_run(pl.p, 60, body, &pl) != 0;
    }
    if (fails) {
        printf("RESULT: FAIL %s\n", g_first_failure());
    } else {
        if (expect_misplaced)
            printf("broken first touch was detected, as it must be\n");
        printf("RESULT: PASS\n");
    }
    return fails != 0;
}
