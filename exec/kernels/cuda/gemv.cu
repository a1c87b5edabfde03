/*
 * Decode GEMV y = W·x (ex_cuda_gemv, exc_gemv_batched): the dispatch table (gemv_pick) and the "warp"
 * kernel. The table picks exactly one kernel of gemv.cuh for each weight type, architecture class and
 * shape class, the one measured fastest on the H200 (README.md, "Decode GEMV"; experiments/kernels/):
 *
 *   type    shape (one matrix, one activation row)       sm_90 (tma kernels have sm_90 code)   other
 *   Q4_0    cols % 256 != 0                              ring                                  ring
 *           cols <= 8192                                 tma                                   as below
 *           cols >= 2·rows (few long rows: ffn_down)     rows1                                 rows1
 *           otherwise                                    rows2                                 rows2
 *   Q4_K    cols <= 8192                                 tma                                   rows2
 *           otherwise                                    rows2                                 rows2
 *   Q8_0    cols <= 8192                                 ring                                  ring
 *           cols > 8192 (ffn_down)                       warp                                  warp
 *   Q6_K    rows > 2048                                  rows2                                 rows2
 *           rows <= 2048                                 ring                                  ring
 *   MXFP4, F16, BF16, F32                                warp                                  warp
 *   any type, several activation rows or matrices (matmul of 2..8 tokens, FFN, MoE experts): warp
 *
 * A kernel whose shared memory does not fit the device (ring, tma) or whose index range the shape exceeds
 * hands the shape to the next one in its row (tma → rows, ring → warp).
 *
 * The warp kernel: one warp per output row, four rows per thread block; a row is cut into "tasks" (a weight
 * block or a fixed part of one) that the 32 lanes take in turn, so consecutive lanes read consecutive bytes
 * of the row. Quantized types meet int8 activations (exc_q8x, blocks of 32) through __dp4a, as ggml's mmvq
 * does; the float types use 16-byte loads and F32 FMAs. Block layouts: ../shared/models/QUANT_FORMATS.md §2.
 */
#include "gemv.cuh"

#include <cuda_pipeline.h>
#include <string.h>

#include "ats/quant.h"

#define ROWS_PER_BLOCK 4
#define GEMV_WIDE_COLS 8192 /* rows wider than this: every block of tma / ring quantizing all of x costs more
                             * than it saves (H200: Q4_0/Q4_K 17408 columns 5-7% slower with tma than rows1 /
                             * rows2; Q8_0 17408 -> 5120 ring 37.3 us, warp 31.5 us) */
#define GEMV_Q6K_ROWS2_MIN 2048 /* Q6_K: rows2 above this many rows, ring at or below (H200: 1024 rows ring
                                 * 7.3 us, rows2 8.8 us; 5120 rows ring 17.9 us, rows2 16.0 us) */

/* ---- one task of each quantized type: returns its part of the row's dot product -------------- */

/* Q4_0: task = one block of 32. (nibble - 8)·d·x = d·(dx·Σ q·xq - 8·s). */
struct task_q4_0 {
    static constexpr int QK = 32, BYTES = EXC_Q4_0_BYTES, TPB = 1, NB = 128;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int, const exc_q8x &x)
    {
        const int4 *xq = (const int4 *)(x.qs + b * 32);
        int4 xa = __ldg(xq), xb = __ldg(xq + 1);
        int xs_lo[4] = {xa.x, xa.y, xa.z, xa.w}, xs_hi[4] = {xb.x, xb.y, xb.z, xb.w};
        int sumi = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int v = exc_ld_u16x2(bp + 2 + 4 * i);
            sumi = __dp4a(v & 0x0F0F0F0F, xs_lo[i], sumi);
            sumi = __dp4a((v >> 4) & 0x0F0F0F0F, xs_hi[i], sumi);
        }
        float d = exc_h2f(*(const uint16_t *)bp);
        return d * (__ldg(x.d + b) * (float)sumi - 8.0f * __ldg(x.s + b));
    }
};

