/*
 * The flavour check (nc_mpi_flavour.h).
 *
 *   1. ask the running MPI who it is: MPI_Get_library_version takes no handle
 *      and may be called before MPI_Init, so it is safe in either MPI;
 *   2. sort the answer into an ABI family: Open MPI, or MPICH and the MPIs
 *      built on its ABI (MVAPICH, Intel MPI); an answer naming neither is
 *      trusted to match (a vendor MPI on the ABI this library was built for);
 *   3. in the wrong family: FOREIGN, and one line from the job's first rank
 *      (from the launcher's environment: MPI_COMM_WORLD is not ours to use)
 *      saying which library to preload instead;
 *   4. in the right family, but with the other family's library loaded too:
 *      the program is the other MPI's and reaches it only through a library
 *      of that MPI (its Fortran layer, which looks the C calls up after this
 *      library's own MPI dependency), so its calls land in this library's
 *      MPI with the other's handles and it would crash (Open MPI: "MPI_Comm_
 *      f2c() function was called before MPI_INIT"; MPICH: SIGSEGV in
 *      mpi_init_). Nothing can run correctly in such a process: the job's
 *      first rank says why and which library to preload, and every rank
 *      exits before the MPI starts (the others with 0, so that the launcher
 *      does not abort the job before the first rank has said it).
 * Two threads may both run it on their first call: same answer, one line.
 */
/* dladdr: _GNU_SOURCE is the build's */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "nc_mpi.h"

/* NC_MPI_OTHER_MARK: a symbol only the other family's C library exports
 * (nm -D of Debian 12's libmpi.so.40 and libmpich.so.12; MVAPICH and Intel
 * MPI keep MPICH's MPIR_ internals). */
#if defined(OPEN_MPI)
#define NC_MPI_BUILT_FOR "Open MPI"
#define NC_MPI_OTHER "MPICH"
#define NC_MPI_OTHER_MARK "MPIR_Err_create_code"
#elif defined(MPICH)
#define NC_MPI_BUILT_FOR "MPICH"
#define NC_MPI_OTHER "Open MPI"
#define NC_MPI_OTHER_MARK "ompi_mpi_comm_world"
#else
#error "numacoll's MPI layer knows Open MPI and MPICH (and the MPIs of MPICH's ABI)"
#endif

atomic_int nc_mpi_flavour_state;

/* NULL when the version string names no family we know. */
static const char *family_of(const char *version)
{
    if (strstr(version, "Open MPI"))
        return "Open MPI";
    if (strstr(version, "MPICH") || strstr(version, "MVAPICH") || strstr(version, "Intel(R) MPI"))
        return "MPICH";
    return NULL;
}

/* The last occurrence of needle in hay, or NULL. */
static const char *last_of(const char *hay, const char *needle)
{
    const char *last = NULL;
    for (const char *at = strstr(hay, needle); at; at = strstr(at + 1, needle))
        last = at;
    return last;
}

/* Where the build for the other family is, from where this library was
 * loaded: the installed layout (<libdir>/numacoll/<flavour>/) or the source
 * tree's build directories (build/, build-mpich/); else the installed
 * layout's relative name. */
static void other_build(const char *dir, char *out, size_t len)
{
    Dl_info di;
    const char *me = dladdr((void *)nc_mpi_flavour_check, &di) && di.dli_fname ? di.dli_fname
                                                                                : "";
    const int to_mpich = !strcmp(dir, "mpich");
    const char *other_tree = to_mpich ? "/build-mpich/" : "/build/";
    const char *mine_tree = to_mpich ? "/build/" : "/build-mpich/";
    const char *mine_inst = to_mpich ? "/numacoll/openmpi/" : "/numacoll/mpich/";
    const char *at;
    if ((at = last_of(me, mine_inst)))
        snprintf(out, len, "%.*s/numacoll/%s/%s", (int)(at - me), me, dir,
                 at + strlen(mine_inst));
    else if ((at = last_of(me, mine_tree)))
        snprintf(out, len, "%.*s%s%s", (int)(at - me), me, other_tree, at + strlen(mine_tree));
    else
        snprintf(out, len, "lib/numacoll/%s/libnumacoll-mpi.so", dir);
}

/* 4. Does not return. */
static void mixed(void)
{
    const int first = nc_launcher_rank() <= 0;
    if (first) {
        const char *dir = strcmp(NC_MPI_OTHER, "MPICH") ? "openmpi" : "mpich";
        char other[4096];
        other_build(dir, other, sizeof other);
        nc_log_error("libnumacoll-mpi.so built for %s is in a process that also loaded %s, the "
                     "program's MPI: the program's MPI calls made through %s's Fortran (or "
                     "another) library would reach %s and crash, so it stops here; preload or "
                     "link the %s build instead (%s; installed: pkg-config --variable=preload "
                     "numacoll-%s)",
                     NC_MPI_BUILT_FOR, NC_MPI_OTHER, NC_MPI_OTHER, NC_MPI_BUILT_FOR, NC_MPI_OTHER,
                     other, dir);
    }
    exit(first ? 1 : 0);
}

int nc_mpi_flavour_check(void)
{
    int known = atomic_load_explicit(&nc_mpi_flavour_state, memory_order_relaxed);
    if (known != NC_MPI_FLAVOUR_UNKNOWN)
        return known == NC_MPI_FLAVOUR_FOREIGN;
    /* 1. Sized for the larger of the two MPI_MAX_LIBRARY_VERSION_STRING
     * (MPICH's 8192, Open MPI's 256), whichever this was compiled against:
     * the running MPI fills it. Once per process. */
    char version[8192 + 1];
    int len = 0;
    if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS)
        version[0] = '\0';
    version[sizeof version - 1] = '\0';
    /* 2. */
    const char *running = family_of(version);
    if (!running || !strcmp(running, NC_MPI_BUILT_FOR)) {
        /* 4. */
        if (dlsym(RTLD_DEFAULT, NC_MPI_OTHER_MARK))
            mixed();
        atomic_store_explicit(&nc_mpi_flavour_state, NC_MPI_FLAVOUR_NATIVE, memory_order_relaxed);
        return 0;
    }
    /* 3. */
    atomic_store_explicit(&nc_mpi_flavour_state, NC_MPI_FLAVOUR_FOREIGN, memory_order_relaxed);
    if (nc_launcher_rank() <= 0) {
        /* The version's first line up to a comma, blanks squeezed:
         * "Open MPI v4.1.4", "MPICH Version: 4.0.2". */
        char first[80];
        size_t n = 0;
        for (const char *v = version; *v && !strchr("\n\r,", *v) && n + 1 < sizeof first; v++)
            if (!(*v == ' ' || *v == '\t') || (n && first[n - 1] != ' '))
                first[n++] = *v == '\t' ? ' ' : *v;
        first[n] = '\0';
        const char *dir = strcmp(running, "MPICH") ? "openmpi" : "mpich";
        char other[4096];
        other_build(dir, other, sizeof other);
        nc_log_warn_once("foreign-mpi",
                         "libnumacoll-mpi.so built for %s, but this program runs %s (%s): "
                         "numacoll is off, every MPI call goes to %s; preload or link the %s build "
                         "instead (%s; installed: pkg-config --variable=preload numacoll-%s)",
                         NC_MPI_BUILT_FOR, running, first, running, running, other, dir);
    }
    return 1;
}
