/*
 * ex/gpu.h — the CUDA backend of the executor: a device handle, memory helpers, and every op of
 * ex/ops.h on the GPU (`ex_cuda_<op>`, same arguments as `ex_cpu_<op>` plus a stream).
 *
 * Plain C; never includes CUDA headers. Streams and events are CUDA's own handle types under other
 * names (`ex_stream` is `cudaStream_t`, `ex_event` is `cudaEvent_t`), so .cu code passes them on
 * unchanged. Without CUDA at build time (no ATS_HAVE_CUDA) only the declarations exist; callers
 * guard with `#ifdef ATS_HAVE_CUDA`.
 *
 * Lifecycle: ex_gpu_open(device, &g) selects the device and creates its cuBLAS handle, a compute
 * stream and transfer streams (one per copy engine the executor uses) and lazily grown workspaces;
 * ex_gpu_close(g) frees all of it. No globals: several handles may coexist (one per device or per
 * test). A handle is not thread-safe: one host thread issues work on it at a time.
 * Usage: open; allocate weights with ex_gpu_malloc and copy them with ex_gpu_memcpy_h2d on a
 * transfer stream; record an event there and make the compute stream wait on it; run ex_cuda_*
 * ops on the compute stream; read results back with ex_gpu_memcpy_d2h and ex_gpu_stream_sync.
 * Host memory the GPU reads directly (zero-copy) comes from ex_gpu_host_alloc (pinned and mapped).
 *
 * Errors: every CUDA / cuBLAS call is checked; a failure prints one line to stderr naming the call,
 * file:line and CUDA's message, and comes back as an ex_gpu_status. Nothing here calls exit().
 */
#ifndef EX_GPU_H
#define EX_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "ex/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Status of the CUDA backend (0 = OK). */
typedef enum ex_gpu_status {
    EX_GPU_OK = 0,
    EX_GPU_ENODEV,  /**< no CUDA device (or no driver), or the device index is out of range */
    EX_GPU_ENOMEM,  /**< device or pinned host allocation failed */
    EX_GPU_EINVAL,  /**< bad argument (shape not a multiple of the block size, unknown type, NULL) */
    EX_GPU_ECUDA,   /**< a CUDA runtime call or a kernel failed (message printed) */
    EX_GPU_ECUBLAS  /**< a cuBLAS call failed (message printed) */
} ex_gpu_status;

/** Static name of a status ("no CUDA device", …). Never NULL. Thread-safe. */
const char *ex_gpu_status_str(ex_gpu_status st);

typedef struct ex_gpu ex_gpu;          /**< opaque device handle */
typedef struct CUstream_st *ex_stream; /**< = cudaStream_t; NULL is the legacy default stream */
typedef struct CUevent_st *ex_event;   /**< = cudaEvent_t */
typedef struct CUgraphExec_st *ex_graph; /**< = cudaGraphExec_t: an instantiated CUDA graph */

/** What ex_gpu_info reports about the device of a handle. */
typedef struct ex_gpu_props {
    char name[256];
    int device;              /**< CUDA device index */
    int cc_major, cc_minor;  /**< compute capability */
    int sm_count;            /**< multiprocessors */
    int async_engines;       /**< copy engines (cudaDevAttrAsyncEngineCount) */
    uint64_t mem_bytes;      /**< global memory [bytes] */
    double mem_bw_peak_Bps;  /**< theoretical HBM/GDDR bandwidth from the memory clock and bus [B/s] */
} ex_gpu_props;

/** Number of CUDA devices; 0 when there is none or no driver (never fails). */
int ex_gpu_device_count(void);

/**
 * Opens device `device` (0-based): selects it on the calling thread, creates the cuBLAS handle,
 * EX_GPU_N_STREAMS non-blocking streams and no workspace yet, and sets the decode GEMV kernels up for the
 * device (their shared-memory limits; which of them it can run).
 * Returns EX_GPU_ENODEV (with no message) when there is no such device, so tests can exit 77.
 * *out: new handle, freed with ex_gpu_close(). Not thread-safe with respect to the same device.
 */
