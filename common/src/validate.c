/* Sim versus real: comparison, validation file, summary list, trace windows (atsc/validate.h). */
#include "atsc/validate.h"

#include <errno.h>
#include <fcntl.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <hdf5.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "ats_version.h"
#include "atsc/outfile.h"
#include "h5write.h"

/* ---------------------------------------------------------------- comparison */

static const char *phase_name(int32_t p) { return p == ATSC_PHASE_DECODE ? "decode" : "prefill"; }

enum ats_status atsc_val_compare(const atsc_round_row *real, size_t n_real, const atsc_round_row *sim,
                                 size_t n_sim, atsc_val_stats *out, ats_err *err)
{
    if (!out || (n_real && !real) || (n_sim && !sim))
        return ats_err_set(err, ATS_EINVAL, "atsc_val_compare: NULL argument");
    if (n_real == 0 || n_sim == 0)
        return ats_err_set(err, ATS_EINVAL, "zero-length window: the %s run has no round (real %zu, sim %zu rounds; "
                           "nothing to compare)", n_real == 0 ? "real" : "simulated", n_real, n_sim);
    if (n_real != n_sim)
        return ats_err_set(err, ATS_EINVAL, "round counts differ: real %zu, sim %zu (rounds are matched by index: "
                           "both runs must execute the same request)", n_real, n_sim);
    memset(out, 0, sizeof *out);
    size_t nd = 0;
    for (size_t i = 0; i < n_real; i++) {
        if (real[i].phase != sim[i].phase || real[i].tokens != sim[i].tokens)
            return ats_err_set(err, ATS_EINVAL, "round %zu: real %s of %d tokens, sim %s of %d tokens (the runs "
                               "executed different requests)", i, phase_name(real[i].phase), real[i].tokens,
                               phase_name(sim[i].phase), sim[i].tokens);
        if (real[i].phase == ATSC_PHASE_DECODE) {
            if (!(real[i].latency_s > 0))
                return ats_err_set(err, ATS_EINVAL, "round %zu: real decode latency %g s (must be > 0: the "
                                   "reference of a relative error)", i, real[i].latency_s);
            nd++;
        }
    }
    if (nd == 0)
        return ats_err_set(err, ATS_EINVAL, "no decode round among the %zu rounds (the window ends in the prefill): "
                           "TPOT undefined", n_real);
    double *e = malloc(nd * sizeof *e);
    if (!e) return ats_err_set(err, ATS_ENOMEM, "atsc_val_compare: out of memory");
    double sr = 0, ss = 0, pr = 0, ps = 0, se = 0;
    size_t k = 0;
    for (size_t i = 0; i < n_real; i++) {
        out->real_resched += real[i].rescheduled != 0;
        out->sim_resched += sim[i].rescheduled != 0;
        if (real[i].phase == ATSC_PHASE_DECODE) {
            sr += real[i].latency_s;
            ss += sim[i].latency_s;
            e[k] = 100.0 * fabs(sim[i].latency_s - real[i].latency_s) / real[i].latency_s;
            se += e[k++];
        } else {
            out->prefill_tok += real[i].tokens;
            pr += real[i].latency_s;
            ps += sim[i].latency_s;
        }
    }
    out->n_rounds = (int64_t)n_real;
    out->n_decode = (int64_t)nd;
    out->real_tpot_s = sr / (double)nd;
    out->sim_tpot_s = ss / (double)nd;
    out->mean_tpot_error_pct = 100.0 * (out->sim_tpot_s - out->real_tpot_s) / out->real_tpot_s;
    out->mape_pct = se / (double)nd;
    gsl_sort(e, 1, nd);
    out->p90_round_error_pct = gsl_stats_quantile_from_sorted_data(e, 1, nd, 0.9);
    free(e);
    out->real_prefill_tok_s = out->prefill_tok && pr > 0 ? (double)out->prefill_tok / pr : NAN;
    out->sim_prefill_tok_s = out->prefill_tok && ps > 0 ? (double)out->prefill_tok / ps : NAN;
    return ATS_OK;
}

