/*
 * Tune files: read, validate (all or nothing), select by topology signature
 * and team size, apply to a configuration, write. Format and search order are
 * in nc_tunefile.h.
 */
#include "config/nc_tunefile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/nc_common.h"

/* ---- signature --------------------------------------------------------------- */

static void collapse_spaces(char *dst, size_t len, const char *src)
{
    size_t n = 0;
    int space = 0;
    for (; *src && n + 1 < len; src++) {
        if (isspace((unsigned char)*src)) {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < len)
            dst[n++] = ' ';
        space = 0;
        dst[n++] = *src;
    }
    dst[n] = '\0';
}

int nc_tune_sig_of_topology(hwloc_topology_t topo, nc_tune_sig_t *sig)
{
    memset(sig, 0, sizeof *sig);
    const char *model = NULL;
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg)
        model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
    if (!model)
        model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "CPUModel");
    collapse_spaces(sig->cpu_model, sizeof sig->cpu_model, model ? model : "");
    if (!sig->cpu_model[0])
        snprintf(sig->cpu_model, sizeof sig->cpu_model, "unknown");
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    sig->numa_nodes = n > 0 ? n : 1;
    n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (n <= 0)
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    sig->cores = n > 0 ? n : 1;
    return 0;
}

static pthread_once_t local_once = PTHREAD_ONCE_INIT;
static nc_tune_sig_t local_sig;
static int local_rc = NUMACOLL_ERR_TOPO;

static void local_load(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo))
        return;
    if (!hwloc_topology_load(topo))
        local_rc = nc_tune_sig_of_topology(topo, &local_sig);
    hwloc_topology_destroy(topo);
}

int nc_tune_sig_local(nc_tune_sig_t *sig)
{
    pthread_once(&local_once, local_load);
    if (local_rc)
        return local_rc;
    *sig = local_sig;
    return 0;
}

int nc_tune_sig_same_machine(const nc_tune_sig_t *a, const nc_tune_sig_t *b)
{
    return !strcmp(a->cpu_model, b->cpu_model) && a->numa_nodes == b->numa_nodes &&
           a->cores == b->cores;
}

void nc_tune_sig_format(const nc_tune_sig_t *sig, char *buf, size_t len)
{
    int n = snprintf(buf, len, "cpu_model=\"%s\" numa_nodes=%d cores=%d", sig->cpu_model,
                     sig->numa_nodes, sig->cores);
    if (sig->p > 0 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " p=%d", sig->p);
}

/* ---- sections ------------------------------------------------------------------ */

static const char *const sig_keys[] = {"cpu_model", "numa_nodes", "cores", "p"};

int nc_tune_section_set(nc_tune_section_t *sec, const char *key, const char *value, char *err,
                        size_t errlen)
{
    char canon[sizeof sec->kv[0].key], text[sizeof sec->kv[0].value], q[NC_QUOTE_LEN];
    if (!strncasecmp(key, "info.", 5)) {
        if (strlen(key) >= sizeof canon) {
            snprintf(err, errlen, "key \"%s\" too long (at most %zu characters)",
                     nc_quote(q, sizeof q, key), sizeof canon - 1);
            return NUMACOLL_ERR_INVAL;
        }
        snprintf(canon, sizeof canon, "%s", key);
    } else {
        int i = nc_param_lookup(key);
        if (i < 0) {
            snprintf(err, errlen,
                     "unknown key \"%s\" (expected cpu_model, numa_nodes, cores, p, a tunable "
                     "listed by numacoll-info --params, or info.*)",
                     nc_quote(q, sizeof q, key));
            return NUMACOLL_ERR_INVAL;
        }
        nc_param_value_t v = {.source = NC_SRC_TUNE_FILE};
        char why[256];
        if (nc_param_parse(i, value, &v, why, sizeof why)) {
            snprintf(err, errlen, "%s", why);
            return NUMACOLL_ERR_TUNABLE;
        }
        snprintf(canon, sizeof canon, "%s", nc_param_desc(i)->name);
        snprintf(text, sizeof text, "%s", v.text);
        value = text;
    }
    if (strlen(value) >= sizeof sec->kv[0].value) {
        snprintf(err, errlen, "value of %s is too long (at most %zu characters)",
                 nc_quote(q, sizeof q, canon), sizeof sec->kv[0].value - 1);
        return NUMACOLL_ERR_INVAL;
    }
    for (int k = 0; k < sec->nkv; k++)
        if (!strcasecmp(sec->kv[k].key, canon)) {
            snprintf(sec->kv[k].value, sizeof sec->kv[k].value, "%s", value);
            return 0;
        }
    if (sec->nkv >= NC_TUNE_MAX_KV) {
        snprintf(err, errlen, "too many keys in one section (at most %d)", NC_TUNE_MAX_KV);
        return NUMACOLL_ERR_INVAL;
    }
    snprintf(sec->kv[sec->nkv].key, sizeof sec->kv[0].key, "%s", canon);
    snprintf(sec->kv[sec->nkv].value, sizeof sec->kv[0].value, "%s", value);
    sec->nkv++;
    return 0;
}

