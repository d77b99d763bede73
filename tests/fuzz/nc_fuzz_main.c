/*
 * nc_fuzz: a seeded random-input driver for every parser of hostile input in
 * numacoll (no libFuzzer, no clang: plain C11, run under ASan+UBSan in
 * build-asan/ and without sanitizers in build/).
 *
 * Targets (one parser entry point each; `nc_fuzz --list`):
 *   tunable     nc_param_parse()         every tunable of the table, any text
 *   config_set  nc_config_set()          name and value, message on stderr
 *   tree        nc_tree_parse()          tree specs (kary:K, knomial:K, ...)
 *   tunefile    nc_tunefile_read_stream() whole tune files
 *   cpulist     nc_bind_cpulist_parse()  numacoll-bind --cpus lists
 *   bind_opts   nc_bind_opts_parse()     numacoll-bind option vectors (+ placement)
 *   bench_opts  nc_bench_opts_parse()    numacoll-bench option vectors
 *
 * Inputs. Input number i of target T is generated from its own random stream,
 * seeded with splitmix64(seed ^ hash(T) ^ (i + 1) * golden ratio), so any input
 * can be regenerated alone (--input i). Each input is, at random:
 *   0. purely random bytes (20 %): any byte but NUL, or the target's alphabet;
 *   1. grammar-generated (30 %): a valid input, or one at the edges of its ranges
 *      (valid tunable values, tree specs, tune files with sections, CPU lists
 *      like 0-7:2,9, option vectors with values);
 *   2. a mutated grammar input (50 %): 1-4 byte mutations (flip, insert, delete,
 *      duplicate, splice with a second input, dictionary tokens, numbers at the
 *      integer limits, long runs, truncation), or token-level ones for vectors.
 *
 * Invariants checked for every input:
 *   - no crash, no ASan/UBSan report (the sanitizer build aborts on the first
 *     one; the death callback / signal handler prints the input first);
 *   - no hang: each input runs under a CPU-time timer (--time-limit-ms, default
 *     2000 ms of CPU: a loaded machine that deschedules the process cannot
 *     fake a hang) and a wall-clock backstop 30 times longer (an input that
 *     blocks); the input that used the most CPU is printed for each target;
 *   - accepted: the result is within the documented range and round-trips:
 *     parse(format(x)) == x for tunables, trees, tune files (write + read back)
 *     and numacoll-bind options; CPU lists equal an independent reference
 *     expansion written from the grammar in docs/bind.md; numeric tunables equal
 *     a reference reading with 128-bit arithmetic (no wrap-around);
 *   - rejected: the message obeys the rules of fz_check_message(): not empty,
 *     not truncated by its buffer, one line without control characters, names
 *     the input (quotes its leading plain characters, or names the option /
 *     variable / file:line, as typed or quoted the way nc_quote() documents)
 *     and names the valid form (range, list of choices, grammar or an
 *     "expected ..." part). numacoll-bind options that parse but ask for more
 *     than the node holds are not a rejection of some text: that message names
 *     the problem and the remedy instead.
 * A target that accepts none or rejects none of its inputs fails too (a broken
 * generator would make the checks above vacuous), and the message rules are
 * themselves checked on known-bad messages at start-up.
 *
 * Reproducing: the seed is printed first; every failure prints the input
 * (C-escaped) and the command line that regenerates it alone, e.g.
 *   nc_fuzz --seed 0x5eed --input 1234 tree
 * Seed: --seed S or NUMACOLL_FUZZ_SEED (decimal or 0x hex), default 0x5eed.
 * Amount: each target has a short default count (the ctest run: a few seconds
 * under ASan); --scale X multiplies it (NUMACOLL_FUZZ_SCALE), --count N sets it.
 * `make fuzz` runs millions of inputs in build-asan/.
 *
 * stderr: the library logs rejected values on stderr; the driver points fd 2 at
 * a memory file (memfd_create) for the whole run (config_set reads its message
 * there) and reports on a duplicate of the original stderr. A sanitizer report,
 * written to the memory file, is copied out before the process dies.
 * Files: none. Tune files are read from and written to memory streams
 * (nc_tunefile_read_stream / nc_tunefile_write_stream), so a run that fails,
 * crashes or is killed leaves nothing in /dev/shm or /tmp.
 */
