/*
 * Every collective numacoll implements, across real "hosts" (tests/multinode/
 * nc_hosts.sh: one launcher daemon per host, private /dev/shm, own hostname),
 * on communicators that cross hosts in every way, every byte checked:
 *   world, dup, reversed, odd/even ranks, one host only, one rank per host;
 *   bcast (every root, 0 B to 1 MiB, the packet boundary, a derived type on
 *   the receivers), barrier (ordering), reduce (every root) and allreduce,
 *   gather(v) / scatter(v) (every root), allgather(v), alltoall(v).
 * Then the accounting: numacoll handled every call (NUMACOLL_STATS' counters
 * through numacoll_mpi_stats), and each small broadcast across hosts cost a
 * leader exactly one PMPI call.
 *   test_multinode [quick|big]
 * "big": one broadcast of 2 GiB + 3 MiB (bytes past INT_MAX) on world.
 * Prints "test_multinode: hosts H ranks P: N failures" and exits non-zero on
 * any failure.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "numacoll_mpi.h"

static int wrank, wsize, failures, host_of_me, nhosts;
static int *host_of; /* world rank -> host index */

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            if (failures++ < 20) {                                        \
                fprintf(stderr, "test_multinode: rank %d: ", wrank);      \
                fprintf(stderr, __VA_ARGS__);                             \
                fputc('\n', stderr);                                      \
            }                                                             \
        }                                                                 \
    } while (0)

static unsigned char val(int src, int dst, size_t j, int salt)
{
    return (unsigned char)(src * 131 + dst * 17 + j * 7 + (j >> 8) + salt * 29 + 1);
}

/* The first wrong byte of buf against val(src, dst, off + j, salt), or -1. */
static long first_bad(const unsigned char *buf, size_t n, int src, int dst, size_t off, int salt)
{
    for (size_t j = 0; j < n; j++)
        if (buf[j] != val(src, dst, off + j, salt))
            return (long)j;
    return -1;
}

typedef struct shape {
    const char *name;
    MPI_Comm comm;
    int rank, size;
} shape_t;

static void bcast_test(const shape_t *s)
{
    static const size_t sizes[] = {0, 1, 100, 495, 496, 497, 4099, 70000, (1 << 20) + 5};
    const size_t nsz = sizeof sizes / sizeof *sizes;
    unsigned char *buf = malloc((1 << 20) + 64);
    for (int root = 0; root < s->size; root++)
        for (size_t k = 0; k < nsz; k++) {
            size_t n = sizes[k];
            for (size_t j = 0; j < n; j++)
                buf[j] = s->rank == root ? val(root, 0, j, (int)k) : 0xEE;
            buf[n] = 0x5A;
            int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, root, s->comm);
            long bad = first_bad(buf, n, root, 0, 0, (int)k);
            CHECK(rc == MPI_SUCCESS && bad < 0 && buf[n] == 0x5A,
                  "%s bcast root %d %zu bytes: rc %d, first wrong byte %ld, guard %#x", s->name,
                  root, n, rc, bad, buf[n]);
        }
    /* Receivers use a vector of ints with holes, the root plain ints: one signature. */
    enum { N = 3000 };
    int *dense = malloc(sizeof(int) * N), *holes = malloc(sizeof(int) * 2 * N);
    MPI_Datatype vec;
    MPI_Type_vector(N, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    for (int root = 0; root < s->size; root++) {
        if (s->rank == root) {
            for (int i = 0; i < N; i++)
                dense[i] = root * 100000 + i;
            MPI_Bcast(dense, N, MPI_INT, root, s->comm);
        } else {
            for (int i = 0; i < 2 * N; i++)
                holes[i] = -7;
            MPI_Bcast(holes, 1, vec, root, s->comm);
            int bad = 0;
            for (int i = 0; i < N; i++)
                bad += holes[2 * i] != root * 100000 + i || holes[2 * i + 1] != -7;
            CHECK(!bad, "%s bcast vector root %d: %d wrong", s->name, root, bad);
        }
    }
    MPI_Type_free(&vec);
    free(dense), free(holes), free(buf);
}

