/*
 * Reduce and Allreduce: every member's contribution goes once into its own
 * NUMA-local slot; a small call is combined from the slots in one hand-off
 * (the smallest, in a team of up to 4, from one line all members share), a
 * large one is reduce-scattered (member i reduces the i-th slice of every
 * round, all members at once) and gathered. On a node with several NUMA
 * nodes a large call reduces each slice over every NUMA node first (4a), then
 * over the nodes' partials (4b), so each slice crosses a node boundary once
 * per NUMA node instead of once per member; an allreduce's result slices can
 * enter each NUMA node once too (5f).
 *
 * Shared memory (declared in coll/nc_coll.h: S = NUMACOLL_REDUCE_SLOTS,
 * F = NUMACOLL_REDUCE_FRAG_SIZE; all of it in member i's block, on its node;
 * the call lines in member 0's):
 *
 *   offset in member i's area        field                       written by / read by
 *   0                                out: the last round i is    i / every member before it
 *                                    done with (line 0)          reuses a slot (step 1)
 *   64                               done: the last round whose  i / the readers (step 5)
 *                                    slice i is reduced (line 1)
 *   68                               derr: the last CMA round    i / the readers (X5)
 *                                    whose slice failed
 *   128                              part: the last round whose  i / the slices' owners
 *                                    partials are in i's slot    (step 4b)
 *                                    (line 2, two-level)
 *   192                              fwd: the last round whose   i / its domain's readers
 *                                    forwarded slices are in     (step 5)
 *                                    i's slot (line 3, 5f)
 *   256 + s*64, s < S (member 0's    the call line of slot s     every member / every
 *   area only, p <= 4)               (line 4 + s): member k's    member (steps 2l, 3l)
 *                                    word {seq, sig} and its
 *                                    data at k * P
 *   page + k*stride, k < S           slot k: {seq, code, elem,   i / every member
 *                                    bytes, root} and the first
 *                                    32 data bytes on line 0,
 *                                    then F - 32 more data bytes
 *                                    (a large round's from doff)
 *
 *   stride = roundup(32 + F, page); member area = page + S * stride;
 *   P = 64 / p rounded down to 8 bytes (32 at p = 2, 16 at p = 3 and 4); a
 *   team of more members (whose parts would hold no data), with 256 + S *
 *   64 > page or with NUMACOLL_REDUCE_LINES=0 has no call lines.
 *
 * Rounds. Every call takes one or more rounds; the round counter
 * (t->reduce_round) is the same on every member and round r uses slot r % S
 * of every member. A call of n bytes is small when n <= min(REDUCE_SMALL_MAX,
 * F) (one round; n = 0 takes one round too, step Z), large otherwise: rounds of C = whole
 * elements of at most F bytes (a reduce between two members on one NUMA
 * node that do not share a cache, agreed by all: at most n / 4 rounded down
 * to whole KiB, if that is 1 KiB or more, so that it takes 4 rounds or
 * more, whole rounds (4w) that overlap: red_chunk()); round j carries bytes
 * [j*C, j*C + C) of every contribution, cut into p slices of whole elements (ceil(m/p) rounded up to
 * a cache line's worth of elements when an element divides 64 bytes).
 * A large round's data starts doff bytes into the slot's data (data_offset(),
 * the same in every member's slot): its length L rounded up to whole pages
 * times (r / S) mod floor(F / L rounded up), so a slot's successive uses
 * write different pages, up to S * F bytes apart, and a member rarely writes
 * lines another member's private cache still holds from reading them: each
 * such store first takes the line from that cache. Measured (p = 2, the two
 * cores sharing a cache, one run): a reduce of 64 KiB 8.4 -> 6.4 us, of 128
 * KiB 14.3 -> 10.5 us; an allreduce of 64 KiB 9.7 -> 6.1 us; neutral without
 * a shared cache, where the stores are streamed. Small rounds keep doff 0
 * (their first data bytes share the header's line).
 * "Readers" are every member (allreduce) or the root (reduce).
 * Two-level ("two" below): the team's members sit on D NUMA nodes ("domains",
 * numbered by their lowest member), 1 < D < p, NUMACOLL_REDUCE_NUMA=1, and the
 * op may be reordered (predefined, or a commutative user op). Slice k's
 * worker in domain d, work(d, k), is k when k is in d, else one of d's
 * members in turn (fixed at team creation, plan()).
 *
 * Every member, per round r:
 *   1. wait until every member's out >= r - S (slot r % S was read by all
 *      in its previous use); the lowest out read is cached, so outs are read
 *      about once every S - 1 rounds, and a member that saw every member's
 *      seq == r' in step 3 (acquire) knows every out >= r' - 1 without
 *      reading them (a member posts round r' after its step 6 of round
 *      r' - 1): back-to-back small allreduces never read an out;
 *   2. write its slot: the header (code = type | op << 8 | user << 16 |
 *      commutative << 17, element size, the call's bytes, root) and the
 *      round's bytes of its contribution (large calls: not the slices it
 *      reduces itself in 4 or 4a, which only it reads, from its buffer; 4w:
 *      all of them at the non-root, none at the root), then seq = r
 *      (release). A large call's bytes go with non-temporal stores and an
 *      sfence before the release when the members do not all share a
 *      cache (t->shm_nt, NUMACOLL_SHM_NT: docs/transport.md).
 *   2l. a team with call lines, in a call's first round: my word in slot r %
 *       S's call line: sig (line_sig(): the header's fields in 32 bits) and,
 *       in a line call, the contribution after it (step 2 then writes the
 *       header but no data), then seq = r (release).
 * A call of count 0 takes round r and nothing else, without step 1:
 *   Z.  if r is more than RED_ZERO_AHEAD (2^20) rounds past the lowest out
 *       I know of, wait until every other member's out >= r - 2^19
 *       (acquire, as step 1); then 6. It posts nothing (no slot, no word):
 *       a member of a count above 0 waiting for its post in step 3, 3l or
 *       X2 finds it there once that wait has gone slow (it yields): out[k]
 *       >= r (acquire; pairs with the release of out in 6) and, read after
 *       it, seq != r: k passed a count of 0 (RED_ZERO), the reader returns
 *       NUMACOLL_ERR_TRUNCATE. k is not told.
 * Small call:
 *   3s. readers: wait until seq == r in every member's slot (acquire), check
 *       the headers, combine the p slots into recvbuf (order below); others
 *       read nothing;
 *   6.  out = r (release).
 * Line calls: a small call whose contribution fits the data of a part (P -
 *   8 bytes: 24 at p = 2, 8 at p = 3 and 4) in elements of 8 bytes at most.
 *   Measured here (p = 2, after a barrier): the members of a call that
 *   write and poll one line they share finish in 0.55-0.75x the time they
 *   take when each writes its own line and polls the other's (the data then
 *   comes in the same transfer as the flag), and that is most of what a
 *   small allreduce costs. Every member of such a call takes it alike
 *   (bytes, element size, p and S agree); it skips step 3s for
 *   3l. readers: wait until seq == r in every member's word (acquire); a
 *       word whose sig is not mine is another call: check the headers of the
 *       slots as in step 3 (its member wrote its header before its word) and
 *       return the error; else combine the p words' data into recvbuf
 *       (order below); then 6.
 *   Every call of a count above 0 posts its word in its first round (2l,
 *   X1; a call of count 0 posts nothing, Z), so a member of
 *   a line call and one of any other call meet in the same round: the line
 *   member sees a word that is not its own, the other member a header that
 *   differs from its own (step 3). A word moves only in first rounds: after
 *   2^30 rounds without one in a slot, its owner brings its word of that
 *   slot forward (refresh_flags(), which looks every 2^28 rounds), as it
 *   does for done, part and fwd.
 * Large call:
 *   3.  wait until seq == r in every member's slot (two-level, after the
 *       first round: in its domain's members' slots) (acquire); in the call's
 *       first round check the headers (on a mismatch: 6, and every member
 *       returns the error: every member reads every header there);
 *   4.  flat: reduce slice i of the round over the p contributions (its own
 *       from its buffer, the others' from their slots) into slice i of its
 *       own slot (the root of a reduce, not in place: into its recvbuf);
 *   4a. two-level: for every slice k with work(my domain, k) == i, reduce
 *       slice k over my domain's members into slice k of my slot (k == i:
 *       into private memory), then part = r (release);
 *   4w. a reduce between two members of 4 rounds or more ("whole rounds",
 *       chosen from p, the root, the size, the element size and the agreed
 *       caches and NUMA nodes, so every member takes it alike): the non-root
 *       posted the whole round in 2 and is done; the root waits for it (3)
 *       and combines the round over both contributions into its recvbuf
 *       (in place: into private memory, then copied), then 6;
 *   4b. two-level: for every other domain d, wait until part[work(d, i)]
 *       >= r (acquire); reduce slice i over the D partials, in domain order,
 *       into slice i of my slot (or the root's recvbuf, as in 4);
 *       then (4, 4b) done = r (release);
 *   5f. two-level allreduce whose results are forwarded in my domain (fout:
 *       nc_numa_plan_carry(), NUMACOLL_NUMA_FORWARD: on, or auto when my
 *       domain's m members gain by it; the same on all of them, from the
 *       agreed plan, configuration and NUMA distance): for every slice k of
 *       another domain with work(my domain, k) == i: wait until done[k] >=
 *       r (acquire; k has read my partial of slice k in 4b, so its place in
 *       my slot is free), copy slice k from k's slot into recvbuf and into
 *       slice k of my slot (streamed when t->shm_nt, then a fence); then
 *       fwd = r (release);
 *   5.  readers: for each member k, wait until done[k] >= r (acquire), copy
 *       slice k from k's slot to recvbuf; with 5f, a slice k of another
 *       domain instead from slice k of c = work(my domain, k)'s slot once
 *       fwd[c] >= r (acquire), nothing when c is i (5f copied it);
 *   6.  out = r (release).
 * Nothing is ever reset: seq, done, part, fwd and out only move forward,
 * compared with wrap-safe differences (seq and a word's seq for equality:
 * after 2^30 rounds without a post, refresh_flags() moves them to a round
 * nobody waits for; done, part and fwd to the last round). A member's calls of count 0 run at most
 * RED_ZERO_AHEAD rounds ahead (Z). A member can post at most S - 1 rounds
 * ahead of the slowest's out (step 1), so seq == r cannot be overtaken before every
 * member's step 6 of round r, and done[k] >= r (part[k], fwd[k] >= r) always
 * refers to round r's slot use. Slot regions are never read and written at
 * once in one round: a worker's partial of slice k goes where it copied no
 * contribution (step 2 skips the slices it reduces), the owner's result
 * where the worker of its own domain is itself, and a forwarded slice (5f)
 * over the worker's partial only once the slice's owner has read it.
 *
 * Order (reproducible: the same bits whatever the timing; every reader of an
 * allreduce gets the same bits). Element e of the result is
 *   predefined ops: ((x0 op x1) op x2) ... op x(p-1)   (the kernels'
 *                   "first" then "fold", coll/nc_reduce.h)
 *   user ops:       x0 op (x1 op (... (x(p-2) op x(p-1))))  (fn(in, inout)
 *                   is inout = in op inout: start from x(p-1), apply x(p-2),
 *                   ..., x0), MPI's rank order for non-commutative ops.
 *   two-level:      the same folds, first over each domain's members (rank
 *                   order) giving P0 ... P(D-1), then over P0 ... P(D-1);
 *                   small calls too (3s combines in that order, combine2()),
 *                   so the order never depends on the size.
 * The slicing changes who computes an element, never its order.
 * Why small calls stay one hand-off on a NUMA node: a second level would add
 * a second serial hand-off, while the reader's p line reads from the other
 * nodes proceed in parallel.
 *
 * Single copy (CMA, shm/nc_cma.h). When the team may use CMA and a call
 * is neither small nor below t->reduce_cma_min[root < 0] (0 with
 * NUMACOLL_TRANSPORT=cma; else NUMACOLL_REDUCE_CMA_MIN (reduce) or
 * NUMACOLL_ALLREDUCE_CMA_MIN (allreduce) if set; else the cache rule,
 * reduce_cma_switch() in core/nc_team.c; the same on every
 * member: agreed at team creation), it takes one round and nothing of the
 * data goes through the slots: the members read each other's buffers in
 * place.
 *   X1. steps 1 and 2 with the header's code | CMA bit and, after it, the
 *       addresses of its contribution and (a reader's) result buffer, then
 *       seq = r (release); then 2l (no data);
 *   X2. wait until seq == r in every member's slot (acquire), check the
 *       headers as in step 3 (on a mismatch: X6 and return the error;
 *       nobody copied anything);
 *   X3. slice i of the whole call (reduce: the root's slice is larger,
 *       cma_slice_of()), chunk by chunk: read the chunk of every other
 *       member's contribution into private memory (process_vm_readv),
 *       combine the p chunks in the documented order (mine from my
 *       buffer), and put the result into my result buffer (a reader) or
 *       write it into the root's (process_vm_writev);
 *   X4. derr = r if a copy of X3 failed (any error but a dead peer:
 *       EFAULT, or another errno: readers report NUMACOLL_ERR_FAULT), else
 *       r - 1; then done = r (release);
 *   X5. for each other member k with a slice: wait until done[k] >= r
 *       (acquire): slice k is in its place and k reads my buffers no more;
 *       derr[k] == r is an error for the readers; allreduce: read slice k
 *       from k's result buffer into mine (process_vm_readv);
 *   X6. out = r (release);
 *   X7. allreduce: wait until every member's out >= r (acquire): nobody
 *       reads my result buffer any more (X5); a reduce needs no X7, since
 *       X5 already waited for every copy from or into my buffers.
 *   X8. a call that fails after X1 (a member died, the team broke): out =
 *       round + 2^30 (release; nc_reduce_abandon(), from nc_team_fail(),
 *       also when another collective fails), then wait until every other
 *       member's out >= r (acquire) or it died: its copies from and into my
 *       buffers are over before the caller gets them back. Each member
 *       publishes before it waits, so failing members never wait in a cycle.
 *       No wait when a member died without posting round r: then nobody
 *       passes X2.
 * Release/acquire pairs: seq (X1) / X2; done and derr (X4) / X5; out (X6,
 * X8) / X7, X8 and step 1 (and through the slots: seq (2) / 3, and 1
 * through all_posted(); a word's seq (2l) / 3l, and 1 through
 * all_posted(); part (4a) / 4b; done (4, 4b) / 5 and 5f; fwd (5f) /
 * 5; out (6, Z) / 1, Z and the check for count 0 in 3, 3l and X2). The
 * order of the result is the documented one (the same folds over the same
 * chunks), so a call gives the same bits by CMA or through the slots.
 *
 * Mismatches (counts, types, ops, roots) are found in the call's first round
 * by every member that reads the headers there (a count of 0: its out, Z):
 * every member of a large call, the readers of a small one with a count above
 * 0. Both paths take that
 * round and post in it, so a member that would take the other path still
 * meets the others there; after it every member leaves the call at the same
 * round, and the team stays usable. A member of count 0 takes the round and
 * posts nothing (Z: one store of its out, where the MPI libraries do
 * nothing; it used to post its header and word, 3x the time in a loop of
 * such calls); the others find that in their slow wait, and it is not
 * told. It reads no outs either for up to RED_ZERO_AHEAD rounds, so a dead
 * or broken peer is reported to a member calling with count 0 only then (or
 * in its next call of a count above 0). A waiter that finds a member's out
 * 2^30 ahead without its post (nc_reduce_abandon(): that member left the team
 * after a failure of its own) returns NUMACOLL_ERR_BROKEN: it would never post.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/nc_coll.h"
#include "coll/nc_reduce.h"
#include "core/nc_team.h"
#include "shm/nc_cma.h"

#define RED_HDR 32 /* bytes of a slot before its data */
#define RED_WHOLE_MIN 4 /* rounds from which a reduce at p = 2 takes whole rounds (4w) */
/* the rounds of a reduce at p = 2 without a shared cache: whole KiB (red_chunk()) */
#define RED_WHOLE_GRAIN ((size_t)1024)
/* CMA (X1-X8) */
#define RED_CMA UINT64_C(0x636d617265647563) /* "cmareduc": a CMA call's slot */
#define RED_CMA_BIT (1u << 18)               /* in a CMA call's code */
/* Bytes of the others' chunks, at most: at p = 2 a chunk of 1 MiB, faster at
 * 1-4 MiB than 256 KiB chunks without a shared cache (docs/reduce.md, "The
 * chunk of a reduce by CMA"), for 2 MiB of scratch per member, resident only
 * once CMA runs. */
