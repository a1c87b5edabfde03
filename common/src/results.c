/* Results HDF5 writer and reader (see atsc/results.h; layout table in common/README.md). */
#include "atsc/results.h"

#include <errno.h>
#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ats_version.h"
#include "atsc/outfile.h"
#include "h5write.h"

#define ROUND_BUF 4096
#define OP_BUF 16384

/* ---------------------------------------------------------------- HDF5 types */

static hid_t round_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(atsc_round_row));
#define M(f, ty) H5Tinsert(t, #f, HOFFSET(atsc_round_row, f), ty)
    M(index, H5T_NATIVE_INT64);
    M(phase, H5T_NATIVE_INT32);
    M(tokens, H5T_NATIVE_INT32);
    M(t_start_s, H5T_NATIVE_DOUBLE);
    M(latency_s, H5T_NATIVE_DOUBLE);
    M(n_promoted, H5T_NATIVE_INT32);
    M(rescheduled, H5T_NATIVE_INT32);
    M(bytes_h2d, H5T_NATIVE_UINT64);
    M(load_cpu, H5T_NATIVE_DOUBLE);
    M(load_gpu, H5T_NATIVE_DOUBLE);
    M(load_pcie, H5T_NATIVE_DOUBLE);
#undef M
    return t;
}

static hid_t op_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(atsc_op_row));
#define M(f, ty) H5Tinsert(t, #f, HOFFSET(atsc_op_row, f), ty)
    M(round, H5T_NATIVE_INT64);
    M(op, H5T_NATIVE_INT32);
    M(backend, H5T_NATIVE_INT32);
    M(t_start_s, H5T_NATIVE_DOUBLE);
    M(t_end_s, H5T_NATIVE_DOUBLE);
    M(has_xfer, H5T_NATIVE_INT32);
    M(copy_engine, H5T_NATIVE_INT32);
    M(xfer_start_s, H5T_NATIVE_DOUBLE);
    M(xfer_end_s, H5T_NATIVE_DOUBLE);
#undef M
    return t;
}

static hid_t sweep_type(void)
{
    hid_t s = H5Tcopy(H5T_C_S1);
    H5Tset_size(s, ATSC_RESULTS_NAME_LEN);
    H5Tset_strpad(s, H5T_STR_NULLTERM);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(atsc_sweep_row));
#define M(f, ty) H5Tinsert(t, #f, HOFFSET(atsc_sweep_row, f), ty)
    M(trace, s);
    M(policy, s);
    M(eps, H5T_NATIVE_DOUBLE);
    M(interval, H5T_NATIVE_DOUBLE);
    M(interval_in_tpot, H5T_NATIVE_INT32);
    M(n_resched, H5T_NATIVE_INT32);
    M(tpot_mean_s, H5T_NATIVE_DOUBLE);
    M(tpot_p50_s, H5T_NATIVE_DOUBLE);
    M(tpot_p99_s, H5T_NATIVE_DOUBLE);
    M(decode_tok_s, H5T_NATIVE_DOUBLE);
    M(ttft_s, H5T_NATIVE_DOUBLE);
#undef M
    H5Tclose(s);
    return t;
}

/* The type stored in the file: the memory type without its padding, so that the file holds exactly
 * the members of the schema and HDF5 converts member by member (by name) on write and read. */
static hid_t file_type_of(hid_t mem)
{
    hid_t t = H5Tcopy(mem);
    size_t sum = 0;
    int n = H5Tget_nmembers(mem);
    for (int i = 0; i < n; i++) {
        hid_t m = H5Tget_member_type(mem, (unsigned)i);
        sum += H5Tget_size(m);
        H5Tclose(m);
    }
    /* The row structs have no padding today; then the copy is identical to the memory type and
     * HDF5 writes without converting (H5Tpack would mark it different and cost ~5x). */
    if (sum != H5Tget_size(mem)) H5Tpack(t);
    return t;
}

static hid_t vlstr_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

/* ---------------------------------------------------------------- row checks */

/* Checks one round; on failure writes "field: value (why)" into why and returns 0. */
static int check_round(const atsc_round_row *r, int64_t prev_index, int have_prev, char *why,
                       size_t len)
{
    if (have_prev && r->index <= prev_index)
        return snprintf(why, len, "index: %lld (must be > previous %lld)", (long long)r->index,
                        (long long)prev_index), 0;
    if (r->index < 0) return snprintf(why, len, "index: %lld (must be >= 0)", (long long)r->index), 0;
    if (r->phase != ATSC_PHASE_PREFILL && r->phase != ATSC_PHASE_DECODE)
        return snprintf(why, len, "phase: %d (must be 0 prefill or 1 decode)", r->phase), 0;
    if (r->tokens < 1) return snprintf(why, len, "tokens: %d (must be >= 1)", r->tokens), 0;
    if (!isfinite(r->t_start_s))
        return snprintf(why, len, "t_start_s: %g (must be finite)", r->t_start_s), 0;
    if (!(isfinite(r->latency_s) && r->latency_s >= 0))
        return snprintf(why, len, "latency_s: %g (must be finite and >= 0)", r->latency_s), 0;
    if (r->n_promoted < 0) return snprintf(why, len, "n_promoted: %d (must be >= 0)", r->n_promoted), 0;
    if (r->rescheduled != 0 && r->rescheduled != 1)
        return snprintf(why, len, "rescheduled: %d (must be 0 or 1)", r->rescheduled), 0;
    const double lf[3] = {r->load_cpu, r->load_gpu, r->load_pcie};
    static const char *const ln[3] = {"load_cpu", "load_gpu", "load_pcie"};
    for (int i = 0; i < 3; i++)
        if (!(isfinite(lf[i]) && lf[i] > 0))
            return snprintf(why, len, "%s: %g (must be finite and > 0)", ln[i], lf[i]), 0;
    return 1;
}

