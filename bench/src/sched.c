/*
 * bench/src/sched.c — `ats bench sched` (bench/sched.h): the scheduling code's wall time per model.
 */
#include <stdlib.h>
#include <string.h>

#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/placement.h"
#include "ats/plan.h"
#include "ats/policy.h"
#include "ats/transfer.h"
#include "ats_version.h"
#include "bench/sched.h"

bench_sched_opts bench_sched_opts_default(void)
{
    bench_sched_opts o;
    memset(&o, 0, sizeof o);
    o.runs = 201;
    o.ctx = 2048;
    return o;
}

/* the working state of one model's measurement: one cleanup for all */
typedef struct sched_state {
    ats_graph *g;
    ats_costs c;
    ats_placement pl;
    ats_assignment a;
    ats_plan plan;
    ats_policy *pol;
    double *t; /* runs samples [us] */
} sched_state;

static void state_free(sched_state *s)
{
    ats_policy_free(s->pol);
    ats_plan_free(&s->plan);
    if (s->a.backend) ats_assignment_free(&s->a);
    if (s->pl.backend) ats_placement_free(&s->pl);
    if (s->c.t_cpu) ats_costs_free(&s->c);
    ats_graph_free(s->g);
    free(s->t);
}

/* graph building, gruns times; the last graph is kept in s->g */
static enum ats_status time_graph(const bench_sched_opts *o, const ats_arch *arch, const char *name, int gruns,
                                  sched_state *s, bench_sched_fig *f, ats_err *err)
{
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = arch->default_recipe;
    go.phase.kind = ATS_PHASE_DECODE;
    go.phase.n_tokens = 1;
    go.phase.ctx_pos = o->ctx - 1;
    go.n_ctx = o->ctx;
    for (int r = 0; r < gruns; r++) {
        int64_t t0 = bench_now_ns();
        ats_err e = {{0}};
        if (ats_graph_build(arch, &go, &s->g, &e) != ATS_OK)
            return ats_err_set(err, ATS_EINVAL, "%s: %s", name, e.msg);
        s->t[r] = (double)(bench_now_ns() - t0) * 1e-3;
        if (r + 1 < gruns) {
            ats_graph_free(s->g);
            s->g = NULL;
        }
    }
    f->graph_us = bench_median(s->t, gruns);
    f->n_ops = s->g->n_ops;
    return ATS_OK;
}

/* the two transfer DPs and plan building, o->runs times each */
static enum ats_status time_dps(const bench_sched_opts *o, uint64_t temp, sched_state *s, bench_sched_fig *f,
                                ats_err *err)
{
    const ats_graph *g = s->g;
    ats_transfer_opts to = ats_transfer_opts_default();
    to.temp_bytes = temp;
    to.hostmem_cpu_factor = o->hw->hostmem_cpu_factor;
    for (int32_t i = 0; i < g->n_ops; i++) f->n_promotable += ats_op_promotable(g, &s->pl, &to, i);
    f->runs_dyn = f->runs_plan = o->runs;
    enum ats_status st = ATS_OK;
    for (int r = 0; r < o->runs && !st; r++) {
        int64_t t0 = bench_now_ns();
        st = ats_transfer_paper(g, &s->pl, &s->c, &to, &s->a, err);
        s->t[r] = (double)(bench_now_ns() - t0) * 1e-3;
    }
    if (st) return st;
    f->dyn_paper_us = bench_median(s->t, o->runs);
    f->n_promoted_paper = s->a.n_promoted;
    for (int r = 0; r < o->runs && !st; r++) {
        int64_t t0 = bench_now_ns();
        st = ats_transfer_ats(g, &s->pl, &s->c, &to, &s->a, err);
        s->t[r] = (double)(bench_now_ns() - t0) * 1e-3;
    }
    if (st) return st;
    f->dyn_ats_us = bench_median(s->t, o->runs);
    f->n_promoted_ats = s->a.n_promoted;
    f->pred_ats_ms = s->a.predicted_s * 1e3;
    ats_plan_opts plo = ats_plan_opts_default();
    plo.temp_bytes = temp;
    plo.double_buffer = 1;
    for (int r = 0; r < o->runs && !st; r++) {
        int64_t t0 = bench_now_ns();
        st = ats_plan_build(g, &s->pl, &s->a, &s->c, &plo, &s->plan, err);
        s->t[r] = (double)(bench_now_ns() - t0) * 1e-3;
    }
    if (st) return st;
    f->plan_us = bench_median(s->t, o->runs);
    ats_assignment_from_placement(&s->a, &s->pl);
    f->pred_static_ms = ats_transfer_ats_eval(g, &s->pl, &s->c, &to, s->a.backend) * 1e3;
    return ATS_OK;
}

