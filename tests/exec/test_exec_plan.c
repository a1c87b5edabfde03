/*
 * test_exec_plan — the plan executor (exec/runtime/plan_exec.c) without a GPU: every sched policy
 * runs tiny random qwen3 (F32, Q8_0) and qwen3moe (Q8_0) models and stories260K (../shared) on the host-memory device
 * (ex_device_host_new: CPU kernels reading every device weight through the runtime's binding,
 * synchronous copies, temp slots poisoned with 0xFF after their last reader), at VRAM budgets that
 * keep about 100%, 50%, 10% and 0% of the weights off the device and, for the dense model, at every
 * layer boundary. A prompt of 11 tokens in chunks of 4 (3 prefill rounds), then 8 greedy decode
 * steps; per run:
 *  - tokens and logits equal to the CPU session's bit for bit (same kernels, same inputs: any
 *    weight read from a wrong, stale or poisoned slot changes them);
 *  - no op read a bound weight whose bytes differed from the host weight (bad_reads 0: no reader
 *    saw poison; copies issued before a slot's last reader ran would be seen here);
 *  - no stream-order violation (unwaited 0): every copy over a slot came after a transfer-stream wait
 *    for the event of the slot's last reader, every read of a slot after a compute-stream wait for
 *    its copy's event (what real streams need; the host device runs work at once, so it counts them);
 *  - peak device allocation ≤ the budget; the controller observed every round;
 *  - no op ran off the plan (ex_rt_round.n_off_plan 0 in every round): sched keeps a fused
 *    expert group (ats_op_fused_head) on one backend, resident or promoted whole, and moves its
 *    weights before its first op into slots that hold every expert the router can choose;
 *  - over all runs, some promoted weights were copied and retired (the slot path ran);
 *  - the device's pin ledger (ex_device_host_stats): the weights, the KV cache and the activation
 *    scratch were pinned without overlapping ranges (cudaHostRegister refuses those) and all
 *    released when the runtime was freed; with every pin refused (ulimit -l), the same results.
 * Each policy also runs serialized (--serialized, R7) at two budgets, with the same checks, and placed
 * for the request (ex_rt_cfg.gen_tok, 4 KiB placement quanta) at four budgets and after a warm-up:
 * `ats` then takes a decode placement in some runs (ats_policy_decode_placement: more weights in the
 * temp ring's front from the first decode round to the next prefill; counted, and uploaded once per
 * decode phase: twice after a warm-up, whose prefill's transfers overwrite them).
 * Negative control: a bound weight retired (poisoned) and then read is counted as a bad read and
 * gives NaN outputs.
 * A budget below the compute buffers is refused with ATS_EINFEASIBLE and a message with numbers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats/policy.h"
#include "atsc/hw_json.h"
#include "ex/model.h"
#include "ex/runtime.h"
#include "ex/session.h"
#include "testutil.h"

enum { PROMPT = 11, CHUNK = 4, DECODE = 8 };

/* Built as test_cuda_plan (PLAN_CUDA): the same runs on the CUDA device, logits within a bound of
 * the CPU's (int8 activations on the GPU: 1e-3 of max|logit| with F32 weights, 1e-1 quantized, as
 * test_cuda_model) and the same greedy token wherever the CPU's top-1/top-2 margin exceeds twice
 * that; the host device's read checks do not apply. Exits 77 without a device. */
#ifdef PLAN_CUDA
static const int g_cuda = 1;
#else
static const int g_cuda = 0;
#endif
static double g_bound; /* relative to max|logit| of the round; 0 = bit for bit */

static enum ats_status new_dev(ex_device **d)
{
    ats_err e;
    return g_cuda ? ex_device_cuda_new(d, &e) : ex_device_host_new(d);
}
static void free_dev(ex_device *d)
{
    if (g_cuda) ex_device_cuda_free(d);
    else ex_device_host_free(d);
}

static int32_t argmax(const float *v, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return (int32_t)b;
}

