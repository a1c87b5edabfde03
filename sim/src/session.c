/*
 * sim/src/session.c — requests (chunked prefill + decode), routing, jitter and the controller in the
 * loop, on top of the engine: the set-up of a session, the request and round loop. Prefetches are
 * prefetch.c, result rows and the summary figures rows.c, the printed summary print.c. See sim/session.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "ats/transfer.h"
#include "session_impl.h"

sim_session_cfg sim_session_cfg_default(void)
{
    sim_session_cfg c;
    memset(&c, 0, sizeof c);
    c.policy = "ats";
    c.recipe = ATS_RECIPE_Q4_K_M;
    c.prompt_tok = 2048;
    c.gen_tok = 128;
    c.chunk_tok = 512;
    c.n_requests = 1;
    c.routing = SIM_ROUTE_UNIFORM;
    c.zipf_skew = 1.0;
    c.ctrl = ats_controller_cfg_default();
    c.resched_cost_s = 0.016; /* paper §4.4.3: 9 ms DP + 7 ms graph rebuild */
    c.hostmem = 1;
    c.act_path = -1;
    c.seed = 1;
    c.max_rounds = SIM_MAX_ROUNDS_DEFAULT;
    return c;
}

double sim_session_round_bound(const ats_arch *arch, const ats_hw *hw, const sim_session_cfg *cfg,
                               char *why, size_t len)
{
    const int64_t C = cfg->chunk_tok > 0 ? cfg->chunk_tok : 1;
    const double rpr = (double)((cfg->prompt_tok + C - 1) / C) + (double)cfg->gen_tok;
    double by_req = cfg->n_requests > 0 ? (double)cfg->n_requests * rpr : INFINITY;
    double by_dur = INFINITY, t_min = 0.0;
    if (cfg->duration_s > 0) {
        double total = 0.0, active = 0.0;
        ats_arch_param_count(arch, &total, &active);
        double ovh = hw->cpu_op_overhead_s < hw->gpu_op_overhead_s ? hw->cpu_op_overhead_s : hw->gpu_op_overhead_s;
        double t_ovh = (double)arch->n_layer * (ovh > 0 ? ovh : 0.0);
        double bw = hw->cpu_mem_bw + hw->gpu_mem_bw;
        double t_bw = bw > 0 && active > 0 ? 0.25 * active / bw : 0.0; /* slack: embeddings, rounding */
        t_min = t_ovh > t_bw ? t_ovh : t_bw;
        double t_req = rpr * t_min + (cfg->gap_s > 0 ? cfg->gap_s : 0.0);
        if (t_req > 0 && isfinite(cfg->duration_s)) by_dur = (floor(cfg->duration_s / t_req) + 1.0) * rpr;
    }
    if (why) {
        if (by_req <= by_dur)
            snprintf(why, len, "%lld requests x %.0f rounds each", (long long)cfg->n_requests, rpr);
        else
            snprintf(why, len, "%.3g s simulated at >= %.3g ms per round", cfg->duration_s, 1e3 * t_min);
    }
    return by_req < by_dur ? by_req : by_dur;
}

/* ------------------------------------------------------------------ per-round data */

static void shape_free(round_shape *s)
{
    ats_costs_free(&s->nominal);
    free(s->mem_frac);
    free(s->flop_frac);
}

static double eff_or1(double e) { return e > 0.0 ? e : 1.0; }

