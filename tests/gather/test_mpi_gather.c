/*
 * MPI_Gather, MPI_Gatherv, MPI_Scatter, MPI_Scatterv, MPI_Allgather,
 * MPI_Allgatherv, MPI_Alltoall, MPI_Alltoallv through numacoll (or through the
 * MPI library when numacoll does not take a call: the same checks must pass).
 * Element j of the block rank s sends to rank d in call c is an int computed
 * from (c, s, d, j), so every rank checks its own receive buffers:
 *  1. every collective, every root, counts 0 1 7 1000 20000 (80 KB: fragments)
 *     and (full) 300000 ints, in place and not;
 *  2. datatypes: MPI_INT on both sides; a strided type (one int every two,
 *     MPI_Type_create_resized) on the receive or on the send side only; a
 *     contiguous pair of ints sent against twice as many MPI_INT received
 *     (one signature, different count/datatype pairs);
 *  3. v-forms: per-rank counts with zeros, blocks in reversed order with gaps
 *     (non-monotonic displacements); the gaps and everything past the
 *     blocks keep their canary, the send buffers stay as they were;
 *  4. communicators: world, a dup, even/odd halves, reversed rank order,
 *     MPI_COMM_SELF; on one node (no virtual nodes) every call on a
 *     communicator of more than one rank must be numacoll's (NUMACOLL_STATS
 *     counters); with virtual nodes gather(v), scatter(v) and allgather(v)
 *     must be numacoll's (hierarchical: node, leaders, node), alltoall(v) the
 *     MPI library's;
 *  5. mode mismatch: one rank passes one element more (errors return): with
 *     numacoll, MPI_ERR_TRUNCATE exactly on the ranks that receive a block
 *     of another size, success elsewhere, no hang; then a right call works;
 *  6. MPI_Alltoallw (world, reversed): the MPI library's, counted once as
 *     such with the bytes it sends, every received int checked; an invalid
 *     datatype is the MPI library's error (errors return), counted, no abort.
 * Usage: test_mpi_gather quick | full | mismatch
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nc_team.h" /* gather_cma, gather_fwd, gather_via */
#include "numacoll_mpi.h"

#define CANARY (-7)
#define GAPE 2 /* elements between the blocks of a v-form */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum { GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, NCOLL };
static const char *const names[NCOLL] = {"MPI_Gather",    "MPI_Gatherv",    "MPI_Scatter",
                                         "MPI_Scatterv",  "MPI_Allgather",  "MPI_Allgatherv",
                                         "MPI_Alltoall",  "MPI_Alltoallv"};
static const int rooted[NCOLL] = {1, 1, 1, 1, 0, 0, 0, 0};
static const int multi_send[NCOLL] = {0, 0, 1, 1, 0, 0, 1, 1};

static int failures, g_rank;
static MPI_Datatype t_strided, t_pair;

