/*
 * A bootstrap for processes that share nothing but a name: a small rendezvous
 * file in /dev/shm with one slot per member and round.
 *
 * Protocol (allgather round r, parity r & 1):
 *   1. write my data into slot[parity][me], then store seq = r (release;
 *      pairs with the acquire in step 2 of the other members);
 *   2. for every member i wait for slot[parity][i].seq == r (acquire), copy.
 * Two parities suffice: a member writes round r+2 into the slot of round r
 * only after it saw every member's round r+1, which each member publishes
 * after it finished reading round r.
 * The file is unlinked by the member that joins last, so nothing stays in
 * /dev/shm once every member has opened it.
 *
 * Joining (numacoll_bootstrap_named()). Every member holds a shared flock()
 * on the file from before it is visible under its name until the member
 * frees the bootstrap; the kernel drops the lock of a process that dies.
 *   J1. open the name: if an exclusive lock on it succeeds at once, no live
 *       process holds it: the file was left by members that died before the
 *       team formed (or timed out); it is unlinked, if the name still names
 *       that file, and J1 starts over. Else take the shared lock, check that
 *       the name still names the file (a member in J1 may have just removed
 *       it) and its size, and join;
 *   J2. no file: make one unnamed (O_TMPFILE in /dev/shm), lock it, size it,
 *       write its header, and give it the name with linkat(): only one of
 *       the members racing here succeeds (EEXIST for the others: J1), and a
 *       file is never seen half made, nor left behind by a creator that dies
 *       before linkat().
 * A file left by dead members used to make the next team of that name wait
 * for members that never came (120 s) and fail. A file of a name that never
 * comes back (a job's own name) is removed by the next numacoll process on
 * the node (nc_shm_sweep(), the same lock test as J1).
 *
 * Waiting (joining, and every allgather round): spin, then yield, past 200 ms
 * nap 100 us so a late member gets the CPU. Every 50 ms a waiter checks that
 * the member it waits for, once joined, is alive: a joined member holds a
 * write lock (an open file description lock, F_OFD_SETLK) on byte `bytes +
 * rank` of the file until it frees the bootstrap or dies (a child forked in
 * between holds it too), and then stores its pid in its slot; a joined member whose
 * byte nobody locks is dead, and the wait ends with NUMACOLL_ERR_PEER_DEAD,
 * as in a team's collectives. Locks, not pids: the members may sit in
 * different pid namespaces that share /dev/shm. The file keeps its name
 * then, so a member still to come joins it and learns the same at once. A
 * member that has not joined is waited for up to 120 s (NUMACOLL_ERR_TIMEOUT),
 * with one warning after 10 s saying who is missing.
 */
/* O_TMPFILE, linkat(): _GNU_SOURCE is the build's */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/nc_common.h"
#include "shm/nc_shm.h"

#define NC_BOOT_MAGIC 0x4e434232u /* "NCB2": slots with a pid (a file of "NCBO" is refused) */
#define NC_BOOT_SLOT 4096u
#define NC_BOOT_TIMEOUT_NS (120ull * 1000000000ull)
#define NC_BOOT_SAY_NS (10ull * 1000000000ull) /* the line about who is missing */
#define NC_BOOT_NAP_FROM_NS 200000000ull       /* 200 ms: nap instead of yield */
#define NC_BOOT_CHECK_NS 50000000ull           /* 50 ms between checks */

typedef struct boot_hdr {
    _Atomic uint32_t ready; /* release by the creator after p and slot are set */
    uint32_t p, slot_bytes;
    _Atomic uint32_t joined NC_ALIGNED(NC_CACHELINE);
} boot_hdr_t;

typedef struct boot_slot {
    _Atomic uint32_t seq NC_ALIGNED(NC_CACHELINE);
    /* parity 0 only: the member's pid (for messages) once it joined and
     * holds its lock byte, 0 before; release by the member, after the lock;
     * pairs with the acquire in boot_check() */
    _Atomic int32_t pid;
    unsigned char data[NC_BOOT_SLOT];
} boot_slot_t;

typedef struct named_bs {
    numacoll_bootstrap_t pub;
    char name[128]; /* "/numacoll-boot-NAME", for messages */
    char path[160]; /* /dev/shm/numacoll-boot-NAME */
    int fd;         /* the file, with my shared lock */
    boot_hdr_t *hdr;
    size_t bytes;
    uint32_t round;
} named_bs_t;