static enum ats_status shape_build(const ats_arch *arch, const ats_hw *hw, ats_recipe recipe, const ats_qtype *types,
                                   ats_phase_kind kind, int64_t n_tok, int64_t ctx_pos, int64_t n_ctx,
                                   ats_graph **keep, round_shape *s, ats_err *err)
{
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = recipe;
    go.tensor_types = types;
    go.phase.kind = kind;
    go.phase.n_tokens = n_tok;
    go.phase.ctx_pos = ctx_pos;
    go.n_ctx = n_ctx;
    ats_graph *g = NULL;
    enum ats_status st = ats_graph_build(arch, &go, &g, err);
    if (st) return st;
    memset(s, 0, sizeof *s);
    st = ats_costs_init(&s->nominal, g->n_ops);
    if (st) goto done;
    st = ats_costs_from_model(g, hw, &s->nominal, err);
    if (st) goto done;
    s->mem_frac = malloc((size_t)g->n_ops * sizeof *s->mem_frac);
    s->flop_frac = malloc((size_t)g->n_ops * sizeof *s->flop_frac);
    if (!s->mem_frac || !s->flop_frac) {
        st = ATS_ENOMEM;
        goto done;
    }
    /* share of memory vs compute in each CPU op's roofline (host-memory interference input) */
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        double wb = (double)op->weight_bytes;
        if (op->kind == ATS_OP_EXPERTS) wb = op->n_expert_active * (double)op->expert_bytes;
        double bytes = wb + (double)op->kv_read_bytes + (double)op->act_in_bytes + (double)op->act_out_bytes;
        int attn = op->kind == ATS_OP_ATTN;
        double t_m = bytes / (hw->cpu_mem_bw * eff_or1(attn ? hw->eff_cpu.attn_bw : hw->eff_cpu.gemv_bw));
        double t_f = op->flop / (hw->cpu_flops * eff_or1(attn ? hw->eff_cpu.attn_flop : hw->eff_cpu.gemm_flop));
        double mx = t_m > t_f ? t_m : t_f;
        if (!(mx > 0.0)) {
            s->mem_frac[i] = 1.0;
            s->flop_frac[i] = 0.0;
        } else {
            s->mem_frac[i] = t_m / mx;
            s->flop_frac[i] = t_f / mx;
        }
    }
done:
    if (st) {
        shape_free(s);
        ats_graph_free(g);
        return st;
    }
    if (keep) *keep = g;
    else ats_graph_free(g);
    return ATS_OK;
}

/* ------------------------------------------------------------------ session state */

static void tl_task(void *user, const sim_prog *p, int32_t ti)
{
    session *s = user;
    const sim_task *t = &p->tasks[ti];
    const char *name = "?", *cat = "op";
    char buf[64];
    switch (t->tag) {
    case SIM_TAG_OP: name = s->tl_graph && t->op >= 0 ? s->tl_graph->ops[t->op].name : "op"; break;
    case SIM_TAG_WXFER:
        snprintf(buf, sizeof buf, "w %s", s->tl_graph && t->op >= 0 ? s->tl_graph->ops[t->op].name : "?");
        name = buf;
        cat = "weights";
        break;
    case SIM_TAG_AXFER: name = "activation"; cat = "activation"; break;
    case SIM_TAG_UPLOAD: name = "w decode placement"; cat = "weights"; break;
    default: name = "re-schedule"; cat = "controller"; break;
    }
    const char *keys[2] = {"op", "work"};
    double vals[2] = {(double)t->op, t->work};
    atsc_timeline_slice_args(s->cfg->timeline, s->tl_tid[t->queue], name, cat, t->t_start_s,
                             t->t_end_s - t->t_start_s, 2, keys, vals, NULL);
}

static void tl_rate(void *user, double t_s, double h2d, double d2h)
{
    session *s = user;
    atsc_timeline_counter(s->cfg->timeline, s->tl_pid, "PCIe H2D", "GB/s", t_s, h2d / 1e9, NULL);
    atsc_timeline_counter(s->cfg->timeline, s->tl_pid, "PCIe D2H", "GB/s", t_s, d2h / 1e9, NULL);
}

static void session_free(session *s)
{
    for (int k = 0; k < 2; k++) {
        ats_controller_free(s->ph[k].ctrl);
        ats_costs_free(&s->ph[k].ctrl_nominal);
        ats_graph_free(s->ph[k].g);
        free(s->ph[k].n_sel);
    }
    if (s->pre)
        for (int64_t j = 0; j < s->n_chunks; j++) shape_free(&s->pre[j]);
    if (s->dec)
        for (int64_t j = 0; j < s->cfg->gen_tok; j++) shape_free(&s->dec[j]);
    free(s->pre);
    free(s->dec);
    ats_placement_free(&s->place);
    ats_placement_free(&s->place_dec);
    ats_policy_free(s->pol);
    sim_engine_free(s->eng);
    sim_prog_free(&s->prog);
    free(s->op_task);
    free(s->xfer_task);
    free(s->act_task);
    free(s->work_scale);
    free(s->prefetched);
    ats_round_obs_free(&s->obs);
    if (s->rng) gsl_rng_free(s->rng);
    sim_routing_free(s->routing);
    free(s->sel);
    ats_costs_free(&s->truth);
}

