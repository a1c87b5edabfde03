/*
 * common/validate: the sim-versus-real statistics against hand-computed values (mean TPOT error, MAPE,
 * p90 of the per-round error, prefill tok/s, re-schedules) and on random rounds against a direct
 * computation; the refusals (zero-length window, round counts or requests that differ, no decode round,
 * a zero real latency); trace windows; decode rounds by load segment (hand-computed); the validation file written and read back (/real, /sim,
 * /validation); the summary list appended to, and a bad list refused and left as it was.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atsc/results.h"
#include "atsc/trace_io.h"
#include "atsc/validate.h"
#include "testutil.h"

static char dir[512];

static atsc_round_row rr(int64_t i, int decode, int tokens, double lat, int resched)
{
    atsc_round_row r = {i, decode ? ATSC_PHASE_DECODE : ATSC_PHASE_PREFILL, tokens, 0.1 * (double)i, lat, 0, resched, 0,
                        1.0, 1.0, 1.0};
    return r;
}

static void test_hand(void)
{
    /* one prefill round of 8 tokens, 4 decode rounds [ms]: real 1 2 4 5, sim 1.1 1.8 5 5
       errors 10 10 25 0 % -> MAPE 11.25, sorted 0 10 10 25: p90 at 0.9 * 3 = 2.7 -> 10 + 0.7 * 15 = 20.5
       mean real 3, sim 3.225 -> +7.5 %; prefill 8 / 0.004 = 2000 tok/s, 8 / 0.002 = 4000 */
    atsc_round_row real[5] = {rr(0, 0, 8, 0.004, 0), rr(1, 1, 1, 1e-3, 1), rr(2, 1, 1, 2e-3, 0), rr(3, 1, 1, 4e-3, 1),
                              rr(4, 1, 1, 5e-3, 0)};
    atsc_round_row sim[5] = {rr(0, 0, 8, 0.002, 0), rr(1, 1, 1, 1.1e-3, 0), rr(2, 1, 1, 1.8e-3, 0),
                             rr(3, 1, 1, 5e-3, 1), rr(4, 1, 1, 5e-3, 0)};
    atsc_val_stats s;
    ats_err err = {{0}};
    CHECK_MSG(atsc_val_compare(real, 5, sim, 5, &s, &err) == ATS_OK, "%s", err.msg);
    CHECK(s.n_rounds == 5 && s.n_decode == 4 && s.prefill_tok == 8);
    CHECK_NEAR(s.real_tpot_s, 3e-3, 1e-15);
    CHECK_NEAR(s.sim_tpot_s, 3.225e-3, 1e-15);
    CHECK_NEAR(s.mean_tpot_error_pct, 7.5, 1e-9);
    CHECK_NEAR(s.mape_pct, 11.25, 1e-9);
    CHECK_NEAR(s.p90_round_error_pct, 20.5, 1e-9);
    CHECK_NEAR(s.real_prefill_tok_s, 2000.0, 1e-9);
    CHECK_NEAR(s.sim_prefill_tok_s, 4000.0, 1e-9);
    CHECK(s.real_resched == 2 && s.sim_resched == 1);
    /* a single decode round: p90 is that round's error; no prefill: NaN tok/s */
    atsc_round_row r1 = rr(0, 1, 1, 2e-3, 0), s1 = rr(0, 1, 1, 1.5e-3, 0);
    CHECK(atsc_val_compare(&r1, 1, &s1, 1, &s, &err) == ATS_OK);
    CHECK_NEAR(s.mean_tpot_error_pct, -25.0, 1e-9);
    CHECK_NEAR(s.p90_round_error_pct, 25.0, 1e-9);
    CHECK(isnan(s.real_prefill_tok_s) && isnan(s.sim_prefill_tok_s));
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* random rounds: the statistics against a direct computation (linear-interpolated quantile) */
static void test_random(uint64_t *rng)
{
    for (int rep = 0; rep < 20; rep++) {
        size_t n = 1 + (size_t)(tu_rand(rng) % 200), np = tu_rand(rng) % 4;
        atsc_round_row *a = calloc(n + np, sizeof *a), *b = calloc(n + np, sizeof *b);
        double *e = calloc(n, sizeof *e), sa = 0, sb = 0, se = 0;
        for (size_t i = 0; i < n + np; i++) {
            int dec = i >= np;
            a[i] = rr((int64_t)i, dec, dec ? 1 : 16, tu_uniform(rng, 1e-3, 2e-2), 0);
            b[i] = rr((int64_t)i, dec, dec ? 1 : 16, tu_uniform(rng, 1e-3, 2e-2), 0);
            if (dec) {
                size_t k = i - np;
                sa += a[i].latency_s, sb += b[i].latency_s;
                e[k] = 100.0 * fabs(b[i].latency_s - a[i].latency_s) / a[i].latency_s;
                se += e[k];
            }
        }
        qsort(e, n, sizeof *e, cmp_d);
        double pos = 0.9 * (double)(n - 1), lo = floor(pos);
        size_t l = (size_t)lo, h = l + 1 < n ? l + 1 : l;
        double p90 = e[l] + (e[h] - e[l]) * (pos - lo);
        atsc_val_stats s;
        ats_err err = {{0}};
        CHECK_MSG(atsc_val_compare(a, n + np, b, n + np, &s, &err) == ATS_OK, "%s", err.msg);
        CHECK_REL(s.real_tpot_s, sa / (double)n, 1e-12, 0);
        CHECK_REL(s.mean_tpot_error_pct, 100.0 * (sb - sa) / sa, 1e-9, 1e-9);
        CHECK_REL(s.mape_pct, se / (double)n, 1e-12, 0);
        CHECK_REL(s.p90_round_error_pct, p90, 1e-12, 0);
        free(a);
        free(b);
        free(e);
    }
}

