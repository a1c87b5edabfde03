/*
 * Decode GEMV, third kernel (v3) for Q4_0 and Q4_K with one activation row: y (rows) = W · x.
 *
 * Why a third one: Nsight Compute on the H200 (experiments/bench/bench-kernels.md) showed v2 (one
 * persistent kernel, cp.async ring, x quantized per block) at 41% of DRAM bandwidth with 22%
 * achieved occupancy. A first v3 (one warp per row, direct 16-byte loads) and a persistent,
 * register-double-buffered variant streamed no faster (~3.1 TB/s): per 1.1 KB of Q4_K weights a warp
 * issued ~100 L1 wavefronts, two thirds of them for the activations (each lane reads 80 bytes of x
 * per 36 bytes of weights, at a 64-byte lane stride), i.e. ~11.5 bytes of weights per SM cycle =
 * 3.0 TB/s on 132 SMs at 1.98 GHz. So v3 reuses x: a warp computes R rows at once, every lane loads
 * its slice of x once and uses it for the R rows' weights (R = 4: x traffic per weight byte / 4).
 * Loads of the R rows' weights are issued together (R·32 lanes·48 bytes in flight per warp), x loads
 * next to them, then the math. x is quantized to int8 blocks of 32 by quantize_x.cu first (exc_q8x,
 * as v1); the GEMV is a programmatic dependent of that kernel and issues its first weight loads
 * before griddepcontrol.wait. The quantize kernel itself is a plain launch, so L1 is clean of older
 * activations when the GEMV reads x through the non-coherent path (__ldg) after its wait. Chaining
 * quantize and GEMV by programmatic launches too (GEMV i+1 overlapping GEMV i) was +4-5 points on the
 * H200 but returned wrong results now and then (stale L1 lines of x, even with two alternating
 * workspaces), and reading x through L2 instead cost 15-20 points: bench-kernels.md, fourth session.
 *
 * Q4_K (144-byte super-blocks, 16-byte aligned): a task is one pair of sub-blocks, (super-block sb,
 * c = 0..3): qs bytes [16 + 32c, 48 + 32c) hold sub-block 2c in the low nibbles and 2c+1 in the high
 * nibbles, all 32 elements of each (ggml's dequantize_row_q4_K; QUANT_FORMATS.md §Q4_K). With
 * w = d·sc·q − dmin·m and x ≈ dx·xq:  Σ w·x = d·sc·dx·Σ q·xq − dmin·m·(dx·Σ xq), and dx·Σ xq is the
 * block sum `s` of exc_q8x, so a task is 16 __dp4a and two scale decodes per row.
 *
 * Q4_0 (18-byte blocks, 2-byte aligned): rows of a multiple of 8 blocks start 16-byte aligned, so a
 * warp loads 32 blocks of each of its R rows (576 bytes = 36 16-byte chunks a row) with coalesced
 * 16-byte loads, stores them to its own shared-memory slot and each lane reads its block of each row
 * back as aligned 32-bit words (v2's shift trick); lane l's activation block is the same for all R.
 *
 * Activations interleaved (default; exc_q8xi in common.cuh): quantize_x.cu writes x in the order the
 * lanes read it, so a warp's 16-byte x load covers 512 contiguous bytes (4 L1 wavefronts instead of
 * 16 at a 64-byte lane stride). Predicted from the wavefront count above: Q4_K ffn_up 56% -> 62-68%;
 * measured on the H200 (third session): Q4_K 56.4% -> 58.2%, Q4_0 63.2% -> 66.6%, Q4_0 gate+up
 * 73.6% -> 76.9% — x wavefronts were not the main limit any more.
 *
 * ATS_GEMV_KERNEL=v2 or v1 selects the older kernels (bench and tests compare them);
 * ATS_GEMV_V3_R = 1 | 2 | 4 | 8 sets R, ATS_GEMV_V3_LOAD = ldg | na the weight load, ATS_GEMV_V3_X =
 * lin | ilv the activation layout, ATS_GEMV_V3_U = 1 | 2 the Q4_K tasks per lane per trip,
 * ATS_GEMV_V3_Q6K = 0 | 1 the Q6_K kernel staged like Q4_0 off | for every shape (default: rows > V3_Q6K_MIN_ROWS;
 * H200, fifth session: ffn_up 35.6% -> 42.2% of the read probe, ffn_down 29.1% -> 39.2%, attn_kv (1024 rows)
 * 13.1% -> 10.7%, so v2 keeps the small shapes; Qwen3-14B Q4_K_M decode 124.3 -> 133.0 tok/s), ATS_GEMV_V3_Q4K = smem the Q4_K kernel staged through shared memory (with ilv; H200: Q4_K ffn_up +1.4
 * points, ffn_down -0.9; bench-kernels.md, fourth session) (bench experiments; defaults V3_R, V3_NA, V3_ILV,
 * V3_U, direct Q4_K loads).
 */
