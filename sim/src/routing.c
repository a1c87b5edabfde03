/* sim/src/routing.c — seeded MoE routing (uniform, Zipf) and routing-file replay. See sim/routing.h. */
#include "sim/routing.h"
#include "atsc/outfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>
#include <hdf5.h>

struct sim_routing {
    sim_routing_kind kind;
    int32_t n_layer, n_expert, k;
    gsl_rng *rng;
    double *cdf;     /* Zipf: (n_layer, n_expert) cumulative probabilities over ranks */
    int32_t *perm;   /* Zipf: (n_layer, n_expert) expert id of each popularity rank */
    int32_t *ids;    /* file: (n_tok, n_layer, k) */
    int64_t n_tok;
    int64_t cursor;  /* file: next token */
};

const char *sim_routing_kind_name(sim_routing_kind k)
{
    switch (k) {
    case SIM_ROUTE_UNIFORM: return "uniform";
    case SIM_ROUTE_ZIPF: return "zipf";
    case SIM_ROUTE_FILE: return "file";
    }
    return "?";
}

static enum ats_status check_arch(const ats_arch *a, ats_err *err)
{
    if (a->n_expert < 1 || a->n_expert_used < 1 || a->n_expert_used > a->n_expert || a->n_layer < 1)
        return ats_err_set(err, ATS_EINVAL, "routing: model %s has no routed experts (n_expert %lld, top-k %lld)",
                           a->name, (long long)a->n_expert, (long long)a->n_expert_used);
    if (a->n_expert_used > 64)
        return ats_err_set(err, ATS_EINVAL, "routing: top-k %lld (at most 64)", (long long)a->n_expert_used);
    if (a->n_expert > 4096)
        return ats_err_set(err, ATS_EINVAL, "routing: n_expert %lld (at most 4096)", (long long)a->n_expert);
    return ATS_OK;
}

enum ats_status sim_routing_new_dist(const ats_arch *arch, sim_routing_kind kind, double skew,
                                     uint64_t seed, sim_routing **out, ats_err *err)
{
    *out = NULL;
    enum ats_status st = check_arch(arch, err);
    if (st) return st;
    if (kind != SIM_ROUTE_UNIFORM && kind != SIM_ROUTE_ZIPF)
        return ats_err_set(err, ATS_EINVAL, "routing: kind %d is not a distribution", (int)kind);
    if (kind == SIM_ROUTE_ZIPF && !(skew > 0.0 && skew < 100.0))
        return ats_err_set(err, ATS_EINVAL, "routing: zipf skew %g (must be in (0, 100))", skew);
    sim_routing *r = calloc(1, sizeof *r);
    if (!r) return ATS_ENOMEM;
    r->kind = kind;
    r->n_layer = (int32_t)arch->n_layer;
    r->n_expert = (int32_t)arch->n_expert;
    r->k = (int32_t)arch->n_expert_used;
    r->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r->rng) goto nomem;
    gsl_rng_set(r->rng, (unsigned long)(seed ^ (seed >> 32)) ^ 0x5eedu);
    if (kind == SIM_ROUTE_ZIPF) {
        size_t n = (size_t)r->n_layer * (size_t)r->n_expert;
        r->cdf = malloc(n * sizeof *r->cdf);
        r->perm = malloc(n * sizeof *r->perm);
        if (!r->cdf || !r->perm) goto nomem;
        for (int32_t l = 0; l < r->n_layer; l++) {
            double *c = r->cdf + (size_t)l * (size_t)r->n_expert;
            int32_t *p = r->perm + (size_t)l * (size_t)r->n_expert;
            double s = 0.0;
            for (int32_t i = 0; i < r->n_expert; i++) {
                s += pow((double)(i + 1), -skew);
                c[i] = s;
                p[i] = i;
            }
            for (int32_t i = 0; i < r->n_expert; i++) c[i] /= s;
            c[r->n_expert - 1] = 1.0;
            /* Fisher-Yates: which expert holds which popularity rank in this layer */
            for (int32_t i = r->n_expert - 1; i > 0; i--) {
                int32_t j = (int32_t)gsl_rng_uniform_int(r->rng, (unsigned long)i + 1);
                int32_t t = p[i];
                p[i] = p[j];
                p[j] = t;
            }
        }
    }
    *out = r;
    return ATS_OK;
nomem:
    sim_routing_free(r);
    return ATS_ENOMEM;
}

