/*
 * Decode GEMV, fourth kernel (v4) for Q4_0 and Q4_K with one activation row, Hopper (sm_90) and later:
 * y (rows) = W · x in ONE kernel per call, weights streamed by the copy hardware (TMA bulk copies into a
 * ring of shared-memory slots), activations quantized by every block itself.
 *
 * Why (experiments/bench/bench-kernels.md, sixth and seventh sessions): v3 reaches 84% of a same-size
 * read on Q4_0 and 73% on Q4_K, but every call pays a fixed 3-5 µs — the quantize kernel before it, the
 * ramp while its warps issue their first loads, the tail of the last wave — so a 50 MB matrix ran at 65%
 * (Q4_0) and 56% (Q4_K) of the 4 GiB read probe, where the issue asks ≥ 75%. Chaining GEMVs by
 * programmatic launches hid the fixed part (+4-5 points) but read stale activations from L1 now and
 * then, because v3 reads x through the non-coherent path. v4 removes each cause:
 *  - no quantize kernel: each block reads x (F32) through L2 (`ld.global.cg`, coherent) after
 *    griddepcontrol.wait and quantizes it into its own shared memory with the quantize kernel's rounding
 *    (exc_q8_block), so nothing of x ever sits in L1 and the kernel is safe as a programmatic dependent of
 *    ANY kernel, another v4 included;
 *  - weights come by cp.async.bulk (TMA, through L2 into shared memory, completion on an mbarrier), so a
 *    few threads keep ~S·16 KB per SM in flight from the first microsecond, before griddepcontrol.wait
 *    (weights never change, so that is safe), while the previous kernel is still finishing;
 *  - one block per SM with a static, even share of the rows (no last wave), at most ~113 KB of shared
 *    memory so the next GEMV's block fits beside it and starts its own weight copies in this one's tail
 *    (the kernel triggers griddepcontrol.launch_dependents at its start).
 *
 * Layout: the block's rows [r0, r1) are contiguous in W (rows of rb bytes, rb % 16 == 0 because
 * cols % 256 == 0), cut into stages of g ≤ 8 whole rows (g·rb ≤ ATS_GEMV_V4_STAGE_KB, default 16 KB); the
 * ring has S slots (S·slot ≤ ATS_GEMV_V4_RING_KB, default 96 KB, 2 ≤ S ≤ 8). Thread 0 issues a stage's one
 * bulk copy into slot k % S with the byte count on that slot's mbarrier; every thread waits on the
 * slot's phase, computes, and after a __syncthreads thread 0 refills the slot with stage k + S. The 8 warps
 * form GR row groups of P warps (P = the power of two ≥ units/32, ≤ 8): a group's lanes take the row's
 * units (Q4_0: blocks of 32; Q4_K: sub-block pairs, 64 values) in turn and, for each unit, load x once
 * and use it for all the group's rows of the stage; per-warp partial sums go through shared memory and
 * are added in warp order (deterministic). The math per unit is v3's (exc_q4_0_dot, exc_q4k_task).
 *
 * Shared memory: mbarriers (64 B), partial sums (512 B), x as int8 (cols B) and (d, s) pairs (cols/4 B),
 * the ring, 16 B of slack for the Q4_0 word reads. ATS_GEMV_KERNEL=v3|v2|v1 turns v4 off (bench A/B).
 */
#include "common.cuh"

#include <mutex>
#include <stdlib.h>
#include <string.h>

#include "ats/quant.h"

#define V4_WARPS 8
#define V4_THREADS (32 * V4_WARPS)
#define V4_MAX_ROWS 8                  /* rows per stage (g) */
#define V4_MAX_STAGES 8                /* ring slots (S) */
#define V4_STAGE_KB 16                 /* default stage bytes: g = floor(16 KB / rb), 1..8 */
#define V4_RING_KB 96                  /* default ring bytes: S = floor(96 KB / slot), 2..8 */
#define V4_BAR_OFF 0                   /* uint64 mbarriers [V4_MAX_STAGES] */
#define V4_RED_OFF 64                  /* float partial sums [2][V4_MAX_ROWS][V4_WARPS] */
#define V4_X_OFF 640                   /* int8 x [cols], then float2 (d, s) [cols / 32] */

/* What the host decided for one (type, cols): rows per stage, ring slots, slot stride, warps per row
 * group and row groups, the ring's offset in shared memory. */
typedef struct v4_geom {
    int g, S, slot, P, GR, ring_off;
} v4_geom;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ uint32_t v4_sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Arms `bar` for `bytes` and copies them from global `src` to shared `dst` (both 16-byte aligned, bytes
 * a multiple of 16) with the bulk-copy unit; the barrier's phase completes when they have landed. */
