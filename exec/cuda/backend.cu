/*
 * The CUDA backend table (ex_backend of ex/model.h) over host pointers.
 *
 * The session (exec/src/session.c) keeps its activations, KV cache and weights in host memory and
 * calls a backend's ops with those pointers. This table runs each op on the GPU:
 * - weights (ex_tensor data, norm vectors) are uploaded once, on first use, into device "mirrors"
 *   keyed by their host address;
 * - each layer's KV cache gets a device mirror too (kv_store writes both the host cache and the
 *   mirror; attention reads the mirror), so K/V never travel back;
 * - activations are copied in before and out after each op on the handle's compute stream, which
 *   is synchronized before the op returns (the session may hand the result to the CPU next).
 * So the same session code runs CPU-only, GPU-only or split per layer (the half-and-half test).
 * The per-op copies and synchronizations cost ~10-20 µs per op; the hybrid runtime of the next
 * issue keeps activations on the device instead.
 * Mirrors live until ex_backend_cuda_free (a model freed and another loaded at the same addresses
 * would alias them: free the backend with the model, or call ex_backend_cuda_reset).
 */
#include "common.cuh"

#include <stdlib.h>
#include <string.h>

#include "ex/gpu.h"
#include "ex/model.h"

typedef struct mirror {
    const void *host;
    void *dev;
    size_t bytes;
} mirror;

#define N_ACT 4

typedef struct cuda_be {
    ex_backend be; /* first: the table handed out */
    ex_gpu *g;
    cudaStream_t s;
    mirror *m;
    int n_m, cap_m;
    void *act[N_ACT];
    size_t act_bytes[N_ACT];
} cuda_be;

static enum ats_status to_ats(ex_gpu_status st)
{
    switch (st) {
    case EX_GPU_OK: return ATS_OK;
    case EX_GPU_EINVAL: return ATS_EINVAL;
    case EX_GPU_ENOMEM: return ATS_ENOMEM;
    default: return ATS_ERANGE; /* device failure: the message was printed where it happened */
    }
}
#define TRY(call)                                                  \
    do {                                                           \
        ex_gpu_status st_ = (call);                                \
        if (st_ != EX_GPU_OK) return to_ats(st_);                  \
    } while (0)

/* Device mirror of host bytes [host, host+bytes); uploaded (synchronously) when created if
 * `upload`; recreated when the size grows. */
static ex_gpu_status get_mirror(cuda_be *c, const void *host, size_t bytes, int upload, void **out)
{
    for (int i = 0; i < c->n_m; i++)
        if (c->m[i].host == host) {
            if (c->m[i].bytes >= bytes) {
                *out = c->m[i].dev;
                return EX_GPU_OK;
            }
            EXC_CUDA(cudaStreamSynchronize(c->s));
            cudaFree(c->m[i].dev);
            c->m[i] = c->m[--c->n_m];
            break;
        }
    if (c->n_m == c->cap_m) {
        int cap = c->cap_m ? 2 * c->cap_m : 64;
        mirror *m = (mirror *)realloc(c->m, (size_t)cap * sizeof *m);
        if (!m) return EX_GPU_ENOMEM;
        c->m = m;
        c->cap_m = cap;
    }
    void *d = NULL;
    EXC_CUDA(cudaMalloc(&d, bytes ? bytes : 1));
    if (upload) {
        cudaError_t e = cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, c->s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->s);
        if (e != cudaSuccess) {
            cudaFree(d);
            return exc_fail(e, "upload of a weight mirror", __FILE__, __LINE__);
        }
    }
    c->m[c->n_m].host = host;
    c->m[c->n_m].dev = d;
    c->m[c->n_m].bytes = bytes;
    c->n_m++;
    *out = d;
    return EX_GPU_OK;
}

static ex_gpu_status dev_tensor(cuda_be *c, const ex_tensor *w, ex_tensor *out)
{
    *out = *w;
    int64_t mats = w->ne[2] > 0 ? w->ne[2] : 1;
    return get_mirror(c, w->data, (size_t)(w->row_bytes * (uint64_t)w->ne[1] * (uint64_t)mats), 1, (void **)&out->data);
}

