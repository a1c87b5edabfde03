/*
 * tests/exec/test_load_stress.c — the stressor's duty-cycle arithmetic and busy windows, the calibration
 * table (inversion, save/load, refusals), baseline files, and short real runs of the probes, the
 * recorder and the CPU hogs (no timing assertions: only that they run, stop and write valid traces).
 * Without a GPU, also that GPU/PCIe load is refused with ATS_ENOTFOUND.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atsc/trace_io.h"
#include "ex/load.h"
#include "testutil.h"

static char tmpdir[256];

static void test_duty_arithmetic(uint64_t *rng)
{
    for (int rep = 0; rep < 10000; rep++) {
        int k = 1 + (int)(tu_rand(rng) % 8);
        double d = tu_uniform(rng, 0, 1);
        double a = ex_stress_avail(d, k);
        /* brute force: time-average share of a victim, busy phase 1/(k+1), idle phase 1 */
        CHECK_NEAR(a, d * (1.0 / (k + 1)) + (1 - d) * 1.0, 1e-12);
        CHECK_NEAR(ex_stress_duty(a, k), d, 1e-9); /* inverse */
        double t = tu_uniform(rng, 0.01, 1.0);
        double dd = ex_stress_duty(t, k);
        CHECK(dd >= 0 && dd <= 1);
        if (t >= 1.0 / (k + 1)) CHECK_NEAR(ex_stress_avail(dd, k), t, 1e-9);
        else CHECK(dd == 1.0); /* infeasible: the most load k hogs give */
        /* hogs_needed: smallest k with 1/(k+1) <= a, against a linear search */
        int want = 1;
        while (1.0 / (want + 1) > t + 1e-12) want++;
        CHECK_MSG(ex_stress_hogs_needed(t) == want, "a=%.17g got %d want %d", t, ex_stress_hogs_needed(t), want);
    }
    CHECK(ex_stress_duty(1.0, 3) == 0.0 && ex_stress_duty(1.5, 3) == 0.0 && ex_stress_duty(NAN, 2) == 0.0);
    CHECK(ex_stress_avail(-1, 2) == 1.0 && ex_stress_avail(2, 1) == 0.5);
    CHECK(ex_stress_hogs_needed(0.4) == 2 && ex_stress_hogs_needed(0.5) == 1 && ex_stress_hogs_needed(1.0) == 1);
    CHECK(ex_stress_hogs_needed(0.25) == 3 && ex_stress_hogs_needed(0.2499) == 4);
}

static void test_window(uint64_t *rng)
{
    for (int rep = 0; rep < 200; rep++) {
        double epoch = tu_uniform(rng, 0, 1e5), P = tu_uniform(rng, 1e-3, 0.5), d = tu_uniform(rng, 0, 1);
        if (rep % 20 == 0) d = rep % 40 ? 0.0 : 1.0;
        int periods = 400;
        double busy = 0, off_sum = 0;
        for (int k = 0; k < periods; k++) {
            double now = epoch + (k + tu_uniform(rng, 0, 0.999)) * P, bs, be, pe;
            ex_stress_window(epoch, P, d, now, &bs, &be, &pe);
            double start = epoch + k * P;
            CHECK_NEAR(pe, start + P, 1e-9 * (1 + epoch));
            CHECK(bs >= start - 1e-9 * (1 + epoch) && be <= pe + 1e-9 * (1 + epoch));
            CHECK_NEAR(be - bs, d * P, 1e-9 * (1 + epoch));
            /* the same period asked at another moment gives the same window (all hogs agree) */
            double bs2, be2, pe2;
            ex_stress_window(epoch, P, d, start + 0.5 * P, &bs2, &be2, &pe2);
            CHECK(bs2 == bs && be2 == be);
            busy += be - bs;
            off_sum += (d < 1) ? (bs - start) / ((1 - d) * P) : 0.5;
        }
        CHECK_NEAR(busy / (periods * P), d, 1e-6);
        /* offsets spread over the free part of the period: their mean is near 1/2 (uniform, n = 400) */
        CHECK_NEAR(off_sum / periods, 0.5, 0.1);
    }
}

