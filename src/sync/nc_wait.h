/*
 * Waiting for a peer: spin with a pause instruction, then yield the CPU.
 *
 *   nc_backoff_t b;
 *   nc_backoff_init(&b, &team->wait);
 *   while (atomic_load_explicit(flag, memory_order_acquire) != want)
 *       if ((rc = nc_backoff(&b)) < 0)
 *           return rc;          // a member died, or the team is broken
 *
 * Up to spin_limit pauses (NUMACOLL_SPIN_COUNT; 0 when the team has more
 * members than CPUs, so an oversubscribed waiter gives its CPU away at once),
 * then sched_yield(); a wait longer than 200 ms (a stopped or descheduled
 * peer: SIGSTOP, a debugger, a heavily oversubscribed node) naps 100 us per
 * round instead, so it no longer burns a CPU the others may need. While
 * yielding or napping, every ~50 ms the waiter checks the team's
 * broken flag and whether every member's pid is still alive, so a dead peer
 * ends the wait with NUMACOLL_ERR_PEER_DEAD within a fraction of a second.
 * A death (or the broken flag) is reported on the call after the one that
 * saw it, i.e. after the caller re-checked its condition: a peer that did
 * its part and then exited normally is not mistaken for a failure.
 */
#ifndef NC_WAIT_H
#define NC_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/nc_common.h"

typedef struct nc_waitctx {
    uint32_t spin_limit;
    int p, rank;
    const int32_t *pids;       /* every member's pid (a private copy) */
    _Atomic uint32_t *broken;  /* the team's broken flag in shared memory */
} nc_waitctx_t;

typedef struct nc_backoff {
    const nc_waitctx_t *w;
    uint32_t spins, yields;
    uint64_t next_check;
    uint64_t since; /* when the first slow round ran (0: not yet) */
    int napping;    /* the wait has lasted long: sleep, do not yield */
    int pending; /* an error seen; reported only if the condition still fails */
    int dead;    /* the member found dead, for the report */
} nc_backoff_t;

static inline void nc_backoff_init(nc_backoff_t *b, const nc_waitctx_t *w)
{
    b->w = w;
    b->spins = 0;
    b->yields = 0;
    b->next_check = 0;
    b->since = 0;
    b->napping = 0;
    b->pending = 0;
    b->dead = -1;
}

int nc_backoff_slow(nc_backoff_t *b);

/* A process-wide progress hook, called every 8th slow round of every wait
 * (NULL: none). The MPI layer sets one that polls the MPI library, because a
 * rank waiting here is inside an MPI call and the MPI library may need it to
 * make progress for others meanwhile: a passive-target RMA epoch of another
 * rank on this one's window (MPICH completes MPI_Win_unlock only when the
 * target polls), while that rank may then be the one this wait waits for. */
typedef void (*nc_progress_fn)(void);
void nc_wait_set_progress(nc_progress_fn fn);

static inline int nc_backoff(nc_backoff_t *b)
{
    if (NC_LIKELY(b->spins < b->w->spin_limit)) {
        b->spins++;
        nc_cpu_relax();
        return 0;
    }
    return nc_backoff_slow(b);
}

/* Is process `pid` gone (exited, or a zombie nobody reaped yet)? */
int nc_pid_dead(int pid);
/* One round of a wait that only the peer's death may end (a drain after a
 * failure, when the team is broken and nc_backoff() gives up at once): 1 if
 * member i is dead (stop waiting for it), else 0 (wait on). */
int nc_peer_gone(nc_backoff_t *b, int i);
/* Mark the team broken (every waiter stops) and log why. */
void nc_wait_break(const nc_waitctx_t *w);

#endif
