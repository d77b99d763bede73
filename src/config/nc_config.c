/*
 * The tunables table turned into parsing, checking and provenance.
 */
#include "config/nc_config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/nc_common.h"
#include "config/nc_tunefile.h"
#include "tree/nc_tree.h"

static const nc_param_desc_t params[NC_PARAM_COUNT] = {
#define NC_PARAM_DESC_(name, type, def, min, max, choices, unit, doc) \
    {#name, type, def, min, max, choices, unit, doc},
    NC_PARAM_TABLE(NC_PARAM_DESC_)
#undef NC_PARAM_DESC_
};

const nc_param_desc_t *nc_param_desc(int index)
{
    return index >= 0 && index < NC_PARAM_COUNT ? &params[index] : NULL;
}

int nc_param_lookup(const char *name)
{
    if (!name)
        return -1;
    if (!strncmp(name, "NUMACOLL_", 9))
        name += 9;
    for (int i = 0; i < NC_PARAM_COUNT; i++)
        if (!strcasecmp(name, params[i].name))
            return i;
    return -1;
}

const char *nc_param_source_name(nc_param_source_t src)
{
    static const char *names[] = {"default", "env", "tune-file", "api",
                                  "default: the environment's value is not valid"};
    return names[src];
}

void nc_param_range_text(int index, char *buf, size_t len)
{
    const nc_param_desc_t *d = &params[index];
    switch (d->type) {
    case NC_PT_SIZE:
    case NC_PT_INT:
        snprintf(buf, len, "%" PRId64 "..%" PRId64, d->min, d->max);
        break;
    case NC_PT_TREE:
        snprintf(buf, len, "kary:K (K>=1) | knomial:K (K>=2) | flat | chain | binary");
        break;
    case NC_PT_ENUM:
        snprintf(buf, len, "%s", d->choices);
        break;
    }
}

void nc_param_value_text(int index, int64_t num, int64_t aux, char *buf, size_t len)
{
    const nc_param_desc_t *d = &params[index];
    if (d->type == NC_PT_TREE) {
        nc_tree_format((nc_tree_kind_t)num, (int)aux, buf, len);
        return;
    }
    if (d->type == NC_PT_ENUM) {
        const char *c = d->choices;
        for (int64_t i = 0; *c; i++) {
            const size_t n = strcspn(c, "|");
            if (i == num) {
                snprintf(buf, len, "%.*s", (int)n, c);
                return;
            }
            c += n + (c[n] == '|');
        }
    }
    snprintf(buf, len, "%" PRId64, num);
}

/* Integer with an optional binary suffix (k, m, g; KiB style accepted). */
static int parse_int(const char *s, int allow_suffix, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno)
        return -1;
    int64_t mult = 1;
    if (allow_suffix && *end && *end != ' ') {
        switch (*end) {
        case 'k': case 'K': mult = 1 << 10; break;
        case 'm': case 'M': mult = 1 << 20; break;
        case 'g': case 'G': mult = 1 << 30; break;
        default: return -1;
        }
        end++;
        if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
            end += strlen(end);
    }
    while (*end == ' ')
        end++;
    if (*end || v > INT64_MAX / mult || v < INT64_MIN / mult)
        return -1; /* e.g. 9007199254740992k: out of every range, not wrapped around */
    *out = (int64_t)v * mult;
    return 0;
}

/* The words people write for a switch: 1 for on/yes/true, 0 for
 * off/no/false (any case), else -1. A switch (unit "bool") reads them as 1
 * and 0; an enum with the choices on and off (auto|on|off) as those choices,
 * and 1 and 0 too. */
static int switch_word(const char *text)
{
    static const char *const words[] = {"off", "on", "no", "yes", "false", "true"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(text, words[i]))
            return (int)(i % 2);
    return -1;
}

/* The index of choice `name` among d's choices, or -1. */
static int choice_index(const nc_param_desc_t *d, const char *name, size_t len)
{
    int idx = 0;
    for (const char *c = d->choices; *c; idx++) {
        size_t n = strcspn(c, "|");
        if (len == n && !strncasecmp(name, c, n))
            return idx;
        c += n + (c[n] == '|');
    }
    return -1;
}