#define FAIL(...)                                                                              \
    do {                                                                                       \
        fprintf(stderr, "FAIL rank %d: ", g_rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                         \
        fprintf(stderr, "\n");                                                                \
        if (++failures > 10)                                                                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                     \
    } while (0)

static int val(uint64_t c, int s, int d, long j)
{
    uint64_t x = c * 0x9E3779B97F4A7C15ull ^ (uint64_t)s << 40 ^ (uint64_t)d << 52 ^ (uint64_t)j;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659EFD5ull;
    int v = (int)(x >> 33);
    return v == CANARY ? 1 : v;
}

static unsigned long long nc_calls(void)
{
    numacoll_mpi_stats_t s;
    unsigned long long n = 0;
    if (numacoll_mpi_stats(&s) != 0)
        return 0;
    for (int k = NUMACOLL_MPI_GATHER; k <= NUMACOLL_MPI_ALLTOALLV; k++)
        n += s.calls_numacoll[k];
    return n;
}

/* Elements in block s -> d (v-forms vary; alltoallv symmetric). */
static int cnt(int coll, uint64_t c, int s, int d, int n)
{
    if (!(coll & 1))
        return n;
    const int k = coll == ALLTOALLV ? s + d : coll == SCATTERV ? d : s;
    switch ((unsigned)(k + (int)(c % 3)) % 4) {
    case 0: return 0;
    case 1: return n;
    case 2: return n / 2 + 1;
    default: return n + 3;
    }
}

/* Datatype variants: 0 INT/INT, 1 INT/strided, 2 strided/INT, 3 pair/INT. */
typedef struct side {
    MPI_Datatype dt;
    int w;   /* ints per extent */
    int per; /* ints per element */
} side_t;

static side_t side_of(int variant, int send)
{
    if (variant == 1 && !send)
        return (side_t){t_strided, 2, 1};
    if (variant == 2 && send)
        return (side_t){t_strided, 2, 1};
    if (variant == 3 && send)
        return (side_t){t_pair, 2, 2};
    return (side_t){MPI_INT, 1, 1};
}

/* Block layout in elements of a side: uniform (k * n) or reversed with gaps. */
static void layout(int v, int p, const int *counts, int n, int *displs, long *total)
{
    if (!v) {
        for (int k = 0; k < p; k++)
            displs[k] = k * n;
        *total = (long)p * n;
        return;
    }
    long at = GAPE;
    for (int k = p - 1; k >= 0; k--) {
        displs[k] = (int)at;
        at += counts[k] + GAPE;
    }
    *total = at;
}

typedef struct call {
    int coll, root, inplace, variant, n;
    uint64_t id;
    int bad; /* >= 0: this rank passes one element more */
} call_t;

/* Elements of side sd that hold `ints` ints. */
static int elems(const side_t *sd, int ints)
{
    return ints / sd->per;
}

static int g_loose; /* mismatch mode on virtual nodes: alltoall(v) only, see run_call() */

static int run_call(MPI_Comm comm, const call_t *c, int check_nc)
{
    int p, me;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &me);
    const int coll = c->coll, root = c->root, v = coll & 1;
    const int is_root = !rooted[coll] || me == root;
    const int scat = coll == SCATTER || coll == SCATTERV;
    const int a2a = coll == ALLTOALL || coll == ALLTOALLV;
    const int gath = coll == GATHER || coll == GATHERV;
    const side_t S = side_of(c->variant, 1), R = side_of(c->variant, 0);
    const int my_n = me == c->bad ? c->n + S.per : c->n; /* in ints */
    /* Ints in block s -> d as each side passes them. */
    int *sc = calloc((size_t)p, sizeof(int)), *rc_ = calloc((size_t)p, sizeof(int));
    int *sd = calloc((size_t)p, sizeof(int)), *rd = calloc((size_t)p, sizeof(int));
    int *sce = calloc((size_t)p, sizeof(int)), *rce = calloc((size_t)p, sizeof(int));
    for (int k = 0; k < p; k++) {
        sc[k] = cnt(coll, c->id, me, k, my_n);
        rc_[k] = cnt(coll, c->id, k, me, my_n);
        sce[k] = elems(&S, sc[k]);
        rce[k] = elems(&R, rc_[k]);
    }
    const int ip = c->inplace && is_root;
    long stot, rtot;
    layout(v, p, sce, elems(&S, my_n), sd, &stot);
    layout(v, p, rce, elems(&R, my_n), rd, &rtot);
    const size_t sints = (size_t)(stot + 4) * (size_t)S.w * (size_t)S.per + 16;
    const size_t rints = (size_t)(rtot + 4) * (size_t)R.w * (size_t)R.per + 16;
    int *sbuf = malloc(sints * sizeof(int)), *rbuf = malloc(rints * sizeof(int));
    for (size_t i = 0; i < sints; i++)
        sbuf[i] = CANARY;
    for (size_t i = 0; i < rints; i++)
        rbuf[i] = CANARY;
    /* Int index of int q of a side's block at element displ. */
#define AT(side, displ, q)                                                                 \
    (((size_t)(displ) + (size_t)((q) / (side).per)) * (size_t)(side).w +                   \
     (size_t)((q) % (side).per))
    /* The send side. */
    const int pd = scat || a2a; /* data depends on the receiver */
    if (multi_send[coll]) {
        if (!scat || me == root)
            for (int d = 0; d < p; d++)
                for (int j = 0; j < sc[d]; j++)
                    sbuf[AT(S, sd[d], j)] = val(c->id, me, pd ? d : 0, j);
    } else {
        for (int j = 0; j < sc[0]; j++)
            sbuf[AT(S, 0, j)] = val(c->id, me, 0, j);
    }
    int *s_copy = malloc(sints * sizeof(int));
    memcpy(s_copy, sbuf, sints * sizeof(int));
    if (ip && (gath || coll == ALLGATHER || coll == ALLGATHERV))
        for (int j = 0; j < rc_[me]; j++)
            rbuf[AT(R, rd[me], j)] = val(c->id, me, 0, j);
    if (ip && a2a)
        for (int d = 0; d < p; d++)
            for (int j = 0; j < rc_[d]; j++)
                rbuf[AT(R, rd[d], j)] = val(c->id, me, d, j);
    const void *sb = ip && !scat ? MPI_IN_PLACE : (void *)sbuf;
    void *rb = ip && scat ? MPI_IN_PLACE : (void *)rbuf;
    const int sn = elems(&S, my_n), rn = elems(&R, my_n);
    const int sone = elems(&S, sc[0]); /* the one block of a gather / allgather sender */
    const unsigned long long before = nc_calls();
    int rc;
    switch (coll) {
    case GATHER: rc = MPI_Gather(sb, sn, S.dt, rb, rn, R.dt, root, comm); break;
    case GATHERV: rc = MPI_Gatherv(sb, sone, S.dt, rb, rce, rd, R.dt, root, comm); break;
    case SCATTER: rc = MPI_Scatter(sb, sn, S.dt, rb, rn, R.dt, root, comm); break;
    case SCATTERV:
        rc = MPI_Scatterv(sb, sce, sd, S.dt, rb, rce[root], R.dt, root, comm);
        break;
    case ALLGATHER: rc = MPI_Allgather(sb, sn, S.dt, rb, rn, R.dt, comm); break;
    case ALLGATHERV: rc = MPI_Allgatherv(sb, sone, S.dt, rb, rce, rd, R.dt, comm); break;
    case ALLTOALL: rc = MPI_Alltoall(sb, sn, S.dt, rb, rn, R.dt, comm); break;
    default: rc = MPI_Alltoallv(sb, sce, sd, S.dt, rb, rce, rd, R.dt, comm); break;
    }
    const int took = nc_calls() > before;
    /* check_nc 1: one node, every call numacoll's; 2: virtual nodes, every call
     * numacoll's (hierarchical) */
    const int hier = 1;
    if (check_nc == 1 && p > 1 && !took)
        FAIL("%s p=%d: not numacoll's on one node", names[coll], p);
    if (check_nc == 2 && p > 1 && took != hier)
        FAIL("%s p=%d, virtual nodes: %s", names[coll], p,
             hier ? "not numacoll's (hierarchical)" : "numacoll's, expected the MPI library's");
    /* The expected return: with numacoll, TRUNCATE where a block differs. */
    int want = MPI_SUCCESS;
    if (c->bad >= 0 && took) {
        for (int k = 0; k < p; k++) {
            const int recv = scat           ? (k == root && me != root)
                             : rooted[coll] ? (me == root && k != me)
                                            : k != me;
            const int their = cnt(coll, c->id, k, me, k == c->bad ? c->n + S.per : c->n);
            const int mine = scat ? rc_[root] : rc_[k];
            if (recv && their != mine)
                want = MPI_ERR_TRUNCATE;
        }
    }
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (c->bad >= 0) {
        /* across nodes (g_loose) a rank with no bad block of its own may get
         * TRUNCATE too: its node's part was longer than expected */
        if (took && cls != want && !(g_loose && !want && cls == MPI_ERR_TRUNCATE))
            FAIL("%s p=%d mismatch: error class %d, want %d", names[coll], p, cls, want);
        goto out;
    }
    if (rc != MPI_SUCCESS) {
        FAIL("%s p=%d n=%d root %d variant %d: returned %d", names[coll], p, c->n, root,
             c->variant, rc);
        goto out;
    }
    /* The send buffer did not change. */
    if (!ip && memcmp(s_copy, sbuf, sints * sizeof(int)))
        FAIL("%s p=%d: sendbuf changed", names[coll], p);
    /* Every int of the receive buffer. */
    int *want_r = malloc(rints * sizeof(int));
    for (size_t i = 0; i < rints; i++)
        want_r[i] = CANARY;
    if (scat) {
        if (!ip)
            for (int j = 0; j < rc_[root]; j++)
                want_r[AT(R, 0, j)] = val(c->id, root, me, j);
    } else if (is_root) {
        for (int s = 0; s < p; s++)
            for (int j = 0; j < rc_[s]; j++)
                want_r[AT(R, rd[s], j)] = val(c->id, s, a2a ? me : 0, j);
    }
    if (ip && scat)
        memcpy(want_r, rbuf, rints * sizeof(int)); /* not used */
    for (size_t i = 0; i < rints; i++)
        if (rbuf[i] != want_r[i]) {
            FAIL("%s p=%d n=%d root %d in place %d variant %d: int %zu is %d, want %d",
                 names[coll], p, c->n, root, ip, c->variant, i, rbuf[i], want_r[i]);
            break;
        }
    free(want_r);
out:
#undef AT
    free(sc);
    free(rc_);
    free(sd);
    free(rd);
    free(sce);
    free(rce);
    free(sbuf);
    free(rbuf);
    free(s_copy);
    return 0;
}

