/*
 * ats/arch.h — the architecture of a transformer model (dense or MoE), as published in its config.
 *
 * An ats_arch is plain data, filled from models/<name>.json by the common/ loader
 * (atsc_model_load) or from GGUF metadata by the executor. libats_sched never reads files; it only
 * validates (ats_arch_validate) and counts (ats_arch_param_count). Field names follow Hugging Face
 * config.json where one exists; the JSON loader maps each field one to one.
 */
#ifndef ATS_ARCH_H
#define ATS_ARCH_H

#include <stdint.h>
#include "ats/quant.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATS_NAME_LEN 64
#define ATS_SOURCE_LEN 512

typedef enum ats_rope_type {
    ATS_ROPE_NORM = 0, /* llama2.c / GGUF "llama": adjacent pairs (x[2i], x[2i+1]) */
    ATS_ROPE_NEOX = 1  /* GPT-NeoX / HF rotate_half: pairs (x[i], x[i + d/2]) */
} ats_rope_type;

/** Architecture hyper-parameters. All counts are elements, not bytes. */
typedef struct ats_arch {
    char name[ATS_NAME_LEN];     /* "qwen3-14b" */
    char family[ATS_NAME_LEN];   /* HF model_type: "llama", "qwen3", "qwen3_moe", "glm4", "mixtral", "gpt_oss" */
    char source[ATS_SOURCE_LEN]; /* where the numbers come from */
    int64_t n_embd;         /* hidden_size */
    int64_t n_ff;           /* intermediate_size of dense FFN layers (0 if none) */
    int64_t n_layer;        /* num_hidden_layers */
    int64_t n_head;         /* num_attention_heads */
    int64_t n_head_kv;      /* num_key_value_heads */
    int64_t head_dim;       /* per-head width of q/k/v */
    int64_t n_vocab;        /* vocab_size */
    int64_t n_expert;       /* routed experts per MoE layer (0 = dense model) */
    int64_t n_expert_used;  /* experts per token (top-k) */
    int64_t n_ff_exp;       /* width of one routed expert's FFN */
    int64_t n_expert_shared;/* shared experts per MoE layer */
    int64_t n_ff_shexp;     /* width of one shared expert's FFN */
    int64_t n_layer_dense_first; /* first k layers use a dense FFN (DeepSeek first_k_dense_replace) */
    int tied_embd;          /* output head shares token_embd */
    int qk_norm;            /* RMSNorm on q and k per head (Qwen3) */
    int attn_bias;          /* q/k/v (and o for gpt_oss) projections have biases */
    int sandwich_norm;      /* GLM-4: extra post-attention and post-FFN RMSNorms */
    int expert_bias;        /* routed experts and router have biases (gpt_oss) */
    int attn_sinks;         /* learned per-head attention sinks (gpt_oss) */
    int64_t sliding_window; /* tokens; 0 = full attention everywhere */
    int sliding_every;      /* layers l with l % sliding_every == 0 use the window (gpt_oss: 2); 0 = all
                               layers when sliding_window > 0 */
    int64_t n_ctx_max;      /* max_position_embeddings */
    double rope_theta;
    double rms_norm_eps;
    ats_rope_type rope_type;
    double partial_rotary;  /* fraction of head_dim that is rotated (1.0 = all) */
    ats_recipe default_recipe; /* the quantization the model is usually run at */
} ats_arch;

/* Upper limits checked by ats_arch_validate (far above any published model; they stop a typo such
 * as 10^9 layers from allocating gigabytes). */
#define ATS_ARCH_MAX_WIDTH 131072      /* hidden_size */
#define ATS_ARCH_MAX_FFN 1048576       /* intermediate sizes */
#define ATS_ARCH_MAX_LAYERS 1024
#define ATS_ARCH_MAX_HEADS 1024
#define ATS_ARCH_MAX_HEAD_DIM 4096
#define ATS_ARCH_MAX_VOCAB 4194304
#define ATS_ARCH_MAX_EXPERTS 4096
#define ATS_ARCH_MAX_CTX 16777216      /* tokens */

/** Zeroed arch with neutral defaults (rope_theta 10000, eps 1e-5, partial_rotary 1, recipe Q4_K_M). */
void ats_arch_init(ats_arch *a);

/**
 * Checks that every field is consistent (positive sizes, n_head % n_head_kv == 0, experts with
 * n_expert_used ≤ n_expert, …). On failure returns ATS_EINVAL and writes "field: value (why)" to err.
 */
enum ats_status ats_arch_validate(const ats_arch *a, ats_err *err);

/** 1 when the model has routed experts. */
static inline int ats_arch_is_moe(const ats_arch *a) { return a->n_expert > 0; }

/** 1 when layer `l` is an MoE layer. */
int ats_arch_layer_is_moe(const ats_arch *a, int64_t l);

/** 1 when layer `l` uses sliding-window attention. */
int ats_arch_layer_is_sliding(const ats_arch *a, int64_t l);

/**
 * Parameter counts [parameters]: `total` (all weights, including both embedding and output head
 * unless tied) and `active` (weights touched for one token: routed experts counted n_expert_used
 * times instead of n_expert times). Either pointer may be NULL.
 */
void ats_arch_param_count(const ats_arch *a, double *total, double *active);

/** KV cache bytes per token per layer, F16 K and V [bytes] (= 2 · n_head_kv · head_dim · 2). */
uint64_t ats_arch_kv_bytes_per_token(const ats_arch *a);

#ifdef __cplusplus
}
#endif
#endif
