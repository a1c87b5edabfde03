/* Model loading (GGUF or seeded dummy weights) for llama / qwen3 / qwen3moe. */
#include "ex/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex/gguf.h"
#include "ex/quant.h"
#include "ex/quant_blocks.h"
#include "ex/tokenizer.h"

/* One weight the architecture needs: GGUF name, shape, where it goes. */
typedef struct spec {
    char name[64];
    ats_role role;
    int layer;
    uint32_t n_dims;
    int64_t ne[3];
    char dims[4];   /* where each ne[d] comes from, for messages: dim_source() */
    int is_norm;    /* F32 vector */
    int optional;   /* e.g. output.weight when tied */
    ex_tensor *dst;
} spec;

typedef struct spec_list {
    spec *v;
    int n, cap;
} spec_list;

static int add_spec(spec_list *l, const char *name, ats_role role, int layer, uint32_t nd, int64_t ne0,
                    int64_t ne1, int64_t ne2, const char *dims, int is_norm, ex_tensor *dst)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        spec *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    spec *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->role = role;
    s->layer = layer;
    s->n_dims = nd;
    s->ne[0] = ne0;
    s->ne[1] = ne1;
    s->ne[2] = ne2;
    snprintf(s->dims, sizeof s->dims, "%s", dims);
    s->is_norm = is_norm;
    s->dst = dst;
    return 0;
}

static int family_kind(const char *f)
{
    if (strcmp(f, "llama") == 0) return 0;
    if (strcmp(f, "qwen3") == 0) return 1;
    if (strcmp(f, "qwen3moe") == 0 || strcmp(f, "qwen3_moe") == 0) return 2;
    return -1;
}

