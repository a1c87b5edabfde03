/*
 * tests/common/test_trace_io.c — load traces: write/read round trips on fresh random traces, the
 * loader's refusals (each message names file, dataset and index), lookups against a linear scan.
 * Bad files are written with raw HDF5 calls here, bypassing the writer's validation.
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atsc/trace_io.h"
#include "testutil.h"

static char tmpdir[256];

static atsc_trace *random_trace(uint64_t *rng, size_t n)
{
    atsc_trace *tr = atsc_trace_new(n);
    double t = 0.0;
    for (size_t i = 0; i < n; i++) {
        tr->t_s[i] = t;
        t += tu_uniform(rng, 1e-3, 5.0);
        tr->cpu_avail[i] = tu_uniform(rng, 0.01, 1.0);
        tr->gpu_avail[i] = tu_uniform(rng, 0.01, 1.0);
        tr->pcie_avail[i] = (tu_rand(rng) & 3) == 0 ? 1.0 : tu_uniform(rng, 0.01, 1.0);
    }
    snprintf(tr->source, sizeof tr->source, "test_trace_io random n=%zu", n);
    snprintf(tr->machine, sizeof tr->machine, "synthetic");
    snprintf(tr->description, sizeof tr->description, "random piecewise-constant trace, %zu samples", n);
    return tr;
}

static void test_round_trip(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s/rt.h5", tmpdir);
    for (int rep = 0; rep < 20; rep++) {
        size_t n = 1 + (size_t)(tu_rand(rng) % 2000);
        atsc_trace *tr = random_trace(rng, n);
        ats_err err = {{0}};
        CHECK(atsc_trace_save(tr, path, &err) == ATS_OK);
        atsc_trace *back = NULL;
        enum ats_status st = atsc_trace_load(path, &back, &err);
        CHECK_MSG(st == ATS_OK, "%s", err.msg);
        if (st == ATS_OK) {
            CHECK(back->n == n);
            int same = 1;
            for (size_t i = 0; i < n; i++)
                same &= back->t_s[i] == tr->t_s[i] && back->cpu_avail[i] == tr->cpu_avail[i] &&
                        back->gpu_avail[i] == tr->gpu_avail[i] && back->pcie_avail[i] == tr->pcie_avail[i];
            CHECK(same);
            CHECK(strcmp(back->source, tr->source) == 0);
            CHECK(strcmp(back->machine, tr->machine) == 0);
            CHECK(strcmp(back->description, tr->description) == 0);
        }
        atsc_trace_free(back);
        atsc_trace_free(tr);
    }
    /* no temporary left behind */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
}