static __device__ __forceinline__ void v4_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(v4_sa(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     v4_sa(dst)),
                 "l"(src), "r"(bytes), "r"(v4_sa(bar))
                 : "memory");
}

static __device__ __forceinline__ void v4_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(v4_sa(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}
#endif

/* x (cols floats, cols % 256 == 0) → the block's int8 blocks of 32 in shared memory (xq) and their
 * (d, s) pairs (xds), with exc_q8_block's formula (d = amax/127, q = round(v/d), s = d·Σq; any
 * non-finite value of a block makes its d NaN), so the result equals the quantize kernel's. Lane group
 * of 8 per block of 32, a float4 a lane, read through L2 (ld.global.cg: x may have been written by the
 * kernel this one was a programmatic dependent of; nothing of it is ever cached in L1); up to 8 float4
 * loads of a thread in flight before the first use (a loop of one block at a time per warp, waiting for
 * L2 each time, took ~8 µs at 5120 columns and ~27 µs at 17408 on the H200). */
static __device__ __forceinline__ void v4_quantize_x(const float *__restrict__ x, int cols, int8_t *xq, float2 *xds)
{
    const int n4 = cols / 4, lane = threadIdx.x & 31;
    for (int i0 = threadIdx.x; i0 < n4; i0 += 8 * V4_THREADS) {
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (i0 + u * V4_THREADS < n4) v[u] = __ldcg((const float4 *)x + i0 + u * V4_THREADS);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int i = i0 + u * V4_THREADS;
            if (i0 + u * V4_THREADS >= n4) break; /* warp-uniform: n4 % 64 == 0 */
            const float a = fmaxf(fmaxf(fabsf(v[u].x), fabsf(v[u].y)), fmaxf(fabsf(v[u].z), fabsf(v[u].w)));
            int bad = !(fabsf(v[u].x) <= 3.4e38f && fabsf(v[u].y) <= 3.4e38f && fabsf(v[u].z) <= 3.4e38f &&
                        fabsf(v[u].w) <= 3.4e38f);
            float amax = bad ? 0.0f : a;
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) { /* the 8 lanes of this block of 32 */
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
                bad |= __shfl_xor_sync(0xffffffffu, bad, o);
            }
            float d = amax / 127.0f;
            int q0 = 0, q1 = 0, q2 = 0, q3 = 0;
            if (amax > 0.0f && !bad) {
                q0 = __float2int_rn(v[u].x / d);
                q1 = __float2int_rn(v[u].y / d);
                q2 = __float2int_rn(v[u].z / d);
                q3 = __float2int_rn(v[u].w / d);
            }
            if (bad) d = __int_as_float(0x7fc00000);
            int sum = q0 + q1 + q2 + q3;
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            ((int *)xq)[i] = (int)((uint32_t)(q0 & 255) | ((uint32_t)(q1 & 255) << 8) | ((uint32_t)(q2 & 255) << 16) |
                                   ((uint32_t)q3 << 24));
            if ((lane & 7) == 0) xds[i / 8] = make_float2(d, d * (float)sum);
        }
    }
}

