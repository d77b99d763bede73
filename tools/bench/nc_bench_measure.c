/*
 * The measurements. Every helper exchange (barriers between calls, reductions of
 * the times, agreement on iteration counts) goes straight to PMPI, so numacoll's
 * wrappers see only the calls being measured and its counters can prove it.
 *
 * One collective measurement (nc_bench_measure), for implementation i and size m:
 *   1. warm-up: untimed calls; in run 0 they also size the iteration count:
 *      n = min(R, V MiB / m, time per size / t_warm), never below min(5, R), where
 *      t_warm is the median warm-up call with the barrier before it (max over ranks);
 *   2. numacoll only: the communicator must be active (else abort with a message);
 *   3. fill: the root of the first call that uses pool buffer k holds pattern(k) in
 *      it, every other rank holds the complement; guard bytes follow each message;
 *   4. timing (bcast): per call PMPI_Barrier (untimed), then the timed call; the
 *      buffer is the next of the pool (--off-cache) and the root may rotate;
 *      timing (barrier): n calls back to back, timed as one loop (IMB's way);
 *   5. numacoll's counters: calls handed to PMPI are reported, calls that missed
 *      the wrapper altogether abort (a link order problem, not a measurement);
 *   6. verification: every used buffer must hold pattern(k) on every rank, guard
 *      bytes untouched; a wrong byte aborts with rank, size, offset and values;
 *   7. per-rank mean -> t_min, t_avg, t_max over ranks (PMPI_Reduce to rank 0).
 * memcpy runs on rank 0 alone, flag on ranks 0 and 1; the other ranks sleep in a
 * polled Ibarrier so that they do not steal the cores (p > cores).
 */
#include "nc_bench_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nc_tool_abort.h"
#include "numacoll_mpi.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double nc_bench_timer_overhead_ns(void)
{
    double best = 1;
    for (int i = 0; i < 1000; i++) {
        double a = now(), b2 = now();
        if (b2 - a < best)
            best = b2 - a;
    }
    return best * 1e9;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "numacoll-bench: rank %d: ", rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    nc_tool_abort(MPI_COMM_WORLD, 4);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

/* Ranks with nothing to do wait here without spinning on a core. */
static void sleepy_barrier(void)
{
    MPI_Request req;
    int done = 0;
    const struct timespec ts = {0, 20000};
    PMPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (;;) {
        PMPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            break;
        nanosleep(&ts, NULL);
    }
}

/* ---- data pattern ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x | 1; /* xorshift needs a non-zero state */
}

static inline uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void fill(unsigned char *buf, size_t m, uint64_t key, int complement)
{
    uint64_t x = mix64(key), flip = complement ? ~0ULL : 0;
    size_t k = 0;
    for (; k + 8 <= m; k += 8) {
        uint64_t v = xorshift(&x) ^ flip;
        memcpy(buf + k, &v, 8);
    }
    if (k < m) {
        uint64_t v = xorshift(&x) ^ flip;
        memcpy(buf + k, &v, m - k);
    }
    memset(buf + m, 0xA5, NC_BENCH_CANARY);
}

/* Offset of the first wrong byte (message, then guard bytes), or (size_t)-1. */
static size_t check(const unsigned char *buf, size_t m, uint64_t key, unsigned *got,
                    unsigned *want)
{
    uint64_t x = mix64(key);
    for (size_t k = 0; k < m; k += 8) {
        uint64_t v = xorshift(&x), have = 0;
        size_t len = m - k < 8 ? m - k : 8;
        memcpy(&have, buf + k, len);
        if (len < 8)
            v &= (1ULL << (8 * len)) - 1;
        if (have != v)
            for (size_t j = 0; j < len; j++)
                if (buf[k + j] != (unsigned char)(v >> (8 * j))) {
                    *got = buf[k + j];
                    *want = (unsigned char)(v >> (8 * j));
                    return k + j;
                }
    }
    for (size_t j = 0; j < NC_BENCH_CANARY; j++)
        if (buf[m + j] != 0xA5) {
            *got = buf[m + j];
            *want = 0xA5;
            return m + j;
        }
    return (size_t)-1;
}

