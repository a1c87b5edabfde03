/*
 * tests/exec/test_load_stress.c — the stressor's duty-cycle arithmetic and busy windows, the calibration
 * table (inversion, save/load, refusals), baseline files, and short real runs of the probes, the
 * recorder and the CPU hogs (no timing assertions: only that they run, stop and write valid traces).
 * Without a GPU, also that GPU/PCIe load is refused with ATS_ENOTFOUND.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atsc/trace_io.h"
#include "ld/load.h"
#include "testutil.h"

static char tmpdir[256];

static void test_duty_arithmetic(uint64_t *rng)
{
    for (int rep = 0; rep < 10000; rep++) {
        int k = 1 + (int)(tu_rand(rng) % 8);
        double d = tu_uniform(rng, 0, 1);
        double a = ld_stress_avail(d, k);
        /* brute force: time-average share of a victim, busy phase 1/(k+1), idle phase 1 */
        CHECK_NEAR(a, d * (1.0 / (k + 1)) + (1 - d) * 1.0, 1e-12);
        CHECK_NEAR(ld_stress_duty(a, k), d, 1e-9); /* inverse */
        double t = tu_uniform(rng, 0.01, 1.0);
        double dd = ld_stress_duty(t, k);
        CHECK(dd >= 0 && dd <= 1);
        if (t >= 1.0 / (k + 1)) CHECK_NEAR(ld_stress_avail(dd, k), t, 1e-9);
        else CHECK(dd == 1.0); /* infeasible: the most load k hogs give */
        /* hogs_needed: smallest k with 1/(k+1) <= a, against a linear search */
        int want = 1;
        while (1.0 / (want + 1) > t + 1e-12) want++;
        CHECK_MSG(ld_stress_hogs_needed(t) == want, "a=%.17g got %d want %d", t, ld_stress_hogs_needed(t), want);
    }
    CHECK(ld_stress_duty(1.0, 3) == 0.0 && ld_stress_duty(1.5, 3) == 0.0 && ld_stress_duty(NAN, 2) == 0.0);
    CHECK(ld_stress_avail(-1, 2) == 1.0 && ld_stress_avail(2, 1) == 0.5);
    CHECK(ld_stress_hogs_needed(0.4) == 2 && ld_stress_hogs_needed(0.5) == 1 && ld_stress_hogs_needed(1.0) == 1);
    CHECK(ld_stress_hogs_needed(0.25) == 3 && ld_stress_hogs_needed(0.2499) == 4);
    /* staggered model: a = 1/(1 + d k), the same ends as the synchronized one, inverse of each other */
    for (int rep = 0; rep < 1000; rep++) {
        int k = 1 + (int)tu_uniform(rng, 0, 64);
        double d = tu_uniform(rng, 0, 1), a = ld_stress_avail_st(d, k, 1);
        CHECK_NEAR(a, 1.0 / (1.0 + d * k), 1e-12);
        CHECK_NEAR(ld_stress_duty_st(a, k, 1), d, 1e-9);
        CHECK(ld_stress_duty_st(a, k, 0) == ld_stress_duty(a, k) && ld_stress_avail_st(d, k, 0) == ld_stress_avail(d, k));
        CHECK(a <= ld_stress_avail(d, k) + 1e-12); /* staggered hogs take at least as much at the same duty */
    }
    CHECK(ld_stress_duty_st(1.0, 4, 1) == 0.0 && ld_stress_duty_st(0.2, 4, 1) == 1.0 && ld_stress_duty_st(0.1, 4, 1) == 1.0);
    CHECK(ld_stress_avail_st(1.0, 4, 1) == 0.2 && ld_stress_avail_st(0.0, 4, 1) == 1.0);
}

/* The busy time of one period [start, start + P) as the hogs see it: follow the intervals of
 * ld_stress_window from the period's start, as window()/cpu_hog do. */
static double period_busy(double epoch, double P, double d, int64_t k, double *first_bs)
{
    /* from just after the period's start: at exactly epoch + k·P the division may round to k - 1 */
    double start = epoch + (double)k * P, now = start + 1e-7 * P, busy = 0;
    *first_bs = NAN;
    for (int guard = 0; guard < 4 && now < start + P * (1 - 1e-12); guard++) {
        double bs, be, pe;
        ld_stress_window(epoch, P, d, 0.0, now, &bs, &be, &pe);
        /* the interval contains now (a wrapped first part starts at the period's start, before now)
         * or comes after it */
        CHECK(be >= now - 1e-9 * (1 + epoch) && be >= bs && bs >= start - 1e-9 * (1 + epoch) &&
              pe >= be - 1e-9 * (1 + epoch));
        CHECK(pe <= start + P + 1e-9 * (1 + epoch));
        if (isnan(*first_bs)) *first_bs = bs;
        busy += be - bs;
        if (!(pe > now)) break;
        now = pe;
    }
    return busy;
}

/* 1 when a victim at absolute time t is inside a busy interval. */
static int busy_at_shift(double epoch, double P, double d, double shift, double t)
{
    double bs, be, pe;
    ld_stress_window(epoch, P, d, shift, t, &bs, &be, &pe);
    return t >= bs && t < be;
}

static int busy_at(double epoch, double P, double d, double t)
{
    double bs, be, pe;
    ld_stress_window(epoch, P, d, 0.0, t, &bs, &be, &pe);
    return t >= bs && t < be;
}

static void test_window(uint64_t *rng)
{
    for (int rep = 0; rep < 200; rep++) {
        double epoch = tu_uniform(rng, 0, 1e5), P = tu_uniform(rng, 1e-3, 0.5), d = tu_uniform(rng, 0, 1);
        if (rep % 20 == 0) d = rep % 40 ? 0.0 : 1.0;
        if (rep % 20 == 10) d = tu_uniform(rng, 0.8, 0.95); /* long windows: the case that aliased */
        int periods = 400;
        for (int k = 0; k < periods; k++) {
            double fb;
            /* every period is busy for exactly d·P (one or two parts) */
            CHECK_NEAR(period_busy(epoch, P, d, k, &fb), d * P, 1e-9 * (1 + epoch));
            /* the same period asked at another moment gives the same intervals (all hogs agree) */
            double start = epoch + k * P, t = start + tu_uniform(rng, 0, 0.999) * P;
            int b1 = busy_at(epoch, P, d, t), b2 = busy_at(epoch, P, d, t);
            CHECK(b1 == b2);
        }
        /* a victim at a FIXED phase of the period (a recorder on a grid of whole periods) is busy
         * with probability d, whatever the phase; the non-circular window failed this at phases near
         * the period's ends (0 or 1 instead of d) */
        for (int ph = 0; ph < 5; ph++) {
            double phase = ph < 2 ? (ph == 0 ? 0.01 : 0.99) : tu_uniform(rng, 0, 1);
            int n = 2000, hit = 0;
            for (int k = 0; k < n; k++) hit += busy_at(epoch, P, d, epoch + (k + phase) * P);
            double sd = sqrt(d * (1 - d) / n);
            CHECK_MSG(fabs((double)hit / n - d) <= 6 * sd + 1e-12, "d %.3f phase %.3f: busy %.3f of the periods",
                      d, phase, (double)hit / n);
        }
    }
}

/* Staggered hogs (GPU): k hogs with shifts i/k have floor(d*k) or ceil(d*k) busy at any moment (all k
 * or none without the shift), and each one alone is still busy d of the time. */
static void test_stagger(uint64_t *rng)
{
    for (int rep = 0; rep < 100; rep++) {
        double epoch = tu_uniform(rng, 0, 1e4), P = tu_uniform(rng, 1e-3, 0.1), d = tu_uniform(rng, 0.01, 0.99);
        int k = 1 + (int)(tu_uniform(rng, 0, 16));
        int lo = (int)floor(d * k), hi = (int)ceil(d * k), bad = 0, together = 0;
        double busy1 = 0;
        const int n = 3000;
        for (int s = 0; s < n; s++) {
            double t = epoch + tu_uniform(rng, 0, 200) * P;
            int c = 0, c0 = 0;
            for (int i = 0; i < k; i++) {
                c += busy_at_shift(epoch, P, d, (double)i / k, t);
                c0 += busy_at_shift(epoch, P, d, 0.0, t);
            }
            bad += c < lo || c > hi;
            together += c0 == 0 || c0 == k;
            busy1 += busy_at_shift(epoch, P, d, (double)(k - 1) / k, t);
        }
        CHECK_MSG(bad <= n / 500, "d %.3f k %d: %d of %d moments outside [%d, %d] busy", d, k, bad, n, lo, hi);
        CHECK(together == n); /* the negative control: unshifted hogs move together */
        CHECK_MSG(fabs(busy1 / n - d) <= 6 * sqrt(d * (1 - d) / n) + 1e-9, "d %.3f: shifted hog busy %.3f", d, busy1 / n);
    }
}

static void test_calib(uint64_t *rng)
{
    for (int rep = 0; rep < 200; rep++) {
        ld_stress_calib c;
        memset(&c, 0, sizeof c);
        int r = (int)(tu_rand(rng) % 3);
        int n = 2 + (int)(tu_rand(rng) % 8);
        c.k[r] = 3;
        c.n[r] = n;
        double m = 1.0, a = tu_uniform(rng, 0.95, 1.0);
        for (int i = 0; i < n; i++) {
            c.model[r][i] = m;
            c.measured[r][i] = a;
            m -= tu_uniform(rng, 0.02, 0.09);
            a -= (tu_rand(rng) & 3) == 0 ? 0.0 : tu_uniform(rng, 0.0, 0.1); /* flat steps too */
            if (a < 0.05) a = 0.05;
        }
        /* exact at the table points where the measured value is strictly decreasing */
        for (int i = 0; i < n; i++)
            if ((i == 0 || c.measured[r][i] < c.measured[r][i - 1]) && i > 0)
                CHECK_NEAR(ld_stress_calib_invert(&c, (enum atsc_resource)r, c.measured[r][i]), c.model[r][i], 1e-12);
        /* forward interpolation of the inverse gives the target back inside the measured range */
        for (int q = 0; q < 20; q++) {
            double t = tu_uniform(rng, c.measured[r][n - 1], c.measured[r][0]);
            double mm = ld_stress_calib_invert(&c, (enum atsc_resource)r, t);
            CHECK(mm <= 1.0 && mm >= c.model[r][n - 1]);
            for (int i = 0; i + 1 < n; i++)
                if (mm <= c.model[r][i] && mm >= c.model[r][i + 1] && c.measured[r][i] > c.measured[r][i + 1]) {
                    double f = (c.model[r][i] - mm) / (c.model[r][i] - c.model[r][i + 1]);
                    double back = c.measured[r][i] + f * (c.measured[r][i + 1] - c.measured[r][i]);
                    CHECK_NEAR(back, t, 1e-9);
                    break;
                }
        }
        CHECK(ld_stress_calib_invert(&c, (enum atsc_resource)r, 1.0) == 1.0);
        CHECK(ld_stress_calib_invert(&c, (enum atsc_resource)r, 0.01) == c.model[r][n - 1]);
        CHECK(ld_stress_calib_invert(&c, (enum atsc_resource)((r + 1) % 3), 0.37) == 0.37); /* uncalibrated */
        /* save / load round trip */
        char path[512];
        snprintf(path, sizeof path, "%s/calib.txt", tmpdir);
        ats_err err = {{0}};
        CHECK(ld_stress_calib_save(&c, path, &err) == ATS_OK);
        ld_stress_calib back;
        CHECK_MSG(ld_stress_calib_load(path, &back, &err) == ATS_OK, "%s", err.msg);
        CHECK(back.n[r] == n && back.k[r] == 3);
        for (int i = 0; i < n; i++) {
            CHECK_NEAR(back.model[r][i], c.model[r][i], 1e-6);
            CHECK_NEAR(back.measured[r][i], c.measured[r][i], 1e-6);
        }
        unlink(path);
    }
    /* refusals name the file and the line */
    static const char *const bad[] = {"cpu 3 1.0 1.0\ncpu 3 1.0 0.9\n", "gpu 0 1.0 1.0\n", "disk 3 1.0 1.0\n",
                                      "cpu 3 1.0 1.2\n", "cpu 3 1.0\n", "cpu 3 1.0 1.0\ncpu 2 0.9 0.8\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/bad.txt", tmpdir);
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        ld_stress_calib c;
        ats_err err = {{0}};
        CHECK(ld_stress_calib_load(path, &c, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "line "), "%s", err.msg);
        unlink(path);
    }
}

