/*
 * MPI layer: communicator life cycle (1000 create/free with no growth of
 * /dev/shm entries, mappings or fds; freed communicators' teams taken again by
 * later ones, with every collective checked on them; two worlds merged after
 * MPI_Comm_spawn), MPI_Barrier correctness through shared
 * memory (nobody leaves barrier k before everyone entered it), and
 * MPI_THREAD_MULTIPLE with collectives on different communicators from
 * different threads, and RMA epochs (passive and active target) ended
 * around numacoll's collectives; a tunable that decides which collective
 * calls a rank makes (NUMACOLL_DISABLE, NUMACOLL_*_ENABLE,
 * NUMACOLL_COMM_MIN_CALLS, NUMACOLL_STATS) set on world rank 0 only: agreed
 * at MPI_Init, no hang, the same path on every rank.
 *
 * Usage: test_mpi_misc commloop [N]|teamcache|budget|spawn|barrier [N]|rma|threads|
 *        agree NAME VALUE
 */
#include <dirent.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numacoll.h"
#include "numacoll_mpi.h"

static int wrank, wsize, failures;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "[rank %d] FAIL %s:%d: ", wrank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

static int count_dir(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += !prefix || !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

static int count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

static int team_cache_on(void)
{
    const char *e = getenv("NUMACOLL_TEAM_CACHE");
    return !e || atoi(e) > 0;
}

static void commloop(int ncomms)
{
    char buf[256];
    /* One round of each kind first so every lazily created MPI resource
     * exists, and the team cache holds the teams of both member orders
     * (the world's own team made first: it would take one of them). */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++) {
        MPI_Comm c;
        if (i % 2)
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &c);
        MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, c);
        MPI_Comm_free(&c);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int fds = count_dir("/proc/self/fd", NULL), maps = count_maps();
    numacoll_mpi_stats_t s0, s1;
    numacoll_mpi_stats(&s0);
    for (int i = 0; i < ncomms; i++) {
        MPI_Comm c;
        if (i % 2)
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &c);
        int root = i % wsize, crank;
        MPI_Comm_rank(c, &crank);
        memset(buf, crank == root ? i & 0x7f : 0, sizeof buf);
        MPI_Bcast(buf, sizeof buf, MPI_CHAR, root, c);
        if (buf[100] != (i & 0x7f))
            CHECK(0, "comm %d: wrong data", i);
        if (i == ncomms / 2)
            CHECK(numacoll_mpi_comm_active(c) == (wsize > 1), "comm %d not active", i);
        MPI_Comm_free(&c);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* Two member orders alternate: with the team cache every communicator
     * takes a freed one's team; without it each makes its own. */
    numacoll_mpi_stats(&s1);
    const unsigned long long made = s1.teams_made - s0.teams_made,
                             reused = s1.teams_reused - s0.teams_reused;
    const int cache = wsize > 1 && team_cache_on();
    CHECK(made == (unsigned long long)(wsize > 1 && !cache ? ncomms : 0) &&
              reused == (unsigned long long)(cache ? ncomms : 0),
          "%d communicators: %llu teams made, %llu reused (team cache %s)", ncomms, made, reused,
          cache ? "on" : "off");
    int shm = count_dir("/dev/shm", "numacoll-");
    CHECK(shm == 0, "%d numacoll entries in /dev/shm", shm);
    CHECK(count_dir("/proc/self/fd", NULL) == fds, "fds %d -> %d", fds, count_dir("/proc/self/fd", NULL));
    /* Allow MPI's own slack of a couple of mappings, not one per comm. */
    int m = count_maps();
    CHECK(m <= maps + 4, "mappings %d -> %d after %d communicators", maps, m, ncomms);
    if (wrank == 0)
        printf("commloop: %d communicators: fds %d, mappings %d -> %d, /dev/shm %d\n", ncomms, fds,
               maps, m, shm);
}

