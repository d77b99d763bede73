/*
 * Gather, Scatter, Allgather, Alltoall and their v-forms: one exchange
 * engine. Every block a member sends is written once, by its sender, into
 * the sender's own NUMA-local memory, and read once by each member that
 * needs it, straight into its receive buffer (copy-in/copy-out; an
 * allgather's large blocks on several NUMA nodes are read once per node
 * and forwarded inside it, A1-A3). A block of
 * up to I bytes travels inside the line that announces it; a larger one goes
 * through the sender's ring of S fragment slots of F bytes, so writers and
 * readers overlap and the memory stays bounded whatever the message.
 *
 * Shared memory (declared in coll/nc_coll.h: F = NUMACOLL_GATHER_FRAG_SIZE,
 * S = NUMACOLL_GATHER_SLOTS, I = NUMACOLL_GATHER_INLINE_MAX, E = 4 boxes;
 * all of it in member i's block, on i's node):
 *
 *   offset in member i's area     field                         written by / read by
 *   0                             out: the last call i is       i / every sender before it
 *                                 done with (a line)            reuses a box (step 1)
 *   64                            cdone: CMA blocks of i read   i's readers (fetch-add, C3) /
 *                                 to the end, counted since     i (C5)
 *                                 the team began (a line)
 *   page + k*64, k < S            sseq[k]: position + 1 of the  i / the fragment's readers
 *                                 fragment in slot k            (step 3r)
 *   page + (S + k)*64             con[k]: reads of slot k,      readers (fetch-add) / i
 *                                 counted since the team began  (step 3w)
 *   2*page + (b*p + d)*L,         entry of call c, b = c % E,   i / member d
 *   b < E, d < p                  for member d: {seq, code,
 *                                 flags, bytes, start, share,
 *                                 wrc, wdone} on its first
 *                                 line; inline (up to I bytes):
 *                                 the block's first 32 bytes in
 *                                 place of start..wrc, the rest
 *                                 from the next line on
 *   2*page + E*p*L + (b*p + s)*64 reply of call c to sender s:   i / member s (C2)
 *                                 {seq, addr, len} (CMA, C1)
 *   2*page + E*p*(L + 64)         forward of call c of block k  i / the other members of
 *     + (b*p + k)*64              (two-level allgather, A2):    i's NUMA node (A3)
 *                                 {seq, start, rc}
 *   boxes + k*F', k < S           slot k: F bytes of data       i / the fragment's readers
 *
 *   L = roundup(64 + I - 32, 64) (I >= 32); boxes = 2*page + roundup(E*p*(L + 128), page);
 *   F' = roundup(F, page); member area = boxes + S*F'.
 *
 * A call (the call counter t->gather_call is the same on every member)
 * gives every member its streams, the blocks it sends, in a fixed order:
 *   gather(v):    a non-root: one stream, to the root;
 *   scatter(v):   the root: one stream to each member root+1, root+2, ...;
 *   allgather(v): every member: one stream, read by every other member
 *                 (two-level: by its node's members and one member of each
 *                 other node, which forwards it in a stream of its own, A1-A3);
 *   alltoall(v):  member i: one stream to each member i+1, i+2, ...
 * and the streams it reads: from the root (scatter), from every member
 * (root of a gather, allgather, alltoall) in the order i-1, i-2, ... so that
 * at the start member i reads from the member that writes to it first, and
 * no two readers start on the same sender (a forwarded block is read from
 * its carrier instead, A3). A member's own block is copied
 * within its buffers (not at all in place).
 * The fragments of all of a member's streams are numbered by one position
 * counter of its own, continuing from call to call; a stream of n > I bytes
 * is cut into fragments of min(F, roundup(n / S, page)) bytes (S of them up
 * to S * F bytes, so that copying in and out overlap even for a stream of a
 * few slots' worth), one position each; fragment at position x lives in slot
 * x % S.
 *
 * Every member, call c:
 *   1. if it sends: wait until every member's out >= c - E (box c % E was
 *      read in its previous use, call c - E; the lowest out read is cached,
 *      so outs are read about once every E - 1 calls, and never between
 *      calls in which it took every other member's entry, see the end of 3);
 *   2. for each stream, write the entry of each of its readers in box c % E:
 *      code (collective and root, checked by the reader), start (its first
 *      position; none inline), the stream's bytes, the bytes themselves when
 *      there are at most I, then seq = c (release);
 *   3. until every fragment of its streams is written and every stream it
 *      reads is read, in turns (a member never waits on one peer while it
 *      could serve another, so no cycle of waits can form):
 *      3w. its next fragment, position x, slot k = x % S: when con[k]
 *          (acquire) has reached the reads the slot's previous fragment
 *          expected, copy the fragment into slot k (with non-temporal
 *          stores and an sfence when t->shm_nt: the members do not all
 *          share a cache, docs/transport.md), then sseq[k] = x + 1
 *          (release);
 *      3r. for each stream it reads, in the order above: first its entry in
 *          the sender's box c % E once seq == c (acquire): check the code,
 *          take the bytes (inline: copy them, the stream is read); then each
 *          fragment x from start on once sseq[x % S] == x + 1 (acquire): copy
 *          it into the receive buffer, then con[x % S] += 1 (release);
 *      and back off (spin, then yield) after a turn that moved nothing;
 *   4. out = c (release).
 * A member that took call c's entry of every other member (its p - 1
 * streams, acquire of seq in 3r) knows that each of them finished call c - 1
 * (step 4 before it posts call c's entries) and caches c - 1 as the lowest
 * out for step 1.
 * A sender returns once its last fragment is written (its send buffer is
 * free then; its readers take it from shared memory later).
 *
 * Two-level allgather(v) (NUMA, the team's members on D nodes, 1 < D < p:
 * coll/nc_coll.h nc_numa_plan_t; work[n*p + k] is the member of node n that
 * carries block k into n, n's members in turn). Without it, each block
 * crosses into another node once per member there; with it, once per node:
 *   A1. a sender whose block goes through its slots (more than I bytes, not
 *       by CMA) and has at least NUMACOLL_ALLGATHER_NUMA_MIN bytes, with
 *       sends it two-level into each other node n where into[n]
 *       (NUMACOLL_NUMA_FORWARD: on, or auto and n's m members gain by it,
 *       nc_numa_plan_carry()): in step 2 the entry for each member d of n is
 *       flagged XG_CARRY when d = work[n*p + me], XG_VIA otherwise (nothing
 *       for the nodes without into[n]); the block's fragments are read by
 *       the members of its own node, one member of each such n, and every
 *       member of the other nodes. The sender decides, readers follow their
 *       entry's flag, so members that disagree on sizes still agree on who
 *       reads what.
 *   A2. the carrier, on taking an XG_CARRY entry (3r), opens a forward: the
 *       next frags(bytes) positions of its own ring, read by the other
 *       members of its node, written (3w, in position order after everything
 *       it posted before) from where it receives the block, fragment by
 *       fragment once it has copied that fragment in: its receive buffer, or
 *       when it expects fewer bytes than the sender's, scratch memory that
 *       takes the whole block (it keeps what fits at the end of the call and
 *       returns NUMACOLL_ERR_TRUNCATE, as with one level); then its forward
 *       line for block k in box c % E: start, rc = 0, seq = c (release).
 *       When it cannot (the entry is of another collective, or no scratch
 *       memory): rc = NUMACOLL_ERR_MISMATCH / _NOMEM and no positions.
 *       The line is rewritten E calls later, and its readers are done with
 *       it by then: they set out >= c (step 4) before the sender's step 1
 *       of call c + E lets it post the entry that the carrier takes before
 *       it rewrites the line (the carrier's own step 1 does the same when it
 *       sends).
 *   A3. a member whose entry is flagged XG_VIA takes the block's size from
 *       the entry (and compares it with what it expects, as in 3r), then
 *       waits for the carrier's forward line for block k (seq == c,
 *       acquire): rc != 0 fails its call with rc; else it reads the
 *       fragments from the carrier's slots from start on, as in 3r.
 * A forward never holds up a read (a carrier reads its senders in every
 * turn), and a fragment waits only on reads of its own or earlier positions
 * and, for a forward, on the carrier's read of the sender's block, which
 * waits on nothing forwarded: no cycle. Small blocks stay one level: a
 * second level would add a serial hand-off where a reader's line reads
 * from other nodes run in parallel.
 *
 * Single copy (CMA, shm/nc_cma.h). When the team may use CMA and a block of
 * more than I bytes reaches the switch point of its collective
 * (t->gather_cma_min: NUMACOLL_GATHER_CMA_MIN or the cost model's,
 * model/nc_model.h), its sender posts in step 2 an entry with flags = CMA,
 * start = the block's address in the sender and share = the bytes the sender
 * copies itself (no positions, no slots). The share is 0 (the reader copies
 * everything) except for gather and scatter with NUMACOLL_CMA_COOP=1, where
 * one side has p - 1 blocks to move and its peers one each: a gather's
 * sender writes (p-1)/p of its block into the root, a scatter's root writes
 * 1/p of each block into its reader, so the busiest member copies (p-1)/p
 * of a block per peer instead of a whole one. Then:
 *   C1. the reader, on taking the entry (3r), when share > 0: its reply in
 *       its own box c % E for the sender: {addr of its receive block, len =
 *       the bytes it takes}, then seq = c (release);
 *   C2. the sender (in its turns of 3), when share > 0: once the reply's seq
 *       == c (acquire), process_vm_writev of min(share, len) bytes into addr,
 *       the result in the entry's wrc, then wdone = c (release);
 *   C3. the reader: process_vm_readv of [share, min(bytes, len)) from the
 *       sender, straight into its receive block; then cdone of the sender
 *       += 1 (release);
 *   C4. the reader, when share > 0: waits (in its turns) until the entry's
 *       wdone == c (acquire); wrc != 0 fails its call too;
 *   C5. the sender returns only once cdone (acquire) counts every read of
 *       every CMA block it posted (and C2 is done for each), so its buffer
 *       outlives every copy from it.
 * A reader replies and counts itself in cdone for every CMA entry it takes,
 * also one it cannot use (another collective, a size mismatch), so the
 * sender never waits on a reader that stopped early; a reply is reused
 * E calls later by its writer, which has by then seen C2's wdone, so the
 * sender read it. An error of the sender's write (C2; EFAULT: a buffer that
 * is not accessible, ESRCH: the peer is gone) fails the calls of both ends
 * (wrc); an error of a receiver's read (C3) fails the receiver's call (a
 * sender whose own buffer is not accessible gets no error, its receivers
 * NUMACOLL_ERR_FAULT).
 *
 * A call that fails after step 2 (a member died, the team broke) leaves only
 * once no peer can still touch this member's buffers, since with CMA they
 * are read and written in place (the drain, xg_fail()):
 *   D1. every share of C2 not written yet is published as written, with wrc =
 *       the error (release of wdone; pairs with C4 and D3);
 *   D2. out = c - 1 + 2^30 (release; pairs with D4 and step 1): it will never
 *       read again (its reads of call c were system calls of its own thread,
 *       and a broken team makes no more calls); every failure of the team on
 *       this member does the same (nc_team_fail(), also from the other
 *       collectives), so no one waits in D4 for a member that stopped
 *       before call c;
 *   D3. for each block it replied to (C1): wait until wdone == c (acquire) or
 *       the sender died;
 *   D4. when reads of its CMA blocks are not all counted (cdone < cneed):
 *       wait until each of their receivers' out >= c (acquire) or it died.
 * D3 and D4 wait only for what the others publish before they wait (D1, D2),
 * so failing members never wait for each other in a cycle; a member that has
 * not failed publishes the same by finishing call c.
 *
 * Release/acquire pairs: seq of an entry (2) / its reader (3r, also for the
 * step-1 cache: the sender's out = c - 1 came before that seq); sseq (3w) /
 * its readers (3r); con (3r, a reader's release) / the writer reusing the
 * slot (3w); out (4) / a sender reusing its box (1); a forward line's seq
 * (A2) / the carrier's readers (A3); a reply's seq (C1) /
 * the sender (C2); wdone (C2) / the reader (C4); cdone (C3) / the sender
 * (C5).
 *
 * Nothing is ever reset: positions, con and an entry's seq (the call counted
 * in 64 bits) count up and never wrap, so a stale entry (c - E or older) is
 * never taken for call c; out is 32 bits, compared with wrap-safe
 * differences, and the cached lowest out of step 1 is read again once it is
 * 2^30 calls old (a member that sends rarely, such as a gather's root). A sender is at most E - 1
 * calls ahead of the slowest member (step 1), so an entry is never rewritten
 * before its reader took it; a slot is never rewritten before every reader of
 * its fragment counted itself in con.
 *
 * Mismatches. A reader whose receive size for a stream differs from the
 * sender's bytes takes the stream whole (the sender never waits on a reader
 * that stopped early), keeps what fits its buffer and returns
 * NUMACOLL_ERR_TRUNCATE; a different collective or root in the entry's code
 * gives NUMACOLL_ERR_MISMATCH / NUMACOLL_ERR_ROOT, nothing is copied. Members
 * that disagree on who sends to whom (a different root on one member, MPI's
 * "erroneous program") wait for each other as the MPI libraries do (with
 * CMA also when both only send, e.g. a scatter against a gather).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/nc_coll.h"
#include "core/nc_team.h"
#include "model/nc_model.h"
#include "shm/nc_cma.h"

#define XG_BOXES 4
#define XG_ENT_HDR 64 /* bytes of an entry before the rest of its inline data */
#define XG_INL_HEAD 32 /* bytes of an inline block in the entry's first line */
#define XG_CMA 1u      /* entry flag: the block is read from the sender's memory */
#define XG_VIA 2u      /* entry flag: read the block from the member that carries it (A3) */
#define XG_CARRY 4u    /* entry flag: read the block and carry it into your node (A2) */

