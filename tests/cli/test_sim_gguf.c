/*
 * ats inspect / sim with --model FILE.gguf: the simulator's graph of a GGUF file is the executor's.
 * On stories260K (all F32) and a Q8_0 quantization of it (`ats quantize`: Q8_0 matrices, F32 norms),
 * every op of `ats inspect --format csv` has the name, type and weight bytes of the same op of the
 * executor's session graph (ex_session_graph), and each weight op the type and bytes of its tensor in
 * the GGUF's tensor table (ex_gguf, read independently of both graphs). `ats sim --trace none` runs on
 * both and names the file, as does `ats sweep`; --quant with a GGUF, a file without the magic, a truncated header and a
 * missing file are refused with one line naming the file, exit 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex/gguf.h"
#include "ex/model.h"
#include "ex/session.h"
#include "testutil.h"

static char dir[512];
static char out[1 << 20], err[1 << 16];

static int run(const char *args)
{
    return tu_run_ats_split(NULL, args, 300, dir, out, sizeof out, err, sizeof err);
}

/* inspect's CSV against the executor's session graph and the file's tensor table; returns the number of
   weight ops whose type is not F32 */
static int compare(const char *path)
{
    char args[2048];
    snprintf(args, sizeof args, "inspect --model %s --format csv --ctx 64", path);
    int rc = run(args);
    CHECK_MSG(rc == 0, "%s: rc %d: %s", args, rc, err);
    if (rc) return 0;
    ex_model *m = NULL;
    ats_err e = {{0}};
    CHECK_MSG(ex_model_load_gguf(path, &m, &e) == ATS_OK, "%s: %s", path, e.msg);
    ex_gguf *g = NULL;
    CHECK_MSG(ex_gguf_open(path, &g, &e) == ATS_OK, "%s: %s", path, e.msg);
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = 64;
    ex_session *s = NULL;
    CHECK_MSG(m && ex_session_new(m, &so, &s, &e) == ATS_OK, "session: %s", e.msg);
    if (!m || !g || !s) {
        ex_session_free(s);
        ex_gguf_free(g);
        ex_model_free(m);
        return 0;
    }
    const ats_graph *sg = ex_session_graph(s);
    int n = 0, typed = 0, weights = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "index,", 6) == 0) continue;
        int idx;
        char name[64], kind[16], type[16];
        unsigned long long wb;
        long long n_out, n_in;
        if (sscanf(line, "%d,%63[^,],%15[^,],%15[^,],%lld,%lld,%llu", &idx, name, kind, type, &n_out, &n_in, &wb) != 7) {
            CHECK_MSG(0, "%s: unparsed CSV line '%s'", path, line);
            continue;
        }
        CHECK_MSG(idx == n && idx < sg->n_ops, "%s: op %d at line %d of %d session ops", path, idx, n, sg->n_ops);
        if (idx != n || idx >= sg->n_ops) break;
        const ats_op *op = &sg->ops[idx];
        CHECK_MSG(strcmp(name, op->name) == 0, "%s: op %d '%s' vs session '%s'", path, idx, name, op->name);
        CHECK_MSG(wb == op->weight_bytes, "%s: op %d %s: %llu weight bytes, session %llu", path, idx, name, wb,
                  (unsigned long long)op->weight_bytes);
        if (op->kind != ATS_OP_ATTN) {
            CHECK_MSG(strcmp(type, ats_qtype_name(op->qtype)) == 0, "%s: op %d %s: type %s, session %s", path, idx,
                      name, type, ats_qtype_name(op->qtype));
            /* the file's tensor of this op (a tied head reads token_embd) */
            char tn[80];
            snprintf(tn, sizeof tn, "%s.weight", name);
            const ex_gguf_tensor *t = ex_gguf_find_tensor(g, tn);
            if (!t && op->role == ATS_ROLE_OUTPUT) t = ex_gguf_find_tensor(g, "token_embd.weight");
            CHECK_MSG(t != NULL, "%s: no tensor %s", path, tn);
            if (t) {
                CHECK_MSG(strcmp(type, ats_qtype_name(t->type)) == 0, "%s: %s: type %s, file %s", path, tn, type,
                          ats_qtype_name(t->type));
                CHECK_MSG(wb == t->bytes, "%s: %s: %llu bytes, file %llu", path, tn, wb, (unsigned long long)t->bytes);
                typed += t->type != ATS_Q_F32;
                weights++;
            }
        }
        n++;
    }
    CHECK_MSG(n == sg->n_ops && weights > 0, "%s: %d CSV ops, session %d, %d weight ops", path, n, sg->n_ops, weights);
    ex_session_free(s);
    ex_gguf_free(g);
    ex_model_free(m);
    return typed;
}