/* Q8_0: task = one block of 32. */
struct task_q8_0 {
    static constexpr int QK = 32, BYTES = EXC_Q8_0_BYTES, TPB = 1, NB = 64;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int, const exc_q8x &x)
    {
        const int4 *xq = (const int4 *)(x.qs + b * 32);
        int4 xa = __ldg(xq), xb = __ldg(xq + 1);
        int xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
        int sumi = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) sumi = __dp4a(exc_ld_u16x2(bp + 2 + 4 * i), xs[i], sumi);
        float d = exc_h2f(*(const uint16_t *)bp);
        return d * __ldg(x.d + b) * (float)sumi;
    }
};


/* Q4_K: 8 tasks per super-block; task j = (chunk c = j/2, half h = j%2) reads qs[32c+16h .. +15]:
 * low nibbles are elements 16h..16h+15 of sub-block 2c, high nibbles the same of sub-block 2c+1.
 * value = d·sc·q - dmin·m  →  d·sc·dx·Σ q·xq - dmin·m·dx·Σ xq (per sub-block half). */
struct task_q4_K {
    static constexpr int QK = 256, BYTES = EXC_Q4_K_BYTES, TPB = 8, NB = 16;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int j, const exc_q8x &x)
    {
        int c = j >> 1, h = j & 1;
        int4 w = *(const int4 *)(bp + 16 + 32 * c + 16 * h);
        int64_t xb_lo = b * 8 + 2 * c, xb_hi = xb_lo + 1;
        int4 xl = __ldg((const int4 *)(x.qs + xb_lo * 32 + 16 * h));
        int4 xh = __ldg((const int4 *)(x.qs + xb_hi * 32 + 16 * h));
        int ws[4] = {w.x, w.y, w.z, w.w}, xls[4] = {xl.x, xl.y, xl.z, xl.w}, xhs[4] = {xh.x, xh.y, xh.z, xh.w};
        int s_lo = 0, s_hi = 0, n_lo = 0, n_hi = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s_lo = __dp4a(ws[i] & 0x0F0F0F0F, xls[i], s_lo);
            s_hi = __dp4a((ws[i] >> 4) & 0x0F0F0F0F, xhs[i], s_hi);
            n_lo = __dp4a(0x01010101, xls[i], n_lo);
            n_hi = __dp4a(0x01010101, xhs[i], n_hi);
        }
        /* 6-bit scales and mins of sub-blocks k0 = 2c and k1 = 2c+1 (QUANT_FORMATS.md §Q4_K) */
        const uint32_t *sp = (const uint32_t *)(bp + 4);
        uint32_t s0 = sp[0], s1 = sp[1], s2 = sp[2];
        int sc0, m0, sc1, m1;
        exc_q4k_scale_min(s0, s1, s2, 2 * c, &sc0, &m0);
        exc_q4k_scale_min(s0, s1, s2, 2 * c + 1, &sc1, &m1);
        uint32_t dd = *(const uint32_t *)bp;
        float d = exc_h2f((uint16_t)dd), dmin = exc_h2f((uint16_t)(dd >> 16));
        float dx0 = __ldg(x.d + xb_lo), dx1 = __ldg(x.d + xb_hi);
        return d * (dx0 * (float)(sc0 * s_lo) + dx1 * (float)(sc1 * s_hi)) -
               dmin * (dx0 * (float)(m0 * n_lo) + dx1 * (float)(m1 * n_hi));
    }
};

/* Q6_K: 16 tasks per super-block; task j makes 16 values, 4 in each of 4 groups with their scales
 * (exc_q6_K_task, gemv.cuh). */
struct task_q6_K {
    static constexpr int QK = 256, BYTES = EXC_Q6_K_BYTES, TPB = 16, NB = 10;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int j, const exc_q8x &x)
    {
        int q[4], h, l0;
        const int8_t *S;
        exc_q6_K_task(bp, j, q, &S, &h, &l0);
        int64_t e0 = b * 256 + 128 * h + l0;
        float acc = 0.0f;
#pragma unroll
        for (int g = 0; g < 4; g++) {
            int xv = __ldg((const int *)(x.qs + e0 + 32 * g));
            int sumi = __dp4a((int)__vsubss4((unsigned)q[g], 0x20202020u), xv, 0);
            acc += (float)(S[2 * g] * sumi) * __ldg(x.d + (e0 >> 5) + g);
        }
        float d = exc_h2f(*(const uint16_t *)(bp + 208));
        return d * acc;
    }
};

