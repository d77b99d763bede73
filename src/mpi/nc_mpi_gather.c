/*
 * MPI_Gather, MPI_Gatherv, MPI_Scatter, MPI_Scatterv, MPI_Allgather,
 * MPI_Allgatherv, MPI_Alltoall, MPI_Alltoallv (nc_mpi_<name>, behind the C
 * and Fortran entry points): numacoll's exchange engine (coll/nc_gather.c)
 * on a communicator whose ranks share one node. Every call takes one path:
 *
 *   1. the communicator's state for this collective (nc_mpi_comm_get: the
 *      same answer on every rank); none: the
 *      MPI library (PMPI), counted in NUMACOLL_STATS; one rank: 2, a copy, 4;
 *      on several nodes: 2, the hierarchical steps below, 4; the uniform
 *      forms on one node (in place or not, but an alltoall not in place)
 *      with predefined types of bytes back to back (MPI_INT, MPI_DOUBLE,
 *      ...) and this rank's own block of one size on both sides: straight
 *      to the core's uniform call (numacoll_gather, _scatter, _allgather,
 *      _alltoall), no step 2-4 and no call into the MPI library (measured,
 *      MPI_Allgather of one double at p = 2: 150-200 -> 120-133 ns);
 *   2. each side (what this rank sends, what it receives) as byte blocks:
 *      block k of a typed buffer is (buf + displ_k * extent, count_k
 *      elements); when the datatype is dense (no holes, elements back to
 *      back) the blocks are the user's memory, else they are packed one by
 *      one into scratch memory (MPI_Pack; a receive side is unpacked in 4);
 *   3. the core call (numacoll_gatherv, _scatterv, _allgatherv, _alltoallv)
 *      with byte counts and displacements; MPI_IN_PLACE as MPI defines it
 *      (the root's send buffer of a gather, its receive buffer of a scatter,
 *      the send buffer of an allgather or alltoall);
 *   4. unpack the received blocks that went through scratch memory.
 * Sizes are compared in bytes: a rank whose receive count for a block
 * differs from the sender's gets MPI_ERR_TRUNCATE through the communicator's
 * error handler (the others complete), never a hang (across nodes: the root
 * of a gather compares the total only), except against a rank whose uniform
 * call moves 0 bytes: it returns at once, as the MPI libraries do, so a peer
 * that expects bytes from it waits for its next gather-family call, and takes
 * that call's block when the two calls agree (an erroneous program, which
 * the MPI libraries do not catch either). Type signatures beyond
 * the byte count are not compared (the MPI libraries do not either).
 * MPI_Alltoallw (a datatype per block) and intercommunicators go to the MPI
 * library, counted in NUMACOLL_STATS (nc_mpi_alltoallw() is that and nothing
 * else).
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "nc_mpi.h"
#include "nc_mpi_dtype.h"

typedef struct xcall {
    int coll;
    const void *sbuf;
    int scount;
    const int *scounts, *sdispls;
    MPI_Datatype stype;
    void *rbuf;
    int rcount;
    const int *rcounts, *rdispls;
    MPI_Datatype rtype;
    int root;
    MPI_Comm comm;
} xcall_t;

static const char *const mpi_name[NC_MPI_NCOLL] = {
    [NC_MPI_GATHER] = "MPI_Gather",       [NC_MPI_GATHERV] = "MPI_Gatherv",
    [NC_MPI_SCATTER] = "MPI_Scatter",     [NC_MPI_SCATTERV] = "MPI_Scatterv",
    [NC_MPI_ALLGATHER] = "MPI_Allgather", [NC_MPI_ALLGATHERV] = "MPI_Allgatherv",
    [NC_MPI_ALLTOALL] = "MPI_Alltoall",   [NC_MPI_ALLTOALLV] = "MPI_Alltoallv",
};

static int is_v(int coll)
{
    return coll == NC_MPI_GATHERV || coll == NC_MPI_SCATTERV || coll == NC_MPI_ALLGATHERV ||
           coll == NC_MPI_ALLTOALLV;
}
static int is_rooted(int coll)
{
    return coll == NC_MPI_GATHER || coll == NC_MPI_GATHERV || coll == NC_MPI_SCATTER ||
           coll == NC_MPI_SCATTERV;
}

static int pmpi(const xcall_t *x)
{
    const int c = x->coll;
    const void *sb = x->sbuf;
    void *rb = x->rbuf;
    switch (c) {
    case NC_MPI_GATHER:
        return PMPI_Gather(sb, x->scount, x->stype, rb, x->rcount, x->rtype, x->root, x->comm);
    case NC_MPI_GATHERV:
        return PMPI_Gatherv(sb, x->scount, x->stype, rb, x->rcounts, x->rdispls, x->rtype,
                            x->root, x->comm);
    case NC_MPI_SCATTER:
        return PMPI_Scatter(sb, x->scount, x->stype, rb, x->rcount, x->rtype, x->root, x->comm);
    case NC_MPI_SCATTERV:
        return PMPI_Scatterv(sb, x->scounts, x->sdispls, x->stype, rb, x->rcount, x->rtype,
                             x->root, x->comm);
    case NC_MPI_ALLGATHER:
        return PMPI_Allgather(sb, x->scount, x->stype, rb, x->rcount, x->rtype, x->comm);
    case NC_MPI_ALLGATHERV:
        return PMPI_Allgatherv(sb, x->scount, x->stype, rb, x->rcounts, x->rdispls, x->rtype,
                               x->comm);
    case NC_MPI_ALLTOALL:
        return PMPI_Alltoall(sb, x->scount, x->stype, rb, x->rcount, x->rtype, x->comm);
    default:
        return PMPI_Alltoallv(sb, x->scounts, x->sdispls, x->stype, rb, x->rcounts, x->rdispls,
                              x->rtype, x->comm);
    }
}

/* ---- 2. a side as byte blocks ----------------------------------------------------------- */

#define SIDE_STACK 64

typedef struct side {
    int n;                /* blocks */
    char *buf;            /* the user's buffer (MPI_BOTTOM resolved) */
    MPI_Datatype dt;
    MPI_Datatype shifted; /* made by nc_dtype_unbottom, freed in side_fini */
    const int *counts, *displs;
    int count;            /* counts == NULL: every block count elements ... */
    long stride;          /* ... at block k * stride elements */
    MPI_Aint extent;
    int size;
    size_t cnt_s[SIDE_STACK], dsp_s[SIDE_STACK]; /* for up to SIDE_STACK blocks */
    size_t *cnt, *dsp;    /* what the core takes, bytes */
    char *base;
    char *scratch;        /* the packed blocks when the type is not dense */
} side_t;

static inline int blk_count(const side_t *s, int k)
{
    return s->counts ? s->counts[k] : s->count;
}
static inline char *blk_addr(const side_t *s, int k)
{
    const long d = s->counts ? (long)s->displs[k] : (long)k * s->stride;
    return s->buf + d * (long)s->extent;
}

static void side_fini(side_t *s)
{
    if (s->cnt != s->cnt_s)
        free(s->cnt);
    if (s->dsp != s->dsp_s)
        free(s->dsp);
    free(s->scratch);
    if (s->shifted != MPI_DATATYPE_NULL)
        PMPI_Type_free(&s->shifted);
}

