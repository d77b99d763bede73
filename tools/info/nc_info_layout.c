/*
 * numacoll-info: the segment as the paper's figure 1 in text. Each block with
 * its offset, size, the member that owns it, the NUMA node it should be on and
 * the node move_pages() reports. In the node view the layout is real: p forked
 * members, bound one per core, build a team and look at their own pages.
 */
#include <errno.h>
#include <numaif.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll/nc_coll.h"
#include "coll/nc_reduce.h"
#include "core/nc_team.h"
#include "model/nc_model.h"
#include "shm/nc_shm.h"
#include "nc_info.h"
#include "topo/nc_topo.h"

int nc_info_layout_rows(const nc_layout_t *l, const int *numa, nc_info_block_t *rows)
{
    int n = 0;
    nc_info_block_t *r;
#define ROW(off_, bytes_, owner_, ...)                                 \
    r = &rows[n++];                                                    \
    snprintf(r->name, sizeof r->name, __VA_ARGS__);                    \
    r->off = (off_);                                                   \
    r->bytes = (bytes_);                                               \
    r->owner = (owner_);                                               \
    r->intended = numa[owner_];                                        \
    snprintf(r->actual, sizeof r->actual, "-")
    ROW(l->hdr_off, l->hdr_bytes, 0, "header|leaders[%d]|pids", l->p);
    ROW(l->calls_off, l->rank_off - l->calls_off, 0, "calls x%d|acks|sets x%d", NC_CALL_RING, l->q);
    for (int i = 0; i < l->p; i++) {
        size_t base = l->rank_off + (size_t)i * l->rank_bytes;
        ROW(base, l->ctrl_bytes, i, "member %d: %d controls", i, l->s);
        ROW(base + l->buf_off, (size_t)l->s * l->buf_stride, i, "member %d: %d buffers", i, l->s);
        /* The collectives' parts of the block (coll/nc_coll.h), one row. */
        char names[64] = "";
        size_t k = 0, off = l->rank_bytes;
        for (int m = 0; m < l->nareas && k < sizeof names; m++)
            if (l->marea_bytes[m]) {
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? "," : "",
                                      nc_coll_decls[m].name);
                if (l->marea_off[m] < off)
                    off = l->marea_off[m];
            }
        ROW(base + off, l->rank_bytes - off, i, "member %d: %s", i, k ? names : "-");
    }
    /* The collectives' shared areas (the barrier's first), one row. */
    ROW(l->barrier_off, l->barrier_bytes, 0, "barrier flags");
#undef ROW
    return n;
}

