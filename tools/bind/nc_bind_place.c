/*
 * numacoll-bind: topology loading and placement computation. Pure: nothing here binds.
 */
#include "nc_bind.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/nc_common.h"

static int nc_bind_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int nc_bind_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const char *nc_bind_policy_name(enum nc_bind_policy p)
{
    switch (p) {
    case NC_BIND_POLICY_DISTRIBUTE: return "distribute";
    case NC_BIND_POLICY_ACCUMULATE: return "accumulate";
    case NC_BIND_POLICY_NONE: return "none";
    }
    return "?";
}

const char *nc_bind_mem_name(enum nc_bind_mem m)
{
    switch (m) {
    case NC_BIND_MEM_NONE: return "none";
    case NC_BIND_MEM_PREFER: return "prefer";
    case NC_BIND_MEM_BIND: return "bind";
    }
    return "?";
}

/* spec: NULL (this machine), an existing file (hwloc XML) or a synthetic description. */
int nc_bind_topology_load(hwloc_topology_t *topo, const char *spec, char *err, size_t errlen)
{
    struct stat st;
    if (hwloc_topology_init(topo))
        return nc_bind_fail(err, errlen, "hwloc_topology_init failed");
    if (spec) {
        if (stat(spec, &st) == 0) {
            if (hwloc_topology_set_xml(*topo, spec)) {
                hwloc_topology_destroy(*topo);
                char q[NC_QUOTE_LEN];
                return nc_bind_fail(err, errlen, "--topology: cannot use \"%s\" as hwloc XML",
                                    nc_quote(q, sizeof q, spec));
            }
        } else if (hwloc_topology_set_synthetic(*topo, spec)) {
            char q[NC_QUOTE_LEN];
            hwloc_topology_destroy(*topo);
            return nc_bind_fail(err, errlen,
                                "--topology: \"%s\" is neither a file nor an hwloc synthetic description "
                                "(e.g. \"numa:4 core:8 pu:4\")", nc_quote(q, sizeof q, spec));
        }
    }
    if (hwloc_topology_load(*topo)) {
        hwloc_topology_destroy(*topo);
        return nc_bind_fail(err, errlen, "cannot load the %s topology", spec ? "given" : "machine");
    }
    return 0;
}

/*
 * The NUMA nodes local to cpuset: those whose CPUs intersect it, minus "far"
 * memory: a node is far when its cpuset strictly contains the cpuset of another
 * such node (CXL or other memory attached above the packages in hwloc's tree).
 * Nodes sharing one cpuset (KNL DDR + MCDRAM) are all kept.
 */
void nc_bind_local_nodes(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, hwloc_nodeset_t out)
{
    hwloc_obj_t n = NULL, m;
    hwloc_bitmap_zero(out);
    while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != NULL) {
        if (!n->cpuset || !hwloc_bitmap_intersects(n->cpuset, cpuset))
            continue;
        int far = 0;
        m = NULL;
        while (!far && (m = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, m)) != NULL)
            far = m != n && m->cpuset && hwloc_bitmap_intersects(m->cpuset, cpuset) &&
                  hwloc_bitmap_isincluded(m->cpuset, n->cpuset) && !hwloc_bitmap_isequal(m->cpuset, n->cpuset);
        if (!far)
            hwloc_bitmap_set(out, n->os_index);
    }
}

void nc_bind_plan_destroy(struct nc_bind_plan *plan)
{
    if (!plan->rank)
        return;
    for (int i = 0; i < plan->nranks; i++) {
        hwloc_bitmap_free(plan->rank[i].cpuset);
        hwloc_bitmap_free(plan->rank[i].nodeset);
    }
    free(plan->rank);
    plan->rank = NULL;
    plan->nranks = 0;
}

/* A placement domain: NUMA nodes sharing one cpuset, and its allocation units
 * (cores or PUs, in logical order). */
struct nc_bind_domain {
    hwloc_cpuset_t cpuset;
    int nunits;
    hwloc_obj_t *unit;
    int cap;  /* ranks that fit */
    int used; /* ranks placed in the current round */
};

