/*
 * numacoll's MPI layer (libnumacoll-mpi.so): queries a program or a tool may
 * use besides the wrapped MPI_* calls. Programs that only want the speed-up
 * need nothing from here.
 */
#ifndef NUMACOLL_MPI_H
#define NUMACOLL_MPI_H

#include <mpi.h>

#include "numacoll.h"

#ifdef __cplusplus
extern "C" {
#endif

enum numacoll_mpi_coll {
    NUMACOLL_MPI_BCAST = 0,
    NUMACOLL_MPI_BARRIER,
    NUMACOLL_MPI_REDUCE,
    NUMACOLL_MPI_ALLREDUCE,
    NUMACOLL_MPI_GATHER,
    NUMACOLL_MPI_GATHERV,
    NUMACOLL_MPI_SCATTER,
    NUMACOLL_MPI_SCATTERV,
    NUMACOLL_MPI_ALLGATHER,
    NUMACOLL_MPI_ALLGATHERV,
    NUMACOLL_MPI_ALLTOALL,
    NUMACOLL_MPI_ALLTOALLV,
    NUMACOLL_MPI_ALLTOALLW, /* always the MPI library's (a datatype per block), counted */
    NUMACOLL_MPI_NCOLL
};

typedef struct numacoll_mpi_stats {
    unsigned long long calls_numacoll[NUMACOLL_MPI_NCOLL], bytes_numacoll[NUMACOLL_MPI_NCOLL];
    unsigned long long calls_pmpi[NUMACOLL_MPI_NCOLL], bytes_pmpi[NUMACOLL_MPI_NCOLL];
    /* Calls across nodes in which this process was its node's leader, and the
     * collective PMPI calls it made for them on the leaders' communicator
     * (the messages that cross the network). */
    unsigned long long calls_leader[NUMACOLL_MPI_NCOLL], pmpi_leader[NUMACOLL_MPI_NCOLL];
    /* numacoll's calls in which this process moved data by CMA (a kernel
     * single copy between the processes' own buffers) instead of through the
     * shared segment: which transport ran (docs/transport.md). */
    unsigned long long calls_cma[NUMACOLL_MPI_NCOLL];
    /* Node teams this process was a member of: made new, and taken from the
     * team cache (a freed communicator's team, NUMACOLL_TEAM_CACHE). */
    unsigned long long teams_made, teams_reused;
} numacoll_mpi_stats_t;

/* 1 when numacoll has set up comm (its next collectives run in shared memory),
 * 0 when it hands comm to the MPI library, negative NUMACOLL_ERR_* on error. */
NUMACOLL_API int numacoll_mpi_comm_active(MPI_Comm comm);
/* This process's counters since MPI_Init (all communicators). */
NUMACOLL_API int numacoll_mpi_stats(numacoll_mpi_stats_t *out);
/* The node-local team behind comm (NULL when inactive): numacoll_team_info(). */
NUMACOLL_API numacoll_team_t *numacoll_mpi_comm_team(MPI_Comm comm);

#ifdef __cplusplus
}
#endif
#endif