static void test_lookup(uint64_t *rng)
{
    for (int rep = 0; rep < 50; rep++) {
        size_t n = 1 + (size_t)(tu_rand(rng) % 300);
        atsc_trace *tr = random_trace(rng, n);
        double end = atsc_trace_duration(tr) + 3.0;
        for (int q = 0; q < 200; q++) {
            double t = tu_uniform(rng, -1.0, end);
            if (q < (int)n && (q & 1)) t = tr->t_s[q]; /* exactly on change points too */
            size_t want = 0;                            /* linear scan oracle */
            for (size_t i = 0; i < n; i++)
                if (tr->t_s[i] <= t) want = i;
            atsc_avail a;
            size_t got = atsc_trace_at(tr, t, &a);
            CHECK_MSG(got == want, "t=%.17g got %zu want %zu", t, got, want);
            CHECK(a.cpu == tr->cpu_avail[want] && a.gpu == tr->gpu_avail[want] && a.pcie == tr->pcie_avail[want]);
            double nxt = ATSC_TRACE_NEVER;
            for (size_t i = 0; i < n; i++)
                if (tr->t_s[i] > t) {
                    nxt = tr->t_s[i];
                    break;
                }
            CHECK(atsc_trace_next_change(tr, t) == nxt);
        }
        /* time-weighted mean against a fine Riemann sum */
        double mean, mn, mx, t_end = atsc_trace_duration(tr) + 1.0, acc = 0.0;
        atsc_trace_stats(tr, ATSC_RES_GPU, t_end, &mean, &mn, &mx);
        int steps = 200000;
        for (int k = 0; k < steps; k++) {
            atsc_avail a;
            atsc_trace_at(tr, (k + 0.5) * t_end / steps, &a);
            acc += a.gpu;
        }
        CHECK_NEAR(mean, acc / steps, 2e-3);
        CHECK(mn > 0.0 && mx <= 1.0 && mn <= mean && mean <= mx);
        /* min/max over the samples at times <= t_end, the last sample included (brute force), for the
         * duration, a random end and an end exactly on a sample */
        double ends[3] = {atsc_trace_duration(tr), tu_uniform(rng, 1e-3, atsc_trace_duration(tr) + 2.0),
                          tr->t_s[tu_rand(rng) % n]};
        for (int k = 0; k < 3; k++) {
            double want_lo = INFINITY, want_hi = -INFINITY, e = ends[k] > 0 ? ends[k] : 1.0;
            for (size_t i = 0; i < n; i++)
                if (tr->t_s[i] <= e) {
                    want_lo = fmin(want_lo, tr->gpu_avail[i]);
                    want_hi = fmax(want_hi, tr->gpu_avail[i]);
                }
            atsc_trace_stats(tr, ATSC_RES_GPU, e, NULL, &mn, &mx);
            CHECK_MSG(mn == want_lo && mx == want_hi, "t_end %.17g (duration %.17g, n %zu): min %g max %g, want %g %g",
                      e, atsc_trace_duration(tr), n, mn, mx, want_lo, want_hi);
        }
        atsc_trace_free(tr);
    }
    /* the tester's two-sample trace 0.667 then 1 at 2 s: max 1 (the last sample holds forever), mean
     * over [0, 2) 0.667, over [0, 4) (0.667 * 2 + 1 * 2) / 4 */
    atsc_trace *two = atsc_trace_new(2);
    CHECK(two != NULL);
    if (two) {
        two->t_s[0] = 0, two->t_s[1] = 2;
        for (int i = 0; i < 2; i++) two->cpu_avail[i] = two->pcie_avail[i] = 1.0;
        two->gpu_avail[0] = 0.667, two->gpu_avail[1] = 1.0;
        double mean, mn, mx;
        atsc_trace_stats(two, ATSC_RES_GPU, 2.0, &mean, &mn, &mx);
        CHECK(mn == 0.667 && mx == 1.0 && mean == 0.667);
        atsc_trace_stats(two, ATSC_RES_GPU, 4.0, &mean, &mn, &mx);
        CHECK(mn == 0.667 && mx == 1.0 && fabs(mean - (0.667 * 2 + 2) / 4) < 1e-15);
        atsc_trace_stats(two, ATSC_RES_GPU, 1.0, &mean, &mn, &mx); /* before the last sample */
        CHECK(mn == 0.667 && mx == 0.667 && mean == 0.667);
        atsc_trace_free(two);
    }
}

/* Raw writer for bad files. kind selects the defect. */
enum defect {
    D_NONE, D_T_NONINC, D_T_FIRST, D_NAN, D_ZERO, D_ABOVE1, D_NEG, D_MISSING, D_F32, D_RANK2, D_LEN,
    D_NOGROUP, D_NOATTR, D_INT, D_EXTRA
};

