/*
 * exec/kernels/cuda/common.cuh — private helpers of the CUDA backend (never included by host C code).
 *
 * - EXC_CUDA(call) / EXC_LAUNCHED(): every CUDA runtime call is checked and turned into an
 *   `ex_gpu_status` (with one line on stderr naming the call, file:line and CUDA's message);
 *   after a kernel launch the last error is always read, and in debug builds (no NDEBUG, or
 *   ATS_CUDA_SYNC_DEBUG defined) the stream is synchronized too so a fault shows at its launch.
 * - Byte layouts of the ggml quantized blocks, read bytewise or by aligned 16/32-bit pieces, from
 *   ../shared/models/QUANT_FORMATS.md §2 (checked against exec/include/ex/quant_blocks.h by
 *   static asserts in the static asserts below).
 * - Warp reductions and the int8 activation blocks (`exc_q8x`) the quantized GEMV kernels read.
 */
#ifndef EXC_COMMON_CUH
#define EXC_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ex/gpu.h"
#include "ex/quant_blocks.h"

#if !defined(NDEBUG) || defined(ATS_CUDA_SYNC_DEBUG)
#define EXC_SYNC_AFTER_LAUNCH 1
#else
#define EXC_SYNC_AFTER_LAUNCH 0
#endif

/** Reports a failed CUDA call (one line) and maps it to a status. Defined in gpu.cu. */
extern "C" ex_gpu_status exc_fail(cudaError_t e, const char *what, const char *file, int line);

#define EXC_CUDA(call)                                                              \
    do {                                                                            \
        cudaError_t exc_e_ = (call);                                                \
        if (exc_e_ != cudaSuccess) return exc_fail(exc_e_, #call, __FILE__, __LINE__); \
    } while (0)

/* Synchronizes `s` unless it is being captured into a graph (where a sync is illegal). */
static inline cudaError_t exc_sync_unless_capturing(cudaStream_t s)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &cs);
    if (e != cudaSuccess || cs != cudaStreamCaptureStatusNone) return e;
    return cudaStreamSynchronize(s);
}

/* After every launch: the launch error always; in debug builds (outside graph capture) also the
 * kernel's own fault. */
#define EXC_LAUNCHED(stream)                                                        \
    do {                                                                            \
        EXC_CUDA(cudaGetLastError());                                               \
        if (EXC_SYNC_AFTER_LAUNCH) EXC_CUDA(exc_sync_unless_capturing(stream));     \
    } while (0)

#define EXC_WARP 32

/* ---- block layouts (bytes) ----------------------------------------------------------------- */
#define EXC_Q4_0_BYTES 18  /* d fp16 @0, qs[16] @2 */
#define EXC_Q8_0_BYTES 34  /* d fp16 @0, qs[32] int8 @2 */
#define EXC_Q4_K_BYTES 144 /* d fp16 @0, dmin fp16 @2, scales[12] @4, qs[128] @16 */
#define EXC_Q6_K_BYTES 210 /* ql[128] @0, qh[64] @128, scales[16] int8 @192, d fp16 @208 */
#define EXC_MXFP4_BYTES 17 /* e uint8 @0, qs[16] @1 */
static_assert(sizeof(ex_block_q4_0) == EXC_Q4_0_BYTES && sizeof(ex_block_q8_0) == EXC_Q8_0_BYTES, "block sizes");
static_assert(sizeof(ex_block_q4_K) == EXC_Q4_K_BYTES && sizeof(ex_block_q6_K) == EXC_Q6_K_BYTES, "block sizes");
static_assert(sizeof(ex_block_mxfp4) == EXC_MXFP4_BYTES, "block sizes");
static_assert(offsetof(ex_block_q4_K, scales) == 4 && offsetof(ex_block_q4_K, qs) == 16, "Q4_K offsets");
static_assert(offsetof(ex_block_q6_K, qh) == 128 && offsetof(ex_block_q6_K, scales) == 192 &&
              offsetof(ex_block_q6_K, d) == 208, "Q6_K offsets");

__device__ __forceinline__ float exc_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float exc_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* Q4_K: 6-bit scale and min of sub-block k (0..7) from the 12 packed scale bytes read as three
 * little-endian words s0, s1, s2, without branches (QUANT_FORMATS.md §Q4_K; the formula of
 * ex_q4k_scale_min). Shared by the GEMV kernels. */
