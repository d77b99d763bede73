/*
 * Tune files: machine-specific tuning as data (numacoll-tune writes them, the
 * library reads them). Never C per CPU model.
 *
 * Where the library looks (first match wins):
 *   1. $NUMACOLL_TUNE_FILE (a path; "" or "none" turns tune files off);
 *   2. $XDG_CONFIG_HOME/numacoll/tune (default $HOME/.config/numacoll/tune);
 *   3. /etc/numacoll/tune.
 * A missing file at 2 or 3 is normal; a missing file named by 1 is reported.
 * Whichever applies must be a regular file owned by the effective user or root
 * and writable by nobody else (mode & 022 == 0), checked with fstat() on the
 * opened file (a symbolic link to such a file is fine); any other file is
 * ignored with a one-line warning naming it and the reason, once per process.
 *
 * Format (text, one key = value per line, '#' starts a comment line):
 *
 *   numacoll-tune-file 1                 <- first non-comment line: format version
 *   [tune]                               <- one section per (signature, p)
 *   cpu_model = AMD EPYC                 \
 *   numa_nodes = 1                        | the topology signature; all four required
 *   cores = 2                             |
 *   p = 2                                /  team size the values were tuned for
 *   BCAST_FRAG_SIZE = 12288              <- tunables (NUMACOLL_ prefix optional),
 *   BCAST_QUEUE_LEN = 64                    checked like the environment
 *   info.t_per_byte = 1.9e-10            <- info.*: free text, ignored by the library
 *
 * Validation is all or nothing: a syntax error, an unknown key, an invalid value,
 * a duplicate key or a duplicate (signature, p) anywhere rejects the whole file,
 * which is reported once per process and ignored. A file without a section for
 * this machine ("foreign") is ignored (reported when named by NUMACOLL_TUNE_FILE).
 *
 * Which section applies: the configuration (process-wide) takes the section
 * whose p equals this node's core count; a team of p members takes the section
 * for exactly p if there is one (nc_tunefile_apply(cfg, p) at team creation),
 * else keeps the core-count section. Values set by the environment or by
 * numacoll_param_set() always win over the tune file.
 */
#ifndef NC_TUNEFILE_H
#define NC_TUNEFILE_H

#include <hwloc.h>
#include <stddef.h>
#include <stdio.h>

#include "config/nc_config.h"

#define NC_TUNE_FORMAT_VERSION 1
#define NC_TUNE_MAX_KV 48

typedef struct nc_tune_sig {
    char cpu_model[128]; /* whitespace collapsed; "unknown" if hwloc has none */
    int numa_nodes;
    int cores;
    int p;               /* team size; 0 = not part of the signature yet */
} nc_tune_sig_t;

typedef struct nc_tune_kv {
    char key[64];
    char value[160];
} nc_tune_kv_t;

typedef struct nc_tune_section {
    nc_tune_sig_t sig;
    int line;            /* where the section starts (read files) */
    int nkv;
    nc_tune_kv_t kv[NC_TUNE_MAX_KV]; /* tunables (canonical names) and info.* */
} nc_tune_section_t;

typedef struct nc_tunefile {
    int nsec;
    nc_tune_section_t *sec;
} nc_tunefile_t;

/* The signature of a topology (p = 0) and of this machine (loaded once). */
int nc_tune_sig_of_topology(hwloc_topology_t topo, nc_tune_sig_t *sig);
int nc_tune_sig_local(nc_tune_sig_t *sig);
/* Same machine (cpu model, NUMA nodes, cores); p is not compared. */
int nc_tune_sig_same_machine(const nc_tune_sig_t *a, const nc_tune_sig_t *b);
void nc_tune_sig_format(const nc_tune_sig_t *sig, char *buf, size_t len);

/* Parse and validate a whole file. 0, or NUMACOLL_ERR_INVAL/TUNABLE with
 * "path:line: why" in err and *tf left empty (nothing half-read). */
int nc_tunefile_read(const char *path, nc_tunefile_t *tf, char *err, size_t errlen);
/* The same from an open stream; path only names it in messages. Not closed. */
int nc_tunefile_read_stream(FILE *fp, const char *path, nc_tunefile_t *tf, char *err,
                            size_t errlen);
void nc_tunefile_free(nc_tunefile_t *tf);
/* Replace the section with the same signature and p, or append. */
int nc_tunefile_put(nc_tunefile_t *tf, const nc_tune_section_t *sec);
/* Add or replace key = value in a section (tunables are checked and stored
 * under their canonical name; info.* keys are stored as given). */
int nc_tune_section_set(nc_tune_section_t *sec, const char *key, const char *value, char *err,
                        size_t errlen);
const nc_tune_section_t *nc_tunefile_find(const nc_tunefile_t *tf, const nc_tune_sig_t *machine,
                                          int p);
/* Write atomically (temporary file + rename); header_comment may be NULL. The
 * file is created 0644 (less the umask), so the library accepts it. */
int nc_tunefile_write(const char *path, const nc_tunefile_t *tf, const char *header_comment,
                      char *err, size_t errlen);
/* The same text to an open stream (not closed); NUMACOLL_ERR_INVAL on a write
 * error. */
int nc_tunefile_write_stream(FILE *fp, const nc_tunefile_t *tf, const char *header_comment);

/* The path the library reads (see above) into buf; returns buf, or NULL when
 * none applies. *origin (may be NULL) names the rule: "NUMACOLL_TUNE_FILE",
 * "XDG_CONFIG_HOME", "HOME", "/etc" or why there is none. */
const char *nc_tunefile_path(char *buf, size_t len, const char **origin);

/* Apply the tune file to cfg for a team of p members (p = 0: this node's core
 * count). Only entries whose source is default or tune-file change; the
 * entries from a previous application are first reset to their defaults.
 * All or nothing: if the result fails nc_config_check(), cfg is unchanged.
 * Safe under the configuration lock (logs errors only, never info).
 * Returns the number of values taken from the file (0 when none applies). */
int nc_tunefile_apply(nc_config_t *cfg, int p);
/* What the last nc_tunefile_apply() did, one line (for numacoll-info). */
void nc_tunefile_status(char *buf, size_t len);

#endif
