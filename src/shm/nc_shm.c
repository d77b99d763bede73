/*
 * Shared-memory files: names, create/open, reservation, sweep, node budget.
 * See nc_shm.h.
 */
#include "shm/nc_shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/nc_common.h"
#include "config/nc_config.h"
#include "numacoll/bootstrap.h"

void nc_shm_name(char *buf, size_t len)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
        /* No entropy source (very old kernel): time and address bits. */
        static _Atomic uint64_t counter;
        r = nc_time_ns() ^ ((uint64_t)(uintptr_t)&r << 17) ^
            atomic_fetch_add_explicit(&counter, 0x9e3779b97f4a7c15ull, memory_order_relaxed);
    }
    snprintf(buf, len, "/" NC_SHM_PREFIX "%u-%d-%016" PRIx64, (unsigned)geteuid(), (int)getpid(),
             r);
}

void nc_shm_fmt_bytes(uint64_t b, char *buf, size_t len)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, len, "%.1f MiB", (double)b / (1ull << 20));
    else if (b >= (1ull << 10))
        snprintf(buf, len, "%.1f KiB", (double)b / (1ull << 10));
    else
        snprintf(buf, len, "%" PRIu64 " B", b);
}

int nc_shm_fs(uint64_t *size, uint64_t *avail)
{
    struct statvfs sv;
    if (statvfs(NC_SHM_DIR, &sv))
        return NUMACOLL_ERR_SHM;
    if (size)
        *size = (uint64_t)sv.f_blocks * sv.f_frsize;
    if (avail)
        *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    return 0;
}

int nc_shm_create(const char *name, size_t bytes)
{
    nc_shm_sweep();
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW, 0600);
    if (fd < 0) {
        nc_log_error("shm_open(%s): %s%s", name, strerror(errno),
                     errno == EEXIST ? " (a file is already there: refused, not reused)" : "");
        return NUMACOLL_ERR_SHM;
    }
    /* From here on the file lives only as long as a process holds it. */
    shm_unlink(name);
    if (ftruncate(fd, (off_t)bytes)) {
        int e = errno;
        nc_log_error("ftruncate(%s, %zu): %s", name, bytes, strerror(e));
        close(fd);
        return e == EFBIG || e == ENOSPC ? NUMACOLL_ERR_NOSPACE : NUMACOLL_ERR_SHM;
    }
    return fd;
}

int nc_shm_open(int pid, int cfd, const char *name, size_t bytes)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, cfd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        nc_log_error("attach to segment %s through %s: %s", name, path, strerror(errno));
        return NUMACOLL_ERR_SHM;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        nc_log_error("fstat(%s): %s", name, strerror(errno));
        close(fd);
        return NUMACOLL_ERR_SHM;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        nc_log_error("segment %s is not a 0600 file of user %u (owner %u, mode %04o): refused",
                     name, (unsigned)geteuid(), (unsigned)st.st_uid,
                     (unsigned)(st.st_mode & 07777));
        close(fd);
        return NUMACOLL_ERR_SHM;
    }
    if ((size_t)st.st_size != bytes) {
        nc_log_error("segment %s has %lld bytes, this member computed %zu: layouts differ", name,
                     (long long)st.st_size, bytes);
        close(fd);
        return NUMACOLL_ERR_MISMATCH;
    }
    return fd;
}

int nc_shm_reserve(int fd, size_t off, size_t len, const char *what, char *why, size_t whylen)
{
    if (!len)
        return 0;
    int e = posix_fallocate(fd, (off_t)off, (off_t)len);
    if (!e)
        return 0;
    uint64_t size = 0, avail = 0;
    nc_shm_fs(&size, &avail);
    char need[32], have[32], total[32];
    nc_shm_fmt_bytes(len, need, sizeof need);
    nc_shm_fmt_bytes(avail, have, sizeof have);
    nc_shm_fmt_bytes(size, total, sizeof total);
    /* the tunables size a team's segment only; the bootstrap file and the
     * budget page are sized by the team's size and the page */
    const int boot = !strcmp(what, "the bootstrap file"),
              seg = !boot && strcmp(what, "the node budget page");
    snprintf(why, whylen, "%s needs %s of " NC_SHM_DIR ", which has %s free of %s (%s); %s",
             what, need, have, total, strerror(e),
             seg    ? "lower NUMACOLL_REDUCE_FRAG_SIZE, NUMACOLL_BCAST_QUEUE_LEN or "
                      "NUMACOLL_BCAST_FRAG_SIZE, or enlarge " NC_SHM_DIR
             : boot ? "it grows with the number of members given: check it, or enlarge " NC_SHM_DIR
                    : "enlarge " NC_SHM_DIR);
    return e == ENOSPC || e == EFBIG || e == ENOMEM ? NUMACOLL_ERR_NOSPACE : NUMACOLL_ERR_SHM;
}

