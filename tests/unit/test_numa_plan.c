/*
 * The collectives' NUMA plan (coll/nc_coll.h): domains from the leaders, the
 * members that carry (allgather) or reduce (reductions) a block of another
 * domain, each domain's members in turn; and the forwarding rule
 * nc_numa_plan_carry(): on, off, auto by (m - 1)(r - 1) > 1 with r = 2 when
 * unknown. Also nc_topo_numa_ratio() on an hwloc XML fixture with a SLIT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/nc_coll.h"
#include "topo/nc_topo.h"

#include "nc_check.h"

/* p members, member k on domain k / per (blocks of per, the last shorter). */
static int blocks(nc_numa_plan_t *pl, int p, int per)
{
    int lead[64];
    for (int k = 0; k < p; k++)
        lead[k] = k / per * per;
    return nc_numa_plan_make(pl, p, lead, 1);
}

static void check_work(const nc_numa_plan_t *pl)
{
    const int p = pl->p;
    for (int d = 0; d < pl->D; d++) {
        const int m = pl->dfirst[d + 1] - pl->dfirst[d];
        int load[64] = {0};
        for (int k = 0; k < p; k++) {
            const int w = pl->work[d * p + k];
            CHECK(pl->dom[w] == d, "p=%d: block %d is carried into domain %d by member %d of "
                  "domain %d", p, k, d, w, pl->dom[w]);
            if (pl->dom[k] == d)
                CHECK(w == k, "p=%d: block %d of domain %d carried by %d, not itself", p, k, d,
                      w);
            else
                load[w]++;
        }
        /* in turn: the loads of d's members differ by at most one */
        int lo = p, hi = 0;
        for (int j = pl->dfirst[d]; j < pl->dfirst[d + 1]; j++) {
            const int w = pl->dmem[j];
            lo = load[w] < lo ? load[w] : lo;
            hi = load[w] > hi ? load[w] : hi;
        }
        CHECK(hi - lo <= 1, "p=%d domain %d (%d members): carriers' loads %d..%d", p, d, m, lo,
              hi);
    }
}

int main(void)
{
    nc_numa_plan_t pl;
    /* shapes: 2 x 4, 3 x 3 + 1, 4 x 2, 8 x 8 */
    static const int shapes[][2] = {{8, 4}, {10, 3}, {8, 2}, {64, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        CHECK(blocks(&pl, shapes[i][0], shapes[i][1]) == 0, "plan");
        CHECK(pl.two && pl.work, "p=%d per %d: not two-level", shapes[i][0], shapes[i][1]);
        if (pl.work)
            check_work(&pl);
        nc_numa_plan_free(&pl);
    }
    /* one domain, and one member per domain: one level */
    CHECK(blocks(&pl, 4, 4) == 0 && !pl.two && pl.D == 1, "one domain");
    nc_numa_plan_free(&pl);
    CHECK(blocks(&pl, 4, 1) == 0 && !pl.two && pl.D == 4, "one member per domain");
    nc_numa_plan_free(&pl);

    /* the rule, on 3 domains of 2, 3 and 1 members */
    int lead[6] = {0, 0, 2, 2, 2, 5};
    CHECK(nc_numa_plan_make(&pl, 6, lead, 1) == 0 && pl.two && pl.D == 3, "plan 2+3+1");
    static const struct {
        int d, mode;
        double r;
        int want;
    } rule[] = {
        {0, NC_NUMA_FWD_AUTO, 2.0, 0},  /* (2-1)(2-1) = 1: no gain */
        {0, NC_NUMA_FWD_AUTO, 2.1, 1},  /* 1.1 > 1 */
        {0, NC_NUMA_FWD_AUTO, 0, 0},    /* unknown: taken as 2 */
        {1, NC_NUMA_FWD_AUTO, 1.6, 1},  /* (3-1)(0.6) = 1.2 */
        {1, NC_NUMA_FWD_AUTO, 1.5, 0},  /* (3-1)(0.5) = 1 */
        {1, NC_NUMA_FWD_AUTO, 0, 1},    /* (3-1)(2-1) = 2 */
        {2, NC_NUMA_FWD_AUTO, 3.2, 0},  /* one member: nobody to forward to */
        {2, NC_NUMA_FWD_ON, 3.2, 0},
        {0, NC_NUMA_FWD_ON, 1.0, 1},
        {1, NC_NUMA_FWD_OFF, 3.2, 0},
    };
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++)
        CHECK(nc_numa_plan_carry(&pl, rule[i].d, rule[i].mode, rule[i].r) == rule[i].want,
              "domain %d mode %d r %.2f: want %d", rule[i].d, rule[i].mode, rule[i].r,
              rule[i].want);
    nc_numa_plan_free(&pl);
    /* without the two-level plan (numa_on = 0) nothing is forwarded */
    CHECK(nc_numa_plan_make(&pl, 6, lead, 0) == 0 && !pl.two, "plan off");
    CHECK(!nc_numa_plan_carry(&pl, 1, NC_NUMA_FWD_ON, 3.0), "forwarding without a plan");
    nc_numa_plan_free(&pl);

    /* nc_topo_numa_ratio on the info tests' XML fixtures (SLIT 10/21, 10/16) */
    static const struct {
        const char *file;
        double r;
    } xml[] = {{"numa2x2_slit21.xml", 2.1}, {"numa2x2_slit16.xml", 1.6}};
    const char *dir = getenv("NUMACOLL_XML_FIXTURES");
    for (size_t i = 0; dir && i < sizeof xml / sizeof xml[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, xml[i].file);
        nc_topo_t *t = NULL;
        CHECK(nc_topo_load_xml(path, &t) == 0 && t, "load %s", path);
        if (!t)
            continue;
        const int both[4] = {0, 0, 1, 1}, one[2] = {1, 1}, unknown[2] = {-1, 0};
        const double r = nc_topo_numa_ratio(t->topo, 4, both);
        CHECK(r > xml[i].r - 1e-9 && r < xml[i].r + 1e-9, "%s: r = %f, want %f", xml[i].file, r,
              xml[i].r);
        CHECK(nc_topo_numa_ratio(t->topo, 2, one) == 0, "%s: one node gives a ratio",
              xml[i].file);
        CHECK(nc_topo_numa_ratio(t->topo, 2, unknown) == 0, "%s: an unknown node gives a ratio",
              xml[i].file);
        nc_topo_free(t);
    }
    CHECK(dir, "NUMACOLL_XML_FIXTURES is not set");
    /* nc_topo_copy_ratio refuses what it cannot measure (the guests measure) */
    nc_topo_t *here = NULL;
    if (nc_topo_load(&here) == 0 && here) {
        double r = -1;
        CHECK(nc_topo_copy_ratio(here, 0, 0, 4096, 1, &r) == NUMACOLL_ERR_INVAL && r == -1,
              "a node with itself");
        CHECK(nc_topo_copy_ratio(here, 0, 4095, 4096, 1, &r) == NUMACOLL_ERR_INVAL,
              "a node that does not exist");
        nc_topo_free(here);
    }
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures != 0;
}
