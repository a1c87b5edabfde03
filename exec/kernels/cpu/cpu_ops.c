/* CPU implementations of the ops of ex/ops.h (everything except the matmuls: cpu_matmul.c). */
#include "ex/ops.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ex/quant.h"
#include "cpu_simd.h"

ex_tensor ex_tensor_matrix(const ex_tensor *w, int64_t e)
{
    ex_tensor v = *w;
    v.ne[2] = 1;
    v.data = (const uint8_t *)w->data + (size_t)e * (size_t)w->ne[1] * w->row_bytes;
    return v;
}

ex_sample_params ex_sample_params_default(void)
{
    ex_sample_params p = {0.0f, 0, 1.0f};
    return p;
}

enum ats_status ex_cpu_embedding(const ex_tensor *tok_embd, const int32_t *tokens, int64_t n_tokens,
                                 float *x)
{
    int64_t n = tok_embd->ne[0];
    for (int64_t t = 0; t < n_tokens; t++)
        if (tokens[t] < 0 || tokens[t] >= tok_embd->ne[1]) return ATS_EINVAL;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *row = (const uint8_t *)tok_embd->data + (size_t)tokens[t] * tok_embd->row_bytes;
        enum ats_status st = ex_dequantize_row(tok_embd->type, row, x + t * n, n);
        if (st != ATS_OK) return st;
    }
    return ATS_OK;
}

enum ats_status ex_cpu_rmsnorm(const float *x, const float *w, int64_t n_rows, int64_t n, float eps,
                               float *y)
{
    if (n <= 0) return ATS_EINVAL;
#pragma omp parallel for schedule(static) if (n_rows * n >= 65536 && n_rows > 1)
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float ss = 0.0f;
        for (int64_t i = 0; i < n; i++) ss += xr[i] * xr[i];
        ss = 1.0f / sqrtf(ss / (float)n + eps);
        for (int64_t i = 0; i < n; i++) yr[i] = w[i] * (ss * xr[i]);
    }
    return ATS_OK;
}

enum ats_status ex_cpu_qk_norm(float *x, const float *w, int64_t n_tokens, int64_t n_head,
                               int64_t head_dim, float eps)
{
    return ex_cpu_rmsnorm(x, w, n_tokens * n_head, head_dim, eps, x);
}

enum ats_status ex_cpu_rope(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                            int64_t n_rot, int64_t pos0, float theta, ats_rope_type type)
{
    return ex_cpu_rope_ff(x, n_tokens, n_head, head_dim, n_rot, pos0, theta, type, NULL);
}

enum ats_status ex_cpu_rope_ff(float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                               int64_t pos0, float theta, ats_rope_type type, const float *freq_factors)
{
    if (n_rot <= 0 || n_rot % 2 || n_rot > head_dim) return ATS_EINVAL;
    int64_t half = n_rot / 2;
    for (int64_t t = 0; t < n_tokens; t++) {
        float pos = (float)(pos0 + t);
        for (int64_t i = 0; i < half; i++) {
            /* llama2.c: freq = 1 / theta^(2i / n_rot), angle = pos * freq (float) */
            float freq = 1.0f / powf(theta, (float)(2 * i) / (float)n_rot);
            if (freq_factors) freq /= freq_factors[i];
            float ang = pos * freq, c = cosf(ang), s = sinf(ang);
            for (int64_t h = 0; h < n_head; h++) {
                float *v = x + (t * n_head + h) * head_dim;
                int64_t a = type == ATS_ROPE_NORM ? 2 * i : i;
                int64_t b = type == ATS_ROPE_NORM ? 2 * i + 1 : i + half;
                float v0 = v[a], v1 = v[b];
                v[a] = v0 * c - v1 * s;
                v[b] = v0 * s + v1 * c;
            }
        }
    }
    return ATS_OK;
}

enum ats_status ex_cpu_kv_store(const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                int64_t kv_dim, int64_t n_ctx, float *k_cache, float *v_cache)
{
    if (pos0 < 0 || pos0 + n_tokens > n_ctx) return ATS_EINVAL;
    memcpy(k_cache + pos0 * kv_dim, k, (size_t)(n_tokens * kv_dim) * sizeof(float));
    memcpy(v_cache + pos0 * kv_dim, v, (size_t)(n_tokens * kv_dim) * sizeof(float));
    return ATS_OK;
}

