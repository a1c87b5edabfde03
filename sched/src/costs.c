/* Cost snapshots, the analytic roofline cost model, load scaling and load estimation (ats/costs.h),
 * and hardware-description checks (ats/hw.h). */
#include "ats/costs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- hardware description ---------------------------------------------------------------- */

void ats_hw_init(ats_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    for (int i = 0; i < 64; i++) {
        hw->eff_cpu.q_scale[i] = 1.0;
        hw->eff_gpu.q_scale[i] = 1.0;
    }
    hw->gemm_min_tokens = 8;
    hw->n_copy_engines = 1;
    hw->hostmem_cpu_factor = 1.0;
    hw->hostmem_dma_factor = 1.0;
}

#define HW_POS(f)                                                                                \
    do {                                                                                         \
        if (!(hw->f > 0) || !isfinite((double)hw->f))                                            \
            return ats_err_set(err, ATS_EINVAL, "hw '%s': %g (must be a finite value > 0)", #f,  \
                               (double)hw->f);                                                   \
    } while (0)
#define HW_NONNEG(f)                                                                             \
    do {                                                                                         \
        if (!(hw->f >= 0) || !isfinite((double)hw->f))                                           \
            return ats_err_set(err, ATS_EINVAL, "hw '%s': %g (must be a finite value >= 0)", #f, \
                               (double)hw->f);                                                   \
    } while (0)
#define HW_FRAC(expr, name)                                                                      \
    do {                                                                                         \
        double v_ = (expr);                                                                      \
        if (!(v_ > 0 && v_ <= 1))                                                                \
            return ats_err_set(err, ATS_EINVAL, "hw '%s': %g (must be in (0, 1])", name, v_);    \
    } while (0)

static enum ats_status eff_validate(const ats_hw_eff *e, const char *side, ats_err *err)
{
    char name[64];
    const double *v[4] = {&e->gemv_bw, &e->gemm_flop, &e->attn_bw, &e->attn_flop};
    const char *nm[4] = {"gemv_bw", "gemm_flop", "attn_bw", "attn_flop"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", side, nm[i]);
        HW_FRAC(*v[i], name);
    }
    for (int i = 0; i < 64; i++)
        if (!(e->q_scale[i] > 0) || !isfinite(e->q_scale[i]))
            return ats_err_set(err, ATS_EINVAL, "hw '%s.q_scale[%d]': %g (must be a finite value > 0)",
                               side, i, e->q_scale[i]);
    return ATS_OK;
}

static enum ats_status table_validate(const ats_prof_table *t, ats_err *err)
{
    if (t->n < 0 || t->n > ATS_PROF_MAX_ENTRIES)
        return ats_err_set(err, ATS_EINVAL, "hw 'op_table.n': %d (must be in 0..%d)", (int)t->n, ATS_PROF_MAX_ENTRIES);
    for (int32_t i = 0; i < t->n; i++) {
        const ats_prof_entry *e = &t->e[i];
        if (e->backend != ATS_CPU && e->backend != ATS_GPU)
            return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d].backend': %d (must be 0 = CPU or 1 = GPU)", (int)i,
                               (int)e->backend);
        if (e->kind < 0 || e->kind >= ATS_OP_KIND_COUNT)
            return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d].kind': %d (no such op kind)", (int)i, (int)e->kind);
        if (e->role < 0 || e->role >= ATS_ROLE_COUNT)
            return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d].role': %d (no such role)", (int)i, (int)e->role);
        if (e->qtype < 0 || e->qtype >= 64)
            return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d].qtype': %d (must be in 0..63)", (int)i, (int)e->qtype);
        if (e->n_out < 0 || e->n_in < 0)
            return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d]' shape %lld x %lld (must be >= 0)", (int)i,
                               (long long)e->n_out, (long long)e->n_in);
        if (e->n_points < 1 || e->n_points > ATS_PROF_MAX_POINTS)
            return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d].n_points': %d (must be in 1..%d)", (int)i,
                               (int)e->n_points, ATS_PROF_MAX_POINTS);
        for (int32_t k = 0; k < e->n_points; k++) {
            if (e->tokens[k] < 1 || (k > 0 && e->tokens[k] <= e->tokens[k - 1]))
                return ats_err_set(err, ATS_EINVAL,
                                   "hw 'op_table[%d].tokens[%d]': %lld (must be >= 1 and above the previous point)",
                                   (int)i, (int)k, (long long)e->tokens[k]);
            if (!(e->t_s[k] > 0) || !isfinite(e->t_s[k]))
                return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d].t_s[%d]': %g (must be a finite value > 0)",
                                   (int)i, (int)k, e->t_s[k]);
            if (!(e->flop[k] >= 0) || !isfinite(e->flop[k]) || !(e->bytes[k] >= 0) || !isfinite(e->bytes[k]))
                return ats_err_set(err, ATS_EINVAL, "hw 'op_table[%d]' point %d: flop %g, bytes %g (must be finite, >= 0)",
                                   (int)i, (int)k, e->flop[k], e->bytes[k]);
        }
    }
    return ATS_OK;
}

