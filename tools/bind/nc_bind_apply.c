/*
 * numacoll-bind: bind this process, set its memory policy, export the OpenMP
 * placement, and report what the kernel says afterwards.
 */
#include "nc_bind.h"

#include <dirent.h>
#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#ifndef MPOL_F_STATIC_NODES /* <linux/mempolicy.h> mode flags */
#define MPOL_F_STATIC_NODES (1 << 15)
#define MPOL_F_RELATIVE_NODES (1 << 14)
#endif

/* Bits of get_mempolicy's node mask we read (nodes 0..1023). */
#define NC_BIND_MAXNODE 1024

static int nc_bind_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int nc_bind_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/*
 * 1. CPUs: the plan's cpuset (policy none: every allowed PU, undoing any binding
 *    the launcher made).
 * 2. memory: bind -> MPOL_BIND on the rank's nodes; prefer -> MPOL_PREFERRED on the
 *    first of them; none -> left as inherited. Both survive execve().
 * 3. OpenMP: OMP_NUM_THREADS/OMP_PLACES/OMP_PROC_BIND when --threads was given.
 */
int nc_bind_apply(hwloc_topology_t topo, const struct nc_bind_opts *o,
                  const struct nc_bind_rank *r, char *err, size_t errlen)
{
    /* 1. */
    if (hwloc_set_cpubind(topo, r->cpuset, HWLOC_CPUBIND_PROCESS)) {
        char s[512];
        hwloc_bitmap_list_snprintf(s, sizeof(s), r->cpuset);
        return nc_bind_fail(err, errlen, "cannot bind to PUs %s: %s", s, strerror(errno));
    }
    /* 2. */
    if (o->mem != NC_BIND_MEM_NONE) {
        hwloc_nodeset_t ns = hwloc_bitmap_dup(r->nodeset);
        int flags = HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_THREAD;
        if (o->mem == NC_BIND_MEM_PREFER)
            hwloc_bitmap_only(ns, (unsigned)hwloc_bitmap_first(r->nodeset));
        else
            flags |= HWLOC_MEMBIND_STRICT; /* hwloc: strict BIND is MPOL_BIND */
        /* hwloc maps a non-strict BIND to MPOL_PREFERRED on Linux. */
        int rc = hwloc_set_membind(topo, ns, HWLOC_MEMBIND_BIND, flags);
        int e = errno;
        char s[256];
        hwloc_bitmap_list_snprintf(s, sizeof(s), ns);
        hwloc_bitmap_free(ns);
        if (rc)
            return nc_bind_fail(err, errlen, "cannot set memory policy %s on NUMA %s: %s",
                                nc_bind_mem_name(o->mem), s, strerror(e));
    }
    /* 3. */
    if (o->threads) {
        char places[8192], n[16];
        const char *pb;
        if (nc_bind_omp_env(topo, r->cpuset, o->threads, places, sizeof(places), &pb))
            return nc_bind_fail(err, errlen, "OMP_PLACES for this rank is too long");
        snprintf(n, sizeof(n), "%d", o->threads);
        setenv("OMP_NUM_THREADS", n, 1);
        setenv("OMP_PLACES", places, 1);
        setenv("OMP_PROC_BIND", pb, 1);
    }
    return 0;
}

/* Kernel memory policy of the calling thread as "memory bind NUMA 1". */
static void nc_bind_kernel_mem(hwloc_topology_t topo, int logical, char *buf, size_t len)
{
    unsigned long mask[NC_BIND_MAXNODE / (8 * sizeof(unsigned long))];
    int mode = 0;
    memset(mask, 0, sizeof(mask));
    if (get_mempolicy(&mode, mask, NC_BIND_MAXNODE, NULL, 0)) {
        snprintf(buf, len, "memory unknown (%s)", strerror(errno));
        return;
    }
    mode &= ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | (1 << 13) /* MPOL_F_NUMA_BALANCING */);
    const char *name;
    switch (mode) {
    case MPOL_DEFAULT: snprintf(buf, len, "memory default"); return;
    case MPOL_LOCAL: snprintf(buf, len, "memory local"); return;
    case MPOL_BIND: name = "bind"; break;
    case MPOL_PREFERRED: name = "prefer"; break;
    case MPOL_INTERLEAVE: name = "interleave"; break;
#ifdef MPOL_PREFERRED_MANY
    case MPOL_PREFERRED_MANY: name = "prefer"; break; /* what hwloc uses on kernels >= 5.15 */
#endif
    default: name = "other"; break;
    }
    hwloc_nodeset_t ns = hwloc_bitmap_alloc();
    for (unsigned i = 0; i < NC_BIND_MAXNODE; i++)
        if (mask[i / (8 * sizeof(unsigned long))] & (1UL << (i % (8 * sizeof(unsigned long)))))
            hwloc_bitmap_set(ns, i);
    char nodes[256];
    nc_bind_format_nodes(topo, ns, logical, nodes, sizeof(nodes));
    hwloc_bitmap_free(ns);
    snprintf(buf, len, "memory %s NUMA %s", name, nodes);
}

