/*
 * nc_fuzz targets of the core library: tunable values (nc_param_parse), tunables
 * set by name (nc_config_set), tree specs (nc_tree_parse) and tune files
 * (nc_tunefile_read_stream). See nc_fuzz_main.c for the invariants.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/nc_config.h"
#include "config/nc_tunefile.h"
#include "nc_fuzz.h"
#include "numacoll.h"
#include "tree/nc_tree.h"

/* Error buffers as the library's callers size them (nc_config.c, nc_tunefile.c). */
#define ERRLEN 256

static const char *const value_dict[] = {
    "k", "K", "m", "M", "g", "G", "KiB", "kib", "MiB", "b", "B", "iB", " ", "  ", "\t", "\n",
    "-", "+", "0", "9", ":", "kary:", "knomial:", "flat", "chain", "binary", "paper",
    "compact", "auto", "central", "|", ",", "=", "e", "x", ".", "%s", "%n", "\"", "\\",
    "on", "OFF", "yes", "No", "true", "fAlse",
};

/* ---- valid (or nearly valid) values of every tunable type ----------------------------- */

static void gen_tree(fz_rng_t *r, fz_buf_t *b)
{
    static const char *const fixed[] = {"flat", "chain", "binary"};
    static const char *const kinds[] = {"kary:", "knomial:"};
    char num[64];
    switch (fz_below(r, 4)) {
    case 0:
        fz_puts(b, FZ_PICK(r, fixed));
        break;
    case 1:
        fz_printf(b, "%s%d", FZ_PICK(r, kinds), (int)fz_below(r, 70000));
        break;
    case 2:
        fz_printf(b, "%s%d", FZ_PICK(r, kinds), (int)fz_below(r, 10));
        break;
    default:
        fz_printf(b, "%s%s", FZ_PICK(r, kinds), fz_number_token(r, num, sizeof num));
        break;
    }
}

static int nchoices(const char *choices)
{
    int n = 1;
    for (; *choices; choices++)
        n += *choices == '|';
    return n;
}

static void gen_value(fz_rng_t *r, int i, fz_buf_t *b)
{
    const nc_param_desc_t *d = nc_param_desc(i);
    switch (d->type) {
    case NC_PT_INT:
    case NC_PT_SIZE: {
        int64_t v;
        switch (fz_below(r, 7)) {
        case 0: v = d->min; break;
        case 1: v = d->max; break;
        case 2: v = d->min - 1; break;
        case 3: v = d->max + 1; break;
        default: v = d->min + (int64_t)fz_below(r, (uint64_t)(d->max - d->min) + 1); break;
        }
        static const char *const ksuf[] = {"k", "K", "kb", "KB", "kib", "KiB", "Kib"};
        static const char *const msuf[] = {"m", "M", "mb", "MiB", "mIb"};
        static const char *const gsuf[] = {"g", "G", "GiB", "gb"};
        if (d->type == NC_PT_SIZE && fz_one_in(r, 2)) {
            int sh = (int)fz_below(r, 3);
            const char *suf = sh == 0 ? FZ_PICK(r, ksuf) : sh == 1 ? FZ_PICK(r, msuf) : FZ_PICK(r, gsuf);
            int64_t unit = (int64_t)1 << (10 * (sh + 1));
            fz_printf(b, "%" PRId64 "%s", fz_one_in(r, 4) ? v : v / unit, suf);
        } else {
            fz_printf(b, "%" PRId64, v);
        }
        if (fz_one_in(r, 8))
            fz_puts(b, " ");
        break;
    }
    case NC_PT_TREE:
        gen_tree(r, b);
        break;
    case NC_PT_ENUM: {
        int n = nchoices(d->choices), k = (int)fz_below(r, n);
        const char *c = d->choices;
        for (int j = 0; j < k; j++)
            c += strcspn(c, "|") + 1;
        size_t len = strcspn(c, "|");
        if (fz_one_in(r, 6) && len > 1)
            len--; /* a prefix: must be rejected */
        /* on/off: now and then a synonym (1/yes/true, 0/no/false) */
        static const char *const syn[2][3] = {{"0", "no", "FALSE"}, {"1", "Yes", "true"}};
        const int on = len == 2 && !strncmp(c, "on", 2), off = len == 3 && !strncmp(c, "off", 3);
        if ((on || off) && fz_one_in(r, 3)) {
            fz_puts(b, syn[on][fz_below(r, 3)]);
            break;
        }
        for (size_t j = 0; j < len; j++)
            fz_putc(b, fz_one_in(r, 5) ? toupper((unsigned char)c[j]) : c[j]);
        break;
    }
    }
}

