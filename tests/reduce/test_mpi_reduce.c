/*
 * MPI_Reduce and MPI_Allreduce through numacoll (or through the MPI library
 * when numacoll does not take a call: the same checks must pass). Every rank
 * checks its own buffers against a reference it computes itself: any rank's
 * input is a function of (call seed, rank, element), so each rank folds all
 * ranks' inputs in rank order. Tested:
 *  1. every predefined op x every predefined C datatype MPI defines it on,
 *     and the Fortran and C++ ones the C API names (SUM/PROD: integers,
 *     floating, complex; MIN/MAX: integers, floating; LAND/LOR/LXOR: C
 *     integers, MPI_C_BOOL, MPI_CXX_BOOL, MPI_LOGICAL; BAND/BOR/BXOR:
 *     integers, MPI_BYTE; MINLOC/MAXLOC: the six C pair types and
 *     MPI_2INTEGER, MPI_2REAL, MPI_2DOUBLE_PRECISION, ties giving the lowest
 *     index). The
 *     multi-language types MPI_AINT, MPI_OFFSET and MPI_COUNT count as
 *     integers, except for the logical ops (MPI's table). Inputs keep integer
 *     results free of overflow and floating results exact in any order;
 *  2. MPI_Reduce at every root (a non-root's recvbuf, a canary or NULL, stays
 *     untouched) and MPI_Allreduce; bytes past the result and the sendbuf
 *     stay untouched too;
 *  3. counts 0, 1, 7, 1000, byte sizes around 4 KiB, 64 KiB and 256 KiB,
 *     3 MiB, and (full) one 64 MiB MPI_DOUBLE sum;
 *  4. MPI_IN_PLACE (reduce: at the root);
 *  5. derived types of one predefined type (contiguous, vector, indexed, a
 *     strided MPI_DOUBLE_INT, a contiguous MPI_LONG_DOUBLE_INT, a strided
 *     MPI_2REAL and MPI_LOGICAL) with
 *     predefined ops: results at the data positions only, the gaps
 *     untouched. MPI defines predefined ops on predefined datatypes only;
 *     Open MPI and MPICH refuse these (MPI_ERR_OP, noted), numacoll takes
 *     them, except pair types with gaps (MPI packs pairs without their
 *     padding): those go to the MPI library. Every predefined type of the
 *     table must be numacoll's on one node;
 *  6. user ops: a commutative integer sum (on MPI_INT and on an indexed type
 *     with gaps), and a non-commutative 2x2 matrix product mod 2^32 whose
 *     result is a0 a1 ... a(p-1) in rank order;
 *  7. reproducibility of MPI_SUM on random doubles (magnitudes 2^-20..2^20):
 *     (a) the left fold ((x0 + x1) + x2) + ... bit for bit when numacoll
 *     takes the call on one node, within 1e-12 * sum |xi| otherwise;
 *     (b) the same bits on every rank and (c) over repeats with random delays,
 *     asserted when numacoll takes the call (only reported otherwise);
 *  8. communicators: world, a dup, even/odd halves, reversed rank order,
 *     MPI_COMM_SELF (NUMACOLL_TEST_VIRTUAL_NODES, set by the test rows, makes
 *     the same program take the hierarchical path);
 *  9. mode mismatch: rank 1 passes another count (also 0) to MPI_Allreduce and
 *     MPI_Reduce (errors return): no hang; with numacoll, an error of class
 *     MPI_ERR_TRUNCATE or MPI_ERR_ARG on every reader but a rank that passed
 *     count 0 (which returns MPI_SUCCESS), and the communicator still works.
 * Known bugs of the MPI library (wrong MIN/MAX kernels, MPICH's in-place
 * reduce crash) are probed or recognized at start and kept out of its way;
 * rank 0 notes them, and the types numacoll hands to the library.
 *
 * Usage: test_mpi_reduce [full|quick|mismatch]     (default: full)
 */
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/nc_team.h" /* reduce_cma */
#include "numacoll_mpi.h"

static int wrank, wsize, quick;
static int failures, printed;
static unsigned long long ncalls, nhandled;

#define MAX_PRINTED 40
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    failures++;
    if (printed++ >= MAX_PRINTED) {
        if (printed == MAX_PRINTED + 1)
            fprintf(stderr, "[rank %d] (further failures not printed)\n", wrank);
        return;
    }
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] FAIL %s\n", wrank, line);   /* one write: lines stay whole */
}

/* ---- inputs ------------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t seed, int r, size_t e)
{
    return mix(seed ^ mix(((uint64_t)(unsigned)r << 40) ^ (uint64_t)e));
}

/* Reductions numacoll ran so far (NUMACOLL_STATS): a call that raises the
 * number was numacoll's, the others went to the MPI library. */
static unsigned long long nc_calls(void)
{
    numacoll_mpi_stats_t s;
    if (numacoll_mpi_stats(&s) != 0)
        return 0;
    return s.calls_numacoll[NUMACOLL_MPI_REDUCE] + s.calls_numacoll[NUMACOLL_MPI_ALLREDUCE];
}

/* ---- datatypes and ops -------------------------------------------------------- */

enum { K_INT, K_FLT, K_CPX, K_BOOL, K_BYTE, K_PAIR, K_FLOG };

struct pair_f { float v; int i; };
struct pair_d { double v; int i; };
struct pair_l { long v; int i; };
struct pair_2i { int v; int i; };
struct pair_s { short v; int i; };
struct pair_ld { long double v; int i; };
struct pair_2r { float v; float i; };         /* MPI_2REAL */
struct pair_2dp { double v; double i; };      /* MPI_2DOUBLE_PRECISION */

typedef struct tdesc {
    const char *name;
    MPI_Datatype type;
    int cls;
    int w;          /* K_INT: bytes; K_FLT, K_CPX: 0 float, 1 double, 2 long double */
    int sgn;        /* K_INT: signed */
    int ml;         /* multi-language type (MPI_AINT...): no logical ops */
    size_t size;    /* bytes of one element (its extent) */
    int vcls, vw;   /* K_PAIR: the value's class (K_INT signed, K_FLT) and w */
    size_t ioff;    /* K_PAIR: offset of the index ... */
    int ik;         /* ... an int (-1) or a float / double (0, 1, as w) */
} tdesc_t;

