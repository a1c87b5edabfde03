/*
 * Decode GEMV, third kernel (v3) for Q4_0 and Q4_K with one activation row: y (rows) = W · x.
 *
 * Why a third one: Nsight Compute on the H200 (experiments/bench/bench-kernels.md) showed v2 (one
 * persistent kernel, cp.async ring, x quantized per block) at 41% of DRAM bandwidth with 22%
 * achieved occupancy and ~200 issued instructions per 32 weight blocks: it was issue- and
 * latency-bound, not short of bytes in flight. v3 is the plain shape that the float GEMV (90% of
 * HBM read) already has: one warp per row, 4 warps per block, many resident warps, weights loaded
 * straight into registers with 16-byte non-coherent loads, U tasks' loads issued before any math.
 * x is quantized to int8 blocks of 32 by quantize_x.cu first (exc_q8x, as v1); the GEMV is launched
 * as a programmatic dependent of it and issues its first weight loads before griddepcontrol.wait.
 *
 * Q4_K (144-byte super-blocks, 16-byte aligned): a task is one pair of sub-blocks, (super-block sb,
 * c = 0..3): qs bytes [16 + 32c, 48 + 32c) hold sub-block 2c in the low nibbles and 2c+1 in the high
 * nibbles, all 32 elements of each (ggml's dequantize_row_q4_K; QUANT_FORMATS.md §Q4_K). With
 * w = d·sc·q − dmin·m and x ≈ dx·xq:  Σ w·x = d·sc·dx·Σ q·xq − dmin·m·(dx·Σ xq), and dx·Σ xq is the
 * block sum `s` of exc_q8x, so a task is 16 __dp4a and two scale decodes.
 *
 * Q4_0 (18-byte blocks, 2-byte aligned): rows of a multiple of 8 blocks start 16-byte aligned, so a
 * warp loads 32 blocks (576 bytes = 36 16-byte chunks) with coalesced 16-byte loads, stores them to
 * its own shared-memory slot and each lane reads its block back as aligned 32-bit words (v2's
 * shift trick). U such 576-byte steps are in flight per warp.
 *
 * ATS_GEMV_KERNEL=v2 or v1 selects the older kernels (bench and tests compare them).
 */
#include "common.cuh"

#include <mutex>
#include <stdlib.h>
#include <string.h>

#include "ats/quant.h"

#define V3_WARPS 4 /* warps (rows) per block */
#define V3_U 4     /* tasks (Q4_K) or 576-byte steps (Q4_0) per lane in flight */

static __device__ __forceinline__ void v3_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- Q4_K ---------------------------------------------------------------------------------- */

/* Scale and min of sub-block k (0..7) from the 12 packed bytes (3 little-endian words), without
 * branches (QUANT_FORMATS.md §Q4_K, the formula of ex_q4k_scale_min). */
static __device__ __forceinline__ void v3_q4k_scale_min(uint32_t s0, uint32_t s1, uint32_t s2, int k, int *sc, int *m)
{
    int sh = 8 * (k & 3);
    uint32_t lo = (s0 >> sh) & 0xFFu, hi = (s1 >> sh) & 0xFFu, b8 = (s2 >> sh) & 0xFFu;
    uint32_t sc_a = lo & 63u, m_a = hi & 63u;
    uint32_t sc_b = (b8 & 0x0Fu) | ((lo >> 6) << 4), m_b = (b8 >> 4) | ((hi >> 6) << 4);
    *sc = (int)(k < 4 ? sc_a : sc_b);
    *m = (int)(k < 4 ? m_a : m_b);
}

static __device__ __forceinline__ int v3_dot8(int4 wa, int4 wb, int4 xa, int4 xb, int shift)
{
    int s = 0;
    s = __dp4a((wa.x >> shift) & 0x0F0F0F0F, xa.x, s);
    s = __dp4a((wa.y >> shift) & 0x0F0F0F0F, xa.y, s);
    s = __dp4a((wa.z >> shift) & 0x0F0F0F0F, xa.z, s);
    s = __dp4a((wa.w >> shift) & 0x0F0F0F0F, xa.w, s);
    s = __dp4a((wb.x >> shift) & 0x0F0F0F0F, xb.x, s);
    s = __dp4a((wb.y >> shift) & 0x0F0F0F0F, xb.y, s);
    s = __dp4a((wb.z >> shift) & 0x0F0F0F0F, xb.z, s);
    s = __dp4a((wb.w >> shift) & 0x0F0F0F0F, xb.w, s);
    return s;
}

