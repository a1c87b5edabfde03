/*
 * test_plan — plan building and prediction: temp ranges that overlap in bytes never overlap in time
 * (ring and double buffer), every promoted op's transfer ends before it starts, expert transfers
 * start after their router, peak temp ≤ capacity, splits/activation transfers consistent, serialized
 * plans sum up, the dump, and bad inputs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats/plan.h"
#include "sched_fix.h"
#include "testutil.h"

#define MIB (1024ull * 1024ull)

static void check_plan(const ats_graph *g, const ats_placement *p, const ats_assignment *a, const ats_costs *c,
                       const ats_plan *pl, double h, double lead, int it)
{
    int32_t n = g->n_ops;
    /* splits cover the ops in order, one backend each */
    int32_t next = 0;
    for (int32_t s = 0; s < pl->n_splits; s++) {
        CHECK(pl->splits[s].first_op == next);
        for (int32_t i = next; i < next + pl->splits[s].n_ops; i++) CHECK(a->backend[i] == pl->splits[s].backend);
        next += pl->splits[s].n_ops;
        if (s > 0) CHECK(pl->splits[s].backend != pl->splits[s - 1].backend);
    }
    CHECK(next == n);
    CHECK(pl->n_axfers == pl->n_splits - 1);
    int32_t prom = 0;
    for (int32_t i = 0; i < n; i++) {
        int pr = p->backend[i] == ATS_CPU && a->backend[i] == ATS_GPU;
        prom += pr;
        CHECK(pl->ops[i].promoted == pr);
        CHECK(pl->ops[i].has_wait_xfer == pr);
        if (pr) CHECK(pl->wxfers[pl->ops[i].wait_xfer].op == i);
    }
    CHECK(prom == pl->n_wxfers);
    CHECK(pl->peak_temp_bytes <= pl->temp_capacity_bytes);
    for (int32_t k = 0; k < pl->n_wxfers; k++) {
        const ats_wxfer *x = &pl->wxfers[k];
        CHECK(x->offset_bytes + x->bytes <= pl->temp_capacity_bytes);
        if (k > 0) CHECK(x->op > pl->wxfers[k - 1].op); /* issue order = op order */
        if (g->ops[x->op].kind == ATS_OP_EXPERTS && g->ops[x->op].has_router) CHECK(x->has_wait_router && x->wait_router == g->ops[x->op].router);
        if (pl->double_buffer) CHECK(x->offset_bytes == (uint64_t)(k % 2) * (pl->temp_capacity_bytes / 2));
    }
    /* timing */
    ats_timeline tl;
    CHECK(ats_timeline_init(&tl, n, pl->n_wxfers) == ATS_OK);
    ats_predict_opts po = {h, lead};
    double lat;
    ats_err err;
    CHECK_MSG(ats_plan_predict(pl, c, &po, &lat, &tl, &err) == ATS_OK, "%s", err.msg);
    CHECK_NEAR(lat, tl.op_end[n - 1], 0);
    for (int32_t i = 0; i < n; i++) {
        CHECK(tl.op_end[i] >= tl.op_start[i]);
        if (i) CHECK(tl.op_start[i] >= tl.op_end[i - 1]);
        if (pl->ops[i].has_wait_xfer) CHECK(tl.xfer_end[pl->ops[i].wait_xfer] <= tl.op_start[i]);
    }
    for (int32_t k = 0; k < pl->n_wxfers; k++) {
        const ats_wxfer *x = &pl->wxfers[k];
        CHECK_NEAR(tl.xfer_end[k] - tl.xfer_start[k], c->w[x->op], 1e-12);
        if (x->has_wait_router) CHECK(tl.xfer_start[k] >= tl.op_end[x->wait_router]);
        if (!x->prefetch) CHECK(tl.xfer_start[k] >= 0);
        /* no two transfers whose temp ranges overlap have overlapping live ranges */
        for (int32_t q = 0; q < k; q++) {
            const ats_wxfer *y = &pl->wxfers[q];
            if (y->offset_bytes < x->offset_bytes + x->bytes && x->offset_bytes < y->offset_bytes + y->bytes)
                CHECK_MSG(tl.xfer_start[k] >= tl.op_end[y->op], "it %d: transfer %d overwrites the range of %d before op %d ended",
                          it, (int)k, (int)q, (int)y->op);
        }
        if (pl->wxfers[k].ce == pl->wxfers[k > 0 ? k - 1 : 0].ce && k > 0)
            CHECK(tl.xfer_start[k] >= tl.xfer_end[k - 1]);
    }
    /* serialized plans: nothing overlaps, latency is the plain sum */
    if (pl->serialized) {
        double sum = 0;
        for (int32_t i = 0; i < n; i++) {
            sum += a->backend[i] == ATS_GPU ? c->t_gpu[i] : c->t_cpu[i];
            if (i && a->backend[i] != a->backend[i - 1]) sum += c->c[i];
            if (pl->ops[i].has_wait_xfer) sum += c->w[i];
        }
        if (h == 1.0) CHECK_REL(lat, sum, 1e-12, 1e-15);
    }
    /* no transfers, no interference: latency is Σ t + Σ switches */
    if (pl->n_wxfers == 0) {
        double sum = 0;
        for (int32_t i = 0; i < n; i++) {
            sum += a->backend[i] == ATS_GPU ? c->t_gpu[i] : c->t_cpu[i];
            if (i && a->backend[i] != a->backend[i - 1]) sum += c->c[i];
        }
        CHECK_REL(lat, sum, 1e-12, 1e-15);
    }
    ats_timeline_free(&tl);
}

