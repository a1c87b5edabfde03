/*
 * test_policy — the policy table: lookup and bad names/configs; every policy on real dense and MoE
 * graphs in decode and prefill keeps resident + temp within the VRAM budget, builds a plan that
 * predicts a finite latency; the baselines' defining properties (layer: output head then last
 * layers, whole layers; expert: experts on the CPU; gpu-stream: every op on the GPU;
 * layer-opoffload: serialized promotion in large prefill rounds only; static-opoffload: the same
 * promotions, overlapped, on the static placement); ats in long prefill chunks: attention follows
 * its KV cache to the GPU and the round gets faster than without (promote_kv_prefill = 0), decode
 * assignments unchanged by it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ats/policy.h"
#include "sched_fix.h"
#include "testutil.h"

#define GIB (1024ull * 1024ull * 1024ull)

static const char *NAMES[] = {"layer",  "layer-opoffload",  "expert",   "gpu-stream",
                              "static", "static-opoffload", "ats-paper", "ats"};
#define N_NAMES 8

static void test_lookup(void)
{
    for (int i = 0; i < N_NAMES; i++) {
        const ats_policy_ops *ops = NULL;
        CHECK(ats_policy_find(NAMES[i], &ops) == ATS_OK);
        CHECK(ops && strcmp(ops->name, NAMES[i]) == 0);
        CHECK(strstr(ats_policy_names(), NAMES[i]) != NULL);
    }
    const ats_policy_ops *ops = NULL;
    CHECK(ats_policy_find("nope", &ops) == ATS_ENOTFOUND && ops == NULL);
    ats_policy *p = NULL;
    ats_err err;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = 4 * GIB;
    CHECK(ats_policy_new("llama", &cfg, &p, &err) == ATS_ENOTFOUND);
    CHECK_MSG(strstr(err.msg, "llama") && strstr(err.msg, "gpu-stream"), "%s", err.msg);
    cfg.vram_budget_bytes = 0;
    CHECK(ats_policy_new("ats", &cfg, &p, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "budget") != NULL, "%s", err.msg);
    cfg.vram_budget_bytes = 4 * GIB;
    cfg.hostmem_cpu_factor = NAN;
    CHECK(ats_policy_new("ats", &cfg, &p, &err) == ATS_EINVAL);
}

static void run_policy(const char *pname, const char *model, uint64_t budget, const ats_hw *hw)
{
    ats_graph *gd = fx_model_graph(model, ATS_PHASE_DECODE, 1, 2047);
    ats_graph *gp = fx_model_graph(model, ATS_PHASE_PREFILL, 512, 0);
    if (!gd || !gp) return;
    int32_t n = gd->n_ops;
    CHECK(gp->n_ops == n);
    ats_costs cd, cp;
    ats_placement pl;
    ats_assignment a;
    ats_plan plan;
    ats_plan_init(&plan);
    ats_err err;
    CHECK(ats_costs_init(&cd, n) == 0 && ats_costs_init(&cp, n) == 0 && ats_placement_init(&pl, n) == 0 &&
          ats_assignment_init(&a, n) == 0);
    CHECK(ats_costs_from_model(gd, hw, &cd, &err) == ATS_OK && ats_costs_from_model(gp, hw, &cp, &err) == ATS_OK);
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = budget;
    cfg.hostmem_cpu_factor = hw->hostmem_cpu_factor;
    ats_policy *pol = NULL;
    CHECK(ats_policy_new(pname, &cfg, &pol, &err) == ATS_OK);
    enum ats_status st = ats_policy_place(pol, gd, &cd, &pl, &err);
    int moe = ats_arch_is_moe(&gd->arch);
    if (strcmp(pname, "expert") == 0 && !moe) {
        CHECK_MSG(st == ATS_EINVAL, "expert on dense %s gave %d", model, st);
        goto done;
    }
    if (st == ATS_EINFEASIBLE) { /* allowed for expert / gpu-stream at small budgets; say so */
        printf("  %s %s %.0f GiB: infeasible (%s)\n", pname, model, (double)budget / GIB, err.msg);
        CHECK(strcmp(pname, "expert") == 0 || strcmp(pname, "gpu-stream") == 0);
        goto done;
    }
    CHECK_MSG(st == ATS_OK, "%s %s: %s", pname, model, err.msg);
    if (st) goto done;
    CHECK_MSG(pl.gpu_bytes + ats_policy_temp_bytes(pol) <= budget, "%s: resident %llu + temp %llu > budget %llu", pname,
              (unsigned long long)pl.gpu_bytes, (unsigned long long)ats_policy_temp_bytes(pol), (unsigned long long)budget);
    if (strcmp(pname, "ats") == 0 || strcmp(pname, "ats-paper") == 0) {
        /* the policy's placement (Algorithm 1, then sub-quantum ops resident when its model predicts
           a faster decode round) is never predicted slower than Algorithm 1's alone, same temp ring */
        ats_placement p1;
        CHECK(ats_placement_init(&p1, n) == 0);
        ats_placement_opts po1 = ats_placement_opts_default();
        po1.moe_partition = cfg.moe_partition;
        CHECK(ats_place_static(gd, &cd, budget - ats_policy_temp_bytes(pol), &po1, &p1, &err) == ATS_OK);
        ats_placement_fuse_groups(gd, &cd, &p1); /* as the policy does: a fused expert group resident whole or not */
        double lat[2];
        const ats_placement *pp[2] = {&pl, &p1};
        for (int v = 0; v < 2; v++) {
            ats_round_ctx c0 = ats_round_ctx_default();
            CHECK(ats_policy_assign(pol, gd, pp[v], &cd, &c0, &a, &err) == ATS_OK);
            CHECK(ats_policy_plan(pol, gd, pp[v], &a, &cd, &c0, &plan, &err) == ATS_OK);
            ats_predict_opts po = ats_policy_predict_opts(pol, &c0);
            CHECK(ats_plan_predict(&plan, &cd, &po, &lat[v], NULL, &err) == ATS_OK);
        }
        int moved = 0;
        for (int32_t i = 0; i < n; i++) {
            moved += pl.backend[i] != p1.backend[i];
            if (pl.backend[i] != p1.backend[i])
                CHECK_MSG(p1.backend[i] == ATS_CPU && ats_op_resident_bytes(&gd->ops[i]) <= cfg.quantum_bytes,
                          "%s op %s moved from %d", pname, gd->ops[i].name, p1.backend[i]);
        }
        CHECK_MSG(lat[0] <= lat[1] * (1 + 1e-12), "%s %s: placement predicts %.6f ms, Algorithm 1 alone %.6f ms", pname,
                  model, lat[0] * 1e3, lat[1] * 1e3);
        printf("  %-16s %-14s %2.0f GiB decode: Algorithm 1 %.3f ms, + %d small ops resident %.3f ms\n", pname, model,
               (double)budget / GIB, lat[1] * 1e3, moved, lat[0] * 1e3);
        ats_placement_free(&p1);
    }
    for (int ph = 0; ph < 2; ph++) {
        const ats_graph *g = ph ? gp : gd;
        const ats_costs *c = ph ? &cp : &cd;
        ats_round_ctx ctx = ats_round_ctx_default();
        if (!ph) ctx.prefetch_lead_s = 1e-3;
        CHECK_MSG(ats_policy_assign(pol, g, &pl, c, &ctx, &a, &err) == ATS_OK, "%s: %s", pname, err.msg);
        CHECK_MSG(ats_policy_plan(pol, g, &pl, &a, c, &ctx, &plan, &err) == ATS_OK, "%s: %s", pname, err.msg);
        ats_predict_opts po = ats_policy_predict_opts(pol, &ctx);
        double lat = NAN;
        CHECK(ats_plan_predict(&plan, c, &po, &lat, NULL, &err) == ATS_OK);
        CHECK(isfinite(lat) && lat > 0);
        CHECK(plan.resident_bytes == pl.gpu_bytes);
        CHECK(plan.peak_temp_bytes <= ats_policy_temp_bytes(pol));
        /* the DP's own prediction, unless a fused expert group moves as one unit (the DP prices
           each transfer alone; ats_policy_assign then leaves it NaN) */
        if (strcmp(pname, "ats") == 0) {
            int group_moved = 0;
            for (int32_t i = 0; i < n; i++)
                group_moved |= ats_op_fused_head(g, i) != i && pl.backend[i] == ATS_CPU && a.backend[i] == ATS_GPU;
            CHECK(group_moved == isnan(a.predicted_s));
            if (!group_moved) CHECK_REL(lat, a.predicted_s, 1e-9, 0);
        }
        printf("  %-16s %-14s %2.0f GiB %-7s resident %6.2f GiB temp %5.2f GiB promoted %3d  predicted %9.3f ms\n", pname,
               model, (double)budget / GIB, ph ? "prefill" : "decode", (double)pl.gpu_bytes / GIB,
               (double)ats_policy_temp_bytes(pol) / GIB, a.n_promoted, lat * 1e3);
        /* defining properties */
        if (strcmp(pname, "layer-opoffload") == 0 || strcmp(pname, "static-opoffload") == 0) {
            int llama = strcmp(pname, "layer-opoffload") == 0;
            CHECK(a.serialized == (llama ? ph : 0));
            int cpu_mm = 0;
            /* exactly the CPU-resident matmul-like ops that fit the ring move, nothing else */
            for (int32_t i = 0; i < n && ph; i++) {
                ats_op_kind k = g->ops[i].kind;
                int mm = k == ATS_OP_MATMUL || k == ATS_OP_EXPERTS || k == ATS_OP_SHEXP;
                /* a fused expert group (ats_op_fused_head) moves whole: its slot bytes together */
                const int32_t h = ats_op_fused_head(g, i);
                uint64_t need = ats_op_xfer_bytes(g, NULL, i);
                if (h != i || (i + 1 < n && ats_op_fused_head(g, i + 1) == i)) {
                    need = 0;
                    for (int32_t j = h; j < n && ats_op_fused_head(g, j) == h; j++) need += ats_op_slot_bytes(g, NULL, j);
                }
                int fits = need <= ats_policy_temp_bytes(pol);
                cpu_mm |= pl.backend[i] == ATS_CPU && mm && fits;
                CHECK_MSG(a.backend[i] == (pl.backend[i] == ATS_GPU || (mm && fits) ? ATS_GPU : ATS_CPU),
                          "%s %s op %d (%s)", pname, model, (int)i, g->ops[i].name);
            }
            CHECK(ph ? (a.n_promoted > 0) == cpu_mm : a.n_promoted == 0);
        }
        if (strcmp(pname, "ats") == 0 || strcmp(pname, "ats-paper") == 0 || ph == 0)
            for (int32_t i = 0; i < n; i++) /* attention moves only in ats prefill rounds */
                if (g->ops[i].kind == ATS_OP_ATTN && pl.backend[i] == ATS_CPU && (strcmp(pname, "ats") != 0 || !ph))
                    CHECK_MSG(a.backend[i] == ATS_CPU, "%s %s op %s promoted", pname, ph ? "prefill" : "decode",
                              g->ops[i].name);
        if (strcmp(pname, "gpu-stream") == 0)
            for (int32_t i = 0; i < n; i++)
                if (g->ops[i].kind != ATS_OP_EMBED) CHECK_MSG(a.backend[i] == ATS_GPU, "%s on CPU", g->ops[i].name);
        if (strcmp(pname, "static") == 0 || strcmp(pname, "layer") == 0 || strcmp(pname, "expert") == 0)
            CHECK(a.n_promoted == 0);
    }
    if (strcmp(pname, "layer") == 0) {
        /* whole layers, from the last one down, after the output head */
        int64_t L = gd->arch.n_layer;
        int lowest = (int)L;
        for (int64_t l = L - 1; l >= 0; l--) {
            int all = 1, none = 1;
            for (int32_t i = 0; i < n; i++)
                if (gd->ops[i].layer == l) {
                    all &= pl.backend[i] == ATS_GPU;
                    none &= pl.backend[i] == ATS_CPU;
                }
            CHECK(all || none);
            if (all && lowest == l + 1) lowest = (int)l;
        }
        int gpu_layers = 0;
        for (int32_t i = 0; i < n; i++)
            if (gd->ops[i].layer >= 0 && pl.backend[i] == ATS_GPU) {
                gpu_layers = 1;
                CHECK(gd->ops[i].layer >= lowest);
            }
        if (gpu_layers)
            for (int32_t i = 0; i < n; i++)
                if (gd->ops[i].role == ATS_ROLE_OUTPUT) CHECK(pl.backend[i] == ATS_GPU);
        for (int32_t i = 0; i < n; i++)
            if (gd->ops[i].kind == ATS_OP_EMBED) CHECK(pl.backend[i] == ATS_CPU);
    }
    if (strcmp(pname, "expert") == 0)
        for (int32_t i = 0; i < n; i++)
            CHECK(pl.backend[i] == ((gd->ops[i].kind == ATS_OP_EXPERTS || gd->ops[i].kind == ATS_OP_EMBED) ? ATS_CPU : ATS_GPU));
