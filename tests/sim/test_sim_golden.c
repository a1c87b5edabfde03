/*
 * test_sim_golden — end-to-end checks of `ats sim` and `ats sweep` through the program ($ATS_BIN).
 *
 *  golden   fixed seed, committed fixture trace (traces/fig13-synth.h5, replayed from an offset so
 *           the runs cross a change point), text summary diffed against tests/golden/sim_*.expected.
 *           ATS_UPDATE_GOLDEN=1 rewrites the expected files (a commit that changes them says why).
 *  threads  `ats sweep --format csv` prints the same bytes with --threads 1 and --threads 2, and
 *           `ats sim --threads 2` the same table as --threads 1 (bit-for-bit reproducibility).
 *  badinput bad flags and files give one line on stderr and exit code 2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <jansson.h>
#include <unistd.h>

#include "atsc/results.h"
#include "testutil.h"

static void golden(const char *name, const char *args)
{
    int rc;
    char *out = tu_run_ats(args, &rc, 0);
    CHECK_MSG(rc == 0 && out, "ats %s: exit %d", args, rc);
    if (!out) return;
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/golden/%s.expected", name);
    tu_source_path(path, sizeof path, rel);
    const char *upd = getenv("ATS_UPDATE_GOLDEN");
    if (upd && *upd == '1') {
        FILE *f = fopen(path, "wb");
        CHECK_MSG(f != NULL, "cannot write %s", path);
        if (f) {
            fputs(out, f);
            fclose(f);
            fprintf(stderr, "test_sim_golden: wrote %s\n", path);
        }
    } else {
        char *exp = tu_slurp(path, NULL);
        CHECK_MSG(exp != NULL, "missing %s (run with ATS_UPDATE_GOLDEN=1)", path);
        if (exp && strcmp(exp, out) != 0) {
            CHECK_MSG(0, "%s differs from `ats %s`", path, args);
            fprintf(stderr, "--- expected\n%s--- got\n%s", exp, out);
        }
        free(exp);
    }
    free(out);
}

static void threads(void)
{
    const char *sweep = "sweep --model qwen3-14b --trace fig13-synth --trace-offset 55 --duration 12 --prompt 512 "
                        "--gen 48 --eps 0.05:0.25:0.1 --interval 2:8:3 --policy ats,ats-paper --jitter 0.05 --seed 9 "
                        "--format csv";
    char a1[1024], a2[1024];
    snprintf(a1, sizeof a1, "%s --threads 1", sweep);
    snprintf(a2, sizeof a2, "%s --threads 2", sweep);
    int r1, r2;
    char *o1 = tu_run_ats(a1, &r1, 0), *o2 = tu_run_ats(a2, &r2, 0);
    CHECK_MSG(r1 == 0 && r2 == 0, "sweep exit %d / %d", r1, r2);
    CHECK(o1 && o2 && strcmp(o1, o2) == 0);
    /* 2 policies x 3 eps x 3 intervals = 18 rows + header */
    int lines = 0;
    for (const char *c = o1 ? o1 : ""; *c; c++) lines += *c == '\n';
    CHECK_MSG(lines == 19, "sweep printed %d lines", lines);
    free(o1);
    free(o2);
    const char *sim = "sim --model qwen3-30b-a3b --requests 2 --prompt 512 --gen 16 --routing zipf:1.3 --jitter 0.1 "
                      "--seed 4 --trace fig13-synth --trace-offset 119";
    snprintf(a1, sizeof a1, "%s --threads 1", sim);
    snprintf(a2, sizeof a2, "%s --threads 2", sim);
    o1 = tu_run_ats(a1, &r1, 0);
    o2 = tu_run_ats(a2, &r2, 0);
    CHECK(r1 == 0 && r2 == 0 && o1 && o2 && strcmp(o1, o2) == 0);
    free(o1);
    free(o2);
}

