/*
 * test_sim_validate — `ats sim` / `ats sweep` refuse nonsense up front instead of hanging or printing
 * garbage (through the program, $ATS_BIN), and the session's bound on rounds holds.
 *
 *  bound    sim_session_round_bound() is never below the rounds a session actually simulates
 *           (fresh random request shapes, durations and gaps; printed seed), and equals
 *           requests x rounds-per-request when only a request count bounds the run; a session
 *           with max_rounds below the bound is refused before any work.
 *  cli      each bad input exits 2 with one line naming the flag/file, field and value: huge
 *           --duration / --requests / trace length (rounds over --max-rounds), --trace-offset past
 *           the end, --vram-budget above the GPU's VRAM, unitless or hex byte sizes, duplicate
 *           policies, a flag without its value, hw figures outside the plausible ranges, mixed units
 *           and huge grids in sweep ranges, an explicit `expert` on a dense model; an
 *           $ATS_BENCH_SCHED that names a missing or unparsable file or a directory, or whose figures
 *           are missing, not numbers or outside --resched-cost's 0 .. 10 s (unset or empty: the default);
 *           `ats bench sched --models ''` (nothing to measure).
 *  results  a trace too short to finish a request exits 1 with "no request completed" and no NaN
 *           in the table, CSV or JSON; a run cut by --duration after its prefill or in its decode
 *           shows no TTFT or TPOT either ('-', empty, null), and ats sweep picks no best point
 *           among points that completed no request and says so; the default 'all' notes the inapplicable `expert` in the
 *           table header instead of an error line; the results file's /config records the
 *           re-schedule cost actually used (--resched-cost here) and its source.
 *  sweep    a policy without a re-scheduling controller (ops->dynamic == 0) gets one point per trace
 *           and "n/a" for eps and the interval (table), empty fields (CSV), eps = interval = 0 and no
 *           re-schedules (/sweep), one stderr line naming it and the policies with a controller; its
 *           point equals `ats sim` of that policy; the controller policies keep their full grid.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "atsc/results.h"
#include "ats/policy.h"
#include "atsc/trace_io.h"
#include "sim/session.h"
#include "testutil.h"

static char tmpdir[256];

/* exit 2, exactly one line of output (stderr; nothing on stdout), containing every `must` */
static void expect_usage(const char *args, const char *must1, const char *must2)
{
    int rc;
    char *out = tu_run_ats(args, &rc, 1);
    CHECK_MSG(rc == 2, "ats %s: exit %d (expected 2): %s", args, rc, out ? out : "");
    CHECK_MSG(out && tu_count_lines(out) == 1, "ats %s: %d lines (expected one): %s", args, tu_count_lines(out),
              out ? out : "");
    CHECK_MSG(out && strstr(out, must1), "ats %s: message lacks '%s': %s", args, must1, out ? out : "");
    if (must2) CHECK_MSG(out && strstr(out, must2), "ats %s: message lacks '%s': %s", args, must2, out ? out : "");
    free(out);
}

static void write_trace(const char *path, double t_end)
{
    atsc_trace *tr = atsc_trace_new(2);
    tr->t_s[0] = 0.0;
    tr->t_s[1] = t_end;
    for (int i = 0; i < 2; i++) tr->cpu_avail[i] = tr->gpu_avail[i] = tr->pcie_avail[i] = 0.5;
    snprintf(tr->source, sizeof tr->source, "test_sim_validate");
    snprintf(tr->machine, sizeof tr->machine, "synthetic");
    snprintf(tr->description, sizeof tr->description, "two samples, last at %g s", t_end);
    ats_err err = {{0}};
    CHECK_MSG(atsc_trace_save(tr, path, &err) == ATS_OK, "%s", err.msg);
    atsc_trace_free(tr);
}

/* the committed rtx3060-laptop description with one figure replaced */
static void write_hw(const char *path, const char *section, const char *key, json_t *v)
{
    char src[1024];
    tu_source_path(src, sizeof src, "sim/hw/rtx3060-laptop.json");
    json_error_t je;
    json_t *root = json_load_file(src, 0, &je);
    CHECK_MSG(root != NULL, "%s: %s", src, je.text);
    if (!root) return;
    json_object_set_new(json_object_get(root, section), key, v);
    CHECK(json_dump_file(root, path, JSON_INDENT(2)) == 0);
    json_decref(root);
}

