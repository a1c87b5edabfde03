/* RMSNorm and the Q/K norm (the same per-vector RMSNorm over head vectors); ex/ops.h semantics. */
#include "common.cuh"

#include "ex/ops.h"

/* One block per row; sum of squares in F32 (as the CPU op), y = x · rsqrt(mean + eps) · w.
 * Loops unrolled by 4 so that a thread's loads are in flight together: with 256 threads on a 5120-wide
 * row each thread used to wait for 20 loads of x and then 20 of w one after another (~11 µs per call
 * under Nsight Compute on the H200, 1.75 ms of a Qwen3-14B decode step); rows of ≥ 4096 now get 1024
 * threads (5 elements each). */
static __global__ void rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, int n, float eps,
                                      float *y)
{
    __shared__ float sh[32];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float ss = 0.0f;
#pragma unroll 4
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = exc_block_sum(ss, sh);
    float r = rsqrtf(ss / (float)n + eps);
#pragma unroll 4
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * r * w[i];
}

static ex_gpu_status rmsnorm_rows(const float *x, const float *w, int64_t n_rows, int64_t n, float eps, float *y,
                                  cudaStream_t s)
{
    if (!x || !w || !y || n_rows < 1 || n < 1 || n_rows > INT32_MAX || n > INT32_MAX / 2) return EX_GPU_EINVAL;
    int threads = n >= 4096 ? 1024 : n >= 1024 ? 256 : n >= 128 ? 128 : 32;
    rmsnorm_kernel<<<(unsigned)n_rows, threads, 0, s>>>(x, w, (int)n, eps, y);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

extern "C" ex_gpu_status ex_cuda_rmsnorm(const float *x, const float *w, int64_t n_rows, int64_t n, float eps, float *y,
                                         ex_stream s)
{
    return rmsnorm_rows(x, w, n_rows, n, eps, y, s);
}

extern "C" ex_gpu_status ex_cuda_qk_norm(float *x, const float *w, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                                         float eps, ex_stream s)
{
    return rmsnorm_rows(x, w, n_tokens * n_head, head_dim, eps, x, s);
}
