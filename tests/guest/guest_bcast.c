/*
 * Guest test (c): numacoll_bcast between forked processes spread over the
 * guest's NUMA nodes (one per CPU, pinned round-robin over the nodes), for every tree
 * (NUMACOLL_BCAST_TREE = kary:2, knomial:2, flat, chain; plus a small queue
 * that wraps many times), every root and sizes 0, 1, 4095, 4096, 65537 and
 * 1 MiB. Every byte of every member's buffer is checked, and 64 guard bytes
 * behind it must be untouched.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest_util.h"
#include "numacoll.h"

static g_topo_t gt;

typedef struct cfg {
    const char *tree, *frag, *queue, *sets, *layout;
} cfg_t;

static const cfg_t cfgs[] = {
    {"kary:2", NULL, NULL, NULL, NULL},
    {"knomial:2", NULL, NULL, NULL, NULL},
    {"flat", NULL, NULL, NULL, NULL},
    {"chain", NULL, NULL, NULL, NULL},
    /* 16 KiB in flight: a 1 MiB broadcast wraps the queue 64 times. */
    {"kary:2", "4096", "4", "2", "paper"},
};
static const size_t sizes[] = {0, 1, 4095, 4096, 65537, 1u << 20};
#define NSIZES (sizeof sizes / sizeof *sizes)
#define GUARD 64

typedef struct plan {
    const cfg_t *cfg;
    int p;
    int cpu[G_MAX_CPUS];
} plan_t;

/* The expected bytes of call c are table[(c * 97) % 4096 ...]: a fill is a
 * memcpy and a check a memcmp (a byte loop is slow under TCG). */
#define TABLE_SLACK 4096
static unsigned char *table;

static void table_init(void)
{
    uint32_t x = 0x9e3779b9u;
    for (size_t i = 0; i < (1u << 20) + TABLE_SLACK; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        table[i] = (unsigned char)x;
    }
}

static inline const unsigned char *pat(uint32_t call)
{
    return table + (size_t)call * 97u % TABLE_SLACK;
}

static int set(const char *name, const char *value)
{
    if (!value)
        return 0;
    int rc = numacoll_param_set(name, value);
    G_CHECK(rc == 0, "numacoll_param_set(%s, %s): %s", name, value, numacoll_strerror(rc));
    return 0;
}

static int body(int rank, int p, const char *name, void *arg)
{
    const plan_t *pl = arg;
    const cfg_t *c = pl->cfg;
    G_CHECK(g_pin(pl->cpu[rank]) == 0, "pin to cpu %d", pl->cpu[rank]);
    if (set("NUMACOLL_BCAST_TREE", c->tree) || set("NUMACOLL_BCAST_FRAG_SIZE", c->frag) ||
        set("NUMACOLL_BCAST_QUEUE_LEN", c->queue) || set("NUMACOLL_BCAST_SETS", c->sets) ||
        set("NUMACOLL_SEG_LAYOUT", c->layout))
        return 1;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *team;
    int rc = numacoll_bootstrap_named(name, rank, p, &bs);
    G_CHECK(rc == 0, "numacoll_bootstrap_named: %s", numacoll_strerror(rc));
    rc = numacoll_team_create(bs, &team);
    G_CHECK(rc == 0, "numacoll_team_create: %s", numacoll_strerror(rc));
    numacoll_team_info_t in;
    G_CHECK(numacoll_team_info(team, &in) == 0, "numacoll_team_info");
    G_CHECK(in.placement == NUMACOLL_PLACEMENT_OK, "placement not OK: %s", in.placement_detail);

    unsigned char *buf = malloc((1u << 20) + GUARD);
    G_CHECK(buf, "malloc");
    long bad = 0, calls = 0;
    size_t checked = 0;
    uint32_t call = 0;
    double t0 = g_now();
    for (size_t s = 0; s < NSIZES; s++)
        for (int root = 0; root < p; root++, call++) {
            size_t n = sizes[s];
            /* Non-roots start with the next call's bytes: stale data shows. */
            memcpy(buf, pat(rank == root ? call : call + 1), n);
            memset(buf + n, 0xee, GUARD);
            rc = numacoll_bcast(team, buf, n, root);
            calls++;
            if (rc) {
                if (bad++ < 3)
                    g_fail_msg(__FILE__, __LINE__, "tree %s size %zu root %d: numacoll_bcast: %s",
                               in.tree, n, root, numacoll_strerror(rc));
                continue;
            }
            const unsigned char *want = pat(call);
            size_t i = 0;
            if (memcmp(buf, want, n)) {
                while (buf[i] == want[i])
                    i++;
            } else {
                for (i = n; i < n + GUARD && buf[i] == 0xee; i++)
                    ;
            }
            if (i < n + GUARD && bad++ < 3)
                g_fail_msg(__FILE__, __LINE__,
                           "tree %s size %zu root %d: %s byte %zu is 0x%02x, expected 0x%02x",
                           in.tree, n, root, i < n ? "" : "guard", i, buf[i],
                           i < n ? want[i] : 0xee);
            checked += n;
        }
    double secs = g_now() - t0;
    free(buf);
    if (rank == 0)
        printf("  tree=%-9s f=%zu s=%zu q=%zu layout=%-7s p=%d: %ld broadcasts (%zu sizes x %d "
               "roots), %.1f MB checked per member, %.2f s%s\n",
               in.tree, in.frag_size, in.queue_len, in.sets, in.layout, p, calls, NSIZES, p,
               (double)checked / 1e6, secs, bad ? "" : ": ok");
    rc = numacoll_barrier(team);
    G_CHECK(rc == 0, "final barrier: %s", numacoll_strerror(rc));
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
    table = malloc((1u << 20) + TABLE_SLACK);
    if (!table) {
        printf("RESULT: FAIL malloc\n");
        return 1;
    }
    table_init();
    static plan_t pl;
    /* One member per CPU, spread round-robin over the nodes. */
    pl.p = 0;
    for (int k = 0; k < gt.nnodes; k++)
        pl.p += gt.ncpus[k];
    for (int i = 0; i < pl.p; i++)
        pl.cpu[i] = g_rr_cpu(&gt, i);
    int prc = g_preload_numacoll();
    if (prc) {
        printf("RESULT: FAIL a one-member team in the parent: %s\n", numacoll_strerror(prc));
        return 1;
    }
    int fails = 0;
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        pl.cfg = &cfgs[k];
        if (g_fork_run(pl.p, 120, body, &pl)) {
            printf("  tree %s: FAILED\n", cfgs[k].tree);
            fails++;
        }
    }
    if (fails)
        printf("RESULT: FAIL %s\n", g_first_failure());
    else
        printf("RESULT: PASS\n");
    return fails != 0;
}
