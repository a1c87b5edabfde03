/*
 * load/cuda/gpu_probe.cu — GPU side of the load probes and hogs (ld/load.h, private gpu_probe.h):
 * a busy kernel of dependent FMAs on every SM and pinned host-to-device copies, each on its own stream
 * and waited for, so the caller's wall clock sees queueing behind other contexts.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_probe.h"

struct ld_gpu_probe {
    int device;
    int sms;
    cudaStream_t stream;
    cudaEvent_t done;    /* light_wait: polled instead of a spinning synchronize */
    int light_wait;
    float *d_out;   /* (sms * 4 * 256) busy-kernel results, keeps the FMAs alive */
    void *h_pinned; /* (copy_bytes) pinned host source of the copies */
    void *d_copy;   /* (copy_bytes) device destination */
    size_t copy_bytes;
    char name[256];
};

#define LP_CHECK(call)                                                                               \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            if (msg) snprintf(msg, msglen, "%s (%s:%d): %s", #call, __FILE__, __LINE__, cudaGetErrorString(e_)); \
            goto fail;                                                                               \
        }                                                                                            \
    } while (0)

static __global__ void busy_kernel(float *out, long iters)
{
    float a = 1.0f + 1e-7f * (float)threadIdx.x, b = 0.999999f, c = 1e-7f;
    for (long i = 0; i < iters; i++) {
        a = fmaf(a, b, c); /* dependent chain: time = iters * FMA latency, independent of the data */
        c = fmaf(c, b, a * 1e-9f);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + c;
}

/* Waits for everything queued on lp->stream: spinning (probes: tight timing), or sleeping in the driver
 * on a blocking-sync event until the GPU's interrupt wakes the thread (hogs: no CPU burnt waiting). */
static cudaError_t lp_wait(ld_gpu_probe *lp)
{
    if (!lp->light_wait) return cudaStreamSynchronize(lp->stream);
    cudaError_t e = cudaEventRecord(lp->done, lp->stream);
    if (e != cudaSuccess) return e;
    return cudaEventSynchronize(lp->done);
}

extern "C" int ld_gpu_probe_built(void) { return 1; }

extern "C" int ld_gpu_probe_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int ld_gpu_probe_new(int device, size_t copy_bytes, int light_wait, ld_gpu_probe **out, char *msg, size_t msglen)
{
    *out = NULL;
    ld_gpu_probe *lp = (ld_gpu_probe *)calloc(1, sizeof *lp);
    if (!lp) {
        if (msg) snprintf(msg, msglen, "out of memory");
        return -1;
    }
    lp->device = device;
    cudaDeviceProp prop;
    LP_CHECK(cudaSetDevice(device));
    LP_CHECK(cudaGetDeviceProperties(&prop, device));
    lp->sms = prop.multiProcessorCount;
    snprintf(lp->name, sizeof lp->name, "%s", prop.name);
    LP_CHECK(cudaStreamCreateWithFlags(&lp->stream, cudaStreamNonBlocking));
    LP_CHECK(cudaEventCreateWithFlags(&lp->done, cudaEventDisableTiming | (light_wait ? cudaEventBlockingSync : 0)));
    lp->light_wait = light_wait;
    LP_CHECK(cudaMalloc((void **)&lp->d_out, (size_t)lp->sms * 4 * 256 * sizeof(float)));
    if (copy_bytes > 0) {
        LP_CHECK(cudaMallocHost(&lp->h_pinned, copy_bytes));
        LP_CHECK(cudaMalloc(&lp->d_copy, copy_bytes));
        unsigned char *h = (unsigned char *)lp->h_pinned;
        for (size_t i = 0; i < copy_bytes; i += 4096) h[i] = (unsigned char)(i * 2654435761u >> 24); /* touch */
        lp->copy_bytes = copy_bytes;
    }
    *out = lp;
    return 0;
fail:
    ld_gpu_probe_free(lp);
    return -1;
}

extern "C" void ld_gpu_probe_free(ld_gpu_probe *lp)
{
    if (!lp) return;
    if (lp->stream) cudaStreamSynchronize(lp->stream);
    if (lp->d_copy) cudaFree(lp->d_copy);
    if (lp->h_pinned) cudaFreeHost(lp->h_pinned);
    if (lp->d_out) cudaFree(lp->d_out);
    if (lp->done) cudaEventDestroy(lp->done);
    if (lp->stream) cudaStreamDestroy(lp->stream);
    free(lp);
}

extern "C" int ld_gpu_probe_busy(ld_gpu_probe *lp, long iters, int n, char *msg, size_t msglen)
{
    for (int i = 0; i < n; i++) {
        busy_kernel<<<lp->sms * 4, 256, 0, lp->stream>>>(lp->d_out, iters);
        LP_CHECK(cudaGetLastError());
    }
    LP_CHECK(lp_wait(lp));
    return 0;
fail:
    return -1;
}

extern "C" int ld_gpu_probe_copy_h2d(ld_gpu_probe *lp, size_t bytes, int n, char *msg, size_t msglen)
{
    if (bytes > lp->copy_bytes) bytes = lp->copy_bytes;
    for (int i = 0; i < n; i++)
        LP_CHECK(cudaMemcpyAsync(lp->d_copy, lp->h_pinned, bytes, cudaMemcpyHostToDevice, lp->stream));
    LP_CHECK(lp_wait(lp));
    return 0;
fail:
    return -1;
}

extern "C" void ld_gpu_probe_name(const ld_gpu_probe *lp, char *buf, size_t len) { snprintf(buf, len, "%s", lp->name); }
