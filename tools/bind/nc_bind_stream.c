/*
 * numacoll-bind --stream: a STREAM-like bandwidth check (copy, scale, add, triad)
 * run by every local rank at once, without MPI.
 *
 * Rendezvous: the local ranks of one job share a POSIX shm segment named after
 * their common parent (the launcher's per-node daemon: mpirun/orted, Hydra's
 * proxy, slurmstepd) and its start time, or after NUMACOLL_BIND_JOBID if set.
 *
 *   +---------------------------+  offset 0
 *   | struct nc_bind_rdv        |  counters: every rank writes (atomics)
 *   +---------------------------+  sizeof(struct nc_bind_rdv)
 *   | double time[size][ntimes][4][2] | start/end per kernel: rank r writes its row
 *   +---------------------------+
 *   | char where[size][1024]     |  rank r writes its placement line, rank 0 reads
 *   +---------------------------+
 *
 * Every rank creates-or-opens it and ftruncate()s it to the same size (zero-filled);
 * local rank 0 unlinks the name after the first barrier, when all have attached.
 */
#include "nc_bind.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NC_BIND_RDV_TIMEOUT_S 60
#define NC_BIND_WHERE_LEN 1024
#define NC_BIND_NKERNELS 4

struct nc_bind_rdv {
    _Atomic uint32_t arrived;    /* ranks in the current barrier episode */
    _Atomic uint32_t generation; /* bumped by the last arriver */
    _Atomic uint32_t failed;     /* a rank gave up: barriers abort */
    _Atomic uint32_t invalid;    /* a rank's results did not validate */
};

struct nc_bind_stream {
    struct nc_bind_rdv *rdv;
    double *time;
    char *where;
    size_t len;
    int rank, size, ntimes;
};

static double nc_bind_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * Centralised barrier:
 *  1. read the generation, then count ourselves in;
 *  2. the last arriver resets the count and bumps the generation;
 *  3. the others wait for the bump (spin, then yield: ranks may share a CPU).
 */
static int nc_bind_barrier(struct nc_bind_stream *s)
{
    if (s->size == 1)
        return 0;
    /* 1. acquire: pairs with the release bump in step 2 of the previous episode */
    uint32_t gen = atomic_load_explicit(&s->rdv->generation, memory_order_acquire);
    uint32_t n = atomic_fetch_add_explicit(&s->rdv->arrived, 1, memory_order_acq_rel) + 1;
    if (n == (uint32_t)s->size) {
        /* 2. the count is reset before the bump publishes it; release: our
         * time/where rows visible before the bump; pairs with the acquire in 3. */
        atomic_store_explicit(&s->rdv->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&s->rdv->generation, gen + 1, memory_order_release);
        return 0;
    }
    double deadline = nc_bind_now() + NC_BIND_RDV_TIMEOUT_S;
    for (unsigned spin = 0;; spin++) {
        /* 3. acquire: pairs with the release in step 2 */
        if (atomic_load_explicit(&s->rdv->generation, memory_order_acquire) != gen)
            return 0;
        if (atomic_load_explicit(&s->rdv->failed, memory_order_relaxed))
            return -1;
        if (spin > 1000) {
            sched_yield();
            if ((spin & 1023) == 0 && nc_bind_now() > deadline) {
                atomic_store_explicit(&s->rdv->failed, 1, memory_order_relaxed);
                return -1;
            }
        }
    }
}