done:
    ats_policy_free(pol);
    ats_plan_free(&plan);
    ats_assignment_free(&a);
    ats_placement_free(&pl);
    ats_costs_free(&cd);
    ats_costs_free(&cp);
    ats_graph_free(gd);
    ats_graph_free(gp);
}

/* ats in the last 512-token chunk of a 4096-token prompt (placement from the decode round at 4096,
 * as the simulator does): attention ops whose KV cache stays in host memory are promoted with it,
 * and the chunk is predicted faster than with promote_kv_prefill = 0; decode is unaffected. */
static void test_ats_prefill_kv(const ats_hw *hw)
{
    const int64_t P = 4095, C = 512;
    ats_graph *gd = fx_model_graph("qwen3-14b", ATS_PHASE_DECODE, 1, P);
    ats_graph *gp = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, C, P - C);
    if (!gd || !gp) return;
    CHECK(gd->n_ctx == gp->n_ctx); /* the same KV capacity in both rounds, as in the simulator */
    int32_t n = gd->n_ops;
    ats_costs cd, cp;
    ats_placement pl[2];
    ats_assignment a[2], ad[2];
    ats_err err;
    CHECK(ats_costs_init(&cd, n) == 0 && ats_costs_init(&cp, n) == 0);
    CHECK(ats_costs_from_model(gd, hw, &cd, &err) == ATS_OK && ats_costs_from_model(gp, hw, &cp, &err) == ATS_OK);
    for (int v = 0; v < 2; v++) {
        ats_policy_cfg cfg = ats_policy_cfg_default();
        cfg.vram_budget_bytes = (uint64_t)(0.85 * 6 * GIB);
        cfg.hostmem_cpu_factor = hw->hostmem_cpu_factor;
        cfg.promote_kv_prefill = v;
        ats_policy *pol = NULL;
        CHECK(ats_policy_new("ats", &cfg, &pol, &err) == ATS_OK);
        CHECK(ats_placement_init(&pl[v], n) == 0 && ats_assignment_init(&a[v], n) == 0 &&
              ats_assignment_init(&ad[v], n) == 0);
        CHECK_MSG(ats_policy_place(pol, gd, &cd, &pl[v], &err) == ATS_OK, "%s", err.msg);
        CHECK_MSG(ats_policy_assign(pol, gp, &pl[v], &cp, NULL, &a[v], &err) == ATS_OK, "%s", err.msg);
        CHECK_MSG(ats_policy_assign(pol, gd, &pl[v], &cd, NULL, &ad[v], &err) == ATS_OK, "%s", err.msg);
        int attn_cpu = 0, attn_prom = 0;
        for (int32_t i = 0; i < n; i++)
            if (gp->ops[i].kind == ATS_OP_ATTN && pl[v].backend[i] == ATS_CPU) {
                attn_cpu++;
                attn_prom += a[v].backend[i] == ATS_GPU;
            }
        printf("  ats prefill chunk %lld..%lld, promote_kv_prefill %d: %d of %d host-resident attention ops promoted, "
               "%d promoted in all, predicted %.1f ms; decode %.2f ms\n", (long long)(P - C), (long long)P, v, attn_prom,
               attn_cpu, a[v].n_promoted, a[v].predicted_s * 1e3, ad[v].predicted_s * 1e3);
        if (v == 0) CHECK(attn_prom == 0);
        else CHECK_MSG(attn_cpu > 0 && attn_prom == attn_cpu, "%d of %d", attn_prom, attn_cpu);
        ats_policy_free(pol);
    }
    CHECK_MSG(a[1].predicted_s < 0.8 * a[0].predicted_s, "with KV promotion %.1f ms, without %.1f ms",
              a[1].predicted_s * 1e3, a[0].predicted_s * 1e3);
    CHECK(memcmp(pl[0].backend, pl[1].backend, (size_t)n) == 0);
    CHECK(memcmp(ad[0].backend, ad[1].backend, (size_t)n) == 0);
    CHECK(ad[0].predicted_s == ad[1].predicted_s);
    for (int v = 0; v < 2; v++) {
        ats_placement_free(&pl[v]);
        ats_assignment_free(&a[v]);
        ats_assignment_free(&ad[v]);
    }
    ats_costs_free(&cd);
    ats_costs_free(&cp);
    ats_graph_free(gd);
    ats_graph_free(gp);
}

