/*
 * The broadcast time model against the paper (Kurnosov & Tokmasheva, section 5) and
 * against itself: worked numbers, regime boundaries, the optimum, the saw-tooth, the rules
 * of thumb and the fit.
 *
 * The paper's numbers are model parameters and plots, not tables of model values:
 *   Fig. 4: m = 16 MB, b = 4 MB, s = b/f, q = 1, t = 1e-9 s, t_wo = 100t, t_a = 10t,
 *           t_w = 50t; t(m,s) on an axis from 16 700 to 17 300 us, minimum in between.
 *   Fig. 6: t = 1e-9 s, m = 16 MB, f = 8192, q = 1, t_w = 50t, t_wo = 100t, t_a = 10t;
 *           t(m,s) falls with s from t(m, s=1) towards m t, annotated "x2"; axis ticks
 *           12 000 .. 33 000 us.
 *   Table 1: queue bytes b = f s for s = f/2 .. f/512 (in MB = 2^20 bytes).
 *   Fig. 3: leaf timelines for s = 1, m = 4f; s = 4, q = 1, m = 8f; s = 8, q = 2, m = 8f.
 * So the values below are hand-computed from the formulas with those parameters (the
 * arithmetic is in the comments) and checked to fall where the plots put them.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/nc_model.h"

#include "nc_check.h"

#define NEAR(a, b, rel) (fabs((a) - (b)) <= (rel) * fabs(b) + 1e-300)

#define KB 1024.0
#define MB (1024.0 * 1024.0)
#define T 1e-9

/* The paper's parameters for Fig. 4 and Fig. 6. */
static const nc_model_params_t paper = {T, 50 * T, 100 * T, 10 * T};

