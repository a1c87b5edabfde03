/*
 * Decode GEMV "rows" (gemv.cuh) for Q4_0, Q4_K (rows of a multiple of 256 columns) and Q6_K with one
 * activation row: y (rows) = W · x. x is quantized to int8 blocks of 32 by quantize_x.cu first; the GEMV is
 * a programmatic dependent of that kernel and issues its first weight loads before griddepcontrol.wait.
 * The quantize kernel itself is a plain launch, so L1 is clean of older activations when the GEMV reads x
 * through the non-coherent path (__ldg) after its wait.
 *
 * rows2: a warp computes R = 2 rows at once; every lane loads its slice of x once and uses it for both
 * rows' weights (x traffic per weight byte / 2). Weights are read with 16-byte `L1::no_allocate` loads
 * (read once; they do not evict x, which every warp re-reads from L1). x is interleaved (exc_q8xi,
 * common.cuh): quantize_x.cu writes it in the order the lanes read it, so a warp's 16-byte x load covers
 * 512 contiguous bytes.
 * rows1 (Q4_0 only): one row a warp, x in plain order (exc_q8x): for rows of many columns (ffn_down) more
 * warps share a row's bytes (H200, Q4_0 17408 -> 5120: 58.5% of the read probe against 47.2% for rows2;
 * for Q4_K rows2 stays faster there, 59.6% against 54.0%; experiments/bench/bench-kernels.md).
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
 * back as aligned 32-bit words (exc_q4_0_dot); lane l's activation block is the same for all R.
 */
#include "gemv.cuh"

#include "ats/quant.h"

#define ROWS_WARPS 4 /* warps per block */

/* A 16-byte weight load through the read-only path with L1::no_allocate: the streamed weights (read once)
 * do not evict the activations, which every warp re-reads from L1. */
static __device__ __forceinline__ int4 rows_ldw(const int4 *p)
{
    int4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

static __device__ __forceinline__ uint4 rows_ldw4(const uint4 *p)
{
    int4 v = rows_ldw((const int4 *)p);
    return make_uint4((unsigned)v.x, (unsigned)v.y, (unsigned)v.z, (unsigned)v.w);
}

static __device__ __forceinline__ void rows_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- Q4_K ---------------------------------------------------------------------------------- */

/* x of Q4_K task t (sub-blocks 2t and 2t+1 of the row: blocks 2t, 2t+1 of x): 64 int8 in four 16-byte
 * chunks and sc = {d0, s0, d1, s1}, interleaved layout (exc_q8xi, chunks = 4): lanes' chunks contiguous. */
static __device__ __forceinline__ void rows_x_q4k(const exc_q8xi &x, int t, int4 &a0, int4 &b0, int4 &a1, int4 &b1,
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
static __device__ __forceinline__ void rows_x_q4_0(const exc_q8x &x, int b, int4 &l, int4 &h, float2 &ds)
{
    const int4 *xq = (const int4 *)(x.qs + (int64_t)b * 32);
    l = __ldg(xq);
    h = __ldg(xq + 1);
    ds = make_float2(__ldg(x.d + b), __ldg(x.s + b));
}

static __device__ __forceinline__ void rows_x_q4_0(const exc_q8xi &x, int b, int4 &l, int4 &h, float2 &ds)
{
    const int4 *xp = (const int4 *)x.qs + (int64_t)(b >> 5) * 64 + (b & 31);
    l = __ldg(xp);
    h = __ldg(xp + 32);
    ds = __ldg((const float2 *)x.ds + b);
}

/* Q4_K, two rows per warp; lane l takes tasks t = t0 + l (all the rows' weight loads issued before the
 * first use). */
static __global__ void __launch_bounds__(32 * ROWS_WARPS)
    gemv_rows_q4k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nsb, exc_q8xi x, float *__restrict__ y)
{
    constexpr int R = 2;
    const int lane = threadIdx.x & 31;
    const int64_t r0 = ((int64_t)blockIdx.x * ROWS_WARPS + (threadIdx.x >> 5)) * R;
    if (r0 >= rows) return;
    const int nr = rows - r0 < R ? (int)(rows - r0) : R; /* rows of this warp (warp-uniform) */
    const int64_t rb = (int64_t)nsb * EXC_Q4_K_BYTES;
    const uint8_t *w0 = W + r0 * rb;
    const int nt = nsb * 4;
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    for (int t0 = 0; t0 < nt; t0 += 32) { /* warp-uniform trips */
        int4 hd[R], qa[R], qb[R];
        const int t = t0 + lane, sb = t >> 2, c = t & 3;
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (t < nt && i < nr) {
                const int4 *bp = (const int4 *)(w0 + i * rb + (int64_t)sb * EXC_Q4_K_BYTES);
                hd[i] = rows_ldw(bp);
                qa[i] = rows_ldw(bp + 1 + 2 * c);
                qb[i] = rows_ldw(bp + 2 + 2 * c);
            }
        }
        if (t0 == 0) rows_pdl_wait(); /* x is complete from here on */
        if (t >= nt) continue;
        int4 x0a, x0b, x1a, x1b;
        float4 sc;
        rows_x_q4k(x, t, x0a, x0b, x1a, x1b, sc);
#pragma unroll
        for (int i = 0; i < R; i++)
            if (i < nr) acc[i] += exc_q4k_task(hd[i], qa[i], qb[i], x0a, x0b, x1a, x1b, sc, c);
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = exc_warp_sum(acc[i]);
        if (lane == 0 && i < nr) y[r0 + i] = v;
    }
}