/* Arguments MPI allows that a layer could mistake: a NULL send buffer with zero
 * send counts on a rank that receives (MPI_Alltoallv of a sparse exchange), and
 * counts MPI ignores under MPI_IN_PLACE set to -1. */
static void edge_cases(MPI_Comm comm)
{
    int p, me;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &me);
    int *sc = calloc((size_t)p, sizeof(int)), *sd = calloc((size_t)p, sizeof(int));
    int *rc = calloc((size_t)p, sizeof(int)), *rd = calloc((size_t)p, sizeof(int));
    int *rb = malloc(sizeof(int) * (size_t)(3 * p + 1)), sb[3] = {me, me + 100, me + 200};
    for (int k = 0; k < p; k++) {
        sc[k] = me != 0 && k == 0 ? 3 : 0;
        rc[k] = me == 0 && k != 0 ? 3 : 0;
        rd[k] = 3 * k;
    }
    for (int i = 0; i < 3 * p + 1; i++)
        rb[i] = CANARY;
    int e = MPI_Alltoallv(me == 0 ? NULL : sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, comm);
    if (e != MPI_SUCCESS)
        FAIL("MPI_Alltoallv, rank 0 sending nothing from NULL: returned %d", e);
    for (int k = 0; k < p; k++)
        for (int j = 0; j < 3; j++) {
            const int want = me == 0 && k != 0 ? k + 100 * j : CANARY;
            if (rb[3 * k + j] != want)
                FAIL("MPI_Alltoallv, rank 0 sending nothing from NULL: int %d is %d, want %d",
                     3 * k + j, rb[3 * k + j], want);
        }
    /* in place, sendcount -1 and sendtype MPI_DATATYPE_NULL: ignored */
    for (int k = 0; k < p; k++)
        rb[k] = k == me ? 7 * me + 1 : CANARY;
    e = MPI_Allgather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, rb, 1, MPI_INT, comm);
    if (e != MPI_SUCCESS)
        FAIL("MPI_Allgather in place with sendcount -1: returned %d", e);
    for (int k = 0; k < p; k++)
        if (rb[k] != 7 * k + 1)
            FAIL("MPI_Allgather in place: int %d is %d, want %d", k, rb[k], 7 * k + 1);
    free(sc), free(sd), free(rc), free(rd), free(rb);
}

