/* The device handle: cuBLAS handle, streams, workspaces; memory, copy and event helpers. */
#include "gemv.cuh"

#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>


struct ex_gpu {
    ex_gpu_props props;
    cublasHandle_t cublas;
    cudaStream_t streams[EX_GPU_N_STREAMS];
    void *ws[EXC_N_WORKSPACES];      /* device workspaces, grown on demand */
    size_t ws_bytes[EXC_N_WORKSPACES];
    exc_gemv_dev gemv;               /* the decode GEMV kernels' per-device state (gemv.cuh) */
};

extern "C" ex_gpu_status exc_fail(cudaError_t e, const char *what, const char *file, int line)
{
    fprintf(stderr, "CUDA error at %s:%d: %s: %s (%s)\n", file, line, what, cudaGetErrorString(e),
            cudaGetErrorName(e));
    if (e == cudaErrorMemoryAllocation) return EX_GPU_ENOMEM;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
        return EX_GPU_ENODEV;
    return EX_GPU_ECUDA;
}

extern "C" const char *ex_gpu_status_str(ex_gpu_status st)
{
    switch (st) {
    case EX_GPU_OK: return "ok";
    case EX_GPU_ENODEV: return "no CUDA device";
    case EX_GPU_ENOMEM: return "out of memory (device or pinned host)";
    case EX_GPU_EINVAL: return "invalid argument";
    case EX_GPU_ECUDA: return "CUDA error";
    case EX_GPU_ECUBLAS: return "cuBLAS error";
    }
    return "unknown status";
}

extern "C" int ex_gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

extern "C" ex_gpu_status ex_gpu_open(int device, ex_gpu **out)
{
    *out = NULL;
    int n = ex_gpu_device_count();
    if (device < 0 || device >= n) return EX_GPU_ENODEV;
    EXC_CUDA(cudaSetDevice(device));
    ex_gpu *g = (ex_gpu *)calloc(1, sizeof *g);
    if (!g) return EX_GPU_ENOMEM;
    ex_gpu_status st = EX_GPU_OK;
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) { st = exc_fail(e, "cudaGetDeviceProperties", __FILE__, __LINE__); goto fail; }
    {
        ex_gpu_props *q = &g->props;
        snprintf(q->name, sizeof q->name, "%s", p.name);
        q->device = device;
        q->cc_major = p.major;
        q->cc_minor = p.minor;
        q->sm_count = p.multiProcessorCount;
        q->mem_bytes = (uint64_t)p.totalGlobalMem;
        int ae = 0, clk_khz = 0, bus = 0;
        cudaDeviceGetAttribute(&ae, cudaDevAttrAsyncEngineCount, device);
        cudaDeviceGetAttribute(&clk_khz, cudaDevAttrMemoryClockRate, device);
        cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, device);
        (void)cudaGetLastError();
        q->async_engines = ae;
        /* DDR: two transfers per clock; clock in kHz, bus in bits */
        q->mem_bw_peak_Bps = 2.0 * (double)clk_khz * 1e3 * (double)bus / 8.0;
    }
    exc_gemv_dev_init(&g->gemv, &g->props);
    for (int i = 0; i < EX_GPU_N_STREAMS; i++) {
        e = cudaStreamCreateWithFlags(&g->streams[i], cudaStreamNonBlocking);
        if (e != cudaSuccess) { st = exc_fail(e, "cudaStreamCreateWithFlags", __FILE__, __LINE__); goto fail; }
    }
    {
        cublasStatus_t cs = cublasCreate(&g->cublas);
        if (cs != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cuBLAS error at %s:%d: cublasCreate: %s\n", __FILE__, __LINE__, cublasGetStatusString(cs));
            g->cublas = NULL;
            st = EX_GPU_ECUBLAS;
            goto fail;
        }
    }
    *out = g;
    return EX_GPU_OK;
fail:
    ex_gpu_close(g);
    return st;
}

extern "C" void ex_gpu_close(ex_gpu *g)
{
    if (!g) return;
    cudaDeviceSynchronize();
    for (int i = 0; i < EXC_N_WORKSPACES; i++) cudaFree(g->ws[i]);
    if (g->cublas) cublasDestroy(g->cublas);
    for (int i = 0; i < EX_GPU_N_STREAMS; i++)
        if (g->streams[i]) cudaStreamDestroy(g->streams[i]);
    (void)cudaGetLastError();
    free(g);
}

extern "C" const ex_gpu_props *ex_gpu_info(const ex_gpu *g) { return &g->props; }

extern "C" ex_stream ex_gpu_stream(ex_gpu *g, int which)
{
    if (which < 0 || which >= EX_GPU_N_STREAMS) return NULL;
    return g->streams[which];
}

extern "C" ex_gpu_status ex_gpu_stream_sync(ex_stream s)
{
    EXC_CUDA(cudaStreamSynchronize(s));
    return EX_GPU_OK;
}

struct cublasContext *exc_cublas(ex_gpu *g) { return g->cublas; }
int exc_sm_count(const ex_gpu *g) { return g->props.sm_count; }
int exc_cc_major(const ex_gpu *g) { return g->props.cc_major; }

exc_gemv_dev *exc_gemv_state(ex_gpu *g) { return &g->gemv; }