void nc_info_print_layout(FILE *out, const nc_layout_t *l, const nc_config_t *cfg,
                          const nc_info_block_t *rows, int nrows, const char *note)
{
    fprintf(out, "== Segment layout (the paper's figure 1)%s%s\n", note ? ": " : "",
            note ? note : "");
    fprintf(out, "p=%d f=%zu s=%d q=%d tree=%s layout=%s page=%zu\n", l->p, l->f, l->s, l->q,
            cfg->v[NC_P_BCAST_TREE].text, cfg->v[NC_P_SEG_LAYOUT].text, l->page);
    /* the root's cut of a call (coll/nc_bcast.c, nc_model_call_frag()) */
    const long long tw = NC_CFG_NUM(cfg, BCAST_MODEL_TW_NS), tps = NC_CFG_NUM(cfg, BCAST_MODEL_T_PS);
    if (tw > 0) {
        const double r = (double)tw * 1000.0 / (double)tps;
        fprintf(out, "fragments per call (t_w = %lld ns, t = %lld ps/byte: t_w / t = %.0f bytes; "
                     "about sqrt(m t_w / t) bytes, at least m/s, at most f):",
                tw, tps, r);
        static const size_t ms[] = {(size_t)8 << 10, (size_t)64 << 10, (size_t)1 << 20,
                                    (size_t)16 << 20};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            const size_t fr = nc_model_call_frag(ms[i], l->f, (size_t)l->s, r);
            fprintf(out, "%s %zu KiB: %zu x %zu", i ? "," : "", ms[i] >> 10,
                    (ms[i] + fr - 1) / fr, fr);
        }
        fprintf(out, "\n");
    } else {
        fprintf(out, "fragments per call: every one f (NUMACOLL_BCAST_MODEL_TW_NS=0)\n");
    }
    char coll[160] = "";
    size_t n = 0;
    for (int m = 0; m < l->nareas && n < sizeof coll; m++)
        if (l->marea_bytes[m])
            n += (size_t)snprintf(coll + n, sizeof coll - n, " + %s %zu", nc_coll_decls[m].name,
                                  l->marea_bytes[m]);
    fprintf(out, "total %zu bytes = header %zu + call ring %zu + sets %d x %zu + %d members x %zu "
                 "(controls %zu + %d x %zu buffer%s) + barrier %zu\n",
            l->total, l->hdr_bytes, l->calls_bytes, l->q, l->set_bytes, l->p, l->rank_bytes,
            l->ctrl_bytes, l->s, l->buf_stride, coll, l->barrier_bytes);
    size_t fixed = l->total - (size_t)l->p * l->rank_bytes;
    fprintf(out, "footprint of one communicator = (header + call ring + sets + barrier) + p x "
                 "(controls + s x roundup(f, page) + collectives' member areas) = %zu + %d x %zu\n",
            fixed, l->p, l->rank_bytes);
    fprintf(out, "  %10s %10s %6s  %-28s %5s %8s  %s\n", "offset", "bytes", "pages", "block",
            "owner", "intended", "move_pages");
    for (int i = 0; i < nrows; i++) {
        const nc_info_block_t *r = &rows[i];
        char node[16];
        if (r->intended >= 0)
            snprintf(node, sizeof node, "%d", r->intended);
        else
            snprintf(node, sizeof node, "?");
        fprintf(out, "  %10zu %10zu %6zu  %-28s %5d %8s  %s\n", r->off, r->bytes,
                r->bytes / l->page, r->name, r->owner, node, r->actual);
    }
    fprintf(out, "\n");
}

void nc_info_print_budget(FILE *out, const nc_layout_t *l, const nc_config_t *cfg)
{
    uint64_t size = 0, avail = 0, lim = nc_budget_limit();
    if (nc_shm_fs(&size, &avail))
        return;
    char b1[32], b2[32], b3[32];
    nc_shm_fmt_bytes(lim, b1, sizeof b1);
    nc_shm_fmt_bytes(size, b2, sizeof b2);
    nc_shm_fmt_bytes(avail, b3, sizeof b3);
    fprintf(out, "node budget NUMACOLL_SHM_LIMIT=%s%s (/dev/shm: %s, %s free): %llu communicators "
                 "of this size fit; past that each new one gets s/2, s/4, ... or the MPI "
                 "library\n\n",
            b1, NC_CFG_NUM(cfg, SHM_LIMIT) ? "" : " (a quarter of /dev/shm)", b2, b3,
            (unsigned long long)(lim / l->total));
}

