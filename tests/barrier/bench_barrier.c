/*
 * Micro-benchmark of the barrier algorithms between forked members (not a
 * test). Every configuration runs once per round, rounds interleave the
 * configurations (so a burst of load from elsewhere hits all of them), and the
 * median over the rounds is reported with its ratio to central from the same
 * rounds.
 *
 *   bench_barrier [rounds [iters_p2 [iters_p4 [p...]]]]     defaults: 7 40000 4000 2 4
 *
 * Members are left unbound; NC_BENCH_PIN=1 binds member i to CPU i mod (CPUs
 * we may use), as an MPI launcher would (on a shared, loaded machine pinned
 * runs suffer most from the other load: measured 10x slower).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "coll/nc_barrier.h"
#include "core/nc_team.h"
#include "nc_forktest.h"

typedef struct cfg {
    const char *alg, *tree;
} cfg_t;

static const cfg_t cfgs[] = {
    {"central", NULL},           {"dissemination", NULL},      {"rearranged", "kary:8"},
    {"padded", "kary:8"},        {"rearranged", "kary:2"},     {"padded", "kary:2"},
    {"rearranged", "knomial:2"}, {"rearranged", "chain"},
};
#define NCFG ((int)NC_ARRAY_SIZE(cfgs))

typedef struct job {
    const cfg_t *c;
    int iters;
} job_t;

static _Atomic uint64_t *result_ns; /* shared: rank 0's elapsed time */

static int body(int rank, int p, const char *name, void *arg)
{
    const job_t *j = arg;
    const char *pin = getenv("NC_BENCH_PIN");
    cpu_set_t mine, one;
    if (pin && *pin == '1' && !sched_getaffinity(0, sizeof mine, &mine)) {
        int n = CPU_COUNT(&mine), want = rank % n, cpu = 0;
        for (int seen = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &mine) && seen++ == want)
                break;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "bind to CPU %d", cpu);
    }
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_param_set("BARRIER_ALG", j->c->alg) == 0, "alg");
    if (j->c->tree)
        CHECK(numacoll_param_set("BARRIER_TREE", j->c->tree) == 0, "tree");
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    for (int i = 0; i < j->iters / 10 + 100; i++)
        CHECK(numacoll_barrier(t) == 0, "warm-up");
    uint64_t t0 = nc_time_ns();
    for (int i = 0; i < j->iters; i++)
        CHECK(numacoll_barrier(t) == 0, "barrier");
    uint64_t t1 = nc_time_ns();
    if (rank == 0)
        atomic_store_explicit(result_ns, t1 - t0, memory_order_relaxed);
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    int it2 = argc > 2 ? atoi(argv[2]) : 40000, it4 = argc > 3 ? atoi(argv[3]) : 4000;
    int ps[8] = {2, 4}, nps = 2;
    if (argc > 4)
        for (nps = 0; nps < 8 && 4 + nps < argc; nps++)
            ps[nps] = atoi(argv[4 + nps]);
    if (rounds < 1 || rounds > 99 || it2 < 1 || it4 < 1)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    result_ns = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (result_ns == MAP_FAILED)
        return 2;
    static double ns[8][NCFG][99];
    for (int r = 0; r < rounds; r++)
        for (int pi = 0; pi < nps; pi++)
            for (int ci = 0; ci < NCFG; ci++) {
                int c = (ci + r) % NCFG; /* rotate the order from round to round */
                job_t j = {&cfgs[c], ps[pi] <= 2 ? it2 : it4};
                atomic_store(result_ns, 0);
                if (nc_fork_run(ps[pi], 120, body, &j, -1)) {
                    fprintf(stderr, "run failed: %s p=%d round %d\n", cfgs[c].alg, ps[pi], r);
                    return 1;
                }
                ns[pi][c][r] = (double)atomic_load(result_ns) / j.iters;
            }
    printf("barrier ns per call, median of %d rounds (min..max); ratio = median / central's "
           "median, same rounds\n", rounds);
    for (int pi = 0; pi < nps; pi++) {
        printf("p=%d (%d barriers per run)\n", ps[pi], ps[pi] <= 2 ? it2 : it4);
        double central = 0;
        for (int c = 0; c < NCFG; c++) {
            double *v = ns[pi][c];
            qsort(v, (size_t)rounds, sizeof *v, cmp_double);
            double med = rounds % 2 ? v[rounds / 2] : (v[rounds / 2 - 1] + v[rounds / 2]) / 2;
            if (c == 0)
                central = med;
            char label[64];
            snprintf(label, sizeof label, "%s%s%s", cfgs[c].alg, cfgs[c].tree ? " " : "",
                     cfgs[c].tree ? cfgs[c].tree : "");
            printf("  %-26s %9.0f ns  (%7.0f .. %7.0f)  ratio %.2f\n", label, med, v[0],
                   v[rounds - 1], med / central);
        }
    }
    return 0;
}