enum { XG_GATHER = 1, XG_SCATTER, XG_ALLGATHER, XG_ALLTOALL };

typedef struct xg_ent {
    _Atomic uint64_t seq; /* the call (64-bit count) whose entry this is, published last */
    uint32_t code;        /* kind | (root + 1) << 4, published by seq */
    uint32_t flags;       /* XG_CMA, XG_VIA, XG_CARRY */
    uint64_t bytes;       /* the stream's bytes */
    union {
        struct {
            uint64_t start; /* first position of the stream; CMA: the block's address
                               in the sender */
            uint64_t share; /* CMA: the bytes the sender writes into the reader (C2) */
            int32_t wrc;    /* CMA: the result of that write, published by wdone */
            uint32_t pad[3];
        };
        char head[XG_INL_HEAD]; /* an inline block's first bytes, in the line of seq */
    };
    _Atomic uint64_t wdone; /* CMA: the call whose share the sender wrote (C2) */
    /* then the rest of an inline block */
} xg_ent_t;
NC_STATIC_ASSERT(sizeof(xg_ent_t) == XG_ENT_HDR, "an entry's header is 64 bytes");
NC_STATIC_ASSERT(offsetof(xg_ent_t, head) + XG_INL_HEAD == offsetof(xg_ent_t, wdone),
                 "an inline block's head ends where wdone begins");