enum ats_status sim_session_check(const ats_arch *arch, const sim_session_cfg *c, ats_err *err)
{
    if (c->vram_budget_bytes == 0) return ats_err_set(err, ATS_EINVAL, "vram budget: 0 bytes");
    if (c->prompt_tok < 1) return ats_err_set(err, ATS_EINVAL, "prompt: %lld tokens (must be >= 1)", (long long)c->prompt_tok);
    if (c->gen_tok < 1) return ats_err_set(err, ATS_EINVAL, "gen: %lld tokens (must be >= 1)", (long long)c->gen_tok);
    if (c->chunk_tok < 1) return ats_err_set(err, ATS_EINVAL, "chunk: %lld tokens (must be >= 1)", (long long)c->chunk_tok);
    if (c->n_requests < 1 && !(c->duration_s > 0))
        return ats_err_set(err, ATS_EINVAL, "requests: %lld and no duration (one of them must bound the run)",
                           (long long)c->n_requests);
    if (!(c->jitter_sigma >= 0.0 && c->jitter_sigma < 5.0))
        return ats_err_set(err, ATS_EINVAL, "jitter sigma: %g (must be in [0, 5))", c->jitter_sigma);
    if (!(c->resched_cost_s >= 0.0) || isinf(c->resched_cost_s))
        return ats_err_set(err, ATS_EINVAL, "resched cost: %g s (must be >= 0)", c->resched_cost_s);
    if (!(c->gap_s >= 0.0) || isinf(c->gap_s)) return ats_err_set(err, ATS_EINVAL, "gap: %g s", c->gap_s);
    if (!(c->duration_s >= 0.0) || isinf(c->duration_s))
        return ats_err_set(err, ATS_EINVAL, "duration: %g s", c->duration_s);
    if (arch->n_ctx_max > 0 && c->prompt_tok + c->gen_tok > arch->n_ctx_max)
        return ats_err_set(err, ATS_EINVAL, "prompt + gen = %lld tokens exceeds %s's context of %lld",
                           (long long)(c->prompt_tok + c->gen_tok), arch->name, (long long)arch->n_ctx_max);
    return ATS_OK;
}

/* routing of the next round of phase k: counts per EXPERTS op */
static void draw_routing(session *s, int k, int64_t n_tok)
{
    phase_state *ph = &s->ph[k];
    const ats_graph *g = ph->g;
    if (!s->routing) return;
    int32_t last_layer = -1;
    double cnt = 0.0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        ph->n_sel[i] = 0.0;
        if (op->kind != ATS_OP_EXPERTS) continue;
        if (op->layer != last_layer) {
            cnt = (double)sim_routing_round(s->routing, n_tok, op->layer, s->sel);
            last_layer = op->layer;
        }
        ph->n_sel[i] = cnt;
    }
    sim_routing_next_round(s->routing, n_tok);
}

/* the work of each op of phase k's round relative to its nominal: routed experts, jitter */
static void work_scales(session *s, int k)
{
    const phase_state *ph = &s->ph[k];
    const ats_graph *g = ph->g;
    for (int32_t i = 0; i < g->n_ops; i++) {
        double f = 1.0;
        const ats_op *op = &g->ops[i];
        if (s->routing && op->kind == ATS_OP_EXPERTS && op->n_expert_active > 0) f = ph->n_sel[i] / op->n_expert_active;
        if (s->cfg->jitter_sigma > 0.0)
            f *= gsl_ran_lognormal(s->rng, -0.5 * s->cfg->jitter_sigma * s->cfg->jitter_sigma, s->cfg->jitter_sigma);
        s->work_scale[i] = f;
    }
}

/* the times the round's tasks took, as the controller observes them (contract 3) */
static void observations(session *s, const ats_plan *plan, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        const sim_task *tk = &s->prog.tasks[s->op_task[i]];
        s->obs.backend[i] = tk->kind == SIM_TASK_GPU ? ATS_GPU : ATS_CPU;
        s->obs.t_exec[i] = tk->t_end_s - tk->t_start_s;
        s->obs.t_xfer[i] = NAN;
    }
    for (int32_t x = 0; x < plan->n_wxfers; x++) {
        const sim_task *tk = &s->prog.tasks[s->xfer_task[x]];
        int32_t op = plan->wxfers[x].op;
        double d = tk->t_end_s - tk->t_start_s;
        if (s->prefetched[x] > 0.0) continue; /* partly moved earlier: its duration says little */
        s->obs.t_xfer[op] = isnan(s->obs.t_xfer[op]) ? d : s->obs.t_xfer[op] + d;
    }
}

