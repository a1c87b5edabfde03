/*
 * test_cli — the `ats` program as a user meets it: help, --version, unknown subcommands and flags
 * (usage + exit 2), `ats inspect` on every listed model and its option checks, and bad model JSON (missing field, negative
 * size, unknown quant type, unreadable file, syntax error, unknown key): exactly one line on stderr
 * naming the file, the field and the value, exit 2. Output files: special files (/dev/null, /dev/full),
 * missing directories, paths under a regular file and directories refused by every writer before its
 * work (exit 2, one line naming the path); a good file survives a failing run; `bench sched` writes to
 * the current directory, not the committed result (signals mid-write: test_cli_out).
 * `trace import` of rows out of order, with repeated or negative times: still imported (sorted,
 * averaged, shifted to start at 0), and one stderr line for each of these saying what was done;
 * a clean CSV: nothing on stderr. The README opens with its two commands, the second is what .ci/run
 * runs, and its folders table lists .ci/.
 */
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];

/* Runs `ats <args>`; captures stdout and stderr; returns the exit code (-1 on a signal). */
static int run(const char *args, char *out, size_t olen, char *err, size_t elen)
{
    return tu_run_ats_split(NULL, args, 600, tmpdir, out, olen, err, elen);
}

static char out[1 << 20], err[1 << 16];

/* `ats <args>` is refused as bad usage: exit 2, one line on stderr (containing `want` unless NULL),
 * nothing on stdout */
static void expect_one_line(const char *args, const char *want)
{
    int rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && (!want || strstr(err, want)) && !out[0],
              "ats %s: rc %d, stdout '%.100s', stderr '%s' (want one line with '%s')", args, rc, out, err,
              want ? want : "");
}

static void test_basics(void)
{
    CHECK(run("--version", out, sizeof out, err, sizeof err) == 0 && strstr(out, "ats "));
    CHECK(run("help", out, sizeof out, err, sizeof err) == 0 && strstr(out, "inspect"));
    CHECK(run("", out, sizeof out, err, sizeof err) == 2 && strstr(err, "usage"));
    CHECK(run("frobnicate", out, sizeof out, err, sizeof err) == 2 && strstr(err, "unknown command 'frobnicate'"));
    CHECK(run("inspect --no-such-flag", out, sizeof out, err, sizeof err) == 2 && strstr(err, "--no-such-flag"));
    CHECK(run("inspect --help", out, sizeof out, err, sizeof err) == 0 && strstr(out, "usage: ats inspect"));
    CHECK(run("inspect --ctx abc", out, sizeof out, err, sizeof err) == 2 && strstr(err, "abc"));
    CHECK(run("inspect --quant q3_x", out, sizeof out, err, sizeof err) == 2 && strstr(err, "q3_x"));
    CHECK(run("inspect --model no-such-model", out, sizeof out, err, sizeof err) == 2 && strstr(err, "no-such-model.json"));
}

/* inspect: --hw and --vram-budget without --policy are refused (they were silently ignored);
 * numbers too large for any type, or for a context, say "out of range" and name the option;
 * option combinations are named by their options, not the graph's fields (ctx_pos, n_ctx). */
