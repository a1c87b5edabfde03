/* Architecture validation and parameter counting. */
#include "ats/arch.h"

#include <math.h>
#include <string.h>

void ats_arch_init(ats_arch *a)
{
    memset(a, 0, sizeof *a);
    a->rope_theta = 10000.0;
    a->rms_norm_eps = 1e-5;
    a->partial_rotary = 1.0;
    a->default_recipe = ATS_RECIPE_Q4_K_M;
    a->rope_type = ATS_ROPE_NORM;
}

/* Messages use the JSON (Hugging Face config) key of each field. Upper limits keep a typo (e.g. a
 * layer count of 10^9) from turning into gigabytes of graph; they are far above any published model
 * (Llama-3.1-405B: hidden 16384, FFN 53248, 126 layers; vocabularies up to 262144). */
#define RANGE(f, key, lo, hi)                                                                    \
    do {                                                                                         \
        if (a->f < (lo) || a->f > (hi))                                                          \
            return ats_err_set(err, ATS_EINVAL, "'%s': %lld (must be in %lld..%lld)", key,        \
                               (long long)a->f, (long long)(lo), (long long)(hi));               \
    } while (0)

enum ats_status ats_arch_validate(const ats_arch *a, ats_err *err)
{
    if (!a) return ats_err_set(err, ATS_EINVAL, "'arch': NULL");
    RANGE(n_embd, "hidden_size", 1, ATS_ARCH_MAX_WIDTH);
    RANGE(n_layer, "num_hidden_layers", 1, ATS_ARCH_MAX_LAYERS);
    RANGE(n_head, "num_attention_heads", 1, ATS_ARCH_MAX_HEADS);
    RANGE(n_head_kv, "num_key_value_heads", 1, ATS_ARCH_MAX_HEADS);
    RANGE(head_dim, "head_dim", 1, ATS_ARCH_MAX_HEAD_DIM);
    RANGE(n_vocab, "vocab_size", 1, ATS_ARCH_MAX_VOCAB);
    RANGE(n_ff, "intermediate_size", 0, ATS_ARCH_MAX_FFN);
    RANGE(n_expert, "num_experts", 0, ATS_ARCH_MAX_EXPERTS);
    RANGE(n_expert_used, "num_experts_per_tok", 0, ATS_ARCH_MAX_EXPERTS);
    RANGE(n_ff_exp, "moe_intermediate_size", 0, ATS_ARCH_MAX_FFN);
    RANGE(n_expert_shared, "shared_experts", 0, ATS_ARCH_MAX_EXPERTS);
    RANGE(n_ff_shexp, "shared_expert_intermediate_size", 0, ATS_ARCH_MAX_FFN);
    RANGE(n_layer_dense_first, "first_k_dense_replace", 0, ATS_ARCH_MAX_LAYERS);
    RANGE(sliding_window, "sliding_window", 0, ATS_ARCH_MAX_CTX);
    RANGE(n_ctx_max, "max_position_embeddings", 0, ATS_ARCH_MAX_CTX);
    if (a->n_head % a->n_head_kv != 0)
        return ats_err_set(err, ATS_EINVAL, "'num_key_value_heads': %lld (must divide num_attention_heads %lld)",
                           (long long)a->n_head_kv, (long long)a->n_head);
    if (a->n_expert > 0) {
        if (a->n_expert_used < 1 || a->n_expert_used > a->n_expert)
            return ats_err_set(err, ATS_EINVAL, "'num_experts_per_tok': %lld (must be in 1..num_experts=%lld)",
                               (long long)a->n_expert_used, (long long)a->n_expert);
        if (a->n_ff_exp <= 0)
            return ats_err_set(err, ATS_EINVAL, "'moe_intermediate_size': %lld (must be > 0 for an MoE model)",
                               (long long)a->n_ff_exp);
        if (a->n_expert_shared > 0 && a->n_ff_shexp <= 0)
            return ats_err_set(err, ATS_EINVAL, "'shared_expert_intermediate_size': %lld (must be > 0 with shared experts)",
                               (long long)a->n_ff_shexp);
        if (a->n_layer_dense_first > 0 && a->n_ff <= 0)
            return ats_err_set(err, ATS_EINVAL, "'intermediate_size': %lld (must be > 0 with dense first layers)",
                               (long long)a->n_ff);
        if (a->n_layer_dense_first > a->n_layer)
            return ats_err_set(err, ATS_EINVAL, "'first_k_dense_replace': %lld (more than %lld layers)",
                               (long long)a->n_layer_dense_first, (long long)a->n_layer);
    } else {
        if (a->n_ff <= 0)
            return ats_err_set(err, ATS_EINVAL, "'intermediate_size': %lld (must be > 0 for a dense model)",
                               (long long)a->n_ff);
        if (a->n_expert_used != 0)
            return ats_err_set(err, ATS_EINVAL, "'num_experts_per_tok': %lld (set but num_experts is 0)",
                               (long long)a->n_expert_used);
    }
    if (!(a->rope_theta > 0) || !isfinite(a->rope_theta))
        return ats_err_set(err, ATS_EINVAL, "'rope_theta': %g (must be > 0)", a->rope_theta);
    if (!(a->rms_norm_eps > 0) || !isfinite(a->rms_norm_eps))
        return ats_err_set(err, ATS_EINVAL, "'rms_norm_eps': %g (must be > 0)", a->rms_norm_eps);
    if (!(a->partial_rotary > 0 && a->partial_rotary <= 1))
        return ats_err_set(err, ATS_EINVAL, "'partial_rotary_factor': %g (must be in (0, 1])", a->partial_rotary);
    if (a->sliding_every < 0)
        return ats_err_set(err, ATS_EINVAL, "'sliding_every': %d (must be >= 0)", a->sliding_every);
    if ((int)a->default_recipe < 0 || a->default_recipe >= ATS_RECIPE_COUNT)
        return ats_err_set(err, ATS_EINVAL, "'default_quant': %d (unknown recipe)", (int)a->default_recipe);
    return ATS_OK;
}