/* Activation buffer `i` of at least `bytes`, optionally filled from host. */
static ex_gpu_status act_in(cuda_be *c, int i, const void *host, size_t bytes, void **out)
{
    if (bytes > c->act_bytes[i]) {
        EXC_CUDA(cudaStreamSynchronize(c->s));
        cudaFree(c->act[i]);
        c->act[i] = NULL;
        c->act_bytes[i] = 0;
        EXC_CUDA(cudaMalloc(&c->act[i], bytes));
        c->act_bytes[i] = bytes;
    }
    if (host) EXC_CUDA(cudaMemcpyAsync(c->act[i], host, bytes, cudaMemcpyHostToDevice, c->s));
    *out = c->act[i];
    return EX_GPU_OK;
}
static ex_gpu_status d2h_async(cuda_be *c, void *host, const void *dev, size_t bytes)
{
    EXC_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->s));
    return EX_GPU_OK;
}
static ex_gpu_status act_out(cuda_be *c, void *host, const void *dev, size_t bytes)
{
    EXC_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->s));
    EXC_CUDA(cudaStreamSynchronize(c->s));
    return EX_GPU_OK;
}

#define F4(n) ((size_t)(n) * sizeof(float))

static enum ats_status be_embedding(void *ctx, const ex_tensor *tok_embd, const int32_t *tokens, int64_t n, float *x)
{
    cuda_be *c = (cuda_be *)ctx;
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= tok_embd->ne[1]) return ATS_EINVAL;
    ex_tensor w;
    void *dt, *dx;
    TRY(dev_tensor(c, tok_embd, &w));
    TRY(act_in(c, 0, tokens, (size_t)n * sizeof(int32_t), &dt));
    TRY(act_in(c, 1, NULL, F4(n * tok_embd->ne[0]), &dx));
    TRY(ex_cuda_embedding(&w, (const int32_t *)dt, n, (float *)dx, c->s));
    TRY(act_out(c, x, dx, F4(n * tok_embd->ne[0])));
    return ATS_OK;
}

static enum ats_status be_rmsnorm(void *ctx, const float *x, const float *w, int64_t n_rows, int64_t n, float eps, float *y)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dw, *dx;
    TRY(get_mirror(c, w, F4(n), 1, &dw));
    TRY(act_in(c, 0, x, F4(n_rows * n), &dx));
    TRY(ex_cuda_rmsnorm((const float *)dx, (const float *)dw, n_rows, n, eps, (float *)dx, c->s));
    TRY(act_out(c, y, dx, F4(n_rows * n)));
    return ATS_OK;
}

static enum ats_status be_matmul(void *ctx, const ex_tensor *w, const float *x, int64_t n, float *y)
{
    cuda_be *c = (cuda_be *)ctx;
    ex_tensor dw;
    void *dx, *dy;
    TRY(dev_tensor(c, w, &dw));
    TRY(act_in(c, 0, x, F4(n * w->ne[0]), &dx));
    TRY(act_in(c, 1, NULL, F4(n * w->ne[1]), &dy));
    TRY(ex_cuda_matmul(c->g, &dw, (const float *)dx, n, (float *)dy, c->s));
    TRY(act_out(c, y, dy, F4(n * w->ne[1])));
    return ATS_OK;
}

static enum ats_status be_output(void *ctx, const ex_tensor *w, const float *x, int64_t n, float *logits)
{
    return be_matmul(ctx, w, x, n, logits);
}

static enum ats_status be_qk_norm(void *ctx, float *x, const float *w, int64_t n_tokens, int64_t n_head, int64_t hd,
                                  float eps)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dw, *dx;
    size_t b = F4(n_tokens * n_head * hd);
    TRY(get_mirror(c, w, F4(hd), 1, &dw));
    TRY(act_in(c, 0, x, b, &dx));
    TRY(ex_cuda_qk_norm((float *)dx, (const float *)dw, n_tokens, n_head, hd, eps, c->s));
    TRY(act_out(c, x, dx, b));
    return ATS_OK;
}