static enum ats_status bw_curve_validate(const ats_hw *hw, ats_err *err)
{
    if (hw->cpu_bw_n < 0 || hw->cpu_bw_n > ATS_HW_MAX_BW_POINTS)
        return ats_err_set(err, ATS_EINVAL, "hw 'cpu_bw_n': %d (must be in 0..%d)", (int)hw->cpu_bw_n,
                           ATS_HW_MAX_BW_POINTS);
    for (int32_t k = 0; k < hw->cpu_bw_n; k++) {
        if (hw->cpu_bw_threads[k] < 1 || (k > 0 && hw->cpu_bw_threads[k] <= hw->cpu_bw_threads[k - 1]))
            return ats_err_set(err, ATS_EINVAL,
                               "hw 'cpu_bw_threads[%d]': %d (must be >= 1 and above the previous point)", (int)k,
                               (int)hw->cpu_bw_threads[k]);
        if (!(hw->cpu_bw_Bps[k] > 0) || !isfinite(hw->cpu_bw_Bps[k]))
            return ats_err_set(err, ATS_EINVAL, "hw 'cpu_bw_Bps[%d]': %g (must be a finite value > 0)", (int)k,
                               hw->cpu_bw_Bps[k]);
    }
    return ATS_OK;
}

/* DRAM read rate at n threads [bytes/s]: linear through (0, 0) and the curve's points, constant
 * beyond the last one (ats_hw_cpu_mem_share). */
static double bw_at_threads(const ats_hw *hw, double n)
{
    const int32_t m = hw->cpu_bw_n;
    if (n >= hw->cpu_bw_threads[m - 1]) return hw->cpu_bw_Bps[m - 1];
    double t0 = 0.0, b0 = 0.0;
    for (int32_t k = 0; k < m; k++) {
        double t1 = hw->cpu_bw_threads[k], b1 = hw->cpu_bw_Bps[k];
        if (n <= t1) return b0 + (b1 - b0) * (n - t0) / (t1 - t0);
        t0 = t1;
        b0 = b1;
    }
    return hw->cpu_bw_Bps[m - 1]; /* not reached: n < the last point */
}

/* 1 / slowdown at availability a, linear in the slowdown between the measured points and (1, 1);
 * below the lowest point the share it gives, times a / that point's availability. */
static double load_share(const ats_hw *hw, double a)
{
    const int32_t m = hw->cpu_load_n;
    const double *x = hw->cpu_load_avail, *s = hw->cpu_load_slow;
    if (a < x[0]) return a / x[0] / s[0];
    for (int32_t k = 0; k < m; k++) {
        double x1 = k + 1 < m ? x[k + 1] : 1.0, s1 = k + 1 < m ? s[k + 1] : 1.0;
        if (a <= x1) return 1.0 / (s[k] + (s1 - s[k]) * (a - x[k]) / (x1 - x[k]));
    }
    return 1.0;
}

