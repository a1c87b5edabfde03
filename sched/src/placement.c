/* Static tensor placement: knapsack DP with switch penalty and Algorithm 1's MoE partition
 * (ats/placement.h, paper §4.3). */
#include "ats/placement.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum ats_status ats_placement_init(ats_placement *p, int32_t n)
{
    memset(p, 0, sizeof *p);
    if (n < 1) return ATS_EINVAL;
    p->backend = calloc((size_t)n, 1);
    if (!p->backend) return ATS_ENOMEM;
    p->n = n;
    return ATS_OK;
}

void ats_placement_free(ats_placement *p)
{
    if (!p) return;
    free(p->backend);
    memset(p, 0, sizeof *p);
}

void ats_placement_copy(ats_placement *dst, const ats_placement *src)
{
    ATS_ASSERT(dst->n == src->n);
    memcpy(dst->backend, src->backend, (size_t)src->n);
    dst->gpu_bytes = src->gpu_bytes;
    dst->objective_s = src->objective_s;
}

ats_placement_opts ats_placement_opts_default(void)
{
    ats_placement_opts o = {1u << 20, 1};
    return o;
}

uint64_t ats_op_resident_bytes(const ats_op *op) { return op->weight_bytes + op->kv_cache_bytes; }

enum ats_status ats_placement_mix_costs(const ats_costs *const *costs, const double *weight, int32_t n_rounds,
                                        ats_costs *out, ats_err *err)
{
    if (n_rounds < 1 || !costs || !weight || !out)
        return ats_err_set(err, ATS_EINVAL, "placement mix: %d rounds (need >= 1 with costs and weights)", (int)n_rounds);
    double total = 0;
    for (int32_t k = 0; k < n_rounds; k++) {
        if (!costs[k] || costs[k]->n != out->n)
            return ats_err_set(err, ATS_EINVAL, "placement mix: round %d has n = %d, output has %d", (int)k,
                               costs[k] ? (int)costs[k]->n : -1, (int)out->n);
        if (costs[k] == out) return ats_err_set(err, ATS_EINVAL, "placement mix: round %d aliases the output", (int)k);
        if (!(weight[k] >= 0) || !isfinite(weight[k]))
            return ats_err_set(err, ATS_EINVAL, "placement mix: round %d has weight %g (must be finite and >= 0)",
                               (int)k, weight[k]);
        enum ats_status st = ats_costs_validate(costs[k], err);
        if (st) return st;
        total += weight[k];
    }
    if (!(total > 0)) return ats_err_set(err, ATS_EINVAL, "placement mix: all %d weights are 0", (int)n_rounds);
    for (int32_t i = 0; i < out->n; i++) {
        double tc = 0, tg = 0, w = 0, c = 0, we = 0;
        for (int32_t k = 0; k < n_rounds; k++) {
            double a = weight[k];
            tc += a * costs[k]->t_cpu[i];
            tg += a * costs[k]->t_gpu[i];
            w += a * costs[k]->w[i];
            c += a * costs[k]->c[i];
            we += a * costs[k]->w_expert[i];
        }
        out->t_cpu[i] = tc;
        out->t_gpu[i] = tg;
        out->w[i] = w;
        out->c[i] = c;
        out->w_expert[i] = we;
    }
    return ATS_OK;
}

double ats_placement_objective(int32_t n, const double *r, const double *c, const uint8_t *backend)
{
    double v = 0;
    for (int32_t i = 0; i < n; i++) {
        if (backend[i] == ATS_GPU) v += r[i];
        if (i > 0 && backend[i] != backend[i - 1]) v -= c[i];
    }
    return v;
}

/* Backtracking bits per (item, capacity): bit 0 = the CPU state came from a GPU predecessor,
 * bit 1 = the GPU state came from a GPU predecessor. */