static void write_raw(const char *path, enum defect kind, size_t bad_index)
{
    enum { N = 8 };
    double v[4][N];
    for (int i = 0; i < N; i++) {
        v[0][i] = 0.5 * i;
        v[1][i] = v[2][i] = v[3][i] = 0.5 + 0.05 * i;
    }
    switch (kind) {
    case D_T_NONINC: v[0][bad_index] = v[0][bad_index - 1]; break;
    case D_T_FIRST: v[0][0] = 0.25; break;
    case D_NAN: v[2][bad_index] = NAN; break;
    case D_ZERO: v[3][bad_index] = 0.0; break;
    case D_ABOVE1: v[1][bad_index] = 1.0000001; break;
    case D_NEG: v[2][bad_index] = -0.3; break;
    default: break;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (kind == D_NOGROUP) {
        H5Fclose(f);
        return;
    }
    hid_t g = H5Gcreate2(f, "/load", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *names[4] = {"/load/t_s", "/load/cpu_avail", "/load/gpu_avail", "/load/pcie_avail"};
    for (int k = 0; k < 4; k++) {
        if (kind == D_MISSING && k == 2) continue;
        hsize_t dims[2] = {N, 1};
        if (kind == D_LEN && k == 3) dims[0] = N - 1;
        int rank = (kind == D_RANK2 && k == 1) ? 2 : 1;
        hid_t ftype = (kind == D_F32 && k == 3) ? H5T_IEEE_F32LE : (kind == D_INT && k == 0) ? H5T_STD_I64LE : H5T_IEEE_F64LE;
        hid_t sp = H5Screate_simple(rank, dims, NULL);
        hid_t d = H5Dcreate2(f, names[k], ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v[k]);
        H5Dclose(d);
        H5Sclose(sp);
    }
    if (kind == D_EXTRA) { /* a fourth resource the format does not have */
        hsize_t dims[1] = {N};
        hid_t sp = H5Screate_simple(1, dims, NULL);
        hid_t d = H5Dcreate2(f, "/load/mem_avail", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v[1]);
        H5Dclose(d);
        H5Sclose(sp);
    }
    const char *attrs[3] = {"source", "machine", "description"};
    for (int k = 0; k < 3; k++) {
        if (kind == D_NOATTR && k == 1) continue;
        hid_t ty = H5Tcopy(H5T_C_S1);
        H5Tset_size(ty, 6); /* fixed-length strings: the loader must read both kinds */
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(g, attrs[k], ty, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, ty, "fixed");
        H5Aclose(a);
        H5Sclose(sp);
        H5Tclose(ty);
    }
    H5Gclose(g);
    H5Fclose(f);
}

static void expect_refusal(enum defect kind, size_t idx, const char *must1, const char *must2)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad%d.h5", tmpdir, (int)kind);
    write_raw(path, kind, idx);
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    enum ats_status st = atsc_trace_load(path, &tr, &err);
    CHECK_MSG(st == ATS_EINVAL, "defect %d: status %d (%s)", (int)kind, (int)st, err.msg);
    CHECK(tr == NULL);
    CHECK_MSG(strstr(err.msg, path) != NULL, "defect %d: message lacks the file: %s", (int)kind, err.msg);
    CHECK_MSG(!must1 || strstr(err.msg, must1), "defect %d: message lacks '%s': %s", (int)kind, must1, err.msg);
    CHECK_MSG(!must2 || strstr(err.msg, must2), "defect %d: message lacks '%s': %s", (int)kind, must2, err.msg);
    atsc_trace_free(tr);
    unlink(path);
}

static void test_refusals(uint64_t *rng)
{
    size_t i = 1 + (size_t)(tu_rand(rng) % 7); /* a random bad index in 1..7 */
    char idx[32];
    snprintf(idx, sizeof idx, "[%zu]", i);
    fprintf(stderr, "bad index %zu\n", i);
    expect_refusal(D_T_NONINC, i, "/load/t_s", idx);
    expect_refusal(D_T_FIRST, 0, "/load/t_s", "[0]");
    expect_refusal(D_NAN, i, "/load/gpu_avail", idx);
    expect_refusal(D_ZERO, i, "/load/pcie_avail", idx);
    expect_refusal(D_ABOVE1, i, "/load/cpu_avail", idx);
    expect_refusal(D_NEG, i, "/load/gpu_avail", idx);
    expect_refusal(D_MISSING, 0, "/load/gpu_avail", "missing");
    expect_refusal(D_F32, 0, "/load/pcie_avail", "float32 (must be float64)");
    expect_refusal(D_INT, 0, "/load/t_s", "int64 (must be float64)");
    expect_refusal(D_EXTRA, 0, "/load/mem_avail", "unexpected member");
    expect_refusal(D_RANK2, 0, "/load/cpu_avail", "1-D");
    expect_refusal(D_LEN, 0, "/load/pcie_avail", "length 7");
    expect_refusal(D_NOGROUP, 0, "/load", "missing");
    expect_refusal(D_NOATTR, 0, "machine", "missing");

    /* a valid raw file with fixed-length string attributes loads */
    char path[512];
    snprintf(path, sizeof path, "%s/good.h5", tmpdir);
    write_raw(path, D_NONE, 0);
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    CHECK_MSG(atsc_trace_load(path, &tr, &err) == ATS_OK, "%s", err.msg);
    if (tr) CHECK(tr->n == 8 && strcmp(tr->machine, "fixed") == 0 && tr->t_s[7] == 3.5);
    atsc_trace_free(tr);
    unlink(path);

    /* an lzf-compressed trace (h5py's own filter, id 32000): without the filter plugin the message
       says which filter is missing instead of a bare "read failed" (skipped without h5py) */
    snprintf(path, sizeof path, "%s/lzf.h5", tmpdir);
    {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import h5py, numpy as np\n"
                 "f = h5py.File('%s', 'w'); g = f.create_group('load')\n"
                 "g.create_dataset('t_s', data=np.arange(4.0), compression='lzf')\n"
                 "[g.create_dataset(k, data=np.full(4, 0.5), compression='lzf') for k in ('cpu_avail', 'gpu_avail', 'pcie_avail')]\n"
                 "[g.attrs.__setitem__(a, 'x') for a in ('source', 'machine', 'description')]\" 2>/dev/null",
                 path);
        if (system(cmd) == 0) {
            tr = NULL;
            enum ats_status st = atsc_trace_load(path, &tr, &err);
            if (st == ATS_OK) fprintf(stderr, "lzf trace loaded (this HDF5 has the lzf plugin)\n");
            else CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "/load/t_s") && strstr(err.msg, "filter 32000"),
                           "%s", err.msg);
            atsc_trace_free(tr);
            unlink(path);
        } else {
            fprintf(stderr, "lzf case skipped: no h5py for /usr/bin/python3\n");
        }
    }

    /* not HDF5, and missing file */
    snprintf(path, sizeof path, "%s/text.h5", tmpdir);
    FILE *fp = fopen(path, "w");
    fputs("t_s,cpu\n0,1\n", fp);
    fclose(fp);
    tr = NULL;
    CHECK(atsc_trace_load(path, &tr, &err) == ATS_EINVAL && tr == NULL && strstr(err.msg, path));
    unlink(path);
    CHECK(atsc_trace_load(path, &tr, &err) == ATS_ENOTFOUND && tr == NULL && strstr(err.msg, path));

    /* the writer refuses invalid traces and leaves the previous good file in place */
    snprintf(path, sizeof path, "%s/keep.h5", tmpdir);
    atsc_trace *good = random_trace(rng, 10);
    CHECK(atsc_trace_save(good, path, &err) == ATS_OK);
    good->gpu_avail[i] = 0.0;
    CHECK(atsc_trace_save(good, path, &err) == ATS_EINVAL);
    CHECK(strstr(err.msg, "/load/gpu_avail") && strstr(err.msg, idx));
    good->gpu_avail[i] = 0.5;
    atsc_trace *back = NULL;
    CHECK(atsc_trace_load(path, &back, &err) == ATS_OK);
    CHECK(back && back->gpu_avail[i] != 0.5);
    atsc_trace_free(back);
    atsc_trace_free(good);
    unlink(path);
    /* an unwritable destination is reported, not crashed on */
    atsc_trace *one = random_trace(rng, 1);
    CHECK(atsc_trace_save(one, "/nonexistent-dir/x.h5", &err) == ATS_EINVAL && strstr(err.msg, "/nonexistent-dir/x.h5"));
    atsc_trace_free(one);
}

int main(void)
{
    uint64_t rng = tu_seed("test_trace_io");
    if (!tu_tmpdir(tmpdir, sizeof tmpdir, "trace_io")) return 1;
    test_round_trip(&rng);
    test_lookup(&rng);
    test_refusals(&rng);
    return tu_finish("test_trace_io"); /* removes tmpdir when every check passed */
}
