#include "guest_util.h"

#include "numacoll.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int g_rank = -1;

/* Shared with the forked members: the first failure message. */
typedef struct g_shared {
    _Atomic int taken;
    char msg[440];
} g_shared_t;
static g_shared_t *g_sh;

const char *g_first_failure(void)
{
    return g_sh && atomic_load(&g_sh->taken) == 2 ? g_sh->msg : "";
}

double g_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void g_fail_msg(const char *file, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_rank >= 0)
        printf("FAIL rank %d (%s:%d): %s\n", g_rank, file, line, msg);
    else
        printf("FAIL (%s:%d): %s\n", file, line, msg);
    fflush(stdout);
    int zero = 0;
    if (g_sh && atomic_compare_exchange_strong(&g_sh->taken, &zero, 1)) {
        if (g_rank >= 0)
            snprintf(g_sh->msg, sizeof g_sh->msg, "rank %d: %s", g_rank, msg);
        else
            snprintf(g_sh->msg, sizeof g_sh->msg, "%s", msg);
        atomic_store(&g_sh->taken, 2);
    }
}

/* "0-3,8,10-11" -> cpus; returns the count or -1. */
static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s)
            return -1;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s)
                return -1;
        }
        for (long c = a; c <= b; c++) {
            if (n >= max)
                return -1;
            out[n++] = (int)c;
        }
        s = end;
        if (*s == ',')
            s++;
    }
    return n;
}

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *r = fgets(buf, (int)len, f);
    fclose(f);
    return r ? 0 : -1;
}

int g_topo_read(g_topo_t *t)
{
    memset(t, 0, sizeof *t);
    for (int c = 0; c < G_MAX_CPUS; c++)
        t->cpu_node[c] = -1;
    char buf[4096];
    int ids[G_MAX_NODES];
    if (read_line("/sys/devices/system/node/online", buf, sizeof buf)) {
        printf("cannot read /sys/devices/system/node/online: %s\n", strerror(errno));
        return -1;
    }
    int n = parse_list(buf, ids, G_MAX_NODES);
    if (n <= 0)
        return -1;
    for (int k = 0; k < n; k++) {
        char path[128];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", ids[k]);
        if (read_line(path, buf, sizeof buf))
            return -1;
        int cpus[G_MAX_CPUS];
        int nc = parse_list(buf, cpus, G_MAX_CPUS);
        if (nc <= 0)
            continue; /* memory-only node */
        int i = t->nnodes++;
        t->node_id[i] = ids[k];
        for (int c = 0; c < nc; c++) {
            if (cpus[c] >= G_MAX_CPUS)
                return -1;
            if (c < 64)
                t->cpus[i][t->ncpus[i]++] = cpus[c];
            t->cpu_node[cpus[c]] = ids[k];
            if (cpus[c] + 1 > t->max_cpu)
                t->max_cpu = cpus[c] + 1;
        }
    }
    /* nodeN/distance: one value per online node, in the order of "online" */
    for (int i = 0; i < t->nnodes; i++) {
        char path[128];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/distance", t->node_id[i]);
        if (read_line(path, buf, sizeof buf))
            continue;
        int vals[G_MAX_NODES], nv = 0;
        for (char *s = buf, *end; nv < G_MAX_NODES; s = end) {
            long v = strtol(s, &end, 10);
            if (end == s)
                break;
            vals[nv++] = (int)v;
        }
        for (int j = 0; j < t->nnodes; j++)
            for (int k = 0; k < n && k < nv; k++)
                if (ids[k] == t->node_id[j])
                    t->dist[i][j] = vals[k];
    }
    return t->nnodes > 0 ? 0 : -1;
}

void g_topo_print(const g_topo_t *t)
{
    printf("/sys: %d NUMA node(s) with CPUs:", t->nnodes);
    for (int i = 0; i < t->nnodes; i++) {
        printf(" node%d={", t->node_id[i]);
        for (int c = 0; c < t->ncpus[i]; c++)
            printf("%s%d", c ? "," : "", t->cpus[i][c]);
        printf("}");
    }
    printf("; distances:");
    for (int i = 0; i < t->nnodes; i++)
        for (int j = 0; j < t->nnodes; j++)
            printf("%s%d", j ? " " : i ? " | " : " ", t->dist[i][j]);
    printf("\n");
}

int g_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu >= 0)
        CPU_SET(cpu, &set);
    else
        for (int c = 0; c < CPU_SETSIZE && c < G_MAX_CPUS; c++)
            CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof set, &set)) {
        if (cpu < 0 && errno == EINVAL)
            return 0;
        printf("sched_setaffinity(cpu %d): %s\n", cpu, strerror(errno));
        return -1;
    }
    return 0;
}