/* The section's tunables over the defaults; fails when they do not fit together. */
static int section_config(const nc_tune_section_t *sec, nc_config_t *out, char *err,
                          size_t errlen)
{
    for (int i = 0; i < NC_PARAM_COUNT; i++) {
        out->v[i].source = NC_SRC_DEFAULT;
        if (nc_param_parse(i, nc_param_desc(i)->defval, &out->v[i], err, errlen))
            return NUMACOLL_ERR_TUNABLE;
    }
    for (int k = 0; k < sec->nkv; k++) {
        int i = nc_param_lookup(sec->kv[k].key);
        if (i < 0)
            continue; /* info.* */
        nc_param_value_t v = {.source = NC_SRC_TUNE_FILE};
        if (nc_param_parse(i, sec->kv[k].value, &v, err, errlen))
            return NUMACOLL_ERR_TUNABLE;
        out->v[i] = v;
    }
    return nc_config_check(out, err, errlen);
}

int nc_tunefile_put(nc_tunefile_t *tf, const nc_tune_section_t *sec)
{
    for (int i = 0; i < tf->nsec; i++)
        if (nc_tune_sig_same_machine(&tf->sec[i].sig, &sec->sig) && tf->sec[i].sig.p == sec->sig.p) {
            tf->sec[i] = *sec;
            return 0;
        }
    nc_tune_section_t *n = realloc(tf->sec, (size_t)(tf->nsec + 1) * sizeof *n);
    if (!n)
        return NUMACOLL_ERR_NOMEM;
    tf->sec = n;
    tf->sec[tf->nsec++] = *sec;
    return 0;
}

const nc_tune_section_t *nc_tunefile_find(const nc_tunefile_t *tf, const nc_tune_sig_t *machine,
                                          int p)
{
    for (int i = 0; i < tf->nsec; i++)
        if (nc_tune_sig_same_machine(&tf->sec[i].sig, machine) && tf->sec[i].sig.p == p)
            return &tf->sec[i];
    return NULL;
}

void nc_tunefile_free(nc_tunefile_t *tf)
{
    free(tf->sec);
    tf->sec = NULL;
    tf->nsec = 0;
}

/* ---- reading ------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int parse_count(const char *v, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < 1 || x > INT_MAX)
        return -1;
    *out = (int)x;
    return 0;
}

/* One line into buf (at most len - 2 characters; the '\n' is dropped). 1: a
 * line; 0: end of file; -1 with `why`: too long, or a NUL byte (which would
 * silently cut the line short for every string function after this). */
static int read_line(FILE *fp, char *buf, size_t len, char *why, size_t wlen)
{
    size_t n = 0;
    int c;
    while ((c = getc(fp)) != EOF && c != '\n') {
        if (c == '\0') {
            snprintf(why, wlen, "NUL byte at column %zu (a tune file is text)", n + 1);
            return -1;
        }
        if (n + 2 >= len) {
            snprintf(why, wlen, "line longer than %zu characters", len - 2);
            return -1;
        }
        buf[n++] = (char)c;
    }
    buf[n] = '\0';
    return c != EOF || n > 0;
}

