/*
 * test_bench_model — `ats bench model` ($ATS_BIN) on stories260K (../shared/models) and on dummy weights
 * of a tiny qwen3 written here:
 *  1. -o csv: the header names every column, one row per (model, recipe, threads, test) in that order,
 *     avg_ts > 0 and equal to the mean of the samples (-r of them), stddev_ts their sample standard
 *     deviation, load_s and warmup_s >= 0; -o json: the same rows as an array; -o md (default): a
 *     markdown table with "mean ± std" rates, a separator line, one line per row, and the load and
 *     warm-up times below it; the result file (--out) holds the rows, the parameters and the commit;
 *  2. progress on stderr only when it is a terminal: none in a pipe, "[1/2] ..." under script(1) when
 *     it is there;
 *  3. bad -p/-n/-r/-t/-o values, a missing GGUF file, an unknown model name, -p 0 -n 0, an unknown
 *     backend, --quant without --dummy-weights, no -m, a -p or -n beyond the model's context (GGUF
 *     context_length, JSON max_position_embeddings): one line on stderr, exit 2, no result file.
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

/* the fields of CSV line `line`, empty ones included (no quoted commas in these tests) */
static int csv_fields(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line; p && n < max;) {
        f[n++] = p;
        p = strchr(p, ',');
        if (p) *p++ = 0;
    }
    return n;
}

static void check_csv(const char *out, int want_rows, int reps, const char *const *tests, int n_tests)
{
    char *copy = strdup(out), *save = NULL;
    char *line = strtok_r(copy, "\n", &save);
    char *h[32];
    int nh = line ? csv_fields(line, h, 32) : 0;
    int col_ts = -1, col_std = -1, col_samples = -1, col_test = -1, col_load = -1, col_warm = -1, col_reps = -1;
    for (int i = 0; i < nh; i++) {
        if (!strcmp(h[i], "avg_ts")) col_ts = i;
        if (!strcmp(h[i], "stddev_ts")) col_std = i;
        if (!strcmp(h[i], "samples_ts")) col_samples = i;
        if (!strcmp(h[i], "test")) col_test = i;
        if (!strcmp(h[i], "load_s")) col_load = i;
        if (!strcmp(h[i], "warmup_s")) col_warm = i;
        if (!strcmp(h[i], "reps")) col_reps = i;
    }
    CHECK_MSG(col_ts >= 0 && col_std >= 0 && col_samples >= 0 && col_test >= 0 && col_load >= 0 && col_warm >= 0 &&
              col_reps >= 0, "CSV header lacks a column: %s", out);
    int rows = 0;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL && col_ts >= 0 && col_std >= 0 && col_samples >= 0 &&
           col_test >= 0 && col_load >= 0 && col_warm >= 0 && col_reps >= 0) {
        char *f[32];
        int nf = csv_fields(line, f, 32);
        CHECK_MSG(nf == nh, "row %d: %d fields, header %d", rows, nf, nh);
        if (nf != nh) break;
        CHECK_MSG(!strcmp(f[col_test], tests[rows % n_tests]), "row %d: test %s, want %s", rows, f[col_test],
                  tests[rows % n_tests]);
        CHECK(atoi(f[col_reps]) == reps);
        double ts = atof(f[col_ts]), sd = atof(f[col_std]), v[64], sum = 0, ss = 0;
        int nv = 0;
        for (char *s2 = NULL, *p = strtok_r(f[col_samples], ";", &s2); p && nv < 64; p = strtok_r(NULL, ";", &s2)) v[nv++] = atof(p);
        CHECK_MSG(nv == reps, "row %d: %d samples, want %d", rows, nv, reps);
        for (int i = 0; i < nv; i++) sum += v[i];
        for (int i = 0; i < nv; i++) ss += (v[i] - sum / nv) * (v[i] - sum / nv);
        CHECK(ts > 0);
        CHECK_REL(ts, sum / (nv ? nv : 1), 1e-4, 0);
        CHECK_REL(sd, nv > 1 ? sqrt(ss / (nv - 1)) : 0.0, 1e-3, 1e-6 * ts);
        CHECK(atof(f[col_load]) >= 0 && atof(f[col_warm]) > 0);
        rows++;
    }
    CHECK_MSG(rows == want_rows, "CSV: %d rows, want %d:\n%s", rows, want_rows, out);
    free(copy);
}