int nc_param_parse(int index, const char *text, nc_param_value_t *out, char *err, size_t errlen)
{
    const nc_param_desc_t *d = &params[index];
    char range[96], q[NC_QUOTE_LEN];
    nc_param_range_text(index, range, sizeof range);
    nc_param_value_t v = {0};

    const int is_bool = d->unit && !strcmp(d->unit, "bool");
    const int word = is_bool ? switch_word(text) : -1;
    switch (d->type) {
    case NC_PT_SIZE:
    case NC_PT_INT:
        if (word >= 0) {
            v.num = word; /* a switch also reads as the words people write */
        } else if (is_bool && (parse_int(text, 0, &v.num) || v.num < d->min || v.num > d->max)) {
            snprintf(err, errlen,
                     "NUMACOLL_%s=\"%s\" is not valid: expected an integer in %s (or off/on, "
                     "no/yes, false/true)",
                     d->name, nc_quote(q, sizeof q, text), range);
            return NUMACOLL_ERR_TUNABLE;
        } else if (parse_int(text, d->type == NC_PT_SIZE, &v.num) || v.num < d->min ||
                   v.num > d->max) {
            snprintf(err, errlen, "NUMACOLL_%s=\"%s\" is not valid: expected %s%s in %s", d->name,
                     nc_quote(q, sizeof q, text), d->type == NC_PT_SIZE ? "a size" : "an integer",
                     d->type == NC_PT_SIZE ? " (suffix k/m/g allowed)" : "", range);
            return NUMACOLL_ERR_TUNABLE;
        }
        nc_param_value_text(index, v.num, 0, v.text, sizeof v.text);
        break;
    case NC_PT_TREE: {
        nc_tree_kind_t kind;
        int k;
        char why[160];
        if (nc_tree_parse(text, &kind, &k, why, sizeof why)) {
            snprintf(err, errlen, "NUMACOLL_%s=\"%s\" is not valid: expected %s", d->name,
                     nc_quote(q, sizeof q, text), range);
            return NUMACOLL_ERR_TUNABLE;
        }
        v.num = kind;
        v.aux = k;
        nc_param_value_text(index, v.num, v.aux, v.text, sizeof v.text);
        break;
    }
    case NC_PT_ENUM: {
        int found = choice_index(d, text, strlen(text));
        const int onoff = choice_index(d, "on", 2) >= 0 && choice_index(d, "off", 3) >= 0;
        if (found < 0 && onoff) {
            const int w = !strcmp(text, "1") ? 1 : !strcmp(text, "0") ? 0 : switch_word(text);
            if (w >= 0)
                found = w ? choice_index(d, "on", 2) : choice_index(d, "off", 3);
        }
        if (found < 0) {
            snprintf(err, errlen, "NUMACOLL_%s=\"%s\" is not valid: expected one of %s%s",
                     d->name, nc_quote(q, sizeof q, text), range,
                     onoff ? " (on also as 1/yes/true, off as 0/no/false)" : "");
            return NUMACOLL_ERR_TUNABLE;
        }
        v.num = found;
        nc_param_value_text(index, v.num, 0, v.text, sizeof v.text); /* the choice's spelling */
        break;
    }
    }
    v.source = out->source;
    *out = v;
    return 0;
}

int nc_config_check(const nc_config_t *cfg, char *err, size_t errlen)
{
    int64_t s = NC_CFG_NUM(cfg, BCAST_QUEUE_LEN), q = NC_CFG_NUM(cfg, BCAST_SETS);
    if (q > s || s % q) {
        snprintf(err, errlen,
                 "NUMACOLL_BCAST_SETS=%" PRId64 " must divide NUMACOLL_BCAST_QUEUE_LEN=%" PRId64
                 " (valid: a divisor of the queue length, 1..%" PRId64 ")",
                 q, s, s);
        return NUMACOLL_ERR_TUNABLE;
    }
    return 0;
}

/* ---- the process-wide configuration ------------------------------------------ */

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static nc_config_t global;
static int global_loaded;
static int global_err;            /* first error found in the environment */
static char global_errmsg[256];
static int global_verbose;

/* NUMACOLL_* variables that are not tunables: those of numacoll's tools,
 * build and tests (a name, or the prefix of several). */
static const char *const tool_vars[] = {"BENCH_",   "BIND_",         "BUILD_",
                                        "FUZZ_",    "GUEST_",        "INFO_",
                                        "MPIEXEC_", "TOPO_FIXTURES", "TUNE_FILE",
                                        "TUNE_PLOT_SCRIPT", "UPDATE_GOLDEN", "XML_FIXTURES",
                                        "TEST_TOUCH_ALL_FROM_RANK0"};

/* Edit distance of a (any case) and b (a tunable's name, upper case; at most
 * 63 characters each; longer: far). */