/* Largest |a - b| over a round's logits relative to max|b|. */
static double round_err(const float *a, const float *b, int64_t n)
{
    double mx = 1e-30, e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)b[i]));
        e = fmax(e, fabs((double)a[i] - (double)b[i]));
    }
    return e / mx;
}

/* Top-1 minus top-2 logit of a round, relative to max|logit|. */
static double margin(const float *v, int64_t n)
{
    double a = -INFINITY, b = -INFINITY, mx = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)v[i]));
        if (v[i] > a) b = a, a = v[i];
        else if (v[i] > b) b = v[i];
    }
    return (a - b) / mx;
}

/* CPU reference: per round (3 prefill chunks + DECODE steps) the logits (n_vocab each). */
static float *cpu_reference(const ex_model *m, const int32_t *prompt, int32_t *gen)
{
    const int64_t V = m->arch.n_vocab;
    float *ref = malloc((size_t)(3 + DECODE) * (size_t)V * sizeof *ref);
    ex_session *s = NULL;
    ats_err err;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = 64;
    if (!ref || ex_session_new(m, &so, &s, &err)) {
        free(ref);
        return NULL;
    }
    int r = 0;
    for (int64_t i = 0; i < PROMPT; i += CHUNK, r++) {
        int64_t nn = PROMPT - i < CHUNK ? PROMPT - i : CHUNK;
        CHECK(ex_session_forward(s, prompt + i, nn, ref + (size_t)r * V, &err) == ATS_OK);
    }
    for (int d = 0; d < DECODE; d++, r++) {
        gen[d] = argmax(ref + (size_t)(r - 1) * V, V);
        CHECK(ex_session_forward(s, &gen[d], 1, ref + (size_t)r * V, &err) == ATS_OK);
    }
    ex_session_free(s);
    return ref;
}

typedef struct totals {
    int64_t runs, refused, copies, retired, bound_reads, promoted_rounds, gathers, off_plan, dec_runs;
} totals;

/* One run of `policy` at `budget` on a fresh host device; 1 when it ran, 0 when refused. */
static int g_serialized; /* runs with ex_rt_cfg.serialized (R7, --serialized) */
static int g_warmup;     /* runs after ex_rt_warmup (its rewound KV cache must not show) */
static int g_no_pin;     /* the device refuses every pin (ulimit -l): pageable copies, same results */
static int g_request;    /* placed for the request (gen_tok DECODE) in 4 KiB quanta: ats may take a decode
                            placement, its extra weights in the ring's front from the first decode round */

