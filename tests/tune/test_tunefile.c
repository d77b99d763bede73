/*
 * Tune files: round trip, the library applying the section of this machine
 * (env and API still win, a team size picks its own section), and files that
 * must be ignored as a whole: malformed anywhere, or foreign (other signature).
 *
 * Files others could have written (group/world-writable, another owner) are
 * ignored with one warning per process; a symlink to a safe file is fine.
 *
 *   test_tunefile roundtrip|apply|teamsize|malformed|foreign|conflict|unsafe DIR
 *   test_tunefile write-local FILE     (helper for the numacoll-info test)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/nc_tunefile.h"
#include "numacoll.h"

#include "nc_check.h"

static char dir[1024];

static const char *path_in(const char *name)
{
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static nc_tune_section_t local_section(int p, const char *frag, const char *len)
{
    nc_tune_section_t s;
    char err[256];
    memset(&s, 0, sizeof s);
    if (nc_tune_sig_local(&s.sig)) {
        fprintf(stderr, "cannot read this machine's topology\n");
        exit(2);
    }
    s.sig.p = p;
    if (nc_tune_section_set(&s, "BCAST_FRAG_SIZE", frag, err, sizeof err) ||
        nc_tune_section_set(&s, "NUMACOLL_BCAST_QUEUE_LEN", len, err, sizeof err) ||
        nc_tune_section_set(&s, "BCAST_SETS", "2", err, sizeof err) ||
        nc_tune_section_set(&s, "BCAST_TREE", "binary", err, sizeof err) ||
        nc_tune_section_set(&s, "info.note", "written by test_tunefile", err, sizeof err)) {
        fprintf(stderr, "section_set: %s\n", err);
        exit(2);
    }
    return s;
}

static void get(const char *name, char *val, size_t len, const char **src)
{
    if (numacoll_param_get(name, val, len, src)) {
        fprintf(stderr, "param_get %s failed\n", name);
        exit(2);
    }
}

static void expect(const char *name, const char *value, const char *source)
{
    char v[64];
    const char *src;
    get(name, v, sizeof v, &src);
    CHECK(!strcmp(v, value) && !strcmp(src, source), "%s=%s (%s), expected %s (%s)", name, v,
          src, value, source);
}

static void use_file(const char *path)
{
    setenv("NUMACOLL_TUNE_FILE", path, 1);
    nc_config_reload();
}

static void test_roundtrip(void)
{
    nc_tunefile_t tf = {0}, back;
    nc_tune_section_t a = local_section(2, "12k", "32"), b = local_section(4, "16384", "16");
    nc_tune_section_t foreign = local_section(2, "4096", "8");
    snprintf(foreign.sig.cpu_model, sizeof foreign.sig.cpu_model, "Some Other CPU 9000");
    char err[512];
    CHECK(!nc_tunefile_put(&tf, &a) && !nc_tunefile_put(&tf, &b) && !nc_tunefile_put(&tf, &foreign),
          "put");
    /* replacing a section keeps one per (signature, p) */
    nc_tune_section_t a2 = local_section(2, "8192", "64");
    CHECK(!nc_tunefile_put(&tf, &a2) && tf.nsec == 3, "replace: %d sections", tf.nsec);
    CHECK(!nc_tunefile_write(path_in("rt"), &tf, "round trip\nsecond line", err, sizeof err), "%s",
          err);
    CHECK(!nc_tunefile_read(path_in("rt"), &back, err, sizeof err), "%s", err);
    CHECK(back.nsec == 3, "%d sections read back", back.nsec);
    for (int i = 0; i < tf.nsec && i < back.nsec; i++) {
        CHECK(nc_tune_sig_same_machine(&tf.sec[i].sig, &back.sec[i].sig) &&
                  tf.sec[i].sig.p == back.sec[i].sig.p,
              "section %d signature", i);
        CHECK(tf.sec[i].nkv == back.sec[i].nkv, "section %d: %d vs %d keys", i, tf.sec[i].nkv,
              back.sec[i].nkv);
        for (int k = 0; k < tf.sec[i].nkv && k < back.sec[i].nkv; k++)
            CHECK(!strcmp(tf.sec[i].kv[k].key, back.sec[i].kv[k].key) &&
                      !strcmp(tf.sec[i].kv[k].value, back.sec[i].kv[k].value),
                  "section %d key %d: %s=%s vs %s=%s", i, k, tf.sec[i].kv[k].key,
                  tf.sec[i].kv[k].value, back.sec[i].kv[k].key, back.sec[i].kv[k].value);
    }
    /* canonical spellings: 12k -> 12288, binary -> kary:2 */
    CHECK(!strcmp(tf.sec[1].kv[0].value, "16384"), "%s", tf.sec[1].kv[0].value);
    CHECK(!strcmp(a.kv[0].value, "12288") && !strcmp(a.kv[3].value, "kary:2"), "%s %s",
          a.kv[0].value, a.kv[3].value);
    nc_tunefile_free(&tf);
    nc_tunefile_free(&back);
}

