/*
 * numacoll-setup-bench: what a short-lived communicator costs. One loop
 * iteration is MPI_Comm_dup(MPI_COMM_WORLD) + one 4-byte broadcast on it +
 * MPI_Comm_free, the pattern of programs that make a communicator per phase
 * (ScaLAPACK's BLACS grids). In one run, rounds alternate between
 *   native:   the broadcast through PMPI_Bcast (the MPI library alone);
 *   numacoll: through MPI_Bcast, with the team cache (NUMACOLL_TEAM_CACHE as
 *             set, default 4);
 *   no-cache: the same with NUMACOLL_TEAM_CACHE=0 (every communicator makes
 *             its team: segment, first touch, placement check);
 * and it prints the median per iteration of each (slowest rank) and the
 * ratios to native.
 *
 * Usage: mpirun -n P numacoll-setup-bench [ITERATIONS [ROUNDS]]   (300, 5)
 *        numacoll-setup-bench --help | --version
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_tool_launcher.h"
#include "numacoll_mpi.h"

enum { NATIVE, CACHE, NOCACHE, NKIND };
static const char *names[NKIND] = {"native", "numacoll", "no-cache"};

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double loop(int kind, int n)
{
    int v = 7;
    PMPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        if (kind == NATIVE)
            PMPI_Bcast(&v, 1, MPI_INT, 0, c);
        else
            MPI_Bcast(&v, 1, MPI_INT, 0, c);
        MPI_Comm_free(&c);
    }
    t = (MPI_Wtime() - t) / n;
    PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

int main(int argc, char **argv)
{
    /* --help, --version: said once under a launcher, by its rank 0 */
    const int say = nc_tool_launcher_rank() == 0;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        if (say)
            printf("usage: mpirun -n P numacoll-setup-bench [ITERATIONS >= 1 [ROUNDS 1..100]]\n"
                   "  (default 300 5) MPI_Comm_dup + 4-byte MPI_Bcast + MPI_Comm_free per "
                   "iteration: native, numacoll with its team cache, and without it\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        if (say)
            printf("numacoll-setup-bench %s\n", numacoll_version());
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = argc > 1 ? atoi(argv[1]) : 300, rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 1 || rounds < 1 || rounds > 100) {
        if (rank == 0)
            fprintf(stderr, "usage: numacoll-setup-bench [ITERATIONS >= 1 [ROUNDS 1..100]]\n");
        MPI_Finalize();
        return 2;
    }
    double t[NKIND][100];
    char cache[32] = "4"; /* the user's NUMACOLL_TEAM_CACHE, for the numacoll rounds */
    numacoll_param_get("NUMACOLL_TEAM_CACHE", cache, sizeof cache, NULL);
    numacoll_mpi_stats_t s0, s1;
    numacoll_mpi_stats(&s0);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NKIND; k++) {
            numacoll_param_set("NUMACOLL_TEAM_CACHE", k == NOCACHE ? "0" : cache);
            t[k][r] = loop(k, k == NOCACHE && n > 50 ? 50 : n); /* ms each: fewer */
        }
    numacoll_mpi_stats(&s1);
    if (rank == 0) {
        printf("# numacoll-setup-bench: p=%d, MPI_Comm_dup + 4-byte MPI_Bcast + MPI_Comm_free, "
               "median of %d rounds (slowest rank), %d iterations (no-cache: %d)\n",
               size, rounds, n, n > 50 ? 50 : n);
        double med[NKIND];
        for (int k = 0; k < NKIND; k++) {
            qsort(t[k], (size_t)rounds, sizeof t[k][0], cmp);
            med[k] = t[k][rounds / 2];
        }
        for (int k = 0; k < NKIND; k++)
            printf("%-9s %10.1f us  %8.2fx native\n", names[k], med[k] * 1e6, med[k] / med[NATIVE]);
        printf("# teams made %llu, taken from the team cache %llu (this rank)\n",
               s1.teams_made - s0.teams_made, s1.teams_reused - s0.teams_reused);
    }
    MPI_Finalize();
    return 0;
}
