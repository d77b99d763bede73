/*
 * The shared segment of a team: layout, creation, attach, first touch,
 * placement check.
 *
 * Layout (every block page-aligned; numbers for p=8, s=8, f=8 KiB, q=2, 4 KiB
 * pages, layout=paper: 4 + 8 + 8*8*(4+8) = 780 KiB, the paper's figure 1, plus
 * 268 KiB of call ring):
 *
 *   offset                 block                                  written by / placed on
 *   0                      header | leaders[p] | pids[p]          rank 0 / rank 0's node
 *   hdr_bytes              call ring: NC_CALL_RING slots of 4 KiB root of a call announces it
 *                          {seq, root, bytes, inline data},       (and small data) / rank 0
 *                          then one ack line per member           member i: calls resolved
 *                          then two probe lines per member        member i (team creation)
 *                          then the claim words (64 or more,      root of a call
 *                          two lines each)
 *   calls_off+calls_bytes  q set pages: op on one line,           root of a call / rank 0
 *                          nreaders on the next line              readers decrement
 *   rank_off + i*rank_bytes  member i: s control blocks           parent in the tree writes a
 *                          (paper: a page each, compact: a line   fragment size, member i reads
 *                          each, packed in pages)                 and resets / member i's node
 *                          then s fragment buffers of f bytes,    member i when it is the root
 *                          each rounded up to whole pages         (or a relay) / member i's node
 *                          then, for each collective m that declares
 *                          one, its part of member i's block:     per collective / member i's node
 *                          rank_off + i*rank_bytes + marea_off[m]
 *   area_off[m]            the shared area collective m declares  per collective / rank 0's node
 *                          (area 0: the barrier's flags, see coll/nc_barrier.c)
 *
 * What a collective needs besides the broadcast's queue it declares in the
 * table of coll/nc_coll.h (shared bytes, bytes per member); the layout lays
 * out whatever the table declares and knows no collective but the queue.
 *
 * Size: hdr + calls + q*page + p*(ctrl + s*roundup(f, page) + sum of member areas)
 * + sum of shared areas, where hdr is one page for p <= 500, calls is
 * roundup(NC_CALL_RING * 4 KiB + (p * 3 + 2 * L) * 64, page) with L claim words (the
 * smallest multiple of p >= NC_CALL_RING) and ctrl is s pages (paper) or
 * roundup(s*64, page) (compact); every area is rounded up to whole pages.
 * nc_layout_compute() is the only place that computes offsets.
 */
#ifndef NC_SEG_H
#define NC_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/nc_common.h"

#define NC_SEG_MAGIC UINT64_C(0x4c4c4f43414d554e) /* "NUMACOLL" */
#define NC_SEG_VERSION 4u

/* At most this many collectives declare areas (coll/nc_coll.h). */
#define NC_LAYOUT_AREAS 4

/* What one collective needs: bytes shared by the team (placed with member 0)
 * and bytes in every member's block (placed on that member's node). */
typedef struct nc_shm_need {
    size_t shared, member;
} nc_shm_need_t;

typedef struct nc_layout {
    size_t page;
    int p, s, q, kind; /* kind: NC_LAYOUT_PAPER or NC_LAYOUT_COMPACT */
    size_t f;
    size_t hdr_off, hdr_bytes;
    size_t calls_off, calls_bytes;  /* call ring + ack lines + probe lines + claim words */
    size_t claims_off, claims;      /* the claim words: where (from calls_off), how many */
    size_t sets_off, set_bytes;
    size_t rank_off, rank_bytes;
    size_t ctrl_stride, ctrl_bytes; /* within a member block */
    size_t buf_off, buf_stride;     /* within a member block */
    size_t bcast_bytes;             /* the paper's part: hdr + sets + members */
    int nareas;                     /* collectives with declared areas */
    size_t area_off[NC_LAYOUT_AREAS], area_bytes[NC_LAYOUT_AREAS];   /* shared */
    size_t marea_off[NC_LAYOUT_AREAS], marea_bytes[NC_LAYOUT_AREAS]; /* within a member block */
    size_t barrier_off, barrier_bytes; /* all shared areas (area 0, the barrier's, first) */
    size_t total;
} nc_layout_t;