__device__ __forceinline__ void exc_q4k_scale_min(uint32_t s0, uint32_t s1, uint32_t s2, int k, int *sc, int *m)
{
    int sh = 8 * (k & 3);
    uint32_t lo = (s0 >> sh) & 0xFFu, hi = (s1 >> sh) & 0xFFu, b8 = (s2 >> sh) & 0xFFu;
    uint32_t sc_a = lo & 63u, m_a = hi & 63u;
    uint32_t sc_b = (b8 & 0x0Fu) | ((lo >> 6) << 4), m_b = (b8 >> 4) | ((hi >> 6) << 4);
    *sc = (int)(k < 4 ? sc_a : sc_b);
    *m = (int)(k < 4 ? m_a : m_b);
}

/* Σ of 4 products of unsigned bytes of `a` with signed bytes of `b`, plus c (PTX dp4a.u32.s32). */
__device__ __forceinline__ int exc_dp4a_us(uint32_t a, int b, int c)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* The high nibbles of a weight word against 4 int8 activations, times 16: the bytes masked in place
 * (0x00..0xF0 as unsigned) instead of shifted down first — one instruction less a word; the caller
 * divides the exact multiple of 16 by 16 once (>> 4) after summing. The tma kernel's loop is bound by instruction
 * issue (Nsight Compute); this took Q4_K's item loop from 12.2 to 11.5 us (experiments/kernels). */
#define EXC_DP4A_HI16(w, x, c) exc_dp4a_us((uint32_t)(w) & 0xF0F0F0F0u, (x), (c))

/* Σ of 32 products: nibbles (low for shift 0, high for 4) of 32 weight bytes with 32 int8 activations.
 * Equal to Σ ((w >> shift) & 15)·x for both shifts (the high sum is formed ×16 and divided exactly). */
__device__ __forceinline__ int exc_dot8_nib(int4 wa, int4 wb, int4 xa, int4 xb, int shift)
{
    int s = 0;
    if (shift == 0) {
        s = __dp4a(wa.x & 0x0F0F0F0F, xa.x, s);
        s = __dp4a(wa.y & 0x0F0F0F0F, xa.y, s);
        s = __dp4a(wa.z & 0x0F0F0F0F, xa.z, s);
        s = __dp4a(wa.w & 0x0F0F0F0F, xa.w, s);
        s = __dp4a(wb.x & 0x0F0F0F0F, xb.x, s);
        s = __dp4a(wb.y & 0x0F0F0F0F, xb.y, s);
        s = __dp4a(wb.z & 0x0F0F0F0F, xb.z, s);
        s = __dp4a(wb.w & 0x0F0F0F0F, xb.w, s);
        return s;
    }
    s = EXC_DP4A_HI16(wa.x, xa.x, s);
    s = EXC_DP4A_HI16(wa.y, xa.y, s);
    s = EXC_DP4A_HI16(wa.z, xa.z, s);
    s = EXC_DP4A_HI16(wa.w, xa.w, s);
    s = EXC_DP4A_HI16(wb.x, xb.x, s);
    s = EXC_DP4A_HI16(wb.y, xb.y, s);
    s = EXC_DP4A_HI16(wb.z, xb.z, s);
    s = EXC_DP4A_HI16(wb.w, xb.w, s);
    return s >> 4; /* an exact multiple of 16 (|s| ≤ 16·32·15·128) */
}

/* One Q4_K task of one row (GEMV rows2 and tma): super-block header h (d, dmin, 12 scale bytes), its qs bytes [16 + 32c,
 * 48 + 32c) as qa, qb, against x's two blocks (x0 = sub-block 2c, x1 = 2c + 1; sc = {d0, s0, d1, s1}). */
