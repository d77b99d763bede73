#include "topo/nc_topo.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "common/nc_common.h"

static int load(nc_topo_t **out, const char *synthetic, const char *xml)
{
    nc_topo_t *t = calloc(1, sizeof *t);
    if (!t)
        return NUMACOLL_ERR_NOMEM;
    if (hwloc_topology_init(&t->topo))
        goto fail_free;
    if (synthetic && hwloc_topology_set_synthetic(t->topo, synthetic)) {
        nc_log_error("hwloc rejected the synthetic topology \"%s\"", synthetic);
        goto fail;
    }
    if (xml && hwloc_topology_set_xml(t->topo, xml)) {
        nc_log_error("hwloc could not read the topology XML file \"%s\"", xml);
        goto fail;
    }
    if (hwloc_topology_load(t->topo)) {
        nc_log_error("hwloc could not load the topology");
        goto fail;
    }
    *out = t;
    return 0;
fail:
    hwloc_topology_destroy(t->topo);
fail_free:
    free(t);
    return NUMACOLL_ERR_TOPO;
}

int nc_topo_load(nc_topo_t **out)
{
    return load(out, NULL, NULL);
}

int nc_topo_load_synthetic(const char *desc, nc_topo_t **out)
{
    return load(out, desc, NULL);
}

int nc_topo_load_xml(const char *path, nc_topo_t **out)
{
    return load(out, NULL, path);
}

void nc_topo_free(nc_topo_t *t)
{
    if (!t)
        return;
    hwloc_topology_destroy(t->topo);
    free(t);
}

int nc_topo_numa_count(const nc_topo_t *t)
{
    int n = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_NUMANODE);
    return n > 0 ? n : 1;
}

int nc_topo_numa_of_cpuset(const nc_topo_t *t, hwloc_const_cpuset_t set)
{
    if (hwloc_bitmap_iszero(set))
        return -1;
    hwloc_obj_t node = NULL;
    while ((node = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, node)))
        if (hwloc_bitmap_isincluded(set, node->cpuset))
            return (int)node->os_index;
    return -1;
}

int nc_topo_self_binding(const nc_topo_t *t, hwloc_cpuset_t set)
{
    if (hwloc_get_cpubind(t->topo, set, HWLOC_CPUBIND_THREAD) &&
        hwloc_get_cpubind(t->topo, set, HWLOC_CPUBIND_PROCESS))
        return NUMACOLL_ERR_TOPO;
    /* A binding wider than the machine (e.g. no mask set) is the whole machine. */
    hwloc_bitmap_and(set, set, hwloc_topology_get_topology_cpuset(t->topo));
    return 0;
}

int nc_topo_leaders(int p, const int *numa, int *leaders)
{
    int n = 0;
    for (int i = 0; i < p; i++) {
        leaders[i] = i;
        if (numa[i] >= 0)
            for (int j = 0; j < i; j++)
                if (numa[j] == numa[i]) {
                    leaders[i] = j;
                    break;
                }
        n += leaders[i] == i;
    }
    return n;
}

void nc_topo_cpuset_pack(hwloc_const_cpuset_t set, uint64_t words[NC_TOPO_CPUSET_WORDS])
{
    /* a word at a time: a bit at a time was most of a reused team's set-up */
    for (int w = 0; w < NC_TOPO_CPUSET_WORDS; w++)
#if ULONG_MAX == UINT64_MAX
        words[w] = hwloc_bitmap_to_ith_ulong(set, (unsigned)w);
#else
        words[w] = hwloc_bitmap_to_ith_ulong(set, 2u * (unsigned)w) |
                   (uint64_t)hwloc_bitmap_to_ith_ulong(set, 2u * (unsigned)w + 1u) << 32;
#endif
}

int nc_topo_union_weight(int p, const uint64_t (*words)[NC_TOPO_CPUSET_WORDS],
                         uint64_t u[NC_TOPO_CPUSET_WORDS])
{
    int n = 0;
    for (int w = 0; w < NC_TOPO_CPUSET_WORDS; w++) {
        u[w] = 0;
        for (int i = 0; i < p; i++)
            u[w] |= words[i][w];
        n += __builtin_popcountll(u[w]);
    }
    return n;
}