/* The weights of model m (arch filled, layers allocated). */
static int build_specs(ex_model *m, spec_list *l)
{
    const ats_arch *a = &m->arch;
    int64_t E = a->n_embd, hd = a->head_dim, q = a->n_head * hd, kv = a->n_head_kv * hd;
    char nm[64];
    int rc = add_spec(l, "token_embd.weight", ATS_ROLE_TOKEN_EMBD, -1, 2, E, a->n_vocab, 1, "EV1", 0, &m->tok_embd);
    rc |= add_spec(l, "output_norm.weight", ATS_ROLE_OUTPUT_NORM, -1, 1, E, 1, 1, "E11", 1, &m->output_norm);
    rc |= add_spec(l, "output.weight", ATS_ROLE_OUTPUT, -1, 2, E, a->n_vocab, 1, "EV1", 0, &m->output);
    if (rc) return -1;
    l->v[l->n - 1].optional = a->tied_embd;
    for (int i = 0; i < a->n_layer; i++) {
        ex_layer *L = &m->layers[i];
        L->moe = ats_arch_layer_is_moe(a, i);
        L->has_shexp = L->moe && a->n_expert_shared > 0;
#define S(role_, nd, n0, n1, n2, dims, norm, dst)                                            \
        do {                                                                                 \
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", i, ats_role_name(role_));            \
            if (add_spec(l, nm, role_, i, nd, n0, n1, n2, dims, norm, dst)) return -1;       \
        } while (0)
        S(ATS_ROLE_ATTN_NORM, 1, E, 1, 1, "E11", 1, &L->attn_norm);
        S(ATS_ROLE_ATTN_Q, 2, E, q, 1, "EQ1", 0, &L->wq);
        S(ATS_ROLE_ATTN_K, 2, E, kv, 1, "EK1", 0, &L->wk);
        S(ATS_ROLE_ATTN_V, 2, E, kv, 1, "EK1", 0, &L->wv);
        S(ATS_ROLE_ATTN_OUTPUT, 2, q, E, 1, "QE1", 0, &L->wo);
        if (a->qk_norm) {
            snprintf(nm, sizeof nm, "blk.%d.attn_q_norm.weight", i);
            if (add_spec(l, nm, ATS_ROLE_ATTN, i, 1, hd, 1, 1, "D11", 1, &L->q_norm)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.attn_k_norm.weight", i);
            if (add_spec(l, nm, ATS_ROLE_ATTN, i, 1, hd, 1, 1, "D11", 1, &L->k_norm)) return -1;
        }
        S(ATS_ROLE_FFN_NORM, 1, E, 1, 1, "E11", 1, &L->ffn_norm);
        if (!L->moe) {
            S(ATS_ROLE_FFN_GATE, 2, E, a->n_ff, 1, "EF1", 0, &L->ffn_gate);
            S(ATS_ROLE_FFN_UP, 2, E, a->n_ff, 1, "EF1", 0, &L->ffn_up);
            S(ATS_ROLE_FFN_DOWN, 2, a->n_ff, E, 1, "FE1", 0, &L->ffn_down);
        } else {
            int64_t X = a->n_expert, F = a->n_ff_exp;
            S(ATS_ROLE_FFN_GATE_INP, 2, E, X, 1, "EX1", 0, &L->gate_inp);
            S(ATS_ROLE_FFN_GATE_EXPS, 3, E, F, X, "EfX", 0, &L->gate_exps);
            S(ATS_ROLE_FFN_UP_EXPS, 3, E, F, X, "EfX", 0, &L->up_exps);
            S(ATS_ROLE_FFN_DOWN_EXPS, 3, F, E, X, "fEX", 0, &L->down_exps);
            if (L->has_shexp) {
                int64_t Fs = a->n_ff_shexp * a->n_expert_shared;
                S(ATS_ROLE_FFN_GATE_SHEXP, 2, E, Fs, 1, "ES1", 0, &L->gate_shexp);
                S(ATS_ROLE_FFN_UP_SHEXP, 2, E, Fs, 1, "ES1", 0, &L->up_shexp);
                S(ATS_ROLE_FFN_DOWN_SHEXP, 2, Fs, E, 1, "SE1", 0, &L->down_shexp);
            }
        }
#undef S
    }
    return 0;
}

void ex_model_free(ex_model *m)
{
    if (!m) return;
    if (m->storage_is_gguf) ex_gguf_free(m->storage);
    else free(m->storage);
    ex_tokenizer_free(m->tok);
    free(m->layers);
    free(m);
}

static uint64_t tensor_bytes(const ex_tensor *t)
{
    return t->data ? t->row_bytes * (uint64_t)(t->ne[1] * t->ne[2]) : 0;
}

uint64_t ex_model_decode_bytes(const ex_model *m)
{
    const ats_arch *a = &m->arch;
    double b = (double)m->tok_embd.row_bytes + (double)tensor_bytes(&m->output_norm) + (double)tensor_bytes(&m->output);
    for (int64_t l = 0; l < a->n_layer; l++) {
        const ex_layer *L = &m->layers[l];
        const ex_tensor *all[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->q_norm, &L->k_norm,
                                  &L->ffn_norm, &L->ffn_gate, &L->ffn_up, &L->ffn_down, &L->gate_inp,
                                  &L->gate_shexp, &L->up_shexp, &L->down_shexp};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) b += (double)tensor_bytes(all[i]);
        if (L->moe) {
            double frac = (double)a->n_expert_used / (double)a->n_expert;
            b += frac * (double)(tensor_bytes(&L->gate_exps) + tensor_bytes(&L->up_exps) + tensor_bytes(&L->down_exps));
        }
    }
    return (uint64_t)b;
}

/* Rows [r0, r1) of t (rows of ne[0] elements over ne[1] x ne[2]) dequantized into buf (ne[0] floats):
 * the first row holding NaN or Inf, or -1; *col receives its first bad element. */
static int64_t first_bad_row(const ex_tensor *t, int64_t r0, int64_t r1, float *buf, int64_t *col)
{
    for (int64_t r = r0; r < r1; r++) {
        if (ex_dequantize_row(t->type, (const uint8_t *)t->data + (uint64_t)r * t->row_bytes, buf, t->ne[0]) != ATS_OK)
            return r;
        for (int64_t i = 0; i < t->ne[0]; i++)
            if (!isfinite(buf[i])) {
                *col = i;
                return r;
            }
    }
    return -1;
}

enum ats_status ex_tensor_check_finite(const char *name, const ex_tensor *t, int n_threads, ats_err *err)
{
    if (!t->data) return ATS_OK;
    const int64_t rows = t->ne[1] * t->ne[2];
    int64_t bad = -1, bad_col = 0;
    int oom = 0;
#pragma omp parallel num_threads(n_threads > 0 ? n_threads : 1)
    {
        float *buf = malloc((size_t)t->ne[0] * sizeof *buf);
        int64_t my_bad = -1, my_col = 0;
        if (!buf) {
#pragma omp atomic write
            oom = 1;
        } else {
#pragma omp for schedule(static)
            for (int64_t c = 0; c < 64; c++) { /* 64 contiguous chunks: the lowest bad row wins */
                if (my_bad >= 0) continue;
                int64_t col = 0, r = first_bad_row(t, rows * c / 64, rows * (c + 1) / 64, buf, &col);
                if (r >= 0) my_bad = r, my_col = col;
            }
        }
        free(buf);
#pragma omp critical
        if (my_bad >= 0 && (bad < 0 || my_bad < bad)) bad = my_bad, bad_col = my_col;
    }
    if (oom) return ats_err_set(err, ATS_ENOMEM, "check tensors: out of memory");
    if (bad < 0) return ATS_OK;
    const int64_t per = t->ne[1];
    if (t->ne[2] > 1)
        return ats_err_set(err, ATS_EINVAL, "tensor '%s' (%s): NaN or Inf in expert %lld, row %lld, element %lld", name,
                           ats_qtype_name(t->type), (long long)(bad / per), (long long)(bad % per), (long long)bad_col);
    return ats_err_set(err, ATS_EINVAL, "tensor '%s' (%s): NaN or Inf in row %lld, element %lld", name,
                       ats_qtype_name(t->type), (long long)bad, (long long)bad_col);
}

enum ats_status ex_model_check_tensors(const ex_model *m, int n_threads, ats_err *err)
{
    spec_list l = {0};
    if (build_specs((ex_model *)m, &l)) {
        free(l.v);
        return ats_err_set(err, ATS_ENOMEM, "check tensors: out of memory");
    }
    enum ats_status st = ATS_OK;
    for (int k = 0; k < l.n && st == ATS_OK; k++) {
        const ex_tensor *t = l.v[k].dst;
        if (k > 0 && m->arch.tied_embd && t == &m->output) continue; /* tok_embd again */
        st = ex_tensor_check_finite(l.v[k].name, t, n_threads, err);
    }
    free(l.v);
    return st;
}

static void finish_tied(ex_model *m)
{
    if (m->arch.tied_embd || !m->output.data) {
        m->output = m->tok_embd;
        m->arch.tied_embd = 1;
    }
}

/* ---- GGUF --------------------------------------------------------------------------------- */

static enum ats_status get_int_key(const ex_gguf *g, const char *arch, const char *suffix, int64_t *out,
                                   int required, int64_t dflt, ats_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    enum ats_status st = ex_gguf_get_int(g, key, out, err);
    if (st == ATS_ENOTFOUND) {
        if (required)
            return ats_err_set(err, ATS_EINVAL, "%s: metadata '%s' missing (needed for architecture %s)",
                               ex_gguf_path(g), key, arch);
        *out = dflt;
        return ATS_OK;
    }
    return st;
}

static enum ats_status get_dbl_key(const ex_gguf *g, const char *arch, const char *suffix, double *out,
                                   double dflt, ats_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    enum ats_status st = ex_gguf_get_double(g, key, out, err);
    if (st == ATS_ENOTFOUND) {
        *out = dflt;
        return ATS_OK;
    }
    return st;
}

/* The head dimension's source, in GGUF keys: attention.key_length, else embedding_length / head_count. */
static void head_dim_source(const ex_gguf *g, const char *arch, char *buf, size_t len)
{
    char key[160];
    int64_t i;
    snprintf(key, sizeof key, "%s.attention.key_length", arch);
    if (ex_gguf_find_kv(g, key, &i) == ATS_OK) snprintf(buf, len, "%s", key);
    else snprintf(buf, len, "%s.embedding_length / %s.attention.head_count", arch, arch);
}

/* Where a spec dimension code (spec.dims) comes from, in GGUF keys. */
static void dim_source(char code, const char *arch, const char *hd, char *buf, size_t len)
{
    switch (code) {
    case 'E': snprintf(buf, len, "%s.embedding_length", arch); break;
    case 'V': snprintf(buf, len, "the rows of token_embd.weight"); break;
    case 'Q': snprintf(buf, len, "%s.attention.head_count x head dim (%s)", arch, hd); break;
    case 'K': snprintf(buf, len, "%s.attention.head_count_kv x head dim (%s)", arch, hd); break;
    case 'D': snprintf(buf, len, "head dim (%s)", hd); break;
    case 'F': snprintf(buf, len, "%s.feed_forward_length", arch); break;
    case 'X': snprintf(buf, len, "%s.expert_count", arch); break;
    case 'f': snprintf(buf, len, "%s.expert_feed_forward_length", arch); break;
    case 'S': snprintf(buf, len, "%s.expert_shared_feed_forward_length x %s.expert_shared_count", arch, arch); break;
    default: snprintf(buf, len, "1"); break;
    }
}

/* ats_arch_validate names each field by its Hugging Face config key (the field of models/NAME.json); a
 * GGUF's user knows the metadata keys. Copies msg to out with each such key replaced by the GGUF
 * key the loader read it from (vocab_size: token_embd.weight's rows; head_dim: hd). */
static void config_to_gguf_keys(const char *msg, const char *arch, const char *hd, char *out, size_t len)
{
    static const struct { const char *config, *gguf; } map[] = {
        {"hidden_size", "embedding_length"}, {"num_hidden_layers", "block_count"},
        {"num_attention_heads", "attention.head_count"}, {"num_key_value_heads", "attention.head_count_kv"},
        {"intermediate_size", "feed_forward_length"}, {"num_experts", "expert_count"},
        {"num_experts_per_tok", "expert_used_count"}, {"moe_intermediate_size", "expert_feed_forward_length"},
        {"shared_experts", "expert_shared_count"},
        {"shared_expert_intermediate_size", "expert_shared_feed_forward_length"},
        {"max_position_embeddings", "context_length"}, {"rope_theta", "rope.freq_base"},
        {"rms_norm_eps", "attention.layer_norm_rms_epsilon"}};
    static const char word[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    size_t o = 0;
    out[0] = '\0';
    for (const char *p = msg; *p && o + 1 < len;) {
        size_t n = strspn(p, word);
        if (n == 0) { out[o++] = *p++; out[o] = '\0'; continue; }
        char rep[256];
        snprintf(rep, sizeof rep, "%.*s", (int)n, p);
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (strlen(map[i].config) == n && strncmp(p, map[i].config, n) == 0)
                snprintf(rep, sizeof rep, "%s.%s", arch, map[i].gguf);
        if (n == 8 && strncmp(p, "head_dim", 8) == 0) snprintf(rep, sizeof rep, "head dim (%s)", hd);
        if (n == 10 && strncmp(p, "vocab_size", 10) == 0) snprintf(rep, sizeof rep, "the rows of token_embd.weight");
        int w = snprintf(out + o, len - o, "%s", rep);
        o = w < 0 || (size_t)w >= len - o ? len - 1 : o + (size_t)w;
        p += n;
    }
}

/* 1 when the file has a tensor "blk.<layer>.*". */
static int layer_in_file(const ex_gguf *g, int layer)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "blk.%d.", layer);
    for (int64_t i = 0; i < ex_gguf_n_tensors(g); i++)
        if (strncmp(ex_gguf_tensor_at(g, i)->name, prefix, (size_t)n) == 0) return 1;
    return 0;
}

