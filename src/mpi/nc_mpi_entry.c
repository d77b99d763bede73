/*
 * The exported C entry points: MPI_Init, MPI_Bcast, ... Each one either hands
 * its call to the MPI library untouched (this library was built for another
 * MPI than the one running: nc_mpi_flavour.h) or calls numacoll's
 * implementation (nc_mpi_<call> in nc_mpi_<call>.c or nc_mpi_init.c).
 *
 * This file does not include <mpi.h>, on purpose: the same binary receives
 * handles of either MPI, so every handle parameter here is a machine word
 * (nc_mpi_word_t), passed on as it came, all its bits. Declared with the
 * MPI's own handle types, an MPICH build would narrow the pointers of an
 * Open MPI program to 32 bits before it could pass them on. The PMPI_*
 * functions are declared below with words in the same places, which is how
 * either MPI receives them (a handle is one register or one stack slot).
 *
 * Adding a call: one row here, its implementation taking words for handles
 * (declared in nc_mpi_entry.h), and its Fortran row (nc_mpi_fortran.c).
 */
#include "numacoll.h"
#include "nc_mpi_entry.h"
#include "nc_mpi_flavour.h"

/* X(Name, numacoll's implementation, parameters, arguments): the
 * initialisation entry points, which look at their caller first
 * (nc_mpi_check_caller()) */
#define NC_MPI_INIT_TABLE(X)                                                                       \
    X(Init, nc_mpi_init, (int *argc, char ***argv), (argc, argv))                                  \
    X(Init_thread, nc_mpi_init_thread, (int *argc, char ***argv, int required, int *provided),     \
      (argc, argv, required, provided))

/* X(Name, numacoll's implementation, parameters, arguments) */
#define NC_MPI_ENTRY_TABLE(X)                                                                      \
    X(Finalize, nc_mpi_finalize, (void), ())                                                       \
    X(Bcast, nc_mpi_bcast,                                                                         \
      (void *buf, int count, nc_mpi_word_t datatype, int root, nc_mpi_word_t comm),                \
      (buf, count, datatype, root, comm))                                                          \
    X(Barrier, nc_mpi_barrier, (nc_mpi_word_t comm), (comm))                                       \
    X(Reduce, nc_mpi_reduce,                                                                       \
      (const void *sendbuf, void *recvbuf, int count, nc_mpi_word_t datatype, nc_mpi_word_t op,    \
       int root, nc_mpi_word_t comm),                                                              \
      (sendbuf, recvbuf, count, datatype, op, root, comm))                                         \
    X(Allreduce, nc_mpi_allreduce,                                                                 \
      (const void *sendbuf, void *recvbuf, int count, nc_mpi_word_t datatype, nc_mpi_word_t op,    \
       nc_mpi_word_t comm),                                                                        \
      (sendbuf, recvbuf, count, datatype, op, comm))                                              \
    X(Gather, nc_mpi_gather,                                                                       \
      (const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf, int recvcount,   \
       nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm),                                      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm))                    \
    X(Gatherv, nc_mpi_gatherv,                                                                     \
      (const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,                  \
       const int *recvcounts, const int *displs, nc_mpi_word_t recvtype, int root,                 \
       nc_mpi_word_t comm),                                                                        \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm))           \
    X(Scatter, nc_mpi_scatter,                                                                     \
      (const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf, int recvcount,   \
       nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm),                                      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm))                    \
    X(Scatterv, nc_mpi_scatterv,                                                                   \
      (const void *sendbuf, const int *sendcounts, const int *displs, nc_mpi_word_t sendtype,      \
       void *recvbuf, int recvcount, nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm),        \
      (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm))           \
    X(Allgather, nc_mpi_allgather,                                                                 \
      (const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf, int recvcount,   \
       nc_mpi_word_t recvtype, nc_mpi_word_t comm),                                                \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))                          \
    X(Allgatherv, nc_mpi_allgatherv,                                                               \
      (const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,                  \
       const int *recvcounts, const int *displs, nc_mpi_word_t recvtype, nc_mpi_word_t comm),      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm))                 \
    X(Alltoall, nc_mpi_alltoall,                                                                   \
      (const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf, int recvcount,   \
       nc_mpi_word_t recvtype, nc_mpi_word_t comm),                                                \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))                          \
    X(Alltoallv, nc_mpi_alltoallv,                                                                 \
      (const void *sendbuf, const int *sendcounts, const int *sdispls, nc_mpi_word_t sendtype,     \
       void *recvbuf, const int *recvcounts, const int *rdispls, nc_mpi_word_t recvtype,           \
       nc_mpi_word_t comm),                                                                        \
      (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm))     \
    X(Alltoallw, nc_mpi_alltoallw,                                                                 \
      (const void *sendbuf, const int *sendcounts, const int *sdispls, const void *sendtypes,      \
       void *recvbuf, const int *recvcounts, const int *rdispls, const void *recvtypes,            \
       nc_mpi_word_t comm),                                                                        \
      (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm))

#define NC_MPI_ENTRY_(Name, impl, params, args)                                                    \
    int PMPI_##Name params;                                                                        \
    NUMACOLL_API int MPI_##Name params;                                                            \
    int MPI_##Name params                                                                          \
    {                                                                                              \
        return nc_mpi_is_foreign() ? PMPI_##Name args : impl args;                                 \
    }
NC_MPI_ENTRY_TABLE(NC_MPI_ENTRY_)
#undef NC_MPI_ENTRY_

#define NC_MPI_INIT_ENTRY_(Name, impl, params, args)                                               \
    int PMPI_##Name params;                                                                        \
    NUMACOLL_API int MPI_##Name params;                                                            \
    int MPI_##Name params                                                                          \
    {                                                                                              \
        nc_mpi_check_caller(__builtin_return_address(0));                                          \
        return nc_mpi_is_foreign() ? PMPI_##Name args : impl args;                                 \
    }
NC_MPI_INIT_TABLE(NC_MPI_INIT_ENTRY_)
#undef NC_MPI_INIT_ENTRY_
