/* Scheduling policies: the named table (ats/policy.h). Each policy is a static placement function
 * plus a per-round assignment function; plans are built the same way for all of them. */
#include "ats/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ats_policy {
    const ats_policy_ops *ops;
    ats_policy_cfg cfg;
    uint64_t temp_bytes; /* fixed at placement */
    int placed;
    ats_placement dec;   /* ats placed for a request with a prefill: the decode placement (n 0: none) */
    uint64_t dec_base;   /* where its ring starts in the temp region; the ring is [dec_base, temp_bytes) */
};

/* The ring a plan on placement p may use: the decode placement's own ring, else the whole. */
static uint64_t temp_of(const ats_policy *self, const ats_placement *p)
{
    if (self->dec.n && self->dec_base < self->temp_bytes && p && p->n == self->dec.n &&
        memcmp(p->backend, self->dec.backend, (size_t)p->n) == 0)
        return self->temp_bytes - self->dec_base;
    return self->temp_bytes;
}

ats_policy_cfg ats_policy_cfg_default(void)
{
    ats_policy_cfg c;
    memset(&c, 0, sizeof c);
    c.vram_budget_bytes = 0;
    c.temp_bytes = 0;
    c.quantum_bytes = 1u << 20;
    c.opoffload_min_tokens = 32;
    c.n_copy_engines = 1;
    c.hostmem_cpu_factor = 1.0;
    c.moe_partition = 1;
    c.promote_kv_prefill = 1;
    return c;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static int promotes(const ats_policy *pol)
{
    const char *n = pol->ops->name;
    return strcmp(n, "layer") != 0 && strcmp(n, "expert") != 0 && strcmp(n, "static") != 0;
}

/* Automatic temp capacity: max(2 × largest op that could move, M/8), capped at M/2. */
static uint64_t auto_temp(const ats_policy *pol, const ats_graph *g)
{
    uint64_t M = pol->cfg.vram_budget_bytes, big = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        if (op->kind == ATS_OP_EMBED || op->kind == ATS_OP_ATTN) continue;
        /* a fused expert group moves as one unit (ats_op_fused_head): its slot bytes together */
        uint64_t b = 0;
        for (int32_t j = i; j < g->n_ops && ats_op_fused_head(g, j) == ats_op_fused_head(g, i); j++)
            b += ats_op_slot_bytes(g, NULL, j);
        if (b > big) big = b;
    }
    uint64_t t = 2 * big;
    if (t < M / 8) t = M / 8;
    if (t > M / 2) t = M / 2;
    return t;
}

static enum ats_status check_place_inputs(const ats_policy *pol, const ats_graph *g,
                                          const ats_costs *nominal, const ats_placement *out,
                                          ats_err *err)
{
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "policy %s: empty graph (no ops)", pol->ops->name);
    if (!nominal || nominal->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "policy %s: costs have n = %d, graph has %d ops", pol->ops->name,
                           nominal ? (int)nominal->n : -1, (int)g->n_ops);
    if (!out || out->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "policy %s: placement has n = %d, graph has %d ops", pol->ops->name,
                           out ? (int)out->n : -1, (int)g->n_ops);
    return ats_costs_validate(nominal, err);
}

static void finish_placement(const ats_graph *g, const ats_costs *nominal, ats_placement *out)
{
    out->gpu_bytes = 0;
    double v = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        if (out->backend[i] == ATS_GPU) {
            out->gpu_bytes += ats_op_resident_bytes(&g->ops[i]);
            v += nominal->t_cpu[i] - nominal->t_gpu[i];
        }
        if (i > 0 && out->backend[i] != out->backend[i - 1]) v -= nominal->c[i];
    }
    out->objective_s = v;
}

/* ---- placements -------------------------------------------------------------------------- */

/* llama.cpp -ngl: output norm + head first, then whole layers from the last one down. */
static enum ats_status place_layer(ats_policy *self, const ats_graph *g, const ats_costs *nominal,
                                   ats_placement *out, ats_err *err)
{
    (void)err;
    uint64_t M = self->cfg.vram_budget_bytes - self->temp_bytes, used = 0;
    memset(out->backend, ATS_CPU, (size_t)g->n_ops);
    uint64_t outb = 0;
    for (int32_t i = 0; i < g->n_ops; i++)
        if (g->ops[i].layer < 0 && g->ops[i].kind != ATS_OP_EMBED) outb += ats_op_resident_bytes(&g->ops[i]);
    if (outb <= M) {
        for (int32_t i = 0; i < g->n_ops; i++)
            if (g->ops[i].layer < 0 && g->ops[i].kind != ATS_OP_EMBED) out->backend[i] = ATS_GPU;
        used = outb;
        for (int64_t l = g->arch.n_layer - 1; l >= 0; l--) {
            uint64_t lb = 0;
            for (int32_t i = 0; i < g->n_ops; i++)
                if (g->ops[i].layer == l) lb += ats_op_resident_bytes(&g->ops[i]);
            if (used + lb > M) break;
            used += lb;
            for (int32_t i = 0; i < g->n_ops; i++)
                if (g->ops[i].layer == l) out->backend[i] = ATS_GPU;
        }
    }
    finish_placement(g, nominal, out);
    return ATS_OK;
}

