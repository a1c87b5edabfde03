/*
 * ex/model.h — a loaded model: weights, hyper-parameters and tokenizer.
 *
 * Architectures: "llama" (Llama-3.x, stories260K; RoPE on adjacent pairs), "qwen3" (dense, Q/K
 * norms, neox RoPE), "qwen3moe" (router top-k with softmax, routed experts, optional shared
 * experts). Weights come from a GGUF file (ex_model_load_gguf, memory-mapped, every tensor's
 * presence, shape and type checked) or are seeded random data of an architecture's exact shapes
 * and quantization recipe (ex_model_new_dummy, like vLLM's dummy load format).
 *
 * Lifecycle: model = ex_model_load_gguf(...) or ex_model_new_dummy(...); run it with sessions
 * (ex/session.h); ex_model_free(model) after the last session. A model is read-only after loading and
 * may back several sessions.
 */
#ifndef EX_MODEL_H
#define EX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ats/arch.h"
#include "ats/graph.h"
#include "ats/status.h"
#include "ex/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Weights of one layer (borrowed views into the model's storage). Shapes as GGUF ne (in, out). */
typedef struct ex_layer {
    ex_tensor attn_norm;            /* (n_embd) F32 */
    ex_tensor wq, wk, wv, wo;       /* (n_embd, n_head*hd), (n_embd, n_kv*hd) x2, (n_head*hd, n_embd) */
    ex_tensor q_norm, k_norm;       /* (hd) F32; qk_norm only */
    ex_tensor ffn_norm;             /* (n_embd) F32 */
    ex_tensor ffn_gate, ffn_up, ffn_down; /* dense: (n_embd, n_ff) x2, (n_ff, n_embd) */
    ex_tensor gate_inp;             /* MoE router (n_embd, n_expert) */
    ex_tensor gate_exps, up_exps, down_exps; /* (n_embd, n_ff_exp, n_expert) x2, (n_ff_exp, n_embd, n_expert) */
    ex_tensor gate_shexp, up_shexp, down_shexp; /* (n_embd, n_ff_shexp) x2, (n_ff_shexp, n_embd) */
    int moe;                        /* 1 when this layer uses routed experts */
    int has_shexp;
} ex_layer;

/** Tokenizer (SentencePiece-style vocabulary from the GGUF, byte fallback). Opaque. */
typedef struct ex_tokenizer ex_tokenizer;

typedef struct ex_model {
    ats_arch arch;          /* hyper-parameters; family is "llama", "qwen3" or "qwen3moe" */
    int64_t n_rot;          /* rotated dims per head */
    int norm_topk;          /* MoE: renormalise the top-k weights */
    ex_tensor tok_embd;     /* (n_embd, n_vocab) */
    ex_tensor output_norm;  /* (n_embd) F32 */
    ex_tensor output;       /* (n_embd, n_vocab); == tok_embd when tied */
    ex_tensor rope_freqs;   /* (n_rot/2) F32 RoPE frequency factors (Llama-3.1); data NULL when absent */
    ex_layer *layers;       /* n_layer entries, owned */
    ex_tokenizer *tok;      /* NULL for dummy weights */
    int32_t bos_id, eos_id; /* -1 when the vocabulary has none */
    uint64_t weight_bytes;  /* Σ tensor bytes [bytes] */
    void *storage;          /* owned: the GGUF handle or the dummy buffer */
    int storage_is_gguf;
} ex_model;

/** Loads a GGUF file. Checks: architecture known, every tensor present with the expected shape
 *  and a supported type, no blk.N tensor with N >= block_count, hyper-parameters consistent
 *  (ats_arch_validate). *out is new (free with
 *  ex_model_free). ATS_EINVAL/ATS_ENOTFOUND with one line in err naming file, tensor/key, values. */
enum ats_status ex_model_load_gguf(const char *path, ex_model **out, ats_err *err);

