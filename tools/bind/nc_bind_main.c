/*
 * numacoll-bind: place an MPI rank (and its OpenMP threads) on the node, then exec
 * the program. See docs/bind.md.
 *
 *  1. parse options (any error: one line, exit 2, nothing started);
 *  2. find the local rank and size from the launcher's environment;
 *  3. load the topology (this machine, or --topology for --dry-run);
 *  4. compute the placement of ALL local ranks, so that every rank sees the same
 *     errors and none starts when one of them cannot be placed;
 *  5. --dry-run: print the table (and the command each rank would exec) and stop;
 *  6. bind this rank, set its memory policy, export OMP_* (--threads);
 *  7. --report: print what the kernel now says (and watch the program's threads);
 *  8. --stream: run the bandwidth kernel; otherwise exec the program.
 */
#include "nc_bind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/nc_common.h"

#ifndef NUMACOLL_VERSION
#define NUMACOLL_VERSION "unknown"
#endif

static int nc_bind_usage_error(const char *msg)
{
    fprintf(stderr, "numacoll-bind: %s\n", msg);
    return NC_BIND_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    struct nc_bind_opts o;
    char err[NC_BIND_ERRLEN];
    int local_rank = 0, local_size = 1;
    const char *source = "--np";
    hwloc_topology_t topo;
    struct nc_bind_plan plan = {0, NULL};

    /* 1. */
    if (nc_bind_opts_parse(argc, argv, &o, err, sizeof(err)))
        return nc_bind_usage_error(err);
    if (o.help) {
        nc_bind_usage(stdout);
        return 0;
    }
    if (o.version) {
        printf("numacoll-bind %s (hwloc %s)\n", NUMACOLL_VERSION, HWLOC_VERSION);
        return 0;
    }
    /* 2. */
    if (o.np) {
        local_size = o.np;
    } else if (nc_bind_launcher_env(&local_rank, &local_size, &source, err, sizeof(err))) {
        return nc_bind_usage_error(err);
    }
    /* 3. */
    if (nc_bind_topology_load(&topo, o.topology, err, sizeof(err)))
        return nc_bind_usage_error(err);
    /* 4. */
    if (nc_bind_plan_compute(topo, &o, local_size, &plan, err, sizeof(err))) {
        hwloc_topology_destroy(topo);
        return nc_bind_usage_error(err);
    }
    /* 5. */
    if (o.dry_run) {
        nc_bind_print_plan(stdout, topo, &o, &plan);
        if (o.prog)
            nc_bind_print_exec(stdout, o.prog);
        nc_bind_plan_destroy(&plan);
        hwloc_topology_destroy(topo);
        return 0;
    }
    if (o.verbose)
        fprintf(stderr, "numacoll-bind: local rank %d of %d (from %s)\n", local_rank, local_size, source);
    /* 6. */
    if (nc_bind_apply(topo, &o, &plan.rank[local_rank], err, sizeof(err))) {
        fprintf(stderr, "numacoll-bind: local rank %d: %s\n", local_rank, err);
        return 1;
    }
    nc_bind_plan_destroy(&plan);
    /* 7. */
    if (o.report) {
        char line[2048];
        int n = nc_bind_report_self(topo, local_rank, o.logical, line, sizeof(line));
        fflush(stdout);
        if (n > 0 && write(1, line, strlen(line)) < 0)
            return 1;
        if (o.prog && o.threads > 1)
            nc_bind_report_threads_spawn(topo, local_rank, o.logical, o.threads, o.report_wait_ms);
    }
    /* 8. */
    if (o.stream) {
        int rc = nc_bind_stream_run(topo, &o, local_rank, local_size);
        hwloc_topology_destroy(topo);
        return rc;
    }
    hwloc_topology_destroy(topo);
    if (!o.prog)
        return 0;
    fflush(NULL);
    execvp(o.prog[0], o.prog);
    char q[NC_QUOTE_LEN];
    int e = errno;
    fprintf(stderr, "numacoll-bind: cannot execute \"%s\": %s\n", nc_quote(q, sizeof q, o.prog[0]),
            strerror(e));
    return 127;
}
