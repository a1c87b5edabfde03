/* Sessions: KV cache, scratch activations and the forward pass, each op dispatched to the backend
 * table of its layer (embedding and output head: backend A / the last layer's backend).
 *
 * Residency (exec/README.md): a device backend may keep what its ops write on the device. The
 * session remembers the backend of the last op it ran (across forward calls); before an op on
 * another backend it flushes that one (its activations reach host memory) and tells the new one
 * that host activations changed (host_wrote). The KV rows of a layer come back only when another
 * backend is about to run that layer's attention (kv_be). Every forward ends with a flush, also on
 * errors, so the logits are in host memory. Host fallbacks (NULL rope_ff / swiglu entries) are a
 * backend switch of their own: flush before, host_wrote after. */
#include "ex/model.h"
#include "ex/session.h"

#include "ats/graph.h"

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
static enum ats_status c_rope_ff(void *c, float *x, int64_t n, int64_t h, int64_t hd, int64_t nr, int64_t p0,
                                 float th, ats_rope_type ty, const float *ff)
{ (void)c; return ex_cpu_rope_ff(x, n, h, hd, nr, p0, th, ty, ff); }
static enum ats_status c_kv_store(void *c, const float *k, const float *v, int64_t n, int64_t p0, int64_t kvd,
                                  int64_t nctx, float *kc, float *vc)
{ (void)c; return ex_cpu_kv_store(k, v, n, p0, kvd, nctx, kc, vc); }
static enum ats_status c_attention(void *c, const float *q, int64_t n, int64_t p0, const float *kc,
                                   const float *vc, int64_t h, int64_t hkv, int64_t hd, float sc, float *o)
{ (void)c; return ex_cpu_attention(q, n, p0, kc, vc, h, hkv, hd, sc, o); }
static enum ats_status c_kv_store_f16(void *c, const float *k, const float *v, int64_t n, int64_t p0, int64_t kvd,
                                      int64_t nctx, ex_fp16 *kc, ex_fp16 *vc)
{ (void)c; return ex_cpu_kv_store_f16(k, v, n, p0, kvd, nctx, kc, vc); }
static enum ats_status c_attention_f16(void *c, const float *q, int64_t n, int64_t p0, const ex_fp16 *kc,
                                       const ex_fp16 *vc, int64_t h, int64_t hkv, int64_t hd, float sc, float *o)
{ (void)c; return ex_cpu_attention_f16(q, n, p0, kc, vc, h, hkv, hd, sc, o); }
static enum ats_status c_add(void *c, float *y, const float *x, int64_t n)
{ (void)c; return ex_cpu_add(y, x, n); }
static enum ats_status c_swiglu(void *c, const float *g, const float *u, int64_t n, float *o)
{ (void)c; return ex_cpu_swiglu(g, u, n, o); }
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
    c_attention, c_add, c_rope_ff, c_swiglu, c_ffn, c_router, c_moe, c_output,
    NULL, NULL, NULL, NULL, /* flush, host_wrote, forget, evict: everything stays in host memory */
    c_kv_store_f16, c_attention_f16,
    NULL, NULL, /* bind_weight, bound_only: the CPU reads weights where the model keeps them */
};

const ex_backend *ex_backend_cpu(void) { return &CPU_BACKEND; }

/* ---- session ------------------------------------------------------------------------------ */

struct ex_session {
    const ex_model *m;
    ats_graph *graph;               /* op order of one round (sched's ats_graph_build), owned */
    ats_qtype *types;               /* the model's tensor types (ex_model_tensor_types), owned */
    const ex_backend **op_be;       /* backend of each graph op */
    int64_t *op_ns;                 /* accumulated wall-clock time of each graph op [ns] */
    int64_t *op_t0, *op_t1;         /* start / end of each op in the last forward [ns, monotonic] */
    int64_t *op_tin, *op_tsw;       /* op taken up / its backend switch done (ex_session_last_op_host) */
    int64_t n_ctx, pos, cap_tokens; /* cap_tokens: rows of the scratch buffers */
    ats_qtype kv_type;              /* ATS_Q_F32 or ATS_Q_F16: the caches' element */
    void *k_cache, *v_cache;        /* (n_layer, n_ctx, kv_dim) of kv_type (float or ex_fp16) */
    float *x, *xb, *q, *k, *v, *att, *tmp, *tmp2, *router, *g, *u; /* scratch: views of `arena` */
    void *arena;                    /* the scratch buffers, one page-aligned allocation */
    size_t arena_bytes;
    int arena_pinned, k_pinned, v_pinned;
    size_t pin_asked, pin_done;     /* ex_session_pinned */
    int (*pin)(void *, void *, size_t);
    void (*unpin)(void *, void *);
    void *pin_ctx;
    int32_t *ids;
    float *wts;
    ex_op_times times;
    int sync_ops;                   /* ex_session_opts.sync_ops */
    const ex_backend *last;         /* backend of the last op run (NULL: none yet, or scratch moved) */
    const ex_backend **kv_be;       /* per layer: backend of the last kv_store into its KV rows */
    uint8_t *kv_stale;              /* per layer: kv_be's device copy predates an ex_session_clear */
    const ex_backend **uniq;        /* the distinct backends of op_be (n_uniq), for forget */
    int n_uniq, cap_uniq;
    int64_t cur_n;                  /* tokens of the forward running (or last run) */
    int32_t *emap;                  /* set_expert_map: expert → compact slot (n_expert), or NULL */
    int64_t emap_layer, emap_n;
    int32_t *ids_map;               /* remapped ids (cap_tokens × k) for a compact experts run */
    ex_session_hook hook;           /* plan executor's op hook (NULL: none) */
    void *hook_user;
};

