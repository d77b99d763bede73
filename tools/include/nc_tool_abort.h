/*
 * Fatal exit for numacoll's MPI tools (numacoll-bench, numacoll-tune).
 *
 * MPI_Abort can make the launcher stop forwarding output before the message
 * that explains the abort has left the pipe: with MPICH's Hydra about one
 * abort in fifteen printed nothing at all. The tools flush, give the launcher
 * a moment to forward, and only then abort. A fatal path only: the delay
 * costs nothing that matters.
 */
#ifndef NC_TOOL_ABORT_H
#define NC_TOOL_ABORT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NC_TOOL_ABORT_DELAY_NS 200000000L /* 0.2 s */

static inline void nc_tool_abort(MPI_Comm comm, int code) __attribute__((noreturn));
static inline void nc_tool_abort(MPI_Comm comm, int code)
{
    struct timespec ts = {0, NC_TOOL_ABORT_DELAY_NS};

    fflush(stdout);
    fflush(stderr);
    nanosleep(&ts, NULL);
    PMPI_Abort(comm, code);
    abort();
}

#endif /* NC_TOOL_ABORT_H */