/* starts phase k's controller at its first round (the load the other phase saw, if any) */
static enum ats_status phase_start(session *s, int k, int64_t n_tok, double t0, const ats_round_ctx *ctx, ats_err *err)
{
    phase_state *ph = &s->ph[k];
    if (s->routing && !ph->routed_ready) draw_routing(s, k, n_tok);
    ats_load l0 = k == 1 && s->ph[0].started ? ats_controller_load(s->ph[0].ctrl) : ats_load_idle();
    enum ats_status st = ats_controller_start(ph->ctrl, t0, l0, ctx, err);
    if (st) return st;
    ph->started = 1;
    return ATS_OK;
}

/* runs one round of phase k (0 prefill, 1 decode) with shape sh; returns its latency */
static enum ats_status run_round(session *s, int k, const round_shape *sh, int64_t n_tok, int64_t round_idx,
                                 double *latency, ats_err *err)
{
    phase_state *ph = &s->ph[k];
    const sim_session_cfg *cfg = s->cfg;
    const ats_graph *g = ph->g;
    enum ats_status st;
    ats_routing rt = {g->n_ops, ph->n_sel, NULL, NULL};
    ats_round_ctx ctx = ats_round_ctx_default();
    ctx.routing = s->routing ? &rt : NULL;

    ats_costs_copy(&ph->ctrl_nominal, &sh->nominal);
    double t0 = sim_engine_now(s->eng);
    const int first = !ph->started;
    if (first && (st = phase_start(s, k, n_tok, t0, &ctx, err))) return st;
    /* the first schedule of a dynamic policy (its DP + plan build) is on the critical path too;
     * it is not counted as a re-schedule */
    int charge = ph->pending_resched || (first && ats_policy_get_ops(s->pol)->dynamic);
    const ats_plan *plan = ats_controller_plan(ph->ctrl);
    const double predicted = ats_controller_predicted_s(ph->ctrl);
    /* truth: nominal of this round's shape with the routed experts */
    if (s->routing) {
        st = ats_costs_route(g, &sh->nominal, &rt, &s->truth, err);
        if (st) return st;
    } else {
        ats_costs_copy(&s->truth, &sh->nominal);
    }
    work_scales(s, k);
    if ((st = sim_sess_xfer_capacity(s, plan->n_wxfers))) return st;
    const double pre_bytes = sim_sess_prefetch(s, k, plan);
    sim_exec_opts eo = sim_exec_opts_default();
    eo.force_serialized = cfg->force_serialized;
    eo.act_path = cfg->act_path;
    eo.resched_cost_s = charge ? cfg->resched_cost_s : 0.0;
    eo.work_scale = s->work_scale;
    eo.cpu_mem_frac = cfg->hostmem ? sh->mem_frac : NULL;
    eo.cpu_flop_frac = cfg->hostmem ? sh->flop_frac : NULL;
    eo.prefetched_bytes = s->prefetched;
    eo.act_switch_s = s->hw->host_switch_s;
    if (k == 1 && s->dec_upload_bytes > 0.0 && !s->dec_loaded) eo.upload_bytes = s->dec_upload_bytes;
    s->dec_loaded = k == 1; /* a prefill round's transfers overwrite the ring that held them */
    st = sim_prog_from_plan(&s->prog, g, plan, &s->truth, &eo, s->op_task, s->xfer_task, s->act_task, err);
    if (st) return st;
    const double h2d0 = sim_engine_stats(s->eng)->bytes_h2d;
    s->tl_graph = g;
    st = sim_engine_run(s->eng, &s->prog, err);
    if (st) return st;
    double t1 = sim_engine_now(s->eng);
    *latency = t1 - t0;
    if (k == 1 && isfinite(predicted) && *latency > 0) {
        s->pred_err_sum += fabs(predicted + eo.resched_cost_s - *latency) / *latency;
        s->pred_err_n++;
    }
    if (cfg->timeline) {
        const char *keys[4] = {"round", "tokens", "promoted", "rescheduled"};
        double vals[4] = {(double)round_idx, (double)n_tok, (double)plan->n_promoted, charge ? 1.0 : 0.0};
        atsc_timeline_slice_args(cfg->timeline, s->tl_rounds, k == 0 ? "prefill" : "decode", "round", t0, t1 - t0, 4,
                                 keys, vals, NULL);
    }
    sim_sess_ce_idle(s, k, t0, t1); /* copy-engine idle times for the next round's prefetches */
    observations(s, plan, g->n_ops);
    return sim_sess_rows_add(s, k, plan, round_idx, n_tok, t0, *latency, sim_engine_stats(s->eng)->bytes_h2d - h2d0,
                             pre_bytes);
}