/* A carrier's forward of one block into its node (A2). */
typedef struct xg_fwd {
    _Atomic uint64_t seq; /* the call, published last */
    uint64_t start;       /* the first position of the forward in the carrier's slots */
    int32_t rc;           /* 0, or why the carrier does not forward the block (no positions) */
    char pad[NC_CACHELINE - 2 * sizeof(uint64_t) - sizeof(int32_t)];
} xg_fwd_t;
NC_STATIC_ASSERT(sizeof(xg_fwd_t) == NC_CACHELINE, "a forward per line");

/* A reader's reply to a CMA sender (C1). */
typedef struct xg_rep {
    _Atomic uint64_t seq; /* the call, published last */
    uint64_t addr;        /* the reader's receive block */
    uint64_t len;         /* the bytes it takes */
    char pad[NC_CACHELINE - 3 * sizeof(uint64_t)];
} xg_rep_t;
NC_STATIC_ASSERT(sizeof(xg_rep_t) == NC_CACHELINE, "a reply per line");

typedef struct xg_line {
    _Atomic uint64_t v;
    char pad[NC_CACHELINE - sizeof(uint64_t)];
} xg_line_t;
NC_STATIC_ASSERT(sizeof(xg_line_t) == NC_CACHELINE, "a counter per line");

/* One block of a call as this member sees it: where, how many bytes. */
typedef struct xg_blk {
    char *p;
    size_t n;
} xg_blk_t;

/* A stream this member reads (3r). */
typedef struct xg_rd {
    int src;         /* whose slots it reads: the sender, or the carrier (A3) */
    int blk;         /* the sender */
    int state;       /* 0: entry not read, 1: fragments, 2: read, 3: CMA, waiting for C2,
                        4: waiting for the carrier's forward line (A3) */
    uint64_t x, end; /* next position, one past the last */
    size_t off, bytes;
    xg_blk_t to;     /* where it goes (to.n: what fits) */
    char *tmp;       /* a carrier that expects fewer bytes: the whole block, in to
                        (malloc), of which the first user.n bytes go to user at the end */
    xg_blk_t user;
} xg_rd_t;

/* A stream this member writes (2, 3w). */
typedef struct xg_wr {
    int dst;         /* -1: every other member (allgather), -2: a forward (A2) */
    xg_blk_t from;
    uint64_t start, end;
    int readers;     /* of each fragment */
    int rdi;         /* a forward: the stream st->rd[rdi] it forwards, written no faster
                        than that stream is read; else -1 */
    int cma;         /* by CMA: 1, 2 once its share is written (C2) */
    size_t share;
} xg_wr_t;

typedef struct xg_state {
    int S;
    size_t F, I, L, stride, boxes_off, page;
    uint32_t outs_low;   /* lowest out of the others, as last read (step 1) ... */
    uint32_t outs_at;    /* ... at this call: an older cache (2^30 calls) is read again */
    uint64_t call64;     /* the call counter in 64 bits (entries' seq), the same on every
                            member */
    uint64_t pos;        /* my next position */
    uint64_t cneed;      /* cdone once every read of my CMA blocks so far is counted */
    uint64_t *need;      /* need[k]: con[k] once every read of slot k's fragment is counted */
    char **area;         /* area[k]: member k's area */
    xg_rd_t *rd;         /* scratch, p entries */
    xg_wr_t *wr;         /* scratch, p entries */
    nc_numa_plan_t pl;   /* the NUMA groups (two-level allgather, A1-A3) */
    char *into;          /* into[d]: my allgather blocks from numa_min enter domain d
                            two-level (A1) */
    int two;             /* into[d] for some other domain d than mine; -1: not chosen yet */
    int readers2;        /* readers of such a block's fragments */
    size_t numa_min;
} xg_state_t;

/* What a call asks of this member, before it is turned into streams. */
typedef struct xg_call {
    int kind, root;
    /* send side: block for member d (or the one block when one == 1) */
    const char *sbase;
    size_t sbytes, sstride;
    const size_t *scounts, *sdispls;
    int sone;
    /* receive side: block from member s */
    char *rbase;
    size_t rbytes, rstride;
    const size_t *rcounts, *rdispls;
    int rone;
    int in_place; /* my own block is where it belongs already */
} xg_call_t;

static inline xg_blk_t send_blk(const xg_call_t *c, int d)
{
    if (c->sone)
        return (xg_blk_t){(char *)c->sbase, c->sbytes};
    if (c->scounts)
        return (xg_blk_t){(char *)c->sbase + c->sdispls[d], c->scounts[d]};
    return (xg_blk_t){(char *)c->sbase + (size_t)d * c->sstride, c->sbytes};
}
static inline xg_blk_t recv_blk(const xg_call_t *c, int s)
{
    if (c->rone)
        return (xg_blk_t){c->rbase, c->rbytes};
    if (c->rcounts)
        return (xg_blk_t){c->rbase + c->rdispls[s], c->rcounts[s]};
    return (xg_blk_t){c->rbase + (size_t)s * c->rstride, c->rbytes};
}

/* An entry: the header line (with an inline block's first XG_INL_HEAD
 * bytes), then the rest of up to I bytes inline. */
static size_t ent_bytes(size_t I)
{
    return nc_round_up(XG_ENT_HDR + (I > XG_INL_HEAD ? I - XG_INL_HEAD : 0), NC_CACHELINE);
}

/* Per box: p entries, p replies (C1), p forward lines (A2). */
static size_t boxes_bytes(int p, size_t I, size_t page)
{
    return nc_round_up((size_t)XG_BOXES * (size_t)p * (ent_bytes(I) + 2 * NC_CACHELINE), page);
}

nc_shm_need_t nc_gather_shm_need(int p, const nc_config_t *cfg, size_t page)
{
    const size_t F = nc_round_up((size_t)NC_CFG_NUM(cfg, GATHER_FRAG_SIZE), page);
    const size_t S = (size_t)NC_CFG_NUM(cfg, GATHER_SLOTS);
    const size_t I = (size_t)NC_CFG_NUM(cfg, GATHER_INLINE_MAX);
    return (nc_shm_need_t){.shared = 0, .member = 2 * page + boxes_bytes(p, I, page) + S * F};
}

static inline _Atomic uint32_t *out_of(const xg_state_t *st, int k)
{
    return (_Atomic uint32_t *)st->area[k];
}
static inline _Atomic uint64_t *cdone_of(const xg_state_t *st, int k)
{
    return &((xg_line_t *)st->area[k])[1].v;
}
static inline _Atomic uint64_t *sseq_of(const xg_state_t *st, int k, int slot)
{
    return &((xg_line_t *)(st->area[k] + st->page))[slot].v;
}
static inline _Atomic uint64_t *con_of(const xg_state_t *st, int k, int slot)
{
    return &((xg_line_t *)(st->area[k] + st->page))[st->S + slot].v;
}
static inline xg_ent_t *ent_of(const xg_state_t *st, int p, int k, uint64_t call, int d)
{
    return (xg_ent_t *)(st->area[k] + 2 * st->page +
                        ((size_t)(call % XG_BOXES) * (size_t)p + (size_t)d) * st->L);
}
static inline xg_rep_t *rep_of(const xg_state_t *st, int p, int k, uint64_t call, int s)
{
    return (xg_rep_t *)(st->area[k] + 2 * st->page + (size_t)XG_BOXES * (size_t)p * st->L +
                        ((size_t)(call % XG_BOXES) * (size_t)p + (size_t)s) * NC_CACHELINE);
}
static inline xg_fwd_t *fwd_of(const xg_state_t *st, int p, int k, uint64_t call, int blk)
{
    return (xg_fwd_t *)(st->area[k] + 2 * st->page +
                        (size_t)XG_BOXES * (size_t)p * (st->L + NC_CACHELINE) +
                        ((size_t)(call % XG_BOXES) * (size_t)p + (size_t)blk) * NC_CACHELINE);
}
static inline char *slot_data(const xg_state_t *st, int k, int slot)
{
    return st->area[k] + st->boxes_off + (size_t)slot * st->stride;
}