static void test_inspect_options(void)
{
    static const struct { const char *args, *want; } bad[] = {
        {"inspect --vram-budget 6GiB", "ats inspect: --vram-budget only applies with --policy"},
        {"inspect --hw rtx3060-laptop", "ats inspect: --hw only applies with --policy"},
        {"inspect --hw rtx3060-laptop --vram-budget 6GiB", "ats inspect: --hw and --vram-budget only apply with --policy"},
        {"inspect --policy layer --vram-budget 99999999999999999999", "--vram-budget: 99999999999999999999: out of range"},
        {"inspect --policy layer --vram-budget 99999999999999999999GiB", "--vram-budget: 99999999999999999999GiB: out of range"},
        {"inspect --ctx 99999999999999999999", "--ctx: '99999999999999999999' is out of range (0..16777216 tokens)"},
        {"inspect --phase prefill --tokens 99999999999999999999", "--tokens: '99999999999999999999' is out of range"},
        {"inspect --n-ctx 16777217", "--n-ctx: '16777217' is out of range"},
        {"inspect --ctx abc", "--ctx: 'abc' is not a non-negative integer"},
        {"inspect --phase prefill --ctx 16777216 --tokens 1", "--ctx 16777216 + --tokens 1: more than 16777216 tokens"},
        {"inspect --n-ctx 100", "--n-ctx 100: smaller than the 2048 tokens of this round (--ctx, 2048 by default)"},
        /* one --vram-budget rule for every command (inspect and bench sched took 1B; bench sched wrote a result) */
        {"inspect --policy layer --vram-budget 1B", "--vram-budget: '1B' is below 64 MiB"},
        {"inspect --policy ats --vram-budget 100GiB", "exceeds the 6.00 GiB (6442450944 bytes) of VRAM of hw 'rtx3060-laptop'"},
        {"bench sched --vram-budget 1MiB --out nothing.json", "--vram-budget: '1MiB' is below 64 MiB"},
        {"bench sched --vram-budget 6 --out nothing.json", "--vram-budget: 6: add a unit"},
        /* a policy or hw that fails: the error alone (the op table came first, then the error) */
        {"inspect --policy expert --vram-budget 6GiB", "policy expert: model qwen3-14b is dense"},
        {"inspect --policy layer --vram-budget 6GiB --hw no-such-hw-xyz", "no-such-hw-xyz"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_one_line(bad[i].args, bad[i].want);
    /* with --policy they are used */
    int rc = run("inspect --policy layer --vram-budget 6GiB --hw rtx3060-laptop", out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0, "inspect --policy layer --vram-budget 6GiB --hw rtx3060-laptop: rc %d: %s", rc, err);
}

/* The second level (bench X, trace X): a lone `help` prints X's usage, as `ats X --help` and `ats help
 * bench X` do (bench sim ran the whole benchmark, trace show looked for traces/help.h5); any other
 * argument to a benchmark is refused before the work; `ats help nope` is an unknown command. Under a
 * 60 s timeout: without the fix `bench sim help` ran for minutes. */
static void test_sub_help(void)
{
    static const char *subs[] = {"bench sim", "bench sched", "bench kernels", "trace synth", "trace show",
                                 "trace import", "trace compare"};
    static char usage_text[sizeof out];
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "%s --help", subs[i]);
        int rc = tu_run_ats_split(tmpdir, args, 60, tmpdir, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0 && strstr(out, "usage: ats ") && strstr(out, subs[i]), "ats %s: rc %d, '%.100s'", args, rc, out);
        snprintf(usage_text, sizeof usage_text, "%s", out);
        for (int form = 0; form < 2; form++) {
            snprintf(args, sizeof args, form ? "help %s" : "%s help", subs[i]);
            rc = tu_run_ats_split(tmpdir, args, 60, tmpdir, out, sizeof out, err, sizeof err);
            CHECK_MSG(rc == 0 && strcmp(out, usage_text) == 0 && !err[0], "ats %s: rc %d, stdout '%.100s', stderr '%s'",
                      args, rc, out, err);
        }
    }
    static const char *benches[] = {"sim", "sched", "kernels"};
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) {
        char args[256], want[128];
        /* --hw/--model that do not exist: without the check the run failed on them instead */
        snprintf(args, sizeof args, "bench %s foo %s", benches[i], i == 2 ? "--model no-such-model-xyz" : "--hw no-such-hw-xyz");
        snprintf(want, sizeof want, "ats bench %s: unexpected argument 'foo' (ats bench %s --help)", benches[i], benches[i]);
        int rc = tu_run_ats_split(tmpdir, args, 60, tmpdir, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, want) && !out[0], "ats %s: rc %d, stderr '%s'", args,
                  rc, err);
    }
    int rc = run("help nope", out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && strstr(err, "ats: unknown command 'nope'") && !out[0], "ats help nope: rc %d, stderr '%s'", rc, err);
    rc = run("help trace nope", out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && strstr(err, "unknown subcommand 'nope'"), "ats help trace nope: rc %d, stderr '%s'", rc, err);
    /* help before the subcommand, as git's `git help X`: trace help synth = trace synth --help */
    static const struct { const char *a, *b; } same[] = {{"trace help synth", "trace synth --help"},
                                                         {"bench help sched", "bench sched --help"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        static char want[sizeof out];
        CHECK(run(same[i].b, out, sizeof out, err, sizeof err) == 0);
        memcpy(want, out, sizeof out);
        rc = run(same[i].a, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0 && strcmp(out, want) == 0, "ats %s: rc %d, stdout '%.80s'", same[i].a, rc, out);
    }
}