static int nc_bind_stream_attach(struct nc_bind_stream *s, int rank, int size, int ntimes)
{
    char name[128];
    const char *job = getenv("NUMACOLL_BIND_JOBID");
    s->rank = rank;
    s->size = size;
    s->ntimes = ntimes;
    s->len = sizeof(struct nc_bind_rdv) + sizeof(double) * (size_t)size * (size_t)ntimes * NC_BIND_NKERNELS * 2 +
             (size_t)size * NC_BIND_WHERE_LEN;
    if (size == 1) {
        s->rdv = calloc(1, s->len);
        if (!s->rdv)
            return -1;
    } else {
        if (job) {
            snprintf(name, sizeof(name), "/numacoll-bind-%u-%s", (unsigned)getuid(), job);
            for (char *p = name + 1; *p; p++)
                if (*p == '/')
                    *p = '_';
        } else {
            char path[64], buf[1024];
            unsigned long long start = 0;
            snprintf(path, sizeof(path), "/proc/%d/stat", (int)getppid());
            FILE *f = fopen(path, "r");
            if (f) {
                size_t n = fread(buf, 1, sizeof(buf) - 1, f);
                buf[n] = '\0';
                fclose(f);
                char *p = strrchr(buf, ')');
                for (int field = 2; field < 22 && p; field++)
                    p = strchr(p + 1, ' ');
                if (p)
                    start = strtoull(p + 1, NULL, 10);
            }
            /* named like numacoll's segments after the process they belong
             * to (here the launcher's on this node), so that a file a killed
             * run leaves is removed by numacoll's sweep of dead processes'
             * files (nc_shm_sweep()) */
            snprintf(name, sizeof(name), "/numacoll-%u-%d-bind-%llu", (unsigned)getuid(),
                     (int)getppid(), start);
        }
        int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
        if (fd < 0) {
            fprintf(stderr, "numacoll-bind: stream: shm_open %s: %s\n", name, strerror(errno));
            return -1;
        }
        if (ftruncate(fd, (off_t)s->len)) {
            fprintf(stderr, "numacoll-bind: stream: ftruncate: %s\n", strerror(errno));
            close(fd);
            return -1;
        }
        void *m = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            fprintf(stderr, "numacoll-bind: stream: mmap: %s\n", strerror(errno));
            return -1;
        }
        s->rdv = m;
        if (nc_bind_barrier(s)) {
            shm_unlink(name); /* every rank that gives up: the file serves no one */
            fprintf(stderr, "numacoll-bind: stream: local rank %d: the other %d local ranks did not "
                    "arrive within %d s (do all run numacoll-bind --stream under one launcher?)\n",
                    rank, size - 1, NC_BIND_RDV_TIMEOUT_S);
            return -1;
        }
        if (rank == 0)
            shm_unlink(name); /* everyone has attached */
    }
    s->time = (double *)(void *)((char *)s->rdv + sizeof(struct nc_bind_rdv));
    s->where = (char *)(s->time + (size_t)size * (size_t)ntimes * NC_BIND_NKERNELS * 2);
    return 0;
}

static void nc_bind_stream_detach(struct nc_bind_stream *s)
{
    if (s->size == 1)
        free(s->rdv);
    else
        munmap(s->rdv, s->len);
}

/*
 * 1. bind (done by the caller), allocate and first-touch a, b, c on our own CPUs;
 * 2. ntimes x { for each kernel: barrier, time the kernel, store the time };
 * 3. local rank 0 takes, per iteration and kernel, the wall time from the first
 *    rank's start to the last rank's end (CLOCK_MONOTONIC is node-wide; right even
 *    when ranks share a CPU and run one after the other), then the
 *    best/average/worst over iterations 2..ntimes, and prints aggregate rates;
 * 4. every rank checks its arrays against the scalar recurrence.
 */