static void expect_err(const atsc_round_row *a, size_t na, const atsc_round_row *b, size_t nb, const char *want)
{
    atsc_val_stats s;
    ats_err err = {{0}};
    CHECK(atsc_val_compare(a, na, b, nb, &s, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
}

static void test_refusals(void)
{
    atsc_round_row a[3] = {rr(0, 0, 8, 1e-3, 0), rr(1, 1, 1, 1e-3, 0), rr(2, 1, 1, 1e-3, 0)};
    atsc_round_row b[3] = {rr(0, 0, 8, 1e-3, 0), rr(1, 1, 1, 1e-3, 0), rr(2, 0, 4, 1e-3, 0)};
    expect_err(a, 0, b, 0, "zero-length window");
    expect_err(a, 3, b, 0, "zero-length window");
    expect_err(a, 3, a, 2, "round counts differ: real 3, sim 2");
    expect_err(a, 3, b, 3, "round 2: real decode of 1 tokens, sim prefill of 4 tokens");
    expect_err(a, 1, a, 1, "no decode round");
    atsc_round_row z[2] = {rr(0, 0, 8, 1e-3, 0), rr(1, 1, 1, 0.0, 0)};
    expect_err(z, 2, a, 2, "round 1: real decode latency 0 s");
}

static void test_window(void)
{
    atsc_trace *t = atsc_trace_new(4);
    const double ts[4] = {0, 10, 20, 30}, cpu[4] = {1, 0.4, 1, 0.5}, gpu[4] = {1, 1, 0.98, 1};
    for (int i = 0; i < 4; i++) t->t_s[i] = ts[i], t->cpu_avail[i] = cpu[i], t->gpu_avail[i] = gpu[i], t->pcie_avail[i] = 1;
    atsc_trace *w = NULL;
    ats_err err = {{0}};
    CHECK_MSG(atsc_val_trace_window(t, "x.h5", 5, 25, &w, &err) == ATS_OK, "%s", err.msg);
    if (w) {
        /* 0: the value at 5 (1.0), 5: 0.4 (t 10), 15: 1.0 (t 20), 20: the end, 1.0 again */
        CHECK(w->n == 4);
        CHECK(w->t_s[0] == 0 && w->t_s[1] == 5 && w->t_s[2] == 15 && w->t_s[3] == 20);
        CHECK(w->cpu_avail[0] == 1 && w->cpu_avail[1] == 0.4 && w->cpu_avail[2] == 1 && w->cpu_avail[3] == 1);
        CHECK(atsc_trace_validate(w, "window", &err) == ATS_OK);
        CHECK(strstr(w->source, "window 5:25 s of x.h5") != NULL);
    }
    atsc_trace_free(w);
    w = NULL;
    CHECK(atsc_val_trace_window(t, "x.h5", 12, 12, &w, &err) == ATS_EINVAL && w == NULL);
    CHECK(strstr(err.msg, "zero-length window") != NULL);
    CHECK(atsc_val_trace_window(t, "x.h5", 12, 11, &w, &err) == ATS_EINVAL);
    CHECK(atsc_val_trace_window(t, "x.h5", -1, 11, &w, &err) == ATS_EINVAL);
    /* a window inside one sample: its value, then the end */
    CHECK(atsc_val_trace_window(t, "x.h5", 11, 12, &w, &err) == ATS_OK && w && w->n == 2 && w->cpu_avail[0] == 0.4 &&
          w->t_s[1] == 1.0);
    atsc_trace_free(w);
    /* changes by more than 0.05: at 10 and 20 (the GPU's 0.02 is none), not at 30 outside (5, 25) */
    CHECK(atsc_val_trace_changes(t, 5, 25, 0.05) == 2);
    CHECK(atsc_val_trace_changes(t, 0, 31, 0.05) == 3);
    CHECK(atsc_val_trace_changes(t, 0, 31, 0.01) == 3);
    CHECK(atsc_val_trace_changes(t, 10, 20, 0.05) == 0); /* open interval */
    atsc_trace_free(t);
}

static void test_segments(void)
{
    /* boundaries 0, 10 (cpu 1 -> 0.4), 25 (gpu 1 -> 0.5); the 0.02 step at 20 is none */
    atsc_trace *w = atsc_trace_new(4);
    const double ts[4] = {0, 10, 20, 25}, cpu[4] = {1, 0.4, 0.42, 0.42}, gpu[4] = {1, 1, 1, 0.5};
    for (int i = 0; i < 4; i++) w->t_s[i] = ts[i], w->cpu_avail[i] = cpu[i], w->gpu_avail[i] = gpu[i], w->pcie_avail[i] = 1;
    /* a prefill at 0, decode rounds real at 1 5 12 30 s, sim at 1 11 13 26 s: round 2 is in segment 0 for the
       real run and 1 for the simulator (counted in none) */
    atsc_round_row a[5] = {rr(0, 0, 8, 1e-3, 0), rr(1, 1, 1, 1e-3, 0), rr(2, 1, 1, 2e-3, 0), rr(3, 1, 1, 3e-3, 0),
                           rr(4, 1, 1, 4e-3, 0)};
    atsc_round_row b[5] = {rr(0, 0, 8, 1e-3, 0), rr(1, 1, 1, 2e-3, 0), rr(2, 1, 1, 2e-3, 0), rr(3, 1, 1, 6e-3, 0),
                           rr(4, 1, 1, 6e-3, 0)};
    const double ta[5] = {0, 1, 5, 12, 30}, tb[5] = {0, 1, 11, 13, 26};
    for (int i = 0; i < 5; i++) a[i].t_start_s = ta[i] + 7.0, b[i].t_start_s = tb[i]; /* the real run's clock: + 7 s */
    atsc_val_seg g[4];
    size_t n = 0;
    ats_err err = {{0}};
    CHECK_MSG(atsc_val_segments(a, b, 5, w, 0.05, g, 4, &n, &err) == ATS_OK, "%s", err.msg);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(g[0].t0_s == 0 && g[0].t1_s == 10 && g[0].cpu == 1 && g[0].gpu == 1 && g[0].n_decode == 1);
        CHECK_NEAR(g[0].mean_tpot_error_pct, 100.0, 1e-9);
        CHECK(g[1].t0_s == 10 && g[1].t1_s == 25 && g[1].cpu == 0.4 && g[1].n_decode == 1);
        CHECK_NEAR(g[1].real_tpot_s, 3e-3, 1e-15);
        CHECK_NEAR(g[1].mean_tpot_error_pct, 100.0, 1e-9);
        CHECK(g[2].t0_s == 25 && isinf(g[2].t1_s) && g[2].gpu == 0.5 && g[2].cpu == 0.42 && g[2].n_decode == 1);
        CHECK_NEAR(g[2].mean_tpot_error_pct, 50.0, 1e-9);
    }
    /* fewer slots than segments: the first ones, the count of all */
    CHECK(atsc_val_segments(a, b, 5, w, 0.05, g, 2, &n, &err) == ATS_OK && n == 3 && g[1].t0_s == 10);
    /* a coarser tolerance: one segment, every decode round in it; empty segments have NaN means */
    CHECK(atsc_val_segments(a, b, 5, w, 0.7, g, 4, &n, &err) == ATS_OK && n == 1 && g[0].n_decode == 4);
    atsc_round_row p1 = rr(0, 0, 8, 1e-3, 0);
    CHECK(atsc_val_segments(&p1, &p1, 1, w, 0.05, g, 4, &n, &err) == ATS_OK && n == 3 && g[0].n_decode == 0 &&
          isnan(g[0].real_tpot_s) && isnan(g[0].mean_tpot_error_pct));
    CHECK(atsc_val_segments(a, b, 0, w, 0.05, g, 4, &n, &err) == ATS_EINVAL);
    atsc_trace_free(w);
}

static void write_results(const char *path, const char *producer, const atsc_round_row *r, size_t n)
{
    atsc_results_meta meta = {producer, "{\"a\": 1}", 7, "m", "hw", "tr"};
    atsc_results *w = NULL;
    ats_err err = {{0}};
    CHECK_MSG(atsc_results_open(path, &meta, &w, &err) == ATS_OK, "%s", err.msg);
    CHECK(atsc_results_begin_run(w, "ats", "ats", NULL, 0, &err) == ATS_OK);
    CHECK(atsc_results_append_rounds(w, r, n, &err) == ATS_OK);
    CHECK_MSG(atsc_results_close(w, &err) == ATS_OK, "%s", err.msg);
}

static void test_file(void)
{
    char rp[600], sp[600], vp[600];
    snprintf(rp, sizeof rp, "%s/real.h5", dir);
    snprintf(sp, sizeof sp, "%s/sim.h5", dir);
    snprintf(vp, sizeof vp, "%s/val.h5", dir);
    atsc_round_row a[3] = {rr(0, 0, 8, 4e-3, 0), rr(1, 1, 1, 1e-3, 1), rr(2, 1, 1, 2e-3, 0)};
    atsc_round_row b[3] = {rr(0, 0, 8, 2e-3, 0), rr(1, 1, 1, 1.5e-3, 0), rr(2, 1, 1, 2e-3, 0)};
    write_results(rp, "ats run", a, 3); /* one run: the file has /rounds links, left out of the copy */
    write_results(sp, "ats sim", b, 3);
    atsc_val_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.policy, sizeof row.policy, "ats");
    snprintf(row.trace, sizeof row.trace, "fig13-synth");
    row.window_start_s = 50, row.window_end_s = 130;
    ats_err err = {{0}};
    CHECK(atsc_val_compare(a, 3, b, 3, &row.s, &err) == ATS_OK);
    atsc_val_seg seg[2];
    memset(seg, 0, sizeof seg);
    for (int k = 0; k < 2; k++) {
        snprintf(seg[k].policy, sizeof seg[k].policy, "ats");
        seg[k].t0_s = 10.0 * k, seg[k].t1_s = k ? INFINITY : 10.0, seg[k].cpu = k ? 0.4 : 1.0, seg[k].n_decode = 1;
        seg[k].real_tpot_s = 1e-3, seg[k].sim_tpot_s = 1.5e-3, seg[k].mean_tpot_error_pct = 50.0;
    }
    CHECK(atsc_val_write(vp, rp, sp, "not json", &row, 1, seg, 2, &err) == ATS_EINVAL);
    CHECK_MSG(atsc_val_write(vp, rp, sp, "{\"x\": 2}", &row, 1, seg, 2, &err) == ATS_OK, "%s", err.msg);
    atsc_val_seg *gs = NULL;
    size_t ng = 0;
    CHECK_MSG(atsc_val_read_segments(vp, &gs, &ng, &err) == ATS_OK, "%s", err.msg);
    CHECK(ng == 2 && gs && !strcmp(gs[1].policy, "ats") && isinf(gs[1].t1_s) && gs[1].cpu == 0.4 &&
          gs[0].mean_tpot_error_pct == 50.0);
    free(gs);
    atsc_results_file *real = NULL, *sim = NULL;
    atsc_val_row *rows = NULL;
    size_t n = 0;
    CHECK_MSG(atsc_val_read(vp, &real, &sim, &rows, &n, &err) == ATS_OK, "%s", err.msg);
    CHECK(n == 1 && rows && strcmp(rows[0].policy, "ats") == 0 && strcmp(rows[0].trace, "fig13-synth") == 0);
    if (n == 1) {
        CHECK(rows[0].window_end_s == 130 && rows[0].s.n_rounds == 3 && rows[0].s.real_resched == 1);
        CHECK(rows[0].s.mean_tpot_error_pct == row.s.mean_tpot_error_pct);
    }
    CHECK(real && strcmp(real->producer, "ats run") == 0 && real->n_runs == 1 && real->runs[0].n_rounds == 3);
    CHECK(sim && strcmp(sim->producer, "ats sim") == 0 && sim->runs[0].rounds[1].latency_s == 1.5e-3);
    atsc_results_file_free(real);
    atsc_results_file_free(sim);
    free(rows);
    /* a results file is no validation file; a missing group is named */
    CHECK(atsc_val_read(rp, NULL, NULL, &rows, &n, &err) == ATS_EINVAL && strstr(err.msg, "ats-validation"));
    CHECK(atsc_results_read_group(vp, "/nope", &real, &err) == ATS_EINVAL && strstr(err.msg, "'/nope'"));
    /* an input that is not a results file: nothing written */
    char vp2[600];
    snprintf(vp2, sizeof vp2, "%s/val2.h5", dir);
    CHECK(atsc_val_write(vp2, vp, sp, "{}", &row, 1, NULL, 0, &err) == ATS_EINVAL);
    struct stat st;
    CHECK(stat(vp2, &st) != 0);
}

