/*
 * numacoll-info under mpirun: the job as numacoll's MPI layer sees it. Every
 * rank sets numacoll up on a duplicate of MPI_COMM_WORLD (one MPI_Barrier
 * through the wrapper), then reports its CPU binding, NUMA node, its team and
 * leader, and move_pages() on its own blocks of the segment. Rank 0 prints.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/nc_team.h"
#include "nc_info.h"
#include "numacoll_mpi.h"
#include "topo/nc_topo.h"
#include "nc_tool_launcher.h"

typedef struct job_rec {
    char host[64], cpus[64];
    int numa, active, trank, tsize, leader, nleaders, placement;
    char ctrl[96], bufs[96], areas[96], hdr[96], sets[96], bar[96];
    nc_layout_t l;
    nc_config_t cfg;
    char leaders[192];
} job_rec_t;

int nc_info_job(const nc_info_opts_t *o, int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    nc_tool_check_launcher("numacoll-info");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    job_rec_t me;
    memset(&me, 0, sizeof me);
    gethostname(me.host, sizeof me.host - 1);

    nc_topo_t *topo = NULL;
    me.numa = -1;
    snprintf(me.cpus, sizeof me.cpus, "?");
    if (!nc_topo_load(&topo)) {
        hwloc_cpuset_t set = hwloc_bitmap_alloc();
        if (set && !nc_topo_self_binding(topo, set)) {
            hwloc_bitmap_list_snprintf(me.cpus, sizeof me.cpus, set);
            me.numa = nc_topo_numa_of_cpuset(topo, set);
        }
        hwloc_bitmap_free(set);
    }

    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Barrier(dup); /* through numacoll's wrapper: sets the communicator up */
    me.active = numacoll_mpi_comm_active(dup);
    numacoll_team_t *t = numacoll_mpi_comm_team(dup);
    int *lead = NULL; /* my team's NUMA leaders, member by member */
    me.trank = me.tsize = me.leader = -1;
    if (t) {
        numacoll_team_info_t info;
        numacoll_team_info(t, &info);
        me.trank = info.rank;
        me.tsize = info.size;
        me.leader = info.leader;
        me.nleaders = info.nleaders;
        me.placement = info.placement;
        me.l = t->seg.l;
        me.cfg = t->cfg;
        lead = calloc((size_t)info.size, sizeof *lead);
        if (lead && !numacoll_team_leaders(t, lead)) {
            size_t n = 0;
            for (int i = 0; i < info.size && n + 12 < sizeof me.leaders; i++)
                n += (size_t)snprintf(me.leaders + n, sizeof me.leaders - n, "%s%d", i ? "," : "",
                                      lead[i]);
        } else {
            free(lead);
            lead = NULL;
        }
        const nc_layout_t *l = &t->seg.l;
        char *base = t->seg.base, *blk = base + l->rank_off + (size_t)info.rank * l->rank_bytes;
        nc_info_pages_where(blk, l->ctrl_bytes, l->page, me.ctrl, sizeof me.ctrl);
        nc_info_pages_where(blk + l->buf_off, (size_t)l->s * l->buf_stride, l->page, me.bufs,
                            sizeof me.bufs);
        nc_info_pages_where(blk + l->buf_off + (size_t)l->s * l->buf_stride,
                            l->rank_bytes - l->buf_off - (size_t)l->s * l->buf_stride, l->page,
                            me.areas, sizeof me.areas);
        if (info.rank == 0) {
            nc_info_pages_where(base + l->hdr_off, l->hdr_bytes, l->page, me.hdr, sizeof me.hdr);
            nc_info_pages_where(base + l->calls_off, l->rank_off - l->calls_off, l->page, me.sets,
                                sizeof me.sets);
            nc_info_pages_where(base + l->barrier_off, l->barrier_bytes, l->page, me.bar,
                                sizeof me.bar);
        }
    }
    job_rec_t *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
    PMPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);

    if (rank == 0 && all && (o->sections & NC_INFO_PLACEMENT)) {
        printf("== Job (%d ranks; numacoll's view of a duplicate of MPI_COMM_WORLD)\n", size);
        printf("  %5s %-16s %-12s %5s %-8s %6s %6s %s\n", "rank", "host", "cpus", "numa",
               "numacoll", "member", "leader", "leaders[] of its node");
        for (int i = 0; i < size; i++) {
            const job_rec_t *r = &all[i];
            const char *st = r->active == 1 ? "active" : r->active == 0 ? "PMPI" : "error";
            printf("  %5d %-16s %-12s %5d %-8s %6d %6d [%s]\n", i, r->host, r->cpus, r->numa, st,
                   r->trank, r->leader, r->leaders);
        }
        printf("\n");
    }
    if (rank == 0 && all && (o->sections & (NC_INFO_PLACEMENT | NC_INFO_LAYOUT))) {
        /* Figure 1 for rank 0's node: its members in team order, and what
         * the collectives do on its NUMA nodes. */
        if (all[0].tsize > 0) {
            int p = all[0].tsize;
            const job_rec_t **mem = calloc((size_t)p, sizeof *mem);
            int *numa = calloc((size_t)p, sizeof *numa);
            nc_info_block_t *rows = calloc(NC_INFO_LAYOUT_ROWS(p), sizeof *rows);
            int complete = mem && numa && rows;
            for (int i = 0; complete && i < size; i++)
                if (!strcmp(all[i].host, all[0].host) && all[i].trank >= 0 && all[i].trank < p &&
                    !memcmp(&all[i].l, &all[0].l, sizeof all[0].l))
                    mem[all[i].trank] = &all[i];
            for (int i = 0; complete && i < p; i++)
                complete = mem[i] != NULL;
            if (complete) {
                for (int i = 0; i < p; i++)
                    numa[i] = mem[i]->numa;
                if ((o->sections & NC_INFO_PLACEMENT) && lead && topo) {
                    printf("== What the collectives do on rank 0's node (%d members)\n", p);
                    nc_info_print_coll_plans(stdout, p, lead,
                                             nc_topo_numa_ratio(topo->topo, p, numa));
                    printf("\n");
                }
            }
            if (complete && (o->sections & NC_INFO_LAYOUT)) {
                int n = nc_info_layout_rows(&all[0].l, numa, rows);
                snprintf(rows[0].actual, sizeof rows[0].actual, "%s", mem[0]->hdr);
                snprintf(rows[1].actual, sizeof rows[0].actual, "%s", mem[0]->sets);
                for (int i = 0; i < p; i++) {
                    snprintf(rows[NC_INFO_MEMBER_ROW(i, 0)].actual, sizeof rows[0].actual, "%s",
                             mem[i]->ctrl);
                    snprintf(rows[NC_INFO_MEMBER_ROW(i, 1)].actual, sizeof rows[0].actual, "%s",
                             mem[i]->bufs);
                    snprintf(rows[NC_INFO_MEMBER_ROW(i, 2)].actual, sizeof rows[0].actual, "%s",
                             mem[i]->areas);
                }
                snprintf(rows[n - 1].actual, sizeof rows[0].actual, "%s", mem[0]->bar);
                char note[128];
                snprintf(note, sizeof note, "node %s, measured by each member", all[0].host);
                nc_info_print_layout(stdout, &all[0].l, &all[0].cfg, rows, n, note);
                nc_info_print_budget(stdout, &all[0].l, &all[0].cfg);
            } else if (!complete) {
                printf("(segment of rank 0's node not shown: members not found among the ranks)\n\n");
            }
            free(mem);
            free(numa);
            free(rows);
        } else {
            printf("numacoll is not active on rank 0's node (one rank per node, "
                   "NUMACOLL_DISABLE=1, or an error): no segment\n\n");
        }
    }
    if (rank == 0 && all) {
        /* the team's configuration; without a team on rank 0's node (one
         * rank there, or numacoll off) this process's own */
        nc_config_t own;
        const nc_config_t *shown = &all[0].cfg;
        if (all[0].tsize <= 0) {
            nc_info_config(&own, 0);
            shown = &own;
        }
        nc_info_machine_t m = {0};
        if (topo && (o->sections & NC_INFO_TOPOLOGY)) {
            m.topo = topo->topo;
            nc_info_print_topology(stdout, &m);
        }
        if (o->sections & NC_INFO_TUNE) {
            nc_config_t cfg;
            nc_info_config(&cfg, all[0].tsize > 0 ? all[0].tsize : 0);
            printf("== Tune file\n");
            nc_info_print_tune(stdout, all[0].tsize);
            printf("\n");
        }
        if (o->sections & NC_INFO_PARAMS) {
            printf("== Tunables (%s: values and sources)\n",
                   all[0].tsize > 0 ? "the team of rank 0's node" : "rank 0, which has no team");
            nc_info_print_params(stdout, shown, all[0].tsize);
            printf("\n");
        }
        if (o->sections & NC_INFO_COPY) {
            const int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
            nc_info_print_copy(stdout, shown, all[0].tsize > 1 ? all[0].tsize : ncpu, ncpu);
        }
        fflush(stdout);
    }
    free(all);
    free(lead);
    MPI_Comm_free(&dup);
    nc_topo_free(topo);
    MPI_Finalize();
    return 0;
}
