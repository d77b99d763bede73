/*
 * Notification trees over virtual positions 0..p-1, root at virtual 0 (see nc_tree.h for
 * the rotation that serves any root in O(1)). Every shape gives each v > 0 a parent < v,
 * so depth is computed in one pass and a traversal from 0 reaches everyone once.
 *
 * kary:K     parent(v) = (v-1)/K, children K*v+1 .. K*v+K (those < p). A complete K-ary
 *            tree filled level by level; height = smallest h with 1+K+..+K^h >= p.
 *            kary:1 is the chain shape; binary (kary:2) and chain were the fastest in the
 *            paper's measurements, Open MPI coll/sm uses kary:4.
 * knomial:K  parent(v) = v with its lowest non-zero base-K digit cleared. Children of v:
 *            v + d*K^j for every digit position j below v's lowest non-zero digit (every
 *            position for v = 0) and d = 1..K-1, those < p. The subtree of such a child is
 *            the contiguous range [c, min(c + K^j, p)). Listed largest subtree first, so the
 *            pipeline starts the deepest branch first: highest j first, then by d, except
 *            that a branch cut short by p moves behind the larger ones (ties keep j order).
 *            Height = the most non-zero base-K digits of any v < p: with n the number of
 *            digits of p-1 (= ceil(log_K p), the number of rounds), n if p-1 >= 11..1 (n
 *            ones in base K), else n-1; e.g. p = 5, K = 2: 2, not 3. K = 2 is binomial.
 * flat       the root's children are all the others (MVAPICH's choice); height 1.
 * chain      v's child is v+1 (linear pipeline); height p-1.
 */
#include "tree/nc_tree.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/nc_common.h"

void nc_tree_free(nc_tree_t *t)
{
    if (t == NULL)
        return;
    free(t->order);
    free(t->pos);
    free(t->vparent);
    free(t->vchild_off);
    free(t->vchild);
    memset(t, 0, sizeof(*t));
}

/* Number of children of virtual position v (first pass of the CSR build). */
static int count_children(nc_tree_kind_t kind, int k, int p, int v)
{
    long long n = 0;

    switch (kind) {
    case NC_TREE_KARY: {
        long long first = (long long)k * v + 1;
        if (first < p)
            n = (p - first < k) ? p - first : k;
        break;
    }
    case NC_TREE_KNOMIAL: {
        /* Digit positions j below v's lowest non-zero digit, i.e. K^j < lowbit(v)'s weight. */
        long long w;
        for (w = 1; w < p; w *= k) {
            if (v != 0 && (v / w) % k != 0)
                break;
            for (int d = 1; d < k; d++)
                if (v + (long long)d * w < p)
                    n++;
        }
        break;
    }
    case NC_TREE_FLAT:
        n = (v == 0) ? p - 1 : 0;
        break;
    case NC_TREE_CHAIN:
        n = (v + 1 < p) ? 1 : 0;
        break;
    }
    return (int)n;
}

/* Size of the k-nomial subtree under c > 0: positions c .. c + K^j - 1 (K^j the weight of
 * c's lowest non-zero digit), cut at p. */
static int knomial_size(int k, int p, int c)
{
    long long w = 1;
    while ((c / w) % k == 0)
        w *= k;
    return (int)(w < p - c ? w : p - c);
}

