/*
 * numacoll-tune's measurement design and fit on synthetic measurements: times
 * made by the model from known constants (plus deterministic noise) must give
 * the constants back, and the choice must be the paper's f* = sqrt(b t_W / t).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nc_tune_model.h"

#include "nc_check.h"

static double rel(double a, double b)
{
    return fabs(a - b) / fabs(b);
}

/* Build the tool's design, time it with `truth` and noise of +-amp, fit. */
static void recover(const char *name, nc_model_params_t truth, int quick, double amp, double tol)
{
    size_t page = 4096;
    nc_tune_setting_t cfg[8];
    nc_tune_point_t pt[64];
    int n = 0, nc = nc_tune_fit_configs(page, quick, cfg, 8);
    unsigned seed = 12345;
    for (int i = 0; i < nc; i++) {
        double m[8];
        int nm = nc_tune_fit_sizes(&cfg[i], quick, m, 8);
        for (int k = 0; k < nm; k++) {
            seed = seed * 1103515245u + 12345u;
            double noise = amp * (((seed >> 8) % 2001) / 1000.0 - 1.0);
            double t = nc_model_time(&truth, m[k], (double)cfg[i].f, cfg[i].s, 1);
            pt[n++] = (nc_tune_point_t){m[k], (double)cfg[i].f, cfg[i].s, 1, t * (1 + noise)};
        }
    }
    nc_model_params_t fit;
    double rms;
    int rc = nc_tune_fit(pt, n, truth.t_a, &fit, &rms);
    CHECK(rc == 0, "%s: fit failed (%d)", name, rc);
    if (rc)
        return;
    printf("%-22s %2d points: t %.4g (%.4g) t_w %.4g (%.4g) t_wo %.4g (%.4g) rms %.4f\n", name, n,
           fit.t, truth.t, fit.t_w, truth.t_w, fit.t_wo, truth.t_wo, rms);
    CHECK(rel(fit.t, truth.t) < tol, "%s: t %g vs %g", name, fit.t, truth.t);
    CHECK(rel(fit.t_w, truth.t_w) < tol, "%s: t_w %g vs %g", name, fit.t_w, truth.t_w);
    CHECK(rel(fit.t_wo + fit.t_a, truth.t_wo + truth.t_a) < 2 * tol, "%s: c %g vs %g", name,
          fit.t_wo + fit.t_a, truth.t_wo + truth.t_a);
    CHECK(fit.t_a == truth.t_a, "%s: t_a is the measured one", name);
    CHECK(amp > 0 || rms < 1e-9, "%s: exact data leaves residual %g", name, rms);
}

int main(void)
{
    /* Broadwell-like and slower-notification constants (seconds). */
    nc_model_params_t a = {.t = 1.0 / 8e9, .t_w = 1.5e-7, .t_wo = 4e-7, .t_a = 6e-8};
    nc_model_params_t b = {.t = 1.0 / 3e9, .t_w = 8e-7, .t_wo = 2e-6, .t_a = 2e-7};
    recover("exact", a, 0, 0, 1e-6);
    recover("exact quick", b, 1, 0, 1e-6);
    recover("noise 1%", a, 0, 0.01, 0.15);
    recover("noise 1% other", b, 0, 0.01, 0.15);

    /* Choice: f* = sqrt(b t_w / t) rounded up to pages, s* = b / f*. */
    nc_tune_setting_t c;
    double budget = 24 << 20;
    CHECK(!nc_tune_choose(&a, budget, 4096, 64 << 20, 4096, &c), "choose");
    double fstar = sqrt(budget * a.t_w / a.t);
    CHECK(c.f % 4096 == 0 && c.f >= fstar && c.f < fstar + 4096, "f=%zu f*=%g", c.f, fstar);
    CHECK(c.s == (int)(budget / c.f) && c.q == 1, "s=%d", c.s);
    printf("choice for b=24M: f=%zu (f*=%.0f) s=%d\n", c.f, fstar, c.s);
    /* The paper's example: b = 64 x 8 KiB, constants making f* = 8 KiB. */
    nc_model_params_t paper = {.t = 1e-10, .t_w = 8192.0 * 8192.0 * 1e-10 / (64 * 8192.0)};
    CHECK(!nc_tune_choose(&paper, 64 * 8192.0, 4096, 64 << 20, 4096, &c) && c.f == 8192 &&
              c.s == 64,
          "paper: f=%zu s=%d", c.f, c.s);
    /* A negative fitted t_w (unresolved) still gives a valid setting. */
    nc_model_params_t neg = a;
    neg.t_w = -1e-9;
    CHECK(!nc_tune_choose(&neg, budget, 4096, 64 << 20, 4096, &c) && c.f == 4096, "neg t_w");

    /* Neighbours keep the budget and q when it divides s. */
    nc_tune_setting_t best = {.f = 32768, .s = 32, .q = 2}, nb[8];
    int nn = nc_tune_neighbours(&best, 32768.0 * 32, 4096, 64 << 20, 4096, nb, 8);
    CHECK(nn == 4, "%d neighbours", nn);
    for (int i = 0; i < nn; i++) {
        CHECK(nb[i].f * (size_t)nb[i].s <= 32768u * 32 && nb[i].f % 4096 == 0 &&
                  nb[i].s % nb[i].q == 0,
              "neighbour %zu/%d/%d", nb[i].f, nb[i].s, nb[i].q);
        printf("neighbour f=%zu s=%d q=%d\n", nb[i].f, nb[i].s, nb[i].q);
    }
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