enum ats_status ex_cpu_kv_store_f16(const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                    int64_t kv_dim, int64_t n_ctx, ex_fp16 *k_cache, ex_fp16 *v_cache)
{
    if (pos0 < 0 || n_tokens < 0 || kv_dim < 0 || pos0 + n_tokens > n_ctx) return ATS_EINVAL;
    const ex_f32_to_f16_fn cvt = ex_pick_f32_to_f16();
    cvt(k, k_cache + pos0 * kv_dim, n_tokens * kv_dim);
    cvt(v, v_cache + pos0 * kv_dim, n_tokens * kv_dim);
    return ATS_OK;
}

/* Attention of both cache types (el: bytes of a cache element), flash-decoding style: each (token,
 * KV head) row set — the n_head / n_head_kv query heads sharing that KV head — is cut into fixed
 * blocks of ATTN_BLOCK positions; a block partial (ex_attn_part_fn: the block's max, exp-sum and
 * exp-weighted V sum per head) reads each K and V row once for the whole group, and attn_combine
 * joins the blocks in order. Work items: (token, KV head) when there are enough of them (prefill),
 * else (token, KV head, block) (decode: Qwen3-14B at 512 positions has 8 KV heads × 9 blocks where
 * the row kernel had 40 heads over 16 threads). Both layouts compute the same partials and combine
 * them alike, so a decode step gives the bits of its row in a prefill chunk. Measured on the H200
 * host (Qwen3-14B, F32 cache, 513 positions, one layer): 1106 µs on 1 thread, 291 µs on 16 (it
 * scales to ~4 threads only; items of all KV heads of a 32-position block, reading whole cache
 * rows: 1252 / 305 µs). */
enum { ATTN_BLOCK = 64 };

/* Output row j of the nh heads of one (token, KV head) from its nb block partials, each P = nh·(hd + 2)
 * floats (m[nh], l[nh], o[nh·hd]): M = max m_b, o = Σ_b e^(m_b − M) o_b / Σ_b e^(m_b − M) l_b. */
static void attn_combine_head(const float *part, int64_t nb, int64_t nh, int64_t hd, int64_t j, float *oj)
{
    const int64_t P = nh * (hd + 2);
    float M = -INFINITY, L = 0.0f;
    for (int64_t b = 0; b < nb; b++) M = fmaxf(M, part[b * P + j]);
    for (int64_t i = 0; i < hd; i++) oj[i] = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const float *pb = part + b * P, *ob = pb + 2 * nh + j * hd;
        const float w = expf(pb[j] - M);
        L += w * pb[nh + j];
        for (int64_t i = 0; i < hd; i++) oj[i] += w * ob[i];
    }
    const float inv = 1.0f / L;
    for (int64_t i = 0; i < hd; i++) oj[i] *= inv;
}

/* The decode layout's partials (items × blocks × P floats), kept per calling thread and grown as
 * needed: a fresh allocation a call (~190 KB for Qwen3-14B at 512 positions) costs page faults on
 * every thread that writes it. */
static _Thread_local float *g_parts;
static _Thread_local size_t g_parts_cap;

static float *parts_buffer(size_t n)
{
    if (n > g_parts_cap) {
        float *p = realloc(g_parts, n * sizeof *p);
        if (!p) return NULL;
        g_parts = p;
        g_parts_cap = n;
    }
    return g_parts;
}

