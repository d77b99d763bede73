/*
 * MPI_Reduce and MPI_Allreduce (nc_mpi_reduce, nc_mpi_allreduce, behind the C
 * and Fortran entry points): numacoll's shared-memory reductions inside each
 * node (coll/nc_reduce.c), the MPI library between node leaders.
 *
 *   1. qualify the call, on arguments MPI requires to be the same on every
 *      rank (op, datatype, count, root, the communicator), so every rank
 *      decides the same: a predefined op on a datatype all of whose elements
 *      are one predefined type the op is defined for (named, or derived from
 *      one: contiguous, vector, indexed, struct of one type, ...; Fortran
 *      LOGICAL where the library's logical ops are numacoll's, flog_agrees(),
 *      the same answer on every rank of one library), or a user
 *      op (MPI_Op_create) on a datatype without holes, applied through the
 *      MPI library (PMPI_Reduce_local, so Fortran user functions work) and,
 *      across nodes, commutative only (the library's order between nodes is
 *      not rank order). Anything else goes to the MPI library, counted in
 *      NUMACOLL_STATS;
 *   2. the input as elements: the user's buffer when it is contiguous, else
 *      packed into scratch memory (MPI_Pack; the result is unpacked in 6);
 *      one node and more than NUMACOLL_REDUCE_PACK_MAX bytes: 2r instead;
 *   3. inside the node: numacoll_allreduce / numacoll_reduce (one node), or
 *      numacoll_reduce to the node's leader (several nodes);
 *   4. several nodes, leaders only: PMPI_Allreduce / PMPI_Reduce of the
 *      nodes' partial results on the leaders' communicator (root: the leader
 *      of the root's node);
 *   5. several nodes: allreduce: numacoll_bcast of the result from the leader
 *      to its node; reduce: when the root is not its node's leader, the
 *      leader sends the result to the root on the node's communicator;
 *   6. unpack into the user's buffer when it is not contiguous.
 *  2r. (one node, more than P = NUMACOLL_REDUCE_PACK_MAX bytes, agreed by
 *      the team) the members agree on the call (an allreduce of 64 bytes:
 *      size, root, element size, type and op; a difference is an error on
 *      every member: MPI_ERR_TRUNCATE, MPI_ERR_ROOT or MPI_ERR_ARG, and a
 *      member whose call is not in rounds makes the others' agreement fail
 *      with MPI_ERR_TRUNCATE), then reduce it in rounds of at most P bytes of
 *      whole elements, every member every round: each round's input is the
 *      user's buffer where it is contiguous, else packed from it
 *      (nc_dtype_pack), its result unpacked into it (nc_dtype_unpack), so the
 *      scratch memory is at most 2 P plus a window of 64 KiB per side (a
 *      datatype one element of which exceeds P is packed whole, as below P).
 *      The choice and the rounds follow the bytes alone, which members of
 *      one type signature agree on, whatever their (count, datatype) pairs.
 * Order: one node: numacoll's documented order (include/numacoll.h); several
 * nodes: that order inside each node, the MPI library's between nodes.
 * A count, type or op mismatch inside a node is MPI_ERR_TRUNCATE / MPI_ERR_ARG
 * through the communicator's error handler, never a hang; between nodes it is
 * the MPI library's business, as without numacoll.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "core/nc_team.h"
#include "nc_mpi.h"
#include "nc_mpi_dtype.h"

/* ---- 1. qualification ----------------------------------------------------------------- */

enum { K_SINT, K_UINT, K_FLOAT, K_COMPLEX, K_BOOL, K_BYTE, K_PAIR, K_FLOG };

/* The ops a type of the table allows beyond MPI's table for its numacoll type. */
enum { ONLY_ANY, ONLY_BITWISE, ONLY_LOGICAL };

typedef struct named {
    MPI_Datatype dt;
    int kind;
    numacoll_type_t pair; /* K_PAIR */
} named_t;

#define NAMED_MAX 96 /* rows of the table, at most */

/* The predefined datatypes numacoll reduces; the numacoll type follows from
 * the kind and the size the MPI library gives (MPI_LONG, MPI_INTEGER, ...). */
