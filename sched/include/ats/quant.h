/*
 * ats/quant.h — quantization types (GGUF/ggml names and ids) and their exact byte sizes.
 *
 * The scheduler only needs sizes; the block layouts themselves (shared by the C and CUDA kernels)
 * live in the executor (exec/include/ex/quant_blocks.h). Block sizes are from
 * ../shared/models/QUANT_FORMATS.md (ggml src/ggml-common.h).
 *
 * A quantization *recipe* (GGUF file types such as "Q4_K_M") maps every tensor role of a model to a
 * type; see ats_recipe_type(). Usage: look up a type by name with ats_qtype_from_name(), get the
 * bytes of a row with ats_qtype_row_bytes().
 */
#ifndef ATS_QUANT_H
#define ATS_QUANT_H

#include <stdint.h>
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Quantization type; values are the ggml type ids used in GGUF. */
typedef enum ats_qtype {
    ATS_Q_F32 = 0,
    ATS_Q_F16 = 1,
    ATS_Q_Q4_0 = 2,
    ATS_Q_Q8_0 = 8,
    ATS_Q_Q4_K = 12,
    ATS_Q_Q6_K = 14,
    ATS_Q_BF16 = 30,
    ATS_Q_MXFP4 = 39
} ats_qtype;

/** Elements per block (1 for F32/F16/BF16). Returns 0 for an unknown id. */
int ats_qtype_block_elems(ats_qtype t);
/** Bytes per block (4/2/2 for F32/F16/BF16; 18 Q4_0; 34 Q8_0; 144 Q4_K; 210 Q6_K; 17 MXFP4).
 *  Returns 0 for an unknown id. */
int ats_qtype_block_bytes(ats_qtype t);
/** GGUF spelling ("F32", "Q4_K", …); "?" for an unknown id. */
const char *ats_qtype_name(ats_qtype t);
/** Case-insensitive lookup of a GGUF type name. ATS_ENOTFOUND if unknown. */
enum ats_status ats_qtype_from_name(const char *name, ats_qtype *out);
/** 1 if `id` is one of the types above. */
int ats_qtype_valid(int id);
/** Bytes of `n` contiguous elements [bytes]; n must be a multiple of the block size.
 *  ATS_ERANGE otherwise (the caller names the tensor). */
enum ats_status ats_qtype_bytes(ats_qtype t, int64_t n, uint64_t *out_bytes);

/** Tensor roles, named as in GGUF (blk.N.<role>.weight). */
typedef enum ats_role {
    ATS_ROLE_TOKEN_EMBD = 0,
    ATS_ROLE_ATTN_NORM,
    ATS_ROLE_ATTN_Q,
    ATS_ROLE_ATTN_K,
    ATS_ROLE_ATTN_V,
    ATS_ROLE_ATTN_OUTPUT,
    ATS_ROLE_ATTN_POST_NORM, /* GLM-4 sandwich norm after attention */
    ATS_ROLE_ATTN,           /* attention over the KV cache (q/k norms, sinks folded in) */
    ATS_ROLE_FFN_NORM,
    ATS_ROLE_FFN_GATE,
    ATS_ROLE_FFN_UP,
    ATS_ROLE_FFN_DOWN,
    ATS_ROLE_FFN_POST_NORM, /* GLM-4 sandwich norm after the FFN */
    ATS_ROLE_FFN_GATE_INP,  /* MoE router */
    ATS_ROLE_FFN_GATE_EXPS,
    ATS_ROLE_FFN_UP_EXPS,
    ATS_ROLE_FFN_DOWN_EXPS,
    ATS_ROLE_FFN_GATE_SHEXP,
    ATS_ROLE_FFN_UP_SHEXP,
    ATS_ROLE_FFN_DOWN_SHEXP,
    ATS_ROLE_OUTPUT_NORM,
    ATS_ROLE_OUTPUT,
    ATS_ROLE_COUNT
} ats_role;

/** GGUF role name ("attn_q", "ffn_down_exps", "output", …). */
const char *ats_role_name(ats_role r);
/** Lookup by GGUF role name; ATS_ENOTFOUND if unknown. */
enum ats_status ats_role_from_name(const char *name, ats_role *out);

/** Named quantization recipes (file types). */
typedef enum ats_recipe {
    ATS_RECIPE_F32 = 0,
    ATS_RECIPE_F16,
    ATS_RECIPE_BF16,
    ATS_RECIPE_Q8_0,
    ATS_RECIPE_Q4_0,
    ATS_RECIPE_Q4_K_M,
    ATS_RECIPE_MXFP4, /* GPT-OSS native: routed experts MXFP4, everything else BF16 */
    ATS_RECIPE_COUNT
} ats_recipe;

/** Recipe spelling ("q4_k_m", …). */
const char *ats_recipe_name(ats_recipe r);
/** Case-insensitive lookup ("Q4_K_M" and "q4_k_m" both work). ATS_ENOTFOUND if unknown. */
enum ats_status ats_recipe_from_name(const char *name, ats_recipe *out);

/**
 * Type of the weight of role `role` in layer `layer` (0-based; ignored for global roles) of a model
 * with `n_layer` layers under recipe `r`. Norm weights are always F32.
 * Q4_K_M follows llama.cpp's llama_tensor_get_type(): output → Q6_K; attn_v and ffn_down (also the
 * expert and shared-expert down projections) → Q6_K on the first and last n_layer/8 layers and on
 * every third layer in between ("use_more_bits"); everything else Q4_K. Rows whose width is not a
 * multiple of 256 cannot hold K-quants; callers fall back with ats_qtype_fallback().
 */
ats_qtype ats_recipe_type(ats_recipe r, ats_role role, int layer, int n_layer);

/** Type used when a row of `n_cols` elements cannot hold `t` (K-quants need n_cols % 256 == 0,
 *  32-element types n_cols % 32 == 0). llama.cpp falls back Q4_K → Q5_0 and Q6_K → Q8_0; ATS
 *  uses Q4_0 and Q8_0, the nearest types it implements, and F16 when even 32 does not divide.
 *  Returns `t` unchanged when it fits. */
ats_qtype ats_qtype_fallback(ats_qtype t, int64_t n_cols);

#ifdef __cplusplus
}
#endif
#endif
