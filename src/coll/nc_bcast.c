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
 *   C2a. claim the call: exchange its claim word (shm/nc_seg.h) for c's
 *       64-bit number. A member that finds that number there already is not
 *       the root after all (two members passed themselves as the root): it
 *       takes the call as a reader that keeps nothing and gets
 *       NUMACOLL_ERR_ROOT. The claim lines are not the seq line, which the
 *       readers poll, and a fixed root or roots in turn find the line in
 *       their own cache, so a claim costs a root no line transfer. A call
 *       of at most t->inline_max bytes (nothing but the slot to write, no
 *       wait after it) claims with a plain load and store instead of the
 *       locked exchange, whose full fence cost such a call 10-35 ns (10-30 %,
 *       measured at p = 2; the plain claim costs 2-5 ns): two such roots
 *       that claim within the same few instructions (or one preempted
 *       between its load and its store) both go on, and their readers may
 *       get either's bytes, or a mix. A small root racing a large one that
 *       closely may rewrite the slot under it: a CMA root that finds the
 *       slot rewritten breaks the team (NUMACOLL_ERR_ROOT), a root through
 *       the sets may wait for readers that took the call as small;
 *   C2. root, bytes and the inline data, then seq = c (publish).
 * Reader, call c:
 *   C3. wait until seq == c; take root, bytes and the inline data.
 *   C3b. a wait that has gone slow (nc_backoff() yields) stores waiting = c
 *       in the member's ack line, and every 32 yields reads the others'. When
 *       every other member waits for c too, nobody will publish it (a member
 *       waiting in C3 is no root of c): compare-and-swap seq from the
 *       previous call's (c - NC_CALL_RING, or its noroot value) to
 *       noroot(c). Every waiter that sees noroot(c) gets NUMACOLL_ERR_ROOT
 *       and goes on as after C3.
 * Everyone, after C2 or C3:
 *   C4. ack = c (release), or count c as pending when earlier calls are.
 * The claim word and seq's noroot value carry no data (the release of
 * seq = c in C2 does), so C2a and C3b are relaxed: C2a decides who came
 * first in the claim word's modification order. The waiting words are
 * relaxed too: a word read as c (a 64-bit call number) means its member
 * entered C3 for c, so it is no root of c; it leaves C3 only after seq
 * reached c or noroot(c), which makes C3b's compare-and-swap fail, so a
 * snapshot of the words that is already old decides nothing wrong.
 * Large messages (more than t->inline_max bytes), root, per set use:
 *   R1. wait until nreaders[set] == 0 (every reader drained its last use);
 *   R2. nreaders[set] = p-1, op[set] = seq (publish);
 *   R3. for each buffer index of the set while data remains: copy the next
 *       fragment into buffers[root][index], then write its size into
 *       controls[child][index] of each child in the tree. A fragment is at
 *       most f bytes; the root cuts each call by the time model
 *       (nc_model_call_frag(): about sqrt(m t_w / t) bytes for m bytes, at
 *       most s fragments, NUMACOLL_BCAST_MODEL_*), so a queue of large
 *       buffers still pipelines a small message. Readers take each
 *       fragment's size from its control block and need not know the cut.
 *       When the members do not all share a cache (t->shm_nt,
 *       NUMACOLL_SHM_NT) and the root passed a buffer (not a callback), the
 *       root copies with non-temporal stores, which go to memory past its
 *       cache, so readers stream the fragment from memory instead of
 *       fetching each line from the root's cache; those stores are weakly
 *       ordered, so an sfence (nc_copy_nt_fence()) precedes the release of
 *       the size.
 * Non-root, per set use:
 *   N1. wait until op[set] == seq;
 *   N2. for each index: wait until controls[me][index] > 0, read the size and
 *       reset it to 0, write the size into each child's control block (the
 *       children do not wait for our copy), copy buffers[root][index] out;
 *   N3. atomic decrement of nreaders[set].
 * With q >= 2 the root fills the next set while readers drain the previous.
 *
 * Single copy (CMA, shm/nc_cma.h). A call of more than t->inline_max bytes
 * whose root passed a buffer (not a callback) and whose size is at least the
 * team's switch point (t->cma_min: NUMACOLL_CMA_MIN or the cost model's, see
 * model/nc_model.h) goes from the root's buffer straight into the readers'
 * with process_vm_readv/writev when the team can use CMA (probed at creation).
 * Nothing is staged and the sets are not used. The root shares the copying:
 * it writes the first w bytes (w = bytes/p, cache-line multiple; 0 with
 * NUMACOLL_CMA_COOP=0) into every reader while each reader reads the rest,
 * so every core copies (p-1)/p of the message. Each member's ack line holds
 * its part (post, fin, addr, len: shm/nc_seg.h).
 * Root, call c (after C1):
 *   K1. C2 with the slot saying CMA, the root's buffer address and w;
 *   K2. if w > 0: for every reader in rank order after us, wait until it
 *       posts (post == c) or says it takes no part (fin >= c, Z) (acquire);
 *       write [0, min(w, its len)) into its buffer (none if it posted no
 *       buffer);
 *   K3. if w > 0: ferr = c if a share was not written (a fault on the
 *       reader's side, or K2 ended by an error), then fin = c (release).
 *       Every way out of K2 goes through K3;
 *   K4. wait until every reader's fin >= c (acquire): nobody reads our
 *       buffer any more, the caller may change it.
 * Reader, call c (after C3):
 *   K5. if w > 0: addr, len = its buffer and size (0, 0 with a callback or
 *       nothing to keep), then post = c (release);
 *   K6. read [our share's end, min(bytes, mybytes)) from the root's buffer
 *       (through a bounce buffer for a callback);
 *   K7. if w > 0: wait until the root's fin >= c (acquire): its writes into
 *       our buffer are complete, and it has taken our post, so a later call
 *       may post again; if the root says its write faulted, read the share;
 *   K8. fin = c (release): we read the root's buffer no more.
 * Reader that passes 0 bytes (deferred, see below):
 *   Z.  fin = c (release) at once: it keeps nothing and reads nothing.
 * Pairs: post K5 -> K2; reader's fin K8 or Z -> K2, K4; root's fin K3 -> K7.
 * post and fin hold 64-bit call numbers (the team's count of calls), so no
 * old value is taken for a new one. fin is compared with >=, since a fast
 * member may finish later calls before a slow one looks; post with ==, since
 * a reader posts again only after K7 of this call, when the root took it.
 * Waits for fin end only when that member died (wait_fin()). Errors of a
 * member's own copies (NUMACOLL_ERR_FAULT: its buffer is not accessible;
 * NOTSUP) fail that member's call only: the protocol is complete everywhere.
 *
 * Deferred calls. A reader that passes 0 bytes has nothing to wait for in a
 * correct program, so, like the MPI libraries, it returns at once without
 * touching shared memory and counts the call as pending (its ack stays
 * behind). Pending calls are resolved by C3 before this member's next call
 * that needs the ring or the sets, when NC_CALL_RING/2 are pending, before a
 * barrier and at team destroy. If the root sent data after all, the reader
 * drains it and reports NUMACOLL_ERR_TRUNCATE then, naming the call; if the
 * root is not the one it passed (kept in t->defer_root), NUMACOLL_ERR_ROOT:
 * late, never a hang (a root waits at most a ring turn for the ack), and
 * lost only where nobody can be told (team destroy, a team parked for reuse:
 * the log line stays). When nobody is the root of a call that a member
 * deferred, the others wait in C3 until that member resolves it (C3b needs
 * every member waiting): a program that then waits for them elsewhere
 * first hangs, as it would in the MPI libraries.
 */
#include <stdlib.h>
#include <string.h>

#include "core/nc_team.h"
#include "model/nc_model.h"
#include "shm/nc_cma.h"

/* What a CMA call's slot carries in place of inline data (K1). */
typedef struct cma_call {
    uint64_t magic, addr, share;
} cma_call_t;
#define CMA_CALL UINT64_C(0x636d6163616c6c21) /* "cmacall!"; anything else: the sets */
#define CMA_BOUNCE ((size_t)256 << 10)        /* a callback reader's chunk */

static inline void copy_frag(char *buf, numacoll_copy_fn fn, void *ctx, size_t off, char *shm,
                             size_t len, int to_shm)
{
    if (buf) {
        if (to_shm)
            nc_copy(shm, buf + off, len);
        else
            nc_copy(buf + off, shm, len);
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

static inline nc_call_ack_t *line(const numacoll_team_t *t, int rank)
{
    return nc_seg_ack(&t->seg, rank);
}

/* The 64-bit number of call c (one of the last 2^32 calls): post, fin and
 * waiting hold these, so a value is never mistaken for a later one. */
static inline uint64_t call64(const numacoll_team_t *t, uint32_t c)
{
    return t->bcast_calls - (uint32_t)(t->bcast_call - c);
}

/* Does seq hold the end of the call before c in its slot? (Then call c may
 * be given up, C3b.) */
static inline int slot_free(uint32_t v, uint32_t c)
{
    return v == c - NC_CALL_RING || v == nc_call_noroot(c - NC_CALL_RING);
}

/* C2a: 1 if we claimed call c, 0 if another member did first. */
static inline int ring_claim(const numacoll_team_t *t, uint32_t c, size_t bytes)
{
    const uint64_t c64 = call64(t, c);
    _Atomic uint64_t *w = nc_seg_claim(&t->seg, c64);
    /* relaxed: see "The claim word" at the top. */
    if (bytes > t->inline_max)
        return atomic_exchange_explicit(w, c64, memory_order_relaxed) != c64;
    if (atomic_load_explicit(w, memory_order_relaxed) == c64)
        return 0;
    atomic_store_explicit(w, c64, memory_order_relaxed);
    return 1;
}

/* C3b: every other member waits for call c (c64) as a reader. */
static int all_waiting(const numacoll_team_t *t, uint64_t c64)
{
    for (int i = 0; i < t->p; i++)
        /* relaxed: see "The waiting words" at the top. */
        if (i != t->rank && atomic_load_explicit(&line(t, i)->waiting, memory_order_relaxed) != c64)
            return 0;
    return 1;
}

/* C3 (and C3b): wait for call c's announcement; NUMACOLL_ERR_ROOT if no
 * member is its root. */
static int ring_wait_call(numacoll_team_t *t, uint32_t c, nc_call_slot_t **out)
{
    nc_call_slot_t *sl = nc_seg_call(&t->seg, c);
    const uint64_t c64 = call64(t, c);
    nc_backoff_t b;
    uint32_t v, checked = 0;
    int rc;
    nc_backoff_init(&b, &t->wait);
    /* acquire: pairs with the root's release of seq in C2. */
    while ((v = atomic_load_explicit(&sl->seq, memory_order_acquire)) != c) {
        if (v == nc_call_noroot(c))
            return NUMACOLL_ERR_ROOT;
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
        if (b.yields == checked)
            continue;
        /* C3b, once per slow round that yielded */
        if (!checked)
            atomic_store_explicit(&line(t, t->rank)->waiting, c64, memory_order_relaxed);
        checked = b.yields;
        if (!(checked & 31) && slot_free(v, c) && all_waiting(t, c64) &&
            atomic_compare_exchange_strong_explicit(&sl->seq, &v, nc_call_noroot(c),
                                                    memory_order_relaxed, memory_order_relaxed))
            return NUMACOLL_ERR_ROOT; /* the caller says so */
    }
    *out = sl;
    return 0;
}

/* R1-R3 for a call of more than t->inline_max bytes. */
static int sets_root(numacoll_team_t *t, char *buf, size_t bytes, numacoll_copy_fn fn, void *ctx)
{
    const nc_seg_t *seg = &t->seg;
    const int root = t->rank, per_set = seg->l.s / seg->l.q;
    if (bytes != t->frag_m) {
        t->frag_m = bytes;
        t->frag_f = nc_model_call_frag(bytes, seg->l.f, (size_t)seg->l.s, t->frag_tw);
    }
    const size_t f = t->frag_f;
    const int nt = t->shm_nt;
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
            if (nt && buf) {
                nc_copy_nt(nc_seg_buf(seg, root, idx), buf + done, len);
                nc_copy_nt_fence(); /* the streamed bytes before the release below */
            } else {
                copy_frag(buf, fn, ctx, done, nc_seg_buf(seg, root, idx), len, 1);
            }
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

/* Is call sl (more than inline_max bytes) a CMA call? Its parameters if so. */
static inline int cma_of(const nc_call_slot_t *sl, cma_call_t *cc)
{
    memcpy(cc, sl->inline_data, sizeof *cc);
    return cc->magic == CMA_CALL;
}

static inline int use_cma(const numacoll_team_t *t, const char *buf, size_t bytes)
{
    return t->cma && buf && bytes > t->inline_max && bytes >= t->cma_min;
}

static inline size_t cma_share(const numacoll_team_t *t, size_t bytes)
{
    size_t w = bytes / (size_t)t->p / NC_CACHELINE * NC_CACHELINE;
    return NC_CFG_NUM(&t->cfg, CMA_COOP) && w >= NC_CMA_SHARE_MIN ? w : 0;
}

/* Wait until member i's fin >= c. Only member i's own death ends the wait:
 * a team broken by someone else's still has i finishing this call (its own
 * waits end and it publishes fin on every way out), and stopping earlier
 * would let i touch our buffer after we returned. */
static int wait_fin(numacoll_team_t *t, int i, uint64_t c)
{
    nc_backoff_t b;
    nc_backoff_init(&b, &t->wait);
    /* acquire: pairs with member i's release of fin in K3, K8 or Z. */
    while (atomic_load_explicit(&line(t, i)->fin, memory_order_acquire) < c)
        if (nc_backoff(&b) < 0) {
            if (nc_pid_dead(t->pids[i]))
                return NUMACOLL_ERR_PEER_DEAD;
            nc_backoff_init(&b, &t->wait);
        }
    return 0;
}

/* The bounce buffer of CMA_BOUNCE bytes, allocated at first use; NULL if
 * there is no memory. */
static char *bounce(numacoll_team_t *t)
{
    if (!t->cma_bounce)
        t->cma_bounce = malloc(CMA_BOUNCE);
    return t->cma_bounce;
}

/* Is [p, p + n) of our own memory readable? (After a write into a reader
 * faulted: whose buffer was it?) */
static int own_readable(numacoll_team_t *t, const char *p, size_t n)
{
    if (!bounce(t))
        return 1; /* cannot tell: blame the reader, it re-reads and finds out */
    for (size_t off = 0; off < n; off += CMA_BOUNCE) {
        size_t k = n - off < CMA_BOUNCE ? n - off : CMA_BOUNCE;
        if (nc_cma_read(t->pids[t->rank], t->cma_bounce, (uint64_t)(uintptr_t)(p + off), k))
            return 0;
    }
    return 1;
}

/* K2-K4. Every way out after K1 publishes fin (K3), so the readers are never
 * left waiting; errors come back after K4. */
static int cma_root(numacoll_team_t *t, const char *buf, uint32_t c32, size_t w)
{
    nc_call_ack_t *me = line(t, t->rank);
    const uint64_t c = call64(t, c32);
    int rc = 0;
    if (w) {
        /* K2. Serve the readers in rank order after us; one that finished
         * without posting (a zero-byte reader, Z) keeps nothing. A failed
         * wait (a member died) or write ends the serving: ferr tells the
         * readers to read their share themselves. */
        nc_backoff_t b;
        for (int k = 1; k < t->p && !rc; k++) {
            const int i = (t->rank + k) % t->p;
            nc_call_ack_t *r = line(t, i);
            nc_backoff_init(&b, &t->wait);
            /* acquire: pairs with reader i's release of post in K5 (or of
             * fin in Z). */
            while (atomic_load_explicit(&r->post, memory_order_acquire) != c &&
                   atomic_load_explicit(&r->fin, memory_order_acquire) < c)
                if ((rc = nc_backoff(&b)) < 0)
                    break;
            if (rc || atomic_load_explicit(&r->post, memory_order_relaxed) != c)
                continue;
            size_t n = r->len < w ? (size_t)r->len : w;
            int wrc = r->addr && n ? nc_cma_write(t->pids[i], r->addr, buf, n) : 0;
            if (wrc == NUMACOLL_ERR_FAULT && own_readable(t, buf, n))
                me->ferr = c; /* the reader's buffer: it re-reads and finds out */
            else if (wrc)
                rc = wrc;
        }
        if (rc)
            me->ferr = c;
        /* K3. release: our writes into the readers' buffers (and ferr) before
         * fin; pairs with the acquire in K7. */
        atomic_store_explicit(&me->fin, c, memory_order_release);
    }
    /* K4. */
    for (int i = 0; i < t->p; i++) {
        int wrc;
        if (i != t->rank && (wrc = wait_fin(t, i, c)) && !rc)
            rc = wrc;
    }
    return rc;
}

/* Read [from, to) of the root's buffer at raddr into buf, or through the
 * bounce buffer into the callback. */
static int cma_read_range(numacoll_team_t *t, int root, uint64_t raddr, char *buf,
                          numacoll_copy_fn fn, void *ctx, size_t from, size_t to)
{
    if (from >= to)
        return 0;
    if (buf)
        return nc_cma_read(t->pids[root], buf + from, raddr + from, to - from);
    if (!bounce(t))
        return NUMACOLL_ERR_NOMEM;
    for (size_t off = from; off < to; off += CMA_BOUNCE) {
        size_t n = to - off < CMA_BOUNCE ? to - off : CMA_BOUNCE;
        int rc = nc_cma_read(t->pids[root], t->cma_bounce, raddr + off, n);
        if (rc)
            return rc;
        fn(ctx, off, t->cma_bounce, n);
    }
    return 0;
}

/* K5 (before the ack) and, in cma_reader_copy(), K6-K8. keep: the bytes this
 * member keeps (0: it only takes part). */
static void cma_reader_post(numacoll_team_t *t, const cma_call_t *cc, uint32_t c, char *buf,
                            size_t keep)
{
    nc_call_ack_t *me = line(t, t->rank);
    if (!cc->share)
        return;
    me->addr = buf && keep ? (uint64_t)(uintptr_t)buf : 0;
    me->len = buf ? keep : 0;
    /* release: addr and len before post; pairs with the root's acquire in K2. */
    atomic_store_explicit(&me->post, call64(t, c), memory_order_release);
}

static int cma_reader_copy(numacoll_team_t *t, const cma_call_t *cc, uint32_t c32, int root,
                           char *buf, numacoll_copy_fn fn, void *ctx, size_t keep)
{
    nc_call_ack_t *me = line(t, t->rank);
    const uint64_t c = call64(t, c32);
    const int written = cc->share && buf && keep; /* the root writes our share */
    const size_t start = written ? (cc->share < keep ? (size_t)cc->share : keep) : 0;
    /* K6. */
    int rc = cma_read_range(t, root, cc->addr, buf, fn, ctx, start, keep), rc2;
    if (rc == NUMACOLL_ERR_PEER_DEAD)
        return rc;
    /* K7. */
    if (cc->share && (rc2 = wait_fin(t, root, c)))
        return rc2;
    if (written && line(t, root)->ferr == c && !rc) /* the root did not write our share */
        rc = cma_read_range(t, root, cc->addr, buf, fn, ctx, 0, start);
    /* K8. release: our reads of the root's buffer are done before it returns;
     * pairs with the acquire in K4. */
    atomic_store_explicit(&me->fin, c, memory_order_release);
    return rc;
}

/* Z: a reader that passes 0 bytes and defers the call (below) says at once
 * that it will neither read the root's buffer nor take a share, in case the
 * root (wrongly) sends data by CMA and waits for it in K2 and K4. */
static inline void cma_zero(numacoll_team_t *t, uint32_t c)
{
    if (t->cma)
        /* release: pairs with the root's acquires of fin in K2 and K4. */
        atomic_store_explicit(&line(t, t->rank)->fin, call64(t, c), memory_order_release);
}

/* C3 for a deferred call: the root must have sent nothing (or it was us). */
static int resolve(numacoll_team_t *t, uint32_t c)
{
    nc_call_slot_t *sl;
    const int passed = t->defer_root[c % NC_CALL_RING];
    int rc = ring_wait_call(t, c, &sl);
    if (rc == NUMACOLL_ERR_ROOT)
        nc_log_error("bcast call %u of this team: member %d passed 0 bytes and root %d, but no "
                     "member was the root",
                     (unsigned)(c - nc_test_seq0), t->rank, passed);
    if (rc)
        return rc;
    const int root = (int)sl->root;
    const size_t total = sl->bytes;
    if (root == t->rank || (root == passed && !total))
        return 0; /* our own call as its root (pending behind a deferred one), or nothing */
    if (root != passed)
        nc_log_error("bcast call %u of this team: member %d passed 0 bytes and root %d, the root "
                     "is %d",
                     (unsigned)(c - nc_test_seq0), t->rank, passed, root);
    else
        nc_log_error("bcast call %u of this team: member %d (the root) sent %zu bytes, member %d "
                     "passed 0 bytes",
                     (unsigned)(c - nc_test_seq0), root, total, t->rank);
    cma_call_t cc;
    if (total > t->inline_max && cma_of(sl, &cc)) {
        /* nothing to drain: Z told the root when the call was deferred */
    } else if (total > t->inline_max && (rc = sets_reader(t, NULL, 0, total, root, NULL, NULL)))
        return rc;
    return root != passed ? NUMACOLL_ERR_ROOT : NUMACOLL_ERR_TRUNCATE;
}

int nc_bcast_flush(numacoll_team_t *t)
{
    const uint32_t n = t->ring_pending, first = t->bcast_call - n;
    int rc = 0;
    if (!n)
        return 0;
    for (uint32_t k = 0; k < n; k++) {
        int r = resolve(t, first + k);
        if (nc_call_error(r))
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

static int reader_call(numacoll_team_t *t, char *buf, size_t mybytes, int root,
                       numacoll_copy_fn fn, void *ctx);

static int bcast_root(numacoll_team_t *t, char *buf, size_t bytes, numacoll_copy_fn fn,
                      void *ctx)
{
    int rc = 0, rc2;
    /* Deferred calls first when the sets are needed: they may hold a set. */
    if (bytes > t->inline_max && (rc = nc_bcast_flush(t)) && !nc_call_error(rc))
        return rc;
    const uint32_t c = t->bcast_call;
    nc_call_slot_t *sl = nc_seg_call(&t->seg, c);
    /* C1. */
    if ((rc2 = ring_wait_free(t, c)))
        return nc_team_fail(t, rc2);
    /* C2a. */
    if (!ring_claim(t, c, bytes)) {
        rc2 = reader_call(t, buf, bytes, t->rank, fn, ctx);
        return rc2 ? rc2 : rc;
    }
    t->bcast_call++;
    t->bcast_calls++;
    /* C2. Plain stores: every reader of the slot's previous call is done (C1),
     * we alone claimed it (C2a), and the readers read it after the release
     * below. */
    const int cma = use_cma(t, buf, bytes);
    const cma_call_t cc = {cma ? CMA_CALL : 0, (uint64_t)(uintptr_t)buf, cma ? cma_share(t, bytes) : 0};
    sl->root = (uint32_t)t->rank;
    sl->bytes = bytes;
    if (bytes && bytes <= t->inline_max)
        copy_frag(buf, fn, ctx, 0, (char *)sl->inline_data, bytes, 1);
    else if (bytes)
        memcpy(sl->inline_data, &cc, sizeof cc); /* K1 */
    /* release: root, bytes and data before seq; pairs with the acquire in C3. */
    atomic_store_explicit(&sl->seq, c, memory_order_release);
    if ((rc2 = finish(t, c)) && !nc_call_error(rc2))
        return rc2;
    if (rc2)
        rc = rc2;
    if (cma) {
        t->cma_calls++;
        /* A member that took itself for the root of a small call too, and
         * raced our claim (C2a), may have rewritten the slot: the readers
         * may not take part, so we would wait for them for ever. */
        if ((int)sl->root != t->rank || sl->bytes != bytes) {
            nc_log_error("bcast call %u of this team: another member also acts as its root",
                         (unsigned)(c - nc_test_seq0));
            return nc_team_fail(t, NUMACOLL_ERR_ROOT);
        }
        rc2 = cma_root(t, buf, c, cc.share);
        if (rc2 == NUMACOLL_ERR_PEER_DEAD || rc2 == NUMACOLL_ERR_BROKEN)
            return nc_team_fail(t, rc2);
        if (rc2) /* FAULT, NOTSUP: this call failed here, every member completed it */
            return rc2;
    } else if (bytes > t->inline_max && (rc2 = sets_root(t, buf, bytes, fn, ctx)))
        return nc_team_fail(t, rc2);
    return rc;
}

/* A reader's call from C3 on (also a root's that lost C2a: root is then
 * its own rank). */
static int reader_call(numacoll_team_t *t, char *buf, size_t mybytes, int root,
                       numacoll_copy_fn fn, void *ctx)
{
    int rc = 0, rc2;
    if ((rc = nc_bcast_flush(t)) && !nc_call_error(rc))
        return rc;
    const uint32_t c = t->bcast_call++;
    t->bcast_calls++;
    nc_call_slot_t *sl;
    /* C3. */
    if ((rc2 = ring_wait_call(t, c, &sl)) == NUMACOLL_ERR_ROOT) {
        nc_log_error("bcast call %u of this team: member %d passed root %d, but no member passed "
                     "itself as the root (all %d waited for the call as readers)",
                     (unsigned)(c - nc_test_seq0), t->rank, root, t->p);
        finish(t, c); /* nothing pending here: a plain ack */
        return rc2;
    }
    if (rc2)
        return nc_team_fail(t, rc2);
    const int sroot = (int)sl->root;
    const size_t total = sl->bytes;
    if (sroot != root) {
        if (root == t->rank)
            nc_log_error("bcast call %u of this team: members %d and %d both passed themselves "
                         "as the root; member %d claimed the call first, member %d receives nothing",
                         (unsigned)(c - nc_test_seq0), sroot, root, sroot, root);
        else
            nc_log_error("bcast call %u of this team: member %d passed root %d, the root is %d",
                         (unsigned)(c - nc_test_seq0), t->rank, root, sroot);
        rc = NUMACOLL_ERR_ROOT;
        mybytes = 0; /* drain only */
    } else if (total != mybytes && !rc) {
        rc = NUMACOLL_ERR_TRUNCATE;
    }
    const size_t keep = mybytes < total ? mybytes : total;
    cma_call_t cc;
    const int cma = total > t->inline_max && cma_of(sl, &cc);
    if (total <= t->inline_max) {
        if (keep)
            copy_frag(buf, fn, ctx, 0, (char *)sl->inline_data, keep, 0);
    } else if (cma) {
        cma_reader_post(t, &cc, c, buf, keep); /* K5 */
    }
    finish(t, c); /* nothing pending here: a plain ack */
    if (cma) {
        t->cma_calls++;
        rc2 = cma_reader_copy(t, &cc, c, sroot, buf, fn, ctx, keep);
        if (rc2 == NUMACOLL_ERR_PEER_DEAD || rc2 == NUMACOLL_ERR_BROKEN)
            return nc_team_fail(t, rc2);
        if (rc2) /* FAULT, NOTSUP, NOMEM: this call failed here, every member completed it */
            return rc2;
    } else if (total > t->inline_max && (rc2 = sets_reader(t, buf, mybytes, total, sroot, fn, ctx)))
        return nc_team_fail(t, rc2);
    return rc;
}

static int bcast_reader(numacoll_team_t *t, char *buf, size_t mybytes, int root,
                        numacoll_copy_fn fn, void *ctx)
{
    if (!mybytes) {
        /* Deferred (see above). */
        t->defer_root[t->bcast_call % NC_CALL_RING] = root;
        cma_zero(t, t->bcast_call);
        t->bcast_call++;
        t->bcast_calls++;
        if (++t->ring_pending >= NC_CALL_RING / 2)
            return nc_bcast_flush(t);
        return 0;
    }
    return reader_call(t, buf, mybytes, root, fn, ctx);
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