int g_fork_run(int p, int timeout_s, g_body_fn body, void *arg)
{
    static unsigned calls;
    char name[64];
    snprintf(name, sizeof name, "guest-%d-%u", (int)getpid(), calls++);
    pid_t *pids = calloc((size_t)p, sizeof *pids);
    if (!pids)
        return 1;
    if (!g_sh) {
        void *m = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        g_sh = m == MAP_FAILED ? NULL : m;
    }
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < p; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            g_fail_msg(__FILE__, __LINE__, "fork: %s", strerror(errno));
            for (int k = 0; k < r; k++)
                kill(pids[k], SIGKILL);
            free(pids);
            return 1;
        }
        if (pid == 0) {
            g_rank = r;
            int rc = body(r, p, name, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc ? 1 : 0);
        }
        pids[r] = pid;
    }
    int bad = 0, left = p;
    double deadline = g_now() + timeout_s;
    while (left > 0) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w < 0)
            break;
        if (w == 0) {
            if (g_now() > deadline) {
                g_fail_msg(__FILE__, __LINE__,
                           "%d of %d members still running after %d s (hang); killing them", left,
                           p, timeout_s);
                for (int k = 0; k < p; k++)
                    if (pids[k] > 0)
                        kill(pids[k], SIGKILL);
                bad = 1;
                timeout_s = 1 << 20; /* reap the killed ones */
            }
            usleep(2000);
            continue;
        }
        for (int k = 0; k < p; k++)
            if (pids[k] == w) {
                if (WIFSIGNALED(st)) {
                    if (WTERMSIG(st) != SIGKILL || !bad)
                        g_fail_msg(__FILE__, __LINE__, "member %d died of signal %d", k,
                                   WTERMSIG(st));
                    bad = 1;
                } else if (WEXITSTATUS(st)) {
                    bad = 1; /* it printed why */
                }
                pids[k] = -1;
                left--;
            }
    }
    fflush(stdout);
    free(pids);
    return bad;
}

int g_query_pages(const void *base, size_t off, size_t bytes, size_t page, int expect,
                  g_pages_t *out)
{
    memset(out, 0, sizeof *out);
    out->first_status = expect;
    size_t n = bytes / page;
    if (!n)
        return 0;
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    if (!pages || !status) {
        free(pages);
        free(status);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        pages[i] = (char *)base + off + i * page;
    /* move_pages(pid 0, n, pages, nodes NULL: query only, status, flags 0) */
    long rc = syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0);
    if (rc) {
        g_fail_msg(__FILE__, __LINE__, "move_pages: %s", strerror(errno));
        free(pages);
        free(status);
        return -1;
    }
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        out->pages++;
        if (status[i] == expect) {
            out->on_node++;
            continue;
        }
        if (status[i] >= 0)
            out->elsewhere++;
        else if (status[i] == -ENOENT)
            out->unmapped++;
        else
            out->errors++;
        if (first) {
            first = 0;
            out->first_off = off + i * page;
            out->first_status = status[i];
        }
    }
    free(pages);
    free(status);
    return 0;
}

int g_preload_numacoll(void)
{
    numacoll_bootstrap_t *bs;
    numacoll_team_t *t;
    char name[64];
    snprintf(name, sizeof name, "guest-preload-%d", (int)getpid());
    int rc = numacoll_bootstrap_named(name, 0, 1, &bs);
    if (rc)
        return rc;
    rc = numacoll_team_create(bs, &t);
    if (!rc)
        numacoll_team_destroy(t);
    numacoll_bootstrap_named_free(bs);
    return rc;
}

int g_rr_cpu(const g_topo_t *t, int i)
{
    int k = i % t->nnodes;
    return t->cpus[k][(i / t->nnodes) % t->ncpus[k]];
}

double g_numa_ratio(const g_topo_t *t)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < t->nnodes; i++)
        for (int j = 0; j < t->nnodes; j++)
            if (i != j && t->dist[i][i] > 0) {
                sum += (double)t->dist[i][j] / t->dist[i][i];
                n++;
            }
    return n ? sum / n : 2.0;
}

int g_numa_forward_expected(const g_topo_t *t, int mates)
{
    const char *e = getenv("NUMACOLL_NUMA_FORWARD");
    if (t->nnodes < 2 || mates < 1 || (e && !strcmp(e, "off")))
        return 0;
    return (e && !strcmp(e, "on")) || mates * (g_numa_ratio(t) - 1.0) > 1.0;
}