/* Refuses tensors "blk.N.*" with N >= n_layer: block_count smaller than the file's layers would
 * otherwise run a truncated model silently. Names the lowest such layer's first tensor in file order. */
static enum ats_status check_layer_tensors(const ex_gguf *g, const char *arch, int64_t n_layer, ats_err *err)
{
    const char *first = NULL;
    long long lo = 0, hi = 0;
    for (int64_t i = 0; i < ex_gguf_n_tensors(g); i++) {
        const char *nm = ex_gguf_tensor_at(g, i)->name;
        if (strncmp(nm, "blk.", 4) != 0 || nm[4] < '0' || nm[4] > '9') continue;
        char *end;
        long long layer = strtoll(nm + 4, &end, 10); /* saturates: a huge N is still outside */
        if (*end != '.' || layer < n_layer) continue;
        if (!first || layer < lo) { first = nm; lo = layer; }
        if (layer > hi) hi = layer;
    }
    if (!first) return ATS_OK;
    return ats_err_set(err, ATS_EINVAL, "%s: tensor '%s' is in layer %lld, outside metadata '%s.block_count' = %lld "
                       "(the file has tensors up to layer %lld; refusing to ignore them)",
                       ex_gguf_path(g), first, lo, arch, (long long)n_layer, hi);
}

#define TRY(x) do { st = (x); if (st != ATS_OK) goto fail; } while (0)

/* ~160 lines kept whole: a straight sequence of checks (architecture, hyper-parameters, tokenizer, every
 * tensor's presence, shape and type) in the order a reader checks a GGUF against the model's spec, with one
 * cleanup label for the half-built model. */