#define TI(T, c, s) {#T, T, K_INT, sizeof(c), s, 0, sizeof(c), 0, 0, 0, -1}
#define TM(T, c) {#T, T, K_INT, sizeof(c), 1, 1, sizeof(c), 0, 0, 0, -1}
#define TF(T, c, k) {#T, T, K_FLT, k, 1, 0, sizeof(c), 0, 0, 0, -1}
#define TC(T, c, k) {#T, T, K_CPX, k, 1, 0, sizeof(c), 0, 0, 0, -1}
#define TP(T, s, vc, vw) \
    {#T, T, K_PAIR, 0, 0, 0, sizeof(struct s), vc, vw, offsetof(struct s, i), -1}
/* Fortran pairs of two reals: the index is of the value's type */
#define TP2(T, s, k) {#T, T, K_PAIR, 0, 0, 0, sizeof(struct s), K_FLT, k, offsetof(struct s, i), k}

static const tdesc_t types[] = {
    TI(MPI_SIGNED_CHAR, signed char, 1), TI(MPI_UNSIGNED_CHAR, unsigned char, 0),
    TI(MPI_SHORT, short, 1), TI(MPI_UNSIGNED_SHORT, unsigned short, 0),
    TI(MPI_INT, int, 1), TI(MPI_UNSIGNED, unsigned, 0),
    TI(MPI_LONG, long, 1), TI(MPI_UNSIGNED_LONG, unsigned long, 0),
    TI(MPI_LONG_LONG, long long, 1), TI(MPI_UNSIGNED_LONG_LONG, unsigned long long, 0),
    TI(MPI_INT8_T, int8_t, 1), TI(MPI_INT16_T, int16_t, 1),
    TI(MPI_INT32_T, int32_t, 1), TI(MPI_INT64_T, int64_t, 1),
    TI(MPI_UINT8_T, uint8_t, 0), TI(MPI_UINT16_T, uint16_t, 0),
    TI(MPI_UINT32_T, uint32_t, 0), TI(MPI_UINT64_T, uint64_t, 0),
    TM(MPI_AINT, MPI_Aint), TM(MPI_OFFSET, MPI_Offset), TM(MPI_COUNT, MPI_Count),
    TF(MPI_FLOAT, float, 0), TF(MPI_DOUBLE, double, 1), TF(MPI_LONG_DOUBLE, long double, 2),
    TC(MPI_C_FLOAT_COMPLEX, float _Complex, 0), TC(MPI_C_DOUBLE_COMPLEX, double _Complex, 1),
    TC(MPI_C_LONG_DOUBLE_COMPLEX, long double _Complex, 2),
    {"MPI_C_BOOL", MPI_C_BOOL, K_BOOL, sizeof(_Bool), 0, 0, sizeof(_Bool), 0, 0, 0, -1},
    {"MPI_BYTE", MPI_BYTE, K_BYTE, 1, 0, 0, 1, 0, 0, 0, -1},
    /* Fortran and C++ types the C API names too (gfortran's default kinds: INTEGER
     * and LOGICAL 4 bytes, .TRUE. 1; main() checks the sizes) */
    TM(MPI_INTEGER, int32_t), TM(MPI_INTEGER8, int64_t),
    TF(MPI_REAL, float, 0), TF(MPI_DOUBLE_PRECISION, double, 1),
    TC(MPI_COMPLEX, float _Complex, 0), TC(MPI_DOUBLE_COMPLEX, double _Complex, 1),
    TC(MPI_COMPLEX8, float _Complex, 0), TC(MPI_COMPLEX16, double _Complex, 1),
    {"MPI_LOGICAL", MPI_LOGICAL, K_FLOG, 4, 1, 0, 4, 0, 0, 0, -1},
    TP(MPI_2INTEGER, pair_2i, K_INT, sizeof(int)), TP2(MPI_2REAL, pair_2r, 0),
    TP2(MPI_2DOUBLE_PRECISION, pair_2dp, 1),
    {"MPI_CXX_BOOL", MPI_CXX_BOOL, K_BOOL, 1, 0, 0, 1, 0, 0, 0, -1},
    TC(MPI_CXX_FLOAT_COMPLEX, float _Complex, 0), TC(MPI_CXX_DOUBLE_COMPLEX, double _Complex, 1),
    TC(MPI_CXX_LONG_DOUBLE_COMPLEX, long double _Complex, 2),
    TP(MPI_FLOAT_INT, pair_f, K_FLT, 0), TP(MPI_DOUBLE_INT, pair_d, K_FLT, 1),
    TP(MPI_LONG_INT, pair_l, K_INT, sizeof(long)), TP(MPI_2INT, pair_2i, K_INT, sizeof(int)),
    TP(MPI_SHORT_INT, pair_s, K_INT, sizeof(short)),
    TP(MPI_LONG_DOUBLE_INT, pair_ld, K_FLT, 2),
};
enum { NTYPES = sizeof types / sizeof types[0] };

enum { O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR,
       O_MINLOC, O_MAXLOC, NOPS };
static const struct {
    const char *name;
    MPI_Op op;
} ops[NOPS] = {
    {"MPI_SUM", MPI_SUM}, {"MPI_PROD", MPI_PROD}, {"MPI_MIN", MPI_MIN}, {"MPI_MAX", MPI_MAX},
    {"MPI_LAND", MPI_LAND}, {"MPI_LOR", MPI_LOR}, {"MPI_LXOR", MPI_LXOR},
    {"MPI_BAND", MPI_BAND}, {"MPI_BOR", MPI_BOR}, {"MPI_BXOR", MPI_BXOR},
    {"MPI_MINLOC", MPI_MINLOC}, {"MPI_MAXLOC", MPI_MAXLOC},
};

/* MPI's table of which predefined op applies to which datatype group. */
static int op_valid(int op, const tdesc_t *t)
{
    switch (op) {
    case O_SUM: case O_PROD:
        return t->cls == K_INT || t->cls == K_FLT || t->cls == K_CPX;
    case O_MIN: case O_MAX:
        return t->cls == K_INT || t->cls == K_FLT;
    case O_LAND: case O_LOR: case O_LXOR:
        return (t->cls == K_INT && !t->ml) || t->cls == K_BOOL || t->cls == K_FLOG;
    case O_BAND: case O_BOR: case O_BXOR:
        return t->cls == K_INT || t->cls == K_BYTE;
    default:
        return t->cls == K_PAIR;
    }
}

static int type_index(MPI_Datatype type)
{
    for (int i = 0; i < NTYPES; i++)
        if (types[i].type == type)
            return i;
    return -1;
}

/* ---- values: one element of any type, the reference fold, comparison ---------- */

/* K_INT, K_BOOL, K_BYTE and integer pair values: u, sign-extended to 64 bits
 * when signed; floating (and pair) values: re (exact in long double);
 * complex: re, im; pairs: idx. */
typedef struct val {
    uint64_t u;
    long double re, im;
    int idx;
} val_t;

static uint64_t int_norm(uint64_t u, int w, int sgn)
{
    if (w >= 8)
        return u;
    uint64_t m = (1ull << (8 * w)) - 1;
    u &= m;
    if (sgn && (u >> (8 * w - 1) & 1))
        u |= ~m;
    return u;
}

static uint64_t int_load(const unsigned char *p, int w, int sgn)
{
    uint8_t a;
    uint16_t b;
    uint32_t c;
    uint64_t d = 0;
    switch (w) {
    case 1: memcpy(&a, p, 1); d = a; break;
    case 2: memcpy(&b, p, 2); d = b; break;
    case 4: memcpy(&c, p, 4); d = c; break;
    default: memcpy(&d, p, 8); break;
    }
    return int_norm(d, w, sgn);
}

static void int_store(unsigned char *p, uint64_t u, int w)
{
    uint8_t a = (uint8_t)u;
    uint16_t b = (uint16_t)u;
    uint32_t c = (uint32_t)u;
    switch (w) {
    case 1: memcpy(p, &a, 1); break;
    case 2: memcpy(p, &b, 2); break;
    case 4: memcpy(p, &c, 4); break;
    default: memcpy(p, &u, 8); break;
    }
}

static long double flt_load(const unsigned char *p, int k)
{
    float f;
    double d;
    long double l;
    switch (k) {
    case 0: memcpy(&f, p, sizeof f); return f;
    case 1: memcpy(&d, p, sizeof d); return d;
    default: memcpy(&l, p, sizeof l); return l;
    }
}

static void flt_store(unsigned char *p, long double v, int k)
{
    float f = (float)v;
    double d = (double)v;
    switch (k) {
    case 0: memcpy(p, &f, sizeof f); break;
    case 1: memcpy(p, &d, sizeof d); break;
    default: memcpy(p, &v, sizeof v); break;
    }
}

static const size_t flt_size[3] = {sizeof(float), sizeof(double), sizeof(long double)};

static val_t load(const tdesc_t *t, const unsigned char *p)
{
    val_t v = {0, 0, 0, 0};
    switch (t->cls) {
    case K_INT: v.u = int_load(p, t->w, t->sgn); break;
    case K_BOOL: case K_BYTE: v.u = int_load(p, 1, 0); break;   /* _Bool read as a byte */
    case K_FLOG: v.u = int_load(p, t->w, 1); break;
    case K_FLT: v.re = flt_load(p, t->w); break;
    case K_CPX:
        v.re = flt_load(p, t->w);
        v.im = flt_load(p + flt_size[t->w], t->w);
        break;
    default:
        if (t->vcls == K_INT)
            v.u = int_load(p, t->vw, 1);
        else
            v.re = flt_load(p, t->vw);
        if (t->ik < 0)
            memcpy(&v.idx, p + t->ioff, sizeof v.idx);
        else
            v.idx = (int)flt_load(p + t->ioff, t->ik); /* an integer, exact */
        break;
    }
    return v;
}

static void store(const tdesc_t *t, val_t v, unsigned char *p)
{
    switch (t->cls) {
    case K_INT: int_store(p, v.u, t->w); break;
    case K_BOOL: case K_BYTE: int_store(p, v.u, 1); break;
    case K_FLOG: int_store(p, v.u, t->w); break;
    case K_FLT: flt_store(p, v.re, t->w); break;
    case K_CPX:
        flt_store(p, v.re, t->w);
        flt_store(p + flt_size[t->w], v.im, t->w);
        break;
    default:
        if (t->vcls == K_INT)
            int_store(p, v.u, t->vw);
        else
            flt_store(p, v.re, t->vw);
        if (t->ik < 0)
            memcpy(p + t->ioff, &v.idx, sizeof v.idx);
        else
            flt_store(p + t->ioff, v.idx, t->ik);
        break;
    }
}

/* Logical inputs: per element one of five patterns, so that LAND, LOR and
 * LXOR see all-true, all-false, one odd rank and random mixes. */
static int truth(uint64_t seed, int r, size_t e, int p, uint64_t h)
{
    int odd = (int)(e % (size_t)p);
    switch (mix(seed ^ 0x7777 ^ e) % 5) {
    case 0: return 1;
    case 1: return 0;
    case 2: return r != odd;
    case 3: return r == odd;
    default: return (int)(h >> 17 & 1);
    }
}

/* PROD: at most K ranks per element give a factor other than +-1 (2, 3 or
 * 0.5), so |product| <= 3^K stays exact in the type. */
static int prod_k_int(int w, int sgn)
{
    static const int k[2][4] = {{5, 10, 20, 40}, {4, 9, 19, 39}};  /* 3^K fits w bytes */
    return k[sgn][w == 1 ? 0 : w == 2 ? 1 : w == 4 ? 2 : 3];
}
static const int prod_k_flt[3] = {15, 33, 40};  /* 3^K within the mantissa */

static int prod_factor(int r, size_t e, int p, int k)
{
    return (int)(((size_t)r + e) % (size_t)p) < k;
}

static uint64_t gen_int(int op, int w, int sgn, uint64_t seed, int r, size_t e, int p,
                        uint64_t h, int safe)
{
    uint64_t h2 = mix(h ^ 0x1234), h3 = mix(h2 ^ 0x5678);
    uint64_t m = w >= 8 ? ~0ull : (1ull << (8 * w)) - 1;
    switch (op) {
    case O_SUM:
        /* |sum| of p values stays within the type */
        if (sgn) {
            uint64_t a = (m >> 1) / (uint64_t)p;
            return int_norm(h % (2 * a + 1) - a, w, 1);
        } else {
            uint64_t a = m / (uint64_t)p;
            return a == m ? h & m : h % (a + 1);
        }
    case O_PROD: {
        uint64_t mag = prod_factor(r, e, p, prod_k_int(w, sgn)) ? 2 + (h & 1) : 1;
        return int_norm(sgn && (h >> 1 & 1) ? 0 - mag : mag, w, sgn);
    }
    case O_LAND: case O_LOR: case O_LXOR: {
        if (!truth(seed, r, e, p, h))
            return 0;
        uint64_t v = int_norm(h2, w, sgn);
        return v ? v : int_norm(1ull << (8 * w - 1), w, sgn);   /* any non-zero pattern */
    }
    case O_BAND: return int_norm(h | h2 | h3, w, sgn);          /* mostly ones */
    case O_BOR: return int_norm(h & h2 & h3, w, sgn);           /* mostly zeros */
    case O_MIN: case O_MAX:
        /* safe: the top bit clear, the same order signed or unsigned */
        return int_norm(safe ? h & (m >> 1) : h, w, sgn);
    default: return int_norm(h, w, sgn);                        /* BXOR */
    }
}

static long double gen_flt(int op, int k, int r, size_t e, int p, uint64_t h)
{
    switch (op) {
    case O_SUM: return ((long double)(h % 2001) - 1000) / 4;   /* exact sums */
    case O_PROD: {
        static const long double f[3] = {0.5L, 2, 3};
        long double v = prod_factor(r, e, p, prod_k_flt[k]) ? f[h % 3] : 1;
        return h >> 2 & 1 ? -v : v;
    }
    default: return ((long double)(h % 2000001) - 1000000) / 8;
    }
}

/* Element e of rank r's input (of p ranks); safe: inputs the MPI library's
 * own kernel gets right (native_bad). */
static val_t gen(const tdesc_t *t, int op, uint64_t seed, int r, size_t e, int p, int safe)
{
    uint64_t h = hash3(seed, r, e);
    val_t v = {0, 0, 0, 0};
    switch (t->cls) {
    case K_INT: v.u = gen_int(op, t->w, t->sgn, seed, r, e, p, h, safe); break;
    case K_BYTE: v.u = gen_int(op, 1, 0, seed, r, e, p, h, 0); break;
    case K_BOOL: case K_FLOG: v.u = (uint64_t)truth(seed, r, e, p, h); break;
    case K_FLT: v.re = gen_flt(op, t->w, r, e, p, h); break;
    case K_CPX:
        if (op == O_SUM) {
            v.re = gen_flt(op, t->w, r, e, p, h);
            v.im = gen_flt(op, t->w, r, e, p, mix(h));
        } else {
            /* Gaussian integers of modulus <= 2 at most K ranks: exact products */
            static const int z[7][2] = {{0, 1}, {-1, 0}, {0, -1}, {1, 1}, {1, -1}, {2, 0}, {0, -2}};
            int i = (int)(h % 7);
            int f = prod_factor(r, e, p, prod_k_flt[t->w]);
            v.re = f ? z[i][0] : 1;
            v.im = f ? z[i][1] : 0;
        }
        break;
    default: {
        /* three values: many ties; the index decides them */
        int k = (int)(h % 3) - 1;
        if (t->vcls == K_INT)
            v.u = int_norm((uint64_t)(int64_t)k << (8 * t->vw - 4), t->vw, 1);
        else
            v.re = k * 0.75L;
        v.idx = (int)(mix(h) % 2001) - 1000;
        break;
    }
    }
    return v;
}

/* <0, 0, >0 as the signed integers (or floating values) a, b compare. */
static int cmp_num(int flt, val_t a, val_t b)
{
    if (flt)
        return a.re < b.re ? -1 : a.re > b.re;
    uint64_t x = a.u ^ (1ull << 63), y = b.u ^ (1ull << 63);
    return x < y ? -1 : x > y;
}

/* acc op v, exactly, as MPI defines op. */
static val_t combine(const tdesc_t *t, int op, val_t acc, val_t v)
{
    int flt = t->cls == K_FLT, c;
    switch (op) {
    case O_SUM:
        acc.u += v.u;
        acc.re += v.re;
        acc.im += v.im;
        break;
    case O_PROD:
        if (t->cls == K_CPX) {
            long double re = acc.re * v.re - acc.im * v.im;
            acc.im = acc.re * v.im + acc.im * v.re;
            acc.re = re;
        } else {
            acc.u *= v.u;
            acc.re *= v.re;
        }
        break;
    case O_MIN: case O_MAX:
        if (!t->sgn && !flt) {
            if (op == O_MIN ? v.u < acc.u : v.u > acc.u)
                acc = v;
        } else if ((c = cmp_num(flt, v, acc)) != 0 && (op == O_MIN) == (c < 0)) {
            acc = v;
        }
        break;
    case O_LAND: acc.u = (acc.u != 0) & (v.u != 0); break;
    case O_LOR: acc.u = (acc.u != 0) | (v.u != 0); break;
    case O_LXOR: acc.u = (acc.u != 0) ^ (v.u != 0); break;
    case O_BAND: acc.u &= v.u; break;
    case O_BOR: acc.u |= v.u; break;
    case O_BXOR: acc.u ^= v.u; break;
    default:
        c = cmp_num(t->vcls == K_FLT, v, acc);
        if (c == 0) {
            if (v.idx < acc.idx)
                acc.idx = v.idx;   /* ties: the lowest index */
        } else if ((op == O_MINLOC) == (c < 0)) {
            acc = v;
        }
        break;
    }
    if (t->cls == K_INT)
        acc.u = int_norm(acc.u, t->w, t->sgn);
    else if (t->cls == K_BYTE)
        acc.u &= 0xff;
    return acc;
}

/* Element e of the result over p ranks: ((v0 op v1) op v2) ... (with one
 * rank, v0 itself: no op is applied, not even a logical one). */
static val_t reference(const tdesc_t *t, int op, uint64_t seed, size_t e, int p, int safe)
{
    val_t acc = gen(t, op, seed, 0, e, p, safe);
    for (int r = 1; r < p; r++)
        acc = combine(t, op, acc, gen(t, op, seed, r, e, p, safe));
    return acc;
}

static int val_eq(const tdesc_t *t, val_t a, val_t b)
{
    switch (t->cls) {
    case K_FLT: return a.re == b.re;
    case K_CPX: return a.re == b.re && a.im == b.im;
    case K_PAIR: return (t->vcls == K_FLT ? a.re == b.re : a.u == b.u) && a.idx == b.idx;
    default: return a.u == b.u;
    }
}

static void val_fmt(const tdesc_t *t, val_t v, char *s, size_t n)
{
    int sgn = t->cls == K_INT ? t->sgn : 0;
    switch (t->cls) {
    case K_FLT: snprintf(s, n, "%.21Lg", v.re); break;
    case K_CPX: snprintf(s, n, "(%.21Lg, %.21Lg)", v.re, v.im); break;
    case K_PAIR:
        if (t->vcls == K_FLT)
            snprintf(s, n, "{%.21Lg, %d}", v.re, v.idx);
        else
            snprintf(s, n, "{%lld, %d}", (long long)v.u, v.idx);
        break;
    default:
        if (sgn)
            snprintf(s, n, "%lld (0x%llx)", (long long)v.u, (unsigned long long)v.u);
        else
            snprintf(s, n, "%llu (0x%llx)", (unsigned long long)v.u, (unsigned long long)v.u);
        break;
    }
}

/* ---- communicators -------------------------------------------------------------- */

typedef struct shape {
    MPI_Comm comm;
    const char *name;
    int rank, size, world;
    uint64_t id, calls;
    const char *repro_mode;   /* what the reproducibility checks could assert */
} shape_t;

/* The same sequence of seeds on every rank of a communicator. */
static uint64_t next_seed(shape_t *s)
{
    return mix(s->id * 1000003u + s->calls++);
}

/* numacoll handles comm on one node: one team holds every rank. */
static int one_node(MPI_Comm comm)
{
    const char *v = getenv("NUMACOLL_TEST_VIRTUAL_NODES");
    if (v && *v && strtol(v, NULL, 10) != 1)
        return 0;
    numacoll_team_t *team = numacoll_mpi_comm_team(comm);
    numacoll_team_info_t in;
    int size;
    MPI_Comm_size(comm, &size);
    return team && numacoll_team_info(team, &in) == 0 && in.size == size;
}

/* ---- what the MPI library gets wrong ------------------------------------------------ */

enum { NOTE_BAD_KERNEL = 1, NOTE_NOT_CHECKED = 2, NOTE_DERIVED_OP = 4, NOTE_IN_PLACE = 8 };
static int notes;   /* printed once by rank 0 */

/* native_bad[t][op]: the MPI library's own kernel (PMPI_Reduce_local, the
 * one its collectives use) is wrong for (op, type) on this test's inputs; Open
 * MPI 4.1.2-4.1.4 and MPICH 4.0.2 compare some unsigned types as signed
 * (ompi#10525, mpich#6083). Where the library may compute such a pair, MIN
 * and MAX get inputs it gets right (gen's safe); other pairs are not checked
 * there. */
static unsigned char native_bad[NTYPES][NOPS];

static void probe_native(void)
{
    enum { N = 256 };
    static unsigned char a[N * 32], b[N * 32];
    for (int ti = 0; ti < NTYPES; ti++)
        for (int oi = 0; oi < NOPS; oi++) {
            const tdesc_t *t = &types[ti];
            if (!op_valid(oi, t))
                continue;
            uint64_t seed = mix(0xbad + (uint64_t)(ti * NOPS + oi));
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            for (size_t e = 0; e < N; e++) {
                store(t, gen(t, oi, seed, 0, e, 2, 0), b + e * t->size);
                store(t, gen(t, oi, seed, 1, e, 2, 0), a + e * t->size);
            }
            /* b = a op b: x1 op x0, the same as x0 op x1 for predefined ops */
            PMPI_Reduce_local(a, b, N, t->type, ops[oi].op);
            for (size_t e = 0; e < N; e++)
                if (!val_eq(t, load(t, b + e * t->size), reference(t, oi, seed, e, 2, 0))) {
                    native_bad[ti][oi] = 1;
                    notes |= NOTE_BAD_KERNEL;
                    break;
                }
        }
}

/* MPICH 4.0 to 4.1.1 crash in MPI_Reduce with MPI_IN_PLACE at a root other
 * than 0 above 2 KiB (mpich#6540). Whether numacoll or the library runs a
 * call is known only afterwards: with those, such roots pass a sendbuf. */
static int lib_inplace_bug;

static void probe_library(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0, patch = 0;
    MPI_Get_library_version(v, &len);
    const char *m = strstr(v, "MPICH Version:");
    if (m && sscanf(m + strlen("MPICH Version:"), " %d.%d.%d", &major, &minor, &patch) >= 2)
        lib_inplace_bug = major == 4 && (minor == 0 || (minor == 1 && patch < 2));
}

/* nc_passed[t]: numacoll handed a call on type t to the library although it
 * runs the communicator on one node (reported, not a failure). */
static unsigned char nc_passed[NTYPES];

/* ---- one call of the matrix ------------------------------------------------------ */

enum { ALL, ALL_IP, RED, RED_IP, RED_NULL, NKINDS };
static const char *kind_name[NKINDS] = {
    "MPI_Allreduce", "MPI_Allreduce(IN_PLACE)", "MPI_Reduce", "MPI_Reduce(IN_PLACE at root)",
    "MPI_Reduce(recvbuf NULL at non-roots)"};

static int avoid_in_place(int kind, int root)
{
    if (kind != RED_IP || root == 0 || !lib_inplace_bug)
        return kind;
    notes |= NOTE_IN_PLACE;
    return RED;
}

#define GUARD 64
#define CANARY 0xA5
#define POISON 0x5A

/* Where the elements of one item of a derived type are: `n` positions (in
 * elements of the predefined type) within an extent of `ext` elements. */
typedef struct layout {
    const char *name;
    MPI_Datatype type;
    int base;        /* index in types[] */
    int n, ext;
    int pos[8];
    int to_lib;      /* numacoll hands it to the MPI library (a pair type with gaps) */
} layout_t;

/* *handled: numacoll took the call (its counters moved). */
static int reduce_call(int kind, const void *sb, void *rb, int count, MPI_Datatype type,
                       MPI_Op op, int root, MPI_Comm comm, int *handled)
{
    unsigned long long before = nc_calls();
    int rc = kind == ALL || kind == ALL_IP ? MPI_Allreduce(sb, rb, count, type, op, comm)
                                           : MPI_Reduce(sb, rb, count, type, op, root, comm);
    *handled = nc_calls() != before;
    ncalls++;
    nhandled += (unsigned long long)*handled;
    return rc;
}

static int bytes_are(const unsigned char *p, size_t n, unsigned char c, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != c) {
            *at = i;
            return 0;
        }
    return 1;
}

