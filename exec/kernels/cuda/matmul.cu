/*
 * Matmul y = W·x on the GPU: decode GEMV (gemv.cu) for a few tokens, dequantize + cuBLAS GEMM
 * (cublasGemmEx, 16-bit operands, F32 accumulation) for prefill chunks. Also the dequantize kernel
 * (exact per ../shared/models/QUANT_FORMATS.md, rounded to the destination type) and the output head.
 */
#include "common.cuh"

#include <cublas_v2.h>

#include "ats/quant.h"
#include "ex/ops.h"

/* Up to this many tokens, one GEMV per token (weights re-read from L2/HBM) beats dequantizing. */
#define EXC_GEMV_MAX_TOKENS 8

#define EXC_CUBLAS(call)                                                                         \
    do {                                                                                         \
        cublasStatus_t exc_cs_ = (call);                                                         \
        if (exc_cs_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "cuBLAS error at %s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
                    cublasGetStatusString(exc_cs_));                                             \
            return EX_GPU_ECUBLAS;                                                               \
        }                                                                                        \
    } while (0)

#include "dequant.cuh"

/* One thread per 32 consecutive elements; 16-bit results go through shared memory so the block
 * writes its 128·64 bytes with coalesced 16-byte stores. */
#define DEQ_THREADS 128
static __global__ void __launch_bounds__(DEQ_THREADS)
    dequantize_kernel(int type, const uint8_t *__restrict__ src, int64_t n_chunks, int dst_type, void *__restrict__ dst)
{
    __shared__ uint4 sm[DEQ_THREADS * 4]; /* 32 halves per thread */
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float v[32];
    if (c < n_chunks) deq32(type, src, c, v);
    if (dst_type == ATS_Q_F32) {
        if (c < n_chunks) {
            float *o = (float *)dst + c * 32;
            for (int j = 0; j < 32; j++) o[j] = v[j];
        }
        return;
    }
    if (c < n_chunks) {
        uint32_t *o = (uint32_t *)(sm + threadIdx.x * 4);
#pragma unroll
        for (int j = 0; j < 16; j++) {
            if (dst_type == ATS_Q_F16) {
                __half2 h = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
                o[j] = *(uint32_t *)&h;
            } else {
                __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
                o[j] = *(uint32_t *)&h;
            }
        }
    }
    __syncthreads();
    int64_t c_first = (int64_t)blockIdx.x * blockDim.x;
    int64_t n_here = n_chunks - c_first < DEQ_THREADS ? n_chunks - c_first : DEQ_THREADS;
    uint4 *out = (uint4 *)dst + c_first * 4;
    for (int i = threadIdx.x; i < n_here * 4; i += DEQ_THREADS) out[i] = sm[i];
}

extern "C" ex_gpu_status ex_cuda_dequantize(int type, const void *src, int64_t n, int dst_type, void *dst, ex_stream s)
{
    int be = ats_qtype_block_elems((ats_qtype)type);
    if (!src || !dst || be == 0 || n < 1 || n % be != 0 || n % 32 != 0) return EX_GPU_EINVAL;
    if (dst_type != ATS_Q_F16 && dst_type != ATS_Q_BF16 && dst_type != ATS_Q_F32) return EX_GPU_EINVAL;
    int64_t nc = n / 32;
    if (dst_type != ATS_Q_F32 && (uintptr_t)dst % 16 != 0) return EX_GPU_EINVAL;
    dequantize_kernel<<<(unsigned)((nc + DEQ_THREADS - 1) / DEQ_THREADS), DEQ_THREADS, 0, s>>>(type, (const uint8_t *)src, nc,
                                                                                              dst_type, dst);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

static __global__ void f32_to_16_kernel(const float *__restrict__ x, int64_t n, int bf16, void *__restrict__ y)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (bf16) ((__nv_bfloat16 *)y)[i] = __float2bfloat16_rn(x[i]);
    else ((__half *)y)[i] = __float2half_rn(x[i]);
}

