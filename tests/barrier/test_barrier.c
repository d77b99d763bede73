/*
 * Barrier correctness between real processes, for every algorithm and a few
 * tree shapes: nobody leaves barrier k before every member entered it, and
 * nobody enters barrier k+2 before everyone left barrier k; back-to-back runs;
 * barriers mixed with broadcasts; sequence wrap-around; a member that dies
 * ends the barrier with an error, not a hang; the two-level (NUMA) variant with
 * 2 and 3 fake groups.
 *
 *   test_barrier entry ALG [TREE [NUMA]]   p = 1..8
 *   test_barrier groups ALG TREE           p = 4..8, 2 and 3 groups (blocks, interleaved)
 *   test_barrier back2back P ITERS         default algorithm
 *   test_barrier bcast ALG                 p = 2..5, a broadcast every few barriers
 *   test_barrier wrap ALG                  nc_test_seq0 = UINT32_MAX - 50
 *   test_barrier dead ALG                  p = 4, member 2 (then member 0) SIGKILLs itself
 *   test_barrier params                    bad values are rejected
 */
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll/nc_barrier.h"
#include "core/nc_team.h"
#include "nc_forktest.h"

#define MAXP 8

/* Shared between the forked members, created before fork: entered[i] is the
 * number of the last barrier member i entered (one line each). */
typedef struct shared {
    struct {
        _Atomic uint32_t v;
        char pad[NC_CACHELINE - sizeof(uint32_t)];
    } entered[MAXP];
    _Atomic uint64_t death_ns;
    _Atomic int32_t pid0; /* member 0 of the last run: it names the segment */
} shared_t;
static shared_t *sh;

typedef struct run {
    const char *alg, *tree, *numa; /* NULL: default */
    int iters;
    int bcast_every;               /* 0: no broadcasts */
    int die_rank, die_at;          /* die_rank < 0: nobody dies */
    const char *expect_desc;       /* prefix the barrier description must have, or NULL */
} run_t;

static int set_params(const run_t *r)
{
    if (r->alg && numacoll_param_set("BARRIER_ALG", r->alg))
        return 1;
    if (r->tree && numacoll_param_set("BARRIER_TREE", r->tree))
        return 1;
    if (r->numa && numacoll_param_set("BARRIER_NUMA", r->numa))
        return 1;
    return 0;
}

static int body(int rank, int p, const char *name, void *arg)
{
    const run_t *r = arg;
    if (rank == 0)
        atomic_store_explicit(&sh->pid0, (int32_t)getpid(), memory_order_relaxed);
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(set_params(r) == 0, "parameters");
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    char desc[128];
    nc_barrier_describe(t, desc, sizeof desc);
    if (r->expect_desc && p > 1)
        CHECK(!strncmp(desc, r->expect_desc, strlen(r->expect_desc)),
              "barrier is \"%s\", expected \"%s...\"", desc, r->expect_desc);
    unsigned char buf[5000];
    for (uint32_t k = 1; k <= (uint32_t)r->iters; k++) {
        /* relaxed: the barrier itself must order this store before the
         * others' loads below; that is what is being tested. */
        atomic_store_explicit(&sh->entered[rank].v, k, memory_order_relaxed);
        if (rank == r->die_rank && (int)k == r->die_at) {
            atomic_store_explicit(&sh->death_ns, nc_time_ns(), memory_order_relaxed);
            raise(SIGKILL);
        }
        int rc = numacoll_barrier(t);
        if (r->die_rank >= 0 && (int)k == r->die_at) {
            uint64_t now = nc_time_ns();
            uint64_t dead = atomic_load_explicit(&sh->death_ns, memory_order_relaxed);
            double s = dead && now > dead ? (double)(now - dead) / 1e9 : 0.0;
            CHECK(rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN,
                  "[%s] rank %d: expected PEER_DEAD or BROKEN, got %d", desc, rank, rc);
            CHECK(s < 2.0, "[%s] rank %d took %.2f s to notice the death", desc, rank, s);
            CHECK(numacoll_barrier(t) == NUMACOLL_ERR_BROKEN, "the team must stay broken");
            printf("[%s] p=%d rank %d: %s %.3f s after the death\n", desc, p, rank,
                   numacoll_strerror(rc), s);
            break;
        }
        CHECK(rc == 0, "[%s] p=%d rank %d: barrier %u returned %d", desc, p, rank, k, rc);
        for (int j = 0; j < p; j++) {
            uint32_t e = atomic_load_explicit(&sh->entered[j].v, memory_order_relaxed);
            CHECK(e >= k, "[%s] p=%d: rank %d left barrier %u before rank %d entered it (%u)",
                  desc, p, rank, k, j, e);
            CHECK(e <= k + 1, "[%s] p=%d: rank %d entered barrier %u before rank %d left %u",
                  desc, p, j, e, rank, k);
        }
        if (r->bcast_every && k % (uint32_t)r->bcast_every == 0) {
            size_t n = 1 + (k * 2654435761u) % sizeof buf;
            if (one_bcast(t, buf, n, (int)(k / (uint32_t)r->bcast_every % (uint32_t)p), k, rank))
                return 1;
        }
    }
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* Segments of this test's runs left in /dev/shm (other test programs may be
 * creating theirs at the same time: only names with our members' pids count). */
static int leftovers(int pid0)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "numacoll-%d-", pid0);
    DIR *d = opendir("/dev/shm");
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            fprintf(stderr, "leftover /dev/shm/%s\n", e->d_name);
            found++;
        }
    if (d)
        closedir(d);
    return found;
}