/* n blocks of buf; pack: 1 when the blocks are input (their bytes are packed
 * now when they go through scratch), or the one block `pre` of an input in
 * place (pre >= 0). 0, or a numacoll error. */
static int side_init(side_t *s, MPI_Comm comm, int n, const void *buf, MPI_Datatype dt,
                     int count, long stride, const int *counts, const int *displs, int pack,
                     int pre)
{
    s->n = n;
    s->scratch = NULL;
    s->buf = (char *)buf;
    s->dt = dt;
    s->shifted = MPI_DATATYPE_NULL;
    s->counts = counts;
    s->displs = displs;
    s->count = count;
    s->stride = stride;
    if (n <= SIDE_STACK) {
        s->cnt = s->cnt_s;
        s->dsp = s->dsp_s;
    } else {
        s->cnt = malloc(sizeof *s->cnt * (size_t)n);
        s->dsp = malloc(sizeof *s->dsp * (size_t)n);
        if (!s->cnt || !s->dsp)
            return NUMACOLL_ERR_NOMEM;
    }
    int maxc = 0;
    for (int k = 0; k < n; k++) {
        const int c = blk_count(s, k);
        if (c < 0)
            return NUMACOLL_ERR_INVAL;
        maxc = c > maxc ? c : maxc;
    }
    if (s->buf == MPI_BOTTOM && maxc)
        nc_dtype_unbottom((void **)&s->buf, &s->dt, &s->shifted);
    /* a predefined type of bytes back to back: no call into the MPI library */
    const int basic = nc_dtype_basic_size(s->dt);
    MPI_Aint lb;
    if (basic) {
        s->size = basic;
        s->extent = basic;
    } else {
        PMPI_Type_size(s->dt, &s->size);
        PMPI_Type_get_extent(s->dt, &lb, &s->extent);
    }
    char *start = s->buf;
    if (!maxc || basic || nc_dtype_contiguous(s->buf, maxc > 1 ? 2 : 1, s->dt, &start)) {
        /* dense: the user's memory */
        const size_t off = maxc ? (size_t)(start - s->buf) : 0;
        s->base = s->buf;
        for (int k = 0; k < n; k++) {
            s->cnt[k] = (size_t)blk_count(s, k) * (size_t)s->size;
            s->dsp[k] = s->cnt[k] ? (size_t)(blk_addr(s, k) - s->buf) + off : 0;
        }
        return 0;
    }
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        s->cnt[k] = (size_t)blk_count(s, k) * (size_t)s->size;
        s->dsp[k] = total;
        total += s->cnt[k];
    }
    if (!(s->scratch = malloc(total ? total : 1)))
        return NUMACOLL_ERR_NOMEM;
    s->base = s->scratch;
    for (int k = 0; k < n; k++)
        if (s->cnt[k] > INT_MAX) {
            /* MPI_Pack's int sizes: one rank alone cannot go elsewhere now */
            nc_log_error("a block of %zu bytes of a non-contiguous datatype: more than the %d "
                         "MPI_Pack takes",
                         s->cnt[k], INT_MAX);
            PMPI_Abort(comm, MPI_ERR_COUNT);
        }
    for (int k = 0; k < n; k++) {
        if (!s->cnt[k] || (!pack && k != pre))
            continue;
        int pos = 0;
        PMPI_Pack(blk_addr(s, k), blk_count(s, k), s->dt, s->scratch + s->dsp[k], (int)s->cnt[k],
                  &pos, comm);
    }
    return 0;
}

/* 4. */
static void side_unpack(side_t *s, MPI_Comm comm, int skip)
{
    if (!s->scratch)
        return;
    for (int k = 0; k < s->n; k++) {
        if (!s->cnt[k] || k == skip || s->cnt[k] > INT_MAX)
            continue;
        int pos = 0;
        PMPI_Unpack(s->scratch + s->dsp[k], (int)s->cnt[k], &pos, blk_addr(s, k),
                    blk_count(s, k), s->dt, comm);
    }
}

/* ---- several nodes: gather(v) and allgather(v) ------------------------------------------ */
/*
 * Node n's members in node order (lrank), every node's blocks packed in that
 * order, the nodes in node order ("the node-packed layout"):
 *   allgather(v): 1. each node gathers its members' blocks to its leader (the
 *      core's gatherv), straight into the node's place in the node-packed
 *      buffer; 2. the leaders PMPI_Allgatherv the nodes' parts; 3. each
 *      leader broadcasts the whole buffer to its node (numacoll_bcast);
 *      4. every rank copies the blocks to their places;
 *   gather(v): 1. each node gathers its members' sizes (gatherv: only the
 *      root knows them all) and blocks to its leader; 2. the leaders
 *      PMPI_Gather the nodes' byte counts and PMPI_Gatherv the nodes' parts
 *      to the leader of the root's node; 3. that leader sends the buffer to
 *      the root when it is not the root (PMPI_Send on the node's
 *      communicator); 4. the root copies the blocks to their places.
 * Scatter(v): hier_scatter() below; alltoall(v): hier_alltoall().
 */
typedef struct nodes {
    int N;
    int *first; /* N + 1: node n's members are at[first[n] .. first[n + 1]) */
    int *at;    /* comm ranks, node by node, in node order */
} nodes_t;

static int nodes_init(nodes_t *nd, const nc_mpi_comm_t *c)
{
    const int p = c->size, N = c->nnodes;
    nd->N = N;
    nd->first = calloc((size_t)N + 1, sizeof(int));
    nd->at = malloc(sizeof(int) * (size_t)p);
    if (!nd->first || !nd->at)
        return NUMACOLL_ERR_NOMEM;
    for (int r = 0; r < p; r++)
        nd->first[c->node_of[r] + 1]++;
    for (int n = 0; n < N; n++)
        nd->first[n + 1] += nd->first[n];
    for (int r = 0; r < p; r++)
        nd->at[nd->first[c->node_of[r]] + c->lrank_of[r]] = r;
    return 0;
}

static void nodes_fini(nodes_t *nd)
{
    free(nd->first);
    free(nd->at);
}

/* The leaders' counts and displacements of the node parts as ints (MPI's
 * counts); NUMACOLL_ERR_INVAL past INT_MAX bytes. */
static int node_counts(const nodes_t *nd, const size_t *ntot, int *cnt, int *dsp)
{
    size_t at = 0;
    for (int n = 0; n < nd->N; n++) {
        if (ntot[n] > INT_MAX || at > INT_MAX)
            return NUMACOLL_ERR_INVAL;
        cnt[n] = (int)ntot[n];
        dsp[n] = (int)at;
        at += ntot[n];
    }
    return 0;
}

/* Step 1 on my node: members' blocks (sizes sz[], node order) to the leader's
 * buf. A node of one rank copies. */
