/*
 * Exhaustive check of the notification trees: p = 1..64, every root, every shape, with the
 * identity order and with permuted orders (odd/even grouping, reversed).
 * Per (shape, order, root): one parent per non-root and none for the root, parent/child
 * symmetry, a traversal from the root reaches every rank exactly once, p-1 child edges,
 * depth equal to the closed formula, and shape-specific rules (k-ary indices, k-nomial
 * digit rule and largest-subtree-first order). Then parse/format round trips and rejects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/nc_tree.h"

#include "nc_check.h"

#define MAXP 64

/* Height of a complete k-ary tree with p nodes: smallest h with 1+k+..+k^h >= p. */
static int kary_height(int k, int p)
{
    long long covered = 1, level = 1;
    int h = 0;
    while (covered < p) {
        level *= k;
        covered += level;
        h++;
    }
    return h;
}

/* Height of the k-nomial tree: a node's depth is its number of non-zero base-k digits, so
 * the height is the largest such count below p. Closed form: with n the number of digits
 * of p-1 (= ceil(log_k p) for p > 1, the number of rounds), n if p-1 >= 11..1 (n ones in
 * base k, the smallest n-digit number with no zero digit), else n-1. The brute force
 * checks the closed form. Note ceil(log_k p) alone over-counts: p = 5, k = 2 has height 2. */
static int knomial_height(int k, int p)
{
    int n = 0, brute = 0;
    long long ones = 0;
    for (int x = p - 1; x > 0; x /= k) {
        n++;
        ones = ones * k + 1;
    }
    for (int v = 0; v < p; v++) {
        int nz = 0;
        for (int x = v; x > 0; x /= k)
            nz += x % k != 0;
        if (nz > brute)
            brute = nz;
    }
    int closed = (p - 1 >= ones) ? n : n - 1;
    CHECK(closed == brute, "knomial:%d p=%d: closed-form height %d, brute force %d", k, p,
          closed, brute);
    if (p > 1 && (p & (p - 1)) == 0 && k == 2)
        CHECK(closed == n, "knomial:2 p=%d (power of 2): height %d != log2 p", p, closed);
    return brute;
}

static int expected_depth(nc_tree_kind_t kind, int k, int p)
{
    if (p == 1)
        return 0;
    switch (kind) {
    case NC_TREE_KARY:
        return k == 1 ? p - 1 : kary_height(k, p);
    case NC_TREE_KNOMIAL:
        return knomial_height(k, p);
    case NC_TREE_FLAT:
        return 1;
    case NC_TREE_CHAIN:
        return p - 1;
    }
    return -1;
}

/* Subtree size of rank x for this root (recursive; p <= 64). */
static int subtree_size(const nc_tree_t *t, int root, int x)
{
    int n = 1;
    for (int i = 0; i < nc_tree_nchildren(t, root, x); i++)
        n += subtree_size(t, root, nc_tree_child(t, root, x, i));
    return n;
}