static int run_one(const ex_model *m, const ats_hw *hw, const char *policy, uint64_t budget, const int32_t *prompt,
                   const int32_t *gen, const float *ref, totals *t)
{
    const int64_t V = m->arch.n_vocab;
    ex_device *dev = NULL;
    CHECK(new_dev(&dev) == ATS_OK);
    if (g_no_pin && !g_cuda) ex_device_host_refuse_pins(dev, 1);
    ex_rt_cfg cfg = ex_rt_cfg_default();
    cfg.policy = policy;
    cfg.vram_budget_bytes = budget;
    cfg.hw = hw;
    cfg.prompt_tok = PROMPT;
    cfg.chunk_tok = CHUNK;
    cfg.time_every = 2;
    cfg.serialized = g_serialized;
    ats_hw hw_req;
    if (g_request) { /* a CPU 20x slower in prefill matmuls: streaming the prompt pays, a ring is kept */
        cfg.gen_tok = DECODE;
        cfg.quantum_bytes = 4096;
        hw_req = *hw;
        hw_req.eff_cpu.gemm_flop *= 0.05;
        hw_req.cpu_mem_bw *= 0.05;
        cfg.hw = &hw_req;
    }
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = 64;
    ex_rt *rt = NULL;
    ats_err err;
    enum ats_status st = ex_rt_new(m, &so, dev, &cfg, &rt, &err);
    if (st == ATS_EINFEASIBLE) {
        if (getenv("TEST_EXEC_PLAN_VERBOSE")) fprintf(stderr, "%s at %llu: %s\n", policy, (unsigned long long)budget, err.msg);
        CHECK_MSG(strstr(err.msg, "GiB") || strstr(err.msg, "fit") || strstr(err.msg, "budget"), "%s", err.msg);
        t->refused++;
        free_dev(dev);
        return 0;
    }
    CHECK_MSG(st == ATS_OK, "%s at %llu bytes: %s", policy, (unsigned long long)budget, err.msg);
    if (st) {
        free_dev(dev);
        return 0;
    }
    if (g_warmup) {
        st = ex_rt_warmup(rt, CHUNK, &err);
        CHECK_MSG(st == ATS_OK, "%s warm-up at %llu bytes: %s", policy, (unsigned long long)budget, err.msg);
    }
    float *logits = malloc((size_t)V * sizeof *logits);
    double worst = 0.0;
    int r = 0, bad_tok = 0, off = 0;
    uint64_t up_pre = 0, up_dec = 0, up_first = 0; /* decode placement uploads reported by the rounds */
    for (int64_t i = 0; i < PROMPT; i += CHUNK, r++) {
        int64_t nn = PROMPT - i < CHUNK ? PROMPT - i : CHUNK;
        ex_rt_round info;
        st = ex_rt_round_run(rt, ATS_PHASE_PREFILL, prompt + i, nn, logits, &info, &err);
        CHECK_MSG(st == ATS_OK, "%s %s at %llu bytes: %s", m->arch.name, policy, (unsigned long long)budget, err.msg);
        if (st) break;
        t->promoted_rounds += info.n_promoted > 0;
        off += info.n_off_plan;
        up_pre += info.upload_bytes;
        worst = fmax(worst, round_err(logits, ref + (size_t)r * V, V));
    }
    for (int d = 0; d < DECODE && st == ATS_OK; d++, r++) {
        bad_tok += argmax(logits, V) != gen[d] && margin(ref + (size_t)(r - 1) * V, V) > 2 * g_bound;
        ex_rt_round info;
        st = ex_rt_round_run(rt, ATS_PHASE_DECODE, &gen[d], 1, logits, &info, &err);
        CHECK_MSG(st == ATS_OK, "%s: %s", policy, err.msg);
        t->promoted_rounds += info.n_promoted > 0;
        off += info.n_off_plan;
        up_dec += info.upload_bytes;
        if (d == 0) up_first = info.upload_bytes;
        CHECK(info.upload_bytes <= info.bytes_h2d && info.upload_s >= 0.0);
        if (st == ATS_OK) worst = fmax(worst, round_err(logits, ref + (size_t)r * V, V));
    }
    CHECK_MSG(off == 0, "%s %s%s at %llu bytes: %d op runs off the plan (a fused group split, or its weights late)",
              m->arch.name, policy, g_serialized ? " serialized" : "", (unsigned long long)budget, off);
    t->off_plan += off;
    ex_device_host_stats hs = {0};
    if (!g_cuda) hs = ex_device_host_get_stats(dev);
    uint64_t res, tmp, kv, comp;
    ex_rt_layout(rt, &res, &tmp, &kv, &comp);
    CHECK_MSG(worst <= g_bound && bad_tok == 0, "%s budget %llu: logits differ by %g, %d tokens", policy,
              (unsigned long long)budget, worst, bad_tok);
    CHECK_MSG(hs.bad_reads == 0, "%s budget %llu: %lld reads of a stale or poisoned slot", policy,
              (unsigned long long)budget, (long long)hs.bad_reads);
    CHECK_MSG(hs.unwaited == 0, "%s budget %llu: %lld copies or reads without the stream wait that orders them",
              policy, (unsigned long long)budget, (long long)hs.unwaited);
    CHECK_MSG(g_cuda || hs.peak_alloc_bytes + kv + comp <= budget, "%s: %llu bytes allocated + KV %llu + compute %llu > budget %llu",
              policy, (unsigned long long)hs.peak_alloc_bytes, (unsigned long long)kv, (unsigned long long)comp,
              (unsigned long long)budget);
    CHECK(ex_rt_n_observed(rt) == 3 + DECODE);
    { /* the host's work before each op of the last round, in order: taken up, switch done, backend call */
        ex_rt_op_times o = ex_rt_last_ops(rt);
        int bad = 0;
        for (int32_t i = 0; i < o.n; i++) {
            bad += !(o.h_in_s[i] <= o.h_sw_s[i] && o.h_sw_s[i] <= o.h_call_s[i]);
            bad += i > 0 && !(o.h_in_s[i] >= o.h_call_s[i - 1]);
            bad += o.backend[i] == ATS_CPU && !(o.h_call_s[i] <= o.t_end_s[i]);
        }
        CHECK_MSG(bad == 0, "%s budget %llu: %d ops with host times out of order", policy, (unsigned long long)budget, bad);
    }
    {
        uint64_t xb = 0;
        int64_t ups = 0;
        ex_rt_decode_placement(rt, &xb, &ups);
        /* the request's upload: its first decode round reports it, no other round */
        CHECK_MSG(up_pre == 0 && up_dec == xb && up_first == xb, "%s budget %llu: uploads %llu in prefill, %llu in "
                  "decode (%llu in the first), decode placement %llu bytes", policy, (unsigned long long)budget,
                  (unsigned long long)up_pre, (unsigned long long)up_dec, (unsigned long long)up_first,
                  (unsigned long long)xb);
        /* uploaded at the first decode round after each prefill: the warm-up's and the request's */
        CHECK_MSG(xb == 0 ? ups == 0 : ups == 1 + g_warmup, "%s budget %llu: decode placement of %llu "
                  "bytes uploaded %lld times", policy, (unsigned long long)budget, (unsigned long long)xb, (long long)ups);
        t->dec_runs += xb > 0;
    }
    CHECK(ex_rt_warmup(rt, CHUNK, &err) == ATS_EINVAL); /* only before the first round */
    t->runs++;
    t->copies += hs.copies;
    t->retired += hs.retired;
    t->bound_reads += hs.bound_reads;
    t->gathers += hs.gathers;
    free(logits);
    ex_rt_free(rt);
    if (!g_cuda) { /* the pin ledger: weights, KV cache and activation scratch pinned apart, all released */
        ex_device_host_stats ps = ex_device_host_get_stats(dev);
        CHECK_MSG((g_no_pin ? ps.pins == 0 && ps.pins_refused >= 3 : ps.pins >= 3) && ps.pin_overlaps == 0 &&
                      ps.unpin_unknown == 0 && ps.pins_live == 0,
                  "%s budget %llu: %lld pins, %lld overlapping, %lld unknown unpins, %lld still pinned", policy,
                  (unsigned long long)budget, (long long)ps.pins, (long long)ps.pin_overlaps,
                  (long long)ps.unpin_unknown, (long long)ps.pins_live);
    }
    free_dev(dev);
    return 1;
}