#include "common.cuh"

#include <mutex>
#include <stdlib.h>
#include <string.h>

#include "ats/quant.h"

#define V3_WARPS 4 /* warps per block */
#define V3_R 2     /* rows per warp (H200: R = 2 fastest of 1, 2, 4, 8; bench-kernels.md) */
#define V3_NA 1    /* weight loads with L1::no_allocate (ATS_GEMV_V3_LOAD=ldg: plain __ldg); H200: Q4_0 ffn_up 57.5% -> 62.3% */
#define V3_ILV 1   /* activations interleaved (exc_q8xi; ATS_GEMV_V3_X=lin: plain exc_q8x); H200: Q4_0 ffn_up 63.2% -> 66.6%, Q4_K 56.4% -> 58.2% */
#define V3_Q6K_MIN_ROWS 2048 /* Q6_K: v3 above this many rows, v2 at or below (H200: 1024 rows v2 7.2 us, v3 8.9 us) */
#define V3_WIDE_RATIO 2 /* Q4_0 with cols >= 2 x rows: lin, R = 1 (exc_gemv_v3) */
#define V3_U 1     /* Q4_K tasks per lane per trip (ilv only; ATS_GEMV_V3_U=2: H200 Q4_K ffn_up 58.2% -> 54.2%) */

/* A 16-byte weight load: NA = 0 __ldg (read-only path, allocates in L1); NA = 1 also read-only but
 * with L1::no_allocate, so the streamed weights (read once) do not evict the activations, which
 * every warp re-reads from L1. */
template <int NA>
static __device__ __forceinline__ int4 v3_ldw(const int4 *p)
{
    if (NA) {
        int4 v;
        asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
        return v;
    }
    return __ldg(p);
}

template <int NA>
static __device__ __forceinline__ uint4 v3_ldw4(const uint4 *p)
{
    int4 v = v3_ldw<NA>((const int4 *)p);
    return make_uint4((unsigned)v.x, (unsigned)v.y, (unsigned)v.z, (unsigned)v.w);
}

static __device__ __forceinline__ void v3_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- Q4_K ---------------------------------------------------------------------------------- */


/* x of task t (sub-blocks 2t and 2t+1 of the row: blocks 2t, 2t+1 of x): 64 int8 in four 16-byte
 * chunks and sc = {d0, s0, d1, s1}. Plain layout (exc_q8x): the task's bytes at 64t; lanes 64 bytes apart. */
static __device__ __forceinline__ void v3_x_q4k(const exc_q8x &x, int t, int4 &a0, int4 &b0, int4 &a1, int4 &b1,
                                                float4 &sc)
{
    const int4 *xq = (const int4 *)(x.qs + (int64_t)t * 64);
    a0 = __ldg(xq);
    b0 = __ldg(xq + 1);
    a1 = __ldg(xq + 2);
    b1 = __ldg(xq + 3);
    const float2 d = __ldg((const float2 *)(x.d + 2 * t)), s = __ldg((const float2 *)(x.s + 2 * t));
    sc = make_float4(d.x, s.x, d.y, s.y);
}

/* Interleaved layout (exc_q8xi, chunks = 4): lanes' chunks contiguous. */
static __device__ __forceinline__ void v3_x_q4k(const exc_q8xi &x, int t, int4 &a0, int4 &b0, int4 &a1, int4 &b1,
                                                float4 &sc)
{
    const int4 *xp = (const int4 *)x.qs + (int64_t)(t >> 5) * 128 + (t & 31);
    a0 = __ldg(xp);
    b0 = __ldg(xp + 32);
    a1 = __ldg(xp + 64);
    b1 = __ldg(xp + 96);
    sc = __ldg((const float4 *)x.ds + t);
}