static void check_root(const nc_tree_t *t, int root, const char *name, const char *oname)
{
    int p = t->p;
    int seen[MAXP], level[MAXP], queue[MAXP], head = 0, tail = 0, edges = 0, maxlev = 0;

    CHECK(nc_tree_parent(t, root, root) == -1, "%s %s p=%d root=%d: root has a parent", name,
          oname, p, root);

    for (int x = 0; x < p; x++) {
        int n = nc_tree_nchildren(t, root, x);
        edges += n;
        CHECK(n >= 0 && n < p, "%s %s p=%d root=%d x=%d: nchildren %d", name, oname, p, root, x,
              n);
        for (int i = 0; i < n; i++) {
            int c = nc_tree_child(t, root, x, i);
            CHECK(c >= 0 && c < p && c != x && c != root, "%s %s p=%d root=%d: child %d of %d",
                  name, oname, p, root, c, x);
            if (c >= 0 && c < p)
                CHECK(nc_tree_parent(t, root, c) == x,
                      "%s %s p=%d root=%d: parent(child %d of %d) = %d", name, oname, p, root, c,
                      x, nc_tree_parent(t, root, c));
        }
        if (x == root)
            continue;
        int par = nc_tree_parent(t, root, x);
        CHECK(par >= 0 && par < p && par != x, "%s %s p=%d root=%d: parent(%d) = %d", name,
              oname, p, root, x, par);
        if (par < 0 || par >= p)
            continue;
        int found = 0;
        for (int i = 0; i < nc_tree_nchildren(t, root, par); i++)
            found += nc_tree_child(t, root, par, i) == x;
        CHECK(found == 1, "%s %s p=%d root=%d: %d listed %d times among children of parent %d",
              name, oname, p, root, x, found, par);
    }
    CHECK(edges == p - 1, "%s %s p=%d root=%d: %d child edges", name, oname, p, root, edges);

    /* Breadth-first traversal from the root: every rank exactly once. */
    memset(seen, 0, sizeof(seen));
    queue[tail++] = root;
    seen[root] = 1;
    level[root] = 0;
    while (head < tail) {
        int x = queue[head++];
        if (level[x] > maxlev)
            maxlev = level[x];
        for (int i = 0; i < nc_tree_nchildren(t, root, x); i++) {
            int c = nc_tree_child(t, root, x, i);
            if (c < 0 || c >= p)
                continue;
            CHECK(!seen[c], "%s %s p=%d root=%d: %d reached twice", name, oname, p, root, c);
            if (seen[c] || tail >= MAXP)
                continue;
            seen[c] = 1;
            level[c] = level[x] + 1;
            queue[tail++] = c;
        }
    }
    CHECK(tail == p, "%s %s p=%d root=%d: traversal reached %d ranks", name, oname, p, root,
          tail);
    CHECK(maxlev == t->depth, "%s %s p=%d root=%d: traversal depth %d, tree says %d", name,
          oname, p, root, maxlev, t->depth);

    /* Shape rules on virtual positions: rank of virtual v is order[(pos[root]+v) % p]. */
    for (int v = 0; v < p; v++) {
        int x = t->order[(t->pos[root] + v) % p];
        int n = nc_tree_nchildren(t, root, x);
        for (int i = 0; i < n; i++) {
            int c = nc_tree_child(t, root, x, i);
            int cv = (t->pos[c] - t->pos[root] + p) % p;
            switch (t->kind) {
            case NC_TREE_KARY:
                CHECK(cv == t->k * v + 1 + i, "%s p=%d: child %d of v=%d is v=%d", name, p, i, v,
                      cv);
                break;
            case NC_TREE_KNOMIAL: {
                /* parent = child with its lowest non-zero digit cleared */
                int w = 1;
                while ((cv / w) % t->k == 0)
                    w *= t->k;
                CHECK(cv - ((cv / w) % t->k) * w == v, "%s p=%d: v=%d is not the parent of %d",
                      name, p, v, cv);
                if (i > 0) {
                    int prev = nc_tree_child(t, root, x, i - 1);
                    CHECK(subtree_size(t, root, prev) >= subtree_size(t, root, c),
                          "%s p=%d v=%d: child %d's subtree is larger than the one before", name,
                          p, v, i);
                }
                break;
            }
            case NC_TREE_FLAT:
                CHECK(v == 0 && cv == i + 1, "%s p=%d: flat child %d of v=%d is v=%d", name, p, i,
                      v, cv);
                break;
            case NC_TREE_CHAIN:
                CHECK(cv == v + 1 && i == 0, "%s p=%d: chain child of v=%d is v=%d", name, p, v,
                      cv);
                break;
            }
        }
    }
}

