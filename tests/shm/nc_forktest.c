#include "nc_forktest.h"
#include "numacoll.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Segments are named /numacoll-<pid of the creating member>-...: count the
 * ones created by these members (other test runs may be alive meanwhile). */
static int leftovers_of(const pid_t *pids, int p)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        for (int r = 0; r < p; r++) {
            char prefix[48]; /* segments: numacoll-<uid>-<pid>-... (nc_shm.c) */
            snprintf(prefix, sizeof prefix, "numacoll-%u-%d-", (unsigned)geteuid(), (int)pids[r]);
            if (!strncmp(e->d_name, prefix, strlen(prefix))) {
                fprintf(stderr, "leftover /dev/shm/%s\n", e->d_name);
                n++;
            }
        }
    closedir(d);
    return n;
}


static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void nc_pattern_fill(unsigned char *buf, size_t n, uint64_t call)
{
    uint64_t seed = mix(call);
    size_t w = n / 8;
    for (size_t i = 0; i < w; i++) {
        uint64_t v = seed ^ (i * 0x100000001b3ull);
        memcpy(buf + i * 8, &v, 8);
    }
    for (size_t i = w * 8; i < n; i++)
        buf[i] = (unsigned char)(seed >> (i % 8 * 8)) ^ (unsigned char)i;
}

long nc_pattern_check(const unsigned char *buf, size_t n, uint64_t call)
{
    uint64_t seed = mix(call);
    size_t w = n / 8;
    for (size_t i = 0; i < w; i++) {
        uint64_t v = seed ^ (i * 0x100000001b3ull), got;
        memcpy(&got, buf + i * 8, 8);
        if (got != v)
            for (size_t j = 0; j < 8; j++)
                if (buf[i * 8 + j] != ((unsigned char *)&v)[j])
                    return (long)(i * 8 + j);
    }
    for (size_t i = w * 8; i < n; i++)
        if (buf[i] != ((unsigned char)(seed >> (i % 8 * 8)) ^ (unsigned char)i))
            return (long)i;
    return -1;
}

int nc_fork_run(int p, int timeout_s, nc_fork_body_fn body, void *arg, int expect_fail_rank)
{
    char name[64];
    snprintf(name, sizeof name, "t%d-%ld", (int)getpid(), (long)time(NULL) ^ (long)random());
    pid_t *pids = calloc((size_t)p, sizeof *pids), *all = calloc((size_t)p, sizeof *all);
    fflush(NULL);
    for (int r = 0; r < p; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)timeout_s + 5); /* belt and braces if the parent dies */
            int rc = body(r, p, name, arg);
            fflush(NULL);
            _exit(rc ? 1 : 0);
        }
        all[r] = pids[r];
    }
    int failed = 0, left = p;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w > 0) {
            int r = 0;
            while (r < p && pids[r] != w)
                r++;
            if (r == p)
                continue;
            pids[r] = 0;
            left--;
            if (r == expect_fail_rank)
                continue;
            if (WIFSIGNALED(status)) {
                fprintf(stderr, "member %d killed by signal %d\n", r, WTERMSIG(status));
                failed = 1;
            } else if (WEXITSTATUS(status)) {
                fprintf(stderr, "member %d exited with %d\n", r, WEXITSTATUS(status));
                failed = 1;
            }
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > timeout_s) {
            fprintf(stderr, "TIMEOUT after %d s: %d members still running (a hang)\n", timeout_s,
                    left);
            for (int r = 0; r < p; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL);
            while (waitpid(-1, NULL, 0) > 0)
                ;
            failed = 1;
            break;
        }
        usleep(2000);
    }
    free(pids);
    if (leftovers_of(all, p))
        failed = 1;
    free(all);
    /* The rendezvous file of this run must be gone too. */
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/numacoll-boot-%s", name);
    if (!access(path, F_OK)) {
        fprintf(stderr, "bootstrap file %s left behind\n", path);
        unlink(path);
        failed = 1;
    }
    return failed;
}

int one_bcast(struct numacoll_team *t, unsigned char *buf, size_t n, int root, uint64_t call,
              int rank)
{
    if (rank == root)
        nc_pattern_fill(buf, n, call);
    else
        memset(buf, 0xEE, n);
    int rc = numacoll_bcast(t, buf, n, root);
    CHECK(rc == 0, "bcast(n=%zu root=%d) = %s", n, root, numacoll_strerror(rc));
    long bad = nc_pattern_check(buf, n, call);
    CHECK(bad < 0, "rank %d root %d n=%zu: byte %ld wrong", rank, root, n, bad);
    return 0;
}
