/*
 * Time model of the shared-memory broadcast; formulas, their regimes and the choice made
 * where they overlap are in nc_model.h.
 */
#include "model/nc_model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* ceil() of a byte ratio that may carry rounding error: with s = b/f passed as a double
 * (the paper's s = b/f plots), s*f can come out a hair above or below b and turn
 * ceil(m/b) = 4 into 5. Ratios of whole byte counts below 1e12 are at least 1e-12 away
 * from the next integer (relatively), so the tolerance never moves a genuine step. */
static double ceil_ratio(double num, double den)
{
    double x = num / den;
    return ceil(x - x * 1e-12);
}

int nc_model_terms(double m, double f, double s, double q, double x[3])
{
    if (x == NULL || !isfinite(m) || !isfinite(f) || !isfinite(s) || !isfinite(q) || m < 0 ||
        f <= 0 || s < 1 || q < 1 || q > s)
        return NUMACOLL_ERR_INVAL;

    double b = s * f;
    double nf = ceil_ratio(m, f); /* fragments: notifications waited for */

    if (m == 0) { /* nothing moves */
        x[0] = x[1] = x[2] = 0;
    } else if (s == 1) { /* S1 */
        x[0] = 2 * m;
        x[1] = nf;
        x[2] = nf;
    } else if (m <= f) { /* R1 */
        x[0] = 2 * m;
        x[1] = 1;
        x[2] = 1;
    } else if (q < 2) { /* R2 (ceil(m/b) = 1) and R3 */
        double turns = ceil_ratio(m, b);
        x[0] = turns * f + m;
        x[1] = nf;
        x[2] = turns;
    } else { /* RQ: one set turn per b/q bytes */
        x[0] = f + m;
        x[1] = nf;
        x[2] = ceil_ratio(q * m, b);
    }
    return 0;
}

double nc_model_time(const nc_model_params_t *mp, double m, double f, double s, double q)
{
    double x[3];

    if (mp == NULL || nc_model_terms(m, f, s, q, x) != 0)
        return NAN;
    return x[0] * mp->t + x[1] * mp->t_w + x[2] * (mp->t_wo + mp->t_a);
}

int nc_model_optimal(const nc_model_params_t *mp, double m, double b, size_t page,
                     size_t *f_opt, size_t *s_opt)
{
    if (mp == NULL || f_opt == NULL || s_opt == NULL || page == 0 || !isfinite(m) ||
        !isfinite(b) || !(m > 0) || !(b > 0) || !(mp->t > 0) || !(mp->t_w >= 0) ||
        !isfinite(mp->t) || !isfinite(mp->t_w))
        return NUMACOLL_ERR_INVAL;

    /* dt/df = ceil(m/b) t - m t_w / f^2 = 0 (paper, section 5.3, m divisible by f). */
    double fstar = sqrt(m * mp->t_w / (ceil(m / b) * mp->t));
    double pages = ceil(fstar / (double)page);
    if (pages < 1)
        pages = 1;
    if (!(pages * (double)page < (double)(SIZE_MAX / 2)))
        return NUMACOLL_ERR_INVAL;
    size_t f = (size_t)pages * page;
    double s = floor(b / (double)f);
    if (s < 1)
        s = 1;
    if (!(s < (double)(SIZE_MAX / 2)))
        return NUMACOLL_ERR_INVAL;
    *f_opt = f;
    *s_opt = (size_t)s;
    return 0;
}

size_t nc_model_call_frag(size_t m, size_t f, size_t s, double tw_bytes)
{
    if (!(tw_bytes > 0) || !isfinite(tw_bytes) || m <= 64 || f == 0)
        return f;
    const double md = (double)m, ks = floor(sqrt(md / tw_bytes));
    const double kmax = s > 0 ? (double)s : 1;
    double k = 1, best = INFINITY;
    /* k t_w + ceil(m/k) t, in units of t: the ceiling moves the least by up
     * to one byte, so the neighbours of k* are tried too */
    for (double c = ks - 1; c <= ks + 2; c++) {
        if (c < 1 || c > kmax)
            continue;
        const double cost = c * tw_bytes + ceil(md / c);
        if (cost < best) {
            best = cost;
            k = c;
        }
    }
    if (!isfinite(best))
        k = ks < 1 ? 1 : kmax; /* every candidate beyond the queue: one per buffer */
    double frag = ceil(ceil(md / k) / 64) * 64;
    const double lo = md < (double)NC_MODEL_FRAG_MIN ? ceil(md / 64) * 64 : (double)NC_MODEL_FRAG_MIN;
    if (frag < lo)
        frag = lo;
    return frag >= (double)f ? f : (size_t)frag;
}

/*
 * Weighted linear least squares for theta = (t, t_w, c):
 *   1. rows a_i = x(m_i, f_i, s_i, q_i) / y_i, right-hand side 1 (relative residuals);
 *   2. scale each column to unit norm (t's coefficients are ~1e6 times the others');
 *   3. Householder QR of the n x 3 matrix, applying the reflections to the right side;
 *   4. reject if a diagonal of R is tiny against the largest (columns not separable);
 *   5. back-substitute and undo the column scaling.
 */
static int fit_lsq(const double *m, const double *f, const double *s, const double *q,
                   const double *time, int n, double theta[3])
{
    double *a = NULL, *y = NULL, scale[3] = {0, 0, 0}, r[3][3] = {{0}}, qty[3];
    int rc = NUMACOLL_ERR_INVAL;

    if (m == NULL || f == NULL || s == NULL || q == NULL || time == NULL || n < 3)
        return NUMACOLL_ERR_INVAL;
    a = malloc(sizeof(double) * 3 * (size_t)n); /* column-major: a[j*n + i] */
    y = malloc(sizeof(double) * (size_t)n);
    if (a == NULL || y == NULL) {
        rc = NUMACOLL_ERR_NOMEM;
        goto out;
    }

    /* 1. */
    for (int i = 0; i < n; i++) {
        double x[3];
        if (!isfinite(time[i]) || !(time[i] > 0) || nc_model_terms(m[i], f[i], s[i], q[i], x))
            goto out;
        for (int j = 0; j < 3; j++)
            a[j * n + i] = x[j] / time[i];
        y[i] = 1;
    }
    /* 2. */
    for (int j = 0; j < 3; j++) {
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += a[j * n + i] * a[j * n + i];
        scale[j] = sqrt(ss);
        if (!(scale[j] > 0)) /* a column of zeros: that constant never appears */
            goto out;
        for (int i = 0; i < n; i++)
            a[j * n + i] /= scale[j];
    }
    /* 3. */
    for (int j = 0; j < 3; j++) {
        double *col = a + (size_t)j * n, norm = 0;
        for (int i = j; i < n; i++)
            norm += col[i] * col[i];
        norm = sqrt(norm);
        double alpha = col[j] > 0 ? -norm : norm;
        double v0 = col[j] - alpha; /* v = (v0, col[j+1..n)) */
        double vtv = v0 * v0 + (norm * norm - col[j] * col[j]);
        if (vtv > 0) {
            for (int jj = j + 1; jj <= 3; jj++) { /* jj == 3: the right-hand side */
                double *cc = jj < 3 ? a + (size_t)jj * n : y;
                double dot = v0 * cc[j];
                for (int i = j + 1; i < n; i++)
                    dot += col[i] * cc[i];
                double g = 2 * dot / vtv;
                cc[j] -= g * v0;
                for (int i = j + 1; i < n; i++)
                    cc[i] -= g * col[i];
            }
        }
        r[j][j] = alpha;
        for (int jj = j + 1; jj < 3; jj++)
            r[j][jj] = a[(size_t)jj * n + j];
        qty[j] = y[j];
    }
    /* 4. Columns have unit norm, so |R_jj| is the part of column j not explained by the
     *    earlier ones; below 1e-8 the constant is not identifiable from these rows. */
    for (int j = 0; j < 3; j++)
        if (!(fabs(r[j][j]) > 1e-8))
            goto out;
    /* 5. */
    for (int j = 2; j >= 0; j--) {
        double v = qty[j];
        for (int jj = j + 1; jj < 3; jj++)
            v -= r[j][jj] * theta[jj];
        theta[j] = v / r[j][j];
    }
    for (int j = 0; j < 3; j++)
        theta[j] /= scale[j];
    rc = (theta[0] > 0 && isfinite(theta[1]) && isfinite(theta[2])) ? 0 : NUMACOLL_ERR_INVAL;
out:
    free(y);
    free(a);
    return rc;
}

int nc_model_fit_known_ta(const double *m, const double *f, const double *s, const double *q,
                          const double *time, int n, double t_a, nc_model_params_t *out)
{
    double theta[3];
    int rc;

    if (out == NULL || !isfinite(t_a) || t_a < 0)
        return NUMACOLL_ERR_INVAL;
    rc = fit_lsq(m, f, s, q, time, n, theta);
    if (rc != 0)
        return rc;
    out->t = theta[0];
    out->t_w = theta[1];
    out->t_wo = theta[2] - t_a;
    out->t_a = t_a;
    return 0;
}

int nc_model_fit(const double *m, const double *f, const double *s, const double *q,
                 const double *time, int n, nc_model_params_t *out)
{
    return nc_model_fit_known_ta(m, f, s, q, time, n, 0.0, out);
}

/* ---- transport choice ------------------------------------------------------------ */

static double slope_shm(const nc_xfer_model_t *x, int p, int k)
{
    return x->shm_byte * fmax(1.0, (double)p / k);
}

static double slope_cma(const nc_xfer_model_t *x, int p, int k, int coop)
{
    if (coop)
        return x->cma_byte * (p - 1.0) / p * fmax(1.0, (double)p / k);
    return x->cma_byte * fmax(1.0, (p - 1.0) / k);
}

double nc_xfer_time_shm(const nc_xfer_model_t *x, double m, int p, int k)
{
    return x->shm_lat + m * slope_shm(x, p, k);
}

double nc_xfer_time_cma(const nc_xfer_model_t *x, double m, int p, int k, int coop)
{
    return x->cma_lat + m * slope_cma(x, p, k, coop);
}

size_t nc_xfer_switch(const nc_xfer_model_t *x, int p, int k, int coop, size_t floor)
{
    if (p < 2 || k < 1)
        return SIZE_MAX;
    const double ds = slope_shm(x, p, k) - slope_cma(x, p, k, coop);
    if (!(ds > 0))
        return SIZE_MAX;
    const double m = ceil((x->cma_lat - x->shm_lat) / ds);
    if (m >= 0x1p62)
        return SIZE_MAX;
    return m > (double)floor ? (size_t)m : floor + 1;
}

size_t nc_cma_switch_point(const nc_xfer_model_t *x, int p, int k, int coop, size_t inline_max)
{
    size_t m = nc_xfer_switch(x, p, k, coop, inline_max);
    if (coop && m != SIZE_MAX && m < NC_CMA_SHARE_MIN * (size_t)p)
        m = NC_CMA_SHARE_MIN * (size_t)p;
    if (p >= 2 && k >= 1 && k < p && m > NC_CMA_OVERSUB_MAX &&
        NC_CMA_OVERSUB_MAX > inline_max && NC_CMA_OVERSUB_MAX >= NC_CMA_SHARE_MIN * (size_t)p)
        m = NC_CMA_OVERSUB_MAX;
    return m;
}

/* ---- the gather family's transport choice ---------------------------------------- */

const char *const nc_xg_kind_name[NC_XG_KINDS] = {[NC_XG_ROOTED] = "gather",
                                                  [NC_XG_ALLGATHER] = "allgather",
                                                  [NC_XG_ALLTOALL] = "alltoall",
                                                  [NC_XG_SCATTER] = "scatter"};

/* Bytes per byte of block: the busiest member's copies, and all members'. */
static void xg_copies(int kind, int cma, int coop, int p, double *busy, double *all)
{
    const double q = p - 1.0;
    if (kind == NC_XG_ROOTED || kind == NC_XG_SCATTER) {
        *busy = cma ? (coop ? q / p : q) : q;
        *all = cma ? q : 2 * q;
    } else if (kind == NC_XG_ALLGATHER) {
        *busy = cma ? q : p;
        *all = cma ? p * q : (double)p * p;
    } else {
        *busy = q * (cma ? 1 : 2);
        *all = p * q * (cma ? 1 : 2);
    }
}

static double xg_slope(const nc_xfer_model_t *x, int kind, int cma, int coop, int p, int k)
{
    double busy, all;
    xg_copies(kind, cma, coop, p, &busy, &all);
    return (cma ? x->cma_byte : x->shm_byte) * fmax(busy, all / k);
}

double nc_xg_time_shm(const nc_xfer_model_t *x, int kind, double m, int p, int k)
{
    return x->shm_lat + m * xg_slope(x, kind, 0, 0, p, k);
}

double nc_xg_time_cma(const nc_xfer_model_t *x, int kind, double m, int p, int k, int coop)
{
    return x->cma_lat + m * xg_slope(x, kind, 1, coop, p, k);
}

size_t nc_xg_switch_point(const nc_xfer_model_t *x, int kind, int p, int k, int coop,
                          size_t inline_max)
{
    if (p < 2 || k < 1)
        return SIZE_MAX;
    const double ds = xg_slope(x, kind, 0, 0, p, k) - xg_slope(x, kind, 1, coop, p, k);
    if (!(ds > 0))
        return SIZE_MAX;
    const double m = ceil((x->cma_lat - x->shm_lat) / ds);
    if (m >= 0x1p62)
        return SIZE_MAX;
    const size_t least = p == 2 && k >= 2 ? NC_XG_CMA_FLOOR_PAIR
                         : k < p && k >= 2 && kind == NC_XG_ALLTOALL
                             ? NC_XG_CMA_FLOOR_OVERSUB_ALLTOALL
                         : k < p && k >= 2 && kind == NC_XG_SCATTER ? NC_XG_CMA_FLOOR_OVERSUB_SCATTER
                                                                    : NC_XG_CMA_FLOOR;
    size_t floor = inline_max + 1 > least ? inline_max + 1 : least;
    return m > (double)floor ? (size_t)m : floor;
}
