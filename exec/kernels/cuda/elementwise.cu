/* Element-wise ops: SwiGLU gate (Shazeer 2020) and the residual add (ex/ops.h semantics). */
#include "common.cuh"

static __global__ void swiglu_kernel(const float *gate, const float *up, int64_t n, float *out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static __global__ void add_kernel(float *y, const float *x, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

extern "C" ex_gpu_status ex_cuda_swiglu(const float *gate, const float *up, int64_t n, float *out, ex_stream s)
{
    if (!gate || !up || !out || n < 1) return EX_GPU_EINVAL;
    swiglu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(gate, up, n, out);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}

extern "C" ex_gpu_status ex_cuda_add(float *y, const float *x, int64_t n, ex_stream s)
{
    if (!y || !x || n < 1) return EX_GPU_EINVAL;
    add_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(y, x, n);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