static void write_local(const char *path, int p, const char *frag, const char *len)
{
    nc_tunefile_t tf = {0};
    nc_tune_section_t s = local_section(p, frag, len);
    char err[512];
    if (nc_tunefile_put(&tf, &s) || nc_tunefile_write(path, &tf, NULL, err, sizeof err)) {
        fprintf(stderr, "write %s: %s\n", path, err);
        exit(2);
    }
    nc_tunefile_free(&tf);
}

static void test_apply(void)
{
    nc_tune_sig_t me;
    nc_tune_sig_local(&me);
    write_local(path_in("apply"), me.cores, "16384", "32");
    unsetenv("NUMACOLL_BCAST_QUEUE_LEN");
    use_file(path_in("apply"));
    expect("BCAST_FRAG_SIZE", "16384", "tune-file");
    expect("BCAST_QUEUE_LEN", "32", "tune-file");
    expect("BCAST_SETS", "2", "tune-file");
    expect("BCAST_TREE", "kary:2", "tune-file");
    expect("SPIN_COUNT", "2000", "default");
    char st[640];
    nc_tunefile_status(st, sizeof st);
    CHECK(strstr(st, "applied, 4 values"), "status: %s", st);
    /* the environment wins */
    setenv("NUMACOLL_BCAST_QUEUE_LEN", "16", 1);
    nc_config_reload();
    expect("BCAST_QUEUE_LEN", "16", "env");
    expect("BCAST_FRAG_SIZE", "16384", "tune-file");
    unsetenv("NUMACOLL_BCAST_QUEUE_LEN");
    /* so does the API */
    nc_config_reload();
    CHECK(!numacoll_param_set("BCAST_FRAG_SIZE", "4096"), "param_set");
    expect("BCAST_FRAG_SIZE", "4096", "api");
    /* turned off */
    use_file("none");
    expect("BCAST_FRAG_SIZE", "8192", "default");
}

static void test_teamsize(void)
{
    nc_tune_sig_t me;
    nc_tune_sig_local(&me);
    int other = me.cores + 3;
    nc_tunefile_t tf = {0};
    nc_tune_section_t a = local_section(me.cores, "16384", "32"), b = local_section(other, "4096", "8");
    char err[512];
    nc_tunefile_put(&tf, &a);
    nc_tunefile_put(&tf, &b);
    CHECK(!nc_tunefile_write(path_in("teams"), &tf, NULL, err, sizeof err), "%s", err);
    nc_tunefile_free(&tf);
    unsetenv("NUMACOLL_BCAST_QUEUE_LEN");
    use_file(path_in("teams"));
    nc_config_t cfg;
    CHECK(!nc_config_snapshot(&cfg), "snapshot");
    CHECK(NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE) == 16384, "process-wide: core-count section");
    /* a team of `other` members takes its own section */
    CHECK(nc_tunefile_apply(&cfg, other) == 4, "apply for p=%d", other);
    CHECK(NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE) == 4096 && NC_CFG_NUM(&cfg, BCAST_QUEUE_LEN) == 8 &&
              cfg.v[NC_P_BCAST_FRAG_SIZE].source == NC_SRC_TUNE_FILE,
          "team p=%d: f=%lld s=%lld", other, (long long)NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE),
          (long long)NC_CFG_NUM(&cfg, BCAST_QUEUE_LEN));
    /* a team size without a section keeps the core-count one */
    CHECK(!nc_config_snapshot(&cfg), "snapshot");
    nc_tunefile_apply(&cfg, other + 1);
    CHECK(NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE) == 16384, "p without a section");
    /* env still wins at team creation */
    setenv("NUMACOLL_BCAST_FRAG_SIZE", "65536", 1);
    nc_config_reload();
    CHECK(!nc_config_snapshot(&cfg), "snapshot");
    nc_tunefile_apply(&cfg, other);
    CHECK(NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE) == 65536 && NC_CFG_NUM(&cfg, BCAST_QUEUE_LEN) == 8,
          "env wins over the team-size section");
    unsetenv("NUMACOLL_BCAST_FRAG_SIZE");
    use_file("none");
}