template <int U>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3_q4k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nsb, exc_q8x x, float *__restrict__ y)
{
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * V3_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;
    const uint8_t *wr = W + row * (int64_t)nsb * EXC_Q4_K_BYTES;
    const int nt = nsb * 4;
    float acc = 0.0f;
    for (int t0 = 0; t0 < nt; t0 += 32 * U) {
        int4 hd[U], qa[U], qb[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int t = t0 + 32 * u + lane;
            if (t < nt) {
                const int4 *bp = (const int4 *)(wr + (t >> 2) * EXC_Q4_K_BYTES);
                int c = t & 3;
                hd[u] = __ldg(bp);
                qa[u] = __ldg(bp + 1 + 2 * c);
                qb[u] = __ldg(bp + 2 + 2 * c);
            }
        }
        if (t0 == 0) v3_pdl_wait(); /* x is complete from here on */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int t = t0 + 32 * u + lane;
            if (t < nt) {
                int c = t & 3;
                int xb0 = (t >> 2) * 8 + 2 * c; /* activation block of sub-block 2c; 2c+1 follows */
                const int4 *xq = (const int4 *)(x.qs + (int64_t)xb0 * 32);
                int4 x0a = __ldg(xq), x0b = __ldg(xq + 1), x1a = __ldg(xq + 2), x1b = __ldg(xq + 3);
                float2 dx = __ldg((const float2 *)(x.d + xb0)), sx = __ldg((const float2 *)(x.s + xb0));
                int s_lo = v3_dot8(qa[u], qb[u], x0a, x0b, 0);
                int s_hi = v3_dot8(qa[u], qb[u], x1a, x1b, 4);
                int sc0, m0, sc1, m1;
                v3_q4k_scale_min((uint32_t)hd[u].y, (uint32_t)hd[u].z, (uint32_t)hd[u].w, 2 * c, &sc0, &m0);
                v3_q4k_scale_min((uint32_t)hd[u].y, (uint32_t)hd[u].z, (uint32_t)hd[u].w, 2 * c + 1, &sc1, &m1);
                float d = exc_h2f((uint16_t)((uint32_t)hd[u].x & 0xFFFFu));
                float dmin = exc_h2f((uint16_t)((uint32_t)hd[u].x >> 16));
                acc += d * (dx.x * (float)(sc0 * s_lo) + dx.y * (float)(sc1 * s_hi)) -
                       dmin * ((float)m0 * sx.x + (float)m1 * sx.y);
            }
        }
    }
    acc = exc_warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

/* Persistent variant ("v3p", ATS_GEMV_KERNEL=v3p): a grid of resident blocks only; warp w of nw
 * takes rows w, w+nw, …; its work is a sequence of chunks (U tasks of one row) and the loads of
 * chunk k+1 are issued before chunk k is decoded (register double buffering), so a warp always has
 * a chunk in flight and no block launch or exit interrupts the stream. */
template <int U>
static __device__ __forceinline__ void v3p_q4k_load(const uint8_t *__restrict__ W, int64_t row, int nsb, int ch, int lane,
                                                    int4 *hd, int4 *qa, int4 *qb)
{
    const uint8_t *wr = W + row * (int64_t)nsb * EXC_Q4_K_BYTES;
    const int nt = nsb * 4;
#pragma unroll
    for (int u = 0; u < U; u++) {
        int t = ch * 32 * U + 32 * u + lane;
        if (t < nt) {
            const int4 *bp = (const int4 *)(wr + (t >> 2) * EXC_Q4_K_BYTES);
            int c = t & 3;
            hd[u] = __ldg(bp);
            qa[u] = __ldg(bp + 1 + 2 * c);
            qb[u] = __ldg(bp + 2 + 2 * c);
        }
    }
}