static void test_bound(uint64_t *rng)
{
    char mp[1024], hp[1024];
    tu_source_path(mp, sizeof mp, "models/qwen3-14b.json");
    tu_source_path(hp, sizeof hp, "sim/hw/rtx3060-laptop.json");
    ats_arch arch;
    ats_hw hw;
    ats_err err = {{0}};
    CHECK_MSG(atsc_model_load(mp, &arch, &err) == ATS_OK, "%s", err.msg);
    CHECK_MSG(atsc_hw_load(hp, &hw, &err) == ATS_OK, "%s", err.msg);
    for (int rep = 0; rep < 6; rep++) {
        sim_session_cfg cfg = sim_session_cfg_default();
        cfg.policy = rep % 2 ? "ats" : "static";
        cfg.recipe = arch.default_recipe;
        cfg.vram_budget_bytes = 5ull << 30;
        cfg.prompt_tok = 64 + (int64_t)(tu_rand(rng) % 512);
        cfg.chunk_tok = 64 + (int64_t)(tu_rand(rng) % 256);
        cfg.gen_tok = 1 + (int64_t)(tu_rand(rng) % 12);
        cfg.resched_cost_s = 1e-3;
        if (rep < 2) { /* only a request count */
            cfg.n_requests = 1 + (int64_t)(tu_rand(rng) % 3);
        } else { /* a duration (and maybe a gap) */
            cfg.n_requests = 0;
            cfg.duration_s = tu_uniform(rng, 0.5, 6.0);
            cfg.gap_s = rep % 2 ? tu_uniform(rng, 0.0, 0.5) : 0.0;
        }
        char why[160];
        double bound = sim_session_round_bound(&arch, &hw, &cfg, why, sizeof why);
        sim_session_result r;
        enum ats_status st = sim_session_run(&arch, &hw, NULL, &cfg, &r, &err);
        CHECK_MSG(st == ATS_OK, "rep %d: %s", rep, err.msg);
        if (st != ATS_OK) continue;
        const double rpr = (double)((cfg.prompt_tok + cfg.chunk_tok - 1) / cfg.chunk_tok + cfg.gen_tok);
        fprintf(stderr, "rep %d: P %lld C %lld G %lld req %lld dur %.3g gap %.3g: %zu rounds, bound %.0f (%s)\n", rep,
                (long long)cfg.prompt_tok, (long long)cfg.chunk_tok, (long long)cfg.gen_tok, (long long)cfg.n_requests,
                cfg.duration_s, cfg.gap_s, r.n_rounds, bound, why);
        CHECK_MSG((double)r.n_rounds <= bound, "rep %d: %zu rounds > bound %g", rep, r.n_rounds, bound);
        if (rep < 2) CHECK(bound == (double)cfg.n_requests * rpr && (double)r.n_rounds == bound);
        sim_session_result_free(&r);
        /* a limit below the bound refuses the run before simulating anything */
        cfg.max_rounds = (int64_t)floor(bound) - 1;
        if (cfg.max_rounds > 0) {
            st = sim_session_run(&arch, &hw, NULL, &cfg, &r, &err);
            CHECK_MSG(st == ATS_EINVAL && strstr(err.msg, "over the limit"), "rep %d: %d %s", rep, (int)st, err.msg);
            if (st == ATS_OK) sim_session_result_free(&r);
        }
    }
}

