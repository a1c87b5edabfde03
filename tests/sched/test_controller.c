/*
 * test_controller — Algorithm 3: no re-schedule under steady load or a change below ε; a change
 * ≥ ε re-schedules exactly once τ has passed since the last one (τ = 5 × recent TPOT, or absolute);
 * non-dynamic policies never re-schedule; the load estimate follows the injected load; reports
 * say what changed; bad configuration and observations are refused; rounds whose costs grow (prefill
 * chunks at a growing context, the caller updating the borrowed nominal each round) that run exactly
 * as predicted read as an idle machine; a resource busy for less than min_busy_frac of a round keeps
 * its previous factor.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ats/controller.h"
#include "sched_fix.h"
#include "testutil.h"

#define GIB (1024ull * 1024ull * 1024ull)

/* one simulated round: observed times = current costs under the true load */
static double fake_round(const ats_controller *k, const ats_costs *nominal, ats_load truth, ats_round_obs *obs)
{
    const ats_assignment *a = ats_controller_assignment(k);
    const ats_plan *pl = ats_controller_plan(k);
    double lat = 0;
    for (int32_t i = 0; i < obs->n; i++) {
        obs->backend[i] = a->backend[i];
        obs->t_exec[i] = a->backend[i] == ATS_GPU ? nominal->t_gpu[i] / truth.gpu : nominal->t_cpu[i] / truth.cpu;
        obs->t_xfer[i] = pl->ops[i].has_wait_xfer ? nominal->w[i] / truth.pcie : NAN;
        lat += obs->t_exec[i];
    }
    return lat;
}

/* The setup every controller scenario shares: rtx3060-laptop, one decode round of `model` at
 * context 2048, its nominal costs, a placement and an observation buffer. */
typedef struct decode_fix {
    ats_hw hw;
    ats_graph *g;
    int32_t n;
    ats_costs nom;
    ats_placement pl;
    ats_round_obs obs;
} decode_fix;

static int fix_open(decode_fix *f, const char *model)
{
    if (!fx_hw("rtx3060-laptop", &f->hw)) return 0;
    f->g = fx_model_graph(model, ATS_PHASE_DECODE, 1, 2047);
    if (!f->g) return 0;
    f->n = f->g->n_ops;
    ats_err err;
    CHECK(ats_costs_init(&f->nom, f->n) == 0 && ats_placement_init(&f->pl, f->n) == 0 &&
          ats_round_obs_init(&f->obs, f->n) == 0);
    CHECK(ats_costs_from_model(f->g, &f->hw, &f->nom, &err) == ATS_OK);
    return 1;
}

static void fix_close(decode_fix *f)
{
    ats_round_obs_free(&f->obs);
    ats_placement_free(&f->pl);
    ats_costs_free(&f->nom);
    ats_graph_free(f->g);
}

