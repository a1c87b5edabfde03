/*
 * test_cuda_model — whole models on the GPU backend against the CPU backend (issue 5):
 *  1. small random qwen3 (dense, Q/K norms) and qwen3moe (router top-2 of 8 experts) models with
 *     dummy weights, run as CPU only, GPU only, and split half-and-half both ways (layers 0..k-1 on
 *     one backend, the rest on the other; ex_session_opts.split_layer): a prompt chunk of 11 tokens
 *     (GPU GEMM path) then 12 decode steps, all sessions fed the CPU's greedy tokens. F32 weights:
 *     the same greedy token at every step and logits within 1e-3 of max|logit|; Q8_0 and Q4_K_M
 *     dense: logits within 1e-1 of max|logit| (both backends quantize activations to int8, in
 *     different blocks: 32 on the GPU, 256 for K-quants on the CPU; seen up to 4.4e-2); Q8_0 and Q4_K_M MoE: a near-tie in the router can pick another expert on
 *     one backend (seen: 0.29 of max|logit| after such a flip, and greedy agreement from 24/39 to
 *     39/39 between runs, with the expert op itself within its bound in test_cuda_ops on identical
 *     ids), so there the logits must be finite and the error and the greedy agreement are reported,
 *     not asserted.
 *  2. stories260K (../shared/models/stories260K, F32) on the GPU only: 256 greedy steps from BOS,
 *     top-1 equal to reference_greedy_steps.csv at every step and the top-1/top-2 logits within
 *     1e-4 relative of the float64 reference (the CPU's own bound in test_exec_golden).
 * Exits 77 without a CUDA device. Seed printed (dummy weights and prompts).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#ifndef ATS_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "test_cuda_model: built without the CUDA backend: skipped\n");
    return TU_SKIP;
}
#else

#include "ex/gpu.h"
#include "ex/model.h"

static ex_gpu *g_gpu;
static uint64_t g_rng;

static void tiny_arch(ats_arch *a, int moe)
{
    ats_arch_init(a);
    snprintf(a->name, sizeof a->name, "%s", moe ? "tiny-qwen3moe" : "tiny-qwen3");
    snprintf(a->family, sizeof a->family, "%s", moe ? "qwen3_moe" : "qwen3");
    snprintf(a->source, sizeof a->source, "test_cuda_model: made-up small shapes");
    a->n_embd = 256;
    a->n_ff = moe ? 0 : 512;
    a->n_layer = 4;
    a->n_head = 4;
    a->n_head_kv = 2;
    a->head_dim = 64;
    a->n_vocab = 1000;
    a->n_expert = moe ? 8 : 0;
    a->n_expert_used = moe ? 2 : 0;
    a->n_ff_exp = moe ? 256 : 0;
    a->n_ctx_max = 128;
    a->rope_theta = 1000000.0;
    a->rms_norm_eps = 1e-6;
    a->qk_norm = 1;
    a->rope_type = ATS_ROPE_NEOX;
    a->partial_rotary = 1.0;
}

static int32_t argmax(const float *v, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return (int32_t)b;
}

/* Runs CPU, GPU, CPU|GPU and GPU|CPU sessions over the same inputs. */
static void compare_backends(const ats_arch *a, ats_recipe r, const ex_backend *gpu)
{
    ex_model *m = NULL;
    ats_err err;
    uint64_t seed = tu_rand(&g_rng);
    enum ats_status st = ex_model_new_dummy(a, r, seed, &m, &err);
    CHECK_MSG(st == ATS_OK, "ex_model_new_dummy(%s, %s): %s", a->name, ats_recipe_name(r), err.msg);
    if (st != ATS_OK) return;
    enum { NS = 4 };
    const char *names[NS] = {"cpu", "gpu", "cpu|gpu", "gpu|cpu"};
    ex_session *s[NS] = {0};
    for (int i = 0; i < NS; i++) {
        ex_session_opts o = ex_session_opts_default();
        o.n_ctx = 64;
        o.backend_a = i == 1 || i == 3 ? gpu : NULL;
        o.backend_b = i == 2 ? gpu : NULL;
        o.split_layer = i >= 2 ? a->n_layer / 2 : -1;
        CHECK(ex_session_new(m, &o, &s[i], &err) == ATS_OK);
    }
    int64_t V = a->n_vocab;
    float *lg[NS];
    for (int i = 0; i < NS; i++) lg[i] = malloc((size_t)V * sizeof(float));
    int32_t prompt[11];
    for (int t = 0; t < 11; t++) prompt[t] = (int32_t)(tu_rand(&g_rng) % (uint64_t)V);
    int exact = r == ATS_RECIPE_F32, routed_q = !exact && a->n_expert > 0;
    double bound = exact ? 1e-3 : 1e-1, worst = 0;
    int agree = 0, steps = 0;
    for (int step = 0; step <= 12; step++) {
        const int32_t *in = prompt;
        int64_t n = 11;
        int32_t tok;
        if (step > 0) {
            tok = argmax(lg[0], V);
            in = &tok;
            n = 1;
        }
        for (int i = 0; i < NS; i++) {
            st = ex_session_forward(s[i], in, n, lg[i], &err);
            CHECK_MSG(st == ATS_OK, "%s forward step %d: %s", names[i], step, err.msg);
            if (st != ATS_OK) goto out;
        }
        double mx = 1e-30;
        for (int64_t v = 0; v < V; v++) mx = fmax(mx, fabs(lg[0][v]));
        int32_t want = argmax(lg[0], V);
        for (int i = 1; i < NS; i++) {
            double e = 0;
            for (int64_t v = 0; v < V; v++) {
                double d = fabs((double)lg[i][v] - lg[0][v]);
                if (!(d <= e)) e = isnan(d) ? INFINITY : d;
            }
            e /= mx;
            worst = fmax(worst, e);
            if (!routed_q)
                CHECK_MSG(e <= bound, "%s %s %s step %d: logits differ from cpu by %.3g of max|logit| (bound %.3g)",
                          a->name, ats_recipe_name(r), names[i], step, e, bound);
            else
                CHECK_MSG(isfinite(e), "%s %s %s step %d: non-finite logits", a->name, ats_recipe_name(r), names[i], step);
            int32_t got = argmax(lg[i], V);
            agree += got == want;
            steps++;
            if (exact) CHECK_MSG(got == want, "%s %s step %d: greedy %d, cpu %d", a->name, names[i], step, got, want);
        }
    }
    fprintf(stderr, "  %-13s %-6s: cpu vs gpu / cpu|gpu / gpu|cpu over 13 rounds: worst logit error %.2e of max|logit| "
                    "(bound %s), greedy agreement %d/%d\n",
            a->name, ats_recipe_name(r), worst, routed_q ? "none: routing flips" : exact ? "1e-3" : "1e-1", agree, steps);
out:
    for (int i = 0; i < NS; i++) {
        ex_session_free(s[i]);
        free(lg[i]);
    }
    ex_backend_cuda_reset((ex_backend *)gpu); /* the next model may reuse these host addresses */
    ex_model_free(m);
}

