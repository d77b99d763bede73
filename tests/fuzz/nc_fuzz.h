/*
 * nc_fuzz: the seeded random-input driver for numacoll's parsers (see the header
 * comment of nc_fuzz_main.c for what it does and how to reproduce a failure).
 * This header is what the target files (fuzz_config.c, fuzz_tools.c) share with
 * the driver: the random source, input buffers, mutators and the checks.
 */
#ifndef NC_FUZZ_H
#define NC_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* ---- random source: splitmix64, one independent stream per (seed, target, input) ---- */
typedef struct fz_rng {
    uint64_t s;
} fz_rng_t;

uint64_t fz_next(fz_rng_t *r);
/* uniform in [0, n); n > 0 */
uint64_t fz_below(fz_rng_t *r, uint64_t n);
/* 1 with probability 1/n */
int fz_one_in(fz_rng_t *r, unsigned n);
/* an element of a NULL-terminated or counted list */
#define FZ_PICK(r, arr) ((arr)[fz_below((r), sizeof(arr) / sizeof((arr)[0]))])

/* ---- byte buffers (inputs may hold any byte; C-string inputs never hold NUL) ---- */
#define FZ_MAX_INPUT 8192

typedef struct fz_buf {
    size_t len;
    char b[FZ_MAX_INPUT + 1]; /* always NUL-terminated at len */
} fz_buf_t;

void fz_clear(fz_buf_t *b);
void fz_put(fz_buf_t *b, const char *s, size_t n);
void fz_puts(fz_buf_t *b, const char *s);
void fz_printf(fz_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fz_putc(fz_buf_t *b, int c);

/* A numeric token chosen to hit edges: 0, 1, -1, INT_MAX+-1, 2^31, 2^32, 2^63-1,
 * 2^64, 20-digit numbers, leading zeros, signs, blanks, hex... (no NUL). */
const char *fz_number_token(fz_rng_t *r, char *buf, size_t len);
/* A random byte for string inputs: never NUL; printable, blank, control or high. */
int fz_random_char(fz_rng_t *r);
/* Purely random input: up to max bytes of fz_random_char() (or of `alphabet`). */
void fz_random_bytes(fz_rng_t *r, fz_buf_t *b, size_t max, const char *alphabet);
/* 1..4 byte-level mutations (flip, insert, delete, duplicate, splice with
 * `other`, insert a token from `dict`, replace a digit run with a number
 * token, truncate). allow_nul: also insert NUL bytes (stream inputs only). */
void fz_mutate(fz_rng_t *r, fz_buf_t *b, const char *const *dict, size_t ndict,
               const fz_buf_t *other, int allow_nul);

/* A valid value, or one at the edges of the range, of tunable i (fuzz_config.c). */
void fz_gen_tunable_value(fz_rng_t *r, int i, fz_buf_t *b);

/* ---- checks --------------------------------------------------------------------- */

/* Records a failed invariant of the current input and prints it with the input
 * and the command that reproduces it. The run goes on (up to a limit). */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define FZ_CHECK(cond, ...)                                                       \
    do {                                                                          \
        if (!(cond))                                                              \
            fz_fail(__VA_ARGS__);                                                 \
    } while (0)

/* The rules every rejection message must follow (nc_fuzz_main.c, "Messages"):
 * not empty, not truncated (shorter than cap - 1), one line of printable
 * characters, names the input (contains its leading plain characters, or one
 * of `names` as it is or quoted like fz_escape()), and names the valid form (contains one of `valid`, a
 * NULL-terminated list). `what` labels the failure. */
void fz_check_message(const char *what, const char *msg, size_t cap, const char *input,
                      const char *const *names, const char *const *valid);
/* The quoting of user text in messages (nc_quote's documented form, written
 * independently): into out, at most max - 1 characters, whole escapes only. */
void fz_escape(const char *in, char *out, size_t max);
/* The reverse, for n bytes of a message; returns the length written to out. */
size_t fz_unescape(const char *in, size_t n, char *out, size_t max);
/* The longest leading run of "plain" characters of s (letters, digits and
 * -_.:,=+/ and blank), at most max - 1 of them, into out. */
void fz_plain_prefix(const char *s, char *out, size_t max);
/* Everything written to stderr since the current input started (the library
 * logs with nc_log_error); NUL-terminated, possibly empty. */
const char *fz_stderr_text(void);

/* The current input, for failure reports (set by the targets before parsing,
 * for inputs that are not a single string: option vectors, files). */
void fz_set_input_desc(const char *desc, size_t len);

/* ---- targets ---------------------------------------------------------------------- */
typedef struct fz_target {
    const char *name;
    const char *what;        /* one line: entry point fuzzed */
    long short_count;        /* inputs of the ctest run (scaled by --scale) */
    void (*init)(void);      /* once, before the first input; may be NULL */
    void (*one)(fz_rng_t *r, long index); /* generate one input, parse, check */
} fz_target_t;

extern const fz_target_t fz_target_tunable, fz_target_config_set, fz_target_tree,
    fz_target_tunefile, fz_target_cpulist, fz_target_bind_opts, fz_target_bench_opts;

/* Count the current input as accepted (1) or rejected (0) by its parser. */
void fz_verdict(int accepted);

/* Mode of one input: 0 purely random, 1 grammar-generated, 2 mutated corpus entry. */
int fz_mode(fz_rng_t *r);


#endif