/* Barrier orders: the last rank arrives 0.1 s late, and nobody leaves before
 * it arrived. Times are compared on one clock: the hosts of tests/multinode
 * share this machine's CLOCK_MONOTONIC (MPI_Wtime need not be global: Open
 * MPI's starts at each process's MPI_Init); the late rank's arrival time is
 * broadcast afterwards. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void barrier_test(const shape_t *s)
{
    MPI_Barrier(s->comm);
    double arrive = 0;
    if (s->rank == s->size - 1) {
        usleep(100000);
        arrive = now();
    }
    MPI_Barrier(s->comm);
    double left = now();
    MPI_Bcast(&arrive, 1, MPI_DOUBLE, s->size - 1, s->comm);
    CHECK(left >= arrive, "%s barrier: left %.6f s before the late rank arrived", s->name,
          arrive - left);
}

static void reduce_test(const shape_t *s)
{
    static const int counts[] = {1, 7, 1000, 100003};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        int n = counts[k];
        int64_t *in = malloc(sizeof(int64_t) * (size_t)n), *out = malloc(sizeof(int64_t) * (size_t)n);
        double *din = malloc(sizeof(double) * (size_t)n), *dout = malloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) {
            in[i] = (int64_t)(s->rank + 1) * (i + 3);
            din[i] = (s->rank + 1) * 0.5 + i;
        }
        const int64_t ranks = (int64_t)s->size * (s->size + 1) / 2;
        MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_SUM, s->comm);
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += out[i] != ranks * (i + 3);
        MPI_Allreduce(din, dout, n, MPI_DOUBLE, MPI_MAX, s->comm);
        for (int i = 0; i < n; i++)
            bad += dout[i] != s->size * 0.5 + i;
        CHECK(!bad, "%s allreduce count %d: %d wrong", s->name, n, bad);
        for (int root = 0; root < s->size; root++) {
            memset(out, 0, sizeof(int64_t) * (size_t)n);
            MPI_Reduce(in, out, n, MPI_INT64_T, MPI_SUM, root, s->comm);
            bad = 0;
            if (s->rank == root)
                for (int i = 0; i < n; i++)
                    bad += out[i] != ranks * (i + 3);
            CHECK(!bad, "%s reduce root %d count %d: %d wrong", s->name, root, n, bad);
        }
        free(in), free(out), free(din), free(dout);
    }
}

/* Block of rank r in the v-forms: uneven, zero for some ranks. */
static int vcount(int r, int b)
{
    return r % 3 == 1 ? 0 : b + r * 5;
}