int nc_topo_cache_shared(const nc_topo_t *t, int p, const uint64_t (*words)[NC_TOPO_CPUSET_WORDS])
{
    if (!t)
        return -1;
    hwloc_bitmap_t u = hwloc_bitmap_alloc();
    if (!u)
        return -1;
    for (int w = 0; w < NC_TOPO_CPUSET_WORDS; w++) {
        uint64_t x = 0;
        for (int i = 0; i < p; i++)
            x |= words[i][w];
        for (int b = 0; b < 64; b++)
            if (x >> b & 1)
                hwloc_bitmap_set(u, (unsigned)(w * 64 + b));
    }
    int rc = hwloc_bitmap_iszero(u) ? -1 : hwloc_get_cache_covering_cpuset(t->topo, u) != NULL;
    hwloc_bitmap_free(u);
    return rc;
}

static int under_hypervisor(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 31 & 1);
#else
    return access("/sys/hypervisor/type", F_OK) == 0;
#endif
}

int nc_topo_caches_from(const nc_topo_t *t, const char **why)
{
    const char *w = "hwloc read this machine";
    int rc = NC_TOPO_CACHES_MACHINE;
    if (!t) {
        w = "no topology";
        rc = NC_TOPO_CACHES_NONE;
    } else if (!hwloc_topology_is_thissystem(t->topo)) {
        w = "hwloc read a given description (HWLOC_SYNTHETIC, HWLOC_XMLFILE)";
        rc = NC_TOPO_CACHES_GIVEN;
    } else if (under_hypervisor()) {
        w = "a virtual machine: hwloc shows the hypervisor's description";
        rc = NC_TOPO_CACHES_VIRTUAL;
    }
    if (why)
        *why = w;
    return rc;
}

double nc_topo_numa_ratio(hwloc_topology_t topo, int p, const int *numa)
{
    if (!topo || !numa)
        return 0;
    unsigned nr = 1;
    struct hwloc_distances_s *dist = NULL;
    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) ||
        nr < 1 || !dist)
        return 0;
    const unsigned n = dist->nbobjs;
    double sum = 0;
    int pairs = 0;
    for (unsigned a = 0; a < n; a++)
        for (unsigned b = 0; b < n; b++) {
            const int oa = (int)dist->objs[a]->os_index, ob = (int)dist->objs[b]->os_index;
            int ina = 0, inb = 0;
            for (int i = 0; i < p; i++) {
                ina |= numa[i] == oa;
                inb |= numa[i] == ob;
            }
            const hwloc_uint64_t self = dist->values[a * n + a];
            if (a == b || !ina || !inb || !self)
                continue;
            sum += (double)dist->values[a * n + b] / (double)self;
            pairs++;
        }
    hwloc_distances_release(topo, dist);
    return pairs ? sum / pairs : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A buffer bound to node o, touched, and checked to be there. */
static char *alloc_on(hwloc_topology_t topo, hwloc_obj_t o, size_t bytes, int *rc)
{
    char *b = hwloc_alloc_membind(topo, bytes, o->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET);
    if (!b) {
        *rc = NUMACOLL_ERR_NOMEM;
        return NULL;
    }
    memset(b, 1, bytes);
    hwloc_nodeset_t where = hwloc_bitmap_alloc();
    if (!where || hwloc_get_area_memlocation(topo, b, bytes, where, HWLOC_MEMBIND_BYNODESET) ||
        !hwloc_bitmap_isequal(where, o->nodeset)) {
        nc_log_error("NUMA copy ratio: a buffer bound to node %u is not all there",
                     o->os_index);
        *rc = NUMACOLL_ERR_TOPO;
        hwloc_free(topo, b, bytes);
        b = NULL;
    }
    hwloc_bitmap_free(where);
    return b;
}

