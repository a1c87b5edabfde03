/* Activations → int8 blocks of 32 (exc_q8x) for the __dp4a dot products of the quantized GEMV. */
#include "common.cuh"

/* One warp per block of 32 values: d = amax/127, q = round(x/d), s = d * Σq. CH = 0: exc_q8x (q in
 * plain order, d and s arrays); CH = 2 or 4: exc_q8xi (q interleaved by tasks of CH 16-byte chunks, d
 * and s as pairs; `d` is the pair array and `s` unused). */
template <int CH>
static __global__ void quantize_q8x_kernel(const float *__restrict__ x, int64_t n_blocks, int8_t *__restrict__ qs,
                                           float *__restrict__ d, float *__restrict__ s)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* let a programmatic dependent (the GEMV) start its weight loads now; it waits for this grid's
     * completion (griddepcontrol.wait) before reading the quantized activations */
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (b >= n_blocks) return;
    float db, sb;
    int q = exc_q8_block(x[b * 32 + lane], &db, &sb);
    if (CH == 0) {
        qs[b * 32 + lane] = (int8_t)q;
        if (lane == 0) {
            d[b] = db;
            s[b] = sb;
        }
        return;
    }
    constexpr int C = CH > 0 ? CH : 1; /* (CH = 0 returned above) */
    const int64_t e = b * 32 + lane, t = e / (16 * C);
    const int off = (int)(e % (16 * C));
    qs[(((t >> 5) * C + (off >> 4)) * 32 + (t & 31)) * 16 + (off & 15)] = (int8_t)q;
    if (lane == 0) {
        d[2 * b] = db;
        d[2 * b + 1] = sb;
    }
}

ex_gpu_status exc_quantize_q8x(const float *x, int64_t n, int64_t n_rows, exc_q8x q, cudaStream_t stream)
{
    if (n % 32 != 0 || n_rows < 1) return EX_GPU_EINVAL;
    int64_t nb = n / 32 * n_rows;
    const int warps = 8;
    quantize_q8x_kernel<0><<<(unsigned)((nb + warps - 1) / warps), warps * 32, 0, stream>>>(x, nb, q.qs, q.d, q.s);
    EXC_LAUNCHED(stream);
    return EX_GPU_OK;
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
    return exc_quantize_q8x(x, n, n_rows, *out, stream);
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
    ex_gpu_status st = exc_workspace(g, EXC_WS_Q8X, qbytes + 2 * (size_t)nb * sizeof(float), &ws);
    if (st) return st;
    out->qs = (int8_t *)ws;
    out->ds = (float *)((uint8_t *)ws + qbytes);
    const int warps = 8;
    unsigned grid = (unsigned)((nb + warps - 1) / warps);
    if (chunks == 4)
        quantize_q8x_kernel<4><<<grid, warps * 32, 0, stream>>>(x, nb, out->qs, out->ds, NULL);
    else
        quantize_q8x_kernel<2><<<grid, warps * 32, 0, stream>>>(x, nb, out->qs, out->ds, NULL);
    EXC_LAUNCHED(stream);
    return EX_GPU_OK;
}