static int check_op(const atsc_op_row *o, char *why, size_t len)
{
    if (o->round < 0) return snprintf(why, len, "round: %lld (must be >= 0)", (long long)o->round), 0;
    if (o->op < 0) return snprintf(why, len, "op: %d (must be >= 0)", o->op), 0;
    if (o->backend != 0 && o->backend != 1)
        return snprintf(why, len, "backend: %d (must be 0 CPU or 1 GPU)", o->backend), 0;
    if (!isfinite(o->t_start_s))
        return snprintf(why, len, "t_start_s: %g (must be finite)", o->t_start_s), 0;
    if (!(isfinite(o->t_end_s) && o->t_end_s >= o->t_start_s))
        return snprintf(why, len, "t_end_s: %g (must be finite and >= t_start_s %g)", o->t_end_s,
                        o->t_start_s), 0;
    if (o->has_xfer != 0 && o->has_xfer != 1)
        return snprintf(why, len, "has_xfer: %d (must be 0 or 1)", o->has_xfer), 0;
    if (o->has_xfer) {
        if (o->copy_engine < 0)
            return snprintf(why, len, "copy_engine: %d (must be >= 0)", o->copy_engine), 0;
        if (!isfinite(o->xfer_start_s))
            return snprintf(why, len, "xfer_start_s: %g (must be finite)", o->xfer_start_s), 0;
        if (!(isfinite(o->xfer_end_s) && o->xfer_end_s >= o->xfer_start_s))
            return snprintf(why, len, "xfer_end_s: %g (must be finite and >= xfer_start_s %g)",
                            o->xfer_end_s, o->xfer_start_s), 0;
    } else if (!isnan(o->xfer_start_s) || !isnan(o->xfer_end_s)) {
        return snprintf(why, len, "xfer_start_s: %g (must be NaN when has_xfer is 0)",
                        isnan(o->xfer_start_s) ? o->xfer_end_s : o->xfer_start_s), 0;
    }
    return 1;
}

static int valid_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= ATSC_RESULTS_NAME_LEN) return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == '+'))
            return 0;
    }
    return strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int json_ok(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &je);
    if (!j) return 0;
    json_decref(j);
    return 1;
}

/* ---------------------------------------------------------------- writer */

typedef struct {
    char name[ATSC_RESULTS_NAME_LEN];
    char policy[ATSC_RESULTS_NAME_LEN];
    int with_ops;
} run_info;

struct atsc_results {
    char *path;
    atsc_out *out;   /* the temporary (outfile.h); NULL after commit/abort */
    const char *tmp; /* its name, owned by out */
    hid_t file;
    hid_t t_round, t_op;   /* memory types */
    hid_t ft_round, ft_op; /* file types (packed) */
    /* current run */
    int in_run;
    hid_t grp, d_rounds, d_ops;
    hsize_t n_rounds_written, n_ops_written;
    int64_t last_index;
    int have_last;
    atsc_round_row *rbuf;
    size_t nr;
    atsc_op_row *obuf;
    size_t no;
    run_info *runs;
    size_t n_runs, cap_runs;
    int sweep_written;
    int io_errno; /* errno of the first failed write (EIO when HDF5 did not say), 0 while none: the
                     file is then discarded (h5write.h) and atsc_results_close fails */
};

static enum ats_status write_str_attr(hid_t obj, const char *name, const char *val)
{
    hid_t t = vlstr_type(), sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    const char *v = val ? val : "";
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, &v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return e < 0 ? ATS_EINVAL : ATS_OK;
}

static enum ats_status write_num_attr(hid_t obj, const char *name, hid_t type, const void *val)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, type, val);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return e < 0 ? ATS_EINVAL : ATS_OK;
}

/* An empty, extensible, chunked 1-D dataset of `type` at `name` in `loc`. */
static hid_t create_table(hid_t loc, const char *name, hid_t type, hsize_t chunk)
{
    hsize_t dims = 0, maxdims = H5S_UNLIMITED;
    hid_t sp = H5Screate_simple(1, &dims, &maxdims);
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 1, &chunk);
    H5Pset_obj_track_times(pl, 0); /* no modification times: the same results make the same bytes */
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    H5Pclose(pl);
    H5Sclose(sp);
    return d;
}

/* Appends n rows of `type` to the extensible dataset d that holds *written rows. 0, or the errno of
 * the failed write (EIO when HDF5 does not say). */
