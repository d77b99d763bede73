/*
 * A program of MPI sessions alone (MPI 4: no MPI_Init, no MPI_COMM_WORLD): a
 * communicator made from the mpi://WORLD process set goes through numacoll
 * like any other, every result checked; with NUMACOLL_STATS=1 each process
 * says its own calls at exit (there is no MPI_Finalize to sum them).
 * Built only against an MPI library of MPI 4 (MPICH 4; not Open MPI 4.1).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    MPI_Session s;
    MPI_Group g;
    MPI_Comm c;
    int errs = 0, r, p;
    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) != MPI_SUCCESS ||
        MPI_Group_from_session_pset(s, "mpi://WORLD", &g) != MPI_SUCCESS ||
        MPI_Comm_create_from_group(g, "numacoll.test.sessions", MPI_INFO_NULL,
                                   MPI_ERRORS_RETURN, &c) != MPI_SUCCESS) {
        fprintf(stderr, "test_mpi_sessions: could not make a communicator from a session\n");
        return 1;
    }
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &p);
    for (int it = 0; it < 20; it++) {
        const int n = 1 + it * 997;
        double *b = malloc((size_t)n * sizeof *b);
        int *all = malloc((size_t)p * sizeof *all);
        for (int k = 0; k < n; k++)
            b[k] = r + k;
        MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_DOUBLE, MPI_SUM, c);
        for (int k = 0; k < n; k++)
            if (b[k] != p * (p - 1) / 2.0 + (double)p * k) {
                fprintf(stderr, "rank %d: allreduce %d: element %d is %g\n", r, it, k, b[k]);
                errs++;
                break;
            }
        for (int k = 0; k < n; k++)
            b[k] = r == it % p ? k * 2.0 : -1;
        MPI_Bcast(b, n, MPI_DOUBLE, it % p, c);
        for (int k = 0; k < n; k++)
            if (b[k] != k * 2.0) {
                fprintf(stderr, "rank %d: bcast %d: element %d is %g\n", r, it, k, b[k]);
                errs++;
                break;
            }
        MPI_Allgather(&r, 1, MPI_INT, all, 1, MPI_INT, c);
        for (int k = 0; k < p; k++)
            if (all[k] != k) {
                fprintf(stderr, "rank %d: allgather %d: block %d is %d\n", r, it, k, all[k]);
                errs++;
                break;
            }
        MPI_Barrier(c);
        free(b);
        free(all);
    }
    int total = 0;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, c);
    if (r == 0)
        printf("test_mpi_sessions: %d ranks, %s\n", p, total ? "FAILED" : "every result right");
    MPI_Comm_free(&c);
    MPI_Group_free(&g);
    MPI_Session_finalize(&s);
    return total != 0;
}
