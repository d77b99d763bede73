/*
 * Reduce and Allreduce between real processes (the core, no MPI). Inputs are
 * generated from (seed, rank, element index), so every member computes the
 * expected result itself: the left fold in rank order ((x0 op x1) op x2) ...
 * of the inputs of all members, with the test's own kernels. Results are
 * compared exactly: integers with wrap-around (unsigned arithmetic), floating
 * point bit for bit (long double: the 10 bytes of the x87 value, not the
 * padding), complex part by part, MINLOC/MAXLOC pairs field by field (ties:
 * lowest index), user ops against the product in rank order (a0 a1 ... ap-1).
 * Around every buffer GUARD bytes must stay untouched, the sendbuf must not
 * change, and a non-root's recvbuf in reduce must keep its canary.
 *
 *   test_reduce ops [PMIN PMAX]   every valid op x type, counts 0 1 7 100, allreduce and
 *                                 reduce at every root, in place (IN_PLACE / NULL) and not;
 *                                 invalid pairs return NUMACOLL_ERR_INVAL; p = 1..8
 *   test_reduce sizes [64m2 [p4]] double sum, int32 bxor (uint8 sum at the boundaries):
 *                                 4 KiB, 64 KiB, 256 KiB -1/0/+1, 1 MiB + 3 elements, 3 MiB;
 *                                 64 MiB at p = 2 and 4 (64m2: at p = 2 only); every root
 *                                 at p = 3; p = 1 2 3 4 8 (p4: up to 4)
 *   test_reduce user              2x2 matrix product mod 2^32 (not commutative) and a
 *                                 12-byte sum (commutative), counts 0 1 5 65539 (1 MiB),
 *                                 p = 1..8; 1 Mi elements at p = 2 and 4
 *   test_reduce repro             100 allreduces of 100000 doubles with random sleeps:
 *                                 bitwise the left fold every time; p = 2 3 4 8
 *   test_reduce mismatch          member 1 (or 0) passes another count / type / op / root:
 *                                 the error on every member (allreduce) or the root (reduce),
 *                                 no hang, the team works afterwards; small and large calls
 *                                 and a member on the other path; p = 2 3 4
 *   test_reduce mismatch_user     user ops with different element sizes, the same bytes
 *   test_reduce dead              a member SIGKILLs itself before a call: errors, no hang
 *   test_reduce dead_mid          a member killed while large calls run back to back: errors,
 *                                 no hang, no write into a buffer after the error; p = 3
 *   test_reduce agree             member 0 alone sees no shared cache: the automatic CMA
 *                                 choice falls back to the slots on every member; p = 3
 *   test_reduce fault             (CMA) buffers a peer cannot read or write: FAULT where the
 *                                 result is incomplete, the team works on; buffers 16 bytes
 *                                 apart modulo a page (copied through a bounce); p = 2
 *   test_reduce local             numacoll_reduce_local, numacoll_type_size, numacoll_op_valid
 *   test_reduce interleave [SEED] seeded random bcast / barrier / reduce / allreduce,
 *                                 0..1 MiB, on one team; p = 2 3 4 8
 *   test_reduce wrap              interleave (to 256 KiB) with every counter starting near
 *                                 UINT32_MAX; p = 3 4
 *   test_reduce wrapslots         across the wrap with a non-root S - 1 rounds ahead
 *                                 (run with REDUCE_SLOTS=3); p = 2
 * Arguments NAME=VALUE set tunables first (numacoll_param_set), e.g.
 *   test_reduce ops 1 4 REDUCE_SMALL_MAX=0 REDUCE_FRAG_SIZE=256 REDUCE_SLOTS=2
 * expect_cma=1 checks that every call of p > 1 above NUMACOLL_REDUCE_SMALL_MAX
 * went by CMA (NUMACOLL_TRANSPORT=cma), expect_cma=0 that none did,
 * expect_cma=2 the automatic rule where the members share no cache (every
 * reduce from nc_reduce_cma_auto(p), no allreduce), expect_cma=3 NUMACOLL_REDUCE_CMA_MIN and
 * NUMACOLL_ALLREDUCE_CMA_MIN as set, each 0 being that rule. expect_lines=1 checks
 * that exactly the calls a call line takes went by one (coll/nc_reduce.c "Line
 * calls"), expect_lines=0 that none did (with REDUCE_LINES=0).
 */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/nc_team.h" /* nc_test_seq0 */
#include "nc_forktest.h"
#include "numacoll.h"

#define MAXP 8
#define GUARD 4096       /* bytes checked before and after every buffer */
#define CANARY 0x5A      /* a non-root's recvbuf in reduce */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* bytes of a long double that hold its value (x87: 10 of 16, the rest is padding) */
#define LD_SIG ((size_t)(LDBL_MANT_DIG == 64 ? 10 : sizeof(long double)))

/* ---- the element types ---------------------------------------------------------
 * The predefined types, then two user-op "types" of this test (UT_MAT, UT_TRI)
 * so that one call path and one checker serve both. */
enum { UT_MAT = NUMACOLL_TYPE_COUNT, UT_TRI, NTYPES };
enum kind { K_SINT, K_UINT, K_FLT, K_CPLX, K_BOOL, K_PAIR, K_UMAT, K_UTRI };

typedef struct { float v; int i; } pair_float_t;
typedef struct { double v; int i; } pair_double_t;
typedef struct { long v; int i; } pair_long_t;
typedef struct { int v; int i; } pair_int_t;
typedef struct { short v; int i; } pair_short_t;
typedef struct { long double v; int i; } pair_ldouble_t;
typedef struct { float v; float i; } pair_2float_t;
typedef struct { double v; double i; } pair_2double_t;

typedef struct tdesc {
    const char *name;
    size_t size;    /* sizeof the C type */
    int kind;
    int fk;         /* K_FLT, K_CPLX: 0 float, 1 double, 2 long double */
    size_t part;    /* K_CPLX: bytes of one part; K_PAIR: bytes of the value */
    size_t sig;     /* significant bytes of a real part or pair value (10 for long double) */
    size_t idx_off; /* K_PAIR: offset of the index ... */
    int ik;         /* ... an int (0), float (1) or double (2) */
} tdesc_t;

#define PAIR(T, name, vt, sig) {name, sizeof(T), K_PAIR, 0, sizeof(vt), sig, offsetof(T, i), 0}
#define PAIRF(T, name, vt, ik) {name, sizeof(T), K_PAIR, 0, sizeof(vt), sizeof(vt), offsetof(T, i), ik}
static const size_t idx_size[3] = {sizeof(int), sizeof(float), sizeof(double)};
static const tdesc_t T[NTYPES] = {
    [NUMACOLL_INT8] = {"INT8", 1, K_SINT, 0, 1, 1, 0},
    [NUMACOLL_INT16] = {"INT16", 2, K_SINT, 0, 2, 2, 0},
    [NUMACOLL_INT32] = {"INT32", 4, K_SINT, 0, 4, 4, 0},
    [NUMACOLL_INT64] = {"INT64", 8, K_SINT, 0, 8, 8, 0},
    [NUMACOLL_UINT8] = {"UINT8", 1, K_UINT, 0, 1, 1, 0},
    [NUMACOLL_UINT16] = {"UINT16", 2, K_UINT, 0, 2, 2, 0},
    [NUMACOLL_UINT32] = {"UINT32", 4, K_UINT, 0, 4, 4, 0},
    [NUMACOLL_UINT64] = {"UINT64", 8, K_UINT, 0, 8, 8, 0},
    [NUMACOLL_FLOAT] = {"FLOAT", sizeof(float), K_FLT, 0, sizeof(float), sizeof(float), 0},
    [NUMACOLL_DOUBLE] = {"DOUBLE", sizeof(double), K_FLT, 1, sizeof(double), sizeof(double), 0},
    [NUMACOLL_LONG_DOUBLE] = {"LONG_DOUBLE", sizeof(long double), K_FLT, 2, sizeof(long double),
                              LD_SIG, 0},
    [NUMACOLL_FLOAT_COMPLEX] = {"FLOAT_COMPLEX", sizeof(float _Complex), K_CPLX, 0,
                                sizeof(float), sizeof(float), 0},
    [NUMACOLL_DOUBLE_COMPLEX] = {"DOUBLE_COMPLEX", sizeof(double _Complex), K_CPLX, 1,
                                 sizeof(double), sizeof(double), 0},
    [NUMACOLL_LONG_DOUBLE_COMPLEX] = {"LONG_DOUBLE_COMPLEX", sizeof(long double _Complex), K_CPLX,
                                      2, sizeof(long double), LD_SIG, 0},
    [NUMACOLL_BOOL] = {"BOOL", sizeof(_Bool), K_BOOL, 0, 1, 1, 0},
    [NUMACOLL_FLOAT_INT] = PAIR(pair_float_t, "FLOAT_INT", float, sizeof(float)),
    [NUMACOLL_DOUBLE_INT] = PAIR(pair_double_t, "DOUBLE_INT", double, sizeof(double)),
    [NUMACOLL_LONG_INT] = PAIR(pair_long_t, "LONG_INT", long, sizeof(long)),
    [NUMACOLL_2INT] = PAIR(pair_int_t, "2INT", int, sizeof(int)),
    [NUMACOLL_SHORT_INT] = PAIR(pair_short_t, "SHORT_INT", short, sizeof(short)),
    [NUMACOLL_LONG_DOUBLE_INT] = PAIR(pair_ldouble_t, "LONG_DOUBLE_INT", long double, LD_SIG),
    [NUMACOLL_2FLOAT] = PAIRF(pair_2float_t, "2FLOAT", float, 1),
    [NUMACOLL_2DOUBLE] = PAIRF(pair_2double_t, "2DOUBLE", double, 2),
    [UT_MAT] = {"user:mat2x2", 16, K_UMAT, 0, 16, 16, 0},
    [UT_TRI] = {"user:sum3x32", 12, K_UTRI, 0, 12, 12, 0},
};

static const char *const op_names[NUMACOLL_OP_COUNT] = {
    "SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC"};

static int is_user(int t)
{
    return t >= UT_MAT;
}

/* MPI's table, as the header states it. */
static int expect_valid(int op, int t)
{
    int k = T[t].kind, num = k == K_SINT || k == K_UINT;
    switch (op) {
    case NUMACOLL_SUM:
    case NUMACOLL_PROD:
        return num || k == K_FLT || k == K_CPLX;
    case NUMACOLL_MIN:
    case NUMACOLL_MAX:
        return num || k == K_FLT;
    case NUMACOLL_LAND:
    case NUMACOLL_LOR:
    case NUMACOLL_LXOR:
        return num || k == K_BOOL;
    case NUMACOLL_BAND:
    case NUMACOLL_BOR:
    case NUMACOLL_BXOR:
        return num;
    default:
        return k == K_PAIR;
    }
}

