#include "sync/nc_wait.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NC_CHECK_PERIOD_NS 50000000u /* 50 ms between liveness checks */
#define NC_NAP_AFTER_NS 200000000u   /* a wait this long naps instead of yielding */
#define NC_NAP_NS 100000             /* 100 us per nap */

int nc_pid_dead(int pid)
{
    if (kill(pid, 0) && errno == ESRCH)
        return 1;
    /* kill() succeeds on a zombie: read its state from /proc. */
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* comm may hold spaces and ')' */
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

void nc_wait_break(const nc_waitctx_t *w)
{
    /* relaxed: a hint that every waiter polls; it publishes no data. */
    atomic_store_explicit(w->broken, 1, memory_order_relaxed);
}

static _Atomic(nc_progress_fn) progress;

void nc_wait_set_progress(nc_progress_fn fn)
{
    /* relaxed: the pointer is the only thing published */
    atomic_store_explicit(&progress, fn, memory_order_relaxed);
}

int nc_backoff_slow(nc_backoff_t *b)
{
    const nc_waitctx_t *w = b->w;
    if (b->pending) {
        /* The caller re-checked its condition after we saw the error, and it
         * still fails: now it is real. */
        if (b->dead >= 0) {
            nc_log_error("member %d (pid %d) of the team has died; giving up the wait", b->dead,
                         (int)w->pids[b->dead]);
            nc_wait_break(w);
        }
        return b->pending;
    }
    if (b->napping)
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = NC_NAP_NS}, NULL);
    else
        sched_yield();
    if (!(++b->yields & 7)) {
        nc_progress_fn fn = atomic_load_explicit(&progress, memory_order_relaxed);
        if (fn)
            fn();
    }
    if (b->yields & 31)
        return 0;
    if (atomic_load_explicit(w->broken, memory_order_relaxed)) {
        b->pending = NUMACOLL_ERR_BROKEN;
        return 0;
    }
    uint64_t now = nc_time_ns();
    if (!b->next_check) {
        b->since = now;
        b->next_check = now + NC_CHECK_PERIOD_NS;
        return 0;
    }
    if (now < b->next_check)
        return 0;
    b->napping = now - b->since > NC_NAP_AFTER_NS;
    b->next_check = now + NC_CHECK_PERIOD_NS;
    for (int i = 0; i < w->p; i++) {
        if (i != w->rank && nc_pid_dead(w->pids[i])) {
            b->pending = NUMACOLL_ERR_PEER_DEAD;
            b->dead = i;
            return 0;
        }
    }
    return 0;
}

int nc_peer_gone(nc_backoff_t *b, int i)
{
    if (nc_backoff(b) >= 0)
        return 0;
    if (nc_pid_dead(b->w->pids[i]))
        return 1;
    nc_backoff_init(b, b->w);
    return 0;
}
