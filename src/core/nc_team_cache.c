/*
 * The team cache: teams of freed communicators, kept for the next
 * communicator of the same processes.
 *
 * Making a team costs a segment (4 MB at p=2), its first touch and the
 * placement check of every page: about 2 ms at p=2 and 4.5 ms at p=4 here,
 * against microseconds for the MPI library's MPI_Comm_dup. Programs that make
 * a communicator per phase (ScaLAPACK's BLACS grids, solvers' sub-problems)
 * would pay it again and again. A parked team is exactly as its last call
 * left it on every member, so a later team of the same processes in the same
 * order goes on with it as if it were one communicator: the collectives'
 * counters and flags continue, nothing is reset.
 *
 * Park (nc_team_cache_put, local, when a communicator is freed):
 *   P1. a broken team, a team of one, NUMACOLL_TEAM_CACHE=0, or a node budget
 *       without room for two more teams of its size: destroy;
 *   P2. resolve the broadcasts this member deferred (as destroy does), so
 *       that no root waits for a member that left;
 *   P3. when NUMACOLL_TEAM_CACHE teams are parked already, destroy the
 *       oldest; park this one as the newest.
 *
 * Take (nc_team_cache_take, collective over the new team's bootstrap, before
 * numacoll_team_create; every member exchanges even with nothing to offer,
 * so that the calls stay matched):
 *   T1. take out of the cache (so that no other thread of this process can
 *       offer it too) every parked team this member can offer: the same size
 *       p, this member at the same rank in it, the configuration it was made
 *       from equal to the one a new team would get now, this member's
 *       binding unchanged;
 *   T2. allgather the offers (team names, newest first);
 *   T3. every member sees the same offers, so every member picks the same
 *       team: the first of member 0's offers that every member made. Member i
 *       offered only teams in which it is rank i, so the p members of the
 *       picked team are exactly its members, in order. Whatever was not
 *       picked goes back to the cache.
 * A member that freed its communicator later than another made the next one
 * has nothing to offer yet: the new communicator gets a new team, and the
 * parked one waits (it is never used by two communicators at once).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/nc_team.h"
#include "shm/nc_shm.h"

#define NC_TEAM_CACHE_MAX 16 /* NUMACOLL_TEAM_CACHE's upper bound */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static numacoll_team_t *parked[NC_TEAM_CACHE_MAX]; /* oldest first */
static int nparked;
static uint64_t clock_; /* ages, under lock */

typedef struct offer {
    int32_t n, pad;
    uint64_t id[NC_TEAM_CACHE_MAX][2]; /* newest first */
} offer_t;

static int cache_limit(void)
{
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    const int64_t n = NC_CFG_NUM(&cfg, TEAM_CACHE);
    return n < 0 ? 0 : n > NC_TEAM_CACHE_MAX ? NC_TEAM_CACHE_MAX : (int)n;
}

/* Under lock: put t back in age order. */
static void insert(numacoll_team_t *t)
{
    int i = nparked++;
    while (i > 0 && parked[i - 1]->parked > t->parked) {
        parked[i] = parked[i - 1];
        i--;
    }
    parked[i] = t;
}

/* Under lock: remove entry i. */
static numacoll_team_t *remove_at(int i)
{
    numacoll_team_t *t = parked[i];
    memmove(&parked[i], &parked[i + 1], (size_t)(nparked - i - 1) * sizeof *parked);
    nparked--;
    return t;
}

/* T1: the same configuration a new team would get now (every value, not only
 * the agreed ones: a parked team keeps its snapshot). */
static int same_config(const nc_config_t *a, const nc_config_t *b)
{
    for (int i = 0; i < NC_PARAM_COUNT; i++)
        if (a->v[i].num != b->v[i].num || a->v[i].aux != b->v[i].aux)
            return 0;
    return 1;
}