static const named_t *named_types(size_t *n)
{
    static const named_t t[] = {
        {MPI_SIGNED_CHAR, K_SINT, 0},      {MPI_SHORT, K_SINT, 0},
        {MPI_INT, K_SINT, 0},              {MPI_LONG, K_SINT, 0},
        {MPI_LONG_LONG_INT, K_SINT, 0},    {MPI_LONG_LONG, K_SINT, 0},
        {MPI_INT8_T, K_SINT, 0},           {MPI_INT16_T, K_SINT, 0},
        {MPI_INT32_T, K_SINT, 0},          {MPI_INT64_T, K_SINT, 0},
        {MPI_AINT, K_SINT, 0},             {MPI_OFFSET, K_SINT, 0},
        {MPI_COUNT, K_SINT, 0},            {MPI_INTEGER, K_SINT, 0},
        {MPI_INTEGER1, K_SINT, 0},         {MPI_INTEGER2, K_SINT, 0},
        {MPI_INTEGER4, K_SINT, 0},         {MPI_INTEGER8, K_SINT, 0},
        {MPI_UNSIGNED_CHAR, K_UINT, 0},    {MPI_UNSIGNED_SHORT, K_UINT, 0},
        {MPI_UNSIGNED, K_UINT, 0},         {MPI_UNSIGNED_LONG, K_UINT, 0},
        {MPI_UNSIGNED_LONG_LONG, K_UINT, 0}, {MPI_UINT8_T, K_UINT, 0},
        {MPI_UINT16_T, K_UINT, 0},         {MPI_UINT32_T, K_UINT, 0},
        {MPI_UINT64_T, K_UINT, 0},         {MPI_BYTE, K_BYTE, 0},
        {MPI_FLOAT, K_FLOAT, 0},           {MPI_DOUBLE, K_FLOAT, 0},
        {MPI_LONG_DOUBLE, K_FLOAT, 0},     {MPI_REAL, K_FLOAT, 0},
        {MPI_DOUBLE_PRECISION, K_FLOAT, 0}, {MPI_REAL4, K_FLOAT, 0},
        {MPI_REAL8, K_FLOAT, 0},           {MPI_C_FLOAT_COMPLEX, K_COMPLEX, 0},
        {MPI_C_COMPLEX, K_COMPLEX, 0},     {MPI_C_DOUBLE_COMPLEX, K_COMPLEX, 0},
        {MPI_C_LONG_DOUBLE_COMPLEX, K_COMPLEX, 0}, {MPI_COMPLEX, K_COMPLEX, 0},
        {MPI_DOUBLE_COMPLEX, K_COMPLEX, 0}, {MPI_C_BOOL, K_BOOL, 0},
#ifdef MPI_COMPLEX8 /* each optional kind is defined only where the compiler has it */
        {MPI_COMPLEX8, K_COMPLEX, 0},
#endif
#ifdef MPI_COMPLEX16
        {MPI_COMPLEX16, K_COMPLEX, 0},
#endif
        {MPI_CXX_BOOL, K_BOOL, 0},         {MPI_CXX_FLOAT_COMPLEX, K_COMPLEX, 0},
        {MPI_CXX_DOUBLE_COMPLEX, K_COMPLEX, 0},
        {MPI_CXX_LONG_DOUBLE_COMPLEX, K_COMPLEX, 0},
        {MPI_LOGICAL, K_FLOG, 0},
#ifdef MPI_LOGICAL1 /* Open MPI's sized logicals */
        {MPI_LOGICAL1, K_FLOG, 0},
#endif
#ifdef MPI_LOGICAL2
        {MPI_LOGICAL2, K_FLOG, 0},
#endif
#ifdef MPI_LOGICAL4
        {MPI_LOGICAL4, K_FLOG, 0},
#endif
#ifdef MPI_LOGICAL8
        {MPI_LOGICAL8, K_FLOG, 0},
#endif
        {MPI_2INT, K_PAIR, NUMACOLL_2INT}, {MPI_FLOAT_INT, K_PAIR, NUMACOLL_FLOAT_INT},
        {MPI_DOUBLE_INT, K_PAIR, NUMACOLL_DOUBLE_INT}, {MPI_LONG_INT, K_PAIR, NUMACOLL_LONG_INT},
        {MPI_SHORT_INT, K_PAIR, NUMACOLL_SHORT_INT},
        {MPI_LONG_DOUBLE_INT, K_PAIR, NUMACOLL_LONG_DOUBLE_INT},
        {MPI_2INTEGER, K_PAIR, NUMACOLL_2INT}, {MPI_2REAL, K_PAIR, NUMACOLL_2FLOAT},
        {MPI_2DOUBLE_PRECISION, K_PAIR, NUMACOLL_2DOUBLE},
    };
    NC_STATIC_ASSERT(sizeof t / sizeof *t <= NAMED_MAX, "the table fits its caches");
    *n = sizeof t / sizeof *t;
    return t;
}

/* numacoll's integer type of `size` bytes (unsigned: u), -1 for another size. */
static int int_type_of(int size, int u)
{
    return size == 1   ? (u ? NUMACOLL_UINT8 : NUMACOLL_INT8)
           : size == 2 ? (u ? NUMACOLL_UINT16 : NUMACOLL_INT16)
           : size == 4 ? (u ? NUMACOLL_UINT32 : NUMACOLL_INT32)
           : size == 8 ? (u ? NUMACOLL_UINT64 : NUMACOLL_INT64)
                       : -1;
}

/* v as a signed integer of `size` bytes at p (the machine's own byte order). */
static void put_int(void *p, int64_t v, int size)
{
    const int8_t b = (int8_t)v;
    const int16_t h = (int16_t)v;
    const int32_t w = (int32_t)v;
    memcpy(p, size == 1 ? (const void *)&b : size == 2 ? (const void *)&h
              : size == 4 ? (const void *)&w : (const void *)&v, (size_t)size);
}

