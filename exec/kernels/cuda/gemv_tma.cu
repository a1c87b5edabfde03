/*
 * Decode GEMV "tma" (gemv.cuh) for Q4_0 and Q4_K with one activation row, Hopper (sm_90) code only:
 * y (rows) = W · x in ONE kernel per call, weights streamed by the copy hardware (1-D TMA bulk copies,
 * cp.async.bulk, into shared-memory slots), activations quantized by every block itself.
 *  - x (F32) is read through L2 only (`ld.global.cg`) after griddepcontrol.wait and quantized into the
 *    block's own shared memory (d = amax/127, q = round(v·(1/d)), s = d·Σq; a non-finite value makes the
 *    block's d NaN), so nothing of x is ever cached in L1 and the kernel is safe as a programmatic dependent
 *    of any kernel that does not write W (weights are copied before the wait), another tma GEMV included
 *    (test_cuda_ops' back-to-back chains);
 *  - the weights stream with bulk copies completing on mbarriers, issued before griddepcontrol.wait
 *    (weights never change), so the first ~90 KB per SM are in flight while the previous kernel ends;
 *  - one block per SM (static, even share of the rows) at ~100 KB of shared memory, so the next call's
 *    block fits beside it and starts its own copies in this one's tail (launch_dependents at the start).
 *
 * Work split: the block's rows [r0, r1) are cut into (row, chunk) items, a row into nch = ceil(rb / 3 KB)
 * chunks of whole 144-byte units (8 Q4_0 blocks or one Q4_K super-block; rb % 144 == 0 as cols % 256 ==
 * 0). Each of the 16 warps takes items warp, warp + 16, ... through its own ring of S slots (S = 96 KB /
 * 16 / slot, 2..8: 8 at 256 columns, 4 at 2048, 2 from ~3840 up) and mbarriers: lane 0 issues an item's
 * copy, all lanes wait on the slot's phase, take the item's units in turn (Q4_0: blocks of 32; Q4_K:
 * sub-block pairs, 64 values; the math is the rows kernel's, exc_q4_0_dot / exc_q4k_task), and after
 * __syncwarp lane 0 refills the slot with the item S rounds ahead; the warp's sum of the item goes to shared
 * memory and a row's chunks are added in order at the end (deterministic). x sits in shared memory as
 * 16-byte planes (plane c holds chunk c of every unit), so a warp's x loads are contiguous.
 * Each block quantizes all of x, so rows of many columns cost more per block: the table keeps this kernel
 * to rows of up to 8192 columns (H200: 17408 columns ran 5-7% slower than rows1 / rows2).
 * Where a call's time goes (H200, Q4_0 ffn_up back to back, 17.0 us; experiments/bench/gpu-2026-11-30-s8):
 * the previous call's end to griddepcontrol.wait returning 2.6 us, x quantized 1.5 us, first slot 0.5 us,
 * item loop 11.4 us (issue-bound, ~50 SASS instructions a Q4_0 block), last block 1.3 us after the first.
 */
#include "gemv.cuh"

#include <float.h>

#include "ats/quant.h"

#define TMA_WARPS 16
#define TMA_THREADS (32 * TMA_WARPS)
#define TMA_MAX_SLOTS 8    /* ring slots per warp */
#define TMA_CHUNK_KB 3     /* a row is cut into ceil(rb / 3 KB) chunks of whole 144-byte units */
#define TMA_RING_KB 96     /* ring of a block (all warps): slots per warp = 96 KB / 16 / slot, 2..8 */
#define TMA_BAR_OFF 0      /* uint64 mbarriers [TMA_WARPS][TMA_MAX_SLOTS] */
#define TMA_MAX_CHUNKS 256 /* chunks per row (the chunk grows for longer rows) */
#define TMA_X_OFF 1024     /* x: int8 planes (cols bytes), then (d, s) pairs (cols / 4 bytes) */

/* What the host decided for one (type, rows, cols, grid): chunks per row, ring slots per warp, slot
 * stride, and the offsets of the partial sums and of the ring in shared memory. */
