/*
 * Barrier: four algorithms selected by NUMACOLL_BARRIER_ALG, or auto (see docs/barrier.md).
 *
 *   rearranged     gather up a tree, release by one word. A parent's children
 *                  write one byte each into the parent's own line(s): the parent
 *                  polls ceil(children/64) lines, not one line per child.
 *   padded         the same tree, every arrival flag on its own line.
 *   dissemination  ceil(log2 p) rounds; in round r member i signals
 *                  (i + 2^r) mod p and waits for (i - 2^r) mod p.
 *   central        one fetch-and-add counter and one release word.
 *
 * The two tree algorithms take their shape from NUMACOLL_BARRIER_TREE and, with
 * NUMACOLL_BARRIER_NUMA=1, gather each NUMA node to its leader first (a tree per
 * node), then the leaders (a tree of leaders rooted at member 0); the root
 * releases the leaders, each leader its node.
 *
 * Sequence numbers instead of resets: barrier number seq (t->barrier_seq, the
 * same on every member, starting at nc_test_seq0 + 1) writes seq (or its low
 * byte) into every flag, so a flag never has to be cleared and back-to-back
 * barriers need no extra round. Why equality is enough for the tree flags and
 * the release words: a flag's writer can only write seq + 1 after leaving
 * barrier seq, which needs its reader to have seen seq. A dissemination flag can
 * be overwritten with seq + 1 before its reader saw seq (the writer may finish
 * barrier seq first), so it is compared with a wrap-safe difference
 * (int32_t)(flag - seq) >= 0; it can never be more than one ahead.
 */
#include "coll/nc_barrier.h"
#include "coll/nc_coll.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/nc_tree.h"

const int *nc_barrier_test_leaders;

NC_STATIC_ASSERT(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_CHAR_LOCK_FREE == 2,
                 "flags shared between processes must be lock-free");
NC_STATIC_ASSERT(sizeof(_Atomic uint8_t) == 1 && sizeof(_Atomic uint32_t) == 4,
                 "atomic flags have the size of their value");

/*
 * Layout of the barrier area (nc_seg_barrier(); blocks page-aligned):
 *
 *   offset            line   field                written by             polled by
 *   0                 0      central.count        every member (RMW)     every member (RMW)
 *                     1      central.release      the last arriver       every member
 *   page + i*block    0      rel[i]               i if it is the root    the tree root: everyone
 *   (member i's              release word         or a NUMA leader       (one level) or the
 *    block)                                                              leaders and its node;
 *                                                                        a leader: its node
 *                     1      pad[i]  (padded)     i                      parent(i)
 *                     2+r    dis[i][r], r < R     (i - 2^r) mod p        i
 *                     2+R..  arr[i][s] (bytes,    the child in slot s    i (64 slots a line)
 *                            rearranged)
 *
 *   R = ceil(log2 p), block = roundup((2 + R) * 64 + roundup(p - 1, 64), page).
 * Member i's block holds what i polls (its children's bytes, its dissemination
 * flags) and what i writes; it is the block member i should first-touch.
 * bar_layout() is the only place that computes offsets. The layout depends on p
 * and the page size only, never on the configuration.
 */
typedef struct nc_bar_central {
    _Atomic uint32_t count;
    _Atomic uint32_t release NC_ALIGNED(NC_CACHELINE);
} nc_bar_central_t;
NC_STATIC_ASSERT(sizeof(nc_bar_central_t) == 2 * NC_CACHELINE, "count and release: one line each");

#define NC_BAR_REL_LINE 0
#define NC_BAR_PAD_LINE 1
#define NC_BAR_DIS_LINE 2

typedef struct bar_layout {
    int rounds;          /* R */
    size_t global_bytes; /* the central page */
    size_t arr_off;      /* arrival bytes within a member block */
    size_t block_bytes;  /* one member block */
    size_t total;
} bar_layout_t;

