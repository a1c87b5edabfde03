/* Results HDF5 schema: random multi-run files round-trip bit for bit (across the writer's buffer
 * boundaries); single-run files get /rounds and /ops links; tmp+rename keeps the old file on abort;
 * bad rows, names and files are refused with a message naming the file, dataset and row.
 *   test_results --write-fixture DIR   writes DIR/results.h5 (two runs), DIR/sweep.h5 and the other
 *                                       files of write_fixture for the analysis/ script test, then exits. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ats_version.h"
#include "atsc/results.h"
#include "atsc/trace_io.h"
#include "testutil.h"

static char tmpdir[256];

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Random but valid rows: decode rounds with a TPOT around `tpot`, a prefill prefix. */
static atsc_round_row *make_rounds(uint64_t *rng, size_t n, double tpot)
{
    atsc_round_row *r = calloc(n, sizeof *r);
    double t = 0;
    int64_t idx = (int64_t)(tu_rand(rng) % 3);
    for (size_t i = 0; i < n; i++) {
        r[i].index = idx;
        idx += 1 + (int64_t)(tu_rand(rng) % 2);
        r[i].phase = i < n / 10 ? ATSC_PHASE_PREFILL : ATSC_PHASE_DECODE;
        r[i].tokens = r[i].phase == ATSC_PHASE_PREFILL ? 512 : 1;
        r[i].t_start_s = t;
        r[i].latency_s = tpot * tu_uniform(rng, 0.5, 2.0) * (r[i].phase ? 1 : 20);
        t += r[i].latency_s;
        r[i].n_promoted = (int32_t)(tu_rand(rng) % 40);
        r[i].rescheduled = (tu_rand(rng) % 50) == 0;
        r[i].bytes_h2d = tu_rand(rng) % (1ull << 33);
        r[i].load_cpu = tu_uniform(rng, 0.2, 1.2);
        r[i].load_gpu = tu_uniform(rng, 0.2, 1.2);
        r[i].load_pcie = tu_uniform(rng, 0.2, 1.2);
    }
    return r;
}

static atsc_op_row *make_ops(uint64_t *rng, size_t n)
{
    atsc_op_row *o = calloc(n, sizeof *o);
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        o[i].round = (int64_t)(i / 400);
        o[i].op = (int32_t)(i % 400);
        o[i].backend = (int32_t)(tu_rand(rng) % 2);
        o[i].t_start_s = t;
        o[i].t_end_s = t + tu_uniform(rng, 1e-6, 1e-3);
        t = o[i].t_end_s;
        o[i].has_xfer = o[i].backend == 1 && tu_rand(rng) % 3 == 0;
        if (o[i].has_xfer) {
            o[i].copy_engine = (int32_t)(tu_rand(rng) % 3);
            o[i].xfer_start_s = t - tu_uniform(rng, 1e-3, 2e-3);
            o[i].xfer_end_s = o[i].xfer_start_s + tu_uniform(rng, 0, 1e-3);
        } else {
            o[i].copy_engine = 0;
            o[i].xfer_start_s = o[i].xfer_end_s = NAN;
        }
    }
    return o;
}

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static int same_round(const atsc_round_row *a, const atsc_round_row *b)
{
    return a->index == b->index && a->phase == b->phase && a->tokens == b->tokens &&
           same_double(a->t_start_s, b->t_start_s) && same_double(a->latency_s, b->latency_s) &&
           a->n_promoted == b->n_promoted && a->rescheduled == b->rescheduled &&
           a->bytes_h2d == b->bytes_h2d && same_double(a->load_cpu, b->load_cpu) &&
           same_double(a->load_gpu, b->load_gpu) && same_double(a->load_pcie, b->load_pcie);
}

static int same_op(const atsc_op_row *a, const atsc_op_row *b)
{
    return a->round == b->round && a->op == b->op && a->backend == b->backend &&
           same_double(a->t_start_s, b->t_start_s) && same_double(a->t_end_s, b->t_end_s) &&
           a->has_xfer == b->has_xfer && a->copy_engine == b->copy_engine &&
           same_double(a->xfer_start_s, b->xfer_start_s) && same_double(a->xfer_end_s, b->xfer_end_s);
}

static atsc_results_meta meta_for(uint64_t seed)
{
    atsc_results_meta m = {
        .producer = "ats sim",
        .config_json = "{\"model\":\"qwen3-14b\",\"vram_budget\":4294967296,\"eps\":0.15,\"note\":\"é\"}",
        .seed = seed,
        .model = "qwen3-14b",
        .hw = "rtx3060-laptop",
        .trace = "fig13-synth",
    };
    return m;
}

/* The stored types, checked against the layout documented in common/README.md (written out here
 * independently of results.c): member name, HDF5 class, size in bytes. */
