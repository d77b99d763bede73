/* An MPI program that knows nothing of numacoll: broadcasts on MPI_COMM_WORLD
 * and on split communicators, checking every byte. Used with LD_PRELOAD. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half;
    /* Reversed order: the same ranks, renumbered. */
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &half);
    int n = 1 << 20;
    int *buf = malloc(sizeof(int) * (size_t)n);
    for (int it = 0; it < 20; it++) {
        MPI_Comm c = it % 2 ? half : MPI_COMM_WORLD;
        int cr, cs;
        MPI_Comm_rank(c, &cr);
        MPI_Comm_size(c, &cs);
        int root = it % cs, len = it * 1000 + 1;
        for (int i = 0; i < len; i++)
            buf[i] = cr == root ? it * 7 + i : -1;
        MPI_Bcast(buf, len, MPI_INT, root, c);
        for (int i = 0; i < len; i++)
            bad += buf[i] != it * 7 + i;
        MPI_Barrier(c);
    }
    int all;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("plain_bcast: %d wrong values\n", all);
    MPI_Comm_free(&half);
    free(buf);
    MPI_Finalize();
    return all != 0;
}
