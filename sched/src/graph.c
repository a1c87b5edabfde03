/* The op graph of one round. Formulas are in ats/graph.h. */
#include "ats/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ats_graph_opts ats_graph_opts_default(void)
{
    ats_graph_opts o;
    o.recipe = ATS_RECIPE_Q4_K_M;
    o.phase.kind = ATS_PHASE_DECODE;
    o.phase.n_tokens = 1;
    o.phase.ctx_pos = 2047;
    o.n_ctx = 0;
    o.tensor_types = NULL;
    return o;
}

size_t ats_tensor_types_len(int64_t n_layer)
{
    return (size_t)(n_layer + 1) * (size_t)ATS_ROLE_COUNT;
}

size_t ats_tensor_type_index(ats_role role, int32_t layer)
{
    return (size_t)(layer + 1) * (size_t)ATS_ROLE_COUNT + (size_t)role;
}

const char *ats_op_kind_name(ats_op_kind k)
{
    static const char *const names[ATS_OP_KIND_COUNT] = {"embed", "norm", "matmul", "attn", "experts", "shexp"};
    return ((int)k >= 0 && k < ATS_OP_KIND_COUNT) ? names[k] : "?";
}

typedef struct builder {
    ats_graph *g;
    const ats_qtype *types; /* NULL or the tensor-type table of ats_graph_opts */
    int32_t cap;
    const ats_arch *a;
    int64_t N;        /* tokens this round */
    ats_err *err;
    enum ats_status st;
} builder;

