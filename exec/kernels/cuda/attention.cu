/*
 * KV-cache append and causal GQA attention over one layer's KV cache (ex/ops.h semantics), F32 or
 * F16 (the session's kv_type): kernels templated on the cache element T; with T = __half the store
 * rounds F32 K/V to __half (__float2half_rn: round to nearest even, the CPU op's bits) and attention
 * widens each K/V element to F32 as it loads it; every product and sum is F32 for both types.
 * One thread block of NW warps per (query token, head); each warp walks a strided share of the
 * positions 0..p, two positions per step, with an online softmax (running max, sum, and the weighted V
 * sum in registers, head_dim/32 values per lane), then the NW partial results are merged in shared
 * memory. NW = 4 when the (head, token) blocks fill the GPU (prefill chunks). With few blocks and many
 * positions (decode at long contexts: 40 blocks for Qwen3-14B) NW grows to 8/16 (32 below sm_90) and,
 * on sm_90+, the positions of each (head, token) are split over a thread-block cluster of S ≤ 8 blocks
 * whose partials block 0 merges through distributed shared memory (flash-decoding without a workspace,
 * so the launchers keep their signatures) — the decode attention was latency-bound (one warp's serial
 * chain of dependent loads, shuffles and exps), not bandwidth-bound (task AA). att_shape() picks NW and
 * S from the grid and the cached SM count; ATS_ATTN_SHAPE=NW,S overrides it for A/B timing. Works for
 * decode and chunks of up to 8 tokens (and other head sizes); any head_dim ≤ 256 (lanes past head_dim idle).
 * Longer prefill chunks with head_dim 64/128/256 go to the tensor-core kernel fa_prefill_kernel below.
 * Vaswani et al. 2017 (attention), Ainslie et al. 2023 (GQA), Milakov & Gimelshein 2018 (online softmax).
 */
#include "common.cuh"

#include <cooperative_groups.h>
#include <stdlib.h>

#include "ex/ops.h"

#define ATT_MAX_PER_LANE 8 /* head_dim ≤ 256 */

static_assert(sizeof(__half) == sizeof(ex_fp16), "the F16 KV cache: __half and ex_fp16 are the same 16 bits");

/* cache element <-> F32: the identity for an F32 cache, round to nearest even / exact widening for F16 */
static __device__ __forceinline__ float kv_ld(float x) { return x; }
static __device__ __forceinline__ float kv_ld(__half x) { return __half2float(x); }
static __device__ __forceinline__ void kv_st(float *p, float x) { *p = x; }
static __device__ __forceinline__ void kv_st(__half *p, float x) { *p = __float2half_rn(x); }

template <typename T>
static __global__ void kv_store_kernel(const float *__restrict__ k, const float *__restrict__ v, int64_t n,
                                       T *__restrict__ kc, T *__restrict__ vc)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        kv_st(kc + i, k[i]);
        kv_st(vc + i, v[i]);
    }
}