enum ats_status ats_place_dp(int32_t n, const uint64_t *size_units, const double *r, const double *c,
                             const uint8_t *fix, uint64_t budget_units, uint8_t *backend_out,
                             double *objective_out, ats_err *err)
{
    if (n < 1) return ats_err_set(err, ATS_EINVAL, "placement: no items (n = %d)", (int)n);
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(r[i]) || (i > 0 && !isfinite(c[i])))
            return ats_err_set(err, ATS_EINVAL, "placement: item %d has r = %g, c = %g (must be finite)",
                               (int)i, r[i], c[i]);
        if (i > 0 && c[i] < 0)
            return ats_err_set(err, ATS_EINVAL, "placement: item %d has c = %g (must be >= 0)", (int)i, c[i]);
    }
    uint64_t forced = 0;
    for (int32_t i = 0; i < n; i++)
        if (fix && fix[i] == ATS_FIX_GPU) forced += size_units[i];
    if (forced > budget_units)
        return ats_err_set(err, ATS_EINFEASIBLE,
                           "placement: items forced to the GPU need %llu units, budget is %llu",
                           (unsigned long long)forced, (unsigned long long)budget_units);
    size_t W = (size_t)budget_units + 1;
    if ((double)W * (double)n > 4e9)
        return ats_err_set(err, ATS_ERANGE, "placement: %d items x %zu budget units is too large for the DP",
                           (int)n, W);
    double *dp = malloc(4 * W * sizeof(double));
    uint8_t *bt = malloc(W * (size_t)n);
    if (!dp || !bt) {
        free(dp);
        free(bt);
        return ats_err_set(err, ATS_ENOMEM, "placement: out of memory for %zu DP states", W * (size_t)n);
    }
    double *pc = dp, *pg = dp + W, *nc = dp + 2 * W, *ng = dp + 3 * W;
    const double NEG = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        uint64_t s = size_units[i];
        int can_cpu = !(fix && fix[i] == ATS_FIX_GPU);
        int can_gpu = !(fix && fix[i] == ATS_FIX_CPU);
        uint8_t *b = bt + (size_t)i * W;
        double ci = i > 0 ? c[i] : 0.0;
        for (size_t m = 0; m < W; m++) {
            uint8_t bits = 0;
            double vc = NEG, vg = NEG;
            if (i == 0) {
                if (can_cpu) vc = 0.0;
                if (can_gpu && m >= s) vg = r[0];
            } else {
                if (can_cpu) {
                    double a = pc[m], g = pg[m] - ci;
                    if (g > a) {
                        vc = g;
                        bits |= 1;
                    } else {
                        vc = a;
                    }
                }
                if (can_gpu && m >= s) {
                    double a = pc[m - s] - ci, g = pg[m - s];
                    if (g >= a) {
                        vg = g;
                        bits |= 2;
                    } else {
                        vg = a;
                    }
                    if (vg > NEG) vg += r[i];
                }
            }
            nc[m] = vc;
            ng[m] = vg;
            b[m] = bits;
        }
        double *t = pc;
        pc = nc;
        nc = t;
        t = pg;
        pg = ng;
        ng = t;
    }
    size_t m = W - 1;
    int last = pg[m] > pc[m] ? ATS_GPU : ATS_CPU;
    double best = last == ATS_GPU ? pg[m] : pc[m];
    free(dp);
    if (!(best > NEG)) {
        free(bt);
        return ats_err_set(err, ATS_EINFEASIBLE, "placement: no feasible placement");
    }
    for (int32_t i = n - 1; i >= 0; i--) {
        backend_out[i] = (uint8_t)last;
        uint8_t bits = bt[(size_t)i * W + m];
        int prev = last == ATS_GPU ? ((bits & 2) ? ATS_GPU : ATS_CPU) : ((bits & 1) ? ATS_GPU : ATS_CPU);
        if (last == ATS_GPU) {
            ATS_ASSERT(m >= size_units[i]);
            m -= size_units[i];
        }
        last = prev;
    }
    free(bt);
    if (objective_out) *objective_out = best;
    return ATS_OK;
}

/* The DP over g's ops with fused groups (ats_op_fused_head: the executor runs a layer's expert
 * gate/up/down as one op) as one item each: resident whole or not at all; the switch costs into the
 * group's first op and out of its last stay. A member fixed on the CPU fixes its group there. */