static void scenario(const char *pname, int dynamic_expected, uint64_t *rng)
{
    decode_fix f;
    if (!fix_open(&f, "qwen3-14b")) return;
    ats_err err;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = 6 * GIB;
    cfg.hostmem_cpu_factor = 1.0; /* fake_round has no interference; own_interference() covers it */
    ats_policy *pol;
    CHECK(ats_policy_new(pname, &cfg, &pol, &err) == ATS_OK);
    CHECK_MSG(ats_policy_place(pol, f.g, &f.nom, &f.pl, &err) == ATS_OK, "%s", err.msg);
    ats_controller *k = NULL;
    CHECK(ats_controller_new(pol, f.g, &f.pl, &f.nom, NULL, &k, &err) == ATS_OK);
    CHECK(ats_controller_start(k, 0.0, ats_load_idle(), NULL, &err) == ATS_OK);
    CHECK(ats_controller_n_reschedules(k) == 0);
    double now = 0;
    ats_load truth = ats_load_idle();
    ats_resched_report r;
    int n_resched = 0;
    /* 20 steady rounds: never */
    for (int i = 0; i < 20; i++) {
        double lat = fake_round(k, &f.nom, truth, &f.obs);
        now += lat;
        CHECK(ats_controller_observe(k, &f.obs, lat, now, NULL, &r, &err) == ATS_OK);
        CHECK(!r.rescheduled);
        CHECK(r.deviation < 1e-9);
    }
    /* a small change (below ε): never */
    truth.cpu = 0.9 + tu_uniform(rng, 0, 0.05);
    for (int i = 0; i < 20; i++) {
        double lat = fake_round(k, &f.nom, truth, &f.obs);
        now += lat;
        CHECK(ats_controller_observe(k, &f.obs, lat, now, NULL, &r, &err) == ATS_OK);
        CHECK(!r.rescheduled);
    }
    /* a big change: exactly one re-schedule (dynamic policies), right away since τ has passed */
    truth.cpu = 0.4;
    truth.pcie = 0.7;
    double t_change = now, t_resched = 0;
    for (int i = 0; i < 30; i++) {
        double lat = fake_round(k, &f.nom, truth, &f.obs);
        now += lat;
        CHECK(ats_controller_observe(k, &f.obs, lat, now, NULL, &r, &err) == ATS_OK);
        if (r.rescheduled) {
            n_resched++;
            t_resched = now;
            CHECK(r.deviation >= 0.15);
            CHECK(now - t_change <= 2 * lat + 1e-12); /* fired on the first round that saw the load */
            CHECK(r.n_promoted_after == ats_controller_assignment(k)->n_promoted);
            CHECK(r.predicted_after_s <= r.predicted_before_s + 1e-12); /* the DP is optimal under the new costs */
            printf("%s: re-scheduled at t = %.3f s: deviation %.2f, %d ops changed backend, promoted %d -> %d, "
                   "predicted %.2f -> %.2f ms\n", pname, now, r.deviation, (int)r.n_changed, (int)r.n_promoted_before,
                   (int)r.n_promoted_after, r.predicted_before_s * 1e3, r.predicted_after_s * 1e3);
        }
    }
    CHECK_NEAR(ats_controller_load(k).cpu, 0.4, 1e-9);
    if (dynamic_expected) CHECK_NEAR(ats_controller_load(k).pcie, 0.7, 1e-9); /* static moves no weights */
    CHECK(n_resched == (dynamic_expected ? 1 : 0));
    CHECK(ats_controller_n_reschedules(k) == n_resched);
    /* back to idle, but τ not yet elapsed: wait, then fire once */
    if (dynamic_expected) {
        truth = ats_load_idle();
        double lat = fake_round(k, &f.nom, truth, &f.obs);
        double tau = r.tau_s;
        CHECK(tau > 0);
        /* observe at a time just after the last re-schedule: too early */
        ats_controller_cfg c2 = ats_controller_cfg_default();
        (void)c2;
        int fired_early = 0, fired = 0;
        double t_last = t_resched;
        for (int i = 0; i < 40 && !fired; i++) {
            double step = tau / 10.0;
            now += step;
            CHECK(ats_controller_observe(k, &f.obs, lat, now, NULL, &r, &err) == ATS_OK);
            if (r.rescheduled) {
                fired = 1;
                if (now - t_last < r.tau_s - 1e-12) fired_early = 1;
            }
        }
        (void)t_last;
        CHECK(fired);
        CHECK(!fired_early);
        CHECK(ats_controller_n_reschedules(k) == 2);
    }
    CHECK(ats_controller_n_rounds(k) >= 70);
    CHECK(isfinite(ats_controller_predicted_s(k)));
    /* bad observation */
    ats_round_obs small;
    CHECK(ats_round_obs_init(&small, f.n - 1) == 0);
    CHECK(ats_controller_observe(k, &small, 0.1, now + 1, NULL, NULL, &err) == ATS_EINVAL);
    CHECK(ats_controller_observe(k, &f.obs, NAN, now + 1, NULL, NULL, &err) == ATS_EINVAL);
    ats_round_obs_free(&small);
    ats_controller_free(k);
    ats_policy_free(pol);
    fix_close(&f);
}

