/*
 * test_costs — cost snapshots: validation messages, the roofline model on a real graph (hand-checked
 * op, PCIe terms, experts), load scaling, load estimation recovering the factors it was given, and
 * hardware-description checks; a measured op table (ats_hw.op_table): its time at measured points,
 * piecewise-linear interpolation between them, other shapes and token counts outside the range by the
 * entry's marginal time per roofline second (a fixed cost not scaled), the roofline for kinds it
 * lacks, and its validation.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ats/costs.h"
#include "sched_fix.h"
#include "testutil.h"

static void test_validate(uint64_t *rng)
{
    ats_costs c;
    CHECK(ats_costs_init(&c, 0) == ATS_EINVAL);
    CHECK(ats_costs_init(&c, 10) == ATS_OK);
    for (int i = 0; i < 10; i++) {
        c.t_cpu[i] = tu_uniform(rng, 0.1, 1);
        c.t_gpu[i] = tu_uniform(rng, 0.1, 1);
        c.w[i] = tu_uniform(rng, 0.1, 1);
        c.c[i] = tu_uniform(rng, 0.1, 1);
    }
    ats_err err;
    CHECK(ats_costs_validate(&c, &err) == ATS_OK);
    double bad[3] = {NAN, -1.0, INFINITY};
    for (int k = 0; k < 3; k++) {
        double keep = c.c[7];
        c.c[7] = bad[k];
        CHECK(ats_costs_validate(&c, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, "'c'[7]") != NULL, "%s", err.msg);
        c.c[7] = keep;
    }
    /* the measured-profile hook */
    ats_op_cost m = {0.5, 0.25, 0.125, 0.0625, 0.03125};
    CHECK(ats_costs_set_op(&c, 4, &m, &err) == ATS_OK);
    CHECK(c.t_cpu[4] == 0.5 && c.t_gpu[4] == 0.25 && c.w[4] == 0.125 && c.c[4] == 0.0625 && c.w_expert[4] == 0.03125);
    m.w = NAN;
    CHECK(ats_costs_set_op(&c, 4, &m, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "'w'[4]") != NULL, "%s", err.msg);
    CHECK(c.w[4] == 0.125); /* unchanged */
    m.w = 1;
    CHECK(ats_costs_set_op(&c, 10, &m, &err) == ATS_EINVAL);
    ats_costs d;
    CHECK(ats_costs_init(&d, 10) == ATS_OK);
    ats_costs_copy(&d, &c);
    CHECK(memcmp(d.t_cpu, c.t_cpu, 10 * sizeof(double)) == 0 && memcmp(d.w, c.w, 10 * sizeof(double)) == 0);
    ats_costs_free(&d);
    ats_costs_free(&c);
}