template <int TYPE>
static __global__ void __launch_bounds__(V4_THREADS, 1)
    gemv_v4_kernel(const uint8_t *__restrict__ W, int rows, int cols, const float *__restrict__ x,
                   float *__restrict__ y, v4_geom geo)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) uint8_t sm[];
    uint64_t *bar = (uint64_t *)(sm + V4_BAR_OFF);
    float *red = (float *)(sm + V4_RED_OFF);
    int8_t *xq = (int8_t *)(sm + V4_X_OFF);
    float2 *xds = (float2 *)(sm + V4_X_OFF + cols);
    uint8_t *ring = sm + geo.ring_off;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t rb = TYPE == ATS_Q_Q4_K ? (int64_t)(cols / 256) * EXC_Q4_K_BYTES : (int64_t)(cols / 32) * EXC_Q4_0_BYTES;
    const int r0 = (int)((int64_t)blockIdx.x * rows / gridDim.x), r1 = (int)((int64_t)(blockIdx.x + 1) * rows / gridDim.x);
    const int nst = (r1 - r0 + geo.g - 1) / geo.g; /* ≥ 1: the grid has at most `rows` blocks */
    if (tid == 0) {
        for (int k = 0; k < geo.S; k++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(v4_sa(&bar[k])) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int k = 0; k < geo.S && k < nst; k++) { /* weights only: safe before the wait */
            const int r = r0 + k * geo.g, nr = min(geo.g, r1 - r);
            v4_copy(ring + (size_t)k * geo.slot, W + r * rb, (uint32_t)(nr * rb), &bar[k]);
        }
    }
    asm volatile("griddepcontrol.launch_dependents;");
    __syncthreads(); /* the barriers are initialised before anyone waits on them */
    asm volatile("griddepcontrol.wait;" ::: "memory"); /* x is complete from here on */
    const int nb = cols / 32;
    v4_quantize_x(x, cols, xq, xds);
    __syncthreads();
    const int grp = warp / geo.P, p = warp % geo.P;
    const int U = TYPE == ATS_Q_Q4_K ? cols / 64 : nb;
    for (int k = 0; k < nst; k++) {
        const int slot = k % geo.S, r = r0 + k * geo.g, nr = min(geo.g, r1 - r);
        const uint8_t *st = ring + (size_t)slot * geo.slot;
        float acc[V4_MAX_ROWS];
#pragma unroll
        for (int m = 0; m < V4_MAX_ROWS; m++) acc[m] = 0.0f;
        v4_wait(&bar[slot], (uint32_t)(k / geo.S) & 1u);
        for (int u = p * 32 + lane; u < U; u += 32 * geo.P) {
            if (TYPE == ATS_Q_Q4_K) {
                const int4 *xp = (const int4 *)(xq + 64 * u);
                const int4 x0a = xp[0], x0b = xp[1], x1a = xp[2], x1b = xp[3];
                const float4 sc = *(const float4 *)(xds + 2 * u);
                const int c = u & 3;
#pragma unroll
                for (int m = 0; m < V4_MAX_ROWS; m++) {
                    const int i = grp + m * geo.GR;
                    if (i < nr) {
                        const int4 *bp = (const int4 *)(st + i * rb + (int64_t)(u >> 2) * EXC_Q4_K_BYTES);
                        acc[m] += exc_q4k_task(bp[0], bp[1 + 2 * c], bp[2 + 2 * c], x0a, x0b, x1a, x1b, sc, c);
                    }
                }
            } else {
                const int4 *xp = (const int4 *)(xq + 32 * u);
                const int4 xl = xp[0], xh = xp[1];
                const float2 ds = xds[u];
#pragma unroll
                for (int m = 0; m < V4_MAX_ROWS; m++) {
                    const int i = grp + m * geo.GR;
                    if (i < nr) acc[m] += exc_q4_0_dot(st + i * rb + (int64_t)u * EXC_Q4_0_BYTES, xl, xh, ds);
                }
            }
        }
        float *rd = red + (k & 1) * V4_MAX_ROWS * V4_WARPS;
#pragma unroll
        for (int m = 0; m < V4_MAX_ROWS; m++) {
            const int i = grp + m * geo.GR; /* warp-uniform */
            if (i < nr) {
                const float v = exc_warp_sum(acc[m]);
                if (lane == 0) rd[i * V4_WARPS + p] = v;
            }
        }
        __syncthreads(); /* slot k % S is read, the partial sums of stage k are written */
        if (tid == 0 && k + geo.S < nst) {
            const int rn = r0 + (k + geo.S) * geo.g, nn = min(geo.g, r1 - rn);
            v4_copy(ring + (size_t)slot * geo.slot, W + rn * rb, (uint32_t)(nn * rb), &bar[slot]);
        }
        if (tid < nr) { /* row tid of the stage: its group's P partial sums in warp order */
            float v = 0.0f;
            for (int q = 0; q < geo.P; q++) v += rd[tid * V4_WARPS + q];
            y[r + tid] = v;
        }
    }
#else
    __trap(); /* never launched: v4_covers asks for sm_90 code (ptxVersion ≥ 90) */
#endif
}

/* ---- launcher ------------------------------------------------------------------------------ */

typedef struct v4_cfg {
    int off;             /* ATS_GEMV_KERNEL = v1 | v2 | v3 */
    int stage_kb, ring_kb;
    int smem_max;        /* opt-in shared memory of one block on the device (227 KB on sm_90, 99 KB on sm_120) */
    int sm90[2];         /* the Q4_0 / Q4_K kernels have sm_90 code (ptxVersion ≥ 90) and their shared
                          * memory limit is raised to smem_max */
} v4_cfg;

/* Read once: ATS_GEMV_KERNEL = v1 | v2 | v3 turn v4 off; ATS_GEMV_V4_STAGE_KB (2..64) and
 * ATS_GEMV_V4_RING_KB (8..200) size the stages and the ring (bench experiments). */