double ats_hw_cpu_mem_share(const ats_hw *hw, double a)
{
    if (hw->cpu_load_n > 0) {
        if (!(a > 0)) return 0.0;
        return a >= 1.0 ? 1.0 : load_share(hw, a);
    }
    if (hw->cpu_bw_n <= 0) return a;
    if (!(a > 0)) return 0.0;
    if (a == 1.0) return 1.0;
    const double t = (double)hw->cpu_threads;
    return bw_at_threads(hw, a * t) / bw_at_threads(hw, t);
}

enum ats_status ats_hw_validate(const ats_hw *hw, ats_err *err)
{
    if (!hw) return ats_err_set(err, ATS_EINVAL, "hw: NULL");
    if (hw->cpu_threads < 1)
        return ats_err_set(err, ATS_EINVAL, "hw 'cpu_threads': %d (must be >= 1)", hw->cpu_threads);
    HW_POS(cpu_flops);
    HW_POS(cpu_mem_bw);
    HW_NONNEG(cpu_op_overhead_s);
    HW_POS(gpu_flops);
    HW_POS(gpu_mem_bw);
    if (hw->gpu_vram_bytes == 0) return ats_err_set(err, ATS_EINVAL, "hw 'gpu_vram_bytes': 0 (must be > 0)");
    HW_NONNEG(gpu_op_overhead_s);
    HW_POS(pcie_h2d_bw);
    HW_POS(pcie_d2h_bw);
    HW_POS(pcie_sm_copy_bw);
    HW_POS(pcie_link_bw);
    HW_NONNEG(pcie_latency_s);
    HW_NONNEG(host_switch_s);
    if (hw->n_copy_engines < 1)
        return ats_err_set(err, ATS_EINVAL, "hw 'n_copy_engines': %d (must be >= 1)", hw->n_copy_engines);
    HW_FRAC(hw->hostmem_cpu_factor, "hostmem_cpu_factor");
    HW_FRAC(hw->hostmem_dma_factor, "hostmem_dma_factor");
    if (hw->gemm_min_tokens < 1)
        return ats_err_set(err, ATS_EINVAL, "hw 'gemm_min_tokens': %lld (must be >= 1)",
                           (long long)hw->gemm_min_tokens);
    enum ats_status st = eff_validate(&hw->eff_cpu, "eff_cpu", err);
    if (st) return st;
    if ((st = eff_validate(&hw->eff_gpu, "eff_gpu", err))) return st;
    if ((st = bw_curve_validate(hw, err))) return st;
    if (hw->cpu_load_n < 0 || hw->cpu_load_n > ATS_HW_MAX_BW_POINTS)
        return ats_err_set(err, ATS_EINVAL, "hw 'cpu_load_n': %d (must be in 0..%d)", (int)hw->cpu_load_n,
                           ATS_HW_MAX_BW_POINTS);
    for (int32_t k = 0; k < hw->cpu_load_n; k++) {
        const double x = hw->cpu_load_avail[k], y = hw->cpu_load_slow[k];
        if (!(x > 0 && x < 1) || (k > 0 && !(x > hw->cpu_load_avail[k - 1])))
            return ats_err_set(err, ATS_EINVAL, "hw 'cpu_load_avail[%d]': %g (must be in (0, 1), above the previous point)",
                               (int)k, x);
        if (!(y >= 1.0 && y <= 1000.0) || (k > 0 && !(y <= hw->cpu_load_slow[k - 1])))
            return ats_err_set(err, ATS_EINVAL,
                               "hw 'cpu_load_slow[%d]': %g (must be in 1..1000, not above the previous point's)", (int)k, y);
    }
    return table_validate(&hw->op_table, err);
}

/* ---- snapshots --------------------------------------------------------------------------- */