ex_session_opts ex_session_opts_default(void)
{
    ex_session_opts o = {0, -1, NULL, NULL, NULL, 0, ATS_Q_F32, NULL, NULL, NULL};
    return o;
}

/* Tells every backend of the session that [p, p + bytes) is about to be freed. */
static void forget_range(ex_session *s, const void *p, size_t bytes)
{
    if (!p) return;
    for (int i = 0; i < s->n_uniq; i++)
        if (s->uniq[i]->forget) s->uniq[i]->forget(s->uniq[i]->ctx, p, bytes);
}

/* Bytes of one KV cache element of the session. */
static size_t kv_elem_bytes(ats_qtype t) { return t == ATS_Q_F16 ? sizeof(ex_fp16) : sizeof(float); }

/* Bytes of the K (or the V) cache of all layers: (n_layer, n_ctx, kv_dim) of kv_type. */
static size_t kv_slab_bytes(const ex_session *s)
{
    const ats_arch *a = &s->m->arch;
    return (size_t)(a->n_layer * s->n_ctx * a->n_head_kv * a->head_dim) * kv_elem_bytes(s->kv_type);
}

static void free_scratch(ex_session *s)
{
    if (s->arena) forget_range(s, s->arena, s->arena_bytes); /* every backend drops its copies */
    s->last = NULL; /* the next op's backend is told that host buffers changed */
    if (s->arena_pinned) s->unpin(s->pin_ctx, s->arena);
    s->arena_pinned = 0;
    free(s->arena);
    s->arena = NULL;
    s->arena_bytes = 0;
    s->ids_map = NULL;
    s->x = s->xb = s->q = s->k = s->v = s->att = s->tmp = s->tmp2 = s->router = s->wts = s->g = s->u = NULL;
    s->ids = NULL;
    s->cap_tokens = 0;
}

void ex_session_free(ex_session *s)
{
    if (!s) return;
    free_scratch(s);
    if (s->k_cache) forget_range(s, s->k_cache, kv_slab_bytes(s));
    if (s->v_cache) forget_range(s, s->v_cache, kv_slab_bytes(s));
    if (s->k_pinned) s->unpin(s->pin_ctx, s->k_cache);
    if (s->v_pinned) s->unpin(s->pin_ctx, s->v_cache);
    free(s->k_cache);
    free(s->v_cache);
    free(s->op_tin);
    free(s->op_tsw);
    free(s->emap);
    free(s->types);
    free(s->kv_be);
    free(s->kv_stale);
    free(s->uniq);
    free(s->op_be);
    free(s->op_ns);
    free(s->op_t0);
    free(s->op_t1);
    ats_graph_free(s->graph);
    free(s);
}

static int ensure_scratch(ex_session *s, int64_t n)
{
    if (n <= s->cap_tokens) return 0;
    free_scratch(s);
    const ats_arch *a = &s->m->arch;
    int64_t E = a->n_embd, qd = a->n_head * a->head_dim, kvd = a->n_head_kv * a->head_dim;
    int64_t X = a->n_expert > 0 ? a->n_expert : 1, K = a->n_expert_used > 0 ? a->n_expert_used : 1;
    int64_t F = a->n_ff > 0 ? a->n_ff : 1;
    size_t f = sizeof(float);
    /* one allocation (a single pin covers every buffer), each buffer on its own 256-byte boundary */
    const size_t sz[14] = {(size_t)(n * E) * f, (size_t)(n * E) * f, (size_t)(n * qd) * f, (size_t)(n * kvd) * f,
                           (size_t)(n * kvd) * f, (size_t)(n * qd) * f, (size_t)(n * E) * f, (size_t)(n * E) * f,
                           (size_t)(n * X) * f, (size_t)(n * K) * sizeof(int32_t), (size_t)(n * K) * sizeof(int32_t),
                           (size_t)(n * K) * f, (size_t)(n * F) * f, (size_t)(n * F) * f};
    size_t off[14], total = 0;
    for (int i = 0; i < 14; i++) {
        off[i] = total;
        total += (sz[i] + 255) / 256 * 256;
    }
    total = (total + 4095) / 4096 * 4096;
    char *p = aligned_alloc(4096, total);
    if (!p) return -1;
    s->arena = p;
    s->arena_bytes = total;
    s->x = (float *)(p + off[0]);
    s->xb = (float *)(p + off[1]);
    s->q = (float *)(p + off[2]);
    s->k = (float *)(p + off[3]);
    s->v = (float *)(p + off[4]);
    s->att = (float *)(p + off[5]);
    s->tmp = (float *)(p + off[6]);
    s->tmp2 = (float *)(p + off[7]);
    s->router = (float *)(p + off[8]);
    s->ids = (int32_t *)(p + off[9]);
    s->ids_map = (int32_t *)(p + off[10]);
    s->wts = (float *)(p + off[11]);
    s->g = (float *)(p + off[12]);
    s->u = (float *)(p + off[13]);
    if (s->pin) {
        s->pin_asked += total;
        if (s->pin(s->pin_ctx, p, total) == 0) {
            s->arena_pinned = 1;
            s->pin_done += total;
        }
    }
    s->cap_tokens = n;
    return 0;
}