static enum ats_status attention_blocks(const float *q, int64_t n_tokens, int64_t pos0, ex_attn_part_fn part,
                                        const void *k_cache, const void *v_cache, size_t el, int64_t n_head,
                                        int64_t n_head_kv, int64_t head_dim, float scale, float *out)
{
    if (n_head_kv <= 0 || n_head % n_head_kv || n_tokens < 1 || pos0 < 0 || head_dim < 1) return ATS_EINVAL;
    const int64_t group = n_head / n_head_kv, kv_dim = n_head_kv * head_dim, B = ATTN_BLOCK;
    const int64_t nbm = (pos0 + n_tokens + B - 1) / B, P = group * (head_dim + 2), items = n_tokens * n_head_kv;
    const char *kc = k_cache, *vc = v_cache;
    const int par = (double)n_tokens * (double)n_head * (double)(pos0 + n_tokens) * (double)head_dim >= 131072.0;
    int bad = 0;
#define ATTN_PART(t, g, b, dst, s)                                                                                 \
    do {                                                                                                          \
        const int64_t p0_ = (b) * B, len_ = pos0 + (t) + 1, n_ = len_ - p0_ < B ? len_ - p0_ : B;                  \
        const size_t off_ = (size_t)(p0_ * kv_dim + (g) * head_dim) * el;                                         \
        part(q + ((t) * n_head + (g) * group) * head_dim, group, kc + off_, vc + off_, kv_dim, n_, head_dim, scale, \
             (s), (dst), (dst) + group, (dst) + 2 * group);                                                        \
    } while (0)
    if (!par || items >= 2 * (int64_t)omp_get_max_threads()) { /* (token, KV head) items, blocks in turn */
#pragma omp parallel if (par)
        {
            float *pt = malloc((size_t)(nbm * P + B) * sizeof(float));
            if (!pt) {
#pragma omp atomic write
                bad = 1;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < items; it++) {
                if (!pt) continue;
                const int64_t t = it / n_head_kv, g = it % n_head_kv, nb = (pos0 + t + B) / B;
                for (int64_t b = 0; b < nb; b++) ATTN_PART(t, g, b, pt + b * P, pt + nbm * P);
                for (int64_t j = 0; j < group; j++)
                    attn_combine_head(pt, nb, group, head_dim, j, out + (t * n_head + g * group + j) * head_dim);
            }
            free(pt);
        }
        return bad ? ATS_ENOMEM : ATS_OK;
    }
    float *all = parts_buffer((size_t)(items * nbm * P)); /* (token, KV head, block) items */
    if (!all) return ATS_ENOMEM;
#pragma omp parallel
    {
        float s[ATTN_BLOCK];
#pragma omp for schedule(dynamic, 1)
        for (int64_t w = 0; w < items * nbm; w++) {
            const int64_t it = w / nbm, b = w % nbm, t = it / n_head_kv, g = it % n_head_kv;
            if (b * B <= pos0 + t) ATTN_PART(t, g, b, all + w * P, s);
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_tokens * n_head; h++) { /* one head of one token: its group's partials */
            const int64_t t = h / n_head, g = h % n_head / group, it = t * n_head_kv + g;
            attn_combine_head(all + it * nbm * P, (pos0 + t + B) / B, group, head_dim, h % n_head % group,
                              out + h * head_dim);
        }
    }
#undef ATTN_PART
    return ATS_OK;
}

enum ats_status ex_cpu_attention(const float *q, int64_t n_tokens, int64_t pos0, const float *k_cache,
                                 const float *v_cache, int64_t n_head, int64_t n_head_kv,
                                 int64_t head_dim, float scale, float *out)
{
    return attention_blocks(q, n_tokens, pos0, ex_pick_attn_part(), k_cache, v_cache, sizeof(float), n_head,
                            n_head_kv, head_dim, scale, out);
}

enum ats_status ex_cpu_attention_f16(const float *q, int64_t n_tokens, int64_t pos0, const ex_fp16 *k_cache,
                                     const ex_fp16 *v_cache, int64_t n_head, int64_t n_head_kv,
                                     int64_t head_dim, float scale, float *out)
{
    return attention_blocks(q, n_tokens, pos0, ex_pick_attn_part_f16(), k_cache, v_cache, sizeof(ex_fp16), n_head,
                            n_head_kv, head_dim, scale, out);
}

enum ats_status ex_cpu_swiglu(const float *gate, const float *up, int64_t n, float *out)
{
    /* threads from 4096 elements: ~4 ns an expf on one core of the H200 host, so a Qwen3-14B decode
       step's 17408 took ~70 µs a layer serially (a fork/join of a spinning team is a few µs) and a
       Qwen3-30B-A3B MoE decode's 8 x 768 ~25 µs; a 128-token prefill chunk's 2.2M ~9 ms */
#pragma omp parallel for schedule(static) if (n >= 4096)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
    return ATS_OK;
}

enum ats_status ex_cpu_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return ATS_OK;
}