/* x of Q4_0 block b: 32 int8 in two chunks, (d, s). */
static __device__ __forceinline__ void v3_x_q4_0(const exc_q8x &x, int b, int4 &l, int4 &h, float2 &ds)
{
    const int4 *xq = (const int4 *)(x.qs + (int64_t)b * 32);
    l = __ldg(xq);
    h = __ldg(xq + 1);
    ds = make_float2(__ldg(x.d + b), __ldg(x.s + b));
}

static __device__ __forceinline__ void v3_x_q4_0(const exc_q8xi &x, int b, int4 &l, int4 &h, float2 &ds)
{
    const int4 *xp = (const int4 *)x.qs + (int64_t)(b >> 5) * 64 + (b & 31);
    l = __ldg(xp);
    h = __ldg(xp + 32);
    ds = __ldg((const float2 *)x.ds + b);
}

/* Q4_K, R rows per warp; lane l takes tasks t = t0 + 32u + l, U of them per trip (all their weight loads
 * issued before the first use); X = exc_q8x or exc_q8xi. */
template <int R, int NA, int U, typename X>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3_q4k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nsb, X x, float *__restrict__ y)
{
    const int lane = threadIdx.x & 31;
    const int64_t r0 = ((int64_t)blockIdx.x * V3_WARPS + (threadIdx.x >> 5)) * R;
    if (r0 >= rows) return;
    const int nr = rows - r0 < R ? (int)(rows - r0) : R; /* rows of this warp (warp-uniform) */
    const int64_t rb = (int64_t)nsb * EXC_Q4_K_BYTES;
    const uint8_t *w0 = W + r0 * rb;
    const int nt = nsb * 4;
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    for (int t0 = 0; t0 < nt; t0 += 32 * U) { /* warp-uniform trips */
        int4 hd[U][R], qa[U][R], qb[U][R];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int t = t0 + 32 * u + lane, sb = t >> 2, c = t & 3;
#pragma unroll
            for (int i = 0; i < R; i++) {
                if (t < nt && i < nr) {
                    const int4 *bp = (const int4 *)(w0 + i * rb + (int64_t)sb * EXC_Q4_K_BYTES);
                    hd[u][i] = v3_ldw<NA>(bp);
                    qa[u][i] = v3_ldw<NA>(bp + 1 + 2 * c);
                    qb[u][i] = v3_ldw<NA>(bp + 2 + 2 * c);
                }
            }
        }
        if (t0 == 0) v3_pdl_wait(); /* x is complete from here on */
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int t = t0 + 32 * u + lane, c = t & 3;
            if (t >= nt) continue;
            int4 x0a, x0b, x1a, x1b;
            float4 sc;
            v3_x_q4k(x, t, x0a, x0b, x1a, x1b, sc);
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr) acc[i] += exc_q4k_task(hd[u][i], qa[u][i], qb[u][i], x0a, x0b, x1a, x1b, sc, c);
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = exc_warp_sum(acc[i]);
        if (lane == 0 && i < nr) y[r0 + i] = v;
    }
}

/* Q4_K staged like Q4_0 (ATS_GEMV_V3_Q4K=smem; experiment, not the default): a step is 8 super-blocks
 * (1152 bytes = 72 16-byte chunks) of each of the warp's R rows, loaded with contiguous 16-byte loads
 * (lanes l, l + 32, l + 64 < 72: whole 32-byte sectors, where the direct kernel's lanes fetch each
 * sector's halves in two loads), stored to the warp's shared-memory slot; lane l then takes the task
 * (super-block l / 4, c = l % 4) of the step — task number 32·step + l, as in the direct kernel. */
#define V3S_STEP_U4 72

