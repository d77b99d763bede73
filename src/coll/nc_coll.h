/*
 * The collectives' declarations. Each collective that needs shared memory
 * besides the broadcast's queue (the paper's layout, shm/nc_seg.h) declares it
 * here, once: how many bytes it shares with the whole team (placed with
 * member 0), how many it needs in every member's block (placed on that
 * member's node, first-touched by it), and how it sets up and tears down its
 * per-member state. The team (core/nc_team.c) and the layout walk this table
 * and know no collective by name; each collective finds its areas with
 * nc_seg_area(seg, NC_COLL_<NAME>) and nc_seg_member_area(seg, NC_COLL_<NAME>, i).
 *
 * Adding a collective: one row here, one file src/coll/nc_<name>.c with its
 * protocol as numbered steps at the top, its tunables in the one table
 * (config/nc_config.h), the MPI wrapper src/mpi/nc_mpi_<name>.c, a bench
 * entry, a test program.
 */
#ifndef NC_COLL_H
#define NC_COLL_H

#include <stddef.h>

#include "config/nc_config.h"
#include "shm/nc_seg.h"

struct numacoll_team;

typedef struct nc_coll_decl {
    const char *name;
    /* What the collective needs for a team of p with the agreed configuration
     * cfg and pages of `page` bytes: the same on every member, never from
     * anything local. */
    nc_shm_need_t (*shm_need)(int p, const nc_config_t *cfg, size_t page);
    /* Every member, after its block was first-touched and before the team's
     * second exchange (so no member uses the collective before every member
     * set it up): initialise what this member owns. */
    int (*init)(struct numacoll_team *t);
    void (*fini)(struct numacoll_team *t);
} nc_coll_decl_t;

/* X(ENUM, file) in the order of the areas in the segment. */
#define NC_COLL_TABLE(X) \
    X(BARRIER, barrier)  \
    X(REDUCE, reduce)    \
    X(GATHER, gather)

enum {
#define NC_COLL_ENUM_(e, file) NC_COLL_##e,
    NC_COLL_TABLE(NC_COLL_ENUM_)
#undef NC_COLL_ENUM_
    NC_COLL_COUNT
};
_Static_assert(NC_COLL_COUNT <= NC_LAYOUT_AREAS, "the layout has room for every collective");

extern const nc_coll_decl_t nc_coll_decls[NC_COLL_COUNT];

/* needs[m] of every collective, for nc_layout_compute(). */
void nc_coll_shm_needs(int p, const nc_config_t *cfg, size_t page, nc_shm_need_t needs[NC_COLL_COUNT]);

/* The NUMA plan of the collectives that work in two levels (the reductions,
 * coll/nc_reduce.c "Order"; the allgather, coll/nc_gather.c): p members
 * grouped by leaders[] (the lowest member of each one's NUMA node,
 * nc_topo_leaders), two-level when numa_on and 1 < D < p. */
typedef struct nc_numa_plan {
    int p, D, two;
    int *dom;    /* dom[k]: member k's domain, domains numbered by lowest member */
    int *dfirst; /* domain d's members: dmem[dfirst[d] .. dfirst[d + 1]) */
    int *dmem;   /* grouped by domain, rank order inside each */
    int *work;   /* two-level: work[d * p + k] is k when k is in d, else a member of d,
                    d's members in turn over the members outside d: the one that
                    reduces slice k over d, the one that carries block k into d */
} nc_numa_plan_t;

/* The number of members of domain d. */
static inline int nc_numa_plan_members(const nc_numa_plan_t *pl, int d)
{
    return pl->dfirst[d + 1] - pl->dfirst[d];
}

/* 0, or NUMACOLL_ERR_NOMEM (pl is then freed). */
int nc_numa_plan_make(nc_numa_plan_t *pl, int p, const int *leaders, int numa_on);
void nc_numa_plan_free(nc_numa_plan_t *pl);
/* The order as text, e.g. "(0 1) (2 3)": the domains' members in fold order. */
void nc_numa_plan_order(const nc_numa_plan_t *pl, char *buf, size_t len);
/* The plan of team t: its NUMA leaders, or with NUMACOLL_TEST_DOMAINS=v
 * (tests only) member k in domain k % v, as if the members were spread
 * round-robin over v nodes. */
int nc_coll_numa_plan(const struct numacoll_team *t, nc_numa_plan_t *pl, int numa_on);
/* Does the allgather carry blocks into domain d two-level (coll/nc_gather.c
 * A1)? With mode NC_NUMA_FWD_ON when d has two or more members; with
 * NC_NUMA_FWD_AUTO when its m members gain by it: (m - 1)(r - 1) > 1, where r
 * is the remote / local NUMA distance (nc_topo_numa_ratio, NC_NUMA_RATIO_DEFAULT
 * when 0: unknown). One copy more within d (the carrier's forward) against
 * m - 1 fewer copies across: (m - 1)(r - 1) > 1 with copies timed 1 locally,
 * r across. pl: made with numa_on. */
#define NC_NUMA_RATIO_DEFAULT 2.0
int nc_numa_plan_carry(const nc_numa_plan_t *pl, int d, int mode, double ratio);

/* Each collective's hooks (coll/nc_<file>.c). */
#define NC_COLL_HOOKS_(e, file)                                                   \
    nc_shm_need_t nc_##file##_shm_need(int p, const nc_config_t *cfg, size_t page); \
    int nc_##file##_init(struct numacoll_team *t);                                \
    void nc_##file##_fini(struct numacoll_team *t);
NC_COLL_TABLE(NC_COLL_HOOKS_)
#undef NC_COLL_HOOKS_

#endif