static void bar_layout(bar_layout_t *l, int p, size_t page)
{
    l->rounds = 0;
    while ((1LL << l->rounds) < p)
        l->rounds++;
    l->global_bytes = nc_round_up(sizeof(nc_bar_central_t), page);
    l->arr_off = (size_t)(NC_BAR_DIS_LINE + l->rounds) * NC_CACHELINE;
    l->block_bytes =
        nc_round_up(l->arr_off + nc_round_up((size_t)(p > 1 ? p - 1 : 1), NC_CACHELINE), page);
    l->total = l->global_bytes + (size_t)p * l->block_bytes;
}

static char *bar_block(const numacoll_team_t *t, const bar_layout_t *l, int i)
{
    return nc_seg_barrier(&t->seg) + l->global_bytes + (size_t)i * l->block_bytes;
}
static _Atomic uint32_t *bar_line(const numacoll_team_t *t, const bar_layout_t *l, int i, int line)
{
    return (_Atomic uint32_t *)(bar_block(t, l, i) + (size_t)line * NC_CACHELINE);
}
static _Atomic uint8_t *bar_arr(const numacoll_team_t *t, const bar_layout_t *l, int i)
{
    return (_Atomic uint8_t *)(bar_block(t, l, i) + l->arr_off);
}

/* A member's private view: pointers resolved once at team creation. */
typedef struct nc_bar {
    nc_bar_alg_t alg;
    int ngroups;
    /* trees */
    int nchild;
    _Atomic uint8_t *arr_in;    /* rearranged: my children's bytes, slot s = s-th child */
    _Atomic uint8_t *arr_out;   /* rearranged: my byte in my parent's line (NULL: root) */
    _Atomic uint32_t **pad_in;  /* padded: each child's flag line */
    _Atomic uint32_t *pad_out;  /* padded: my flag line (NULL: root) */
    _Atomic uint32_t *rel_in;   /* the release word I wait for (NULL: root) */
    _Atomic uint32_t *rel_out;  /* the release word I publish (NULL: none) */
    /* dissemination */
    int rounds;
    _Atomic uint32_t **dis_out; /* round r: dis[(me + 2^r) % p][r] */
    _Atomic uint32_t **dis_in;  /* round r: dis[me][r] */
    /* central */
    nc_bar_central_t *central;
    char desc[128];
} nc_bar_t;

nc_shm_need_t nc_barrier_shm_need(int p, const nc_config_t *cfg, size_t page)
{
    (void)cfg; /* on purpose: the segment size must not depend on the configuration */
    bar_layout_t l;
    bar_layout(&l, p, page);
    return (nc_shm_need_t){.shared = l.total, .member = 0};
}

/* ---- waiting: the nc_wait.h pattern, one helper per comparison ------------------ */
/* Each acquire pairs with the release store named at the call site. */

static inline int wait_u8_eq(numacoll_team_t *t, _Atomic uint8_t *f, uint8_t want)
{
    nc_backoff_t bo;
    nc_backoff_init(&bo, &t->wait);
    int rc;
    while (atomic_load_explicit(f, memory_order_acquire) != want)
        if ((rc = nc_backoff(&bo)) < 0)
            return nc_team_fail(t, rc);
    return 0;
}

static inline int wait_u32_eq(numacoll_team_t *t, _Atomic uint32_t *f, uint32_t want)
{
    nc_backoff_t bo;
    nc_backoff_init(&bo, &t->wait);
    int rc;
    while (atomic_load_explicit(f, memory_order_acquire) != want)
        if ((rc = nc_backoff(&bo)) < 0)
            return nc_team_fail(t, rc);
    return 0;
}

/* Until *f has reached want (wrap-safe: f is at most one ahead of want). */
static inline int wait_u32_reached(numacoll_team_t *t, _Atomic uint32_t *f, uint32_t want)
{
    nc_backoff_t bo;
    nc_backoff_init(&bo, &t->wait);
    int rc;
    while ((int32_t)(atomic_load_explicit(f, memory_order_acquire) - want) < 0)
        if ((rc = nc_backoff(&bo)) < 0)
            return nc_team_fail(t, rc);
    return 0;
}