static void nc_bind_domains_free(struct nc_bind_domain *d, int n)
{
    for (int i = 0; i < n; i++) {
        hwloc_bitmap_free(d[i].cpuset);
        free(d[i].unit);
    }
    free(d);
}

static int nc_bind_collect_units(hwloc_topology_t topo, struct nc_bind_domain *d, hwloc_obj_type_t t)
{
    int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, d->cpuset, t);
    d->unit = calloc((size_t)(n > 0 ? n : 1), sizeof(hwloc_obj_t));
    if (!d->unit)
        return -1;
    hwloc_obj_t o = NULL;
    d->nunits = 0;
    while ((o = hwloc_get_next_obj_inside_cpuset_by_type(topo, d->cpuset, t, o)) != NULL && d->nunits < n)
        d->unit[d->nunits++] = o;
    return 0;
}

/*
 * Automatic placement (the bulletin's TARGET_CPU_LIST=-1):
 *  1. domains = NUMA nodes local to some CPUs (see nc_bind_local_nodes), nodes with
 *     identical cpusets merged (KNL-like DDR+HBM pairs); units = cores (or PUs with --pus-per-rank) inside each domain;
 *     a rank takes k consecutive units, so a domain holds floor(units/k) ranks.
 *  2. if no single domain can hold one rank, the whole machine becomes one domain
 *     (a rank then spans several NUMA nodes).
 *  3. distribute: rank r goes to the next domain, round-robin, that still has room;
 *     accumulate: to the first domain with room.
 *  4. when all domains are full: error, or with --oversubscribe start a new round
 *     over the same units.
 */
