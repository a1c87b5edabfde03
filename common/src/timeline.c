/* Chrome trace-event JSON writer, streaming (see atsc/timeline.h). Format reference: "Trace Event
 * Format" (Google, docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
 * "X" complete events with ts/dur in µs, "C" counters, "M" metadata (process_name, thread_name,
 * thread_sort_index). */
#include "atsc/timeline.h"
#include "atsc/outfile.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct atsc_timeline {
    FILE *f;
    char *path;
    atsc_out *out;   /* the temporary (outfile.h); NULL after commit */
    const char *tmp; /* its name, owned by out */
    long long n_events;
    int n_pid;      /* processes declared: ids 1..n_pid */
    int n_tid;      /* tracks declared: ids 1..n_tid */
    int *tid_pid;   /* (n_tid + 1) process of each track */
    int tid_cap;
    int write_failed; /* errno of the first failed write (EIO when unknown), 0 while none */
    /* counter series seen: last value of each (pid, name), to drop repeated samples */
    struct series { int pid; char *name; double last; } *series;
    int n_series, cap_series;
    size_t nbuf;        /* bytes pending in buf */
    char buf[1 << 16];  /* events are formatted here and written in large blocks */
};

/* ---- output buffer: formatting by hand is ~3x faster than fprintf for the hot slice path ---- */

static void flush_buf(atsc_timeline *tl)
{
    errno = 0;
    if (tl->nbuf && fwrite(tl->buf, 1, tl->nbuf, tl->f) != tl->nbuf && !tl->write_failed)
        tl->write_failed = errno ? errno : EIO;
    tl->nbuf = 0;
}

static void out_mem(atsc_timeline *tl, const char *s, size_t n)
{
    if (tl->nbuf + n > sizeof tl->buf) {
        flush_buf(tl);
        if (n > sizeof tl->buf) {
            errno = 0;
            if (fwrite(s, 1, n, tl->f) != n && !tl->write_failed) tl->write_failed = errno ? errno : EIO;
            return;
        }
    }
    memcpy(tl->buf + tl->nbuf, s, n);
    tl->nbuf += n;
}

static void out_str(atsc_timeline *tl, const char *s) { out_mem(tl, s, strlen(s)); }

static void out_ch(atsc_timeline *tl, char c)
{
    if (tl->nbuf == sizeof tl->buf) flush_buf(tl);
    tl->buf[tl->nbuf++] = c;
}