void nc_gather_fini(struct numacoll_team *t)
{
    xg_state_t *st = t->gather_state;
    if (!st)
        return;
    free(st->need);
    free(st->area);
    free(st->rd);
    free(st->wr);
    nc_numa_plan_free(&st->pl);
    free(st->into);
    free(st);
    t->gather_state = NULL;
}

int nc_gather_init(struct numacoll_team *t)
{
    const int p = t->p;
    const size_t page = t->seg.l.page;
    xg_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return NUMACOLL_ERR_NOMEM;
    t->gather_state = st;
    st->page = page;
    st->S = (int)NC_CFG_NUM(&t->cfg, GATHER_SLOTS);
    st->F = nc_round_up((size_t)NC_CFG_NUM(&t->cfg, GATHER_FRAG_SIZE), page);
    st->stride = st->F;
    st->I = (size_t)NC_CFG_NUM(&t->cfg, GATHER_INLINE_MAX);
    st->L = ent_bytes(st->I);
    st->boxes_off = 2 * page + boxes_bytes(p, st->I, page);
    if (t->seg.l.marea_bytes[NC_COLL_GATHER] != st->boxes_off + (size_t)st->S * st->F ||
        2 * (size_t)st->S * NC_CACHELINE > page)
        return NUMACOLL_ERR_MISMATCH; /* laid out for another configuration */
    st->need = calloc((size_t)st->S, sizeof *st->need);
    st->area = calloc((size_t)p, sizeof *st->area);
    st->rd = calloc((size_t)p, sizeof *st->rd);
    st->wr = calloc((size_t)p, sizeof *st->wr);
    if (!st->need || !st->area || !st->rd || !st->wr)
        return NUMACOLL_ERR_NOMEM;
    for (int k = 0; k < p; k++)
        st->area[k] = nc_seg_member_area(&t->seg, NC_COLL_GATHER, k);
    /* The groups always (a reader follows its sender's flags, A3); the
     * two-level choice is the sender's (A1), made at its first allgather
     * (numa_choose()). */
    int rc = nc_coll_numa_plan(t, &st->pl, 1);
    if (rc)
        return rc;
    if (!(st->into = calloc((size_t)st->pl.D, 1)))
        return NUMACOLL_ERR_NOMEM;
    st->two = -1;
    st->numa_min = (size_t)NC_CFG_NUM(&t->cfg, ALLGATHER_NUMA_MIN);
    /* What this member owns, in its own block: "call seq0 - 1 is over", no
     * fragment anywhere, no entry of any call to come. Exchange #2 of the
     * team creation orders these stores before any other member's first
     * call. */
    const uint32_t before = t->gather_call - 1u;
    const int me = t->rank;
    st->call64 = t->gather_call;
    atomic_store_explicit(out_of(st, me), before, memory_order_relaxed);
    atomic_store_explicit(cdone_of(st, me), 0, memory_order_relaxed);
    for (int k = 0; k < st->S; k++) {
        atomic_store_explicit(sseq_of(st, me, k), 0, memory_order_relaxed);
        atomic_store_explicit(con_of(st, me, k), 0, memory_order_relaxed);
    }
    for (int b = 0; b < XG_BOXES; b++)
        for (int d = 0; d < p; d++) {
            atomic_store_explicit(&ent_of(st, p, me, (uint32_t)b, d)->seq, st->call64 - 1u,
                                  memory_order_relaxed);
            atomic_store_explicit(&ent_of(st, p, me, (uint32_t)b, d)->wdone, st->call64 - 1u,
                                  memory_order_relaxed);
            atomic_store_explicit(&rep_of(st, p, me, (uint32_t)b, d)->seq, st->call64 - 1u,
                                  memory_order_relaxed);
            atomic_store_explicit(&fwd_of(st, p, me, (uint32_t)b, d)->seq, st->call64 - 1u,
                                  memory_order_relaxed);
        }
    st->outs_low = st->outs_at = before;
    return 0;
}

void nc_gather_abandon(struct numacoll_team *t)
{
    xg_state_t *st = t->gather_state;
    if (!st || !st->area || !st->area[t->rank])
        return;
    /* D2. release: pairs with the acquire in D4 and in wait_boxes_free(). */
    atomic_store_explicit(out_of(st, t->rank), t->gather_call - 1u + (1u << 30),
                          memory_order_release);
}

/* A1: into which domains my allgather blocks go two-level. At the first
 * allgather, not at init: the NUMA distance is agreed after the collectives'
 * init (core/nc_team.c), and so what numacoll-info and NUMACOLL_VERBOSE
 * print is what happens. */
static void numa_choose(const numacoll_team_t *t, xg_state_t *st)
{
    const nc_numa_plan_t *pl = &st->pl;
    const int mine = pl->dom[t->rank];
    st->two = 0;
    st->readers2 = nc_numa_plan_members(pl, mine) - 1;
    for (int d = 0; d < pl->D; d++) {
        if (d == mine)
            continue;
        st->into[d] = (char)nc_numa_plan_carry(pl, d, (int)NC_CFG_NUM(&t->cfg, NUMA_FORWARD),
                                               t->numa_ratio);
        st->two |= st->into[d];
        st->readers2 += st->into[d] ? 1 : nc_numa_plan_members(pl, d);
    }
}

/* Step 1. */
static int wait_boxes_free(numacoll_team_t *t, xg_state_t *st, uint32_t c)
{
    const uint32_t need = c - (uint32_t)XG_BOXES;
    nc_backoff_t b;
    int rc;
    /* The cache answers only if it is recent: a member that has not sent for
     * 2^30 calls (a gather's root) would otherwise compare across the wrap. */
    if (c - st->outs_at < (1u << 30) && (int32_t)(st->outs_low - need) >= 0)
        return 0;
    nc_backoff_init(&b, &t->wait);
    for (;;) {
        uint32_t low = c - 1u;
        for (int k = 0; k < t->p; k++) {
            if (k == t->rank)
                continue;
            /* acquire: pairs with member k's release of out in step 4: its
             * reads of our box's previous use happen before we rewrite it. */
            uint32_t o = atomic_load_explicit(out_of(st, k), memory_order_acquire);
            if ((int32_t)(o - low) < 0)
                low = o;
        }
        st->outs_low = low;
        st->outs_at = c;
        if ((int32_t)(low - need) >= 0)
            return 0;
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
    }
}

/* The fragment size of a stream of n > I bytes: about n / S in whole pages
 * (at least one, at most F), so that even a stream of a few slots' worth is
 * cut into S fragments and its copy in and copy out overlap; the same on the
 * writer and the readers, who know n. */
static inline size_t frag_of(const xg_state_t *st, size_t n)
{
    const size_t f = nc_round_up((n + (size_t)st->S - 1) / (size_t)st->S, st->page);
    return f < st->F ? f : st->F;
}

