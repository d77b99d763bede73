/*
 * MPI_Bcast through numacoll: communicator shapes x every root x sizes x
 * datatypes, mismatched (count, datatype) pairs with one signature, and
 * MPI_ERR_TRUNCATE on a size mismatch. Every received byte is checked, and the
 * stats must show numacoll (not PMPI) handled the calls.
 *
 * Usage: test_mpi_bcast [quick]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/nc_team.h"
#include "numacoll_mpi.h"

static int failures;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "[rank %d] FAIL %s:%d: ", wrank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

static int wrank, wsize;
static unsigned long long total_nc, total_pm;

static unsigned char pat(uint64_t call, size_t i)
{
    uint64_t x = (call + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0x100000001b3ull);
    return (unsigned char)(x >> 29 ^ x);
}

/* Contiguous bytes, every size, every root. */
static void bytes_test(MPI_Comm comm, const char *shape, int quick)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const size_t b = 64 * 8192;
    size_t sizes[] = {0, 1, 7, 8191, 8192, 8193, b - 1, b, b + 1, 3 * b + 17, 4u << 20};
    int nsizes = quick ? 9 : 11;
    unsigned char *buf = malloc((4u << 20) + 64);
    /* The same sequence on every rank of comm, whatever other shapes did. */
    uint64_t call = (uint64_t)shape[0] * 100000 + (uint64_t)strlen(shape) * 1000;
    for (int root = 0; root < size; root++)
        for (int i = 0; i < nsizes; i++) {
            size_t n = sizes[i];
            call++;
            for (size_t k = 0; k < n + 64; k++)
                buf[k] = rank == root && k < n ? pat(call, k) : 0xEE;
            int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm);
            CHECK(rc == MPI_SUCCESS, "%s root %d n %zu rc %d", shape, root, n, rc);
            for (size_t k = 0; k < n; k++)
                if (buf[k] != pat(call, k)) {
                    CHECK(0, "%s root %d n %zu: byte %zu wrong", shape, root, n, k);
                    break;
                }
            for (size_t k = n; k < n + 64; k++)
                if (buf[k] != 0xEE) {
                    CHECK(0, "%s root %d n %zu: wrote past the end", shape, root, n);
                    break;
                }
        }
    free(buf);
}

/* Typed data: the root sends n doubles contiguously; the others receive them
 * through a derived type with holes, and check the holes are untouched. */
static void dtype_test(MPI_Comm comm, const char *shape)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    enum { N = 20000 };
    double *src = malloc(N * sizeof *src), *dst = malloc(3 * N * sizeof *dst);
    MPI_Datatype vec, idx, st, rs, sthole;
    MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &vec);            /* every other double */
    MPI_Type_commit(&vec);
    int blens[3] = {1, 2, 3}, displs[3] = {0, 3, 7};
    MPI_Type_indexed(3, blens, displs, MPI_DOUBLE, &idx);   /* 6 doubles from 10 */
    MPI_Type_commit(&idx);
    /* struct {double a; int pad; int b;} with only a and b in the type: holes */
    struct s { double a; int pad; int b; };
    int sbl[2] = {1, 1};
    MPI_Aint sdis[2] = {offsetof(struct s, a), offsetof(struct s, b)};
    MPI_Datatype sty[2] = {MPI_DOUBLE, MPI_INT};
    MPI_Type_create_struct(2, sbl, sdis, sty, &st);
    MPI_Type_create_resized(st, 0, sizeof(struct s), &sthole);
    MPI_Type_commit(&sthole);
    MPI_Type_create_resized(MPI_DOUBLE, 0, 3 * sizeof(double), &rs); /* stride 3 by extent */
    MPI_Type_commit(&rs);
    /* Gap-free but permuted: {int at 4, int at 0}; size == true extent, yet
     * its bytes go out second int first. */
    int pbl[2] = {1, 1};
    MPI_Aint pdis[2] = {sizeof(int), 0};
    MPI_Datatype pty[2] = {MPI_INT, MPI_INT}, perm;
    MPI_Type_create_struct(2, pbl, pdis, pty, &perm);
    MPI_Type_commit(&perm);

    for (int root = 0; root < size; root++) {
        /* vector: N doubles as 1 vector at receivers */
        for (int i = 0; i < N; i++)
            src[i] = root * 1e6 + i;
        for (int i = 0; i < 2 * N; i++)
            dst[i] = -1;
        if (rank == root)
            MPI_Bcast(src, N, MPI_DOUBLE, root, comm);
        else {
            MPI_Bcast(dst, 1, vec, root, comm);
            int bad = 0;
            for (int i = 0; i < N && !bad; i++)
                bad = dst[2 * i] != src[i] || (i < N - 1 && dst[2 * i + 1] != -1);
            CHECK(!bad, "%s vector root %d", shape, root);
        }
        /* indexed: count 1000 of idx (6 doubles each) vs 6000 contiguous */
        int ni = 1000;
        if (rank == root)
            MPI_Bcast(src, 6 * ni, MPI_DOUBLE, root, comm);
        else {
            for (int i = 0; i < 10 * ni; i++)
                dst[i] = -1;
            /* idx extent is 10 doubles */
            MPI_Bcast(dst, ni, idx, root, comm);
            int bad = 0, k = 0;
            for (int e = 0; e < ni && !bad; e++)
                for (int j = 0; j < 10; j++) {
                    int in = (j == 0) || (j == 3 || j == 4) || (j >= 7 && j <= 9);
                    double v = dst[e * 10 + j];
                    if (in ? v != src[k++] : v != -1)
                        bad = 1;
                }
            CHECK(!bad, "%s indexed root %d", shape, root);
        }
        /* struct with holes on both sides */
        struct s *a = malloc(4000 * sizeof *a);
        for (int i = 0; i < 4000; i++) {
            a[i].a = rank == root ? i * 0.5 + root : 0;
            a[i].b = rank == root ? i * 3 + root : 0;
            a[i].pad = 12345;
        }
        MPI_Bcast(a, 4000, sthole, root, comm);
        int bad = 0;
        for (int i = 0; i < 4000 && !bad; i++)
            bad = a[i].a != i * 0.5 + root || a[i].b != i * 3 + root || a[i].pad != 12345;
        CHECK(!bad, "%s struct root %d", shape, root);
        free(a);
        /* permuted: the root sends 3000 pairs through perm, the others take
         * 6000 ints, each pair swapped */
        int *pi = malloc(6000 * sizeof *pi);
        for (int i = 0; i < 6000; i++)
            pi[i] = rank == root ? i * 7 + root : -1;
        if (rank == root)
            MPI_Bcast(pi, 3000, perm, root, comm);
        else {
            MPI_Bcast(pi, 6000, MPI_INT, root, comm);
            int b3 = 0;
            for (int i = 0; i < 6000 && !b3; i++)
                b3 = pi[i] != (i ^ 1) * 7 + root;
            CHECK(!b3, "%s permuted struct root %d", shape, root);
        }
        free(pi);
        /* resized: 5000 doubles at stride 3 */
        if (rank == root)
            MPI_Bcast(src, 5000, MPI_DOUBLE, root, comm);
        else {
            for (int i = 0; i < 15000; i++)
                dst[i] = -1;
            MPI_Bcast(dst, 5000, rs, root, comm);
            int b2 = 0;
            for (int i = 0; i < 5000 && !b2; i++)
                b2 = dst[3 * i] != src[i] || dst[3 * i + 1] != -1;
            CHECK(!b2, "%s resized root %d", shape, root);
        }
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&idx);
    MPI_Type_free(&st);
    MPI_Type_free(&sthole);
    MPI_Type_free(&rs);
    MPI_Type_free(&perm);
    free(src);
    free(dst);
}

