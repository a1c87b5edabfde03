/*
 * common/src/trace_import.c — CSV time series → load trace (see atsc/trace_import.h).
 */
#include "atsc/trace_import.h"
#include "atsc/outfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

atsc_import_opts atsc_import_opts_default(void)
{
    atsc_import_opts o = {.time_col = "0", .value_col = "1", .filter_col = NULL, .filter_value = NULL,
                          .resource = ATSC_RES_CPU, .ref_percentile = 50.0, .invert = 0, .compress = 1.0,
                          .floor = 0.01};
    return o;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double atsc_percentile(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    if (n == 1) return v[0];
    double pos = p / 100.0 * (double)(n - 1);
    if (pos <= 0) return v[0];
    if (pos >= (double)(n - 1)) return v[n - 1];
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    return v[i] + f * (v[i + 1] - v[i]);
}

/* days from 1970-01-01 to y-m-d (proleptic Gregorian), Howard Hinnant's algorithm */
static long long days_from_civil(long long y, unsigned m, unsigned d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

int atsc_parse_decimal(const char *s, double *out)
{
    while (isspace((unsigned char)*s)) s++;
    const char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if (e == s) return -1;
    int digits = 0;
    for (const char *p = s; p < e; p++) { /* no hex (strtod reads 0x10 as 16), inf, nan */
        if (isdigit((unsigned char)*p)) digits = 1;
        else if (!strchr("+-.eE", *p)) return -1;
    }
    if (!digits) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end != e || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int leap(long long y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int atsc_parse_time(const char *s, double *out_s)
{
    while (isspace((unsigned char)*s)) s++;
    if (atsc_parse_decimal(s, out_s) == 0) return 0;
    /* each field digits only: sscanf's %d would take "-1" or " 5" */
    static const char shape[] = "dddd-dd-dd?dd:dd:dd";
    for (size_t k = 0; k < sizeof shape - 1; k++) {
        if (shape[k] == 'd' && !isdigit((unsigned char)s[k])) return -1;
        if (shape[k] != 'd' && shape[k] != '?' && s[k] != shape[k]) return -1;
        if (!s[k]) return -1;
    }
    int Y, M, D, h, mi, n = 0;
    double sec;
    char sep;
    if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%lf%n", &Y, &M, &D, &sep, &h, &mi, &sec, &n) != 7) return -1;
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if ((sep != ' ' && sep != 'T') || M < 1 || M > 12 || D < 1 || D > mdays[M - 1] + (M == 2 && leap(Y)) ||
        h > 23 || mi > 59 || sec < 0 || sec >= 61)
        return -1; /* 2023-02-30 is no date (mktime-like normalization would make it March 2) */
    if (s[19] != '\0' && s[19] != '.' && !isspace((unsigned char)s[19]) && s[19] != 'Z') return -1;
    const char *rest = s + n;
    while (isspace((unsigned char)*rest)) rest++;
    if (*rest == 'Z') rest++;
    if (*rest) return -1;
    *out_s = (double)days_from_civil(Y, (unsigned)M, (unsigned)D) * 86400.0 + h * 3600.0 + mi * 60.0 + sec;
    return 0;
}

/* Splits a CSV line in place at commas (no quoting in the supported files; quotes are stripped). */
static int split_csv(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    size_t len = strlen(p);
    while (len && (p[len - 1] == '\n' || p[len - 1] == '\r')) p[--len] = '\0';
    for (;;) {
        if (n == max) return -1;
        char *c = strchr(p, ',');
        if (c) *c = '\0';
        size_t l = strlen(p);
        if (l >= 2 && p[0] == '"' && p[l - 1] == '"') {
            p[l - 1] = '\0';
            p++;
        }
        fields[n++] = p;
        if (!c) break;
        p = c + 1;
    }
    return n;
}

/* Column by header name or 0-based index: the index, -1 when absent, -3 when a number past the
 * header's columns, -4 when the name is in the header more than once. */
static int find_col(char **hdr, int nh, const char *want)
{
    for (int i = 0; i < nh; i++)
        if (strcmp(hdr[i], want) == 0) {
            for (int j = i + 1; j < nh; j++)
                if (strcmp(hdr[j], want) == 0) return -4;
            return i;
        }
    char *end = NULL;
    long k = strtol(want, &end, 10);
    if (end != want && *end == '\0' && k >= 0) return k < nh ? (int)k : -3;
    return -1;
}

/* Echoed file contents and names are cut to 60 characters ("..." marks the cut). */
#define CUT(s) (int)(strlen(s) > 60 ? 57 : 60), (s), (strlen(s) > 60 ? "..." : "")

typedef struct row {
    double t, v;
    size_t line; /* CSV line: ties keep file order, so equal times average in a fixed order */
} row;

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->t != y->t) return (x->t > y->t) - (x->t < y->t);
    return (x->line > y->line) - (x->line < y->line);
}

#define MAX_FIELDS 64

enum ats_status atsc_trace_import_csv(const char *path, const atsc_import_opts *o, atsc_trace **out,
                                      atsc_import_report *report, ats_err *err)
{
    *out = NULL;
    atsc_import_report rp;
    memset(&rp, 0, sizeof rp);
    if (!(o->ref_percentile > 0 && o->ref_percentile <= 100))
        return ats_err_set(err, ATS_EINVAL, "import: percentile %g must be in (0, 100]", o->ref_percentile);
    if (!(o->compress > 1e-9) || !isfinite(o->compress))
        return ats_err_set(err, ATS_EINVAL, "import: compression factor %g must be > 1e-9", o->compress);
    if (!(o->floor > 0 && o->floor <= 1))
        return ats_err_set(err, ATS_EINVAL, "import: floor %g must be in (0, 1]", o->floor);
    if ((unsigned)o->resource >= ATSC_RES_COUNT)
        return ats_err_set(err, ATS_EINVAL, "import: bad resource %d", (int)o->resource);
    if ((o->filter_col == NULL) != (o->filter_value == NULL))
        return ats_err_set(err, ATS_EINVAL, "import: a filter needs both a column and a value");

    atsc_in_note(path); /* never to be replaced by an output of this run */
    FILE *f = fopen(path, "r");
    if (!f) return ats_err_set(err, ATS_ENOTFOUND, "%s: cannot open: %s", path, strerror(errno));
    enum ats_status st = ATS_EINVAL;
    char *line = NULL;
    size_t cap = 0, nrows = 0, rcap = 0;
    row *rows = NULL;
    double *vals = NULL;
    atsc_trace *tr = NULL;
    char *fields[MAX_FIELDS];
    if (getline(&line, &cap, f) < 0) {
        ats_err_set(err, ATS_EINVAL, "%s: line 1: empty file (need a header row)", path);
        goto done;
    }
    if ((unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
        memmove(line, line + 3, strlen(line + 3) + 1); /* UTF-8 byte-order mark (spreadsheet exports) */
    char *hdr_copy = strdup(line);
    if (!hdr_copy) {
        st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    char *hdr[MAX_FIELDS];
    int nh = split_csv(hdr_copy, hdr, MAX_FIELDS);
    if (nh < 0) {
        free(hdr_copy);
        ats_err_set(err, ATS_EINVAL, "%s: line 1: more than %d columns", path, MAX_FIELDS);
        goto done;
    }
    int ct = nh > 0 ? find_col(hdr, nh, o->time_col) : -1;
    int cv = nh > 0 ? find_col(hdr, nh, o->value_col) : -1;
    int cf = (nh > 0 && o->filter_col) ? find_col(hdr, nh, o->filter_col) : -2;
    free(hdr_copy);
    {
        const char *flag[3] = {"--time-col", "--value-col", "--filter"};
        const char *want[3] = {o->time_col, o->value_col, o->filter_col ? o->filter_col : ""};
        int got[3] = {ct, cv, cf};
        for (int k = 0; k < 3; k++) {
            if (got[k] == -3) {
                st = ats_err_set(err, ATS_EINVAL, "%s: line 1: %s %.*s%s: the header has only %d column%s", path,
                                 flag[k], CUT(want[k]), nh, nh == 1 ? "" : "s");
                goto done;
            }
            if (got[k] == -4) {
                st = ats_err_set(err, ATS_EINVAL, "%s: line 1: %s: column '%.*s%s' is in the header more than once "
                                 "(give its 0-based index)", path, flag[k], CUT(want[k]));
                goto done;
            }
            if (got[k] == -1) {
                st = ats_err_set(err, ATS_ENOTFOUND, "%s: line 1: %s: no column '%.*s%s' in the header", path,
                                 flag[k], CUT(want[k]));
                goto done;
            }
        }
    }
    if (ct == cv) {
        st = ats_err_set(err, ATS_EINVAL, "%s: line 1: --time-col %.*s%s and --value-col %.*s%s are the same column (%d)",
                         path, CUT(o->time_col), CUT(o->value_col), ct);
        goto done;
    }
    size_t lineno = 1;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        if (line[0] == '\n' || line[0] == '\r' || line[0] == '\0') continue;
        int nf = split_csv(line, fields, MAX_FIELDS);
        if (nf != nh) { /* ragged rows would silently shift columns */
            if (nf < 0) ats_err_set(err, ATS_EINVAL, "%s: line %zu: more than %d fields, the header has %d", path, lineno,
                                    MAX_FIELDS, nh);
            else ats_err_set(err, ATS_EINVAL, "%s: line %zu: %d fields, the header has %d", path, lineno, nf, nh);
            goto done;
        }
        if (cf >= 0 && strcmp(fields[cf], o->filter_value) != 0) continue;
        row r = {.line = lineno};
        if (atsc_parse_time(fields[ct], &r.t) != 0) {
            ats_err_set(err, ATS_EINVAL, "%s: line %zu, column '%.*s%s': bad time '%.*s%s' (need decimal seconds "
                        "or a valid date YYYY-MM-DD HH:MM:SS[.f] UTC)", path, lineno, CUT(o->time_col),
                        CUT(fields[ct]));
            goto done;
        }
        if (atsc_parse_decimal(fields[cv], &r.v) != 0) {
            ats_err_set(err, ATS_EINVAL, "%s: line %zu, column '%.*s%s': bad value '%.*s%s' (need a finite decimal "
                        "number)", path, lineno, CUT(o->value_col), CUT(fields[cv]));
            goto done;
        }
        if (r.v < 0 && rp.n_neg_values++ == 0) {
            rp.first_neg_value_line = lineno;
            rp.first_neg_value = r.v;
        }
        if (nrows == rcap) {
            size_t nc = rcap ? 2 * rcap : 1024;
            row *nr = realloc(rows, nc * sizeof *rows);
            if (!nr) {
                st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory at line %zu", path, lineno);
                goto done;
            }
            rows = nr;
            rcap = nc;
        }
        if (nrows > 0 && r.t < rows[nrows - 1].t && rp.n_out_of_order++ == 0) {
            rp.first_out_of_order_line = lineno;
            rp.ooo_t = r.t;
            rp.ooo_t_prev = rows[nrows - 1].t;
        }
        if (r.t < 0) rp.n_negative++;
        rows[nrows++] = r;
    }
    if (nrows == 0) {
        ats_err_set(err, ATS_EINVAL, "%s: no data rows%s%s%s%s", path, o->filter_col ? " with " : "",
                    o->filter_col ? o->filter_col : "", o->filter_col ? " = " : "",
                    o->filter_col ? o->filter_value : "");
        goto done;
    }
    /* order by time (file order among equal times); merge equal times by their mean */
    qsort(rows, nrows, sizeof *rows, cmp_row);
    rp.n_rows = nrows;
    rp.t_earliest = rows[0].t;
    rp.earliest_line = rows[0].line;
    size_t m = 0;
    for (size_t i = 0; i < nrows;) {
        size_t j = i;
        double acc = 0;
        while (j < nrows && rows[j].t == rows[i].t) acc += rows[j++].v;
        if (j - i > 1) {
            rp.n_dup_times++;
            rp.n_dup_rows += j - i - 1;
            if (!rp.first_dup_line || rows[i + 1].line < rp.first_dup_line) rp.first_dup_line = rows[i + 1].line;
        }
        rows[m].t = rows[i].t;
        rows[m].v = acc / (double)(j - i);
        m++;
        i = j;
    }
    vals = malloc(m * sizeof *vals);
    if (!vals) {
        st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < m; i++) vals[i] = rows[i].v;
    double ref = atsc_percentile(vals, m, o->ref_percentile);
    if (!(ref > 0)) {
        ats_err_set(err, ATS_EINVAL, "%s: column '%s': reference (percentile %g) = %g, must be > 0", path,
                    o->value_col, o->ref_percentile, ref);
        goto done;
    }
    if (!(tr = atsc_trace_new(m))) {
        st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    double *a = atsc_trace_res(tr, o->resource);
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if (r != (int)o->resource) {
            double *b = atsc_trace_res(tr, (enum atsc_resource)r);
            for (size_t i = 0; i < m; i++) b[i] = 1.0;
        }
    for (size_t i = 0; i < m; i++) {
        tr->t_s[i] = (rows[i].t - rows[0].t) / o->compress;
        double v = rows[i].v;
        double av = o->invert ? (v > 0 ? ref / v : o->floor) : v / ref;
        if (!(av >= o->floor)) av = o->floor;
        if (av > 1.0) av = 1.0;
        a[i] = av;
    }
    /* compression can merge nearly equal times into equal doubles: keep strictly increasing */
    for (size_t i = 1; i < m; i++)
        if (!(tr->t_s[i] > tr->t_s[i - 1])) {
            ats_err_set(err, ATS_EINVAL, "%s: times of rows %zu and %zu coincide after compression by %g", path,
                        i - 1, i, o->compress);
            goto done;
        }
    if (m > 0 && tr->t_s[m - 1] > 1e7) { /* the simulator refuses longer runs (--duration limit) */
        ats_err_set(err, ATS_EINVAL, "%s: the series spans %.3g s after compression by %g (must be <= 1e7 s; "
                    "times not in seconds? raise --compress)", path, tr->t_s[m - 1], o->compress);
        goto done;
    }
    if ((st = atsc_trace_validate(tr, path, err)) != ATS_OK) goto done; /* e.g. times overflowed to inf */
    st = ATS_EINVAL;
    snprintf(tr->source, sizeof tr->source,
             "ats trace import %s --time-col %s --value-col %s%s%s%s%s --resource %s --percentile %g%s "
             "--compress %g --floor %g",
             path, o->time_col, o->value_col, o->filter_col ? " --filter " : "", o->filter_col ? o->filter_col : "",
             o->filter_col ? "=" : "", o->filter_col ? o->filter_value : "", atsc_resource_name(o->resource),
             o->ref_percentile, o->invert ? " --invert" : "", o->compress, o->floor);
    snprintf(tr->machine, sizeof tr->machine, "imported");
    snprintf(tr->description, sizeof tr->description,
             "%s availability = %s (reference = p%g of %zu samples = %g), clipped to [%g, 1]; time / %g; other "
             "resources 1",
             atsc_resource_name(o->resource), o->invert ? "ref / value" : "value / ref", o->ref_percentile, m, ref,
             o->floor, o->compress);
    {
        size_t l = strlen(tr->description);
        if (rp.n_out_of_order)
            l += (size_t)snprintf(tr->description + l, sizeof tr->description - l, "; %zu rows out of order, sorted",
                                  rp.n_out_of_order);
        if (l < sizeof tr->description && rp.n_dup_rows)
            l += (size_t)snprintf(tr->description + l, sizeof tr->description - l,
                                  "; %zu rows at %zu repeated times, averaged", rp.n_dup_rows + rp.n_dup_times,
                                  rp.n_dup_times);
        if (l < sizeof tr->description && rp.n_negative)
            snprintf(tr->description + l, sizeof tr->description - l, "; %zu negative times, shifted", rp.n_negative);
    }
    *out = tr;
    tr = NULL;
    if (report) *report = rp;
    st = ATS_OK;
done:
    atsc_trace_free(tr);
    free(vals);
    free(rows);
    free(line);
    fclose(f);
    return st;
}
