/*
 * Team creation and teardown.
 *
 * Protocol (every member, through the bootstrap):
 *   1. snapshot the configuration; find my NUMA node from my CPU binding;
 *      rank 0 takes the segment's bytes from the node budget (halving the
 *      queue length, and the reductions' slots with it, while it does not fit), creates the segment and reserves
 *      its own parts of it (header ready, not yet first-touched);
 *   2. allgather #1: status, NUMA node, pid, CPU mask, the configuration
 *      values that shape the segment, and (rank 0) the segment's descriptor
 *      (the file has no name in /dev/shm any more: shm/nc_shm.h) and the
 *      queue length the budget allowed. Every member sees the same array, so
 *      every member takes the same decision: any error or configuration
 *      mismatch ends the creation everywhere;
 *   3. the others attach through /proc/<pid of rank 0>/fd/<fd>; each
 *      member reserves its block (posix_fallocate:
 *      a page tmpfs cannot back is an error here, not a SIGBUS later),
 *      first-touches it with MADV_RANDOM in force and checks it with
 *      move_pages();
 *   4. allgather #2: attach/reserve status and placement result; rank 0
 *      closes the descriptor the others attached through. A crash at any
 *      step leaves nothing in /dev/shm. A failure is reported by rank 0 in
 *      one line naming the member and what it lacked;
 *   5. when every member asked for it in #2 (NUMACOLL_CACHE_PROBE): the
 *      cache probe, neighbours timing a line's hand-off in the segment
 *      (probe_caches(), P1-P3; with more members than CPUs member 0's
 *      threads time the CPUs before #2 instead, P0), which decides whether
 *      the members share a cache; then the choices that follow from it
 *      (streamed stores, the reductions' CMA rule).
 */
#include "core/nc_team.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/nc_coll.h"
#include "config/nc_tunefile.h"
#include "model/nc_model.h"
#include "shm/nc_cma.h"
#include "shm/nc_shm.h"
#include "topo/nc_topo.h"

uint32_t nc_test_seq0;

/* The configuration values every member must agree on, in table order. */
static const int agreed[] = {NC_P_BCAST_FRAG_SIZE, NC_P_BCAST_QUEUE_LEN, NC_P_BCAST_SETS,
                             NC_P_BCAST_TREE,      NC_P_BCAST_INLINE_MAX, NC_P_SEG_LAYOUT,
                             NC_P_BARRIER_ALG,     NC_P_BARRIER_TREE,    NC_P_BARRIER_NUMA,
                             NC_P_REDUCE_FRAG_SIZE, NC_P_REDUCE_SLOTS,   NC_P_REDUCE_SMALL_MAX,
                             NC_P_REDUCE_NUMA,     NC_P_REDUCE_LINES,    NC_P_GATHER_FRAG_SIZE, NC_P_GATHER_SLOTS,
                             NC_P_GATHER_INLINE_MAX, NC_P_TRANSPORT, NC_P_REDUCE_CMA_MIN,
                             NC_P_ALLREDUCE_CMA_MIN, NC_P_NUMA_FORWARD, NC_P_NUMA_RATIO,
                             NC_P_TEST_DOMAINS,    NC_P_CACHE_SHARED_NS, NC_P_REDUCE_PACK_MAX};
#define NC_NAGREED ((int)NC_ARRAY_SIZE(agreed))

typedef struct rec1 {
    int32_t status, numa, pid, queue_len; /* queue_len: rank 0's, after the budget */
    int32_t segfd, pad;                   /* rank 0's descriptor of the segment */
    uint64_t id[2];                       /* rank 0's name for the team (t->id) */
    uint64_t cma_addr;                    /* nc_cma_probe_addr() (shm/nc_cma.h) */
    int64_t cfg[NC_NAGREED][2];
    uint64_t cpus[NC_TOPO_CPUSET_WORDS];
    char segname[64];
} rec1_t;

enum { P0_FAILED = -1, P0_NOT_RUN = -2 }; /* rec2_t.cpu_ns when P0 gave no figure */

typedef struct rec2 {
    int32_t status, checked;
    int32_t cma_err;      /* the CMA probe: 0, or the errno of the first refusal */
    int32_t cache_shared; /* this member's view of nc_topo_cache_shared() (agreed after #2) */
    int32_t cache_probe;  /* this member asks for the cache probe (5: all must) */
    int32_t numa_ratio;   /* ... of nc_topo_numa_ratio(), in thousandths (agreed after #2) */
    int32_t cpu_ns;       /* member 0: P0's figure (nc_topo_cpu_handoff()); P0_FAILED,
                             P0_NOT_RUN */
    int32_t cpu_pair[2];  /* ... between these CPUs (OS indices) */
    int32_t pad;
    int64_t pages, misplaced;
    char cma_why[320];    /* why CMA was refused, naming the peer */
    char detail[160]; /* placement detail */
    char why[256];    /* why this member failed (status != 0) */
} rec2_t;

/* The node's topology, loaded once per process. */
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static nc_topo_t *topo;
static void topo_load(void)
{
    if (nc_topo_load(&topo))
        topo = NULL;
}

static int my_numa(uint64_t cpus[NC_TOPO_CPUSET_WORDS])
{
    pthread_once(&topo_once, topo_load);
    memset(cpus, 0, NC_TOPO_CPUSET_WORDS * sizeof *cpus);
    if (!topo)
        return -1;
    hwloc_cpuset_t set = hwloc_bitmap_alloc();
    int node = -1;
    if (set && !nc_topo_self_binding(topo, set)) {
        node = nc_topo_numa_of_cpuset(topo, set);
        nc_topo_cpuset_pack(set, cpus);
    }
    hwloc_bitmap_free(set);
    return node;
}

/* FNV-1a of a member's CPU mask: the team cache's check that its binding
 * has not changed since the team was made. */
static uint64_t cpus_key(const uint64_t cpus[NC_TOPO_CPUSET_WORDS])
{
    return nc_fnv1a(NC_FNV1A_BASIS, cpus, NC_TOPO_CPUSET_WORDS * sizeof *cpus);
}

void nc_team_binding(int *numa, uint64_t *key)
{
    uint64_t cpus[NC_TOPO_CPUSET_WORDS];
    *numa = my_numa(cpus);
    *key = cpus_key(cpus);
}

int nc_team_config(nc_config_t *cfg, int p, int log)
{
    char err[256];
    int rc = nc_config_snapshot(cfg);
    if (!rc)
        nc_tunefile_apply(cfg, p); /* the tune file's section for a team of p */
    if (!rc && (rc = nc_config_check(cfg, err, sizeof err)) && log)
        nc_log_error_once("%s", err);
    return rc;
}

/* A switch point as the report prints it: "never", or the first size that
 * takes it (above the size `below` that a smaller path keeps) between pre
 * and post. */
static void fmt_switch(char *v, size_t n, size_t min, size_t below, const char *pre,
                       const char *post)
{
    if (min == SIZE_MAX || min >= (size_t)1 << 50) /* 2^50: a tunable's "never" */
        snprintf(v, n, "never");
    else
        snprintf(v, n, "%s%zu%s", pre, min > below ? min : below + 1, post);
}