/* KTransformers: all non-expert ops except the embedding lookup on the GPU, routed experts CPU. */
static enum ats_status place_expert(ats_policy *self, const ats_graph *g, const ats_costs *nominal,
                                    ats_placement *out, ats_err *err)
{
    if (!ats_arch_is_moe(&g->arch))
        return ats_err_set(err, ATS_EINVAL, "policy expert: model %s is dense (needs routed experts)", g->arch.name);
    uint64_t M = self->cfg.vram_budget_bytes - self->temp_bytes, need = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        int gpu = op->kind != ATS_OP_EXPERTS && op->kind != ATS_OP_EMBED;
        out->backend[i] = gpu ? ATS_GPU : ATS_CPU;
        if (gpu) need += ats_op_resident_bytes(op);
    }
    if (need > M)
        return ats_err_set(err, ATS_EINFEASIBLE,
                           "policy expert: non-expert tensors + KV cache need %llu bytes, budget is %llu",
                           (unsigned long long)need, (unsigned long long)M);
    finish_placement(g, nominal, out);
    return ATS_OK;
}

/* FlexGen-style: residency by the placement DP on the transfer time saved (r = w, no switch
 * penalty: every op runs on the GPU); KV caches pinned to the GPU, embedding lookup on the CPU. */
static enum ats_status place_gpu_stream(ats_policy *self, const ats_graph *g, const ats_costs *nominal,
                                        ats_placement *out, ats_err *err)
{
    int32_t n = g->n_ops;
    uint64_t q = self->cfg.quantum_bytes, M = self->cfg.vram_budget_bytes - self->temp_bytes;
    uint64_t *su = malloc((size_t)n * sizeof *su);
    double *r = calloc((size_t)n, sizeof *r), *c = calloc((size_t)n, sizeof *c);
    uint8_t *fix = calloc((size_t)n, 1);
    enum ats_status st = ATS_OK;
    if (!su || !r || !c || !fix) {
        st = ats_err_set(err, ATS_ENOMEM, "policy gpu-stream: out of memory");
        goto done;
    }
    uint64_t fixed_q = 0; /* quanta of the ops fixed on the GPU, for the message */
    for (int32_t i = 0; i < n; i++) {
        uint64_t s = ats_op_resident_bytes(&g->ops[i]);
        su[i] = s / q + (s % q != 0);
        r[i] = nominal->w[i];
        if (g->ops[i].kind == ATS_OP_ATTN) fix[i] = ATS_FIX_GPU, fixed_q += su[i];
        if (g->ops[i].kind == ATS_OP_EMBED) fix[i] = ATS_FIX_CPU;
    }
    st = ats_place_dp(n, su, r, c, fix, M / q, out->backend, NULL, err);
    if (st == ATS_EINFEASIBLE) { /* the attention ops are fixed on the GPU: their KV caches in whole quanta */
        st = ats_err_set(err, ATS_EINFEASIBLE,
                         "policy gpu-stream: the attention ops' KV caches (%llu bytes; %llu in whole %llu-byte quanta) "
                         "do not fit the %llu bytes of the VRAM budget %llu left beside the %llu-byte temp ring",
                         (unsigned long long)g->kv_cache_bytes, (unsigned long long)(fixed_q * q), (unsigned long long)q,
                         (unsigned long long)M, (unsigned long long)self->cfg.vram_budget_bytes,
                         (unsigned long long)self->temp_bytes);
    }
    if (st) goto done;
    finish_placement(g, nominal, out);
done:
    free(su);
    free(r);
    free(c);
    free(fix);
    return st;
}

static enum ats_status place_static(ats_policy *self, const ats_graph *g, const ats_costs *nominal,
                                    ats_placement *out, ats_err *err)
{
    ats_placement_opts po = ats_placement_opts_default();
    po.quantum_bytes = self->cfg.quantum_bytes;
    po.moe_partition = self->cfg.moe_partition;
    uint64_t M = self->cfg.vram_budget_bytes - self->temp_bytes;
    if (M == 0) return ats_err_set(err, ATS_EINVAL, "policy %s: no residency budget left after the temp ring", self->ops->name);
    return ats_place_static(g, nominal, M, &po, out, err);
}

/* ---- assignments ------------------------------------------------------------------------- */

static enum ats_status assign_fixed(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                    const ats_costs *cur, const ats_round_ctx *ctx, ats_assignment *out,
                                    ats_err *err)
{
    (void)self;
    (void)g;
    (void)cur;
    (void)ctx;
    (void)err;
    ats_assignment_from_placement(out, p);
    return ATS_OK;
}