/* ---- set-up ------------------------------------------------------------------- */

static void *map_pool(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, bytes); /* page faults now, not in the timing */
    return p;
}

static int flag_setup(struct nc_bench_mpi *b, char *err, size_t errlen)
{
    b->flag_ok = 0;
    PMPI_Comm_split(MPI_COMM_WORLD, b->rank < 2 ? 0 : MPI_UNDEFINED, b->rank, &b->pair);
    if (b->p < 2 || b->rank >= 2)
        return 0;
    char name[64] = "/dev/shm/numacoll-bench-flag-XXXXXX";
    int fd = -1, ok = 1, created = 0;
    if (b->rank == 0) {
        fd = mkstemp(name);
        created = fd >= 0;
        if (fd < 0 || ftruncate(fd, 4096) != 0)
            ok = 0;
    }
    PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, b->pair);
    PMPI_Bcast(&ok, 1, MPI_INT, 0, b->pair);
    if (ok && b->rank == 1 && (fd = open(name, O_RDWR)) < 0)
        ok = 0;
    if (ok) {
        b->flag_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (b->flag_page == MAP_FAILED) {
            b->flag_page = NULL;
            ok = 0;
        }
    }
    if (fd >= 0)
        close(fd);
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, b->pair);
    if (created)
        unlink(name); /* both ranks have mapped it (or given up) */
    if (!ok) {
        snprintf(err, errlen, "flag: no page shared by ranks 0 and 1 (%s): flag not measured",
                 strerror(errno));
        return -1;
    }
    /* two lines 128 bytes apart: the adjacent-line prefetcher does not pair them */
    b->ping = (_Atomic uint64_t *)b->flag_page;
    b->pong = (_Atomic uint64_t *)((char *)b->flag_page + 128);
    b->flag_ok = 1;
    return 0;
}

int nc_bench_mpi_setup(struct nc_bench_mpi *b, const struct nc_bench_opts *o, size_t pool_min,
                       char *err, size_t errlen)
{
    b->o = o;
    b->pair = MPI_COMM_NULL;
    PMPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &b->p);
    b->pool_min = o->off_cache ? pool_min : 0;
    size_t need = 4096;
    for (int c = 0; c < o->ncoll; c++) {
        const size_t *sizes;
        int ns = nc_bench_coll_sizes(o, o->coll[c], &sizes);
        for (int s = 0; s < ns; s++) {
            size_t stride, nbuf;
            nc_bench_pool_geometry(o, b->pool_min, sizes[s], &stride, &nbuf);
            if (stride * nbuf > need)
                need = stride * nbuf;
        }
    }
    b->pool_bytes = need;
    int ok = (b->pool = map_pool(need)) != NULL;
    if (ok && b->rank == 0 && o->limits)
        ok = (b->dst = map_pool(need)) != NULL;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        snprintf(err, errlen, "cannot map a buffer pool of %zu bytes per rank", need);
        return -1;
    }
    if (o->limits && flag_setup(b, err, errlen) && b->rank == 0)
        fprintf(stderr, "numacoll-bench: %s\n", err);
    err[0] = '\0';
    return 0;
}

void nc_bench_mpi_teardown(struct nc_bench_mpi *b)
{
    if (b->pool)
        munmap(b->pool, b->pool_bytes);
    if (b->dst)
        munmap(b->dst, b->pool_bytes);
    if (b->flag_page)
        munmap(b->flag_page, 4096);
    if (b->pair != MPI_COMM_NULL)
        PMPI_Comm_free(&b->pair);
    b->pool = b->dst = NULL;
    b->flag_page = NULL;
}

/* ---- one measurement ---------------------------------------------------------- */

static int root_of(const struct nc_bench_opts *o, int p, long i)
{
    return o->root_shift ? (int)((o->root + i) % p) : o->root;
}