/* Writes the children of v into out (in the order documented above); returns how many. */
static int list_children(nc_tree_kind_t kind, int k, int p, int v, int *out)
{
    int n = 0;

    switch (kind) {
    case NC_TREE_KARY:
        for (long long c = (long long)k * v + 1; c <= (long long)k * v + k && c < p; c++)
            out[n++] = (int)c;
        break;
    case NC_TREE_KNOMIAL: {
        /* Weights K^j of the positions below v's lowest non-zero digit, largest first. */
        long long w[64];
        int nw = 0;
        for (long long x = 1; x < p; x *= k) {
            if (v != 0 && (v / x) % k != 0)
                break;
            w[nw++] = x;
        }
        for (int j = nw - 1; j >= 0; j--)
            for (int d = 1; d < k; d++)
                if (v + d * w[j] < p)
                    out[n++] = (int)(v + d * w[j]);
        /* When p is not a power of K the last branch of a digit position is cut short and
         * can be smaller than a branch of the next position down (p = 5, K = 2: {4} after
         * {2, 3}); a stable insertion sort by size restores largest-first. The input is
         * sorted except for one cut branch per position, so this is O(n + log_K p * K). */
        for (int i = 1; i < n; i++) {
            int c = out[i], sc = knomial_size(k, p, c), j = i;
            for (; j > 0 && knomial_size(k, p, out[j - 1]) < sc; j--)
                out[j] = out[j - 1];
            out[j] = c;
        }
        break;
    }
    case NC_TREE_FLAT:
        if (v == 0)
            for (int c = 1; c < p; c++)
                out[n++] = c;
        break;
    case NC_TREE_CHAIN:
        if (v + 1 < p)
            out[n++] = v + 1;
        break;
    }
    return n;
}

int nc_tree_build(nc_tree_t *t, nc_tree_kind_t kind, int k, int p, const int *order)
{
    int *depth = NULL;
    int rc = NUMACOLL_ERR_INVAL;

    if (t == NULL)
        return NUMACOLL_ERR_INVAL;
    memset(t, 0, sizeof(*t));
    if (p < 1)
        return NUMACOLL_ERR_INVAL;
    switch (kind) {
    case NC_TREE_KARY:
        if (k < 1 || k > NC_TREE_MAX_K)
            return NUMACOLL_ERR_INVAL;
        break;
    case NC_TREE_KNOMIAL:
        if (k < 2 || k > NC_TREE_MAX_K)
            return NUMACOLL_ERR_INVAL;
        break;
    case NC_TREE_FLAT:
    case NC_TREE_CHAIN:
        k = 0;
        break;
    default:
        return NUMACOLL_ERR_INVAL;
    }

    t->p = p;
    t->kind = kind;
    t->k = k;
    t->order = malloc(sizeof(int) * (size_t)p);
    t->pos = malloc(sizeof(int) * (size_t)p);
    t->vparent = malloc(sizeof(int) * (size_t)p);
    t->vchild_off = malloc(sizeof(int) * ((size_t)p + 1));
    t->vchild = malloc(sizeof(int) * (size_t)(p > 1 ? p - 1 : 1));
    depth = malloc(sizeof(int) * (size_t)p);
    if (!t->order || !t->pos || !t->vparent || !t->vchild_off || !t->vchild || !depth) {
        rc = NUMACOLL_ERR_NOMEM;
        goto fail;
    }

    /* 1. order and its inverse; reject anything that is not a permutation. */
    for (int r = 0; r < p; r++)
        t->pos[r] = -1;
    for (int v = 0; v < p; v++) {
        int r = order ? order[v] : v;
        if (r < 0 || r >= p || t->pos[r] != -1)
            goto fail;
        t->order[v] = r;
        t->pos[r] = v;
    }

    /* 2. CSR offsets from the child counts. */
    t->vchild_off[0] = 0;
    for (int v = 0; v < p; v++)
        t->vchild_off[v + 1] = t->vchild_off[v] + count_children(kind, k, p, v);
    assert(t->vchild_off[p] == p - 1);

    /* 3. children lists, parents and depths (every parent precedes its children). */
    t->vparent[0] = -1;
    depth[0] = 0;
    for (int v = 0; v < p; v++) {
        int *kids = t->vchild + t->vchild_off[v];
        int n = list_children(kind, k, p, v, kids);
        assert(n == t->vchild_off[v + 1] - t->vchild_off[v]);
        for (int i = 0; i < n; i++) {
            t->vparent[kids[i]] = v;
            depth[kids[i]] = depth[v] + 1;
            if (depth[kids[i]] > t->depth)
                t->depth = depth[kids[i]];
        }
    }
    free(depth);
    return 0;

fail:
    free(depth);
    nc_tree_free(t);
    return rc;
}