/* needs[m] for m < nneeds (nneeds <= NC_LAYOUT_AREAS; NULL, 0: none). */
int nc_layout_compute(nc_layout_t *l, int p, size_t f, int s, int q, int kind, size_t page,
                      const nc_shm_need_t *needs, int nneeds);

typedef struct nc_seg_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t p;
    uint64_t total_bytes;
    uint64_t frag_size;
    uint32_t queue_len, sets, layout, pad0;
    /* Set by a member that found a dead peer or a fatal error; every waiter
     * polls it in its slow path. relaxed: a hint, nothing is published by it. */
    _Atomic uint32_t broken NC_ALIGNED(NC_CACHELINE);
    /* release by rank 0 after every field above and the set pages are
     * initialised; pairs with the acquire in nc_seg_attach(). */
    _Atomic uint32_t ready NC_ALIGNED(NC_CACHELINE);
} nc_seg_hdr_t;

#define NC_SEG_LEADERS_OFF 256
NC_STATIC_ASSERT(sizeof(nc_seg_hdr_t) <= NC_SEG_LEADERS_OFF, "header fits before leaders[]");

/*
 * The call ring (coll/nc_bcast.c): call c is announced in slot c % NC_CALL_RING
 * by its root; a message of at most NC_CALL_INLINE bytes travels in the slot,
 * right after the announcement, so a reader finds the data with (or next to)
 * the line that tells it the data is there. Member i stores in its ack line
 * the last call up to which it has read every slot; a root reuses a slot once
 * every member's ack passed the slot's previous call. The same line carries
 * the member's part of a CMA broadcast (its buffer, how far it got).
 */
#define NC_CALL_RING 64
#define NC_CALL_SLOT_BYTES 4096
#define NC_CALL_INLINE (NC_CALL_SLOT_BYTES - 16)

/* A slot's seq holds, for its call c: c once the root published it (C2),
 * or nc_call_noroot(c) when every member waited for c as a reader (C3b).
 * Readers of the slot wait only for calls c + k NC_CALL_RING, and the
 * noroot value never equals one of those. */
#define nc_call_noroot(c) ((uint32_t)(c) + 1u)
NC_STATIC_ASSERT(NC_CALL_RING > 1 && !(NC_CALL_RING & (NC_CALL_RING - 1)),
                 "a noroot value is no call of the slot; the ring is a power of two");

typedef struct nc_call_slot {
    _Atomic uint32_t seq;   /* the call announced here, published last (above) */
    uint32_t root;          /* the call's root, published by seq */
    uint64_t bytes;         /* the root's bytes, published by seq */
    unsigned char inline_data[NC_CALL_INLINE]; /* the first 48 on the seq line */
} NC_ALIGNED(NC_CACHELINE) nc_call_slot_t;
NC_STATIC_ASSERT(sizeof(nc_call_slot_t) == NC_CALL_SLOT_BYTES, "a call slot is 4 KiB");

/* The claim words (after the probe lines; coll/nc_bcast.c, C2a): call c
 * (its 64-bit number) is claimed in word c % L by the member that takes
 * itself for its root, so a second one finds it taken. L is the smallest
 * multiple of p of at least NC_CALL_RING words: a root that returns every
 * p calls (a fixed root, roots in turn as IMB does) claims a word it
 * claimed itself last, still in its own cache, and no reader polls these
 * words. (At least NC_CALL_RING: a word is claimed again only after every
 * member resolved the call that claimed it before.) A word has two lines
 * to itself: the adjacent-line prefetcher fetches lines in pairs, and would
 * take one member's word from another's cache. */