template <int R, typename X>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3s_q4k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nsb, X x, float *__restrict__ y)
{
    __shared__ int4 stage[V3_WARPS][R * V3S_STEP_U4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = ((int64_t)blockIdx.x * V3_WARPS + warp) * R;
    if (r0 >= rows) return;
    const int nr = rows - r0 < R ? (int)(rows - r0) : R;
    const int row_u4 = nsb * (EXC_Q4_K_BYTES / 16); /* 9 chunks a super-block */
    const int4 *w0 = (const int4 *)(W + r0 * (int64_t)nsb * EXC_Q4_K_BYTES);
    int4 *st = stage[warp];
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    for (int c0 = 0, step = 0; c0 < row_u4; c0 += V3S_STEP_U4, step++) {
        int4 a[R], b[R], e[R];
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i < nr) {
                const int4 *wr = w0 + (int64_t)i * row_u4 + c0;
                if (c0 + lane < row_u4) a[i] = v3_ldw<1>(wr + lane);
                if (c0 + 32 + lane < row_u4) b[i] = v3_ldw<1>(wr + 32 + lane);
                if (lane < V3S_STEP_U4 - 64 && c0 + 64 + lane < row_u4) e[i] = v3_ldw<1>(wr + 64 + lane);
            }
        }
        if (c0 == 0) v3_pdl_wait();
        const int t = step * 32 + lane, c = lane & 3, sbl = lane >> 2; /* task; its super-block in the step */
        const bool has = t < nsb * 4;
        int4 x0a, x0b, x1a, x1b;
        float4 sc;
        if (has) v3_x_q4k(x, t, x0a, x0b, x1a, x1b, sc);
        __syncwarp(); /* every lane is done reading the previous step */
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i < nr) {
                if (c0 + lane < row_u4) st[i * V3S_STEP_U4 + lane] = a[i];
                if (c0 + 32 + lane < row_u4) st[i * V3S_STEP_U4 + 32 + lane] = b[i];
                if (lane < V3S_STEP_U4 - 64 && c0 + 64 + lane < row_u4) st[i * V3S_STEP_U4 + 64 + lane] = e[i];
            }
        }
        __syncwarp();
        if (has) {
#pragma unroll
            for (int i = 0; i < R; i++) {
                if (i < nr) {
                    const int4 *sb = st + i * V3S_STEP_U4 + sbl * 9;
                    acc[i] += exc_q4k_task(sb[0], sb[1 + 2 * c], sb[2 + 2 * c], x0a, x0b, x1a, x1b, sc, c);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = exc_warp_sum(acc[i]);
        if (lane == 0 && i < nr) y[r0 + i] = v;
    }
}

/* ---- Q4_0 ---------------------------------------------------------------------------------- */

#define V3_STEP_U4 36 /* 32 blocks of 18 bytes = 576 bytes = 36 uint4 */

template <int R, int NA, typename X>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3_q4_0_kernel(const uint8_t *__restrict__ W, int64_t rows, int nb, X x, float *__restrict__ y)
{
    __shared__ uint4 stage[V3_WARPS][R * V3_STEP_U4 + 1]; /* +1: the word reads run ≤ 2 bytes past */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = ((int64_t)blockIdx.x * V3_WARPS + warp) * R;
    if (r0 >= rows) return;
    const int nr = rows - r0 < R ? (int)(rows - r0) : R;
    const int row_u4 = nb * EXC_Q4_0_BYTES / 16; /* nb % 8 == 0: whole 16-byte chunks */
    const uint4 *w0 = (const uint4 *)(W + r0 * (int64_t)nb * EXC_Q4_0_BYTES);
    uint4 *st = stage[warp];
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    for (int c0 = 0; c0 < row_u4; c0 += V3_STEP_U4) { /* one step: 32 blocks of each row */
        uint4 a[R], b[R];
        const int ia = c0 + lane, ib = c0 + 32 + lane;
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i < nr) {
                if (ia < row_u4) a[i] = v3_ldw4<NA>(w0 + (int64_t)i * row_u4 + ia);
                if (lane < V3_STEP_U4 - 32 && ib < row_u4) b[i] = v3_ldw4<NA>(w0 + (int64_t)i * row_u4 + ib);
            }
        }
        if (c0 == 0) v3_pdl_wait();
        const int blk = c0 / V3_STEP_U4 * 32 + lane; /* this lane's block index in the rows */
        int4 xl = make_int4(0, 0, 0, 0), xh = xl;
        float2 ds = make_float2(0.0f, 0.0f);
        if (blk < nb) v3_x_q4_0(x, blk, xl, xh, ds);
        __syncwarp(); /* every lane is done reading the previous step */
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i < nr) {
                if (ia < row_u4) st[i * V3_STEP_U4 + lane] = a[i];
                if (lane < V3_STEP_U4 - 32 && ib < row_u4) st[i * V3_STEP_U4 + 32 + lane] = b[i];
            }
        }
        __syncwarp();
        if (blk < nb) {
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr) acc[i] += exc_q4_0_dot((const uint8_t *)(st + i * V3_STEP_U4) + 18 * lane, xl, xh, ds);
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = exc_warp_sum(acc[i]);
        if (lane == 0 && i < nr) y[r0 + i] = v;
    }
}