/* llama.cpp's op offload in large prefill rounds: matmul weights copied and run on the GPU;
 * serialized (llama.cpp) or overlapped (static-opoffload: the plan's transfers run on the copy
 * engine while the compute stream works, paper's "async coordination"). */
static enum ats_status opoffload(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                 const ats_round_ctx *ctx, int serialized, ats_assignment *out)
{
    ats_assignment_from_placement(out, p);
    if (g->phase.n_tokens < self->cfg.opoffload_min_tokens) return ATS_OK;
    const ats_routing *rt = ctx ? ctx->routing : NULL;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        if (p->backend[i] != ATS_CPU) continue;
        if (op->kind != ATS_OP_MATMUL && op->kind != ATS_OP_EXPERTS && op->kind != ATS_OP_SHEXP) continue;
        uint64_t b = ats_op_xfer_bytes(g, rt, i);
        if (b == 0 || b > temp_of(self, p)) continue;
        out->backend[i] = ATS_GPU;
        out->n_promoted++;
    }
    out->serialized = (uint8_t)serialized;
    return ATS_OK;
}

static enum ats_status assign_opoffload(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                        const ats_costs *cur, const ats_round_ctx *ctx,
                                        ats_assignment *out, ats_err *err)
{
    (void)cur;
    (void)err;
    return opoffload(self, g, p, ctx, 1, out);
}

static enum ats_status assign_static_opoffload(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                               const ats_costs *cur, const ats_round_ctx *ctx,
                                               ats_assignment *out, ats_err *err)
{
    (void)cur;
    (void)err;
    return opoffload(self, g, p, ctx, 0, out);
}

static enum ats_status assign_gpu_stream(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                         const ats_costs *cur, const ats_round_ctx *ctx,
                                         ats_assignment *out, ats_err *err)
{
    (void)cur;
    (void)err;
    ats_transfer_opts o = ats_transfer_opts_default();
    o.temp_bytes = temp_of(self, p);
    o.routing = ctx ? ctx->routing : NULL;
    ats_assignment_from_placement(out, p);
    for (int32_t i = 0; i < g->n_ops; i++)
        if (ats_op_promotable(g, p, &o, i)) {
            out->backend[i] = ATS_GPU;
            out->n_promoted++;
        }
    return ATS_OK;
}

static ats_transfer_opts transfer_opts(const ats_policy *self, const ats_placement *p, const ats_round_ctx *ctx)
{
    ats_transfer_opts o = ats_transfer_opts_default();
    o.temp_bytes = temp_of(self, p);
    o.hostmem_cpu_factor = self->cfg.hostmem_cpu_factor;
    o.prefetch_lead_s = ctx ? ctx->prefetch_lead_s : 0.0;
    o.routing = ctx ? ctx->routing : NULL;
    return o;
}

static enum ats_status assign_paper(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                    const ats_costs *cur, const ats_round_ctx *ctx, ats_assignment *out,
                                    ats_err *err)
{
    ats_transfer_opts o = transfer_opts(self, p, ctx);
    o.prefetch_lead_s = 0; /* model P has no prefetch */
    return ats_transfer_paper(g, p, cur, &o, out, err);
}

static enum ats_status assign_ats(ats_policy *self, const ats_graph *g, const ats_placement *p,
                                  const ats_costs *cur, const ats_round_ctx *ctx, ats_assignment *out,
                                  ats_err *err)
{
    ats_transfer_opts o = transfer_opts(self, p, ctx);
    /* prefill: attention may follow its KV cache to the GPU for the round (transfer.h promote_kv) */
    o.promote_kv = self->cfg.promote_kv_prefill && g->phase.kind == ATS_PHASE_PREFILL;
    return ats_transfer_ats(g, p, cur, &o, out, err);
}

/* ---- the table --------------------------------------------------------------------------- */

static const ats_policy_ops POLICIES[] = {
    {"layer", "llama.cpp -ngl: whole layers on the GPU (output head and last layers first)", 0, ATS_ACT_CE,
     place_layer, assign_fixed},
    {"layer-opoffload", "layer + llama.cpp's prefill op offload (>= 32 tokens), serialized", 0, ATS_ACT_CE,
     place_layer, assign_opoffload},
    {"expert", "KTransformers: non-expert tensors on the GPU, routed experts on the CPU", 0, ATS_ACT_SM,
     place_expert, assign_fixed},
    {"gpu-stream", "GPU-centric offload: every op on the GPU, non-resident weights streamed", 0, ATS_ACT_SM,
     place_gpu_stream, assign_gpu_stream},
    {"static", "ATS static tensor placement only (Algorithm 1)", 0, ATS_ACT_SM, place_static, assign_fixed},
    {"static-opoffload", "static placement + llama.cpp's prefill op offload, overlapped with compute", 0, ATS_ACT_SM,
     place_static, assign_static_opoffload},
    {"ats-paper", "static placement + the paper's dynamic transfer (Algorithm 2) + re-scheduling", 1, ATS_ACT_SM,
     place_static, assign_paper},
    {"ats", "static placement + copy-engine-aware dynamic transfer (model A) + re-scheduling", 1, ATS_ACT_SM,
     place_static, assign_ats},
};
#define N_POLICIES ((int)(sizeof POLICIES / sizeof POLICIES[0]))

