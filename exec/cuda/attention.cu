/*
 * KV-cache append and causal GQA attention over one layer's KV cache (ex/ops.h semantics), F32 or
 * F16 (the session's kv_type): kernels templated on the cache element T; with T = __half the store
 * rounds F32 K/V to __half (__float2half_rn: round to nearest even, the CPU op's bits) and attention
 * widens each K/V element to F32 as it loads it; every product and sum is F32 for both types.
 * One thread block of NW warps per (query token, head); each warp walks a strided share of the
 * positions 0..p, two positions per step, with an online softmax (running max, sum, and the weighted V
 * sum in registers, head_dim/32 values per lane), then the NW partial results are merged in shared
 * memory. NW = 4 when the (head, token) blocks fill the GPU (prefill chunks); with few blocks and many
 * positions (decode at long contexts: 40 blocks for Qwen3-14B) NW grows to 8/16/32, so each warp's
 * serial chain of dependent loads, shuffles and exps is up to 8x shorter (x2 more from the two
 * positions per step) — the decode attention was latency-bound, not bandwidth-bound (task AA). Works for
 * decode (1 token) and prefill chunks alike; any head_dim ≤ 256 (lanes past head_dim idle).
 * Vaswani et al. 2017 (attention), Ainslie et al. 2023 (GQA), Milakov & Gimelshein 2018 (online softmax).
 */
#include "common.cuh"

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

/* One block of NW warps per (query token, head). Warp w takes the positions w, w + NW, ... two at a time
 * (positions p and p + NW: two independent row loads and dot products in flight, one softmax update),
 * with an online softmax in registers; then the NW partials are merged in shared memory. */
template <int PL, typename T, int NW> /* PL = ceil(head_dim / 32); T: the cache element, float or __half */
static __global__ void __launch_bounds__(32 * NW)
    attention_kernel(const float *__restrict__ q, int64_t pos0, const T *__restrict__ kc,
                     const T *__restrict__ vc, int64_t n_head, int64_t n_head_kv, int HD, float scale,
                     float *__restrict__ out)
{
    __shared__ float sm_m[NW], sm_l[NW], sm_acc[NW][PL * 32];
    int64_t t = blockIdx.y, h = blockIdx.x;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int64_t kvh = h / (n_head / n_head_kv), kv_dim = n_head_kv * HD;
    const float *qv = q + (t * n_head + h) * HD;
    float qr[PL], acc[PL];
#pragma unroll
    for (int i = 0; i < PL; i++) {
        qr[i] = lane + 32 * i < HD ? qv[lane + 32 * i] * scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int64_t p_last = pos0 + t;
    const T *kb = kc + kvh * HD, *vb = vc + kvh * HD;
    for (int64_t p = w; p <= p_last; p += 2 * NW) {
        const bool two = p + NW <= p_last;
        const T *kr0 = kb + p * kv_dim, *kr1 = kb + (two ? p + NW : p) * kv_dim;
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
        const T *vr0 = vb + p * kv_dim, *vr1 = vb + (two ? p + NW : p) * kv_dim;
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
        o[i] = sum / L;
    }
}

static int g_att_warps_forced; /* ex_cuda_attention_force_warps: 0 = chosen from the launch shape */

extern "C" void ex_cuda_attention_force_warps(int nw) { g_att_warps_forced = nw; }

/* Multiprocessor count of the current device, asked once per device and cached (0 if the query fails). */
static int att_sm_count(void)
{
    static int cached[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        (void)cudaGetLastError();
        return 0;
    }
    if (!cached[dev]) {
        int n = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        cached[dev] = n;
    }
    return cached[dev];
}

/* Warps per block: 4 when the (head, token) blocks alone fill the device (prefill), otherwise the most
 * of 8/16/32 that keeps the grid within ~32 warps per SM (half an SM's 64) and gives each warp at
 * least 16 positions. Decode of Qwen3-14B (40 heads, 132 SMs): 32 warps from 512 positions on. */
static int att_warps(int64_t n_blocks, int64_t n_pos)
{
    if (g_att_warps_forced) return g_att_warps_forced;
    int sms = att_sm_count();
    if (sms < 1) sms = 1;
    int nw = 4;
    for (int c = 8; c <= 32; c *= 2)
        if (n_blocks * c <= (int64_t)sms * 32 && (int64_t)c * 16 <= n_pos) nw = c;
    return nw;
}

template <typename T, int NW>
static ex_gpu_status attention_launch(dim3 grid, const float *q, int64_t pos0, const T *k_cache, const T *v_cache,
                                      int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float *out,
                                      ex_stream s)
{
    int hd = (int)head_dim;
#define ATT_LAUNCH(PL) \
    attention_kernel<PL, T, NW><<<grid, 32 * NW, 0, s>>>(q, pos0, k_cache, v_cache, n_head, n_head_kv, hd, scale, out)
    switch ((head_dim + 31) / 32) {
    case 1: ATT_LAUNCH(1); break;
    case 2: ATT_LAUNCH(2); break;
    case 3: ATT_LAUNCH(3); break;
    case 4: ATT_LAUNCH(4); break;
    case 5: ATT_LAUNCH(5); break;
    case 6: ATT_LAUNCH(6); break;
    case 7: ATT_LAUNCH(7); break;
    case 8: ATT_LAUNCH(8); break;
    default: return EX_GPU_EINVAL;
    }
#undef ATT_LAUNCH
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
    dim3 grid((unsigned)n_head, (unsigned)n_tokens);
    switch (att_warps(n_head * n_tokens, pos0 + 1)) {
    case 4: return attention_launch<T, 4>(grid, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    case 8: return attention_launch<T, 8>(grid, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    case 16: return attention_launch<T, 16>(grid, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
    case 32: return attention_launch<T, 32>(grid, q, pos0, k_cache, v_cache, n_head, n_head_kv, head_dim, scale, out, s);
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
