/*
 * Guest test (d): numacoll_barrier between forked processes spread over the
 * guest's NUMA nodes (one per CPU, pinned round-robin over the nodes), for every barrier
 * algorithm and both the NUMA-aware two-level form (NUMACOLL_BARRIER_NUMA=1:
 * each node gathers to its leader, then the leaders) and the flat one.
 *
 * Round k: every member increments arrived[k], waits in the barrier, then must
 * see arrived[k] == p (nobody left early) and arrived[k+2] == 0 (nobody ran
 * two rounds ahead, which needs this member through the next barrier). Some
 * members are slowed down in some rounds so the others really wait.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_util.h"
#include "numacoll.h"

#define ROUNDS 30

static g_topo_t gt;
static _Atomic int *arrived; /* shared with the members: ROUNDS + 2 counters */

typedef struct cfg {
    const char *alg, *numa;
} cfg_t;
static const cfg_t cfgs[] = {
    {"rearranged", "1"}, {"rearranged", "0"}, {"padded", "1"},
    {"padded", "0"},     {"dissemination", "0"}, {"central", "0"},
};

typedef struct plan {
    const cfg_t *cfg;
    int p;
    int cpu[G_MAX_CPUS];
} plan_t;

static int body(int rank, int p, const char *name, void *arg)
{
    const plan_t *pl = arg;
    G_CHECK(g_pin(pl->cpu[rank]) == 0, "pin to cpu %d", pl->cpu[rank]);
    int rc = numacoll_param_set("NUMACOLL_BARRIER_ALG", pl->cfg->alg);
    G_CHECK(rc == 0, "NUMACOLL_BARRIER_ALG=%s: %s", pl->cfg->alg, numacoll_strerror(rc));
    rc = numacoll_param_set("NUMACOLL_BARRIER_NUMA", pl->cfg->numa);
    G_CHECK(rc == 0, "NUMACOLL_BARRIER_NUMA=%s: %s", pl->cfg->numa, numacoll_strerror(rc));
    numacoll_bootstrap_t *bs;
    numacoll_team_t *team;
    rc = numacoll_bootstrap_named(name, rank, p, &bs);
    G_CHECK(rc == 0, "numacoll_bootstrap_named: %s", numacoll_strerror(rc));
    rc = numacoll_team_create(bs, &team);
    G_CHECK(rc == 0, "numacoll_team_create: %s", numacoll_strerror(rc));
    numacoll_team_info_t in;
    G_CHECK(numacoll_team_info(team, &in) == 0, "numacoll_team_info");

    double t0 = g_now();
    for (int k = 0; k < ROUNDS; k++) {
        if ((k + rank) % 7 == 0)
            usleep(2000); /* a late member */
        atomic_fetch_add(&arrived[k], 1);
        rc = numacoll_barrier(team);
        G_CHECK(rc == 0, "%s numa=%s round %d: numacoll_barrier: %s", pl->cfg->alg,
                pl->cfg->numa, k, numacoll_strerror(rc));
        int a = atomic_load(&arrived[k]), ahead = atomic_load(&arrived[k + 2]);
        G_CHECK(a == p, "%s numa=%s round %d: left the barrier when only %d of %d had arrived",
                pl->cfg->alg, pl->cfg->numa, k, a, p);
        /* Round k+2 needs everyone (me included) through barrier k+1. */
        G_CHECK(ahead == 0, "%s numa=%s round %d: %d members already in round %d",
                pl->cfg->alg, pl->cfg->numa, k, ahead, k + 2);
    }
    double secs = g_now() - t0;
    if (rank == 0)
        printf("  barrier alg=%-13s numa=%s p=%d nleaders=%d: %d rounds in %.2f s (%.0f us "
               "each): ok\n",
               pl->cfg->alg, pl->cfg->numa, p, in.nleaders, ROUNDS, secs, secs / ROUNDS * 1e6);
    numacoll_team_destroy(team);
    numacoll_bootstrap_named_free(bs);
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
    void *m = mmap(NULL, (ROUNDS + 2) * sizeof *arrived, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        printf("RESULT: FAIL mmap\n");
        return 1;
    }
    arrived = m;
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
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        for (int k = 0; k < ROUNDS + 2; k++)
            atomic_store(&arrived[k], 0);
        pl.cfg = &cfgs[c];
        if (g_fork_run(pl.p, 60, body, &pl)) {
            printf("  barrier alg=%s numa=%s: FAILED\n", cfgs[c].alg, cfgs[c].numa);
            fails++;
        }
    }
    if (fails)
        printf("RESULT: FAIL %s\n", g_first_failure());
    else
        printf("RESULT: PASS\n");
    return fails != 0;
}
