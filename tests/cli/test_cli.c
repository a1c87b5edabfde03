/*
 * test_cli — the `ats` program as a user meets it: help, --version, unknown subcommands and flags
 * (usage + exit 2), `ats inspect` on every listed model, and bad model JSON (missing field, negative
 * size, unknown quant type, unreadable file, syntax error, unknown key): exactly one line on stderr
 * naming the file, the field and the value, exit 2.
 */
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
    const char *bin = getenv("ATS_BIN");
    char cmd[4096], of[300], ef[300];
    snprintf(of, sizeof of, "%s/out.txt", tmpdir);
    snprintf(ef, sizeof ef, "%s/err.txt", tmpdir);
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", bin ? bin : "./build/cli/ats", args, of, ef);
    int st = system(cmd);
    const char *files[2] = {of, ef};
    char *bufs[2] = {out, err};
    size_t lens[2] = {olen, elen};
    for (int i = 0; i < 2; i++) {
        if (!bufs[i]) continue;
        FILE *f = fopen(files[i], "rb");
        size_t n = f ? fread(bufs[i], 1, lens[i] - 1, f) : 0;
        bufs[i][n] = '\0';
        if (f) fclose(f);
    }
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char out[1 << 20], err[1 << 16];

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
        snprintf(args, sizeof args, "%s --no-such-flag-xyz", name);
        rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2 && strstr(err, "no-such-flag-xyz"), "ats %s --no-such-flag-xyz: rc %d, stderr '%s'", name, rc, err);
        CHECK_MSG(strstr(err, name) != NULL, "ats %s: the error does not name the command: '%s'", name, err);
    }
    CHECK_MSG(n >= 9, "only %d commands listed by ats help", n);
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
    /* the example, with its totals */
    CHECK(run("inspect --model qwen3-14b --quant q4_k_m --phase decode --ctx 2048", out, sizeof out, err, sizeof err) == 0);
    CHECK(strstr(out, "403 ops") && strstr(out, "14.768 B parameters") && strstr(out, "320.00 MiB at 2048 tokens"));
}

typedef struct {
    const char *what, *json, *must1, *must2;
} badcase;

static void test_bad_json(void)
{
    const char *good_head = "{\"model_type\":\"llama\",\"source\":\"test\",\"hidden_size\":64,\"intermediate_size\":172,"
                            "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":512";
    char buf[1024];
    /* sanity: the good description loads */
    snprintf(buf, sizeof buf, "%s,\"default_quant\":\"f32\"}", good_head);
    char path[400], args[600];
    snprintf(path, sizeof path, "%s/good.json", tmpdir);
    write_file(path, buf);
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
        write_file(path, json);
        snprintf(args, sizeof args, "inspect --model %s", path);
        int rc = run(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2, "%s: exit %d (want 2)", c->what, rc);
        CHECK_MSG(count_lines(err) == 1, "%s: %d lines on stderr: %s", c->what, count_lines(err), err);
        CHECK_MSG(strstr(err, path) && strstr(err, c->must1) && strstr(err, c->must2), "%s: message '%s'", c->what, err);
        CHECK_MSG(out[0] == '\0', "%s: stdout not empty", c->what);
    }
    /* a directory */
    snprintf(args, sizeof args, "inspect --model %s/", tmpdir);
    int rcd = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rcd == 2 && count_lines(err) == 1 && strstr(err, "not a regular file"), "directory: rc %d: %s", rcd, err);
    /* a context beyond any model */
    rcd = run("inspect --model qwen3-14b --ctx 100000000000", out, sizeof out, err, sizeof err);
    CHECK_MSG(rcd == 2 && strstr(err, "ctx_pos"), "huge ctx: rc %d: %s", rcd, err);
    /* unreadable file */
    snprintf(path, sizeof path, "%s/unreadable.json", tmpdir);
    write_file(path, "{}");
    chmod(path, 0);
    snprintf(args, sizeof args, "inspect --model %s", path);
    int rc = run(args, out, sizeof out, err, sizeof err);
    if (geteuid() != 0) /* root reads anything */
        CHECK_MSG(rc == 2 && count_lines(err) == 1 && strstr(err, path), "unreadable: rc %d: %s", rc, err);
    snprintf(args, sizeof args, "inspect --model %s/does-not-exist.json", tmpdir);
    rc = run(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 2 && count_lines(err) == 1 && strstr(err, "does-not-exist.json") && strstr(err, "cannot open"),
              "missing file: rc %d: %s", rc, err);
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
    test_inspect_models();
    test_bad_json();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_cli");
}
