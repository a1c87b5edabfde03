/*
 * tests/common/test_trace_import.c — `ats trace import` engine (atsc/trace_import.h): percentile
 * against brute force, timestamp parsing against timegm, a random CSV whose expected trace is computed
 * here independently, shuffled rows with repeated and negative times (the report's counts and lines and
 * the trace against brute force), refusals naming file/line/column, and the real public traces read
 * from $ATS_SHARED_DIR/traces-raw (never copied into the repo).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atsc/trace_import.h"
#include "testutil.h"

static char tmpdir[256];

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_percentile(uint64_t *rng)
{
    for (int rep = 0; rep < 200; rep++) {
        size_t n = 1 + (size_t)(tu_rand(rng) % 50);
        double v[50], w[50];
        for (size_t i = 0; i < n; i++) v[i] = w[i] = tu_uniform(rng, -5, 100);
        double p = tu_uniform(rng, 0, 100);
        if (rep % 10 == 0) p = 100;
        qsort(w, n, sizeof *w, cmp_d);
        /* numpy 'linear': rank p/100*(n-1) between order statistics */
        double rank = p / 100 * (double)(n - 1);
        size_t lo = (size_t)floor(rank), hi = lo + 1 < n ? lo + 1 : lo;
        double want = w[lo] + (rank - (double)lo) * (w[hi] - w[lo]);
        CHECK_NEAR(atsc_percentile(v, n, p), want, 1e-9);
    }
}