/* Does path name the file open as fd? */
static int names_file(const char *path, int fd)
{
    struct stat a, n;
    return !fstat(fd, &a) && !stat(path, &n) && a.st_ino == n.st_ino && a.st_dev == n.st_dev;
}

static boot_slot_t *slot(named_bs_t *b, unsigned parity, int rank)
{
    boot_slot_t *s = (boot_slot_t *)((char *)b->hdr + nc_round_up(sizeof(boot_hdr_t), NC_CACHELINE));
    return &s[(size_t)parity * (size_t)b->pub.size + (size_t)rank];
}

typedef struct boot_wait {
    uint64_t start, next_check;
    unsigned spins;
    int said; /* the 10-s line is out */
} boot_wait_t;

static void boot_wait_init(boot_wait_t *w)
{
    w->start = nc_time_ns();
    w->next_check = 0;
    w->spins = 0;
    w->said = 0;
}

/* One round of a wait: 0 wait on, 1 a check is due (every 50 ms once the wait
 * is slow), NUMACOLL_ERR_TIMEOUT past 120 s. */
static int boot_wait(boot_wait_t *w)
{
    if (++w->spins < 1000) {
        nc_cpu_relax();
        return 0;
    }
    const uint64_t now = nc_time_ns();
    if (now - w->start > NC_BOOT_NAP_FROM_NS)
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100000}, NULL);
    else
        sched_yield();
    if (now < w->next_check)
        return 0;
    w->next_check = now + NC_BOOT_CHECK_NS;
    return now - w->start > NC_BOOT_TIMEOUT_NS ? NUMACOLL_ERR_TIMEOUT : 1;
}

/* Take the name off, unless it names a later team's file by now. */
static void boot_unname(named_bs_t *b)
{
    if (names_file(b->path, b->fd))
        unlink(b->path);
}

/* The lock byte of member `rank` (beyond the file's end: nothing is stored
 * there, it only names the member). */
static struct flock lock_byte(const named_bs_t *b, int rank, short type)
{
    struct flock l = {0};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = (off_t)(b->bytes + (size_t)rank);
    l.l_len = 1;
    return l;
}

/* Does a live process hold member i's lock byte? */
static int holds_lock(const named_bs_t *b, int i)
{
    struct flock l = lock_byte(b, i, F_WRLCK);
    if (fcntl(b->fd, F_OFD_GETLK, &l))
        return 1; /* cannot tell: alive */
    return l.l_type != F_UNLCK;
}

/* The check of a wait for member i's round r: NUMACOLL_ERR_PEER_DEAD when i
 * joined and has died without posting r (looked at again after the death:
 * a member that posted and then ended is no failure), else 0. */
static int boot_check(named_bs_t *b, boot_wait_t *w, int i, const boot_slot_t *s, uint32_t r)
{
    /* acquire: pairs with member i's release of its pid, made after it took
     * its lock byte: a pid seen means the lock was taken */
    const int32_t pid = atomic_load_explicit(&slot(b, 0, i)->pid, memory_order_acquire);
    /* acquire: pairs with member i's release of seq (named_allgather) */
    if (pid && !holds_lock(b, i) && atomic_load_explicit(&s->seq, memory_order_acquire) != r) {
        nc_log_error("bootstrap %s: member %d (pid %d) died before the team formed", b->name, i,
                     (int)pid);
        return NUMACOLL_ERR_PEER_DEAD;
    }
    if (!w->said && nc_time_ns() - w->start > NC_BOOT_SAY_NS) {
        w->said = 1;
        if (pid)
            nc_log_warn_once(b->name,
                             "bootstrap %s: member %d of %d has waited %llu s for member %d (pid "
                             "%d, joined, alive: stopped or busy?); it gives up at %llu s",
                             b->name, b->pub.rank, b->pub.size, NC_BOOT_SAY_NS / 1000000000ull, i,
                             (int)pid, NC_BOOT_TIMEOUT_NS / 1000000000ull);
        else
            nc_log_warn_once(b->name,
                             "bootstrap %s: member %d of %d has waited %llu s for member %d, "
                             "which has not joined (not started, or started with another name "
                             "or size?); it gives up at %llu s",
                             b->name, b->pub.rank, b->pub.size, NC_BOOT_SAY_NS / 1000000000ull, i,
                             NC_BOOT_TIMEOUT_NS / 1000000000ull);
    }
    return 0;
}