ex_gpu_status exc_workspace(ex_gpu *g, int slot, size_t bytes, void **out)
{
    if (slot < 0 || slot >= EXC_N_WORKSPACES) return EX_GPU_EINVAL;
    if (bytes > g->ws_bytes[slot]) {
        /* the old buffer may still be read by queued work of this handle's streams */
        EXC_CUDA(cudaDeviceSynchronize());
        EXC_CUDA(cudaFree(g->ws[slot]));
        g->ws[slot] = NULL;
        g->ws_bytes[slot] = 0;
        size_t want = bytes + bytes / 4 + 256;
        EXC_CUDA(cudaMalloc(&g->ws[slot], want));
        g->ws_bytes[slot] = want;
    }
    *out = g->ws[slot];
    return EX_GPU_OK;
}

/* ---- memory -------------------------------------------------------------------------------- */
extern "C" ex_gpu_status ex_gpu_malloc(ex_gpu *g, size_t bytes, void **out)
{
    (void)g;
    *out = NULL;
    EXC_CUDA(cudaMalloc(out, bytes ? bytes : 1));
    return EX_GPU_OK;
}

extern "C" void ex_gpu_free(ex_gpu *g, void *dev)
{
    (void)g;
    if (dev && cudaFree(dev) != cudaSuccess) (void)exc_fail(cudaGetLastError(), "cudaFree", __FILE__, __LINE__);
}

extern "C" ex_gpu_status ex_gpu_host_alloc(ex_gpu *g, size_t bytes, void **host, void **dev)
{
    (void)g;
    *host = NULL;
    if (dev) *dev = NULL;
    EXC_CUDA(cudaHostAlloc(host, bytes ? bytes : 1, cudaHostAllocMapped | cudaHostAllocPortable));
    if (dev) {
        cudaError_t e = cudaHostGetDevicePointer(dev, *host, 0);
        if (e != cudaSuccess) {
            cudaFreeHost(*host);
            *host = NULL;
            return exc_fail(e, "cudaHostGetDevicePointer", __FILE__, __LINE__);
        }
    }
    return EX_GPU_OK;
}

extern "C" void ex_gpu_host_free(ex_gpu *g, void *host)
{
    (void)g;
    if (host && cudaFreeHost(host) != cudaSuccess) (void)exc_fail(cudaGetLastError(), "cudaFreeHost", __FILE__, __LINE__);
}

extern "C" ex_gpu_status ex_gpu_host_register(void *host, size_t bytes)
{
    /* refused (RLIMIT_MEMLOCK, no driver support): the caller warns once and copies from pageable
       memory, so no message here */
    cudaError_t e = cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e == cudaSuccess) return EX_GPU_OK;
    (void)cudaGetLastError();
    return EX_GPU_ENOMEM;
}

extern "C" void ex_gpu_host_unregister(void *host)
{
    if (host && cudaHostUnregister(host) != cudaSuccess) (void)cudaGetLastError();
}

extern "C" ex_gpu_status ex_gpu_memcpy_h2d(void *dst, const void *src, size_t bytes, ex_stream s)
{
    EXC_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes, ex_stream s)
{
    EXC_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_memcpy_d2d(void *dst, const void *src, size_t bytes, ex_stream s)
{
    EXC_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_memset(void *dev, int byte, size_t bytes, ex_stream s)
{
    EXC_CUDA(cudaMemsetAsync(dev, byte, bytes, s));
    return EX_GPU_OK;
}

/* ---- events -------------------------------------------------------------------------------- */
extern "C" ex_gpu_status ex_gpu_event_new(ex_event *out)
{
    *out = NULL;
    EXC_CUDA(cudaEventCreate(out));
    return EX_GPU_OK;
}
extern "C" void ex_gpu_event_free(ex_event e)
{
    if (e) cudaEventDestroy(e);
}
extern "C" ex_gpu_status ex_gpu_event_record(ex_event e, ex_stream s)
{
    EXC_CUDA(cudaEventRecord(e, s));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_stream_wait(ex_stream s, ex_event e)
{
    EXC_CUDA(cudaStreamWaitEvent(s, e, 0));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_event_sync(ex_event e)
{
    EXC_CUDA(cudaEventSynchronize(e));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_event_elapsed_ns(ex_event a, ex_event b, int64_t *out_ns)
{
    float ms = 0.0f;
    EXC_CUDA(cudaEventElapsedTime(&ms, a, b));
    *out_ns = (int64_t)((double)ms * 1e6 + 0.5);
    return EX_GPU_OK;
}

/* ---- CUDA graphs ------------------------------------------------------------------------------- */
extern "C" ex_gpu_status ex_gpu_graph_begin(ex_stream s)
{
    EXC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_graph_end(ex_stream s, ex_graph *out)
{
    *out = NULL;
    cudaGraph_t graph = NULL;
    EXC_CUDA(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t ge = NULL;
    cudaError_t e = cudaGraphInstantiate(&ge, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) return exc_fail(e, "cudaGraphInstantiate", __FILE__, __LINE__);
    *out = ge;
    return EX_GPU_OK;
}
extern "C" ex_gpu_status ex_gpu_graph_launch(ex_graph g, ex_stream s)
{
    EXC_CUDA(cudaGraphLaunch(g, s));
    return EX_GPU_OK;
}
extern "C" void ex_gpu_graph_free(ex_graph g)
{
    if (g) cudaGraphExecDestroy(g);
}