/* Every collective numacoll takes, on c, with every receive buffer checked;
 * `tag` changes the data from one communicator to the next. */
static void all_colls(MPI_Comm c, int tag)
{
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    enum { K = 300 }; /* ints per block */
    int *a = malloc(sizeof(int) * K * (size_t)n), *b = malloc(sizeof(int) * K * (size_t)n);
    const int root = tag % n;
    for (int i = 0; i < K; i++)
        a[i] = r == root ? tag * 7 + i : -1;
    MPI_Bcast(a, K, MPI_INT, root, c);
    for (int i = 0; i < K; i++)
        if (a[i] != tag * 7 + i) {
            CHECK(0, "tag %d: bcast [%d] = %d", tag, i, a[i]);
            break;
        }
    for (int i = 0; i < K; i++)
        a[i] = r + i + tag;
    MPI_Allreduce(a, b, K, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < K; i++)
        if (b[i] != n * (i + tag) + n * (n - 1) / 2) {
            CHECK(0, "tag %d: allreduce [%d] = %d", tag, i, b[i]);
            break;
        }
    memset(b, 0xff, sizeof(int) * K);
    MPI_Reduce(a, b, K, MPI_INT, MPI_MAX, root, c);
    for (int i = 0; i < K && r == root; i++)
        if (b[i] != n - 1 + i + tag) {
            CHECK(0, "tag %d: reduce [%d] = %d", tag, i, b[i]);
            break;
        }
    MPI_Allgather(a, K, MPI_INT, b, K, MPI_INT, c);
    for (int j = 0; j < n * K; j++)
        if (b[j] != j / K + j % K + tag) {
            CHECK(0, "tag %d: allgather [%d] = %d", tag, j, b[j]);
            break;
        }
    for (int j = 0; j < n * K; j++)
        a[j] = tag * 1000 + r * 100 + j / K; /* block j/K goes to rank j/K */
    MPI_Alltoall(a, K, MPI_INT, b, K, MPI_INT, c);
    for (int j = 0; j < n * K; j++)
        if (b[j] != tag * 1000 + (j / K) * 100 + r) {
            CHECK(0, "tag %d: alltoall [%d] = %d", tag, j, b[j]);
            break;
        }
    MPI_Gather(a, K, MPI_INT, b, K, MPI_INT, root, c);
    for (int j = 0; j < n * K && r == root; j++)
        if (b[j] != tag * 1000 + (j / K) * 100 + j % K / K) {
            CHECK(0, "tag %d: gather [%d] = %d", tag, j, b[j]);
            break;
        }
    /* large: the pipelined and CMA paths (1 MiB broadcast, 512 KiB allreduce) */
    enum { L = 1 << 17 }; /* ints */
    int *x = malloc(sizeof(int) * L), *y = malloc(sizeof(int) * L);
    for (int i = 0; i < L; i++)
        x[i] = r == root ? tag ^ i : 0;
    MPI_Bcast(x, L, MPI_INT, root, c);
    for (int i = 0; i < L; i++)
        if (x[i] != (tag ^ i)) {
            CHECK(0, "tag %d: 1 MiB bcast [%d] = %d", tag, i, x[i]);
            break;
        }
    MPI_Allreduce(x, y, L, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < L; i++)
        if (y[i] != n * (tag ^ i)) {
            CHECK(0, "tag %d: 512 KiB allreduce [%d] = %d", tag, i, y[i]);
            break;
        }
    free(x);
    free(y);
    MPI_Barrier(c);
    /* last: a broadcast of nothing, which non-roots may leave unresolved until
     * their next call (the team cache resolves it when c is freed) */
    MPI_Bcast(a, 0, MPI_INT, root, c);
    free(a);
    free(b);
}

/* The team cache: a chain of communicators of the same ranks each run every
 * collective on the team the previous one left; a communicator made while a
 * rank still holds the previous one gets a team of its own; ranks in a
 * different order never share a team. */