enum ats_status ex_model_load_gguf(const char *path, ex_model **out, ats_err *err)
{
    ex_gguf *g = NULL;
    enum ats_status st = ex_gguf_open(path, &g, err);
    if (st != ATS_OK) return st;
    ex_model *m = calloc(1, sizeof *m);
    spec_list l = {0};
    if (!m) { ex_gguf_free(g); return ATS_ENOMEM; }
    m->storage = g;
    m->storage_is_gguf = 1;
    const char *s;
    size_t sl;
    char arch[ATS_NAME_LEN];
    st = ex_gguf_get_str(g, "general.architecture", &s, &sl, err);
    if (st == ATS_ENOTFOUND) { st = ats_err_set(err, ATS_EINVAL, "%s: metadata 'general.architecture' missing", path); goto fail; }
    if (st != ATS_OK) goto fail;
    snprintf(arch, sizeof arch, "%.*s", (int)(sl < sizeof arch - 1 ? sl : sizeof arch - 1), s);
    int kind = family_kind(arch);
    if (kind < 0) {
        st = ats_err_set(err, ATS_EINVAL, "%s: metadata 'general.architecture' = '%s' (supported: llama, qwen3, qwen3moe)", path, arch);
        goto fail;
    }
    ats_arch *a = &m->arch;
    ats_arch_init(a);
    snprintf(a->family, sizeof a->family, "%s", arch);
    const char *base = strrchr(path, '/');
    snprintf(a->name, sizeof a->name, "%s", base ? base + 1 : path);
    snprintf(a->source, sizeof a->source, "GGUF metadata of %s", path);
    int64_t v;
    TRY(get_int_key(g, arch, "embedding_length", &a->n_embd, 1, 0, err));
    TRY(get_int_key(g, arch, "block_count", &a->n_layer, 1, 0, err));
    TRY(get_int_key(g, arch, "attention.head_count", &a->n_head, 1, 0, err));
    TRY(get_int_key(g, arch, "attention.head_count_kv", &a->n_head_kv, 0, a->n_head, err));
    TRY(get_int_key(g, arch, "feed_forward_length", &a->n_ff, kind != 2, 0, err));
    TRY(get_int_key(g, arch, "context_length", &a->n_ctx_max, 0, 2048, err));
    /* ranges: ats_arch_validate below (the default head dim only needs a positive head count) */
    TRY(get_int_key(g, arch, "attention.key_length", &a->head_dim, 0, a->n_head > 0 ? a->n_embd / a->n_head : 0, err));
    char hd[200];
    head_dim_source(g, arch, hd, sizeof hd);
    TRY(get_int_key(g, arch, "rope.dimension_count", &m->n_rot, 0, a->head_dim, err));
    TRY(get_dbl_key(g, arch, "attention.layer_norm_rms_epsilon", &a->rms_norm_eps, 1e-5, err));
    TRY(get_dbl_key(g, arch, "rope.freq_base", &a->rope_theta, 10000.0, err));
    a->rope_type = kind == 0 ? ATS_ROPE_NORM : ATS_ROPE_NEOX;
    a->qk_norm = kind != 0;
    if (kind == 2) {
        TRY(get_int_key(g, arch, "expert_count", &a->n_expert, 1, 0, err));
        TRY(get_int_key(g, arch, "expert_used_count", &a->n_expert_used, 1, 0, err));
        TRY(get_int_key(g, arch, "expert_feed_forward_length", &a->n_ff_exp, 1, 0, err));
        TRY(get_int_key(g, arch, "expert_shared_feed_forward_length", &a->n_ff_shexp, 0, 0, err));
        TRY(get_int_key(g, arch, "expert_shared_count", &a->n_expert_shared, 0, a->n_ff_shexp > 0, err));
        m->norm_topk = 1;
    }
    const ex_gguf_tensor *te = ex_gguf_find_tensor(g, "token_embd.weight");
    if (!te) { st = ats_err_set(err, ATS_EINVAL, "%s: tensor 'token_embd.weight' missing (architecture %s needs it)", path, arch); goto fail; }
    a->n_vocab = te->ne[1];
    a->tied_embd = ex_gguf_find_tensor(g, "output.weight") == NULL;
    ats_err aerr;
    if (ats_arch_validate(a, &aerr) != ATS_OK) { /* partial_rotary still 1: rope.dimension_count is checked below */
        char msg[sizeof aerr.msg];
        config_to_gguf_keys(aerr.msg, arch, hd, msg, sizeof msg);
        st = ats_err_set(err, ATS_EINVAL, "%s: hyper-parameters from metadata: %s", path, msg);
        goto fail;
    }
    if (a->head_dim < 2) { /* "must be even, 2..1" said nothing */
        st = ats_err_set(err, ATS_EINVAL, "%s: metadata: head dim %lld (%s) is below 2, the least RoPE rotates",
                         path, (long long)a->head_dim, hd);
        goto fail;
    }
    if (m->n_rot <= 0 || m->n_rot > a->head_dim || m->n_rot % 2) {
        st = ats_err_set(err, ATS_EINVAL, "%s: metadata '%s.rope.dimension_count' = %lld (must be even, 2..%lld = head dim (%s))",
                         path, arch, (long long)m->n_rot, (long long)a->head_dim, hd);
        goto fail;
    }
    a->partial_rotary = (double)m->n_rot / (double)a->head_dim;
    TRY(check_layer_tensors(g, arch, a->n_layer, err));
    m->layers = calloc((size_t)a->n_layer, sizeof *m->layers);
    if (!m->layers || build_specs(m, &l)) { st = ATS_ENOMEM; goto fail; }
    for (int i = 0; i < l.n; i++) {
        const spec *sp = &l.v[i];
        const ex_gguf_tensor *t = ex_gguf_find_tensor(g, sp->name);
        if (!t) {
            if (sp->optional) continue;
            if (sp->layer >= 0 && !layer_in_file(g, sp->layer))
                st = ats_err_set(err, ATS_EINVAL, "%s: tensor '%s' missing: the file has no tensor of layer %d but metadata "
                                 "'%s.block_count' = %lld asks for layers 0..%lld", path, sp->name, sp->layer, arch,
                                 (long long)a->n_layer, (long long)a->n_layer - 1);
            else
                st = ats_err_set(err, ATS_EINVAL, "%s: tensor '%s' missing (architecture %s needs it)", path, sp->name, arch);
            goto fail;
        }
        int bad = -1; /* the first dimension that differs */
        for (int d = 3; d >= 0; d--)
            if (t->ne[d] != (d < 3 ? sp->ne[d] : 1)) bad = d;
        if (bad >= 0) {
            char src[400];
            dim_source(bad < 3 ? sp->dims[bad] : '1', arch, hd, src, sizeof src);
            st = ats_err_set(err, ATS_EINVAL, "%s: tensor '%s': shape [%lld, %lld, %lld] but the metadata needs [%lld, %lld, %lld] (ne[%d] = %s)",
                             path, sp->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)sp->ne[0], (long long)sp->ne[1], (long long)sp->ne[2], bad, src);
            goto fail;
        }
        if (sp->is_norm && t->type != ATS_Q_F32) {
            st = ats_err_set(err, ATS_EINVAL, "%s: tensor '%s': type %s, norm weights must be F32", path, sp->name, ats_qtype_name(t->type));
            goto fail;
        }
        if (t->type == ATS_Q_F32 && ((uintptr_t)t->data % 4) != 0) {
            st = ats_err_set(err, ATS_EINVAL, "%s: tensor '%s': F32 data not 4-byte aligned", path, sp->name);
            goto fail;
        }
        ex_tensor *x = sp->dst;
        x->type = t->type;
        x->ne[0] = t->ne[0];
        x->ne[1] = t->ne[1];
        x->ne[2] = t->ne[2];
        ats_qtype_bytes(t->type, t->ne[0], &x->row_bytes);
        x->data = t->data;
        m->weight_bytes += t->bytes;
    }
    finish_tied(m);
    const ex_gguf_tensor *rf = ex_gguf_find_tensor(g, "rope_freqs.weight");
    if (rf) {
        if (rf->type != ATS_Q_F32 || rf->n_dims != 1 || rf->ne[0] != m->n_rot / 2) {
            st = ats_err_set(err, ATS_EINVAL, "%s: tensor 'rope_freqs.weight': type %s, %u dims, ne0 %lld (need F32 [%lld])",
                             path, ats_qtype_name(rf->type), rf->n_dims, (long long)rf->ne[0], (long long)(m->n_rot / 2));
            goto fail;
        }
        m->rope_freqs = (ex_tensor){ATS_Q_F32, {rf->ne[0], 1, 1}, rf->bytes, rf->data}; /* not an op's weight */
    }
    if (ex_gguf_find_kv(g, "tokenizer.ggml.tokens", &v) == ATS_OK) {
        TRY(ex_tokenizer_from_gguf(g, &m->tok, err));
        if (ex_tokenizer_n_vocab(m->tok) != a->n_vocab) {
            st = ats_err_set(err, ATS_EINVAL, "%s: metadata 'tokenizer.ggml.tokens' has %lld tokens but token_embd.weight has %lld rows",
                             path, (long long)ex_tokenizer_n_vocab(m->tok), (long long)a->n_vocab);
            goto fail;
        }
    }
    /* BOS and EOS are used (generation from BOS, stop at EOS): an id outside the vocabulary is a damaged
       file, said as such (it read as "the vocabulary has no BOS token"); absent keys mean none */
    m->bos_id = m->eos_id = -1;
    static const char *const special[2] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
    for (int k = 0; k < 2; k++) {
        if (ex_gguf_find_kv(g, special[k], &v) != ATS_OK) continue;
        int64_t id = -1;
        if (ex_gguf_get_int(g, special[k], &id, NULL) != ATS_OK) {
            st = ats_err_set(err, ATS_EINVAL, "%s: metadata '%s' is not an integer", path, special[k]);
            goto fail;
        }
        if (id < 0 || id >= a->n_vocab) {
            st = ats_err_set(err, ATS_EINVAL, "%s: metadata '%s' = %lld is outside the vocabulary (0..%lld)", path,
                             special[k], (long long)id, (long long)a->n_vocab - 1);
            goto fail;
        }
        *(k == 0 ? &m->bos_id : &m->eos_id) = (int32_t)id;
    }
    free(l.v);
    *out = m;
    return ATS_OK;
