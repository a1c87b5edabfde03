/* Token embedding: x[t] = dequantize(row tokens[t]) of any weight type (ex/ops.h semantics).
 * tokens live in device memory, so the range check happens on the device: an id outside
 * [0, n_vocab) makes that row NaN (visible downstream, never an out-of-bounds read); callers
 * check ids on the host first (ex_cpu_embedding's ATS_EINVAL case). */
#include "dequant.cuh"

#include "ex/ops.h"

static __global__ void embedding_kernel(int type, const uint8_t *__restrict__ table, uint64_t row_bytes,
                                        int64_t n_vocab, int64_t n_embd, const int32_t *__restrict__ tokens,
                                        float *__restrict__ x)
{
    int64_t t = blockIdx.y;
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; /* group of 32 in the row */
    if (c >= n_embd / 32) return;
    int32_t id = tokens[t];
    float *o = x + t * n_embd + c * 32;
    if (id < 0 || id >= n_vocab) {
        for (int j = 0; j < 32; j++) o[j] = __int_as_float(0x7fc00000);
        return;
    }
    float v[32];
    deq32(type, table + (uint64_t)id * row_bytes, c, v);
    for (int j = 0; j < 32; j++) o[j] = v[j];
}

extern "C" ex_gpu_status ex_cuda_embedding(const ex_tensor *tok_embd, const int32_t *tokens, int64_t n_tokens, float *x,
                                           ex_stream s)
{
    if (!tok_embd || !tok_embd->data || !tokens || !x || n_tokens < 1 || n_tokens > 65535) return EX_GPU_EINVAL;
    int64_t n_embd = tok_embd->ne[0];
    int be = ats_qtype_block_elems(tok_embd->type);
    if (be == 0 || n_embd % be != 0 || n_embd % 32 != 0) return EX_GPU_EINVAL;
    int64_t nc = n_embd / 32;
    dim3 grid((unsigned)((nc + 63) / 64), (unsigned)n_tokens);
    embedding_kernel<<<grid, 64, 0, s>>>((int)tok_embd->type, (const uint8_t *)tok_embd->data, tok_embd->row_bytes,
                                         tok_embd->ne[1], n_embd, tokens, x);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