static void test_baseline_file(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s/base.txt", tmpdir);
    ld_baseline b = {{tu_uniform(rng, 1e-4, 1e-2), NAN, tu_uniform(rng, 1e-4, 1e-2)}, 7, 0, 3, 250000};
    ats_err err = {{0}};
    CHECK(ld_baseline_save(&b, path, &err) == ATS_OK);
    ld_baseline c;
    CHECK_MSG(ld_baseline_load(path, &c, &err) == ATS_OK, "%s", err.msg);
    CHECK_REL(c.t_s[0], b.t_s[0], 1e-8, 0);
    CHECK(isnan(c.t_s[1]));
    CHECK(c.cpu_reps == 7 && c.gpu_iters == 0 && c.threads == 3 && c.slice_ns == 250000);
    ld_probe_opts po = ld_probe_opts_default();
    ld_probe_opts_from_baseline(&po, &c);
    CHECK(po.slice_ns == 250000); /* the probes run as they did for the baseline */
    FILE *f = fopen(path, "w");
    fputs("0.001 nan 0.002 7 0 3\n", f); /* 6 fields (before the slice): the slice is not recorded */
    fclose(f);
    CHECK_MSG(ld_baseline_load(path, &c, &err) == ATS_OK && c.slice_ns == -1, "%s", err.msg);
    po = ld_probe_opts_default();
    ld_probe_opts_from_baseline(&po, &c);
    CHECK(po.slice_ns == LD_SLICE_NS_DEFAULT);
    f = fopen(path, "w");
    fputs("0.001 nan 0.002 7 0 3 0\n", f); /* 0: the kernel's slice */
    fclose(f);
    CHECK_MSG(ld_baseline_load(path, &c, &err) == ATS_OK && c.slice_ns == 0, "%s", err.msg);
    f = fopen(path, "w");
    fputs("0.001 nan -1 7 0 3\n", f);
    fclose(f);
    CHECK(ld_baseline_load(path, &c, &err) == ATS_EINVAL && strstr(err.msg, "pcie_s") && strstr(err.msg, path));
    f = fopen(path, "w");
    fputs("0.001 nan 0.002\n", f);
    fclose(f);
    CHECK(ld_baseline_load(path, &c, &err) == ATS_EINVAL && strstr(err.msg, "6 or 7 fields"));
    /* counts beyond what a probe may run (a tester's 1e9 repetitions held the probe lock for minutes) */
    static const char *const big[] = {"0.0019 nan nan 1000000000 0 2\n", "0.0019 nan nan 5 0 5000\n",
                                      "0.0019 nan nan 5 1e11 2\n", "0.0019 nan nan 2.5 0 2\n", "20 nan nan 5 0 2\n",
                                      "0.0019 nan nan 1e12 0 2\n", "0.0019 nan nan 3e9 0 2\n",
                                      "inf nan nan 5 0 2\n", "1e300 nan nan 5 0 2\n", "0.0019 nan nan 5 0 1.7\n",
                                      "0.0019 inf nan 5 0 2\n", "0.0019 nan nan 5 0 2 9\n",
                                      "0.0019 nan nan 5 0 2\n0.002 nan nan 5 0 2\n", "0.0019 nan nan 5 0 2 100000 7\n",
                                      "0.0019 nan nan 5 0 2 2e8\n", "0.0019 nan nan 5 0 2 150000.5\n"};
    static const char *const field[] = {"cpu_reps", "threads", "gpu_iters", "cpu_reps", "cpu_s", "cpu_reps",
                                        "cpu_reps", "cpu_s", "cpu_s", "threads", "gpu_s", "slice_ns) = '9'",
                                        "slice_ns) = '0.002'", "'7' after the 7 fields", "slice_ns) = '2e8'",
                                        "slice_ns) = '150000.5'"};
    for (int i = 0; i < 16; i++) {
        f = fopen(path, "w");
        fputs(big[i], f);
        fclose(f);
        CHECK_MSG(ld_baseline_load(path, &c, &err) == ATS_EINVAL && strstr(err.msg, field[i]), "%s -> %s", big[i],
                  err.msg);
    }
    /* a binary file's bytes come back escaped (\xNN), never raw (a tester saw byte 0211 on the terminal) */
    static const char *const bin[] = {"0.0019 nan nan \211\001 0 2\n", "0.0019 nan nan 5 0 2 0 \211\033[31m\n"};
    static const char *const bin_want[] = {"field 4 (cpu_reps) = '\\x89\\x01'", "'\\x89\\x1b[31m' after the 7 fields"};
    for (int i = 0; i < 2; i++) {
        f = fopen(path, "w");
        fputs(bin[i], f);
        fclose(f);
        CHECK_MSG(ld_baseline_load(path, &c, &err) == ATS_EINVAL && strstr(err.msg, bin_want[i]) &&
                      !strchr(err.msg, '\211') && !strchr(err.msg, '\033'),
                  "%s", err.msg);
    }
    unlink(path);
    /* a directory is named as one (it said "line 1: need 6 fields") */
    snprintf(path, sizeof path, "%s/base-dir", tmpdir);
    CHECK(mkdir(path, 0700) == 0);
    enum ats_status ds = ld_baseline_load(path, &c, &err);
    CHECK_MSG(ds != ATS_OK && strstr(err.msg, "is a directory") && strstr(err.msg, path), "%d %s", (int)ds, err.msg);
    rmdir(path);
    CHECK(ld_avail_from_times(1.0, 2.0) == 0.5 && ld_avail_from_times(1.0, 0.5) == 1.0);
    CHECK(ld_avail_from_times(1.0, 1e9) == 0.01 && ld_avail_from_times(NAN, 1.0) == 1.0);
}


/* ------------------------------------------------------------------ controller on simulated plants */

/* A simulated resource: expected availability next to its hogs at duty d (and the other resource's
 * duty d_other), and what a control interval's probes report. */
enum plant_kind { PL_MODEL, PL_POWER, PL_CLIFF, PL_OFFSET, PL_KINDS };
typedef struct plant {
    enum plant_kind kind;
    int k;
    double p;       /* PL_POWER: a = 1 - (1 - b) d^p */
    double dc, lo;  /* PL_CLIFF: a = 1 up to duty dc, then a ramp of width 0.02 down to lo */
    double off;     /* PL_OFFSET: model + off */
    double cross;   /* availability lost per unit of the other resource's duty */
    double sigma;   /* Gaussian probe noise (std) */
    int binary;     /* 1: each probe sees 1 or the busy level (a duty-cycled plant), mean = expected */
    int probes;
} plant;

static double clip01(double a) { return a < 0.01 ? 0.01 : a > 1 ? 1 : a; }

static double plant_expected(const plant *pl, double d, double d_other)
{
    double b = 1.0 / (pl->k + 1), a;
    switch (pl->kind) {
    case PL_POWER: a = 1 - (1 - b) * pow(d, pl->p); break;
    case PL_CLIFF: a = d <= pl->dc ? 1 : d >= pl->dc + 0.02 ? pl->lo : 1 - (1 - pl->lo) * (d - pl->dc) / 0.02; break;
    case PL_OFFSET: a = ld_stress_avail(d, pl->k) + pl->off; break;
    default: a = ld_stress_avail(d, pl->k); break;
    }
    return clip01(a - pl->cross * d_other);
}

