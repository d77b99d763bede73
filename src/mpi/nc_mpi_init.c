/*
 * MPI_Init and MPI_Init_thread: the MPI library starts, then numacoll's
 * per-process start-up runs once (nc_mpi_after_init):
 *   1. the node-wide shared-memory budget (nc_mpi_budget_init in
 *      nc_mpi_comm.c): one page shared by the job's ranks on each node that
 *      counts the bytes of every numacoll segment of the job on that node.
 * A program whose MPI_Init does not come through here (e.g. a language
 * binding that calls PMPI_Init itself) still works: every step has a
 * per-process fallback that needs no start-up.
 */
#include "nc_mpi.h"

static void nc_mpi_after_init(void)
{
    int flag = 0;
    PMPI_Initialized(&flag);
    if (!flag)
        return;
    /* 1. */
    nc_mpi_budget_init();
}

NUMACOLL_API int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        nc_mpi_after_init();
    return rc;
}

NUMACOLL_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        nc_mpi_after_init();
    return rc;
}
