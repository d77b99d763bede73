/* A program for check_kill.sh to kill -9 (or stop) at random moments. It
 * knows nothing of numacoll (used with LD_PRELOAD) and loops in one kind of
 * call, checking every byte, until rank 0 says stop or SECONDS have passed:
 *
 *   kill_target MODE SECONDS
 *     setup    MPI_Comm_dup + a 4 KiB MPI_Bcast + MPI_Comm_free: most of the
 *              time goes to creating and destroying numacoll teams
 *     bcast    32 MiB MPI_Bcast, the root moving round the ranks
 *     barrier  MPI_Barrier (a 64-byte MPI_Bcast every 1000 carries the flag)
 *
 * The stop flag travels in the first word of a broadcast, so every rank
 * leaves the loop after the same call. Each rank prints "kill_target: rank R
 * pid P ready" once MPI_Init returned, "kill_target: rank R looping" after
 * its first call (set-up done); rank 0 prints "kill_target: N calls,
 * 0 wrong bytes" at the end (or the count of wrong bytes, exit 1). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long wrong;

static void fill(unsigned char *b, size_t n, long it)
{
    for (size_t i = 8; i < n; i++)
        b[i] = (unsigned char)(i * 31 + (size_t)it * 7);
}

static void check(const unsigned char *b, size_t n, long it)
{
    for (size_t i = 8; i < n; i++)
        wrong += b[i] != (unsigned char)(i * 31 + (size_t)it * 7);
}

/* One checked broadcast of n bytes whose first word is the stop flag. */
static int flag_bcast(unsigned char *buf, size_t n, long it, int root, MPI_Comm comm, double t0,
                      double secs)
{
    int r;
    MPI_Comm_rank(comm, &r);
    if (r == root) {
        int64_t stop = MPI_Wtime() - t0 > secs;
        memcpy(buf, &stop, 8);
        fill(buf, n, it);
    } else {
        memset(buf, 0xee, n);
    }
    MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm);
    if (r != root)
        check(buf, n, it);
    int64_t stop;
    memcpy(&stop, buf, 8);
    return (int)stop;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kill_target setup|bcast|barrier SECONDS\n");
        return 2;
    }
    const char *mode = argv[1];
    double secs = atof(argv[2]);
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("kill_target: rank %d pid %d ready\n", rank, (int)getpid());
    fflush(stdout);
    size_t big = (size_t)32 << 20;
    unsigned char *buf = malloc(big);
    double t0 = MPI_Wtime();
    long it = 0;
    int stop = 0;
    while (!stop) {
        if (!strcmp(mode, "setup")) {
            MPI_Comm d;
            MPI_Comm_dup(MPI_COMM_WORLD, &d);
            stop = flag_bcast(buf, 4096, it, (int)(it % size), d, t0, secs);
            MPI_Comm_free(&d);
        } else if (!strcmp(mode, "bcast")) {
            stop = flag_bcast(buf, big, it, (int)(it % size), MPI_COMM_WORLD, t0, secs);
        } else if (!strcmp(mode, "barrier")) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (it % 1000 == 999)
                stop = flag_bcast(buf, 64, it, 0, MPI_COMM_WORLD, t0, secs);
        } else {
            if (rank == 0)
                fprintf(stderr, "kill_target: unknown mode \"%s\" (setup, bcast, barrier)\n", mode);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (it++ == 0) {
            /* past the first call: the communicator's set-up is behind */
            printf("kill_target: rank %d looping\n", rank);
            fflush(stdout);
        }
    }
    long all = 0;
    MPI_Reduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("kill_target: %ld calls, %ld wrong bytes\n", it, all);
    free(buf);
    MPI_Finalize();
    return all != 0;
}
