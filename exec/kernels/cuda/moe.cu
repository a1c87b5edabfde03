/*
 * Routed experts (ex/ops.h semantics): out[t] = Σ_j weights[t,j] · FFN_{ids[t,j]}(x[t]).
 * The expert ids stay on the device: one batched GEMV launch per projection covers every
 * (token, slot) pair, each reading the matrix ids[t,j] of the stacked expert tensor (the "expert
 * matmuls"). A prefill chunk therefore reads an expert once per token that routes to it (the CPU op
 * groups tokens by expert; grouping on the GPU would need the ids on the host).
 * The ids are never read on the host (the CUDA backend table keeps the router's output on the
 * device), so they are validated here, on the device: a first small kernel copies them into the
 * workspace with every id outside [0, n_expert) replaced by 0 (the GEMVs read only in-range
 * matrices), and the combine kernel writes NaN over the whole output row of a token with such an id
 * (visible downstream, as ex_cuda_embedding does for a bad token), instead of ex_cpu_moe's ATS_EINVAL.
 */
#include "common.cuh"

#include "ex/gpu.h"
#include "ex/ops.h"

/* safe[z] = ids[z] when it names an expert, else 0 */
static __global__ void moe_ids_kernel(const int32_t *__restrict__ ids, int64_t nz, int64_t n_exp,
                                      int32_t *__restrict__ safe)
{
    int64_t z = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (z < nz) {
        int32_t id = ids[z];
        safe[z] = id >= 0 && id < n_exp ? id : 0;
    }
}

/* out[t][e] = Σ_j w[t,j] · D[t·k + j][e]; NaN for a token with an id outside [0, n_exp) */
static __global__ void moe_combine_kernel(const float *__restrict__ D, const float *__restrict__ w,
                                          const int32_t *__restrict__ ids, int64_t n_exp, int64_t n_tokens,
                                          int64_t k, int64_t n_embd, float *__restrict__ out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tokens * n_embd) return;
    int64_t t = i / n_embd, e = i % n_embd;
    float acc = 0.0f;
    int bad = 0;
    for (int64_t j = 0; j < k; j++) {
        int32_t id = ids[t * k + j];
        bad |= id < 0 || id >= n_exp;
        acc += w[t * k + j] * D[(t * k + j) * n_embd + e];
    }
    out[i] = bad ? __int_as_float(0x7fc00000) : acc;
}

extern "C" ex_gpu_status ex_cuda_moe(ex_gpu *g, const ex_tensor *gate_exps, const ex_tensor *up_exps,
                                     const ex_tensor *down_exps, const float *x, int64_t n_tokens, const int32_t *ids,
                                     const float *weights, int64_t k, float *out, ex_stream s)
{
    if (!g || !gate_exps || !up_exps || !down_exps || !x || !ids || !weights || !out || n_tokens < 1 || k < 1)
        return EX_GPU_EINVAL;
    int64_t n_embd = gate_exps->ne[0], n_ff = gate_exps->ne[1], n_exp = gate_exps->ne[2];
    if (up_exps->ne[0] != n_embd || up_exps->ne[1] != n_ff || up_exps->ne[2] != n_exp || down_exps->ne[0] != n_ff ||
        down_exps->ne[1] != n_embd || down_exps->ne[2] != n_exp || up_exps->type != gate_exps->type)
        return EX_GPU_EINVAL;
    int64_t nz = n_tokens * k;
    if (nz > 65535) return EX_GPU_EINVAL;
    void *ws;
    ex_gpu_status st;
    if ((st = exc_workspace(g, EXC_WS_MOE, (size_t)(2 * nz * n_ff + nz * n_embd + nz) * sizeof(float), &ws))) return st;
    float *G = (float *)ws, *U = G + nz * n_ff, *D = U + nz * n_ff;
    int32_t *safe = (int32_t *)(D + nz * n_embd);
    moe_ids_kernel<<<(unsigned)((nz + 255) / 256), 256, 0, s>>>(ids, nz, n_exp, safe);
    EXC_LAUNCHED(s);
    int64_t gate_mat = (int64_t)(gate_exps->row_bytes * (uint64_t)n_ff);
    int64_t down_mat = (int64_t)(down_exps->row_bytes * (uint64_t)n_embd);
    /* gate/up: z = t·k + j reads x row t (x_div = k) and matrix ids[z] */
    if ((st = exc_gemv_batched(g, (int)gate_exps->type, gate_exps->data, n_ff, n_embd, gate_mat, safe, 0, (int)k, (int)nz, x, G, s)))
        return st;
    if ((st = exc_gemv_batched(g, (int)up_exps->type, up_exps->data, n_ff, n_embd, gate_mat, safe, 0, (int)k, (int)nz, x, U, s)))
        return st;
    if ((st = ex_cuda_swiglu(G, U, nz * n_ff, G, s))) return st;
    if ((st = exc_gemv_batched(g, (int)down_exps->type, down_exps->data, n_embd, n_ff, down_mat, safe, 0, 1, (int)nz, G, D, s)))
        return st;
    int64_t n = n_tokens * n_embd;
    moe_combine_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(D, weights, ids, n_exp, n_tokens, k, n_embd, out);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
