/*
 * test_bench_model_policy — `ats bench model --policy` ($ATS_BIN) on dummy weights of a tiny qwen3 written
 * here (the plan executor's rows; on a machine without a CUDA device every op runs on the CPU):
 *  1. -o json with --policy layer,ats --vram-budget 1GiB -p 16 -n 4 -r 2: four rows, (layer, pp16),
 *     (layer, tg4), (ats, pp16), (ats, tg4) in that order, backend "layer@1GiB"/"ats@1GiB", policy and
 *     vram_budget_bytes set, avg_ts > 0 the mean of 2 samples, stddev_ts >= 0 their sample standard
 *     deviation, warmup_s > 0, setup_s, upload_s, n_reschedules, gb_h2d >= 0; without a device the gpu
 *     column is empty and stderr says the rows run on the CPU; the result file (--out) holds the rows
 *     and parameters.hw;
 *  2. --backend cpu with --policy: the backend rows first, with the policy columns 0 / "", and the CSV
 *     header keeps the backend rows' columns in their order, the policy columns after them;
 *     -o md: the backend column shows "cpu" and "ats@1GiB"; --serialized: "ats@1GiB serialized";
 *  3. bad input: --policy without --vram-budget, an unknown policy, --vram-budget / --hw / --serialized
 *     without --policy, a budget above the --hw snapshot's VRAM, an unknown --hw: one line, exit 2, no
 *     result file.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static const char *bin;
static char dir[512];

/* runs `ats ARGS`, stdout into *out (new), stderr into err; returns the exit code */
static int run(const char *args, char **out, char *err, size_t err_len)
{
    return tu_run_capture(bin, args, dir, out, err, err_len);
}

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }
static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(none)";
}

/* row i of a policy run: its policy, test and statistics */
static void check_policy_row(json_t *o, size_t i, const char *policy, const char *backend, const char *test, int reps)
{
    CHECK_MSG(!strcmp(str(o, "policy"), policy) && !strcmp(str(o, "backend"), backend) && !strcmp(str(o, "test"), test),
              "row %zu: policy %s backend %s test %s, want %s %s %s", i, str(o, "policy"), str(o, "backend"),
              str(o, "test"), policy, backend, test);
    CHECK(json_integer_value(json_object_get(o, "vram_budget_bytes")) == 1073741824);
    CHECK(json_integer_value(json_object_get(o, "split")) == -1);
    json_t *s = json_object_get(o, "samples_ts");
    CHECK_MSG(json_array_size(s) == (size_t)reps, "row %zu: %zu samples, want %d", i, json_array_size(s), reps);
    double sum = 0, ss = 0;
    for (size_t k = 0; k < json_array_size(s); k++) {
        double v = json_number_value(json_array_get(s, k));
        CHECK_MSG(v > 0 && isfinite(v), "row %zu: sample %g", i, v);
        sum += v;
    }
    double mean = sum / (double)(reps > 0 ? reps : 1);
    for (size_t k = 0; k < json_array_size(s); k++) {
        double d = json_number_value(json_array_get(s, k)) - mean;
        ss += d * d;
    }
    const double ts = num(o, "avg_ts"), sd = num(o, "stddev_ts");
    CHECK_MSG(ts > 0, "row %zu: avg_ts %g", i, ts);
    CHECK_REL(ts, mean, 1e-4, 0);
    CHECK_MSG(sd >= 0, "row %zu: stddev_ts %g", i, sd);
    /* JSON keeps 6 significant digits: each sample off by up to 5e-6 of itself, their std by ~1e-5 of ts */
    CHECK_REL(sd, reps > 1 ? sqrt(ss / (reps - 1)) : 0.0, 1e-3, 2e-5 * ts);
    CHECK_MSG(num(o, "warmup_s") > 0 && num(o, "setup_s") >= 0 && num(o, "upload_s") >= 0 &&
              num(o, "upload_s") <= num(o, "setup_s") && num(o, "load_s") >= 0,
              "row %zu: warmup_s %g setup_s %g upload_s %g load_s %g", i, num(o, "warmup_s"), num(o, "setup_s"),
              num(o, "upload_s"), num(o, "load_s"));
    CHECK(json_is_integer(json_object_get(o, "n_reschedules")) && json_integer_value(json_object_get(o, "n_reschedules")) >= 0);
    CHECK(num(o, "gb_h2d") >= 0 && isfinite(num(o, "gb_h2d")));
    CHECK(json_is_false(json_object_get(o, "serialized")));
    if (!str(o, "gpu")[0]) /* no device: nothing is promoted, nothing resident, nothing copied */
        CHECK_MSG(json_integer_value(json_object_get(o, "resident_bytes")) == 0 && num(o, "gb_h2d") == 0,
                  "row %zu on the CPU: resident_bytes %lld gb_h2d %g", i,
                  (long long)json_integer_value(json_object_get(o, "resident_bytes")), num(o, "gb_h2d"));
}

static void expect_usage(const char *args, const char *part)
{
    char full[2048];
    snprintf(full, sizeof full, "bench model %s", args);
    tu_expect_usage_out(bin, dir, full, part);
}

