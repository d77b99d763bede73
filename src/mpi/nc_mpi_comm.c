/*
 * Communicators: qualification, set-up, caching on an attribute, teardown,
 * statistics and MPI_Finalize (nc_mpi_finalize).
 *
 * Set-up (collective over the user's communicator, on its first qualifying
 * collective call, identical on every rank):
 *   1. node = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED); with the test
 *      setting NUMACOLL_TEST_VIRTUAL_NODES=v, node is split again into v blocks
 *      of consecutive local ranks (the same code path as a real cluster);
 *   2. leaders = local rank 0 of every node, split from comm;
 *   3. every rank learns node_of[] and lrank_of[] for the whole communicator
 *      (allgather), so a root on any node is found in O(1);
 *   (2 and 3 are skipped when one node holds the whole communicator: no
 *   leaders, every rank on node 0 with its own rank there; under an
 *   oversubscribed MPICH each collective of the set-up costs milliseconds);
 *   4. the node's team, with PMPI_Allgather over node as bootstrap: a freed
 *      communicator's team when its members all offer it (core/nc_team_cache.c),
 *      else a new one;
 *   5. one allreduce over comm: if any rank failed, every rank hands this
 *      communicator to PMPI for good; the leaders' way of waiting
 *      (NUMACOLL_LEADER_WAIT, nc_mpi_leader.c) is agreed in the same call.
 * When the whole world is on one node and comm is of it, comm is the node:
 * steps 1-3 and 5 cost no collective (step 4's exchanges agree on failures),
 * so a communicator whose team is taken from the team cache costs one
 * allgather.
 * The state is an attribute of comm: MPI_Comm_free (and MPI_Finalize, which
 * deletes whatever is left) runs the delete callback that parks the team in
 * the team cache and frees the two sub-communicators and the arrays;
 * MPI_Finalize then empties the cache.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/nc_common.h"
#include "core/nc_team.h"
#include "nc_mpi.h"
#include "shm/nc_shm.h"
#include "sync/nc_wait.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int keyval = MPI_KEYVAL_INVALID;
static nc_mpi_comm_t *live; /* every state still attached to a communicator */

static _Atomic unsigned long long stat_calls[2][NC_MPI_NCOLL], stat_bytes[2][NC_MPI_NCOLL];
static _Atomic unsigned long long stat_leader[2][NC_MPI_NCOLL]; /* calls, PMPI calls */
static _Atomic unsigned long long stat_cma[NC_MPI_NCOLL]; /* CMA calls of freed states */
static _Atomic unsigned long long stat_teams[2]; /* made, taken from the team cache */
static _Atomic int node_job_ranks; /* the job's ranks on this node (MPI_Init; 0: unknown) */

/* The last communicator each thread used, in front of the attribute lookup
 * (a hash lookup in the MPI library) on every call. Any state's deletion bumps
 * the generation, so a freed (and maybe reused) handle never hits. */
static _Atomic unsigned cache_gen = 1;
static _Thread_local struct {
    MPI_Comm comm;
    nc_mpi_comm_t *c;
    unsigned gen;
} tcache;

void nc_mpi_count(int coll, int numacoll, size_t bytes)
{
    atomic_fetch_add_explicit(&stat_calls[numacoll][coll], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_bytes[numacoll][coll], bytes, memory_order_relaxed);
}

