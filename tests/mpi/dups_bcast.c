/* An MPI program that knows nothing of numacoll: keeps N duplicates of
 * MPI_COMM_WORLD alive at once and broadcasts `bytes` on each of them
 * (every root in turn), checking every byte, then a barrier on each.
 *   dups_bcast [ndups=40] [bytes=100000] [rounds=2]
 * Used preloaded on a small /dev/shm (tests/mpi/check_small_shm.sh). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ndups = argc > 1 ? atoi(argv[1]) : 40;
    long bytes = argc > 2 ? atol(argv[2]) : 100000;
    int rounds = argc > 3 ? atoi(argv[3]) : 2;
    if (ndups < 1 || bytes < 0 || rounds < 1) {
        fprintf(stderr, "usage: dups_bcast [ndups>=1] [bytes>=0] [rounds>=1]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm *dups = malloc(sizeof *dups * (size_t)ndups);
    unsigned char *buf = malloc((size_t)bytes + 1);
    long bad = 0;
    for (int d = 0; d < ndups; d++)
        MPI_Comm_dup(MPI_COMM_WORLD, &dups[d]);
    for (int r = 0; r < rounds; r++)
        for (int d = 0; d < ndups; d++) {
            int root = (d + r) % size;
            for (long i = 0; i < bytes; i++)
                buf[i] = rank == root ? (unsigned char)(i * 31 + d * 7 + r) : 0xee;
            MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, dups[d]);
            for (long i = 0; i < bytes; i++)
                bad += buf[i] != (unsigned char)(i * 31 + d * 7 + r);
            MPI_Barrier(dups[d]);
        }
    long all;
    MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("dups_bcast: %d communicators x %ld bytes x %d rounds, %ld wrong bytes\n", ndups,
               bytes, rounds, all);
    for (int d = 0; d < ndups; d++)
        MPI_Comm_free(&dups[d]);
    free(dups);
    free(buf);
    MPI_Finalize();
    return all != 0;
}
