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
 *      reductions: a pool buffer is a send buffer holding this rank's inputs (a
 *      function of op, rank and element, see reduction inputs below) and a receive
 *      buffer holding the complement of the expected result, guard bytes after both;
 *   4. timing (bcast, reduce, allreduce): per call PMPI_Barrier (untimed), then the
 *      timed call; the buffer is the next of the pool (--off-cache) and the root (bcast,
 *      reduce) may rotate;
 *      timing (barrier): n calls back to back, timed as one loop (IMB's way);
 *   5. numacoll's counters: calls handed to PMPI are reported, calls that missed
 *      the wrapper altogether abort (a link order problem, not a measurement);
 *   6. verification: every used buffer must hold pattern(k) on every rank, guard
 *      bytes untouched; a wrong byte aborts with rank, size, offset and values;
 *      reductions: the first call's result (on its root, or on every rank for
 *      allreduce) must be the exact value, its send buffer unchanged, the guard bytes
 *      of every used buffer untouched; a wrong element aborts with its value;
 *   7. per-rank mean -> t_min, t_avg, t_max over ranks (PMPI_Reduce to rank 0).
 * memcpy and reduce-kernel run on rank 0 alone, flag on ranks 0 and 1; the other
 * ranks sleep in a polled Ibarrier so that they do not steal the cores (p > cores).
 * cma-copy (bcast, the gather family) is timed as a collective, 1-7: a "call" moves
 * what the collective gives each rank, each block from its sender's buffer by one
 * process_vm_readv, the rank's own block by memcpy, every rank at once; no
 * announcement, no flow control. The single copy with nothing else, on this node.
 * flag-sync (every collective but the barrier) is timed as a collective too (1, 4,
 * 5, 7; nothing to fill or check): a "call" is the collective's waits alone, a
 * word per rank (flag_sync()): what telling the receivers costs after the same
 * untimed barrier, its exit skew included; the reference of small messages.
 */
#include "nc_bench_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
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

/* ---- reduction inputs and results ----------------------------------------------
 * Element k of rank r's input depends on r and j = k mod 8 only, so every element of
 * the result is one of 8 values, folded here once per measurement. Inputs are small
 * non-negative integers or single bits, so every result is exact in every type and
 * does not depend on the order of evaluation (w: bits of an element):
 *   sum        r + 1 + j                 prod       2 if r mod 8 = j, else 1
 *   min, max   1 + (r + j) mod p         land       0 if r mod 8 = j, else 1
 *   lor, lxor  1 if r mod 8 = j, else 0  band       every bit but bit (r + j) mod w
 *   bor, bxor  bit (r + j) mod w
 * Integers are computed modulo 2^w (a uint8 sum wraps, as MPI's does). The receive
 * buffers start as the complement of the result: a call that writes nothing fails. */
#define RED_PERIOD 8

struct red_ref {
    numacoll_type_t type;
    size_t tb;                               /* bytes of an element */
    unsigned char in[RED_PERIOD * 8];        /* this rank's inputs, j = 0..7 */
    unsigned char want[RED_PERIOD * 8];      /* the result */
    unsigned char junk[RED_PERIOD * 8];      /* ~want: the receive buffer before a call */
};

static uint64_t red_input(numacoll_op_t op, int r, int j, int p, unsigned w)
{
    unsigned bit = (unsigned)(((long)r + j) % (long)w);
    switch (op) {
    case NUMACOLL_SUM:
        return (uint64_t)r + 1 + (uint64_t)j;
    case NUMACOLL_PROD:
        return r % RED_PERIOD == j ? 2 : 1;
    case NUMACOLL_MIN:
    case NUMACOLL_MAX:
        return 1 + (uint64_t)(((long)r + j) % p);
    case NUMACOLL_LAND:
        return r % RED_PERIOD != j;
    case NUMACOLL_LOR:
    case NUMACOLL_LXOR:
        return r % RED_PERIOD == j;
    case NUMACOLL_BAND:
        return ~(1ULL << bit);
    default: /* bor, bxor */
        return 1ULL << bit;
    }
}

static uint64_t fold_int(numacoll_op_t op, uint64_t a, uint64_t x)
{
    switch (op) {
    case NUMACOLL_SUM:
        return a + x;
    case NUMACOLL_PROD:
        return a * x;
    case NUMACOLL_MIN:
        return x < a ? x : a;
    case NUMACOLL_MAX:
        return x > a ? x : a;
    case NUMACOLL_LAND:
        return a && x;
    case NUMACOLL_LOR:
        return a || x;
    case NUMACOLL_LXOR:
        return !a != !x;
    case NUMACOLL_BAND:
        return a & x;
    case NUMACOLL_BOR:
        return a | x;
    default:
        return a ^ x;
    }
}

static double fold_fp(numacoll_op_t op, double a, double x)
{
    switch (op) {
    case NUMACOLL_PROD:
        return a * x;
    case NUMACOLL_MIN:
        return x < a ? x : a;
    case NUMACOLL_MAX:
        return x > a ? x : a;
    default:
        return a + x;
    }
}

/* One element of type t from an integer (modulo 2^w) or a floating value. */
static void store_elem(numacoll_type_t t, unsigned char *dst, uint64_t iv, double fv)
{
    if (t == NUMACOLL_FLOAT) {
        float f = (float)fv;
        memcpy(dst, &f, sizeof f);
    } else if (t == NUMACOLL_DOUBLE) {
        memcpy(dst, &fv, sizeof fv);
    } else if (t == NUMACOLL_INT32) {
        int32_t v = (int32_t)(uint32_t)iv;
        memcpy(dst, &v, sizeof v);
    } else if (t == NUMACOLL_INT64) {
        int64_t v = (int64_t)iv;
        memcpy(dst, &v, sizeof v);
    } else {
        dst[0] = (unsigned char)iv;
    }
}