/* One reduction of `count` items of `lay` (a predefined type: lay NULL) with
 * predefined op `oi`; every check on this rank's buffers. */
static void run_case(shape_t *s, int oi, int ti, const layout_t *lay, size_t count, int kind,
                     int root)
{
    if (lay)
        ti = lay->base;
    const tdesc_t *t = &types[ti];
    MPI_Datatype type = lay ? lay->type : t->type;
    size_t per = lay ? (size_t)lay->n : 1, ext = (lay ? (size_t)lay->ext : 1) * t->size;
    size_t n = count * per, bytes = count * ext;
    uint64_t seed = next_seed(s);
    /* the same on every rank: the communicator's state and the environment */
    int nc_local = numacoll_mpi_comm_active(s->comm) == 1 && one_node(s->comm);
    int safe = native_bad[ti][oi] && !nc_local;
    kind = avoid_in_place(kind, root);
    int p = s->size, all = kind == ALL || kind == ALL_IP;
    int at_root = all || s->rank == root;
    int in_place = kind == ALL_IP || (kind == RED_IP && at_root);
    unsigned char *sb = malloc(bytes + 1), *copy = malloc(bytes + 1), *rb = malloc(bytes + GUARD);
    if (!sb || !copy || !rb) {
        fprintf(stderr, "[rank %d] out of memory for %zu bytes\n", wrank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(sb, POISON, bytes);
    memset(rb, CANARY, bytes + GUARD);
    unsigned char *in = in_place ? rb : sb;
    for (size_t k = 0; k < count; k++)
        for (size_t j = 0; j < per; j++)
            store(t, gen(t, oi, seed, s->rank, k * per + j, p, safe),
                  in + k * ext + (lay ? (size_t)lay->pos[j] : 0) * t->size);
    memcpy(copy, in_place ? rb : sb, bytes);

    void *rbuf = kind == RED_NULL && !at_root ? NULL : rb;
    int handled;
    int rc = reduce_call(kind, in_place ? MPI_IN_PLACE : sb, rbuf, (int)count, type, ops[oi].op,
                         root, s->comm, &handled);

    char what[256];
    snprintf(what, sizeof what, "%s op %s type %s count %zu root %d comm %s (rank %d of %d)",
             kind_name[kind], ops[oi].name, lay ? lay->name : t->name, count, all ? -1 : root,
             s->name, s->rank, p);
    if (nc_local && !handled && count && !lay)
        nc_passed[ti] = 1;
    if (nc_local && !handled && count && lay && !lay->to_lib)
        fail("%s: numacoll passed it to the MPI library", what);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (rc != MPI_SUCCESS && lay && !handled && cls == MPI_ERR_OP) {
        /* MPI defines predefined ops on predefined datatypes only */
        notes |= NOTE_DERIVED_OP;
        goto out;
    }
    if (rc != MPI_SUCCESS)
        fail("%s: returned %d (class %d)", what, rc, cls);
    /* the library's wrong kernel may have computed this one */
    int unchecked = native_bad[ti][oi] && (!safe || (oi != O_MIN && oi != O_MAX)) &&
                    (!handled || !one_node(s->comm));
    size_t at = 0;
    if (at_root && unchecked) {
        notes |= NOTE_NOT_CHECKED;
    } else if (at_root) {
        /* the result at the data positions, first wrong element printed */
        size_t bad = 0, first = 0;
        val_t got = {0, 0, 0, 0}, want = got;
        for (size_t k = 0; k < count; k++)
            for (size_t j = 0; j < per; j++) {
                size_t e = k * per + j;
                val_t g = load(t, rb + k * ext + (lay ? (size_t)lay->pos[j] : 0) * t->size);
                val_t x = reference(t, oi, seed, e, p, safe);
                if (!val_eq(t, g, x) && !bad++) {
                    first = e;
                    got = g;
                    want = x;
                }
            }
        if (bad) {
            char gs[96], xs[96];
            val_fmt(t, got, gs, sizeof gs);
            val_fmt(t, want, xs, sizeof xs);
            fail("%s: element %zu got %s expected %s (%zu of %zu elements wrong)", what, first, gs,
                 xs, bad, n);
        }
    }
    if (at_root) {
        /* gaps of a derived type */
        if (lay)
            for (size_t k = 0; k < count; k++)
                for (int j = 0, q = 0; j < lay->ext; j++) {
                    if (q < lay->n && lay->pos[q] == j) {
                        q++;
                        continue;
                    }
                    if (!bytes_are(rb + k * ext + (size_t)j * t->size, t->size, CANARY, &at)) {
                        fail("%s: gap element %d of item %zu written", what, j, k);
                        k = count;
                        break;
                    }
                }
        if (!bytes_are(rb + bytes, GUARD, CANARY, &at))
            fail("%s: byte %zu past the result written", what, at);
    } else if (rbuf && !bytes_are(rb, bytes + GUARD, CANARY, &at)) {
        fail("%s: non-root recvbuf written at byte %zu", what, at);
    }
    if (!in_place && memcmp(sb, copy, bytes) != 0)
        fail("%s: sendbuf modified", what);
out:
    free(sb);
    free(copy);
    free(rb);
}

/* ---- the parts of a shape ------------------------------------------------------- */

/* 1: every (op, type). level 2: counts 0, 1, 7, 1000, both allreduces and a
 * reduce at every root per count; level 1: one call per count, kinds and
 * roots rotating over the pairs; level 0: the same at count 7 only. */
static void matrix(shape_t *s, int level)
{
    static const size_t counts[] = {0, 1, 7, 1000};
    int p = s->size, i = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int oi = 0; oi < NOPS; oi++) {
            if (!op_valid(oi, &types[ti]))
                continue;
            i++;
            for (int j = 0; j < 4; j++) {
                if (level == 0 && j != 2)
                    continue;
                if (level < 2) {
                    run_case(s, oi, ti, NULL, counts[j], (i + j) % NKINDS, (i + 3 * j) % p);
                    continue;
                }
                run_case(s, oi, ti, NULL, counts[j], ALL, 0);
                run_case(s, oi, ti, NULL, counts[j], ALL_IP, 0);
                for (int root = 0; root < p; root++)
                    run_case(s, oi, ti, NULL, counts[j], RED + (root + j + i) % 3, root);
            }
        }
}

/* 2-4: a few (op, type) pairs on every path: small counts at every root, in
 * place or not; byte sizes around fragment boundaries; 3 MiB. */
static void paths(shape_t *s, int full)
{
    static const struct { int op; MPI_Datatype type; } pairs[] = {
        {O_SUM, MPI_DOUBLE}, {O_BXOR, MPI_UINT8_T}, {O_MAXLOC, MPI_DOUBLE_INT},
        {O_SUM, MPI_INT}, {O_LXOR, MPI_C_BOOL}, {O_PROD, MPI_C_DOUBLE_COMPLEX},
        {O_MIN, MPI_FLOAT}, {O_SUM, MPI_LONG_DOUBLE}, {O_MINLOC, MPI_SHORT_INT},
    };
    static const size_t small[] = {0, 1, 7, 1000};
    static const size_t base[] = {4096, 65536, 262144};
    int np = full ? (int)(sizeof pairs / sizeof pairs[0]) : 3, p = s->size, c = 0;
    for (int i = 0; i < np; i++) {
        int oi = pairs[i].op, ti = type_index(pairs[i].type);
        size_t sz = types[ti].size;
        for (int j = 0; j < 4; j++) {
            run_case(s, oi, ti, NULL, small[j], ALL, 0);
            run_case(s, oi, ti, NULL, small[j], ALL_IP, 0);
            for (int root = 0; root < p; root++)
                run_case(s, oi, ti, NULL, small[j], RED + (root + j) % 3, root);
        }
        /* byte sizes b-1, b, b+1 (1-byte types), or b/size -1, 0, +1 elements */
        for (int b = 0; b < 3; b++)
            for (int d = -1; d <= 1; d++) {
                if (!full && !(b == 0 || (b == 1 && d == 1) || (b == 2 && d == 0)))
                    continue;
                size_t n = base[b] / sz - 1 + (size_t)(d + 1);
                c++;
                run_case(s, oi, ti, NULL, n, c % NKINDS, (c * 5) % p);
            }
        if (full || i == 0) {
            /* several fragments, an odd count */
            size_t n = (3u << 20) / sz + 3;
            run_case(s, oi, ti, NULL, n, ALL, 0);
            run_case(s, oi, ti, NULL, n, RED_IP, p - 1);
        }
    }
    if (full && s->world)
        run_case(s, O_SUM, type_index(MPI_DOUBLE), NULL, (64u << 20) / sizeof(double), ALL, 0);
}

/* 5: derived types of one predefined type with predefined ops. MPI defines
 * those ops on predefined datatypes only: the MPI library may refuse them
 * (MPI_ERR_OP, note), numacoll takes them. */
static void derived(shape_t *s, int full)
{
    enum { NLAYS = 7 };
    layout_t lays[NLAYS] = {
        {"contiguous(3, MPI_INT)", MPI_DATATYPE_NULL, type_index(MPI_INT), 3, 3, {0, 1, 2}, 0},
        {"vector(4, 2, 3, MPI_DOUBLE)", MPI_DATATYPE_NULL, type_index(MPI_DOUBLE), 8, 11,
         {0, 1, 3, 4, 6, 7, 9, 10}, 0},
        {"indexed({1,2,3}, {0,3,7}, MPI_INT)", MPI_DATATYPE_NULL, type_index(MPI_INT), 6, 10,
         {0, 3, 4, 7, 8, 9}, 0},
        {"vector(2, 1, 2, MPI_DOUBLE_INT)", MPI_DATATYPE_NULL, type_index(MPI_DOUBLE_INT), 2, 3,
         {0, 2}, 1},
        {"contiguous(3, MPI_LONG_DOUBLE_INT)", MPI_DATATYPE_NULL,
         type_index(MPI_LONG_DOUBLE_INT), 3, 3, {0, 1, 2}, 0},
        {"vector(3, 1, 2, MPI_2REAL)", MPI_DATATYPE_NULL, type_index(MPI_2REAL), 3, 5,
         {0, 2, 4}, 0},
        {"vector(2, 1, 3, MPI_LOGICAL)", MPI_DATATYPE_NULL, type_index(MPI_LOGICAL), 2, 4,
         {0, 3}, 0},
    };
    static const int lops[NLAYS][2] = {{O_SUM, O_BAND},     {O_SUM, O_MAX},
                                       {O_BXOR, O_MIN},     {O_MINLOC, O_MAXLOC},
                                       {O_MAXLOC, O_MINLOC}, {O_MINLOC, O_MAXLOC},
                                       {O_LXOR, O_LAND}};
    int bl[3] = {1, 2, 3}, dis[3] = {0, 3, 7};
    MPI_Type_contiguous(3, MPI_INT, &lays[0].type);
    MPI_Type_vector(4, 2, 3, MPI_DOUBLE, &lays[1].type);
    MPI_Type_indexed(3, bl, dis, MPI_INT, &lays[2].type);
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE_INT, &lays[3].type);
    MPI_Type_contiguous(3, MPI_LONG_DOUBLE_INT, &lays[4].type);
    MPI_Type_vector(3, 1, 2, MPI_2REAL, &lays[5].type);
    MPI_Type_vector(2, 1, 3, MPI_LOGICAL, &lays[6].type);
    static const size_t counts[] = {0, 1, 5, 3000, 100000};
    int p = s->size, c = 0;
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    for (int l = 0; l < NLAYS; l++) {
        MPI_Type_commit(&lays[l].type);
        MPI_Aint lb, extent;
        MPI_Type_get_extent(lays[l].type, &lb, &extent);
        if (lb != 0 || (size_t)extent != (size_t)lays[l].ext * types[lays[l].base].size)
            fail("%s: extent %ld, expected %zu", lays[l].name, (long)extent,
                 (size_t)lays[l].ext * types[lays[l].base].size);
        for (int o = 0; o < 2; o++)
            for (int j = 0; j < (full ? 5 : 4); j++) {
                int oi = lops[l][o];
                if (j == 2 && (full || o == 0)) {
                    run_case(s, oi, 0, &lays[l], counts[j], ALL, 0);
                    run_case(s, oi, 0, &lays[l], counts[j], ALL_IP, 0);
                    for (int root = 0; root < p; root++)
                        run_case(s, oi, 0, &lays[l], counts[j], RED + root % 3, root);
                } else {
                    c++;
                    run_case(s, oi, 0, &lays[l], counts[j], c % NKINDS, (c * 3) % p);
                }
            }
        MPI_Type_free(&lays[l].type);
    }
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_ARE_FATAL);
}