template <typename T>
static ex_gpu_status kv_store(const float *k, const float *v, int64_t n_tokens, int64_t pos0, int64_t kv_dim,
                              int64_t n_ctx, T *k_cache, T *v_cache, ex_stream s)
{
    if (!k || !v || !k_cache || !v_cache || n_tokens < 1 || pos0 < 0 || kv_dim < 1 || pos0 + n_tokens > n_ctx)
        return EX_GPU_EINVAL;
    int64_t n = n_tokens * kv_dim;
    kv_store_kernel<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(k, v, n, k_cache + pos0 * kv_dim,
                                                                    v_cache + pos0 * kv_dim);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

extern "C" ex_gpu_status ex_cuda_kv_store(const float *k, const float *v, int64_t n_tokens, int64_t pos0, int64_t kv_dim,
                                          int64_t n_ctx, float *k_cache, float *v_cache, ex_stream s)
{
    return kv_store<float>(k, v, n_tokens, pos0, kv_dim, n_ctx, k_cache, v_cache, s);
}

extern "C" ex_gpu_status ex_cuda_kv_store_f16(const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                              int64_t kv_dim, int64_t n_ctx, ex_fp16 *k_cache, ex_fp16 *v_cache,
                                              ex_stream s)
{
    return kv_store<__half>(k, v, n_tokens, pos0, kv_dim, n_ctx, reinterpret_cast<__half *>(k_cache),
                            reinterpret_cast<__half *>(v_cache), s);
}

/* One block of NW warps per (query token, head), or with CL a cluster of gridDim.z = S such blocks (sm_90+):
 * warp w of cluster block r takes the positions g, g + S·NW, g + 2·S·NW, ... (g = r·NW + w), two per step
 * (p and p + S·NW: two independent row loads and dot products in flight, one softmax update), with an
 * online softmax in registers; the NW partials are merged in shared memory into the block's
 * (M, L, O[HD]) (O unnormalized, relative to M); with CL, block 0 of the cluster then merges the S blocks'
 * (M, L, O) through distributed shared memory (the log-sum-exp rescale of flash-decoding, Dao et al. 2023,
 * without a global workspace). A warp or block with no position has M = -inf and is skipped. */
template <int PL, typename T, int NW, bool CL> /* PL = ceil(head_dim / 32); T: the cache element, float or __half */
static __global__ void __launch_bounds__(32 * NW)
    attention_kernel(const float *__restrict__ q, int64_t pos0, const T *__restrict__ kc,
                     const T *__restrict__ vc, int64_t n_head, int64_t n_head_kv, int HD, float scale,
                     float *__restrict__ out)
{
    __shared__ float sm_m[NW], sm_l[NW], sm_acc[NW][PL * 32];
    __shared__ float sm_o[PL * 32];
    int64_t t = blockIdx.y, h = blockIdx.x;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int rank = 0, n_split = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (CL) {
        rank = (int)cooperative_groups::this_cluster().block_rank();
        n_split = (int)cooperative_groups::this_cluster().num_blocks();
    }
#else
    if (CL) __trap(); /* the launcher uses CL only with sm_90 code on an sm_90+ device */
#endif
    int64_t kvh = h / (n_head / n_head_kv), kv_dim = n_head_kv * HD;
    const float *qv = q + (t * n_head + h) * HD;
    float qr[PL], acc[PL];
#pragma unroll
    for (int i = 0; i < PL; i++) {
        qr[i] = lane + 32 * i < HD ? qv[lane + 32 * i] * scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int64_t p_last = pos0 + t, stride = (int64_t)n_split * NW;
    const T *kb = kc + kvh * HD, *vb = vc + kvh * HD;
    for (int64_t p = (int64_t)rank * NW + w; p <= p_last; p += 2 * stride) {
        const bool two = p + stride <= p_last;
        const T *kr0 = kb + p * kv_dim, *kr1 = kb + (two ? p + stride : p) * kv_dim;
        float d0 = 0.0f, d1 = 0.0f;
#pragma unroll
        for (int i = 0; i < PL; i++) {
            if (lane + 32 * i < HD) {
                d0 += qr[i] * kv_ld(kr0[lane + 32 * i]);
                d1 += qr[i] * kv_ld(kr1[lane + 32 * i]);
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            d0 += __shfl_xor_sync(0xffffffffu, d0, o);
            d1 += __shfl_xor_sync(0xffffffffu, d1, o);
        }
        const T *vr0 = vb + p * kv_dim, *vr1 = vb + (two ? p + stride : p) * kv_dim;
        float m_new = two ? fmaxf(m, fmaxf(d0, d1)) : fmaxf(m, d0);
        float corr = __expf(m - m_new), e0 = __expf(d0 - m_new), e1 = two ? __expf(d1 - m_new) : 0.0f;
        l = l * corr + e0 + e1;
#pragma unroll
        for (int i = 0; i < PL; i++)
            if (lane + 32 * i < HD)
                acc[i] = acc[i] * corr + e0 * kv_ld(vr0[lane + 32 * i]) + e1 * kv_ld(vr1[lane + 32 * i]);
        m = m_new;
    }
    if (lane == 0) {
        sm_m[w] = m;
        sm_l[w] = l;
    }
#pragma unroll
    for (int i = 0; i < PL; i++) sm_acc[w][lane + 32 * i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int j = 0; j < NW; j++) M = fmaxf(M, sm_m[j]);
    float L = 0.0f;
    for (int j = 0; j < NW; j++) L += sm_m[j] == -INFINITY ? 0.0f : sm_l[j] * __expf(sm_m[j] - M); /* a warp with no position */
    float *o = out + (t * n_head + h) * HD;
    for (int i = threadIdx.x; i < HD; i += 32 * NW) {
        float sum = 0.0f;
        for (int j = 0; j < NW; j++)
            if (sm_m[j] != -INFINITY) sum += sm_acc[j][i] * __expf(sm_m[j] - M);
        if (CL) sm_o[i] = sum;
        else o[i] = sum / L;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (CL) {
        __shared__ float sm_ml[2];
        cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
        if (threadIdx.x == 0) {
            sm_ml[0] = M;
            sm_ml[1] = L;
        }
        cl.sync(); /* every block's (M, L, O) is in its shared memory */
        if (rank == 0) {
            float MM = -INFINITY;
            for (int r = 0; r < n_split; r++) MM = fmaxf(MM, cl.map_shared_rank(sm_ml, r)[0]);
            float LL = 0.0f;
            for (int r = 0; r < n_split; r++) {
                const float *ml = cl.map_shared_rank(sm_ml, r);
                if (ml[0] != -INFINITY) LL += ml[1] * __expf(ml[0] - MM);
            }
            for (int i = threadIdx.x; i < HD; i += 32 * NW) {
                float sum = 0.0f;
                for (int r = 0; r < n_split; r++) {
                    float mr = cl.map_shared_rank(sm_ml, r)[0];
                    if (mr != -INFINITY) sum += cl.map_shared_rank(sm_o, r)[i] * __expf(mr - MM);
                }
                o[i] = sum / LL;
            }
        }
        cl.sync(); /* no block leaves while block 0 still reads its shared memory */
    }
#endif
}

/* Multiprocessor count and compute capability major of the current device, asked once per device and
 * cached (0 if the query fails). */
static void att_device(int *sms, int *cc_major)
{
    static int cached[64][2];
    int dev = 0;
    *sms = *cc_major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        (void)cudaGetLastError();
        return;
    }
    if (!cached[dev][0]) {
        int n = 0, cc = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
        cached[dev][1] = cc;
        cached[dev][0] = n;
    }
    *sms = cached[dev][0];
    *cc_major = cached[dev][1];
}

#define ATT_MAX_SPLIT 8 /* the portable cluster size */

/* ATS_ATTN_SHAPE=NW,S (for A/B timing on the GPU machine and for tests that force a shape): warps per block
 * and split instead of the launch-shape choice, "4,1" being the pre-AA block shape (4 warps, one block per
 * (head, token)); 0 keeps the choice for that part. A value the launcher does not have (or an unreadable
 * string) makes it return EX_GPU_EINVAL. Read at every call (a getenv, ~0.1 us; no state kept). */
static void att_env(int *nw, int *split)
{
    const char *e = getenv("ATS_ATTN_SHAPE");
    *nw = *split = 0;
    if (e && *e && sscanf(e, "%d,%d", nw, split) != 2) *nw = *split = -1;
}

/* Warps per block: 4 when the (head, token) blocks alone fill the device (prefill), otherwise the most
 * of 8/16 (32 below sm_90, where there is no split) that keeps the grid within ~32 warps per SM (half
 * an SM's 64) and gives each warp at least 16 positions. Then the split S (cluster size, sm_90+ only):
 * the most blocks per (head, token), up to 8, that keep the grid within 32 warps per SM and leave each
 * warp at least 16 positions. Decode of Qwen3-14B (40 heads, 132 SMs) at 2048 positions: 16 warps,
 * S = 6 (240 blocks of 512 threads, each warp ~11 steps of two positions, was 512 steps of one). */
static void att_shape(int64_t n_blocks, int64_t n_pos, int *nw_out, int *split_out)
{
    int sms, cc;
    att_device(&sms, &cc);
    if (sms < 1) sms = 1;
    int nw = 4, nw_max = cc >= 9 ? 16 : 32; /* 32 warps: 64 registers a thread, a few spilled bytes */
    for (int c = 8; c <= nw_max; c *= 2)
        if (n_blocks * c <= (int64_t)sms * 32 && (int64_t)c * 16 <= n_pos) nw = c;
    int env_nw = 0, env_split = 0;
    att_env(&env_nw, &env_split);
    if (env_nw) nw = env_nw;
    int split = 1;
    if (cc >= 9)
        for (int c = 2; c <= ATT_MAX_SPLIT; c++)
            if (n_blocks * c * nw <= (int64_t)sms * 32 && (int64_t)c * nw * 16 <= n_pos) split = c;
    if (env_split) split = env_split;
    *nw_out = nw;
    *split_out = split;
}

/* Launches one instantiation; a cluster launch (split > 1) when the kernel has sm_90 code and the launch
 * is accepted, else (or when the cluster launch is refused) the single-block form. */
template <int PL, typename T, int NW>
static ex_gpu_status attention_launch_pl(dim3 grid, int split, const float *q, int64_t pos0, const T *k_cache,
                                         const T *v_cache, int64_t n_head, int64_t n_head_kv, int hd, float scale,
                                         float *out, ex_stream s)
{
    if (split > 1) {
        static int has_sm90 = -1; /* one per instantiation: its code for the device was compiled for sm_90+ */
        if (has_sm90 < 0) {
            cudaFuncAttributes fa;
            /* ptxVersion, not binaryVersion: __CUDA_ARCH__ (the CL branch's __trap) follows the virtual
             * architecture; PTX for compute_86 JIT-compiled on an H200, or code=sm_90 from arch=compute_86,
             * has binaryVersion 90 but no cluster code */
            if (cudaFuncGetAttributes(&fa, attention_kernel<PL, T, NW, true>) == cudaSuccess)
                has_sm90 = fa.ptxVersion >= 90;
            else {
                (void)cudaGetLastError();
                has_sm90 = 0;
            }
        }
        if (has_sm90) {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = 1;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = (unsigned)split;
            cfg.gridDim = dim3(grid.x, grid.y, (unsigned)split);
            cfg.blockDim = dim3(32 * NW);
            cfg.dynamicSmemBytes = 0;
            cfg.stream = s;
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            if (cudaLaunchKernelEx(&cfg, attention_kernel<PL, T, NW, true>, q, pos0, k_cache, v_cache, n_head,
                                   n_head_kv, hd, scale, out) == cudaSuccess) {
                EXC_LAUNCHED(s);
                return EX_GPU_OK;
            }
            (void)cudaGetLastError(); /* refused (e.g. no room for the cluster): the single-block form */
        }
    }
    attention_kernel<PL, T, NW, false><<<grid, 32 * NW, 0, s>>>(q, pos0, k_cache, v_cache, n_head, n_head_kv, hd,
                                                                 scale, out);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

template <typename T, int NW>
static ex_gpu_status attention_launch(dim3 grid, int split, const float *q, int64_t pos0, const T *k_cache,
                                      const T *v_cache, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                                      float scale, float *out, ex_stream s)
{
    int hd = (int)head_dim;
#define ATT_LAUNCH(PL) \
    return attention_launch_pl<PL, T, NW>(grid, split, q, pos0, k_cache, v_cache, n_head, n_head_kv, hd, scale, out, s)
    switch ((head_dim + 31) / 32) {
    case 1: ATT_LAUNCH(1);
    case 2: ATT_LAUNCH(2);
    case 3: ATT_LAUNCH(3);
    case 4: ATT_LAUNCH(4);
    case 5: ATT_LAUNCH(5);
    case 6: ATT_LAUNCH(6);
    case 7: ATT_LAUNCH(7);
    case 8: ATT_LAUNCH(8);
    default: return EX_GPU_EINVAL;
    }
#undef ATT_LAUNCH
}


/* ---- prefill: flash attention on the tensor cores ------------------------------------------------
 * One block of 4 warps per (tile of 64 query tokens, head): Q (pre-scaled), then each tile of 64 cached
 * positions up to the tile's last query position, K and V, rounded to F16 in shared memory; warp w owns
 * query rows 16w..16w+15: S = Q·Kᵀ (WMMA 16×16×16, F32 accumulation) into shared memory, a causal online
 * softmax per row in F32 (running max m and sum l; P = exp(S - m) rounded to F16), O ← O·exp(m_old - m_new)
 * + P·V with O (F32) in shared memory; out = O / l. Dao et al. 2022 (FlashAttention), on WMMA. Used for
 * chunks of more than FA_MIN_TOKENS tokens and head_dim 64, 128 or 256; the error against the F32 CPU op
 * is that of F16 operands (test_cuda_ops: 4e-3 of max |v|). */
#include <mma.h>

#define FA_MIN_TOKENS 8 /* more tokens than this: the tensor-core kernel */
#define FA_BQ 64        /* query tokens per block */
#define FA_BK 64        /* cached positions per step */
#define FA_LDS (FA_BK + 4)

template <int HD>
struct fa_smem {
    static constexpr int LDH = HD + 8, LDO = HD + 4;
    static constexpr size_t q = 0, k = q + (size_t)FA_BQ * LDH * 2, v = k + (size_t)FA_BK * LDH * 2,
                            s = v + (size_t)FA_BK * LDH * 2, p = s + (size_t)FA_BQ * FA_LDS * 4,
                            o = p + (size_t)FA_BQ * (FA_BK + 8) * 2, ml = o + (size_t)FA_BQ * LDO * 4,
                            bytes = ml + (size_t)3 * FA_BQ * 4;
};

template <int HD, typename T>
static __global__ void __launch_bounds__(128)
    fa_prefill_kernel(const float *__restrict__ q, int n_tokens, int64_t pos0, const T *__restrict__ kc,
                      const T *__restrict__ vc, int n_head, int n_head_kv, float scale, float *__restrict__ out)
{
    using namespace nvcuda;
    typedef fa_smem<HD> L;
    extern __shared__ __align__(128) unsigned char fa_sm[];
    __half *Qs = (__half *)(fa_sm + L::q), *Ks = (__half *)(fa_sm + L::k), *Vs = (__half *)(fa_sm + L::v);
    float *Ss = (float *)(fa_sm + L::s), *Os = (float *)(fa_sm + L::o), *Ms = (float *)(fa_sm + L::ml);
    float *Ls = Ms + FA_BQ, *Cs = Ls + FA_BQ;
    __half *Ps = (__half *)(fa_sm + L::p);
    const int t0 = blockIdx.x * FA_BQ, h = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int kvh = h / (n_head / n_head_kv), kv_dim = n_head_kv * HD;
    const int t_end = min(t0 + FA_BQ, n_tokens);
    const int64_t p_last = pos0 + t_end - 1;
    for (int i = tid; i < FA_BQ * HD / 4; i += 128) {
        int r = i / (HD / 4), d = (i % (HD / 4)) * 4, t = t0 + r;
        float4 v = t < n_tokens ? *(const float4 *)(q + ((int64_t)t * n_head + h) * HD + d) : make_float4(0, 0, 0, 0);
        __half2 *dst = (__half2 *)&Qs[r * L::LDH + d];
        dst[0] = __floats2half2_rn(v.x * scale, v.y * scale);
        dst[1] = __floats2half2_rn(v.z * scale, v.w * scale);
        *(float4 *)&Os[r * L::LDO + d] = make_float4(0, 0, 0, 0);
    }
    if (tid < FA_BQ) {
        Ms[tid] = -INFINITY;
        Ls[tid] = 0.0f;
    }
    const int wr = warp * 16;
    const int64_t w_last = pos0 + min(t0 + wr + 15, n_tokens - 1); /* the warp's last query position */
    for (int64_t kv0 = 0; kv0 <= p_last; kv0 += FA_BK) {
        __syncthreads(); /* the previous step's K/V/P reads are done */
        for (int i = tid; i < FA_BK * HD / 4; i += 128) {
            int r = i / (HD / 4), d = (i % (HD / 4)) * 4;
            int64_t p = kv0 + r;
            float kk[4] = {0, 0, 0, 0}, vv[4] = {0, 0, 0, 0};
            if (p <= p_last) {
                const T *kr = kc + p * kv_dim + kvh * HD + d, *vr = vc + p * kv_dim + kvh * HD + d;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    kk[j] = kv_ld(kr[j]);
                    vv[j] = kv_ld(vr[j]);
                }
            }
            __half2 *kd = (__half2 *)&Ks[r * L::LDH + d], *vd = (__half2 *)&Vs[r * L::LDH + d];
            kd[0] = __floats2half2_rn(kk[0], kk[1]);
            kd[1] = __floats2half2_rn(kk[2], kk[3]);
            vd[0] = __floats2half2_rn(vv[0], vv[1]);
            vd[1] = __floats2half2_rn(vv[2], vv[3]);
        }
        __syncthreads();
        if (kv0 > w_last || t0 + wr >= n_tokens) continue; /* every row of this warp is masked here */
#pragma unroll
        for (int nt = 0; nt < FA_BK / 16; nt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.0f);
#pragma unroll
            for (int kk = 0; kk < HD; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, &Qs[wr * L::LDH + kk], L::LDH);
                wmma::load_matrix_sync(fb, &Ks[nt * 16 * L::LDH + kk], L::LDH);
                wmma::mma_sync(sf, fa, fb, sf);
            }
            wmma::store_matrix_sync(&Ss[wr * FA_LDS + nt * 16], sf, FA_LDS, wmma::mem_row_major);
        }
        __syncwarp();
        for (int rr = 0; rr < 16; rr++) {
            int r = wr + rr;
            int64_t qp = pos0 + t0 + r;
            float s0 = kv0 + lane <= qp ? Ss[r * FA_LDS + lane] : -INFINITY;
            float s1 = kv0 + lane + 32 <= qp ? Ss[r * FA_LDS + lane + 32] : -INFINITY;
            float mx = exc_warp_max(fmaxf(s0, s1)), m_old = Ms[r], m_new = fmaxf(m_old, mx);
            float e0 = m_new == -INFINITY ? 0.0f : __expf(s0 - m_new), e1 = m_new == -INFINITY ? 0.0f : __expf(s1 - m_new);
            float sum = exc_warp_sum(e0 + e1);
            Ps[r * (FA_BK + 8) + lane] = __float2half_rn(e0);
            Ps[r * (FA_BK + 8) + lane + 32] = __float2half_rn(e1);
            __syncwarp();
            if (lane == 0) {
                float c = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
                Cs[r] = c;
                Ls[r] = Ls[r] * c + sum;
                Ms[r] = m_new;
            }
        }
        __syncwarp();
        for (int i = lane; i < 16 * HD; i += 32) Os[(wr + i / HD) * L::LDO + i % HD] *= Cs[wr + i / HD];
        __syncwarp();
#pragma unroll
        for (int dt = 0; dt < HD; dt += 16) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, &Os[wr * L::LDO + dt], L::LDO, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < FA_BK; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, &Ps[wr * (FA_BK + 8) + kk], FA_BK + 8);
                wmma::load_matrix_sync(fb, &Vs[kk * L::LDH + dt], L::LDH);
                wmma::mma_sync(of, fa, fb, of);
            }
            wmma::store_matrix_sync(&Os[wr * L::LDO + dt], of, L::LDO, wmma::mem_row_major);
        }
    }
    __syncthreads();
    for (int i = tid; i < FA_BQ * HD; i += 128) {
        int r = i / HD, d = i % HD, t = t0 + r;
        if (t < n_tokens) out[((int64_t)t * n_head + h) * HD + d] = Os[r * L::LDO + d] / Ls[r];
    }
}