__device__ __forceinline__ float exc_q4k_task(int4 h, int4 qa, int4 qb, int4 x0a, int4 x0b, int4 x1a, int4 x1b,
                                                   float4 sc, int c)
{
    int s_lo = exc_dot8_nib(qa, qb, x0a, x0b, 0);
    int s_hi = exc_dot8_nib(qa, qb, x1a, x1b, 4);
    int sc0, m0, sc1, m1;
    exc_q4k_scale_min((uint32_t)h.y, (uint32_t)h.z, (uint32_t)h.w, 2 * c, &sc0, &m0);
    exc_q4k_scale_min((uint32_t)h.y, (uint32_t)h.z, (uint32_t)h.w, 2 * c + 1, &sc1, &m1);
    float d = exc_h2f((uint16_t)((uint32_t)h.x & 0xFFFFu));
    float dmin = exc_h2f((uint16_t)((uint32_t)h.x >> 16));
    return d * (sc.x * (float)(sc0 * s_lo) + sc.z * (float)(sc1 * s_hi)) - dmin * ((float)m0 * sc.y + (float)m1 * sc.w);
}

/* One Q4_0 block (18 bytes at the 2-byte aligned address `blk`, shared or global: d fp16, qs[16])
 * against the int8 activation block xl (values 0..15), xh (16..31) with ds = (dx, sx = dx·Σxq):
 * d·(dx·Σ q·xq − 8·sx), q the nibbles. Read as five aligned words from blk & ~3 (2 bytes before or
 * past the block: the caller's buffer has them) and shifted. Shared by the GEMV kernels ring, rows and tma. */
__device__ __forceinline__ float exc_q4_0_dot(const uint8_t *blk, int4 xl, int4 xh, float2 ds)
{
    const int off = (int)((uintptr_t)blk & 2);
    const uint32_t *w = (const uint32_t *)(blk - off);
    uint32_t ww[5];
#pragma unroll
    for (int k = 0; k < 5; k++) ww[k] = w[k];
    const int xls[4] = {xl.x, xl.y, xl.z, xl.w}, xhs[4] = {xh.x, xh.y, xh.z, xh.w};
    int sumi = 0, sumh = 0; /* low nibbles; high nibbles ×16 (EXC_DP4A_HI16) */
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int v = (int)(off ? ww[k + 1] : __funnelshift_r(ww[k], ww[k + 1], 16));
        sumi = __dp4a(v & 0x0F0F0F0F, xls[k], sumi);
        sumh = EXC_DP4A_HI16(v, xhs[k], sumh);
    }
    sumi += sumh >> 4; /* exact: a multiple of 16 */
    float d = exc_h2f((uint16_t)(off ? ww[0] >> 16 : ww[0] & 0xFFFFu));
    return d * (ds.x * (float)sumi - 8.0f * ds.y);
}

/* Little-endian 32-bit word from a 2-byte aligned address (global or shared). */
__device__ __forceinline__ int exc_ld_u16x2(const uint8_t *p)
{
    const uint16_t *q = (const uint16_t *)p;
    return (int)((uint32_t)q[0] | ((uint32_t)q[1] << 16));
}
/* Little-endian 32-bit word from any address (global or shared). */
__device__ __forceinline__ int exc_ld_u8x4(const uint8_t *p)
{
    return (int)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

__device__ __forceinline__ float exc_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float exc_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* One block of 32 activations quantized by a whole warp, lane l holding v = x[32b + l]: returns the
 * lane's int8 q = round(v/d) with d = amax/127, and *d, *s = d·Σq for every lane. fmaxf drops NaN, so
 * non-finite inputs are caught by a vote: d becomes NaN and the NaN reaches every output that reads
 * this block (NaN never turns into a number). The quantize kernel's (quantize_x.cu); GEMV tma quantizes
 * four values a lane with the same vote and scale (gemv_tma.cu, tma_quantize_x). */
__device__ __forceinline__ int exc_q8_block(float v, float *d, float *s)
{
    int bad = __any_sync(0xffffffffu, !(fabsf(v) <= 3.4e38f));
    float amax = exc_warp_max(bad ? 0.0f : fabsf(v));
    float db = amax / 127.0f;
    int q = amax > 0.0f && !bad ? __float2int_rn(v / db) : 0;
    if (bad) db = __int_as_float(0x7fc00000);
    int sum = __reduce_add_sync(0xffffffffu, q);
    *d = db;
    *s = db * (float)sum;
    return q;
}

/* Block-wide sum for blockDim.x a multiple of 32 (≤ 1024); `sh` holds 32 floats. All threads get it. */
__device__ __forceinline__ float exc_block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = exc_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0f;
    return exc_warp_sum(v);
}
__device__ __forceinline__ float exc_block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = exc_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return exc_warp_max(v);
}