typedef struct tma_geom {
    int nch, S, slot, red_off, ring_off;
} tma_geom;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ uint32_t tma_sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Arms `bar` for `bytes` and copies them from global `src` to shared `dst` (both 16-byte aligned, bytes
 * a multiple of 16) with the bulk-copy unit; the barrier's phase completes when they have landed. */
static __device__ __forceinline__ void tma_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(tma_sa(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     tma_sa(dst)),
                 "l"(src), "r"(bytes), "r"(tma_sa(bar))
                 : "memory");
}

/* Waits for the phase of `bar` with this parity (mbarrier.try_wait: the hardware may suspend the warp
 * until the phase completes; polling with test_wait instead was no faster on the H200:
 * experiments/bench/gpu-2026-11-30-s7/summary-s7e.txt). */
static __device__ __forceinline__ void tma_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(tma_sa(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}
#endif

/* x (cols floats, cols % 256 == 0) → the block's int8 blocks of 32 in shared memory and their (d, s)
 * pairs (xds[b]): d = amax/127, q = round(v·(1/d)) (ggml's quantize_row_q8_0; the quantize kernel divides,
 * which may differ by one step in rare ties), s = d·Σq; any non-finite value of a block makes its d NaN.
 * The int8 values go to CH planes of 16-byte chunks: chunk k of unit n (a unit = 16·CH values: a Q4_0
 * block for CH = 2, a Q4_K sub-block pair for CH = 4) at xq + k·(cols/CH) + 16n. Lane group
 * of 8 per block of 32, a float4 a lane, read through L2 (ld.global.cg: x may have been written by the
 * kernel this one was a programmatic dependent of; nothing of it is ever cached in L1); up to 8 float4
 * loads of a thread in flight before the first use (a loop of one block at a time per warp, waiting for
 * L2 each time, took ~8 µs at 5120 columns and ~27 µs at 17408 on the H200). */
template <int CH>
static __device__ __forceinline__ void tma_quantize_x(const float *__restrict__ x, int cols, int8_t *xq, float2 *xds)
{
    const int n4 = cols / 4, lane = threadIdx.x & 31, plane = cols / CH;
    for (int i0 = threadIdx.x; i0 < n4; i0 += 8 * TMA_THREADS) {
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (i0 + u * TMA_THREADS < n4) v[u] = __ldcg((const float4 *)x + i0 + u * TMA_THREADS);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int i = i0 + u * TMA_THREADS;
            if (i0 + u * TMA_THREADS >= n4) break; /* warp-uniform: n4 % 64 == 0 */
            const float a = fmaxf(fmaxf(fabsf(v[u].x), fabsf(v[u].y)), fmaxf(fabsf(v[u].z), fabsf(v[u].w)));
            int bad = !(fabsf(v[u].x) <= FLT_MAX && fabsf(v[u].y) <= FLT_MAX && fabsf(v[u].z) <= FLT_MAX &&
                        fabsf(v[u].w) <= FLT_MAX); /* NaN or ±inf (every finite float passes) */
            float amax = bad ? 0.0f : a;
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) { /* the 8 lanes of this block of 32 */
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
                bad |= __shfl_xor_sync(0xffffffffu, bad, o);
            }
            float d = amax / 127.0f;
            int q0 = 0, q1 = 0, q2 = 0, q3 = 0;
            if (amax > 0.0f && !bad) { /* v · (1/d), as ggml's quantize_row_q8_0: 4 multiplies, not 4 divisions */
                const float id = 1.0f / d;
                q0 = __float2int_rn(v[u].x * id);
                q1 = __float2int_rn(v[u].y * id);
                q2 = __float2int_rn(v[u].z * id);
                q3 = __float2int_rn(v[u].w * id);
            }
            if (bad) d = __int_as_float(0x7fc00000);
            int sum = q0 + q1 + q2 + q3;
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            const int e = 4 * i, o = e % (16 * CH); /* unit e / (16·CH), its 16-byte chunk o / 16 */
            *(int *)(xq + (o >> 4) * plane + e / (16 * CH) * 16 + (o & 15)) =
                (int)((uint32_t)(q0 & 255) | ((uint32_t)(q1 & 255) << 8) | ((uint32_t)(q2 & 255) << 16) | ((uint32_t)q3 << 24));
            if ((lane & 7) == 0) xds[i / 8] = make_float2(d, d * (float)sum);
        }
    }
}