/* ---- Q6_K (default above V3_Q6K_MIN_ROWS rows; ATS_GEMV_V3_Q6K = 0 | 1 off | every shape) ---------------- */

/* Q6_K (210-byte super-blocks: ql[128] @0, qh[64] @128, scales[16] @192, d @208; QUANT_FORMATS.md §Q6_K)
 * staged like Q4_0: a step is 8 super-blocks (1680 bytes, a multiple of 16) of each of the warp's R rows,
 * loaded with contiguous 16-byte loads from the 16-byte boundary at or below the step (rows of 210·nb
 * bytes start at any even offset; the window may read up to 15 bytes past the row's end, inside the
 * allocation's 256-byte granule, as v1 does). A task is 32 elements 128h + 32g + l (l = 0..31) of one
 * super-block = one int8 activation block: q = nibble (4·(g >> 1)) of ql[64h + 32(g & 1) + l] | bits 2g
 * of qh[32h + l] << 4, value d·scales[8h + 2g + l/16]·(q − 32). 64 tasks per step, lane l takes tasks l
 * and l + 32; the activations are exc_q8xi with 2 chunks (Q4_0's), task T of step k is block 64k + T.
 * Why: v2 streams Q6_K at 29-35% of the read probe, 2.2 ms of a Qwen3-14B Q4_K_M decode step (41 calls;
 * bench-kernels.md, fourth session). */
#define V3Q6_SB 8                             /* super-blocks per step */
#define V3Q6_STEP (V3Q6_SB * EXC_Q6_K_BYTES)  /* 1680 bytes */
#define V3Q6_U4 (V3Q6_STEP / 16 + 1)          /* 106 chunks: a step and its start offset (< 16) */
static_assert(V3Q6_STEP % 16 == 0, "a Q6_K step is whole 16-byte chunks");

/* 32 bytes at the even byte offset o of a 4-byte aligned stage, as 8 words (9 aligned word reads and a
 * 16-bit funnel shift when o % 4 == 2; the last read ends ≤ 4 bytes past the 32: inside the stage). */
static __device__ __forceinline__ void v3q6_words(const uint8_t *st, int o, uint32_t w[8])
{
    const uint32_t *p = (const uint32_t *)(st + (o & ~3));
    uint32_t a[9];
#pragma unroll
    for (int k = 0; k < 9; k++) a[k] = p[k];
#pragma unroll
    for (int k = 0; k < 8; k++) w[k] = (o & 2) ? __funnelshift_r(a[k], a[k + 1], 16) : a[k];
}

/* Σ over the task's 32 elements of scale·(q − 32)·xq (the caller multiplies by d·dx): super-block at byte
 * `base` of the stage, half h, group g, activations xl (elements 0..15) and xh (16..31). */
static __device__ __forceinline__ int v3q6_task(const uint8_t *st, int base, int h, int g, int4 xl, int4 xh)
{
    uint32_t L[8], H[8];
    v3q6_words(st, base + 64 * h + 32 * (g & 1), L);
    v3q6_words(st, base + 128 + 32 * h, H);
    const int ls = 4 * (g >> 1), hs = 2 * g;
    const int xs[8] = {xl.x, xl.y, xl.z, xl.w, xh.x, xh.y, xh.z, xh.w};
    int sa = 0, sb = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        unsigned q = ((L[k] >> ls) & 0x0F0F0F0Fu) | (((H[k] >> hs) & 0x03030303u) << 4);
        int qs = (int)__vsubss4(q, 0x20202020u); /* q − 32 per byte, in [-32, 31] */
        if (k < 4) sa = __dp4a(qs, xs[k], sa);
        else sb = __dp4a(qs, xs[k], sb);
    }
    const int8_t *S = (const int8_t *)(st + base + 192 + 8 * h + 2 * g);
    return (int)S[0] * sa + (int)S[1] * sb;
}

