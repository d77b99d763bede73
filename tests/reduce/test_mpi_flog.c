/*
 * MPI_LOGICAL in numacoll's reductions only where the MPI library's own
 * logical ops are numacoll's (flog_agrees() in src/mpi/nc_mpi_reduce.c).
 *
 *   test_mpi_flog agree|differ
 *
 * This program defines PMPI_Reduce_local itself (exported: it comes before
 * the MPI library's for libnumacoll-mpi's call) and forwards to the
 * library's. With "differ" it turns every 1 in a MPI_LOGICAL result into -1,
 * as a library built for .TRUE. = -1 would give (an MPICH for Intel
 * Fortran), so numacoll's probe must find that the library differs and leave
 * MPI_LOGICAL to it. Checked on every rank, for MPI_LAND, MPI_LOR and
 * MPI_LXOR on 1 and 1000 elements: the result (computed by the library's
 * collective, which does not go through PMPI_Reduce_local), and who took the
 * call (numacoll's counters): numacoll with "agree", the library with
 * "differ". MPI_INT with MPI_LOR stays numacoll's either way.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numacoll_mpi.h"

static int differ;

/* default visibility: the build hides symbols, and MPICH's mpi.h does not say */
__attribute__((visibility("default"))) int PMPI_Reduce_local(const void *in, void *inout,
                                                             int count, MPI_Datatype dt,
                                                             MPI_Op op)
{
    static int (*real)(const void *, void *, int, MPI_Datatype, MPI_Op);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Reduce_local");
    if (!real) {
        fprintf(stderr, "test_mpi_flog: no PMPI_Reduce_local after this program's\n");
        abort();
    }
    const int rc = real(in, inout, count, dt, op);
    int size = 0;
    if (rc == MPI_SUCCESS && differ && dt == MPI_LOGICAL && PMPI_Type_size(dt, &size) == 0 &&
        size == (int)sizeof(int))
        for (int i = 0; i < count; i++)
            if (((int *)inout)[i] == 1)
                ((int *)inout)[i] = -1;
    return rc;
}

static unsigned long long nc_allreduces(void)
{
    numacoll_mpi_stats_t s;
    return numacoll_mpi_stats(&s) == 0 ? s.calls_numacoll[NUMACOLL_MPI_ALLREDUCE] : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "agree") && strcmp(argv[1], "differ"))) {
        fprintf(stderr, "usage: test_mpi_flog agree|differ\n");
        return 2;
    }
    differ = !strcmp(argv[1], "differ");
    MPI_Init(&argc, &argv);
    int rank, p, size = 0, errors = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    PMPI_Type_size(MPI_LOGICAL, &size);
    if (size != (int)sizeof(int)) {
        if (rank == 0)
            printf("test_mpi_flog: MPI_LOGICAL is %d bytes, not an int: nothing to check\n",
                   size);
        MPI_Finalize();
        return 0;
    }
    static const MPI_Op ops[3] = {MPI_LAND, MPI_LOR, MPI_LXOR};
    static const char *names[3] = {"MPI_LAND", "MPI_LOR", "MPI_LXOR"};
    static const int counts[2] = {1, 1000};
    int in[1000], out[1000];
    for (int o = 0; o < 3; o++)
        for (int c = 0; c < 2; c++) {
            const int n = counts[c];
            for (int i = 0; i < n; i++) /* true on ranks i % (p + 1) > rank: all, some, none */
                in[i] = i % (p + 1) > rank;
            memset(out, 0x5a, sizeof out);
            const unsigned long long before = nc_allreduces();
            MPI_Allreduce(in, out, n, MPI_LOGICAL, ops[o], MPI_COMM_WORLD);
            const int took = nc_allreduces() != before;
            int bad = 0;
            for (int i = 0; i < n; i++) {
                const int trues = i % (p + 1) < p ? i % (p + 1) : p; /* ranks below i % (p+1) */
                const int want = o == 0 ? trues == p : o == 1 ? trues > 0 : trues % 2;
                bad += out[i] != want;
            }
            if (bad) {
                printf("FAIL rank %d: %s of %d MPI_LOGICAL: %d wrong elements\n", rank, names[o],
                       n, bad);
                errors++;
            }
            if (p > 1 && took == differ) {
                printf("FAIL rank %d: %s of %d MPI_LOGICAL went to %s, expected %s\n", rank,
                       names[o], n, took ? "numacoll" : "the MPI library",
                       differ ? "the MPI library" : "numacoll");
                errors++;
            }
        }
    /* an integer's logical op: numacoll's whatever the library's logicals are */
    const unsigned long long before = nc_allreduces();
    int x = rank == 0, y = -1;
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (y != 1 || (p > 1 && nc_allreduces() == before)) {
        printf("FAIL rank %d: MPI_INT MPI_LOR gave %d, numacoll's: %d\n", rank, y,
               nc_allreduces() != before);
        errors++;
    }
    int all = 0;
    PMPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi_flog %s p=%d: %s (%d failures)\n", argv[1], p,
               all ? "FAILED" : "PASSED", all);
    MPI_Finalize();
    return all != 0;
}