/* The members' agreed view of their caches (t->cache_shared), in words. */
static const char *cache_words(const numacoll_team_t *t)
{
    if (t->cache_probe)
        return t->cache_shared ? "the members share a cache, as measured"
                               : "the members do not all share a cache, as measured";
    return t->cache_shared == 0   ? "the members do not all share a cache"
           : t->cache_shared == 1 ? "the members share a cache"
                                  : "the members' caches are unknown";
}

static int probe_auto(const numacoll_team_t *t);

static int all_asked(const numacoll_team_t *t, const rec2_t *r2)
{
    for (int i = 0; i < t->p; i++)
        if (!r2[i].cache_probe)
            return 0;
    return 1;
}

static void report(const numacoll_team_t *t, const rec2_t *r2)
{
    const nc_layout_t *l = &t->seg.l;
    if (nc_log_level() < 1 || t->rank != 0)
        return;
    char lead[256] = "";
    size_t n = 0;
    for (int i = 0; i < t->p && n + 8 < sizeof lead; i++)
        n += (size_t)snprintf(lead + n, sizeof lead - n, "%s%d", i ? "," : "", t->leaders[i]);
    nc_log_info(1, "team p=%d numa_groups=%d leaders=[%s] cpus=%d%s tree=%s f=%zu s=%d q=%d "
                   "layout=%s segment=%zu bytes (%s)",
                t->p, t->nleaders, lead, t->ncpus, t->oversubscribed ? " (oversubscribed)" : "",
                t->cfg.v[NC_P_BCAST_TREE].text, l->f, l->s, l->q,
                t->cfg.v[NC_P_SEG_LAYOUT].text, l->total, t->seg.name);
    nc_log_info(1, "  %-10s %10s %10s %6s %5s %s", "block", "offset", "bytes", "owner", "node",
                "move_pages");
    nc_log_info(1, "  %-10s %10zu %10zu %6d %5d (with member 0)", "header", l->hdr_off,
                l->hdr_bytes, 0, t->numa[0]);
    nc_log_info(1, "  %-10s %10zu %10zu %6d %5d (with member 0)", "call ring", l->calls_off,
                l->calls_bytes, 0, t->numa[0]);
    nc_log_info(1, "  %-10s %10zu %10zu %6d %5d (with member 0)", "sets", l->sets_off,
                (size_t)l->q * l->set_bytes, 0, t->numa[0]);
    for (int i = 0; i < t->p; i++) {
        char check[200];
        if (!r2[i].checked)
            snprintf(check, sizeof check, "unchecked: %s", r2[i].detail);
        else if (r2[i].misplaced)
            snprintf(check, sizeof check, "%lld of %lld pages misplaced: %s",
                     (long long)r2[i].misplaced, (long long)r2[i].pages, r2[i].detail);
        else
            snprintf(check, sizeof check, "%lld pages on node %d", (long long)r2[i].pages,
                     t->numa[i]);
        nc_log_info(1, "  member %-3d %10zu %10zu %6d %5d %s", i,
                    l->rank_off + (size_t)i * l->rank_bytes, l->rank_bytes, i, t->numa[i], check);
    }
    nc_log_info(1, "  %-10s %10zu %10zu %6d %5d (with member 0)", "shared", l->barrier_off,
                l->barrier_bytes, 0, t->numa[0]);
    if (t->cache_probe && t->handoff_pair < 0)
        nc_log_info(1, "caches: %s: with more members than CPUs, member 0 timed the CPUs: the "
                       "slowest neighbours, CPUs %d and %d, hand a line over in %d ns one way (a "
                       "shared cache below NUMACOLL_CACHE_SHARED_NS=%d)",
                    cache_words(t), t->handoff_cpu[0], t->handoff_cpu[1], t->handoff_ns,
                    (int)NC_CFG_NUM(&t->cfg, CACHE_SHARED_NS));
    else if (t->cache_probe)
        nc_log_info(1, "caches: %s: the slowest neighbours, members %d and %d, hand a line over "
                       "in %d ns one way (a shared cache below NUMACOLL_CACHE_SHARED_NS=%d)",
                    cache_words(t), t->handoff_pair, t->handoff_pair + 1, t->handoff_ns,
                    (int)NC_CFG_NUM(&t->cfg, CACHE_SHARED_NS));
    else {
        const char *why;
        const int from = nc_topo_caches_from(topo, &why);
        nc_log_info(1, "caches: %s (hwloc: %s%s)", cache_words(t), why,
                    t->p < 2 ? ""
                    : t->cache_probe_asked && r2[0].cpu_ns == P0_FAILED && all_asked(t, r2)
                        ? "; with more members than CPUs, member 0 could not time two CPUs"
                    : probe_auto(t) && t->oversubscribed
                        ? "; with more members than CPUs no probe holds for a run"
                    : t->cache_probe_asked ? "; not every member asked for the cache probe"
                    : from == NC_TOPO_CACHES_GIVEN ? ""
                    : NC_CFG_NUM(&t->cfg, CACHE_PROBE) == NC_CACHE_PROBE_OFF
                        ? "; NUMACOLL_CACHE_PROBE=off"
                        : "");
    }
    nc_log_info(1,
                "copies into the segment (broadcast fragments, gather-family slots, large "
                "reductions): %s stores (%s)",
                t->shm_nt ? "non-temporal" : "cached",
                NC_CFG_NUM(&t->cfg, SHM_NT) != NC_SHM_NT_AUTO ? "NUMACOLL_SHM_NT"
                : t->shm_nt && t->nt_unmeasurable && t->cache_shared != 0
                    ? "more members than CPUs, where no probe holds for a run: streamed "
                      "whatever the caches"
                    : cache_words(t));
    if (!t->cma)
        nc_log_info(1, "transport: the segment for every size (CMA: %s)", t->cma_why);
    else if (t->cma_min == SIZE_MAX)
        nc_log_info(1, "transport: CMA allowed, the cost model never picks it for p=%d on %d "
                       "CPUs; NUMACOLL_TRANSPORT=cma forces it",
                    t->p, t->ncpus);
    else
        nc_log_info(1, "transport: CMA (%s) from %zu bytes (%s), the segment below",
                    NC_CFG_NUM(&t->cfg, CMA_COOP) ? "cooperative" : "single copy",
                    t->cma_min > t->inline_max ? t->cma_min : t->inline_max + 1,
                    NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_CMA ? "NUMACOLL_TRANSPORT=cma"
                    : NC_CFG_NUM(&t->cfg, CMA_MIN) ? "NUMACOLL_CMA_MIN"
                                                   : "the cost model's switch point");
    if (t->cma) {
        char v[NC_XG_KINDS][32];
        for (int k = 0; k < NC_XG_KINDS; k++)
            fmt_switch(v[k], sizeof v[k], t->gather_cma_min[k],
                       (size_t)NC_CFG_NUM(&t->cfg, GATHER_INLINE_MAX), "", "");
        nc_log_info(1, "transport, gather family: CMA for blocks from %s bytes (gather), %s "
                       "(scatter), %s (allgather), %s (alltoall) (%s)",
                    v[NC_XG_ROOTED], v[NC_XG_SCATTER], v[NC_XG_ALLGATHER], v[NC_XG_ALLTOALL],
                    NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_CMA ? "NUMACOLL_TRANSPORT=cma"
                    : NC_CFG_NUM(&t->cfg, GATHER_CMA_MIN)              ? "NUMACOLL_GATHER_CMA_MIN"
                    : nc_team_streamed_pair(t) ? "the cost model's; allgather and alltoall: never, two "
                                         "members that share no cache stream through the segment"
                                       : "the cost model's switch points");
    }
    if (t->cma) {
        /* calls above min(small max, F) are large (coll/nc_reduce.c) */
        size_t small = (size_t)NC_CFG_NUM(&t->cfg, REDUCE_SMALL_MAX);
        if (small > (size_t)NC_CFG_NUM(&t->cfg, REDUCE_FRAG_SIZE))
            small = (size_t)NC_CFG_NUM(&t->cfg, REDUCE_FRAG_SIZE);
        char v[2][40];
        for (int k = 0; k < 2; k++)
            fmt_switch(v[k], sizeof v[k], t->reduce_cma_min[k], small, "from ", " bytes");
        const char *why[2];
        const int set[2] = {NC_CFG_NUM(&t->cfg, REDUCE_CMA_MIN) != 0,
                            NC_CFG_NUM(&t->cfg, ALLREDUCE_CMA_MIN) != 0};
        const char *name[2] = {"NUMACOLL_REDUCE_CMA_MIN", "NUMACOLL_ALLREDUCE_CMA_MIN"};
        for (int k = 0; k < 2; k++)
            why[k] = NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_CMA ? "NUMACOLL_TRANSPORT=cma"
                     : set[k]                                            ? name[k]
                     : k == 1                                            ? "the default"
                     : t->nleaders > 1 ? "the members span NUMA nodes"
                     : t->cache_shared == 0 && nc_reduce_cma_auto(t->p) == SIZE_MAX
                         ? "two members without a shared cache: quarter rounds through the "
                           "segment instead"
                         : cache_words(t);
        nc_log_info(1, "transport, reductions: CMA %s (reduce: %s), %s (allreduce: %s)", v[0],
                    why[0], v[1], why[1]);
    }
    nc_numa_plan_t np;
    if (!nc_coll_numa_plan(t, &np, 1)) {
        if (np.two) {
            static const char *mode[] = {"auto", "on", "off"};
            const int m = (int)NC_CFG_NUM(&t->cfg, NUMA_FORWARD);
            char into[160] = "";
            size_t at = 0;
            for (int d = 0; d < np.D && at + 16 < sizeof into; d++)
                if (nc_numa_plan_carry(&np, d, m, t->numa_ratio)) {
                    int w = snprintf(into + at, sizeof into - at, "%s%d", at ? "," : "",
                                     np.dmem[np.dfirst[d]]);
                    at += w > 0 ? (size_t)w : 0;
                }
            char r[40];
            if (t->numa_ratio > 0)
                snprintf(r, sizeof r, "%.2f (%s)", t->numa_ratio,
                         NC_CFG_NUM(&t->cfg, NUMA_RATIO) ? "NUMACOLL_NUMA_RATIO" : "hwloc");
            else
                snprintf(r, sizeof r, "unknown, taken as %.1f", NC_NUMA_RATIO_DEFAULT);
            nc_log_info(1, "NUMA forwarding (allgather(v) blocks from %lld bytes, large allreduce "
                           "results): into %s%s (NUMACOLL_NUMA_FORWARD=%s, remote / local "
                           "distance r = %s)",
                        (long long)NC_CFG_NUM(&t->cfg, ALLGATHER_NUMA_MIN),
                        at ? "the NUMA nodes led by members " : "no NUMA node", into,
                        mode[m >= 0 && m < 3 ? m : 0], r);
        }
        nc_numa_plan_free(&np);
    }
    static const char *pl[] = {"OK", "MISPLACED", "UNKNOWN (a member is unbound)",
                               "UNCHECKED (move_pages unavailable)"};
    nc_log_info(1, "placement check: %s%s%s", pl[t->placement], t->placement_detail[0] ? ": " : "",
                t->placement_detail);
}