static void test_model(void)
{
    ats_hw hw;
    if (!fx_hw("rtx4090-desktop", &hw)) return;
    const char *models[] = {"qwen3-14b", "qwen3-30b-a3b"};
    for (int m = 0; m < 2; m++) {
        ats_graph *g = fx_model_graph(models[m], ATS_PHASE_DECODE, 1, 2047);
        if (!g) continue;
        ats_costs c;
        ats_err err;
        CHECK(ats_costs_init(&c, g->n_ops) == ATS_OK);
        CHECK_MSG(ats_costs_from_model(g, &hw, &c, &err) == ATS_OK, "%s", err.msg);
        CHECK(ats_costs_validate(&c, &err) == ATS_OK);
        CHECK(c.c[0] == 0.0);
        { /* a host switch cost (pcie.switch_us) adds to every activation crossing, nothing else */
            ats_costs c2;
            ats_hw h2 = hw;
            h2.host_switch_s = 20e-6;
            CHECK(ats_costs_init(&c2, g->n_ops) == ATS_OK && ats_costs_from_model(g, &h2, &c2, &err) == ATS_OK);
            for (int32_t i = 1; i < g->n_ops; i++) {
                CHECK_REL(c2.c[i], c.c[i] + 20e-6, 1e-12, 0);
                CHECK(c2.w[i] == c.w[i] && c2.t_cpu[i] == c.t_cpu[i] && c2.t_gpu[i] == c.t_gpu[i]);
            }
            CHECK(c2.c[0] == 0.0);
            ats_costs_free(&c2);
        }
        int checked = 0;
        for (int32_t i = 0; i < g->n_ops; i++) {
            const ats_op *op = &g->ops[i];
            if (op->kind == ATS_OP_MATMUL) {
                CHECK_MSG(c.t_gpu[i] < c.t_cpu[i], "%s: GPU %g s >= CPU %g s", op->name, c.t_gpu[i], c.t_cpu[i]);
                if (!checked) {
                    /* decode GEMV is bandwidth bound: bytes / (bw · eff) · q_scale + overhead */
                    double bytes = (double)op->weight_bytes + (double)op->act_in_bytes + (double)op->act_out_bytes;
                    double tb = bytes / (hw.cpu_mem_bw * hw.eff_cpu.gemv_bw);
                    double tf = op->flop / (hw.cpu_flops * hw.eff_cpu.gemm_flop);
                    double want = (tb > tf ? tb : tf) * hw.eff_cpu.q_scale[op->qtype] + hw.cpu_op_overhead_s;
                    CHECK_REL(c.t_cpu[i], want, 1e-12, 0);
                    CHECK_REL(c.w[i], hw.pcie_latency_s + (double)op->weight_bytes / hw.pcie_h2d_bw, 1e-12, 0);
                    CHECK_REL(c.c[i], hw.pcie_latency_s + hw.host_switch_s + (double)op->act_in_bytes / hw.pcie_sm_copy_bw,
                              1e-12, 0);
                    checked = 1;
                }
            }
            if (op->kind == ATS_OP_EXPERTS) {
                /* only the active experts move and are read */
                CHECK_REL(c.w[i], hw.pcie_latency_s + op->n_expert_active * (double)op->expert_bytes / hw.pcie_h2d_bw,
                          1e-12, 0);
                CHECK_REL(c.w_expert[i], (double)op->expert_bytes / hw.pcie_h2d_bw, 1e-12, 0);
                CHECK(c.w[i] < hw.pcie_latency_s + (double)op->weight_bytes / hw.pcie_h2d_bw);
            }
        }
        CHECK(checked);
        /* bad hardware is refused with the field named */
        ats_hw bad = hw;
        bad.pcie_h2d_bw = 0;
        CHECK(ats_costs_from_model(g, &bad, &c, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, "pcie_h2d_bw") != NULL, "%s", err.msg);
        bad = hw;
        bad.hostmem_cpu_factor = 1.5;
        CHECK(ats_hw_validate(&bad, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, "hostmem_cpu_factor") != NULL, "%s", err.msg);
        bad = hw;
        bad.n_copy_engines = 0;
        CHECK(ats_hw_validate(&bad, &err) == ATS_EINVAL);
        bad = hw;
        bad.eff_gpu.gemv_bw = NAN;
        CHECK(ats_hw_validate(&bad, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, "eff_gpu.gemv_bw") != NULL, "%s", err.msg);
        ats_costs_free(&c);
        ats_graph_free(g);
    }
    ats_hw z;
    ats_hw_init(&z);
    CHECK(ats_hw_validate(&z, NULL) == ATS_EINVAL); /* zero rates */
}