template <int U>
static __device__ __forceinline__ float v3p_q4k_dot(int nsb, int ch, int lane, const int4 *hd, const int4 *qa,
                                                    const int4 *qb, const exc_q8x &x)
{
    const int nt = nsb * 4;
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < U; u++) {
        int t = ch * 32 * U + 32 * u + lane;
        if (t < nt) {
            int c = t & 3;
            int xb0 = (t >> 2) * 8 + 2 * c;
            const int4 *xq = (const int4 *)(x.qs + (int64_t)xb0 * 32);
            int4 x0a = __ldg(xq), x0b = __ldg(xq + 1), x1a = __ldg(xq + 2), x1b = __ldg(xq + 3);
            float2 dx = __ldg((const float2 *)(x.d + xb0)), sx = __ldg((const float2 *)(x.s + xb0));
            int s_lo = v3_dot8(qa[u], qb[u], x0a, x0b, 0);
            int s_hi = v3_dot8(qa[u], qb[u], x1a, x1b, 4);
            int sc0, m0, sc1, m1;
            v3_q4k_scale_min((uint32_t)hd[u].y, (uint32_t)hd[u].z, (uint32_t)hd[u].w, 2 * c, &sc0, &m0);
            v3_q4k_scale_min((uint32_t)hd[u].y, (uint32_t)hd[u].z, (uint32_t)hd[u].w, 2 * c + 1, &sc1, &m1);
            float d = exc_h2f((uint16_t)((uint32_t)hd[u].x & 0xFFFFu));
            float dmin = exc_h2f((uint16_t)((uint32_t)hd[u].x >> 16));
            acc += d * (dx.x * (float)(sc0 * s_lo) + dx.y * (float)(sc1 * s_hi)) -
                   dmin * ((float)m0 * sx.x + (float)m1 * sx.y);
        }
    }
    return acc;
}

template <int U>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3p_q4k_kernel(const uint8_t *__restrict__ W, int64_t rows, int nsb, exc_q8x x, float *__restrict__ y)
{
    const int lane = threadIdx.x & 31;
    const int64_t nw = (int64_t)gridDim.x * V3_WARPS;
    int64_t r = (int64_t)blockIdx.x * V3_WARPS + (threadIdx.x >> 5);
    if (r >= rows) return;
    const int cpr = (nsb * 4 + 32 * U - 1) / (32 * U); /* chunks per row */
    int ch = 0;
    int4 hd0[U], qa0[U], qb0[U], hd1[U], qa1[U], qb1[U];
    v3p_q4k_load<U>(W, r, nsb, ch, lane, hd0, qa0, qb0);
    v3_pdl_wait(); /* x is complete from here on */
    float acc = 0.0f;
    for (;;) {
        int64_t rn = r;
        int chn = ch + 1;
        if (chn == cpr) { chn = 0; rn += nw; }
        const bool more = rn < rows;
        if (more) v3p_q4k_load<U>(W, rn, nsb, chn, lane, hd1, qa1, qb1);
        acc += v3p_q4k_dot<U>(nsb, ch, lane, hd0, qa0, qb0, x);
        if (ch == cpr - 1) {
            acc = exc_warp_sum(acc);
            if (lane == 0) y[r] = acc;
            acc = 0.0f;
        }
        if (!more) break;
#pragma unroll
        for (int u = 0; u < U; u++) { hd0[u] = hd1[u]; qa0[u] = qa1[u]; qb0[u] = qb1[u]; }
        r = rn;
        ch = chn;
    }
}

/* ---- Q4_0 ---------------------------------------------------------------------------------- */

#define V3_STEP_U4 36 /* 32 blocks of 18 bytes = 576 bytes = 36 uint4 */

