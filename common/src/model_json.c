/* Model architecture JSON loader (jansson). Keys: models/README.md. */
#include "atsc/model_json.h"
#include "atsc/outfile.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { K_INT, K_BOOL, K_NUM, K_STR } kkind;

typedef struct {
    const char *key;
    kkind kind;
    int required; /* 1 = always, 0 = optional */
    size_t off;   /* offset in ats_arch */
    size_t len;   /* for strings */
} keydef;

#define OFF(f) offsetof(ats_arch, f)
static const keydef KEYS[] = {
    {"model_type", K_STR, 1, OFF(family), ATS_NAME_LEN},
    {"source", K_STR, 1, OFF(source), ATS_SOURCE_LEN},
    {"hidden_size", K_INT, 1, OFF(n_embd), 0},
    {"intermediate_size", K_INT, 0, OFF(n_ff), 0},
    {"num_hidden_layers", K_INT, 1, OFF(n_layer), 0},
    {"num_attention_heads", K_INT, 1, OFF(n_head), 0},
    {"num_key_value_heads", K_INT, 1, OFF(n_head_kv), 0},
    {"head_dim", K_INT, 0, OFF(head_dim), 0},
    {"vocab_size", K_INT, 1, OFF(n_vocab), 0},
    {"num_experts", K_INT, 0, OFF(n_expert), 0},
    {"num_experts_per_tok", K_INT, 0, OFF(n_expert_used), 0},
    {"moe_intermediate_size", K_INT, 0, OFF(n_ff_exp), 0},
    {"shared_experts", K_INT, 0, OFF(n_expert_shared), 0},
    {"shared_expert_intermediate_size", K_INT, 0, OFF(n_ff_shexp), 0},
    {"first_k_dense_replace", K_INT, 0, OFF(n_layer_dense_first), 0},
    {"tie_word_embeddings", K_BOOL, 0, OFF(tied_embd), 0},
    {"qk_norm", K_BOOL, 0, OFF(qk_norm), 0},
    {"attention_bias", K_BOOL, 0, OFF(attn_bias), 0},
    {"sandwich_norm", K_BOOL, 0, OFF(sandwich_norm), 0},
    {"expert_bias", K_BOOL, 0, OFF(expert_bias), 0},
    {"attention_sinks", K_BOOL, 0, OFF(attn_sinks), 0},
    {"sliding_window", K_INT, 0, OFF(sliding_window), 0},
    {"sliding_every", K_INT, 0, OFF(sliding_every), 0},
    {"max_position_embeddings", K_INT, 0, OFF(n_ctx_max), 0},
    {"rope_theta", K_NUM, 0, OFF(rope_theta), 0},
    {"rms_norm_eps", K_NUM, 0, OFF(rms_norm_eps), 0},
    {"partial_rotary_factor", K_NUM, 0, OFF(partial_rotary), 0},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])
/* Keys handled separately or ignored on purpose (documentation fields). */
static const char *const EXTRA_KEYS[] = {"rope_type", "default_quant", "name", "notes", "published",
                                         "architecture", "_comment"};

static void stem(const char *path, char *out, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, len, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && strcmp(dot, ".json") == 0) *dot = '\0';
}

static int known_key(const char *k)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(k, KEYS[i].key) == 0) return 1;
    for (size_t i = 0; i < sizeof EXTRA_KEYS / sizeof EXTRA_KEYS[0]; i++)
        if (strcmp(k, EXTRA_KEYS[i]) == 0) return 1;
    return 0;
}

static void value_text(json_t *v, char *buf, size_t len)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, len, "%s", s ? s : "?");
    free(s);
    if (strlen(buf) > 60) strcpy(buf + 57, "...");
}