/* Every subcommand: --help prints its usage (exit 0); an unknown flag names itself (exit 2). */
static void test_every_command(void)
{
    CHECK(run("help", out, sizeof out, err, sizeof err) == 0);
    char list[8192];
    size_t ol = strlen(out) < sizeof list - 1 ? strlen(out) : sizeof list - 1;
    memcpy(list, out, ol);
    list[ol] = '\0';
    int n = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        if (sscanf(line, "  %63s", name) != 1 || !strcmp(name, "help") || name[0] == '-' ||
            !strncmp(line, "usage", 5) || !strncmp(line, "commands", 8))
            continue;
        char args[256];
        n++;
        snprintf(args, sizeof args, "%s --help", name);
        int rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0 && strstr(out, "usage"), "ats %s --help: rc %d", name, rc);
        /* `ats <cmd> help` as `ats help <cmd>`: the same usage (sim, run, ... said "unexpected argument") */
        static char usage_text[1 << 16];
        snprintf(usage_text, sizeof usage_text, "%s", out);
        snprintf(args, sizeof args, "%s help", name);
        rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0 && strcmp(out, usage_text) == 0, "ats %s help: rc %d, stdout '%.100s', stderr '%s'", name, rc,
                  out, err);
        snprintf(args, sizeof args, "%s --no-such-flag-xyz", name);
        rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2 && strstr(err, "no-such-flag-xyz") && tu_count_lines(err) == 1,
                  "ats %s --no-such-flag-xyz: rc %d, stderr '%s' (one line)", name, rc, err);
        CHECK_MSG(strstr(err, name) != NULL, "ats %s: the error does not name the command: '%s'", name, err);
    }
    CHECK_MSG(n >= 9, "only %d commands listed by ats help", n);
    /* a bad value says what is accepted (run and sim said only "bad value") */
    static const struct { const char *args, *want; } range[] = {
        {"run --model x.gguf --threads 0", "--threads: bad value '0' (an integer 1..1024)"},
        {"run --model x.gguf --top-p 2", "--top-p: bad value '2' (a number in (0, 1])"},
        {"run --model x.gguf --seed -1", "--seed: bad value '-1' (an integer >= 0)"}, /* as sim's --seed */
        {"sim --jitter 9", "--jitter: bad value '9' (a number in [0, 5))"},
        {"sim --eps 1e308", "--eps: bad value '1e308' (a fraction, 0..10)"}, /* sweep's range */
        {"sim --act-path x", "--act-path: bad value 'x' (sm or ce)"},
        {"sim --model qwen3-30b-a3b --routing zipf:1e308", "(uniform, zipf[:S] with S in (0, 100), or an HDF5 file)"},
        {"sweep --threads 0 --eps 0.1 --interval 1 --trace fig13-synth", "(an integer 1..1024)"},
    };
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) expect_one_line(range[i].args, range[i].want);
    /* run --policy with the split-run options, refused before the model is read (--backend cpu was taken for
       the default and ignored; x.gguf does not exist, so a later check would name it instead) */
    static const struct { const char *args, *want; } pol[] = {
        {"run --model x.gguf --policy layer --vram-budget 4GiB --backend cpu",
         "ats run: --backend cpu with --policy layer: --backend/--split are the split-run options; --policy runs "
         "sched's plans (--cpu-only keeps a policy run on the CPU)"},
        {"run --model x.gguf --backend cuda --policy ats --vram-budget 4GiB", "--backend cuda with --policy ats"},
        {"run --model x.gguf --policy ats --vram-budget 4GiB --split 2", "--split 2 with --policy ats"},
    };
    for (size_t i = 0; i < sizeof pol / sizeof pol[0]; i++) expect_one_line(pol[i].args, pol[i].want);
    /* lists with an empty entry or a name twice (strtok_r skipped 'ats,'; bench sched timed a model twice) */
    static const struct { const char *args, *want; } lists[] = {
        {"sim --policy ats,", "--policy: 'ats,' has an empty entry"},
        {"sim --policy ats,,layer", "has an empty entry"},
        {"sim --policy all,ats", "'all' stands alone"},
        {"bench sched --models 'qwen3-14b, qwen3-14b' --out nothing.json", "'qwen3-14b' given twice"}, /* spaces */
        {"bench sched --models qwen3-14b,qwen3-14b --out nothing.json", "'qwen3-14b' given twice"},
        {"bench sched --models qwen3-14b,models/qwen3-14b.json --out nothing.json", "(entries 1 and 2, the same file)"},
        {"bench sched --vram-budget 100GiB --out nothing.json", "exceeds the 6.00 GiB (6442450944 bytes) of VRAM of hw 'rtx3060-laptop'"},
        {"bench sched --models qwen3-14b, --out nothing.json", "has an empty entry"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) expect_one_line(lists[i].args, lists[i].want);
    /* an empty file value (--hw "" looked for sim/hw/.json) */
    int rce = run("sim --hw ''", out, sizeof out, err, sizeof err);
    CHECK_MSG(rce == 2 && tu_count_lines(err) == 1 && strstr(err, "--hw: empty value"), "sim --hw '': rc %d, '%s'", rce,
              err);
    /* an unknown command, also after help, and --version with a word after it: one line, exit 2 */
    static const char *const unk[] = {"nope", "help nope", "help --version", "--version x"};
    for (size_t i = 0; i < sizeof unk / sizeof unk[0]; i++) expect_one_line(unk[i], NULL);
    /* errors are one line with a pointer to --help (inspect, run, trace, bench sim dumped their usage) */
    static const char *const one[] = {"bench sim --no-such-flag-xyz", "bench sim --threads", "inspect extra",
                                      "inspect --model", "run", "run --model x.gguf extra", "trace synth",
                                      "trace import a.csv", "bench nope"};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) expect_one_line(one[i], "--help");
}

