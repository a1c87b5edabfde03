/* Quantization type sizes and recipes. Sizes: ../shared/models/QUANT_FORMATS.md (ggml-common.h). */
#include "ats/quant.h"

#include <ctype.h>
#include <string.h>

static int ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

typedef struct { ats_qtype t; const char *name; int elems, bytes; } qinfo;
static const qinfo QTYPES[] = {
    {ATS_Q_F32, "F32", 1, 4},     {ATS_Q_F16, "F16", 1, 2},    {ATS_Q_BF16, "BF16", 1, 2},
    {ATS_Q_Q8_0, "Q8_0", 32, 34}, {ATS_Q_Q4_0, "Q4_0", 32, 18}, {ATS_Q_Q4_K, "Q4_K", 256, 144},
    {ATS_Q_Q6_K, "Q6_K", 256, 210}, {ATS_Q_MXFP4, "MXFP4", 32, 17},
};
#define N_QTYPES (int)(sizeof QTYPES / sizeof QTYPES[0])

static const qinfo *find(int id)
{
    for (int i = 0; i < N_QTYPES; i++)
        if ((int)QTYPES[i].t == id) return &QTYPES[i];
    return NULL;
}

int ats_qtype_valid(int id) { return find(id) != NULL; }
int ats_qtype_block_elems(ats_qtype t) { const qinfo *q = find((int)t); return q ? q->elems : 0; }
int ats_qtype_block_bytes(ats_qtype t) { const qinfo *q = find((int)t); return q ? q->bytes : 0; }
const char *ats_qtype_name(ats_qtype t) { const qinfo *q = find((int)t); return q ? q->name : "?"; }

enum ats_status ats_qtype_from_name(const char *name, ats_qtype *out)
{
    if (!name) return ATS_EINVAL;
    for (int i = 0; i < N_QTYPES; i++)
        if (ieq(name, QTYPES[i].name)) { *out = QTYPES[i].t; return ATS_OK; }
    return ATS_ENOTFOUND;
}

enum ats_status ats_qtype_bytes(ats_qtype t, int64_t n, uint64_t *out_bytes)
{
    const qinfo *q = find((int)t);
    if (!q) return ATS_EINVAL;
    if (n < 0 || n % q->elems != 0) return ATS_ERANGE;
    *out_bytes = (uint64_t)(n / q->elems) * (uint64_t)q->bytes;
    return ATS_OK;
}

static const char *const ROLE_NAMES[ATS_ROLE_COUNT] = {
    [ATS_ROLE_TOKEN_EMBD] = "token_embd",       [ATS_ROLE_ATTN_NORM] = "attn_norm",
    [ATS_ROLE_ATTN_Q] = "attn_q",               [ATS_ROLE_ATTN_K] = "attn_k",
    [ATS_ROLE_ATTN_V] = "attn_v",               [ATS_ROLE_ATTN_OUTPUT] = "attn_output",
    [ATS_ROLE_ATTN_POST_NORM] = "post_attention_norm", [ATS_ROLE_ATTN] = "attn",
    [ATS_ROLE_FFN_NORM] = "ffn_norm",           [ATS_ROLE_FFN_GATE] = "ffn_gate",
    [ATS_ROLE_FFN_UP] = "ffn_up",               [ATS_ROLE_FFN_DOWN] = "ffn_down",
    [ATS_ROLE_FFN_POST_NORM] = "post_ffw_norm", [ATS_ROLE_FFN_GATE_INP] = "ffn_gate_inp",
    [ATS_ROLE_FFN_GATE_EXPS] = "ffn_gate_exps", [ATS_ROLE_FFN_UP_EXPS] = "ffn_up_exps",
    [ATS_ROLE_FFN_DOWN_EXPS] = "ffn_down_exps", [ATS_ROLE_FFN_GATE_SHEXP] = "ffn_gate_shexp",
    [ATS_ROLE_FFN_UP_SHEXP] = "ffn_up_shexp",   [ATS_ROLE_FFN_DOWN_SHEXP] = "ffn_down_shexp",
    [ATS_ROLE_OUTPUT_NORM] = "output_norm",     [ATS_ROLE_OUTPUT] = "output",
};

const char *ats_role_name(ats_role r)
{
    return ((int)r >= 0 && r < ATS_ROLE_COUNT) ? ROLE_NAMES[r] : "?";
}