/* 1: all four signature keys seen. */
static int finish_section(const nc_tunefile_t *tf, const nc_tune_section_t *sec, unsigned seen,
                          char *why, size_t len)
{
    for (int k = 0; k < 4; k++)
        if (!(seen & (1u << k))) {
            snprintf(why, len, "section has no %s (cpu_model, numa_nodes, cores and p are required)",
                     sig_keys[k]);
            return -1;
        }
    const nc_tune_section_t *dup = nc_tunefile_find(tf, &sec->sig, sec->sig.p);
    if (dup) {
        snprintf(why, len, "second section for the same signature and p=%d (first at line %d)",
                 sec->sig.p, dup->line);
        return -1;
    }
    nc_config_t cfg;
    char cerr[256];
    if (section_config(sec, &cfg, cerr, sizeof cerr)) {
        snprintf(why, len, "values do not fit together: %s", cerr);
        return -1;
    }
    return 0;
}

int nc_tunefile_read_stream(FILE *fp, const char *path, nc_tunefile_t *out, char *err,
                            size_t errlen)
{
    nc_tunefile_t tf = {0};
    nc_tune_section_t cur;
    unsigned seen = 0;
    int in_section = 0, have_version = 0, lineno = 0, rc = 0, got;
    char line[1024], why[320] = "", q[NC_QUOTE_LEN];

    out->nsec = 0;
    out->sec = NULL;
    while (!rc && (got = read_line(fp, line, sizeof line, why, sizeof why)) != 0) {
        lineno++;
        if (got < 0) {
            rc = NUMACOLL_ERR_INVAL;
            break;
        }
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        if (!have_version) {
            int ver, end = 0;
            if (sscanf(s, "numacoll-tune-file %d%n", &ver, &end) != 1 || s[end]) {
                snprintf(why, sizeof why,
                         "not a numacoll tune file (the first line must be "
                         "\"numacoll-tune-file %d\")",
                         NC_TUNE_FORMAT_VERSION);
                rc = NUMACOLL_ERR_INVAL;
            } else if (ver != NC_TUNE_FORMAT_VERSION) {
                snprintf(why, sizeof why, "format version %d, this library reads version %d",
                         ver, NC_TUNE_FORMAT_VERSION);
                rc = NUMACOLL_ERR_INVAL;
            }
            have_version = 1;
            continue;
        }
        if (!strcmp(s, "[tune]")) {
            if (in_section && (finish_section(&tf, &cur, seen, why, sizeof why) ||
                               nc_tunefile_put(&tf, &cur))) {
                lineno = cur.line;
                rc = NUMACOLL_ERR_INVAL;
                break;
            }
            memset(&cur, 0, sizeof cur);
            cur.line = lineno;
            seen = 0;
            in_section = 1;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(why, sizeof why, "\"%s\": expected \"[tune]\" or \"key = value\"",
                     nc_quote(q, sizeof q, s));
            rc = NUMACOLL_ERR_INVAL;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        if (!in_section) {
            snprintf(why, sizeof why,
                     "key \"%s\" before the first [tune] section (expected a \"[tune]\" line "
                     "first)",
                     nc_quote(q, sizeof q, key));
            rc = NUMACOLL_ERR_INVAL;
            break;
        }
        int sk = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(key, sig_keys[k]))
                sk = k;
        if (sk >= 0) {
            if (seen & (1u << sk)) {
                snprintf(why, sizeof why, "%s given twice in one section", key);
                rc = NUMACOLL_ERR_INVAL;
            } else if (sk == 0) {
                collapse_spaces(cur.sig.cpu_model, sizeof cur.sig.cpu_model, val);
                if (!cur.sig.cpu_model[0]) {
                    snprintf(why, sizeof why,
                             "cpu_model is empty (expected the CPU model, as numacoll-tune "
                             "writes it)");
                    rc = NUMACOLL_ERR_INVAL;
                }
            } else if (parse_count(val, sk == 1 ? &cur.sig.numa_nodes
                                         : sk == 2 ? &cur.sig.cores
                                                   : &cur.sig.p)) {
                snprintf(why, sizeof why,
                         "%s = \"%s\": expected a positive integer (1 to %d)", key,
                         nc_quote(q, sizeof q, val), INT_MAX);
                rc = NUMACOLL_ERR_INVAL;
            }
            seen |= 1u << sk;
            continue;
        }
        for (int k = 0; k < cur.nkv && !rc; k++) {
            int a = nc_param_lookup(key);
            if ((a >= 0 && a == nc_param_lookup(cur.kv[k].key)) || !strcasecmp(key, cur.kv[k].key)) {
                snprintf(why, sizeof why, "%s given twice in one section",
                         nc_quote(q, sizeof q, key));
                rc = NUMACOLL_ERR_INVAL;
            }
        }
        if (!rc && nc_tune_section_set(&cur, key, val, why, sizeof why))
            rc = NUMACOLL_ERR_TUNABLE;
    }
    if (!rc && ferror(fp)) {
        snprintf(why, sizeof why, "read error");
        rc = NUMACOLL_ERR_INVAL;
    }
    if (!rc && !have_version) {
        snprintf(why, sizeof why,
                 "empty (expected \"numacoll-tune-file %d\" as the first line that is not a "
                 "comment)",
                 NC_TUNE_FORMAT_VERSION);
        rc = NUMACOLL_ERR_INVAL;
    }
    if (!rc && in_section &&
        (finish_section(&tf, &cur, seen, why, sizeof why) || nc_tunefile_put(&tf, &cur))) {
        lineno = cur.line;
        rc = NUMACOLL_ERR_INVAL;
    }
    if (rc) {
        snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
        nc_tunefile_free(&tf);
        return rc;
    }
    *out = tf;
    return 0;
}

