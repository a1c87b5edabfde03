/* Sessions: KV cache, scratch activations and the forward pass, each op dispatched to the backend
 * table of its layer (embedding and output head: backend A / the last layer's backend). */
#include "ex/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- CPU backend table ------------------------------------------------------------------- */

static enum ats_status c_embedding(void *c, const ex_tensor *t, const int32_t *tok, int64_t n, float *x)
{ (void)c; return ex_cpu_embedding(t, tok, n, x); }
static enum ats_status c_rmsnorm(void *c, const float *x, const float *w, int64_t r, int64_t n, float eps, float *y)
{ (void)c; return ex_cpu_rmsnorm(x, w, r, n, eps, y); }
static enum ats_status c_matmul(void *c, const ex_tensor *w, const float *x, int64_t n, float *y)
{ (void)c; return ex_cpu_matmul(w, x, n, y); }
static enum ats_status c_qk_norm(void *c, float *x, const float *w, int64_t n, int64_t h, int64_t hd, float eps)
{ (void)c; return ex_cpu_qk_norm(x, w, n, h, hd, eps); }
static enum ats_status c_rope(void *c, float *x, int64_t n, int64_t h, int64_t hd, int64_t nr, int64_t p0,
                              float th, ats_rope_type ty)
{ (void)c; return ex_cpu_rope(x, n, h, hd, nr, p0, th, ty); }
static enum ats_status c_kv_store(void *c, const float *k, const float *v, int64_t n, int64_t p0, int64_t kvd,
                                  int64_t nctx, float *kc, float *vc)
{ (void)c; return ex_cpu_kv_store(k, v, n, p0, kvd, nctx, kc, vc); }
static enum ats_status c_attention(void *c, const float *q, int64_t n, int64_t p0, const float *kc,
                                   const float *vc, int64_t h, int64_t hkv, int64_t hd, float sc, float *o)
{ (void)c; return ex_cpu_attention(q, n, p0, kc, vc, h, hkv, hd, sc, o); }
static enum ats_status c_add(void *c, float *y, const float *x, int64_t n)
{ (void)c; return ex_cpu_add(y, x, n); }
static enum ats_status c_ffn(void *c, const ex_tensor *g, const ex_tensor *u, const ex_tensor *d, const float *x,
                             int64_t n, float *o)
{ (void)c; return ex_cpu_ffn(g, u, d, x, n, o); }
static enum ats_status c_router(void *c, const float *l, int64_t n, int64_t ne, int64_t k, int norm, int32_t *ids,
                                float *w)
{ (void)c; return ex_cpu_router_topk(l, n, ne, k, norm, ids, w); }
static enum ats_status c_moe(void *c, const ex_tensor *g, const ex_tensor *u, const ex_tensor *d, const float *x,
                             int64_t n, const int32_t *ids, const float *w, int64_t k, float *o)
{ (void)c; return ex_cpu_moe(g, u, d, x, n, ids, w, k, o); }
static enum ats_status c_output(void *c, const ex_tensor *w, const float *x, int64_t n, float *l)
{ (void)c; return ex_cpu_output(w, x, n, l); }

static const ex_backend CPU_BACKEND = {
    "cpu", NULL, c_embedding, c_rmsnorm, c_matmul, c_qk_norm, c_rope, c_kv_store,
    c_attention, c_add, c_ffn, c_router, c_moe, c_output,
};

const ex_backend *ex_backend_cpu(void) { return &CPU_BACKEND; }

/* ---- session ------------------------------------------------------------------------------ */

struct ex_session {
    const ex_model *m;
    int64_t n_ctx, pos, cap_tokens; /* cap_tokens: rows of the scratch buffers */
    float *k_cache, *v_cache;       /* (n_layer, n_ctx, kv_dim) */
    float *x, *xb, *q, *k, *v, *att, *tmp, *tmp2, *router; /* scratch */
    int32_t *ids;
    float *wts;
    const ex_backend **layer_be;   /* n_layer */
    const ex_backend *be_first, *be_last;
    ex_op_times times;
};

ex_session_opts ex_session_opts_default(void)
{
    ex_session_opts o = {0, -1, NULL, NULL};
    return o;
}

static void free_scratch(ex_session *s)
{
    free(s->x); free(s->xb); free(s->q); free(s->k); free(s->v); free(s->att); free(s->tmp);
    free(s->tmp2); free(s->router); free(s->ids); free(s->wts);
    s->x = s->xb = s->q = s->k = s->v = s->att = s->tmp = s->tmp2 = s->router = s->wts = NULL;
    s->ids = NULL;
    s->cap_tokens = 0;
}