fail:
    free(l.v);
    ex_model_free(m);
    return st;
}

const ex_tensor *ex_model_role_tensor(const ex_model *m, ats_role role, int32_t layer)
{
    if (layer >= m->arch.n_layer) return NULL;
    const ex_layer *L = layer >= 0 ? &m->layers[layer] : NULL;
    if (!L && role != ATS_ROLE_TOKEN_EMBD && role != ATS_ROLE_OUTPUT_NORM && role != ATS_ROLE_OUTPUT) return NULL;
    switch (role) {
    case ATS_ROLE_TOKEN_EMBD: return &m->tok_embd;
    case ATS_ROLE_OUTPUT_NORM: return &m->output_norm;
    case ATS_ROLE_OUTPUT: return &m->output;
    case ATS_ROLE_ATTN_NORM: return &L->attn_norm;
    case ATS_ROLE_ATTN_Q: return &L->wq;
    case ATS_ROLE_ATTN_K: return &L->wk;
    case ATS_ROLE_ATTN_V: return &L->wv;
    case ATS_ROLE_ATTN_OUTPUT: return &L->wo;
    case ATS_ROLE_FFN_NORM: return &L->ffn_norm;
    case ATS_ROLE_FFN_GATE: return &L->ffn_gate;
    case ATS_ROLE_FFN_UP: return &L->ffn_up;
    case ATS_ROLE_FFN_DOWN: return &L->ffn_down;
    case ATS_ROLE_FFN_GATE_INP: return &L->gate_inp;
    case ATS_ROLE_FFN_GATE_EXPS: return &L->gate_exps;
    case ATS_ROLE_FFN_UP_EXPS: return &L->up_exps;
    case ATS_ROLE_FFN_DOWN_EXPS: return &L->down_exps;
    case ATS_ROLE_FFN_GATE_SHEXP: return &L->gate_shexp;
    case ATS_ROLE_FFN_UP_SHEXP: return &L->up_shexp;
    case ATS_ROLE_FFN_DOWN_SHEXP: return &L->down_shexp;
    default: return NULL;
    }
}

enum ats_status ex_model_tensor_types(const ex_model *m, ats_qtype **out)
{
    const size_t n = ats_tensor_types_len(m->arch.n_layer);
    ats_qtype *t = malloc(n * sizeof *t);
    if (!t) return ATS_ENOMEM;
    for (int32_t l = -1; l < (int32_t)m->arch.n_layer; l++)
        for (int r = 0; r < ATS_ROLE_COUNT; r++) {
            const ex_tensor *x = ex_model_role_tensor(m, (ats_role)r, l);
            t[ats_tensor_type_index((ats_role)r, l)] = x && x->data ? x->type : ATS_Q_F32;
        }
    *out = t;
    return ATS_OK;
}

/* ---- dummy weights ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fills rows [0, n_rows) of a tensor with seeded random blocks whose scales give weights of
 * magnitude ~ 1/sqrt(n_in). Each row has its own stream, so the fill is parallel and deterministic. */
