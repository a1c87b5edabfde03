/*
 * load/src/gpu_probe_none.c — the GPU probe interface (gpu_probe.h) of a build without CUDA: no
 * device is ever found, so the probes measure the CPU only and the stressor refuses GPU and PCIe hogs.
 */
#include "gpu_probe.h"

#include <stdio.h>

static int no_cuda(char *msg, size_t msglen)
{
    snprintf(msg, msglen, "this build has no CUDA");
    return -1;
}

int ld_gpu_probe_built(void) { return 0; }
int ld_gpu_probe_device_count(void) { return 0; }

int ld_gpu_probe_new(int device, size_t copy_bytes, int light_wait, ld_gpu_probe **out, char *msg, size_t msglen)
{
    (void)device, (void)copy_bytes, (void)light_wait;
    *out = NULL;
    return no_cuda(msg, msglen);
}

void ld_gpu_probe_free(ld_gpu_probe *lp) { (void)lp; }

int ld_gpu_probe_busy(ld_gpu_probe *lp, long iters, int n, char *msg, size_t msglen)
{
    (void)lp, (void)iters, (void)n;
    return no_cuda(msg, msglen);
}

int ld_gpu_probe_copy_h2d(ld_gpu_probe *lp, size_t bytes, int n, char *msg, size_t msglen)
{
    (void)lp, (void)bytes, (void)n;
    return no_cuda(msg, msglen);
}

void ld_gpu_probe_name(const ld_gpu_probe *lp, char *buf, size_t len)
{
    (void)lp;
    snprintf(buf, len, "none");
}