static int append_rows(hid_t d, hid_t type, const void *rows, size_t n, hsize_t *written)
{
    if (n == 0) return 0;
    hsize_t newsize = *written + n, start = *written, count = n;
    if (H5Dset_extent(d, &newsize) < 0) return atsc_h5_errno() ? atsc_h5_errno() : EIO;
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(1, &count, NULL);
    herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
    if (e >= 0) e = H5Dwrite(d, type, ms, fs, H5P_DEFAULT, rows);
    int why = e < 0 ? atsc_h5_errno() : 0; /* before the next HDF5 call clears the error stack */
    H5Sclose(ms);
    H5Sclose(fs);
    if (e >= 0) *written = newsize;
    return e >= 0 ? 0 : why ? why : EIO;
}

static const char *cur_run(const atsc_results *w)
{
    return w->n_runs ? w->runs[w->n_runs - 1].name : "?";
}

/* A write failed with errno e: the file is discarded (closing it must not fail again, h5write.h) and
 * the message is "<path>: write failed: <reason> (<where>)". */
static enum ats_status io_failed(atsc_results *w, int e, const char *where, ats_err *err)
{
    if (!w->io_errno) w->io_errno = e ? e : EIO;
    atsc_h5_discard(w->file);
    return ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (%s)", w->path, strerror(e ? e : EIO), where);
}

static enum ats_status flush_rounds(atsc_results *w, ats_err *err)
{
    int e = append_rows(w->d_rounds, w->t_round, w->rbuf, w->nr, &w->n_rounds_written);
    if (e) {
        char where[ATSC_RESULTS_NAME_LEN + 32];
        snprintf(where, sizeof where, "dataset '/runs/%s/rounds'", cur_run(w));
        return io_failed(w, e, where, err);
    }
    w->nr = 0;
    return ATS_OK;
}

static enum ats_status flush_ops(atsc_results *w, ats_err *err)
{
    int e = append_rows(w->d_ops, w->t_op, w->obuf, w->no, &w->n_ops_written);
    if (e) {
        char where[ATSC_RESULTS_NAME_LEN + 32];
        snprintf(where, sizeof where, "dataset '/runs/%s/ops'", cur_run(w));
        return io_failed(w, e, where, err);
    }
    w->no = 0;
    return ATS_OK;
}

/* Closes dataset d of the current run ("rounds" or "ops"), which writes its cached chunks: a failure
 * there is a failed write (st set when it is the first error). */
static void close_table(atsc_results *w, hid_t d, const char *name, enum ats_status *st, ats_err *err)
{
    if (H5Dclose(d) >= 0) return;
    int e = atsc_h5_errno();
    char where[ATSC_RESULTS_NAME_LEN + 32];
    snprintf(where, sizeof where, "dataset '/runs/%s/%s'", cur_run(w), name);
    if (!*st) *st = io_failed(w, e, where, err);
    else atsc_h5_discard(w->file);
}

static enum ats_status end_run(atsc_results *w, ats_err *err)
{
    if (!w->in_run) return ATS_OK;
    enum ats_status st = flush_rounds(w, err);
    if (!st && w->d_ops >= 0) st = flush_ops(w, err);
    close_table(w, w->d_rounds, "rounds", &st, err);
    if (w->d_ops >= 0) close_table(w, w->d_ops, "ops", &st, err);
    H5Gclose(w->grp);
    w->d_rounds = w->d_ops = w->grp = -1;
    w->in_run = 0;
    return st;
}

static void free_writer(atsc_results *w)
{
    free(w->rbuf);
    free(w->obuf);
    free(w->runs);
    free(w->path);
    atsc_out_abort(w->out); /* no-op after commit */
    free(w);
}

enum ats_status atsc_results_open(const char *path, const atsc_results_meta *meta,
                                  atsc_results **out, ats_err *err)
{
    if (!path || !meta || !out) return ats_err_set(err, ATS_EINVAL, "atsc_results_open: NULL argument");
    *out = NULL;
    const char *cfg = meta->config_json ? meta->config_json : "{}";
    if (!json_ok(cfg))
        return ats_err_set(err, ATS_EINVAL, "%s: attribute 'config': not valid JSON", path);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    atsc_results *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path)) ||
        !(w->rbuf = malloc(ROUND_BUF * sizeof *w->rbuf)) || !(w->obuf = malloc(OP_BUF * sizeof *w->obuf))) {
        if (w) free_writer(w);
        return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    }
    enum ats_status ost = atsc_out_open(path, &w->out, err);
    if (ost) {
        free_writer(w);
        return ost;
    }
    w->tmp = atsc_out_tmp(w->out);
    w->grp = w->d_rounds = w->d_ops = -1;
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        ats_err_set(err, ATS_EINVAL, "%s: cannot create (HDF5 refused the file)", path);
        free_writer(w);
        return ATS_EINVAL;
    }
    w->t_round = round_type();
    w->t_op = op_type();
    w->ft_round = file_type_of(w->t_round);
    w->ft_op = file_type_of(w->t_op);
    int ver = ATSC_RESULTS_SCHEMA_VERSION;
    enum ats_status st = ATS_OK;
    if (write_str_attr(w->file, "schema", "ats-results") ||
        write_num_attr(w->file, "schema_version", H5T_NATIVE_INT, &ver) ||
        write_str_attr(w->file, "producer", meta->producer) ||
        write_str_attr(w->file, "version", ATS_VERSION_STRING) ||
        write_str_attr(w->file, "commit", ATS_GIT_COMMIT) ||
        write_str_attr(w->file, "config", cfg) ||
        write_num_attr(w->file, "seed", H5T_NATIVE_UINT64, &meta->seed) ||
        write_str_attr(w->file, "model", meta->model) || write_str_attr(w->file, "hw", meta->hw) ||
        write_str_attr(w->file, "trace", meta->trace))
        st = ats_err_set(err, ATS_EINVAL, "%s: writing the root attributes failed", w->path);
    hid_t gpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_obj_track_times(gpl, 0);
    hid_t g = st ? -1 : H5Gcreate2(w->file, "runs", H5P_DEFAULT, gpl, H5P_DEFAULT);
    H5Pclose(gpl);
    if (!st && g < 0) st = ats_err_set(err, ATS_EINVAL, "%s: cannot create group '/runs'", w->path);
    if (g >= 0) H5Gclose(g);
    if (st) {
        atsc_results_abort(w);
        return st;
    }
    *out = w;
    return ATS_OK;
}

