/*
 * numacoll's MPI tools started by the other MPI's launcher (numacoll-bench,
 * numacoll-tune, numacoll-info under mpirun).
 *
 * A tool built for Open MPI and started by MPICH's mpiexec (or the reverse)
 * does not join the launcher's job: every process initialises as a job of
 * one rank, and the tool would measure or report nothing useful. The
 * launcher's environment tells: Hydra (MPICH) sets PMI_SIZE and PMI_RANK,
 * Open MPI's mpirun OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK. When
 * MPI_COMM_WORLD has one rank but the launcher started more, the tool says
 * which build to use (once, from the launcher's rank 0) and the job exits
 * with 2 (that rank's code; the others exit with 0: nc_tool_exit_said()).
 */
#ifndef NC_TOOL_LAUNCHER_H
#define NC_TOOL_LAUNCHER_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/nc_common.h"

/* The launcher's rank of this process before MPI_Init (0 when started
 * alone): usage errors, found before MPI_Init on every rank, are printed by
 * rank 0 only. */
static inline int nc_tool_launcher_rank(void)
{
    const int r = nc_launcher_rank();
    return r > 0 ? r : 0;
}

/* The exit code of a failure that only the launcher's rank 0 explains: code
 * there, 0 on the other ranks. A launcher aborts the whole job when the first
 * process exits with an error; had that been another rank, before rank 0
 * wrote its line, the explanation would be killed with it (seen with Open
 * MPI's mpirun when rank 0 starts late). The job still exits with code. */
static inline int nc_tool_exit_said(int code)
{
    return nc_tool_launcher_rank() == 0 ? code : 0;
}

static inline void nc_tool_check_launcher(const char *tool)
{
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 1)
        return;
    static const char *const env[2][3] = {
        {"PMI_SIZE", "PMI_RANK", "MPICH"},
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI"}};
    for (int k = 0; k < 2; k++) {
        const char *n = getenv(env[k][0]), *r = getenv(env[k][1]);
        if (!n || atoi(n) <= 1)
            continue;
        if (!r || atoi(r) == 0) {
            char version[MPI_MAX_LIBRARY_VERSION_STRING];
            int len = 0;
            MPI_Get_library_version(version, &len);
            int nl = 0;
            while (nl < len && version[nl] && version[nl] != '\n' && version[nl] != ',') {
                if (version[nl] == '\t')
                    version[nl] = ' ';
                nl++;
            }
            fprintf(stderr,
                    "%s: started by %s's launcher for %s ranks, but this %s is built with "
                    "%.*s and runs as a job of one rank: use the %s build of %s (installed: "
                    "%s/numacoll/%s/bin/%s under numacoll's install prefix; in the source "
                    "tree: %s%s)\n",
                    tool, env[k][2], n, tool, nl, version, env[k][2], tool, NC_TOOLS_LIBDIR_REL,
                    k == 0 ? "mpich" : "openmpi", tool, k == 0 ? "build-mpich/bin/" : "build/bin/",
                    tool);
        }
        MPI_Finalize();
        exit(nc_tool_exit_said(2));
    }
}

#endif /* NC_TOOL_LAUNCHER_H */