int main(void)
{
    tu_seed("test_bench_model_policy");
    bin = getenv("ATS_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "test_bench_model_policy: ATS_BIN not set\n");
        return 1;
    }
    if (!tu_tmpdir(dir, sizeof dir, "test_bench_model_policy")) return 1;
    char args[4096], e[8192], res[600], json[600];
    snprintf(res, sizeof res, "%s/bench-model.json", dir);
    snprintf(json, sizeof json, "%s/tiny.json", dir);
    tu_write_tiny_qwen3(json, "test_bench_model_policy");
    /* 1. policy rows as JSON, and the result file */
    char *out = NULL;
    json_error_t je;
    snprintf(args, sizeof args,
             "bench model --dummy-weights -m '%s' --policy layer,ats --vram-budget 1GiB -p 16 -n 4 -r 2 -t 1 -o json "
             "--out '%s'", json, res);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    json_t *root = json_loads(out, 0, &je);
    CHECK_MSG(json_is_array(root) && json_array_size(root) == 4, "-o json: 4 rows wanted: %s", out);
    static const char *const pol[4] = {"layer", "layer", "ats", "ats"}, *const be[4] = {"layer@1GiB", "layer@1GiB",
                                                                                         "ats@1GiB", "ats@1GiB"};
    static const char *const tst[4] = {"pp16", "tg4", "pp16", "tg4"};
    int on_cpu = 0;
    for (size_t i = 0; json_is_array(root) && i < json_array_size(root) && i < 4; i++) {
        json_t *o = json_array_get(root, i);
        check_policy_row(o, i, pol[i], be[i], tst[i], 2);
        on_cpu += !str(o, "gpu")[0];
        CHECK(json_integer_value(json_object_get(o, "threads")) == 1);
    }
    if (on_cpu)
        CHECK_MSG(strstr(e, "no CUDA device: the policy rows run every op on the CPU") != NULL,
                  "rows on the CPU without saying so on stderr: '%s'", e);
    json_decref(root);
    free(out);
    root = json_load_file(res, 0, &je);
    CHECK_MSG(root != NULL, "result file %s: %s", res, je.text);
    if (root) {
        json_t *r = json_object_get(root, "results");
        CHECK(json_is_array(r) && json_array_size(r) == 4);
        json_t *par = json_object_get(root, "parameters");
        CHECK_MSG(!strcmp(str(par, "hw"), "h200-host"), "parameters.hw: %s", str(par, "hw"));
        json_decref(root);
    }
    unlink(res);
    /* 2. backend and policy rows together: CSV columns, markdown backend column, --serialized */
    snprintf(args, sizeof args,
             "bench model --dummy-weights -m '%s' --backend cpu --policy ats --vram-budget 1GiB -p 8 -n 0 -r 2 -t 1 -o csv",
             json);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    static const char header[] = "model,model_desc,size_bytes,n_params,backend,split,gpu,threads,test,n_prompt,n_gen,"
                                 "reps,avg_ts,stddev_ts,samples_ts,load_s,warmup_s,policy,vram_budget_bytes,serialized,"
                                 "setup_s,upload_s,resident_bytes,n_reschedules,gb_h2d\n";
    CHECK_MSG(!strncmp(out, header, strlen(header)), "CSV header: %s", out);
    CHECK_MSG(tu_count_lines(out) == 3 && strstr(out, ",cpu,-1,") && strstr(out, ",ats@1GiB,-1,") &&
              strstr(out, ",,0,0,0,0,0,0,0\n") && strstr(out, ",ats,1073741824,0,"),
              "CSV rows (cpu then ats@1GiB, the cpu row's policy columns empty / 0): %s", out);
    CHECK_MSG(strstr(out, ",cpu,") < strstr(out, ",ats@1GiB,"), "backend rows before policy rows: %s", out);
    free(out);
    snprintf(args, sizeof args,
             "bench model --dummy-weights -m '%s' --backend cpu --policy ats --vram-budget 1GiB -p 8 -n 2 -r 2 -t 1", json);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    CHECK_MSG(strncmp(out, "| model", 7) == 0 && strstr(out, "| cpu      |") && strstr(out, "| ats@1GiB |") &&
              strstr(out, " ± ") && strstr(out, "placement and upload ") && strstr(out, " re-plans in the 2 timed runs"),
              "-o md: %s", out);
    int table_lines = 0;
    for (char *p = out; p && *p == '|'; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) table_lines++;
    CHECK_MSG(table_lines == 6, "-o md: %d table lines, want 6 (header, separator, 4 rows)", table_lines);
    free(out);
    snprintf(args, sizeof args,
             "bench model --dummy-weights -m '%s' --policy ats --vram-budget 1GiB --serialized -p 8 -n 0 -r 1 -t 1 -o json",
             json);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    root = json_loads(out, 0, &je);
    json_t *o = json_array_get(root, 0);
    CHECK_MSG(json_array_size(root) == 1 && !strcmp(str(o, "backend"), "ats@1GiB serialized") &&
              json_is_true(json_object_get(o, "serialized")) && num(o, "avg_ts") > 0,
              "--serialized: %s", out);
    json_decref(root);
    free(out);
    /* 3. bad input */
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy ats", json);
    expect_usage(args, "--policy needs --vram-budget");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy layer,nope --vram-budget 1GiB", json);
    expect_usage(args, "--policy: unknown policy 'nope'");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --vram-budget 1GiB", json);
    expect_usage(args, "go with --policy");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --serialized", json);
    expect_usage(args, "go with --policy");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --hw h200-host", json);
    expect_usage(args, "go with --policy");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy ats --vram-budget 5", json);
    expect_usage(args, "--vram-budget");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy ats --vram-budget 1TiB", json);
    expect_usage(args, "exceeds");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy ats --vram-budget 1GiB --hw no-such-hw", json);
    expect_usage(args, "no-such-hw");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy '' --vram-budget 1GiB", json);
    expect_usage(args, "--policy: empty");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy ats,layer,ats --vram-budget 1GiB", json);
    expect_usage(args, "'ats' given twice");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 8 -n 0 --policy ats --vram-budget 1GiB --split 1", json);
    expect_usage(args, "--split 1 goes with --backend");
    unlink(json);
    return tu_finish("test_bench_model_policy");
}