/* A non-root whose size differs gets MPI_ERR_TRUNCATE (errors return), the others succeed. */
static void truncate_test(MPI_Comm comm, const char *shape)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2)
        return;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int root = size - 1, odd = 0;
    char *buf = calloc(200000, 1);
    int n = rank == odd ? 50000 : 100000;
    if (rank == root)
        memset(buf, 7, 100000);
    int rc = MPI_Bcast(buf, n, MPI_CHAR, root, comm);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (rank == odd)
        CHECK(cls == MPI_ERR_TRUNCATE, "%s: rank %d expected MPI_ERR_TRUNCATE, got %d", shape, rank, rc);
    else
        CHECK(rc == MPI_SUCCESS, "%s: rank %d rc %d", shape, rank, rc);
    /* Still usable afterwards. */
    if (rank == root)
        memset(buf, 9, 1000);
    CHECK(MPI_Bcast(buf, 1000, MPI_CHAR, root, comm) == MPI_SUCCESS && buf[999] == 9, "%s after", shape);
    free(buf);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
}

/* Ranks that disagree on the root (errors return), where numacoll alone
 * takes the call (one node): MPI_ERR_ROOT, never a hang.
 *   1. ranks 0 and 1 both pass themselves as the root: exactly one of them
 *      gets MPI_ERR_ROOT and keeps its buffer;
 *   2. every rank passes the next rank: nobody is the root, everyone gets
 *      MPI_ERR_ROOT.
 * The communicator works afterwards. */
