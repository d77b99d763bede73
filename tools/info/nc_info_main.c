/*
 * numacoll-info: what numacoll sees.
 *
 *   numacoll-info                      this node: topology, a real team of one member
 *                                      per core (binding, NUMA node, leader, the segment
 *                                      with move_pages), tune file, tunables, copy mechanisms
 *   mpirun -np N numacoll-info         the job: every rank's binding, node and leader, the
 *                                      segment of rank 0's node (needs the MPI build)
 *   numacoll-info --params [--markdown]
 *   numacoll-info --topology "numa:2 core:4 pu:2" | --topology machine.xml
 */
#include <getopt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nc_info.h"
#include "topo/nc_topo.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: numacoll-info [options]\n"
            "  --params            one line per tunable: NAME=VALUE (source), then unit, range, doc\n"
            "  --markdown          with --params: print docs/tunables.md\n"
            "  --topology DESC     show a machine that is not this one: an hwloc synthetic\n"
            "                      description (\"numa:2 core:4 pu:2\") or an XML file\n"
            "  --np P              members to show (default: one per core)\n"
            "  --page BYTES        page size for a computed layout (default: this machine's)\n"
            "  --show LIST         sections, comma separated: topology, placement, layout,\n"
            "                      tune, params, copy, all\n"
            "  --job / --no-job    force / forbid the MPI job view (default: when under mpirun)\n"
            "  --version, --help\n"
            "Environment: NUMACOLL_* tunables, NUMACOLL_TUNE_FILE (see docs/tools.md).\n");
}

/* Usage errors are found on every rank before MPI starts; under a launcher
 * only its rank 0 says them, and only that rank fails (the others exit with
 * 0: a launcher aborts the job at the first process that fails, which must
 * not be one that said nothing, before rank 0 has written its line). */
static int quiet_rank;

#define usage_msg(...)                                                                             \
    do {                                                                                           \
        if (!quiet_rank)                                                                           \
            fprintf(stderr, __VA_ARGS__);                                                          \
    } while (0)
#define USAGE_RC (quiet_rank ? 0 : 2)

static int parse_show(const char *list, unsigned *out)
{
    static const struct { const char *name; unsigned bit; } names[] = {
        {"topology", NC_INFO_TOPOLOGY}, {"placement", NC_INFO_PLACEMENT},
        {"layout", NC_INFO_LAYOUT},     {"tune", NC_INFO_TUNE},
        {"params", NC_INFO_PARAMS},     {"copy", NC_INFO_COPY},
        {"all", ~0u},
    };
    *out = 0;
    while (*list) {
        size_t n = strcspn(list, ",");
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == n && !strncmp(list, names[i].name, n))
                bit = names[i].bit;
        if (!bit) {
            usage_msg("numacoll-info: unknown section \"%.*s\" in --show (valid: topology, "
                      "placement, layout, tune, params, copy, all)\n",
                      (int)n, list);
            return -1;
        }
        *out |= bit;
        list += n + (list[n] == ',');
    }
    return 0;
}