static ex_gpu_status gemm_ex(ex_gpu *g, cudaDataType_t t, const void *W, int64_t m, int64_t k, const void *X,
                             int64_t n, float *Y, cudaStream_t s)
{
    /* Column-major view: Yᵀ (m × n) = W (k × m)ᵀ · Xᵀ (k × n), W and X row-major as (m, k), (n, k). */
    cublasHandle_t h = (cublasHandle_t)exc_cublas(g);
    const float one = 1.0f, zero = 0.0f;
    EXC_CUBLAS(cublasSetStream(h, s));
    EXC_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, W, t, (int)k, X, t, (int)k,
                            &zero, Y, CUDA_R_32F, (int)m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return EX_GPU_OK;
}

extern "C" ex_gpu_status ex_cuda_gemm_16(ex_gpu *g, int bf16, const void *W, int64_t m, int64_t k, const void *X,
                                         int64_t n, float *Y, ex_stream s)
{
    if (!g || !W || !X || !Y || m < 1 || k < 1 || n < 1 || m > INT32_MAX || k > INT32_MAX || n > INT32_MAX)
        return EX_GPU_EINVAL;
    return gemm_ex(g, bf16 ? CUDA_R_16BF : CUDA_R_16F, W, m, k, X, n, Y, s);
}

extern "C" ex_gpu_status ex_cuda_gemm(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *X,
                                      int64_t n_tok, float *Y, ex_stream s)
{
    if (!g || !W || !X || !Y || rows < 1 || cols < 1 || n_tok < 1) return EX_GPU_EINVAL;
    if (rows > INT32_MAX || cols > INT32_MAX || n_tok > INT32_MAX) return EX_GPU_EINVAL;
    if (n_tok == 1) return ex_cuda_gemv(g, type, W, rows, cols, X, Y, s);
    if (type == ATS_Q_F32) {
        cublasHandle_t h = (cublasHandle_t)exc_cublas(g);
        const float one = 1.0f, zero = 0.0f;
        EXC_CUBLAS(cublasSetStream(h, s));
        EXC_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n_tok, (int)cols, &one, W, CUDA_R_32F,
                                (int)cols, X, CUDA_R_32F, (int)cols, &zero, Y, CUDA_R_32F, (int)rows,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return EX_GPU_OK;
    }
    int bf16 = type == ATS_Q_BF16;
    const void *W16 = W;
    ex_gpu_status st;
    if (type != ATS_Q_F16 && type != ATS_Q_BF16) {
        void *wd;
        if ((st = exc_workspace(g, EXC_WS_WDEQ, (size_t)rows * (size_t)cols * 2, &wd))) return st;
        if ((st = ex_cuda_dequantize(type, W, rows * cols, ATS_Q_F16, wd, s))) return st;
        W16 = wd;
    }
    void *x16;
    int64_t nx = n_tok * cols;
    if ((st = exc_workspace(g, EXC_WS_X16, (size_t)nx * 2, &x16))) return st;
    f32_to_16_kernel<<<(unsigned)((nx + 255) / 256), 256, 0, s>>>(X, nx, bf16, x16);
    EXC_LAUNCHED(s);
    return gemm_ex(g, bf16 ? CUDA_R_16BF : CUDA_R_16F, W16, rows, cols, x16, n_tok, Y, s);
}

/* ---- the ops of ex/ops.h ---------------------------------------------------------------------- */
static int tensor_ok(const ex_tensor *w)
{
    return w && w->data && w->ne[0] > 0 && w->ne[1] > 0 && ats_qtype_block_elems(w->type) > 0 &&
           w->ne[0] % ats_qtype_block_elems(w->type) == 0;
}

extern "C" ex_gpu_status ex_cuda_matmul(ex_gpu *g, const ex_tensor *w, const float *x, int64_t n_tokens, float *y,
                                        ex_stream s)
{
    if (!tensor_ok(w) || !x || !y || n_tokens < 1) return EX_GPU_EINVAL;
    if (n_tokens <= EXC_GEMV_MAX_TOKENS)
        return exc_gemv_batched(g, (int)w->type, w->data, w->ne[1], w->ne[0], 0, NULL, 0, 1, (int)n_tokens, x, y, s);
    return ex_cuda_gemm(g, (int)w->type, w->data, w->ne[1], w->ne[0], x, n_tokens, y, s);
}

extern "C" ex_gpu_status ex_cuda_output(ex_gpu *g, const ex_tensor *w_out, const float *x, int64_t n_tokens,
                                        float *logits, ex_stream s)
{
    return ex_cuda_matmul(g, w_out, x, n_tokens, logits, s);
}
