/*
 * The time model of the shared-memory broadcast (Kurnosov & Tokmasheva, sections 5.2-5.3),
 * as code: predicted time, optimal fragment size and queue length, and a fit of the
 * constants from measurements.
 *
 * Symbols: m message bytes; f fragment (buffer) bytes; s buffers per rank; q sets the s
 * buffers are split into (s/q buffers each); b = s*f queue bytes. Constants (seconds):
 * t per byte copied, t_w waiting for one buffer notification (depends on the tree and p),
 * t_wo waiting for a set to be published (shm_op), t_a the atomic decrement of nreaders.
 *
 * The paper's formulas, with ceil() written out (c = t_wo + t_a):
 *   (S1) s = 1:        ceil(m/f) (c + t_w) + 2 m t            no overlap: each fragment is
 *                                                             copied in, then out
 *   (R1) m <= f:       c + t_w + 2 m t                        one fragment, no pipeline
 *   (R2) f < m <= b:   c + f t + ceil(m/f) t_w + m t          pipeline; the whole message
 *                                                             fits, one queue turn; the
 *                                                             second copy hides all but the
 *                                                             first fragment's
 *   (R3) m > b:        ceil(m/b) (c + f t) + ceil(m/f) t_w + m t    the queue turns ceil(m/b)
 *                                                             times and each turn waits for
 *                                                             the last fragment copy
 *   (RQ) q sets:       q ceil(m/b) c + f t + ceil(m/f) t_w + m t    the root fills the next
 *                                                             set while the previous one
 *                                                             drains: f t is paid once, a
 *                                                             set turn (c) per b/q bytes
 * Which applies (the formulas overlap; this is the choice made here and why):
 *   - s = 1 always uses S1 (the paper's t(m)). R3 with s = 1 would charge ceil(m/f) f t for
 *     the first copy instead of m t; S1 follows the paper in counting exactly m bytes for
 *     both copies. S1 equals R1 for m <= f and R3 when f divides m.
 *   - s > 1, q = 1: R1 for m <= f, R2 for f < m <= b, R3 for m > b. R1 is R2 at one
 *     fragment with f t replaced by m t (the only fragment has m bytes); R2 is R3 with
 *     ceil(m/b) = 1, so t is continuous at m = b.
 *   - s > 1, q >= 2: R1 for m <= f, else RQ with the number of set turns counted as
 *     ceil(q m / b) (each set holds b/q bytes). The paper writes q ceil(m/b), an upper bound
 *     that is exact whenever b divides m: all of its examples (Fig. 3c: s = 8, q = 2,
 *     m = 8f = b, two WO/A pairs on the leaf) give the same value. Counting the turns
 *     exactly makes RQ reduce to R2 when the message fits in one set (m <= b/q), instead
 *     of charging q set turns for a message that uses one, while still charging the q
 *     turns that Fig. 3c shows at m = b (R2 would charge one). RQ is not applied to
 *     m <= f: one fragment uses one set (R1).
 * m = 0 costs 0 (nothing moves). Every formula is linear in (t, t_w, t_wo + t_a): see
 * nc_model_terms(), which the time, the optimum and the fit all share.
 */
#ifndef NC_MODEL_H
#define NC_MODEL_H

#include <stddef.h>

#include "numacoll/errors.h"

typedef struct nc_model_params {
    double t;    /* seconds per byte copied */
    double t_w;  /* seconds: wait for one buffer notification */
    double t_wo; /* seconds: wait for a set to be published */
    double t_a;  /* seconds: atomic decrement of nreaders */
} nc_model_params_t;

/* Coefficients of the model at (m, f, s, q): time = x[0] t + x[1] t_w + x[2] (t_wo + t_a).
 * Requires m >= 0, f > 0, s >= 1, 1 <= q <= s (all finite). Returns 0 or NUMACOLL_ERR_INVAL. */
int nc_model_terms(double m, double f, double s, double q, double x[3]);

/* Predicted broadcast time t(m, s, q) in seconds (formula chosen as above); NAN if the
 * arguments are invalid (see nc_model_terms) or mp is NULL. s and q need not be integers
 * (the paper plots s = b/f). */
double nc_model_time(const nc_model_params_t *mp, double m, double f, double s, double q);

/* Optimal fragment and queue for message m and a queue budget of b bytes (q = 1):
 * dt/df = ceil(m/b) t - m t_w / f^2 = 0 gives f* = sqrt(m t_w / (ceil(m/b) t)), rounded UP
 * to a whole number of pages (at least one page); then s* = max(1, floor(b / f)) with the
 * rounded f, so that s* f <= b unless one page already exceeds b.
 * For m <= b this is f* = sqrt(m t_w / t); for m a large multiple of b, f* ~ sqrt(b t_w / t)
 * and s* ~ sqrt(b t / t_w). Requires t > 0, t_w >= 0, m > 0, b > 0, page > 0.
 * Returns 0 or NUMACOLL_ERR_INVAL (also if f* does not fit in size_t). */
