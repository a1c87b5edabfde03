/*
 * common/src/trace_io.c — load traces in HDF5 (schema in atsc/trace_io.h and DESIGN.md).
 * HDF5's automatic error stack printing is switched off around every call into the library; every
 * failure becomes one message naming the file, the dataset or attribute, and the index.
 */
#include "atsc/trace_io.h"
#include "atsc/outfile.h"
#include "h5write.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

static const char *const res_names[ATSC_RES_COUNT] = {"cpu", "gpu", "pcie"};
static const char *const res_dsets[ATSC_RES_COUNT] = {"/load/cpu_avail", "/load/gpu_avail",
                                                      "/load/pcie_avail"};
static const char *const attr_names[3] = {"source", "machine", "description"};

atsc_trace *atsc_trace_new(size_t n)
{
    if (n == 0 || n > ((size_t)-1) / (4 * sizeof(double))) return NULL;
    atsc_trace *tr = calloc(1, sizeof *tr);
    double *buf = calloc(4 * n, sizeof(double));
    if (!tr || !buf) {
        free(tr);
        free(buf);
        return NULL;
    }
    tr->n = n;
    tr->t_s = buf; /* one block; the other arrays point into it */
    tr->cpu_avail = buf + n;
    tr->gpu_avail = buf + 2 * n;
    tr->pcie_avail = buf + 3 * n;
    return tr;
}

void atsc_trace_free(atsc_trace *tr)
{
    if (!tr) return;
    free(tr->t_s);
    free(tr);
}

double *atsc_trace_res(atsc_trace *tr, enum atsc_resource r)
{
    switch (r) {
    case ATSC_RES_CPU: return tr->cpu_avail;
    case ATSC_RES_GPU: return tr->gpu_avail;
    case ATSC_RES_PCIE: return tr->pcie_avail;
    default: break;
    }
    ATS_ASSERT(!"bad resource");
    return NULL;
}

static const double *res_c(const atsc_trace *tr, enum atsc_resource r)
{
    return atsc_trace_res((atsc_trace *)tr, r);
}

const char *atsc_resource_name(enum atsc_resource r)
{
    return (unsigned)r < ATSC_RES_COUNT ? res_names[r] : "?";
}

const char *atsc_resource_dataset(enum atsc_resource r)
{
    return (unsigned)r < ATSC_RES_COUNT ? res_dsets[r] : "?";
}

enum ats_status atsc_trace_validate(const atsc_trace *tr, const char *name, ats_err *err)
{
    const char *nm = name ? name : "trace";
    if (!tr || tr->n == 0) return ats_err_set(err, ATS_EINVAL, "%s: /load/t_s: empty (need >= 1 sample)", nm);
    for (size_t i = 0; i < tr->n; i++) {
        double t = tr->t_s[i];
        if (!isfinite(t))
            return ats_err_set(err, ATS_EINVAL, "%s: /load/t_s[%zu] = %g: time must be finite", nm, i, t);
        if (i == 0 && t != 0.0)
            return ats_err_set(err, ATS_EINVAL, "%s: /load/t_s[0] = %.17g: first time must be 0", nm, t);
        if (i > 0 && !(t > tr->t_s[i - 1]))
            return ats_err_set(err, ATS_EINVAL,
                               "%s: /load/t_s[%zu] = %.17g: time must be strictly increasing (t_s[%zu] = %.17g)",
                               nm, i, t, i - 1, tr->t_s[i - 1]);
    }
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        const double *a = res_c(tr, (enum atsc_resource)r);
        for (size_t i = 0; i < tr->n; i++)
            if (!(a[i] > 0.0 && a[i] <= 1.0)) /* also catches NaN */
                return ats_err_set(err, ATS_EINVAL, "%s: %s[%zu] = %.17g: availability must be in (0, 1]",
                                   nm, res_dsets[r], i, a[i]);
    }
    return ATS_OK;
}

/* ---------------------------------------------------------------- HDF5 ---------------------- */