/* Every file must be rejected as a whole; none of its values may show up. */
static void test_malformed(void)
{
    nc_tune_sig_t me;
    nc_tune_sig_local(&me);
    char head[512];
    snprintf(head, sizeof head,
             "numacoll-tune-file 1\n[tune]\ncpu_model = %s\nnuma_nodes = %d\ncores = %d\np = %d\n",
             me.cpu_model, me.numa_nodes, me.cores, me.cores);
    struct { const char *name, *body, *why; int head; } cases[] = {
        {"version", "numacoll-tune-file 2\n", "format version 2", 0},
        {"notatunefile", "hello\n", "not a numacoll tune file", 0},
        {"empty", "# nothing\n", "empty", 0},
        {"unknownkey", "BCAST_FRAG_SIZE = 16384\nBCAST_COLOUR = red\n", "unknown key", 1},
        {"badvalue", "BCAST_FRAG_SIZE = 16384\nBCAST_QUEUE_LEN = lots\n", "BCAST_QUEUE_LEN", 1},
        {"outofrange", "BCAST_FRAG_SIZE = 16384\nBCAST_QUEUE_LEN = 5000\n", "BCAST_QUEUE_LEN", 1},
        {"badtree", "BCAST_FRAG_SIZE = 16384\nBCAST_TREE = oak\n", "BCAST_TREE", 1},
        {"duplicatekey", "BCAST_FRAG_SIZE = 16384\nNUMACOLL_BCAST_FRAG_SIZE = 4096\n", "twice", 1},
        {"noequals", "BCAST_FRAG_SIZE 16384\n", "key = value", 1},
        {"q_not_divides_s", "BCAST_FRAG_SIZE = 16384\nBCAST_QUEUE_LEN = 6\nBCAST_SETS = 4\n",
         "do not fit together", 1},
        {"duplicatesection", "BCAST_FRAG_SIZE = 16384\n[tune]\ncpu_model = X\nnuma_nodes = 1\n"
                             "cores = 1\np = 1\n[tune]\ncpu_model = X\nnuma_nodes = 1\ncores = 1\n"
                             "p = 1\n",
         "second section", 1},
        {"missingp", "", "", 0},
        {"keybeforesection", "numacoll-tune-file 1\nBCAST_FRAG_SIZE = 16384\n", "before the first", 0},
        {"badcount", "", "", 0},
    };
    char text[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!strcmp(cases[i].name, "missingp")) {
            snprintf(text, sizeof text,
                     "numacoll-tune-file 1\n[tune]\ncpu_model = %s\nnuma_nodes = %d\ncores = %d\n"
                     "BCAST_FRAG_SIZE = 16384\n",
                     me.cpu_model, me.numa_nodes, me.cores);
            cases[i].why = "no p";
        } else if (!strcmp(cases[i].name, "badcount")) {
            snprintf(text, sizeof text,
                     "numacoll-tune-file 1\n[tune]\ncpu_model = %s\nnuma_nodes = two\n", me.cpu_model);
            cases[i].why = "positive integer";
        } else {
            snprintf(text, sizeof text, "%s%s", cases[i].head ? head : "", cases[i].body);
        }
        const char *path = path_in(cases[i].name);
        write_text(path, text);
        nc_tunefile_t tf;
        char err[512] = "";
        int rc = nc_tunefile_read(path, &tf, err, sizeof err);
        CHECK(rc != 0 && tf.nsec == 0, "%s: read accepted", cases[i].name);
        CHECK(strstr(err, cases[i].why) && strstr(err, path), "%s: message \"%s\" lacks \"%s\"",
              cases[i].name, err, cases[i].why);
        use_file(path);
        expect("BCAST_FRAG_SIZE", "8192", "default");
        expect("BCAST_QUEUE_LEN", "64", "default");
        char st[640];
        nc_tunefile_status(st, sizeof st);
        CHECK(strstr(st, "ignored (nothing applied)"), "%s: status %s", cases[i].name, st);
        printf("ok %-18s %s\n", cases[i].name, err);
    }
    use_file(path_in("does-not-exist"));
    expect("BCAST_FRAG_SIZE", "8192", "default");
    use_file("none");
}

