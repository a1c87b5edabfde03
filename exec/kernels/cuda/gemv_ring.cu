/*
 * Decode GEMV "ring" (gemv.cuh) for Q8_0 (up to 8192 columns), Q6_K (up to 2048 rows) and Q4_0 rows of a
 * column count that is not a multiple of 256, with one activation row: y (rows) = W (rows, cols) · x (cols),
 * int8 activations and __dp4a as the warp kernel (gemv.cu), in one launch and one wave:
 * - Persistent grid: blocks = (resident blocks per SM) × SMs at most; warp w of the W warps owns
 *   the contiguous rows [w·rows/W, (w+1)·rows/W), so every warp has the same work to ±1 row and no
 *   second wave leaves a latency-bound tail.
 * - Each block quantizes x itself into shared memory (same arithmetic as quantize_x.cu: d =
 *   amax/127, q = round(x/d), s = d·Σq, NaN-propagating), while its first weight chunks are in
 *   flight; no separate quantization kernel, no workspace.
 * - A warp streams its rows' bytes (one contiguous range) through a 9.5 KiB cp.async ring of S = 7-8
 *   stages of ~1.1-1.3 KiB chunks (two lane passes of 32 tasks; S-1 chunks, ~8 KiB, in flight while
 *   one is decoded), across row boundaries (rows > warps: several rows a warp).
 * - Shared-memory reads without bank conflicts where the layout allows: Q4_0/Q8_0 blocks (18/34
 *   bytes, 2-byte aligned) are read as aligned 32-bit words and shifted, and the two 16-byte
 *   activation halves are read in an order that puts the 8 lanes of a quarter-warp on distinct banks.
 * - Launched as a programmatic dependent (Hopper): the first chunks are requested before
 *   griddepcontrol.wait, so they overlap the end of the kernel that produced x; the kernel lets its
 *   own dependents launch early (they wait before reading y).
 */
#include "gemv.cuh"

#include <cuda_pipeline.h>

#include "ats/quant.h"

#define RING_U4 608 /* 9728 bytes of cp.async ring per warp */
#define RING_MAX_WARPS 8

/* Activations in shared memory: qs (cols int8), d and s (cols/32 floats each). */
struct ring_x {
    const int8_t *qs;
    const float *d, *s;
};

/* Two 16-byte halves of a 32-byte activation block, the first read chosen by `swap` so that the 8
 * lanes of a quarter-warp touch 8 distinct 16-byte bank groups. */
static __device__ __forceinline__ void ring_ld_x32(const int8_t *p, int swap, int *lo, int *hi)
{
    int4 a = *(const int4 *)(p + (swap ? 16 : 0));
    int4 b = *(const int4 *)(p + (swap ? 0 : 16));
    int4 l = swap ? b : a, h = swap ? a : b;
    lo[0] = l.x; lo[1] = l.y; lo[2] = l.z; lo[3] = l.w;
    hi[0] = h.x; hi[1] = h.y; hi[2] = h.z; hi[3] = h.w;
}

/* Q4_0: task = one block of 32 (18 bytes at a 2-byte aligned shared address): exc_q4_0_dot (common.cuh,
 * the block math of the rows and tma kernels: 5 aligned words from a & ~3, up to 2 bytes past the block, inside the
 * stage; (nibble - 8)·d·x = d·(dx·Σ q·xq - 8·s)), with this kernel's bank-conflict-free x order. */
struct ring_q4_0 {
    static constexpr int QK = 32, BYTES = EXC_Q4_0_BYTES, TPB = 1, NB = 64;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int t, const ring_x &x)
    {
        int xl[4], xh[4];
        ring_ld_x32(x.qs + b * 32, (t >> 2) & 1, xl, xh);
        return exc_q4_0_dot(bp, make_int4(xl[0], xl[1], xl[2], xl[3]), make_int4(xh[0], xh[1], xh[2], xh[3]),
                            make_float2(x.d[b], x.s[b]));
    }
};

