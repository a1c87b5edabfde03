/*
 * test_graph — the op graph against published facts: parameter counts of every listed model within
 * 1% of the published figure, exact block arithmetic for Q4_0/Q8_0 weights, op counts per layer that
 * match each architecture, FLOP and KV formulas on hand-checked cases, and bad-input rejection.
 */
#include <stdio.h>
#include <string.h>

#include "ats/arch.h"
#include "ats/graph.h"
#include "atsc/model_json.h"
#include "testutil.h"

typedef struct {
    const char *name;
    double total_b, active_b; /* published [billions]; active 0 = not published */
    int active_excl_embd;     /* the publisher leaves the token embedding out of "active" */
    int ops_layer0;           /* expected ops in a layer */
    const char *source;
} published;

static const published PUB[] = {
    {"llama-3.1-8b", 8.03, 0, 0, 10, "HF meta-llama/Llama-3.1-8B: 8.03B"},
    {"llama-3.1-70b", 70.6, 0, 0, 10, "HF meta-llama/Llama-3.1-70B: 70.6B"},
    {"qwen3-14b", 14.8, 0, 0, 10, "Qwen3-14B model card: 14.8B"},
    {"qwen3-30b-a3b", 30.5, 3.3, 0, 11, "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"},
    {"glm-4-9b", 9.4, 0, 0, 12, "HF THUDM/GLM-Z1-9B-0414: 9.4B"},
    {"mixtral-8x7b", 46.7, 12.9, 0, 11, "mistral.ai Mixtral of experts: 46.7B total, 12.9B per token"},
    {"gpt-oss-20b", 20.9, 3.6, 1, 11, "gpt-oss model card (arXiv 2508.10925) Table 1: 20.9B / 3.6B"},
    {"gpt-oss-120b", 116.8, 5.1, 1, 11, "gpt-oss model card (arXiv 2508.10925) Table 1: 116.8B / 5.1B"},
};

static int load(const char *name, ats_arch *a)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "models/%s.json", name);
    tu_source_path(path, sizeof path, rel);
    ats_err err;
    enum ats_status st = atsc_model_load(path, a, &err);
    CHECK_MSG(st == ATS_OK, "%s", err.msg);
    return st == ATS_OK;
}

static ats_graph *build(const ats_arch *a, ats_recipe r, ats_phase_kind k, int64_t n, int64_t pos)
{
    ats_graph_opts o = ats_graph_opts_default();
    o.recipe = r;
    o.phase.kind = k;
    o.phase.n_tokens = n;
    o.phase.ctx_pos = pos;
    ats_graph *g = NULL;
    ats_err err;
    enum ats_status st = ats_graph_build(a, &o, &g, &err);
    CHECK_MSG(st == ATS_OK, "%s: %s", a->name, err.msg);
    return g;
}

static void test_published(void)
{
    for (size_t i = 0; i < sizeof PUB / sizeof PUB[0]; i++) {
        ats_arch a;
        if (!load(PUB[i].name, &a)) continue;
        ats_graph *g = build(&a, a.default_recipe, ATS_PHASE_DECODE, 1, 2047);
        if (!g) continue;
        double sum = 0;
        for (int32_t j = 0; j < g->n_ops; j++) sum += g->ops[j].n_params;
        double total, active;
        ats_arch_param_count(&a, &total, &active);
        CHECK_MSG(sum == total, "%s: graph holds %.0f parameters, ats_arch_param_count %.0f", a.name, sum, total);
        CHECK_MSG(fabs(total / 1e9 - PUB[i].total_b) <= 0.01 * PUB[i].total_b,
                  "%s: %.3fB parameters vs published %.1fB (%s)", a.name, total / 1e9, PUB[i].total_b, PUB[i].source);
        if (PUB[i].active_b > 0) {
            double act = active - (PUB[i].active_excl_embd ? (double)a.n_embd * (double)a.n_vocab : 0.0);
            /* active counts are published with one decimal: allow that rounding (±0.05B) plus 1%
               (Qwen3-30B-A3B: 3.353B computed vs "3.3B") */
            CHECK_MSG(fabs(act / 1e9 - PUB[i].active_b) <= 0.05 + 0.01 * PUB[i].active_b,
                      "%s: %.3fB active vs published %.1fB (%s)", a.name, act / 1e9, PUB[i].active_b, PUB[i].source);
        }
        /* every layer has the architecture's op count; 3 global ops (embedding, output norm, head) */
        for (int32_t l = 0; l < a.n_layer; l++)
            CHECK_MSG(ats_graph_ops_in_layer(g, l) == PUB[i].ops_layer0, "%s layer %d: %d ops, expected %d",
                      a.name, l, ats_graph_ops_in_layer(g, l), PUB[i].ops_layer0);
        CHECK(g->n_ops == 3 + PUB[i].ops_layer0 * a.n_layer);
        CHECK(g->ops[0].kind == ATS_OP_EMBED && g->ops[g->n_ops - 1].role == ATS_ROLE_OUTPUT);
        /* expert ops point at their layer's router, which precedes them */
        for (int32_t j = 0; j < g->n_ops; j++) {
            const ats_op *op = &g->ops[j];
            if (op->kind == ATS_OP_EXPERTS) {
                CHECK(op->has_router && op->router >= 0 && op->router < j && g->ops[op->router].role == ATS_ROLE_FFN_GATE_INP &&
                      g->ops[op->router].layer == op->layer);
                CHECK(op->weight_bytes == (uint64_t)op->n_expert * op->expert_bytes);
                CHECK_NEAR(op->n_expert_active, (double)a.n_expert_used, 1e-9); /* decode: exactly top-k */
            } else {
                CHECK(!op->has_router && op->router == 0); /* absent is its own flag, never -1 */
            }
        }
        ats_graph_free(g);
    }
}