/* 6: user ops on uint32 words (declared MPI_INT: the arithmetic is unsigned,
 * no overflow): a commutative sum on MPI_INT and on an indexed type with
 * gaps, a non-commutative 2x2 matrix product (4 words, row-major) on
 * contiguous(4, MPI_INT) and on indexed({1,1,1,1}, {1,0,3,2}, MPI_INT): the
 * same gap-free words with the blocks out of order, which the user function
 * must see in their places, not in the type's order (MPI_Pack's). */
static MPI_Datatype mat_type, gap_type, perm_type;
static const int gap_pos[6] = {0, 3, 4, 7, 8, 9};   /* of 10 words */
static int uop_bad_type;

static void usum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const uint32_t *a = in;
    uint32_t *b = inout;
    if (*dt == MPI_INT) {
        for (int i = 0; i < *len; i++)
            b[i] += a[i];
    } else if (*dt == gap_type) {
        for (int i = 0; i < *len; i++)
            for (int j = 0; j < 6; j++)
                b[10 * i + gap_pos[j]] += a[10 * i + gap_pos[j]];
    } else {
        uop_bad_type++;
    }
}

static void mat_mul(const uint32_t *a, const uint32_t *b, uint32_t *c)
{
    uint32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(c, r, sizeof r);
}

/* inout = in x inout: MPI's in op inout, `in` from the lower ranks. */
static void matmul_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const uint32_t *a = in;
    uint32_t *b = inout;
    if (*dt != mat_type && *dt != perm_type)
        uop_bad_type++;
    for (int i = 0; i < *len; i++)
        mat_mul(a + 4 * i, b + 4 * i, b + 4 * i);
}