/* Predicted time of a request (n_pre prefill rounds of gp, n_dec decode rounds of gd) under pname
 * with a temp ring of `temp` bytes (0: the policy's automatic choice for that request); *temp_out
 * the ring the policy ended with. NAN when the placement is infeasible. */
static double request_time(const char *pname, uint64_t budget, uint64_t temp, const ats_hw *hw, const ats_graph *gd,
                           const ats_costs *cd, const ats_graph *gp, const ats_costs *cp, double n_pre, double n_dec,
                           uint64_t *temp_out)
{
    const int32_t n = gd->n_ops;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = budget;
    cfg.temp_bytes = temp;
    cfg.hostmem_cpu_factor = hw->hostmem_cpu_factor;
    ats_policy *pol = NULL;
    ats_err err;
    ats_placement pl;
    ats_assignment a;
    ats_plan plan;
    ats_plan_init(&plan);
    CHECK(ats_policy_new(pname, &cfg, &pol, &err) == ATS_OK && ats_placement_init(&pl, n) == 0 &&
          ats_assignment_init(&a, n) == 0);
    const ats_request_shape req = {gp, cp, n_pre, n_dec};
    double t = NAN;
    enum ats_status st = ats_policy_place_request(pol, gd, cd, temp ? NULL : &req, &pl, &err);
    if (st == ATS_OK) {
        double lat[2], up = 0.0;
        const ats_graph *g[2] = {gp, gd};
        const ats_costs *c[2] = {cp, cd};
        /* decode rounds on the decode placement where there is one, its extra weights moved once */
        const ats_placement *pd = ats_policy_decode_placement(pol, NULL);
        for (int32_t i = 0; pd && i < n; i++)
            if (pd->backend[i] == ATS_GPU && pl.backend[i] != ATS_GPU)
                up += gd->ops[i].kind == ATS_OP_EXPERTS ? cd->w_expert[i] * (double)gd->arch.n_expert : cd->w[i];
        for (int k = 0; k < 2 && st == ATS_OK; k++) {
            const ats_placement *p = k == 1 && pd ? pd : &pl;
            ats_predict_opts po = ats_policy_predict_opts(pol, NULL);
            st = ats_policy_assign(pol, g[k], p, c[k], NULL, &a, &err);
            if (st == ATS_OK) st = ats_policy_plan(pol, g[k], p, &a, c[k], NULL, &plan, &err);
            if (st == ATS_OK) st = ats_plan_predict(&plan, c[k], &po, &lat[k], NULL, &err);
        }
        CHECK_MSG(st == ATS_OK, "%s temp %llu: %s", pname, (unsigned long long)temp, err.msg);
        if (st == ATS_OK) t = n_pre * lat[0] + n_dec * lat[1] + (n_pre > 0 ? up : 0.0);
    } else {
        CHECK_MSG(st == ATS_EINFEASIBLE, "%s temp %llu: %s", pname, (unsigned long long)temp, err.msg);
    }
    *temp_out = ats_policy_temp_bytes(pol);
    ats_plan_free(&plan);
    ats_assignment_free(&a);
    ats_placement_free(&pl);
    ats_policy_free(pol);
    return t;
}

