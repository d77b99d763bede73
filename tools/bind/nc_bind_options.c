/*
 * numacoll-bind: command line, --cpus list parser, launcher environment.
 */
#include "nc_bind.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"

static int nc_bind_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int nc_bind_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The valid form, at the end of every syntax error of a --cpus list. */
#define NC_BIND_CPULIST_FORM \
    "valid: CPU numbers and ranges A-B or A-B:S separated by ',', e.g. 0,7-3,23-27:2"

/* "--cpus "TEXT": position N: <what> (valid: ...)" */
static int nc_bind_list_fail(char *err, size_t errlen, const char *text, size_t pos, int form,
                             const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int nc_bind_list_fail(char *err, size_t errlen, const char *text, size_t pos, int form,
                             const char *fmt, ...)
{
    char q[NC_QUOTE_LEN], what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nc_bind_fail(err, errlen, "--cpus \"%s\": position %zu: %s%s",
                        nc_quote(q, sizeof q, text), pos, what,
                        form ? " (" NC_BIND_CPULIST_FORM ")" : "");
}

/* One character of the list as the message shows it: 'x', or '\x01'. */
static const char *nc_bind_char(char *buf, size_t len, char c)
{
    char s[2] = {c, '\0'};
    return nc_quote(buf, len, s);
}

/*
 * CPU list grammar (the ICM "launch" TARGET_CPU_LIST syntax):
 *
 *   list   := item { ',' item }
 *   item   := number [ '-' number [ ':' stride ] ]
 *   number := digit { digit }                      (decimal, 0 .. INT_MAX)
 *   stride := number                               (>= 1)
 *
 * "a-b" runs from a to b inclusive and may be reversed (a > b counts down);
 * ":s" takes every s-th CPU starting at a, stopping before passing b. So
 * "0,7-3,11-14,23-27:2,46-37:3" expands to
 * 0,7,6,5,4,3,11,12,13,14,23,25,27,46,43,40,37. No blanks, no empty items, no
 * trailing comma. CPUs may repeat (ranks sharing a CPU). The expansion is capped at
 * NC_BIND_MAX_LIST entries. Errors name the 1-based character position.
 *
 * On success *list (and *pos, if pos is not NULL: the 1-based position of the item
 * each entry came from) are malloc'ed and *count is set.
 */
static int nc_bind_parse_number(const char *text, size_t *i, long *val, const char *what,
                                char *err, size_t errlen)
{
    size_t start = *i;
    long v = 0;
    char c[16];
    if (text[*i] < '0' || text[*i] > '9') {
        if (text[*i] == '\0')
            return nc_bind_list_fail(err, errlen, text, *i + 1, 1,
                                     "expected %s, found end of list", what);
        return nc_bind_list_fail(err, errlen, text, *i + 1, 1, "expected %s, found '%s'", what,
                                 nc_bind_char(c, sizeof c, text[*i]));
    }
    while (text[*i] >= '0' && text[*i] <= '9') {
        v = v * 10 + (text[*i] - '0');
        if (v > INT_MAX)
            return nc_bind_list_fail(err, errlen, text, start + 1, 1,
                                     "number too large, at most %d", INT_MAX);
        (*i)++;
    }
    *val = v;
    return 0;
}

int nc_bind_cpulist_parse(const char *text, int **list, int **pos, int *count,
                          char *err, size_t errlen)
{
    size_t i = 0;
    int n = 0, cap = 16;
    int *l = malloc(sizeof(int) * (size_t)cap);
    int *p = malloc(sizeof(int) * (size_t)cap);
    if (!l || !p) {
        free(l);
        free(p);
        return nc_bind_fail(err, errlen, "out of memory");
    }
    if (text[0] == '\0') {
        free(l);
        free(p);
        return nc_bind_list_fail(err, errlen, text, 1, 1, "empty list");
    }
    for (;;) {
        size_t item = i;
        long a, b, stride = 1;
        if (nc_bind_parse_number(text, &i, &a, "a CPU number", err, errlen))
            goto fail;
        b = a;
        if (text[i] == '-') {
            i++;
            if (nc_bind_parse_number(text, &i, &b, "the end of a range", err, errlen))
                goto fail;
            if (text[i] == ':') {
                size_t spos = ++i;
                if (nc_bind_parse_number(text, &i, &stride, "a stride", err, errlen))
                    goto fail;
                if (stride < 1) {
                    nc_bind_list_fail(err, errlen, text, spos + 1, 1, "stride must be at least 1");
                    goto fail;
                }
            }
        } else if (text[i] == ':') {
            nc_bind_list_fail(err, errlen, text, i + 1, 1, "a stride needs a range (a-b:s)");
            goto fail;
        }
        /* 1. expand a..b by stride, counting down when a > b */
        long step = a <= b ? stride : -stride;
        for (long c = a; a <= b ? c <= b : c >= b; c += step) {
            if (n == NC_BIND_MAX_LIST) {
                nc_bind_list_fail(err, errlen, text, item + 1, 0,
                                  "list expands to more than %d CPUs", NC_BIND_MAX_LIST);
                goto fail;
            }
            if (n == cap) {
                cap *= 2;
                int *nl = realloc(l, sizeof(int) * (size_t)cap);
                if (!nl) {
                    nc_bind_fail(err, errlen, "out of memory");
                    goto fail;
                }
                l = nl;
                int *np = realloc(p, sizeof(int) * (size_t)cap);
                if (!np) {
                    nc_bind_fail(err, errlen, "out of memory");
                    goto fail;
                }
                p = np;
            }
            l[n] = (int)c;
            p[n] = (int)item + 1;
            n++;
        }
        /* 2. separator or end */
        if (text[i] == '\0')
            break;
        if (text[i] != ',') {
            char c[16];
            nc_bind_list_fail(err, errlen, text, i + 1, 1, "expected ',' or end of list, found '%s'",
                              nc_bind_char(c, sizeof c, text[i]));
            goto fail;
        }
        i++;
        if (text[i] == '\0') {
            nc_bind_list_fail(err, errlen, text, i, 1, "trailing ','");
            goto fail;
        }
    }
    *list = l;
    if (pos)
        *pos = p;
    else
        free(p);
    *count = n;
    return 0;
fail:
    free(l);
    free(p);
    return -1;
}

/* Strict decimal integer in [lo, hi]. */
static int nc_bind_parse_int(const char *opt, const char *s, long lo, long hi, long *out,
                             char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    char q[NC_QUOTE_LEN];
    if (s[0] == '\0' || *end != '\0' || errno || s[0] == '+' || s[0] == ' ')
        return nc_bind_fail(err, errlen, "%s: \"%s\" is not an integer in [%ld, %ld]", opt,
                            nc_quote(q, sizeof q, s), lo, hi);
    if (v < lo || v > hi)
        return nc_bind_fail(err, errlen, "%s: %ld is out of range [%ld, %ld]", opt, v, lo, hi);
    *out = v;
    return 0;
}

void nc_bind_usage(FILE *out)
{
    fputs(
"usage: numacoll-bind [options] [--] program [args...]\n"
"       numacoll-bind --dry-run [--topology FILE|SYNTHETIC] [--np N] [options] [-- program [args...]]\n"
"       numacoll-bind --stream [options]\n"
"Place this MPI rank (found from the launcher's environment) and its threads, then exec.\n"
"  -c, --cpus LIST          explicit CPU list, e.g. 0,7-3,11-14,23-27:2,46-37:3; local rank i\n"
"                           takes the i-th entry (the i-th group with --pus-per-rank);\n"
"                           -1 or auto means automatic placement (the default)\n"
"  -p, --physical           --cpus and output use OS (physical) numbers (default)\n"
"  -l, --logical            --cpus and output use hwloc logical indexes\n"
"      --policy P           distribute (default: round-robin over NUMA domains),\n"
"                           accumulate (fill a domain first) or none (do not bind)\n"
"      --cores-per-rank N   whole cores per rank (default 1, or --threads)\n"
"      --pus-per-rank N     hardware threads per rank (not with --cores-per-rank)\n"
"      --oversubscribe      let ranks share cores once every core is taken\n"
"      --mem M              memory affinity: none (default), prefer or bind\n"
"  -t, --threads N          OpenMP threads per rank: exports OMP_NUM_THREADS, OMP_PLACES,\n"
"                           OMP_PROC_BIND for the rank's own cores\n"
"      --report             print where this rank (and, with --threads, each thread after\n"
"                           start-up) runs, as read back from the kernel\n"
"      --report-wait MS     how long --report waits for the threads (default 10000)\n"
"      --dry-run            print the placement table (and the program each rank would\n"
"                           exec), bind nothing, start nothing\n"
"      --topology T         dry run on an hwloc XML file or synthetic description,\n"
"                           e.g. \"numa:4 core:8 pu:4\"\n"
"      --np N               number of local ranks for the dry run\n"
"      --stream             run a STREAM-like kernel on every rank instead of a program;\n"
"                           local rank 0 prints the aggregate rates\n"
"      --stream-size N      doubles per array and rank (default 2000000)\n"
"      --stream-ntimes N    repetitions (default 10)\n"
"  -v, --verbose            say which launcher variables were used\n"
"  -h, --help               this text\n"
"      --version            version\n"
"Exit status 2: bad option, malformed list, or a placement the node cannot satisfy.\n",
        out);
}

/* Matches "--name" or "--name=value"; *val gets the value (inline or next argv). */
static int nc_bind_match(const char *arg, const char *name, const char *shortname, int argc,
                         char **argv, int *i, const char **val, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (shortname && strcmp(arg, shortname) == 0) {
        /* fall through to take the next argument */
    } else if (strncmp(arg, name, n) == 0 && arg[n] == '=') {
        *val = arg + n + 1;
        return 1;
    } else if (strcmp(arg, name) != 0) {
        return 0;
    }
    if (*i + 1 >= argc) {
        nc_bind_fail(err, errlen, "%s needs a value", arg); /* as typed: -c or --cpus */
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

int nc_bind_opts_parse(int argc, char **argv, struct nc_bind_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    o->policy = NC_BIND_POLICY_DISTRIBUTE;
    o->mem = NC_BIND_MEM_NONE;
    o->report_wait_ms = 10000;
    o->stream_n = 2000000;
    o->stream_ntimes = 10;
    int have_policy = 0, have_mem = 0;
    char q[NC_QUOTE_LEN];

    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        long n;
        int m;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break; /* first non-option: the program */
#define NC_BIND_OPT(name, shortname)                                                   \
    ((m = nc_bind_match(a, name, shortname, argc, argv, &i, &v, err, errlen)) < 0      \
         ? -1 : m)
        if ((m = NC_BIND_OPT("--cpus", "-c")) != 0) {
            if (m < 0)
                return -1;
            o->cpus = (strcmp(v, "-1") == 0 || strcmp(v, "auto") == 0) ? NULL : v;
        } else if ((m = NC_BIND_OPT("--policy", NULL)) != 0) {
            if (m < 0)
                return -1;
            if (strcmp(v, "distribute") == 0)
                o->policy = NC_BIND_POLICY_DISTRIBUTE;
            else if (strcmp(v, "accumulate") == 0)
                o->policy = NC_BIND_POLICY_ACCUMULATE;
            else if (strcmp(v, "none") == 0)
                o->policy = NC_BIND_POLICY_NONE;
            else
                return nc_bind_fail(err, errlen,
                                    "--policy: unknown value \"%s\" (valid: distribute, accumulate, none)",
                                    nc_quote(q, sizeof q, v));
            have_policy = 1;
        } else if ((m = NC_BIND_OPT("--mem", NULL)) != 0) {
            if (m < 0)
                return -1;
            if (strcmp(v, "none") == 0)
                o->mem = NC_BIND_MEM_NONE;
            else if (strcmp(v, "prefer") == 0)
                o->mem = NC_BIND_MEM_PREFER;
            else if (strcmp(v, "bind") == 0)
                o->mem = NC_BIND_MEM_BIND;
            else
                return nc_bind_fail(err, errlen,
                                    "--mem: unknown value \"%s\" (valid: none, prefer, bind)",
                                    nc_quote(q, sizeof q, v));
            have_mem = 1;
        } else if ((m = NC_BIND_OPT("--cores-per-rank", NULL)) != 0) {
            if (m < 0 || nc_bind_parse_int("--cores-per-rank", v, 1, 1 << 20, &n, err, errlen))
                return -1;
            o->cores_per_rank = (int)n;
        } else if ((m = NC_BIND_OPT("--pus-per-rank", NULL)) != 0) {
            if (m < 0 || nc_bind_parse_int("--pus-per-rank", v, 1, 1 << 20, &n, err, errlen))
                return -1;
            o->pus_per_rank = (int)n;
        } else if ((m = NC_BIND_OPT("--threads", "-t")) != 0) {
            if (m < 0 || nc_bind_parse_int("--threads", v, 1, 1 << 16, &n, err, errlen))
                return -1;
            o->threads = (int)n;
        } else if ((m = NC_BIND_OPT("--report-wait", NULL)) != 0) {
            if (m < 0 || nc_bind_parse_int("--report-wait", v, 0, 3600 * 1000, &n, err, errlen))
                return -1;
            o->report_wait_ms = (int)n;
        } else if ((m = NC_BIND_OPT("--topology", NULL)) != 0) {
            if (m < 0)
                return -1;
            o->topology = v;
        } else if ((m = NC_BIND_OPT("--np", NULL)) != 0) {
            if (m < 0 || nc_bind_parse_int("--np", v, 1, NC_BIND_MAX_RANKS, &n, err, errlen))
                return -1;
            o->np = (int)n;
        } else if ((m = NC_BIND_OPT("--stream-size", NULL)) != 0) {
            if (m < 0 || nc_bind_parse_int("--stream-size", v, 1000, 1L << 30, &n, err, errlen))
                return -1;
            o->stream_n = n;
        } else if ((m = NC_BIND_OPT("--stream-ntimes", NULL)) != 0) {
            if (m < 0 || nc_bind_parse_int("--stream-ntimes", v, 2, 1000, &n, err, errlen))
                return -1;
            o->stream_ntimes = (int)n;
        } else if (strcmp(a, "-l") == 0 || strcmp(a, "--logical") == 0) {
            o->logical = 1;
        } else if (strcmp(a, "-p") == 0 || strcmp(a, "--physical") == 0) {
            o->logical = 0;
        } else if (strcmp(a, "--oversubscribe") == 0) {
            o->oversubscribe = 1;
        } else if (strcmp(a, "--report") == 0) {
            o->report = 1;
        } else if (strcmp(a, "--dry-run") == 0) {
            o->dry_run = 1;
        } else if (strcmp(a, "--stream") == 0) {
            o->stream = 1;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            o->version = 1;
            return 0;
        } else {
            return nc_bind_fail(err, errlen, "unknown option \"%s\" (see --help)",
                                nc_quote(q, sizeof q, a));
        }
#undef NC_BIND_OPT
    }
    o->prog = i < argc ? &argv[i] : NULL;

    /* Combinations. */
    if (o->cores_per_rank && o->pus_per_rank)
        return nc_bind_fail(err, errlen, "--cores-per-rank and --pus-per-rank exclude each other");
    if (o->cpus && o->cores_per_rank)
        return nc_bind_fail(err, errlen,
                            "--cores-per-rank cannot be used with --cpus (list entries are PUs; use --pus-per-rank)");
    if (o->cpus && have_policy)
        return nc_bind_fail(err, errlen, "--policy cannot be used with --cpus (the list is the placement)");
    if (o->policy == NC_BIND_POLICY_NONE &&
        (o->cores_per_rank || o->pus_per_rank || o->oversubscribe))
        return nc_bind_fail(err, errlen, "--policy none binds nothing; drop --cores-per-rank/--pus-per-rank/--oversubscribe");
    if (o->policy == NC_BIND_POLICY_NONE && have_mem && o->mem != NC_BIND_MEM_NONE)
        return nc_bind_fail(err, errlen, "--mem %s needs a placement, but --policy none leaves ranks unbound",
                            nc_bind_mem_name(o->mem));
    if (o->topology && !o->dry_run)
        return nc_bind_fail(err, errlen, "--topology describes another machine: it needs --dry-run");
    if (o->np && !o->dry_run)
        return nc_bind_fail(err, errlen, "--np is for --dry-run (a real run takes the local size from the launcher)");
    if (o->dry_run && (o->stream || o->report))
        return nc_bind_fail(err, errlen, "--dry-run starts nothing: it cannot be combined with --stream or --report");
    if (o->stream && o->prog)
        return nc_bind_fail(err, errlen, "--stream runs in place of a program, but \"%s\" was given",
                            nc_quote(q, sizeof q, o->prog[0]));
    if (!o->prog && !o->dry_run && !o->stream && !o->report)
        return nc_bind_fail(err, errlen, "no program given (usage: numacoll-bind [options] -- program [args])");
    return 0;
}

/* ---- launcher environment ------------------------------------------------ */

static int nc_bind_env_int(const char *name, long *v)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s)
        return 0;
    errno = 0;
    *v = strtol(s, &end, 10);
    if (*end || errno)
        return -1;
    return 1;
}

