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
 *      saying which library to preload instead.
 * Two threads may both run it on their first call: same answer, one line.
 *
 * The check of the caller (nc_mpi_check_caller(), at the initialisation
 * entry points, before the MPI starts). Step 1 answers for the MPI that
 * numacoll's PMPI_* calls reach, which is the program's when the program
 * links its MPI itself: that MPI comes first in the dynamic linker's lookup
 * order. A program that reaches its MPI only through another library (the
 * MPI's Fortran layer; a C library such as PETSc; a Python module such as
 * mpi4py) does not bring it that far forward: this library's own MPI
 * dependency comes first, the calls that library makes land in this
 * library's MPI with the other MPI's handles, and the program crashes
 * (Open MPI: "MPI_Comm_f2c() function was called before MPI_INIT"; MPICH:
 * SIGSEGV in mpi_init_). So the initialisation entry points look at the
 * library the call comes through (the caller of MPI_Init; in Fortran, the
 * MPI's own mpi_init_ this library is about to call): when it or one of its
 * dependencies defines a symbol of the other family (NC_MPI_OTHER_MARK),
 * nothing can run correctly in this process. The job's first rank says why
 * and which library to preload, and the process exits before either MPI
 * starts: that rank with 1, the others with 0, so that the launcher does not
 * abort the job before the first rank has said it (a job whose first rank
 * is another program that does not load numacoll gets no line). The other
 * MPI merely loaded in the process (a plug-in, a module) is no reason: only
 * the caller's own dependencies count, and the main program is not looked
 * at (when it links an MPI, step 1 sees that MPI).
 */
/* dladdr, dladdr1: _GNU_SOURCE is the build's */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "nc_mpi.h"

/* NC_MPI_OTHER_MARK: a symbol every C library of the other family exports
 * because its <mpi.h> names it: MPICH's MPI_DUP_FN is MPIR_Dup_fn (MVAPICH
 * and Intel MPI share that header's ABI), Open MPI's MPI_COMM_WORLD is
 * &ompi_mpi_comm_world; neither exports the other's (nm -D of Debian 12's
 * libmpi.so.40 and libmpich.so.12). NC_MPI_OTHER_DIR: that family's
 * directory in the installed layout. */
#if defined(OPEN_MPI)
#define NC_MPI_BUILT_FOR "Open MPI"
#define NC_MPI_OTHER "MPICH"
#define NC_MPI_OTHER_DIR "mpich"
#define NC_MPI_OTHER_MARK "MPIR_Dup_fn"
#elif defined(MPICH)
#define NC_MPI_BUILT_FOR "MPICH"
#define NC_MPI_OTHER "Open MPI"
#define NC_MPI_OTHER_DIR "openmpi"
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

/* The caller check (see the top). */
void nc_mpi_check_caller(const void *code)
{
    Dl_info di;
    struct link_map *lm = NULL;
    if (!code || !dladdr1(code, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_prev ||
        !lm->l_name || !*lm->l_name)
        return; /* the main program (first in the link map list), or unknown */
    /* a handle of that library: dlsym() with it searches the library and its
     * dependencies only */
    void *h = dlopen(lm->l_name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return;
    const int other = dlsym(h, NC_MPI_OTHER_MARK) != NULL;
    dlclose(h);
    if (!other)
        return;
    const int first = nc_launcher_rank() <= 0;
    if (first) {
        char build[4096];
        other_build(NC_MPI_OTHER_DIR, build, sizeof build);
        nc_log_error("libnumacoll-mpi.so built for %s, but this program reaches %s through %s: "
                     "its MPI calls would land in %s and crash, so it stops here; preload or "
                     "link the %s build instead (%s; installed: pkg-config --variable=preload "
                     "numacoll-%s)",
                     NC_MPI_BUILT_FOR, NC_MPI_OTHER, lm->l_name, NC_MPI_BUILT_FOR, NC_MPI_OTHER,
                     build, NC_MPI_OTHER_DIR);
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