static void test_random_plans(uint64_t *rng)
{
    int waits = 0, prefetches = 0;
    for (int it = 0; it < 600; it++) {
        int moe = it % 2, n = 3 + (int)(tu_rand(rng) % 40);
        ats_graph *g = fx_random_graph(rng, n, moe);
        ats_costs c;
        ats_placement p;
        ats_assignment a;
        ats_plan pl;
        ats_plan_init(&pl);
        CHECK(ats_costs_init(&c, n) == 0 && ats_placement_init(&p, n) == 0 && ats_assignment_init(&a, n) == 0);
        fx_random_costs(rng, g, &c);
        ats_plan_opts o = ats_plan_opts_default();
        o.temp_bytes = (uint64_t)(tu_uniform(rng, 64, 300)) * MIB;
        o.double_buffer = it % 3 == 0;
        o.n_copy_engines = (it % 5 == 1) ? 2 : 1;
        o.prefetch_lead_s = (it % 4 == 0) ? tu_uniform(rng, 0, 3) : 0;
        a.serialized = (it % 7 == 3);
        for (int i = 0; i < n; i++) {
            p.backend[i] = tu_rand(rng) % 3 == 0 ? ATS_GPU : ATS_CPU;
            a.backend[i] = p.backend[i];
            const ats_op *op = &g->ops[i];
            uint64_t room = o.double_buffer ? o.temp_bytes / 2 : o.temp_bytes;
            if (p.backend[i] == ATS_CPU && op->kind != ATS_OP_ATTN && op->kind != ATS_OP_EMBED &&
                ats_op_xfer_bytes(g, NULL, i) <= room && tu_rand(rng) % 2)
                a.backend[i] = ATS_GPU;
        }
        ats_err err;
        enum ats_status st = ats_plan_build(g, &p, &a, &c, &o, &pl, &err);
        CHECK_MSG(st == ATS_OK, "it %d: %s", it, err.msg);
        if (st == ATS_OK) {
            double h = (it % 2) ? tu_uniform(rng, 0.3, 1.0) : 1.0;
            check_plan(g, &p, &a, &c, &pl, h, o.prefetch_lead_s, it);
            for (int k = 0; k < pl.n_wxfers; k++) {
                waits += pl.wxfers[k].has_wait_op;
                prefetches += pl.wxfers[k].prefetch;
            }
            /* dump: sized call and full call agree */
            size_t need = ats_plan_dump(&pl, g, NULL, 0);
            char *buf = malloc(need + 1);
            CHECK(ats_plan_dump(&pl, g, buf, need + 1) == need);
            CHECK(strlen(buf) == need);
            CHECK(strstr(buf, "split") != NULL);
            free(buf);
        }
        ats_plan_free(&pl);
        ats_assignment_free(&a);
        ats_placement_free(&p);
        ats_costs_free(&c);
        ats_graph_free(g);
    }
    CHECK_MSG(waits > 100, "only %d transfers waited for a temp range: the ring was not exercised", waits);
    CHECK_MSG(prefetches > 20, "only %d prefetch transfers", prefetches);
}