/* MXFP4: task = one block of 32; E2M1 codes → doubled int8 magnitudes {0,1,2,3,4,6,8,12} by byte
 * permutation, sign from bit 3; scale 2^(e-128) (the doubling undone). */
static __device__ __forceinline__ int mxfp4_codes_to_i8(int n /* 4 codes, one per byte */)
{
    uint32_t sel = (n & 7) | ((n >> 4) & 0x70) | ((n >> 8) & 0x700) | ((n >> 12) & 0x7000);
    uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);
    uint32_t neg = __vsub4(0u, mag);
    uint32_t m = ((uint32_t)(n >> 3) & 0x01010101u) * 0xFFu;
    return (int)((mag & ~m) | (neg & m));
}
struct task_mxfp4 {
    static constexpr int QK = 32, BYTES = EXC_MXFP4_BYTES, TPB = 1, NB = 128;
    static __device__ __forceinline__ float dot(const uint8_t *bp, int64_t b, int, const exc_q8x &x)
    {
        const int4 *xq = (const int4 *)(x.qs + b * 32);
        int4 xa = __ldg(xq), xb = __ldg(xq + 1);
        int xs_lo[4] = {xa.x, xa.y, xa.z, xa.w}, xs_hi[4] = {xb.x, xb.y, xb.z, xb.w};
        int sumi = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int v = exc_ld_u8x4(bp + 1 + 4 * i);
            sumi = __dp4a(mxfp4_codes_to_i8(v & 0x0F0F0F0F), xs_lo[i], sumi);
            sumi = __dp4a(mxfp4_codes_to_i8((v >> 4) & 0x0F0F0F0F), xs_hi[i], sumi);
        }
        float scale = 0.5f * ex_e8m0_to_f32(bp[0]);
        return scale * __ldg(x.d + b) * (float)sumi;
    }
};

/* Batched form: grid.y = z indexes (matrix, x row, y row) triples: matrix ids ? ids[z] : z·mat_z
 * (mat_z 0 or 1), activation row x_div ? z / x_div : 0, output row z. */
struct gemv_batch {
    const int32_t *ids;  /* device, (n_z) matrix of each z, or NULL */
    int mat_z, x_div;
    int64_t mat_bytes;   /* bytes of one matrix */
};

/* Each warp walks its row in chunks of T::NB blocks (~2 KiB), double-buffered in its slice of
 * shared memory: chunk k+1 is copied with 16-byte asynchronous copies (cp.async, coalesced) while
 * the lanes decode chunk k. The chunk window starts at the 16-byte boundary at or below the chunk
 * (rows of 18/34/17/210-byte blocks need not be aligned), so it may read up to 15 bytes past the
 * row's end: the next row's bytes, or for the last row the rest of the allocation's 256-byte
 * granule (cudaMalloc).
 * On Hopper the kernel is launched as a programmatic dependent of the activation quantization
 * (PDL): it starts early, issues its first weight copies, and only then waits (griddepcontrol.wait)
 * for the quantized activations, so the small quantize kernel and the launch gap are hidden. */
#define STAGE_U4 152

static __device__ __forceinline__ void pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <typename T>
static __device__ __forceinline__ int stage_chunk(uint4 *sm, const uint8_t *wr, int64_t nb, int64_t c0, int lane)
{
    int nblk = nb - c0 < T::NB ? (int)(nb - c0) : T::NB;
    const uint8_t *src = wr + c0 * T::BYTES;
    uintptr_t a = (uintptr_t)src & ~(uintptr_t)15;
    int delta = (int)((uintptr_t)src - a);
    int n16 = (delta + nblk * T::BYTES + 15) >> 4;
    const uint4 *gp = (const uint4 *)a;
    for (int i = lane; i < n16; i += 32) __pipeline_memcpy_async(sm + i, gp + i, 16);
    __pipeline_commit();
    return delta; /* offset of the chunk's first byte in the stage */
}