/* Q8_0: task = one block of 32 (34 bytes, 2-byte aligned): 9 aligned words, as Q4_0. */
struct ring_q8_0 {
    static constexpr int QK = 32, BYTES = EXC_Q8_0_BYTES, TPB = 1, NB = 32;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int t, const ring_x &x)
    {
        uintptr_t a = (uintptr_t)bp;
        int off = (int)(a & 2u);
        const uint32_t *w = (const uint32_t *)(a - (uintptr_t)off);
        uint32_t ww[9];
#pragma unroll
        for (int i = 0; i < 9; i++) ww[i] = w[i];
        int xl[4], xh[4];
        ring_ld_x32(x.qs + b * 32, (t >> 2) & 1, xl, xh);
        int sumi = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int v = (int)(off ? ww[i + 1] : __funnelshift_r(ww[i], ww[i + 1], 16));
            sumi = __dp4a(v, i < 4 ? xl[i] : xh[i - 4], sumi);
        }
        float d = exc_h2f((uint16_t)(off ? ww[0] >> 16 : ww[0] & 0xFFFFu));
        return d * x.d[b] * (float)sumi;
    }
};


/* Q6_K: 16 tasks per super-block (210 bytes, 2-byte aligned), the weights unpacked as gemv.cu's task_q6_K
 * (exc_q6_K_task, gemv.cuh), the activations read from shared memory. */
struct ring_q6_K {
    static constexpr int QK = 256, BYTES = EXC_Q6_K_BYTES, TPB = 16, NB = 6;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int j, const ring_x &x)
    {
        int q[4], h, l0;
        const int8_t *S;
        exc_q6_K_task(bp, j, q, &S, &h, &l0);
        int64_t e0 = b * 256 + 128 * h + l0;
        float acc = 0.0f;
#pragma unroll
        for (int g = 0; g < 4; g++) {
            int xv = *(const int *)(x.qs + e0 + 32 * g);
            int sumi = __dp4a((int)__vsubss4((unsigned)q[g], 0x20202020u), xv, 0);
            acc += (float)(S[2 * g] * sumi) * x.d[(e0 >> 5) + g];
        }
        float d = exc_h2f(*(const uint16_t *)(bp + 208));
        return d * acc;
    }
};

static __device__ __forceinline__ void ring_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void ring_pdl_launch_dependents(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/* Geometry of a warp's chunk stream: chunk k is part k % cpr of row r0 + k / cpr; a row's nb
 * blocks are cut into cpr = ceil(nb/NB) chunks of nbc blocks (the last one shorter). */
struct ring_geom {
    int64_t row_bytes;
    int nb, cpr, nbc;
};

/* Copies part `part` of row `row` into `stage` (16-byte cp.async from the 16-byte boundary at or
 * below the chunk, so up to 15 bytes before/after it are copied too). */
template <typename T>
static __device__ __forceinline__ void ring_issue(uint4 *stage, const uint8_t *W, int64_t row, int part, const ring_geom &gm,
                                                int lane)
{
    int c0 = part * gm.nbc;
    int nblk = gm.nb - c0 < gm.nbc ? gm.nb - c0 : gm.nbc;
    const uint8_t *src = W + row * gm.row_bytes + (int64_t)c0 * T::BYTES;
    uintptr_t a = (uintptr_t)src & ~(uintptr_t)15;
    int n16 = ((int)((uintptr_t)src - a) + nblk * T::BYTES + 15) >> 4;
    const uint4 *gp = (const uint4 *)a;
    for (int i = lane; i < n16; i += 32) __pipeline_memcpy_async(stage + i, gp + i, 16);
}

/* x (cols floats, 16-byte aligned) → int8 blocks of 32 in shared memory. Each lane converts 4
 * consecutive values (one float4), 8 lanes a block; up to 8 float4 loads per lane in flight. */
static __device__ __forceinline__ void ring_quantize_x(const float *__restrict__ x, int64_t cols, int8_t *qs, float *d,
                                                     float *s)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int64_t n4 = cols / 4; /* a multiple of 8 */
    const int U = 8;
    for (int64_t f0 = (int64_t)warp * 32 * U; f0 < n4; f0 += (int64_t)nwarps * 32 * U) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t f = f0 + 32 * u + lane;
            v[u] = f < n4 ? __ldg((const float4 *)x + f) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t f = f0 + 32 * u + lane; /* whole 8-lane groups are in or out: n4 % 8 == 0 */
            float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
            int bad = 0;
            float amax = 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                bad |= !(fabsf(e[i]) <= 3.4e38f);
                amax = fmaxf(amax, fabsf(e[i]));
            }
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) {
                bad |= __shfl_xor_sync(0xffffffffu, bad, o);
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            }
            if (bad) amax = 0.0f; /* as quantize_x.cu: the block's scale becomes NaN below */
            float db = amax / 127.0f;
            int q[4], sum = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                q[i] = amax > 0.0f && !bad ? __float2int_rn(e[i] / db) : 0;
                sum += q[i];
            }
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if (bad) db = __int_as_float(0x7fc00000);
            if (f < n4) {
                uint32_t packed = (uint32_t)(uint8_t)q[0] | ((uint32_t)(uint8_t)q[1] << 8) |
                                  ((uint32_t)(uint8_t)q[2] << 16) | ((uint32_t)(uint8_t)q[3] << 24);
                *(uint32_t *)(qs + 4 * f) = packed;
                if ((lane & 7) == 0) {
                    d[f / 8] = db;
                    s[f / 8] = db * (float)sum;
                }
            }
        }
    }
}