static int nc_bind_plan_auto(hwloc_topology_t topo, const struct nc_bind_opts *o, int nranks,
                             struct nc_bind_plan *plan, char *err, size_t errlen)
{
    hwloc_obj_type_t ut = o->pus_per_rank ? HWLOC_OBJ_PU : HWLOC_OBJ_CORE;
    if (ut == HWLOC_OBJ_CORE && hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) == 0)
        ut = HWLOC_OBJ_PU; /* topology without cores: each PU is a core */
    const char *uname = o->pus_per_rank ? "PU" : "core";
    int k = o->pus_per_rank ? o->pus_per_rank
          : o->cores_per_rank ? o->cores_per_rank
          : o->threads ? o->threads : 1;

    /* 1. domains */
    int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    struct nc_bind_domain *dom = calloc((size_t)(nnuma > 0 ? nnuma : 1), sizeof(*dom));
    int nd = 0, rc = -1, maxunits = 0, totalunits = 0;
    if (!dom)
        return nc_bind_fail(err, errlen, "out of memory");
    for (int i = 0; i < nnuma; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (!node->cpuset || hwloc_bitmap_iszero(node->cpuset))
            continue; /* CPU-less memory: no ranks there */
        hwloc_nodeset_t local = hwloc_bitmap_alloc();
        nc_bind_local_nodes(topo, node->cpuset, local);
        int far = !hwloc_bitmap_isset(local, node->os_index);
        hwloc_bitmap_free(local);
        if (far)
            continue; /* memory above the packages (CXL): not a placement domain */
        int dup = 0;
        for (int j = 0; j < nd; j++)
            dup |= hwloc_bitmap_isequal(dom[j].cpuset, node->cpuset);
        if (dup)
            continue;
        dom[nd].cpuset = hwloc_bitmap_dup(node->cpuset);
        if (nc_bind_collect_units(topo, &dom[nd], ut)) {
            nd++;
            nc_bind_fail(err, errlen, "out of memory");
            goto out;
        }
        if (dom[nd].nunits > maxunits)
            maxunits = dom[nd].nunits;
        totalunits += dom[nd].nunits;
        nd++;
    }
    /* 2. one machine-wide domain when a rank does not fit in any NUMA domain */
    if (nd == 0 || maxunits < k) {
        nc_bind_domains_free(dom, nd);
        dom = calloc(1, sizeof(*dom));
        if (!dom)
            return nc_bind_fail(err, errlen, "out of memory");
        nd = 1;
        dom[0].cpuset = hwloc_bitmap_dup(hwloc_topology_get_topology_cpuset(topo));
        if (nc_bind_collect_units(topo, &dom[0], ut)) {
            nc_bind_fail(err, errlen, "out of memory");
            goto out;
        }
        totalunits = dom[0].nunits;
        if (totalunits < k) {
            nc_bind_fail(err, errlen, "a rank needs %d %ss but the node has only %d (from %s %d; "
                         "use at most %d)", k, uname, totalunits,
                         o->pus_per_rank ? "--pus-per-rank"
                         : o->cores_per_rank ? "--cores-per-rank" : "--threads", k, totalunits);
            goto out;
        }
    }
    int totalcap = 0;
    for (int d = 0; d < nd; d++) {
        dom[d].cap = dom[d].nunits / k;
        totalcap += dom[d].cap;
    }
    if (totalcap < nranks && !o->oversubscribe) {
        nc_bind_fail(err, errlen,
                     "the node cannot hold %d ranks x %d %s%s: %d NUMA domain%s with %d %ss fit %d "
                     "(use fewer ranks, fewer %ss per rank or --oversubscribe)",
                     nranks, k, uname, k > 1 ? "s" : "", nd, nd > 1 ? "s" : "", totalunits, uname,
                     totalcap, uname);
        goto out;
    }
    /* 3./4. assign */
    int next = 0;
    for (int r = 0; r < nranks; r++) {
        int d = -1;
        for (int round = 0; round < 2 && d < 0; round++) {
            for (int t = 0; t < nd; t++) {
                int c = o->policy == NC_BIND_POLICY_DISTRIBUTE ? (next + t) % nd : t;
                if (dom[c].used < dom[c].cap) {
                    d = c;
                    break;
                }
            }
            if (d < 0) /* 4. every domain full: new round (only reached with --oversubscribe) */
                for (int t = 0; t < nd; t++)
                    dom[t].used = 0;
        }
        int slot = dom[d].used++;
        next = (d + 1) % nd;
        for (int u = slot * k; u < slot * k + k; u++)
            hwloc_bitmap_or(plan->rank[r].cpuset, plan->rank[r].cpuset, dom[d].unit[u]->cpuset);
        /* keep only PUs that exist and are allowed */
        hwloc_bitmap_and(plan->rank[r].cpuset, plan->rank[r].cpuset,
                         hwloc_topology_get_topology_cpuset(topo));
        nc_bind_local_nodes(topo, plan->rank[r].cpuset, plan->rank[r].nodeset);
    }
    rc = 0;
out:
    nc_bind_domains_free(dom, nd);
    return rc;
}

/* Explicit --cpus list: local rank i takes entries [i*G, i*G+G), G = --pus-per-rank or 1. */
static int nc_bind_plan_list(hwloc_topology_t topo, const struct nc_bind_opts *o, int nranks,
                             struct nc_bind_plan *plan, char *err, size_t errlen)
{
    int *list = NULL, *pos = NULL, n = 0, rc = -1;
    int g = o->pus_per_rank ? o->pus_per_rank : 1;
    if (nc_bind_cpulist_parse(o->cpus, &list, &pos, &n, err, errlen))
        return -1;
    /* every entry must name an existing PU, even those no rank uses */
    for (int i = 0; i < n; i++) {
        hwloc_obj_t pu = o->logical
            ? hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)list[i])
            : hwloc_get_pu_obj_by_os_index(topo, (unsigned)list[i]);
        if (!pu) {
            char have[256];
            if (o->logical)
                snprintf(have, sizeof(have), "0-%d", hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU) - 1);
            else
                hwloc_bitmap_list_snprintf(have, sizeof(have), hwloc_topology_get_topology_cpuset(topo));
            char q[NC_QUOTE_LEN];
            nc_bind_fail(err, errlen, "--cpus \"%s\": position %d: CPU %d is out of range (%s PUs: %s)",
                         nc_quote(q, sizeof q, o->cpus), pos[i], list[i],
                         o->logical ? "logical" : "available", have);
            goto out;
        }
        list[i] = (int)pu->os_index;
    }
    if ((long)nranks * g > n) {
        char q[NC_QUOTE_LEN];
        nc_bind_fail(err, errlen,
                     "--cpus \"%s\" covers %d CPU%s: not enough for %d local ranks x %d PU%s "
                     "(give at least %ld CPUs, or fewer ranks)",
                     nc_quote(q, sizeof q, o->cpus), n, n > 1 ? "s" : "", nranks, g,
                     g > 1 ? "s" : "", (long)nranks * g);
        goto out;
    }
    for (int r = 0; r < nranks; r++) {
        for (int j = r * g; j < r * g + g; j++)
            hwloc_bitmap_set(plan->rank[r].cpuset, (unsigned)list[j]);
        nc_bind_local_nodes(topo, plan->rank[r].cpuset, plan->rank[r].nodeset);
    }
    rc = 0;