/* absolute τ: changes keep coming every round, re-schedules at most once per τ */
static void rate_limit(uint64_t *rng)
{
    decode_fix f;
    if (!fix_open(&f, "qwen3-30b-a3b")) return;
    ats_err err;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = 6 * GIB;
    ats_policy *pol;
    CHECK(ats_policy_new("ats-paper", &cfg, &pol, &err) == ATS_OK);
    CHECK(ats_policy_place(pol, f.g, &f.nom, &f.pl, &err) == ATS_OK);
    ats_controller_cfg cc = ats_controller_cfg_default();
    cc.tau_s = 0.5;
    ats_controller *k;
    CHECK(ats_controller_new(pol, f.g, &f.pl, &f.nom, &cc, &k, &err) == ATS_OK);
    CHECK(ats_controller_start(k, 0.0, ats_load_idle(), NULL, &err) == ATS_OK);
    double now = 0, last = 0;
    int fired = 0;
    for (int i = 0; i < 400; i++) {
        ats_load truth = {tu_uniform(rng, 0.2, 1), tu_uniform(rng, 0.2, 1), tu_uniform(rng, 0.2, 1)};
        double lat = fake_round(k, &f.nom, truth, &f.obs);
        now += lat;
        ats_resched_report r;
        CHECK(ats_controller_observe(k, &f.obs, lat, now, NULL, &r, &err) == ATS_OK);
        if (r.rescheduled) {
            CHECK_MSG(now - last >= 0.5, "re-scheduled %.3f s after the previous one", now - last);
            last = now;
            fired++;
        }
    }
    CHECK(fired >= (int)(0.8 * now / 0.5) && fired <= (int)(now / 0.5) + 1);
    printf("rate limit: %d re-schedules in %.2f s of noisy load with tau 0.5 s\n", fired, now);
    ats_controller_free(k);
    ats_policy_free(pol);
    fix_close(&f);
}

/* with host-memory interference in the plan, rounds that run exactly as predicted (CPU ops
 * stretched where they overlap transfers) are not mistaken for CPU load */
static void own_interference(void)
{
    decode_fix f;
    if (!fix_open(&f, "qwen3-14b")) return;
    ats_err err;
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = 6 * GIB;
    cfg.hostmem_cpu_factor = 0.5;
    ats_policy *pol;
    CHECK(ats_policy_new("ats", &cfg, &pol, &err) == ATS_OK);
    CHECK(ats_policy_place(pol, f.g, &f.nom, &f.pl, &err) == ATS_OK);
    ats_controller *k;
    CHECK(ats_controller_new(pol, f.g, &f.pl, &f.nom, NULL, &k, &err) == ATS_OK);
    CHECK(ats_controller_start(k, 0.0, ats_load_idle(), NULL, &err) == ATS_OK);
    double now = 0;
    int stretched = 0;
    for (int r = 0; r < 30; r++) {
        const ats_plan *plan = ats_controller_plan(k);
        ats_timeline tl;
        CHECK(ats_timeline_init(&tl, plan->n_ops, plan->n_wxfers) == 0);
        ats_predict_opts po = ats_policy_predict_opts(pol, NULL);
        po.prefetch_lead_s = 0;
        double lat;
        CHECK(ats_plan_predict(plan, ats_controller_costs(k), &po, &lat, &tl, &err) == ATS_OK);
        for (int32_t i = 0; i < f.n; i++) {
            f.obs.backend[i] = plan->ops[i].backend;
            f.obs.t_exec[i] = tl.op_end[i] - tl.op_start[i];
            f.obs.t_xfer[i] = plan->ops[i].has_wait_xfer ? f.nom.w[i] : NAN;
            if (f.obs.backend[i] == ATS_CPU && f.obs.t_exec[i] > f.nom.t_cpu[i] * 1.01) stretched = 1;
        }
        ats_timeline_free(&tl);
        now += lat;
        ats_resched_report rep;
        CHECK(ats_controller_observe(k, &f.obs, lat, now, NULL, &rep, &err) == ATS_OK);
        CHECK_MSG(!rep.rescheduled, "round %d: re-scheduled on its own interference (deviation %.3f)", r, rep.deviation);
    }
    CHECK(stretched); /* the scenario did include interference */
    ats_controller_free(k);
    ats_policy_free(pol);
    fix_close(&f);
}

/* prefill chunks of a 4096-token prompt: the caller copies each chunk's nominal costs into the
 * borrowed snapshot before the round (as the simulator does); the round runs exactly as the plan in
 * force predicts under those costs. The estimate must read an idle CPU (before the fix it compared
 * chunk j's observed times with chunk j−1's prediction and read the CPU at 0.86-0.92 of its speed,
 * CPU attention growing from chunk to chunk). */