static void test_cli(void)
{
    char a[2048], p[512];
    int rc_ign;
    expect_usage("sim --duration 1e7", "--duration", "--max-rounds");
    expect_usage("sim --duration 1e9", "--duration", "1e7");      /* beyond the plausibility limit */
    expect_usage("sim --resched-cost 1e300s", "--resched-cost", "0..10 s");
    expect_usage("sim --gap 1e300", "--gap", "0..86400");
    expect_usage("sim --vram-budget 1B", "--vram-budget", "64 MiB");
    expect_usage("sim --requests 1000000000", "--requests", "over the limit of 10000000");
    expect_usage("sim --requests 100 --max-rounds 1000", "--requests", "over the limit of 1000");
    snprintf(p, sizeof p, "%s/ns.h5", tmpdir);
    write_trace(p, 1.8e11); /* 180 s written in ns */
    snprintf(a, sizeof a, "sim --policy ats --trace %s", p);
    expect_usage(a, p, "times not in seconds?");
    snprintf(a, sizeof a, "sweep --eps 0.1 --interval 2 --trace %s", p);
    expect_usage(a, p, "over the limit");
    unlink(p);
    expect_usage("sim --trace fig13-synth --trace-offset 1e6", "--trace-offset", "past the end");
    expect_usage("sim --vram-budget 100GiB", "--vram-budget", "rtx3060-laptop");
    expect_usage("sim --vram-budget 6", "--vram-budget", "6: add a unit, e.g. 6GiB");
    /* too large in any unit: out of range, not "add a unit" */
    expect_usage("sim --vram-budget 99999999999999999999", "--vram-budget", "99999999999999999999: out of range");
    /* 1e19 B fits 64 bits: taken as it is (llround saturated it to 2^63 B), then refused by the hw */
    expect_usage("sim --vram-budget 1e19B", "--vram-budget", "(10000000000000000000 bytes) exceeds");
    expect_usage("sim --vram-budget 20000000TB", "--vram-budget", "out of range");
    expect_usage("sweep --eps 0.1: --interval 1 --trace fig13-synth", "--eps", "an empty field");
    expect_usage("sweep --eps 0::0.2 --interval 1 --trace fig13-synth", "--eps", "an empty field");
    expect_usage("sweep --eps 0.1 --interval :2 --trace fig13-synth", "--interval", "an empty field");
    expect_usage("sim --vram-budget 0x10GiB", "--vram-budget", "hexadecimal");
    expect_usage("sim --vram-budget 5parsecs", "--vram-budget", "unknown unit");
    expect_usage("sim --temp-bytes 512", "--temp-bytes", "add a unit");
    {   /* an underflowing number is that tiny number (1e-320 was "bad value"), an overflowing one is refused */
        int rc;
        char *o = tu_run_ats("sim --eps 1e-320 --requests 1 --prompt 64 --gen 2 --policy ats --trace none", &rc, 1);
        CHECK_MSG(rc == 0, "sim --eps 1e-320: rc %d: %s", rc, o ? o : "");
        free(o);
        expect_usage("sim --eps 1e999", "--eps", "1e999");
    }
    /* the only policy cannot place the model: its reason alone (the table's header came first), naming the
       quanta and the temp ring the budget pays for */
    expect_usage("sim --requests 1 --prompt 64 --gen 4 --vram-budget 64MiB --policy gpu-stream",
                 "policy gpu-stream skipped", "in whole 1048576-byte quanta) do not fit the 33554432 bytes");
    expect_usage("sim --requests 1 --prompt 64 --gen 4 --vram-budget 64MiB --policy gpu-stream --format json",
                 "policy gpu-stream skipped", NULL);
    expect_usage("sim --policy ats,ats", "--policy", "'ats' given twice");
    /* the session's checks once, before the table's header (were one 'policy P skipped' line per policy) */
    expect_usage("sim --prompt 100000", "100128 tokens", "context of 40960");
    expect_usage("sim --prompt 40000 --gen 961 --format csv", "40961 tokens", "context of 40960");
    expect_usage("sweep --prompt 40960 --gen 1 --eps 0.1 --interval 1 --trace fig13-synth", "40961 tokens", NULL);
    expect_usage("sweep --policy ats,static,ats --eps 0.1 --interval 1 --trace fig13-synth", "'ats' given twice", NULL);
    expect_usage("sim --policy", "--policy: missing value", "ats sim --help");
    expect_usage("sweep --eps", "--eps: missing value", "ats sweep --help");
    expect_usage("sim --policy expert --requests 1 --prompt 64 --gen 2", "expert", "dense");
    expect_usage("sweep --eps 0.1 --interval 1:3ms:1 --trace fig13-synth", "--interval", "same unit");
    expect_usage("sweep --eps 0:1:1e-9 --interval 1 --trace fig13-synth", "--eps",
                 "too many grid points (1000000001, limit 1024)");
    /* hw figures outside the plausible ranges: the JSON field and the file are named */
    struct { const char *sec, *key; double v; const char *field; } hw[] = {
        {"pcie", "h2d_GBps", 1e-300, "pcie.h2d_GBps"}, {"pcie", "h2d_GBps", 1e308, "pcie.h2d_GBps"},
        {"cpu", "mem_bw_GBps", 1e-9, "cpu.mem_bw_GBps"}, {"pcie", "copy_engines", 1000, "pcie.copy_engines"},
    };
    for (size_t i = 0; i < sizeof hw / sizeof hw[0]; i++) {
        snprintf(p, sizeof p, "%s/hw%zu.json", tmpdir, i);
        write_hw(p, hw[i].sec, hw[i].key, strcmp(hw[i].key, "copy_engines") == 0 ? json_integer((json_int_t)hw[i].v)
                                                                                : json_real(hw[i].v));
        snprintf(a, sizeof a, "sim --policy ats --requests 1 --hw %s", p);
        expect_usage(a, p, hw[i].field);
        unlink(p);
    }
    /* $ATS_BENCH_SCHED names the re-schedule costs: a path that is not such a file is an error naming
     * the variable, the path and why (not a silent 16 ms); sim and sweep alike, --resched-cost skips it */
    const char *base = "--policy ats --requests 1 --prompt 128 --gen 2 --trace none";
    snprintf(p, sizeof p, "%s/missing.json", tmpdir);
    setenv("ATS_BENCH_SCHED", p, 1);
    snprintf(a, sizeof a, "sim %s", base);
    expect_usage(a, "ats sim: ATS_BENCH_SCHED: '", "missing.json': cannot read it (No such file or directory)");
    expect_usage("sweep --policy ats --eps 0.1 --interval 1 --trace fig13-synth --duration 1", "ats sweep: ATS_BENCH_SCHED",
                 "missing.json");
    snprintf(a, sizeof a, "sim %s --resched-cost 3ms 2>&1", base);
    char *out = tu_run_ats(a, &rc_ign, 0);
    CHECK_MSG(rc_ign == 0 && out && !strstr(out, "ATS_BENCH_SCHED"), "ats %s: exit %d: %s", a, rc_ign, out ? out : "");
    free(out);
    snprintf(p, sizeof p, "%s/bad.json", tmpdir);
    tu_write_text(p, "{\"results\": {\"qwen3-14b\": \n");
    setenv("ATS_BENCH_SCHED", p, 1);
    snprintf(a, sizeof a, "sim %s", base);
    expect_usage(a, p, "not JSON (line 2");
    tu_write_text(p, "[1, 2]\n");
    expect_usage(a, p, "no object 'results'");
    /* the figures it reads: numbers in --resched-cost's range (0 .. 10 s); -5, "x" or a missing one ran with the
     * paper's 16 ms, 1e300 with a re-schedule cost of 2e+297 ms */
    static const struct { const char *dp, *dp_paper, *pb, *want; } figs[] = {
        {"-5", "20", "2", "results.qwen3-14b.dynamic_transfer_us: -5 (expected microseconds, 0 .. 1e+07 = 10 s"},
        {"\"x\"", "20", "2", "results.qwen3-14b.dynamic_transfer_us: \"x\" (expected microseconds"},
        {NULL, "20", "2", "results.qwen3-14b.dynamic_transfer_us: missing (expected microseconds"},
        {"1e300", "20", "2", "results.qwen3-14b.dynamic_transfer_us: 1e300 (expected microseconds"},
        {"15", "-1", "2", "results.qwen3-14b.dynamic_transfer_paper_us: -1 (expected"}, /* ats-paper's, read too */
        {"15", "20", "null", "results.qwen3-14b.plan_build_us: null (expected"},
        {"6e6", "20", "5e6", "results.qwen3-14b: dynamic_transfer_us + plan_build_us = 11000000 us, over 10 s"},
    };
    for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) {
        char j[512], dp[64] = "";
        if (figs[i].dp) snprintf(dp, sizeof dp, "\"dynamic_transfer_us\": %s, ", figs[i].dp);
        snprintf(j, sizeof j, "{\"results\": {\"qwen3-14b\": {%s\"dynamic_transfer_paper_us\": %s, \"plan_build_us\": %s}}}\n",
                 dp, figs[i].dp_paper, figs[i].pb);
        tu_write_text(p, j);
        expect_usage(a, "ats sim: ATS_BENCH_SCHED: '", figs[i].want);
    }
    /* the model's entry not an object (said "dynamic_transfer_us: missing"), a key twice (the last one won) */
    tu_write_text(p, "{\"results\": {\"qwen3-14b\": 5}}\n");
    expect_usage(a, "ats sim: ATS_BENCH_SCHED: '", "results.qwen3-14b is not an object");
    tu_write_text(p, "{\"results\": {\"qwen3-14b\": {\"dynamic_transfer_us\": 1, \"dynamic_transfer_us\": 2}}}\n");
    expect_usage(a, "ats sim: ATS_BENCH_SCHED: '", "duplicate object key");
    /* 10 s exactly is --resched-cost's limit: accepted */
    tu_write_text(p, "{\"results\": {\"qwen3-14b\": {\"dynamic_transfer_us\": 9999998, \"dynamic_transfer_paper_us\": 0, "
                     "\"plan_build_us\": 2}}}\n");
    out = tu_run_ats(a, &rc_ign, 1);
    CHECK_MSG(rc_ign == 0 && out && strstr(out, "# re-schedule cost 1e+04 ms (ats bench sched, "), "10 s: exit %d: %s",
              rc_ign, out ? out : "");
    free(out);
    unlink(p);
    /* a model the file has no figures for (a GGUF file, a JSON of one's own): its decode graph's ops times
     * the largest per-op DP and plan-build times of the file's models (was the paper's 16 ms: 1000x a
     * measured re-plan); a file without n_ops to scale by keeps 16 ms and says why */
    tu_write_text(p, "{\"results\": {\"m1\": {\"dynamic_transfer_us\": 100, \"dynamic_transfer_paper_us\": 50, "
                     "\"plan_build_us\": 10, \"n_ops\": 100}, \"m2\": {\"dynamic_transfer_us\": 20, "
                     "\"dynamic_transfer_paper_us\": 20, \"plan_build_us\": 1, \"n_ops\": 100}}}\n");
    out = tu_run_ats(a, &rc_ign, 1);
    CHECK_MSG(rc_ign == 0 && out && strstr(out, "# re-schedule cost 0.443 ms (estimated: 'qwen3-14b' is not in ") &&
                  strstr(out, "; 403 ops x 1 us DP + 0.1 us plan build, the largest per-op times of its 2 models"),
              "estimate: exit %d: %s", rc_ign, out ? out : "");
    free(out);
    tu_write_text(p, "{\"results\": {\"m1\": {\"dynamic_transfer_us\": 100, \"dynamic_transfer_paper_us\": 50, "
                     "\"plan_build_us\": 10}}}\n");
    out = tu_run_ats(a, &rc_ign, 1);
    CHECK_MSG(rc_ign == 0 && out && strstr(out, "# re-schedule cost 16 ms (paper 9 ms + 7 ms: no 'qwen3-14b' in ") &&
                  strstr(out, "and no figures to estimate it from"), "no n_ops: exit %d: %s", rc_ign, out ? out : "");
    free(out);
    /* a directory said as one (was "not JSON (line 0: ... near end of file)") */
    setenv("ATS_BENCH_SCHED", tmpdir, 1);
    expect_usage(a, tmpdir, "': is a directory; expected the result file of `ats bench sched`");
    /* unset or empty: the committed figures (or the paper's without them), no error */
    setenv("ATS_BENCH_SCHED", "", 1);
    out = tu_run_ats(a, &rc_ign, 1);
    CHECK_MSG(rc_ign == 0 && out && strstr(out, "# re-schedule cost "), "ATS_BENCH_SCHED='': exit %d: %s", rc_ign,
              out ? out : "");
    /* its source in one level of parentheses: "(ats bench sched, PATH)", not "(ats bench sched (PATH))" */
    for (const char *l = out; l && (l = strstr(l, "# re-schedule cost")); l++) {
        size_t n = strcspn(l, "\n"), open = 0;
        for (size_t i = 0; i < n; i++) open += l[i] == '(';
        CHECK_MSG(open == 1, "nested parentheses: %.*s", (int)n, l);
    }
    free(out);
    unsetenv("ATS_BENCH_SCHED");
    /* bench sched: an empty model list measured nothing and exited 0 */
    expect_usage("bench sched --models ''", "ats bench sched: --models: empty list", NULL);
    expect_usage("bench sched --models ,", "ats bench sched: --models: empty list", NULL);
}

