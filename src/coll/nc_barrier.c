/*
 * Barrier: central sense-reversing counter with sequence numbers.
 *
 *   1. seq = ++my barrier sequence;
 *   2. fetch_add(count, 1): the member that brings it to p resets count to 0
 *      and publishes release = seq;
 *   3. everyone else waits for release == seq.
 * No reset round: the sequence number tells one barrier from the next.
 */
#include "core/nc_team.h"

typedef struct nc_barrier_central {
    _Atomic uint32_t count;
    _Atomic uint32_t release NC_ALIGNED(NC_CACHELINE);
} nc_barrier_central_t;

size_t nc_barrier_shm_bytes(int p, const nc_config_t *cfg)
{
    (void)p;
    (void)cfg;
    return sizeof(nc_barrier_central_t);
}

int nc_barrier_init(struct numacoll_team *t)
{
    nc_barrier_central_t *b = (nc_barrier_central_t *)nc_seg_barrier(&t->seg);
    /* Before any member can arrive (creation ends with an exchange). */
    if (t->rank == 0)
        atomic_store_explicit(&b->release, t->barrier_seq, memory_order_relaxed);
    return 0;
}

void nc_barrier_fini(struct numacoll_team *t)
{
    (void)t;
}

NUMACOLL_API int numacoll_barrier(numacoll_team_t *t)
{
    if (!t)
        return NUMACOLL_ERR_INVAL;
    if (t->broken)
        return NUMACOLL_ERR_BROKEN;
    if (t->p == 1)
        return 0;
    nc_barrier_central_t *b = (nc_barrier_central_t *)nc_seg_barrier(&t->seg);
    uint32_t seq = ++t->barrier_seq;
    /* acq_rel: the last arriver acquires every earlier arrival (their writes
     * before the barrier), and each arrival releases its own writes. */
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == (uint32_t)t->p - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        /* release: the reset and every arrival's writes before the release;
         * pairs with the acquire below. */
        atomic_store_explicit(&b->release, seq, memory_order_release);
        return 0;
    }
    nc_backoff_t bo;
    nc_backoff_init(&bo, &t->wait);
    int rc;
    /* acquire: pairs with the last arriver's release. */
    while (atomic_load_explicit(&b->release, memory_order_acquire) != seq)
        if ((rc = nc_backoff(&bo)) < 0)
            return nc_team_fail(t, rc);
    return 0;
}