static double gauss(uint64_t *rng)
{
    double u = tu_uniform(rng, 1e-12, 1), v = tu_uniform(rng, 0, 1);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static double plant_measure(const plant *pl, double expected, uint64_t *rng)
{
    double sum = 0;
    for (int i = 0; i < pl->probes; i++) {
        double x = expected;
        if (pl->binary) { /* busy level lo_b with probability q, else 1: mean = expected */
            double lo_b = 0.5 * expected, q = (1 - expected) / (1 - lo_b);
            x = tu_uniform(rng, 0, 1) < q ? lo_b : 1.0;
        }
        sum += clip01(x + pl->sigma * gauss(rng));
    }
    return sum / pl->probes;
}

static plant random_plant(uint64_t *rng, enum plant_kind kind)
{
    plant pl = {.kind = kind, .k = 2 + (int)(tu_rand(rng) % 5), .probes = 3};
    pl.p = tu_uniform(rng, 0.6, 2.5);
    pl.dc = tu_uniform(rng, 0.4, 0.9);
    pl.lo = tu_uniform(rng, 0.05, 0.25);
    pl.off = tu_uniform(rng, -0.1, 0.1);
    pl.sigma = tu_uniform(rng, 0, 0.15);
    pl.binary = (tu_rand(rng) & 1) && kind != PL_CLIFF;
    return pl;
}

/* What `ats record` beside the stressor sees during one control step: its own probes (5 per 0.5 s),
 * with the same noise and the same clipping to [0.01, 1] as the controller's probes, drawn apart. */
static double recorded(const plant *pl, double expected, uint64_t *rng)
{
    plant r = *pl;
    r.probes = 5;
    return plant_measure(&r, expected, rng);
}

/* Runs one controller on plant pl for n steps of dt toward target (the other resource idle); returns
 * the mean recorded availability over steps [from, n), and checks every duty is in [0, 1].
 * *max_err_after: largest relative error of the expected availability over those steps. */
static double run_loop(const plant *pl, const ld_ctl_opts *co, double target, int n, int from, double dt,
                       uint64_t *rng, double *max_err_after)
{
    ld_ctl c;
    ld_ctl_init(&c);
    double d = ld_ctl_update(&c, co, target, NAN, 0), sum = 0;
    *max_err_after = 0;
    for (int i = 0; i < n; i++) {
        CHECK_MSG(d >= 0 && d <= 1, "duty %g out of [0, 1] at step %d", d, i);
        double e = plant_expected(pl, d, 0);
        if (i >= from) {
            sum += recorded(pl, e, rng);
            if (fabs(e - target) / target > *max_err_after) *max_err_after = fabs(e - target) / target;
        }
        d = ld_ctl_update(&c, co, target, plant_measure(pl, e, rng), dt);
    }
    return sum / (n - from);
}

/* Stated convergence (ki 0.8 /s, dt 0.5 s, 3 probes a step; targets in [0.3, 0.9], at least 1.5 x the
 * plant's floor (duty 1) and at most its ceiling (duty 0) / 1.1):
 *  - the model plant without noise: every step from step 10 (5 s) on within 5 % of the target;
 *  - power-law and offset plants, Gaussian or duty-cycle (binary) probe noise: the mean of what a
 *    recorder sees over steps 40..6040 (20 s .. 3020 s) within 5 % (noise and clipping included: the
 *    loop matches the mean of clipped probe readings, which is what a recording averages);
 *  - a cliff plant (1 up to a duty, then almost nothing): the same, the loop dithering across the cliff
 *    (its time average is the target, see ld_ctl_update).
 *  The long window is for the test's sake: with duty-cycle probe noise (each probe sees 1 or a busy
 *  level) a 1000 s mean still scatters by ~2 % (1 sigma) at low targets, around an expected error of 0. */
static void test_ctl_plants(uint64_t *rng)
{
    const double dt = 0.5;
    for (int rep = 0; rep < 300; rep++) {
        enum plant_kind kind = (enum plant_kind)(rep % PL_KINDS);
        plant pl = random_plant(rng, kind);
        int exact = kind == PL_MODEL && rep % 8 == 0;
        if (exact) pl.sigma = 0, pl.binary = 0;
        /* feasible with room, as the stressor's default hog count gives (floor about target / 2.5) */
        double floor_a = plant_expected(&pl, 1.0, 0), ceil_a = plant_expected(&pl, 0.0, 0);
        double target = tu_uniform(rng, 0.3, 0.9);
        if (target < floor_a * 1.5) target = floor_a * 1.5;
        if (target > 0.9 || target > ceil_a / 1.1) continue;
        ld_ctl_opts co = ld_ctl_opts_default(pl.k, ATSC_RES_CPU);
        double maxe, mean;
        if (exact) {
            mean = run_loop(&pl, &co, target, 60, 10, dt, rng, &maxe);
            CHECK_MSG(maxe < 0.05, "model plant k=%d target %.3f: max error %.3f after step 10", pl.k, target, maxe);
            continue; /* the wrong sign would sit on the exact feed-forward: nothing pushes it away */
        }
        mean = run_loop(&pl, &co, target, 6040, 40, dt, rng, &maxe);
        CHECK_MSG(fabs(mean - target) / target < 0.05,
                  "plant kind %d k=%d p=%.2f dc=%.2f lo=%.2f off=%.3f sigma=%.3f binary=%d target %.3f: recorded %.4f",
                  (int)kind, pl.k, pl.p, pl.dc, pl.lo, pl.off, pl.sigma, pl.binary, target, mean);
        /* negative control: the same loop with the wrong sign, on the plant without noise (with skewed
         * probe noise a loop pinned at a bound makes excursions whose mean can land anywhere), runs
         * away to a bound (duty 0: about 1, or duty 1: the plant's floor; both far from the targets
         * kept here) and misses. The model plant starts exactly on target: nothing would push it. */
        if (floor_a > 0.7 * target || target > 0.8 || kind == PL_MODEL) continue;
        ld_ctl_opts bad = co;
        bad.ki_per_s = -co.ki_per_s;
        plant quiet = pl;
        quiet.sigma = 0;
        quiet.binary = 0;
        double m_bad = run_loop(&quiet, &bad, target, 840, 40, dt, rng, &maxe);
        CHECK_MSG(fabs(m_bad - target) / target > 0.05,
                  "wrong-sign controller converged (kind %d k=%d off=%.3f sigma=%.3f binary=%d floor %.3f target %.3f: "
                  "%.4f)", (int)kind, pl.k, pl.off, pl.sigma, pl.binary, floor_a, target, m_bad);
    }
}

/* Two resources at once, each losing availability with the other's duty (e.g. PCIe copies slowing
 * the GPU probe): both recorded within 5 % on average over steps 40..2040. */
static void test_ctl_cross(uint64_t *rng)
{
    for (int rep = 0; rep < 100; rep++) {
        plant pa = random_plant(rng, PL_POWER), pb = random_plant(rng, PL_OFFSET);
        pa.cross = tu_uniform(rng, 0, 0.2);
        pb.cross = tu_uniform(rng, 0, 0.2);
        double ta = tu_uniform(rng, 0.35, 0.8), tb = tu_uniform(rng, 0.35, 0.8);
        /* feasible with room whatever the other's duty: the floor with the other resource idle, the
         * ceiling with it at duty 1 */
        if (ta < plant_expected(&pa, 1, 0) * 1.5 || tb < plant_expected(&pb, 1, 0) * 1.5) continue;
        if (ta > plant_expected(&pa, 0, 1) / 1.1 || tb > plant_expected(&pb, 0, 1) / 1.1) continue;
        ld_ctl_opts oa = ld_ctl_opts_default(pa.k, ATSC_RES_GPU), ob = ld_ctl_opts_default(pb.k, ATSC_RES_PCIE);
        ld_ctl ca, cb;
        ld_ctl_init(&ca);
        ld_ctl_init(&cb);
        double da = ld_ctl_update(&ca, &oa, ta, NAN, 0), db = ld_ctl_update(&cb, &ob, tb, NAN, 0), sa = 0, sb = 0;
        for (int i = 0; i < 2040; i++) {
            double ea = plant_expected(&pa, da, db), eb = plant_expected(&pb, db, da);
            if (i >= 40) sa += recorded(&pa, ea, rng), sb += recorded(&pb, eb, rng);
            da = ld_ctl_update(&ca, &oa, ta, plant_measure(&pa, ea, rng), 0.5);
            db = ld_ctl_update(&cb, &ob, tb, plant_measure(&pb, eb, rng), 0.5);
            CHECK(da >= 0 && da <= 1 && db >= 0 && db <= 1);
        }
        CHECK_MSG(fabs(sa / 2000 - ta) / ta < 0.05 && fabs(sb / 2000 - tb) / tb < 0.05,
                  "cross: targets %.3f %.3f, recorded %.4f %.4f", ta, tb, sa / 2000, sb / 2000);
    }
}

/* Steps, target 1, anti-windup, feed-forward from a calibration, and the integral identity. */
static void test_ctl_rules(uint64_t *rng)
{
    for (int rep = 0; rep < 200; rep++) {
        int k = 1 + (int)(tu_rand(rng) % 6);
        ld_ctl_opts co = ld_ctl_opts_default(k, ATSC_RES_CPU);
        ld_ctl c;
        ld_ctl_init(&c);
        double t1 = tu_uniform(rng, 1.0 / (k + 1), 0.95), t2 = tu_uniform(rng, 1.0 / (k + 1), 0.95);
        /* a new target: feed-forward jump (the model), measured ignored */
        double d = ld_ctl_update(&c, &co, t1, 0.01, 0.5);
        CHECK_NEAR(d, ld_stress_duty(t1, k), 1e-12);
        CHECK(c.active && c.trim == 0);
        /* a few steps move the trim; a small change keeps it (the feed-forward follows), a step of the
         * target resets it */
        for (int i = 0; i < 5; i++) ld_ctl_update(&c, &co, t1, tu_uniform(rng, 0, 1), 0.5);
        double trim = c.trim, t1b = t1 + (t1 < 0.9 ? 0.03 : -0.03);
        CHECK(!ld_ctl_is_step(&c, &co, t1b));
        ld_ctl_update(&c, &co, t1b, NAN, 0);
        CHECK_MSG(c.trim == trim || c.saturated, "trim %.17g -> %.17g (u %.6f, t %.4f -> %.4f)", trim, c.trim, c.u, t1, t1b);
        if (fabs(t2 - t1b) > co.step_tol) {
            CHECK(ld_ctl_is_step(&c, &co, t2));
            CHECK_NEAR(ld_ctl_update(&c, &co, t2, 0.3, 0.5), ld_stress_duty(t2, k), 1e-12);
            CHECK(c.trim == 0);
        }
        /* integral identity while unsaturated: sum (measured - target) dt = -(trim change) / ki */
        ld_ctl_init(&c);
        double t = tu_uniform(rng, 0.5, 0.8);
        ld_ctl_update(&c, &co, t, NAN, 0);
        double acc = 0, trim0 = c.trim;
        int clean = 1;
        for (int i = 0; i < 20; i++) {
            double m = t + tu_uniform(rng, -0.02, 0.02), dt = tu_uniform(rng, 0.3, 0.7);
            ld_ctl_update(&c, &co, t, m, dt);
            acc += (m - t) * dt;
            clean &= !c.saturated;
        }
        if (clean) CHECK_NEAR(acc, -(c.trim - trim0) / co.ki_per_s, 1e-9);
        /* target 1 (and NaN): no control, hogs off, state reset */
        CHECK(ld_ctl_is_step(&c, &co, 1.0) && !ld_ctl_is_step(&c, &co, t));
        CHECK(ld_ctl_update(&c, &co, 1.0, 0.2, 0.5) == 0.0 && !c.active && c.trim == 0);
        CHECK(ld_ctl_is_step(&c, &co, t) && !ld_ctl_is_step(&c, &co, 1.0));
        CHECK(ld_ctl_update(&c, &co, NAN, 0.2, 0.5) == 0.0 && !c.active);
        /* NaN measured holds */
        ld_ctl_update(&c, &co, t, NAN, 0);
        ld_ctl_update(&c, &co, t, 0.9, 0.5);
        double held = c.trim;
        ld_ctl_update(&c, &co, t, NAN, 0.5);
        CHECK(c.trim == held);
    }
    /* anti-windup: 100 steps of an unreachable target (the plant cannot go below 0.7 meanwhile), then
     * the disturbance goes: back within 5 % in 15 steps; the trim never left the duty range meanwhile */
    for (int rep = 0; rep < 50; rep++) {
        plant pl = {.kind = PL_OFFSET, .k = 3, .off = 0.55, .probes = 3};
        ld_ctl_opts co = ld_ctl_opts_default(pl.k, ATSC_RES_CPU);
        ld_ctl c;
        ld_ctl_init(&c);
        double target = tu_uniform(rng, 0.4, 0.6);
        double d = ld_ctl_update(&c, &co, target, NAN, 0);
        for (int i = 0; i < 100; i++) {
            d = ld_ctl_update(&c, &co, target, plant_measure(&pl, plant_expected(&pl, d, 0), rng), 0.5);
            CHECK(c.u >= 1.0 / (pl.k + 1) - 1e-12 && c.u <= 1.0);
            CHECK(c.trim + target >= 1.0 / (pl.k + 1) - LD_CTL_WINDUP - 1e-12); /* bounded windup */
        }
        CHECK(d == 1.0 && c.saturated);
        pl.off = 0;
        double e = 0;
        for (int i = 0; i < 15; i++) {
            e = plant_expected(&pl, d, 0);
            d = ld_ctl_update(&c, &co, target, plant_measure(&pl, e, rng), 0.5);
        }
        CHECK_MSG(fabs(plant_expected(&pl, d, 0) - target) / target < 0.05, "no recovery after windup: %.3f for %.3f",
                  plant_expected(&pl, d, 0), target);
    }
    /* a wiggling target (a recorded trace: a new value every step, changes below step_tol) is followed
     * with the trim kept: an offset plant is corrected. Resetting at every change would leave the
     * offset's whole error (20 % here). */
    for (int rep = 0; rep < 100; rep++) {
        plant pl = {.kind = PL_OFFSET, .k = 3, .off = rep % 2 ? 0.1 : -0.1, .probes = 3};
        ld_ctl_opts co = ld_ctl_opts_default(pl.k, ATSC_RES_CPU);
        int reset_always = rep >= 50; /* negative control: every change a step */
        if (reset_always) co.step_tol = 0;
        ld_ctl c;
        ld_ctl_init(&c);
        double base_t = tu_uniform(rng, 0.45, 0.6), d = 0, se = 0, st = 0;
        for (int i = 0; i < 200; i++) {
            double t = base_t + 0.02 * sin(0.7 * i) + 0.01 * tu_uniform(rng, -1, 1);
            double e = plant_expected(&pl, d, 0);
            d = ld_ctl_update(&c, &co, t, i ? e : NAN, 0.5);
            if (i >= 40) se += plant_expected(&pl, d, 0), st += t;
        }
        if (reset_always)
            CHECK_MSG(fabs(se - st) / st > 0.1, "reset at every change corrected the offset: %.4f for %.4f",
                      se / 160, st / 160);
        else
            CHECK_MSG(fabs(se - st) / st < 0.05, "wiggling target: mean %.4f for %.4f (offset %.2f)", se / 160,
                      st / 160, pl.off);
    }
    /* feed-forward from a calibration that tabulates the plant: the first duty is already close */
    for (int rep = 0; rep < 100; rep++) {
        plant pl = random_plant(rng, PL_POWER);
        ld_stress_calib cal;
        memset(&cal, 0, sizeof cal);
        cal.k[ATSC_RES_GPU] = pl.k;
        for (int i = 0; i < LD_CALIB_MAX; i++) {
            double m = 1.0 - (1.0 - 1.0 / (pl.k + 1)) * i / (LD_CALIB_MAX - 1);
            cal.model[ATSC_RES_GPU][i] = m;
            cal.measured[ATSC_RES_GPU][i] = plant_expected(&pl, ld_stress_duty(m, pl.k), 0);
        }
        cal.n[ATSC_RES_GPU] = LD_CALIB_MAX;
        ld_ctl_opts co = ld_ctl_opts_default(pl.k, ATSC_RES_GPU);
        co.calib = &cal;
        double target = tu_uniform(rng, plant_expected(&pl, 1, 0) + 0.05, 0.9);
        ld_ctl c;
        ld_ctl_init(&c);
        double d = ld_ctl_update(&c, &co, target, NAN, 0);
        CHECK_MSG(fabs(plant_expected(&pl, d, 0) - target) < 0.03, "feed-forward: %.3f for %.3f (p %.2f)",
                  plant_expected(&pl, d, 0), target, pl.p);
    }
}


/* Hogs at duty 0 do nothing: no periodic wake-ups (they sleep on a futex until the duty changes). */
static void test_hogs_idle(void)
{
    ld_stress_opts so = ld_stress_opts_default();
    so.threads = 2;
    int k[ATSC_RES_COUNT] = {4, 0, 0}; /* 8 hog threads */
    ld_hogs *h = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ld_hogs_start(&so, k, &h, &err) == ATS_OK, "%s", err.msg);
    if (!h) return;
    usleep(50000); /* threads reach their first wait */
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    usleep(500000);
    getrusage(RUSAGE_SELF, &r1);
    long sw = r1.ru_nvcsw - r0.ru_nvcsw;
    /* a hog waking every 20 ms period would make 8 x 25 = 200 switches; asleep: this thread's one */
    CHECK_MSG(sw < 20, "idle hogs: %ld voluntary context switches in 0.5 s", sw);
    /* a duty wakes them: they work (CPU time grows), and go back to sleep at 0 */
    ld_hogs_set(h, ATSC_RES_CPU, 0.5);
    usleep(200000);
    getrusage(RUSAGE_SELF, &r0);
    CHECK(r0.ru_utime.tv_sec + r0.ru_utime.tv_usec * 1e-6 > r1.ru_utime.tv_sec + r1.ru_utime.tv_usec * 1e-6);
    ld_hogs_set(h, ATSC_RES_CPU, 0.0);
    usleep(100000);
    getrusage(RUSAGE_SELF, &r0);
    usleep(300000);
    getrusage(RUSAGE_SELF, &r1);
    CHECK_MSG(r1.ru_nvcsw - r0.ru_nvcsw < 20, "hogs back at duty 0: %ld switches in 0.3 s",
              r1.ru_nvcsw - r0.ru_nvcsw);
    ld_hogs_stop(h); /* wakes the sleepers: returns */
}