void nc_mpi_count_nc(nc_mpi_comm_t *c, int coll, size_t bytes)
{
    if (!c) {
        nc_mpi_count(coll, 1, bytes);
        return;
    }
    /* relaxed, load and store: this thread is the only writer (see nc_mpi.h);
     * numacoll_mpi_stats() reads them under the lock */
    atomic_store_explicit(&c->ncalls[coll],
                          atomic_load_explicit(&c->ncalls[coll], memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&c->nbytes[coll],
                          atomic_load_explicit(&c->nbytes[coll], memory_order_relaxed) + bytes,
                          memory_order_relaxed);
}

unsigned long long nc_mpi_cma_mark(const nc_mpi_comm_t *c)
{
    const numacoll_team_t *t = c ? c->team : NULL; /* c NULL: a communicator of one rank */
    /* the core's counts of this member's broadcasts, reductions and
     * gather-family blocks by CMA (only this thread moves them) */
    return t ? t->cma_calls + t->reduce_cma + t->gather_cma : 0;
}

void nc_mpi_count_cma(nc_mpi_comm_t *c, int coll, unsigned long long mark)
{
    if (!c || nc_mpi_cma_mark(c) == mark)
        return;
    /* relaxed, load and store: one writer, as for ncalls */
    atomic_store_explicit(&c->ncma[coll],
                          atomic_load_explicit(&c->ncma[coll], memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

void nc_mpi_count_leader(int coll, unsigned pmpi_calls)
{
    atomic_fetch_add_explicit(&stat_leader[0][coll], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_leader[1][coll], pmpi_calls, memory_order_relaxed);
}

static void state_free(nc_mpi_comm_t *c)
{
    nc_team_cache_put(c->team); /* for the next communicator of these processes */
    if (c->node != MPI_COMM_NULL)
        PMPI_Comm_free(&c->node);
    if (c->leaders != MPI_COMM_NULL)
        PMPI_Comm_free(&c->leaders);
    free(c->node_of);
    free(c->lrank_of);
    free(c);
}

static int delete_fn(MPI_Comm comm, int kv, void *attr, void *extra)
{
    (void)comm;
    (void)kv;
    (void)extra;
    nc_mpi_comm_t *c = attr;
    /* relaxed: only invalidates caches; a comm is not used while it is freed. */
    atomic_fetch_add_explicit(&cache_gen, 1, memory_order_relaxed);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < NC_MPI_NCOLL; i++) { /* its counts into the totals */
        atomic_fetch_add_explicit(&stat_calls[1][i],
                                  atomic_load_explicit(&c->ncalls[i], memory_order_relaxed),
                                  memory_order_relaxed);
        atomic_fetch_add_explicit(&stat_bytes[1][i],
                                  atomic_load_explicit(&c->nbytes[i], memory_order_relaxed),
                                  memory_order_relaxed);
        atomic_fetch_add_explicit(&stat_cma[i],
                                  atomic_load_explicit(&c->ncma[i], memory_order_relaxed),
                                  memory_order_relaxed);
    }
    if (c->prev)
        c->prev->next = c->next;
    else if (live == c)
        live = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&lock);
    state_free(c);
    return MPI_SUCCESS;
}

static int node_allgather(void *ctx, const void *mine, void *all, size_t len)
{
    MPI_Comm node = *(MPI_Comm *)ctx;
    int rc = PMPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, node);
    return rc == MPI_SUCCESS ? 0 : NUMACOLL_ERR_BOOTSTRAP;
}

static void setup_team(nc_mpi_comm_t *c, const nc_config_t *cfg, int lrank, int lsize,
                       int rsize, int have_all, int failed);

/* Set at MPI_Init when every rank of MPI_COMM_WORLD is on this node. */
static atomic_int world_one_node;
static MPI_Group world_group = MPI_GROUP_NULL;

/* Every rank of comm is on this node: the world is on one node and comm's
 * ranks are all of it (not of another world joined by MPI_Comm_connect or
 * MPI_Comm_spawn). The same answer on every rank of comm: worlds are equal or
 * disjoint, so if one rank sees a stranger, every rank does. */
static int of_one_node(MPI_Comm comm)
{
    /* relaxed: set at MPI_Init, before any collective of this process */
    if (!atomic_load_explicit(&world_one_node, memory_order_relaxed))
        return 0;
    MPI_Group g;
    int n = 0, ok;
    int *in = NULL;
    /* A failure here is this rank's alone and would split it from the others
     * (the node split is collective): stop loudly instead. */
    if (PMPI_Comm_group(comm, &g) != MPI_SUCCESS || PMPI_Group_size(g, &n) != MPI_SUCCESS ||
        !(in = malloc(2 * sizeof(int) * (size_t)n))) {
        nc_log_error("setting up a communicator: no group or no memory");
        PMPI_Abort(comm, 1);
    }
    for (int i = 0; i < n; i++)
        in[i] = i;
    if (PMPI_Group_translate_ranks(g, n, in, world_group, in + n) != MPI_SUCCESS) {
        nc_log_error("setting up a communicator: MPI_Group_translate_ranks failed");
        PMPI_Abort(comm, 1);
    }
    ok = 1;
    for (int i = 0; i < n && ok; i++)
        ok = in[n + i] != MPI_UNDEFINED;
    free(in);
    PMPI_Group_free(&g);
    return ok;
}

static void stats_exit_hook(void);
static pthread_once_t stats_once = PTHREAD_ONCE_INIT;

static void setup(nc_mpi_comm_t *c, const nc_config_t *cfg, int cfg_rc)
{
    if (NC_CFG_NUM(cfg, STATS))
        pthread_once(&stats_once, stats_exit_hook); /* programs of MPI sessions alone */
    MPI_Comm comm = c->comm, node0;
    int lrank, lsize, failed = cfg_rc != 0;
    int rsize = 0; /* the communicator's ranks on the real node (virtual nodes: several) */

    /* 1. the node, maybe cut into virtual nodes; none to make when the whole
     * world is on one node and comm is of the world: comm is the node */
    int v = (int)NC_CFG_NUM(cfg, TEST_VIRTUAL_NODES);
    if (v <= 1 && of_one_node(comm)) {
        node0 = MPI_COMM_NULL;
        lrank = c->rank;
        lsize = c->size;
    } else
        PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node0);
    if (node0 == MPI_COMM_NULL) {
        c->node = MPI_COMM_NULL; /* the bootstrap uses comm (setup_team) */
    } else if (v > 1) {
        PMPI_Comm_rank(node0, &lrank);
        PMPI_Comm_size(node0, &lsize);
        rsize = lsize;
        PMPI_Comm_split(node0, (int)((long)lrank * v / lsize), lrank, &c->node);
        PMPI_Comm_free(&node0);
    } else {
        c->node = node0;
    }
    if (c->node != MPI_COMM_NULL) {
        PMPI_Comm_rank(c->node, &lrank);
        PMPI_Comm_size(c->node, &lsize);
    }

    /* One node holds the whole communicator (the same answer on every rank:
     * the node communicators partition comm): no leaders, node_of[] is 0 and
     * lrank_of[] the rank (split by rank above), so steps 2 and 3 and their
     * four collectives are skipped. */
    if (lsize == c->size) {
        c->nnodes = 1;
        c->node_of = calloc((size_t)c->size, sizeof(int));
        c->lrank_of = malloc(sizeof(int) * (size_t)c->size);
        if (c->node_of && c->lrank_of)
            for (int r = 0; r < c->size; r++)
                c->lrank_of[r] = r;
        else
            failed = 1; /* told to all in step 5; step 4 still meets the others */
        setup_team(c, cfg, lrank, lsize, rsize, 1, failed);
        return;
    }

    /* 2. leaders */
    PMPI_Comm_split(comm, lrank == 0 ? 0 : MPI_UNDEFINED, c->rank, &c->leaders);
    int mine[2] = {0, lrank};
    int nodeinfo[2] = {0, 0}; /* my node's index, number of nodes */
    if (lrank == 0) {
        PMPI_Comm_rank(c->leaders, &nodeinfo[0]);
        PMPI_Comm_size(c->leaders, &nodeinfo[1]);
    }
    PMPI_Bcast(nodeinfo, 2, MPI_INT, 0, c->node);
    mine[0] = nodeinfo[0];
    c->nnodes = nodeinfo[1];

    /* 3. where every rank is */
    int *pairs = malloc(2 * sizeof(int) * (size_t)c->size);
    c->node_of = malloc(sizeof(int) * (size_t)c->size);
    c->lrank_of = malloc(sizeof(int) * (size_t)c->size);
    int have = pairs && c->node_of && c->lrank_of;
    int have_all;
    PMPI_Allreduce(&have, &have_all, 1, MPI_INT, MPI_MIN, comm);
    if (have_all) {
        PMPI_Allgather(mine, 2, MPI_INT, pairs, 2, MPI_INT, comm);
        for (int r = 0; r < c->size; r++) {
            c->node_of[r] = pairs[2 * r];
            c->lrank_of[r] = pairs[2 * r + 1];
        }
    } else {
        failed = 1;
    }
    free(pairs);
    setup_team(c, cfg, lrank, lsize, rsize, have_all, failed);
}