/* Roles the executor implements; any other op in the graph is refused at session creation. */
static int role_supported(const ats_op *op)
{
    switch (op->role) {
    case ATS_ROLE_TOKEN_EMBD: case ATS_ROLE_ATTN_NORM: case ATS_ROLE_ATTN_Q: case ATS_ROLE_ATTN_K:
    case ATS_ROLE_ATTN_V: case ATS_ROLE_ATTN: case ATS_ROLE_ATTN_OUTPUT: case ATS_ROLE_FFN_NORM:
    case ATS_ROLE_FFN_GATE: case ATS_ROLE_FFN_UP: case ATS_ROLE_FFN_DOWN: case ATS_ROLE_FFN_GATE_INP:
    case ATS_ROLE_FFN_GATE_EXPS: case ATS_ROLE_FFN_UP_EXPS: case ATS_ROLE_FFN_DOWN_EXPS:
    case ATS_ROLE_FFN_GATE_SHEXP: case ATS_ROLE_FFN_UP_SHEXP: case ATS_ROLE_FFN_DOWN_SHEXP:
    case ATS_ROLE_OUTPUT_NORM: case ATS_ROLE_OUTPUT:
        return 1;
    default:
        return 0;
    }
}

/* The weight tensor an op consumes (NULL for attention). */
static const ex_tensor *op_tensor(const ex_model *m, const ats_op *op)
{
    return ex_model_role_tensor(m, op->role, op->layer);
}

/* The graph was built with the model's tensor types (ex_model_tensor_types: the types and bytes of
 * the real tensors, as a GGUF mixes types per tensor); give the attention ops the session's KV cache
 * type: its size and the bytes a round reads from it (sched counts an F16 cache,
 * ats_arch_kv_bytes_per_token: kept for F16, doubled for F32). */
static void patch_graph(ats_graph *g, const ex_model *m, int64_t n_ctx, ats_qtype kv_type)
{
    const ats_arch *a = &m->arch;
    g->kv_cache_bytes = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        ats_op *op = &g->ops[i];
        if (op->kind == ATS_OP_ATTN) {
            const size_t el = kv_elem_bytes(kv_type);
            op->qtype = kv_type;
            op->kv_cache_bytes = (uint64_t)(2 * n_ctx * a->n_head_kv * a->head_dim) * el;
            op->kv_read_bytes = op->kv_read_bytes / 2 * el; /* sched's F16 count (a multiple of 2 bytes) */
        }
        g->kv_cache_bytes += op->kv_cache_bytes;
    }
}