/* The probe lock: a probe set waits for another holder (at most 0.2 s), then probes anyway. */
static void test_probe_lock(void)
{
    char lock[512];
    snprintf(lock, sizeof lock, "%s/probes.lock", tmpdir);
    ld_probe_opts po = ld_probe_opts_default();
    po.threads = 1;
    po.gemv_rows = 64;
    po.gemv_cols = 64;
    po.cpu_target_s = 1e-4;
    po.use_gpu = 0;
    po.lock_path = lock;
    ld_probe *p = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ld_probe_new(&po, &p, &err) == ATS_OK, "%s", err.msg);
    if (!p) return;
    double t[ATSC_RES_COUNT];
    long waits, timeouts;
    double wait_s;
    int unlocked;
    CHECK(ld_probe_measure(p, t, &err) == ATS_OK);
    ld_probe_lock_stats(p, &waits, &wait_s, &timeouts, &unlocked);
    CHECK(waits == 0 && timeouts == 0 && !unlocked);
    int fd = open(lock, O_RDWR); /* another open file description: conflicts like another process */
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    CHECK(ld_probe_measure(p, t, &err) == ATS_OK && t[ATSC_RES_CPU] > 0);
    ld_probe_lock_stats(p, &waits, &wait_s, &timeouts, &unlocked);
    CHECK_MSG(waits == 1 && timeouts == 1 && wait_s >= 0.2, "waits %ld timeouts %ld wait %.3f s", waits, timeouts,
              wait_s);
    /* the holder is stuck: the next sets do not wait again (one 0.2 s, not 0.2 s a sample) */
    CHECK(ld_probe_measure(p, t, &err) == ATS_OK && ld_probe_measure(p, t, &err) == ATS_OK);
    double wait2;
    ld_probe_lock_stats(p, &waits, &wait2, &timeouts, NULL);
    CHECK_MSG(waits == 1 && timeouts == 3 && wait2 == wait_s, "stuck holder: waits %ld timeouts %ld", waits, timeouts);
    /* measure_some: only the asked probes run */
    CHECK(ld_probe_measure_some(p, 1u << ATSC_RES_GPU, t, &err) == ATS_OK && isnan(t[ATSC_RES_CPU]));
    close(fd); /* free again: the next set takes it, and would wait again next time */
    CHECK(ld_probe_measure(p, t, &err) == ATS_OK);
    ld_probe_lock_stats(p, &waits, NULL, &timeouts, NULL);
    CHECK_MSG(waits == 1 && timeouts == 4, "waits %ld timeouts %ld", waits, timeouts); /* 3 + measure_some */
    ld_probe_free(p);
    /* a lock file that cannot be opened: probes run, unlocked says so */
    po.lock_path = "/nonexistent-dir/ats.lock";
    CHECK(ld_probe_new(&po, &p, &err) == ATS_OK);
    if (p) {
        CHECK(ld_probe_measure(p, t, &err) == ATS_OK);
        ld_probe_lock_stats(p, NULL, NULL, NULL, &unlocked);
        CHECK(unlocked);
        ld_probe_free(p);
    }
    unlink(lock);
}

static void count_step(void *ctx, const ld_stress_step *s)
{
    int *n = ctx;
    CHECK(s->duty >= 0 && s->duty <= 1 && s->res == ATSC_RES_CPU && s->target <= 1); /* 1: a brief pause */
    CHECK(s->u >= 1.0 / 3 - 1e-12 && s->u <= 1.0); /* k = 2 */
    (*n)++;
}

/* The closed loop on the CPU, briefly (no accuracy asserted: a shared 2-core test machine), and its
 * refusals. */
static void test_closed_real(void)
{
    ld_probe_opts po = ld_probe_opts_default();
    po.threads = 2;
    po.gemv_rows = 256;
    po.gemv_cols = 256;
    po.cpu_target_s = 3e-4;
    po.use_gpu = 0;
    po.lock_path = NULL;
    ld_probe *p = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ld_probe_new(&po, &p, &err) == ATS_OK, "%s", err.msg);
    if (!p) return;
    ld_baseline base;
    CHECK(ld_probe_baseline(p, 0.2, 0.05, NULL, &base, &err) == ATS_OK);
    ld_probe_free(p);
    atsc_trace *target = atsc_trace_new(3);
    double ts[3] = {0, 0.3, 1.2}, cpu[3] = {1.0, 0.6, 1.0};
    for (int i = 0; i < 3; i++) {
        target->t_s[i] = ts[i];
        target->cpu_avail[i] = cpu[i];
        target->gpu_avail[i] = target->pcie_avail[i] = 1.0;
    }
    ld_stress_opts so = ld_stress_opts_default();
    so.duration_s = 1.5;
    so.interval_s = 0.1;
    so.settle_s = 0.2;
    so.k[ATSC_RES_CPU] = 2;
    so.lock_path = NULL;
    so.probe = &po; /* the baseline's probe sizes */
    int steps = 0;
    so.on_step = count_step;
    so.step_ctx = &steps;
    ld_stress_report rep;
    CHECK_MSG(ld_stress_run_closed(target, &so, &base, &rep, &err) == ATS_OK, "%s", err.msg);
    CHECK_MSG(steps >= 5 && steps <= 10, "%d control steps for 0.9 s at 0.1 s", steps);
    CHECK(rep.nseg == 3 && rep.k[ATSC_RES_CPU] == 2 && rep.k[ATSC_RES_GPU] == 0);
    if (rep.nseg == 3) {
        CHECK(rep.seg[0].target == 1.0 && isnan(rep.seg[0].measured) && rep.seg[0].duty == 0);
        CHECK(rep.seg[1].target == 0.6 && rep.seg[1].measured > 0 && rep.seg[1].measured <= 1);
        CHECK(fabs(rep.seg[1].t0_s - 0.3) < 0.1 && fabs(rep.seg[2].t0_s - 1.2) < 0.1);
    }
    CHECK(rep.probe_duty > 0 && rep.probe_s[ATSC_RES_GPU] == 0); /* its size depends on the machine's load */
    fprintf(stderr, "test_load_stress: closed loop 1.5 s: cpu 0.6 segment saw %.3f (duty %.3f), probe duty %.1f%%\n",
            rep.nseg > 1 ? rep.seg[1].measured : NAN, rep.nseg > 1 ? rep.seg[1].duty : NAN, 100 * rep.probe_duty);
    /* a wiggling target (0.1 s samples, as recorded) with a brief 1.0 inside: one segment from the
     * activation to the final 1.0 (which holds), not one per sample */
    atsc_trace *wig = atsc_trace_new(14);
    for (int i = 0; i < 14; i++) {
        wig->t_s[i] = i == 0 ? 0.0 : 0.2 + 0.1 * i;
        wig->cpu_avail[i] = i == 0 || i == 13 ? 1.0 : i == 6 ? 1.0 : i % 2 ? 0.6 : 0.66;
        wig->gpu_avail[i] = wig->pcie_avail[i] = 1.0;
    }
    steps = 0;
    so.duration_s = 1.8;
    CHECK_MSG(ld_stress_run_closed(wig, &so, &base, &rep, &err) == ATS_OK, "%s", err.msg);
    so.duration_s = 1.5;
    CHECK_MSG(rep.nseg == 3, "wiggling target: %d segments", rep.nseg);
    if (rep.nseg == 3) {
        CHECK(fabs(rep.seg[1].t0_s - 0.3) < 0.1 && fabs(rep.seg[2].t0_s - 1.5) < 0.1);
        CHECK(rep.seg[2].target == 1.0);
    }
    atsc_trace_free(wig);
    /* rebaseline: a baseline file 50 x too fast reads every probe near the clip floor; re-measured in the
     * probe process, the control works against the probe's own idle time (and the report says so) */
    ld_baseline fast = base;
    fast.t_s[ATSC_RES_CPU] = base.t_s[ATSC_RES_CPU] / 50;
    CHECK_MSG(ld_stress_run_closed(target, &so, &fast, &rep, &err) == ATS_OK, "%s", err.msg);
    const double m_file = rep.nseg > 1 ? rep.seg[1].measured : NAN;
    CHECK_MSG(rep.rebased == 0 && m_file < 0.1, "50 x too fast baseline, not re-measured: cpu 0.6 read %.3f", m_file);
    so.rebaseline_s = 0.3;
    CHECK_MSG(ld_stress_run_closed(target, &so, &fast, &rep, &err) == ATS_OK, "%s", err.msg);
    const double m_own = rep.nseg > 1 ? rep.seg[1].measured : NAN;
    CHECK_MSG(rep.rebased == 1 && m_own > 0.2 && m_own <= 1, "re-measured baseline: cpu 0.6 read %.3f", m_own);
    CHECK(rep.base_file_s[ATSC_RES_CPU] == fast.t_s[ATSC_RES_CPU] && rep.base_own_s[ATSC_RES_CPU] > 0 &&
          isnan(rep.base_own_s[ATSC_RES_GPU]) && isnan(rep.base_own_s[ATSC_RES_PCIE]));
    char *txt = NULL;
    size_t txt_len = 0;
    FILE *mf = open_memstream(&txt, &txt_len);
    if (mf) {
        ld_stress_report_print(mf, &rep, so.settle_s);
        fclose(mf);
    }
    const char *line = txt ? strstr(txt, "re-measured in the probe process") : NULL, *eol = line ? strchr(line, '\n') : NULL;
    const char *gpu_at = line ? strstr(line, "gpu") : NULL;
    CHECK_MSG(eol && strstr(line, " cpu ") && strstr(line, " cpu ") < eol && !(gpu_at && gpu_at < eol), "%s",
              txt ? txt : "(no report)");
    free(txt);
    fprintf(stderr, "test_load_stress: baseline 50 x too fast: cpu 0.6 read %.3f from the file, %.3f re-measured "
                    "(own idle %.3g ms)\n", m_file, m_own, 1e3 * rep.base_own_s[ATSC_RES_CPU]);
    /* the probe-duty limit again with the re-measured times: a file 1e-5 s fast passes it (100 sets x 0.01 ms
     * every 0.05 s: 2%), the probe's own idle time (> 0.1 ms) does not */
    ld_stress_opts busy = so;
    busy.rebaseline_s = 0.3;
    busy.probes = 100;
    busy.interval_s = 0.05;
    ld_baseline tiny = base;
    tiny.t_s[ATSC_RES_CPU] = 1e-5;
    CHECK_MSG(ld_stress_run_closed(target, &busy, &tiny, &rep, &err) == ATS_EINVAL && strstr(err.msg, "re-measured") &&
                  strstr(err.msg, "busy") && !(rep.wall_s > 0),
              "re-measured probe duty: %s", err.msg);
    /* a duration that ends before the target loads anything: no probe to re-measure, no report line */
    atsc_trace *late = atsc_trace_new(2);
    late->t_s[0] = 0;
    late->t_s[1] = 5;
    late->cpu_avail[0] = 1.0;
    late->cpu_avail[1] = 0.5;
    late->gpu_avail[0] = late->gpu_avail[1] = late->pcie_avail[0] = late->pcie_avail[1] = 1.0;
    busy = so;
    busy.rebaseline_s = 0.3;
    busy.duration_s = 0.3;
    CHECK_MSG(ld_stress_run_closed(late, &busy, &base, &rep, &err) == ATS_OK && rep.rebased == 0 && rep.k[0] == 0,
              "rebaseline with nothing under load: %s (rebased %d, k %d)", err.msg, rep.rebased, rep.k[0]);
    atsc_trace_free(late);
    ld_stress_opts neg = so;
    neg.rebaseline_s = -1;
    CHECK(ld_stress_run_closed(target, &neg, &base, NULL, &err) == ATS_EINVAL && strstr(err.msg, "rebaseline"));
    so.rebaseline_s = 0;
    /* refusals */
    ld_stress_opts bad = so;
    bad.ki_per_s = 5.0; /* x 0.1 s = 0.5: fine */
    bad.duration_s = 0.2;
    CHECK(ld_stress_run_closed(target, &bad, &base, NULL, &err) == ATS_OK);
    bad.ki_per_s = 25.0; /* x 0.1 s = 2.5: unstable */
    CHECK(ld_stress_run_closed(target, &bad, &base, NULL, &err) == ATS_EINVAL && strstr(err.msg, "stability"));
    bad = so;
    bad.probes = 0;
    CHECK(ld_stress_run_closed(target, &bad, &base, NULL, &err) == ATS_EINVAL);
    bad.probes = 100; /* probes x probe time against the interval */
    bad.interval_s = 0.05;
    ld_baseline slow = base;
    slow.t_s[ATSC_RES_CPU] = 1e-3;
    CHECK_MSG(ld_stress_run_closed(target, &bad, &slow, NULL, &err) == ATS_EINVAL && strstr(err.msg, "busy"), "%s",
              err.msg);
    target->pcie_avail[1] = 0.5;
    enum ats_status s = ld_stress_run_closed(target, &so, &base, NULL, &err);
    if (!ld_gpu_present(0))
        CHECK_MSG(s == ATS_ENOTFOUND && strstr(err.msg, "no CUDA device"), "%d %s", (int)s, err.msg);
    else /* a GPU, but this baseline has no PCIe time */
        CHECK_MSG(s == ATS_EINVAL && strstr(err.msg, "baseline has no pcie"), "%d %s", (int)s, err.msg);
    atsc_trace_free(target);
}

static int write_two(FILE *f, const void *ctx)
{
    (void)ctx;
    return fputs("two\n", f) < 0 ? -1 : 0;
}

static int write_fail(FILE *f, const void *ctx)
{
    (void)f;
    (void)ctx;
    return -1;
}