static void h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* "float32", "int64", "string", ... for messages about an HDF5 datatype. */
static void type_name(hid_t ty, char *buf, size_t len)
{
    if (ty < 0) {
        snprintf(buf, len, "unreadable type");
        return;
    }
    size_t sz = H5Tget_size(ty);
    switch (H5Tget_class(ty)) {
    case H5T_FLOAT: snprintf(buf, len, "float%zu", 8 * sz); break;
    case H5T_INTEGER:
        snprintf(buf, len, "%sint%zu", H5Tget_sign(ty) == H5T_SGN_NONE ? "u" : "", 8 * sz);
        break;
    case H5T_STRING: snprintf(buf, len, "string"); break;
    case H5T_COMPOUND: snprintf(buf, len, "compound"); break;
    case H5T_ENUM: snprintf(buf, len, "enum"); break;
    case H5T_ARRAY: snprintf(buf, len, "array"); break;
    default: snprintf(buf, len, "HDF5 type class %d, %zu bytes", (int)H5Tget_class(ty), sz); break;
    }
}

/* Why a dataset could not be read: a filter (compression) this HDF5 library lacks, or NULL. */
static const char *missing_filter(hid_t d, char *buf, size_t len)
{
    hid_t pl = H5Dget_create_plist(d);
    if (pl < 0) return NULL;
    const char *res = NULL;
    int nf = H5Pget_nfilters(pl);
    for (int i = 0; i < nf && !res; i++) {
        unsigned flags = 0, cd[8];
        size_t ncd = 8;
        char name[64] = "";
        H5Z_filter_t id = H5Pget_filter2(pl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        if (id >= 0 && H5Zfilter_avail(id) <= 0) {
            snprintf(buf, len, "compressed with filter %d%s%s%s, which this HDF5 library cannot decode "
                     "(rewrite it uncompressed, e.g. h5repack -f NONE)", (int)id, *name ? " (" : "", name,
                     *name ? ")" : "");
            res = buf;
        }
    }
    H5Pclose(pl);
    return res;
}

/* Refuses members of /load other than t_s and the three availabilities (DESIGN.md: anything else
 * is refused rather than ignored). */
typedef struct {
    const char *path;
    ats_err *err;
    int bad;
} extra_ctx;

static herr_t extra_cb(hid_t g, const char *name, const H5L_info_t *info, void *user)
{
    (void)g;
    (void)info;
    extra_ctx *x = user;
    if (strcmp(name, "t_s") == 0) return 0;
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if (strcmp(name, res_dsets[r] + strlen("/load/")) == 0) return 0;
    ats_err_set(x->err, ATS_EINVAL, "%s: /load/%.60s: unexpected member (a trace has only t_s, cpu_avail, "
                "gpu_avail, pcie_avail)", x->path, name);
    x->bad = 1;
    return 1;
}

/* Reads a 1-D float64 dataset of the expected length (*n == 0: take its length) into a new array. */
static enum ats_status read_f64(hid_t file, const char *path, const char *dset, size_t *n, double **out,
                                ats_err *err)
{
    *out = NULL;
    enum ats_status st = ATS_EINVAL;
    hid_t d = -1, sp = -1, ty = -1;
    htri_t ex = H5Lexists(file, dset, H5P_DEFAULT);
    if (ex <= 0) {
        ats_err_set(err, ATS_EINVAL, "%s: %s: missing dataset", path, dset);
        goto done;
    }
    if ((d = H5Dopen2(file, dset, H5P_DEFAULT)) < 0) {
        ats_err_set(err, ATS_EINVAL, "%s: %s: not a dataset", path, dset);
        goto done;
    }
    ty = H5Dget_type(d);
    if (ty < 0 || H5Tget_class(ty) != H5T_FLOAT || H5Tget_size(ty) != 8) {
        char tn[64];
        type_name(ty, tn, sizeof tn);
        ats_err_set(err, ATS_EINVAL, "%s: %s: %s (must be float64)", path, dset, tn);
        goto done;
    }
    sp = H5Dget_space(d);
    int rank = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    if (rank != 1) {
        ats_err_set(err, ATS_EINVAL, "%s: %s: shape must be 1-D (got rank %d)", path, dset, rank);
        goto done;
    }
    hsize_t dim = 0;
    H5Sget_simple_extent_dims(sp, &dim, NULL);
    if (dim == 0) {
        ats_err_set(err, ATS_EINVAL, "%s: %s: empty (need >= 1 sample)", path, dset);
        goto done;
    }
    if (*n != 0 && dim != (hsize_t)*n) {
        ats_err_set(err, ATS_EINVAL, "%s: %s: length %llu differs from /load/t_s length %zu", path, dset,
                    (unsigned long long)dim, *n);
        goto done;
    }
    double *buf = malloc((size_t)dim * sizeof(double));
    if (!buf) {
        st = ats_err_set(err, ATS_ENOMEM, "%s: %s: out of memory for %llu values", path, dset,
                         (unsigned long long)dim);
        goto done;
    }
    if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        char why[256];
        const char *mf = missing_filter(d, why, sizeof why);
        ats_err_set(err, ATS_EINVAL, "%s: %s: read failed%s%s", path, dset, mf ? ": " : "", mf ? mf : "");
        goto done;
    }
    *n = (size_t)dim;
    *out = buf;
    st = ATS_OK;
done:
    if (ty >= 0) H5Tclose(ty);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    return st;
}