/*
 * Activations quantized to int8 in blocks of 32 (like ggml's Q8_1): for block b of a vector,
 * qs[32b..32b+31] int8, d[b] = amax/127 [scale], s[b] = d[b] * sum(qs) (for the offset terms of
 * Q4_0/Q4_K). `qs` is 16-byte aligned. Built by exc_quantize_q8x() (quantize_x.cu).
 */
typedef struct exc_q8x {
    int8_t *qs;
    float *d;
    float *s;
} exc_q8x;

/** Quantizes `n_rows` rows of `n` floats (n % 32 == 0, rows contiguous) into `q` (row r's blocks
 *  follow row r-1's). Launch on `stream`. */
ex_gpu_status exc_quantize_q8x(const float *x, int64_t n, int64_t n_rows, exc_q8x q, cudaStream_t stream);
/** The same into the handle's EXC_WS_Q8X workspace (grown as needed): qs at the start (rows·n
 *  bytes rounded up to 256), then d, then s (n/32 floats per row each); *out points into it until
 *  the next call on `g`. */
ex_gpu_status exc_quantize_q8x_ws(ex_gpu *g, const float *x, int64_t n, int64_t n_rows, cudaStream_t stream,
                                  exc_q8x *out);

/**
 * Interleaved int8 activation blocks for the decode GEMV rows2 (gemv_rows.cu), laid out in the order a warp's
 * lanes read them, so that each 16-byte load of a warp touches 512 contiguous bytes (4 L1 wavefronts
 * instead of 16 for lanes 64 bytes apart). A "task" is `chunks` 16-byte chunks of x (chunks = 4: 64
 * values, one Q4_K sub-block pair; chunks = 2: 32 values, one Q4_0 block); lane l of a warp handles
 * tasks T ≡ l (mod 32). Chunk k of task T is the 16-byte unit ((T/32)·chunks + k)·32 + T%32 of `qs`.
 * ds holds (d, s) per block of 32 values in plain order: d = amax/127, s = d·Σq (as exc_q8x), so task T
 * of 64 values reads {d0, s0, d1, s1} as one float4 at index T.
 */
typedef struct exc_q8xi {
    int8_t *qs;
    float *ds;
} exc_q8xi;

/** Quantizes one row of `n` floats (n % (16·chunks) == 0, chunks 2 or 4) into the handle's EXC_WS_Q8X
 *  workspace in the interleaved layout of exc_q8xi; *out points into it until the next call on `g`. */
ex_gpu_status exc_quantize_q8xi_ws(ex_gpu *g, const float *x, int64_t n, int chunks, cudaStream_t stream,
                                   exc_q8xi *out);

/** Batched decode GEMV (gemv.cu): for z = 0..n_z-1 (n_z ≤ 65535), y[z] (rows) = W_m · x[r] with
 *  matrix m = ids ? ids[z] : z·mat_z at W + m·mat_bytes and activation row r = x_div ? z / x_div : 0
 *  (x rows of `cols` floats). ids: device (n_z) or NULL. */
ex_gpu_status exc_gemv_batched(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, int64_t mat_bytes,
                               const int32_t *ids, int mat_z, int x_div, int n_z, const float *x, float *y,
                               cudaStream_t s);

/* Workspace slots of the handle (each op family its own, so nested ops never share one). */
enum { EXC_WS_Q8X = 0, EXC_WS_WDEQ, EXC_WS_X16, EXC_WS_FFN, EXC_WS_MOE, EXC_WS_MISC, EXC_N_WORKSPACES };

/** Device workspace of the handle: grows to `bytes` (never shrinks); the returned pointer is
 *  valid until the next call. Defined in gpu.cu. */
ex_gpu_status exc_workspace(ex_gpu *g, int slot, size_t bytes, void **out);
/** Internal accessors of the handle. */
struct cublasContext;
struct cublasContext *exc_cublas(ex_gpu *g);
int exc_sm_count(const ex_gpu *g);
int exc_cc_major(const ex_gpu *g);

#endif