/* after a round of phase k: feed the controller, prepare the routing of its next round */
static enum ats_status observe(session *s, int k, double latency, int64_t next_tok, ats_err *err)
{
    phase_state *ph = &s->ph[k];
    if (s->routing) draw_routing(s, k, next_tok);
    ph->routed_ready = 1;
    ats_routing rt = {ph->g->n_ops, ph->n_sel, NULL, NULL};
    ats_round_ctx ctx = ats_round_ctx_default();
    ctx.routing = s->routing ? &rt : NULL;
    ats_resched_report rep;
    enum ats_status st = ats_controller_observe(ph->ctrl, &s->obs, latency, sim_engine_now(s->eng), &ctx, &rep, err);
    if (st) return st;
    ph->pending_resched = rep.rescheduled;
    return ATS_OK;
}

/* round shapes: every prefill chunk and every decode step of a request; the graphs of the first of each */
static enum ats_status build_shapes(session *s, ats_err *err)
{
    const sim_session_cfg *cfg = s->cfg;
    const int64_t P = cfg->prompt_tok, G = cfg->gen_tok, C = cfg->chunk_tok, n_ctx = P + G;
    enum ats_status st;
    s->n_chunks = (P + C - 1) / C;
    s->pre = calloc((size_t)s->n_chunks, sizeof *s->pre);
    s->dec = calloc((size_t)G, sizeof *s->dec);
    if (!s->pre || !s->dec) return ATS_ENOMEM;
    for (int64_t j = 0; j < s->n_chunks; j++) {
        int64_t nt = P - j * C < C ? P - j * C : C;
        st = shape_build(s->arch, s->hw, cfg->recipe, cfg->tensor_types, ATS_PHASE_PREFILL, nt, j * C, n_ctx, j == 0 ? &s->ph[0].g : NULL,
                         &s->pre[j], err);
        if (st) return st;
    }
    for (int64_t j = 0; j < G; j++) {
        st = shape_build(s->arch, s->hw, cfg->recipe, cfg->tensor_types, ATS_PHASE_DECODE, 1, P + j, n_ctx, j == 0 ? &s->ph[1].g : NULL,
                         &s->dec[j], err);
        if (st) return st;
    }
    if (s->ph[0].g->n_ops != s->ph[1].g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "prefill graph has %d ops, decode %d", s->ph[0].g->n_ops, s->ph[1].g->n_ops);
    return ATS_OK;
}

/* the policy and its static placement (once, from the decode round at context P), a controller per
 * phase, the per-op buffers, the RNG of jitter and the MoE routing */