static void suite(MPI_Comm comm, const char *cname, int full, int check_nc, uint64_t *id)
{
    edge_cases(comm);
    int p;
    MPI_Comm_size(comm, &p);
    if (check_nc == 1) { /* real nodes (tests/multinode): hierarchical where comm spans several */
        MPI_Comm node;
        int lp, all_local;
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &lp);
        MPI_Comm_free(&node);
        MPI_Allreduce(&(int){lp == p}, &all_local, 1, MPI_INT, MPI_LAND, comm);
        if (!all_local)
            check_nc = 2;
    }
    static const int quick_n[] = {0, 1, 7, 1000, 20000};
    const int nn = (int)ARRAY_SIZE(quick_n) + (full ? 1 : 0);
    const int f0 = failures;
    *id = (*id / 1000000 + 1) * 1000000; /* the same on every rank of comm, whatever came before */
    for (int ni = 0; ni < nn; ni++) {
        const int n = ni < (int)ARRAY_SIZE(quick_n) ? quick_n[ni] : 300000;
        for (int coll = 0; coll < NCOLL; coll++)
            for (int variant = 0; variant < 4; variant++) {
                if (variant == 3 && ((coll & 1) || (n & 1)))
                    continue; /* pairs: uniform forms with an even count */
                if (variant && n > 20000)
                    continue;
                for (int root = 0; root < (rooted[coll] ? p : 1); root++) {
                    if (n > 1000 && root && root != p - 1)
                        continue;
                    for (int inpl = 0; inpl <= 1; inpl++) {
                        if (inpl && variant == 3)
                            continue;
                        call_t c = {coll, rooted[coll] ? root : -1, inpl, variant, n, ++*id, -1};
                        run_call(comm, &c, check_nc);
                    }
                }
            }
    }
    if (g_rank == 0)
        printf("%s (p=%d): %s\n", cname, p, failures == f0 ? "ok" : "FAIL");
}