static void fill_random(ex_tensor *t, uint64_t seed, int is_norm, uint8_t *dst)
{
    int64_t rows = t->ne[1] * t->ne[2], n = t->ne[0];
    float sd = 1.0f / sqrtf((float)n);
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t r = 0; r < rows; r++) {
        uint64_t s = mix64(seed ^ mix64((uint64_t)r + 1));
        uint8_t *p = dst + (size_t)r * t->row_bytes;
        /* random bytes first */
        for (uint64_t b = 0; b < t->row_bytes; b += 8) {
            s += 0x9E3779B97F4A7C15ull;
            uint64_t z = mix64(s);
            size_t k = t->row_bytes - b < 8 ? (size_t)(t->row_bytes - b) : 8;
            memcpy(p + b, &z, k);
        }
        switch (t->type) {
        case ATS_Q_F32: {
            float *f = (float *)p;
            for (int64_t i = 0; i < n; i++) {
                s += 0x9E3779B97F4A7C15ull;
                float u = (float)(mix64(s) >> 40) / 16777216.0f * 2.0f - 1.0f;
                f[i] = is_norm ? 1.0f + 0.1f * u : sd * 1.7f * u;
            }
            break;
        }
        case ATS_Q_F16: case ATS_Q_BF16:
            for (int64_t i = 0; i < n; i++) {
                s += 0x9E3779B97F4A7C15ull;
                float u = ((float)(mix64(s) >> 40) / 16777216.0f * 2.0f - 1.0f) * sd * 1.7f;
                uint16_t h = t->type == ATS_Q_F16 ? ex_f32_to_fp16(u) : ex_f32_to_bf16(u);
                memcpy(p + 2 * i, &h, 2);
            }
            break;
        case ATS_Q_Q4_0: {
            ex_fp16 d = ex_f32_to_fp16(sd / 4.6f);
            for (int64_t i = 0; i < n / 32; i++) memcpy(p + 18 * i, &d, 2);
            break;
        }
        case ATS_Q_Q8_0: {
            ex_fp16 d = ex_f32_to_fp16(sd / 74.0f);
            for (int64_t i = 0; i < n / 32; i++) memcpy(p + 34 * i, &d, 2);
            break;
        }
        case ATS_Q_Q4_K: {
            ex_block_q4_K *b = (ex_block_q4_K *)p;
            for (int64_t i = 0; i < n / 256; i++) {
                b[i].d = ex_f32_to_fp16(sd / (4.6f * 32.0f));
                b[i].dmin = ex_f32_to_fp16(sd * 7.5f / (4.6f * 32.0f));
            }
            break;
        }
        case ATS_Q_Q6_K: {
            ex_block_q6_K *b = (ex_block_q6_K *)p;
            for (int64_t i = 0; i < n / 256; i++) b[i].d = ex_f32_to_fp16(sd / (18.5f * 74.0f));
            break;
        }
        case ATS_Q_MXFP4: {
            for (int64_t i = 0; i < n / 32; i++) p[17 * i] = (uint8_t)(127 - 2 - (int)ceilf(log2f(1.0f / sd)));
            break;
        }
        }
    }
}

/* The model of ex_model_new_dummy without its storage: hyper-parameters, layers, and in *l every weight's
 * spec with its type, shape and row bytes set in its ex_tensor (data NULL); *total the bytes of them all,
 * each rounded up to 64. The spec index i seeds tensor i's fill (fill_random), so the in-memory model
 * and the GGUF of ex_model_write_dummy_gguf hold the same bytes. */
static enum ats_status dummy_layout(const ats_arch *arch, ats_recipe recipe, ex_model **out, spec_list *l,
                                    uint64_t *total, ats_err *err)
{
    int kind = family_kind(arch->family);
    if (kind < 0)
        return ats_err_set(err, ATS_EINVAL, "model '%s': model_type '%s' not supported by the executor (llama, qwen3, qwen3_moe)",
                           arch->name, arch->family);
    enum ats_status st = ats_arch_validate(arch, err);
    if (st != ATS_OK) return st;
    ex_model *m = calloc(1, sizeof *m);
    if (!m) return ATS_ENOMEM;
    m->arch = *arch;
    m->n_rot = (int64_t)lround(arch->head_dim * arch->partial_rotary);
    if (m->n_rot % 2) m->n_rot--;
    m->norm_topk = kind == 2;
    m->bos_id = m->eos_id = -1;
    m->layers = calloc((size_t)arch->n_layer, sizeof *m->layers);
    if (!m->layers || build_specs(m, l)) { st = ATS_ENOMEM; goto fail; }
    *total = 0;
    for (int i = 0; i < l->n; i++) {
        spec *sp = &l->v[i];
        if (sp->optional) continue; /* tied output */
        ex_tensor *t = sp->dst;
        ats_qtype ty = sp->is_norm ? ATS_Q_F32 : ats_recipe_type(recipe, sp->role, sp->layer, (int)arch->n_layer);
        ty = ats_qtype_fallback(ty, sp->ne[0]);
        t->type = ty;
        t->ne[0] = sp->ne[0];
        t->ne[1] = sp->ne[1];
        t->ne[2] = sp->ne[2];
        if (ats_qtype_bytes(ty, sp->ne[0], &t->row_bytes) != ATS_OK) {
            st = ats_err_set(err, ATS_EINVAL, "tensor '%s': %lld columns do not divide into %s blocks", sp->name,
                             (long long)sp->ne[0], ats_qtype_name(ty));
            goto fail;
        }
        *total += (t->row_bytes * (uint64_t)(sp->ne[1] * sp->ne[2]) + 63) / 64 * 64;
    }
    *out = m;
    return ATS_OK;
fail:
    free(l->v);
    l->v = NULL;
    ex_model_free(m);
    return st;
}

static uint64_t dummy_tensor_seed(uint64_t seed, int i) { return mix64(seed * 1000003ull + (uint64_t)i); }

enum ats_status ex_model_new_dummy(const ats_arch *arch, ats_recipe recipe, uint64_t seed,
                                   ex_model **out, ats_err *err)
{
    return ex_model_new_dummy_progress(arch, recipe, seed, NULL, NULL, out, err);
}

enum ats_status ex_model_new_dummy_progress(const ats_arch *arch, ats_recipe recipe, uint64_t seed,
                                            ex_progress_fn progress, void *progress_ctx, ex_model **out, ats_err *err)
{
    ex_model *m = NULL;
    spec_list l = {0};
    uint64_t total = 0;
    enum ats_status st = dummy_layout(arch, recipe, &m, &l, &total, err);
    if (st != ATS_OK) return st;
    uint8_t *buf = aligned_alloc(64, (size_t)total ? (size_t)total : 64);
    if (!buf) {
        st = ats_err_set(err, ATS_ENOMEM, "dummy weights of '%s': %.2f GiB do not fit in memory", arch->name,
                         (double)total / 1073741824.0);
        goto fail;
    }
    m->storage = buf;
    m->weight_bytes = 0;
    uint64_t off = 0;
    for (int i = 0; i < l.n; i++) {
        spec *sp = &l.v[i];
        if (sp->optional) continue;
        ex_tensor *t = sp->dst;
        uint64_t bytes = t->row_bytes * (uint64_t)(sp->ne[1] * sp->ne[2]);
        fill_random(t, dummy_tensor_seed(seed, i), sp->is_norm, buf + off);
        t->data = buf + off;
        m->weight_bytes += bytes;
        off += (bytes + 63) / 64 * 64;
        if (progress) progress(progress_ctx, off, total);
    }
    finish_tied(m);
    free(l.v);
    *out = m;
    return ATS_OK;
fail:
    free(l.v);
    ex_model_free(m);
    return st;
}

/* ---- dummy weights as a GGUF file ---------------------------------------------------------- */

/* GGUF metadata entries, encoded one after another in one growing buffer (spec: key as a u64-length
 * string, u32 value type, value; arrays: u32 element type, u64 count, elements). */