static void test_inspect_models(void)
{
    const char *models[] = {"llama-3.1-8b", "llama-3.1-70b", "qwen3-14b", "qwen3-30b-a3b",
                            "glm-4-9b", "mixtral-8x7b", "gpt-oss-20b", "gpt-oss-120b"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "inspect --model %s --phase decode --ctx 2048", models[i]);
        int rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0 && strstr(out, "totals:") && strstr(out, "KV cache"), "%s: rc %d, stderr %s", models[i], rc, err);
        snprintf(args, sizeof args, "inspect --model %s --phase prefill --tokens 512 --format csv", models[i]);
        rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0 && strstr(out, "index,name,kind"), "%s csv: rc %d", models[i], rc);
    }
    /* the README's first inspect example, with its totals */
    CHECK(run("inspect --model qwen3-14b --quant q4_k_m --phase decode --ctx 2048", out, sizeof out, err, sizeof err) == 0);
    CHECK(strstr(out, "403 ops") && strstr(out, "14.768 B parameters") && strstr(out, "320.00 MiB at 2048 tokens"));
}

typedef struct {
    const char *what, *json, *must1, *must2;
} badcase;

/* a file of the other kind: a JSON description given to `ats run` says what takes it (was a bare 'bad
 * magic'); a broken GGUF given to inspect or sim (which take GGUF files: test_sim_gguf) is read as one
 * and refused by the GGUF reader in one line naming the file */
static void test_wrong_kind(void)
{
    char g[400], j[400], args[1200];
    snprintf(g, sizeof g, "%s/tiny.gguf", tmpdir);
    tu_write_text(g, "GGUF\003\0\0\0 not really a model");
    snprintf(args, sizeof args, "inspect --model %s", g);
    int rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, g) && !strstr(err, "not a model description"),
              "inspect --model GGUF: rc %d: %s", rc, err);
    /* a model description as --hw, a hardware description as --model */
    rc = run("inspect --policy layer --vram-budget 6GiB --hw models/qwen3-14b.json", out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "a model description (it has 'model_type'), not a hardware"),
              "--hw MODEL.json: rc %d: %s", rc, err);
    rc = run("sim --model sim/hw/rtx3060-laptop.json", out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "a hardware description (it has 'gpu' and 'pcie')"),
              "--model HW.json: rc %d: %s", rc, err);
    snprintf(args, sizeof args, "sim --model %s", g);
    rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, g), "sim --model GGUF: rc %d: %s", rc, err);
    snprintf(j, sizeof j, "%s/desc.json", tmpdir);
    tu_write_text(j, "\n  {\"model_type\": \"llama\"}\n");
    snprintf(args, sizeof args, "run --model %s -n 1", j);
    rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && strstr(err, "bad magic") && strstr(err, "--dummy-weights"), "run --model JSON: rc %d: %s",
              rc, err);
    unlink(g);
    unlink(j);
}