static int node_gather(const nc_mpi_comm_t *c, const nodes_t *nd, const void *mine,
                       size_t mybytes, const size_t *sz, char *buf)
{
    const int n = c->node_of[c->rank], nn = nd->first[n + 1] - nd->first[n];
    if (!c->team) {
        if (mybytes != sz[0])
            return NUMACOLL_ERR_TRUNCATE;
        if (mybytes)
            nc_copy(buf, mine, mybytes);
        return 0;
    }
    size_t *dsp = malloc(sizeof(size_t) * (size_t)nn);
    if (!dsp)
        return NUMACOLL_ERR_NOMEM;
    size_t at = 0;
    for (int l = 0; l < nn; l++) {
        dsp[l] = at;
        at += sz[l];
    }
    static const char nothing[1]; /* a send buffer of no bytes (NULL would mean in place) */
    int rc = numacoll_gatherv(c->team, mine ? mine : nothing, mybytes, buf, sz, dsp, 0);
    free(dsp);
    return rc;
}

static int hier_allgather(nc_mpi_comm_t *c, int coll, const void *mine, size_t mybytes,
                          side_t *R, int ip)
{
    const int p = c->size, me = c->rank, n = c->node_of[me];
    const int leader = c->leaders != MPI_COMM_NULL;
    nodes_t nd;
    int rc = nodes_init(&nd, c), rc2;
    size_t *ntot = calloc((size_t)nd.N, sizeof(size_t)), *sz = malloc(sizeof(size_t) * (size_t)p);
    int *ncnt = malloc(sizeof(int) * (size_t)nd.N), *ndsp = malloc(sizeof(int) * (size_t)nd.N);
    char *all = NULL;
    if (!rc && (!ntot || !sz || !ncnt || !ndsp))
        rc = NUMACOLL_ERR_NOMEM;
    size_t T = 0;
    if (!rc) {
        for (int i = 0; i < p; i++) {
            sz[i] = R->cnt[nd.at[i]]; /* node-packed order */
            ntot[c->node_of[nd.at[i]]] += sz[i];
            T += sz[i];
        }
        rc = node_counts(&nd, ntot, ncnt, ndsp);
        if (!rc && !(all = malloc(T ? T : 1)))
            rc = NUMACOLL_ERR_NOMEM;
    }
    if (rc == NUMACOLL_ERR_NOMEM) { /* a local failure the others cannot see */
        nc_log_error("MPI_Allgather across nodes: out of memory");
        PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
    }
    if (rc) { /* more than INT_MAX bytes of a node: the same on every rank (sizes and
                 nodes are), nobody starts */
        nodes_fini(&nd);
        free(ntot), free(sz), free(ncnt), free(ndsp), free(all);
        return rc;
    }
    /* 1. */
    rc = node_gather(c, &nd, mine, mybytes, sz + nd.first[n], all + ndsp[n]);
    /* 2. */
    if (leader) {
        nc_leader_allgatherv(c, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, ncnt, ndsp, MPI_BYTE);
        nc_mpi_count_leader(coll, 1);
    }
    /* 3. */
    if (c->team && (rc2 = numacoll_bcast(c->team, all, T, 0)) && !rc)
        rc = rc2;
    /* 4. */
    size_t at = 0;
    for (int i = 0; i < p; i++) {
        const int r = nd.at[i];
        if (!(ip && r == me) && sz[i])
            nc_copy(R->base + R->dsp[r], all + at, sz[i]);
        at += sz[i];
    }
    nodes_fini(&nd);
    free(ntot), free(sz), free(ncnt), free(ndsp), free(all);
    return rc;
}

static int hier_gather(nc_mpi_comm_t *c, const xcall_t *x, const void *mine, size_t mybytes,
                       side_t *R)
{
    const int p = c->size, me = c->rank, n = c->node_of[me], root = x->root;
    const int root_node = c->node_of[root], leader = c->leaders != MPI_COMM_NULL;
    const int lme = c->lrank_of[me];
    nodes_t nd;
    int rc = nodes_init(&nd, c), rc2;
    if (rc)
        PMPI_Abort(x->comm, MPI_ERR_NO_MEM); /* a local failure the others cannot see */
    const int nn = nd.first[n + 1] - nd.first[n];
    uint64_t my64 = mybytes, *sz64 = calloc((size_t)nn, sizeof(uint64_t));
    size_t *sz = calloc((size_t)nn, sizeof(size_t));
    if (!sz64 || !sz)
        PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
    /* 1. the sizes (uniform gather: everyone's is mine), then the blocks */
    if (x->coll == NC_MPI_GATHERV && c->team)
        rc = numacoll_gather(c->team, &my64, sizeof my64, sz64, 0);
    else
        for (int l = 0; l < nn; l++)
            sz64[l] = my64;
    size_t ntot = 0;
    for (int l = 0; l < nn; l++)
        ntot += sz[l] = (size_t)sz64[l];
    if (lme == 0 && ntot > INT_MAX) {
        nc_log_error("MPI_Gather across nodes: %zu bytes from one node, more than the %d "
                     "an MPI count holds",
                     ntot, INT_MAX);
        PMPI_Abort(x->comm, MPI_ERR_COUNT);
    }
    char *part = lme == 0 ? malloc(ntot ? ntot : 1) : NULL;
    if (lme == 0 && !part)
        PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
    if ((rc2 = node_gather(c, &nd, mine, mybytes, sz, part)) && !rc)
        rc = rc2;
    /* 2. */
    char *all = NULL;
    size_t T = 0;
    if (leader) {
        const int ln = n; /* my rank among the leaders is my node's index */
        uint64_t nt = ntot, *nts = NULL;
        int *ncnt = NULL, *ndsp = NULL;
        if (ln == root_node) {
            nts = malloc(sizeof(uint64_t) * (size_t)nd.N);
            ncnt = malloc(sizeof(int) * (size_t)nd.N);
            ndsp = malloc(sizeof(int) * (size_t)nd.N);
            if (!nts || !ncnt || !ndsp)
                PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
        }
        nc_leader_gather(c, &nt, 1, MPI_UINT64_T, nts, 1, MPI_UINT64_T, root_node);
        if (ln == root_node) {
            size_t *st = malloc(sizeof(size_t) * (size_t)nd.N);
            if (!st)
                PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
            for (int k = 0; k < nd.N; k++)
                T += st[k] = (size_t)nts[k];
            if (T > INT_MAX || node_counts(&nd, st, ncnt, ndsp)) {
                nc_log_error("MPI_Gather across nodes: more than %d bytes per node", INT_MAX);
                PMPI_Abort(x->comm, MPI_ERR_COUNT);
            }
            free(st);
            if (!(all = malloc(T ? T : 1)))
                PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
        }
        nc_leader_gatherv(c, part, (int)ntot, MPI_BYTE, all, ncnt, ndsp, MPI_BYTE, root_node);
        nc_mpi_count_leader(x->coll, 2);
        free(nts), free(ncnt), free(ndsp);
    }
    /* 3. */
    if (n == root_node && lme != c->lrank_of[root]) {
        if (leader) {
            uint64_t t64 = T;
            nc_node_send(c, &t64, 1, MPI_UINT64_T, c->lrank_of[root]);
            nc_node_send(c, all, (int)T, MPI_BYTE, c->lrank_of[root]);
        }
    } else if (me == root && !leader) {
        uint64_t t64 = 0;
        nc_node_recv(c, &t64, 1, MPI_UINT64_T, 0);
        T = (size_t)t64;
        if (!(all = malloc(T ? T : 1)))
            PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
        nc_node_recv(c, all, (int)T, MPI_BYTE, 0);
    }
    /* 4. */
    if (me == root) {
        size_t want = 0;
        for (int r = 0; r < p; r++)
            want += R->cnt[r];
        if (want != T) {
            nc_log_error("MPI_Gather across nodes: the root expects %zu bytes in all, the ranks "
                         "sent %zu",
                         want, T);
            if (!rc)
                rc = NUMACOLL_ERR_TRUNCATE;
        } else {
            size_t at = 0;
            for (int i = 0; i < p; i++) {
                const int r = nd.at[i];
                if (r != me || x->sbuf != MPI_IN_PLACE)
                    if (R->cnt[r])
                        nc_copy(R->base + R->dsp[r], all + at, R->cnt[r]);
                at += R->cnt[r];
            }
        }
    }
    nodes_fini(&nd);
    free(sz64), free(sz), free(part), free(all);
    return rc;
}