enum ats_status atsc_results_begin_run(atsc_results *w, const char *run_name, const char *policy,
                                       const char *run_config_json, int with_ops, ats_err *err)
{
    if (!w) return ats_err_set(err, ATS_EINVAL, "atsc_results_begin_run: NULL handle");
    if (!valid_name(run_name))
        return ats_err_set(err, ATS_EINVAL, "%s: run name '%s' (must be 1-%d of [A-Za-z0-9._+-])",
                           w->path, run_name ? run_name : "(null)", ATSC_RESULTS_NAME_LEN - 1);
    if (!valid_name(policy))
        return ats_err_set(err, ATS_EINVAL, "%s: run '%s': policy name '%s' (must be 1-%d of "
                           "[A-Za-z0-9._+-])", w->path, run_name, policy ? policy : "(null)",
                           ATSC_RESULTS_NAME_LEN - 1);
    for (size_t i = 0; i < w->n_runs; i++)
        if (strcmp(w->runs[i].name, run_name) == 0)
            return ats_err_set(err, ATS_EINVAL, "%s: run '%s' written twice", w->path, run_name);
    const char *cfg = run_config_json ? run_config_json : "{}";
    if (!json_ok(cfg))
        return ats_err_set(err, ATS_EINVAL, "%s: run '%s': attribute 'config': not valid JSON",
                           w->path, run_name);
    enum ats_status st = end_run(w, err);
    if (st) return st;
    if (w->n_runs == w->cap_runs) {
        size_t cap = w->cap_runs ? 2 * w->cap_runs : 8;
        run_info *r = realloc(w->runs, cap * sizeof *r);
        if (!r) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", w->path);
        w->runs = r;
        w->cap_runs = cap;
    }
    char gname[ATSC_RESULTS_NAME_LEN + 8];
    snprintf(gname, sizeof gname, "/runs/%s", run_name);
    hid_t gpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_obj_track_times(gpl, 0);
    w->grp = H5Gcreate2(w->file, gname, H5P_DEFAULT, gpl, H5P_DEFAULT);
    H5Pclose(gpl);
    if (w->grp < 0) return ats_err_set(err, ATS_EINVAL, "%s: cannot create group '%s'", w->path, gname);
    run_info *ri = &w->runs[w->n_runs++];
    snprintf(ri->name, sizeof ri->name, "%s", run_name);
    snprintf(ri->policy, sizeof ri->policy, "%s", policy);
    ri->with_ops = with_ops != 0;
    w->in_run = 1;
    w->n_rounds_written = w->n_ops_written = 0;
    w->nr = w->no = 0;
    w->have_last = 0;
    if (write_str_attr(w->grp, "policy", policy) || write_str_attr(w->grp, "config", cfg))
        return ats_err_set(err, ATS_EINVAL, "%s: group '%s': writing attributes failed", w->path, gname);
    w->d_rounds = create_table(w->grp, "rounds", w->ft_round, 1024);
    if (w->d_rounds < 0)
        return ats_err_set(err, ATS_EINVAL, "%s: cannot create dataset '%s/rounds'", w->path, gname);
    if (with_ops) {
        w->d_ops = create_table(w->grp, "ops", w->ft_op, 8192);
        if (w->d_ops < 0)
            return ats_err_set(err, ATS_EINVAL, "%s: cannot create dataset '%s/ops'", w->path, gname);
    }
    return ATS_OK;
}

