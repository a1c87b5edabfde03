/* atsc_hw_load: the committed descriptions load with their figures (and no op table); random descriptions
 * round-trip (JSON units → SI units); a random measured op table (`ats profile`'s) written by
 * atsc_hw_table_json loads back with the same numbers; every kind of bad input is refused with a
 * message naming the file and the field. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ats/graph.h"
#include "atsc/hw_json.h"
#include "testutil.h"

static char tmpdir[256];

/* Writes j to a fresh file in tmpdir; returns its path (static buffer). */
static const char *write_json(const json_t *j, const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    if (json_dump_file(j, path, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    return path;
}

static const char *write_text(const char *text, const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) exit(1);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Object at dotted path `p` (all but the last component), creating nothing; NULL if absent. */
static json_t *parent_of(json_t *root, const char *p, const char **last)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s", p);
    json_t *o = root;
    char *s = buf, *dot;
    while ((dot = strchr(s, '.'))) {
        *dot = '\0';
        o = json_object_get(o, s);
        if (!o) return NULL;
        s = dot + 1;
    }
    *last = p + (s - buf);
    return o;
}

static void set_path(json_t *root, const char *p, json_t *v)
{
    const char *last;
    json_t *o = parent_of(root, p, &last);
    if (!o) { fprintf(stderr, "test bug: no parent for %s\n", p); exit(1); }
    json_object_set_new(o, last, v);
}

static void del_path(json_t *root, const char *p)
{
    const char *last;
    json_t *o = parent_of(root, p, &last);
    if (!o || json_object_del(o, last) != 0) { fprintf(stderr, "test bug: cannot delete %s\n", p); exit(1); }
}

static json_t *load_base(void)
{
    char p[512];
    tu_source_path(p, sizeof p, "sim/hw/rtx3060-laptop.json");
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j) { fprintf(stderr, "%s: %s\n", p, je.text); exit(1); }
    return j;
}

/* Loads the mutated description; expects ATS_EINVAL and every `want` substring in the message. */
static void expect_bad(json_t *j, const char *want1, const char *want2)
{
    const char *path = write_json(j, "bad.json");
    ats_hw hw;
    ats_err e = {{0}};
    enum ats_status st = atsc_hw_load(path, &hw, &e);
    CHECK_MSG(st == ATS_EINVAL, "want EINVAL for '%s', got %d (%s)", want1, (int)st, e.msg);
    CHECK_MSG(strstr(e.msg, path) != NULL, "message does not name the file: %s", e.msg);
    CHECK_MSG(strstr(e.msg, want1) != NULL, "message lacks '%s': %s", want1, e.msg);
    if (want2) CHECK_MSG(strstr(e.msg, want2) != NULL, "message lacks '%s': %s", want2, e.msg);
    CHECK_MSG(strchr(e.msg, '\n') == NULL, "message is not one line: %s", e.msg);
}

static void test_committed(void)
{
    static const char *const names[] = {"rtx3060-laptop", "rtx4090-desktop", "h200-host"};
    for (int i = 0; i < 3; i++) {
        char p[512], rel[128];
        snprintf(rel, sizeof rel, "sim/hw/%s.json", names[i]);
        tu_source_path(p, sizeof p, rel);
        ats_hw hw;
        ats_err e = {{0}};
        enum ats_status st = atsc_hw_load(p, &hw, &e);
        CHECK_MSG(st == ATS_OK, "%s: %s", p, e.msg);
        if (st) continue;
        CHECK(strcmp(hw.name, names[i]) == 0);
        CHECK(hw.source[0] != '\0');
        CHECK(hw.op_table.n == 0); /* descriptions, not profiles: the roofline model (golden outputs) */
        /* plausibility: GPU memory faster than CPU memory, link slower than both */
        CHECK(hw.gpu_mem_bw > hw.cpu_mem_bw);
        CHECK(hw.pcie_h2d_bw < hw.cpu_mem_bw);
        CHECK(hw.gpu_flops > hw.cpu_flops);
        CHECK(hw.eff_cpu.q_scale[ATS_Q_Q4_K] >= 1.0);
        CHECK(hw.eff_cpu.q_scale[3] == 1.0); /* id 3 is no type: left at 1 */
    }
    char p[512];
    ats_hw hw;
    ats_err e;
    tu_source_path(p, sizeof p, "sim/hw/h200-host.json");
    if (atsc_hw_load(p, &hw, &e) == ATS_OK) {
        /* measured figures, converted to SI units */
        CHECK(hw.n_copy_engines == 3);
        CHECK_REL(hw.pcie_h2d_bw, 55.4e9, 1e-12, 0);
        CHECK_REL(hw.pcie_sm_copy_bw, 51.2e9, 1e-12, 0);
        CHECK_REL(hw.pcie_latency_s, 2.7e-6, 1e-12, 0);
        CHECK_REL(hw.cpu_mem_bw, 101.4e9, 1e-12, 0);
        CHECK(hw.gpu_vram_bytes == 150109880320ull);
        CHECK(hw.cpu_threads == 15);
    }
    tu_source_path(p, sizeof p, "sim/hw/rtx3060-laptop.json");
    if (atsc_hw_load(p, &hw, &e) == ATS_OK) {
        CHECK(hw.n_copy_engines == 1); /* paper §2.1 */
        CHECK(hw.gpu_vram_bytes == 6ull << 30);
        CHECK_REL(hw.gpu_mem_bw, 336e9, 1e-12, 0);
    }
}