template <int R>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3_q6k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nb, exc_q8xi x, float *__restrict__ y)
{
    __shared__ int4 stage[V3_WARPS][R][V3Q6_U4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = ((int64_t)blockIdx.x * V3_WARPS + warp) * R;
    if (r0 >= rows) return;
    const int nr = rows - r0 < R ? (int)(rows - r0) : R;
    const int64_t rb = (int64_t)nb * EXC_Q6_K_BYTES;
    const int4 *wa[R];
    int dl[R];
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) {
        const uintptr_t p = (uintptr_t)(W + (r0 + (i < nr ? i : 0)) * rb);
        wa[i] = (const int4 *)(p & ~(uintptr_t)15);
        dl[i] = (int)(p & 15);
        acc[i] = 0.0f;
    }
    const int steps = (nb + V3Q6_SB - 1) / V3Q6_SB;
    for (int k = 0; k < steps; k++) {
        const int nbs = nb - k * V3Q6_SB < V3Q6_SB ? nb - k * V3Q6_SB : V3Q6_SB; /* super-blocks this step */
        int4 c[R][4];
        int nch[R];
#pragma unroll
        for (int i = 0; i < R; i++) {
            nch[i] = (dl[i] + nbs * EXC_Q6_K_BYTES + 15) >> 4;
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (i < nr && lane + 32 * u < nch[i]) c[i][u] = v3_ldw<1>(wa[i] + (int64_t)k * (V3Q6_STEP / 16) + lane + 32 * u);
        }
        if (k == 0) v3_pdl_wait();
        /* the lane's two tasks T = lane + 32u of the step: x block 64k + T, super-block T / 8 */
        int4 xl[2], xh[2];
        float2 ds[2];
        bool has[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            has[u] = ((lane + 32 * u) >> 3) < nbs;
            if (has[u]) v3_x_q4_0(x, k * 64 + lane + 32 * u, xl[u], xh[u], ds[u]);
        }
        __syncwarp(); /* every lane is done reading the previous step */
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (i < nr && lane + 32 * u < nch[i]) stage[warp][i][lane + 32 * u] = c[i][u];
        __syncwarp();
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i >= nr) continue;
            const uint8_t *st = (const uint8_t *)stage[warp][i];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                if (!has[u]) continue;
                const int T = lane + 32 * u, base = dl[i] + (T >> 3) * EXC_Q6_K_BYTES;
                const float d = exc_h2f(*(const uint16_t *)(st + base + 208));
                acc[i] += d * ds[u].x * (float)v3q6_task(st, base, (T >> 2) & 1, T & 3, xl[u], xh[u]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = exc_warp_sum(acc[i]);
        if (lane == 0 && i < nr) y[r0 + i] = v;
    }
}

/* ---- launcher ------------------------------------------------------------------------------ */

/* ATS_GEMV_KERNEL: "v1" or "v2" turn v3 off (read once). */
static int v3_disabled(void)
{
    static std::once_flag once;
    static int off = 0;
    std::call_once(once, [] {
        const char *e = getenv("ATS_GEMV_KERNEL");
        off = e && (strcmp(e, "v1") == 0 || strcmp(e, "v2") == 0);
    });
    return off;
}

/* Bench experiments, read once: ATS_GEMV_V3_R = 1 | 2 | 4 | 8 rows per warp (default V3_R),
 * ATS_GEMV_V3_LOAD = ldg | na weight loads (default V3_NA), ATS_GEMV_V3_X = lin | ilv activation layout
 * (default V3_ILV; ilv runs R = 2 or 4 with no_allocate loads), ATS_GEMV_V3_U = 1 | 2 Q4_K tasks per lane
 * per trip (ilv only; default V3_U). */
typedef struct v3_cfg {
    int r, na, ilv, u, q4k_smem, q6k; /* q6k: -1 default (by rows), 0 off, 1 every shape */
    int shape_set;                     /* ATS_GEMV_V3_R or ATS_GEMV_V3_X given: no per-shape choice (v3_wide) */
} v3_cfg;