enum ats_status ats_policy_find(const char *name, const ats_policy_ops **out)
{
    if (!name) return ATS_ENOTFOUND;
    for (int i = 0; i < N_POLICIES; i++)
        if (strcmp(name, POLICIES[i].name) == 0) {
            *out = &POLICIES[i];
            return ATS_OK;
        }
    return ATS_ENOTFOUND;
}

const char *ats_policy_names(void) { return "layer, layer-opoffload, expert, gpu-stream, static, static-opoffload, ats-paper, ats"; }

enum ats_status ats_policy_new(const char *name, const ats_policy_cfg *cfg, ats_policy **out, ats_err *err)
{
    const ats_policy_ops *ops = NULL;
    if (ats_policy_find(name, &ops) != ATS_OK)
        return ats_err_set(err, ATS_ENOTFOUND, "unknown policy '%s' (known: %s)", name ? name : "(null)",
                           ats_policy_names());
    ats_policy_cfg c = cfg ? *cfg : ats_policy_cfg_default();
    if (c.vram_budget_bytes == 0)
        return ats_err_set(err, ATS_EINVAL, "policy %s: VRAM budget 0 bytes (must be > 0)", name);
    if (c.quantum_bytes == 0) return ats_err_set(err, ATS_EINVAL, "policy %s: quantum 0 bytes (must be > 0)", name);
    if (c.temp_bytes >= c.vram_budget_bytes)
        return ats_err_set(err, ATS_EINVAL, "policy %s: temp ring %llu bytes >= VRAM budget %llu", name,
                           (unsigned long long)c.temp_bytes, (unsigned long long)c.vram_budget_bytes);
    if (!(c.hostmem_cpu_factor > 0 && c.hostmem_cpu_factor <= 1))
        return ats_err_set(err, ATS_EINVAL, "policy %s: hostmem_cpu_factor %g (must be in (0, 1])", name,
                           c.hostmem_cpu_factor);
    if (c.n_copy_engines < 1 || c.n_copy_engines > 64)
        return ats_err_set(err, ATS_EINVAL, "policy %s: n_copy_engines %d (must be in 1..64)", name, c.n_copy_engines);
    if (c.opoffload_min_tokens < 1)
        return ats_err_set(err, ATS_EINVAL, "policy %s: opoffload_min_tokens %lld (must be >= 1)", name,
                           (long long)c.opoffload_min_tokens);
    ats_policy *p = calloc(1, sizeof *p);
    if (!p) return ats_err_set(err, ATS_ENOMEM, "policy %s: out of memory", name);
    p->ops = ops;
    p->cfg = c;
    *out = p;
    return ATS_OK;
}

void ats_policy_free(ats_policy *pol)
{
    if (!pol) return;
    ats_placement_free(&pol->dec);
    free(pol);
}
const ats_policy_ops *ats_policy_get_ops(const ats_policy *pol) { return pol->ops; }
const ats_policy_cfg *ats_policy_get_cfg(const ats_policy *pol) { return &pol->cfg; }
uint64_t ats_policy_temp_bytes(const ats_policy *pol) { return pol->placed ? pol->temp_bytes : 0; }

const ats_placement *ats_policy_decode_placement(const ats_policy *pol, uint64_t *ring_base)
{
    if (ring_base) *ring_base = pol->placed && pol->dec.n ? pol->dec_base : 0;
    return pol->placed && pol->dec.n ? &pol->dec : NULL;
}

/* Fused groups in an assignment: a group runs on one backend. Where the solver split one (it prices
 * ops one by one), the group runs on the GPU when the solver promoted some of it, the whole group's
 * GPU time and transfers (Σ t_gpu + w, in series: a routed-expert group's copies wait for its
 * router, right before it) are below its CPU time (Σ t_cpu; with no costs at all, when most of its
 * ops were promoted) and its transfers fit one temp slot together (the plan moves them before the
 * group's first op); else on the CPU. A resident group stays on the GPU. The rule policies (op
 * offload, gpu-stream: promoted by rule, not by cost) keep a vote by count. By the group's totals, not a
 * vote of its ops: a measured profile times a fused group as one op, its head (Qwen3-30B-A3B experts
 * at 512 tokens on the H200 host: gate 33 ms, up 0, down 1.0 ms on the CPU), so the solver promoted
 * the head alone; a vote by count sent every group back to the CPU in prefill (626 tok/s simulated
 * where streaming gives ~2400), a vote by CPU time promoted the groups in decode too, where moving
 * the 8 chosen experts (0.43 ms) is no faster than the CPU (0.44 ms): decode 62 -> 43 tok/s on the
 * executor. By the totals: prefill 2502, decode 61.9 tok/s on the executor (`ats bench model`, from
 * --hw h200-host; simulated 2361 / 61.3 with the profile of then). */
