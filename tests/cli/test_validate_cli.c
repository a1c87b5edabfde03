/*
 * ats validate ($ATS_BIN) end to end on the CPU with stories260K: two policies on a window of fig13-synth
 * with its two load changes (--no-stress: a 2-core CI box), the file holds both runs and the table, the
 * summary list keeps its record and gains two with sane numbers (the table's own figures, recomputed from
 * the rounds in the file); --gen auto under the stressor on a one-second window of h200-cpu-compile (its
 * CPU column only, as without a GPU); bad arguments and a bad summary list refused before any run (exit 2,
 * one line, nothing written).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atsc/validate.h"
#include "testutil.h"

static char dir[512], model[1024];
static char out[1 << 16], err[1 << 16];

static int run(const char *args)
{
    return tu_run_ats_split(NULL, args, 300, dir, out, sizeof out, err, sizeof err);
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* the record of `policy` in list l (the last one) */
static json_t *record(json_t *l, const char *policy)
{
    json_t *r = NULL;
    for (size_t i = 0; i < json_array_size(l); i++) {
        const char *p = json_string_value(json_object_get(json_array_get(l, i), "policy"));
        if (p && !strcmp(p, policy)) r = json_array_get(l, i);
    }
    return r;
}

static double num(json_t *r, const char *k) { return json_number_value(json_object_get(r, k)); }

static void test_two_policies(void)
{
    char vp[600], sp[600], args[4096];
    snprintf(vp, sizeof vp, "%s/val.h5", dir);
    snprintf(sp, sizeof sp, "%s/summary.json", dir);
    tu_write_text(sp, "[{\"policy\": \"earlier\", \"trace\": \"x\", \"real_tpot_ms\": 1}]\n");
    snprintf(args, sizeof args,
             "validate --model %s --vram-budget 1GiB --trace fig13-synth --window 59:121 --policy layer,ats --prompt 32 "
             "--chunk 16 --gen 20 --threads 2 --no-stress --out %s --summary %s", model, vp, sp);
    int rc = run(args);
    CHECK_MSG(rc == 0, "rc %d: %s", rc, err);
    CHECK_MSG(strstr(out, "layer") && strstr(out, "ats ") && strstr(out, "wrote ") && strstr(out, "appended 2 records"),
              "stdout: %s", out);
    atsc_results_file *real = NULL, *sim = NULL;
    atsc_val_row *rows = NULL;
    size_t n = 0;
    ats_err e = {{0}};
    CHECK_MSG(atsc_val_read(vp, &real, &sim, &rows, &n, &e) == ATS_OK, "%s", e.msg);
    CHECK(n == 2 && real && sim && real->n_runs == 2 && sim->n_runs == 2);
    CHECK(real && strcmp(real->producer, "ats run") == 0 && sim && strcmp(sim->producer, "ats sim") == 0);
    json_t *l = json_load_file(sp, 0, NULL);
    CHECK(json_is_array(l) && json_array_size(l) == 3 && record(l, "earlier"));
    for (size_t i = 0; i < n && real && sim; i++) {
        const atsc_results_run *rr = atsc_results_find_run(real, rows[i].policy), *sr = atsc_results_find_run(sim, rows[i].policy);
        CHECK_MSG(rr && sr && rr->n_rounds == 22 && sr->n_rounds == 22, "policy %s", rows[i].policy);
        if (!rr || !sr || rr->n_rounds != sr->n_rounds) continue;
        /* 2 prefill chunks of 16, then 20 decode steps, in both */
        CHECK(rows[i].s.n_rounds == 22 && rows[i].s.n_decode == 20 && rows[i].s.prefill_tok == 32);
        double a = 0, b = 0;
        for (size_t k = 0; k < rr->n_rounds; k++) {
            CHECK(rr->rounds[k].phase == sr->rounds[k].phase && rr->rounds[k].tokens == sr->rounds[k].tokens);
            if (rr->rounds[k].phase == 1) a += rr->rounds[k].latency_s, b += sr->rounds[k].latency_s;
        }
        CHECK_REL(rows[i].s.real_tpot_s, a / 20, 1e-12, 0);
        CHECK_REL(rows[i].s.sim_tpot_s, b / 20, 1e-12, 0);
        json_t *r = record(l, rows[i].policy);
        CHECK(r != NULL);
        if (!r) continue;
        CHECK(!strcmp(json_string_value(json_object_get(r, "trace")), "fig13-synth"));
        CHECK_REL(num(r, "real_tpot_ms"), 1e3 * a / 20, 1e-5, 0);
        CHECK_REL(num(r, "sim_tpot_ms"), 1e3 * b / 20, 1e-5, 0);
        CHECK_REL(num(r, "mean_tpot_error_pct"), 100 * (b - a) / a, 1e-5, 1e-6);
        CHECK(num(r, "real_tpot_ms") > 0 && num(r, "real_tpot_ms") < 1e3 && num(r, "p90_round_error_pct") >= 0);
        CHECK(!strcmp(json_string_value(json_object_get(r, "real_device")), "cpu") ||
              !strcmp(json_string_value(json_object_get(r, "real_device")), "cuda"));
        CHECK(!strcmp(json_string_value(json_object_get(r, "stress")), "off"));
        CHECK(json_string_value(json_object_get(r, "machine")) != NULL);
    }
    json_decref(l);
    /* load segments of 59-121 s: 0-1 s idle, 1-61 s CPU 0.4, from 61 s GPU and PCIe 0.4; per policy */
    atsc_val_seg *g = NULL;
    size_t ng = 0;
    CHECK_MSG(atsc_val_read_segments(vp, &g, &ng, &e) == ATS_OK, "%s", e.msg);
    CHECK(ng == 6);
    const double t0[3] = {0, 1, 61};
    for (size_t k = 0; k < ng && ng == 6; k++) {
        CHECK(!strcmp(g[k].policy, k < 3 ? rows[0].policy : rows[1].policy));
        CHECK(g[k].t0_s == t0[k % 3] && g[k].cpu == (k % 3 == 1 ? 0.4 : 1.0));
        CHECK(g[k].n_decode >= 0 && g[k].n_decode <= 20);
    }
    free(g);
    atsc_results_file_free(real);
    atsc_results_file_free(sim);
    free(rows);
}