#define RED_CMA_BUF ((size_t)1 << 20)
#define RED_CMA_PAGE ((size_t)4096)          /* see cma_at() */
#define RED_CMA_CHUNK_MIN ((size_t)16 << 10)
#define RED_CMA_CHUNK_MAX ((size_t)1 << 20)
/* Z: a member's calls of count 0 run at most this many rounds ahead of the
 * slowest member's out (keeps every wrap-safe comparison well inside 2^31) */
#define RED_ZERO_AHEAD (1u << 20)
#define RED_ZERO 1 /* wait_posted(): the member passed a count of 0 (Z) */

typedef struct red_slot {
    _Atomic uint32_t seq; /* the round whose data is here, published last */
    uint32_t code;        /* type | op << 8 | user << 16, published by seq */
    uint32_t elem;        /* element size */
    int32_t root;         /* -1: allreduce */
    uint64_t bytes;       /* this member's bytes for the whole call */
    uint64_t pad;
} red_slot_t;
NC_STATIC_ASSERT(sizeof(red_slot_t) == RED_HDR, "a slot header is 32 bytes");

typedef struct red_ctl {
    _Atomic uint32_t out;                        /* line 0 */
    _Atomic uint32_t done NC_ALIGNED(NC_CACHELINE); /* line 1 */
    _Atomic uint32_t derr; /* CMA: the last round whose slice failed (X4), published by done */
    _Atomic uint32_t part NC_ALIGNED(NC_CACHELINE); /* line 2 */
    _Atomic uint32_t fwd NC_ALIGNED(NC_CACHELINE);  /* line 3 */
} red_ctl_t;
NC_STATIC_ASSERT(sizeof(red_ctl_t) == 4 * NC_CACHELINE,
                 "out, done, part, fwd on lines of their own");

