/*
 * ex_env_check — the executor's environment knobs (ATS_* variables read with getenv in exec/ and
 * load/) checked against the values their readers accept, so that a typo such as
 * ATS_PROBE_PRIVATE=yes or ATS_CPU_FEATURES=16 is refused with one line (`ats` exits 2) instead of being
 * silently ignored. The readers stay where they are (each reads its variable once, or at every call);
 * this table has to follow them: exec/kernels/cuda/README.md, "Environment knobs", lists the same set.
 * The table is also the one list of every ATS_* variable anything here reads (the CLI's paths, the tests'
 * and the scripts' variables, not checked), so that ex_env_unknown_next can name a misspelt one
 * (ATS_ATTN_SHAPES) with the closest known name; test_exec_env scans the sources' getenv("ATS_...")
 * calls against it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/text.h"
#include "ex/ops.h"

extern char **environ;

typedef enum { KNOB_WORDS, KNOB_INT, KNOB_ATTN_SHAPE, KNOB_ANY } knob_kind;

typedef struct knob {
    const char *name;
    knob_kind kind;
    const char *words; /* KNOB_WORDS: the accepted values, '|'-separated */
    long lo, hi;       /* KNOB_INT: the accepted range, both ends included */
    int base;          /* KNOB_INT: strtol base (0: decimal, 0x hex or 0 octal, as the reader's strtoul) */
    const char *valid; /* what is valid, for the message */
} knob;

/* Readers: attention.cu att_env, cpu_matmul.c ex_cpu_features, load/src/record.c ld_probe_opts_default. */
static const knob KNOBS[] = {
    {"ATS_ATTN_SHAPE", KNOB_ATTN_SHAPE, NULL, 0, 0, 0,
     "NW,S with NW one of 0, 4, 8, 16, 32 (warps per block) and S 0..8 (split); 0 keeps the launcher's choice"},
    {"ATS_CPU_FEATURES", KNOB_INT, NULL, 0, EX_CPU_AVX2 | EX_CPU_AVX512 | EX_CPU_AVX512VNNI | EX_CPU_AMX, 0,
     "a bit mask 0..15 (1 AVX2, 2 AVX-512, 4 AVX-512 VNNI, 8 AMX)"},
    {"ATS_PROBE_PRIVATE", KNOB_WORDS, "0|1", 0, 0, 0, "one of 0, 1"},
    /* not checked: read by the CLI (cli_util.c resolve, sim_cli.c), set by CTest or read by the tests
     * (cmake/AtsTest.cmake, tests/testutil.c, tests/sim/test_sim_golden.c), read by scripts that run `ats`
     * (traces/record-h200.sh: ATS_LOAD; traces/build-loadtool.sh: ATS_CUDA) */
    {"ATS_MODELS_DIR", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_HW_DIR", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_TRACES_DIR", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_BENCH_SCHED", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_SHARED_DIR", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_SOURCE_DIR", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_BIN", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_TEST_SEED", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_UPDATE_GOLDEN", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_LOAD", KNOB_ANY, NULL, 0, 0, 0, NULL},
    {"ATS_CUDA", KNOB_ANY, NULL, 0, 0, 0, NULL},
    /* fault injection of the sweep driver for tests/cli/test_sweep_mpi.c (sim/src/sweep.c) */
    {"ATS_SWEEP_TEST_FAIL_POINT", KNOB_INT, NULL, 0, INT_MAX, 10, "a grid index >= 0"},
    {"ATS_SWEEP_TEST_KILL_RANK", KNOB_INT, NULL, 1, INT_MAX, 10, "a rank >= 1"},
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
        if (!v || !*v || k->kind == KNOB_ANY) continue; /* unset or empty: the default (every reader treats "" as unset) */
        int ok = k->kind == KNOB_WORDS ? in_words(v, k->words)
                 : k->kind == KNOB_INT ? int_ok(v, k->lo, k->hi, k->base)
                                       : attn_shape_ok(v);
        if (!ok) {
            char ev[ATSC_ESC_OUT];
            if (msg && len)
                snprintf(msg, len, "%s='%s': not %s (unset it for the default)", k->name,
                         atsc_esc(v, strlen(v), ev, sizeof ev), k->valid);
            return ATS_EINVAL;
        }
    }
    return ATS_OK;
}

int ex_env_known(const char *name)
{
    for (size_t i = 0; name && i < N_KNOBS; i++)
        if (strcmp(name, KNOBS[i].name) == 0) return 1;
    return 0;
}

/* Levenshtein distance of a[0..na) and b (at most 64 bytes of each are compared) */
static size_t edit_distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b);
    if (na > 64) na = 64;
    if (nb > 64) nb = 64;
    size_t row[65];
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[nb];
}

int ex_env_unknown_next(size_t *cursor, char *msg, size_t len)
{
    if (msg && len) msg[0] = '\0';
    for (; environ && environ[*cursor]; (*cursor)++) {
        const char *e = environ[*cursor];
        if (strncmp(e, "ATS_", 4) != 0) continue;
        const char *eq = strchr(e, '=');
        size_t n = eq ? (size_t)(eq - e) : strlen(e);
        int known = 0;
        size_t best = (size_t)-1, bi = 0;
        for (size_t i = 0; i < N_KNOBS && !known; i++) {
            known = strlen(KNOBS[i].name) == n && strncmp(e, KNOBS[i].name, n) == 0;
            size_t d = edit_distance(e, n, KNOBS[i].name);
            if (d < best) best = d, bi = i;
        }
        if (known) continue;
        (*cursor)++;
        char en[ATSC_ESC_OUT];
        atsc_esc(e, n, en, sizeof en);
        if (msg && len && (best <= 2 || 3 * best <= n)) /* a typo */
            snprintf(msg, len, "%s is not a variable ats reads (ignored): did you mean %s?", en, KNOBS[bi].name);
        else if (msg && len)
            snprintf(msg, len, "%s is not a variable ats reads (ignored; the list: exec/kernels/cuda/README.md, \"Environment "
                               "knobs\"); the closest known one is %s", en, KNOBS[bi].name);
        return 1;
    }
    return 0;
}