enum ats_status ats_costs_init(ats_costs *c, int32_t n)
{
    memset(c, 0, sizeof *c);
    if (n < 1) return ATS_EINVAL;
    double *all = calloc((size_t)n * 5, sizeof(double));
    if (!all) return ATS_ENOMEM;
    c->n = n;
    c->t_cpu = all;
    c->t_gpu = all + n;
    c->w = all + 2 * (size_t)n;
    c->c = all + 3 * (size_t)n;
    c->w_expert = all + 4 * (size_t)n;
    return ATS_OK;
}

void ats_costs_free(ats_costs *c)
{
    if (!c) return;
    free(c->t_cpu); /* one block */
    memset(c, 0, sizeof *c);
}

void ats_costs_copy(ats_costs *dst, const ats_costs *src)
{
    ATS_ASSERT(dst->n == src->n);
    size_t b = (size_t)src->n * sizeof(double);
    memmove(dst->t_cpu, src->t_cpu, b);
    memmove(dst->t_gpu, src->t_gpu, b);
    memmove(dst->w, src->w, b);
    memmove(dst->c, src->c, b);
    memmove(dst->w_expert, src->w_expert, b);
}

enum ats_status ats_costs_validate(const ats_costs *c, ats_err *err)
{
    if (!c || c->n < 1 || !c->t_cpu)
        return ats_err_set(err, ATS_EINVAL, "costs: empty snapshot (n = %d)", c ? (int)c->n : 0);
    const double *f[5] = {c->t_cpu, c->t_gpu, c->w, c->c, c->w_expert};
    const char *nm[5] = {"t_cpu", "t_gpu", "w", "c", "w_expert"};
    for (int k = 0; k < 5; k++)
        for (int32_t i = 0; i < c->n; i++) {
            double v = f[k][i];
            if (!isfinite(v) || v < 0)
                return ats_err_set(err, ATS_EINVAL, "costs '%s'[%d]: %g (must be finite and >= 0)",
                                   nm[k], (int)i, v);
        }
    return ATS_OK;
}

enum ats_status ats_costs_set_op(ats_costs *c, int32_t i, const ats_op_cost *m, ats_err *err)
{
    if (!c || !m || i < 0 || i >= c->n)
        return ats_err_set(err, ATS_EINVAL, "costs: op index %d outside [0, %d)", (int)i, c ? (int)c->n : 0);
    const double v[5] = {m->t_cpu, m->t_gpu, m->w, m->c, m->w_expert};
    const char *nm[5] = {"t_cpu", "t_gpu", "w", "c", "w_expert"};
    for (int k = 0; k < 5; k++)
        if (!isfinite(v[k]) || v[k] < 0)
            return ats_err_set(err, ATS_EINVAL, "costs '%s'[%d]: %g (must be finite and >= 0)", nm[k], (int)i, v[k]);
    c->t_cpu[i] = m->t_cpu;
    c->t_gpu[i] = m->t_gpu;
    c->w[i] = m->w;
    c->c[i] = m->c;
    c->w_expert[i] = m->w_expert;
    return ATS_OK;
}

/* ---- analytic model ---------------------------------------------------------------------- */

static double roofline(double flop, double bytes, double peak_flops, double eff_flop, double bw,
                       double eff_bw, double q_scale, double overhead)
{
    double tf = flop / (peak_flops * eff_flop);
    double tb = bytes / (bw * eff_bw);
    return (tf > tb ? tf : tb) * q_scale + overhead;
}