static enum ats_status setup_controllers(session *s, ats_err *err)
{
    const sim_session_cfg *cfg = s->cfg;
    const int32_t n = s->ph[1].g->n_ops;
    enum ats_status st;
    ats_policy_cfg pc = ats_policy_cfg_default();
    pc.vram_budget_bytes = cfg->vram_budget_bytes;
    pc.temp_bytes = cfg->temp_bytes;
    pc.n_copy_engines = s->hw->n_copy_engines;
    pc.hostmem_cpu_factor = cfg->hostmem ? s->hw->hostmem_cpu_factor : 1.0;
    if ((st = ats_policy_new(cfg->policy, &pc, &s->pol, err))) return st;
    if ((st = ats_placement_init(&s->place, n))) return st;
    /* the temp ring for the request (ats_policy_place_request): its prefill rounds count with its decode steps */
    const ats_request_shape req = {s->ph[0].g, &s->pre[0].nominal,
                                   (double)((cfg->prompt_tok + cfg->chunk_tok - 1) / cfg->chunk_tok), (double)cfg->gen_tok};
    if ((st = ats_policy_place_request(s->pol, s->ph[1].g, &s->dec[0].nominal, &req, &s->place, err))) return st;
    const ats_placement *pd = ats_policy_decode_placement(s->pol, NULL);
    if (pd) { /* decode rounds on the decode placement; its extra weights move at a request's first */
        if ((st = ats_placement_init(&s->place_dec, n))) return st;
        ats_placement_copy(&s->place_dec, pd);
        for (int32_t i = 0; i < n; i++)
            if (pd->backend[i] == ATS_GPU && s->place.backend[i] != ATS_GPU)
                s->dec_upload_bytes += (double)s->ph[1].g->ops[i].weight_bytes;
    }
    for (int k = 0; k < 2; k++) {
        phase_state *ph = &s->ph[k];
        if ((st = ats_costs_init(&ph->ctrl_nominal, n))) return st;
        ats_costs_copy(&ph->ctrl_nominal, k == 0 ? &s->pre[0].nominal : &s->dec[0].nominal);
        ph->n_sel = calloc((size_t)n, sizeof *ph->n_sel);
        if (!ph->n_sel) return ATS_ENOMEM;
        const ats_placement *p = k == 1 && pd ? &s->place_dec : &s->place;
        if ((st = ats_controller_new(s->pol, ph->g, p, &ph->ctrl_nominal, &cfg->ctrl, &ph->ctrl, err))) return st;
    }
    if ((st = ats_costs_init(&s->truth, n)) || (st = ats_round_obs_init(&s->obs, n))) return st;
    s->op_task = malloc((size_t)n * sizeof *s->op_task);
    s->act_task = malloc((size_t)n * sizeof *s->act_task);
    s->work_scale = malloc((size_t)n * sizeof *s->work_scale);
    if (!s->op_task || !s->act_task || !s->work_scale) return ATS_ENOMEM;
    s->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!s->rng) return ATS_ENOMEM;
    gsl_rng_set(s->rng, (unsigned long)(cfg->seed * 2654435761u + 17u));
    if (ats_arch_is_moe(s->arch)) {
        if (cfg->routing == SIM_ROUTE_FILE)
            st = sim_routing_load(cfg->routing_path ? cfg->routing_path : "", s->arch, &s->routing, err);
        else
            st = sim_routing_new_dist(s->arch, cfg->routing, cfg->zipf_skew, cfg->seed, &s->routing, err);
        if (st) return st;
        s->sel = malloc((size_t)s->arch->n_expert);
        if (!s->sel) return ATS_ENOMEM;
    }
    return ATS_OK;
}

/* the engine over the trace, and the timeline's process and tracks when one is asked for */
static enum ats_status setup_engine(session *s, const sim_trace *trace, ats_err *err)
{
    const sim_session_cfg *cfg = s->cfg;
    sim_engine_opts eo = sim_engine_opts_default();
    eo.hostmem = cfg->hostmem;
    eo.trace_offset_s = cfg->trace_offset_s;
    enum ats_status st = sim_engine_new(s->hw, trace, &eo, &s->eng, err);
    if (st || !cfg->timeline) return st;
    atsc_timeline *tl = cfg->timeline;
    s->tl_pid = atsc_timeline_process(tl, cfg->timeline_name ? cfg->timeline_name : cfg->policy);
    s->tl_rounds = atsc_timeline_track(tl, s->tl_pid, "rounds");
    s->tl_tid[SIM_Q_CPU] = atsc_timeline_track(tl, s->tl_pid, "CPU");
    s->tl_tid[SIM_Q_GPU] = atsc_timeline_track(tl, s->tl_pid, "GPU compute stream");
    for (int e = 0; e < s->hw->n_copy_engines; e++) {
        char nm[32];
        snprintf(nm, sizeof nm, "copy engine %d", e);
        s->tl_tid[SIM_Q_CE0 + e] = atsc_timeline_track(tl, s->tl_pid, nm);
    }
    sim_engine_set_hook(s->eng, tl_task, tl_rate, s);
    return ATS_OK;
}

/* tokens of prefill chunk j of a request (C tokens, the last one the rest of P) */
static int64_t chunk_tok(const sim_session_cfg *cfg, int64_t j)
{
    const int64_t P = cfg->prompt_tok, C = cfg->chunk_tok;
    return P - j * C < C ? P - j * C : C;
}