/* A MoE model's decode round (context 512) and a 512-token prefill chunk with their costs on `base`
 * with CPU matmul FLOP efficiency times cpu_scale; 0 when the model files are missing (nothing
 * allocated). */
typedef struct moe_case {
    ats_hw hw;
    ats_graph *gd, *gp;
    ats_costs cd, cp;
} moe_case;

static int moe_case_new(const ats_hw *base, const char *model, double cpu_scale, moe_case *mc)
{
    ats_err err;
    mc->hw = *base;
    mc->hw.eff_cpu.gemm_flop *= cpu_scale;
    mc->gd = fx_model_graph(model, ATS_PHASE_DECODE, 1, 512);
    mc->gp = fx_model_graph(model, ATS_PHASE_PREFILL, 512, 0);
    if (!mc->gd || !mc->gp) {
        ats_graph_free(mc->gd);
        ats_graph_free(mc->gp);
        return 0;
    }
    const int32_t n = mc->gd->n_ops;
    CHECK(ats_costs_init(&mc->cd, n) == 0 && ats_costs_init(&mc->cp, n) == 0);
    CHECK(ats_costs_from_model(mc->gd, &mc->hw, &mc->cd, &err) == ATS_OK &&
          ats_costs_from_model(mc->gp, &mc->hw, &mc->cp, &err) == ATS_OK);
    return 1;
}

