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

/* Each collective's hooks (coll/nc_<file>.c). */
#define NC_COLL_HOOKS_(e, file)                                                   \
    nc_shm_need_t nc_##file##_shm_need(int p, const nc_config_t *cfg, size_t page); \
    int nc_##file##_init(struct numacoll_team *t);                                \
    void nc_##file##_fini(struct numacoll_team *t);
NC_COLL_TABLE(NC_COLL_HOOKS_)
#undef NC_COLL_HOOKS_

#endif