static void gather_family_test(const shape_t *s)
{
    static const int blocks[] = {1, 100, 5000};
    const int p = s->size, me = s->rank;
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
        const int b = blocks[k], salt = (int)k + 10;
        const size_t cap = (size_t)(b + 5 * p) * p + 8; /* any block or all of them */
        unsigned char *sb = malloc(cap), *rb = malloc(cap);
        int *cnt = malloc(sizeof(int) * p), *dsp = malloc(sizeof(int) * p);
        unsigned tot = 0;
        /* v layout, blocks in reverse order of ranks (non-monotonic displacements) */
        for (int r = p - 1; r >= 0; r--) {
            cnt[r] = vcount(r, b);
            dsp[r] = (int)tot;
            tot += (unsigned)cnt[r];
        }
        unsigned char *vb = malloc((size_t)tot + 1);

        /* allgather */
        for (int j = 0; j < b; j++)
            sb[j] = val(me, 0, (size_t)j, salt);
        memset(rb, 0xEE, cap);
        MPI_Allgather(sb, b, MPI_BYTE, rb, b, MPI_BYTE, s->comm);
        for (int r = 0; r < p; r++)
            CHECK(first_bad(rb + (size_t)r * b, (size_t)b, r, 0, 0, salt) < 0,
                  "%s allgather block %d: block of rank %d wrong", s->name, b, r);
        /* allgatherv */
        for (int j = 0; j < cnt[me]; j++)
            sb[j] = val(me, 1, (size_t)j, salt);
        memset(vb, 0xEE, (size_t)tot);
        MPI_Allgatherv(sb, cnt[me], MPI_BYTE, vb, cnt, dsp, MPI_BYTE, s->comm);
        for (int r = 0; r < p; r++)
            CHECK(first_bad(vb + dsp[r], (size_t)cnt[r], r, 1, 0, salt) < 0,
                  "%s allgatherv block %d: block of rank %d wrong", s->name, b, r);
        for (int root = 0; root < p; root++) {
            /* gather (the bytes serve gatherv too: cnt[me] may be more than b) */
            for (int j = 0; j < b || j < cnt[me]; j++)
                sb[j] = val(me, root, (size_t)j, salt);
            memset(rb, 0xEE, cap);
            MPI_Gather(sb, b, MPI_BYTE, rb, b, MPI_BYTE, root, s->comm);
            if (me == root)
                for (int r = 0; r < p; r++)
                    CHECK(first_bad(rb + (size_t)r * b, (size_t)b, r, root, 0, salt) < 0,
                          "%s gather root %d block %d: block of rank %d wrong", s->name, root, b,
                          r);
            /* gatherv */
            memset(vb, 0xEE, (size_t)tot);
            MPI_Gatherv(sb, cnt[me], MPI_BYTE, vb, cnt, dsp, MPI_BYTE, root, s->comm);
            if (me == root)
                for (int r = 0; r < p; r++)
                    CHECK(first_bad(vb + dsp[r], (size_t)cnt[r], r, root, 0, salt) < 0,
                          "%s gatherv root %d block %d: block of rank %d wrong", s->name, root,
                          b, r);
            /* scatter */
            if (me == root)
                for (int r = 0; r < p; r++)
                    for (int j = 0; j < b; j++)
                        rb[(size_t)r * b + j] = val(root, r, (size_t)j, salt);
            memset(sb, 0xEE, (size_t)b);
            MPI_Scatter(rb, b, MPI_BYTE, sb, b, MPI_BYTE, root, s->comm);
            CHECK(first_bad(sb, (size_t)b, root, me, 0, salt) < 0,
                  "%s scatter root %d block %d wrong", s->name, root, b);
            /* scatterv */
            if (me == root)
                for (int r = 0; r < p; r++)
                    for (int j = 0; j < cnt[r]; j++)
                        vb[dsp[r] + j] = val(root, r + 1, (size_t)j, salt);
            memset(sb, 0xEE, cap);
            MPI_Scatterv(vb, cnt, dsp, MPI_BYTE, sb, cnt[me], MPI_BYTE, root, s->comm);
            CHECK(first_bad(sb, (size_t)cnt[me], root, me + 1, 0, salt) < 0 &&
                      sb[cnt[me]] == 0xEE,
                  "%s scatterv root %d block %d wrong", s->name, root, b);
        }
        /* alltoall */
        for (int r = 0; r < p; r++)
            for (int j = 0; j < b; j++)
                sb[(size_t)r * b + j] = val(me, r, (size_t)j, salt);
        memset(rb, 0xEE, cap);
        MPI_Alltoall(sb, b, MPI_BYTE, rb, b, MPI_BYTE, s->comm);
        for (int r = 0; r < p; r++)
            CHECK(first_bad(rb + (size_t)r * b, (size_t)b, r, me, 0, salt) < 0,
                  "%s alltoall block %d: block from rank %d wrong", s->name, b, r);
        /* alltoallv: rank me sends vcount(dst) bytes to dst (all blocks fit b*p) */
        int *sc = malloc(sizeof(int) * p), *sd = malloc(sizeof(int) * p);
        int *rc = malloc(sizeof(int) * p), *rd = malloc(sizeof(int) * p);
        int so = 0, ro = 0;
        for (int r = 0; r < p; r++) {
            sc[r] = vcount(r, b) % (b + 1);
            sd[r] = so;
            so += sc[r];
            rc[r] = vcount(me, b) % (b + 1);
            rd[r] = ro;
            ro += rc[r];
        }
        unsigned char *as = malloc((size_t)so + 1), *ar = malloc((size_t)ro + 1);
        for (int r = 0; r < p; r++)
            for (int j = 0; j < sc[r]; j++)
                as[sd[r] + j] = val(me, r, (size_t)j, salt + 1);
        memset(ar, 0xEE, (size_t)ro);
        MPI_Alltoallv(as, sc, sd, MPI_BYTE, ar, rc, rd, MPI_BYTE, s->comm);
        for (int r = 0; r < p; r++)
            CHECK(first_bad(ar + rd[r], (size_t)rc[r], r, me, 0, salt + 1) < 0,
                  "%s alltoallv block %d: block from rank %d wrong", s->name, b, r);
        free(sc), free(sd), free(rc), free(rd), free(as), free(ar);
        free(sb), free(rb), free(vb), free(cnt), free(dsp);
    }
}

