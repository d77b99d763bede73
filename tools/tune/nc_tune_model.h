/*
 * numacoll-tune, the MPI-free part: which broadcasts to time so that the fit
 * separates t, t_w and c = t_wo + t_a; the choice of f and s for a budget;
 * the neighbouring settings the choice is checked against. Unit-tested on
 * synthetic measurements (tests/tune/test_tune_model.c).
 */
#ifndef NC_TUNE_MODEL_H
#define NC_TUNE_MODEL_H

#include <stddef.h>

#include "model/nc_model.h"

typedef struct nc_tune_point {
    double m, f, s, q;  /* the broadcast */
    double time;        /* measured seconds (t_max over the members) */
} nc_tune_point_t;

typedef struct nc_tune_setting {
    size_t f;
    int s, q;
    double tw_ns, t_ps; /* the fitted t_w and t for the per-call fragments (0: default) */
} nc_tune_setting_t;

/* Configurations (f, s) to time for the fit: f in {1, 4, 16} pages, s in {4, 16}
 * ({1, 4} pages and {4, 8} when quick). Returns the count (<= max). */
int nc_tune_fit_configs(size_t page, int quick, nc_tune_setting_t *out, int max);
/* Message sizes for one configuration: below f, a few fragments, within the
 * queue, over the queue (all three regimes R1, R2, R3). Returns the count. */
int nc_tune_fit_sizes(const nc_tune_setting_t *c, int quick, double *m, int max);

/* Fit with a separately measured t_a; *rms = relative RMS residual. */
int nc_tune_fit(const nc_tune_point_t *pt, int n, double t_a, nc_model_params_t *out,
                double *rms);

/* f* and s* for a budget of b bytes per member (page-rounded f; s clamped to
 * 1..smax and f to fmax). q = 1. */
int nc_tune_choose(const nc_model_params_t *mp, double b, size_t page, size_t fmax, int smax,
                   nc_tune_setting_t *out);

/* Neighbours of `c` at the same budget: f/4, f/2, 2f, 4f (page-rounded, s = b/f,
 * q kept when it divides s, else 1), without duplicates or c itself.
 * Returns the count (<= max). */
int nc_tune_neighbours(const nc_tune_setting_t *c, double b, size_t page, size_t fmax, int smax,
                       nc_tune_setting_t *out, int max);

#endif