static void test_bad_json(void)
{
    const char *good_head = "{\"model_type\":\"llama\",\"source\":\"test\",\"hidden_size\":64,\"intermediate_size\":172,"
                            "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":512";
    char buf[1024];
    /* sanity: the good description loads */
    snprintf(buf, sizeof buf, "%s,\"default_quant\":\"f32\"}", good_head);
    char path[400], args[600];
    snprintf(path, sizeof path, "%s/good.json", tmpdir);
    tu_write_text(path, buf);
    snprintf(args, sizeof args, "inspect --model %s", path);
    CHECK_MSG(run(args, out, sizeof out, err, sizeof err) == 0, "good model: %s", err);

    const badcase cases[] = {
        {"missing", "{\"model_type\":\"llama\",\"source\":\"t\",\"intermediate_size\":1,\"num_hidden_layers\":2,"
                    "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":512,\"default_quant\":\"f32\"}",
         "'hidden_size'", "missing"},
        {"negative", NULL, "'num_hidden_layers'", "-3"},
        {"quant", NULL, "'default_quant'", "q9_z"},
        {"syntax", "{\"model_type\": \"llama\",,}", ":1:", "syntax"},
        {"unknown", NULL, "'hiden_size'", "unknown key"},
        {"type", NULL, "'vocab_size'", "\"many\""},
        {"heads", NULL, "'num_key_value_heads'", "3"},
        {"huge", "{\"model_type\":\"llama\",\"source\":\"t\",\"hidden_size\":64,\"intermediate_size\":172,"
                 "\"num_hidden_layers\":1000000000,\"num_attention_heads\":8,\"num_key_value_heads\":4,"
                 "\"vocab_size\":512,\"default_quant\":\"f32\"}", "'num_hidden_layers'", "1000000000"},
        {"headdim0", "{\"model_type\":\"llama\",\"source\":\"t\",\"hidden_size\":64,\"intermediate_size\":172,"
                     "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"num_key_value_heads\":4,\"head_dim\":0,"
                     "\"vocab_size\":512,\"default_quant\":\"f32\"}", "'head_dim'", ": 0"},
        {"moe", "{\"model_type\":\"qwen3_moe\",\"source\":\"t\",\"hidden_size\":64,\"num_experts\":8,"
                "\"num_experts_per_tok\":2,\"num_hidden_layers\":2,\"num_attention_heads\":8,"
                "\"num_key_value_heads\":4,\"vocab_size\":512,\"default_quant\":\"f32\"}",
         "'moe_intermediate_size'", "missing"},
        {"topk", "{\"model_type\":\"qwen3_moe\",\"source\":\"t\",\"hidden_size\":64,\"num_experts\":8,"
                 "\"num_experts_per_tok\":9,\"moe_intermediate_size\":32,\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":512,\"default_quant\":\"f32\"}",
         "'num_experts_per_tok'", "9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const badcase *c = &cases[i];
        const char *json = c->json;
        char gen[1024];
        if (!json) {
            if (!strcmp(c->what, "negative"))
                snprintf(gen, sizeof gen, "{\"model_type\":\"llama\",\"source\":\"t\",\"hidden_size\":64,\"intermediate_size\":172,"
                                          "\"num_hidden_layers\":-3,\"num_attention_heads\":8,\"num_key_value_heads\":4,"
                                          "\"vocab_size\":512,\"default_quant\":\"f32\"}");
            else if (!strcmp(c->what, "quant"))
                snprintf(gen, sizeof gen, "%s,\"default_quant\":\"q9_z\"}", good_head);
            else if (!strcmp(c->what, "unknown"))
                snprintf(gen, sizeof gen, "%s,\"default_quant\":\"f32\",\"hiden_size\":3}", good_head);
            else if (!strcmp(c->what, "type"))
                snprintf(gen, sizeof gen, "{\"model_type\":\"llama\",\"source\":\"t\",\"hidden_size\":64,\"intermediate_size\":172,"
                                          "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"num_key_value_heads\":4,"
                                          "\"vocab_size\":\"many\",\"default_quant\":\"f32\"}");
            else
                snprintf(gen, sizeof gen, "{\"model_type\":\"llama\",\"source\":\"t\",\"hidden_size\":64,\"intermediate_size\":172,"
                                          "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"num_key_value_heads\":3,"
                                          "\"vocab_size\":512,\"default_quant\":\"f32\"}");
            json = gen;
        }
        snprintf(path, sizeof path, "%s/bad-%s.json", tmpdir, c->what);
        tu_write_text(path, json);
        snprintf(args, sizeof args, "inspect --model %s", path);
        int rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2, "%s: exit %d (want 2)", c->what, rc);
        CHECK_MSG(tu_count_lines(err) == 1, "%s: %d lines on stderr: %s", c->what, tu_count_lines(err), err);
        CHECK_MSG(strstr(err, path) && strstr(err, c->must1) && strstr(err, c->must2), "%s: message '%s'", c->what, err);
        CHECK_MSG(out[0] == '\0', "%s: stdout not empty", c->what);
    }
    /* a directory */
    snprintf(args, sizeof args, "inspect --model %s/", tmpdir);
    int rcd = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rcd == 2 && tu_count_lines(err) == 1 && strstr(err, "not a regular file"), "directory: rc %d: %s", rcd, err);
    /* a context beyond any model */
    rcd = run("inspect --model qwen3-14b --ctx 100000000000", out, sizeof out, err, sizeof err);
    CHECK_MSG(rcd == 2 && strstr(err, "--ctx: '100000000000' is out of range (0..16777216 tokens)"), "huge ctx: rc %d: %s", rcd, err);
    /* ats quantize onto its own input (through ../) must refuse and leave the input as it was */
    {
        char src[512], cp[1200], q[1400];
        tu_shared_path(src, sizeof src, "models/stories260K/stories260K.gguf");
        snprintf(cp, sizeof cp, "cp '%s' '%s/in.gguf'", src, tmpdir);
        if (system(cp) == 0) {
            struct stat before, after;
            snprintf(path, sizeof path, "%s/in.gguf", tmpdir);
            stat(path, &before);
            snprintf(q, sizeof q, "quantize %s/in.gguf %s/../%s/in.gguf --type q8_0", tmpdir, tmpdir, strrchr(tmpdir, '/') + 1);
            int rq = run(q, out, sizeof out, err, sizeof err);
            stat(path, &after);
            CHECK_MSG(rq == 2 && strstr(err, "is the input file") && before.st_size == after.st_size,
                      "quantize onto its input: rc %d, size %lld -> %lld: %s", rq, (long long)before.st_size,
                      (long long)after.st_size, err);
        }
    }
    /* an output must never replace an input of the same run (trace, hw description, CSV) */
    {
        char cp[1400], a[1600], tr[600];
        char src[512];
        tu_source_path(src, sizeof src, "traces/fig13-synth.h5");
        snprintf(tr, sizeof tr, "%s/tr.h5", tmpdir);
        snprintf(cp, sizeof cp, "cp '%s' '%s'", src, tr);
        if (system(cp) == 0) {
            size_t n0 = 0, n1 = 0;
            free(tu_slurp(tr, &n0));
            snprintf(a, sizeof a, "sim --trace %s --policy layer --out %s", tr, tr);
            int ri = run(a, out, sizeof out, err, sizeof err);
            free(tu_slurp(tr, &n1));
            CHECK_MSG(ri == 2 && strstr(err, "input of this run") && n0 == n1 && n0 > 0,
                      "sim --out onto its trace: rc %d, %zu -> %zu bytes: %s", ri, n0, n1, err);
            snprintf(a, sizeof a, "sim --trace none --policy layer --out %s/o.h5 --timeline %s/./o.h5", tmpdir, tmpdir);
            ri = run(a, out, sizeof out, err, sizeof err);
            CHECK_MSG(ri == 2 && strstr(err, "same file"), "--out == --timeline: rc %d: %s", ri, err);
        }
    }
    /* unreadable file */
    snprintf(path, sizeof path, "%s/unreadable.json", tmpdir);
    tu_write_text(path, "{}");
    chmod(path, 0);
    snprintf(args, sizeof args, "inspect --model %s", path);
    int rc = run(args, out, sizeof out, err, sizeof err);
    if (geteuid() != 0) /* root reads anything */
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, path), "unreadable: rc %d: %s", rc, err);
    snprintf(args, sizeof args, "inspect --model %s/does-not-exist.json", tmpdir);
    rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "does-not-exist.json") && strstr(err, "cannot open"),
              "missing file: rc %d: %s", rc, err);
}

