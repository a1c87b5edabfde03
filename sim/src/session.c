/*
 * sim/src/session.c — requests (chunked prefill + decode), routing, jitter and the controller in the
 * loop, on top of the engine. See sim/session.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "ats/policy.h"
#include "ats/transfer.h"
#include "sim/session.h"

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

void sim_session_result_free(sim_session_result *r)
{
    if (!r) return;
    free(r->rounds);
    free(r->ops);
    r->rounds = NULL;
    r->ops = NULL;
    r->n_rounds = r->n_ops = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sim_percentile(const double *v, size_t n, double p)
{
    if (n == 0) return NAN;
    double *s = malloc(n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double pos = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    double r = s[lo] + (s[hi] - s[lo]) * (pos - (double)lo);
    free(s);
    return r;
}

/* ------------------------------------------------------------------ per-round data */

/* Costs and CPU roofline shares of one round shape (prefill chunk j or decode step g). */
typedef struct round_shape {
    ats_costs nominal;
    double *mem_frac, *flop_frac; /* CPU roofline shares per op */
} round_shape;

static void shape_free(round_shape *s)
{
    ats_costs_free(&s->nominal);
    free(s->mem_frac);
    free(s->flop_frac);
}

static double eff_or1(double e) { return e > 0.0 ? e : 1.0; }