/* MPI_Alltoallv in place with negative displacements: block k lies
 * (k + 2) * 3 ints below recvbuf, so every block is below it with a gap of
 * 3 ints before recvbuf; afterwards block k holds what rank k sent, and the
 * gap and the ints from recvbuf on are untouched. */
static void a2av_negative(MPI_Comm comm)
{
    enum { N = 3, TAIL = 8 };
    int p, me;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &me);
    int *all = malloc(sizeof(int) * ((size_t)N * (p + 1) + TAIL)),
        *cnt = malloc(sizeof(int) * p), *dsp = malloc(sizeof(int) * p);
    int *rb = all + N * (p + 1);
    for (int j = -N; j < TAIL; j++)
        rb[j] = CANARY;
    for (int k = 0; k < p; k++) {
        cnt[k] = N;
        dsp[k] = -(k + 2) * N;
        for (int j = 0; j < N; j++)
            rb[dsp[k] + j] = me * 1000 + k * 10 + j; /* for rank k */
    }
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_INT, rb, cnt, dsp, MPI_INT, comm);
    for (int k = 0; k < p; k++)
        for (int j = 0; j < N; j++)
            if (rb[dsp[k] + j] != k * 1000 + me * 10 + j) {
                fprintf(stderr, "rank %d: alltoallv in place, displacement %d: block %d int %d "
                        "is %d, expected %d\n", g_rank, dsp[k], k, j, rb[dsp[k] + j],
                        k * 1000 + me * 10 + j);
                failures++;
                k = p;
                break;
            }
    for (int j = -N; j < TAIL; j++)
        if (rb[j] != CANARY) {
            fprintf(stderr, "rank %d: alltoallv in place wrote outside its blocks\n", g_rank);
            failures++;
            break;
        }
    free(all);
    free(cnt);
    free(dsp);
}

/* NUMACOLL_STATS bytes: what a rank's send buffer holds for the call, its own
 * block included (docs/gather.md): 3 ints per block, root 0. */