enum ats_status atsc_results_append_rounds(atsc_results *w, const atsc_round_row *rows, size_t n,
                                           ats_err *err)
{
    if (!w || (n && !rows)) return ats_err_set(err, ATS_EINVAL, "atsc_results_append_rounds: NULL argument");
    if (!w->in_run) return ats_err_set(err, ATS_EINVAL, "%s: rounds appended outside a run", w->path);
    char why[160];
    for (size_t i = 0; i < n; i++) {
        if (!check_round(&rows[i], w->last_index, w->have_last, why, sizeof why))
            return ats_err_set(err, ATS_EINVAL, "%s: dataset '/runs/%s/rounds' row %llu: %s", w->path,
                               cur_run(w), (unsigned long long)(w->n_rounds_written + w->nr), why);
        w->last_index = rows[i].index;
        w->have_last = 1;
        w->rbuf[w->nr++] = rows[i];
        if (w->nr == ROUND_BUF) {
            enum ats_status st = flush_rounds(w, err);
            if (st) return st;
        }
    }
    return ATS_OK;
}

enum ats_status atsc_results_append_ops(atsc_results *w, const atsc_op_row *rows, size_t n,
                                        ats_err *err)
{
    if (!w || (n && !rows)) return ats_err_set(err, ATS_EINVAL, "atsc_results_append_ops: NULL argument");
    if (!w->in_run || w->d_ops < 0)
        return ats_err_set(err, ATS_EINVAL, "%s: ops appended to run '%s' begun without ops",
                           w->path, w->in_run ? cur_run(w) : "(none)");
    char why[160];
    for (size_t i = 0; i < n; i++) {
        if (!check_op(&rows[i], why, sizeof why))
            return ats_err_set(err, ATS_EINVAL, "%s: dataset '/runs/%s/ops' row %llu: %s", w->path,
                               cur_run(w), (unsigned long long)(w->n_ops_written + w->no), why);
        w->obuf[w->no++] = rows[i];
        if (w->no == OP_BUF) {
            enum ats_status st = flush_ops(w, err);
            if (st) return st;
        }
    }
    return ATS_OK;
}

enum ats_status atsc_results_write_sweep(atsc_results *w, const atsc_sweep_row *rows, size_t n,
                                         ats_err *err)
{
    if (!w || (n && !rows)) return ats_err_set(err, ATS_EINVAL, "atsc_results_write_sweep: NULL argument");
    if (w->sweep_written) return ats_err_set(err, ATS_EINVAL, "%s: dataset '/sweep' written twice", w->path);
    for (size_t i = 0; i < n; i++) {
        const atsc_sweep_row *r = &rows[i];
        if (!memchr(r->trace, 0, sizeof r->trace) || !r->trace[0] ||
            !memchr(r->policy, 0, sizeof r->policy) || !r->policy[0])
            return ats_err_set(err, ATS_EINVAL, "%s: dataset '/sweep' row %zu: trace/policy name empty "
                               "or longer than %d bytes", w->path, i, ATSC_RESULTS_NAME_LEN - 1);
        if (!isfinite(r->eps) || !isfinite(r->interval))
            return ats_err_set(err, ATS_EINVAL, "%s: dataset '/sweep' row %zu: eps %g, interval %g "
                               "(must be finite)", w->path, i, r->eps, r->interval);
    }
    hid_t t = sweep_type(), ft = file_type_of(t);
    hsize_t dims = n;
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t dpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dpl, 0); /* no modification time: one process and MPI ranks write the same bytes */
    hid_t d = H5Dcreate2(w->file, "sweep", ft, sp, H5P_DEFAULT, dpl, H5P_DEFAULT);
    H5Pclose(dpl);
    herr_t e = d < 0 ? -1 : (n ? H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) : 0);
    int why = e < 0 ? atsc_h5_errno() : 0; /* before the next HDF5 call clears the error stack */
    if (e < 0) atsc_h5_discard(w->file);
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    H5Tclose(ft);
    H5Tclose(t);
    if (e < 0) return io_failed(w, why, "dataset '/sweep'", err);
    w->sweep_written = 1;
    return ATS_OK;
}

const char *atsc_results_tmp_path(const atsc_results *w) { return w ? w->tmp : NULL; }

static void close_handles(atsc_results *w)
{
    if (w->in_run) {
        if (w->d_rounds >= 0) H5Dclose(w->d_rounds);
        if (w->d_ops >= 0) H5Dclose(w->d_ops);
        if (w->grp >= 0) H5Gclose(w->grp);
        w->in_run = 0;
    }
    H5Tclose(w->t_round);
    H5Tclose(w->t_op);
    H5Tclose(w->ft_round);
    H5Tclose(w->ft_op);
}