static void test_shapes(void)
{
    static const struct {
        nc_tree_kind_t kind;
        int k;
    } shapes[] = {
        {NC_TREE_KARY, 1},    {NC_TREE_KARY, 2},    {NC_TREE_KARY, 3},    {NC_TREE_KARY, 4},
        {NC_TREE_KARY, 8},    {NC_TREE_KNOMIAL, 2}, {NC_TREE_KNOMIAL, 3}, {NC_TREE_KNOMIAL, 4},
        {NC_TREE_KNOMIAL, 8}, {NC_TREE_FLAT, 0},    {NC_TREE_CHAIN, 0},
    };
    static const char *onames[] = {"identity", "odd/even", "reversed"};
    int order[MAXP];
    long roots = 0;

    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        char name[32];
        nc_tree_format(shapes[s].kind, shapes[s].k, name, sizeof(name));
        for (int p = 1; p <= MAXP; p++) {
            for (int o = 0; o < 3; o++) {
                nc_tree_t t;
                int n = 0;
                if (o == 1) { /* grouped: even ranks first, then odd ones */
                    for (int r = 0; r < p; r += 2)
                        order[n++] = r;
                    for (int r = 1; r < p; r += 2)
                        order[n++] = r;
                } else if (o == 2) {
                    for (int r = p - 1; r >= 0; r--)
                        order[n++] = r;
                }
                int rc = nc_tree_build(&t, shapes[s].kind, shapes[s].k, p, o ? order : NULL);
                CHECK(rc == 0, "build %s p=%d: rc %d", name, p, rc);
                if (rc != 0)
                    continue;
                CHECK(t.depth == expected_depth(shapes[s].kind, shapes[s].k, p),
                      "%s p=%d: depth %d, expected %d", name, p, t.depth,
                      expected_depth(shapes[s].kind, shapes[s].k, p));
                CHECK(t.vchild_off[p] == p - 1, "%s p=%d: %d CSR entries", name, p,
                      t.vchild_off[p]);
                for (int root = 0; root < p; root++, roots++)
                    check_root(&t, root, name, onames[o]);
                nc_tree_free(&t);
            }
        }
    }
    printf("shapes: 11 shapes x p=1..%d x 3 orders x every root (%ld rooted trees) checked\n", MAXP,
           roots);
}

/* Children of the root (virtual 0, identity order) spelled out for a few k-nomial trees. */
static void test_knomial_examples(void)
{
    static const struct {
        int k, p, n, kids[8];
    } ex[] = {
        {2, 8, 3, {4, 2, 1}},       /* complete: highest digit position first */
        {2, 5, 3, {2, 4, 1}},       /* {4} is cut short by p: behind {2, 3} */
        {3, 9, 4, {3, 6, 1, 2}},    /* complete radix 3 */
        {3, 7, 4, {3, 6, 1, 2}},    /* {6} has one member, {1} has one: ties keep j order */
        {4, 6, 4, {4, 1, 2, 3}},    /* {4, 5} then the singles */
        {2, 1, 0, {0}},
    };
    for (size_t e = 0; e < sizeof(ex) / sizeof(ex[0]); e++) {
        nc_tree_t t;
        CHECK(nc_tree_build(&t, NC_TREE_KNOMIAL, ex[e].k, ex[e].p, NULL) == 0, "build");
        CHECK(nc_tree_nchildren(&t, 0, 0) == ex[e].n, "knomial:%d p=%d: %d root children",
              ex[e].k, ex[e].p, nc_tree_nchildren(&t, 0, 0));
        for (int i = 0; i < ex[e].n && i < nc_tree_nchildren(&t, 0, 0); i++)
            CHECK(nc_tree_child(&t, 0, 0, i) == ex[e].kids[i],
                  "knomial:%d p=%d: root child %d is %d, expected %d", ex[e].k, ex[e].p, i,
                  nc_tree_child(&t, 0, 0, i), ex[e].kids[i]);
        nc_tree_free(&t);
    }
    printf("knomial: root children order checked on %zu examples\n", sizeof(ex) / sizeof(ex[0]));
}

static void test_build_errors(void)
{
    nc_tree_t t;
    int dup[3] = {0, 1, 1}, range[3] = {0, 1, 3};

    CHECK(nc_tree_build(&t, NC_TREE_KARY, 0, 4, NULL) == NUMACOLL_ERR_INVAL, "kary:0 built");
    CHECK(nc_tree_build(&t, NC_TREE_KNOMIAL, 1, 4, NULL) == NUMACOLL_ERR_INVAL, "knomial:1 built");
    CHECK(nc_tree_build(&t, NC_TREE_FLAT, 0, 0, NULL) == NUMACOLL_ERR_INVAL, "p=0 built");
    CHECK(nc_tree_build(&t, (nc_tree_kind_t)42, 2, 4, NULL) == NUMACOLL_ERR_INVAL, "kind 42 built");
    CHECK(nc_tree_build(&t, NC_TREE_CHAIN, 0, 3, dup) == NUMACOLL_ERR_INVAL, "duplicate order");
    CHECK(t.order == NULL && t.p == 0, "failed build left state behind");
    CHECK(nc_tree_build(&t, NC_TREE_CHAIN, 0, 3, range) == NUMACOLL_ERR_INVAL, "order out of range");
    nc_tree_free(&t); /* safe on an empty tree */
    CHECK(nc_tree_build(&t, NC_TREE_FLAT, 7, 3, NULL) == 0 && t.k == 0, "flat keeps k");
    nc_tree_free(&t);
    nc_tree_free(&t); /* and twice */
    /* A large radix does not overflow: knomial:65536 over 64 members is flat. */
    CHECK(nc_tree_build(&t, NC_TREE_KNOMIAL, NC_TREE_MAX_K, 64, NULL) == 0 && t.depth == 1,
          "knomial:65536");
    nc_tree_free(&t);
    printf("build: invalid arguments rejected\n");
}

