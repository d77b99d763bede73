/*
 * MPI_Barrier (nc_mpi_barrier, behind the C and Fortran entry points):
 * intra-node arrival on the node's team, the leaders' barrier through the MPI
 * library, intra-node release.
 *   1. team barrier (every member of the node has arrived);
 *   2. leaders only: PMPI_Barrier on the leaders' communicator;
 *   3. team barrier again: members leave only after their leader left step 2,
 *      i.e. after every rank of every node arrived.
 * On a single node step 1 is the whole barrier.
 * After the last step, with MPICH (and its derivatives), the rank polls the
 * MPI library once (nc_mpi_progress), as MPICH's own barrier polls until it
 * leaves: what another rank handed to the MPI library before it entered the
 * barrier (MPICH sends the end of an RMA access epoch, MPI_Win_complete, that
 * way) is then taken in, so MPI_Win_test right after the barrier is true, as
 * natively (mpi4py's testStartCompletePostTest). Measured at p = 2: the
 * barrier 49 -> 86 ns, MPICH's own 500 ns. Not with Open MPI: its MPI_Win_test
 * is true there without it (mpi.rma, mpi4py's RMA tests), and the poll would
 * cost more than the barrier (49 -> 130 ns, Open MPI's own 180 ns).
 */
#include "nc_mpi.h"

int nc_mpi_barrier(nc_mpi_word_t comm_w)
{
    MPI_Comm comm = NC_MPI_HANDLE(MPI_Comm, comm_w);
    nc_mpi_comm_t *c = nc_mpi_comm_get(comm, NC_MPI_BARRIER);
    if (!c) {
        nc_mpi_count(NC_MPI_BARRIER, 0, 0);
        return PMPI_Barrier(comm);
    }
    nc_mpi_count_nc(c, NC_MPI_BARRIER, 0);
    int rc = c->team ? numacoll_barrier(c->team) : 0;
    if (!rc && c->nnodes > 1) {
        if (c->leaders != MPI_COMM_NULL) {
            nc_leader_barrier(c);
            nc_mpi_count_leader(NC_MPI_BARRIER, 1);
        }
        if (c->team)
            rc = numacoll_barrier(c->team);
    }
#if !defined(OPEN_MPI)
    nc_mpi_progress();
#endif
    return rc ? nc_mpi_error(comm, rc, "MPI_Barrier") : MPI_SUCCESS;
}