/* Step 3: can this member read and write every other member's memory with
 * CMA (shm/nc_cma.h)? Not asked when the transport is shm or p = 1. */
static void probe_cma(const numacoll_team_t *t, const rec1_t *r1, rec2_t *m2)
{
    m2->cma_err = -1; /* not probed */
    if (NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_SHM || t->p == 1)
        return;
    m2->cma_err = 0;
    for (int i = 0; i < t->p && !m2->cma_err; i++) {
        char why[256];
        if (i != t->rank && (m2->cma_err = nc_cma_probe(r1[i].pid, r1[i].cma_addr,
                                                        (int)NC_CFG_NUM(&t->cfg, TEST_CMA_FAIL),
                                                        why, sizeof why)))
            snprintf(m2->cma_why, sizeof m2->cma_why, "member %d of member %d: %s", t->rank, i,
                     why);
    }
}

/* After exchange #2: the team uses CMA only if every member could reach
 * every other; otherwise it says why, once per process. */
static void cma_agree(numacoll_team_t *t, const rec2_t *r2)
{
    static atomic_int said;
    const int64_t want = NC_CFG_NUM(&t->cfg, TRANSPORT);
    t->cma = want != NC_TRANSPORT_SHM && t->p > 1;
    for (int i = 0; i < t->p && t->cma; i++)
        if (r2[i].cma_err) {
            t->cma = 0;
            snprintf(t->cma_why, sizeof t->cma_why, "%s", r2[i].cma_why);
        }
    if (want == NC_TRANSPORT_SHM)
        snprintf(t->cma_why, sizeof t->cma_why, "NUMACOLL_TRANSPORT=shm");
    else if (t->p == 1)
        snprintf(t->cma_why, sizeof t->cma_why, "a team of one");
    if (t->cma || want == NC_TRANSPORT_SHM || t->p == 1 || atomic_exchange(&said, 1))
        return;
    if (want == NC_TRANSPORT_CMA)
        nc_log_warn_once("cma-refused", "NUMACOLL_TRANSPORT=cma, but CMA is not allowed here: "
                         "%s; large broadcasts copy through the shared segment", t->cma_why);
    else
        nc_log_info(1, "CMA is not allowed here: %s; large broadcasts copy through the shared "
                       "segment", t->cma_why);
}

/* Would NUMACOLL_CACHE_PROBE=auto measure: hwloc's caches are a
 * hypervisor's description, or unknown and the caller did not describe the
 * machine? */
static int probe_auto(const numacoll_team_t *t)
{
    return t->p > 1 && NC_CFG_NUM(&t->cfg, CACHE_PROBE) == NC_CACHE_PROBE_AUTO &&
           nc_topo_caches_measure(nc_topo_caches_from(topo, NULL), t->cache_shared < 0);
}

/* Does this member ask for the cache probe (step 5)? NUMACOLL_CACHE_PROBE:
 * on (with more members than CPUs, the probe times the CPUs, not the
 * members: P0), off, or auto (probe_auto()), but not with more members than
 * CPUs: nt_unmeasurable(). */
static int probe_wanted(const numacoll_team_t *t)
{
    if (t->p > 1 && NC_CFG_NUM(&t->cfg, CACHE_PROBE) == NC_CACHE_PROBE_ON)
        return 1;
    return probe_auto(t) && !t->oversubscribed;
}