template <int U>
static __global__ void __launch_bounds__(32 * V3_WARPS)
    gemv_v3_q4_0_kernel(const uint8_t *__restrict__ W, int64_t rows, int nb, exc_q8x x, float *__restrict__ y)
{
    __shared__ uint4 stage[V3_WARPS][U * V3_STEP_U4 + 1]; /* +1: the word reads run ≤ 2 bytes past */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = (int64_t)blockIdx.x * V3_WARPS + warp;
    if (row >= rows) return;
    const int row_u4 = nb * EXC_Q4_0_BYTES / 16; /* nb % 8 == 0: whole 16-byte chunks */
    const uint4 *wr = (const uint4 *)(W + row * (int64_t)nb * EXC_Q4_0_BYTES);
    uint4 *st = stage[warp];
    float acc = 0.0f;
    for (int c0 = 0; c0 < row_u4; c0 += U * V3_STEP_U4) { /* U steps of 32 blocks */
        uint4 a[U], b[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int i = c0 + u * V3_STEP_U4 + lane;
            if (i < row_u4) a[u] = __ldg(wr + i);
            if (lane < V3_STEP_U4 - 32 && i + 32 < row_u4) b[u] = __ldg(wr + i + 32);
        }
        if (c0 == 0) v3_pdl_wait();
        __syncwarp(); /* every lane is done reading the previous steps */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int i = c0 + u * V3_STEP_U4 + lane;
            if (i < row_u4) st[u * V3_STEP_U4 + lane] = a[u];
            if (lane < V3_STEP_U4 - 32 && i + 32 < row_u4) st[u * V3_STEP_U4 + 32 + lane] = b[u];
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < U; u++) {
            int blk = (c0 / V3_STEP_U4 + u) * 32 + lane; /* block index in the row */
            if (blk < nb) {
                /* block at byte 18·lane of the step: d at [a, a+2), qs words at a+2+4i; read as
                 * aligned words from a & ~3 (off = a & 3 ∈ {0, 2}) and shifted */
                const uint8_t *sb = (const uint8_t *)(st + u * V3_STEP_U4) + 18 * lane;
                int off = (18 * lane) & 2;
                const uint32_t *w = (const uint32_t *)(sb - off);
                uint32_t ww[5];
#pragma unroll
                for (int k = 0; k < 5; k++) ww[k] = w[k];
                const int4 *xq = (const int4 *)(x.qs + ((int64_t)blk) * 32);
                int4 xl = __ldg(xq), xh = __ldg(xq + 1);
                int xls[4] = {xl.x, xl.y, xl.z, xl.w}, xhs[4] = {xh.x, xh.y, xh.z, xh.w};
                int sumi = 0;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    int v = (int)(off ? ww[k + 1] : __funnelshift_r(ww[k], ww[k + 1], 16));
                    sumi = __dp4a(v & 0x0F0F0F0F, xls[k], sumi);
                    sumi = __dp4a((v >> 4) & 0x0F0F0F0F, xhs[k], sumi);
                }
                float d = exc_h2f((uint16_t)(off ? ww[0] >> 16 : ww[0] & 0xFFFFu));
                acc += d * (__ldg(x.d + blk) * (float)sumi - 8.0f * __ldg(x.s + blk));
            }
        }
    }
    acc = exc_warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

/* ---- launcher ------------------------------------------------------------------------------ */

/* ATS_GEMV_KERNEL: "v1" or "v2" turn v3 off; "v3p" selects the persistent Q4_K variant (read once).
 * Returns 0 (v3), 1 (off), 2 (v3p). */
static int v3_mode(void)
{
    static std::once_flag once;
    static int mode = 0;
    std::call_once(once, [] {
        const char *e = getenv("ATS_GEMV_KERNEL");
        if (e && (strcmp(e, "v1") == 0 || strcmp(e, "v2") == 0)) mode = 1;
        if (e && strcmp(e, "v3p") == 0) mode = 2;
    });
    return mode;
}

/* Resident blocks per SM of the persistent kernel (worked out once per device). */
template <typename K>
static int v3p_blocks_per_sm(K kernel, int device)
{
    static std::mutex mu;
    static int cached[16] = {0};
    std::lock_guard<std::mutex> lock(mu);
    int di = device >= 0 && device < 16 ? device : 15;
    if (!cached[di]) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, 32 * V3_WARPS, 0) != cudaSuccess || n < 1) {
            (void)cudaGetLastError();
            n = 1;
        }
        cached[di] = n;
    }
    return cached[di];
}

