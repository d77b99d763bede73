/*
 * Random-sequence soak test of numacoll's MPI layer.
 *
 * Every rank runs the same deterministic pseudo-random sequence of collective
 * calls (xoshiro256** seeded by splitmix64 from --seed). Each call draws,
 * identically on every rank:
 *   - the collective, from colls[] (today MPI_Bcast and MPI_Barrier, the two
 *     numacoll implements; a new collective is one table entry and one run_*());
 *   - the communicator, from a pool that changes along the run: MPI_COMM_WORLD,
 *     dups, odd/even, reversed and half splits, splits by random colour (some
 *     ranks MPI_UNDEFINED) with random keys, and MPI_Comm_create of a random
 *     subset in random order, of any pool member; created and freed at random
 *     (at most POOL_MAX live), so numacoll sets teams up and tears them down,
 *     and takes and gives back node budget, all along the run. Pool members
 *     whose pieces are all of two or more ranks (the ones numacoll takes) are
 *     preferred; a rank outside every piece of a member (MPI_COMM_NULL) sits
 *     that call out;
 *   - the root (any rank of the communicator);
 *   - the message size, 0 .. max_size bytes, skewed to small: 3% empty, 5%
 *     numacoll's thresholds (inline slot, fragment, full queue) and their
 *     neighbours, otherwise log-uniform over the powers of two with 70% below
 *     4 KiB, 20% 4..64 KiB, 8% 64 KiB..1 MiB, 2% 1 MiB..max_size;
 *   - the datatypes: MPI_BYTE, MPI_INT, MPI_DOUBLE, contiguous, vector and
 *     hindexed types with gaps, structs with permuted displacements and with
 *     holes. The root and the receivers use either the same (count, datatype)
 *     pair, or two different pairs with one type signature (e.g. 2n MPI_INT
 *     at the root, n contig(2,INT) or n/3 vectors elsewhere), or every rank
 *     its own pair.
 *
 * What is checked:
 *   - bcast: the root fills its buffer from a generator keyed on (seed, call
 *     index, root's world rank, offset in the type signature); each receiver
 *     first fills the bytes it will receive with the complement of what it
 *     must get, so a byte that is not written is always caught; afterwards it
 *     checks EVERY received byte, and that the gap bytes of its datatype and
 *     GUARD bytes on each side of the buffer still hold the sentinel they were
 *     filled with. The root checks that its buffer was left untouched.
 *   - barrier: every rank stores the call index in an MPI shared window just
 *     before entering; after leaving, every member of the communicator must
 *     have entered (nobody leaves barrier k before everyone entered it).
 *   - at the end: every rank ran the same sequence (a checksum of the
 *     generator's state), numacoll's counters account for every call of every
 *     rank, and numacoll (not the MPI library) handled at least --min-share
 *     percent of the calls of all ranks (unless NUMACOLL_DISABLE=1 or a
 *     NUMACOLL_<COLL>_ENABLE=0 switched it off: then it must have handled none).
 * Before the run the datatype table itself is checked against MPI_Pack of the
 * MPI library, so the checker's idea of each type's layout is right.
 *
 * On the first error the rank prints one line with the call index, seed,
 * collective, communicator, root, size, datatypes, first wrong offset,
 * expected and received byte, then the command that replays the run, and
 * calls MPI_Abort(MPI_COMM_WORLD, 2). A call (or communicator operation) that
 * does not finish within the watchdog time is reported the same way by a
 * SIGALRM handler (exit code 3).
 *
 * Usage: soak [--calls N] [--seed N|random] [--max-size S] [--watchdog SEC]
 *             [--min-share PCT] [--corrupt CALL[:data|guard|barrier]]
 *   defaults: 10000 calls, seed 1, max size 8m (suffix k/m), watchdog 60 s,
 *   min share 50 (%). --corrupt is the self-test of the checker: at the first
 *   call >= CALL that fits (a broadcast of at least one byte, or a barrier, on
 *   a communicator whose pieces all have two or more ranks) the receivers
 *   flip one received byte (data) or write one byte past the end of their
 *   buffer (guard), or the last member of the barrier marks its entry only
 *   after leaving (barrier); the run must then fail.
 * On success rank 0 prints a summary and the program exits 0.
 */
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "numacoll_mpi.h"

extern char **environ;

enum {
    GUARD = 16384,       /* sentinel bytes checked on each side of a buffer (two fragments) */
    MISALIGN = 64,       /* buffers start at a per-call offset 0..MISALIGN-1 */
    POOL_MAX = 8,        /* live communicators in the pool, world included */
    COMM_OP_EVERY = 100, /* one communicator create/free per ~this many calls */
    MAX_BLOCKS = 4,
    MAX_GAPS = 4,
};

static int wrank, wsize;
static char replay[1024];       /* the command line that replays this run */

/* ---- deterministic generators --------------------------------------------- */

/* splitmix64: seeds the sequence generator and keys the data pattern. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* xoshiro256**: the call sequence. Every rank draws exactly the same values in
 * the same order; anything rank-dependent is derived from a draw afterwards
 * (e.g. root = draw % size of this rank's communicator), and every decision
 * that changes how many values are drawn depends on global facts only. */
typedef struct rng { uint64_t s[4]; } rng_t;

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static void rng_seed(rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = seed = mix64(seed);
}

static uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static uint64_t rng_below(rng_t *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

/* The message: byte k of the type signature of a call is byte k % 8 of
 * mix64(key + k / 8), key depending on (seed, call index, root's world rank) so
 * that data from another call or from the other piece of a split is caught. */
static void pattern_fill(unsigned char *ref, size_t n, uint64_t key)
{
    size_t w = 0;
    for (; w + 8 <= n; w += 8) {
        uint64_t v = mix64(key + w / 8);
        memcpy(ref + w, &v, 8);
    }
    if (w < n) {
        uint64_t v = mix64(key + w / 8);
        memcpy(ref + w, &v, n - w);
    }
}

/* ---- datatypes ------------------------------------------------------------ */

/* Type-signature classes: a root and its receivers always pick layouts of one
 * class, so their signatures can match whatever pairs they use. */
enum cls { CLS_BYTE, CLS_INT, CLS_DOUBLE, CLS_DOUBLE_INT, NCLS };
static const char *const cls_name[NCLS] = {"byte", "int", "double", "double+int"};
enum base { B_BYTE, B_INT, B_DOUBLE };
enum kind { K_BASIC, K_CONTIG, K_VECTOR, K_HINDEXED, K_STRUCT };

typedef struct block { int disp, len; enum base base; } block_t;
typedef struct range { int off, len; } range_t;

/* One datatype as the checker sees it: blocks of bytes in type-signature
 * order (which for a permuted struct or hindexed is not memory order), within
 * an extent; the gaps (bytes of the extent no block covers) are derived at
 * start-up. */
typedef struct layout {
    const char *name;
    enum cls cls;
    enum kind kind;
    int extent;
    int nblocks;
    block_t blocks[MAX_BLOCKS];
    /* filled in by layouts_init() */
    MPI_Datatype type;
    int sig;            /* bytes in the signature of one element */
    int contiguous;     /* one block covering the extent: one memcpy/memcmp */
    int ngaps;
    range_t gaps[MAX_GAPS];
} layout_t;

static layout_t layouts[] = {
    {"MPI_BYTE", CLS_BYTE, K_BASIC, 1, 1, .blocks = {{0, 1, B_BYTE}}},
    {"contig(16,BYTE)", CLS_BYTE, K_CONTIG, 16, 1, .blocks = {{0, 16, B_BYTE}}},
    {"vector(3,5,7,BYTE)/24", CLS_BYTE, K_VECTOR, 24, 3,
     .blocks = {{0, 5, B_BYTE}, {7, 5, B_BYTE}, {14, 5, B_BYTE}}},
    {"hindexed{3@10,4@0,2@5}(BYTE)/16", CLS_BYTE, K_HINDEXED, 16, 3,
     .blocks = {{10, 3, B_BYTE}, {0, 4, B_BYTE}, {5, 2, B_BYTE}}},
    {"MPI_INT", CLS_INT, K_BASIC, 4, 1, .blocks = {{0, 4, B_INT}}},
    {"contig(2,INT)", CLS_INT, K_CONTIG, 8, 1, .blocks = {{0, 8, B_INT}}},
    {"vector(2,3,5,INT)/48", CLS_INT, K_VECTOR, 48, 2, .blocks = {{0, 12, B_INT}, {20, 12, B_INT}}},
    {"hindexed{2@0,1@12,3@20}(INT)", CLS_INT, K_HINDEXED, 32, 3,
     .blocks = {{0, 8, B_INT}, {12, 4, B_INT}, {20, 12, B_INT}}},
    {"struct{INT@8,INT@0,INT@4}/16", CLS_INT, K_STRUCT, 16, 3,
     .blocks = {{8, 4, B_INT}, {0, 4, B_INT}, {4, 4, B_INT}}},
    {"MPI_DOUBLE", CLS_DOUBLE, K_BASIC, 8, 1, .blocks = {{0, 8, B_DOUBLE}}},
    {"contig(3,DOUBLE)", CLS_DOUBLE, K_CONTIG, 24, 1, .blocks = {{0, 24, B_DOUBLE}}},
    {"vector(4,1,2,DOUBLE)", CLS_DOUBLE, K_VECTOR, 56, 4,
     .blocks = {{0, 8, B_DOUBLE}, {16, 8, B_DOUBLE}, {32, 8, B_DOUBLE}, {48, 8, B_DOUBLE}}},
    {"struct{DOUBLE@16,DOUBLE@0}/32", CLS_DOUBLE, K_STRUCT, 32, 2,
     .blocks = {{16, 8, B_DOUBLE}, {0, 8, B_DOUBLE}}},
    {"struct{DOUBLE@0,INT@12}/16", CLS_DOUBLE_INT, K_STRUCT, 16, 2,
     .blocks = {{0, 8, B_DOUBLE}, {12, 4, B_INT}}},
    {"struct{DOUBLE@0,INT@8}/12", CLS_DOUBLE_INT, K_STRUCT, 12, 2,
     .blocks = {{0, 8, B_DOUBLE}, {8, 4, B_INT}}},
};
enum { NLAYOUTS = sizeof layouts / sizeof layouts[0] };

static int cls_layouts[NCLS][NLAYOUTS], cls_nlayouts[NCLS];
static size_t cls_lcm[NCLS];    /* signature bytes every layout of the class divides */
static double max_expansion;    /* max extent / signature: buffer bytes per message byte */

static MPI_Datatype base_type(enum base b)
{
    return b == B_BYTE ? MPI_BYTE : b == B_INT ? MPI_INT : MPI_DOUBLE;
}

static int base_size(enum base b) { return b == B_BYTE ? 1 : b == B_INT ? 4 : 8; }

static size_t gcd(size_t a, size_t b) { return b ? gcd(b, a % b) : a; }
static size_t lcm(size_t a, size_t b) { return a / gcd(a, b) * b; }

/* One write(), so that the lines of ranks failing at once do not interleave
 * and a rank killed by the abort of another has said all or nothing. */
static void die(const char *fmt, ...)
{
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "soak: rank %d: ", wrank);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg)
        n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof msg)
        n += snprintf(msg + n, sizeof msg - (size_t)n, "\nsoak: replay: %s\n", replay);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    if (len == sizeof msg - 1)
        msg[len - 1] = '\n';
    fflush(stdout);
    if (write(2, msg, len) < 0)
        perror("soak: write");
    /* MPICH's mpiexec, its output on pipes, may drop what an aborting rank
     * wrote last: give the launcher time to forward the message first. */
    usleep(300000);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* Builds each MPI type with the constructor its name says, derives gaps, and
 * checks the table against the MPI library: MPI_Type_size, the extent, and
 * MPI_Pack of three elements against the checker's own gather by blocks. */