/* The one text writer: temporary + rename; a failure leaves the target alone and names it. */
static void test_text_save(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/text.txt", tmpdir);
    ats_err err = {{0}};
    FILE *f = fopen(path, "w");
    fputs("one\n", f);
    fclose(f);
    CHECK(ld_text_save(path, "thing", write_fail, NULL, &err) == ATS_EINVAL && strstr(err.msg, path) &&
          strstr(err.msg, "thing"));
    char buf[16] = "";
    f = fopen(path, "r");
    CHECK(f && fgets(buf, sizeof buf, f) && strcmp(buf, "one\n") == 0); /* untouched */
    if (f) fclose(f);
    CHECK(ld_text_save(path, "thing", write_two, NULL, &err) == ATS_OK);
    f = fopen(path, "r");
    CHECK(f && fgets(buf, sizeof buf, f) && strcmp(buf, "two\n") == 0);
    if (f) fclose(f);
    unlink(path);
    CHECK(ld_text_save("/nonexistent-dir/x.txt", "thing", write_two, NULL, &err) == ATS_EINVAL);
}

/* Probes + recorder + CPU hogs, briefly. */
static void test_real_runs(void)
{
    ld_probe_opts po = ld_probe_opts_default();
    po.threads = 2;
    po.gemv_rows = 256;
    po.gemv_cols = 512;
    po.cpu_target_s = 5e-4;
    po.use_gpu = 0;
    ld_probe *p = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ld_probe_new(&po, &p, &err) == ATS_OK, "%s", err.msg);
    if (!p) return;
    CHECK(!ld_probe_has_gpu(p));
    double t[ATSC_RES_COUNT];
    CHECK(ld_probe_measure(p, t, &err) == ATS_OK && t[ATSC_RES_CPU] > 0 && isnan(t[ATSC_RES_GPU]));
    ld_baseline base;
    CHECK(ld_probe_baseline(p, 0.2, 0.05, NULL, &base, &err) == ATS_OK);
    CHECK(base.t_s[ATSC_RES_CPU] > 0 && isnan(base.t_s[ATSC_RES_PCIE]) && base.threads == 2 && base.cpu_reps >= 1);
    ld_record_opts ro = ld_record_opts_default();
    ro.interval_s = 0.05;
    ro.duration_s = 0.4;
    atsc_trace *tr = NULL;
    ld_record_stats st;
    CHECK_MSG(ld_record_run(p, &base, &ro, &tr, &st, &err) == ATS_OK, "%s", err.msg);
    if (tr) {
        CHECK(tr->n >= 2 && tr->n <= 9 && st.samples == tr->n);
        CHECK(atsc_trace_validate(tr, "recorded", &err) == ATS_OK);
        CHECK(tr->gpu_avail[0] == 1.0 && tr->pcie_avail[tr->n - 1] == 1.0);
        CHECK(st.duty > 0 && st.duty < 1 && st.probe_s[ATSC_RES_GPU] == 0);
    }
    atsc_trace_free(tr);
    /* the last sample lands at t = duration (3 * 0.1 > 0.3 in floating point: it used to end at 0.2, one
     * interval short, so `trace compare` found the target's last segment partly outside) */
    ro.interval_s = 0.1;
    ro.duration_s = 0.3;
    tr = NULL;
    CHECK_MSG(ld_record_run(p, &base, &ro, &tr, &st, &err) == ATS_OK, "%s", err.msg);
    if (tr) {
        CHECK_MSG(tr->n == 4 && tr->t_s[3] >= 0.3 && tr->t_s[3] < 0.36, "%zu samples, last at %g s", tr->n,
                  tr->t_s[tr->n - 1]);
    }
    atsc_trace_free(tr);
    /* a stop flag already set: the baseline is refused as interrupted */
    volatile sig_atomic_t stop = 1;
    CHECK(ld_probe_baseline(p, 0.2, 0.05, &stop, &base, &err) == ATS_EINVAL);
    ld_probe_free(p);

    /* CPU hogs follow a short CPU-only trace and stop */
    atsc_trace *target = atsc_trace_new(3);
    double ts[3] = {0, 0.1, 0.2}, cpu[3] = {1.0, 0.4, 0.7};
    for (int i = 0; i < 3; i++) {
        target->t_s[i] = ts[i];
        target->cpu_avail[i] = cpu[i];
        target->gpu_avail[i] = target->pcie_avail[i] = 1.0;
    }
    ld_stress_opts so = ld_stress_opts_default();
    so.threads = 2;
    so.duration_s = 0.3;
    CHECK_MSG(ld_stress_run(target, &so, &err) == ATS_OK, "%s", err.msg);
    /* GPU load without a GPU: refused before any hog starts */
    target->gpu_avail[1] = 0.4;
    if (!ld_gpu_present(0)) {
        enum ats_status s = ld_stress_run(target, &so, &err);
        CHECK_MSG(s == ATS_ENOTFOUND && strstr(err.msg, "no CUDA device"), "%d %s", (int)s, err.msg);
    } else {
        fprintf(stderr, "test_load_stress: a GPU is present: the no-GPU refusal is not checked\n");
    }
    /* duration 0 with a one-sample trace */
    atsc_trace *one = atsc_trace_new(1);
    one->cpu_avail[0] = one->gpu_avail[0] = one->pcie_avail[0] = 1.0;
    so.duration_s = 0;
    CHECK(ld_stress_run(one, &so, &err) == ATS_EINVAL);
    atsc_trace_free(one);
    atsc_trace_free(target);
    /* hogs started and stopped directly, with duties set in between */
    int k[ATSC_RES_COUNT] = {2, 0, 0};
    ld_hogs *h = NULL;
    so.duration_s = 0;
    CHECK(ld_hogs_start(&so, k, &h, &err) == ATS_OK);
    if (h) {
        ld_hogs_set(h, ATSC_RES_CPU, 0.5);
        usleep(50000);
        CHECK(ld_hogs_alive(h));
        ld_hogs_stop(h);
    }
    so.period_s = 0;
    CHECK(ld_hogs_start(&so, k, &h, &err) == ATS_EINVAL && h == NULL);
}

/* Hogs per resource as the runs start them: automatic counts capped (a target at the clip floor asked
 * for 99 open-loop, 249 closed-loop hogs per thread), targets below reach flagged. */
static void test_plan_hogs(uint64_t *rng)
{
    atsc_trace *tr = atsc_trace_new(2);
    tr->t_s[0] = 0;
    tr->t_s[1] = 1;
    for (int i = 0; i < 2; i++) tr->gpu_avail[i] = tr->pcie_avail[i] = 1.0;
    tr->cpu_avail[0] = 1.0;
    tr->cpu_avail[1] = 0.01;
    ld_stress_opts so = ld_stress_opts_default();
    int k[ATSC_RES_COUNT];
    double amin[ATSC_RES_COUNT];
    unsigned m = ld_stress_plan_hogs(tr, &so, 0, k, amin);
    CHECK_MSG(k[ATSC_RES_CPU] == LD_STRESS_K_MAX && k[ATSC_RES_GPU] == 0 && k[ATSC_RES_PCIE] == 0, "open k %d %d %d",
              k[0], k[1], k[2]);
    CHECK(m == 1u << ATSC_RES_CPU && amin[ATSC_RES_CPU] == 0.01 && amin[ATSC_RES_GPU] == 1.0);
    m = ld_stress_plan_hogs(tr, &so, 1, k, NULL);
    CHECK_MSG(k[ATSC_RES_CPU] == LD_STRESS_K_DEFAULT_MAX && m == 1u << ATSC_RES_CPU, "closed k %d mask %u",
              k[ATSC_RES_CPU], m);
    for (int rep = 0; rep < 50; rep++) {
        double a = tu_uniform(rng, 0.1, 0.95);
        tr->cpu_avail[1] = a;
        so.k[ATSC_RES_CPU] = 0;
        m = ld_stress_plan_hogs(tr, &so, 0, k, amin);
        CHECK_MSG(k[ATSC_RES_CPU] == ld_stress_hogs_needed(a) && m == 0, "open a %g: k %d mask %u", a, k[0], m);
        m = ld_stress_plan_hogs(tr, &so, 1, k, amin);
        int want = ld_stress_hogs_needed(a / 2.5);
        if (want > LD_STRESS_K_DEFAULT_MAX) want = LD_STRESS_K_DEFAULT_MAX;
        CHECK_MSG(k[ATSC_RES_CPU] == want && m == (a < 1.0 / (want + 1) ? 1u : 0u), "closed a %g: k %d mask %u", a,
                  k[0], m);
        /* a count given by the user is kept, and flagged when it cannot reach the target */
        so.k[ATSC_RES_CPU] = 1 + (int)(tu_rand(rng) % 8);
        for (int closed = 0; closed < 2; closed++) {
            m = ld_stress_plan_hogs(tr, &so, closed, k, amin);
            CHECK(k[ATSC_RES_CPU] == so.k[ATSC_RES_CPU]);
            CHECK_MSG(m == (a < 1.0 / (so.k[ATSC_RES_CPU] + 1) - 1e-12 ? 1u : 0u), "a %g k %d mask %u", a,
                      so.k[ATSC_RES_CPU], m);
        }
    }
    atsc_trace_free(tr);
}

/* The closed loop's report: notes at the clip floor and below reach, and segments past the table's
 * size counted (it stopped at LD_STRESS_MAX_SEGS silently). */
static void test_report_print(void)
{
    ld_stress_report rep;
    memset(&rep, 0, sizeof rep);
    rep.k[ATSC_RES_CPU] = 16;
    rep.nseg = 3;
    double tg[3] = {0.01, 0.03, 0.5}, ms[3] = {0.01, 0.05, 0.49};
    for (int i = 0; i < 3; i++) {
        rep.seg[i].res = ATSC_RES_CPU;
        rep.seg[i].t0_s = 10.0 * i;
        rep.seg[i].t1_s = 10.0 * (i + 1);
        rep.seg[i].target = tg[i];
        rep.seg[i].measured = ms[i];
        rep.seg[i].duty = 1.0;
    }
    rep.nseg_dropped = 7;
    rep.wall_s = 30;
    char path[512];
    snprintf(path, sizeof path, "%s/report.txt", tmpdir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    ld_stress_report_print(f, &rep, 5.0);
    fclose(f);
    char *txt = tu_slurp(path, NULL);
    CHECK(txt != NULL);
    if (txt) {
        char *l1 = strstr(txt, "0.0100"), *l2 = strstr(txt, "0.0300"), *l3 = strstr(txt, "0.5000");
        CHECK_MSG(l1 && l2 && l3, "%s", txt);
        if (l1 && l2 && l3) {
            char *e1 = strchr(l1, '\n'), *e2 = strchr(l2, '\n'), *e3 = strchr(l3, '\n');
            CHECK_MSG(e1 && strstr(l1, "at the clip floor") && strstr(l1, "at the clip floor") < e1, "%s", txt);
            CHECK_MSG(e2 && strstr(l2, "below the hogs' reach") && strstr(l2, "below the hogs' reach") < e2, "%s",
                      txt);
            CHECK(e3 != NULL);
            int clean = e3 != NULL; /* the on-target row at 0.5 has no note */
            for (char *q = l3; e3 && q < e3; q++) clean &= !(*q >= 'a' && *q <= 'z');
            CHECK_MSG(clean, "row at 0.5 has a note: %.*s", (int)(e3 - l3), l3);
        }
        CHECK_MSG(strstr(txt, "7 more segments not reported"), "%s", txt);
        free(txt);
    }
    unlink(path);
}

/* ------------------------------------------------------------------ `ats record` / `ats stress` */

static const char *ats_bin(void)
{
    const char *b = getenv("ATS_BIN");
    return b && *b ? b : "./build/cli/ats";
}

/* `ats <args>` must exit want_rc with want (a part of its output) in one line of output. */
static void cli_expect(const char *args, int want_rc, const char *want)
{
    int rc;
    char *o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == want_rc && o && strstr(o, want) && tu_count_lines(o) == 1,
              "`ats %s`: exit %d (want %d), want one line with \"%s\", got: %s", args, rc, want_rc, want,
              o ? o : "(null)");
    free(o);
}

/* Runs ats with argv (NULL-terminated, argv[0] = "ats"), output to out_path; sends sig after after_s (no
 * signal: sig 0) and waits for it (at most 90 s, then SIGKILL). Returns 128 + the signal it died of, or
 * its exit code; -1 when it could not run. */