/* rebuilding into the same plan (every round) is fine, also when it shrinks or grows */
static void test_rebuild(uint64_t *rng)
{
    ats_plan pl;
    ats_plan_init(&pl);
    for (int it = 0; it < 30; it++) {
        int n = 3 + (int)(tu_rand(rng) % 60);
        ats_graph *g = fx_random_graph(rng, n, it % 2);
        ats_costs c;
        ats_placement p;
        ats_assignment a;
        CHECK(ats_costs_init(&c, n) == 0 && ats_placement_init(&p, n) == 0 && ats_assignment_init(&a, n) == 0);
        fx_random_costs(rng, g, &c);
        for (int i = 0; i < n; i++) a.backend[i] = p.backend[i] = (uint8_t)(i % 2);
        ats_plan_opts o = ats_plan_opts_default();
        CHECK(ats_plan_build(g, &p, &a, &c, &o, &pl, NULL) == ATS_OK);
        CHECK(pl.n_ops == n && pl.n_wxfers == 0);
        ats_assignment_free(&a);
        ats_placement_free(&p);
        ats_costs_free(&c);
        ats_graph_free(g);
    }
    ats_plan_free(&pl);
}

static void test_bad_inputs(uint64_t *rng)
{
    int n = 12;
    ats_graph *g = fx_random_graph(rng, n, 0);
    ats_costs c;
    ats_placement p;
    ats_assignment a;
    ats_plan pl;
    ats_plan_init(&pl);
    CHECK(ats_costs_init(&c, n) == 0 && ats_placement_init(&p, n) == 0 && ats_assignment_init(&a, n) == 0);
    fx_random_costs(rng, g, &c);
    ats_plan_opts o = ats_plan_opts_default();
    o.temp_bytes = 1ull << 30;
    ats_err err;
    p.backend[1] = ATS_GPU; /* GPU-resident op assigned to the CPU */
    CHECK(ats_plan_build(g, &p, &a, &c, &o, &pl, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "op 1") != NULL, "%s", err.msg);
    p.backend[1] = ATS_CPU;
    a.backend[0] = ATS_GPU; /* the embedding promoted */
    CHECK(ats_plan_build(g, &p, &a, &c, &o, &pl, &err) == ATS_EINVAL);
    CHECK_MSG(strstr(err.msg, "cannot be promoted") != NULL, "%s", err.msg);
    a.backend[0] = ATS_CPU;
    /* a promoted attention op moves its layer's KV cache (transfer.h promote_kv) */
    for (int i = 1; i < n; i++) {
        if (g->ops[i].kind != ATS_OP_ATTN) continue;
        a.backend[i] = ATS_GPU;
        CHECK_MSG(ats_plan_build(g, &p, &a, &c, &o, &pl, &err) == ATS_OK, "%s", err.msg);
        CHECK(pl.n_wxfers == 1 && pl.wxfers[0].op == i && pl.wxfers[0].bytes == g->ops[i].kv_cache_bytes &&
              pl.wxfers[0].bytes > 0 && pl.ops[i].has_wait_xfer && pl.ops[i].wait_xfer == 0);
        a.backend[i] = ATS_CPU;
        break;
    }
    int32_t mm = -1;
    for (int i = 0; i < n; i++)
        if (g->ops[i].kind == ATS_OP_MATMUL) mm = i;
    if (mm >= 0) {
        a.backend[mm] = ATS_GPU;
        o.temp_bytes = 1; /* too small */
        CHECK(ats_plan_build(g, &p, &a, &c, &o, &pl, &err) == ATS_EINVAL);
        CHECK_MSG(strstr(err.msg, "temp") != NULL, "%s", err.msg);
    }
    ats_costs c2;
    CHECK(ats_costs_init(&c2, n - 1) == 0);
    CHECK(ats_plan_build(g, &p, &a, &c2, &o, &pl, &err) == ATS_EINVAL);
    ats_costs_free(&c2);
    ats_plan_free(&pl);
    ats_assignment_free(&a);
    ats_placement_free(&p);
    ats_costs_free(&c);
    ats_graph_free(g);
}