static void test_paper_numbers(void)
{
    const double m = 16 * MB, b = 4 * MB;
    double x[3];

    /* Fig. 4. f* = sqrt(m t_w / (ceil(m/b) t)) = sqrt(16777216 * 50 / 4) = 14481.5 bytes,
     * rounded up to 4 KB pages: 16384; s* = 4 MB / 16 KB = 256. */
    size_t fo = 0, so = 0;
    CHECK(nc_model_optimal(&paper, m, b, 4096, &fo, &so) == 0 && fo == 16384 && so == 256,
          "Fig. 4 optimum f=%zu s=%zu, expected 16384 and 256", fo, so);
    /* t(16 KB) = 4 (110 + 16384) ns + 1024 * 50 ns + 16777216 ns = 16 894 392 ns. */
    double t16 = nc_model_time(&paper, m, 16 * KB, b / (16 * KB), 1);
    CHECK(NEAR(t16, 16894392e-9, 1e-12), "Fig. 4 t(16 KB) = %.9f s", t16);
    double tmin = INFINITY, fmin = 0;
    for (double f = 2 * KB; f <= 128 * KB; f *= 2) {
        double tf = nc_model_time(&paper, m, f, b / f, 1);
        /* the plotted range: every point between 16.7 and 17.3 ms (128 KB: 17.309 ms) */
        CHECK(tf > 16.7e-3 && tf < 17.31e-3, "Fig. 4 f=%g: %.1f us outside the plot", f,
              tf * 1e6);
        CHECK(tf > m * T, "Fig. 4 f=%g: below m t", f);
        if (tf < tmin) {
            tmin = tf;
            fmin = f;
        }
    }
    CHECK(fmin == 16 * KB, "Fig. 4: minimum over powers of two at f=%g", fmin);
    /* The two f-dependent curves of Fig. 4 cross at the continuous optimum:
     * ceil(m/b) f t = m t_w / f  <=>  f = f*. */
    double fstar = sqrt(m * paper.t_w / (4 * paper.t));
    CHECK(NEAR(4 * fstar * paper.t, m / fstar * paper.t_w, 1e-12), "Fig. 4 crossing");
    printf("Fig. 4: f* = %.1f -> %zu B, s* = %zu, t(f*) = %.1f us (plot axis 16700-17300)\n",
           fstar, fo, so, t16 * 1e6);

    /* Fig. 6, f = 8192: s = 1: ceil(m/f) = 2048 fragments,
     * 2048 (110 + 50) ns + 2 * 16777216 ns = 33 882 112 ns. */
    double t1 = nc_model_time(&paper, m, 8192, 1, 1);
    CHECK(NEAR(t1, 33882112e-9, 1e-12), "Fig. 6 t(m, s=1) = %.9f s", t1);
    /* s = 2048 (b = m): R2: 110 + 8192 + 2048 * 50 + 16777216 ns = 16 887 918 ns. */
    double tinf = nc_model_time(&paper, m, 8192, 2048, 1);
    CHECK(NEAR(tinf, 16887918e-9, 1e-12), "Fig. 6 t(m, s=2048) = %.9f s", tinf);
    /* "x2": the ratio tends to 2 (slightly above: s = 1 also pays 2048 set turns). */
    CHECK(t1 / tinf > 2.0 && t1 / tinf < 2.01, "Fig. 6 ratio %.4f", t1 / tinf);
    double prev = INFINITY;
    for (int s = 1; s <= 4096; s++) {
        double ts = nc_model_time(&paper, m, 8192, s, 1);
        CHECK(ts <= prev, "Fig. 6: t grows from s=%d to s=%d", s - 1, s);
        CHECK(ts >= m * T && ts <= t1, "Fig. 6 s=%d: %.1f us outside [m t, t(m,1)]", s,
              ts * 1e6);
        prev = ts;
    }
    /* With zero waiting costs the ratio is exactly 2 (the paper: "up to two times"). */
    const nc_model_params_t copy_only = {T, 0, 0, 0};
    double r0 = nc_model_time(&copy_only, m, 8192, 1, 1) / nc_model_time(&copy_only, m, 8192,
                                                                           2048, 1);
    CHECK(r0 <= 2.0 && r0 > 1.999, "zero-overhead ratio %.6f", r0);
    printf("Fig. 6: t(m,s=1) = %.1f us, t(m,s=2048) = %.1f us, m t = %.1f us, ratio %.4f\n",
           t1 * 1e6, tinf * 1e6, m * T * 1e6, t1 / tinf);

    /* Table 1: b = f * s with s = f/k, in MB = 2^20 bytes (8192 * 4096 = 32 MB exactly; in
     * 10^6 bytes the cells would read 8.4, 33.6, 75.5 ...). */
    static const struct {
        double f, k, mb;
    } cells[] = {{4096, 2, 8},     {8192, 2, 32},     {12288, 2, 72},  {16384, 8, 32},
                 {20480, 16, 25},  {32768, 64, 16},   {40960, 128, 12.5},
                 {65536, 512, 8},  {57344, 128, 24.5}};
    for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++) {
        double bb = cells[i].f * (cells[i].f / cells[i].k) / MB;
        CHECK(NEAR(bb, cells[i].mb, 1e-12), "Table 1 f=%g s=f/%g: %g MB", cells[i].f,
              cells[i].k, bb);
    }

    /* Fig. 3: the leaf timelines, counted term by term (c = t_wo + t_a). */
    const double f = 8192;
    /* (a) s = 1, m = 4f: 4 x (WO, W, C, A) and the root's 4 copies: 4 (c + t_w) + 2 m t */
    CHECK(nc_model_terms(4 * f, f, 1, 1, x) == 0 && x[0] == 8 * f && x[1] == 4 && x[2] == 4,
          "Fig. 3a terms %g %g %g", x[0], x[1], x[2]);
    /* (b) s = 4, q = 1, m = 8f: two queue turns, each waits for the last copy:
     *     2 (c + f t) + 8 t_w + m t */
    CHECK(nc_model_terms(8 * f, f, 4, 1, x) == 0 && x[0] == 2 * f + 8 * f && x[1] == 8 &&
              x[2] == 2,
          "Fig. 3b terms %g %g %g", x[0], x[1], x[2]);
    /* (c) s = 8, q = 2, m = 8f = b: two sets, two WO/A pairs, one exposed copy:
     *     2 c + f t + 8 t_w + m t (the paper's q ceil(m/b) c with ceil(m/b) = 1) */
    CHECK(nc_model_terms(8 * f, f, 8, 2, x) == 0 && x[0] == f + 8 * f && x[1] == 8 &&
              x[2] == 2,
          "Fig. 3c terms %g %g %g", x[0], x[1], x[2]);
}