typedef struct kvbuf {
    uint8_t *p;
    size_t len, cap;
    size_t off[48]; /* start of each entry */
    int n;
    int oom;
} kvbuf;

static void kv_put(kvbuf *b, const void *src, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void kv_str_raw(kvbuf *b, const char *s, size_t n)
{
    uint64_t len = n;
    kv_put(b, &len, 8);
    kv_put(b, s, n);
}

static void kv_key(kvbuf *b, const char *arch, const char *key, uint32_t type)
{
    char full[160];
    if (arch) snprintf(full, sizeof full, "%s.%s", arch, key);
    else snprintf(full, sizeof full, "%s", key);
    if (b->n == (int)(sizeof b->off / sizeof b->off[0])) { b->oom = 1; return; }
    b->off[b->n++] = b->len;
    kv_str_raw(b, full, strlen(full));
    kv_put(b, &type, 4);
}

static void kv_u32(kvbuf *b, const char *arch, const char *key, uint32_t v)
{
    kv_key(b, arch, key, EX_GGUF_U32);
    kv_put(b, &v, 4);
}

static void kv_f32(kvbuf *b, const char *arch, const char *key, float v)
{
    kv_key(b, arch, key, EX_GGUF_F32);
    kv_put(b, &v, 4);
}

static void kv_bool(kvbuf *b, const char *key, int v)
{
    uint8_t x = v != 0;
    kv_key(b, NULL, key, EX_GGUF_BOOL);
    kv_put(b, &x, 1);
}

static void kv_str(kvbuf *b, const char *arch, const char *key, const char *v)
{
    kv_key(b, arch, key, EX_GGUF_STRING);
    kv_str_raw(b, v, strlen(v));
}

static void kv_arr_head(kvbuf *b, const char *key, uint32_t elem, uint64_t count)
{
    kv_key(b, NULL, key, EX_GGUF_ARRAY);
    kv_put(b, &elem, 4);
    kv_put(b, &count, 8);
}

/* UTF-8 of code point cp (< 0x800 here: GPT-2's byte alphabet) into o; its length */
static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 63));
    return 2;
}

/* Token `id` (< n_vocab - 1) of the synthetic byte-level vocabulary, as GPT-2's printable byte alphabet
 * spells it, into s (returns its length): ids 0..255 are the 256 bytes; then every pair of bytes
 * (65536 tokens of two characters, pair p = bytes p/256, p%256), then pairs followed by a byte (three
 * characters). With `merge` it writes the merge that makes the token instead ("A B": the pair's two
 * bytes, or the pair and the third byte); ids below 256 have none (returns 0). The end-of-text token
 * is the last id (vocab_special). */
static size_t vocab_token(const uint16_t b2u[256], int64_t id, int merge, char *s)
{
    size_t n = 0;
    if (id < 256) {
        if (merge) return 0;
        return utf8_put(s, b2u[id]);
    }
    id -= 256;
    if (id < 65536) {
        n += utf8_put(s + n, b2u[id / 256]);
        if (merge) s[n++] = ' ';
        n += utf8_put(s + n, b2u[id % 256]);
        return n;
    }
    id -= 65536;
    int64_t pair = id / 256;
    n += utf8_put(s + n, b2u[pair / 256]);
    n += utf8_put(s + n, b2u[pair % 256]);
    if (merge) s[n++] = ' ';
    n += utf8_put(s + n, b2u[id % 256]);
    return n;
}

static const char vocab_special[] = "<|endoftext|>";
#define VOCAB_MAX (256 + 65536 + 65536 * 256 + 1) /* tokens of up to three bytes and the special one */

/* llama.cpp's LLAMA_FTYPE of a recipe (general.file_type; llama.h) */
static uint32_t recipe_file_type(ats_recipe r)
{
    switch (r) {
    case ATS_RECIPE_F32: return 0;    /* ALL_F32 */
    case ATS_RECIPE_F16: return 1;    /* MOSTLY_F16 */
    case ATS_RECIPE_BF16: return 32;  /* MOSTLY_BF16 */
    case ATS_RECIPE_Q8_0: return 7;   /* MOSTLY_Q8_0 */
    case ATS_RECIPE_Q4_0: return 2;   /* MOSTLY_Q4_0 */
    case ATS_RECIPE_Q4_K_M: return 15; /* MOSTLY_Q4_K_M */
    case ATS_RECIPE_MXFP4: return 38; /* MOSTLY_MXFP4_MOE */
    default: return 0;
    }
}

/* The metadata of the dummy GGUF: architecture keys as the loaders read them (ex_model_load_gguf;
 * llama.cpp's load_hparams), and a byte-level BPE ("gpt2") vocabulary of n_vocab tokens. */