/*
 * Tree barrier (rearranged and padded), member me, barrier number seq:
 *
 *   1. gather: wait until each child's arrival flag holds seq (rearranged: the
 *      child's byte in my line holds seq's low byte);
 *   2. arrive: write seq into my flag for my parent (the root skips 2 and 3);
 *   3. wait until my release word (the root's, or in two-level mode my
 *      leader's if I am not a leader) holds seq;
 *   4. publish: the root and (two-level) each leader write seq into their own
 *      release word.
 * The arrivals chain up the tree (acquire in 1, release in 2) so the root has
 * acquired every member's writes before the barrier when it releases in 4.
 */
static int bar_tree(numacoll_team_t *t, nc_bar_t *b)
{
    uint32_t seq = ++t->barrier_seq;
    int rc;
    /* 1. gather */
    if (b->alg == NC_BAR_REARRANGED) {
        for (int s = 0; s < b->nchild; s++)
            /* acquire: child s's subtree has arrived; pairs with the release
             * of arr_out in step 2 of that child. */
            if ((rc = wait_u8_eq(t, &b->arr_in[s], (uint8_t)seq)))
                return rc;
    } else {
        for (int s = 0; s < b->nchild; s++)
            /* acquire: pairs with the release of pad_out in step 2 of child s. */
            if ((rc = wait_u32_eq(t, b->pad_in[s], seq)))
                return rc;
    }
    /* 2. arrive */
    if (b->arr_out)
        /* release: my writes before the barrier and my subtree's arrivals
         * (acquired in 1); pairs with the acquire in my parent's step 1. */
        atomic_store_explicit(b->arr_out, (uint8_t)seq, memory_order_release);
    else if (b->pad_out)
        /* release: as above; pairs with the acquire in my parent's step 1. */
        atomic_store_explicit(b->pad_out, seq, memory_order_release);
    /* 3. wait for the release */
    /* acquire (in wait_u32_eq): pairs with the release in step 4 of the root
     * or of my leader. */
    if (b->rel_in && (rc = wait_u32_eq(t, b->rel_in, seq)))
        return rc;
    /* 4. publish */
    if (b->rel_out)
        /* release: every member's arrival (the root acquired all of them in 1;
         * a leader acquired them from the root in 3); pairs with the acquire in
         * step 3 of the members that read this word. */
        atomic_store_explicit(b->rel_out, seq, memory_order_release);
    return 0;
}

/*
 * Dissemination barrier, member me, barrier number seq, for r = 0 .. R-1:
 *
 *   1. write seq into dis[(me + 2^r) mod p][r];
 *   2. wait until dis[me][r] has reached seq (written by (me - 2^r) mod p).
 * After round r, me has (transitively) heard from the 2^(r+1) - 1 members
 * before it, so after R rounds from everyone.
 */
static int bar_dissemination(numacoll_team_t *t, nc_bar_t *b)
{
    uint32_t seq = ++t->barrier_seq;
    int rc;
    for (int r = 0; r < b->rounds; r++) {
        /* 1. release: my writes before the barrier and every arrival I acquired
         * in rounds < r; pairs with the acquire in step 2 of round r of
         * (me + 2^r) mod p. */
        atomic_store_explicit(b->dis_out[r], seq, memory_order_release);
        /* 2. acquire (in wait_u32_reached): pairs with the release in step 1 of
         * round r of (me - 2^r) mod p. */
        if ((rc = wait_u32_reached(t, b->dis_in[r], seq)))
            return rc;
    }
    return 0;
}

/*
 * Central sense-reversing counter with sequence numbers:
 *
 *   1. seq = ++my barrier sequence;
 *   2. fetch_add(count, 1): the member that brings it to p resets count to 0
 *      and publishes release = seq;
 *   3. everyone else waits for release == seq.
 */