/* Exact values of each formula on both sides of each regime boundary. */
static void test_regimes(void)
{
    const nc_model_params_t P = {1e-9, 7e-7, 3e-6, 2e-7}; /* distinct, to tell terms apart */
    const double c = P.t_wo + P.t_a, f = 4096, s = 8, b = s * f;
#define R1(m) (c + P.t_w + 2 * (m)*P.t)
#define R2(m) (c + f * P.t + ceil((m) / f) * P.t_w + (m)*P.t)
#define R3(m) (ceil((m) / b) * (c + f * P.t) + ceil((m) / f) * P.t_w + (m)*P.t)
#define RQ(m, q) ((q)*ceil((m) / b) * c + f * P.t + ceil((m) / f) * P.t_w + (m)*P.t)
#define S1(m) (ceil((m) / f) * (c + P.t_w) + 2 * (m)*P.t)
    static const double ms[] = {1, 100, 4095, 4096, 4097, 8192, 8193, 32767, 32768, 32769,
                                65536, 65537, 98304, 1e6, 1 << 24};
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        double m = ms[i];
        double want = m <= f ? R1(m) : m <= b ? R2(m) : R3(m);
        double got = nc_model_time(&P, m, f, s, 1);
        CHECK(NEAR(got, want, 1e-12), "q=1 m=%g: %.6e, expected %.6e", m, got, want);
        /* s = 1 */
        CHECK(NEAR(nc_model_time(&P, m, f, 1, 1), S1(m), 1e-12), "s=1 m=%g", m);
        /* q = 2, 4: exact set turns ceil(q m / b); the paper's q ceil(m/b) when b | m */
        for (double q = 2; q <= 4; q *= 2) {
            double turns = ceil(q * m / b);
            want = m <= f ? R1(m) : (turns * c + f * P.t + ceil(m / f) * P.t_w + m * P.t);
            got = nc_model_time(&P, m, f, s, q);
            CHECK(NEAR(got, want, 1e-12), "q=%g m=%g: %.6e, expected %.6e", q, m, got, want);
            if (m > f && fmod(m, b) == 0)
                CHECK(NEAR(got, RQ(m, q), 1e-12), "q=%g m=%g: not the paper's RQ", q, m);
            if (m > f && m <= b / q)
                CHECK(NEAR(got, R2(m), 1e-12), "q=%g m=%g: one set turn is R2", q, m);
        }
    }
    /* Boundaries: one byte past f costs a second notification and the byte: t_w + t. */
    CHECK(NEAR(nc_model_time(&P, f, f, s, 1), R1(f), 1e-12), "m=f is R1");
    CHECK(NEAR(nc_model_time(&P, f + 1, f, s, 1) - nc_model_time(&P, f, f, s, 1),
               P.t_w + P.t, 1e-9),
          "R1 -> R2 step at m = f");
    /* R2 -> R3 continuous at m = b, then one queue turn (c + f t) and one t_w more. */
    CHECK(NEAR(R2(b), R3(b), 1e-12), "R2 == R3 at m = b");
    CHECK(NEAR(nc_model_time(&P, b + 1, f, s, 1) - nc_model_time(&P, b, f, s, 1),
               c + f * P.t + P.t_w + P.t, 1e-9),
          "R2 -> R3 step at m = b");
    /* S1 agrees with R1 below f and with R3 at s = 1 when f divides m. */
    CHECK(NEAR(S1(f), R1(f), 1e-12) && NEAR(S1(3 * f), 3 * (c + f * P.t) + 3 * P.t_w +
                                                           3 * f * P.t, 1e-12),
          "S1 consistency");
    CHECK(nc_model_time(&P, 0, f, s, 1) == 0, "m = 0 costs nothing");
    /* invalid input */
    CHECK(isnan(nc_model_time(&P, -1, f, s, 1)) && isnan(nc_model_time(&P, 1, 0, s, 1)) &&
              isnan(nc_model_time(&P, 1, f, 0.5, 1)) && isnan(nc_model_time(&P, 1, f, 4, 8)) &&
              isnan(nc_model_time(&P, 1, f, 4, 0)) && isnan(nc_model_time(NULL, 1, f, 4, 1)) &&
              isnan(nc_model_time(&P, NAN, f, 4, 1)),
          "invalid arguments accepted");
    printf("regimes: S1, R1, R2, R3, RQ checked at m = 1 .. 16 MB and at the boundaries\n");
#undef R1
#undef R2
#undef R3
#undef RQ
#undef S1
}

