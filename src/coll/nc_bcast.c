/*
 * Broadcast: the pipelined shared-memory algorithm of Kurnosov & Tokmasheva
 * (seeds-digest.md section 1), with C11 atomics.
 *
 * Every member owns a queue of s fragment buffers and s control blocks; the
 * queue is split into q sets of s/q buffers. Only the root's buffers carry
 * data in a call; control blocks carry fragment sizes down the tree. Each
 * member keeps (op, set) in step: every call uses one or more sets in turn,
 * and every member advances its copy once per set use.
 *
 * Root, per set use:
 *   R1. wait until nreaders[set] == 0 (every reader drained its last use);
 *   R2. nreaders[set] = p-1, bytes[set] = total, op[set] = seq (publish);
 *   R3. for each buffer index of the set while data remains: copy the next
 *       fragment into buffers[root][index], then write its size into
 *       controls[child][index] of each child in the tree.
 * Non-root, per set use:
 *   N1. wait until op[set] == seq; read the root's total bytes;
 *   N2. for each index: wait until controls[me][index] > 0, read the size and
 *       reset it to 0, write the size into each child's control block (the
 *       children do not wait for our copy), copy buffers[root][index] out;
 *   N3. atomic decrement of nreaders[set].
 * With q >= 2 the root fills the next set while readers drain the previous.
 * A zero-byte call still publishes one set, so a member that expects bytes
 * learns it got none (TRUNCATE) instead of waiting for ever.
 *
 * Small messages (<= NC_SET_INLINE bytes, "beyond" of the paper): in R2 the
 * root also copies the data into the set's op line, and in N1 the readers
 * take it from there: one cache-line transfer instead of three (op, control
 * block, buffer), no tree notifications, no queue buffer.
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

static int bcast_root(numacoll_team_t *t, char *buf, size_t bytes, numacoll_copy_fn fn,
                      void *ctx)
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
                return nc_team_fail(t, rc);
        /* R2. relaxed stores published by the release of op just below. */
        atomic_store_explicit(&sc->nreaders, (uint32_t)(t->p - 1), memory_order_relaxed);
        atomic_store_explicit(&sc->bytes, bytes, memory_order_relaxed);
        if (bytes <= NC_SET_INLINE) {
            /* Plain stores: every reader of this line's previous use is done
             * (R1), and the next readers read it after the release below. */
            if (bytes)
                copy_frag(buf, fn, ctx, 0, (char *)sc->inline_data, bytes, 1);
            atomic_store_explicit(&sc->op, seq, memory_order_release);
            return 0;
        }
        /* release: nreaders and bytes before op; pairs with the acquire in N1. */
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

static int bcast_reader(numacoll_team_t *t, char *buf, size_t mybytes, int root,
                        numacoll_copy_fn fn, void *ctx)
{
    const nc_seg_t *seg = &t->seg;
    const int me = t->rank, per_set = seg->l.s / seg->l.q;
    const int nchild = nc_tree_nchildren(&t->tree, root, me);
    size_t done = 0, total;
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
                return nc_team_fail(t, rc);
        total = (size_t)atomic_load_explicit(&sc->bytes, memory_order_relaxed);
        if (total <= NC_SET_INLINE) {
            size_t n = mybytes < total ? mybytes : total;
            if (n)
                copy_frag(buf, fn, ctx, 0, (char *)sc->inline_data, n, 0);
            /* N3 for the inline case: release pairs with the root's R1. */
            atomic_fetch_sub_explicit(&sc->nreaders, 1, memory_order_release);
            break;
        }
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
                    return nc_team_fail(t, rc);
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
    return total == mybytes ? 0 : NUMACOLL_ERR_TRUNCATE;
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
