/*
 * Broadcast: the pipelined shared-memory algorithm of Kurnosov & Tokmasheva
 * (seeds-digest.md section 1), with C11 atomics, behind a ring of call
 * announcements.
 *
 * Every call c is announced in slot c % NC_CALL_RING of the call ring
 * (shm/nc_seg.h) with its root and size; messages of at most
 * NUMACOLL_BCAST_INLINE_MAX (t->inline_max <= NC_CALL_INLINE) bytes travel
 * in the slot itself ("beyond" of the paper): up to 48 bytes share the line
 * of the announcement, so a small call costs one cache-line transfer, and no
 * round trip, because a root needs the readers' acks only once per ring turn.
 * Larger messages then go through the paper's queue:
 * every member owns s fragment buffers and s control blocks, split into q
 * sets of s/q buffers; only the root's buffers carry data in a call, control
 * blocks carry fragment sizes down the tree. Every member keeps (call, op,
 * set) in step: the call counter moves once per call, (op, set) once per set
 * use of a large call.
 *
 * Root, call c:
 *   C1. wait until every other member's ack >= c - NC_CALL_RING (the slot's
 *       previous call is resolved everywhere); the lowest ack read is cached,
 *       so acks are read about once per ring turn;
 *   C2. root, bytes and the inline data, then seq = c (publish).
 * Reader, call c:
 *   C3. wait until seq == c; take root, bytes and the inline data.
 * Everyone, after C2 or C3:
 *   C4. ack = c (release), or count c as pending when earlier calls are.
 * Large messages (more than t->inline_max bytes), root, per set use:
 *   R1. wait until nreaders[set] == 0 (every reader drained its last use);
 *   R2. nreaders[set] = p-1, op[set] = seq (publish);
 *   R3. for each buffer index of the set while data remains: copy the next
 *       fragment into buffers[root][index], then write its size into
 *       controls[child][index] of each child in the tree.
 * Non-root, per set use:
 *   N1. wait until op[set] == seq;
 *   N2. for each index: wait until controls[me][index] > 0, read the size and
 *       reset it to 0, write the size into each child's control block (the
 *       children do not wait for our copy), copy buffers[root][index] out;
 *   N3. atomic decrement of nreaders[set].
 * With q >= 2 the root fills the next set while readers drain the previous.
 *
 * Deferred calls. A reader that passes 0 bytes has nothing to wait for in a
 * correct program, so, like the MPI libraries, it returns at once without
 * touching shared memory and counts the call as pending (its ack stays
 * behind). Pending calls are resolved by C3 before this member's next call
 * that needs the ring or the sets, when NC_CALL_RING/2 are pending, before a
 * barrier and at team destroy. If the root sent data after all, the reader
 * drains it and reports NUMACOLL_ERR_TRUNCATE then, naming the call: late,
 * but never lost and never a hang (a root waits at most a ring turn for the
 * ack).
 */
#include <string.h>

#include "core/nc_team.h"

static inline void copy_frag(char *buf, numacoll_copy_fn fn, void *ctx, size_t off, char *shm,
                             size_t len, int to_shm)
{
    if (buf) {
        if (to_shm)
            memcpy(shm, buf + off, len);
        else
            memcpy(buf + off, shm, len);
    } else {
        fn(ctx, off, shm, len);
    }
}

static inline void next_set(numacoll_team_t *t, int *set, uint32_t *seq)
{
    *set = t->bcast_set;
    *seq = t->bcast_op++;
    if (++t->bcast_set == t->seg.l.q)
        t->bcast_set = 0;
}

/* C4. */
static inline void ack(numacoll_team_t *t, uint32_t c)
{
    /* release: our reads of the slots up to c happen before a root rewrites
     * them; pairs with the acquire in ring_wait_free(). */
    atomic_store_explicit(&nc_seg_ack(&t->seg, t->rank)->done, c, memory_order_release);
}