static void op_time(const ats_graph *g, const ats_op *op, const ats_hw *hw, int gpu, double *out)
{
    const ats_hw_eff *e = gpu ? &hw->eff_gpu : &hw->eff_cpu;
    double peak = gpu ? hw->gpu_flops : hw->cpu_flops;
    double bw = gpu ? hw->gpu_mem_bw : hw->cpu_mem_bw;
    double ovh = gpu ? hw->gpu_op_overhead_s : hw->cpu_op_overhead_s;
    double act = (double)op->act_in_bytes + (double)op->act_out_bytes;
    double wbytes = (double)op->weight_bytes;
    if (op->kind == ATS_OP_EXPERTS) wbytes = op->n_expert_active * (double)op->expert_bytes;
    int qt = (int)op->qtype;
    double qs = (qt >= 0 && qt < 64) ? e->q_scale[qt] : 1.0;
    if (op->kind == ATS_OP_ATTN) {
        /* KV cache (F16) read; dequantization scale does not apply */
        *out = roofline(op->flop, (double)op->kv_read_bytes + act, peak, e->attn_flop, bw,
                        e->attn_bw, 1.0, ovh);
        return;
    }
    if (op->kind == ATS_OP_EMBED) {
        /* gather of n_tokens rows: bytes of the rows read */
        double rows = (double)g->phase.n_tokens;
        double row_bytes = op->n_out > 0 ? wbytes / (double)op->n_out : wbytes;
        if (op->n_out <= 0 && op->n_in > 0) row_bytes = wbytes / (double)op->n_in;
        double b = rows * row_bytes + act;
        *out = b / (bw * e->gemv_bw) + ovh;
        return;
    }
    int gemm = g->phase.n_tokens >= hw->gemm_min_tokens;
    (void)gemm; /* GEMV vs GEMM: the bandwidth side uses gemv_bw, the compute side gemm_flop */
    *out = roofline(op->flop, wbytes + act, peak, e->gemm_flop, bw, e->gemv_bw, qs, ovh);
}

/* ---- measured op table ------------------------------------------------------------------- */

void ats_op_work(const ats_graph *g, const ats_op *op, double *flop, double *bytes)
{
    double act = (double)op->act_in_bytes + (double)op->act_out_bytes;
    double wbytes = (double)op->weight_bytes;
    if (op->kind == ATS_OP_EXPERTS) wbytes = op->n_expert_active * (double)op->expert_bytes;
    *flop = op->flop;
    if (op->kind == ATS_OP_ATTN) {
        *bytes = (double)op->kv_read_bytes + act;
    } else if (op->kind == ATS_OP_EMBED) { /* as op_time: the n_tokens rows gathered */
        double rows = (double)g->phase.n_tokens;
        double row_bytes = op->n_out > 0 ? wbytes / (double)op->n_out : wbytes;
        if (op->n_out <= 0 && op->n_in > 0) row_bytes = wbytes / (double)op->n_in;
        *flop = 0.0;
        *bytes = rows * row_bytes + act;
    } else {
        *bytes = wbytes + act;
    }
}

double ats_roofline_s(const ats_hw *hw, ats_backend b, ats_op_kind kind, ats_qtype qtype, double flop,
                      double bytes)
{
    const ats_hw_eff *e = b == ATS_GPU ? &hw->eff_gpu : &hw->eff_cpu;
    double peak = b == ATS_GPU ? hw->gpu_flops : hw->cpu_flops;
    double bw = b == ATS_GPU ? hw->gpu_mem_bw : hw->cpu_mem_bw;
    if (kind == ATS_OP_EMBED) return bytes / (bw * e->gemv_bw);
    int attn = kind == ATS_OP_ATTN;
    double tf = flop / (peak * (attn ? e->attn_flop : e->gemm_flop));
    double tb = bytes / (bw * (attn ? e->attn_bw : e->gemv_bw));
    double qs = (!attn && (int)qtype >= 0 && (int)qtype < 64) ? e->q_scale[qtype] : 1.0;
    return (tf > tb ? tf : tb) * qs;
}

/* The table entry for `op` on backend b: same role, type and shape; else the nearest in n_out·n_in
 * of its kind and type within a factor 4 of its size; else NULL (the roofline prices it). A table
 * measured on another model (other shapes, other types) prices none of its ops: scaling a
 * measurement across a size ratio of 100 made costs grow with bandwidth. */
void ats_prof_op_shape(const ats_graph *g, const ats_op *op, int64_t *n_out, int64_t *n_in)
{
    *n_out = op->n_out;
    *n_in = op->n_in;
    if (op->kind == ATS_OP_ATTN) {
        *n_out = g->arch.n_head * g->arch.head_dim;
        *n_in = g->arch.n_head_kv * g->arch.head_dim;
    }
}

