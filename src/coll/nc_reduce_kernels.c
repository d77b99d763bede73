/*
 * Reduction kernels: every predefined op on every type it is defined for
 * (coll/nc_reduce.h). The table below is MPI's: sum and prod on integers,
 * floating point and complex; min and max on integers and floating point;
 * the logical ops on integers and bool; the bitwise ops on integers; minloc
 * and maxloc on the value-index pairs.
 *
 * Integer sum and product wrap modulo 2^N (computed in the unsigned type: no
 * signed overflow), as every MPI library's do in practice. min(acc, x) is
 * x < acc ? x : acc and max(acc, x) is x > acc ? x : acc: acc is kept on a
 * tie or a NaN, and gcc maps both to minps/maxps-style instructions without
 * -ffast-math. The logical ops give 0 or 1. minloc/maxloc keep the lower
 * index on equal values (MPI's definition), and write only the value and the
 * index of a pair (its padding is copied as it came, never computed).
 */
#include "coll/nc_reduce.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- element expressions: a = left (acc), b = right (in) ------------------------- */
#define E_SUM(T, U) ((T)((U)a + (U)b))
#define E_PROD(T, U) ((T)((U)a * (U)b))
#define E_MIN(T, U) (b < a ? b : a)
#define E_MAX(T, U) (b > a ? b : a)
#define E_LAND(T, U) ((T)((a != 0) & (b != 0)))
#define E_LOR(T, U) ((T)((a != 0) | (b != 0)))
#define E_LXOR(T, U) ((T)((a != 0) ^ (b != 0)))
#define E_BAND(T, U) ((T)(a & b))
#define E_BOR(T, U) ((T)(a | b))
#define E_BXOR(T, U) ((T)(a ^ b))

#define NC_K_DEFINE(op, tname, T, U)                                                       \
    static void fold_##op##_##tname(void *restrict acc_, const void *restrict in_, size_t n) \
    {                                                                                        \
        T *restrict acc = acc_;                                                              \
        const T *restrict in = in_;                                                          \
        for (size_t k = 0; k < n; k++) {                                                     \
            const T a = acc[k], b = in[k];                                                   \
            acc[k] = E_##op(T, U);                                                           \
        }                                                                                    \
    }                                                                                        \
    static void first_##op##_##tname(void *restrict out_, const void *restrict a_,           \
                                     const void *restrict b_, size_t n)                      \
    {                                                                                        \
        T *restrict out = out_;                                                              \
        const T *restrict pa = a_, *restrict pb = b_;                                        \
        for (size_t k = 0; k < n; k++) {                                                     \
            const T a = pa[k], b = pb[k];                                                    \
            out[k] = E_##op(T, U);                                                           \
        }                                                                                    \
    }

/* X(numacoll type suffix, C type, arithmetic type) */
#define NC_INT_TYPES(X, op)                  \
    X(op, INT8, int8_t, uint8_t)             \
    X(op, INT16, int16_t, uint16_t)          \
    X(op, INT32, int32_t, uint32_t)          \
    X(op, INT64, int64_t, uint64_t)          \
    X(op, UINT8, uint8_t, uint8_t)           \
    X(op, UINT16, uint16_t, uint16_t)        \
    X(op, UINT32, uint32_t, uint32_t)        \
    X(op, UINT64, uint64_t, uint64_t)
#define NC_FLOAT_TYPES(X, op)                      \
    X(op, FLOAT, float, float)                     \
    X(op, DOUBLE, double, double)                  \
    X(op, LONG_DOUBLE, long double, long double)
#define NC_COMPLEX_TYPES(X, op)                                             \
    X(op, FLOAT_COMPLEX, float _Complex, float _Complex)                    \
    X(op, DOUBLE_COMPLEX, double _Complex, double _Complex)                 \
    X(op, LONG_DOUBLE_COMPLEX, long double _Complex, long double _Complex)
#define NC_BOOL_TYPES(X, op) X(op, BOOL, bool, bool)

/* Which type classes each op applies to. */
#define NC_K_ARITH(X, op) NC_INT_TYPES(X, op) NC_FLOAT_TYPES(X, op) NC_COMPLEX_TYPES(X, op)
#define NC_K_ORDER(X, op) NC_INT_TYPES(X, op) NC_FLOAT_TYPES(X, op)
#define NC_K_LOGIC(X, op) NC_INT_TYPES(X, op) NC_BOOL_TYPES(X, op)
#define NC_K_BITS(X, op) NC_INT_TYPES(X, op)

#define NC_K_OPS(X)                    \
    NC_K_ARITH(X, SUM)                 \
    NC_K_ARITH(X, PROD)                \
    NC_K_ORDER(X, MIN)                 \
    NC_K_ORDER(X, MAX)                 \
    NC_K_LOGIC(X, LAND)                \
    NC_K_LOGIC(X, LOR)                 \
    NC_K_LOGIC(X, LXOR)                \
    NC_K_BITS(X, BAND)                 \
    NC_K_BITS(X, BOR)                  \
    NC_K_BITS(X, BXOR)

NC_K_OPS(NC_K_DEFINE)

/* ---- minloc / maxloc on pairs -------------------------------------------------------- */
/* X(op, name, value type, index type) */
#define NC_PAIR_TYPES(X, op)                    \
    X(op, FLOAT_INT, float, int)                \
    X(op, DOUBLE_INT, double, int)              \
    X(op, LONG_INT, long, int)                  \
    X(op, 2INT, int, int)                       \
    X(op, SHORT_INT, short, int)                \
    X(op, LONG_DOUBLE_INT, long double, int)    \
    X(op, 2FLOAT, float, float)                 \
    X(op, 2DOUBLE, double, double)

