/*
 * replay_main — drives fuzz_gguf.c's LLVMFuzzerTestOneInput without libFuzzer, so every build (and
 * the sanitizer build in CI) fuzzes the GGUF reader: a seed corpus of valid GGUF files written with
 * ex_gguf_write (every tensor type, every metadata value type, nested and string arrays, a
 * tokenizer), the real stories260K when $ATS_SHARED_DIR has it, then N seeded mutations (bit flips,
 * interesting bytes and 64-bit values, truncations, insertions, splices).
 *   test_exec_fuzz_replay [N]                 run seeds + N mutations (default 20000)
 *   test_exec_fuzz_replay --write-corpus DIR  write the seed corpus for libFuzzer and exit
 * Prints how many inputs ran; a crash fails the test (as does any sanitizer report).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ex/gguf.h"
#include "ex/quant.h"
#include "testutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct buf { uint8_t *p; size_t n, cap; } buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

/* Writes a seed with KVs `kv` (raw entries) and tensors of the given types; returns its bytes. */
static uint8_t *make_seed(const char *dir, const char *name, buf *kv, int nkv, const ats_qtype *types, int nt,
                          int64_t ne0, uint64_t *rng, size_t *len)
{
    const void *kvp[16];
    size_t kvl[16];
    for (int i = 0; i < nkv; i++) { kvp[i] = kv[i].p; kvl[i] = kv[i].n; }
    ex_gguf_out_tensor t[16];
    char names[16][32];
    for (int i = 0; i < nt; i++) {
        snprintf(names[i], sizeof names[i], "blk.%d.attn_q.weight", i);
        int64_t rows = 2 + i % 3;
        float *f = malloc((size_t)(ne0 * rows) * sizeof *f);
        for (int64_t j = 0; j < ne0 * rows; j++) f[j] = (float)tu_uniform(rng, -1, 1);
        uint64_t rb;
        ats_qtype_bytes(types[i], ne0, &rb);
        uint8_t *q = malloc((size_t)(rb * (uint64_t)rows));
        for (int64_t r = 0; r < rows; r++) ex_quantize_row(types[i], f + r * ne0, q + r * rb, ne0);
        free(f);
        t[i] = (ex_gguf_out_tensor){names[i], i % 2 ? 3u : 2u, {ne0, rows, 1, 1}, types[i], q, rb * (uint64_t)rows};
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ats_err err;
    if (ex_gguf_write(path, nkv, kvp, kvl, nt, t, 32, &err) != ATS_OK) fprintf(stderr, "%s\n", err.msg);
    for (int i = 0; i < nt; i++) free((void *)t[i].data);
    return read_all(path, len);
}

#define N_SEEDS 5

static int build_seeds(const char *dir, uint64_t *rng, uint8_t **seed, size_t *seed_len)
{
    buf kv[12] = {{0}};
    /* every scalar value type + strings + arrays (numeric, string, nested) + a tokenizer */
    put_str(&kv[0], "general.architecture"); put_u32(&kv[0], 8); put_str(&kv[0], "llama");
    put_str(&kv[1], "general.alignment"); put_u32(&kv[1], 4); put_u32(&kv[1], 32);
    put_str(&kv[2], "a.u8"); put_u32(&kv[2], 0); put(&kv[2], "\x07", 1);
    put_str(&kv[3], "a.i64"); put_u32(&kv[3], 11); put_u64(&kv[3], (uint64_t)-5);
    put_str(&kv[4], "a.f64"); put_u32(&kv[4], 12); { double d = 2.5; put(&kv[4], &d, 8); }
    put_str(&kv[5], "a.bool"); put_u32(&kv[5], 7); put(&kv[5], "\x01", 1);
    put_str(&kv[6], "tokenizer.ggml.tokens"); put_u32(&kv[6], 9); put_u32(&kv[6], 8); put_u64(&kv[6], 6);
    const char *toks[6] = {"<unk>", "<s>", "</s>", "<0x61>", "\xE2\x96\x81\x61", "b"};
    for (int i = 0; i < 6; i++) put_str(&kv[6], toks[i]);
    put_str(&kv[7], "tokenizer.ggml.scores"); put_u32(&kv[7], 9); put_u32(&kv[7], 6); put_u64(&kv[7], 6);
    for (int i = 0; i < 6; i++) { float f = (float)-i; put(&kv[7], &f, 4); }
    put_str(&kv[8], "tokenizer.ggml.token_type"); put_u32(&kv[8], 9); put_u32(&kv[8], 5); put_u64(&kv[8], 6);
    int32_t tt[6] = {2, 3, 3, 6, 1, 1};
    put(&kv[8], tt, sizeof tt);
    put_str(&kv[9], "a.nested"); put_u32(&kv[9], 9); put_u32(&kv[9], 9); put_u64(&kv[9], 2);
    for (int i = 0; i < 2; i++) { put_u32(&kv[9], 4); put_u64(&kv[9], 2); put_u32(&kv[9], 1); put_u32(&kv[9], 2); }
    put_str(&kv[10], "tokenizer.ggml.bos_token_id"); put_u32(&kv[10], 4); put_u32(&kv[10], 1);
    put_str(&kv[11], "a.i16"); put_u32(&kv[11], 3); put(&kv[11], "\xff\x7f", 2);
    ats_qtype t32[] = {ATS_Q_F32, ATS_Q_F16, ATS_Q_BF16, ATS_Q_Q8_0, ATS_Q_Q4_0, ATS_Q_MXFP4};
    ats_qtype t256[] = {ATS_Q_Q4_K, ATS_Q_Q6_K, ATS_Q_Q8_0};
    int n = 0;
    seed[n] = make_seed(dir, "seed_all_types.gguf", kv, 12, t32, 6, 64, rng, &seed_len[n]); n++;
    seed[n] = make_seed(dir, "seed_kquants.gguf", kv, 2, t256, 3, 256, rng, &seed_len[n]); n++;
    seed[n] = make_seed(dir, "seed_meta_only.gguf", kv, 12, t32, 0, 32, rng, &seed_len[n]); n++;
    seed[n] = make_seed(dir, "seed_tiny.gguf", kv, 1, t32, 1, 32, rng, &seed_len[n]); n++;
    for (int i = 0; i < 12; i++) free(kv[i].p);
    /* a byte-level ("gpt2") vocabulary with merges */
    buf kg[3] = {{0}};
    put_str(&kg[0], "tokenizer.ggml.model"); put_u32(&kg[0], 8); put_str(&kg[0], "gpt2");
    put_str(&kg[1], "tokenizer.ggml.tokens"); put_u32(&kg[1], 9); put_u32(&kg[1], 8); put_u64(&kg[1], 5);
    const char *gt[5] = {"a", "b", "\xC4\xA0", "ab", "\xC4\xA0\x61\x62"};
    for (int i = 0; i < 5; i++) put_str(&kg[1], gt[i]);
    put_str(&kg[2], "tokenizer.ggml.merges"); put_u32(&kg[2], 9); put_u32(&kg[2], 8); put_u64(&kg[2], 2);
    put_str(&kg[2], "a b");
    put_str(&kg[2], "\xC4\xA0 ab");
    seed[n] = make_seed(dir, "seed_gpt2.gguf", kg, 3, t32, 1, 32, rng, &seed_len[n]); n++;
    for (int i = 0; i < 3; i++) free(kg[i].p);
    return n;
}

static void mutate(uint8_t *p, size_t *n, size_t cap, uint64_t *rng)
{
    static const uint64_t interesting[] = {0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                                           0x100000000ull, 0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 32, 64, 9, 12};
    int k = 1 + (int)(tu_rand(rng) % 4);
    for (int m = 0; m < k && *n > 0; m++) {
        size_t at = (size_t)(tu_rand(rng) % *n);
        switch (tu_rand(rng) % 6) {
        case 0: p[at] ^= (uint8_t)(1u << (tu_rand(rng) % 8)); break;
        case 1: p[at] = (uint8_t)interesting[tu_rand(rng) % 5]; break;
        case 2: {
            uint64_t v = interesting[tu_rand(rng) % (sizeof interesting / sizeof interesting[0])];
            size_t w = (tu_rand(rng) % 2) ? 8 : 4;
            if (at + w <= *n) memcpy(p + at, &v, w);
            break;
        }
        case 3: *n = at; break; /* truncate */
        case 4: if (*n + 8 <= cap) { memmove(p + at + 8, p + at, *n - at); memset(p + at, (int)(tu_rand(rng) & 0xFF), 8); *n += 8; } break;
        default: { size_t from = (size_t)(tu_rand(rng) % *n), len = (size_t)(tu_rand(rng) % 16);
                   if (from + len <= *n && at + len <= *n) memmove(p + at, p + from, len); } break;
        }
    }
}

int main(int argc, char **argv)
{
    uint64_t rng = tu_seed("test_exec_fuzz_replay");
    const char *corpus = NULL;
    long n_mut = 20000;
    if (argc >= 3 && strcmp(argv[1], "--write-corpus") == 0) corpus = argv[2];
    else if (argc >= 2) n_mut = strtol(argv[1], NULL, 10);
    char tmpdir[] = "/tmp/ats_fuzz_XXXXXX";
    const char *dir = corpus;
    if (!dir) dir = mkdtemp(tmpdir);
    else mkdir(dir, 0755);
    uint8_t *seed[N_SEEDS + 1];
    size_t seed_len[N_SEEDS + 1];
    int ns = build_seeds(dir, &rng, seed, seed_len);
    char real[1024];
    tu_shared_path(real, sizeof real, "models/stories260K/stories260K.gguf");
    if ((seed[ns] = read_all(real, &seed_len[ns])) != NULL) ns++;
    for (int i = 0; i < ns; i++) CHECK(seed[i] != NULL);
    if (corpus) {
        for (int i = 0; i < ns; i++) free(seed[i]);
        fprintf(stderr, "test_exec_fuzz_replay: wrote the seed corpus to %s\n", corpus);
        return tu_finish("test_exec_fuzz_replay");
    }
    long runs = 0;
    for (int i = 0; i < ns; i++, runs++) LLVMFuzzerTestOneInput(seed[i], seed_len[i]);
    size_t cap = 0;
    for (int i = 0; i < ns; i++) cap = seed_len[i] > cap ? seed_len[i] : cap;
    cap += 1024;
    uint8_t *work = malloc(cap);
    for (long r = 0; r < n_mut; r++, runs++) {
        int s = (int)(tu_rand(&rng) % (uint64_t)(ns > N_SEEDS ? N_SEEDS : ns)); /* the big real file less often */
        if (ns > N_SEEDS && r % 50 == 0) s = N_SEEDS;
        size_t n = seed_len[s];
        memcpy(work, seed[s], n);
        /* mutate mostly the header/metadata/infos region, where the parser lives */
        size_t n_before = n;
        if (n > 4096 && tu_rand(&rng) % 4) n = 4096;
        mutate(work, &n, cap, &rng);
        if (n_before > 4096 && n == 4096) n = n_before; /* keep the tail when only the head mutated */
        LLVMFuzzerTestOneInput(work, n);
    }
    free(work);
    for (int i = 0; i < ns; i++) free(seed[i]);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    fprintf(stderr, "test_exec_fuzz_replay: %ld inputs (%d seeds + %ld mutations) parsed without a crash\n", runs, ns, n_mut);
    CHECK(runs == ns + n_mut);
    return tu_finish("test_exec_fuzz_replay");
}
