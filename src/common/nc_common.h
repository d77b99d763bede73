/*
 * Compiler and machine helpers shared by every module of the core.
 */
#ifndef NC_COMMON_H
#define NC_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numacoll.h"

/* An error of one call only, which every member completed (the data of a
 * later call that reports it late is good): a size (TRUNCATE) or a root
 * (ROOT) that differs between the members. Anything else broke the team. */
static inline int nc_call_error(int rc)
{
    return rc == NUMACOLL_ERR_TRUNCATE || rc == NUMACOLL_ERR_ROOT;
}

#define NC_CACHELINE 64
#define NC_ALIGNED(n) __attribute__((aligned(n)))
#define NC_LIKELY(x) __builtin_expect(!!(x), 1)
#define NC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NC_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define NC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define NC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* This process's rank as its launcher tells it in the environment (Open
 * MPI, PMIx, Hydra/PMI, Slurm, MVAPICH), before or without MPI_Init; -1 when
 * nobody says (a singleton). */
static inline int nc_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID", "MV2_COMM_WORLD_RANK"};
    for (size_t i = 0; i < NC_ARRAY_SIZE(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

static inline size_t nc_round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/* One pause in a spin loop: tells the core we are spinning (x86 PAUSE, arm YIELD). */
static inline void nc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * memcpy for the bulk copies between user buffers and the segment. When the
 * destination is 1 to 31 bytes past the source modulo 4 KiB (a reader's
 * malloc()ed buffer, 16 bytes into its page, filled from a page-aligned
 * segment buffer), every load aliases the store just before it (4K aliasing)
 * and glibc 2.36's `rep movsb` drops from ~50 GB/s to 2-12 GB/s on the
 * development node (AMD EPYC; a cache-resident broadcast of 4 MiB through the
 * segment took 7 times longer, 2-3 times off-cache). Such copies go backward
 * in 64-byte blocks, where a load never follows a store to the same low
 * address bits; all others are memcpy.
 */
static inline void nc_copy(void *dst, const void *src, size_t n)
{
    if (n >= 1024 && ((((uintptr_t)dst - (uintptr_t)src) & 4095) - 1) < 31) {
        char *d = (char *)dst + n;
        const char *s = (const char *)src + n;
        while (n >= 64) {
            d -= 64;
            s -= 64;
            n -= 64;
            __builtin_memcpy(d, s, 64);
        }
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, n);
}

/*
 * A copy into shared memory with non-temporal stores: the bytes go to memory,
 * not into this core's cache, so readers on cores that share no cache with it
 * stream them from memory instead of fetching each line out of this core's
 * cache (on the development node's host, lines from another core complex come
 * slower than from DRAM). The stores are weakly ordered: nc_copy_nt_fence()
 * before the release that publishes them. Elsewhere than x86-64: nc_copy.
 */
#if defined(__x86_64__)
#include <emmintrin.h>
static inline void nc_copy_nt(void *dst, const void *src, size_t n)
{
    char *d = (char *)dst;
    const char *s = (const char *)src;
    if (n < 256) {
        memcpy(d, s, n);
        return;
    }
    /* streamed from a line boundary: a partial line stays cached (a slot's
     * header shares its first line with the first data bytes) */
    const size_t head = (size_t)(-(uintptr_t)d & 63);
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        const __m128i a = _mm_loadu_si128((const __m128i *)s);
        const __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        const __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        const __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, n);
}
/* Orders the non-temporal stores before every later store (the release). */
static inline void nc_copy_nt_fence(void)
{
    _mm_sfence();
}
#else
static inline void nc_copy_nt(void *dst, const void *src, size_t n)
{
    nc_copy(dst, src, n);
}
static inline void nc_copy_nt_fence(void)
{
}
#endif

/* Logging: errors always go to stderr; info only at NUMACOLL_VERBOSE >= level. */
void nc_log_error(const char *fmt, ...) NC_PRINTF(1, 2);
void nc_log_info(int level, const char *fmt, ...) NC_PRINTF(2, 3);
int nc_log_level(void);
/* Lines printed once per process: a line identical to one already printed
 * (a bad tunable, a fallback reason met at every set-up) is dropped; the
 * warning's key names the kind of event, so that its first occurrence only is
 * printed whatever its numbers. NUMACOLL_VERBOSE >= 2 prints every one. */
void nc_log_error_once(const char *fmt, ...) NC_PRINTF(1, 2);
void nc_log_warn_once(const char *key, const char *fmt, ...) NC_PRINTF(2, 3);

/* User text (an option value, a tunable, a line of a file) as a message shows
 * it between double quotes: one line of printable ASCII, with C escapes for
 * '"' and '\\' and \xHH for every byte that is not printable ASCII, cut with
 * "..." after NC_QUOTE_MAX characters so that the valid form after it still
 * fits the message. Returns buf; a buffer of NC_QUOTE_LEN bytes holds any
 * text. NULL quotes as (null). Defined in nc_quote.c (library nc_text too). */
#define NC_QUOTE_MAX 64
#define NC_QUOTE_LEN (NC_QUOTE_MAX + 8)
const char *nc_quote(char *buf, size_t len, const char *text);

uint64_t nc_time_ns(void);
size_t nc_page_size(void);

/* FNV-1a, 64-bit: h = nc_fnv1a(NC_FNV1A_BASIS, p, n), and again with the
 * result to hash more bytes after those. */
#define NC_FNV1A_BASIS 14695981039346656037ull
static inline uint64_t nc_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