static enum ats_status routing_load(const char *path, const ats_arch *arch, sim_routing **out, ats_err *err)
{
    *out = NULL;
    enum ats_status st = check_arch(arch, err);
    if (st) return st;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    atsc_in_note(path); /* never to be replaced by an output of this run */
    if ((st = atsc_in_readable(path, "routing file", err)) != ATS_OK) return st;
    hid_t f = -1, d = -1, sp = -1, ty = -1;
    sim_routing *r = NULL;
    st = ATS_OK;
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        st = ats_err_set(err, ATS_EINVAL, "%s: not an HDF5 file", path);
        goto done;
    }
    if (H5Lexists(f, "/routing", H5P_DEFAULT) <= 0 || H5Lexists(f, "/routing/expert_ids", H5P_DEFAULT) <= 0) {
        st = ats_err_set(err, ATS_EINVAL, "%s: /routing/expert_ids: missing dataset", path);
        goto done;
    }
    d = H5Dopen2(f, "/routing/expert_ids", H5P_DEFAULT);
    sp = d >= 0 ? H5Dget_space(d) : -1;
    ty = d >= 0 ? H5Dget_type(d) : -1;
    if (d < 0 || sp < 0 || ty < 0) {
        st = ats_err_set(err, ATS_EINVAL, "%s: /routing/expert_ids: cannot open", path);
        goto done;
    }
    if (H5Tget_class(ty) != H5T_INTEGER || H5Tget_size(ty) != 4 || H5Tget_sign(ty) != H5T_SGN_2) {
        st = ats_err_set(err, ATS_EINVAL, "%s: /routing/expert_ids: type must be int32", path);
        goto done;
    }
    hsize_t dims[3];
    int rank = H5Sget_simple_extent_ndims(sp);
    if (rank != 3) {
        st = ats_err_set(err, ATS_EINVAL, "%s: /routing/expert_ids: rank %d (expected 3: token, layer, k)",
                         path, rank);
        goto done;
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    if (dims[0] < 1 || dims[1] != (hsize_t)arch->n_layer || dims[2] != (hsize_t)arch->n_expert_used) {
        st = ats_err_set(err, ATS_EINVAL,
                         "%s: /routing/expert_ids: shape (%llu, %llu, %llu), expected (tokens >= 1, %lld, %lld) for %s",
                         path, (unsigned long long)dims[0], (unsigned long long)dims[1],
                         (unsigned long long)dims[2], (long long)arch->n_layer,
                         (long long)arch->n_expert_used, arch->name);
        goto done;
    }
    r = calloc(1, sizeof *r);
    size_t n = (size_t)(dims[0] * dims[1] * dims[2]);
    if (!r || !(r->ids = malloc(n * sizeof *r->ids))) {
        st = ATS_ENOMEM;
        goto done;
    }
    if (H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, r->ids) < 0) {
        st = ats_err_set(err, ATS_EINVAL, "%s: /routing/expert_ids: read failed", path);
        goto done;
    }
    r->kind = SIM_ROUTE_FILE;
    r->n_layer = (int32_t)arch->n_layer;
    r->n_expert = (int32_t)arch->n_expert;
    r->k = (int32_t)arch->n_expert_used;
    r->n_tok = (int64_t)dims[0];
    for (int64_t t = 0; t < r->n_tok && st == ATS_OK; t++)
        for (int32_t l = 0; l < r->n_layer && st == ATS_OK; l++) {
            if (!ats_arch_layer_is_moe(arch, l)) continue;
            for (int32_t j = 0; j < r->k; j++) {
                int32_t v = r->ids[((size_t)t * (size_t)r->n_layer + (size_t)l) * (size_t)r->k + (size_t)j];
                if (v < 0 || v >= r->n_expert) {
                    st = ats_err_set(err, ATS_EINVAL,
                                     "%s: /routing/expert_ids[%lld][%d][%d] = %d (must be in [0, %d))", path,
                                     (long long)t, l, j, v, r->n_expert);
                    break;
                }
                const int32_t *row = &r->ids[((size_t)t * (size_t)r->n_layer + (size_t)l) * (size_t)r->k];
                for (int32_t i = 0; i < j; i++)
                    if (row[i] == v) { /* top-k selects k distinct experts */
                        st = ats_err_set(err, ATS_EINVAL,
                                         "%s: /routing/expert_ids[%lld][%d][%d] = %d: expert already selected at "
                                         "[%lld][%d][%d] (a token's k experts must be distinct)",
                                         path, (long long)t, l, j, v, (long long)t, l, i);
                        break;
                    }
                if (st != ATS_OK) break;
            }
        }
