/*
 * bind_check: run by numacoll-bind (exec), checks what the kernel says about this
 * process against what the test asked for. Exit 0 when everything matches, 1 on a
 * mismatch (a "MISMATCH" line says which), 2 on bad arguments.
 *
 *   bind_check [--cpus G0/G1/...] [--mem none|prefer|bind] [--nodes G0/G1/...]
 *              [--omp-threads N]
 *
 * Gi is a Linux cpu/node list ("0-3,8") for local rank i; the local rank comes
 * from the launcher's variables (as numacoll-bind reads them), else 0.
 */
#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXBITS 1024

static int local_rank(void)
{
    static const char *vars[] = {"NUMACOLL_BIND_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return atoi(getenv(vars[i]));
    return 0;
}

/* Group `idx` of "g0/g1/..." parsed as a Linux list into bits[]; -1 if absent/bad. */
static int group_bits(const char *groups, int idx, unsigned char *bits)
{
    const char *p = groups;
    memset(bits, 0, MAXBITS);
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
            if (end == p + 1)
                return -1;
            p = end;
        }
        if (a < 0 || b >= MAXBITS || a > b)
            return -1;
        for (long c = a; c <= b; c++)
            bits[c] = 1;
        if (*p == ',')
            p++;
    }
    return 0;
}

static void bits_str(const unsigned char *bits, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < MAXBITS; i++)
        if (bits[i] && off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "", i);
}

int main(int argc, char **argv)
{
    const char *cpus = NULL, *mem = NULL, *nodes = NULL;
    int omp_threads = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--cpus") == 0)
            cpus = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--mem") == 0)
            mem = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--nodes") == 0)
            nodes = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--omp-threads") == 0)
            omp_threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "bind_check: bad argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    int rank = local_rank();
    unsigned char want[MAXBITS], have[MAXBITS];
    char ws[4096], hs[4096];

    if (cpus) {
        cpu_set_t cs;
        CPU_ZERO(&cs);
        if (group_bits(cpus, rank, want)) {
            fprintf(stderr, "bind_check: no CPU group for local rank %d in \"%s\"\n", rank, cpus);
            return 2;
        }
        if (sched_getaffinity(0, sizeof(cs), &cs)) {
            perror("sched_getaffinity");
            return 1;
        }
        for (int c = 0; c < MAXBITS; c++)
            have[c] = c < CPU_SETSIZE && CPU_ISSET(c, &cs);
        bits_str(want, ws, sizeof(ws));
        bits_str(have, hs, sizeof(hs));
        if (memcmp(want, have, MAXBITS)) {
            printf("bind_check: local rank %d: MISMATCH cpus: expected %s, kernel says %s\n", rank, ws, hs);
            bad = 1;
        } else {
            printf("bind_check: local rank %d: cpus %s ok\n", rank, hs);
        }
    }
    if (mem) {
        unsigned long mask[MAXBITS / (8 * sizeof(unsigned long))];
        int mode = 0;
        memset(mask, 0, sizeof(mask));
        if (get_mempolicy(&mode, mask, MAXBITS, NULL, 0)) {
            perror("get_mempolicy");
            return 1;
        }
        mode &= 0xff; /* drop MPOL_F_* mode flags */
        int ok;
        if (strcmp(mem, "none") == 0)
            ok = mode == MPOL_DEFAULT;
        else if (strcmp(mem, "prefer") == 0)
            ok = mode == MPOL_PREFERRED || mode == 5 /* MPOL_PREFERRED_MANY */;
        else if (strcmp(mem, "bind") == 0)
            ok = mode == MPOL_BIND;
        else {
            fprintf(stderr, "bind_check: bad --mem \"%s\"\n", mem);
            return 2;
        }
        for (int n = 0; n < MAXBITS; n++)
            have[n] = (mask[n / (8 * sizeof(unsigned long))] >> (n % (8 * sizeof(unsigned long)))) & 1;
        bits_str(have, hs, sizeof(hs));
        if (!ok) {
            printf("bind_check: local rank %d: MISMATCH memory policy: expected %s, kernel mode %d\n",
                   rank, mem, mode);
            bad = 1;
        } else if (nodes && strcmp(mem, "none") != 0) {
            if (group_bits(nodes, rank, want)) {
                fprintf(stderr, "bind_check: no node group for local rank %d in \"%s\"\n", rank, nodes);
                return 2;
            }
            bits_str(want, ws, sizeof(ws));
            if (memcmp(want, have, MAXBITS)) {
                printf("bind_check: local rank %d: MISMATCH memory nodes: expected %s, kernel says %s\n",
                       rank, ws, hs);
                bad = 1;
            } else {
                printf("bind_check: local rank %d: memory %s nodes %s ok\n", rank, mem, hs);
            }
        } else {
            printf("bind_check: local rank %d: memory %s ok\n", rank, mem);
        }
    }
    if (omp_threads) {
        const char *n = getenv("OMP_NUM_THREADS"), *pl = getenv("OMP_PLACES"), *pb = getenv("OMP_PROC_BIND");
        if (!n || atoi(n) != omp_threads || !pl || pl[0] != '{' || !pb) {
            printf("bind_check: local rank %d: MISMATCH OpenMP env: OMP_NUM_THREADS=%s OMP_PLACES=%s "
                   "OMP_PROC_BIND=%s\n", rank, n ? n : "(unset)", pl ? pl : "(unset)", pb ? pb : "(unset)");
            bad = 1;
        } else {
            printf("bind_check: local rank %d: OMP_NUM_THREADS=%s OMP_PLACES=%s OMP_PROC_BIND=%s ok\n",
                   rank, n, pl, pb);
        }
    }
    return bad;
}