/* Steps 4 and 5 of setup(). */
static void setup_team(nc_mpi_comm_t *c, const nc_config_t *cfg, int lrank, int lsize,
                       int rsize, int have_all, int failed)
{
    MPI_Comm comm = c->comm;

    /* 4. the node's team (the node exchange keeps every member in step even
     * when this member's configuration is bad: it reports, everyone fails) */
    if (lsize > 1 && have_all) {
        numacoll_bootstrap_t bs = {lrank, lsize, node_allgather,
                                   c->node != MPI_COMM_NULL ? &c->node : &c->comm};
        int rc = nc_team_cache_take(&bs, &c->team);
        if (rc == 0)
            rc = numacoll_team_create(&bs, &c->team);
        if (rc < 0) {
            failed = 1;
            c->team = NULL;
        }
        /* relaxed: statistics */
        atomic_fetch_add_explicit(&stat_teams[rc == 1], rc >= 0, memory_order_relaxed);
        if (rc == NUMACOLL_ERR_NOMEM) {
            /* out of memory on this rank alone, maybe instead of an exchange
             * the others are in: stop loudly rather than leave them waiting */
            nc_log_error("out of memory setting up a communicator");
            PMPI_Abort(comm, 1);
        }
    }

    /* 5. everyone agrees; not needed when comm is the node (c->node is
     * MPI_COMM_NULL): then the team's exchanges were over all of comm, and
     * every failure but memory (above) is agreed there. The lone failure
     * that is not, the arrays of setup() on one rank, stops the job. */
    /* The leaders' wait: poll if asked, or with auto if this node is
     * oversubscribed: the job has more ranks on it than it has CPUs (known
     * from MPI_Init, nc_mpi_budget_init), or the team's members have more
     * (a team's CPUs are the union of its members' masks). */
    const int64_t lw = NC_CFG_NUM(cfg, LEADER_WAIT);
    const int auto_lw = lw == NC_LEADER_WAIT_AUTO;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int job_ranks = atomic_load_explicit(&node_job_ranks, memory_order_relaxed);
    int flags[3] = {failed, 0, lw == NC_LEADER_WAIT_POLL || (auto_lw && online > 0 &&
                                                             job_ranks > online)}, all[3];
    if (c->team) {
        numacoll_team_info_t in;
        numacoll_team_info(c->team, &in);
        flags[1] = in.placement;
        /* virtual nodes share the real node's CPUs: count all of its ranks */
        flags[2] |= auto_lw && (in.oversubscribed || rsize > in.ncpus);
    }
    if (c->node != MPI_COMM_NULL) {
        PMPI_Allreduce(flags, all, 3, MPI_INT, MPI_MAX, comm);
        c->leader_poll = all[2]; /* the same on every rank: nc_mpi_leader.c */
    } else {
        if (failed && c->team) {
            nc_log_error("out of memory setting up a communicator");
            PMPI_Abort(comm, 1);
        }
        all[0] = failed;
        all[1] = flags[1];
    }
    if (all[0]) {
        c->state = NC_COMM_PMPI;
        numacoll_team_destroy(c->team);
        c->team = NULL;
        if (c->rank == 0)
            nc_log_info(1, "comm size=%d: set-up failed on some rank; using the MPI library",
                        c->size);
        return;
    }
    for (int i = 0; i < NC_MPI_NCOLL; i++)
        c->enabled[i] = 1;
#define NC_MPI_ENABLE_(e, name, param) c->enabled[NC_MPI_##e] = (int)cfg->v[param].num;
    NC_MPI_COLL_TABLE(NC_MPI_ENABLE_)
#undef NC_MPI_ENABLE_
    c->state = NC_COMM_ACTIVE;
    if (c->rank == 0) {
        /* The queue the budget gave this node's team (may be shorter than
         * configured) and the bytes it holds in /dev/shm. */
        static const char *pl[] = {"OK", "MISPLACED", "UNKNOWN", "UNCHECKED"};
        numacoll_team_info_t in = {0};
        if (c->team)
            numacoll_team_info(c->team, &in);
        nc_log_info(1, "comm size=%d nodes=%d%s local=%d tree=%s f=%s s=%zu%s q=%s layout=%s "
                       "shm=%zu bytes placement=%s",
                    c->size, c->nnodes,
                    c->nnodes == 1 ? "" : c->leader_poll ? " leaders=poll" : " leaders=block",
                    lsize, cfg->v[NC_P_BCAST_TREE].text,
                    cfg->v[NC_P_BCAST_FRAG_SIZE].text,
                    c->team ? in.queue_len : (size_t)NC_CFG_NUM(cfg, BCAST_QUEUE_LEN),
                    c->team && (int64_t)in.queue_len != NC_CFG_NUM(cfg, BCAST_QUEUE_LEN)
                        ? " (budget)"
                        : "",
                    cfg->v[NC_P_BCAST_SETS].text, cfg->v[NC_P_SEG_LAYOUT].text, in.seg_bytes,
                    pl[all[1] >= 0 && all[1] <= 3 ? all[1] : 3]);
    }
}

