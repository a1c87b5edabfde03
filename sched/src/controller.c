/* Load-aware re-scheduling (ats/controller.h, paper §4.4.3 Algorithm 3). */
#include "ats/controller.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TPOT_MAX 64

struct ats_controller {
    ats_controller_cfg cfg;
    ats_policy *pol;
    const ats_graph *g;
    const ats_placement *p;
    const ats_costs *nominal;
    ats_costs cur;          /* nominal scaled by load_ref, routing applied */
    ats_costs eff;          /* nominal, with each CPU op's t_cpu replaced by its predicted duration in
                               the plan in force at idle speed (host-memory interference included),
                               so that the load estimate does not mistake the plan's own interference
                               for CPU load */
    ats_costs scratch;      /* the round just run: nominal as of observe, scaled by load_ref */
    double plan_lead_s;     /* prefetch lead the plan in force was built with [s] */
    ats_load load;          /* latest estimate */
    ats_load load_ref;      /* load of the schedule in force */
    double t_last_s;        /* time of the last (re)schedule */
    double tpot[TPOT_MAX];
    int n_tpot, tpot_head;
    int64_t n_rounds, n_resched;
    ats_assignment asg, tmp;
    ats_plan plan;
    double predicted_s;
    int started;
};

ats_controller_cfg ats_controller_cfg_default(void)
{
    ats_controller_cfg c = {0.15, 0.0, 5.0, 8, 1, 0.02};
    return c;
}

enum ats_status ats_controller_new(ats_policy *pol, const ats_graph *g, const ats_placement *p,
                                   const ats_costs *nominal, const ats_controller_cfg *cfg,
                                   ats_controller **out, ats_err *err)
{
    ats_controller_cfg c = cfg ? *cfg : ats_controller_cfg_default();
    if (!(c.eps >= 0) || !isfinite(c.eps))
        return ats_err_set(err, ATS_EINVAL, "controller: eps %g (must be finite and >= 0)", c.eps);
    if (!(c.tau_s > 0) && !(c.tau_tpot_mult > 0))
        return ats_err_set(err, ATS_EINVAL, "controller: tau_s %g and tau_tpot_mult %g (one must be > 0)", c.tau_s,
                           c.tau_tpot_mult);
    if (!(c.min_busy_frac >= 0 && c.min_busy_frac < 1))
        return ats_err_set(err, ATS_EINVAL, "controller: min_busy_frac %g (must be in [0, 1))", c.min_busy_frac);
    if (c.tpot_window < 1 || c.tpot_window > TPOT_MAX)
        return ats_err_set(err, ATS_EINVAL, "controller: tpot_window %d (must be in 1..%d)", c.tpot_window, TPOT_MAX);
    if (!pol || !g || g->n_ops < 1 || !p || p->n != g->n_ops || !nominal || nominal->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "controller: policy/graph/placement/costs missing or size mismatch");
    enum ats_status st = ats_costs_validate(nominal, err);
    if (st) return st;
    ats_controller *k = calloc(1, sizeof *k);
    if (!k) return ats_err_set(err, ATS_ENOMEM, "controller: out of memory");
    k->cfg = c;
    k->pol = pol;
    k->g = g;
    k->p = p;
    k->nominal = nominal;
    k->load = k->load_ref = ats_load_idle();
    k->t_last_s = -INFINITY;
    k->predicted_s = NAN;
    ats_plan_init(&k->plan);
    if (ats_costs_init(&k->cur, g->n_ops) || ats_costs_init(&k->eff, g->n_ops) ||
        ats_costs_init(&k->scratch, g->n_ops) || ats_assignment_init(&k->asg, g->n_ops) ||
        ats_assignment_init(&k->tmp, g->n_ops)) {
        ats_controller_free(k);
        return ats_err_set(err, ATS_ENOMEM, "controller: out of memory");
    }
    *out = k;
    return ATS_OK;
}

void ats_controller_free(ats_controller *c)
{
    if (!c) return;
    ats_costs_free(&c->cur);
    ats_costs_free(&c->eff);
    ats_costs_free(&c->scratch);
    ats_assignment_free(&c->asg);
    ats_assignment_free(&c->tmp);
    ats_plan_free(&c->plan);
    free(c);
}

static double tau_now(const ats_controller *c)
{
    if (c->cfg.tau_s > 0) return c->cfg.tau_s;
    if (c->n_tpot == 0) return 0.0;
    double v[TPOT_MAX];
    int m = c->n_tpot;
    memcpy(v, c->tpot, (size_t)m * sizeof *v);
    for (int i = 1; i < m; i++) { /* insertion sort: m ≤ 64 */
        double x = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > x) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
    double med = (m % 2) ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
    return c->cfg.tau_tpot_mult * med;
}

static double rel_change(double a, double ref) { return fabs(a - ref) / ref; }

