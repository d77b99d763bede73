/*
 * Guest test (a): numacoll's topology against /sys/devices/system/node.
 *
 *  1. nc_topo (hwloc) sees as many NUMA nodes as /sys, and maps every single
 *     CPU, every node's CPU set and a set spanning two nodes to the right node
 *     (or -1).
 *  2. Teams of forked processes pinned round-robin over the nodes (p = N and
 *     2N for N nodes) and in blocks (p = 2N and N+1, uneven blocks): every
 *     member's numa_node, leader,
 *     nleaders, oversubscribed and the whole leaders[] (numacoll_team_leaders)
 *     match what /sys and the pinning say; placement is OK.
 *  3. One member left unbound (all CPUs): its node is unknown (-1), it leads
 *     itself and the team's placement is UNKNOWN.
 *  4. With two or more nodes, the measured NUMA copy ratio (what numacoll-tune
 *     writes as NUMACOLL_NUMA_RATIO): nc_topo_copy_ratio() between the first
 *     two nodes returns 0 and a ratio > 0 (its buffers are checked to be on
 *     the nodes they were bound to; TCG's timing itself means nothing), and
 *     refuses a node with itself.
 */
#include <stdlib.h>
#include <string.h>

#include "guest_util.h"
#include "numacoll.h"
#include "topo/nc_topo.h"

static g_topo_t gt;

enum { PIN_RR, PIN_BLOCK, PIN_UNBOUND0 };
static const char *pin_name[] = {"round-robin", "blocks", "rank 0 unbound"};

typedef struct plan {
    int kind, p;
    int cpu[G_MAX_CPUS];  /* -1: unbound */
    int numa[G_MAX_CPUS]; /* expected, from /sys */
    int leaders[G_MAX_CPUS];
    int nleaders, oversubscribed;
} plan_t;

static void make_plan(plan_t *pl, int kind, int p)
{
    memset(pl, 0, sizeof *pl);
    pl->kind = kind;
    pl->p = p;
    const int n = gt.nnodes;
    int used[G_MAX_CPUS] = {0}, ncpus = 0;
    for (int i = 0; i < p; i++) {
        int k, j;
        if (kind == PIN_BLOCK) {
            k = (int)((long)i * n / p);
            j = i - (int)(((long)k * p + n - 1) / n); /* index inside the block */
        } else {
            k = i % n;
            j = i / n;
        }
        pl->cpu[i] = gt.cpus[k][j % gt.ncpus[k]];
        pl->numa[i] = gt.node_id[k];
        if (kind == PIN_UNBOUND0 && i == 0) {
            pl->cpu[i] = -1;
            pl->numa[i] = n > 1 ? -1 : gt.node_id[0];
        }
    }
    for (int i = 0; i < p; i++) {
        if (pl->cpu[i] < 0) {
            for (int c = 0; c < gt.max_cpu; c++)
                if (gt.cpu_node[c] >= 0 && !used[c]++)
                    ncpus++;
        } else if (!used[pl->cpu[i]]++)
            ncpus++;
        pl->leaders[i] = i;
        if (pl->numa[i] >= 0)
            for (int j = 0; j < i; j++)
                if (pl->numa[j] == pl->numa[i]) {
                    pl->leaders[i] = j;
                    break;
                }
        pl->nleaders += pl->leaders[i] == i;
    }
    pl->oversubscribed = p > ncpus;
}

