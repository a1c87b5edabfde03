/*
 * exec/cuda/load_probe.h — private C interface of load_probe.cu: the GPU side of the load probes and
 * hogs (ex/load.h). Plain C, no CUDA types. All functions return 0 on success, -1 on a CUDA failure
 * with one line in msg ("cudaMallocHost: out of memory"). Timing is done by the caller (wall clock
 * around a synchronous call), so a kernel that waits for another context's time slice counts as slow.
 */
#ifndef EX_LOAD_PROBE_H
#define EX_LOAD_PROBE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_lp ex_lp;

/** Number of CUDA devices (0 when there is no driver or device). Initializes CUDA in this process. */
int ex_lp_device_count(void);

/** Selects `device`, creates a non-blocking stream, a device buffer for the busy kernel's output, and
 *  (copy_bytes > 0) a pinned host buffer plus a device buffer of copy_bytes [bytes]. light_wait = 1:
 *  waits sleep on a cudaEventBlockingSync event instead of spinning in cudaStreamSynchronize (hogs: so
 *  that a GPU or PCIe hog does not also load a CPU core); 0: spin (probes: tight timing). */
int ex_lp_new(int device, size_t copy_bytes, int light_wait, ex_lp **out, char *msg, size_t msglen);
void ex_lp_free(ex_lp *lp);

/** Launches the busy kernel (every SM, `iters` dependent FMAs per thread) `n` >= 1 times back to back
 *  and waits for them (n > 1: the hogs keep the GPU fed across the wait's polling gap). */
int ex_lp_busy(ex_lp *lp, long iters, int n, char *msg, size_t msglen);

/** Copies `bytes` (<= copy_bytes) host-to-device from the pinned buffer `n` >= 1 times back to back and
 *  waits for them. */
int ex_lp_copy_h2d(ex_lp *lp, size_t bytes, int n, char *msg, size_t msglen);

/** Device name into buf. */
void ex_lp_name(const ex_lp *lp, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