/* The device-side bytes a budget must cover besides weights: found with an ample budget. */
static uint64_t fixed_bytes(const ex_model *m, const ats_hw *hw)
{
    ex_device *dev = NULL;
    new_dev(&dev);
    ex_rt_cfg cfg = ex_rt_cfg_default();
    cfg.policy = "layer";
    cfg.vram_budget_bytes = 1ull << 34;
    cfg.hw = hw;
    cfg.prompt_tok = PROMPT;
    cfg.chunk_tok = CHUNK;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = 64;
    ex_rt *rt = NULL;
    ats_err err;
    uint64_t res = 0, tmp = 0, kv = 0, comp = 0;
    if (ex_rt_new(m, &so, dev, &cfg, &rt, &err) == ATS_OK) {
        ex_rt_layout(rt, &res, &tmp, &kv, &comp);
        /* resident = all weights + extras: the extras are what is above the weights */
        ex_rt_free(rt);
    }
    free_dev(dev);
    return comp + (res > m->weight_bytes ? res - m->weight_bytes : 0) + 4096;
}

static void test_budgets(const ats_hw *hw, ex_model *m, uint64_t *rng, totals *t);

static void test_model(const ats_hw *hw, int moe, ats_recipe recipe, uint64_t *rng, totals *t)
{
    ats_arch a;
    tu_tiny_arch(&a, moe, 64, "test_exec_plan");
    ex_model *m = NULL;
    ats_err err;
    uint64_t seed = tu_rand(rng);
    CHECK(ex_model_new_dummy(&a, recipe, seed, &m, &err) == ATS_OK);
    if (!m) return;
    test_budgets(hw, m, rng, t);
    ex_model_free(m);
}