/* routing: selected counts set the bytes and costs of expert transfers, ids are carried */
static void test_routing(uint64_t *rng)
{
    for (int it = 0; it < 50; it++) {
        int n = 10 + (int)(tu_rand(rng) % 30);
        ats_graph *g = fx_random_graph(rng, n, 1);
        ats_costs c, cr;
        ats_placement p;
        ats_assignment a;
        ats_plan pl;
        ats_plan_init(&pl);
        CHECK(ats_costs_init(&c, n) == 0 && ats_costs_init(&cr, n) == 0 && ats_placement_init(&p, n) == 0 &&
              ats_assignment_init(&a, n) == 0);
        fx_random_costs(rng, g, &c);
        double nsel[64];
        int32_t off[65], ids[64 * 8];
        int m = 0;
        for (int i = 0; i < n; i++) {
            off[i] = m;
            nsel[i] = 0;
            if (g->ops[i].kind == ATS_OP_EXPERTS) {
                int k = 1 + (int)(tu_rand(rng) % 4);
                nsel[i] = k;
                for (int e = 0; e < k; e++) ids[m++] = (e * 3 + i) % 8;
                a.backend[i] = ATS_GPU; /* promote every expert op */
            }
        }
        off[n] = m;
        ats_routing rt = {n, nsel, off, ids};
        ats_err err;
        CHECK(ats_costs_route(g, &c, &rt, &cr, &err) == ATS_OK);
        ats_plan_opts o = ats_plan_opts_default();
        o.temp_bytes = 1ull << 30;
        o.routing = &rt;
        CHECK_MSG(ats_plan_build(g, &p, &a, &cr, &o, &pl, &err) == ATS_OK, "%s", err.msg);
        for (int k = 0; k < pl.n_wxfers; k++) {
            const ats_wxfer *x = &pl.wxfers[k];
            const ats_op *op = &g->ops[x->op];
            CHECK(x->bytes == (uint64_t)nsel[x->op] * op->expert_bytes);
            CHECK(x->n_experts == nsel[x->op]);
            CHECK(x->n_ids == off[x->op + 1] - off[x->op]);
            for (int q = 0; q < x->n_ids; q++) CHECK(pl.expert_ids[x->ids_off + q] == ids[off[x->op] + q]);
            CHECK_REL(cr.w[x->op], c.w[x->op] + (nsel[x->op] - op->n_expert_active) * c.w_expert[x->op], 1e-12, 1e-15);
        }
        ats_plan_free(&pl);
        ats_assignment_free(&a);
        ats_placement_free(&p);
        ats_costs_free(&c);
        ats_costs_free(&cr);
        ats_graph_free(g);
    }
}

/* ats_cpu_idle_time against a brute-force integration on a fine grid: random unsorted, overlapping,
 * partly outside, empty and NaN intervals; factor 1 gives the duration; no interval, the duration */
static void test_cpu_idle_time(uint64_t *rng)
{
    double x0[12], x1[12], scratch[24];
    for (int it = 0; it < 300; it++) {
        const int nx = (int)(tu_rand(rng) % 12);
        const double t0 = tu_uniform(rng, 0.0, 1.0), t1 = t0 + tu_uniform(rng, 0.0, 1.0);
        const double f = tu_uniform(rng, 0.1, 1.0);
        for (int k = 0; k < nx; k++) {
            x0[k] = tu_uniform(rng, -0.2, 2.2);
            x1[k] = x0[k] + tu_uniform(rng, -0.1, 0.6); /* some empty */
            if (tu_rand(rng) % 10 == 0) x0[k] = NAN;
        }
        const int steps = 20000;
        double ov = 0.0, h = (t1 - t0) / steps;
        for (int j = 0; j < steps; j++) {
            double t = t0 + (j + 0.5) * h;
            int in = 0;
            for (int k = 0; k < nx && !in; k++) in = t >= x0[k] && t < x1[k];
            ov += in ? h : 0.0;
        }
        const double want = (t1 - t0) - (1.0 - f) * ov;
        const double got = ats_cpu_idle_time(t0, t1, x0, x1, nx, f, scratch);
        CHECK_MSG(fabs(got - want) <= 2.0 * nx * h + 1e-12, "it %d: %d intervals, idle time %.9f, brute force %.9f", it,
                  nx, got, want);
        CHECK(got <= t1 - t0 + 1e-15 && got >= f * (t1 - t0) - 1e-12);
        CHECK_NEAR(ats_cpu_idle_time(t0, t1, x0, x1, nx, 1.0, scratch), t1 - t0, 1e-15);
        CHECK_NEAR(ats_cpu_idle_time(t0, t1, NULL, NULL, 0, f, NULL), t1 - t0, 1e-15);
    }
    /* one copy over the middle half of a 4 ms op at factor 0.5: 3 ms of idle work */
    double a = 0.001, b = 0.003;
    CHECK_NEAR(ats_cpu_idle_time(0.0, 0.004, &a, &b, 1, 0.5, scratch), 0.003, 1e-15);
}

int main(void)
{
    uint64_t rng = tu_seed("test_plan");
    test_random_plans(&rng);
    test_rebuild(&rng);
    test_routing(&rng);
    test_bad_inputs(&rng);
    test_cpu_idle_time(&rng);
    return tu_finish("test_plan");
}