/* Shared memory of a block: x (qs rounded up to 16 bytes, then d and s, rounded up to 16), then
 * a ring of RING_U4 uint4 per warp (STAGES stages of STAGE_U4, both per type). */
static __host__ __device__ __forceinline__ size_t ring_x_bytes(int64_t cols)
{
    size_t q = ((size_t)cols + 15) & ~(size_t)15;
    return q + ((2 * (size_t)(cols / 32) * sizeof(float) + 15) & ~(size_t)15);
}
static size_t ring_smem_bytes(int64_t cols, int warps)
{
    return ring_x_bytes(cols) + (size_t)warps * RING_U4 * 16;
}

template <typename T>
static __global__ void __launch_bounds__(32 * RING_MAX_WARPS)
    gemv_ring_kernel(const uint8_t *__restrict__ W, int64_t rows, int64_t cols, const float *__restrict__ x,
                     float *__restrict__ y)
{
    /* a stage holds a chunk of NB blocks, the up to 15 bytes before it (16-byte copies) and the
     * up to 4 bytes the word reads of Q4_0/Q8_0 go past its last block */
    constexpr int STAGE_U4 = (T::NB * T::BYTES + 15 + 4 + 15) / 16, STAGES = RING_U4 / STAGE_U4;
    static_assert(STAGES >= 3, "at least two chunks in flight");
    static_assert(T::NB % (32 / T::TPB) == 0, "chunks of whole lane passes");
    extern __shared__ __align__(16) uint4 ring_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int8_t *xqs = (int8_t *)ring_smem;
    float *xd = (float *)(xqs + (((size_t)cols + 15) & ~(size_t)15));
    float *xs = xd + cols / 32;
    uint4 *ring = (uint4 *)((uint8_t *)ring_smem + ring_x_bytes(cols)) + (size_t)warp * RING_U4;

    ring_geom gm;
    gm.nb = (int)(cols / T::QK);
    gm.row_bytes = (int64_t)gm.nb * T::BYTES;
    gm.cpr = (gm.nb + T::NB - 1) / T::NB;
    gm.nbc = (gm.nb + gm.cpr - 1) / gm.cpr;
    /* whole passes of the 32 lanes where the stage allows (NB is a multiple of 32/TPB, and
     * nbc·(cpr-1) ≤ NB·(cpr-1) < nb keeps exactly cpr non-empty chunks) */
    gm.nbc = (gm.nbc + 32 / T::TPB - 1) / (32 / T::TPB) * (32 / T::TPB);
    if (gm.nbc > T::NB) gm.nbc = T::NB;
    const int64_t nw = (int64_t)gridDim.x * nwarps, gw = (int64_t)blockIdx.x * nwarps + warp;
    const int64_t r0 = gw * rows / nw, r1 = (gw + 1) * rows / nw;
    const int K = (int)(r1 - r0) * gm.cpr;

    /* prologue: the first S-1 chunks (weights do not depend on the previous kernel). (ri, pi):
     * row and part of the next chunk to copy, (rc, pc) of the chunk to decode. */
    int64_t ri = r0;
    int pi = 0;
#pragma unroll
    for (int k = 0; k < STAGES - 1; k++) {
        if (k < K) {
            ring_issue<T>(ring + k * STAGE_U4, W, ri, pi, gm, lane);
            if (++pi == gm.cpr) { pi = 0; ri++; }
        }
        __pipeline_commit();
    }
    ring_pdl_wait(); /* x is complete from here on */
    ring_pdl_launch_dependents();
    ring_quantize_x(x, cols, xqs, xd, xs);
    __syncthreads();
    const ring_x xv = {xqs, xd, xs};

    float acc = 0.0f;
    int64_t rc = r0;
    int pc = 0, si = STAGES - 1, sc = 0; /* stage indices of the next copy and of the decode */
    for (int k = 0; k < K; k++) {
        if (k + STAGES - 1 < K) {
            ring_issue<T>(ring + si * STAGE_U4, W, ri, pi, gm, lane);
            if (++pi == gm.cpr) { pi = 0; ri++; }
        }
        si = si + 1 == STAGES ? 0 : si + 1;
        __pipeline_commit();
        __pipeline_wait_prior(STAGES - 1);
        __syncwarp(); /* every lane's copies of chunk k have landed */
        int c0 = pc * gm.nbc;
        int nblk = gm.nb - c0 < gm.nbc ? gm.nb - c0 : gm.nbc;
        const uint8_t *src = W + rc * gm.row_bytes + (int64_t)c0 * T::BYTES;
        const uint8_t *base = (const uint8_t *)(ring + sc * STAGE_U4) + ((uintptr_t)src & 15u);
        int nt = nblk * T::TPB;
#pragma unroll 2
        for (int t = lane; t < nt; t += 32) acc += T::dot(base + (t / T::TPB) * T::BYTES, c0 + t / T::TPB, t % T::TPB, xv);
        __syncwarp(); /* done reading this stage before it is refilled */
        sc = sc + 1 == STAGES ? 0 : sc + 1;
        if (++pc == gm.cpr) {
            acc = exc_warp_sum(acc);
            if (lane == 0) y[rc] = acc;
            acc = 0.0f;
            pc = 0;
            rc++;
        }
    }
}