enum ats_status bench_sched_model(const bench_sched_opts *o, const ats_arch *arch, const char *name,
                                  bench_sched_fig *f, ats_err *err)
{
    if (!o || !o->hw || o->vram_budget_bytes == 0 || o->runs < 1 || o->ctx < 1)
        return ats_err_set(err, ATS_EINVAL, "bench sched: hw, VRAM budget, runs and ctx must be set");
    memset(f, 0, sizeof *f);
    snprintf(f->model, sizeof f->model, "%s", name);
    sched_state s;
    memset(&s, 0, sizeof s);
    ats_plan_init(&s.plan);
    const int gruns = o->runs / 10 > 11 ? o->runs / 10 : 11;
    s.t = malloc((size_t)(o->runs > gruns ? o->runs : gruns) * sizeof *s.t);
    enum ats_status st = s.t ? time_graph(o, arch, name, gruns, &s, f, err) : ATS_ENOMEM;
    if (st) goto done;
    if ((st = ats_costs_init(&s.c, s.g->n_ops)) || (st = ats_placement_init(&s.pl, s.g->n_ops)) ||
        (st = ats_assignment_init(&s.a, s.g->n_ops)))
        goto done;
    if ((st = ats_costs_from_model(s.g, o->hw, &s.c, err))) goto done;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = o->vram_budget_bytes;
    cfg.hostmem_cpu_factor = o->hw->hostmem_cpu_factor;
    if ((st = ats_policy_new("ats", &cfg, &s.pol, err)) || (st = ats_policy_place(s.pol, s.g, &s.c, &s.pl, err)))
        goto fail;
    uint64_t temp = ats_policy_temp_bytes(s.pol);
    if (temp == 0) temp = o->vram_budget_bytes / 8; /* time the DPs with a non-empty temp ring even if ats chose 0 */
    /* static placement (the DP alone, as Algorithm 1) */
    ats_placement_opts po = ats_placement_opts_default();
    f->runs_place = gruns;
    for (int r = 0; r < gruns; r++) {
        int64_t t0 = bench_now_ns();
        if ((st = ats_place_static(s.g, &s.c, o->vram_budget_bytes - temp, &po, &s.pl, err))) goto fail;
        s.t[r] = (double)(bench_now_ns() - t0) * 1e-3;
    }
    f->place_us = bench_median(s.t, gruns);
    if ((st = time_dps(o, temp, &s, f, err))) goto fail;
    goto done;
fail:
    if (err) {
        char m[ATS_ERR_LEN];
        snprintf(m, sizeof m, "%s", err->msg);
        ats_err_set(err, st, "%s: %s", name, m);
    }
done:
    if (st && err && !err->msg[0]) ats_err_set(err, st, "%s: %s", name, ats_status_str(st));
    state_free(&s);
    return st;
}

json_t *bench_sched_json(const bench_sched_opts *o, const bench_sched_fig *figs, int n, const bench_machine *mc)
{
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string("ats bench sched"));
    json_object_set_new(root, "version", json_string(ATS_VERSION_STRING));
    json_object_set_new(root, "commit", json_string(ATS_GIT_COMMIT));
    json_object_set_new(root, "machine", json_string(mc->host));
    json_object_set_new(root, "cpu", json_string(mc->cpu));
    json_t *par = json_object();
    json_object_set_new(par, "hw", json_string(o->hw->name));
    json_object_set_new(par, "vram_budget_bytes", json_integer((json_int_t)o->vram_budget_bytes));
    json_object_set_new(par, "phase", json_string("decode"));
    json_object_set_new(par, "ctx", json_integer(o->ctx));
    json_object_set_new(par, "quantum_bytes", json_integer(1 << 20));
    json_object_set_new(par, "runs", json_integer(o->runs));
    json_object_set_new(par, "statistic", json_string("median wall time, CLOCK_MONOTONIC, one thread"));
    json_object_set_new(root, "parameters", par);
    json_t *pap = json_object();
    json_object_set_new(pap, "model", json_string("qwen3-14b"));
    json_object_set_new(pap, "dynamic_transfer_us", json_real(9000));
    json_object_set_new(pap, "graph_rebuild_us", json_real(7000));
    json_object_set_new(pap, "source", json_string("ATSInfer 2026, §4.4.3 (RTX 3060)"));
    json_object_set_new(root, "paper", pap);
    json_t *res = json_object();
    for (int i = 0; i < n; i++) {
        json_t *m = json_object();
        json_object_set_new(m, "static_placement_us", json_real(figs[i].place_us));
        json_object_set_new(m, "dynamic_transfer_us", json_real(figs[i].dyn_ats_us));
        json_object_set_new(m, "dynamic_transfer_paper_us", json_real(figs[i].dyn_paper_us));
        json_object_set_new(m, "plan_build_us", json_real(figs[i].plan_us));
        json_object_set_new(m, "graph_build_us", json_real(figs[i].graph_us));
        json_object_set_new(m, "n_ops", json_integer(figs[i].n_ops));
        json_object_set_new(m, "n_promotable", json_integer(figs[i].n_promotable));
        json_object_set_new(m, "n_promoted_ats", json_integer(figs[i].n_promoted_ats));
        json_object_set_new(m, "n_promoted_paper", json_integer(figs[i].n_promoted_paper));
        json_object_set_new(m, "predicted_static_ms", json_real(figs[i].pred_static_ms));
        json_object_set_new(m, "predicted_ats_ms", json_real(figs[i].pred_ats_ms));
        json_object_set_new(res, figs[i].model, m);
    }
    json_object_set_new(root, "results", res);
    return root;
}