static void teamcache(void)
{
    const int cache = wsize > 1 && team_cache_on(), any = wsize > 1;
    numacoll_mpi_stats_t s0, s1;
    numacoll_mpi_stats(&s0);
    /* 1. a chain of 20 */
    for (int i = 0; i < 20; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        all_colls(c, i);
        MPI_Comm_free(&c);
    }
    numacoll_mpi_stats(&s1);
    CHECK(s1.teams_made - s0.teams_made == (unsigned long long)(cache ? 1 : any ? 20 : 0) &&
              s1.teams_reused - s0.teams_reused == (unsigned long long)(cache ? 19 : 0),
          "chain: %llu teams made, %llu reused", s1.teams_made - s0.teams_made,
          s1.teams_reused - s0.teams_reused);

    /* 2. the odd ranks keep no team when they free a (their cache is off
     * then; one in every virtual node of two): b cannot have a's team, which
     * only the others offer, so it gets a new one */
    MPI_Comm a, b, c;
    char keep[32] = "4";
    numacoll_param_get("NUMACOLL_TEAM_CACHE", keep, sizeof keep, NULL);
    numacoll_mpi_stats(&s0);
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    all_colls(a, 100);
    if (wrank % 2)
        numacoll_param_set("NUMACOLL_TEAM_CACHE", "0");
    MPI_Comm_free(&a);
    numacoll_param_set("NUMACOLL_TEAM_CACHE", keep);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    all_colls(b, 101);
    MPI_Comm_free(&b);
    /* 3. then the next one takes b's team, the one every rank offers */
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    all_colls(c, 102);
    numacoll_mpi_stats(&s1);
    CHECK(s1.teams_made - s0.teams_made == (unsigned long long)(cache ? 1 : any ? 3 : 0) &&
              s1.teams_reused - s0.teams_reused == (unsigned long long)(cache ? 2 : 0),
          "a, b, c: %llu teams made, %llu reused", s1.teams_made - s0.teams_made,
          s1.teams_reused - s0.teams_reused);

    /* 4. the same ranks in reverse order, alongside c: a team of their own,
     * then theirs again */
    numacoll_mpi_stats(&s0);
    for (int i = 0; i < 3; i++) {
        MPI_Comm rev;
        MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev);
        all_colls(rev, 200 + i);
        all_colls(c, 300 + i);
        MPI_Comm_free(&rev);
    }
    numacoll_mpi_stats(&s1);
    CHECK(s1.teams_made - s0.teams_made == (unsigned long long)(cache ? 1 : any ? 3 : 0) &&
              s1.teams_reused - s0.teams_reused == (unsigned long long)(cache ? 2 : 0),
          "reversed: %llu teams made, %llu reused", s1.teams_made - s0.teams_made,
          s1.teams_reused - s0.teams_reused);
    MPI_Comm_free(&c);
    /* 5. half the ranks (p >= 4): their own team of p/2, while the whole
     * world's stays parked */
    if (wsize >= 4) {
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
        for (int i = 0; i < 3; i++)
            all_colls(half, 400 + i);
        MPI_Comm_free(&half);
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
        all_colls(half, 403);
        MPI_Comm_free(&half);
    }
    if (wrank == 0)
        printf("teamcache: %s\n", cache ? "cache on" : "cache off");
}

/* Two worlds on one node (MPI_Comm_spawn, merged): a communicator with
 * ranks of another world is not the node by itself (the set-up splits it),
 * on both sides alike; its team is cached like any other. argv0: this
 * program; the children run "spawn child". */
