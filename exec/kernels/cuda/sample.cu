/*
 * Sampling (ex/ops.h semantics). Greedy runs on the device: a one-block argmax (lowest id on ties)
 * whose single int32 result is copied back. Temperature / top-k / top-p copy the logits to the host
 * and call ex_cpu_sample, so a seeded run draws exactly the same token on both backends (the
 * splitmix64 state lives on the host anyway). Both paths synchronize `stream` before returning.
 */
#include "common.cuh"

#include <stdlib.h>

#include "ex/gpu.h"
#include "ex/ops.h"

static __global__ void argmax_kernel(const float *__restrict__ x, int64_t n, int32_t *out)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    float best = -INFINITY;
    int bi = INT32_MAX;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = x[i];
        if (v > best || (bi == INT32_MAX && !(v != v))) { /* NaN never wins */
            best = v;
            bi = (int)i;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi != INT32_MAX && (bi == INT32_MAX || ob > best || (ob == best && oi < bi))) {
            best = ob;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) {
        sv[w] = best;
        si[w] = bi;
    }
    __syncthreads();
    if (w == 0) {
        int nw = blockDim.x / 32;
        best = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : INT32_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi != INT32_MAX && (bi == INT32_MAX || ob > best || (ob == best && oi < bi))) {
                best = ob;
                bi = oi;
            }
        }
        if (lane == 0) *out = bi == INT32_MAX ? 0 : bi;
    }
}

extern "C" ex_gpu_status ex_cuda_sample(ex_gpu *g, const float *logits, int64_t n_vocab, const ex_sample_params *p,
                                        uint64_t *rng, int32_t *token, ex_stream s)
{
    if (!g || !logits || !p || !rng || !token || n_vocab < 1) return EX_GPU_EINVAL;
    if (p->temp <= 0.0f) {
        void *ws;
        ex_gpu_status st;
        if ((st = exc_workspace(g, EXC_WS_MISC, sizeof(int32_t), &ws))) return st;
        argmax_kernel<<<1, 1024, 0, s>>>(logits, n_vocab, (int32_t *)ws);
        EXC_LAUNCHED(s);
        EXC_CUDA(cudaMemcpyAsync(token, ws, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
        EXC_CUDA(cudaStreamSynchronize(s));
        return EX_GPU_OK;
    }
    float *h = (float *)malloc((size_t)n_vocab * sizeof(float));
    if (!h) return EX_GPU_ENOMEM;
    cudaError_t e = cudaMemcpyAsync(h, logits, (size_t)n_vocab * sizeof(float), cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
        free(h);
        return exc_fail(e, "cudaMemcpyAsync(logits)", __FILE__, __LINE__);
    }
    enum ats_status as = ex_cpu_sample(h, n_vocab, p, rng, token);
    free(h);
    return as == ATS_OK ? EX_GPU_OK : EX_GPU_EINVAL;
}