/* Fortran LOGICAL dt of `size` bytes: 1 when the MPI library's own LAND, LOR
 * and LXOR on it are numacoll's on nt, the signed integer of that size (any
 * non-zero is true, the result is 1 or 0). Open MPI's are C's whatever its
 * .TRUE.; MPICH's take all but .FALSE. as true and give its .TRUE., so they
 * agree where .TRUE. is 1 (gfortran's); a library that differs (.TRUE. = -1)
 * keeps the calls. Asked once per type with PMPI_Reduce_local; *known caches
 * it (0: not asked, 1: no, 2: yes). */
static int flog_agrees(MPI_Datatype dt, int size, numacoll_type_t nt,
                       _Atomic signed char *known)
{
    /* relaxed: a cache of an answer that never changes; a race asks twice */
    int v = atomic_load_explicit(known, memory_order_relaxed);
    if (v)
        return v == 2;
    enum { NX = 4, NE = NX * NX };
    static const int x[NX] = {0, 1, 2, -1};
    static const MPI_Op mop[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
    static const numacoll_op_t nop[] = {NUMACOLL_LAND, NUMACOLL_LOR, NUMACOLL_LXOR};
    int64_t in[NE], io[NE], want[NE];
    v = 2;
    for (size_t o = 0; v == 2 && o < sizeof mop / sizeof *mop; o++) {
        for (int i = 0; i < NE; i++) { /* element i: x[i / NX] op x[i % NX] */
            put_int((char *)in + (size_t)i * (size_t)size, x[i / NX], size);
            put_int((char *)io + (size_t)i * (size_t)size, x[i % NX], size);
        }
        memcpy(want, io, sizeof want);
        if (numacoll_reduce_local(in, want, NE, nt, nop[o]) ||
            PMPI_Reduce_local(in, io, NE, dt, mop[o]) != MPI_SUCCESS ||
            memcmp(io, want, (size_t)NE * (size_t)size))
            v = 1;
    }
    atomic_store_explicit(known, (signed char)v, memory_order_relaxed);
    return v == 2;
}

/* The numacoll type of a predefined datatype, -1 when numacoll has none;
 * *only: the ops numacoll takes on it (ONLY_*). */
static int nc_type_of(MPI_Datatype dt, int *only)
{
    size_t n;
    const named_t *t = named_types(&n);
    static _Atomic signed char flog[NAMED_MAX]; /* per row: flog_agrees()'s cache */
    *only = ONLY_ANY;
    if (dt == MPI_DATATYPE_NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (t[i].dt != dt)
            continue;
        int size = 0;
        PMPI_Type_size(dt, &size);
        switch (t[i].kind) {
        case K_BYTE:
            *only = ONLY_BITWISE;
            return NUMACOLL_UINT8;
        case K_FLOG: {
            *only = ONLY_LOGICAL;
            const int nt = int_type_of(size, 0);
            return nt >= 0 && flog_agrees(dt, size, (numacoll_type_t)nt, &flog[i]) ? nt : -1;
        }
        case K_SINT:
        case K_UINT:
            return int_type_of(size, t[i].kind == K_UINT);
        case K_FLOAT:
            return size == (int)sizeof(float)         ? NUMACOLL_FLOAT
                   : size == (int)sizeof(double)      ? NUMACOLL_DOUBLE
                   : dt == MPI_LONG_DOUBLE            ? NUMACOLL_LONG_DOUBLE
                                                      : -1;
        case K_COMPLEX:
            return size == (int)sizeof(float _Complex)    ? NUMACOLL_FLOAT_COMPLEX
                   : size == (int)sizeof(double _Complex) ? NUMACOLL_DOUBLE_COMPLEX
                   : dt == MPI_C_LONG_DOUBLE_COMPLEX || dt == MPI_CXX_LONG_DOUBLE_COMPLEX
                       ? NUMACOLL_LONG_DOUBLE_COMPLEX
                                                          : -1;
        case K_BOOL:
            return size == (int)sizeof(_Bool) ? NUMACOLL_BOOL : -1;
        case K_PAIR: {
            /* {value, int} with the C compiler's padding: the MPI extent,
             * not the size (MPI_DOUBLE_INT is 12 bytes in a 16-byte struct). */
            MPI_Aint lb, extent;
            PMPI_Type_get_extent(dt, &lb, &extent);
            return lb == 0 && (size_t)extent == numacoll_type_size(t[i].pair) ? (int)t[i].pair
                                                                               : -1;
        }
        }
    }
    return -1;
}

/* The one predefined datatype every element of dt is made of, or
 * MPI_DATATYPE_NULL (several, or a constructor numacoll does not follow). */
static MPI_Datatype base_of(MPI_Datatype dt, int depth)
{
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return MPI_DATATYPE_NULL;
    if (comb == MPI_COMBINER_NAMED)
        return dt;
    if (depth > 16 || nd < 1)
        return MPI_DATATYPE_NULL;
    int *ints = malloc(((size_t)ni + 1) * sizeof *ints);
    MPI_Aint *addrs = malloc(((size_t)na + 1) * sizeof *addrs);
    MPI_Datatype *types = malloc((size_t)nd * sizeof *types);
    MPI_Datatype base = MPI_DATATYPE_NULL;
    if (ints && addrs && types &&
        PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, types) == MPI_SUCCESS) {
        for (int i = 0; i < nd; i++) {
            MPI_Datatype b = base_of(types[i], depth + 1);
            if (i == 0)
                base = b;
            else if (b != base)
                base = MPI_DATATYPE_NULL;
        }
        /* Types get_contents returns that are not predefined are the caller's. */
        for (int i = 0; i < nd; i++) {
            int ci, ca, cd, cc;
            PMPI_Type_get_envelope(types[i], &ci, &ca, &cd, &cc);
            if (cc != MPI_COMBINER_NAMED)
                PMPI_Type_free(&types[i]);
        }
    }
    free(ints);
    free(addrs);
    free(types);
    return base;
}