static void test_parse_time(uint64_t *rng)
{
    double t;
    CHECK(atsc_parse_time("1970-01-01 00:00:00", &t) == 0 && t == 0.0);
    CHECK(atsc_parse_time("  42.5 ", &t) == 0 && t == 42.5);
    CHECK(atsc_parse_time("2023-09-01T05:13:10.610Z", &t) == 0 && fabs(t - 1693545190.61) < 1e-6);
    CHECK(atsc_parse_time("2023-13-01 00:00:00", &t) != 0);
    CHECK(atsc_parse_time("yesterday", &t) != 0);
    CHECK(atsc_parse_time("2023-09-01 05:13:10 junk", &t) != 0);
    /* dates that do not exist (were normalized: 2023-02-30 became 2023-03-02), hex, signs in fields */
    CHECK(atsc_parse_time("2023-02-30 00:00:00", &t) != 0);
    CHECK(atsc_parse_time("2023-02-29 00:00:00", &t) != 0);
    CHECK(atsc_parse_time("2024-02-29 00:00:00", &t) == 0);
    CHECK(atsc_parse_time("1900-02-29 00:00:00", &t) != 0 && atsc_parse_time("2000-02-29 00:00:00", &t) == 0);
    CHECK(atsc_parse_time("2023-04-31 00:00:00", &t) != 0 && atsc_parse_time("2023-04-30 23:59:59", &t) == 0);
    CHECK(atsc_parse_time("2023-01-01 -1:00:00", &t) != 0 && atsc_parse_time("2023-01-01 00:-5:00", &t) != 0);
    CHECK(atsc_parse_time("0x10", &t) != 0 && atsc_parse_time("0X1p4", &t) != 0);
    CHECK(atsc_parse_time("inf", &t) != 0 && atsc_parse_time("nan", &t) != 0);
    CHECK(atsc_parse_time(" -1.5e2 ", &t) == 0 && t == -150.0);
    double v;
    CHECK(atsc_parse_decimal("0x10", &v) != 0 && atsc_parse_decimal("16", &v) == 0 && v == 16.0);
    CHECK(atsc_parse_decimal("", &v) != 0 && atsc_parse_decimal(" ", &v) != 0 && atsc_parse_decimal("e", &v) != 0);
    CHECK(atsc_parse_decimal("1e999", &v) != 0 && atsc_parse_decimal("1.5x", &v) != 0);
    /* every day number 1..31 of random months: valid iff timegm does not move it to another month */
    for (int rep = 0; rep < 500; rep++) {
        struct tm tm = {0};
        tm.tm_year = (int)(tu_rand(rng) % 400) - 100; /* 1800..2199: century leap rules */
        tm.tm_mon = (int)(tu_rand(rng) % 12);
        tm.tm_mday = 1 + (int)(tu_rand(rng) % 31);
        tm.tm_hour = 12;
        char buf[64];
        snprintf(buf, sizeof buf, "%04d-%02d-%02d 12:00:00", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
        struct tm n = tm;
        double want = (double)timegm(&n);
        int exists = n.tm_mon == tm.tm_mon && n.tm_mday == tm.tm_mday;
        int rc = atsc_parse_time(buf, &t);
        CHECK_MSG(exists ? rc == 0 && t == want : rc != 0,
                  "%s: exists %d, rc %d", buf, exists, rc);
    }
    for (int rep = 0; rep < 500; rep++) {
        struct tm tm = {0};
        tm.tm_year = 70 + (int)(tu_rand(rng) % 100);
        tm.tm_mon = (int)(tu_rand(rng) % 12);
        tm.tm_mday = 1 + (int)(tu_rand(rng) % 28);
        tm.tm_hour = (int)(tu_rand(rng) % 24);
        tm.tm_min = (int)(tu_rand(rng) % 60);
        tm.tm_sec = (int)(tu_rand(rng) % 60);
        char buf[64];
        snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.250", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec);
        double want = (double)timegm(&tm) + 0.25;
        CHECK_MSG(atsc_parse_time(buf, &t) == 0 && t == want, "%s: got %.3f want %.3f", buf, t, want);
    }
}

/* A random CSV with timestamps, duplicate times, a filter column; the expected trace computed here. */
static void test_random_csv(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s/series.csv", tmpdir);
    for (int rep = 0; rep < 20; rep++) {
        FILE *f = fopen(path, "w");
        fprintf(f, "id,when,host,value\n");
        size_t n = 5 + (size_t)(tu_rand(rng) % 200);
        double *tv = malloc(n * sizeof *tv), *vv = malloc(n * sizeof *vv), *sorted = malloc(n * sizeof *sorted);
        size_t m = 0;
        long base = 1700000000L;
        long tcur = base;
        for (size_t i = 0; i < n; i++) {
            tcur += 1 + (long)(tu_rand(rng) % 3600);
            double v = tu_uniform(rng, 50, 150);
            /* a row of another host at the same time (filtered out) */
            time_t tt = (time_t)tcur;
            struct tm tm;
            gmtime_r(&tt, &tm);
            char ts[64];
            strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
            fprintf(f, "%zu,%s,B,%.6f\n", 2 * i, ts, 1000.0);
            fprintf(f, "%zu,%s,A,%.6f\n", 2 * i + 1, ts, v);
            tv[m] = (double)(tcur - base);
            vv[m++] = v;
        }
        fclose(f);
        atsc_import_opts o = atsc_import_opts_default();
        o.time_col = "when";
        o.value_col = "3"; /* by index */
        o.filter_col = "host";
        o.filter_value = "A";
        o.resource = (enum atsc_resource)(tu_rand(rng) % 3);
        o.ref_percentile = tu_uniform(rng, 10, 100);
        o.invert = (int)(tu_rand(rng) & 1);
        o.compress = tu_uniform(rng, 1, 100);
        o.floor = 0.05;
        /* expected: values printed with 6 decimals */
        for (size_t i = 0; i < m; i++) {
            char b[64];
            snprintf(b, sizeof b, "%.6f", vv[i]);
            vv[i] = strtod(b, NULL);
            sorted[i] = vv[i];
        }
        double ref = atsc_percentile(sorted, m, o.ref_percentile);
        atsc_trace *tr = NULL;
        ats_err err = {{0}};
        atsc_import_report rp;
        enum ats_status st = atsc_trace_import_csv(path, &o, &tr, &rp, &err);
        CHECK_MSG(st == ATS_OK, "%s", err.msg);
        if (st == ATS_OK) {
            CHECK(tr->n == m);
            /* increasing, distinct times of the kept rows: nothing to report */
            CHECK(rp.n_rows == m && rp.n_out_of_order == 0 && rp.n_dup_rows == 0 && rp.n_dup_times == 0 &&
                  rp.n_negative == 0 && rp.first_out_of_order_line == 0 && rp.first_dup_line == 0);
            CHECK(rp.t_earliest == (double)tv[0] + (double)base && rp.earliest_line == 3);
            CHECK(atsc_trace_validate(tr, path, &err) == ATS_OK);
            const double *a = atsc_trace_res(tr, o.resource);
            int ok_t = 1, ok_a = 1, ok_other = 1;
            for (size_t i = 0; i < m && i < tr->n; i++) {
                double want = o.invert ? ref / vv[i] : vv[i] / ref;
                want = want > 1 ? 1 : want < o.floor ? o.floor : want;
                ok_a &= fabs(a[i] - want) <= 1e-12;
                ok_t &= fabs(tr->t_s[i] - (tv[i] - tv[0]) / o.compress) <= 1e-9 * (1 + tv[i]);
                for (int r = 0; r < ATSC_RES_COUNT; r++)
                    if (r != (int)o.resource) ok_other &= atsc_trace_res(tr, (enum atsc_resource)r)[i] == 1.0;
            }
            CHECK(ok_a);
            CHECK(ok_t);
            CHECK(ok_other);
        }
        atsc_trace_free(tr);
        free(tv);
        free(vv);
        free(sorted);
    }
    /* equal times are averaged */
    FILE *f = fopen(path, "w");
    fprintf(f, "t,v\n0,2\n5,4\n5,8\n10,4\n");
    fclose(f);
    atsc_import_opts o = atsc_import_opts_default();
    o.ref_percentile = 100;
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    CHECK(atsc_trace_import_csv(path, &o, &tr, NULL, &err) == ATS_OK);
    if (tr) {
        CHECK(tr->n == 3);
        CHECK_NEAR(tr->cpu_avail[1], 1.0, 1e-12); /* (4+8)/2 = 6 = p100 of {2, 6, 4} */
        CHECK_NEAR(tr->cpu_avail[0], 2.0 / 6.0, 1e-12);
    }
    atsc_trace_free(tr);
    unlink(path);
}

/* Rows in random order with repeated and negative times: the report against brute force over the
 * file order, the trace against sort + average + shift computed here. */
static void test_unsorted(uint64_t *rng)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unsorted.csv", tmpdir);
    for (int rep = 0; rep < 200; rep++) {
        size_t n = 1 + (size_t)(tu_rand(rng) % 60);
        int span = 1 + (int)(tu_rand(rng) % 80), lo = -(int)(tu_rand(rng) % 40);
        int sorted_input = rep % 5 == 0; /* some files in order, with or without repeats */
        double t[60], v[60];
        for (size_t i = 0; i < n; i++) {
            t[i] = lo + (int)(tu_rand(rng) % (unsigned)span) + 0.5 * (double)(tu_rand(rng) & 1);
            v[i] = (double)(1 + tu_rand(rng) % 1000) / 8.0; /* exact in binary and in %.17g */
        }
        if (sorted_input)
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && t[j] < t[j - 1]; j--) {
                    double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x;
                }
        FILE *f = fopen(path, "w");
        fprintf(f, "t,v\n");
        for (size_t i = 0; i < n; i++) fprintf(f, "%.17g,%.17g\n", t[i], v[i]);
        fclose(f);
        /* brute force over the file order (row i is on line i + 2) */
        size_t ooo = 0, ooo_line = 0, dup_rows = 0, dup_times = 0, dup_line = 0, neg = 0, e_line = 0;
        double tmin = INFINITY, ooo_t = 0, ooo_prev = 0;
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && t[i] < t[i - 1] && ooo++ == 0) ooo_line = i + 2, ooo_t = t[i], ooo_prev = t[i - 1];
            neg += t[i] < 0;
            if (t[i] < tmin) tmin = t[i], e_line = i + 2;
            size_t before = 0, after = 0;
            for (size_t j = 0; j < n; j++) (j < i ? &before : &after)[0] += j != i && t[j] == t[i];
            if (before) {
                dup_rows++;
                if (!dup_line) dup_line = i + 2;
            } else if (after) {
                dup_times++;
            }
        }
        /* expected samples: distinct times ascending, mean of their values in file order */
        double et[60], ev[60];
        size_t m = 0;
        for (double last = -INFINITY;;) {
            double next = INFINITY;
            for (size_t i = 0; i < n; i++)
                if (t[i] > last && t[i] < next) next = t[i];
            if (next == INFINITY) break;
            double acc = 0;
            int k = 0;
            for (size_t i = 0; i < n; i++)
                if (t[i] == next) acc += v[i], k++;
            et[m] = next;
            ev[m++] = acc / k;
            last = next;
        }
        atsc_import_opts o = atsc_import_opts_default();
        o.time_col = "t";
        o.value_col = "v";
        o.ref_percentile = 100;
        o.floor = 1e-6;
        o.compress = rep % 2 ? 1.0 : 4.0;
        double sv[60];
        memcpy(sv, ev, m * sizeof *sv);
        double ref = atsc_percentile(sv, m, 100);
        atsc_trace *tr = NULL;
        ats_err err = {{0}};
        atsc_import_report rp;
        memset(&rp, 0xff, sizeof rp);
        enum ats_status st = atsc_trace_import_csv(path, &o, &tr, &rp, &err);
        CHECK_MSG(st == ATS_OK, "%s", err.msg);
        if (st != ATS_OK) continue;
        CHECK(rp.n_rows == n);
        CHECK_MSG(rp.n_out_of_order == ooo && rp.first_out_of_order_line == ooo_line, "out of order %zu at %zu, "
                  "want %zu at %zu", rp.n_out_of_order, rp.first_out_of_order_line, ooo, ooo_line);
        if (ooo) CHECK(rp.ooo_t == ooo_t && rp.ooo_t_prev == ooo_prev);
        CHECK_MSG(rp.n_dup_rows == dup_rows && rp.n_dup_times == dup_times && rp.first_dup_line == dup_line,
                  "repeats %zu rows / %zu times at line %zu, want %zu / %zu at %zu", rp.n_dup_rows, rp.n_dup_times,
                  rp.first_dup_line, dup_rows, dup_times, dup_line);
        CHECK(rp.n_negative == neg && rp.t_earliest == tmin && rp.earliest_line == e_line);
        CHECK(tr->n == m && n - dup_rows == m);
        CHECK(atsc_trace_validate(tr, path, &err) == ATS_OK);
        int ok = tr->n == m;
        for (size_t i = 0; ok && i < m; i++)
            ok = tr->t_s[i] == (et[i] - tmin) / o.compress && fabs(tr->cpu_avail[i] - ev[i] / ref) <= 1e-15;
        CHECK_MSG(ok, "rep %d: trace differs from sort + average + shift", rep);
        CHECK(tr->t_s[0] == 0.0);
        /* the description says what was done */
        CHECK(!ooo == !strstr(tr->description, "out of order, sorted"));
        CHECK(!dup_rows == !strstr(tr->description, "averaged"));
        CHECK(!neg == !strstr(tr->description, "negative times, shifted"));
        atsc_trace_free(tr);
    }
    unlink(path);
}