static void moe_case_free(moe_case *mc)
{
    ats_costs_free(&mc->cd);
    ats_costs_free(&mc->cp);
    ats_graph_free(mc->gd);
    ats_graph_free(mc->gp);
}

/* ats_policy_place_request against brute force: no candidate ring (M/16, M/8, M/4), placed with
 * that ring given explicitly, predicts a faster request than the automatic choice; with a CPU 4x slower in prefill matmuls (the
 * executor's MoE on the GPU machine), Qwen3-30B-A3B at 9.5 GiB streams its routed experts in a
 * 512-token prefill (a ring > 0) where the decode-only choice keeps the ring at 0. */
static void test_request_temp(const ats_hw *base)
{
    moe_case mc;
    if (!moe_case_new(base, "qwen3-30b-a3b", 0.25, &mc)) return; /* CPU 4x slower: the executor's MoE prefill */
    ats_hw hw = mc.hw;
    ats_graph *gd = mc.gd, *gp = mc.gp;
    ats_costs cd = mc.cd, cp = mc.cp;
    const int32_t n = gd->n_ops;
    ats_err err;
    const uint64_t M = 9 * GIB + GIB / 2;
    const double shapes[][2] = {{1, 32}, {1, 128}, {4, 64}, {1, 4096}, {0, 32}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        uint64_t chosen = 0, t_dummy;
        double t_auto = request_time("ats", M, 0, &hw, gd, &cd, gp, &cp, shapes[s][0], shapes[s][1], &chosen);
        CHECK(isfinite(t_auto));
        /* the candidates M/16, M/8, M/4 given explicitly (a ring of 0 and 2 x the largest movable op
           cannot be asked for by cfg.temp_bytes: 0 means automatic) */
        const uint64_t cands[] = {M / 16, M / 8, M / 4};
        for (size_t k = 0; k < sizeof cands / sizeof *cands; k++) {
            if (cands[k] == 0) continue;
            double t = request_time("ats", M, cands[k], &hw, gd, &cd, gp, &cp, shapes[s][0], shapes[s][1], &t_dummy);
            CHECK_MSG(!(t < t_auto * (1 - 1e-9)), "request %g+%g: ring %.3f GiB predicts %.4f s, the automatic %.3f GiB %.4f s",
                      shapes[s][0], shapes[s][1], (double)cands[k] / GIB, t, (double)chosen / GIB, t_auto);
        }
        if (s == 0) {
            uint64_t dec_only = 1;
            (void)request_time("ats", M, 0, &hw, gd, &cd, gp, &cp, 0, 32, &dec_only);
            CHECK_MSG(chosen > 0 && dec_only == 0, "512-token prefill + 32 steps: ring %.3f GiB (want > 0), decode only %.3f GiB (want 0)",
                      (double)chosen / GIB, (double)dec_only / GIB);
            printf("  ats, qwen3-30b-a3b, 9.5 GiB, CPU matmuls x0.25: ring %.3f GiB for 512+32 tokens (%.3f s), %.3f GiB "
                   "for decode alone\n", (double)chosen / GIB, t_auto, (double)dec_only / GIB);
        }
    }
    /* bad request shapes */
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = M;
    ats_policy *pol = NULL;
    ats_placement pl;
    CHECK(ats_policy_new("ats", &cfg, &pol, &err) == ATS_OK && ats_placement_init(&pl, n) == 0);
    ats_request_shape bad = {gp, &cp, -1, 32};
    CHECK(ats_policy_place_request(pol, gd, &cd, &bad, &pl, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "-1") != NULL, "%s", err.msg);
    ats_graph *g14 = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, 512, 0);
    if (g14) {
        ats_request_shape other = {g14, &cp, 1, 32};
        CHECK(ats_policy_place_request(pol, gd, &cd, &other, &pl, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, "ops") != NULL, "%s", err.msg);
        ats_graph_free(g14);
    }
    ats_placement_free(&pl);
    ats_policy_free(pol);
    moe_case_free(&mc);
}

