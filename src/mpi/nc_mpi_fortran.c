/*
 * Fortran entry points, for mpif.h, `use mpi` and `use mpi_f08` programs.
 *
 * The PMPI wrappers see a Fortran call only when the MPI's Fortran layer goes
 * through the C MPI_* symbol. What each layer calls (objdump of Debian 12's
 * libmpi_mpifh.so / libmpi_usempif08.so (Open MPI 4.1) and libmpichfort.so
 * (MPICH 4.0); the symbol a gfortran program references, from nm):
 *
 *              mpif.h, use mpi               use mpi_f08
 *   Open MPI   mpi_bcast_   -> PMPI_Bcast    mpi_bcast_f08_   -> ompi_bcast_f -> PMPI_Bcast
 *              mpi_barrier_ -> PMPI_Barrier  mpi_barrier_f08_ -> ompi_barrier_f -> PMPI_Barrier
 *              mpi_(all)reduce_ -> PMPI_(All)reduce, mpi_(all)reduce_f08_ -> ompi_.._f -> PMPI
 *              mpi_init_, mpi_finalize_: PMPI_Init, PMPI_Finalize (same in mpi_f08)
 *   MPICH      mpi_bcast_   -> MPI_Bcast     mpi_bcast_f08ts_ -> (descriptor glue) MPI_Bcast
 *              mpi_barrier_ -> MPI_Barrier   mpi_barrier_f08_ -> PMPI_Barrier
 *              mpi_(all)reduce_ -> MPI_(All)reduce, mpi_(all)reduce_f08ts_ -> MPI_(All)reduce
 *              mpi_init_, mpi_finalize_:     mpi_init_f08_, mpi_finalize_f08_:
 *                MPI_Init, MPI_Finalize        PMPI_Init, PMPI_Finalize
 *
 * So, like the MPI profiling tools (mpiP, TAU, Score-P), numacoll defines the
 * Fortran symbols of every call that bypasses the C entry point, and only
 * those: a program's call binds to the first definition in the dynamic
 * linker's lookup order, numacoll's when it is preloaded or linked before the
 * MPI libraries. Where MPICH's layer already calls the C MPI_* (its mpif.h
 * layer, its f08 MPI_Bcast), numacoll leaves the MPI's own Fortran function
 * in place: it converts handles and MPICH's Fortran MPI_BOTTOM itself, and
 * its call reaches numacoll's C entry point once. Nothing is intercepted or
 * counted twice. The exception: MPI_Init and MPI_Init_thread, defined by every
 * build with every binding, so that the MPICH build preloaded into an Open MPI
 * mpif.h program (whose calls never reach it otherwise) still says it is in
 * the wrong MPI; in an MPICH program the MPI's own mpi_init_ that it calls
 * reaches numacoll's C MPI_Init as well, and the start-up runs once.
 *
 * What an entry point does:
 *   CALL rows
 *     1. in the wrong MPI (nc_mpi_flavour.h): call the MPI's own Fortran
 *        function of the same name (the next definition after this library)
 *        with the same arguments, and stop;
 *     2. convert: handles with MPI_Comm_f2c / MPI_Type_f2c, the choice buffer
 *        from the Fortran MPI_BOTTOM to C's;
 *     3. call numacoll's implementation, the one behind the C entry point
 *        (nc_mpi_entry.h): one implementation, counted once;
 *     4. its return code into ierror (OPTIONAL in mpi_f08: NULL when absent).
 *   PASS rows (calls numacoll only counts, always the MPI library's)
 *     1. call the MPI's own Fortran function with the same arguments (it
 *        converts the handles and sets ierror; an absent OPTIONAL ierror of
 *        mpi_f08 is given one of numacoll's, so that 2 knows the outcome);
 *     2. unless the MPI is the wrong one: count the call in NUMACOLL_STATS,
 *        its bytes only when it succeeded (only then are its datatypes
 *        valid to ask about).
 *   INIT rows
 *     0. before the MPI starts: the MPI's own function must not bring the
 *        other family's MPI (a Fortran program of the other MPI stops here
 *        with an explanation instead of crashing inside the MPI's
 *        initialisation: nc_mpi_check_caller()); then which MPI runs
 *        (nc_mpi_flavour.h);
 *     1. call the MPI's own Fortran initialisation (it sets up the MPI's
 *        Fortran runtime as well as the MPI);
 *     2. unless the MPI is the wrong one: numacoll's start-up
 *        (nc_mpi_after_init).
 * Calls numacoll does not wrap need no row: MPI_Comm_free included, since a
 * communicator's numacoll state is an attribute whose delete callback runs
 * however the communicator is freed (nc_mpi_comm.c).
 * Reductions: a user op from Fortran's MPI_Op_create is a C MPI_Op whose
 * function has Fortran conventions; the reduction code applies user ops
 * through the MPI library (PMPI_Reduce_local), never calls them itself.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/nc_common.h"
#include "nc_mpi.h"

/*
 * X(name, NAME, kind, Open MPI, MPICH, parameters, arguments, C call)
 *   kind       CALL, PASS or INIT, above;
 *   Open MPI, MPICH: the symbols numacoll defines with each MPI:
 *              ALL  mpi_<name>_, mpi_<name>__, mpi_<name>, MPI_<NAME> and
 *                   mpi_<name>_f08_;
 *              F08  mpi_<name>_f08_ only;  NONE  none;
 *   parameters the Fortran arguments, all addresses, ierror last (the same
 *              for mpif.h and mpi_f08: a TYPE(MPI_Comm) is one INTEGER,
 *              passed by reference, and Open MPI's mpi_f08 passes choice
 *              buffers as plain addresses);
 *   C call     CALL: numacoll's implementation, returning an MPI error code;
 *              PASS: the count; INIT: numacoll's start-up.
 */