/* Opens a tune file for reading: O_NONBLOCK so that a FIFO named by
 * NUMACOLL_TUNE_FILE cannot hang the open, then only regular files are read.
 * Symbolic links are followed on purpose (a link in ~/.config is legitimate);
 * what matters is the file finally opened, so its owner and mode are checked
 * with fstat() on the open descriptor (no window between check and read).
 * trusted: also refuse a file that others could have written: group- or
 * world-writable, or owned by neither the effective user nor root. On refusal
 * `why` says why (without the path) and *fp is NULL. */
static int open_tunefile(const char *path, int trusted, FILE **fp, char *why, size_t len)
{
    *fp = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, len, "%s", strerror(errno));
        return NUMACOLL_ERR_INVAL;
    }
    struct stat st;
    const char *bad = NULL;
    char buf[160];
    if (fstat(fd, &st)) {
        snprintf(buf, sizeof buf, "%s", strerror(errno));
        bad = buf;
    } else if (!S_ISREG(st.st_mode)) {
        bad = "not a regular file";
    } else if (trusted && st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(buf, sizeof buf, "owned by uid %u, neither this user (uid %u) nor root; "
                 "only a file you or root own is read", (unsigned)st.st_uid, (unsigned)geteuid());
        bad = buf;
    } else if (trusted && (st.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(buf, sizeof buf, "writable by others (mode %04o); chmod go-w %s",
                 (unsigned)(st.st_mode & 07777), path);
        bad = buf;
    }
    if (bad) {
        snprintf(why, len, "%s", bad);
        close(fd);
        return NUMACOLL_ERR_INVAL;
    }
    /* regular file: blocking reads from here on */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *fp = fdopen(fd, "r");
    if (!*fp) {
        snprintf(why, len, "%s", strerror(errno));
        close(fd);
        return NUMACOLL_ERR_NOMEM;
    }
    return 0;
}