/* ---- Q4_0 ---------------------------------------------------------------------------------- */

#define ROWS_Q40_STEP_U4 36 /* 32 blocks of 18 bytes = 576 bytes = 36 uint4 */

template <int R, typename X>
static __global__ void __launch_bounds__(32 * ROWS_WARPS)
    gemv_rows_q4_0_kernel(const uint8_t *__restrict__ W, int64_t rows, int nb, X x, float *__restrict__ y)
{
    __shared__ uint4 stage[ROWS_WARPS][R * ROWS_Q40_STEP_U4 + 1]; /* +1: the word reads run ≤ 2 bytes past */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = ((int64_t)blockIdx.x * ROWS_WARPS + warp) * R;
    if (r0 >= rows) return;
    const int nr = rows - r0 < R ? (int)(rows - r0) : R;
    const int row_u4 = nb * EXC_Q4_0_BYTES / 16; /* nb % 8 == 0: whole 16-byte chunks */
    const uint4 *w0 = (const uint4 *)(W + r0 * (int64_t)nb * EXC_Q4_0_BYTES);
    uint4 *st = stage[warp];
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.0f;
    for (int c0 = 0; c0 < row_u4; c0 += ROWS_Q40_STEP_U4) { /* one step: 32 blocks of each row */
        uint4 a[R], b[R];
        const int ia = c0 + lane, ib = c0 + 32 + lane;
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i < nr) {
                if (ia < row_u4) a[i] = rows_ldw4(w0 + (int64_t)i * row_u4 + ia);
                if (lane < ROWS_Q40_STEP_U4 - 32 && ib < row_u4) b[i] = rows_ldw4(w0 + (int64_t)i * row_u4 + ib);
            }
        }
        if (c0 == 0) rows_pdl_wait();
        const int blk = c0 / ROWS_Q40_STEP_U4 * 32 + lane; /* this lane's block index in the rows */
        int4 xl = make_int4(0, 0, 0, 0), xh = xl;
        float2 ds = make_float2(0.0f, 0.0f);
        if (blk < nb) rows_x_q4_0(x, blk, xl, xh, ds);
        __syncwarp(); /* every lane is done reading the previous step */
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (i < nr) {
                if (ia < row_u4) st[i * ROWS_Q40_STEP_U4 + lane] = a[i];
                if (lane < ROWS_Q40_STEP_U4 - 32 && ib < row_u4) st[i * ROWS_Q40_STEP_U4 + 32 + lane] = b[i];
            }
        }
        __syncwarp();
        if (blk < nb) {
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr) acc[i] += exc_q4_0_dot((const uint8_t *)(st + i * ROWS_Q40_STEP_U4) + 18 * lane, xl, xh, ds);
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = exc_warp_sum(acc[i]);
        if (lane == 0 && i < nr) y[r0 + i] = v;
    }
}

/* ---- Q6_K (the table takes rows2 above 2048 rows, the ring kernel at or below) ------------------------ */

/* Q6_K (210-byte super-blocks: ql[128] @0, qh[64] @128, scales[16] @192, d @208; QUANT_FORMATS.md §Q6_K)
 * staged like Q4_0: a step is 8 super-blocks (1680 bytes, a multiple of 16) of each of the warp's R rows,
 * loaded with contiguous 16-byte loads from the 16-byte boundary at or below the step (rows of 210·nb
 * bytes start at any even offset; the window may read up to 15 bytes past the row's end, inside the
 * allocation's 256-byte granule, as the warp kernel does). A task is 32 elements 128h + 32g + l (l = 0..31) of one
 * super-block = one int8 activation block: q = nibble (4·(g >> 1)) of ql[64h + 32(g & 1) + l] | bits 2g
 * of qh[32h + l] << 4, value d·scales[8h + 2g + l/16]·(q − 32). 64 tasks per step, lane l takes tasks l
 * and l + 32; the activations are exc_q8xi with 2 chunks (Q4_0's), task T of step k is block 64k + T.
 * H200 (experiments/bench/gpu-2026-11-30-s5): Q6_K ffn_up 38.0 us against 45.1 for the ring kernel,
 * ffn_down 40.9 against 55.1; at 1024 rows (attn_kv) 8.8 us against 7.3, hence the 2048-row rule. */
#define ROWS_Q6_SB 8                             /* super-blocks per step */
#define ROWS_Q6_STEP (ROWS_Q6_SB * EXC_Q6_K_BYTES)  /* 1680 bytes */
#define ROWS_Q6_U4 (ROWS_Q6_STEP / 16 + 1)          /* 106 chunks: a step and its start offset (< 16) */
static_assert(ROWS_Q6_STEP % 16 == 0, "a Q6_K step is whole 16-byte chunks");

