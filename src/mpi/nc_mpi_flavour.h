/*
 * Which MPI runs, and what this library does inside the wrong one.
 *
 * libnumacoll-mpi.so is compiled against one MPI's <mpi.h>: Open MPI's handles
 * are pointers to objects inside libmpi.so.40, MPICH's are 32-bit integers,
 * and each MPI's constants are its own. Preloaded into a C program of the
 * other MPI (checked on Debian 12, both directions):
 *   - every PMPI_* call numacoll makes goes to the program's MPI, which the
 *     program links directly and so comes before the library's own MPI
 *     dependency in the lookup order;
 *   - numacoll's own constants mean nothing there: MPICH's MPI_COMM_WORLD is a
 *     number Open MPI reads as a pointer, Open MPI's point into an Open MPI
 *     library the program does not use;
 *   - the MPICH build would see only the low 32 bits of the Open MPI pointers
 *     a program passes to it, if it declared them as MPICH handles.
 * (A program of the other MPI that reaches it only through another library,
 * its Fortran layer among them, gets this library's MPI first for those
 * calls and cannot run: the initialisation entry points see where the call
 * comes from, say so and end the process before either MPI starts:
 * nc_mpi_check_caller().)
 * So the library asks the running MPI who it is (MPI_Get_library_version,
 * callable before MPI_Init and without any handle) at MPI_Init, or at the
 * first wrapped call of a program whose MPI_Init did not come through here.
 * In the wrong MPI it says so in one line and from then on hands every call
 * to that MPI untouched, never using a constant of its own:
 *   - the exported C entry points take handles as machine words
 *     (nc_mpi_entry.c), so a call is passed on with the caller's full-width
 *     handles whichever MPI the caller compiled against;
 *   - the Fortran entry points call the MPI's own Fortran function of the same
 *     name (their arguments are addresses: nothing to convert).
 *
 * This header is MPI-free (nc_mpi_entry.c includes it without <mpi.h>).
 */
#ifndef NC_MPI_FLAVOUR_H
#define NC_MPI_FLAVOUR_H

#include <stdatomic.h>

enum { NC_MPI_FLAVOUR_UNKNOWN = 0, NC_MPI_FLAVOUR_NATIVE, NC_MPI_FLAVOUR_FOREIGN };
/* One of the above; set by the check, never reset. */
extern atomic_int nc_mpi_flavour_state;

/* Ask the MPI (first call only), print the one line when it is the wrong one;
 * 1 when it is. */
int nc_mpi_flavour_check(void);

/* At an initialisation entry point, before the MPI starts: when code (the
 * caller of MPI_Init, or the MPI's own Fortran initialisation) lies in a
 * library that brings the other family's MPI, one line from the job's first
 * rank and the process exits (nc_mpi_flavour.c). */
void nc_mpi_check_caller(const void *code);

/* 1 when the running MPI is not the one this library was built for: every
 * call must go to it untouched. */
static inline int nc_mpi_is_foreign(void)
{
    /* relaxed: the state is a value of its own and publishes nothing else. */
    int s = atomic_load_explicit(&nc_mpi_flavour_state, memory_order_relaxed);
    if (__builtin_expect(s == NC_MPI_FLAVOUR_NATIVE, 1))
        return 0;
    return s == NC_MPI_FLAVOUR_FOREIGN || nc_mpi_flavour_check();
}

#endif
