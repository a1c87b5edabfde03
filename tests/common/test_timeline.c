/* Chrome trace-event writer: random events read back with jansson (times in µs to the ns, tracks,
 * counters, escaping); the file streams while written; tmp+rename; bad events refused without
 * spoiling the file. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atsc/timeline.h"
#include "testutil.h"

static char tmpdir[256];

static const char *tpath(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static long long file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long long)sb.st_size : -1;
}

typedef struct {
    int tid;
    double t, dur;
    char name[64];
} slice;

static void test_round_trip(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s", tpath("tl.json"));
    atsc_timeline *tl = NULL;
    ats_err e = {{0}};
    CHECK_MSG(atsc_timeline_open(path, "{\"seed\":42,\"hw\":\"rtx3060-laptop\"}", &tl, &e) == ATS_OK,
              "%s", e.msg);
    if (!tl) return;
    int pa = atsc_timeline_process(tl, "ats"), pb = atsc_timeline_process(tl, "layer \"baseline\"");
    CHECK(pa == 1 && pb == 2);
    static const char *const tracks[4] = {"CPU", "GPU compute", "copy engine 0", "copy engine 1"};
    int tid[2][4];
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 4; k++) tid[p][k] = atsc_timeline_track(tl, p ? pb : pa, tracks[k]);
    CHECK(tid[0][0] == 1 && tid[1][3] == 8);
    CHECK(atsc_timeline_track(tl, 9, "x") == -1);

    int n = 2000 + (int)(tu_rand(rng) % 3000);
    slice *s = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) {
        int p = (int)(tu_rand(rng) % 2), k = (int)(tu_rand(rng) % 4);
        s[i].tid = tid[p][k];
        s[i].t = tu_uniform(rng, 0, 600);
        s[i].dur = tu_uniform(rng, 0, 0.05);
        snprintf(s[i].name, sizeof s[i].name, "blk.%d.ffn_up%s", i % 40, i % 97 == 0 ? " \"q\"\n\\é" : "");
        enum ats_status st;
        if (i % 3 == 0) {
            const char *keys[2] = {"op", "bytes"};
            double vals[2] = {(double)i, (double)(tu_rand(rng) % (1u << 30))};
            st = atsc_timeline_slice_args(tl, s[i].tid, s[i].name, "op", s[i].t, s[i].dur, 2, keys, vals, &e);
        } else {
            st = atsc_timeline_slice(tl, s[i].tid, s[i].name, i % 2 ? "xfer" : NULL, s[i].t, s[i].dur,
                                     i % 2 ? "{\"ce\":0}" : NULL, &e);
        }
        CHECK_MSG(st == ATS_OK, "%s", e.msg);
    }
    int nc = 500;
    double *cv = calloc((size_t)nc, sizeof *cv);
    for (int i = 0; i < nc; i++) {
        cv[i] = tu_uniform(rng, 0, 55);
        CHECK(atsc_timeline_counter(tl, pa, "PCIe H2D", "GB/s", i * 0.01, cv[i], &e) == ATS_OK);
    }
    long long n_events = atsc_timeline_n_events(tl);
    CHECK(n_events == 4 + 16 + n + nc);
    CHECK(file_size(path) < 0);
    CHECK_MSG(atsc_timeline_close(tl, &e) == ATS_OK, "%s", e.msg);
    CHECK(file_size(path) > 0);

    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK_MSG(root != NULL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    if (!root) { free(s); free(cv); return; }
    CHECK(json_integer_value(json_object_get(json_object_get(root, "otherData"), "seed")) == 42);
    json_t *ev = json_object_get(root, "traceEvents");
    CHECK(json_is_array(ev) && (long long)json_array_size(ev) == n_events);
    int xi = 0, ci = 0, bad = 0, names = 0;
    size_t i;
    json_t *v;
    json_array_foreach(ev, i, v) {
        const char *ph = json_string_value(json_object_get(v, "ph"));
        if (!ph) { bad++; continue; }
        if (strcmp(ph, "M") == 0) {
            const char *what = json_string_value(json_object_get(v, "name"));
            const char *nm = json_string_value(json_object_get(json_object_get(v, "args"), "name"));
            if (what && strcmp(what, "process_name") == 0 && json_integer_value(json_object_get(v, "pid")) == 2)
                names += nm && strcmp(nm, "layer \"baseline\"") == 0;
            if (what && strcmp(what, "thread_name") == 0 && json_integer_value(json_object_get(v, "tid")) == 7)
                names += nm && strcmp(nm, "copy engine 0") == 0 &&
                         json_integer_value(json_object_get(v, "pid")) == 2;
        } else if (strcmp(ph, "X") == 0) {
            if (xi >= n) { bad++; continue; }
            slice *x = &s[xi++];
            double ts = json_number_value(json_object_get(v, "ts"));
            double dur = json_number_value(json_object_get(v, "dur"));
            if (fabs(ts - x->t * 1e6) > 6e-4 || fabs(dur - x->dur * 1e6) > 6e-4) bad++;
            if (json_integer_value(json_object_get(v, "tid")) != x->tid) bad++;
            if (strcmp(json_string_value(json_object_get(v, "name")), x->name) != 0) bad++;
        } else if (strcmp(ph, "C") == 0) {
            double val = json_number_value(json_object_get(json_object_get(v, "args"), "GB/s"));
            double ts = json_number_value(json_object_get(v, "ts"));
            if (ci >= nc || fabs(val - cv[ci]) > 1e-7 * cv[ci] + 1e-12 || fabs(ts - ci * 1e4) > 6e-4) bad++;
            ci++;
        } else {
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d events differ", bad);
    CHECK(xi == n && ci == nc && names == 2);
    json_decref(root);
    free(s);
    free(cv);
}

static void test_streaming_and_tmp(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s", tpath("stream.json"));
    /* an older good file */
    FILE *f = fopen(path, "w");
    fputs("{\"traceEvents\":[]}\n", f);
    fclose(f);
    atsc_timeline *tl = NULL;
    ats_err e = {{0}};
    CHECK(atsc_timeline_open(path, NULL, &tl, &e) == ATS_OK);
    int pid = atsc_timeline_process(tl, "sim");
    int tid = atsc_timeline_track(tl, pid, "CPU");
    for (int i = 0; i < 100000; i++)
        atsc_timeline_slice(tl, tid, "op", "cpu", i * 1e-3, tu_uniform(rng, 0, 1e-3), NULL, &e);
    /* events reach the file while the run goes on: at most a stdio buffer is held back */
    long long sz = file_size(atsc_timeline_tmp_path(tl));
    CHECK_MSG(sz > 5000000, "temporary file holds only %lld bytes after 100000 events", sz);
    CHECK(file_size(path) == 19);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", atsc_timeline_tmp_path(tl));
    atsc_timeline_abort(tl);
    CHECK(file_size(tmp) < 0);
    CHECK(file_size(path) == 19); /* the old file is untouched */

    CHECK(atsc_timeline_open(tpath("no/such/dir/t.json"), NULL, &tl, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "no/such/dir/t.json: ") != NULL && !strstr(e.msg, ".tmp."), "%s", e.msg);
    CHECK(atsc_timeline_open(path, "[1,2]", &tl, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "not a JSON object") != NULL, "%s", e.msg);
    CHECK(atsc_timeline_open(path, "{oops", &tl, &e) == ATS_EINVAL);
}

