/*
 * The MPI layer: the only part of numacoll that includes <mpi.h>.
 *
 * The exported entry points are thin: MPI_<Coll> (nc_mpi_entry.c) and its
 * Fortran names (nc_mpi_fortran.c) call numacoll's implementation,
 * nc_mpi_<coll>() in its own file (nc_mpi_<coll>.c), which takes handles as
 * machine words (nc_mpi_entry.h) and follows one pattern:
 *
 *   MPI_Comm comm = NC_MPI_HANDLE(MPI_Comm, comm_w);
 *   nc_mpi_comm_t *c = nc_mpi_comm_get(comm, NC_MPI_<COLL>);
 *   if (!c)                                  // not numacoll's: hand it over
 *       return nc_mpi_count(NC_MPI_<COLL>, 0, bytes), PMPI_<Coll>(...);
 *   nc_mpi_count_nc(c, NC_MPI_<COLL>, bytes);
 *   ... intra-node steps on c->team, inter-node steps with PMPI on c->leaders
 *
 * Adding a collective = one row in NC_MPI_COLL_TABLE + one file + one row in
 * NC_MPI_ENTRY_TABLE (nc_mpi_entry.c) + one row in NC_MPI_F_TABLE
 * (nc_mpi_fortran.c); its core side is one row in coll/nc_coll.h and one
 * file in src/coll.
 */
#ifndef NC_MPI_H
#define NC_MPI_H

#include <mpi.h>
#include <stdatomic.h>

#include "numacoll_mpi.h"
#include "config/nc_config.h"
#include "nc_mpi_entry.h"
#include "nc_mpi_flavour.h"

/* A handle of this MPI from a machine word of nc_mpi_entry.h, and back (an
 * MPICH handle is the word's low 32 bits). */
#define NC_MPI_HANDLE(type, word) ((type)(word))
#define NC_MPI_WORD(handle) ((nc_mpi_word_t)(handle))

/* X(ENUM, name, enable tunable index) */
#define NC_MPI_COLL_TABLE(X)                     \
    X(BCAST, "bcast", NC_P_BCAST_ENABLE)         \
    X(BARRIER, "barrier", NC_P_BARRIER_ENABLE)   \
    X(REDUCE, "reduce", NC_P_REDUCE_ENABLE)      \
    X(ALLREDUCE, "allreduce", NC_P_ALLREDUCE_ENABLE)    \
    X(GATHER, "gather", NC_P_GATHER_ENABLE)             \
    X(GATHERV, "gatherv", NC_P_GATHERV_ENABLE)          \
    X(SCATTER, "scatter", NC_P_SCATTER_ENABLE)          \
    X(SCATTERV, "scatterv", NC_P_SCATTERV_ENABLE)       \
    X(ALLGATHER, "allgather", NC_P_ALLGATHER_ENABLE)    \
    X(ALLGATHERV, "allgatherv", NC_P_ALLGATHERV_ENABLE) \
    X(ALLTOALL, "alltoall", NC_P_ALLTOALL_ENABLE)       \
    X(ALLTOALLV, "alltoallv", NC_P_ALLTOALLV_ENABLE)

/* X(ENUM, name): the collectives numacoll wraps only to count them in
 * NUMACOLL_STATS; each goes to the MPI library untouched. */
#define NC_MPI_PMPI_TABLE(X) X(ALLTOALLW, "alltoallw")

enum {
#define NC_MPI_COLL_ENUM_(e, name, param) NC_MPI_##e = NUMACOLL_MPI_##e,
    NC_MPI_COLL_TABLE(NC_MPI_COLL_ENUM_)
#undef NC_MPI_COLL_ENUM_
#define NC_MPI_PMPI_ENUM_(e, name) NC_MPI_##e = NUMACOLL_MPI_##e,
    NC_MPI_PMPI_TABLE(NC_MPI_PMPI_ENUM_)
#undef NC_MPI_PMPI_ENUM_
    NC_MPI_NCOLL = NUMACOLL_MPI_NCOLL
};

typedef enum { NC_COMM_PENDING = 0, NC_COMM_ACTIVE, NC_COMM_PMPI } nc_comm_state_t;