int nc_model_optimal(const nc_model_params_t *mp, double m, double b, size_t page,
                     size_t *f_opt, size_t *s_opt);

/* The fragment of one broadcast of m bytes through a queue of s buffers of f
 * bytes (the per-call cut, coll/nc_bcast.c). Within one queue turn the model
 * is R2 with k fragments of m/k bytes: k t_w + (m/k) t + const, least at
 * k* = sqrt(m t / t_w), i.e. fragments of about sqrt(m t_w / t): the best k
 * from floor(k*) - 1 to floor(k*) + 2 (at least 1; k t_w + ceil(m/k) t), at
 * most s of them (more would wrap the queue and wait for the readers within
 * one message; the cap at f still gives m/f > s fragments to a message
 * larger than the queue), fragments rounded up to a cache line, at least
 * NC_MODEL_FRAG_MIN (or the whole message), at most f. tw_bytes = t_w / t
 * (the bytes copied in the time of one notification); tw_bytes <= 0 or not
 * finite: f (fixed fragments). */
#define NC_MODEL_FRAG_MIN ((size_t)1024)
size_t nc_model_call_frag(size_t m, size_t f, size_t s, double tw_bytes);

/* Least-squares fit of the constants from n measurements (m[i], f[i], s[i], q[i], time[i]
 * seconds). The model is linear in t, t_w and c = t_wo + t_a, so this solves a 3-column
 * linear least-squares problem (Householder QR, columns scaled), weighting each row by
 * 1/time[i] so that a 1 % error counts the same at 1 us and at 10 ms.
 * t_wo and t_a always appear as their sum: from broadcast timings alone only c is
 * identifiable. nc_model_fit() puts all of it in t_wo and sets t_a = 0;
 * nc_model_fit_known_ta() takes a separately measured t_a (e.g. timed atomic decrements
 * of a shared counter) and returns t_wo = c - t_a.
 * The measurements must separate the three columns: mix messages below and above f and
 * b, and several f (e.g. all rows with m <= f leave t_w and c confounded).
 * Returns 0, NUMACOLL_ERR_INVAL (n < 3, an invalid row, time <= 0, columns not separable,
 * fitted t <= 0) or NUMACOLL_ERR_NOMEM. Fitted t_w or t_wo may come out slightly negative
 * when the data cannot resolve them; they are returned as fitted, not clamped. */
int nc_model_fit(const double *m, const double *f, const double *s, const double *q,
                 const double *time, int n, nc_model_params_t *out);
int nc_model_fit_known_ta(const double *m, const double *f, const double *s, const double *q,
                          const double *time, int n, double t_a, nc_model_params_t *out);

/*
 * The transport choice of a large broadcast (coll/nc_bcast.c): copy through the
 * segment (shm) or single copies between the members' buffers (CMA, cooperative
 * or not). Each is a line in m, with constants measured on the node
 * (numacoll-tune writes them to the tune file as NUMACOLL_COST_*):
 *   shm_lat, shm_byte: fixed seconds of a queue broadcast and seconds per byte
 *     one member copies through the segment (the root copies in, every reader
 *     copies out, all at once: each member copies m bytes);
 *   cma_lat, cma_byte: fixed seconds of a CMA broadcast (the hand-offs of
 *     K1-K8 and the system calls) and seconds per byte of one process_vm_readv.
 * With k CPUs for p members, members copy min(p, k) at a time:
 *   shm:          shm_lat + m shm_byte max(1, p/k)
 *   cma, coop:    cma_lat + m cma_byte (p-1)/p max(1, p/k)   (every member
 *                 copies (p-1)/p of m: the root its share into each reader)
 *   cma, single:  cma_lat + m cma_byte max(1, (p-1)/k)        (the readers read
 *                 everything, the root waits)
 * Both are lines, so CMA wins from one size on or never: the switch point is
 * (cma_lat - shm_lat) / (shm slope - cma slope) when the CMA slope is the
 * smaller one. On this kind of node cma_byte > shm_byte (process_vm_readv pins
 * every page): CMA wins at p = 2 because the two cores share the copy, and loses
 * when a member's (p-1)/p share costs more than the segment's one copy.
 */
typedef struct nc_xfer_model {
    double shm_lat, shm_byte, cma_lat, cma_byte;
} nc_xfer_model_t;