static inline uint64_t frags(const xg_state_t *st, size_t n)
{
    return n <= st->I ? 0 : (n + frag_of(st, n) - 1) / frag_of(st, n);
}

/* Step 2 for one stream: the entry of reader d. */
static void post_entry(const xg_state_t *st, int p, int me, uint64_t c, uint32_t code, int d,
                       const xg_wr_t *w, uint32_t flags)
{
    xg_ent_t *e = ent_of(st, p, me, c, d);
    const size_t n = w->from.n;
    e->code = code;
    e->flags = (w->cma ? XG_CMA : 0) | flags;
    e->bytes = n;
    if (n <= st->I) {
        /* inline: the head in seq's line, so a block of up to XG_INL_HEAD
         * bytes reaches its reader in the transfer that brings seq */
        const size_t h = n < XG_INL_HEAD ? n : XG_INL_HEAD;
        if (h)
            memcpy(e->head, w->from.p, h);
        if (n > h)
            memcpy((char *)e + XG_ENT_HDR, w->from.p + h, n - h);
    } else {
        e->start = w->cma ? (uint64_t)(uintptr_t)w->from.p : w->start;
        e->share = w->share;
    }
    /* release: the entry and its inline bytes before seq; pairs with the
     * acquire in read_step() (3r). */
    atomic_store_explicit(&e->seq, c, memory_order_release);
}

/* C1 and C3 for stream r, whose entry e was just taken. */
static void cma_read(numacoll_team_t *t, xg_state_t *st, xg_rd_t *r, const xg_ent_t *e,
                     uint64_t c, int *err)
{
    const size_t share = e->share < r->bytes ? (size_t)e->share : r->bytes;
    if (share) {
        xg_rep_t *y = rep_of(st, t->p, t->rank, c, r->src);
        y->addr = (uint64_t)(uintptr_t)r->to.p;
        y->len = r->to.n;
        /* release: addr and len before seq; pairs with the acquire in
         * cma_write() (C2). */
        atomic_store_explicit(&y->seq, c, memory_order_release);
    }
    if (r->to.n > share) {
        const int rc = nc_cma_read(t->pids[r->src], r->to.p + share, e->start + share,
                                   r->to.n - share);
        if (rc && !*err) {
            *err = rc;
            nc_log_error("gather family: member %d reading %zu bytes of member %d by CMA: %s",
                         t->rank, r->to.n - share, r->src, numacoll_strerror(rc));
        }
    }
    /* release: my read of the sender's block is over before it may reuse
     * it; pairs with the acquire of cdone in xg_run() (C5). */
    atomic_fetch_add_explicit(cdone_of(st, r->src), 1, memory_order_release);
    t->gather_cma++;
    r->state = share ? 3 : 2;
}

/* C2 for stream w (share > 0): 1 if it moved. */
static int cma_write(numacoll_team_t *t, xg_state_t *st, xg_wr_t *w, uint64_t c, int *err)
{
    const xg_rep_t *y = rep_of(st, t->p, w->dst, c, t->rank);
    /* acquire: pairs with the release of the reply's seq in cma_read() (C1). */
    if (atomic_load_explicit(&y->seq, memory_order_acquire) != c)
        return 0;
    const size_t n = w->share < y->len ? w->share : (size_t)y->len;
    const int rc = n ? nc_cma_write(t->pids[w->dst], y->addr, w->from.p, n) : 0;
    if (rc && !*err) {
        *err = rc;
        nc_log_error("gather family: member %d writing %zu bytes into member %d by CMA: %s",
                     t->rank, n, w->dst, numacoll_strerror(rc));
    }
    xg_ent_t *e = ent_of(st, t->p, t->rank, c, w->dst);
    e->wrc = rc;
    /* release: the written bytes and wrc before wdone; pairs with the
     * acquire in read_step() (C4). */
    atomic_store_explicit(&e->wdone, c, memory_order_release);
    w->cma = 2;
    return 1;
}

/* A2: the carrier of the block of stream r (its entry just taken) opens the
 * forward as write stream st->wr[*nw]: when it receives the block whole
 * (rc == 0), it forwards it from its receive buffer; else it tells its node
 * why not, and forwards nothing. */
static void fwd_open(numacoll_team_t *t, xg_state_t *st, xg_rd_t *r, uint64_t c, int rc, int *nw)
{
    const int me = t->rank;
    const nc_numa_plan_t *pl = &st->pl;
    const int dm = pl->dom[me];
    xg_fwd_t *f = fwd_of(st, t->p, me, c, r->blk);
    f->rc = rc;
    f->start = st->pos;
    if (!rc) {
        xg_wr_t *w = &st->wr[(*nw)++];
        *w = (xg_wr_t){.dst = -2, .from = r->to, .start = st->pos,
                       .readers = nc_numa_plan_members(pl, dm) - 1,
                       .rdi = (int)(r - st->rd)};
        w->end = st->pos += frags(st, r->bytes);
        t->gather_fwd++;
    }
    /* release: start and rc before seq; pairs with the acquire in
     * read_step() (A3). */
    atomic_store_explicit(&f->seq, c, memory_order_release);
}

