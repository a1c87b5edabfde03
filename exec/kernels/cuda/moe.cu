/*
 * Routed experts (ex/ops.h semantics): out[t] = Σ_j weights[t,j] · FFN_{ids[t,j]}(x[t]).
 * The expert ids stay on the device and are never read on the host (the CUDA backend table keeps the
 * router's output on the device), so they are validated here, on the device: an id outside
 * [0, n_expert) computes with expert 0 (never an out-of-range read) and the combine kernel writes NaN
 * over the whole output row of that token (visible downstream, as ex_cuda_embedding does for a bad
 * token), instead of ex_cpu_moe's ATS_EINVAL.
 *
 * Decode (n_tokens ≤ 8): one batched GEMV launch per projection covers every (token, slot) pair, each
 * reading only its chosen expert's matrix (int8 activations, gemv.cu).
 * Prefill (more tokens): the pairs are grouped by expert on the device (moe_route_kernel: counting sort
 * in one block, then a table of tiles of ≤ MOE_BN pairs of one expert), and two grouped GEMM launches
 * cover all experts of the layer: gate+up with SwiGLU in the epilogue (H, F16, in sorted pair order) and
 * down (D, F32, scattered back to pair order); each tile dequantizes its expert's weight rows to F16 in
 * shared memory once for all its tokens and multiplies on the tensor cores (WMMA 16×16×16, F32
 * accumulation). So a prefill chunk reads and dequantizes each chosen expert's weights once per tile of
 * 64 of its pairs, not once per pair. H is F16: a SwiGLU output beyond ±65504 would become ±inf (the
 * dense prefill GEMM rounds its activations to F16 likewise). The combine kernel sums the k slots of each token in slot order (deterministic).
 */
#include "common.cuh"

#include <mma.h>

#include "dequant.cuh"
#include "ex/gpu.h"
#include "ex/ops.h"

/* Up to this many tokens, the batched GEMV (weights re-read per pair) beats grouping. */
#define MOE_GEMV_MAX_TOKENS 8

/* safe[z] = ids[z] when it names an expert, else 0 */
static __global__ void moe_ids_kernel(const int32_t *__restrict__ ids, int64_t nz, int64_t n_exp,
                                      int32_t *__restrict__ safe)
{
    int64_t z = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (z < nz) {
        int32_t id = ids[z];
        safe[z] = id >= 0 && id < n_exp ? id : 0;
    }
}

/* out[t][e] = Σ_j w[t,j] · D[t·k + j][e]; NaN for a token with an id outside [0, n_exp) */
static __global__ void moe_combine_kernel(const float *__restrict__ D, const float *__restrict__ w,
                                          const int32_t *__restrict__ ids, int64_t n_exp, int64_t n_tokens,
                                          int64_t k, int64_t n_embd, float *__restrict__ out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tokens * n_embd) return;
    int64_t t = i / n_embd, e = i % n_embd;
    float acc = 0.0f;
    int bad = 0;
    for (int64_t j = 0; j < k; j++) {
        int32_t id = ids[t * k + j];
        bad |= id < 0 || id >= n_exp;
        acc += w[t * k + j] * D[(t * k + j) * n_embd + e];
    }
    out[i] = bad ? __int_as_float(0x7fc00000) : acc;
}

/* ---- prefill: grouping by expert ------------------------------------------------------------------ */
#define MOE_BM 64  /* weight rows per tile */
#define MOE_BN 64  /* pairs (token, slot) per tile, all of one expert (Qwen3-30B-A3B at 512 tokens: 32 an expert on average) */
#define MOE_KT 128 /* columns per step (4 blocks of 32) */
#define MOE_LDW (MOE_KT + 8) /* F16 row stride in shared memory (16-byte pad against bank conflicts) */
#define MOE_THREADS 256
#define MOE_MAX_EXP 1024

/* One block of 1024 threads: perm[p] = pair z, sorted by expert (safe id; the order inside an expert is
 * whatever the atomics give, which changes no result: every output element of a pair is computed by the
 * same arithmetic in whichever tile it lands); tiles: tile i covers sorted pairs [pos[i], pos[i] + cnt[i])
 * of expert ex[i]; *n_tiles of them (≤ nz / MOE_BN + n_exp). */