template <int HD, typename T>
static ex_gpu_status fa_prefill_launch(const float *q, int64_t n_tokens, int64_t pos0, const T *k_cache,
                                       const T *v_cache, int64_t n_head, int64_t n_head_kv, float scale, float *out,
                                       ex_stream s)
{
    const size_t smem = fa_smem<HD>::bytes;
    static int attr_set; /* one per instantiation; the opt-in above 48 KB */
    if (!attr_set) {
        EXC_CUDA(cudaFuncSetAttribute(fa_prefill_kernel<HD, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attr_set = 1;
    }
    dim3 grid((unsigned)((n_tokens + FA_BQ - 1) / FA_BQ), (unsigned)n_head);
    fa_prefill_kernel<HD, T><<<grid, 128, smem, s>>>(q, (int)n_tokens, pos0, k_cache, v_cache, (int)n_head,
                                                     (int)n_head_kv, scale, out);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

template <typename T>
static ex_gpu_status attention(const float *q, int64_t n_tokens, int64_t pos0, const T *k_cache, const T *v_cache,
                               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float *out, ex_stream s)
{
    if (!q || !k_cache || !v_cache || !out || n_tokens < 1 || pos0 < 0 || n_head < 1 || n_head_kv < 1 ||
        n_head % n_head_kv != 0 || n_tokens > 65535 || head_dim < 1 || head_dim > 32 * ATT_MAX_PER_LANE)
        return EX_GPU_EINVAL;
    if (n_tokens > FA_MIN_TOKENS && n_head <= 65535 && n_head * head_dim <= INT32_MAX / 65535) {
        switch (head_dim) {
        case 64: return fa_prefill_launch<64, T>(q, n_tokens, pos0, k_cache, v_cache, n_head, n_head_kv, scale, out, s);
        case 128: return fa_prefill_launch<128, T>(q, n_tokens, pos0, k_cache, v_cache, n_head, n_head_kv, scale, out, s);
        case 256: return fa_prefill_launch<256, T>(q, n_tokens, pos0, k_cache, v_cache, n_head, n_head_kv, scale, out, s);
        default: break; /* other head sizes: the kernel above */
        }
    }
    dim3 grid((unsigned)n_head, (unsigned)n_tokens);
    int nw, split;
    att_shape(n_head * n_tokens, pos0 + 1, &nw, &split);
    if (split < 1 || split > ATT_MAX_SPLIT) return EX_GPU_EINVAL;
    switch (nw) {
    case 4: return attention_launch<T, 4>(grid, split, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    case 8: return attention_launch<T, 8>(grid, split, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    case 16: return attention_launch<T, 16>(grid, split, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    case 32: return attention_launch<T, 32>(grid, split, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    default: return EX_GPU_EINVAL;
    }
}

extern "C" ex_gpu_status ex_cuda_attention(const float *q, int64_t n_tokens, int64_t pos0, const float *k_cache,
                                           const float *v_cache, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                                           float scale, float *out, ex_stream s)
{
    return attention<float>(q, n_tokens, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
}

extern "C" ex_gpu_status ex_cuda_attention_f16(const float *q, int64_t n_tokens, int64_t pos0, const ex_fp16 *k_cache,
                                               const ex_fp16 *v_cache, int64_t n_head, int64_t n_head_kv,
                                               int64_t head_dim, float scale, float *out, ex_stream s)
{
    return attention<__half>(q, n_tokens, pos0, reinterpret_cast<const __half *>(k_cache),
                             reinterpret_cast<const __half *>(v_cache), n_head, n_head_kv, head_dim, scale, out, s);
}
