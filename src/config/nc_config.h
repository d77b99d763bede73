/*
 * Every tunable of numacoll, declared once.
 *
 * The table below gives each tunable its environment variable
 * (NUMACOLL_<NAME>), type, default, range, unit and one sentence of doc.
 * Parsing, range checks, numacoll_param_*(), numacoll-info --params and
 * docs/tunables.md are all generated from it. A team snapshots the values
 * when it is created.
 */
#ifndef NC_CONFIG_H
#define NC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum { NC_PT_SIZE, NC_PT_INT, NC_PT_TREE, NC_PT_ENUM } nc_param_type_t;

/* Barrier rows live in their own list so the barrier module owns them. */
#define NC_PARAM_TABLE_BARRIER(X)                                                              \
    X(BARRIER_ALG, NC_PT_ENUM, "auto", 0, 0,                                                   \
      "rearranged|padded|dissemination|central|auto", "",                                       \
      "Barrier: tree with children's arrival bytes packed in the parent's line (rearranged), "  \
      "tree with one line per flag (padded), dissemination, a central counter, or auto "        \
      "(dissemination; central when the team has more members than CPUs).")                   \
    X(BARRIER_TREE, NC_PT_TREE, "kary:8", 0, 0, NULL, "",                                       \
      "Gather tree of the rearranged and padded barriers: kary:K, knomial:K, flat or chain.")  \
    X(BARRIER_NUMA, NC_PT_INT, "1", 0, 1, NULL, "bool",                                         \
      "1: tree barriers gather each NUMA node to its leader, then the leaders; 0: one tree.")

