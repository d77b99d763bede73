/*
 * Broadcast between real processes: every root, sizes around every boundary
 * (f, b = s*f, beyond the queue, 64 MiB), the matrix trees x q x s x f, wrap of
 * the sequence counters, size mismatches and the fragment-callback form. Every
 * received byte is checked against a pattern that differs per call, and the
 * bytes after the message must be untouched.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/nc_team.h"
#include "model/nc_model.h"
#include "nc_forktest.h"
#include "shm/nc_cma.h"

#define GUARD 64

typedef struct cfg {
    const char *tree;
    int s, q;
    size_t f;
    const char *layout;
} cfg_t;

typedef struct run {
    const cfg_t *cfgs;
    int ncfgs;
    int big;        /* also 64 MiB */
    int nodisk;
} run_t;

static int set_cfg(const cfg_t *c)
{
    char v[32];
    int rc = numacoll_param_set("NUMACOLL_BCAST_TREE", c->tree);
    snprintf(v, sizeof v, "%d", c->s);
    rc |= numacoll_param_set("NUMACOLL_BCAST_QUEUE_LEN", v);
    snprintf(v, sizeof v, "%d", c->q);
    rc |= numacoll_param_set("NUMACOLL_BCAST_SETS", v);
    snprintf(v, sizeof v, "%zu", c->f);
    rc |= numacoll_param_set("NUMACOLL_BCAST_FRAG_SIZE", v);
    rc |= numacoll_param_set("NUMACOLL_SEG_LAYOUT", c->layout ? c->layout : "compact");
    return rc;
}

static int one_call(numacoll_team_t *t, unsigned char *buf, size_t n, int root, uint64_t call,
                    int rank)
{
    if (rank == root)
        nc_pattern_fill(buf, n, call);
    else
        memset(buf, 0xEE, n);
    memset(buf + n, 0xAB, GUARD);
    int rc = numacoll_bcast(t, buf, n, root);
    CHECK(rc == 0, "bcast(n=%zu root=%d) = %d (%s)", n, root, rc, numacoll_strerror(rc));
    long bad = nc_pattern_check(buf, n, call);
    CHECK(bad < 0, "rank %d root %d n=%zu: byte %ld wrong (0x%02x)", rank, root, n, bad,
          bad >= 0 ? buf[bad] : 0);
    for (int g = 0; g < GUARD; g++)
        CHECK(buf[n + g] == 0xAB, "rank %d root %d n=%zu: wrote past the end", rank, root, n);
    return 0;
}

static int body_configs(int rank, int p, const char *name, void *arg)
{
    const run_t *run = arg;
    numacoll_bootstrap_t *bs;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    uint64_t call = 0;
    for (int c = 0; c < run->ncfgs; c++) {
        const cfg_t *cf = &run->cfgs[c];
        CHECK(set_cfg(cf) == 0, "config %s s=%d q=%d f=%zu", cf->tree, cf->s, cf->q, cf->f);
        numacoll_team_t *t;
        int rc = numacoll_team_create(bs, &t);
        CHECK(rc == 0, "team_create = %s", numacoll_strerror(rc));
        size_t f = cf->f, b = (size_t)cf->s * f;
        size_t sizes[] = {0, 1, 7, f - 1, f, f + 1, b - 1, b, b + 1, 3 * b + 17, (size_t)64 << 20};
        int nsizes = run->big ? 11 : 10;
        size_t max = 0;
        for (int i = 0; i < nsizes; i++)
            max = sizes[i] > max ? sizes[i] : max;
        unsigned char *buf = malloc(max + GUARD);
        CHECK(buf, "malloc");
        for (int root = 0; root < p; root++)
            for (int i = 0; i < nsizes; i++)
                if (one_call(t, buf, sizes[i], root, ++call, rank)) {
                    fprintf(stderr, "  in config tree=%s s=%d q=%d f=%zu p=%d\n", cf->tree, cf->s,
                            cf->q, f, p);
                    return 1;
                }
        /* Back-to-back with changing roots and sizes in one sequence. */
        for (int i = 0; i < 3 * p; i++)
            if (one_call(t, buf, sizes[(i * 7) % nsizes] % (4 * b + 1), (i * 5) % p, ++call, rank))
                return 1;
        free(buf);
        numacoll_team_destroy(t);
    }
    numacoll_bootstrap_named_free(bs);
    return 0;
}

static int run_all(const run_t *run, const int *ps, int nps, int timeout)
{
    for (int i = 0; i < nps; i++) {
        if (nc_fork_run(ps[i], timeout, body_configs, (void *)run, -1)) {
            fprintf(stderr, "FAILED with p=%d\n", ps[i]);
            return 1;
        }
        printf("p=%d: %d configuration(s) passed\n", ps[i], run->ncfgs);
    }
    return 0;
}