/* Hosts a communicator spans, and whether this rank is its lowest on my host
 * (numacoll's node leader). */
static int hosts_of(const shape_t *s, int *leader)
{
    int *h = malloc(sizeof(int) * s->size);
    MPI_Allgather(&host_of_me, 1, MPI_INT, h, 1, MPI_INT, s->comm);
    int n = 0;
    *leader = 1;
    for (int r = 0; r < s->size; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= h[q] == h[r];
        n += !seen;
        if (h[r] == host_of_me && r < s->rank)
            *leader = 0;
    }
    free(h);
    return n;
}

/* Every call went through numacoll, and a small broadcast across hosts costs
 * a leader one PMPI call on the leaders' communicator. */
static void accounting_test(const shape_t *s)
{
    int leader, hosts = hosts_of(s, &leader);
    CHECK(s->size == 1 || numacoll_mpi_comm_active(s->comm) == 1,
          "%s: numacoll is not active on it", s->name);
    if (s->size == 1)
        return; /* MPI_COMM_SELF-like: the MPI library's */
    numacoll_mpi_stats_t a, b;
    numacoll_mpi_stats(&a);
    enum { CALLS = 20 };
    for (int i = 0; i < CALLS; i++) {
        int64_t x = s->rank == i % s->size ? 1000 + i : -1;
        MPI_Bcast(&x, 1, MPI_INT64_T, i % s->size, s->comm);
        CHECK(x == 1000 + i, "%s small bcast %d: got %lld", s->name, i, (long long)x);
    }
    numacoll_mpi_stats(&b);
    const int B = NUMACOLL_MPI_BCAST;
    CHECK(b.calls_numacoll[B] - a.calls_numacoll[B] == CALLS && b.calls_pmpi[B] == a.calls_pmpi[B],
          "%s: %llu of %d broadcasts went through numacoll, %llu to PMPI", s->name,
          b.calls_numacoll[B] - a.calls_numacoll[B], CALLS, b.calls_pmpi[B] - a.calls_pmpi[B]);
    unsigned long long lc = b.calls_leader[B] - a.calls_leader[B];
    unsigned long long lp = b.pmpi_leader[B] - a.pmpi_leader[B];
    if (hosts > 1 && leader)
        CHECK(lc == CALLS && lp == CALLS,
              "%s (%d hosts, a leader): %llu leader calls with %llu PMPI calls for %d small "
              "broadcasts (want %d and %d)",
              s->name, hosts, lc, lp, CALLS, CALLS, CALLS);
    else
        CHECK(lc == 0 && lp == 0, "%s (%d hosts, not a leader): %llu leader calls, %llu PMPI",
              s->name, hosts, lc, lp);
}

static void run(shape_t *s, int quick)
{
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    accounting_test(s);
    bcast_test(s);
    barrier_test(s);
    reduce_test(s);
    if (!quick)
        gather_family_test(s);
    int leader, hosts = hosts_of(s, &leader);
    if (s->rank == 0)
        printf("test_multinode: %s: %d ranks on %d hosts done\n", s->name, s->size, hosts);
}