static int run_p(int p, int timeout, run_t *r, int expect_fail)
{
    memset(sh, 0, sizeof *sh);
    uint64_t t0 = nc_time_ns();
    int rc = nc_fork_run(p, timeout, body, r, expect_fail);
    int32_t pid0 = atomic_load_explicit(&sh->pid0, memory_order_relaxed);
    if (pid0 && leftovers(pid0))
        rc = 1;
    double ms = (double)(nc_time_ns() - t0) / 1e6;
    printf("%-14s %-10s numa=%s p=%d iters=%d%s: %s (%.0f ms, %.1f us/barrier)\n",
           r->alg ? r->alg : "(default)", r->tree ? r->tree : "", r->numa ? r->numa : "-", p,
           r->iters, r->bcast_every ? " +bcast" : "", rc ? "FAIL" : "ok", ms,
           ms * 1e3 / (r->iters ? r->iters : 1));
    fflush(stdout);
    return rc;
}

static int iters_for(int p)
{
    return p <= 2 ? 50000 : p <= 4 ? 10000 : 3000;
}

static int mode_entry(const char *alg, const char *tree, const char *numa)
{
    int fails = 0;
    for (int p = 1; p <= MAXP; p++) {
        run_t r = {.alg = alg, .tree = tree, .numa = numa, .iters = iters_for(p), .die_rank = -1,
                   .expect_desc = alg};
        fails += run_p(p, 60, &r, -1);
    }
    return fails;
}

/* Fake NUMA groups: leaders[i] = the lowest rank of i's group. */
static int mode_groups(const char *alg, const char *tree)
{
    static int leaders[MAXP];
    int fails = 0;
    for (int ng = 2; ng <= 3; ng++)
        for (int interleaved = 0; interleaved <= 1; interleaved++)
            for (int p = 4; p <= MAXP; p++) {
                for (int i = 0; i < p; i++) {
                    /* interleaved: group i % ng; blocks: group i * ng / p */
                    int j = 0;
                    while (interleaved ? j % ng != i % ng : j * ng / p != i * ng / p)
                        j++;
                    leaders[i] = j;
                }
                nc_barrier_test_leaders = leaders;
                char want[64];
                snprintf(want, sizeof want, "%s %s groups=%d (two-level)", alg, tree, ng);
                run_t r = {.alg = alg, .tree = tree, .numa = "1", .iters = 1500,
                           .bcast_every = 50, .die_rank = -1, .expect_desc = want};
                printf("groups=%d %s: ", ng, interleaved ? "interleaved" : "blocks");
                fails += run_p(p, 60, &r, -1);
            }
    /* The same fake groups with NUMACOLL_BARRIER_NUMA=0: one tree. */
    for (int i = 0; i < MAXP; i++)
        leaders[i] = i % 2;
    char want[64];
    snprintf(want, sizeof want, "%s %s groups=1", alg, tree);
    run_t r = {.alg = alg, .tree = tree, .numa = "0", .iters = 1500, .die_rank = -1,
               .expect_desc = want};
    fails += run_p(MAXP, 60, &r, -1);
    nc_barrier_test_leaders = NULL;
    return fails;
}