/* Scatter(v) across nodes, the mirror of hier_gather(): 1. each node gathers
 * its members' receive sizes to its leader (scatterv: only the root knows
 * them all); 2. the root packs the blocks in the node-packed layout and, when
 * it is not its node's leader, sends the node totals and the buffer to that
 * leader (PMPI_Send on the node's communicator); 3. the leaders
 * PMPI_Scatterv the nodes' parts; 4. each leader scatters its part to its
 * node with the shared-memory engine. */
static int hier_scatter(nc_mpi_comm_t *c, const xcall_t *x, const side_t *S, void *mine,
                        size_t mybytes)
{
    const int p = c->size, me = c->rank, n = c->node_of[me], root = x->root;
    const int root_node = c->node_of[root], leader = c->leaders != MPI_COMM_NULL;
    const int lme = c->lrank_of[me], N = c->nnodes;
    nodes_t nd;
    int rc = nodes_init(&nd, c), rc2;
    const int nn = rc ? 0 : nd.first[n + 1] - nd.first[n];
    uint64_t my64 = mybytes, *sz64 = calloc((size_t)nn + 1, sizeof(uint64_t));
    size_t *sz = calloc((size_t)nn + 1, sizeof(size_t)), *dsp = calloc((size_t)nn + 1, sizeof(size_t));
    uint64_t *nt = calloc((size_t)N + 1, sizeof(uint64_t)); /* T, then the N node totals */
    if (rc || !sz64 || !sz || !dsp || !nt) {
        nc_log_error("MPI_Scatter across nodes: out of memory");
        PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
    }
    /* 1. */
    if (x->coll == NC_MPI_SCATTERV && c->team)
        rc = numacoll_gather(c->team, &my64, sizeof my64, sz64, 0);
    else
        for (int l = 0; l < nn; l++)
            sz64[l] = my64;
    size_t ntot = 0;
    for (int l = 0; l < nn; l++) {
        dsp[l] = ntot;
        ntot += sz[l] = (size_t)sz64[l];
    }
    /* 2. */
    char *all = NULL;
    if (me == root || (leader && n == root_node)) {
        if (me == root) {
            for (int i = 0; i < p; i++) {
                const int r = nd.at[i];
                nt[1 + c->node_of[r]] += S->cnt[r];
                nt[0] += S->cnt[r];
            }
        } else {
            nc_node_recv(c, nt, N + 1, MPI_UINT64_T, c->lrank_of[root]);
        }
        if (nt[0] > INT_MAX) {
            nc_log_error("MPI_Scatter across nodes: %llu bytes, more than the %d an MPI count "
                         "holds",
                         (unsigned long long)nt[0], INT_MAX);
            PMPI_Abort(x->comm, MPI_ERR_COUNT);
        }
        if (!(all = malloc(nt[0] ? nt[0] : 1)))
            PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
        if (me == root) {
            size_t at = 0;
            for (int i = 0; i < p; i++) {
                const int r = nd.at[i];
                if (S->cnt[r])
                    nc_copy(all + at, S->base + S->dsp[r], S->cnt[r]);
                at += S->cnt[r];
            }
            if (!leader) {
                nc_node_send(c, nt, N + 1, MPI_UINT64_T, 0);
                nc_node_send(c, all, (int)nt[0], MPI_BYTE, 0);
            }
        } else {
            nc_node_recv(c, all, (int)nt[0], MPI_BYTE, c->lrank_of[root]);
        }
    }
    /* 3. */
    char *part = lme == 0 ? malloc(ntot ? ntot : 1) : NULL;
    if (lme == 0 && (!part || ntot > INT_MAX))
        PMPI_Abort(x->comm, part ? MPI_ERR_COUNT : MPI_ERR_NO_MEM);
    if (leader) {
        int *ncnt = NULL, *ndsp = NULL;
        if (n == root_node) {
            size_t *st = malloc(sizeof(size_t) * (size_t)N);
            ncnt = malloc(sizeof(int) * (size_t)N);
            ndsp = malloc(sizeof(int) * (size_t)N);
            if (!st || !ncnt || !ndsp)
                PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
            for (int k = 0; k < N; k++)
                st[k] = (size_t)nt[1 + k];
            node_counts(&nd, st, ncnt, ndsp); /* nt[0] <= INT_MAX: fits */
            free(st);
        }
        nc_leader_scatterv(c, all, ncnt, ndsp, MPI_BYTE, part, (int)ntot, MPI_BYTE, root_node);
        nc_mpi_count_leader(x->coll, 1);
        free(ncnt), free(ndsp);
    }
    /* 4. (the root in place takes its block aside) */
    char *aside = NULL;
    if (!mine && !(mine = aside = malloc(mybytes ? mybytes : 1)))
        PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
    if (c->team) {
        rc2 = numacoll_scatterv(c->team, part, sz, dsp, mine, mybytes, 0);
    } else {
        rc2 = mybytes == ntot ? 0 : NUMACOLL_ERR_TRUNCATE;
        nc_copy(mine, part, mybytes < ntot ? mybytes : ntot);
    }
    if (!rc)
        rc = rc2;
    nodes_fini(&nd);
    free(sz64), free(sz), free(dsp), free(nt), free(all), free(part), free(aside);
    return rc;
}

/* ---- several nodes: alltoall(v) ------------------------------------------------------------ */
/*
 * In the node-packed order of above (N nodes, L members on mine):
 *   1. each node gathers to its leader its members' send and receive sizes
 *      (2p each, in node-packed order of the peer), then their send blocks
 *      packed in node-packed order of the destination (the core's gather and
 *      gatherv);
 *   2. each leader builds for every node m one part: its error (0: none),
 *      the sizes of its members' blocks to m's members, then those blocks
 *      (sources in node order, each with its destinations in node order);
 *      the leaders exchange the parts in one PMPI_Alltoallv, each expecting
 *      from node m the header plus what its members expect from m's members;
 *   3. each leader lays out for each member a status word and the blocks it
 *      receives, in node-packed order of the source, and scatters them (the
 *      core's scatterv); a block whose size differs from what its receiver
 *      expects makes that receiver's status NUMACOLL_ERR_TRUNCATE; a part
 *      longer in all than expected (the exchange fails: the MPI library's
 *      MPI_ERR_TRUNCATE on the leaders), a part that cannot be followed or a
 *      sending leader's error make every member's status an error;
 *   4. every member takes its status and copies the blocks to their places.
 * One leader call per user call; the leader holds about four times its
 * node's bytes meanwhile.
 */