/* Where auto would measure but the members outnumber the CPUs (on at least
 * two CPUs), nothing measured once holds: the members move between the
 * CPUs, and in a virtual machine the vCPUs between host cores (on the
 * development VM every 0.3-1 s when idle, for minutes under load; a probe at
 * creation disagreed with the run in 2 of 6 runs). There copies into the
 * segment are streamed whatever hwloc says, the choice whose worst case is
 * the smaller (docs/transport.md, "More members than CPUs"); hwloc's view
 * stays for the rest (the reduce's CMA rule). */
static int nt_unmeasurable(const numacoll_team_t *t)
{
    return probe_auto(t) && t->oversubscribed && t->ncpus > 1;
}

#define PROBE_BATCHES 8   /* timed batches per pair; the fastest counts */
#define PROBE_BATCH 8     /* round trips per batch */
#define PROBE_SPIN 4096   /* tight polls before a wait backs off (not oversubscribed) */
#define PROBE_LIMIT_S 10  /* a member that does not answer in this long breaks the team */

/* Until *w >= v (P1, P3; the values stay far below a wrap). First tight
 * polls, with no pause between them (a pause would add to the hand-off
 * being timed), then the team's back-off; past the deadline the team is
 * broken, which ends every member's waits here alike. */
static int probe_wait(numacoll_team_t *t, _Atomic uint64_t *w64, _Atomic uint32_t *w, uint64_t v,
                      uint64_t deadline, int *late)
{
    /* relaxed: the value is the hand-off being timed (ping) or a figure on
     * its own (ns, P2): nothing is published with either */
#define PROBE_READ()                                                                           \
    (w64 ? atomic_load_explicit(w64, memory_order_relaxed)                                     \
         : (uint64_t)atomic_load_explicit(w, memory_order_relaxed))
    if (!t->oversubscribed)
        for (int k = 0; k < PROBE_SPIN; k++)
            if (PROBE_READ() >= v)
                return 0;
    nc_backoff_t b;
    int rc;
    nc_backoff_init(&b, &t->wait);
    for (uint32_t k = 1; PROBE_READ() < v; k++) {
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
        if (!(k & 255) && nc_time_ns() > deadline) {
            *late = 1;
            nc_wait_break(&t->wait);
            return NUMACOLL_ERR_BROKEN;
        }
    }
#undef PROBE_READ
    return 0;
}

/*
 * Step 5: the cache probe. Neighbours i and i + 1 pass a line back and forth
 * (nc_seg_probe(): member i writes only its own ping line): in phase 0 every
 * even member i with member i + 1, in phase 1 every odd one, so every member
 * is in at most one pair at a time (the pairs of a phase run at once).
 *   P1. member i (the pair's lower) writes ping = v + 1 and waits until
 *       member i + 1's ping >= v + 1; i + 1 waits until i's ping >= v + 1
 *       and writes its own; 64 round trips per phase, values rising over
 *       both phases (phase 1 starts above phase 0's last), timed in batches
 *       of 8;
 *   P2. member i writes ns = (fastest batch) / 16 + 1: its one-way hand-off
 *       with i + 1;
 *   P3. every member waits for the ns of members 0 .. p - 2 and takes the
 *       largest: every member reads the same values, so every member gets
 *       the same cache_shared (below NUMACOLL_CACHE_SHARED_NS: 1, else 0).
 * Sharing a last-level cache is transitive (caches partition the CPUs), so
 * the neighbours tell whether all members share one. Only the fastest batch
 * counts: a preemption or a late partner only slows a batch. The lines are
 * fresh (zero) in a new segment; a reused team keeps its result.
 * With more members than CPUs (t->oversubscribed), members would time the
 * scheduler: two of them on one CPU hand a line over in a time slice, and
 * members move between CPUs. What the copies meet there is whether the CPUs
 * share a cache, so the CPUs are timed instead:
 *   P0. member 0, before exchange #2, has two threads of its own bound to
 *       each pair of neighbouring CPUs of the members' union in turn time a
 *       line's hand-off between them (nc_topo_cpu_handoff(): the same
 *       batches, the fastest counts; member 0's own binding is untouched);
 *       its record in #2 carries the largest figure and that pair of CPUs,
 *       or that it ran no P0, and every member goes by that record alone (no
 *       member times anything else). A member 0 that cannot time two CPUs
 *       (one CPU, a given topology, a binding refused, 5 s passed) sends no
 *       figure: hwloc's view stays, on every member alike.
 * Failure: a dead member, or one that did not come within PROBE_LIMIT_S
 * (it failed alone after exchange #2, or it is stopped), breaks the team
 * (the broken flag ends every other member's waits too) and creation fails
 * on every member still waiting; a member that already read every figure
 * finds the team broken at its first call. No member takes a decision from
 * figures another did not see.
 */
static int probe_caches(numacoll_team_t *t)
{
    const int p = t->p, me = t->rank;
    nc_probe_line_t *mine = nc_seg_probe(&t->seg, me);
    const uint32_t per = PROBE_BATCHES * PROBE_BATCH;
    const uint64_t deadline = nc_time_ns() + (uint64_t)PROBE_LIMIT_S * 1000000000u;
    int rc = 0, late = 0;
    for (int ph = 0; ph < 2 && !rc; ph++) {
        uint32_t v = (uint32_t)ph * per;
        if ((me & 1) == ph && me + 1 < p) {
            /* P1, P2: the pair's lower member */
            _Atomic uint32_t *peer = &nc_seg_probe(&t->seg, me + 1)->ping;
            uint64_t best = UINT64_MAX;
            for (int k = 0; k < PROBE_BATCHES && !rc; k++) {
                const uint64_t t0 = nc_time_ns();
                for (int j = 0; j < PROBE_BATCH && !rc; j++) {
                    /* relaxed: the hand-off itself (probe_wait()) */
                    atomic_store_explicit(&mine->ping, ++v, memory_order_relaxed);
                    rc = probe_wait(t, NULL, peer, v, deadline, &late);
                }
                const uint64_t dt = nc_time_ns() - t0;
                best = dt < best ? dt : best;
            }
            /* relaxed: a figure on its own, read in P3 */
            if (!rc)
                atomic_store_explicit(&mine->ns, best / (2 * PROBE_BATCH) + 1,
                                      memory_order_relaxed);
        } else if ((me & 1) != ph && me > 0) {
            /* P1: the pair's upper member answers */
            _Atomic uint32_t *peer = &nc_seg_probe(&t->seg, me - 1)->ping;
            for (uint32_t j = 0; j < per && !rc; j++)
                if (!(rc = probe_wait(t, NULL, peer, ++v, deadline, &late)))
                    atomic_store_explicit(&mine->ping, v, memory_order_relaxed);
        }
    }
    /* P3 */
    uint64_t worst = 0;
    int pair = 0;
    for (int i = 0; i + 1 < p && !rc; i++) {
        _Atomic uint64_t *w = &nc_seg_probe(&t->seg, i)->ns;
        if (!(rc = probe_wait(t, w, NULL, 1, deadline, &late))) {
            /* relaxed: the figure alone (P2) */
            const uint64_t ns = atomic_load_explicit(w, memory_order_relaxed) - 1;
            if (ns >= worst) {
                worst = ns;
                pair = i;
            }
        }
    }
    if (rc) {
        if (late)
            nc_log_error("team of %d: member %d: the cache probe (NUMACOLL_CACHE_PROBE) waited "
                         "%d s for a neighbour; this team is not created",
                         p, me, PROBE_LIMIT_S);
        return rc;
    }
    t->handoff_ns = worst > INT32_MAX ? INT32_MAX : (int)worst;
    t->handoff_pair = pair;
    t->cache_shared = worst < (uint64_t)NC_CFG_NUM(&t->cfg, CACHE_SHARED_NS);
    return 0;
}

