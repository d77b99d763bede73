/*
 * Unit test of numacoll-bind's --cpus parser (nc_bind_cpulist_parse): every form of
 * the grammar, the ICM bulletin's example, and malformed lists with the position
 * the error message must name.
 */
#include "nc_bind.h"

#include <stdlib.h>
#include <string.h>

struct ok_case {
    const char *text;
    const char *expect; /* expansion, comma-separated */
};

struct bad_case {
    const char *text;
    const char *expect; /* substring of the error, including "position N" */
};

static const struct ok_case ok_cases[] = {
    {"0,7-3,11-14,23-27:2,46-37:3", "0,7,6,5,4,3,11,12,13,14,23,25,27,46,43,40,37"}, /* bulletin */
    {"0,4,8,16", "0,4,8,16"},                                                      /* bulletin */
    {"5", "5"},
    {"0-3", "0,1,2,3"},
    {"3-0", "3,2,1,0"},
    {"2-2", "2"},
    {"0-10:5", "0,5,10"},
    {"0-11:5", "0,5,10"},   /* stride stops before passing the end */
    {"10-0:4", "10,6,2"},   /* reversed with stride */
    {"0-3:1", "0,1,2,3"},
    {"1,1,0,0", "1,1,0,0"}, /* repeats allowed: ranks may share a CPU */
    {"007", "7"},
    {"0-1:100", "0"},
};

static const struct bad_case bad_cases[] = {
    {"", "position 1: empty list"},
    {"0,7-x3", "position 5: expected the end of a range, found 'x'"},
    {"0,,3", "position 3: expected a CPU number, found ','"},
    {",1", "position 1: expected a CPU number, found ','"},
    {"0,1,", "position 4: trailing ','"},
    {"1-", "position 3: expected the end of a range, found end of list"},
    {"1-5:", "position 5: expected a stride, found end of list"},
    {"1-5:0", "position 5: stride must be at least 1"},
    {"3:2", "position 2: a stride needs a range"},
    {"0 1", "position 2: expected ',' or end of list, found ' '"},
    {"0-3-5", "position 4: expected ',' or end of list, found '-'"},
    {"-1,2", "position 1: expected a CPU number, found '-'"},
    {"1,99999999999", "position 3: number too large"},
    {"0-2000000", "list expands to more than 65536 CPUs"},
    {"0,a", "position 3: expected a CPU number, found 'a'"},
};

int main(void)
{
    int fails = 0;
    char err[NC_BIND_ERRLEN];
    for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
        int *list = NULL, *pos = NULL, n = 0;
        char got[1024] = "";
        size_t off = 0;
        if (nc_bind_cpulist_parse(ok_cases[i].text, &list, &pos, &n, err, sizeof(err))) {
            printf("FAIL \"%s\": unexpected error: %s\n", ok_cases[i].text, err);
            fails++;
            continue;
        }
        for (int j = 0; j < n; j++)
            off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%d", j ? "," : "", list[j]);
        if (strcmp(got, ok_cases[i].expect)) {
            printf("FAIL \"%s\": got %s, expected %s\n", ok_cases[i].text, got, ok_cases[i].expect);
            fails++;
        } else {
            printf("ok   \"%s\" -> %s\n", ok_cases[i].text, got);
        }
        free(list);
        free(pos);
    }
    /* positions of the items each entry came from, for out-of-range messages */
    {
        int *list = NULL, *pos = NULL, n = 0;
        if (nc_bind_cpulist_parse("0,7-5,12", &list, &pos, &n, err, sizeof(err)) || n != 5 ||
            pos[0] != 1 || pos[1] != 3 || pos[3] != 3 || pos[4] != 7) {
            printf("FAIL item positions of \"0,7-5,12\"\n");
            fails++;
        } else {
            printf("ok   item positions of \"0,7-5,12\"\n");
        }
        free(list);
        free(pos);
    }
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        int *list = NULL, *pos = NULL, n = 0;
        if (nc_bind_cpulist_parse(bad_cases[i].text, &list, &pos, &n, err, sizeof(err)) == 0) {
            printf("FAIL \"%s\": accepted, expected an error\n", bad_cases[i].text);
            free(list);
            free(pos);
            fails++;
        } else if (!strstr(err, bad_cases[i].expect) || strchr(err, '\n')) {
            printf("FAIL \"%s\": error \"%s\", expected \"%s\"\n", bad_cases[i].text, err, bad_cases[i].expect);
            fails++;
        } else {
            printf("ok   \"%s\" -> %s\n", bad_cases[i].text, err);
        }
    }
    printf("%d failure(s)\n", fails);
    return fails != 0;
}