static int distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 64;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        for (size_t j = 0; j <= m; j++) {
            if (!i || !j) {
                d[i][j] = (int)(i + j);
                continue;
            }
            int v = d[i - 1][j - 1] + (toupper((unsigned char)a[i - 1]) != b[j - 1]);
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

/* The environment's NUMACOLL_* variables that are neither tunables nor the
 * tools', into global_warnmsg (a typo would else be ignored in silence),
 * each with the nearest tunable's name when it is close. */
static char global_warnmsg[512];
static int global_nunknown; /* how many names global_warnmsg lists */

static void unknown_env_locked(void)
{
    extern char **environ;
    size_t len = 0;
    global_warnmsg[0] = '\0';
    global_nunknown = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "NUMACOLL_", 9) || !eq || eq - *e - 9 >= 64)
            continue;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e - 9), *e + 9);
        /* exactly as load_locked() reads them (getenv is case-sensitive) */
        int known = 0;
        for (int i = 0; i < NC_PARAM_COUNT && !known; i++)
            known = !strcmp(name, params[i].name);
        for (size_t k = 0; k < NC_ARRAY_SIZE(tool_vars) && !known; k++)
            known = !strncmp(name, tool_vars[k], strlen(tool_vars[k]));
        if (known)
            continue;
        int best = -1, bd = 4; /* a typo: a few edits away */
        for (int i = 0; i < NC_PARAM_COUNT; i++) {
            const int dd = distance(name, params[i].name);
            if (dd < bd)
                bd = dd, best = i;
        }
        char hint[96] = "";
        if (best >= 0)
            snprintf(hint, sizeof hint, " (did you mean NUMACOLL_%s?)", params[best].name);
        global_nunknown++;
        if (len < sizeof global_warnmsg)
            len += (size_t)snprintf(global_warnmsg + len, sizeof global_warnmsg - len,
                                    "%sNUMACOLL_%s%s", len ? ", " : "", name, hint);
    }
}

static void load_locked(void)
{
    char err[256];
    global_err = 0;
    for (int i = 0; i < NC_PARAM_COUNT; i++) {
        global.v[i].source = NC_SRC_DEFAULT;
        if (nc_param_parse(i, params[i].defval, &global.v[i], err, sizeof err))
            abort(); /* a default outside its own range is a bug in the table */
        char envname[64];
        snprintf(envname, sizeof envname, "NUMACOLL_%s", params[i].name);
        const char *e = getenv(envname);
        if (e) {
            nc_param_value_t v = {.source = NC_SRC_ENV};
            if (nc_param_parse(i, e, &v, err, sizeof err)) {
                global.v[i].source = NC_SRC_ENV_BAD;
                if (!global_err) {
                    global_err = NUMACOLL_ERR_TUNABLE;
                    snprintf(global_errmsg, sizeof global_errmsg, "%s", err);
                }
            } else {
                global.v[i] = v;
            }
        }
    }
    unknown_env_locked();
    /* Tune file for this node's core count, only over defaults: env wins. */
    nc_tunefile_apply(&global, 0);
    if (!global_err && nc_config_check(&global, err, sizeof err)) {
        global_err = NUMACOLL_ERR_TUNABLE;
        snprintf(global_errmsg, sizeof global_errmsg, "%s", err);
    }
    global_verbose = (int)NC_CFG_NUM(&global, VERBOSE);
    global_loaded = 1;
}

static void ensure_loaded_locked(void)
{
    if (!global_loaded)
        load_locked();
}

static uint64_t said_elsewhere; /* under global_lock */

static uint64_t problem_locked(void)
{
    if (!global_err && !global_warnmsg[0])
        return 0;
    const char *err = global_err ? global_errmsg : "";
    uint64_t h = nc_fnv1a(NC_FNV1A_BASIS, err, strlen(err) + 1); /* with its NUL: a separator */
    h = nc_fnv1a(h, global_warnmsg, strlen(global_warnmsg));
    h >>= 2; /* fits a positive long long with room to negate */
    return h ? h : 1;
}

uint64_t nc_config_problem(void)
{
    pthread_mutex_lock(&global_lock);
    ensure_loaded_locked();
    const uint64_t h = problem_locked();
    pthread_mutex_unlock(&global_lock);
    return h;
}

void nc_config_said_elsewhere(uint64_t h)
{
    pthread_mutex_lock(&global_lock);
    said_elsewhere = h;
    pthread_mutex_unlock(&global_lock);
}