enum ats_status ex_cpu_ffn(const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down,
                           const float *x, int64_t n_tokens, float *out)
{
    int64_t n_ff = gate->ne[1];
    if (up->ne[1] != n_ff || down->ne[0] != n_ff || gate->ne[0] != up->ne[0] || down->ne[1] != gate->ne[0])
        return ATS_EINVAL;
    float *g = malloc((size_t)(2 * n_tokens * n_ff) * sizeof(float));
    if (!g) return ATS_ENOMEM;
    float *u = g + n_tokens * n_ff;
    enum ats_status st;
    if (n_tokens == 1) { /* decode: gate and up in one parallel region, x quantized once */
        const ex_tensor gu[2] = {*gate, *up};
        const float *xs[2] = {x, x};
        float *ys[2] = {g, u};
        st = ex_cpu_matmul_multi(gu, xs, ys, 2);
    } else {
        st = ex_cpu_matmul(gate, x, n_tokens, g);
        if (st == ATS_OK) st = ex_cpu_matmul(up, x, n_tokens, u);
    }
    if (st == ATS_OK) st = ex_cpu_swiglu(g, u, n_tokens * n_ff, g);
    if (st == ATS_OK) st = ex_cpu_matmul(down, g, n_tokens, out);
    free(g);
    return st;
}

enum ats_status ex_cpu_router_topk(const float *logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                                   int norm_topk, int32_t *ids, float *weights)
{
    if (k <= 0 || k > n_expert) return ATS_EINVAL;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *l = logits + t * n_expert;
        float mx = -INFINITY;
        for (int64_t e = 0; e < n_expert; e++) mx = fmaxf(mx, l[e]);
        double sum = 0;
        for (int64_t e = 0; e < n_expert; e++) sum += exp((double)(l[e] - mx));
        int32_t *id = ids + t * k;
        float *w = weights + t * k;
        double wsum = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < n_expert; e++) {
                int taken = 0;
                for (int64_t q = 0; q < j; q++) taken |= id[q] == e;
                if (!taken && (best < 0 || l[e] > l[best])) best = e;
            }
            id[j] = (int32_t)best;
            w[j] = (float)(exp((double)(l[best] - mx)) / sum);
            wsum += w[j];
        }
        if (norm_topk)
            for (int64_t j = 0; j < k; j++) w[j] = (float)(w[j] / wsum);
    }
    return ATS_OK;
}

/* ex_cpu_moe of one token (decode): the k experts' gate and up matmuls in one parallel region, their
   down matmuls in a second (ex_cpu_matmul_multi), where the per-expert loop ran 3 regions an expert over
   768-row matrices (Qwen3-30B-A3B: 24 a layer, each as slow as its slowest thread). Bit for bit that
   loop: the same row kernels, the SwiGLU per expert, and out summed in increasing expert id. */
static enum ats_status moe_decode(const ex_tensor *gate_exps, const ex_tensor *up_exps, const ex_tensor *down_exps,
                                  const float *x, const int32_t *ids, const float *weights, int64_t k, float *out)
{
    const int64_t n_embd = gate_exps->ne[0], n_ff = gate_exps->ne[1];
    if (up_exps->ne[1] != n_ff || down_exps->ne[0] != n_ff || up_exps->ne[0] != n_embd || k < 1 || k > INT32_MAX / 2)
        return ATS_EINVAL;
    int64_t *ord = malloc((size_t)k * sizeof *ord);
    ex_tensor *w = malloc((size_t)(2 * k) * sizeof *w);
    const float **xs = malloc((size_t)(2 * k) * sizeof *xs);
    float **ys = malloc((size_t)(2 * k) * sizeof *ys);
    float *buf = malloc((size_t)(k * (2 * n_ff + n_embd)) * sizeof(float));
    enum ats_status st = ord && w && xs && ys && buf ? ATS_OK : ATS_ENOMEM;
    if (st == ATS_OK) {
        for (int64_t j = 0; j < k; j++) { /* experts in increasing id (insertion sort: k is small) */
            int64_t i = j;
            for (; i > 0 && ids[ord[i - 1]] > ids[j]; i--) ord[i] = ord[i - 1];
            ord[i] = j;
        }
        float *g = buf, *u = buf + k * n_ff, *d = buf + 2 * k * n_ff;
        for (int64_t j = 0; j < k; j++) {
            w[2 * j] = ex_tensor_matrix(gate_exps, ids[ord[j]]);
            w[2 * j + 1] = ex_tensor_matrix(up_exps, ids[ord[j]]);
            xs[2 * j] = xs[2 * j + 1] = x;
            ys[2 * j] = g + j * n_ff;
            ys[2 * j + 1] = u + j * n_ff;
        }
        st = ex_cpu_matmul_multi(w, xs, ys, (int)(2 * k));
        if (st == ATS_OK) {
            ex_cpu_swiglu(g, u, k * n_ff, g); /* the k experts' rows are contiguous: one call */
            for (int64_t j = 0; j < k; j++) {
                w[j] = ex_tensor_matrix(down_exps, ids[ord[j]]);
                xs[j] = g + j * n_ff;
                ys[j] = d + j * n_embd;
            }
            st = ex_cpu_matmul_multi(w, xs, ys, (int)k);
        }
        if (st == ATS_OK) {
            memset(out, 0, (size_t)n_embd * sizeof(float));
            for (int64_t j = 0; j < k; j++)
                for (int64_t i = 0; i < n_embd; i++) out[i] += weights[ord[j]] * d[j * n_embd + i];
        }
    }
    free(ord);
    free(w);
    free(xs);
    free(ys);
    free(buf);
    return st;
}