static void call(const struct nc_bench_impl *im, enum nc_bench_coll coll, MPI_Comm comm,
                 void *buf, size_t m, int root)
{
    int rc;
    if (coll == NC_BENCH_BCAST)
        rc = im->kind == NC_IMPL_NATIVE ? PMPI_Bcast(buf, (int)m, MPI_BYTE, root, comm)
                                        : MPI_Bcast(buf, (int)m, MPI_BYTE, root, comm);
    else
        rc = im->kind == NC_IMPL_NATIVE ? PMPI_Barrier(comm) : MPI_Barrier(comm);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        die("%s %s of %zu bytes failed: %s", im->label, coll == NC_BENCH_BCAST ? "MPI_Bcast"
            : "MPI_Barrier", m, msg);
    }
}

#define NC_BENCH_WARM_SAMPLES 256

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Iterations from the warm-up estimate of one call (seconds, slowest rank). */
static long iterations(const struct nc_bench_opts *o, size_t m, double t_est)
{
    long n = nc_bench_iter_cap(o, m);
    long floor_n = o->iter_max < NC_BENCH_MIN_ITER ? o->iter_max : NC_BENCH_MIN_ITER;
    if (t_est > 0 && o->time_per_size / t_est < (double)n)
        n = (long)(o->time_per_size / t_est);
    return n < floor_n ? floor_n : n;
}

static uint64_t pattern_key(int run, int c, int impl, int s, long k)
{
    return ((uint64_t)run << 52) ^ ((uint64_t)c << 50) ^ ((uint64_t)impl << 42) ^
           ((uint64_t)s << 34) ^ (uint64_t)k;
}

static void measure_memcpy(struct nc_bench_mpi *b, int c, int impl, int s, size_t m, int run,
                           struct nc_bench_result *out)
{
    const struct nc_bench_opts *o = b->o;
    size_t stride, nbuf;
    nc_bench_pool_geometry(o, b->pool_min, m, &stride, &nbuf);
    if (b->rank == 0) {
        unsigned char *src = b->pool, *dst = b->dst;
        long n, w;
        if (run == 0) {
            double t0 = now();
            memcpy(dst, src, m);
            double t1 = now() - t0;
            w = o->warmup;
            if (t1 > 0 && (double)w * t1 > o->time_per_size / 4)
                w = (long)(o->time_per_size / 4 / t1) + 1;
            t0 = now();
            for (long i = 1; i < w; i++)
                memcpy(dst + (size_t)(i % (long)nbuf) * stride, src + (size_t)(i % (long)nbuf) * stride, m);
            double t_est = w > 1 ? (now() - t0) / (double)(w - 1) : t1;
            n = iterations(o, m, t_est);
            b->iters[c][impl][s] = n;
            b->warm[c][impl][s] = (int)w;
        } else {
            n = b->iters[c][impl][s];
            w = b->warm[c][impl][s];
            for (long i = 0; i < w; i++)
                memcpy(dst + (size_t)(i % (long)nbuf) * stride, src + (size_t)(i % (long)nbuf) * stride, m);
        }
        double t0 = now();
        for (long i = 0; i < n; i++) {
            size_t off = (size_t)(i % (long)nbuf) * stride;
            memcpy(dst + off, src + off, m);
            __asm__ volatile("" : : "r"(dst + off) : "memory");
        }
        double t = (now() - t0) / (double)n * 1e6;
        out->t_min = out->t_avg = out->t_max = t;
        out->iters = n;
        out->valid = 1;
    }
    sleepy_barrier();
}