static void big_test(void)
{
    /* 2 GiB + 3 MiB: 2051 elements of 1 MiB. */
    const size_t mib = 1 << 20, n = 2051;
    MPI_Datatype t;
    MPI_Type_contiguous((int)mib, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    unsigned char *buf = malloc(n * mib);
    CHECK(buf != NULL, "big: no memory");
    if (!buf)
        return;
    const int root = wsize - 1;
    for (size_t j = 0; j < n * mib; j += 4096)
        buf[j] = wrank == root ? (unsigned char)(j / 4096 * 7 + 3) : 0;
    buf[n * mib - 1] = wrank == root ? 0x77 : 0;
    int rc = MPI_Bcast(buf, (int)n, t, root, MPI_COMM_WORLD);
    long bad = 0;
    for (size_t j = 0; j < n * mib; j += 4096)
        bad += buf[j] != (unsigned char)(j / 4096 * 7 + 3);
    CHECK(rc == MPI_SUCCESS && !bad && buf[n * mib - 1] == 0x77,
          "big bcast (%zu bytes): rc %d, %ld wrong pages, last byte %#x", n * mib, rc, bad,
          buf[n * mib - 1]);
    numacoll_mpi_stats_t st;
    numacoll_mpi_stats(&st);
    CHECK(st.calls_numacoll[NUMACOLL_MPI_BCAST] >= 1, "big bcast did not go through numacoll");
    if (wrank == 0)
        printf("test_multinode: big: %zu bytes broadcast\n", n * mib);
    MPI_Type_free(&t);
    free(buf);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "full";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    /* Hosts by name, numbered in order of first appearance. */
    char name[MPI_MAX_PROCESSOR_NAME] = {0}, *all = calloc((size_t)wsize, sizeof name);
    int len;
    MPI_Get_processor_name(name, &len);
    MPI_Allgather(name, sizeof name, MPI_CHAR, all, sizeof name, MPI_CHAR, MPI_COMM_WORLD);
    host_of = malloc(sizeof(int) * wsize);
    for (int r = 0; r < wsize; r++) {
        host_of[r] = nhosts;
        for (int q = 0; q < r; q++)
            if (!strcmp(all + (size_t)q * sizeof name, all + (size_t)r * sizeof name)) {
                host_of[r] = host_of[q];
                break;
            }
        nhosts += host_of[r] == nhosts;
    }
    host_of_me = host_of[wrank];
    printf("test_multinode: rank %d on %s\n", wrank, name);
    fflush(stdout);

    if (!strcmp(mode, "big")) {
        big_test();
    } else {
        const int quick = !strcmp(mode, "quick");
        int local = 0; /* my index among my host's ranks */
        for (int q = 0; q < wrank; q++)
            local += host_of[q] == host_of_me;
        shape_t shapes[6] = {{"world", MPI_COMM_WORLD, 0, 0}};
        int n = 1;
        shapes[n].name = "dup";
        MPI_Comm_dup(MPI_COMM_WORLD, &shapes[n++].comm);
        shapes[n].name = "reversed";
        MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &shapes[n++].comm);
        shapes[n].name = "odd-even";
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &shapes[n++].comm);
        shapes[n].name = "one-host";
        MPI_Comm_split(MPI_COMM_WORLD, host_of_me, wrank, &shapes[n++].comm);
        shapes[n].name = "one-per-host";
        MPI_Comm_split(MPI_COMM_WORLD, local, wrank, &shapes[n++].comm);
        for (int i = 0; i < n; i++)
            run(&shapes[i], quick && i > 0 && i != 5);
        for (int i = 1; i < n; i++)
            MPI_Comm_free(&shapes[i].comm);
    }
    int total;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("test_multinode: hosts %d ranks %d: %d failures\n", nhosts, wsize, total);
    free(all), free(host_of);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return total != 0;
}