static void test_results(void)
{
    char a[2048], p[512], h5[512];
    int rc;
    /* a 4e-300 s trace: one round, no request: exit 1, no nan/-1 anywhere */
    snprintf(p, sizeof p, "%s/tiny.h5", tmpdir);
    write_trace(p, 4e-300);
    const char *fmts[] = {"table", "csv", "json"};
    for (int k = 0; k < 3; k++) {
        snprintf(a, sizeof a, "sim --policy static,ats --prompt 256 --gen 4 --trace %s --format %s", p, fmts[k]);
        char *out = tu_run_ats(a, &rc, 0);
        CHECK_MSG(rc == 1, "ats %s: exit %d (expected 1)", a, rc);
        CHECK_MSG(out && !strstr(out, "nan") && !strstr(out, "-1.0") && !strstr(out, "inf"), "ats %s: %s", a,
                  out ? out : "");
        if (k == 0) CHECK(out && strstr(out, "no request completed"));
        if (k == 2) {
            json_error_t je;
            json_t *j = out ? json_loads(out, 0, &je) : NULL;
            CHECK_MSG(j && json_is_array(j) && json_array_size(j) == 2, "%s", out ? out : "");
            if (j) CHECK(json_is_null(json_object_get(json_array_get(j, 0), "tpot_mean_s")));
            json_decref(j);
        }
        free(out);
        out = tu_run_ats(a, &rc, 1);
        CHECK(out && strstr(out, "ats sim: policy ats: no request completed"));
        free(out);
    }
    unlink(p);
    /* cut after the prefill (static) or in the decode (ats): rounds, but no request completed, so no
     * TTFT or TPOT: '-' in the table, empty in CSV, null in JSON (README) */
    for (int k = 0; k < 3; k++) {
        snprintf(a, sizeof a, "sim --policy static,ats --prompt 256 --gen 64 --duration 1 --trace none --format %s",
                 fmts[k]);
        char *out = tu_run_ats(a, &rc, 0);
        CHECK_MSG(rc == 1, "ats %s: exit %d (expected 1)", a, rc);
        const char *l = out ? strstr(out, "\nats") : NULL;
        if (k == 0) {
            char pol[32], v[4][32];
            double pre, dec;
            CHECK_MSG(l && sscanf(l, " %31s %lf %lf %31s %31s %31s %31s", pol, &pre, &dec, v[0], v[1], v[2], v[3]) == 7 &&
                      dec > 0 && !strcmp(v[0], "-") && !strcmp(v[1], "-") && !strcmp(v[2], "-") && !strcmp(v[3], "-"),
                      "ats %s: %s", a, out ? out : "");
            CHECK_MSG(l && strstr(l, "(no request completed in "), "ats %s: %s", a, out ? out : "");
        } else if (k == 1) {
            CHECK_MSG(l && !strncmp(l + 1, "ats,", 4) && strstr(l, ",,,,,"), "ats %s: %s", a, out ? out : "");
        } else {
            json_t *j = out ? json_loads(out, 0, NULL) : NULL;
            for (size_t i = 0; i < 2; i++) {
                json_t *o = json_array_get(j, i);
                CHECK_MSG(o && json_integer_value(json_object_get(o, "rounds")) >= 1 &&
                          json_is_null(json_object_get(o, "ttft_s")) && json_is_null(json_object_get(o, "tpot_mean_s")) &&
                          json_is_null(json_object_get(o, "tpot_p50_s")) && json_is_null(json_object_get(o, "tpot_p99_s")),
                          "ats %s: %s", a, out ? out : "");
            }
            json_decref(j);
        }
        free(out);
    }
    /* ... and ats sweep picks no best point among points that completed no request, and says so */
    snprintf(a, sizeof a, "sweep --policy ats --prompt 256 --gen 64 --duration 1 --trace fig13-synth --eps 0.1:0.2:0.1 "
             "--interval 1:2:1");
    char *sw = tu_run_ats(a, &rc, 0);
    const char *l = sw ? strstr(sw, "\nfig13-synth") : NULL;
    char pol[32], e[32], iv[32], tp[32];
    CHECK_MSG(rc == 1 && l && sscanf(l, " fig13-synth %31s %31s %31s %31s", pol, e, iv, tp) == 4 && !strcmp(e, "-") &&
              !strcmp(iv, "-") && !strcmp(tp, "-"), "ats %s: exit %d: %s", a, rc, sw ? sw : "");
    free(sw);
    snprintf(a, sizeof a, "sweep --policy ats --prompt 256 --gen 64 --duration 1 --trace fig13-synth --eps 0.1:0.2:0.1 "
             "--interval 1:2:1 --format csv");
    sw = tu_run_ats(a, &rc, 1);
    CHECK_MSG(sw && strstr(sw, "fig13-synth ats: no point completed a request: no best point\n") && !strstr(sw, "best fig13"),
              "ats %s: %s", a, sw ? sw : "");
    CHECK_MSG(sw && strstr(sw, "4 of 4 points completed no request"), "ats %s: %s", a, sw ? sw : "");
    free(sw);
    /* default 'all' on a dense model: a note in the header, nothing on stderr */
    char *out = tu_run_ats("sim --requests 1 --prompt 128 --gen 2 --trace none", &rc, 0);
    CHECK_MSG(rc == 0 && out && strstr(out, "# expert: not applicable to a dense model"), "exit %d: %s", rc,
              out ? out : "");
    free(out);
    { /* stderr alone (tu_run_ats appends its own 2>/dev/null: a '2>&1 >/dev/null' here read nothing) */
        char se[4096];
        rc = tu_run_ats_split(NULL, "sim --requests 1 --prompt 128 --gen 2 --trace none", 120, tmpdir, NULL, 0, se,
                              sizeof se);
        CHECK_MSG(rc == 0 && se[0] == 0, "exit %d, stderr: %s", rc, se);
        char f[600];
        snprintf(f, sizeof f, "%s/out.txt", tmpdir);
        unlink(f);
        snprintf(f, sizeof f, "%s/err.txt", tmpdir);
        unlink(f);
    }
    /* /config records the re-schedule cost used and its source */
    snprintf(h5, sizeof h5, "%s/r.h5", tmpdir);
    snprintf(a, sizeof a, "sim --policy ats --requests 1 --prompt 128 --gen 2 --trace none --resched-cost 3ms --out %s",
             h5);
    out = tu_run_ats(a, &rc, 0);
    CHECK_MSG(rc == 0, "ats %s: exit %d", a, rc);
    free(out);
    atsc_results_file *f = NULL;
    ats_err err = {{0}};
    CHECK_MSG(atsc_results_read(h5, &f, &err) == ATS_OK, "%s", err.msg);
    if (f) {
        json_t *c = json_loads(f->config_json, 0, NULL);
        CHECK_MSG(c && fabs(json_number_value(json_object_get(c, "resched_cost_s")) - 3e-3) < 1e-12, "%s",
                  f->config_json);
        const char *src = c ? json_string_value(json_object_get(c, "resched_cost_source")) : NULL;
        CHECK_MSG(src && strstr(src, "--resched-cost"), "%s", f->config_json);
        json_decref(c);
        atsc_results_file_free(f);
    }
    unlink(h5);
    /* without the flag: the figure from $ATS_BENCH_SCHED, the same value in the header and /config */
    snprintf(p, sizeof p, "%s/bench-sched.json", tmpdir);
    FILE *fp = fopen(p, "w");
    fprintf(fp, "{\"results\": {\"qwen3-14b\": {\"dynamic_transfer_us\": 11.5, \"dynamic_transfer_paper_us\": 30, "
                "\"plan_build_us\": 8.5}}}\n");
    fclose(fp);
    snprintf(a, sizeof a, "ATS_BENCH_SCHED=%s %s sim --policy ats --requests 1 --prompt 128 --gen 2 --trace none --out %s",
             p, getenv("ATS_BIN") ? getenv("ATS_BIN") : "./build/cli/ats", h5);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s >/dev/null 2>&1", a);
    CHECK(system(cmd) == 0);
    f = NULL;
    CHECK_MSG(atsc_results_read(h5, &f, &err) == ATS_OK, "%s", err.msg);
    if (f) {
        json_t *c = json_loads(f->config_json, 0, NULL);
        CHECK_MSG(c && fabs(json_number_value(json_object_get(c, "resched_cost_s")) - 20e-6) < 1e-12, "%s",
                  f->config_json);
        const char *src = c ? json_string_value(json_object_get(c, "resched_cost_source")) : NULL;
        CHECK_MSG(src && strstr(src, p), "%s", f->config_json);
        json_decref(c);
        atsc_results_file_free(f);
    }
    unlink(h5);
    unlink(p);
}