static void format_elem(numacoll_type_t t, const unsigned char *e, char *buf, size_t len)
{
    if (t == NUMACOLL_FLOAT) {
        float f;
        memcpy(&f, e, sizeof f);
        snprintf(buf, len, "%.9g", (double)f);
    } else if (t == NUMACOLL_DOUBLE) {
        double d;
        memcpy(&d, e, sizeof d);
        snprintf(buf, len, "%.17g", d);
    } else if (t == NUMACOLL_INT32) {
        int32_t v;
        memcpy(&v, e, sizeof v);
        snprintf(buf, len, "%ld", (long)v);
    } else if (t == NUMACOLL_INT64) {
        int64_t v;
        memcpy(&v, e, sizeof v);
        snprintf(buf, len, "%lld", (long long)v);
    } else {
        snprintf(buf, len, "%u", (unsigned)e[0]);
    }
}

/* The inputs of rank `rank` of p, and the result of the p ranks' reduction. */
static void red_ref_init(struct red_ref *ref, const struct nc_bench_opts *o, int rank, int p)
{
    numacoll_type_t t = o->type;
    size_t tb = nc_bench_type_bytes(t);
    unsigned w = (unsigned)(8 * tb);
    uint64_t mask = w == 64 ? ~0ULL : (1ULL << w) - 1;
    ref->type = t;
    ref->tb = tb;
    for (int j = 0; j < RED_PERIOD; j++) {
        uint64_t acc = red_input(o->op, 0, j, p, w) & mask;
        double facc = (double)acc;
        for (int r = 1; r < p; r++) {
            uint64_t x = red_input(o->op, r, j, p, w) & mask;
            acc = fold_int(o->op, acc, x) & mask;
            facc = fold_fp(o->op, facc, (double)x);
            if (t == NUMACOLL_FLOAT)
                facc = (float)facc; /* MPI adds floats as floats (exact here anyway) */
        }
        uint64_t mine = red_input(o->op, rank, j, p, w) & mask;
        store_elem(t, ref->want + (size_t)j * tb, acc, facc);
        store_elem(t, ref->in + (size_t)j * tb, mine, (double)mine);
    }
    for (size_t k = 0; k < sizeof ref->junk; k++)
        ref->junk[k] = (unsigned char)~ref->want[k];
}

/* m bytes of whole elements: element k = pat[k mod 8], then the guard bytes */
static void red_fill(unsigned char *buf, size_t m, const unsigned char *pat, size_t tb)
{
    size_t chunk = RED_PERIOD * tb, k = 0;
    for (; k + chunk <= m; k += chunk)
        memcpy(buf + k, pat, chunk);
    memcpy(buf + k, pat, m - k);
    memset(buf + m, 0xA5, NC_BENCH_CANARY);
}

/* First element k of buf (m bytes) that is not pat[k mod 8], or (size_t)-1. */
static size_t red_mismatch(const unsigned char *buf, size_t m, const unsigned char *pat, size_t tb)
{
    size_t chunk = RED_PERIOD * tb;
    for (size_t k = 0; k < m; k += chunk) {
        size_t len = m - k < chunk ? m - k : chunk;
        if (memcmp(buf + k, pat, len))
            for (size_t e = 0; e < len; e += tb)
                if (memcmp(buf + k + e, pat + e, tb))
                    return (k + e) / tb;
    }
    return (size_t)-1;
}

/* Offset of the first changed guard byte after buf + m, or (size_t)-1. */
static size_t guard_changed(const unsigned char *buf, size_t m)
{
    for (size_t j = 0; j < NC_BENCH_CANARY; j++)
        if (buf[m + j] != 0xA5)
            return j;
    return (size_t)-1;
}

/* ---- set-up ------------------------------------------------------------------- */

/* Bytes of the mapping that holds p backed by transparent huge pages
 * (/proc/self/smaps), or 0. */
static size_t huge_bytes(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[256];
    int in = 0;
    size_t kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = lo <= (unsigned long)(uintptr_t)p && (unsigned long)(uintptr_t)p < hi;
            continue;
        }
        if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb << 10;
}

static void *map_pool(size_t bytes, int thp)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* --thp: advice only; a kernel without THP (or with it "never") keeps
     * 4 KiB pages, which the header line then reports */
    if (thp)
        (void)madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes); /* page faults now, not in the timing */
    return p;
}

/* The flag region: flag's ping and pong, 128 bytes apart so that the adjacent-line
 * prefetcher does not pair them, then the flag-sync words of the ranks, side by side
 * (8 in a line: measured here, the ranks of a small call wait on one line they all
 * write in 0.6x the time they take on a line each). */