/* A fused expert group timed as one op (how `ats profile` measures it: the whole group's time on its
 * head, ~0 on the other members) is promoted whole where the same group timed member by member is:
 * Qwen3-30B-A3B, a 512-token prefill, h200-host with CPU matmuls 4x slower, `ats` with a ring of M/8.
 * The solver prices ops one by one, so it promotes the head alone; the group's vote weighs its ops
 * by CPU time (a vote by count sent every group back to the CPU). */
static void test_fused_head_costs(const ats_hw *base)
{
    moe_case mc;
    if (!moe_case_new(base, "qwen3-30b-a3b", 0.25, &mc)) return; /* CPU 4x slower: the executor's MoE prefill */
    const ats_hw hw = mc.hw;
    const ats_graph *gd = mc.gd, *gp = mc.gp;
    const int32_t n = gd->n_ops;
    ats_costs ch;
    ats_err err;
    CHECK(ats_costs_init(&ch, n) == 0 && ats_costs_from_model(gp, &hw, &ch, &err) == ATS_OK);
    int groups = 0;
    for (int32_t h = 0; h < n; h++) { /* ch: each group's CPU and GPU time on its head */
        if (ats_op_fused_head(gp, h) != h || h + 1 >= n || ats_op_fused_head(gp, h + 1) != h) continue;
        groups++;
        for (int32_t j = h + 1; j < n && ats_op_fused_head(gp, j) == h; j++) {
            ch.t_cpu[h] += ch.t_cpu[j];
            ch.t_gpu[h] += ch.t_gpu[j];
            ch.t_cpu[j] = ch.t_gpu[j] = 1e-7;
        }
    }
    CHECK(groups == 48);
    const uint64_t M = 9 * GIB + GIB / 2;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = M;
    cfg.temp_bytes = M / 8;
    cfg.hostmem_cpu_factor = hw.hostmem_cpu_factor;
    int promoted[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        ats_policy *pol = NULL;
        ats_placement pl;
        ats_assignment a;
        CHECK(ats_policy_new("ats", &cfg, &pol, &err) == ATS_OK && ats_placement_init(&pl, n) == 0 &&
              ats_assignment_init(&a, n) == 0);
        CHECK(ats_policy_place(pol, gd, &mc.cd, &pl, &err) == ATS_OK);
        CHECK(ats_policy_assign(pol, gp, &pl, k ? &ch : &mc.cp, NULL, &a, &err) == ATS_OK);
        for (int32_t h = 0; h < n; h++) {
            if (ats_op_fused_head(gp, h) != h || h + 1 >= n || ats_op_fused_head(gp, h + 1) != h) continue;
            int on = 0, m = 0;
            for (int32_t j = h; j < n && ats_op_fused_head(gp, j) == h; j++, m++) on += a.backend[j] == ATS_GPU;
            CHECK_MSG(on == 0 || on == m, "group at op %d split: %d of %d ops on the GPU", h, on, m);
            promoted[k] += on == m && pl.backend[h] == ATS_CPU;
        }
        ats_assignment_free(&a);
        ats_placement_free(&pl);
        ats_policy_free(pol);
    }
    CHECK_MSG(promoted[0] > 0 && promoted[1] == promoted[0],
              "expert groups promoted in a 512-token prefill: %d timed per member, %d timed on the head", promoted[0],
              promoted[1]);
    printf("  ats, qwen3-30b-a3b prefill 512, ring M/8: %d expert groups promoted (per-member costs), %d (head costs)\n",
           promoted[0], promoted[1]);
    ats_costs_free(&ch);
    moe_case_free(&mc);
}