static void expect_fail(const char *content, atsc_import_opts o, enum ats_status want, const char *must)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad.csv", tmpdir);
    FILE *f = fopen(path, "w");
    fputs(content, f);
    fclose(f);
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    enum ats_status st = atsc_trace_import_csv(path, &o, &tr, NULL, &err);
    CHECK_MSG(st == want, "status %d want %d (%s)", (int)st, (int)want, err.msg);
    CHECK(tr == NULL);
    CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, must), "message '%s' lacks '%s'", err.msg, must);
    atsc_trace_free(tr);
    unlink(path);
}

static void test_refusals(void)
{
    atsc_import_opts o = atsc_import_opts_default();
    o.time_col = "t";
    o.value_col = "v";
    expect_fail("t,x\n0,1\n", o, ATS_ENOTFOUND, "no column 'v'");
    expect_fail("t,v\n0,1\n1,abc\n", o, ATS_EINVAL, "line 3, column 'v': bad value 'abc'");
    expect_fail("t,v\n0,1\nnoon,2\n", o, ATS_EINVAL, "line 3, column 't': bad time 'noon'");
    expect_fail("t,v\n0,1\n1\n", o, ATS_EINVAL, "line 3");
    expect_fail("t,v\n", o, ATS_EINVAL, "no data rows");
    expect_fail("t,v\n0,-1\n1,-2\n", o, ATS_EINVAL, "must be > 0");
    o.filter_col = "v";
    o.filter_value = "7";
    expect_fail("t,v\n0,1\n1,2\n", o, ATS_EINVAL, "no data rows with v = 7");
    o = atsc_import_opts_default();
    o.compress = 1e-6; /* stretching 1e305 s overflows: both times become inf */
    expect_fail("t,v\n0,1\n1e305,1\n1.1e305,1\n", o, ATS_EINVAL, "coincide after compression");
    /* ragged rows, a column index past the header, long echoed values cut to 60 characters */
    o = atsc_import_opts_default();
    o.time_col = "t";
    o.value_col = "v";
    expect_fail("t,v,w\n0,1,2\n1,2\n", o, ATS_EINVAL, "line 3: 2 fields, the header has 3");
    expect_fail("t,v\n0,1\n1,2,3\n", o, ATS_EINVAL, "line 3: 3 fields, the header has 2");
    expect_fail("t,v\n2023-02-28 00:00:00,1\n2023-02-30 00:00:00,2\n", o, ATS_EINVAL,
                "line 3, column 't': bad time '2023-02-30 00:00:00'");
    expect_fail("t,v\n0,1\n1,0x10\n", o, ATS_EINVAL, "line 3, column 'v': bad value '0x10'");
    expect_fail("t,v\n0x1,1\n1,2\n", o, ATS_EINVAL, "line 2, column 't': bad time '0x1'");
    {
        /* negative values: counted (first line and value), their samples at the floor */
        char path[512];
        snprintf(path, sizeof path, "%s/neg.csv", tmpdir);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (f) {
            fputs("t,v\n0,4\n1,-2\n2,4\n3,-1\n4,2\n", f);
            fclose(f);
        }
        atsc_import_opts on = o;
        on.ref_percentile = 100;
        on.floor = 0.05;
        atsc_trace *tr = NULL;
        ats_err err = {{0}};
        atsc_import_report rp;
        CHECK(atsc_trace_import_csv(path, &on, &tr, &rp, &err) == ATS_OK);
        CHECK_MSG(rp.n_neg_values == 2 && rp.first_neg_value_line == 3 && rp.first_neg_value == -2.0,
                  "negative values: %zu, line %zu, value %g", rp.n_neg_values, rp.first_neg_value_line,
                  rp.first_neg_value);
        CHECK(tr && tr->n == 5 && tr->cpu_avail[1] == 0.05 && tr->cpu_avail[3] == 0.05 && tr->cpu_avail[4] == 0.5);
        atsc_trace_free(tr);
        unlink(path);
    }
    {
        char content[512], want[128];
        char long_v[201];
        memset(long_v, 'x', 200);
        long_v[200] = 0;
        snprintf(content, sizeof content, "t,v\n0,%s\n", long_v);
        snprintf(want, sizeof want, "bad value '%.57s...'", long_v);
        expect_fail(content, o, ATS_EINVAL, want);
    }
    o.time_col = "9";
    expect_fail("a,b,c,d\n0,1,2,3\n", o, ATS_EINVAL, "--time-col 9: the header has only 4 columns");
    /* a name twice in the header (the first was taken), time and value from one column: refused */
    o = atsc_import_opts_default();
    o.time_col = "t";
    o.value_col = "v";
    expect_fail("t,t,v\n0,0,1\n1,1,2\n", o, ATS_EINVAL, "--time-col: column 't' is in the header more than once");
    o.value_col = "0";
    expect_fail("t,v\n0,1\n1,2\n", o, ATS_EINVAL, "--time-col t and --value-col 0 are the same column (0)");
    o = atsc_import_opts_default();
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    /* a UTF-8 byte-order mark before the header is not part of the first column's name */
    {
        char path[512];
        snprintf(path, sizeof path, "%s/bom.csv", tmpdir);
        FILE *f = fopen(path, "w");
        fputs("\xEF\xBB\xBFtime,load\n0,2\n5,4\n", f);
        fclose(f);
        atsc_import_opts ob = atsc_import_opts_default();
        ob.time_col = "time";
        ob.value_col = "load";
        ob.ref_percentile = 100;
        CHECK_MSG(atsc_trace_import_csv(path, &ob, &tr, NULL, &err) == ATS_OK, "%s", err.msg);
        if (tr) CHECK(tr->n == 2 && tr->t_s[1] == 5.0 && fabs(tr->cpu_avail[0] - 0.5) < 1e-12);
        atsc_trace_free(tr);
        tr = NULL;
        unlink(path);
    }
    CHECK(atsc_trace_import_csv("/nonexistent/x.csv", &o, &tr, NULL, &err) == ATS_ENOTFOUND && strstr(err.msg, "/nonexistent/x.csv"));
}