/* field k (0-based) of a CSV line into buf ("" when absent) */
static void csv_field(const char *line, int k, char *buf, size_t len)
{
    buf[0] = 0;
    for (int i = 0; i < k && line; i++) {
        line = strchr(line, ',');
        if (line) line++;
    }
    if (!line) return;
    size_t n = strcspn(line, ",\n");
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), line);
}

static void test_sweep_no_controller(void)
{
    /* every policy (a MoE model: all apply), dynamic or not as sched says */
    char names[512], pols[512] = "";
    const char *pol[16];
    int dyn[16], n_pol = 0, n_fixed = 0;
    snprintf(names, sizeof names, "%s", ats_policy_names());
    for (char *t = strtok(names, ", "); t && n_pol < 16; t = strtok(NULL, ", ")) {
        const ats_policy_ops *ops;
        CHECK(ats_policy_find(t, &ops) == ATS_OK);
        pol[n_pol] = t;
        dyn[n_pol] = ops->dynamic;
        n_fixed += !ops->dynamic;
        snprintf(pols + strlen(pols), sizeof pols - strlen(pols), "%s%s", n_pol ? "," : "", t);
        n_pol++;
    }
    CHECK(n_fixed >= 6 && n_fixed < n_pol); /* layer ... static-opoffload; ats, ats-paper */
    /* 14 s: every policy completes a request (in 12 s layer and layer-opoffload complete none, which
     * is exit 1, as in ats sim) */
    const char *base = "--model qwen3-30b-a3b --trace fig13-synth --trace-offset 55 --duration 14 --prompt 512";
    const int n_eps = 3, n_itv = 2;
    char a[2048], h5[512];
    int rc;
    snprintf(h5, sizeof h5, "%s/sweep.h5", tmpdir);
    snprintf(a, sizeof a, "sweep %s --eps 0.1:0.3:0.1 --interval 1:2:1 --threads 2 --policy %s --out %s", base, pols,
             h5);
    char *out = tu_run_ats(a, &rc, 0);
    CHECK_MSG(rc == 0, "ats %s: exit %d", a, rc);
    char *both = tu_run_ats(a, &rc, 1);
    /* table: best eps and interval are n/a exactly for the policies without a controller */
    for (int i = 0; i < n_pol; i++) {
        char want[128];
        snprintf(want, sizeof want, "\nfig13-synth %s ", pol[i]);
        const char *l = NULL;
        for (const char *c = out ? out : ""; (c = strstr(c, "\nfig13-synth")); c++) {
            char p[64] = "", e[64] = "", iv[64] = "";
            if (sscanf(c, " fig13-synth %63s %63s %63s", p, e, iv) == 3 && strcmp(p, pol[i]) == 0) {
                l = c;
                /* a point of the grid (which one depends on the model's numbers: with fused expert
                   groups moved whole, ats on qwen3-30b-a3b best at eps 0.2) */
                if (dyn[i])
                    CHECK_MSG((!strcmp(e, "0.1") || !strcmp(e, "0.2") || !strcmp(e, "0.3")) &&
                                  (!strcmp(iv, "1") || !strcmp(iv, "2")),
                              "%s: best %s %s", p, e, iv);
                else CHECK_MSG(strcmp(e, "n/a") == 0 && strcmp(iv, "n/a") == 0, "%s: best eps '%s' interval '%s' "
                               "for a policy without a controller", p, e, iv);
            }
        }
        CHECK_MSG(l != NULL, "no table line for %s: %s", pol[i], out ? out : "");
    }
    /* stderr: one line naming every policy without a controller, and those with one */
    const char *note = both ? strstr(both, "ats sweep: ") : NULL;
    CHECK_MSG(rc == 0 && note && tu_count_lines(both) == tu_count_lines(out) + 1 && strstr(note, "do not apply") &&
              strstr(note, "with a controller: ats-paper, ats"), "stdout + stderr: %s", both ? both : "");
    free(out);
    out = note ? strndup(note, strcspn(note, "\n")) : NULL;
    free(both);
    for (int i = 0; i < n_pol && out; i++) {
        if (dyn[i]) continue;
        char want[80];
        snprintf(want, sizeof want, " %s,", pol[i]);
        char w2[80];
        snprintf(w2, sizeof w2, " %s:", pol[i]);
        CHECK_MSG(strstr(out, want) || strstr(out, w2), "stderr lacks %s: %s", pol[i], out);
    }
    free(out);
    /* CSV: one row per trace for a fixed policy, with empty eps/interval/unit; its TPOT is `ats sim`'s */
    snprintf(a, sizeof a, "sweep %s --eps 0.1:0.3:0.1 --interval 1:2:1 --policy %s --format csv", base, pols);
    out = tu_run_ats(a, &rc, 0);
    snprintf(a, sizeof a, "sim %s --policy %s --format csv 2>/dev/null", base, pols);
    char *sim = tu_run_ats(a, &rc, 0); /* every policy completes a request in 14 s: a TPOT to compare */
    int n_rows = 0;
    for (const char *l = out ? strchr(out, '\n') : NULL; l && l[1]; l = strchr(l + 1, '\n')) {
        n_rows++;
        char p[64], e[64], iv[64], u[64], nr[64], tp[64];
        csv_field(l + 1, 1, p, sizeof p);
        csv_field(l + 1, 2, e, sizeof e);
        csv_field(l + 1, 3, iv, sizeof iv);
        csv_field(l + 1, 4, u, sizeof u);
        csv_field(l + 1, 5, nr, sizeof nr);
        csv_field(l + 1, 6, tp, sizeof tp);
        const ats_policy_ops *ops;
        if (ats_policy_find(p, &ops) != ATS_OK) {
            CHECK_MSG(0, "CSV row with policy '%s'", p);
            continue;
        }
        if (ops->dynamic) {
            CHECK_MSG(*e && *iv && strcmp(u, "xTPOT") == 0, "%s: eps '%s' interval '%s' unit '%s'", p, e, iv, u);
            continue;
        }
        CHECK_MSG(!*e && !*iv && !*u && strcmp(nr, "0") == 0, "%s: eps '%s' interval '%s' unit '%s' resched %s", p, e,
                  iv, u, nr);
        /* the same point through ats sim: tpot_mean_ms is its 5th column, 4 decimals */
        const char *s = NULL;
        char key[80];
        snprintf(key, sizeof key, "\n%s,", p);
        s = sim ? strstr(sim, key) : NULL;
        char st[64] = "";
        if (s) csv_field(s + 1, 4, st, sizeof st);
        CHECK_MSG(s && fabs(strtod(st, NULL) - strtod(tp, NULL)) <= 1e-4 + 1e-9 * fabs(strtod(tp, NULL)),
                  "%s: sweep TPOT %s ms, sim %s ms", p, tp, st);
    }
    CHECK_MSG(n_rows == n_fixed + (n_pol - n_fixed) * n_eps * n_itv, "CSV rows %d", n_rows);
    free(out);
    free(sim);
    /* /sweep: eps = interval = 0 and no re-schedule for a fixed policy; the grid for the others */
    atsc_results_file *f = NULL;
    ats_err err = {{0}};
    CHECK_MSG(atsc_results_read(h5, &f, &err) == ATS_OK, "%s", err.msg);
    if (f) {
        CHECK_MSG(f->has_sweep && f->n_sweep == (size_t)(n_fixed + (n_pol - n_fixed) * n_eps * n_itv),
                  "/sweep rows %zu", f->n_sweep);
        for (size_t r = 0; r < f->n_sweep; r++) {
            const ats_policy_ops *ops;
            CHECK(ats_policy_find(f->sweep[r].policy, &ops) == ATS_OK);
            if (!ops->dynamic)
                CHECK_MSG(f->sweep[r].eps == 0 && f->sweep[r].interval == 0 && f->sweep[r].n_resched == 0 &&
                          isfinite(f->sweep[r].tpot_mean_s), "%s: eps %g interval %g resched %d",
                          f->sweep[r].policy, f->sweep[r].eps, f->sweep[r].interval, (int)f->sweep[r].n_resched);
            else
                CHECK(f->sweep[r].eps >= 0.1 - 1e-12 && f->sweep[r].interval >= 1);
        }
        atsc_results_file_free(f);
    }
    unlink(h5);
}

int main(void)
{
    uint64_t rng = tu_seed("test_sim_validate");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats_sim_validate_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_bound(&rng);
    test_cli();
    test_results();
    test_sweep_no_controller();
    rmdir(tmpdir);
    return tu_finish("test_sim_validate");
}