static int hier_alltoall(nc_mpi_comm_t *c, int coll, const side_t *S, side_t *R)
{
    const int p = c->size, me = c->rank, n = c->node_of[me], N = c->nnodes;
    const int leader = c->leaders != MPI_COMM_NULL;
    static const char none[1]; /* a send buffer of no bytes (NULL would mean in place) */
    nodes_t nd;
    if (nodes_init(&nd, c))
        PMPI_Abort(c->comm, MPI_ERR_NO_MEM); /* a local failure the others cannot see */
    const int L = nd.first[n + 1] - nd.first[n];
    const size_t row = 2 * (size_t)p; /* sizes per member: p sent, then p received */
    uint64_t *mysz = malloc(sizeof(uint64_t) * row);
    uint64_t *sz = leader ? calloc(row * (size_t)L, sizeof(uint64_t)) : NULL;
    size_t mytot = 0, myrecv = sizeof(uint64_t);
    if (!mysz || (leader && !sz))
        PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
    for (int i = 0; i < p; i++) {
        mysz[i] = S->cnt[nd.at[i]];
        mysz[p + i] = R->cnt[nd.at[i]];
        mytot += S->cnt[nd.at[i]];
        myrecv += R->cnt[nd.at[i]];
    }
    char *mine = malloc(mytot ? mytot : 1);
    if (!mine)
        PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
    for (size_t i = 0, at = 0; i < (size_t)p; i++) {
        const size_t k = S->cnt[nd.at[i]];
        if (k)
            nc_copy(mine + at, S->base + S->dsp[nd.at[i]], k);
        at += k;
    }
    /* 1. */
    int rc = 0, rc2;
    if (c->team)
        rc = numacoll_gather(c->team, mysz, sizeof(uint64_t) * row, sz, 0);
    else
        memcpy(sz, mysz, sizeof(uint64_t) * row);
    if (leader && rc && !nc_call_error(rc)) /* the team broke: no sizes */
        memset(sz, 0, sizeof(uint64_t) * row * (size_t)L);
    size_t *tot = NULL, *dsp = NULL, *out_n = NULL, *out_d = NULL;
    char *got = NULL;
    if (leader) {
        tot = calloc((size_t)L, sizeof(size_t));
        dsp = calloc((size_t)L, sizeof(size_t));
        out_n = calloc((size_t)L, sizeof(size_t));
        out_d = calloc((size_t)L, sizeof(size_t));
        if (!tot || !dsp || !out_n || !out_d)
            PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
        size_t all = 0, outall = 0;
        for (int l = 0; l < L; l++) {
            out_n[l] = sizeof(uint64_t);
            for (int i = 0; i < p; i++) {
                tot[l] += (size_t)sz[(size_t)l * row + (size_t)i];
                out_n[l] += (size_t)sz[(size_t)l * row + (size_t)p + (size_t)i];
            }
            dsp[l] = all;
            all += tot[l];
            out_d[l] = outall;
            outall += out_n[l];
        }
        if (!(got = malloc(all ? all : 1)))
            PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
    }
    if (c->team) {
        rc2 = numacoll_gatherv(c->team, mytot ? mine : none, mytot, got, tot, dsp, 0);
    } else {
        if (mytot)
            nc_copy(got, mine, mytot);
        rc2 = 0;
    }
    if (!rc)
        rc = rc2;
    /* 2., 3. (the leader) */
    char *out = NULL;
    if (leader) {
        /* A late error of one call (nc_call_error(): a broadcast before)
         * leaves the data good; any other error (the team broke) leaves none:
         * no sizes, no blocks, the error in every part. */
        const int lbad = rc && !nc_call_error(rc);
        if (lbad)
            memset(sz, 0, sizeof(uint64_t) * row * (size_t)L);
        const char *what = coll == NC_MPI_ALLTOALL ? "MPI_Alltoall" : "MPI_Alltoallv";
        int *scnt = malloc(sizeof(int) * (size_t)N * 4), *sdsp = scnt + N, *rcnt = sdsp + N,
            *rdsp = rcnt + N;
        size_t *soff = malloc(sizeof(size_t) * (size_t)L); /* member l's next block */
        int64_t *status = calloc((size_t)L, sizeof(int64_t));
        if (!scnt || !soff || !status)
            PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
        /* A part: the sender's error (0: none), the sizes of its blocks (its
         * members x the receiving node's members), the blocks. */
        size_t stot = 0, rtot = 0;
        for (int m = 0; m < N; m++) {
            const size_t Lm = (size_t)(nd.first[m + 1] - nd.first[m]);
            size_t sm = sizeof(uint64_t) * (1 + (size_t)L * Lm), rm = sm;
            for (int l = 0; l < L; l++)
                for (int i = nd.first[m]; i < nd.first[m + 1]; i++) {
                    sm += (size_t)sz[(size_t)l * row + (size_t)i];
                    rm += (size_t)sz[(size_t)l * row + (size_t)p + (size_t)i];
                }
            if (stot > INT_MAX || rtot > INT_MAX || sm > INT_MAX || rm > INT_MAX) {
                nc_log_error("%s across nodes: more than %d bytes between two nodes' leaders",
                             what, INT_MAX);
                PMPI_Abort(c->comm, MPI_ERR_COUNT);
            }
            scnt[m] = (int)sm, sdsp[m] = (int)stot, rcnt[m] = (int)rm, rdsp[m] = (int)rtot;
            stot += sm;
            rtot += rm;
        }
        if (stot > INT_MAX || rtot > INT_MAX) {
            nc_log_error("%s across nodes: more than %d bytes through one leader", what, INT_MAX);
            PMPI_Abort(c->comm, MPI_ERR_COUNT);
        }
        char *sb = malloc(stot ? stot : 1), *rb = calloc(1, rtot ? rtot : 1);
        if (!sb || !rb)
            PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
        for (int l = 0; l < L; l++)
            soff[l] = dsp[l];
        for (int m = 0; m < N; m++) {
            uint64_t *h = (uint64_t *)(void *)(sb + sdsp[m]);
            char *w = (char *)(h + 1 + (size_t)L * (size_t)(nd.first[m + 1] - nd.first[m]));
            h[0] = lbad ? (uint64_t)(int64_t)rc : 0;
            for (int l = 0; l < L; l++)
                for (int i = nd.first[m]; i < nd.first[m + 1]; i++) {
                    const size_t k = (size_t)sz[(size_t)l * row + (size_t)i];
                    *++h = k;
                    if (k)
                        nc_copy(w, got + soff[l], k);
                    w += k;
                    soff[l] += k;
                }
        }
        int64_t all_bad = 0; /* an error for every rank of the node */
        if (nc_leader_alltoallv(c, sb, scnt, sdsp, MPI_BYTE, rb, rcnt, rdsp, MPI_BYTE) !=
            MPI_SUCCESS) { /* the leaders' error handler returned: a longer part than expected */
            nc_log_error("%s across nodes: the leaders' exchange failed (block sizes differ "
                         "across nodes)", what);
            all_bad = NUMACOLL_ERR_TRUNCATE;
        }
        nc_mpi_count_leader(coll, 1);
        /* 3. every block checked against what its receiver expects */
        size_t outall = out_d[L - 1] + out_n[L - 1];
        if (!(out = calloc(1, outall)))
            PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
        for (int l = 0; l < L; l++)
            soff[l] = out_d[l] + sizeof(uint64_t);
        for (int m = 0; m < N && !all_bad; m++) {
            const int Lm = nd.first[m + 1] - nd.first[m];
            const uint64_t *h = (const uint64_t *)(const void *)(rb + rdsp[m]);
            const char *r = (const char *)(h + 1 + (size_t)Lm * (size_t)L);
            const char *end = rb + rdsp[m] + rcnt[m];
            if (h[0]) { /* that leader failed: its node's error, for every rank here */
                all_bad = (int64_t)h[0];
                break;
            }
            for (int s = 0; s < Lm; s++)
                for (int l = 0; l < L; l++) {
                    const size_t k = (size_t)*++h;
                    const size_t want =
                        (size_t)sz[(size_t)l * row + (size_t)p + (size_t)(nd.first[m] + s)];
                    if (k != want || k > (size_t)(end - r)) {
                        if (!status[l])
                            nc_log_error("%s across nodes: rank %d sends %zu bytes to rank %d, "
                                         "which expects %zu", what, nd.at[nd.first[m] + s], k,
                                         nd.at[nd.first[n] + l], want);
                        status[l] = NUMACOLL_ERR_TRUNCATE;
                        if (k > (size_t)(end - r)) { /* cannot follow the part any further */
                            all_bad = NUMACOLL_ERR_TRUNCATE;
                            s = Lm;
                            break;
                        }
                    } else if (k) {
                        nc_copy(out + soff[l], r, k);
                    }
                    r += k;
                    soff[l] += want;
                }
        }
        if (lbad)
            all_bad = rc;
        for (int l = 0; all_bad && l < L; l++)
            status[l] = all_bad;
        for (int l = 0; l < L; l++)
            memcpy(out + out_d[l], &status[l], sizeof status[l]);
        free(sb), free(rb), free(scnt), free(soff), free(status);
    }
    /* 3. the scatter, 4. */
    char *back = malloc(myrecv);
    if (!back)
        PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
    if (c->team) {
        rc2 = numacoll_scatterv(c->team, out, out_n, out_d, back, myrecv, 0);
    } else {
        nc_copy(back, out, myrecv);
        rc2 = 0;
    }
    if (!rc)
        rc = rc2;
    int64_t status = 0;
    if (!rc2)
        memcpy(&status, back, sizeof status);
    if (!rc && status)
        rc = (int)status;
    if (!rc) {
        size_t at = sizeof(uint64_t);
        for (int i = 0; i < p; i++) {
            const int r = nd.at[i];
            if (R->cnt[r])
                nc_copy(R->base + R->dsp[r], back + at, R->cnt[r]);
            at += R->cnt[r];
        }
    }
    nodes_fini(&nd);
    free(mysz), free(sz), free(mine), free(tot), free(dsp), free(out_n), free(out_d), free(got),
        free(out), free(back);
    return rc;
}