/* Random figures written in JSON units must come back in SI units. */
static void test_round_trip(uint64_t *rng)
{
    for (int rep = 0; rep < 20; rep++) {
        json_t *j = load_base();
        double cpu_tops = tu_uniform(rng, 0.1, 50), cpu_bw = tu_uniform(rng, 5, 500);
        double cpu_ov = tu_uniform(rng, 0, 50), gpu_tf = tu_uniform(rng, 5, 2000);
        double gpu_bw = tu_uniform(rng, 100, 8000), gpu_ov = tu_uniform(rng, 0, 20);
        double h2d = tu_uniform(rng, 1, 100), d2h = tu_uniform(rng, 1, 100);
        double smc = tu_uniform(rng, 1, 100), link = tu_uniform(rng, 1, 100);
        double lat = tu_uniform(rng, 0, 30), cf = tu_uniform(rng, 0.05, 1), df = tu_uniform(rng, 0.05, 1);
        double eff[8], q4k = tu_uniform(rng, 0.5, 3), q60 = tu_uniform(rng, 0.5, 3);
        int threads = 1 + (int)(tu_rand(rng) % 128), ce = 1 + (int)(tu_rand(rng) % 4);
        long long vram = (16ll << 20) + (long long)(tu_rand(rng) % (200ull << 30)); /* plausible: >= 16 MiB */
        long long gmt = 1 + (long long)(tu_rand(rng) % 64);
        for (int i = 0; i < 8; i++) eff[i] = tu_uniform(rng, 0.01, 1);
        set_path(j, "cpu.threads", json_integer(threads));
        set_path(j, "cpu.int8_peak_TOPS", json_real(cpu_tops));
        set_path(j, "cpu.mem_bw_GBps", json_real(cpu_bw));
        set_path(j, "cpu.op_overhead_us", json_real(cpu_ov));
        set_path(j, "gpu.fp16_tensor_peak_TFLOPS", json_real(gpu_tf));
        set_path(j, "gpu.mem_bw_GBps", json_real(gpu_bw));
        set_path(j, "gpu.vram_bytes", json_integer(vram));
        set_path(j, "gpu.op_overhead_us", json_real(gpu_ov));
        set_path(j, "pcie.h2d_GBps", json_real(h2d));
        set_path(j, "pcie.d2h_GBps", json_real(d2h));
        set_path(j, "pcie.sm_copy_GBps", json_real(smc));
        set_path(j, "pcie.link_GBps", json_real(link));
        set_path(j, "pcie.latency_us", json_real(lat));
        set_path(j, "pcie.copy_engines", json_integer(ce));
        set_path(j, "host_memory.cpu_factor", json_real(cf));
        set_path(j, "host_memory.dma_factor", json_real(df));
        set_path(j, "efficiency.gemm_min_tokens", json_integer(gmt));
        static const char *const ek[4] = {"gemv_bw", "gemm_flop", "attn_bw", "attn_flop"};
        char k[64];
        for (int i = 0; i < 4; i++) {
            snprintf(k, sizeof k, "efficiency.cpu.%s", ek[i]);
            set_path(j, k, json_real(eff[i]));
            snprintf(k, sizeof k, "efficiency.gpu.%s", ek[i]);
            set_path(j, k, json_real(eff[4 + i]));
        }
        json_t *qs = json_object();
        json_object_set_new(qs, "q4_k", json_real(q4k)); /* names are case-insensitive */
        json_object_set_new(qs, "Q6_K", json_real(q60));
        set_path(j, "efficiency.gpu.quant_scale", qs);
        const char *path = write_json(j, "rt.json");
        json_decref(j);
        ats_hw hw;
        ats_err e = {{0}};
        enum ats_status st = atsc_hw_load(path, &hw, &e);
        /* ats_hw_validate may refuse cross-field combinations; the loader's own checks all pass */
        if (st != ATS_OK) {
            CHECK_MSG(strstr(e.msg, path) != NULL, "%s", e.msg);
            fprintf(stderr, "round trip %d refused by ats_hw_validate: %s\n", rep, e.msg);
            continue;
        }
        CHECK(hw.cpu_threads == threads);
        CHECK_REL(hw.cpu_flops, cpu_tops * 1e12, 1e-12, 0);
        CHECK_REL(hw.cpu_mem_bw, cpu_bw * 1e9, 1e-12, 0);
        CHECK_REL(hw.cpu_op_overhead_s, cpu_ov * 1e-6, 1e-12, 0);
        CHECK_REL(hw.gpu_flops, gpu_tf * 1e12, 1e-12, 0);
        CHECK_REL(hw.gpu_mem_bw, gpu_bw * 1e9, 1e-12, 0);
        CHECK(hw.gpu_vram_bytes == (uint64_t)vram);
        CHECK_REL(hw.gpu_op_overhead_s, gpu_ov * 1e-6, 1e-12, 0);
        CHECK_REL(hw.pcie_h2d_bw, h2d * 1e9, 1e-12, 0);
        CHECK_REL(hw.pcie_d2h_bw, d2h * 1e9, 1e-12, 0);
        CHECK_REL(hw.pcie_sm_copy_bw, smc * 1e9, 1e-12, 0);
        CHECK_REL(hw.pcie_link_bw, link * 1e9, 1e-12, 0);
        CHECK_REL(hw.pcie_latency_s, lat * 1e-6, 1e-12, 0);
        CHECK(hw.n_copy_engines == ce);
        CHECK_REL(hw.hostmem_cpu_factor, cf, 1e-15, 0);
        CHECK_REL(hw.hostmem_dma_factor, df, 1e-15, 0);
        CHECK(hw.gemm_min_tokens == gmt);
        CHECK_REL(hw.eff_cpu.gemv_bw, eff[0], 1e-15, 0);
        CHECK_REL(hw.eff_cpu.gemm_flop, eff[1], 1e-15, 0);
        CHECK_REL(hw.eff_cpu.attn_bw, eff[2], 1e-15, 0);
        CHECK_REL(hw.eff_cpu.attn_flop, eff[3], 1e-15, 0);
        CHECK_REL(hw.eff_gpu.gemv_bw, eff[4], 1e-15, 0);
        CHECK_REL(hw.eff_gpu.attn_flop, eff[7], 1e-15, 0);
        CHECK_REL(hw.eff_gpu.q_scale[ATS_Q_Q4_K], q4k, 1e-15, 0);
        CHECK_REL(hw.eff_gpu.q_scale[ATS_Q_Q6_K], q60, 1e-15, 0);
        CHECK(hw.eff_gpu.q_scale[ATS_Q_Q8_0] == 1.0); /* not listed → 1 */
    }
}