enum ats_status ats_role_from_name(const char *name, ats_role *out)
{
    if (!name) return ATS_EINVAL;
    for (int r = 0; r < ATS_ROLE_COUNT; r++)
        if (ieq(name, ROLE_NAMES[r])) { *out = (ats_role)r; return ATS_OK; }
    return ATS_ENOTFOUND;
}

static const char *const RECIPE_NAMES[ATS_RECIPE_COUNT] = {
    [ATS_RECIPE_F32] = "f32",   [ATS_RECIPE_F16] = "f16",   [ATS_RECIPE_BF16] = "bf16",
    [ATS_RECIPE_Q8_0] = "q8_0", [ATS_RECIPE_Q4_0] = "q4_0", [ATS_RECIPE_Q4_K_M] = "q4_k_m",
    [ATS_RECIPE_MXFP4] = "mxfp4",
};

const char *ats_recipe_name(ats_recipe r)
{
    return ((int)r >= 0 && r < ATS_RECIPE_COUNT) ? RECIPE_NAMES[r] : "?";
}

enum ats_status ats_recipe_from_name(const char *name, ats_recipe *out)
{
    if (!name) return ATS_EINVAL;
    for (int r = 0; r < ATS_RECIPE_COUNT; r++)
        if (ieq(name, RECIPE_NAMES[r])) { *out = (ats_recipe)r; return ATS_OK; }
    return ATS_ENOTFOUND;
}

static int is_norm(ats_role r)
{
    return r == ATS_ROLE_ATTN_NORM || r == ATS_ROLE_FFN_NORM || r == ATS_ROLE_OUTPUT_NORM ||
           r == ATS_ROLE_ATTN_POST_NORM || r == ATS_ROLE_FFN_POST_NORM;
}

/* llama.cpp src/llama-quant.cpp: use_more_bits(i_layer, n_layers) */
static int use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

ats_qtype ats_recipe_type(ats_recipe r, ats_role role, int layer, int n_layer)
{
    if (is_norm(role)) return ATS_Q_F32;
    if (role == ATS_ROLE_ATTN) return ATS_Q_F16; /* the KV cache */
    /* llama.cpp never quantizes the MoE router (llama-quant.cpp skips ffn_gate_inp.weight) */
    if (role == ATS_ROLE_FFN_GATE_INP && r != ATS_RECIPE_F16 && r != ATS_RECIPE_BF16) return ATS_Q_F32;
    switch (r) {
    case ATS_RECIPE_F32: return ATS_Q_F32;
    case ATS_RECIPE_F16: return ATS_Q_F16;
    case ATS_RECIPE_BF16: return ATS_Q_BF16;
    case ATS_RECIPE_Q8_0: return ATS_Q_Q8_0;
    case ATS_RECIPE_Q4_0: return role == ATS_ROLE_OUTPUT ? ATS_Q_Q6_K : ATS_Q_Q4_0;
    case ATS_RECIPE_MXFP4:
        return (role == ATS_ROLE_FFN_GATE_EXPS || role == ATS_ROLE_FFN_UP_EXPS ||
                role == ATS_ROLE_FFN_DOWN_EXPS) ? ATS_Q_MXFP4 : ATS_Q_BF16;
    case ATS_RECIPE_Q4_K_M:
        if (role == ATS_ROLE_OUTPUT) return ATS_Q_Q6_K;
        if ((role == ATS_ROLE_ATTN_V || role == ATS_ROLE_FFN_DOWN || role == ATS_ROLE_FFN_DOWN_EXPS ||
             role == ATS_ROLE_FFN_DOWN_SHEXP) && use_more_bits(layer, n_layer))
            return ATS_Q_Q6_K;
        return ATS_Q_Q4_K;
    case ATS_RECIPE_COUNT: break;
    }
    return ATS_Q_F32;
}

ats_qtype ats_qtype_fallback(ats_qtype t, int64_t n_cols)
{
    int be = ats_qtype_block_elems(t);
    if (be > 0 && n_cols % be == 0) return t;
    ats_qtype f = (t == ATS_Q_Q6_K) ? ATS_Q_Q8_0 : (t == ATS_Q_F32 ? ATS_Q_F32 : ATS_Q_Q4_0);
    if (t == ATS_Q_MXFP4) f = ATS_Q_Q8_0;
    if (n_cols % 32 == 0) return f;
    return ATS_Q_F16;
}
