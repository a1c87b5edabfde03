/*
 * test_bench_model_device — bench_model_run's policy rows (bench/model.h) on the plan executor's device
 * emulated over host memory (ex_device_host_new: the device path without a GPU), dummy weights of a tiny
 * dense qwen3 under sim/hw/h200-host.json:
 *  1. `layer` with an ample budget: the weights resident (resident_bytes >= the model's weight bytes),
 *     the gpu column the device's name, rates > 0, the mean of -r samples, std >= 0, setup_s >= upload_s;
 *  2. `gpu-stream` with the budget of half the weights: weights copied host → device in every run
 *     (gb_h2d > 0), pp16 and tg4 rows;
 *  3. every run read each weight intact from its binding and waited for its copies (the device's
 *     bad_reads and unwaited stay 0);
 *  4. a policy row over a backend configuration and an unknown policy are refused (ATS_EINVAL).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/hw_json.h"
#include "bench/model.h"
#include "ex/runtime.h"
#include "testutil.h"

static const ats_arch *tiny(ats_arch *a)
{
    ats_arch_init(a);
    snprintf(a->name, sizeof a->name, "tiny-qwen3");
    snprintf(a->family, sizeof a->family, "qwen3");
    snprintf(a->source, sizeof a->source, "test_bench_model_device: made-up small shapes");
    a->n_embd = 256;
    a->n_ff = 512;
    a->n_layer = 4;
    a->n_head = 4;
    a->n_head_kv = 2;
    a->head_dim = 64;
    a->n_vocab = 1000;
    a->n_ctx_max = 64;
    a->rope_theta = 1000000.0;
    a->rms_norm_eps = 1e-6;
    a->qk_norm = 1;
    a->rope_type = ATS_ROPE_NEOX;
    a->partial_rotary = 1.0;
    return a;
}

/* one row of test t under exec over device dev; the statistics checked; ATS status */
static enum ats_status row_on(const ex_model *m, const bench_model_exec *ex, ex_device *dev, const bench_model_test *t,
                              const bench_model_opts *o, bench_model_row *r)
{
    ats_err err = {{0}};
    bench_model_dev *d = NULL;
    enum ats_status st = bench_model_dev_open_on(ex, dev, &d, &err);
    CHECK_MSG(st == ATS_OK, "bench_model_dev_open_on %s: %s", ex->backend, err.msg);
    if (st != ATS_OK) return st;
    st = bench_model_run(m, d, t, o, r, &err);
    CHECK_MSG(st == ATS_OK, "bench_model_run %s: %s", ex->backend, err.msg);
    bench_model_dev_free(d);
    if (st != ATS_OK) return st;
    double sum = 0;
    for (int i = 0; i < r->reps; i++) {
        CHECK_MSG(r->samples_tok_s[i] > 0 && isfinite(r->samples_tok_s[i]), "%s: sample %g", ex->backend, r->samples_tok_s[i]);
        sum += r->samples_tok_s[i];
    }
    CHECK(r->reps == o->reps);
    CHECK(r->mean_tok_s > 0);
    CHECK_REL(r->mean_tok_s, sum / r->reps, 1e-12, 0);
    CHECK(r->std_tok_s >= 0 && isfinite(r->std_tok_s));
    CHECK(r->warmup_s > 0 && r->setup_s >= r->upload_s && r->upload_s >= 0);
    CHECK(r->n_reschedules >= 0 && r->gb_h2d >= 0);
    CHECK_MSG(!strcmp(r->gpu, "hostdev"), "gpu column '%s'", r->gpu);
    CHECK(!strcmp(r->exec.policy, ex->policy) && r->exec.vram_budget_bytes == ex->vram_budget_bytes);
    return ATS_OK;
}

/* the device bytes besides weights of an ample `layer` layout: temp ring, KV caches, compute buffers */
static uint64_t fixed_bytes(const ex_model *m, ex_device *dev, const ats_hw *hw, int64_t chunk)
{
    ex_rt_cfg cfg = ex_rt_cfg_default();
    cfg.policy = "layer";
    cfg.vram_budget_bytes = 1ull << 34;
    cfg.hw = hw;
    cfg.prompt_tok = 16;
    cfg.chunk_tok = chunk;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = 17;
    ex_rt *rt = NULL;
    ats_err err = {{0}};
    uint64_t res = 0, tmp = 0, kv = 0, comp = 0;
    CHECK_MSG(ex_rt_new(m, &so, dev, &cfg, &rt, &err) == ATS_OK, "ex_rt_new: %s", err.msg);
    if (rt) ex_rt_layout(rt, &res, &tmp, &kv, &comp);
    ex_rt_free(rt);
    return tmp + kv + comp;
}