/* Index of the segment of window time t: the last boundary <= t (bounds[0] = 0). */
static size_t seg_of(const double *bounds, size_t nb, double t)
{
    size_t k = 0;
    while (k + 1 < nb && bounds[k + 1] <= t) k++;
    return k;
}

enum ats_status atsc_val_segments(const atsc_round_row *real, const atsc_round_row *sim, size_t n,
                                  const atsc_trace *window, double tol, atsc_val_seg *segs, size_t max,
                                  size_t *n_segs, ats_err *err)
{
    if (!real || !sim || !window || !n_segs || (max && !segs) || n == 0)
        return ats_err_set(err, ATS_EINVAL, "atsc_val_segments: NULL argument or no round");
    /* boundaries: 0, then every sample that changes some resource by more than tol */
    size_t nb = 1;
    for (size_t i = 1; i < window->n; i++)
        nb += fabs(window->cpu_avail[i] - window->cpu_avail[i - 1]) > tol ||
              fabs(window->gpu_avail[i] - window->gpu_avail[i - 1]) > tol ||
              fabs(window->pcie_avail[i] - window->pcie_avail[i - 1]) > tol;
    double *b = malloc(nb * sizeof *b), *sr = calloc(nb, sizeof *sr), *ss = calloc(nb, sizeof *ss);
    int64_t *cnt = calloc(nb, sizeof *cnt);
    size_t *first = malloc(nb * sizeof *first);
    if (!b || !sr || !ss || !cnt || !first) {
        free(b), free(sr), free(ss), free(cnt), free(first);
        return ats_err_set(err, ATS_ENOMEM, "atsc_val_segments: out of memory");
    }
    b[0] = 0.0;
    first[0] = 0;
    for (size_t i = 1, k = 1; i < window->n; i++)
        if (fabs(window->cpu_avail[i] - window->cpu_avail[i - 1]) > tol ||
            fabs(window->gpu_avail[i] - window->gpu_avail[i - 1]) > tol ||
            fabs(window->pcie_avail[i] - window->pcie_avail[i - 1]) > tol)
            b[k] = window->t_s[i], first[k++] = i;
    for (size_t i = 0; i < n; i++) {
        if (real[i].phase != ATSC_PHASE_DECODE || sim[i].phase != ATSC_PHASE_DECODE) continue;
        size_t kr = seg_of(b, nb, real[i].t_start_s - real[0].t_start_s);
        size_t ks = seg_of(b, nb, sim[i].t_start_s - sim[0].t_start_s);
        if (kr != ks) continue;
        cnt[kr]++;
        sr[kr] += real[i].latency_s;
        ss[kr] += sim[i].latency_s;
    }
    for (size_t k = 0; k < nb && k < max; k++) {
        atsc_val_seg *g = &segs[k];
        memset(g, 0, sizeof *g);
        g->t0_s = b[k];
        g->t1_s = k + 1 < nb ? b[k + 1] : INFINITY;
        g->cpu = window->cpu_avail[first[k]];
        g->gpu = window->gpu_avail[first[k]];
        g->pcie = window->pcie_avail[first[k]];
        g->n_decode = cnt[k];
        g->real_tpot_s = cnt[k] ? sr[k] / (double)cnt[k] : NAN;
        g->sim_tpot_s = cnt[k] ? ss[k] / (double)cnt[k] : NAN;
        g->mean_tpot_error_pct = cnt[k] && sr[k] > 0 ? 100.0 * (ss[k] - sr[k]) / sr[k] : NAN;
    }
    *n_segs = nb;
    free(b), free(sr), free(ss), free(cnt), free(first);
    return ATS_OK;
}

/* ---------------------------------------------------------------- validation file */

