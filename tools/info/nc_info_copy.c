/*
 * numacoll-info: which copy mechanisms the kernel allows here. CMA
 * (process_vm_readv) is tried for real, parent -> child and between two
 * siblings (MPI ranks are siblings: children of one launcher daemon), the
 * child being read having done what a team member does (nc_cma_allow); then
 * the usual reasons it is refused are shown: Yama ptrace scope, seccomp,
 * CAP_SYS_PTRACE, user namespaces.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/nc_team.h"
#include "topo/nc_topo.h"
#include "model/nc_model.h"
#include "shm/nc_cma.h"
#include "shm/nc_shm.h"
#include "nc_info.h"

static char pattern[4096];

/* Read `pattern` of process pid; 0 or errno. */
static int cma_read(pid_t pid)
{
    char buf[sizeof pattern];
    struct iovec l = {buf, sizeof buf}, r = {pattern, sizeof pattern};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0)
        return errno;
    return (size_t)n == sizeof buf && !memcmp(buf, pattern, sizeof buf) ? 0 : EIO;
}

/* A child that keeps `pattern` until its pipe closes. */
static pid_t holder(int *wfd)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        nc_cma_allow_now(); /* as a team member does (prctl under Yama scope 1) */
        char c;
        alarm(30);
        while (read(fds[0], &c, 1) > 0) {
        }
        _exit(0);
    }
    close(fds[0]);
    *wfd = fds[1];
    return pid;
}

static void reap(pid_t pid, int wfd)
{
    close(wfd);
    waitpid(pid, NULL, 0);
}

static const char *verdict(int err, char *buf, size_t len)
{
    if (!err)
        snprintf(buf, len, "permitted");
    else
        snprintf(buf, len, "refused (%s)", strerror(err));
    return buf;
}

static void file_line(const char *path, const char *key, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    snprintf(buf, len, "absent");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!key) {
            snprintf(buf, len, "%.*s", (int)(len - 1), line);
            break;
        }
        size_t k = strlen(key);
        if (!strncmp(line, key, k) && line[k] == ':') {
            const char *v = line + k + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(buf, len, "%.*s", (int)(len - 1), v);
            break;
        }
    }
    fclose(f);
}

static void fmt_size(size_t n, char *buf, size_t len)
{
    if (n == SIZE_MAX || n >= (size_t)1 << 50) /* 2^50: a tunable's "never" */
        snprintf(buf, len, "never");
    else
        nc_shm_fmt_bytes(n, buf, len);
}

/* When NUMACOLL_TRANSPORT or a switch-point tunable (min, its value) sets the
 * choice, say so after `what` and return 1; 0 when the model decides. */
static int print_override(FILE *out, const nc_config_t *cfg, int param, const char *what)
{
    const long long min = cfg->v[param].num;
    if (NC_CFG_NUM(cfg, TRANSPORT) == NC_TRANSPORT_AUTO && !min)
        return 0;
    char b[96], n[32];
    fmt_size((size_t)min, n, sizeof n);
    snprintf(b, sizeof b, "NUMACOLL_%s = %s", nc_param_desc(param)->name, n);
    fprintf(out, "%sswitch point: set by %s\n", what,
            NC_CFG_NUM(cfg, TRANSPORT) == NC_TRANSPORT_SHM   ? "NUMACOLL_TRANSPORT=shm (never)"
            : NC_CFG_NUM(cfg, TRANSPORT) == NC_TRANSPORT_CMA ? "NUMACOLL_TRANSPORT=cma (always)"
                                                             : b);
    return 1;
}

/* One kind of exchange's switch points for p = 2, 3, 4, 8, ... up to np and
 * for twice the cores; kind < 0: the broadcast's. */
static void print_points(FILE *out, const nc_xfer_model_t *x, int kind, int np, int cores,
                         int coop, size_t inl)
{
    int shown = 0;
    char b[32];
    for (int p = 2;; p = p < 4 ? p + 1 : 2 * p) {
        const int last = !(p <= np || p <= 2), q = last ? 2 * cores : p;
        fmt_size(kind < 0 ? nc_cma_switch_point(x, q, cores, coop, inl)
                          : nc_xg_switch_point(x, kind, q, cores, coop, inl),
                 b, sizeof b);
        if (last) {
            fprintf(out, "; oversubscribed p=%d: %s\n", q, b);
            return;
        }
        fprintf(out, "%s p=%d: %s", shown++ ? "," : "", q, b);
    }
}