ex_gpu_status ex_gpu_open(int device, ex_gpu **out);
/** Frees the handle, its streams, workspaces and cuBLAS handle (after synchronizing the device).
 *  NULL is a no-op. Memory from ex_gpu_malloc/ex_gpu_host_alloc is the caller's to free first. */
void ex_gpu_close(ex_gpu *g);
/** Device properties of the handle (borrowed; valid while the handle lives). */
const ex_gpu_props *ex_gpu_info(const ex_gpu *g);

/** Streams of a handle: compute (GPU ops and SM copy kernels) and one per copy engine used for
 *  weight transfers (DESIGN.md "What the executor does"). */
enum { EX_GPU_STREAM_COMPUTE = 0, EX_GPU_STREAM_TRANSFER0 = 1, EX_GPU_STREAM_TRANSFER1 = 2, EX_GPU_N_STREAMS = 3 };
/** The handle's stream `which` (EX_GPU_STREAM_*); borrowed. */
ex_stream ex_gpu_stream(ex_gpu *g, int which);
/** Blocks the host until all work on `s` has finished. */
ex_gpu_status ex_gpu_stream_sync(ex_stream s);

/* ---- memory ------------------------------------------------------------------------------- */
/** Device allocation of `bytes` [bytes] (256-byte aligned). *out: new, free with ex_gpu_free. */
ex_gpu_status ex_gpu_malloc(ex_gpu *g, size_t bytes, void **out);
void ex_gpu_free(ex_gpu *g, void *dev);
/** Pinned host memory, mapped into the device's address space (zero-copy). *host: new host
 *  pointer (free with ex_gpu_host_free); *dev: the device alias of the same bytes (may be NULL if
 *  the caller does not need it). On UVA systems the two are equal. */
ex_gpu_status ex_gpu_host_alloc(ex_gpu *g, size_t bytes, void **host, void **dev);
void ex_gpu_host_free(ex_gpu *g, void *host);
/** Registers existing host bytes [host, host + bytes) as pinned, mapped memory (cudaHostRegister),
 *  so copies from them run on a copy engine asynchronously. EX_GPU_ENOMEM when refused (e.g. the
 *  locked-memory limit, ulimit -l): nothing printed, the bytes stay pageable. Unregister before
 *  freeing them. */
ex_gpu_status ex_gpu_host_register(void *host, size_t bytes);
void ex_gpu_host_unregister(void *host);
/** Asynchronous copies of `bytes` [bytes] on stream `s` (host memory must be pinned for the copy to
 *  be asynchronous and to use a copy engine). */
ex_gpu_status ex_gpu_memcpy_h2d(void *dev_dst, const void *host_src, size_t bytes, ex_stream s);
ex_gpu_status ex_gpu_memcpy_d2h(void *host_dst, const void *dev_src, size_t bytes, ex_stream s);
ex_gpu_status ex_gpu_memcpy_d2d(void *dev_dst, const void *dev_src, size_t bytes, ex_stream s);
ex_gpu_status ex_gpu_memset(void *dev, int byte, size_t bytes, ex_stream s);

/* ---- events ------------------------------------------------------------------------------- */
/** New event (timing enabled). *out freed with ex_gpu_event_free. */
ex_gpu_status ex_gpu_event_new(ex_event *out);
void ex_gpu_event_free(ex_event e);
ex_gpu_status ex_gpu_event_record(ex_event e, ex_stream s);
/** Makes stream `s` wait (on the device, not the host) until `e` has completed. */
ex_gpu_status ex_gpu_stream_wait(ex_stream s, ex_event e);
/** Blocks the host until `e` has completed. */
ex_gpu_status ex_gpu_event_sync(ex_event e);
/** Time between two completed events [ns] (CUDA's resolution is about 0.5 µs). */
ex_gpu_status ex_gpu_event_elapsed_ns(ex_event start, ex_event end, int64_t *out_ns);

/* ---- CUDA graphs --------------------------------------------------------------------------- */
/** Starts capturing the work queued on `s` (relaxed mode: allocations stay allowed) into a graph
 *  instead of running it. Every call until ex_gpu_graph_end is recorded, not executed. */