/* C1. */
static int ring_wait_free(numacoll_team_t *t, uint32_t c)
{
    const uint32_t need = c - NC_CALL_RING;
    nc_backoff_t b;
    int rc;
    if ((int32_t)(t->ring_acked - need) >= 0)
        return 0;
    nc_backoff_init(&b, &t->wait);
    for (;;) {
        uint32_t low = c - 1u;
        for (int i = 0; i < t->p; i++) {
            if (i == t->rank)
                continue;
            /* acquire: pairs with member i's release in ack(). */
            uint32_t d =
                atomic_load_explicit(&nc_seg_ack(&t->seg, i)->done, memory_order_acquire);
            if ((int32_t)(d - low) < 0)
                low = d;
        }
        t->ring_acked = low;
        if ((int32_t)(low - need) >= 0)
            return 0;
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
    }
}

/* C3: wait for call c's announcement. */
static int ring_wait_call(numacoll_team_t *t, uint32_t c, nc_call_slot_t **out)
{
    nc_call_slot_t *sl = nc_seg_call(&t->seg, c);
    nc_backoff_t b;
    int rc;
    nc_backoff_init(&b, &t->wait);
    /* acquire: pairs with the root's release of seq in C2. */
    while (atomic_load_explicit(&sl->seq, memory_order_acquire) != c)
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
    *out = sl;
    return 0;
}

/* R1-R3 for a call of more than t->inline_max bytes. */
static int sets_root(numacoll_team_t *t, char *buf, size_t bytes, numacoll_copy_fn fn, void *ctx)
{
    const nc_seg_t *seg = &t->seg;
    const int root = t->rank, per_set = seg->l.s / seg->l.q;
    const size_t f = seg->l.f;
    const int nchild = nc_tree_nchildren(&t->tree, root, root);
    size_t done = 0;
    nc_backoff_t b;
    do {
        int set, rc;
        uint32_t seq;
        next_set(t, &set, &seq);
        nc_set_ctl_t *sc = nc_seg_set(seg, set);
        nc_backoff_init(&b, &t->wait);
        /* R1. acquire: pairs with the readers' release decrement in N3, so their
         * reads of our buffers and their control resets are done before we
         * overwrite either. */
        while (atomic_load_explicit(&sc->nreaders, memory_order_acquire) != 0)
            if ((rc = nc_backoff(&b)) < 0)
                return rc;
        /* R2. relaxed store published by the release of op just below. */
        atomic_store_explicit(&sc->nreaders, (uint32_t)(t->p - 1), memory_order_relaxed);
        /* release: nreaders before op; pairs with the acquire in N1. */
        atomic_store_explicit(&sc->op, seq, memory_order_release);
        /* R3. */
        for (int idx = set * per_set; idx < (set + 1) * per_set && done < bytes; idx++) {
            size_t len = bytes - done < f ? bytes - done : f;
            copy_frag(buf, fn, ctx, done, nc_seg_buf(seg, root, idx), len, 1);
            for (int c = 0; c < nchild; c++)
                /* release: the fragment's bytes before its size; pairs with the
                 * acquire in N2 of the child. */
                atomic_store_explicit(nc_seg_ctrl(seg, nc_tree_child(&t->tree, root, root, c), idx),
                                      (uint32_t)len, memory_order_release);
            done += len;
        }
    } while (done < bytes);
    return 0;
}