enum ats_status ex_session_new(const ex_model *m, const ex_session_opts *opts, ex_session **out,
                               ats_err *err)
{
    ex_session_opts o = opts ? *opts : ex_session_opts_default();
    const ats_arch *a = &m->arch;
    if (o.split_layer > a->n_layer)
        return ats_err_set(err, ATS_EINVAL, "split layer %lld > n_layer %lld", (long long)o.split_layer,
                           (long long)a->n_layer);
    if (o.kv_type != ATS_Q_F32 && o.kv_type != ATS_Q_F16)
        return ats_err_set(err, ATS_EINVAL, "KV cache type %s (%d): the executor's KV cache is F32 or F16",
                           ats_qtype_name(o.kv_type), (int)o.kv_type);
    ex_session *s = calloc(1, sizeof *s);
    if (!s) return ATS_ENOMEM;
    s->m = m;
    s->kv_type = o.kv_type;
    s->n_ctx = ex_session_ctx_of(m, &o);
    /* the op order: one decode round of sched's graph at the model's tensor types */
    if (ex_model_tensor_types(m, &s->types) != ATS_OK) {
        ex_session_free(s);
        return ATS_ENOMEM;
    }
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = ATS_RECIPE_F32;
    go.tensor_types = s->types;
    go.phase.kind = ATS_PHASE_DECODE;
    go.phase.n_tokens = 1;
    go.phase.ctx_pos = 0;
    go.n_ctx = s->n_ctx;
    enum ats_status st = ats_graph_build(a, &go, &s->graph, err);
    if (st != ATS_OK) {
        ex_session_free(s);
        return st;
    }
    patch_graph(s->graph, m, s->n_ctx, s->kv_type);
    for (int32_t i = 0; i < s->graph->n_ops; i++)
        if (!role_supported(&s->graph->ops[i])) {
            st = ats_err_set(err, ATS_EINVAL, "op %d '%s' (role %s) is not supported by the executor", i,
                             s->graph->ops[i].name, ats_role_name(s->graph->ops[i].role));
            ex_session_free(s);
            return st;
        }
    size_t cache = kv_slab_bytes(s), cache_al = (cache + 4095) / 4096 * 4096;
    s->pin = o.pin;
    s->unpin = o.unpin;
    s->pin_ctx = o.pin_ctx;
    if (!s->pin || !s->unpin) s->pin = NULL; /* both or neither */
    s->k_cache = aligned_alloc(4096, cache_al ? cache_al : 4096);
    s->v_cache = aligned_alloc(4096, cache_al ? cache_al : 4096);
    if (s->pin && s->k_cache && s->v_cache && cache_al) {
        s->pin_asked += 2 * cache_al;
        if ((s->k_pinned = s->pin(s->pin_ctx, s->k_cache, cache_al) == 0)) s->pin_done += cache_al;
        if ((s->v_pinned = s->pin(s->pin_ctx, s->v_cache, cache_al) == 0)) s->pin_done += cache_al;
    }
    s->op_tin = calloc((size_t)s->graph->n_ops, sizeof *s->op_tin);
    s->op_tsw = calloc((size_t)s->graph->n_ops, sizeof *s->op_tsw);
    s->op_be = calloc((size_t)s->graph->n_ops, sizeof *s->op_be);
    s->op_ns = calloc((size_t)s->graph->n_ops, sizeof *s->op_ns);
    s->op_t0 = calloc((size_t)s->graph->n_ops, sizeof *s->op_t0);
    s->op_t1 = calloc((size_t)s->graph->n_ops, sizeof *s->op_t1);
    s->kv_be = calloc((size_t)(a->n_layer > 0 ? a->n_layer : 1), sizeof *s->kv_be);
    s->kv_stale = calloc((size_t)(a->n_layer > 0 ? a->n_layer : 1), 1);
    s->cap_uniq = s->graph->n_ops + 4;
    s->uniq = calloc((size_t)s->cap_uniq, sizeof *s->uniq);
    if (!s->k_cache || !s->v_cache || !s->op_tin || !s->op_tsw || !s->op_be || !s->op_ns || !s->op_t0 || !s->op_t1 || !s->kv_be || !s->kv_stale || !s->uniq) {
        long long nc = (long long)s->n_ctx;
        const char *ty = ats_qtype_name(s->kv_type);
        ex_session_free(s);
        return ats_err_set(err, ATS_ENOMEM, "%s KV cache of %lld tokens (%.1f MiB) does not fit", ty, nc,
                           2.0 * (double)cache / 1048576.0);
    }
    const ex_backend *A = o.backend_a ? o.backend_a : ex_backend_cpu();
    const ex_backend *B = o.backend_b ? o.backend_b : ex_backend_cpu();
    for (int32_t i = 0; i < s->graph->n_ops; i++) {
        const ats_op *op = &s->graph->ops[i];
        if (o.op_backend && o.op_backend[i]) s->op_be[i] = o.op_backend[i];
        else if (o.split_layer < 0) s->op_be[i] = A;
        else if (op->layer >= 0) s->op_be[i] = op->layer < o.split_layer ? A : B;
        else s->op_be[i] = op->role == ATS_ROLE_TOKEN_EMBD ? A : (o.split_layer < a->n_layer ? B : A);
        int seen = 0;
        for (int j = 0; j < s->n_uniq && !seen; j++) seen = s->uniq[j] == s->op_be[i];
        if (!seen) s->uniq[s->n_uniq++] = s->op_be[i];
    }
    if (s->kv_type == ATS_Q_F16)
        for (int j = 0; j < s->n_uniq; j++)
            if (!s->uniq[j]->kv_store_f16 || !s->uniq[j]->attention_f16) {
                st = ats_err_set(err, ATS_EINVAL, "backend '%s' has no F16 KV cache ops (kv_store_f16, attention_f16)",
                                 s->uniq[j]->name ? s->uniq[j]->name : "?");
                ex_session_free(s);
                return st;
            }
    s->sync_ops = o.sync_ops;
    *out = s;
    return ATS_OK;
}

enum ats_status ex_session_set_op_backend(ex_session *s, int32_t i, const ex_backend *be)
{
    if (i < 0 || i >= s->graph->n_ops || !be) return ATS_EINVAL;
    s->op_be[i] = be;
    int seen = 0;
    for (int j = 0; j < s->n_uniq && !seen; j++) seen = s->uniq[j] == be;
    if (!seen) {
        if (s->n_uniq == s->cap_uniq) return ATS_EINVAL; /* more distinct tables than ops + 4 */
        s->uniq[s->n_uniq++] = be;
    }
    return ATS_OK;
}

void ex_session_set_hook(ex_session *s, ex_session_hook hook, void *user)
{
    s->hook = hook;
    s->hook_user = user;
}