static void test_foreign(void)
{
    nc_tunefile_t tf = {0};
    nc_tune_section_t a = local_section(2, "16384", "32");
    snprintf(a.sig.cpu_model, sizeof a.sig.cpu_model, "Some Other CPU 9000");
    nc_tune_section_t b = local_section(2, "16384", "32");
    b.sig.numa_nodes += 1; /* same CPU, other node shape */
    nc_tune_section_t c = local_section(2, "16384", "32");
    c.sig.cores += 1;
    char err[512];
    nc_tunefile_put(&tf, &a);
    nc_tunefile_put(&tf, &b);
    nc_tunefile_put(&tf, &c);
    CHECK(!nc_tunefile_write(path_in("foreign"), &tf, NULL, err, sizeof err), "%s", err);
    nc_tunefile_free(&tf);
    use_file(path_in("foreign"));
    expect("BCAST_FRAG_SIZE", "8192", "default");
    expect("BCAST_TREE", "kary:2", "default");
    char st[640];
    nc_tunefile_status(st, sizeof st);
    CHECK(strstr(st, "foreign"), "status: %s", st);
    printf("status: %s\n", st);
    use_file("none");
}

/* A valid file whose values clash with the environment: not applied at all. */
static void test_conflict(void)
{
    nc_tune_sig_t me;
    nc_tune_sig_local(&me);
    write_local(path_in("conflict"), me.cores, "16384", "32"); /* SETS = 2 */
    setenv("NUMACOLL_BCAST_QUEUE_LEN", "3", 1);
    use_file(path_in("conflict"));
    expect("BCAST_FRAG_SIZE", "8192", "default");
    expect("BCAST_SETS", "1", "default");
    expect("BCAST_QUEUE_LEN", "3", "env");
    char st[640];
    nc_tunefile_status(st, sizeof st);
    CHECK(strstr(st, "ignored (nothing applied)"), "status: %s", st);
    unsetenv("NUMACOLL_BCAST_QUEUE_LEN");
    use_file("none");
}

/* stderr of everything between capture_start() and capture_end() goes to a file */
static int saved_stderr = -1;

static void capture_start(const char *path)
{
    fflush(stderr);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    saved_stderr = dup(2);
    if (fd < 0 || saved_stderr < 0 || dup2(fd, 2) < 0) {
        perror(path);
        exit(2);
    }
    close(fd);
}

static void capture_end(const char *path, char *out, size_t len)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
    fputs(out, stderr); /* still visible in the test log */
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* Applies the file the way a process does: the process-wide configuration, then
 * the tune file at every team creation (for the core count and another p). */
static void load_like_a_process(int teams)
{
    nc_tune_sig_t me;
    nc_tune_sig_local(&me);
    nc_config_reload();
    for (int i = 0; i < teams; i++) {
        nc_config_t cfg;
        nc_config_snapshot(&cfg);
        nc_tunefile_apply(&cfg, me.cores);
        nc_tunefile_apply(&cfg, me.cores + 1);
        CHECK(NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE) == 8192 &&
                  cfg.v[NC_P_BCAST_FRAG_SIZE].source == NC_SRC_DEFAULT,
              "team %d took f=%lld from an unsafe file", i,
              (long long)NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE));
    }
}

/* One unsafe file: ignored, status says why, exactly one warning line naming it. */
static void expect_ignored(const char *file, const char *why)
{
    char log[4096], st[640], want[1400];
    const char *logpath = path_in("unsafe.stderr");
    capture_start(logpath);
    setenv("NUMACOLL_TUNE_FILE", file, 1);
    load_like_a_process(5);
    expect("BCAST_FRAG_SIZE", "8192", "default");
    expect("BCAST_QUEUE_LEN", "64", "default");
    nc_tunefile_status(st, sizeof st);
    capture_end(logpath, log, sizeof log);
    snprintf(want, sizeof want, "warning: ignoring tune file %s: %s", file, why);
    CHECK(strstr(st, why) && strstr(st, file), "status \"%s\" lacks \"%s\"", st, why);
    CHECK(strstr(log, want) && count_lines(log) == 1,
          "stderr should be the one line \"...%s\", got %d line(s):\n%s", want,
          count_lines(log), log);
    printf("ok ignored: %s", log);
}