void nc_bench_measure_flag(struct nc_bench_mpi *b, int run, struct nc_bench_result *out)
{
    const struct nc_bench_opts *o = b->o;
    if (b->flag_ok) {
        long n = 0, w = o->warmup > 100 ? o->warmup : 100;
        for (int phase = 0; phase < 2; phase++) {
            if (phase == 1) {
                if (run == 0) {
                    /* rank 0 sizes the count from its warm-up and tells rank 1 */
                    PMPI_Bcast(&n, 1, MPI_LONG, 0, b->pair);
                    b->flag_iters = n;
                } else {
                    n = b->flag_iters;
                }
            }
            long count = phase ? n : w;
            PMPI_Barrier(b->pair);
            double t0 = now();
            for (long i = 0; i < count; i++) {
                uint64_t v = ++b->flag_seq;
                unsigned spins = 0;
                if (b->rank == 0) {
                    /* release: nothing to publish but the value; pairs with rank 1's acquire */
                    atomic_store_explicit(b->ping, v, memory_order_release);
                    while (atomic_load_explicit(b->pong, memory_order_acquire) != v)
                        if (cpu_relax(), ++spins == 4096)
                            sched_yield(), spins = 0;
                } else {
                    while (atomic_load_explicit(b->ping, memory_order_acquire) != v)
                        if (cpu_relax(), ++spins == 4096)
                            sched_yield(), spins = 0;
                    /* release: pairs with rank 0's acquire load of pong */
                    atomic_store_explicit(b->pong, v, memory_order_release);
                }
            }
            double t = now() - t0;
            if (phase == 0 && run == 0 && b->rank == 0) {
                double rt = t / (double)w; /* one round trip */
                n = o->iter_max;
                if (rt > 0 && o->time_per_size / rt < (double)n)
                    n = (long)(o->time_per_size / rt);
                if (n < 100)
                    n = 100;
            }
            if (phase == 1 && b->rank == 0) {
                out->t_min = out->t_avg = out->t_max = t / (double)n / 2 * 1e6;
                out->iters = n;
                out->valid = 1;
            }
        }
    }
    sleepy_barrier();
}