/* Q4_0 and Q8_0 weight bytes equal the block arithmetic: n/32 blocks of 18 / 34 bytes. */
static void test_block_bytes(void)
{
    const char *names[] = {"qwen3-14b", "qwen3-30b-a3b", "llama-3.1-8b"};
    for (size_t m = 0; m < 3; m++) {
        ats_arch a;
        if (!load(names[m], &a)) continue;
        for (int r = 0; r < 2; r++) {
            ats_recipe rec = r ? ATS_RECIPE_Q8_0 : ATS_RECIPE_Q4_0;
            const uint64_t bb = r ? 34 : 18;
            ats_graph *g = build(&a, rec, ATS_PHASE_DECODE, 1, 100);
            if (!g) continue;
            for (int32_t j = 0; j < g->n_ops; j++) {
                const ats_op *op = &g->ops[j];
                if (op->kind == ATS_OP_NORM || op->kind == ATS_OP_ATTN) continue;
                if (op->role == ATS_ROLE_FFN_GATE_INP) { CHECK(op->qtype == ATS_Q_F32); continue; }
                if (rec == ATS_RECIPE_Q4_0 && op->role == ATS_ROLE_OUTPUT) { CHECK(op->qtype == ATS_Q_Q6_K); continue; }
                uint64_t elems = (uint64_t)op->n_out * (uint64_t)op->n_in;
                uint64_t want = elems / 32 * bb * (op->n_expert ? (uint64_t)op->n_expert : 1u);
                CHECK_MSG(op->weight_bytes == want, "%s %s %s: %llu bytes, block arithmetic %llu", a.name,
                          ats_recipe_name(rec), op->name, (unsigned long long)op->weight_bytes,
                          (unsigned long long)want);
            }
            ats_graph_free(g);
        }
    }
    /* the qtype table itself */
    uint64_t b;
    CHECK(ats_qtype_bytes(ATS_Q_Q4_K, 512, &b) == ATS_OK && b == 288);
    CHECK(ats_qtype_bytes(ATS_Q_Q6_K, 256, &b) == ATS_OK && b == 210);
    CHECK(ats_qtype_bytes(ATS_Q_MXFP4, 64, &b) == ATS_OK && b == 34);
    CHECK(ats_qtype_bytes(ATS_Q_BF16, 3, &b) == ATS_OK && b == 6);
    CHECK(ats_qtype_bytes(ATS_Q_Q4_K, 100, &b) == ATS_ERANGE);
}

/* Q4_K_M: llama.cpp's use_more_bits layers get Q6_K for attn_v and ffn_down; output Q6_K. */
static void test_q4_k_m(void)
{
    ats_arch a;
    if (!load("qwen3-14b", &a)) return;
    ats_graph *g = build(&a, ATS_RECIPE_Q4_K_M, ATS_PHASE_DECODE, 1, 10);
    if (!g) return;
    int n6 = 0;
    for (int32_t j = 0; j < g->n_ops; j++)
        if (g->ops[j].role == ATS_ROLE_FFN_DOWN && g->ops[j].qtype == ATS_Q_Q6_K) n6++;
    /* n = 40: layers < 5, >= 35, and (i - 5) % 3 == 2 for 5 <= i < 35 -> 5 + 5 + 10 = 20 */
    CHECK_MSG(n6 == 20, "ffn_down in Q6_K: %d layers, expected 20", n6);
    CHECK(g->ops[g->n_ops - 1].qtype == ATS_Q_Q6_K);
    ats_graph_free(g);
}