done:
    if (ty >= 0) H5Tclose(ty);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    if (st) {
        sim_routing_free(r);
        return st;
    }
    *out = r;
    return ATS_OK;
}

/* Debian's HDF5 is not thread-safe: the sessions of a sweep load the routing file from several threads,
 * and the sweep driver writes its checkpoint meanwhile; every HDF5 use in libats_sim holds this lock */
enum ats_status sim_routing_load(const char *path, const ats_arch *arch, sim_routing **out, ats_err *err)
{
    enum ats_status st;
#pragma omp critical(ats_hdf5)
    st = routing_load(path, arch, out, err);
    return st;
}

void sim_routing_free(sim_routing *r)
{
    if (!r) return;
    if (r->rng) gsl_rng_free(r->rng);
    free(r->cdf);
    free(r->perm);
    free(r->ids);
    free(r);
}

static int32_t draw(sim_routing *r, int32_t layer)
{
    if (r->kind == SIM_ROUTE_UNIFORM) return (int32_t)gsl_rng_uniform_int(r->rng, (unsigned long)r->n_expert);
    const double *c = r->cdf + (size_t)layer * (size_t)r->n_expert;
    double u = gsl_rng_uniform(r->rng);
    int32_t lo = 0, hi = r->n_expert - 1;
    while (lo < hi) { /* first rank with cdf > u */
        int32_t mid = (lo + hi) / 2;
        if (c[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return r->perm[(size_t)layer * (size_t)r->n_expert + (size_t)lo];
}

/* exact draw among the experts not in ex[0..nx): probability ∝ their weight (rank mass) */
static int32_t draw_excluding(sim_routing *r, int32_t layer, const int32_t *ex, int32_t nx)
{
    const int32_t E = r->n_expert;
    const double *c = r->cdf ? r->cdf + (size_t)layer * (size_t)E : NULL;
    const int32_t *p = r->perm ? r->perm + (size_t)layer * (size_t)E : NULL;
    double total = 0.0;
    for (int32_t i = 0; i < E; i++) {
        int32_t id = p ? p[i] : i, skip = 0;
        for (int32_t j = 0; j < nx; j++) skip |= ex[j] == id;
        if (!skip) total += c ? c[i] - (i ? c[i - 1] : 0.0) : 1.0;
    }
    double u = gsl_rng_uniform(r->rng) * total, acc = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < E; i++) {
        int32_t id = p ? p[i] : i, skip = 0;
        for (int32_t j = 0; j < nx; j++) skip |= ex[j] == id;
        if (skip) continue;
        last = id;
        acc += c ? c[i] - (i ? c[i - 1] : 0.0) : 1.0;
        if (acc > u) return id;
    }
    ATS_ASSERT(last >= 0);
    return last;
}

int sim_routing_round(sim_routing *r, int64_t n_tokens, int32_t layer, uint8_t *sel)
{
    ATS_ASSERT(layer >= 0 && layer < r->n_layer && n_tokens >= 1);
    memset(sel, 0, (size_t)r->n_expert);
    int distinct = 0;
    for (int64_t t = 0; t < n_tokens && distinct < r->n_expert; t++) {
        if (r->kind == SIM_ROUTE_FILE) {
            int64_t tok = (r->cursor + t) % r->n_tok;
            const int32_t *row = r->ids + ((size_t)tok * (size_t)r->n_layer + (size_t)layer) * (size_t)r->k;
            for (int32_t j = 0; j < r->k; j++) {
                int32_t v = row[j];
                if (v >= 0 && v < r->n_expert && !sel[v]) sel[v] = 1, distinct++;
            }
        } else {
            /* k distinct experts per token, without replacement: draw and reject repeats; after
             * many rejections (steep Zipf) pick among the remaining experts exactly */
            int32_t mine[64], nm = 0, rejects = 0;
            while (nm < r->k) {
                int32_t v;
                if (rejects < 64) {
                    v = draw(r, layer);
                    int dup = 0;
                    for (int32_t i = 0; i < nm; i++) dup |= mine[i] == v;
                    if (dup) {
                        rejects++;
                        continue;
                    }
                } else {
                    v = draw_excluding(r, layer, mine, nm);
                }
                mine[nm++] = v;
                if (!sel[v]) sel[v] = 1, distinct++;
            }
        }
    }
    return distinct;
}

void sim_routing_next_round(sim_routing *r, int64_t n_tokens)
{
    if (r->kind == SIM_ROUTE_FILE) r->cursor = (r->cursor + n_tokens) % r->n_tok;
}