int nc_team_cache_take(const numacoll_bootstrap_t *bs, numacoll_team_t **out)
{
    const int p = bs->size, me = bs->rank;
    numacoll_team_t *mine[NC_TEAM_CACHE_MAX];
    offer_t my = {0}, *all = calloc((size_t)p, sizeof *all);
    int n = 0, rc;
    *out = NULL;
    if (!all) /* as numacoll_team_create: nothing sensible to exchange */
        return NUMACOLL_ERR_NOMEM;

    /* T1 */
    nc_config_t now;
    int numa;
    uint64_t key;
    if (!nc_team_config(&now, p, 0)) { /* (a bad one: offer nothing, still exchange) */
        nc_team_binding(&numa, &key);
        pthread_mutex_lock(&lock);
        for (int i = nparked - 1; i >= 0; i--) {
            numacoll_team_t *t = parked[i];
            if (t->p == p && t->rank == me && t->bind_numa == numa && t->bind_key == key &&
                same_config(&t->asked, &now))
                mine[n++] = remove_at(i);
        }
        pthread_mutex_unlock(&lock);
    }
    my.n = n;
    for (int k = 0; k < n; k++)
        memcpy(my.id[k], mine[k]->id, sizeof my.id[k]);

    /* T2 */
    rc = bs->allgather(bs->ctx, &my, all, sizeof my);

    /* T3 */
    int pick = -1;
    if (!rc)
        for (int k = 0; k < all[0].n && pick < 0; k++) {
            int everyone = 1;
            for (int i = 1; i < p && everyone; i++) {
                int has = 0;
                for (int j = 0; j < all[i].n && !has; j++)
                    has = !memcmp(all[i].id[j], all[0].id[k], sizeof all[0].id[k]);
                everyone = has;
            }
            if (everyone)
                for (int j = 0; j < n && pick < 0; j++)
                    if (!memcmp(mine[j]->id, all[0].id[k], sizeof all[0].id[k]))
                        pick = j;
        }
    /* put back what was not picked; other threads may have parked teams
     * meanwhile: the oldest beyond the limit go (destroyed outside the lock) */
    const int limit = cache_limit();
    numacoll_team_t *gone[2 * NC_TEAM_CACHE_MAX];
    int ngone = 0;
    pthread_mutex_lock(&lock);
    for (int j = 0; j < n; j++)
        if (j != pick)
            insert(mine[j]);
    while (nparked > limit)
        gone[ngone++] = remove_at(0);
    pthread_mutex_unlock(&lock);
    for (int j = 0; j < ngone; j++)
        numacoll_team_destroy(gone[j]);
    free(all);
    if (rc)
        return rc;
    if (pick < 0)
        return 0;
    *out = mine[pick];
    return 1;
}

/* P1: the node budget (shm/nc_shm.h) counts a parked team at its maker
 * (member 0) until member 0 drops it, and no other process can make it drop
 * it: a team is kept only while the budget has room for two more of its size
 * besides it. Every member looks at the same node-wide counter; members
 * that decide differently only lose the reuse (the team is offered by some,
 * not all). */
static int budget_tight(const numacoll_team_t *t)
{
    nc_budget_state_t st;
    nc_budget_get(&st);
    const uint64_t bytes = t->seg.l.total;
    return st.limit && st.used + 2 * bytes > st.limit;
}

void nc_team_cache_put(numacoll_team_t *t)
{
    if (!t)
        return;
    const int limit = cache_limit();
    /* P1, P2 (a deferred call whose root sent data was a truncation: it is
     * reported and the team stays usable, as at any later call) */
    const int keep = !t->broken && t->p > 1 && limit && !budget_tight(t);
    if (keep)
        nc_bcast_flush(t);
    if (!keep || t->broken) {
        numacoll_team_destroy(t);
        return;
    }
    /* P3 */
    numacoll_team_t *old = NULL;
    pthread_mutex_lock(&lock);
    if (nparked >= limit)
        old = remove_at(0);
    t->parked = ++clock_;
    insert(t);
    pthread_mutex_unlock(&lock);
    numacoll_team_destroy(old);
}

int nc_team_cache_evict(void)
{
    numacoll_team_t *t = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nparked && !t; i++)
        if (parked[i]->budget_bytes)
            t = remove_at(i);
    pthread_mutex_unlock(&lock);
    numacoll_team_destroy(t);
    return t != NULL;
}

void nc_team_cache_clear(void)
{
    for (;;) {
        numacoll_team_t *t = NULL;
        pthread_mutex_lock(&lock);
        if (nparked)
            t = remove_at(nparked - 1);
        pthread_mutex_unlock(&lock);
        if (!t)
            return;
        numacoll_team_destroy(t);
    }
}