static void badinput(void)
{
    const char *cases[][2] = {
        {"sim --policy nosuch", "unknown policy 'nosuch'"},
        {"sim --trace /nonexistent/t.h5", "/nonexistent/t.h5"},
        {"sim --vram-budget -3", "--vram-budget"},
        {"sim --jitter abc", "--jitter"},
        {"sim --model /nonexistent/m.json", "/nonexistent/m.json"},
        {"sim --format xml", "--format"},
        {"sim --routing /nonexistent/r.h5 --model qwen3-30b-a3b --requests 1 --trace none", "/nonexistent/r.h5"},
        {"sweep --eps 0.5:0.1:0.1 --interval 1 --trace fig13-synth", "--eps"},
        {"sweep --eps 0.1 --interval 1", "required"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc;
        char *out = tu_run_ats(cases[i][0], &rc, 1);
        CHECK_MSG(rc == 2, "ats %s: exit %d (expected 2)", cases[i][0], rc);
        CHECK_MSG(out && strstr(out, cases[i][1]), "ats %s: message lacks '%s': %s", cases[i][0], cases[i][1],
                  out ? out : "");
        free(out);
    }
}

/* --out and --timeline: the results file reads back with the schema reader, one run per policy
 * with its rounds and ops; the timeline parses as JSON with CPU/GPU/copy-engine tracks and
 * PCIe counters; no temporary file is left behind */
static void outputs(void)
{
    char h5[256], js[256], args[1024];
    snprintf(h5, sizeof h5, "/tmp/test_sim_out.%d.h5", (int)getpid());
    snprintf(js, sizeof js, "/tmp/test_sim_out.%d.json", (int)getpid());
    snprintf(args, sizeof args,
             "sim --policy static,ats --requests 2 --prompt 512 --gen 6 --ops --out %s --timeline %s --seed 2", h5, js);
    int rc;
    char *o = tu_run_ats(args, &rc, 0);
    CHECK_MSG(rc == 0, "ats %s: exit %d", args, rc);
    free(o);
    atsc_results_file *f = NULL;
    ats_err err = {{0}};
    CHECK_MSG(atsc_results_read(h5, &f, &err) == ATS_OK, "%s", err.msg);
    if (f) {
        CHECK(f->n_runs == 2 && strcmp(f->producer, "ats sim") == 0 && f->seed == 2);
        const atsc_results_run *r = atsc_results_find_run(f, "ats");
        CHECK(r != NULL);
        if (r) {
            CHECK(r->n_rounds == 2 * (1 + 6));
            CHECK(r->has_ops && r->n_ops == r->n_rounds * (size_t)(r->n_ops / r->n_rounds) && r->n_ops > 0);
            double t = 0;
            int ok = 1;
            for (size_t i = 0; i < r->n_rounds; i++) { /* rounds follow each other without gaps */
                ok &= fabs(r->rounds[i].t_start_s - t) < 1e-9 && r->rounds[i].latency_s > 0;
                t = r->rounds[i].t_start_s + r->rounds[i].latency_s;
            }
            CHECK(ok);
        }
        atsc_results_file_free(f);
    }
    json_error_t je;
    json_t *root = json_load_file(js, 0, &je);
    CHECK_MSG(root != NULL, "%s: %s (line %d)", js, je.text, je.line);
    if (root) {
        json_t *ev = json_object_get(root, "traceEvents");
        size_t i, n_x = 0, n_c = 0, n_tracks = 0;
        json_t *e;
        json_array_foreach(ev, i, e) {
            const char *ph = json_string_value(json_object_get(e, "ph"));
            if (!ph) continue;
            n_x += strcmp(ph, "X") == 0;
            n_c += strcmp(ph, "C") == 0;
            const char *nm = json_string_value(json_object_get(e, "name"));
            if (strcmp(ph, "M") == 0 && nm && strcmp(nm, "thread_name") == 0) n_tracks++;
        }
        CHECK_MSG(n_x > 100 && n_c > 10 && n_tracks == 2 * 4, "%zu slices, %zu counters, %zu tracks", n_x, n_c, n_tracks);
        json_decref(root);
    }
    CHECK(access(h5, F_OK) == 0 && access(js, F_OK) == 0);
    unlink(h5);
    unlink(js);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "golden";
    if (strcmp(what, "golden") == 0) {
        golden("sim_qwen3-14b_fig13", "sim --requests 1 --prompt 1024 --gen 24 --trace fig13-synth --trace-offset 57 "
                                      "--jitter 0.05 --seed 11 --resched-cost 16ms");
        golden("sim_qwen3-30b-a3b_zipf", "sim --model qwen3-30b-a3b --requests 2 --prompt 512 --gen 16 --routing zipf:1.2 "
                                         "--trace fig13-synth --trace-offset 118 --seed 3 --resched-cost 16ms --format csv");
        golden("sim_ablation", "sim --policy static,ats --requests 1 --prompt 1024 --gen 16 --trace none --serialized "
                               "--act-path ce --no-hostmem --resched-cost 9ms --format json");
    } else if (strcmp(what, "threads") == 0) {
        threads();
    } else if (strcmp(what, "outputs") == 0) {
        outputs();
    } else {
        badinput();
    }
    return tu_finish(what);
}