static int bar_central(numacoll_team_t *t, nc_bar_t *b)
{
    nc_bar_central_t *c = b->central;
    uint32_t seq = ++t->barrier_seq; /* 1. */
    /* 2. acq_rel: the last arriver acquires every earlier arrival (their
     * writes before the barrier), and each arrival releases its own writes;
     * the read-modify-writes form one release sequence on count. */
    if (atomic_fetch_add_explicit(&c->count, 1, memory_order_acq_rel) == (uint32_t)t->p - 1) {
        atomic_store_explicit(&c->count, 0, memory_order_relaxed);
        /* release: the reset of count and every arrival's writes; pairs with
         * the acquire in step 3. */
        atomic_store_explicit(&c->release, seq, memory_order_release);
        return 0;
    }
    /* 3. acquire (in wait_u32_eq): pairs with the last arriver's release. */
    return wait_u32_eq(t, &c->release, seq);
}

/* ---- set-up ------------------------------------------------------------------ */

/* Are these valid groups: leaders[i] is the lowest rank of i's group? */
static int groups_valid(int p, const int *leaders)
{
    for (int i = 0; i < p; i++)
        if (leaders[i] < 0 || leaders[i] > i || leaders[leaders[i]] != leaders[i])
            return 0;
    return 1;
}

/* parent[] of the spanning tree over all members, rooted at member 0.
 * one level: one tree over the members grouped by NUMA node (as the bcast);
 * two levels: a tree per group rooted at its leader, plus a tree of leaders. */
static int bar_parents(int p, const int *leaders, int two_level, nc_tree_kind_t kind, int k,
                       int *parent)
{
    int *list = malloc((size_t)p * sizeof *list);
    nc_tree_t tr;
    int rc = list ? 0 : NUMACOLL_ERR_NOMEM;
    if (!rc && !two_level) {
        int n = 0;
        for (int lead = 0; lead < p; lead++)
            if (leaders[lead] == lead)
                for (int i = lead; i < p; i++)
                    if (leaders[i] == lead)
                        list[n++] = i;
        if (!(rc = nc_tree_build(&tr, kind, k, p, list))) {
            for (int i = 0; i < p; i++)
                parent[i] = nc_tree_parent(&tr, list[0], i);
            nc_tree_free(&tr);
        }
    }
    if (!rc && two_level) {
        /* a tree per group: list = the group's members, ascending, leader first */
        for (int lead = 0; lead < p && !rc; lead++) {
            if (leaders[lead] != lead)
                continue;
            int n = 0;
            for (int i = lead; i < p; i++)
                if (leaders[i] == lead)
                    list[n++] = i;
            if (!(rc = nc_tree_build(&tr, kind, k, n, NULL))) {
                for (int j = 1; j < n; j++)
                    parent[list[j]] = list[nc_tree_parent(&tr, 0, j)];
                nc_tree_free(&tr);
            }
        }
        /* the tree of leaders, rooted at member 0 */
        int n = 0;
        for (int i = 0; i < p; i++)
            if (leaders[i] == i)
                list[n++] = i;
        if (!rc && !(rc = nc_tree_build(&tr, kind, k, n, NULL))) {
            parent[0] = -1;
            for (int j = 1; j < n; j++)
                parent[list[j]] = list[nc_tree_parent(&tr, 0, j)];
            nc_tree_free(&tr);
        }
    }
    free(list);
    return rc;
}

/* Initial values of member i's block: "barrier seq0 is complete" everywhere. */
static void bar_block_init(numacoll_team_t *t, const bar_layout_t *l, int i, uint32_t seq0)
{
    atomic_store_explicit(bar_line(t, l, i, NC_BAR_REL_LINE), seq0, memory_order_relaxed);
    atomic_store_explicit(bar_line(t, l, i, NC_BAR_PAD_LINE), seq0, memory_order_relaxed);
    for (int r = 0; r < l->rounds; r++)
        atomic_store_explicit(bar_line(t, l, i, NC_BAR_DIS_LINE + r), seq0, memory_order_relaxed);
    _Atomic uint8_t *arr = bar_arr(t, l, i);
    for (int s = 0; s < t->p - 1; s++)
        atomic_store_explicit(&arr[s], (uint8_t)seq0, memory_order_relaxed);
}