/* ---- 1.-4. ------------------------------------------------------------------------------ */

static size_t bytes_of(int count, MPI_Datatype dt)
{
    int size = 0;
    if (count > 0 && dt != MPI_DATATYPE_NULL && !(size = nc_dtype_basic_size(dt)))
        PMPI_Type_size(dt, &size);
    return (size_t)(count > 0 ? count : 0) * (size_t)size;
}

/* What this rank sends, for NUMACOLL_STATS: the bytes of its send buffer the
 * call reads, its own block included (gather at the root: its block; scatter
 * and alltoall: all p blocks), 0 for MPI_IN_PLACE and at a scatter's
 * non-root. */
static size_t sent_bytes(const xcall_t *x, int p, int me)
{
    const int scat = x->coll == NC_MPI_SCATTER || x->coll == NC_MPI_SCATTERV;
    const int a2a = x->coll == NC_MPI_ALLTOALL || x->coll == NC_MPI_ALLTOALLV;
    if (x->sbuf == MPI_IN_PLACE || (scat && me != x->root))
        return 0;
    if (!scat && !a2a)
        return bytes_of(x->scount, x->stype);
    if (!x->scounts)
        return (size_t)p * bytes_of(x->scount, x->stype);
    size_t n = 0;
    for (int k = 0; k < p; k++)
        n += bytes_of(x->scounts[k], x->stype);
    return n;
}