/* the requests, back to back (with cfg->gap_s between), until n_requests or duration; then the summary */
static enum ats_status run_requests(session *s, ats_err *err)
{
    const sim_session_cfg *cfg = s->cfg;
    sim_session_result *out = s->res;
    const int64_t rounds_per_req = s->n_chunks + cfg->gen_tok;
    int64_t round_idx = 0, req = 0, ttft_n = 0;
    double ttft_sum = 0.0;
    enum ats_status st;
    int stop = 0;
    while (!stop) {
        if ((cfg->n_requests > 0 && req >= cfg->n_requests) ||
            (cfg->duration_s > 0 && sim_engine_now(s->eng) >= cfg->duration_s))
            break;
        double t_req = sim_engine_now(s->eng);
        for (int64_t j = 0; j < rounds_per_req && !stop; j++) {
            int k = j < s->n_chunks ? 0 : 1;
            const round_shape *sh = k == 0 ? &s->pre[j] : &s->dec[j - s->n_chunks];
            int64_t nt = k == 0 ? chunk_tok(cfg, j) : 1;
            double lat;
            if (cfg->max_rounds > 0 && round_idx >= cfg->max_rounds)
                return ats_err_set(err, ATS_EINVAL, "more than %lld rounds simulated (the round limit)",
                                   (long long)cfg->max_rounds);
            if ((st = run_round(s, k, sh, nt, round_idx++, &lat, err))) return st;
            if (k == 0) {
                out->prefill_tok += nt;
                out->prefill_s += lat;
                if (j == s->n_chunks - 1) {
                    ttft_sum += sim_engine_now(s->eng) - t_req;
                    ttft_n++;
                }
            } else {
                out->decode_tok += 1;
                out->decode_s += lat;
            }
            /* the next round of this phase: next chunk (or the next request's first) / next step */
            int64_t next_tok = k == 0 ? chunk_tok(cfg, j + 1 < s->n_chunks ? j + 1 : 0) : 1;
            if ((st = observe(s, k, lat, next_tok, err))) return st;
            if (cfg->duration_s > 0 && sim_engine_now(s->eng) >= cfg->duration_s) stop = 1;
            if (cfg->progress && (round_idx & 255) == 0) {
                double f = cfg->duration_s > 0 ? sim_engine_now(s->eng) / cfg->duration_s
                                               : (double)round_idx / (double)(cfg->n_requests * rounds_per_req);
                cfg->progress(cfg->progress_user, f > 1.0 ? 1.0 : f);
            }
            if (j == rounds_per_req - 1) out->n_requests_done++;
        }
        req++;
        if (cfg->gap_s > 0.0) sim_engine_advance(s->eng, sim_engine_now(s->eng) + cfg->gap_s);
    }
    if (cfg->progress) cfg->progress(cfg->progress_user, 1.0);
    return sim_sess_summarize(s, ttft_sum, ttft_n);
}

enum ats_status sim_session_run(const ats_arch *arch, const ats_hw *hw, const sim_trace *trace,
                                const sim_session_cfg *cfg, sim_session_result *out, ats_err *err)
{
    memset(out, 0, sizeof *out);
    enum ats_status st = cfg->policy ? sim_session_check(arch, cfg, err)
                                     : ats_err_set(err, ATS_EINVAL, "policy: none given");
    if (st) return st;
    if (cfg->max_rounds > 0) {
        char why[160];
        double bound = sim_session_round_bound(arch, hw, cfg, why, sizeof why);
        if (!(bound <= (double)cfg->max_rounds))
            return ats_err_set(err, ATS_EINVAL, "the run may simulate up to %.3g rounds (%s), over the limit of %lld",
                               bound, why, (long long)cfg->max_rounds);
    }
    session S, *s = &S;
    memset(s, 0, sizeof S);
    s->arch = arch;
    s->hw = hw;
    s->cfg = cfg;
    s->res = out;
    sim_prog_init(&s->prog);
    snprintf(out->policy, sizeof out->policy, "%s", cfg->policy);
    if ((st = build_shapes(s, err)) || (st = setup_controllers(s, err)) || (st = setup_engine(s, trace, err)) ||
        (st = run_requests(s, err))) {
        session_free(s);
        sim_session_result_free(out);
        return st;
    }
    session_free(s);
    return ATS_OK;
}