static enum ats_status shape_build(const ats_arch *arch, const ats_hw *hw, ats_recipe recipe,
                                   ats_phase_kind kind, int64_t n_tok, int64_t ctx_pos, int64_t n_ctx,
                                   ats_graph **keep, round_shape *s, ats_err *err)
{
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = recipe;
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

typedef struct phase_state {
    ats_graph *g;            /* graph the plans are built on (first chunk / first decode step) */
    ats_costs ctrl_nominal;  /* what the controller borrows as "nominal": updated every round */
    ats_controller *ctrl;
    int started;
    int pending_resched;     /* the last observe re-scheduled: charge it at the next round */
    /* routing of this controller's next round */
    double *n_sel;
    uint8_t routed_ready;
} phase_state;

typedef struct session {
    const ats_arch *arch;
    const ats_hw *hw;
    const sim_session_cfg *cfg;
    ats_policy *pol;
    ats_placement place;
    int64_t n_chunks;
    round_shape *pre;        /* n_chunks */
    round_shape *dec;        /* gen_tok */
    phase_state ph[2];
    sim_engine *eng;
    sim_prog prog;
    int32_t *op_task, *xfer_task, *act_task;
    int32_t cap_x;
    double *work_scale, *prefetched;
    ats_round_obs obs;
    gsl_rng *rng;
    sim_routing *routing;
    uint8_t *sel;
    ats_costs truth;         /* scratch for the routed nominal of a round */
    /* previous engine round: end and per-engine last busy end, for prefetches */
    double prev_end, ce_last_end[SIM_MAX_CE];
    int prev_was_decode;
    double pred_err_sum;
    int64_t pred_err_n;
    /* timeline */
    int tl_pid, tl_tid[SIM_MAX_QUEUES], tl_rounds;
    const ats_graph *tl_graph;
    double tl_t0;
    sim_session_result *res;
    size_t cap_rounds, cap_ops;
} session;

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

static enum ats_status grow_rows(session *s)
{
    sim_session_result *r = s->res;
    if (r->n_rounds < s->cap_rounds) return ATS_OK;
    size_t nc = s->cap_rounds ? 2 * s->cap_rounds : 1024;
    atsc_round_row *p = realloc(r->rounds, nc * sizeof *p);
    if (!p) return ATS_ENOMEM;
    r->rounds = p;
    s->cap_rounds = nc;
    return ATS_OK;
}

/* runs one round of phase k (0 prefill, 1 decode) with shape sh; returns its latency */
static enum ats_status run_round(session *s, int k, const round_shape *sh, int64_t n_tok, int64_t round_idx,
                                 double *latency, ats_err *err)
{
    phase_state *ph = &s->ph[k];
    const sim_session_cfg *cfg = s->cfg;
    const ats_graph *g = ph->g;
    const int32_t n = g->n_ops;
    enum ats_status st;
    ats_routing rt = {n, ph->n_sel, NULL, NULL};
    ats_round_ctx ctx = ats_round_ctx_default();
    ctx.routing = s->routing ? &rt : NULL;

    ats_costs_copy(&ph->ctrl_nominal, &sh->nominal);
    double t0 = sim_engine_now(s->eng);
    const int first = !ph->started;
    if (!ph->started) {
        if (s->routing && !ph->routed_ready) draw_routing(s, k, n_tok);
        ats_load l0 = k == 1 && s->ph[0].started ? ats_controller_load(s->ph[0].ctrl) : ats_load_idle();
        st = ats_controller_start(ph->ctrl, t0, l0, &ctx, err);
        if (st) return st;
        ph->started = 1;
    }
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
    for (int32_t i = 0; i < n; i++) {
        double f = 1.0;
        const ats_op *op = &g->ops[i];
        if (s->routing && op->kind == ATS_OP_EXPERTS && op->n_expert_active > 0)
            f = ph->n_sel[i] / op->n_expert_active;
        if (cfg->jitter_sigma > 0.0)
            f *= gsl_ran_lognormal(s->rng, -0.5 * cfg->jitter_sigma * cfg->jitter_sigma, cfg->jitter_sigma);
        s->work_scale[i] = f;
    }
    if (plan->n_wxfers > s->cap_x) {
        int32_t nc = plan->n_wxfers * 2;
        int32_t *x = realloc(s->xfer_task, (size_t)nc * sizeof *x);
        if (!x) return ATS_ENOMEM;
        s->xfer_task = x;
        double *pf = realloc(s->prefetched, (size_t)nc * sizeof *pf);
        if (!pf) return ATS_ENOMEM;
        s->prefetched = pf;
        s->cap_x = nc;
    }
    /* prefetches (plan R2): issued during the previous round. The engine cannot go back in time, so
     * the part the copy engine could have moved in the previous decode round's idle tail (from its
     * last busy end to the round end, at the link rate of now, without sharing) is taken as done;
     * the rest moves at the start of this round. An approximation, stated in sim/README.md. */
    double pre_bytes = 0.0;
    {
        double a_pcie;
        sim_engine_avail(s->eng, NULL, NULL, &a_pcie);
        double rate = (s->hw->pcie_h2d_bw < s->hw->pcie_link_bw ? s->hw->pcie_h2d_bw : s->hw->pcie_link_bw) * a_pcie;
        double free_at[SIM_MAX_CE];
        memcpy(free_at, s->ce_last_end, sizeof free_at);
        for (int32_t x = 0; x < plan->n_wxfers; x++) {
            const ats_wxfer *w = &plan->wxfers[x];
            s->prefetched[x] = 0.0;
            if (!w->prefetch || plan->serialized || cfg->force_serialized || k != 1 || !s->prev_was_decode) continue;
            double window = s->prev_end - free_at[w->ce] - s->hw->pcie_latency_s;
            if (window <= 0.0) continue;
            double b = (double)w->bytes < window * rate ? (double)w->bytes : window * rate;
            s->prefetched[x] = b;
            free_at[w->ce] += s->hw->pcie_latency_s + b / rate;
            pre_bytes += b;
        }
    }
    sim_exec_opts eo = sim_exec_opts_default();
    eo.force_serialized = cfg->force_serialized;
    eo.act_path = cfg->act_path;
    eo.resched_cost_s = charge ? cfg->resched_cost_s : 0.0;
    eo.work_scale = s->work_scale;
    eo.cpu_mem_frac = cfg->hostmem ? sh->mem_frac : NULL;
    eo.cpu_flop_frac = cfg->hostmem ? sh->flop_frac : NULL;
    eo.prefetched_bytes = s->prefetched;
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
    /* copy-engine idle times for the next round's prefetches */
    s->prev_end = t1;
    s->prev_was_decode = k == 1;
    for (int e = 0; e < SIM_MAX_CE; e++) s->ce_last_end[e] = t0;
    for (int32_t t = 0; t < s->prog.n; t++) {
        const sim_task *tk = &s->prog.tasks[t];
        if (tk->queue >= SIM_Q_CE0 && tk->t_end_s > s->ce_last_end[tk->queue - SIM_Q_CE0])
            s->ce_last_end[tk->queue - SIM_Q_CE0] = tk->t_end_s;
    }
    /* observations (contract 3) */
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
    /* round row */
    sim_session_result *r = s->res;
    if ((st = grow_rows(s))) return st;
    atsc_round_row *row = &r->rounds[r->n_rounds++];
    memset(row, 0, sizeof *row);
    row->index = round_idx;
    row->phase = k == 0 ? ATSC_PHASE_PREFILL : ATSC_PHASE_DECODE;
    row->tokens = (int32_t)n_tok;
    row->t_start_s = t0;
    row->latency_s = *latency;
    row->n_promoted = plan->n_promoted;
    row->rescheduled = ph->pending_resched ? 1 : 0;
    row->bytes_h2d = (uint64_t)llround(sim_engine_stats(s->eng)->bytes_h2d - h2d0 + pre_bytes);
    r->bytes_h2d += pre_bytes;
    r->bytes_prefetched += pre_bytes;
    ats_load ld = ats_controller_load(ph->ctrl);
    row->load_cpu = ld.cpu;
    row->load_gpu = ld.gpu;
    row->load_pcie = ld.pcie;
    r->resident_bytes = plan->resident_bytes;
    r->temp_bytes = plan->temp_capacity_bytes;
    if (cfg->record_ops) {
        if (r->n_ops + (size_t)n > s->cap_ops) {
            size_t nc = s->cap_ops ? 2 * s->cap_ops : 4096;
            while (nc < r->n_ops + (size_t)n) nc *= 2;
            atsc_op_row *p = realloc(r->ops, nc * sizeof *p);
            if (!p) return ATS_ENOMEM;
            r->ops = p;
            s->cap_ops = nc;
        }
        for (int32_t i = 0; i < n; i++) {
            const sim_task *tk = &s->prog.tasks[s->op_task[i]];
            atsc_op_row *o = &r->ops[r->n_ops++];
            o->round = round_idx;
            o->op = i;
            o->backend = s->obs.backend[i];
            o->t_start_s = tk->t_start_s;
            o->t_end_s = tk->t_end_s;
            o->has_xfer = 0;
            o->copy_engine = 0;
            o->xfer_start_s = NAN;
            o->xfer_end_s = NAN;
            if (plan->ops[i].has_wait_xfer) {
                const sim_task *x = &s->prog.tasks[s->xfer_task[plan->ops[i].wait_xfer]];
                o->has_xfer = 1;
                o->copy_engine = x->queue - SIM_Q_CE0;
                o->xfer_start_s = x->t_start_s;
                o->xfer_end_s = x->t_end_s;
            }
        }
    }
    return ATS_OK;
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
    snprintf(out->policy, sizeof out->policy, "%s", cfg->policy);
    const int64_t P = cfg->prompt_tok, G = cfg->gen_tok, C = cfg->chunk_tok, n_ctx = P + G;
    s->n_chunks = (P + C - 1) / C;

    /* round shapes: every prefill chunk and every decode step of a request */
    s->pre = calloc((size_t)s->n_chunks, sizeof *s->pre);
    s->dec = calloc((size_t)G, sizeof *s->dec);
    if (!s->pre || !s->dec) {
        st = ATS_ENOMEM;
        goto fail;
    }
    for (int64_t j = 0; j < s->n_chunks; j++) {
        int64_t nt = P - j * C < C ? P - j * C : C;
        st = shape_build(arch, hw, cfg->recipe, ATS_PHASE_PREFILL, nt, j * C, n_ctx, j == 0 ? &s->ph[0].g : NULL,
                         &s->pre[j], err);
        if (st) goto fail;
    }
    for (int64_t j = 0; j < G; j++) {
        st = shape_build(arch, hw, cfg->recipe, ATS_PHASE_DECODE, 1, P + j, n_ctx, j == 0 ? &s->ph[1].g : NULL,
                         &s->dec[j], err);
        if (st) goto fail;
    }
    const int32_t n = s->ph[1].g->n_ops;
    if (s->ph[0].g->n_ops != n) {
        st = ats_err_set(err, ATS_EINVAL, "prefill graph has %d ops, decode %d", s->ph[0].g->n_ops, n);
        goto fail;
    }

    /* policy and static placement (once, from the decode round at context P) */
    ats_policy_cfg pc = ats_policy_cfg_default();
    pc.vram_budget_bytes = cfg->vram_budget_bytes;
    pc.temp_bytes = cfg->temp_bytes;
    pc.n_copy_engines = hw->n_copy_engines;
    pc.hostmem_cpu_factor = cfg->hostmem ? hw->hostmem_cpu_factor : 1.0;
    if ((st = ats_policy_new(cfg->policy, &pc, &s->pol, err))) goto fail;
    if ((st = ats_placement_init(&s->place, n))) goto fail;
    if ((st = ats_policy_place(s->pol, s->ph[1].g, &s->dec[0].nominal, &s->place, err))) goto fail;
    for (int k = 0; k < 2; k++) {
        phase_state *ph = &s->ph[k];
        if ((st = ats_costs_init(&ph->ctrl_nominal, n))) goto fail;
        ats_costs_copy(&ph->ctrl_nominal, k == 0 ? &s->pre[0].nominal : &s->dec[0].nominal);
        ph->n_sel = calloc((size_t)n, sizeof *ph->n_sel);
        if (!ph->n_sel) {
            st = ATS_ENOMEM;
            goto fail;
        }
        if ((st = ats_controller_new(s->pol, ph->g, &s->place, &ph->ctrl_nominal, &cfg->ctrl, &ph->ctrl, err)))
            goto fail;
    }
    if ((st = ats_costs_init(&s->truth, n)) || (st = ats_round_obs_init(&s->obs, n))) goto fail;
    s->op_task = malloc((size_t)n * sizeof *s->op_task);
    s->act_task = malloc((size_t)n * sizeof *s->act_task);
    s->work_scale = malloc((size_t)n * sizeof *s->work_scale);
    if (!s->op_task || !s->act_task || !s->work_scale) {
        st = ATS_ENOMEM;
        goto fail;
    }
    sim_prog_init(&s->prog);
    s->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!s->rng) {
        st = ATS_ENOMEM;
        goto fail;
    }
    gsl_rng_set(s->rng, (unsigned long)(cfg->seed * 2654435761u + 17u));
    if (ats_arch_is_moe(arch)) {
        if (cfg->routing == SIM_ROUTE_FILE)
            st = sim_routing_load(cfg->routing_path ? cfg->routing_path : "", arch, &s->routing, err);
        else
            st = sim_routing_new_dist(arch, cfg->routing, cfg->zipf_skew, cfg->seed, &s->routing, err);
        if (st) goto fail;
        s->sel = malloc((size_t)arch->n_expert);
        if (!s->sel) {
            st = ATS_ENOMEM;
            goto fail;
        }
    }
    sim_engine_opts eo = sim_engine_opts_default();
    eo.hostmem = cfg->hostmem;
    eo.trace_offset_s = cfg->trace_offset_s;
    if ((st = sim_engine_new(hw, trace, &eo, &s->eng, err))) goto fail;
    if (cfg->timeline) {
        atsc_timeline *tl = cfg->timeline;
        s->tl_pid = atsc_timeline_process(tl, cfg->timeline_name ? cfg->timeline_name : cfg->policy);
        s->tl_rounds = atsc_timeline_track(tl, s->tl_pid, "rounds");
        s->tl_tid[SIM_Q_CPU] = atsc_timeline_track(tl, s->tl_pid, "CPU");
        s->tl_tid[SIM_Q_GPU] = atsc_timeline_track(tl, s->tl_pid, "GPU compute stream");
        for (int e = 0; e < hw->n_copy_engines; e++) {
            char nm[32];
            snprintf(nm, sizeof nm, "copy engine %d", e);
            s->tl_tid[SIM_Q_CE0 + e] = atsc_timeline_track(tl, s->tl_pid, nm);
        }
        sim_engine_set_hook(s->eng, tl_task, tl_rate, s);
    }

    /* requests */
    int64_t round_idx = 0, req = 0;
    double ttft_sum = 0.0;
    int64_t ttft_n = 0;
    int stop = 0;
    const int64_t rounds_per_req = s->n_chunks + G;
    while (!stop) {
        if ((cfg->n_requests > 0 && req >= cfg->n_requests) ||
            (cfg->duration_s > 0 && sim_engine_now(s->eng) >= cfg->duration_s))
            break;
        double t_req = sim_engine_now(s->eng);
        for (int64_t j = 0; j < rounds_per_req && !stop; j++) {
            int k = j < s->n_chunks ? 0 : 1;
            const round_shape *sh = k == 0 ? &s->pre[j] : &s->dec[j - s->n_chunks];
            int64_t nt = k == 0 ? (P - j * C < C ? P - j * C : C) : 1;
            double lat;
            if (cfg->max_rounds > 0 && round_idx >= cfg->max_rounds) {
                st = ats_err_set(err, ATS_EINVAL, "more than %lld rounds simulated (the round limit)",
                                 (long long)cfg->max_rounds);
                goto fail;
            }
            if ((st = run_round(s, k, sh, nt, round_idx++, &lat, err))) goto fail;
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
            int64_t next_tok = k == 0 ? (j + 1 < s->n_chunks ? (P - (j + 1) * C < C ? P - (j + 1) * C : C) : (P < C ? P : C)) : 1;
            if ((st = observe(s, k, lat, next_tok, err))) goto fail;
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

    /* summary */
    {
        const sim_stats *es = sim_engine_stats(s->eng);
        out->bytes_h2d += es->bytes_h2d;
        out->events = es->events;
        out->sim_s = sim_engine_now(s->eng);
        out->n_resched = ats_controller_n_reschedules(s->ph[0].ctrl) + ats_controller_n_reschedules(s->ph[1].ctrl);
        out->prefill_tok_s = out->prefill_s > 0 ? (double)out->prefill_tok / out->prefill_s : 0.0;
        out->decode_tok_s = out->decode_s > 0 ? (double)out->decode_tok / out->decode_s : 0.0;
        out->ttft_mean_s = ttft_n ? ttft_sum / (double)ttft_n : NAN;
        out->pred_err_mean = s->pred_err_n ? s->pred_err_sum / (double)s->pred_err_n : NAN;
        double busy = out->prefill_s + out->decode_s;
        out->gpu_busy_frac = busy > 0 ? es->gpu_op_busy_s / busy : 0.0;
        size_t nd = 0;
        double *tp = malloc((out->n_rounds + 1) * sizeof *tp);
        if (!tp) {
            st = ATS_ENOMEM;
            goto fail;
        }
        for (size_t i = 0; i < out->n_rounds; i++)
            if (out->rounds[i].phase == ATSC_PHASE_DECODE) tp[nd++] = out->rounds[i].latency_s;
        out->tpot_mean_s = nd ? out->decode_s / (double)nd : NAN;
        out->tpot_p50_s = sim_percentile(tp, nd, 50);
        out->tpot_p99_s = sim_percentile(tp, nd, 99);
        free(tp);
        /* request metrics need a completed request: a run cut by --duration after its prefill or
           in its decode has rounds, not a TTFT or TPOT (README: `-`, empty in CSV, null in JSON) */
        if (out->n_requests_done == 0)
            out->ttft_mean_s = out->tpot_mean_s = out->tpot_p50_s = out->tpot_p99_s = NAN;
    }
    session_free(s);
    return ATS_OK;
fail:
    session_free(s);
    sim_session_result_free(out);
    return st;
}

/* ------------------------------------------------------------------ summary output */

/* one number of a CSV row: empty when not finite (e.g. no decode round, no TPOT) */
static void csv_num(FILE *f, const char *fmt, double v)
{
    fputc(',', f);
    if (isfinite(v)) fprintf(f, fmt, v);
}

/* one number of a JSON object: null when not finite */
static void json_num(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* one number of a table row: "-" when not finite */
static void table_num(FILE *f, int w, const char *fmt, double v)
{
    if (isfinite(v)) fprintf(f, fmt, w, v);
    else fprintf(f, "%*s", w, "-");
}

void sim_summary_print(FILE *f, const sim_session_result *r, int n, sim_format fmt)
{
    if (fmt == SIM_FMT_CSV) {
        fprintf(f, "policy,prefill_tok_s,decode_tok_s,ttft_s,tpot_mean_ms,tpot_p50_ms,tpot_p99_ms,"
                   "reschedules,gb_h2d,gpu_busy,requests,rounds,sim_s\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s", r[i].policy);
            csv_num(f, "%.4f", r[i].prefill_tok_s);
            csv_num(f, "%.4f", r[i].decode_tok_s);
            csv_num(f, "%.6f", r[i].ttft_mean_s);
            csv_num(f, "%.4f", 1e3 * r[i].tpot_mean_s);
            csv_num(f, "%.4f", 1e3 * r[i].tpot_p50_s);
            csv_num(f, "%.4f", 1e3 * r[i].tpot_p99_s);
            fprintf(f, ",%lld", (long long)r[i].n_resched);
            csv_num(f, "%.4f", r[i].bytes_h2d / 1e9);
            csv_num(f, "%.4f", r[i].gpu_busy_frac);
            fprintf(f, ",%lld,%zu", (long long)r[i].n_requests_done, r[i].n_rounds);
            csv_num(f, "%.6f", r[i].sim_s);
            fputc('\n', f);
        }
        return;
    }
    if (fmt == SIM_FMT_JSON) {
        fprintf(f, "[\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "  {\"policy\": \"%s\"", r[i].policy);
            json_num(f, "prefill_tok_s", "%.4f", r[i].prefill_tok_s);
            json_num(f, "decode_tok_s", "%.4f", r[i].decode_tok_s);
            json_num(f, "ttft_s", "%.6f", r[i].ttft_mean_s);
            json_num(f, "tpot_mean_s", "%.6f", r[i].tpot_mean_s);
            json_num(f, "tpot_p50_s", "%.6f", r[i].tpot_p50_s);
            json_num(f, "tpot_p99_s", "%.6f", r[i].tpot_p99_s);
            fprintf(f, ", \"reschedules\": %lld", (long long)r[i].n_resched);
            json_num(f, "gb_h2d", "%.4f", r[i].bytes_h2d / 1e9);
            json_num(f, "gb_prefetched", "%.4f", r[i].bytes_prefetched / 1e9);
            json_num(f, "gpu_busy", "%.4f", r[i].gpu_busy_frac);
            json_num(f, "pred_err", "%.4f", r[i].pred_err_mean);
            fprintf(f, ", \"requests\": %lld, \"rounds\": %zu", (long long)r[i].n_requests_done, r[i].n_rounds);
            json_num(f, "sim_s", "%.6f", r[i].sim_s);
            fprintf(f, ", \"events\": %llu}%s\n", (unsigned long long)r[i].events, i + 1 < n ? "," : "");
        }
        fprintf(f, "]\n");
        return;
    }
    fprintf(f, "%-16s %10s %10s %9s %10s %10s %10s %7s %9s %6s\n", "policy", "prefill", "decode", "TTFT",
            "TPOT mean", "TPOT p50", "TPOT p99", "resched", "GB h2d", "GPU");
    fprintf(f, "%-16s %10s %10s %9s %10s %10s %10s %7s %9s %6s\n", "", "tok/s", "tok/s", "s", "ms", "ms", "ms",
            "", "", "busy");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%-16s ", r[i].policy);
        table_num(f, 10, "%*.2f", r[i].prefill_tok_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", r[i].decode_tok_s);
        fputc(' ', f);
        table_num(f, 9, "%*.3f", r[i].ttft_mean_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", 1e3 * r[i].tpot_mean_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", 1e3 * r[i].tpot_p50_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", 1e3 * r[i].tpot_p99_s);
        fprintf(f, " %7lld ", (long long)r[i].n_resched);
        table_num(f, 9, "%*.2f", r[i].bytes_h2d / 1e9);
        fputc(' ', f);
        table_num(f, 5, "%*.1f", 100.0 * r[i].gpu_busy_frac);
        fputc('%', f);
        if (r[i].n_requests_done == 0) fprintf(f, "  (no request completed in %.3g s simulated)", r[i].sim_s);
        fputc('\n', f);
    }
}
