/*
 * A team: the members, their topology, the snapshot of the configuration, the
 * shared segment and the per-member state of each collective.
 */
#ifndef NC_TEAM_H
#define NC_TEAM_H

#include <stdint.h>

#include "config/nc_config.h"
#include "model/nc_model.h" /* NC_XG_KINDS */
#include "shm/nc_seg.h"
#include "sync/nc_wait.h"
#include "tree/nc_tree.h"

struct numacoll_team {
    int rank, p;
    nc_config_t cfg;
    nc_seg_t seg;
    nc_tree_t tree;     /* bcast notification tree (order grouped by NUMA node) */
    int *numa;          /* numa[i]: member i's NUMA node OS index, -1 unknown */
    int *leaders;       /* leaders[i]: lowest rank on member i's node */
    int32_t *pids;
    int nleaders;
    int ncpus;          /* CPUs the members may run on (union of their masks) */
    int oversubscribed;
    nc_waitctx_t wait;
    int broken;         /* a fatal error happened: every later call fails */
    uint64_t budget_bytes; /* rank 0: bytes taken from the node budget (nc_shm.h) */
    int queue_reduced;     /* the budget gave a shorter queue than configured */

    /* bcast: identical on every member; call: once per call, op: once per set use */
    uint32_t bcast_call;
    uint64_t bcast_calls;  /* the same count in 64 bits (CMA: coll/nc_bcast.c) */
    uint32_t bcast_op;
    int bcast_set;
    uint32_t ring_acked;   /* lowest ack of the others, as last read (roots only) */
    uint32_t ring_pending; /* calls before bcast_call not yet resolved (see nc_bcast.c) */
    int defer_root[NC_CALL_RING]; /* the root a pending call c passed, at c % NC_CALL_RING */
    size_t inline_max;     /* NUMACOLL_BCAST_INLINE_MAX */
    double frag_tw;        /* t_w / t in bytes: the per-call fragment (nc_model_call_frag) */
    size_t frag_m, frag_f; /* the last size a root cut, and its fragment */
    int shm_nt;          /* bulk copies into the segment stream past the cache (NUMACOLL_SHM_NT) */

    /* barrier: per-algorithm state (coll/nc_barrier.c) */
    uint32_t barrier_seq;
    void *barrier_state;

    /* reductions: the round counter, the same on every member, and this
     * member's private view (coll/nc_reduce.c) */
    uint32_t reduce_round;
    void *reduce_state;

    /* the gather family: the call counter, the same on every member, and
     * this member's private view (coll/nc_gather.c) */
    uint32_t gather_call;
    void *gather_state;

    /* CMA (shm/nc_cma.h): every member may read and write every other's
     * memory; why not, if not; a bounce buffer for callback readers */
    int cma;
    size_t cma_min;        /* broadcasts from this size use CMA (coll/nc_bcast.c) */
    uint64_t cma_calls;    /* broadcasts this member took part in by CMA */
    size_t gather_cma_min[NC_XG_KINDS]; /* gather-family blocks from this size use CMA,
                                           per NC_XG_* kind (coll/nc_gather.c) */
    uint64_t gather_cma;   /* gather-family blocks this member sent or read by CMA */
    uint64_t gather_fwd;   /* allgather blocks this member carried into its NUMA node */
    uint64_t gather_via;   /* allgather blocks this member read from a member that carried them */
    size_t reduce_cma_min[2]; /* reductions from this size use CMA (coll/nc_reduce.c):
                                 [0] reduce, [1] allreduce */
    int cache_shared;      /* every member's CPUs under one cache: 1, 0, -1 unknown; hwloc's,
                              or measured (cache_probe) */
    int cache_probe;       /* 1 if the team measured its caches (step 5 of nc_team.c) */
    int cache_probe_asked; /* this member asked for it (NUMACOLL_CACHE_PROBE, probe_wanted()) */
    int nt_unmeasurable;   /* more members than CPUs where auto would measure: copies
                              streamed whatever the caches (nt_unmeasurable(), nc_team.c) */
    int handoff_ns;        /* measured: the slowest neighbours' one-way hand-off, ns */
    int handoff_pair;      /* ... between members handoff_pair and handoff_pair + 1, -1 when
                              member 0 timed CPUs (more members than CPUs: step 5, P0) */
    int handoff_cpu[2];    /* ... then between these CPUs (OS indices) */
    double numa_ratio;     /* remote / local NUMA distance between the members' nodes
                              (nc_topo_numa_ratio): this member's view until the
                              collectives' init, then agreed (0 unknown) */
    uint64_t reduce_cma;   /* reductions this member took part in by CMA */
    uint64_t reduce_fwd;   /* allreduce slices this member forwarded or read forwarded (5f) */
    uint64_t reduce_lines; /* reductions this member took part in by a call line */
    char cma_why[320];
    void *cma_bounce;