double nc_xfer_time_shm(const nc_xfer_model_t *x, double m, int p, int k);
double nc_xfer_time_cma(const nc_xfer_model_t *x, double m, int p, int k, int coop);
/* The smallest m > floor from which CMA is predicted faster, or SIZE_MAX
 * (never). */
size_t nc_xfer_switch(const nc_xfer_model_t *x, int p, int k, int coop, size_t floor);

/* A CMA broadcast's root shares the copy only when its share (m/p) is at
 * least this; below, the call is a single copy (coll/nc_bcast.c). */
#define NC_CMA_SHARE_MIN ((size_t)16 << 10)

/* With more members than CPUs (k < p) a broadcast goes by CMA from this
 * size at the latest, whatever the per-byte line says: the segment's
 * pipeline is paced by its slowest member, and a descheduled member holds up
 * every fragment of its turn, while CMA's readers copy at their own pace
 * after one hand-off (measured at p = 4 on 2 CPUs, docs/transport.md,
 * "Broadcasts with more members than CPUs"). */
#define NC_CMA_OVERSUB_MAX ((size_t)1 << 20)

/* The broadcast's switch point for a team of p on k CPUs with messages
 * above inline_max going through the queue: with coop, the cooperative
 * line's switch point but not below NC_CMA_SHARE_MIN * p; with k < p at
 * most NC_CMA_OVERSUB_MAX (if that is above both); SIZE_MAX: never. */
size_t nc_cma_switch_point(const nc_xfer_model_t *x, int p, int k, int coop, size_t inline_max);

/*
 * The same choice for the gather family (coll/nc_gather.c), per block of m
 * bytes, from the copies the busiest member makes and those all members make
 * (k CPUs share the latter): time = lat + byte * max(busiest, all / k).
 *
 *   kind       segment: busiest, all      CMA: busiest, all
 *   rooted     (p-1) m, 2 (p-1) m         coop: (p-1) m / p, (p-1) m
 *                                         single: (p-1) m, (p-1) m
 *   allgather  p m, p^2 m                 (p-1) m, p (p-1) m
 *   alltoall   2 (p-1) m, 2 p (p-1) m     (p-1) m, p (p-1) m
 *
 * (rooted: gather and scatter, NC_XG_ROOTED and NC_XG_SCATTER, the same
 * copies; with coop the root and its peers share each block's copy, see
 * coll/nc_gather.c.) The switch point is never below
 * NC_XG_CMA_FLOOR_PAIR for two members with a CPU each, NC_XG_CMA_FLOOR
 * otherwise: under it the round trip of a CMA block costs more than the
 * copies it saves (measured, docs/transport.md, "Where the gather family's
 * floor lies"; the pair's floor is measured at p = 2 only, and at larger p
 * a rooted block of 64 KiB would be cut into shares too small to share,
 * NC_CMA_SHARE_MIN, coll/nc_gather.c). With more members than CPUs (two
 * CPUs or more) the scatter's floor is NC_XG_CMA_FLOOR_OVERSUB_SCATTER and
 * the alltoall's NC_XG_CMA_FLOOR_OVERSUB_ALLTOALL: there a block through the
 * segment waits for its writer, then for its reader, each of whom may be
 * descheduled (a scatter's root fills its few slots and waits for p - 1
 * readers to empty them), and copies twice on CPUs that have no time to
 * spare, while CMA's readers copy once after one hand-off; the gather keeps
 * NC_XG_CMA_FLOOR, where its CMA lost (measured at p = 4 and 8 on 2 CPUs,
 * docs/transport.md, same section).
 */
enum { NC_XG_ROOTED, NC_XG_ALLGATHER, NC_XG_ALLTOALL, NC_XG_SCATTER, NC_XG_KINDS };
extern const char *const nc_xg_kind_name[NC_XG_KINDS]; /* "gather", "allgather", ... */
#define NC_XG_CMA_FLOOR ((size_t)128 << 10)
#define NC_XG_CMA_FLOOR_PAIR ((size_t)64 << 10)
#define NC_XG_CMA_FLOOR_OVERSUB_SCATTER ((size_t)16 << 10)
#define NC_XG_CMA_FLOOR_OVERSUB_ALLTOALL ((size_t)32 << 10)
double nc_xg_time_shm(const nc_xfer_model_t *x, int kind, double m, int p, int k);
double nc_xg_time_cma(const nc_xfer_model_t *x, int kind, double m, int p, int k, int coop);
size_t nc_xg_switch_point(const nc_xfer_model_t *x, int kind, int p, int k, int coop,
                          size_t inline_max);

#endif
