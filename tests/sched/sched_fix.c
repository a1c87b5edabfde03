#include "sched_fix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "testutil.h"

#define MIB (1024.0 * 1024.0)

static int rint_(uint64_t *rng, int lo, int hi) { return lo + (int)(tu_rand(rng) % (uint64_t)(hi - lo + 1)); }

ats_graph *fx_random_graph(uint64_t *rng, int n, int moe)
{
    ats_graph *g = calloc(1, sizeof *g);
    g->ops = calloc((size_t)n, sizeof *g->ops);
    g->n_ops = n;
    ats_arch_init(&g->arch);
    snprintf(g->arch.name, sizeof g->arch.name, "random");
    g->arch.n_layer = 1;
    if (moe) {
        g->arch.n_expert = 8;
        g->arch.n_expert_used = 2;
    }
    g->phase.kind = ATS_PHASE_DECODE;
    g->phase.n_tokens = 1;
    int i = 0;
    ats_op *o = &g->ops[i++];
    o->kind = ATS_OP_EMBED;
    o->layer = -1;
    o->weight_bytes = (uint64_t)(rint_(rng, 1, 64) * MIB);
    snprintf(o->name, sizeof o->name, "token_embd");
    while (i < n) {
        int r = rint_(rng, 0, 9);
        if (moe && r >= 7 && i + 2 <= n) {
            int router = i;
            o = &g->ops[i++];
            o->kind = ATS_OP_MATMUL;
            o->role = ATS_ROLE_FFN_GATE_INP;
            o->weight_bytes = (uint64_t)(rint_(rng, 1, 4) * MIB);
            snprintf(o->name, sizeof o->name, "router%d", router);
            int ne = rint_(rng, 1, 3);
            for (int e = 0; e < ne && i < n; e++) {
                o = &g->ops[i++];
                o->kind = ATS_OP_EXPERTS;
                o->role = (ats_role)(ATS_ROLE_FFN_GATE_EXPS + e);
                o->router = router;
                o->has_router = 1;
                o->n_expert = 8;
                o->expert_bytes = (uint64_t)(rint_(rng, 1, 8) * MIB);
                o->weight_bytes = 8 * o->expert_bytes;
                o->n_expert_active = rint_(rng, 1, 4);
                snprintf(o->name, sizeof o->name, "exps%d", i - 1);
            }
            if (i < n && rint_(rng, 0, 1)) {
                o = &g->ops[i++];
                o->kind = ATS_OP_SHEXP;
                o->n_expert = 1;
                o->n_expert_active = 1;
                o->expert_bytes = (uint64_t)(rint_(rng, 1, 8) * MIB);
                o->weight_bytes = o->expert_bytes;
                snprintf(o->name, sizeof o->name, "shexp%d", i - 1);
            }
            continue;
        }
        o = &g->ops[i++];
        if (r <= 1) {
            o->kind = ATS_OP_NORM;
            o->weight_bytes = (uint64_t)MIB;
        } else if (r == 2) {
            o->kind = ATS_OP_ATTN;
            o->kv_cache_bytes = (uint64_t)(rint_(rng, 1, 32) * MIB);
        } else {
            o->kind = ATS_OP_MATMUL;
            o->weight_bytes = (uint64_t)(rint_(rng, 1, 64) * MIB);
        }
        snprintf(o->name, sizeof o->name, "op%d", i - 1);
    }
    for (int k = 0; k < n; k++) {
        g->ops[k].act_in_bytes = 4096;
        g->weight_bytes += g->ops[k].weight_bytes;
        g->kv_cache_bytes += g->ops[k].kv_cache_bytes;
    }
    return g;
}

void fx_random_costs(uint64_t *rng, const ats_graph *g, ats_costs *c)
{
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        c->t_cpu[i] = tu_uniform(rng, 0.1, 2.0);
        c->t_gpu[i] = tu_uniform(rng, 0.01, 0.6);
        if (tu_rand(rng) % 8 == 0) c->t_gpu[i] = tu_uniform(rng, 0.5, 2.5); /* sometimes slower on GPU */
        c->w[i] = tu_uniform(rng, 0.05, 3.0);
        c->c[i] = i == 0 ? 0.0 : tu_uniform(rng, 0.0, 0.4);
        c->w_expert[i] = 0;
        if (op->kind == ATS_OP_EXPERTS) c->w_expert[i] = c->w[i] / op->n_expert_active;
    }
}

ats_graph *fx_model_graph(const char *name, ats_phase_kind kind, int64_t n_tokens, int64_t ctx_pos)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "models/%s.json", name);
    tu_source_path(path, sizeof path, rel);
    ats_arch a;
    ats_err err;
    enum ats_status st = atsc_model_load(path, &a, &err);
    CHECK_MSG(st == ATS_OK, "%s", err.msg);
    if (st) return NULL;
    ats_graph_opts o = ats_graph_opts_default();
    o.recipe = a.default_recipe;
    o.phase.kind = kind;
    o.phase.n_tokens = n_tokens;
    o.phase.ctx_pos = ctx_pos;
    o.n_ctx = 4096; /* the same KV capacity for every round of a model */
    ats_graph *g = NULL;
    st = ats_graph_build(&a, &o, &g, &err);
    CHECK_MSG(st == ATS_OK, "%s: %s", name, err.msg);
    return st ? NULL : g;
}

int fx_hw(const char *name, ats_hw *hw)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "sim/hw/%s.json", name);
    tu_source_path(path, sizeof path, rel);
    ats_err err;
    enum ats_status st = atsc_hw_load(path, hw, &err);
    CHECK_MSG(st == ATS_OK, "%s", err.msg);
    return st == ATS_OK;
}