template <typename T>
static __global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
    gemv_q_kernel(const uint8_t *__restrict__ W, int64_t rows, int64_t cols, exc_q8x x, float *__restrict__ y,
                  gemv_batch bt)
{
    static_assert((T::NB * T::BYTES + 15) / 16 + 1 <= STAGE_U4, "chunk larger than the stage");
    static_assert((T::NB * T::TPB) % 32 == 0, "tasks of a chunk spread evenly over the lanes");
    __shared__ __align__(16) uint4 stage[ROWS_PER_BLOCK][2][STAGE_U4];
    int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.y;
    int z = blockIdx.y, lane = threadIdx.x;
    if (row >= rows) { /* whole warp; only __syncwarp below */
        pdl_wait();
        return;
    }
    int64_t mat = bt.ids ? (int64_t)__ldg(bt.ids + z) : (int64_t)z * bt.mat_z;
    int64_t nb = cols / T::QK;
    const uint8_t *wr = W + mat * bt.mat_bytes + row * nb * T::BYTES;
    int64_t xo = (bt.x_div ? (int64_t)(z / bt.x_div) : 0) * cols; /* this z's activation row */
    exc_q8x xz = {x.qs + xo, x.d + xo / 32, x.s + xo / 32};
    uint4 (*sm)[STAGE_U4] = stage[threadIdx.y];
    int delta0 = stage_chunk<T>(sm[0], wr, nb, 0, lane), delta1 = 0;
    pdl_wait(); /* the activations (and ids) are ready from here on */
    float acc = 0.0f;
    int buf = 0;
    for (int64_t c0 = 0; c0 < nb; c0 += T::NB, buf ^= 1) {
        int more = c0 + T::NB < nb;
        if (more) {
            int d = stage_chunk<T>(sm[buf ^ 1], wr, nb, c0 + T::NB, lane);
            if (buf) delta0 = d;
            else delta1 = d;
        }
        if (more) __pipeline_wait_prior(1);
        else __pipeline_wait_prior(0);
        __syncwarp(); /* every lane's copies of chunk c0 have landed */
        int nblk = nb - c0 < T::NB ? (int)(nb - c0) : T::NB;
        const uint8_t *base = (const uint8_t *)sm[buf] + (buf ? delta1 : delta0);
        int nt = nblk * T::TPB;
#pragma unroll 2
        for (int t = lane; t < nt; t += 32) acc += T::dot(base + (t / T::TPB) * T::BYTES, c0 + t / T::TPB, t % T::TPB, xz);
        __syncwarp(); /* done reading this buffer before it is refilled */
    }
    acc = exc_warp_sum(acc);
    if (lane == 0) y[(int64_t)z * rows + row] = acc;
}

/* ---- float weights ---------------------------------------------------------------------------- */
template <int TYPE> struct wload;
template <> struct wload<ATS_Q_F32> {
    static constexpr int VEC = 4;
    static __device__ __forceinline__ void vec(const void *p, float *o)
    {
        float4 v = __ldcs((const float4 *)p);
        o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
    }
    static __device__ __forceinline__ float one(const void *p, int64_t i) { return __ldg((const float *)p + i); }
    static constexpr int ESIZE = 4;
};
template <> struct wload<ATS_Q_F16> {
    static constexpr int VEC = 8;
    static __device__ __forceinline__ void vec(const void *p, float *o)
    {
        uint4 v = __ldcs((const uint4 *)p);
        uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 f = __half22float2(*(const __half2 *)&u[i]);
            o[2 * i] = f.x; o[2 * i + 1] = f.y;
        }
    }
    static __device__ __forceinline__ float one(const void *p, int64_t i) { return exc_h2f(__ldg((const uint16_t *)p + i)); }
    static constexpr int ESIZE = 2;
};
template <> struct wload<ATS_Q_BF16> {
    static constexpr int VEC = 8;
    static __device__ __forceinline__ void vec(const void *p, float *o)
    {
        uint4 v = __ldcs((const uint4 *)p);
        uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = __uint_as_float(u[i] << 16);
            o[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
        }
    }
    static __device__ __forceinline__ float one(const void *p, int64_t i) { return exc_bf2f(__ldg((const uint16_t *)p + i)); }
    static constexpr int ESIZE = 2;
};