static void test_parse_format(void)
{
    static const struct {
        const char *in, *canon;
        nc_tree_kind_t kind;
        int k;
    } ok[] = {
        {"kary:1", "kary:1", NC_TREE_KARY, 1},       {"kary:2", "kary:2", NC_TREE_KARY, 2},
        {"kary:16", "kary:16", NC_TREE_KARY, 16},    {"binary", "kary:2", NC_TREE_KARY, 2},
        {"knomial:2", "knomial:2", NC_TREE_KNOMIAL, 2},
        {"knomial:8", "knomial:8", NC_TREE_KNOMIAL, 8},
        {"kary:65536", "kary:65536", NC_TREE_KARY, 65536},
        {"flat", "flat", NC_TREE_FLAT, 0},           {"chain", "chain", NC_TREE_CHAIN, 0},
        /* any case, as every other word a tunable takes */
        {"Flat", "flat", NC_TREE_FLAT, 0},           {"KARY:4", "kary:4", NC_TREE_KARY, 4},
        {"Knomial:3", "knomial:3", NC_TREE_KNOMIAL, 3}, {"BINARY", "kary:2", NC_TREE_KARY, 2},
    };
    static const char *bad[] = {"foo",   "kary:0",  "knomial:1", "kary:",     "kary:x",
                                "kary:2x", "",      "kary:-2",   "kary: 2",   "kary:+2",
                                "kary:65537", "kary:99999999999999999999", "flat ",
                                "knomial", "kary"};
    char err[256], buf[32];

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        nc_tree_kind_t kind = NC_TREE_FLAT;
        int k = -1;
        int rc = nc_tree_parse(ok[i].in, &kind, &k, err, sizeof(err));
        CHECK(rc == 0 && kind == ok[i].kind && k == ok[i].k, "parse \"%s\": rc %d kind %d k %d",
              ok[i].in, rc, (int)kind, k);
        nc_tree_format(kind, k, buf, sizeof(buf));
        CHECK(strcmp(buf, ok[i].canon) == 0, "format(parse(\"%s\")) = \"%s\"", ok[i].in, buf);
        rc = nc_tree_parse(buf, &kind, &k, NULL, 0);
        CHECK(rc == 0 && kind == ok[i].kind && k == ok[i].k, "re-parse \"%s\"", buf);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        nc_tree_kind_t kind = NC_TREE_CHAIN;
        int k = 77;
        err[0] = '\0';
        int rc = nc_tree_parse(bad[i], &kind, &k, err, sizeof(err));
        CHECK(rc == NUMACOLL_ERR_INVAL, "\"%s\" accepted", bad[i]);
        CHECK(kind == NC_TREE_CHAIN && k == 77, "\"%s\": outputs touched on error", bad[i]);
        CHECK(strstr(err, "kary:K") && strstr(err, "knomial:K") && strstr(err, "binary") &&
                  strstr(err, "flat") && strstr(err, "chain"),
              "\"%s\": message does not list the valid forms: %s", bad[i], err);
    }
    CHECK(nc_tree_parse(NULL, NULL, NULL, NULL, 0) == NUMACOLL_ERR_INVAL, "NULL accepted");
    CHECK(nc_tree_parse("foo", NULL, NULL, err, 8) == NUMACOLL_ERR_INVAL && strlen(err) == 7,
          "short error buffer not truncated safely");
    nc_tree_parse("kary:0", NULL, NULL, err, sizeof(err));
    printf("parse: %zu valid forms round-trip, %zu invalid rejected; e.g. %s\n",
           sizeof(ok) / sizeof(ok[0]), sizeof(bad) / sizeof(bad[0]), err);
}

int main(void)
{
    test_shapes();
    test_knomial_examples();
    test_build_errors();
    test_parse_format();
    if (failures) {
        fprintf(stderr, "test_tree: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_tree: OK\n");
    return 0;
}