static void stats_bytes(int p)
{
    enum { N = 3 };
    int *sb = malloc(sizeof(int) * N * (size_t)p), *rb = malloc(sizeof(int) * N * (size_t)p);
    static const int which[4] = {NUMACOLL_MPI_GATHER, NUMACOLL_MPI_SCATTER,
                                 NUMACOLL_MPI_ALLGATHER, NUMACOLL_MPI_ALLTOALL};
    for (int i = 0; i < N * p; i++)
        sb[i] = i;
    for (int k = 0; k < 4; k++) {
        numacoll_mpi_stats_t s0, s1;
        numacoll_mpi_stats(&s0);
        if (k == 0)
            MPI_Gather(sb, N, MPI_INT, rb, N, MPI_INT, 0, MPI_COMM_WORLD);
        else if (k == 1)
            MPI_Scatter(sb, N, MPI_INT, rb, N, MPI_INT, 0, MPI_COMM_WORLD);
        else if (k == 2)
            MPI_Allgather(sb, N, MPI_INT, rb, N, MPI_INT, MPI_COMM_WORLD);
        else
            MPI_Alltoall(sb, N, MPI_INT, rb, N, MPI_INT, MPI_COMM_WORLD);
        numacoll_mpi_stats(&s1);
        const int c = which[k];
        const unsigned long long want = sizeof(int) * N *
                                        (unsigned long long)(k == 1 ? (g_rank == 0 ? p : 0)
                                                             : k == 3 ? p : 1);
        const unsigned long long got = s1.bytes_numacoll[c] + s1.bytes_pmpi[c] -
                                       s0.bytes_numacoll[c] - s0.bytes_pmpi[c];
        if (got != want) {
            fprintf(stderr, "rank %d: NUMACOLL_STATS counted %llu bytes for call %d, want %llu\n",
                    g_rank, got, k, want);
            failures++;
        }
    }
    free(sb);
    free(rb);
}

/* MPI_Alltoallw is the MPI library's, counted by numacoll as one such call of
 * the bytes it sends: rank s sends s + d + 1 ints (of its rank and d) to
 * rank d, a datatype per block (MPI_INT and a contiguous pair of them),
 * displacements in bytes; every received int checked. */