/* ---- clean-up of files whose creator died ------------------------------------ */

static int swept = -1;
static pthread_once_t sweep_once = PTHREAD_ONCE_INIT;

/* A bootstrap file (numacoll_bootstrap_named(), "numacoll-boot-NAME") that no
 * live process holds a lock on: its members all ended before their team
 * formed (the rule of step J1 in core/nc_bootstrap_named.c, for names that
 * never come back). 1 when it was removed. */
static int sweep_boot(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st, now;
    int removed = 0;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        !(st.st_mode & 077) && !flock(fd, LOCK_EX | LOCK_NB) &&
        !fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) && now.st_ino == st.st_ino &&
        now.st_dev == st.st_dev)
        removed = !unlinkat(dfd, name, 0);
    close(fd);
    return removed;
}

static void sweep_run(void)
{
    int removed = 0;
    DIR *d = opendir(NC_SHM_DIR);
    if (!d) {
        swept = 0;
        return;
    }
    char prefix[64];
    snprintf(prefix, sizeof prefix, NC_SHM_PREFIX "%u-", (unsigned)geteuid());
    size_t plen = strlen(prefix);
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strncmp(e->d_name, NC_SHM_PREFIX "boot-", sizeof NC_SHM_PREFIX "boot-" - 1)) {
            removed += sweep_boot(dirfd(d), e->d_name);
            continue;
        }
        if (strncmp(e->d_name, prefix, plen))
            continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || *end != '-' || pid <= 0)
            continue;
        /* Alive (or not ours to judge): keep. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st;
        /* Young files may belong to a live creator in another pid namespace
         * that shares this /dev/shm: a set-up takes seconds, not a minute. */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid() || now - st.st_mtime < 60)
            continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (!shm_unlink(name))
            removed++;
    }
    closedir(d);
    if (removed)
        nc_log_info(1, "removed %d stale segment(s) or bootstrap file(s) of dead processes from "
                    NC_SHM_DIR, removed);
    swept = removed;
}

int nc_shm_sweep(void)
{
    pthread_once(&sweep_once, sweep_run);
    return swept;
}

/* ---- node-wide budget ------------------------------------------------------- */

#define NC_BUDGET_MAGIC UINT64_C(0x5445474455424e43) /* "NCBUDGET" */

typedef struct budget_page {
    uint64_t magic;
    /* Bytes of the job's segments on this node. relaxed RMW: a counter,
     * nothing is published through it. */
    _Atomic uint64_t used NC_ALIGNED(NC_CACHELINE);
} budget_page_t;

static _Atomic uint64_t local_used;
static _Atomic(budget_page_t *) shared_page;

static _Atomic uint64_t *counter(int *shared)
{
    /* acquire: the page's initialisation; pairs with the release in nc_budget_join(). */
    budget_page_t *bp = atomic_load_explicit(&shared_page, memory_order_acquire);
    if (shared)
        *shared = bp != NULL;
    return bp ? &bp->used : &local_used;
}

uint64_t nc_budget_limit(void)
{
    nc_config_t cfg;
    nc_config_snapshot(&cfg);
    uint64_t lim = (uint64_t)NC_CFG_NUM(&cfg, SHM_LIMIT);
    if (lim)
        return lim;
    uint64_t size = 0;
    if (nc_shm_fs(&size, NULL) || !size)
        return UINT64_MAX;
    return size / 4;
}