/* Counts rows of a CSV whose column `col` equals `val` and returns min/max of column vcol among them. */
static size_t scan(const char *path, int col, const char *val, int vcol, double *vmin, double *vmax)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    size_t n = 0;
    *vmin = INFINITY;
    *vmax = -INFINITY;
    if (!fgets(line, sizeof line, f)) {
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof line, f)) {
        char *fld[16];
        int k = 0;
        for (char *p = strtok(line, ",\n\r"); p && k < 16; p = strtok(NULL, ",\n\r")) fld[k++] = p;
        if (k <= col || k <= vcol || strcmp(fld[col], val) != 0) continue;
        double v = strtod(fld[vcol], NULL);
        if (v < *vmin) *vmin = v;
        if (v > *vmax) *vmax = v;
        n++;
    }
    fclose(f);
    return n;
}

static void test_real_files(void)
{
    char path[1024];
    tu_shared_path(path, sizeof path, "traces-raw/azure-vm-noise-2024/sysbench_cpu_long_eastus_B8ms_events_per_s.csv");
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "test_trace_import: %s not readable: real-file checks not run\n", path);
        return;
    }
    /* Azure B8ms burstable VM 0: sysbench events/s, one run every 1-2 h; p99 as the idle reference */
    double vmin, vmax;
    size_t rows = scan(path, 3, "0", 0, &vmin, &vmax);
    atsc_import_opts o = atsc_import_opts_default();
    o.time_col = "starttime";
    o.value_col = "value";
    o.filter_col = "VM_id";
    o.filter_value = "0";
    o.ref_percentile = 99;
    o.compress = 3600; /* an hour of samples per second */
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    atsc_import_report rp;
    enum ats_status st = atsc_trace_import_csv(path, &o, &tr, &rp, &err);
    CHECK_MSG(st == ATS_OK, "%s", err.msg);
    if (tr) {
        fprintf(stderr, "azure B8ms VM 0: %zu rows, %zu samples over %.1f s (compressed), values %.1f..%.1f; "
                "%zu rows out of order (first at line %zu), %zu repeated-time rows\n", rows, tr->n,
                atsc_trace_duration(tr), vmin, vmax, rp.n_out_of_order, rp.first_out_of_order_line, rp.n_dup_rows);
        CHECK(rows > 100 && tr->n <= rows && tr->n > rows / 2);
        CHECK(rp.n_rows == rows && tr->n == rows - rp.n_dup_rows);
        CHECK(atsc_trace_validate(tr, path, &err) == ATS_OK);
        double mean, mn, mx;
        atsc_trace_stats(tr, ATSC_RES_CPU, atsc_trace_duration(tr), &mean, &mn, &mx);
        /* the slowest run relative to p99: min value / ref, ref within [p50, max] */
        CHECK(mx == 1.0);
        CHECK(mn >= vmin / vmax - 1e-12 && mn < 1.0);
        CHECK(mean > 0.8 && mean <= 1.0); /* README: p50 8205 vs min 7271 (-11 %) */
        /* the duration is the VM's lifetime / 3600: 2023-09-01 .. 2024-06-19 is about 7000 h */
        CHECK(atsc_trace_duration(tr) > 5000 && atsc_trace_duration(tr) < 8000);
        CHECK(tr->gpu_avail[tr->n / 2] == 1.0 && tr->pcie_avail[0] == 1.0);
        char out[600];
        snprintf(out, sizeof out, "%s/b8ms.h5", tmpdir);
        CHECK(atsc_trace_save(tr, out, &err) == ATS_OK);
        atsc_trace *back = NULL;
        CHECK(atsc_trace_load(out, &back, &err) == ATS_OK && back && back->n == tr->n);
        atsc_trace_free(back);
        unlink(out);
    }
    atsc_trace_free(tr);

    /* Alibaba PAI job 1, worker 6 (a straggler mid-run): batch times, slowdown-like -> --invert */
    tu_shared_path(path, sizeof path, "traces-raw/alibaba-pai-minibatch-2020/job_1_norm.csv");
    rows = scan(path, 1, "6", 4, &vmin, &vmax);
    o = atsc_import_opts_default();
    o.time_col = "time";
    o.value_col = "batch_time_norm";
    o.filter_col = "worker";
    o.filter_value = "6";
    o.resource = ATSC_RES_GPU;
    o.ref_percentile = 10;
    o.invert = 1;
    o.compress = 0.5; /* stretch: one unit of the time column = 2 s */
    tr = NULL;
    st = atsc_trace_import_csv(path, &o, &tr, NULL, &err);
    CHECK_MSG(st == ATS_OK, "%s", err.msg);
    if (tr) {
        fprintf(stderr, "alibaba job 1 worker 6: %zu rows, %zu samples, batch time %.0f..%.0f\n", rows, tr->n, vmin,
                vmax);
        CHECK(rows == 300 && tr->n == 300); /* README: 300 iterations */
        CHECK(tr->t_s[1] == 20.0); /* its rows are 10 apart in the time column: (11 - 1) / 0.5 */
        double mean, mn, mx;
        atsc_trace_stats(tr, ATSC_RES_GPU, atsc_trace_duration(tr), &mean, &mn, &mx);
        CHECK(mx == 1.0 && mn < 0.9); /* the straggler is much slower than its own p10 */
        CHECK(tr->cpu_avail[0] == 1.0);
    }
    atsc_trace_free(tr);
}

int main(void)
{
    uint64_t rng = tu_seed("test_trace_import");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats_trace_import_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_percentile(&rng);
    test_parse_time(&rng);
    test_random_csv(&rng);
    test_unsorted(&rng);
    test_refusals();
    test_real_files();
    rmdir(tmpdir);
    return tu_finish("test_trace_import");
}