/* ---- size mismatch ---------------------------------------------------------- */
static int body_truncate(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    unsigned char buf[100000];
    const size_t rootn = 40000;
    /* rank 2 expects fewer bytes, rank 3 more, the others the same. */
    size_t n = rank == 2 ? 1000 : rank == 3 ? 60000 : rootn;
    if (rank == 1)
        nc_pattern_fill(buf, n, 77);
    int rc = numacoll_bcast(t, buf, n, 1);
    if (rank == 2 || rank == 3) {
        CHECK(rc == NUMACOLL_ERR_TRUNCATE, "rank %d: expected TRUNCATE, got %d", rank, rc);
        CHECK(nc_pattern_check(buf, n < rootn ? n : rootn, 77) < 0, "prefix of a truncated bcast");
    } else {
        CHECK(rc == 0, "rank %d: %s", rank, numacoll_strerror(rc));
        CHECK(nc_pattern_check(buf, n, 77) < 0, "content");
    }
    /* Root sends nothing, the others expect something: an error, not a hang. */
    rc = numacoll_bcast(t, buf, rank == 0 ? 0 : 10, 0);
    CHECK(rank == 0 ? rc == 0 : rc == NUMACOLL_ERR_TRUNCATE, "zero-byte root: rank %d rc %d", rank, rc);
    /* The team is still fine. */
    if (one_call(t, buf, 50000, 3, 99, rank))
        return 1;
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- the per-call fragments: a queue of 64 KiB buffers cuts a 16 KiB
 * message into 4 KiB fragments (the model's defaults, t_w / t = 1000 bytes),
 * every size arrives whole from every root; with NUMACOLL_BCAST_MODEL_TW_NS=0
 * every fragment is f. ---- */
static int body_cut(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    static const size_t sizes[] = {4081, 5000, 16384, 16385, 100000, 3 * 65536 + 17, 8 * 65536 + 1};
    static unsigned char buf[8 * 65536 + 1 + GUARD];
    uint64_t call = 0;
    for (int fixed = 0; fixed < 2; fixed++) {
        numacoll_bootstrap_t *bs;
        numacoll_team_t *t;
        CHECK(numacoll_param_set("NUMACOLL_BCAST_MODEL_TW_NS", fixed ? "0" : "100") == 0 &&
                  numacoll_param_set("NUMACOLL_BCAST_MODEL_T_PS", "100") == 0,
              "params");
        CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
        CHECK(numacoll_team_create(bs, &t) == 0, "team");
        for (size_t i = 0; i < NC_ARRAY_SIZE(sizes); i++)
            for (int root = 0; root < p; root++) {
                if (one_call(t, buf, sizes[i], root, ++call, rank))
                    return 1;
                if (rank != root)
                    continue;
                const size_t want = fixed ? 65536 : nc_model_call_frag(sizes[i], 65536, 8, 1000);
                CHECK(t->frag_m == sizes[i] && t->frag_f == want,
                      "root %d, %zu bytes: fragments of %zu, expected %zu", root, sizes[i],
                      t->frag_f, want);
                CHECK(fixed || sizes[i] != 16384 || t->frag_f == 4096,
                      "16 KiB: fragments of %zu, expected 4096", t->frag_f);
            }
        numacoll_team_destroy(t);
        numacoll_bootstrap_named_free(bs);
    }
    return 0;
}

/* ---- non-temporal stores chosen by hwloc's caches (NUMACOLL_SHM_NT=auto):
 * argv "nt 1" expects them (HWLOC_SYNTHETIC with a cache per core), "nt 0"
 * not (one cache for all); the bytes arrive whole either way. ---- */
static int body_nt(int rank, int p, const char *name, void *arg)
{
    const int want = *(const int *)arg;
    static const size_t sizes[] = {4081, 8192, 65536 + 3, 3 * 65536 + 17};
    static unsigned char buf[3 * 65536 + 17 + GUARD];
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    CHECK(t->shm_nt == want, "rank %d: non-temporal stores %d, expected %d (cache_shared %d)",
          rank, t->shm_nt, want, t->cache_shared);
    uint64_t call = 0;
    for (size_t i = 0; i < NC_ARRAY_SIZE(sizes); i++)
        for (int root = 0; root < p; root++)
            if (one_call(t, buf, sizes[i], root, ++call, rank))
                return 1;
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- the call ring: many calls, deferred zero-byte calls, late mismatches ---- */
static int body_ring(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    static unsigned char buf[200000 + GUARD];
    uint64_t call = 1000;
    /* 1. Ten ring turns of inline, zero and set-path calls with rotating roots. */
    static const size_t sizes[] = {0, 1, 48, 49, 0, 0, NC_CALL_INLINE, 0, NC_CALL_INLINE + 1, 100000, 0, 5000};
    for (int i = 0; i < 10 * NC_CALL_RING; i++)
        if (one_call(t, buf, sizes[i % NC_ARRAY_SIZE(sizes)], (i / 3) % p, ++call, rank))
            return 1;
    /* 2. Long runs of zero-byte calls (deferred by the readers), then data. */
    for (int i = 0; i < 5 * NC_CALL_RING; i++)
        CHECK(numacoll_bcast(t, buf, 0, i % 7 == 0 ? p - 1 : 0) == 0, "zero-byte call %d", i);
    if (one_call(t, buf, 33, p - 1, ++call, rank) || one_call(t, buf, 70000, 0, ++call, rank))
        return 1;
    /* 3. The root sends 10 bytes, rank 1 passes 0: it returns at once, and its
     * next call reports the mismatch and still delivers its own data. */
    int rc = numacoll_bcast(t, buf, rank == 1 ? 0 : 10, 0);
    CHECK(rc == 0, "rank %d: deferred call: %d", rank, rc);
    nc_pattern_fill(buf, 20, 5);
    rc = numacoll_bcast(t, buf, 20, 0);
    CHECK(rc == (rank == 1 ? NUMACOLL_ERR_TRUNCATE : 0), "rank %d: late mismatch: %d", rank, rc);
    CHECK(nc_pattern_check(buf, 20, 5) < 0, "rank %d: data of the call after a mismatch", rank);
    /* 4. The same with a message through the sets, found by the barrier; the
     * root then reuses its sets (it would hang if rank 1 had not drained). */
    if (rank == 0)
        nc_pattern_fill(buf, 150000, 6);
    rc = numacoll_bcast(t, buf, rank == 1 ? 0 : 150000, 0);
    CHECK(rc == 0, "rank %d: deferred large call: %d", rank, rc);
    rc = numacoll_barrier(t);
    CHECK(rc == (rank == 1 ? NUMACOLL_ERR_TRUNCATE : 0), "rank %d: barrier after: %d", rank, rc);
    CHECK(rank == 1 || nc_pattern_check(buf, 150000, 6) < 0, "rank %d: large data", rank);
    for (int i = 0; i < 3; i++)
        if (one_call(t, buf, 150000, 0, ++call, rank))
            return 1;
    /* 5. Rank p-1 names another root: NUMACOLL_ERR_ROOT there, the others get
     * their data, nobody hangs. */
    if (rank == 0)
        nc_pattern_fill(buf, 90000, 7);
    rc = numacoll_bcast(t, buf, 90000, rank == p - 1 ? 1 : 0);
    CHECK(rc == (rank == p - 1 ? NUMACOLL_ERR_ROOT : 0), "rank %d: root mismatch: %d", rank, rc);
    CHECK(rank == p - 1 || nc_pattern_check(buf, 90000, 7) < 0, "rank %d: data", rank);
    /* 6. Rank 1 passes 0 bytes for a large call and then waits for the root
     * outside numacoll (as a program waiting in MPI_Recv would): the root
     * must return without it (with CMA: step Z of coll/nc_bcast.c). */
    char marker[128];
    snprintf(marker, sizeof marker, "/tmp/nc-test-ring-%s-%d", name + (name[0] == '/'), p);
    if (rank == 0)
        nc_pattern_fill(buf, 200000, 8);
    rc = numacoll_bcast(t, buf, rank == 1 ? 0 : 200000, 0);
    CHECK(rc == 0, "rank %d: deferred call before the wait: %d", rank, rc);
    if (rank == 0) {
        FILE *f = fopen(marker, "w");
        CHECK(f, "marker %s", marker);
        fclose(f);
    } else if (rank == 1) {
        int waited = 0;
        while (access(marker, F_OK) && waited++ < 10000)
            usleep(1000);
        CHECK(!access(marker, F_OK), "rank 1: the root did not return while rank 1 waited");
    }
    rc = numacoll_barrier(t);
    CHECK(rc == (rank == 1 ? NUMACOLL_ERR_TRUNCATE : 0), "rank %d: barrier after: %d", rank, rc);
    CHECK(rank == 1 || nc_pattern_check(buf, 200000, 8) < 0, "rank %d: data", rank);
    if (rank == 0)
        unlink(marker);
    /* The team is still fine. */
    if (one_call(t, buf, 40, 1, ++call, rank) || one_call(t, buf, 5000, 2 % p, ++call, rank))
        return 1;
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- members that disagree on the root: an error, never a hang ------------------ */
/* Member `from`'s int, known to all. */
static int share_int(numacoll_team_t *t, int v, int from, int rank)
{
    int x = rank == from ? v : -12345;
    int rc = numacoll_bcast(t, &x, sizeof x, from);
    return rc ? -99999 : x;
}

static int body_roots(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    /* inline, through the sets, and (where CMA is allowed) by CMA */
    static const size_t sizes[] = {0, 10, 100000, (size_t)2 << 20};
    static unsigned char buf[((size_t)2 << 20) + GUARD];
    uint64_t call = 500;
    for (size_t i = 0; i < NC_ARRAY_SIZE(sizes); i++) {
        const size_t n = sizes[i];
        /* 1. Members 0 and 1 both pass themselves as the root, the others
         * pass 0: the second to claim the call gets NUMACOLL_ERR_ROOT and
         * keeps its buffer; the others follow the first. */
        ++call;
        const int myroot = rank < 2 ? rank : 0;
        if (rank < 2)
            nc_pattern_fill(buf, n, call * 2 + (uint64_t)rank);
        else
            memset(buf, 0xEE, n);
        memset(buf + n, 0xAB, GUARD);
        /* Each of them wins in turn. Small calls claim without a locked
         * instruction (C2a), so two roots that arrive together may both go
         * on: the late one comes 100 ms later. */
        if (rank == (int)(i % 2))
            usleep(n > t->inline_max ? 1000 : 100000);
        int rc = numacoll_bcast(t, buf, n, myroot);
        CHECK(rc == 0 || rc == NUMACOLL_ERR_ROOT, "rank %d: two roots, n=%zu: %s", rank, n,
              numacoll_strerror(rc));
        /* a zero-byte reader learns it here, when it resolves the call */
        const int drc = numacoll_barrier(t);
        const int rc0 = share_int(t, rc, 0, rank), rc1 = share_int(t, rc, 1, rank);
        CHECK((rc0 == 0) + (rc1 == 0) == 1 && (rc0 == NUMACOLL_ERR_ROOT) + (rc1 == NUMACOLL_ERR_ROOT) == 1,
              "rank %d: two roots, n=%zu: member 0 got %d, member 1 got %d (one of them must win)",
              rank, n, rc0, rc1);
        const int winner = rc0 == 0 ? 0 : 1;
        CHECK(drc == (rank >= 2 && !n && winner == 1 ? NUMACOLL_ERR_ROOT : 0),
              "rank %d: two roots, n=%zu, member %d won: barrier after: %d", rank, n, winner, drc);
        if (rank < 2) {
            CHECK(nc_pattern_check(buf, n, call * 2 + (uint64_t)rank) < 0,
                  "rank %d: two roots, n=%zu: a root's buffer changed", rank, n);
        } else if (n) { /* a zero-byte reader has nothing to compare */
            CHECK(rc == (winner == 0 ? 0 : NUMACOLL_ERR_ROOT),
                  "rank %d: two roots, n=%zu, member %d won: %s", rank, n, winner,
                  numacoll_strerror(rc));
            if (winner == 0)
                CHECK(nc_pattern_check(buf, n, call * 2) < 0,
                      "rank %d: two roots, n=%zu: not the winner's data", rank, n);
            else
                for (size_t k = 0; k < n; k++)
                    CHECK(buf[k] == 0xEE, "rank %d: two roots, n=%zu: byte %zu written", rank, n, k);
        }
        for (int g = 0; g < GUARD; g++)
            CHECK(buf[n + g] == 0xAB, "rank %d: two roots, n=%zu: wrote past the end", rank, n);
        /* 2. Every member passes the next member as the root: nobody is the
         * root, every member gets NUMACOLL_ERR_ROOT (zero-byte calls are
         * deferred: at the barrier) and keeps its buffer. */
        memset(buf, 0xEE, n + GUARD);
        rc = numacoll_bcast(t, buf, n, (rank + 1) % p);
        int brc = numacoll_barrier(t);
        CHECK(n ? rc == NUMACOLL_ERR_ROOT && brc == 0 : rc == 0 && brc == NUMACOLL_ERR_ROOT,
              "rank %d: no root, n=%zu: bcast %d, barrier %d", rank, n, rc, brc);
        for (size_t k = 0; k < n + GUARD; k++)
            CHECK(buf[k] == 0xEE, "rank %d: no root, n=%zu: byte %zu written", rank, n, k);
        /* 3. Nobody is the root and member 0 defers (0 bytes): the others
         * wait until its barrier resolves the call. */
        rc = numacoll_bcast(t, buf, rank ? n + 1 : 0, (rank + 1) % p);
        brc = numacoll_barrier(t);
        CHECK(rank ? rc == NUMACOLL_ERR_ROOT && brc == 0 : rc == 0 && brc == NUMACOLL_ERR_ROOT,
              "rank %d: no root, member 0 deferred, n=%zu: bcast %d, barrier %d", rank, n, rc, brc);
        /* The team still works. */
        if (one_call(t, buf, n, (int)(i % (size_t)p), ++call, rank))
            return 1;
    }
    /* Slots given up or claimed twice are taken again: two ring turns, with
     * calls nobody is the root of NC_CALL_RING calls apart (C3b gives up a
     * slot whose last call was given up too). */
    for (int i = 0; i < 2 * NC_CALL_RING; i++) {
        if (i % NC_CALL_RING == 5) {
            int rc = numacoll_bcast(t, buf, 20, (rank + 1) % p);
            CHECK(rc == NUMACOLL_ERR_ROOT, "rank %d: no root at call %d of the turns: %d", rank, i, rc);
            continue;
        }
        if (one_call(t, buf, (size_t)(i % 50), i % p, ++call, rank))
            return 1;
    }
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- the callback form: receivers scatter every byte to an odd offset ----------- */
typedef struct strided {
    unsigned char *base;
} strided_t;

static void unpack_strided(void *ctx, size_t off, void *shm, size_t len)
{
    strided_t *s = ctx;
    for (size_t i = 0; i < len; i++)
        s->base[2 * (off + i) + 1] = ((unsigned char *)shm)[i];
}

static void pack_contig(void *ctx, size_t off, void *shm, size_t len)
{
    memcpy(shm, (unsigned char *)ctx + off, len);
}

static int body_callback(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    const size_t n = 3 * 64 * 8192 + 5;
    unsigned char *src = malloc(n), *dst = calloc(2 * n, 1), *tmp = malloc(n);
    const char *tr = getenv("NUMACOLL_TRANSPORT");
    const int forced = tr && !strcmp(tr, "cma");
    for (int root = 0; root < p; root++) {
        int rc;
        const uint64_t before = t->cma_calls;
        if (rank == root) {
            nc_pattern_fill(src, n, (uint64_t)root + 500);
            /* even roots pass their buffer (CMA when the team uses it: the
             * readers then read through their bounce buffer), odd roots pack */
            rc = root % 2 ? numacoll_bcast_cb(t, n, root, pack_contig, src)
                          : numacoll_bcast(t, src, n, root);
        } else {
            strided_t s = {dst};
            rc = numacoll_bcast_cb(t, n, root, unpack_strided, &s);
            for (size_t i = 0; i < n; i++)
                tmp[i] = dst[2 * i + 1];
            CHECK(nc_pattern_check(tmp, n, (uint64_t)root + 500) < 0, "strided content root %d", root);
        }
        CHECK(rc == 0, "bcast_cb %d", rc);
        /* NUMACOLL_TRANSPORT=cma: a root's buffer goes by CMA, a packing root's
         * through the segment */
        CHECK(!forced || t->cma_calls - before == (uint64_t)(root % 2 == 0),
              "rank %d root %d: CMA calls %llu", rank, root,
              (unsigned long long)(t->cma_calls - before));
    }
    free(src);
    free(dst);
    free(tmp);
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}


/* ---- transports: every path forced, the same bytes ---------------------------- */

/* Does this machine let two sibling processes use CMA (what a team probes)?
 * Where it does not (Yama scope 2 or 3, a seccomp filter, a container), the
 * tests check the fallback instead, and the CMA-only modes are skipped. */
static int cma_here = -1;
static int probe_cma_here(void)
{
    int fds[2];
    if (pipe(fds))
        return 0;
    pid_t holder = fork();
    if (holder == 0) {
        char c;
        nc_cma_allow_now();
        close(fds[1]);
        while (read(fds[0], &c, 1) > 0) {
        }
        _exit(0);
    }
    close(fds[0]);
    int ok = 0;
    pid_t reader = fork();
    if (reader == 0) {
        usleep(20000); /* the holder has called prctl */
        char why[160];
        /* the holder is a fork of us: its probe word is at our address */
        _exit(nc_cma_probe(holder, nc_cma_probe_addr(), 0, why, sizeof why) == 0 ? 0 : 1);
    }
    int st = 0;
    if (reader > 0 && waitpid(reader, &st, 0) == reader)
        ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    close(fds[1]);
    waitpid(holder, NULL, 0);
    return ok;
}
typedef struct xport {
    const char *transport, *coop, *min;
} xport_t;

static const xport_t xports[] = {
    {"shm", "1", "0"}, {"cma", "1", "0"}, {"cma", "0", "0"}, {"auto", "1", "100000"}};

/* One checked call, and did it go by CMA exactly when it should? */
static int xport_call(numacoll_team_t *t, unsigned char *buf, size_t n, int root, uint64_t call,
                      int rank, const xport_t *x)
{
    const uint64_t before = t->cma_calls;
    if (one_call(t, buf, n, root, call, rank))
        return 1;
    const int want = t->cma && n > t->inline_max &&
                     (!strcmp(x->transport, "cma") || n >= (size_t)atol(x->min));
    CHECK(t->cma_calls - before == (uint64_t)want, "rank %d n=%zu transport=%s min=%s: CMA %s",
          rank, n, x->transport, x->min, want ? "not used" : "used");
    return 0;
}

static int body_transports(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    uint64_t call = 0;
    unsigned char *buf = malloc(((size_t)64 << 20) + GUARD);
    CHECK(buf, "malloc");
    for (size_t k = 0; k < NC_ARRAY_SIZE(xports); k++) {
        const xport_t *x = &xports[k];
        CHECK(!numacoll_param_set("NUMACOLL_TRANSPORT", x->transport) &&
                  !numacoll_param_set("NUMACOLL_CMA_COOP", x->coop) &&
                  !numacoll_param_set("NUMACOLL_CMA_MIN", x->min),
              "params");
        numacoll_team_t *t;
        int rc = numacoll_team_create(bs, &t);
        CHECK(rc == 0, "team_create = %s", numacoll_strerror(rc));
        /* Where this machine allows CMA, a team that cannot use it is a failure. */
        CHECK(t->cma == (cma_here && strcmp(x->transport, "shm") && p > 1),
              "rank %d transport=%s: cma=%d (%s)", rank, x->transport, t->cma, t->cma_why);
        const size_t in = t->inline_max, w = (size_t)16 << 10; /* the smallest root share */
        const size_t sizes[] = {0,          1,          in,         in + 1,    w * (size_t)p - 1,
                                w * (size_t)p, 99999,   100000,     100001,    (1u << 20) + 3,
                                (size_t)64 << 20};
        /* 64 MiB once per transport, from one root */
        for (int root = 0; root < p; root++)
            for (size_t i = 0; i + 1 < NC_ARRAY_SIZE(sizes); i++)
                if (xport_call(t, buf, sizes[i], root, ++call, rank, x))
                    return 1;
        if (xport_call(t, buf, sizes[NC_ARRAY_SIZE(sizes) - 1], p - 1, ++call, rank, x))
            return 1;
        numacoll_team_destroy(t);
    }
    free(buf);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- CMA refused: the test hook, then a real seccomp filter -------------------- */
static int deny_cma(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {(unsigned short)NC_ARRAY_SIZE(f), f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int body_refused(int rank, int p, const char *name, void *arg)
{
    const int seccomp = *(const int *)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    /* seccomp: only the last member filters, the others must find out too */
    if (seccomp && rank == p - 1)
        CHECK(deny_cma() == 0, "seccomp filter: %s", strerror(errno));
    CHECK(!numacoll_param_set("NUMACOLL_TRANSPORT", "cma") &&
              !numacoll_param_set("NUMACOLL_TEST_CMA_FAIL", seccomp ? "0" : "1"),
          "params");
    /* two teams, one after the other: the line that says why is said once
     * per process (check_lines.sh counts it) */
    for (int team = 0; team < 2; team++) {
        if (team) {
            char name2[256];
            snprintf(name2, sizeof name2, "%s-2", name);
            numacoll_bootstrap_named_free(bs);
            CHECK(numacoll_bootstrap_named(name2, rank, p, &bs) == 0, "bootstrap 2");
        }
        CHECK(numacoll_team_create(bs, &t) == 0, "team");
        CHECK(!t->cma, "rank %d: CMA in use although refused", rank);
        CHECK(strstr(t->cma_why, seccomp ? "EPERM" : "NUMACOLL_TEST_CMA_FAIL"),
              "rank %d: why: %s", rank, t->cma_why);
        static unsigned char buf[(3u << 20) + GUARD];
        for (int root = 0; root < p; root++)
            if (one_call(t, buf, 3u << 20, root, (uint64_t)root + 40 + 10 * (uint64_t)team, rank))
                return 1;
        CHECK(t->cma_calls == 0, "CMA calls in a team without CMA");
        numacoll_team_destroy(t);
    }
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- CMA with bad buffers: an error on the member whose buffer is bad ------------ */
static int body_fault(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (size_t)1 << 20;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(!numacoll_param_set("NUMACOLL_TRANSPORT", "cma"), "params");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    CHECK(t->cma, "CMA: %s", t->cma_why);
    /* n + one page, the page at `hole` inaccessible */
    unsigned char *m = mmap(NULL, n + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap");
    /* 1. The last reader's buffer ends in a hole (its own part, the end). */
    const int bad = p - 1;
    CHECK(!mprotect(m + n - page, page, rank == bad ? PROT_NONE : PROT_READ | PROT_WRITE), "mprotect");
    if (rank == 0)
        nc_pattern_fill(m, n, 9);
    int rc = numacoll_bcast(t, m, n, 0);
    CHECK(rc == (rank == bad ? NUMACOLL_ERR_FAULT : 0), "rank %d: reader hole: %d", rank, rc);
    CHECK(rank == bad || nc_pattern_check(m, n, 9) < 0, "rank %d: data", rank);
    CHECK(!mprotect(m, n + page, PROT_READ | PROT_WRITE), "mprotect");
    /* 1b. The same reader's hole is in the share the root writes (the first
     * page): the root's write faults on the reader's side, the root is fine. */
    CHECK(!mprotect(m, page, rank == bad ? PROT_NONE : PROT_READ | PROT_WRITE), "mprotect");
    if (rank == 0)
        nc_pattern_fill(m, n, 12);
    rc = numacoll_bcast(t, m, n, 0);
    CHECK(rc == (rank == bad ? NUMACOLL_ERR_FAULT : 0), "rank %d: reader hole in the share: %d",
          rank, rc);
    CHECK(rank == bad || nc_pattern_check(m, n, 12) < 0, "rank %d: data", rank);
    CHECK(!mprotect(m, n + page, PROT_READ | PROT_WRITE), "mprotect");
    /* 2. The root's buffer has a hole in its own share (the first page). */
    if (rank == 0) {
        nc_pattern_fill(m, n, 10);
        CHECK(!mprotect(m, page, PROT_NONE), "mprotect");
    }
    rc = numacoll_bcast(t, m, n, 0);
    CHECK(rc == NUMACOLL_ERR_FAULT, "rank %d: root hole: %d", rank, rc);
    CHECK(!mprotect(m, n + page, PROT_READ | PROT_WRITE), "mprotect");
    /* 3. The team still works. */
    if (one_call(t, m, n - 5, 1 % p, 11, rank))
        return 1;
    munmap(m, n + page);
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

/* ---- a member killed in the middle of CMA copies ------------------------------------- */
/* victim: the member that dies (0: the root, whose buffer the readers read;
 * 1: a reader, whose buffer the root writes its share into, cooperative
 * copies only); coop: NUMACOLL_CMA_COOP. */
typedef struct kill_arg {
    int victim, coop;
} kill_arg_t;

static void *killer(void *arg)
{
    (void)arg;
    usleep(300000);
    raise(SIGKILL);
    return NULL;
}

static int body_kill(int rank, int p, const char *name, void *arg)
{
    const kill_arg_t *ka = arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    const size_t n = (size_t)64 << 20;
    CHECK(numacoll_bootstrap_named(name, rank, p, &bs) == 0, "bootstrap");
    CHECK(!numacoll_param_set("NUMACOLL_TRANSPORT", "cma") &&
              !numacoll_param_set("NUMACOLL_CMA_COOP", ka->coop ? "1" : "0"),
          "params");
    CHECK(numacoll_team_create(bs, &t) == 0, "team");
    CHECK(t->cma, "CMA: %s", t->cma_why);
    unsigned char *buf = malloc(n);
    CHECK(buf, "malloc");
    memset(buf, 1, n);
    pthread_t th;
    if (rank == ka->victim)
        CHECK(!pthread_create(&th, NULL, killer, NULL), "thread");
    /* 64 MiB calls until the victim is gone (a few ms each): most of each
     * call is copies between the members' buffers, so it dies in one. */
    int rc = 0;
    const uint64_t cma0 = t->cma_calls;
    for (int i = 0; i < 100000 && !rc; i++)
        rc = numacoll_bcast(t, buf, n, 0);
    /* The first to see it says PEER_DEAD and breaks the team; a member that
     * was waiting meanwhile may see the broken team first. */
    CHECK(rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN,
          "rank %d: after member %d died: %d (%s)", rank, ka->victim, rc, numacoll_strerror(rc));
    CHECK(t->cma_calls > cma0, "rank %d: no broadcast went by CMA", rank);
    free(buf);
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "sizes";
    int rc = 1;
    if (!strcmp(mode, "sizes")) {
        static const cfg_t def[] = {{"kary:2", 64, 1, 8192, NULL}};
        run_t run = {def, 1, 1, 0};
        const int ps[] = {1, 2, 3, 4, 5, 8};
        rc = run_all(&run, ps, 6, 240);
    } else if (!strcmp(mode, "matrix") && argc > 2) {
        static const int sq[][2] = {{1, 1}, {2, 1}, {2, 2}, {8, 1}, {8, 2}, {8, 4},
                                    {64, 1}, {64, 2}, {64, 4}};
        static const size_t fs[] = {4096, 8192, 65536};
        cfg_t cfgs[27];
        int n = 0;
        for (size_t i = 0; i < NC_ARRAY_SIZE(sq); i++)
            for (size_t j = 0; j < NC_ARRAY_SIZE(fs); j++)
                cfgs[n++] = (cfg_t){argv[2], sq[i][0], sq[i][1], fs[j], NULL};
        run_t run = {cfgs, n, 0, 0};
        const int ps[] = {3, 4};
        rc = run_all(&run, ps, 2, 280);
    } else if (!strcmp(mode, "wrap")) {
        nc_test_seq0 = UINT32_MAX - 40; /* inherited by the children */
        static const cfg_t cfgs[] = {{"kary:2", 4, 2, 4096, NULL}, {"chain", 3, 3, 4096, NULL}};
        run_t run = {cfgs, 2, 0, 0};
        const int ps[] = {3, 5};
        rc = run_all(&run, ps, 2, 100);
    } else if (!strcmp(mode, "layouts")) {
        static const cfg_t cfgs[] = {{"kary:2", 8, 2, 8192, "paper"},
                                     {"knomial:2", 8, 2, 8192, "compact"}};
        run_t run = {cfgs, 2, 0, 0};
        const int ps[] = {2, 4};
        rc = run_all(&run, ps, 2, 100);
    } else if (!strcmp(mode, "cut")) {
        static const cfg_t c = {"kary:2", 8, 1, 65536, NULL};
        rc = set_cfg(&c) || numacoll_param_set("NUMACOLL_TRANSPORT", "shm") ||
             nc_fork_run(2, 60, body_cut, NULL, -1) || nc_fork_run(3, 60, body_cut, NULL, -1);
    } else if (!strcmp(mode, "nt") && argc > 2) {
        static int want;
        want = atoi(argv[2]);
        rc = numacoll_param_set("NUMACOLL_TRANSPORT", "shm") ||
             nc_fork_run(2, 60, body_nt, &want, -1);
    } else if (!strcmp(mode, "truncate")) {
        rc = nc_fork_run(4, 60, body_truncate, NULL, -1);
    } else if (!strcmp(mode, "ring")) {
        nc_test_seq0 = UINT32_MAX - 100; /* the ring's counters wrap too */
        rc = nc_fork_run(3, 100, body_ring, NULL, -1) || nc_fork_run(4, 100, body_ring, NULL, -1);
    } else if (!strcmp(mode, "roots")) {
        nc_test_seq0 = UINT32_MAX - 3; /* claims across the counters' wrap */
        rc = nc_fork_run(2, 60, body_roots, NULL, -1) || nc_fork_run(3, 60, body_roots, NULL, -1) ||
             nc_fork_run(4, 60, body_roots, NULL, -1);
    } else if (!strcmp(mode, "callback")) {
        rc = nc_fork_run(3, 60, body_callback, NULL, -1);
    } else if ((!strcmp(mode, "fault") || !strcmp(mode, "kill")) && !(cma_here = probe_cma_here())) {
        printf("SKIPPED: CMA is not allowed between processes here (numacoll-info --show copy "
               "says why)\n");
        return 77;
    } else if (!strcmp(mode, "transports")) {
        if (!(cma_here = probe_cma_here()))
            printf("CMA is not allowed here: checking that every team falls back\n");
        const int ps[] = {1, 2, 3, 4, 5, 6, 7, 8};
        rc = 0;
        for (size_t i = 0; i < NC_ARRAY_SIZE(ps) && !rc; i++)
            if (!(rc = nc_fork_run(ps[i], 240, body_transports, NULL, -1)))
                printf("p=%d: every transport passed\n", ps[i]);
    } else if (!strcmp(mode, "refused")) {
        int seccomp = argc > 2 && !strcmp(argv[2], "seccomp");
        rc = nc_fork_run(3, 60, body_refused, &seccomp, -1);
    } else if (!strcmp(mode, "fault")) {
        rc = nc_fork_run(2, 60, body_fault, NULL, -1) || nc_fork_run(3, 60, body_fault, NULL, -1);
    } else if (!strcmp(mode, "kill")) {
        /* the root, single copies; the root, cooperative copies; a reader
         * that the root writes into (cooperative) */
        static const kill_arg_t ka[] = {{0, 0}, {0, 1}, {1, 1}};
        rc = 0;
        for (size_t i = 0; i < NC_ARRAY_SIZE(ka) && !rc; i++)
            if (!(rc = nc_fork_run(3, 60, body_kill, (void *)&ka[i], ka[i].victim)))
                printf("member %d killed mid-copy (%s copies): the others got the error\n",
                       ka[i].victim, ka[i].coop ? "cooperative" : "single");
    } else {
        fprintf(stderr, "usage: test_bcast sizes|matrix TREE|wrap|layouts|truncate|ring|roots|callback|"
                        "transports|refused [seccomp]|fault|kill\n");
        return 2;
    }
    printf("%s\n", rc ? "FAILED" : "PASSED");
    return rc;
}