void nc_mpi_budget_init(void)
{
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    if (NC_CFG_NUM(&cfg, DISABLE))
        return;
    MPI_Comm node;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return;
    int lrank, lsize, wsize;
    PMPI_Comm_rank(node, &lrank);
    PMPI_Comm_size(node, &lsize);
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    atomic_store_explicit(&node_job_ranks, lsize, memory_order_relaxed); /* relaxed: a count */
    if (lsize == wsize && PMPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS)
        atomic_store_explicit(&world_one_node, 1, memory_order_relaxed);
    numacoll_bootstrap_t bs = {lrank, lsize, node_allgather, &node};
    int rc = nc_budget_join(&bs);
    if (rc && lrank == 0)
        nc_log_info(1, "node budget page: %s; each process counts its own segments",
                    numacoll_strerror(rc));
    else if (lrank == 0)
        nc_log_info(1, "started: node budget page shared by %d ranks", lsize);
    PMPI_Comm_free(&node);
}

/* The waits' progress hook (sync/nc_wait.h): a rank waiting in a numacoll
 * collective polls the MPI library now and then, so that what others need
 * from it meanwhile still moves: MPICH completes a passive-target RMA epoch
 * on this rank's window (MPI_Win_unlock, MPI_Win_flush) only while this rank
 * polls, and the rank holding the epoch may be the one this wait waits for
 * (lock, put, unlock, then a barrier: a deadlock without it). */