enum ats_status ex_session_round_graph(const ex_session *s, ats_phase_kind kind, int64_t n_tokens,
                                       int64_t ctx_pos, ats_graph **out, ats_err *err)
{
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = ATS_RECIPE_F32;
    go.tensor_types = s->types;
    go.phase.kind = kind;
    go.phase.n_tokens = n_tokens;
    go.phase.ctx_pos = ctx_pos;
    go.n_ctx = s->n_ctx;
    enum ats_status st = ats_graph_build(&s->m->arch, &go, out, err);
    if (st) return st;
    patch_graph(*out, s->m, s->n_ctx, s->kv_type);
    return ATS_OK;
}

void ex_session_op_weight(const ex_session *s, int32_t i, const void **host, size_t *bytes)
{
    *host = NULL;
    *bytes = 0;
    if (i < 0 || i >= s->graph->n_ops) return;
    const ats_op *op = &s->graph->ops[i];
    const ex_tensor *t = op_tensor(s->m, op);
    if (!t || !t->data) return;
    *host = t->data;
    if (op->role == ATS_ROLE_OUTPUT_NORM || op->role == ATS_ROLE_ATTN_NORM || op->role == ATS_ROLE_FFN_NORM)
        *bytes = (size_t)t->ne[0] * sizeof(float); /* what rmsnorm reads */
    else
        *bytes = (size_t)(t->row_bytes * (uint64_t)t->ne[1] * (uint64_t)(t->ne[2] > 0 ? t->ne[2] : 1));
}

void ex_session_kv_layer(const ex_session *s, int64_t layer, void **k, void **v, size_t *bytes)
{
    *k = *v = NULL;
    *bytes = 0;
    const ats_arch *a = &s->m->arch;
    if (layer < 0 || layer >= a->n_layer) return;
    const size_t one = (size_t)(s->n_ctx * a->n_head_kv * a->head_dim) * kv_elem_bytes(s->kv_type);
    *k = (char *)s->k_cache + (size_t)layer * one;
    *v = (char *)s->v_cache + (size_t)layer * one;
    *bytes = one;
}

void ex_session_router_ids(const ex_session *s, const int32_t **ids, int64_t *n_tokens, int64_t *k)
{
    *ids = s->ids;
    *n_tokens = s->cur_n;
    *k = s->m->arch.n_expert_used;
}

enum ats_status ex_session_set_expert_map(ex_session *s, int64_t layer, const int32_t *slot_of, int64_t n_sel)
{
    free(s->emap);
    s->emap = NULL;
    if (!slot_of) return ATS_OK;
    const ats_arch *a = &s->m->arch;
    if (layer < 0 || layer >= a->n_layer || n_sel < 1 || n_sel > a->n_expert) return ATS_EINVAL;
    s->emap = malloc((size_t)a->n_expert * sizeof *s->emap);
    if (!s->emap) return ATS_ENOMEM;
    memcpy(s->emap, slot_of, (size_t)a->n_expert * sizeof *s->emap);
    s->emap_layer = layer;
    s->emap_n = n_sel;
    return ATS_OK;
}

int64_t ex_session_pos(const ex_session *s) { return s->pos; }

int64_t ex_session_ctx_of(const ex_model *m, const ex_session_opts *o)
{
    const int64_t mx = m->arch.n_ctx_max;
    return o && o->n_ctx > 0 ? o->n_ctx : (mx > 0 && mx < 4096 ? mx : 4096);
}

/* Drops backend be's copy of layer l's K and V slabs. */
static void forget_layer(ex_session *s, const ex_backend *be, int64_t l)
{
    void *k, *v;
    size_t b;
    ex_session_kv_layer(s, l, &k, &v, &b);
    if (k) be->forget(be->ctx, k, b);
    if (v) be->forget(be->ctx, v, b);
}