static double deviation(ats_load cur, ats_load ref)
{
    double d = rel_change(cur.cpu, ref.cpu), x = rel_change(cur.gpu, ref.gpu);
    if (x > d) d = x;
    x = rel_change(cur.pcie, ref.pcie);
    return x > d ? x : d;
}

/* cur = nominal scaled by load, routing of ctx applied */
static enum ats_status make_costs(ats_controller *c, ats_load load, const ats_round_ctx *ctx, ats_err *err)
{
    ats_costs_scale(c->nominal, load, &c->cur);
    return ats_costs_route(c->g, &c->cur, ctx ? ctx->routing : NULL, &c->cur, err);
}

/* eff = nominal with each CPU op's t_cpu replaced by its duration in the plan in force predicted
 * under `costs` (the load_ref snapshot), rescaled to idle speed. *lat_s (NULL ok) = the latency. */
static enum ats_status fill_eff(ats_controller *c, const ats_costs *costs, double lead_s, double *lat_s,
                                ats_err *err)
{
    ats_round_ctx rc = ats_round_ctx_default();
    rc.prefetch_lead_s = lead_s;
    ats_predict_opts po = ats_policy_predict_opts(c->pol, &rc);
    ats_timeline tl;
    double lat = NAN;
    if (ats_timeline_init(&tl, c->plan.n_ops, c->plan.n_wxfers)) return ats_err_set(err, ATS_ENOMEM, "controller: out of memory");
    enum ats_status st = ats_plan_predict(&c->plan, costs, &po, &lat, &tl, err);
    if (st == ATS_OK) {
        ats_costs_copy(&c->eff, c->nominal);
        for (int32_t i = 0; i < c->plan.n_ops; i++)
            if (c->plan.ops[i].backend == ATS_CPU) c->eff.t_cpu[i] = (tl.op_end[i] - tl.op_start[i]) * c->load_ref.cpu;
        if (lat_s) *lat_s = lat;
    }
    ats_timeline_free(&tl);
    return st;
}

static enum ats_status build_plan(ats_controller *c, const ats_round_ctx *ctx, ats_err *err)
{
    enum ats_status st = ats_policy_plan(c->pol, c->g, c->p, &c->asg, &c->cur, ctx, &c->plan, err);
    if (st) return st;
    c->plan_lead_s = ctx ? ctx->prefetch_lead_s : 0.0;
    return fill_eff(c, &c->cur, c->plan_lead_s, &c->predicted_s, err);
}

/* Before estimating the load of the round just run: the caller may have updated the borrowed
 * nominal costs for that round (the simulator does, per prefill chunk and per decode step, whose
 * costs grow with the context), while eff was predicted from the previous round's. Re-predict the
 * plan that ran under the current nominal at load_ref (transfer times keep this round's routing from
 * cur), so the estimate compares a round's observed times with that same round's prediction. */
static enum ats_status refresh_eff(ats_controller *c, ats_err *err)
{
    ats_costs_copy(&c->scratch, &c->cur);
    ats_load l = c->load_ref;
    for (int32_t i = 0; i < c->g->n_ops; i++) {
        c->scratch.t_cpu[i] = c->nominal->t_cpu[i] / l.cpu;
        c->scratch.t_gpu[i] = c->nominal->t_gpu[i] / l.gpu;
        c->scratch.c[i] = c->nominal->c[i] / l.pcie;
    }
    return fill_eff(c, &c->scratch, c->plan_lead_s, NULL, err);
}

enum ats_status ats_controller_start(ats_controller *c, double now_s, ats_load load, const ats_round_ctx *ctx,
                                     ats_err *err)
{
    if (!(load.cpu > 0 && load.gpu > 0 && load.pcie > 0))
        return ats_err_set(err, ATS_EINVAL, "controller: load factors %g/%g/%g (must be > 0)", load.cpu, load.gpu,
                           load.pcie);
    c->load = c->load_ref = load;
    enum ats_status st = make_costs(c, load, ctx, err);
    if (st) return st;
    st = ats_policy_assign(c->pol, c->g, c->p, &c->cur, ctx, &c->asg, err);
    if (st) return st;
    c->t_last_s = now_s;
    c->started = 1;
    return build_plan(c, ctx, err);
}

/* Copy-engine idle tail of the plan in force under the current costs: latency − the time from which
 * the next round's first transfer could be issued (end of the last transfer and, with double
 * buffering, end of the last reader of slot 0), ≥ 0. Used as the next decode round's prefetch lead. */