template <typename T> static const void *ring_kernel(void) { return (const void *)gemv_ring_kernel<T>; }

/* The kernel of a type (NULL: no ring kernel for it). */
static const void *ring_fn(int type)
{
    switch (type) {
    case ATS_Q_Q4_0: return ring_kernel<ring_q4_0>();
    case ATS_Q_Q8_0: return ring_kernel<ring_q8_0>();
    case ATS_Q_Q6_K: return ring_kernel<ring_q6_K>();
    default: return NULL;
    }
}

/* Raises the three kernels' dynamic shared memory limit to the device's opt-in maximum, once per handle
 * (the same value for every shape, so no call lowers it under a launch in progress). */
void exc_gemv_ring_init(exc_gemv_dev *d)
{
    const int types[3] = {ATS_Q_Q4_0, ATS_Q_Q8_0, ATS_Q_Q6_K};
    d->ring_ok = d->smem_optin > 0;
    for (int i = 0; i < 3 && d->ring_ok; i++)
        d->ring_ok = cudaFuncSetAttribute(ring_fn(types[i]), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          d->smem_optin) == cudaSuccess;
    (void)cudaGetLastError();
}

/* The launch geometry of (type, cols) on this device, from the handle's table (filled on first use): 8 warps
 * per block, or 4 where 8 warps' stages do not fit (Ampere/Ada, very long rows); warps = 0 when neither
 * does. A failed occupancy query is not kept (the next call retries). */
