/* bench/src/util.c — the sink, clock, median and machine helpers of bench/bench.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"

/* fmt formatted into a buffer of n bytes, handed to fn (skipped when the sink has no such entry) */
static void sink_vsend(void (*fn)(void *, const char *), void *ctx, size_t n, const char *fmt, va_list ap)
{
    if (!fn) return;
    char buf[4096];
    vsnprintf(buf, n < sizeof buf ? n : sizeof buf, fmt, ap);
    fn(ctx, buf);
}

void bench_table(const bench_sink *sink, const char *fmt, ...)
{
    if (!sink) return;
    va_list ap;
    va_start(ap, fmt);
    sink_vsend(sink->table, sink->ctx, 4096, fmt, ap);
    va_end(ap);
}

void bench_note(const bench_sink *sink, const char *fmt, ...)
{
    if (!sink) return;
    va_list ap;
    va_start(ap, fmt);
    sink_vsend(sink->note, sink->ctx, 1024, fmt, ap);
    va_end(ap);
}

void bench_progress(const bench_sink *sink, const char *fmt, ...)
{
    if (!sink) return;
    va_list ap;
    va_start(ap, fmt);
    sink_vsend(sink->progress, sink->ctx, 512, fmt, ap);
    va_end(ap);
}

void bench_progress_bytes(void *sink, uint64_t done, uint64_t total)
{
    bench_progress(sink, "building dummy weights: %.2f of %.2f GiB", (double)done / 1073741824.0,
                   (double)total / 1073741824.0);
}

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_machine_get(bench_machine *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->host, sizeof m->host, "?");
    snprintf(m->cpu, sizeof m->cpu, "?");
    if (gethostname(m->host, sizeof m->host - 1) != 0) snprintf(m->host, sizeof m->host, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        if (m->n_cpu++ == 0) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(m->cpu, sizeof m->cpu, "%s", c + 2);
                m->cpu[strcspn(m->cpu, "\n")] = '\0';
            }
        }
    }
    if (f) fclose(f);
}