static void dummy_kv(kvbuf *b, const ex_model *m, ats_recipe recipe, const char *gguf_arch)
{
    const ats_arch *a = &m->arch;
    const char *A = gguf_arch;
    kv_str(b, NULL, "general.architecture", A);
    kv_str(b, NULL, "general.name", a->name);
    kv_u32(b, NULL, "general.file_type", recipe_file_type(recipe));
    kv_u32(b, NULL, "general.quantization_version", 2);
    kv_u32(b, NULL, "general.alignment", 32);
    kv_u32(b, A, "block_count", (uint32_t)a->n_layer);
    kv_u32(b, A, "context_length", (uint32_t)a->n_ctx_max);
    kv_u32(b, A, "embedding_length", (uint32_t)a->n_embd);
    if (a->n_ff > 0) kv_u32(b, A, "feed_forward_length", (uint32_t)a->n_ff);
    kv_u32(b, A, "attention.head_count", (uint32_t)a->n_head);
    kv_u32(b, A, "attention.head_count_kv", (uint32_t)a->n_head_kv);
    kv_u32(b, A, "attention.key_length", (uint32_t)a->head_dim);
    kv_u32(b, A, "attention.value_length", (uint32_t)a->head_dim);
    kv_u32(b, A, "rope.dimension_count", (uint32_t)m->n_rot);
    kv_f32(b, A, "rope.freq_base", (float)a->rope_theta);
    kv_f32(b, A, "attention.layer_norm_rms_epsilon", (float)a->rms_norm_eps);
    if (a->n_expert > 0) {
        kv_u32(b, A, "expert_count", (uint32_t)a->n_expert);
        kv_u32(b, A, "expert_used_count", (uint32_t)a->n_expert_used);
        kv_u32(b, A, "expert_feed_forward_length", (uint32_t)a->n_ff_exp);
        if (a->n_expert_shared > 0) {
            kv_u32(b, A, "expert_shared_count", (uint32_t)a->n_expert_shared);
            kv_u32(b, A, "expert_shared_feed_forward_length", (uint32_t)a->n_ff_shexp);
        }
    }
    uint16_t b2u[256]; /* GPT-2's byte alphabet: printable bytes map to themselves, the other 68 to 256.. */
    int next = 256;
    for (int c = 0; c < 256; c++) {
        int printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
        b2u[c] = (uint16_t)(printable ? c : next++);
    }
    const int64_t V = a->n_vocab, eot = V - 1;
    char s[16];
    kv_str(b, NULL, "tokenizer.ggml.model", "gpt2");
    kv_str(b, NULL, "tokenizer.ggml.pre", "default");
    kv_arr_head(b, "tokenizer.ggml.tokens", EX_GGUF_STRING, (uint64_t)V);
    for (int64_t i = 0; i < V; i++) {
        if (i == eot) kv_str_raw(b, vocab_special, strlen(vocab_special));
        else kv_str_raw(b, s, vocab_token(b2u, i, 0, s));
    }
    kv_arr_head(b, "tokenizer.ggml.scores", EX_GGUF_F32, (uint64_t)V);
    for (int64_t i = 0; i < V; i++) {
        float sc = i < 256 || i == eot ? 0.0f : -(float)(i - 255); /* merge rank order */
        kv_put(b, &sc, 4);
    }
    kv_arr_head(b, "tokenizer.ggml.token_type", EX_GGUF_I32, (uint64_t)V);
    for (int64_t i = 0; i < V; i++) {
        int32_t ty = i == eot ? 3 : 1; /* control : normal */
        kv_put(b, &ty, 4);
    }
    int64_t n_merges = V - 1 - 256;
    kv_arr_head(b, "tokenizer.ggml.merges", EX_GGUF_STRING, (uint64_t)n_merges);
    for (int64_t i = 256; i < eot; i++) kv_str_raw(b, s, vocab_token(b2u, i, 1, s));
    kv_u32(b, NULL, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
    kv_u32(b, NULL, "tokenizer.ggml.eos_token_id", (uint32_t)eot);
    kv_bool(b, "tokenizer.ggml.add_bos_token", 0);
}

typedef struct dummy_writer {
    const spec_list *l;
    const int *spec_of; /* out-tensor index -> spec index */
    uint64_t seed, done, total;
    ex_progress_fn progress;
    void *progress_ctx;
} dummy_writer;

static enum ats_status dummy_fill(void *ctx, int64_t i, void *dst, uint64_t bytes, ats_err *err)
{
    (void)err;
    dummy_writer *w = ctx;
    int k = w->spec_of[i];
    const spec *sp = &w->l->v[k];
    fill_random(sp->dst, dummy_tensor_seed(w->seed, k), sp->is_norm, dst);
    w->done += bytes;
    if (w->progress) w->progress(w->progress_ctx, w->done, w->total);
    return ATS_OK;
}

enum ats_status ex_model_write_dummy_gguf(const ats_arch *arch, ats_recipe recipe, uint64_t seed, const char *path,
                                          ex_progress_fn progress, void *progress_ctx, ats_err *err)
{
    ex_model *m = NULL;
    spec_list l = {0};
    uint64_t total = 0;
    enum ats_status st = dummy_layout(arch, recipe, &m, &l, &total, err);
    if (st != ATS_OK) return st;
    kvbuf kb = {0};
    ex_gguf_out_tensor *ot = calloc((size_t)l.n, sizeof *ot);
    int *spec_of = calloc((size_t)l.n, sizeof *spec_of);
    const void *kv_raw[48];
    size_t kv_len[48];
    const char *gguf_arch = family_kind(arch->family) == 2 ? "qwen3moe" : arch->family;
    if (!ot || !spec_of) { st = ATS_ENOMEM; goto done; }
    if (arch->n_vocab < 257 || arch->n_vocab > VOCAB_MAX) {
        st = ats_err_set(err, ATS_EINVAL, "model '%s': vocab_size %lld: a byte-level vocabulary needs 257..%lld tokens "
                         "(256 bytes and the end-of-text token)", arch->name, (long long)arch->n_vocab, (long long)VOCAB_MAX);
        goto done;
    }
    if (arch->n_layer_dense_first > 0 || arch->attn_bias || arch->sandwich_norm || arch->expert_bias ||
        arch->attn_sinks || arch->sliding_window > 0) { /* GGUF keys that neither loader here reads */
        st = ats_err_set(err, ATS_EINVAL, "model '%s': leading dense layers, biases, sandwich norms, sinks or sliding "
                         "windows have no GGUF form here", arch->name);
        goto done;
    }
    dummy_kv(&kb, m, recipe, gguf_arch);
    if (kb.oom) { st = ats_err_set(err, ATS_ENOMEM, "%s: no memory for the metadata", path); goto done; }
    for (int k = 0; k < kb.n; k++) {
        kv_raw[k] = kb.p + kb.off[k];
        kv_len[k] = (k + 1 < kb.n ? kb.off[k + 1] : kb.len) - kb.off[k];
    }
    int64_t nt = 0;
    uint64_t data_bytes = 0;
    for (int i = 0; i < l.n; i++) {
        const spec *sp = &l.v[i];
        if (sp->optional) continue; /* tied output: no output.weight, as the loaders expect */
        const ex_tensor *t = sp->dst;
        ex_gguf_out_tensor *o = &ot[nt];
        o->name = sp->name;
        o->n_dims = sp->n_dims;
        o->ne[0] = t->ne[0];
        o->ne[1] = sp->n_dims > 1 ? t->ne[1] : 1;
        o->ne[2] = sp->n_dims > 2 ? t->ne[2] : 1;
        o->ne[3] = 1;
        o->type = t->type;
        o->bytes = t->row_bytes * (uint64_t)(t->ne[1] * t->ne[2]);
        data_bytes += o->bytes;
        spec_of[nt++] = i;
    }
    dummy_writer w = {&l, spec_of, seed, 0, data_bytes, progress, progress_ctx};
    st = ex_gguf_write_fill(path, kb.n, kv_raw, kv_len, nt, ot, 32, dummy_fill, &w, err);
    (void)total;
done:
    free(kb.p);
    free(ot);
    free(spec_of);
    free(l.v);
    ex_model_free(m);
    return st;
}