/* A member's word in a call line ("Line calls"), its data after it. */
typedef struct red_word {
    _Atomic uint32_t seq; /* the round whose word this is, published last */
    uint32_t sig;         /* the call (line_sig()), published by seq */
} red_word_t;
NC_STATIC_ASSERT(sizeof(red_word_t) == 8, "a word is 8 bytes, its data 8-aligned");
#define RED_LINES_OFF (4 * NC_CACHELINE) /* the call lines, after member 0's control lines */
#define RED_LINE_MAX 4                   /* members of a team that has call lines, at most */
#define RED_LINE_ES 8                    /* bytes of an element a call line takes, at most */

/* This member's view, resolved at team creation. */
typedef struct red_state {
    int S;
    size_t F, stride, small_max;
    uint32_t outs_low;  /* lowest out of the others, as last read (step 1) or known from
                           their seqs (all_posted()) */
    unsigned slot;      /* the current round's slot: the rounds since the team was
                           created, modulo S (the same on every member) */
    unsigned next;      /* the next round's (next_slot()) */
    size_t doff;        /* where the current round's data starts in every member's slot
                           (data_at(); "Rounds" above), 0 in small rounds */
    size_t page;
    char *lines;        /* the call lines (member 0's control page; "Line calls"), or NULL */
    size_t lpart;       /* bytes of a member's part of a call line: its word, then data */
    uint32_t *line_pub; /* [s]: the last round I posted my word of slot s's call line in */
    uint32_t slot_scan; /* the last round refresh_flags() looked at my slots' seqs and
                           line_pub */
    uint32_t done_pub, part_pub, fwd_pub; /* the last done / part / fwd stored (stale-flag
                                             refresh) */
    int fout;           /* 5f: my domain gets the allreduce's results forwarded; -1: not
                           worked out yet (it needs the agreed NUMA distance) */
    red_ctl_t **ctl;    /* ctl[k]: member k's control lines */
    char **slots;       /* slots[k]: member k's slot 0 */
    const char **src;   /* p source pointers, scratch for the folds */
    /* The NUMA plan (fixed for the team; "Order" above). */
    nc_numa_plan_t pl;
    int two, D, mydom;  /* pl.two, pl.D, pl.dom[me] */
    int *dfirst, *dmem, *work; /* pl's */
    char *part;         /* private, F bytes: my domain's partial of my slice (4a); small
                           calls: one domain's partial */
    const char **dsrc;  /* p source pointers, scratch of the two-level folds */
    char *cbuf;         /* CMA: p areas of cstride bytes (the others' inputs, my result) */
    size_t cchunk, cstride; /* bytes of a chunk; of an area: a chunk and a page (cma_at()) */
} red_state_t;

/* What a call combines with: a predefined kernel or a user function. */
typedef struct red_op {
    const nc_red_kernel_t *k;
    const numacoll_user_op_t *user;
    size_t es;
    uint32_t code;
} red_op_t;

static size_t slot_stride(size_t F, size_t page)
{
    return nc_round_up(RED_HDR + F, page);
}

nc_shm_need_t nc_reduce_shm_need(int p, const nc_config_t *cfg, size_t page)
{
    (void)p;
    const size_t F = (size_t)NC_CFG_NUM(cfg, REDUCE_FRAG_SIZE);
    const size_t S = (size_t)NC_CFG_NUM(cfg, REDUCE_SLOTS);
    return (nc_shm_need_t){.shared = 0, .member = page + S * slot_stride(F, page)};
}

/* Member k's slot of the current round (st->slot: the round's index modulo
 * S, counted on its own so that it never jumps when the 32-bit round number
 * wraps, whatever S). */
static inline red_slot_t *slot_of(const red_state_t *st, int k)
{
    return (red_slot_t *)(st->slots[k] + (size_t)st->slot * st->stride);
}
static inline char *data_of(red_slot_t *sl)
{
    return (char *)sl + RED_HDR;
}

/* A new round: its slot (a counter, no division on the small path). */
/* Member k's data of the current round (a large round's: st->doff into the
 * slot's data). */
static inline char *data_at(const red_state_t *st, int k)
{
    return data_of(slot_of(st, k)) + st->doff;
}

/* Where round r's data of len bytes starts in a slot's F data bytes ("Rounds"
 * above): the slot's successive uses take successive whole pages of it. */
static size_t data_offset(const red_state_t *st, uint32_t r, size_t len)
{
    const size_t ln = (len + st->page - 1) / st->page * st->page;
    const size_t q = ln ? st->F / ln : 1;
    return q > 1 ? (size_t)(r / (uint32_t)st->S % q) * ln : 0;
}

static inline void next_slot(red_state_t *st)
{
    st->slot = st->next;
    st->next = st->next + 1u == (unsigned)st->S ? 0 : st->next + 1u;
}

/* Bytes of a member's part of a call line: its word, then its data. */
static size_t line_part(int p)
{
    return (size_t)(NC_CACHELINE / p) / 8 * 8;
}

size_t nc_reduce_line_max(int p, int slots, size_t page)
{
    if (p < 2 || p > RED_LINE_MAX || RED_LINES_OFF + (size_t)slots * NC_CACHELINE > page)
        return 0;
    return line_part(p) - sizeof(red_word_t);
}

/* Member k's word in the call line of slot `slot`. */
static inline red_word_t *word_at(const red_state_t *st, unsigned slot, int k)
{
    return (red_word_t *)(st->lines + (size_t)slot * NC_CACHELINE + (size_t)k * st->lpart);
}

/* What a member's word says of its call: exact for the calls a line takes
 * (bytes and element size exact up to 30, root < 8; a line call has at most
 * 24 bytes in elements of at most 8), so two words differ whenever
 * a line call and any other call of a count above 0 differ (a call of count 0
 * posts no word, Z). */
static uint32_t line_sig(uint32_t code, int root, uint64_t bytes, size_t es)
{
    const uint32_t b = bytes < 31 ? (uint32_t)bytes : 31u, e = es < 31 ? (uint32_t)es : 31u;
    return (code & 0x3ffffu) | (uint32_t)(root + 1) << 18 | b << 22 | e << 27;
}

/* Step 2l: my word in the current slot's call line (n bytes of data: a line
 * call's contribution, else none). */
static void line_post(red_state_t *st, int me, uint32_t r, uint32_t sig, const char *in,
                      size_t n)
{
    red_word_t *w = word_at(st, st->slot, me);
    if (n)
        memcpy(w + 1, in, n);
    w->sig = sig;
    /* release: sig and data (and my slot's header, step 2, before them)
     * before seq; pairs with the acquire in wait_posted() (step 3l). */
    atomic_store_explicit(&w->seq, r, memory_order_release);
    st->line_pub[st->slot] = r;
}

void nc_reduce_fini(struct numacoll_team *t)
{
    red_state_t *st = t->reduce_state;
    if (!st)
        return;
    free(st->ctl);
    free(st->slots);
    free(st->src);
    nc_numa_plan_free(&st->pl);
    free(st->part);
    free(st->dsrc);
    free(st->cbuf);
    free(st->line_pub);
    free(st);
    t->reduce_state = NULL;
}

/* The team's plan (coll/nc_coll.h: its NUMA groups, or the test's). */
static int plan(const struct numacoll_team *t, red_state_t *st)
{
    const int p = t->p;
    int rc = nc_coll_numa_plan(t, &st->pl, (int)NC_CFG_NUM(&t->cfg, REDUCE_NUMA));
    if (rc)
        return rc;
    st->two = st->pl.two;
    st->D = st->pl.D;
    st->mydom = st->pl.dom[t->rank];
    st->dfirst = st->pl.dfirst;
    st->dmem = st->pl.dmem;
    st->work = st->pl.work;
    if (!st->two && p != 2)
        return 0;
    st->part = malloc(st->F); /* two-level partials; p = 2: an in-place whole round */
    st->dsrc = calloc((size_t)p, sizeof *st->dsrc);
    return st->part && st->dsrc ? 0 : NUMACOLL_ERR_NOMEM;
}