typedef struct ulayout {
    const char *name;
    MPI_Datatype type;
    int mat;          /* matrix product; else word sum */
    int n, ext;       /* data words per item, extent in words */
    const int *pos;   /* data words' positions; NULL: 0..n-1 */
} ulayout_t;

static void user_case(shape_t *s, MPI_Op op, const ulayout_t *ul, size_t count, int kind,
                      int root)
{
    size_t n = count * (size_t)ul->n, words = count * (size_t)ul->ext;
    size_t bytes = words * sizeof(uint32_t);
    uint64_t seed = next_seed(s);
    kind = avoid_in_place(kind, root);
    int p = s->size, all = kind == ALL || kind == ALL_IP;
    int at_root = all || s->rank == root;
    int in_place = kind == ALL_IP || (kind == RED_IP && at_root);
    uint32_t *sb = malloc(bytes + 4), *copy = malloc(bytes + 4), *rb = malloc(bytes + GUARD);
    uint32_t *want = malloc(n * 4 + 4), *x = malloc(n * 4 + 4);
    if (!sb || !copy || !rb || !want || !x)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(sb, POISON, bytes);
    memset(rb, CANARY, bytes + GUARD);
#define UPOS(d) ((d) / (size_t)ul->n * (size_t)ul->ext + \
                 (ul->pos ? (size_t)ul->pos[(d) % (size_t)ul->n] : (d) % (size_t)ul->n))
    uint32_t *in = in_place ? rb : sb;
    for (size_t d = 0; d < n; d++)
        in[UPOS(d)] = (uint32_t)hash3(seed, s->rank, d);
    memcpy(copy, in, bytes);
    void *rbuf = kind == RED_NULL && !at_root ? NULL : rb;
    uop_bad_type = 0;
    int handled;
    int rc = reduce_call(kind, in_place ? MPI_IN_PLACE : sb, rbuf, (int)count, ul->type, op, root,
                         s->comm, &handled);
    char what[256];
    snprintf(what, sizeof what, "%s user op %s on %s count %zu root %d comm %s (rank %d of %d)",
             kind_name[kind],
             ul->mat ? "2x2 matrix product (non-commutative)" : "sum (commutative)", ul->name,
             count, all ? -1 : root, s->name, s->rank, p);
    if (rc != MPI_SUCCESS)
        fail("%s: returned %d", what, rc);
    if (uop_bad_type)
        fail("%s: the user function got another datatype handle than the call's", what);
    size_t at;
    if (at_root) {
        for (size_t d = 0; d < n; d++)
            want[d] = (uint32_t)hash3(seed, 0, d);
        for (int r = 1; r < p; r++) {
            for (size_t d = 0; d < n; d++)
                x[d] = (uint32_t)hash3(seed, r, d);
            if (ul->mat)
                for (size_t k = 0; k < count; k++)   /* (a0 ... a(r-1)) a(r) */
                    mat_mul(want + 4 * k, x + 4 * k, want + 4 * k);
            else
                for (size_t d = 0; d < n; d++)
                    want[d] += x[d];
        }
        for (size_t d = 0; d < n; d++)
            if (rb[UPOS(d)] != want[d]) {
                fail("%s: element %zu word %zu got %u expected %u", what, d / (size_t)ul->n,
                     d % (size_t)ul->n, (unsigned)rb[UPOS(d)], (unsigned)want[d]);
                break;
            }
        for (size_t w = 0, d = 0; w < words; w++) {
            if (d < n && UPOS(d) == w) {
                d++;
                continue;
            }
            if (!bytes_are((unsigned char *)(rb + w), 4, CANARY, &at)) {
                fail("%s: gap word %zu written", what, w);
                break;
            }
        }
        if (!bytes_are((unsigned char *)rb + bytes, GUARD, CANARY, &at))
            fail("%s: byte %zu past the result written", what, at);
    } else if (rbuf && !bytes_are((unsigned char *)rb, bytes + GUARD, CANARY, &at)) {
        fail("%s: non-root recvbuf written at byte %zu", what, at);
    }