/* Repeated counter values are dropped per series; other series and changes are kept. */
static void test_counter_dedup(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s", tpath("dedup.json"));
    atsc_timeline *tl = NULL;
    ats_err e = {{0}};
    CHECK(atsc_timeline_open(path, NULL, &tl, &e) == ATS_OK);
    int p1 = atsc_timeline_process(tl, "a"), p2 = atsc_timeline_process(tl, "b");
    long long base = atsc_timeline_n_events(tl);
    int n = 1000, kept = 0;
    double prev[3] = {NAN, NAN, NAN};
    int *keep = calloc((size_t)n, sizeof *keep);
    int *ser = calloc((size_t)n, sizeof *ser);
    double *val = calloc((size_t)n, sizeof *val);
    for (int i = 0; i < n; i++) {
        ser[i] = (int)(tu_rand(rng) % 3); /* (p1,"H2D"), (p1,"D2H"), (p2,"H2D") */
        val[i] = (double)(tu_rand(rng) % 3); /* few distinct values: many repeats */
        keep[i] = !(prev[ser[i]] == val[i]);
        prev[ser[i]] = val[i];
        kept += keep[i];
        CHECK(atsc_timeline_counter(tl, ser[i] == 2 ? p2 : p1, ser[i] == 1 ? "D2H" : "H2D", "GB/s",
                                    i * 1e-3, val[i], &e) == ATS_OK);
    }
    CHECK(atsc_timeline_n_events(tl) - base == kept);
    CHECK(kept < n);
    CHECK(atsc_timeline_close(tl, &e) == ATS_OK);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK(root != NULL);
    if (root) {
        json_t *ev = json_object_get(root, "traceEvents");
        size_t j = (size_t)base, bad = 0;
        for (int i = 0; i < n; i++) {
            if (!keep[i]) continue;
            json_t *v = json_array_get(ev, j++);
            double ts = json_number_value(json_object_get(v, "ts"));
            double x = json_number_value(json_object_get(json_object_get(v, "args"), "GB/s"));
            bad += fabs(ts - i * 1e3) > 1e-3 || x != val[i];
        }
        CHECK_MSG(bad == 0 && j == json_array_size(ev), "%zu kept samples differ", bad);
        json_decref(root);
    }
    free(keep);
    free(ser);
    free(val);
}