typedef struct nc_mpi_comm {
    nc_comm_state_t state;
    unsigned calls;         /* collective calls seen while pending */
    MPI_Comm comm;          /* the user's communicator (not owned) */
    int rank, size;
    MPI_Comm node;          /* ranks of my (virtual) node, owned */
    MPI_Comm leaders;       /* local rank 0 of every node; MPI_COMM_NULL elsewhere and
                               when one node holds the whole communicator */
    int nnodes;
    int leader_poll;        /* the calls of nc_mpi_leader.c wait by PMPI_Test with back-off
                               (the same on every rank: step 5 of the set-up) */
    int *node_of;           /* node_of[r]: node index (= rank in leaders) of comm rank r */
    int *lrank_of;          /* lrank_of[r]: rank of r within its node */
    numacoll_team_t *team;  /* the node's team; NULL when the node has one rank */
    int enabled[NC_MPI_NCOLL];
    /* numacoll's calls on this communicator and their bytes (NUMACOLL_STATS):
     * one writer, as MPI orders a communicator's collective calls, so a count
     * is a load and a store, not a locked read-modify-write (measured: two of
     * those were 8-10 ns of a 17 ns zero-byte MPI_Allgather); added to the
     * totals when the state is freed */
    _Atomic unsigned long long ncalls[NC_MPI_NCOLL], nbytes[NC_MPI_NCOLL];
    _Atomic unsigned long long ncma[NC_MPI_NCOLL]; /* of ncalls, those that used CMA */
    struct nc_mpi_comm *next, *prev; /* every live state, freed at MPI_Finalize */
} nc_mpi_comm_t;

/* The numacoll state of comm for collective `coll`, setting it up on first
 * use; NULL when this call goes to PMPI. Identical answer on every rank. */
nc_mpi_comm_t *nc_mpi_comm_get(MPI_Comm comm, int coll);

void nc_mpi_count(int coll, int numacoll, size_t bytes);
/* Which transport a call of numacoll's took: the mark before its core calls,
 * then nc_mpi_count_cma() after them counts it as a CMA call when the team
 * moved data by CMA in between. */
unsigned long long nc_mpi_cma_mark(const nc_mpi_comm_t *c);
void nc_mpi_count_cma(nc_mpi_comm_t *c, int coll, unsigned long long mark);
/* The bytes an MPI_Alltoallw sends (nc_mpi_gather.c): type(types, k) is the
 * datatype of block k, from the C or the Fortran array. */
size_t nc_mpi_alltoallw_bytes(const void *sendbuf, const int *counts,
                              MPI_Datatype (*type)(const void *types, int k), const void *types,
                              MPI_Comm comm);
/* A call numacoll takes on c (NULL: a communicator without a state, one rank). */
void nc_mpi_count_nc(nc_mpi_comm_t *c, int coll, size_t bytes);

/* One poll of the MPI library's progress engine (an MPI_Iprobe on
 * MPI_COMM_WORLD); also the waits' progress hook (sync/nc_wait.h). */
void nc_mpi_progress(void);
/* A leader's part of one call across nodes: its collective PMPI calls on
 * c->leaders (NUMACOLL_STATS' "leaders N calls M pmpi"). */
void nc_mpi_count_leader(int coll, unsigned pmpi_calls);

/* 1 when comm is an intracommunicator of one rank and collective `coll` is
 * numacoll's by the tunables (a call that needs no team: a local copy). */
int nc_mpi_solo(MPI_Comm comm, int coll);

/* At MPI_Init: the job's ranks on each node share one shared-memory budget
 * counter (nc_shm.h); without it each process counts its own segments. */
void nc_mpi_budget_init(void);

/* The leaders' collectives on c->leaders and the sends between a leader and
 * a root on c->node (nc_mpi_leader.c): the blocking PMPI call, or when
 * c->leader_poll its nonblocking form, tested with back-off. Each returns
 * the MPI library's error code. */
int nc_leader_bcast(const nc_mpi_comm_t *c, void *buf, int n, MPI_Datatype t, int root);
int nc_leader_barrier(const nc_mpi_comm_t *c);
int nc_leader_allreduce(const nc_mpi_comm_t *c, const void *sb, void *rb, int n, MPI_Datatype t,
                        MPI_Op op);
int nc_leader_reduce(const nc_mpi_comm_t *c, const void *sb, void *rb, int n, MPI_Datatype t,
                     MPI_Op op, int root);
int nc_leader_gather(const nc_mpi_comm_t *c, const void *sb, int sn, MPI_Datatype st, void *rb,
                     int rn, MPI_Datatype rt, int root);
int nc_leader_gatherv(const nc_mpi_comm_t *c, const void *sb, int sn, MPI_Datatype st, void *rb,
                      const int *rn, const int *rd, MPI_Datatype rt, int root);
int nc_leader_scatterv(const nc_mpi_comm_t *c, const void *sb, const int *sn, const int *sd,
                       MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root);
int nc_leader_allgatherv(const nc_mpi_comm_t *c, const void *sb, int sn, MPI_Datatype st,
                         void *rb, const int *rn, const int *rd, MPI_Datatype rt);
int nc_leader_alltoallv(const nc_mpi_comm_t *c, const void *sb, const int *sn, const int *sd,
                        MPI_Datatype st, void *rb, const int *rn, const int *rd, MPI_Datatype rt);
int nc_node_send(const nc_mpi_comm_t *c, const void *buf, int n, MPI_Datatype t, int dest);
int nc_node_recv(const nc_mpi_comm_t *c, void *buf, int n, MPI_Datatype t, int src);

/* Map a numacoll error to an MPI error class, calling comm's error handler. */
int nc_mpi_error(MPI_Comm comm, int nc_err, const char *what);

#endif