void nc_team_cost_model(const nc_config_t *cfg, nc_xfer_model_t *x)
{
    x->shm_lat = (double)NC_CFG_NUM(cfg, COST_SHM_NS) * 1e-9;
    x->shm_byte = (double)NC_CFG_NUM(cfg, COST_SHM_PS) * 1e-12;
    x->cma_lat = (double)NC_CFG_NUM(cfg, COST_CMA_NS) * 1e-9;
    x->cma_byte = (double)NC_CFG_NUM(cfg, COST_CMA_PS) * 1e-12;
}

/* The size from which broadcasts use CMA: NUMACOLL_CMA_MIN, or the cost
 * model's switch point (model/nc_model.h) for this team's p and CPUs. */
static size_t cma_switch(const numacoll_team_t *t)
{
    if (NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_CMA)
        return 0;
    if (NC_CFG_NUM(&t->cfg, CMA_MIN))
        return (size_t)NC_CFG_NUM(&t->cfg, CMA_MIN);
    nc_xfer_model_t x;
    nc_team_cost_model(&t->cfg, &x);
    return nc_cma_switch_point(&x, t->p, t->ncpus, (int)NC_CFG_NUM(&t->cfg, CMA_COOP),
                               (size_t)NC_CFG_NUM(&t->cfg, BCAST_INLINE_MAX));
}

/* The same for the gather family, per NC_XG_* kind: NUMACOLL_GATHER_CMA_MIN
 * or the cost model's switch point for this kind of exchange, or never
 * (allgather, alltoall: nc_team_streamed_pair(), core/nc_team.h: two members
 * on one NUMA node that share no cache, agreed at step 5; there the
 * segment, streamed past the caches (t->shm_nt), beats CMA off-cache by
 * 15-35 % and loses 5-20 % to it with cache-resident buffers, measured in
 * docs/transport.md, "Without a shared cache at p = 2", while the cost
 * model's constants describe cached copies; a switch point set by hand or by
 * numacoll-tune still counts. Not for gather and scatter: there CMA was
 * 30-45 % faster with cache-resident buffers. Larger teams are not measured
 * without a shared cache and keep the model). */
static size_t xg_cma_switch(const numacoll_team_t *t, int kind)
{
    if (NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_CMA)
        return 0;
    if (NC_CFG_NUM(&t->cfg, GATHER_CMA_MIN))
        return (size_t)NC_CFG_NUM(&t->cfg, GATHER_CMA_MIN);
    if (kind != NC_XG_ROOTED && kind != NC_XG_SCATTER && nc_team_streamed_pair(t))
        return SIZE_MAX;
    nc_xfer_model_t x;
    nc_team_cost_model(&t->cfg, &x);
    return nc_xg_switch_point(&x, kind, t->p, t->ncpus, (int)NC_CFG_NUM(&t->cfg, CMA_COOP),
                              (size_t)NC_CFG_NUM(&t->cfg, GATHER_INLINE_MAX));
}

/* The sizes from which reductions use CMA ([0] reduce, [1] allreduce):
 * NUMACOLL_TRANSPORT=cma: every large call; else NUMACOLL_REDUCE_CMA_MIN
 * (reduce) and NUMACOLL_ALLREDUCE_CMA_MIN (allreduce) when set (numacoll-tune
 * measures them); else (0) reduce from nc_reduce_cma_auto() when the members
 * do not all share a cache (hwloc's agreed view, or the probe's: step 5) and
 * sit on one NUMA node (on several, the two-level plan through the slots
 * crosses between nodes less), never otherwise, and allreduce never
 * (measured: docs/reduce.md). The same on every member: the tunables, the
 * members' cpusets and NUMA nodes are, and so are the probe lines every
 * member reads (P3). */
static void reduce_cma_switch(numacoll_team_t *t)
{
    const size_t set[2] = {(size_t)NC_CFG_NUM(&t->cfg, REDUCE_CMA_MIN),
                           (size_t)NC_CFG_NUM(&t->cfg, ALLREDUCE_CMA_MIN)};
    const size_t rule[2] = {
        t->cache_shared == 0 && t->nleaders == 1 ? nc_reduce_cma_auto(t->p) : SIZE_MAX, SIZE_MAX};
    for (int k = 0; k < 2; k++)
        t->reduce_cma_min[k] = NC_CFG_NUM(&t->cfg, TRANSPORT) == NC_TRANSPORT_CMA ? 0
                               : set[k]                                        ? set[k]
                                                                               : rule[k];
}

static void team_free(numacoll_team_t *t)
{
    if (!t)
        return;
    for (int m = NC_COLL_COUNT - 1; m >= 0; m--)
        nc_coll_decls[m].fini(t);
    nc_seg_detach(&t->seg);
    if (t->budget_bytes)
        nc_budget_give(t->budget_bytes);
    nc_tree_free(&t->tree);
    free(t->numa);
    free(t->leaders);
    free(t->pids);
    free(t->cma_bounce);
    free(t);
}

/* A queue the budget shortened (s below the configured length) shortens the
 * reductions' and the gather family's slots in proportion, down to one page
 * each: the same on every member, which all know s (exchange #1). */
static void budget_scale(nc_config_t *cfg, int s)
{
    const int64_t s0 = NC_CFG_NUM(cfg, BCAST_QUEUE_LEN), f0 = NC_CFG_NUM(cfg, REDUCE_FRAG_SIZE);
    int64_t f = f0 * s / s0;
    const int64_t floor = (int64_t)nc_page_size() - 32; /* slot header: coll/nc_reduce.c */
    if (s >= s0)
        return;
    if (f0 > floor)
        cfg->v[NC_P_REDUCE_FRAG_SIZE].num = f < floor ? floor : f;
    /* the gather family's slots likewise, down to a page */
    const int64_t g0 = NC_CFG_NUM(cfg, GATHER_FRAG_SIZE), g = g0 * s / s0,
                  page = (int64_t)nc_page_size();
    if (g0 > page)
        cfg->v[NC_P_GATHER_FRAG_SIZE].num = g < page ? page : g;
}

static int team_layout(const nc_config_t *cfg0, int p, int s, nc_layout_t *l)
{
    nc_shm_need_t needs[NC_COLL_COUNT];
    nc_config_t scaled = *cfg0, *cfg = &scaled;
    budget_scale(cfg, s);
    nc_coll_shm_needs(p, cfg, nc_page_size(), needs);
    return nc_layout_compute(l, p, (size_t)NC_CFG_NUM(cfg, BCAST_FRAG_SIZE), s,
                             (int)NC_CFG_NUM(cfg, BCAST_SETS), (int)NC_CFG_NUM(cfg, SEG_LAYOUT),
                             nc_page_size(), needs, NC_COLL_COUNT);
}