static void poll_world(void)
{
    int flag;
    /* MPI_COMM_WORLD: MPICH answers a probe on MPI_COMM_SELF without
     * polling its network module, where the RMA traffic is */
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

/* Set between the first collective after MPI_Init and MPI_Finalize: the
 * world exists to be polled (not in a program of MPI sessions alone). */
static atomic_int world_polled;

void nc_mpi_progress(void)
{
    /* relaxed: a flag of this process, set before its first collective */
    if (atomic_load_explicit(&world_polled, memory_order_relaxed))
        poll_world();
}

static void create_keyval(void)
{
    int init = 0;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &keyval, NULL);
    PMPI_Initialized(&init);
    if (init) {
        atomic_store_explicit(&world_polled, 1, memory_order_relaxed);
        nc_wait_set_progress(poll_world);
    }
}

nc_mpi_comm_t *nc_mpi_comm_get(MPI_Comm comm, int coll)
{
    nc_mpi_comm_t *c = NULL;
    int flag = 0;
    unsigned gen = atomic_load_explicit(&cache_gen, memory_order_relaxed);
    if (tcache.c && tcache.comm == comm && tcache.gen == gen) {
        c = tcache.c;
        goto have;
    }
    if (keyval != MPI_KEYVAL_INVALID) {
        PMPI_Comm_get_attr(comm, keyval, &c, &flag);
        if (flag)
            goto cache;
    }
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    if (NC_CFG_NUM(&cfg, DISABLE))
        return NULL;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, create_keyval);
    if (keyval == MPI_KEYVAL_INVALID)
        return NULL;
    c = calloc(1, sizeof *c);
    if (!c) {
        /* A local failure the other ranks cannot see: going to PMPI here while
         * they set up would deadlock, so stop loudly instead. */
        nc_log_error("out of memory for a communicator's state");
        PMPI_Abort(comm, 1);
    }
    c->comm = comm;
    c->node = c->leaders = MPI_COMM_NULL;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) {
        PMPI_Comm_rank(comm, &c->rank);
        PMPI_Comm_size(comm, &c->size);
    }
    c->state = inter || c->size < 2 ? NC_COMM_PMPI : NC_COMM_PENDING;
    PMPI_Comm_set_attr(comm, keyval, c);
    pthread_mutex_lock(&lock);
    c->next = live;
    if (live)
        live->prev = c;
    live = c;
    pthread_mutex_unlock(&lock);