static __global__ void __launch_bounds__(1024)
    moe_route_kernel(const int32_t *__restrict__ ids, int nz, int n_exp, int32_t *__restrict__ perm,
                     int32_t *__restrict__ tile_ex, int32_t *__restrict__ tile_pos, int32_t *__restrict__ tile_cnt,
                     int32_t *__restrict__ n_tiles)
{
    __shared__ int cnt[MOE_MAX_EXP], off[MOE_MAX_EXP], toff[MOE_MAX_EXP + 1];
    for (int e = threadIdx.x; e < n_exp; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int z = threadIdx.x; z < nz; z += blockDim.x) {
        int id = ids[z];
        atomicAdd(&cnt[id >= 0 && id < n_exp ? id : 0], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) { /* n_exp ≤ 1024: a serial scan is a few µs at most (128 experts: < 1 µs) */
        int o = 0, to = 0;
        for (int e = 0; e < n_exp; e++) {
            off[e] = o;
            toff[e] = to;
            o += cnt[e];
            to += (cnt[e] + MOE_BN - 1) / MOE_BN;
        }
        toff[n_exp] = to;
        *n_tiles = to;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_exp; e += blockDim.x)
        for (int i = 0; toff[e] + i < toff[e + 1]; i++) {
            tile_ex[toff[e] + i] = e;
            tile_pos[toff[e] + i] = off[e] + i * MOE_BN;
            tile_cnt[toff[e] + i] = min(MOE_BN, cnt[e] - i * MOE_BN);
        }
    __syncthreads();
    for (int e = threadIdx.x; e < n_exp; e += blockDim.x) cnt[e] = 0; /* now the fill cursors */
    __syncthreads();
    for (int z = threadIdx.x; z < nz; z += blockDim.x) {
        int id = ids[z];
        int e = id >= 0 && id < n_exp ? id : 0;
        perm[off[e] + atomicAdd(&cnt[e], 1)] = z;
    }
}

/* 32 dequantized values as F16 into shared memory (16-byte stores). */
static __device__ __forceinline__ void st32_half(__half *dst, const float *v)
{
#pragma unroll
    for (int j = 0; j < 4; j++) {
        __half2 h[4];
#pragma unroll
        for (int i = 0; i < 4; i++) h[i] = __floats2half2_rn(v[8 * j + 2 * i], v[8 * j + 2 * i + 1]);
        *(uint4 *)(dst + 8 * j) = *(uint4 *)h;
    }
}

/*
 * Grouped expert GEMM over the tiles of moe_route_kernel: block (x, y) = (weight rows [64x, 64x + 64),
 * tile y). GATED (gate + up): A = gate and up of the tile's expert (n_out = n_ff rows of n_in = n_embd
 * columns), B = x rows of the tile's pairs (F32, token z / k), H[p][r] = silu(g)·u as F16 at sorted
 * position p. Not GATED (down): A = down (n_embd rows of n_ff), B = H rows p (F16), D[z][r] F32 at pair z.
 * Per step of 128 columns each thread dequantizes one block of 32 of one row per matrix (deq32, exact)
 * into F16 shared memory; 8 warps each own a 16×32 output tile (rows 16·(w % 4), pairs 32·(w / 4)).
 * Blocks past *n_tiles return at once (the grid is sized for the most tiles there can be).
 */
template <int TYPE, bool GATED>
static __global__ void __launch_bounds__(MOE_THREADS)
    moe_mm_kernel(const uint8_t *__restrict__ Wa, const uint8_t *__restrict__ Wb, uint64_t mat_bytes,
                  uint64_t row_bytes, int n_out, int n_in, const float *__restrict__ x, int k_slots,
                  const __half *__restrict__ Hin, const int32_t *__restrict__ perm, const int32_t *__restrict__ tile_ex,
                  const int32_t *__restrict__ tile_pos, const int32_t *__restrict__ tile_cnt,
                  const int32_t *__restrict__ n_tiles, __half *__restrict__ Hout, float *__restrict__ Dout)
{
    using namespace nvcuda;
    constexpr int NA = GATED ? 2 : 1;
    extern __shared__ __align__(128) unsigned char moe_sm[]; /* NA weight tiles, the activation tile */
    __half *sw0 = (__half *)moe_sm, *sx = sw0 + NA * MOE_BM * MOE_LDW;
    __shared__ int s_row[MOE_BN];
    const int tile = blockIdx.y;
    if (tile >= *n_tiles) return;
    const int ex = tile_ex[tile], pos = tile_pos[tile], cnt = tile_cnt[tile];
    const int r0 = blockIdx.x * MOE_BM, tid = threadIdx.x, warp = tid >> 5;
    if (tid < MOE_BN) s_row[tid] = tid < cnt ? (GATED ? perm[pos + tid] / k_slots : perm[pos + tid]) : -1;
    __syncthreads();
    const uint8_t *wa = Wa + (uint64_t)ex * mat_bytes, *wb = GATED ? Wb + (uint64_t)ex * mat_bytes : NULL;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NA][2];
#pragma unroll
    for (int a = 0; a < NA; a++) {
        wmma::fill_fragment(acc[a][0], 0.0f);
        wmma::fill_fragment(acc[a][1], 0.0f);
    }
    const int wr = (warp & 3) * 16, wn = (warp >> 2) * 32; /* 16 rows × 32 pairs a warp */
    const int lr = tid >> 2, lc = tid & 3; /* this thread's weight row and block of 32 in a step */
    for (int k0 = 0; k0 < n_in; k0 += MOE_KT) {
        { /* weights: rows r0 + lr, columns k0 + 32·lc .. +32 */
            int r = r0 + lr, c = k0 + 32 * lc;
            float v[32];
#pragma unroll
            for (int a = 0; a < NA; a++) {
                if (r < n_out && c < n_in) deq32(TYPE, (a ? wb : wa) + (uint64_t)r * row_bytes, c / 32, v);
                else
#pragma unroll
                    for (int j = 0; j < 32; j++) v[j] = 0.0f;
                st32_half(&sw0[a * MOE_BM * MOE_LDW + lr * MOE_LDW + 32 * lc], v);
            }
        }
        /* activations: MOE_BN rows × 128 columns, 8 values a thread-step */
        for (int i = tid; i < MOE_BN * MOE_KT / 8; i += MOE_THREADS) {
            int j = i / (MOE_KT / 8), c = (i % (MOE_KT / 8)) * 8, row = s_row[j];
            uint4 h = make_uint4(0, 0, 0, 0);
            if (row >= 0 && k0 + c < n_in) {
                if (GATED) {
                    const float4 *src = (const float4 *)(x + (int64_t)row * n_in + k0 + c);
                    float4 a = src[0], b = src[1];
                    __half2 hh[4] = {__floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w),
                                     __floats2half2_rn(b.x, b.y), __floats2half2_rn(b.z, b.w)};
                    h = *(uint4 *)hh;
                } else {
                    h = *(const uint4 *)(Hin + (int64_t)(pos + j) * n_in + k0 + c);
                }
            }
            *(uint4 *)&sx[j * MOE_LDW + c] = h;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MOE_KT; kk += 16) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[2];
            wmma::load_matrix_sync(fb[0], &sx[wn * MOE_LDW + kk], MOE_LDW);
            wmma::load_matrix_sync(fb[1], &sx[(wn + 16) * MOE_LDW + kk], MOE_LDW);
#pragma unroll
            for (int a = 0; a < NA; a++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
                wmma::load_matrix_sync(fa, &sw0[a * MOE_BM * MOE_LDW + wr * MOE_LDW + kk], MOE_LDW);
                wmma::mma_sync(acc[a][0], fa, fb[0], acc[a][0]);
                wmma::mma_sync(acc[a][1], fa, fb[1], acc[a][1]);
            }
        }
        __syncthreads();
    }
    if (GATED) /* SwiGLU on the accumulators: gate and up fragments have the same layout */
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int i = 0; i < acc[0][n].num_elements; i++) {
                float gv = acc[0][n].x[i];
                acc[0][n].x[i] = gv / (1.0f + __expf(-gv)) * acc[NA - 1][n].x[i];
            }
    /* stage C (rows × pairs) as [pair][row] F32 in the weight buffer, then write whole rows */
    float *sc = (float *)sw0; /* MOE_BN × (MOE_BM + 4) floats ≤ one weight tile */
    wmma::store_matrix_sync(&sc[wn * (MOE_BM + 4) + wr], acc[0][0], MOE_BM + 4, wmma::mem_col_major);
    wmma::store_matrix_sync(&sc[(wn + 16) * (MOE_BM + 4) + wr], acc[0][1], MOE_BM + 4, wmma::mem_col_major);
    __syncthreads();
    for (int i = tid; i < MOE_BN * MOE_BM; i += MOE_THREADS) {
        int j = i / MOE_BM, r = i % MOE_BM;
        if (j >= cnt || r0 + r >= n_out) continue;
        float v = sc[j * (MOE_BM + 4) + r];
        if (GATED) Hout[(int64_t)(pos + j) * n_out + r0 + r] = __float2half_rn(v);
        else Dout[(int64_t)s_row[j] * n_out + r0 + r] = v;
    }
}
static_assert(MOE_BN * (MOE_BM + 4) * 4 <= MOE_BM * MOE_LDW * 2, "the staging tile fits one weight tile");