static void test_calib(uint64_t *rng)
{
    for (int rep = 0; rep < 200; rep++) {
        ex_stress_calib c;
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
                CHECK_NEAR(ex_stress_calib_invert(&c, (enum atsc_resource)r, c.measured[r][i]), c.model[r][i], 1e-12);
        /* forward interpolation of the inverse gives the target back inside the measured range */
        for (int q = 0; q < 20; q++) {
            double t = tu_uniform(rng, c.measured[r][n - 1], c.measured[r][0]);
            double mm = ex_stress_calib_invert(&c, (enum atsc_resource)r, t);
            CHECK(mm <= 1.0 && mm >= c.model[r][n - 1]);
            for (int i = 0; i + 1 < n; i++)
                if (mm <= c.model[r][i] && mm >= c.model[r][i + 1] && c.measured[r][i] > c.measured[r][i + 1]) {
                    double f = (c.model[r][i] - mm) / (c.model[r][i] - c.model[r][i + 1]);
                    double back = c.measured[r][i] + f * (c.measured[r][i + 1] - c.measured[r][i]);
                    CHECK_NEAR(back, t, 1e-9);
                    break;
                }
        }
        CHECK(ex_stress_calib_invert(&c, (enum atsc_resource)r, 1.0) == 1.0);
        CHECK(ex_stress_calib_invert(&c, (enum atsc_resource)r, 0.01) == c.model[r][n - 1]);
        CHECK(ex_stress_calib_invert(&c, (enum atsc_resource)((r + 1) % 3), 0.37) == 0.37); /* uncalibrated */
        /* save / load round trip */
        char path[512];
        snprintf(path, sizeof path, "%s/calib.txt", tmpdir);
        ats_err err = {{0}};
        CHECK(ex_stress_calib_save(&c, path, &err) == ATS_OK);
        ex_stress_calib back;
        CHECK_MSG(ex_stress_calib_load(path, &back, &err) == ATS_OK, "%s", err.msg);
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
        ex_stress_calib c;
        ats_err err = {{0}};
        CHECK(ex_stress_calib_load(path, &c, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "line "), "%s", err.msg);
        unlink(path);
    }
}

static void test_baseline_file(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s/base.txt", tmpdir);
    ex_baseline b = {{tu_uniform(rng, 1e-4, 1e-2), NAN, tu_uniform(rng, 1e-4, 1e-2)}, 7, 0, 3};
    ats_err err = {{0}};
    CHECK(ex_baseline_save(&b, path, &err) == ATS_OK);
    ex_baseline c;
    CHECK_MSG(ex_baseline_load(path, &c, &err) == ATS_OK, "%s", err.msg);
    CHECK_REL(c.t_s[0], b.t_s[0], 1e-8, 0);
    CHECK(isnan(c.t_s[1]));
    CHECK(c.cpu_reps == 7 && c.gpu_iters == 0 && c.threads == 3);
    FILE *f = fopen(path, "w");
    fputs("0.001 nan -1 7 0 3\n", f);
    fclose(f);
    CHECK(ex_baseline_load(path, &c, &err) == ATS_EINVAL && strstr(err.msg, "pcie_s") && strstr(err.msg, path));
    f = fopen(path, "w");
    fputs("0.001 nan 0.002\n", f);
    fclose(f);
    CHECK(ex_baseline_load(path, &c, &err) == ATS_EINVAL && strstr(err.msg, "6 fields"));
    unlink(path);
    CHECK(ex_avail_from_times(1.0, 2.0) == 0.5 && ex_avail_from_times(1.0, 0.5) == 1.0);
    CHECK(ex_avail_from_times(1.0, 1e9) == 0.01 && ex_avail_from_times(NAN, 1.0) == 1.0);
}