static ats_op *push(builder *b, ats_op_kind kind, ats_role role, int32_t layer)
{
    ats_graph *g = b->g;
    if (g->n_ops == b->cap) {
        int32_t cap = b->cap ? 2 * b->cap : 64;
        ats_op *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
        if (!ops) { b->st = ATS_ENOMEM; return NULL; }
        g->ops = ops;
        b->cap = cap;
    }
    ats_op *op = &g->ops[g->n_ops++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->role = role;
    op->layer = layer;
    if (layer >= 0) snprintf(op->name, sizeof op->name, "blk.%d.%s", layer, ats_role_name(role));
    else snprintf(op->name, sizeof op->name, "%s", ats_role_name(role));
    return op;
}

/* Bytes of an (n_out, n_in) matrix at the table's type for (role, layer), else at the recipe's type
 * with fallback. */
static int matrix(builder *b, ats_op *op, int64_t n_out, int64_t n_in)
{
    ats_qtype t;
    if (b->types) {
        t = b->types[ats_tensor_type_index(op->role, op->layer)];
    } else {
        t = ats_recipe_type(b->g->recipe, op->role, op->layer < 0 ? 0 : op->layer, (int)b->a->n_layer);
        t = ats_qtype_fallback(t, n_in);
    }
    uint64_t row;
    if (ats_qtype_bytes(t, n_in, &row) != ATS_OK) {
        b->st = ats_err_set(b->err, ATS_EINVAL, "%s: row width %lld does not divide into %s blocks", op->name,
                            (long long)n_in, ats_qtype_name(t));
        return -1;
    }
    op->qtype = t;
    op->n_out = n_out;
    op->n_in = n_in;
    op->expert_bytes = row * (uint64_t)n_out;
    return 0;
}

static void norm(builder *b, ats_role role, int32_t layer, int64_t width)
{
    ats_op *op = push(b, ATS_OP_NORM, role, layer);
    if (!op) return;
    op->qtype = ATS_Q_F32;
    op->n_out = width;
    op->n_in = width;
    op->weight_bytes = (uint64_t)width * 4u;
    op->n_params = (double)width;
    op->flop = 4.0 * (double)b->N * (double)width; /* square, sum, scale, weight */
    op->act_in_bytes = op->act_out_bytes = (uint64_t)(b->N * width * 4);
}

/* y = W x (+ bias) for `n_tok` tokens. */
static ats_op *linear(builder *b, ats_role role, int32_t layer, int64_t n_out, int64_t n_in, int bias,
                      int64_t n_tok)
{
    ats_op *op = push(b, ATS_OP_MATMUL, role, layer);
    if (!op || matrix(b, op, n_out, n_in)) return NULL;
    op->weight_bytes = op->expert_bytes + (bias ? (uint64_t)n_out * 4u : 0u);
    op->expert_bytes = 0;
    op->n_params = (double)n_out * (double)n_in + (bias ? (double)n_out : 0.0);
    op->flop = 2.0 * (double)n_tok * (double)n_out * (double)n_in;
    op->act_in_bytes = (uint64_t)(n_tok * n_in * 4);
    op->act_out_bytes = (uint64_t)(n_tok * n_out * 4);
    return op;
}

static void experts(builder *b, ats_op_kind kind, ats_role role, int32_t layer, int64_t n_out, int64_t n_in,
                    int32_t router)
{
    const ats_arch *a = b->a;
    ats_op *op = push(b, kind, role, layer);
    if (!op || matrix(b, op, n_out, n_in)) return;
    int bias = kind == ATS_OP_EXPERTS && a->expert_bias;
    if (bias) op->expert_bytes += (uint64_t)n_out * 4u;
    double per_tok; /* experts each token runs through */
    if (kind == ATS_OP_EXPERTS) {
        op->n_expert = (int32_t)a->n_expert;
        per_tok = (double)a->n_expert_used;
        double E = (double)a->n_expert, k = (double)a->n_expert_used;
        op->n_expert_active = E * (1.0 - pow(1.0 - k / E, (double)b->N));
        op->router = router;
        op->has_router = 1;
    } else {
        op->n_expert = (int32_t)a->n_expert_shared;
        per_tok = (double)a->n_expert_shared;
        op->n_expert_active = (double)a->n_expert_shared;
    }
    op->weight_bytes = op->expert_bytes * (uint64_t)op->n_expert;
    op->n_params = (double)op->n_expert * ((double)n_out * (double)n_in + (bias ? (double)n_out : 0.0));
    op->flop = 2.0 * (double)b->N * per_tok * (double)n_out * (double)n_in;
    op->act_in_bytes = (uint64_t)(b->N * n_in * 4) * (role == ATS_ROLE_FFN_DOWN_EXPS || role == ATS_ROLE_FFN_DOWN_SHEXP
                                                          ? (uint64_t)per_tok : 1u);
    op->act_out_bytes = (uint64_t)((double)(b->N * n_out * 4) * per_tok);
}

static void attention(builder *b, int32_t layer)
{
    const ats_arch *a = b->a;
    const ats_graph *g = b->g;
    ats_op *op = push(b, ATS_OP_ATTN, ATS_ROLE_ATTN, layer);
    if (!op) return;
    op->qtype = ATS_Q_F16;
    const int64_t q = a->n_head * a->head_dim, kv = a->n_head_kv * a->head_dim;
    double small = 0; /* q/k norm weights and sinks live with the attention op */
    if (a->qk_norm) small += 2.0 * (double)a->head_dim;
    if (a->attn_sinks) small += (double)a->n_head;
    op->weight_bytes = (uint64_t)small * 4u;
    op->n_params = small;
    const int sliding = ats_arch_layer_is_sliding(a, layer);
    const uint64_t per_tok = ats_arch_kv_bytes_per_token(a);
    /* Context each query attends to, averaged over the chunk (causal): P + (N+1)/2. */
    const double P = (double)g->phase.ctx_pos, N = (double)b->N;
    double ctx_avg = P + (N + 1.0) / 2.0;
    double ctx_read = P + N; /* keys/values read once per round */
    int64_t cache_tokens = g->n_ctx;
    if (sliding) {
        double w = (double)a->sliding_window;
        if (ctx_avg > w) ctx_avg = w;
        if (ctx_read > w + N - 1.0) ctx_read = w + N - 1.0;
        if (cache_tokens > a->sliding_window) cache_tokens = a->sliding_window;
    }
    op->flop = 4.0 * N * (double)a->n_head * (double)a->head_dim * ctx_avg;
    op->kv_read_bytes = (uint64_t)(ctx_read * (double)per_tok);
    op->kv_cache_bytes = (uint64_t)cache_tokens * per_tok;
    op->act_in_bytes = (uint64_t)(b->N * (q + 2 * kv) * 4);
    op->act_out_bytes = (uint64_t)(b->N * q * 4);
}

enum ats_status ats_graph_build(const ats_arch *arch, const ats_graph_opts *opts, ats_graph **out, ats_err *err)
{
    *out = NULL;
    if (!arch || !opts) return ats_err_set(err, ATS_EINVAL, "graph: NULL argument");
    enum ats_status st = ats_arch_validate(arch, err);
    if (st) return st;
    if (opts->phase.n_tokens < 1)
        return ats_err_set(err, ATS_EINVAL, "phase: n_tokens %lld (must be >= 1)", (long long)opts->phase.n_tokens);
    if (opts->phase.ctx_pos < 0)
        return ats_err_set(err, ATS_EINVAL, "phase: ctx_pos %lld (must be >= 0)", (long long)opts->phase.ctx_pos);
    if (opts->phase.kind == ATS_PHASE_DECODE && opts->phase.n_tokens != 1)
        return ats_err_set(err, ATS_EINVAL, "phase: decode with n_tokens %lld (must be 1)", (long long)opts->phase.n_tokens);
    if ((int)opts->recipe < 0 || opts->recipe >= ATS_RECIPE_COUNT)
        return ats_err_set(err, ATS_EINVAL, "recipe: %d (unknown)", (int)opts->recipe);
    if (opts->phase.n_tokens > ATS_ARCH_MAX_CTX || opts->phase.ctx_pos > ATS_ARCH_MAX_CTX - opts->phase.n_tokens)
        return ats_err_set(err, ATS_EINVAL, "phase: ctx_pos %lld + n_tokens %lld (must be <= %d tokens)",
                           (long long)opts->phase.ctx_pos, (long long)opts->phase.n_tokens, ATS_ARCH_MAX_CTX);
    if (opts->n_ctx < 0 || opts->n_ctx > ATS_ARCH_MAX_CTX)
        return ats_err_set(err, ATS_EINVAL, "n_ctx: %lld (must be in 0..%d tokens)", (long long)opts->n_ctx,
                           ATS_ARCH_MAX_CTX);
    const int64_t need = opts->phase.ctx_pos + opts->phase.n_tokens;
    if (opts->n_ctx != 0 && opts->n_ctx < need)
        return ats_err_set(err, ATS_EINVAL, "n_ctx: %lld (smaller than ctx_pos + n_tokens = %lld)",
                           (long long)opts->n_ctx, (long long)need);

    ats_graph *g = calloc(1, sizeof *g);
    if (!g) return ATS_ENOMEM;
    g->arch = *arch;
    g->recipe = opts->recipe;
    g->phase = opts->phase;
    g->n_ctx = opts->n_ctx ? opts->n_ctx : need;
    builder b = {g, opts->tensor_types, 0, &g->arch, opts->phase.n_tokens, err, ATS_OK};
    const ats_arch *a = &g->arch;
    const int64_t E = a->n_embd, q = a->n_head * a->head_dim, kv = a->n_head_kv * a->head_dim, N = b.N;
    const int gpt_oss = strcmp(a->family, "gpt_oss") == 0;

    /* token embedding: a row lookup (no FLOPs) */
    ats_op *emb = push(&b, ATS_OP_EMBED, ATS_ROLE_TOKEN_EMBD, -1);
    if (emb && !matrix(&b, emb, a->n_vocab, E)) {
        emb->weight_bytes = emb->expert_bytes;
        emb->expert_bytes = 0;
        emb->n_params = (double)a->n_vocab * (double)E;
        emb->act_in_bytes = (uint64_t)N * 4u; /* token ids */
        emb->act_out_bytes = (uint64_t)(N * E * 4);
    }
    for (int32_t l = 0; l < a->n_layer && b.st == ATS_OK; l++) {
        norm(&b, ATS_ROLE_ATTN_NORM, l, E);
        linear(&b, ATS_ROLE_ATTN_Q, l, q, E, a->attn_bias, N);
        linear(&b, ATS_ROLE_ATTN_K, l, kv, E, a->attn_bias, N);
        linear(&b, ATS_ROLE_ATTN_V, l, kv, E, a->attn_bias, N);
        attention(&b, l);
        linear(&b, ATS_ROLE_ATTN_OUTPUT, l, E, q, a->attn_bias && gpt_oss, N);
        if (a->sandwich_norm) norm(&b, ATS_ROLE_ATTN_POST_NORM, l, E);
        norm(&b, ATS_ROLE_FFN_NORM, l, E);
        if (ats_arch_layer_is_moe(a, l)) {
            ats_op *r = linear(&b, ATS_ROLE_FFN_GATE_INP, l, a->n_expert, E, a->expert_bias, N);
            if (!r) break;
            int32_t ri = (int32_t)(r - g->ops);
            experts(&b, ATS_OP_EXPERTS, ATS_ROLE_FFN_GATE_EXPS, l, a->n_ff_exp, E, ri);
            experts(&b, ATS_OP_EXPERTS, ATS_ROLE_FFN_UP_EXPS, l, a->n_ff_exp, E, ri);
            experts(&b, ATS_OP_EXPERTS, ATS_ROLE_FFN_DOWN_EXPS, l, E, a->n_ff_exp, ri);
            if (a->n_expert_shared > 0) {
                experts(&b, ATS_OP_SHEXP, ATS_ROLE_FFN_GATE_SHEXP, l, a->n_ff_shexp, E, -1);
                experts(&b, ATS_OP_SHEXP, ATS_ROLE_FFN_UP_SHEXP, l, a->n_ff_shexp, E, -1);
                experts(&b, ATS_OP_SHEXP, ATS_ROLE_FFN_DOWN_SHEXP, l, E, a->n_ff_shexp, -1);
            }
        } else {
            linear(&b, ATS_ROLE_FFN_GATE, l, a->n_ff, E, 0, N);
            linear(&b, ATS_ROLE_FFN_UP, l, a->n_ff, E, 0, N);
            linear(&b, ATS_ROLE_FFN_DOWN, l, E, a->n_ff, 0, N);
        }
        if (a->sandwich_norm) norm(&b, ATS_ROLE_FFN_POST_NORM, l, E);
    }
    if (b.st == ATS_OK) {
        norm(&b, ATS_ROLE_OUTPUT_NORM, -1, E);
        /* logits only for the last token of a prefill chunk, as llama.cpp computes them */
        linear(&b, ATS_ROLE_OUTPUT, -1, a->n_vocab, E, 0, 1);
    }
    if (b.st != ATS_OK) {
        if (b.st == ATS_ENOMEM) ats_err_set(err, ATS_ENOMEM, "graph: out of memory");
        ats_graph_free(g);
        return b.st;
    }
    for (int32_t i = 0; i < g->n_ops; i++) {
        g->weight_bytes += g->ops[i].weight_bytes;
        g->kv_cache_bytes += g->ops[i].kv_cache_bytes;
    }
    *out = g;
    return ATS_OK;
}

void ats_graph_free(ats_graph *g)
{
    if (!g) return;
    free(g->ops);
    free(g);
}

int ats_graph_ops_in_layer(const ats_graph *g, int32_t l)
{
    int n = 0;
    for (int32_t i = 0; i < g->n_ops; i++) n += g->ops[i].layer == l;
    return n;
}

int32_t ats_op_fused_head(const ats_graph *g, int32_t i)
{
    const ats_role r = g->ops[i].role;
    ats_role head;
    if (r == ATS_ROLE_FFN_UP_EXPS || r == ATS_ROLE_FFN_DOWN_EXPS) head = ATS_ROLE_FFN_GATE_EXPS;
    else if (r == ATS_ROLE_FFN_UP_SHEXP || r == ATS_ROLE_FFN_DOWN_SHEXP) head = ATS_ROLE_FFN_GATE_SHEXP;
    else return i;
    for (int32_t j = i - 1; j >= 0 && j >= i - 2; j--)
        if (g->ops[j].role == head && g->ops[j].layer == g->ops[i].layer) return j;
    return i;
}

uint64_t ats_op_xfer_bytes(const ats_graph *g, const ats_routing *routing, int32_t i)
{
    const ats_op *op = &g->ops[i];
    if (op->kind == ATS_OP_ATTN) return op->kv_cache_bytes;
    if (op->kind != ATS_OP_EXPERTS) return op->weight_bytes;
    double k = op->n_expert_active;
    if (routing && routing->n_selected && routing->n == g->n_ops) k = routing->n_selected[i];
    double ek = ceil(k - 1e-9);
    if (ek < 0) ek = 0;
    if (ek > op->n_expert) ek = op->n_expert;
    return (uint64_t)ek * op->expert_bytes;
}

uint64_t ats_op_slot_bytes(const ats_graph *g, const ats_routing *routing, int32_t i)
{
    const ats_op *op = &g->ops[i];
    if (op->kind != ATS_OP_EXPERTS || (routing && routing->n_selected && routing->n == g->n_ops))
        return ats_op_xfer_bytes(g, routing, i);
    int64_t most = g->phase.n_tokens * g->arch.n_expert_used;
    if (most > op->n_expert || most < 1) most = op->n_expert;
    return (uint64_t)most * op->expert_bytes;
}