template <bool GATED>
static ex_gpu_status moe_mm(int type, const ex_tensor *wa, const ex_tensor *wb, const float *x, int k_slots,
                            const __half *Hin, const int32_t *perm, const int32_t *tex, const int32_t *tpos,
                            const int32_t *tcnt, const int32_t *ntiles, int max_tiles, __half *Hout, float *Dout,
                            cudaStream_t s)
{
    int n_out = (int)wa->ne[1], n_in = (int)wa->ne[0];
    uint64_t mat = wa->row_bytes * (uint64_t)wa->ne[1];
    dim3 grid((unsigned)((n_out + MOE_BM - 1) / MOE_BM), (unsigned)max_tiles);
    const uint8_t *A = (const uint8_t *)wa->data, *B = wb ? (const uint8_t *)wb->data : NULL;
    const size_t smem = (size_t)((GATED ? 2 : 1) * MOE_BM + MOE_BN) * MOE_LDW * 2;
#define MOE_MM(T)                                                                                                     \
    {                                                                                                                 \
        static int attr_set; /* one per instantiation: the opt-in above 48 KB */                                      \
        if (!attr_set) {                                                                                              \
            EXC_CUDA(cudaFuncSetAttribute(moe_mm_kernel<T, GATED>, cudaFuncAttributeMaxDynamicSharedMemorySize,       \
                                          (int)smem));                                                                \
            attr_set = 1;                                                                                             \
        }                                                                                                             \
        moe_mm_kernel<T, GATED><<<grid, MOE_THREADS, smem, s>>>(A, B, mat, wa->row_bytes, n_out, n_in, x, k_slots,    \
                                                                Hin, perm, tex, tpos, tcnt, ntiles, Hout, Dout);      \
    }                                                                                                                 \
    break
    switch (type) {
    case ATS_Q_Q4_0: MOE_MM(ATS_Q_Q4_0);
    case ATS_Q_Q8_0: MOE_MM(ATS_Q_Q8_0);
    case ATS_Q_Q4_K: MOE_MM(ATS_Q_Q4_K);
    case ATS_Q_Q6_K: MOE_MM(ATS_Q_Q6_K);
    case ATS_Q_MXFP4: MOE_MM(ATS_Q_MXFP4);
    case ATS_Q_F16: MOE_MM(ATS_Q_F16);
    case ATS_Q_BF16: MOE_MM(ATS_Q_BF16);
    case ATS_Q_F32: MOE_MM(ATS_Q_F32);
    default: return EX_GPU_EINVAL;
    }
#undef MOE_MM
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

static ex_gpu_status moe_prefill(ex_gpu *g, const ex_tensor *ge, const ex_tensor *ue, const ex_tensor *de,
                                 const float *x, int64_t n_tokens, const int32_t *ids, const float *weights, int64_t k,
                                 float *out, cudaStream_t s)
{
    int64_t n_embd = ge->ne[0], n_ff = ge->ne[1], n_exp = ge->ne[2], nz = n_tokens * k;
    if (n_exp > MOE_MAX_EXP || n_embd % 32 || n_ff % 32 || n_embd > INT32_MAX / 2 || n_ff > INT32_MAX / 2)
        return EX_GPU_EINVAL;
    int max_tiles = (int)(nz / MOE_BN + n_exp);
    size_t b_perm = (size_t)nz * 4, b_tiles = (size_t)(3 * max_tiles + 1) * 4;
    size_t o_tiles = (b_perm + 255) / 256 * 256, o_h = o_tiles + (b_tiles + 255) / 256 * 256;
    size_t o_d = o_h + ((size_t)nz * (size_t)n_ff * 2 + 255) / 256 * 256;
    size_t bytes = o_d + (size_t)nz * (size_t)n_embd * 4;
    void *ws;
    ex_gpu_status st;
    if ((st = exc_workspace(g, EXC_WS_MOE, bytes, &ws))) return st;
    char *base = (char *)ws;
    int32_t *perm = (int32_t *)base, *tex = (int32_t *)(base + o_tiles), *tpos = tex + max_tiles,
            *tcnt = tpos + max_tiles, *ntiles = tcnt + max_tiles;
    __half *H = (__half *)(base + o_h);
    float *D = (float *)(base + o_d);
    moe_route_kernel<<<1, 1024, 0, s>>>(ids, (int)nz, (int)n_exp, perm, tex, tpos, tcnt, ntiles);
    EXC_LAUNCHED(s);
    if ((st = moe_mm<true>((int)ge->type, ge, ue, x, (int)k, NULL, perm, tex, tpos, tcnt, ntiles, max_tiles, H, NULL, s)))
        return st;
    if ((st = moe_mm<false>((int)de->type, de, NULL, NULL, 1, H, perm, tex, tpos, tcnt, ntiles, max_tiles, NULL, D, s)))
        return st;
    int64_t n = n_tokens * n_embd;
    moe_combine_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(D, weights, ids, n_exp, n_tokens, k, n_embd, out);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

extern "C" ex_gpu_status ex_cuda_moe(ex_gpu *g, const ex_tensor *gate_exps, const ex_tensor *up_exps,
                                     const ex_tensor *down_exps, const float *x, int64_t n_tokens, const int32_t *ids,
                                     const float *weights, int64_t k, float *out, ex_stream s)
{
    if (!g || !gate_exps || !up_exps || !down_exps || !x || !ids || !weights || !out || n_tokens < 1 || k < 1)
        return EX_GPU_EINVAL;
    int64_t n_embd = gate_exps->ne[0], n_ff = gate_exps->ne[1], n_exp = gate_exps->ne[2];
    if (up_exps->ne[0] != n_embd || up_exps->ne[1] != n_ff || up_exps->ne[2] != n_exp || down_exps->ne[0] != n_ff ||
        down_exps->ne[1] != n_embd || down_exps->ne[2] != n_exp || up_exps->type != gate_exps->type)
        return EX_GPU_EINVAL;
    int64_t nz = n_tokens * k;
    if (nz > 65535) return EX_GPU_EINVAL;
    if (n_tokens > MOE_GEMV_MAX_TOKENS)
        return moe_prefill(g, gate_exps, up_exps, down_exps, x, n_tokens, ids, weights, k, out, s);
    void *ws;
    ex_gpu_status st;
    if ((st = exc_workspace(g, EXC_WS_MOE, (size_t)(2 * nz * n_ff + nz * n_embd + nz) * sizeof(float), &ws))) return st;
    float *G = (float *)ws, *U = G + nz * n_ff, *D = U + nz * n_ff;
    int32_t *safe = (int32_t *)(D + nz * n_embd);
    moe_ids_kernel<<<(unsigned)((nz + 255) / 256), 256, 0, s>>>(ids, nz, n_exp, safe);
    EXC_LAUNCHED(s);
    int64_t gate_mat = (int64_t)(gate_exps->row_bytes * (uint64_t)n_ff);
    int64_t down_mat = (int64_t)(down_exps->row_bytes * (uint64_t)n_embd);
    /* gate/up: z = t·k + j reads x row t (x_div = k) and matrix ids[z] */
    if ((st = exc_gemv_batched(g, (int)gate_exps->type, gate_exps->data, n_ff, n_embd, gate_mat, safe, 0, (int)k, (int)nz, x, G, s)))
        return st;
    if ((st = exc_gemv_batched(g, (int)up_exps->type, up_exps->data, n_ff, n_embd, gate_mat, safe, 0, (int)k, (int)nz, x, U, s)))
        return st;
    if ((st = ex_cuda_swiglu(G, U, nz * n_ff, G, s))) return st;
    if ((st = exc_gemv_batched(g, (int)down_exps->type, down_exps->data, n_embd, n_ff, down_mat, safe, 0, 1, (int)nz, G, D, s)))
        return st;
    int64_t n = n_tokens * n_embd;
    moe_combine_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(D, weights, ids, n_exp, n_tokens, k, n_embd, out);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
