/*
 * test_exec_run_policy — `ats run --policy` from the command line, without a GPU (--cpu-only, so it is
 * the same on a GPU machine): on stories260K (../shared) every policy gives the greedy ids of the plain
 * CPU run (--print-ids), and ats prints the plain run's text byte for byte (from BOS, with -p, sampled); --out holds one /rounds row per round (1 prefill + 15 decode) with /ops rows and
 * --timeline a trace; bad combinations exit 2 with one line (--policy without --vram-budget, an
 * unknown policy, --vram-budget without --policy, --policy with --backend).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/results.h"
#include "testutil.h"

int main(void)
{
    char model[1024], dir[1024], args[4096], path[1200], tl[1200];
    tu_shared_path(model, sizeof model, "models/stories260K/stories260K.gguf");
    tu_tmpdir(dir, sizeof dir, "test_exec_run_policy");
    int rc;
    snprintf(args, sizeof args, "run --model %s --temp 0 -n 16 --print-ids", model);
    char *ref = tu_run_ats(args, &rc, 0);
    CHECK(rc == 0 && ref && strlen(ref) > 10);
    const char *pols[] = {"layer", "layer-opoffload", "gpu-stream", "static", "static-opoffload", "ats-paper", "ats"};
    for (size_t p = 0; p < sizeof pols / sizeof *pols && ref; p++) {
        snprintf(args, sizeof args, "run --model %s --temp 0 -n 16 --cpu-only --policy %s --vram-budget 1GiB --print-ids",
                 model, pols[p]);
        char *o = tu_run_ats(args, &rc, 0);
        CHECK_MSG(rc == 0 && o && !strcmp(o, ref), "%s: rc %d, ids '%s' vs '%s'", pols[p], rc, o ? o : "", ref);
        free(o);
    }
    /* text, as plain ats run prints it (the prompt as the model sees it, then the generated pieces;
       EOS stops), from BOS and from a -p prompt, greedy and top-k/top-p sampled */
    const char *forms[] = {"--temp 0 -n 40", "-p \"Once upon a time\" --temp 0 -n 40",
                           "-p \"The cat\" --temp 0.8 --top-k 40 --top-p 0.95 --seed 7 -n 40"};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        snprintf(args, sizeof args, "run --model %s %s", model, forms[f]);
        char *want = tu_run_ats(args, &rc, 0);
        CHECK(rc == 0 && want && strlen(want) > 20 && strpbrk(want, "abcdefghijklmnopqrstuvwxyz")); /* text, not ids */
        snprintf(args, sizeof args, "run --model %s %s --cpu-only --policy ats --vram-budget 1GiB", model, forms[f]);
        char *o = tu_run_ats(args, &rc, 0);
        CHECK_MSG(rc == 0 && o && want && !strcmp(o, want), "text (%s): '%s' vs plain '%s'", forms[f], o ? o : "",
                  want ? want : "");
        free(o);
        free(want);
    }
    snprintf(path, sizeof path, "%s/r.h5", dir);
    snprintf(tl, sizeof tl, "%s/t.json", dir);
    snprintf(args, sizeof args, "run --model %s --temp 0 -n 16 --cpu-only --policy ats --vram-budget 1GiB --out %s "
             "--timeline %s", model, path, tl);
    free(tu_run_ats(args, &rc, 0));
    CHECK(rc == 0);
    atsc_results_file *f = NULL;
    ats_err err;
    CHECK_MSG(atsc_results_read(path, &f, &err) == ATS_OK, "%s", err.msg);
    if (f) {
        CHECK(f->n_runs == 1);
        if (f->n_runs == 1) {
            CHECK(f->runs[0].n_rounds == 16);
            CHECK(f->runs[0].has_ops && f->runs[0].n_ops > 16);
            CHECK(f->runs[0].rounds[0].phase == ATSC_PHASE_PREFILL && f->runs[0].rounds[1].phase == ATSC_PHASE_DECODE);
        }
        atsc_results_file_free(f);
    }
    size_t len = 0;
    char *t = tu_slurp(tl, &len);
    CHECK(t && strstr(t, "traceEvents") && strstr(t, "GPU compute stream"));
    free(t);
    const char *bad[] = {"--policy ats", "--policy nope --vram-budget 1GiB", "--vram-budget 1GiB",
                         "--policy ats --vram-budget 1GiB --backend cpu,cuda --split 2"};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        snprintf(args, sizeof args, "run --model %s -n 2 %s 2>&1", model, bad[b]);
        char *o = tu_run_ats(args, &rc, 1);
        CHECK_MSG(rc == 2 && o && tu_count_lines(o) == 1, "'%s': rc %d, '%s'", bad[b], rc, o ? o : "");
        free(o);
    }
    free(ref);
    return tu_finish("test_exec_run_policy");
}