enum ats_status atsc_results_close(atsc_results *w, ats_err *err)
{
    if (!w) return ats_err_set(err, ATS_EINVAL, "atsc_results_close: NULL handle");
    enum ats_status st = end_run(w, err);
    if (!st) {
        /* run list and policies, comma-separated, in write order */
        size_t cap = w->n_runs * ATSC_RESULTS_NAME_LEN + 1;
        char *names = calloc(cap, 1), *pols = calloc(cap, 1);
        if (!names || !pols) {
            st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", w->path);
        } else {
            for (size_t i = 0; i < w->n_runs; i++) {
                if (i) { strcat(names, ","); strcat(pols, ","); }
                strcat(names, w->runs[i].name);
                strcat(pols, w->runs[i].policy);
            }
            if (write_str_attr(w->file, "runs", names) || write_str_attr(w->file, "policy", pols))
                st = ats_err_set(err, ATS_EINVAL, "%s: writing attributes 'runs'/'policy' failed", w->path);
        }
        free(names);
        free(pols);
    }
    if (!st && w->n_runs == 1) {
        char target[ATSC_RESULTS_NAME_LEN + 16];
        snprintf(target, sizeof target, "/runs/%s/rounds", w->runs[0].name);
        herr_t e = H5Lcreate_soft(target, w->file, "rounds", H5P_DEFAULT, H5P_DEFAULT);
        if (e >= 0 && w->runs[0].with_ops) {
            snprintf(target, sizeof target, "/runs/%s/ops", w->runs[0].name);
            e = H5Lcreate_soft(target, w->file, "ops", H5P_DEFAULT, H5P_DEFAULT);
        }
        if (e < 0) st = ats_err_set(err, ATS_EINVAL, "%s: cannot create links '/rounds', '/ops'", w->path);
    }
    if (!st && w->io_errno) /* reported earlier, and the caller went on */
        st = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s", w->path, strerror(w->io_errno));
    if (st) atsc_h5_discard(w->file); /* removed below: its close must not fail (h5write.h) */
    close_handles(w);
    if (H5Fclose(w->file) < 0 && !st) {
        int e = atsc_h5_errno();
        st = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (closing)", w->path, e ? strerror(e) : "disk full?");
    }
    if (!st) {
        st = atsc_out_commit(w->out, err); /* fsync + rename; frees out */
        w->out = NULL;
    }
    free_writer(w); /* aborts (removes) the temporary after a failure */
    return st;
}

void atsc_results_abort(atsc_results *w)
{
    if (!w) return;
    atsc_h5_discard(w->file); /* removed below: its close must not fail (h5write.h) */
    close_handles(w);
    H5Fclose(w->file);
    free_writer(w);
}

/* ---------------------------------------------------------------- reader */

typedef struct {
    const char *file;
    ats_err *err;
    const char *root; /* "" for the file's root, else the group ("/real"): prefixes every path */
} rctx;

/* Reads string attribute `name` of obj (variable or fixed length) into a new string. */
static enum ats_status read_str_attr(rctx *c, hid_t obj, const char *where, const char *name,
                                     char **out)
{
    *out = NULL;
    if (H5Aexists(obj, name) <= 0)
        return ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%s%s': missing", c->file, where, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t ft = H5Aget_type(a);
    hid_t sp = H5Aget_space(a);
    enum ats_status st = ATS_OK;
    if (H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) {
        st = ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%s%s': not a scalar string", c->file,
                         where, name);
    } else if (H5Tis_variable_str(ft) > 0) {
        hid_t mt = vlstr_type();
        char *v = NULL;
        if (H5Aread(a, mt, &v) < 0 || !v) {
            st = ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%s%s': cannot read", c->file, where, name);
        } else {
            *out = strdup(v);
            H5free_memory(v);
            if (!*out) st = ats_err_set(c->err, ATS_ENOMEM, "%s: out of memory", c->file);
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(ft);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1);
        char *v = calloc(n + 2, 1);
        if (!v) st = ats_err_set(c->err, ATS_ENOMEM, "%s: out of memory", c->file);
        else if (H5Aread(a, mt, v) < 0)
            st = ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%s%s': cannot read", c->file, where, name);
        if (st) free(v);
        else *out = v;
        H5Tclose(mt);
    }
    H5Sclose(sp);
    H5Tclose(ft);
    H5Aclose(a);
    return st;
}

static enum ats_status read_int_attr(rctx *c, hid_t obj, const char *name, hid_t mt, void *out)
{
    if (H5Aexists(obj, name) <= 0)
        return ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%s/%s': missing", c->file, c->root, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t ft = H5Aget_type(a);
    enum ats_status st = ATS_OK;
    if (H5Tget_class(ft) != H5T_INTEGER || H5Aread(a, mt, out) < 0)
        st = ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%s/%s': not an integer", c->file, c->root, name);
    H5Tclose(ft);
    H5Aclose(a);
    return st;
}

/* Checks that the file type of dataset d has every member of the memory type mt, with the same
 * class (integer/float/string). */
static enum ats_status check_members(rctx *c, hid_t d, hid_t mt, const char *dpath)
{
    hid_t ft = H5Dget_type(d);
    enum ats_status st = ATS_OK;
    if (H5Tget_class(ft) != H5T_COMPOUND) {
        st = ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': not a compound table", c->file, dpath);
    } else {
        int n = H5Tget_nmembers(mt);
        for (int i = 0; i < n && !st; i++) {
            char *name = H5Tget_member_name(mt, (unsigned)i);
            int j = H5Tget_member_index(ft, name);
            if (j < 0)
                st = ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': member '%s' missing", c->file,
                                 dpath, name);
            else if (H5Tget_member_class(ft, (unsigned)j) != H5Tget_member_class(mt, (unsigned)i))
                st = ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': member '%s' has the wrong type",
                                 c->file, dpath, name);
            else if (H5Tget_member_class(mt, (unsigned)i) != H5T_STRING) {
                hid_t a = H5Tget_member_type(ft, (unsigned)j), b = H5Tget_member_type(mt, (unsigned)i);
                if (H5Tget_size(a) != H5Tget_size(b))
                    st = ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': member '%s' is %zu bytes "
                                     "(schema: %zu)", c->file, dpath, name, H5Tget_size(a), H5Tget_size(b));
                H5Tclose(a);
                H5Tclose(b);
            }
            H5free_memory(name);
        }
    }
    H5Tclose(ft);
    return st;
}