typedef struct { const char *name; H5T_class_t cls; size_t size; } member;
static const member ROUND_MEMBERS[] = {
    {"index", H5T_INTEGER, 8}, {"phase", H5T_INTEGER, 4}, {"tokens", H5T_INTEGER, 4},
    {"t_start_s", H5T_FLOAT, 8}, {"latency_s", H5T_FLOAT, 8}, {"n_promoted", H5T_INTEGER, 4},
    {"rescheduled", H5T_INTEGER, 4}, {"bytes_h2d", H5T_INTEGER, 8}, {"load_cpu", H5T_FLOAT, 8},
    {"load_gpu", H5T_FLOAT, 8}, {"load_pcie", H5T_FLOAT, 8}};
static const member OP_MEMBERS[] = {
    {"round", H5T_INTEGER, 8}, {"op", H5T_INTEGER, 4}, {"backend", H5T_INTEGER, 4},
    {"t_start_s", H5T_FLOAT, 8}, {"t_end_s", H5T_FLOAT, 8}, {"has_xfer", H5T_INTEGER, 4},
    {"copy_engine", H5T_INTEGER, 4}, {"xfer_start_s", H5T_FLOAT, 8}, {"xfer_end_s", H5T_FLOAT, 8}};
static const member SWEEP_MEMBERS[] = {
    {"trace", H5T_STRING, 64}, {"policy", H5T_STRING, 64}, {"eps", H5T_FLOAT, 8},
    {"interval", H5T_FLOAT, 8}, {"interval_in_tpot", H5T_INTEGER, 4}, {"n_resched", H5T_INTEGER, 4},
    {"tpot_mean_s", H5T_FLOAT, 8}, {"tpot_p50_s", H5T_FLOAT, 8}, {"tpot_p99_s", H5T_FLOAT, 8},
    {"decode_tok_s", H5T_FLOAT, 8}, {"ttft_s", H5T_FLOAT, 8}};

static void check_layout(hid_t file, const char *dpath, const member *m, int n)
{
    hid_t d = H5Dopen2(file, dpath, H5P_DEFAULT);
    CHECK_MSG(d >= 0, "dataset %s missing", dpath);
    if (d < 0) return;
    hid_t t = H5Dget_type(d);
    CHECK(H5Tget_class(t) == H5T_COMPOUND && H5Tget_nmembers(t) == n);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        int j = H5Tget_member_index(t, m[i].name);
        CHECK_MSG(j >= 0, "%s: member %s missing", dpath, m[i].name);
        if (j < 0) continue;
        hid_t mt = H5Tget_member_type(t, (unsigned)j);
        CHECK_MSG(H5Tget_class(mt) == m[i].cls && H5Tget_size(mt) == m[i].size,
                  "%s: member %s: class %d size %zu (want %d, %zu)", dpath, m[i].name,
                  (int)H5Tget_class(mt), H5Tget_size(mt), (int)m[i].cls, m[i].size);
        if (m[i].cls == H5T_INTEGER)
            CHECK_MSG(H5Tget_sign(mt) == (strcmp(m[i].name, "bytes_h2d") == 0 ? H5T_SGN_NONE : H5T_SGN_2),
                      "%s: member %s: wrong signedness", dpath, m[i].name);
        total += H5Tget_size(mt);
        H5Tclose(mt);
    }
    CHECK_MSG(H5Tget_size(t) == total, "%s: %zu bytes per row, members add up to %zu (padding stored)",
              dpath, H5Tget_size(t), total);
    H5Tclose(t);
    H5Dclose(d);
}