static void test_scale_and_estimate(uint64_t *rng)
{
    for (int it = 0; it < 50; it++) {
        int n = 5 + (int)(tu_rand(rng) % 100);
        ats_costs nom, cur;
        ats_round_obs obs;
        CHECK(ats_costs_init(&nom, n) == 0 && ats_costs_init(&cur, n) == 0 && ats_round_obs_init(&obs, n) == 0);
        for (int i = 0; i < n; i++) {
            nom.t_cpu[i] = tu_uniform(rng, 1e-4, 1e-2);
            nom.t_gpu[i] = tu_uniform(rng, 1e-5, 1e-3);
            nom.w[i] = tu_uniform(rng, 1e-4, 1e-2);
            nom.c[i] = i ? tu_uniform(rng, 1e-6, 1e-4) : 0;
        }
        ats_load L = {tu_uniform(rng, 0.05, 1), tu_uniform(rng, 0.05, 1), tu_uniform(rng, 0.05, 1)};
        ats_costs_scale(&nom, L, &cur);
        CHECK_REL(cur.t_cpu[n / 2], nom.t_cpu[n / 2] / L.cpu, 1e-15, 0);
        CHECK_REL(cur.w[n - 1], nom.w[n - 1] / L.pcie, 1e-15, 0);
        int any_cpu = 0, any_gpu = 0;
        for (int i = 0; i < n; i++) {
            obs.backend[i] = (uint8_t)(tu_rand(rng) % 2);
            obs.t_exec[i] = obs.backend[i] ? cur.t_gpu[i] : cur.t_cpu[i];
            obs.t_xfer[i] = tu_rand(rng) % 3 == 0 ? cur.w[i] : NAN;
            any_cpu |= !obs.backend[i];
            any_gpu |= obs.backend[i];
        }
        ats_load prev = {0.7, 0.7, 0.7}, est;
        ats_load_estimate(&nom, &obs, prev, &est);
        if (any_cpu) CHECK_REL(est.cpu, L.cpu, 1e-12, 0);
        else CHECK(est.cpu == prev.cpu);
        if (any_gpu) CHECK_REL(est.gpu, L.gpu, 1e-12, 0);
        else CHECK(est.gpu == prev.gpu);
        /* no transfers: PCIe keeps the previous factor */
        for (int i = 0; i < n; i++) obs.t_xfer[i] = NAN;
        ats_load_estimate(&nom, &obs, prev, &est);
        CHECK(est.pcie == prev.pcie);
        /* clipping */
        for (int i = 0; i < n; i++) obs.t_exec[i] = 1e3;
        ats_load_estimate(&nom, &obs, prev, &est);
        CHECK(est.cpu >= 0.01 && est.gpu >= 0.01);
        ats_round_obs_free(&obs);
        ats_costs_free(&nom);
        ats_costs_free(&cur);
    }
}

/* The roofline of a CPU matmul by hand (as documented in ats/costs.h, without the overhead). */
static double cpu_matmul_roof(const ats_hw *hw, const ats_op *op, double flop, double bytes)
{
    double tf = flop / (hw->cpu_flops * hw->eff_cpu.gemm_flop);
    double tb = bytes / (hw->cpu_mem_bw * hw->eff_cpu.gemv_bw);
    return (tf > tb ? tf : tb) * hw->eff_cpu.q_scale[op->qtype];
}