cache:
    tcache.comm = comm;
    tcache.c = c;
    tcache.gen = gen;
have:
    if (c->state == NC_COMM_PENDING) {
        nc_config_t now;
        int rc = nc_config_snapshot(&now);
        if (NC_CFG_NUM(&now, DISABLE))
            return NULL;
        if (c->calls++ < (unsigned)NC_CFG_NUM(&now, COMM_MIN_CALLS))
            return NULL;
        setup(c, &now, rc);
    }
    return c->state == NC_COMM_ACTIVE && c->enabled[coll] ? c : NULL;
}

int nc_mpi_solo(MPI_Comm comm, int coll)
{
    static const int enable[NC_MPI_NCOLL] = {
#define NC_MPI_SOLO_(e, name, param) [NC_MPI_##e] = param,
        NC_MPI_COLL_TABLE(NC_MPI_SOLO_)
#undef NC_MPI_SOLO_
    };
    int inter = 0, size = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        PMPI_Comm_size(comm, &size) != MPI_SUCCESS || size != 1)
        return 0;
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    return !NC_CFG_NUM(&cfg, DISABLE) && cfg.v[enable[coll]].num;
}

int nc_mpi_error(MPI_Comm comm, int nc_err, const char *what)
{
    int code = nc_err == NUMACOLL_ERR_TRUNCATE ? MPI_ERR_TRUNCATE
               : nc_err == NUMACOLL_ERR_INVAL  ? MPI_ERR_ARG
               : nc_err == NUMACOLL_ERR_MISMATCH ? MPI_ERR_ARG
               : nc_err == NUMACOLL_ERR_ROOT   ? MPI_ERR_ROOT
               : nc_err == NUMACOLL_ERR_FAULT  ? MPI_ERR_BUFFER
                                               : MPI_ERR_OTHER;
    /* A root error in a call without a root is a broadcast's that this rank
     * deferred (it passed 0 bytes) and resolved now: say so, the core's line
     * before names that broadcast. */
    static const char *const rooted[] = {"MPI_Bcast",  "MPI_Reduce",  "MPI_Gather",
                                         "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv"};
    int has_root = 0;
    for (size_t i = 0; i < NC_ARRAY_SIZE(rooted); i++)
        has_root |= !strcmp(what, rooted[i]);
    if (nc_err == NUMACOLL_ERR_ROOT && !has_root)
        nc_log_error("%s: an earlier MPI_Bcast on this communicator, to which this rank passed "
                     "count 0, had a root other than the one this rank passed, or none (the "
                     "line before names it); this call reports it",
                     what);
    else if (nc_err == NUMACOLL_ERR_ROOT)
        nc_log_error("%s: %s (this call, or an earlier MPI_Bcast to which this rank passed count "
                     "0: the line before names it)",
                     what, numacoll_strerror(nc_err));
    else if (nc_err != NUMACOLL_ERR_TRUNCATE)
        nc_log_error("%s: %s", what, numacoll_strerror(nc_err));
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* ---- queries -------------------------------------------------------------------- */

NUMACOLL_API int numacoll_mpi_comm_active(MPI_Comm comm)
{
    nc_mpi_comm_t *c = NULL;
    int flag = 0;
    if (keyval == MPI_KEYVAL_INVALID)
        return 0;
    PMPI_Comm_get_attr(comm, keyval, &c, &flag);
    return flag && c->state == NC_COMM_ACTIVE;
}

NUMACOLL_API numacoll_team_t *numacoll_mpi_comm_team(MPI_Comm comm)
{
    nc_mpi_comm_t *c = NULL;
    int flag = 0;
    if (keyval == MPI_KEYVAL_INVALID)
        return NULL;
    PMPI_Comm_get_attr(comm, keyval, &c, &flag);
    return flag && c->state == NC_COMM_ACTIVE ? c->team : NULL;
}

NUMACOLL_API int numacoll_mpi_stats(numacoll_mpi_stats_t *s)
{
    if (!s)
        return NUMACOLL_ERR_INVAL;
    pthread_mutex_lock(&lock); /* the live states, and the totals of the freed ones */
    for (int i = 0; i < NC_MPI_NCOLL; i++) {
        s->calls_numacoll[i] = atomic_load_explicit(&stat_calls[1][i], memory_order_relaxed);
        s->bytes_numacoll[i] = atomic_load_explicit(&stat_bytes[1][i], memory_order_relaxed);
        s->calls_cma[i] = atomic_load_explicit(&stat_cma[i], memory_order_relaxed);
        for (const nc_mpi_comm_t *c = live; c; c = c->next) {
            s->calls_numacoll[i] += atomic_load_explicit(&c->ncalls[i], memory_order_relaxed);
            s->bytes_numacoll[i] += atomic_load_explicit(&c->nbytes[i], memory_order_relaxed);
            s->calls_cma[i] += atomic_load_explicit(&c->ncma[i], memory_order_relaxed);
        }
        s->calls_pmpi[i] = atomic_load_explicit(&stat_calls[0][i], memory_order_relaxed);
        s->bytes_pmpi[i] = atomic_load_explicit(&stat_bytes[0][i], memory_order_relaxed);
        s->calls_leader[i] = atomic_load_explicit(&stat_leader[0][i], memory_order_relaxed);
        s->pmpi_leader[i] = atomic_load_explicit(&stat_leader[1][i], memory_order_relaxed);
    }
    pthread_mutex_unlock(&lock);
    s->teams_made = atomic_load_explicit(&stat_teams[0], memory_order_relaxed);
    s->teams_reused = atomic_load_explicit(&stat_teams[1], memory_order_relaxed);
    return 0;
}

/* ---- MPI_Finalize ------------------------------------------------------------------ */

/* The stats line's collectives (those called) and team counts after its
 * first n characters. */
/* Bytes of a stats line: every collective with its leaders' and CMA parts
 * at 20-digit counts, and the teams' tail. */
enum { STATS_LINE = 8192 };

static void stats_entries(char *line, size_t size, int n, const numacoll_mpi_stats_t *sum)
{
    static const char *names[] = {
#define NC_MPI_NAME_(e, name, param) [NC_MPI_##e] = name,
        NC_MPI_COLL_TABLE(NC_MPI_NAME_)
#undef NC_MPI_NAME_
#define NC_MPI_PMPI_NAME_(e, name) [NC_MPI_##e] = name,
        NC_MPI_PMPI_TABLE(NC_MPI_PMPI_NAME_)
#undef NC_MPI_PMPI_NAME_
    };
    /* only the collectives called; the leaders' part only where there were
     * leaders' calls (a job on several nodes), the CMA part only where calls
     * moved data by CMA */
    int shown = 0;
    for (int i = 0; i < NC_MPI_NCOLL && n > 0 && (size_t)n < size; i++) {
        if (!(sum->calls_numacoll[i] | sum->calls_pmpi[i] | sum->calls_leader[i] |
              sum->pmpi_leader[i]))
            continue;
        shown++;
        n += snprintf(line + n, size - (size_t)n,
                      " %s numacoll %llu calls %llu bytes, pmpi %llu calls %llu bytes", names[i],
                      sum->calls_numacoll[i], sum->bytes_numacoll[i], sum->calls_pmpi[i],
                      sum->bytes_pmpi[i]);
        if (n > 0 && (size_t)n < size && (sum->calls_leader[i] | sum->pmpi_leader[i]))
            n += snprintf(line + n, size - (size_t)n, ", leaders %llu calls %llu pmpi",
                          sum->calls_leader[i], sum->pmpi_leader[i]);
        if (n > 0 && (size_t)n < size && sum->calls_cma[i])
            n += snprintf(line + n, size - (size_t)n, ", cma %llu calls", sum->calls_cma[i]);
        if (n > 0 && (size_t)n < size)
            n += snprintf(line + n, size - (size_t)n, ";");
    }
    if (n > 0 && (size_t)n < size)
        snprintf(line + n, size - (size_t)n,
                 "%s teams (counted by each member) made %llu, reused %llu;",
                 shown ? "" : " no collective called;", sum->teams_made, sum->teams_reused);
}

static void print_stats(void)
{
    MPI_Comm node;
    int lrank, lsize;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &lrank);
    PMPI_Comm_size(node, &lsize);
    numacoll_mpi_stats_t s, sum;
    numacoll_mpi_stats(&s);
    PMPI_Reduce(&s, &sum, (int)(sizeof s / sizeof(unsigned long long)), MPI_UNSIGNED_LONG_LONG,
                MPI_SUM, 0, node);
    if (lrank == 0) {
        char host[64] = "?", line[STATS_LINE];
        gethostname(host, sizeof host);
        int n = snprintf(line, sizeof line, "numacoll stats: node %s (%d ranks):", host, lsize);
        stats_entries(line, sizeof line, n, &sum);
        fprintf(stderr, "%s\n", line);
    }
    PMPI_Comm_free(&node);
}