static exc_gemv_ring_cfg ring_config(exc_gemv_dev *d, int type, int64_t cols)
{
    for (int i = 0; i < d->n_ring; i++)
        if (d->ring[i].type == type && d->ring[i].cols == cols) return d->ring[i];
    exc_gemv_ring_cfg c = {type, cols, 0, 0, 0};
    if (!d->ring_ok) return c;
    for (int warps = RING_MAX_WARPS; warps >= 4; warps /= 2) {
        size_t smem = ring_smem_bytes(cols, warps);
        if (smem > (size_t)d->smem_optin) continue;
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ring_fn(type), 32 * warps, smem) != cudaSuccess) {
            (void)cudaGetLastError();
            return c;
        }
        if (per_sm < 1) continue;
        c.warps = warps;
        c.per_sm = per_sm;
        c.smem = smem;
        break;
    }
    if (d->n_ring < EXC_GEMV_RING_CFGS) d->ring[d->n_ring++] = c;
    return c;
}

int exc_gemv_ring_fits(exc_gemv_dev *d, int type, int64_t rows, int64_t cols)
{
    const int qk = type == ATS_Q_Q6_K ? 256 : 32;
    if (!ring_fn(type) || cols % qk != 0 || rows > ((int64_t)1 << 30) || cols > ((int64_t)1 << 30)) return 0;
    return ring_config(d, type, cols).warps > 0;
}

template <typename T>
static ex_gpu_status launch_ring(ex_gpu *g, const exc_gemv_ring_cfg &c, const void *W, int64_t rows, int64_t cols,
                               const float *x, float *y, cudaStream_t s)
{
    const exc_gemv_dev *d = exc_gemv_state(g);
    /* balance: q = ceil(rows / resident warps) rows per warp, then just enough warps for that
     * (ceil(rows / q)), so that nearly every warp gets q rows rather than a mix of floor and ceil
     * of a fraction (e.g. 17408 rows on 2112 warps: 8 or 9 rows, the 9-row warps alone for the
     * last 11% of the time; on 1935 warps: 9 rows nearly everywhere) */
    int64_t wmax = (int64_t)c.per_sm * d->sm_count * c.warps;
    int64_t q = (rows + wmax - 1) / wmax, nw = (rows + q - 1) / q;
    int64_t blocks = (nw + c.warps - 1) / c.warps;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)blocks);
    cfg.blockDim = dim3(32 * c.warps);
    cfg.dynamicSmemBytes = c.smem;
    cfg.stream = s;
    if (d->cc_major >= 9) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    EXC_CUDA(cudaLaunchKernelEx(&cfg, gemv_ring_kernel<T>, (const uint8_t *)W, rows, cols, x, y));
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

/* Runs the ring kernel; the caller checked exc_gemv_ring_fits. */
ex_gpu_status exc_gemv_ring(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                            cudaStream_t s)
{
    const exc_gemv_ring_cfg c = ring_config(exc_gemv_state(g), type, cols);
    if (c.warps == 0) return EX_GPU_EINVAL;
    switch (type) {
    case ATS_Q_Q4_0: return launch_ring<ring_q4_0>(g, c, W, rows, cols, x, y, s);
    case ATS_Q_Q8_0: return launch_ring<ring_q8_0>(g, c, W, rows, cols, x, y, s);
    case ATS_Q_Q6_K: return launch_ring<ring_q6_K>(g, c, W, rows, cols, x, y, s);
    default: return EX_GPU_EINVAL;
    }
}