void nc_info_pages_where(const void *addr, size_t bytes, size_t page, char *buf, size_t len)
{
    size_t n = bytes / page;
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    if (!n || !pages || !status) {
        snprintf(buf, len, "n/a (no memory)");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        pages[i] = (char *)addr + i * page;
    if (move_pages(0, n, pages, NULL, status, 0)) {
        snprintf(buf, len, "n/a (move_pages: %s)", strerror(errno));
        goto out;
    }
    /* Count pages per node (status >= 0) and per error (status < 0). */
    int keys[16];
    size_t counts[16];
    int nk = 0;
    for (size_t i = 0; i < n; i++) {
        int k = 0;
        while (k < nk && keys[k] != status[i])
            k++;
        if (k == nk && nk < 16) {
            keys[nk] = status[i];
            counts[nk++] = 0;
        }
        if (k < nk)
            counts[k]++;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < nk && off < len; k++) {
        char what[48];
        if (keys[k] >= 0)
            snprintf(what, sizeof what, "node %d", keys[k]);
        else if (keys[k] == -ENOENT)
            snprintf(what, sizeof what, "not allocated");
        else
            snprintf(what, sizeof what, "error %s", strerror(-keys[k]));
        off += (size_t)snprintf(buf + off, len - off, "%s%s", k ? ", " : "", what);
        if (nk > 1 && off < len)
            off += (size_t)snprintf(buf + off, len - off, " (%zu pages)", counts[k]);
    }
out:
    free(pages);
    free(status);
}

int nc_info_layout_computed(FILE *out, const nc_info_machine_t *m, int p, size_t page)
{
    nc_config_t cfg;
    nc_layout_t l;
    nc_info_config(&cfg, p);
    int *numa = calloc((size_t)p, sizeof *numa);
    nc_info_block_t *rows = calloc(NC_INFO_LAYOUT_ROWS(p), sizeof *rows);
    int rc = -1;
    nc_shm_need_t needs[NC_COLL_COUNT];
    nc_coll_shm_needs(p, &cfg, page, needs);
    if (numa && rows && nc_info_simulated_numa(m, p, numa, NULL) > 0 &&
        !nc_layout_compute(&l, p, (size_t)NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE),
                           (int)NC_CFG_NUM(&cfg, BCAST_QUEUE_LEN), (int)NC_CFG_NUM(&cfg, BCAST_SETS),
                           (int)NC_CFG_NUM(&cfg, SEG_LAYOUT), page, needs, NC_COLL_COUNT)) {
        int n = nc_info_layout_rows(&l, numa, rows);
        nc_info_print_layout(out, &l, &cfg, rows, n,
                             "computed, members bound one per core in order; not measured");
        rc = 0;
    }
    free(numa);
    free(rows);
    return rc;
}

/* ---- the live node view ------------------------------------------------------- */

typedef struct live_member {
    int rc, numa, leader;
    char cpus[64];
    char ctrl[96], bufs[96], areas[96]; /* move_pages of the member's own blocks */
    char hdr[96], sets[96], bar[96]; /* member 0 only */
} live_member_t;

typedef struct live_shared {
    nc_layout_t l;
    nc_config_t cfg;
    int placement;
    char detail[160];
    live_member_t m[];
} live_shared_t;

static void live_member(const nc_info_machine_t *mach, int p, int rank, const char *name,
                        live_shared_t *sh)
{
    live_member_t *me = &sh->m[rank];
    int ncores = hwloc_get_nbobjs_by_type(mach->topo, HWLOC_OBJ_CORE);
    hwloc_obj_type_t type = ncores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    if (ncores <= 0)
        ncores = hwloc_get_nbobjs_by_type(mach->topo, HWLOC_OBJ_PU);
    hwloc_obj_t core = hwloc_get_obj_by_type(mach->topo, type, (unsigned)(rank % ncores));
    if (core && hwloc_set_cpubind(mach->topo, core->cpuset, HWLOC_CPUBIND_PROCESS))
        snprintf(me->cpus, sizeof me->cpus, "unbound");
    else if (core)
        hwloc_bitmap_list_snprintf(me->cpus, sizeof me->cpus, core->cpuset);

    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    if ((me->rc = numacoll_bootstrap_named(name, rank, p, &bs)))
        return;
    if ((me->rc = numacoll_team_create(bs, &t))) {
        numacoll_bootstrap_named_free(bs);
        return;
    }
    numacoll_team_info_t info;
    numacoll_team_info(t, &info);
    me->numa = info.numa_node;
    me->leader = info.leader;
    const nc_layout_t *l = &t->seg.l;
    char *base = t->seg.base;
    char *blk = base + l->rank_off + (size_t)rank * l->rank_bytes;
    nc_info_pages_where(blk, l->ctrl_bytes, l->page, me->ctrl, sizeof me->ctrl);
    nc_info_pages_where(blk + l->buf_off, (size_t)l->s * l->buf_stride, l->page, me->bufs,
                        sizeof me->bufs);
    nc_info_pages_where(blk + l->buf_off + (size_t)l->s * l->buf_stride,
                        l->rank_bytes - l->buf_off - (size_t)l->s * l->buf_stride, l->page,
                        me->areas, sizeof me->areas);
    if (rank == 0) {
        sh->l = *l;
        sh->cfg = t->cfg;
        sh->placement = info.placement;
        snprintf(sh->detail, sizeof sh->detail, "%s", info.placement_detail);
        nc_info_pages_where(base + l->hdr_off, l->hdr_bytes, l->page, me->hdr, sizeof me->hdr);
        nc_info_pages_where(base + l->calls_off, l->rank_off - l->calls_off, l->page, me->sets,
                            sizeof me->sets);
        nc_info_pages_where(base + l->barrier_off, l->barrier_bytes, l->page, me->bar,
                            sizeof me->bar);
    }
    numacoll_barrier(t); /* nobody unmaps before everyone has looked */
    numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
}

