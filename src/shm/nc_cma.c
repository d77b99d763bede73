#include "shm/nc_cma.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/nc_common.h"

#define PROBE_PATTERN UINT64_C(0x6e756d61636f6c6c) /* "numacoll" */

/* [0]: the pattern the others read; [1]: the sink they write it into. */
static uint64_t probe_words[2] = {PROBE_PATTERN, 0};

static int yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static pthread_once_t allow_once = PTHREAD_ONCE_INIT;
void nc_cma_allow_now(void)
{
    if (yama_scope() == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0))
        nc_log_info(1, "prctl(PR_SET_PTRACER_ANY) failed (%s): CMA may be refused",
                    strerror(errno));
}

void nc_cma_allow(void)
{
    pthread_once(&allow_once, nc_cma_allow_now);
}

uint64_t nc_cma_probe_addr(void)
{
    return (uint64_t)(uintptr_t)probe_words;
}

static void explain(int err, int pid, int fake, char *why, size_t len)
{
    const int scope = yama_scope();
    if (fake)
        snprintf(why, len, "NUMACOLL_TEST_CMA_FAIL=1 made the probe fail");
    else if (err == ENOSYS)
        snprintf(why, len, "process_vm_readv is not available (ENOSYS: a kernel without "
                           "CONFIG_CROSS_MEMORY_ATTACH, or a seccomp filter)");
    else if (err == EPERM && scope >= 2)
        snprintf(why, len, "process_vm_readv of pid %d refused (EPERM): "
                           "kernel.yama.ptrace_scope=%d; allow it with "
                           "'sysctl -w kernel.yama.ptrace_scope=1' (numacoll then calls "
                           "prctl(PR_SET_PTRACER) itself)",
                 pid, scope);
    else if (err == EPERM)
        snprintf(why, len, "process_vm_readv of pid %d refused (EPERM): a seccomp filter (e.g. a "
                           "container's default profile: docker --cap-add SYS_PTRACE or "
                           "--security-opt seccomp=unconfined), different users or user "
                           "namespaces",
                 pid);
    else
        snprintf(why, len, "process_vm_readv of pid %d failed: %s", pid, strerror(err));
}

int nc_cma_probe(int pid, uint64_t addr, int fake, char *why, size_t whylen)
{
    uint64_t got = 0;
    struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)addr, sizeof got};
    int err = 0;
    errno = 0;
    if (fake)
        err = EPERM;
    else if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof got)
        err = errno ? errno : EIO;
    else if (got != PROBE_PATTERN)
        err = EIO; /* a different library build at that address: do not trust it */
    else {
        r.iov_base = (void *)(uintptr_t)(addr + sizeof got);
        errno = 0;
        if (process_vm_writev(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof got)
            err = errno ? errno : EIO;
    }
    if (err)
        explain(err, pid, fake, why, whylen);
    return err;
}

static int copy(int pid, char *local, uint64_t remote, size_t n, int write)
{
    while (n) {
        struct iovec l = {local, n}, r = {(void *)(uintptr_t)remote, n};
        ssize_t k = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (k > 0) {
            local += k;
            remote += (uint64_t)k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0) /* nothing copied and no error: the range ends in a hole */
            return NUMACOLL_ERR_FAULT;
        if (errno == EINTR)
            continue;
        if (errno == ESRCH)
            return NUMACOLL_ERR_PEER_DEAD;
        if (errno == EFAULT)
            return NUMACOLL_ERR_FAULT;
        nc_log_error("process_vm_%s of pid %d: %s", write ? "writev" : "readv", pid,
                     strerror(errno));
        return NUMACOLL_ERR_NOTSUP;
    }
    return 0;
}

/* 4K aliasing. The kernel copies with rep movsb; when the destination is a
 * few bytes past the source modulo 4 KiB, the core takes every load for one
 * that may depend on the store just before it and stalls. Measured here
 * (AMD EPYC guest, 512 KiB process_vm_readv from a page-aligned buffer):
 * 250-410 us with the destination 8, 16 or 24 bytes past, 63-86 us at 32,
 * 48, 96 ... 4064 bytes. Such a copy goes in two through a bounce buffer
 * placed 64 bytes past the local buffer's page offset, so that neither leg
 * is a few bytes ahead: 117-129 us for the same 512 KiB. The local leg is a
 * process_vm_readv/writev of this process, not a memcpy, so that a local
 * buffer that is not accessible is still NUMACOLL_ERR_FAULT, not a crash.
 * (memcpy has the same trouble: nc_copy() in common/nc_common.h.) */
#define ALIAS_PAGE ((uint64_t)4096)
#define ALIAS_BAND 64                /* (dst - src) mod 4 KiB in (0, 64): slow */
#define ALIAS_MIN ((size_t)16 << 10) /* below this the stall does not matter */
#define ALIAS_BOUNCE ((size_t)256 << 10)

static _Thread_local char *alias_bounce; /* ALIAS_BOUNCE + a page, per thread */
static pthread_key_t alias_key;           /* frees a thread's bounce when it exits */
static pthread_once_t alias_once = PTHREAD_ONCE_INIT;
static int alias_key_ok;
static void alias_key_make(void)
{
    alias_key_ok = !pthread_key_create(&alias_key, free);
}

/* The bounce position for a copy between local and remote, or NULL: a
 * direct copy is not slow (or there is no memory for a bounce). */
static char *aliased(uint64_t dst, uint64_t src, uint64_t local, size_t n)
{
    const uint64_t d = (dst - src) & (ALIAS_PAGE - 1);
    if (n < ALIAS_MIN || !d || d >= ALIAS_BAND)
        return NULL;
    if (!alias_bounce) {
        pthread_once(&alias_once, alias_key_make);
        if (!alias_key_ok || !(alias_bounce = aligned_alloc(ALIAS_PAGE, ALIAS_BOUNCE + ALIAS_PAGE)))
            return NULL;
        if (pthread_setspecific(alias_key, alias_bounce)) {
            free(alias_bounce);
            alias_bounce = NULL;
            return NULL;
        }
    }
    return alias_bounce + ((local + ALIAS_BAND) & (ALIAS_PAGE - 1));
}

/* n bytes between local and remote through the bounce at b, in pieces;
 * the local leg by CMA on this process. */
static int copy_bounced(int pid, char *local, uint64_t remote, size_t n, int write, char *b)
{
    const int self = (int)getpid();
    for (size_t off = 0; off < n; off += ALIAS_BOUNCE) {
        const size_t k = n - off < ALIAS_BOUNCE ? n - off : ALIAS_BOUNCE;
        int rc = write ? copy(self, b, (uint64_t)(uintptr_t)(local + off), k, 0)
                       : copy(pid, b, remote + off, k, 0);
        if (!rc)
            rc = write ? copy(pid, b, remote + off, k, 1)
                       : copy(self, local + off, (uint64_t)(uintptr_t)b, k, 0);
        if (rc)
            return rc;
    }
    return 0;
}

int nc_cma_read(int pid, void *local, uint64_t remote, size_t n)
{
    const uint64_t l = (uint64_t)(uintptr_t)local;
    char *b = aliased(l, remote, l, n);
    return b ? copy_bounced(pid, local, remote, n, 0, b) : copy(pid, local, remote, n, 0);
}

int nc_cma_write(int pid, uint64_t remote, const void *local, size_t n)
{
    const uint64_t l = (uint64_t)(uintptr_t)local;
    char *b = aliased(remote, l, l, n);
    return b ? copy_bounced(pid, (char *)local, remote, n, 1, b)
             : copy(pid, (char *)local, remote, n, 1);
}