out:
    free(list);
    free(pos);
    return rc;
}

int nc_bind_plan_compute(hwloc_topology_t topo, const struct nc_bind_opts *o, int nranks,
                         struct nc_bind_plan *plan, char *err, size_t errlen)
{
    plan->nranks = nranks;
    plan->rank = calloc((size_t)nranks, sizeof(*plan->rank));
    if (!plan->rank)
        return nc_bind_fail(err, errlen, "out of memory");
    for (int r = 0; r < nranks; r++) {
        plan->rank[r].cpuset = hwloc_bitmap_alloc();
        plan->rank[r].nodeset = hwloc_bitmap_alloc();
    }
    int rc;
    if (o->cpus) {
        rc = nc_bind_plan_list(topo, o, nranks, plan, err, errlen);
    } else if (o->policy == NC_BIND_POLICY_NONE) {
        for (int r = 0; r < nranks; r++) {
            hwloc_bitmap_copy(plan->rank[r].cpuset, hwloc_topology_get_topology_cpuset(topo));
            hwloc_bitmap_copy(plan->rank[r].nodeset, hwloc_topology_get_topology_nodeset(topo));
        }
        rc = 0;
    } else {
        rc = nc_bind_plan_auto(topo, o, nranks, plan, err, errlen);
    }
    if (rc)
        nc_bind_plan_destroy(plan);
    return rc;
}

/* ---- formatting -------------------------------------------------------------- */

/* Logical indexes of the objects of type t that intersect cpuset, as a list "0-3,8". */
static void nc_bind_list_objs(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, hwloc_obj_type_t t,
                              int logical, char *buf, size_t len)
{
    hwloc_bitmap_t ids = hwloc_bitmap_alloc();
    hwloc_obj_t obj = NULL;
    while ((obj = hwloc_get_next_obj_by_type(topo, t, obj)) != NULL)
        if (obj->cpuset && hwloc_bitmap_intersects(obj->cpuset, cpuset))
            hwloc_bitmap_set(ids, logical ? obj->logical_index : obj->os_index);
    if (hwloc_bitmap_iszero(ids))
        snprintf(buf, len, "-");
    else
        hwloc_bitmap_list_snprintf(buf, len, ids);
    hwloc_bitmap_free(ids);
}

int nc_bind_format_nodes(hwloc_topology_t topo, hwloc_const_nodeset_t nodeset, int logical,
                         char *buf, size_t len)
{
    if (!logical)
        return hwloc_bitmap_list_snprintf(buf, len, nodeset);
    hwloc_bitmap_t ids = hwloc_bitmap_alloc();
    hwloc_obj_t obj = NULL;
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)) != NULL)
        if (hwloc_bitmap_isset(nodeset, obj->os_index))
            hwloc_bitmap_set(ids, obj->logical_index);
    int n = hwloc_bitmap_list_snprintf(buf, len, ids);
    hwloc_bitmap_free(ids);
    return n;
}

/* "NUMA 1, cores 8-9, PUs 16-19". Cores are always logical indexes (OS core ids
 * repeat across packages); NUMA and PUs follow the numbering option. */