/* f* from nc_model_optimal against a search over every page multiple, with s = b/f. */
static void test_optimum_grid(void)
{
    static const nc_model_params_t ps[] = {
        {T, 50 * T, 100 * T, 10 * T},
        {1e-10, 1e-6, 2e-6, 1e-7},   /* ~10 GB/s copy, 1 us notification */
        {2.5e-10, 2e-7, 5e-7, 5e-8},
        {1e-9, 1e-9, 1e-9, 1e-9},    /* t_w = t: the rules of thumb */
    };
    static const double ms[] = {16 * KB, 100 * KB, 1 * MB, 5 * MB + 3, 16 * MB, 64 * MB};
    static const double bs[] = {1 * MB, 4 * MB, 10 * MB};
    const size_t page = 4096;
    double worst = 0;
    int cases = 0, near = 0;

    for (size_t ip = 0; ip < sizeof(ps) / sizeof(ps[0]); ip++)
        for (size_t im = 0; im < sizeof(ms) / sizeof(ms[0]); im++)
            for (size_t ib = 0; ib < sizeof(bs) / sizeof(bs[0]); ib++) {
                const nc_model_params_t *P = &ps[ip];
                double m = ms[im], b = bs[ib];
                size_t fo, so;
                CHECK(nc_model_optimal(P, m, b, page, &fo, &so) == 0, "optimal failed");
                CHECK(fo % page == 0 && fo >= page, "f* = %zu not whole pages", fo);
                CHECK(so >= 1 && (so * fo <= b || so == 1), "s* = %zu f* = %zu over b", so, fo);
                double fstar = sqrt(m * P->t_w / (ceil(m / b) * P->t));
                CHECK(fo >= fstar && (fo < fstar + page || fo == page), "f* %zu vs %.1f", fo,
                      fstar);
                /* grid search over page multiples, s = b/f (the paper's Fig. 4 setting) */
                double best = INFINITY, fbest = 0;
                for (double f = page; f <= b; f += page) {
                    double tf = nc_model_time(P, m, f, b / f, 1);
                    if (tf < best) {
                        best = tf;
                        fbest = f;
                    }
                }
                double tf = nc_model_time(P, m, (double)fo, b / (double)fo, 1);
                /* the excess over the copy time m t is what f controls */
                double excess = (tf - best) / (best - m * P->t);
                if (excess > worst)
                    worst = excess;
                /* Within page rounding: f* minimises the model without ceil(m/f), which
                 * differs from the model by less than one t_w (one saw tooth), and rounding
                 * up by less than a page costs at most ceil(m/b) page t. So f* can lose to
                 * the grid's best by at most t_w + ceil(m/b) page t. */
                double bound = P->t_w + ceil(m / b) * (double)page * P->t;
                CHECK(tf - best <= bound * (1 + 1e-9),
                      "m=%g b=%g: f*=%zu loses %.3e s to %g (bound %.3e)", m, b, fo, tf - best,
                      fbest, bound);
                if (fabs(fbest - (double)fo) <= page)
                    near++;
                cases++;
            }
    /* Most of the time f* is the grid's best page or its neighbour. */
    CHECK(near >= cases * 9 / 10, "f* next to the grid minimum in only %d of %d cases", near,
          cases);
    printf("optimum: %d cases, f* within a page of the grid minimum in %d, loss always under "
           "one tooth + one page; worst overhead excess %.2f%%\n",
           cases, near, 100 * worst);

    size_t fo, so;
    const nc_model_params_t bad = {0, 1e-9, 0, 0};
    CHECK(nc_model_optimal(&bad, 1e6, 1e6, 4096, &fo, &so) == NUMACOLL_ERR_INVAL, "t = 0");
    CHECK(nc_model_optimal(&paper, 0, 1e6, 4096, &fo, &so) == NUMACOLL_ERR_INVAL, "m = 0");
    CHECK(nc_model_optimal(&paper, 1e6, 0, 4096, &fo, &so) == NUMACOLL_ERR_INVAL, "b = 0");
    CHECK(nc_model_optimal(&paper, 1e6, 1e6, 0, &fo, &so) == NUMACOLL_ERR_INVAL, "page = 0");
    /* tiny messages and a budget under one page: one page, one buffer */
    CHECK(nc_model_optimal(&paper, 1, 100, 4096, &fo, &so) == 0 && fo == 4096 && so == 1,
          "tiny: f=%zu s=%zu", fo, so);
}

