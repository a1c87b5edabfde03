/*
 * test_exec_golden — the correctness anchor on Karpathy's stories260K (../shared/models/stories260K):
 *  1. in-process: 256 greedy steps from BOS; at every step the top-1 id equals the reference and the
 *     top-1/top-2 logits match reference_greedy_steps.csv (float64 llama2.c) within 1e-4 relative;
 *  2. `ats run --temp 0 -n 256` prints reference_greedy_from_BOS.txt byte for byte (also with
 *     --threads 1 and with --split 2, the half-and-half hook);
 *  3. `ats quantize --type q8_0` then `ats run --print-ids`: the first >= 150 ids match the reference
 *     (the closest greedy decision is at step 185, margin 0.0042); Q4_0 / Q4_K (head at Q8_0, as
 *     llama.cpp) and Q4_0 --pure (head at Q4_0 too) are reported, not asserted;
 *  4. tokenizer: decode(encode(text)) == text, and "Once upon a time" encodes to the reference ids;
 *  5. the F16 KV cache (--kv-type f16, ex_session_opts.kv_type): in-process the top-1 id equals the
 *     reference at all 256 steps and the top-1/top-2 logits are within 5e-3 relative (measured
 *     1.2e-3: F16 K/V move them, the F32 run's 1e-4 does not hold); `ats run --kv-type f16` prints the
 *     reference text byte for byte (also --threads 1, --split 2, --chunk 1); Q8_0 with F16 KV is
 *     reported, not asserted (71 steps on AVX2, 114 scalar: the first near-tie flips, exec/README.md);
 *     a bad --kv-type value exits 2 with one line naming the option and the value.
 * Needs $ATS_BIN (set by CTest) and $ATS_SHARED_DIR.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ex/model.h"
#include "ex/session.h"
#include "ex/tokenizer.h"
#include "testutil.h"

static char model_path[1024], ref_txt[1024], ref_ids[1024], ref_csv[1024];

static int read_ids(const char *text, int *ids, int cap)
{
    int n = 0;
    const char *p = text;
    char *end;
    while (n < cap) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int)v;
        p = end;
    }
    return n;
}

/* Runs a shell command, returns its stdout (malloc'd) and exit status. */
static char *run_cmd(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t k;
    while ((k = fread(b + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (cap - n < 2) b = realloc(b, cap *= 2);
    }
    b[n] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return b;
}

static void test_in_process(ex_model *m, ats_qtype kv_type, double bound)
{
    ex_session *s = NULL;
    ats_err err;
    ex_session_opts o = ex_session_opts_default();
    o.kv_type = kv_type;
    CHECK(ex_session_new(m, kv_type == ATS_Q_F32 ? NULL : &o, &s, &err) == ATS_OK);
    FILE *f = fopen(ref_csv, "r");
    CHECK(f != NULL);
    if (!f || !s) return;
    char line[256];
    CHECK(fgets(line, sizeof line, f) != NULL); /* header */
    float *logits = malloc((size_t)m->arch.n_vocab * sizeof *logits);
    int steps = 0, ok_ids = 1;
    double worst = 0;
    while (fgets(line, sizeof line, f)) {
        int pos, in, id1, id2;
        double l1, l2;
        if (sscanf(line, "%d,%d,%d,%lf,%d,%lf", &pos, &in, &id1, &l1, &id2, &l2) != 6) continue;
        int32_t tok = in;
        CHECK(ex_session_forward(s, &tok, 1, logits, &err) == ATS_OK);
        int32_t best = 0;
        for (int i = 1; i < m->arch.n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        if (best != id1) {
            ok_ids = 0;
            fprintf(stderr, "step %d: top-1 %d, reference %d\n", pos, best, id1);
        }
        worst = fmax(worst, fabs(logits[id1] - l1) / fabs(l1));
        worst = fmax(worst, fabs(logits[id2] - l2) / fmax(fabs(l2), 1.0));
        steps++;
    }
    fclose(f);
    CHECK(steps == 256);
    CHECK(ok_ids);
    CHECK_MSG(worst <= bound, "%s KV: top-1/top-2 logits differ from the float64 reference by %.3g relative (bound %.3g)",
              ats_qtype_name(kv_type), worst, bound);
    fprintf(stderr, "test_exec_golden: %s KV cache: %d steps, top-1 %s the reference at every step, worst logit error "
                    "%.3g relative\n", ats_qtype_name(kv_type), steps, ok_ids ? "equals" : "DIFFERS FROM", worst);
    free(logits);
    ex_session_free(s);
}

static void test_tokenizer(ex_model *m)
{
    CHECK(m->tok != NULL);
    if (!m->tok) return;
    int32_t ids[4096];
    int64_t n;
    CHECK(ex_tokenizer_encode(m->tok, "Once upon a time", 1, ids, 4096, &n) == ATS_OK);
    int32_t want[] = {1, 403, 407, 261, 378};
    CHECK(n == 5 && memcmp(ids, want, sizeof want) == 0);
    const char *texts[] = {"Lily's mom said, \"Don't worry.\"\nThe end.", "héllo wörld — ✓ 日本", "a  b   c", "x"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        CHECK(ex_tokenizer_encode(m->tok, texts[k], 1, ids, 4096, &n) == ATS_OK);
        char out[4096] = {0}, piece[256];
        for (int64_t i = 1; i < n; i++) {
            ex_tokenizer_decode(m->tok, ids[i - 1], ids[i], piece, sizeof piece);
            strcat(out, piece);
        }
        CHECK_MSG(strcmp(out, texts[k]) == 0, "round trip '%s' -> '%s'", texts[k], out);
    }
    CHECK(ex_tokenizer_encode(m->tok, "Once upon a time", 1, ids, 2, &n) == ATS_ERANGE);
}

static int prefix_match(const char *out, const int *ref, int n_ref)
{
    int got[1024];
    int n = read_ids(out, got, 1024), k = 0;
    while (k < n && k < n_ref && got[k] == ref[k]) k++;
    return k;
}

/* `ats run ... -n 256 EXTRA` with the default, one thread, a CPU|CPU split and one-token chunks: each
 * output must be reference_greedy_from_BOS.txt byte for byte. */
static void check_text_variants(const char *bin, const char *extra)
{
    size_t rl;
    char *want = tu_slurp(ref_txt, &rl);
    CHECK(want != NULL);
    const char *variants[] = {"", "--threads 1", "--split 2", "--chunk 1"};
    char cmd[4096];
    int st;
    for (size_t v = 0; v < 4 && want; v++) {
        snprintf(cmd, sizeof cmd, "'%s' run --model '%s' --temp 0 -n 256 %s %s 2>/dev/null", bin, model_path, extra,
                 variants[v]);
        char *out = run_cmd(cmd, &st);
        CHECK(st == 0);
        CHECK_MSG(out && strcmp(out, want) == 0, "`ats run %s %s` output differs from reference_greedy_from_BOS.txt",
                  extra, variants[v]);
        free(out);
    }
    free(want);
}

static void test_cli(const char *bin, const int *ref, int n_ref)
{
    char cmd[4096];
    int st;
    check_text_variants(bin, "");
    /* quantized */
    char dir[] = "/tmp/ats_golden_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *types[] = {"q8_0", "q4_0", "q4_k", "q4_0"};
    const char *flags[] = {"", "", "", "--pure"};
    for (int t = 0; t < 4; t++) {
        snprintf(cmd, sizeof cmd, "'%s' quantize '%s' %s/%s.gguf --type %s %s 2>/dev/null", bin, model_path, dir, types[t],
                 types[t], flags[t]);
        char *out = run_cmd(cmd, &st);
        CHECK(st == 0);
        free(out);
        snprintf(cmd, sizeof cmd, "'%s' run --model %s/%s.gguf --temp 0 -n 256 --print-ids 2>/dev/null", bin, dir, types[t]);
        out = run_cmd(cmd, &st);
        CHECK(st == 0);
        int k = out ? prefix_match(out, ref, n_ref) : 0;
        fprintf(stderr, "test_exec_golden: %s%s%s matches the reference ids for the first %d of %d steps\n", types[t],
                flags[t][0] ? " " : "", flags[t], k, n_ref);
        if (t == 0) CHECK_MSG(k >= 150, "Q8_0 matched only %d steps (need >= 150)", k);
        else CHECK(k >= 1); /* Q4_0 diverges early on this tiny model (reported, see exec/README.md) */
        free(out);
        snprintf(cmd, sizeof cmd, "%s/%s.gguf", dir, types[t]);
        unlink(cmd);
    }
    rmdir(dir);
}

/* `ats run --kv-type f16`: the reference text byte for byte; Q8_0 reported; a bad value rejected */
static void test_cli_f16(const char *bin, const int *ref, int n_ref)
{
    char cmd[4096];
    int st;
    check_text_variants(bin, "--kv-type f16");
    /* the stats line names the cache type and its size: F16 is half of F32 */
    double mib[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        snprintf(cmd, sizeof cmd, "'%s' run --model '%s' --temp 0 -n 4 --kv-type %s 2>&1 >/dev/null", bin, model_path,
                 t ? "f16" : "f32");
        char *out = run_cmd(cmd, &st);
        CHECK(st == 0);
        const char *p = out ? strstr(out, t ? "(F16 KV cache " : "(F32 KV cache ") : NULL;
        CHECK_MSG(p && sscanf(p + 14, "%lf", &mib[t]) == 1, "stats line without the %s KV cache size: %s",
                  t ? "F16" : "F32", out ? out : "(none)");
        free(out);
    }
    CHECK_MSG(mib[0] > 0 && fabs(mib[1] * 2 - mib[0]) <= 0.2, "KV cache MiB: F32 %.1f, F16 %.1f (want half; printed to 0.1)",
              mib[0], mib[1]);
    snprintf(cmd, sizeof cmd, "'%s' run --model '%s' -n 4 --kv-type bf16 2>&1 >/dev/null", bin, model_path);
    char *out = run_cmd(cmd, &st);
    CHECK_MSG(st == 2 && out && strstr(out, "--kv-type") && strstr(out, "bf16") && strchr(out, '\n') == strrchr(out, '\n'),
              "--kv-type bf16: exit %d, message '%s' (want exit 2, one line naming --kv-type and bf16)", st,
              out ? out : "");
    free(out);
    /* Q8_0 with the F16 KV cache: reported */
    char dir[] = "/tmp/ats_golden_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' %s/q8_0.gguf --type q8_0 2>/dev/null", bin, model_path, dir);
    out = run_cmd(cmd, &st);
    CHECK(st == 0);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' run --model %s/q8_0.gguf --temp 0 -n 256 --print-ids --kv-type f16 2>/dev/null", bin,
             dir);
    out = run_cmd(cmd, &st);
    CHECK(st == 0);
    int k = out ? prefix_match(out, ref, n_ref) : 0;
    fprintf(stderr, "test_exec_golden: q8_0 with --kv-type f16 matches the reference ids for the first %d of %d steps "
                    "(reported, not asserted)\n", k, n_ref);
    CHECK(k >= 1);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/q8_0.gguf", dir);
    unlink(cmd);
    rmdir(dir);
}

int main(void)
{
    tu_seed("test_exec_golden");
    tu_shared_path(model_path, sizeof model_path, "models/stories260K/stories260K.gguf");
    tu_shared_path(ref_txt, sizeof ref_txt, "models/stories260K/reference_greedy_from_BOS.txt");
    tu_shared_path(ref_ids, sizeof ref_ids, "models/stories260K/reference_greedy_from_BOS.ids.txt");
    tu_shared_path(ref_csv, sizeof ref_csv, "models/stories260K/reference_greedy_steps.csv");
    ex_model *m = NULL;
    ats_err err;
    if (ex_model_load_gguf(model_path, &m, &err) != ATS_OK) {
        fprintf(stderr, "test_exec_golden: %s\n", err.msg);
        CHECK(0);
        return tu_finish("test_exec_golden");
    }
    char *ids_text = tu_slurp(ref_ids, NULL);
    int ref[1024], n_ref = ids_text ? read_ids(ids_text, ref, 1024) : 0;
    free(ids_text);
    CHECK(n_ref == 256);
    test_in_process(m, ATS_Q_F32, 1e-4);
    test_in_process(m, ATS_Q_F16, 5e-3);
    test_tokenizer(m);
    const char *bin = getenv("ATS_BIN");
    CHECK_MSG(bin && *bin, "ATS_BIN not set");
    if (bin && *bin) test_cli(bin, ref, n_ref);
    if (bin && *bin) test_cli_f16(bin, ref, n_ref);
    ex_model_free(m);
    return tu_finish("test_exec_golden");
}
