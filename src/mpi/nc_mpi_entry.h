/*
 * numacoll's implementations behind the exported C entry points
 * (nc_mpi_entry.c), called by those and by the Fortran entry points
 * (nc_mpi_fortran.c): one implementation of each call.
 *
 * MPI-free on purpose. An MPI handle crosses this interface as a machine word
 * (nc_mpi_word_t), whatever the MPI: an Open MPI handle is a pointer, an
 * MPICH one an int in the low half of the word (x86-64 and AArch64 pass an int
 * in the low 32 bits of a 64-bit register or stack slot; the upper bits are
 * not defined). nc_mpi.h converts words to handles and back.
 */
#ifndef NC_MPI_ENTRY_H
#define NC_MPI_ENTRY_H

#include <stdint.h>

typedef uintptr_t nc_mpi_word_t;

int nc_mpi_init(int *argc, char ***argv);
int nc_mpi_init_thread(int *argc, char ***argv, int required, int *provided);
int nc_mpi_finalize(void);
int nc_mpi_bcast(void *buf, int count, nc_mpi_word_t datatype, int root, nc_mpi_word_t comm);
int nc_mpi_barrier(nc_mpi_word_t comm);
int nc_mpi_reduce(const void *sendbuf, void *recvbuf, int count, nc_mpi_word_t datatype,
                  nc_mpi_word_t op, int root, nc_mpi_word_t comm);
int nc_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, nc_mpi_word_t datatype,
                     nc_mpi_word_t op, nc_mpi_word_t comm);
int nc_mpi_gather(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                  int recvcount, nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm);
int nc_mpi_gatherv(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                   const int *recvcounts, const int *displs, nc_mpi_word_t recvtype, int root,
                   nc_mpi_word_t comm);
int nc_mpi_scatter(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                   int recvcount, nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm);
int nc_mpi_scatterv(const void *sendbuf, const int *sendcounts, const int *displs,
                    nc_mpi_word_t sendtype, void *recvbuf, int recvcount, nc_mpi_word_t recvtype,
                    int root, nc_mpi_word_t comm);
int nc_mpi_allgather(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                     int recvcount, nc_mpi_word_t recvtype, nc_mpi_word_t comm);
int nc_mpi_allgatherv(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                      const int *recvcounts, const int *displs, nc_mpi_word_t recvtype,
                      nc_mpi_word_t comm);
int nc_mpi_alltoall(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                    int recvcount, nc_mpi_word_t recvtype, nc_mpi_word_t comm);
int nc_mpi_alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls,
                     nc_mpi_word_t sendtype, void *recvbuf, const int *recvcounts,
                     const int *rdispls, nc_mpi_word_t recvtype, nc_mpi_word_t comm);
/* sendtypes, recvtypes: the MPI's own arrays of datatype handles, as they came */
int nc_mpi_alltoallw(const void *sendbuf, const int *sendcounts, const int *sdispls,
                     const void *sendtypes, void *recvbuf, const int *recvcounts,
                     const int *rdispls, const void *recvtypes, nc_mpi_word_t comm);

/* numacoll's start-up after the MPI library's own initialisation (step list
 * in nc_mpi_init.c); runs once per process whichever binding calls it. */
void nc_mpi_after_init(void);

#endif