int nc_reduce_init(struct numacoll_team *t)
{
    const int p = t->p;
    const size_t page = t->seg.l.page;
    red_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return NUMACOLL_ERR_NOMEM;
    t->reduce_state = st;
    st->S = (int)NC_CFG_NUM(&t->cfg, REDUCE_SLOTS);
    st->F = (size_t)NC_CFG_NUM(&t->cfg, REDUCE_FRAG_SIZE);
    st->stride = slot_stride(st->F, page);
    st->page = page;
    st->small_max = (size_t)NC_CFG_NUM(&t->cfg, REDUCE_SMALL_MAX);
    if (st->small_max > st->F)
        st->small_max = st->F;
    if (t->seg.l.marea_bytes[NC_COLL_REDUCE] != page + (size_t)st->S * st->stride)
        return NUMACOLL_ERR_MISMATCH; /* laid out for another configuration */
    st->ctl = calloc((size_t)p, sizeof *st->ctl);
    st->slots = calloc((size_t)p, sizeof *st->slots);
    st->src = calloc((size_t)p, sizeof *st->src);
    if (!st->ctl || !st->slots || !st->src)
        return NUMACOLL_ERR_NOMEM;
    for (int k = 0; k < p; k++) {
        char *a = nc_seg_member_area(&t->seg, NC_COLL_REDUCE, k);
        st->ctl[k] = (red_ctl_t *)a;
        st->slots[k] = a + page;
    }
    int rc = plan(t, st);
    if (rc)
        return rc;
    /* CMA's scratch (X3), here since a failure later could not be agreed
     * on; only touched, and so only resident, if CMA is used. Not for a
     * team that cannot choose CMA (reduce_cma_switch() in core/nc_team.c: never
     * at p = 2 by the rule;
     * with the cache rule, a member that sees a shared cache makes the
     * agreed view shared or unknown, unless the team measures its caches
     * after this: step 5 of core/nc_team.c runs only if every member asked,
     * t->cache_probe_asked, so all of them have the buffer). */
    const int64_t tr = NC_CFG_NUM(&t->cfg, TRANSPORT);
    if (p > 1 && tr != NC_TRANSPORT_SHM &&
        (tr == NC_TRANSPORT_CMA || NC_CFG_NUM(&t->cfg, REDUCE_CMA_MIN) ||
         NC_CFG_NUM(&t->cfg, ALLREDUCE_CMA_MIN) ||
         (p > 2 && (t->cache_shared != 1 || t->cache_probe_asked) && t->nleaders == 1))) {
        size_t c = RED_CMA_BUF / (size_t)(p - 1);
        c = c < RED_CMA_CHUNK_MIN ? RED_CMA_CHUNK_MIN : c > RED_CMA_CHUNK_MAX ? RED_CMA_CHUNK_MAX : c;
        /* two-level: combine2() takes up to F bytes; whole cache lines */
        st->cchunk = (st->two && c > st->F ? st->F : c) / NC_CACHELINE * NC_CACHELINE;
        st->cstride = nc_round_up(st->cchunk, RED_CMA_PAGE) + RED_CMA_PAGE;
        if (!(st->cbuf = aligned_alloc(RED_CMA_PAGE, (size_t)p * st->cstride)))
            return NUMACOLL_ERR_NOMEM;
    }
    /* What this member owns, in its own block (nobody else writes there):
     * "round seq0 - 1 is over". Exchange #2 of the team creation orders these
     * stores before any other member's first reduction. */
    const uint32_t before = t->reduce_round - 1u;
    red_ctl_t *mine = st->ctl[t->rank];
    atomic_store_explicit(&mine->out, before, memory_order_relaxed);
    atomic_store_explicit(&mine->done, before, memory_order_relaxed);
    atomic_store_explicit(&mine->derr, before, memory_order_relaxed);
    atomic_store_explicit(&mine->part, before, memory_order_relaxed);
    for (int k = 0; k < st->S; k++)
        atomic_store_explicit(&((red_slot_t *)(st->slots[t->rank] + (size_t)k * st->stride))->seq,
                              before, memory_order_relaxed);
    st->outs_low = st->slot_scan = before;
    atomic_store_explicit(&mine->fwd, before, memory_order_relaxed);
    /* The call lines: member 0 owns the page (its first touch placed it), so
     * it writes every member's words ("round seq0 - 1 is over") before
     * exchange #2. */
    if (NC_CFG_NUM(&t->cfg, REDUCE_LINES) && nc_reduce_line_max(p, st->S, page)) {
        st->lines = (char *)st->ctl[0] + RED_LINES_OFF;
        st->lpart = line_part(p);
        if (!(st->line_pub = malloc((size_t)st->S * sizeof *st->line_pub)))
            return NUMACOLL_ERR_NOMEM;
        for (int sl = 0; sl < st->S; sl++)
            st->line_pub[sl] = before;
        for (unsigned sl = 0; t->rank == 0 && sl < (unsigned)st->S; sl++)
            for (int k = 0; k < p; k++) {
                word_at(st, sl, k)->sig = 0;
                atomic_store_explicit(&word_at(st, sl, k)->seq, before, memory_order_relaxed);
            }
    }
    st->done_pub = st->part_pub = st->fwd_pub = before;
    st->fout = -1;
    return 0;
}

/* ---- waiting ------------------------------------------------------------------------ */

/* Until every other member's out >= need (wrap-safe; the last value read
 * is cached in st->outs_low). */
static int wait_outs(numacoll_team_t *t, red_state_t *st, uint32_t need)
{
    nc_backoff_t b;
    int rc;
    if ((int32_t)(st->outs_low - need) >= 0)
        return 0;
    nc_backoff_init(&b, &t->wait);
    for (;;) {
        uint32_t low = t->reduce_round - 1u;
        for (int k = 0; k < t->p; k++) {
            if (k == t->rank)
                continue;
            /* acquire: pairs with member k's release of out in step 6: its
             * reads of our slot's previous use happen before we rewrite it. */
            uint32_t o = atomic_load_explicit(&st->ctl[k]->out, memory_order_acquire);
            if ((int32_t)(o - low) < 0)
                low = o;
        }
        st->outs_low = low;
        if ((int32_t)(low - need) >= 0)
            return 0;
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
    }
}

/* Step 1. */
static inline int wait_slot_free(numacoll_team_t *t, red_state_t *st, uint32_t r)
{
    return wait_outs(t, st, r - (uint32_t)st->S);
}

/* After seq == r was seen (acquire) in every member's slot (or its word of
 * a call line, step 3l): each of them
 * posted round r after its step 6 of round r - 1, so every out >= r - 1
 * (step 1 needs no read of the outs up to round r - 1 + S). */
static inline void all_posted(red_state_t *st, uint32_t r)
{
    if ((int32_t)(r - 1u - st->outs_low) > 0)
        st->outs_low = r - 1u;
}

/* Step 3: member k's slot of round r is written (seq: its slot's, or its
 * word's in the call line, step 3l). RED_ZERO when k passed a count of 0
 * in round r (Z: its out reached r, it posted nothing), looked at once the
 * wait has gone slow only. */
static int wait_posted(numacoll_team_t *t, red_state_t *st, _Atomic uint32_t *seq, int k,
                       uint32_t r)
{
    nc_backoff_t b;
    int rc;
    nc_backoff_init(&b, &t->wait);
    /* acquire: pairs with the release of seq in step 2 (2l: in
     * line_post()): the header and the data of the slot (the word's sig and
     * data) are visible. */
    while (atomic_load_explicit(seq, memory_order_acquire) != r) {
        if (b.spins >= b.w->spin_limit) {
            /* acquire: pairs with k's release of out in step 6 (Z) and in
             * nc_reduce_abandon(): a post of round r, which comes before
             * it, is visible now. Out 2^30 ahead: k left the team
             * (nc_reduce_abandon()) and posts no more. */
            const uint32_t d =
                atomic_load_explicit(&st->ctl[k]->out, memory_order_acquire) - r;
            if (d < (1u << 31) && atomic_load_explicit(seq, memory_order_acquire) != r)
                return d < (1u << 29) ? RED_ZERO : NUMACOLL_ERR_BROKEN;
        }
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
    }
    return 0;
}

/* A member whose wait for member k's post of round r found RED_ZERO. */
static int zero_mismatch(const numacoll_team_t *t, int k, uint64_t bytes, int root)
{
    nc_log_error("%s: member %d passed %llu bytes, member %d passed a count of 0 (a call of "
                 "count 0 returns at once and is not told)",
                 root < 0 ? "allreduce" : "reduce", t->rank, (unsigned long long)bytes, k);
    return NUMACOLL_ERR_TRUNCATE;
}

/* Until member k's control word `flag` reached round r (wrap-safe): done
 * (steps 5, 5f, X5: k's slice of round r is reduced), part (4b: k's partials
 * are in its slot) or fwd (5: k's forwarded slices are in its slot). */
static int wait_ctl(numacoll_team_t *t, _Atomic uint32_t *flag, uint32_t r)
{
    nc_backoff_t b;
    int rc;
    nc_backoff_init(&b, &t->wait);
    /* acquire: pairs with the owner's release of that word (done: step 4,
     * 4b or X4; part: 4a; fwd: 5f): what it published is visible. */
    while ((int32_t)(atomic_load_explicit(flag, memory_order_acquire) - r) < 0)
        if ((rc = nc_backoff(&b)) < 0)
            return rc;
    return 0;
}