/* Values as an independent reader sees them: read single members by name, compare with the rows. */
static void check_values_by_member(hid_t file, const atsc_round_row *r, size_t n)
{
    hid_t d = H5Dopen2(file, "/runs/ats/rounds", H5P_DEFAULT);
    double *lat = malloc(n * sizeof *lat);
    int64_t *idx = malloc(n * sizeof *idx);
    hid_t a = H5Tcreate(H5T_COMPOUND, sizeof(double));
    H5Tinsert(a, "latency_s", 0, H5T_NATIVE_DOUBLE);
    hid_t b = H5Tcreate(H5T_COMPOUND, sizeof(int64_t));
    H5Tinsert(b, "index", 0, H5T_NATIVE_INT64);
    CHECK(H5Dread(d, a, H5S_ALL, H5S_ALL, H5P_DEFAULT, lat) >= 0);
    CHECK(H5Dread(d, b, H5S_ALL, H5S_ALL, H5P_DEFAULT, idx) >= 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += lat[i] != r[i].latency_s || idx[i] != r[i].index;
    CHECK_MSG(bad == 0, "%zu rows differ when read member by member", bad);
    H5Tclose(a);
    H5Tclose(b);
    H5Dclose(d);
    free(lat);
    free(idx);
}

/* Appends rows in random-sized pieces so the writer's buffers fill at odd places. */
static void append_in_pieces(uint64_t *rng, atsc_results *w, const atsc_round_row *r, size_t nr,
                             const atsc_op_row *o, size_t no)
{
    ats_err e = {{0}};
    for (size_t i = 0; i < nr;) {
        size_t k = 1 + tu_rand(rng) % 3000;
        if (k > nr - i) k = nr - i;
        CHECK_MSG(atsc_results_append_rounds(w, r + i, k, &e) == ATS_OK, "%s", e.msg);
        i += k;
    }
    for (size_t i = 0; i < no;) {
        size_t k = 1 + tu_rand(rng) % 7000;
        if (k > no - i) k = no - i;
        CHECK_MSG(atsc_results_append_ops(w, o + i, k, &e) == ATS_OK, "%s", e.msg);
        i += k;
    }
}

static void test_round_trip(uint64_t *rng)
{
    const char *path = tpath("rt.h5");
    uint64_t seed = tu_rand(rng);
    atsc_results_meta m = meta_for(seed);
    size_t nr1 = 5000 + tu_rand(rng) % 5000, no1 = 17000 + tu_rand(rng) % 20000;
    size_t nr2 = 1 + tu_rand(rng) % 100;
    atsc_round_row *r1 = make_rounds(rng, nr1, 0.04), *r2 = make_rounds(rng, nr2, 0.1);
    atsc_op_row *o1 = make_ops(rng, no1);
    atsc_sweep_row sw[3];
    memset(sw, 0, sizeof sw);
    for (int i = 0; i < 3; i++) {
        snprintf(sw[i].trace, sizeof sw[i].trace, "trace-%d", i);
        snprintf(sw[i].policy, sizeof sw[i].policy, "ats");
        sw[i].eps = tu_uniform(rng, 0.05, 0.5);
        sw[i].interval = 1 + i;
        sw[i].interval_in_tpot = 1;
        sw[i].n_resched = i * 3;
        sw[i].tpot_mean_s = tu_uniform(rng, 0.03, 0.06);
        sw[i].tpot_p50_s = sw[i].tpot_mean_s * 0.98;
        sw[i].tpot_p99_s = sw[i].tpot_mean_s * 1.5;
        sw[i].decode_tok_s = 1 / sw[i].tpot_mean_s;
        sw[i].ttft_s = tu_uniform(rng, 1, 5);
    }

    atsc_results *w = NULL;
    ats_err e = {{0}};
    CHECK_MSG(atsc_results_open(path, &m, &w, &e) == ATS_OK, "%s", e.msg);
    if (!w) return;
    CHECK(!exists(path));
    CHECK(exists(atsc_results_tmp_path(w)));
    CHECK_MSG(atsc_results_begin_run(w, "ats", "ats", "{\"eps\":0.15}", 1, &e) == ATS_OK, "%s", e.msg);
    append_in_pieces(rng, w, r1, nr1, o1, no1);
    CHECK_MSG(atsc_results_begin_run(w, "layer", "layer", NULL, 0, &e) == ATS_OK, "%s", e.msg);
    append_in_pieces(rng, w, r2, nr2, NULL, 0);
    CHECK_MSG(atsc_results_write_sweep(w, sw, 3, &e) == ATS_OK, "%s", e.msg);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", atsc_results_tmp_path(w));
    CHECK_MSG(atsc_results_close(w, &e) == ATS_OK, "%s", e.msg);
    CHECK(exists(path));
    CHECK(!exists(tmp));

    atsc_results_file *f = NULL;
    CHECK_MSG(atsc_results_read(path, &f, &e) == ATS_OK, "%s", e.msg);
    if (!f) goto out;
    CHECK(f->schema_version == ATSC_RESULTS_SCHEMA_VERSION);
    CHECK(f->seed == seed);
    CHECK(strcmp(f->producer, "ats sim") == 0);
    CHECK(strcmp(f->config_json, m.config_json) == 0);
    CHECK(strcmp(f->model, "qwen3-14b") == 0);
    CHECK(strcmp(f->hw, "rtx3060-laptop") == 0);
    CHECK(strcmp(f->trace, "fig13-synth") == 0);
    CHECK(strcmp(f->version, ATS_VERSION_STRING) == 0);
    CHECK(strcmp(f->commit, ATS_GIT_COMMIT) == 0);
    CHECK(strcmp(f->policy, "ats,layer") == 0);
    CHECK(f->n_runs == 2);
    if (f->n_runs == 2) {
        const atsc_results_run *a = &f->runs[0], *b = &f->runs[1];
        CHECK(strcmp(a->name, "ats") == 0 && strcmp(a->policy, "ats") == 0);
        CHECK(strcmp(a->config_json, "{\"eps\":0.15}") == 0);
        CHECK(strcmp(b->config_json, "{}") == 0);
        CHECK(a->n_rounds == nr1 && a->has_ops && a->n_ops == no1);
        CHECK(b->n_rounds == nr2 && !b->has_ops && b->ops == NULL);
        size_t bad = 0;
        for (size_t i = 0; a->n_rounds == nr1 && i < nr1; i++) bad += !same_round(&a->rounds[i], &r1[i]);
        for (size_t i = 0; a->n_ops == no1 && i < no1; i++) bad += !same_op(&a->ops[i], &o1[i]);
        for (size_t i = 0; b->n_rounds == nr2 && i < nr2; i++) bad += !same_round(&b->rounds[i], &r2[i]);
        CHECK_MSG(bad == 0, "%zu rows differ after the round trip", bad);
        CHECK(atsc_results_find_run(f, "layer") == b);
        CHECK(atsc_results_find_run(f, "nope") == NULL);
    }
    CHECK(f->has_sweep && f->n_sweep == 3);
    for (size_t i = 0; f->n_sweep == 3 && i < 3; i++) {
        CHECK(strcmp(f->sweep[i].trace, sw[i].trace) == 0 && strcmp(f->sweep[i].policy, "ats") == 0);
        CHECK(same_double(f->sweep[i].eps, sw[i].eps) && f->sweep[i].n_resched == sw[i].n_resched);
        CHECK(same_double(f->sweep[i].tpot_p99_s, sw[i].tpot_p99_s));
    }
    /* two runs: no /rounds link; stored types follow the documented layout */
    hid_t h = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(h >= 0 && H5Lexists(h, "rounds", H5P_DEFAULT) == 0);
    if (h >= 0) {
        check_layout(h, "/runs/ats/rounds", ROUND_MEMBERS, 11);
        check_layout(h, "/runs/ats/ops", OP_MEMBERS, 9);
        check_layout(h, "/sweep", SWEEP_MEMBERS, 11);
        check_values_by_member(h, r1, nr1);
        H5Fclose(h);
    }
    atsc_results_file_free(f);
out:
    free(r1);
    free(r2);
    free(o1);
}

static void test_single_run_links(uint64_t *rng)
{
    const char *path = tpath("single.h5");
    atsc_results_meta m = meta_for(7);
    atsc_results *w = NULL;
    ats_err e = {{0}};
    size_t nr = 10 + tu_rand(rng) % 50, no = 400;
    atsc_round_row *r = make_rounds(rng, nr, 0.04);
    atsc_op_row *o = make_ops(rng, no);
    CHECK(atsc_results_open(path, &m, &w, &e) == ATS_OK);
    CHECK(atsc_results_begin_run(w, "ats", "ats", NULL, 1, &e) == ATS_OK);
    CHECK(atsc_results_append_rounds(w, r, nr, &e) == ATS_OK);
    CHECK(atsc_results_append_ops(w, o, no, &e) == ATS_OK);
    CHECK_MSG(atsc_results_close(w, &e) == ATS_OK, "%s", e.msg);
    hid_t h = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(h >= 0);
    if (h >= 0) {
        CHECK(H5Lexists(h, "rounds", H5P_DEFAULT) > 0 && H5Lexists(h, "ops", H5P_DEFAULT) > 0);
        hid_t d = H5Dopen2(h, "/rounds", H5P_DEFAULT);
        hid_t sp = H5Dget_space(d);
        hsize_t n = 0;
        H5Sget_simple_extent_dims(sp, &n, NULL);
        CHECK(n == nr);
        H5Sclose(sp);
        H5Dclose(d);
        H5Fclose(h);
    }
    free(r);
    free(o);
}

/* An abort (or a failed run) must leave the previous good file untouched and no temporary. */
static void test_tmp_rename(uint64_t *rng)
{
    const char *path = tpath("keep.h5");
    atsc_results_meta m = meta_for(1);
    atsc_results *w = NULL;
    ats_err e = {{0}};
    atsc_round_row *r = make_rounds(rng, 20, 0.04);
    CHECK(atsc_results_open(path, &m, &w, &e) == ATS_OK);
    CHECK(atsc_results_begin_run(w, "good", "ats", NULL, 0, &e) == ATS_OK);
    CHECK(atsc_results_append_rounds(w, r, 20, &e) == ATS_OK);
    CHECK(atsc_results_close(w, &e) == ATS_OK);

    m.seed = 2;
    CHECK(atsc_results_open(path, &m, &w, &e) == ATS_OK);
    CHECK(atsc_results_begin_run(w, "bad", "ats", NULL, 0, &e) == ATS_OK);
    CHECK(atsc_results_append_rounds(w, r, 10, &e) == ATS_OK);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", atsc_results_tmp_path(w));
    CHECK(exists(tmp));
    atsc_results_abort(w);
    CHECK(!exists(tmp));
    atsc_results_file *f = NULL;
    CHECK_MSG(atsc_results_read(path, &f, &e) == ATS_OK, "%s", e.msg);
    if (f) {
        CHECK(f->seed == 1 && f->n_runs == 1 && strcmp(f->runs[0].name, "good") == 0);
        CHECK(f->runs[0].n_rounds == 20);
        atsc_results_file_free(f);
    }
    /* unwritable place: the message names the path given, not the temporary file */
    const char *nodir = tpath("no/such/dir/x.h5");
    CHECK(atsc_results_open(nodir, &m, &w, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "no/such/dir/x.h5: ") != NULL && !strstr(e.msg, ".tmp."), "%s", e.msg);
    /* a special file is refused, never replaced */
    CHECK(atsc_results_open("/dev/null", &m, &w, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "/dev/null: ") == e.msg, "%s", e.msg);
    free(r);
}

static void expect_msg(enum ats_status st, const ats_err *e, const char *a, const char *b)
{
    CHECK_MSG(st == ATS_EINVAL, "want EINVAL (%s), got %d: %s", a, (int)st, e->msg);
    CHECK_MSG(strstr(e->msg, a) != NULL, "message lacks '%s': %s", a, e->msg);
    if (b) CHECK_MSG(strstr(e->msg, b) != NULL, "message lacks '%s': %s", b, e->msg);
}

static void test_bad_rows(uint64_t *rng)
{
    const char *path = tpath("badrows.h5");
    atsc_results_meta m = meta_for(3);
    atsc_results *w = NULL;
    ats_err e = {{0}};
    atsc_round_row *r = make_rounds(rng, 10, 0.04);
    atsc_op_row *o = make_ops(rng, 10);
    CHECK(atsc_results_open(path, &m, &w, &e) == ATS_OK);
    expect_msg(atsc_results_append_rounds(w, r, 1, &e), &e, "outside a run", NULL);
    expect_msg(atsc_results_begin_run(w, "a/b", "ats", NULL, 1, &e), &e, "run name 'a/b'", NULL);
    expect_msg(atsc_results_begin_run(w, "", "ats", NULL, 1, &e), &e, "run name ''", NULL);
    expect_msg(atsc_results_begin_run(w, "x", "ats", "{bad json", 1, &e), &e, "'config'", "not valid JSON");
    CHECK(atsc_results_begin_run(w, "ats", "ats", NULL, 1, &e) == ATS_OK);
    expect_msg(atsc_results_begin_run(w, "ats", "ats", NULL, 1, &e), &e, "run 'ats' written twice", NULL);

    CHECK(atsc_results_append_rounds(w, r, 5, &e) == ATS_OK);
    atsc_round_row x = r[5];
    x.phase = 2;
    expect_msg(atsc_results_append_rounds(w, &x, 1, &e), &e, "/runs/ats/rounds' row 5", "phase: 2");
    x = r[5];
    x.index = r[4].index;
    expect_msg(atsc_results_append_rounds(w, &x, 1, &e), &e, "row 5", "index");
    x = r[5];
    x.latency_s = -1;
    expect_msg(atsc_results_append_rounds(w, &x, 1, &e), &e, "row 5", "latency_s: -1");
    x = r[5];
    x.load_pcie = NAN;
    expect_msg(atsc_results_append_rounds(w, &x, 1, &e), &e, "row 5", "load_pcie: nan");
    x = r[5];
    x.tokens = 0;
    expect_msg(atsc_results_append_rounds(w, &x, 1, &e), &e, "row 5", "tokens: 0");
    x = r[5];
    x.rescheduled = 3;
    expect_msg(atsc_results_append_rounds(w, &x, 1, &e), &e, "row 5", "rescheduled: 3");

    CHECK(atsc_results_append_ops(w, o, 3, &e) == ATS_OK);
    atsc_op_row y = o[3];
    y.t_end_s = y.t_start_s - 1e-3;
    expect_msg(atsc_results_append_ops(w, &y, 1, &e), &e, "/runs/ats/ops' row 3", "t_end_s");
    y = o[3];
    y.backend = 5;
    expect_msg(atsc_results_append_ops(w, &y, 1, &e), &e, "row 3", "backend: 5");
    y = o[3];
    y.has_xfer = 0;
    y.xfer_start_s = 1.0;
    expect_msg(atsc_results_append_ops(w, &y, 1, &e), &e, "row 3", "must be NaN");
    y = o[3];
    y.has_xfer = 1;
    y.copy_engine = 0;
    y.xfer_start_s = 2.0;
    y.xfer_end_s = 1.0;
    expect_msg(atsc_results_append_ops(w, &y, 1, &e), &e, "row 3", "xfer_end_s");

    CHECK(atsc_results_begin_run(w, "noops", "layer", NULL, 0, &e) == ATS_OK);
    expect_msg(atsc_results_append_ops(w, o, 1, &e), &e, "run 'noops' begun without ops", NULL);
    atsc_sweep_row s;
    memset(&s, 0, sizeof s);
    expect_msg(atsc_results_write_sweep(w, &s, 1, &e), &e, "'/sweep' row 0", "empty");
    CHECK(atsc_results_close(w, &e) == ATS_OK);

    /* the good rows survived the refused ones */
    atsc_results_file *f = NULL;
    CHECK_MSG(atsc_results_read(path, &f, &e) == ATS_OK, "%s", e.msg);
    if (f) {
        CHECK(f->n_runs == 2 && f->runs[0].n_rounds == 5 && f->runs[0].n_ops == 3);
        atsc_results_file_free(f);
    }
    atsc_results_meta bad = meta_for(4);
    bad.config_json = "[1, 2";
    expect_msg(atsc_results_open(tpath("badcfg.h5"), &bad, &w, &e), &e, "attribute 'config'", "not valid JSON");
    CHECK(!exists(tpath("badcfg.h5")));
    free(r);
    free(o);
}

/* Files damaged after writing: the reader names file, dataset/attribute and row. */
static void test_bad_files(uint64_t *rng)
{
    ats_err e = {{0}};
    atsc_results_file *f = (atsc_results_file *)1;
    CHECK(atsc_results_read(tpath("missing.h5"), &f, &e) == ATS_ENOTFOUND && f == NULL);
    CHECK_MSG(strstr(e.msg, "missing.h5") != NULL, "%s", e.msg);

    const char *txt = tpath("text.h5");
    FILE *fp = fopen(txt, "w");
    fputs("not hdf5\n", fp);
    fclose(fp);
    expect_msg(atsc_results_read(txt, &f, &e), &e, "text.h5", "not an HDF5 file");
    /* a directory is said to be one (H5Fis_hdf5 said "not an HDF5 file"); so for traces and routing files */
    const char *dir = tpath("dir.h5");
    CHECK(mkdir(dir, 0700) == 0);
    expect_msg(atsc_results_read(dir, &f, &e), &e, "dir.h5", "is a directory, not a results file");
    atsc_trace *tr = NULL;
    expect_msg(atsc_trace_load(dir, &tr, &e), &e, "dir.h5", "is a directory, not a load trace");
    CHECK(tr == NULL);
    CHECK(rmdir(dir) == 0);

    /* a valid file, then damaged in place */
    const char *path = tpath("damaged.h5");
    atsc_results_meta m = meta_for(5);
    atsc_results *w = NULL;
    atsc_round_row *r = make_rounds(rng, 30, 0.04);
    CHECK(atsc_results_open(path, &m, &w, &e) == ATS_OK);
    CHECK(atsc_results_begin_run(w, "ats", "ats", NULL, 0, &e) == ATS_OK);
    CHECK(atsc_results_append_rounds(w, r, 30, &e) == ATS_OK);
    CHECK(atsc_results_close(w, &e) == ATS_OK);
    hid_t h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(h, "/runs/ats/rounds", H5P_DEFAULT);
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(int32_t));
    H5Tinsert(mt, "phase", 0, H5T_NATIVE_INT32);
    hsize_t start = 17, count = 1;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &count, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
    int32_t seven = 7;
    CHECK(H5Dwrite(d, mt, ms, fs, H5P_DEFAULT, &seven) >= 0);
    H5Sclose(ms); H5Sclose(fs); H5Tclose(mt); H5Dclose(d);
    H5Fclose(h);
    expect_msg(atsc_results_read(path, &f, &e), &e, "dataset '/runs/ats/rounds' row 17", "phase: 7");

    h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(h, "seed");
    H5Fclose(h);
    expect_msg(atsc_results_read(path, &f, &e), &e, "damaged.h5", "attribute '/seed': missing");

    /* a rounds table without latency_s */
    const char *p2 = tpath("nolat.h5");
    CHECK(atsc_results_open(p2, &m, &w, &e) == ATS_OK);
    CHECK(atsc_results_begin_run(w, "ats", "ats", NULL, 0, &e) == ATS_OK);
    CHECK(atsc_results_close(w, &e) == ATS_OK);
    h = H5Fopen(p2, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(h, "/runs/ats/rounds", H5P_DEFAULT);
    H5Ldelete(h, "/rounds", H5P_DEFAULT);
    hid_t ct = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(ct, "index", 0, H5T_NATIVE_INT64);
    hsize_t one = 1;
    hid_t sp = H5Screate_simple(1, &one, NULL);
    d = H5Dcreate2(h, "/runs/ats/rounds", ct, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d); H5Sclose(sp); H5Tclose(ct);
    H5Fclose(h);
    expect_msg(atsc_results_read(p2, &f, &e), &e, "dataset '/runs/ats/rounds'", "member 'phase' missing");

    /* a run listed but absent */
    h = H5Fopen(p2, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(h, "/runs/ats", H5P_DEFAULT);
    H5Fclose(h);
    expect_msg(atsc_results_read(p2, &f, &e), &e, "group '/runs/ats'", "missing");
    CHECK(f == NULL);
    free(r);
}

/* DIR/FILE with one run per name (policy = name) of 300 rounds (all prefill when `prefill_only`),
 * for write_fixture. */
static enum ats_status write_runs(const char *dir, const char *file, const atsc_results_meta *m,
                                  const char *const *names, int n, int prefill_only, ats_err *e)
{
    char p[512];
    atsc_results *w = NULL;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    enum ats_status s = atsc_results_open(p, m, &w, e);
    for (int k = 0; k < n && s == ATS_OK; k++) {
        uint64_t rng = 777 + (uint64_t)k + 1000 * strlen(file); /* sim and real files differ */
        atsc_round_row *r = make_rounds(&rng, 300, 0.05);
        if (!r) {
            s = ats_err_set(e, ATS_ENOMEM, "out of memory");
            break;
        }
        for (int i = 0; i < 300 && prefill_only; i++) {
            r[i].phase = ATSC_PHASE_PREFILL;
            r[i].tokens = 512;
        }
        s = atsc_results_begin_run(w, names[k], names[k], NULL, 0, e);
        if (s == ATS_OK) s = atsc_results_append_rounds(w, r, 300, e);
        free(r);
    }
    if (s == ATS_OK) return atsc_results_close(w, e);
    atsc_results_abort(w);
    return s;
}

/* --write-fixture DIR: files for the analysis/ scripts test. Deterministic (fixed seed). */
static int write_fixture(const char *dir)
{
    uint64_t rng = 12345;
    char p[512];
    ats_err e = {{0}};
    atsc_results *w = NULL;
    atsc_results_meta m = meta_for(42);
    snprintf(p, sizeof p, "%s/results.h5", dir);
    if (atsc_results_open(p, &m, &w, &e)) goto fail;
    static const char *const pol[2] = {"ats", "layer"};
    for (int k = 0; k < 2; k++) {
        atsc_round_row *r = make_rounds(&rng, 300, k ? 0.06 : 0.04);
        atsc_op_row *o = make_ops(&rng, 4000);
        if (atsc_results_begin_run(w, pol[k], pol[k], NULL, k == 0, &e) ||
            atsc_results_append_rounds(w, r, 300, &e) || (k == 0 && atsc_results_append_ops(w, o, 4000, &e))) {
            free(r); free(o);
            goto fail;
        }
        free(r);
        free(o);
    }
    if (atsc_results_close(w, &e)) { w = NULL; goto fail; }
    /* one request of 30 prefill + 270 decode rounds per run: with gen_tok 270 it completed (done.h5), with
       1000 a --duration cut it (cut.h5: no TPOT, no TTFT in the analysis either) */
    for (int c = 0; c < 2; c++) {
        atsc_results_meta mc = m;
        mc.config_json = c ? "{\"model\":\"qwen3-14b\",\"gen_tok\":1000}" : "{\"model\":\"qwen3-14b\",\"gen_tok\":270}";
        snprintf(p, sizeof p, "%s/%s.h5", dir, c ? "cut" : "done");
        if (atsc_results_open(p, &mc, &w, &e)) goto fail;
        for (int k = 0; k < 2; k++) {
            uint64_t r2 = 99;
            atsc_round_row *r = make_rounds(&r2, 300, 0.05);
            if (atsc_results_begin_run(w, pol[k], pol[k], NULL, 0, &e) || atsc_results_append_rounds(w, r, 300, &e)) {
                free(r);
                goto fail;
            }
            free(r);
        }
        if (atsc_results_close(w, &e)) { w = NULL; goto fail; }
    }
    /* the same runs "measured": a second file for the sim-vs-real comparison */
    snprintf(p, sizeof p, "%s/real.h5", dir);
    m.producer = "ats run";
    if (atsc_results_open(p, &m, &w, &e)) goto fail;
    for (int k = 0; k < 2; k++) {
        atsc_round_row *r = make_rounds(&rng, 300, k ? 0.065 : 0.043);
        if (atsc_results_begin_run(w, pol[k], pol[k], NULL, 0, &e) || atsc_results_append_rounds(w, r, 300, &e)) {
            free(r);
            goto fail;
        }
        free(r);
    }
    if (atsc_results_close(w, &e)) { w = NULL; goto fail; }
    /* as the CLI names runs: `ats sim --out` after the policy, `ats run --out` after the backend, so
       they share no name (one.h5: a one-policy sim; real-cpu.h5 / real-other.h5: a CPU run of the
       same / another model); prefill.h5: runs without a decode round */
    {
        static const char *const sim1[1] = {"ats"}, *const cpu[1] = {"cpu"};
        w = NULL; /* closed above */
        atsc_results_meta ms = m, mr = m, mo = m;
        ms.producer = "ats sim";
        mo.model = "stories260K";
        mo.config_json = "{\"command\": \"run\", \"model\": \"stories260K\"}";
        if (write_runs(dir, "one.h5", &ms, sim1, 1, 0, &e) || write_runs(dir, "real-cpu.h5", &mr, cpu, 1, 0, &e) ||
            write_runs(dir, "real-other.h5", &mo, cpu, 1, 0, &e) || write_runs(dir, "prefill.h5", &ms, pol, 2, 1, &e))
            goto fail;
    }
    { /* a load trace (`ats trace synth`): not a results file, though both are HDF5 */
        atsc_trace *tr = atsc_trace_new(2);
        if (!tr) { ats_err_set(&e, ATS_ENOMEM, "load trace: out of memory"); goto fail; }
        tr->t_s[1] = 1;
        for (int i = 0; i < 2; i++) tr->cpu_avail[i] = tr->gpu_avail[i] = tr->pcie_avail[i] = 1;
        snprintf(tr->source, sizeof tr->source, "test_results --write-fixture");
        snprintf(tr->machine, sizeof tr->machine, "synthetic");
        snprintf(p, sizeof p, "%s/load.h5", dir);
        enum ats_status st = atsc_trace_save(tr, p, &e);
        atsc_trace_free(tr);
        if (st) goto fail;
    }
    snprintf(p, sizeof p, "%s/sweep.h5", dir);
    if (atsc_results_open(p, &m, &w, &e)) goto fail;
    atsc_sweep_row rows[2 * 10 * 8 + 2];
    memset(rows, 0, sizeof rows);
    int n = 0;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 8; j++) {
                atsc_sweep_row *s = &rows[n++];
                snprintf(s->trace, sizeof s->trace, "trace-%d", t);
                snprintf(s->policy, sizeof s->policy, "ats");
                s->eps = 0.05 * (i + 1);
                s->interval = 1 + 2 * j;
                s->interval_in_tpot = 1;
                s->tpot_mean_s = 0.04 + 0.002 * abs(i - 3) + 0.001 * abs(j - 4) + 0.001 * t;
                s->tpot_p50_s = s->tpot_mean_s;
                s->tpot_p99_s = 1.4 * s->tpot_mean_s;
                s->decode_tok_s = 1 / s->tpot_mean_s;
                s->n_resched = 20 - i - j;
                s->ttft_s = 2.0;
                if (t == 0 && i == 0) { /* completed no request (ats sweep: NaN TPOT and TTFT), yet the
                                           highest decode rate and fewest re-schedules: never the best */
                    s->tpot_mean_s = s->tpot_p50_s = s->tpot_p99_s = s->ttft_s = NAN;
                    s->decode_tok_s = 1000;
                    s->n_resched = 0;
                }
            }
    for (int j = 0; j < 2; j++) { /* a policy none of whose points completed a request */
        atsc_sweep_row *s = &rows[n++];
        snprintf(s->trace, sizeof s->trace, "trace-0");
        snprintf(s->policy, sizeof s->policy, "ats-paper");
        s->eps = 0.1;
        s->interval = 1 + j;
        s->interval_in_tpot = 1;
        s->tpot_mean_s = s->tpot_p50_s = s->tpot_p99_s = s->ttft_s = NAN;
        s->decode_tok_s = 5;
    }
    if (atsc_results_write_sweep(w, rows, (size_t)n, &e) || atsc_results_close(w, &e)) { w = NULL; goto fail; }
    return 0;
fail:
    fprintf(stderr, "write-fixture: %s\n", e.msg);
    atsc_results_abort(w);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-fixture") == 0) return write_fixture(argv[2]);
    uint64_t rng = tu_seed("test_results");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats_test_results.%ld", (long)getpid());
    if (mkdir(tmpdir, 0700) != 0) return 1;
    test_round_trip(&rng);
    test_single_run_links(&rng);
    test_tmp_rename(&rng);
    test_bad_rows(&rng);
    test_bad_files(&rng);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_results");
}