/* t vs f is a saw-tooth: ramps of slope ceil(m/b) t, drops of t_w where ceil(m/f) steps. */
static void test_sawtooth(void)
{
    const double m = 16 * MB, b = 4 * MB;
    int drops = 0, rises = 0;
    double prev = nc_model_time(&paper, m, 4096, b / 4096, 1);

    for (double f = 4097; f <= 65536; f += 1) {
        double tf = nc_model_time(&paper, m, f, b / f, 1);
        if (tf < prev)
            drops++;
        else if (tf > prev)
            rises++;
        prev = tf;
    }
    /* ceil(m/f) takes 4096 - 256 distinct values between f = 4 KB and 64 KB: one drop each */
    CHECK(drops == 4096 - 256, "%d drops", drops);
    CHECK(rises > 50000, "%d rises", rises);
    /* below f* the curve still rises between teeth: not monotone */
    double a = nc_model_time(&paper, m, 8192, b / 8192, 1);     /* m/f = 2048 exactly */
    double a1 = nc_model_time(&paper, m, 8193, b / 8193, 1);    /* ramps up by 4 t */
    double a2 = nc_model_time(&paper, m, 8191, b / 8191, 1);    /* one more fragment */
    CHECK(NEAR(a1 - a, 4 * T, 1e-6), "ramp %.3e", a1 - a);
    CHECK(NEAR(a2 - a, paper.t_w - 4 * T, 1e-6), "tooth %.3e", a2 - a);
    /* vs s at fixed f (Fig. 6): plateaus where ceil(m/(f s)) is constant */
    double p1 = nc_model_time(&paper, m, 8192, 1024, 1), p2 = nc_model_time(&paper, m, 8192,
                                                                           2047, 1);
    CHECK(p1 == p2, "s = 1024 .. 2047 is one plateau (ceil(2048/s) = 2)");
    CHECK(nc_model_time(&paper, m, 8192, 1023, 1) > p1, "step at s = 1023");
    printf("saw-tooth: %d drops of t_w and %d ramps between f = 4 KB and 64 KB\n", drops, rises);
}

/* Section 5.3's rules of thumb. */
static void test_rules_of_thumb(void)
{
    const nc_model_params_t unit = {1e-9, 1e-9, 1e-7, 1e-8}; /* t_w = t */
    size_t fo, so;

    /* 1. known m: f = sqrt(m) page-rounded, s = m/f (the whole message fits, b = m). */
    static const double ms[] = {64 * MB, 16 * MB, 100e6, 1 * MB};
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        double m = ms[i];
        size_t want = (size_t)ceil(sqrt(m) / 4096) * 4096;
        CHECK(nc_model_optimal(&unit, m, m, 4096, &fo, &so) == 0 && fo == want &&
                  so == (size_t)floor(m / (double)want),
              "rule 1 m=%g: f=%zu s=%zu, expected %zu", m, fo, so, want);
    }
    CHECK(nc_model_optimal(&unit, 64 * MB, 64 * MB, 4096, &fo, &so) == 0 && fo == 8192 &&
              so == 8192,
          "rule 1 at 64 MB: f=%zu s=%zu", fo, so);

    /* 2. fixed f: s = ceil(m_max/f) reaches the regime of least loss (R2) for all m <= m_max;
     *    longer queues gain nothing, shorter ones lose. */
    const double f = 8192, mmax = 3 * MB + 5;
    double s2 = ceil(mmax / f);
    for (double m = 1000; m <= mmax; m *= 1.7) {
        double t2 = nc_model_time(&paper, m, f, s2, 1);
        CHECK(t2 == nc_model_time(&paper, m, f, 4 * s2, 1), "rule 2 m=%g: longer helps", m);
    }
    CHECK(nc_model_time(&paper, mmax, f, s2 - 1, 1) > nc_model_time(&paper, mmax, f, s2, 1),
          "rule 2: a shorter queue should lose");

    /* 3. fixed s: b = m_max and f = sqrt(m_max): the optimum for m_max within budget m_max. */
    CHECK(nc_model_optimal(&unit, 16 * MB, 16 * MB, 4096, &fo, &so) == 0 && fo == 4096,
          "rule 3: f=%zu (sqrt(16 MB) = 4096)", fo);

    /* Large m (many queue turns): f* -> sqrt(b t_w / t), s* -> sqrt(b t / t_w). */
    const double b = 4 * MB;
    CHECK(nc_model_optimal(&paper, 1000 * b, b, 1, &fo, &so) == 0 &&
              fabs((double)fo - sqrt(b * 50)) <= 1 && so == (size_t)(b / (double)fo),
          "large m: f=%zu s=%zu vs %.1f, %.1f", fo, so, sqrt(b * 50), sqrt(b / 50));
    /* The paper's Fig. 5 / practice: with t_w = 50 t a 4 MB queue wants ~14.5 KB buffers,
     * i.e. the 8-16 KB range where the measured minimum was (8 KB and 12 KB). */
    CHECK(nc_model_optimal(&paper, 16 * MB, b, 4096, &fo, &so) == 0 && fo >= 8192 &&
              fo <= 16384,
          "f* %zu outside 8-16 KB", fo);
    printf("rules of thumb: f = sqrt(m) page-rounded, s = ceil(m_max/f), large-m limit ok\n");
}