/* N1-N3: drain `total` bytes from root, keep the first mybytes of them. */
static int sets_reader(numacoll_team_t *t, char *buf, size_t mybytes, size_t total, int root,
                       numacoll_copy_fn fn, void *ctx)
{
    const nc_seg_t *seg = &t->seg;
    const int me = t->rank, per_set = seg->l.s / seg->l.q;
    const int nchild = nc_tree_nchildren(&t->tree, root, me);
    size_t done = 0;
    nc_backoff_t b;
    do {
        int set, rc;
        uint32_t seq;
        next_set(t, &set, &seq);
        nc_set_ctl_t *sc = nc_seg_set(seg, set);
        nc_backoff_init(&b, &t->wait);
        /* N1. acquire: pairs with the root's release of op in R2. */
        while (atomic_load_explicit(&sc->op, memory_order_acquire) != seq)
            if ((rc = nc_backoff(&b)) < 0)
                return rc;
        /* N2. */
        for (int idx = set * per_set; idx < (set + 1) * per_set && done < total; idx++) {
            _Atomic uint32_t *ctl = nc_seg_ctrl(seg, me, idx);
            uint32_t len;
            nc_backoff_init(&b, &t->wait);
            /* acquire: pairs with the parent's release of the size (R3 or N2);
             * release/acquire chains are transitive, so the root's fragment
             * bytes are visible here even when the parent is not the root. */
            while ((len = atomic_load_explicit(ctl, memory_order_acquire)) == 0)
                if ((rc = nc_backoff(&b)) < 0)
                    return rc;
            /* relaxed: ordered before the root's next write of this block by
             * our release decrement in N3. */
            atomic_store_explicit(ctl, 0, memory_order_relaxed);
            for (int c = 0; c < nchild; c++)
                /* release: forwards what we acquired; pairs with the child's
                 * acquire in N2. */
                atomic_store_explicit(nc_seg_ctrl(seg, nc_tree_child(&t->tree, root, me, c), idx),
                                      len, memory_order_release);
            if (done < mybytes)
                copy_frag(buf, fn, ctx, done, nc_seg_buf(seg, root, idx),
                          mybytes - done < len ? mybytes - done : len, 0);
            done += len;
        }
        /* N3. release: our reads of the root's buffers and the control reset
         * happen before the root's reuse; pairs with the acquire in R1. */
        atomic_fetch_sub_explicit(&sc->nreaders, 1, memory_order_release);
    } while (done < total);
    return 0;
}

/* C3 for a deferred call: the root must have sent nothing (or it was us). */
static int resolve(numacoll_team_t *t, uint32_t c)
{
    nc_call_slot_t *sl;
    int rc = ring_wait_call(t, c, &sl);
    if (rc)
        return rc;
    const int root = (int)sl->root;
    const size_t total = sl->bytes;
    if (root == t->rank || !total)
        return 0;
    nc_log_error("bcast call %u of this team: member %d (the root) sent %zu bytes, member %d "
                 "passed 0 bytes",
                 (unsigned)(c - nc_test_seq0), root, total, t->rank);
    if (total > t->inline_max && (rc = sets_reader(t, NULL, 0, total, root, NULL, NULL)))
        return rc;
    return NUMACOLL_ERR_TRUNCATE;
}

int nc_bcast_flush(numacoll_team_t *t)
{
    const uint32_t n = t->ring_pending, first = t->bcast_call - n;
    int rc = 0;
    if (!n)
        return 0;
    for (uint32_t k = 0; k < n; k++) {
        int r = resolve(t, first + k);
        if (r == NUMACOLL_ERR_TRUNCATE)
            rc = r;
        else if (r)
            return nc_team_fail(t, r);
    }
    t->ring_pending = 0;
    ack(t, t->bcast_call - 1u);
    return rc;
}

/* C4, or one more pending call. */
static inline int finish(numacoll_team_t *t, uint32_t c)
{
    if (!t->ring_pending) {
        ack(t, c);
        return 0;
    }
    if (++t->ring_pending >= NC_CALL_RING / 2)
        return nc_bcast_flush(t);
    return 0;
}

