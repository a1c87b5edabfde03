/*
 * ats bench sim — how fast the simulator is (issue 4's targets):
 *  1. engine events per second on one core: the round program of Qwen3-14B decode under the `ats`
 *     policy (plan from sched, ~440 tasks) run back to back by the engine alone (target ≥ 5 M/s);
 *     also the whole-session rate (plans, controller, routing included);
 *  2. wall time to replay a 10-minute trace of Qwen3-14B (Q4_K_M) requests on rtx3060-laptop with
 *     the `ats` policy (target ≤ 2 s);
 *  3. a 16 × 16 ε × τ sweep of `ats` over three 3-minute traces on --threads cores (target ≤ 300 s
 *     on 2 cores): the three 180 s traces recorded on the H200 machine (traces/h200-cpu-compile,
 *     h200-gpu-train, h200-fig13), or when they are missing traces/fig13-synth.h5 plus two synthetic
 *     traces built here (periodic CPU+PCIe bursts; a GPU ramp).
 * Prints a table and writes a JSON result file (--out, default ./bench-sim.json; the committed
 * figures are experiments/bench/bench-sim.json, written only when --out names them; --out "" none)
 * with the commit, the machine, every parameter and the figures. Wall-clock times only here, never
 * in the simulator.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ats/policy.h"
#include "ats_version.h"
#include "atsc/outfile.h"
#include "cli.h"
#include "sim_cli.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats bench sim [--threads N] [--quick] [--out FILE] [--model M] [--hw H]\n\n"
            "Measures engine events/s on one core, the wall time of a 10-minute replay, and a 16x16\n"
            "eps x interval sweep over three 3-minute traces; prints a table and writes JSON.\n\n"
            "  --threads N   cores for the sweep [2]\n"
            "  --quick       4x4 sweep and a 1-minute replay (smoke test)\n"
            "  --out FILE    result file [./bench-sim.json; committed: experiments/bench/bench-sim.json]\n");
}

/* two synthetic 180 s traces: periodic CPU+PCIe bursts, and a GPU availability ramp */
static void synth_traces(double *t, double (*v)[3][64], int *n)
{
    /* bursts: 5 s of cpu 0.4 / pcie 0.5 every 20 s */
    int k = 0;
    for (int i = 0; i < 18 && k < 62; i++) {
        double t0 = 10.0 * i;
        t[k] = t0;
        int burst = i % 2 == 1;
        v[0][0][k] = burst ? 0.4 : 1.0;
        v[0][1][k] = 1.0;
        v[0][2][k] = burst ? 0.5 : 1.0;
        k++;
    }
    n[0] = k;
    /* ramp: gpu and pcie availability falling from 1 to 0.4 in 10 s steps, then back */
    for (int i = 0; i < 18; i++) {
        double x = i < 9 ? 1.0 - 0.6 * i / 8.0 : 0.4 + 0.6 * (i - 9) / 8.0;
        v[1][0][i] = 1.0;
        v[1][1][i] = x;
        v[1][2][i] = 0.5 + 0.5 * x;
    }
    n[1] = 18;
}