int nc_bind_format_where(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, int logical,
                         char *buf, size_t len)
{
    char numa[256], cores[512], pus[512];
    hwloc_nodeset_t ns = hwloc_bitmap_alloc();
    nc_bind_local_nodes(topo, cpuset, ns);
    nc_bind_format_nodes(topo, ns, logical, numa, sizeof(numa));
    hwloc_bitmap_free(ns);
    nc_bind_list_objs(topo, cpuset, HWLOC_OBJ_CORE, 1, cores, sizeof(cores));
    if (logical)
        nc_bind_list_objs(topo, cpuset, HWLOC_OBJ_PU, 1, pus, sizeof(pus));
    else
        hwloc_bitmap_list_snprintf(pus, sizeof(pus), cpuset);
    return snprintf(buf, len, "NUMA %s, cores %s, PUs %s", numa, cores, pus);
}

/* "memory bind NUMA 1" / "memory prefer NUMA 1" / "memory default". prefer names
 * one node, the first of the rank's nodes (MPOL_PREFERRED takes one). */
int nc_bind_format_mem(hwloc_topology_t topo, enum nc_bind_mem mem, hwloc_const_nodeset_t nodeset,
                       int logical, char *buf, size_t len)
{
    char nodes[256];
    if (mem == NC_BIND_MEM_NONE || hwloc_bitmap_iszero(nodeset))
        return snprintf(buf, len, "memory default");
    hwloc_nodeset_t ns = hwloc_bitmap_dup(nodeset);
    if (mem == NC_BIND_MEM_PREFER)
        hwloc_bitmap_only(ns, (unsigned)hwloc_bitmap_first(nodeset));
    nc_bind_format_nodes(topo, ns, logical, nodes, sizeof(nodes));
    hwloc_bitmap_free(ns);
    return snprintf(buf, len, "memory %s NUMA %s", mem == NC_BIND_MEM_BIND ? "bind" : "prefer", nodes);
}

/*
 * OpenMP variables for `threads` threads inside cpuset: one place per core of the
 * rank when the threads fit on its cores, else one place per PU; OMP_PROC_BIND
 * spread when there are more places than threads (the bulletin's stride), else
 * close. Places use OS PU numbers, as OMP_PLACES requires.
 */
int nc_bind_omp_env(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset, int threads,
                    char *places, size_t places_len, const char **proc_bind)
{
    int ncores = 0;
    hwloc_obj_t c = NULL;
    while ((c = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, c)) != NULL)
        if (hwloc_bitmap_intersects(c->cpuset, cpuset))
            ncores++;
    hwloc_obj_type_t t = (ncores > 0 && threads <= ncores) ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    int nplaces = 0;
    size_t off = 0;
    places[0] = '\0';
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    c = NULL;
    while ((c = hwloc_get_next_obj_by_type(topo, t, c)) != NULL) {
        hwloc_bitmap_and(set, c->cpuset, cpuset);
        if (hwloc_bitmap_iszero(set))
            continue;
        int n = snprintf(places + off, off < places_len ? places_len - off : 0, "%s{", nplaces ? "," : "");
        off += (size_t)n;
        int first = 1;
        unsigned id;
        hwloc_bitmap_foreach_begin(id, set) {
            n = snprintf(places + off, off < places_len ? places_len - off : 0, "%s%u", first ? "" : ",", id);
            off += (size_t)n;
            first = 0;
        } hwloc_bitmap_foreach_end();
        n = snprintf(places + off, off < places_len ? places_len - off : 0, "}");
        off += (size_t)n;
        nplaces++;
    }
    hwloc_bitmap_free(set);
    *proc_bind = threads < nplaces ? "spread" : "close";
    return off < places_len ? 0 : -1;
}

