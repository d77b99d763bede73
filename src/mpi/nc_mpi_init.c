/*
 * MPI_Init and MPI_Init_thread (nc_mpi_init*, behind the C entry points; the
 * Fortran ones call the MPI's own Fortran initialisation, then
 * nc_mpi_after_init): the MPI library starts, then numacoll's per-process
 * start-up runs once (nc_mpi_after_init):
 *   0. the tunables that must be the same everywhere are agreed (agree());
 *      the exchange is nonblocking, so a rank that does not run numacoll
 *      (LD_PRELOAD given to some ranks only, e.g. one program of an MPMD
 *      launch) never matches it with a collective of its own: the ranks
 *      that do wait, and say after NC_WAIT_FIRST seconds (then every
 *      NC_WAIT_SAY) what they wait for;
 *      a contribution without numacoll's mark stops the job (PMPI_Abort)
 *      with the same explanation instead of computing with garbage. The
 *      same exchange makes a bad tunable, or a NUMACOLL_ name that is no
 *      tunable, said by one rank when it is the same on every rank that has
 *      it (say_problem()).
 *   1. the node-wide shared-memory budget (nc_mpi_budget_init in
 *      nc_mpi_comm.c): one page shared by the job's ranks on each node that
 *      counts the bytes of every numacoll segment of the job on that node.
 * In the wrong MPI (nc_mpi_flavour.h) none of this runs: the entry points
 * hand MPI_Init to the MPI library alone. A program whose MPI_Init does not
 * come through here (e.g. MPI_Session_init) still works: every step has a
 * per-process fallback that needs no start-up.
 */
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common/nc_common.h"
#include "nc_mpi.h"

/* 0. Which way a differing value is settled: the largest or the smallest. */
static const struct {
    int param;
    int take_max;
} agreed[] = {
    {NC_P_DISABLE, 1},
#define NC_MPI_AGREE_(e, name, param) {param, 0},
    NC_MPI_COLL_TABLE(NC_MPI_AGREE_)
#undef NC_MPI_AGREE_
    {NC_P_COMM_MIN_CALLS, 1},
    {NC_P_STATS, 1},
    {NC_P_TEST_VIRTUAL_NODES, 1},
};
#define NAGREED (sizeof agreed / sizeof agreed[0])

#define NC_MARK 0x6e63636f6c6c31LL /* "nccoll1": every rank's last pair in agree() */
#define NC_WAIT_FIRST 10            /* seconds before the first report of a long wait ... */
#define NC_WAIT_SAY 60              /* ... and between the next ones */

static const char nc_mixed_hint[] =
    "every rank of the job must run numacoll: give LD_PRELOAD to every rank (an MPMD launch "
    "with ':' takes it per program: -genv with MPICH's mpiexec, -x in each program's part "
    "with Open MPI's mpirun), or link every program with libnumacoll-mpi";

/* What is wrong with this rank's tunables (nc_config_problem()) is said once
 * for the job when every rank that has a problem has the same one: by the
 * lowest of them (a job of 1000 ranks with a typo in its environment gets one
 * line, not 1000); ranks with different problems each say theirs. */
static void say_problem(uint64_t mine, long long hi, long long lo, int first, int wrank)
{
    if (!mine)
        return;
    if (hi == lo && wrank != first)
        return; /* nc_config_said_elsewhere(mine) stays: quiet for good */
    nc_config_said_elsewhere(0);
    nc_config_t cfg;
    nc_config_snapshot(&cfg); /* says it (once per process) */
}

static void agree(void)
{
    /* quiet until the exchange tells whether another rank says it */
    const uint64_t problem = nc_config_problem();
    nc_config_said_elsewhere(problem);
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    /* one MPI_MAX over (v, -v): the largest and the smallest value at once; then
     * the tunables' problem hash (max, -min over the ranks that have one), the
     * lowest rank that has one (as -rank), and numacoll's mark, the same on
     * every rank that runs numacoll. Static: a request the library failed to
     * complete may still point at them. */
    enum { P = 2 * NAGREED, R = P + 2, M = P + 4, N = P + 6 };
    static long long mine[N], all[N];
    for (size_t i = 0; i < NAGREED; i++) {
        mine[2 * i] = cfg.v[agreed[i].param].num;
        mine[2 * i + 1] = -cfg.v[agreed[i].param].num;
    }
    int wrank = 0, done = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    mine[P] = (long long)problem;
    mine[P + 1] = problem ? -(long long)problem : -LLONG_MAX;
    mine[R] = problem ? -(long long)wrank : -LLONG_MAX;
    mine[R + 1] = 0;
    mine[M] = NC_MARK;
    mine[M + 1] = -NC_MARK;
    MPI_Request req;
    if (PMPI_Iallreduce(mine, all, N, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD, &req) !=
        MPI_SUCCESS) {
        say_problem(problem, 0, 1, 0, wrank);
        return;
    }
    const uint64_t t0 = nc_time_ns();
    uint64_t say = t0 + (uint64_t)NC_WAIT_FIRST * 1000000000u;
    while (PMPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        if (nc_time_ns() >= say) {
            say_problem(problem, 0, 1, 0, wrank); /* nobody else may say it */
            nc_log_error("rank %d has waited %.0f s in MPI_Init for the other ranks' numacoll "
                         "start-up; if some ranks do not run numacoll, the job hangs here: %s",
                         wrank, (double)(nc_time_ns() - t0) * 1e-9, nc_mixed_hint);
            say += (uint64_t)NC_WAIT_SAY * 1000000000u;
        }
        /* the MPI library progresses in PMPI_Test; a wait past a second naps */
        if (nc_time_ns() - t0 < 1000000000u)
            sched_yield();
        else
            nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 1000000}, NULL);
    }
    if (!done) {
        say_problem(problem, 0, 1, 0, wrank);
        return;
    }
    if (all[M] != NC_MARK || all[M + 1] != -NC_MARK) {
        say_problem(problem, 0, 1, 0, wrank);
        nc_log_error("rank %d: numacoll's start-up exchange in MPI_Init met a collective that is "
                     "not numacoll's: %s; stopping the job",
                     wrank, nc_mixed_hint);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    say_problem(problem, all[P], -all[P + 1], (int)-all[R], wrank);
    for (size_t i = 0; i < NAGREED; i++) {
        const long long hi = all[2 * i], lo = -all[2 * i + 1];
        if (hi == lo)
            continue;
        const long long v = agreed[i].take_max ? hi : lo;
        const char *name = nc_param_desc(agreed[i].param)->name;
        if (wrank == 0)
            nc_log_error("NUMACOLL_%s differs between the ranks (from %lld to %lld); it must be "
                         "the same on every rank: every rank uses %lld",
                         name, lo, hi, v);
        char text[24];
        snprintf(text, sizeof text, "%lld", v);
        nc_config_set(name, text, NC_SRC_API);
    }
}

void nc_mpi_after_init(void)
{
    static atomic_int done;
    int flag = 0;
    PMPI_Initialized(&flag);
    if (!flag || atomic_exchange(&done, 1))
        return;
    /* 0. */
    agree();
    /* 1. */
    nc_mpi_budget_init();
}

int nc_mpi_init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        nc_mpi_after_init();
    return rc;
}

int nc_mpi_init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        nc_mpi_after_init();
    return rc;
}
