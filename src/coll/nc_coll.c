/*
 * The table of the collectives' declarations and their NUMA plan (coll/nc_coll.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/nc_coll.h"
#include "core/nc_team.h"

const nc_coll_decl_t nc_coll_decls[NC_COLL_COUNT] = {
#define NC_COLL_ROW_(e, file) \
    [NC_COLL_##e] = {#file, nc_##file##_shm_need, nc_##file##_init, nc_##file##_fini},
    NC_COLL_TABLE(NC_COLL_ROW_)
#undef NC_COLL_ROW_
};

void nc_coll_shm_needs(int p, const nc_config_t *cfg, size_t page, nc_shm_need_t needs[NC_COLL_COUNT])
{
    for (int m = 0; m < NC_COLL_COUNT; m++)
        needs[m] = nc_coll_decls[m].shm_need(p, cfg, page);
}

void nc_numa_plan_free(nc_numa_plan_t *pl)
{
    free(pl->dom);
    free(pl->dfirst);
    free(pl->dmem);
    free(pl->work);
    memset(pl, 0, sizeof *pl);
}

int nc_numa_plan_make(nc_numa_plan_t *pl, int p, const int *leaders, int numa_on)
{
    memset(pl, 0, sizeof *pl);
    pl->p = p;
    pl->dom = calloc((size_t)p, sizeof *pl->dom);
    pl->dfirst = calloc((size_t)p + 1, sizeof *pl->dfirst);
    pl->dmem = calloc((size_t)p, sizeof *pl->dmem);
    if (!pl->dom || !pl->dfirst || !pl->dmem) {
        nc_numa_plan_free(pl);
        return NUMACOLL_ERR_NOMEM;
    }
    int D = 0;
    for (int k = 0; k < p; k++) {
        const int lead = leaders && leaders[k] >= 0 && leaders[k] <= k ? leaders[k] : k;
        pl->dom[k] = lead == k ? D++ : pl->dom[lead];
    }
    pl->D = D;
    for (int d = 0, n = 0; d < D; d++) {
        pl->dfirst[d] = n;
        for (int k = 0; k < p; k++)
            if (pl->dom[k] == d)
                pl->dmem[n++] = k;
    }
    pl->dfirst[D] = p;
    pl->two = numa_on && D > 1 && D < p;
    if (!pl->two)
        return 0;
    pl->work = calloc((size_t)D * (size_t)p, sizeof *pl->work);
    if (!pl->work) {
        nc_numa_plan_free(pl);
        return NUMACOLL_ERR_NOMEM;
    }
    for (int d = 0; d < D; d++) {
        const int n = nc_numa_plan_members(pl, d);
        for (int k = 0, j = 0; k < p; k++)
            pl->work[d * p + k] = pl->dom[k] == d ? k : pl->dmem[pl->dfirst[d] + j++ % n];
    }
    return 0;
}

void nc_numa_plan_order(const nc_numa_plan_t *pl, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    const int D = pl->two ? pl->D : 1;
    for (int d = 0; d < D && at < len; d++) {
        const int a = pl->two ? pl->dfirst[d] : 0, b = pl->two ? pl->dfirst[d + 1] : pl->p;
        for (int j = a; j < b && at < len; j++) {
            int n = snprintf(buf + at, len - at, "%s%s%d%s", d && j == a ? " " : "",
                             j == a ? "(" : " ", pl->two ? pl->dmem[j] : j, j == b - 1 ? ")" : "");
            at += n > 0 ? (size_t)n : 0;
        }
    }
}

int nc_coll_numa_plan(const struct numacoll_team *t, nc_numa_plan_t *pl, int numa_on)
{
    const int v = (int)NC_CFG_NUM(&t->cfg, TEST_DOMAINS);
    if (v <= 0)
        return nc_numa_plan_make(pl, t->p, t->leaders, numa_on);
    int *lead = calloc((size_t)t->p, sizeof *lead);
    if (!lead)
        return NUMACOLL_ERR_NOMEM;
    for (int k = 0; k < t->p; k++)
        lead[k] = k % v;
    const int rc = nc_numa_plan_make(pl, t->p, lead, numa_on);
    free(lead);
    return rc;
}

int nc_numa_plan_carry(const nc_numa_plan_t *pl, int d, int mode, double ratio)
{
    const int m = nc_numa_plan_members(pl, d);
    if (!pl->work || m < 2 || mode == NC_NUMA_FWD_OFF)
        return 0;
    const double r = ratio > 0 ? ratio : NC_NUMA_RATIO_DEFAULT;
    return mode == NC_NUMA_FWD_ON || (double)(m - 1) * (r - 1.0) > 1.0;
}