/* The automatic ring may hold a prefill expert group: Mixtral-8x7B (8 experts of ~0.1 GB a tensor, a
 * layer's group ~0.8 GB) at 4 GiB on h200-host, 512 + 32 tokens. Every fixed candidate (M/16, M/8,
 * M/4) leaves ats's half slot too small for a prefill group, so the request ran as `static` (TTFT
 * 2.5 s simulated); the ring of 2 x the prefill group streams it (~0.5 s). */
static void test_prefill_group_ring(const ats_hw *base)
{
    moe_case mc;
    if (!moe_case_new(base, "mixtral-8x7b", 1.0, &mc)) return;
    const ats_hw *hw = &mc.hw;
    const ats_graph *gd = mc.gd, *gp = mc.gp;
    const ats_costs *cd = &mc.cd, *cp = &mc.cp;
    const uint64_t M = 4 * GIB;
    uint64_t chosen = 0, t_dummy;
    double t_auto = request_time("ats", M, 0, hw, gd, cd, gp, cp, 1, 32, &chosen);
    double t_q = request_time("ats", M, M / 4, hw, gd, cd, gp, cp, 1, 32, &t_dummy);
    double t_static = request_time("static", M, 0, hw, gd, cd, gp, cp, 1, 32, &t_dummy);
    CHECK_MSG(t_auto < 0.8 * t_q && t_auto < 0.8 * t_static,
              "mixtral 4 GiB 512+32: automatic ring %.3f GiB predicts %.3f s; ring M/4 %.3f s, static %.3f s",
              (double)chosen / GIB, t_auto, t_q, t_static);
    printf("  ats, mixtral-8x7b, 4 GiB, 512+32 tokens: ring %.3f GiB, %.3f s (ring M/4: %.3f s, static %.3f s)\n",
           (double)chosen / GIB, t_auto, t_q, t_static);
    moe_case_free(&mc);
}

/* The decode placement of `ats` (ats_policy_decode_placement): Qwen3-30B-A3B at 9.5 GiB on the H200
 * profile keeps a prefill ring that decode rounds hardly use; the decode placement fills its front
 * with more routed-expert groups. Checked: it exists there; a superset of the placement without new
 * KV caches or the embedding; its extra weights fit [0, ring_base) in whole quanta; ring_base a
 * multiple of 4 KiB below the ring; a decode plan on it stays inside [0, ring - ring_base); its
 * predicted decode round plus the upload spread over the request's steps beats the placement's
 * own; none for other policies, a given ring or no request. */