/* Deterministic N(0,1) (xorshift + Box-Muller) so the noisy fit is reproducible. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform01(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

#define NMAX 4096

static void test_fit(void)
{
    static double m[NMAX], f[NMAX], s[NMAX], q[NMAX], y[NMAX];
    static const double fs[] = {1024, 4096, 8192, 16384};
    static const double ss[] = {1, 2, 8, 32};
    const nc_model_params_t truth = {2e-10, 4e-7, 9e-7, 1.5e-7};
    int n = 0;

    /* A measurement design like numacoll-tune's: sizes 64 B .. 8 MB (and odd sizes, so
     * ceil() bites) across several f, s and q. */
    for (double mm = 64; mm <= 8 * MB; mm *= 2)
        for (int odd = 0; odd < 2; odd++)
            for (size_t i = 0; i < 4; i++)
                for (size_t j = 0; j < 4; j++)
                    for (int qq = 1; qq <= 2; qq++) {
                        if (qq > ss[j])
                            continue;
                        m[n] = odd ? floor(mm * 1.37) : mm;
                        f[n] = fs[i];
                        s[n] = ss[j];
                        q[n] = qq;
                        y[n] = nc_model_time(&truth, m[n], f[n], s[n], q[n]);
                        n++;
                    }
    CHECK(n <= NMAX, "design too big");

    nc_model_params_t out;
    CHECK(nc_model_fit(m, f, s, q, y, n, &out) == 0, "exact fit failed");
    double c = truth.t_wo + truth.t_a;
    CHECK(NEAR(out.t, truth.t, 1e-9) && NEAR(out.t_w, truth.t_w, 1e-9) &&
              NEAR(out.t_wo, c, 1e-9) && out.t_a == 0,
          "exact fit: t %.6e t_w %.6e t_wo %.6e t_a %.6e", out.t, out.t_w, out.t_wo, out.t_a);
    CHECK(nc_model_fit_known_ta(m, f, s, q, y, n, truth.t_a, &out) == 0 &&
              NEAR(out.t_wo, truth.t_wo, 1e-8) && out.t_a == truth.t_a,
          "known t_a: t_wo %.6e", out.t_wo);
    printf("fit, exact data (%d rows): t %.4e t_w %.4e t_wo+t_a %.4e\n", n, out.t, out.t_w,
           out.t_wo + out.t_a);

    /* 1 % Gaussian noise on every time. */
    static double yn[NMAX];
    for (int i = 0; i < n; i++)
        yn[i] = y[i] * (1 + 0.01 * gauss());
    CHECK(nc_model_fit(m, f, s, q, yn, n, &out) == 0, "noisy fit failed");
    double et = fabs(out.t / truth.t - 1), ew = fabs(out.t_w / truth.t_w - 1),
           ec = fabs(out.t_wo / c - 1);
    CHECK(et < 0.01 && ew < 0.05 && ec < 0.05, "noisy fit errors: t %.2f%% t_w %.2f%% c %.2f%%",
          100 * et, 100 * ew, 100 * ec);
    printf("fit, 1%% noise: t %.4e (%.2f%%) t_w %.4e (%.2f%%) t_wo+t_a %.4e (%.2f%%)\n", out.t,
           100 * et, out.t_w, 100 * ew, out.t_wo, 100 * ec);

    /* Not identifiable: every message in one fragment (t_w and c always together). */
    int k = 0;
    for (int i = 0; i < n && k < 100; i++)
        if (m[i] <= f[i] && s[i] > 1) {
            m[k] = m[i], f[k] = f[i], s[k] = s[i], q[k] = q[i], y[k] = y[i];
            k++;
        }
    CHECK(k >= 3 && nc_model_fit(m, f, s, q, y, k, &out) == NUMACOLL_ERR_INVAL,
          "confounded design accepted (%d rows)", k);
    /* Bad input */
    y[0] = 0;
    CHECK(nc_model_fit(m, f, s, q, y, 3, &out) == NUMACOLL_ERR_INVAL, "time 0 accepted");
    CHECK(nc_model_fit(m, f, s, q, y, 2, &out) == NUMACOLL_ERR_INVAL, "n = 2 accepted");
    CHECK(nc_model_fit(NULL, f, s, q, y, 10, &out) == NUMACOLL_ERR_INVAL, "NULL accepted");
    CHECK(nc_model_fit_known_ta(m, f, s, q, yn, n, -1, &out) == NUMACOLL_ERR_INVAL,
          "negative t_a accepted");
}

