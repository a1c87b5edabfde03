/*
 * test_profile — `ats profile` ($ATS_BIN) on stories260K (../shared/models):
 *  1. --skip-gpu --quick writes a profile that atsc_hw_load reads: cpu.threads as given, a CPU op table
 *     (every entry CPU, 3 points 1/16/64 tokens, times > 0) whose sources say "measured by ats profile",
 *     the GPU figures and sources of the base untouched (a base's cpu.load_response not carried over); `ats sim --hw thatfile --model stories.gguf`
 *     runs on it (exit 0) and predicts another decode rate than the base description (its CPU op: the embedding);
 *  2. no progress text (no '\r') when stderr is not a terminal;
 *  3. bad input: no --model, --threads 0, an unknown --hw, --quant without --dummy-weights: exit 2 with
 *     one line; a profile with a bad op-table time given to `ats sim --hw`: exit 2 naming file and field.
 * With the gpu label (test_profile_gpu): the GPU half (--quick): exit 77 without a device; else GPU
 * entries in the op table and the link figures measured.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/hw_json.h"
#include "testutil.h"

static char dir[512], stories[1024];
static char out[1 << 16], err[1 << 16];

static int ats(const char *args, int timeout_s) { return tu_run_ats_split(NULL, args, timeout_s, dir, out, sizeof out, err, sizeof err); }

/* the decode tok/s of `ats sim` on stories (CSV: 4 decimals of tok/s), policy layer (the embedding lookup
 * runs on the CPU) */
static double sim_decode_rate(const char *hw)
{
    char args[4096];
    snprintf(args, sizeof args, "sim --hw '%s' --model '%s' --trace none --prompt 64 --gen 8 --policy layer --format csv",
             hw, stories);
    int rc = ats(args, 120);
    CHECK_MSG(rc == 0, "`ats %s`: exit %d: %s", args, rc, err);
    /* last line, the TPOT mean column (name found in the header) */
    char *hdr = strstr(out, "policy");
    if (!hdr) return -1;
    char *nl = strchr(hdr, '\n');
    if (!nl) return -1;
    *nl = 0;
    int col = -1, k = 0;
    for (char *p = hdr, *c; p; p = c ? c + 1 : NULL, k++) {
        c = strchr(p, ',');
        if (c) *c = 0;
        if (!strcmp(p, "decode_tok_s") && col < 0) col = k;
    }
    char *row = nl + 1, *f = row;
    for (int i = 0; i < col && f; i++) f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL;
    return f && col >= 0 ? atof(f) : -1;
}

static int gpu_part(void)
{
    char args[4096], path[700];
    snprintf(path, sizeof path, "%s/gpu.json", dir);
    snprintf(args, sizeof args, "profile --model '%s' --quick --threads 2 --out '%s'", stories, path);
    int rc = ats(args, 600);
    CHECK_MSG(rc == 0, "`ats %s`: exit %d: %s", args, rc, err);
    if (rc == 0 && strstr(err, "GPU part skipped")) {
        fprintf(stderr, "test_profile_gpu: %s", err);
        int r = tu_finish("test_profile_gpu"); /* removes the scratch folder */
        return r ? r : 77;
    }
    ats_hw hw;
    ats_err e = {{0}};
    CHECK_MSG(atsc_hw_load(path, &hw, &e) == ATS_OK, "%s", e.msg);
    int gpu = 0;
    for (int32_t i = 0; i < hw.op_table.n; i++) gpu += hw.op_table.e[i].backend == 1;
    CHECK_MSG(gpu > 0, "no GPU entry in %s", path);
    char *text = tu_slurp(path, NULL);
    CHECK(text && strstr(text, "copy engine H2D") && strstr(text, "SM copy kernel") && strstr(text, "copy_engine_over_sizes"));
    free(text);
    snprintf(args, sizeof args, "sim --hw '%s' --model '%s' --trace none --prompt 64 --gen 8 --policy layer", path, stories);
    rc = ats(args, 120);
    CHECK_MSG(rc == 0, "`ats %s`: exit %d: %s", args, rc, err);
    return tu_finish("test_profile_gpu");
}