static void layouts_init(void)
{
    max_expansion = 1;
    for (int i = 0; i < NLAYOUTS; i++) {
        layout_t *l = &layouts[i];
        const block_t *b = l->blocks;
        MPI_Datatype t, el = base_type(b[0].base);
        int bs = base_size(b[0].base);
        if (l->kind == K_BASIC)
            t = el;
        else if (l->kind == K_CONTIG)
            MPI_Type_contiguous(b[0].len / bs, el, &t);
        else if (l->kind == K_VECTOR)
            MPI_Type_vector(l->nblocks, b[0].len / bs, (b[1].disp - b[0].disp) / bs, el, &t);
        else {
            int lens[MAX_BLOCKS];
            MPI_Aint disps[MAX_BLOCKS];
            MPI_Datatype types[MAX_BLOCKS];
            for (int k = 0; k < l->nblocks; k++) {
                lens[k] = b[k].len / base_size(b[k].base);
                disps[k] = b[k].disp;
                types[k] = base_type(b[k].base);
            }
            if (l->kind == K_HINDEXED)
                MPI_Type_create_hindexed(l->nblocks, lens, disps, el, &t);
            else
                MPI_Type_create_struct(l->nblocks, lens, disps, types, &t);
        }
        MPI_Aint lb, ext;
        MPI_Type_get_extent(t, &lb, &ext);
        if (lb != 0 || ext != l->extent) {
            MPI_Datatype r;
            MPI_Type_create_resized(t, 0, l->extent, &r);
            MPI_Type_free(&t);
            t = r;
        }
        if (l->kind != K_BASIC)
            MPI_Type_commit(&t);
        l->type = t;

        unsigned char covered[64] = {0};   /* extents of the table are at most 64 */
        if (l->extent > (int)sizeof covered)
            die("layout %s: extent %d above %zu", l->name, l->extent, sizeof covered);
        l->sig = 0;
        for (int k = 0; k < l->nblocks; k++) {
            memset(covered + b[k].disp, 1, (size_t)b[k].len);
            l->sig += b[k].len;
        }
        l->contiguous = l->nblocks == 1 && b[0].disp == 0 && b[0].len == l->extent;
        l->ngaps = 0;
        for (int o = 0; o < l->extent; o++)
            if (!covered[o]) {
                if (o == 0 || covered[o - 1]) {
                    if (l->ngaps == MAX_GAPS)
                        die("layout %s: more than %d gaps", l->name, MAX_GAPS);
                    l->gaps[l->ngaps++] = (range_t){o, 0};
                }
                l->gaps[l->ngaps - 1].len++;
            }
        if ((double)l->extent / l->sig > max_expansion)
            max_expansion = (double)l->extent / l->sig;
        cls_layouts[l->cls][cls_nlayouts[l->cls]++] = i;

        int size;
        MPI_Type_size(t, &size);
        MPI_Type_get_extent(t, &lb, &ext);
        if (size != l->sig || lb != 0 || ext != l->extent)
            die("layout %s: MPI says size %d lb %ld extent %ld, the table %d 0 %d", l->name, size,
                (long)lb, (long)ext, l->sig, l->extent);
        unsigned char elems[3 * 64], mine[3 * 64], packed[3 * 64];
        for (int k = 0; k < 3 * l->extent; k++)
            elems[k] = (unsigned char)(k * 7 + 1);
        int pos = 0, m = 0;
        MPI_Pack(elems, 3, t, packed, sizeof packed, &pos, MPI_COMM_WORLD);
        for (int e = 0; e < 3; e++)
            for (int k = 0; k < l->nblocks; k++) {
                memcpy(mine + m, elems + e * l->extent + b[k].disp, (size_t)b[k].len);
                m += b[k].len;
            }
        if (pos != m || memcmp(mine, packed, (size_t)m))
            die("layout %s: MPI_Pack disagrees with the table", l->name);
    }
    for (int c = 0; c < NCLS; c++) {
        if (cls_nlayouts[c] < 2)
            die("class %s: fewer than two layouts", cls_name[c]);
        cls_lcm[c] = 1;
        for (int k = 0; k < cls_nlayouts[c]; k++)
            cls_lcm[c] = lcm(cls_lcm[c], (size_t)layouts[cls_layouts[c][k]].sig);
    }
}

static void layouts_fini(void)
{
    for (int i = 0; i < NLAYOUTS; i++)
        if (layouts[i].kind != K_BASIC)
            MPI_Type_free(&layouts[i].type);
}

/* Buffer offset of byte pos of the signature of count elements of l. */
static size_t sig_to_buf(const layout_t *l, size_t pos)
{
    size_t e = pos / (size_t)l->sig, r = pos % (size_t)l->sig;
    const block_t *b = l->blocks;
    while (r >= (size_t)b->len)
        r -= (size_t)(b++)->len;
    return e * (size_t)l->extent + (size_t)b->disp + r;
}

/* ---- communicator pool ---------------------------------------------------- */

/* Slot i of the pool holds, on every rank, this rank's piece of the same
 * communicator "shape" (for a split, each rank has the piece it belongs to,
 * or MPI_COMM_NULL). All ranks run every pool operation, each on its own
 * piece, so the pool has the same structure everywhere. Slot 0 is
 * MPI_COMM_WORLD for good. */
typedef struct slot {
    MPI_Comm comm;      /* MPI_COMM_NULL: this rank is in no piece */
    int rank, size;     /* 0, 0 when MPI_COMM_NULL */
    int *wranks;        /* world rank of each member */
    int full;           /* global: every rank is in a piece of >= 2 ranks */
    char name[160];
} slot_t;

static slot_t pool[POOL_MAX];
static int npool, comms_created, comms_freed, comm_serial;
static unsigned long long pieces_freed, pieces_set_up; /* counted by piece rank 0 */