static void test_decode_placement(const ats_hw *hw)
{
    moe_case mc;
    if (!moe_case_new(hw, "qwen3-30b-a3b", 1.0, &mc)) return;
    const int32_t n = mc.gd->n_ops;
    const uint64_t M = 9 * GIB + GIB / 2;
    const double n_dec = 128;
    const ats_request_shape req = {mc.gp, &mc.cp, 1, n_dec};
    const char *names[] = {"ats", "ats-paper", "static", "gpu-stream", "ats"};
    for (int k = 0; k < 5; k++) {
        ats_policy_cfg cfg = ats_policy_cfg_default();
        cfg.vram_budget_bytes = M;
        cfg.hostmem_cpu_factor = mc.hw.hostmem_cpu_factor;
        if (k == 4) cfg.temp_bytes = M / 8; /* a given ring: no decode placement */
        ats_policy *pol = NULL;
        ats_err err;
        ats_placement pl;
        CHECK(ats_policy_new(names[k], &cfg, &pol, &err) == ATS_OK && ats_placement_init(&pl, n) == ATS_OK);
        CHECK_MSG(ats_policy_place_request(pol, mc.gd, &mc.cd, &req, &pl, &err) == ATS_OK, "%s", err.msg);
        uint64_t rb = 1;
        const ats_placement *pd = ats_policy_decode_placement(pol, &rb);
        if (k > 0) {
            CHECK_MSG(!pd && rb == 0, "%s%s: a decode placement", names[k], k == 4 ? " with a given ring" : "");
        } else {
            CHECK_MSG(pd != NULL, "ats, qwen3-30b-a3b, 9.5 GiB, 512 + 128 tokens: no decode placement");
        }
        if (pd) {
            const uint64_t T = ats_policy_temp_bytes(pol), q = cfg.quantum_bytes;
            CHECK(rb > 0 && rb <= T && rb % 4096 == 0);
            uint64_t extra_q = 0;
            double up = 0.0;
            for (int32_t i = 0; i < n; i++) {
                CHECK(pl.backend[i] != ATS_GPU || pd->backend[i] == ATS_GPU);
                if (pd->backend[i] == ATS_GPU && pl.backend[i] != ATS_GPU) {
                    const ats_op *op = &mc.gd->ops[i];
                    CHECK_MSG(op->kv_cache_bytes == 0 && op->kind != ATS_OP_EMBED, "op %s joins the decode placement", op->name);
                    extra_q += (ats_op_resident_bytes(op) + q - 1) / q * q;
                    up += op->kind == ATS_OP_EXPERTS ? mc.cd.w_expert[i] * (double)mc.gd->arch.n_expert : mc.cd.w[i];
                }
            }
            CHECK_MSG(extra_q > 0 && extra_q <= rb, "extra weights %llu bytes in quanta, ring base %llu",
                      (unsigned long long)extra_q, (unsigned long long)rb);
            double lat[2];
            const ats_placement *ps[2] = {&pl, pd};
            ats_assignment a;
            ats_plan plan;
            ats_plan_init(&plan);
            CHECK(ats_assignment_init(&a, n) == ATS_OK);
            for (int j = 0; j < 2; j++) {
                ats_predict_opts po = ats_policy_predict_opts(pol, NULL);
                CHECK(ats_policy_assign(pol, mc.gd, ps[j], &mc.cd, NULL, &a, &err) == ATS_OK &&
                      ats_policy_plan(pol, mc.gd, ps[j], &a, &mc.cd, NULL, &plan, &err) == ATS_OK &&
                      ats_plan_predict(&plan, &mc.cd, &po, &lat[j], NULL, &err) == ATS_OK);
                for (int32_t x = 0; j == 1 && x < plan.n_wxfers; x++)
                    CHECK(plan.wxfers[x].offset_bytes + plan.wxfers[x].slot_bytes <= T - rb);
            }
            CHECK_MSG(lat[1] + up / n_dec < lat[0], "decode round on the decode placement %.4f ms + upload %.3f ms / %g, "
                      "on the placement %.4f ms", lat[1] * 1e3, up * 1e3, n_dec, lat[0] * 1e3);
            printf("  ats, qwen3-30b-a3b, 9.5 GiB, 512 + 128 tokens: decode placement +%.3f GiB in the front %.3f GiB of the "
                   "%.3f GiB ring: decode %.3f -> %.3f ms, upload %.2f ms once\n",
                   (double)(pd->gpu_bytes - pl.gpu_bytes) / GIB, (double)rb / GIB, (double)T / GIB, lat[0] * 1e3,
                   lat[1] * 1e3, up * 1e3);
            ats_plan_free(&plan);
            ats_assignment_free(&a);
            /* placed again without a request: no decode placement */
            CHECK(ats_policy_place(pol, mc.gd, &mc.cd, &pl, &err) == ATS_OK && !ats_policy_decode_placement(pol, NULL));
        }
        ats_placement_free(&pl);
        ats_policy_free(pol);
    }
    moe_case_free(&mc);
}

int main(void)
{
    tu_seed("test_policy"); /* deterministic inputs (real models); printed for the record */
    test_lookup();
    ats_hw hw;
    if (fx_hw("rtx3060-laptop", &hw)) {
        const char *models[] = {"qwen3-14b", "qwen3-30b-a3b"};
        uint64_t budgets[] = {4 * GIB, 6 * GIB, 16 * GIB};
        for (int m = 0; m < 2; m++)
            for (int b = 0; b < 3; b++)
                for (int p = 0; p < N_NAMES; p++) run_policy(NAMES[p], models[m], budgets[b], &hw);
        test_ats_prefill_kv(&hw);
    }
    ats_hw h200;
    if (fx_hw("h200-host", &h200)) {
        test_request_temp(&h200);
        test_fused_head_costs(&h200);
        test_prefill_group_ring(&h200);
    }
    ats_hw prof;
    if (fx_hw("h200-host-profile-qwen3-30b-a3b", &prof)) test_decode_placement(&prof);
    return tu_finish("test_policy");
}