/* Reads a whole 1-D compound dataset into a new array of rows of size rsz. */
static enum ats_status read_table(rctx *c, hid_t loc, const char *dpath, hid_t mt, size_t rsz,
                                  void **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (H5Lexists(loc, dpath, H5P_DEFAULT) <= 0)
        return ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': missing", c->file, dpath);
    hid_t d = H5Dopen2(loc, dpath, H5P_DEFAULT);
    if (d < 0) return ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': cannot open", c->file, dpath);
    enum ats_status st = check_members(c, d, mt, dpath);
    hid_t sp = H5Dget_space(d);
    if (!st && H5Sget_simple_extent_ndims(sp) != 1)
        st = ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': rank %d (must be 1)", c->file, dpath,
                         H5Sget_simple_extent_ndims(sp));
    if (!st) {
        hsize_t dims;
        H5Sget_simple_extent_dims(sp, &dims, NULL);
        *rows = malloc(dims ? dims * rsz : 1);
        if (!*rows) st = ats_err_set(c->err, ATS_ENOMEM, "%s: dataset '%s': out of memory", c->file, dpath);
        else if (dims && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, *rows) < 0)
            st = ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s': cannot read", c->file, dpath);
        *n = (size_t)dims;
    }
    H5Sclose(sp);
    H5Dclose(d);
    if (st) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return st;
}

void atsc_results_file_free(atsc_results_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_runs; i++) {
        free(f->runs[i].config_json);
        free(f->runs[i].rounds);
        free(f->runs[i].ops);
    }
    free(f->runs);
    free(f->sweep);
    free(f->producer); free(f->version); free(f->commit); free(f->config_json);
    free(f->model); free(f->hw); free(f->trace); free(f->policy);
    free(f);
}

const atsc_results_run *atsc_results_find_run(const atsc_results_file *f, const char *name)
{
    for (size_t i = 0; f && name && i < f->n_runs; i++)
        if (strcmp(f->runs[i].name, name) == 0) return &f->runs[i];
    return NULL;
}

static enum ats_status read_run(rctx *c, hid_t file, atsc_results_run *r, hid_t t_round, hid_t t_op)
{
    char g[ATSC_RESULTS_NAME_LEN + 80], dp[ATSC_RESULTS_NAME_LEN + 96], why[160];
    snprintf(g, sizeof g, "%s/runs/%s", c->root, r->name);
    if (H5Lexists(file, g, H5P_DEFAULT) <= 0)
        return ats_err_set(c->err, ATS_EINVAL, "%s: group '%s' (listed in attribute 'runs'): missing",
                           c->file, g);
    hid_t grp = H5Gopen2(file, g, H5P_DEFAULT);
    if (grp < 0) return ats_err_set(c->err, ATS_EINVAL, "%s: '%s': not a group", c->file, g);
    char where[ATSC_RESULTS_NAME_LEN + 96];
    snprintf(where, sizeof where, "%s/", g);
    char *pol = NULL;
    enum ats_status st = read_str_attr(c, grp, where, "policy", &pol);
    if (!st) {
        if (!valid_name(pol))
            st = ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%spolicy': '%s' (not a policy name)",
                             c->file, where, pol);
        else
            snprintf(r->policy, sizeof r->policy, "%s", pol);
    }
    free(pol);
    if (!st) st = read_str_attr(c, grp, where, "config", &r->config_json);
    if (!st && !json_ok(r->config_json))
        st = ats_err_set(c->err, ATS_EINVAL, "%s: attribute '%sconfig': not valid JSON", c->file, where);
    H5Gclose(grp);
    if (st) return st;
    snprintf(dp, sizeof dp, "%s/rounds", g);
    void *rows;
    if ((st = read_table(c, file, dp, t_round, sizeof(atsc_round_row), &rows, &r->n_rounds))) return st;
    r->rounds = rows;
    for (size_t i = 0; i < r->n_rounds; i++)
        if (!check_round(&r->rounds[i], i ? r->rounds[i - 1].index : 0, i > 0, why, sizeof why))
            return ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s' row %zu: %s", c->file, dp, i, why);
    snprintf(dp, sizeof dp, "%s/ops", g);
    if (H5Lexists(file, dp, H5P_DEFAULT) > 0) {
        r->has_ops = 1;
        if ((st = read_table(c, file, dp, t_op, sizeof(atsc_op_row), &rows, &r->n_ops))) return st;
        r->ops = rows;
        for (size_t i = 0; i < r->n_ops; i++)
            if (!check_op(&r->ops[i], why, sizeof why))
                return ats_err_set(c->err, ATS_EINVAL, "%s: dataset '%s' row %zu: %s", c->file, dp, i, why);
    }
    return ATS_OK;
}