static void test_table(uint64_t *rng)
{
    ats_hw hw;
    if (!fx_hw("rtx4090-desktop", &hw)) return;
    ats_graph *g16 = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, 16, 0);
    ats_graph *g64 = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, 64, 0);
    ats_graph *g40 = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, 40, 0);
    ats_graph *g1 = fx_model_graph("qwen3-14b", ATS_PHASE_PREFILL, 1, 0);
    if (!g16 || !g64 || !g40 || !g1) goto out;
    int32_t q = -1, other = -1, norm = -1, far = -1;
    for (int32_t i = 0; i < g16->n_ops; i++) {
        const ats_op *op = &g16->ops[i];
        if (op->kind == ATS_OP_MATMUL && op->role == ATS_ROLE_ATTN_Q && q < 0) q = i;
        if (op->kind == ATS_OP_NORM && norm < 0) norm = i;
    }
    CHECK(q >= 0 && norm >= 0);
    if (q < 0 || norm < 0) goto out;
    for (int32_t i = 0; i < g16->n_ops && other < 0; i++) {
        const ats_op *op = &g16->ops[i];
        const double ratio = (double)(op->n_out * op->n_in) / (double)(g16->ops[q].n_out * g16->ops[q].n_in);
        if (op->kind == ATS_OP_MATMUL && op->qtype == g16->ops[q].qtype && ratio != 1.0 && ratio > 0.25 && ratio < 4.0)
            other = i;
    }
    for (int32_t i = 0; i < g16->n_ops && far < 0; i++) {
        const ats_op *op = &g16->ops[i];
        const double ratio = (double)(op->n_out * op->n_in) / (double)(g16->ops[q].n_out * g16->ops[q].n_in);
        if (op->kind == ATS_OP_MATMUL && op->qtype == g16->ops[q].qtype && (ratio < 0.25 || ratio > 4.0)) far = i;
    }
    CHECK(other >= 0 && far >= 0);
    if (other < 0 || far < 0) goto out;
    /* no table: the roofline, kept for comparison */
    ats_costs c0, c;
    ats_err err;
    CHECK(ats_costs_init(&c0, g16->n_ops) == ATS_OK && ats_costs_init(&c, g16->n_ops) == ATS_OK);
    CHECK(ats_costs_from_model(g16, &hw, &c0, &err) == ATS_OK);
    /* one CPU entry: attn_q's role, type and shape, measured at 16 and 64 tokens */
    ats_prof_entry *e = &hw.op_table.e[0];
    memset(e, 0, sizeof *e);
    const ats_op *oq = &g16->ops[q];
    e->backend = ATS_CPU;
    e->kind = oq->kind;
    e->role = oq->role;
    e->qtype = oq->qtype;
    e->n_out = oq->n_out;
    e->n_in = oq->n_in;
    e->n_points = 2;
    e->tokens[0] = 16;
    e->tokens[1] = 64;
    e->t_s[0] = tu_uniform(rng, 1e-4, 2e-4);
    e->t_s[1] = tu_uniform(rng, 3e-4, 6e-4);
    ats_op_work(g16, oq, &e->flop[0], &e->bytes[0]);
    ats_op_work(g64, &g64->ops[q], &e->flop[1], &e->bytes[1]);
    hw.op_table.n = 1;
    CHECK_MSG(ats_hw_validate(&hw, &err) == ATS_OK, "%s", err.msg);
    /* at the measured points: the table's times, exactly */
    CHECK(ats_costs_from_model(g16, &hw, &c, &err) == ATS_OK);
    CHECK_MSG(c.t_cpu[q] == e->t_s[0], "16 tokens: %.17g s, table %.17g s", c.t_cpu[q], e->t_s[0]);
    /* kinds the table lacks (norm) and the GPU side: the roofline, unchanged */
    CHECK(c.t_cpu[norm] == c0.t_cpu[norm]);
    for (int32_t i = 0; i < g16->n_ops; i++) CHECK(c.t_gpu[i] == c0.t_gpu[i] && c.w[i] == c0.w[i] && c.c[i] == c0.c[i]);
    /* another matmul shape: the table's time plus the entry's marginal time per roofline second
       times the difference in roofline time, at least the proportional value (by hand) */
    double f, b;
    double r16 = cpu_matmul_roof(&hw, oq, e->flop[0], e->bytes[0]), r64 = cpu_matmul_roof(&hw, oq, e->flop[1], e->bytes[1]);
    double slope = (e->t_s[1] - e->t_s[0]) / (r64 - r16);
    CHECK(r64 > r16 && slope > 0);
    ats_op_work(g16, &g16->ops[other], &f, &b);
    double rq = cpu_matmul_roof(&hw, &g16->ops[other], f, b);
    double want = fmax(e->t_s[0] + slope * (rq - r16), e->t_s[0] * rq / r16);
    CHECK_REL(c.t_cpu[other], want, 1e-12, 0);
    CHECK(c.t_cpu[other] != e->t_s[0]);
    /* a shape more than 4x away in size (attn_k against attn_q): the roofline, not the table */
    CHECK_MSG(c.t_cpu[far] == c0.t_cpu[far], "op %d, %lldx%lld: %g s, the roofline's %g s", far,
              (long long)g16->ops[far].n_out, (long long)g16->ops[far].n_in, c.t_cpu[far], c0.t_cpu[far]);
    ats_costs_free(&c);
    CHECK(ats_costs_init(&c, g64->n_ops) == ATS_OK && ats_costs_from_model(g64, &hw, &c, &err) == ATS_OK);
    CHECK(c.t_cpu[q] == e->t_s[1]);
    ats_costs_free(&c);
    /* between the points: linear in tokens; 40 tokens is halfway; flop and bytes are linear in tokens
       for a matmul, so the roofline ratio is 1 up to rounding */
    CHECK(ats_costs_init(&c, g40->n_ops) == ATS_OK && ats_costs_from_model(g40, &hw, &c, &err) == ATS_OK);
    CHECK_REL(c.t_cpu[q], 0.5 * (e->t_s[0] + e->t_s[1]), 1e-12, 0);
    CHECK_REL(ats_prof_op_time(g40, &g40->ops[q], &hw, ATS_CPU), 0.5 * (e->t_s[0] + e->t_s[1]), 1e-12, 0);
    CHECK(isnan(ats_prof_op_time(g40, &g40->ops[q], &hw, ATS_GPU))); /* no GPU entry */
    ats_costs_free(&c);
    /* below the first point (1 token): the first point's time less slope times the roofline
       difference, not below the proportional value */
    CHECK(ats_costs_init(&c, g1->n_ops) == ATS_OK && ats_costs_from_model(g1, &hw, &c, &err) == ATS_OK);
    ats_op_work(g1, &g1->ops[q], &f, &b);
    rq = cpu_matmul_roof(&hw, oq, f, b);
    want = fmax(e->t_s[0] + slope * (rq - r16), e->t_s[0] * rq / r16);
    CHECK_REL(c.t_cpu[q], want, 1e-12, 0);
    CHECK(c.t_cpu[q] < e->t_s[0]);
    ats_costs_free(&c);
    /* a fixed cost is not scaled: with times t0 + slope·r at both points (t0 = 1 ms of launches), an
       op of other work gets t0 + slope·rq exactly, where the proportional rule would scale t0 too */
    {
        ats_hw h2 = hw;
        ats_prof_entry *x = &h2.op_table.e[0];
        double t0 = 1e-3, sl = 3.0;
        x->t_s[0] = t0 + sl * r16;
        x->t_s[1] = t0 + sl * r64;
        ats_costs c2;
        CHECK(ats_costs_init(&c2, g16->n_ops) == ATS_OK && ats_costs_from_model(g16, &h2, &c2, &err) == ATS_OK);
        ats_op_work(g16, &g16->ops[other], &f, &b);
        rq = cpu_matmul_roof(&hw, &g16->ops[other], f, b);
        CHECK_REL(c2.t_cpu[other], fmax(t0 + sl * rq, x->t_s[0] * rq / r16), 1e-9, 0);
        /* ffn_gate (3.4x attn_q's size): the proportional value t·rq/rm wins above the measured size */
        CHECK(rq > r16 && c2.t_cpu[other] >= t0 + sl * rq);
        ats_costs_free(&c2);
    }
    ats_costs_free(&c0);
    /* attention is keyed by its widths (n_head·head_dim, n_head_kv·head_dim): an entry of another
       model's (stories260K: 64 x 32) or of none (0 x 0) prices no Qwen3-14B attention */
    {
        int32_t at = -1;
        for (int32_t i = 0; i < g16->n_ops && at < 0; i++)
            if (g16->ops[i].kind == ATS_OP_ATTN) at = i;
        CHECK(at >= 0);
        int64_t qo, qi;
        ats_prof_op_shape(g16, &g16->ops[at], &qo, &qi);
        CHECK(qo == g16->arch.n_head * g16->arch.head_dim && qi == g16->arch.n_head_kv * g16->arch.head_dim);
        ats_hw h3 = hw;
        ats_prof_entry *x = &h3.op_table.e[0];
        x->kind = ATS_OP_ATTN;
        x->role = g16->ops[at].role;
        x->qtype = g16->ops[at].qtype;
        const int64_t widths[3][2] = {{64, 32}, {0, 0}, {qo, qi}};
        for (int k = 0; k < 3; k++) {
            x->n_out = widths[k][0];
            x->n_in = widths[k][1];
            const double t = ats_prof_op_time(g16, &g16->ops[at], &h3, ATS_CPU);
            CHECK_MSG(k < 2 ? isnan(t) : isfinite(t), "attention entry %lldx%lld: %g s", (long long)x->n_out,
                      (long long)x->n_in, t);
        }
    }
    /* bad entries are refused, naming entry and point */
    e->tokens[1] = 16;
    CHECK(ats_hw_validate(&hw, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "op_table[0].tokens[1]") != NULL, "%s", err.msg);
    e->tokens[1] = 64;
    e->t_s[1] = 0;
    CHECK(ats_hw_validate(&hw, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "op_table[0].t_s[1]") != NULL, "%s", err.msg);
    e->t_s[1] = 1e-4;
    e->backend = 2;
    CHECK(ats_hw_validate(&hw, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "op_table[0].backend") != NULL, "%s", err.msg);