#undef UPOS
    if (!in_place && memcmp(sb, copy, bytes) != 0)
        fail("%s: sendbuf modified", what);
    free(sb);
    free(copy);
    free(rb);
    free(want);
    free(x);
}

static void user_ops(shape_t *s, int full)
{
    MPI_Op usum, matmul;
    MPI_Op_create(usum_fn, 1, &usum);
    MPI_Op_create(matmul_fn, 0, &matmul);
    const ulayout_t uls[4] = {
        {"MPI_INT", MPI_INT, 0, 1, 1, NULL},
        {"contiguous(4, MPI_INT)", mat_type, 1, 4, 4, NULL},
        {"indexed({1,2,3}, {0,3,7}, MPI_INT)", gap_type, 0, 6, 10, gap_pos},
        {"indexed({1,1,1,1}, {1,0,3,2}, MPI_INT)", perm_type, 1, 4, 4, NULL},
    };
    static const size_t counts[4][3] = {
        {1, 1000, 100000}, {7, 1, 5000}, {5, 1, 3000}, {3, 1, 4000}};
    int p = s->size, c = 0;
    for (int u = 0; u < 4; u++)
        for (int j = 0; j < 3; j++) {
            MPI_Op op = uls[u].mat ? matmul : usum;
            if (j == 0 || full) {
                user_case(s, op, &uls[u], counts[u][j], ALL, 0);
                user_case(s, op, &uls[u], counts[u][j], ALL_IP, 0);
                for (int root = 0; root < p; root++)
                    user_case(s, op, &uls[u], counts[u][j], RED + (root + j) % 3, root);
            } else {
                c++;
                user_case(s, op, &uls[u], counts[u][j], c % NKINDS, (c * 3 + 1) % p);
            }
        }
    MPI_Op_free(&usum);
    MPI_Op_free(&matmul);
}

/* ---- 7: reproducibility ------------------------------------------------------------ */

/* Uniform in [-1, 1) times 2^k, k in -20..20. */
static double rnd_double(uint64_t seed, int r, size_t e)
{
    uint64_t h = hash3(seed, r, e);
    double u = (double)(h >> 11) * 0x1p-52 - 1;
    return ldexp(u, (int)(mix(h) % 41) - 20);
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Checks (a) of y against the rank-order fold `ref` (bitwise when strict);
 * returns the number of wrong elements. */
static size_t check_fold(const double *y, const double *ref, const double *mag, size_t n,
                         int strict, size_t *first)
{
    size_t bad = 0;
    for (size_t e = 0; e < n; e++) {
        int ok = strict ? memcmp(&y[e], &ref[e], sizeof(double)) == 0
                        : fabs(y[e] - ref[e]) <= 1e-12 * mag[e];
        if (!ok && !bad++)
            *first = e;
    }
    return bad;
}

static void repro(shape_t *s, size_t n, int repeats)
{
    uint64_t seed = next_seed(s), dseed = next_seed(s);
    int p = s->size;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *ref = malloc(n * sizeof *ref);
    double *mag = malloc(n * sizeof *mag);
    uint64_t *hs = malloc((size_t)p * sizeof *hs);
    if (!x || !y || !ref || !mag || !hs)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t e = 0; e < n; e++) {
        x[e] = rnd_double(seed, s->rank, e);
        ref[e] = rnd_double(seed, 0, e);
        mag[e] = fabs(ref[e]);
        for (int r = 1; r < p; r++) {
            double v = rnd_double(seed, r, e);
            ref[e] += v;
            mag[e] += fabs(v);
        }
    }
    char what[160];
    snprintf(what, sizeof what,
             "reproducibility: MPI_SUM of %zu random doubles comm %s (rank %d of %d)", n, s->name,
             s->rank, p);

    unsigned long long before = nc_calls();
    int rc = MPI_Allreduce(x, y, (int)n, MPI_DOUBLE, MPI_SUM, s->comm);
    int nc = nc_calls() != before && numacoll_mpi_comm_active(s->comm) == 1;
    int strict = nc && one_node(s->comm);
    ncalls++;
    nhandled += (unsigned long long)nc;
    if (rc != MPI_SUCCESS)
        fail("%s: MPI_Allreduce returned %d", what, rc);
    s->repro_mode = strict ? "bitwise (numacoll, one node)"
                    : nc   ? "tolerance, same bits (numacoll, nodes)"
                           : "tolerance (native)";
    /* (a) */
    size_t first = 0, bad = check_fold(y, ref, mag, n, strict, &first);
    if (bad)
        fail("%s: (a) MPI_Allreduce element %zu got %.17g expected %.17g (%s; %zu wrong)", what,
             first, y[first], ref[first], strict ? "bitwise" : "tolerance", bad);
    /* (b) the same bits on every rank */
    uint64_t h = hash_bytes(y, n * sizeof *y);
    MPI_Allgather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, s->comm);
    int same = 1;
    for (int r = 0; r < p; r++)
        same &= hs[r] == h;
    if (!same && nc)
        fail("%s: (b) ranks got different bits", what);
    /* (c) repeats, random ranks delayed by 0..200 us before the call */
    int differ = 0, all_nc = nc;
    double *z = malloc(n * sizeof *z);
    if (!z)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < repeats; i++) {
        uint64_t d = hash3(dseed, s->rank, (size_t)i);
        if (d & 1)
            usleep((useconds_t)(d >> 8) % 201);
        before = nc_calls();
        rc = MPI_Allreduce(x, z, (int)n, MPI_DOUBLE, MPI_SUM, s->comm);
        int hit = nc_calls() != before;
        all_nc &= hit;
        ncalls++;
        nhandled += (unsigned long long)hit;
        if (rc != MPI_SUCCESS)
            fail("%s: repeat %d returned %d", what, i, rc);
        if (memcmp(y, z, n * sizeof *z) != 0)
            differ++;
    }
    if (differ && all_nc)
        fail("%s: (c) %d of %d repeats gave other bits", what, differ, repeats);
    if (!nc && s->world && !same)
        s->repro_mode = "tolerance (native; its ranks disagree)";
    else if (!nc && s->world && differ)
        s->repro_mode = "tolerance (native; its repeats differ)";
    /* (a) for MPI_Reduce at the last rank */
    int root = p - 1;
    memset(z, 0, n * sizeof *z);
    before = nc_calls();
    rc = MPI_Reduce(x, z, (int)n, MPI_DOUBLE, MPI_SUM, root, s->comm);
    int hit = nc_calls() != before;
    ncalls++;
    nhandled += (unsigned long long)hit;
    if (rc != MPI_SUCCESS)
        fail("%s: MPI_Reduce returned %d", what, rc);
    if (s->rank == root) {
        int st = hit && numacoll_mpi_comm_active(s->comm) == 1 && one_node(s->comm);
        bad = check_fold(z, ref, mag, n, st, &first);
        if (bad)
            fail("%s: (a) MPI_Reduce root %d element %zu got %.17g expected %.17g (%s; %zu wrong)",
                 what, root, first, z[first], ref[first], st ? "bitwise" : "tolerance", bad);
    }
    free(x);
    free(y);
    free(z);
    free(ref);
    free(mag);
    free(hs);
}

/* Count 0 with NULL buffers (MPI allows any buffer there, and programs pass
 * NULL): MPI_SUCCESS on every rank, and numacoll takes the calls. */
