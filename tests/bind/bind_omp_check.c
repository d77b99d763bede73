/*
 * bind_omp_check: OpenMP program run by numacoll-bind --threads N. Every thread
 * reads its own affinity from the kernel; the check fails (exit 1, "MISMATCH")
 * unless
 *   - the team has OMP_NUM_THREADS threads,
 *   - each thread's mask is exactly one of the OMP_PLACES places,
 *   - that place lies inside the rank's CPUs (--cpus G0/G1/..., Gi for local rank i),
 *   - with as many threads as places, no two threads share a place.
 * The team then lingers (--linger MS, default 400) so --report can see it.
 */
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXCPU 1024
#define MAXPLACES 256

static int local_rank(void)
{
    static const char *vars[] = {"NUMACOLL_BIND_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return atoi(getenv(vars[i]));
    return 0;
}

/* OMP_PLACES as written by numacoll-bind: "{0,1},{2,3}" */
static int parse_places(const char *s, unsigned char places[][MAXCPU])
{
    int n = 0;
    while (s && *s == '{' && n < MAXPLACES) {
        memset(places[n], 0, MAXCPU);
        s++;
        while (*s && *s != '}') {
            char *end;
            long c = strtol(s, &end, 10);
            if (end == s || c < 0 || c >= MAXCPU)
                return -1;
            places[n][c] = 1;
            s = end;
            if (*s == ',')
                s++;
        }
        if (*s != '}')
            return -1;
        s++;
        n++;
        if (*s == ',')
            s++;
    }
    return n;
}

static int group_bits(const char *groups, int idx, unsigned char *bits)
{
    const char *p = groups;
    memset(bits, 0, MAXCPU);
    for (int i = 0; i < idx; i++) {
        p = strchr(p, '/');
        if (!p)
            return -1;
        p++;
    }
    while (*p && *p != '/') {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p)
            return -1;
        b = a;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            p = end;
        }
        for (long c = a; c <= b && c < MAXCPU; c++)
            bits[c] = 1;
        if (*p == ',')
            p++;
    }
    return 0;
}

static unsigned char places[MAXPLACES][MAXCPU];

int main(int argc, char **argv)
{
    const char *cpus = NULL;
    int linger = 400, bad = 0, rank = local_rank();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--cpus") == 0)
            cpus = argv[i + 1];
        else if (strcmp(argv[i], "--linger") == 0)
            linger = atoi(argv[i + 1]);
    }
    unsigned char rankset[MAXCPU];
    memset(rankset, 1, sizeof(rankset));
    if (cpus && group_bits(cpus, rank, rankset)) {
        fprintf(stderr, "bind_omp_check: no CPU group for local rank %d\n", rank);
        return 2;
    }
    int nplaces = parse_places(getenv("OMP_PLACES"), places);
    const char *nt = getenv("OMP_NUM_THREADS");
    if (nplaces <= 0 || !nt) {
        printf("bind_omp_check: local rank %d: MISMATCH OMP_PLACES/OMP_NUM_THREADS not set by numacoll-bind\n", rank);
        return 1;
    }
    int want = atoi(nt), team = 0;
    int place_of[MAXPLACES];
    char msg[MAXPLACES][128];
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        cpu_set_t cs;
        CPU_ZERO(&cs);
        sched_getaffinity(0, sizeof(cs), &cs);
        int found = -1;
        for (int p = 0; p < nplaces && found < 0; p++) {
            int same = 1;
            for (int c = 0; c < MAXCPU && same; c++)
                same = (c < CPU_SETSIZE && CPU_ISSET(c, &cs)) == places[p][c];
            if (same)
                found = p;
        }
        if (t < MAXPLACES) {
            place_of[t] = found;
            int inside = found >= 0;
            for (int c = 0; c < MAXCPU && inside; c++)
                if (found >= 0 && places[found][c] && !rankset[c])
                    inside = 0;
            snprintf(msg[t], sizeof(msg[t]), "thread %d on place %d%s", t, found,
                     found < 0 ? " MISMATCH (mask is no place)" : inside ? "" : " MISMATCH (outside the rank)");
        }
#pragma omp single
        team = omp_get_num_threads();
        /* implicit barrier after single: every thread is up; linger for --report */
        struct timespec ts = {linger / 1000, (long)(linger % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (team != want) {
        printf("bind_omp_check: local rank %d: MISMATCH team of %d threads, OMP_NUM_THREADS=%d\n", rank, team, want);
        bad = 1;
    }
    for (int t = 0; t < team && t < MAXPLACES; t++) {
        if (strstr(msg[t], "MISMATCH"))
            bad = 1;
        if (team == nplaces)
            for (int u = 0; u < t; u++)
                if (place_of[u] == place_of[t]) {
                    printf("bind_omp_check: local rank %d: MISMATCH threads %d and %d share place %d\n", rank, u, t,
                           place_of[t]);
                    bad = 1;
                }
        printf("bind_omp_check: local rank %d: %s\n", rank, msg[t]);
    }
    printf("bind_omp_check: local rank %d: %s\n", rank, bad ? "FAILED" : "ok");
    return bad;
}