static void test_stories(const ex_backend *gpu)
{
    char path[1024], csv[1024];
    tu_shared_path(path, sizeof path, "models/stories260K/stories260K.gguf");
    tu_shared_path(csv, sizeof csv, "models/stories260K/reference_greedy_steps.csv");
    FILE *f = fopen(csv, "r");
    CHECK_MSG(f != NULL, "cannot open %s (set ATS_SHARED_DIR)", csv);
    if (!f) return;
    ex_model *m = NULL;
    ats_err err;
    CHECK_MSG(ex_model_load_gguf(path, &m, &err) == ATS_OK, "%s", err.msg);
    if (!m) {
        fclose(f);
        return;
    }
    ex_session *s = NULL;
    ex_session_opts o = ex_session_opts_default();
    o.backend_a = gpu;
    CHECK(ex_session_new(m, &o, &s, &err) == ATS_OK);
    float *logits = malloc((size_t)m->arch.n_vocab * sizeof *logits);
    char line[256];
    CHECK(fgets(line, sizeof line, f) != NULL); /* header */
    int steps = 0, ok = 1;
    double worst = 0;
    while (s && fgets(line, sizeof line, f)) {
        int pos, in, id1, id2;
        double l1, l2;
        if (sscanf(line, "%d,%d,%d,%lf,%d,%lf", &pos, &in, &id1, &l1, &id2, &l2) != 6) continue;
        int32_t tok = in;
        if (ex_session_forward(s, &tok, 1, logits, &err) != ATS_OK) {
            CHECK_MSG(0, "stories260K gpu forward at %d: %s", pos, err.msg);
            break;
        }
        int32_t best = argmax(logits, m->arch.n_vocab);
        if (best != id1) {
            ok = 0;
            fprintf(stderr, "stories260K gpu step %d: top-1 %d, reference %d\n", pos, best, id1);
        }
        double e1 = fabs(logits[id1] - l1) / fabs(l1), e2 = fabs(logits[id2] - l2) / fmax(fabs(l2), 1.0);
        if (!(e1 <= worst)) worst = isnan(e1) ? INFINITY : e1;
        if (!(e2 <= worst)) worst = isnan(e2) ? INFINITY : e2;
        steps++;
    }
    fclose(f);
    CHECK(steps == 256);
    CHECK(ok);
    CHECK_MSG(worst <= 1e-4, "stories260K gpu: top-1/top-2 logits differ from the float64 reference by %.3g", worst);
    fprintf(stderr, "  stories260K gpu: %d greedy steps, top-1 %s the reference, worst logit error %.2e relative\n",
            steps, ok ? "equal to" : "DIFFERENT from", worst);
    free(logits);
    ex_session_free(s);
    ex_backend_cuda_reset((ex_backend *)gpu);
    ex_model_free(m);
}

int main(void)
{
    ex_gpu_status gs = ex_gpu_open(0, &g_gpu);
    if (gs == EX_GPU_ENODEV) {
        fprintf(stderr, "test_cuda_model: %s: skipped\n", ex_gpu_status_str(gs));
        return TU_SKIP;
    }
    if (gs != EX_GPU_OK) {
        fprintf(stderr, "test_cuda_model: ex_gpu_open: %s\n", ex_gpu_status_str(gs));
        return 1;
    }
    g_rng = tu_seed("test_cuda_model");
    ex_backend *gpu = NULL;
    CHECK(ex_backend_cuda_new(g_gpu, &gpu) == EX_GPU_OK);
    if (gpu) {
        ats_arch a;
        ats_err err;
        for (int moe = 0; moe < 2; moe++) {
            tiny_arch(&a, moe);
            CHECK_MSG(ats_arch_validate(&a, &err) == ATS_OK, "%s", err.msg);
            const ats_recipe rs[] = {ATS_RECIPE_F32, ATS_RECIPE_Q8_0, ATS_RECIPE_Q4_K_M};
            for (int i = 0; i < 3; i++) compare_backends(&a, rs[i], gpu);
        }
        test_stories(gpu);
        ex_backend_cuda_free(gpu);
    }
    ex_gpu_close(g_gpu);
    return tu_finish("test_cuda_model");
}
#endif