/* X(NAME, type, default, min, max, choices, unit, doc) */
#define NC_PARAM_TABLE(X)                                                                      \
    X(BCAST_FRAG_SIZE, NC_PT_SIZE, "8192", 64, 64 << 20, NULL, "bytes",                        \
      "Fragment size f: bytes carried by one shared buffer of the broadcast queue.")            \
    X(BCAST_QUEUE_LEN, NC_PT_INT, "64", 1, 4096, NULL, "buffers",                              \
      "Queue length s: fragment buffers per member; s*f bytes are in flight per broadcast.")    \
    X(BCAST_SETS, NC_PT_INT, "1", 1, 4096, NULL, "sets",                                       \
      "q: the queue is split into q sets filled in turn; must divide the queue length.")        \
    X(BCAST_TREE, NC_PT_TREE, "kary:2", 0, 0, NULL, "",                                         \
      "Notification tree: kary:K, knomial:K, flat or chain (binary = kary:2).")                 \
    X(BCAST_INLINE_MAX, NC_PT_SIZE, "4080", 0, 4080, NULL, "bytes",                             \
      "Messages up to this size travel in the call's announcement slot (up to 48 bytes in its " \
      "first line), larger ones through the queue.")                                           \
    X(BCAST_MODEL_TW_NS, NC_PT_INT, "100", 0, 1000000, NULL, "ns",                            \
      "Fragments per call: the time model's t_w (one fragment notification). A broadcast of m "  \
      "bytes through the queue is cut into the k fragments (at most NUMACOLL_BCAST_FRAG_SIZE "   \
      "each) that minimise k t_w + (m/k) t, about sqrt(m t / t_w) of them; 0: every fragment "   \
      "is NUMACOLL_BCAST_FRAG_SIZE. numacoll-tune measures it.")                               \
    X(BCAST_MODEL_T_PS, NC_PT_INT, "100", 1, 1000000000, NULL, "ps/byte",                       \
      "Fragments per call: the time model's t, the time per byte one member copies.")          \
    X(SHM_NT, NC_PT_ENUM, "auto", 0, 0, "auto|on|off", "",                                     \
      "Bulk copies into the segment (broadcast fragments, gather-family fragments, large "      \
      "reduction rounds) with non-temporal stores (to memory, past the writer's cache), so "    \
      "readers that share no cache with the writer stream them from memory: on, off, or auto "  \
      "(on when the members do not all share a cache: NUMACOLL_CACHE_PROBE, and with more "    \
      "members than CPUs, two or more, where that probe would measure, e.g. in a virtual "     \
      "machine; x86-64 only).")                                                                \
    X(CACHE_PROBE, NC_PT_ENUM, "auto", 0, 0, "auto|on|off", "",                                \
      "Whether the members share a cache (what NUMACOLL_SHM_NT=auto and the reduce's CMA rule " \
      "go by): on (measured at team creation: neighbouring members pass a cache line back and " \
      "forth; with more members than CPUs, two threads of member 0 on neighbouring CPUs), off " \
      "(hwloc's caches), or auto (measured in a virtual machine, whose caches hwloc sees as "    \
      "the hypervisor describes them, and where hwloc cannot tell; hwloc on bare metal or with " \
      "a given topology; with more members than CPUs not measured, and copies streamed where "  \
      "it would measure: NUMACOLL_SHM_NT).")                                                   \
    X(CACHE_SHARED_NS, NC_PT_INT, "100", 1, 1000000000, NULL, "ns",                             \
      "NUMACOLL_CACHE_PROBE: members share a cache when the slowest pair of neighbours hands a " \
      "line over (one way, from the fastest of 8 batches of 8 round trips) in less than this.") \
    X(SEG_LAYOUT, NC_PT_ENUM, "compact", 0, 0, "paper|compact", "",                            \
      "Control blocks: paper = one page each (as published), compact = one cache line each.")   \
    X(SHM_LIMIT, NC_PT_SIZE, "0", 0, INT64_C(1) << 50, NULL, "bytes",                          \
      "Node-wide cap on the shared memory of all of a job's communicators on a node; past it a " \
      "new communicator gets a shorter queue or goes to the MPI library. 0: a quarter of /dev/shm.") \
    X(SPIN_COUNT, NC_PT_INT, "2000", 0, 1000000000, NULL, "iterations",                        \
      "Pause-spins before a waiting member yields the CPU; 0 is used when oversubscribed.")     \
    X(VERBOSE, NC_PT_INT, "0", 0, 3, NULL, "level",                                             \
      "1: one report per team (layout, leaders, placement); 2: per member; 3: debug.")          \
    /* ---- transports (shm/nc_cma.c, coll/nc_bcast.c) ---- */                              \
    X(TRANSPORT, NC_PT_ENUM, "auto", 0, 0, "auto|shm|cma", "",                                 \
      "Large broadcasts, gather-family blocks and reductions: auto (the cost model picks, per " \
      "size and collective, the copy through the segment or CMA; reductions: "                  \
      "NUMACOLL_REDUCE_CMA_MIN, NUMACOLL_ALLREDUCE_CMA_MIN), shm (always the segment) or cma "  \
      "(CMA above the inline size, for reductions above the one-hand-off size, whenever the "   \
      "team can use it).")                                                                      \
    X(CMA_MIN, NC_PT_SIZE, "0", 0, INT64_C(1) << 50, NULL, "bytes",                            \
      "With NUMACOLL_TRANSPORT=auto, broadcasts of at least this many bytes use CMA; 0: the "   \
      "cost model's switch point (numacoll-info prints it).")                                   \
    X(CMA_COOP, NC_PT_INT, "1", 0, 1, NULL, "bool",                                             \
      "1: in a CMA broadcast the root writes a 1/p share into every reader while the readers "  \
      "read the rest, so all cores copy (gather, scatter: both ends of a block share its "      \
      "copy); 0: the readers read everything.")                                                 \
    X(COST_SHM_NS, NC_PT_INT, "8500", 0, 1000000000, NULL, "ns",                               \
      "Transport cost model (model/nc_model.h): fixed cost of a broadcast through the segment; " \
      "numacoll-tune measures it.")                                                             \
    X(COST_SHM_PS, NC_PT_INT, "130", 1, 1000000000, NULL, "ps/byte",                            \
      "Transport cost model: time per byte one member copies through the segment.")            \
    X(COST_CMA_NS, NC_PT_INT, "3500", 0, 1000000000, NULL, "ns",                               \
      "Transport cost model: fixed cost of a CMA broadcast (hand-offs and system calls).")      \
    X(COST_CMA_PS, NC_PT_INT, "200", 1, 1000000000, NULL, "ps/byte",                            \
      "Transport cost model: time per byte of one process_vm_readv copy.")                     \
    X(TEST_CMA_FAIL, NC_PT_INT, "0", 0, 1, NULL, "bool",                                        \
      "Test only: the CMA probe at team creation fails as if the kernel refused it.")           \
    /* ---- barrier (coll/nc_barrier*.c) ---- */                                              \
    NC_PARAM_TABLE_BARRIER(X)                                                                   \
    /* ---- reductions (coll/nc_reduce.c) ---- */                                             \
    X(REDUCE_FRAG_SIZE, NC_PT_SIZE, "262144", 256, 16 << 20, NULL, "bytes",                     \
      "Reductions: bytes of one slot; larger messages go in rounds of this size, each round "   \
      "reduced by all members at once, member i its i-th slice.")                               \
    X(REDUCE_SLOTS, NC_PT_INT, "4", 2, 64, NULL, "slots",                                       \
      "Reductions: slots per member; a member runs at most this many rounds minus one ahead of " \
      "the slowest.")                                                                            \
    X(REDUCE_SMALL_MAX, NC_PT_SIZE, "4096", 0, 16 << 20, NULL, "bytes",                         \
      "Reductions up to this size (and the slot size) take one hand-off: every member (allreduce) " \
      "or the root (reduce) combines all contributions; larger ones are reduce-scattered.")     \
    X(REDUCE_PACK_MAX, NC_PT_SIZE, "67108864", 4096, INT64_C(1) << 40, NULL, "bytes",             \
      "MPI_Reduce, MPI_Allreduce on one node: a call of more bytes goes in rounds of at most "  \
      "this many (whole elements), each packed from and unpacked into a datatype that is not "  \
      "contiguous, so its scratch memory is about twice this, not the whole message (unless "  \
      "one element of the datatype is larger than this).")                                     \
    X(REDUCE_CMA_MIN, NC_PT_SIZE, "0", 0, INT64_C(1) << 50, NULL, "bytes",                       \
      "MPI_Reduce (numacoll_reduce), NUMACOLL_TRANSPORT=auto: calls of at least this many "    \
      "bytes (and above the one-hand-off size, min(NUMACOLL_REDUCE_SMALL_MAX, "                \
      "NUMACOLL_REDUCE_FRAG_SIZE)) read the contributions in place by CMA, each member its "   \
      "slice, instead of through the slots; 0: from 128 KiB at p >= 3 (p = 2: never), when "   \
      "the members do not all share a cache (NUMACOLL_CACHE_PROBE) and sit on one NUMA "       \
      "node; numacoll-tune measures it (docs/reduce.md).")                                     \
    X(ALLREDUCE_CMA_MIN, NC_PT_SIZE, "0", 0, INT64_C(1) << 50, NULL, "bytes",                    \
      "MPI_Allreduce (numacoll_allreduce), NUMACOLL_TRANSPORT=auto: calls of at least this "   \
      "many bytes (and above the one-hand-off size) go by CMA, as NUMACOLL_REDUCE_CMA_MIN; "   \
      "0: never; numacoll-tune measures it (docs/reduce.md).")                                 \
    X(REDUCE_NUMA, NC_PT_INT, "1", 0, 1, NULL, "bool",                                          \
      "1: on a node with several NUMA nodes, reductions combine each NUMA node's members first, " \
      "then the NUMA nodes (docs/reduce.md); 0: one fold in rank order, the same bits on any node.") \
    X(REDUCE_LINES, NC_PT_INT, "1", 0, 1, NULL, "bool",                                         \
      "1: in a team of up to 4, a reduction of at most 64 / p - 8 bytes (24 at p = 2) in "     \
      "elements of up to 8 bytes goes through one cache line all members write and poll "      \
      "(docs/reduce.md, \"Line calls\"); 0: through the members' own slots, as larger ones.")   \
    /* ---- gather family (coll/nc_gather.c) ---- */                                         \
    X(GATHER_FRAG_SIZE, NC_PT_SIZE, "65536", 4096, 16 << 20, NULL, "bytes",                     \
      "Gather family: bytes of one fragment slot (rounded up to whole pages); a block larger "  \
      "than the inline size goes through its sender's slots in fragments of this size.")        \
    X(GATHER_SLOTS, NC_PT_INT, "4", 2, 32, NULL, "slots",                                       \
      "Gather family: fragment slots per member; a sender writes this many fragments ahead of " \
      "its readers.")                                                                           \
    X(GATHER_INLINE_MAX, NC_PT_SIZE, "512", 0, 4064, NULL, "bytes",                             \
      "Gather family: blocks up to this size travel inside the line(s) that announce them; "    \
      "each member keeps 4 x p such entries.")                                                  \
    X(GATHER_CMA_MIN, NC_PT_SIZE, "0", 0, INT64_C(1) << 50, NULL, "bytes",                     \
      "Gather family, NUMACOLL_TRANSPORT=auto: blocks of at least this many bytes go by CMA "    \
      "(single copy); 0: the cost model's switch point per collective (numacoll-info prints "  \
      "it), for allgather and alltoall never when two members on one NUMA node do not share a " \
      "cache.")                                                                                 \
    X(NUMA_FORWARD, NC_PT_ENUM, "auto", 0, 0, "auto|on|off", "",                               \
      "On a node with several NUMA nodes, data that every member of a NUMA node needs from "    \
      "another (allgather(v) blocks of at least NUMACOLL_ALLGATHER_NUMA_MIN bytes, the "         \
      "results of an allreduce above NUMACOLL_REDUCE_SMALL_MAX through the slots, two-level "  \
      "with NUMACOLL_REDUCE_NUMA=1) enters that NUMA node once, read by one member there "     \
      "and forwarded to the others (docs/gather.md, docs/reduce.md): on (into every NUMA node " \
      "with two or more members), auto (into a node of m members when (m - 1)(r - 1) > 1, r "  \
      "the remote / local NUMA distance from hwloc, 2 when unknown), off (every member reads " \
      "everything from where it is made).")                                                    \
    X(NUMA_RATIO, NC_PT_INT, "0", 0, 1000000, NULL, "per mille",                               \
      "The remote / local NUMA copy-time ratio r of NUMACOLL_NUMA_FORWARD=auto, in thousandths " \
      "(2100: remote copies take 2.1 times as long); numacoll-tune measures it on a node with " \
      "several NUMA nodes; 0: hwloc's NUMA distances (the firmware's SLIT), 2 when unknown.")   \
    X(ALLGATHER_NUMA_MIN, NC_PT_SIZE, "16384", 0, INT64_C(1) << 50, NULL, "bytes",              \
      "Allgather(v) on several NUMA nodes (NUMACOLL_NUMA_FORWARD): blocks of at least this "  \
      "many bytes (and more than NUMACOLL_GATHER_INLINE_MAX, not by CMA) may go two-level; "    \
      "smaller ones are read from their sender by every member.")                              \
    /* ---- MPI layer (src/mpi) ---- */                                                       \
    X(DISABLE, NC_PT_INT, "0", 0, 1, NULL, "bool",                                              \
      "1: every collective goes to the MPI library (PMPI); numacoll stays out of the way.")      \
    X(BCAST_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                         \
      "0: MPI_Bcast goes to the MPI library.")                                                  \
    X(BARRIER_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                       \
      "0: MPI_Barrier goes to the MPI library.")                                                \
    X(REDUCE_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                        \
      "0: MPI_Reduce goes to the MPI library.")                                                 \
    X(ALLREDUCE_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                     \
      "0: MPI_Allreduce goes to the MPI library.")                                              \
    X(GATHER_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool", "0: MPI_Gather goes to the MPI library.") \
    X(GATHERV_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                       \
      "0: MPI_Gatherv goes to the MPI library.")                                                \
    X(SCATTER_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                       \
      "0: MPI_Scatter goes to the MPI library.")                                                \
    X(SCATTERV_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                      \
      "0: MPI_Scatterv goes to the MPI library.")                                               \
    X(ALLGATHER_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                     \
      "0: MPI_Allgather goes to the MPI library.")                                              \
    X(ALLGATHERV_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                    \
      "0: MPI_Allgatherv goes to the MPI library.")                                             \
    X(ALLTOALL_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                      \
      "0: MPI_Alltoall goes to the MPI library.")                                               \
    X(ALLTOALLV_ENABLE, NC_PT_INT, "1", 0, 1, NULL, "bool",                                     \
      "0: MPI_Alltoallv goes to the MPI library.")                                              \
    X(COMM_MIN_CALLS, NC_PT_INT, "0", 0, 1000000, NULL, "calls",                                \
      "Collective calls on a communicator before numacoll sets up its segment for it.")         \
    X(TEAM_CACHE, NC_PT_INT, "4", 0, 16, NULL, "teams",                                      \
      "Teams of freed communicators each process keeps for a later communicator of the same "   \
      "processes in the same order (no new segment); 0: every communicator makes its own.")     \
    X(LEADER_WAIT, NC_PT_ENUM, "auto", 0, 0, "auto|block|poll", "",                           \
      "Jobs on several nodes: how a node leader waits in its calls to the MPI library across "  \
      "nodes: block (the MPI library's blocking collective), poll (its nonblocking form, "      \
      "tested with a yield between tests, so an MPI library that spins in a blocking call "    \
      "does not hold a CPU that other ranks of the node need), or auto (poll when a node has "  \
      "more of the job's ranks than CPUs). A communicator polls if any of its ranks asks for "  \
      "poll or, with auto, sees its node oversubscribed.")                                     \
    X(STATS, NC_PT_INT, "0", 0, 1, NULL, "bool",                                                \
      "1: at MPI_Finalize one line per node: calls and bytes handled by numacoll vs PMPI.")     \
    X(TEST_VIRTUAL_NODES, NC_PT_INT, "1", 1, 1024, NULL, "nodes",                               \
      "Test only: split each real node into this many virtual nodes (blocks of ranks).")         \
    X(TEST_DOMAINS, NC_PT_INT, "0", 0, 1024, NULL, "domains",                                   \
      "Test only: the collectives' NUMA plan puts member k on virtual NUMA node k % N (the "     \
      "reductions' and allgather's two levels without NUMA hardware); 0: the real NUMA nodes.")

enum {
#define NC_PARAM_ENUM_(name, ...) NC_P_##name,
    NC_PARAM_TABLE(NC_PARAM_ENUM_)
#undef NC_PARAM_ENUM_
    NC_PARAM_COUNT
};

/* NC_SRC_ENV_BAD: the default, because the environment's value is not valid
 * (the configuration is then in error: no team is made until it is fixed). */
typedef enum {
    NC_SRC_DEFAULT = 0,
    NC_SRC_ENV,
    NC_SRC_TUNE_FILE,
    NC_SRC_API,
    NC_SRC_ENV_BAD
} nc_param_source_t;

typedef struct nc_param_value {
    int64_t num;   /* number; enum index; tree kind */
    int64_t aux;   /* tree degree */
    char text[32]; /* canonical spelling */
    nc_param_source_t source;
} nc_param_value_t;

typedef struct nc_config {
    nc_param_value_t v[NC_PARAM_COUNT];
} nc_config_t;

#define NC_CFG_NUM(cfg, name) ((cfg)->v[NC_P_##name].num)

enum { NC_LAYOUT_PAPER = 0, NC_LAYOUT_COMPACT = 1 };
/* NUMACOLL_TRANSPORT, in the order of its choices. */
enum { NC_TRANSPORT_AUTO = 0, NC_TRANSPORT_SHM = 1, NC_TRANSPORT_CMA = 2 };
enum { NC_SHM_NT_AUTO = 0, NC_SHM_NT_ON = 1, NC_SHM_NT_OFF = 2 };
enum { NC_CACHE_PROBE_AUTO = 0, NC_CACHE_PROBE_ON = 1, NC_CACHE_PROBE_OFF = 2 };
enum { NC_NUMA_FWD_AUTO = 0, NC_NUMA_FWD_ON = 1, NC_NUMA_FWD_OFF = 2 };
enum { NC_LEADER_WAIT_AUTO = 0, NC_LEADER_WAIT_BLOCK = 1, NC_LEADER_WAIT_POLL = 2 };

typedef struct nc_param_desc {
    const char *name; /* without the NUMACOLL_ prefix */
    nc_param_type_t type;
    const char *defval;
    int64_t min, max;
    const char *choices;
    const char *unit;
    const char *doc;
} nc_param_desc_t;

const nc_param_desc_t *nc_param_desc(int index);
int nc_param_lookup(const char *name); /* accepts with or without NUMACOLL_; -1 if unknown */
const char *nc_param_source_name(nc_param_source_t src);
void nc_param_range_text(int index, char *buf, size_t len);
/* The canonical text of value (num, aux) of tunable index: an enum's choice, a
 * tree's spelling, else the number (what nc_param_parse() stores in text). */
void nc_param_value_text(int index, int64_t num, int64_t aux, char *buf, size_t len);

/* Parse text for parameter index into *out; on error fill err and return NUMACOLL_ERR_TUNABLE. */
int nc_param_parse(int index, const char *text, nc_param_value_t *out, char *err, size_t errlen);

/* Checks that involve more than one parameter (e.g. q divides s). */
int nc_config_check(const nc_config_t *cfg, char *err, size_t errlen);

/* The process-wide configuration: defaults, then the environment, then API
 * calls. Says once per process what is wrong with it (a bad value: an error;
 * NUMACOLL_ names that are no tunable: a warning), unless told it was said
 * elsewhere (nc_config_said_elsewhere). */
int nc_config_snapshot(nc_config_t *out);
/* A hash of what nc_config_snapshot() would say now, 1 .. 2^62; 0: nothing. */
uint64_t nc_config_problem(void);
/* Problem h (a hash from nc_config_problem()) is said by another process of
 * the job: nc_config_snapshot() keeps quiet about it (0: speak again). */
void nc_config_said_elsewhere(uint64_t h);
int nc_config_set(const char *name, const char *value, nc_param_source_t src);
int nc_config_global_verbose(void);
/* Forget API/tune-file settings and re-read the environment (tests). */
void nc_config_reload(void);

#endif