#define NC_MPI_F_TABLE(X)                                                                          \
    X(init, INIT, INIT, ALL, ALL, (MPI_Fint *ierror), (ierror), nc_mpi_after_init())               \
    X(init_thread, INIT_THREAD, INIT, ALL, ALL,                                                    \
      (MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror), (required, provided, ierror),    \
      nc_mpi_after_init())                                                                         \
    X(finalize, FINALIZE, CALL, ALL, F08, (MPI_Fint *ierror), (ierror), nc_mpi_finalize())         \
    X(barrier, BARRIER, CALL, ALL, F08, (MPI_Fint *comm, MPI_Fint *ierror), (comm, ierror),        \
      nc_mpi_barrier(NC_F_COMM(comm)))                                                             \
    X(bcast, BCAST, CALL, ALL, NONE,                                                               \
      (void *buffer, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root, MPI_Fint *comm,          \
       MPI_Fint *ierror),                                                                          \
      (buffer, count, datatype, root, comm, ierror),                                               \
      nc_mpi_bcast(NC_F_BUF(buffer), (int)*count, NC_F_TYPE(datatype), (int)*root,                 \
                   NC_F_COMM(comm)))                                                               \
    X(reduce, REDUCE, CALL, ALL, NONE,                                                             \
      (void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,            \
       MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror),                                          \
      (sendbuf, recvbuf, count, datatype, op, root, comm, ierror),                                 \
      nc_mpi_reduce(NC_F_BUF_IN_PLACE(sendbuf), NC_F_BUF(recvbuf), (int)*count,                    \
                    NC_F_TYPE(datatype), NC_F_OP(op), (int)*root, NC_F_COMM(comm)))                \
    X(allreduce, ALLREDUCE, CALL, ALL, NONE,                                                       \
      (void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,            \
       MPI_Fint *comm, MPI_Fint *ierror),                                                          \
      (sendbuf, recvbuf, count, datatype, op, comm, ierror),                                       \
      nc_mpi_allreduce(NC_F_BUF_IN_PLACE(sendbuf), NC_F_BUF(recvbuf), (int)*count,                 \
                       NC_F_TYPE(datatype), NC_F_OP(op), NC_F_COMM(comm)))                         \
    X(gather, GATHER, CALL, ALL, NONE,                                                             \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount, \
       MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror),                      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierror),            \
      nc_mpi_gather(NC_F_BUF_IN_PLACE(sendbuf), (int)*sendcount, NC_F_TYPE(sendtype),              \
       NC_F_BUF(recvbuf), (int)*recvcount, NC_F_TYPE(recvtype), (int)*root, NC_F_COMM(comm)))      \
    X(gatherv, GATHERV, CALL, ALL, NONE,                                                           \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,                      \
       MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, \
       MPI_Fint *ierror),                                                                          \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, ierror),   \
      nc_mpi_gatherv(NC_F_BUF_IN_PLACE(sendbuf), (int)*sendcount, NC_F_TYPE(sendtype),             \
       NC_F_BUF(recvbuf), (const int *)recvcounts, (const int *)displs, NC_F_TYPE(recvtype),       \
       (int)*root, NC_F_COMM(comm)))                                                               \
    X(scatter, SCATTER, CALL, ALL, NONE,                                                           \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount, \
       MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror),                      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierror),            \
      nc_mpi_scatter(NC_F_BUF(sendbuf), (int)*sendcount, NC_F_TYPE(sendtype),                      \
       NC_F_BUF_IN_PLACE(recvbuf), (int)*recvcount, NC_F_TYPE(recvtype), (int)*root,               \
       NC_F_COMM(comm)))                                                                           \
    X(scatterv, SCATTERV, CALL, ALL, NONE,                                                         \
      (void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs, MPI_Fint *sendtype, void *recvbuf,   \
       MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror), \
      (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, ierror),   \
      nc_mpi_scatterv(NC_F_BUF(sendbuf), (const int *)sendcounts, (const int *)displs,             \
       NC_F_TYPE(sendtype), NC_F_BUF_IN_PLACE(recvbuf), (int)*recvcount, NC_F_TYPE(recvtype),      \
       (int)*root, NC_F_COMM(comm)))                                                               \
    X(allgather, ALLGATHER, CALL, ALL, NONE,                                                       \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount, \
       MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierror),                                      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierror),                  \
      nc_mpi_allgather(NC_F_BUF_IN_PLACE(sendbuf), (int)*sendcount, NC_F_TYPE(sendtype),           \
       NC_F_BUF(recvbuf), (int)*recvcount, NC_F_TYPE(recvtype), NC_F_COMM(comm)))                  \
    X(allgatherv, ALLGATHERV, CALL, ALL, NONE,                                                     \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,                      \
       MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm,                 \
       MPI_Fint *ierror),                                                                          \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, ierror),         \
      nc_mpi_allgatherv(NC_F_BUF_IN_PLACE(sendbuf), (int)*sendcount, NC_F_TYPE(sendtype),          \
       NC_F_BUF(recvbuf), (const int *)recvcounts, (const int *)displs, NC_F_TYPE(recvtype),       \
       NC_F_COMM(comm)))                                                                           \
    X(alltoall, ALLTOALL, CALL, ALL, NONE,                                                         \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount, \
       MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierror),                                      \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierror),                  \
      nc_mpi_alltoall(NC_F_BUF_IN_PLACE(sendbuf), (int)*sendcount, NC_F_TYPE(sendtype),            \
       NC_F_BUF(recvbuf), (int)*recvcount, NC_F_TYPE(recvtype), NC_F_COMM(comm)))                  \
    X(alltoallv, ALLTOALLV, CALL, ALL, NONE,                                                       \
      (void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtype, void *recvbuf,  \
       MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,                \
       MPI_Fint *ierror),                                                                          \
      (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,       \
       ierror),                                                                                    \
      nc_mpi_alltoallv(NC_F_BUF_IN_PLACE(sendbuf), (const int *)sendcounts, (const int *)sdispls,  \
       NC_F_TYPE(sendtype), NC_F_BUF(recvbuf), (const int *)recvcounts, (const int *)rdispls,      \
       NC_F_TYPE(recvtype), NC_F_COMM(comm)))                                                      \
    X(alltoallw, ALLTOALLW, PASS, ALL, NONE,                                                       \
      (void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtypes, void *recvbuf, \
       MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtypes, MPI_Fint *comm,               \
       MPI_Fint *ierror),                                                                          \
      (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,     \
       ierror),                                                                                    \
      nc_f_count_alltoallw(sendbuf, sendcounts, sendtypes, comm, *ierror))

