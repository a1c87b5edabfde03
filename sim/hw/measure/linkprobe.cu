// linkprobe.cu — measures the figures of sim/hw/h200-host.json that are not on a datasheet:
// copy-engine H2D and D2H bandwidth from pinned memory, per-transfer latency, kernel launch
// overhead, SM zero-copy read bandwidth, both H2D paths together, device-to-device copy
// bandwidth, and the device's copy-engine count. Standalone (not part of the CMake build); the numbers it prints are quoted,
// with the date and this command, in the "sources" of h200-host.json.
//   nvcc -O2 -arch=sm_90 -o linkprobe sim/hw/measure/linkprobe.cu && ./linkprobe
// Method: CUDA events around back-to-back operations after one warm-up; median of 5 repetitions.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <string.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static float median5(float *v) { std::sort(v, v + 5); return v[2]; }

__global__ void empty_kernel() {}

// Reads n uint4 from (zero-copy) src and writes them to dst: an SM-driven copy.
__global__ void copy_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

int main()
{
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, cc %d.%d, SMs %d, totalGlobalMem %zu bytes, asyncEngineCount %d, "
           "canMapHostMemory %d, memoryBusWidth %d bit\n",
           p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem, p.asyncEngineCount,
           p.canMapHostMemory, p.memoryBusWidth);
    const size_t big = (size_t)1 << 30; // 1 GiB
    void *h, *d, *d2;
    CK(cudaHostAlloc(&h, big, cudaHostAllocMapped));
    memset(h, 1, big);
    CK(cudaMalloc(&d, big));
    CK(cudaMalloc(&d2, big));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float ms, v[5];

    // H2D and D2H, 1 GiB each, copy engine
    for (int dir = 0; dir < 3; dir++) {
        for (int r = -1; r < 5; r++) {
            CK(cudaEventRecord(a, s));
            if (dir == 0) CK(cudaMemcpyAsync(d, h, big, cudaMemcpyHostToDevice, s));
            else if (dir == 1) CK(cudaMemcpyAsync(h, d, big, cudaMemcpyDeviceToHost, s));
            else CK(cudaMemcpyAsync(d2, d, big, cudaMemcpyDeviceToDevice, s));
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms, a, b));
            if (r >= 0) v[r] = ms;
        }
        ms = median5(v);
        const char *nm[3] = {"CE H2D 1 GiB", "CE D2H 1 GiB", "D2D 1 GiB (read+write counted)"};
        double bytes = dir == 2 ? 2.0 * big : (double)big;
        printf("%s: %.3f ms, %.2f GB/s\n", nm[dir], ms, bytes / (ms * 1e-3) / 1e9);
    }

    // SM zero-copy read of 1 GiB from mapped pinned memory into device memory
    void *hd;
    CK(cudaHostGetDevicePointer(&hd, h, 0));
    size_t n4 = big / sizeof(uint4);
    for (int r = -1; r < 5; r++) {
        CK(cudaEventRecord(a, s));
        copy_kernel<<<p.multiProcessorCount * 8, 512, 0, s>>>((const uint4 *)hd, (uint4 *)d, n4);
        CK(cudaGetLastError());
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 0) v[r] = ms;
    }
    ms = median5(v);
    printf("SM zero-copy read 1 GiB: %.3f ms, %.2f GB/s\n", ms, big / (ms * 1e-3) / 1e9);

    // both paths together: copy-engine H2D of 1 GiB on one stream while an SM kernel reads another
    // 1 GiB of mapped memory on a second stream; aggregate rate = 2 GiB / time until both ended
    {
        void *h2, *hd2, *d3;
        CK(cudaHostAlloc(&h2, big, cudaHostAllocMapped));
        memset(h2, 2, big);
        CK(cudaHostGetDevicePointer(&hd2, h2, 0));
        CK(cudaMalloc(&d3, big));
        cudaStream_t s2;
        CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        cudaEvent_t c, e1, e2;
        CK(cudaEventCreate(&c));
        CK(cudaEventCreate(&e1));
        CK(cudaEventCreate(&e2));
        float vce[5], vsm[5];
        for (int r = -1; r < 5; r++) {
            CK(cudaEventRecord(a, s));
            CK(cudaStreamWaitEvent(s2, a, 0));
            CK(cudaMemcpyAsync(d, h, big, cudaMemcpyHostToDevice, s));
            copy_kernel<<<p.multiProcessorCount * 8, 512, 0, s2>>>((const uint4 *)hd2, (uint4 *)d3, n4);
            CK(cudaGetLastError());
            CK(cudaEventRecord(e1, s));
            CK(cudaEventRecord(e2, s2));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventSynchronize(e2));
            float m1, m2;
            CK(cudaEventElapsedTime(&m1, a, e1));
            CK(cudaEventElapsedTime(&m2, a, e2));
            if (r >= 0) { v[r] = m1 > m2 ? m1 : m2; vce[r] = m1; vsm[r] = m2; }
        }
        ms = median5(v);
        printf("CE H2D + SM zero-copy together, 1 GiB each: %.3f ms, %.2f GB/s total "
               "(CE alone-in-pair %.2f GB/s, SM %.2f GB/s)\n", ms, 2.0 * big / (ms * 1e-3) / 1e9,
               big / (median5(vce) * 1e-3) / 1e9, big / (median5(vsm) * 1e-3) / 1e9);
        CK(cudaFreeHost(h2));
        CK(cudaFree(d3));
    }

    // per-transfer latency: 1000 back-to-back 4 KiB H2D copies
    const int nsmall = 1000;
    for (int dir = 0; dir < 2; dir++) {
        for (int r = -1; r < 5; r++) {
            CK(cudaEventRecord(a, s));
            for (int i = 0; i < nsmall; i++)
                CK(cudaMemcpyAsync(dir ? h : d, dir ? d : h, 4096,
                                   dir ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s));
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms, a, b));
            if (r >= 0) v[r] = ms;
        }
        printf("%s 4 KiB copies back to back: %.2f us each\n", dir ? "D2H" : "H2D",
               median5(v) * 1e3 / nsmall);
    }
    // kernel launch overhead: 10000 empty kernels back to back
    const int nk = 10000;
    for (int r = -1; r < 5; r++) {
        CK(cudaEventRecord(a, s));
        for (int i = 0; i < nk; i++) empty_kernel<<<1, 32, 0, s>>>();
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 0) v[r] = ms;
    }
    printf("empty kernel back to back: %.2f us each\n", median5(v) * 1e3 / nk);
    return 0;
}