int nc_config_snapshot(nc_config_t *out)
{
    pthread_mutex_lock(&global_lock);
    ensure_loaded_locked();
    *out = global;
    int rc = global_err;
    char msg[256], warn[sizeof global_warnmsg];
    snprintf(msg, sizeof msg, "%s", global_errmsg);
    snprintf(warn, sizeof warn, "%s", global_warnmsg);
    const int one = global_nunknown == 1;
    const int quiet = said_elsewhere && said_elsewhere == problem_locked();
    pthread_mutex_unlock(&global_lock);
    if (quiet)
        return rc;
    if (warn[0])
        nc_log_warn_once("unknown-env",
                         "%s, ignored: %s (numacoll-info --params lists them)",
                         one ? "not a numacoll tunable" : "not numacoll tunables", warn);
    if (rc)
        nc_log_error_once("%s; numacoll sets up nothing until it is fixed (in MPI: every "
                          "collective goes to the MPI library)", msg);
    return rc;
}

/* Does msg name NUMACOLL_<name> itself (not a longer name that ends or
 * starts with it, e.g. NUMACOLL_ALLREDUCE_ENABLE for REDUCE_ENABLE)? */
static int names_param(const char *msg, const char *name)
{
    char full[80];
    snprintf(full, sizeof full, "NUMACOLL_%s", name);
    const size_t n = strlen(full);
    for (const char *at = strstr(msg, full); at; at = strstr(at + 1, full)) {
        const char c = at[n];
        if (!(c == '_' || isupper((unsigned char)c) || isdigit((unsigned char)c)))
            return 1;
    }
    return 0;
}

int nc_config_set(const char *name, const char *value, nc_param_source_t src)
{
    int i = nc_param_lookup(name);
    char err[256], q[96];
    if (i < 0) {
        nc_log_error("unknown tunable \"%s\" (numacoll-info --params lists them)",
                     nc_quote(q, sizeof q, name ? name : ""));
        return NUMACOLL_ERR_INVAL;
    }
    nc_param_value_t v = {.source = src};
    if (!value) {
        nc_param_range_text(i, q, sizeof q);
        nc_log_error("NUMACOLL_%s: the value is NULL (expected %s)", params[i].name, q);
        return NUMACOLL_ERR_TUNABLE;
    }
    if (nc_param_parse(i, value, &v, err, sizeof err)) {
        nc_log_error("%s", err);
        return NUMACOLL_ERR_TUNABLE;
    }
    pthread_mutex_lock(&global_lock);
    ensure_loaded_locked();
    global.v[i] = v;
    /* The cross checks are applied when a team is created (s and q may be
     * changed one after the other); the environment error stays sticky only
     * for the variable that caused it. */
    if (global_err && names_param(global_errmsg, params[i].name)) {
        global_err = 0;
        global_errmsg[0] = '\0';
    }
    global_verbose = (int)NC_CFG_NUM(&global, VERBOSE);
    pthread_mutex_unlock(&global_lock);
    return 0;
}

int nc_config_global_verbose(void)
{
    pthread_mutex_lock(&global_lock);
    ensure_loaded_locked();
    int v = global_verbose;
    pthread_mutex_unlock(&global_lock);
    return v;
}

void nc_config_reload(void)
{
    pthread_mutex_lock(&global_lock);
    load_locked();
    pthread_mutex_unlock(&global_lock);
}

/* ---- public API ----------------------------------------------------------------- */

NUMACOLL_API int numacoll_param_set(const char *name, const char *value)
{
    return nc_config_set(name, value, NC_SRC_API);
}

NUMACOLL_API int numacoll_param_get(const char *name, char *value, size_t len, const char **source)
{
    int i = nc_param_lookup(name);
    if (i < 0 || !value || !len)
        return NUMACOLL_ERR_INVAL;
    pthread_mutex_lock(&global_lock);
    ensure_loaded_locked();
    const int n = snprintf(value, len, "%s", global.v[i].text);
    if (source)
        *source = nc_param_source_name(global.v[i].source);
    pthread_mutex_unlock(&global_lock);
    return (size_t)n < len ? 0 : NUMACOLL_ERR_TRUNCATE; /* the value did not fit */
}

NUMACOLL_API int numacoll_param_count(void)
{
    return NC_PARAM_COUNT;
}

NUMACOLL_API int numacoll_param_describe(int index, const char **name, const char **unit,
                                         const char **range, const char **doc)
{
    static char ranges[NC_PARAM_COUNT][96];
    if (index < 0 || index >= NC_PARAM_COUNT)
        return NUMACOLL_ERR_INVAL;
    nc_param_range_text(index, ranges[index], sizeof ranges[index]);
    if (name)
        *name = params[index].name;
    if (unit)
        *unit = params[index].unit;
    if (range)
        *range = ranges[index];
    if (doc)
        *doc = params[index].doc;
    return 0;
}