/* Does my domain take an allreduce's results two-level (5f)? The same on
 * every member of my domain: the plan, the configuration and the NUMA
 * distance are agreed at team creation (the distance after the collectives'
 * init, hence worked out at the first use). */
static int fwd_out(const numacoll_team_t *t, red_state_t *st)
{
    if (st->fout < 0)
        st->fout = st->work && nc_numa_plan_carry(&st->pl, st->mydom,
                                                  (int)NC_CFG_NUM(&t->cfg, NUMA_FORWARD),
                                                  t->numa_ratio);
    return st->fout;
}

/* ---- combining ---------------------------------------------------------------------- */

/* dst[e] = src[0][e] op ... op src[p-1][e] for e < n, in the documented order;
 * dst overlaps no source. */
static void combine(const red_op_t *op, char *dst, const char *const *src, int p, size_t n)
{
    if (!n)
        return;
    if (p == 1) {
        nc_copy(dst, src[0], n * op->es);
        return;
    }
    if (op->k) {
        op->k->first(dst, src[0], src[1], n);
        for (int k = 2; k < p; k++)
            op->k->fold(dst, src[k], n);
        return;
    }
    nc_copy(dst, src[p - 1], n * op->es);
    for (int k = p - 2; k >= 0; k--)
        op->user->fn(src[k], dst, n, op->user->ctx);
}

/* combine() in the two-level order: each domain's members (rank order),
 * then the domains (in order); the small path's 3s. src[k] is member k's. */
static void combine2(red_state_t *st, const red_op_t *op, char *dst, const char *const *src,
                     size_t n)
{
    const char **ds = st->dsrc;
    if (!n)
        return;
    /* predefined: dst = P0, then dst = dst op Pd; user: dst = P(D-1), then
     * dst = Pd op dst, down to P0 */
    for (int i = 0; i < st->D; i++) {
        const int d = op->k ? i : st->D - 1 - i;
        const int a = st->dfirst[d], nd = st->dfirst[d + 1] - a;
        for (int j = 0; j < nd; j++)
            ds[j] = src[st->dmem[a + j]];
        if (i == 0) {
            combine(op, dst, ds, nd, n);
            continue;
        }
        combine(op, st->part, ds, nd, n);
        if (op->k)
            op->k->fold(dst, st->part, n);
        else
            op->user->fn(st->part, dst, n, op->user->ctx);
    }
}

/* A small call's combine of st->src (steps 3s, 3l), in the documented order. */
static void combine_small(red_state_t *st, const red_op_t *op, char *dst, int two, int p,
                          size_t n)
{
    if (two)
        combine2(st, op, dst, st->src, n);
    else
        combine(op, dst, st->src, p, n);
}

/* Step 3's check of the headers (every member's slot of round r). */
static int check_headers(numacoll_team_t *t, red_state_t *st, uint64_t bytes,
                         uint32_t code, uint32_t elem, int root)
{
    for (int k = 0; k < t->p; k++) {
        const red_slot_t *sl = slot_of(st, k);
        if (k == t->rank ||
            (sl->bytes == bytes && sl->code == code && sl->elem == elem && sl->root == root))
            continue;
        /* The CMA bit follows from the bytes (the switch point is agreed):
         * a difference there alone is one of counts; with the same bytes,
         * the members' transport tunables differ. */
        if (sl->bytes == bytes && sl->root == root && sl->elem == elem &&
            !((sl->code ^ code) & ~RED_CMA_BIT)) {
            nc_log_error("%s: members %d and %d chose different transports for %llu bytes "
                         "(CMA and the slots): set NUMACOLL_TRANSPORT, "
                         "NUMACOLL_REDUCE_CMA_MIN and NUMACOLL_ALLREDUCE_CMA_MIN alike on "
                         "every rank",
                         root < 0 ? "allreduce" : "reduce", t->rank, k, (unsigned long long)bytes);
            return NUMACOLL_ERR_MISMATCH;
        }
        int rc = sl->root != root                                        ? NUMACOLL_ERR_ROOT
                 : (sl->code ^ code) & ~RED_CMA_BIT || sl->elem != elem ? NUMACOLL_ERR_MISMATCH
                                                                         : NUMACOLL_ERR_TRUNCATE;
        char r_mine[24] = "", r_theirs[24] = "";
        if (root >= 0 || sl->root >= 0) {
            snprintf(r_mine, sizeof r_mine, root < 0 ? ", no root" : ", root member %d", root);
            snprintf(r_theirs, sizeof r_theirs, sl->root < 0 ? ", no root" : ", root member %d",
                     sl->root);
        }
        nc_log_error("%s: member %d passed %llu bytes of %s/%s%s, member %d passed %llu bytes of "
                     "%s/%s%s",
                     root < 0 ? "allreduce" : "reduce", t->rank, (unsigned long long)bytes,
                     nc_red_type_name((int)(code & 0xff)), nc_red_op_name((int)(code >> 8 & 0xff)),
                     r_mine, k, (unsigned long long)sl->bytes,
                     nc_red_type_name((int)(sl->code & 0xff)),
                     nc_red_op_name((int)(sl->code >> 8 & 0xff)), r_theirs);
        return rc;
    }
    return 0;
}

/* Slice k of m elements of es bytes: [*lo, *hi) in elements. */
static void slice_of(size_t m, size_t es, int p, int k, size_t *lo, size_t *hi)
{
    size_t per = (m + (size_t)p - 1) / (size_t)p;
    if (es <= NC_CACHELINE && NC_CACHELINE % es == 0) {
        size_t al = NC_CACHELINE / es;
        per = (per + al - 1) / al * al;
    }
    *lo = (size_t)k * per < m ? (size_t)k * per : m;
    *hi = *lo + per < m ? *lo + per : m;
}

/* 1 when I reduce slice k in step 4 (4a when two-level): only I read my
 * contribution to it, from my buffer, so it is not copied to my slot. */
static inline int mine_slice(const red_state_t *st, int p, int me, int two, int k)
{
    return two ? st->work[st->mydom * p + k] == me : k == me;
}

/* Step 2: the header and the round's len bytes (m elements; small: slices
 * 0) of my contribution, but the slices only I read, then seq = r. */
static void post(const red_state_t *st, red_slot_t *sl, uint32_t r, const red_op_t *op,
                 uint64_t bytes, int root, const char *in, size_t len, int small, int whole,
                 int p, int me, int two, int nt)
{
    sl->code = op->code;
    sl->elem = (uint32_t)op->es;
    sl->root = root;
    sl->bytes = bytes;
    char *d = data_of(sl) + st->doff;
    /* large rounds: streamed past my cache when the members do not all
     * share one (t->shm_nt), fenced below */
    void (*copy)(void *, const void *, size_t) = nt && !small ? nc_copy_nt : nc_copy;
    if (small || (whole && me != root)) {
        copy(d, in, len);
    } else if (whole) {
        /* the root of a whole-round reduce: its data is read by itself only */
    } else {
        /* runs of slices that others read, one copy each */
        const size_t es = op->es, m = len / es;
        size_t run = 0, lo, hi;
        for (int k = 0; k < p; k++) {
            slice_of(m, es, p, k, &lo, &hi);
            if (mine_slice(st, p, me, two, k)) {
                if (lo > run)
                    copy(d + run * es, in + run * es, (lo - run) * es);
                run = hi;
            }
        }
        if (m > run)
            copy(d + run * es, in + run * es, (m - run) * es);
    }
    if (nt && !small)
        nc_copy_nt_fence();
    /* release: header and data before seq; pairs with the acquire in
     * wait_posted() (step 3). */
    atomic_store_explicit(&sl->seq, r, memory_order_release);
}

/* Step 6. */
static inline void finish_round(red_state_t *st, int me, uint32_t r)
{
    /* release: my reads of every slot of round r (steps 3-5) happen before
     * their owners reuse them; pairs with the acquire in wait_slot_free(). */
    atomic_store_explicit(&st->ctl[me]->out, r, memory_order_release);
}

static void refresh_flags(numacoll_team_t *t, red_state_t *st);

/* ---- single copy (CMA) ------------------------------------------------------------------ */

/* What a CMA call's slot carries after its header (X1). */
typedef struct red_cma_post {
    uint64_t magic; /* RED_CMA */
    uint64_t in;    /* the member's contribution */
    uint64_t out;   /* its result buffer (a reader's), else 0 */
} red_cma_post_t;
NC_STATIC_ASSERT(sizeof(red_cma_post_t) <= NC_CACHELINE - RED_HDR, "on the header's line");

static inline const red_cma_post_t *cma_post_of(const red_state_t *st, int k)
{
    return (const red_cma_post_t *)data_of(slot_of(st, k));
}