static void root_test(MPI_Comm comm, const char *shape)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    numacoll_team_info_t ti;
    numacoll_team_t *team = numacoll_mpi_comm_team(comm);
    if (size < 2 || !team || numacoll_team_info(team, &ti) || ti.size != size)
        return;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    static int buf[2000];
    for (int n = 10; n <= 2000; n += 1990) { /* inline, and through the queue (8000 B) */
        for (int k = 0; k < n; k++)
            buf[k] = rank * 1000 + k;
        /* Small calls claim without a locked instruction, so two roots that
         * arrive together may both go on: rank 1 comes 100 ms later. */
        if (rank == 1 && n == 10)
            usleep(100000);
        int rc = MPI_Bcast(buf, n, MPI_INT, rank < 2 ? rank : 0, comm), cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS)
            MPI_Error_class(rc, &cls);
        int lost = rank < 2 && cls == MPI_ERR_ROOT, nlost = 0;
        CHECK(rc == MPI_SUCCESS || cls == MPI_ERR_ROOT, "%s: two roots: rank %d got %d", shape, rank, rc);
        MPI_Allreduce(&lost, &nlost, 1, MPI_INT, MPI_SUM, comm);
        CHECK(nlost == 1, "%s: two roots, n=%d: %d of ranks 0 and 1 got MPI_ERR_ROOT", shape, n, nlost);
        if (rank < 2)
            for (int k = 0; k < n; k++)
                CHECK(buf[k] == rank * 1000 + k, "%s: two roots: rank %d's buffer changed", shape, rank);
        rc = MPI_Bcast(buf, n, MPI_INT, (rank + 1) % size, comm);
        cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS)
            MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_ROOT, "%s: no root, n=%d: rank %d got %d", shape, n, rank, rc);
    }
    if (rank == 0)
        buf[0] = 4242;
    CHECK(MPI_Bcast(buf, 1, MPI_INT, 0, comm) == MPI_SUCCESS && buf[0] == 4242, "%s after", shape);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
}

/* NUMACOLL_STATS says which transport ran: one more broadcast of 1 MiB is
 * counted by CMA exactly when the team moved it by CMA (its own count). */
static void transport_said(MPI_Comm comm, const char *shape)
{
    /* every rank calls; a rank without a team (alone on its node, or the
     * communicator the MPI library's) checks the bytes only */
    numacoll_team_t *team = numacoll_mpi_comm_team(comm);
    const size_t n = 1 << 20;
    char *buf = malloc(n);
    int me;
    MPI_Comm_rank(comm, &me);
    memset(buf, me == 0 ? 'r' : '?', n);
    numacoll_mpi_stats_t a, b;
    numacoll_mpi_stats(&a);
    const uint64_t cma0 = team ? team->cma_calls : 0;
    CHECK(MPI_Bcast(buf, (int)n, MPI_BYTE, 0, comm) == MPI_SUCCESS, "%s: 1 MiB", shape);
    numacoll_mpi_stats(&b);
    const unsigned long long cm = b.calls_cma[NUMACOLL_MPI_BCAST] - a.calls_cma[NUMACOLL_MPI_BCAST];
    const int moved = team && team->cma_calls != cma0;
    CHECK(cm == (unsigned long long)moved, "%s: the team %s the 1 MiB broadcast by CMA, "
          "NUMACOLL_STATS counts %llu calls by CMA", shape, moved ? "moved" : "did not move", cm);
    CHECK(buf[0] == 'r' && buf[n - 1] == 'r', "%s: 1 MiB: wrong bytes", shape);
    free(buf);
}

static void run_shape(MPI_Comm comm, const char *shape, int quick)
{
    if (comm == MPI_COMM_NULL)
        return;
    numacoll_mpi_stats_t a, b;
    numacoll_mpi_stats(&a);
    bytes_test(comm, shape, quick);
    dtype_test(comm, shape);
    truncate_test(comm, shape);
    root_test(comm, shape);
    int size;
    MPI_Comm_size(comm, &size);
    CHECK(numacoll_mpi_comm_active(comm) == (size > 1), "%s: active=%d with size %d", shape,
          numacoll_mpi_comm_active(comm), size);
    /* Communicators of more than one rank: numacoll's alone; of one: PMPI's. */
    numacoll_mpi_stats(&b);
    unsigned long long nc = b.calls_numacoll[NUMACOLL_MPI_BCAST] - a.calls_numacoll[NUMACOLL_MPI_BCAST];
    unsigned long long pm = b.calls_pmpi[NUMACOLL_MPI_BCAST] - a.calls_pmpi[NUMACOLL_MPI_BCAST];
    /* NUMACOLL_COMM_MIN_CALLS=k: the first k calls of a communicator are PMPI's. */
    const char *mc = getenv("NUMACOLL_COMM_MIN_CALLS");
    unsigned long long first = mc ? strtoull(mc, NULL, 10) : 0;
    CHECK(size > 1 ? nc > 0 && pm == first : nc == 0 && pm > 0, "%s (size %d): numacoll %llu calls, pmpi %llu",
          shape, size, nc, pm);
    total_nc += nc;
    total_pm += pm;
    transport_said(comm, shape);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    run_shape(MPI_COMM_WORLD, "world", quick);
    MPI_Comm dup, oddeven, rev, single;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    run_shape(dup, "dup", quick);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &oddeven);
    run_shape(oddeven, "split-odd-even", quick);
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev);
    run_shape(rev, "reversed", quick);
    MPI_Comm_split(MPI_COMM_WORLD, wrank, 0, &single);
    run_shape(single, "single", quick);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&oddeven);
    MPI_Comm_free(&rev);
    MPI_Comm_free(&single);

    int all;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("test_mpi_bcast p=%d: %s (%d failures; numacoll %llu calls, pmpi %llu on rank 0)\n",
               wsize, all ? "FAILED" : "PASSED", all, total_nc, total_pm);
    MPI_Finalize();
    return all ? 1 : 0;
}