static void test_unsafe(void)
{
    nc_tune_sig_t me;
    nc_tune_sig_local(&me);
    char f[1200], link[1200], fifo[1200], why[1400];
    snprintf(f, sizeof f, "%s", path_in("unsafe"));
    snprintf(link, sizeof link, "%s", path_in("unsafe-link"));
    snprintf(fifo, sizeof fifo, "%s", path_in("unsafe-fifo"));
    write_local(f, me.cores, "16384", "32");

    /* world-writable, then group-writable */
    CHECK(!chmod(f, 0666), "chmod");
    snprintf(why, sizeof why, "writable by others (mode 0666); chmod go-w %s", f);
    expect_ignored(f, why);
    CHECK(!chmod(f, 0664), "chmod");
    snprintf(why, sizeof why, "writable by others (mode 0664); chmod go-w %s", f);
    expect_ignored(f, why);

    /* the same file made safe is applied: the checks above are not vacuous */
    CHECK(!chmod(f, 0644), "chmod");
    use_file(f);
    expect("BCAST_FRAG_SIZE", "16384", "tune-file");

    /* a symbolic link (itself 0777) to a safe file is legitimate */
    unlink(link);
    CHECK(!symlink(f, link), "symlink");
    use_file(link);
    expect("BCAST_FRAG_SIZE", "16384", "tune-file");
    /* what counts is the file opened through it */
    CHECK(!chmod(f, 0646), "chmod");
    snprintf(why, sizeof why, "writable by others (mode 0646); chmod go-w %s", link);
    expect_ignored(link, why);
    CHECK(!chmod(f, 0644), "chmod");

    /* owned by another user (only root can make one) */
    if (geteuid() == 0) {
        CHECK(!chown(f, 12345, (gid_t)-1), "chown");
        snprintf(why, sizeof why, "owned by uid 12345, neither this user (uid 0) nor root");
        expect_ignored(f, why);
        CHECK(!chown(f, 0, (gid_t)-1), "chown");
    } else {
        printf("skip: owner check (needs root to give a file away)\n");
    }

    /* what numacoll-tune writes (nc_tunefile_write) is accepted, whatever the
     * umask and the mode of the file it replaces: a fresh 0644 file */
    CHECK(!chmod(f, 0666), "chmod");
    mode_t old_umask = umask(0);
    write_local(f, me.cores, "32768", "16");
    umask(old_umask);
    struct stat st;
    CHECK(!stat(f, &st) && (st.st_mode & 07777) == 0644, "written with mode %04o, expected 0644",
          (unsigned)(st.st_mode & 07777));
    use_file(f);
    expect("BCAST_FRAG_SIZE", "32768", "tune-file");

    /* a FIFO must neither hang the open nor be read */
    unlink(fifo);
    CHECK(!mkfifo(fifo, 0600), "mkfifo");
    expect_ignored(fifo, "not a regular file");
    use_file("none");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_tunefile roundtrip|apply|teamsize|malformed|foreign|"
                        "conflict|unsafe DIR | write-local FILE\n");
        return 2;
    }
    umask(022); /* the files written here must be safe unless a test makes them not */
    if (!strcmp(argv[1], "write-local")) {
        nc_tune_sig_t me;
        nc_tune_sig_local(&me);
        write_local(argv[2], me.cores, "16384", "32");
        return 0;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd))
        return 2;
    for (const char *v = "NUMACOLL_BCAST_FRAG_SIZE\0NUMACOLL_BCAST_QUEUE_LEN\0NUMACOLL_BCAST_SETS\0"
                         "NUMACOLL_BCAST_TREE\0";
         *v; v += strlen(v) + 1)
        unsetenv(v);
    if (!strcmp(argv[1], "roundtrip"))
        test_roundtrip();
    else if (!strcmp(argv[1], "apply"))
        test_apply();
    else if (!strcmp(argv[1], "teamsize"))
        test_teamsize();
    else if (!strcmp(argv[1], "malformed"))
        test_malformed();
    else if (!strcmp(argv[1], "foreign"))
        test_foreign();
    else if (!strcmp(argv[1], "conflict"))
        test_conflict();
    else if (!strcmp(argv[1], "unsafe"))
        test_unsafe();
    else {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    printf("%s: %s\n", argv[1], failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
