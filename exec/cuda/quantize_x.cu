/* Activations → int8 blocks of 32 (exc_q8x) for the __dp4a dot products of the quantized GEMV.
 *
 * Launch chain on sm_90+ (programmatic dependent launch, PDL), for the interleaved form (exc_q8xi) that
 * the GEMV v3 reads: this kernel is launched as a programmatic dependent of whatever precedes it and lets
 * its dependent (the next GEMV) launch at once; the GEMV v3 lets the next kernel launch once it has
 * passed its own griddepcontrol.wait. So in a run of GEMVs (quantize, GEMV, quantize, GEMV, ...) GEMV
 * i+1's blocks become resident in GEMV i's tail and start streaming their weights, which depend on
 * nothing earlier, while GEMV i finishes. Ordering:
 *  - this kernel reads x and writes its workspace only after its wait (the kernel before it complete,
 *    its writes visible);
 *  - GEMV i+1 reads the quantized x only after its wait on this kernel;
 *  - at most two GEMVs run at once: GEMV i+1 launches only after quantize i+1 launched, i.e. after GEMV i
 *    passed its wait, so quantize i and with it GEMV i-1 are complete;
 *  - the two run on different workspaces (EXC_WS_Q8XI_A and _B in turn): GEMV i reads x through the
 *    non-coherent L1 path, and a GEMV i+1 on the same workspace and SM read GEMV i's stale L1 lines
 *    (seen on the H200 when every kernel let its dependents launch before its wait: 1 of 8 Q4_0 GEMVs
 *    queued back to back wrong; test_cuda_ops test_gemv_chain). GEMV i+1's workspace was last read by
 *    GEMV i-1, complete before GEMV i+1 launched: the same situation as a GEMV after a plain launch.
 * Only the interleaved form is chained: v1's batched GEMV reads expert ids, written by the router
 * kernel, before its wait, which is safe only while the quantize kernel starts after the router completed.
 * ATS_GEMV_CHAIN=0 launches the interleaved form as a plain kernel too (bench comparison).
 */
#include "common.cuh"

#include <mutex>
#include <stdlib.h>
#include <string.h>

/* One warp per block of 32 values: d = amax/127, q = round(x/d), s = d * Σq. CH = 0: exc_q8x (q in
 * plain order, d and s arrays); CH = 2 or 4: exc_q8xi (q interleaved by tasks of CH 16-byte chunks, d
 * and s as pairs; `d` is the pair array and `s` unused). */
template <int CH>
static __global__ void quantize_q8x_kernel(const float *__restrict__ x, int64_t n_blocks, int8_t *__restrict__ qs,
                                           float *__restrict__ d, float *__restrict__ s)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* the dependent (the next GEMV) may launch now and issue its weight loads; it reads the
     * activations only after its wait for this grid's completion */
    asm volatile("griddepcontrol.launch_dependents;");
    /* launched as a programmatic dependent: the kernel before it may still run; wait for its
     * completion before touching x or the workspace */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (b >= n_blocks) return;
    float v = __ldcg(x + b * 32 + lane); /* L2, not a stale L1 line: x may be the output of the GEMV before */
    /* fmaxf drops NaN, so non-finite inputs are caught by a vote: the block's scale becomes NaN and
     * the NaN reaches every output that reads this block (NaN never turns into a number) */
    int bad = __any_sync(0xffffffffu, !(fabsf(v) <= 3.4e38f));
    float amax = exc_warp_max(bad ? 0.0f : fabsf(v));
    float db = amax / 127.0f;
    int q = amax > 0.0f && !bad ? __float2int_rn(v / db) : 0;
    if (bad) db = __int_as_float(0x7fc00000);
    int sum = __reduce_add_sync(0xffffffffu, q);
    if (CH == 0) {
        qs[b * 32 + lane] = (int8_t)q;
        if (lane == 0) {
            d[b] = db;
            s[b] = db * (float)sum;
        }
        return;
    }
    constexpr int C = CH > 0 ? CH : 1; /* (CH = 0 returned above) */
    const int64_t e = b * 32 + lane, t = e / (16 * C);
    const int off = (int)(e % (16 * C));
    qs[(((t >> 5) * C + (off >> 4)) * 32 + (t & 31)) * 16 + (off & 15)] = (int8_t)q;
    if (lane == 0) {
        d[2 * b] = db;
        d[2 * b + 1] = db * (float)sum;
    }
}