typedef struct nc_call_claim {
    _Atomic uint64_t call;
} NC_ALIGNED(2 * NC_CACHELINE) nc_call_claim_t;
static inline size_t nc_call_claims(int p)
{
    return ((size_t)NC_CALL_RING + (size_t)p - 1) / (size_t)p * (size_t)p;
}

typedef struct nc_call_ack {
    _Atomic uint32_t done NC_ALIGNED(NC_CACHELINE);
    /* CMA broadcasts (coll/nc_bcast.c, K1-K8, Z), written by this member
     * only, 64-bit call numbers:
     * post: the call whose addr and len (this reader's buffer) are set;
     * fin: the last call this member finished its copies of;
     * ferr: (root) the last call in which it did not write a reader's share. */
    _Atomic uint64_t post, fin;
    uint64_t ferr;
    uint64_t addr, len;
    /* the 64-bit number of the call this member has waited long for as a
     * reader (C3b); written by this member only */
    _Atomic uint64_t waiting;
} nc_call_ack_t;
NC_STATIC_ASSERT(sizeof(nc_call_ack_t) == NC_CACHELINE, "an ack is one line");

/* The cache probe at team creation (core/nc_team.c, NUMACOLL_CACHE_PROBE):
 * member i's two lines after the ack lines. ping: passed back and forth
 * with a neighbour; ns: member i's measure of the hand-off between it and
 * member i + 1, plus one (0: not yet). */
typedef struct nc_probe_line {
    _Atomic uint32_t ping;
    _Atomic uint64_t ns NC_ALIGNED(NC_CACHELINE);
} nc_probe_line_t;
NC_STATIC_ASSERT(sizeof(nc_probe_line_t) == 2 * NC_CACHELINE, "ping and ns on separate lines");

/* The 64-bit count of broadcast calls of a team created with counters at
 * seq0 starts here (coll/nc_bcast.c; post and fin above). */
#define NC_CALLS64_0(seq0) ((UINT64_C(1) << 32) + (uint32_t)(seq0))

typedef struct nc_set_ctl {
    /* Line 0, written by the root of the call that uses the set. */
    _Atomic uint32_t op;     /* sequence of the call-set published; see nc_bcast.c */
    /* Line 1, decremented by every reader when it has drained the set. */
    _Atomic uint32_t nreaders NC_ALIGNED(NC_CACHELINE);
} nc_set_ctl_t;
NC_STATIC_ASSERT(sizeof(nc_set_ctl_t) == 2 * NC_CACHELINE, "op and nreaders on separate lines");

typedef struct nc_seg {
    char name[64];
    int fd;          /* open from create/attach until this member reserved its part;
                        rank 0's until every member attached through it */
    void *base;
    size_t bytes;
    nc_layout_t l;
} nc_seg_t;

/* Rank 0: create, size, reserve rank 0's parts, map and initialise the
 * header. A failure (NUMACOLL_ERR_NOSPACE: /dev/shm too small) says why. */
int nc_seg_create(nc_seg_t *seg, const nc_layout_t *l, uint32_t seq0, char *why, size_t whylen);
/* Everyone else: open rank 0's descriptor fd of process pid (the file has no
 * name any more, see shm/nc_shm.h), map, check the header. */
int nc_seg_attach(nc_seg_t *seg, const char *name, int pid, int fd, const nc_layout_t *l);
/* Rank 0, once every member attached: close the descriptor they used. */
void nc_seg_unpublish(nc_seg_t *seg);
void nc_seg_detach(nc_seg_t *seg);