/* One lane's share of a chunk in shared memory (`st`, units [su0, su1) of the row): Q4_K tasks (sub-block
 * pairs, 64 values) or Q4_0 blocks u = lane, lane + 32, ... (exc_q4k_task / exc_q4_0_dot). */
template <int TYPE>
static __device__ __forceinline__ float tma_chunk(const uint8_t *st, int su0, int su1, int lane, const int8_t *xq,
                                                 const float2 *xds, int plane)
{
    float acc = 0.0f;
    if (TYPE == ATS_Q_Q4_K) {
        const int nt = 4 * (su1 - su0), t0 = 4 * su0; /* tasks of the chunk, the first one's index in x */
        for (int u = lane; u < nt; u += 32) {
            const int t = t0 + u, pair = u & 3; /* sub-blocks 2·pair, 2·pair + 1 of super-block u / 4 */
            const int4 x0a = *(const int4 *)(xq + t * 16), x0b = *(const int4 *)(xq + plane + t * 16);
            const int4 x1a = *(const int4 *)(xq + 2 * plane + t * 16), x1b = *(const int4 *)(xq + 3 * plane + t * 16);
            const float4 sc = *(const float4 *)(xds + 2 * t);
            const int4 *bp = (const int4 *)(st + (u >> 2) * EXC_Q4_K_BYTES);
            acc += exc_q4k_task(bp[0], bp[1 + 2 * pair], bp[2 + 2 * pair], x0a, x0b, x1a, x1b, sc, pair);
        }
    } else {
        const int nbk = 8 * (su1 - su0), b0 = 8 * su0; /* blocks of the chunk, the first one's index in x */
        for (int u = lane; u < nbk; u += 32) {
            const int b = b0 + u;
            const int4 xl = *(const int4 *)(xq + b * 16), xh = *(const int4 *)(xq + plane + b * 16);
            acc += exc_q4_0_dot(st + u * EXC_Q4_0_BYTES, xl, xh, xds[b]);
        }
    }
    return acc;
}

template <int TYPE>
static __global__ void __launch_bounds__(TMA_THREADS, 2)
    gemv_tma_kernel(const uint8_t *__restrict__ W, int rows, int cols, const float *__restrict__ x,
                    float *__restrict__ y, tma_geom geo)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int CH = TYPE == ATS_Q_Q4_K ? 4 : 2; /* 16-byte x chunks per unit (Q4_K task / Q4_0 block) */
    extern __shared__ __align__(128) uint8_t sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    uint64_t *bar = (uint64_t *)(sm + TMA_BAR_OFF) + warp * TMA_MAX_SLOTS;
    int8_t *xq = (int8_t *)(sm + TMA_X_OFF);
    float2 *xds = (float2 *)(sm + TMA_X_OFF + cols);
    float *red = (float *)(sm + geo.red_off);
    uint8_t *ring = sm + geo.ring_off + (size_t)warp * geo.S * geo.slot;
    const int su_row = cols / 256; /* 144-byte units a row: 8 Q4_0 blocks or one Q4_K super-block */
    const int64_t rb = (int64_t)su_row * 144;
    const int plane = cols / CH;
    const int r0 = (int)((int64_t)blockIdx.x * rows / gridDim.x), r1 = (int)((int64_t)(blockIdx.x + 1) * rows / gridDim.x);
    const int items = (r1 - r0) * geo.nch; /* (row, chunk) pairs of the block; warp w takes w, w + 16, ... */
    /* item q = (row r0 + q / nch, chunk q % nch); chunk c holds the units [c·su_row/nch, (c+1)·su_row/nch) */
    int *su_tab = (int *)(sm + geo.red_off) - (TMA_MAX_CHUNKS + 1); /* chunk c's first unit, c = 0..nch */