void nc_bind_print_plan(FILE *out, hwloc_topology_t topo, const struct nc_bind_opts *o,
                        const struct nc_bind_plan *plan)
{
    char where[1024], mem[300];
    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    int nc = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int np = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    const char *tname = o->topology ? o->topology : "of this machine";
    struct stat st;
    if (o->topology && stat(o->topology, &st) == 0 && strrchr(o->topology, '/'))
        tname = strrchr(o->topology, '/') + 1; /* file: its name only, for stable output */
    fprintf(out, "# topology %s: %d NUMA domain%s, %d core%s, %d PU%s\n", tname, nn, nn == 1 ? "" : "s", nc, nc == 1 ? "" : "s",
            np, np == 1 ? "" : "s");
    if (o->cpus)
        fprintf(out, "# %d local rank%s, --cpus %s, %d PU%s per rank, memory %s, %s numbering\n",
                plan->nranks, plan->nranks == 1 ? "" : "s", o->cpus, o->pus_per_rank ? o->pus_per_rank : 1,
                o->pus_per_rank > 1 ? "s" : "", nc_bind_mem_name(o->mem),
                o->logical ? "logical" : "physical");
    else if (o->policy == NC_BIND_POLICY_NONE)
        fprintf(out, "# %d local rank%s, policy none (unbound), %s numbering\n", plan->nranks,
                plan->nranks == 1 ? "" : "s",
                o->logical ? "logical" : "physical");
    else {
        int k = o->pus_per_rank ? o->pus_per_rank : o->cores_per_rank ? o->cores_per_rank
              : o->threads ? o->threads : 1;
        fprintf(out, "# %d local rank%s, policy %s, %d %s%s per rank%s, memory %s, %s numbering\n",
                plan->nranks, plan->nranks == 1 ? "" : "s", nc_bind_policy_name(o->policy), k, o->pus_per_rank ? "PU" : "core",
                k > 1 ? "s" : "", o->oversubscribe ? " (oversubscribe)" : "", nc_bind_mem_name(o->mem),
                o->logical ? "logical" : "physical");
    }
    for (int r = 0; r < plan->nranks; r++) {
        nc_bind_format_where(topo, plan->rank[r].cpuset, o->logical, where, sizeof(where));
        nc_bind_format_mem(topo, o->mem, plan->rank[r].nodeset, o->logical, mem, sizeof(mem));
        fprintf(out, "rank %d -> %s, %s\n", r, where, mem);
        if (o->threads) {
            char places[4096];
            const char *pb;
            nc_bind_omp_env(topo, plan->rank[r].cpuset, o->threads, places, sizeof(places), &pb);
            fprintf(out, "  OMP_NUM_THREADS=%d OMP_PROC_BIND=%s OMP_PLACES=%s\n", o->threads, pb, places);
        }
    }
}

/* One word as a POSIX shell would need it: bare when it is made of safe
 * characters only, else in single quotes, or as $'...' with \xHH escapes when it
 * holds control or non-ASCII bytes (which could otherwise break the line). */
static void nc_bind_print_word(FILE *out, const char *w)
{
    int bare = *w != '\0', ctrl = 0;
    for (const unsigned char *c = (const unsigned char *)w; *c; c++) {
        if (*c < 0x20 || *c >= 0x7f)
            ctrl = 1;
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
                    *c))
            bare = 0;
    }
    if (bare) {
        fputs(w, out);
    } else if (!ctrl) {
        fputc('\'', out);
        for (; *w; w++) {
            if (*w == '\'')
                fputs("'\\''", out); /* close, escaped quote, reopen */
            else
                fputc(*w, out);
        }
        fputc('\'', out);
    } else {
        fputs("$'", out);
        for (const unsigned char *c = (const unsigned char *)w; *c; c++) {
            if (*c < 0x20 || *c >= 0x7f || *c == '\'' || *c == '\\')
                fprintf(out, "\\x%02x", *c);
            else
                fputc(*c, out);
        }
        fputc('\'', out);
    }
}

void nc_bind_print_exec(FILE *out, char *const *prog)
{
    fputs("would exec:", out);
    for (; *prog; prog++) {
        fputc(' ', out);
        nc_bind_print_word(out, *prog);
    }
    fputc('\n', out);
}