void nc_budget_get(nc_budget_state_t *st)
{
    _Atomic uint64_t *c = counter(&st->shared);
    st->used = atomic_load_explicit(c, memory_order_relaxed);
    st->limit = nc_budget_limit();
}

int nc_budget_take(uint64_t bytes, nc_budget_state_t *st)
{
    nc_budget_get(st);
    _Atomic uint64_t *c = counter(NULL);
    uint64_t cur = atomic_load_explicit(c, memory_order_relaxed);
    do {
        if (cur > st->limit || bytes > st->limit - cur) {
            st->used = cur;
            return NUMACOLL_ERR_NOSPACE;
        }
    } while (!atomic_compare_exchange_weak_explicit(c, &cur, cur + bytes, memory_order_relaxed,
                                                    memory_order_relaxed));
    st->used = cur + bytes;
    return 0;
}

void nc_budget_give(uint64_t bytes)
{
    atomic_fetch_sub_explicit(counter(NULL), bytes, memory_order_relaxed);
}

int nc_budget_join(const numacoll_bootstrap_t *bs)
{
    if (!bs || !bs->allgather || bs->size < 2 ||
        atomic_load_explicit(&shared_page, memory_order_relaxed))
        return 0;
    size_t page = nc_page_size();
    struct {
        int32_t status, pid, fd, pad;
        char name[64];
    } mine = {.pid = (int32_t)getpid(), .fd = -1}, *all = calloc((size_t)bs->size, sizeof mine);
    if (!all)
        return NUMACOLL_ERR_NOMEM;
    budget_page_t *bp = NULL;
    int fd = -1;
    char why[256];
    if (bs->rank == 0) {
        nc_shm_name(mine.name, sizeof mine.name);
        fd = nc_shm_create(mine.name, page);
        mine.fd = fd;
        if (fd < 0)
            mine.status = fd;
        else if ((mine.status = nc_shm_reserve(fd, 0, page, "the node budget page", why,
                                               sizeof why)))
            nc_log_info(1, "%s", why);
    }
    /* 1. the name (or the creator's failure) */
    int rc = bs->allgather(bs->ctx, &mine, all, sizeof mine);
    if (!rc && !all[0].status && bs->rank != 0) {
        fd = nc_shm_open(all[0].pid, all[0].fd, all[0].name, page);
        mine.status = fd < 0 ? fd : 0;
    }
    if (!rc && !all[0].status && fd >= 0) {
        bp = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (bp == MAP_FAILED) {
            bp = NULL;
            mine.status = NUMACOLL_ERR_SHM;
        } else if (bs->rank == 0) {
            bp->magic = NC_BUDGET_MAGIC;
            atomic_store_explicit(&bp->used, 0, memory_order_relaxed);
        }
    }
    if (fd >= 0 && bs->rank != 0)
        close(fd);
    /* 2. everyone attached (the exchange orders rank 0's initialisation
     * before anyone's use: the bootstrap is a full synchronisation); rank 0
     * keeps its descriptor open until here, the others attach through it */
    int rc2 = rc ? rc : bs->allgather(bs->ctx, &mine, all, sizeof mine);
    if (fd >= 0 && bs->rank == 0)
        close(fd);
    int ok = !rc2;
    for (int i = 0; ok && i < bs->size; i++)
        ok = !all[i].status;
    free(all);
    if (!ok || !bp || bp->magic != NC_BUDGET_MAGIC) {
        if (bp)
            munmap(bp, page);
        return rc2 ? rc2 : NUMACOLL_ERR_SHM;
    }
    /* Segments this process created before joining stay counted. */
    atomic_fetch_add_explicit(&bp->used, atomic_load_explicit(&local_used, memory_order_relaxed),
                              memory_order_relaxed);
    /* release: publishes bp to this process's other threads; pairs with the
     * acquire in counter(). */
    atomic_store_explicit(&shared_page, bp, memory_order_release);
    return 0;
}

void nc_budget_leave(void)
{
    /* acq_rel: see counter() and nc_budget_join(). */
    budget_page_t *bp = atomic_exchange_explicit(&shared_page, NULL, memory_order_acq_rel);
    if (bp)
        munmap(bp, nc_page_size());
}