static enum ats_status be_rope(void *ctx, float *x, int64_t n_tokens, int64_t n_head, int64_t hd, int64_t n_rot,
                               int64_t pos0, float theta, ats_rope_type type)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dx;
    size_t b = F4(n_tokens * n_head * hd);
    TRY(act_in(c, 0, x, b, &dx));
    TRY(ex_cuda_rope((float *)dx, n_tokens, n_head, hd, n_rot, pos0, theta, type, c->s));
    TRY(act_out(c, x, dx, b));
    return ATS_OK;
}

/* KV cache mirror: created empty, then filled with the host cache's first `valid` positions. */
static ex_gpu_status kv_mirror(cuda_be *c, const float *cache, int64_t n_ctx_rows, int64_t kvd, int64_t valid, void **out)
{
    for (int i = 0; i < c->n_m; i++)
        if (c->m[i].host == cache && c->m[i].bytes >= F4(n_ctx_rows * kvd)) {
            *out = c->m[i].dev;
            return EX_GPU_OK;
        }
    ex_gpu_status st = get_mirror(c, cache, F4(n_ctx_rows * kvd), 0, out);
    if (st) return st;
    if (valid > 0) EXC_CUDA(cudaMemcpyAsync(*out, cache, F4(valid * kvd), cudaMemcpyHostToDevice, c->s));
    return EX_GPU_OK;
}

static enum ats_status be_kv_store(void *ctx, const float *k, const float *v, int64_t n, int64_t pos0, int64_t kvd,
                                   int64_t n_ctx, float *kc, float *vc)
{
    cuda_be *c = (cuda_be *)ctx;
    enum ats_status as = ex_cpu_kv_store(k, v, n, pos0, kvd, n_ctx, kc, vc); /* host copy stays coherent */
    if (as != ATS_OK) return as;
    void *dkc, *dvc, *dk, *dv;
    TRY(kv_mirror(c, kc, n_ctx, kvd, pos0, &dkc));
    TRY(kv_mirror(c, vc, n_ctx, kvd, pos0, &dvc));
    TRY(act_in(c, 0, k, F4(n * kvd), &dk));
    TRY(act_in(c, 1, v, F4(n * kvd), &dv));
    TRY(ex_cuda_kv_store((const float *)dk, (const float *)dv, n, pos0, kvd, n_ctx, (float *)dkc, (float *)dvc, c->s));
    return ATS_OK; /* ordered before the next op on the same stream */
}

static enum ats_status be_attention(void *ctx, const float *q, int64_t n, int64_t pos0, const float *kc, const float *vc,
                                    int64_t H, int64_t Hkv, int64_t hd, float scale, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dkc, *dvc, *dq, *dout;
    int64_t kvd = Hkv * hd, rows = pos0 + n;
    TRY(kv_mirror(c, kc, rows, kvd, rows, &dkc));
    TRY(kv_mirror(c, vc, rows, kvd, rows, &dvc));
    TRY(act_in(c, 0, q, F4(n * H * hd), &dq));
    TRY(act_in(c, 1, NULL, F4(n * H * hd), &dout));
    TRY(ex_cuda_attention((const float *)dq, n, pos0, (const float *)dkc, (const float *)dvc, H, Hkv, hd, scale,
                          (float *)dout, c->s));
    TRY(act_out(c, out, dout, F4(n * H * hd)));
    return ATS_OK;
}

static enum ats_status be_add(void *ctx, float *y, const float *x, int64_t n)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dy, *dx;
    TRY(act_in(c, 0, y, F4(n), &dy));
    TRY(act_in(c, 1, x, F4(n), &dx));
    TRY(ex_cuda_add((float *)dy, (const float *)dx, n, c->s));
    TRY(act_out(c, y, dy, F4(n)));
    return ATS_OK;
}

static enum ats_status be_ffn(void *ctx, const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down,
                              const float *x, int64_t n, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    ex_tensor g, u, d;
    void *dx, *dout;
    TRY(dev_tensor(c, gate, &g));
    TRY(dev_tensor(c, up, &u));
    TRY(dev_tensor(c, down, &d));
    TRY(act_in(c, 0, x, F4(n * gate->ne[0]), &dx));
    TRY(act_in(c, 1, NULL, F4(n * gate->ne[0]), &dout));
    TRY(ex_cuda_ffn(c->g, &g, &u, &d, (const float *)dx, n, (float *)dout, c->s));
    TRY(act_out(c, out, dout, F4(n * gate->ne[0])));
    return ATS_OK;
}