void ex_session_free(ex_session *s)
{
    if (!s) return;
    free_scratch(s);
    free(s->k_cache);
    free(s->v_cache);
    free(s->layer_be);
    free(s);
}

static int ensure_scratch(ex_session *s, int64_t n)
{
    if (n <= s->cap_tokens) return 0;
    free_scratch(s);
    const ats_arch *a = &s->m->arch;
    int64_t E = a->n_embd, qd = a->n_head * a->head_dim, kvd = a->n_head_kv * a->head_dim;
    int64_t X = a->n_expert > 0 ? a->n_expert : 1, K = a->n_expert_used > 0 ? a->n_expert_used : 1;
    size_t f = sizeof(float);
    s->x = malloc((size_t)(n * E) * f);
    s->xb = malloc((size_t)(n * E) * f);
    s->q = malloc((size_t)(n * qd) * f);
    s->k = malloc((size_t)(n * kvd) * f);
    s->v = malloc((size_t)(n * kvd) * f);
    s->att = malloc((size_t)(n * qd) * f);
    s->tmp = malloc((size_t)(n * E) * f);
    s->tmp2 = malloc((size_t)(n * E) * f);
    s->router = malloc((size_t)(n * X) * f);
    s->ids = malloc((size_t)(n * K) * sizeof(int32_t));
    s->wts = malloc((size_t)(n * K) * f);
    if (!s->x || !s->xb || !s->q || !s->k || !s->v || !s->att || !s->tmp || !s->tmp2 || !s->router ||
        !s->ids || !s->wts) {
        free_scratch(s);
        return -1;
    }
    s->cap_tokens = n;
    return 0;
}

enum ats_status ex_session_new(const ex_model *m, const ex_session_opts *opts, ex_session **out,
                               ats_err *err)
{
    ex_session_opts o = opts ? *opts : ex_session_opts_default();
    const ats_arch *a = &m->arch;
    ex_session *s = calloc(1, sizeof *s);
    if (!s) return ATS_ENOMEM;
    s->m = m;
    s->n_ctx = o.n_ctx > 0 ? o.n_ctx : (a->n_ctx_max > 0 && a->n_ctx_max < 4096 ? a->n_ctx_max : 4096);
    int64_t kvd = a->n_head_kv * a->head_dim;
    size_t cache = (size_t)(a->n_layer * s->n_ctx * kvd) * sizeof(float);
    s->k_cache = malloc(cache);
    s->v_cache = malloc(cache);
    s->layer_be = malloc((size_t)a->n_layer * sizeof *s->layer_be);
    if (!s->k_cache || !s->v_cache || !s->layer_be) {
        long long nc = (long long)s->n_ctx;
        ex_session_free(s);
        return ats_err_set(err, ATS_ENOMEM, "KV cache of %lld tokens (%.1f MiB) does not fit", nc,
                           2.0 * (double)cache / 1048576.0);
    }
    const ex_backend *A = o.backend_a ? o.backend_a : ex_backend_cpu();
    const ex_backend *B = o.backend_b ? o.backend_b : ex_backend_cpu();
    if (o.split_layer > a->n_layer) {
        ex_session_free(s);
        return ats_err_set(err, ATS_EINVAL, "split layer %lld > n_layer %lld", (long long)o.split_layer,
                           (long long)a->n_layer);
    }
    for (int64_t l = 0; l < a->n_layer; l++) s->layer_be[l] = (o.split_layer < 0 || l < o.split_layer) ? A : B;
    s->be_first = A;
    s->be_last = s->layer_be[a->n_layer - 1];
    *out = s;
    return ATS_OK;
}

int64_t ex_session_pos(const ex_session *s) { return s->pos; }
int64_t ex_session_n_ctx(const ex_session *s) { return s->n_ctx; }
ex_op_times ex_session_times(const ex_session *s) { return s->times; }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define RUN(field, call)                                                \
    do {                                                                \
        int64_t t0_ = now_ns();                                         \
        st = (call);                                                    \
        s->times.field += now_ns() - t0_;                               \
        if (st != ATS_OK) goto fail;                                    \
    } while (0)

