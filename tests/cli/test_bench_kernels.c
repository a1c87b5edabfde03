/*
 * test_bench_kernels — `ats bench kernels` (CPU part only: --skip-gpu --skip-model, 2 threads, 1 token)
 * writes in its JSON file the repetition counts it used: params.reps is the number of timed calls of
 * every CPU GEMV row (each row's "reps"; --reps 2 was raised to 5 without saying so), and the prefill
 * GEMMs' counts are in params too. One run of ~30 s on a 2-core machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void test_reps_used(void)
{
    int rc = 0;
    json_t *j = run_bench("--reps 2", &rc);
    CHECK_MSG(rc == 0, "rc %d, stderr '%s'", rc, err);
    if (!j) return;
    json_t *p = json_object_get(j, "params");
    CHECK(json_integer_value(json_object_get(p, "reps")) == 2);
    CHECK(json_integer_value(json_object_get(p, "gpu_prefill_gemm_reps")) == 2 / 2 + 3);
    CHECK(json_integer_value(json_object_get(p, "cpu_prefill_gemm_reps")) == 3);
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
    test_reps_used();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_bench_kernels");
}
