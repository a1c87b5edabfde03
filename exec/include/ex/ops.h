/*
 * ex/ops.h — the ops of a transformer forward pass, with the same arguments on every backend.
 *
 * This header declares the CPU implementations `ex_cpu_<op>(...)`. The CUDA backend declares
 * `ex_cuda_<op>(<same arguments>, cudaStream_t-as-void* stream)` in ex/gpu.h; there every pointer
 * is device memory. The CPU op is the oracle of the CUDA op: same inputs, outputs within a per-type
 * bound (tests/exec/).
 *
 * Conventions (all ops):
 * - Activations are F32, row-major, one row per token: x is (n_tokens, n) — n_tokens rows of n.
 *   Decode is n_tokens = 1; a prefill chunk is n_tokens = N. Tokens of one call are consecutive
 *   positions pos0, pos0+1, … (batch size 1).
 * - Weights are borrowed `ex_tensor` views (type, shape, raw bytes in the GGUF layout of
 *   ex/quant_blocks.h). A linear layer y = W x has W with ne[0] = n_in (contiguous) and
 *   ne[1] = n_out rows, exactly as GGUF stores it; stacked experts add ne[2] = n_expert.
 * - Output buffers are caller-owned and must not alias inputs unless the op says "in place".
 * - Every op returns ATS_OK, or ATS_EINVAL for an argument it cannot handle (unsupported type,
 *   shape mismatch); nothing is written then. No op allocates memory that outlives the call.
 * - CPU threading: ops parallelise with OpenMP over output rows (or heads), using
 *   omp_get_max_threads() threads (`ats run --threads N` sets it). Ops are reentrant; two threads
 *   may call them on disjoint outputs. SIMD paths (AVX2, AVX-512, AVX-512 VNNI) are chosen at run
 *   time (ex_cpu_features()); results differ between paths only by float summation order.
 * - Quantized matmuls quantize the activation row to 8 bits per 32 (ex_block_q8_1) or per 256
 *   (ex_block_q8_K) elements and use integer dot products, as llama.cpp does; F32/F16/BF16 weights
 *   use float dot products. ex_cpu_matmul_ref is the exact float oracle (dequantize, then dot in
 *   double).
 */
#ifndef EX_OPS_H
#define EX_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ats/arch.h"
#include "ats/quant.h"
#include "ats/status.h"
#include "ex/quant_blocks.h" /* ex_fp16: the element of an F16 KV cache */