void nc_barrier_fini(struct numacoll_team *t)
{
    nc_bar_t *b = t->barrier_state;
    if (!b)
        return;
    free(b->pad_in);
    free(b->dis_out);
    free(b->dis_in);
    free(b);
    t->barrier_state = NULL;
}

int nc_barrier_init(struct numacoll_team *t)
{
    const int p = t->p, me = t->rank;
    bar_layout_t l;
    bar_layout(&l, p, t->seg.l.page);
    if (nc_round_up(l.total, t->seg.l.page) != t->seg.l.area_bytes[NC_COLL_BARRIER])
        return NUMACOLL_ERR_MISMATCH; /* the segment was laid out for another size */
    nc_bar_t *b = calloc(1, sizeof *b);
    int *parent = malloc((size_t)p * sizeof *parent);
    int *nslot = calloc((size_t)p, sizeof *nslot);
    int *slot = malloc((size_t)p * sizeof *slot);
    int *one_group = calloc((size_t)p, sizeof *one_group); /* every member's leader: 0 */
    int rc = b && parent && nslot && slot && one_group ? 0 : NUMACOLL_ERR_NOMEM;
    if (rc)
        goto out;
    t->barrier_state = b;
    b->alg = (nc_bar_alg_t)NC_CFG_NUM(&t->cfg, BARRIER_ALG);
    /* auto: with more members than CPUs every wait ends in a yield, and the
     * central counter needs the fewest (one arrival each, one release);
     * otherwise dissemination, the fastest measured (docs/barrier.md).
     * oversubscribed is computed from exchanged data: the same everywhere. */
    if (b->alg == NC_BAR_AUTO)
        b->alg = t->oversubscribed ? NC_BAR_CENTRAL : NC_BAR_DISSEMINATION;
    b->central = (nc_bar_central_t *)nc_seg_barrier(&t->seg);

    /* Initial values, all written by member 0: nc_seg_first_touch() zeroes the
     * whole barrier area from member 0 at a time not ordered with the other
     * members' nc_barrier_init(), so a value another member wrote here could
     * be zeroed after it. Exchange #2 of the team creation orders these writes
     * before every member's first barrier. */
    if (me == 0) {
        atomic_store_explicit(&b->central->count, 0, memory_order_relaxed);
        atomic_store_explicit(&b->central->release, t->barrier_seq, memory_order_relaxed);
        for (int i = 0; i < p; i++)
            bar_block_init(t, &l, i, t->barrier_seq);
    }

    /* dissemination partners */
    b->rounds = l.rounds;
    b->dis_out = calloc((size_t)l.rounds + 1, sizeof *b->dis_out);
    b->dis_in = calloc((size_t)l.rounds + 1, sizeof *b->dis_in);
    if (!b->dis_out || !b->dis_in) {
        rc = NUMACOLL_ERR_NOMEM;
        goto out;
    }
    for (int r = 0; r < l.rounds; r++) {
        int to = (int)(((long long)me + (1LL << r)) % p);
        b->dis_out[r] = bar_line(t, &l, to, NC_BAR_DIS_LINE + r);
        b->dis_in[r] = bar_line(t, &l, me, NC_BAR_DIS_LINE + r);
    }

    /* the tree: groups, parents, slots */
    const int *leaders = nc_barrier_test_leaders ? nc_barrier_test_leaders : t->leaders;
    if (!groups_valid(p, leaders)) {
        nc_log_info(1, "barrier: NUMA groups are not lowest-rank leaders; using one group");
        leaders = NULL;
    }
    b->ngroups = 0;
    for (int i = 0; i < p; i++)
        b->ngroups += !leaders || leaders[i] == i;
    if (!leaders) {
        b->ngroups = 1;
        leaders = one_group;
    }
    const int two_level = NC_CFG_NUM(&t->cfg, BARRIER_NUMA) && b->ngroups > 1;
    nc_tree_kind_t kind = (nc_tree_kind_t)NC_CFG_NUM(&t->cfg, BARRIER_TREE);
    int k = (int)t->cfg.v[NC_P_BARRIER_TREE].aux;
    if ((rc = bar_parents(p, leaders, two_level, kind, k, parent)))
        goto out;
    const int my_leader = leaders[me];
    /* slots: the children of a parent, ascending by rank */
    for (int i = 0; i < p; i++)
        if (parent[i] >= 0)
            slot[i] = nslot[parent[i]]++;
        else
            slot[i] = -1;
    b->nchild = nslot[me];
    b->pad_in = calloc((size_t)b->nchild + 1, sizeof *b->pad_in);
    if (!b->pad_in) {
        rc = NUMACOLL_ERR_NOMEM;
        goto out;
    }
    for (int i = 0, s = 0; i < p; i++)
        if (parent[i] == me)
            b->pad_in[s++] = bar_line(t, &l, i, NC_BAR_PAD_LINE);
    b->arr_in = bar_arr(t, &l, me);
    if (parent[me] >= 0) {
        b->arr_out = bar_arr(t, &l, parent[me]) + slot[me];
        b->pad_out = bar_line(t, &l, me, NC_BAR_PAD_LINE);
    }
    if (b->alg == NC_BAR_REARRANGED)
        b->pad_out = NULL;
    else
        b->arr_out = NULL;
    if (me == 0)
        b->rel_out = bar_line(t, &l, 0, NC_BAR_REL_LINE);
    else if (two_level && my_leader == me) {
        b->rel_in = bar_line(t, &l, 0, NC_BAR_REL_LINE);
        b->rel_out = bar_line(t, &l, me, NC_BAR_REL_LINE);
    } else
        b->rel_in = bar_line(t, &l, two_level ? my_leader : 0, NC_BAR_REL_LINE);

    if (b->alg == NC_BAR_REARRANGED || b->alg == NC_BAR_PADDED)
        snprintf(b->desc, sizeof b->desc, "%s %s groups=%d%s",
                 t->cfg.v[NC_P_BARRIER_ALG].text, t->cfg.v[NC_P_BARRIER_TREE].text,
                 two_level ? b->ngroups : 1, two_level ? " (two-level)" : "");
    else
        snprintf(b->desc, sizeof b->desc, "%s%s",
                 b->alg == NC_BAR_CENTRAL ? "central" : "dissemination",
                 NC_CFG_NUM(&t->cfg, BARRIER_ALG) == NC_BAR_AUTO ? " (auto)" : "");
    if (me == 0)
        nc_log_info(1, "barrier: %s, %zu bytes (%zu per member)", b->desc, l.total,
                    l.block_bytes);
out:
    free(parent);
    free(nslot);
    free(slot);
    free(one_group);
    if (rc && b && t->barrier_state != b)
        free(b);
    return rc;
}