static double ce_tail(const ats_controller *c, const ats_round_ctx *ctx)
{
    const ats_plan *pl = &c->plan;
    if (pl->n_wxfers == 0) return 0.0;
    ats_timeline tl;
    if (ats_timeline_init(&tl, pl->n_ops, pl->n_wxfers)) return 0.0;
    double lat = 0;
    ats_predict_opts po = ats_policy_predict_opts(c->pol, ctx);
    double tail = 0.0;
    if (ats_plan_predict(pl, &c->cur, &po, &lat, &tl, NULL) == ATS_OK) {
        double last = tl.xfer_end[pl->n_wxfers - 1];
        if (pl->double_buffer) {
            int32_t k0 = (pl->n_wxfers - 1) % 2 == 0 ? pl->n_wxfers - 1 : pl->n_wxfers - 2;
            double r0 = tl.op_end[pl->wxfers[k0].op];
            if (r0 > last) last = r0;
        }
        if (isfinite(last) && lat > last) tail = lat - last;
    }
    ats_timeline_free(&tl);
    return tail;
}

enum ats_status ats_controller_observe(ats_controller *c, const ats_round_obs *obs, double latency_s, double now_s,
                                       const ats_round_ctx *next, ats_resched_report *report, ats_err *err)
{
    if (!c->started) return ats_err_set(err, ATS_EINVAL, "controller: observe before start");
    if (!obs || obs->n != c->g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "controller: observation has n = %d, graph has %d ops",
                           obs ? (int)obs->n : -1, (int)c->g->n_ops);
    if (!(latency_s >= 0) || !isfinite(latency_s))
        return ats_err_set(err, ATS_EINVAL, "controller: round latency %g s (must be finite and >= 0)", latency_s);
    ats_round_ctx ctx = next ? *next : ats_round_ctx_default();
    if (c->cfg.prefetch && c->g->phase.kind == ATS_PHASE_DECODE) ctx.prefetch_lead_s = ce_tail(c, &ctx);
    c->n_rounds++;
    c->tpot[c->tpot_head] = latency_s;
    c->tpot_head = (c->tpot_head + 1) % c->cfg.tpot_window;
    if (c->n_tpot < c->cfg.tpot_window) c->n_tpot++;
    enum ats_status st = ats_costs_validate(c->nominal, err);
    if (st) return st;
    st = refresh_eff(c, err);
    if (st) return st;
    ats_load est;
    ats_load_estimate(&c->eff, obs, c->load, &est);
    {
        double busy_c = 0, busy_g = 0, busy_x = 0, need = c->cfg.min_busy_frac * latency_s;
        for (int32_t i = 0; i < obs->n; i++) {
            double t = obs->t_exec[i], x = obs->t_xfer[i];
            if (isfinite(t) && t > 0) *(obs->backend[i] == ATS_GPU ? &busy_g : &busy_c) += t;
            if (isfinite(x) && x > 0) busy_x += x;
        }
        if (busy_c < need) est.cpu = c->load.cpu;
        if (busy_g < need) est.gpu = c->load.gpu;
        if (busy_x < need) est.pcie = c->load.pcie;
    }
    c->load = est;
    ats_resched_report r;
    memset(&r, 0, sizeof r);
    r.deviation = deviation(c->load, c->load_ref);
    r.tau_s = tau_now(c);
    r.load = c->load;
    r.n_promoted_before = r.n_promoted_after = c->asg.n_promoted;
    int fire = ats_policy_get_ops(c->pol)->dynamic && r.deviation >= c->cfg.eps && now_s - c->t_last_s >= r.tau_s;
    if (fire) {
        st = make_costs(c, c->load, &ctx, err);
        if (st) return st;
        /* the old assignment under the new costs, for the report */
        ats_assignment_copy(&c->tmp, &c->asg);
        st = build_plan(c, &ctx, err);
        if (st) return st;
        r.predicted_before_s = c->predicted_s;
        st = ats_policy_assign(c->pol, c->g, c->p, &c->cur, &ctx, &c->asg, err);
        if (st) return st;
        for (int32_t i = 0; i < c->g->n_ops; i++)
            if (c->asg.backend[i] != c->tmp.backend[i]) r.n_changed++;
        r.n_promoted_after = c->asg.n_promoted;
        c->load_ref = c->load;
        c->t_last_s = now_s;
        c->n_resched++;
        r.rescheduled = 1;
    } else {
        st = make_costs(c, c->load_ref, &ctx, err);
        if (st) return st;
    }
    st = build_plan(c, &ctx, err);
    if (st) return st;
    r.load_ref = c->load_ref;
    r.predicted_after_s = c->predicted_s;
    if (!fire) r.predicted_before_s = c->predicted_s;
    if (report) *report = r;
    return ATS_OK;
}

const ats_plan *ats_controller_plan(const ats_controller *c) { return &c->plan; }
const ats_assignment *ats_controller_assignment(const ats_controller *c) { return &c->asg; }
const ats_costs *ats_controller_costs(const ats_controller *c) { return &c->cur; }
ats_load ats_controller_load(const ats_controller *c) { return c->load; }
int64_t ats_controller_n_reschedules(const ats_controller *c) { return c->n_resched; }
int64_t ats_controller_n_rounds(const ats_controller *c) { return c->n_rounds; }
double ats_controller_predicted_s(const ats_controller *c) { return c->predicted_s; }