static void fuse_assignment(const ats_policy *pol, const ats_graph *g, const ats_placement *p,
                            const ats_round_ctx *ctx, const ats_costs *c, ats_assignment *a)
{
    const uint64_t room = strcmp(pol->ops->name, "ats") == 0 ? temp_of(pol, p) / 2 : temp_of(pol, p);
    int changed = 0, moved = 0;
    for (int32_t h = 0; h < g->n_ops; h++) {
        int32_t last = h, n_gpu = 0, n_res = 0;
        uint64_t bytes = 0;
        double t_cpu = 0.0, t_dev = 0.0; /* the group on the CPU; on the GPU with its transfers */
        while (last + 1 < g->n_ops && ats_op_fused_head(g, last + 1) == h) last++;
        if (last == h) continue;
        for (int32_t j = h; j <= last; j++) {
            n_gpu += a->backend[j] == ATS_GPU;
            n_res += p->backend[j] == ATS_GPU;
            if (p->backend[j] == ATS_CPU) bytes += ats_op_slot_bytes(g, ctx ? ctx->routing : NULL, j);
            t_cpu += c->t_cpu[j];
            t_dev += c->t_gpu[j] + (p->backend[j] == ATS_CPU ? c->w[j] : 0.0);
        }
        const int32_t m = last - h + 1;
        if (n_res > 0) continue; /* resident whole (fuse_placement): already on the GPU */
        const int most = pol->ops->dynamic && t_cpu + t_dev > 0.0 ? n_gpu > 0 && t_dev < t_cpu : 2 * n_gpu > m;
        uint8_t to = most && bytes <= room ? ATS_GPU : ATS_CPU;
        moved |= to == ATS_GPU;
        if (n_gpu == (to == ATS_GPU ? m : 0)) continue;
        for (int32_t j = h; j <= last; j++) a->backend[j] = to;
        changed = 1;
    }
    /* a group moved as one unit is not what the solver priced (each transfer alone): its
       prediction no longer holds; ats_plan_predict on the plan gives the round's */
    if (moved) a->predicted_s = NAN;
    if (!changed) return;
    a->n_promoted = 0;
    for (int32_t i = 0; i < g->n_ops; i++) a->n_promoted += p->backend[i] == ATS_CPU && a->backend[i] == ATS_GPU;
    a->predicted_s = NAN;
}

/* Dynamic policies with an automatic temp ring: try 0, 2 × the largest movable op, M/16, M/8 and
 * M/4, and for a request with a prefill 2 × the largest movable unit of the prefill round (a routed
 * expert group holds every expert there: Mixtral-8x7B's ~0.8 GB a layer, beyond half of M/4 at 4 GiB,
 * so without it ats could not stream a prefill expert group where ats-paper, which moves experts one
 * by one, did: TTFT 2.50 s against 0.50); keep the one whose placement + assignment predicts the
 * lowest latency for graph g under the nominal costs, or for the request (residency and promotion
 * space trade off; 0 degenerates to `static`). */
static enum ats_status round_latency(ats_policy *pol, const ats_graph *g, const ats_costs *c, const ats_placement *p,
                                     ats_assignment *a, ats_plan *plan, double *lat, ats_err *err)
{
    enum ats_status st = pol->ops->assign(pol, g, p, c, NULL, a, err);
    if (st) return st;
    fuse_assignment(pol, g, p, NULL, c, a);
    if ((st = ats_policy_plan(pol, g, p, a, c, NULL, plan, err))) return st;
    ats_predict_opts po = ats_policy_predict_opts(pol, NULL);
    return ats_plan_predict(plan, c, &po, lat, NULL, err);
}

/* `ats` placed for a request with a prefill: a decode round streams far less than a prefill chunk,
 * so part of the temp ring can hold weights from the first decode round to the next prefill. For
 * decode rings T_d in {T/8, T/4, T/2} (T the ring, base = T - T_d rounded down to 4 KiB), the
 * decode placement ats_place_extend(p, base) with the ring [base, T); the one with the lowest
 * predicted decode round of g under the nominal costs, plus its upload (the extra weights' transfer
 * times, once per request of n_dec decode rounds) spread over the rounds, is kept in pol->dec when
 * it beats p with the whole ring (*lat: p's decode round in, the kept one's out, without the
 * upload). Never a ring of 0: a decode round keeps room to stream when load slows the CPU (`ats sim
 * --hw sim/hw/h200-host-profile-qwen3-30b-a3b.json --model qwen3-30b-a3b --policy ats --vram-budget
 * 9.5GiB --prompt 512 --gen 256 --requests 1 --trace h200-cpu-compile`: TPOT p99 36.2 ms with a decode
 * ring of 0, 16.5 with T/8). Why: on Qwen3-30B-A3B at 9.5 GiB (h200 profile) the prefill
 * ring kept 27 of 48 layers' experts on the CPU in decode, where `static`, without a ring, keeps 24:
 * `ats` decode 67.9 tok/s, `static` 72.9 (`ats run`, 64 steps after a 512-token prompt). */