/* Slice k of a CMA call of m elements: [*lo, *hi). Allreduce: p equal
 * slices (slice_of()). Reduce: a non-root's slice costs it one more copy
 * per byte (the result goes to the root), so the root takes more: with a
 * copy c and a combine r = 0.4 c per byte and input, the root's slice costs
 * (p-1)(c+r) per byte, another's (p-1)(c+r) + c; the slices are cut in
 * inverse proportion, weights 7(p-1) + 5 for the root and 7(p-1) for the
 * others (p = 2: the root 63%). Boundaries fall on whole cache lines'
 * worth of elements, as in slice_of(). */
static void cma_slice_of(size_t m, size_t es, int p, int root, int k, size_t *lo, size_t *hi)
{
    if (root < 0) {
        slice_of(m, es, p, k, lo, hi);
        return;
    }
    const uint64_t w = 7u * (uint64_t)(p - 1), W = w * (uint64_t)p + 5;
    const size_t al = es <= NC_CACHELINE && NC_CACHELINE % es == 0 ? NC_CACHELINE / es : 1;
    size_t b[2];
    for (int j = 0; j < 2; j++) {
        const int upto = k + j; /* slices before the bound */
        const uint64_t cw = w * (uint64_t)upto + (upto > root ? 5 : 0);
        /* m * cw / W without overflow (cw <= W, a few times p^2) */
        const size_t x = upto == p ? m : (m / W * cw + m % W * cw / W) / al * al;
        b[j] = x < m ? x : m;
    }
    *lo = b[0];
    *hi = b[1];
}

/* Where in scratch area j a chunk copied from or to remote address a goes:
 * at a's offset in its page. The kernel's copy then never stores a few bytes
 * ahead of where it loads modulo 4 KiB, which x86 cores take for a possible
 * overlap ("4K aliasing") and stall on: measured here, a 512 KiB
 * process_vm_readv into a buffer 16 bytes past a page boundary from a
 * page-aligned one took 5 times as long as into an aligned one. */
static inline char *cma_at(const red_state_t *st, int j, uint64_t a)
{
    return st->cbuf + (size_t)j * st->cstride + (size_t)(a & (RED_CMA_PAGE - 1));
}

/* X3: reduce elements [lo, hi) of the call over every member, chunk by
 * chunk: the others' inputs read into my scratch, combined in the documented
 * order with mine (from my buffer), the result into my buffer (a reader's)
 * or the root's. */
static int cma_slice(numacoll_team_t *t, red_state_t *st, const red_op_t *op, const char *in,
                     char *out, int root, int two, size_t lo, size_t hi)
{
    const int p = t->p, me = t->rank;
    const int reader = root < 0 || root == me, direct = reader && in != out;
    const size_t es = op->es, ce = st->cchunk / es;
    int rc;
    for (size_t e = lo; e < hi; e += ce) {
        const size_t n = hi - e < ce ? hi - e : ce, off = e * es, len = n * es;
        for (int k = 0, b = 0; k < p; k++) {
            if (k == me) {
                st->src[k] = in + off;
                continue;
            }
            const uint64_t from = cma_post_of(st, k)->in + off;
            char *buf = cma_at(st, b++, from);
            if ((rc = nc_cma_read(t->pids[k], buf, from, len)))
                return rc;
            st->src[k] = buf;
        }
        /* in place, my input is the destination: through acc (placed for
         * the write into the root's buffer, or for my own) */
        const uint64_t to = reader ? (uint64_t)(uintptr_t)(out + off) : cma_post_of(st, root)->out + off;
        char *acc = cma_at(st, p - 1, to), *dst = direct ? out + off : acc;
        if (two)
            combine2(st, op, dst, st->src, n);
        else
            combine(op, dst, st->src, p, n);
        if (direct)
            continue;
        if (reader)
            nc_copy(out + off, acc, len);
        else if ((rc = nc_cma_write(t->pids[root], to, acc, len)))
            return rc;
    }
    return 0;
}

/* X8: a CMA call that fails with rc after X1 returns only once no live peer
 * can still read or write this member's buffers. When a member died before
 * posting round r, nobody can pass X2, so nobody copies: no wait (a live
 * member may never come back into the library to publish its out). */
static int cma_fail(numacoll_team_t *t, red_state_t *st, uint32_t r, int rc)
{
    rc = nc_team_fail(t, rc); /* nc_reduce_abandon() */
    for (int k = 0; k < t->p; k++)
        /* acquire: pairs with the release of seq in X1 */
        if (k != t->rank && atomic_load_explicit(&slot_of(st, k)->seq, memory_order_acquire) != r &&
            nc_pid_dead(t->pids[k]))
            return rc;
    for (int k = 0; k < t->p; k++) {
        if (k == t->rank)
            continue;
        nc_backoff_t b;
        nc_backoff_init(&b, &t->wait);
        /* acquire: pairs with member k's release of out in X6 or in
         * nc_reduce_abandon(): its copies from and to us are over. */
        while ((int32_t)(atomic_load_explicit(&st->ctl[k]->out, memory_order_acquire) - r) < 0 &&
               !nc_peer_gone(&b, k))
            ;
    }
    return rc;
}

void nc_reduce_abandon(struct numacoll_team *t)
{
    red_state_t *st = t->reduce_state;
    if (!st || !st->ctl)
        return;
    /* release: this member copies nothing more; pairs with the acquire in
     * cma_fail() (X8) and wait_slot_free(). 2^30 ahead of any round a peer
     * can be in. */
    atomic_store_explicit(&st->ctl[t->rank]->out, t->reduce_round - 1u + (1u << 30),
                          memory_order_release);
}

/* C, the bytes of a large call's rounds (see "Rounds" at the top): F, or
 * for a reduce between two members on one NUMA node that do not share a
 * cache, n / 4 (whole KiB, at least one, whole elements) when that is less:
 * 4 rounds or more of whole-round combining (4w), where the other member's
 * streamed copy into its slot overlaps the root's combining. Faster there
 * than one round and than CMA with buffers out of the caches, slower than
 * CMA at 128-512 KiB with cache-resident ones; with a shared cache one round
 * of reduce-scatter stays faster at 256 KiB (measured: docs/reduce.md,
 * "Rounds of a reduce without a shared cache"). t->cache_shared and
 * t->nleaders are the same on every member (agreed at team creation), so the
 * rounds are too. */
static size_t red_chunk(const numacoll_team_t *t, const red_state_t *st, size_t bytes, size_t es,
                        int root)
{
    const size_t g = RED_WHOLE_GRAIN, w = bytes / RED_WHOLE_MIN / g * g;
    const size_t c = root >= 0 && nc_team_streamed_pair(t) && w >= g && w >= es && w < st->F ? w
                                                                                    : st->F;
    return c / es * es;
}

/* A large call by CMA: one round, X1-X7 (see the top). */
static int red_cma(numacoll_team_t *t, red_state_t *st, const char *in, char *out, size_t count,
                   const red_op_t *op, int root, int two)
{
    const int p = t->p, me = t->rank;
    const int reader = root < 0 || root == me;
    const size_t es = op->es, bytes = count * es;
    int rc = 0, rc2;
    const uint32_t r = t->reduce_round++;
    next_slot(st);
    red_slot_t *mine = slot_of(st, me);
    if ((rc2 = wait_slot_free(t, st, r))) /* X1 (step 1) */
        return nc_team_fail(t, rc2);
    mine->code = op->code | RED_CMA_BIT;
    mine->elem = (uint32_t)es;
    mine->root = root;
    mine->bytes = bytes;
    red_cma_post_t *pm = (red_cma_post_t *)data_of(mine);
    pm->magic = RED_CMA;
    pm->in = (uint64_t)(uintptr_t)in;
    pm->out = reader ? (uint64_t)(uintptr_t)out : 0;
    t->reduce_cma++;
    /* release: header and addresses before seq; pairs with the acquire in
     * wait_posted() (X2). */
    atomic_store_explicit(&mine->seq, r, memory_order_release);
    if (st->lines) /* 2l: a line call of another member meets mine here */
        line_post(st, me, r, line_sig(op->code, root, bytes, es), NULL, 0);
    /* X2. */
    for (int k = 0; k < p; k++) {
        if (k == me || !(rc2 = wait_posted(t, st, &slot_of(st, k)->seq, k, r)))
            continue;
        if (rc2 != RED_ZERO)
            return cma_fail(t, st, r, rc2);
        finish_round(st, me, r); /* X6: nobody copies (k posted no address) */
        return zero_mismatch(t, k, bytes, root);
    }
    all_posted(st, r);
    if ((rc = check_headers(t, st, bytes, op->code | RED_CMA_BIT, (uint32_t)es, root))) {
        finish_round(st, me, r); /* X6: nobody copies */
        return rc;
    }
    /* X3. */
    size_t lo, hi;
    cma_slice_of(count, es, p, root, me, &lo, &hi);
    const int myrc = lo < hi ? cma_slice(t, st, op, in, out, root, two, lo, hi) : 0;
    if (myrc == NUMACOLL_ERR_PEER_DEAD)
        return cma_fail(t, st, r, myrc);
    /* X4. derr on every CMA round (r - 1: no failure), so that a value
     * from 2^32 rounds ago never reads as this round's. */
    atomic_store_explicit(&st->ctl[me]->derr, myrc ? r : r - 1u, memory_order_relaxed);
    /* release: my slice (in my buffer or the root's) and derr before done;
     * pairs with the acquire in wait_ctl() (X5). */
    atomic_store_explicit(&st->ctl[me]->done, r, memory_order_release);
    st->done_pub = r;
    /* X5. */
    for (int k = 0; k < p; k++) {
        size_t klo, khi;
        cma_slice_of(count, es, p, root, k, &klo, &khi);
        if (k == me || klo == khi)
            continue;
        if ((rc2 = wait_ctl(t, &st->ctl[k]->done, r)))
            return cma_fail(t, st, r, rc2);
        if (atomic_load_explicit(&st->ctl[k]->derr, memory_order_relaxed) == r) {
            if (reader && !rc)
                rc = NUMACOLL_ERR_FAULT;
            continue;
        }
        if (root >= 0)
            continue;
        rc2 = nc_cma_read(t->pids[k], out + klo * es, cma_post_of(st, k)->out + klo * es,
                          (khi - klo) * es);
        if (rc2 == NUMACOLL_ERR_PEER_DEAD)
            return cma_fail(t, st, r, rc2);
        if (rc2 && !rc)
            rc = rc2;
    }
    finish_round(st, me, r); /* X6 */
    /* X7. allreduce: the others read my buffer in X5; wait until every out
     * >= r (wait_slot_free() for round r + S waits for exactly that). */
    if (root < 0 && (rc2 = wait_slot_free(t, st, r + (uint32_t)st->S)))
        return cma_fail(t, st, r, rc2);
    return myrc ? myrc : rc;
}