static int run_signalled(char *const argv[], double after_s, int sig, const char *out_path)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        FILE *o = freopen(out_path, "w", stdout);
        if (!o || dup2(fileno(stdout), 2) < 0) _exit(126);
        execv(ats_bin(), argv);
        _exit(127);
    }
    struct timespec ts = {(time_t)after_s, (long)((after_s - (double)(time_t)after_s) * 1e9)};
    nanosleep(&ts, NULL);
    if (sig) kill(pid, sig);
    int st = 0;
    for (int i = 0; i < 900; i++) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
        usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void test_cli(void)
{
    char d[300], args[2048], cpu[400], idle[400], base[400], dirty[400];
    snprintf(d, sizeof d, "%s/cli", tmpdir);
    CHECK(mkdir(d, 0700) == 0);
    snprintf(cpu, sizeof cpu, "%s/cpu.h5", d);
    snprintf(idle, sizeof idle, "%s/idle.h5", d);
    snprintf(base, sizeof base, "%s/base.txt", d);
    ats_err err = {{0}};
    atsc_trace *tr = atsc_trace_new(2);
    tr->t_s[0] = 0;
    tr->t_s[1] = 0.5;
    for (int i = 0; i < 2; i++) tr->gpu_avail[i] = tr->pcie_avail[i] = 1.0;
    tr->cpu_avail[0] = 1.0;
    tr->cpu_avail[1] = 0.6;
    snprintf(tr->source, sizeof tr->source, "test_load_stress");
    snprintf(tr->machine, sizeof tr->machine, "synthetic");
    snprintf(tr->description, sizeof tr->description, "cpu 1 then 0.6");
    CHECK_MSG(atsc_trace_save(tr, cpu, &err) == ATS_OK, "%s", err.msg);
    tr->cpu_avail[1] = 1.0;
    CHECK_MSG(atsc_trace_save(tr, idle, &err) == ATS_OK, "%s", err.msg);
    atsc_trace_free(tr);
    tu_write_text(base, "0.004 nan nan 1 0 1\n"); /* one thread, one GEMV a probe (default sizes) */

    /* 1. an output naming an input: refused before the work (exit 2), not after it (exit 1) */
    snprintf(args, sizeof args, "record --out %s --baseline %s --duration 5", base, base);
    cli_expect(args, 2, "input of this run");
    snprintf(args, sizeof args, "record --out %s/x.h5 --save-baseline %s/x.h5 --duration 5", d, d);
    cli_expect(args, 2, "name the same file");
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --log %s --duration 3", cpu, base, base);
    cli_expect(args, 2, "input of this run");
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --log %s --duration 3", cpu, base, cpu);
    cli_expect(args, 2, "input of this run");
    /* 2. a directory as the baseline */
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --duration 1", cpu, d);
    cli_expect(args, 2, "is a directory");
    /* 4. messages name the option given */
    static const char *const secs[] = {"duration", "delay", "report-margin", "period", "settle", "measure"};
    for (int i = 0; i < 6; i++) {
        char want[64];
        snprintf(args, sizeof args, "stress --trace %s --%s x", cpu, secs[i]);
        snprintf(want, sizeof want, "--%s 'x'", secs[i]);
        cli_expect(args, 2, want);
    }
    snprintf(args, sizeof args, "stress --trace %s --duration 1e300", cpu);
    cli_expect(args, 2, "0 .. 1e7");
    static const char *const counts[] = {"hogs-cpu 0", "hogs-gpu 0", "hogs-pcie 65", "threads 0", "device 99"};
    for (int i = 0; i < 5; i++) {
        char want[64], name[32];
        snprintf(args, sizeof args, "stress --trace %s --%s", cpu, counts[i]);
        sscanf(counts[i], "%31s", name);
        snprintf(want, sizeof want, "--%s '", name);
        cli_expect(args, 2, want);
    }
    snprintf(args, sizeof args, "record --out %s/r.h5 --threads 100000", d);
    cli_expect(args, 2, "1 .. 1024");
    cli_expect("stress --baseline --duration 2", 2, "--baseline: missing value (got the option '--duration')");
    cli_expect("stress --trace x --bogus", 2, "unknown or ambiguous option '--bogus'");
    /* 5. an interval longer than the recording */
    snprintf(args, sizeof args, "record --duration 1 --interval 100 --out %s/r.h5", d);
    cli_expect(args, 2, "longer than --duration");
    /* 8. options that would be ignored */
    snprintf(args, sizeof args, "stress --trace %s --settle 1", cpu);
    cli_expect(args, 2, "--calibrate");
    snprintf(args, sizeof args, "stress --trace %s --measure 1", cpu);
    cli_expect(args, 2, "--calibrate");
    snprintf(args, sizeof args, "stress --trace %s --baseline-s 1", cpu);
    cli_expect(args, 2, "belong to the closed loop");
    { /* --baseline FILE --baseline-s S: the file's settings, the times re-measured (saved so) */
        char rb[400];
        snprintf(rb, sizeof rb, "%s/rebased.txt", d);
        snprintf(args, sizeof args, "record --baseline %s --baseline-s 0.3 --cpu-only --duration 0.3 --out %s/rb.h5 "
                                    "--save-baseline %s", base, d, rb);
        int rrc;
        char *o = tu_run_ats(args, &rrc, 1);
        ld_baseline bf;
        int loaded = rrc == 0 && ld_baseline_load(rb, &bf, &err) == ATS_OK;
        CHECK_MSG(loaded && o && strstr(o, "re-measured here over 0.3 s (--baseline's: cpu 4 ms)") && bf.threads == 1 &&
                      bf.cpu_reps == 1 && bf.t_s[ATSC_RES_CPU] > 0 && bf.t_s[ATSC_RES_CPU] != 0.004,
                  "`ats %s`: exit %d: %s", args, rrc, o ? o : "");
        free(o);
        snprintf(args, sizeof args, "%s/rb.h5", d);
        atsc_trace *rt = NULL;
        CHECK(atsc_trace_load(args, &rt, &err) == ATS_OK && rt && strstr(rt->description, "re-measured here"));
        atsc_trace_free(rt);
        /* the stressor re-measuring: its probe process's first answer (the description; on a GPU machine
         * whether its GPU probes started) is kept past the re-measuring answers (H200: "the GPU probes
         * could not start" once they overwrote it) */
        snprintf(args, sizeof args, /* one probe set a 2 s interval: the probe-duty limit holds under ASan too */
                 "stress --trace %s --baseline %s --baseline-s 0.3 --duration 0.6 --probes 1 --interval 2 --verbose",
                 cpu, rb);
        o = tu_run_ats(args, &rrc, 1);
        CHECK_MSG(rrc == 0 && o && strstr(o, "CPU probe: ") && strstr(o, "(in a probe process of its own)") &&
                      strstr(o, "re-measured in the probe process"),
                  "`ats %s`: exit %d: %s", args, rrc, o ? o : "");
        free(o);
    }
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --baseline-s 0.1", cpu, base);
    cli_expect(args, 2, "need 0.3 .. 600 s");
    /* 9. a baseline from a machine with more CPUs: one warning line */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(dirty, sizeof dirty, "%s/base-many.txt", d);
    snprintf(args, sizeof args, "0.004 nan nan 1 0 %ld\n", cpus + 1);
    tu_write_text(dirty, args);
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --duration 0.3", idle, dirty);
    int rc;
    char *o = tu_run_ats(args, &rc, 1);
    int warns = 0;
    for (const char *q = o; q && (q = strstr(q, "warning")) != NULL; q++) warns++;
    CHECK_MSG(rc == 0 && o && strstr(o, "this process may use") && warns == 1, "`ats %s`: exit %d: %s", args, rc, o);
    free(o);

    /* 7. a target at the clip floor: the automatic hog count capped at the --hogs-* limit, and said */
    char floor[400];
    snprintf(floor, sizeof floor, "%s/floor.h5", d);
    tr = atsc_trace_new(2);
    tr->t_s[0] = 0;
    tr->t_s[1] = 0.1;
    for (int i = 0; i < 2; i++) tr->gpu_avail[i] = tr->pcie_avail[i] = 1.0;
    tr->cpu_avail[0] = 1.0;
    tr->cpu_avail[1] = 0.01;
    snprintf(tr->source, sizeof tr->source, "test_load_stress");
    CHECK_MSG(atsc_trace_save(tr, floor, &err) == ATS_OK, "%s", err.msg);
    atsc_trace_free(tr);
    snprintf(args, sizeof args, "stress --trace %s --threads 1 --duration 0.3", floor);
    o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 0 && o && strstr(o, "below what 64 hogs per thread reach") && strstr(o, "targets not reached"),
              "`ats %s`: exit %d: %s", args, rc, o);
    free(o);

    /* 6. signals: the exit status of sim (128 + sig), what is written still written */
    char outp[400], logp[400], recp[400];
    snprintf(outp, sizeof outp, "%s/out.txt", d);
    snprintf(logp, sizeof logp, "%s/log.csv", d);
    snprintf(recp, sizeof recp, "%s/rec.h5", d);
    char *open_loop[] = {"ats", "stress", "--trace", cpu, "--duration", "60", "--threads", "1", "--hogs-cpu", "1", NULL};
    rc = run_signalled(open_loop, 1.0, SIGINT, outp);
    CHECK_MSG(rc == 130, "open loop after SIGINT: %d (want 130)", rc);
    const int sigs[2] = {SIGTERM, SIGHUP};
    for (int i = 0; i < 2; i++) {
        unlink(logp);
        char *closed[] = {"ats", "stress", "--trace", cpu, "--baseline", base, "--duration", "60", "--hogs-cpu", "1",
                          "--interval", "1", "--log", logp, NULL};
        rc = run_signalled(closed, 2.5, sigs[i], outp);
        CHECK_MSG(rc == 128 + sigs[i], "closed loop after signal %d: %d (want %d)", sigs[i], rc, 128 + sigs[i]);
        char *log = tu_slurp(logp, NULL);
        CHECK_MSG(log && strncmp(log, "t_s,resource,", 13) == 0 && tu_count_lines(log) >= 2,
                  "signal %d: --log not written: %s", sigs[i], log ? log : "(none)");
        free(log);
    }
    { /* a signal while the stressor's probe process re-measures its baseline: nothing ran, the signal's
       * status, no error line (it used to say "interrupted" and exit 2 as for bad input) */
        char *rebase[] = {"ats", "stress", "--trace", cpu, "--baseline", base, "--baseline-s", "60", "--duration",
                          "60", "--hogs-cpu", "1", NULL};
        rc = run_signalled(rebase, 1.5, SIGINT, outp);
        char *txt = tu_slurp(outp, NULL);
        CHECK_MSG(rc == 130 && txt && !strstr(txt, "interrupted") && strstr(txt, "stopped by a signal"),
                  "closed loop re-measuring, SIGINT: %d (want 130): %s", rc, txt ? txt : "(no output)");
        free(txt);
    }
    char *rec[] = {"ats", "record", "--out", recp, "--baseline", base, "--duration", "60", "--cpu-only", NULL};
    rc = run_signalled(rec, 2.0, SIGINT, outp);
    CHECK_MSG(rc == 130, "record after SIGINT: %d (want 130)", rc);
    atsc_trace *back = NULL;
    CHECK_MSG(atsc_trace_load(recp, &back, &err) == ATS_OK && back->n >= 2, "record after SIGINT: %s", err.msg);
    atsc_trace_free(back);
    unlink(recp);
    char *rec_b[] = {"ats", "record", "--out", recp, "--threads", "1", "--baseline-s", "60", "--cpu-only", NULL};
    rc = run_signalled(rec_b, 1.5, SIGTERM, outp);
    CHECK_MSG(rc == 143, "record in its baseline after SIGTERM: %d (want 143)", rc);
    CHECK(access(recp, F_OK) != 0);

    snprintf(args, sizeof args, "rm -rf '%s'", d);
    CHECK(system(args) == 0);
}

/* `ats record --save-baseline path` (1 CPU thread, 0.3 s; extra: more options, e.g. --cpu-probe-ms 20):
 * a quick CPU-only baseline for the CLI tests below; a failure is a failed CHECK. */
static void save_baseline(const char *path, const char *extra)
{
    char args[1024];
    int rc;
    snprintf(args, sizeof args, "record --cpu-only --threads 1 --baseline-s 0.3 --save-baseline %s %s", path, extra);
    free(tu_run_ats(args, &rc, 1));
    CHECK_MSG(rc == 0, "ats %s: rc %d", args, rc);
}

/* ats record --cpu-probe-ms: the baseline's repetitions follow the asked probe length (10x longer
 * asks for more repetitions; a count, not a time, is checked), bad values and --baseline with it
 * refused (exit 2, one line). */
static void test_cpu_probe_ms(void)
{
    char args[1024], b_short[400], b_long[400];
    snprintf(b_short, sizeof b_short, "%s/probe-2ms.txt", tmpdir);
    snprintf(b_long, sizeof b_long, "%s/probe-20ms.txt", tmpdir);
    int rc;
    save_baseline(b_short, "--cpu-probe-ms 2");
    save_baseline(b_long, "--cpu-probe-ms 20");
    char *a = tu_slurp(b_short, NULL), *b = tu_slurp(b_long, NULL);
    double t[2][3] = {{0}};
    int reps[2] = {0, 0};
    CHECK(a && b && sscanf(a, "%lf %lf %lf %d", &t[0][0], &t[0][1], &t[0][2], &reps[0]) == 4 &&
          sscanf(b, "%lf %lf %lf %d", &t[1][0], &t[1][1], &t[1][2], &reps[1]) == 4);
    /* more repetitions for the longer probe, unless one GEMV already takes most of 20 ms (a sanitizer build
     * on a loaded 2-core machine: then both are 1 and nothing can be told apart) */
    int slow = reps[0] == 1 && t[0][0] > 0.01;
    CHECK_MSG(reps[1] > reps[0] || (slow && reps[1] >= reps[0]), "20 ms probe: %d repetitions, 2 ms probe: %d (%g s)",
              reps[1], reps[0], t[0][0]);
    if (slow) printf("cpu-probe-ms: one GEMV takes %.1f ms here: the repetition counts are not compared\n", 1e3 * t[0][0]);
    free(a);
    free(b);
    const char *bad[] = {"0", "0.1", "201", "nan", "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "record --cpu-only --save-baseline %s/x.txt --cpu-probe-ms %s", tmpdir, bad[i]);
        char *o = tu_run_ats(args, &rc, 1);
        CHECK_MSG(rc == 2 && o && tu_count_lines(o) == 1 && strstr(o, "--cpu-probe-ms"), "--cpu-probe-ms %s: rc %d: %s",
                  bad[i], rc, o ? o : "");
        free(o);
    }
    snprintf(args, sizeof args, "record --cpu-only --out %s/x.h5 --duration 1 --baseline %s --cpu-probe-ms 5", tmpdir,
             b_short);
    char *o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 2 && o && strstr(o, "do not combine"), "--baseline with --cpu-probe-ms: rc %d: %s", rc, o ? o : "");
    free(o);
}