static enum ats_status decode_extension(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                        const ats_placement *p, double n_dec, double *lat, ats_err *err)
{
    ats_placement_free(&pol->dec);
    pol->dec_base = 0;
    const uint64_t T = pol->temp_bytes;
    if (strcmp(pol->ops->name, "ats") != 0 || T == 0) return ATS_OK;
    uint64_t cand[3] = {T / 8, T / 4, T / 2};
    ats_placement ext, best;
    ats_assignment a;
    ats_plan plan;
    ats_plan_init(&plan);
    memset(&best, 0, sizeof best);
    enum ats_status st = ats_placement_init(&ext, g->n_ops);
    if (!st) st = ats_placement_init(&best, g->n_ops);
    if (!st && ats_assignment_init(&a, g->n_ops)) st = ATS_ENOMEM;
    if (st) {
        ats_placement_free(&ext);
        ats_placement_free(&best);
        return ats_err_set(err, ATS_ENOMEM, "policy: out of memory");
    }
    ats_placement_opts po = ats_placement_opts_default();
    po.quantum_bytes = pol->cfg.quantum_bytes;
    double best_lat = *lat, best_total = *lat;
    uint64_t best_base = 0;
    for (int k = 0; k < 3 && !st; k++) {
        if (cand[k] >= T) continue;
        const uint64_t base = (T - cand[k]) & ~(uint64_t)4095;
        int dup = base == 0;
        for (int q = 0; q < k; q++) dup |= cand[q] < T && ((T - cand[q]) & ~(uint64_t)4095) == base;
        if (dup) continue;
        if ((st = ats_place_extend(g, nominal, p, base, &po, &ext, err))) break;
        if (ext.gpu_bytes == p->gpu_bytes) continue; /* nothing more fits: p itself with a smaller ring */
        /* evaluate with ext as the decode placement (temp_of gives its ring) */
        if (!pol->dec.n && (st = ats_placement_init(&pol->dec, g->n_ops))) break;
        ats_placement_copy(&pol->dec, &ext);
        pol->dec_base = base;
        double l = INFINITY;
        if ((st = round_latency(pol, g, nominal, &ext, &a, &plan, &l, err))) break;
        double up = 0.0; /* every expert of a routed-expert tensor moves (w: the chosen ones) */
        for (int32_t i = 0; i < g->n_ops; i++)
            if (ext.backend[i] == ATS_GPU && p->backend[i] != ATS_GPU)
                up += g->ops[i].kind == ATS_OP_EXPERTS ? nominal->w_expert[i] * (double)g->arch.n_expert : nominal->w[i];
        if (l + up / n_dec < best_total) {
            best_total = l + up / n_dec;
            best_lat = l;
            best_base = base;
            ats_placement_copy(&best, &ext);
        }
    }
    if (!st && best_base > 0) {
        ats_placement_copy(&pol->dec, &best);
        pol->dec_base = best_base;
        *lat = best_lat;
    } else {
        ats_placement_free(&pol->dec);
        pol->dec_base = 0;
    }
    ats_placement_free(&ext);
    ats_placement_free(&best);
    ats_assignment_free(&a);
    ats_plan_free(&plan);
    return st;
}

static enum ats_status choose_temp(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                   const ats_request_shape *req, ats_placement *scratch, ats_err *err)
{
    const int with_pre = req && req->g_prefill && req->n_prefill > 0;
    uint64_t M = pol->cfg.vram_budget_bytes, big = auto_temp(pol, g);
    uint64_t cand[6] = {0, big, M / 16, M / 8, M / 4, with_pre ? auto_temp(pol, req->g_prefill) : 0};
    ats_assignment a;
    ats_plan plan;
    ats_plan_init(&plan);
    if (ats_assignment_init(&a, g->n_ops)) return ats_err_set(err, ATS_ENOMEM, "policy: out of memory");
    double best = INFINITY;
    uint64_t best_t = pol->temp_bytes;
    enum ats_status st = ATS_OK;
    pol->placed = 1;
    for (int k = 0; k < 6; k++) {
        uint64_t t = cand[k];
        if (t >= M || (k > 0 && t == 0)) continue;
        int dup = 0;
        for (int q = 0; q < k; q++) dup |= cand[q] == t;
        if (dup) continue;
        pol->temp_bytes = t;
        ats_placement_free(&pol->dec); /* the previous candidate's decode placement */
        pol->dec_base = 0;
        st = pol->ops->place(pol, g, nominal, scratch, err);
        if (st == ATS_EINFEASIBLE) continue;
        if (st) break;
        ats_placement_fuse_groups(g, nominal, scratch);
        double lat, lat_pre = 0.0;
        if ((st = round_latency(pol, g, nominal, scratch, &a, &plan, &lat, err))) break;
        if (with_pre) { /* the request: its prefill rounds under the same placement and ring, its decode
                           rounds on the decode placement where one beats it */
            if (req->n_decode > 0 && (st = decode_extension(pol, g, nominal, scratch, req->n_decode, &lat, err))) break;
            if ((st = round_latency(pol, req->g_prefill, req->c_prefill, scratch, &a, &plan, &lat_pre, err))) break;
            lat = req->n_decode * lat + req->n_prefill * lat_pre;
        }
        if (lat < best) {
            best = lat;
            best_t = t;
        }
    }
    pol->placed = 0;
    pol->temp_bytes = best_t;
    ats_placement_free(&pol->dec);
    pol->dec_base = 0;
    ats_plan_free(&plan);
    ats_assignment_free(&a);
    return st;
}