/* ---- the user ops -------------------------------------------------------------- */
typedef struct uctx {
    unsigned magic;
} uctx_t;
static uctx_t mat_ctx = {0x6d617432u}, tri_ctx = {0x74726933u};
static int uop_bad; /* set in this process when a user function saw a wrong ctx */

/* z = x y, 2x2 row-major, mod 2^32 */
static void mat_mul(const uint32_t *x, const uint32_t *y, uint32_t *z)
{
    z[0] = x[0] * y[0] + x[1] * y[2];
    z[1] = x[0] * y[1] + x[1] * y[3];
    z[2] = x[2] * y[0] + x[3] * y[2];
    z[3] = x[2] * y[1] + x[3] * y[3];
}

/* inout = in * inout (MPI_User_function: inout = in op inout) */
static void mat_fn(const void *in, void *inout, size_t count, void *ctx)
{
    if (ctx != &mat_ctx || mat_ctx.magic != 0x6d617432u)
        uop_bad = 1;
    const unsigned char *a = in;
    unsigned char *b = inout;
    for (size_t k = 0; k < count; k++) {
        uint32_t x[4], y[4], z[4];
        memcpy(x, a + 16 * k, 16);
        memcpy(y, b + 16 * k, 16);
        mat_mul(x, y, z);
        memcpy(b + 16 * k, z, 16);
    }
}

static void tri_fn(const void *in, void *inout, size_t count, void *ctx)
{
    if (ctx != &tri_ctx || tri_ctx.magic != 0x74726933u)
        uop_bad = 1;
    const unsigned char *a = in;
    unsigned char *b = inout;
    for (size_t k = 0; k < count; k++) {
        uint32_t x[3], y[3];
        memcpy(x, a + 12 * k, 12);
        memcpy(y, b + 12 * k, 12);
        for (int j = 0; j < 3; j++)
            y[j] += x[j];
        memcpy(b + 12 * k, y, 12);
    }
}

static const numacoll_user_op_t mat_op = {mat_fn, &mat_ctx, 16, 0};
static const numacoll_user_op_t tri_op = {tri_fn, &tri_ctx, 12, 1};

/* ---- inputs -------------------------------------------------------------------- */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t seed, int rank, size_t k)
{
    return mix64(seed ^ mix64(((uint64_t)(unsigned)rank << 48) ^ (uint64_t)k));
}

static double u01(uint64_t h)
{
    return (double)(h >> 11) * 0x1p-53;
}

/* A random double: for PROD in +-[0.5, 1.5) (p = 8 stays finite), otherwise
 * +-[1, 2) * 2^(-20..20), so that the order of a sum matters. */
static double gen_double(uint64_t h, int op)
{
    double s = (h & 1) ? -1.0 : 1.0;
    if (op == NUMACOLL_PROD)
        return s * (0.5 + u01(h));
    return s * ldexp(1.0 + u01(h), (int)(mix64(h) % 41) - 20);
}

static void gen_real(int fk, uint64_t h, int op, void *out)
{
    double d = gen_double(h, op);
    if (fk == 0) {
        float f = (float)d;
        memcpy(out, &f, sizeof f);
    } else if (fk == 1) {
        memcpy(out, &d, sizeof d);
    } else {
        /* fill the low bits of the 64-bit x87 mantissa too */
        long double l = (long double)d;
        l += l * ldexpl((long double)u01(mix64(h ^ 7)), -54);
        memset(out, 0, sizeof l); /* the padding of l is not defined: zeros, always */
        memcpy(out, &l, LD_SIG);
    }
}