static hid_t seg_type(void)
{
    hid_t s = H5Tcopy(H5T_C_S1);
    H5Tset_size(s, ATSC_RESULTS_NAME_LEN);
    H5Tset_strpad(s, H5T_STR_NULLTERM);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(atsc_val_seg));
#define M(f, ty) H5Tinsert(t, #f, HOFFSET(atsc_val_seg, f), ty)
    M(policy, s);
    M(t0_s, H5T_NATIVE_DOUBLE);
    M(t1_s, H5T_NATIVE_DOUBLE);
    M(cpu, H5T_NATIVE_DOUBLE);
    M(gpu, H5T_NATIVE_DOUBLE);
    M(pcie, H5T_NATIVE_DOUBLE);
    M(n_decode, H5T_NATIVE_INT64);
    M(real_tpot_s, H5T_NATIVE_DOUBLE);
    M(sim_tpot_s, H5T_NATIVE_DOUBLE);
    M(mean_tpot_error_pct, H5T_NATIVE_DOUBLE);
#undef M
    H5Tclose(s);
    return t;
}

static hid_t row_type(void)
{
    hid_t s = H5Tcopy(H5T_C_S1);
    H5Tset_size(s, ATSC_RESULTS_NAME_LEN);
    H5Tset_strpad(s, H5T_STR_NULLTERM);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(atsc_val_row));
#define M(name, f, ty) H5Tinsert(t, name, HOFFSET(atsc_val_row, f), ty)
    M("policy", policy, s);
    M("trace", trace, s);
    M("window_start_s", window_start_s, H5T_NATIVE_DOUBLE);
    M("window_end_s", window_end_s, H5T_NATIVE_DOUBLE);
    M("n_rounds", s.n_rounds, H5T_NATIVE_INT64);
    M("n_decode", s.n_decode, H5T_NATIVE_INT64);
    M("prefill_tok", s.prefill_tok, H5T_NATIVE_INT64);
    M("real_tpot_s", s.real_tpot_s, H5T_NATIVE_DOUBLE);
    M("sim_tpot_s", s.sim_tpot_s, H5T_NATIVE_DOUBLE);
    M("mean_tpot_error_pct", s.mean_tpot_error_pct, H5T_NATIVE_DOUBLE);
    M("mape_pct", s.mape_pct, H5T_NATIVE_DOUBLE);
    M("p90_round_error_pct", s.p90_round_error_pct, H5T_NATIVE_DOUBLE);
    M("real_prefill_tok_s", s.real_prefill_tok_s, H5T_NATIVE_DOUBLE);
    M("sim_prefill_tok_s", s.sim_prefill_tok_s, H5T_NATIVE_DOUBLE);
    M("real_resched", s.real_resched, H5T_NATIVE_INT32);
    M("sim_resched", s.sim_resched, H5T_NATIVE_INT32);
#undef M
    H5Tclose(s);
    return t;
}

static int str_attr(hid_t obj, const char *name, const char *val)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, &val);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return e < 0 ? -1 : 0;
}