enum ats_status atsc_model_load(const char *path, ats_arch *out, ats_err *err)
{
    char vt[96];
    ats_arch_init(out);
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ats_err_set(err, ATS_EINVAL, "%s: not a regular file (a model description is a JSON file)", path);
    atsc_in_note(path); /* never to be replaced by an output of this run */
    FILE *f = fopen(path, "rb");
    if (!f) return ats_err_set(err, ATS_ENOTFOUND, "%s: cannot open model description: %s", path, strerror(errno));
    char magic[4] = {0};
    if (fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0) {
        fclose(f);
        return ats_err_set(err, ATS_EINVAL, "%s: a GGUF file, not a model description (JSON, as models/*.json); "
                           "`ats sim`, `ats sweep`, `ats inspect` and `ats run` take GGUF files", path);
    }
    rewind(f);
    json_error_t je;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!root)
        return ats_err_set(err, ATS_EINVAL, "%s:%d:%d: JSON syntax error: %s", path, je.line, je.column, je.text);
    enum ats_status st = ATS_OK;
    if (!json_is_object(root)) {
        st = ats_err_set(err, ATS_EINVAL, "%s: top level must be a JSON object", path);
        goto done;
    }
    if (json_object_get(root, "gpu") && json_object_get(root, "pcie") && !json_object_get(root, "model_type")) {
        st = ats_err_set(err, ATS_EINVAL, "%s: a hardware description (it has 'gpu' and 'pcie'), not a model "
                         "description (models/*.json)", path);
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!known_key(k)) {
            st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': unknown key (see models/README.md)", path, k);
            goto done;
        }
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        const keydef *d = &KEYS[i];
        v = json_object_get(root, d->key);
        if (!v || json_is_null(v)) {
            if (d->required) {
                st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': missing (required)", path, d->key);
                goto done;
            }
            continue;
        }
        char *dst = (char *)out + d->off;
        switch (d->kind) {
        case K_INT:
            if (!json_is_integer(v)) {
                value_text(v, vt, sizeof vt);
                st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': %s (must be an integer)", path, d->key, vt);
                goto done;
            }
            if (d->off == OFF(sliding_every)) {
                json_int_t x = json_integer_value(v);
                if (x < 0 || x > ATS_ARCH_MAX_LAYERS) {
                    st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': %lld (must be in 0..%d)", path, d->key,
                                     (long long)x, ATS_ARCH_MAX_LAYERS);
                    goto done;
                }
                *(int *)dst = (int)x;
            } else {
                *(int64_t *)dst = json_integer_value(v); /* ranges: ats_arch_validate */
            }
            break;
        case K_BOOL:
            if (!json_is_boolean(v)) {
                value_text(v, vt, sizeof vt);
                st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': %s (must be true or false)", path, d->key, vt);
                goto done;
            }
            *(int *)dst = json_is_true(v);
            break;
        case K_NUM:
            if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) <= 0) {
                value_text(v, vt, sizeof vt);
                st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': %s (must be a number > 0)", path, d->key, vt);
                goto done;
            }
            *(double *)dst = json_number_value(v);
            break;
        case K_STR:
            if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= d->len) {
                value_text(v, vt, sizeof vt);
                st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': %s (must be a non-empty string of < %zu bytes)",
                                 path, d->key, vt, d->len);
                goto done;
            }
            snprintf(dst, d->len, "%s", json_string_value(v));
            break;
        }
    }
    /* head_dim defaults to hidden_size / num_attention_heads only when absent (0 is refused below) */
    if (!json_object_get(root, "head_dim") && out->n_head > 0) out->head_dim = out->n_embd / out->n_head;
    /* a width the architecture needs must be present, not silently 0 */
    {
        const char *need = NULL;
        if (out->n_expert > 0 && !json_object_get(root, "moe_intermediate_size")) need = "moe_intermediate_size";
        else if (out->n_expert > 0 && !json_object_get(root, "num_experts_per_tok")) need = "num_experts_per_tok";
        else if (out->n_expert == 0 && !json_object_get(root, "intermediate_size")) need = "intermediate_size";
        if (need) {
            st = ats_err_set(err, ATS_EINVAL, "%s: field '%s': missing (required for a%s model)", path, need,
                             out->n_expert > 0 ? "n MoE" : " dense");
            goto done;
        }
    }
    v = json_object_get(root, "rope_type");
    if (v) {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        if (s && strcmp(s, "norm") == 0) out->rope_type = ATS_ROPE_NORM;
        else if (s && strcmp(s, "neox") == 0) out->rope_type = ATS_ROPE_NEOX;
        else {
            value_text(v, vt, sizeof vt);
            st = ats_err_set(err, ATS_EINVAL, "%s: field 'rope_type': %s (must be \"norm\" or \"neox\")", path, vt);
            goto done;
        }
    }
    v = json_object_get(root, "default_quant");
    if (!v) {
        st = ats_err_set(err, ATS_EINVAL, "%s: field 'default_quant': missing (required)", path);
        goto done;
    }
    if (!json_is_string(v) || ats_recipe_from_name(json_string_value(v), &out->default_recipe) != ATS_OK) {
        value_text(v, vt, sizeof vt);
        st = ats_err_set(err, ATS_EINVAL,
                         "%s: field 'default_quant': %s (unknown quant type; known: f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)",
                         path, vt);
        goto done;
    }
    stem(path, out->name, sizeof out->name);
    ats_err inner;
    if (ats_arch_validate(out, &inner) != ATS_OK) {
        st = ats_err_set(err, ATS_EINVAL, "%s: field %s", path, inner.msg);
        goto done;
    }
done:
    json_decref(root);
    return st;
}
