/* An MPI program as a plugin (the way mpi4py and other language bindings
 * use MPI): built with mpicc as a shared object, loaded by rtld_driver with
 * dlopen(RTLD_LOCAL), so its MPI library is not in the global scope. */
#include <mpi.h>
#include <stdio.h>
int plugin_run(void)
{
    int r, s, v, bad = 0;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    for (int i = 0; i < 10; i++) {
        v = r == i % s ? 1000 + i : -1;
        MPI_Bcast(&v, 1, MPI_INT, i % s, MPI_COMM_WORLD);
        bad += v != 1000 + i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) printf("plugin: %d wrong values\n", bad);
    MPI_Finalize();
    return bad;
}