static void expect_usage(const char *args, const char *part)
{
    char full[2048];
    snprintf(full, sizeof full, "bench model %s", args);
    tu_expect_usage_out(bin, dir, full, part);
}

int main(void)
{
    tu_seed("test_bench_model");
    bin = getenv("ATS_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "test_bench_model: ATS_BIN not set\n");
        return 1;
    }
    if (!tu_tmpdir(dir, sizeof dir, "test_bench_model")) return 1;
    char stories[1024], args[4096], e[8192], res[600], json[600];
    tu_shared_path(stories, sizeof stories, "models/stories260K/stories260K.gguf");
    snprintf(res, sizeof res, "%s/bench-model.json", dir);
    snprintf(json, sizeof json, "%s/tiny.json", dir);
    FILE *f = fopen(json, "w");
    fprintf(f, "{\"model_type\": \"qwen3\", \"hidden_size\": 256, \"intermediate_size\": 512,\n"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 64,\n"
               " \"vocab_size\": 320, \"tie_word_embeddings\": false, \"qk_norm\": true, \"max_position_embeddings\": 128,\n"
               " \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, \"rope_type\": \"neox\",\n"
               " \"default_quant\": \"q4_k_m\", \"source\": \"test_bench_model: a tiny qwen3\"}\n");
    fclose(f);
    /* 1. formats */
    char *out = NULL;
    static const char *const t2[] = {"pp16", "tg4"};
    snprintf(args, sizeof args, "bench model -m '%s' -p 16 -n 4 -r 3 -t 1,2 -o csv --out '%s'", stories, res);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    check_csv(out, 4, 3, t2, 2);
    free(out);
    json_error_t je;
    json_t *root = json_load_file(res, 0, &je);
    CHECK_MSG(root != NULL, "result file %s: %s", res, je.text);
    if (root) {
        json_t *r = json_object_get(root, "results");
        CHECK(json_is_array(r) && json_array_size(r) == 4);
        CHECK(json_is_string(json_object_get(root, "commit")) && json_is_object(json_object_get(root, "parameters")));
        json_decref(root);
    }
    unlink(res);
    static const char *const t3[] = {"pp8", "pp12", "tg2"};
    snprintf(args, sizeof args, "bench model --dummy-weights -m '%s' --quant q8_0,q4_0 -p 8,12 -n 2 -r 2 -t 1 -o json --out '%s'",
             json, res);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    root = json_loads(out, 0, &je);
    CHECK_MSG(json_is_array(root) && json_array_size(root) == 6, "-o json: %s", out);
    for (size_t i = 0; root && i < json_array_size(root); i++) {
        json_t *o = json_array_get(root, i);
        CHECK(!strcmp(json_string_value(json_object_get(o, "test")), t3[i % 3]));
        CHECK(!strcmp(json_string_value(json_object_get(o, "model_desc")), i < 3 ? "qwen3 q8_0" : "qwen3 q4_0"));
        CHECK(json_real_value(json_object_get(o, "avg_ts")) > 0);
        CHECK(json_array_size(json_object_get(o, "samples_ts")) == 2);
        CHECK(json_integer_value(json_object_get(o, "threads")) == 1);
    }
    json_decref(root);
    free(out);
    unlink(res);
    snprintf(args, sizeof args, "bench model --dummy-weights -m '%s' -p 8 -n 2 -r 2 --out '%s'", json, res);
    CHECK_MSG(run(args, &out, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    CHECK_MSG(strncmp(out, "| model", 7) == 0 && strstr(out, "\n| ---") && strstr(out, " pp8 |") &&
              strstr(out, " tg2 |") && strstr(out, " ± ") && strstr(out, "\nload ") && strstr(out, "\nwarm-up "),
              "-o md: %s", out);
    int table_lines = 0;
    for (char *p = out; p && *p == '|'; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) table_lines++;
    CHECK_MSG(table_lines == 4, "-o md: %d table lines, want 4 (header, separator, 2 rows)", table_lines);
    free(out);
    unlink(res);
    /* 2. progress: none in a pipe (e holds the last run's stderr), a line under a terminal */
    CHECK_MSG(strchr(e, '\r') == NULL && strstr(e, "[1/") == NULL, "progress in a pipe: '%s'", e);
    if (system("command -v script >/dev/null 2>&1") == 0) {
        char tty[600];
        snprintf(tty, sizeof tty, "%s/tty.txt", dir);
        snprintf(args, sizeof args, "script -qec \"'%s' bench model --dummy-weights -m '%s' -p 8 -n 0 -r 1 --out '%s' "
                                    ">/dev/null\" /dev/null >'%s' 2>&1", bin, json, res, tty);
        CHECK(system(args) == 0);
        FILE *tf = fopen(tty, "r");
        char tb[8192] = "";
        size_t tn = tf ? fread(tb, 1, sizeof tb - 1, tf) : 0;
        if (tf) fclose(tf);
        tb[tn] = 0;
        CHECK_MSG(strstr(tb, "ats bench model: [1/1]") != NULL, "no progress line on a terminal: '%s'", tb);
        unlink(tty);
        unlink(res);
    } else {
        fprintf(stderr, "test_bench_model: no script(1): the terminal progress check is not run\n");
    }
    /* 3. bad input: one line, exit 2, nothing written */
    snprintf(args, sizeof args, "-m '%s' -p x", stories);
    expect_usage(args, "-p: bad value 'x'");
    snprintf(args, sizeof args, "-m '%s' -p 16,-1", stories);
    expect_usage(args, "-p: bad value '-1'");
    snprintf(args, sizeof args, "-m '%s' -n 1.5", stories);
    expect_usage(args, "-n: bad value '1.5'");
    snprintf(args, sizeof args, "-m '%s' -n 4,,8", stories);
    expect_usage(args, "-n: bad value");
    snprintf(args, sizeof args, "-m '%s' -r 0", stories);
    expect_usage(args, "-r: bad value '0'");
    snprintf(args, sizeof args, "-m '%s' -r many", stories);
    expect_usage(args, "-r: bad value 'many'");
    snprintf(args, sizeof args, "-m '%s' -t 0", stories);
    expect_usage(args, "-t: bad value '0'");
    snprintf(args, sizeof args, "-m '%s' -o xml", stories);
    expect_usage(args, "-o: bad value 'xml'");
    snprintf(args, sizeof args, "-m '%s' -p 0 -n 0", stories);
    expect_usage(args, "no test");
    snprintf(args, sizeof args, "-m '%s' --backend gpu", stories);
    expect_usage(args, "--backend: 'gpu'");
    snprintf(args, sizeof args, "-m '%s',%s/missing.gguf", stories, dir);
    expect_usage(args, "missing.gguf': cannot open");
    snprintf(args, sizeof args, "-m '%s' --quant q8_0", stories);
    expect_usage(args, "--quant only applies");
    snprintf(args, sizeof args, "--dummy-weights -m %s/no-such-model.json", dir);
    expect_usage(args, "no-such-model.json");
    snprintf(args, sizeof args, "--dummy-weights -m '%s' --quant q3", json);
    expect_usage(args, "unknown recipe");
    expect_usage("-p 16", "-m is required");
    /* a test beyond the model's context: refused before any weights are built or read (it ran for minutes) */
    char want[1200];
    snprintf(args, sizeof args, "-m '%s' -p 16,2049 -n 0", stories);
    snprintf(want, sizeof want, "-p 2049: longer than the context of %s (2048 tokens)", stories);
    expect_usage(args, want);
    snprintf(args, sizeof args, "--dummy-weights -m '%s' -p 16 -n 129", json);
    snprintf(want, sizeof want, "-n 129: longer than the context of %s (128 tokens)", json);
    expect_usage(args, want);
    snprintf(args, sizeof args, "bench model --dummy-weights -m '%s' -p 128 -n 0 -r 1 -t 1", json); /* the whole context: runs */
    CHECK_MSG(run(args, NULL, e, sizeof e) == 0, "`ats %s`: %s", args, e);
    unlink(json);
    return tu_finish("test_bench_model");
}