/* Predicted latency [s] of round g under placement p and the policy's own assignment (nominal
 * costs, no prefetch lead). Needs pol->placed (temp fixed). */
static enum ats_status predict_placement(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                         const ats_placement *p, double *lat, ats_err *err)
{
    ats_assignment a;
    ats_plan plan;
    ats_plan_init(&plan);
    if (ats_assignment_init(&a, g->n_ops)) return ats_err_set(err, ATS_ENOMEM, "policy: out of memory");
    enum ats_status st = pol->ops->assign(pol, g, p, nominal, NULL, &a, err);
    if (!st) fuse_assignment(pol, g, p, NULL, nominal, &a);
    if (!st) st = ats_policy_plan(pol, g, p, &a, nominal, NULL, &plan, err);
    if (!st) {
        ats_predict_opts po = ats_policy_predict_opts(pol, NULL);
        st = ats_plan_predict(&plan, nominal, &po, lat, NULL, err);
    }
    ats_plan_free(&plan);
    ats_assignment_free(&a);
    return st;
}

/* Dynamic policies on Algorithm 1's placement: also try making every CPU-resident op smaller than
 * one DP quantum resident (norm weights: 20 KiB each for Qwen3-14B; the DP charges them a whole
 * quantum), in op order while the real bytes fit, and keep it when the policy's own model predicts
 * a faster round of g. Algorithm 1's objective assumes a CPU-resident op's neighbours run on the CPU,
 * but dynamic transfer promotes them, and then a CPU norm between two promoted ops costs two
 * activation switches per round. Measured on rtx3060-laptop, Qwen3-14B, 5.1 GiB (ats): decode
 * predicted 122.34 -> 122.07 ms, and a prefill chunk 749 -> 715 ms. */
static enum ats_status resident_small_ops(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                          ats_placement *out, ats_err *err)
{
    uint64_t q = pol->cfg.quantum_bytes, M = pol->cfg.vram_budget_bytes - pol->temp_bytes;
    ats_placement cand;
    if (ats_placement_init(&cand, g->n_ops)) return ats_err_set(err, ATS_ENOMEM, "policy: out of memory");
    ats_placement_copy(&cand, out);
    int added = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        uint64_t b = ats_op_resident_bytes(op);
        if (cand.backend[i] != ATS_CPU || op->kind == ATS_OP_EMBED || b == 0 || b > q) continue;
        if (cand.gpu_bytes + b > M) break;
        cand.backend[i] = ATS_GPU;
        cand.gpu_bytes += b;
        added++;
    }
    enum ats_status st = ATS_OK;
    if (added) {
        double l0 = INFINITY, l1 = INFINITY;
        pol->placed = 1;
        st = predict_placement(pol, g, nominal, out, &l0, err);
        if (!st) st = predict_placement(pol, g, nominal, &cand, &l1, err);
        pol->placed = 0;
        if (!st && l1 < l0) {
            finish_placement(g, nominal, &cand);
            ats_placement_copy(out, &cand);
        }
    }
    ats_placement_free(&cand);
    return st;
}

enum ats_status ats_policy_place(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                 ats_placement *out, ats_err *err)
{
    return ats_policy_place_request(pol, g, nominal, NULL, out, err);
}