/* Every policy at budgets of 0%, 50%, 90% and 105% of the weights + KV off the device (and each
 * layer boundary of a dense model). */
static void test_budgets(const ats_hw *hw, ex_model *m, uint64_t *rng, totals *t)
{
    const ats_arch a = m->arch;
    const int moe = a.n_expert > 0;
    ats_err err;
    int32_t prompt[PROMPT], gen[DECODE];
    for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)(tu_rand(rng) % (uint64_t)a.n_vocab);
    float *ref = cpu_reference(m, prompt, gen);
    CHECK(ref != NULL);
    const uint64_t fixed = fixed_bytes(m, hw);
    const uint64_t kv_all = 2ull * 64 * (uint64_t)(a.n_head_kv * a.head_dim) * 4 * (uint64_t)a.n_layer;
    const uint64_t all = m->weight_bytes + kv_all;
    uint64_t budgets[16];
    int nb = 0;
    const double frac[] = {0.0, 0.5, 0.9, 1.05};
    for (int f = 0; f < 4; f++) budgets[nb++] = fixed + (uint64_t)(frac[f] * (double)all) + (1u << 16);
    budgets[nb++] = fixed + all + (5u << 20); /* gpu-stream: KV caches in whole 1 MiB placement quanta */
    if (!moe) /* every layer boundary: l layers' weights + KV on the device */
        for (int l = 1; l < a.n_layer; l++) budgets[nb++] = fixed + (uint64_t)l * all / (uint64_t)a.n_layer + (1u << 16);
    const char *pols[] = {"layer", "layer-opoffload", "expert", "gpu-stream", "static", "static-opoffload", "ats-paper",
                          "ats"};
    for (size_t p = 0; p < sizeof pols / sizeof *pols; p++) {
        int ran = 0;
        if (!moe && !strcmp(pols[p], "expert")) continue; /* KTransformers' rule needs routed experts */
        for (int b = 0; b < nb; b++) ran += run_one(m, hw, pols[p], budgets[b], prompt, gen, ref, t);
        /* the same plans serialized (llama.cpp's path: every transfer after the op before its consumer) */
        g_serialized = 1;
        for (int b = 1; b < 3; b++) run_one(m, hw, pols[p], budgets[b], prompt, gen, ref, t);
        g_serialized = 0;
        g_warmup = 1; /* warm-up first: the same tokens and logits */
        for (int b = 1; b < 3; b++) run_one(m, hw, pols[p], budgets[b], prompt, gen, ref, t);
        g_warmup = 0;
        g_no_pin = 1; /* pins refused: the same tokens and logits from pageable memory, no crash */
        run_one(m, hw, pols[p], budgets[1], prompt, gen, ref, t);
        g_no_pin = 0;
        g_request = 1; /* placed for the request: ats's decode placement; after a warm-up its weights are
                          dropped at the first prefill (the ring overwritten) and uploaded again */
        for (int b = 0; b < 4; b++) run_one(m, hw, pols[p], budgets[b], prompt, gen, ref, t);
        g_warmup = 1;
        for (int b = 1; b < 3; b++) run_one(m, hw, pols[p], budgets[b], prompt, gen, ref, t);
        g_warmup = g_request = 0;
        CHECK_MSG(ran > 0, "policy %s never ran on %s", pols[p], a.name);
    }
    /* a budget below the compute buffers: refused with the numbers */
    {
        ex_device *dev = NULL;
        new_dev(&dev);
        ex_rt_cfg cfg = ex_rt_cfg_default();
        cfg.policy = "ats";
        cfg.vram_budget_bytes = 1u << 20;
        cfg.hw = hw;
        cfg.prompt_tok = PROMPT;
        cfg.chunk_tok = CHUNK;
        ex_rt *rt = NULL;
        CHECK(ex_rt_new(m, NULL, dev, &cfg, &rt, &err) == ATS_EINFEASIBLE);
        CHECK_MSG(strstr(err.msg, "GiB") != NULL, "%s", err.msg);
        free_dev(dev);
    }
    free(ref);
}