static void growing_rounds(const char *pname, double h)
{
    ats_hw hw;
    if (!fx_hw("rtx3060-laptop", &hw)) return;
    enum { NCH = 8 };
    ats_graph *gs[NCH];
    ats_costs cs[NCH], nom;
    for (int j = 0; j < NCH; j++) {
        gs[j] = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, 512, 512 * j);
        if (!gs[j]) return;
        CHECK(ats_costs_init(&cs[j], gs[j]->n_ops) == 0);
        CHECK(ats_costs_from_model(gs[j], &hw, &cs[j], NULL) == ATS_OK);
    }
    ats_graph *gd = fx_model_graph("qwen3-14b", ATS_PHASE_DECODE, 1, 4095);
    if (!gd) return;
    int32_t n = gd->n_ops;
    ats_costs cd;
    ats_placement pl;
    ats_round_obs obs;
    ats_err err;
    CHECK(ats_costs_init(&cd, n) == 0 && ats_costs_init(&nom, n) == 0 && ats_placement_init(&pl, n) == 0 &&
          ats_round_obs_init(&obs, n) == 0);
    CHECK(ats_costs_from_model(gd, &hw, &cd, &err) == ATS_OK);
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = (uint64_t)(0.85 * 6 * GIB);
    cfg.hostmem_cpu_factor = h;
    ats_policy *pol;
    CHECK(ats_policy_new(pname, &cfg, &pol, &err) == ATS_OK);
    CHECK(ats_policy_place(pol, gd, &cd, &pl, &err) == ATS_OK);
    ats_costs_copy(&nom, &cs[0]);
    ats_controller *k;
    CHECK(ats_controller_new(pol, gs[0], &pl, &nom, NULL, &k, &err) == ATS_OK);
    CHECK(ats_controller_start(k, 0.0, ats_load_idle(), NULL, &err) == ATS_OK);
    double now = 0, cpu_grows = 0;
    for (int j = 0; j < NCH; j++) {
        ats_costs_copy(&nom, &cs[j]);
        const ats_plan *plan = ats_controller_plan(k);
        ats_timeline tl;
        CHECK(ats_timeline_init(&tl, plan->n_ops, plan->n_wxfers) == 0);
        ats_predict_opts po = ats_policy_predict_opts(pol, NULL);
        double lat;
        CHECK(ats_plan_predict(plan, &cs[j], &po, &lat, &tl, &err) == ATS_OK);
        double cpu = 0;
        for (int32_t i = 0; i < n; i++) {
            obs.backend[i] = plan->ops[i].backend;
            obs.t_exec[i] = tl.op_end[i] - tl.op_start[i];
            obs.t_xfer[i] = plan->ops[i].has_wait_xfer ? cs[j].w[i] : NAN;
            if (obs.backend[i] == ATS_CPU) cpu += obs.t_exec[i];
        }
        ats_timeline_free(&tl);
        if (j == 1) cpu_grows = cpu;
        if (j == NCH - 1) cpu_grows = cpu / cpu_grows;
        now += lat;
        ats_resched_report rep;
        CHECK(ats_controller_observe(k, &obs, lat, now, NULL, &rep, &err) == ATS_OK);
        CHECK_MSG(fabs(rep.load.cpu - 1.0) < 1e-9 && fabs(rep.load.gpu - 1.0) < 1e-9,
                  "%s chunk %d: estimated cpu %.6f gpu %.6f on an idle machine", pname, j, rep.load.cpu, rep.load.gpu);
        CHECK_MSG(!rep.rescheduled, "%s chunk %d: re-scheduled (deviation %.3f)", pname, j, rep.deviation);
    }
    printf("  %s (h = %.2f): CPU time per chunk grew %.2fx over the prompt, estimate stayed at 1\n", pname, h, cpu_grows);
    if (strcmp(pname, "ats-paper") == 0) CHECK(cpu_grows > 1.5); /* the scenario has growing CPU work */
    ats_controller_free(k);
    ats_policy_free(pol);
    ats_round_obs_free(&obs);
    ats_placement_free(&pl);
    ats_costs_free(&cd);
    ats_costs_free(&nom);
    ats_graph_free(gd);
    for (int j = 0; j < NCH; j++) {
        ats_costs_free(&cs[j]);
        ats_graph_free(gs[j]);
    }
}

