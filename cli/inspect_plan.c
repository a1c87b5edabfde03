/*
 * The placement/plan part of `ats inspect --policy P --vram-budget B [--hw H] [--plan]`: static
 * placement on the decode graph of the model (the one placement of a run), the assignment and plan
 * of the inspected round, printed per layer and tensor role, with GPU bytes and the predicted round
 * latency (sched latency model, ats_plan_predict), then the plan dump.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats/costs.h"
#include "ats/policy.h"
#include "atsc/hw_json.h"
#include "cli.h"

static char mark(const ats_placement *p, const ats_assignment *a, int32_t i)
{
    if (p->backend[i] == ATS_GPU) return 'G';
    return a->backend[i] == ATS_GPU ? 'P' : 'c';
}

int ats_inspect_plan(const ats_arch *arch, const ats_graph_opts *go, const ats_graph *g, const char *policy,
                     uint64_t budget, const char *hw_name, int64_t chunk, int64_t gen, FILE *out)
{
    char path[4096];
    ats_hw hw;
    ats_err err = {{0}};
    if (atsc_hw_load(ats_cli_hw_path(hw_name, path, sizeof path), &hw, &err) != ATS_OK) {
        fprintf(stderr, "ats inspect: %s\n", err.msg);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_budget_for_hw("inspect", &budget, hw.gpu_vram_bytes, hw.name, path)) return ATS_EXIT_USAGE;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = budget;
    cfg.hostmem_cpu_factor = hw.hostmem_cpu_factor;
    cfg.n_copy_engines = hw.n_copy_engines;
    ats_policy *pol = NULL;
    enum ats_status st = ats_policy_new(policy, &cfg, &pol, &err);
    if (st) {
        fprintf(stderr, "ats inspect: --policy: %s\n", err.msg);
        return ATS_EXIT_USAGE;
    }
    int rc = ATS_EXIT_FAIL;
    int32_t n = g->n_ops;
    ats_graph *gd = NULL;
    ats_costs cd, c;
    ats_placement pl;
    ats_assignment a, a0;
    ats_plan plan;
    memset(&cd, 0, sizeof cd);
    memset(&c, 0, sizeof c);
    memset(&pl, 0, sizeof pl);
    memset(&a, 0, sizeof a);
    memset(&a0, 0, sizeof a0);
    ats_plan_init(&plan);
    /* the placement is made once, on a decode round at the same KV capacity */
    ats_graph_opts god = *go;
    god.phase.kind = ATS_PHASE_DECODE;
    god.phase.n_tokens = 1;
    god.phase.ctx_pos = g->n_ctx - 1;
    god.n_ctx = g->n_ctx;
    if (ats_graph_build(arch, &god, &gd, &err) || ats_costs_init(&cd, n) || ats_costs_init(&c, n) ||
        ats_placement_init(&pl, n) || ats_assignment_init(&a, n) || ats_assignment_init(&a0, n)) {
        fprintf(stderr, "ats inspect: %s\n", err.msg);
        goto done;
    }
    if (ats_costs_from_model(gd, &hw, &cd, &err) || ats_costs_from_model(g, &hw, &c, &err)) {
        fprintf(stderr, "ats inspect: %s\n", err.msg);
        rc = ATS_EXIT_USAGE;
        goto done;
    }
    /* the temp ring for a request as `ats sim` and `ats run` choose it (ats_policy_place_request): the
       prompt up to this round (at least one chunk) in chunks of --tokens, then --gen decode steps */
    const int64_t prompt = go->phase.ctx_pos + (go->phase.kind == ATS_PHASE_PREFILL ? go->phase.n_tokens : 0) > 0
                               ? go->phase.ctx_pos + (go->phase.kind == ATS_PHASE_PREFILL ? go->phase.n_tokens : 0)
                               : chunk;
    ats_graph_opts gop = *go;
    gop.phase.kind = ATS_PHASE_PREFILL;
    gop.phase.n_tokens = chunk < prompt ? chunk : prompt;
    gop.phase.ctx_pos = 0;
    gop.n_ctx = g->n_ctx;
    ats_graph *gp = NULL;
    ats_costs cp;
    memset(&cp, 0, sizeof cp);
    if (ats_graph_build(arch, &gop, &gp, &err) || ats_costs_init(&cp, n) || ats_costs_from_model(gp, &hw, &cp, &err)) {
        fprintf(stderr, "ats inspect: %s\n", err.msg);
        if (cp.t_cpu) ats_costs_free(&cp);
        ats_graph_free(gp);
        goto done;
    }
    const ats_request_shape req = {gp, &cp, (double)((prompt + chunk - 1) / chunk), (double)gen};
    st = ats_policy_place_request(pol, gd, &cd, &req, &pl, &err);
    ats_costs_free(&cp);
    ats_graph_free(gp);
    if (!st)
        fprintf(out, "\n# placement and temp ring for a request of %lld prompt tokens in chunks of %lld, then %lld decode "
                     "steps (--ctx/--tokens, --gen), as ats sim and ats run choose them\n",
                (long long)prompt, (long long)chunk, (long long)gen);
    if (st) {
        fprintf(stderr, "ats inspect: %s\n", err.msg);
        rc = st == ATS_EINFEASIBLE || st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        goto done;
    }
    uint64_t dec_extra = 0; /* the decode placement's weights in the temp region's front [bytes] */
    {
        uint64_t rb = 0, t = ats_policy_temp_bytes(pol), base_bytes = pl.gpu_bytes;
        const ats_placement *pd = ats_policy_decode_placement(pol, &rb);
        if (pd && go->phase.kind == ATS_PHASE_DECODE) {
            ats_placement_copy(&pl, pd);
            dec_extra = pd->gpu_bytes - base_bytes;
            fprintf(out, "decode placement (this round's): %.3f GiB more weights resident in the front %.3f GiB of the "
                         "%.3f GiB temp ring from the first decode round to the next prefill, decode ring %.3f GiB (GPU "
                         "bytes below: those weights as resident, the rest of the ring as temp)\n",
                    (double)(pd->gpu_bytes - base_bytes) / 1073741824.0, (double)rb / 1073741824.0,
                    (double)t / 1073741824.0, (double)(t - rb) / 1073741824.0);
        } else if (pd) {
            fprintf(out, "decode rounds: a decode placement with %.3f GiB more weights resident in the front %.3f GiB "
                         "of the %.3f GiB temp ring (ats inspect --phase decode shows it)\n",
                    (double)(pd->gpu_bytes - base_bytes) / 1073741824.0, (double)rb / 1073741824.0,
                    (double)t / 1073741824.0);
        }
    }
    ats_round_ctx ctx = ats_round_ctx_default();
    if (ats_policy_assign(pol, g, &pl, &c, &ctx, &a, &err) || ats_policy_plan(pol, g, &pl, &a, &c, &ctx, &plan, &err)) {
        fprintf(stderr, "ats inspect: %s\n", err.msg);
        goto done;
    }
    ats_predict_opts po = ats_policy_predict_opts(pol, &ctx);
    double lat = 0, lat0 = 0;
    if (ats_plan_predict(&plan, &c, &po, &lat, NULL, &err)) goto done;
    /* the same placement without promotion, for comparison */
    ats_plan plan0;
    ats_plan_init(&plan0);
    ats_assignment_from_placement(&a0, &pl);
    if (ats_policy_plan(pol, g, &pl, &a0, &c, &ctx, &plan0, &err) == ATS_OK) ats_plan_predict(&plan0, &c, &po, &lat0, NULL, NULL);
    ats_plan_free(&plan0);

    fprintf(out, "\n# policy %s, VRAM budget %.2f GiB, hw %s (%s)\n", policy, (double)budget / (1 << 30), hw.name,
           ats_policy_get_ops(pol)->summary);
    fprintf(out, "placement per layer and tensor role: G = GPU-resident, c = CPU, P = CPU-resident promoted this round\n");
    /* columns: the roles of layer 0 in op order (later layers may add MoE roles: printed as found) */
    ats_role cols[ATS_ROLE_COUNT];
    int ncol = 0;
    for (int32_t i = 0; i < n; i++) {
        if (g->ops[i].layer < 0) continue;
        int have = 0;
        for (int k = 0; k < ncol; k++) have |= cols[k] == g->ops[i].role;
        if (!have && ncol < ATS_ROLE_COUNT) cols[ncol++] = g->ops[i].role;
    }
    fprintf(out, "%5s", "layer");
    for (int k = 0; k < ncol; k++) fprintf(out, " %s", ats_role_name(cols[k]));
    fprintf(out, "\n");
    for (int64_t l = 0; l < g->arch.n_layer; l++) {
        fprintf(out, "%5lld", (long long)l);
        for (int k = 0; k < ncol; k++) {
            char m = '-';
            for (int32_t i = 0; i < n; i++)
                if (g->ops[i].layer == l && g->ops[i].role == cols[k]) m = mark(&pl, &a, i);
            fprintf(out, " %*c", (int)strlen(ats_role_name(cols[k])), m);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "global:");
    for (int32_t i = 0; i < n; i++)
        if (g->ops[i].layer < 0) fprintf(out, " %s=%c", ats_role_name(g->ops[i].role), mark(&pl, &a, i));
    fprintf(out, "\n");
    uint64_t kv_gpu = 0, w_gpu = 0;
    for (int32_t i = 0; i < n; i++)
        if (pl.backend[i] == ATS_GPU) {
            kv_gpu += gd->ops[i].kv_cache_bytes;
            w_gpu += gd->ops[i].weight_bytes;
        }
    uint64_t temp = ats_policy_temp_bytes(pol) - dec_extra;
    fprintf(out, "GPU bytes: resident %.3f GiB (weights %.3f GiB + KV cache %.3f GiB) + temp ring %.3f GiB "
           "(peak %.3f GiB this round) = %.3f GiB of %.3f GiB budget\n",
           (double)pl.gpu_bytes / (1 << 30), (double)w_gpu / (1 << 30), (double)kv_gpu / (1 << 30),
           (double)temp / (1 << 30), (double)plan.peak_temp_bytes / (1 << 30), (double)(pl.gpu_bytes + temp) / (1 << 30),
           (double)budget / (1 << 30));
    fprintf(out, "predicted round latency: %.3f ms (same placement, nothing promoted: %.3f ms); %d ops promoted, "
           "%.1f MiB host-to-device weights, %d splits%s\n",
           lat * 1e3, lat0 * 1e3, (int)a.n_promoted, (double)plan.h2d_weight_bytes / 1048576.0, (int)plan.n_splits,
           plan.serialized ? ", serialized" : "");
    fprintf(out, "  (sched latency model: plan rules R1-R7 of ats/plan.h, host-memory factor %.2f, no bandwidth sharing)\n",
           po.hostmem_cpu_factor);
    size_t need = ats_plan_dump(&plan, g, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) {
        fprintf(stderr, "ats inspect: out of memory\n");
        goto done;
    }
    ats_plan_dump(&plan, g, buf, need + 1);
    fprintf(out, "\n%s", buf);
    free(buf);
    rc = ATS_EXIT_OK;
done:
    ats_plan_free(&plan);
    if (a.backend) ats_assignment_free(&a);
    if (a0.backend) ats_assignment_free(&a0);
    if (pl.backend) ats_placement_free(&pl);
    if (c.t_cpu) ats_costs_free(&c);
    if (cd.t_cpu) ats_costs_free(&cd);
    ats_graph_free(gd);
    ats_policy_free(pol);
    return rc;
}