static void slot_set(slot_t *s, MPI_Comm comm, const char *name)
{
    s->comm = comm;
    s->rank = s->size = 0;
    s->wranks = NULL;
    if (comm != MPI_COMM_NULL) {
        MPI_Comm_rank(comm, &s->rank);
        MPI_Comm_size(comm, &s->size);
        s->wranks = malloc((size_t)s->size * sizeof *s->wranks);
        int *ids = malloc((size_t)s->size * sizeof *ids);
        for (int i = 0; i < s->size; i++)
            ids[i] = i;
        MPI_Group g, wg;
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_translate_ranks(g, s->size, ids, wg, s->wranks);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        free(ids);
    }
    int mine = comm != MPI_COMM_NULL && s->size >= 2;
    MPI_Allreduce(&mine, &s->full, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    snprintf(s->name, sizeof s->name, "%s", name);
}

enum shape { SH_DUP, SH_ODD_EVEN, SH_REVERSED, SH_HALVES, SH_RANDOM, SH_CREATE, NSHAPES };
static const char *const shape_name[NSHAPES] = {"dup", "oddeven", "reversed", "halves",
                                                "split", "create"};

/* Creates shape sh of the communicator in slot parent into a new slot; key
 * (the same on every rank) draws colours, keys and subsets. */
static void pool_create(int parent, enum shape sh, uint64_t key)
{
    const slot_t *p = &pool[parent];
    MPI_Comm c = MPI_COMM_NULL;
    int ncol = 1 + (int)(key % 3);
    char what[16];
    snprintf(what, sizeof what, "%s", shape_name[sh]);
    if (sh == SH_RANDOM)
        snprintf(what, sizeof what, "split%d", ncol);
    if (p->comm == MPI_COMM_NULL)
        ;   /* not in the parent: not in the child */
    else if (sh == SH_DUP)
        MPI_Comm_dup(p->comm, &c);
    else if (sh == SH_ODD_EVEN)
        MPI_Comm_split(p->comm, p->rank % 2, p->rank, &c);
    else if (sh == SH_REVERSED)
        MPI_Comm_split(p->comm, 0, p->size - p->rank, &c);
    else if (sh == SH_HALVES)
        MPI_Comm_split(p->comm, p->rank < p->size / 2, p->rank, &c);
    else if (sh == SH_RANDOM) {
        /* per world rank: 1 in 8 stays out, the others take one of ncol
         * colours, keys at random (ties: parent order) */
        uint64_t h = mix64(key ^ ((uint64_t)p->wranks[p->rank] + 1) * 0xd1b54a32d192ed03ull);
        int colour = h % 8 == 0 ? MPI_UNDEFINED : (int)((h >> 8) % (uint64_t)ncol);
        MPI_Comm_split(p->comm, colour, (int)((h >> 24) % 1000), &c);
    } else {
        /* MPI_Comm_create: each member of the parent kept with probability
         * 3/4 (at least one), in an order of their own; every member of the
         * piece computes the same group */
        int *ranks = malloc((size_t)p->size * sizeof *ranks), n = 0;
        uint64_t *ord = malloc((size_t)p->size * sizeof *ord);
        for (int i = 0; i < p->size; i++)
            if (mix64(key + (uint64_t)i) % 4 || (n == 0 && i == p->size - 1)) {
                uint64_t o = mix64(key ^ ((uint64_t)i << 32));
                int j = n++;
                for (; j > 0 && ord[j - 1] > o; j--) {
                    ord[j] = ord[j - 1];
                    ranks[j] = ranks[j - 1];
                }
                ord[j] = o;
                ranks[j] = i;
            }
        MPI_Group pg, g;
        MPI_Comm_group(p->comm, &pg);
        MPI_Group_incl(pg, n, ranks, &g);
        MPI_Comm_create(p->comm, g, &c);
        MPI_Group_free(&g);
        MPI_Group_free(&pg);
        free(ranks);
        free(ord);
    }
    /* the full lineage, e.g. c9=reversed(c4=oddeven(world)), cut if very deep */
    char name[sizeof p->name];
    snprintf(name, sizeof name, "c%d=%s(%s)", ++comm_serial, what, p->name);
    slot_set(&pool[npool++], c, name);
    comms_created++;
}

static void pool_free(int i)
{
    if (pool[i].comm != MPI_COMM_NULL) {
        if (pool[i].rank == 0) {
            pieces_freed++;
            pieces_set_up += numacoll_mpi_comm_active(pool[i].comm) == 1;
        }
        MPI_Comm_free(&pool[i].comm);
    }
    free(pool[i].wranks);
    pool[i] = pool[--npool];
    comms_freed++;
}

/* ---- one call ------------------------------------------------------------- */

enum mode { SAME, ROOT_DIFFERS, PER_RANK, NMODES };
static const char *const mode_name[NMODES] = {"same", "root-differs", "per-rank"};
enum corrupt { CORRUPT_NONE, CORRUPT_DATA, CORRUPT_GUARD, CORRUPT_BARRIER };

/* Everything a call needs, drawn identically on every rank (root and the
 * layouts are resolved per rank from those draws). */
typedef struct plan {
    uint64_t index;
    int coll;
    slot_t *slot;
    int root;               /* rank in this rank's piece of slot */
    size_t bytes;           /* message size: bytes of the type signature */
    enum cls cls;
    enum mode mode;
    int lay_root, lay_recv; /* layouts[] indices (SAME, ROOT_DIFFERS) */
    uint64_t layout_key;    /* PER_RANK: layout of rank r = f(layout_key, r) */
    enum corrupt corrupt;   /* --corrupt: this is the call to spoil */
} plan_t;

static uint64_t seed;
static size_t max_size;
static unsigned char *arena, *ref, guard_ref[GUARD];
static size_t arena_size;
static unsigned long long bytes_checked;
static _Atomic uint64_t *arrived;   /* barrier entry counters, one line per world rank */
static MPI_Win arrived_win;

static int layout_of(const plan_t *p, int rank)
{
    if (p->mode == SAME || (p->mode == ROOT_DIFFERS && rank == p->root))
        return p->lay_root;
    if (p->mode == ROOT_DIFFERS)
        return p->lay_recv;
    return cls_layouts[p->cls][mix64(p->layout_key + (uint64_t)rank) % (uint64_t)cls_nlayouts[p->cls]];
}

/* Sizes where numacoll changes path: the inline announcement slot (4080), the
 * default fragment (8 KiB) and a full queue of fragments (64 x 8 KiB). */
static const size_t edge_sizes[] = {1, 4079, 4080, 4081, 8191, 8192, 8193,
                                    524287, 524288, 524289};

static size_t draw_size(rng_t *r)
{
    uint64_t u = rng_below(r, 1000), v = rng_next(r), w = rng_next(r);
    size_t n;
    if (u < 30)
        n = 0;
    else if (u < 80)
        n = edge_sizes[v % (sizeof edge_sizes / sizeof edge_sizes[0])];
    else {
        /* exponent: 70% 1 B..4 KiB, 20% 4..64 KiB, 8% 64 KiB..1 MiB, 2% 1 MiB..max_size */
        unsigned e = u < 730 ? v % 12 : u < 930 ? 12 + v % 4 : u < 990 ? 16 + v % 4 : 20 + v % 4;
        size_t lo = (size_t)1 << e;
        /* a quarter exactly at 2^e - 1, 2^e or 2^e + 1, the rest anywhere in [2^e, 2^(e+1)) */
        n = w % 4 == 0 ? lo - 1 + (w >> 2) % 3 : lo + (w >> 2) % lo;
    }
    return n > max_size ? max_size : n;
}

static void draw_plan(rng_t *r, uint64_t index, plan_t *p, int ncolls, const unsigned *weights)
{
    unsigned total = 0;
    for (int i = 0; i < ncolls; i++)
        total += weights[i];
    uint64_t c = rng_below(r, total);
    p->index = index;
    for (p->coll = 0; c >= weights[p->coll]; p->coll++)
        c -= weights[p->coll];
    /* prefer members numacoll takes: a member with a piece of one rank (or
     * ranks outside it) is kept one time in four, else drawn again, up to
     * three times (full is global, so every rank draws as many values) */
    uint64_t k = rng_below(r, (uint64_t)npool);
    for (int t = 0; t < 3 && !pool[k].full && rng_below(r, 4) != 0; t++)
        k = rng_below(r, (uint64_t)npool);
    p->slot = &pool[k];
    uint64_t rootdraw = rng_next(r);
    p->root = p->slot->size ? (int)(rootdraw % (uint64_t)p->slot->size) : -1;
    size_t want = draw_size(r);
    p->cls = (enum cls)rng_below(r, NCLS);
    uint64_t m = rng_below(r, 8);
    p->mode = m < 5 ? SAME : m < 7 ? ROOT_DIFFERS : PER_RANK;
    /* two different layouts of the class: a for the root, b for the receivers */
    uint64_t nl = (uint64_t)cls_nlayouts[p->cls], a = rng_below(r, nl);
    uint64_t b = (a + 1 + rng_below(r, nl - 1)) % nl;
    p->lay_root = cls_layouts[p->cls][a];
    p->lay_recv = cls_layouts[p->cls][b];
    p->layout_key = rng_next(r);
    /* the size in whole elements of every layout in play, rounded up */
    size_t unit = p->mode == SAME ? (size_t)layouts[p->lay_root].sig
                : p->mode == ROOT_DIFFERS ? lcm((size_t)layouts[p->lay_root].sig,
                                                (size_t)layouts[p->lay_recv].sig)
                : cls_lcm[p->cls];
    p->bytes = (want + unit - 1) / unit * unit;
    if (p->bytes > max_size)
        p->bytes = max_size / unit * unit;
    p->corrupt = CORRUPT_NONE;
}

typedef struct soak_coll {
    const char *name;
    unsigned weight;            /* relative frequency in the sequence */
    int stats_id;               /* index in numacoll_mpi_stats_t */
    const char *enable_env;     /* the switch that hands it to the MPI library */
    int has_data;               /* uses the plan's root, size and datatypes */
    void (*run)(const plan_t *p);
} soak_coll_t;

static void run_bcast(const plan_t *p);
static void run_barrier(const plan_t *p);

/* The collectives of the sequence. Adding one (Allreduce, Reduce, Gather...) is
 * one entry here and its run_*(): fill from the plan, call, check every byte. */
static const soak_coll_t colls[] = {
    {"bcast", 6, NUMACOLL_MPI_BCAST, "NUMACOLL_BCAST_ENABLE", 1, run_bcast},
    {"barrier", 4, NUMACOLL_MPI_BARRIER, "NUMACOLL_BARRIER_ENABLE", 0, run_barrier},
};
enum { NCOLLS = sizeof colls / sizeof colls[0] };
static unsigned long long coll_calls[NCOLLS];   /* calls of the sequence */
static unsigned long long rank_calls[NCOLLS];   /* calls this rank took part in */
static unsigned long long seq_bytes;            /* broadcast bytes of the sequence (per call) */

/* The current call in words, kept ready for error reports and the watchdog. */
static char current[768];

static void describe(const plan_t *p)
{
    const slot_t *s = p->slot;
    int n = snprintf(current, sizeof current,
                     "call %llu (seed %llu): %s on %s (size %d, my rank %d, world rank %d)",
                     (unsigned long long)p->index, (unsigned long long)seed, colls[p->coll].name,
                     s->name, s->size, s->rank, wrank);
    if (colls[p->coll].has_data && n > 0 && (size_t)n < sizeof current) {
        int lr = layout_of(p, p->root), lm = layout_of(p, s->rank);
        snprintf(current + n, sizeof current - (size_t)n,
                 ", root %d, %zu bytes, %s datatypes (%s): root %s x %zu, mine %s x %zu", p->root,
                 p->bytes, cls_name[p->cls], mode_name[p->mode], layouts[lr].name,
                 p->bytes / (size_t)layouts[lr].sig, layouts[lm].name,
                 p->bytes / (size_t)layouts[lm].sig);
    }
}

static void watchdog(int sig)
{
    (void)sig;
    /* async-signal-safe: memcpy and one write() */
    static char msg[sizeof current + sizeof replay + 64];
    const char *parts[] = {"soak: watchdog: no progress in ", current, "\nsoak: replay: ", replay,
                           "\n"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        size_t l = strnlen(parts[i], sizeof msg - n);
        memcpy(msg + n, parts[i], l);
        n += l;
    }
    ssize_t rc = write(2, msg, n);
    (void)rc;
    struct timespec ts = {0, 300000000};   /* see die() */
    nanosleep(&ts, NULL);
    _exit(3);
}

/* Writes the count elements' signature bytes from src (or their complement)
 * into the blocks of buf. */
static void scatter(unsigned char *buf, const layout_t *l, size_t count, const unsigned char *src,
                    int complement)
{
    if (l->contiguous && !complement) {
        memcpy(buf, src, count * (size_t)l->sig);
        return;
    }
    if (l->contiguous) {
        for (size_t k = 0, n = count * (size_t)l->sig; k < n; k++)
            buf[k] = (unsigned char)~src[k];
        return;
    }
    for (size_t e = 0, pos = 0; e < count; e++)
        for (const block_t *b = l->blocks; b < l->blocks + l->nblocks; b++) {
            unsigned char *d = buf + e * (size_t)l->extent + b->disp;
            if (complement)
                for (int j = 0; j < b->len; j++)
                    d[j] = (unsigned char)~src[pos + (size_t)j];
            else
                memcpy(d, src + pos, (size_t)b->len);
            pos += (size_t)b->len;
        }
}

/* Counts the wrong bytes of a message (to report, we abort anyway) and gives
 * the first one's offset in the signature and in the buffer. */
static void bcast_fail(const layout_t *l, const unsigned char *buf, size_t count)
{
    size_t wrong = 0, first = SIZE_MAX, first_buf = 0, pos = 0;
    for (size_t e = 0; e < count; e++)
        for (int k = 0; k < l->nblocks; k++)
            for (int j = 0; j < l->blocks[k].len; j++, pos++) {
                size_t at = e * (size_t)l->extent + (size_t)l->blocks[k].disp + (size_t)j;
                if (buf[at] != ref[pos] && wrong++ == 0) {
                    first = pos;
                    first_buf = at;
                }
            }
    if (wrong)
        die("FAILED %s: %zu of %zu received bytes wrong, first wrong byte at offset %zu of the "
            "message (buffer offset %zu): expected 0x%02x, got 0x%02x%s",
            current, wrong, pos, first, first_buf, ref[first], buf[first_buf],
            buf[first_buf] == (unsigned char)~ref[first] ? " (never written)" : "");
    die("FAILED %s: data mismatch that a second look does not find (data changing under the check?)",
        current);
}

static void run_bcast(const plan_t *p)
{
    const slot_t *s = p->slot;
    const layout_t *l = &layouts[layout_of(p, s->rank)];
    size_t count = p->bytes / (size_t)l->sig, span = count * (size_t)l->extent;
    uint64_t h = mix64(seed ^ (p->index * 0x2545f4914f6cdd1dull) ^ ((uint64_t)wrank << 48));
    unsigned char *buf = arena + GUARD + h % MISALIGN;
    unsigned char sentinel = (unsigned char)(h >> 8);
    int is_root = s->rank == p->root;

    pattern_fill(ref, p->bytes, mix64(seed) ^ p->index * 0x9e3779b97f4a7c15ull ^
                                    (uint64_t)s->wranks[p->root] << 56);
    memset(buf - GUARD, sentinel, span + 2 * GUARD);
    /* the root: its message; receivers: the complement of what must arrive */
    scatter(buf, l, count, ref, !is_root);
    int rc = MPI_Bcast(buf, (int)count, l->type, p->root, s->comm);
    if (rc != MPI_SUCCESS)
        die("FAILED %s: MPI_Bcast returned %d", current, rc);
    if (p->corrupt == CORRUPT_DATA && !is_root)
        buf[sig_to_buf(l, p->bytes / 2)] ^= 0x10;
    else if (p->corrupt == CORRUPT_GUARD && !is_root)
        buf[span] ^= 0x01;

    /* 1. the data: every byte of the signature (root: still what it sent) */
    int bad = 0;
    if (l->contiguous)
        bad = memcmp(buf, ref, p->bytes) != 0;
    else
        for (size_t e = 0, pos = 0; e < count && !bad; e++)
            for (const block_t *b = l->blocks; b < l->blocks + l->nblocks; b++) {
                bad |= memcmp(buf + e * (size_t)l->extent + b->disp, ref + pos, (size_t)b->len) != 0;
                pos += (size_t)b->len;
            }
    if (bad)
        bcast_fail(l, buf, count);
    /* 2. the gaps between the blocks and the guards around the buffer */
    for (size_t e = 0; e < count; e++)
        for (int g = 0; g < l->ngaps; g++)
            for (int j = 0; j < l->gaps[g].len; j++) {
                size_t at = e * (size_t)l->extent + (size_t)l->gaps[g].off + (size_t)j;
                if (buf[at] != sentinel)
                    die("FAILED %s: byte outside the received data written: gap of the datatype at "
                        "buffer offset %zu: expected sentinel 0x%02x, got 0x%02x",
                        current, at, sentinel, buf[at]);
            }
    memset(guard_ref, sentinel, GUARD);
    if (memcmp(buf - GUARD, guard_ref, GUARD) || memcmp(buf + span, guard_ref, GUARD))
        for (size_t j = 0; j < GUARD; j++) {
            if (buf[span + j] != sentinel)
                die("FAILED %s: byte outside the received data written: %zu bytes past the end "
                    "(buffer offset %zu): expected sentinel 0x%02x, got 0x%02x",
                    current, j + 1, span + j, sentinel, buf[span + j]);
            if (buf[-1 - (ptrdiff_t)j] != sentinel)
                die("FAILED %s: byte outside the received data written: %zu bytes before the "
                    "buffer: expected sentinel 0x%02x, got 0x%02x",
                    current, j + 1, sentinel, buf[-1 - (ptrdiff_t)j]);
        }
    if (!is_root)
        bytes_checked += p->bytes;
}

static void run_barrier(const plan_t *p)
{
    const slot_t *s = p->slot;
    uint64_t mark = p->index + 1;
    /* --corrupt barrier: the last member marks its entry only after leaving */
    int late = p->corrupt == CORRUPT_BARRIER && s->rank == s->size - 1;
    /* release: our entry mark is visible before we enter; pairs with the
     * acquire below on the members leaving. The barrier in between must carry
     * the ordering from every entry to every exit: that is what is tested. */
    if (arrived && !late)
        atomic_store_explicit(&arrived[wrank * 8], mark, memory_order_release);
    int rc = MPI_Barrier(s->comm);
    if (rc != MPI_SUCCESS)
        die("FAILED %s: MPI_Barrier returned %d", current, rc);
    if (late) {
        usleep(500000);
        atomic_store_explicit(&arrived[wrank * 8], mark, memory_order_release);
    }
    if (arrived)
        for (int m = 0; m < s->size; m++) {
            uint64_t got = atomic_load_explicit(&arrived[s->wranks[m] * 8], memory_order_acquire);
            if (got < mark)
                die("FAILED %s: left the barrier before member %d (world rank %d) entered it "
                    "(its last entry: call %lld)", current, m, s->wranks[m], (long long)got - 1);
        }
}

/* One communicator operation: create a shape of a random pool member, or free
 * a random member other than world. */
static void comm_op(rng_t *r, uint64_t index)
{
    uint64_t what = rng_next(r), which = rng_next(r), sh = rng_next(r), key = rng_next(r);
    int create = npool < 2 || (npool < POOL_MAX && what % 2);
    snprintf(current, sizeof current, "call %llu (seed %llu): communicator %s (pool of %d)",
             (unsigned long long)index, (unsigned long long)seed, create ? "create" : "free", npool);
    if (create)
        pool_create((int)(which % (uint64_t)npool), (enum shape)(sh % NSHAPES), key);
    else
        pool_free(1 + (int)(which % (uint64_t)(npool - 1)));
}

/* ---- options -------------------------------------------------------------- */

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    return *end ? 0 : (size_t)v;
}