/* ATS_GEMV_CHAIN (read once): "0" turns the programmatic launch of this kernel off. */
static int chain_enabled(void)
{
    static std::once_flag once;
    static int on = 1;
    std::call_once(once, [] {
        const char *e = getenv("ATS_GEMV_CHAIN");
        if (e && strcmp(e, "0") == 0) on = 0;
    });
    return on;
}

/* Launches quantize_q8x_kernel<CH> over n_blocks blocks of 32 values: with `chain`, a programmatic
 * dependent of the previous kernel on sm_90+ (see the top of this file), a plain launch otherwise. */
template <int CH>
static ex_gpu_status q8x_launch(ex_gpu *g, int chain, const float *x, int64_t n_blocks, int8_t *qs, float *d,
                                float *s, cudaStream_t stream)
{
    const int warps = 8;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)((n_blocks + warps - 1) / warps));
    cfg.blockDim = dim3(warps * 32);
    cfg.stream = stream;
    if (chain && exc_cc_major(g) >= 9 && chain_enabled()) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    EXC_CUDA(cudaLaunchKernelEx(&cfg, quantize_q8x_kernel<CH>, x, n_blocks, qs, d, s));
    EXC_LAUNCHED(stream);
    return EX_GPU_OK;
}

ex_gpu_status exc_quantize_q8x(ex_gpu *g, const float *x, int64_t n, int64_t n_rows, exc_q8x q, cudaStream_t stream)
{
    if (n % 32 != 0 || n_rows < 1) return EX_GPU_EINVAL;
    return q8x_launch<0>(g, 0, x, n / 32 * n_rows, q.qs, q.d, q.s, stream);
}

ex_gpu_status exc_quantize_q8x_ws(ex_gpu *g, const float *x, int64_t n, int64_t n_rows, cudaStream_t stream,
                                  exc_q8x *out)
{
    if (n % 32 != 0 || n_rows < 1) return EX_GPU_EINVAL;
    int64_t nxb = n / 32 * n_rows;
    size_t qbytes = ((size_t)(n * n_rows) + 255) & ~(size_t)255;
    void *ws;
    ex_gpu_status st = exc_workspace(g, EXC_WS_Q8X, qbytes + 2 * (size_t)nxb * sizeof(float), &ws);
    if (st) return st;
    out->qs = (int8_t *)ws;
    out->d = (float *)((uint8_t *)ws + qbytes);
    out->s = out->d + nxb;
    return exc_quantize_q8x(g, x, n, n_rows, *out, stream);
}

ex_gpu_status exc_quantize_q8xi_ws(ex_gpu *g, const float *x, int64_t n, int chunks, cudaStream_t stream,
                                   exc_q8xi *out)
{
    if (!(chunks == 2 || chunks == 4) || n % (16 * chunks) != 0 || n < 1) return EX_GPU_EINVAL;
    const int64_t task_bytes = 16 * chunks, tasks = n / task_bytes;
    /* whole groups of 32 tasks (the last group's unused units are never read), 256-byte aligned */
    size_t qbytes = ((size_t)((tasks + 31) / 32 * 32 * task_bytes) + 255) & ~(size_t)255;
    int64_t nb = n / 32;
    void *ws;
    ex_gpu_status st = exc_workspace(g, exc_q8xi_slot(g), qbytes + 2 * (size_t)nb * sizeof(float), &ws);
    if (st) return st;
    out->qs = (int8_t *)ws;
    out->ds = (float *)((uint8_t *)ws + qbytes);
    return chunks == 4 ? q8x_launch<4>(g, 1, x, nb, out->qs, out->ds, NULL, stream)
                       : q8x_launch<2>(g, 1, x, nb, out->qs, out->ds, NULL, stream);
}
