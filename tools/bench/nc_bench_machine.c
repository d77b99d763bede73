/*
 * What the plot title and the table header say about the node, and the
 * last-level cache size that --off-cache must exceed. hwloc first (it reads the
 * cache sizes the kernel reports); sysconf(_SC_LEVEL3_CACHE_SIZE) only when hwloc
 * finds no cache, because glibc computes it from CPUID leaves that some
 * hypervisors fill with the host's values (256 MiB on this project's KVM guest,
 * where hwloc and the kernel say 32 MiB).
 */
#include "nc_bench.h"

#include <hwloc.h>
#include <string.h>
#include <unistd.h>

static void cpu_model_from_proc(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5)) {
            char *c = strchr(line, ':');
            if (!c)
                continue;
            c++;
            while (*c == ' ' || *c == '\t')
                c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(buf, len, "%s", c);
            break;
        }
    }
    fclose(f);
}

void nc_bench_machine_probe(struct nc_bench_machine *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->cpu, sizeof m->cpu, "unknown CPU");
    cpu_model_from_proc(m->cpu, sizeof m->cpu);
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0) {
        m->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
        m->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
        m->numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
        static const struct { hwloc_obj_type_t type; const char *name; } levels[] = {
            {HWLOC_OBJ_L3CACHE, "hwloc L3"}, {HWLOC_OBJ_L2CACHE, "hwloc L2"},
        };
        for (size_t i = 0; i < sizeof levels / sizeof levels[0] && !m->llc; i++) {
            /* the largest instance: caches of one level may differ on hybrid CPUs */
            int n = hwloc_get_nbobjs_by_type(t, levels[i].type);
            for (int k = 0; k < n; k++) {
                hwloc_obj_t o = hwloc_get_obj_by_type(t, levels[i].type, (unsigned)k);
                if (o && o->attr && o->attr->cache.size > m->llc)
                    m->llc = (size_t)o->attr->cache.size;
            }
            if (m->llc)
                snprintf(m->llc_source, sizeof m->llc_source, "%s", levels[i].name);
        }
        if (!strcmp(m->cpu, "unknown CPU")) {
            hwloc_obj_t root = hwloc_get_root_obj(t);
            const char *v = hwloc_obj_get_info_by_name(root, "CPUModel");
            if (!v) {
                hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
                v = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
            }
            if (v)
                snprintf(m->cpu, sizeof m->cpu, "%s", v);
        }
        hwloc_topology_destroy(t);
    }
    if (m->cores <= 0)
        m->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (m->numa_nodes <= 0)
        m->numa_nodes = 1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!m->llc) {
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (v > 0) {
            m->llc = (size_t)v;
            snprintf(m->llc_source, sizeof m->llc_source, "sysconf L3");
        }
    }
#endif
    if (!m->llc) {
        m->llc = (size_t)32 << 20;
        snprintf(m->llc_source, sizeof m->llc_source, "unknown, assumed");
    }
}

const char *nc_bench_thp_mode(void)
{
    static char mode[16];
    char line[128];
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    snprintf(mode, sizeof mode, "no THP");
    if (!f)
        return mode;
    if (fgets(line, sizeof line, f)) {
        /* "always [madvise] never": the chosen one is bracketed */
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b && b - a - 1 < (long)sizeof mode)
            snprintf(mode, sizeof mode, "THP %.*s", (int)(b - a - 1), a + 1);
    }
    fclose(f);
    return mode;
}
