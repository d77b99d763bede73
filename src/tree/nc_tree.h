/*
 * Notification trees of the shared-memory broadcast: k-ary, k-nomial, flat and chain.
 *
 * One tree is built per team, for "virtual" positions 0..p-1 with the root at virtual 0.
 * A call with root r rotates it: the virtual position of rank x is
 *     v = (pos[x] - pos[r] + p) % p,   and the rank at virtual v is order[(pos[r] + v) % p],
 * so parent and children for any root cost O(1) and the whole structure O(p) memory
 * (Kurnosov & Tokmasheva: the root is unknown until the call, trees exist for every root).
 * `order` lets members be laid out e.g. grouped by NUMA node, so that subtrees stay local.
 */
#ifndef NC_TREE_H
#define NC_TREE_H

#include <stddef.h>

#include "numacoll/errors.h"

typedef enum { NC_TREE_KARY = 0, NC_TREE_KNOMIAL, NC_TREE_FLAT, NC_TREE_CHAIN } nc_tree_kind_t;

/* Largest K accepted by nc_tree_parse() and nc_tree_build(). */
#define NC_TREE_MAX_K 65536

typedef struct nc_tree {
    int p;              /* members */
    nc_tree_kind_t kind;
    int k;              /* degree (kary) or radix (knomial); 0 for flat/chain */
    int *order;         /* order[v]: rank at position v (a permutation, e.g. grouped by NUMA node) */
    int *pos;           /* pos[rank]: inverse of order */
    int *vparent;       /* parent of virtual position v when the root sits at virtual 0; -1 for v = 0 */
    int *vchild_off;    /* p+1 offsets into vchild (CSR) */
    int *vchild;        /* children virtual positions, p-1 entries in all */
    int depth;          /* height of the tree (0 for p == 1) */
} nc_tree_t;

/* Builds the tree of p members. order may be NULL (identity); otherwise it must be a
 * permutation of 0..p-1 and is copied. k: degree for kary (>= 1), radix for knomial (>= 2),
 * ignored (stored as 0) for flat and chain.
 * Returns 0, NUMACOLL_ERR_INVAL or NUMACOLL_ERR_NOMEM; on error *t is left empty (safe to free). */
int nc_tree_build(nc_tree_t *t, nc_tree_kind_t kind, int k, int p, const int *order);
/* Releases the arrays; safe on a zeroed or already freed tree. */
void nc_tree_free(nc_tree_t *t);

/* For a given root, O(1). root and rank must be in 0..p-1. */
int nc_tree_parent(const nc_tree_t *t, int root, int rank);       /* -1 for the root */
int nc_tree_nchildren(const nc_tree_t *t, int root, int rank);
int nc_tree_child(const nc_tree_t *t, int root, int rank, int i); /* 0 <= i < nchildren */

/* "kary:K" (1 <= K <= NC_TREE_MAX_K; kary:1 is the chain shape), "binary" (== kary:2),
 * "knomial:K" (2 <= K <= NC_TREE_MAX_K), "flat", "chain".
 * Returns 0, or NUMACOLL_ERR_INVAL with a message in err (if non-NULL) listing the valid forms. */
int nc_tree_parse(const char *spec, nc_tree_kind_t *kind, int *k, char *err, size_t errlen);
/* Canonical spelling into buf, e.g. "kary:2", "flat". */
void nc_tree_format(nc_tree_kind_t kind, int k, char *buf, size_t len);

#endif