/* Probes + recorder + CPU hogs, briefly. */
static void test_real_runs(void)
{
    ex_probe_opts po = ex_probe_opts_default();
    po.threads = 2;
    po.gemv_rows = 256;
    po.gemv_cols = 512;
    po.cpu_target_s = 5e-4;
    po.use_gpu = 0;
    ex_probe *p = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ex_probe_new(&po, &p, &err) == ATS_OK, "%s", err.msg);
    if (!p) return;
    CHECK(!ex_probe_has_gpu(p));
    double t[ATSC_RES_COUNT];
    CHECK(ex_probe_measure(p, t, &err) == ATS_OK && t[ATSC_RES_CPU] > 0 && isnan(t[ATSC_RES_GPU]));
    ex_baseline base;
    CHECK(ex_probe_baseline(p, 0.2, 0.05, NULL, &base, &err) == ATS_OK);
    CHECK(base.t_s[ATSC_RES_CPU] > 0 && isnan(base.t_s[ATSC_RES_PCIE]) && base.threads == 2 && base.cpu_reps >= 1);
    ex_record_opts ro = ex_record_opts_default();
    ro.interval_s = 0.05;
    ro.duration_s = 0.4;
    atsc_trace *tr = NULL;
    ex_record_stats st;
    CHECK_MSG(ex_record_run(p, &base, &ro, &tr, &st, &err) == ATS_OK, "%s", err.msg);
    if (tr) {
        CHECK(tr->n >= 2 && tr->n <= 9 && st.samples == tr->n);
        CHECK(atsc_trace_validate(tr, "recorded", &err) == ATS_OK);
        CHECK(tr->gpu_avail[0] == 1.0 && tr->pcie_avail[tr->n - 1] == 1.0);
        CHECK(st.duty > 0 && st.duty < 1 && st.probe_s[ATSC_RES_GPU] == 0);
    }
    atsc_trace_free(tr);
    /* a stop flag already set: the baseline is refused as interrupted */
    volatile sig_atomic_t stop = 1;
    CHECK(ex_probe_baseline(p, 0.2, 0.05, &stop, &base, &err) == ATS_EINVAL);
    ex_probe_free(p);

    /* CPU hogs follow a short CPU-only trace and stop */
    atsc_trace *target = atsc_trace_new(3);
    double ts[3] = {0, 0.1, 0.2}, cpu[3] = {1.0, 0.4, 0.7};
    for (int i = 0; i < 3; i++) {
        target->t_s[i] = ts[i];
        target->cpu_avail[i] = cpu[i];
        target->gpu_avail[i] = target->pcie_avail[i] = 1.0;
    }
    ex_stress_opts so = ex_stress_opts_default();
    so.threads = 2;
    so.duration_s = 0.3;
    CHECK_MSG(ex_stress_run(target, &so, &err) == ATS_OK, "%s", err.msg);
    /* GPU load without a GPU: refused before any hog starts */
    target->gpu_avail[1] = 0.4;
    if (!ex_gpu_present(0)) {
        enum ats_status s = ex_stress_run(target, &so, &err);
        CHECK_MSG(s == ATS_ENOTFOUND && strstr(err.msg, "no CUDA device"), "%d %s", (int)s, err.msg);
    } else {
        fprintf(stderr, "test_load_stress: a GPU is present: the no-GPU refusal is not checked\n");
    }
    /* duration 0 with a one-sample trace */
    atsc_trace *one = atsc_trace_new(1);
    one->cpu_avail[0] = one->gpu_avail[0] = one->pcie_avail[0] = 1.0;
    so.duration_s = 0;
    CHECK(ex_stress_run(one, &so, &err) == ATS_EINVAL);
    atsc_trace_free(one);
    atsc_trace_free(target);
    /* hogs started and stopped directly, with duties set in between */
    int k[ATSC_RES_COUNT] = {2, 0, 0};
    ex_hogs *h = NULL;
    so.duration_s = 0;
    CHECK(ex_hogs_start(&so, k, &h, &err) == ATS_OK);
    if (h) {
        ex_hogs_set(h, ATSC_RES_CPU, 0.5);
        usleep(50000);
        CHECK(ex_hogs_alive(h));
        ex_hogs_stop(h);
    }
    so.period_s = 0;
    CHECK(ex_hogs_start(&so, k, &h, &err) == ATS_EINVAL && h == NULL);
}

int main(void)
{
    uint64_t rng = tu_seed("test_load_stress");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats_load_stress_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_duty_arithmetic(&rng);
    test_window(&rng);
    test_calib(&rng);
    test_baseline_file(&rng);
    test_real_runs();
    rmdir(tmpdir);
    return tu_finish("test_load_stress");
}