/* FLOPs and KV bytes on a hand-checked case. */
static void test_formulas(void)
{
    ats_arch a;
    if (!load("llama-3.1-8b", &a)) return;
    ats_graph *g = build(&a, ATS_RECIPE_Q4_K_M, ATS_PHASE_PREFILL, 512, 1024);
    if (!g) return;
    const ats_op *q = &g->ops[2], *at = &g->ops[5], *out = &g->ops[g->n_ops - 1];
    CHECK(q->role == ATS_ROLE_ATTN_Q && at->kind == ATS_OP_ATTN);
    CHECK_NEAR(q->flop, 2.0 * 512 * 4096 * 4096, 0);
    /* 4 * N * heads * head_dim * (P + (N+1)/2) */
    CHECK_NEAR(at->flop, 4.0 * 512 * 32 * 128 * (1024 + 513.0 / 2), 1);
    /* K+V F16: 2 * 8 kv heads * 128 * 2 bytes = 4096 bytes per token; read P + N tokens */
    CHECK(at->kv_read_bytes == 4096ull * 1536);
    CHECK(at->kv_cache_bytes == 4096ull * 1536);
    CHECK_NEAR(out->flop, 2.0 * 128256 * 4096, 0); /* logits of the last token only */
    ats_graph_free(g);
    /* sliding window (gpt-oss: even layers slide over 128 tokens) */
    ats_arch o;
    if (!load("gpt-oss-20b", &o)) return;
    g = build(&o, ATS_RECIPE_MXFP4, ATS_PHASE_DECODE, 1, 4095);
    if (!g) return;
    for (int32_t j = 0; j < g->n_ops; j++) {
        const ats_op *op = &g->ops[j];
        if (op->kind != ATS_OP_ATTN) continue;
        uint64_t per = 2 * 8 * 64 * 2;
        CHECK(op->kv_cache_bytes == per * (op->layer % 2 == 0 ? 128u : 4096u));
    }
    /* prefill: expected distinct experts E(1-(1-k/E)^N) */
    ats_graph_free(g);
    g = build(&o, ATS_RECIPE_MXFP4, ATS_PHASE_PREFILL, 16, 0);
    if (!g) return;
    for (int32_t j = 0; j < g->n_ops; j++)
        if (g->ops[j].kind == ATS_OP_EXPERTS)
            CHECK_NEAR(g->ops[j].n_expert_active, 32.0 * (1.0 - pow(1.0 - 4.0 / 32.0, 16)), 1e-9);
    ats_graph_free(g);
}

static void test_bad_input(void)
{
    ats_arch a;
    if (!load("qwen3-14b", &a)) return;
    ats_graph_opts o = ats_graph_opts_default();
    ats_graph *g = NULL;
    ats_err err;
    o.phase.n_tokens = 0;
    CHECK(ats_graph_build(&a, &o, &g, &err) == ATS_EINVAL && g == NULL && strstr(err.msg, "n_tokens"));
    o = ats_graph_opts_default();
    o.phase.ctx_pos = -1;
    CHECK(ats_graph_build(&a, &o, &g, &err) == ATS_EINVAL && strstr(err.msg, "ctx_pos"));
    o = ats_graph_opts_default();
    o.n_ctx = 10;
    CHECK(ats_graph_build(&a, &o, &g, &err) == ATS_EINVAL && strstr(err.msg, "n_ctx"));
    o = ats_graph_opts_default();
    ats_arch bad = a;
    bad.n_head_kv = 7;
    CHECK(ats_graph_build(&bad, &o, &g, &err) == ATS_EINVAL && strstr(err.msg, "num_key_value_heads"));
    bad = a;
    bad.n_embd = 0;
    CHECK(ats_graph_build(&bad, &o, &g, &err) == ATS_EINVAL && strstr(err.msg, "hidden_size"));
}

int main(void)
{
    test_published();
    test_block_bytes();
    test_q4_k_m();
    test_formulas();
    test_bad_input();
    return tu_finish("test_graph");
}
