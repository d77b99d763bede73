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
#include "nc_mpi.h"

void nc_mpi_after_init(void)
{
    static atomic_int done;
    int flag = 0;
    PMPI_Initialized(&flag);
    if (!flag || atomic_exchange(&done, 1))
        return;
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