static int bcast_root(numacoll_team_t *t, char *buf, size_t bytes, numacoll_copy_fn fn,
                      void *ctx)
{
    int rc = 0, rc2;
    /* Deferred calls first when the sets are needed: they may hold a set. */
    if (bytes > t->inline_max && (rc = nc_bcast_flush(t)) && rc != NUMACOLL_ERR_TRUNCATE)
        return rc;
    const uint32_t c = t->bcast_call++;
    nc_call_slot_t *sl = nc_seg_call(&t->seg, c);
    /* C1. */
    if ((rc2 = ring_wait_free(t, c)))
        return nc_team_fail(t, rc2);
    /* C2. Plain stores: every reader of the slot's previous call is done (C1),
     * and the next ones read it after the release below. */
    sl->root = (uint32_t)t->rank;
    sl->bytes = bytes;
    if (bytes && bytes <= t->inline_max)
        copy_frag(buf, fn, ctx, 0, (char *)sl->inline_data, bytes, 1);
    /* release: root, bytes and data before seq; pairs with the acquire in C3. */
    atomic_store_explicit(&sl->seq, c, memory_order_release);
    if ((rc2 = finish(t, c)) && rc2 != NUMACOLL_ERR_TRUNCATE)
        return rc2;
    if (rc2)
        rc = rc2;
    if (bytes > t->inline_max && (rc2 = sets_root(t, buf, bytes, fn, ctx)))
        return nc_team_fail(t, rc2);
    return rc;
}

static int bcast_reader(numacoll_team_t *t, char *buf, size_t mybytes, int root,
                        numacoll_copy_fn fn, void *ctx)
{
    int rc = 0, rc2;
    if (!mybytes) {
        /* Deferred (see above). */
        t->bcast_call++;
        if (++t->ring_pending >= NC_CALL_RING / 2)
            return nc_bcast_flush(t);
        return 0;
    }
    if ((rc = nc_bcast_flush(t)) && rc != NUMACOLL_ERR_TRUNCATE)
        return rc;
    const uint32_t c = t->bcast_call++;
    nc_call_slot_t *sl;
    /* C3. */
    if ((rc2 = ring_wait_call(t, c, &sl)))
        return nc_team_fail(t, rc2);
    const int sroot = (int)sl->root;
    const size_t total = sl->bytes;
    if (sroot != root) {
        nc_log_error("bcast call %u of this team: member %d passed root %d, the root is %d",
                     (unsigned)(c - nc_test_seq0), t->rank, root, sroot);
        rc = NUMACOLL_ERR_ROOT;
        mybytes = 0; /* drain only */
    } else if (total != mybytes && !rc) {
        rc = NUMACOLL_ERR_TRUNCATE;
    }
    if (total <= t->inline_max) {
        size_t n = mybytes < total ? mybytes : total;
        if (n)
            copy_frag(buf, fn, ctx, 0, (char *)sl->inline_data, n, 0);
    }
    finish(t, c); /* nothing pending here: a plain ack */
    if (total > t->inline_max && (rc2 = sets_reader(t, buf, mybytes, total, sroot, fn, ctx)))
        return nc_team_fail(t, rc2);
    return rc;
}

static int bcast(numacoll_team_t *t, char *buf, size_t bytes, int root, numacoll_copy_fn fn,
                 void *ctx)
{
    if (!t || root < 0 || root >= t->p || (!buf && bytes && !fn))
        return NUMACOLL_ERR_INVAL;
    if (t->broken)
        return NUMACOLL_ERR_BROKEN;
    if (t->p == 1)
        return 0;
    return t->rank == root ? bcast_root(t, buf, bytes, fn, ctx)
                           : bcast_reader(t, buf, bytes, root, fn, ctx);
}

NUMACOLL_API int numacoll_bcast(numacoll_team_t *t, void *buf, size_t bytes, int root)
{
    return bcast(t, buf, bytes, root, NULL, NULL);
}

NUMACOLL_API int numacoll_bcast_cb(numacoll_team_t *t, size_t bytes, int root,
                                   numacoll_copy_fn copy, void *ctx)
{
    if (!copy)
        return NUMACOLL_ERR_INVAL;
    return bcast(t, NULL, bytes, root, copy, ctx);
}