static enum ats_status place_grouped(const ats_graph *g, const uint64_t *su, const double *r, const double *c,
                                     const uint8_t *fix, uint64_t B, uint8_t *backend, ats_err *err)
{
    const int32_t n = g->n_ops;
    int32_t m = 0;
    enum ats_status st;
    uint64_t *gs = malloc((size_t)n * sizeof *gs);
    double *gr = malloc((size_t)n * sizeof *gr), *gc = malloc((size_t)n * sizeof *gc);
    uint8_t *gf = malloc((size_t)n), *gb = malloc((size_t)n);
    int32_t *first = malloc((size_t)n * sizeof *first);
    if (!gs || !gr || !gc || !gf || !gb || !first) {
        st = ats_err_set(err, ATS_ENOMEM, "placement: out of memory");
    } else {
        for (int32_t i = 0; i < n; i++) {
            if (ats_op_fused_head(g, i) != i && m > 0) { /* a member: joins its head's item */
                gs[m - 1] += su[i];
                gr[m - 1] += r[i];
                if (fix[i] == ATS_FIX_CPU) gf[m - 1] = ATS_FIX_CPU;
                continue;
            }
            gs[m] = su[i], gr[m] = r[i], gc[m] = c[i], gf[m] = fix[i], first[m] = i;
            m++;
        }
        st = ats_place_dp(m, gs, gr, gc, gf, B, gb, NULL, err);
        for (int32_t k = 0; k < m && st == ATS_OK; k++)
            for (int32_t i = first[k]; i < (k + 1 < m ? first[k + 1] : n); i++) backend[i] = gb[k];
    }
    free(gs); free(gr); free(gc); free(gf); free(gb); free(first);
    return st;
}

/* The DP's items over g's ops: quantized sizes (filled by the caller), r_i = t_cpu - t_gpu, fixes. */
typedef struct dp_items {
    uint64_t *su;
    double *r;
    uint8_t *fix;
} dp_items;

static void items_free(dp_items *it)
{
    free(it->su);
    free(it->r);
    free(it->fix);
}

static enum ats_status items_new(const ats_graph *g, const ats_costs *nominal, dp_items *it, ats_err *err)
{
    const int32_t n = g->n_ops;
    it->su = calloc((size_t)n, sizeof *it->su);
    it->r = calloc((size_t)n, sizeof *it->r);
    it->fix = calloc((size_t)n, 1);
    if (!it->su || !it->r || !it->fix) {
        items_free(it);
        return ats_err_set(err, ATS_ENOMEM, "placement: out of memory");
    }
    for (int32_t i = 0; i < n; i++) it->r[i] = nominal->t_cpu[i] - nominal->t_gpu[i];
    return ATS_OK;
}

/* place_grouped on the items with B quanta, then out's gpu_bytes (real bytes) and objective. */
static enum ats_status items_place(const ats_graph *g, const ats_costs *nominal, const dp_items *it, uint64_t B,
                                   ats_placement *out, ats_err *err)
{
    enum ats_status st = place_grouped(g, it->su, it->r, nominal->c, it->fix, B, out->backend, err);
    if (st) return st;
    out->gpu_bytes = 0;
    for (int32_t i = 0; i < g->n_ops; i++)
        if (out->backend[i] == ATS_GPU) out->gpu_bytes += ats_op_resident_bytes(&g->ops[i]);
    out->objective_s = ats_placement_objective(g->n_ops, it->r, nominal->c, out->backend);
    return ATS_OK;
}