static void test_summary(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    ats_err err = {{0}};
    json_t *recs = json_pack("[{s:s, s:f}, {s:s, s:f}]", "policy", "ats", "real_tpot_ms", 10.0, "policy", "layer",
                             "real_tpot_ms", 12.0);
    CHECK(atsc_val_summary_check(p, &err) == ATS_OK); /* no file: an empty list */
    CHECK_MSG(atsc_val_summary_append(p, recs, &err) == ATS_OK, "%s", err.msg);
    CHECK_MSG(atsc_val_summary_append(p, recs, &err) == ATS_OK, "%s", err.msg);
    json_t *l = json_load_file(p, 0, NULL);
    CHECK(json_is_array(l) && json_array_size(l) == 4);
    CHECK(json_real_value(json_object_get(json_array_get(l, 3), "real_tpot_ms")) == 12.0);
    json_decref(l);
    /* an empty list as committed */
    tu_write_text(p, "[]\n");
    CHECK(atsc_val_summary_append(p, recs, &err) == ATS_OK);
    l = json_load_file(p, 0, NULL);
    CHECK(json_array_size(l) == 2);
    json_decref(l);
    /* bad lists: refused, left as they are */
    const char *bad[4] = {"[{\"policy\": \"ats\"}, ", "{\"policy\": \"ats\"}", "[{\"a\": 1}, 3]", "[{\"a\": 1, \"a\": 2}]"};
    const char *want[4] = {"not JSON", "top level is a JSON object", "entry 1 is not a record", "not JSON"};
    for (int i = 0; i < 4; i++) {
        tu_write_text(p, bad[i]);
        CHECK(atsc_val_summary_check(p, &err) == ATS_EINVAL);
        CHECK(atsc_val_summary_append(p, recs, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, want[i]) && strstr(err.msg, p), "case %d: '%s'", i, err.msg);
        char *now = tu_slurp(p, NULL);
        CHECK_MSG(now && strcmp(now, bad[i]) == 0, "case %d: the file changed", i);
        free(now);
    }
    /* records that are not objects */
    json_t *r2 = json_pack("[i]", 3);
    tu_write_text(p, "[]");
    CHECK(atsc_val_summary_append(p, r2, &err) == ATS_EINVAL && strstr(err.msg, "new record 0"));
    json_decref(r2);
    json_decref(recs);
}

int main(void)
{
    uint64_t rng = tu_seed("test_validate");
    if (!tu_tmpdir(dir, sizeof dir, "test_validate")) return 1;
    test_hand();
    test_random(&rng);
    test_refusals();
    test_window();
    test_segments();
    test_file();
    test_summary();
    return tu_finish("test_validate");
}