int nc_topo_copy_ratio(const nc_topo_t *t, int near, int far, size_t bytes, int reps,
                       double *ratio)
{
    hwloc_obj_t a = t ? hwloc_get_numanode_obj_by_os_index(t->topo, (unsigned)near) : NULL;
    hwloc_obj_t b = t ? hwloc_get_numanode_obj_by_os_index(t->topo, (unsigned)far) : NULL;
    if (!a || !b || a == b || !a->cpuset || hwloc_bitmap_iszero(a->cpuset) || !bytes ||
        reps < 1)
        return NUMACOLL_ERR_INVAL;
    hwloc_cpuset_t old = hwloc_bitmap_alloc();
    if (!old)
        return NUMACOLL_ERR_NOMEM;
    int rc = 0, bound = 0;
    char *src_near = NULL, *src_far = NULL, *dst = NULL;
    if (hwloc_get_cpubind(t->topo, old, HWLOC_CPUBIND_THREAD) ||
        hwloc_set_cpubind(t->topo, a->cpuset, HWLOC_CPUBIND_THREAD)) {
        rc = NUMACOLL_ERR_TOPO;
        goto out;
    }
    bound = 1;
    if (!(dst = alloc_on(t->topo, a, bytes, &rc)) || !(src_near = alloc_on(t->topo, a, bytes, &rc)) ||
        !(src_far = alloc_on(t->topo, b, bytes, &rc)))
        goto out;
    double best[2] = {1e30, 1e30};
    for (int i = 0; i < reps; i++)
        for (int k = 0; k < 2; k++) {
            const double t0 = now_s();
            memcpy(dst, k ? src_far : src_near, bytes);
            const double dt = now_s() - t0;
            if (dt < best[k])
                best[k] = dt;
        }
    *ratio = best[0] > 0 ? best[1] / best[0] : 0;
out:
    if (dst)
        hwloc_free(t->topo, dst, bytes);
    if (src_near)
        hwloc_free(t->topo, src_near, bytes);
    if (src_far)
        hwloc_free(t->topo, src_far, bytes);
    if (bound)
        hwloc_set_cpubind(t->topo, old, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(old);
    return rc;
}

/* ---- nc_topo_cpu_handoff(): two threads, one line each ---------------------------- */

#define HO_BATCHES 8   /* timed batches per pair; the fastest counts */
#define HO_BATCH 8     /* round trips per batch */
#define HO_WARM 8      /* untimed round trips first: both threads on their CPUs */
#define HO_SPIN 4096   /* tight polls before a wait yields (other processes share the CPUs) */
#define HO_LIMIT_S 5.0 /* the whole probe; past it, no figure */
#define HO_QUIT UINT32_MAX

typedef struct ho_lines {
    _Alignas(NC_CACHELINE) _Atomic uint32_t ping; /* written by the driver only */
    _Alignas(NC_CACHELINE) _Atomic uint32_t pong; /* written by the helper only */
} ho_lines_t;

typedef struct ho_run {
    hwloc_topology_t topo;
    const uint64_t *cpus;
    ho_lines_t *l;
    double deadline;
    int rc, ns, cpu[2];
} ho_run_t;

/* The helper answers every new ping with the same value, until HO_QUIT. The
 * values are the hand-off being timed and publish nothing: relaxed (the
 * threads' creation and joins order everything else). */
static void *ho_helper(void *arg)
{
    ho_lines_t *l = arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t v;
        /* relaxed: the hand-off itself (above) */
        for (uint32_t k = 1; (v = atomic_load_explicit(&l->ping, memory_order_relaxed)) == seen;
             k++)
            if (!(k % HO_SPIN))
                sched_yield();
        if (v == HO_QUIT)
            return NULL;
        atomic_store_explicit(&l->pong, v, memory_order_relaxed);
        seen = v;
    }
}

/* One round trip: ping v, until the helper's pong is v (tight polls, no
 * pause: a pause would add to the hand-off being timed; then yields). -1
 * past the deadline. */
static int ho_round(ho_lines_t *l, uint32_t v, double deadline)
{
    /* relaxed: the hand-off itself (ho_helper()) */
    atomic_store_explicit(&l->ping, v, memory_order_relaxed);
    for (uint32_t k = 1; atomic_load_explicit(&l->pong, memory_order_relaxed) != v; k++)
        if (!(k % HO_SPIN)) {
            sched_yield();
            if (now_s() > deadline)
                return -1;
        }
    return 0;
}