static int named_allgather(void *ctx, const void *mine, void *all, size_t len)
{
    named_bs_t *b = ctx;
    if (len > NC_BOOT_SLOT)
        return NUMACOLL_ERR_INVAL;
    uint32_t r = ++b->round;
    unsigned parity = r & 1u;
    boot_slot_t *me = slot(b, parity, b->pub.rank);
    memcpy(me->data, mine, len);
    /* release: my data visible before my seq; pairs with the acquire below
     * and in boot_check(). */
    atomic_store_explicit(&me->seq, r, memory_order_release);
    boot_wait_t w;
    boot_wait_init(&w);
    for (int i = 0; i < b->pub.size; i++) {
        boot_slot_t *s = slot(b, parity, i);
        int rc;
        /* acquire: pairs with member i's release of seq above. */
        while (atomic_load_explicit(&s->seq, memory_order_acquire) != r) {
            if (!(rc = boot_wait(&w)))
                continue;
            if (rc < 0) {
                nc_log_error("bootstrap %s: member %d did not arrive within %llu s", b->name, i,
                             NC_BOOT_TIMEOUT_NS / 1000000000ull);
                boot_unname(b);
                return rc;
            }
            if ((rc = boot_check(b, &w, i, s, r)))
                return rc;
        }
        memcpy((char *)all + (size_t)i * len, s->data, len);
    }
    return 0;
}