/* The per-call fragment: worked values, the queue's bound, the floor, the cap,
 * the switch-off; then, against a search over every k up to the queue, a
 * fragment whose k is within one byte-time of the least cost (k t_w +
 * ceil(m/k) t: the ceiling moves the least by up to one). */
static double cut_cost(double m, double k, double R)
{
    return k * R + ceil(m / k);
}

static void test_call_frag(void)
{
    /* R = t_w / t = 1000 bytes. m = 16 KiB: k* = sqrt(16.384) -> 4 (4 000 + 4 096
     * < 5 000 + 3 277 < 3 000 + 5 462): fragments of 4 KiB. m = 4 KiB: 2
     * (2 000 + 2 048 < 3 000 + 1 366 < 1 000 + 4 096) -> 2 KiB. */
    CHECK(nc_model_call_frag(16384, 8192, 64, 1000) == 4096, "16 KiB");
    CHECK(nc_model_call_frag(4096, 8192, 64, 1000) == 2048, "4 KiB");
    /* 1 000 bytes: one fragment, the whole message (rounded to a line) */
    CHECK(nc_model_call_frag(1000, 8192, 64, 1000) == 1024, "one fragment");
    /* 4 MiB: sqrt(4 MiB x 1000) = 64 KiB > f: fragments of f */
    CHECK(nc_model_call_frag(4u << 20, 8192, 64, 1000) == 8192, "capped at f");
    /* 1 MiB through 4 buffers of 256 KiB: 32 fragments would wrap the queue 8
     * times; at most 4, so 256 KiB each */
    CHECK(nc_model_call_frag(1u << 20, 262144, 4, 1000) == 262144, "at most s fragments");
    CHECK(nc_model_call_frag(1u << 20, 262144, 16, 1000) == 65536, "16 buffers: 16 x 64 KiB");
    /* R = 1 byte: k* = 128 for 16 KiB, but fragments of at least 1 KiB */
    CHECK(nc_model_call_frag(16384, 8192, 64, 1) == NC_MODEL_FRAG_MIN, "the floor");
    CHECK(nc_model_call_frag(16384, 8192, 64, 0) == 8192, "t_w = 0: fixed fragments");
    CHECK(nc_model_call_frag(16384, 8192, 64, NAN) == 8192, "NaN: fixed fragments");
    CHECK(nc_model_call_frag(64, 8192, 64, 1000) == 8192, "a line or less: f");
    unsigned seed = 12345;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        const size_t m = 65 + (seed >> 4) % (8u << 20);
        seed = seed * 1103515245u + 12345u;
        const double R = 16 + (seed >> 8) % 20000;
        const size_t f = (size_t)4096 << (seed % 8);
        const size_t s = (size_t)1 << (seed >> 3) % 9;
        const size_t got = nc_model_call_frag(m, f, s, R);
        const double md = (double)m, ks = sqrt(md / R);
        double best = INFINITY;
        for (double k = 1; k <= 4 * ks + 8 && k <= (double)s; k++)
            best = fmin(best, cut_cost(md, k, R));
        int ok = 0;
        for (double k = 1; k <= 4 * ks + 8 && k <= (double)s && !ok; k++) {
            if (cut_cost(md, k, R) > best + 1)
                continue;
            double want = ceil(ceil(md / k) / 64) * 64;
            const double lo = md < 1024 ? ceil(md / 64) * 64 : 1024;
            want = fmin(fmax(want, lo), (double)f);
            ok = (double)got == want;
        }
        CHECK(ok && got >= 64 && got <= f && (m + got - 1) / got <= (f >= m ? s : (m + f - 1) / f + s),
              "m=%zu R=%.0f f=%zu s=%zu: fragment %zu is not one of the least cost", m, R, f, s, got);
        if (!ok)
            break;
    }
}