/* 32 bytes at the even byte offset o of a 4-byte aligned stage, as 8 words (9 aligned word reads and a
 * 16-bit funnel shift when o % 4 == 2; the last read ends ≤ 4 bytes past the 32: inside the stage). */
static __device__ __forceinline__ void rows_q6_words(const uint8_t *st, int o, uint32_t w[8])
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
static __device__ __forceinline__ int rows_q6_task(const uint8_t *st, int base, int h, int g, int4 xl, int4 xh)
{
    uint32_t L[8], H[8];
    rows_q6_words(st, base + 64 * h + 32 * (g & 1), L);
    rows_q6_words(st, base + 128 + 32 * h, H);
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
static __global__ void __launch_bounds__(32 * ROWS_WARPS)
    gemv_rows_q6k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nb, exc_q8xi x, float *__restrict__ y)
{
    __shared__ int4 stage[ROWS_WARPS][R][ROWS_Q6_U4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = ((int64_t)blockIdx.x * ROWS_WARPS + warp) * R;
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
    const int steps = (nb + ROWS_Q6_SB - 1) / ROWS_Q6_SB;
    for (int k = 0; k < steps; k++) {
        const int nbs = nb - k * ROWS_Q6_SB < ROWS_Q6_SB ? nb - k * ROWS_Q6_SB : ROWS_Q6_SB; /* super-blocks this step */
        int4 c[R][4];
        int nch[R];
#pragma unroll
        for (int i = 0; i < R; i++) {
            nch[i] = (dl[i] + nbs * EXC_Q6_K_BYTES + 15) >> 4;
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (i < nr && lane + 32 * u < nch[i]) c[i][u] = rows_ldw(wa[i] + (int64_t)k * (ROWS_Q6_STEP / 16) + lane + 32 * u);
        }
        if (k == 0) rows_pdl_wait();
        /* the lane's two tasks T = lane + 32u of the step: x block 64k + T, super-block T / 8 */
        int4 xl[2], xh[2];
        float2 ds[2];
        bool has[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            has[u] = ((lane + 32 * u) >> 3) < nbs;
            if (has[u]) rows_x_q4_0(x, k * 64 + lane + 32 * u, xl[u], xh[u], ds[u]);
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
                acc[i] += d * ds[u].x * (float)rows_q6_task(st, base, (T >> 2) & 1, T & 3, xl[u], xh[u]);
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

template <typename K, typename X>
static ex_gpu_status rows_launch(ex_gpu *g, K kernel, int R, const void *W, int64_t rows, int n_units, X q, float *y,
                                 cudaStream_t s)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)((rows + (int64_t)ROWS_WARPS * R - 1) / ((int64_t)ROWS_WARPS * R)));
    cfg.blockDim = dim3(32 * ROWS_WARPS);
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

int exc_gemv_rows_fits(int type, int64_t rows, int64_t cols)
{
    return (type == ATS_Q_Q4_0 || type == ATS_Q_Q4_K || type == ATS_Q_Q6_K) && cols % 256 == 0 &&
           rows <= ((int64_t)1 << 32) && cols <= ((int64_t)1 << 30);
}

/* Runs rows2 (one_row = 0) or rows1 (Q4_0 only); the caller checked exc_gemv_rows_fits. */
ex_gpu_status exc_gemv_rows(ex_gpu *g, int type, int one_row, const void *W, int64_t rows, int64_t cols, const float *x,
                            float *y, cudaStream_t s)
{
    ex_gpu_status st;
    const int units = (int)(cols / (type == ATS_Q_Q4_0 ? 32 : 256));
    if (one_row) {
        if (type != ATS_Q_Q4_0) return EX_GPU_EINVAL;
        exc_q8x q; /* d and s 8-byte aligned for the float2 loads: cols % 256 == 0 */
        if ((st = exc_quantize_q8x_ws(g, x, cols, 1, s, &q))) return st;
        return rows_launch(g, gemv_rows_q4_0_kernel<1, exc_q8x>, 1, W, rows, units, q, y, s);
    }
    exc_q8xi q; /* chunks a task: 4 for Q4_K (a sub-block pair), 2 for Q4_0 and Q6_K (a block of 32) */
    if ((st = exc_quantize_q8xi_ws(g, x, cols, type == ATS_Q_Q4_K ? 4 : 2, s, &q))) return st;
    switch (type) {
    case ATS_Q_Q4_K: return rows_launch(g, gemv_rows_q4k_kernel, 2, W, rows, units, q, y, s);
    case ATS_Q_Q6_K: return rows_launch(g, gemv_rows_q6k_kernel<2>, 2, W, rows, units, q, y, s);
    case ATS_Q_Q4_0: return rows_launch(g, gemv_rows_q4_0_kernel<2, exc_q8xi>, 2, W, rows, units, q, y, s);
    default: return EX_GPU_EINVAL;
    }
}