/* Step 3r on stream r: 1 if it moved. */
static int read_step(numacoll_team_t *t, xg_state_t *st, xg_rd_t *r, uint64_t c, uint32_t code,
                     int *err, int *nw)
{
    const int p = t->p;
    if (r->state == 4) {
        const xg_fwd_t *f = fwd_of(st, p, r->src, c, r->blk);
        /* acquire: pairs with the release of seq in fwd_open() (A2). */
        if (atomic_load_explicit(&f->seq, memory_order_acquire) != c)
            return 0;
        if (f->rc) {
            if (!*err) {
                *err = f->rc;
                nc_log_error("gather family: member %d cannot receive member %d's block: "
                             "member %d, which carries it into their NUMA node, failed to "
                             "receive it (%s)",
                             t->rank, r->blk, r->src, numacoll_strerror(f->rc));
            }
            r->state = 2;
            return 1;
        }
        r->x = f->start;
        r->end = r->x + frags(st, r->bytes);
        r->state = 1;
        t->gather_via++;
        return 1;
    }
    if (r->state == 3) {
        const xg_ent_t *e = ent_of(st, p, r->src, c, t->rank);
        /* acquire: pairs with the release of wdone in cma_write() (C2): the
         * sender's share is in my buffer. */
        if (atomic_load_explicit(&e->wdone, memory_order_acquire) != c)
            return 0;
        if (e->wrc && !*err)
            *err = e->wrc;
        r->state = 2;
        return 1;
    }
    if (r->state == 0) {
        xg_ent_t *e = ent_of(st, p, r->src, c, t->rank);
        /* acquire: pairs with the release of seq in post_entry() (step 2). */
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != c)
            return 0;
        r->bytes = (size_t)e->bytes;
        const int cma = e->flags & XG_CMA;
        const int inl = !cma && r->bytes <= st->I; /* no start then */
        r->x = inl ? 0 : e->start;
        r->end = cma || inl ? r->x : e->start + frags(st, r->bytes);
        r->off = 0;
        int bad = 0;
        if (e->code != code) {
            bad = 1;
            if (!*err) {
                const int theirs = (int)(e->code >> 4) - 1, mine = (int)(code >> 4) - 1;
                *err = (e->code & 15u) != (code & 15u) ? NUMACOLL_ERR_MISMATCH
                       : theirs != mine                ? NUMACOLL_ERR_ROOT
                                                       : NUMACOLL_ERR_MISMATCH;
                nc_log_error("gather family: member %d called collective %u (root %d), member "
                             "%d collective %u (root %d)",
                             t->rank, code & 15u, mine, r->src, e->code & 15u, theirs);
            }
        } else if (r->bytes != r->to.n) {
            if (!*err) {
                *err = NUMACOLL_ERR_TRUNCATE;
                nc_log_error("gather family: member %d expects %zu bytes from member %d, which "
                             "sends %zu",
                             t->rank, r->to.n, r->src, r->bytes);
            }
            if (r->to.n > r->bytes)
                r->to.n = r->bytes;
        }
        if (bad)
            r->to.n = 0;
        if (cma) {
            cma_read(t, st, r, e, c, err);
        } else if (r->bytes <= st->I) {
            const size_t h = r->to.n < XG_INL_HEAD ? r->to.n : XG_INL_HEAD;
            if (h)
                memcpy(r->to.p, e->head, h);
            if (r->to.n > h)
                memcpy(r->to.p + h, (const char *)e + XG_ENT_HDR, r->to.n - h);
            r->state = 2;
        } else if ((e->flags & XG_VIA) && st->pl.work) {
            /* A3: from its carrier, whatever this member expects (the carrier
             * counts it among the forward's readers) */
            r->src = st->pl.work[st->pl.dom[t->rank] * p + r->blk];
            r->state = 4;
        } else {
            if ((e->flags & XG_CARRY) && st->pl.work) {
                /* A2: a carrier that expects fewer bytes still forwards the
                 * whole block, so its node receives what it would from the
                 * sender; it keeps what fits (xg_run()) */
                int frc = bad ? NUMACOLL_ERR_MISMATCH : 0;
                if (!bad && r->to.n < r->bytes) {
                    if ((r->tmp = malloc(r->bytes))) {
                        r->user = r->to;
                        r->to = (xg_blk_t){r->tmp, r->bytes};
                    } else {
                        frc = NUMACOLL_ERR_NOMEM;
                    }
                }
                fwd_open(t, st, r, c, frc, nw);
            }
            r->state = 1;
        }
        return 1;
    }
    const int k = (int)(r->x % (uint64_t)st->S);
    /* acquire: pairs with the release of sseq in step 3w: the fragment's
     * bytes are visible. */
    if (atomic_load_explicit(sseq_of(st, r->src, k), memory_order_acquire) != r->x + 1)
        return 0;
    const size_t fs = frag_of(st, r->bytes);
    const size_t len = r->bytes - r->off < fs ? r->bytes - r->off : fs;
    if (r->off < r->to.n) {
        const size_t keep = r->to.n - r->off < len ? r->to.n - r->off : len;
        nc_copy(r->to.p + r->off, slot_data(st, r->src, k), keep);
    }
    r->off += len;
    /* release: my copy out of the slot happens before its writer reuses it;
     * pairs with the acquire of con in step 3w. */
    atomic_fetch_add_explicit(con_of(st, r->src, k), 1, memory_order_release);
    if (++r->x == r->end)
        r->state = 2;
    return 1;
}

/* Does the block of w go by CMA, and with which share (see the top)? */
static void cma_choose(const numacoll_team_t *t, const xg_state_t *st, int kind, xg_wr_t *w)
{
    static const int model_kind[] = {0, NC_XG_ROOTED, NC_XG_SCATTER, NC_XG_ALLGATHER,
                                     NC_XG_ALLTOALL};
    const size_t n = w->from.n;
    w->cma = 0;
    w->share = 0;
    if (!t->cma || n <= st->I || n < t->gather_cma_min[model_kind[kind]] || !w->from.p)
        return;
    w->cma = 1;
    if (!NC_CFG_NUM(&t->cfg, CMA_COOP) || (kind != XG_GATHER && kind != XG_SCATTER))
        return;
    /* gather: the sender writes (p-1)/p; scatter: the root writes 1/p; in
     * whole pages, not below the size worth a system call of its own */
    const size_t p = (size_t)t->p;
    size_t share = kind == XG_GATHER ? n / p * (p - 1) : n / p;
    share = share / st->page * st->page;
    if (share >= NC_CMA_SHARE_MIN && n - share >= NC_CMA_SHARE_MIN / 4)
        w->share = share;
}

/* The drain D1-D4 of a call that fails with rc after step 2 (see the top). */
static int xg_fail(numacoll_team_t *t, xg_state_t *st, uint32_t c, uint64_t c64, int nw, int nr,
                   int rc)
{
    const int me = t->rank, p = t->p;
    int posted = 0;
    for (int i = 0; i < nr; i++) { /* A2's scratch: nothing reads it */
        free(st->rd[i].tmp);
        st->rd[i].tmp = NULL;
    }
    for (int i = 0; i < nw; i++) {
        xg_wr_t *w = &st->wr[i];
        if (w->cma == 1 && w->share) { /* D1 */
            xg_ent_t *e = ent_of(st, p, me, c64, w->dst);
            e->wrc = rc;
            /* release: wrc before wdone; pairs with the acquire in
             * read_step() (C4) and in D3. */
            atomic_store_explicit(&e->wdone, c64, memory_order_release);
            w->cma = 2;
        }
        posted |= w->cma != 0;
    }
    rc = nc_team_fail(t, rc); /* D2, nc_gather_abandon() */
    nc_backoff_t b;
    for (int i = 0; i < nr; i++) { /* D3 */
        const xg_rd_t *r = &st->rd[i];
        if (r->state != 3)
            continue;
        const xg_ent_t *e = ent_of(st, p, r->src, c64, me);
        nc_backoff_init(&b, &t->wait);
        /* acquire: pairs with the release of wdone in cma_write() or D1. */
        while (atomic_load_explicit(&e->wdone, memory_order_acquire) != c64 &&
               !nc_peer_gone(&b, r->src))
            ;
    }
    /* D4. acquire (both loads): pairs with the release of cdone in C3 and
     * of out in step 4 or D2. */
    if (!posted || atomic_load_explicit(cdone_of(st, me), memory_order_acquire) >= st->cneed)
        return rc;
    for (int i = 0; i < nw; i++) {
        const xg_wr_t *w = &st->wr[i];
        if (!w->cma)
            continue;
        for (int d = 0; d < p; d++) {
            if (d == me || (w->dst >= 0 && d != w->dst))
                continue;
            nc_backoff_init(&b, &t->wait);
            while ((int32_t)(atomic_load_explicit(out_of(st, d), memory_order_acquire) - c) < 0 &&
                   !nc_peer_gone(&b, d))
                ;
        }
    }
    return rc;
}