    /* team-wide placement result (numacoll_team_info) */
    int placement;
    long placement_pages, misplaced;
    char placement_detail[160];

    /* The team cache (core/nc_team_cache.c): the team's name, the same on
     * every member; the configuration it was made from (before the budget
     * shortened anything); this member's binding then. */
    uint64_t id[2];
    nc_config_t asked;
    int bind_numa;
    uint64_t bind_key;
    uint64_t parked;       /* when it entered the cache (its age there) */
};

/* Two members on one NUMA node that share no cache (agreed at creation:
 * hwloc's view or the probe's): the reduce takes quarter rounds
 * (coll/nc_reduce.c red_chunk()), allgather and alltoall stream through the
 * segment instead of the cost model's CMA (core/nc_team.c); measured in
 * docs/reduce.md and docs/transport.md. The same on every member. */
static inline int nc_team_streamed_pair(const struct numacoll_team *t)
{
    return t->p == 2 && t->cache_shared == 0 && t->nleaders == 1;
}

/* Reductions' automatic switch to CMA (NUMACOLL_REDUCE_CMA_MIN=0): reduce
 * calls from this size when the team's p members share no cache
 * (core/nc_team.c). At p = 2 never: whole rounds through the slots
 * (coll/nc_reduce.c red_chunk()) are faster there with buffers out of the
 * caches (docs/reduce.md); larger teams are not measured without a shared
 * cache and keep 128 KiB. */
static inline size_t nc_reduce_cma_auto(int p)
{
    return p == 2 ? SIZE_MAX : (size_t)128 << 10;
}

/* Test hook: the first sequence number of every counter of teams created
 * afterwards, to exercise wrap-around (tests set it near UINT32_MAX). */
extern uint32_t nc_test_seq0;

/* The gather family's part of a failure (coll/nc_gather.c, D2). */
void nc_gather_abandon(struct numacoll_team *t);

/* The reductions' part of a failure (coll/nc_reduce.c, X8). */
void nc_reduce_abandon(struct numacoll_team *t);

/* Called by collectives on a fatal error: the team is unusable from now on. */
static inline int nc_team_fail(struct numacoll_team *t, int rc)
{
    if (!t->broken) {
        nc_gather_abandon(t);
        nc_reduce_abandon(t);
    }
    t->broken = 1;
    if (rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN)
        nc_wait_break(&t->wait);
    return rc;
}

struct nc_xfer_model;
/* The transport cost model's constants from a configuration (NUMACOLL_COST_*). */
void nc_team_cost_model(const nc_config_t *cfg, struct nc_xfer_model *x);

/* Resolve the calls this member deferred (coll/nc_bcast.c). Returns 0, an
 * error of a deferred call (nc_call_error(): the team stays usable, the
 * caller goes on and reports it after its own call) or the team's failure. */
int nc_bcast_flush(struct numacoll_team *t);


/* The configuration a team of p is made from: the process's snapshot, the
 * tune file's section for p, checked (logged once when log and bad). */
int nc_team_config(nc_config_t *cfg, int p, int log);
/* This member's NUMA node (-1 unbound) and a key of its CPU mask. */
void nc_team_binding(int *numa, uint64_t *key);

/* ---- the team cache (core/nc_team_cache.c) ----------------------------------
 * A team whose communicator is freed is kept (parked), up to
 * NUMACOLL_TEAM_CACHE per process, and taken again by a later team of the
 * same processes in the same order: no new segment, first touch or
 * placement check. */

/* Collective over bs, before numacoll_team_create: 1 and *out when every
 * member offered the same parked team, 0 when not (then create one),
 * negative when the exchange failed. */
int nc_team_cache_take(const numacoll_bootstrap_t *bs, struct numacoll_team **out);
/* Local: park t (its deferred calls resolved), or destroy it when it is
 * broken, a team of one, or the cache is off; the oldest goes when full. */
void nc_team_cache_put(struct numacoll_team *t);
/* Local: destroy the oldest parked team that holds node budget; 1 if one was. */
int nc_team_cache_evict(void);
/* Local: destroy every parked team (MPI_Finalize). */
void nc_team_cache_clear(void);


#endif