#define FLAG_LINE 128
static int flag_setup(struct nc_bench_mpi *b, char *err, size_t errlen)
{
    b->flag_ok = b->sync_ok = 0;
    PMPI_Comm_split(MPI_COMM_WORLD, b->rank < 2 ? 0 : MPI_UNDEFINED, b->rank, &b->pair);
    if (b->p < 2)
        return 0;
    b->flag_bytes = (2 * FLAG_LINE + (size_t)b->p * sizeof(uint64_t) + 4095) / 4096 * 4096;
    char name[64] = "/dev/shm/numacoll-bench-flag-XXXXXX";
    int fd = -1, ok = 1, created = 0;
    if (b->rank == 0) {
        fd = mkstemp(name);
        created = fd >= 0;
        if (fd < 0 || ftruncate(fd, (off_t)b->flag_bytes) != 0)
            ok = 0;
    }
    PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ok && b->rank != 0 && (fd = open(name, O_RDWR)) < 0)
        ok = 0;
    if (ok) {
        b->flag_page = mmap(NULL, b->flag_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (b->flag_page == MAP_FAILED) {
            b->flag_page = NULL;
            ok = 0;
        }
    }
    int eno = ok ? 0 : errno;
    if (fd >= 0)
        close(fd);
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Allreduce(MPI_IN_PLACE, &eno, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (created)
        unlink(name); /* every rank has mapped it (or given up) */
    if (!ok) {
        snprintf(err, errlen, "flag, flag-sync: no region of /dev/shm shared by the ranks (%s): "
                 "not measured", eno ? strerror(eno) : "a rank could not map it");
        return -1;
    }
    b->ping = (_Atomic uint64_t *)b->flag_page;
    b->pong = (_Atomic uint64_t *)((char *)b->flag_page + FLAG_LINE);
    b->sync_line = (_Atomic uint64_t *)((char *)b->flag_page + 2 * FLAG_LINE);
    b->flag_ok = b->rank < 2;
    b->sync_ok = 1;
    /* more ranks than CPUs: a waiting rank yields at once, as numacoll's own waits do
     * then (a rank that spins on would keep the one it waits for off its CPU) */
    b->sync_spins = b->p > sysconf(_SC_NPROCESSORS_ONLN) ? 1 : 4096;
    return 0;
}

/* cma-copy: every rank's pid and pool; each rank reads a line of its neighbour's pool
 * (as numacoll's own probe does, a real transfer). 0 when every rank could (or p = 1:
 * no row), -1 when some rank had no memory, else the largest errno of a failed read. */
static int cma_setup(struct nc_bench_mpi *b)
{
    const int p = b->p;
    b->cma_ok = 0;
    b->pids = malloc(sizeof *b->pids * (size_t)p);
    b->pools = malloc(sizeof *b->pools * (size_t)p);
    if (p < 2)
        return 0; /* nothing to copy: no row */
    int ok = b->pids && b->pools;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok)
        return -1;
#ifdef PR_SET_PTRACER
    /* yama ptrace_scope 1: let the other ranks read this one (as numacoll does) */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    int pid = (int)getpid();
    uint64_t pool = (uint64_t)(uintptr_t)b->pool;
    PMPI_Allgather(&pid, 1, MPI_INT, b->pids, 1, MPI_INT, MPI_COMM_WORLD);
    PMPI_Allgather(&pool, 1, MPI_UINT64_T, b->pools, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    const int k = (b->rank + 1) % p;
    unsigned char line[64];
    struct iovec l = {line, sizeof line}, r = {(void *)(uintptr_t)b->pools[k], sizeof line};
    const ssize_t got = process_vm_readv(b->pids[k], &l, 1, &r, 1, 0);
    int err = got == (ssize_t)sizeof line ? 0 : got < 0 ? errno : EFAULT;
    PMPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    b->cma_ok = !err;
    return err;
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
            /* the slot of the collective; memcpy and reduce-kernel use the message's */
            nc_bench_pool_geometry(o, b->pool_min, nc_bench_slot_bytes(o->coll[c], sizes[s], b->p),
                                   &stride, &nbuf);
            if (stride * nbuf > need)
                need = stride * nbuf;
            nc_bench_pool_geometry(o, b->pool_min, sizes[s], &stride, &nbuf);
            if (stride * nbuf > need)
                need = stride * nbuf;
        }
    }
    b->pool_bytes = need;
    int ok = (b->pool = map_pool(need, o->thp)) != NULL;
    if (ok && b->rank == 0 && o->limits)
        ok = (b->dst = map_pool(need, o->thp)) != NULL;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        snprintf(err, errlen, "cannot map a buffer pool of %zu bytes per rank", need);
        return -1;
    }
    if (o->thp && need >= ((size_t)4 << 20)) {
        /* --thp says what it got: advice the kernel may not take (and a
         * pool of less than two huge pages may well get none) */
        int none = huge_bytes(b->pool) == 0;
        PMPI_Allreduce(MPI_IN_PLACE, &none, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (none && b->rank == 0)
            fprintf(stderr, "numacoll-bench: --thp: the kernel gave some rank's buffers no huge "
                            "pages (%s; /sys/kernel/mm/transparent_hugepage/enabled)\n",
                    nc_bench_thp_mode());
    }
    if (o->limits && flag_setup(b, err, errlen) && b->rank == 0)
        fprintf(stderr, "numacoll-bench: %s\n", err);
    int cerr = o->limits && nc_bench_has_copy_limit(o) ? cma_setup(b) : 0;
    if (cerr && b->rank == 0)
        fprintf(stderr, "numacoll-bench: cma-copy: %s%s: the row is not measured\n",
                cerr < 0 ? "out of memory" : "process_vm_readv between the ranks failed: ",
                cerr < 0 ? ""
                         : strerror(cerr)); /* ptrace_scope, seccomp, containers: docs/transport.md */
    err[0] = '\0';
    return 0;
}