ex_gpu_status ex_gpu_graph_begin(ex_stream s);
/** Ends the capture started on `s` and instantiates it (*out freed with ex_gpu_graph_free). A failed
 *  capture (a launch error inside it) returns its error and *out = NULL. */
ex_gpu_status ex_gpu_graph_end(ex_stream s, ex_graph *out);
/** Queues one replay of `g` on `s` (one launch for the whole captured sequence). */
ex_gpu_status ex_gpu_graph_launch(ex_graph g, ex_stream s);
void ex_gpu_graph_free(ex_graph g);

/* ---- low-level kernels (also used by ats bench kernels) ---------------------------------------- */

/**
 * y = W · x for one activation vector (decode GEMV). W: (rows, cols) row-major of ggml type `type`
 * (an ats_qtype id: F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, Q6_K 14, BF16 30, MXFP4 39), device
 * memory, each row cols/block_elems consecutive blocks; x: (cols) F32, device; y: (rows) F32,
 * device. cols must be a multiple of the type's block size (256 for K-quants, 32 otherwise).
 * Quantized types: x is first quantized to int8 in blocks of 32 (scale amax/127, like ggml's
 * Q8_1) into a workspace of `g`, then dot products run with __dp4a; F16/BF16/F32 use F32 math.
 * Error vs exact F32: |Δy| ≲ 2^-8 · Σ|W_ij x_j| (int8 activations). Stream-ordered; not
 * thread-safe on the same handle (shares the workspace). Returns EX_GPU_EINVAL for a bad shape.
 */
ex_gpu_status ex_cuda_gemv(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x,
                           float *y, ex_stream s);

/** The kernel ex_cuda_gemv runs on g's device for this type (ats_qtype id) and shape (rows, cols): "tma",
 *  "rows2", "rows1", "ring" or "warp" (the table of exec/kernels/cuda/gemv.cu, README.md there); "none" for
 *  a shape it refuses. For reports and tests. */
const char *ex_cuda_gemv_kernel(ex_gpu *g, int type, int64_t rows, int64_t cols);

/**
 * Dequantizes n elements (n % block_elems == 0) of type `type` at `src` (device) into `dst`
 * (device) as F16 (dst_type 1), BF16 (30) or F32 (0). Exact per QUANT_FORMATS.md, then rounded to
 * the destination type.
 */
ex_gpu_status ex_cuda_dequantize(int type, const void *src, int64_t n, int dst_type, void *dst, ex_stream s);

/**
 * Y = X · Wᵀ for a chunk of n_tok activation rows (prefill): X (n_tok, cols) F32, W (rows, cols)
 * of type `type`, Y (n_tok, rows) F32, all device memory. W is dequantized into a workspace as F16
 * (BF16 when W is BF16; F32 weights stay F32) and multiplied by cublasGemmEx with F32 accumulation
 * (CUBLAS_COMPUTE_32F); X is converted to the same 16-bit type. n_tok == 1 uses ex_cuda_gemv.
 */
ex_gpu_status ex_cuda_gemm(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *X,
                           int64_t n_tok, float *Y, ex_stream s);

/**
 * The same GEMM on operands that are already 16-bit (F16 when bf16 == 0, BF16 otherwise):
 * Y (n, m) F32 = X (n, k) · W (m, k)ᵀ. Used by the bench as cuBLAS's own ceiling.
 */
ex_gpu_status ex_cuda_gemm_16(ex_gpu *g, int bf16, const void *W, int64_t m, int64_t k, const void *X, int64_t n,
                              float *Y, ex_stream s);

/**
 * SM copy kernel: copies `bytes` [bytes] from `src` to `dst`, either of which may be the device
 * alias of mapped pinned host memory (zero-copy), on stream `s`. Used for activations at a split
 * boundary (paper §4.2) so the copy engines stay free for weights. Both pointers 16-byte aligned
 * for the fast path; any alignment works.
 */
ex_gpu_status ex_cuda_copy(void *dst, const void *src, size_t bytes, ex_stream s);