template <int TYPE>
static __global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
    gemv_f_kernel(const uint8_t *__restrict__ W, int64_t rows, int64_t cols, const float *__restrict__ x,
                  float *__restrict__ y, int vec_ok, gemv_batch bt)
{
    typedef wload<TYPE> L;
    int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.y;
    if (row >= rows) return;
    int z = blockIdx.y;
    int64_t mat = bt.ids ? (int64_t)__ldg(bt.ids + z) : (int64_t)z * bt.mat_z;
    const uint8_t *wr = W + mat * bt.mat_bytes + row * cols * L::ESIZE;
    x += (bt.x_div ? (int64_t)(z / bt.x_div) : 0) * cols;
    y += (int64_t)z * rows;
    float acc = 0.0f;
    if (vec_ok) {
        const int64_t step = 32 * L::VEC;
        for (int64_t c0 = (int64_t)threadIdx.x * L::VEC; c0 < cols; c0 += 4 * step) {
            float w[4][L::VEC];
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (c0 + k * step < cols) L::vec(wr + (c0 + k * step) * L::ESIZE, w[k]);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int64_t c = c0 + k * step;
                if (c >= cols) break;
#pragma unroll
                for (int i = 0; i < L::VEC; i += 4) {
                    float4 xv = __ldg((const float4 *)(x + c + i));
                    acc += w[k][i] * xv.x + w[k][i + 1] * xv.y + w[k][i + 2] * xv.z + w[k][i + 3] * xv.w;
                }
            }
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += 32) acc += L::one(wr, c) * __ldg(x + c);
    }
    acc = exc_warp_sum(acc);
    if (threadIdx.x == 0) y[row] = acc;
}

