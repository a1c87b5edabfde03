/*
 * sim/src/print.c — sim_summary_print: one line per policy of a session's summary, as a table, CSV or
 * JSON (sim/session.h).
 */
#include <math.h>
#include <stdio.h>

#include "sim/session.h"

/* ------------------------------------------------------------------ summary output */

/* one number of a CSV row: empty when not finite (e.g. no decode round, no TPOT) */
static void csv_num(FILE *f, const char *fmt, double v)
{
    fputc(',', f);
    if (isfinite(v)) fprintf(f, fmt, v);
}

/* one number of a JSON object: null when not finite */
static void json_num(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* one number of a table row: "-" when not finite */
static void table_num(FILE *f, int w, const char *fmt, double v)
{
    if (isfinite(v)) fprintf(f, fmt, w, v);
    else fprintf(f, "%*s", w, "-");
}

void sim_summary_print(FILE *f, const sim_session_result *r, int n, sim_format fmt)
{
    if (fmt == SIM_FMT_CSV) {
        fprintf(f, "policy,prefill_tok_s,decode_tok_s,ttft_s,tpot_mean_ms,tpot_p50_ms,tpot_p99_ms,"
                   "reschedules,gb_h2d,gpu_busy,requests,rounds,sim_s\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s", r[i].policy);
            csv_num(f, "%.4f", r[i].prefill_tok_s);
            csv_num(f, "%.4f", r[i].decode_tok_s);
            csv_num(f, "%.6f", r[i].ttft_mean_s);
            csv_num(f, "%.4f", 1e3 * r[i].tpot_mean_s);
            csv_num(f, "%.4f", 1e3 * r[i].tpot_p50_s);
            csv_num(f, "%.4f", 1e3 * r[i].tpot_p99_s);
            fprintf(f, ",%lld", (long long)r[i].n_resched);
            csv_num(f, "%.4f", r[i].bytes_h2d / 1e9);
            csv_num(f, "%.4f", r[i].gpu_busy_frac);
            fprintf(f, ",%lld,%zu", (long long)r[i].n_requests_done, r[i].n_rounds);
            csv_num(f, "%.6f", r[i].sim_s);
            fputc('\n', f);
        }
        return;
    }
    if (fmt == SIM_FMT_JSON) {
        fprintf(f, "[\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "  {\"policy\": \"%s\"", r[i].policy);
            json_num(f, "prefill_tok_s", "%.4f", r[i].prefill_tok_s);
            json_num(f, "decode_tok_s", "%.4f", r[i].decode_tok_s);
            json_num(f, "ttft_s", "%.6f", r[i].ttft_mean_s);
            json_num(f, "tpot_mean_s", "%.6f", r[i].tpot_mean_s);
            json_num(f, "tpot_p50_s", "%.6f", r[i].tpot_p50_s);
            json_num(f, "tpot_p99_s", "%.6f", r[i].tpot_p99_s);
            fprintf(f, ", \"reschedules\": %lld", (long long)r[i].n_resched);
            json_num(f, "gb_h2d", "%.4f", r[i].bytes_h2d / 1e9);
            json_num(f, "gb_prefetched", "%.4f", r[i].bytes_prefetched / 1e9);
            json_num(f, "gpu_busy", "%.4f", r[i].gpu_busy_frac);
            json_num(f, "pred_err", "%.4f", r[i].pred_err_mean);
            fprintf(f, ", \"requests\": %lld, \"rounds\": %zu", (long long)r[i].n_requests_done, r[i].n_rounds);
            json_num(f, "sim_s", "%.6f", r[i].sim_s);
            fprintf(f, ", \"events\": %llu}%s\n", (unsigned long long)r[i].events, i + 1 < n ? "," : "");
        }
        fprintf(f, "]\n");
        return;
    }
    fprintf(f, "%-16s %10s %10s %9s %10s %10s %10s %7s %9s %6s\n", "policy", "prefill", "decode", "TTFT",
            "TPOT mean", "TPOT p50", "TPOT p99", "resched", "GB h2d", "GPU");
    fprintf(f, "%-16s %10s %10s %9s %10s %10s %10s %7s %9s %6s\n", "", "tok/s", "tok/s", "s", "ms", "ms", "ms",
            "", "", "busy");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%-16s ", r[i].policy);
        table_num(f, 10, "%*.2f", r[i].prefill_tok_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", r[i].decode_tok_s);
        fputc(' ', f);
        table_num(f, 9, "%*.3f", r[i].ttft_mean_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", 1e3 * r[i].tpot_mean_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", 1e3 * r[i].tpot_p50_s);
        fputc(' ', f);
        table_num(f, 10, "%*.2f", 1e3 * r[i].tpot_p99_s);
        fprintf(f, " %7lld ", (long long)r[i].n_resched);
        table_num(f, 9, "%*.2f", r[i].bytes_h2d / 1e9);
        fputc(' ', f);
        table_num(f, 5, "%*.1f", 100.0 * r[i].gpu_busy_frac);
        fputc('%', f);
        if (r[i].n_requests_done == 0) fprintf(f, "  (no request completed in %.3g s simulated)", r[i].sim_s);
        fputc('\n', f);
    }
}
