/* RoPE in place, both pair layouts (ex/ops.h: ATS_ROPE_NORM adjacent pairs, ATS_ROPE_NEOX halves).
 * Angles as the CPU reference (llama2.c): freq = 1 / theta^(2i/n_rot), angle = pos · freq, in F32
 * with CUDA's accurate powf/sincosf (no fast-math intrinsics), so both backends agree to ~1 ulp. Su et al. 2021. */
#include "common.cuh"

#include "ex/ops.h"

static __global__ void rope_kernel(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                                   int64_t pos0, float theta, int neox)
{
    int64_t half = n_rot / 2;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_tokens * n_head * half) return;
    int64_t i = idx % half, th = idx / half, t = th / n_head;
    float *v = x + th * head_dim;
    float freq = 1.0f / powf(theta, (float)(2 * i) / (float)n_rot);
    float ang = (float)(pos0 + t) * freq, sn, cs;
    sincosf(ang, &sn, &cs);
    int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    float x0 = v[a], x1 = v[b];
    v[a] = x0 * cs - x1 * sn;
    v[b] = x0 * sn + x1 * cs;
}

extern "C" ex_gpu_status ex_cuda_rope(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                                      int64_t pos0, float theta, ats_rope_type type, ex_stream s)
{
    if (!x || n_tokens < 1 || n_head < 1 || n_rot < 2 || n_rot % 2 || n_rot > head_dim || pos0 < 0) return EX_GPU_EINVAL;
    if (type != ATS_ROPE_NORM && type != ATS_ROPE_NEOX) return EX_GPU_EINVAL;
    int64_t n = n_tokens * n_head * (n_rot / 2);
    rope_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, n_tokens, n_head, head_dim, n_rot, pos0, theta,
                                                           type == ATS_ROPE_NEOX);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
