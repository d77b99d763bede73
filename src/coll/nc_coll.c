/*
 * The table of the collectives' declarations (coll/nc_coll.h).
 */
#include "coll/nc_coll.h"

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