/* "NUMACOLL_SHM_LIMIT=<limit>[ (a quarter of /dev/shm)]" for the budget messages. */
static void budget_limit_text(const nc_config_t *cfg, const nc_budget_state_t *st, char *buf,
                              size_t len)
{
    char lim[32];
    nc_shm_fmt_bytes(st->limit, lim, sizeof lim);
    snprintf(buf, len, "NUMACOLL_SHM_LIMIT=%s%s", lim,
             NC_CFG_NUM(cfg, SHM_LIMIT) ? "" : " (a quarter of /dev/shm)");
}


/* Rank 0, step 1: the longest queue (configured s, then halved while q still
 * divides it) whose segment fits in the node budget; the bytes are taken. */
static int budget_layout(numacoll_team_t *t, const nc_config_t *cfg, nc_layout_t *l)
{
    const int p = t->p, q = (int)NC_CFG_NUM(cfg, BCAST_SETS), s0 = (int)NC_CFG_NUM(cfg, BCAST_QUEUE_LEN);
    int s = s0, rc;
    size_t want = 0;
    nc_budget_state_t st;
    for (;;) {
        if ((rc = team_layout(cfg, p, s, l)))
            return rc;
        if (!want)
            want = l->total;
        if (!nc_budget_take(l->total, &st))
            break;
        if (nc_team_cache_evict()) /* a parked team of ours gave its bytes back */
            continue;
        if (s / 2 < q || (s / 2) % q) {
            char lim[64], used[32], need[32];
            budget_limit_text(cfg, &st, lim, sizeof lim);
            nc_shm_fmt_bytes(st.used, used, sizeof used);
            nc_shm_fmt_bytes(l->total, need, sizeof need);
            nc_log_warn_once("budget-full", "shared-memory budget %s is used up (%s in use "
                              "by %s): a team of %d needs at least %s (s=%d); such teams are not "
                              "created (in MPI: their communicators go to the MPI library). Raise "
                              "NUMACOLL_SHM_LIMIT, free communicators or lower "
                              "NUMACOLL_REDUCE_FRAG_SIZE or NUMACOLL_BCAST_FRAG_SIZE",
                              lim, used, st.shared ? "this job on this node" : "this process", p,
                              need, s);
            return NUMACOLL_ERR_NOSPACE;
        }
        s /= 2;
    }
    t->budget_bytes = l->total;
    if (s != s0) {
        char lim[64], used[32], full[32], got[32];
        budget_limit_text(cfg, &st, lim, sizeof lim);
        nc_shm_fmt_bytes(st.used, used, sizeof used);
        nc_shm_fmt_bytes(want, full, sizeof full);
        nc_shm_fmt_bytes(l->total, got, sizeof got);
        nc_log_warn_once("budget-reduced",
                         "shared-memory budget %s reached: new teams get a shorter queue (first: "
                         "p=%d s=%d, %s instead of s=%d, %s; %s in use); NUMACOLL_VERBOSE=1 "
                         "reports each",
                         lim, p, s, got, s0, full, used);
        nc_log_info(1, "team of %d: queue s=%d (%s) instead of s=%d (%s): budget %s, %s in use", p,
                    s, got, s0, full, lim, used);
    }
    return 0;
}