enum ats_status ats_policy_place_request(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                         const ats_request_shape *req, ats_placement *out, ats_err *err)
{
    enum ats_status st = check_place_inputs(pol, g, nominal, out, err);
    if (st) return st;
    if (req && req->g_prefill) {
        if (req->g_prefill->n_ops != g->n_ops || !req->c_prefill || req->c_prefill->n != g->n_ops)
            return ats_err_set(err, ATS_EINVAL, "policy %s: the request's prefill graph has %d ops (costs %d), decode %d",
                               pol->ops->name, (int)req->g_prefill->n_ops, req->c_prefill ? (int)req->c_prefill->n : -1,
                               (int)g->n_ops);
        if (!(req->n_prefill >= 0) || !(req->n_decode >= 0))
            return ats_err_set(err, ATS_EINVAL, "policy %s: request of %g prefill and %g decode rounds", pol->ops->name,
                               req->n_prefill, req->n_decode);
        if ((st = ats_costs_validate(req->c_prefill, err))) return st;
    }
    pol->temp_bytes = 0;
    ats_placement_free(&pol->dec);
    pol->dec_base = 0;
    if (promotes(pol)) pol->temp_bytes = pol->cfg.temp_bytes ? pol->cfg.temp_bytes : auto_temp(pol, g);
    if ((strcmp(pol->ops->name, "layer-opoffload") == 0 || strcmp(pol->ops->name, "static-opoffload") == 0) &&
        pol->cfg.temp_bytes == 0) {
        /* llama.cpp copies one whole weight at a time into its compute buffer */
        uint64_t big = 0, M = pol->cfg.vram_budget_bytes;
        for (int32_t i = 0; i < g->n_ops; i++) {
            ats_op_kind k = g->ops[i].kind;
            if ((k == ATS_OP_MATMUL || k == ATS_OP_EXPERTS || k == ATS_OP_SHEXP) && g->ops[i].weight_bytes > big)
                big = g->ops[i].weight_bytes;
        }
        pol->temp_bytes = big < M / 2 ? big : M / 2;
    }
    if (pol->ops->dynamic && pol->cfg.temp_bytes == 0) {
        st = choose_temp(pol, g, nominal, req, out, err);
        if (st) return st;
    }
    st = pol->ops->place(pol, g, nominal, out, err);
    if (st) return st;
    ats_placement_fuse_groups(g, nominal, out);
    if (pol->ops->dynamic && pol->ops->place == place_static) {
        st = resident_small_ops(pol, g, nominal, out, err);
        if (st) return st;
        ats_placement_fuse_groups(g, nominal, out);
    }
    ATS_ASSERT(out->gpu_bytes + pol->temp_bytes <= pol->cfg.vram_budget_bytes);
    pol->placed = 1;
    if (pol->ops->dynamic && pol->cfg.temp_bytes == 0 && req && req->g_prefill && req->n_prefill > 0 &&
        req->n_decode > 0) {
        double lat = INFINITY;
        if ((st = predict_placement(pol, g, nominal, out, &lat, err))) return st;
        if ((st = decode_extension(pol, g, nominal, out, req->n_decode, &lat, err))) return st;
    }
    return ATS_OK;
}

enum ats_status ats_policy_assign(ats_policy *pol, const ats_graph *g, const ats_placement *p,
                                  const ats_costs *cur, const ats_round_ctx *ctx, ats_assignment *out,
                                  ats_err *err)
{
    if (!pol->placed) return ats_err_set(err, ATS_EINVAL, "policy %s: assign before place", pol->ops->name);
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "policy %s: empty graph (no ops)", pol->ops->name);
    if (!p || p->n != g->n_ops || !cur || cur->n != g->n_ops || !out || out->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "policy %s: placement/costs/assignment size mismatch with %d ops",
                           pol->ops->name, (int)g->n_ops);
    enum ats_status st = ats_costs_validate(cur, err);
    if (st) return st;
    st = pol->ops->assign(pol, g, p, cur, ctx, out, err);
    if (st == ATS_OK) fuse_assignment(pol, g, p, ctx, cur, out);
    return st;
}

enum ats_status ats_policy_plan(ats_policy *pol, const ats_graph *g, const ats_placement *p,
                                const ats_assignment *a, const ats_costs *cur, const ats_round_ctx *ctx,
                                ats_plan *out, ats_err *err)
{
    ats_plan_opts o = ats_plan_opts_default();
    o.temp_bytes = temp_of(pol, p);
    int is_ats = strcmp(pol->ops->name, "ats") == 0;
    o.n_copy_engines = is_ats || strcmp(pol->ops->name, "ats-paper") == 0 ? 1 : pol->cfg.n_copy_engines;
    o.act_path = pol->ops->act_path;
    o.prefetch_lead_s = (is_ats && ctx && !a->serialized) ? ctx->prefetch_lead_s : 0.0;
    o.routing = ctx ? ctx->routing : NULL;
    o.double_buffer = is_ats;
    o.fused_groups = 1;
    return ats_plan_build(g, p, a, cur, &o, out, err);
}

ats_predict_opts ats_policy_predict_opts(const ats_policy *pol, const ats_round_ctx *ctx)
{
    ats_predict_opts o = ats_predict_opts_default();
    o.hostmem_cpu_factor = pol->cfg.hostmem_cpu_factor;
    int is_ats = strcmp(pol->ops->name, "ats") == 0;
    o.prefetch_lead_s = (is_ats && ctx) ? ctx->prefetch_lead_s : 0.0;
    return o;
}