/* Negative control: a read of a retired slot is seen (bad read, NaN output). */
static void test_poison_seen(void)
{
    ex_device *d = NULL;
    CHECK(ex_device_host_new(&d) == ATS_OK);
    float w[64 * 4], x[64], y[4];
    for (int i = 0; i < 64 * 4; i++) w[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    ex_tensor t = {ATS_Q_F32, {64, 4, 1}, 64 * sizeof(float), w};
    void *slot = NULL;
    ats_err err;
    CHECK(d->alloc(d->ctx, sizeof w, &slot, &err) == ATS_OK);
    CHECK(d->h2d(d->ctx, slot, w, sizeof w, EX_DEV_TRANSFER, &err) == ATS_OK);
    const ex_backend *be = d->backend;
    be->bound_only(be->ctx, 1);
    CHECK(be->bind_weight(be->ctx, w, sizeof w, slot) == ATS_OK);
    CHECK(be->matmul(be->ctx, &t, x, 1, y) == ATS_OK);
    CHECK(ex_device_host_get_stats(d).bad_reads == 0);
    d->retire(d->ctx, slot, sizeof w, NULL);
    CHECK(be->matmul(be->ctx, &t, x, 1, y) == ATS_OK);
    CHECK(ex_device_host_get_stats(d).bad_reads == 1);
    CHECK(isnan(y[0]));
    CHECK(be->bind_weight(be->ctx, w, 0, NULL) == ATS_OK);
    CHECK(be->matmul(be->ctx, &t, x, 1, y) == ATS_EINVAL); /* unbound with bound_only */
    /* stream order: a copy over the slot after the read without waiting for the reader's event, and a
       read of the new copy without waiting for the copy's event, are both counted; with the events
       waited for, neither */
    CHECK(d->sync(d->ctx, EX_DEV_TRANSFER, &err) == ATS_OK && d->sync(d->ctx, EX_DEV_COMPUTE, &err) == ATS_OK);
    int64_t u0 = ex_device_host_get_stats(d).unwaited;
    CHECK(be->bind_weight(be->ctx, w, sizeof w, slot) == ATS_OK);
    CHECK(d->h2d(d->ctx, slot, w, sizeof w, EX_DEV_TRANSFER, &err) == ATS_OK); /* every reader waited for */
    CHECK(ex_device_host_get_stats(d).unwaited == u0);
    CHECK(be->matmul(be->ctx, &t, x, 1, y) == ATS_OK); /* reads a copy nobody waited for */
    CHECK(ex_device_host_get_stats(d).unwaited == u0 + 1);
    CHECK(d->h2d(d->ctx, slot, w, sizeof w, EX_DEV_TRANSFER, &err) == ATS_OK); /* overwrites an unwaited read */
    CHECK(ex_device_host_get_stats(d).unwaited == u0 + 2);
    void *ev_op = NULL, *ev_x = NULL;
    CHECK(d->event_new(d->ctx, &ev_op, &err) == ATS_OK && d->event_new(d->ctx, &ev_x, &err) == ATS_OK);
    CHECK(d->sync(d->ctx, EX_DEV_TRANSFER, &err) == ATS_OK && d->sync(d->ctx, EX_DEV_COMPUTE, &err) == ATS_OK);
    CHECK(d->h2d(d->ctx, slot, w, sizeof w, EX_DEV_TRANSFER, &err) == ATS_OK);
    CHECK(d->record(d->ctx, ev_x, EX_DEV_TRANSFER, &err) == ATS_OK);
    CHECK(d->wait(d->ctx, EX_DEV_COMPUTE, ev_x, &err) == ATS_OK);
    CHECK(be->matmul(be->ctx, &t, x, 1, y) == ATS_OK);
    CHECK(d->record(d->ctx, ev_op, EX_DEV_COMPUTE, &err) == ATS_OK);
    CHECK(d->wait(d->ctx, EX_DEV_TRANSFER, ev_op, &err) == ATS_OK);
    CHECK(d->h2d(d->ctx, slot, w, sizeof w, EX_DEV_TRANSFER, &err) == ATS_OK);
    CHECK(ex_device_host_get_stats(d).unwaited == u0 + 2);
    d->event_free(d->ctx, ev_op);
    d->event_free(d->ctx, ev_x);
    CHECK(be->bind_weight(be->ctx, w, 0, NULL) == ATS_OK);
    d->free_mem(d->ctx, slot);
    ex_device_host_free(d);
}

int main(void)
{
    uint64_t rng = tu_seed(g_cuda ? "test_cuda_plan" : "test_exec_plan");
    char path[1024];
    ats_hw hw;
    ats_err err;
    if (g_cuda) {
        ex_device *d = NULL;
        if (new_dev(&d) != ATS_OK) {
            fprintf(stderr, "test_cuda_plan: no CUDA device: skipped\n");
            return TU_SKIP;
        }
        free_dev(d);
    } else {
        test_poison_seen();
    }
    if (atsc_hw_load(tu_source_path(path, sizeof path, "sim/hw/rtx4090-desktop.json"), &hw, &err) != ATS_OK) {
        fprintf(stderr, "test_exec_plan: %s\n", err.msg);
        return 1;
    }
    totals t = {0};
    g_bound = g_cuda ? 1e-3 : 0.0;
    test_model(&hw, 0, ATS_RECIPE_F32, &rng, &t);
    g_bound = g_cuda ? 1e-1 : 0.0;
    test_model(&hw, 0, ATS_RECIPE_Q8_0, &rng, &t);
    { /* stories260K (llama, F32 GGUF from ../shared) */
        char sp[1024];
        ex_model *m = NULL;
        if (ex_model_load_gguf(tu_shared_path(sp, sizeof sp, "models/stories260K/stories260K.gguf"), &m, &err) == ATS_OK) {
            g_bound = g_cuda ? 1e-3 : 0.0;
            test_budgets(&hw, m, &rng, &t);
            ex_model_free(m);
        } else {
            CHECK_MSG(0, "stories260K: %s", err.msg);
        }
        g_bound = g_cuda ? 1e-1 : 0.0;
    }
    int64_t g0 = t.gathers;
    test_model(&hw, 1, ATS_RECIPE_Q8_0, &rng, &t);
    CHECK(g_cuda || t.gathers > g0); /* promoted routed experts moved compactly after their router */
    printf("test_exec_plan: %lld runs (%lld budgets refused), %lld rounds with promoted ops, %lld copies, %lld slots "
           "retired, %lld bound weight reads, %lld compact expert copies, %lld op runs off the plan, %lld runs with a "
           "decode placement\n",
           (long long)t.runs, (long long)t.refused, (long long)t.promoted_rounds, (long long)t.copies,
           (long long)t.retired, (long long)t.bound_reads, (long long)t.gathers, (long long)t.off_plan,
           (long long)t.dec_runs);
    CHECK(t.runs > 0);
    CHECK(t.dec_runs > 0); /* ats's decode placement ran (its extra weights uploaded, bound, dropped) */
    CHECK(g_cuda || t.retired > 0); /* the temp-slot path ran */
    CHECK(t.promoted_rounds > 0);
    return tu_finish(g_cuda ? "test_cuda_plan" : "test_exec_plan");
}