static void null_zero(shape_t *s)
{
    MPI_Datatype vec;
    MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    /* a predefined op on a derived type: numacoll's extension (the MPI
     * libraries refuse it, and p = 1 goes to them) */
    const MPI_Datatype dvec = s->size > 1 ? vec : MPI_DOUBLE;
    const unsigned long long before = nc_calls();
    int rc, n = 0;
    if ((rc = MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, s->comm)) != MPI_SUCCESS)
        fail("%s: MPI_Allreduce(NULL, NULL, 0) returned %d", s->name, rc);
    n++;
    if ((rc = MPI_Allreduce(MPI_IN_PLACE, NULL, 0, MPI_DOUBLE, MPI_MAX, s->comm)) != MPI_SUCCESS)
        fail("%s: MPI_Allreduce(MPI_IN_PLACE, NULL, 0) returned %d", s->name, rc);
    n++;
    if ((rc = MPI_Allreduce(NULL, NULL, 0, dvec, MPI_SUM, s->comm)) != MPI_SUCCESS)
        fail("%s: MPI_Allreduce(NULL, NULL, 0, vector) returned %d", s->name, rc);
    n++;
    for (int root = 0; root < s->size; root++, n++) {
        void *sb = s->rank == root && root % 2 ? MPI_IN_PLACE : NULL;
        if ((rc = MPI_Reduce(sb, NULL, 0, root % 2 ? dvec : MPI_LONG, MPI_SUM, root, s->comm)) !=
            MPI_SUCCESS)
            fail("%s: MPI_Reduce(%s, NULL, 0, root %d) returned %d", s->name,
                 sb ? "MPI_IN_PLACE" : "NULL", root, rc);
    }
    /* numacoll's calls on a team: every one of them (p = 1 goes to PMPI) */
    if (s->size > 1 && one_node(s->comm) && nc_calls() - before != (unsigned long long)n)
        fail("%s: numacoll took %llu of %d calls of count 0", s->name, nc_calls() - before, n);
    MPI_Type_free(&vec);
}

static void run_shape(shape_t *s)
{
    if (s->comm == MPI_COMM_NULL)
        return;
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    int full = !quick;
    null_zero(s);
    matrix(s, full + s->world);
    paths(s, full);
    derived(s, full);
    user_ops(s, full);
    repro(s, 10000, quick ? 20 : 100);
    if (s->world)
        repro(s, (1u << 20) / sizeof(double), quick ? 3 : 10);
}

/* ---- 9: mismatched counts ---------------------------------------------------------- */

static volatile sig_atomic_t mismatch_nc;

static void on_alarm(int sig)
{
    (void)sig;
    static const char a[] = "FAIL mismatch: MPI_Allreduce did not return within 60 s\n";
    static const char b[] = "note: the native MPI did not return within 60 s on the mismatch\n";
    if (mismatch_nc)
        (void)!write(2, a, sizeof a - 1);
    else
        (void)!write(2, b, sizeof b - 1);
    _exit(mismatch_nc ? 1 : 0);
}

/* Every rank's error class for the call, printed by rank 0; with numacoll each
 * must be MPI_ERR_TRUNCATE or MPI_ERR_ARG (only the root's in a reduce), but
 * rank `zero`'s (it passed count 0: it returns at once, untold) MPI_SUCCESS. */
