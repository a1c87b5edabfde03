/*
 * test_bench_kernels — `ats bench kernels` (CPU part only: --skip-gpu --skip-model, 2 threads, 1 token)
 * writes in its JSON file the repetition counts it used: params.reps is the number of timed calls of
 * every CPU GEMV row (each row's "reps"; --reps 2 was raised to 5 without saying so), and the prefill
 * GEMMs' counts are in params too. The run has 1.8 GiB of address space (RLIMIT_AS; not under
 * AddressSanitizer, which reserves far more), so the DRAM read probe cannot allocate its 2 GiB buffer:
 * one "DRAM read bandwidth probe failed: ..." line, the rows without a DRAM fraction, the JSON with
 * cpu.dram_read_error and no figure derived from the NaN (printed "nan GB/s" and "nan%", JSON keys
 * dropped or 0.0 before), exit 0 as the GEMV
 * rows are still measured. One run of ~30-60 s on a 2-core machine.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jansson.h>

#include "testutil.h"

static char tmpdir[] = "/tmp/test_bench_kernels.XXXXXX";
static char out[1 << 16], err[1 << 16];

static json_t *run_bench(const char *extra, int *rc)
{
    char args[1024], res[400];
    snprintf(res, sizeof res, "%s/bk.json", tmpdir);
    remove(res);
    snprintf(args, sizeof args, "bench kernels --skip-gpu --skip-model --threads 2 --tokens 1 %s --out %s", extra, res);
    *rc = tu_run_ats_split(NULL, args, 300, tmpdir, out, sizeof out, err, sizeof err);
    json_error_t je;
    json_t *j = json_load_file(res, 0, &je);
    CHECK_MSG(j, "ats %s: rc %d, no JSON (%s); stderr '%s'", args, *rc, je.text, err);
    return j;
}

#if defined(__SANITIZE_ADDRESS__)
#define TB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TB_ASAN 1
#endif
#endif

static void test_reps_used_probe_failed(void)
{
    int rc = 0, limited = 0;
    struct rlimit old;
#ifndef TB_ASAN
    if (getrlimit(RLIMIT_AS, &old) == 0) { /* the children (sh, timeout, ats) inherit the soft limit */
        struct rlimit lim = old;
        lim.rlim_cur = (rlim_t)1800 << 20;
        limited = (old.rlim_max == RLIM_INFINITY || old.rlim_max >= lim.rlim_cur) && setrlimit(RLIMIT_AS, &lim) == 0;
    }
#endif
    json_t *j = run_bench("--reps 2", &rc);
    if (limited) setrlimit(RLIMIT_AS, &old);
    CHECK_MSG(rc == 0, "rc %d, stderr '%s'", rc, err);
    if (!j) return;
    json_t *cpu = json_object_get(j, "cpu");
    if (limited) {
        CHECK_MSG(strstr(err, "ats bench kernels: DRAM read bandwidth probe failed: cannot allocate its 2 GiB buffer") &&
                      tu_count_lines(err) == 2 /* and "wrote ..." */,
                  "stderr '%s'", err);
        CHECK_MSG(strstr(out, "probe failed") && !strstr(out, "nan"), "stdout '%.2000s'", out);
        CHECK(json_string_value(json_object_get(cpu, "dram_read_error")) && !json_object_get(cpu, "dram_read_GBps"));
        /* jansson cannot hold a NaN (json_real(NAN) is NULL): a NaN figure was a key silently missing */
        CHECK(!json_object_get(cpu, "dram_read_GBps_median") && !json_object_get(cpu, "dram_read_reps"));
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(cpu, "gemv"), i, e) {
            CHECK(!json_object_get(e, "fraction_of_dram_read") && !json_object_get(e, "over_dram_probe"));
            CHECK(json_real_value(json_object_get(e, "median_s")) > 0 && json_real_value(json_object_get(e, "GBps")) > 0);
        }
    } else {
        fprintf(stderr, "  (AddressSanitizer or a hard RLIMIT_AS: the DRAM probe is not made to fail)\n");
        CHECK(json_real_value(json_object_get(cpu, "dram_read_GBps")) > 0);
    }
    json_t *p = json_object_get(j, "params");
    CHECK(json_integer_value(json_object_get(p, "reps")) == 2);
    CHECK(json_integer_value(json_object_get(p, "gpu_prefill_gemm_reps")) == 2 / 2 + 3);
    CHECK(json_integer_value(json_object_get(p, "cpu_prefill_gemm_reps")) == 3);
    /* the CPU routed-experts decode row: 8 of 128 Qwen3-30B-A3B experts, 24.5 MB a token, timed reps times */
    json_t *moe = json_object_get(json_object_get(j, "cpu"), "moe_decode");
    CHECK_MSG(moe && json_integer_value(json_object_get(moe, "reps")) == 2 &&
                  fabs(json_real_value(json_object_get(moe, "bytes_per_token")) - 24.5e6) < 0.5e6 &&
                  json_real_value(json_object_get(moe, "median_s")) > 0 && json_real_value(json_object_get(moe, "GBps")) > 0,
              "cpu.moe_decode missing or wrong");
    json_t *gemv = json_object_get(json_object_get(j, "cpu"), "gemv");
    CHECK_MSG(json_array_size(gemv) >= 8, "%zu CPU GEMV rows", json_array_size(gemv));
    size_t i;
    json_t *e;
    json_array_foreach(gemv, i, e) {
        CHECK_MSG(json_integer_value(json_object_get(e, "reps")) == 2, "row %zu (%s %s): reps %lld, params.reps 2", i,
                  json_string_value(json_object_get(e, "type")), json_string_value(json_object_get(e, "shape")),
                  (long long)json_integer_value(json_object_get(e, "reps")));
    }
    json_decref(j);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_reps_used_probe_failed();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_bench_kernels");
}