static const ats_prof_entry *prof_find(const ats_prof_table *t, const ats_graph *g, const ats_op *op, ats_backend b)
{
    const ats_prof_entry *best = NULL;
    double dist = log(4.0) + 1e-9;
    int64_t no, ni;
    ats_prof_op_shape(g, op, &no, &ni);
    double size = (double)no * (double)ni;
    for (int32_t i = 0; i < t->n; i++) {
        const ats_prof_entry *e = &t->e[i];
        if (e->backend != (int32_t)b || e->kind != (int32_t)op->kind || e->qtype != (int32_t)op->qtype) continue;
        if (e->n_out * e->n_in == 0 && size > 0) continue; /* an attention entry without its geometry */
        if (e->role == (int32_t)op->role && e->n_out == no && e->n_in == ni) return e;
        double d = fabs(log((double)e->n_out * (double)e->n_in + 1.0) - log(size + 1.0));
        if (d <= dist) {
            dist = d;
            best = e;
        }
    }
    return best;
}

double ats_prof_op_time(const ats_graph *g, const ats_op *op, const ats_hw *hw, ats_backend b)
{
    const ats_prof_entry *e = prof_find(&hw->op_table, g, op, b);
    if (!e) return NAN;
    const ats_op_kind ek = (ats_op_kind)e->kind;
    const ats_qtype eq = (ats_qtype)e->qtype;
    double n = (double)g->phase.n_tokens;
    int32_t k = 0;
    while (k + 1 < e->n_points && (double)e->tokens[k + 1] <= n) k++;
    double t = e->t_s[k], f = e->flop[k], by = e->bytes[k];
    if (k + 1 < e->n_points && n > (double)e->tokens[k]) { /* between points k and k + 1 */
        double a = (n - (double)e->tokens[k]) / (double)(e->tokens[k + 1] - e->tokens[k]);
        t += a * (e->t_s[k + 1] - t);
        f += a * (e->flop[k + 1] - f);
        by += a * (e->bytes[k + 1] - by);
    }
    double fq, bq;
    ats_op_work(g, op, &fq, &bq);
    double rm = ats_roofline_s(hw, b, ek, eq, f, by);
    double rq = ats_roofline_s(hw, b, op->kind, op->qtype, fq, bq);
    if (rq == rm || !(rm > 0) || !isfinite(rq)) return t;
    /* other work than measured: the entry's marginal time per roofline second (its slope from the
     * first to the last point; one point: t / rm) times the difference, so a fixed cost (launches,
     * the host's issue time) is not scaled; never below the proportional value t · rq / rm */
    double slope = t / rm;
    const int32_t last = e->n_points - 1;
    if (last > 0) {
        double r0 = ats_roofline_s(hw, b, ek, eq, e->flop[0], e->bytes[0]);
        double r1 = ats_roofline_s(hw, b, ek, eq, e->flop[last], e->bytes[last]);
        if (r1 > r0) slope = (e->t_s[last] - e->t_s[0]) / (r1 - r0);
        if (!(slope > 0)) slope = 0.0;
    }
    double tq = t + slope * (rq - rm), prop = t * (rq / rm);
    return tq > prop ? tq : prop;
}

