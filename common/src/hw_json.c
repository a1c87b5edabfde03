/* Hardware description JSON loader (jansson). Keys: sim/hw/README.md and atsc/hw_json.h. */
#include "atsc/hw_json.h"
#include "atsc/outfile.h"
#include "ats/graph.h"

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
    int optional;     /* 1: may be absent (then 0); present, it needs a source like any figure */
} figdef;

#define HW(f) offsetof(ats_hw, f)
static const figdef CPU_FIGS[] = {
    {"threads", F_INT, C_GE1, 1, HW(cpu_threads), 1, 4096, "threads", 0},
    {"int8_peak_TOPS", F_NUM, C_POS, 1e12, HW(cpu_flops), 1e-3, 1e5, "TOPS (1e9..1e17 op/s)", 0},
    {"mem_bw_GBps", F_NUM, C_POS, 1e9, HW(cpu_mem_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)", 0},
    {"op_overhead_us", F_NUM, C_NONNEG, 1e-6, HW(cpu_op_overhead_s), 0, 1e6, "us (0..1 s)", 0},
};
static const figdef GPU_FIGS[] = {
    {"fp16_tensor_peak_TFLOPS", F_NUM, C_POS, 1e12, HW(gpu_flops), 1e-3, 1e5, "TFLOPS (1e9..1e17 FLOP/s)", 0},
    {"mem_bw_GBps", F_NUM, C_POS, 1e9, HW(gpu_mem_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)", 0},
    {"vram_bytes", F_U64, C_GE1, 1, HW(gpu_vram_bytes), 16777216.0, 17592186044416.0, "bytes (16 MiB..16 TiB)", 0},
    {"op_overhead_us", F_NUM, C_NONNEG, 1e-6, HW(gpu_op_overhead_s), 0, 1e6, "us (0..1 s)", 0},
};
static const figdef PCIE_FIGS[] = {
    {"h2d_GBps", F_NUM, C_POS, 1e9, HW(pcie_h2d_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)", 0},
    {"d2h_GBps", F_NUM, C_POS, 1e9, HW(pcie_d2h_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)", 0},
    {"sm_copy_GBps", F_NUM, C_POS, 1e9, HW(pcie_sm_copy_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)", 0},
    {"link_GBps", F_NUM, C_POS, 1e9, HW(pcie_link_bw), 0.1, 1e5, "GB/s (0.1 GB/s..100 TB/s)", 0},
    {"latency_us", F_NUM, C_NONNEG, 1e-6, HW(pcie_latency_s), 0, 1e6, "us (0..1 s)", 0},
    {"copy_engines", F_INT, C_GE1, 1, HW(n_copy_engines), 1, 16, "copy engines", 0},
    {"switch_us", F_NUM, C_NONNEG, 1e-6, HW(host_switch_s), 0, 1e6, "us (0..1 s)", 1},
};
static const figdef HOSTMEM_FIGS[] = {
    {"cpu_factor", F_NUM, C_FRAC, 1, HW(hostmem_cpu_factor), 0, 0, NULL, 0},
    {"dma_factor", F_NUM, C_FRAC, 1, HW(hostmem_dma_factor), 0, 0, NULL, 0},
};
static const figdef EFF_FIGS[] = {
    {"gemm_min_tokens", F_I64, C_GE1, 1, HW(gemm_min_tokens), 1, 1e6, "tokens", 0},
};
#define EF(f) offsetof(ats_hw_eff, f)
static const figdef BACKEND_FIGS[] = {
    {"gemv_bw", F_NUM, C_FRAC, 1, EF(gemv_bw), 0, 0, NULL, 0},
    {"gemm_flop", F_NUM, C_FRAC, 1, EF(gemm_flop), 0, 0, NULL, 0},
    {"attn_bw", F_NUM, C_FRAC, 1, EF(attn_bw), 0, 0, NULL, 0},
    {"attn_flop", F_NUM, C_FRAC, 1, EF(attn_flop), 0, 0, NULL, 0},
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
    if (!v && f->optional) return ATS_OK; /* stays 0 (ats_hw_init) */
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
 * entry must name a figure of the section or one of `extras` (NULL or a NULL-ended list of optional
 * non-figure entries: curves, maps), which need a source when present and none when absent. */
static enum ats_status check_sources(ctx *c, const char *prefix, json_t *obj, const figdef *figs,
                                     size_t nfig, const char *const *extras)
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
        int extra = 0;
        for (size_t e = 0; extras && extras[e]; e++) extra |= strcmp(k, extras[e]) == 0;
        if (!find_fig(figs, nfig, k) && !extra) return fail(c, "field '%s': names no figure of '%s'", p2, prefix);
        if (!json_is_string(v) || json_string_length(v) == 0) {
            value_text(v, vt, sizeof vt);
            return fail(c, "field '%s': %s (must be a non-empty string)", p2, vt);
        }
    }
    for (size_t i = 0; i < nfig; i++) {
        const int has_src = json_object_get(src, figs[i].key) != NULL, has_fig = json_object_get(obj, figs[i].key) != NULL;
        if (!has_src && (!figs[i].optional || has_fig))
            return fail(c, "field '%s.%s': missing (every figure needs a source)", path, figs[i].key);
        if (has_src && figs[i].optional && !has_fig)
            return fail(c, "field '%s.%s': a source for '%s.%s', which is absent", path, figs[i].key, prefix,
                        figs[i].key);
    }
    /* the optional non-figure entries (curves, maps): a source when present, none when absent */
    for (size_t e = 0; extras && extras[e]; e++) {
        const int has_src = json_object_get(src, extras[e]) != NULL, has = json_object_get(obj, extras[e]) != NULL;
        if (has && !has_src) return fail(c, "field '%s.%s': missing (every figure needs a source)", path, extras[e]);
        if (!has && has_src)
            return fail(c, "field '%s.%s': a source for '%s.%s', which is absent", path, extras[e], prefix, extras[e]);
    }
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
    return check_sources(c, key, o, figs, nfig, NULL);
}

/* An optional curve cpu.NAME: [{KX: x, KY: y}, ...] of 1..ATS_HW_MAX_BW_POINTS objects with exactly
 * those keys. *a NULL when absent. point(): point k's two values (not yet checked) and its path. */
static enum ats_status curve_array(ctx *c, json_t *cpu, const char *name, const char *kx, const char *ky, json_t **a)
{
    char vt[80];
    *a = json_object_get(cpu, name);
    if (!*a) return ATS_OK;
    if (!json_is_array(*a) || json_array_size(*a) < 1 || json_array_size(*a) > ATS_HW_MAX_BW_POINTS) {
        value_text(*a, vt, sizeof vt);
        return fail(c, "field 'cpu.%s': %s (must be an array of 1..%d objects {\"%s\", \"%s\"})", name, vt,
                    ATS_HW_MAX_BW_POINTS, kx, ky);
    }
    return ATS_OK;
}

static enum ats_status point(ctx *c, json_t *a, const char *name, size_t k, const char *kx, const char *ky, char *path,
                             size_t plen, json_t **x, json_t **y)
{
    char vt[80];
    snprintf(path, plen, "cpu.%s[%zu]", name, k);
    json_t *o = json_array_get(a, k);
    if (!json_is_object(o)) {
        value_text(o, vt, sizeof vt);
        return fail(c, "field '%s': %s (must be an object {\"%s\", \"%s\"})", path, vt, kx, ky);
    }
    const char *const keys[] = {kx, ky, NULL};
    enum ats_status st = check_keys(c, path, o, NULL, 0, keys);
    if (st) return st;
    *x = json_object_get(o, kx);
    *y = json_object_get(o, ky);
    if (!*x || !*y) return fail(c, "field '%s.%s': missing", path, *x ? ky : kx);
    return ATS_OK;
}

/* cpu.mem_bw_over_threads (optional): [{"threads": n, "GBps": x}, ...], threads strictly increasing
 * integers in 1..4096, GBps finite in the plausible range of cpu.mem_bw_GBps, 1..ATS_HW_MAX_BW_POINTS
 * points; into hw->cpu_bw_n / cpu_bw_threads / cpu_bw_Bps. */
static enum ats_status read_bw_curve(ctx *c, json_t *cpu, ats_hw *hw)
{
    char vt[80], path[64];
    json_t *a, *t, *g;
    enum ats_status st = curve_array(c, cpu, "mem_bw_over_threads", "threads", "GBps", &a);
    if (st || !a) return st;
    for (size_t k = 0; k < json_array_size(a); k++) {
        if ((st = point(c, a, "mem_bw_over_threads", k, "threads", "GBps", path, sizeof path, &t, &g))) return st;
        value_text(t, vt, sizeof vt);
        if (!json_is_integer(t) || json_integer_value(t) < 1 || json_integer_value(t) > 4096 ||
            (k > 0 && json_integer_value(t) <= hw->cpu_bw_threads[k - 1]))
            return fail(c, "field '%s.threads': %s (must be an integer in 1..4096, above the previous point's)", path,
                        vt);
        value_text(g, vt, sizeof vt);
        double x = json_is_number(g) ? json_number_value(g) : NAN;
        if (!isfinite(x) || !(x >= 0.1 && x <= 1e5))
            return fail(c, "field '%s.GBps': %s (must be a number in 0.1..1e5 GB/s, sim/hw/README.md)", path, vt);
        hw->cpu_bw_threads[k] = (int32_t)json_integer_value(t);
        hw->cpu_bw_Bps[k] = x * 1e9;
    }
    hw->cpu_bw_n = (int32_t)json_array_size(a);
    return ATS_OK;
}

/* cpu.load_response (optional): [{"avail": a, "slowdown": s}, ...], avail strictly increasing in
 * (0, 1), slowdown in 1..1000 and non-increasing, 1..ATS_HW_MAX_BW_POINTS points; into hw->cpu_load_*. */
static enum ats_status read_load_curve(ctx *c, json_t *cpu, ats_hw *hw)
{
    char vt[80], path[64];
    json_t *a, *x, *y;
    enum ats_status st = curve_array(c, cpu, "load_response", "avail", "slowdown", &a);
    if (st || !a) return st;
    for (size_t k = 0; k < json_array_size(a); k++) {
        if ((st = point(c, a, "load_response", k, "avail", "slowdown", path, sizeof path, &x, &y))) return st;
        double xv = json_is_number(x) ? json_number_value(x) : NAN, yv = json_is_number(y) ? json_number_value(y) : NAN;
        value_text(x, vt, sizeof vt);
        if (!(xv > 0 && xv < 1) || (k > 0 && !(xv > hw->cpu_load_avail[k - 1])))
            return fail(c, "field '%s.avail': %s (must be a number in (0, 1), above the previous point's)", path, vt);
        value_text(y, vt, sizeof vt);
        if (!(yv >= 1 && yv <= 1000) || (k > 0 && !(yv <= hw->cpu_load_slow[k - 1])))
            return fail(c, "field '%s.slowdown': %s (must be a number in 1..1000: time under load / idle time, not above "
                           "the previous point's: more CPU left never slows an op more)", path, vt);
        hw->cpu_load_avail[k] = xv;
        hw->cpu_load_slow[k] = yv;
    }
    hw->cpu_load_n = (int32_t)json_array_size(a);
    return ATS_OK;
}

/* cpu: the CPU_FIGS and the optional mem_bw_over_threads and load_response curves, each with a source. */
static enum ats_status read_cpu_section(ctx *c, json_t *root, ats_hw *hw)
{
    json_t *o;
    enum ats_status st = get_object(c, root, "", "cpu", &o);
    if (st) return st;
    static const char *const also[] = {"mem_bw_over_threads", "load_response", NULL};
    if ((st = check_keys(c, "cpu", o, CPU_FIGS, NFIG(CPU_FIGS), also))) return st;
    for (size_t i = 0; i < NFIG(CPU_FIGS); i++)
        if ((st = read_fig(c, "cpu", o, &CPU_FIGS[i], (char *)hw))) return st;
    if ((st = read_bw_curve(c, o, hw)) || (st = read_load_curve(c, o, hw))) return st;
    return check_sources(c, "cpu", o, CPU_FIGS, NFIG(CPU_FIGS), also);
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
    return check_sources(c, prefix, o, BACKEND_FIGS, NFIG(BACKEND_FIGS), also);
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

/* ---- op_table: the measured per-op times of `ats profile` ---------------------------------- */

static const char *const SIDE_NAMES[2] = {"cpu", "gpu"};
static const char *const ENTRY_KEYS[] = {"kind", "role", "type", "n_out", "n_in", "tokens", "t_s", "flop", "bytes", NULL};

static enum ats_status read_int_key(ctx *c, const char *path, json_t *o, const char *key, int64_t lo, int64_t *out)
{
    char vt[80];
    json_t *v = json_object_get(o, key);
    if (!v) return fail(c, "field '%s.%s': missing", path, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo) {
        value_text(v, vt, sizeof vt);
        return fail(c, "field '%s.%s': %s (must be an integer >= %lld)", path, key, vt, (long long)lo);
    }
    *out = (int64_t)json_integer_value(v);
    return ATS_OK;
}

static enum ats_status read_name_key(ctx *c, const char *path, json_t *o, const char *key, const char **out)
{
    char vt[80];
    json_t *v = json_object_get(o, key);
    if (!v) return fail(c, "field '%s.%s': missing", path, key);
    if (!json_is_string(v)) {
        value_text(v, vt, sizeof vt);
        return fail(c, "field '%s.%s': %s (must be a string)", path, key, vt);
    }
    *out = json_string_value(v);
    return ATS_OK;
}

/* One array of numbers (tokens: integers >= 1 increasing; t_s > 0; flop, bytes >= 0) of n entries. */
static enum ats_status read_points(ctx *c, const char *path, json_t *o, const char *key, int32_t *n, int64_t *ti,
                                   double *td)
{
    char vt[80];
    json_t *a = json_object_get(o, key);
    if (!a) return fail(c, "field '%s.%s': missing", path, key);
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > ATS_PROF_MAX_POINTS) {
        value_text(a, vt, sizeof vt);
        return fail(c, "field '%s.%s': %s (must be an array of 1..%d numbers)", path, key, vt, ATS_PROF_MAX_POINTS);
    }
    if (*n > 0 && (int32_t)json_array_size(a) != *n)
        return fail(c, "field '%s.%s': %zu values (must be %d, as 'tokens')", path, key, json_array_size(a), (int)*n);
    *n = (int32_t)json_array_size(a);
    for (int32_t k = 0; k < *n; k++) {
        json_t *v = json_array_get(a, (size_t)k);
        value_text(v, vt, sizeof vt);
        if (ti) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || (k > 0 && json_integer_value(v) <= ti[k - 1]))
                return fail(c, "field '%s.%s[%d]': %s (must be an integer >= 1, above the previous one)", path, key,
                            (int)k, vt);
            ti[k] = (int64_t)json_integer_value(v);
            continue;
        }
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        int t_s = strcmp(key, "t_s") == 0;
        if (!isfinite(x) || (t_s ? !(x > 0 && x <= 1e6) : !(x >= 0)))
            return fail(c, "field '%s.%s[%d]': %s (must be a number %s)", path, key, (int)k, vt,
                        t_s ? "in (0, 1e6] s" : ">= 0");
        td[k] = x;
    }
    return ATS_OK;
}

static enum ats_status read_entry(ctx *c, const char *path, json_t *o, int side, ats_prof_entry *e)
{
    char vt[80];
    if (!json_is_object(o)) {
        value_text(o, vt, sizeof vt);
        return fail(c, "field '%s': %s (must be an object)", path, vt);
    }
    enum ats_status st;
    if ((st = check_keys(c, path, o, NULL, 0, ENTRY_KEYS))) return st;
    memset(e, 0, sizeof *e);
    e->backend = side;
    const char *kn, *rn, *tn;
    if ((st = read_name_key(c, path, o, "kind", &kn)) || (st = read_name_key(c, path, o, "role", &rn)) ||
        (st = read_name_key(c, path, o, "type", &tn)))
        return st;
    e->kind = -1;
    for (int k = 0; k < ATS_OP_KIND_COUNT; k++)
        if (strcmp(kn, ats_op_kind_name((ats_op_kind)k)) == 0) e->kind = k;
    if (e->kind < 0) return fail(c, "field '%s.kind': \"%.40s\" (no such op kind: embed, norm, matmul, attn, experts, shexp)", path, kn);
    ats_role r;
    if (ats_role_from_name(rn, &r) != ATS_OK) return fail(c, "field '%s.role': \"%.40s\" (no such role)", path, rn);
    e->role = (int32_t)r;
    ats_qtype q;
    if (ats_qtype_from_name(tn, &q) != ATS_OK || (int)q < 0 || (int)q >= 64)
        return fail(c, "field '%s.type': \"%.40s\" (unknown quant type)", path, tn);
    e->qtype = (int32_t)q;
    if ((st = read_int_key(c, path, o, "n_out", 0, &e->n_out)) || (st = read_int_key(c, path, o, "n_in", 0, &e->n_in)))
        return st;
    int32_t n = 0;
    if ((st = read_points(c, path, o, "tokens", &n, e->tokens, NULL)) || (st = read_points(c, path, o, "t_s", &n, NULL, e->t_s)) ||
        (st = read_points(c, path, o, "flop", &n, NULL, e->flop)) || (st = read_points(c, path, o, "bytes", &n, NULL, e->bytes)))
        return st;
    e->n_points = n;
    return ATS_OK;
}

/* "op_table": { "cpu": [entries], "gpu": [entries], "sources": { "cpu": "...", "gpu": "..." } };
 * each side optional, and a side present needs its source. */
static enum ats_status read_op_table(ctx *c, json_t *root, ats_prof_table *t)
{
    json_t *o;
    enum ats_status st = get_object(c, root, "", "op_table", &o);
    if (st) return st;
    static const char *const keys[] = {"cpu", "gpu", NULL};
    if ((st = check_keys(c, "op_table", o, NULL, 0, keys))) return st;
    json_t *src = json_object_get(o, "sources");
    char vt[80], path[96];
    if (!src || !json_is_object(src)) return fail(c, "field 'op_table.sources': missing or not an object (every figure needs a source)");
    const char *k;
    json_t *v;
    json_object_foreach(src, k, v) {
        if (strcmp(k, "cpu") && strcmp(k, "gpu")) return fail(c, "field 'op_table.sources.%s': names no figure of 'op_table'", k);
        if (!json_is_string(v) || json_string_length(v) == 0) {
            value_text(v, vt, sizeof vt);
            return fail(c, "field 'op_table.sources.%s': %s (must be a non-empty string)", k, vt);
        }
    }
    t->n = 0;
    for (int side = 0; side < 2; side++) {
        json_t *a = json_object_get(o, SIDE_NAMES[side]);
        if (!a) continue;
        if (!json_object_get(src, SIDE_NAMES[side]))
            return fail(c, "field 'op_table.sources.%s': missing (every figure needs a source)", SIDE_NAMES[side]);
        if (!json_is_array(a)) {
            value_text(a, vt, sizeof vt);
            return fail(c, "field 'op_table.%s': %s (must be an array)", SIDE_NAMES[side], vt);
        }
        for (size_t i = 0; i < json_array_size(a); i++) {
            snprintf(path, sizeof path, "op_table.%s[%zu]", SIDE_NAMES[side], i);
            if (t->n >= ATS_PROF_MAX_ENTRIES)
                return fail(c, "field '%s': more than %d entries in all", path, ATS_PROF_MAX_ENTRIES);
            if ((st = read_entry(c, path, json_array_get(a, i), side, &t->e[t->n]))) return st;
            t->n++;
        }
    }
    return ATS_OK;
}

struct json_t *atsc_hw_table_json(const ats_prof_table *t, const char *source_cpu, const char *source_gpu)
{
    json_t *o = json_object(), *src = json_object();
    if (!o || !src) goto oom;
    for (int side = 0; side < 2; side++) {
        const char *sname = side ? source_gpu : source_cpu;
        json_t *a = json_array();
        if (!a) goto oom;
        for (int32_t i = 0; i < t->n; i++) {
            const ats_prof_entry *e = &t->e[i];
            if (e->backend != side) continue;
            json_t *x = json_object(), *tk = json_array(), *ts = json_array(), *fl = json_array(), *by = json_array();
            if (!x || !tk || !ts || !fl || !by) {
                json_decref(x); json_decref(tk); json_decref(ts); json_decref(fl); json_decref(by); json_decref(a);
                goto oom;
            }
            json_object_set_new(x, "kind", json_string(ats_op_kind_name((ats_op_kind)e->kind)));
            json_object_set_new(x, "role", json_string(ats_role_name((ats_role)e->role)));
            json_object_set_new(x, "type", json_string(ats_qtype_name((ats_qtype)e->qtype)));
            json_object_set_new(x, "n_out", json_integer(e->n_out));
            json_object_set_new(x, "n_in", json_integer(e->n_in));
            for (int32_t k = 0; k < e->n_points; k++) {
                json_array_append_new(tk, json_integer(e->tokens[k]));
                json_array_append_new(ts, json_real(e->t_s[k]));
                json_array_append_new(fl, json_real(e->flop[k]));
                json_array_append_new(by, json_real(e->bytes[k]));
            }
            json_object_set_new(x, "tokens", tk);
            json_object_set_new(x, "t_s", ts);
            json_object_set_new(x, "flop", fl);
            json_object_set_new(x, "bytes", by);
            json_array_append_new(a, x);
        }
        if (json_array_size(a) == 0 || !sname) {
            json_decref(a);
            continue;
        }
        json_object_set_new(o, SIDE_NAMES[side], a);
        json_object_set_new(src, SIDE_NAMES[side], json_string(sname));
    }
    json_object_set_new(o, "sources", src);
    return o;
oom:
    json_decref(o);
    json_decref(src);
    return NULL;
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
                                           "efficiency", "op_table", "measurements", NULL};
    if ((st = check_keys(&c, "", root, NULL, 0, top_keys))) goto done;
    if ((st = read_string(&c, root, "name", out->name, sizeof out->name))) goto done;
    if ((st = read_string(&c, root, "source", out->source, sizeof out->source))) goto done;
    if ((st = read_cpu_section(&c, root, out))) goto done;
    if ((st = read_section(&c, root, "gpu", GPU_FIGS, NFIG(GPU_FIGS), out))) goto done;
    if ((st = read_section(&c, root, "pcie", PCIE_FIGS, NFIG(PCIE_FIGS), out))) goto done;
    if ((st = read_section(&c, root, "host_memory", HOSTMEM_FIGS, NFIG(HOSTMEM_FIGS), out))) goto done;

    json_t *eff;
    if ((st = get_object(&c, root, "", "efficiency", &eff))) goto done;
    static const char *const eff_keys[] = {"cpu", "gpu", NULL};
    if ((st = check_keys(&c, "efficiency", eff, EFF_FIGS, NFIG(EFF_FIGS), eff_keys))) goto done;
    if ((st = read_fig(&c, "efficiency", eff, &EFF_FIGS[0], (char *)out))) goto done;
    if ((st = check_sources(&c, "efficiency", eff, EFF_FIGS, NFIG(EFF_FIGS), NULL))) goto done;
    if ((st = read_backend_eff(&c, eff, "cpu", &out->eff_cpu))) goto done;
    if ((st = read_backend_eff(&c, eff, "gpu", &out->eff_gpu))) goto done;

    if (json_object_get(root, "op_table") && (st = read_op_table(&c, root, &out->op_table))) goto done;
    json_t *meas = json_object_get(root, "measurements"); /* ats profile's raw figures: not read */
    if (meas && !json_is_object(meas)) {
        st = fail(&c, "field 'measurements': must be an object");
        goto done;
    }

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
