/*
 * numacoll-bind: internal interface shared by the tool's files.
 *
 *   nc_bind_options.c  command line and --cpus list parser, launcher environment
 *   nc_bind_place.c    topology loading and placement computation (no side effects)
 *   nc_bind_apply.c    binding, memory policy, OpenMP variables, --report
 *   nc_bind_stream.c   --stream kernel and the file-less shm rendezvous it uses
 *   nc_bind_main.c     main(): parse, plan, bind, exec
 *
 * Everything here returns 0 on success and -1 on a user error, with a one-line
 * message (no trailing newline) in the caller's err buffer.
 */
#ifndef NC_BIND_H
#define NC_BIND_H

#include <stddef.h>
#include <stdio.h>
#include <hwloc.h>

#define NC_BIND_ERRLEN 512
/* Exit status for user errors (bad option, bad list, impossible placement). */
#define NC_BIND_EXIT_USAGE 2
/* Upper bound on the number of CPUs a --cpus list may expand to. */
#define NC_BIND_MAX_LIST 65536
/* Upper bound on local ranks (dry run --np, launcher local size). */
#define NC_BIND_MAX_RANKS 4096

enum nc_bind_policy {
    NC_BIND_POLICY_DISTRIBUTE, /* round-robin over NUMA domains */
    NC_BIND_POLICY_ACCUMULATE, /* fill a domain before the next */
    NC_BIND_POLICY_NONE        /* leave ranks unbound */
};

enum nc_bind_mem {
    NC_BIND_MEM_NONE,   /* kernel default (first touch) */
    NC_BIND_MEM_PREFER, /* MPOL_PREFERRED: rank's domain first, others if full */
    NC_BIND_MEM_BIND    /* MPOL_BIND: rank's domain(s) only */
};

struct nc_bind_opts {
    const char *cpus;      /* --cpus text, NULL for automatic placement */
    int logical;           /* 1: --cpus and output use hwloc logical indexes */
    enum nc_bind_policy policy;
    int cores_per_rank;    /* 0 when not given */
    int pus_per_rank;      /* 0 when not given */
    enum nc_bind_mem mem;
    int threads;           /* --threads, 0 when not given */
    int oversubscribe;     /* allow ranks to share cores when the node is full */
    int report;
    int report_wait_ms;    /* how long --report waits for the program's threads */
    int dry_run;
    const char *topology;  /* --topology FILE|SYNTHETIC, NULL for this machine */
    int np;                /* --np, 0 when not given */
    int stream;
    long stream_n;         /* doubles per array and rank */
    int stream_ntimes;
    int verbose;
    int help;
    int version;
    char **prog;           /* program and its arguments, NULL-terminated, or NULL */
};

/* One rank's placement. cpuset/nodeset are owned by the plan. */
struct nc_bind_rank {
    hwloc_bitmap_t cpuset;  /* PUs the rank is bound to (whole machine if unbound) */
    hwloc_bitmap_t nodeset; /* NUMA domains its memory goes to */
};

struct nc_bind_plan {
    int nranks;
    struct nc_bind_rank *rank;
};

/* nc_bind_options.c */
int nc_bind_cpulist_parse(const char *text, int **list, int **pos, int *count,
                          char *err, size_t errlen);
int nc_bind_opts_parse(int argc, char **argv, struct nc_bind_opts *o, char *err, size_t errlen);
void nc_bind_usage(FILE *out);
int nc_bind_launcher_env(int *local_rank, int *local_size, const char **source,
                         char *err, size_t errlen);

/* nc_bind_place.c */
int nc_bind_topology_load(hwloc_topology_t *topo, const char *spec, char *err, size_t errlen);
int nc_bind_plan_compute(hwloc_topology_t topo, const struct nc_bind_opts *o, int nranks,
                         struct nc_bind_plan *plan, char *err, size_t errlen);
void nc_bind_plan_destroy(struct nc_bind_plan *plan);
void nc_bind_local_nodes(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, hwloc_nodeset_t out);
int nc_bind_format_where(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, int logical,
                         char *buf, size_t len);
int nc_bind_format_nodes(hwloc_topology_t topo, hwloc_const_nodeset_t nodeset, int logical,
                         char *buf, size_t len);
int nc_bind_format_mem(hwloc_topology_t topo, enum nc_bind_mem mem,
                       hwloc_const_nodeset_t nodeset, int logical, char *buf, size_t len);
int nc_bind_omp_env(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, int threads,
                    char *places, size_t places_len, const char **proc_bind);
void nc_bind_print_plan(FILE *out, hwloc_topology_t topo, const struct nc_bind_opts *o,
                        const struct nc_bind_plan *plan);
/* "would exec: prog args" (--dry-run with a program), quoted so a shell reads it back. */
void nc_bind_print_exec(FILE *out, char *const *prog);
const char *nc_bind_policy_name(enum nc_bind_policy p);
const char *nc_bind_mem_name(enum nc_bind_mem m);

/* nc_bind_apply.c */
int nc_bind_apply(hwloc_topology_t topo, const struct nc_bind_opts *o,
                  const struct nc_bind_rank *r, char *err, size_t errlen);
int nc_bind_report_self(hwloc_topology_t topo, int local_rank, int logical, char *buf, size_t len);
void nc_bind_report_threads_spawn(hwloc_topology_t topo, int local_rank, int logical,
                                  int threads, int wait_ms);

/* nc_bind_stream.c */
int nc_bind_stream_run(hwloc_topology_t topo, const struct nc_bind_opts *o, int local_rank,
                       int local_size);

#endif