static void st_int(void *p, size_t n, uint64_t v)
{
    uint8_t b = (uint8_t)v;
    uint16_t s = (uint16_t)v;
    uint32_t w = (uint32_t)v;
    switch (n) {
    case 1: memcpy(p, &b, 1); break;
    case 2: memcpy(p, &s, 2); break;
    case 4: memcpy(p, &w, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

/* Sign- or zero-extended to 64 bits. */
static uint64_t ld_int(const void *p, size_t n, int sgn)
{
    uint8_t b;
    uint16_t s;
    uint32_t w;
    uint64_t v;
    switch (n) {
    case 1: memcpy(&b, p, 1); return sgn ? (uint64_t)(int64_t)(int8_t)b : b;
    case 2: memcpy(&s, p, 2); return sgn ? (uint64_t)(int64_t)(int16_t)s : s;
    case 4: memcpy(&w, p, 4); return sgn ? (uint64_t)(int64_t)(int32_t)w : w;
    default: memcpy(&v, p, 8); return v;
    }
}

/* A pair's index of kind ik (tdesc_t) at p, as a double (exact for all three). */
static double idx_get(const unsigned char *p, int ik)
{
    int i;
    float f;
    double d;
    switch (ik) {
    case 0: memcpy(&i, p, sizeof i); return i;
    case 1: memcpy(&f, p, sizeof f); return f;
    default: memcpy(&d, p, sizeof d); return d;
    }
}

static void idx_put(unsigned char *p, int ik, int v)
{
    const float f = (float)v;
    const double d = v;
    switch (ik) {
    case 0: memcpy(p, &v, sizeof v); break;
    case 1: memcpy(p, &f, sizeof f); break;
    default: memcpy(p, &d, sizeof d); break;
    }
}

/* Pair values come from four values so that ties are frequent; two of them
 * differ only where a narrower type would not see it (long vs int, long
 * double vs double, ...). Indices are random, not the rank. */
static void gen_pair(int t, uint64_t h, void *out)
{
    int j = (int)(h % 4), idx = (int)(mix64(h ^ 0xabc) % 2001) - 1000;
    memset(out, 0, T[t].size);
    switch (t) {
    case NUMACOLL_FLOAT_INT:
    case NUMACOLL_2FLOAT: {
        static const float v[4] = {1.0f, 1.0f + 0x1p-20f, -2.0f, 3.0f};
        memcpy(out, &v[j], sizeof v[j]);
        break;
    }
    case NUMACOLL_DOUBLE_INT:
    case NUMACOLL_2DOUBLE: {
        static const double v[4] = {1.0, 1.0 + 0x1p-50, -2.0, 3.0};
        memcpy(out, &v[j], sizeof v[j]);
        break;
    }
    case NUMACOLL_LONG_INT: {
        static const long v[4] = {1L << 40, (1L << 40) + 1, -2, 3};
        memcpy(out, &v[j], sizeof v[j]);
        break;
    }
    case NUMACOLL_2INT: {
        static const int v[4] = {1, 2, -2, 3};
        memcpy(out, &v[j], sizeof v[j]);
        break;
    }
    case NUMACOLL_SHORT_INT: {
        static const short v[4] = {1, 2, -2, 3};
        memcpy(out, &v[j], sizeof v[j]);
        break;
    }
    default: {
        static const long double v[4] = {1.0L, 1.0L + 0x1p-60L, -2.0L, 3.0L};
        memcpy(out, &v[j], sizeof v[j]);
        break;
    }
    }
    idx_put((unsigned char *)out + T[t].idx_off, T[t].ik, idx);
}

/* Element k of member `rank`'s input for the call `seed`. */
static void gen_elem(int t, int op, uint64_t seed, int rank, size_t k, void *out)
{
    const tdesc_t *d = &T[t];
    uint64_t h = hash3(seed, rank, k);
    switch (d->kind) {
    case K_SINT:
    case K_UINT: {
        /* zeros: 1 in 3 for the logical ops, 1 in 8 otherwise */
        uint64_t zero = op >= NUMACOLL_LAND && op <= NUMACOLL_LXOR ? 3 : 8;
        st_int(out, d->size, h % zero == 0 ? 0 : mix64(h));
        break;
    }
    case K_BOOL: {
        _Bool b = (h >> 7) & 1;
        memcpy(out, &b, 1);
        break;
    }
    case K_FLT:
        gen_real(d->fk, h, op, out);
        break;
    case K_CPLX:
        gen_real(d->fk, h, op, out);
        gen_real(d->fk, mix64(h), op, (unsigned char *)out + d->part);
        break;
    case K_PAIR:
        gen_pair(t, h, out);
        break;
    default: {
        uint32_t w[4];
        for (int j = 0; j < 4; j++)
            w[j] = (uint32_t)(mix64(h + (uint64_t)j) >> 16);
        memcpy(out, w, d->size);
        break;
    }
    }
}

/* ---- the reference kernels: acc = acc op x ------------------------------------------ */
static uint64_t int_op(int op, uint64_t a, uint64_t b, int sgn)
{
    switch (op) {
    case NUMACOLL_SUM: return a + b;
    case NUMACOLL_PROD: return a * b;
    case NUMACOLL_MIN: return sgn ? ((int64_t)b < (int64_t)a ? b : a) : (b < a ? b : a);
    case NUMACOLL_MAX: return sgn ? ((int64_t)b > (int64_t)a ? b : a) : (b > a ? b : a);
    case NUMACOLL_LAND: return a && b;
    case NUMACOLL_LOR: return a || b;
    case NUMACOLL_LXOR: return !a != !b;
    case NUMACOLL_BAND: return a & b;
    case NUMACOLL_BOR: return a | b;
    default: return a ^ b;
    }
}

#define REAL_COMBINE(TY)                                                                  \
    do {                                                                                  \
        TY a, b;                                                                          \
        memcpy(&a, acc, sizeof a);                                                        \
        memcpy(&b, x, sizeof b);                                                          \
        a = op == NUMACOLL_SUM ? a + b : op == NUMACOLL_PROD ? a * b                      \
            : op == NUMACOLL_MIN ? (b < a ? b : a) : (b > a ? b : a);                     \
        memcpy(acc, &a, sizeof a);                                                        \
    } while (0)

#define CPLX_COMBINE(TY)                                                                  \
    do {                                                                                  \
        TY _Complex a, b;                                                                 \
        memcpy(&a, acc, sizeof a);                                                        \
        memcpy(&b, x, sizeof b);                                                          \
        a = op == NUMACOLL_SUM ? a + b : a * b;                                           \
        memcpy(acc, &a, sizeof a);                                                        \
    } while (0)

#define PAIR_CMP(TY)                                                                      \
    do {                                                                                  \
        TY a, b;                                                                          \
        memcpy(&a, x, sizeof a);                                                          \
        memcpy(&b, acc, sizeof b);                                                        \
        c = (a > b) - (a < b);                                                            \
    } while (0)

static void combine(int t, int op, void *acc, const void *x)
{
    const tdesc_t *d = &T[t];
    switch (d->kind) {
    case K_SINT:
    case K_UINT: {
        int sgn = d->kind == K_SINT;
        st_int(acc, d->size, int_op(op, ld_int(acc, d->size, sgn), ld_int(x, d->size, sgn), sgn));
        break;
    }
    case K_BOOL: {
        _Bool a, b;
        memcpy(&a, acc, 1);
        memcpy(&b, x, 1);
        a = (_Bool)int_op(op, a, b, 0);
        memcpy(acc, &a, 1);
        break;
    }
    case K_FLT:
        if (d->fk == 0)
            REAL_COMBINE(float);
        else if (d->fk == 1)
            REAL_COMBINE(double);
        else
            REAL_COMBINE(long double);
        break;
    case K_CPLX:
        if (d->fk == 0)
            CPLX_COMBINE(float);
        else if (d->fk == 1)
            CPLX_COMBINE(double);
        else
            CPLX_COMBINE(long double);
        break;
    case K_PAIR: {
        int c; /* sign of x.v - acc.v */
        switch (t) {
        case NUMACOLL_FLOAT_INT: case NUMACOLL_2FLOAT: PAIR_CMP(float); break;
        case NUMACOLL_DOUBLE_INT: case NUMACOLL_2DOUBLE: PAIR_CMP(double); break;
        case NUMACOLL_LONG_INT: PAIR_CMP(long); break;
        case NUMACOLL_2INT: PAIR_CMP(int); break;
        case NUMACOLL_SHORT_INT: PAIR_CMP(short); break;
        default: PAIR_CMP(long double); break;
        }
        const double xi = idx_get((const unsigned char *)x + d->idx_off, d->ik),
                     ai = idx_get((unsigned char *)acc + d->idx_off, d->ik);
        if (op == NUMACOLL_MINLOC ? c < 0 : c > 0)
            memcpy(acc, x, d->size);
        else if (c == 0 && xi < ai)
            memcpy((unsigned char *)acc + d->idx_off, (const unsigned char *)x + d->idx_off,
                   idx_size[d->ik]);
        break;
    }
    case K_UMAT: {
        uint32_t a[4], b[4], z[4];
        memcpy(a, acc, 16);
        memcpy(b, x, 16);
        mat_mul(a, b, z);
        memcpy(acc, z, 16);
        break;
    }
    default: {
        uint32_t a[3], b[3];
        memcpy(a, acc, 12);
        memcpy(b, x, 12);
        for (int j = 0; j < 3; j++)
            a[j] += b[j];
        memcpy(acc, a, 12);
        break;
    }
    }
}

/* The two-level order (include/numacoll.h): member k's domain is named by its
 * lowest member: k % v under NUMACOLL_TEST_DOMAINS=v, else the team's
 * NUMA leaders (numacoll_team_leaders, set by team_up); before a team, and
 * with NUMACOLL_REDUCE_NUMA=0, every member is its own domain (rank order). */
static int g_leaders[MAXP], g_have_leaders;
static int g_lead[MAXP], g_lead_set; /* leader_of(), worked out once per process */

static int leader_of(int k)
{
    if (!g_lead_set) {
        const char *v = getenv("NUMACOLL_TEST_DOMAINS");
        char numa[16] = "1";
        numacoll_param_get("NUMACOLL_REDUCE_NUMA", numa, sizeof numa, NULL);
        for (int j = 0; j < MAXP; j++)
            g_lead[j] = !strcmp(numa, "0")  ? j
                        : v && atoi(v) > 0 ? j % atoi(v)
                        : g_have_leaders   ? g_leaders[j]
                                           : j;
        g_lead_set = 1;
    }
    return g_lead[k];
}

/* Element k of the expected result: the left fold in rank order, or in the
 * two-level order (each domain's left fold, then theirs) for the predefined
 * ops and the commutative user op. */
static void ref_elem(int t, int op, uint64_t seed, int p, size_t k, void *acc)
{
    unsigned char x[64], part[64];
    if (t == UT_MAT) { /* not commutative: rank order always */
        gen_elem(t, op, seed, 0, k, acc);
        for (int r = 1; r < p; r++) {
            gen_elem(t, op, seed, r, k, x);
            combine(t, op, acc, x);
        }
        return;
    }
    for (int d = 0; d < p; d++) {
        if (leader_of(d) != d)
            continue;
        gen_elem(t, op, seed, d, k, part);
        for (int r = d + 1; r < p; r++)
            if (leader_of(r) == d) {
                gen_elem(t, op, seed, r, k, x);
                combine(t, op, part, x);
            }
        if (d == 0)
            memcpy(acc, part, T[t].size);
        else
            combine(t, op, acc, part);
    }
}

/* Equal where it matters: the 10 bytes of a long double, the fields of a pair. */
static int elem_eq(int t, const void *a, const void *b)
{
    const tdesc_t *d = &T[t];
    const unsigned char *x = a, *y = b;
    switch (d->kind) {
    case K_FLT:
        return !memcmp(x, y, d->sig);
    case K_CPLX:
        return !memcmp(x, y, d->sig) && !memcmp(x + d->part, y + d->part, d->sig);
    case K_PAIR:
        return !memcmp(x, y, d->sig) && !memcmp(x + d->idx_off, y + d->idx_off, idx_size[d->ik]);
    default:
        return !memcmp(x, y, d->size);
    }
}

static void hex(const void *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

/* ---- buffers with guards ----------------------------------------------------------- */
typedef struct bufs {
    unsigned char *s, *r; /* GUARD bytes after the start of each allocation */
    size_t cap;
} bufs_t;

static int bufs_alloc(bufs_t *b, size_t cap)
{
    b->cap = cap;
    b->s = malloc(cap + 2 * GUARD);
    b->r = malloc(cap + 2 * GUARD);
    if (!b->s || !b->r)
        return 1;
    b->s += GUARD;
    b->r += GUARD;
    return 0;
}

static void bufs_free(bufs_t *b)
{
    free(b->s - GUARD);
    free(b->r - GUARD);
}

static unsigned char guard_byte(size_t i)
{
    return (unsigned char)(0xC3 ^ (i * 7));
}

static void guard_fill(unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < GUARD; i++) {
        buf[(ptrdiff_t)i - GUARD] = guard_byte(i);
        buf[n + i] = guard_byte(i + GUARD);
    }
}

/* -1 when intact, else the offset of the first changed byte relative to buf. */
static long guard_bad(const unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < GUARD; i++) {
        if (buf[(ptrdiff_t)i - GUARD] != guard_byte(i))
            return (long)i - GUARD;
        if (buf[n + i] != guard_byte(i + GUARD))
            return (long)(n + i);
    }
    return -1;
}

/* ---- one checked call ---------------------------------------------------------------- */
typedef struct call {
    int t;         /* numacoll_type_t, or UT_MAT / UT_TRI */
    int op;        /* ignored for user types */
    size_t count;
    int root;      /* -1: allreduce */
    int inplace;   /* where the input is in recvbuf: 0 no, 1 NUMACOLL_IN_PLACE, 2 NULL */
    int nullrecv;  /* reduce: non-roots pass recvbuf = NULL */
    uint64_t seed;
} call_t;

static const char *describe(const call_t *c, int p, int rank, char *out, size_t len)
{
    char root[16] = "";
    if (c->root >= 0)
        snprintf(root, sizeof root, " root=%d", c->root);
    snprintf(out, len, "%s %s %s count=%zu p=%d rank=%d%s%s%s seed=%#llx",
             c->root < 0 ? "allreduce" : "reduce", T[c->t].name,
             is_user(c->t) ? "" : op_names[c->op], c->count, p, rank, root,
             c->inplace == 1 ? " IN_PLACE" : c->inplace == 2 ? " in-place(NULL)" : "",
             c->nullrecv && c->root >= 0 ? " nonroot-recv=NULL" : "", (unsigned long long)c->seed);
    return out;
}

static int check_result(const call_t *c, int p, int rank, const unsigned char *buf)
{
    size_t es = T[c->t].size;
    unsigned char want[64];
    for (size_t k = 0; k < c->count; k++) {
        ref_elem(c->t, c->op, c->seed, p, k, want);
        if (!elem_eq(c->t, buf + k * es, want)) {
            size_t bad = 0;
            for (size_t j = k; j < c->count; j++) {
                ref_elem(c->t, c->op, c->seed, p, j, want);
                bad += !elem_eq(c->t, buf + j * es, want);
            }
            ref_elem(c->t, c->op, c->seed, p, k, want);
            char w[130], g[130], what[200];
            hex(want, es, w);
            hex(buf + k * es, es, g);
            CHECK(0, "%s: element %zu (of %zu wrong) is %s, expected %s",
                  describe(c, p, rank, what, sizeof what), k, bad, g, w);
        }
    }
    return 0;
}

static int g_expect_cma = -1; /* expect_cma=0|1, -1: not checked */
static int g_expect_fwd = -1; /* expect_fwd=0|1, -1: not checked (mode ops) */
static int g_expect_lines = -1; /* expect_lines=0|1: line calls on, checked; -1: not */
static size_t g_small_max;    /* NUMACOLL_REDUCE_SMALL_MAX of this run */
/* expect_cma: by CMA from these sizes ([0] reduce, [1] allreduce): 1: every
 * large call; 2: the automatic rule on members that share no cache (reduce
 * from nc_reduce_cma_auto(p), here 0; allreduce never); 3:
 * NUMACOLL_REDUCE_CMA_MIN and NUMACOLL_ALLREDUCE_CMA_MIN, as set for the run */
static size_t g_cma_min[2];

static int run_call(numacoll_team_t *tm, int rank, int p, const call_t *c, bufs_t *b)
{
    const tdesc_t *d = &T[c->t];
    size_t es = d->size, n = c->count * es;
    int gets = c->root < 0 || c->root == rank;
    int inpl = c->inplace && gets;
    unsigned char *in = inpl ? b->r : b->s, e[64];
    char what[200];
    if (n > b->cap) {
        fprintf(stderr, "test bug: %zu bytes > capacity %zu\n", n, b->cap);
        return 1;
    }
    guard_fill(b->s, n);
    guard_fill(b->r, n);
    for (size_t k = 0; k < c->count; k++)
        gen_elem(c->t, c->op, c->seed, rank, k, in + k * es);
    if (!inpl)
        memset(b->r, CANARY, n);
    const void *sarg = inpl ? (c->inplace == 1 ? NUMACOLL_IN_PLACE : NULL) : b->s;
    void *rarg = !gets && c->nullrecv ? NULL : b->r;
    int rc;
    uop_bad = 0;
    const uint64_t cma0 = tm->reduce_cma, lines0 = tm->reduce_lines;
    if (is_user(c->t)) {
        const numacoll_user_op_t *u = c->t == UT_MAT ? &mat_op : &tri_op;
        rc = c->root < 0 ? numacoll_allreduce_user(tm, sarg, rarg, c->count, u)
                         : numacoll_reduce_user(tm, sarg, rarg, c->count, u, c->root);
    } else {
        rc = c->root < 0 ? numacoll_allreduce(tm, sarg, rarg, c->count, c->t, c->op)
                         : numacoll_reduce(tm, sarg, rarg, c->count, c->t, c->op, c->root);
    }
    CHECK(rc == 0, "%s: returned %d (%s)", describe(c, p, rank, what, sizeof what), rc,
          numacoll_strerror(rc));
    describe(c, p, rank, what, sizeof what);
    CHECK(!uop_bad, "%s: the user function got a wrong ctx", what);
    if (g_expect_cma >= 0) {
        /* above the small size, from the switch point of the kind of call */
        size_t cmin = g_cma_min[c->root < 0];
        if (g_expect_cma >= 2 && !cmin)
            cmin = nc_reduce_cma_auto(p);
        const int want = g_expect_cma && p > 1 && n > g_small_max && n >= cmin;
        CHECK((tm->reduce_cma > cma0) == want, "%s: %s by CMA", what, want ? "not" : "went");
    }
    if (g_expect_lines >= 0) {
        /* coll/nc_reduce.c "Line calls": p <= 4, elements of up to 8 bytes, at most
         * 64 / p rounded down to 8, less the 8-byte word */
        const size_t part = p <= 4 ? (size_t)(64 / p) / 8 * 8 : 0;
        const int want = g_expect_lines && p > 1 && p <= 4 && es <= 8 && n && n + 8 <= part &&
                         n <= g_small_max;
        CHECK((tm->reduce_lines > lines0) == want, "%s: %s by a call line", what,
              want ? "not" : "went");
    }
    long g = guard_bad(b->s, n);
    CHECK(g < 0, "%s: sendbuf guard changed at offset %ld", what, g);
    g = guard_bad(b->r, n);
    CHECK(g < 0, "%s: recvbuf guard changed at offset %ld", what, g);
    if (!inpl)
        for (size_t k = 0; k < c->count; k++) {
            gen_elem(c->t, c->op, c->seed, rank, k, e);
            CHECK(!memcmp(e, b->s + k * es, es), "%s: sendbuf element %zu was modified", what, k);
        }
    if (gets)
        return check_result(c, p, rank, b->r);
    if (rarg)
        for (size_t i = 0; i < n; i++)
            CHECK(b->r[i] == CANARY, "%s: non-root recvbuf byte %zu changed (0x%02x)", what, i,
                  b->r[i]);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bootstrap and team for a body; NULL on failure (reported). */
static numacoll_team_t *team_up(int rank, int p, const char *name, numacoll_bootstrap_t **bs)
{
    numacoll_team_t *t = NULL;
    int rc = numacoll_bootstrap_named(name, rank, p, bs);
    if (rc) {
        fprintf(stderr, "rank %d: bootstrap: %s\n", rank, numacoll_strerror(rc));
        return NULL;
    }
    rc = numacoll_team_create(*bs, &t);
    if (rc) {
        fprintf(stderr, "rank %d: team_create: %s\n", rank, numacoll_strerror(rc));
        numacoll_bootstrap_named_free(*bs);
        return NULL;
    }
    g_have_leaders = p <= MAXP && numacoll_team_leaders(t, g_leaders) == 0;
    g_lead_set = 0;
    return t;
}

/* A barrier first: a member that finished its calls (a gather's senders run
 * ahead by up to E - 1 calls) must not exit while the others still wait on
 * anyone, since every wait checks that all members are alive and would take
 * a normal exit for a death (MPI programs end in MPI_Finalize, which waits).
 * Its result is not checked: some modes break the team on purpose. */
static void team_down(numacoll_team_t *t, numacoll_bootstrap_t *bs)
{
    (void)numacoll_barrier(t);
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
}

/* ---- ops ------------------------------------------------------------------------------ */
static int body_ops(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    bufs_t b;
    CHECK(bufs_alloc(&b, 100 * 32) == 0, "malloc");
    static const size_t counts[] = {0, 1, 7, 100};
    uint64_t call = 0;
    for (int t = 0; t < NUMACOLL_TYPE_COUNT; t++)
        for (int op = 0; op < NUMACOLL_OP_COUNT; op++) {
            int v = numacoll_op_valid((numacoll_op_t)op, (numacoll_type_t)t);
            if (v != 1) {
                /* Everyone passes the same invalid pair: INVAL everywhere, no hang. */
                memset(b.r, CANARY, 7 * T[t].size);
                int rc = numacoll_allreduce(tm, b.s, b.r, 7, (numacoll_type_t)t, (numacoll_op_t)op);
                CHECK(rc == NUMACOLL_ERR_INVAL,
                      "p=%d rank %d: allreduce %s %s (invalid) returned %d", p, rank, T[t].name,
                      op_names[op], rc);
                rc = numacoll_reduce(tm, b.s, b.r, 7, (numacoll_type_t)t, (numacoll_op_t)op, p - 1);
                CHECK(rc == NUMACOLL_ERR_INVAL, "p=%d rank %d: reduce %s %s (invalid) returned %d",
                      p, rank, T[t].name, op_names[op], rc);
                for (size_t i = 0; i < 7 * T[t].size; i++)
                    CHECK(b.r[i] == CANARY, "invalid %s %s: recvbuf written", T[t].name,
                          op_names[op]);
                continue;
            }
            for (size_t ci = 0; ci < ARRAY_SIZE(counts); ci++)
                for (int root = -1; root < p; root++)
                    for (int inpl = 0; inpl <= 1; inpl++) {
                        call++;
                        call_t c = {t, op, counts[ci], root, inpl ? 1 + (int)(call & 1) : 0,
                                    (int)(call >> 1 & 1), mix64(call)};
                        if (run_call(tm, rank, p, &c, &b))
                            return 1;
                    }
        }
    /* Types and ops outside the enums. */
    int rc = numacoll_allreduce(tm, b.s, b.r, 7, NUMACOLL_TYPE_COUNT, NUMACOLL_SUM);
    CHECK(rc == NUMACOLL_ERR_INVAL, "allreduce with type NUMACOLL_TYPE_COUNT returned %d", rc);
    rc = numacoll_allreduce(tm, b.s, b.r, 7, NUMACOLL_INT32, NUMACOLL_OP_COUNT);
    CHECK(rc == NUMACOLL_ERR_INVAL, "allreduce with op NUMACOLL_OP_COUNT returned %d", rc);
    /* still in step */
    call_t c = {NUMACOLL_DOUBLE, NUMACOLL_SUM, 100, -1, 0, 0, 12345};
    if (run_call(tm, rank, p, &c, &b))
        return 1;
    /* expect_fwd=1 (NUMACOLL_TEST_DOMAINS=v, NUMACOLL_NUMA_FORWARD=on): a
     * member whose domain has another member took part in forwarding the
     * allreduces' results (5f); expect_fwd=0: nobody did */
    const char *dv = getenv("NUMACOLL_TEST_DOMAINS");
    const int v = dv ? atoi(dv) : 0, mates = v > 1 && v < p && rank % v + v < p;
    if (g_expect_fwd >= 0)
        CHECK((tm->reduce_fwd > 0) == (g_expect_fwd && mates),
              "p=%d rank %d: %llu allreduce slices forwarded or read forwarded", p, rank,
              (unsigned long long)tm->reduce_fwd);
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_ops(int pmin, int pmax)
{
    int fails = 0;
    for (int p = pmin; p <= pmax; p++) {
        double t0 = now_s();
        int rc = nc_fork_run(p, 120, body_ops, NULL, -1);
        printf("ops p=%d: %s (%.1f s)\n", p, rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- sizes ---------------------------------------------------------------------------- */
typedef struct sizes_arg {
    int big; /* 64 MiB too */
} sizes_arg_t;

static int body_sizes(int rank, int p, const char *name, void *arg)
{
    const sizes_arg_t *a = arg;
    static const struct {
        int t, op, boundaries_only;
    } kinds[] = {{NUMACOLL_DOUBLE, NUMACOLL_SUM, 0},
                 {NUMACOLL_INT32, NUMACOLL_BXOR, 0},
                 {NUMACOLL_UINT8, NUMACOLL_SUM, 1}}; /* byte-exact 4095 / 4096 / 4097 */
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    size_t cap = (a->big ? (size_t)64 << 20 : (size_t)3 << 20) + 64;
    bufs_t b;
    CHECK(bufs_alloc(&b, cap) == 0, "malloc %zu", cap);
    uint64_t call = 1000;
    for (size_t ki = 0; ki < ARRAY_SIZE(kinds); ki++) {
        size_t es = T[kinds[ki].t].size, counts[16];
        int nc = 0;
        /* the small path's end, 64 KiB, the default slot, the whole-round
         * threshold of a reduce at p = 2 (4 default slots) */
        static const size_t bounds[] = {4096, 65536, 262144, 1 << 20};
        for (size_t i = 0; i < ARRAY_SIZE(bounds); i++) {
            counts[nc++] = bounds[i] / es - 1;
            counts[nc++] = bounds[i] / es;
            counts[nc++] = bounds[i] / es + 1;
        }
        if (!kinds[ki].boundaries_only) {
            counts[nc++] = ((size_t)1 << 20) / es + 3;
            counts[nc++] = ((size_t)5 << 19) / es + 1;
            counts[nc++] = ((size_t)3 << 20) / es;
            if (a->big)
                counts[nc++] = ((size_t)64 << 20) / es;
        }
        for (int i = 0; i < nc; i++) {
            call++;
            call_t c = {kinds[ki].t, kinds[ki].op, counts[i], -1, (int)(call % 3), 0, mix64(call)};
            if (run_call(tm, rank, p, &c, &b))
                return 1;
            for (int root = 0; root < p; root++) {
                if (p != 3 && root != i % p)
                    continue; /* every root at p = 3, one root elsewhere */
                call++;
                call_t cr = {kinds[ki].t, kinds[ki].op, counts[i], root, (int)(call % 3),
                             (int)(call >> 2 & 1), mix64(call)};
                if (run_call(tm, rank, p, &cr, &b))
                    return 1;
            }
        }
    }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_sizes(int big, int pmax)
{
    static const int ps[] = {1, 2, 3, 4, 8};
    int fails = 0;
    for (size_t i = 0; i < ARRAY_SIZE(ps) && ps[i] <= pmax; i++) {
        sizes_arg_t a = {ps[i] == 2 || (big && ps[i] == 4)};
        double t0 = now_s();
        int rc = nc_fork_run(ps[i], 150, body_sizes, &a, -1);
        printf("sizes p=%d%s: %s (%.1f s)\n", ps[i], a.big ? " (with 64 MiB)" : "",
               rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- user ops ------------------------------------------------------------------------- */
static int body_user(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    int huge = p == 2 || p == 4; /* (p = 8: the checking alone takes half a minute) */
    size_t counts[] = {0, 1, 5, 65539, (size_t)1 << 20};
    int nc = huge ? 5 : 4;
    bufs_t b;
    CHECK(bufs_alloc(&b, counts[nc - 1] * 16) == 0, "malloc");
    uint64_t call = 2000;
    for (int t = UT_MAT; t <= UT_TRI; t++)
        for (int i = 0; i < nc; i++)
            for (int root = -1; root < p; root++) {
                /* every root for the small counts, the last one for the large */
                if (counts[i] > 5 && root >= 0 && root != p - 1)
                    continue;
                for (int inpl = 0; inpl <= 1; inpl++) {
                    if (counts[i] > 65539 && inpl)
                        continue;
                    call++;
                    call_t c = {t, 0, counts[i], root, inpl ? 1 + (int)(call & 1) : 0,
                                (int)(call >> 1 & 1), mix64(call)};
                    if (run_call(tm, rank, p, &c, &b))
                        return 1;
                }
            }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_user(void)
{
    /* The test itself: the matrix op is not commutative on these inputs. */
    uint32_t x[4], y[4], xy[4], yx[4];
    gen_elem(UT_MAT, 0, 1, 0, 0, x);
    gen_elem(UT_MAT, 0, 1, 1, 0, y);
    mat_mul(x, y, xy);
    mat_mul(y, x, yx);
    CHECK(memcmp(xy, yx, 16), "test bug: commuting matrices");
    int fails = 0;
    for (int p = 1; p <= MAXP; p++) {
        double t0 = now_s();
        int rc = nc_fork_run(p, 120, body_user, NULL, -1);
        printf("user p=%d: %s (%.1f s)\n", p, rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- reproducibility ---------------------------------------------------------------- */
#define REPRO_N 100000
#define REPRO_REPS 100

static int body_repro(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    const uint64_t seed = 0x5eed0001;
    double *in = malloc(REPRO_N * sizeof *in), *out = malloc(REPRO_N * sizeof *out),
           *ref = malloc(REPRO_N * sizeof *ref);
    CHECK(in && out && ref, "malloc");
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs); /* the reference needs its NUMA plan */
    CHECK(tm, "team");
    size_t order_matters = 0;
    for (size_t k = 0; k < REPRO_N; k++) {
        gen_elem(NUMACOLL_DOUBLE, NUMACOLL_SUM, seed, rank, k, &in[k]);
        ref_elem(NUMACOLL_DOUBLE, NUMACOLL_SUM, seed, p, k, &ref[k]);
        double rev; /* the right-to-left sum, to see that the order matters */
        gen_elem(NUMACOLL_DOUBLE, NUMACOLL_SUM, seed, p - 1, k, &rev);
        for (int r = p - 2; r >= 0; r--) {
            double x;
            gen_elem(NUMACOLL_DOUBLE, NUMACOLL_SUM, seed, r, k, &x);
            rev += x;
        }
        order_matters += memcmp(&rev, &ref[k], sizeof rev) != 0;
    }
    CHECK(p < 3 || order_matters > REPRO_N / 10,
          "test bug: the order matters for only %zu elements", order_matters);
    if (rank == 0)
        printf("repro p=%d: the summation order changes %zu of %d elements\n", p, order_matters,
               REPRO_N);
    uint64_t rng = mix64(seed ^ (uint64_t)rank ^ (uint64_t)getpid());
    for (int rep = 0; rep < REPRO_REPS; rep++) {
        rng = mix64(rng);
        usleep((useconds_t)(rng % 301));
        int rc;
        if (rep % 2) {
            memcpy(out, in, REPRO_N * sizeof *in);
            rc = numacoll_allreduce(tm, NUMACOLL_IN_PLACE, out, REPRO_N, NUMACOLL_DOUBLE,
                                    NUMACOLL_SUM);
        } else {
            memset(out, 0xEE, REPRO_N * sizeof *out);
            rc = numacoll_allreduce(tm, in, out, REPRO_N, NUMACOLL_DOUBLE, NUMACOLL_SUM);
        }
        CHECK(rc == 0, "p=%d rank %d repeat %d: %s", p, rank, rep, numacoll_strerror(rc));
        if (memcmp(out, ref, REPRO_N * sizeof *out)) {
            size_t k = 0, bad = 0;
            while (!memcmp(&out[k], &ref[k], sizeof out[k]))
                k++;
            for (size_t j = k; j < REPRO_N; j++)
                bad += memcmp(&out[j], &ref[j], sizeof out[j]) != 0;
            CHECK(0, "p=%d rank %d repeat %d%s: element %zu is %a, the left fold is %a (%zu wrong)",
                  p, rank, rep, rep % 2 ? " (in place)" : "", k, out[k], ref[k], bad);
        }
    }
    free(in);
    free(out);
    free(ref);
    team_down(tm, bs);
    return 0;
}

static int mode_repro(void)
{
    static const int ps[] = {2, 3, 4, 8};
    int fails = 0;
    for (size_t i = 0; i < ARRAY_SIZE(ps); i++) {
        double t0 = now_s();
        int rc = nc_fork_run(ps[i], 120, body_repro, NULL, -1);
        printf("repro p=%d: %s (%.1f s)\n", ps[i], rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- mismatches ---------------------------------------------------------------------- */
typedef struct mcase {
    const char *what;
    int who;                 /* the member that differs */
    int t, t1, op, op1;      /* everyone / who */
    long dn;                 /* who's count = n + dn */
    int root1;               /* reduce only: who names root root1 instead (-2: no) */
    int expect;
    int zero;                /* 1: who passes a count of 0; 2: everyone else does */
} mcase_t;

static const mcase_t mcases[] = {
    {"count +3", 1, NUMACOLL_INT32, NUMACOLL_INT32, NUMACOLL_SUM, NUMACOLL_SUM, 3, -2,
     NUMACOLL_ERR_TRUNCATE, 0},
    {"count -3", 1, NUMACOLL_INT32, NUMACOLL_INT32, NUMACOLL_SUM, NUMACOLL_SUM, -3, -2,
     NUMACOLL_ERR_TRUNCATE, 0},
    /* a small call (a line call at 4 and 6 elements) against a large one */
    {"count +60000", 1, NUMACOLL_INT32, NUMACOLL_INT32, NUMACOLL_SUM, NUMACOLL_SUM, 60000, -2,
     NUMACOLL_ERR_TRUNCATE, 0},
    {"type FLOAT vs INT32 (same size)", 1, NUMACOLL_INT32, NUMACOLL_FLOAT, NUMACOLL_SUM,
     NUMACOLL_SUM, 0, -2, NUMACOLL_ERR_MISMATCH, 0},
    {"type INT64 vs INT32", 1, NUMACOLL_INT32, NUMACOLL_INT64, NUMACOLL_SUM, NUMACOLL_SUM, 0, -2,
     NUMACOLL_ERR_MISMATCH, 0},
    {"op MAX vs SUM", 1, NUMACOLL_INT32, NUMACOLL_INT32, NUMACOLL_SUM, NUMACOLL_MAX, 0, -2,
     NUMACOLL_ERR_MISMATCH, 0},
    {"op MIN vs SUM at rank 0", 0, NUMACOLL_DOUBLE, NUMACOLL_DOUBLE, NUMACOLL_SUM, NUMACOLL_MIN, 0,
     -2, NUMACOLL_ERR_MISMATCH, 0},
    /* not in the header's list, but the code returns NUMACOLL_ERR_ROOT as bcast does */
    {"root: member 1 names root 1", 1, NUMACOLL_INT32, NUMACOLL_INT32, NUMACOLL_SUM,
     NUMACOLL_SUM, 0, 1, NUMACOLL_ERR_ROOT, 0},
    /* a member of count 0 posts nothing (coll/nc_reduce.c, step Z) and is not
     * told; every other reader finds it once its wait has gone slow */
    {"count 0 at member 1", 1, NUMACOLL_INT32, NUMACOLL_INT32, NUMACOLL_SUM, NUMACOLL_SUM, 0, -2,
     NUMACOLL_ERR_TRUNCATE, 1},
    {"count 0 but at member 0", 0, NUMACOLL_DOUBLE, NUMACOLL_DOUBLE, NUMACOLL_SUM, NUMACOLL_SUM,
     0, -2, NUMACOLL_ERR_TRUNCATE, 2},
};

static int body_mismatch(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    /* 4092 and 4100 bytes of INT32 lie on both sides of REDUCE_SMALL_MAX (4096):
     * +-3 elements takes the member that differs to the other path. So do 4
     * and 6 elements around a call line's 24 bytes (p = 2) and 8 bytes (p = 3,
     * 4): 1 and 3 elements fit, 7 and 9 do not (coll/nc_reduce.c "Line
     * calls"). */
    static const size_t ns[] = {4, 6, 10, 1023, 1025, 200000};
    bufs_t b;
    CHECK(bufs_alloc(&b, (200000 + 60000) * 8) == 0, "malloc");
    uint64_t call = 3000;
    for (size_t ci = 0; ci < ARRAY_SIZE(mcases); ci++)
        for (size_t ni = 0; ni < ARRAY_SIZE(ns); ni++)
            for (int ri = 0; ri < 3; ri++) { /* allreduce, reduce to 0, reduce to p-1 */
                int root = ri == 0 ? -1 : ri == 1 ? 0 : p - 1;
                const mcase_t *m = &mcases[ci];
                if (m->root1 >= 0 && (root < 0 || root == m->root1 || m->root1 >= p))
                    continue;
                int me = rank == m->who;
                int t = me ? m->t1 : m->t, op = me ? m->op1 : m->op;
                int myroot = me && m->root1 >= 0 ? m->root1 : root;
                size_t n = me ? (size_t)((long)ns[ni] + m->dn) : ns[ni];
                const int zero = (m->zero == 1 && me) || (m->zero == 2 && !me);
                if (zero)
                    n = 0;
                const size_t bytes = n * T[t].size;
                for (size_t k = 0; k < n; k++)
                    gen_elem(t, op, 99, rank, k, b.s + k * T[t].size);
                memset(b.r, CANARY, bytes);
                guard_fill(b.s, bytes);
                guard_fill(b.r, bytes);
                int rc = root < 0 ? numacoll_allreduce(tm, b.s, b.r, n, (numacoll_type_t)t,
                                                       (numacoll_op_t)op)
                                  : numacoll_reduce(tm, b.s, b.r, n, (numacoll_type_t)t,
                                                    (numacoll_op_t)op, myroot);
                char what[160];
                snprintf(what, sizeof what, "%s, %s, n=%zu, p=%d, rank %d", m->what,
                         root < 0 ? "allreduce" : root ? "reduce root p-1" : "reduce root 0",
                         ns[ni], p, rank);
                if (zero)
                    CHECK(rc == 0, "%s (count 0): returned %d (%s)", what, rc,
                          numacoll_strerror(rc));
                else if (root < 0 || root == rank)
                    CHECK(rc == m->expect, "%s: returned %d (%s), expected %d (%s)", what, rc,
                          numacoll_strerror(rc), m->expect, numacoll_strerror(m->expect));
                else
                    CHECK(rc == 0 || rc == m->expect, "%s (not the root): returned %d (%s)", what,
                          rc, numacoll_strerror(rc));
                long g = guard_bad(b.s, bytes);
                CHECK(g < 0, "%s: sendbuf guard changed at %ld", what, g);
                g = guard_bad(b.r, bytes);
                CHECK(g < 0, "%s: recvbuf guard changed at %ld", what, g);
                /* The same team must work right away. */
                call++;
                call_t c = {NUMACOLL_DOUBLE, NUMACOLL_SUM, 1000 + call % 7, -1, 0, 0, mix64(call)};
                if (run_call(tm, rank, p, &c, &b)) {
                    fprintf(stderr, "  (the first good call after: %s)\n", what);
                    return 1;
                }
            }
    /* Calls of count 0 post nothing and wait for nobody (step Z) but run at
     * most 2^20 rounds ahead of the slowest member (RED_ZERO_AHEAD): while
     * member p - 1 starts 1 s late, the others' first 100 return at once
     * (a call that posted would wait after S - 1 of them), and 2^21 take
     * them about as long as the sleep; then every member checks a call. */
    CHECK(numacoll_barrier(tm) == 0, "barrier before the calls of count 0");
    if (rank == p - 1)
        usleep(1000000);
    const double z0 = now_s();
    for (int i = 0; i < (1 << 21) + 5; i++) {
        if (i == 100 && rank < p - 1)
            CHECK(now_s() - z0 < 0.5, "p=%d, rank %d: 100 calls of count 0 took %.3f s while "
                  "member %d slept 1 s: they waited for it", p, rank, now_s() - z0, p - 1);
        int rc = i & 1 ? numacoll_allreduce(tm, NULL, NULL, 0, NUMACOLL_INT32, NUMACOLL_SUM)
                       : numacoll_reduce(tm, NULL, NULL, 0, NUMACOLL_DOUBLE, NUMACOLL_MAX, i % p);
        CHECK(rc == 0, "call %d of count 0, p=%d, rank %d: returned %d (%s)", i, p, rank, rc,
              numacoll_strerror(rc));
    }
    if (rank == 0)
        CHECK(now_s() - z0 > 0.5, "p=%d: 2^21 calls of count 0 took %.3f s while member %d "
              "slept 1 s: they ran more than 2^20 rounds ahead", p, now_s() - z0, p - 1);
    call++;
    call_t zc = {NUMACOLL_DOUBLE, NUMACOLL_SUM, 5, -1, 0, 0, mix64(call)};
    if (run_call(tm, rank, p, &zc, &b))
        return 1;
    CHECK(numacoll_barrier(tm) == 0, "barrier at the end");
    call_t c = {NUMACOLL_INT64, NUMACOLL_SUM, 150000, p - 1, 0, 1, 77};
    if (run_call(tm, rank, p, &c, &b))
        return 1;
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

/* User ops whose element sizes differ (16 bytes at member 1, 12 elsewhere) with
 * the same bytes: a type mismatch; every member of an allreduce must say so. */
static int body_mismatch_user(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    static const size_t bytes[] = {48, 4800, 480000};
    bufs_t b;
    CHECK(bufs_alloc(&b, 480000) == 0, "malloc");
    uint64_t call = 4000;
    for (size_t i = 0; i < ARRAY_SIZE(bytes); i++) {
        const numacoll_user_op_t *u = rank == 1 ? &mat_op : &tri_op;
        memset(b.s, 1, bytes[i]);
        int rc = numacoll_allreduce_user(tm, b.s, b.r, bytes[i] / u->elem_size, u);
        CHECK(rc == NUMACOLL_ERR_MISMATCH || rc == NUMACOLL_ERR_TRUNCATE,
              "allreduce_user, %zu bytes in elements of 16 (rank 1) / 12 bytes (others), p=%d, "
              "rank %d: returned %d (%s)",
              bytes[i], p, rank, rc, numacoll_strerror(rc));
        call++;
        call_t c = {UT_TRI, 0, 1000, -1, 0, 0, mix64(call)};
        if (run_call(tm, rank, p, &c, &b))
            return 1;
    }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_mismatch(nc_fork_body_fn body)
{
    int fails = 0;
    for (int p = 2; p <= 4; p++) {
        double t0 = now_s();
        int rc = nc_fork_run(p, 60, body, NULL, -1);
        printf("mismatch p=%d: %s (%.1f s)\n", p, rc ? "FAIL" : "ok", now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- a member dies ---------------------------------------------------------------- */
typedef struct dead_arg {
    int victim, root; /* root -1: allreduce */
    size_t n;
} dead_arg_t;

/* The victim SIGKILLs itself before the call: the members that wait for it
 * get PEER_DEAD or BROKEN within 2 s (the others may return 0), and every
 * later call fails. */
static int body_dead(int rank, int p, const char *name, void *arg)
{
    const dead_arg_t *a = arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    bufs_t b;
    CHECK(bufs_alloc(&b, a->n * 8) == 0, "malloc");
    for (int i = 0; i < 3; i++) {
        call_t c = {NUMACOLL_DOUBLE, NUMACOLL_SUM, a->n, i % 2 ? -1 : i % p, 0, 0, (uint64_t)i};
        if (run_call(tm, rank, p, &c, &b))
            return 1;
    }
    if (rank == a->victim)
        raise(SIGKILL);
    double t0 = now_s();
    int rc = a->root < 0 ? numacoll_allreduce(tm, b.s, b.r, a->n, NUMACOLL_DOUBLE, NUMACOLL_SUM)
                         : numacoll_reduce(tm, b.s, b.r, a->n, NUMACOLL_DOUBLE, NUMACOLL_SUM,
                                           a->root);
    double dt = now_s() - t0;
    int waits = a->root < 0 || a->root == rank;
    CHECK(rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN || (!waits && rc == 0),
          "%s n=%zu, member %d dead, rank %d: returned %d (%s)",
          a->root < 0 ? "allreduce" : "reduce", a->n, a->victim, rank, rc, numacoll_strerror(rc));
    CHECK(dt < 2.0, "rank %d took %.2f s to notice the death", rank, dt);
    rc = numacoll_allreduce(tm, b.s, b.r, a->n, NUMACOLL_DOUBLE, NUMACOLL_SUM);
    CHECK(rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN,
          "rank %d: the call after the death returned %d", rank, rc);
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_dead(void)
{
    static const dead_arg_t cases[] = {{2, -1, 10},     {2, -1, 1000000}, {2, 0, 10},
                                       {2, 3, 1000000}, {0, -1, 1000},    {0, 1, 100000}};
    int fails = 0;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const dead_arg_t *a = &cases[i];
        int rc = nc_fork_run(4, 30, body_dead, (void *)a, a->victim);
        printf("dead: member %d, %s n=%zu, p=4: %s\n", a->victim,
               a->root < 0 ? "allreduce" : "reduce", a->n, rc ? "FAIL" : "ok");
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* The victim is killed (by a child it forked, after `after` s) while it and
 * the others run large calls back to back, so that it dies inside one with
 * high probability (with CMA: while the others read its buffers or write
 * into them). The others get PEER_DEAD or BROKEN, and after the error
 * nothing writes into their buffers any more. */
static int body_dead_mid(int rank, int p, const char *name, void *arg)
{
    const dead_arg_t *a = arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    bufs_t b;
    CHECK(bufs_alloc(&b, a->n * 8) == 0, "malloc");
    memset(b.s, 0, a->n * 8);
    if (rank == a->victim) {
        pid_t me = getpid();
        if (fork() == 0) {
            nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL);
            kill(me, SIGKILL);
            _exit(0);
        }
    }
    const uint64_t cma0 = tm->reduce_cma;
    int rc = 0;
    for (int i = 0; i < 100000 && !rc; i++) {
        guard_fill(b.r, a->n * 8);
        rc = a->root < 0 ? numacoll_allreduce(tm, b.s, b.r, a->n, NUMACOLL_DOUBLE, NUMACOLL_SUM)
                         : numacoll_reduce(tm, b.s, b.r, a->n, NUMACOLL_DOUBLE, NUMACOLL_SUM,
                                           a->root);
    }
    CHECK(rc == NUMACOLL_ERR_PEER_DEAD || rc == NUMACOLL_ERR_BROKEN,
          "%s n=%zu, member %d killed, rank %d: returned %d (%s)",
          a->root < 0 ? "allreduce" : "reduce", a->n, a->victim, rank, rc, numacoll_strerror(rc));
    CHECK(tm->reduce_cma > cma0 || g_expect_cma != 1, "rank %d: no call by CMA", rank);
    /* after the error, no late write by a peer, in the buffer or its guards */
    memset(b.r, 0x77, a->n * 8);
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    long g = guard_bad(b.r, a->n * 8);
    CHECK(g < 0, "rank %d: recvbuf guard changed at offset %ld after the error", rank, g);
    for (size_t i = 0; i < a->n * 8; i++)
        CHECK(b.r[i] == 0x77, "rank %d: recvbuf byte %zu written after the error", rank, i);
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_dead_mid(void)
{
    static const dead_arg_t cases[] = {{1, -1, 1 << 20}, {0, 2, 1 << 20}, {2, 0, 1 << 20}};
    int fails = 0;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const dead_arg_t *a = &cases[i];
        int rc = nc_fork_run(3, 30, body_dead_mid, (void *)a, a->victim);
        printf("dead_mid: member %d, %s n=%zu, p=3: %s\n", a->victim,
               a->root < 0 ? "allreduce" : "reduce", a->n, rc ? "FAIL" : "ok");
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

/* ---- agree ------------------------------------------------------------------------------- */
/* Member 0 alone sees a machine without a shared cache (HWLOC_SYNTHETIC set
 * in it only): the members' views differ, so the automatic choice must fall
 * back alike on all (the slots), not split the calls between transports. */
static int body_agree(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    if (rank == 0)
        setenv("HWLOC_SYNTHETIC", "pack:2 l3:1 core:1 pu:1", 1);
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    CHECK(tm->cache_shared == -1, "rank %d: cache_shared %d, not agreed as unknown", rank,
          tm->cache_shared);
    bufs_t b;
    CHECK(bufs_alloc(&b, (size_t)1 << 20) == 0, "malloc");
    g_expect_cma = 0;
    for (int root = -1; root < p; root++) {
        call_t c = {NUMACOLL_DOUBLE, NUMACOLL_SUM, ((size_t)1 << 20) / 8, root, 0, 0,
                    (uint64_t)(root + 7)};
        if (run_call(tm, rank, p, &c, &b))
            return 1;
    }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

/* ---- fault (CMA) ------------------------------------------------------------------------ */
/* Buffers that are not accessible where a peer copies from or into them
 * (the caller's own part would crash it, as in any MPI): NUMACOLL_ERR_FAULT
 * on the members whose result is incomplete or whose copy failed, 0 on the
 * others, nothing written outside the buffers, and the team works on. */
static int body_fault(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 64 * pg, m = n / 8;
    char *map = mmap(NULL, n + 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED, "mmap");
    double *ok = malloc(n), *res = malloc(n);
    CHECK(ok && res, "malloc");
    double *buf = (double *)(map + pg);
    for (size_t i = 0; i < m; i++)
        ok[i] = buf[i] = (double)(rank + 1);
    /* 1. reduce to 0: member 1's first page (member 0's slice) not readable */
    if (rank == 1)
        CHECK(mprotect(buf, pg, PROT_NONE) == 0, "mprotect");
    int rc = numacoll_reduce(tm, rank == 1 ? buf : ok, res, m, NUMACOLL_DOUBLE, NUMACOLL_SUM, 0);
    CHECK(rc == (rank == 0 ? NUMACOLL_ERR_FAULT : 0), "rank %d: reduce from a bad sendbuf: %d (%s)",
          rank, rc, numacoll_strerror(rc));
    if (rank == 1)
        CHECK(mprotect(buf, pg, PROT_READ | PROT_WRITE) == 0, "mprotect");
    /* 2. reduce to 0 into a buffer whose last page is not writable (member
     * 1's slice): both ends of the failed write get the error */
    if (rank == 0)
        CHECK(mprotect(map + pg + n - pg, pg, PROT_NONE) == 0, "mprotect");
    rc = numacoll_reduce(tm, ok, rank == 0 ? buf : res, m, NUMACOLL_DOUBLE, NUMACOLL_SUM, 0);
    CHECK(rc == (rank <= 1 ? NUMACOLL_ERR_FAULT : 0), "rank %d: reduce into a bad recvbuf: %d (%s)",
          rank, rc, numacoll_strerror(rc));
    /* 3. allreduce: member 0's recvbuf, the same: its read of slice 1 fails */
    rc = numacoll_allreduce(tm, ok, rank == 0 ? buf : res, m, NUMACOLL_DOUBLE, NUMACOLL_SUM);
    CHECK(rc == (rank == 0 ? NUMACOLL_ERR_FAULT : 0), "rank %d: allreduce into a bad recvbuf: %d (%s)",
          rank, rc, numacoll_strerror(rc));
    if (rank == 0) {
        CHECK(mprotect(map + pg + n - pg, pg, PROT_READ | PROT_WRITE) == 0, "mprotect");
        for (size_t i = 0; i < m / 2; i++) /* my own slice arrived */
            CHECK(buf[i] == 3.0, "allreduce: element %zu of my slice is %g", i, buf[i]);
    }
    for (size_t i = 0; i < pg; i++)
        CHECK(map[i] == map[0] && map[pg + n + i] == map[pg + n], "written outside the buffer");
    /* 4. buffers 16 bytes apart modulo a page (shm/nc_cma.c: 4K aliasing,
     * copied through a bounce buffer): member 0's recvbuf at +16, member
     * 0's broadcast buffer at +16 (the root writes its share into it and the
     * reader reads the rest); right bytes, and a bad page still FAULT */
    double *shifted = (double *)(map + pg + 16);
    const size_t ms = m - 4; /* the shifted buffer ends before the last page */
    rc = numacoll_allreduce(tm, ok, rank == 0 ? shifted : res, ms, NUMACOLL_DOUBLE, NUMACOLL_SUM);
    CHECK(rc == 0, "rank %d: allreduce into a shifted recvbuf: %d (%s)", rank, rc,
          numacoll_strerror(rc));
    for (size_t i = 0; i < ms; i++)
        CHECK((rank == 0 ? shifted : res)[i] == 3.0, "shifted allreduce: element %zu is %g", i,
              (rank == 0 ? shifted : res)[i]);
    char *bsrc = aligned_alloc(pg, n), *bdst = map + pg + 16;
    CHECK(bsrc, "aligned_alloc");
    const size_t bn = n - 64;
    if (rank == 0)
        memset(bsrc, 0x5c, bn);
    rc = numacoll_bcast(tm, rank == 0 ? bsrc : bdst, bn, 0);
    CHECK(rc == 0, "rank %d: broadcast into a shifted buffer: %d (%s)", rank, rc,
          numacoll_strerror(rc));
    if (rank == 1)
        for (size_t i = 0; i < bn; i++)
            CHECK(bdst[i] == 0x5c, "shifted broadcast: byte %zu is %d", i, bdst[i]);
    free(bsrc);
    if (rank == 0)
        CHECK(mprotect(map + pg + n - pg, pg, PROT_NONE) == 0, "mprotect");
    rc = numacoll_allreduce(tm, ok, rank == 0 ? shifted : res, ms, NUMACOLL_DOUBLE, NUMACOLL_SUM);
    CHECK(rc == (rank == 0 ? NUMACOLL_ERR_FAULT : 0),
          "rank %d: allreduce into a shifted bad recvbuf: %d (%s)", rank, rc, numacoll_strerror(rc));
    if (rank == 0)
        CHECK(mprotect(map + pg + n - pg, pg, PROT_READ | PROT_WRITE) == 0, "mprotect");
    for (size_t i = 0; i < m; i++)
        ok[i] = (double)(rank + 1);
    /* the team still works */
    CHECK(numacoll_allreduce(tm, ok, res, m, NUMACOLL_DOUBLE, NUMACOLL_SUM) == 0,
          "rank %d: allreduce afterwards", rank);
    for (size_t i = 0; i < m; i++)
        CHECK(res[i] == 3.0, "allreduce afterwards: element %zu is %g", i, res[i]);
    CHECK(tm->reduce_cma >= 4, "rank %d: %llu calls by CMA", rank,
          (unsigned long long)tm->reduce_cma);
    munmap(map, n + 2 * pg);
    free(ok);
    free(res);
    team_down(tm, bs);
    return 0;
}

/* ---- local --------------------------------------------------------------------------- */
static int local_one(int t, int op, size_t count, bufs_t *b, int valid)
{
    size_t es = T[t].size, n = count * es;
    uint64_t seed = mix64((uint64_t)(t * 100 + op) * 7919 + count);
    for (size_t k = 0; k < count; k++) {
        gen_elem(t, op, seed, 0, k, b->r + k * es); /* inout = x0 */
        gen_elem(t, op, seed, 1, k, b->s + k * es); /* in = x1 */
    }
    guard_fill(b->s, n);
    guard_fill(b->r, n);
    int rc = numacoll_reduce_local(b->s, b->r, count, (numacoll_type_t)t, (numacoll_op_t)op);
    const char *tn = T[t].name, *on = op_names[op];
    if (!valid) {
        CHECK(rc == NUMACOLL_ERR_INVAL, "reduce_local %s %s (invalid) returned %d", tn, on, rc);
        for (size_t k = 0; k < count; k++) {
            unsigned char e[64];
            gen_elem(t, op, seed, 0, k, e);
            CHECK(!memcmp(e, b->r + k * es, es), "reduce_local %s %s (invalid) wrote inout", tn,
                  on);
        }
        return 0;
    }
    CHECK(rc == 0, "reduce_local %s %s count=%zu returned %d", tn, on, count, rc);
    CHECK(guard_bad(b->s, n) < 0 && guard_bad(b->r, n) < 0, "reduce_local %s %s count=%zu: guards",
          tn, on, count);
    for (size_t k = 0; k < count; k++) {
        unsigned char e[64];
        gen_elem(t, op, seed, 1, k, e);
        CHECK(!memcmp(e, b->s + k * es, es), "reduce_local %s %s: in[%zu] modified", tn, on, k);
        ref_elem(t, op, seed, 2, k, e);
        if (!elem_eq(t, e, b->r + k * es)) {
            char w[130], g[130], x0[130], x1[130];
            unsigned char a0[64], a1[64];
            gen_elem(t, op, seed, 0, k, a0);
            gen_elem(t, op, seed, 1, k, a1);
            hex(e, es, w);
            hex(b->r + k * es, es, g);
            hex(a0, es, x0);
            hex(a1, es, x1);
            CHECK(0,
                  "reduce_local %s %s count=%zu: element %zu: inout %s op in %s = %s, expected %s",
                  tn, on, count, k, x0, x1, g, w);
        }
    }
    return 0;
}

static int mode_local(void)
{
    int fails = 0;
    for (int t = 0; t < NUMACOLL_TYPE_COUNT; t++)
        if (numacoll_type_size((numacoll_type_t)t) != T[t].size) {
            fprintf(stderr, "FAIL numacoll_type_size(%s) = %zu, sizeof is %zu\n", T[t].name,
                    numacoll_type_size((numacoll_type_t)t), T[t].size);
            fails++;
        }
    if (numacoll_type_size(NUMACOLL_TYPE_COUNT)) {
        fprintf(stderr, "FAIL numacoll_type_size(NUMACOLL_TYPE_COUNT) is not 0\n");
        fails++;
    }
    bufs_t b;
    CHECK(bufs_alloc(&b, 1001 * 32) == 0, "malloc");
    static const size_t counts[] = {0, 1, 7, 100, 1001};
    int nvalid = 0;
    for (int t = 0; t < NUMACOLL_TYPE_COUNT; t++)
        for (int op = 0; op < NUMACOLL_OP_COUNT; op++) {
            int v = numacoll_op_valid((numacoll_op_t)op, (numacoll_type_t)t);
            if ((v == 1) != expect_valid(op, t)) {
                fprintf(stderr, "FAIL numacoll_op_valid(%s, %s) = %d, MPI's table says %s\n",
                        op_names[op], T[t].name, v, expect_valid(op, t) ? "valid" : "invalid");
                fails++;
            }
            nvalid += v == 1;
            if (v != 1)
                fails += local_one(t, op, 7, &b, 0);
            else
                for (size_t ci = 0; ci < ARRAY_SIZE(counts); ci++)
                    if (local_one(t, op, counts[ci], &b, 1)) {
                        fails++;
                        break;
                    }
        }
    unsigned char x[16] = {0}, y[16] = {0};
    if (numacoll_reduce_local(x, y, 1, NUMACOLL_TYPE_COUNT, NUMACOLL_SUM) != NUMACOLL_ERR_INVAL ||
        numacoll_reduce_local(x, y, 1, NUMACOLL_INT32, NUMACOLL_OP_COUNT) != NUMACOLL_ERR_INVAL ||
        numacoll_op_valid(NUMACOLL_OP_COUNT, NUMACOLL_INT32) == 1 ||
        numacoll_op_valid(NUMACOLL_SUM, NUMACOLL_TYPE_COUNT) == 1) {
        fprintf(stderr, "FAIL types / ops outside the enums are not rejected\n");
        fails++;
    }
    bufs_free(&b);
    printf("local: %d valid op x type pairs, %d failure(s)\n", nvalid, fails);
    return fails;
}

/* ---- interleave ----------------------------------------------------------------------- */
typedef struct ilv_arg {
    uint64_t seed;
    int nops;
    int max_log; /* sizes up to 2^max_log bytes */
} ilv_arg_t;

static uint64_t next(uint64_t *state)
{
    return *state = mix64(*state);
}

static int body_interleave(int rank, int p, const char *name, void *arg)
{
    const ilv_arg_t *a = arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    /* the (type, op) pairs to draw from: every valid one, and the two user ops */
    int pairs[NTYPES * NUMACOLL_OP_COUNT][2], np = 0;
    for (int t = 0; t < NUMACOLL_TYPE_COUNT; t++)
        for (int op = 0; op < NUMACOLL_OP_COUNT; op++)
            if (numacoll_op_valid((numacoll_op_t)op, (numacoll_type_t)t) == 1) {
                pairs[np][0] = t;
                pairs[np++][1] = op;
            }
    for (int t = UT_MAT; t <= UT_TRI; t++) {
        pairs[np][0] = t;
        pairs[np++][1] = 0;
    }
    const size_t max = (size_t)1 << a->max_log;
    bufs_t b;
    CHECK(bufs_alloc(&b, max + 64) == 0, "malloc");
    unsigned char *bb = malloc(max);
    CHECK(bb, "malloc");
    uint64_t rng = a->seed; /* the same sequence on every member */
    for (int i = 0; i < a->nops; i++) {
        int kind = (int)(next(&rng) % 4);
        /* 1 in 8 empty, otherwise log-uniform up to 1 MiB */
        size_t bytes = 0;
        if (next(&rng) % 8) {
            size_t top = (size_t)1 << (next(&rng) % (uint64_t)(a->max_log + 1));
            bytes = (size_t)(next(&rng) % (top + 1));
        }
        int root = (int)(next(&rng) % (uint64_t)p);
        if (kind == 0) {
            if (one_bcast(tm, bb, bytes, root, a->seed + (uint64_t)i, rank)) {
                fprintf(stderr, "  (interleave seed %llu, op %d)\n",
                        (unsigned long long)a->seed, i);
                return 1;
            }
        } else if (kind == 1) {
            int rc = numacoll_barrier(tm);
            CHECK(rc == 0, "interleave seed %llu op %d: barrier returned %d",
                  (unsigned long long)a->seed, i, rc);
        } else {
            int j = (int)(next(&rng) % (uint64_t)np);
            call_t c = {pairs[j][0], pairs[j][1], bytes / T[pairs[j][0]].size,
                        kind == 2 ? root : -1, 0, 0, 0};
            c.inplace = (int)(next(&rng) % 3);
            c.nullrecv = (int)(next(&rng) % 2);
            c.seed = next(&rng);
            if (run_call(tm, rank, p, &c, &b)) {
                fprintf(stderr, "  (interleave seed %llu, op %d)\n",
                        (unsigned long long)a->seed, i);
                return 1;
            }
        }
    }
    free(bb);
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

/* ---- slots across the wrap ---------------------------------------------------------
 * The round counter starts 5 short of UINT32_MAX and S = 3 (does not divide
 * 2^32): member 1 (never a reader: small reduces to root 0) runs S - 1 rounds
 * ahead while the root sleeps before each call, so a slot index that jumped at
 * the wrap would let it overwrite a slot the root has not read (a hang, or a
 * wrong sum). Then large reduces and allreduces after the wrap. */
static int body_wrapslots(int rank, int p, const char *name, void *arg)
{
    (void)arg;
    numacoll_bootstrap_t *bs;
    numacoll_team_t *tm = team_up(rank, p, name, &bs);
    CHECK(tm, "team");
    bufs_t b;
    CHECK(bufs_alloc(&b, 1 << 20) == 0, "malloc");
    for (int i = 0; i < 12; i++) {
        if (rank == 0)
            usleep(20000);
        call_t c = {NUMACOLL_INT64, NUMACOLL_SUM, 7, 0, 0, 0, (uint64_t)i};
        if (run_call(tm, rank, p, &c, &b))
            return 1;
    }
    for (int i = 0; i < 6; i++) {
        call_t c = {NUMACOLL_DOUBLE, NUMACOLL_SUM, (size_t)(100000 + i), i % 2 ? -1 : 0, 0, 0,
                    (uint64_t)(100 + i)};
        if (run_call(tm, rank, p, &c, &b))
            return 1;
    }
    bufs_free(&b);
    team_down(tm, bs);
    return 0;
}

static int mode_wrapslots(void)
{
    nc_test_seq0 = UINT32_MAX - 5;
    int rc = nc_fork_run(2, 60, body_wrapslots, NULL, -1);
    printf("wrapslots p=2: %s\n", rc ? "FAIL" : "ok");
    return rc != 0;
}

static int mode_interleave(uint64_t seed, const int *ps, int nps, int nops, int max_log)
{
    int fails = 0;
    for (int i = 0; i < nps; i++) {
        ilv_arg_t a = {seed + (uint64_t)ps[i], nops, max_log};
        double t0 = now_s();
        int rc = nc_fork_run(ps[i], 120, body_interleave, &a, -1);
        printf("interleave p=%d seed=%llu ops=%d max=%zu: %s (%.1f s)\n", ps[i],
               (unsigned long long)a.seed, a.nops, (size_t)1 << max_log, rc ? "FAIL" : "ok",
               now_s() - t0);
        fflush(stdout);
        fails += rc;
    }
    return fails;
}

int main(int argc, char **argv)
{
    /* NAME=VALUE arguments are tunables for the teams of this run. */
    const char *pos[4] = {""};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (eq && !strncmp(argv[i], "expect_cma=", 11)) {
            g_expect_cma = atoi(eq + 1);
        } else if (eq && !strncmp(argv[i], "expect_fwd=", 11)) {
            g_expect_fwd = atoi(eq + 1);
        } else if (eq && !strncmp(argv[i], "expect_lines=", 13)) {
            g_expect_lines = atoi(eq + 1);
        } else if (eq) {
            *eq = 0;
            int rc = numacoll_param_set(argv[i], eq + 1);
            if (rc) {
                fprintf(stderr, "tunable %s=%s rejected: %s\n", argv[i], eq + 1,
                        numacoll_strerror(rc));
                return 2;
            }
            printf("%s=%s\n", argv[i], eq + 1);
        } else if (npos < 4) {
            pos[npos++] = argv[i];
        }
    }
    const char *m = pos[0];
    char sm[32], fs[32]; /* the small path: up to min(small max, F) */
    if (numacoll_param_get("REDUCE_SMALL_MAX", sm, sizeof sm, NULL) == 0 &&
        numacoll_param_get("REDUCE_FRAG_SIZE", fs, sizeof fs, NULL) == 0) {
        g_small_max = strtoull(sm, NULL, 0);
        if (g_small_max > strtoull(fs, NULL, 0))
            g_small_max = strtoull(fs, NULL, 0);
    }
    if (g_expect_cma >= 2) {
        g_cma_min[0] = 0; /* nc_reduce_cma_auto(p) */
        g_cma_min[1] = SIZE_MAX;
    }
    if (g_expect_cma == 3) {
        static const char *const k[2] = {"REDUCE_CMA_MIN", "ALLREDUCE_CMA_MIN"};
        for (int j = 0; j < 2; j++) {
            char v[32];
            numacoll_param_get(k[j], v, sizeof v, NULL);
            if (strtoull(v, NULL, 0))
                g_cma_min[j] = strtoull(v, NULL, 0);
        }
    }
    int fails;
    if (!strcmp(m, "ops")) {
        int pmin = npos > 1 ? atoi(pos[1]) : 1, pmax = npos > 2 ? atoi(pos[2]) : MAXP;
        fails = mode_ops(pmin < 1 ? 1 : pmin, pmax > MAXP ? MAXP : pmax);
    } else if (!strcmp(m, "sizes")) {
        fails = mode_sizes(!(npos > 1 && !strcmp(pos[1], "64m2")),
                           npos > 2 && !strcmp(pos[2], "p4") ? 4 : MAXP);
    } else if (!strcmp(m, "user")) {
        fails = mode_user();
    } else if (!strcmp(m, "repro")) {
        fails = mode_repro();
    } else if (!strcmp(m, "mismatch")) {
        fails = mode_mismatch(body_mismatch);
    } else if (!strcmp(m, "mismatch_user")) {
        fails = mode_mismatch(body_mismatch_user);
    } else if (!strcmp(m, "dead")) {
        fails = mode_dead();
    } else if (!strcmp(m, "dead_mid")) {
        fails = mode_dead_mid();
    } else if (!strcmp(m, "agree")) {
        fails = nc_fork_run(3, 60, body_agree, NULL, -1);
        printf("agree p=3: %s\n", fails ? "FAIL" : "ok");
    } else if (!strcmp(m, "fault")) {
        fails = nc_fork_run(2, 60, body_fault, NULL, -1);
        printf("fault p=2: %s\n", fails ? "FAIL" : "ok");
    } else if (!strcmp(m, "local")) {
        fails = mode_local();
    } else if (!strcmp(m, "interleave")) {
        static const int ps[] = {2, 3, 4, 8};
        uint64_t seed = npos > 1 ? strtoull(pos[1], NULL, 0) : 20240601;
        fails = mode_interleave(seed, ps, (int)ARRAY_SIZE(ps), 300, 20);
    } else if (!strcmp(m, "wrapslots")) {
        fails = mode_wrapslots();
    } else if (!strcmp(m, "wrap")) {
        /* Every counter of the teams starts 60 short of UINT32_MAX (inherited by
         * the members): the reduction rounds wrap within the first calls. */
        static const int ps[] = {3, 4};
        nc_test_seq0 = UINT32_MAX - 60;
        fails = mode_interleave(777, ps, (int)ARRAY_SIZE(ps), 200, 18);
    } else {
        fprintf(stderr, "usage: %s ops [PMIN PMAX] | sizes [64m2] | user | repro | mismatch | "
                        "mismatch_user | dead | dead_mid | agree | fault | local | interleave [SEED] | "
                        "wrap | "
                        "wrapslots  "
                        "[TUNABLE=VALUE...]\n",
                argv[0]);
        return 2;
    }
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