/* What the library does with the verdict: the transport, the cost model and
 * the switch points it implies (model/nc_model.h), for broadcasts and for
 * each kind of gather-family exchange. */
static void print_choice(FILE *out, const nc_config_t *cfg, int np, int cores, int cma_ok)
{
    nc_xfer_model_t x;
    nc_team_cost_model(cfg, &x);
    const int coop = (int)NC_CFG_NUM(cfg, CMA_COOP);
    fprintf(out, "numacoll's large broadcasts: NUMACOLL_TRANSPORT=%s, NUMACOLL_CMA_COOP=%d%s\n",
            cfg->v[NC_P_TRANSPORT].text, coop,
            cma_ok ? "" : " (CMA refused here: every team copies through the segment)");
    fprintf(out, "cost model (NUMACOLL_COST_*): segment %.2f us + %.0f ps/byte per member copy; "
                 "CMA %.2f us + %.0f ps/byte per copy\n",
            x.shm_lat * 1e6, x.shm_byte * 1e12, x.cma_lat * 1e6, x.cma_byte * 1e12);
    if (!print_override(out, cfg, NC_P_GATHER_CMA_MIN, "gather family, ")) {
        for (int k = 0; k < NC_XG_KINDS; k++) {
            fprintf(out, "gather family, %s: CMA for blocks from (model), a team of p on %d CPUs:",
                    nc_xg_kind_name[k], cores);
            print_points(out, &x, k, np, cores, coop, (size_t)NC_CFG_NUM(cfg, GATHER_INLINE_MAX));
        }
    }
    if (!print_override(out, cfg, NC_P_CMA_MIN, "")) {
        fprintf(out, "switch point to CMA (model), a team of p on %d CPUs:", cores);
        print_points(out, &x, -1, np, cores, coop, (size_t)NC_CFG_NUM(cfg, BCAST_INLINE_MAX));
    }
    if (!NC_CFG_NUM(cfg, GATHER_CMA_MIN) && cma_ok &&
        NC_CFG_NUM(cfg, TRANSPORT) == NC_TRANSPORT_AUTO)
        fprintf(out, "except: a team of 2 on one NUMA node whose members do not share a cache "
                     "(below) streams allgathers and alltoalls through the segment at every "
                     "size instead of the model's CMA (docs/transport.md)\n");
    /* Reductions: no model; the tunables (numacoll-tune measures them) or the rule */
    if (!print_override(out, cfg, NC_P_REDUCE_CMA_MIN, "reduce, "))
        fprintf(out, "reduce, switch point: from %zu KiB at p >= 3 when a team's members do "
                     "not all share a cache (below) on one NUMA node, else never; at p = 2 "
                     "never (whole rounds through the slots) (NUMACOLL_REDUCE_CMA_MIN=0; "
                     "docs/reduce.md)\n",
                nc_reduce_cma_auto(3) >> 10);
    if (!print_override(out, cfg, NC_P_ALLREDUCE_CMA_MIN, "allreduce, "))
        fprintf(out, "allreduce, switch point: never (NUMACOLL_ALLREDUCE_CMA_MIN=0; "
                     "docs/reduce.md)\n");
    /* Whose caches a team goes by (core/nc_team.c, step 5) */
    nc_topo_t *topo = NULL;
    const char *why = "no topology";
    const int from = nc_topo_load(&topo) ? NC_TOPO_CACHES_NONE : nc_topo_caches_from(topo, &why);
    const int64_t probe = NC_CFG_NUM(cfg, CACHE_PROBE);
    /* the teams' rule (core/nc_team.c); no topology: every team's caches unknown */
    const int measured = probe == NC_CACHE_PROBE_ON ||
                         (probe == NC_CACHE_PROBE_AUTO &&
                          nc_topo_caches_measure(from, from == NC_TOPO_CACHES_NONE));
    fprintf(out, "caches (streamed stores, the reduce's rule): %s; NUMACOLL_CACHE_PROBE=%s: %s",
            why, cfg->v[NC_P_CACHE_PROBE].text,
            measured ? "teams measure them (neighbours' one-way hand-off"
            : probe == NC_CACHE_PROBE_AUTO && from == NC_TOPO_CACHES_MACHINE
                ? "hwloc's (teams measure where no cache of hwloc's covers their CPUs)"
                : "hwloc's");
    if (measured)
        fprintf(out, " below %lld ns: shared; auto: not with more members than CPUs)",
                (long long)NC_CFG_NUM(cfg, CACHE_SHARED_NS));
    fprintf(out, "\n");
    nc_topo_free(topo);
}