NUMACOLL_API int numacoll_bootstrap_named(const char *name, int rank, int size,
                                          numacoll_bootstrap_t **out)
{
    if (!name || !*name || strchr(name, '/') || size < 1 || rank < 0 || rank >= size || !out) {
        nc_log_error("numacoll_bootstrap_named: need a name without '/', 0 <= rank < size");
        return NUMACOLL_ERR_INVAL;
    }
    named_bs_t *b = calloc(1, sizeof *b);
    if (!b)
        return NUMACOLL_ERR_NOMEM;
    b->pub.rank = rank;
    b->pub.size = size;
    b->pub.allgather = named_allgather;
    b->pub.ctx = b;
    snprintf(b->name, sizeof b->name, "/numacoll-boot-%s", name);
    b->bytes = nc_round_up(sizeof(boot_hdr_t), NC_CACHELINE) + 2 * (size_t)size * sizeof(boot_slot_t);

    snprintf(b->path, sizeof b->path, "/dev/shm%s", b->name);
    b->fd = -1;

    boot_wait_t w;
    boot_wait_init(&w);
    int fd = -1, rc = NUMACOLL_ERR_BOOTSTRAP;
retry:
    for (;; fd = -1) {
        if (boot_wait(&w) < 0) {
            nc_log_error("bootstrap %s: timed out joining the file", b->name);
            rc = NUMACOLL_ERR_TIMEOUT;
            goto fail;
        }
        /* J1. */
        fd = open(b->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st)) {
                nc_log_error("bootstrap %s: fstat: %s", b->name, strerror(errno));
                rc = NUMACOLL_ERR_SHM;
                goto fail_fd;
            }
            if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
                nc_log_error("bootstrap %s is not a 0600 file of user %u (owner %u, mode %04o): "
                             "refused",
                             b->name, (unsigned)geteuid(), (unsigned)st.st_uid,
                             (unsigned)(st.st_mode & 07777));
                rc = NUMACOLL_ERR_SHM;
                goto fail_fd;
            }
            if (!flock(fd, LOCK_EX | LOCK_NB)) {
                if (names_file(b->path, fd)) {
                    unlink(b->path);
                    nc_log_info(1, "bootstrap %s: removed the file its earlier members left "
                                "(they ended before the team formed)",
                                b->name);
                }
                close(fd);
                continue;
            }
            if (flock(fd, LOCK_SH) || !names_file(b->path, fd)) {
                close(fd); /* J1 of another member removed it: start over */
                continue;
            }
            if ((size_t)st.st_size != b->bytes) {
                nc_log_error("bootstrap %s exists with another size: a different team (of "
                             "another size) uses this name now",
                             b->name);
                rc = NUMACOLL_ERR_MISMATCH;
                goto fail_fd;
            }
            break;
        }
        if (errno != ENOENT) {
            nc_log_error("bootstrap %s: open: %s", b->name, strerror(errno));
            goto fail;
        }
        /* J2. */
        fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) {
            nc_log_error("bootstrap %s: cannot make a file in /dev/shm: %s", b->name,
                         strerror(errno));
            rc = NUMACOLL_ERR_SHM;
            goto fail;
        }
        char why[256];
        if (flock(fd, LOCK_SH) ||
            (rc = nc_shm_reserve(fd, 0, b->bytes, "the bootstrap file", why, sizeof why))) {
            nc_log_error_once("bootstrap %s: %s", b->name, rc ? why : strerror(errno));
            rc = rc ? rc : NUMACOLL_ERR_SHM;
            goto fail_fd;
        }
        rc = NUMACOLL_ERR_BOOTSTRAP;
        boot_hdr_t *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (h == MAP_FAILED) {
            nc_log_error("bootstrap %s: mmap: %s", b->name, strerror(errno));
            goto fail_fd;
        }
        h->p = (uint32_t)size;
        h->slot_bytes = NC_BOOT_SLOT;
        /* release: p and slot_bytes before ready; pairs with the acquire below
         * (the file is complete before it has a name, so this is belt and
         * braces) */
        atomic_store_explicit(&h->ready, NC_BOOT_MAGIC, memory_order_release);
        munmap(h, sizeof *h);
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        if (!linkat(AT_FDCWD, self, AT_FDCWD, b->path, AT_SYMLINK_FOLLOW))
            break;
        const int e = errno;
        close(fd);
        if (e != EEXIST) {
            nc_log_error("bootstrap %s: cannot name the file: %s", b->name, strerror(e));
            rc = NUMACOLL_ERR_SHM;
            goto fail;
        }
        /* another member named its file first: join that one (J1) */
    }
    b->hdr = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (b->hdr == MAP_FAILED) {
        nc_log_error("bootstrap %s: mmap: %s", b->name, strerror(errno));
        b->hdr = NULL;
        goto fail_fd;
    }
    b->fd = fd; /* kept open: my shared lock says I am alive */
    fd = -1;
    /* acquire: pairs with the creator's release of ready. */
    if (atomic_load_explicit(&b->hdr->ready, memory_order_acquire) != NC_BOOT_MAGIC ||
        b->hdr->p != (uint32_t)size || b->hdr->slot_bytes != NC_BOOT_SLOT) {
        nc_log_error("bootstrap %s: created for %u members, this one expects %d", b->name,
                     b->hdr->p, size);
        rc = NUMACOLL_ERR_MISMATCH;
        goto fail_map;
    }
    /* relaxed: only counts; the last member to join unlinks the name. A
     * member that opened the file just before that and finds it full is too
     * late for this team (whose slots it must not write): it takes the name
     * off, if still this file's, and starts over. */
    const uint32_t was = atomic_fetch_add_explicit(&b->hdr->joined, 1, memory_order_relaxed);
    if (was >= (uint32_t)size) {
        boot_unname(b);
        munmap(b->hdr, b->bytes);
        b->hdr = NULL;
        close(b->fd);
        b->fd = -1;
        goto retry;
    }
    struct flock l = lock_byte(b, rank, F_WRLCK);
    if (fcntl(b->fd, F_OFD_SETLK, &l))
        nc_log_info(1, "bootstrap %s: cannot lock member %d's byte (%s): its death is not "
                    "detected before the team forms", b->name, rank, strerror(errno));
    else
        /* release: my lock before my pid; pairs with the acquire in boot_check() */
        atomic_store_explicit(&slot(b, 0, rank)->pid, (int32_t)getpid(), memory_order_release);
    if (was + 1 == (uint32_t)size)
        unlink(b->path);
    /* Files of other names whose members all died (after the join: a stale
     * file of this name is step J1's, tested as such). */
    nc_shm_sweep();
    *out = &b->pub;
    return 0;

fail_map:
    munmap(b->hdr, b->bytes);
    close(b->fd);
    goto fail;
fail_fd:
    close(fd);
fail:
    free(b);
    return rc;
}

NUMACOLL_API void numacoll_bootstrap_named_free(numacoll_bootstrap_t *bs)
{
    if (!bs)
        return;
    named_bs_t *b = (named_bs_t *)bs;
    if (b->hdr)
        munmap(b->hdr, b->bytes);
    if (b->fd >= 0)
        close(b->fd);
    free(b);
}
