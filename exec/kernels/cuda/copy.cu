/* SM copy kernel over zero-copy (mapped pinned) memory: activations cross the PCIe link as plain
 * loads/stores issued by the SMs, leaving the copy engines to the weight transfers (paper §4.2). */
#include "common.cuh"

static __global__ void copy16_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src, int64_t n16)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static __global__ void copy1_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" ex_gpu_status ex_cuda_copy(void *dst, const void *src, size_t bytes, ex_stream s)
{
    if (!dst || !src) return EX_GPU_EINVAL;
    if (bytes == 0) return EX_GPU_OK;
    int64_t n16 = 0;
    if ((uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0) {
        n16 = (int64_t)(bytes / 16);
        if (n16) {
            unsigned blocks = (unsigned)(n16 < 256 * 1024 ? (n16 + 255) / 256 : 1024);
            copy16_kernel<<<blocks, 256, 0, s>>>((uint4 *)dst, (const uint4 *)src, n16);
            EXC_LAUNCHED(s);
        }
    }
    int64_t rest = (int64_t)bytes - 16 * n16;
    if (rest) {
        unsigned blocks = (unsigned)(rest < 256 * 1024 ? (rest + 255) / 256 : 1024);
        copy1_kernel<<<blocks, 256, 0, s>>>((uint8_t *)dst + 16 * n16, (const uint8_t *)src + 16 * n16, rest);
        EXC_LAUNCHED(s);
    }
    return EX_GPU_OK;
}