/* The gather family's switch points with the built-in constants (segment
 * 8.5 us + 130 ps/byte, CMA 3.5 us + 200 ps/byte): CMA wins from the floor
 * on, which is 64 KiB for two members with a CPU each and 128 KiB otherwise;
 * allgather never takes CMA from p = 3 (CMA's p (p-1) copies against the
 * segment's p^2 at 200 against 130 ps). */
static void test_xg_floor(void)
{
    const nc_xfer_model_t x = {.shm_lat = 8.5e-6, .shm_byte = 130e-12, .cma_lat = 3.5e-6,
                               .cma_byte = 200e-12};
    for (int kind = NC_XG_ROOTED; kind < NC_XG_KINDS; kind++) {
        size_t got = nc_xg_switch_point(&x, kind, 2, 2, 1, 224);
        CHECK(got == NC_XG_CMA_FLOOR_PAIR, "kind %d, p=2 on 2 CPUs: %zu", kind, got);
        got = nc_xg_switch_point(&x, kind, 2, 8, 1, 224);
        CHECK(got == NC_XG_CMA_FLOOR_PAIR, "kind %d, p=2 on 8 CPUs: %zu", kind, got);
        got = nc_xg_switch_point(&x, kind, 2, 1, 1, 224);
        CHECK(got == NC_XG_CMA_FLOOR || got == SIZE_MAX, "kind %d, p=2 on 1 CPU: %zu", kind, got);
        got = nc_xg_switch_point(&x, kind, 3, 2, 1, 224);
        CHECK(kind == NC_XG_ALLGATHER  ? got == SIZE_MAX
              : kind == NC_XG_ALLTOALL ? got == NC_XG_CMA_FLOOR_OVERSUB_ALLTOALL
              : kind == NC_XG_SCATTER  ? got == NC_XG_CMA_FLOOR_OVERSUB_SCATTER
                                       : got == NC_XG_CMA_FLOOR,
              "kind %d, p=3 on 2 CPUs: %zu", kind, got);
        got = nc_xg_switch_point(&x, kind, 4, 4, 1, 224);
        CHECK(kind == NC_XG_ALLGATHER ? got == SIZE_MAX : got == NC_XG_CMA_FLOOR,
              "kind %d, p=4 on 4 CPUs: %zu", kind, got);
    }
    /* an inline size above the floor lifts it */
    CHECK(nc_xg_switch_point(&x, NC_XG_ROOTED, 2, 2, 1, 70000) == 70001, "inline 70000");
}

/* The broadcast's switch point with the built-in constants: 32 KiB at p = 2
 * on 2 CPUs (the cooperative line, above the 16 KiB x p share floor); with
 * more members than CPUs the per-byte line never crosses, and the cap takes
 * CMA from 1 MiB. */
static void test_bcast_switch(void)
{
    const nc_xfer_model_t x = {.shm_lat = 8.5e-6, .shm_byte = 130e-12, .cma_lat = 3.5e-6,
                               .cma_byte = 200e-12};
    size_t got = nc_cma_switch_point(&x, 2, 2, 1, 256);
    CHECK(got == 32768, "p=2 on 2 CPUs: %zu", got);
    for (int p = 3; p <= 8; p++) {
        got = nc_cma_switch_point(&x, p, 2, 1, 256);
        CHECK(got == NC_CMA_OVERSUB_MAX, "p=%d on 2 CPUs: %zu", p, got);
        got = nc_cma_switch_point(&x, p, p, 1, 256);
        CHECK(got != NC_CMA_OVERSUB_MAX || p * NC_CMA_SHARE_MIN == NC_CMA_OVERSUB_MAX,
              "p=%d on %d CPUs: the cap applies only with more members than CPUs", p, p);
    }
    /* a queue-inline size above the cap leaves the model's answer */
    CHECK(nc_cma_switch_point(&x, 4, 2, 1, (size_t)2 << 20) == SIZE_MAX, "inline above the cap");
}

int main(void)
{
    test_bcast_switch();
    test_xg_floor();
    test_call_frag();
    test_paper_numbers();
    test_regimes();
    test_optimum_grid();
    test_sawtooth();
    test_rules_of_thumb();
    test_fit();
    if (failures) {
        fprintf(stderr, "test_model: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_model: OK\n");
    return 0;
}