/* Reads a scalar string attribute (fixed or variable length) of `obj` into buf (truncating). */
static enum ats_status read_str_attr(hid_t obj, const char *path, const char *name, char *buf, size_t len,
                                     ats_err *err)
{
    enum ats_status st = ATS_EINVAL;
    hid_t a = -1, ty = -1, mem = -1, sp = -1;
    if (H5Aexists(obj, name) <= 0) {
        ats_err_set(err, ATS_EINVAL, "%s: /load attribute '%s': missing", path, name);
        goto done;
    }
    a = H5Aopen(obj, name, H5P_DEFAULT);
    ty = a < 0 ? -1 : H5Aget_type(a);
    sp = a < 0 ? -1 : H5Aget_space(a);
    if (ty < 0 || H5Tget_class(ty) != H5T_STRING || sp < 0 || H5Sget_simple_extent_npoints(sp) != 1) {
        ats_err_set(err, ATS_EINVAL, "%s: /load attribute '%s': must be a single string", path, name);
        goto done;
    }
    if (H5Tis_variable_str(ty) > 0) {
        char *s = NULL;
        mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, H5T_VARIABLE);
        H5Tset_cset(mem, H5Tget_cset(ty));
        if (H5Aread(a, mem, &s) < 0) {
            ats_err_set(err, ATS_EINVAL, "%s: /load attribute '%s': read failed", path, name);
            goto done;
        }
        snprintf(buf, len, "%s", s ? s : "");
        H5free_memory(s);
    } else {
        size_t sz = H5Tget_size(ty);
        char *tmp = calloc(sz + 1, 1);
        if (!tmp) {
            st = ats_err_set(err, ATS_ENOMEM, "%s: /load attribute '%s': out of memory", path, name);
            goto done;
        }
        mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, sz);
        H5Tset_cset(mem, H5Tget_cset(ty));
        if (H5Aread(a, mem, tmp) < 0) {
            free(tmp);
            ats_err_set(err, ATS_EINVAL, "%s: /load attribute '%s': read failed", path, name);
            goto done;
        }
        snprintf(buf, len, "%s", tmp);
        free(tmp);
    }
    st = ATS_OK;
done:
    if (mem >= 0) H5Tclose(mem);
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    if (a >= 0) H5Aclose(a);
    return st;
}

static char lookup_path[4096], lookup_also[512];

void atsc_trace_lookup_note(const char *path, const char *also)
{
    lookup_path[0] = lookup_also[0] = '\0';
    if (!path || !also || strlen(path) >= sizeof lookup_path) return;
    snprintf(lookup_path, sizeof lookup_path, "%s", path);
    snprintf(lookup_also, sizeof lookup_also, "%s", also);
}

/* " (where else the name was looked for)" when the resolver left a note for this path, else "" */
static void lookup_suffix(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    if (lookup_path[0] && strcmp(path, lookup_path) == 0) snprintf(buf, len, " (%s)", lookup_also);
}