/** Reads `bytes` [bytes] of device memory at `buf` (16-byte aligned) once, for measuring the read
 *  bandwidth that bounds the GEMV kernels (`ats bench kernels`). */
ex_gpu_status ex_cuda_read_probe(ex_gpu *g, const void *buf, size_t bytes, ex_stream s);

/* ---- the ops of ex/ops.h on the GPU ------------------------------------------------------------
 * Same arguments and semantics as ex_cpu_<op> (see ex/ops.h for shapes, formulas and sources), plus
 * the stream `s` they are queued on; ops that need scratch memory or cuBLAS also take the handle
 * `g` first (its workspaces are reused, so calls on one handle must come from one host thread).
 * Every pointer is device memory (ex_tensor.data too) unless stated; nothing is synchronized unless
 * stated. Returns EX_GPU_EINVAL (nothing queued) where the CPU op returns ATS_EINVAL for its
 * arguments; checks that need device data (token ids in range) cannot fail the call: see each op.
 * Agreement with the CPU op: tests/exec/test_cuda_ops.c (per-type relative bounds).
 */
/** ex_cpu_embedding. An id outside [0, n_vocab) makes its row NaN (check ids on the host first). */
ex_gpu_status ex_cuda_embedding(const ex_tensor *tok_embd, const int32_t *tokens, int64_t n_tokens, float *x,
                                ex_stream s);
/** ex_cpu_rmsnorm (F32 sum of squares; in place allowed). */
ex_gpu_status ex_cuda_rmsnorm(const float *x, const float *w, int64_t n_rows, int64_t n, float eps, float *y,
                              ex_stream s);
/** ex_cpu_matmul: n_tokens ≤ 8 → batched quantized GEMV (int8 activations, as ex_cuda_gemv);
 *  more → dequantize + cublasGemmEx (ex_cuda_gemm). */
ex_gpu_status ex_cuda_matmul(ex_gpu *g, const ex_tensor *w, const float *x, int64_t n_tokens, float *y, ex_stream s);
/** ex_cpu_qk_norm (in place). */
ex_gpu_status ex_cuda_qk_norm(float *x, const float *w, int64_t n_tokens, int64_t n_head, int64_t head_dim, float eps,
                              ex_stream s);
/** ex_cpu_rope (in place; F32 angles by the same formula as the CPU op). */
ex_gpu_status ex_cuda_rope(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot, int64_t pos0,
                           float theta, ats_rope_type type, ex_stream s);
/** ex_cpu_kv_store. */
ex_gpu_status ex_cuda_kv_store(const float *k, const float *v, int64_t n_tokens, int64_t pos0, int64_t kv_dim,
                               int64_t n_ctx, float *k_cache, float *v_cache, ex_stream s);
/** ex_cpu_attention; head_dim ≤ 256, n_tokens ≤ 65535. More than 8 tokens with head_dim 64/128/256: flash
 *  attention on the tensor cores (Q, K, V, P rounded to F16; softmax and sums in F32). Otherwise F32 math;
 *  there the environment's ATS_ATTN_SHAPE=NW,S (A/B timing, tests) overrides the warps per block
 *  (4/8/16/32) and split (1..8, a cluster on sm_90+) chosen from the launch shape; values it does not
 *  have → EX_GPU_EINVAL. Also for ex_cuda_attention_f16. */
ex_gpu_status ex_cuda_attention(const float *q, int64_t n_tokens, int64_t pos0, const float *k_cache,
                                const float *v_cache, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                                float *out, ex_stream s);
/** ex_cpu_kv_store_f16: F32 k, v → rows [pos0, pos0 + n_tokens) of F16 caches (n_ctx, kv_dim),
 *  __float2half_rn (round to nearest even: the CPU op's bits, NaN payloads aside). n_tokens ≥ 1. */
ex_gpu_status ex_cuda_kv_store_f16(const float *k, const float *v, int64_t n_tokens, int64_t pos0, int64_t kv_dim,
                                   int64_t n_ctx, ex_fp16 *k_cache, ex_fp16 *v_cache, ex_stream s);