/* ATS_GEMV_V3_U = 2 | 4 | 8: loads in flight per lane (bench experiments; default V3_U). */
static int v3_unroll(void)
{
    static std::once_flag once;
    static int u = V3_U;
    std::call_once(once, [] {
        const char *e = getenv("ATS_GEMV_V3_U");
        if (e && (atoi(e) == 2 || atoi(e) == 4 || atoi(e) == 8)) u = atoi(e);
    });
    return u;
}

template <typename K>
static ex_gpu_status v3_launch(ex_gpu *g, K kernel, const void *W, int64_t rows, int n_units, exc_q8x q,
                               float *y, cudaStream_t s, int64_t max_blocks = 0)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    int64_t blocks = (rows + V3_WARPS - 1) / V3_WARPS;
    if (max_blocks > 0 && blocks > max_blocks) blocks = max_blocks;
    cfg.gridDim = dim3((unsigned)blocks);
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

/* Runs v3 when it covers the case (Q4_K; Q4_0 with cols % 256 == 0; rows < 2^31 blocks of 4; not
 * disabled): *used = 1. Otherwise *used = 0 and nothing is launched. W and x 16-byte aligned
 * (checked by the caller). */
ex_gpu_status exc_gemv_v3(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                          cudaStream_t s, int *used)
{
    *used = 0;
    const int mode = v3_mode();
    if (mode == 1 || rows > ((int64_t)1 << 32)) return EX_GPU_OK;
    if (!(type == ATS_Q_Q4_K || type == ATS_Q_Q4_0) || cols % 256 != 0 || cols > ((int64_t)1 << 30)) return EX_GPU_OK;
    int64_t nxb = cols / 32;
    size_t qbytes = ((size_t)cols + 255) & ~(size_t)255;
    void *ws;
    ex_gpu_status st = exc_workspace(g, EXC_WS_Q8X, qbytes + 2 * (size_t)nxb * sizeof(float), &ws);
    if (st) return st;
    exc_q8x q;
    q.qs = (int8_t *)ws;
    q.d = (float *)((uint8_t *)ws + qbytes);
    q.s = q.d + nxb;
    if ((st = exc_quantize_q8x(x, cols, 1, q, s))) return st;
    int u = v3_unroll();
    if (type == ATS_Q_Q4_K && mode == 2) {
        const ex_gpu_props *pr = ex_gpu_info(g);
        int64_t cap = (int64_t)pr->sm_count * (u == 4 ? v3p_blocks_per_sm(gemv_v3p_q4k_kernel<4>, pr->device)
                                                      : v3p_blocks_per_sm(gemv_v3p_q4k_kernel<2>, pr->device));
        st = u == 4 ? v3_launch(g, gemv_v3p_q4k_kernel<4>, W, rows, (int)(cols / 256), q, y, s, cap)
                    : v3_launch(g, gemv_v3p_q4k_kernel<2>, W, rows, (int)(cols / 256), q, y, s, cap);
    } else if (type == ATS_Q_Q4_K)
        st = u == 2   ? v3_launch(g, gemv_v3_q4k_kernel<2>, W, rows, (int)(cols / 256), q, y, s)
             : u == 8 ? v3_launch(g, gemv_v3_q4k_kernel<8>, W, rows, (int)(cols / 256), q, y, s)
                      : v3_launch(g, gemv_v3_q4k_kernel<V3_U>, W, rows, (int)(cols / 256), q, y, s);
    else
        st = u == 2   ? v3_launch(g, gemv_v3_q4_0_kernel<2>, W, rows, (int)(cols / 32), q, y, s)
             : u == 8 ? v3_launch(g, gemv_v3_q4_0_kernel<8>, W, rows, (int)(cols / 32), q, y, s)
                      : v3_launch(g, gemv_v3_q4_0_kernel<V3_U>, W, rows, (int)(cols / 32), q, y, s);
    if (st == EX_GPU_OK) *used = 1;
    return st;
}