static inline nc_seg_hdr_t *nc_seg_hdr(const nc_seg_t *seg)
{
    return (nc_seg_hdr_t *)seg->base;
}
static inline int32_t *nc_seg_leaders(const nc_seg_t *seg)
{
    return (int32_t *)((char *)seg->base + NC_SEG_LEADERS_OFF);
}
static inline int32_t *nc_seg_pids(const nc_seg_t *seg)
{
    return nc_seg_leaders(seg) + seg->l.p;
}
static inline nc_call_slot_t *nc_seg_call(const nc_seg_t *seg, uint32_t call)
{
    return (nc_call_slot_t *)((char *)seg->base + seg->l.calls_off) + call % NC_CALL_RING;
}
static inline nc_call_ack_t *nc_seg_ack(const nc_seg_t *seg, int rank)
{
    return (nc_call_ack_t *)((char *)seg->base + seg->l.calls_off +
                             (size_t)NC_CALL_RING * NC_CALL_SLOT_BYTES) + rank;
}
static inline nc_probe_line_t *nc_seg_probe(const nc_seg_t *seg, int rank)
{
    return (nc_probe_line_t *)(nc_seg_ack(seg, seg->l.p)) + rank;
}
/* Where the claim words start in the call ring (past the probe lines, on a
 * two-line boundary). */
static inline size_t nc_call_claims_off(int p)
{
    return nc_round_up((size_t)NC_CALL_RING * NC_CALL_SLOT_BYTES +
                           (size_t)p * (sizeof(nc_call_ack_t) + sizeof(nc_probe_line_t)),
                       sizeof(nc_call_claim_t));
}
/* (A root's hot path: no division when there are NC_CALL_RING words, i.e.
 * when p divides NC_CALL_RING.) */
static inline _Atomic uint64_t *nc_seg_claim(const nc_seg_t *seg, uint64_t call64)
{
    const size_t n = seg->l.claims;
    const size_t k = n == NC_CALL_RING ? (size_t)(call64 & (NC_CALL_RING - 1)) : call64 % n;
    return &((nc_call_claim_t *)((char *)seg->base + seg->l.calls_off + seg->l.claims_off) + k)
                ->call;
}
static inline nc_set_ctl_t *nc_seg_set(const nc_seg_t *seg, int set)
{
    return (nc_set_ctl_t *)((char *)seg->base + seg->l.sets_off + (size_t)set * seg->l.set_bytes);
}
static inline char *nc_seg_rank_block(const nc_seg_t *seg, int rank)
{
    return (char *)seg->base + seg->l.rank_off + (size_t)rank * seg->l.rank_bytes;
}
static inline _Atomic uint32_t *nc_seg_ctrl(const nc_seg_t *seg, int rank, int idx)
{
    return (_Atomic uint32_t *)(nc_seg_rank_block(seg, rank) + (size_t)idx * seg->l.ctrl_stride);
}
static inline char *nc_seg_buf(const nc_seg_t *seg, int rank, int idx)
{
    return nc_seg_rank_block(seg, rank) + seg->l.buf_off + (size_t)idx * seg->l.buf_stride;
}
static inline char *nc_seg_barrier(const nc_seg_t *seg)
{
    return (char *)seg->base + seg->l.area_off[0];
}
/* Collective m's shared area, and its part of member `rank`'s block. */
static inline char *nc_seg_area(const nc_seg_t *seg, int m)
{
    return (char *)seg->base + seg->l.area_off[m];
}
static inline char *nc_seg_member_area(const nc_seg_t *seg, int m, int rank)
{
    return nc_seg_rank_block(seg, rank) + seg->l.marea_off[m];
}

/* This member's block: a preferred-node policy for `node` (>= 0) so its
 * pages go and stay there, the reservation of its space (members other than
 * 0; tmpfs would SIGBUS on a page it cannot back), then the first touch with
 * MADV_RANDOM in force, as the paper prescribes (rank 0 also the barrier).
 * 0, or NUMACOLL_ERR_NOSPACE with why filled: nothing was touched. */
int nc_seg_first_touch(nc_seg_t *seg, int rank, int node, char *why, size_t whylen);

/* Placement of this member's own blocks per move_pages(). */
typedef struct nc_placement {
    int checked;          /* move_pages() answered */
    long pages, misplaced;
    char detail[160];     /* first misplaced block, or why unchecked */
} nc_placement_t;
void nc_seg_verify(const nc_seg_t *seg, int rank, int expect_node, nc_placement_t *out);

#endif