static int under_mpirun(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

static int load_machine(const char *desc, nc_info_machine_t *m)
{
    nc_topo_t *t;
    struct stat st;
    int rc;
    memset(m, 0, sizeof *m);
    if (!desc)
        rc = nc_topo_load(&t);
    else if (!stat(desc, &st))
        rc = nc_topo_load_xml(desc, &t);
    else if (strchr(desc, '/') || strstr(desc, ".xml")) {
        /* a path, not a synthetic description ("numa:2 core:4") */
        fprintf(stderr, "numacoll-info: --topology %s: %s\n", desc, strerror(errno));
        return NUMACOLL_ERR_TOPO;
    } else
        rc = nc_topo_load_synthetic(desc, &t);
    if (rc)
        return rc;
    m->topo = t->topo; /* the wrapper is only a holder */
    free(t);
    m->synthetic = desc != NULL;
    m->desc = desc;
    return 0;
}

static void print_simulated(FILE *out, const nc_info_machine_t *m, int p)
{
    int *numa = calloc((size_t)p, sizeof *numa), *lead = calloc((size_t)p, sizeof *lead);
    char(*cpus)[64] = calloc((size_t)p, sizeof *cpus);
    if (numa && lead && cpus && nc_info_simulated_numa(m, p, numa, cpus) > 0) {
        int nl = nc_topo_leaders(p, numa, lead);
        fprintf(out, "== Members (computed: %d members bound one per core in order; %d NUMA "
                     "group%s)\n",
                p, nl, nl == 1 ? "" : "s");
        fprintf(out, "  %6s %-12s %5s %6s\n", "member", "cpus", "numa", "leader");
        for (int i = 0; i < p; i++)
            fprintf(out, "  %6d %-12s %5d %6d\n", i, cpus[i], numa[i], lead[i]);
        nc_info_print_coll_plans(out, p, lead, nc_topo_numa_ratio(m->topo, p, numa));
        fprintf(out, "\n");
    }
    free(numa);
    free(lead);
    free(cpus);
}

int main(int argc, char **argv)
{
    nc_info_opts_t o = {0};
    int params = 0, show_given = 0, job = -1;
    enum { O_PARAMS = 256, O_MARKDOWN, O_TOPOLOGY, O_NP, O_PAGE, O_SHOW, O_JOB, O_NOJOB, O_VERSION };
    static const struct option longopts[] = {
        {"params", no_argument, NULL, O_PARAMS},     {"markdown", no_argument, NULL, O_MARKDOWN},
        {"topology", required_argument, NULL, O_TOPOLOGY}, {"np", required_argument, NULL, O_NP},
        {"page", required_argument, NULL, O_PAGE},   {"show", required_argument, NULL, O_SHOW},
        {"job", no_argument, NULL, O_JOB},           {"no-job", no_argument, NULL, O_NOJOB},
        {"version", no_argument, NULL, O_VERSION},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    quiet_rank = nc_launcher_rank() > 0;
    opterr = !quiet_rank; /* getopt's own messages too */
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case O_PARAMS: params = 1; break;
        case O_MARKDOWN: o.markdown = 1; break;
        case O_TOPOLOGY: o.topology = optarg; break;
        case O_NP:
            o.np = (int)strtol(optarg, &end, 10);
            if (*end || o.np < 1 || o.np > 4096) {
                usage_msg("numacoll-info: --np %s: expected 1..4096\n", optarg);
                return USAGE_RC;
            }
            break;
        case O_PAGE:
            o.page = (size_t)strtoul(optarg, &end, 10);
            if (*end || o.page < 64 || (o.page & (o.page - 1))) {
                usage_msg("numacoll-info: --page %s: expected a power of two >= 64\n", optarg);
                return USAGE_RC;
            }
            break;
        case O_SHOW:
            if (parse_show(optarg, &o.sections))
                return USAGE_RC;
            show_given = 1;
            break;
        case O_JOB: job = 1; break;
        case O_NOJOB: job = 0; break;
        /* once under a launcher, by its rank 0 */
        case O_VERSION:
            if (!quiet_rank)
                printf("numacoll-info %s\n", numacoll_version());
            return 0;
        case 'h':
            if (!quiet_rank)
                usage(stdout);
            return 0;
        default:
            if (!quiet_rank)
                usage(stderr);
            return USAGE_RC;
        }
    }
    if (optind < argc) {
        usage_msg("numacoll-info: unexpected argument \"%s\"\n", argv[optind]);
        if (!quiet_rank)
            usage(stderr);
        return USAGE_RC;
    }
    if (o.markdown && !params) {
        usage_msg("numacoll-info: --markdown goes with --params\n");
        return USAGE_RC;
    }
    if (params && o.markdown) {
        nc_info_print_markdown(stdout);
        return 0;
    }
    if (!show_given)
        o.sections = params ? NC_INFO_PARAMS
                     : o.topology
                         ? NC_INFO_TOPOLOGY | NC_INFO_PLACEMENT | NC_INFO_LAYOUT
                         : ~0u;
    o.job = job < 0 ? under_mpirun() && !o.topology : job;
#ifdef NUMACOLL_INFO_MPI
    if (o.job)
        return nc_info_job(&o, argc, argv);
#else
    if (o.job && job == 1) {
        fprintf(stderr, "numacoll-info: built without MPI (NUMACOLL_WITH_MPI=OFF or no "
                        "numacoll-mpi): no job view\n");
        return 2;
    }
#endif

    nc_info_machine_t m;
    if (o.sections & (NC_INFO_TOPOLOGY | NC_INFO_PLACEMENT | NC_INFO_LAYOUT)) {
        if (load_machine(o.topology, &m)) {
            fprintf(stderr, "numacoll-info: cannot load the topology%s%s\n",
                    o.topology ? " " : "", o.topology ? o.topology : "");
            return 1;
        }
    }
    int cores = 0;
    if (o.sections & (NC_INFO_TOPOLOGY | NC_INFO_PLACEMENT | NC_INFO_LAYOUT)) {
        cores = hwloc_get_nbobjs_by_type(m.topo, HWLOC_OBJ_CORE);
        if (cores <= 0)
            cores = hwloc_get_nbobjs_by_type(m.topo, HWLOC_OBJ_PU);
    }
    int p = o.np ? o.np : cores > 0 ? cores : 1;
    if (o.sections & NC_INFO_TOPOLOGY)
        nc_info_print_topology(stdout, &m);
    if (o.sections & (NC_INFO_PLACEMENT | NC_INFO_LAYOUT)) {
        if (m.synthetic || o.page || !(o.sections & NC_INFO_LAYOUT)) {
            if (o.sections & NC_INFO_PLACEMENT)
                print_simulated(stdout, &m, p);
            if (o.sections & NC_INFO_LAYOUT)
                nc_info_layout_computed(stdout, &m, p, o.page ? o.page : nc_page_size());
        } else if (nc_info_layout_live(stdout, &m, p)) {
            nc_info_layout_computed(stdout, &m, p, nc_page_size());
        }
    }
    if (o.sections & NC_INFO_TUNE) {
        nc_config_t cfg;
        nc_info_config(&cfg, o.np); /* reads the tune file for this team size */
        printf("== Tune file\n");
        nc_info_print_tune(stdout, o.np);
        printf("\n");
    }
    if (o.sections & NC_INFO_PARAMS) {
        nc_config_t cfg;
        nc_info_config(&cfg, o.np);
        if (!params)
            printf("== Tunables (a team of %d: values, sources)\n", p);
        nc_info_print_params(stdout, &cfg, o.np);
        if (!params)
            printf("\n");
        else
            fflush(stdout);
    }
    if (o.sections & NC_INFO_COPY) {
        nc_config_t cfg;
        nc_info_config(&cfg, o.np);
        int ncpu = cores > 0 ? cores : (int)sysconf(_SC_NPROCESSORS_ONLN);
        nc_info_print_copy(stdout, &cfg, o.np ? o.np : ncpu, ncpu);
    }
    if (o.sections & (NC_INFO_TOPOLOGY | NC_INFO_PLACEMENT | NC_INFO_LAYOUT))
        hwloc_topology_destroy(m.topo);
    return 0;
}