enum ats_status ex_session_forward(ex_session *s, const int32_t *tokens, int64_t n, float *logits,
                                   ats_err *err)
{
    const ex_model *m = s->m;
    const ats_arch *a = &m->arch;
    enum ats_status st = ATS_OK;
    if (n < 1) return ats_err_set(err, ATS_EINVAL, "forward: n_tokens = %lld (must be >= 1)", (long long)n);
    if (s->pos + n > s->n_ctx)
        return ats_err_set(err, ATS_ERANGE, "context full: %lld tokens in the cache + %lld new > n_ctx %lld",
                           (long long)s->pos, (long long)n, (long long)s->n_ctx);
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= a->n_vocab)
            return ats_err_set(err, ATS_EINVAL, "token %lld (index %lld) outside the vocabulary [0, %lld)",
                               (long long)tokens[t], (long long)t, (long long)a->n_vocab);
    if (ensure_scratch(s, n)) return ats_err_set(err, ATS_ENOMEM, "scratch for %lld tokens", (long long)n);
    const int64_t E = a->n_embd, hd = a->head_dim, H = a->n_head, Hkv = a->n_head_kv;
    const int64_t kvd = Hkv * hd, pos0 = s->pos;
    const float eps = (float)a->rms_norm_eps, theta = (float)a->rope_theta, scale = 1.0f / sqrtf((float)hd);
    const ex_backend *be = s->be_first;
    RUN(embed_ns, be->embedding(be->ctx, &m->tok_embd, tokens, n, s->x));
    for (int64_t l = 0; l < a->n_layer; l++) {
        const ex_layer *L = &m->layers[l];
        be = s->layer_be[l];
        float *kc = s->k_cache + l * s->n_ctx * kvd, *vc = s->v_cache + l * s->n_ctx * kvd;
        /* attention block: norm, Q, K, V, [q/k norm], RoPE, KV store, attention, O, residual */
        RUN(norm_ns, be->rmsnorm(be->ctx, s->x, L->attn_norm.data, n, E, eps, s->xb));
        RUN(matmul_ns, be->matmul(be->ctx, &L->wq, s->xb, n, s->q));
        RUN(matmul_ns, be->matmul(be->ctx, &L->wk, s->xb, n, s->k));
        RUN(matmul_ns, be->matmul(be->ctx, &L->wv, s->xb, n, s->v));
        if (a->qk_norm) {
            RUN(attn_ns, be->qk_norm(be->ctx, s->q, L->q_norm.data, n, H, hd, eps));
            RUN(attn_ns, be->qk_norm(be->ctx, s->k, L->k_norm.data, n, Hkv, hd, eps));
        }
        RUN(attn_ns, be->rope(be->ctx, s->q, n, H, hd, m->n_rot, pos0, theta, a->rope_type));
        RUN(attn_ns, be->rope(be->ctx, s->k, n, Hkv, hd, m->n_rot, pos0, theta, a->rope_type));
        RUN(attn_ns, be->kv_store(be->ctx, s->k, s->v, n, pos0, kvd, s->n_ctx, kc, vc));
        RUN(attn_ns, be->attention(be->ctx, s->q, n, pos0, kc, vc, H, Hkv, hd, scale, s->att));
        RUN(matmul_ns, be->matmul(be->ctx, &L->wo, s->att, n, s->tmp));
        RUN(norm_ns, be->add(be->ctx, s->x, s->tmp, n * E));
        /* FFN block */
        RUN(norm_ns, be->rmsnorm(be->ctx, s->x, L->ffn_norm.data, n, E, eps, s->xb));
        if (!L->moe) {
            RUN(ffn_ns, be->ffn(be->ctx, &L->ffn_gate, &L->ffn_up, &L->ffn_down, s->xb, n, s->tmp));
        } else {
            int64_t X = a->n_expert, K = a->n_expert_used;
            RUN(moe_ns, be->matmul(be->ctx, &L->gate_inp, s->xb, n, s->router));
            RUN(moe_ns, be->router_topk(be->ctx, s->router, n, X, K, m->norm_topk, s->ids, s->wts));
            RUN(moe_ns, be->moe(be->ctx, &L->gate_exps, &L->up_exps, &L->down_exps, s->xb, n, s->ids, s->wts, K, s->tmp));
            if (L->has_shexp) {
                RUN(ffn_ns, be->ffn(be->ctx, &L->gate_shexp, &L->up_shexp, &L->down_shexp, s->xb, n, s->tmp2));
                RUN(ffn_ns, be->add(be->ctx, s->tmp, s->tmp2, n * E));
            }
        }
        RUN(norm_ns, be->add(be->ctx, s->x, s->tmp, n * E));
    }
    be = s->be_last;
    const float *last = s->x + (n - 1) * E;
    RUN(norm_ns, be->rmsnorm(be->ctx, last, m->output_norm.data, 1, E, eps, s->xb));
    RUN(output_ns, be->output(be->ctx, &m->output, s->xb, 1, logits));
    s->pos += n;
    return ATS_OK;
fail:
    return ats_err_set(err, st, "forward: an op failed at position %lld: %s", (long long)pos0, ats_status_str(st));
}
