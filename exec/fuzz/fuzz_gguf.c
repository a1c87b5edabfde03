/*
 * fuzz_gguf — libFuzzer target for the GGUF reader: parses the input with ex_gguf_open_mem and, when
 * it is accepted, reads every metadata value, every string-array element, the tokenizer built from
 * it, and the first row of every tensor (dequantized). Any crash, sanitizer report or read outside
 * the input is a bug. Built with -DATS_FUZZ=ON and clang (tests/exec/CMakeLists.txt); the same
 * function is driven by replay_main.c in every build (test_exec_fuzz_replay).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ex/gguf.h"
#include "ex/quant.h"
#include "ex/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ex_gguf *g = NULL;
    ats_err err;
    if (ex_gguf_open_mem(data, size, "fuzz", &g, &err) != ATS_OK) return 0;
    volatile double sink = 0;
    for (int64_t i = 0; i < ex_gguf_n_kv(g); i++) {
        const char *key = ex_gguf_kv_key(g, i);
        int64_t iv;
        double dv;
        const char *s;
        size_t sl;
        ex_gguf_vtype et;
        uint64_t n;
        if (ex_gguf_get_int(g, key, &iv, NULL) == ATS_OK) sink += (double)iv;
        if (ex_gguf_get_double(g, key, &dv, NULL) == ATS_OK) sink += dv;
        if (ex_gguf_get_str(g, key, &s, &sl, NULL) == ATS_OK && sl) sink += (unsigned char)s[sl - 1];
        if (ex_gguf_get_arr(g, key, &et, &n, NULL) == ATS_OK) {
            for (uint64_t j = 0; j < n && j < 4096; j++) {
                if (et == EX_GGUF_STRING && ex_gguf_arr_str(g, key, j, &s, &sl) == ATS_OK && sl) sink += (unsigned char)s[0];
                if (ex_gguf_arr_num(g, key, j, &dv) == ATS_OK) sink += dv;
            }
        }
        const void *raw;
        ex_gguf_kv_raw(g, i, &raw, &sl);
        if (sl) sink += ((const uint8_t *)raw)[sl - 1];
    }
    ex_tokenizer *tok = NULL;
    if (ex_tokenizer_from_gguf(g, &tok, NULL) == ATS_OK) {
        int32_t ids[64];
        int64_t n = 0;
        char buf[64];
        ex_tokenizer_encode(tok, "a b", 1, ids, 64, &n);
        for (int64_t i = 0; i < n; i++) sink += (double)ex_tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], buf, sizeof buf);
        ex_tokenizer_free(tok);
    }
    for (int64_t i = 0; i < ex_gguf_n_tensors(g); i++) {
        const ex_gguf_tensor *t = ex_gguf_tensor_at(g, i);
        if (t->bytes) sink += ((const uint8_t *)t->data)[t->bytes - 1];
        if (t->ne[0] <= 4096) {
            float row[4096];
            if (ex_dequantize_row(t->type, t->data, row, t->ne[0]) == ATS_OK) sink += row[0];
        }
    }
    (void)sink;
    ex_gguf_free(g);
    return 0;
}