static int xg_run(numacoll_team_t *t, const xg_call_t *cl)
{
    xg_state_t *st = t->gather_state;
    const int p = t->p, me = t->rank, kind = cl->kind, root = cl->root;
    const uint32_t c = t->gather_call++;
    const uint64_t c64 = st->call64++;
    const uint32_t code = (uint32_t)kind | (uint32_t)(root + 1) << 4;
    int nw = 0, nr = 0, rc = 0, err = 0, ncma = 0;

    /* The streams of this call (see the list at the top). */
    if (kind == XG_GATHER) {
        if (me != root)
            st->wr[nw++] = (xg_wr_t){.dst = root, .from = send_blk(cl, root)};
        else
            for (int j = 1; j < p; j++)
                st->rd[nr++] = (xg_rd_t){.src = (me - j + p) % p};
    } else if (kind == XG_SCATTER) {
        if (me == root)
            for (int j = 1; j < p; j++)
                st->wr[nw++] = (xg_wr_t){.dst = (me + j) % p, .from = send_blk(cl, (me + j) % p)};
        else
            st->rd[nr++] = (xg_rd_t){.src = root};
    } else if (kind == XG_ALLGATHER) {
        if (st->two < 0)
            numa_choose(t, st);
        st->wr[nw++] = (xg_wr_t){.dst = -1, .from = send_blk(cl, me)};
        for (int j = 1; j < p; j++)
            st->rd[nr++] = (xg_rd_t){.src = (me - j + p) % p};
    } else {
        for (int j = 1; j < p; j++) {
            st->wr[nw++] = (xg_wr_t){.dst = (me + j) % p, .from = send_blk(cl, (me + j) % p)};
            st->rd[nr++] = (xg_rd_t){.src = (me - j + p) % p};
        }
    }
    for (int i = 0; i < nr; i++) {
        st->rd[i].blk = st->rd[i].src;
        st->rd[i].to = recv_blk(cl, st->rd[i].src);
    }

    /* 1, 2 */
    if (nw) {
        if ((rc = wait_boxes_free(t, st, c)) < 0)
            return nc_team_fail(t, rc);
        for (int i = 0; i < nw; i++) {
            xg_wr_t *w = &st->wr[i];
            cma_choose(t, st, kind, w);
            w->start = st->pos;
            w->rdi = -1;
            w->readers = w->dst >= 0 ? 1 : p - 1;
            /* A1: two-level, read by my node's members and one member of
             * each other node */
            const nc_numa_plan_t *pl = &st->pl;
            const int two = w->dst < 0 && st->two && !w->cma && w->from.n > st->I &&
                            w->from.n >= st->numa_min;
            if (two)
                w->readers = st->readers2;
            if (w->cma) {
                w->end = w->start;
                st->cneed += w->dst >= 0 ? 1u : (uint64_t)(p - 1);
                ncma += w->share > 0;
                t->gather_cma++;
            } else {
                w->end = st->pos += frags(st, w->from.n);
            }
            if (w->dst >= 0) {
                post_entry(st, p, me, c64, code, w->dst, w, 0);
                continue;
            }
            for (int d = 0; d < p; d++) {
                if (d == me)
                    continue;
                const int dd = pl->dom[d];
                const uint32_t fl = !two || dd == pl->dom[me] || !st->into[dd] ? 0
                                    : pl->work[dd * p + me] == d ? XG_CARRY
                                                                 : XG_VIA;
                post_entry(st, p, me, c64, code, d, w, fl);
            }
        }
    }

    /* My own block, while the first entries travel. */
    if (!cl->in_place && (kind != XG_GATHER || me == root) && (kind != XG_SCATTER || me == root)) {
        const xg_blk_t from = send_blk(cl, me), to = recv_blk(cl, me);
        if (from.n != to.n && !err) {
            err = NUMACOLL_ERR_TRUNCATE;
            nc_log_error("gather family: member %d sends itself %zu bytes but expects %zu",
                         me, from.n, to.n);
        }
        if (from.p != to.p)
            nc_copy(to.p, from.p, from.n < to.n ? from.n : to.n);
    }

    /* 3 */
    uint64_t x = nw ? st->wr[0].start : 0;
    int wi = 0, ri = 0;
    nc_backoff_t b;
    nc_backoff_init(&b, &t->wait);
    for (;;) {
        int moved = 0;
        /* 3w: as many fragments as free slots */
        while (wi < nw) {
            xg_wr_t *w = &st->wr[wi];
            if (x == w->end) {
                wi++;
                if (wi < nw)
                    x = st->wr[wi].start;
                continue;
            }
            const int k = (int)(x % (uint64_t)st->S);
            /* acquire: pairs with the readers' release of con in 3r: they
             * copied the slot's previous fragment out. */
            if (atomic_load_explicit(con_of(st, me, k), memory_order_acquire) < st->need[k])
                break;
            const size_t fs = frag_of(st, w->from.n);
            const size_t off = (size_t)(x - w->start) * fs;
            const size_t len = w->from.n - off < fs ? w->from.n - off : fs;
            /* A2: a forward's fragment once this member has received it */
            if (w->rdi >= 0 && st->rd[w->rdi].state != 2 && st->rd[w->rdi].off < off + len)
                break;
            if (t->shm_nt) {
                /* streamed past my cache (NUMACOLL_SHM_NT), then ordered */
                nc_copy_nt(slot_data(st, me, k), w->from.p + off, len);
                nc_copy_nt_fence();
            } else {
                nc_copy(slot_data(st, me, k), w->from.p + off, len);
            }
            st->need[k] += (uint64_t)w->readers;
            /* release: the fragment before its position (streamed stores:
             * after the fence above); pairs with the acquire of sseq in
             * read_step() (3r). */
            atomic_store_explicit(sseq_of(st, me, k), x + 1, memory_order_release);
            x++;
            moved = 1;
        }
        /* C2: the shares of my CMA blocks whose readers replied */
        for (int i = 0; ncma && i < nw; i++)
            if (st->wr[i].cma == 1 && st->wr[i].share && cma_write(t, st, &st->wr[i], c64, &err)) {
                ncma--;
                moved = 1;
            }
        /* 3r: every stream not read yet, each as far as it goes */
        int open = 0;
        for (int i = ri; i < nr; i++) {
            xg_rd_t *r = &st->rd[i];
            while (r->state != 2 && read_step(t, st, r, c64, code, &err, &nw))
                moved = 1;
            if (r->state != 2)
                open = 1;
            else if (i == ri)
                ri++;
        }
        /* C5. acquire: pairs with the readers' release of cdone in
         * cma_read() (C3): they are done with my blocks. */
        if (wi == nw && !open && !ncma &&
            atomic_load_explicit(cdone_of(st, me), memory_order_acquire) >= st->cneed)
            break;
        if (moved) {
            nc_backoff_init(&b, &t->wait);
            continue;
        }
        if ((rc = nc_backoff(&b)) < 0)
            return xg_fail(t, st, c, c64, nw, nr, rc);
    }
    /* A2: what fits of the blocks carried through scratch (forwarded whole by now) */
    for (int i = 0; i < nr; i++)
        if (st->rd[i].tmp) {
            memcpy(st->rd[i].user.p, st->rd[i].tmp, st->rd[i].user.n);
            free(st->rd[i].tmp);
            st->rd[i].tmp = NULL;
        }

    /* Step 1's cache, for free: a member that took call c's entry of every
     * other member (acquire in 3r; its p - 1 streams read p - 1 senders)
     * knows that each of them has finished call c - 1 (out = c - 1 in step 4
     * before it posts call c's entries), so back-to-back allgathers and
     * alltoalls never read an out. */
    if (nr == p - 1 && (int32_t)(c - 1u - st->outs_low) > 0) {
        st->outs_low = c - 1u;
        st->outs_at = c;
    }
    /* 4. release: my reads of every entry and slot of call c happen before
     * their senders reuse them; pairs with the acquire in wait_boxes_free(). */
    atomic_store_explicit(out_of(st, me), c, memory_order_release);
    /* a sender gone during its CMA read (C3): the team is unusable */
    return err == NUMACOLL_ERR_PEER_DEAD ? nc_team_fail(t, err) : err;
}

/* ---- entry points -------------------------------------------------------------------- */

