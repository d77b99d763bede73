/*
 * CHECK for single-process tests: report a failed condition with its file,
 * line and a printf-style message, count it in `failures`, and go on (the
 * test prints its verdict from `failures` at the end). After 20 failures the
 * test stops, so one broken invariant does not flood the log.
 */
#ifndef NC_CHECK_H
#define NC_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            if (++failures > 20)                                              \
                exit(1);                                                      \
        }                                                                     \
    } while (0)

#endif
