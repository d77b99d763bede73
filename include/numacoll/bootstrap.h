/*
 * Bootstrap: how the members of a team find each other before shared memory
 * exists. The MPI layer implements it with PMPI_Allgather; processes that share
 * nothing but a name use numacoll_bootstrap_named().
 */
#ifndef NUMACOLL_BOOTSTRAP_H
#define NUMACOLL_BOOTSTRAP_H

#include <stddef.h>

typedef struct numacoll_bootstrap {
    int rank;   /* 0 .. size-1, unique within the team */
    int size;   /* number of members, all on one node */
    /*
     * Collective over all members: each contributes `len` bytes at `mine`;
     * on return `all` holds size*len bytes, member i's at all + i*len.
     * Every member passes the same len. Returns 0 or a negative NUMACOLL_ERR_*.
     */
    int (*allgather)(void *ctx, const void *mine, void *all, size_t len);
    void *ctx;
} numacoll_bootstrap_t;

#endif
