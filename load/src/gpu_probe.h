/*
 * load/src/gpu_probe.h — private C interface of the GPU side of the load probes and hogs (ld/load.h):
 * load/cuda/gpu_probe.cu with CUDA, load/src/gpu_probe_none.c without (no device, every call fails).
 * Plain C, no CUDA types. All functions return 0 on success, -1 on a CUDA failure with one line in
 * msg ("cudaMallocHost: out of memory"). Timing is done by the caller (wall clock around a synchronous call), so a kernel that waits for another context's time slice counts as slow.
 */
#ifndef LD_GPU_PROBE_H
#define LD_GPU_PROBE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ld_gpu_probe ld_gpu_probe;

/** 1 when this build has the CUDA probes, 0 when it was built without CUDA. */
int ld_gpu_probe_built(void);

/** Number of CUDA devices (0 when there is no driver or device). Initializes CUDA in this process. */
int ld_gpu_probe_device_count(void);

/** Selects `device`, creates a non-blocking stream, a device buffer for the busy kernel's output, and
 *  (copy_bytes > 0) a pinned host buffer plus a device buffer of copy_bytes [bytes]. light_wait = 1:
 *  waits sleep on a cudaEventBlockingSync event instead of spinning in cudaStreamSynchronize (hogs: so
 *  that a GPU or PCIe hog does not also load a CPU core); 0: spin (probes: tight timing). */
int ld_gpu_probe_new(int device, size_t copy_bytes, int light_wait, ld_gpu_probe **out, char *msg, size_t msglen);
void ld_gpu_probe_free(ld_gpu_probe *lp);

/** Launches the busy kernel (every SM, `iters` dependent FMAs per thread) `n` >= 1 times back to back
 *  and waits for them (n > 1: the hogs keep the GPU fed across the wait's polling gap). */
int ld_gpu_probe_busy(ld_gpu_probe *lp, long iters, int n, char *msg, size_t msglen);

/** Copies `bytes` (<= copy_bytes) host-to-device from the pinned buffer `n` >= 1 times back to back and
 *  waits for them. */
int ld_gpu_probe_copy_h2d(ld_gpu_probe *lp, size_t bytes, int n, char *msg, size_t msglen);

/** Device name into buf. */
void ld_gpu_probe_name(const ld_gpu_probe *lp, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