void ex_session_clear(ex_session *s)
{
    /* A device's copy of a layer's KV rows is a row prefix it extends by uploads (exec/README.md
     * "Residency"); after a clear its prefix no longer matches the host's rows. Copies of backends
     * that did not append the layer's rows last are dropped now; the last appender keeps its copy
     * (it rewrites the rows from 0 itself: no reallocation while one backend runs the layer) until
     * another backend runs that layer's attention: then it flushes and drops it (kv_stale). */
    for (int64_t l = 0; l < s->m->arch.n_layer; l++)
        for (int i = 0; i < s->n_uniq; i++) {
            const ex_backend *u = s->uniq[i];
            if (!u->forget) continue;
            if (u == s->kv_be[l]) s->kv_stale[l] = 1;
            else forget_layer(s, u, l);
        }
    s->pos = 0;
}
int64_t ex_session_n_ctx(const ex_session *s) { return s->n_ctx; }
ats_qtype ex_session_kv_type(const ex_session *s) { return s->kv_type; }
uint64_t ex_session_kv_bytes(const ex_session *s) { return 2u * (uint64_t)kv_slab_bytes(s); }
ex_op_times ex_session_times(const ex_session *s) { return s->times; }
const ats_graph *ex_session_graph(const ex_session *s) { return s->graph; }
const int64_t *ex_session_op_ns(const ex_session *s) { return s->op_ns; }
const ex_backend *ex_session_op_backend(const ex_session *s, int32_t i)
{
    return i >= 0 && i < s->graph->n_ops ? s->op_be[i] : NULL;
}
void ex_session_last_op_times(const ex_session *s, const int64_t **t_start_ns, const int64_t **t_end_ns)
{
    *t_start_ns = s->op_t0;
    *t_end_ns = s->op_t1;
}
void ex_session_last_op_host(const ex_session *s, const int64_t **t_in_ns, const int64_t **t_sw_ns)
{
    *t_in_ns = s->op_tin;
    *t_sw_ns = s->op_tsw;
}
enum ats_status ex_session_reserve(ex_session *s, int64_t n_tokens)
{
    if (n_tokens < 1 || n_tokens > s->n_ctx) return ATS_EINVAL; /* a forward never has more */
    return ensure_scratch(s, n_tokens) ? ATS_ENOMEM : ATS_OK;
}
void ex_session_pinned(const ex_session *s, size_t *asked, size_t *pinned)
{
    *asked = s->pin_asked;
    *pinned = s->pin_done;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A host op inside a device backend's op (NULL rope_ff / swiglu entry): the backend's writes
 * come back first (host_begin), and it forgets its copies of what the host op changed (host_end). */
static enum ats_status host_begin(const ex_backend *be) { return be->flush ? be->flush(be->ctx, 0) : ATS_OK; }
static void host_end(const ex_backend *be)
{
    if (be->host_wrote) be->host_wrote(be->ctx);
}

/* Runs graph op i on its backend. The dense FFN is split along the graph's ops (gate, up, then
 * SwiGLU + down); routed experts run as one fused op at the graph's FFN_GATE_EXPS op (gate, up,
 * down of the selected experts), shared experts likewise at FFN_GATE_SHEXP; their up/down ops are
 * executed by those fused ops. The residual add of a block runs with its last op. */
static enum ats_status run_op(ex_session *s, int32_t i, const int32_t *tokens, int64_t n, float *logits)
{
    const ex_model *m = s->m;
    const ats_arch *a = &m->arch;
    const ats_op *op = &s->graph->ops[i];
    const ex_backend *be = s->op_be[i];
    void *c = be->ctx;
    const int64_t E = a->n_embd, hd = a->head_dim, H = a->n_head, Hkv = a->n_head_kv, kvd = Hkv * hd;
    const float eps = (float)a->rms_norm_eps;
    const ex_layer *L = op->layer >= 0 ? &m->layers[op->layer] : NULL;
    const int last_of_layer = i + 1 >= s->graph->n_ops || s->graph->ops[i + 1].layer != op->layer;
    enum ats_status st = ATS_OK;
    switch (op->role) {
    case ATS_ROLE_TOKEN_EMBD: return be->embedding(c, &m->tok_embd, tokens, n, s->x);
    case ATS_ROLE_ATTN_NORM: return be->rmsnorm(c, s->x, L->attn_norm.data, n, E, eps, s->xb);
    case ATS_ROLE_ATTN_Q: return be->matmul(c, &L->wq, s->xb, n, s->q);
    case ATS_ROLE_ATTN_K: return be->matmul(c, &L->wk, s->xb, n, s->k);
    case ATS_ROLE_ATTN_V: return be->matmul(c, &L->wv, s->xb, n, s->v);
    case ATS_ROLE_ATTN: {
        const size_t layer_off = (size_t)(op->layer * s->n_ctx * kvd) * kv_elem_bytes(s->kv_type); /* [bytes] */
        void *kc = (char *)s->k_cache + layer_off, *vc = (char *)s->v_cache + layer_off;
        const float theta = (float)a->rope_theta;
        if (a->qk_norm) {
            if ((st = be->qk_norm(c, s->q, L->q_norm.data, n, H, hd, eps))) return st;
            if ((st = be->qk_norm(c, s->k, L->k_norm.data, n, Hkv, hd, eps))) return st;
        }
        if (m->rope_freqs.data && be->rope_ff) {
            const float *ff = m->rope_freqs.data;
            if ((st = be->rope_ff(c, s->q, n, H, hd, m->n_rot, s->pos, theta, a->rope_type, ff))) return st;
            if ((st = be->rope_ff(c, s->k, n, Hkv, hd, m->n_rot, s->pos, theta, a->rope_type, ff))) return st;
        } else if (m->rope_freqs.data) { /* host fallback */
            const float *ff = m->rope_freqs.data;
            if ((st = host_begin(be))) return st;
            st = ex_cpu_rope_ff(s->q, n, H, hd, m->n_rot, s->pos, theta, a->rope_type, ff);
            if (st == ATS_OK) st = ex_cpu_rope_ff(s->k, n, Hkv, hd, m->n_rot, s->pos, theta, a->rope_type, ff);
            host_end(be);
            if (st) return st;
        } else {
            if ((st = be->rope(c, s->q, n, H, hd, m->n_rot, s->pos, theta, a->rope_type))) return st;
            if ((st = be->rope(c, s->k, n, Hkv, hd, m->n_rot, s->pos, theta, a->rope_type))) return st;
        }
        const float scale = 1.0f / sqrtf((float)hd);
        if (s->kv_type == ATS_Q_F16) {
            if ((st = be->kv_store_f16(c, s->k, s->v, n, s->pos, kvd, s->n_ctx, kc, vc))) return st;
            return be->attention_f16(c, s->q, n, s->pos, kc, vc, H, Hkv, hd, scale, s->att);
        }
        if ((st = be->kv_store(c, s->k, s->v, n, s->pos, kvd, s->n_ctx, kc, vc))) return st;
        return be->attention(c, s->q, n, s->pos, kc, vc, H, Hkv, hd, scale, s->att);
    }
    case ATS_ROLE_ATTN_OUTPUT:
        if ((st = be->matmul(c, &L->wo, s->att, n, s->tmp))) return st;
        return be->add(c, s->x, s->tmp, n * E);
    case ATS_ROLE_FFN_NORM: return be->rmsnorm(c, s->x, L->ffn_norm.data, n, E, eps, s->xb);
    case ATS_ROLE_FFN_GATE: return be->matmul(c, &L->ffn_gate, s->xb, n, s->g);
    case ATS_ROLE_FFN_UP: return be->matmul(c, &L->ffn_up, s->xb, n, s->u);
    case ATS_ROLE_FFN_DOWN:
        if (be->swiglu) {
            st = be->swiglu(c, s->g, s->u, n * a->n_ff, s->g);
        } else { /* host fallback */
            if ((st = host_begin(be))) return st;
            st = ex_cpu_swiglu(s->g, s->u, n * a->n_ff, s->g);
            host_end(be);
        }
        if (st) return st;
        if ((st = be->matmul(c, &L->ffn_down, s->g, n, s->tmp))) return st;
        return be->add(c, s->x, s->tmp, n * E);
    case ATS_ROLE_FFN_GATE_INP:
        if ((st = be->matmul(c, &L->gate_inp, s->xb, n, s->router))) return st;
        return be->router_topk(c, s->router, n, a->n_expert, a->n_expert_used, m->norm_topk, s->ids, s->wts);
    case ATS_ROLE_FFN_GATE_EXPS:
        if (s->emap && s->emap_layer == op->layer) { /* compact copy of the selected experts */
            const int64_t nk = n * a->n_expert_used;
            for (int64_t j = 0; j < nk; j++) {
                int32_t e = s->ids[j];
                if (e < 0 || e >= a->n_expert || s->emap[e] < 0) return ATS_EINVAL;
                s->ids_map[j] = s->emap[e];
            }
            if (be->host_wrote) be->host_wrote(c); /* ids_map changed in host memory */
            ex_tensor gv = L->gate_exps, uv = L->up_exps, dv = L->down_exps;
            gv.ne[2] = uv.ne[2] = dv.ne[2] = s->emap_n;
            free(s->emap);
            s->emap = NULL;
            return be->moe(c, &gv, &uv, &dv, s->xb, n, s->ids_map, s->wts, a->n_expert_used, s->tmp);
        }
        return be->moe(c, &L->gate_exps, &L->up_exps, &L->down_exps, s->xb, n, s->ids, s->wts, a->n_expert_used, s->tmp);
    case ATS_ROLE_FFN_GATE_SHEXP:
        if ((st = be->ffn(c, &L->gate_shexp, &L->up_shexp, &L->down_shexp, s->xb, n, s->tmp2))) return st;
        return be->add(c, s->tmp, s->tmp2, n * E);
    case ATS_ROLE_FFN_UP_EXPS: case ATS_ROLE_FFN_DOWN_EXPS: case ATS_ROLE_FFN_UP_SHEXP: case ATS_ROLE_FFN_DOWN_SHEXP:
        /* run by the fused op above; the MoE block's residual add runs with its last op */
        return last_of_layer ? be->add(c, s->x, s->tmp, n * E) : ATS_OK;
    case ATS_ROLE_OUTPUT_NORM: return be->rmsnorm(c, s->x + (n - 1) * E, m->output_norm.data, 1, E, eps, s->xb);
    case ATS_ROLE_OUTPUT: return be->output(c, &m->output, s->xb, 1, logits);
    default: return ATS_EINVAL;
    }
}

static int64_t *time_slot(ex_op_times *t, const ats_op *op)
{
    switch (op->kind) {
    case ATS_OP_EMBED: return &t->embed_ns;
    case ATS_OP_NORM: return &t->norm_ns;
    case ATS_OP_ATTN: return &t->attn_ns;
    case ATS_OP_EXPERTS: return &t->moe_ns;
    case ATS_OP_SHEXP: return &t->ffn_ns;
    default:
        if (op->role == ATS_ROLE_OUTPUT) return &t->output_ns;
        if (op->role == ATS_ROLE_FFN_GATE || op->role == ATS_ROLE_FFN_UP || op->role == ATS_ROLE_FFN_DOWN) return &t->ffn_ns;
        if (op->role == ATS_ROLE_FFN_GATE_INP) return &t->moe_ns;
        return &t->matmul_ns;
    }
}

/* Before op i on backend `be`: the previous backend's writes reach the host, the KV rows of op i's
 * layer come back from the backend that wrote them if that is not `be`, and `be` forgets its
 * copies of host activations that others may have changed. */
static enum ats_status switch_to(ex_session *s, int32_t i, const ex_backend *be, const char **who)
{
    const ats_op *op = &s->graph->ops[i];
    enum ats_status st;
    if (be != s->last && s->last && s->last->flush) {
        *who = s->last->name;
        if ((st = s->last->flush(s->last->ctx, 0))) return st;
    }
    if (op->kind == ATS_OP_ATTN && op->layer >= 0) {
        const ex_backend *w = s->kv_be[op->layer];
        if (w && w != be && w->flush) {
            *who = w->name;
            if ((st = w->flush(w->ctx, 1))) return st;
        }
        if (w && w != be && s->kv_stale[op->layer]) { /* its copy predates an ex_session_clear */
            if (w->forget) forget_layer(s, w, op->layer);
            s->kv_stale[op->layer] = 0;
        }
        s->kv_be[op->layer] = be;
    }
    if (be != s->last && be->host_wrote) be->host_wrote(be->ctx);
    s->last = be;
    return ATS_OK;
}

/* End of a forward (also on errors): the last backend's writes (the logits) reach the host. */
static enum ats_status flush_last(ex_session *s)
{
    return s->last && s->last->flush ? s->last->flush(s->last->ctx, 0) : ATS_OK;
}

enum ats_status ex_session_forward(ex_session *s, const int32_t *tokens, int64_t n, float *logits,
                                   ats_err *err)
{
    const ats_arch *a = &s->m->arch;
    if (n < 1) return ats_err_set(err, ATS_EINVAL, "forward: n_tokens = %lld (must be >= 1)", (long long)n);
    if (s->pos + n > s->n_ctx)
        return ats_err_set(err, ATS_ERANGE, "context full: %lld tokens in the cache + %lld new > n_ctx %lld",
                           (long long)s->pos, (long long)n, (long long)s->n_ctx);
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= a->n_vocab)
            return ats_err_set(err, ATS_EINVAL, "token %lld (index %lld) outside the vocabulary [0, %lld)",
                               (long long)tokens[t], (long long)t, (long long)a->n_vocab);
    if (ensure_scratch(s, n)) return ats_err_set(err, ATS_ENOMEM, "scratch for %lld tokens", (long long)n);
    s->cur_n = n;
    for (int32_t i = 0; i < s->graph->n_ops; i++) {
        const ex_backend *be = s->op_be[i];
        const char *who = be->name, *when = NULL; /* when != NULL: a flush failed, before or after op i */
        const int64_t t_in = now_ns();
        int64_t t0 = t_in;
        enum ats_status st = switch_to(s, i, be, &who);
        s->op_tin[i] = t_in;
        s->op_tsw[i] = now_ns();
        if (st != ATS_OK) when = "before";
        else if (s->hook && (st = s->hook(s->hook_user, i, 0, err)) != ATS_OK) {
            (void)flush_last(s);
            return st; /* the hook's message names the op and the call */
        } else {
            who = be->name;
            /* the op's own time: not the wait for another backend (switch_to) or the hook's work */
            t0 = now_ns();
            st = run_op(s, i, tokens, n, logits);
            if (st == ATS_OK && s->sync_ops && be->flush && (st = be->flush(be->ctx, 0)) != ATS_OK) when = "after";
            if (st == ATS_OK && s->hook && (st = s->hook(s->hook_user, i, 1, err)) != ATS_OK) {
                (void)flush_last(s);
                return st;
            }
        }
        /* the forward's last op also waits for the final flush (the logits) */
        if (st == ATS_OK && i + 1 == s->graph->n_ops && (st = flush_last(s)) != ATS_OK) when = "after";
        int64_t t1 = now_ns(), dt = t1 - t_in;
        s->op_t0[i] = t0;
        s->op_t1[i] = t1;
        s->op_ns[i] += dt;
        *time_slot(&s->times, &s->graph->ops[i]) += dt;
        if (st != ATS_OK) {
            (void)flush_last(s); /* bring back what it can; the first failure is the one reported */
            if (when)
                return ats_err_set(err, st, "forward: flush of backend %s %s op %d '%s' failed at position %lld: %s", who,
                                   when, i, s->graph->ops[i].name, (long long)s->pos, ats_status_str(st));
            return ats_err_set(err, st, "forward: op %d '%s' on backend %s failed at position %lld: %s", i,
                               s->graph->ops[i].name, who, (long long)s->pos, ats_status_str(st));
        }
    }
    s->pos += n;
    return ATS_OK;
}