static void alltoallw_counted(MPI_Comm comm)
{
    int p, me;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &me);
    int *sc = malloc(sizeof(int) * 4 * (size_t)p), *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
    MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * 2 * (size_t)p), *rt = st + p;
    int stot = 0, rtot = 0;
    for (int k = 0; k < p; k++) {
        /* a pair type where the block is even, ints where odd */
        const int sn = me + k + 1, rn = k + me + 1;
        st[k] = sn % 2 ? MPI_INT : t_pair;
        rt[k] = rn % 2 ? MPI_INT : t_pair;
        sc[k] = sn % 2 ? sn : sn / 2;
        rc[k] = rn % 2 ? rn : rn / 2;
        sd[k] = stot * (int)sizeof(int);
        rd[k] = rtot * (int)sizeof(int);
        stot += sn;
        rtot += rn;
    }
    int *sb = malloc(sizeof(int) * (size_t)stot), *rb = malloc(sizeof(int) * (size_t)(rtot + 1));
    for (int k = 0, o = 0; k < p; k++)
        for (int i = 0; i < me + k + 1; i++)
            sb[o++] = me * 1000000 + k * 1000 + i;
    for (int i = 0; i <= rtot; i++)
        rb[i] = -1;
    numacoll_mpi_stats_t s0, s1;
    numacoll_mpi_stats(&s0);
    const int e = MPI_Alltoallw(sb, sc, sd, st, rb, rc, rd, rt, comm);
    numacoll_mpi_stats(&s1);
    const int w = NUMACOLL_MPI_ALLTOALLW;
    if (e != MPI_SUCCESS || s1.calls_pmpi[w] - s0.calls_pmpi[w] != 1 ||
        s1.calls_numacoll[w] != s0.calls_numacoll[w] ||
        s1.bytes_pmpi[w] - s0.bytes_pmpi[w] != sizeof(int) * (unsigned long long)stot) {
        fprintf(stderr, "rank %d: MPI_Alltoallw returned %d, NUMACOLL_STATS counted %llu calls "
                "of the MPI library, %llu of numacoll, %llu bytes (want 1, 0, %llu)\n", g_rank, e,
                s1.calls_pmpi[w] - s0.calls_pmpi[w], s1.calls_numacoll[w] - s0.calls_numacoll[w],
                s1.bytes_pmpi[w] - s0.bytes_pmpi[w], sizeof(int) * (unsigned long long)stot);
        failures++;
    }
    for (int k = 0, o = 0; k < p; k++)
        for (int i = 0; i < k + me + 1; i++, o++)
            if (rb[o] != k * 1000000 + me * 1000 + i) {
                fprintf(stderr, "rank %d: MPI_Alltoallw: int %d of the block from %d is %d\n",
                        g_rank, i, k, rb[o]);
                failures++;
                k = p;
                break;
            }
    if (rb[rtot] != -1) {
        fprintf(stderr, "rank %d: MPI_Alltoallw wrote past its blocks\n", g_rank);
        failures++;
    }
    /* An erroneous call (every rank's last send type MPI_DATATYPE_NULL with a
     * count): the MPI library's error through comm's handler, as without
     * numacoll, counted with no bytes; numacoll must not ask the size of the
     * bad type first (that error would go to MPI_COMM_WORLD: fatal). */
    MPI_Comm errs;
    MPI_Comm_dup(comm, &errs);
    MPI_Comm_set_errhandler(errs, MPI_ERRORS_RETURN);
    st[p - 1] = MPI_DATATYPE_NULL;
    sc[p - 1] = 2;
    numacoll_mpi_stats(&s0);
    const int bad = MPI_Alltoallw(sb, sc, sd, st, rb, rc, rd, rt, errs);
    numacoll_mpi_stats(&s1);
    if (bad == MPI_SUCCESS || s1.calls_pmpi[w] - s0.calls_pmpi[w] != 1 ||
        s1.bytes_pmpi[w] != s0.bytes_pmpi[w]) {
        fprintf(stderr, "rank %d: MPI_Alltoallw with MPI_DATATYPE_NULL returned %d, counted %llu "
                "calls, %llu bytes (want an error, 1, 0)\n", g_rank, bad,
                s1.calls_pmpi[w] - s0.calls_pmpi[w], s1.bytes_pmpi[w] - s0.bytes_pmpi[w]);
        failures++;
    }
    MPI_Comm_free(&errs);
    free(sb);
    free(rb);
    free(sc);
    free(st);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    int p;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    const char *mode = argc > 1 ? argv[1] : "quick";
    MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint)sizeof(int), &t_strided);
    MPI_Type_commit(&t_strided);
    MPI_Type_contiguous(2, MPI_INT, &t_pair);
    MPI_Type_commit(&t_pair);
    const char *vn = getenv("NUMACOLL_TEST_VIRTUAL_NODES");
    const char *dis = getenv("NUMACOLL_DISABLE");
    const int one_node = (!vn || atoi(vn) <= 1) && !(dis && atoi(dis));
    const int check = one_node ? 1 : (vn && atoi(vn) > 1 && !(dis && atoi(dis))) ? 2 : 0;
    uint64_t id = 0;
    if (!strcmp(mode, "mismatch")) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        /* on virtual nodes: alltoall(v), whose sizes travel with the blocks */
        g_loose = check == 2;
        for (int coll = g_loose ? ALLTOALL : 0; coll < NCOLL; coll++)
            for (int n = 5; n <= 50005; n += 50000) {
                call_t c = {coll, rooted[coll] ? p - 1 : -1, 0, 0, n, ++id, p > 1 ? 1 : 0};
                run_call(MPI_COMM_WORLD, &c, 0);
                call_t ok = {coll, c.root, 0, 0, n, ++id, -1};
                run_call(MPI_COMM_WORLD, &ok, one_node);
            }
        if (g_rank == 0)
            printf("mismatch (p=%d): %s\n", p, failures ? "FAIL" : "ok");
    } else {
        const int full = !strcmp(mode, "full");
        suite(MPI_COMM_WORLD, "world", full, check, &id);
        MPI_Comm dup, half, rev;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        suite(dup, "dup", 0, check, &id);
        MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
        suite(half, "half", 0, check, &id);
        MPI_Comm_split(MPI_COMM_WORLD, 0, p - g_rank, &rev);
        suite(rev, "reversed", 0, check, &id);
        suite(MPI_COMM_SELF, "self", 0, 0, &id);
        /* NUMACOLL_TRANSPORT=cma on one node: the blocks went by CMA */
        const char *tr = getenv("NUMACOLL_TRANSPORT");
        numacoll_team_t *tw = numacoll_mpi_comm_team(MPI_COMM_WORLD);
        if (tr && !strcmp(tr, "cma") && check == 1 && p > 1 && (!tw || !tw->cma || !tw->gather_cma)) {
            fprintf(stderr, "rank %d: NUMACOLL_TRANSPORT=cma, but %s\n", g_rank,
                    !tw ? "no team on MPI_COMM_WORLD" : !tw->cma ? "the team may not use CMA"
                                                             : "no block went by CMA");
            failures++;
        }
        /* NUMACOLL_STATS says which transport ran: calls by CMA exactly
         * when blocks went by CMA, never more than numacoll's calls */
        numacoll_mpi_stats_t st;
        numacoll_mpi_stats(&st);
        unsigned long long ncma = 0;
        for (int k = NUMACOLL_MPI_GATHER; k <= NUMACOLL_MPI_ALLTOALLV; k++) {
            ncma += st.calls_cma[k];
            if (st.calls_cma[k] > st.calls_numacoll[k]) {
                fprintf(stderr, "rank %d: NUMACOLL_STATS: %llu calls by CMA of %llu\n", g_rank,
                        st.calls_cma[k], st.calls_numacoll[k]);
                failures++;
            }
        }
        if (tw && tw->gather_cma && !ncma) {
            fprintf(stderr, "rank %d: %llu blocks went by CMA, NUMACOLL_STATS counts no call\n",
                    g_rank, (unsigned long long)tw->gather_cma);
            failures++;
        }
        if (!(tw && tw->cma) && check == 1 && ncma) {
            fprintf(stderr, "rank %d: no CMA here, NUMACOLL_STATS counts %llu calls by it\n",
                    g_rank, ncma);
            failures++;
        }
        /* NUMACOLL_TEST_DOMAINS=v (member k on virtual node k % v) with
         * NUMACOLL_ALLGATHER_NUMA_MIN=0: a rank whose node has another rank
         * carried blocks into it or read them from their carrier */
        const char *dv = getenv("NUMACOLL_TEST_DOMAINS"), *nm = getenv("NUMACOLL_ALLGATHER_NUMA_MIN");
        const int v = dv ? atoi(dv) : 0;
        if (v > 1 && v < p && g_rank % v + v < p && nm && !strcmp(nm, "0") && check == 1 &&
            (!tw || !(tw->gather_fwd + tw->gather_via))) {
            fprintf(stderr, "rank %d: NUMACOLL_TEST_DOMAINS=%d, but %s\n", g_rank, v,
                    !tw ? "no team on MPI_COMM_WORLD" : "no allgather went two-level");
            failures++;
        }
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
        MPI_Comm_free(&rev);
    }
    if (strcmp(mode, "mismatch"))
        a2av_negative(MPI_COMM_WORLD);
    if (check == 1)
        stats_bytes(p);
    if (strcmp(mode, "mismatch")) {
        MPI_Comm rev;
        MPI_Comm_split(MPI_COMM_WORLD, 0, p - g_rank, &rev);
        alltoallw_counted(MPI_COMM_WORLD);
        alltoallw_counted(rev);
        MPI_Comm_free(&rev);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("%s\n", all ? "FAILED" : "PASSED");
    MPI_Type_free(&t_strided);
    MPI_Type_free(&t_pair);
    MPI_Finalize();
    return all ? 1 : 0;
}