static v3_cfg v3_config(void)
{
    static std::once_flag once;
    static v3_cfg c = {V3_R, V3_NA, V3_ILV, V3_U, 0, -1, 0};
    std::call_once(once, [] {
        const char *e = getenv("ATS_GEMV_V3_R");
        int v = e ? atoi(e) : 0;
        if (v == 1 || v == 2 || v == 4 || v == 8) c.r = v, c.shape_set = 1;
        if ((e = getenv("ATS_GEMV_V3_X")) && (strcmp(e, "ilv") == 0 || strcmp(e, "lin") == 0)) c.shape_set = 1;
        if ((e = getenv("ATS_GEMV_V3_LOAD")) && strcmp(e, "na") == 0) c.na = 1;
        if ((e = getenv("ATS_GEMV_V3_LOAD")) && strcmp(e, "ldg") == 0) c.na = 0;
        if ((e = getenv("ATS_GEMV_V3_X")) && strcmp(e, "ilv") == 0) c.ilv = 1;
        if ((e = getenv("ATS_GEMV_V3_X")) && strcmp(e, "lin") == 0) c.ilv = 0;
        if ((e = getenv("ATS_GEMV_V3_U")) && (atoi(e) == 1 || atoi(e) == 2)) c.u = atoi(e);
        if ((e = getenv("ATS_GEMV_V3_Q4K")) && strcmp(e, "smem") == 0) c.q4k_smem = 1;
        if ((e = getenv("ATS_GEMV_V3_Q6K")) && strcmp(e, "1") == 0) c.q6k = 1;
        if ((e = getenv("ATS_GEMV_V3_Q6K")) && strcmp(e, "0") == 0) c.q6k = 0;
    });
    return c;
}