/* 1 when dt is an array of its base type laid out as C lays it out: the
 * predefined type itself, or contiguous/dup of such a type (pair types, whose
 * packed form has no padding, are used in place only then). */
static int plain_array(MPI_Datatype dt, int depth)
{
    int ni, na, nd, comb;
    if (depth > 16 || PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return 0;
    if (comb == MPI_COMBINER_NAMED)
        return 1;
    if ((comb != MPI_COMBINER_CONTIGUOUS && comb != MPI_COMBINER_DUP) || nd != 1 || na != 0 ||
        ni > 1)
        return 0;
    int ints[1];
    MPI_Aint addrs[1];
    MPI_Datatype inner;
    if (PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS)
        return 0;
    const int ok = plain_array(inner, depth + 1);
    PMPI_Type_get_envelope(inner, &ni, &na, &nd, &comb);
    if (comb != MPI_COMBINER_NAMED)
        PMPI_Type_free(&inner);
    return ok;
}

typedef struct qual {
    numacoll_op_t op;          /* predefined: numacoll's op */
    numacoll_type_t type;      /* predefined: numacoll's element type */
    MPI_Datatype base;         /* predefined: the MPI type of an element; user: dt */
    size_t n;                  /* elements */
    size_t es;                 /* bytes of one element */
    int user;                  /* user op through PMPI_Reduce_local */
    int in_place_layout;       /* pair types, user ops: the buffer is the elements, never
                                  packed */
    int commute;               /* user op: MPI_Op_create's commute (the order may change) */
    int named;                 /* a predefined datatype: its buffer is its elements */
    int tsize;                 /* MPI_Type_size of the call's datatype (NUMACOLL_STATS) */
    MPI_Op mop;
} qual_t;

static int op_of(MPI_Op op)
{
    static const struct {
        MPI_Op mpi;
        numacoll_op_t nc;
    } ops[] = {{MPI_SUM, NUMACOLL_SUM},       {MPI_PROD, NUMACOLL_PROD},
               {MPI_MIN, NUMACOLL_MIN},       {MPI_MAX, NUMACOLL_MAX},
               {MPI_LAND, NUMACOLL_LAND},     {MPI_LOR, NUMACOLL_LOR},
               {MPI_LXOR, NUMACOLL_LXOR},     {MPI_BAND, NUMACOLL_BAND},
               {MPI_BOR, NUMACOLL_BOR},       {MPI_BXOR, NUMACOLL_BXOR},
               {MPI_MINLOC, NUMACOLL_MINLOC}, {MPI_MAXLOC, NUMACOLL_MAXLOC}};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (ops[i].mpi == op)
            return (int)ops[i].nc;
    return -1;
}

static int predefined_op(MPI_Op op)
{
    static const MPI_Op others[] = {MPI_REPLACE, MPI_NO_OP};
    if (op == MPI_OP_NULL || op_of(op) >= 0)
        return 1;
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (others[i] == op)
            return 1;
    return 0;
}

/* The last predefined (datatype, op) pairs qualified by this thread, with the
 * answer for one element: predefined handles never change meaning, while a
 * derived datatype or a user op may be freed and its handle reused, so only
 * predefined ones are kept. Saves the table walks of every small call. */
typedef struct qcache {
    MPI_Datatype dt;
    MPI_Op op;
    int ok;
    qual_t q; /* n = 1 */
} qcache_t;
#define QCACHE 4
static _Thread_local qcache_t qcache[QCACHE];
static _Thread_local unsigned qcache_next;

/* 1 when numacoll takes the call (q filled), 0 when it goes to PMPI. */
static int qualify(const nc_mpi_comm_t *c, int count, MPI_Datatype dt, MPI_Op op, qual_t *q)
{
    int size = 0;
    if (count < 0 || dt == MPI_DATATYPE_NULL || op == MPI_OP_NULL)
        return 0; /* the MPI library reports it */
    for (int i = 0; i < QCACHE; i++)
        if (qcache[i].dt == dt && qcache[i].op == op && qcache[i].q.es) {
            *q = qcache[i].q;
            q->n = (size_t)count;
            return qcache[i].ok && q->n * q->es <= INT_MAX;
        }
    memset(q, 0, sizeof *q);
    PMPI_Type_size(dt, &size);
    q->tsize = size;
    q->mop = op;
    int o = op_of(op);
    if (o >= 0) {
        MPI_Datatype base = base_of(dt, 0);
        int only, bsize = 0, t = nc_type_of(base, &only);
        if (t < 0)
            return 0;
        PMPI_Type_size(base, &bsize);
        if (!bsize || size % bsize || !numacoll_op_valid((numacoll_op_t)o, (numacoll_type_t)t))
            return 0;
        const size_t es = numacoll_type_size((numacoll_type_t)t);
        if (es != (size_t)bsize) {
            /* A pair type: MPI packs it without its padding, numacoll reduces
             * the C struct, so only a plain array of it is taken. */
            if (!plain_array(dt, 0))
                return 0;
            q->in_place_layout = 1;
        }
        const int ok = only == ONLY_BITWISE
                           ? o == NUMACOLL_BAND || o == NUMACOLL_BOR || o == NUMACOLL_BXOR
                       : only == ONLY_LOGICAL
                           ? o == NUMACOLL_LAND || o == NUMACOLL_LOR || o == NUMACOLL_LXOR
                           : 1;
        q->op = (numacoll_op_t)o;
        q->type = (numacoll_type_t)t;
        q->base = base;
        q->es = es;
        q->named = base == dt;
        if (q->named) {
            qcache_t *e = &qcache[qcache_next++ % QCACHE];
            e->dt = dt;
            e->op = op;
            e->ok = ok;
            e->q = *q;
        }
        if (!ok)
            return 0; /* MPI defines only the bitwise ops on MPI_BYTE, the logical
                         ones on MPI_LOGICAL */
        q->n = (size_t)count * (size_t)(size / bsize);
    } else {
        if (predefined_op(op))
            return 0; /* MPI_REPLACE, MPI_NO_OP: not reductions of a collective */
        int commute = 0;
        MPI_Aint lb, extent, tlb, textent;
        PMPI_Op_commutative(op, &commute);
        PMPI_Type_get_extent(dt, &lb, &extent);
        PMPI_Type_get_true_extent(dt, &tlb, &textent);
        if (!size || (MPI_Aint)size != extent || extent != textent || tlb || lb)
            return 0; /* elements with holes: the user function needs the layout */
        if (c->nnodes > 1 && !commute)
            return 0;
        /* The user function reads the elements in dt's layout, so they stay
         * as they are in the buffer (gap-free, from its start): packed, a
         * type whose blocks are out of order in memory would reach it with
         * its fields swapped. */
        q->in_place_layout = 1;
        q->user = 1;
        q->commute = commute;
        q->base = dt;
        q->es = (size_t)size;
        q->n = (size_t)count;
    }
    /* The leaders' PMPI call and MPI_Pack count in int. */
    if (q->n > INT_MAX || q->n * q->es > INT_MAX)
        return 0;
    return 1;
}

/* A user op applied through the MPI library: inout = in op inout. */
typedef struct user_ctx {
    MPI_Datatype dt;
    MPI_Op op;
} user_ctx_t;

static void user_fn(const void *in, void *inout, size_t count, void *ctx)
{
    const user_ctx_t *u = ctx;
    PMPI_Reduce_local(in, inout, (int)count, u->dt, u->op); /* count <= INT_MAX: qualify() */
}

/* ---- 3. inside the node --------------------------------------------------------------- */

static int node_reduce(nc_mpi_comm_t *c, const qual_t *q, const void *in, void *out, int lroot)
{
    if (!c->team) {
        if (out && in != out && in != NUMACOLL_IN_PLACE && q->n)
            nc_copy(out, in, q->n * q->es);
        return 0;
    }
    if (q->user) {
        user_ctx_t u = {q->base, q->mop};
        numacoll_user_op_t uo = {user_fn, &u, q->es, q->commute};
        return lroot < 0 ? numacoll_allreduce_user(c->team, in, out, q->n, &uo)
                         : numacoll_reduce_user(c->team, in, out, q->n, &uo, lroot);
    }
    return lroot < 0 ? numacoll_allreduce(c->team, in, out, q->n, q->type, q->op)
                     : numacoll_reduce(c->team, in, out, q->n, q->type, q->op, lroot);
}

/* ---- 2r. a large call in rounds ------------------------------------------------------- */

/* One side of 2r: the user's contiguous bytes (dir); or a stream over its
 * elements and a round's worth of scratch memory; or, when one element of
 * the datatype is larger than a round (a stream would stage it whole
 * anyway), the whole side packed into scratch memory, as without rounds
 * (whole: dir is that scratch). */
typedef struct side {
    char *dir, *scratch;
    nc_dtype_stream_t s;
    int streamed, whole;
    void *buf;
    int count;
    MPI_Datatype dt;
} side_t;

static int side_open(side_t *d, const qual_t *q, void *buf, int count, MPI_Datatype dt,
                     MPI_Comm comm, size_t round, size_t bytes, int fill)
{
    memset(d, 0, sizeof *d);
    d->buf = buf;
    d->count = count;
    d->dt = dt;
    if (q->in_place_layout || (q->named && dt == q->base) ||
        nc_dtype_contiguous(buf, count, dt, &d->dir)) {
        if (!d->dir)
            d->dir = buf;
        return 0;
    }
    int esize = 0;
    PMPI_Type_size(dt, &esize);
    if ((size_t)esize > round) {
        d->whole = 1;
        if (!(d->dir = d->scratch = malloc(bytes)))
            return -1;
        if (fill) {
            int pos = 0;
            PMPI_Pack(buf, count, dt, d->scratch, (int)bytes, &pos, comm); /* <= INT_MAX */
        }
        return 0;
    }
    d->streamed = 1;
    if (nc_dtype_stream_init(&d->s, buf, count, dt, comm))
        return -1;
    return (d->scratch = malloc(round)) ? 0 : -1;
}

static void side_close(side_t *d)
{
    if (d->streamed)
        nc_dtype_stream_fini(&d->s);
    free(d->scratch);
}

/* The call's identity for 2r's agreement: what every member's call must
 * share, as maxima of (x, -x) pairs (a pair whose maxima are not opposite
 * differs between members). */
enum { AG_BYTES, AG_ROOT, AG_ELEM, AG_CODE, AG_N };

static int reduce_rounds(nc_mpi_comm_t *c, const qual_t *q, const void *sendbuf, void *recvbuf,
                         int count, MPI_Datatype dt, int all, int root, size_t pmax,
                         const char *name)
{
    const size_t bytes = q->n * q->es;
    const int reader = all || c->rank == root, in_place = sendbuf == MPI_IN_PLACE;
    const int lroot = all ? -1 : c->lrank_of[root];
    /* 2r. the call agreed: size, root, element size, type and op (the
     * rounds are small calls, in which only the readers compare) */
    const int64_t id[AG_N] = {(int64_t)bytes, root, (int64_t)q->es,
                              q->user ? (int64_t)1 << 20 | q->commute
                                      : (int64_t)q->type | (int64_t)q->op << 8};
    int64_t mine[2 * AG_N], most[2 * AG_N];
    for (int k = 0; k < AG_N; k++) {
        mine[2 * k] = id[k];
        mine[2 * k + 1] = -id[k];
    }
    int rc = numacoll_allreduce(c->team, mine, most, 2 * AG_N, NUMACOLL_INT64, NUMACOLL_MAX);
    if (rc == NUMACOLL_ERR_TRUNCATE || rc == NUMACOLL_ERR_MISMATCH || rc == NUMACOLL_ERR_ROOT) {
        /* another member is in another call: a smaller one, or another
         * collective */
        nc_log_error("%s: this rank passed %zu bytes, more than NUMACOLL_REDUCE_PACK_MAX (%zu), "
                     "another rank's call differs (fewer bytes, or another collective)",
                     name, bytes, pmax);
        return NUMACOLL_ERR_TRUNCATE;
    }
    if (rc)
        return rc;
    if (most[2 * AG_BYTES] != -most[2 * AG_BYTES + 1]) {
        nc_log_error("%s: the ranks passed from %lld to %lld bytes (this one %zu)", name,
                     (long long)-most[2 * AG_BYTES + 1], (long long)most[2 * AG_BYTES], bytes);
        return NUMACOLL_ERR_TRUNCATE;
    }
    if (most[2 * AG_ROOT] != -most[2 * AG_ROOT + 1]) {
        nc_log_error("%s: the ranks passed roots from %lld to %lld (this one %d)", name,
                     (long long)-most[2 * AG_ROOT + 1], (long long)most[2 * AG_ROOT], root);
        return NUMACOLL_ERR_ROOT;
    }
    if (most[2 * AG_ELEM] != -most[2 * AG_ELEM + 1] || most[2 * AG_CODE] != -most[2 * AG_CODE + 1]) {
        nc_log_error("%s: the ranks passed different types or ops", name);
        return NUMACOLL_ERR_MISMATCH;
    }
    size_t round = pmax / q->es * q->es;
    if (!round)
        round = q->es;
    MPI_Datatype sshift = MPI_DATATYPE_NULL, rshift = MPI_DATATYPE_NULL, sdt = dt, rdt = dt;
    void *sbuf = in_place ? recvbuf : (void *)sendbuf, *rbuf = recvbuf;
    if (sbuf == MPI_BOTTOM && !q->in_place_layout)
        nc_dtype_unbottom(&sbuf, &sdt, &sshift);
    if (reader && rbuf == MPI_BOTTOM && !q->in_place_layout)
        nc_dtype_unbottom(&rbuf, &rdt, &rshift);
    side_t in, out;
    int oom = side_open(&in, q, sbuf, count, sdt, c->comm, round, bytes, 1);
    oom |= reader ? side_open(&out, q, rbuf, count, rdt, c->comm, round, bytes, 0)
                  : (memset(&out, 0, sizeof out), 0);
    if (oom) {
        /* Out of memory: MPI's own failure mode here is to abort. */
        nc_log_error("%s: out of memory for scratch memory of rounds of %zu bytes", name, round);
        PMPI_Abort(c->comm, MPI_ERR_NO_MEM);
    }
    /* Every member takes every round (the same number: agreed), keeping its
     * first error, so none is left waiting for a round another skipped. */
    for (size_t off = 0; off < bytes;) {
        const size_t len = bytes - off < round ? bytes - off : round;
        const char *i = in.streamed ? in.scratch : in.dir + off;
        char *o = !reader ? NULL : out.streamed ? out.scratch : out.dir + off;
        if (in.streamed)
            nc_dtype_pack(&in.s, off, in.scratch, len);
        qual_t qr = *q;
        qr.n = len / q->es;
        const int rrc = node_reduce(c, &qr, i == o ? NUMACOLL_IN_PLACE : i, o, lroot);
        if (!rrc && reader && out.streamed)
            nc_dtype_unpack(&out.s, off, out.scratch, len);
        if (!rc)
            rc = rrc;
        off += len;
    }
    if (!rc && reader && out.whole) {
        int pos = 0;
        PMPI_Unpack(out.scratch, (int)bytes, &pos, rbuf, count, rdt, c->comm);
    }
    if (!rc && ((in.streamed && in.s.err) || (out.streamed && out.s.err)))
        rc = NUMACOLL_ERR_INVAL;
    side_close(&in);
    side_close(&out);
    if (sshift != MPI_DATATYPE_NULL)
        PMPI_Type_free(&sshift);
    if (rshift != MPI_DATATYPE_NULL)
        PMPI_Type_free(&rshift);
    return rc;
}

/* ---- the call ----------------------------------------------------------------------- */

/* Contiguous bytes of (buf, count, dt) in *out: the buffer itself (NULL
 * when the user passed NULL, which MPI allows with a count of 0), or packed
 * scratch (*scratch set; filled when fill). -1 when the scratch could not be
 * allocated, else 0. */
static int as_bytes(const qual_t *q, void *buf, int count, MPI_Datatype dt, size_t bytes,
                    MPI_Comm comm, int fill, char **out, char **scratch)
{
    char *start;
    if (q->in_place_layout || (q->named && dt == q->base)) {
        *out = buf;
        return 0;
    }
    if (nc_dtype_contiguous(buf, count, dt, &start)) {
        *out = start;
        return 0;
    }
    *out = *scratch = malloc(bytes ? bytes : 1);
    if (!*scratch)
        return -1;
    if (fill && bytes) {
        int pos = 0;
        PMPI_Pack(buf, count, dt, *scratch, (int)bytes, &pos, comm);
    }
    return 0;
}

static int reduce_call(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt,
                       MPI_Op op, int root, MPI_Comm comm, int coll)
{
    const int all = coll == NC_MPI_ALLREDUCE;
    const char *name = all ? "MPI_Allreduce" : "MPI_Reduce";
    nc_mpi_comm_t *c = nc_mpi_comm_get(comm, coll);
    qual_t q;
    if (c && !all && (root < 0 || root >= c->size)) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_ROOT);
        return MPI_ERR_ROOT;
    }
    if (!c || !qualify(c, count, dt, op, &q)) {
        int tsize = 0;
        if (count > 0 && dt != MPI_DATATYPE_NULL)
            PMPI_Type_size(dt, &tsize);
        nc_mpi_count(coll, 0, (size_t)(count > 0 ? count : 0) * (size_t)tsize);
        return all ? PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm)
                   : PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm);
    }
    nc_mpi_count_nc(c, coll, (size_t)count * (size_t)q.tsize); /* count >= 0: qualify() */
    const unsigned long long cma = nc_mpi_cma_mark(c);
    const size_t bytes = q.n * q.es;
    const int me = c->rank, reader = all || me == root;
    const int in_place = sendbuf == MPI_IN_PLACE;
    if (in_place && !reader) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_BUFFER); /* MPI_IN_PLACE only at the root */
        return MPI_ERR_BUFFER;
    }
    const size_t pmax = c->team ? (size_t)NC_CFG_NUM(&c->team->cfg, REDUCE_PACK_MAX) : 0;
    if (c->nnodes == 1 && c->team && bytes > pmax) {
        /* 2r. */
        const int rc = reduce_rounds(c, &q, sendbuf, recvbuf, count, dt, all, root, pmax, name);
        nc_mpi_count_cma(c, coll, cma);
        return rc ? nc_mpi_error(comm, rc, name) : MPI_SUCCESS;
    }
    if (c->nnodes == 1 && c->team && (q.named || q.in_place_layout) &&
        (!bytes || ((in_place || sendbuf != MPI_BOTTOM) && (!reader || recvbuf != MPI_BOTTOM)))) {
        /* One node, the user's buffers as they are (what 2 gives them): 3 */
        const void *in = in_place ? recvbuf : sendbuf;
        void *out = reader ? recvbuf : NULL;
        const int rc = node_reduce(c, &q, in == out ? NUMACOLL_IN_PLACE : in, out,
                                   all ? -1 : c->lrank_of[root]);
        nc_mpi_count_cma(c, coll, cma);
        return rc ? nc_mpi_error(comm, rc, name) : MPI_SUCCESS;
    }
    MPI_Datatype sshift = MPI_DATATYPE_NULL, rshift = MPI_DATATYPE_NULL, sdt = dt, rdt = dt;
    void *sbuf = (void *)sendbuf, *rbuf = recvbuf;
    if (sbuf == MPI_BOTTOM && bytes && !in_place && !q.in_place_layout)
        nc_dtype_unbottom(&sbuf, &sdt, &sshift);
    if (rbuf == MPI_BOTTOM && bytes && reader && !q.in_place_layout)
        nc_dtype_unbottom(&rbuf, &rdt, &rshift);

    /* 2. */
    char *sscratch = NULL, *rscratch = NULL, *in = NULL, *out = NULL;
    int rc = 0, oom = 0;
    if (reader) {
        oom = as_bytes(&q, rbuf, count, rdt, bytes, comm, in_place, &out, &rscratch);
        if (in_place)
            in = out;
        else
            oom |= as_bytes(&q, sbuf, count, sdt, bytes, comm, 1, &in, &sscratch);
    } else {
        oom = as_bytes(&q, sbuf, count, sdt, bytes, comm, 1, &in, &sscratch);
    }
    const int my_node = c->node_of[me];
    const int leader = c->leaders != MPI_COMM_NULL;
    /* A leader of several nodes needs a result buffer even when it is not
     * the root. */
    char *lscratch = NULL;
    if (c->nnodes > 1 && leader && !out && !(out = lscratch = malloc(bytes ? bytes : 1)))
        oom = -1;
    if (oom) {
        /* Out of memory: MPI's own failure mode here is to abort. */
        nc_log_error("%s: out of memory for %zu bytes of scratch", name, bytes);
        PMPI_Abort(comm, MPI_ERR_NO_MEM);
    }
    if (c->nnodes == 1) {
        /* 3. */
        rc = node_reduce(c, &q, in == out ? NUMACOLL_IN_PLACE : in, out,
                         all ? -1 : c->lrank_of[root]);
    } else {
        /* 3. to the leader (local rank 0) */
        char *nout = leader ? out : NULL;
        rc = node_reduce(c, &q, in == nout ? NUMACOLL_IN_PLACE : in, nout, 0);
        /* 4. */
        if (leader) {
            const int root_node = all ? 0 : c->node_of[root];
            nc_mpi_count_leader(all ? NC_MPI_ALLREDUCE : NC_MPI_REDUCE, 1);
            if (all)
                nc_leader_allreduce(c, MPI_IN_PLACE, out, (int)q.n, q.base, q.mop);
            else if (my_node == root_node && root_node == 0)
                nc_leader_reduce(c, MPI_IN_PLACE, out, (int)q.n, q.base, q.mop, root_node);
            else if (my_node == root_node) {
                /* Not MPI_IN_PLACE: MPICH 4.0's in-place reduce to a root other
                 * than 0 crashes beyond 512 ints (pmodels/mpich#6540). */
                char *copy = malloc(bytes ? bytes : 1);
                if (!copy)
                    PMPI_Abort(comm, MPI_ERR_NO_MEM);
                nc_copy(copy, out, bytes);
                nc_leader_reduce(c, copy, out, (int)q.n, q.base, q.mop, root_node);
                free(copy);
            } else
                nc_leader_reduce(c, out, NULL, (int)q.n, q.base, q.mop, root_node);
        }
        /* 5. */
        if (all && c->team) {
            int brc = numacoll_bcast(c->team, out, bytes, 0);
            if (!rc)
                rc = brc;
        } else if (!all && my_node == c->node_of[root] && c->lrank_of[root] != 0) {
            if (leader)
                nc_node_send(c, out, (int)bytes, MPI_BYTE, c->lrank_of[root]);
            else if (me == root)
                nc_node_recv(c, out, (int)bytes, MPI_BYTE, 0);
        }
    }
    /* 6. */
    if (reader && rscratch && bytes) {
        int pos = 0;
        PMPI_Unpack(rscratch, (int)bytes, &pos, rbuf, count, rdt, comm);
    }
    free(sscratch);
    free(rscratch);
    free(lscratch);
    if (sshift != MPI_DATATYPE_NULL)
        PMPI_Type_free(&sshift);
    if (rshift != MPI_DATATYPE_NULL)
        PMPI_Type_free(&rshift);
    nc_mpi_count_cma(c, coll, cma);
    return rc ? nc_mpi_error(comm, rc, name) : MPI_SUCCESS;
}

int nc_mpi_reduce(const void *sendbuf, void *recvbuf, int count, nc_mpi_word_t datatype,
                  nc_mpi_word_t op, int root, nc_mpi_word_t comm)
{
    return reduce_call(sendbuf, recvbuf, count, NC_MPI_HANDLE(MPI_Datatype, datatype),
                       NC_MPI_HANDLE(MPI_Op, op), root, NC_MPI_HANDLE(MPI_Comm, comm),
                       NC_MPI_REDUCE);
}

int nc_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, nc_mpi_word_t datatype,
                     nc_mpi_word_t op, nc_mpi_word_t comm)
{
    return reduce_call(sendbuf, recvbuf, count, NC_MPI_HANDLE(MPI_Datatype, datatype),
                       NC_MPI_HANDLE(MPI_Op, op), -1, NC_MPI_HANDLE(MPI_Comm, comm),
                       NC_MPI_ALLREDUCE);
}