/* A program of MPI sessions alone (no MPI_Init, so no MPI_Finalize and no
 * world to sum over) gets its stats from each process at exit. */
static void stats_at_exit(void)
{
    int init = 1;
    if (PMPI_Initialized(&init) != MPI_SUCCESS || init)
        return; /* MPI_Init's program: MPI_Finalize says it, or it never got there */
    numacoll_mpi_stats_t s;
    numacoll_mpi_stats(&s);
    char line[STATS_LINE];
    int n = snprintf(line, sizeof line,
                     "numacoll stats: process %d (MPI sessions, no MPI_Init: its own calls):",
                     (int)getpid());
    stats_entries(line, sizeof line, n, &s);
    fprintf(stderr, "%s\n", line);
}

static void stats_exit_hook(void)
{
    atexit(stats_at_exit);
}

int nc_mpi_finalize(void)
{
    /* no MPI calls from the waits once the MPI library is finishing */
    nc_wait_set_progress(NULL);
    atomic_store_explicit(&world_polled, 0, memory_order_relaxed);
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    if (NC_CFG_NUM(&cfg, STATS))
        print_stats();
    /* Delete our attribute from every communicator still alive: the delete
     * callback frees segments' mappings, sub-communicators and memory. */
    for (;;) {
        pthread_mutex_lock(&lock);
        nc_mpi_comm_t *c = live;
        pthread_mutex_unlock(&lock);
        if (!c)
            break;
        PMPI_Comm_delete_attr(c->comm, keyval); /* unlinks c from the list */
    }
    nc_team_cache_clear();
    atomic_store_explicit(&world_one_node, 0, memory_order_relaxed);
    if (world_group != MPI_GROUP_NULL)
        PMPI_Group_free(&world_group);
    if (keyval != MPI_KEYVAL_INVALID)
        PMPI_Comm_free_keyval(&keyval);
    nc_budget_leave();
    return PMPI_Finalize();
}