void nc_bench_mpi_teardown(struct nc_bench_mpi *b)
{
    free(b->pids);
    free(b->pools);
    b->pids = NULL;
    b->pools = NULL;
    if (b->pool)
        munmap(b->pool, b->pool_bytes);
    if (b->dst)
        munmap(b->dst, b->pool_bytes);
    if (b->flag_page)
        munmap(b->flag_page, b->flag_bytes);
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

static const char *const mpi_call_name[NC_BENCH_NCOLL] = {
    "MPI_Bcast",     "MPI_Barrier",    "MPI_Reduce",   "MPI_Allreduce",
    "MPI_Gather",    "MPI_Gatherv",    "MPI_Scatter",  "MPI_Scatterv",
    "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv"};

/* ---- the gather family: a slot is p send blocks of m bytes, then p receive blocks
 * at nc_bench_recv_offset(p m); byte i of the block rank s sends to rank d (d: 0 when
 * every receiver gets the same block) in slot k is xg_byte(k, s, d, i) */
static inline unsigned char xg_byte(long k, int s, int d, size_t i)
{
    return (unsigned char)(i * 13 + (i >> 8) * 7 + (size_t)s * 37 + (size_t)d * 101 +
                           (size_t)k * 5 + 1);
}

static int xg_per_dest(enum nc_bench_coll c)
{
    return c == NC_BENCH_SCATTER || c == NC_BENCH_SCATTERV || c == NC_BENCH_ALLTOALL ||
           c == NC_BENCH_ALLTOALLV;
}

static int xg_rooted(enum nc_bench_coll c)
{
    return c >= NC_BENCH_GATHER && c <= NC_BENCH_SCATTERV;
}

/* Bytes of the block s -> d: m, or for a v-form under --imbalance X
 * m (1 - X k / (p - 1)) with k the sender (gatherv, allgatherv), the receiver
 * (scatterv) or (s + d) mod p (alltoallv). Blocks stay at k m in both buffers. */
static size_t xg_cnt(const struct nc_bench_opts *o, enum nc_bench_coll c, size_t m, int p, int s,
                     int d)
{
    if (o->imbalance <= 0 || p < 2 ||
        (c != NC_BENCH_GATHERV && c != NC_BENCH_SCATTERV && c != NC_BENCH_ALLGATHERV &&
         c != NC_BENCH_ALLTOALLV))
        return m;
    const int k = c == NC_BENCH_SCATTERV ? d : c == NC_BENCH_ALLTOALLV ? (s + d) % p : s;
    return m - (size_t)((double)m * o->imbalance * k / (p - 1));
}

/* Send blocks of this rank (all p, whether used or not), receive blocks to junk,
 * guard bytes after both. */
static void xg_fill(unsigned char *slot, enum nc_bench_coll c, size_t m, int p, int me, long k)
{
    const size_t roff = nc_bench_recv_offset((size_t)p * m);
    for (int d = 0; d < p; d++)
        for (size_t i = 0; i < m; i++)
            slot[(size_t)d * m + i] = xg_byte(k, me, xg_per_dest(c) ? d : 0, i);
    memset(slot + (size_t)p * m, 0xa5, roff - (size_t)p * m);
    memset(slot + roff, 0x5a, (size_t)p * m);
    memset(slot + roff + (size_t)p * m, 0xa5, NC_BENCH_CANARY);
}

/* After the calls: the blocks the last call that used the slot (root `root`) gave
 * this rank, the send blocks unchanged, the guard bytes. A failure aborts. */
static void xg_verify(const struct nc_bench_opts *o, const struct nc_bench_impl *im,
                      enum nc_bench_coll c, const unsigned char *slot, size_t m, int p, int me,
                      int root, long k, int run)
{
    const size_t roff = nc_bench_recv_offset((size_t)p * m);
    const unsigned char *r = slot + roff;
    const int scat = c == NC_BENCH_SCATTER || c == NC_BENCH_SCATTERV;
    for (int d = 0; d < p; d++)
        for (size_t i = 0; i < m; i++)
            if (slot[(size_t)d * m + i] != xg_byte(k, me, xg_per_dest(c) ? d : 0, i))
                die("%s: %s of %zu bytes, buffer %ld, run %d: send block %d changed at byte %zu",
                    im->label, mpi_call_name[c], m, k, run + 1, d, i);
    for (size_t i = 0; i < NC_BENCH_CANARY; i++)
        if (slot[roff + (size_t)p * m + i] != 0xa5)
            die("%s: %s of %zu bytes, buffer %ld, run %d: guard byte %zu after the receive "
                "blocks changed", im->label, mpi_call_name[c], m, k, run + 1, i);
    if (scat) {
        if (me == root)
            return; /* its own block: not checked (the others' checks cover the data) */
        const size_t n = xg_cnt(o, c, m, p, root, me);
        for (size_t i = n; i < m; i++)
            if (r[i] != 0x5a)
                die("%s: %s of %zu bytes from root %d, buffer %ld, run %d: byte %zu past the "
                    "%zu received written", im->label, mpi_call_name[c], m, root, k, run + 1, i,
                    n);
        for (size_t i = 0; i < n; i++)
            if (r[i] != xg_byte(k, root, me, i))
                die("%s: %s of %zu bytes from root %d, buffer %ld, run %d: wrong byte %zu: "
                    "0x%02x, expected 0x%02x", im->label, mpi_call_name[c], m, root, k, run + 1,
                    i, r[i], xg_byte(k, root, me, i));
        return;
    }
    if (xg_rooted(c) && me != root)
        return;
    for (int s = 0; s < p; s++)
        for (size_t i = 0, n = xg_cnt(o, c, m, p, s, me); i < m; i++) {
            const unsigned char want = i < n ? xg_byte(k, s, xg_per_dest(c) ? me : 0, i) : 0x5a;
            if (r[(size_t)s * m + i] != want)
                die("%s: %s of %zu bytes%s, buffer %ld, run %d: wrong byte %zu of the block "
                    "from rank %d: 0x%02x, expected 0x%02x", im->label, mpi_call_name[c], m,
                    xg_rooted(c) ? " at the root" : "", k, run + 1, i, s, r[(size_t)s * m + i],
                    want);
        }
}

static int xg_counts_p = 0;
static int *xg_counts; /* send counts, send displacements, receive counts, receive displs */

/* One call of the gather family: slot = send blocks, receive blocks after them;
 * the v-forms' counts from xg_cnt(). */
static int xg_call(const struct nc_bench_opts *o, int native, enum nc_bench_coll c, MPI_Comm comm,
                   unsigned char *slot, size_t m, int root, int p, int me)
{
    const int n = (int)m;
    void *s = slot, *r = slot + nc_bench_recv_offset((size_t)p * m);
    if (xg_counts_p != p) {
        free(xg_counts);
        xg_counts = malloc(4 * sizeof(int) * (size_t)p);
        if (!xg_counts)
            die("out of memory");
        xg_counts_p = p;
    }
    int *sc = xg_counts, *sd = sc + p, *rc = sd + p, *rd = rc + p;
    /* the block this rank sends to d, the one it receives from k (scatterv,
     * gatherv: from and to the root) */
    for (int k = 0; k < p; k++) {
        sc[k] = (int)xg_cnt(o, c, m, p, c == NC_BENCH_SCATTERV ? root : me, k);
        rc[k] = (int)xg_cnt(o, c, m, p, k, c == NC_BENCH_GATHERV ? root : me);
        sd[k] = rd[k] = k * n;
    }
    const int sn = (int)xg_cnt(o, c, m, p, me, root), rn = (int)xg_cnt(o, c, m, p, root, me);
#define XG(NAME, ...) (native ? PMPI_##NAME(__VA_ARGS__) : MPI_##NAME(__VA_ARGS__))
    switch (c) {
    case NC_BENCH_GATHER: return XG(Gather, s, n, MPI_BYTE, r, n, MPI_BYTE, root, comm);
    case NC_BENCH_GATHERV: return XG(Gatherv, s, sn, MPI_BYTE, r, rc, rd, MPI_BYTE, root, comm);
    case NC_BENCH_SCATTER: return XG(Scatter, s, n, MPI_BYTE, r, n, MPI_BYTE, root, comm);
    case NC_BENCH_SCATTERV: return XG(Scatterv, s, sc, sd, MPI_BYTE, r, rn, MPI_BYTE, root, comm);
    case NC_BENCH_ALLGATHER: return XG(Allgather, s, n, MPI_BYTE, r, n, MPI_BYTE, comm);
    case NC_BENCH_ALLGATHERV:
        return XG(Allgatherv, s, sc[0], MPI_BYTE, r, rc, rd, MPI_BYTE, comm);
    case NC_BENCH_ALLTOALL: return XG(Alltoall, s, n, MPI_BYTE, r, n, MPI_BYTE, comm);
    default: return XG(Alltoallv, s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE, comm);
    }
#undef XG
}

static MPI_Datatype mpi_type(numacoll_type_t t)
{
    switch (t) {
    case NUMACOLL_FLOAT:
        return MPI_FLOAT;
    case NUMACOLL_INT32:
        return MPI_INT32_T;
    case NUMACOLL_INT64:
        return MPI_INT64_T;
    case NUMACOLL_UINT8:
        return MPI_UINT8_T;
    default:
        return MPI_DOUBLE;
    }
}

static MPI_Op mpi_op(numacoll_op_t op)
{
    switch (op) {
    case NUMACOLL_PROD:
        return MPI_PROD;
    case NUMACOLL_MIN:
        return MPI_MIN;
    case NUMACOLL_MAX:
        return MPI_MAX;
    case NUMACOLL_LAND:
        return MPI_LAND;
    case NUMACOLL_LOR:
        return MPI_LOR;
    case NUMACOLL_LXOR:
        return MPI_LXOR;
    case NUMACOLL_BAND:
        return MPI_BAND;
    case NUMACOLL_BOR:
        return MPI_BOR;
    case NUMACOLL_BXOR:
        return MPI_BXOR;
    default:
        return MPI_SUM;
    }
}

/* n bytes from rank k's address a into dst, one process_vm_readv (more only when the
 * kernel copies less). A failure after the set-up's check aborts. */
static void cma_block(const struct nc_bench_mpi *b, int k, unsigned char *dst, uint64_t a,
                      size_t n)
{
    while (n) {
        struct iovec l = {dst, n}, r = {(void *)(uintptr_t)a, n};
        ssize_t got = process_vm_readv(b->pids[k], &l, 1, &r, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            die("cma-copy: process_vm_readv of %zu bytes from rank %d: %s", n, k,
                got < 0 ? strerror(errno) : "nothing copied");
        }
        dst += got;
        a += (uint64_t)got;
        n -= (size_t)got;
    }
}

/* One cma-copy "call" (NC_IMPL_CMA) in pool slot buf, laid out as the collective's
 * (xg_call(), bcast's message): the blocks this rank receives, read from their
 * senders' slots, which sit at the same offset in every rank's pool. */
static void cma_copy(const struct nc_bench_mpi *b, enum nc_bench_coll c, unsigned char *buf,
                     size_t m, int root)
{
    const struct nc_bench_opts *o = b->o;
    const int p = b->p, me = b->rank;
    const uint64_t off = (uint64_t)(buf - b->pool);
#define AT(k, x) (b->pools[k] + off + (uint64_t)(x))
    if (c == NC_BENCH_BCAST) {
        if (me != root && m)
            cma_block(b, root, buf, AT(root, 0), m);
        return;
    }
    unsigned char *r = buf + nc_bench_recv_offset((size_t)p * m);
    switch (c) {
    case NC_BENCH_GATHER:
    case NC_BENCH_GATHERV:
        if (me != root)
            return;
        for (int k = 0; k < p; k++) {
            const size_t n = xg_cnt(o, c, m, p, k, root);
            if (k == me)
                memcpy(r + (size_t)k * m, buf, n);
            else if (n)
                cma_block(b, k, r + (size_t)k * m, AT(k, 0), n);
        }
        return;
    case NC_BENCH_SCATTER:
    case NC_BENCH_SCATTERV: {
        const size_t n = xg_cnt(o, c, m, p, root, me);
        if (me == root)
            memcpy(r, buf + (size_t)me * m, n);
        else if (n)
            cma_block(b, root, r, AT(root, (size_t)me * m), n);
        return;
    }
    default: {
        /* allgather(v): block 0 of every sender; alltoall(v): the sender's block for me */
        const int per_dest = xg_per_dest(c);
        for (int j = 0; j < p; j++) {
            const int k = (me + j) % p; /* from my own block on, as numacoll reads */
            const size_t n = xg_cnt(o, c, m, p, k, me), from = per_dest ? (size_t)me * m : 0;
            if (k == me)
                memcpy(r + (size_t)k * m, buf + from, n);
            else if (n)
                cma_block(b, k, r + (size_t)k * m, AT(k, from), n);
        }
        return;
    }
    }
#undef AT
}

static inline _Atomic uint64_t *sync_line(const struct nc_bench_mpi *b, int k)
{
    return b->sync_line + k;
}

/* One flag-sync "call" (NC_IMPL_SYNC): collective c's waits and nothing else. Every
 * rank that sends stores the call's number into its word, every rank that receives
 * waits for the word of each rank it receives from: all of them (allreduce, allgather,
 * alltoall), all of them at the root only (reduce, gather), the root's (bcast,
 * scatter). No data moves: what telling the receivers costs after the same barrier,
 * whatever the bytes (a reference, not a bound: another pattern of lines may do
 * better). */
static void flag_sync(struct nc_bench_mpi *b, enum nc_bench_coll c, int root)
{
    const int p = b->p, me = b->rank;
    const int to_root = c == NC_BENCH_REDUCE || c == NC_BENCH_GATHER || c == NC_BENCH_GATHERV;
    const int from_root = c == NC_BENCH_BCAST || c == NC_BENCH_SCATTER ||
                          c == NC_BENCH_SCATTERV;
    const uint64_t v = ++b->sync_seq;
    /* release: nothing to publish but the number; pairs with the acquire loads below on
     * the ranks that wait for this one */
    if (!from_root || me == root)
        atomic_store_explicit(sync_line(b, me), v, memory_order_release);
    if ((to_root && me != root) || (from_root && me == root))
        return;
    for (int k = 0; k < p; k++) {
        if (k == me || (from_root && k != root))
            continue;
        unsigned spins = 0;
        while (atomic_load_explicit(sync_line(b, k), memory_order_acquire) < v)
            if (cpu_relax(), ++spins == b->sync_spins)
                sched_yield(), spins = 0;
    }
}

/* buf: the message (bcast) or the pool slot of a reduction (send buffer, then the
 * receive buffer at nc_bench_recv_offset(m)); m: bytes (whole elements for reductions) */
static void call(struct nc_bench_mpi *b, const struct nc_bench_impl *im,
                 enum nc_bench_coll coll, MPI_Comm comm, unsigned char *buf, size_t m, int root)
{
    if (im->kind == NC_IMPL_CMA) {
        cma_copy(b, coll, buf, m, root);
        return;
    }
    if (im->kind == NC_IMPL_SYNC) {
        flag_sync(b, coll, root);
        return;
    }
    int rc, native = im->kind == NC_IMPL_NATIVE;
    const struct nc_bench_opts *o = b->o;
    int count = (int)(m / nc_bench_type_bytes(o->type));
    void *recv = buf + nc_bench_recv_offset(m);
    switch (coll) {
    case NC_BENCH_BCAST:
        rc = native ? PMPI_Bcast(buf, (int)m, MPI_BYTE, root, comm)
                    : MPI_Bcast(buf, (int)m, MPI_BYTE, root, comm);
        break;
    case NC_BENCH_REDUCE:
        rc = native ? PMPI_Reduce(buf, recv, count, mpi_type(o->type), mpi_op(o->op), root, comm)
                    : MPI_Reduce(buf, recv, count, mpi_type(o->type), mpi_op(o->op), root, comm);
        break;
    case NC_BENCH_ALLREDUCE:
        rc = native ? PMPI_Allreduce(buf, recv, count, mpi_type(o->type), mpi_op(o->op), comm)
                    : MPI_Allreduce(buf, recv, count, mpi_type(o->type), mpi_op(o->op), comm);
        break;
    case NC_BENCH_BARRIER:
        rc = native ? PMPI_Barrier(comm) : MPI_Barrier(comm);
        break;
    default:
        rc = xg_call(o, native, coll, comm, buf, m, root, b->p, b->rank);
        break;
    }
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        die("%s %s of %zu bytes failed: %s", im->label, mpi_call_name[coll], m, msg);
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

/* One call of a limit row: memcpy, or the reduction kernel (dst op= src). */
static void limit_call(const struct nc_bench_opts *o, enum nc_bench_kind kind,
                       const unsigned char *src, unsigned char *dst, size_t m)
{
    if (kind == NC_IMPL_MEMCPY) {
        memcpy(dst, src, m);
        __asm__ volatile("" : : "r"(dst) : "memory");
        return;
    }
    int rc = numacoll_reduce_local(src, dst, m / nc_bench_type_bytes(o->type), o->type, o->op);
    if (rc)
        die("reduce-kernel: numacoll_reduce_local (%s on %s) of %zu bytes failed: %s",
            nc_bench_op_name(o->op), nc_bench_type_name(o->type), m, numacoll_strerror(rc));
}

/* The reduction kernel's operands in slots [*ready, upto) of both pools: rank 0's
 * inputs in src, rank 1's in dst (a fixed, sane start: no denormal or NaN left over
 * from another size) */
struct kernel_operands {
    struct red_ref in0, in1;
    long ready;
};

static void kernel_prepare(struct kernel_operands *k, unsigned char *src, unsigned char *dst,
                           size_t m, size_t stride, size_t nbuf, long upto)
{
    for (; k->ready < (long)nbuf && k->ready < upto; k->ready++) {
        red_fill(src + (size_t)k->ready * stride, m, k->in0.in, k->in0.tb);
        red_fill(dst + (size_t)k->ready * stride, m, k->in1.in, k->in1.tb);
    }
}

/* memcpy or reduce-kernel on rank 0 alone, the message's own pool geometry */
static void measure_limit(struct nc_bench_mpi *b, enum nc_bench_kind kind, int c, int impl, int s,
                          size_t m, int run, struct nc_bench_result *out)
{
    const struct nc_bench_opts *o = b->o;
    size_t stride, nbuf;
    nc_bench_pool_geometry(o, b->pool_min, m, &stride, &nbuf);
    if (b->rank == 0) {
        unsigned char *src = b->pool, *dst = b->dst;
        long n, w;
        int kernel = kind == NC_IMPL_KERNEL;
        struct kernel_operands k = {.ready = 0};
        if (kernel) {
            red_ref_init(&k.in0, o, 0, b->p);
            red_ref_init(&k.in1, o, 1, b->p);
        }
#define SLOT(i) ((size_t)((i) % (long)nbuf) * stride)
        if (run == 0) {
            if (kernel)
                kernel_prepare(&k, src, dst, m, stride, nbuf, o->warmup > 1 ? o->warmup : 1);
            double t0 = now();
            limit_call(o, kind, src, dst, m);
            double t1 = now() - t0;
            w = o->warmup;
            if (t1 > 0 && (double)w * t1 > o->time_per_size / 4)
                w = (long)(o->time_per_size / 4 / t1) + 1;
            t0 = now();
            for (long i = 1; i < w; i++)
                limit_call(o, kind, src + SLOT(i), dst + SLOT(i), m);
            double t_est = w > 1 ? (now() - t0) / (double)(w - 1) : t1;
            n = iterations(o, m, t_est);
            b->iters[c][impl][s] = n;
            b->warm[c][impl][s] = (int)w;
        } else {
            n = b->iters[c][impl][s];
            w = b->warm[c][impl][s];
            if (kernel)
                kernel_prepare(&k, src, dst, m, stride, nbuf, w > n ? w : n);
            for (long i = 0; i < w; i++)
                limit_call(o, kind, src + SLOT(i), dst + SLOT(i), m);
        }
        if (kernel)
            kernel_prepare(&k, src, dst, m, stride, nbuf, n);
        double t0 = now();
        for (long i = 0; i < n; i++)
            limit_call(o, kind, src + SLOT(i), dst + SLOT(i), m);
        double t = (now() - t0) / (double)n * 1e6;
#undef SLOT
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

/* Reductions: the checks of pool slot `buf` after call i (slot k): the result on the
 * ranks that get one (check_result: the first call, or every call with --verify-each),
 * the send buffer unchanged, the guard bytes after both buffers. A failure aborts. */
static void red_verify(const struct nc_bench_mpi *b, const struct red_ref *ref,
                       const struct nc_bench_impl *im, enum nc_bench_coll coll,
                       const unsigned char *buf, size_t m, int root, long i, long k, int run,
                       int check_result)
{
    const struct nc_bench_opts *o = b->o;
    const unsigned char *recv = buf + nc_bench_recv_offset(m);
    int gets = coll == NC_BENCH_ALLREDUCE || b->rank == root;
    char what[NC_BENCH_LABEL + 128], got[48], want[48];
    size_t e, g, count = m / ref->tb;
    int len = snprintf(what, sizeof what, "%s: %s (%s on %s) of %zu bytes (%zu element%s)",
                       im->label, mpi_call_name[coll], nc_bench_op_mpi_name(o->op),
                       nc_bench_type_mpi_name(o->type), m, count, count == 1 ? "" : "s");
    if (coll == NC_BENCH_REDUCE && len > 0 && (size_t)len < sizeof what)
        snprintf(what + len, sizeof what - (size_t)len, ", root %d", root);
    if (check_result && gets && (e = red_mismatch(recv, m, ref->want, ref->tb)) != (size_t)-1) {
        format_elem(ref->type, recv + e * ref->tb, got, sizeof got);
        format_elem(ref->type, ref->want + (e % RED_PERIOD) * ref->tb, want, sizeof want);
        die("%s, call %ld of run %d: wrong result at element %zu on %s: %s, expected %s", what, i,
            run + 1, e, coll == NC_BENCH_REDUCE ? "the root" : "this rank", got, want);
    }
    if (check_result && (e = red_mismatch(buf, m, ref->in, ref->tb)) != (size_t)-1) {
        format_elem(ref->type, buf + e * ref->tb, got, sizeof got);
        format_elem(ref->type, ref->in + (e % RED_PERIOD) * ref->tb, want, sizeof want);
        die("%s, call %ld of run %d: the send buffer changed at element %zu: %s, expected %s",
            what, i, run + 1, e, got, want);
    }
    const unsigned char *hit = NULL;
    if ((g = guard_changed(buf, m)) != (size_t)-1)
        hit = buf;
    else if ((g = guard_changed(recv, m)) != (size_t)-1)
        hit = recv;
    if (hit)
        die("%s, buffer %ld, run %d: guard byte %zu after the %s buffer changed: 0x%02x, "
            "expected 0xa5", what, k, run + 1, g, hit == buf ? "send" : "receive", hit[m + g]);
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
    if (im->kind == NC_IMPL_MEMCPY || im->kind == NC_IMPL_KERNEL) {
        measure_limit(b, im->kind, c, impl, s, m, run, out);
        return;
    }
    /* flag-sync moves no data: nothing to fill or check */
    const int data = im->kind != NC_IMPL_SYNC;
    int red = data && nc_bench_coll_is_reduction(coll);
    nc_bench_pool_geometry(o, b->pool_min, nc_bench_slot_bytes(coll, m, b->p), &stride, &nbuf);
    MPI_Comm comm = impl < o->nimpl ? b->comm[impl] : MPI_COMM_NULL; /* cma-copy, flag-sync: none */
    int p = b->p, me = b->rank;
    size_t roff = nc_bench_recv_offset(m);
    struct red_ref ref;
    if (red)
        red_ref_init(&ref, o, me, p);
#define BUF(i) (b->pool + (size_t)((i) % (long)nbuf) * stride + o->buf_offset)

    /* 1. warm-up, and in run 0 the iteration count (reductions: on real inputs, so that no
     * denormal or NaN left over from another size slows a warm-up call down) */
    long n, w;
    if (red) {
        long warm_slots = run == 0 ? (o->warmup > 2 ? o->warmup : 2) + 2 : b->warm[c][impl][s];
        for (long k = 0; k < warm_slots && k < (long)nbuf; k++)
            red_fill(BUF(k), m, ref.in, ref.tb);
    }
    if (run == 0) {
        /* call 0 may set the communicator up and fault pages in: not a sample */
        PMPI_Barrier(MPI_COMM_WORLD);
        call(b, im, coll, comm, BUF(0), m, root_of(o, p, 0));
        /* the budget covers the barrier between calls too: time both */
        double t0 = now();
        PMPI_Barrier(MPI_COMM_WORLD);
        call(b, im, coll, comm, BUF(1), m, root_of(o, p, 1));
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
            call(b, im, coll, comm, BUF(i), m, root_of(o, p, i));
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
            call(b, im, coll, comm, BUF(i), m, root_of(o, p, i));
        }
    }

    /* 2. */
    if (im->kind == NC_IMPL_NUMACOLL && numacoll_mpi_comm_active(comm) != 1)
        die("numacoll is not active on the communicator of \"%s\" (numacoll_mpi_comm_active = %d): "
            "its calls would measure the MPI library, not numacoll; NUMACOLL_VERBOSE=1 says why",
            im->label, numacoll_mpi_comm_active(comm));

    /* 3. */
    long used = n < (long)nbuf ? n : (long)nbuf;
    if (coll == NC_BENCH_BCAST && data && !o->verify_each)
        for (long k = 0; k < used; k++)
            fill(BUF(k), m, pattern_key(run, c, impl, s, k), me != root_of(o, p, k));
    if (red)
        for (long k = 0; k < used; k++) {
            red_fill(BUF(k), m, ref.in, ref.tb);
            red_fill(BUF(k) + roff, m, ref.junk, ref.tb);
        }
    const int xg = data && nc_bench_coll_is_exchange(coll);
    if (xg)
        for (long k = 0; k < used; k++)
            xg_fill(BUF(k), coll, m, p, me, k);

    static const int stat_index[NC_BENCH_NCOLL] = {
        NUMACOLL_MPI_BCAST,     NUMACOLL_MPI_BARRIER,   NUMACOLL_MPI_REDUCE,
        NUMACOLL_MPI_ALLREDUCE, NUMACOLL_MPI_GATHER,    NUMACOLL_MPI_GATHERV,
        NUMACOLL_MPI_SCATTER,   NUMACOLL_MPI_SCATTERV,  NUMACOLL_MPI_ALLGATHER,
        NUMACOLL_MPI_ALLGATHERV, NUMACOLL_MPI_ALLTOALL, NUMACOLL_MPI_ALLTOALLV};
    numacoll_mpi_stats_t st0, st1;
    numacoll_mpi_stats(&st0);
    int cs = stat_index[coll];

    /* 4. */
    double sum = 0;
    if (coll != NC_BENCH_BARRIER) {
        for (long i = 0; i < n; i++) {
            unsigned char *buf = BUF(i);
            int root = root_of(o, p, i);
            if (o->verify_each && xg)
                xg_fill(buf, coll, m, p, me, i % (long)nbuf);
            else if (o->verify_each && red)
                red_fill(buf + roff, m, ref.junk, ref.tb);
            else if (o->verify_each && data)
                fill(buf, m, pattern_key(run, c, impl, s, i), me != root);
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            call(b, im, coll, comm, buf, m, root);
            sum += now() - t0;
            if (o->verify_each && im->kind == NC_IMPL_CMA)
                PMPI_Barrier(MPI_COMM_WORLD); /* nobody refills a buffer another still reads */
            if (o->verify_each && xg) {
                xg_verify(o, im, coll, buf, m, p, me, root, i % (long)nbuf, run);
            } else if (o->verify_each && red) {
                red_verify(b, &ref, im, coll, buf, m, root, i, i % (long)nbuf, run, 1);
            } else if (o->verify_each && data) {
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
            call(b, im, coll, comm, NULL, 0, 0);
        sum = now() - t0;
    }

    /* 5. */
    numacoll_mpi_stats(&st1);
    unsigned long long via_nc = st1.calls_numacoll[cs] - st0.calls_numacoll[cs];
    unsigned long long via_pmpi = st1.calls_pmpi[cs] - st0.calls_pmpi[cs];
    int fallback = 0;
    if (im->kind == NC_IMPL_NUMACOLL) {
        if (via_nc + via_pmpi != (unsigned long long)n)
            die("%s: %ld calls of %s but libnumacoll-mpi saw %llu: the program is not linked "
                "to libnumacoll-mpi before the MPI library%s", im->label, n, mpi_call_name[coll],
                via_nc + via_pmpi, red ? " (or this libnumacoll-mpi does not wrap it yet)" : "");
        fallback = via_pmpi > 0;
    }
    PMPI_Allreduce(MPI_IN_PLACE, &fallback, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    /* 6. (the test suite proves that a wrong byte is caught: it asks for one) */
    const char *corrupt = getenv("NUMACOLL_BENCH_TEST_CORRUPT");
    if (coll == NC_BENCH_BCAST && m > 0 && me == p - 1 && corrupt)
        b->pool[m / 2] ^= 0x10;
    if (xg && m > 0 && corrupt && me == p - 1 && (!xg_rooted(coll) || coll >= NC_BENCH_SCATTER)) {
        /* the last call's slot: its receive blocks */
        unsigned char *last = BUF(n - 1);
        last[nc_bench_recv_offset((size_t)p * m) + m / 2] ^= 0x10;
    }
    if (red && m > 0 && corrupt &&
        (coll == NC_BENCH_ALLREDUCE ? me == p - 1 : me == root_of(o, p, 0)))
        b->pool[roff + m / 2] ^= 0x10;
    if (coll == NC_BENCH_BCAST && data && !o->verify_each)
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
    /* reductions: the first call's result (buffer 0 may have been used again by call
     * nbuf, 2 nbuf, ...: the same inputs, the same result), every buffer's guard bytes */
    /* the gather family: each slot as its last call left it */
    if (xg && !o->verify_each)
        for (long k = 0; k < used; k++) {
            long last = k + (n - 1 - k) / (long)nbuf * (long)nbuf;
            xg_verify(o, im, coll, BUF(k), m, p, me, root_of(o, p, last), k, run);
        }
    if (red && !o->verify_each)
        for (long k = 0; k < used; k++)
            red_verify(b, &ref, im, coll, BUF(k), m, root_of(o, p, k), k, k, run, k == 0);
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
