/*
 * Reduction kernels (coll/nc_reduce_kernels.c), shared by the reductions
 * (coll/nc_reduce.c), numacoll_reduce_local() and the tests.
 *
 * Two forms per (op, type), both "left op right" element by element:
 *   fold  acc[k] = acc[k] op in[k]          (acc and in do not overlap)
 *   first out[k] = a[k] op b[k]             (no two of them overlap)
 * Plain loops over restrict pointers, compiled with -O3 so gcc vectorizes
 * them (its report: -fopt-info-vec, see docs/reduce.md), and with
 * -ffp-contract=off so a multiply-add is never fused: the same inputs give
 * the same bits on every build of the file and in a serial reference.
 */
#ifndef NC_REDUCE_H
#define NC_REDUCE_H

#include <stddef.h>

#include "numacoll.h"

typedef void (*nc_red_fold_fn)(void *restrict acc, const void *restrict in, size_t n);
typedef void (*nc_red_first_fn)(void *restrict out, const void *restrict a,
                                const void *restrict b, size_t n);

typedef struct nc_red_kernel {
    nc_red_fold_fn fold;
    nc_red_first_fn first;
} nc_red_kernel_t;

/* The kernels of (op, type), or NULL when op is not defined on type. */
const nc_red_kernel_t *nc_red_kernel(numacoll_op_t op, numacoll_type_t type);

/* Line calls (coll/nc_reduce.c "Line calls"): the most bytes one carries in a
 * team of p with `slots` slots on pages of `page` bytes; 0: such a team has no
 * call lines (NUMACOLL_REDUCE_LINES aside). */
size_t nc_reduce_line_max(int p, int slots, size_t page);

/* "sum", "double", ... for messages; "?" when out of range. */
const char *nc_red_op_name(int op);
const char *nc_red_type_name(int type);

#endif