int nc_tunefile_read(const char *path, nc_tunefile_t *out, char *err, size_t errlen)
{
    FILE *fp;
    char why[256];
    out->nsec = 0;
    out->sec = NULL;
    if (open_tunefile(path, 0, &fp, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        return NUMACOLL_ERR_INVAL;
    }
    int rc = nc_tunefile_read_stream(fp, path, out, err, errlen);
    fclose(fp);
    return rc;
}

/* ---- writing ------------------------------------------------------------------- */

int nc_tunefile_write_stream(FILE *fp, const nc_tunefile_t *tf, const char *header_comment)
{
    fprintf(fp, "# numacoll tune file: one [tune] section per (machine signature, team size p).\n"
                "# Read from NUMACOLL_TUNE_FILE, $XDG_CONFIG_HOME/numacoll/tune or\n"
                "# /etc/numacoll/tune; NUMACOLL_* environment variables win over it.\n");
    if (header_comment) {
        const char *c = header_comment;
        while (*c) {
            size_t n = strcspn(c, "\n");
            fprintf(fp, "# %.*s\n", (int)n, c);
            c += n + (c[n] == '\n');
        }
    }
    fprintf(fp, "numacoll-tune-file %d\n", NC_TUNE_FORMAT_VERSION);
    for (int i = 0; i < tf->nsec; i++) {
        const nc_tune_section_t *s = &tf->sec[i];
        fprintf(fp, "\n[tune]\ncpu_model = %s\nnuma_nodes = %d\ncores = %d\np = %d\n",
                s->sig.cpu_model, s->sig.numa_nodes, s->sig.cores, s->sig.p);
        for (int k = 0; k < s->nkv; k++)
            fprintf(fp, "%s = %s\n", s->kv[k].key, s->kv[k].value);
    }
    return ferror(fp) ? NUMACOLL_ERR_INVAL : 0;
}

int nc_tunefile_write(const char *path, const nc_tunefile_t *tf, const char *header_comment,
                      char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "%s: path too long", path);
        return NUMACOLL_ERR_INVAL;
    }
    /* A fresh file, created 0644 (less the umask): the library ignores a tune
     * file others can write, so never hand a stale temporary's mode on. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *fp = fd < 0 ? NULL : fdopen(fd, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return NUMACOLL_ERR_INVAL;
    }
    int bad = nc_tunefile_write_stream(fp, tf, header_comment);
    if (fclose(fp) || bad || rename(tmp, path)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
        unlink(tmp);
        return NUMACOLL_ERR_INVAL;
    }
    return 0;
}

/* ---- where the library looks ------------------------------------------------- */

const char *nc_tunefile_path(char *buf, size_t len, const char **origin)
{
    const char *o = NULL, *e = getenv("NUMACOLL_TUNE_FILE");
    const char *ret = NULL;
    if (e) {
        if (!*e || !strcasecmp(e, "none")) {
            o = "turned off by NUMACOLL_TUNE_FILE";
        } else {
            snprintf(buf, len, "%s", e);
            o = "NUMACOLL_TUNE_FILE";
            ret = buf;
        }
    } else {
        const char *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
        if (x && *x) {
            snprintf(buf, len, "%s/numacoll/tune", x);
            o = "XDG_CONFIG_HOME";
        } else if (h && *h) {
            snprintf(buf, len, "%s/.config/numacoll/tune", h);
            o = "HOME";
        }
        if (o && !access(buf, F_OK)) {
            ret = buf;
        } else {
            snprintf(buf, len, "/etc/numacoll/tune");
            o = "/etc";
            if (!access(buf, F_OK))
                ret = buf;
            else
                o = "no tune file in the default locations";
        }
    }
    if (origin)
        *origin = o;
    return ret;
}

/* ---- applying ------------------------------------------------------------------ */

static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
static char status_line[640] = "not read yet";
/* Messages already reported: nc_tunefile_apply() runs at every team creation,
 * and a process must not repeat the same complaint for each of them. */
#define NC_TUNE_REPORTED_MAX 16
static char reported[NC_TUNE_REPORTED_MAX][640];
static int nreported;

enum { NC_TUNE_QUIET = 0, NC_TUNE_ERROR, NC_TUNE_WARN };

/* Set the status; with `loud` (error or warning) report it on stderr, once per
 * distinct message and process. */
static void set_status(int loud, const char *fmt, ...) NC_PRINTF(2, 3);
static void set_status(int loud, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&status_lock);
    snprintf(status_line, sizeof status_line, "%s", msg);
    int report = loud != NC_TUNE_QUIET;
    for (int i = 0; report && i < nreported; i++)
        if (!strcmp(reported[i], msg))
            report = 0;
    if (report && nreported < NC_TUNE_REPORTED_MAX)
        snprintf(reported[nreported++], sizeof reported[0], "%s", msg);
    pthread_mutex_unlock(&status_lock);
    if (report && loud == NC_TUNE_WARN) {
        /* the library's log line, tagged as a warning; one write */
        char line[720];
        snprintf(line, sizeof line, "numacoll[%d] warning: %s\n", (int)getpid(), msg);
        fputs(line, stderr);
    } else if (report) {
        nc_log_error("%s", msg);
    }
}