/* One pair: the driver (ho_driver()'s thread) bound to a, the helper to b; the
 * one-way hand-off in seconds, -1 on a refused binding or past the deadline. */
static double ho_pair(const ho_run_t *r, pthread_t helper, unsigned a, unsigned b, uint32_t *v)
{
    hwloc_bitmap_t sa = hwloc_bitmap_alloc(), sb = hwloc_bitmap_alloc();
    double best = -1;
    if (!sa || !sb)
        goto out;
    hwloc_bitmap_only(sa, a);
    hwloc_bitmap_only(sb, b);
    if (hwloc_set_cpubind(r->topo, sa, HWLOC_CPUBIND_THREAD) ||
        hwloc_set_thread_cpubind(r->topo, helper, sb, 0))
        goto out;
    for (int j = 0; j < HO_WARM; j++)
        if (ho_round(r->l, ++*v, r->deadline))
            goto out;
    best = 1e30;
    for (int k = 0; k < HO_BATCHES && best >= 0; k++) {
        const double t0 = now_s();
        for (int j = 0; j < HO_BATCH; j++)
            if (ho_round(r->l, ++*v, r->deadline)) {
                best = -1;
                break;
            }
        const double dt = now_s() - t0;
        if (best >= 0 && dt < best)
            best = dt;
    }
out:
    hwloc_bitmap_free(sa);
    hwloc_bitmap_free(sb);
    return best < 0 ? -1 : best / (2 * HO_BATCH);
}

/* A thread of its own, so the caller's binding is never touched: it starts
 * the helper, times every pair of neighbouring CPUs, stops the helper. */
static void *ho_driver(void *arg)
{
    ho_run_t *r = arg;
    pthread_t helper;
    if (pthread_create(&helper, NULL, ho_helper, r->l))
        return NULL;
    double worst = -1;
    uint32_t v = 0;
    int prev = -1;
    for (int c = 0; c < NC_TOPO_CPUSET_WORDS * 64; c++) {
        if (!(r->cpus[c / 64] >> (c % 64) & 1))
            continue;
        if (prev >= 0) {
            const double d = ho_pair(r, helper, (unsigned)prev, (unsigned)c, &v);
            if (d < 0) {
                worst = -1;
                break;
            }
            if (d >= worst) {
                worst = d;
                r->cpu[0] = prev;
                r->cpu[1] = c;
            }
        }
        prev = c;
    }
    /* relaxed: see ho_helper() */
    atomic_store_explicit(&r->l->ping, HO_QUIT, memory_order_relaxed);
    pthread_join(helper, NULL);
    if (worst >= 0) {
        r->ns = worst * 1e9 > INT32_MAX ? INT32_MAX : (int)(worst * 1e9 + 0.5);
        r->rc = 0;
    }
    return NULL;
}

int nc_topo_cpu_handoff(const nc_topo_t *t, const uint64_t cpus[NC_TOPO_CPUSET_WORDS], int *ns,
                        int cpu[2])
{
    int n = 0;
    for (int w = 0; w < NC_TOPO_CPUSET_WORDS; w++)
        n += __builtin_popcountll(cpus[w]);
    if (!t || n < 2)
        return NUMACOLL_ERR_INVAL;
    /* a given topology's bindings would bind nothing on this machine */
    if (!hwloc_topology_is_thissystem(t->topo))
        return NUMACOLL_ERR_TOPO;
    ho_run_t r = {.topo = t->topo, .cpus = cpus, .rc = NUMACOLL_ERR_TOPO,
                  .deadline = now_s() + HO_LIMIT_S};
    if (!(r.l = aligned_alloc(NC_CACHELINE, sizeof *r.l)))
        return NUMACOLL_ERR_NOMEM;
    atomic_init(&r.l->ping, 0);
    atomic_init(&r.l->pong, 0);
    /* the threads take no signal meant for the process */
    sigset_t all, old;
    sigfillset(&all);
    pthread_t driver;
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int started = !pthread_create(&driver, NULL, ho_driver, &r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started)
        pthread_join(driver, NULL);
    free(r.l);
    if (!r.rc) {
        *ns = r.ns;
        cpu[0] = r.cpu[0];
        cpu[1] = r.cpu[1];
    }
    return r.rc;
}