#ifdef __cplusplus
extern "C" {
#endif

/** A borrowed view of one weight tensor (GGUF layout). Shapes: ne[0] elements per row (the
 *  contiguous dimension; a multiple of the type's block size), ne[1] rows, ne[2] matrices (experts;
 *  1 otherwise). row_bytes = ats_qtype_bytes(type, ne[0]). `data` points to ne[2]*ne[1] rows on the
 *  backend's memory (host for CPU, device for CUDA); never owned by the view. */
typedef struct ex_tensor {
    ats_qtype type;
    int64_t ne[3];
    uint64_t row_bytes;
    const void *data;
} ex_tensor;

/** View of matrix `e` of a stacked (experts) tensor: ne[2] = 1, data advanced by e*ne[1] rows. */
ex_tensor ex_tensor_matrix(const ex_tensor *w, int64_t e);

/** Sampling parameters. temp <= 0 means greedy (argmax, lowest id on ties); top_k <= 0 and
 *  top_p >= 1 disable those filters. Order (as llama.cpp's common chain): top-k, softmax with
 *  temperature, top-p (smallest prefix of the sorted distribution with mass >= top_p), draw. */
typedef struct ex_sample_params {
    float temp;
    int32_t top_k;
    float top_p;
} ex_sample_params;

/** Greedy defaults (temp 0, top_k 0, top_p 1). */
ex_sample_params ex_sample_params_default(void);

/* ---- ops ---------------------------------------------------------------------------------- */

/** Token embedding: x[t] = dequantize(row tokens[t] of tok_embd). tok_embd (n_vocab, n_embd), any
 *  supported type; tokens (n_tokens) in [0, n_vocab) else ATS_EINVAL; x (n_tokens, n_embd). */
enum ats_status ex_cpu_embedding(const ex_tensor *tok_embd, const int32_t *tokens, int64_t n_tokens,
                                 float *x);

/** RMSNorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n_rows rows of n. w (n) F32; x, y
 *  (n_rows, n); in place allowed (y == x). Formula: Zhang & Sennrich 2019 (llama2.c rmsnorm). */
enum ats_status ex_cpu_rmsnorm(const float *x, const float *w, int64_t n_rows, int64_t n, float eps,
                               float *y);

/** Matmul y = W x for n_tokens rows: W (n_out, n_in) any supported type, x (n_tokens, n_in),
 *  y (n_tokens, n_out). Decode GEMV is n_tokens = 1; prefill uses the same call with N rows.
 *  Quantized W: x quantized to 8 bits (see top). Used for Q/K/V/O, dense FFN, router, output head. */
enum ats_status ex_cpu_matmul(const ex_tensor *w, const float *x, int64_t n_tokens, float *y);

/** Exact float oracle of ex_cpu_matmul: W dequantized, x kept F32, sums in double. Single-threaded
 *  and slow; for tests and for checking the CUDA path. */
enum ats_status ex_cpu_matmul_ref(const ex_tensor *w, const float *x, int64_t n_tokens, float *y);

/** Q/K norm (Qwen3): RMSNorm of every head vector in place. x (n_tokens, n_head, head_dim), w
 *  (head_dim) F32 shared by all heads. Same as ex_cpu_rmsnorm over n_tokens*n_head rows. */
enum ats_status ex_cpu_qk_norm(float *x, const float *w, int64_t n_tokens, int64_t n_head,
                               int64_t head_dim, float eps);

/** RoPE in place on x (n_tokens, n_head, head_dim); token t is at position pos0 + t. The first
 *  n_rot (even, <= head_dim) dims of each head rotate, pair i (i < n_rot/2) by angle
 *  pos * theta^(-2i/n_rot). ATS_ROPE_NORM pairs (x[2i], x[2i+1]) (llama2.c, GGUF "llama");
 *  ATS_ROPE_NEOX pairs (x[i], x[i + n_rot/2]) (HF rotate_half; Qwen3). Su et al. 2021. */
enum ats_status ex_cpu_rope(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                            int64_t n_rot, int64_t pos0, float theta, ats_rope_type type);

/** RoPE with per-pair frequency factors (Llama-3.1's rope_freqs.weight, n_rot/2 F32): pair i rotates
 *  by pos * theta^(-2i/n_rot) / freq_factors[i] (llama.cpp's convention). freq_factors NULL = all 1,
 *  which is ex_cpu_rope. */
enum ats_status ex_cpu_rope_ff(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                               int64_t pos0, float theta, ats_rope_type type, const float *freq_factors);

/** Appends K and V of n_tokens tokens at positions pos0.. to one layer's cache. k, v
 *  (n_tokens, kv_dim); k_cache, v_cache (n_ctx, kv_dim) F32 with kv_dim = n_head_kv * head_dim.
 *  ATS_EINVAL when pos0 + n_tokens > n_ctx. */
enum ats_status ex_cpu_kv_store(const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                int64_t kv_dim, int64_t n_ctx, float *k_cache, float *v_cache);

/** Causal attention with grouped-query heads over one layer's KV cache (already holding the
 *  n_tokens new positions, see ex_cpu_kv_store). q (n_tokens, n_head, head_dim); caches
 *  (>= pos0+n_tokens, n_head_kv, head_dim); out (n_tokens, n_head, head_dim). Query token t at
 *  position p = pos0 + t attends to positions 0..p; query head h uses KV head h / (n_head /
 *  n_head_kv). out = softmax(q·k^T * scale) · v with scale usually 1/sqrt(head_dim). Decode
 *  (n_tokens = 1) and prefill chunks use the same call. Vaswani et al. 2017; Ainslie et al. 2023. */
enum ats_status ex_cpu_attention(const float *q, int64_t n_tokens, int64_t pos0, const float *k_cache,
                                 const float *v_cache, int64_t n_head, int64_t n_head_kv,
                                 int64_t head_dim, float scale, float *out);

/* The F16 KV cache (ex_session_opts.kv_type = ATS_Q_F16; llama.cpp's default `-ctk f16 -ctv f16`,
 * and what sched and sim count: ats_arch_kv_bytes_per_token). Same shapes and semantics as the F32
 * ops above, with the cache elements IEEE binary16 (ex_fp16 bits). */

/** ex_cpu_kv_store into F16 caches: each F32 value is rounded to the nearest F16 (ties to even, as
 *  ex_f32_to_fp16 and CUDA's __float2half_rn; |x| >= 65520 becomes ±inf). k, v (n_tokens, kv_dim)
 *  F32; k_cache, v_cache (n_ctx, kv_dim) F16, so a layer's cache is 2 * n_ctx * kv_dim * 2 [bytes].
 *  Only rows [pos0, pos0 + n_tokens) are written. ATS_EINVAL when pos0 < 0, n_tokens < 0,
 *  kv_dim < 0 or pos0 + n_tokens > n_ctx (nothing written). */
enum ats_status ex_cpu_kv_store_f16(const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                    int64_t kv_dim, int64_t n_ctx, ex_fp16 *k_cache, ex_fp16 *v_cache);

/** ex_cpu_attention over F16 caches: q and out F32 as there; K and V widened to F32 as they are
 *  read (exact), every product and sum F32. ATS_EINVAL when n_head is not a multiple of n_head_kv;
 *  ATS_ENOMEM when the per-thread score row cannot be allocated. */
enum ats_status ex_cpu_attention_f16(const float *q, int64_t n_tokens, int64_t pos0, const ex_fp16 *k_cache,
                                     const ex_fp16 *v_cache, int64_t n_head, int64_t n_head_kv,
                                     int64_t head_dim, float scale, float *out);

/** Several one-token matmuls in one parallel region: y[i] = W_i x[i] for i < n_mat, W_i = w[i] of any
 *  type ex_cpu_matmul takes, x[i] (W_i.ne[0]) and y[i] (W_i.ne[1]) borrowed; x pointers may repeat (each
 *  distinct input is quantized once). Bit for bit n_mat calls ex_cpu_matmul(&w[i], x[i], 1, y[i]): the
 *  same row kernels, with the 16-row tiles of all matrices shared out over the threads at once (a MoE
 *  decode step runs 2 regions a layer instead of 3 per expert). ATS_EINVAL for a bad matrix or n_mat < 1,
 *  ATS_ENOMEM. */
enum ats_status ex_cpu_matmul_multi(const ex_tensor *w, const float *const *x, float *const *y, int n_mat);

/** SwiGLU gate: out[i] = silu(gate[i]) * up[i] for n elements; silu(g) = g / (1 + e^-g).
 *  In place allowed (out == gate or out == up). Shazeer 2020. */
enum ats_status ex_cpu_swiglu(const float *gate, const float *up, int64_t n, float *out);

/** y += x elementwise for n elements (residual connections). */
enum ats_status ex_cpu_add(float *y, const float *x, int64_t n);

/** Dense SwiGLU FFN: out = W_down (silu(W_gate x) * (W_up x)). gate, up (n_ff, n_embd); down
 *  (n_embd, n_ff); x, out (n_tokens, n_embd). Used for dense layers and for shared experts. */
enum ats_status ex_cpu_ffn(const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down,
                           const float *x, int64_t n_tokens, float *out);

/** Router: for each token, p = softmax(logits[t]) over n_expert, keep the k largest (ties: lower id
 *  first), write ids (n_tokens, k) in decreasing probability and weights (n_tokens, k) = those p,
 *  renormalised to sum 1 when norm_topk (Qwen3-MoE norm_topk_prob = true). logits come from
 *  ex_cpu_matmul with ffn_gate_inp (n_expert, n_embd). */
enum ats_status ex_cpu_router_topk(const float *logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                                   int norm_topk, int32_t *ids, float *weights);

/** Routed experts: out[t] = Σ_j weights[t,j] * FFN_{ids[t,j]}(x[t]) with the SwiGLU FFN of
 *  ex_cpu_ffn. gate_exps, up_exps (n_expert, n_ff_exp, n_embd); down_exps (n_expert, n_embd,
 *  n_ff_exp); x, out (n_tokens, n_embd); ids, weights (n_tokens, k) from ex_cpu_router_topk.
 *  Tokens are grouped by expert, so a prefill chunk reads each touched expert once. */
enum ats_status ex_cpu_moe(const ex_tensor *gate_exps, const ex_tensor *up_exps,
                           const ex_tensor *down_exps, const float *x, int64_t n_tokens,
                           const int32_t *ids, const float *weights, int64_t k, float *out);

/** Output head: logits = W_out x for the n_tokens rows of x (usually only the last token's);
 *  W_out (n_vocab, n_embd) (token_embd when tied). Same as ex_cpu_matmul; a named op so that a
 *  backend table can place it. */
enum ats_status ex_cpu_output(const ex_tensor *w_out, const float *x, int64_t n_tokens, float *logits);

/** Samples one token from logits (n_vocab). *rng is the state of a splitmix64 generator (seeded
 *  by the caller, advanced by one draw unless greedy). Greedy never touches *rng. */
enum ats_status ex_cpu_sample(const float *logits, int64_t n_vocab, const ex_sample_params *p,
                              uint64_t *rng, int32_t *token);

/* ---- CPU features ------------------------------------------------------------------------- */

enum {
    EX_CPU_AVX2 = 1,       /* AVX2 + FMA */
    EX_CPU_AVX512 = 2,     /* AVX-512 F + BW */
    EX_CPU_AVX512VNNI = 4, /* AVX-512 VNNI (vpdpbusd) */
    EX_CPU_AMX = 8         /* AMX-TILE + AMX-INT8 (tdpbusd), with the OS's permission; used with AVX-512 */
};

/** Fewest tokens for which ex_cpu_matmul runs Q4_K / Q6_K on AMX tiles (where EX_CPU_AMX is set);
 *  fewer go to the AVX-512 VNNI kernels. The AMX path is bit for bit the scalar path; the VNNI one
 *  agrees with it to float rounding. */
#define EX_CPU_AMX_MIN_TOKENS 8

/** SIMD features used by the CPU kernels (bit set of EX_CPU_*), detected once with cpuid; the
 *  environment variable ATS_CPU_FEATURES=<mask> lowers it (e.g. 1 forces the AVX2 path, 0 scalar,
 *  7 AVX-512 VNNI without AMX), for tests. EX_CPU_AMX is set only where cpuid has AMX-TILE and AMX-INT8,
 *  XCR0 enables the tile state and Linux granted it to the process (arch_prctl ARCH_REQ_XCOMP_PERM,
 *  asked once here). Thread-safe. */
unsigned ex_cpu_features(void);

/* ---- environment knobs -------------------------------------------------------------------- */

/** Checks every ATS_* environment variable the executor reads (ATS_ATTN_SHAPE, ATS_CPU_FEATURES,
 *  ATS_PROBE_PRIVATE; the table in exec/kernels/cuda/README.md) that is set and non-empty against the values
 *  its reader accepts; the readers ignore a value they do not know, this refuses it. Returns ATS_OK,
 *  or ATS_EINVAL for the first bad one with one line in msg (len bytes, caller-owned, may be NULL)
 *  naming the variable, its value and what is valid, e.g. "ATS_PROBE_PRIVATE='2': not one of 0, 1
 *  (unset it for the default)"; the value with control characters escaped (\n, \t, \xNN) and cut
 *  after 64 bytes ("..."), so the message is one line. `ats` calls it before any command and exits 2 on a failure.
 *  Reads the environment only; thread-safe as long as no thread changes the environment. */
enum ats_status ex_env_check(char *msg, size_t len);
/** 1 when name is an ATS_* variable that something in ATS reads: a knob ex_env_check checks, or one it
 *  does not (the CLI's ATS_MODELS_DIR, ATS_HW_DIR, ATS_TRACES_DIR, ATS_BENCH_SCHED; the tests'
 *  ATS_SHARED_DIR, ATS_SOURCE_DIR, ATS_BIN, ATS_TEST_SEED, ATS_UPDATE_GOLDEN; the scripts' ATS_LOAD,
 *  ATS_CUDA). One list, in exec/runtime/env_check.c. Thread-safe. */
int ex_env_known(const char *name);
/** The next ATS_* variable of the environment, from index *cursor (start at 0) of environ, whose name no
 *  reader knows (a misspelt knob such as ATS_ATTN_SHAPES is silently ignored by its reader): returns 1
 *  with one line in msg (len bytes, caller-owned, may be NULL) naming it and the closest known name,
 *  e.g. "ATS_ATTN_SHAPES is not a variable ats reads (ignored): did you mean ATS_ATTN_SHAPE?"
 *  (a name further from any known one: "...; the closest known one is ..."), and *cursor past it; 0 when there is none left. `ats` warns with each line
 *  before any command. Reads the environment only; not thread-safe against setenv. */
int ex_env_unknown_next(size_t *cursor, char *msg, size_t len);

#ifdef __cplusplus
}
#endif
#endif