static int run(numacoll_team_t *t, xg_call_t *cl)
{
    if (!t || cl->root >= t->p)
        return NUMACOLL_ERR_INVAL;
    if (t->broken)
        return NUMACOLL_ERR_BROKEN;
    if (t->p == 1) {
        const xg_blk_t from = send_blk(cl, 0), to = recv_blk(cl, 0);
        if (cl->in_place)
            return 0;
        if (from.n && from.p != to.p)
            memmove(to.p, from.p, from.n < to.n ? from.n : to.n);
        return from.n == to.n ? 0 : NUMACOLL_ERR_TRUNCATE;
    }
    /* Broadcasts this member deferred first (see numacoll_barrier()); a size
     * mismatch there is reported after this call, as the reductions do. */
    int frc = t->ring_pending ? nc_bcast_flush(t) : 0;
    if (frc && !nc_call_error(frc))
        return frc;
    int rc = xg_run(t, cl);
    return rc ? rc : frc;
}

static inline int in_place(const void *buf)
{
    return buf == NULL || buf == NUMACOLL_IN_PLACE;
}

NUMACOLL_API int numacoll_gatherv(numacoll_team_t *t, const void *sendbuf, size_t sendbytes,
                                  void *recvbuf, const size_t *recvbytes, const size_t *displs,
                                  int root)
{
    if (!t || root < 0 || root >= t->p)
        return NUMACOLL_ERR_INVAL;
    const int me_root = t->rank == root, ip = me_root && in_place(sendbuf);
    if (me_root && (!recvbytes || !displs))
        return NUMACOLL_ERR_INVAL;
    xg_call_t cl = {.kind = XG_GATHER, .root = root, .sbase = sendbuf, .sbytes = sendbytes,
                    .sone = 1, .rbase = recvbuf, .rcounts = recvbytes, .rdispls = displs,
                    .in_place = ip};
    if (ip) {
        cl.sone = 0;
        cl.sbase = recvbuf;
        cl.scounts = recvbytes;
        cl.sdispls = displs;
    }
    return run(t, &cl);
}

NUMACOLL_API int numacoll_gather(numacoll_team_t *t, const void *sendbuf, size_t bytes,
                                 void *recvbuf, int root)
{
    if (!t || root < 0 || root >= t->p)
        return NUMACOLL_ERR_INVAL;
    const int ip = t->rank == root && in_place(sendbuf);
    xg_call_t cl = {.kind = XG_GATHER,
                    .root = root,
                    .sbase = ip ? (char *)recvbuf + (size_t)root * bytes : sendbuf,
                    .sbytes = bytes, .sone = 1, .rbase = recvbuf, .rbytes = bytes,
                    .rstride = bytes, .in_place = ip};
    return run(t, &cl);
}

NUMACOLL_API int numacoll_scatterv(numacoll_team_t *t, const void *sendbuf,
                                   const size_t *sendbytes, const size_t *displs, void *recvbuf,
                                   size_t recvbytes, int root)
{
    if (!t || root < 0 || root >= t->p)
        return NUMACOLL_ERR_INVAL;
    const int me_root = t->rank == root, ip = me_root && in_place(recvbuf);
    if (me_root && (!sendbytes || !displs))
        return NUMACOLL_ERR_INVAL;
    xg_call_t cl = {.kind = XG_SCATTER, .root = root, .sbase = sendbuf, .scounts = sendbytes,
                    .sdispls = displs, .rbase = recvbuf, .rbytes = recvbytes, .rone = 1,
                    .in_place = ip};
    return run(t, &cl);
}

NUMACOLL_API int numacoll_scatter(numacoll_team_t *t, const void *sendbuf, void *recvbuf,
                                  size_t bytes, int root)
{
    if (!t || root < 0 || root >= t->p)
        return NUMACOLL_ERR_INVAL;
    const int ip = t->rank == root && in_place(recvbuf);
    xg_call_t cl = {.kind = XG_SCATTER, .root = root, .sbase = sendbuf, .sbytes = bytes,
                    .sstride = bytes, .rbase = recvbuf, .rbytes = bytes, .rone = 1,
                    .in_place = ip};
    return run(t, &cl);
}

NUMACOLL_API int numacoll_allgatherv(numacoll_team_t *t, const void *sendbuf, size_t sendbytes,
                                     void *recvbuf, const size_t *recvbytes,
                                     const size_t *displs)
{
    if (!t || !recvbytes || !displs)
        return NUMACOLL_ERR_INVAL;
    const int ip = in_place(sendbuf);
    xg_call_t cl = {.kind = XG_ALLGATHER, .root = -1, .sbase = sendbuf, .sbytes = sendbytes,
                    .sone = 1, .rbase = recvbuf, .rcounts = recvbytes, .rdispls = displs,
                    .in_place = ip};
    if (ip) {
        cl.sbase = (char *)recvbuf + displs[t->rank];
        cl.sbytes = recvbytes[t->rank];
    }
    return run(t, &cl);
}

NUMACOLL_API int numacoll_allgather(numacoll_team_t *t, const void *sendbuf, size_t bytes,
                                    void *recvbuf)
{
    if (!t)
        return NUMACOLL_ERR_INVAL;
    const int ip = in_place(sendbuf);
    xg_call_t cl = {.kind = XG_ALLGATHER, .root = -1,
                    .sbase = ip ? (char *)recvbuf + (size_t)t->rank * bytes : sendbuf,
                    .sbytes = bytes, .sone = 1, .rbase = recvbuf, .rbytes = bytes,
                    .rstride = bytes, .in_place = ip};
    return run(t, &cl);
}

NUMACOLL_API int numacoll_alltoallv(numacoll_team_t *t, const void *sendbuf,
                                    const size_t *sendbytes, const size_t *sdispls, void *recvbuf,
                                    const size_t *recvbytes, const size_t *rdispls)
{
    if (!t || !recvbytes || !rdispls || (!in_place(sendbuf) && (!sendbytes || !sdispls)))
        return NUMACOLL_ERR_INVAL;
    xg_call_t cl = {.kind = XG_ALLTOALL, .root = -1, .sbase = sendbuf, .scounts = sendbytes,
                    .sdispls = sdispls, .rbase = recvbuf, .rcounts = recvbytes,
                    .rdispls = rdispls};
    char *copy = NULL;
    if (in_place(sendbuf)) {
        /* Blocks are replaced as they arrive: send from a copy (the MPI
         * libraries do the same). */
        size_t hi = 0;
        for (int k = 0; k < t->p; k++)
            if (recvbytes[k] && rdispls[k] + recvbytes[k] > hi)
                hi = rdispls[k] + recvbytes[k];
        if (!(copy = malloc(hi ? hi : 1)))
            return NUMACOLL_ERR_NOMEM;
        nc_copy(copy, recvbuf, hi);
        cl.sbase = copy;
        cl.scounts = recvbytes;
        cl.sdispls = rdispls;
    }
    int rc = run(t, &cl);
    free(copy);
    return rc;
}

NUMACOLL_API int numacoll_alltoall(numacoll_team_t *t, const void *sendbuf, void *recvbuf,
                                   size_t bytes)
{
    if (!t)
        return NUMACOLL_ERR_INVAL;
    xg_call_t cl = {.kind = XG_ALLTOALL, .root = -1, .sbase = sendbuf, .sbytes = bytes,
                    .sstride = bytes, .rbase = recvbuf, .rbytes = bytes, .rstride = bytes};
    char *copy = NULL;
    if (in_place(sendbuf)) {
        const size_t all = (size_t)t->p * bytes;
        if (!(copy = malloc(all ? all : 1)))
            return NUMACOLL_ERR_NOMEM;
        nc_copy(copy, recvbuf, all);
        cl.sbase = copy;
    }
    int rc = run(t, &cl);
    free(copy);
    return rc;
}