static void test_bad_values(void)
{
    struct { const char *path; double num; const char *want2; } cases[] = {
        {"gpu.mem_bw_GBps", -3, "-3 (must be > 0)"},
        {"gpu.fp16_tensor_peak_TFLOPS", 0, "(must be > 0)"},
        {"cpu.mem_bw_GBps", -0.5, "(must be > 0)"},
        {"cpu.op_overhead_us", -1, "(must be >= 0)"},
        {"pcie.latency_us", -2, "(must be >= 0)"},
        {"pcie.h2d_GBps", 0, "(must be > 0)"},
        {"host_memory.cpu_factor", 1.5, "(must be in (0, 1])"},
        {"host_memory.dma_factor", 0, "(must be in (0, 1])"},
        {"efficiency.gpu.gemv_bw", 0, "(must be in (0, 1])"},
        {"efficiency.cpu.attn_flop", 1.01, "(must be in (0, 1])"},
        {"efficiency.cpu.quant_scale.Q4_K", -1, "(must be > 0)"},
        /* plausibility ranges (sim/hw/README.md): absurd figures give absurd simulations */
        {"pcie.h2d_GBps", 1e-300, "1e-300 outside the plausible range 0.1..100000 GB/s"},
        {"pcie.h2d_GBps", 1e308, "1e+308 outside the plausible range"},
        {"cpu.mem_bw_GBps", 1e-9, "outside the plausible range 0.1..100000 GB/s"},
        {"gpu.mem_bw_GBps", 2e5, "outside the plausible range"},
        {"gpu.fp16_tensor_peak_TFLOPS", 1e6, "outside the plausible range 0.001..100000 TFLOPS"},
        {"cpu.int8_peak_TOPS", 1e-7, "outside the plausible range"},
        {"pcie.latency_us", 2e6, "outside the plausible range 0..1e+06 us"},
        {"gpu.op_overhead_us", 1.5e6, "outside the plausible range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = load_base();
        set_path(j, cases[i].path, json_real(cases[i].num));
        char want[128];
        snprintf(want, sizeof want, "field '%s'", cases[i].path);
        expect_bad(j, want, cases[i].want2);
        json_decref(j);
    }
    /* integers */
    struct { const char *path; json_t *v; const char *want2; } ints[] = {
        {"cpu.threads", json_integer(0), "0 (must be >= 1)"},
        {"cpu.threads", json_real(2.5), "(must be an integer)"},
        {"pcie.copy_engines", json_string("1"), "\"1\" (must be an integer)"},
        {"pcie.copy_engines", json_integer(-1), "(must be >= 1)"},
        {"pcie.copy_engines", json_integer(1000), "1000 outside the plausible range 1..16 copy engines"},
        {"cpu.threads", json_integer(5000), "outside the plausible range 1..4096"},
        {"gpu.vram_bytes", json_integer(4096), "4096 outside the plausible range"},
        {"gpu.vram_bytes", json_integer(-6), "(must be >= 1)"},
        {"efficiency.gemm_min_tokens", json_integer(0), "(must be >= 1)"},
        {"gpu.mem_bw_GBps", json_string("336"), "(must be a number)"},
        {"gpu.mem_bw_GBps", json_null(), "(must be a number)"},
        {"cpu", json_integer(3), "(must be an object)"},
        {"efficiency.cpu.quant_scale", json_array(), "(must be an object)"},
        {"name", json_integer(1), "(must be a non-empty string)"},
        {"source", json_string(""), "(must be a non-empty string)"},
        {"gpu.model", json_integer(1), "(must be a string)"},
        {"cpu.sources.threads", json_integer(8), "(must be a non-empty string)"},
        {"cpu.sources", json_string("datasheet"), "(must be an object of strings)"},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        json_t *j = load_base();
        set_path(j, ints[i].path, ints[i].v);
        char want[128];
        snprintf(want, sizeof want, "field '%s'", ints[i].path);
        expect_bad(j, want, ints[i].want2);
        json_decref(j);
    }
    /* missing fields and sources */
    static const char *const missing[] = {"name", "source", "cpu", "pcie.h2d_GBps", "gpu.vram_bytes",
                                          "host_memory.dma_factor", "efficiency.gpu",
                                          "efficiency.cpu.attn_bw", "efficiency.gemm_min_tokens",
                                          "cpu.sources.mem_bw_GBps", "pcie.sources",
                                          "efficiency.cpu.sources.quant_scale"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        json_t *j = load_base();
        del_path(j, missing[i]);
        char want[128];
        snprintf(want, sizeof want, "field '%s'", missing[i]);
        expect_bad(j, want, "missing");
        json_decref(j);
    }
    /* unknown keys and quant types */
    struct { const char *path; const char *want; const char *want2; } unk[] = {
        {"gpu.mem_bw_GBs", "field 'gpu.mem_bw_GBs'", "unknown field"},
        {"turbo", "field 'turbo'", "unknown field"},
        {"efficiency.gpu.gemv_flop", "field 'efficiency.gpu.gemv_flop'", "unknown field"},
        {"efficiency.cpu.quant_scale.Q5_K", "field 'efficiency.cpu.quant_scale.Q5_K'", "unknown quant type"},
        {"pcie.sources.bandwidth", "field 'pcie.sources.bandwidth'", "names no figure"},
    };
    for (size_t i = 0; i < sizeof unk / sizeof unk[0]; i++) {
        json_t *j = load_base();
        set_path(j, unk[i].path, json_string("x"));
        if (strstr(unk[i].path, "quant_scale")) set_path(j, unk[i].path, json_real(1.2));
        expect_bad(j, unk[i].want, unk[i].want2);
        json_decref(j);
    }
}

static void test_bad_files(void)
{
    ats_hw hw;
    ats_err e = {{0}};
    char p[512];
    snprintf(p, sizeof p, "%s/does-not-exist.json", tmpdir);
    CHECK(atsc_hw_load(p, &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, p) != NULL, "%s", e.msg);

    CHECK(atsc_hw_load(tmpdir, &hw, &e) == ATS_EINVAL); /* a directory: said so (was a JSON syntax error) */
    CHECK_MSG(strstr(e.msg, "is a directory, not a hardware description") != NULL, "%s", e.msg);
    const char *path = write_text("{\n  \"name\": \"x\",\n  \"cpu\": { \"threads\": 8,, }\n}\n", "syntax.json");
    CHECK(atsc_hw_load(path, &hw, &e) == ATS_EINVAL);
    char want[600];
    snprintf(want, sizeof want, "%s:3:", path); /* line 3, with a column */
    CHECK_MSG(strstr(e.msg, want) != NULL && strstr(e.msg, "JSON syntax error"), "%s", e.msg);

    path = write_text("[1, 2]\n", "array.json");
    CHECK(atsc_hw_load(path, &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "top level must be a JSON object") != NULL, "%s", e.msg);

    path = write_text("{\"name\": \"a\", \"name\": \"b\"}\n", "dup.json");
    CHECK(atsc_hw_load(path, &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "duplicate") != NULL, "%s", e.msg);

    path = write_text("{\"gpu\": {\"mem_bw_GBps\": 1e999}}\n", "overflow.json");
    CHECK(atsc_hw_load(path, &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, path) != NULL, "%s", e.msg);

    path = write_text("", "empty.json");
    CHECK(atsc_hw_load(path, &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, path) != NULL, "%s", e.msg);

    /* a name longer than the struct holds */
    json_t *j = load_base();
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    set_path(j, "name", json_string(longname));
    expect_bad(j, "field 'name'", "bytes long");
    json_decref(j);
}

/* A random op table (CPU entries first, then GPU: the loader's order) → JSON → file → atsc_hw_load. */
static void test_op_table(uint64_t *rng)
{
    static const ats_role roles[] = {ATS_ROLE_ATTN_Q, ATS_ROLE_ATTN, ATS_ROLE_FFN_DOWN, ATS_ROLE_ATTN_NORM, ATS_ROLE_TOKEN_EMBD};
    static const ats_op_kind kinds[] = {ATS_OP_MATMUL, ATS_OP_ATTN, ATS_OP_MATMUL, ATS_OP_NORM, ATS_OP_EMBED};
    static const ats_qtype types[] = {ATS_Q_Q4_K, ATS_Q_F16, ATS_Q_Q6_K, ATS_Q_F32, ATS_Q_Q8_0};
    for (int rep = 0; rep < 10; rep++) {
        static ats_hw want, got; /* large: not on the stack */
        ats_hw_init(&want);
        want.op_table.n = 2 + (int32_t)(tu_rand(rng) % 8);
        for (int32_t i = 0; i < want.op_table.n; i++) {
            ats_prof_entry *e = &want.op_table.e[i];
            int k = (int)(tu_rand(rng) % 5);
            e->backend = i < want.op_table.n / 2 ? 0 : 1;
            e->kind = kinds[k];
            e->role = roles[k];
            e->qtype = types[k];
            e->n_out = k == 1 ? 0 : 1 + (int64_t)(tu_rand(rng) % 20000);
            e->n_in = k == 1 ? 0 : 1 + (int64_t)(tu_rand(rng) % 20000);
            e->n_points = 1 + (int32_t)(tu_rand(rng) % ATS_PROF_MAX_POINTS);
            int64_t tk = 0;
            for (int32_t p = 0; p < e->n_points; p++) {
                tk += 1 + (int64_t)(tu_rand(rng) % 300);
                e->tokens[p] = tk;
                e->t_s[p] = tu_uniform(rng, 1e-7, 2.0);
                e->flop[p] = k == 4 ? 0.0 : tu_uniform(rng, 0, 1e13);
                e->bytes[p] = tu_uniform(rng, 1, 1e10);
            }
        }
        json_t *j = load_base();
        json_t *t = atsc_hw_table_json(&want.op_table, "measured by test (cpu)", "measured by test (gpu)");
        CHECK(t != NULL);
        json_object_set_new(j, "op_table", t);
        const char *path = write_json(j, "table.json");
        ats_err e = {{0}};
        CHECK_MSG(atsc_hw_load(path, &got, &e) == ATS_OK, "%s", e.msg);
        CHECK(got.op_table.n == want.op_table.n);
        for (int32_t i = 0; i < want.op_table.n && i < got.op_table.n; i++) {
            const ats_prof_entry *a = &want.op_table.e[i], *b = &got.op_table.e[i];
            CHECK_MSG(a->backend == b->backend && a->kind == b->kind && a->role == b->role && a->qtype == b->qtype &&
                          a->n_out == b->n_out && a->n_in == b->n_in && a->n_points == b->n_points,
                      "entry %d: keys differ", (int)i);
            for (int32_t p = 0; p < a->n_points; p++)
                CHECK_MSG(a->tokens[p] == b->tokens[p] && a->t_s[p] == b->t_s[p] && a->flop[p] == b->flop[p] &&
                              a->bytes[p] == b->bytes[p],
                          "entry %d point %d: %.17g s vs %.17g s", (int)i, (int)p, a->t_s[p], b->t_s[p]);
        }
        json_decref(j);
    }
    /* bad tables: one line naming file, field and value */
    ats_prof_table one;
    memset(&one, 0, sizeof one);
    one.n = 1;
    ats_prof_entry *e = &one.e[0];
    e->kind = ATS_OP_MATMUL;
    e->role = ATS_ROLE_ATTN_Q;
    e->qtype = ATS_Q_Q4_K;
    e->n_out = e->n_in = 64;
    e->n_points = 3;
    for (int p = 0; p < 3; p++) {
        e->tokens[p] = 1 + 16 * p;
        e->t_s[p] = 1e-5 * (p + 1);
        e->flop[p] = 1e6;
        e->bytes[p] = 1e4;
    }
    struct { const char *path; json_t *v; const char *w1, *w2; } cases[] = {
        {"op_table.cpu.0.t_s.2", json_real(-1.0), "'op_table.cpu[0].t_s[2]'", "-1"},
        {"op_table.cpu.0.tokens.1", json_integer(1), "'op_table.cpu[0].tokens[1]'", "above the previous"},
        {"op_table.cpu.0.role", json_string("attn_qq"), "'op_table.cpu[0].role'", "attn_qq"},
        {"op_table.cpu.0.kind", json_string("gemm"), "'op_table.cpu[0].kind'", "gemm"},
        {"op_table.cpu.0.type", json_string("Q5_X"), "'op_table.cpu[0].type'", "Q5_X"},
        {"op_table.cpu.0.flop", json_array(), "'op_table.cpu[0].flop'", "1.."},
        {"op_table.cpu.0.speed", json_real(1), "'op_table.cpu[0].speed'", "unknown"},
        {"op_table.cpu.0.n_in", json_real(2.5), "'op_table.cpu[0].n_in'", "2.5"},
        {"op_table.sources.cpu", json_string(""), "'op_table.sources.cpu'", "non-empty"},
        {"op_table.gpu", json_array(), "'op_table.sources.gpu'", "missing"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *j = load_base();
        json_t *t = atsc_hw_table_json(&one, "measured by test", NULL);
        json_object_set_new(j, "op_table", t);
        /* dotted path with array indices */
        char buf[128];
        snprintf(buf, sizeof buf, "%s", cases[k].path);
        json_t *o = j;
        char *save = NULL, *tok = strtok_r(buf, ".", &save), *next;
        while (tok && (next = strtok_r(NULL, ".", &save))) {
            o = json_is_array(o) ? json_array_get(o, (size_t)atoi(tok)) : json_object_get(o, tok);
            tok = next;
        }
        if (json_is_array(o)) json_array_set_new(o, (size_t)atoi(tok), cases[k].v);
        else json_object_set_new(o, tok, cases[k].v);
        expect_bad(j, cases[k].w1, cases[k].w2);
        json_decref(j);
    }
}

/* pcie.switch_us (ats_hw.host_switch_s): optional; absent 0, present with a source in seconds, present
 * without one refused; the cost model charges it on every activation crossing (c[i]). */
static void test_switch_us(void)
{
    ats_hw hw;
    ats_err e = {{0}};
    json_t *j = load_base();
    CHECK(atsc_hw_load(write_json(j, "sw0.json"), &hw, &e) == ATS_OK && hw.host_switch_s == 0.0);
    const double c0 = hw.pcie_latency_s;
    set_path(j, "pcie.sources.switch_us", json_string("from timelines"));
    CHECK(atsc_hw_load(write_json(j, "sw4.json"), &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "pcie.sources.switch_us': a source for 'pcie.switch_us', which is absent") != NULL, "%s",
              e.msg);
    del_path(j, "pcie.sources.switch_us");
    set_path(j, "pcie.switch_us", json_real(20.0));
    const char *path = write_json(j, "sw1.json");
    CHECK(atsc_hw_load(path, &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "switch_us': missing (every figure needs a source)") != NULL, "%s", e.msg);
    set_path(j, "pcie.sources.switch_us", json_string("from timelines"));
    CHECK(atsc_hw_load(write_json(j, "sw2.json"), &hw, &e) == ATS_OK);
    CHECK_REL(hw.host_switch_s, 20e-6, 1e-12, 0);
    CHECK_REL(hw.pcie_latency_s, c0, 1e-15, 0);
    set_path(j, "pcie.switch_us", json_real(-1.0));
    CHECK(atsc_hw_load(write_json(j, "sw3.json"), &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "pcie.switch_us': -1 (must be >= 0)") != NULL, "%s", e.msg);
    json_decref(j);
}

/* cpu.mem_bw_over_threads: optional; loaded in SI units; each committed profile's curve equals its own
 * measurements.cpu_read_over_threads; a bad curve is refused naming the field, the point and the value. */
static json_t *bw_point(json_int_t th, double gbps)
{
    json_t *o = json_object();
    json_object_set_new(o, "threads", json_integer(th));
    json_object_set_new(o, "GBps", json_real(gbps));
    return o;
}

static json_t *bw_curve(int n, const json_int_t *th, const double *gbps)
{
    json_t *a = json_array();
    for (int k = 0; k < n; k++) json_array_append_new(a, bw_point(th[k], gbps[k]));
    return a;
}

static void test_bw_curve(void)
{
    ats_hw hw;
    ats_err e = {{0}};
    json_t *j = load_base();
    CHECK(atsc_hw_load(write_json(j, "bw0.json"), &hw, &e) == ATS_OK && hw.cpu_bw_n == 0);
    const json_int_t th[4] = {1, 2, 4, 8};
    const double gb[4] = {12.5, 24, 40, 45.25};
    set_path(j, "cpu.mem_bw_over_threads", bw_curve(4, th, gb));
    CHECK(atsc_hw_load(write_json(j, "bw1.json"), &hw, &e) == ATS_EINVAL);
    CHECK_MSG(strstr(e.msg, "field 'cpu.sources.mem_bw_over_threads': missing (every figure needs a source)") != NULL,
              "%s", e.msg);
    set_path(j, "cpu.sources.mem_bw_over_threads", json_string("measured by ats profile"));
    e.msg[0] = '\0';
    CHECK_MSG(atsc_hw_load(write_json(j, "bw2.json"), &hw, &e) == ATS_OK, "%s", e.msg);
    CHECK(hw.cpu_bw_n == 4);
    for (int k = 0; k < 4; k++) {
        CHECK(hw.cpu_bw_threads[k] == (int32_t)th[k]);
        CHECK_REL(hw.cpu_bw_Bps[k], gb[k] * 1e9, 1e-15, 0);
    }
    /* bad curves: non-increasing threads, a negative or absurd rate, wrong shapes, unknown keys */
    struct { int k; const char *key; json_t *v; const char *want1, *want2; } bad[] = {
        {2, "threads", json_integer(2), "field 'cpu.mem_bw_over_threads[2].threads'", "2 (must be an integer in 1..4096, above"},
        {0, "threads", json_integer(0), "field 'cpu.mem_bw_over_threads[0].threads'", "0 (must be an integer"},
        {1, "threads", json_real(2.5), "field 'cpu.mem_bw_over_threads[1].threads'", "2.5 (must be an integer"},
        {3, "GBps", json_real(-4), "field 'cpu.mem_bw_over_threads[3].GBps'", "-4.0 (must be a number in 0.1..1e5 GB/s"},
        {1, "GBps", json_string("fast"), "field 'cpu.mem_bw_over_threads[1].GBps'", "\"fast\" (must be a number"},
        {2, "GBps", json_real(1e6), "field 'cpu.mem_bw_over_threads[2].GBps'", "(must be a number in 0.1..1e5"},
        {0, "Gbps", json_real(1), "field 'cpu.mem_bw_over_threads[0].Gbps': unknown field", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *c = json_deep_copy(j);
        json_t *pt = json_array_get(json_object_get(json_object_get(c, "cpu"), "mem_bw_over_threads"), (size_t)bad[i].k);
        json_object_set_new(pt, bad[i].key, bad[i].v);
        expect_bad(c, bad[i].want1, bad[i].want2);
        json_decref(c);
    }
    json_t *c = json_deep_copy(j);
    json_object_del(json_array_get(json_object_get(json_object_get(c, "cpu"), "mem_bw_over_threads"), 1), "GBps");
    expect_bad(c, "field 'cpu.mem_bw_over_threads[1].GBps': missing", NULL);
    json_decref(c);
    c = json_deep_copy(j);
    set_path(c, "cpu.mem_bw_over_threads", json_array());
    expect_bad(c, "field 'cpu.mem_bw_over_threads': []", "(must be an array of 1..16 objects");
    json_decref(c);
    c = json_deep_copy(j);
    json_t *big = json_array();
    for (int k = 1; k <= ATS_HW_MAX_BW_POINTS + 1; k++) json_array_append_new(big, bw_point(k, 5.0 * k));
    set_path(c, "cpu.mem_bw_over_threads", big);
    expect_bad(c, "field 'cpu.mem_bw_over_threads'", "(must be an array of 1..16 objects");
    json_decref(c);
    c = json_deep_copy(j);
    json_array_set_new(json_object_get(json_object_get(c, "cpu"), "mem_bw_over_threads"), 0, json_real(3));
    expect_bad(c, "field 'cpu.mem_bw_over_threads[0]': 3.0 (must be an object", NULL);
    json_decref(c);
    /* a source for an absent curve */
    del_path(j, "cpu.mem_bw_over_threads");
    expect_bad(j, "field 'cpu.sources.mem_bw_over_threads': a source for 'cpu.mem_bw_over_threads', which is absent",
               NULL);
    json_decref(j);

    /* the committed profiles: the curve is the file's own measurements.cpu_read_over_threads */
    static const char *const profiles[] = {"h200-host-profile", "h200-host-profile-qwen3-30b-a3b"};
    for (int i = 0; i < 2; i++) {
        char p[512], rel[128];
        snprintf(rel, sizeof rel, "sim/hw/%s.json", profiles[i]);
        tu_source_path(p, sizeof p, rel);
        enum ats_status st = atsc_hw_load(p, &hw, &e);
        CHECK_MSG(st == ATS_OK, "%s: %s", p, e.msg);
        if (st) continue;
        json_error_t je;
        json_t *r = json_load_file(p, 0, &je);
        json_t *m = json_object_get(json_object_get(r, "measurements"), "cpu_read_over_threads");
        CHECK_MSG(hw.cpu_bw_n >= 2 && (size_t)hw.cpu_bw_n == json_array_size(m), "%s: %d points, measurements %zu", p,
                  (int)hw.cpu_bw_n, json_array_size(m));
        for (int32_t k = 0; k < hw.cpu_bw_n && (size_t)k < json_array_size(m); k++) {
            json_t *pt = json_array_get(m, (size_t)k);
            CHECK(hw.cpu_bw_threads[k] == (int32_t)json_integer_value(json_object_get(pt, "threads")));
            CHECK(hw.cpu_bw_Bps[k] == json_number_value(json_object_get(pt, "GBps")) * 1e9);
        }
        CHECK(hw.cpu_bw_n > 0 && hw.cpu_bw_threads[hw.cpu_bw_n - 1] == hw.cpu_threads);
        CHECK(hw.cpu_bw_n > 0 && hw.cpu_bw_Bps[hw.cpu_bw_n - 1] == hw.cpu_mem_bw);
        json_decref(r);
    }
}

/* cpu.load_response: optional, with a source; loaded as given; bad points refused naming the field */
static void test_load_response(void)
{
    ats_hw hw;
    ats_err e = {{0}};
    json_t *j = load_base();
    json_t *a = json_array();
    const double av[2] = {0.2, 0.6}, sl[2] = {2.0, 1.25};
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object();
        json_object_set_new(o, "avail", json_real(av[k]));
        json_object_set_new(o, "slowdown", json_real(sl[k]));
        json_array_append_new(a, o);
    }
    set_path(j, "cpu.load_response", a);
    expect_bad(j, "field 'cpu.sources.load_response': missing (every figure needs a source)", NULL);
    set_path(j, "cpu.sources.load_response", json_string("measured by cpu-load-response.sh"));
    CHECK_MSG(atsc_hw_load(write_json(j, "lr1.json"), &hw, &e) == ATS_OK, "%s", e.msg);
    CHECK(hw.cpu_load_n == 2 && hw.cpu_load_avail[1] == 0.6 && hw.cpu_load_slow[0] == 2.0);
    struct { int k; const char *key; json_t *v; const char *want1, *want2; } bad[] = {
        {1, "avail", json_real(0.2), "field 'cpu.load_response[1].avail'", "(must be a number in (0, 1), above"},
        {0, "avail", json_real(1.0), "field 'cpu.load_response[0].avail'", "(must be a number in (0, 1)"},
        {0, "slowdown", json_real(0.5), "field 'cpu.load_response[0].slowdown'", "(must be a number in 1..1000"},
        {1, "slowdown", json_real(2.5), "field 'cpu.load_response[1].slowdown'", "not above the previous point's"},
        {1, "slowdown", json_string("x"), "field 'cpu.load_response[1].slowdown'", "(must be a number"},
        {1, "slow", json_real(2), "field 'cpu.load_response[1].slow': unknown field", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *c = json_deep_copy(j);
        json_t *pt = json_array_get(json_object_get(json_object_get(c, "cpu"), "load_response"), (size_t)bad[i].k);
        json_object_set_new(pt, bad[i].key, bad[i].v);
        expect_bad(c, bad[i].want1, bad[i].want2);
        json_decref(c);
    }
    del_path(j, "cpu.load_response");
    expect_bad(j, "field 'cpu.sources.load_response': a source for 'cpu.load_response', which is absent", NULL);
    json_decref(j);
}

int main(void)
{
    uint64_t rng = tu_seed("test_hw_json");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats_test_hw_json.%ld", (long)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
    if (system(cmd) != 0) return 1;
    test_committed();
    test_round_trip(&rng);
    test_op_table(&rng);
    test_bad_values();
    test_bad_files();
    test_switch_us();
    test_bw_curve();
    test_load_response();
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_hw_json");
}