static const v4_cfg *v4_config(void)
{
    static std::once_flag once;
    static v4_cfg c = {0, V4_STAGE_KB, V4_RING_KB, 0, {0, 0}};
    std::call_once(once, [] {
        const char *e = getenv("ATS_GEMV_KERNEL");
        c.off = e && (strcmp(e, "v1") == 0 || strcmp(e, "v2") == 0 || strcmp(e, "v3") == 0);
        int v;
        if ((e = getenv("ATS_GEMV_V4_STAGE_KB")) && (v = atoi(e)) >= 2 && v <= 64) c.stage_kb = v;
        if ((e = getenv("ATS_GEMV_V4_RING_KB")) && (v = atoi(e)) >= 8 && v <= 200) c.ring_kb = v;
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&c.smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            c.smem_max = 0;
        const void *k[2] = {(const void *)gemv_v4_kernel<ATS_Q_Q4_0>, (const void *)gemv_v4_kernel<ATS_Q_Q4_K>};
        for (int i = 0; i < 2; i++) {
            cudaFuncAttributes fa;
            /* ptxVersion, not binaryVersion: the kernel body follows the virtual architecture (as for the
             * attention's cluster path) */
            c.sm90[i] = cudaFuncGetAttributes(&fa, k[i]) == cudaSuccess && fa.ptxVersion >= 90 &&
                        c.smem_max > 0 && cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem_max) ==
                            cudaSuccess;
            (void)cudaGetLastError();
        }
    });
    return &c;
}

/* The stage / ring geometry for (type, cols) and the shared memory it takes; 0 when it does not fit. */
static size_t v4_geometry(int type, int64_t cols, const v4_cfg *c, v4_geom *geo)
{
    const int64_t rb = type == ATS_Q_Q4_K ? cols / 256 * EXC_Q4_K_BYTES : cols / 32 * EXC_Q4_0_BYTES;
    const int64_t units = type == ATS_Q_Q4_K ? cols / 64 : cols / 32;
    int64_t g = (int64_t)c->stage_kb * 1024 / rb;
    geo->g = (int)(g < 1 ? 1 : g > V4_MAX_ROWS ? V4_MAX_ROWS : g);
    geo->slot = (int)((geo->g * rb + 127) / 128 * 128);
    int64_t S = (int64_t)c->ring_kb * 1024 / geo->slot;
    geo->S = (int)(S < 2 ? 2 : S > V4_MAX_STAGES ? V4_MAX_STAGES : S);
    int P = 1;
    while (P < V4_WARPS && (int64_t)32 * P < units) P *= 2;
    int GR = V4_WARPS / P;
    while (GR > geo->g) GR /= 2;
    geo->GR = GR;
    geo->P = V4_WARPS / GR;
    geo->ring_off = (int)((V4_X_OFF + cols + cols / 4 + 127) / 128 * 128);
    size_t bytes = (size_t)geo->ring_off + (size_t)geo->S * geo->slot + 16;
    while (bytes > (size_t)c->smem_max && geo->S > 2) bytes -= geo->slot, geo->S--;
    return bytes > (size_t)c->smem_max ? 0 : bytes;
}

/* 1 when v4 takes this single GEMV: Q4_0 / Q4_K, cols % 256 == 0, sm_90 code on a cc ≥ 9 device, the
 * ring fits, and ATS_GEMV_KERNEL does not ask for an older kernel. */
static int v4_covers(int cc_major, int type, int64_t rows, int64_t cols)
{
    if (!(type == ATS_Q_Q4_0 || type == ATS_Q_Q4_K) || cols % 256 != 0 || rows < 1 || rows > (1 << 30) ||
        cols > (1 << 20) || cc_major < 9)
        return 0;
    const v4_cfg *c = v4_config();
    v4_geom geo;
    return !c->off && c->sm90[type == ATS_Q_Q4_K] && v4_geometry(type, cols, c, &geo) > 0;
}

/* Runs v4 when it covers the case: *used = 1; otherwise *used = 0 and nothing is launched. W 16-byte
 * aligned (checked by the caller). Launched as a programmatic dependent of whatever came before. */
ex_gpu_status exc_gemv_v4(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                          cudaStream_t s, int *used)
{
    *used = 0;
    if (!v4_covers(exc_cc_major(g), type, rows, cols)) return EX_GPU_OK;
    v4_geom geo;
    const size_t smem = v4_geometry(type, cols, v4_config(), &geo);
    const int nsm = exc_sm_count(g);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)(rows < nsm ? rows : nsm));
    cfg.blockDim = dim3(V4_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (type == ATS_Q_Q4_K)
        EXC_CUDA(cudaLaunchKernelEx(&cfg, gemv_v4_kernel<ATS_Q_Q4_K>, (const uint8_t *)W, (int)rows, (int)cols, x, y, geo));
    else
        EXC_CUDA(cudaLaunchKernelEx(&cfg, gemv_v4_kernel<ATS_Q_Q4_0>, (const uint8_t *)W, (int)rows, (int)cols, x, y, geo));
    EXC_LAUNCHED(s);
    *used = 1;
    return EX_GPU_OK;
}

/* 1 when ex_cuda_gemv runs v4 for this single GEMV on the current device (the bench's `kern` column). */
int exc_gemv_v4_used(int type, int64_t rows, int64_t cols)
{
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v4_covers(major, type, rows, cols);
}
