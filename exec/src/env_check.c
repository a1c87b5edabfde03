/*
 * ex_env_check — the executor's environment knobs (ATS_* variables read with getenv in exec/src and
 * exec/cuda) checked against the values their readers accept, so that a typo such as
 * ATS_GEMV_KERNEL=v5 or ATS_GEMV_V4_RING_KB=8 is refused with one line (`ats` exits 2) instead of being
 * silently ignored. The readers stay where they are (each reads its variable once, or at every call);
 * this table has to follow them: exec/cuda/README.md, "Environment knobs", lists the same set.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex/ops.h"

typedef enum { KNOB_WORDS, KNOB_INT, KNOB_ATTN_SHAPE } knob_kind;

typedef struct knob {
    const char *name;
    knob_kind kind;
    const char *words; /* KNOB_WORDS: the accepted values, '|'-separated */
    long lo, hi;       /* KNOB_INT: the accepted range, both ends included */
    int base;          /* KNOB_INT: strtol base (0: decimal, 0x hex or 0 octal, as the reader's strtoul) */
    const char *valid; /* what is valid, for the message */
} knob;

/* Readers: gemv_v2.cu v2_disabled + v2_max_blocks, gemv_v3.cu v3_disabled + v3_config +
 * ex_cuda_gemv_kernel, gemv_v4.cu v4_config (ATS_GEMV_V4_TRIGGER: start | last, where the kernel lets the
 * next one launch), gpu.cu exc_pdl_early, attention.cu att_env,
 * cpu_matmul.c ex_cpu_features, load_record.c ex_probe_opts_default. */
static const knob KNOBS[] = {
    {"ATS_GEMV_KERNEL", KNOB_WORDS, "v1|v2|v3|v4", 0, 0, 0, "one of v1, v2, v3, v4"},
    {"ATS_GEMV_V4_CHUNK_KB", KNOB_INT, NULL, 1, 64, 10, "an integer 1..64"},
    {"ATS_GEMV_V4_RING_KB", KNOB_INT, NULL, 16, 220, 10, "an integer 16..220"},
    {"ATS_GEMV_V4_TRIGGER", KNOB_WORDS, "start|last", 0, 0, 0, "one of start, last"},
    {"ATS_GEMV_V3_R", KNOB_WORDS, "1|2|4|8", 0, 0, 0, "one of 1, 2, 4, 8"},
    {"ATS_GEMV_V3_LOAD", KNOB_WORDS, "ldg|na", 0, 0, 0, "one of ldg, na"},
    {"ATS_GEMV_V3_X", KNOB_WORDS, "lin|ilv", 0, 0, 0, "one of lin, ilv"},
    {"ATS_GEMV_V3_U", KNOB_WORDS, "1|2", 0, 0, 0, "one of 1, 2"},
    {"ATS_GEMV_V3_Q4K", KNOB_WORDS, "smem", 0, 0, 0, "smem (unset: the default kernel)"},
    {"ATS_GEMV_V3_Q6K", KNOB_WORDS, "0|1", 0, 0, 0, "one of 0, 1"},
    {"ATS_GEMV_MAX_BLOCKS", KNOB_INT, NULL, 1, INT_MAX, 10, "a positive integer"},
    {"ATS_PDL_EARLY", KNOB_WORDS, "0|1", 0, 0, 0, "one of 0, 1"},
    {"ATS_ATTN_SHAPE", KNOB_ATTN_SHAPE, NULL, 0, 0, 0,
     "NW,S with NW one of 0, 4, 8, 16, 32 (warps per block) and S 0..8 (split); 0 keeps the launcher's choice"},
    {"ATS_CPU_FEATURES", KNOB_INT, NULL, 0, EX_CPU_AVX2 | EX_CPU_AVX512 | EX_CPU_AVX512VNNI, 0,
     "a bit mask 0..7 (1 AVX2, 2 AVX-512, 4 AVX-512 VNNI)"},
    {"ATS_PROBE_PRIVATE", KNOB_WORDS, "0|1", 0, 0, 0, "one of 0, 1"},
};
#define N_KNOBS (sizeof KNOBS / sizeof KNOBS[0])

/* 1 when s is one of the '|'-separated words */
static int in_words(const char *s, const char *words)
{
    size_t n = strlen(s);
    for (const char *w = words; *w;) {
        const char *bar = strchr(w, '|');
        size_t k = bar ? (size_t)(bar - w) : strlen(w);
        if (k == n && strncmp(s, w, n) == 0) return 1;
        if (!bar) break;
        w = bar + 1;
    }
    return 0;
}

/* The whole string an integer (no sign for base 0, as a mask) in [lo, hi] */
static int int_ok(const char *s, long lo, long hi, int base)
{
    if (base == 0 && (*s == '-' || *s == '+')) return 0;
    if (*s == ' ' || *s == '\t') return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, base);
    return errno == 0 && end != s && *end == '\0' && v >= lo && v <= hi;
}

/* "NW,S": two decimal integers, NW in {0, 4, 8, 16, 32}, S in 0..8 */
static int attn_shape_ok(const char *s)
{
    const char *comma = strchr(s, ',');
    if (!comma || comma == s) return 0;
    char nw[16];
    size_t k = (size_t)(comma - s);
    if (k >= sizeof nw) return 0;
    memcpy(nw, s, k);
    nw[k] = '\0';
    if (!int_ok(nw, 0, 32, 10) || !int_ok(comma + 1, 0, 8, 10)) return 0;
    long w = strtol(nw, NULL, 10);
    return w == 0 || w == 4 || w == 8 || w == 16 || w == 32;
}

enum ats_status ex_env_check(char *msg, size_t len)
{
    if (msg && len) msg[0] = '\0';
    for (size_t i = 0; i < N_KNOBS; i++) {
        const knob *k = &KNOBS[i];
        const char *v = getenv(k->name);
        if (!v || !*v) continue; /* unset or empty: the default (every reader treats "" as unset) */
        int ok = k->kind == KNOB_WORDS ? in_words(v, k->words)
                 : k->kind == KNOB_INT ? int_ok(v, k->lo, k->hi, k->base)
                                       : attn_shape_ok(v);
        if (!ok) {
            if (msg && len) snprintf(msg, len, "%s='%s': not %s (unset it for the default)", k->name, v, k->valid);
            return ATS_EINVAL;
        }
    }
    return ATS_OK;
}