/* ---- output files (common/outfile): checked before the work, never replacing special files ---- */

static int is_chr(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISCHR(sb.st_mode);
}

/* Whole file into a new string (NULL when unreadable); *n its length. */
/* Names of tmpdir entries containing ".tmp." (left-over temporaries), 0 if none. */
static int leftover_tmp(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '\\.tmp\\.'", dir);
    return system(cmd) == 0;
}

/* `ats <args>` with a bad output path: exit 2, one line on stderr naming `path` (not a temporary),
 * nothing on stdout (the work was not done). */
static void expect_out_refused(const char *args, const char *path)
{
    int rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, path) && !strstr(err, ".tmp."),
              "ats %s: rc %d, stderr '%s'", args, rc, err);
    CHECK_MSG(out[0] == '\0', "ats %s: printed results before refusing: '%.200s'", args, out);
}

static void test_outputs(void)
{
    char args[2048], good[400], regular[400], nodir[400], under[400];
    snprintf(good, sizeof good, "%s/good.h5", tmpdir);
    snprintf(regular, sizeof regular, "%s/regular", tmpdir);
    snprintf(nodir, sizeof nodir, "%s/no-such-dir/x.h5", tmpdir);
    snprintf(under, sizeof under, "%s/regular/x.h5", tmpdir);
    tu_write_text(good, "GOOD RESULTS\n");
    tu_write_text(regular, "a regular file\n");
    /* special files: refused, still devices afterwards */
    const char *specials[2] = {"/dev/null", "/dev/full"};
    for (int i = 0; i < 2; i++) {
        if (!is_chr(specials[i])) continue;
        snprintf(args, sizeof args, "sim --trace none --policy layer --out %s", specials[i]);
        expect_out_refused(args, specials[i]);
        snprintf(args, sizeof args, "sim --trace none --policy layer --timeline %s", specials[i]);
        expect_out_refused(args, specials[i]);
        CHECK_MSG(is_chr(specials[i]), "%s is no longer a character device", specials[i]);
    }
    /* missing directory, a path under a regular file, a directory: every writer, before its work */
    const char *bad[3] = {nodir, under, tmpdir};
    for (int i = 0; i < 3; i++) {
        const char *p = bad[i];
        const char *fmts[] = {
            "sim --trace none --policy layer --out %s",
            "sweep --trace none --out %s",
            "trace synth --duration 10 --out %s",
            "trace import /no/such.csv --resource cpu --out %s",
            "record --duration 1000 --out %s", /* refused at once, not after 1000 s */
            "record --duration 1000 --save-baseline %s",
            "quantize /no/such.gguf %s --type q8_0",
            "run --model qwen3-0.6b --dummy-weights -n 1 --out %s",
            "stress --calibrate %s",
            "bench sched --runs 1 --models qwen3-14b --out %s",
            "bench sim --quick --out %s",
            "bench kernels --out %s",
        };
        for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
            snprintf(args, sizeof args, fmts[k], p);
            expect_out_refused(args, p);
        }
    }
    /* an existing good file survives a failing run and is replaced by a finished one */
    size_t n = 0;
    snprintf(args, sizeof args, "sim --trace no-such-trace-xyz --policy layer --out %s", good);
    CHECK(run(args, out, sizeof out, err, sizeof err) == 2);
    char *g = tu_slurp(good, &n);
    CHECK_MSG(g && strcmp(g, "GOOD RESULTS\n") == 0, "good file changed by a failing run: '%s'", g ? g : "(gone)");
    free(g);
    snprintf(args, sizeof args, "sim --trace none --policy layer --gen 4 --prompt 64 --out %s", good);
    CHECK_MSG(run(args, out, sizeof out, err, sizeof err) == 0, "sim --out: %s", err);
    g = tu_slurp(good, &n);
    CHECK_MSG(g && n > 8 && memcmp(g, "\x89HDF", 4) == 0, "sim --out did not write HDF5 (%zu bytes)", n);
    free(g);
    CHECK(!leftover_tmp(tmpdir));
}