/* Slurm's "2(x3),1" task-per-node list: entry for node index `node`. */
static long nc_bind_slurm_tasks(const char *s, long node)
{
    while (s && *s) {
        char *end;
        long tasks = strtol(s, &end, 10), reps = 1;
        if (end == s)
            return -1;
        s = end;
        if (strncmp(s, "(x", 2) == 0) {
            reps = strtol(s + 2, &end, 10);
            if (end == s + 2 || *end != ')')
                return -1;
            s = end + 1;
        }
        if (node < reps)
            return tasks;
        node -= reps;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return -1;
}

/*
 * Local rank and local size from the launcher, first match wins:
 *   NUMACOLL_BIND_LOCAL_RANK/_SIZE        explicit override
 *   OMPI_COMM_WORLD_LOCAL_RANK/_SIZE      Open MPI (mpirun, prrte)
 *   MPI_LOCALRANKID/MPI_LOCALNRANKS       MPICH and Intel MPI (Hydra)
 *   MV2_COMM_WORLD_LOCAL_RANK/_SIZE       MVAPICH2
 *   PMIX_LOCAL_RANK/PMIX_LOCAL_SIZE       PMIx launchers that export them
 *   SLURM_LOCALID + SLURM_NTASKS_PER_NODE or SLURM_STEP_TASKS_PER_NODE[SLURM_NODEID]
 *   nothing: local rank 0 of 1 (an error if PMIX_RANK or PMI_RANK says otherwise)
 */
int nc_bind_launcher_env(int *local_rank, int *local_size, const char **source,
                         char *err, size_t errlen)
{
    static const char *pairs[][3] = {
        {"NUMACOLL_BIND_LOCAL_RANK", "NUMACOLL_BIND_LOCAL_SIZE", "NUMACOLL_BIND_LOCAL_*"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "Hydra (MPICH)"},
        {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MVAPICH2"},
        {"PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE", "PMIx"},
    };
    long r, s;
    for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
        int hr = nc_bind_env_int(pairs[k][0], &r);
        if (hr == 0)
            continue;
        int hs = nc_bind_env_int(pairs[k][1], &s);
        if (hr < 0 || hs <= 0 || r < 0 || s < 1 || r >= s || s > NC_BIND_MAX_RANKS) {
            char q1[NC_QUOTE_LEN], q2[NC_QUOTE_LEN];
            const char *sz = getenv(pairs[k][1]);
            return nc_bind_fail(err, errlen,
                                "launcher variables %s=\"%s\" %s=\"%s\" are inconsistent",
                                pairs[k][0], nc_quote(q1, sizeof q1, getenv(pairs[k][0])),
                                pairs[k][1], nc_quote(q2, sizeof q2, sz ? sz : "(unset)"));
        }
        *local_rank = (int)r;
        *local_size = (int)s;
        *source = pairs[k][2];
        return 0;
    }
    if (nc_bind_env_int("SLURM_LOCALID", &r) > 0) {
        long node = 0;
        const char *list;
        if (nc_bind_env_int("SLURM_NTASKS_PER_NODE", &s) <= 0) {
            list = getenv("SLURM_STEP_TASKS_PER_NODE");
            if (!list)
                list = getenv("SLURM_TASKS_PER_NODE");
            if (nc_bind_env_int("SLURM_NODEID", &node) < 0)
                node = -1;
            s = node >= 0 && list ? nc_bind_slurm_tasks(list, node) : -1;
        }
        if (r < 0 || s < 1 || r >= s || s > NC_BIND_MAX_RANKS)
            return nc_bind_fail(err, errlen, "Slurm variables give local rank %ld of %ld: inconsistent "
                                "(set NUMACOLL_BIND_LOCAL_RANK/_SIZE)", r, s);
        *local_rank = (int)r;
        *local_size = (int)s;
        *source = "Slurm";
        return 0;
    }
    const char *g = getenv("PMIX_RANK") ? "PMIX_RANK" : getenv("PMI_RANK") ? "PMI_RANK" : NULL;
    if (g && strcmp(getenv(g), "0") != 0)
        return nc_bind_fail(err, errlen, "%s=%s is set but no local rank variable was found; "
                            "set NUMACOLL_BIND_LOCAL_RANK and NUMACOLL_BIND_LOCAL_SIZE", g, getenv(g));
    *local_rank = 0;
    *local_size = 1;
    *source = "none (single process)";
    return 0;
}