int nc_info_layout_live(FILE *out, const nc_info_machine_t *m, int p)
{
    size_t bytes = sizeof(live_shared_t) + (size_t)p * sizeof(live_member_t);
    live_shared_t *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return -1;
    memset(sh, 0, bytes);
    for (int i = 0; i < p; i++)
        sh->m[i].rc = NUMACOLL_ERR_BOOTSTRAP;
    char name[64];
    snprintf(name, sizeof name, "numacoll-info-%d", (int)getpid());
    fflush(NULL);
    pid_t *pids = calloc((size_t)p, sizeof *pids);
    for (int i = 0; pids && i < p; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            alarm(60);
            live_member(m, p, i, name, sh);
            _exit(0);
        }
    }
    int failed = !pids;
    for (int i = 0; pids && i < p; i++) {
        int st;
        if (pids[i] < 0 || waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || sh->m[i].rc)
            failed = 1;
    }
    free(pids);
    if (failed) {
        fprintf(out, "== Segment layout: a team of %d forked members could not be built", p);
        for (int i = 0; i < p; i++)
            if (sh->m[i].rc)
                fprintf(out, " (member %d: %s)", i, numacoll_strerror(sh->m[i].rc));
        fprintf(out, "\n\n");
        munmap(sh, bytes);
        return -1;
    }
    fprintf(out, "== Members (node view: %d forked processes, bound one per core in order)\n", p);
    fprintf(out, "  %6s %-12s %5s %6s\n", "member", "cpus", "numa", "leader");
    int *numa = calloc((size_t)p, sizeof *numa);
    for (int i = 0; i < p; i++) {
        fprintf(out, "  %6d %-12s %5d %6d\n", i, sh->m[i].cpus, sh->m[i].numa, sh->m[i].leader);
        if (numa)
            numa[i] = sh->m[i].numa;
    }
    int *lead = calloc((size_t)p, sizeof *lead);
    if (lead) {
        for (int i = 0; i < p; i++)
            lead[i] = sh->m[i].leader;
        nc_info_print_coll_plans(out, p, lead, nc_topo_numa_ratio(m->topo, p, numa));
        free(lead);
    }
    fprintf(out, "\n");
    nc_info_block_t *rows = calloc(NC_INFO_LAYOUT_ROWS(p), sizeof *rows);
    if (numa && rows) {
        int n = nc_info_layout_rows(&sh->l, numa, rows);
        snprintf(rows[0].actual, sizeof rows[0].actual, "%s", sh->m[0].hdr);
        snprintf(rows[1].actual, sizeof rows[1].actual, "%s", sh->m[0].sets);
        for (int i = 0; i < p; i++) {
            snprintf(rows[NC_INFO_MEMBER_ROW(i, 0)].actual, sizeof rows[0].actual, "%s",
                     sh->m[i].ctrl);
            snprintf(rows[NC_INFO_MEMBER_ROW(i, 1)].actual, sizeof rows[0].actual, "%s",
                     sh->m[i].bufs);
            snprintf(rows[NC_INFO_MEMBER_ROW(i, 2)].actual, sizeof rows[0].actual, "%s",
                     sh->m[i].areas);
        }
        snprintf(rows[n - 1].actual, sizeof rows[0].actual, "%s", sh->m[0].bar);
        static const char *pl[] = {"OK", "MISPLACED", "UNKNOWN (a member is unbound)",
                                   "UNCHECKED (move_pages unavailable)"};
        char note[256];
        snprintf(note, sizeof note, "measured; team placement check %s%s%s",
                 pl[sh->placement & 3], sh->detail[0] ? ": " : "", sh->detail);
        nc_info_print_layout(out, &sh->l, &sh->cfg, rows, n, note);
        nc_info_print_budget(out, &sh->l, &sh->cfg);
    }
    free(rows);
    free(numa);
    munmap(sh, bytes);
    return 0;
}