void nc_info_print_copy(FILE *out, const nc_config_t *cfg, int np, int cores)
{
    char a[128], b[128];
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = (char)(i * 31 + 7);
    fflush(NULL);

    /* 1. parent reads child */
    int wfd, e1 = ENOSYS, e2 = ENOSYS;
    pid_t h = holder(&wfd);
    if (h > 0) {
        e1 = cma_read(h);
        /* 2. a sibling reads the holder: what two MPI ranks do */
        int fds[2];
        if (!pipe(fds)) {
            pid_t r = fork();
            if (r == 0) {
                int e = cma_read(h);
                if (write(fds[1], &e, sizeof e) < 0)
                    _exit(1);
                _exit(0);
            }
            close(fds[1]);
            if (r < 0 || read(fds[0], &e2, sizeof e2) != sizeof e2)
                e2 = ECHILD;
            close(fds[0]);
            if (r > 0)
                waitpid(r, NULL, 0);
        }
        reap(h, wfd);
    }
    fprintf(out, "== Copy mechanisms\n");
    fprintf(out, "CMA process_vm_readv, parent -> child:   %s\n", verdict(e1, a, sizeof a));
    fprintf(out, "CMA process_vm_readv, sibling -> sibling: %s (this is what MPI ranks need)\n",
            verdict(e2, b, sizeof b));

    char v[256];
    file_line("/proc/sys/kernel/yama/ptrace_scope", NULL, v, sizeof v);
    const char *why = "";
    if (!strcmp(v, "absent"))
        why = "Yama LSM not active: ptrace rules are the classic ones";
    else if (!strcmp(v, "0"))
        why = "classic: same uid suffices";
    else if (!strcmp(v, "1"))
        why = "restricted: only descendants (siblings need prctl(PR_SET_PTRACER))";
    else if (!strcmp(v, "2"))
        why = "admin only: CAP_SYS_PTRACE needed";
    else if (!strcmp(v, "3"))
        why = "no attach at all";
    fprintf(out, "/proc/sys/kernel/yama/ptrace_scope: %s (%s)\n", v, why);

    char sc[64], scf[64], nnp[64], cap[64];
    file_line("/proc/self/status", "Seccomp", sc, sizeof sc);
    file_line("/proc/self/status", "Seccomp_filters", scf, sizeof scf);
    file_line("/proc/self/status", "NoNewPrivs", nnp, sizeof nnp);
    file_line("/proc/self/status", "CapEff", cap, sizeof cap);
    fprintf(out, "seccomp: %s (%s), filters: %s, NoNewPrivs: %s%s\n", sc,
            !strcmp(sc, "0") ? "off" : !strcmp(sc, "1") ? "strict" : !strcmp(sc, "2") ? "filter" : "?",
            scf, nnp,
            !strcmp(sc, "2") ? " (a filter may return EPERM for process_vm_readv, as old Docker "
                               "profiles do)"
                             : "");
    unsigned long long capv = strtoull(cap, NULL, 16);
    fprintf(out, "CAP_SYS_PTRACE in the effective set: %s\n", (capv >> 19) & 1 ? "yes" : "no");

    char uidmap[128];
    file_line("/proc/self/uid_map", NULL, uidmap, sizeof uidmap);
    char norm[128];
    size_t n = 0;
    for (const char *c = uidmap; *c && n + 1 < sizeof norm; c++)
        if (*c != ' ' || (n && norm[n - 1] != ' '))
            norm[n++] = *c;
    norm[n] = '\0';
    int initial = !strcmp(norm, "0 0 4294967295");
    fprintf(out, "user namespace: %s (uid_map \"%s\")%s\n", initial ? "initial" : "nested", norm,
            initial ? ""
                    : ": CMA works only between processes of the same namespace, e.g. not "
                      "between ranks started in different containers");
    char userns[64];
    file_line("/proc/sys/user/max_user_namespaces", NULL, userns, sizeof userns);
    fprintf(out, "max_user_namespaces: %s\n", userns);
    fprintf(out, "KNEM (/dev/knem): %s; XPMEM (/dev/xpmem): %s\n",
            access("/dev/knem", F_OK) ? "absent" : "present",
            access("/dev/xpmem", F_OK) ? "absent" : "present");
    fprintf(out, "numacoll itself needs only POSIX shared memory (/dev/shm): %s\n",
            access("/dev/shm", W_OK) ? "NOT writable" : "writable");
    print_choice(out, cfg, np, cores, !e2);
    fprintf(out, "\n");
}