static void test_bad_events(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s", tpath("bad.json"));
    atsc_timeline *tl = NULL;
    ats_err e = {{0}};
    CHECK(atsc_timeline_open(path, NULL, &tl, &e) == ATS_OK);
    int pid = atsc_timeline_process(tl, "p");
    int tid = atsc_timeline_track(tl, pid, "GPU");
    CHECK(atsc_timeline_slice(tl, tid + 1, "x", NULL, 0, 1, NULL, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "unknown track 2") && strstr(e.msg, path), "%s", e.msg);
    CHECK(atsc_timeline_slice(tl, tid, "negdur", NULL, 0, -1, NULL, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "event 'negdur'") != NULL, "%s", e.msg);
    CHECK(atsc_timeline_slice(tl, tid, "nan", NULL, NAN, 1, NULL, &e) == ATS_EINVAL);
    const char *k = "v";
    double nanv = NAN;
    CHECK(atsc_timeline_slice_args(tl, tid, "a", NULL, 0, 1, 1, &k, &nanv, &e) == ATS_EINVAL);
    CHECK(atsc_timeline_counter(tl, pid, "bw", "GB/s", 0, INFINITY, &e) == ATS_EINVAL);
    CHECK(atsc_timeline_counter(tl, pid + 1, "bw", "GB/s", 0, 1, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "unknown process 2") != NULL, "%s", e.msg);
    CHECK(atsc_timeline_slice(tl, tid, "ok", NULL, 1, 2, NULL, &e) == ATS_OK);
    CHECK(atsc_timeline_close(tl, &e) == ATS_OK);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK_MSG(root != NULL, "refused events spoiled the file: %s", je.text);
    if (root) {
        /* 4 metadata events + the one good slice */
        CHECK(json_array_size(json_object_get(root, "traceEvents")) == 5);
        json_decref(root);
    }
}

int main(void)
{
    uint64_t rng = tu_seed("test_timeline");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats_test_timeline.%ld", (long)getpid());
    if (mkdir(tmpdir, 0700) != 0) return 1;
    test_round_trip(&rng);
    test_streaming_and_tmp(&rng);
    test_counter_dedup(&rng);
    test_bad_events();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_timeline");
}
