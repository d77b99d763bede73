/*
 * Logging, time, page size, error strings and the version.
 */
#include "common/nc_common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/nc_config.h"

static void vlog(const char *tag, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "numacoll[%d] %s", (int)getpid(), tag);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    /* One write so lines from different processes do not interleave. */
    size_t len = strlen(line);
    if (len + 1 < sizeof line) {
        line[len++] = '\n';
        line[len] = '\0';
    }
    fputs(line, stderr);
}

void nc_log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("error: ", fmt, ap);
    va_end(ap);
}

/* 1 the first time key (a string) is seen in this process. */
static int first_time(const char *key)
{
    /* FNV-1a hashes of the keys already seen; a full table prints again. */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t seen[256];
    static unsigned nseen;
    if (nc_log_level() >= 2)
        return 1;
    const uint64_t h = nc_fnv1a(NC_FNV1A_BASIS, key, strlen(key));
    int first = 1;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < nseen && first; i++)
        first = seen[i] != h;
    if (first && nseen < NC_ARRAY_SIZE(seen))
        seen[nseen++] = h;
    pthread_mutex_unlock(&lock);
    return first;
}

void nc_log_error_once(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (first_time(line))
        nc_log_error("%s", line);
}

void nc_log_warn_once(const char *key, const char *fmt, ...)
{
    if (!first_time(key))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog("warning: ", fmt, ap);
    va_end(ap);
}

int nc_log_level(void)
{
    return nc_config_global_verbose();
}

void nc_log_info(int level, const char *fmt, ...)
{
    if (nc_log_level() < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}

uint64_t nc_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

size_t nc_page_size(void)
{
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

NUMACOLL_API const char *numacoll_strerror(int err)
{
    switch (err) {
    case NUMACOLL_SUCCESS:
        return "success";
#define NC_ERR_CASE_(name, code, msg) \
    case NUMACOLL_ERR_##name:         \
        return msg;
        NUMACOLL_ERRNO_MAP(NC_ERR_CASE_)
#undef NC_ERR_CASE_
    }
    return "unknown numacoll error";
}

NUMACOLL_API const char *numacoll_version(void)
{
    return "0.1.0";
}