#define TMA_SU(c) su_tab[c]
    for (int i = tid; i <= geo.nch; i += TMA_THREADS) su_tab[i] = i * su_row / geo.nch; /* read after the next __syncthreads */
    if (lane == 0) {
        for (int k = 0; k < geo.S; k++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(tma_sa(&bar[k])) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int k = 0; k < geo.S && warp + TMA_WARPS * k < items; k++) { /* weights only: safe before the wait */
            const int q = warp + TMA_WARPS * k, c = q % geo.nch, su0 = c * su_row / geo.nch;
            tma_copy(ring + (size_t)k * geo.slot, W + (int64_t)(r0 + q / geo.nch) * rb + su0 * 144,
                     (uint32_t)(((c + 1) * su_row / geo.nch - su0) * 144), &bar[k]);
        }
    }
    asm volatile("griddepcontrol.launch_dependents;"); /* the next call may start its weight copies */
    asm volatile("griddepcontrol.wait;" ::: "memory"); /* x is complete from here on */
    tma_quantize_x<CH>(x, cols, xq, xds);
    __syncthreads(); /* x quantized; every warp's barriers initialised */
    /* this warp's items q = warp + 16j walked without divisions: the chunk, and the refill's (row, chunk) S
     * items ahead */
    const int st_row = TMA_WARPS / geo.nch, st_c = TMA_WARPS % geo.nch;
    int c = warp % geo.nch;
    int rrow = (warp + TMA_WARPS * geo.S) / geo.nch, rc = (warp + TMA_WARPS * geo.S) % geo.nch;
    uint32_t par = 0; /* the phase parity of this round of the ring */
    for (int q = warp, slot = 0; q < items; q += TMA_WARPS) {
        const uint8_t *st = ring + (size_t)slot * geo.slot;
        const int su0 = TMA_SU(c), su1 = TMA_SU(c + 1);
        float acc = 0.0f;
        tma_wait(&bar[slot], par);
        acc = tma_chunk<TYPE>(st, su0, su1, lane, xq, xds, plane);
        __syncwarp(); /* every lane is done with the slot */
        if (lane == 0 && q + TMA_WARPS * geo.S < items) {
            const int sn0 = TMA_SU(rc);
            tma_copy((void *)st, W + (int64_t)(r0 + rrow) * rb + sn0 * 144, (uint32_t)((TMA_SU(rc + 1) - sn0) * 144),
                     &bar[slot]);
        }
        c += st_c, rrow += st_row, rc += st_c;
        if (c >= geo.nch) c -= geo.nch;
        if (rc >= geo.nch) rc -= geo.nch, rrow++;
        if (++slot == geo.S) slot = 0, par ^= 1u;
        acc = exc_warp_sum(acc);
        if (lane == 0) red[q] = acc;
    }
#undef TMA_SU
    __syncthreads();
    for (int t = tid; t < r1 - r0; t += TMA_THREADS) { /* a row's chunks in order: deterministic */
        float v = 0.0f;
        for (int k = 0; k < geo.nch; k++) v += red[t * geo.nch + k];
        y[r0 + t] = v;
    }
#else
    __trap(); /* never launched: exc_gemv_tma_fits asks for sm_90 code (ptxVersion ≥ 90) */
#endif
}

/* ---- launcher ------------------------------------------------------------------------------ */

/* Raises the two kernels' dynamic shared memory limit to the device's opt-in maximum less their static shared
 * memory, where they have sm_90 code (ptxVersion, not binaryVersion: the kernel body follows the virtual
 * architecture) and the device is cc >= 9. */
void exc_gemv_tma_init(exc_gemv_dev *d)
{
    const void *k[2] = {(const void *)gemv_tma_kernel<ATS_Q_Q4_0>, (const void *)gemv_tma_kernel<ATS_Q_Q4_K>};
    d->tma_smem = d->smem_optin;
    for (int i = 0; i < 2; i++) {
        cudaFuncAttributes fa;
        d->tma_ok[i] = d->cc_major >= 9 && cudaFuncGetAttributes(&fa, k[i]) == cudaSuccess && fa.ptxVersion >= 90 &&
                       d->smem_optin > (int)fa.sharedSizeBytes &&
                       cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            d->smem_optin - (int)fa.sharedSizeBytes) == cudaSuccess;
        if (d->tma_ok[i] && d->smem_optin - (int)fa.sharedSizeBytes < d->tma_smem)
            d->tma_smem = d->smem_optin - (int)fa.sharedSizeBytes;
        (void)cudaGetLastError();
    }
}