/* Virtual position of rank for this root. */
static inline int vpos(const nc_tree_t *t, int root, int rank)
{
    int v = t->pos[rank] - t->pos[root];
    return v < 0 ? v + t->p : v;
}

/* Rank at virtual position v for this root. */
static inline int vrank(const nc_tree_t *t, int root, int v)
{
    int i = t->pos[root] + v;
    return t->order[i >= t->p ? i - t->p : i];
}

int nc_tree_parent(const nc_tree_t *t, int root, int rank)
{
    assert(root >= 0 && root < t->p && rank >= 0 && rank < t->p);
    int pv = t->vparent[vpos(t, root, rank)];
    return pv < 0 ? -1 : vrank(t, root, pv);
}

int nc_tree_nchildren(const nc_tree_t *t, int root, int rank)
{
    assert(root >= 0 && root < t->p && rank >= 0 && rank < t->p);
    int v = vpos(t, root, rank);
    return t->vchild_off[v + 1] - t->vchild_off[v];
}

int nc_tree_child(const nc_tree_t *t, int root, int rank, int i)
{
    assert(root >= 0 && root < t->p && rank >= 0 && rank < t->p);
    int v = vpos(t, root, rank);
    assert(i >= 0 && i < t->vchild_off[v + 1] - t->vchild_off[v]);
    return vrank(t, root, t->vchild[t->vchild_off[v] + i]);
}

#define NC_TREE_VALID_FORMS                                                          \
    "valid forms: kary:K (1 <= K <= 65536; kary:1 is a chain), binary (= kary:2), " \
    "knomial:K (2 <= K <= 65536), flat, chain"

/* Parses a decimal K in [lo, NC_TREE_MAX_K] filling the rest of the string. */
static int parse_k(const char *s, int lo, int *k)
{
    char *end = NULL;
    long v;

    if (*s < '0' || *s > '9') /* no sign, no blanks, not empty */
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > NC_TREE_MAX_K)
        return -1;
    *k = (int)v;
    return 0;
}

int nc_tree_parse(const char *spec, nc_tree_kind_t *kind, int *k, char *err, size_t errlen)
{
    nc_tree_kind_t kd;
    int kk = 0;

    if (spec == NULL)
        spec = "";
    if (strcasecmp(spec, "flat") == 0) {
        kd = NC_TREE_FLAT;
    } else if (strcasecmp(spec, "chain") == 0) {
        kd = NC_TREE_CHAIN;
    } else if (strcasecmp(spec, "binary") == 0) {
        kd = NC_TREE_KARY;
        kk = 2;
    } else if (strncasecmp(spec, "kary:", 5) == 0 && parse_k(spec + 5, 1, &kk) == 0) {
        kd = NC_TREE_KARY;
    } else if (strncasecmp(spec, "knomial:", 8) == 0 && parse_k(spec + 8, 2, &kk) == 0) {
        kd = NC_TREE_KNOMIAL;
    } else {
        char q[NC_QUOTE_LEN];
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "invalid tree \"%s\"; " NC_TREE_VALID_FORMS,
                     nc_quote(q, sizeof q, spec));
        return NUMACOLL_ERR_INVAL;
    }
    if (kind != NULL)
        *kind = kd;
    if (k != NULL)
        *k = kk;
    return 0;
}

void nc_tree_format(nc_tree_kind_t kind, int k, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    switch (kind) {
    case NC_TREE_KARY:
        snprintf(buf, len, "kary:%d", k);
        break;
    case NC_TREE_KNOMIAL:
        snprintf(buf, len, "knomial:%d", k);
        break;
    case NC_TREE_FLAT:
        snprintf(buf, len, "flat");
        break;
    case NC_TREE_CHAIN:
        snprintf(buf, len, "chain");
        break;
    default:
        snprintf(buf, len, "unknown(%d)", (int)kind);
        break;
    }
}