/* Copies the root of results file src_path (checked by atsc_results_read first) to group `dst` of out. */
static enum ats_status copy_tree(hid_t out, const char *path, const char *src_path, const char *dst, ats_err *err)
{
    atsc_results_file *chk = NULL;
    enum ats_status st = atsc_results_read(src_path, &chk, err);
    atsc_results_file_free(chk);
    if (st) return st;
    hid_t src = H5Fopen(src_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (src < 0) return ats_err_set(err, ATS_EINVAL, "%s: cannot open as HDF5", src_path);
    herr_t e = H5Ocopy(src, "/", out, dst, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(src);
    if (e < 0) return ats_err_set(err, ATS_EINVAL, "%s: copying %s into group '%s' failed", path, src_path, dst);
    /* the single-run shortcuts /rounds, /ops are soft links to "/runs/...": dangling under /real */
    static const char *const links[2] = {"rounds", "ops"};
    for (int i = 0; i < 2; i++) {
        char l[64];
        snprintf(l, sizeof l, "%s/%s", dst, links[i]);
        if (H5Lexists(out, l, H5P_DEFAULT) > 0 && H5Ldelete(out, l, H5P_DEFAULT) < 0)
            return ats_err_set(err, ATS_EINVAL, "%s: removing link '%s' failed", path, l);
    }
    return ATS_OK;
}

/* A 1-D compound table `name` of n rows of type t (closed here) in f. */
static enum ats_status write_table(hid_t f, const char *path, const char *name, hid_t t, const void *rows, size_t n,
                                   ats_err *err)
{
    hsize_t dims = n;
    hid_t ds = H5Screate_simple(1, &dims, NULL);
    hid_t dpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dpl, 0);
    hid_t d = H5Dcreate2(f, name, t, ds, H5P_DEFAULT, dpl, H5P_DEFAULT);
    H5Pclose(dpl);
    herr_t e = d < 0 ? -1 : (n ? H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) : 0);
    int why = e < 0 ? atsc_h5_errno() : 0;
    if (d >= 0 && H5Dclose(d) < 0 && e >= 0) e = -1, why = atsc_h5_errno();
    H5Sclose(ds);
    H5Tclose(t);
    if (e < 0)
        return ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (dataset '/%s')", path, strerror(why ? why : EIO), name);
    return ATS_OK;
}

enum ats_status atsc_val_write(const char *path, const char *real_path, const char *sim_path,
                               const char *config_json, const atsc_val_row *rows, size_t n,
                               const atsc_val_seg *segs, size_t n_segs, ats_err *err)
{
    if (!path || !real_path || !sim_path || (n && !rows) || (n_segs && !segs))
        return ats_err_set(err, ATS_EINVAL, "atsc_val_write: NULL argument");
    json_error_t je;
    json_t *cj = json_loads(config_json ? config_json : "{}", 0, &je);
    if (!cj) return ats_err_set(err, ATS_EINVAL, "%s: attribute 'config': not valid JSON (%s)", path, je.text);
    json_decref(cj);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    atsc_out *o = NULL;
    enum ats_status st = atsc_out_open(path, &o, err);
    if (st) return st;
    hid_t f = H5Fcreate(atsc_out_tmp(o), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        atsc_out_abort(o);
        return ats_err_set(err, ATS_EINVAL, "%s: cannot create (HDF5 refused the file)", path);
    }
    int ver = ATSC_VAL_SCHEMA_VERSION;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "schema_version", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT);
    int bad = a < 0 || H5Awrite(a, H5T_NATIVE_INT, &ver) < 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    bad |= str_attr(f, "schema", "ats-validation") | str_attr(f, "version", ATS_VERSION_STRING) |
           str_attr(f, "commit", ATS_GIT_COMMIT) | str_attr(f, "config", config_json ? config_json : "{}");
    if (bad) st = ats_err_set(err, ATS_EINVAL, "%s: writing the root attributes failed", path);
    if (!st) st = copy_tree(f, path, real_path, "real", err);
    if (!st) st = copy_tree(f, path, sim_path, "sim", err);
    if (!st) st = write_table(f, path, "validation", row_type(), rows, n, err);
    if (!st) st = write_table(f, path, "validation_segments", seg_type(), segs, n_segs, err);
    if (st) atsc_h5_discard(f); /* removed below: its close must not fail (h5write.h) */
    if (H5Fclose(f) < 0 && !st) {
        int e = atsc_h5_errno();
        st = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (closing)", path, e ? strerror(e) : "disk full?");
    }
    if (st) {
        atsc_out_abort(o);
        return st;
    }
    return atsc_out_commit(o, err);
}