static void spawn_test(const char *argv0, int child)
{
    MPI_Comm parent, inter, merged;
    MPI_Comm_get_parent(&parent);
    if (!child) {
        char *args[] = {"spawn", "child", NULL};
        MPI_Comm_spawn(argv0, args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                       MPI_ERRCODES_IGNORE);
    } else {
        inter = parent;
    }
    MPI_Intercomm_merge(inter, child, &merged);
    int n, remote;
    MPI_Comm_size(merged, &n);
    MPI_Comm_remote_size(inter, &remote);
    CHECK(n == wsize + remote, "merged size %d, not %d + %d", n, wsize, remote);
    numacoll_mpi_stats_t s0, s1;
    numacoll_mpi_stats(&s0);
    for (int k = 0; k < 5; k++) {
        MPI_Comm d;
        MPI_Comm_dup(merged, &d);
        all_colls(d, 500 + k);
        CHECK(numacoll_mpi_comm_active(d) == 1, "dup %d of the merged worlds not active", k);
        MPI_Comm_free(&d);
    }
    numacoll_mpi_stats(&s1);
    const int cache = team_cache_on();
    CHECK(s1.teams_made - s0.teams_made == (unsigned long long)(cache ? 1 : 5) &&
              s1.teams_reused - s0.teams_reused == (unsigned long long)(cache ? 4 : 0),
          "merged worlds: %llu teams made, %llu reused", s1.teams_made - s0.teams_made,
          s1.teams_reused - s0.teams_reused);
    int bad = failures, all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, merged);
    if (!child && wrank == 0)
        printf("spawn: %d ranks of two worlds, %d failures\n", n, all);
    failures = all; /* the parents report the children's failures too */
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
}

/* Under a tight node budget (NUMACOLL_SHM_LIMIT about one and a half teams)
 * a freed communicator's team is not kept: only its maker could give its
 * budget back, so kept it would shorten the queue of the next communicator
 * of other ranks (here the reversed order), or send it to the MPI library. */
static void budget_test(void)
{
    MPI_Comm a, rev;
    numacoll_team_info_t ia = {0}, ir = {0};
    numacoll_mpi_stats_t s0, s1;
    numacoll_mpi_stats(&s0);
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    all_colls(a, 600);
    numacoll_team_t *ta = numacoll_mpi_comm_team(a);
    CHECK(ta && !numacoll_team_info(ta, &ia), "first communicator has no team");
    MPI_Comm_free(&a);
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev);
    all_colls(rev, 601);
    numacoll_team_t *tr = numacoll_mpi_comm_team(rev);
    CHECK(tr && !numacoll_team_info(tr, &ir), "reversed communicator has no team");
    CHECK(ir.queue_len == ia.queue_len, "reversed communicator's queue %zu, the first's %zu",
          ir.queue_len, ia.queue_len);
    MPI_Comm_free(&rev);
    numacoll_mpi_stats(&s1);
    CHECK(s1.teams_made - s0.teams_made == 2 && s1.teams_reused == s0.teams_reused,
          "%llu teams made, %llu reused", s1.teams_made - s0.teams_made,
          s1.teams_reused - s0.teams_reused);
    if (wrank == 0)
        printf("budget: queue %zu and %zu\n", ia.queue_len, ir.queue_len);
}