#include "nc_fuzz.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The sanitizer runtime's hook (absent, i.e. NULL, without -fsanitize). It is
 * ASan's: gcc links UBSan as a separate runtime with its own callbacks, so UBSan
 * is told to abort() instead (below) and SIGABRT is caught like a crash. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
__attribute__((visibility("default"))) const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "abort_on_error=1:print_stacktrace=1";
}

static const fz_target_t *const targets[] = {
    &fz_target_tunable, &fz_target_config_set, &fz_target_tree,      &fz_target_tunefile,
    &fz_target_cpulist, &fz_target_bind_opts,  &fz_target_bench_opts,
};
#define NTARGETS (sizeof targets / sizeof targets[0])

/* ---- state of the run (read by the signal handlers: plain globals) ------------ */
static uint64_t g_seed = 0x5eed;
static const char *g_target = "(none)";
static long g_index = -1;
static int g_report_fd = 2; /* the real stderr */
static int g_capture_fd = -1; /* memory file fd 2 points at */
static char g_desc[2 * FZ_MAX_INPUT + 64];
static size_t g_desc_len;
static long g_failures;
static long g_fail_limit = 20;
static int g_selftest;      /* fz_fail only counts (start-up check of the rules) */
static long g_selftest_hits;
static long g_mode_count[3];
static long g_accepted, g_rejected;

/* ---- random source ---------------------------------------------------------------- */

