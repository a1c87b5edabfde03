/* The CUDA device of the plan executor (ex/runtime.h ex_device_cuda_new): ex/gpu.h's handle with its
 * compute stream (the op table ex_backend_cuda_new runs there) and transfer stream 0 (weight copies
 * on a copy engine), events between them. Every failure names the call that failed. */
#include <stdlib.h>

#include "ex/runtime.h"

#ifdef ATS_HAVE_CUDA
#include "ex/gpu.h"

typedef struct cdev {
    ex_device d;
    ex_gpu *g;
    struct ex_backend *be;
    ex_stream s[2];
} cdev;

static enum ats_status fail(ex_gpu_status st, const char *call, ats_err *err)
{
    return ats_err_set(err, st == EX_GPU_ENOMEM ? ATS_ENOMEM : ATS_ERANGE, "CUDA device: %s: %s", call,
                       ex_gpu_status_str(st));
}

static enum ats_status c_alloc(void *ctx, size_t bytes, void **dev, ats_err *err)
{
    cdev *c = ctx;
    ex_gpu_status st = ex_gpu_malloc(c->g, bytes ? bytes : 256, dev);
    return st ? fail(st, "cudaMalloc of the runtime's region", err) : ATS_OK;
}
static void c_free(void *ctx, void *dev) { ex_gpu_free(((cdev *)ctx)->g, dev); }
static enum ats_status c_h2d(void *ctx, void *dev, const void *host, size_t bytes, int stream, ats_err *err)
{
    cdev *c = ctx;
    ex_gpu_status st = ex_gpu_memcpy_h2d(dev, host, bytes, c->s[stream]);
    return st ? fail(st, "cudaMemcpyAsync (weight host to device)", err) : ATS_OK;
}
static enum ats_status c_event_new(void *ctx, void **ev, ats_err *err)
{
    (void)ctx;
    ex_gpu_status st = ex_gpu_event_new((ex_event *)ev);
    return st ? fail(st, "cudaEventCreate", err) : ATS_OK;
}
static void c_event_free(void *ctx, void *ev) { (void)ctx; ex_gpu_event_free((ex_event)ev); }
static enum ats_status c_record(void *ctx, void *ev, int stream, ats_err *err)
{
    cdev *c = ctx;
    ex_gpu_status st = ex_gpu_event_record((ex_event)ev, c->s[stream]);
    return st ? fail(st, "cudaEventRecord", err) : ATS_OK;
}
static enum ats_status c_wait(void *ctx, int stream, void *ev, ats_err *err)
{
    cdev *c = ctx;
    ex_gpu_status st = ex_gpu_stream_wait(c->s[stream], (ex_event)ev);
    return st ? fail(st, "cudaStreamWaitEvent", err) : ATS_OK;
}
static enum ats_status c_sync(void *ctx, int stream, ats_err *err)
{
    cdev *c = ctx;
    ex_gpu_status st = ex_gpu_stream_sync(c->s[stream]);
    return st ? fail(st, stream ? "cudaStreamSynchronize (transfer stream)" : "cudaStreamSynchronize (compute stream)",
                     err)
              : ATS_OK;
}
static enum ats_status c_elapsed(void *ctx, void *a, void *b, int64_t *ns, ats_err *err)
{
    (void)ctx;
    ex_gpu_status st = ex_gpu_event_elapsed_ns((ex_event)a, (ex_event)b, ns);
    return st ? fail(st, "cudaEventElapsedTime", err) : ATS_OK;
}
static enum ats_status c_pin(void *ctx, void *host, size_t bytes, ats_err *err)
{
    (void)ctx;
    return ex_gpu_host_register(host, bytes) ? ats_err_set(err, ATS_ENOMEM, "cudaHostRegister of %zu bytes refused", bytes)
                                             : ATS_OK;
}
static void c_unpin(void *ctx, void *host) { (void)ctx; ex_gpu_host_unregister(host); }

enum ats_status ex_device_cuda_new(ex_device **out, ats_err *err)
{
    *out = NULL;
    cdev *c = calloc(1, sizeof *c);
    if (!c) return ATS_ENOMEM;
    ex_gpu_status st = ex_gpu_open(0, &c->g);
    if (st == EX_GPU_ENODEV) {
        free(c);
        return ATS_ENOTFOUND;
    }
    if (st == EX_GPU_OK) st = ex_backend_cuda_new(c->g, &c->be);
    if (st != EX_GPU_OK) {
        if (c->g) ex_gpu_close(c->g);
        free(c);
        return fail(st, "opening device 0", err);
    }
    c->s[EX_DEV_COMPUTE] = ex_gpu_stream(c->g, EX_GPU_STREAM_COMPUTE);
    c->s[EX_DEV_TRANSFER] = ex_gpu_stream(c->g, EX_GPU_STREAM_TRANSFER0);
    ex_device *d = &c->d;
    d->name = "cuda";
    d->ctx = c;
    d->backend = c->be;
    d->alloc = c_alloc;
    d->free_mem = c_free;
    d->h2d = c_h2d;
    d->event_new = c_event_new;
    d->event_free = c_event_free;
    d->record = c_record;
    d->wait = c_wait;
    d->sync = c_sync;
    d->elapsed_ns = c_elapsed;
    d->host_pin = c_pin;
    d->host_unpin = c_unpin;
    *out = d;
    return ATS_OK;
}

void ex_device_cuda_free(ex_device *d)
{
    if (!d) return;
    cdev *c = d->ctx;
    ex_backend_cuda_free(c->be);
    ex_gpu_close(c->g);
    free(c);
}

#else

enum ats_status ex_device_cuda_new(ex_device **out, ats_err *err)
{
    (void)err;
    *out = NULL;
    return ATS_ENOTFOUND; /* built without CUDA */
}

void ex_device_cuda_free(ex_device *d) { (void)d; }

#endif