static int red_call(numacoll_team_t *t, const char *in, char *out, size_t count,
                    const red_op_t *op, int root)
{
    red_state_t *st = t->reduce_state;
    const int p = t->p, me = t->rank;
    const int reader = root < 0 || root == me;
    /* the two-level order needs an op whose order may change */
    const int two = st->two && (op->k || op->user->commutative);
    const size_t es = op->es, bytes = count * es;
    int rc = 0, rc2;
    if (st->F < es)
        return NUMACOLL_ERR_NOTSUP; /* an element larger than a slot: same on every member */
    if (!bytes) {
        /* Z. */
        const uint32_t r = t->reduce_round++;
        next_slot(st);
        if ((uint32_t)(r - st->outs_low) > RED_ZERO_AHEAD &&
            (rc2 = wait_outs(t, st, r - RED_ZERO_AHEAD / 2)))
            return nc_team_fail(t, rc2);
        finish_round(st, me, r); /* 6. */
        refresh_flags(t, st);
        return 0;
    }
    const int small = bytes <= st->small_max;
    if (!small && t->cma && bytes >= t->reduce_cma_min[root < 0] && st->cbuf && es <= st->cchunk) {
        rc = red_cma(t, st, in, out, count, op, root, two);
        refresh_flags(t, st);
        return rc;
    }
    const size_t chunk = small ? bytes : red_chunk(t, st, bytes, es, root);
    /* A reduce between two members over 4 rounds or more: the root combines
     * whole rounds (4w), reading each byte of the other's contribution once,
     * with no slices to hand back; below that the rounds do not overlap
     * enough and the reduce-scatter (both members at once) is faster. */
    const int whole = !small && root >= 0 && p == 2 && bytes >= RED_WHOLE_MIN * chunk;
    const int da = two ? st->dfirst[st->mydom] : 0;
    const int nd = two ? st->dfirst[st->mydom + 1] - da : p;
    /* a line call ("Line calls"): the same choice on every member of a call */
    const int lined = small && st->lines && es <= RED_LINE_ES &&
                      bytes <= st->lpart - sizeof(red_word_t);
    const uint32_t sig = st->lines ? line_sig(op->code, root, bytes, es) : 0;
    size_t off = 0;
    int first = 1;
    do {
        const uint32_t r = t->reduce_round++;
        next_slot(st);
        const size_t len = small ? bytes : (bytes - off < chunk ? bytes - off : chunk);
        const size_t m = small ? count : len / es;
        st->doff = small ? 0 : data_offset(st, r, len);
        size_t lo = 0, hi = 0;
        if (!small)
            slice_of(m, es, p, me, &lo, &hi);
        red_slot_t *mine = slot_of(st, me);
        /* 1., 2. (a line call: the header only), 2l. */
        if ((rc2 = wait_slot_free(t, st, r)))
            return nc_team_fail(t, rc2);
        post(st, mine, r, op, bytes, root, in + off, lined ? 0 : len, small, whole, p, me, two,
             t->shm_nt);
        if (first && st->lines)
            line_post(st, me, r, sig, in, lined ? bytes : 0);
        t->reduce_lines += (uint64_t)lined; /* a line call takes one round */
        if (small && !reader) {
            finish_round(st, me, r); /* 6. */
            break;
        }
        if (lined) {
            /* 3l. */
            for (int k = 0; k < p && !rc; k++)
                if (k != me && (rc2 = wait_posted(t, st, &word_at(st, st->slot, k)->seq, k, r))) {
                    if (rc2 != RED_ZERO)
                        return nc_team_fail(t, rc2);
                    rc = zero_mismatch(t, k, bytes, root);
                }
            if (rc) {
                finish_round(st, me, r); /* 6. */
                break;
            }
            all_posted(st, r);
            for (int k = 0; k < p; k++) {
                const red_word_t *w = word_at(st, st->slot, k);
                if (w->sig != sig) {
                    /* another call: its member's header tells which */
                    rc = check_headers(t, st, bytes, op->code, (uint32_t)es, root);
                    rc = rc ? rc : NUMACOLL_ERR_MISMATCH;
                    break;
                }
                st->src[k] = (const char *)(w + 1);
            }
            if (!rc)
                combine_small(st, op, out, two, p, m);
            finish_round(st, me, r); /* 6. */
            break;
        }
        /* 3. Every member's slot in the first round (the headers), after
         * it only the ones step 4 reads: two-level, my domain's; whole
         * rounds: the root the other's, the other none. */
        const int nwait = first ? p : whole ? (me == root ? p : 0) : nd;
        for (int j = 0; j < nwait && !rc; j++) {
            const int k = first || !two ? j : st->dmem[da + j];
            if (k != me && (rc2 = wait_posted(t, st, &slot_of(st, k)->seq, k, r))) {
                if (rc2 != RED_ZERO)
                    return nc_team_fail(t, rc2);
                rc = zero_mismatch(t, k, bytes, root); /* a first round: k posted no other */
            }
        }
        if (rc) {
            finish_round(st, me, r); /* 6. */
            break;
        }
        if (nwait == p)
            all_posted(st, r);
        if (first && (rc = check_headers(t, st, bytes, op->code, (uint32_t)es, root))) {
            finish_round(st, me, r); /* 6. */
            break;
        }
        first = 0;
        if (small) {
            /* 3s. */
            for (int k = 0; k < p; k++)
                st->src[k] = data_of(slot_of(st, k));
            combine_small(st, op, out, two, p, m);
            finish_round(st, me, r); /* 6. */
            break;
        }
        if (whole) {
            /* 4w. the root: the round over both contributions, into its
             * buffer (in place: through private memory, its input is there) */
            if (me == root && m) {
                for (int k = 0; k < p; k++)
                    st->src[k] = k == me ? in + off : data_at(st, k);
                char *wdst = in != out ? out + off : st->part;
                combine(op, wdst, st->src, p, m);
                if (wdst != out + off)
                    nc_copy(out + off, wdst, len);
            }
            finish_round(st, me, r); /* 6. */
            off += len;
            continue;
        }
        /* The root of a reduce (not in place) reduces its slice straight
         * into its buffer: nobody else reads it. */
        const int direct = root == me && in != out;
        char *dst = direct ? out + off + lo * es : data_at(st, me) + lo * es;
        if (two) {
            /* 4a. the slices I reduce over my domain: into my slot (my own
             * slice: into st->part, only I read it) */
            for (int k = 0; k < p; k++) {
                size_t klo, khi;
                slice_of(m, es, p, k, &klo, &khi);
                if (klo == khi || st->work[st->mydom * p + k] != me)
                    continue;
                for (int j = 0; j < nd; j++) {
                    const int x = st->dmem[da + j];
                    st->src[j] = (x == me ? in + off : data_at(st, x)) + klo * es;
                }
                combine(op, k == me ? st->part : data_at(st, me) + klo * es, st->src, nd,
                        khi - klo);
            }
            /* release: my partials before part; pairs with the acquire in
             * wait_ctl() (step 4b). */
            atomic_store_explicit(&st->ctl[me]->part, r, memory_order_release);
            st->part_pub = r;
            /* 4b. my slice over the domains' partials, in domain order */
            if (lo < hi) {
                for (int d = 0; d < st->D; d++) {
                    const int w = st->work[d * p + me];
                    if (d != st->mydom && (rc2 = wait_ctl(t, &st->ctl[w]->part, r)))
                        return nc_team_fail(t, rc2);
                    st->src[d] = d == st->mydom ? st->part : data_at(st, w) + lo * es;
                }
                combine(op, dst, st->src, st->D, hi - lo);
            }
        } else if (lo < hi) {
            /* 4. my slice over every member */
            for (int k = 0; k < p; k++)
                st->src[k] = k == me ? in + off + lo * es : data_at(st, k) + lo * es;
            combine(op, dst, st->src, p, hi - lo);
        }
        /* release: my reduced slice before done, and my reads of the
         * workers' partials (4b) before it; pairs with the acquire in
         * wait_ctl() (step 5, and 5f: a worker overwrites its partial of my
         * slice only after it). */
        atomic_store_explicit(&st->ctl[me]->done, r, memory_order_release);
        st->done_pub = r;
        /* 5f. an allreduce forwarded in my domain: the slices of other
         * domains I reduced over mine in 4a, into my buffer and my slot */
        const int fout = two && root < 0 && fwd_out(t, st);
        if (fout) {
            for (int k = 0; k < p; k++) {
                size_t klo, khi;
                slice_of(m, es, p, k, &klo, &khi);
                if (klo == khi || st->pl.dom[k] == st->mydom || st->work[st->mydom * p + k] != me)
                    continue;
                if ((rc2 = wait_ctl(t, &st->ctl[k]->done, r)))
                    return nc_team_fail(t, rc2);
                char *o = out + off + klo * es;
                nc_copy(o, data_at(st, k) + klo * es, (khi - klo) * es);
                if (t->shm_nt)
                    nc_copy_nt(data_at(st, me) + klo * es, o, (khi - klo) * es);
                else
                    nc_copy(data_at(st, me) + klo * es, o, (khi - klo) * es);
                t->reduce_fwd++;
            }
            if (t->shm_nt)
                nc_copy_nt_fence();
            /* release: the forwarded slices (streamed: after the fence)
             * before fwd; pairs with the acquire in wait_ctl() (step 5). */
            atomic_store_explicit(&st->ctl[me]->fwd, r, memory_order_release);
            st->fwd_pub = r;
        }
        /* 5. */
        if (reader)
            for (int k = 0; k < p; k++) {
                size_t klo, khi;
                slice_of(m, es, p, k, &klo, &khi);
                if (klo == khi || (k == me && direct))
                    continue;
                int from = k; /* 5f: from the member of my domain that forwards it */
                if (fout && st->pl.dom[k] != st->mydom) {
                    if ((from = st->work[st->mydom * p + k]) == me)
                        continue;
                    if ((rc2 = wait_ctl(t, &st->ctl[from]->fwd, r)))
                        return nc_team_fail(t, rc2);
                    t->reduce_fwd++;
                } else if (k != me && (rc2 = wait_ctl(t, &st->ctl[k]->done, r))) {
                    return nc_team_fail(t, rc2);
                }
                nc_copy(out + off + klo * es, data_at(st, from) + klo * es,
                       (khi - klo) * es);
            }
        finish_round(st, me, r); /* 6. */
        off += len;
    } while (off < bytes);
    refresh_flags(t, st);
    return rc;
}

