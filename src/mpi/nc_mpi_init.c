/*
 * MPI_Init and MPI_Init_thread (nc_mpi_init*, behind the C entry points; the
 * Fortran ones call the MPI's own Fortran initialisation, then
 * nc_mpi_after_init): the MPI library starts, then numacoll's per-process
 * start-up runs once (nc_mpi_after_init):
 *   1. the node-wide shared-memory budget (nc_mpi_budget_init in
 *      nc_mpi_comm.c): one page shared by the job's ranks on each node that
 *      counts the bytes of every numacoll segment of the job on that node.
 * In the wrong MPI (nc_mpi_flavour.h) none of this runs: the entry points
 * hand MPI_Init to the MPI library alone. A program whose MPI_Init does not
 * come through here (e.g. MPI_Session_init) still works: every step has a
 * per-process fallback that needs no start-up.
 */
#include <stdio.h>

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

static void agree(void)
{
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    /* one MPI_MAX over (v, -v): the largest and the smallest value at once */
    long long mine[2 * NAGREED], all[2 * NAGREED];
    for (size_t i = 0; i < NAGREED; i++) {
        mine[2 * i] = cfg.v[agreed[i].param].num;
        mine[2 * i + 1] = -cfg.v[agreed[i].param].num;
    }
    if (PMPI_Allreduce(mine, all, (int)(2 * NAGREED), MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        return;
    int wrank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
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