/* A baseline that asks for the most repetitions the loader allows (100000 GEMVs, minutes per probe
 * here) must not keep `ats record` busy for minutes: the CPU probe is cut after max_probe_s (1 s), so
 * a 1 s recording ends well inside tu_run_ats's 120 s limit (before the cut it ran ~3 minutes per
 * probe, "1 samples over 205 s"), and that sample reads the clip floor. */
static void test_probe_cut(void)
{
    char base[400], out[400], args[1024];
    snprintf(base, sizeof base, "%s/slow-base.txt", tmpdir);
    snprintf(out, sizeof out, "%s/slow.h5", tmpdir);
    tu_write_text(base, "0.001 nan nan 100000 0 1\n");
    snprintf(args, sizeof args, "record --cpu-only --baseline %s --out %s --duration 1 --interval 0.5", base, out);
    int rc;
    char *o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 0, "record with a 100000-repetition baseline: rc %d (a probe not cut?): %s", rc, o ? o : "");
    free(o);
    atsc_trace *tr = NULL;
    ats_err err;
    if (rc == 0 && atsc_trace_load(out, &tr, &err) == ATS_OK) {
        CHECK(tr->n >= 1);
        for (size_t i = 0; i < tr->n; i++)
            CHECK_MSG(tr->cpu_avail[i] <= 0.0100001, "sample %zu: cpu %g", i, tr->cpu_avail[i]);
        atsc_trace_free(tr);
    } else {
        CHECK_MSG(0, "%s not readable", out);
    }
}

/* ats stress --cpu-only on a trace with GPU/PCIe load: follows the CPU column (runs, says what it
 * ignored); without --cpu-only on a machine without a GPU: refused, pointing at --cpu-only. */
static void test_cpu_only_trace(void)
{
    char tgt[400], base[400], args[1024];
    snprintf(tgt, sizeof tgt, "%s/gpu-load.h5", tmpdir);
    snprintf(base, sizeof base, "%s/co-base.txt", tmpdir);
    int rc;
    snprintf(args, sizeof args, "trace synth --out %s --duration 2 --cpu step:0.5=0.6 --gpu step:1=0.5 --pcie step:1=0.5", tgt);
    free(tu_run_ats(args, &rc, 1));
    CHECK_MSG(rc == 0, "trace synth: rc %d", rc);
    save_baseline(base, "");
    /* --probes 3 --interval 2 in these closed loops: under ASan on the 2-core CI machine a probe set took ~35 ms
     * in most runs and 76 ms in one, where 3 sets every 1 s crossed the stressor's 20% probe-time limit and it
     * refused to start; every 2 s it stays below the limit up to ~130 ms a set (one set every 1 s left the
     * report's probe duty at 0 in a 1.5 s run) */
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --threads 1 --duration 1.5 --cpu-only --probes 3 --interval 2", tgt,
             base);
    char *o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 0 && o && strstr(o, "GPU and PCIe columns ignored"), "stress --cpu-only: rc %d: %s", rc, o ? o : "");
    free(o);
    /* the closed loop's probes run in a process of their own (the sensor), which probes and is reaped:
     * the report counts its probe time, and the verbose line says where the probes ran */
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --threads 1 --duration 1.5 --cpu-only --verbose --probes 3 --interval 2",
             tgt, base);
    o = tu_run_ats(args, &rc, 1);
    double pd = -1;
    const char *q = o ? strstr(o, "stressor probe duty cycle ") : NULL;
    if (q) sscanf(q, "stressor probe duty cycle %lf", &pd);
    CHECK_MSG(rc == 0 && o && strstr(o, "in a probe process of its own") && pd > 0, "stress sensor: rc %d, duty %g: %s",
              rc, pd, o ? o : "");
    free(o);
    /* --hogs-gpu with --cpu-only: said to be unused, not silently dropped */
    snprintf(args, sizeof args, "stress --trace %s --baseline %s --threads 1 --duration 1 --cpu-only --hogs-gpu 2 --probes 3 --interval 2",
             tgt, base);
    o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 0 && o && strstr(o, "--hogs-gpu 2: the trace puts no gpu load"), "stress --hogs-gpu unused: rc %d: %s",
              rc, o ? o : "");
    free(o);
    if (!ld_gpu_present(0)) {
        snprintf(args, sizeof args, "stress --trace %s --baseline %s --threads 1 --duration 1.5 --probes 3 --interval 2", tgt, base);
        o = tu_run_ats(args, &rc, 1);
        CHECK_MSG(rc == 2 && o && strstr(o, "--cpu-only"), "stress without --cpu-only, no GPU: rc %d: %s", rc, o ? o : "");
        free(o);
    }
}

/* The thread's EEVDF slice as the kernel reports it (/proc/thread-self/sched "se.slice", ns); -1 where the
 * kernel does not show one (before Linux 6.6). */
static long thread_slice_ns(void)
{
    FILE *f = fopen("/proc/thread-self/sched", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "se.slice", 8) == 0) {
            const char *c = strchr(line, ':');
            if (c) v = atol(c + 1);
        }
    fclose(f);
    return v;
}

/* --slice-us: ld_sched_slice sets the calling thread's slice where the kernel has slice requests (6.12+:
 * se.slice follows it), the option is range-checked in record and stress and in the libraries, and the
 * probe's description names the slice. */
static void test_slice(void)
{
    long before = thread_slice_ns();
    int e = ld_sched_slice(200000);
    long after = thread_slice_ns();
    printf("slice: before %ld ns, after asking 200000 ns: %ld ns (ld_sched_slice %d)\n", before, after, e);
    if (e == 0 && before >= 0 && after != before) CHECK_MSG(after == 200000, "se.slice %ld", after);
    CHECK(ld_sched_slice(0) == 0); /* nothing asked */
    ld_probe_opts po = ld_probe_opts_default();
    CHECK(po.slice_ns == LD_SLICE_NS_DEFAULT);
    po.threads = 1;
    po.use_gpu = 0;
    po.cpu_reps = 1;
    ats_err err = {{0}};
    ld_probe *p = NULL;
    po.slice_ns = 50000; /* below the kernel's range */
    CHECK(ld_probe_new(&po, &p, &err) == ATS_EINVAL && strstr(err.msg, "slice 50000"));
    static const struct { long ns; const char *said; } described[] = {{0, "kernel's default slice"},
                                                                        {250000, "0.25 ms slices"}};
    for (int i = 0; i < 2; i++) {
        p = NULL;
        po.slice_ns = described[i].ns;
        CHECK_MSG(ld_probe_new(&po, &p, &err) == ATS_OK, "%s", err.msg);
        if (!p) continue;
        char d[768];
        ld_probe_describe(p, d, sizeof d);
        CHECK_MSG(strstr(d, described[i].said) != NULL, "%s", d);
        ld_probe_free(p);
    }
    ld_stress_opts so = ld_stress_opts_default();
    CHECK(so.hog_slice_ns == LD_SLICE_NS_DEFAULT);
    so.hog_slice_ns = 200000000; /* above */
    so.threads = 1;
    so.duration_s = 0.1;
    atsc_trace *t = atsc_trace_new(2);
    t->t_s[0] = 0;
    t->t_s[1] = 0.1;
    for (int i = 0; i < 2; i++) {
        t->cpu_avail[i] = 0.5;
        t->gpu_avail[i] = t->pcie_avail[i] = 1.0;
    }
    t->n = 2;
    CHECK(ld_stress_run(t, &so, &err) == ATS_EINVAL && strstr(err.msg, "hog slice"));
    atsc_trace_free(t);
    const char *bad[] = {"50", "100001", "-1", "abc", "", "1e3", "0x64", "+100", " 100", "100 ", "100.", ".5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int cmd = 0; cmd < 2; cmd++) {
            char args[1024];
            int rc;
            if (cmd == 0)
                snprintf(args, sizeof args, "record --cpu-only --out %s/s.h5 --duration 1 --slice-us '%s'", tmpdir, bad[i]);
            else
                snprintf(args, sizeof args, "stress --trace fig13-synth --cpu-only --slice-us '%s'", bad[i]);
            char *o = tu_run_ats(args, &rc, 1);
            CHECK_MSG(rc == 2 && o && tu_count_lines(o) == 1 && strstr(o, "--slice-us"), "%s: rc %d: %s", args, rc,
                      o ? o : "");
            free(o);
        }
    int rc;
    /* the baseline records the slice it was measured with; a different --slice-us is refused, the same one
     * (or none) runs */
    char sb[400], sargs[1024];
    snprintf(sb, sizeof sb, "%s/slice-base.txt", tmpdir);
    save_baseline(sb, "--slice-us 200");
    char *bt = tu_slurp(sb, NULL);
    long sl = -1;
    if (bt) sscanf(bt, "%*s %*s %*s %*s %*s %*s %ld", &sl);
    CHECK_MSG(sl == 200000, "baseline file: %s", bt ? bt : "");
    free(bt);
    snprintf(sargs, sizeof sargs, "record --cpu-only --baseline %s --out %s/s2.h5 --duration 0.2 --slice-us 100", sb, tmpdir);
    cli_expect(sargs, 2, "baseline measured with 200 us scheduler slices, --slice-us 100 asked");
    snprintf(sargs, sizeof sargs, "trace synth --out %s/cpu-half.h5 --duration 2 --cpu step:1=0.5", tmpdir);
    free(tu_run_ats(sargs, &rc, 1));
    snprintf(sargs, sizeof sargs, "stress --trace %s/cpu-half.h5 --baseline %s --slice-us 0", tmpdir, sb);
    cli_expect(sargs, 2, "baseline measured with 200 us scheduler slices, --slice-us 0 asked");
    snprintf(sargs, sizeof sargs, "record --cpu-only --baseline %s --out %s/s2.h5 --duration 0.2 --slice-us 200", sb, tmpdir);
    char *so2 = tu_run_ats(sargs, &rc, 1);
    CHECK_MSG(rc == 0 && so2 && strstr(so2, "0.2 ms slices"), "same slice: rc %d: %s", rc, so2 ? so2 : "");
    free(so2);
    /* a flag given a value, an ambiguous prefix: the option as typed, not a getopt letter */
    cli_expect("stress --trace fig13-synth --cpu-only=1", 2, "'--cpu-only=1': --cpu-only takes no value");
    cli_expect("record --out x.h5 --progress=yes", 2, "'--progress=yes': --progress takes no value");
    cli_expect("stress --trace fig13-synth --hogs 3", 2, "unknown or ambiguous option '--hogs'");
    const char *bad_st[] = {"yes", "cpu,cpu", "cpu,", "", "gpu,none"};
    for (size_t i = 0; i < sizeof bad_st / sizeof bad_st[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "stress --trace fig13-synth --cpu-only --stagger '%s'", bad_st[i]);
        char *o = tu_run_ats(args, &rc, 1);
        CHECK_MSG(rc == 2 && o && tu_count_lines(o) == 1 && strstr(o, "--stagger '"), "%s: rc %d: %s", args, rc,
                  o ? o : "");
        free(o);
    }
    CHECK(ld_stress_opts_default().stagger == ((1u << ATSC_RES_CPU) | (1u << ATSC_RES_GPU) | (1u << ATSC_RES_PCIE)));
}

/* The stressor's probe process in trouble. kill_child = 0: it stops answering (SIGSTOP; the ASan build
 * once hung so): SIGTERM still ends the stressor within a second (dies of the signal, a shell's 143),
 * with its report, and no child survives. kill_child = 1: it dies (SIGKILL): the stressor says so in one
 * line, still prints its report and writes --log, exit 1 (it used to die of SIGPIPE, silently, exit 141). */
