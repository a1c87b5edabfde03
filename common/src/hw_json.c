/* Hardware description JSON loader (jansson). Keys: sim/hw/README.md and atsc/hw_json.h. */
#include "atsc/hw_json.h"
#include "atsc/outfile.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_NUM, F_INT, F_I64, F_U64 } fkind;
typedef enum { C_POS, C_NONNEG, C_FRAC, C_GE1 } fcheck;

/* One figure: key inside its object, how to check it, the factor to SI units, where it goes, and
 * its plausible range in the file's units (lo..hi inclusive; 0..0 = only the check; documented in
 * sim/hw/README.md): absurd values (a bandwidth of 1e-300 GB/s) give absurd simulations. */
typedef struct {
    const char *key;
    fkind kind;
    fcheck check;
    double scale;
    size_t off;
    double lo, hi;
    const char *unit;
} figdef;

#define HW(f) offsetof(ats_hw, f)
static const figdef CPU_FIGS[] = {
    {"threads", F_INT, C_GE1, 1, HW(cpu_threads), 1, 4096, "threads"},
    {"int8_peak_TOPS", F_NUM, C_POS, 1e12, HW(cpu_flops), 1e-3, 1e5, "TOPS (1e9..1e17 op/s)"},
    {"mem_bw_GBps", F_NUM, C_POS, 1e9, HW(cpu_mem_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)"},
    {"op_overhead_us", F_NUM, C_NONNEG, 1e-6, HW(cpu_op_overhead_s), 0, 1e6, "us (0..1 s)"},
};
static const figdef GPU_FIGS[] = {
    {"fp16_tensor_peak_TFLOPS", F_NUM, C_POS, 1e12, HW(gpu_flops), 1e-3, 1e5, "TFLOPS (1e9..1e17 FLOP/s)"},
    {"mem_bw_GBps", F_NUM, C_POS, 1e9, HW(gpu_mem_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)"},
    {"vram_bytes", F_U64, C_GE1, 1, HW(gpu_vram_bytes), 16777216.0, 17592186044416.0, "bytes (16 MiB..16 TiB)"},
    {"op_overhead_us", F_NUM, C_NONNEG, 1e-6, HW(gpu_op_overhead_s), 0, 1e6, "us (0..1 s)"},
};
static const figdef PCIE_FIGS[] = {
    {"h2d_GBps", F_NUM, C_POS, 1e9, HW(pcie_h2d_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)"},
    {"d2h_GBps", F_NUM, C_POS, 1e9, HW(pcie_d2h_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)"},
    {"sm_copy_GBps", F_NUM, C_POS, 1e9, HW(pcie_sm_copy_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)"},
    {"link_GBps", F_NUM, C_POS, 1e9, HW(pcie_link_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)"},
    {"latency_us", F_NUM, C_NONNEG, 1e-6, HW(pcie_latency_s), 0, 1e6, "us (0..1 s)"},
    {"copy_engines", F_INT, C_GE1, 1, HW(n_copy_engines), 1, 16, "copy engines"},
};
static const figdef HOSTMEM_FIGS[] = {
    {"cpu_factor", F_NUM, C_FRAC, 1, HW(hostmem_cpu_factor), 0, 0, NULL},
    {"dma_factor", F_NUM, C_FRAC, 1, HW(hostmem_dma_factor), 0, 0, NULL},
};
static const figdef EFF_FIGS[] = {
    {"gemm_min_tokens", F_I64, C_GE1, 1, HW(gemm_min_tokens), 1, 1e6, "tokens"},
};
#define EF(f) offsetof(ats_hw_eff, f)
static const figdef BACKEND_FIGS[] = {
    {"gemv_bw", F_NUM, C_FRAC, 1, EF(gemv_bw), 0, 0, NULL},
    {"gemm_flop", F_NUM, C_FRAC, 1, EF(gemm_flop), 0, 0, NULL},
    {"attn_bw", F_NUM, C_FRAC, 1, EF(attn_bw), 0, 0, NULL},
    {"attn_flop", F_NUM, C_FRAC, 1, EF(attn_flop), 0, 0, NULL},
};
#define NFIG(a) (sizeof(a) / sizeof((a)[0]))

/* Documentation keys accepted (string values) in any section. */
static const char *const DOC_KEYS[] = {"model", "description", "notes"};

typedef struct {
    const char *file;
    ats_err *err;
} ctx;

static enum ats_status fail(ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static enum ats_status fail(ctx *c, const char *fmt, ...)
{
    if (c->err) {
        char msg[ATS_ERR_LEN];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        ats_err_set(c->err, ATS_EINVAL, "%s: %s", c->file, msg);
    }
    return ATS_EINVAL;
}

/* Compact text of a JSON value for messages (truncated to 60 characters). */
static void value_text(const json_t *v, char *buf, size_t len)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, len, "%s", s ? s : "?");
    free(s);
    if (strlen(buf) > 60) strcpy(buf + 57, "...");
}

static const char *join(char *buf, size_t len, const char *prefix, const char *key)
{
    if (prefix && *prefix) snprintf(buf, len, "%s.%s", prefix, key);
    else snprintf(buf, len, "%s", key);
    return buf;
}

static int is_doc_key(const char *k)
{
    for (size_t i = 0; i < NFIG(DOC_KEYS); i++)
        if (strcmp(k, DOC_KEYS[i]) == 0) return 1;
    return 0;
}

static const figdef *find_fig(const figdef *figs, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(figs[i].key, k) == 0) return &figs[i];
    return NULL;
}

/* Reads one figure of `obj` into base+off after checking type and range. */
static enum ats_status read_fig(ctx *c, const char *prefix, json_t *obj, const figdef *f, char *base)
{
    char path[160], vt[80];
    join(path, sizeof path, prefix, f->key);
    json_t *v = json_object_get(obj, f->key);
    if (!v) return fail(c, "field '%s': missing", path);
    if (f->kind == F_NUM) {
        if (!json_is_number(v)) {
            value_text(v, vt, sizeof vt);
            return fail(c, "field '%s': %s (must be a number)", path, vt);
        }
        double x = json_number_value(v);
        if (!isfinite(x)) return fail(c, "field '%s': %g (must be finite)", path, x);
        if (f->check == C_POS && !(x > 0)) return fail(c, "field '%s': %g (must be > 0)", path, x);
        if (f->check == C_NONNEG && !(x >= 0))
            return fail(c, "field '%s': %g (must be >= 0)", path, x);
        if (f->check == C_FRAC && !(x > 0 && x <= 1))
            return fail(c, "field '%s': %g (must be in (0, 1])", path, x);
        if (f->hi > 0 && !(x >= f->lo && x <= f->hi))
            return fail(c, "field '%s': %g outside the plausible range %g..%g %s (sim/hw/README.md)", path, x,
                        f->lo, f->hi, f->unit);
        *(double *)(base + f->off) = x * f->scale;
        return ATS_OK;
    }
    if (!json_is_integer(v)) {
        value_text(v, vt, sizeof vt);
        return fail(c, "field '%s': %s (must be an integer)", path, vt);
    }
    json_int_t x = json_integer_value(v);
    if (x < 1) return fail(c, "field '%s': %lld (must be >= 1)", path, (long long)x);
    if (f->hi > 0 && !((double)x >= f->lo && (double)x <= f->hi))
        return fail(c, "field '%s': %lld outside the plausible range %.0f..%.0f %s (sim/hw/README.md)", path,
                    (long long)x, f->lo, f->hi, f->unit);
    if (f->kind == F_INT) {
        if (x > 1000000) return fail(c, "field '%s': %lld (must be <= 1000000)", path, (long long)x);
        *(int *)(base + f->off) = (int)x;
    } else if (f->kind == F_I64) {
        *(int64_t *)(base + f->off) = (int64_t)x;
    } else {
        *(uint64_t *)(base + f->off) = (uint64_t)x;
    }
    return ATS_OK;
}

/* The "sources" object of a section: every figure present needs a non-empty string, and every
 * entry must name a figure of the section. `extra` is one more figure name (quant_scale) or NULL. */
static enum ats_status check_sources(ctx *c, const char *prefix, json_t *obj, const figdef *figs,
                                     size_t nfig, const char *extra, int extra_present)
{
    char path[160], vt[80];
    join(path, sizeof path, prefix, "sources");
    json_t *src = json_object_get(obj, "sources");
    if (!src) return fail(c, "field '%s': missing (every figure needs a source)", path);
    if (!json_is_object(src)) {
        value_text(src, vt, sizeof vt);
        return fail(c, "field '%s': %s (must be an object of strings)", path, vt);
    }
    const char *k;
    json_t *v;
    json_object_foreach(src, k, v) {
        char p2[200];
        snprintf(p2, sizeof p2, "%s.%s", path, k);
        if (!find_fig(figs, nfig, k) && !(extra && strcmp(k, extra) == 0))
            return fail(c, "field '%s': names no figure of '%s'", p2, prefix);
        if (!json_is_string(v) || json_string_length(v) == 0) {
            value_text(v, vt, sizeof vt);
            return fail(c, "field '%s': %s (must be a non-empty string)", p2, vt);
        }
    }
    for (size_t i = 0; i < nfig; i++)
        if (!json_object_get(src, figs[i].key))
            return fail(c, "field '%s.%s': missing (every figure needs a source)", path, figs[i].key);
    if (extra && extra_present && !json_object_get(src, extra))
        return fail(c, "field '%s.%s': missing (every figure needs a source)", path, extra);
    return ATS_OK;
}

/* Refuses keys of `obj` that are neither figures, nor doc strings, nor one of `also` (NULL-ended). */
static enum ats_status check_keys(ctx *c, const char *prefix, json_t *obj, const figdef *figs,
                                  size_t nfig, const char *const *also)
{
    const char *k;
    json_t *v;
    char path[160], vt[80];
    json_object_foreach(obj, k, v) {
        if (find_fig(figs, nfig, k) || strcmp(k, "sources") == 0) continue;
        int ok = 0;
        for (const char *const *a = also; a && *a; a++)
            if (strcmp(k, *a) == 0) ok = 1;
        if (ok) continue;
        join(path, sizeof path, prefix, k);
        if (is_doc_key(k)) {
            if (!json_is_string(v)) {
                value_text(v, vt, sizeof vt);
                return fail(c, "field '%s': %s (must be a string)", path, vt);
            }
            continue;
        }
        return fail(c, "field '%s': unknown field", path);
    }
    return ATS_OK;
}

static enum ats_status get_object(ctx *c, json_t *parent, const char *prefix, const char *key,
                                  json_t **out)
{
    char path[160], vt[80];
    join(path, sizeof path, prefix, key);
    json_t *o = json_object_get(parent, key);
    if (!o) return fail(c, "field '%s': missing", path);
    if (!json_is_object(o)) {
        value_text(o, vt, sizeof vt);
        return fail(c, "field '%s': %s (must be an object)", path, vt);
    }
    *out = o;
    return ATS_OK;
}

/* A section with figures and sources (cpu, gpu, pcie, host_memory). */
static enum ats_status read_section(ctx *c, json_t *root, const char *key, const figdef *figs,
                                    size_t nfig, ats_hw *hw)
{
    json_t *o;
    enum ats_status st = get_object(c, root, "", key, &o);
    if (st) return st;
    if ((st = check_keys(c, key, o, figs, nfig, NULL))) return st;
    for (size_t i = 0; i < nfig; i++)
        if ((st = read_fig(c, key, o, &figs[i], (char *)hw))) return st;
    return check_sources(c, key, o, figs, nfig, NULL, 0);
}

/* efficiency.cpu / efficiency.gpu: four fractions and an optional quant_scale map. */
static enum ats_status read_backend_eff(ctx *c, json_t *eff, const char *key, ats_hw_eff *out)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "efficiency.%s", key);
    json_t *o;
    enum ats_status st = get_object(c, eff, "efficiency", key, &o);
    if (st) return st;
    static const char *const also[] = {"quant_scale", NULL};
    if ((st = check_keys(c, prefix, o, BACKEND_FIGS, NFIG(BACKEND_FIGS), also))) return st;
    for (size_t i = 0; i < NFIG(BACKEND_FIGS); i++)
        if ((st = read_fig(c, prefix, o, &BACKEND_FIGS[i], (char *)out))) return st;
    json_t *qs = json_object_get(o, "quant_scale");
    if (qs) {
        char vt[80];
        if (!json_is_object(qs)) {
            value_text(qs, vt, sizeof vt);
            return fail(c, "field '%s.quant_scale': %s (must be an object)", prefix, vt);
        }
        const char *qk;
        json_t *qv;
        json_object_foreach(qs, qk, qv) {
            ats_qtype t;
            if (ats_qtype_from_name(qk, &t) != ATS_OK)
                return fail(c, "field '%s.quant_scale.%s': unknown quant type", prefix, qk);
            if ((int)t < 0 || (int)t >= (int)NFIG(out->q_scale))
                return fail(c, "field '%s.quant_scale.%s': type id %d out of range", prefix, qk, (int)t);
            if (!json_is_number(qv)) {
                value_text(qv, vt, sizeof vt);
                return fail(c, "field '%s.quant_scale.%s': %s (must be a number)", prefix, qk, vt);
            }
            double x = json_number_value(qv);
            if (!(isfinite(x) && x > 0))
                return fail(c, "field '%s.quant_scale.%s': %g (must be > 0)", prefix, qk, x);
            out->q_scale[t] = x;
        }
    }
    return check_sources(c, prefix, o, BACKEND_FIGS, NFIG(BACKEND_FIGS), "quant_scale", qs != NULL);
}

static enum ats_status read_string(ctx *c, json_t *root, const char *key, char *dst, size_t cap)
{
    char vt[80];
    json_t *v = json_object_get(root, key);
    if (!v) return fail(c, "field '%s': missing", key);
    if (!json_is_string(v) || json_string_length(v) == 0) {
        value_text(v, vt, sizeof vt);
        return fail(c, "field '%s': %s (must be a non-empty string)", key, vt);
    }
    if (json_string_length(v) >= cap)
        return fail(c, "field '%s': %zu bytes long (must be < %zu)", key, json_string_length(v), cap);
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return ATS_OK;
}

enum ats_status atsc_hw_load(const char *path, ats_hw *out, ats_err *err)
{
    ctx c = {path ? path : "(null)", err};
    if (!path || !out) return fail(&c, "atsc_hw_load: NULL argument");
    ats_hw_init(out);

    json_error_t je;
    /* a directory said as one; any unreadable file is ATS_EINVAL (this function's contract) */
    if (atsc_in_readable(path, "hardware description", err) != ATS_OK) return ATS_EINVAL;
    atsc_in_note(path); /* never to be replaced by an output of this run */
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (je.line < 0 || json_error_code(&je) == json_error_cannot_open_file)
            return fail(&c, "cannot read: %s", je.text);
        if (json_error_code(&je) == json_error_out_of_memory) {
            ats_err_set(err, ATS_ENOMEM, "%s: out of memory while parsing", path);
            return ATS_ENOMEM;
        }
        ats_err_set(err, ATS_EINVAL, "%s:%d:%d: JSON syntax error: %s", path, je.line, je.column,
                    je.text);
        return ATS_EINVAL;
    }
    enum ats_status st = ATS_OK;
    if (!json_is_object(root)) {
        st = fail(&c, "top level must be a JSON object");
        goto done;
    }
    if (json_object_get(root, "model_type")) { /* was "field 'model_type': unknown field" */
        st = fail(&c, "a model description (it has 'model_type'), not a hardware description (sim/hw/*.json)");
        goto done;
    }
    static const char *const top_keys[] = {"name", "source", "cpu", "gpu", "pcie", "host_memory",
                                           "efficiency", NULL};
    if ((st = check_keys(&c, "", root, NULL, 0, top_keys))) goto done;
    if ((st = read_string(&c, root, "name", out->name, sizeof out->name))) goto done;
    if ((st = read_string(&c, root, "source", out->source, sizeof out->source))) goto done;
    if ((st = read_section(&c, root, "cpu", CPU_FIGS, NFIG(CPU_FIGS), out))) goto done;
    if ((st = read_section(&c, root, "gpu", GPU_FIGS, NFIG(GPU_FIGS), out))) goto done;
    if ((st = read_section(&c, root, "pcie", PCIE_FIGS, NFIG(PCIE_FIGS), out))) goto done;
    if ((st = read_section(&c, root, "host_memory", HOSTMEM_FIGS, NFIG(HOSTMEM_FIGS), out))) goto done;

    json_t *eff;
    if ((st = get_object(&c, root, "", "efficiency", &eff))) goto done;
    static const char *const eff_keys[] = {"cpu", "gpu", NULL};
    if ((st = check_keys(&c, "efficiency", eff, EFF_FIGS, NFIG(EFF_FIGS), eff_keys))) goto done;
    if ((st = read_fig(&c, "efficiency", eff, &EFF_FIGS[0], (char *)out))) goto done;
    if ((st = check_sources(&c, "efficiency", eff, EFF_FIGS, NFIG(EFF_FIGS), NULL, 0))) goto done;
    if ((st = read_backend_eff(&c, eff, "cpu", &out->eff_cpu))) goto done;
    if ((st = read_backend_eff(&c, eff, "gpu", &out->eff_gpu))) goto done;

    /* Cross-field rules of the shared contract (sched/src/costs.c). */
    ats_err verr;
    if (ats_hw_validate(out, &verr) != ATS_OK) {
        st = fail(&c, "%s", verr.msg);
        goto done;
    }
done:
    json_decref(root);
    return st;
}