static int parse_ull(const char *s, unsigned long long *out)
{
    char *end;
    if (!*s || *s == '-')
        return -1;
    *out = strtoull(s, &end, 0);
    return *end ? -1 : 0;
}

static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

static const char usage[] =
    "usage: soak [--calls N] [--seed N|random] [--max-size S (1..1g, suffix k/m)] "
    "[--watchdog SEC] [--min-share PCT] [--corrupt CALL[:data|guard|barrier]]";

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    unsigned long long ncalls = 10000, wd = 60, min_share = 50, corrupt_at = 0, v = 0;
    int seed_random = 0, bad_args = 0;
    enum corrupt corrupt_what = CORRUPT_NONE;
    const char *corrupt_arg = NULL;
    seed = 1;
    max_size = 8u << 20;
    for (int i = 1; i < argc && !bad_args; i++) {
        const char *o = argv[i], *val = NULL;
        static const char *const with_value[] = {"--calls", "--seed", "--max-size", "--watchdog",
                                                 "--min-share", "--corrupt"};
        size_t ol = strcspn(o, "=");
        int known = -1;
        for (int k = 0; k < (int)(sizeof with_value / sizeof *with_value); k++)
            if (strlen(with_value[k]) == ol && !strncmp(o, with_value[k], ol))
                known = k;
        if (known < 0) {
            bad_args = 1;
            break;
        }
        val = o[ol] == '=' ? o + ol + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) {
            bad_args = 1;
            break;
        }
        switch (known) {
        case 0: bad_args = parse_ull(val, &ncalls) || ncalls == 0; break;
        case 1:
            if (!strcmp(val, "random"))
                seed_random = 1;
            else
                bad_args = parse_ull(val, &v), seed = v;
            break;
        case 2: max_size = parse_size(val); break;
        case 3: bad_args = parse_ull(val, &wd) || wd == 0 || wd > 86400; break;
        case 4: bad_args = parse_ull(val, &min_share) || min_share > 100; break;
        default: {
            char *end;
            corrupt_arg = val;
            corrupt_at = strtoull(val, &end, 10);
            corrupt_what = !*end || !strcmp(end, ":data") ? CORRUPT_DATA
                         : !strcmp(end, ":guard")         ? CORRUPT_GUARD
                         : !strcmp(end, ":barrier")       ? CORRUPT_BARRIER
                                                          : CORRUPT_NONE;
            bad_args = end == val || corrupt_what == CORRUPT_NONE;
        }
        }
    }
    if (bad_args || max_size == 0 || max_size > (1u << 30)) {
        if (wrank == 0)
            fprintf(stderr, "%s\n", usage);
        MPI_Finalize();
        return 2;
    }
    if (seed_random) {
        /* rank 0 picks, everyone takes it (before the counters are read) */
        uint64_t s = mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
        MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        seed = s % 1000000000000ull;
    }
    /* the replay command: the NUMACOLL_* settings in force, then the options */
    int n = 0;
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "NUMACOLL_", 9) && n >= 0 && (size_t)n < sizeof replay)
            n += snprintf(replay + n, sizeof replay - (size_t)n, "%s ", *e);
    if (n >= 0 && (size_t)n < sizeof replay)
        snprintf(replay + n, sizeof replay - (size_t)n,
                 "mpiexec -n %d %s --calls %llu --seed %llu --max-size %zu --watchdog %llu%s%s",
                 wsize, argv[0], ncalls, (unsigned long long)seed, max_size, wd,
                 corrupt_arg ? " --corrupt " : "", corrupt_arg ? corrupt_arg : "");
    uint64_t smin, smax;
    MPI_Allreduce(&seed, &smin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&seed, &smax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (smin != smax)
        die("FAILED: the ranks were given different seeds (%llu .. %llu)", (unsigned long long)smin,
            (unsigned long long)smax);
    if (wrank == 0) {
        printf("soak: p=%d seed %llu: %llu calls, sizes up to %zu bytes%s\n", wsize,
               (unsigned long long)seed, ncalls, max_size,
               corrupt_arg ? ", --corrupt (this run must fail)" : "");
        fflush(stdout);
    }

    layouts_init();
    /* (max_size rounded up to an element) x the sparsest layout, misaligned, guarded */
    arena_size = (size_t)((double)(max_size + 64) * max_expansion) + 2 * GUARD + MISALIGN + 64;
    arena = malloc(arena_size);
    ref = malloc(max_size + 64);
    if (!arena || !ref)
        die("out of memory for %zu + %zu bytes of buffers", arena_size, max_size + 64);

    /* The barrier's entry counters, in a window all ranks map; only when the
     * whole job shares one node (otherwise the barrier is run but not checked). */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nsize, all_one_node;
    MPI_Comm_size(node, &nsize);
    int one_node = nsize == wsize;
    MPI_Allreduce(&one_node, &all_one_node, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_one_node) {
        MPI_Aint bytes = wrank == 0 ? (MPI_Aint)wsize * 64 : 0, qsize;
        int disp;
        void *base;
        MPI_Win_allocate_shared(bytes, 64, MPI_INFO_NULL, node, &base, &arrived_win);
        MPI_Win_shared_query(arrived_win, 0, &qsize, &disp, &base);
        arrived = base;
        if (wrank == 0)
            memset(base, 0, (size_t)wsize * 64);
    } else if (wrank == 0)
        printf("soak: job spans several nodes: barriers run unchecked\n");
    if (!arrived && corrupt_what == CORRUPT_BARRIER)
        die("--corrupt barrier needs a job on one node");
    MPI_Barrier(node);

    slot_set(&pool[npool++], MPI_COMM_WORLD, "world");
    pool_create(0, SH_DUP, 0);
    pool_create(0, SH_ODD_EVEN, 0);
    pool_create(0, SH_REVERSED, 0);

    numacoll_mpi_stats_t st0, st1;
    numacoll_mpi_stats(&st0);
    unsigned weights[NCOLLS];
    for (int i = 0; i < NCOLLS; i++)
        weights[i] = colls[i].weight;
    signal(SIGALRM, watchdog);
    double t0 = MPI_Wtime();
    rng_t rng;
    rng_seed(&rng, seed);
    int corrupt_done = corrupt_what == CORRUPT_NONE;
    /* where the time goes (this rank): communicator operations, calls numacoll
     * took (with their teams' set-up), calls the MPI library took; both with
     * the filling and checking of the buffers */
    double t_comm = 0, t_nc = 0, t_pm = 0;
    for (unsigned long long i = 0; i < ncalls; i++) {
        alarm((unsigned)wd);
        if (rng_below(&rng, COMM_OP_EVERY) == 0) {
            double ta = MPI_Wtime();
            comm_op(&rng, i);
            t_comm += MPI_Wtime() - ta;
        }
        plan_t p;
        draw_plan(&rng, i, &p, NCOLLS, weights);
        coll_calls[p.coll]++;
        if (colls[p.coll].has_data)
            seq_bytes += p.bytes;
        /* the call to spoil: chosen from global facts, the same on every rank */
        if (!corrupt_done && i >= corrupt_at && p.slot->full &&
            (corrupt_what == CORRUPT_BARRIER ? p.coll == 1 : p.coll == 0 && p.bytes > 0)) {
            p.corrupt = corrupt_what;
            corrupt_done = 1;
        }
        if (p.slot->comm == MPI_COMM_NULL)
            continue;   /* not in any piece of this member: sit the call out */
        describe(&p);
        numacoll_mpi_stats_t sb, sa;
        numacoll_mpi_stats(&sb);
        double tb = MPI_Wtime();
        colls[p.coll].run(&p);
        double dt = MPI_Wtime() - tb;
        numacoll_mpi_stats(&sa);
        int id = colls[p.coll].stats_id;
        if (sa.calls_numacoll[id] != sb.calls_numacoll[id])
            t_nc += dt;
        else
            t_pm += dt;
        rank_calls[p.coll]++;
    }
    alarm(0);
    double t1 = MPI_Wtime();
    numacoll_mpi_stats(&st1);
    if (corrupt_what != CORRUPT_NONE)
        die("FAILED: --corrupt %s: %s, yet the run passed", corrupt_arg,
            corrupt_done ? "a call was spoiled" : "no call fitted");

    /* Same sequence everywhere: the generator's final state agrees. */
    uint64_t h = mix64(rng.s[0] ^ mix64(rng.s[1] ^ mix64(rng.s[2] ^ mix64(rng.s[3])))), hmin, hmax;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (hmin != hmax)
        die("FAILED: the ranks ran different sequences (generator state differs)");

    /* numacoll's counters: every call of ours was counted once, by numacoll or
     * by the MPI library. Then the whole job's share. */
    enum { NC, PM, NCB, RK, NSTAT };
    unsigned long long mine[NCOLLS][NSTAT], all[NCOLLS][NSTAT];
    for (int i = 0; i < NCOLLS; i++) {
        int id = colls[i].stats_id;
        mine[i][NC] = st1.calls_numacoll[id] - st0.calls_numacoll[id];
        mine[i][PM] = st1.calls_pmpi[id] - st0.calls_pmpi[id];
        mine[i][NCB] = st1.bytes_numacoll[id] - st0.bytes_numacoll[id];
        mine[i][RK] = rank_calls[i];
        if (mine[i][NC] + mine[i][PM] != rank_calls[i])
            die("FAILED: numacoll stats count %llu + %llu %s calls, this rank made %llu",
                mine[i][NC], mine[i][PM], colls[i].name, rank_calls[i]);
    }
    MPI_Allreduce(mine, all, NCOLLS * NSTAT, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    while (npool > 1)
        pool_free(npool - 1);
    unsigned long long loc[3] = {bytes_checked, pieces_freed, pieces_set_up}, glob[3];
    MPI_Allreduce(loc, glob, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    int all_off = env_is("NUMACOLL_DISABLE", "1");
    unsigned long long nc_sum = 0, rk_sum = 0;
    char per[512], share[512];
    int o = 0, q = 0;
    for (int i = 0; i < NCOLLS; i++) {
        int off = all_off || env_is(colls[i].enable_env, "0");
        if (off && all[i][NC])
            die("FAILED: numacoll handled %llu %s calls although switched off", all[i][NC],
                colls[i].name);
        if (!off && wsize > 1 && all[i][NC] == 0 && all[i][RK] > 0)
            die("FAILED: numacoll handled none of %llu %s calls (is the library linked in "
                "front of MPI?)", all[i][RK], colls[i].name);
        if (!off) {
            nc_sum += all[i][NC];
            rk_sum += all[i][RK];
        }
        o += snprintf(per + o, sizeof per - (size_t)o, "%s%s %llu (%llu rank calls)",
                      i ? ", " : "", colls[i].name, coll_calls[i], all[i][RK]);
        q += snprintf(share + q, sizeof share - (size_t)q, "%s%s %llu/%llu = %.1f%%%s",
                      i ? ", " : "", colls[i].name, all[i][NC], all[i][RK],
                      all[i][RK] ? 100.0 * (double)all[i][NC] / (double)all[i][RK] : 0.0,
                      off ? " (switched off)" : "");
    }
    double pct = rk_sum ? 100.0 * (double)nc_sum / (double)rk_sum : 100.0;
    if (wrank == 0) {
        printf("soak: p=%d seed %llu: %llu calls in %.1f s: %s\n", wsize,
               (unsigned long long)seed, ncalls, t1 - t0, per);
        printf("soak: bytes: %.3f GB broadcast by the sequence, %.3f GB received and checked, "
               "0 wrong bytes\n", (double)seq_bytes / 1e9, (double)glob[0] / 1e9);
        printf("soak: communicators: %d created, %d freed (pool of up to %d), %llu pieces, "
               "%llu set up by numacoll\n", comms_created, comms_freed, POOL_MAX, glob[1], glob[2]);
        printf("soak: numacoll handled %.1f%% of the rank calls (%s; %.3f GB), the MPI library "
               "the rest\n", pct, share, (double)all[0][NCB] / 1e9);
        printf("soak: time on rank 0: %.1f s communicator create/free, %.1f s calls numacoll took, "
               "%.1f s calls the MPI library took (with filling and checking)\n", t_comm, t_nc,
               t_pm);
        fflush(stdout);
    }
    if (rk_sum && pct < (double)min_share)
        die("FAILED: numacoll handled %.1f%% of the calls, below --min-share %llu%%", pct,
            min_share);
    if (comms_created != comms_freed)
        die("FAILED: %d communicators created, %d freed", comms_created, comms_freed);
    if (wrank == 0)
        printf("soak: PASSED\n");
    if (arrived)
        MPI_Win_free(&arrived_win);
    MPI_Comm_free(&node);
    free(pool[0].wranks);
    layouts_fini();
    free(arena);
    free(ref);
    MPI_Finalize();
    return 0;
}