/* `ats bench sched` without --out prints its table and writes no file: neither in the current directory
 * nor the committed experiments/sched-speed/bench-sched.json. */
static void test_bench_default_out(void)
{
    char committed[1024], args[1500], here[400];
    const char *src = getenv("ATS_SOURCE_DIR");
    snprintf(committed, sizeof committed, "%s/experiments/sched-speed/bench-sched.json", src ? src : ".");
    size_t n0 = 0, n1 = 0, n2 = 0;
    char *before = tu_slurp(committed, &n0);
    snprintf(here, sizeof here, "%s/bench-here", tmpdir);
    CHECK(mkdir(here, 0755) == 0);
    const char *bin = getenv("ATS_BIN");
    char table[500];
    snprintf(table, sizeof table, "%s/table.txt", tmpdir);
    snprintf(args, sizeof args, "cd '%s' && '%s' bench sched --runs 1 --models qwen3-14b >'%s' 2>&1", here,
             bin ? bin : "ats", table);
    CHECK(system(args) == 0);
    char *txt = tu_slurp(table, &n1);
    CHECK_MSG(txt && strstr(txt, "qwen3-14b") && strstr(txt, "dp_ats_us") && !strstr(txt, "result file"),
              "stdout '%s'", txt ? txt : "(none)");
    DIR *d = opendir(here);
    int n_files = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n_files++;
    if (d) closedir(d);
    CHECK_MSG(d && n_files == 0, "bench sched without --out left %d files in %s", n_files, here);
    char *after = tu_slurp(committed, &n2);
    CHECK_MSG((!before && !after) || (before && after && n0 == n2 && memcmp(before, after, n0) == 0),
              "bench sched changed the committed %s", committed);
    free(before);
    free(after);
    free(txt);
    unlink(table);
    rmdir(here);
}