int ats_bench_sim(int argc, char **argv)
{
    static const struct option opts[] = {{"threads", required_argument, 0, 't'}, {"quick", no_argument, 0, 'q'},
                                         {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
                                         {"model", required_argument, 0, 'm'}, {"hw", required_argument, 0, 'w'},
                                         {0, 0, 0, 0}};
    long long threads = 2;
    int quick = 0;
    const char *out = "bench-sim.json";
    sim_cli o;
    sim_cli_init(&o);
    optind = 1;
    opterr = 0;
    int c;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (ats_cli_once_opt("bench sim", &seen, opts, c, optarg)) return ATS_EXIT_USAGE;
        switch (c) {
        case 't':
            if (ats_cli_parse_int(optarg, &threads) || threads < 1 || threads > 1024) {
                ats_cli_error("bench sim", "--threads: bad value '%s' (an integer 1..1024)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'q': quick = 1; break;
        case 'o':
            if (ats_cli_file_value("bench sim", "--out", optarg)) return ATS_EXIT_USAGE;
            out = optarg;
            break;
        case 'm':
            if (ats_cli_file_value("bench sim", "--model", optarg)) return ATS_EXIT_USAGE;
            o.model = optarg;
            break;
        case 'w':
            if (ats_cli_file_value("bench sim", "--hw", optarg)) return ATS_EXIT_USAGE;
            o.hw = optarg;
            break;
        case 'h': usage(stdout); return ATS_EXIT_OK;
        case ':': ats_cli_missing_value("bench sim", argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option("bench sim", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) { /* `ats bench sim foo` ran the whole benchmark */
        ats_cli_error("bench sim", "unexpected argument '%s' (ats bench sim --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    ats_err err = {{0}};
    if (out && *out && atsc_out_check(out, &err) != ATS_OK) { /* before minutes of work */
        ats_cli_error("bench sim", "--out: %s", err.msg);
        return ATS_EXIT_USAGE;
    }
    o.requests_given = 1; /* the shared loader must not set a duration from the trace */
    int rc = sim_cli_load(&o, "bench sim");
    if (rc) return rc;

    /* ---- 1. engine events/s: one decode round of `ats`, replayed by the engine alone ---------- */
    ats_cli_progress("bench sim", "engine events/s ..."); /* stderr on a terminal only */
    double ev_per_s = 0, sess_ev_per_s = 0;
    int32_t prog_tasks = 0;
    {
        ats_graph_opts go = ats_graph_opts_default();
        go.recipe = o.cfg.recipe;
        ats_graph *g = NULL;
        ats_costs nom;
        ats_policy *pol = NULL;
        ats_placement pl;
        ats_assignment asg;
        ats_plan plan;
        ats_plan_init(&plan);
        ats_policy_cfg pc = ats_policy_cfg_default();
        pc.vram_budget_bytes = o.cfg.vram_budget_bytes;
        pc.n_copy_engines = o.hw_desc.n_copy_engines;
        pc.hostmem_cpu_factor = o.hw_desc.hostmem_cpu_factor;
        enum ats_status st = ats_graph_build(&o.arch, &go, &g, &err);
        if (!st) st = ats_costs_init(&nom, g->n_ops);
        if (!st) st = ats_costs_from_model(g, &o.hw_desc, &nom, &err);
        if (!st) st = ats_policy_new("ats", &pc, &pol, &err);
        if (!st) st = ats_placement_init(&pl, g->n_ops);
        if (!st) st = ats_assignment_init(&asg, g->n_ops);
        if (!st) st = ats_policy_place(pol, g, &nom, &pl, &err);
        if (!st) st = ats_policy_assign(pol, g, &pl, &nom, NULL, &asg, &err);
        if (!st) st = ats_policy_plan(pol, g, &pl, &asg, &nom, NULL, &plan, &err);
        sim_engine *e = NULL;
        sim_prog prog;
        sim_prog_init(&prog);
        if (!st) st = sim_prog_from_plan(&prog, g, &plan, &nom, NULL, NULL, NULL, NULL, &err);
        if (!st) st = sim_engine_new(&o.hw_desc, NULL, NULL, &e, &err);
        if (st) {
            ats_cli_error("bench sim", "engine setup: %s", err.msg);
            return ATS_EXIT_FAIL;
        }
        prog_tasks = prog.n;
        int reps = quick ? 2000 : 20000;
        int64_t t0 = now_ns();
        for (int r = 0; r < reps && !st; r++) st = sim_engine_run(e, &prog, &err);
        double wall = (double)(now_ns() - t0) * 1e-9;
        ev_per_s = (double)sim_engine_stats(e)->events / wall;
        sim_engine_free(e);
        sim_prog_free(&prog);
        ats_plan_free(&plan);
        ats_assignment_free(&asg);
        ats_placement_free(&pl);
        ats_policy_free(pol);
        ats_costs_free(&nom);
        ats_graph_free(g);
    }

    /* ---- 2. 10-minute replay ------------------------------------------------------------------ */
    double replay_s = quick ? 60.0 : 600.0, replay_wall = 0;
    ats_cli_progress("bench sim", "%.0f-second replay ...", replay_s);
    sim_session_result rr;
    {
        sim_session_cfg cfg = o.cfg;
        cfg.policy = "ats";
        cfg.resched_cost_s = sim_cli_resched_for(&o, "ats", NULL);
        cfg.duration_s = replay_s;
        cfg.n_requests = 0; /* as many requests as fit */
        int64_t t0 = now_ns();
        enum ats_status st = sim_session_run(&o.arch, &o.hw_desc, o.tr ? &o.st : NULL, &cfg, &rr, &err);
        replay_wall = (double)(now_ns() - t0) * 1e-9;
        if (st) {
            ats_cli_error("bench sim", "replay: %s", err.msg);
            return ATS_EXIT_FAIL;
        }
        sess_ev_per_s = (double)rr.events / replay_wall;
    }

    /* ---- 3. sweep --------------------------------------------------------------------------- */
    int n_grid = quick ? 4 : 16;
    double tr_t[2][64], tr_v[2][3][64];
    int tr_n[2];
    {
        double tt[64];
        synth_traces(tt, tr_v, tr_n);
        for (int i = 0; i < tr_n[0]; i++) tr_t[0][i] = tt[i];
        for (int i = 0; i < tr_n[1]; i++) tr_t[1][i] = 10.0 * i;
    }
    sim_trace traces[3] = {o.tr ? o.st : (sim_trace){0},
                           {tr_n[0], tr_t[0], tr_v[0][0], tr_v[0][1], tr_v[0][2]},
                           {tr_n[1], tr_t[1], tr_v[1][0], tr_v[1][1], tr_v[1][2]}};
    const char *tr_names[3] = {o.tr ? o.trace_name : "idle", "synth-bursts", "synth-gpu-ramp"};
    /* the three 3-minute traces recorded on the H200 machine when they are there (traces/README.md);
     * otherwise the Fig. 13 trace and the two synthetic ones above */
    static const char *const recorded[3] = {"h200-cpu-compile", "h200-gpu-train", "h200-fig13"};
    atsc_trace *rec[3] = {0};
    int n_rec = 0;
    for (int i = 0; i < 3; i++) {
        char path[1024];
        ats_cli_trace_path(recorded[i], path, sizeof path);
        if (atsc_trace_load(path, &rec[i], NULL) == ATS_OK) n_rec++;
    }
    if (n_rec == 3)
        for (int i = 0; i < 3; i++) {
            traces[i] = (sim_trace){(int32_t)rec[i]->n, rec[i]->t_s, rec[i]->cpu_avail, rec[i]->gpu_avail,
                                    rec[i]->pcie_avail};
            tr_names[i] = recorded[i];
        }
    const long n_pts = 3L * n_grid * n_grid;
    double *tpot = calloc((size_t)n_pts, sizeof *tpot);
    uint64_t events = 0;
    long n_rounds = 0, n_fail = 0;
    const double resched = sim_cli_resched_for(&o, "ats", NULL);
    int64_t t_sw0 = now_ns();
    long n_done = 0; /* sessions finished, for the progress line */
    ats_cli_progress("bench sim", "sweep: 0 of %ld sessions", n_pts);
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)threads) reduction(+ : events, n_rounds, n_fail)
    for (long p = 0; p < n_pts; p++) {
        int it = (int)(p / (n_grid * n_grid)), ie = (int)(p / n_grid % n_grid), ii = (int)(p % n_grid);
        sim_session_cfg cfg = o.cfg;
        cfg.policy = "ats";
        cfg.resched_cost_s = resched;
        cfg.duration_s = 180.0;
        cfg.n_requests = 0;
        cfg.ctrl.eps = 0.05 + 0.45 * ie / (n_grid - 1);   /* 0.05 .. 0.5 */
        cfg.ctrl.tau_s = 0;
        cfg.ctrl.tau_tpot_mult = 1.0 + 19.0 * ii / (n_grid - 1); /* 1 .. 20 x TPOT */
        sim_session_result r;
        ats_err e2;
        if (sim_session_run(&o.arch, &o.hw_desc, traces[it].n == 0 ? NULL : &traces[it], &cfg, &r, &e2) == ATS_OK) {
            tpot[p] = r.tpot_mean_s;
            events += r.events;
            n_rounds += (long)r.n_rounds;
            sim_session_result_free(&r);
        } else {
            n_fail++;
        }
        long done_now;
#pragma omp atomic capture
        done_now = ++n_done;
        if (omp_get_thread_num() == 0) ats_cli_progress("bench sim", "sweep: %ld of %ld sessions", done_now, n_pts);
    }
    ats_cli_progress_end();
    double sweep_wall = (double)(now_ns() - t_sw0) * 1e-9;
    /* fixed cost of a session (round shapes, placement, controllers): a session stopped after its
     * first round, median of 5. The scaled figure below scales only the per-round part. */
    double setup_s;
    {
        double v[5];
        for (int k = 0; k < 5; k++) {
            sim_session_cfg cfg = o.cfg;
            cfg.policy = "ats";
            cfg.resched_cost_s = resched;
            cfg.n_requests = 0;
            cfg.duration_s = 1e-9;
            sim_session_result r;
            int64_t t0 = now_ns();
            if (sim_session_run(&o.arch, &o.hw_desc, NULL, &cfg, &r, NULL) == ATS_OK) sim_session_result_free(&r);
            v[k] = (double)(now_ns() - t0) * 1e-9;
        }
        setup_s = sim_percentile(v, 5, 50);
    }
    double fixed_wall = setup_s * (double)n_pts / (double)threads;
    if (fixed_wall > sweep_wall) fixed_wall = sweep_wall;
    double sweep_scaled =
        fixed_wall + (sweep_wall - fixed_wall) * (double)n_pts * 4500.0 / (double)(n_rounds > 0 ? n_rounds : 1);
    double best[3] = {INFINITY, INFINITY, INFINITY};
    for (long p = 0; p < n_pts; p++) {
        int it = (int)(p / (n_grid * n_grid));
        if (tpot[p] > 0 && tpot[p] < best[it]) best[it] = tpot[p];
    }
    free(tpot);

    char host[128] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    printf("ats bench sim — %s (%s) on %s, commit %s, host %s (%d cores)\n", o.arch.name,
           ats_recipe_name(o.cfg.recipe), o.hw_desc.name, ATS_GIT_COMMIT, host, omp_get_num_procs());
    printf("%-44s %14s %12s\n", "figure", "measured", "target");
    printf("%-44s %12.2f M %12s\n", "engine events/s, one core (ats decode round)", ev_per_s / 1e6, ">= 5 M");
    printf("%-44s %12.2f M %12s\n", "session events/s, one core (incl. controller)", sess_ev_per_s / 1e6, "");
    printf("%-44s %12.3f s %12s\n", quick ? "1-minute replay, wall" : "10-minute replay, wall", replay_wall,
           quick ? "" : "<= 2 s");
    printf("%-44s %14ld %12s\n", "  rounds in the replay", (long)rr.n_rounds, "");
    /* the target assumed the paper's ~40 ms TPOT (15000 rounds in 10 minutes); ours is slower, so
     * also the wall time scaled to that many rounds */
    printf("%-44s %12.3f s %12s\n", "  scaled to 15000 rounds (40 ms TPOT)", replay_wall * 15000.0 / (double)rr.n_rounds,
           quick ? "" : "<= 2 s");
    char label[64];
    snprintf(label, sizeof label, "%dx%d sweep x 3 traces (180 s each), wall", n_grid, n_grid);
    printf("%-44s %12.1f s %12s\n", label, sweep_wall, quick ? "" : "<= 300 s");
    printf("%-44s %14ld %12s\n", "  sessions", n_pts, "");
    printf("%-44s %14ld %12s\n", "  rounds in the sweep", n_rounds, "");
    printf("%-44s %12.3f s %12s\n", "  fixed cost per session (setup)", setup_s, "");
    printf("%-44s %12.1f s %12s\n", "  scaled to 40 ms TPOT (4500 rounds/session)", sweep_scaled,
           quick ? "" : "<= 300 s");
    printf("%-44s %12.2f M %12s\n", "  sweep events/s, all threads", (double)events / sweep_wall / 1e6, "");
    for (int i = 0; i < 3; i++) printf("  best mean TPOT on %-24s %10.2f ms\n", tr_names[i], 1e3 * best[i]);
    for (int i = 0; i < 3; i++) atsc_trace_free(rec[i]);

    if (out && *out) {
        atsc_out *of = NULL;
        FILE *f = atsc_out_open(out, &of, &err) ? NULL : fopen(atsc_out_tmp(of), "w");
        if (!f) {
            if (of) ats_cli_error("bench sim", "%s: cannot create: %s", out, strerror(errno));
            else ats_cli_error("bench sim", "%s", err.msg);
            atsc_out_abort(of);
            sim_session_result_free(&rr);
            sim_cli_free(&o);
            return ATS_EXIT_FAIL;
        }
        time_t now = time(NULL);
        char date[64];
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        fprintf(f,
                "{\n  \"bench\": \"sim\", \"version\": \"%s\", \"commit\": \"%s\", \"date\": \"%s\",\n"
                "  \"host\": \"%s\", \"cores\": %d, \"threads\": %lld, \"quick\": %d,\n"
                "  \"model\": \"%s\", \"quant\": \"%s\", \"hw\": \"%s\", \"trace\": \"%s\",\n"
                "  \"vram_budget_bytes\": %llu, \"prompt_tok\": %lld, \"gen_tok\": %lld, \"chunk_tok\": %lld,\n"
                "  \"engine\": {\"program_tasks\": %d, \"events_per_s\": %.0f, \"target_events_per_s\": 5e6},\n"
                "  \"replay\": {\"policy\": \"ats\", \"sim_s\": %.1f, \"wall_s\": %.4f, \"rounds\": %zu, \"events\": %llu,"
                " \"events_per_s\": %.0f, \"tpot_mean_s\": %.6f, \"wall_s_scaled_to_15000_rounds\": %.4f,"
                " \"target_wall_s\": 2},\n"
                "  \"sweep\": {\"policy\": \"ats\", \"grid\": [%d, %d], \"eps\": [0.05, 0.5], \"interval_tpot\": [1, 20],"
                " \"traces\": [\"%s\", \"%s\", \"%s\"], \"trace_s\": 180, \"sessions\": %ld, \"failed\": %ld,"
                " \"rounds\": %ld, \"events\": %llu, \"wall_s\": %.2f, \"best_tpot_ms\": [%.4f, %.4f, %.4f],"
                " \"session_setup_s\": %.4f, \"wall_s_scaled_to_4500_rounds_per_session\": %.1f,"
                " \"target_wall_s\": 300}\n}\n",
                ATS_VERSION_STRING, ATS_GIT_COMMIT, date, host, omp_get_num_procs(), threads, quick, o.arch.name,
                ats_recipe_name(o.cfg.recipe), o.hw_desc.name, o.trace_name,
                (unsigned long long)o.cfg.vram_budget_bytes, (long long)o.cfg.prompt_tok, (long long)o.cfg.gen_tok,
                (long long)o.cfg.chunk_tok, prog_tasks, ev_per_s, replay_s, replay_wall, rr.n_rounds,
                (unsigned long long)rr.events, sess_ev_per_s, rr.tpot_mean_s,
                replay_wall * 15000.0 / (double)(rr.n_rounds > 0 ? rr.n_rounds : 1), n_grid, n_grid, tr_names[0],
                tr_names[1], tr_names[2], n_pts, n_fail, n_rounds, (unsigned long long)events, sweep_wall, 1e3 * best[0],
                1e3 * best[1], 1e3 * best[2], setup_s, sweep_scaled);
        int bad = ferror(f) ? (errno ? errno : EIO) : 0;
        errno = 0;
        if (fclose(f) != 0 && !bad) bad = errno ? errno : EIO;
        if (bad) {
            ats_cli_error("bench sim", "%s: write failed: %s", out, strerror(bad));
            atsc_out_abort(of);
            rc = ATS_EXIT_FAIL;
        } else if (atsc_out_commit(of, &err) != ATS_OK) {
            ats_cli_error("bench sim", "%s", err.msg);
            rc = ATS_EXIT_FAIL;
        } else {
            printf("wrote %s\n", out);
        }
    }
    sim_session_result_free(&rr);
    sim_cli_free(&o);
    return rc;
}