enum ats_status ats_place_static(const ats_graph *g, const ats_costs *nominal, uint64_t budget_bytes,
                                 const ats_placement_opts *opts, ats_placement *out, ats_err *err)
{
    ats_placement_opts o = opts ? *opts : ats_placement_opts_default();
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "placement: empty graph (no ops)");
    if (budget_bytes == 0) return ats_err_set(err, ATS_EINVAL, "placement: VRAM budget 0 bytes (must be > 0)");
    if (o.quantum_bytes == 0) return ats_err_set(err, ATS_EINVAL, "placement: quantum 0 bytes (must be > 0)");
    if (!nominal || nominal->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "placement: costs have n = %d, graph has %d ops",
                           nominal ? (int)nominal->n : -1, (int)g->n_ops);
    if (!out || out->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "placement: output has n = %d, graph has %d ops",
                           out ? (int)out->n : -1, (int)g->n_ops);
    dp_items it;
    enum ats_status st = ats_costs_validate(nominal, err);
    if (st || (st = items_new(g, nominal, &it, err))) return st;
    const int32_t n = g->n_ops;
    uint64_t q = o.quantum_bytes, B = budget_bytes / q, nonexp = 0;
    int moe = 0;
    for (int32_t i = 0; i < n; i++) {
        uint64_t s = ats_op_resident_bytes(&g->ops[i]);
        it.su[i] = s / q + (s % q != 0);
        if (g->ops[i].kind == ATS_OP_EXPERTS) moe = 1;
        else nonexp += it.su[i];
    }
    if (moe && o.moe_partition) {
        /* Algorithm 1 lines 13-21 */
        int nonexp_fits = B >= nonexp;
        for (int32_t i = 0; i < n; i++) {
            int is_exp = g->ops[i].kind == ATS_OP_EXPERTS;
            if (nonexp_fits && !is_exp) it.fix[i] = ATS_FIX_GPU;
            if (!nonexp_fits && is_exp) it.fix[i] = ATS_FIX_CPU;
        }
    }
    st = items_place(g, nominal, &it, B, out, err);
    ATS_ASSERT(st || out->gpu_bytes <= budget_bytes);
    items_free(&it);
    return st;
}

enum ats_status ats_place_extend(const ats_graph *g, const ats_costs *nominal, const ats_placement *base,
                                 uint64_t extra_bytes, const ats_placement_opts *opts, ats_placement *out, ats_err *err)
{
    ats_placement_opts o = opts ? *opts : ats_placement_opts_default();
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "placement: empty graph (no ops)");
    if (o.quantum_bytes == 0) return ats_err_set(err, ATS_EINVAL, "placement: quantum 0 bytes (must be > 0)");
    if (!nominal || nominal->n != g->n_ops || !base || base->n != g->n_ops || !out || out->n != g->n_ops ||
        out == base)
        return ats_err_set(err, ATS_EINVAL, "placement: extend needs costs, base and output of the graph's %d ops "
                           "(costs %d, base %d, output %d%s)", (int)g->n_ops, nominal ? (int)nominal->n : -1,
                           base ? (int)base->n : -1, out ? (int)out->n : -1, out && out == base ? ", the base itself" : "");
    dp_items it;
    enum ats_status st = ats_costs_validate(nominal, err);
    if (st || (st = items_new(g, nominal, &it, err))) return st;
    const uint64_t q = o.quantum_bytes;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        uint64_t s = ats_op_resident_bytes(op);
        if (base->backend[i] == ATS_GPU) it.fix[i] = ATS_FIX_GPU; /* already resident: no new bytes */
        else if (op->kv_cache_bytes > 0 || op->kind == ATS_OP_EMBED) it.fix[i] = ATS_FIX_CPU;
        else it.su[i] = s / q + (s % q != 0);
    }
    st = items_place(g, nominal, &it, extra_bytes / q, out, err);
    for (int32_t i = 0; i < g->n_ops && !st; i++) ATS_ASSERT(base->backend[i] != ATS_GPU || out->backend[i] == ATS_GPU);
    ATS_ASSERT(st || out->gpu_bytes <= base->gpu_bytes + extra_bytes);
    items_free(&it);
    return st;
}

void ats_placement_fuse_groups(const ats_graph *g, const ats_costs *nominal, ats_placement *p)
{
    int changed = 0;
    for (int32_t h = 0; h < g->n_ops; h++) {
        int32_t last = h, n_gpu = 0;
        while (last + 1 < g->n_ops && ats_op_fused_head(g, last + 1) == h) last++;
        if (last == h) continue;
        for (int32_t j = h; j <= last; j++) n_gpu += p->backend[j] == ATS_GPU;
        if (n_gpu == 0 || n_gpu == last - h + 1) continue;
        for (int32_t j = h; j <= last; j++) p->backend[j] = ATS_CPU;
        changed = 1;
    }
    if (!changed) return;
    p->gpu_bytes = 0;
    double v = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        if (p->backend[i] == ATS_GPU) {
            p->gpu_bytes += ats_op_resident_bytes(&g->ops[i]);
            v += nominal->t_cpu[i] - nominal->t_gpu[i];
        }
        if (i > 0 && p->backend[i] != p->backend[i - 1]) v -= nominal->c[i];
    }
    p->objective_s = v;
}
