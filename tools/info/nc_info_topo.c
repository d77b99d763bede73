/*
 * numacoll-info: the hwloc tree (packages, NUMA nodes, caches, cores, PUs) and
 * the signature the tune file is keyed by.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config/nc_tunefile.h"
#include "nc_info.h"
#include "topo/nc_topo.h"

static void fmt_bytes(uint64_t b, char *buf, size_t len)
{
    if (b >= (UINT64_C(1) << 30) && !(b % (UINT64_C(1) << 20)) && b % (UINT64_C(1) << 30))
        snprintf(buf, len, "%" PRIu64 " MiB", b >> 20);
    else if (b >= (UINT64_C(1) << 30))
        snprintf(buf, len, "%.1f GiB", (double)b / (double)(UINT64_C(1) << 30));
    else if (b >= (UINT64_C(1) << 20))
        snprintf(buf, len, "%" PRIu64 " MiB", b >> 20);
    else
        snprintf(buf, len, "%" PRIu64 " KiB", b >> 10);
}

static void describe(hwloc_obj_t o, char *buf, size_t len)
{
    char type[32], size[32];
    hwloc_obj_type_snprintf(type, sizeof type, o, 0);
    switch (o->type) {
    case HWLOC_OBJ_MACHINE:
        fmt_bytes(o->total_memory, size, sizeof size);
        snprintf(buf, len, "Machine (%s total)", size);
        break;
    case HWLOC_OBJ_NUMANODE:
        fmt_bytes(o->attr->numanode.local_memory, size, sizeof size);
        snprintf(buf, len, "NUMANode L#%u (P#%u, %s)", o->logical_index, o->os_index, size);
        break;
    case HWLOC_OBJ_PU:
        snprintf(buf, len, "PU L#%u (P#%u)", o->logical_index, o->os_index);
        break;
    case HWLOC_OBJ_PACKAGE: {
        const char *model = hwloc_obj_get_info_by_name(o, "CPUModel");
        snprintf(buf, len, "Package L#%u%s%s%s", o->logical_index, model ? " \"" : "",
                 model ? model : "", model ? "\"" : "");
        break;
    }
    default:
        if (hwloc_obj_type_is_cache(o->type)) {
            fmt_bytes(o->attr->cache.size, size, sizeof size);
            snprintf(buf, len, "%s L#%u (%s)", type, o->logical_index, size);
        } else {
            snprintf(buf, len, "%s L#%u", type, o->logical_index);
        }
    }
}

static void walk(FILE *out, hwloc_obj_t o, int depth)
{
    char line[512], d[128];
    describe(o, line, sizeof line);
    /* lstopo style: a chain of single children on one line ("L2 + L1d + Core + PU"). */
    while (o->arity == 1 && o->memory_arity == 0 && o->type != HWLOC_OBJ_MACHINE) {
        o = o->children[0];
        describe(o, d, sizeof d);
        size_t n = strlen(line);
        snprintf(line + n, sizeof line - n, " + %s", d);
    }
    fprintf(out, "%*s%s\n", 2 * depth, "", line);
    for (hwloc_obj_t m = o->memory_first_child; m; m = m->next_sibling)
        walk(out, m, depth + 1);
    for (unsigned i = 0; i < o->arity; i++)
        walk(out, o->children[i], depth + 1);
}

void nc_info_print_topology(FILE *out, const nc_info_machine_t *m)
{
    hwloc_topology_t t = m->topo;
    nc_tune_sig_t sig;
    char s[256];
    nc_tune_sig_of_topology(t, &sig);
    nc_tune_sig_format(&sig, s, sizeof s);
    fprintf(out, "== Topology (%s%s%s)\n", m->synthetic ? "described: \"" : "this machine",
            m->synthetic ? m->desc : "", m->synthetic ? "\"" : "");
    fprintf(out, "packages=%d numa_nodes=%d cores=%d pus=%d\n",
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE), sig.numa_nodes, sig.cores,
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
    fprintf(out, "tune-file signature: %s\n", s);
    walk(out, hwloc_get_root_obj(t), 0);
    fprintf(out, "\n");
}

int nc_info_simulated_numa(const nc_info_machine_t *m, int p, int *numa, char (*cpus)[64])
{
    int ncores = hwloc_get_nbobjs_by_type(m->topo, HWLOC_OBJ_CORE);
    hwloc_obj_type_t type = ncores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    if (ncores <= 0)
        ncores = hwloc_get_nbobjs_by_type(m->topo, HWLOC_OBJ_PU);
    if (ncores <= 0)
        return -1;
    nc_topo_t wrap = {.topo = m->topo};
    for (int i = 0; i < p; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(m->topo, type, (unsigned)(i % ncores));
        numa[i] = nc_topo_numa_of_cpuset(&wrap, core->cpuset);
        if (cpus)
            hwloc_bitmap_list_snprintf(cpus[i], 64, core->cpuset);
    }
    return ncores;
}