template <typename T>
static ex_gpu_status launch_q(ex_gpu *g, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                              int n_z, gemv_batch bt, cudaStream_t s)
{
    if (cols % T::QK != 0) return EX_GPU_EINVAL;
    int64_t n_x = bt.x_div ? (n_z + bt.x_div - 1) / bt.x_div : 1;
    exc_q8x q;
    ex_gpu_status st = exc_quantize_q8x_ws(g, x, cols, n_x, s, &q);
    if (st) return st;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK), (unsigned)n_z);
    cfg.blockDim = dim3(32, ROWS_PER_BLOCK);
    cfg.stream = s;
    if (exc_cc_major(g) >= 9) { /* programmatic dependent launch after the quantize kernel */
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    EXC_CUDA(cudaLaunchKernelEx(&cfg, gemv_q_kernel<T>, (const uint8_t *)W, rows, cols, q, y, bt));
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

template <int TYPE>
static ex_gpu_status launch_f(const void *W, int64_t rows, int64_t cols, const float *x, float *y, int n_z,
                              gemv_batch bt, cudaStream_t s)
{
    typedef wload<TYPE> L;
    int vec_ok = cols % L::VEC == 0 && ((uintptr_t)W % 16) == 0 && ((uintptr_t)x % 16) == 0 &&
                 ((size_t)cols * L::ESIZE) % 16 == 0 && bt.mat_bytes % 16 == 0;
    dim3 block(32, ROWS_PER_BLOCK), grid((unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK), (unsigned)n_z);
    gemv_f_kernel<TYPE><<<grid, block, 0, s>>>((const uint8_t *)W, rows, cols, x, y, vec_ok, bt);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

/* The table (see the top of this file). */
static exc_gemv_kind gemv_pick(exc_gemv_dev *d, int type, int64_t rows, int64_t cols)
{
    switch (type) {
    case ATS_Q_Q4_0:
        if (cols % 256 != 0) return exc_gemv_ring_fits(d, type, rows, cols) ? EXC_GEMV_RING : EXC_GEMV_WARP;
        if (cols <= GEMV_WIDE_COLS && exc_gemv_tma_fits(d, type, rows, cols)) return EXC_GEMV_TMA;
        if (!exc_gemv_rows_fits(type, rows, cols)) return EXC_GEMV_WARP;
        return cols >= 2 * rows ? EXC_GEMV_ROWS1 : EXC_GEMV_ROWS2;
    case ATS_Q_Q4_K:
        if (cols <= GEMV_WIDE_COLS && exc_gemv_tma_fits(d, type, rows, cols)) return EXC_GEMV_TMA;
        return exc_gemv_rows_fits(type, rows, cols) ? EXC_GEMV_ROWS2 : EXC_GEMV_WARP;
    case ATS_Q_Q8_0:
        if (cols > GEMV_WIDE_COLS) return EXC_GEMV_WARP;
        return exc_gemv_ring_fits(d, type, rows, cols) ? EXC_GEMV_RING : EXC_GEMV_WARP;
    case ATS_Q_Q6_K:
        if (rows > GEMV_Q6K_ROWS2_MIN && exc_gemv_rows_fits(type, rows, cols)) return EXC_GEMV_ROWS2;
        return exc_gemv_ring_fits(d, type, rows, cols) ? EXC_GEMV_RING : EXC_GEMV_WARP;
    default: return EXC_GEMV_WARP;
    }
}

void exc_gemv_dev_init(exc_gemv_dev *d, const ex_gpu_props *pr)
{
    memset(d, 0, sizeof *d);
    d->sm_count = pr->sm_count;
    d->cc_major = pr->cc_major;
    if (cudaDeviceGetAttribute(&d->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, pr->device) != cudaSuccess)
        d->smem_optin = 0;
    (void)cudaGetLastError();
    exc_gemv_ring_init(d);
    exc_gemv_tma_init(d);
}

ex_gpu_status exc_gemv_batched(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, int64_t mat_bytes,
                               const int32_t *ids, int mat_z, int x_div, int n_z, const float *x, float *y,
                               cudaStream_t s)
{
    if (!g || !W || !x || !y || rows < 1 || cols < 1 || n_z < 1 || n_z > 65535) return EX_GPU_EINVAL;
    if ((uintptr_t)W % 16 != 0 || (uintptr_t)x % 16 != 0) return EX_GPU_EINVAL; /* 16-byte loads */
    const int qk = ats_qtype_block_elems((ats_qtype)type);
    if (qk == 0 || cols % qk != 0) return EX_GPU_EINVAL;
    gemv_batch bt = {ids, mat_z, x_div, mat_bytes};
    if (n_z == 1 && !ids) { /* one matrix, one activation row: the table */
        switch (gemv_pick(exc_gemv_state(g), type, rows, cols)) {
        case EXC_GEMV_RING: return exc_gemv_ring(g, type, W, rows, cols, x, y, s);
        case EXC_GEMV_ROWS2: return exc_gemv_rows(g, type, 0, W, rows, cols, x, y, s);
        case EXC_GEMV_ROWS1: return exc_gemv_rows(g, type, 1, W, rows, cols, x, y, s);
        case EXC_GEMV_TMA: return exc_gemv_tma(g, type, W, rows, cols, x, y, s);
        case EXC_GEMV_WARP: break;
        }
    }
    switch (type) {
    case ATS_Q_Q4_0: return launch_q<task_q4_0>(g, W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_Q8_0: return launch_q<task_q8_0>(g, W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_Q4_K: return launch_q<task_q4_K>(g, W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_Q6_K: return launch_q<task_q6_K>(g, W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_MXFP4: return launch_q<task_mxfp4>(g, W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_F32: return launch_f<ATS_Q_F32>(W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_F16: return launch_f<ATS_Q_F16>(W, rows, cols, x, y, n_z, bt, s);
    case ATS_Q_BF16: return launch_f<ATS_Q_BF16>(W, rows, cols, x, y, n_z, bt, s);
    default: return EX_GPU_EINVAL;
    }
}

extern "C" ex_gpu_status ex_cuda_gemv(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols,
                                      const float *x, float *y, ex_stream s)
{
    return exc_gemv_batched(g, type, W, rows, cols, 0, NULL, 0, 0, 1, x, y, s);
}

extern "C" const char *ex_cuda_gemv_kernel(ex_gpu *g, int type, int64_t rows, int64_t cols)
{
    if (!g || rows < 1 || cols < 1) return "none";
    const int qk = ats_qtype_block_elems((ats_qtype)type);
    if (qk == 0 || cols % qk != 0) return "none";
    switch (gemv_pick(exc_gemv_state(g), type, rows, cols)) {
    case EXC_GEMV_RING: return "ring";
    case EXC_GEMV_ROWS2: return "rows2";
    case EXC_GEMV_ROWS1: return "rows1";
    case EXC_GEMV_TMA: return "tma";
    case EXC_GEMV_WARP: break;
    }
    return "warp";
}