enum ats_status atsc_trace_load(const char *path, atsc_trace **out, ats_err *err)
{
    *out = NULL;
    char also[520];
    lookup_suffix(path, also, sizeof also);
    enum ats_status rst = atsc_in_readable(path, "load trace", err);
    if (rst != ATS_OK) {
        if (also[0] && err) snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), "%s", also);
        return rst;
    }
    h5_quiet();
    if (H5Fis_hdf5(path) <= 0)
        return ats_err_set(err, ATS_EINVAL, "%s: not an HDF5 file%s", path, also);
    atsc_in_note(path); /* never to be replaced by an output of this run */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return ats_err_set(err, ATS_EINVAL, "%s: cannot open as HDF5", path);

    enum ats_status st = ATS_EINVAL;
    hid_t g = -1;
    double *arr[4] = {NULL, NULL, NULL, NULL};
    atsc_trace *tr = NULL;
    if (H5Lexists(f, "/load", H5P_DEFAULT) <= 0 || (g = H5Gopen2(f, "/load", H5P_DEFAULT)) < 0) {
        ats_err_set(err, ATS_EINVAL, "%s: /load: missing group", path);
        goto done;
    }
    {
        extra_ctx x = {path, err, 0};
        hsize_t idx = 0;
        H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, extra_cb, &x);
        if (x.bad) {
            st = ATS_EINVAL;
            goto done;
        }
    }
    size_t n = 0;
    if ((st = read_f64(f, path, "/load/t_s", &n, &arr[0], err)) != ATS_OK) goto done;
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if ((st = read_f64(f, path, res_dsets[r], &n, &arr[1 + r], err)) != ATS_OK) goto done;
    if (!(tr = atsc_trace_new(n))) {
        st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory for %zu samples", path, n);
        goto done;
    }
    memcpy(tr->t_s, arr[0], n * sizeof(double));
    memcpy(tr->cpu_avail, arr[1], n * sizeof(double));
    memcpy(tr->gpu_avail, arr[2], n * sizeof(double));
    memcpy(tr->pcie_avail, arr[3], n * sizeof(double));
    char *dst[3] = {tr->source, tr->machine, tr->description};
    for (int k = 0; k < 3; k++)
        if ((st = read_str_attr(g, path, attr_names[k], dst[k], ATSC_TRACE_ATTR_LEN, err)) != ATS_OK) goto done;
    if ((st = atsc_trace_validate(tr, path, err)) != ATS_OK) goto done;
    *out = tr;
    tr = NULL;
    st = ATS_OK;
done:
    atsc_trace_free(tr);
    for (int k = 0; k < 4; k++) free(arr[k]);
    if (g >= 0) H5Gclose(g);
    H5Fclose(f);
    return st;
}

static int write_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t ty = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int rc = -1;
    if (ty < 0 || sp < 0) goto done;
    H5Tset_size(ty, H5T_VARIABLE);
    H5Tset_cset(ty, H5T_CSET_UTF8);
    a = H5Acreate2(obj, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) goto done;
    if (H5Awrite(a, ty, &value) < 0) goto done;
    rc = 0;
done:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    return rc;
}

/* 0, -1 (HDF5 refused), or the errno of a failed write (the file is then discarded: h5write.h). */
static int write_f64(hid_t file, const char *dset, const double *v, size_t n)
{
    hsize_t dim = (hsize_t)n;
    hid_t sp = H5Screate_simple(1, &dim, NULL), d = -1;
    int rc = -1;
    if (sp < 0) goto done;
    d = H5Dcreate2(file, dset, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0) goto done;
    if (H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
        int e = atsc_h5_errno(); /* before the next HDF5 call clears the error stack */
        if (e) rc = e;
        goto done;
    }
    rc = 0;
done:
    if (rc) atsc_h5_discard(file); /* before any close (h5write.h) */
    if (d >= 0) H5Dclose(d);
    if (sp >= 0) H5Sclose(sp);
    return rc;
}

