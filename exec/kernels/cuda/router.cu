/* Router top-k with softmax (ex/ops.h semantics): one warp per token, up to 1024 experts. The k
 * largest logits are picked one by one (ties: lower id first); their softmax probabilities are the
 * weights, renormalised to sum 1 when norm_topk (Qwen3-MoE norm_topk_prob). */
#include "common.cuh"

#include "ex/ops.h"

#define ROUTER_MAX_PER_LANE 32

static __global__ void router_kernel(const float *__restrict__ logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                                     int norm_topk, int32_t *__restrict__ ids, float *__restrict__ weights)
{
    int64_t t = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (t >= n_tokens) return;
    const float *lg = logits + t * n_expert;
    float mx = -INFINITY;
    for (int64_t e = lane; e < n_expert; e += 32) mx = fmaxf(mx, lg[e]);
    mx = exc_warp_max(mx);
    float sum = 0.0f;
    for (int64_t e = lane; e < n_expert; e += 32) sum += expf(lg[e] - mx);
    sum = exc_warp_sum(sum);
    uint32_t taken = 0; /* bit i: expert lane + 32 i already chosen */
    float wsum = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        float best = -INFINITY;
        int best_id = INT32_MAX;
        for (int i = 0; lane + 32 * i < n_expert; i++) {
            int e = lane + 32 * i;
            if (!(taken >> i & 1u) && (lg[e] > best || best_id == INT32_MAX)) {
                best = lg[e];
                best_id = e;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
            if (oi != INT32_MAX && (best_id == INT32_MAX || ob > best || (ob == best && oi < best_id))) {
                best = ob;
                best_id = oi;
            }
        }
        if (best_id % 32 == lane) taken |= 1u << (best_id / 32);
        float p = expf(best - mx) / sum;
        wsum += p;
        if (lane == 0) {
            ids[t * k + j] = best_id;
            weights[t * k + j] = p;
        }
    }
    if (norm_topk) {
        __syncwarp();
        for (int64_t j = lane; j < k; j += 32) weights[t * k + j] /= wsum;
    }
}

extern "C" ex_gpu_status ex_cuda_router_topk(const float *logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                                             int norm_topk, int32_t *ids, float *weights, ex_stream s)
{
    if (!logits || !ids || !weights || n_tokens < 1 || n_expert < 1 || n_expert > 32 * ROUTER_MAX_PER_LANE || k < 1 ||
        k > n_expert)
        return EX_GPU_EINVAL;
    const int warps = 4;
    router_kernel<<<(unsigned)((n_tokens + warps - 1) / warps), 32 * warps, 0, s>>>(logits, n_tokens, n_expert, k,
                                                                                     norm_topk, ids, weights);
    EXC_LAUNCHED(s);
    return EX_GPU_OK;
}