void fz_gen_tunable_value(fz_rng_t *r, int i, fz_buf_t *b)
{
    gen_value(r, i, b);
}

/* One tunable value: random, generated or mutated. */
static void make_value(fz_rng_t *r, int i, fz_buf_t *b)
{
    fz_clear(b);
    int mode = fz_mode(r);
    if (mode == 0) {
        fz_random_bytes(r, b, 40, fz_one_in(r, 2) ? "0123456789kmgKMGib :-+" : NULL);
        return;
    }
    gen_value(r, i, b);
    if (mode == 2) {
        static fz_buf_t other;
        fz_clear(&other);
        gen_value(r, (int)fz_below(r, NC_PARAM_COUNT), &other);
        fz_mutate(r, b, value_dict, sizeof value_dict / sizeof value_dict[0], &other, 0);
    }
}

/* ---- reference reading of integers and sizes (what the docs promise) ----------------
 * strtoll's syntax (leading white space, one sign, decimal digits, no overflow of
 * int64), then for sizes one of k/m/g (binary) optionally followed by "b" or "ib"
 * (any case), then blanks. The value times the unit, in 128-bit arithmetic, must
 * be within [min, max]. Returns 1 and *out when the text should be accepted. */
static int ref_int(const char *s, int size, int64_t min, int64_t max, int64_t *out)
{
    while (isspace((unsigned char)*s))
        s++;
    int neg = 0;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (!isdigit((unsigned char)*s))
        return 0;
    __int128 v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s++ - '0');
        if (v > ((__int128)1 << 64))
            v = (__int128)1 << 64; /* saturate: out of range anyway */
    }
    if (neg)
        v = -v;
    if (v > INT64_MAX || v < INT64_MIN)
        return 0; /* strtoll: ERANGE */
    __int128 mult = 1;
    if (size && *s && strchr("kKmMgG", *s)) {
        mult = (__int128)1 << (*s == 'k' || *s == 'K' ? 10 : *s == 'm' || *s == 'M' ? 20 : 30);
        s++;
        if (!strcasecmp(s, "ib") || !strcasecmp(s, "b"))
            s += strlen(s);
    }
    while (*s == ' ')
        s++;
    if (*s)
        return 0;
    v *= mult;
    if (v < min || v > max)
        return 0;
    *out = (int64_t)v;
    return 1;
}

/* A switch (unit "bool") also takes off/on, no/yes, false/true, in any case, and
 * nothing around them. Returns 1 and *out when the text is one of them. */
static int ref_bool_word(const nc_param_desc_t *d, const char *s, int64_t *out)
{
    static const char *const words[] = {"off", "on", "no", "yes", "false", "true"};
    if (!d->unit || strcmp(d->unit, "bool"))
        return 0;
    for (int i = 0; i < 6; i++)
        if (!strcasecmp(s, words[i])) {
            *out = i % 2;
            return 1;
        }
    return 0;
}

/* An enum with the choices on and off also takes 1/yes/true and 0/no/false:
 * 1 when in is one of them and names choice `as`. */
static int ref_enum_synonym(const nc_param_desc_t *d, const char *in, const char *as)
{
    static const char *const words[] = {"0", "1", "off", "on", "no", "yes", "false", "true"};
    if (!strstr(d->choices, "on|off") && !strstr(d->choices, "off|on"))
        return 0;
    for (int i = 0; i < 8; i++)
        if (!strcasecmp(in, words[i]))
            return !strcmp(as, i % 2 ? "on" : "off");
    return 0;
}

/* ref_int(), or a switch's word. */
static int ref_num(const nc_param_desc_t *d, const char *s, int64_t *out)
{
    return ref_bool_word(d, s, out) || ref_int(s, d->type == NC_PT_SIZE, d->min, d->max, out);
}