/* Opens validation file path (schema and version checked) into *f. */
static enum ats_status open_checked(const char *path, hid_t *f, ats_err *err)
{
    *f = -1;
    enum ats_status st = atsc_in_readable(path, "validation file", err);
    if (st) return st;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(path) <= 0) return ats_err_set(err, ATS_EINVAL, "%s: not an HDF5 file", path);
    hid_t h = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (h < 0) return ats_err_set(err, ATS_EINVAL, "%s: cannot open as HDF5", path);
    char schema[32] = "";
    int ver = -1;
    if (H5Aexists(h, "schema") > 0) {
        hid_t a = H5Aopen(h, "schema", H5P_DEFAULT);
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8); /* as written (str_attr): HDF5 converts no ASCII <-> UTF-8 */
        char *v = NULL;
        if (a >= 0 && H5Aread(a, t, &v) >= 0 && v) {
            snprintf(schema, sizeof schema, "%s", v);
            H5free_memory(v);
        }
        H5Tclose(t);
        if (a >= 0) H5Aclose(a);
    }
    if (H5Aexists(h, "schema_version") > 0) {
        hid_t a = H5Aopen(h, "schema_version", H5P_DEFAULT);
        if (a < 0 || H5Aread(a, H5T_NATIVE_INT, &ver) < 0) ver = -1;
        if (a >= 0) H5Aclose(a);
    }
    if (strcmp(schema, "ats-validation") != 0)
        st = ats_err_set(err, ATS_EINVAL, "%s: attribute '/schema': '%s' (must be 'ats-validation')", path, schema);
    else if (ver != ATSC_VAL_SCHEMA_VERSION)
        st = ats_err_set(err, ATS_EINVAL, "%s: attribute '/schema_version': %d (this program reads %d)", path, ver,
                         ATSC_VAL_SCHEMA_VERSION);
    if (st) H5Fclose(h);
    else *f = h;
    return st;
}

/* The whole 1-D compound table `name` of f as rows of type t (closed here) and size rsz: *rows new. */
static enum ats_status read_table(hid_t f, const char *path, const char *name, hid_t t, size_t rsz, void **rows,
                                  size_t *n, ats_err *err)
{
    *rows = NULL;
    *n = 0;
    enum ats_status st = ATS_OK;
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Tclose(t);
        return ats_err_set(err, ATS_EINVAL, "%s: dataset '/%s': missing", path, name);
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t ft = d < 0 ? -1 : H5Dget_type(d);
    hid_t sp = d < 0 ? -1 : H5Dget_space(d);
    hsize_t dims = 0;
    if (d < 0 || H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1) {
        st = ats_err_set(err, ATS_EINVAL, "%s: dataset '/%s': not a 1-D compound table", path, name);
    } else {
        for (int i = 0; i < H5Tget_nmembers(t) && !st; i++) {
            char *m = H5Tget_member_name(t, (unsigned)i);
            if (H5Tget_member_index(ft, m) < 0)
                st = ats_err_set(err, ATS_EINVAL, "%s: dataset '/%s': member '%s' missing", path, name, m);
            H5free_memory(m);
        }
        H5Sget_simple_extent_dims(sp, &dims, NULL);
    }
    if (!st) {
        *rows = calloc(dims ? dims : 1, rsz);
        if (!*rows) st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
        else if (dims && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, *rows) < 0)
            st = ats_err_set(err, ATS_EINVAL, "%s: dataset '/%s': cannot read", path, name);
        else *n = (size_t)dims;
    }
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    if (st) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return st;
}

enum ats_status atsc_val_read(const char *path, atsc_results_file **real, atsc_results_file **sim,
                              atsc_val_row **rows, size_t *n, ats_err *err)
{
    if (!path || !rows || !n) return ats_err_set(err, ATS_EINVAL, "atsc_val_read: NULL argument");
    if (real) *real = NULL;
    if (sim) *sim = NULL;
    *rows = NULL;
    *n = 0;
    hid_t f;
    enum ats_status st = open_checked(path, &f, err);
    if (st) return st;
    void *r = NULL;
    st = read_table(f, path, "validation", row_type(), sizeof(atsc_val_row), &r, n, err);
    H5Fclose(f);
    *rows = r;
    for (size_t i = 0; !st && i < *n; i++)
        (*rows)[i].policy[ATSC_RESULTS_NAME_LEN - 1] = (*rows)[i].trace[ATSC_RESULTS_NAME_LEN - 1] = '\0';
    if (!st && real) st = atsc_results_read_group(path, "/real", real, err);
    if (!st && sim) st = atsc_results_read_group(path, "/sim", sim, err);
    if (st) {
        free(*rows);
        *rows = NULL;
        *n = 0;
        if (real) atsc_results_file_free(*real), *real = NULL;
        if (sim) atsc_results_file_free(*sim), *sim = NULL;
    }
    return st;
}