enum ats_status ex_cpu_moe(const ex_tensor *gate_exps, const ex_tensor *up_exps,
                           const ex_tensor *down_exps, const float *x, int64_t n_tokens,
                           const int32_t *ids, const float *weights, int64_t k, float *out)
{
    int64_t n_expert = gate_exps->ne[2], n_embd = gate_exps->ne[0];
    if (up_exps->ne[2] != n_expert || down_exps->ne[2] != n_expert || down_exps->ne[1] != n_embd)
        return ATS_EINVAL;
    for (int64_t i = 0; i < n_tokens * k; i++)
        if (ids[i] < 0 || ids[i] >= n_expert) return ATS_EINVAL;
    if (n_tokens == 1 && k >= 1) return moe_decode(gate_exps, up_exps, down_exps, x, ids, weights, k, out);
    /* Prefill: one expert per thread (a chunk's tokens spread over the experts: ~n_tokens·k/n_expert
     * each, too few for every thread to share one expert's matmuls), largest first; the matmuls
     * inside run on their thread (nested regions are inactive). Each (token, slot) result goes to
     * its own row of y_slot; the sum per token then adds its experts in ascending id, the order of a
     * sequential pass over the experts. */
    const int64_t nk = n_tokens * k;
    int64_t *cnt = calloc((size_t)n_expert + 1, sizeof *cnt), *first = malloc(((size_t)n_expert + 1) * sizeof *first);
    int64_t *slots = malloc((size_t)nk * sizeof *slots), *order = malloc((size_t)n_expert * sizeof *order);
    float *y_slot = malloc((size_t)nk * (size_t)n_embd * sizeof(float));
    if (!cnt || !first || !slots || !order || !y_slot) {
        free(cnt), free(first), free(slots), free(order), free(y_slot);
        return ATS_ENOMEM;
    }
    for (int64_t i = 0; i < nk; i++) cnt[ids[i]]++;
    first[0] = 0;
    for (int64_t e = 0; e < n_expert; e++) first[e + 1] = first[e] + cnt[e];
    for (int64_t e = 0; e < n_expert; e++) cnt[e] = first[e];
    for (int64_t i = 0; i < nk; i++) slots[cnt[ids[i]]++] = i; /* slots of expert e: token order */
    int64_t n_used = 0, max_m = 0;
    for (int64_t e = 0; e < n_expert; e++)
        if (first[e + 1] > first[e]) {
            order[n_used++] = e;
            if (first[e + 1] - first[e] > max_m) max_m = first[e + 1] - first[e];
        }
    for (int64_t a = 1; a < n_used; a++) { /* most tokens first (insertion sort: n_expert is small) */
        int64_t e = order[a], b = a;
        for (; b > 0 && first[order[b - 1] + 1] - first[order[b - 1]] < first[e + 1] - first[e]; b--) order[b] = order[b - 1];
        order[b] = e;
    }
    enum ats_status st = ATS_OK;
#pragma omp parallel
    {
        float *xs = malloc((size_t)(2 * max_m * n_embd) * sizeof(float));
        enum ats_status my = xs ? ATS_OK : ATS_ENOMEM;
#pragma omp for schedule(dynamic, 1)
        for (int64_t o = 0; o < n_used; o++) {
            const int64_t e = order[o], m = first[e + 1] - first[e];
            if (my != ATS_OK) continue;
            float *ys = xs + max_m * n_embd;
            for (int64_t r = 0; r < m; r++)
                memcpy(xs + r * n_embd, x + slots[first[e] + r] / k * n_embd, (size_t)n_embd * sizeof(float));
            ex_tensor g = ex_tensor_matrix(gate_exps, e), u = ex_tensor_matrix(up_exps, e),
                      d = ex_tensor_matrix(down_exps, e);
            my = ex_cpu_ffn(&g, &u, &d, xs, m, ys);
            for (int64_t r = 0; r < m && my == ATS_OK; r++)
                memcpy(y_slot + slots[first[e] + r] * n_embd, ys + r * n_embd, (size_t)n_embd * sizeof(float));
        }
        free(xs);
        if (my != ATS_OK) {
#pragma omp critical(ex_cpu_moe_status)
            st = my;
        }
    }
    if (st == ATS_OK) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < n_tokens; t++) {
            const int32_t *id = ids + t * k;
            float *o = out + t * n_embd;
            memset(o, 0, (size_t)n_embd * sizeof(float));
            int64_t prev = -1; /* the token's slots by ascending (expert id, slot) */
            for (int64_t j = 0; j < k; j++) {
                int64_t best = -1;
                for (int64_t q = 0; q < k; q++) {
                    const int64_t key = (int64_t)id[q] * k + q;
                    if (key > prev && (best < 0 || key < (int64_t)id[best] * k + best)) best = q;
                }
                const float wgt = weights[t * k + best], *y = y_slot + (t * k + best) * n_embd;
                for (int64_t i = 0; i < n_embd; i++) o[i] += wgt * y[i];
                prev = (int64_t)id[best] * k + best;
            }
        }
    }
    free(cnt), free(first), free(slots), free(order), free(y_slot);
    return st;
}