static int is_canonical_tree(const char *in, nc_tree_kind_t kind, int k)
{
    char canon[32];
    nc_tree_format(kind, k, canon, sizeof canon);
    /* any case, as the enums' words */
    if (!strcasecmp(in, canon) || (!strcasecmp(in, "binary") && kind == NC_TREE_KARY && k == 2))
        return 1;
    /* kary:007 names kary:7 (leading zeros are digits too) */
    const char *colon = strchr(canon, ':'), *icolon = strchr(in, ':');
    if (!colon || !icolon || (size_t)(icolon - in) != (size_t)(colon - canon) ||
        strncasecmp(in, canon, (size_t)(colon - canon)))
        return 0;
    const char *d = icolon + 1;
    while (*d == '0' && d[1])
        d++;
    for (const char *c = icolon + 1; *c; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    return !strcmp(d, colon + 1);
}

/* The checks of an accepted value: documented range, canonical text, round trip. */
static void check_accepted_value(int i, const char *in, const nc_param_value_t *v)
{
    const nc_param_desc_t *d = nc_param_desc(i);
    nc_param_value_t again = {0};
    char err[ERRLEN];
    switch (d->type) {
    case NC_PT_INT:
    case NC_PT_SIZE: {
        int64_t want;
        FZ_CHECK(v->num >= d->min && v->num <= d->max, "NUMACOLL_%s: accepted %" PRId64
                 " outside %" PRId64 "..%" PRId64, d->name, v->num, d->min, d->max);
        FZ_CHECK(ref_num(d, in, &want) && want == v->num,
                 "NUMACOLL_%s: accepted as %" PRId64 ", but the text means %s", d->name,
                 v->num, ref_num(d, in, &want) ? "another number" : "no valid value");
        char canon[32];
        snprintf(canon, sizeof canon, "%" PRId64, v->num);
        FZ_CHECK(!strcmp(v->text, canon), "NUMACOLL_%s: canonical text \"%s\" for %" PRId64,
                 d->name, v->text, v->num);
        break;
    }
    case NC_PT_TREE:
        FZ_CHECK((v->num == NC_TREE_KARY && v->aux >= 1 && v->aux <= NC_TREE_MAX_K) ||
                     (v->num == NC_TREE_KNOMIAL && v->aux >= 2 && v->aux <= NC_TREE_MAX_K) ||
                     ((v->num == NC_TREE_FLAT || v->num == NC_TREE_CHAIN) && v->aux == 0),
                 "NUMACOLL_%s: tree kind %" PRId64 " k %" PRId64 " out of range", d->name,
                 v->num, v->aux);
        FZ_CHECK(is_canonical_tree(in, (nc_tree_kind_t)v->num, (int)v->aux),
                 "NUMACOLL_%s: \"%s\" accepted as %s (a spelling the docs do not list)", d->name,
                 in, v->text);
        break;
    case NC_PT_ENUM:
        FZ_CHECK(v->num >= 0 && v->num < nchoices(d->choices), "NUMACOLL_%s: choice %" PRId64,
                 d->name, v->num);
        FZ_CHECK((!strcasecmp(in, v->text) || ref_enum_synonym(d, in, v->text)) &&
                     strstr(d->choices, v->text),
                 "NUMACOLL_%s: \"%s\" accepted as \"%s\"", d->name, in, v->text);
        break;
    }
    /* round trip: the canonical text parses to the same value */
    if (nc_param_parse(i, v->text, &again, err, sizeof err))
        fz_fail("NUMACOLL_%s: canonical \"%s\" rejected: %s", d->name, v->text, err);
    else
        FZ_CHECK(again.num == v->num && again.aux == v->aux && !strcmp(again.text, v->text),
                 "NUMACOLL_%s: \"%s\" -> \"%s\" does not round-trip", d->name, in, v->text);
}

static void check_rejected_value(const char *what, int i, const char *in, const char *msg,
                                 size_t cap)
{
    const nc_param_desc_t *d = nc_param_desc(i);
    char var[80], range[96];
    snprintf(var, sizeof var, "NUMACOLL_%s", d->name);
    nc_param_range_text(i, range, sizeof range);
    if (d->type == NC_PT_TREE)
        snprintf(range, sizeof range, "kary:K");
    const char *const valid[] = {range, NULL};
    FZ_CHECK(strstr(msg, var), "%s: message does not name %s: \"%s\"", what, var, msg);
    fz_check_message(what, msg, cap, in, NULL, valid);
    /* the documented range must be what the parser enforces */
    int64_t want;
    if ((d->type == NC_PT_INT || d->type == NC_PT_SIZE) && ref_num(d, in, &want))
        fz_fail("%s: %s=\"%s\" rejected, but it is %" PRId64 ", within %s", what, var, in, want,
                range);
}

static void desc_kv(const char *k, const char *v)
{
    char d[FZ_MAX_INPUT + 128];
    int n = snprintf(d, sizeof d, "%s=%s", k ? k : "(null)", v ? v : "(null)");
    fz_set_input_desc(d, n < 0 ? 0 : (size_t)n < sizeof d ? (size_t)n : sizeof d - 1);
}

/* ---- target: nc_param_parse ------------------------------------------------------------ */

static void tunable_one(fz_rng_t *r, long idx)
{
    (void)idx;
    static fz_buf_t in;
    int i = (int)fz_below(r, NC_PARAM_COUNT);
    make_value(r, i, &in);
    desc_kv(nc_param_desc(i)->name, in.b);
    nc_param_value_t v = {.source = NC_SRC_ENV};
    char err[ERRLEN] = "";
    int rc = nc_param_parse(i, in.b, &v, err, sizeof err);
    fz_verdict(rc == 0);
    if (rc == 0) {
        FZ_CHECK(v.source == NC_SRC_ENV, "source not kept");
        check_accepted_value(i, in.b, &v);
    } else {
        FZ_CHECK(rc == NUMACOLL_ERR_TUNABLE, "rc %d", rc);
        check_rejected_value("nc_param_parse", i, in.b, err, sizeof err);
    }
}

const fz_target_t fz_target_tunable = {
    "tunable", "nc_param_parse(): every tunable, any text", 60000, NULL, tunable_one,
};

/* ---- target: nc_config_set (the message goes to the log) ------------------------------- */

static void config_set_init(void)
{
    nc_config_reload();
}

static void config_set_one(fz_rng_t *r, long idx)
{
    static fz_buf_t name, value;
    int i = (int)fz_below(r, NC_PARAM_COUNT);
    if (idx % 500 == 0)
        nc_config_reload(); /* back to the environment now and then */
    fz_clear(&name);
    switch (fz_below(r, 6)) {
    case 0:
        fz_random_bytes(r, &name, 30, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
        break;
    case 1: {
        fz_printf(&name, "NUMACOLL_%s", nc_param_desc(i)->name);
        fz_mutate(r, &name, value_dict, sizeof value_dict / sizeof value_dict[0], NULL, 0);
        break;
    }
    case 2:
        for (const char *c = nc_param_desc(i)->name; *c; c++)
            fz_putc(&name, tolower((unsigned char)*c));
        break;
    case 3:
        fz_puts(&name, nc_param_desc(i)->name);
        break;
    default:
        fz_printf(&name, "NUMACOLL_%s", nc_param_desc(i)->name);
        break;
    }
    make_value(r, i, &value);
    int null_value = fz_one_in(r, 200);
    desc_kv(name.b, null_value ? NULL : value.b);
    int rc = nc_config_set(name.b, null_value ? NULL : value.b, NC_SRC_API);
    const char *log = fz_stderr_text();
    fz_verdict(rc == 0);
    int j = nc_param_lookup(name.b);
    if (rc == 0) {
        char got[128];
        const char *src = NULL;
        nc_param_value_t v = {0};
        char err[ERRLEN];
        FZ_CHECK(j >= 0, "unknown name \"%s\" accepted", name.b);
        FZ_CHECK(!log[0], "accepted, but logged: %s", log);
        if (j < 0)
            return;
        FZ_CHECK(!nc_param_parse(j, value.b, &v, err, sizeof err), "set accepted what parse "
                 "rejects: %s", err);
        FZ_CHECK(!numacoll_param_get(name.b, got, sizeof got, &src) && !strcmp(got, v.text) &&
                     !strcmp(src, "api"),
                 "numacoll_param_get(%s) = \"%s\" (%s), expected \"%s\" (api)", name.b, got,
                 src ? src : "?", v.text);
        return;
    }
    /* the log holds one line: "numacoll[pid] error: <message>\n" */
    const char *msg = strstr(log, "error: ");
    size_t loglen = strlen(log);
    FZ_CHECK(msg && loglen && log[loglen - 1] == '\n' && !memchr(log, '\n', loglen - 1),
             "rejected (rc %d) without exactly one log line: \"%s\"", rc, log);
    if (!msg)
        return;
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(msg + 7, "\n"), msg + 7);
    if (j < 0) {
        static const char *const valid[] = {"numacoll-info --params", NULL};
        FZ_CHECK(rc == NUMACOLL_ERR_INVAL, "unknown name: rc %d", rc);
        fz_check_message("nc_config_set (unknown name)", line, ERRLEN, name.b, NULL, valid);
    } else if (null_value) {
        FZ_CHECK(rc == NUMACOLL_ERR_TUNABLE, "NULL value: rc %d", rc);
    } else {
        FZ_CHECK(rc == NUMACOLL_ERR_TUNABLE, "bad value: rc %d", rc);
        check_rejected_value("nc_config_set", j, value.b, line, ERRLEN);
    }
}

const fz_target_t fz_target_config_set = {
    "config_set", "nc_config_set(): tunable name and value, message from the log", 30000,
    config_set_init, config_set_one,
};

/* ---- target: nc_tree_parse ------------------------------------------------------------- */

static void tree_one(fz_rng_t *r, long idx)
{
    (void)idx;
    static fz_buf_t in, other;
    static const char *const dict[] = {"kary:", "knomial:", "flat", "chain", "binary", ":",
                                       "0", "1", "2", "65536", "65537", " ", "-", "+", "K"};
    fz_clear(&in);
    int mode = fz_mode(r);
    if (mode == 0) {
        fz_random_bytes(r, &in, 24, fz_one_in(r, 2) ? "karynomilftchb:0123456789" : NULL);
    } else {
        gen_tree(r, &in);
        if (mode == 2) {
            fz_clear(&other);
            gen_tree(r, &other);
            fz_mutate(r, &in, dict, sizeof dict / sizeof dict[0], &other, 0);
        }
    }
    fz_set_input_desc(in.b, in.len);
    nc_tree_kind_t kind = (nc_tree_kind_t)99;
    int k = -7;
    char err[ERRLEN] = "";
    int rc = nc_tree_parse(in.b, &kind, &k, err, sizeof err);
    fz_verdict(rc == 0);
    if (rc == 0) {
        nc_tree_kind_t k2;
        int kk2;
        char canon[32];
        FZ_CHECK((kind == NC_TREE_KARY && k >= 1 && k <= NC_TREE_MAX_K) ||
                     (kind == NC_TREE_KNOMIAL && k >= 2 && k <= NC_TREE_MAX_K) ||
                     ((kind == NC_TREE_FLAT || kind == NC_TREE_CHAIN) && k == 0),
                 "accepted as kind %d, k %d", (int)kind, k);
        nc_tree_format(kind, k, canon, sizeof canon);
        FZ_CHECK(!nc_tree_parse(canon, &k2, &kk2, NULL, 0) && k2 == kind && kk2 == k,
                 "format \"%s\" does not parse back", canon);
        FZ_CHECK(is_canonical_tree(in.b, kind, k), "\"%s\" accepted as %s (not a documented "
                 "spelling)", in.b, canon);
    } else {
        static const char *const valid[] = {"kary:K", NULL};
        FZ_CHECK(rc == NUMACOLL_ERR_INVAL, "rc %d", rc);
        FZ_CHECK(kind == (nc_tree_kind_t)99 && k == -7, "outputs written on error");
        FZ_CHECK(strstr(err, "knomial:K") && strstr(err, "flat") && strstr(err, "chain") &&
                     strstr(err, "binary"),
                 "message does not list every valid form: \"%s\"", err);
        fz_check_message("nc_tree_parse", err, sizeof err, in.b, NULL, valid);
    }
}

const fz_target_t fz_target_tree = {
    "tree", "nc_tree_parse(): tree specs", 60000, NULL, tree_one,
};

/* ---- target: tune files -------------------------------------------------------------------- */

#define TUNE_NAME "fuzz.tune"

static const char *const models[] = {
    "AMD EPYC 7763 64-Core Processor", "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", "X",
    "POWER7 (architected), altivec supported", "  spaced   out  model ", "unknown",
    "a = b", "#not a comment", "[tune]",
};

static void gen_line_blank(fz_rng_t *r, fz_buf_t *b)
{
    if (fz_one_in(r, 6))
        fz_puts(b, fz_one_in(r, 2) ? "\n" : "# a comment = with [tune] in it\n");
}

static const char *eol(fz_rng_t *r)
{
    return fz_one_in(r, 10) ? " \r\n" : "\n";
}

static void gen_kv(fz_rng_t *r, fz_buf_t *b, const char *key, const char *val)
{
    static const char *const sep[] = {" = ", "=", " =", "= ", "\t=\t", "  =  "};
    fz_printf(b, "%s%s%s%s%s", fz_one_in(r, 8) ? "  " : "", key, FZ_PICK(r, sep), val, eol(r));
}

static void gen_tunefile(fz_rng_t *r, fz_buf_t *b)
{
    char num[64];
    if (!fz_one_in(r, 3))
        fz_puts(b, "# numacoll tune file: one [tune] section per (machine signature, team size p).\n");
    if (fz_one_in(r, 20))
        fz_printf(b, "numacoll-tune-file %s\n", fz_number_token(r, num, sizeof num));
    else
        fz_printf(b, "%snumacoll-tune-file 1%s", fz_one_in(r, 8) ? " " : "", eol(r));
    int nsec = (int)fz_below(r, 4);
    for (int s = 0; s < nsec; s++) {
        gen_line_blank(r, b);
        fz_puts(b, "[tune]\n");
        int order[4] = {0, 1, 2, 3};
        for (int k = 3; k > 0; k--) {
            int j = (int)fz_below(r, (uint64_t)k + 1), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (int k = 0; k < 4; k++) {
            if (fz_one_in(r, 40))
                continue; /* a missing signature key */
            switch (order[k]) {
            case 0:
                gen_kv(r, b, "cpu_model", FZ_PICK(r, models));
                break;
            case 1:
                snprintf(num, sizeof num, "%d", 1 + (int)fz_below(r, 8));
                gen_kv(r, b, "numa_nodes", fz_one_in(r, 20) ? fz_number_token(r, num, sizeof num) : num);
                break;
            case 2:
                snprintf(num, sizeof num, "%d", 1 + (int)fz_below(r, 256));
                gen_kv(r, b, "cores", fz_one_in(r, 20) ? fz_number_token(r, num, sizeof num) : num);
                break;
            default:
                snprintf(num, sizeof num, "%d", 1 + s * 7 + (int)fz_below(r, 6));
                gen_kv(r, b, "p", fz_one_in(r, 20) ? fz_number_token(r, num, sizeof num) : num);
                break;
            }
            gen_line_blank(r, b);
        }
        int nkv = (int)fz_below(r, 6);
        int used[NC_PARAM_COUNT] = {0};
        for (int k = 0; k < nkv; k++) {
            static fz_buf_t v;
            char key[96];
            if (fz_one_in(r, 4)) {
                snprintf(key, sizeof key, "info.%s", fz_one_in(r, 2) ? "t_per_byte" : "note");
                fz_clear(&v);
                fz_printf(&v, "%g", (double)fz_below(r, 1000) * 1e-10);
                if (fz_one_in(r, 3))
                    fz_puts(&v, " measured = 2 runs, [tune] # not a comment");
                gen_kv(r, b, key, v.b);
                continue;
            }
            int i = (int)fz_below(r, NC_PARAM_COUNT);
            if (used[i] && !fz_one_in(r, 10))
                continue; /* duplicates: rarely */
            used[i] = 1;
            const char *name = nc_param_desc(i)->name;
            if (fz_one_in(r, 3))
                snprintf(key, sizeof key, "NUMACOLL_%s", name);
            else if (fz_one_in(r, 5))
                for (size_t c = 0; c <= strlen(name); c++)
                    key[c] = (char)tolower((unsigned char)name[c]);
            else
                snprintf(key, sizeof key, "%s", name);
            fz_clear(&v);
            if (i == NC_P_BCAST_SETS)
                fz_puts(&v, fz_one_in(r, 2) ? "1" : "2"); /* most queue lengths are even */
            else
                gen_value(r, i, &v);
            gen_kv(r, b, key, v.b);
        }
    }
}

static const char *const tune_lines[] = {
    "[tune]\n", "[tune] \n", "[TUNE]\n", "numacoll-tune-file 1\n", "numacoll-tune-file 2\n",
    "p = 0\n", "p = -1\n", "cores = 2147483648\n", "cpu_model =\n", "cpu_model = \t \n",
    "= 5\n", "key =\n", "BCAST_TREE = oak\n", "BCAST_FRAG_SIZE = 9999999999999g\n",
    "BCAST_SETS = 3\n", "BCAST_QUEUE_LEN = 6\n", "info. = x\n", "info.x = y\n",
    "NUMACOLL_ = 1\n", "# comment\n", "\n", "\r\n", "numa_nodes = 1\n", "SEG_LAYOUT = Paper\n",
};

/* Line-level mutations (drop, duplicate, swap, insert a dictionary line, a line
 * longer than the reader's buffer), then byte-level ones (NUL bytes included). */
static void mutate_tunefile(fz_rng_t *r, fz_buf_t *b, const fz_buf_t *other)
{
    static fz_buf_t out;
    const char *lines[512];
    size_t lens[512], n = 0;
    for (size_t i = 0; i < b->len && n < 512;) {
        size_t e = i;
        while (e < b->len && b->b[e] != '\n')
            e++;
        lines[n] = b->b + i;
        lens[n++] = e - i + (e < b->len);
        i = e + 1;
    }
    int op = (int)fz_below(r, 6);
    size_t at = (size_t)fz_below(r, n + 1), at2 = (size_t)fz_below(r, n + 1);
    fz_clear(&out);
    for (size_t i = 0; i <= n; i++) {
        if (i == at && op == 3)
            fz_puts(&out, FZ_PICK(r, tune_lines));
        if (i == at && op == 4) {
            char longl[1100];
            size_t l = 1000 + (size_t)fz_below(r, 60);
            memset(longl, 'x', l);
            memcpy(longl, "info.long = ", 12);
            longl[l] = '\n';
            fz_put(&out, longl, l + 1);
        }
        if (i == n)
            break;
        if (op == 0 && i == at)
            continue; /* drop */
        size_t src = op == 2 && i == at ? (at2 < n ? at2 : i) : i;
        fz_put(&out, lines[src], lens[src]);
        if (op == 1 && i == at)
            fz_put(&out, lines[i], lens[i]); /* duplicate */
    }
    *b = out;
    if (op == 5 || fz_one_in(r, 2)) {
        static const char *const dict[] = {"=", " = ", "[tune]", "\n", "#", "info.", "NUMACOLL_",
                                           "BCAST_", "p", "cores", "\r", "\t"};
        fz_mutate(r, b, dict, sizeof dict / sizeof dict[0], other, 1);
    }
}

static int nlines_of(const fz_buf_t *b)
{
    int n = 1;
    for (size_t i = 0; i < b->len; i++)
        n += b->b[i] == '\n';
    return n;
}

static size_t line_length(const fz_buf_t *b, int line)
{
    size_t i = 0;
    for (int l = 1; l < line && i < b->len; i++)
        l += b->b[i] == '\n';
    size_t e = i;
    while (e < b->len && b->b[e] != '\n')
        e++;
    return e - i;
}

static void check_tunefile_accepted(const nc_tunefile_t *tf)
{
    for (int s = 0; s < tf->nsec; s++) {
        const nc_tune_section_t *sec = &tf->sec[s];
        const char *m = sec->sig.cpu_model;
        size_t ml = strlen(m);
        FZ_CHECK(ml && !isspace((unsigned char)m[0]) && !isspace((unsigned char)m[ml - 1]) &&
                     !strstr(m, "  "),
                 "section %d: cpu_model \"%s\" not collapsed", s, m);
        FZ_CHECK(sec->sig.numa_nodes >= 1 && sec->sig.cores >= 1 && sec->sig.p >= 1,
                 "section %d: numa_nodes %d cores %d p %d", s, sec->sig.numa_nodes,
                 sec->sig.cores, sec->sig.p);
        FZ_CHECK(sec->nkv >= 0 && sec->nkv <= NC_TUNE_MAX_KV, "section %d: %d keys", s, sec->nkv);
        nc_config_t cfg;
        for (int i = 0; i < NC_PARAM_COUNT; i++) {
            cfg.v[i].source = NC_SRC_DEFAULT;
            char err[ERRLEN];
            if (nc_param_parse(i, nc_param_desc(i)->defval, &cfg.v[i], err, sizeof err))
                fz_fail("default of %s rejected", nc_param_desc(i)->name);
        }
        for (int k = 0; k < sec->nkv; k++) {
            const nc_tune_kv_t *kv = &sec->kv[k];
            for (int k2 = 0; k2 < k; k2++)
                FZ_CHECK(strcasecmp(kv->key, sec->kv[k2].key), "section %d: key %s twice", s,
                         kv->key);
            if (!strncasecmp(kv->key, "info.", 5))
                continue;
            int i = nc_param_lookup(kv->key);
            nc_param_value_t v = {0};
            char err[ERRLEN];
            if (i < 0 || strcmp(kv->key, nc_param_desc(i)->name)) {
                fz_fail("section %d: key \"%s\" is neither info.* nor a canonical tunable", s,
                        kv->key);
                continue;
            }
            if (nc_param_parse(i, kv->value, &v, err, sizeof err) || strcmp(v.text, kv->value))
                fz_fail("section %d: %s = \"%s\" is not a canonical valid value", s, kv->key,
                        kv->value);
            cfg.v[i] = v;
        }
        char err[ERRLEN];
        FZ_CHECK(!nc_config_check(&cfg, err, sizeof err), "section %d accepted, but: %s", s, err);
        for (int s2 = 0; s2 < s; s2++)
            FZ_CHECK(!(nc_tune_sig_same_machine(&tf->sec[s2].sig, &sec->sig) &&
                       tf->sec[s2].sig.p == sec->sig.p),
                     "sections %d and %d have the same signature and p", s2, s);
    }
    /* round trip through the writer, in memory (no file to leave behind) */
    char err[512], *text = NULL;
    size_t textlen = 0;
    nc_tunefile_t back;
    FILE *w = open_memstream(&text, &textlen);
    if (!w) {
        fz_fail("open_memstream failed");
        return;
    }
    int wrc = nc_tunefile_write_stream(w, tf, "nc_fuzz");
    if (fclose(w) || wrc) {
        fz_fail("write failed");
        free(text);
        return;
    }
    FILE *rd = fmemopen(text, textlen, "r");
    int rrc = rd ? nc_tunefile_read_stream(rd, TUNE_NAME, &back, err, sizeof err) : -1;
    if (rd)
        fclose(rd);
    if (rrc) {
        fz_fail("written text not read back: %s", rd ? err : "fmemopen failed");
        free(text);
        return;
    }
    free(text);
    FZ_CHECK(back.nsec == tf->nsec, "%d sections written, %d read back", tf->nsec, back.nsec);
    for (int s = 0; s < tf->nsec && s < back.nsec; s++) {
        const nc_tune_section_t *a = &tf->sec[s], *b = &back.sec[s];
        FZ_CHECK(!strcmp(a->sig.cpu_model, b->sig.cpu_model) && a->sig.p == b->sig.p &&
                     a->sig.numa_nodes == b->sig.numa_nodes && a->sig.cores == b->sig.cores,
                 "section %d: signature changed in the round trip", s);
        FZ_CHECK(a->nkv == b->nkv, "section %d: %d keys written, %d read back", s, a->nkv,
                 b->nkv);
        for (int k = 0; k < a->nkv && k < b->nkv; k++)
            FZ_CHECK(!strcmp(a->kv[k].key, b->kv[k].key) && !strcmp(a->kv[k].value, b->kv[k].value),
                     "section %d: %s = \"%s\" read back as %s = \"%s\"", s, a->kv[k].key,
                     a->kv[k].value, b->kv[k].key, b->kv[k].value);
    }
    nc_tunefile_free(&back);
}

static void tunefile_one(fz_rng_t *r, long idx)
{
    (void)idx;
    static fz_buf_t in, other;
    fz_clear(&in);
    int mode = fz_mode(r);
    if (mode == 0) {
        fz_random_bytes(r, &in, 300, fz_one_in(r, 2) ? "numacol-tufie1[]=\n #pBCAST_FRG" : NULL);
        if (fz_one_in(r, 2)) { /* random lines after a valid head */
            static fz_buf_t t;
            fz_clear(&t);
            fz_puts(&t, "numacoll-tune-file 1\n[tune]\n");
            fz_put(&t, in.b, in.len);
            in = t;
        }
    } else {
        gen_tunefile(r, &in);
        if (mode == 2) {
            fz_clear(&other);
            gen_tunefile(r, &other);
            mutate_tunefile(r, &in, &other);
        }
    }
    fz_set_input_desc(in.b, in.len);
    FILE *fp = in.len ? fmemopen(in.b, in.len, "r") : fopen("/dev/null", "r");
    if (!fp) {
        fz_fail("cannot open the input stream");
        return;
    }
    nc_tunefile_t tf = {.nsec = 99, .sec = NULL};
    char err[512] = "";
    int rc = nc_tunefile_read_stream(fp, TUNE_NAME, &tf, err, sizeof err);
    fclose(fp);
    fz_verdict(rc == 0);
    if (rc == 0) {
        check_tunefile_accepted(&tf);
        nc_tunefile_free(&tf);
        return;
    }
    FZ_CHECK(tf.nsec == 0 && tf.sec == NULL, "rejected, but %d sections left", tf.nsec);
    /* "fuzz.tune:LINE: why", LINE within the file */
    int line = -1, off = 0;
    if (sscanf(err, TUNE_NAME ":%d: %n", &line, &off) != 1 || !off) {
        fz_fail("message does not start with \"" TUNE_NAME ":LINE: \": \"%s\"", err);
        return;
    }
    FZ_CHECK(line >= 0 && line <= nlines_of(&in), "line %d, but the file has %d", line,
             nlines_of(&in));
    static const char *const names[] = {TUNE_NAME ":", NULL};
    static const char *const valid[] = {
        "expected", "valid", "must", "required", "at most", "longer than", "twice",
        "(first at line", "reads version", "inside a [tune] section", "a tune file is text",
        NULL,
    };
    fz_check_message("nc_tunefile_read", err, sizeof err, NULL, names, valid);
    /* a message must be true: "line longer than N" only for such a line */
    if (strstr(err + off, "line longer than"))
        FZ_CHECK(line_length(&in, line) > 1022, "line %d has %zu bytes, but: \"%s\"", line,
                 line_length(&in, line), err);
}

const fz_target_t fz_target_tunefile = {
    "tunefile", "nc_tunefile_read_stream(): whole tune files (+ write, read back)", 12000,
    NULL, tunefile_one,
};