void nc_bench_measure(struct nc_bench_mpi *b, const struct nc_bench_context *ctx, int run, int c,
                      int impl, int s, struct nc_bench_result *out)
{
    const struct nc_bench_opts *o = b->o;
    const struct nc_bench_impl *im = &ctx->all[impl];
    enum nc_bench_coll coll = o->coll[c];
    const size_t *sizes;
    nc_bench_coll_sizes(o, coll, &sizes);
    size_t m = sizes[s], stride, nbuf;
    memset(out, 0, sizeof *out);
    if (im->kind == NC_IMPL_MEMCPY) {
        measure_memcpy(b, c, impl, s, m, run, out);
        return;
    }
    nc_bench_pool_geometry(o, b->pool_min, m, &stride, &nbuf);
    MPI_Comm comm = b->comm[impl];
    int p = b->p, me = b->rank;
#define BUF(i) (b->pool + (size_t)((i) % (long)nbuf) * stride)

    /* 1. warm-up, and in run 0 the iteration count */
    long n, w;
    if (run == 0) {
        /* call 0 may set the communicator up and fault pages in: not a sample */
        PMPI_Barrier(MPI_COMM_WORLD);
        call(im, coll, comm, BUF(0), m, root_of(o, p, 0));
        /* the budget covers the barrier between calls too: time both */
        double t0 = now();
        PMPI_Barrier(MPI_COMM_WORLD);
        call(im, coll, comm, BUF(1), m, root_of(o, p, 1));
        double t1 = now() - t0;
        PMPI_Allreduce(MPI_IN_PLACE, &t1, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        w = o->warmup > 2 ? o->warmup : 2;
        if (t1 > 0 && (double)w * t1 > o->time_per_size / 4)
            w = (long)(o->time_per_size / 4 / t1) + 2;
        /* the median call is the estimate: one descheduled call must not cut the
         * count to the minimum */
        double samples[NC_BENCH_WARM_SAMPLES];
        int ns = 0;
        samples[ns++] = t1;
        for (long i = 2; i < w; i++) {
            t0 = now();
            PMPI_Barrier(MPI_COMM_WORLD);
            call(im, coll, comm, BUF(i), m, root_of(o, p, i));
            double dt = now() - t0;
            if (ns < NC_BENCH_WARM_SAMPLES)
                samples[ns++] = dt;
        }
        double t_est = median(samples, ns);
        PMPI_Allreduce(MPI_IN_PLACE, &t_est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        n = iterations(o, m, t_est);
        b->iters[c][impl][s] = n;
        b->warm[c][impl][s] = (int)w;
    } else {
        n = b->iters[c][impl][s];
        w = b->warm[c][impl][s];
        for (long i = 0; i < w; i++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            call(im, coll, comm, BUF(i), m, root_of(o, p, i));
        }
    }

    /* 2. */
    if (im->kind == NC_IMPL_NUMACOLL && numacoll_mpi_comm_active(comm) != 1)
        die("numacoll is not active on the communicator of \"%s\" (numacoll_mpi_comm_active = %d): "
            "its calls would measure the MPI library, not numacoll; NUMACOLL_VERBOSE=1 says why",
            im->label, numacoll_mpi_comm_active(comm));

    /* 3. */
    long used = n < (long)nbuf ? n : (long)nbuf;
    if (coll == NC_BENCH_BCAST && !o->verify_each)
        for (long k = 0; k < used; k++)
            fill(BUF(k), m, pattern_key(run, c, impl, s, k), me != root_of(o, p, k));

    numacoll_mpi_stats_t st0, st1;
    numacoll_mpi_stats(&st0);
    int cs = coll == NC_BENCH_BCAST ? NUMACOLL_MPI_BCAST : NUMACOLL_MPI_BARRIER;

    /* 4. */
    double sum = 0;
    if (coll == NC_BENCH_BCAST) {
        for (long i = 0; i < n; i++) {
            unsigned char *buf = BUF(i);
            int root = root_of(o, p, i);
            if (o->verify_each)
                fill(buf, m, pattern_key(run, c, impl, s, i), me != root);
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            call(im, coll, comm, buf, m, root);
            sum += now() - t0;
            if (o->verify_each) {
                unsigned got = 0, want = 0;
                size_t off = check(buf, m, pattern_key(run, c, impl, s, i), &got, &want);
                if (off != (size_t)-1)
                    die("%s: MPI_Bcast of %zu bytes from root %d, call %ld of run %d: wrong byte "
                        "at offset %zu%s: 0x%02x, expected 0x%02x", im->label, m, root, i, run + 1,
                        off, off >= m ? " (guard bytes after the message)" : "", got, want);
            }
        }
    } else {
        PMPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (long i = 0; i < n; i++)
            call(im, coll, comm, NULL, 0, 0);
        sum = now() - t0;
    }

    /* 5. */
    numacoll_mpi_stats(&st1);
    unsigned long long via_nc = st1.calls_numacoll[cs] - st0.calls_numacoll[cs];
    unsigned long long via_pmpi = st1.calls_pmpi[cs] - st0.calls_pmpi[cs];
    int fallback = 0;
    if (im->kind == NC_IMPL_NUMACOLL) {
        if (via_nc + via_pmpi != (unsigned long long)n)
            die("%s: %ld calls of MPI_%s but libnumacoll-mpi saw %llu: the program is not linked "
                "to libnumacoll-mpi before the MPI library", im->label, n,
                coll == NC_BENCH_BCAST ? "Bcast" : "Barrier", via_nc + via_pmpi);
        fallback = via_pmpi > 0;
    }
    PMPI_Allreduce(MPI_IN_PLACE, &fallback, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    /* 6. (the test suite proves that a wrong byte is caught: it asks for one) */
    if (coll == NC_BENCH_BCAST && m > 0 && me == p - 1 && getenv("NUMACOLL_BENCH_TEST_CORRUPT"))
        b->pool[m / 2] ^= 0x10;
    if (coll == NC_BENCH_BCAST && !o->verify_each)
        for (long k = 0; k < used; k++) {
            unsigned got = 0, want = 0;
            size_t off = check(BUF(k), m, pattern_key(run, c, impl, s, k), &got, &want);
            if (off != (size_t)-1)
                die("%s: MPI_Bcast of %zu bytes, buffer %ld (first root %d), run %d: wrong byte at "
                    "offset %zu%s on %s: 0x%02x, expected 0x%02x", im->label, m, k,
                    root_of(o, p, k), run + 1, off,
                    off >= m ? " (guard bytes after the message)" : "",
                    me == root_of(o, p, k) ? "the root" : "a receiver", got, want);
        }
#undef BUF

    /* 7. */
    double mean = sum / (double)n * 1e6, tmin, tmax, tsum;
    PMPI_Reduce(&mean, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&mean, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&mean, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        out->t_min = tmin;
        out->t_avg = tsum / p;
        out->t_max = tmax;
        out->iters = n;
        out->fallback = fallback;
        out->valid = 1;
    }
}