enum ats_status atsc_results_read(const char *path, atsc_results_file **out, ats_err *err)
{
    return atsc_results_read_group(path, "/", out, err);
}

enum ats_status atsc_results_read_group(const char *path, const char *group, atsc_results_file **out,
                                        ats_err *err)
{
    if (!path || !out || !group || group[0] != '/')
        return ats_err_set(err, ATS_EINVAL, "atsc_results_read_group: NULL argument or group not absolute");
    *out = NULL;
    const char *root = strcmp(group, "/") == 0 ? "" : group; /* message prefix of every path */
    enum ats_status rst = atsc_in_readable(path, "results file", err);
    if (rst != ATS_OK) return rst;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(path) <= 0) return ats_err_set(err, ATS_EINVAL, "%s: not an HDF5 file", path);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return ats_err_set(err, ATS_EINVAL, "%s: cannot open as HDF5", path);
    hid_t top = root[0] && H5Lexists(file, root, H5P_DEFAULT) <= 0 ? -1 : H5Oopen(file, group, H5P_DEFAULT);
    if (top < 0) {
        H5Fclose(file);
        return ats_err_set(err, ATS_EINVAL, "%s: group '%s': missing", path, group);
    }
    rctx c = {path, err, root};
    char where[160];
    snprintf(where, sizeof where, "%s/", root);
    atsc_results_file *f = calloc(1, sizeof *f);
    hid_t t_round = round_type(), t_op = op_type(), t_sweep = sweep_type();
    enum ats_status st = f ? ATS_OK : ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    char *schema = NULL, *runs = NULL;
    if (!st) st = read_str_attr(&c, top, where, "schema", &schema);
    if (!st && strcmp(schema, "ats-results") != 0)
        st = ats_err_set(err, ATS_EINVAL, "%s: attribute '%sschema': '%s' (must be 'ats-results')", path,
                         where, schema);
    if (!st) st = read_int_attr(&c, top, "schema_version", H5T_NATIVE_INT, &f->schema_version);
    if (!st && f->schema_version != ATSC_RESULTS_SCHEMA_VERSION)
        st = ats_err_set(err, ATS_EINVAL, "%s: attribute '%sschema_version': %d (this program reads %d)",
                         path, where, f->schema_version, ATSC_RESULTS_SCHEMA_VERSION);
    if (!st) st = read_int_attr(&c, top, "seed", H5T_NATIVE_UINT64, &f->seed);
    struct { const char *name; char **dst; } sa[] = {
        {"producer", &f->producer}, {"version", &f->version}, {"commit", &f->commit},
        {"config", &f->config_json}, {"model", &f->model}, {"hw", &f->hw}, {"trace", &f->trace},
        {"policy", &f->policy}, {"runs", &runs}};
    for (size_t i = 0; i < sizeof sa / sizeof sa[0] && !st; i++)
        st = read_str_attr(&c, top, where, sa[i].name, sa[i].dst);
    if (!st && !json_ok(f->config_json))
        st = ats_err_set(err, ATS_EINVAL, "%s: attribute '%sconfig': not valid JSON", path, where);
    /* runs: comma-separated names */
    if (!st && runs[0]) {
        size_t n = 1;
        for (const char *p = runs; *p; p++) n += *p == ',';
        f->runs = calloc(n, sizeof *f->runs);
        if (!f->runs) st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
        char *save = NULL;
        for (char *tok = st ? NULL : strtok_r(runs, ",", &save); tok && !st; tok = strtok_r(NULL, ",", &save)) {
            if (!valid_name(tok)) {
                st = ats_err_set(err, ATS_EINVAL, "%s: attribute '%sruns': entry %zu '%s' is not a run name",
                                 path, where, f->n_runs, tok);
                break;
            }
            atsc_results_run *r = &f->runs[f->n_runs++];
            snprintf(r->name, sizeof r->name, "%s", tok);
            st = read_run(&c, file, r, t_round, t_op);
        }
    }
    char sweep_path[180];
    snprintf(sweep_path, sizeof sweep_path, "%s/sweep", root);
    if (!st && H5Lexists(file, sweep_path, H5P_DEFAULT) > 0) {
        void *rows;
        f->has_sweep = 1;
        st = read_table(&c, file, sweep_path, t_sweep, sizeof(atsc_sweep_row), &rows, &f->n_sweep);
        if (!st) f->sweep = rows;
        for (size_t i = 0; !st && i < f->n_sweep; i++) {
            atsc_sweep_row *r = &f->sweep[i];
            r->trace[sizeof r->trace - 1] = r->policy[sizeof r->policy - 1] = '\0';
            if (!isfinite(r->eps) || !isfinite(r->interval))
                st = ats_err_set(err, ATS_EINVAL, "%s: dataset '%s' row %zu: eps %g, interval %g "
                                 "(must be finite)", path, sweep_path, i, r->eps, r->interval);
        }
    }
    free(schema);
    free(runs);
    H5Tclose(t_round);
    H5Tclose(t_op);
    H5Tclose(t_sweep);
    H5Oclose(top);
    H5Fclose(file);
    if (st) {
        atsc_results_file_free(f);
        return st;
    }
    *out = f;
    return ATS_OK;
}