/* ---- step 2: conversions ------------------------------------------------------------ */

/* INTEGER arrays (counts, displacements) are passed as they are. */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "a Fortran INTEGER is a C int");

#define NC_F_COMM(f) NC_MPI_WORD(PMPI_Comm_f2c(*(f)))
#define NC_F_TYPE(f) NC_MPI_WORD(PMPI_Type_f2c(*(f)))
#define NC_F_OP(f) NC_MPI_WORD(PMPI_Op_f2c(*(f)))

#if defined(OPEN_MPI)
/* Open MPI's Fortran MPI_BOTTOM and MPI_IN_PLACE are two common blocks that
 * mpif.h, use mpi and mpi_f08 share, defined by libmpi, by the Fortran
 * libraries and by a program that uses them: every reference binds to the
 * first definition in lookup order, the one RTLD_DEFAULT finds.
 * Each is looked up under the four spellings Open MPI defines (its own
 * OMPI_IS_FORTRAN_BOTTOM compares all four: Open MPI 5's mpi_f08 binds to
 * "mpi_fortran_bottom", 4.1's to "mpi_fortran_bottom_"). */
static void *f_bottom[4], *f_in_place[4];
static pthread_once_t sentinels_once = PTHREAD_ONCE_INIT;

static void sentinels_find(void)
{
    static const char *const bottom[4] = {"mpi_fortran_bottom_", "mpi_fortran_bottom",
                                          "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM"};
    static const char *const in_place[4] = {"mpi_fortran_in_place_", "mpi_fortran_in_place",
                                            "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
    for (int i = 0; i < 4; i++) {
        f_bottom[i] = dlsym(RTLD_DEFAULT, bottom[i]);
        f_in_place[i] = dlsym(RTLD_DEFAULT, in_place[i]);
    }
}

static int is_one_of(const void *p, void *const *set)
{
    for (int i = 0; i < 4; i++)
        if (set[i] && p == set[i])
            return 1;
    return 0;
}

/* A Fortran choice buffer as C sees it; in_place_ok for the arguments where
 * MPI allows MPI_IN_PLACE. */
static void *nc_f_buf(void *p, int in_place_ok)
{
    pthread_once(&sentinels_once, sentinels_find);
    if (p && is_one_of(p, f_bottom))
        return MPI_BOTTOM;
    if (in_place_ok && p && is_one_of(p, f_in_place))
        return MPI_IN_PLACE;
    return p;
}
#define NC_F_BUF(p) nc_f_buf(p, 0)
#define NC_F_BUF_IN_PLACE(p) nc_f_buf(p, 1)

static MPI_Datatype nc_f_type_at(const void *types, int k)
{
    return PMPI_Type_f2c(((const MPI_Fint *)types)[k]);
}

/* PASS row alltoallw, step 2 (rc: the call's ierror). */
static void nc_f_count_alltoallw(void *sendbuf, const MPI_Fint *sendcounts,
                                 const MPI_Fint *sendtypes, const MPI_Fint *comm, MPI_Fint rc)
{
    nc_mpi_count(NC_MPI_ALLTOALLW, 0,
                 rc == MPI_SUCCESS
                     ? nc_mpi_alltoallw_bytes(NC_F_BUF_IN_PLACE(sendbuf), (const int *)sendcounts,
                                              nc_f_type_at, sendtypes, PMPI_Comm_f2c(*comm))
                     : 0);
}
#endif
/* With MPICH no row has a buffer (its Fortran layer reaches the C entry point
 * for those calls); a row that needs one there must add MPICH's sentinels
 * (common /MPIPRIV1/, MPIR_F08_MPI_BOTTOM) first: NC_F_BUF is undefined. */

/* ---- the MPI's own Fortran functions ------------------------------------------------ */

/* The next definition of sym after this library: the MPI's own. */
static void *nc_f_own(const char *sym, void *_Atomic *slot)
{
    /* acquire: pairs with the release store below in another thread (the
     * pointer is all it publishes). */
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (fn)
        return fn;
    fn = dlsym(RTLD_NEXT, sym);
    if (!fn) {
        nc_log_error("%s: no definition after libnumacoll-mpi.so (is the MPI's Fortran "
                     "library loaded?)",
                     sym);
        abort();
    }
    atomic_store_explicit(slot, fn, memory_order_release);
    return fn;
}

static void nc_f_set(MPI_Fint *ierror, int rc)
{
    if (ierror)
        *ierror = (MPI_Fint)rc;
}

/* ---- generated entry points --------------------------------------------------------- */

#define NC_F_OWN_PTR(sym) nc_f_own(#sym, &own_##sym)
#define NC_F_OWN(sym, params) ((void(*) params)NC_F_OWN_PTR(sym))

#define NC_F_BODY_CALL(sym, params, args, call)                                                    \
    /* 1. */                                                                                       \
    if (nc_mpi_is_foreign()) {                                                                     \
        NC_F_OWN(sym, params) args;                                                                \
        return;                                                                                    \
    }                                                                                              \
    /* 2., 3., 4. */                                                                               \
    nc_f_set(ierror, call);

#define NC_F_BODY_PASS(sym, params, args, call)                                                    \
    /* 1. */                                                                                       \
    MPI_Fint nc_f_rc = MPI_SUCCESS;                                                                \
    if (!ierror)                                                                                   \
        ierror = &nc_f_rc;                                                                         \
    NC_F_OWN(sym, params) args;                                                                    \
    /* 2. */                                                                                       \
    if (!nc_mpi_is_foreign())                                                                      \
        call;

#define NC_F_BODY_INIT(sym, params, args, call)                                                    \
    /* 0. */                                                                                       \
    nc_mpi_check_caller(NC_F_OWN_PTR(sym));                                                        \
    const int foreign = nc_mpi_is_foreign();                                                       \
    /* 1. */                                                                                       \
    NC_F_OWN(sym, params) args;                                                                    \
    /* 2. */                                                                                       \
    if (!foreign)                                                                                  \
        call;

#define NC_F_DEFINE(sym, kind, params, args, call)                                                 \
    static void *_Atomic own_##sym;                                                                \
    NUMACOLL_API void sym params;                                                                  \
    void sym params                                                                                \
    {                                                                                              \
        NC_F_BODY_##kind(sym, params, args, call)                                                  \
    }

#define NC_F_ALIAS(sym, target, params)                                                            \
    NUMACOLL_API void sym params __attribute__((alias(#target)));

#define NC_F_MPIF(name, NAME, kind, params, args, call)                                            \
    NC_F_DEFINE(mpi_##name##_, kind, params, args, call)                                           \
    NC_F_ALIAS(mpi_##name##__, mpi_##name##_, params)                                              \
    NC_F_ALIAS(mpi_##name, mpi_##name##_, params)                                                  \
    NC_F_ALIAS(MPI_##NAME, mpi_##name##_, params)
#define NC_F_F08(name, NAME, kind, params, args, call)                                             \
    NC_F_DEFINE(mpi_##name##_f08_, kind, params, args, call)

#define NC_F_EXPORT_ALL(...) NC_F_MPIF(__VA_ARGS__) NC_F_F08(__VA_ARGS__)
#define NC_F_EXPORT_F08(...) NC_F_F08(__VA_ARGS__)
#define NC_F_EXPORT_NONE(...)

#if defined(OPEN_MPI)
#define NC_F_ROW_(name, NAME, kind, ompi, mpich, params, args, call)                               \
    NC_F_EXPORT_##ompi(name, NAME, kind, params, args, call)
#else
#define NC_F_ROW_(name, NAME, kind, ompi, mpich, params, args, call)                               \
    NC_F_EXPORT_##mpich(name, NAME, kind, params, args, call)
#endif
NC_MPI_F_TABLE(NC_F_ROW_)
#undef NC_F_ROW_