static void test_import_notes(void)
{
    char csv[400], h5[400], args[1024];
    snprintf(csv, sizeof csv, "%s/unsorted.csv", tmpdir);
    snprintf(h5, sizeof h5, "%s/unsorted.h5", tmpdir);
    /* file order 5, -3, 5, 2, -3, 7: out of order at lines 3, 5, 6 (the first: -3 after 5); times
     * 5 and -3 repeated (first repeat at line 4); two negative rows, earliest -3 at line 3 */
    tu_write_text(csv, "t,v\n5,1\n-3,2\n5,3\n2,4\n-3,6\n7,8\n");
    snprintf(args, sizeof args, "trace import %s --resource cpu --percentile 100 --out %s", csv, h5);
    int rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && strstr(out, "4 samples over 10.000 s"), "ats %s: rc %d: %s%s", args, rc, out, err);
    CHECK_MSG(tu_count_lines(err) == 3, "ats %s: stderr '%s'", args, err);
    CHECK_MSG(strstr(err, "3 of 6 rows out of order (first at line 3: time -3 after 5); sorted by time"), "%s", err);
    CHECK_MSG(strstr(err, "4 rows share 2 times with other rows (first repeat at line 4); each time's values "
                          "averaged into one sample"), "%s", err);
    CHECK_MSG(strstr(err, "2 rows have negative times (earliest -3 at line 3); all times shifted so the earliest "
                          "row is t = 0"), "%s", err);
    CHECK_MSG(strstr(err, csv) != NULL, "stderr does not name the CSV: %s", err);
    /* the trace: -3 -> 0, 2 -> 5, 5 -> 8, 7 -> 10; (2+6)/2 = 4 at t 0, (1+3)/2 = 2 at 8, max 8 */
    snprintf(args, sizeof args, "trace show %s", h5);
    rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && strstr(out, "3 rows out of order, sorted") && strstr(out, "averaged") &&
              strstr(out, "negative times, shifted"), "trace show: %s", out);
    /* in order, distinct, non-negative: nothing on stderr */
    tu_write_text(csv, "t,v\n0,1\n2,4\n3,6\n");
    snprintf(args, sizeof args, "trace import %s --resource gpu --out %s", csv, h5);
    rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && err[0] == '\0', "ats %s: rc %d, stderr '%s'", args, rc, err);
    unlink(csv);
    unlink(h5);
}

/* The README opens with exactly its two commands (a sh block under the title), CI runs the second one
 * verbatim, and the folders table lists .ci/ */
static void test_readme(void)
{
    char p[1024];
    char *rd = tu_slurp(tu_source_path(p, sizeof p, "README.md"), NULL);
    char *ci = tu_slurp(tu_source_path(p, sizeof p, ".ci/run"), NULL);
    CHECK_MSG(rd && ci, "README.md or .ci/run unreadable under $ATS_SOURCE_DIR");
    if (rd && ci) {
        /* the first lines: title, (blank), ```sh, command 1, command 2, ``` */
        char *l[5] = {0}, *save = NULL, *cp = strdup(rd);
        int n = 0;
        for (char *t = strtok_r(cp, "\n", &save); t && n < 5; t = strtok_r(NULL, "\n", &save)) l[n++] = t;
        /* strtok_r skips the blank line: the title, then the block must follow one empty line */
        const char *nl = strchr(rd, '\n');
        CHECK_MSG(n >= 5 && nl && !strncmp(nl, "\n\n```sh\n", 8) && !strcmp(l[1], "```sh") &&
                      !strncmp(l[2], "./tools/deps.sh && ", 19) && strstr(l[2], " && ./build/cli/ats sim") &&
                      !strncmp(l[3], "./tools/deps.sh && ", 19) && strstr(l[3], " && ctest ") && !strcmp(l[4], "```"),
                  "README does not start with the two commands: %.400s", rd);
        if (n >= 5) {
            char second[512];
            snprintf(second, sizeof second, "\n%s\n", l[3]);
            CHECK_MSG(strstr(ci, second), ".ci/run lacks the README's second command %s", second);
        }
        CHECK_MSG(strstr(rd, "\n| `.ci/` |") != NULL, "README's folders table lacks .ci/");
        free(cp);
    }
    free(rd);
    free(ci);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats-test-cli-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_basics();
    test_every_command();
    test_sub_help();
    test_inspect_models();
    test_inspect_options();
    test_bad_json();
    test_wrong_kind();
    test_outputs();
    test_bench_default_out();
    test_import_notes();
    test_readme();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_cli");
}