out:
    ats_graph_free(g16);
    ats_graph_free(g64);
    ats_graph_free(g40);
    ats_graph_free(g1);
}

/* ats_hw_cpu_mem_share: beta(a) = bw(a T) / bw(T), bw linear through (0, 0) and the curve's points,
 * constant beyond the last; a exactly without a curve; and ats_hw_validate on malformed curves. */
static void test_mem_share(uint64_t *rng)
{
    ats_hw hw;
    CHECK(fx_hw("h200-host", &hw));
    hw.cpu_bw_n = 0;
    for (int i = 0; i < 1000; i++) {
        double a = tu_uniform(rng, 0.001, 1.0);
        CHECK(ats_hw_cpu_mem_share(&hw, a) == a); /* bit for bit: the compute-fraction model */
    }
    CHECK(ats_hw_cpu_mem_share(&hw, 1.0) == 1.0);
    /* a saturating curve: 20, 40, 60, 64 GB/s at 2, 4, 8, 16 threads; T = 16 */
    hw.cpu_threads = 16;
    hw.cpu_bw_n = 4;
    const int32_t th[4] = {2, 4, 8, 16};
    const double bw[4] = {20e9, 40e9, 60e9, 64e9};
    for (int k = 0; k < 4; k++) hw.cpu_bw_threads[k] = th[k], hw.cpu_bw_Bps[k] = bw[k];
    ats_err err = {{0}};
    CHECK_MSG(ats_hw_validate(&hw, &err) == ATS_OK, "%s", err.msg);
    CHECK(ats_hw_cpu_mem_share(&hw, 1.0) == 1.0);
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.25), 40.0 / 64.0, 1e-15); /* at a point: 4 threads */
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.5), 60.0 / 64.0, 1e-15);  /* 8 threads */
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.4), (40.0 + 20.0 * 2.4 / 4.0) / 64.0, 1e-15); /* 6.4 threads */
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.75), (60.0 + 4.0 * 4.0 / 8.0) / 64.0, 1e-15); /* 12 threads */
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 1.0 / 16.0), 10.0 / 64.0, 1e-15); /* 1 thread: through (0, 0) */
    CHECK(ats_hw_cpu_mem_share(&hw, 0.0) == 0.0);
    double prev = 0.0;
    for (int i = 1; i <= 200; i++) { /* saturating: above a, increasing, at most 1 */
        double a = i / 200.0, b = ats_hw_cpu_mem_share(&hw, a);
        CHECK_MSG(b >= a && b <= 1.0 && b > prev, "a %g: beta %g (previous %g)", a, b, prev);
        prev = b;
    }
    CHECK(ats_hw_cpu_mem_share(&hw, 0.4) > 0.4);
    /* T beyond the last point: bw constant there, so beta = 1 while a T is past the last point */
    hw.cpu_threads = 32;
    CHECK(ats_hw_cpu_mem_share(&hw, 0.5) == 1.0);
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.125), 40.0 / 64.0, 1e-15);
    /* a linear curve through the origin gives beta = a */
    hw.cpu_threads = 16;
    for (int k = 0; k < 4; k++) hw.cpu_bw_Bps[k] = 5e9 * th[k];
    for (int i = 0; i < 100; i++) {
        double a = tu_uniform(rng, 0.01, 1.0);
        CHECK_NEAR(ats_hw_cpu_mem_share(&hw, a), a, 1e-14);
    }
    /* validation */
    ats_hw b = hw;
    b.cpu_bw_threads[2] = 4;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "hw 'cpu_bw_threads[2]': 4 (must be >= 1 and above the previous point)") != NULL, "%s",
              err.msg);
    b = hw;
    b.cpu_bw_threads[0] = 0;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL && strstr(err.msg, "cpu_bw_threads[0]") != NULL);
    b = hw;
    b.cpu_bw_Bps[3] = -1e9;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "hw 'cpu_bw_Bps[3]': -1e+09 (must be a finite value > 0)") != NULL, "%s", err.msg);
    b = hw;
    b.cpu_bw_Bps[1] = NAN;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL && strstr(err.msg, "cpu_bw_Bps[1]") != NULL);
    b = hw;
    b.cpu_bw_n = ATS_HW_MAX_BW_POINTS + 1;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL && strstr(err.msg, "cpu_bw_n") != NULL);
}

