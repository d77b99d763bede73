/*
 * numacoll-tune: measurement design, fit, choice and neighbours (MPI-free).
 */
#include "nc_tune_model.h"

#include <math.h>
#include <stdlib.h>

int nc_tune_fit_configs(size_t page, int quick, nc_tune_setting_t *out, int max)
{
    static const int fpages[] = {1, 4, 16}, svals[] = {4, 16}, sq[] = {4, 8};
    int n = 0;
    for (int i = 0; i < (quick ? 2 : 3); i++)
        for (int j = 0; j < 2 && n < max; j++)
            out[n++] = (nc_tune_setting_t){.f = (size_t)fpages[i] * page, .s = quick ? sq[j] : svals[j], .q = 1};
    return n;
}

int nc_tune_fit_sizes(const nc_tune_setting_t *c, int quick, double *m, int max)
{
    double f = (double)c->f, b = f * c->s;
    /* R1 (m <= f), R2 (f < m <= b, several fragments), R3 (m > b, queue turns). */
    const double full[] = {f / 2, 3 * f, b / 2 + f / 2, b, 2.5 * b, 4 * b};
    const double q[] = {f / 2, 3 * f, 2.5 * b};
    const double *src = quick ? q : full;
    int k = quick ? 3 : 6, n = 0;
    for (int i = 0; i < k && n < max; i++)
        m[n++] = floor(src[i]);
    return n;
}

int nc_tune_fit(const nc_tune_point_t *pt, int n, double t_a, nc_model_params_t *out, double *rms)
{
    if (!pt || n < 3)
        return NUMACOLL_ERR_INVAL;
    double *m = calloc(5 * (size_t)n, sizeof(double));
    if (!m)
        return NUMACOLL_ERR_NOMEM;
    double *f = m + n, *s = f + n, *q = s + n, *t = q + n;
    for (int i = 0; i < n; i++) {
        m[i] = pt[i].m;
        f[i] = pt[i].f;
        s[i] = pt[i].s;
        q[i] = pt[i].q;
        t[i] = pt[i].time;
    }
    int rc = nc_model_fit_known_ta(m, f, s, q, t, n, t_a, out);
    if (!rc && rms) {
        double acc = 0;
        for (int i = 0; i < n; i++) {
            double r = nc_model_time(out, m[i], f[i], s[i], q[i]) / t[i] - 1;
            acc += r * r;
        }
        *rms = sqrt(acc / n);
    }
    free(m);
    return rc;
}

int nc_tune_choose(const nc_model_params_t *mp, double b, size_t page, size_t fmax, int smax,
                   nc_tune_setting_t *out)
{
    nc_model_params_t p = *mp;
    if (p.t_w < 0) /* not resolved by the data: the smallest fragment is optimal */
        p.t_w = 0;
    size_t f, s;
    /* m = b: ceil(m/b) = 1 and f* = sqrt(b t_w / t), the optimum for every m that is a
     * multiple of b (the paper's "fixed s: b = m_max"). */
    int rc = nc_model_optimal(&p, b, b, page, &f, &s);
    if (rc)
        return rc;
    if (f > fmax)
        f = fmax / page * page;
    s = (size_t)(b / (double)f);
    if (s < 1)
        s = 1;
    if (s > (size_t)smax)
        s = (size_t)smax;
    out->f = f;
    out->s = (int)s;
    out->q = 1;
    return 0;
}

int nc_tune_neighbours(const nc_tune_setting_t *c, double b, size_t page, size_t fmax, int smax,
                       nc_tune_setting_t *out, int max)
{
    static const double mult[] = {0.25, 0.5, 2, 4};
    int n = 0;
    for (int i = 0; i < 4 && n < max; i++) {
        double fp = ceil((double)c->f * mult[i] / (double)page);
        if (fp < 1)
            fp = 1;
        size_t f = (size_t)fp * page;
        if (f > fmax)
            continue;
        int s = (int)(b / (double)f);
        if (s < 1)
            s = 1;
        if (s > smax)
            s = smax;
        nc_tune_setting_t x = {.f = f, .s = s, .q = s % c->q ? 1 : c->q};
        int dup = x.f == c->f && x.s == c->s;
        for (int k = 0; k < n; k++)
            dup |= out[k].f == x.f && out[k].s == x.s;
        if (!dup)
            out[n++] = x;
    }
    return n;
}