/* The geometry for (rows, cols) on a grid of `grid` blocks: a row of rb = cols/256 · 144 bytes is cut into
 * nch = ceil(rb / chunk) chunks of whole 144-byte units; each warp has S slots of `slot` bytes (a chunk and
 * 4 bytes for the Q4_0 word reads, rounded to 128), S = ring / (16 · slot) in 2..8; then the partial sums
 * (a float per chunk of the block's rows). Returns the shared memory it takes, 0 when it does not fit. */
static size_t tma_geometry(int64_t rows, int64_t cols, int64_t grid, int smem_max, tma_geom *geo)
{
    const int64_t su_row = cols / 256, rb = su_row * 144, chunk = (int64_t)TMA_CHUNK_KB * 1024;
    int64_t nch = (rb + chunk - 1) / chunk;
    if (nch > su_row) nch = su_row;
    if (nch > TMA_MAX_CHUNKS) nch = TMA_MAX_CHUNKS;
    geo->nch = (int)nch;
    geo->slot = (int)(((su_row + nch - 1) / nch * 144 + 4 + 127) / 128 * 128);
    int64_t S = (int64_t)TMA_RING_KB * 1024 / ((int64_t)TMA_WARPS * geo->slot);
    geo->S = (int)(S < 2 ? 2 : S > TMA_MAX_SLOTS ? TMA_MAX_SLOTS : S);
    const int64_t red = (rows + grid - 1) / grid * nch * (int64_t)sizeof(float);
    geo->red_off = (int)((TMA_X_OFF + cols + cols / 4 + (TMA_MAX_CHUNKS + 1) * 4 + 127) / 128 * 128); /* after x, su_tab */
    const int64_t ring_off = (geo->red_off + red + 127) / 128 * 128;
    if (ring_off > (int64_t)smem_max) return 0;
    geo->ring_off = (int)ring_off;
    int64_t bytes = ring_off + (int64_t)TMA_WARPS * geo->S * geo->slot;
    while (bytes > (int64_t)smem_max && geo->S > 2) bytes -= (int64_t)TMA_WARPS * geo->slot, geo->S--;
    return bytes > (int64_t)smem_max ? 0 : (size_t)bytes;
}

/* One block per SM (two blocks a SM, each with half the rows, were slower on the H200: summary-s7e.txt), at
 * most one a row. */
static int64_t tma_grid(int64_t rows, int nsm) { return rows < nsm ? rows : nsm; }

int exc_gemv_tma_fits(const exc_gemv_dev *d, int type, int64_t rows, int64_t cols)
{
    if (!(type == ATS_Q_Q4_0 || type == ATS_Q_Q4_K) || cols % 256 != 0 || rows < 1 || rows > (1 << 30) ||
        cols > (1 << 20) || !d->tma_ok[type == ATS_Q_Q4_K])
        return 0;
    tma_geom geo;
    return tma_geometry(rows, cols, tma_grid(rows, d->sm_count), d->tma_smem, &geo) > 0;
}

/* Runs the tma kernel (the caller checked exc_gemv_tma_fits), as a programmatic dependent of whatever came
 * before. W 16-byte aligned (checked by the caller). */
ex_gpu_status exc_gemv_tma(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                           cudaStream_t s)
{
    const exc_gemv_dev *d = exc_gemv_state(g);
    tma_geom geo;
    const int64_t grid = tma_grid(rows, d->sm_count);
    const size_t smem = tma_geometry(rows, cols, grid, d->tma_smem, &geo);
    if (smem == 0) return EX_GPU_EINVAL;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3(TMA_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (type == ATS_Q_Q4_K)
        EXC_CUDA(cudaLaunchKernelEx(&cfg, gemv_tma_kernel<ATS_Q_Q4_K>, (const uint8_t *)W, (int)rows, (int)cols, x, y, geo));
    else
        EXC_CUDA(cudaLaunchKernelEx(&cfg, gemv_tma_kernel<ATS_Q_Q4_0>, (const uint8_t *)W, (int)rows, (int)cols, x, y, geo));
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