enum ats_status ats_costs_from_model(const ats_graph *g, const ats_hw *hw, ats_costs *out,
                                     ats_err *err)
{
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "graph: empty (no ops)");
    if (!out || out->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "costs: n = %d, graph has %d ops", out ? (int)out->n : -1,
                           (int)g->n_ops);
    enum ats_status st = ats_hw_validate(hw, err);
    if (st) return st;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        op_time(g, op, hw, 0, &out->t_cpu[i]);
        op_time(g, op, hw, 1, &out->t_gpu[i]);
        if (hw->op_table.n > 0) { /* measured where the table has the op's kind */
            double tc = ats_prof_op_time(g, op, hw, ATS_CPU), tg = ats_prof_op_time(g, op, hw, ATS_GPU);
            if (!isnan(tc)) out->t_cpu[i] = tc;
            if (!isnan(tg)) out->t_gpu[i] = tg;
        }
        double moved = (double)op->weight_bytes;
        if (op->kind == ATS_OP_ATTN) moved = (double)op->kv_cache_bytes;
        if (op->kind == ATS_OP_EXPERTS) moved = op->n_expert_active * (double)op->expert_bytes;
        out->w[i] = hw->pcie_latency_s + moved / hw->pcie_h2d_bw;
        out->w_expert[i] = (op->kind == ATS_OP_EXPERTS || op->kind == ATS_OP_SHEXP)
                               ? (double)op->expert_bytes / hw->pcie_h2d_bw
                               : 0.0;
        out->c[i] = i == 0 ? 0.0
                           : hw->pcie_latency_s + hw->host_switch_s + (double)op->act_in_bytes / hw->pcie_sm_copy_bw;
    }
    return ATS_OK;
}

void ats_costs_scale(const ats_costs *nominal, ats_load load, ats_costs *cur)
{
    ATS_ASSERT(nominal->n == cur->n);
    ATS_ASSERT(load.cpu > 0 && load.gpu > 0 && load.pcie > 0);
    for (int32_t i = 0; i < nominal->n; i++) {
        cur->t_cpu[i] = nominal->t_cpu[i] / load.cpu;
        cur->t_gpu[i] = nominal->t_gpu[i] / load.gpu;
        cur->w[i] = nominal->w[i] / load.pcie;
        cur->c[i] = nominal->c[i] / load.pcie;
        cur->w_expert[i] = nominal->w_expert[i] / load.pcie;
    }
}

/* ---- observations and load estimation ---------------------------------------------------- */

enum ats_status ats_round_obs_init(ats_round_obs *o, int32_t n)
{
    memset(o, 0, sizeof *o);
    if (n < 1) return ATS_EINVAL;
    o->backend = calloc((size_t)n, 1);
    o->t_exec = calloc((size_t)n, sizeof(double));
    o->t_xfer = malloc((size_t)n * sizeof(double));
    if (!o->backend || !o->t_exec || !o->t_xfer) {
        ats_round_obs_free(o);
        return ATS_ENOMEM;
    }
    for (int32_t i = 0; i < n; i++) o->t_xfer[i] = NAN;
    o->n = n;
    return ATS_OK;
}

void ats_round_obs_free(ats_round_obs *o)
{
    if (!o) return;
    free(o->backend);
    free(o->t_exec);
    free(o->t_xfer);
    memset(o, 0, sizeof *o);
}

static double clip_factor(double f)
{
    if (f < 0.01) return 0.01;
    if (f > 4.0) return 4.0;
    return f;
}

void ats_load_estimate(const ats_costs *nominal, const ats_round_obs *obs, ats_load prev,
                       ats_load *out)
{
    ATS_ASSERT(nominal->n == obs->n);
    double nc = 0, oc = 0, ng = 0, og = 0, np = 0, op = 0;
    for (int32_t i = 0; i < obs->n; i++) {
        double t = obs->t_exec[i];
        if (isfinite(t) && t > 0) {
            if (obs->backend[i] == ATS_GPU) {
                ng += nominal->t_gpu[i];
                og += t;
            } else {
                nc += nominal->t_cpu[i];
                oc += t;
            }
        }
        double x = obs->t_xfer[i];
        if (isfinite(x) && x > 0) {
            np += nominal->w[i];
            op += x;
        }
    }
    ats_load l = prev;
    if (oc > 0 && nc > 0) l.cpu = clip_factor(nc / oc);
    if (og > 0 && ng > 0) l.gpu = clip_factor(ng / og);
    if (op > 0 && np > 0) l.pcie = clip_factor(np / op);
    *out = l;
}
