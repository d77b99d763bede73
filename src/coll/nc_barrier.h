/*
 * Barrier internals shared with the tests and the benchmark (coll/nc_barrier.c).
 */
#ifndef NC_BARRIER_H
#define NC_BARRIER_H

#include <stddef.h>

#include "core/nc_team.h"

/* The choices of NUMACOLL_BARRIER_ALG, in the order of the table's choice list. */
typedef enum {
    NC_BAR_REARRANGED = 0,
    NC_BAR_PADDED,
    NC_BAR_DISSEMINATION,
    NC_BAR_CENTRAL,
    NC_BAR_AUTO, /* resolved at team creation, never left in nc_bar_t */
    NC_BAR_NALGS
} nc_bar_alg_t;

/* Test hook: when non-NULL, teams created afterwards take the NUMA groups of
 * their barrier from this array instead of team->leaders (p entries,
 * leaders[i] = lowest rank of member i's group, as team->leaders). Lets a
 * one-node machine exercise the two-level barrier with 2 or 3 groups. Set it
 * before forking, identically in every member. */
extern const int *nc_barrier_test_leaders;

/* One line describing a team's barrier, e.g. "rearranged kary:8 groups=2". */
void nc_barrier_describe(const struct numacoll_team *t, char *buf, size_t len);

#endif