/** Progress of a long build: `done` of `total` bytes [bytes]. Called from the building thread. */
typedef void (*ex_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/** Builds seeded random weights (deterministic for a seed) of `arch` with the types of `recipe`
 *  (ats_recipe_type + ats_qtype_fallback), in memory. Block scales are set so that every weight is
 *  finite and of order 1/sqrt(n_in). family must be llama, qwen3, or qwen3moe/qwen3_moe.
 *  Multi-threaded fill (OpenMP). *out is new. ATS_EINVAL (message) for an unsupported family,
 *  ATS_ENOMEM when the weights do not fit. */
enum ats_status ex_model_new_dummy(const ats_arch *arch, ats_recipe recipe, uint64_t seed,
                                   ex_model **out, ats_err *err);
/** ex_model_new_dummy calling progress(progress_ctx, done, total) after each tensor is filled (progress
 *  may be NULL); a 14B model takes ~20 s. Same weights, same statuses. */
enum ats_status ex_model_new_dummy_progress(const ats_arch *arch, ats_recipe recipe, uint64_t seed,
                                            ex_progress_fn progress, void *progress_ctx, ex_model **out, ats_err *err);

/** Writes the weights ex_model_new_dummy(arch, recipe, seed) builds, byte for byte, as a GGUF v3 file
 *  at `path`, so that any GGUF runtime (llama.cpp, `ats run`) can be timed on the same weights. Tensors
 *  are made and written one at a time (memory: the largest tensor), through ex_gguf_write_fill
 *  (temporary "<path>.tmp.<pid>", fsync, rename). Metadata: general.architecture ("llama", "qwen3",
 *  "qwen3moe"), name, file_type (llama.cpp's LLAMA_FTYPE of the recipe), alignment 32; <arch>.block_count,
 *  context_length, embedding_length, feed_forward_length (when > 0), attention.head_count(_kv),
 *  key_length, value_length, rope.dimension_count, rope.freq_base, attention.layer_norm_rms_epsilon
 *  (F32, as llama.cpp requires), expert_count, expert_used_count, expert_feed_forward_length (and
 *  the shared-expert keys) for MoE models; a byte-level BPE vocabulary ("gpt2", pre "default") of
 *  n_vocab tokens: the 256 bytes in GPT-2's alphabet, then two- and three-byte tokens each made by one
 *  merge, and "<|endoftext|>" (control; BOS and EOS) as the last id. The output head is absent when
 *  tied. progress (may be NULL) is called after each tensor. Statuses: ex_model_new_dummy's;
 *  ATS_EINVAL for n_vocab outside 257..16842753 or an architecture feature without a GGUF key
 *  here; the writer's I/O errors (nothing left at path). */
enum ats_status ex_model_write_dummy_gguf(const ats_arch *arch, ats_recipe recipe, uint64_t seed, const char *path,
                                          ex_progress_fn progress, void *progress_ctx, ats_err *err);

void ex_model_free(ex_model *m);

/** Weight bytes one decode step reads [bytes]: every matrix once, one embedding row, and of each
 *  MoE layer's routed experts only n_expert_used / n_expert (uniform routing). The
 *  bytes-over-bandwidth floor of a decode step is this over the memory bandwidth. */
uint64_t ex_model_decode_bytes(const ex_model *m);

/**
 * Scans every weight of m (dequantized row by row, n_threads OpenMP threads) for NaN or Inf, as
 * llama.cpp's --check-tensors does: a non-finite F32/F16/BF16 value or block scale (Q8_0, Q4_0,
 * Q4_K, Q6_K d/dmin; MXFP4's E8M0 0xFF) makes its row non-finite. ATS_EINVAL naming the first such
 * tensor, its row (and expert) and element; ATS_ENOMEM; ATS_OK when all are finite. Reads every byte
 * of the weights (seconds for a 14B model).
 */
enum ats_status ex_model_check_tensors(const ex_model *m, int n_threads, ats_err *err);
/** The scan of ex_model_check_tensors for one tensor t (rows of ne[0] elements over ne[1] x ne[2];
 *  borrowed; data NULL = absent: ATS_OK), named `name` in the message: ATS_EINVAL "tensor 'NAME' (TYPE):
 *  NaN or Inf in [expert X, ]row R, element E" for the first non-finite row, ATS_ENOMEM, ATS_OK. Used
 *  by `ats quantize` on its source tensors. */
enum ats_status ex_tensor_check_finite(const char *name, const ex_tensor *t, int n_threads, ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