static void expect_refused(const char *args, const char *want1, const char *want2)
{
    int rc = run(args);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, want1) && (!want2 || strstr(err, want2)) && !out[0],
              "ats %s: rc %d, stderr '%s' (want '%s' and '%s')", args, rc, err, want1, want2 ? want2 : "");
}

int main(void)
{
    if (!tu_tmpdir(dir, sizeof dir, "test_sim_gguf")) return 1;
    char src[1024], q8[1200], args[4096];
    tu_shared_path(src, sizeof src, "models/stories260K/stories260K.gguf");
    snprintf(q8, sizeof q8, "%s/stories260K-q8_0.gguf", dir);
    snprintf(args, sizeof args, "quantize %s %s --type q8_0", src, q8);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    CHECK_MSG(compare(src) == 0, "stories260K.gguf is all F32");
    CHECK_MSG(compare(q8) > 0, "the Q8_0 file has no Q8_0 op in inspect");
    const char *files[2] = {src, q8};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "sim --model %s --trace none --prompt 64 --gen 8 --chunk 32", files[i]);
        int rc = run(args);
        CHECK_MSG(rc == 0 && strstr(out, i ? "stories260K-q8_0.gguf (gguf)" : "stories260K.gguf (gguf)") &&
                      strstr(out, "\nats "),
                  "%s: rc %d: %s%s", args, rc, out, err);
        snprintf(args, sizeof args, "sweep --model %s --trace h200-cpu-compile --eps 0.2 --interval 2 --policy ats --requests 2 --prompt 64 "
                 "--gen 8 --chunk 32", files[i]);
        rc = run(args);
        CHECK_MSG(rc == 0 && strstr(out, i ? "stories260K-q8_0.gguf (gguf)" : "stories260K.gguf (gguf)"),
                  "%s: rc %d: %s%s", args, rc, out, err);
        snprintf(args, sizeof args, "inspect --model %s --ctx 64", files[i]);
        rc = run(args);
        CHECK_MSG(rc == 0 && strstr(out, files[i]) && strstr(out, i ? "Q8_0" : "F32"), "%s: rc %d: %s", args, rc, err);
    }
    /* refusals: one line naming the file, exit 2 */
    snprintf(args, sizeof args, "sim --model %s --quant q4_0 --trace none", q8);
    expect_refused(args, q8, "--quant");
    snprintf(args, sizeof args, "inspect --model %s --quant f32", src);
    expect_refused(args, src, "--quant");
    char bad[1200];
    snprintf(bad, sizeof bad, "%s/not-a-model.gguf", dir);
    tu_write_text(bad, "{\"model_type\": \"llama\"}\n");
    snprintf(args, sizeof args, "sim --model %s --trace none", bad);
    expect_refused(args, bad, "magic");
    snprintf(bad, sizeof bad, "%s/truncated.gguf", dir);
    tu_write_text(bad, "GGUF\003\0\0\0 not really a model");
    snprintf(args, sizeof args, "inspect --model %s", bad);
    expect_refused(args, bad, NULL);
    /* a GGUF file without the .gguf suffix is recognised by its magic */
    snprintf(bad, sizeof bad, "%s/truncated-model", dir);
    tu_write_text(bad, "GGUF\003\0\0\0 not really a model");
    snprintf(args, sizeof args, "sweep --model %s --trace none --eps 0.2 --interval 2", bad);
    expect_refused(args, bad, NULL);
    CHECK_MSG(strstr(err, "not a model description") == NULL, "magic not recognised: %s", err);
    snprintf(args, sizeof args, "sim --model %s/missing.gguf --trace none", dir);
    expect_refused(args, "missing.gguf", NULL);
    return tu_finish("test_sim_gguf");
}