static void barrier_test(int iters)
{
    /* The entry counters live in an MPI shared window on the node. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nrank, nsize;
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    MPI_Win win;
    _Atomic unsigned *base;
    MPI_Win_allocate_shared(nrank == 0 ? 64 * sizeof(unsigned) * (size_t)nsize : 0, sizeof(unsigned),
                            MPI_INFO_NULL, node, &base, &win);
    MPI_Aint sz;
    int du;
    MPI_Win_shared_query(win, 0, &sz, &du, &base);
    if (nrank == 0)
        memset((void *)base, 0, 64 * sizeof(unsigned) * (size_t)nsize);
    MPI_Barrier(MPI_COMM_WORLD);
    if (iters <= 0)
        iters = wsize <= 2 ? 20000 : 2000;
    for (unsigned k = 1; k <= (unsigned)iters; k++) {
        atomic_store_explicit(&base[nrank * 16], k, memory_order_relaxed);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int j = 0; j < nsize; j++)
            if (atomic_load_explicit(&base[j * 16], memory_order_relaxed) < k) {
                CHECK(0, "left barrier %u before node rank %d entered", k, j);
                k = (unsigned)iters;
                break;
            }
    }
    numacoll_mpi_stats_t s;
    numacoll_mpi_stats(&s);
    if (wsize > 1)
        CHECK(s.calls_numacoll[NUMACOLL_MPI_BARRIER] >= (unsigned)iters, "barriers handled by numacoll: %llu",
              s.calls_numacoll[NUMACOLL_MPI_BARRIER]);
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
    if (wrank == 0)
        printf("barrier: %d barriers checked\n", iters);
}

typedef struct targ {
    MPI_Comm comm;
    int id;
} targ_t;

static void *thread_body(void *p)
{
    targ_t *a = p;
    char buf[100000];
    for (int i = 0; i < 200; i++) {
        int root = (i + a->id) % wsize;
        memset(buf, wrank == root ? (i * 3 + a->id) & 0x7f : 0, sizeof buf);
        MPI_Bcast(buf, (int)(i % 7 == 0 ? sizeof buf : 1000), MPI_CHAR, root, a->comm);
        if (buf[999] != ((i * 3 + a->id) & 0x7f))
            CHECK(0, "thread %d iteration %d: wrong data", a->id, i);
        if (i % 10 == 0)
            MPI_Barrier(a->comm);
    }
    /* then short-lived communicators from every thread at once: the team
     * cache's takes and parks race (one cache per process) */
    for (int i = 0; i < 12; i++) {
        MPI_Comm sub;
        MPI_Comm_dup(a->comm, &sub);
        all_colls(sub, 700 + 20 * a->id + i);
        MPI_Comm_free(&sub);
    }
    return NULL;
}

static void threads_test(void)
{
    enum { T = 3 };
    pthread_t th[T];
    targ_t args[T];
    for (int i = 0; i < T; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &args[i].comm);
        args[i].id = i;
    }
    for (int i = 0; i < T; i++)
        pthread_create(&th[i], NULL, thread_body, &args[i]);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++)
        MPI_Comm_free(&args[i].comm);
    if (wrank == 0)
        printf("threads: %d threads x 200 bcasts on their own communicators, then 12 "
               "short-lived communicators each\n", T);
}

/* Passive-target RMA from rank 0 while the others wait in numacoll's
 * collectives: MPICH completes rank 0's MPI_Win_unlock only while the target
 * polls the MPI library, so the waits must (the progress hook of
 * sync/nc_wait.h); without it this deadlocks. Rank 0 then reads every
 * target's window back: the last value it put. */