void nc_tunefile_status(char *buf, size_t len)
{
    pthread_mutex_lock(&status_lock);
    snprintf(buf, len, "%s", status_line);
    pthread_mutex_unlock(&status_lock);
}

int nc_tunefile_apply(nc_config_t *cfg, int p)
{
    char path[PATH_MAX], err[512];
    const char *origin;
    nc_config_t c = *cfg;

    /* Values of an earlier application go back to their defaults first. */
    for (int i = 0; i < NC_PARAM_COUNT; i++)
        if (c.v[i].source == NC_SRC_TUNE_FILE) {
            c.v[i].source = NC_SRC_DEFAULT;
            if (nc_param_parse(i, nc_param_desc(i)->defval, &c.v[i], err, sizeof err))
                return 0;
        }

    if (!nc_tunefile_path(path, sizeof path, &origin)) {
        set_status(NC_TUNE_QUIET, "none (%s)", origin);
        *cfg = c;
        return 0;
    }
    int named = !strcmp(origin, "NUMACOLL_TUNE_FILE");
    nc_tunefile_t tf;
    FILE *fp;
    char why[256];
    int orc = open_tunefile(path, 1, &fp, why, sizeof why);
    if (orc && access(path, F_OK) == 0) {
        /* there, but not safe (or not readable) */
        set_status(NC_TUNE_WARN, "ignoring tune file %s: %s", path, why);
        *cfg = c;
        return 0;
    }
    if (orc) {
        set_status(NC_TUNE_ERROR, "tune file ignored (nothing applied): %s: %s", path, why);
        *cfg = c;
        return 0;
    }
    int rrc = nc_tunefile_read_stream(fp, path, &tf, err, sizeof err);
    fclose(fp);
    if (rrc) {
        set_status(NC_TUNE_ERROR, "tune file ignored (nothing applied): %s", err);
        *cfg = c;
        return 0;
    }
    nc_tune_sig_t me;
    if (nc_tune_sig_local(&me)) {
        set_status(NC_TUNE_ERROR, "tune file %s ignored: this machine's topology could not be read",
                   path);
        nc_tunefile_free(&tf);
        *cfg = c;
        return 0;
    }
    const nc_tune_section_t *sec = NULL;
    if (p > 0)
        sec = nc_tunefile_find(&tf, &me, p);
    if (!sec)
        sec = nc_tunefile_find(&tf, &me, me.cores);
    if (!sec) {
        char sig[256];
        me.p = p > 0 ? p : me.cores;
        nc_tune_sig_format(&me, sig, sizeof sig);
        int same = 0;
        for (int i = 0; i < tf.nsec; i++)
            same += nc_tune_sig_same_machine(&tf.sec[i].sig, &me);
        set_status(named ? NC_TUNE_ERROR : NC_TUNE_QUIET,
                   "tune file %s ignored: %s for this machine (%s)", path,
                   same ? "no section for this team size or the core count"
                        : "foreign: no section",
                   sig);
        nc_tunefile_free(&tf);
        *cfg = c;
        return 0;
    }
    int n = 0;
    for (int k = 0; k < sec->nkv; k++) {
        int i = nc_param_lookup(sec->kv[k].key);
        if (i < 0 || c.v[i].source != NC_SRC_DEFAULT)
            continue; /* info.*, or set by the environment / the API: those win */
        nc_param_value_t v = {.source = NC_SRC_TUNE_FILE};
        if (nc_param_parse(i, sec->kv[k].value, &v, err, sizeof err))
            continue; /* cannot happen: checked when read */
        c.v[i] = v;
        n++;
    }
    int secp = sec->sig.p, line = sec->line;
    nc_tunefile_free(&tf);
    if (nc_config_check(&c, err, sizeof err)) {
        set_status(NC_TUNE_ERROR,
                   "tune file %s:%d ignored (nothing applied): with the environment: %s", path,
                   line, err);
        return 0;
    }
    set_status(NC_TUNE_QUIET, "%s (%s): section at line %d (p=%d) applied, %d value%s", path, origin, line,
               secp, n, n == 1 ? "" : "s");
    *cfg = c;
    return n;
}