static void mismatch_report(MPI_Comm comm, const char *what, int rc, int root, int zero)
{
    int cls = MPI_SUCCESS, size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    int *all = malloc((size_t)size * sizeof *all);
    PMPI_Gather(&cls, 1, MPI_INT, all, 1, MPI_INT, 0, comm);
    if (rank == 0) {
        printf("%s: error classes", what);
        for (int r = 0; r < size; r++) {
            char s[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(all[r], s, &len);
            printf(" rank %d: %d (%s)%s", r, all[r], s, r + 1 < size ? ";" : "\n");
        }
        fflush(stdout);
    }
    free(all);
    if (mismatch_nc && rank == zero && cls != MPI_SUCCESS)
        fail("%s: rank %d (count 0) got error class %d, expected MPI_SUCCESS", what, rank, cls);
    else if (mismatch_nc && rank != zero && (root < 0 || rank == root) &&
             cls != MPI_ERR_TRUNCATE && cls != MPI_ERR_ARG)
        fail("%s: rank %d got error class %d, expected MPI_ERR_TRUNCATE (%d) or MPI_ERR_ARG (%d)",
             what, rank, cls, MPI_ERR_TRUNCATE, MPI_ERR_ARG);
}

static void mismatch(void)
{
    if (wsize < 2) {
        if (wrank == 0)
            printf("note: mismatch needs 2 ranks or more\n");
        return;
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int in[200], out[200];
    for (int i = 0; i < 200; i++)
        in[i] = wrank + i;
    /* 1. a matching call sets the communicator up and tells who handles it */
    unsigned long long before = nc_calls();
    int rc = MPI_Allreduce(in, out, 100, MPI_INT, MPI_SUM, comm);
    mismatch_nc = nc_calls() != before && numacoll_mpi_comm_active(comm) == 1;
    if (rc != MPI_SUCCESS || out[99] != wsize * (wsize - 1) / 2 + 99 * wsize)
        fail("mismatch: the matching MPI_Allreduce before it: rc %d, element 99 %d", rc, out[99]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm(60);
    /* 2. rank 1 passes a larger count (Open MPI and MPICH return on this at
     * p = 3 without numacoll; a smaller one makes Open MPI hang) */
    rc = MPI_Allreduce(in, out, wrank == 1 ? 200 : 100, MPI_INT, MPI_SUM, comm);
    mismatch_report(comm, "MPI_Allreduce, rank 1 count 200, others 100", rc, -1, -1);
    if (mismatch_nc) {
        /* 3. a smaller count, then in MPI_Reduce, then the communicator works */
        rc = MPI_Allreduce(in, out, wrank == 1 ? 50 : 100, MPI_INT, MPI_SUM, comm);
        mismatch_report(comm, "MPI_Allreduce, rank 1 count 50, others 100", rc, -1, -1);
        rc = MPI_Reduce(in, out, wrank == 1 ? 50 : 100, MPI_INT, MPI_SUM, 0, comm);
        mismatch_report(comm, "MPI_Reduce root 0, rank 1 count 50, others 100", rc, 0, -1);
        /* count 0 at one rank: the others find it in their slow wait */
        rc = MPI_Allreduce(in, out, wrank == 1 ? 0 : 100, MPI_INT, MPI_SUM, comm);
        mismatch_report(comm, "MPI_Allreduce, rank 1 count 0, others 100", rc, -1, 1);
        rc = MPI_Reduce(in, out, wrank == 1 ? 0 : 3, MPI_INT, MPI_SUM, 0, comm);
        mismatch_report(comm, "MPI_Reduce root 0, rank 1 count 0, others 3", rc, 0, 1);
        memset(out, 0, sizeof out);
        rc = MPI_Allreduce(in, out, 100, MPI_INT, MPI_SUM, comm);
        if (rc != MPI_SUCCESS || out[99] != wsize * (wsize - 1) / 2 + 99 * wsize)
            fail("mismatch: a matching MPI_Allreduce after the errors: rc %d, element 99 %d", rc,
                 out[99]);
        /* NUMACOLL_REDUCE_PACK_MAX of at most 8000: calls in rounds (2r in
         * src/mpi/nc_mpi_reduce.c) against other calls in rounds, against
         * calls below the limit and against count 0; every rank in rounds
         * gets an error, none waits, and the communicator works after */
        const char *pm = getenv("NUMACOLL_REDUCE_PACK_MAX");
        if (pm && strtoull(pm, NULL, 10) <= 8000) {
            enum { N = 3000 };
            int *bi = malloc(N * sizeof *bi), *bo = malloc(N * sizeof *bo);
            for (int i = 0; i < N; i++)
                bi[i] = wrank + i;
            static const struct { int c1, c, root1, root; const char *what; } cs[] = {
                {3000, 2000, -1, -1, "MPI_Allreduce in rounds, rank 1 3000 ints, others 2000"},
                {2000, 3000, 0, 0, "MPI_Reduce root 0 in rounds, rank 1 2000 ints, others 3000"},
                {2000, 2000, 1, 0, "MPI_Reduce in rounds, rank 1 root 1, others root 0"},
                {500, 2000, -1, -1, "MPI_Allreduce, rank 1 500 ints (one call), others 2000 "
                                    "(rounds)"},
                {0, 2000, -1, -1, "MPI_Allreduce, rank 1 count 0, others 2000 (rounds)"},
            };
            for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
                const int n = wrank == 1 ? cs[k].c1 : cs[k].c,
                          r = wrank == 1 ? cs[k].root1 : cs[k].root;
                rc = r < 0 ? MPI_Allreduce(bi, bo, n, MPI_INT, MPI_SUM, comm)
                           : MPI_Reduce(bi, bo, n, MPI_INT, MPI_SUM, r, comm);
                int cls = MPI_SUCCESS;
                if (rc != MPI_SUCCESS)
                    MPI_Error_class(rc, &cls);
                if (wrank == 0)
                    printf("%s: rank 0 error class %d\n", cs[k].what, cls);
                /* the ranks in rounds (4 * n > the limit) must all see it */
                if (4 * (size_t)n > strtoull(pm, NULL, 10) && cls == MPI_SUCCESS)
                    fail("%s: rank %d (in rounds) got no error", cs[k].what, wrank);
            }
            memset(bo, 0, N * sizeof *bo);
            rc = MPI_Allreduce(bi, bo, N, MPI_INT, MPI_SUM, comm);
            if (rc != MPI_SUCCESS || bo[N - 1] != wsize * (wsize - 1) / 2 + (N - 1) * wsize)
                fail("mismatch: a matching MPI_Allreduce in rounds after the errors: rc %d, "
                     "element %d %d", rc, N - 1, bo[N - 1]);
            free(bi);
            free(bo);
        }
    } else if (wrank == 0) {
        printf("note: numacoll does not handle this MPI_Allreduce: the classes are the "
               "native MPI's and not asserted\n");
    }
    alarm(0);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "full";
    if (strcmp(mode, "full") && strcmp(mode, "quick") && strcmp(mode, "mismatch")) {
        fprintf(stderr, "usage: test_mpi_reduce [full|quick|mismatch]\n");
        return 2;
    }
    quick = !strcmp(mode, "quick");
    /* The bitwise checks are against the rank-order fold: numacoll's order
     * on any node with NUMACOLL_REDUCE_NUMA=0 (the two-level order of a NUMA
     * node is the core test's and the guest test's). Before MPI_Init: the
     * MPI layer reads the tunables there. */
    setenv("NUMACOLL_REDUCE_NUMA", "0", 1);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    double t0 = MPI_Wtime();
    char modes[512] = "";

    if (!strcmp(mode, "mismatch")) {
        mismatch();
    } else {
        /* the pair types' layouts are the C structs' */
        for (int i = 0; i < NTYPES; i++) {
            MPI_Aint lb, extent;
            MPI_Type_get_extent(types[i].type, &lb, &extent);
            if ((size_t)extent != types[i].size)
                fail("%s: extent %ld, sizeof %zu", types[i].name, (long)extent, types[i].size);
        }
        probe_native();
        probe_library();
        MPI_Type_contiguous(4, MPI_INT, &mat_type);
        MPI_Type_commit(&mat_type);
        int bl[3] = {1, 2, 3}, dis[3] = {0, 3, 7};
        MPI_Type_indexed(3, bl, dis, MPI_INT, &gap_type);
        MPI_Type_commit(&gap_type);
        int pbl[4] = {1, 1, 1, 1}, pdis[4] = {1, 0, 3, 2};
        MPI_Type_indexed(4, pbl, pdis, MPI_INT, &perm_type);
        MPI_Type_commit(&perm_type);
        MPI_Comm dup, half, rev;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
        MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - 1 - wrank, &rev);
        shape_t shapes[] = {
            {MPI_COMM_WORLD, "world", 0, 0, 1, 1, 0, ""},
            {dup, "dup", 0, 0, 0, 2, 0, ""},
            {half, wrank % 2 ? "half-odd" : "half-even", 0, 0, 0, 3, 0, ""},
            {rev, "reversed", 0, 0, 0, 4, 0, ""},
            {MPI_COMM_SELF, "self", 0, 0, 0, 5, 0, ""},
        };
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            run_shape(&shapes[i]);
            size_t l = strlen(modes);
            snprintf(modes + l, sizeof modes - l, "%s%s: %s", i ? "; " : "", shapes[i].name,
                     shapes[i].repro_mode);
        }
        /* NUMACOLL_TRANSPORT=cma on one node: the large calls went by CMA */
        const char *tr = getenv("NUMACOLL_TRANSPORT");
        numacoll_team_t *tw = numacoll_mpi_comm_team(MPI_COMM_WORLD);
        if (tr && !strcmp(tr, "cma") && wsize > 1 && !getenv("NUMACOLL_TEST_VIRTUAL_NODES") &&
            (!tw || !tw->cma || !tw->reduce_cma))
            fail("NUMACOLL_TRANSPORT=cma, but %s",
                 !tw ? "no team on MPI_COMM_WORLD" : !tw->cma ? "the team may not use CMA"
                                                          : "no reduction went by CMA");
        /* NUMACOLL_STATS says which transport ran */
        numacoll_mpi_stats_t st;
        numacoll_mpi_stats(&st);
        const unsigned long long ncma =
            st.calls_cma[NUMACOLL_MPI_REDUCE] + st.calls_cma[NUMACOLL_MPI_ALLREDUCE];
        if (tw && tw->reduce_cma && !ncma)
            fail("%llu reductions went by CMA, NUMACOLL_STATS counts no call",
                 (unsigned long long)tw->reduce_cma);
        if (!(tw && tw->cma) && !getenv("NUMACOLL_TEST_VIRTUAL_NODES") && ncma)
            fail("no CMA here, NUMACOLL_STATS counts %llu calls by it", ncma);
        if (st.calls_cma[NUMACOLL_MPI_REDUCE] > st.calls_numacoll[NUMACOLL_MPI_REDUCE] ||
            st.calls_cma[NUMACOLL_MPI_ALLREDUCE] > st.calls_numacoll[NUMACOLL_MPI_ALLREDUCE])
            fail("NUMACOLL_STATS counts more calls by CMA than numacoll's");
        /* NUMACOLL_REDUCE_PACK_MAX=P (2r in src/mpi/nc_mpi_reduce.c): a call of
         * more than P bytes on one node goes in rounds of at most P, a strided
         * type packed and unpacked round by round: checked element by element
         * (every second double, the gaps untouched), and the team must have
         * taken at least bytes / P rounds for it */
        const char *pm = getenv("NUMACOLL_REDUCE_PACK_MAX");
        if (pm && tw && !getenv("NUMACOLL_TEST_VIRTUAL_NODES")) {
            const size_t pmax = (size_t)strtoull(pm, NULL, 10), n = 3 * pmax / 8 + 5;
            MPI_Datatype every2;
            MPI_Type_vector((int)n, 1, 2, MPI_DOUBLE, &every2);
            MPI_Type_commit(&every2);
            double *sb = malloc(2 * n * sizeof *sb), *rb = malloc(2 * n * sizeof *rb);
            for (size_t e = 0; e < 2 * n; e++) {
                sb[e] = e % 2 ? -1.0 : (double)(wrank + 1) * (double)(e / 2 % 1000);
                rb[e] = -2.0;
            }
            const uint32_t r0 = tw->reduce_round;
            if (MPI_Allreduce(sb, rb, 1, every2, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
                fail("rounds: MPI_Allreduce failed");
            const double ranks = (double)wsize * (wsize + 1) / 2;
            for (size_t e = 0; e < 2 * n; e++)
                if (rb[e] != (e % 2 ? -2.0 : ranks * (double)(e / 2 % 1000))) {
                    fail("rounds: %zu doubles every second: element %zu is %g", n, e, rb[e]);
                    break;
                }
            if (tw->reduce_round - r0 < n * 8 / pmax)
                fail("rounds: %zu bytes took %u rounds, fewer than bytes / %zu",
                     n * 8, tw->reduce_round - r0, pmax);
            free(sb);
            free(rb);
            MPI_Type_free(&every2);
        }
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
        MPI_Comm_free(&rev);
        MPI_Type_free(&mat_type);
        MPI_Type_free(&gap_type);
        MPI_Type_free(&perm_type);
    }

    /* The tally goes around numacoll (PMPI): it must not depend on the code
     * under test. */
    int all, any_notes;
    unsigned char passed[NTYPES];
    PMPI_Allreduce(nc_passed, passed, NTYPES, MPI_UNSIGNED_CHAR, MPI_BOR, MPI_COMM_WORLD);
    /* Every predefined datatype of the table (pair types included) is
     * numacoll's on a communicator it runs on one node. */
    if (wrank == 0)
        for (int ti = 0; ti < NTYPES; ti++)
            failures += passed[ti] ? 1 : 0;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(&notes, &any_notes, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
    if (wrank == 0 && (any_notes & NOTE_BAD_KERNEL)) {
        printf("note: the MPI library's own kernels (PMPI_Reduce_local) are wrong for");
        for (int ti = 0; ti < NTYPES; ti++) {
            int first = 1;
            for (int oi = 0; oi < NOPS; oi++)
                if (native_bad[ti][oi]) {
                    printf(first ? " %s (%s" : " %s%s", first ? types[ti].name : "",
                           ops[oi].name);
                    first = 0;
                }
            if (!first)
                printf(")");
        }
        printf("; where it may compute them, MIN/MAX get inputs with the top bit clear%s\n",
               any_notes & NOTE_NOT_CHECKED ? ", other results are not checked" : "");
    }
    if (wrank == 0) {
        int any = 0;
        for (int ti = 0; ti < NTYPES; ti++)
            if (passed[ti])
                printf("%s %s", any++ ? "," : "FAIL: numacoll passed to the MPI library on "
                                              "communicators it runs on one node:",
                       types[ti].name);
        if (any)
            printf("\n");
    }
    if (wrank == 0 && (any_notes & NOTE_IN_PLACE))
        printf("note: this MPICH crashes in MPI_Reduce(MPI_IN_PLACE) at roots other than 0 "
               "(mpich#6540): those roots pass a sendbuf instead\n");
    if (wrank == 0 && (any_notes & NOTE_DERIVED_OP))
        printf("note: the MPI library refuses predefined ops on derived datatypes (MPI_ERR_OP); "
               "checked only where numacoll takes them\n");
    if (wrank == 0 && !strcmp(mode, "mismatch"))
        printf("test_mpi_reduce mismatch p=%d: %s (%d failures; %s)\n", wsize,
               all ? "FAILED" : "PASSED", all,
               mismatch_nc ? "numacoll's errors checked" : "the library's, not asserted");
    else if (wrank == 0) {
        printf("test_mpi_reduce %s p=%d: %s (%d failures; rank 0: %llu calls, numacoll "
               "handled %llu; %.1f s)%s%s\n",
               mode, wsize, all ? "FAILED" : "PASSED", all, ncalls, nhandled, MPI_Wtime() - t0,
               *modes ? "; reproducibility: " : "", modes);
    }
    MPI_Finalize();
    return all ? 1 : 0;
}