static void rma_test(void)
{
    int *base, v = 0;
    const int N = 60;
    MPI_Win win;
    /* MPI_Win_create on MPI_Alloc_mem memory, as mpi4py's tests make it: with
     * MPI_Win_allocate, MPICH 4.0.2 here lands rank 0's puts in rank 0's own
     * window (seen without numacoll too), and the targets' loads below would
     * fail. Open MPI 4.1 without a network has no component for
     * MPI_Win_create (MPI_ERR_WIN): there MPI_Win_allocate. */
    int rc, allocated = 0;
    MPI_Alloc_mem(sizeof(int), MPI_INFO_NULL, &base);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Win_create(base, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (rc != MPI_SUCCESS) {
        MPI_Free_mem(base);
        MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        allocated = 1;
    }
    *base = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < N; it++) {
        if (wrank == 0)
            for (int t = 1; t < wsize; t++) {
                MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
                MPI_Put(&it, 1, MPI_INT, t, 0, 1, MPI_INT, win);
                MPI_Win_flush(t, win);
                MPI_Win_unlock(t, win);
            }
        /* the others wait in a barrier, a broadcast or an allreduce */
        if (it % 3 == 0)
            MPI_Barrier(MPI_COMM_WORLD);
        else if (it % 3 == 1)
            MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    if (wrank == 0)
        for (int t = 1; t < wsize; t++) {
            int got = -2;
            MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
            MPI_Get(&got, 1, MPI_INT, t, 0, 1, MPI_INT, win);
            MPI_Win_unlock(t, win);
            if (got != N - 1) {
                fprintf(stderr, "rma: rank %d's window holds %d, want %d\n", t, got, N - 1);
                failures++;
            }
        }
    /* Active target: rank 0's access epoch (MPI_Win_complete) ends before
     * the barrier, so after it every target's exposure epoch has ended too:
     * MPI_Win_test says so at once, as with the MPI library's own barrier,
     * which polls on the way in and out (mpi4py's testStartCompletePostTest
     * failed without that). */
    MPI_Group wg, g;
    MPI_Win_get_group(win, &wg);
    int zero = 0, late = 0;
    for (int it = 0; it < N && wsize > 1; it++) {
        if (wrank == 0) {
            MPI_Group_excl(wg, 1, &zero, &g);
            MPI_Win_start(g, 0, win);
            MPI_Barrier(MPI_COMM_WORLD);
            for (int t = 1; t < wsize; t++)
                MPI_Put(&it, 1, MPI_INT, t, 0, 1, MPI_INT, win);
            MPI_Win_complete(win);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            int flag = 0;
            MPI_Group_incl(wg, 1, &zero, &g);
            MPI_Win_post(g, 0, win);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Win_test(win, &flag);
            if (!flag) {
                late++;
                MPI_Win_wait(win);
            }
            if (*base != it) {
                fprintf(stderr, "rma: rank %d's window holds %d after epoch %d\n", wrank, *base,
                        it);
                failures++;
            }
        }
        MPI_Group_free(&g);
    }
    MPI_Group_free(&wg);
    if (late) {
        fprintf(stderr, "rma: rank %d: MPI_Win_test false after the barrier in %d of %d epochs\n",
                wrank, late, N);
        failures++;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    if (!allocated)
        MPI_Free_mem(base);
    if (wrank == 0)
        printf("rma: %d passive-target epochs per target, the targets in collectives; %d "
               "post-start-complete epochs, tested after a barrier\n",
               N, N);
}

/* World rank 0 alone had `name` set to `value` before MPI_Init (agree_pre()):
 * every rank must now have the agreed value and take the same path in
 * every collective, and the results are right. */
static void agree_test(const char *name, const char *value)
{
    char v[64];
    CHECK(numacoll_param_get(name, v, sizeof v, NULL) == 0, "numacoll_param_get(%s)", name);
    long mine = strtol(v, NULL, 10), lo, hi;
    MPI_Allreduce(&mine, &hi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: ranks have %ld to %ld after MPI_Init", name, lo, hi);
    /* the safe value: numacoll off for what rank 0 turned off, its calls and stats */
    CHECK(mine == strtol(value, NULL, 10), "%s = %ld, rank 0 set %s", name, mine, value);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm comms[2] = {MPI_COMM_WORLD, dup};
    for (int k = 0; k < 2; k++)
        for (int it = 0; it < 6; it++) {
            int x = wrank == it % wsize ? 1000 + it : -1, one = wrank + 1, sum = -1;
            MPI_Bcast(&x, 1, MPI_INT, it % wsize, comms[k]);
            CHECK(x == 1000 + it, "bcast %d: %d", it, x);
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comms[k]);
            CHECK(sum == wsize * (wsize + 1) / 2, "allreduce %d: %d", it, sum);
            MPI_Barrier(comms[k]);
            int counts[64], displs[64], all[64];
            for (int r = 0; r < wsize && r < 64; r++)
                counts[r] = 1, displs[r] = wsize - 1 - r;
            MPI_Allgatherv(&one, 1, MPI_INT, all, counts, displs, MPI_INT, comms[k]);
            for (int r = 0; r < wsize && r < 64; r++)
                CHECK(all[wsize - 1 - r] == r + 1, "allgatherv %d: [%d] = %d", it, r, all[r]);
        }
    MPI_Comm_free(&dup);
    /* the same path on every rank: numacoll's call counts agree */
    numacoll_mpi_stats_t st;
    CHECK(numacoll_mpi_stats(&st) == 0, "numacoll_mpi_stats");
    unsigned long long c[NUMACOLL_MPI_NCOLL], cmin[NUMACOLL_MPI_NCOLL], cmax[NUMACOLL_MPI_NCOLL];
    for (int i = 0; i < NUMACOLL_MPI_NCOLL; i++)
        c[i] = st.calls_numacoll[i];
    MPI_Allreduce(c, cmin, NUMACOLL_MPI_NCOLL, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(c, cmax, NUMACOLL_MPI_NCOLL, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < NUMACOLL_MPI_NCOLL; i++)
        CHECK(cmin[i] == cmax[i], "%s: collective %d taken by numacoll %llu to %llu times", name,
              i, cmin[i], cmax[i]);
    const int off = (!strcmp(name, "NUMACOLL_DISABLE") && mine) ||
                    (strstr(name, "_ENABLE") && !mine);
    const int coll = !strcmp(name, "NUMACOLL_BCAST_ENABLE")       ? NUMACOLL_MPI_BCAST
                     : !strcmp(name, "NUMACOLL_ALLREDUCE_ENABLE") ? NUMACOLL_MPI_ALLREDUCE
                                                                  : NUMACOLL_MPI_BARRIER;
    if (off && wsize > 1)
        CHECK(c[coll] == 0, "%s=%ld, but numacoll took %llu calls", name, mine, c[coll]);
    else if (wsize > 1)
        CHECK(c[coll] > 0, "%s=%ld, and numacoll took no call", name, mine);
}

/* Before MPI_Init: world rank 0 (from the launcher's environment) sets it. */
static void agree_pre(const char *name, const char *value)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    if (r && !strcmp(r, "0") && numacoll_param_set(name, value))
        fprintf(stderr, "numacoll_param_set(%s, %s) failed\n", name, value);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int provided;
    if (!strcmp(mode, "agree") && argc > 3)
        agree_pre(argv[2], argv[3]);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (!strcmp(mode, "commloop"))
        commloop(argc > 2 ? atoi(argv[2]) : 1000);
    else if (!strcmp(mode, "teamcache"))
        teamcache();
    else if (!strcmp(mode, "budget"))
        budget_test();
    else if (!strcmp(mode, "spawn")) {
        int child = argc > 2 && !strcmp(argv[2], "child");
        spawn_test(argv[0], child);
        if (child) { /* the children's world reports nothing of its own */
            MPI_Finalize();
            return 0;
        }
    }
    else if (!strcmp(mode, "barrier"))
        barrier_test(argc > 2 ? atoi(argv[2]) : 0);
    else if (!strcmp(mode, "rma"))
        rma_test();
    else if (!strcmp(mode, "threads")) {
        if (provided < MPI_THREAD_MULTIPLE) {
            if (wrank == 0)
                printf("MPI_THREAD_MULTIPLE not provided (%d): skipped\n", provided);
            MPI_Finalize();
            return 77;
        }
        threads_test();
    } else if (!strcmp(mode, "agree") && argc > 3) {
        agree_test(argv[2], argv[3]);
    } else {
        fprintf(stderr, "usage: test_mpi_misc commloop|teamcache|budget|spawn|barrier|rma|threads|"
                        "agree NAME VALUE\n");
        failures = 1;
    }
    int all;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("test_mpi_misc %s p=%d: %s\n", mode, wsize, all ? "FAILED" : "PASSED");
    MPI_Finalize();
    return all ? 1 : 0;
}