static enum ats_status be_router_topk(void *ctx, const float *logits, int64_t n, int64_t n_expert, int64_t k,
                                      int norm_topk, int32_t *ids, float *weights)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dl, *di, *dw;
    TRY(act_in(c, 0, logits, F4(n * n_expert), &dl));
    TRY(act_in(c, 1, NULL, (size_t)(n * k) * sizeof(int32_t), &di));
    TRY(act_in(c, 2, NULL, F4(n * k), &dw));
    TRY(ex_cuda_router_topk((const float *)dl, n, n_expert, k, norm_topk, (int32_t *)di, (float *)dw, c->s));
    TRY(d2h_async(c, ids, di, (size_t)(n * k) * sizeof(int32_t)));
    TRY(act_out(c, weights, dw, F4(n * k)));
    return ATS_OK;
}

static enum ats_status be_moe(void *ctx, const ex_tensor *gate_exps, const ex_tensor *up_exps,
                              const ex_tensor *down_exps, const float *x, int64_t n, const int32_t *ids,
                              const float *weights, int64_t k, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    for (int64_t i = 0; i < n * k; i++)
        if (ids[i] < 0 || ids[i] >= gate_exps->ne[2]) return ATS_EINVAL;
    ex_tensor g, u, d;
    void *dx, *di, *dw, *dout;
    int64_t E = gate_exps->ne[0];
    TRY(dev_tensor(c, gate_exps, &g));
    TRY(dev_tensor(c, up_exps, &u));
    TRY(dev_tensor(c, down_exps, &d));
    TRY(act_in(c, 0, x, F4(n * E), &dx));
    TRY(act_in(c, 1, ids, (size_t)(n * k) * sizeof(int32_t), &di));
    TRY(act_in(c, 2, weights, F4(n * k), &dw));
    TRY(act_in(c, 3, NULL, F4(n * E), &dout));
    TRY(ex_cuda_moe(c->g, &g, &u, &d, (const float *)dx, n, (const int32_t *)di, (const float *)dw, k, (float *)dout,
                    c->s));
    TRY(act_out(c, out, dout, F4(n * E)));
    return ATS_OK;
}

extern "C" ex_gpu_status ex_backend_cuda_new(ex_gpu *g, ex_backend **out)
{
    *out = NULL;
    if (!g) return EX_GPU_EINVAL;
    cuda_be *c = (cuda_be *)calloc(1, sizeof *c);
    if (!c) return EX_GPU_ENOMEM;
    c->g = g;
    c->s = ex_gpu_stream(g, EX_GPU_STREAM_COMPUTE);
    ex_backend *b = &c->be;
    b->name = "cuda";
    b->ctx = c;
    b->embedding = be_embedding;
    b->rmsnorm = be_rmsnorm;
    b->matmul = be_matmul;
    b->qk_norm = be_qk_norm;
    b->rope = be_rope;
    b->kv_store = be_kv_store;
    b->attention = be_attention;
    b->add = be_add;
    b->ffn = be_ffn;
    b->router_topk = be_router_topk;
    b->moe = be_moe;
    b->output = be_output;
    *out = b;
    return EX_GPU_OK;
}

extern "C" void ex_backend_cuda_reset(ex_backend *b)
{
    if (!b) return;
    cuda_be *c = (cuda_be *)b->ctx;
    cudaStreamSynchronize(c->s);
    for (int i = 0; i < c->n_m; i++) cudaFree(c->m[i].dev);
    c->n_m = 0;
    (void)cudaGetLastError();
}

extern "C" void ex_backend_cuda_free(ex_backend *b)
{
    if (!b) return;
    cuda_be *c = (cuda_be *)b->ctx;
    ex_backend_cuda_reset(b);
    for (int i = 0; i < N_ACT; i++) cudaFree(c->act[i]);
    free(c->m);
    free(c);
}

extern "C" uint64_t ex_backend_cuda_mirror_bytes(const ex_backend *b)
{
    const cuda_be *c = (const cuda_be *)b->ctx;
    uint64_t t = 0;
    for (int i = 0; i < c->n_m; i++) t += c->m[i].bytes;
    return t;
}