enum ats_status atsc_val_read_segments(const char *path, atsc_val_seg **segs, size_t *n, ats_err *err)
{
    if (!path || !segs || !n) return ats_err_set(err, ATS_EINVAL, "atsc_val_read_segments: NULL argument");
    *segs = NULL;
    *n = 0;
    hid_t f;
    enum ats_status st = open_checked(path, &f, err);
    if (st) return st;
    void *r = NULL;
    st = read_table(f, path, "validation_segments", seg_type(), sizeof(atsc_val_seg), &r, n, err);
    H5Fclose(f);
    *segs = r;
    for (size_t i = 0; !st && i < *n; i++) (*segs)[i].policy[ATSC_RESULTS_NAME_LEN - 1] = '\0';
    return st;
}

/* ---------------------------------------------------------------- summary.json */

/* The list in path into *out (new; a missing file: an empty list), or ATS_EINVAL naming what is wrong. */
static enum ats_status load_list(const char *path, json_t **out, ats_err *err)
{
    *out = NULL;
    enum ats_status st = ATS_OK;
    json_t *list = NULL;
    if (access(path, F_OK) == 0) {
        json_error_t je;
        list = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        if (!list)
            st = ats_err_set(err, ATS_EINVAL, "%s: not JSON (line %d: %s); left as it is", path, je.line, je.text);
        else if (!json_is_array(list))
            st = ats_err_set(err, ATS_EINVAL, "%s: top level is a JSON %s, not a list of records; left as it is", path,
                             json_is_object(list) ? "object" : "value");
        for (size_t i = 0; !st && i < json_array_size(list); i++)
            if (!json_is_object(json_array_get(list, i)))
                st = ats_err_set(err, ATS_EINVAL, "%s: entry %zu is not a record (JSON object); left as it is", path, i);
    } else if (errno != ENOENT) {
        st = ats_err_set(err, ATS_EINVAL, "%s: %s", path, strerror(errno));
    } else {
        list = json_array();
        if (!list) st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    }
    if (st) json_decref(list);
    else *out = list;
    return st;
}

enum ats_status atsc_val_summary_check(const char *path, ats_err *err)
{
    if (!path) return ats_err_set(err, ATS_EINVAL, "atsc_val_summary_check: NULL argument");
    enum ats_status st = atsc_out_check(path, err);
    json_t *list = NULL;
    if (!st) st = load_list(path, &list, err);
    json_decref(list);
    return st;
}

enum ats_status atsc_val_summary_append(const char *path, const json_t *records, ats_err *err)
{
    if (!path || !records) return ats_err_set(err, ATS_EINVAL, "atsc_val_summary_append: NULL argument");
    if (!json_is_array(records)) return ats_err_set(err, ATS_EINVAL, "%s: the new records are not a list", path);
    for (size_t i = 0; i < json_array_size(records); i++)
        if (!json_is_object(json_array_get(records, i)))
            return ats_err_set(err, ATS_EINVAL, "%s: new record %zu is not an object", path, i);
    enum ats_status st = atsc_out_check(path, err);
    if (st) return st;
    /* the lock: the directory (the file itself is replaced by the rename) */
    char *dup = strdup(path);
    if (!dup) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    int dfd = open(dirname(dup), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dup);
    if (dfd < 0 || flock(dfd, LOCK_EX) != 0) {
        int e = errno;
        if (dfd >= 0) close(dfd);
        return ats_err_set(err, ATS_EINVAL, "%s: cannot lock its directory: %s", path, strerror(e));
    }
    json_t *list = NULL;
    st = load_list(path, &list, err);
    for (size_t i = 0; !st && i < json_array_size(records); i++)
        if (json_array_append(list, json_array_get(records, i)) != 0)
            st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    if (!st) st = atsc_out_write_json(path, list, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6), err);
    json_decref(list);
    flock(dfd, LOCK_UN);
    close(dfd);
    return st;
}

