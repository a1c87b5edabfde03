#include "testutil.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tu_failures = 0;
int tu_checks = 0;
static char tu_scratch[512]; /* tu_tmpdir's folder ("" = none) */

uint64_t tu_seed(const char *test_name)
{
    const char *env = getenv("ATS_TEST_SEED");
    uint64_t seed;
    if (env && *env) {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    }
    fprintf(stderr, "%s: seed %llu (replay with ATS_TEST_SEED=%llu)\n", test_name,
            (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(tu_rand(s) >> 11) * 0x1.0p-53);
}

const char *tu_tmpdir(char *buf, size_t len, const char *test_name)
{
    const char *t = getenv("TMPDIR");
    snprintf(tu_scratch, sizeof tu_scratch, "%s/ats_%s_XXXXXX", t && *t ? t : "/tmp", test_name);
    if (!mkdtemp(tu_scratch)) {
        fprintf(stderr, "%s: cannot create a scratch folder %s: ", test_name, tu_scratch);
        perror("mkdtemp");
        tu_scratch[0] = 0;
        return NULL;
    }
    snprintf(buf, len, "%s", tu_scratch);
    return buf;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

int tu_finish(const char *test_name)
{
    fprintf(stderr, "%s: %d checks, %d failed\n", test_name, tu_checks, tu_failures);
    if (tu_scratch[0] && tu_failures) {
        fprintf(stderr, "%s: kept its scratch folder %s (a check failed)\n", test_name, tu_scratch);
    } else if (tu_scratch[0]) {
        if (nftw(tu_scratch, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0) {
            fprintf(stderr, "%s: removed its scratch folder %s\n", test_name, tu_scratch);
        } else {
            fprintf(stderr, "%s: could not remove its scratch folder %s: ", test_name, tu_scratch);
            perror(NULL);
            return 1;
        }
    }
    return tu_failures ? 1 : 0;
}

const char *tu_shared_path(char *buf, size_t len, const char *rel)
{
    const char *d = getenv("ATS_SHARED_DIR");
    snprintf(buf, len, "%s/%s", d && *d ? d : "../shared", rel);
    return buf;
}

const char *tu_source_path(char *buf, size_t len, const char *rel)
{
    const char *d = getenv("ATS_SOURCE_DIR");
    snprintf(buf, len, "%s/%s", d && *d ? d : ".", rel);
    return buf;
}

int tu_run_ats_split(const char *dir, const char *args, int timeout_s, const char *scratch_dir, char *out, size_t olen,
                     char *err, size_t elen)
{
    const char *bin = getenv("ATS_BIN");
    if (!bin || !*bin) bin = "./build/cli/ats";
    char cmd[8192], of[512], ef[512];
    snprintf(of, sizeof of, "%s/out.txt", scratch_dir);
    snprintf(ef, sizeof ef, "%s/err.txt", scratch_dir);
    snprintf(cmd, sizeof cmd, "%s%s%s timeout %d %s %s >%s 2>%s", dir ? "cd '" : "", dir ? dir : "", dir ? "' &&" : "",
             timeout_s, bin, args, of, ef);
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

void tu_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

char *tu_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = b ? fread(b, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (b) b[got] = 0;
    if (len) *len = got;
    return b;
}

int tu_count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

char *tu_run_ats(const char *args, int *rc, int with_stderr)
{
    const char *bin = getenv("ATS_BIN");
    if (!bin || !*bin) bin = "./build/cli/ats";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s %s", bin, args, with_stderr ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    if (!p) {
        *rc = -1;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) break;
            buf = nb;
        }
    }
    if (buf) buf[n] = 0;
    int st = pclose(p);
    *rc = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
    return buf;
}

int tu_run_capture(const char *bin, const char *args, const char *scratch_dir, char **out, char *err, size_t elen)
{
    char cmd[8192], ep[600];
    snprintf(ep, sizeof ep, "%s/err.txt", scratch_dir);
    snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s'", bin, args, ep);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 20, n = 0, k;
    char *b = calloc(1, cap);
    while (p && b && (k = fread(b + n, 1, cap - n - 1, p)) > 0) n += k;
    int st = p ? pclose(p) : -1;
    FILE *f = fopen(ep, "r");
    size_t m = f ? fread(err, 1, elen - 1, f) : 0;
    if (f) fclose(f);
    err[m] = 0;
    unlink(ep);
    if (out) *out = b;
    else free(b);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tu_expect_usage_out(const char *bin, const char *scratch_dir, const char *args, const char *part)
{
    char e[4096], full[2048], res[600];
    snprintf(res, sizeof res, "%s/bad.json", scratch_dir);
    snprintf(full, sizeof full, "%s --out '%s'", args, res);
    int code = tu_run_capture(bin, full, scratch_dir, NULL, e, sizeof e);
    CHECK_MSG(code == 2 && tu_count_lines(e) == 1 && strstr(e, part), "`ats %s`: exit %d, stderr '%s' (want one line with '%s')",
              full, code, e, part);
    CHECK_MSG(access(res, F_OK) != 0, "`ats %s` wrote its result file", full);
    unlink(res);
}

void tu_write_tiny_qwen3(const char *path, const char *test_name)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"model_type\": \"qwen3\", \"hidden_size\": 256, \"intermediate_size\": 512,\n"
             " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 64,\n"
             " \"vocab_size\": 320, \"tie_word_embeddings\": false, \"qk_norm\": true, \"max_position_embeddings\": 128,\n"
             " \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, \"rope_type\": \"neox\",\n"
             " \"default_quant\": \"q4_k_m\", \"source\": \"%s: a tiny qwen3\"}\n",
             test_name);
    tu_write_text(path, text);
}
