/*
 * Topology through hwloc: which NUMA node a member is on (from its real CPU
 * binding, never from a launcher's variables) and the leaders[] array.
 */
#ifndef NC_TOPO_H
#define NC_TOPO_H

#include <hwloc.h>
#include <stdint.h>

#define NC_TOPO_CPUSET_WORDS 16 /* up to 1024 CPUs exchanged between members */

typedef struct nc_topo {
    hwloc_topology_t topo;
} nc_topo_t;

/* This machine (hwloc honours HWLOC_XMLFILE / HWLOC_SYNTHETIC for tests). */
int nc_topo_load(nc_topo_t **out);
/* A machine that is not this one: hwloc synthetic description or XML file. */
int nc_topo_load_synthetic(const char *desc, nc_topo_t **out);
int nc_topo_load_xml(const char *path, nc_topo_t **out);
void nc_topo_free(nc_topo_t *t);

int nc_topo_numa_count(const nc_topo_t *t);
/* OS index of the single NUMA node whose CPUs contain `set`; -1 when the set is
 * empty or spans several nodes (an unbound process: "unknown"). */
int nc_topo_numa_of_cpuset(const nc_topo_t *t, hwloc_const_cpuset_t set);
/* The calling thread's binding into `set` (allocated by the caller). */
int nc_topo_self_binding(const nc_topo_t *t, hwloc_cpuset_t set);

/* leaders[i] = lowest rank on the NUMA node of rank i; a rank whose node is
 * unknown (-1) leads itself. Returns the number of distinct leaders. */
int nc_topo_leaders(int p, const int *numa, int *leaders);

/* Packing a cpuset for the bootstrap exchange, and the union's weight. */
void nc_topo_cpuset_pack(hwloc_const_cpuset_t set, uint64_t words[NC_TOPO_CPUSET_WORDS]);
int nc_topo_union_weight(int p, const uint64_t (*words)[NC_TOPO_CPUSET_WORDS],
                         uint64_t u[NC_TOPO_CPUSET_WORDS]); /* the union into u */
/* Do the CPUs of all p members share one cache (an hwloc cache object covers
 * the union of their cpusets)? 1 yes, 0 no, -1 unknown (no topology, no CPUs). */
int nc_topo_cache_shared(const nc_topo_t *t, int p, const uint64_t (*words)[NC_TOPO_CPUSET_WORDS]);
/* Where hwloc's caches come from: NC_TOPO_CACHES_GIVEN when hwloc reads a
 * description (HWLOC_SYNTHETIC, HWLOC_XMLFILE: the caller said what the
 * machine is), _VIRTUAL when the CPU says it runs under a hypervisor, whose
 * caches are the ones the hypervisor describes (x86: CPUID leaf 1, ECX bit
 * 31; elsewhere /sys/hypervisor/type), _MACHINE otherwise, _NONE without a
 * topology. *why (may be NULL): the same in words. */
enum { NC_TOPO_CACHES_NONE, NC_TOPO_CACHES_MACHINE, NC_TOPO_CACHES_GIVEN, NC_TOPO_CACHES_VIRTUAL };
int nc_topo_caches_from(const nc_topo_t *t, const char **why);
/* Whether to measure the caches rather than trust hwloc's (NUMACOLL_CACHE_PROBE
 * =auto, core/nc_team.c step 5), from nc_topo_caches_from() and whether
 * hwloc's answer for the CPUs in question is unknown: in a virtual machine,
 * and where hwloc cannot tell unless the caller described the machine. */
static inline int nc_topo_caches_measure(int from, int unknown)
{
    return from == NC_TOPO_CACHES_VIRTUAL || (from != NC_TOPO_CACHES_GIVEN && unknown);
}
/* The one-way hand-off of a cache line between neighbouring CPUs of `cpus`
 * (each pair of consecutive CPUs of the set), where the members cannot time
 * it themselves because they are more than the CPUs (core/nc_team.c step 5,
 * P0): two threads of the caller's, bound to the two CPUs of each pair in
 * turn, pass a line back and forth, 8 batches of 8 round trips per pair
 * after a warm-up; a pair's figure is its fastest batch (a preemption only
 * slows a batch), *ns the largest over the pairs and cpu[0], cpu[1] that
 * pair's OS indices. The calling thread's binding is not touched. 0;
 * NUMACOLL_ERR_INVAL with fewer than two CPUs; NUMACOLL_ERR_NOMEM;
 * NUMACOLL_ERR_TOPO with a given
 * topology (HWLOC_SYNTHETIC, HWLOC_XMLFILE: its bindings bind nothing here),
 * when a binding or a thread is refused, or when it all takes longer than 5 s. */
int nc_topo_cpu_handoff(const nc_topo_t *t, const uint64_t cpus[NC_TOPO_CPUSET_WORDS], int *ns,
                        int cpu[2]);
/* How much farther another NUMA node is than one's own, between the nodes of
 * the p members (numa[i]: OS index, -1 unknown): the mean over ordered pairs
 * of distinct nodes a, b of d(a, b) / d(a, a), hwloc's latency distances (the
 * firmware's SLIT on Linux: typically 10 local, 20-32 remote). 0 when unknown
 * (no distances, fewer than two nodes). */
double nc_topo_numa_ratio(hwloc_topology_t topo, int p, const int *numa);
/* The same ratio measured (numacoll-tune): the calling thread bound to the
 * CPUs of NUMA node `near` (OS index) copies `bytes` from a buffer bound to
 * `far` and from one bound to `near` into one on `near`, best of `reps`
 * each; *ratio = far time / near time. The pages are checked to be where
 * they were bound (hwloc_get_area_memlocation); the thread's binding is
 * restored. 0, NUMACOLL_ERR_INVAL (no such nodes, near has no CPUs),
 * _ERR_NOMEM, or _ERR_TOPO (binding refused, pages elsewhere). */
int nc_topo_copy_ratio(const nc_topo_t *t, int near, int far, size_t bytes, int reps,
                       double *ratio);

#endif