static int fail(MPI_Comm comm, int code)
{
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

static int xg_mpi(xcall_t *x)
{
    const int coll = x->coll;
    nc_mpi_comm_t *c = nc_mpi_comm_get(x->comm, coll);
    int p = 0, me = 0;
    if (c) {
        p = c->size;
        me = c->rank;
    } else {
        PMPI_Comm_size(x->comm, &p);
        PMPI_Comm_rank(x->comm, &me);
    }
    /* 1. */
    const int solo = !c && p == 1 && nc_mpi_solo(x->comm, coll);
    const int hier = c && c->nnodes > 1;
    if (!solo && !hier && (!c || c->nnodes > 1 || (!c->team && p > 1))) {
        nc_mpi_count(coll, 0, sent_bytes(x, p, me));
        return pmpi(x);
    }
    const int rooted = is_rooted(coll), root = x->root;
    if (rooted && (root < 0 || root >= p))
        return fail(x->comm, MPI_ERR_ROOT);
    const int is_root = !rooted || me == root;
    const int gath = coll == NC_MPI_GATHER || coll == NC_MPI_GATHERV;
    const int scat = coll == NC_MPI_SCATTER || coll == NC_MPI_SCATTERV;
    const int a2a = coll == NC_MPI_ALLTOALL || coll == NC_MPI_ALLTOALLV;
    const int v = is_v(coll);
    /* Which side carries MPI_IN_PLACE, on whom. */
    const int ip = scat ? (me == root && x->rbuf == MPI_IN_PLACE)
                        : (is_root && x->sbuf == MPI_IN_PLACE);
    if (!scat && x->sbuf == MPI_IN_PLACE && !is_root)
        return fail(x->comm, MPI_ERR_BUFFER); /* MPI_IN_PLACE only at the root */
    /* Arguments that count on this rank. */
    const int sends_p = (scat && me == root) || a2a; /* p send blocks */
    const int recvs_p = !scat && is_root;            /* p receive blocks */
    const int sends_1 = !sends_p && !scat && !ip; /* one send block */
    const int recvs_1 = scat && !ip;              /* one receive block */
    const int sends_used = sends_1 || (sends_p && !(a2a && ip)); /* scount, stype count */
    const int recvs_used = recvs_1 || recvs_p;                    /* rcount, rtype count */
    if ((sends_used && !(sends_p && v) && x->scount < 0) ||
        (recvs_used && !(recvs_p && v) && x->rcount < 0))
        return fail(x->comm, MPI_ERR_COUNT);
    if ((sends_1 && x->stype == MPI_DATATYPE_NULL) || (recvs_1 && x->rtype == MPI_DATATYPE_NULL))
        return fail(x->comm, MPI_ERR_TYPE);
    if ((sends_p && !(a2a && ip) && x->stype == MPI_DATATYPE_NULL) ||
        (recvs_p && x->rtype == MPI_DATATYPE_NULL))
        return fail(x->comm, MPI_ERR_TYPE);
    if (sends_p && v && !(a2a && ip) && (!x->scounts || !x->sdispls))
        return fail(x->comm, MPI_ERR_ARG);
    if (recvs_p && v && (!x->rcounts || !x->rdispls))
        return fail(x->comm, MPI_ERR_ARG);
    /* The uniform forms' bytes per block (every block of a side alike). */
    int rc = 0;
    const int sbasic = sends_used && !v ? nc_dtype_basic_size(x->stype) : 0;
    const int rbasic = recvs_used && !v ? nc_dtype_basic_size(x->rtype) : 0;
    const size_t sb1 = !sends_used || v ? 0
                       : sbasic         ? (size_t)(x->scount > 0 ? x->scount : 0) * (size_t)sbasic
                                        : bytes_of(x->scount, x->stype);
    const size_t rb1 = !recvs_used || v ? 0
                       : rbasic         ? (size_t)(x->rcount > 0 ? x->rcount : 0) * (size_t)rbasic
                                        : bytes_of(x->rcount, x->rtype);
    nc_mpi_count_nc(c, coll, v ? sent_bytes(x, p, me) : sends_p ? (size_t)p * sb1 : sb1);
    const unsigned long long cma = nc_mpi_cma_mark(c);
    /* Nothing to move: with one count and type for every block (the uniform
     * forms), zero bytes here are zero bytes on every rank of a correct
     * program; the MPI libraries return at once too. */
    if (!v && !sb1 && !rb1)
        return MPI_SUCCESS;
    /* The common case straight to the core's uniform forms: one node,
     * predefined types of bytes back to back (nc_dtype_basic_size) on every
     * side this rank uses, and its own block the same size on both sides (in
     * place, one side is used). An alltoall in place does not: the core would
     * copy the blocks aside before the call and, out of memory, return alone
     * while the others wait; step 2 stops the job then. Everything else (and
     * every error) takes steps 2-4. */
    if (!v && !hier && p > 1 && !(a2a && ip) &&
        (!sends_used || (x->sbuf && sbasic)) && (!recvs_used || (x->rbuf && rbasic)) &&
        (!sends_used || !recvs_used || sb1 == rb1)) {
        numacoll_team_t *t = c->team;
        const size_t n = sends_used ? sb1 : rb1;
        switch (coll) {
        case NC_MPI_GATHER:
            rc = numacoll_gather(t, ip ? NUMACOLL_IN_PLACE : x->sbuf, n, x->rbuf, root);
            break;
        case NC_MPI_SCATTER:
            rc = numacoll_scatter(t, x->sbuf, ip ? (void *)NUMACOLL_IN_PLACE : x->rbuf, n, root);
            break;
        case NC_MPI_ALLGATHER:
            rc = numacoll_allgather(t, ip ? NUMACOLL_IN_PLACE : x->sbuf, n, x->rbuf);
            break;
        default:
            rc = numacoll_alltoall(t, ip ? NUMACOLL_IN_PLACE : x->sbuf, x->rbuf, n);
            break;
        }
        nc_mpi_count_cma(c, coll, cma);
        return rc ? nc_mpi_error(x->comm, rc, mpi_name[coll]) : MPI_SUCCESS;
    }

    /* 2. */
    side_t S, R;
    /* what side_fini() and step 3 look at, for a side this rank does not use */
    S.cnt = S.cnt_s, S.dsp = S.dsp_s, S.base = S.scratch = NULL, S.shifted = MPI_DATATYPE_NULL;
    R.cnt = R.cnt_s, R.dsp = R.dsp_s, R.base = R.scratch = NULL, R.shifted = MPI_DATATYPE_NULL;
    const int *rcounts = v ? x->rcounts : NULL, *rdispls = v ? x->rdispls : NULL;
    const int *scounts = v ? x->scounts : NULL, *sdispls = v ? x->sdispls : NULL;
    if (recvs_p)
        rc = side_init(&R, x->comm, p, x->rbuf, x->rtype, x->rcount, x->rcount, rcounts, rdispls,
                       0, coll == NC_MPI_ALLGATHER || coll == NC_MPI_ALLGATHERV ? (ip ? me : -1)
                                                                                : -1);
    else if (recvs_1)
        rc = side_init(&R, x->comm, 1, x->rbuf, x->rtype, x->rcount, 0, NULL, NULL, 0, -1);
    if (!rc) {
        if (a2a && ip) /* the blocks to send are the receive buffer's, sent from a copy */
            rc = side_init(&S, x->comm, p, x->rbuf, x->rtype, x->rcount, x->rcount, rcounts,
                           rdispls, 1, -1);
        else if (sends_p)
            rc = side_init(&S, x->comm, p, x->sbuf, x->stype, x->scount, x->scount, scounts,
                           sdispls, 1, -1);
        else if (sends_1)
            rc = side_init(&S, x->comm, 1, x->sbuf, x->stype, x->scount, 0, NULL, NULL, 1, -1);
    }
    if (rc == NUMACOLL_ERR_NOMEM) {
        nc_log_error("%s: out of memory for the datatype's scratch space", mpi_name[coll]);
        PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
    }
    if (a2a && ip && !rc && !S.scratch) {
        /* dense: copy the blocks aside (the core would, too); a block may
         * lie below the buffer's start (negative displacement: dsp wrapped) */
        ptrdiff_t lo = PTRDIFF_MAX, hi = PTRDIFF_MIN;
        for (int k = 0; k < p; k++)
            if (S.cnt[k]) {
                const ptrdiff_t d = (ptrdiff_t)S.dsp[k];
                lo = d < lo ? d : lo;
                hi = d + (ptrdiff_t)S.cnt[k] > hi ? d + (ptrdiff_t)S.cnt[k] : hi;
            }
        if (lo > hi)
            lo = hi = 0; /* no block */
        if (!(S.scratch = malloc(hi > lo ? (size_t)(hi - lo) : 1)))
            PMPI_Abort(x->comm, MPI_ERR_NO_MEM);
        nc_copy(S.scratch, S.base + lo, (size_t)(hi - lo));
        for (int k = 0; k < p; k++)
            S.dsp[k] = S.cnt[k] ? S.dsp[k] - (size_t)lo : 0;
        S.base = S.scratch;
    }

    /* 3. */
    numacoll_team_t *t = c ? c->team : NULL;
    /* Not in place, a send buffer is never NULL for the core (NULL means in
     * place there): MPI_BOTTOM or NULL with zero counts become `none`. */
    static const char none[1];
    char *const sbase = S.base ? S.base : (char *)none;
    const void *sb = S.base ? S.base + S.dsp[0] : none;
    if (!rc && p == 1 && (!ip || a2a)) {
        /* one rank: the copy (MPICH 4.0's own Allgatherv misplaces it there) */
        char *to = R.base + R.dsp[0];
        const size_t n = S.cnt[0] < R.cnt[0] ? S.cnt[0] : R.cnt[0];
        if (n)
            memmove(to, S.base + S.dsp[0], n);
        rc = S.cnt[0] == R.cnt[0] ? 0 : NUMACOLL_ERR_TRUNCATE;
    } else if (!rc && hier && a2a) {
        rc = hier_alltoall(c, coll, &S, &R);
    } else if (!rc && hier && scat) {
        rc = hier_scatter(c, x, &S, ip ? NULL : R.base + R.dsp[0], ip ? S.cnt[me] : R.cnt[0]);
    } else if (!rc && hier) {
        rc = coll == NC_MPI_GATHER || coll == NC_MPI_GATHERV
                 ? hier_gather(c, x, ip ? R.base + R.dsp[me] : sb, ip ? R.cnt[me] : S.cnt[0], &R)
                 : hier_allgather(c, coll, ip ? R.base + R.dsp[me] : sb,
                                  ip ? R.cnt[me] : S.cnt[0], &R, ip);
    } else if (!rc && p > 1) {
        switch (coll) {
        case NC_MPI_GATHER:
        case NC_MPI_GATHERV:
            rc = numacoll_gatherv(t, ip ? NUMACOLL_IN_PLACE : sb, ip ? 0 : S.cnt[0],
                                  is_root ? R.base : NULL, is_root ? R.cnt : NULL,
                                  is_root ? R.dsp : NULL, root);
            break;
        case NC_MPI_SCATTER:
        case NC_MPI_SCATTERV:
            rc = numacoll_scatterv(t, me == root ? sbase : NULL, me == root ? S.cnt : NULL,
                                   me == root ? S.dsp : NULL,
                                   ip ? (void *)NUMACOLL_IN_PLACE : R.base + R.dsp[0],
                                   ip ? 0 : R.cnt[0], root);
            break;
        case NC_MPI_ALLGATHER:
        case NC_MPI_ALLGATHERV:
            rc = numacoll_allgatherv(t, ip ? NUMACOLL_IN_PLACE : sb, ip ? 0 : S.cnt[0], R.base,
                                     R.cnt, R.dsp);
            break;
        default:
            rc = numacoll_alltoallv(t, sbase, S.cnt, S.dsp, R.base, R.cnt, R.dsp);
            break;
        }
    }
    /* 4. (what fits, also after a size mismatch; across nodes only what
     * arrived whole: the hierarchical paths leave the blocks of a failed call
     * out) */
    if (!rc || (nc_call_error(rc) && !hier))
        side_unpack(&R, x->comm, gath && ip ? me : -1);
    side_fini(&S);
    side_fini(&R);
    nc_mpi_count_cma(c, coll, cma);
    return rc ? nc_mpi_error(x->comm, rc, mpi_name[coll]) : MPI_SUCCESS;
}

/* ---- entry points ------------------------------------------------------------------------ */

#define T(w) NC_MPI_HANDLE(MPI_Datatype, w)
#define C(w) NC_MPI_HANDLE(MPI_Comm, w)

int nc_mpi_gather(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                  int recvcount, nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_GATHER, sendbuf, sendcount, NULL, NULL, T(sendtype), recvbuf,
                 recvcount, NULL, NULL, T(recvtype), root, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_gatherv(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                   const int *recvcounts, const int *displs, nc_mpi_word_t recvtype, int root,
                   nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_GATHERV, sendbuf, sendcount, NULL, NULL, T(sendtype), recvbuf,
                 0, recvcounts, displs, T(recvtype), root, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_scatter(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                   int recvcount, nc_mpi_word_t recvtype, int root, nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_SCATTER, sendbuf, sendcount, NULL, NULL, T(sendtype), recvbuf,
                 recvcount, NULL, NULL, T(recvtype), root, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_scatterv(const void *sendbuf, const int *sendcounts, const int *displs,
                    nc_mpi_word_t sendtype, void *recvbuf, int recvcount, nc_mpi_word_t recvtype,
                    int root, nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_SCATTERV, sendbuf, 0, sendcounts, displs, T(sendtype), recvbuf,
                 recvcount, NULL, NULL, T(recvtype), root, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_allgather(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                     int recvcount, nc_mpi_word_t recvtype, nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_ALLGATHER, sendbuf, sendcount, NULL, NULL, T(sendtype), recvbuf,
                 recvcount, NULL, NULL, T(recvtype), -1, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_allgatherv(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                      const int *recvcounts, const int *displs, nc_mpi_word_t recvtype,
                      nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_ALLGATHERV, sendbuf, sendcount, NULL, NULL, T(sendtype), recvbuf,
                 0, recvcounts, displs, T(recvtype), -1, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_alltoall(const void *sendbuf, int sendcount, nc_mpi_word_t sendtype, void *recvbuf,
                    int recvcount, nc_mpi_word_t recvtype, nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_ALLTOALL, sendbuf, sendcount, NULL, NULL, T(sendtype), recvbuf,
                 recvcount, NULL, NULL, T(recvtype), -1, C(comm)};
    return xg_mpi(&x);
}

int nc_mpi_alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls,
                     nc_mpi_word_t sendtype, void *recvbuf, const int *recvcounts,
                     const int *rdispls, nc_mpi_word_t recvtype, nc_mpi_word_t comm)
{
    xcall_t x = {NC_MPI_ALLTOALLV, sendbuf, 0, sendcounts, sdispls, T(sendtype), recvbuf,
                 0, recvcounts, rdispls, T(recvtype), -1, C(comm)};
    return xg_mpi(&x);
}

/* What an MPI_Alltoallw sends, for NUMACOLL_STATS: counts[k] elements of
 * type(types, k) to each of the comm's (remote group's) ranks k; 0 in place. */
size_t nc_mpi_alltoallw_bytes(const void *sendbuf, const int *counts,
                              MPI_Datatype (*type)(const void *types, int k), const void *types,
                              MPI_Comm comm)
{
    int inter = 0, p = 0;
    if (sendbuf == MPI_IN_PLACE || !counts || !types || comm == MPI_COMM_NULL ||
        PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return 0;
    if ((inter ? PMPI_Comm_remote_size(comm, &p) : PMPI_Comm_size(comm, &p)) != MPI_SUCCESS)
        return 0;
    size_t n = 0;
    for (int k = 0; k < p; k++)
        n += bytes_of(counts[k], type(types, k));
    return n;
}

static MPI_Datatype c_type(const void *types, int k)
{
    return ((const MPI_Datatype *)types)[k];
}

/* Counted after the call: only a call that succeeded has datatypes whose size
 * may be asked (PMPI_Type_size of an invalid one reports on MPI_COMM_WORLD,
 * fatal by default, where the MPI library reports on comm). */
int nc_mpi_alltoallw(const void *sendbuf, const int *sendcounts, const int *sdispls,
                     const void *sendtypes, void *recvbuf, const int *recvcounts,
                     const int *rdispls, const void *recvtypes, nc_mpi_word_t comm)
{
    const int rc = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                                  rdispls, recvtypes, C(comm));
    nc_mpi_count(NC_MPI_ALLTOALLW, 0,
                 rc == MPI_SUCCESS
                     ? nc_mpi_alltoallw_bytes(sendbuf, sendcounts, c_type, sendtypes, C(comm))
                     : 0);
    return rc;
}