enum ats_status ex_cpu_output(const ex_tensor *w_out, const float *x, int64_t n_tokens, float *logits)
{
    return ex_cpu_matmul(w_out, x, n_tokens, logits);
}

/* ---- sampling ----------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct { float logit; int32_t id; } cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

enum ats_status ex_cpu_sample(const float *logits, int64_t n_vocab, const ex_sample_params *p,
                              uint64_t *rng, int32_t *token)
{
    if (n_vocab <= 0) return ATS_EINVAL;
    if (!(p->temp > 0.0f)) {
        int64_t best = 0;
        for (int64_t i = 1; i < n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        *token = (int32_t)best;
        return ATS_OK;
    }
    cand *c = malloc((size_t)n_vocab * sizeof *c);
    if (!c) return ATS_ENOMEM;
    for (int64_t i = 0; i < n_vocab; i++) c[i] = (cand){logits[i], (int32_t)i};
    qsort(c, (size_t)n_vocab, sizeof *c, cand_cmp);
    int64_t n = n_vocab;
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    double sum = 0;
    double *pr = malloc((size_t)n * sizeof *pr);
    if (!pr) { free(c); return ATS_ENOMEM; }
    for (int64_t i = 0; i < n; i++) {
        pr[i] = exp((double)(c[i].logit - c[0].logit) / p->temp);
        sum += pr[i];
    }
    if (p->top_p < 1.0f) {
        double cum = 0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            cum += pr[i] / sum;
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
        sum = 0;
        for (int64_t i = 0; i < n; i++) sum += pr[i];
    }
    double r = (double)(splitmix64(rng) >> 11) * (1.0 / 9007199254740992.0) * sum, cum = 0;
    int32_t tok = c[n - 1].id;
    for (int64_t i = 0; i < n; i++) {
        cum += pr[i];
        if (r < cum) { tok = c[i].id; break; }
    }
    *token = tok;
    free(pr);
    free(c);
    return ATS_OK;
}