/* ---------------------------------------------------------------- trace windows */

enum ats_status atsc_val_trace_window(const atsc_trace *tr, const char *name, double t0_s, double t1_s,
                                      atsc_trace **out, ats_err *err)
{
    if (!tr || !out) return ats_err_set(err, ATS_EINVAL, "atsc_val_trace_window: NULL argument");
    *out = NULL;
    if (!(isfinite(t0_s) && isfinite(t1_s) && t0_s >= 0))
        return ats_err_set(err, ATS_EINVAL, "window %g:%g s: need finite times, start >= 0", t0_s, t1_s);
    if (t1_s == t0_s)
        return ats_err_set(err, ATS_EINVAL, "window %g:%g s: zero-length window", t0_s, t1_s);
    if (t1_s < t0_s) return ats_err_set(err, ATS_EINVAL, "window %g:%g s: ends before it starts", t0_s, t1_s);
    size_t i0 = atsc_trace_index(tr, t0_s), n = 2;
    for (size_t i = i0 + 1; i < tr->n && tr->t_s[i] < t1_s; i++) n++;
    atsc_trace *w = atsc_trace_new(n);
    if (!w) return ats_err_set(err, ATS_ENOMEM, "window of a trace: out of memory");
    size_t k = 0;
    for (size_t i = i0; k < n - 1; i++, k++) {
        w->t_s[k] = k == 0 ? 0.0 : tr->t_s[i] - t0_s;
        w->cpu_avail[k] = tr->cpu_avail[i];
        w->gpu_avail[k] = tr->gpu_avail[i];
        w->pcie_avail[k] = tr->pcie_avail[i];
    }
    /* the value in force just before t1 once more at the window's end (its duration; it holds beyond) */
    w->t_s[n - 1] = t1_s - t0_s;
    w->cpu_avail[n - 1] = w->cpu_avail[n - 2];
    w->gpu_avail[n - 1] = w->gpu_avail[n - 2];
    w->pcie_avail[n - 1] = w->pcie_avail[n - 2];
    if (!(w->t_s[n - 1] > w->t_s[n - 2])) { /* t1 - t0 rounded onto the last sample's shifted time */
        atsc_trace_free(w);
        return ats_err_set(err, ATS_EINVAL, "window %.17g:%.17g s: too short to hold its last sample", t0_s, t1_s);
    }
    snprintf(w->source, sizeof w->source, "window %.9g:%.9g s of %.900s", t0_s, t1_s, name ? name : "a trace");
    snprintf(w->machine, sizeof w->machine, "%s", tr->machine);
    snprintf(w->description, sizeof w->description, "trace time %.9g s is time 0 here; %.900s", t0_s, tr->description);
    *out = w;
    return ATS_OK;
}

size_t atsc_val_trace_changes(const atsc_trace *tr, double t0_s, double t1_s, double tol)
{
    size_t n = 0;
    for (size_t i = 1; tr && i < tr->n; i++) {
        if (!(tr->t_s[i] > t0_s && tr->t_s[i] < t1_s)) continue;
        n += fabs(tr->cpu_avail[i] - tr->cpu_avail[i - 1]) > tol || fabs(tr->gpu_avail[i] - tr->gpu_avail[i - 1]) > tol ||
             fabs(tr->pcie_avail[i] - tr->pcie_avail[i - 1]) > tol;
    }
    return n;
}