int nc_bind_stream_run(hwloc_topology_t topo, const struct nc_bind_opts *o, int local_rank,
                       int local_size)
{
    static const char *label[NC_BIND_NKERNELS] = {"Copy:", "Scale:", "Add:", "Triad:"};
    static const double words[NC_BIND_NKERNELS] = {2, 2, 3, 3};
    struct nc_bind_stream s;
    const size_t n = (size_t)o->stream_n;
    const double scalar = 3.0;
    int rc = 1;

    if (nc_bind_stream_attach(&s, local_rank, local_size, o->stream_ntimes))
        return 1;
    /* our placement line, read back from the kernel, for rank 0 to print */
    nc_bind_report_self(topo, local_rank, o->logical, s.where + (size_t)local_rank * NC_BIND_WHERE_LEN,
                        NC_BIND_WHERE_LEN);

    /* 1. */
    double *a = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    double *b = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    double *c = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    if (!a || !b || !c) {
        fprintf(stderr, "numacoll-bind: stream: local rank %d: cannot allocate 3 x %zu doubles\n",
                local_rank, n);
        atomic_store_explicit(&s.rdv->failed, 1, memory_order_relaxed);
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
    /* 2. */
    for (int k = 0; k < s.ntimes; k++) {
        double *t = s.time + ((size_t)local_rank * (size_t)s.ntimes + (size_t)k) * NC_BIND_NKERNELS * 2;
        double t0;
        if (nc_bind_barrier(&s))
            goto timeout;
        t0 = nc_bind_now();
        for (size_t j = 0; j < n; j++)
            c[j] = a[j];
        t[0] = t0;
        t[1] = nc_bind_now();
        if (nc_bind_barrier(&s))
            goto timeout;
        t0 = nc_bind_now();
        for (size_t j = 0; j < n; j++)
            b[j] = scalar * c[j];
        t[2] = t0;
        t[3] = nc_bind_now();
        if (nc_bind_barrier(&s))
            goto timeout;
        t0 = nc_bind_now();
        for (size_t j = 0; j < n; j++)
            c[j] = a[j] + b[j];
        t[4] = t0;
        t[5] = nc_bind_now();
        if (nc_bind_barrier(&s))
            goto timeout;
        t0 = nc_bind_now();
        for (size_t j = 0; j < n; j++)
            a[j] = b[j] + scalar * c[j];
        t[6] = t0;
        t[7] = nc_bind_now();
    }
    /* 4. */
    double ea = 1.0, eb = 2.0, ec = 0.0;
    for (int k = 0; k < s.ntimes; k++) {
        ec = ea;
        eb = scalar * ec;
        ec = ea + eb;
        ea = eb + scalar * ec;
    }
    int ok = fabs(a[0] - ea) <= 1e-13 * fabs(ea) && fabs(a[n - 1] - ea) <= 1e-13 * fabs(ea) &&
             fabs(b[n / 2] - eb) <= 1e-13 * fabs(eb) && fabs(c[n - 1] - ec) <= 1e-13 * fabs(ec);
    if (!ok) {
        fprintf(stderr, "numacoll-bind: stream: local rank %d: results do not validate\n", local_rank);
        atomic_store_explicit(&s.rdv->invalid, 1, memory_order_relaxed);
    }
    if (nc_bind_barrier(&s)) /* all rows written */
        goto timeout;
    /* 3. */
    if (local_rank == 0) {
        double mib = 3.0 * (double)n * sizeof(double) / (1024.0 * 1024.0);
        printf("numacoll-bind stream: %d local rank%s x 3 arrays x %zu doubles (%.1f MiB per rank), "
               "%d iterations, first one not counted\n",
               local_size, local_size > 1 ? "s" : "", n, mib, s.ntimes);
        for (int r = 0; r < local_size; r++)
            fputs(s.where + (size_t)r * NC_BIND_WHERE_LEN, stdout);
        printf("%-8s %14s %12s %12s %12s\n", "Function", "Rate (MB/s)", "Avg time", "Min time",
               "Max time");
        for (int kern = 0; kern < NC_BIND_NKERNELS; kern++) {
            double mn = 1e30, mx = 0, sum = 0;
            for (int k = 1; k < s.ntimes; k++) {
                double first = 1e300, last = 0;
                for (int r = 0; r < local_size; r++) {
                    const double *t = s.time + (((size_t)r * (size_t)s.ntimes + (size_t)k) * NC_BIND_NKERNELS +
                                                (size_t)kern) * 2;
                    if (t[0] < first)
                        first = t[0];
                    if (t[1] > last)
                        last = t[1];
                }
                double slowest = last - first;
                sum += slowest;
                if (slowest < mn)
                    mn = slowest;
                if (slowest > mx)
                    mx = slowest;
            }
            double bytes = words[kern] * sizeof(double) * (double)n * local_size;
            printf("%-8s %14.1f %12.6f %12.6f %12.6f\n", label[kern], 1e-6 * bytes / mn,
                   sum / (s.ntimes - 1), mn, mx);
        }
        int invalid = (int)atomic_load_explicit(&s.rdv->invalid, memory_order_relaxed);
        printf("validation: %s\n", invalid ? "FAILED" : "ok");
        fflush(stdout);
    }
    rc = atomic_load_explicit(&s.rdv->invalid, memory_order_relaxed) ? 1 : 0;
    goto out;
timeout:
    fprintf(stderr, "numacoll-bind: stream: local rank %d: another rank failed or did not arrive "
            "within %d s\n", local_rank, NC_BIND_RDV_TIMEOUT_S);
    rc = 1;
out:
    free(a);
    free(b);
    free(c);
    nc_bind_stream_detach(&s);
    return rc;
}