NUMACOLL_API int numacoll_team_create(const numacoll_bootstrap_t *bs, numacoll_team_t **out)
{
    if (!bs || !out || !bs->allgather || bs->size < 1 || bs->rank < 0 || bs->rank >= bs->size)
        return NUMACOLL_ERR_INVAL;
    *out = NULL;
    const int p = bs->size, me = bs->rank;
    numacoll_team_t *t = calloc(1, sizeof *t);
    rec1_t *r1 = calloc((size_t)p, sizeof *r1);
    rec2_t *r2 = calloc((size_t)p, sizeof *r2);
    if (t) {
        t->numa = calloc((size_t)p, sizeof *t->numa);
        t->leaders = calloc((size_t)p, sizeof *t->leaders);
        t->pids = calloc((size_t)p, sizeof *t->pids);
    }
    rec1_t mine = {0};
    int rc = 0;
    if (!t || !r1 || !r2 || !t->numa || !t->leaders || !t->pids)
        rc = NUMACOLL_ERR_NOMEM; /* still take part in the exchange below */
    else {
        t->rank = me;
        t->p = p;
    }

    /* 1. configuration, topology, segment (rank 0) */
    nc_config_t cfg;
    nc_layout_t layout;
    char err[256];
    int cfgrc = nc_team_config(&cfg, p, 1);
    if (!rc)
        rc = cfgrc;
    mine.numa = my_numa(mine.cpus);
    mine.pid = (int32_t)getpid();
    if (me == 0) {
        /* unique on the node while this process lives: pid, count, clock */
        static atomic_uint made;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        mine.id[0] = (uint64_t)(uint32_t)mine.pid << 32 | (atomic_fetch_add(&made, 1) + 1u);
        mine.id[1] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    if (NC_CFG_NUM(&cfg, TRANSPORT) != NC_TRANSPORT_SHM) {
        nc_cma_allow(); /* before the others probe us */
        mine.cma_addr = nc_cma_probe_addr();
    }
    for (int i = 0; i < NC_NAGREED; i++) {
        mine.cfg[i][0] = cfg.v[agreed[i]].num;
        mine.cfg[i][1] = cfg.v[agreed[i]].aux;
    }
    if (!rc && me == 0) {
        rc = budget_layout(t, &cfg, &layout);
        mine.queue_len = layout.s;
        if (!rc) {
            rc = nc_seg_create(&t->seg, &layout, nc_test_seq0, err, sizeof err);
            if (rc == NUMACOLL_ERR_NOSPACE)
                nc_log_warn_once("shm-full", "team of %d: %s; this team is not created (in MPI: "
                                 "the communicator goes to the MPI library)",
                                 p, err);
        }
        if (!rc) {
            snprintf(mine.segname, sizeof mine.segname, "%s", t->seg.name);
            mine.segfd = t->seg.fd;
        }
    }
    mine.status = rc;

    /* 2. exchange #1 */
    /* Out of memory for the records themselves: nothing sensible to exchange. */
    if (!r1 || !r2) {
        team_free(t);
        free(r1);
        free(r2);
        return NUMACOLL_ERR_NOMEM;
    }
    int brc = bs->allgather(bs->ctx, &mine, r1, sizeof mine);
    if (brc) {
        nc_log_error("team creation: bootstrap allgather failed (%s)", numacoll_strerror(brc));
        team_free(t);
        free(r1);
        free(r2);
        return brc;
    }
    for (int i = 0; i < p && !rc; i++)
        if (r1[i].status) /* member i failed; it logged why */
            rc = r1[i].status == NUMACOLL_ERR_NOSPACE ? NUMACOLL_ERR_NOSPACE : NUMACOLL_ERR_BOOTSTRAP;
    for (int i = 1; i < p && !rc; i++)
        for (int k = 0; k < NC_NAGREED; k++)
            if (memcmp(r1[i].cfg[k], r1[0].cfg[k], sizeof r1[0].cfg[k])) {
                if (me == 0 || me == i) {
                    const nc_param_desc_t *d = nc_param_desc(agreed[k]);
                    char a0[40], ai[40]; /* as a user writes them */
                    nc_param_value_text(agreed[k], r1[0].cfg[k][0], r1[0].cfg[k][1], a0,
                                        sizeof a0);
                    nc_param_value_text(agreed[k], r1[i].cfg[k][0], r1[i].cfg[k][1], ai,
                                        sizeof ai);
                    /* pids: one process is a different member in each of its
                     * communicators */
                    nc_log_error_once("NUMACOLL_%s differs between member 0 (pid %d: %s) and "
                                      "member %d (pid %d: %s): every member must use the same "
                                      "value; the team is not set up (in MPI: the "
                                      "communicator's calls go to the MPI library)",
                                      d->name, (int)r1[0].pid, a0, i, (int)r1[i].pid, ai);
                }
                rc = NUMACOLL_ERR_MISMATCH;
                break;
            }
    if (rc) {
        team_free(t);
        free(r1);
        free(r2);
        return rc;
    }
    if (me != 0)
        rc = team_layout(&cfg, p, r1[0].queue_len, &layout);
    t->queue_reduced = r1[0].queue_len != (int32_t)NC_CFG_NUM(&cfg, BCAST_QUEUE_LEN);
    t->id[0] = r1[0].id[0];
    t->id[1] = r1[0].id[1];
    t->asked = cfg;
    t->bind_numa = mine.numa;
    t->bind_key = cpus_key(mine.cpus);
    budget_scale(&cfg, r1[0].queue_len);
    t->cfg = cfg;
    uint64_t(*cpus)[NC_TOPO_CPUSET_WORDS] = malloc((size_t)p * sizeof *cpus);
    for (int i = 0; i < p; i++) {
        t->numa[i] = r1[i].numa;
        t->pids[i] = r1[i].pid;
        if (cpus)
            memcpy(cpus[i], r1[i].cpus, sizeof cpus[i]);
    }
    t->nleaders = nc_topo_leaders(p, t->numa, t->leaders);
    uint64_t cpu_union[NC_TOPO_CPUSET_WORDS] = {0}; /* the members' CPUs (P0's) */
    t->ncpus = cpus ? nc_topo_union_weight(p, (const uint64_t(*)[NC_TOPO_CPUSET_WORDS])cpus,
                                           cpu_union)
                    : 0;
    pthread_once(&topo_once, topo_load);
    t->cache_shared =
        cpus ? nc_topo_cache_shared(topo, p, (const uint64_t(*)[NC_TOPO_CPUSET_WORDS])cpus) : -1;
    t->numa_ratio = NC_CFG_NUM(&t->cfg, NUMA_RATIO) > 0
                        ? (double)NC_CFG_NUM(&t->cfg, NUMA_RATIO) / 1000.0
                    : topo ? nc_topo_numa_ratio(topo->topo, p, t->numa)
                           : 0;
    if (t->ncpus <= 0)
        t->ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    free(cpus);
    t->oversubscribed = p > t->ncpus;
    t->cache_probe = t->cache_probe_asked = probe_wanted(t);
    t->nt_unmeasurable = nt_unmeasurable(t);

    /* 3. attach, first touch, verify */
    nc_placement_t pl = {0};
    char why[256] = "";
    if (me != 0 && !rc)
        rc = nc_seg_attach(&t->seg, r1[0].segname, r1[0].pid, r1[0].segfd, &layout);
    if (!rc)
        rc = nc_seg_first_touch(&t->seg, me, t->numa[me], why, sizeof why);
    if (!rc) {
        if (me == 0)
            for (int i = 0; i < p; i++)
                nc_seg_leaders(&t->seg)[i] = t->leaders[i];
        nc_seg_verify(&t->seg, me, t->numa[me], &pl);
        /* The collectives' shared state is initialised before exchange #2
         * so that no member can use a collective before it is ready. */
        t->barrier_seq = nc_test_seq0;
        t->reduce_round = nc_test_seq0;
        t->gather_call = nc_test_seq0;
        for (int m = 0; m < NC_COLL_COUNT && !rc; m++)
            rc = nc_coll_decls[m].init(t);
    }
    rec2_t m2 = {.status = rc, .checked = pl.checked, .pages = pl.pages, .misplaced = pl.misplaced,
                 .cache_shared = t->cache_shared,
                 .cache_probe = t->cache_probe,
                 .cpu_ns = P0_NOT_RUN,
                 .numa_ratio = t->numa_ratio > 0 && t->numa_ratio < 1e6
                                   ? (int32_t)(t->numa_ratio * 1000.0 + 0.5)
                                   : 0};
    if (!rc)
        probe_cma(t, r1, &m2);
    /* 5, P0: member 0 times the CPUs when the members outnumber them */
    if (!rc && me == 0 && t->cache_probe && t->oversubscribed &&
        (!topo || nc_topo_cpu_handoff(topo, cpu_union, &m2.cpu_ns, m2.cpu_pair)))
        m2.cpu_ns = P0_FAILED;
    snprintf(m2.detail, sizeof m2.detail, "%s", pl.detail);
    if (rc && !why[0])
        snprintf(why, sizeof why, "%s", numacoll_strerror(rc));
    snprintf(m2.why, sizeof m2.why, "%s", why);

    /* 4. exchange #2, unpublish */
    brc = bs->allgather(bs->ctx, &m2, r2, sizeof m2);
    if (me == 0)
        nc_seg_unpublish(&t->seg);
    if (!brc)
        for (int i = 0; i < p && !rc; i++)
            if (r2[i].status) {
                /* One line for the team, from rank 0, naming the member. */
                if (me == 0 && r2[i].status == NUMACOLL_ERR_NOSPACE)
                    nc_log_warn_once("shm-full", "team of %d: member %d: %s; this team is not "
                                     "created (in MPI: the communicator goes to the MPI library)",
                                     p, i, r2[i].why);
                else if (me == 0)
                    nc_log_error_once("team of %d: member %d: %s; this team is not created (in "
                                      "MPI: the communicator goes to the MPI library)",
                                      p, i, r2[i].why);
                rc = r2[i].status == NUMACOLL_ERR_NOSPACE ? NUMACOLL_ERR_NOSPACE
                                                          : NUMACOLL_ERR_BOOTSTRAP;
            }
    if (brc || rc) {
        team_free(t);
        free(r1);
        free(r2);
        return brc ? brc : rc;
    }

    cma_agree(t, r2);
    /* Every member's hwloc answered for the same cpusets; a member whose
     * topology differs or failed to load makes it unknown for all, so that
     * the reductions' transport (reduce_cma_switch()) is the same on all. */
    for (int i = 0; i < p; i++)
        if (r2[i].cache_shared != t->cache_shared)
            t->cache_shared = -1;
    /* 5. the cache probe, if every member asked for it (probe_caches()) */
    t->wait.p = p;
    t->wait.rank = me;
    t->wait.pids = t->pids;
    t->wait.broken = &nc_seg_hdr(&t->seg)->broken;
    t->wait.spin_limit = t->oversubscribed ? 0 : (uint32_t)NC_CFG_NUM(&cfg, SPIN_COUNT);
    for (int i = 0; i < p; i++)
        t->cache_probe &= r2[i].cache_probe != 0;
    t->handoff_ns = t->handoff_pair = t->handoff_cpu[0] = t->handoff_cpu[1] = -1;
    if (t->cache_probe && r2[0].cpu_ns != P0_NOT_RUN) {
        /* P0: member 0's figure, or hwloc's view when it has none */
        t->cache_probe = r2[0].cpu_ns >= 0;
        if (t->cache_probe) {
            t->handoff_ns = r2[0].cpu_ns;
            t->handoff_cpu[0] = r2[0].cpu_pair[0];
            t->handoff_cpu[1] = r2[0].cpu_pair[1];
            t->cache_shared = t->handoff_ns < NC_CFG_NUM(&t->cfg, CACHE_SHARED_NS);
        }
    } else if (t->cache_probe && (rc = probe_caches(t))) {
        team_free(t);
        free(r1);
        free(r2);
        return rc;
    }
    /* Likewise the NUMA distance (the reductions' forwarding, coll/nc_reduce.c
     * step 5f, is chosen alike on every member from it): in thousandths,
     * unknown (0) unless every member saw the same. */
    t->numa_ratio = r2[0].numa_ratio / 1000.0;
    for (int i = 1; i < p; i++)
        if (r2[i].numa_ratio != r2[0].numa_ratio)
            t->numa_ratio = 0;
    /* Only how a member writes its own copies, never what others read: no
     * agreement needed. Streamed stores exist on x86-64 only (nc_copy_nt). */
    const int64_t nt = NC_CFG_NUM(&t->cfg, SHM_NT);
#if defined(__x86_64__)
    t->shm_nt = nt == NC_SHM_NT_ON ||
                (nt == NC_SHM_NT_AUTO && (t->cache_shared == 0 || t->nt_unmeasurable));
#else
    (void)nt;
    t->shm_nt = 0;
#endif
    t->placement = NUMACOLL_PLACEMENT_OK;
    for (int i = 0; i < p; i++) {
        t->placement_pages += r2[i].pages;
        t->misplaced += r2[i].misplaced;
        if (t->numa[i] < 0) {
            if (t->placement == NUMACOLL_PLACEMENT_OK)
                t->placement = NUMACOLL_PLACEMENT_UNKNOWN;
        } else if (!r2[i].checked && t->placement != NUMACOLL_PLACEMENT_MISPLACED) {
            t->placement = NUMACOLL_PLACEMENT_UNCHECKED;
            snprintf(t->placement_detail, sizeof t->placement_detail, "member %d: %.120s", i,
                     r2[i].detail);
        }
        if (r2[i].misplaced && t->placement != NUMACOLL_PLACEMENT_MISPLACED) {
            t->placement = NUMACOLL_PLACEMENT_MISPLACED;
            snprintf(t->placement_detail, sizeof t->placement_detail, "member %d: %.120s", i,
                     r2[i].detail);
        }
    }
    if (t->placement == NUMACOLL_PLACEMENT_UNKNOWN)
        for (int i = 0; i < p; i++)
            if (t->numa[i] < 0) {
                snprintf(t->placement_detail, sizeof t->placement_detail,
                         "member %d is not bound within one NUMA node", i);
                break;
            }

    /* Trees walk members grouped by NUMA node so that subtrees stay on a node. */
    int *order = malloc((size_t)p * sizeof *order);
    rc = order ? 0 : NUMACOLL_ERR_NOMEM;
    if (!rc) {
        int n = 0;
        for (int lead = 0; lead < p; lead++)
            if (t->leaders[lead] == lead)
                for (int i = lead; i < p; i++)
                    if (t->leaders[i] == lead)
                        order[n++] = i;
        rc = nc_tree_build(&t->tree, (nc_tree_kind_t)NC_CFG_NUM(&cfg, BCAST_TREE),
                           (int)cfg.v[NC_P_BCAST_TREE].aux, p, order);
        free(order);
    }
    t->bcast_call = t->bcast_op = nc_test_seq0;
    t->bcast_calls = NC_CALLS64_0(nc_test_seq0);
    t->ring_acked = nc_test_seq0 - 1u;
    t->inline_max = (size_t)NC_CFG_NUM(&cfg, BCAST_INLINE_MAX);
    t->frag_tw = (double)NC_CFG_NUM(&cfg, BCAST_MODEL_TW_NS) * 1000.0 /
                 (double)NC_CFG_NUM(&cfg, BCAST_MODEL_T_PS);
    t->cma_min = cma_switch(t);
    for (int k = 0; k < NC_XG_KINDS; k++)
        t->gather_cma_min[k] = xg_cma_switch(t, k);
    reduce_cma_switch(t);
    t->bcast_set = 0;
    if (rc) {
        /* Local failures here (memory) cannot be agreed on any more: the
         * others will see this member as gone if they wait for it. */
        team_free(t);
        free(r1);
        free(r2);
        return rc;
    }
    report(t, r2);
    free(r1);
    free(r2);
    *out = t;
    return 0;
}

NUMACOLL_API void numacoll_team_destroy(numacoll_team_t *t)
{
    /* A root may still wait for this member to drain a call it deferred. */
    if (t && !t->broken)
        nc_bcast_flush(t);
    team_free(t);
}

NUMACOLL_API int numacoll_team_info(const numacoll_team_t *t, numacoll_team_info_t *info)
{
    if (!t || !info)
        return NUMACOLL_ERR_INVAL;
    const nc_layout_t *l = &t->seg.l;
    memset(info, 0, sizeof *info);
    info->rank = t->rank;
    info->size = t->p;
    info->numa_node = t->numa[t->rank];
    info->leader = t->leaders[t->rank];
    info->nleaders = t->nleaders;
    info->oversubscribed = t->oversubscribed;
    info->ncpus = t->ncpus;
    info->seg_base = t->seg.base;
    info->seg_bytes = l->total;
    info->page = l->page;
    info->frag_size = l->f;
    info->queue_len = (size_t)l->s;
    info->sets = (size_t)l->q;
    info->tree = t->cfg.v[NC_P_BCAST_TREE].text;
    info->layout = t->cfg.v[NC_P_SEG_LAYOUT].text;
    info->hdr_off = l->hdr_off;
    info->hdr_bytes = l->hdr_bytes;
    info->calls_off = l->calls_off;
    info->calls_bytes = l->calls_bytes;
    info->sets_off = l->sets_off;
    info->set_bytes = l->set_bytes;
    info->rank_off = l->rank_off;
    info->rank_bytes = l->rank_bytes;
    info->ctrl_bytes = l->ctrl_bytes;
    info->buf_stride = l->buf_stride;
    info->reduce_off = l->marea_off[NC_COLL_REDUCE];
    info->reduce_bytes = l->marea_bytes[NC_COLL_REDUCE];
    info->gather_off = l->marea_off[NC_COLL_GATHER];
    info->gather_bytes = l->marea_bytes[NC_COLL_GATHER];
    info->barrier_off = l->barrier_off;
    info->barrier_bytes = l->barrier_bytes;
    info->placement = t->placement;
    info->cache_shared = t->cache_shared;
    info->cache_measured = t->cache_probe;
    info->shm_nt = t->shm_nt;
    info->handoff_ns = t->handoff_ns;
    info->misplaced_pages = t->misplaced;
    snprintf(info->placement_detail, sizeof info->placement_detail, "%s", t->placement_detail);
    return 0;
}

NUMACOLL_API int numacoll_team_leaders(const numacoll_team_t *t, int *leaders)
{
    if (!t || !leaders)
        return NUMACOLL_ERR_INVAL;
    memcpy(leaders, t->leaders, (size_t)t->p * sizeof *leaders);
    return 0;
}