int ats_arch_layer_is_moe(const ats_arch *a, int64_t l)
{
    return a->n_expert > 0 && l >= a->n_layer_dense_first;
}

int ats_arch_layer_is_sliding(const ats_arch *a, int64_t l)
{
    if (a->sliding_window <= 0) return 0;
    if (a->sliding_every <= 0) return 1;
    return l % a->sliding_every == 0;
}

uint64_t ats_arch_kv_bytes_per_token(const ats_arch *a)
{
    return (uint64_t)(2 * a->n_head_kv * a->head_dim * 2);
}

void ats_arch_param_count(const ats_arch *a, double *total, double *active)
{
    const double E = (double)a->n_embd;
    const double q = (double)(a->n_head * a->head_dim), kv = (double)(a->n_head_kv * a->head_dim);
    double attn = E * q + 2.0 * E * kv + q * E; /* Q, K, V, O */
    if (a->attn_bias) attn += q + 2.0 * kv + (strcmp(a->family, "gpt_oss") == 0 ? E : 0.0);
    if (a->qk_norm) attn += 2.0 * (double)a->head_dim;
    if (a->attn_sinks) attn += (double)a->n_head;
    double norms = 2.0 * E + (a->sandwich_norm ? 2.0 * E : 0.0);
    double tot = 0, act = 0;
    for (int64_t l = 0; l < a->n_layer; l++) {
        double layer = attn + norms, layer_act = attn + norms;
        if (ats_arch_layer_is_moe(a, l)) {
            double one = 3.0 * E * (double)a->n_ff_exp;
            if (a->expert_bias) one += 2.0 * (double)a->n_ff_exp + E;
            double router = E * (double)a->n_expert + (a->expert_bias ? (double)a->n_expert : 0.0);
            double sh = (double)a->n_expert_shared * 3.0 * E * (double)a->n_ff_shexp;
            layer += router + (double)a->n_expert * one + sh;
            layer_act += router + (double)a->n_expert_used * one + sh;
        } else {
            layer += 3.0 * E * (double)a->n_ff;
            layer_act += 3.0 * E * (double)a->n_ff;
        }
        tot += layer;
        act += layer_act;
    }
    double emb = E * (double)a->n_vocab;
    double head = a->tied_embd ? 0.0 : E * (double)a->n_vocab;
    tot += emb + head + E;
    act += emb + head + E;
    if (total) *total = tot;
    if (active) *active = act;
}
