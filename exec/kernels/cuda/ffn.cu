/* Dense SwiGLU FFN (ex/ops.h semantics): out = W_down (silu(W_gate x) · (W_up x)), built from the
 * matmul and SwiGLU ops; temporaries in the handle's FFN workspace. */
#include "common.cuh"

#include "ex/gpu.h"
#include "ex/ops.h"

extern "C" ex_gpu_status ex_cuda_ffn(ex_gpu *g, const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down,
                                     const float *x, int64_t n_tokens, float *out, ex_stream s)
{
    if (!g || !gate || !up || !down || !x || !out || n_tokens < 1) return EX_GPU_EINVAL;
    int64_t n_ff = gate->ne[1], n_embd = gate->ne[0];
    if (up->ne[1] != n_ff || up->ne[0] != n_embd || down->ne[0] != n_ff || down->ne[1] != n_embd) return EX_GPU_EINVAL;
    void *ws;
    ex_gpu_status st;
    if ((st = exc_workspace(g, EXC_WS_FFN, 2 * (size_t)(n_tokens * n_ff) * sizeof(float), &ws))) return st;
    float *G = (float *)ws, *U = G + n_tokens * n_ff;
    if ((st = ex_cuda_matmul(g, gate, x, n_tokens, G, s))) return st;
    if ((st = ex_cuda_matmul(g, up, x, n_tokens, U, s))) return st;
    if ((st = ex_cuda_swiglu(G, U, n_tokens * n_ff, G, s))) return st;
    return ex_cuda_matmul(g, down, G, n_tokens, out, s);
}