/* done and part move only in reduce-scatter and CMA rounds, fwd in forwarded
 * allreduce rounds (5f): after 2^30
 * rounds without one, bring them forward so that the wrap-safe comparisons
 * of steps 4b, 5 and X5 never take a value 2^31 rounds old for a new one.
 * No member waits for them in rounds that did not set them (the paths are
 * the same on every member), so relaxed stores do. */
static void refresh_flags(numacoll_team_t *t, red_state_t *st)
{
    const int me = t->rank;
    const uint32_t last = t->reduce_round - 1u;
    if (last - st->done_pub > (1u << 30)) {
        atomic_store_explicit(&st->ctl[me]->done, last, memory_order_relaxed);
        st->done_pub = last;
    }
    if (last - st->part_pub > (1u << 30)) {
        atomic_store_explicit(&st->ctl[me]->part, last, memory_order_relaxed);
        st->part_pub = last;
    }
    if (last - st->fwd_pub > (1u << 30)) {
        atomic_store_explicit(&st->ctl[me]->fwd, last, memory_order_relaxed);
        st->fwd_pub = last;
    }
    /* My slots' seqs move only in rounds of a count above 0 (not in Z),
     * my words of a slot's call line in the first rounds of calls that
     * start in that slot only: after 2^30 rounds without one, nobody waits
     * for it (such a round would have posted it), so bring it to a round
     * 2^29 back, one no member waits for (every member's rounds are within
     * RED_ZERO_AHEAD of mine) and none equals for 2^32 - 2^29 rounds; a
     * seq is compared for equality only. */
    if (last - st->slot_scan > (1u << 28)) {
        st->slot_scan = last;
        const uint32_t old = last - (1u << 29);
        for (unsigned sl = 0; sl < (unsigned)st->S; sl++) {
            red_slot_t *mine = (red_slot_t *)(st->slots[me] + (size_t)sl * st->stride);
            if (last - atomic_load_explicit(&mine->seq, memory_order_relaxed) > (1u << 30))
                atomic_store_explicit(&mine->seq, old, memory_order_relaxed);
            if (st->lines && last - st->line_pub[sl] > (1u << 30)) {
                atomic_store_explicit(&word_at(st, sl, me)->seq, old, memory_order_relaxed);
                st->line_pub[sl] = old;
            }
        }
    }
}

/* ---- entry points -------------------------------------------------------------------- */

static int reduce_any(numacoll_team_t *t, const void *sendbuf, void *recvbuf, size_t count,
                      const red_op_t *op, int root)
{
    if (!t || (root >= 0 && root >= t->p))
        return NUMACOLL_ERR_INVAL;
    const int reader = root < 0 || root == t->rank;
    const char *in = sendbuf == NULL || sendbuf == NUMACOLL_IN_PLACE ? recvbuf : sendbuf;
    if (count && (!in || (reader && !recvbuf)))
        return NUMACOLL_ERR_INVAL;
    size_t bytes;
    if (__builtin_mul_overflow(count, op->es, &bytes))
        return NUMACOLL_ERR_INVAL;
    if (t->broken)
        return NUMACOLL_ERR_BROKEN;
    if (t->p == 1) {
        if (count && in != recvbuf)
            memmove(recvbuf, in, bytes);
        return 0;
    }
    /* Broadcasts this member deferred first (see numacoll_barrier()). */
    int frc = t->ring_pending ? nc_bcast_flush(t) : 0;
    if (frc && !nc_call_error(frc))
        return frc;
    int rc = red_call(t, in, recvbuf, count, op, root);
    return rc ? rc : frc;
}

static int predefined(red_op_t *op, numacoll_type_t type, numacoll_op_t o)
{
    op->k = nc_red_kernel(o, type);
    op->user = NULL;
    if (!op->k)
        return NUMACOLL_ERR_INVAL;
    op->es = numacoll_type_size(type);
    op->code = (uint32_t)type | (uint32_t)o << 8;
    return 0;
}

static int user(red_op_t *op, const numacoll_user_op_t *u)
{
    if (!u || !u->fn || !u->elem_size || u->elem_size > UINT32_MAX)
        return NUMACOLL_ERR_INVAL;
    op->k = NULL;
    op->user = u;
    op->es = u->elem_size;
    op->code = 1u << 16 | (u->commutative ? 1u << 17 : 0u); /* the order depends on it */
    return 0;
}

NUMACOLL_API int numacoll_reduce(numacoll_team_t *t, const void *sendbuf, void *recvbuf,
                                 size_t count, numacoll_type_t type, numacoll_op_t o, int root)
{
    red_op_t op;
    if (root < 0 || predefined(&op, type, o))
        return NUMACOLL_ERR_INVAL;
    return reduce_any(t, sendbuf, recvbuf, count, &op, root);
}

NUMACOLL_API int numacoll_allreduce(numacoll_team_t *t, const void *sendbuf, void *recvbuf,
                                    size_t count, numacoll_type_t type, numacoll_op_t o)
{
    red_op_t op;
    if (predefined(&op, type, o))
        return NUMACOLL_ERR_INVAL;
    return reduce_any(t, sendbuf, recvbuf, count, &op, -1);
}

NUMACOLL_API int numacoll_reduce_user(numacoll_team_t *t, const void *sendbuf, void *recvbuf,
                                      size_t count, const numacoll_user_op_t *u, int root)
{
    red_op_t op;
    if (root < 0 || user(&op, u))
        return NUMACOLL_ERR_INVAL;
    return reduce_any(t, sendbuf, recvbuf, count, &op, root);
}

NUMACOLL_API int numacoll_allreduce_user(numacoll_team_t *t, const void *sendbuf, void *recvbuf,
                                         size_t count, const numacoll_user_op_t *u)
{
    red_op_t op;
    if (user(&op, u))
        return NUMACOLL_ERR_INVAL;
    return reduce_any(t, sendbuf, recvbuf, count, &op, -1);
}