void nc_info_print_coll_plans(FILE *out, int p, const int *leaders, double ratio)
{
    char numa[16] = "1", order[512], ag[16] = "auto", nr[32] = "0";
    numacoll_param_get("NUMACOLL_REDUCE_NUMA", numa, sizeof numa, NULL);
    numacoll_param_get("NUMACOLL_NUMA_RATIO", nr, sizeof nr, NULL);
    const char *rsrc = "hwloc"; /* where r comes from, as the team takes it */
    if (atol(nr) > 0) {
        ratio = (double)atol(nr) / 1000.0;
        rsrc = "NUMACOLL_NUMA_RATIO";
    }
    numacoll_param_get("NUMACOLL_NUMA_FORWARD", ag, sizeof ag, NULL);
    const int mode = !strcmp(ag, "on") ? NC_NUMA_FWD_ON : !strcmp(ag, "off") ? NC_NUMA_FWD_OFF
                                                                             : NC_NUMA_FWD_AUTO;
    nc_numa_plan_t pl;
    if (nc_numa_plan_make(&pl, p, leaders, strcmp(numa, "0") != 0))
        return;
    nc_numa_plan_order(&pl, order, sizeof order);
    if (pl.two) {
        fprintf(out, "reductions: two-level order %s: each NUMA group's members, then the groups "
                     "(NUMACOLL_REDUCE_NUMA=1)\n",
                order);
        size_t at = 0;
        order[0] = 0;
        for (int d = 0; d < pl.D && at + 16 < sizeof order; d++)
            if (nc_numa_plan_carry(&pl, d, mode, ratio)) {
                int w = snprintf(order + at, sizeof order - at, "%s%d", at ? ", " : "", d);
                at += w > 0 ? (size_t)w : 0;
            }
        fprintf(out, "  allreduce results of large calls forwarded inside NUMA groups: %s "
                     "(NUMACOLL_NUMA_FORWARD=%s; the groups' members that reduced a slice over "
                     "the group forward its result)\n",
                at ? order : "none", ag);
    }
    else
        fprintf(out, "reductions: rank order (%s)\n",
                !strcmp(numa, "0") ? "NUMACOLL_REDUCE_NUMA=0"
                : pl.D == 1        ? "one NUMA group"
                                   : "one member per NUMA group");
    nc_numa_plan_free(&pl);
    /* the small calls (coll/nc_reduce.c "Line calls") */
    char lines[16] = "1", small[32] = "?", slots[16] = "4";
    numacoll_param_get("NUMACOLL_REDUCE_LINES", lines, sizeof lines, NULL);
    numacoll_param_get("NUMACOLL_REDUCE_SMALL_MAX", small, sizeof small, NULL);
    numacoll_param_get("NUMACOLL_REDUCE_SLOTS", slots, sizeof slots, NULL);
    const size_t lmax = nc_reduce_line_max(p, atoi(slots), (size_t)sysconf(_SC_PAGESIZE));
    if (strcmp(lines, "0") && lmax)
        fprintf(out, "  small calls, up to %s bytes (NUMACOLL_REDUCE_SMALL_MAX): one hand-off; up "
                     "to %zu bytes in elements of up to 8 bytes through one cache line all "
                     "members share (NUMACOLL_REDUCE_LINES=1), larger ones through their slots\n",
                small, lmax);
    else
        fprintf(out, "  small calls, up to %s bytes (NUMACOLL_REDUCE_SMALL_MAX): one hand-off "
                     "through the members' slots (no call lines: %s)\n",
                small, !strcmp(lines, "0") ? "NUMACOLL_REDUCE_LINES=0"
                       : p < 2             ? "one member"
                       : p > 4             ? "more than 4 members"
                                           : "NUMACOLL_REDUCE_SLOTS fill the control page");
    /* the gather family (coll/nc_gather.c) */
    char f[32] = "?", s[32] = "?", in[32] = "?", agmin[32] = "?";
    numacoll_param_get("NUMACOLL_GATHER_FRAG_SIZE", f, sizeof f, NULL);
    numacoll_param_get("NUMACOLL_GATHER_SLOTS", s, sizeof s, NULL);
    numacoll_param_get("NUMACOLL_GATHER_INLINE_MAX", in, sizeof in, NULL);
    numacoll_param_get("NUMACOLL_ALLGATHER_NUMA_MIN", agmin, sizeof agmin, NULL);
    fprintf(out, "gather family (gather, scatter, allgather, alltoall and v-forms): every block "
                 "written once into its sender's slots and read once by each receiver (the "
                 "allgather on several NUMA nodes: below); blocks up to %s bytes inline, larger "
                 "ones in fragments of min(%s, block / %s) bytes through %s slots; across nodes "
                 "all eight hierarchical\n",
            in, f, s, s);
    if (nc_numa_plan_make(&pl, p, leaders, 1))
        return;
    int any = 0;
    for (int d = 0; d < pl.D; d++)
        any |= nc_numa_plan_carry(&pl, d, mode, ratio);
    char r[48];
    if (ratio > 0)
        snprintf(r, sizeof r, "%.2f (%s)", ratio, rsrc);
    else
        snprintf(r, sizeof r, "unknown, taken as %.1f", NC_NUMA_RATIO_DEFAULT);
    if (!any) {
        fprintf(out, "allgather(v): one level (%s)\n",
                mode == NC_NUMA_FWD_OFF ? "NUMACOLL_NUMA_FORWARD=off"
                : pl.D == 1            ? "one NUMA group"
                : !pl.two              ? "one member per NUMA group"
                                       : "NUMACOLL_NUMA_FORWARD=auto: no NUMA group of m "
                                         "members gains, (m - 1)(r - 1) <= 1");
        if (pl.two && mode == NC_NUMA_FWD_AUTO)
            fprintf(out, "  remote / local NUMA distance r = %s\n", r);
        nc_numa_plan_free(&pl);
        return;
    }
    fprintf(out, "allgather(v): blocks from %s bytes (and above the inline size) two-level into "
                 "the NUMA groups below (NUMACOLL_NUMA_FORWARD=%s; auto: a group of m members "
                 "when (m - 1)(r - 1) > 1, remote / local distance r = %s): each enters such a "
                 "group once; \"k by c\": member c reads block k and forwards it to its group's "
                 "other members\n",
            agmin, ag, r);
    for (int d = 0; d < pl.D; d++) {
        if (d == 8) {
            fprintf(out, "  (and %d more groups)\n", pl.D - d);
            break;
        }
        size_t at = 0;
        order[0] = 0;
        const int into = nc_numa_plan_carry(&pl, d, mode, ratio);
        for (int k = 0; k < p && into && at + 32 < sizeof order; k++) {
            if (pl.dom[k] == d)
                continue;
            int w = snprintf(order + at, sizeof order - at, "%s%d by %d", at ? ", " : "", k,
                             pl.work[d * p + k]);
            at += w > 0 ? (size_t)w : 0;
        }
        if (into)
            fprintf(out, "  into group %d (members from %d): %s%s\n", d, pl.dmem[pl.dfirst[d]],
                    order, at + 32 >= sizeof order ? ", ..." : "");
        else
            fprintf(out, "  into group %d (%d member%s from %d): each reads every block itself\n",
                    d, nc_numa_plan_members(&pl, d),
                    nc_numa_plan_members(&pl, d) == 1 ? "" : "s", pl.dmem[pl.dfirst[d]]);
    }
    nc_numa_plan_free(&pl);
}