int main(int argc, char **argv)
{
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    tu_seed(gpu ? "test_profile_gpu" : "test_profile");
    if (!tu_tmpdir(dir, sizeof dir, gpu ? "test_profile_gpu" : "test_profile")) return 1;
    tu_shared_path(stories, sizeof stories, "models/stories260K/stories260K.gguf");
    if (gpu) return gpu_part();
    char args[4096], path[700], base[1024];
    tu_source_path(base, sizeof base, "sim/hw/h200-host.json");
    snprintf(path, sizeof path, "%s/p.json", dir);
    /* 1. */
    snprintf(args, sizeof args, "profile --model '%s' --skip-gpu --quick --threads 2 --hw '%s' --out '%s'", stories, base, path);
    int rc = ats(args, 300);
    CHECK_MSG(rc == 0, "`ats %s`: exit %d: %s", args, rc, err);
    CHECK_MSG(strstr(out, "CPU op table") && strstr(out, "cpu.mem_bw_GBps"), "%s", out);
    CHECK_MSG(strchr(err, '\r') == NULL, "progress text in a pipe: %s", err); /* 2. */
    ats_hw hw, b;
    ats_err e = {{0}};
    CHECK_MSG(atsc_hw_load(path, &hw, &e) == ATS_OK, "%s", e.msg);
    CHECK(atsc_hw_load(base, &b, &e) == ATS_OK);
    CHECK(hw.cpu_threads == 2);
    /* the DRAM curve at 1 and 2 threads, its last point the description's rate (the CPU load model) */
    CHECK_MSG(hw.cpu_bw_n == 2 && hw.cpu_bw_threads[0] == 1 && hw.cpu_bw_threads[1] == 2, "curve of %d points",
              (int)hw.cpu_bw_n);
    CHECK(hw.cpu_bw_n == 2 && hw.cpu_bw_Bps[1] == hw.cpu_mem_bw && hw.cpu_bw_Bps[0] > 0);
    CHECK(hw.op_table.n > 5);
    for (int32_t i = 0; i < hw.op_table.n; i++) {
        const ats_prof_entry *x = &hw.op_table.e[i];
        CHECK(x->backend == 0 && x->n_points == 3 && x->tokens[0] == 1 && x->tokens[1] == 16 && x->tokens[2] == 64);
        for (int p = 0; p < x->n_points; p++) CHECK(x->t_s[p] > 0 && x->t_s[p] < 1.0);
    }
    CHECK(hw.pcie_h2d_bw == b.pcie_h2d_bw && hw.gpu_mem_bw == b.gpu_mem_bw && hw.gpu_flops == b.gpu_flops);
    char *text = tu_slurp(path, NULL);
    CHECK(text && strstr(text, "measured by ats profile") && strstr(text, "cpu_read_over_threads"));
    /* GPU sources of the base kept (no GPU part) */
    CHECK(text && strstr(text, "sim/hw/measure/linkprobe.cu"));
    free(text);
    double t_prof = sim_decode_rate(path), t_base = sim_decode_rate(base);
    CHECK_MSG(t_prof > 0 && t_base > 0 && t_prof != t_base, "decode tok/s with the profile %g, with the base %g", t_prof, t_base);
    /* a measured profile as the base: its CPU load response is not carried over (machine, threads) */
    {
        char pbase[1024], p2[760];
        tu_source_path(pbase, sizeof pbase, "sim/hw/h200-host-profile.json");
        snprintf(p2, sizeof p2, "%s/p2.json", dir);
        snprintf(args, sizeof args, "profile --model '%s' --skip-gpu --quick --threads 2 --hw '%s' --out '%s'", stories, pbase,
                 p2);
        rc = ats(args, 300);
        CHECK_MSG(rc == 0, "`ats %s`: exit %d: %s", args, rc, err);
        ats_hw h2, hb;
        CHECK(atsc_hw_load(pbase, &hb, &e) == ATS_OK && hb.cpu_load_n > 0);
        CHECK_MSG(atsc_hw_load(p2, &h2, &e) == ATS_OK && h2.cpu_load_n == 0, "%s: load response of %d points", p2,
                  (int)h2.cpu_load_n);
    }
    /* 3. */
    static const char *const bad[][2] = {
        {"profile --skip-gpu --quick", "--model is required"},
        {"profile --model M --threads 0", "--threads"},
        {"profile --model M --hw no-such-machine", "no-such-machine"},
        {"profile --model M --quant q8_0", "--quant"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rc = ats(bad[k][0], 60);
        CHECK_MSG(rc == 2 && strstr(err, bad[k][1]) && tu_count_lines(err) == 1, "`ats %s`: exit %d: %s", bad[k][0], rc, err);
    }
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    CHECK(j != NULL);
    if (j) {
        json_t *t = json_array_get(json_object_get(json_object_get(j, "op_table"), "cpu"), 2);
        json_array_set_new(json_object_get(t, "t_s"), 1, json_real(-0.5));
        char badp[700];
        snprintf(badp, sizeof badp, "%s/bad.json", dir);
        CHECK(json_dump_file(j, badp, JSON_INDENT(1)) == 0);
        json_decref(j);
        snprintf(args, sizeof args, "sim --hw '%s' --model '%s' --trace none --prompt 16 --gen 2", badp, stories);
        rc = ats(args, 60);
        CHECK_MSG(rc == 2 && strstr(err, badp) && strstr(err, "'op_table.cpu[2].t_s[1]'") && strstr(err, "-0.5"),
                  "exit %d: %s", rc, err);
    }
    return tu_finish("test_profile");
}