template <typename K, typename X>
static ex_gpu_status v3_launch(ex_gpu *g, K kernel, int R, const void *W, int64_t rows, int n_units, X q, float *y,
                               cudaStream_t s)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)((rows + (int64_t)V3_WARPS * R - 1) / ((int64_t)V3_WARPS * R)));
    cfg.blockDim = dim3(32 * V3_WARPS);
    cfg.stream = s;
    if (exc_cc_major(g) >= 9) { /* programmatic dependent of the quantize kernel */
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    EXC_CUDA(cudaLaunchKernelEx(&cfg, kernel, (const uint8_t *)W, rows, n_units, q, y));
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

template <int R, int NA, int U, typename X>
static ex_gpu_status v3_run(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, X q, float *y,
                            cudaStream_t s)
{
    if (type == ATS_Q_Q4_K)
        return v3_launch(g, gemv_v3_q4k_kernel<R, NA, U, X>, R, W, rows, (int)(cols / 256), q, y, s);
    return v3_launch(g, gemv_v3_q4_0_kernel<R, NA, X>, R, W, rows, (int)(cols / 32), q, y, s);
}

template <int NA>
static ex_gpu_status v3_run_lin(ex_gpu *g, int r, int type, const void *W, int64_t rows, int64_t cols, exc_q8x q,
                                float *y, cudaStream_t s)
{
    switch (r) {
    case 1: return v3_run<1, NA, 1>(g, type, W, rows, cols, q, y, s);
    case 4: return v3_run<4, NA, 1>(g, type, W, rows, cols, q, y, s);
    case 8: return v3_run<8, NA, 1>(g, type, W, rows, cols, q, y, s);
    default: return v3_run<2, NA, 1>(g, type, W, rows, cols, q, y, s);
    }
}

/* 1 when v3 takes this single GEMV (one matrix, one activation row): Q4_0 and Q4_K with cols % 256 == 0,
 * Q6_K above V3_Q6K_MIN_ROWS rows (or as ATS_GEMV_V3_Q6K says); never with ATS_GEMV_KERNEL=v1|v2. */
static int v3_covers(int type, int64_t rows, int64_t cols)
{
    if (v3_disabled() || rows > ((int64_t)1 << 32) || cols % 256 != 0 || cols > ((int64_t)1 << 30)) return 0;
    const int q6k = v3_config().q6k;
    if (type == ATS_Q_Q6_K) return q6k < 0 ? rows > V3_Q6K_MIN_ROWS : q6k;
    return type == ATS_Q_Q4_K || type == ATS_Q_Q4_0;
}

/* Runs v3 when it covers the case (v3_covers): *used = 1. Otherwise *used = 0 and nothing is launched.
 * W and x 16-byte aligned (checked by the caller). */
ex_gpu_status exc_gemv_v3(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                          cudaStream_t s, int *used)
{
    *used = 0;
    if (!v3_covers(type, rows, cols)) return EX_GPU_OK;
    v3_cfg c = v3_config();
    if (type == ATS_Q_Q4_0 && !c.shape_set && cols >= V3_WIDE_RATIO * rows) {
        /* few long rows (ffn_down): one row a warp, activations linear. H200, Q4_0 17408 -> 5120: ilv R = 2
         * 47.2% of the read probe (59.6% of a same-size read), lin R = 1 58.5% (74.4%); Q4_K ffn_down lost
         * (59.6% -> 54.0%), so Q4_0 only (sixth session, experiments/bench/bench-kernels.md) */
        c.ilv = 0;
        c.r = 1;
    }
    ex_gpu_status st;
    if (type == ATS_Q_Q6_K) { /* activations as for Q4_0 (2 chunks a block) */
        exc_q8xi q;
        if ((st = exc_quantize_q8xi_ws(g, x, cols, 2, s, &q))) return st;
        st = v3_launch(g, gemv_v3_q6k_kernel<2>, 2, W, rows, (int)(cols / 256), q, y, s);
        if (st == EX_GPU_OK) *used = 1;
        return st;
    }
    if (c.ilv) {
        exc_q8xi q;
        if ((st = exc_quantize_q8xi_ws(g, x, cols, type == ATS_Q_Q4_K ? 4 : 2, s, &q))) return st;
        if (type == ATS_Q_Q4_K && c.q4k_smem)
            st = c.r == 4 ? v3_launch(g, gemv_v3s_q4k_kernel<4, exc_q8xi>, 4, W, rows, (int)(cols / 256), q, y, s)
                          : v3_launch(g, gemv_v3s_q4k_kernel<2, exc_q8xi>, 2, W, rows, (int)(cols / 256), q, y, s);
        else if (c.r == 4)
            st = c.u == 2 ? v3_run<4, 1, 2>(g, type, W, rows, cols, q, y, s) : v3_run<4, 1, 1>(g, type, W, rows, cols, q, y, s);
        else
            st = c.u == 2 ? v3_run<2, 1, 2>(g, type, W, rows, cols, q, y, s) : v3_run<2, 1, 1>(g, type, W, rows, cols, q, y, s);
    } else {
        exc_q8x q; /* d and s 8-byte aligned for the float2 loads: cols % 256 == 0 */
        if ((st = exc_quantize_q8x_ws(g, x, cols, 1, s, &q))) return st;
        st = c.na ? v3_run_lin<1>(g, c.r, type, W, rows, cols, q, y, s) : v3_run_lin<0>(g, c.r, type, W, rows, cols, q, y, s);
    }
    if (st == EX_GPU_OK) *used = 1;
    return st;
}

/* gemv_v4.cu: 1 when ex_cuda_gemv runs v4 for this case on the current device. */
int exc_gemv_v4_used(int type, int64_t rows, int64_t cols);

/* The kernel family ex_cuda_gemv runs for one matrix and one activation row of this type and shape
 * (gemv.cu's order: v4 where it covers the case, then v3, then v2 for Q4_0/Q8_0/Q4_K/Q6_K unless
 * ATS_GEMV_KERNEL=v1, else v1): "v4", "v3", "v2" or "v1". For the bench's table. */
extern "C" const char *ex_cuda_gemv_kernel(int type, int64_t rows, int64_t cols)
{
    if (exc_gemv_v4_used(type, rows, cols)) return "v4";
    if (v3_covers(type, rows, cols)) return "v3";
    const char *e = getenv("ATS_GEMV_KERNEL");
    const int v2_type = type == ATS_Q_Q4_0 || type == ATS_Q_Q8_0 || type == ATS_Q_Q4_K || type == ATS_Q_Q6_K;
    return v2_type && !(e && strcmp(e, "v1") == 0) ? "v2" : "v1";
}