static void fmt_ints(char *buf, size_t len, const int *v, int n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 12 < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", v[i]);
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
    numacoll_team_info_t info;
    G_CHECK(numacoll_team_info(team, &info) == 0, "numacoll_team_info");
    int leaders[G_MAX_CPUS];
    G_CHECK(numacoll_team_leaders(team, leaders) == 0, "numacoll_team_leaders");

    char want[512], got[512];
    fmt_ints(want, sizeof want, pl->leaders, p);
    fmt_ints(got, sizeof got, leaders, p);
    G_CHECK(info.rank == rank && info.size == p, "info rank/size %d/%d", info.rank, info.size);
    G_CHECK(info.numa_node == pl->numa[rank],
            "pinned to cpu %d, /sys says node %d, numacoll says node %d", pl->cpu[rank],
            pl->numa[rank], info.numa_node);
    G_CHECK(!memcmp(leaders, pl->leaders, (size_t)p * sizeof *leaders),
            "leaders[] = [%s], expected [%s]", got, want);
    G_CHECK(info.leader == pl->leaders[rank], "info.leader %d, expected %d", info.leader,
            pl->leaders[rank]);
    G_CHECK(info.nleaders == pl->nleaders, "nleaders %d, expected %d", info.nleaders,
            pl->nleaders);
    G_CHECK(info.oversubscribed == pl->oversubscribed, "oversubscribed %d, expected %d",
            info.oversubscribed, pl->oversubscribed);
    int want_pl = pl->kind == PIN_UNBOUND0 && gt.nnodes > 1 ? NUMACOLL_PLACEMENT_UNKNOWN
                                                            : NUMACOLL_PLACEMENT_OK;
    static const char *pl_name[] = {"OK", "MISPLACED", "UNKNOWN", "UNCHECKED"};
    G_CHECK(info.placement == want_pl, "placement %s (%s), expected %s",
            info.placement >= 0 && info.placement <= 3 ? pl_name[info.placement] : "?",
            info.placement_detail, pl_name[want_pl]);
    if (rank == 0) {
        int numa[G_MAX_CPUS];
        fmt_ints(got, sizeof got, pl->numa, p);
        memcpy(numa, pl->cpu, sizeof numa);
        fmt_ints(want, sizeof want, numa, p);
        printf("  %-14s p=%-2d cpus=[%s] nodes=[%s] leaders=[", pin_name[pl->kind], p, want, got);
        for (int i = 0; i < p; i++)
            printf("%s%d", i ? "," : "", leaders[i]);
        printf("] nleaders=%d oversubscribed=%d placement=%s%s%s: ok\n", info.nleaders,
               info.oversubscribed, info.placement == NUMACOLL_PLACEMENT_OK ? "OK" : "UNKNOWN",
               info.placement_detail[0] ? " - " : "", info.placement_detail);
    }
    numacoll_team_destroy(team);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* nc_topo against /sys, in this process. */
static int check_nc_topo(void)
{
    nc_topo_t *t;
    G_CHECK(nc_topo_load(&t) == 0, "nc_topo_load failed");
    G_CHECK(nc_topo_numa_count(t) == gt.nnodes, "nc_topo_numa_count %d, /sys has %d nodes",
            nc_topo_numa_count(t), gt.nnodes);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int checked = 0;
    for (int c = 0; c < gt.max_cpu; c++) {
        if (gt.cpu_node[c] < 0)
            continue;
        hwloc_bitmap_only(set, (unsigned)c);
        int got = nc_topo_numa_of_cpuset(t, set);
        G_CHECK(got == gt.cpu_node[c], "cpu %d: nc_topo says node %d, /sys says %d", c, got,
                gt.cpu_node[c]);
        checked++;
    }
    for (int k = 0; k < gt.nnodes; k++) {
        hwloc_bitmap_zero(set);
        for (int j = 0; j < gt.ncpus[k]; j++)
            hwloc_bitmap_set(set, (unsigned)gt.cpus[k][j]);
        int got = nc_topo_numa_of_cpuset(t, set);
        G_CHECK(got == gt.node_id[k], "all CPUs of node %d: nc_topo says node %d",
                gt.node_id[k], got);
    }
    if (gt.nnodes > 1) {
        hwloc_bitmap_only(set, (unsigned)gt.cpus[0][0]);
        hwloc_bitmap_set(set, (unsigned)gt.cpus[1][0]);
        int got = nc_topo_numa_of_cpuset(t, set);
        G_CHECK(got == -1, "cpus %d+%d span two nodes: nc_topo says node %d, expected -1",
                gt.cpus[0][0], gt.cpus[1][0], got);
    }
    hwloc_bitmap_zero(set);
    G_CHECK(nc_topo_numa_of_cpuset(t, set) == -1, "empty set must be -1");
    hwloc_bitmap_free(set);
    if (gt.nnodes > 1) {
        double r = 0;
        int rc = nc_topo_copy_ratio(t, gt.node_id[0], gt.node_id[1], (size_t)4 << 20, 2, &r);
        G_CHECK(rc == 0 && r > 0, "nc_topo_copy_ratio(node %d, node %d): %s, r = %g",
                gt.node_id[0], gt.node_id[1], numacoll_strerror(rc), r);
        G_CHECK(nc_topo_copy_ratio(t, gt.node_id[0], gt.node_id[0], 4096, 1, &r) ==
                    NUMACOLL_ERR_INVAL, "nc_topo_copy_ratio of a node with itself");
        printf("  nc_topo_copy_ratio: node %d's CPUs copying from node %d / from node %d = %.2f "
               "(TCG: not a measurement)\n", gt.node_id[0], gt.node_id[1], gt.node_id[0], r);
    }
    nc_topo_free(t);
    printf("  nc_topo: %d nodes, %d single CPUs, %d whole nodes%s: ok\n", gt.nnodes, checked,
           gt.nnodes, gt.nnodes > 1 ? " and a two-node set" : "");
    return 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (g_topo_read(&gt)) {
        printf("RESULT: FAIL cannot read /sys/devices/system/node\n");
        return 1;
    }
    g_topo_print(&gt);
    if (gt.nnodes < 2)
        printf("note: only one NUMA node; the multi-node checks are trivial\n");
    int fails = 0, cases = 0;
    cases++;
    if (check_nc_topo())
        fails++;
    int rc = g_preload_numacoll();
    if (rc) {
        printf("RESULT: FAIL a one-member team in the parent: %s\n", numacoll_strerror(rc));
        return 1;
    }
    const int n = gt.nnodes;
    /* Round-robin with one and two members per node; blocks of two per node
     * and uneven blocks (N+1 members). */
    const struct { int kind, p; } cs[] = {
        {PIN_RR, n}, {PIN_RR, 2 * n}, {PIN_BLOCK, 2 * n}, {PIN_BLOCK, n + 1}};
    static plan_t pl;
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        make_plan(&pl, cs[c].kind, cs[c].p);
        cases++;
        if (g_fork_run(pl.p, 60, body, &pl)) {
            printf("  %s p=%d: FAILED\n", pin_name[cs[c].kind], pl.p);
            fails++;
        }
    }
    make_plan(&pl, PIN_UNBOUND0, n);
    cases++;
    if (g_fork_run(pl.p, 60, body, &pl)) {
        printf("  %s p=%d: FAILED\n", pin_name[PIN_UNBOUND0], pl.p);
        fails++;
    }
    if (fails)
        printf("RESULT: FAIL %d of %d topology cases; first: %s\n", fails, cases,
               g_first_failure());
    else
        printf("RESULT: PASS\n");
    return fails != 0;
}