enum ats_status atsc_trace_save(const atsc_trace *tr, const char *path, ats_err *err)
{
    enum ats_status st = atsc_trace_validate(tr, path, err);
    if (st != ATS_OK) return st;
    h5_quiet();
    atsc_out *out = NULL;
    st = atsc_out_open(path, &out, err);
    if (st) return st;
    st = ATS_EINVAL;
    int why = 0; /* errno of a failed write */
    hid_t f = H5Fcreate(atsc_out_tmp(out), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), g = -1;
    if (f < 0) {
        const int e = atsc_h5_errno(); /* a file size limit of 0, a full disk: EFBIG, ENOSPC */
        if (e) ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (creating the HDF5 file)", path, strerror(e));
        else ats_err_set(err, ATS_EINVAL, "%s: cannot create file (HDF5 refused it)", path);
        goto done;
    }
    g = H5Gcreate2(f, "/load", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *what = "/load";
    if (g < 0) goto fail;
    const double *arrs[4] = {tr->t_s, tr->cpu_avail, tr->gpu_avail, tr->pcie_avail};
    const char *names[4] = {"/load/t_s", res_dsets[0], res_dsets[1], res_dsets[2]};
    for (int k = 0; k < 4; k++) {
        what = names[k];
        int rc = write_f64(f, names[k], arrs[k], tr->n);
        if (rc > 0) why = rc;
        if (rc) goto fail;
    }
    const char *vals[3] = {tr->source, tr->machine, tr->description};
    for (int k = 0; k < 3; k++) {
        what = attr_names[k];
        if (write_str_attr(g, attr_names[k], vals[k]) < 0) goto fail;
    }
    H5Gclose(g);
    g = -1;
    what = "closing";
    if (H5Fclose(f) < 0) {
        f = -1;
        goto fail;
    }
    f = -1;
    st = atsc_out_commit(out, err); /* fsync + rename; frees out */
    out = NULL;
    goto done;
fail:
    if (!why) why = atsc_h5_errno();
    if (why) ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (%s)", path, strerror(why), what);
    else ats_err_set(err, ATS_EINVAL, "%s: %s: write failed", path, what);
    atsc_h5_discard(f); /* removed below: its close must not fail (h5write.h) */
    if (g >= 0) H5Gclose(g);
    g = -1;
    if (f >= 0) H5Fclose(f);
    f = -1;
done:
    if (g >= 0) H5Gclose(g);
    if (f >= 0) H5Fclose(f);
    atsc_out_abort(out); /* removes the temporary after a failure; no-op after commit */
    return st;
}

/* ---------------------------------------------------------------- lookups ------------------- */

size_t atsc_trace_index(const atsc_trace *tr, double t)
{
    if (!(t >= tr->t_s[0])) return 0; /* t < 0 or NaN: the first sample */
    size_t lo = 0, hi = tr->n;        /* invariant: t_s[lo] <= t, and t_s[hi] > t when hi < n */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tr->t_s[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

size_t atsc_trace_at(const atsc_trace *tr, double t, atsc_avail *avail)
{
    size_t i = atsc_trace_index(tr, t);
    avail->cpu = tr->cpu_avail[i];
    avail->gpu = tr->gpu_avail[i];
    avail->pcie = tr->pcie_avail[i];
    return i;
}

double atsc_trace_next_change(const atsc_trace *tr, double t)
{
    if (t < tr->t_s[0]) return tr->t_s[0];
    size_t i = atsc_trace_index(tr, t);
    return i + 1 < tr->n ? tr->t_s[i + 1] : ATSC_TRACE_NEVER;
}

double atsc_trace_duration(const atsc_trace *tr) { return tr->t_s[tr->n - 1]; }

void atsc_trace_stats(const atsc_trace *tr, enum atsc_resource r, double t_end, double *mean, double *min,
                      double *max)
{
    const double *a = res_c(tr, r);
    double acc = 0.0, lo = INFINITY, hi = -INFINITY;
    /* min/max over [0, t_end]: a sample at t_end (the last one when t_end is the duration) holds from
     * there on, so it counts (it was left out: a trace 0.667, 1 showed max 0.667); its weight in the
     * mean over [0, t_end) is 0 */
    for (size_t i = 0; i < tr->n && tr->t_s[i] <= t_end; i++) {
        double t1 = i + 1 < tr->n ? tr->t_s[i + 1] : t_end;
        if (t1 > t_end) t1 = t_end;
        acc += a[i] * (t1 - tr->t_s[i]);
        if (a[i] < lo) lo = a[i];
        if (a[i] > hi) hi = a[i];
    }
    if (t_end <= 0.0) { /* degenerate span: the first sample */
        acc = a[0];
        lo = hi = a[0];
        t_end = 1.0;
    }
    if (mean) *mean = acc / t_end;
    if (min) *min = lo;
    if (max) *max = hi;
}