/* better(x, acc): x replaces acc's value and index */
#define BETTER_MINLOC(x, a) ((x).v < (a).v || ((x).v == (a).v && (x).i < (a).i))
#define BETTER_MAXLOC(x, a) ((x).v > (a).v || ((x).v == (a).v && (x).i < (a).i))

#define NC_PAIR_DEFINE(op, tname, V, I)                                                    \
    typedef struct {                                                                         \
        V v;                                                                                 \
        I i;                                                                                 \
    } pair_##op##_##tname;                                                                   \
    static void fold_##op##_##tname(void *restrict acc_, const void *restrict in_, size_t n) \
    {                                                                                        \
        pair_##op##_##tname *restrict acc = acc_;                                            \
        const pair_##op##_##tname *restrict in = in_;                                        \
        for (size_t k = 0; k < n; k++)                                                       \
            if (BETTER_##op(in[k], acc[k])) {                                                \
                acc[k].v = in[k].v;                                                          \
                acc[k].i = in[k].i;                                                          \
            }                                                                                \
    }                                                                                        \
    static void first_##op##_##tname(void *restrict out_, const void *restrict a_,           \
                                     const void *restrict b_, size_t n)                      \
    {                                                                                        \
        pair_##op##_##tname *restrict out = out_;                                            \
        const pair_##op##_##tname *restrict a = a_, *restrict b = b_;                        \
        for (size_t k = 0; k < n; k++) {                                                     \
            const pair_##op##_##tname *w = BETTER_##op(b[k], a[k]) ? &b[k] : &a[k];         \
            out[k] = a[k]; /* a's padding, then the chosen value and index */               \
            out[k].v = w->v;                                                                 \
            out[k].i = w->i;                                                                 \
        }                                                                                    \
    }
NC_PAIR_TYPES(NC_PAIR_DEFINE, MINLOC)
NC_PAIR_TYPES(NC_PAIR_DEFINE, MAXLOC)

/* ---- the table ----------------------------------------------------------------------- */
#define NC_K_ROW(op, tname, ...) \
    [NUMACOLL_##op][NUMACOLL_##tname] = {fold_##op##_##tname, first_##op##_##tname},
static const nc_red_kernel_t kernels[NUMACOLL_OP_COUNT][NUMACOLL_TYPE_COUNT] = {
    NC_K_OPS(NC_K_ROW) NC_PAIR_TYPES(NC_K_ROW, MINLOC) NC_PAIR_TYPES(NC_K_ROW, MAXLOC)};

const nc_red_kernel_t *nc_red_kernel(numacoll_op_t op, numacoll_type_t type)
{
    if ((unsigned)op >= NUMACOLL_OP_COUNT || (unsigned)type >= NUMACOLL_TYPE_COUNT)
        return NULL;
    const nc_red_kernel_t *k = &kernels[op][type];
    return k->fold ? k : NULL;
}

/* ---- names and sizes ----------------------------------------------------------------- */
#define NC_PAIR_SIZE_(op, tname, V, I) [NUMACOLL_##tname] = sizeof(struct { V v; I i; }),
#define NC_TYPE_SIZE_(op, tname, T, U) [NUMACOLL_##tname] = sizeof(T),
static const size_t type_size[NUMACOLL_TYPE_COUNT] = {
    NC_INT_TYPES(NC_TYPE_SIZE_, -) NC_FLOAT_TYPES(NC_TYPE_SIZE_, -)
        NC_COMPLEX_TYPES(NC_TYPE_SIZE_, -) NC_BOOL_TYPES(NC_TYPE_SIZE_, -)
            NC_PAIR_TYPES(NC_PAIR_SIZE_, -)};

NUMACOLL_API size_t numacoll_type_size(numacoll_type_t type)
{
    return (unsigned)type < NUMACOLL_TYPE_COUNT ? type_size[type] : 0;
}

NUMACOLL_API int numacoll_op_valid(numacoll_op_t op, numacoll_type_t type)
{
    return nc_red_kernel(op, type) != NULL;
}

const char *nc_red_op_name(int op)
{
    static const char *const names[NUMACOLL_OP_COUNT] = {
        "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor", "minloc",
        "maxloc"};
    return op >= 0 && op < NUMACOLL_OP_COUNT ? names[op] : "?";
}

const char *nc_red_type_name(int type)
{
    static const char *const names[NUMACOLL_TYPE_COUNT] = {
        "int8",    "int16",      "int32",          "int64",       "uint8",
        "uint16",  "uint32",     "uint64",         "float",       "double",
        "long double", "float complex", "double complex", "long double complex", "bool",
        "float-int", "double-int", "long-int", "int-int", "short-int", "long double-int",
        "float-float", "double-double"};
    return type >= 0 && type < NUMACOLL_TYPE_COUNT ? names[type] : "?";
}

NUMACOLL_API int numacoll_reduce_local(const void *in, void *inout, size_t count,
                                       numacoll_type_t type, numacoll_op_t op)
{
    const nc_red_kernel_t *k = nc_red_kernel(op, type);
    if (!k || (count && (!in || !inout)))
        return NUMACOLL_ERR_INVAL;
    if (count)
        k->fold(inout, in, count);
    return 0;
}