static void out_i64(atsc_timeline *tl, long long v)
{
    char d[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do { d[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) out_ch(tl, '-');
    while (n) out_ch(tl, d[--n]);
}

/* printf-style, for the rare paths (metadata, counters, numeric args). */
static void out_fmt(atsc_timeline *tl, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void out_fmt(atsc_timeline *tl, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) out_mem(tl, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Writes s as a JSON string literal (with quotes). */
static void put_str(atsc_timeline *tl, const char *s)
{
    out_ch(tl, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': out_mem(tl, "\\\"", 2); break;
        case '\\': out_mem(tl, "\\\\", 2); break;
        case '\n': out_mem(tl, "\\n", 2); break;
        case '\r': out_mem(tl, "\\r", 2); break;
        case '\t': out_mem(tl, "\\t", 2); break;
        default:
            if (*p < 0x20) out_fmt(tl, "\\u%04x", *p);
            else out_ch(tl, (char)*p);
        }
    }
    out_ch(tl, '"');
}

/* Separator before every event but the first. */
static void begin_event(atsc_timeline *tl)
{
    out_str(tl, tl->n_events ? ",\n" : "\n");
    tl->n_events++;
}

/* Seconds → µs text with ns resolution ("%.3f" of t·1e6, formatted by hand). */
static void put_us(atsc_timeline *tl, double t_s)
{
    long long ns = llround(t_s * 1e9);
    if (ns < 0) {
        out_ch(tl, '-');
        ns = -ns;
    }
    out_i64(tl, ns / 1000);
    char frac[4] = {'.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10), (char)('0' + ns % 10)};
    out_mem(tl, frac, 4);
}

enum ats_status atsc_timeline_open(const char *path, const char *meta_json, atsc_timeline **out,
                                   ats_err *err)
{
    if (!path || !out) return ats_err_set(err, ATS_EINVAL, "atsc_timeline_open: NULL argument");
    *out = NULL;
    json_t *meta = NULL;
    if (meta_json) {
        json_error_t je;
        meta = json_loads(meta_json, 0, &je);
        if (!meta || !json_is_object(meta)) {
            json_decref(meta);
            return ats_err_set(err, ATS_EINVAL, "%s: timeline metadata is not a JSON object: %s",
                               path, meta ? "not an object" : je.text);
        }
    }
    atsc_timeline *tl = calloc(1, sizeof *tl);
    if (!tl || !(tl->path = strdup(path))) {
        json_decref(meta);
        if (tl) { free(tl->path); free(tl); }
        return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    }
    enum ats_status ost = atsc_out_open(path, &tl->out, err);
    if (ost) {
        json_decref(meta);
        free(tl->path); free(tl);
        return ost;
    }
    tl->tmp = atsc_out_tmp(tl->out);
    tl->f = fopen(tl->tmp, "w");
    if (!tl->f) {
        ats_err_set(err, ATS_EINVAL, "%s: cannot create: %s", path, strerror(errno));
        json_decref(meta);
        atsc_out_abort(tl->out); free(tl->path); free(tl);
        return ATS_EINVAL;
    }
    out_str(tl, "{\"displayTimeUnit\":\"ms\",\"otherData\":");
    if (meta) {
        char *s = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
        out_str(tl, s ? s : "{}");
        free(s);
        json_decref(meta);
    } else {
        out_str(tl, "{}");
    }
    out_str(tl, ",\"traceEvents\":[");
    *out = tl;
    return ATS_OK;
}

int atsc_timeline_process(atsc_timeline *tl, const char *name)
{
    if (!tl || tl->write_failed) return -1;
    int pid = ++tl->n_pid;
    begin_event(tl);
    out_fmt(tl, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    put_str(tl, name);
    out_str(tl, "}}");
    begin_event(tl);
    out_fmt(tl, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"sort_index\":%d}}", pid, pid);
    return pid;
}

int atsc_timeline_track(atsc_timeline *tl, int pid, const char *name)
{
    if (!tl || tl->write_failed || pid < 1 || pid > tl->n_pid) return -1;
    if (tl->n_tid + 2 > tl->tid_cap) {
        int cap = tl->tid_cap ? 2 * tl->tid_cap : 16;
        int *p = realloc(tl->tid_pid, (size_t)cap * sizeof *p);
        if (!p) { tl->write_failed = 1; return -1; }
        tl->tid_pid = p;
        tl->tid_cap = cap;
    }
    int tid = ++tl->n_tid;
    tl->tid_pid[tid] = pid;
    begin_event(tl);
    out_fmt(tl, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
            pid, tid);
    put_str(tl, name);
    out_str(tl, "}}");
    begin_event(tl);
    out_fmt(tl, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"sort_index\":%d}}", pid, tid, tid);
    return tid;
}

static enum ats_status slice_head(atsc_timeline *tl, int tid, const char *name, const char *cat,
                                  double t_start_s, double dur_s, ats_err *err)
{
    if (!tl) return ats_err_set(err, ATS_EINVAL, "timeline: NULL handle");
    if (tid < 1 || tid > tl->n_tid)
        return ats_err_set(err, ATS_EINVAL, "%s: event '%s': unknown track %d", tl->path,
                           name ? name : "", tid);
    if (!isfinite(t_start_s) || !isfinite(dur_s) || dur_s < 0)
        return ats_err_set(err, ATS_EINVAL, "%s: event '%s': start %g s, duration %g s (must be "
                           "finite, duration >= 0)", tl->path, name ? name : "", t_start_s, dur_s);
    begin_event(tl);
    out_str(tl, "{\"ph\":\"X\",\"pid\":");
    out_i64(tl, tl->tid_pid[tid]);
    out_str(tl, ",\"tid\":");
    out_i64(tl, tid);
    out_str(tl, ",\"ts\":");
    put_us(tl, t_start_s);
    out_str(tl, ",\"dur\":");
    put_us(tl, dur_s);
    out_str(tl, ",\"name\":");
    put_str(tl, name);
    if (cat) {
        out_str(tl, ",\"cat\":");
        put_str(tl, cat);
    }
    return ATS_OK;
}

enum ats_status atsc_timeline_slice(atsc_timeline *tl, int tid, const char *name, const char *cat,
                                    double t_start_s, double dur_s, const char *args_json,
                                    ats_err *err)
{
    enum ats_status st = slice_head(tl, tid, name, cat, t_start_s, dur_s, err);
    if (st) return st;
    if (args_json) {
        out_str(tl, ",\"args\":");
        out_str(tl, args_json);
    }
    out_ch(tl, '}');
    return ATS_OK;
}

enum ats_status atsc_timeline_slice_args(atsc_timeline *tl, int tid, const char *name,
                                         const char *cat, double t_start_s, double dur_s,
                                         int n, const char *const *keys, const double *vals,
                                         ats_err *err)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(vals[i]))
            return ats_err_set(err, ATS_EINVAL, "%s: event '%s': arg '%s' = %g (must be finite)",
                               tl ? tl->path : "timeline", name ? name : "", keys[i], vals[i]);
    enum ats_status st = slice_head(tl, tid, name, cat, t_start_s, dur_s, err);
    if (st) return st;
    out_str(tl, ",\"args\":{");
    for (int i = 0; i < n; i++) {
        if (i) out_ch(tl, ',');
        put_str(tl, keys[i]);
        out_fmt(tl, ":%.17g", vals[i]);
    }
    out_str(tl, "}}");
    return ATS_OK;
}

enum ats_status atsc_timeline_counter(atsc_timeline *tl, int pid, const char *name,
                                      const char *unit, double t_s, double value, ats_err *err)
{
    if (!tl) return ats_err_set(err, ATS_EINVAL, "timeline: NULL handle");
    if (pid < 1 || pid > tl->n_pid)
        return ats_err_set(err, ATS_EINVAL, "%s: counter '%s': unknown process %d", tl->path,
                           name ? name : "", pid);
    if (!isfinite(t_s) || !isfinite(value))
        return ats_err_set(err, ATS_EINVAL, "%s: counter '%s': t = %g s, value %g (must be finite)",
                           tl->path, name ? name : "", t_s, value);
    /* a sample equal to the series' previous one changes nothing: drop it */
    struct series *sr = NULL;
    for (int i = 0; i < tl->n_series && !sr; i++)
        if (tl->series[i].pid == pid && strcmp(tl->series[i].name, name ? name : "") == 0)
            sr = &tl->series[i];
    if (sr && sr->last == value) return ATS_OK;
    if (!sr) {
        if (tl->n_series == tl->cap_series) {
            int cap = tl->cap_series ? 2 * tl->cap_series : 8;
            struct series *p = realloc(tl->series, (size_t)cap * sizeof *p);
            if (!p) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", tl->path);
            tl->series = p;
            tl->cap_series = cap;
        }
        sr = &tl->series[tl->n_series];
        if (!(sr->name = strdup(name ? name : ""))) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", tl->path);
        sr->pid = pid;
        tl->n_series++;
    }
    sr->last = value;
    begin_event(tl);
    out_fmt(tl, "{\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":", pid);
    put_us(tl, t_s);
    out_str(tl, ",\"name\":");
    put_str(tl, name);
    out_str(tl, ",\"args\":{");
    put_str(tl, unit ? unit : "value");
    out_fmt(tl, ":%.9g}}", value);
    return ATS_OK;
}

long long atsc_timeline_n_events(const atsc_timeline *tl) { return tl ? tl->n_events : 0; }

const char *atsc_timeline_tmp_path(const atsc_timeline *tl) { return tl ? tl->tmp : NULL; }

static void destroy(atsc_timeline *tl)
{
    for (int i = 0; i < tl->n_series; i++) free(tl->series[i].name);
    free(tl->series);
    free(tl->tid_pid);
    atsc_out_abort(tl->out); /* no-op after commit */
    free(tl->path);
    free(tl);
}

enum ats_status atsc_timeline_close(atsc_timeline *tl, ats_err *err)
{
    if (!tl) return ats_err_set(err, ATS_EINVAL, "timeline: NULL handle");
    out_str(tl, "\n]}\n");
    flush_buf(tl);
    int bad = tl->write_failed;
    if (!bad && ferror(tl->f)) bad = EIO;
    errno = 0;
    if (fclose(tl->f) != 0 && !bad) bad = errno ? errno : EIO;
    enum ats_status st = ATS_OK;
    if (bad) {
        st = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s", tl->path, strerror(bad));
    } else {
        st = atsc_out_commit(tl->out, err); /* fsync + rename; frees out */
        tl->out = NULL;
    }
    destroy(tl); /* removes the temporary after a failure */
    return st;
}

void atsc_timeline_abort(atsc_timeline *tl)
{
    if (!tl) return;
    fclose(tl->f);
    destroy(tl);
}