static int mode_bcast(const char *alg)
{
    int fails = 0;
    for (int p = 2; p <= 5; p++) {
        run_t r = {.alg = alg, .iters = 2000, .bcast_every = 3, .die_rank = -1, .expect_desc = alg};
        fails += run_p(p, 60, &r, -1);
    }
    return fails;
}

static int mode_wrap(const char *alg)
{
    /* Crosses UINT32_MAX -> 0 after 51 barriers and the low byte's wrap too. */
    nc_test_seq0 = UINT32_MAX - 50;
    int fails = 0;
    for (int p = 2; p <= MAXP; p++) {
        run_t r = {.alg = alg, .iters = 600, .bcast_every = 40, .die_rank = -1,
                   .expect_desc = alg};
        fails += run_p(p, 60, &r, -1);
    }
    nc_test_seq0 = 0;
    return fails;
}

static int mode_dead(const char *alg)
{
    int fails = 0;
    for (int victim = 2; victim >= 0; victim -= 2) {
        run_t r = {.alg = alg, .iters = 1000, .die_rank = victim, .die_at = 50,
                   .expect_desc = alg};
        fails += run_p(4, 30, &r, victim);
    }
    return fails;
}

static int mode_params(void)
{
    CHECK(numacoll_param_set("BARRIER_ALG", "fastest") == NUMACOLL_ERR_TUNABLE, "alg rejected");
    CHECK(numacoll_param_set("BARRIER_TREE", "kary:0") == NUMACOLL_ERR_TUNABLE, "tree rejected");
    CHECK(numacoll_param_set("BARRIER_NUMA", "2") == NUMACOLL_ERR_TUNABLE, "numa rejected");
    static const char *algs[] = {"rearranged", "padded", "dissemination", "central"};
    for (int i = 0; i < (int)NC_ARRAY_SIZE(algs); i++) {
        nc_param_value_t v = {0};
        char err[256];
        CHECK(nc_param_parse(NC_P_BARRIER_ALG, algs[i], &v, err, sizeof err) == 0, "%s", err);
        CHECK(v.num == i, "choice %s has index %lld, nc_bar_alg_t says %d", algs[i],
              (long long)v.num, i);
    }
    printf("params ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED || argc < 2) {
        fprintf(stderr, "usage: %s entry|groups|back2back|bcast|wrap|dead|params ...\n",
                argv[0]);
        return 2;
    }
    const char *m = argv[1];
    const char *a2 = argc > 2 ? argv[2] : NULL, *a3 = argc > 3 ? argv[3] : NULL;
    int fails;
    if (!strcmp(m, "entry") && a2)
        fails = mode_entry(a2, a3, argc > 4 ? argv[4] : NULL);
    else if (!strcmp(m, "groups") && a2 && a3)
        fails = mode_groups(a2, a3);
    else if (!strcmp(m, "back2back") && a2 && a3) {
        run_t r = {.iters = atoi(a3), .die_rank = -1};
        fails = run_p(atoi(a2), 120, &r, -1);
    } else if (!strcmp(m, "bcast") && a2)
        fails = mode_bcast(a2);
    else if (!strcmp(m, "wrap") && a2)
        fails = mode_wrap(a2);
    else if (!strcmp(m, "dead") && a2)
        fails = mode_dead(a2);
    else if (!strcmp(m, "params"))
        fails = mode_params();
    else {
        fprintf(stderr, "unknown mode or missing arguments: %s\n", m);
        return 2;
    }
    return fails ? 1 : 0;
}