static void test_sensor_trouble(int kill_child)
{
    char base[400], out[400], tgt[400], log[400], args[1024];
    snprintf(base, sizeof base, "%s/stuck-base.txt", tmpdir);
    snprintf(out, sizeof out, "%s/stuck.txt", tmpdir);
    snprintf(tgt, sizeof tgt, "%s/stuck-target.h5", tmpdir);
    snprintf(log, sizeof log, "%s/stuck-log.csv", tmpdir);
    unlink(log);
    save_baseline(base, "");
    int rc;
    snprintf(args, sizeof args, "trace synth --out %s --duration 60 --cpu step:0.1=0.5", tgt); /* probes from the start */
    free(tu_run_ats(args, &rc, 1));
    CHECK_MSG(rc == 0, "trace synth: rc %d", rc);
    const char *bin = getenv("ATS_BIN");
    if (!bin || !*bin) bin = "./build/cli/ats";
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2), dup2(fd, 1);
        /* --probes 3 --interval 1: under ASan on a loaded 2-core machine a probe set takes ~35-42 ms, and 3 of
         * them every 0.5 s (or the default 5 every 1 s) crossed the stressor's 20% probe-time limit, so it
         * refused to start (CI) */
        execl(bin, bin, "stress", "--trace", tgt, "--baseline", base, "--threads", "1", "--probes", "3", "--interval",
              "1", "--log", log, (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    if (pid <= 0) return;
    /* the probe process is the stressor's first child: let it start and probe for a second */
    pid_t child = 0;
    for (int i = 0; i < 100 && child <= 0; i++) {
        usleep(50000);
        char path[64], buf[256] = "";
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(buf, sizeof buf, f)) child = (pid_t)atoi(buf);
            fclose(f);
        }
    }
    CHECK_MSG(child > 0, "no probe process found under pid %d", (int)pid);
    usleep(1500000);
    if (child > 0) kill(child, kill_child ? SIGKILL : SIGSTOP);
    usleep(300000);
    if (!kill_child) kill(pid, SIGTERM);
    int status = 0, done = 0;
    for (int i = 0; i < 100 && !done; i++) { /* 10 s at most; it should take < 1 s */
        usleep(100000);
        done = waitpid(pid, &status, WNOHANG) == pid;
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    if (kill_child)
        CHECK_MSG(done && WIFEXITED(status) && WEXITSTATUS(status) == 1, "stressor after its probe process died: done %d "
                  "status %#x", done, status);
    else /* the CLI dies of the signal after its report (a shell shows 143) */
        CHECK_MSG(done && ((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) ||
                           (WIFEXITED(status) && WEXITSTATUS(status) == 143)),
                  "stressor after SIGTERM: done %d status %#x", done, status);
    if (child > 0) {
        usleep(200000);
        CHECK_MSG(kill(child, 0) != 0, "probe process %d survived", (int)child);
        kill(child, SIGKILL);
    }
    char *o = tu_slurp(out, NULL);
    CHECK_MSG(o && strstr(o, "stressor probe duty cycle"), "report: %s", o ? o : "");
    if (kill_child) CHECK_MSG(o && strstr(o, "the probe process ended on signal 9"), "message: %s", o ? o : "");
    free(o);
    struct stat sb;
    CHECK_MSG(stat(log, &sb) == 0 && sb.st_size > 0, "--log %s not written", log);
}

/* `ats stress --calibrate` runs its probes through the probe process too: a short CPU calibration writes
 * a table that starts near 1 at model 1 and never rises (the file's contract), and leaves no process. */
static void test_calibrate_run(void)
{
    char cal[400], args[1024];
    snprintf(cal, sizeof cal, "%s/cal.txt", tmpdir);
    snprintf(args, sizeof args, "stress --calibrate %s --cpu-only --settle 0.1 --measure 0.6 --threads 1", cal);
    int rc;
    char *o = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 0, "calibrate: rc %d: %s", rc, o ? o : "");
    free(o);
    char *txt = tu_slurp(cal, NULL);
    int rows = 0, mono = 1;
    double first = NAN, prev = 2;
    for (char *line = txt ? strtok(txt, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char res[16];
        int k;
        double model, meas;
        if (sscanf(line, "%15s %d %lf %lf", res, &k, &model, &meas) != 4 || strcmp(res, "cpu") != 0) continue;
        if (rows++ == 0) first = meas;
        mono &= meas <= prev;
        prev = meas;
    }
    CHECK_MSG(rows >= 3 && first > 0.5 && mono, "calibration table: %d cpu rows, first %g, monotone %d", rows, first,
              mono);
    free(txt);
}

/* ld_pin_self: thread-by-thread, j -> the (j mod n)-th CPU of the set; a probe with pin = 1 has its pool
 * threads each on one CPU (read back from /proc/self/task/<tid>/status), and says "pinned". */
typedef struct pin_arg { int j, rc, ncpu, cpu, usable; } pin_arg;
static void *pin_thread(void *a_)
{
    pin_arg *a = a_;
    a->rc = ld_pin_self(a->j);
    a->usable = ld_usable_cpus(); /* the default thread count follows the affinity set (taskset) */
    cpu_set_t set;
    a->ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
    a->cpu = -1;
    for (int c = 0; c < CPU_SETSIZE && a->ncpu == 1; c++)
        if (CPU_ISSET(c, &set)) a->cpu = c;
    return NULL;
}

/* Threads of this process whose Cpus_allowed_list is one CPU. */
static int single_cpu_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
                const char *v = line + 18;
                while (*v == ' ' || *v == '\t') v++;
                n += strspn(v, "0123456789") == strcspn(v, "\n"); /* digits only: one CPU */
            }
        fclose(f);
    }
    closedir(d);
    return n;
}

static void test_pin(void)
{
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    const int n = CPU_COUNT(&set);
    int order[CPU_SETSIZE], m = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) order[m++] = c;
    const int js[] = {0, 1, n - 1, n, n + 1, 3 * n + 2};
    for (size_t i = 0; i < sizeof js / sizeof js[0]; i++) {
        pin_arg a = {js[i], -1, -1, -1, -1};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, pin_thread, &a) == 0);
        pthread_join(t, NULL);
        CHECK_MSG(a.usable == 1, "ld_usable_cpus() on a thread pinned to one CPU: %d", a.usable);
        CHECK_MSG(a.rc == 0 && a.ncpu == 1 && a.cpu == order[js[i] % n],
                  "ld_pin_self(%d) of %d CPUs: rc %d, %d CPUs allowed, cpu %d (want %d)", js[i], n, a.rc, a.ncpu,
                  a.cpu, order[js[i] % n]);
    }
    pin_arg bad = {-1, 0, 0, 0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, pin_thread, &bad) == 0);
    pthread_join(t, NULL);
    CHECK(bad.rc == EINVAL && bad.ncpu == n && bad.usable == n); /* refused, still unpinned */
    int before = single_cpu_threads();
    for (int pin = 0; pin < 2; pin++) {
        ld_probe_opts po = ld_probe_opts_default();
        po.threads = 2;
        po.use_gpu = 0;
        po.cpu_reps = 1;
        po.pin = pin;
        po.lock_path = NULL;
        ats_err err = {{0}};
        ld_probe *p = NULL;
        CHECK(ld_probe_new(&po, &p, &err) == ATS_OK);
        if (!p) continue;
        char d[512];
        ld_probe_describe(p, d, sizeof d);
        CHECK_MSG((strstr(d, "on 2 pinned threads") != NULL) == pin, "pin %d: %s", pin, d);
        int now = single_cpu_threads();
        printf("pin %d: threads on one CPU %d (before the probe %d; %d CPUs)\n", pin, now, before, n);
        if (n > 1) CHECK_MSG(now - before == (pin ? 2 : 0), "pin %d: %d threads on one CPU, %d before", pin, now, before);
        ld_probe_free(p);
    }
}

/* The probe matrix: one shared-memory object for every probe of a size (same name, same pages); an object of
 * the wrong size or contents is replaced; private_matrix = 1 keeps a private copy. */
static int describe_has(ld_probe_opts po, const char *want)
{
    ats_err err = {{0}};
    ld_probe *p = NULL;
    if (ld_probe_new(&po, &p, &err) != ATS_OK || !p) {
        printf("probe matrix: ld_probe_new failed: %s\n", err.msg);
        return 0;
    }
    char d[600];
    ld_probe_describe(p, d, sizeof d);
    int ok = strstr(d, want) != NULL;
    if (!ok) printf("probe matrix: want \"%s\" in: %s\n", want, d);
    ld_probe_free(p);
    return ok;
}

static void test_probe_matrix(void)
{
    ld_probe_opts po = ld_probe_opts_default();
    po.threads = 1;
    po.use_gpu = 0;
    po.cpu_reps = 1;
    po.lock_path = NULL;
    po.gemv_rows = 8 + (size_t)(getpid() % 4093); /* a size no other test process uses now (1 in 4093) */
    po.gemv_cols = 64;
    po.private_matrix = 0;
    char name[96], path[160], want[200];
    ld_probe_matrix_name(po.gemv_rows, po.gemv_cols, name, sizeof name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    snprintf(want, sizeof want, "shared: %s)", path);
    const off_t bytes = (off_t)(po.gemv_rows * po.gemv_cols * sizeof(float));
    unlink(path);
    struct stat st;
    CHECK(describe_has(po, want));
    CHECK_MSG(stat(path, &st) == 0 && st.st_size == bytes && (st.st_mode & 0777) == 0644,
              "%s: size %lld (want %lld), mode %o", path, (long long)st.st_size, (long long)bytes, st.st_mode & 0777);
    ino_t ino = st.st_ino;
    CHECK(describe_has(po, want)); /* the second probe maps the first's object */
    CHECK(stat(path, &st) == 0 && st.st_ino == ino);
    /* wrong contents (right size), then wrong size: replaced */
    for (int bad = 0; bad < 2; bad++) {
        FILE *f = fopen(path, "r+");
        CHECK(f != NULL);
        if (f) {
            float z = 3.0f;
            if (bad == 0) { fseek(f, 40, SEEK_SET); fwrite(&z, sizeof z, 1, f); }
            fclose(f);
        }
        if (bad == 1) CHECK(truncate(path, bytes / 2) == 0);
        CHECK_MSG(describe_has(po, want), "after a %s", bad ? "short object" : "changed value");
        CHECK(stat(path, &st) == 0 && st.st_size == bytes);
        float back = 3.0f;
        if ((f = fopen(path, "r"))) {
            fseek(f, 40, SEEK_SET);
            CHECK(fread(&back, sizeof back, 1, f) == 1);
            fclose(f);
        }
        CHECK_MSG(back != 3.0f && back >= -0.5f && back < 0.5f, "value 10 of the matrix after a %s: %g",
                  bad ? "short object" : "changed value", back);
    }
    /* temporaries: a dead creator's is removed, a live process's is left alone */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char t_dead[200], t_live[200];
    snprintf(t_dead, sizeof t_dead, "%s.%ld", path, (long)dead);
    snprintf(t_live, sizeof t_live, "%s.%ld", path, (long)getppid());
    FILE *td = fopen(t_dead, "w"), *tl = fopen(t_live, "w");
    if (td) fclose(td);
    if (tl) fclose(tl);
    CHECK(describe_has(po, want));
    CHECK_MSG(access(t_dead, F_OK) != 0, "%s (pid %ld gone) still there", t_dead, (long)dead);
    CHECK_MSG(access(t_live, F_OK) == 0, "%s (pid %ld alive) removed", t_live, (long)getppid());
    unlink(t_live);
    /* a FIFO at the name (opening it must not block): replaced; a directory (cannot be replaced): private */
    unlink(path);
    CHECK(mkfifo(path, 0644) == 0);
    CHECK(describe_has(po, want));
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == bytes);
    unlink(path);
    CHECK(mkdir(path, 0755) == 0);
    char dir_why[300];
    snprintf(dir_why, sizeof dir_why, "; a private copy: %s is not this probe's matrix (not a regular file", path);
    CHECK(describe_has(po, dir_why));
    rmdir(path);
    po.private_matrix = 1;
    CHECK(describe_has(po, "; a private copy: ATS_PROBE_PRIVATE=1)"));
    unlink(path);
    /* leftover temporaries of this process (a creator renames its own away) */
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
}

int main(void)
{
    /* private probe matrices everywhere but test_probe_matrix (which asks for the shared one itself): the
     * tests' many probe sizes would otherwise leave a shared-memory object per size in /dev/shm, also
     * from the ats processes they start (the variable is inherited) */
    setenv("ATS_PROBE_PRIVATE", "1", 1);
    uint64_t rng = tu_seed("test_load_stress");
    if (!tu_tmpdir(tmpdir, sizeof tmpdir, "load_stress")) return 1;
    test_duty_arithmetic(&rng);
    test_window(&rng);
    test_stagger(&rng);
    test_calib(&rng);
    test_baseline_file(&rng);
    test_plan_hogs(&rng);
    test_report_print();
    test_ctl_rules(&rng);
    test_ctl_plants(&rng);
    test_ctl_cross(&rng);
    test_real_runs();
    test_hogs_idle();
    test_probe_lock();
    test_closed_real();
    test_text_save();
    test_cli();
    test_cpu_probe_ms();
    test_probe_cut();
    test_cpu_only_trace();
    test_slice();
    test_pin();
    test_probe_matrix();
    test_sensor_trouble(0);
    test_sensor_trouble(1);
    test_calibrate_run();
    return tu_finish("test_load_stress"); /* removes tmpdir when every check passed */
}