static void test_auto_under_stress(void)
{
    char vp[600], sp[600], args[4096];
    snprintf(vp, sizeof vp, "%s/val-stress.h5", dir);
    snprintf(sp, sizeof sp, "%s/summary-stress.json", dir);
    snprintf(args, sizeof args,
             "validate --model %s --vram-budget 1GiB --trace h200-cpu-compile --window 20:21 --policy static --prompt 16 "
             "--chunk 16 --ctx 80 --threads 2 --lead 0.3 --cpu-only --stress-args '--hogs-cpu 1 --period 0.01' --out %s "
             "--summary %s", model, vp, sp);
    int rc = run(args);
    CHECK_MSG(rc == 0, "rc %d: %s", rc, err);
    CHECK_MSG(strstr(err, "ats stress") != NULL, "no stressor in stderr: %s", err);
    atsc_val_row *rows = NULL;
    size_t n = 0;
    ats_err e = {{0}};
    CHECK_MSG(atsc_val_read(vp, NULL, NULL, &rows, &n, &e) == ATS_OK, "%s", e.msg);
    /* --gen auto: as many decode steps as the simulator fits into 1 s, at most --ctx 80 - 16 */
    CHECK(n == 1 && rows && rows[0].s.n_decode >= 1 && rows[0].s.n_decode <= 64 && rows[0].s.n_rounds == rows[0].s.n_decode + 1);
    free(rows);
    json_t *l = json_load_file(sp, 0, NULL);
    json_t *r = record(l, "static");
    CHECK(r && !strcmp(json_string_value(json_object_get(r, "stress")), "open loop"));
    json_decref(l);
}

static void test_bad(void)
{
    char vp[600], sp[600], args[4096];
    snprintf(vp, sizeof vp, "%s/bad.h5", dir);
    snprintf(sp, sizeof sp, "%s/bad.json", dir);
    struct {
        const char *extra, *want;
    } cases[] = {
        {"--trace fig13-synth --window 60:60", "zero-length window"},
        {"--trace fig13-synth --window 10:20", "changes load 0 times"},
        {"--trace fig13-synth --window 59:70", "changes load 1 time "},
        {"--trace fig13-synth --window 100:200", "ends past the end"},
        {"--trace fig13-synth --window 70", "--window: bad value"},
        {"--trace fig13-synth --policy nope", "unknown policy 'nope'"},
        {"--trace fig13-synth --policy ats,ats", "given twice"},
        {"--trace fig13-synth --chunk 0", "--chunk: bad value"},
        {"--trace fig13-synth --kv-type q8_0", "--kv-type: bad value"},
        {"--trace fig13-synth --gen 4", "--gen given twice"},
        {"--trace fig13-synth --no-stress --baseline b.txt", "do not go with --no-stress"},
        {"--trace fig13-synth --quant q8_0", "--quant only applies"},
        {"--trace no-such-trace", "no-such-trace"},
        {"--trace fig13-synth --baseline /nonexistent/base.txt", "--baseline: /nonexistent/base.txt"},
        {"", "--trace is required"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "validate --model %s --vram-budget 1GiB --prompt 16 --gen 4 %s --out %s "
                 "--summary %s", model, cases[i].extra, vp, sp);
        int rc = run(args);
        CHECK_MSG(rc == 2, "case %zu: rc %d", i, rc);
        CHECK_MSG(strstr(err, cases[i].want) && tu_count_lines(err) == 1, "case %zu: stderr '%s' lacks '%s'", i, err,
                  cases[i].want);
        CHECK(!exists(vp) && !exists(sp));
    }
    /* required flags */
    snprintf(args, sizeof args, "validate --model %s --vram-budget 1GiB --trace fig13-synth --summary %s", model, sp);
    CHECK(run(args) == 2 && strstr(err, "--out is required"));
    snprintf(args, sizeof args, "validate --model %s --trace fig13-synth --out %s --summary %s", model, vp, sp);
    CHECK(run(args) == 2 && strstr(err, "--vram-budget is required"));
    /* a bad summary list: refused before the runs, left as it is */
    tu_write_text(sp, "{\"not\": \"a list\"}");
    snprintf(args, sizeof args, "validate --model %s --vram-budget 1GiB --trace fig13-synth --window 59:121 --prompt 16 "
             "--gen 4 --no-stress --out %s --summary %s", model, vp, sp);
    CHECK(run(args) == 2 && strstr(err, "not a list of records") && !exists(vp));
    char *now = tu_slurp(sp, NULL);
    CHECK(now && !strcmp(now, "{\"not\": \"a list\"}"));
    free(now);
    CHECK(run("validate --help") == 0 && strstr(out, "--window A:B"));
}

int main(void)
{
    tu_seed("test_validate_cli");
    if (!tu_tmpdir(dir, sizeof dir, "test_validate_cli")) return 1;
    tu_shared_path(model, sizeof model, "models/stories260K/stories260K.gguf");
    if (!exists(model)) {
        fprintf(stderr, "test_validate_cli: %s missing (ATS_SHARED_DIR)\n", model);
        return 1;
    }
    test_two_policies();
    test_auto_under_stress();
    test_bad();
    return tu_finish("test_validate_cli");
}