void nc_barrier_describe(const struct numacoll_team *t, char *buf, size_t len)
{
    const nc_bar_t *b = t ? t->barrier_state : NULL;
    snprintf(buf, len, "%s", b ? b->desc : "(none)");
}

NUMACOLL_API int numacoll_barrier(numacoll_team_t *t)
{
    if (!t)
        return NUMACOLL_ERR_INVAL;
    if (t->broken)
        return NUMACOLL_ERR_BROKEN;
    if (t->p == 1)
        return 0;
    /* Broadcasts this member deferred are resolved before it waits here, so
     * a root waiting for them is not left waiting (coll/nc_bcast.c). A size
     * mismatch found now is reported after the barrier. */
    int frc = t->ring_pending ? nc_bcast_flush(t) : 0, rc;
    if (frc && !nc_call_error(frc))
        return frc;
    nc_bar_t *b = t->barrier_state;
    switch (b->alg) {
    case NC_BAR_REARRANGED:
    case NC_BAR_PADDED:
        rc = bar_tree(t, b);
        break;
    case NC_BAR_DISSEMINATION:
        rc = bar_dissemination(t, b);
        break;
    case NC_BAR_CENTRAL:
    default:
        rc = bar_central(t, b);
        break;
    }
    return rc ? rc : frc;
}
