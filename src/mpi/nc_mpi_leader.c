/*
 * The calls numacoll makes to the MPI library across nodes: the node leaders'
 * collectives on c->leaders, and the sends between a node's leader and a root
 * that is not the leader (on c->node).
 *
 * Each is the MPI library's blocking call, or, when c->leader_poll, its
 * nonblocking form completed by leader_wait(): PMPI_Test, then the CPU is
 * given away (sched_yield; past 200 ms a 100 us nap, as the core's waits do,
 * sync/nc_wait.h). An MPI library may spin inside a blocking call (MPICH 4.0
 * does, whatever its yield settings): on a node with more ranks than CPUs a
 * spinning leader then holds a CPU for a whole time slice while the rank it
 * waits for, or the node's members numacoll waits for, cannot run.
 * Measured: the hierarchical reductions test at 8 ranks in 3 virtual nodes
 * on 2 CPUs (test_mpi_reduce quick) took 55.1 s with MPICH's blocking calls,
 * 16.4 s polling (docs/multinode.md).
 *
 * Blocking and nonblocking collectives do not match each other, so
 * c->leader_poll is the same on every rank of the communicator (agreed in
 * step 5 of its set-up, nc_mpi_comm.c: on if any rank asks for it by
 * NUMACOLL_LEADER_WAIT, or, with auto, sees its node oversubscribed).
 * The point-to-point calls match either way; they follow the same setting.
 */
#include <sched.h>
#include <time.h>

#include "common/nc_common.h"
#include "nc_mpi.h"

#define SPIN_NS 20000u          /* tests back to back first (a peer on another CPU answers) */
#define NAP_AFTER_NS 200000000u /* a wait this long naps instead of yielding */
#define NAP_NS 100000

/* Complete *req, giving the CPU away between tests. Returns the MPI error
 * code of the test (MPI_SUCCESS when the call completed). */
static int leader_wait(MPI_Request *req, int rc)
{
    if (rc != MPI_SUCCESS)
        return rc;
    int done = 0;
    uint64_t t0 = 0;
    while ((rc = PMPI_Test(req, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done) {
        /* the MPI library progresses in PMPI_Test */
        const uint64_t now = nc_time_ns();
        if (!t0)
            t0 = now;
        if (now - t0 < SPIN_NS)
            continue;
        if (now - t0 < NAP_AFTER_NS)
            sched_yield();
        else
            nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = NAP_NS}, NULL);
    }
    return rc;
}

int nc_leader_bcast(const nc_mpi_comm_t *c, void *buf, int n, MPI_Datatype t, int root)
{
    if (!c->leader_poll)
        return PMPI_Bcast(buf, n, t, root, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Ibcast(buf, n, t, root, c->leaders, &r));
}

int nc_leader_barrier(const nc_mpi_comm_t *c)
{
    if (!c->leader_poll)
        return PMPI_Barrier(c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Ibarrier(c->leaders, &r));
}

int nc_leader_allreduce(const nc_mpi_comm_t *c, const void *sb, void *rb, int n, MPI_Datatype t,
                        MPI_Op op)
{
    if (!c->leader_poll)
        return PMPI_Allreduce(sb, rb, n, t, op, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Iallreduce(sb, rb, n, t, op, c->leaders, &r));
}

int nc_leader_reduce(const nc_mpi_comm_t *c, const void *sb, void *rb, int n, MPI_Datatype t,
                     MPI_Op op, int root)
{
    if (!c->leader_poll)
        return PMPI_Reduce(sb, rb, n, t, op, root, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Ireduce(sb, rb, n, t, op, root, c->leaders, &r));
}

int nc_leader_gather(const nc_mpi_comm_t *c, const void *sb, int sn, MPI_Datatype st, void *rb,
                     int rn, MPI_Datatype rt, int root)
{
    if (!c->leader_poll)
        return PMPI_Gather(sb, sn, st, rb, rn, rt, root, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Igather(sb, sn, st, rb, rn, rt, root, c->leaders, &r));
}

int nc_leader_gatherv(const nc_mpi_comm_t *c, const void *sb, int sn, MPI_Datatype st, void *rb,
                      const int *rn, const int *rd, MPI_Datatype rt, int root)
{
    if (!c->leader_poll)
        return PMPI_Gatherv(sb, sn, st, rb, rn, rd, rt, root, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Igatherv(sb, sn, st, rb, rn, rd, rt, root, c->leaders, &r));
}

int nc_leader_scatterv(const nc_mpi_comm_t *c, const void *sb, const int *sn, const int *sd,
                       MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root)
{
    if (!c->leader_poll)
        return PMPI_Scatterv(sb, sn, sd, st, rb, rn, rt, root, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Iscatterv(sb, sn, sd, st, rb, rn, rt, root, c->leaders, &r));
}

int nc_leader_allgatherv(const nc_mpi_comm_t *c, const void *sb, int sn, MPI_Datatype st,
                         void *rb, const int *rn, const int *rd, MPI_Datatype rt)
{
    if (!c->leader_poll)
        return PMPI_Allgatherv(sb, sn, st, rb, rn, rd, rt, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Iallgatherv(sb, sn, st, rb, rn, rd, rt, c->leaders, &r));
}

int nc_leader_alltoallv(const nc_mpi_comm_t *c, const void *sb, const int *sn, const int *sd,
                        MPI_Datatype st, void *rb, const int *rn, const int *rd, MPI_Datatype rt)
{
    if (!c->leader_poll)
        return PMPI_Alltoallv(sb, sn, sd, st, rb, rn, rd, rt, c->leaders);
    MPI_Request r;
    return leader_wait(&r, PMPI_Ialltoallv(sb, sn, sd, st, rb, rn, rd, rt, c->leaders, &r));
}

int nc_node_send(const nc_mpi_comm_t *c, const void *buf, int n, MPI_Datatype t, int dest)
{
    if (!c->leader_poll)
        return PMPI_Send(buf, n, t, dest, 0, c->node);
    MPI_Request r;
    return leader_wait(&r, PMPI_Isend(buf, n, t, dest, 0, c->node, &r));
}

int nc_node_recv(const nc_mpi_comm_t *c, void *buf, int n, MPI_Datatype t, int src)
{
    if (!c->leader_poll)
        return PMPI_Recv(buf, n, t, src, 0, c->node, MPI_STATUS_IGNORE);
    MPI_Request r;
    return leader_wait(&r, PMPI_Irecv(buf, n, t, src, 0, c->node, &r));
}
