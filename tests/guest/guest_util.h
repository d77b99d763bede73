/*
 * Helpers of the programs that run inside the NUMA guest (tests/guest).
 *
 * Every program prints its own lines and ends with exactly one
 * `RESULT: PASS` or `RESULT: FAIL <why>` line, which tests/guest/run.sh reads.
 * The expected topology always comes from /sys/devices/system/node, never from
 * numacoll, so the programs check numacoll against the kernel.
 */
#ifndef GUEST_UTIL_H
#define GUEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define G_MAX_NODES 64
#define G_MAX_CPUS 1024

/* What /sys says. */
typedef struct g_topo {
    int nnodes;               /* online nodes with CPUs */
    int node_id[G_MAX_NODES]; /* OS index of the k-th node */
    int ncpus[G_MAX_NODES];   /* CPUs of the k-th node */
    int cpus[G_MAX_NODES][64];
    int cpu_node[G_MAX_CPUS]; /* node OS index of a CPU, -1 if none */
    int max_cpu;              /* highest CPU number + 1 */
    int dist[G_MAX_NODES][G_MAX_NODES]; /* /sys distance from the i-th to the j-th node,
                                           0 unknown */
} g_topo_t;

/* The mean over ordered pairs of distinct nodes a, b of dist[a][b] /
 * dist[a][a] (2.0 when /sys gave none); and whether numacoll's forwarding
 * into a node (NUMACOLL_NUMA_FORWARD from the environment: on, off, auto by
 * (m - 1)(r - 1) > 1) should take place into a node of `mates` + 1 members
 * of a team spread over several nodes. */
double g_numa_ratio(const g_topo_t *t);
int g_numa_forward_expected(const g_topo_t *t, int mates);

int g_topo_read(g_topo_t *t);
void g_topo_print(const g_topo_t *t);

/* Pin the calling process to one CPU, or (cpu < 0) to every CPU. */
int g_pin(int cpu);

/* Failure message of this process: "FAIL rank R: ..." on stdout. */
#define G_CHECK(cond, ...)                                                                  \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            g_fail_msg(__FILE__, __LINE__, __VA_ARGS__);                                    \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)
void g_fail_msg(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
extern int g_rank; /* -1 in the parent */
/* The first failure message of this program or any member it forked (kept in
 * memory shared with the members), "" if none: for the RESULT line. */
const char *g_first_failure(void);

/* Run body(rank, p, name, arg) in p forked children within timeout_s seconds;
 * a fresh bootstrap name per call. 0 when every child exited 0, else prints
 * which child failed how and returns 1. */
typedef int (*g_body_fn)(int rank, int p, const char *name, void *arg);
int g_fork_run(int p, int timeout_s, g_body_fn body, void *arg);

/* move_pages() query of [base+off, base+off+bytes): how many pages on node
 * `expect`, how many elsewhere, how many not mapped in this process. The first
 * wrong page is described in `first` (offset and node). */
typedef struct g_pages {
    long pages, on_node, elsewhere, unmapped, errors;
    size_t first_off;
    int first_status;
} g_pages_t;
int g_query_pages(const void *base, size_t off, size_t bytes, size_t page, int expect,
                  g_pages_t *out);

/* Create and destroy a one-member team in this (parent) process, so numacoll
 * loads the hwloc topology once and every forked member inherits it instead of
 * loading it again (slow under TCG). Returns 0 or a NUMACOLL_ERR_*. */
int g_preload_numacoll(void);

/* Member i of p spread round-robin over the nodes, one per CPU while CPUs
 * last: node i % N, the (i / N)-th CPU of that node (modulo its CPUs). */
int g_rr_cpu(const g_topo_t *t, int i);

double g_now(void);
#endif