/* ats_hw_cpu_mem_share with a measured load response (cpu_load_*): 1 / slowdown, linear in the
 * slowdown between the points and (1, 1), the share at the lowest point scaled by a below it; it
 * takes precedence over the DRAM curve; ats_hw_validate refuses malformed points. */
static void test_load_response(void)
{
    ats_hw hw;
    CHECK(fx_hw("h200-host", &hw));
    hw.cpu_threads = 16;
    hw.cpu_bw_n = 1; /* a DRAM curve too: the response wins */
    hw.cpu_bw_threads[0] = 16;
    hw.cpu_bw_Bps[0] = 100e9;
    hw.cpu_load_n = 2;
    hw.cpu_load_avail[0] = 0.2, hw.cpu_load_slow[0] = 2.0;
    hw.cpu_load_avail[1] = 0.6, hw.cpu_load_slow[1] = 1.2;
    ats_err err = {{0}};
    CHECK_MSG(ats_hw_validate(&hw, &err) == ATS_OK, "%s", err.msg);
    CHECK(ats_hw_cpu_mem_share(&hw, 1.0) == 1.0);
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.6), 1.0 / 1.2, 1e-15);
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.2), 0.5, 1e-15);
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.4), 1.0 / 1.6, 1e-15); /* halfway: slowdown 1.6 */
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.8), 1.0 / 1.1, 1e-15); /* towards (1, 1) */
    CHECK_NEAR(ats_hw_cpu_mem_share(&hw, 0.1), 0.25, 1e-15);     /* below: 0.5 x 0.1 / 0.2 */
    CHECK(ats_hw_cpu_mem_share(&hw, 0.0) == 0.0);
    double prev = 0.0;
    for (int i = 1; i <= 100; i++) {
        double b = ats_hw_cpu_mem_share(&hw, i / 100.0);
        CHECK(b > prev && b <= 1.0);
        prev = b;
    }
    ats_hw b = hw;
    b.cpu_load_avail[1] = 0.2;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "hw 'cpu_load_avail[1]': 0.2 (must be in (0, 1), above the previous point)") != NULL, "%s",
              err.msg);
    b = hw;
    b.cpu_load_slow[0] = 0.9;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL && strstr(err.msg, "cpu_load_slow[0]") != NULL);
    b = hw;
    b.cpu_load_slow[1] = 2.5; /* more CPU left, slower: refused */
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL && strstr(err.msg, "cpu_load_slow[1]") != NULL);
    b = hw;
    b.cpu_load_avail[0] = 1.0;
    CHECK(ats_hw_validate(&b, &err) == ATS_EINVAL && strstr(err.msg, "cpu_load_avail[0]") != NULL);
}

int main(void)
{
    uint64_t rng = tu_seed("test_costs");
    test_validate(&rng);
    test_model();
    test_scale_and_estimate(&rng);
    test_table(&rng);
    test_mem_share(&rng);
    test_load_response();
    return tu_finish("test_costs");
}