/** ex_cpu_attention_f16 (K/V widened to F32 on load; dot products, softmax and the V sum in F32);
 *  head_dim ≤ 256, n_tokens ≤ 65535. */
ex_gpu_status ex_cuda_attention_f16(const float *q, int64_t n_tokens, int64_t pos0, const ex_fp16 *k_cache,
                                    const ex_fp16 *v_cache, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                                    float scale, float *out, ex_stream s);
/** ex_cpu_swiglu (in place allowed). */
ex_gpu_status ex_cuda_swiglu(const float *gate, const float *up, int64_t n, float *out, ex_stream s);
/** ex_cpu_add. */
ex_gpu_status ex_cuda_add(float *y, const float *x, int64_t n, ex_stream s);
/** ex_cpu_ffn (temporaries in the handle's workspace). */
ex_gpu_status ex_cuda_ffn(ex_gpu *g, const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down, const float *x,
                          int64_t n_tokens, float *out, ex_stream s);
/** ex_cpu_router_topk; n_expert ≤ 1024. */
ex_gpu_status ex_cuda_router_topk(const float *logits, int64_t n_tokens, int64_t n_expert, int64_t k, int norm_topk,
                                  int32_t *ids, float *weights, ex_stream s);
/** ex_cpu_moe with ids and weights in device memory (as ex_cuda_router_topk leaves them); n_tokens·k ≤
 *  65535, n_expert ≤ 1024 for more than 8 tokens. Up to 8 tokens every (token, slot) pair reads its
 *  expert's matrices (batched GEMV, int8 activations); more: pairs grouped by expert on the device and
 *  multiplied per expert in F16 on the tensor cores (F32 accumulation; error as the prefill GEMM's).
 *  Ids are checked on the device: an id outside [0, n_expert) reads expert 0 and makes that
 *  token's output row NaN (never an out-of-range read). */
ex_gpu_status ex_cuda_moe(ex_gpu *g, const ex_tensor *gate_exps, const ex_tensor *up_exps, const ex_tensor *down_exps,
                          const float *x, int64_t n_tokens, const int32_t *ids, const float *weights, int64_t k,
                          float *out, ex_stream s);
/** ex_cpu_output (= ex_cuda_matmul). */
ex_gpu_status ex_cuda_output(ex_gpu *g, const ex_tensor *w_out, const float *x, int64_t n_tokens, float *logits,
                             ex_stream s);
/** ex_cpu_sample. logits: device; p, rng, token: HOST memory. Greedy is an argmax on the device;
 *  other settings copy the logits to the host and call ex_cpu_sample (same draw as the CPU).
 *  Synchronizes `s` before returning. */
ex_gpu_status ex_cuda_sample(ex_gpu *g, const float *logits, int64_t n_vocab, const ex_sample_params *p, uint64_t *rng,
                             int32_t *token, ex_stream s);

/* ---- backend table -------------------------------------------------------------------------- */
struct ex_backend; /* ex/backend.h */

/**
 * New CUDA backend table (ex_backend of ex/backend.h, name "cuda") for sessions whose buffers are in
 * host memory: weights are mirrored on the device at first use (keyed by host address);
 * activations and KV rows stay on the device (cached by host address range) and come back only
 * when the session calls the table's flush (backend switch, end of a forward; exec/README.md
 * "Residency"); no op synchronizes the compute stream of `g` (borrowed; must outlive the table).
 * Use as ex_session_opts.backend_a/backend_b. *out: new, free with ex_backend_cuda_free after the
 * sessions that use it and before freeing the models whose weights it mirrored (or call
 * ex_backend_cuda_reset in between).
 */
ex_gpu_status ex_backend_cuda_new(ex_gpu *g, struct ex_backend **out);
/** Drops every device copy (weights, KV caches, activations), copying dirty KV rows back first. */
void ex_backend_cuda_reset(struct ex_backend *b);
void ex_backend_cuda_free(struct ex_backend *b);
/** Device bytes held by the table: weight mirrors, KV caches and activation buffers [bytes]. */
uint64_t ex_backend_cuda_mirror_bytes(const struct ex_backend *b);

#ifdef __cplusplus
}
#endif
#endif