uint64_t fz_next(fz_rng_t *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t fz_below(fz_rng_t *r, uint64_t n)
{
    return n ? fz_next(r) % n : 0;
}

int fz_one_in(fz_rng_t *r, unsigned n)
{
    return fz_below(r, n) == 0;
}

int fz_mode(fz_rng_t *r)
{
    uint64_t x = fz_below(r, 10);
    int m = x < 2 ? 0 : x < 5 ? 1 : 2;
    g_mode_count[m]++;
    return m;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* ---- buffers ------------------------------------------------------------------------ */

void fz_clear(fz_buf_t *b)
{
    b->len = 0;
    b->b[0] = '\0';
}

void fz_put(fz_buf_t *b, const char *s, size_t n)
{
    if (n > FZ_MAX_INPUT - b->len)
        n = FZ_MAX_INPUT - b->len;
    memcpy(b->b + b->len, s, n);
    b->len += n;
    b->b[b->len] = '\0';
}

void fz_puts(fz_buf_t *b, const char *s)
{
    fz_put(b, s, strlen(s));
}

void fz_putc(fz_buf_t *b, int c)
{
    char ch = (char)c;
    fz_put(b, &ch, 1);
}

void fz_printf(fz_buf_t *b, const char *fmt, ...)
{
    char tmp[FZ_MAX_INPUT];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        fz_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

const char *fz_number_token(fz_rng_t *r, char *buf, size_t len)
{
    static const char *const edges[] = {
        "0", "1", "2", "-1", "-0", "00", "007", "+1", " 1", "1 ", "\t1", "0x10", "1e3", "1.5",
        "63", "64", "65", "4080", "4081", "4095", "4096", "4097", "65535", "65536", "65537",
        "2147483646", "2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295",
        "4294967296", "9007199254740991", "9007199254740992", "8796093022207", "8796093022208",
        "8589934591", "8589934592", "9223372036854775807", "9223372036854775808",
        "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
        "18446744073709551616", "99999999999999999999999999", "1073741824", "1099511627776",
        "1000000000", "1000000001", "1048576", "67108864", "67108865",
    };
    if (fz_one_in(r, 3)) {
        size_t n = 1 + (size_t)fz_below(r, 25), k = 0;
        if (n >= len)
            n = len - 1;
        for (; k < n; k++)
            buf[k] = (char)('0' + fz_below(r, 10));
        buf[k] = '\0';
        return buf;
    }
    snprintf(buf, len, "%s", FZ_PICK(r, edges));
    return buf;
}

int fz_random_char(fz_rng_t *r)
{
    switch (fz_below(r, 8)) {
    case 0:
        return 1 + (int)fz_below(r, 31); /* control characters, incl. \t \n \r */
    case 1:
        return 0x80 + (int)fz_below(r, 128);
    case 2:
        return " \t\n"[fz_below(r, 3)];
    default:
        return 0x20 + (int)fz_below(r, 95);
    }
}

void fz_random_bytes(fz_rng_t *r, fz_buf_t *b, size_t max, const char *alphabet)
{
    size_t n = (size_t)fz_below(r, max + 1), an = alphabet ? strlen(alphabet) : 0;
    if (fz_one_in(r, 2))
        n = (size_t)fz_below(r, 16 < max ? 16 : max + 1); /* short ones are more telling */
    for (size_t i = 0; i < n; i++)
        fz_putc(b, an && !fz_one_in(r, 16) ? alphabet[fz_below(r, an)] : fz_random_char(r));
}

static void buf_insert(fz_buf_t *b, size_t at, const char *s, size_t n)
{
    if (at > b->len)
        at = b->len;
    if (n > FZ_MAX_INPUT - b->len)
        n = FZ_MAX_INPUT - b->len;
    memmove(b->b + at + n, b->b + at, b->len - at);
    memcpy(b->b + at, s, n);
    b->len += n;
    b->b[b->len] = '\0';
}

static void buf_erase(fz_buf_t *b, size_t at, size_t n)
{
    if (at >= b->len)
        return;
    if (n > b->len - at)
        n = b->len - at;
    memmove(b->b + at, b->b + at + n, b->len - at - n);
    b->len -= n;
    b->b[b->len] = '\0';
}

void fz_mutate(fz_rng_t *r, fz_buf_t *b, const char *const *dict, size_t ndict,
               const fz_buf_t *other, int allow_nul)
{
    int n = 1 + (int)fz_below(r, 2) + (int)fz_below(r, 2) * (int)fz_below(r, 3);
    for (int m = 0; m < n; m++) {
        size_t at = (size_t)fz_below(r, b->len + 1);
        char tmp[64];
        switch (fz_below(r, 11)) {
        case 0: /* replace one byte */
            if (b->len) {
                at = (size_t)fz_below(r, b->len);
                b->b[at] = (char)(allow_nul && fz_one_in(r, 8) ? 0 : fz_random_char(r));
            }
            break;
        case 1: { /* insert one byte */
            char c = (char)(allow_nul && fz_one_in(r, 8) ? 0 : fz_random_char(r));
            buf_insert(b, at, &c, 1);
            break;
        }
        case 2: /* delete a range */
            buf_erase(b, at, 1 + (size_t)fz_below(r, 8));
            break;
        case 3:
        case 4: /* a dictionary token */
            if (ndict) {
                const char *t = dict[fz_below(r, ndict)];
                buf_insert(b, at, t, strlen(t));
            }
            break;
        case 5: /* duplicate a chunk */
            if (b->len) {
                size_t from = (size_t)fz_below(r, b->len), l = 1 + (size_t)fz_below(r, 16);
                if (l > b->len - from)
                    l = b->len - from;
                char chunk[16];
                memcpy(chunk, b->b + from, l);
                buf_insert(b, at, chunk, l);
            }
            break;
        case 6: /* splice with another input */
            if (other && other->len) {
                size_t from = (size_t)fz_below(r, other->len);
                size_t l = 1 + (size_t)fz_below(r, other->len - from);
                buf_erase(b, at, (size_t)fz_below(r, 8));
                buf_insert(b, at, other->b + from, l);
            }
            break;
        case 7: { /* a digit run becomes a number at the limits */
            size_t i = 0;
            while (i < b->len && (b->b[i] < '0' || b->b[i] > '9'))
                i++;
            size_t j = i;
            while (j < b->len && b->b[j] >= '0' && b->b[j] <= '9')
                j++;
            const char *t = fz_number_token(r, tmp, sizeof tmp);
            buf_erase(b, i, j - i);
            buf_insert(b, i, t, strlen(t));
            break;
        }
        case 8: /* truncate */
            if (b->len)
                buf_erase(b, (size_t)fz_below(r, b->len), b->len);
            break;
        case 9: { /* a long run: length limits, buffer sizes */
            char run[600];
            size_t l = 1 + (size_t)fz_below(r, sizeof run);
            memset(run, fz_one_in(r, 2) ? '9' : b->len ? b->b[fz_below(r, b->len)] : 'x', l);
            if (!run[0])
                run[0] = 'x', l = 1;
            buf_insert(b, at, run, l);
            break;
        }
        default: /* swap two bytes */
            if (b->len > 1) {
                size_t x = (size_t)fz_below(r, b->len), y = (size_t)fz_below(r, b->len);
                char c = b->b[x];
                b->b[x] = b->b[y];
                b->b[y] = c;
            }
            break;
        }
    }
}

/* ---- reporting (async-signal-safe parts use write() only) ---------------------------- */

static void put_raw(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

static void put_str(int fd, const char *s)
{
    put_raw(fd, s, strlen(s));
}

static void put_num(int fd, unsigned long long v, int hex)
{
    char b[32];
    int i = sizeof b;
    b[--i] = '\0';
    do {
        b[--i] = "0123456789abcdef"[v % (hex ? 16 : 10)];
        v /= hex ? 16 : 10;
    } while (v && i > 2);
    if (hex) {
        b[--i] = 'x';
        b[--i] = '0';
    }
    put_str(fd, b + i);
}

/* C escapes: printable ASCII as is, \\ \" \n \t \r, else \xHH (quotes: only
 * when `quotes`, i.e. inside a quoted input). */
static void put_escaped_q(int fd, const char *s, size_t n, int quotes)
{
    char out[256];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o > sizeof out - 8) {
            put_raw(fd, out, o);
            o = 0;
        }
        if (quotes && (c == '\\' || c == '"')) {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c == '\n' || c == '\t' || c == '\r') {
            out[o++] = '\\';
            out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        } else if (c < 0x20 || c >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = "0123456789abcdef"[c >> 4];
            out[o++] = "0123456789abcdef"[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    put_raw(fd, out, o);
}

static void put_escaped(int fd, const char *s, size_t n)
{
    put_escaped_q(fd, s, n, 1);
}

static void put_input_and_repro(int fd)
{
    put_str(fd, "  input: \"");
    put_escaped(fd, g_desc, g_desc_len);
    put_str(fd, "\"\n  reproduce: nc_fuzz --seed ");
    put_num(fd, g_seed, 1);
    put_str(fd, " --input ");
    put_num(fd, (unsigned long long)g_index, 0);
    put_str(fd, " ");
    put_str(fd, g_target);
    put_str(fd, "\n");
}

void fz_set_input_desc(const char *desc, size_t len)
{
    if (len > sizeof g_desc - 1)
        len = sizeof g_desc - 1;
    memcpy(g_desc, desc, len);
    g_desc[len] = '\0';
    g_desc_len = len;
}

void fz_fail(const char *fmt, ...)
{
    if (g_selftest) {
        g_selftest_hits++;
        return;
    }
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    put_str(g_report_fd, "nc_fuzz: FAIL ");
    put_str(g_report_fd, g_target);
    put_str(g_report_fd, " input #");
    put_num(g_report_fd, (unsigned long long)g_index, 0);
    put_str(g_report_fd, " (seed ");
    put_num(g_report_fd, g_seed, 1);
    put_str(g_report_fd, "): ");
    put_escaped_q(g_report_fd, msg, strlen(msg), 0);
    put_str(g_report_fd, "\n");
    put_input_and_repro(g_report_fd);
    if (++g_failures >= g_fail_limit) {
        put_str(g_report_fd, "nc_fuzz: too many failures, stopping\n");
        exit(1);
    }
}

/* Copy what went to the captured stderr (e.g. a sanitizer report) to the real one. */
static void flush_capture(void)
{
    if (g_capture_fd < 0)
        return;
    char b[4096];
    off_t off = 0;
    ssize_t n;
    while ((n = pread(g_capture_fd, b, sizeof b, off)) > 0) {
        put_raw(g_report_fd, b, (size_t)n);
        off += n;
    }
}

static void died(const char *why)
{
    flush_capture();
    put_str(g_report_fd, "nc_fuzz: ");
    put_str(g_report_fd, why);
    put_str(g_report_fd, " in target ");
    put_str(g_report_fd, g_target);
    put_str(g_report_fd, ", input #");
    put_num(g_report_fd, (unsigned long long)g_index, 0);
    put_str(g_report_fd, " (seed ");
    put_num(g_report_fd, g_seed, 1);
    put_str(g_report_fd, ")\n");
    put_input_and_repro(g_report_fd);
}

static void sanitizer_died(void)
{
    died("sanitizer report (above)");
}

static void on_signal(int sig)
{
    died(sig == SIGPROF   ? "HANG: the input used more CPU time than the per-input limit"
         : sig == SIGALRM ? "HANG: the input blocked past the wall-clock backstop"
         : sig == SIGABRT ? "CRASH: abort (a UBSan report or a failed assert, above)"
                          : "CRASH: fatal signal");
    if (sig == SIGPROF || sig == SIGALRM)
        _exit(1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- stderr capture ---------------------------------------------------------------- */

static char g_captured[8192];

const char *fz_stderr_text(void)
{
    if (g_capture_fd < 0)
        return "";
    ssize_t n = pread(g_capture_fd, g_captured, sizeof g_captured - 1, 0);
    g_captured[n > 0 ? n : 0] = '\0';
    return g_captured;
}

static void capture_reset(void)
{
    if (g_capture_fd >= 0 && lseek(g_capture_fd, 0, SEEK_CUR) > 0) {
        if (ftruncate(g_capture_fd, 0) == 0)
            lseek(g_capture_fd, 0, SEEK_SET);
    }
}

static void capture_start(void)
{
    int fd = memfd_create("nc_fuzz-stderr", MFD_CLOEXEC);
    int rep = dup(2);
    if (fd < 0 || rep < 0 || dup2(fd, 2) < 0) {
        perror("nc_fuzz: stderr capture");
        exit(2);
    }
    g_capture_fd = fd;
    g_report_fd = rep;
}

/* ---- messages ------------------------------------------------------------------------- */

void fz_plain_prefix(const char *s, char *out, size_t max)
{
    size_t n = 0;
    while (s[n] && n + 1 < max &&
           ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
            (s[n] >= '0' && s[n] <= '9') || strchr("-_.:,=+/ ", s[n])))
        n++;
    /* blanks at the end may be dropped by a message that trims */
    while (n && s[n - 1] == ' ')
        n--;
    memcpy(out, s, n);
    out[n] = '\0';
}

/* The quoting every message uses for user text (docs of nc_quote() in
 * src/common/nc_common.h), written again here from the description: '"' and
 * '\\' escaped with a backslash, other bytes outside printable ASCII as \xHH.
 * At most max - 1 characters and never half an escape. */
void fz_escape(const char *in, char *out, size_t max)
{
    size_t o = 0;
    for (; *in; in++) {
        unsigned char c = (unsigned char)*in;
        char e[8];
        if (c == '"' || c == '\\')
            snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            snprintf(e, sizeof e, "\\x%02x", c);
        else
            e[0] = (char)c, e[1] = '\0';
        size_t l = strlen(e);
        if (o + l + 1 > max)
            break;
        memcpy(out + o, e, l);
        o += l;
    }
    out[o] = '\0';
}

size_t fz_unescape(const char *in, size_t n, char *out, size_t max)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < max; i++) {
        char c = in[i];
        if (c == '\\' && i + 1 < n) {
            c = in[++i];
            if (c == 'x' && i + 2 < n && isxdigit((unsigned char)in[i + 1]) &&
                isxdigit((unsigned char)in[i + 2])) {
                char hex[3] = {in[i + 1], in[i + 2], '\0'};
                c = (char)strtol(hex, NULL, 16);
                i += 2;
            }
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return o;
}

/* A name is found in the message as it is, or in the quoted form (its first 60
 * characters: a quoted text is cut after about 64). */
static int message_names(const char *msg, const char *name)
{
    char esc[64];
    if (!name[0])
        return 0;
    if (strstr(msg, name))
        return 1;
    fz_escape(name, esc, sizeof esc - 3);
    return esc[0] && strstr(msg, esc) != NULL;
}

void fz_check_message(const char *what, const char *msg, size_t cap, const char *input,
                      const char *const *names, const char *const *valid)
{
    size_t len = strlen(msg);
    if (!len) {
        fz_fail("%s: rejected with an empty message", what);
        return;
    }
    if (len >= cap - 1)
        fz_fail("%s: message fills its %zu-byte buffer (truncated): \"%s\"", what, cap, msg);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) {
            fz_fail("%s: control character 0x%02x at %zu of the message (one line, "
                    "printable): \"%s\"", what, (unsigned char)msg[i], i, msg);
            break;
        }
    int named = 0;
    for (int k = 0; names && names[k]; k++)
        if (message_names(msg, names[k]))
            named = 1;
    char plain[25];
    if (input) {
        fz_plain_prefix(input, plain, sizeof plain);
        if (plain[0] && strstr(msg, plain))
            named = 1;
        if (!plain[0] && !names)
            named = 1; /* nothing to look for: the input starts with an odd byte */
    }
    if (!named)
        fz_fail("%s: message does not name the input (\"%s\"%s): \"%s\"", what,
                input ? plain : "", names && names[0] ? " or the option/variable" : "", msg);
    if (valid) {
        int found = 0;
        for (int k = 0; valid[k] && !found; k++)
            found = strstr(msg, valid[k]) != NULL;
        if (!found)
            fz_fail("%s: message does not name the valid form (none of \"%s\"...): \"%s\"",
                    what, valid[0], msg);
    }
}

/* The rules above can fail: known-bad messages must each be caught, and known-good
 * ones must pass (so that neither direction is vacuous). */
static void selftest_one(int i, const char *msg, size_t cap, const char *input,
                         const char *const *names, int bad)
{
    static const char *const valid[] = {"valid", NULL};
    g_selftest = 1;
    g_selftest_hits = 0;
    fz_check_message("selftest", msg, cap, input, names, valid);
    g_selftest = 0;
    if (!g_selftest_hits != !bad) {
        fprintf(stderr, "nc_fuzz: self-test %d: message rules %s \"%s\"\n", i,
                bad ? "accepted the bad" : "rejected the good", msg);
        exit(2);
    }
}

static void selftest(void)
{
    static const char *const np[] = {"--np", NULL};
    static const char *const ctl_b[] = {"--a\x01" "b", NULL};
    static const char *const ctl_c[] = {"--a\x01" "c", NULL};
    /* bad: empty, truncated, two lines, input not named, valid form missing, a
     * quoted (escaped) word that is not the input's */
    selftest_one(0, "", 64, "x", np, 1);
    selftest_one(1, "--np: \"abc\" is not an integer (valid: 1..9)", 20, "abc", np, 1);
    selftest_one(2, "--np: \"a\nb\" is not (valid: 1..9)", 256, "a\nb", np, 1);
    selftest_one(3, "something is wrong (valid: 1..9)", 256, "abc", NULL, 1);
    selftest_one(4, "--np: \"abc\" is not an integer", 256, "abc", np, 1);
    selftest_one(5, "unknown option \"--a\\x01b\" (valid: --np)", 256, NULL, ctl_c, 1);
    /* good: plain, and a word with a control character quoted by nc_quote() */
    selftest_one(6, "--np: \"abc\" is not an integer (valid: 1..9)", 256, "abc", np, 0);
    selftest_one(7, "unknown option \"--a\\x01b\" (valid: --np)", 256, NULL, ctl_b, 0);
}

/* ---- driver ---------------------------------------------------------------------------- */

void fz_verdict(int accepted)
{
    if (accepted)
        g_accepted++;
    else
        g_rejected++;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (!*s || *end || errno || *s == '-')
        return -1;
    *out = v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nc_fuzz [--seed S] [--scale X | --count N] [--input I] [--time-limit-ms MS]\n"
            "               [--max-failures N] [--no-capture] [--list] [TARGET...]\n"
            "  --seed S           seed (decimal or 0x hex; env NUMACOLL_FUZZ_SEED; default 0x5eed)\n"
            "  --scale X          X times each target's short count (env NUMACOLL_FUZZ_SCALE)\n"
            "  --count N          N inputs per target\n"
            "  --input I          only input I (reproduce a failure; prints it)\n"
            "  --time-limit-ms MS per-input CPU time bound (default 2000; wall backstop 30x)\n"
            "  --max-failures N   stop after N failed invariants (default 20)\n"
            "  --no-capture       leave stderr alone (library messages interleave)\n"
            "  TARGET             one or more of the --list names (default: all)\n");
}

int main(int argc, char **argv)
{
    double scale = 1;
    long count = -1, only = -1, limit_ms = 2000;
    int capture = 1, chosen[NTARGETS] = {0}, nchosen = 0;
    const char *e = getenv("NUMACOLL_FUZZ_SEED");
    if (e && *e && parse_u64(e, &g_seed)) {
        fprintf(stderr, "nc_fuzz: NUMACOLL_FUZZ_SEED=\"%s\" is not a number\n", e);
        return 2;
    }
    e = getenv("NUMACOLL_FUZZ_SCALE");
    if (e && *e)
        scale = atof(e);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (!strcmp(a, "--seed") && i + 1 < argc) {
            if (parse_u64(argv[++i], &g_seed)) {
                fprintf(stderr, "nc_fuzz: --seed \"%s\" is not a number\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--scale") && i + 1 < argc) {
            scale = atof(argv[++i]);
        } else if (!strcmp(a, "--count") && i + 1 < argc && !parse_u64(argv[i + 1], &v)) {
            count = (long)v;
            i++;
        } else if (!strcmp(a, "--input") && i + 1 < argc && !parse_u64(argv[i + 1], &v)) {
            only = (long)v;
            i++;
        } else if (!strcmp(a, "--time-limit-ms") && i + 1 < argc && !parse_u64(argv[i + 1], &v)) {
            limit_ms = (long)v;
            i++;
        } else if (!strcmp(a, "--max-failures") && i + 1 < argc &&
                   !parse_u64(argv[i + 1], &v) && v > 0) {
            g_fail_limit = (long)v;
            i++;
        } else if (!strcmp(a, "--no-capture")) {
            capture = 0;
        } else if (!strcmp(a, "--list")) {
            for (size_t t = 0; t < NTARGETS; t++)
                printf("%-11s %8ld  %s\n", targets[t]->name, targets[t]->short_count,
                       targets[t]->what);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            size_t t = 0;
            while (t < NTARGETS && strcmp(a, targets[t]->name))
                t++;
            if (t == NTARGETS) {
                fprintf(stderr, "nc_fuzz: unknown argument \"%s\"\n", a);
                usage(stderr);
                return 2;
            }
            chosen[t] = 1;
            nchosen++;
        }
    }
    if (!(scale > 0) || scale > 1e6) {
        fprintf(stderr, "nc_fuzz: scale must be in (0, 1e6]\n");
        return 2;
    }
    selftest();
    printf("nc_fuzz: seed 0x%llx (override with --seed or NUMACOLL_FUZZ_SEED), per-input "
           "limit %ld ms CPU%s\n",
           (unsigned long long)g_seed, limit_ms,
           __sanitizer_set_death_callback ? ", sanitizers on" : "");
    fflush(stdout);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGPROF, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    if (__sanitizer_set_death_callback) {
        __sanitizer_set_death_callback(sanitizer_died);
    } else {
        int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
        for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
            sigaction(sigs[k], &sa, NULL);
    }
    if (capture && only < 0)
        capture_start();

    long total = 0;
    double t_all = now_s();
    for (size_t t = 0; t < NTARGETS; t++) {
        const fz_target_t *tg = targets[t];
        if (nchosen && !chosen[t])
            continue;
        long n = count >= 0 ? count : (long)(tg->short_count * scale);
        if (n < 1)
            n = 1;
        g_target = tg->name;
        g_index = -1;
        g_desc_len = 0;
        if (tg->init)
            tg->init();
        memset(g_mode_count, 0, sizeof g_mode_count);
        g_accepted = g_rejected = 0;
        long f0 = g_failures, slow_i = -1, first = only >= 0 ? only : 0;
        long last = only >= 0 ? only + 1 : n;
        double slow = 0, t0 = now_s(), c0 = cpu_s();
        uint64_t h = fnv1a(tg->name);
        long wall_ms = 30 * limit_ms;
        struct itimerval arm = {{0, 0}, {limit_ms / 1000, (limit_ms % 1000) * 1000}};
        struct itimerval arm_wall = {{0, 0}, {wall_ms / 1000, (wall_ms % 1000) * 1000}};
        struct itimerval off = {{0, 0}, {0, 0}};
        for (long i = first; i < last; i++) {
            fz_rng_t r = {g_seed ^ h ^ ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull};
            fz_next(&r);
            g_index = i;
            g_desc_len = 0;
            capture_reset();
            double s = cpu_s();
            setitimer(ITIMER_PROF, &arm, NULL);
            setitimer(ITIMER_REAL, &arm_wall, NULL);
            tg->one(&r, i);
            setitimer(ITIMER_PROF, &off, NULL);
            setitimer(ITIMER_REAL, &off, NULL);
            s = cpu_s() - s;
            if (s > slow) {
                slow = s;
                slow_i = i;
            }
            if (only >= 0) {
                printf("input #%ld of %s: \"", i, tg->name);
                fflush(stdout);
                put_escaped(1, g_desc, g_desc_len);
                printf("\"\n%s\n", g_accepted ? "accepted" : "rejected");
            }
        }
        long done = last - first;
        total += done;
        if (only < 0 && done >= 100 && (!g_accepted || !g_rejected)) {
            g_index = -1;
            fz_fail("the generator is broken: %ld accepted, %ld rejected out of %ld inputs",
                    g_accepted, g_rejected, done);
        }
        double cpu = cpu_s() - c0;
        printf("nc_fuzz: %-11s %9ld inputs (%ld random, %ld grammar, %ld mutated): %ld accepted, "
               "%ld rejected; slowest %.2f ms CPU (#%ld); %.1f s, %.1f s CPU, %.0f inputs per "
               "CPU second%s\n",
               tg->name, done, g_mode_count[0], g_mode_count[1], g_mode_count[2], g_accepted,
               g_rejected, slow * 1e3, slow_i, now_s() - t0, cpu, cpu > 0 ? done / cpu : 0.0,
               g_failures > f0 ? "  FAILED" : "");
        fflush(stdout);
    }
    printf("nc_fuzz: %ld inputs in %.1f s, seed 0x%llx: %s\n", total, now_s() - t_all,
           (unsigned long long)g_seed, g_failures ? "FAILED" : "all invariants held");
    return g_failures ? 1 : 0;
}