/* Affinity of task `tid` (0: self) as an hwloc cpuset. */
static int nc_bind_kernel_affinity(pid_t tid, hwloc_cpuset_t set)
{
    cpu_set_t *cs = CPU_ALLOC(8192);
    size_t sz = CPU_ALLOC_SIZE(8192);
    if (!cs)
        return -1;
    CPU_ZERO_S(sz, cs);
    if (sched_getaffinity(tid, sz, cs)) {
        CPU_FREE(cs);
        return -1;
    }
    hwloc_bitmap_zero(set);
    for (int i = 0; i < 8192; i++)
        if (CPU_ISSET_S(i, sz, cs))
            hwloc_bitmap_set(set, (unsigned)i);
    CPU_FREE(cs);
    return 0;
}

/* "rank 3 -> NUMA 1, cores 8-9, PUs 16-19, memory bind NUMA 1", from the kernel. */
int nc_bind_report_self(hwloc_topology_t topo, int local_rank, int logical, char *buf, size_t len)
{
    char where[1024], mem[300];
    hwloc_cpuset_t set = hwloc_bitmap_alloc();
    if (nc_bind_kernel_affinity(0, set))
        snprintf(where, sizeof(where), "affinity unknown (%s)", strerror(errno));
    else
        nc_bind_format_where(topo, set, logical, where, sizeof(where));
    hwloc_bitmap_free(set);
    nc_bind_kernel_mem(topo, logical, mem, sizeof(mem));
    return snprintf(buf, len, "rank %d -> %s, %s\n", local_rank, where, mem);
}

static void nc_bind_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Field 22 (starttime) of /proc/<pid>/stat, or 0. */
static unsigned long long nc_bind_starttime(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may hold blanks */
    unsigned long long v = 0;
    if (!p)
        return 0;
    /* after ')': state is field 3; starttime is field 22 */
    for (int field = 2; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (p)
        v = strtoull(p + 1, NULL, 10);
    return v;
}

/* Field 39 (processor last run on) of /proc/<pid>/task/<tid>/stat, or -1. */
static int nc_bind_last_cpu(pid_t pid, pid_t tid)
{
    char path[96], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    for (int field = 2; field < 39 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? atoi(p + 1) : -1;
}

static int nc_bind_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Thread ids of pid, sorted; returns the count (at most max). */
static int nc_bind_list_tasks(pid_t pid, int *tids, int max)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL && n < max)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            tids[n++] = atoi(e->d_name);
    closedir(d);
    qsort(tids, (size_t)n, sizeof(int), nc_bind_cmp_int);
    return n;
}

/*
 * --report for threads. The program's threads exist only after exec, so a detached
 * watcher (double fork: no zombie left to the program) polls /proc/<pid>/task:
 *  1. wait until the program (new starttime... same pid, exec'ed) has `threads`
 *     tasks, or wait_ms has passed, or it has exited (then say nothing);
 *  2. let the runtime settle 100 ms (OpenMP binds its threads as it creates them);
 *  3. print one line per thread: its sched_getaffinity mask and the PU it last ran
 *     on, all lines in one write() so ranks do not interleave mid-line.
 * The watcher holds stdout until it exits, which is at most wait_ms + 100 ms.
 */
void nc_bind_report_threads_spawn(hwloc_topology_t topo, int local_rank, int logical,
                                  int threads, int wait_ms)
{
    pid_t target = getpid();
    unsigned long long t0 = nc_bind_starttime(target);
    fflush(NULL);
    pid_t c = fork();
    if (c < 0)
        return;
    if (c > 0) {
        waitpid(c, NULL, 0);
        return;
    }
    if (fork() != 0)
        _exit(0);
    /* grandchild */
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, 0);
        close(devnull);
    }
    int tids[4096], n = 0, waited = 0;
    for (;;) {
        if (nc_bind_starttime(target) != t0)
            _exit(0); /* gone (or pid reused) */
        n = nc_bind_list_tasks(target, tids, 4096);
        if (n < 0)
            _exit(0);
        if (n >= threads || waited >= wait_ms)
            break;
        nc_bind_sleep_ms(5);
        waited += 5;
    }
    nc_bind_sleep_ms(100);
    if (nc_bind_starttime(target) != t0)
        _exit(0);
    n = nc_bind_list_tasks(target, tids, 4096);
    if (n < 0)
        _exit(0);
    size_t cap = 256 + (size_t)n * 1400, off = 0;
    char *out = malloc(cap);
    if (!out)
        _exit(0);
    hwloc_cpuset_t set = hwloc_bitmap_alloc();
    if (n < threads)
        off += (size_t)snprintf(out + off, cap - off,
                                "rank %d: %d of %d threads after %d ms\n", local_rank, n, threads, wait_ms);
    for (int i = 0; i < n; i++) {
        char where[1024];
        if (nc_bind_kernel_affinity(tids[i], set))
            continue; /* exited meanwhile */
        nc_bind_format_where(topo, set, logical, where, sizeof(where));
        int cpu = nc_bind_last_cpu(target, tids[i]);
        unsigned shown = (unsigned)cpu;
        if (logical && cpu >= 0) {
            hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, (unsigned)cpu);
            shown = pu ? pu->logical_index : (unsigned)cpu;
        }
        off += (size_t)snprintf(out + off, cap - off, "rank %d thread %d (tid %d) -> %s, last ran on PU %u\n",
                                local_rank, i, tids[i], where, shown);
    }
    if (write(1, out, off) < 0)
        _exit(1);
    _exit(0);
}