/* Qwen3-14B decode with a budget just below the model (found by search, from 12 GiB down in 64 MiB
 * steps): nearly everything on the GPU, so the CPU is busy for a sliver of the round. A 3× slower CPU in that sliver does not move the estimate by default, and
 * does with min_busy_frac = 0; the GPU, busy most of the round, is estimated either way. */
static void min_busy(void)
{
    decode_fix f;
    if (!fix_open(&f, "qwen3-14b")) return;
    ats_err err;
    ats_policy *pol = NULL;
    int found = 0;
    for (uint64_t b = 12 * GIB; b > 4 * GIB && !found; b -= 64ull << 20) {
        ats_policy_cfg cfg = ats_policy_cfg_default();
        cfg.vram_budget_bytes = b;
        ats_policy_free(pol);
        CHECK(ats_policy_new("static", &cfg, &pol, &err) == ATS_OK);
        CHECK(ats_policy_place(pol, f.g, &f.nom, &f.pl, &err) == ATS_OK);
        double cpu = 0, all = 0;
        for (int32_t i = 0; i < f.n; i++) {
            double t = f.pl.backend[i] == ATS_CPU ? f.nom.t_cpu[i] / (1.0 / 3.0) : f.nom.t_gpu[i] / 0.5;
            all += t;
            if (f.pl.backend[i] == ATS_CPU) cpu += t;
        }
        found = cpu > 0 && cpu < 0.01 * all;
    }
    CHECK(found);
    for (int v = 0; v < 2 && found; v++) {
        ats_controller_cfg cc = ats_controller_cfg_default();
        if (v) cc.min_busy_frac = 0;
        ats_controller *k;
        CHECK(ats_controller_new(pol, f.g, &f.pl, &f.nom, &cc, &k, &err) == ATS_OK);
        CHECK(ats_controller_start(k, 0.0, ats_load_idle(), NULL, &err) == ATS_OK);
        ats_load truth = {1.0 / 3.0, 0.5, 1.0};
        double lat = fake_round(k, &f.nom, truth, &f.obs), cpu = 0;
        for (int32_t i = 0; i < f.n; i++)
            if (f.obs.backend[i] == ATS_CPU) cpu += f.obs.t_exec[i];
        CHECK_MSG(cpu > 0 && cpu < 0.02 * lat, "CPU busy %.3g of %.3g s", cpu, lat); /* the premise */
        ats_resched_report r;
        CHECK(ats_controller_observe(k, &f.obs, lat, lat, NULL, &r, &err) == ATS_OK);
        CHECK_NEAR(r.load.gpu, 0.5, 1e-9);
        if (v) CHECK_NEAR(r.load.cpu, 1.0 / 3.0, 1e-9);
        else CHECK_NEAR(r.load.cpu, 1.0, 1e-12);
        ats_controller_free(k);
    }
    ats_policy_free(pol);
    fix_close(&f);
}

static void bad_cfg(void)
{
    ats_controller *k = NULL;
    ats_err err;
    ats_controller_cfg c = ats_controller_cfg_default();
    c.eps = NAN;
    CHECK(ats_controller_new(NULL, NULL, NULL, NULL, &c, &k, &err) == ATS_EINVAL);
    CHECK(strstr(err.msg, "eps") != NULL);
    c = ats_controller_cfg_default();
    c.min_busy_frac = 1.0;
    CHECK(ats_controller_new(NULL, NULL, NULL, NULL, &c, &k, &err) == ATS_EINVAL);
    CHECK(strstr(err.msg, "min_busy_frac") != NULL);
    c = ats_controller_cfg_default();
    c.tpot_window = 0;
    CHECK(ats_controller_new(NULL, NULL, NULL, NULL, &c, &k, &err) == ATS_EINVAL);
    c = ats_controller_cfg_default();
    CHECK(ats_controller_new(NULL, NULL, NULL, NULL, &c, &k, &err) == ATS_EINVAL);
}

int main(void)
{
    uint64_t rng = tu_seed("test_controller");
    scenario("ats", 1, &rng);
    scenario("ats-paper", 1, &rng);
    scenario("static", 0, &rng);
    rate_limit(&rng);
    own_interference();
    growing_rounds("ats-paper", 1.0);
    growing_rounds("ats", 0.5);
    min_busy();
    bad_cfg();
    return tu_finish("test_controller");
}
