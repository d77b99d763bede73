/* The tunables table: parsing, ranges, canonical text, messages naming the variable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numacoll.h"
#include "config/nc_config.h"

#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %d: %s: ", __LINE__, #c); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); return 1; } } while (0)

static int parse(const char *name, const char *text, nc_param_value_t *v, char *err)
{
    return nc_param_parse(nc_param_lookup(name), text, v, err, 256);
}

int main(void)
{
    nc_param_value_t v = {0};
    char err[256];
    CHECK(parse("BCAST_FRAG_SIZE", "8k", &v, err) == 0 && v.num == 8192, "8k");
    CHECK(parse("NUMACOLL_BCAST_FRAG_SIZE", "64KiB", &v, err) == 0 && v.num == 65536, "64KiB");
    CHECK(parse("BCAST_FRAG_SIZE", "1m", &v, err) == 0 && v.num == 1 << 20, "1m");
    CHECK(parse("BCAST_FRAG_SIZE", "0", &v, err) == NUMACOLL_ERR_TUNABLE, "0");
    CHECK(strstr(err, "NUMACOLL_BCAST_FRAG_SIZE") && strstr(err, "64..67108864"), "%s", err);
    CHECK(parse("BCAST_FRAG_SIZE", "1g", &v, err) == NUMACOLL_ERR_TUNABLE, "too big");
    CHECK(parse("BCAST_QUEUE_LEN", "8k", &v, err) == NUMACOLL_ERR_TUNABLE, "no suffix on counts");
    CHECK(parse("BCAST_TREE", "binary", &v, err) == 0 && !strcmp(v.text, "kary:2"), "%s", v.text);
    CHECK(parse("BCAST_TREE", "knomial:4", &v, err) == 0 && !strcmp(v.text, "knomial:4"), "kn");
    CHECK(parse("BCAST_TREE", "foo", &v, err) == NUMACOLL_ERR_TUNABLE, "foo");
    CHECK(strstr(err, "NUMACOLL_BCAST_TREE") && strstr(err, "knomial"), "%s", err);
    CHECK(parse("SEG_LAYOUT", "PAPER", &v, err) == 0 && v.num == NC_LAYOUT_PAPER &&
          !strcmp(v.text, "paper"), "case-insensitive enum");
    CHECK(parse("SEG_LAYOUT", "pap", &v, err) == NUMACOLL_ERR_TUNABLE, "prefix is not a match");
    CHECK(nc_param_lookup("NO_SUCH") == -1, "unknown");

    /* Cross check: q must divide s. */
    nc_config_t cfg;
    unsetenv("NUMACOLL_BCAST_SETS");
    nc_config_reload();
    CHECK(nc_config_snapshot(&cfg) == 0, "defaults valid");
    CHECK(NC_CFG_NUM(&cfg, BCAST_FRAG_SIZE) == 8192 && NC_CFG_NUM(&cfg, BCAST_QUEUE_LEN) == 64 &&
          NC_CFG_NUM(&cfg, BCAST_SETS) == 1, "paper defaults");
    cfg.v[NC_P_BCAST_SETS].num = 5;
    CHECK(nc_config_check(&cfg, err, sizeof err) == NUMACOLL_ERR_TUNABLE &&
          strstr(err, "NUMACOLL_BCAST_SETS"), "%s", err);

    /* Provenance: default, env, api. */
    setenv("NUMACOLL_BCAST_QUEUE_LEN", "32", 1);
    nc_config_reload();
    char val[32];
    const char *src;
    CHECK(numacoll_param_get("NUMACOLL_BCAST_QUEUE_LEN", val, sizeof val, &src) == 0 &&
          !strcmp(val, "32") && !strcmp(src, "env"), "%s %s", val, src);
    CHECK(numacoll_param_get("BCAST_SETS", val, sizeof val, &src) == 0 && !strcmp(src, "default"),
          "default source");
    CHECK(numacoll_param_set("NUMACOLL_BCAST_SETS", "4") == 0, "set");
    CHECK(numacoll_param_get("BCAST_SETS", val, sizeof val, &src) == 0 && !strcmp(val, "4") &&
          !strcmp(src, "api"), "api source");
    CHECK(numacoll_param_set("NUMACOLL_BCAST_SETS", "x") == NUMACOLL_ERR_TUNABLE, "bad set");
    CHECK(numacoll_param_set("NUMACOLL_NOPE", "1") == NUMACOLL_ERR_INVAL, "unknown set");
    /* A bad environment value is reported at snapshot time. */
    setenv("NUMACOLL_BCAST_TREE", "kary:0", 1);
    nc_config_reload();
    CHECK(nc_config_snapshot(&cfg) == NUMACOLL_ERR_TUNABLE, "bad env");
    /* ... and the default it fell back to is marked. */
    CHECK(numacoll_param_get("BCAST_TREE", val, sizeof val, &src) == 0 &&
              strstr(src, "not valid"), "source of a bad env value: %s", src);
    /* Setting that tunable clears the error; setting another whose name is
     * part of it (REDUCE_ENABLE in ALLREDUCE_ENABLE) does not. */
    unsetenv("NUMACOLL_BCAST_TREE");
    setenv("NUMACOLL_ALLREDUCE_ENABLE", "nope", 1);
    nc_config_reload();
    CHECK(nc_config_snapshot(&cfg) == NUMACOLL_ERR_TUNABLE, "bad ALLREDUCE_ENABLE");
    CHECK(numacoll_param_set("NUMACOLL_REDUCE_ENABLE", "0") == 0, "set REDUCE_ENABLE");
    CHECK(nc_config_snapshot(&cfg) == NUMACOLL_ERR_TUNABLE, "the error stays");
    CHECK(numacoll_param_set("NUMACOLL_ALLREDUCE_ENABLE", "1") == 0, "set ALLREDUCE_ENABLE");
    CHECK(nc_config_snapshot(&cfg) == 0, "the error is gone");
    unsetenv("NUMACOLL_ALLREDUCE_ENABLE");
    /* A switch takes off/on, no/yes, false/true in any case; an auto|on|off
     * choice takes them too, and 1/0 (and reads as on/off); a number or
     * another choice takes none (below). */
    static const struct {
        const char *name, *in, *want;
    } words[] = {{"STATS", "Yes", "1"},   {"STATS", "off", "0"},
                 {"SHM_NT", "1", "on"},   {"SHM_NT", "FALSE", "off"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char env[64];
        snprintf(env, sizeof env, "NUMACOLL_%s", words[i].name);
        CHECK(numacoll_param_set(env, words[i].in) == 0 &&
                  numacoll_param_get(words[i].name, val, sizeof val, NULL) == 0 &&
                  !strcmp(val, words[i].want),
              "%s=%s: %s", words[i].name, words[i].in, val);
    }
    CHECK(numacoll_param_set("NUMACOLL_BCAST_QUEUE_LEN", "on") == NUMACOLL_ERR_TUNABLE,
          "QUEUE_LEN=on accepted");
    /* A value that does not fit is cut and said so. */
    char tiny[2], was[32];
    CHECK(numacoll_param_get("BCAST_FRAG_SIZE", was, sizeof was, NULL) == 0, "get");
    numacoll_param_set("NUMACOLL_BCAST_FRAG_SIZE", "16384");
    CHECK(numacoll_param_get("BCAST_FRAG_SIZE", tiny, sizeof tiny, NULL) == NUMACOLL_ERR_TRUNCATE &&
              !strcmp(tiny, "1"),
          "a short buffer: %s", tiny);
    numacoll_param_set("NUMACOLL_BCAST_FRAG_SIZE", was);
    CHECK(numacoll_param_set("NUMACOLL_SHM_NT", "2") == NUMACOLL_ERR_TUNABLE, "SHM_NT=2 accepted");
    CHECK(numacoll_param_set("NUMACOLL_TRANSPORT", "yes") == NUMACOLL_ERR_TUNABLE,
          "TRANSPORT=yes accepted");
    numacoll_param_set("NUMACOLL_SHM_NT", "auto");
    printf("config: PASSED\n");
    return 0;
}