int main(void)
{
    tu_seed("test_bench_model_device");
    ats_arch a;
    ats_err err = {{0}};
    char path[1024];
    ats_hw hw;
    if (atsc_hw_load(tu_source_path(path, sizeof path, "sim/hw/h200-host.json"), &hw, &err) != ATS_OK) {
        fprintf(stderr, "test_bench_model_device: %s\n", err.msg);
        return 1;
    }
    bench_model_src src = {NULL, tiny(&a), ATS_RECIPE_Q8_0, 7, NULL, NULL};
    ex_model *m = NULL;
    double load_s = 0;
    CHECK_MSG(bench_model_load(&src, &m, &load_s, &err) == ATS_OK, "bench_model_load: %s", err.msg);
    if (!m) return tu_finish("test_bench_model_device");
    ex_device *dev = NULL;
    CHECK(ex_device_host_new(&dev) == ATS_OK);
    bench_model_opts o = bench_model_opts_default();
    o.reps = 2;
    o.threads = 1;
    o.chunk = 8; /* pp16: two prefill rounds */
    o.hw = &hw;
    const bench_model_test pp = {16, 0}, tg = {0, 4};
    bench_model_row r;
    /* 1. layer, everything resident */
    bench_model_exec ex;
    CHECK(bench_model_exec_policy("layer", 1ull << 30, 0, &ex, &err) == ATS_OK && !strcmp(ex.backend, "layer@1GiB"));
    if (dev && row_on(m, &ex, dev, &pp, &o, &r) == ATS_OK) {
        CHECK_MSG(r.resident_bytes > m->weight_bytes / 2, "layer@1GiB: %llu resident bytes, weights %llu",
                  (unsigned long long)r.resident_bytes, (unsigned long long)m->weight_bytes);
        bench_model_row_free(&r);
    }
    /* 2. gpu-stream at half the weights beyond what else the device holds (an ample layout's temp ring,
          KV caches and compute buffers at 8-token chunks); gpu-stream places each layer's KV cache in
          whole 1 MiB quanta */
    const uint64_t kv_quanta = (uint64_t)a.n_layer << 20;
    CHECK(bench_model_exec_policy("gpu-stream", fixed_bytes(m, dev, &hw, o.chunk) + kv_quanta + m->weight_bytes / 2, 0,
                                  &ex, &err) == ATS_OK);
    double gb[2] = {0, 0};
    const bench_model_test *tests[2] = {&pp, &tg};
    for (int k = 0; k < 2 && dev; k++)
        if (row_on(m, &ex, dev, tests[k], &o, &r) == ATS_OK) {
            gb[k] = r.gb_h2d;
            CHECK_MSG(r.resident_bytes < m->weight_bytes, "gpu-stream: %llu resident bytes of %llu",
                      (unsigned long long)r.resident_bytes, (unsigned long long)m->weight_bytes);
            bench_model_row_free(&r);
        }
    CHECK_MSG(gb[0] > 0 && gb[1] > 0, "gpu-stream: gb_h2d pp16 %g, tg4 %g (weights streamed in every run)", gb[0], gb[1]);
    /* 3. the device saw every weight intact and every copy waited for */
    if (dev) {
        ex_device_host_stats s = ex_device_host_get_stats(dev);
        CHECK_MSG(s.bad_reads == 0 && s.unwaited == 0 && s.bound_reads > 0 && s.copies > 0,
                  "host device: bad_reads %lld unwaited %lld bound_reads %lld copies %lld", (long long)s.bad_reads,
                  (long long)s.unwaited, (long long)s.bound_reads, (long long)s.copies);
    }
    /* 4. refusals */
    bench_model_exec be = {"cpu", -1, "", 0, 0};
    bench_model_dev *d = NULL;
    CHECK(bench_model_dev_open_on(&be, dev, &d, &err) == ATS_EINVAL && d == NULL);
    CHECK(bench_model_exec_policy("nope", 1ull << 30, 0, &ex, &err) == ATS_OK);
    CHECK(bench_model_dev_open_on(&ex, dev, &d, &err) == ATS_EINVAL && strstr(err.msg, "unknown policy 'nope'"));
    ex_device_host_free(dev);
    ex_model_free(m);
    return tu_finish("test_bench_model_device");
}
