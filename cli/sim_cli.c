/* cli/sim_cli.c — shared flags and loading for `ats sim`, `ats sweep`, `ats bench sim` (sim_cli.h). */
#include "sim_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ats_version.h"
#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "cli.h"

const char sim_cli_help[] =
    "  --model M          model name (models/M.json) or JSON path [qwen3-14b]\n"
    "  --quant Q          quantization recipe [the model's default]\n"
    "  --hw H             hardware description (sim/hw/H.json) or path [rtx3060-laptop]\n"
    "  --trace T          load trace (traces/T.h5) or path; 'none' = idle machine [h200-cpu-compile]\n"
    "  --trace-offset S   start the replay at trace time S [0]\n"
    "  --vram-budget B    VRAM for weights + KV cache + temp buffers, e.g. 5GiB [85% of the GPU's]\n"
    "  --temp-bytes B     temp ring for promoted weights [policy's automatic choice]\n"
    "  --prompt P         prompt tokens per request [2048]\n"
    "  --gen G            decode steps per request [128]\n"
    "  --chunk C          prefill chunk [512]\n"
    "  --requests N       requests back to back [1; as many as fit when a duration applies]\n"
    "  --duration S       stop after the round that crosses simulated time S (e.g. 600s) [the trace's\n"
    "                     length when neither --requests nor --duration is given]\n"
    "  --gap S            idle time between requests [0]\n"
    "  --jitter SIGMA     lognormal jitter on op times (mean 1) [0]\n"
    "  --routing R        MoE routing: uniform, zipf[:SKEW] or an HDF5 file [uniform]\n"
    "  --resched-cost T   CPU time of one re-schedule, e.g. 16ms [DP + plan build measured by\n"
    "                     `ats bench sched` (experiments/bench/bench-sched.json), else the paper's 16ms]\n"
    "  --tpot-window N    rounds in the controller's recent-TPOT median [8]\n"
    "  --no-prefetch      no decode prefetch into the previous round's idle copy engine\n"
    "  --no-hostmem       no host-memory interference between CPU ops and DMA\n"
    "  --serialized       no transfer/compute overlap (llama.cpp's path; ablation)\n"
    "  --act-path P       sm or ce: activations by SM copy kernels or the copy engine [policy's]\n"
    "  --seed N           RNG seed (jitter, routing) [1]\n";

void sim_cli_init(sim_cli *o)
{
    memset(o, 0, sizeof *o);
    o->model = "qwen3-14b";
    o->hw = "rtx3060-laptop";
    o->trace = "h200-cpu-compile"; /* recorded (traces/README.md); issue 6 */
    o->cfg = sim_session_cfg_default();
}

void sim_cli_free(sim_cli *o)
{
    atsc_trace_free(o->tr);
    o->tr = NULL;
}

int sim_cli_parse_time(const char *s, double *out_s)
{
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf) return -1;
    double mult = 1.0;
    memcpy(buf, s, n + 1);
    if (n > 2 && strcmp(buf + n - 2, "ms") == 0) mult = 1e-3, buf[n - 2] = 0;
    else if (n > 2 && strcmp(buf + n - 2, "us") == 0) mult = 1e-6, buf[n - 2] = 0;
    else if (n > 1 && buf[n - 1] == 's') mult = 1.0, buf[n - 1] = 0;
    double v;
    if (ats_cli_parse_double(buf, &v) || v < 0) return -1;
    *out_s = v * mult;
    return 0;
}

int sim_cli_parse_range(const char *s, double *vals, int max, int *in_ms)
{
    char buf[128];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    int ms = 0;
    double v[3];
    int nv = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        if (nv == 3) return -1;
        size_t n = strlen(tok);
        if (n > 2 && strcmp(tok + n - 2, "ms") == 0) ms = 1, tok[n - 2] = 0;
        if (ats_cli_parse_double(tok, &v[nv])) return -1;
        nv++;
    }
    if (nv == 1) v[1] = v[0], v[2] = 1.0;
    else if (nv == 2) v[2] = v[1] - v[0] > 0 ? v[1] - v[0] : 1.0;
    else if (nv != 3) return -1;
    if (!(v[2] > 0) || v[1] < v[0]) return -1;
    int n = 0;
    for (int i = 0;; i++) {
        double x = v[0] + i * v[2];
        if (x > v[1] + 1e-9 * (fabs(v[1]) + 1)) break;
        if (n == max) return -1;
        vals[n++] = x;
    }
    if (in_ms) *in_ms = ms;
    return n;
}

int sim_cli_flag(sim_cli *o, const char *cmd, int id, const char *arg)
{
    long long ll;
    double d;
    sim_session_cfg *c = &o->cfg;
    switch (id) {
    case SIMF_MODEL: o->model = arg; return 1;
    case SIMF_QUANT: o->quant = arg; return 1;
    case SIMF_HW: o->hw = arg; return 1;
    case SIMF_TRACE: o->trace = arg; o->trace_given = 1; return 1;
    case SIMF_VRAM:
        if (ats_cli_parse_bytes(arg, &c->vram_budget_bytes)) goto bad;
        return 1;
    case SIMF_TEMP:
        if (ats_cli_parse_bytes(arg, &c->temp_bytes)) goto bad;
        return 1;
    case SIMF_PROMPT:
        if (ats_cli_parse_int(arg, &ll) || ll < 1) goto bad;
        c->prompt_tok = ll;
        return 1;
    case SIMF_GEN:
        if (ats_cli_parse_int(arg, &ll) || ll < 1) goto bad;
        c->gen_tok = ll;
        return 1;
    case SIMF_CHUNK:
        if (ats_cli_parse_int(arg, &ll) || ll < 1) goto bad;
        c->chunk_tok = ll;
        return 1;
    case SIMF_REQUESTS:
        if (ats_cli_parse_int(arg, &ll) || ll < 1) goto bad;
        c->n_requests = ll;
        o->requests_given = 1;
        return 1;
    case SIMF_DURATION:
        if (sim_cli_parse_time(arg, &d) || !(d > 0)) goto bad;
        c->duration_s = d;
        o->duration_given = 1;
        return 1;
    case SIMF_GAP:
        if (sim_cli_parse_time(arg, &d)) goto bad;
        c->gap_s = d;
        return 1;
    case SIMF_TRACE_OFFSET:
        if (sim_cli_parse_time(arg, &d)) goto bad;
        c->trace_offset_s = d;
        return 1;
    case SIMF_JITTER:
        if (ats_cli_parse_double(arg, &d) || !(d >= 0 && d < 5)) goto bad;
        c->jitter_sigma = d;
        return 1;
    case SIMF_ROUTING:
        if (strcmp(arg, "uniform") == 0) {
            c->routing = SIM_ROUTE_UNIFORM;
        } else if (strncmp(arg, "zipf", 4) == 0 && (arg[4] == 0 || arg[4] == ':')) {
            c->routing = SIM_ROUTE_ZIPF;
            c->zipf_skew = 1.0;
            if (arg[4] == ':' && (ats_cli_parse_double(arg + 5, &c->zipf_skew) || !(c->zipf_skew > 0))) goto bad;
        } else {
            c->routing = SIM_ROUTE_FILE;
            snprintf(o->routing_path, sizeof o->routing_path, "%s", arg);
            c->routing_path = o->routing_path;
        }
        return 1;
    case SIMF_RESCHED:
        if (sim_cli_parse_time(arg, &d)) goto bad;
        c->resched_cost_s = d;
        o->resched_given = 1;
        return 1;
    case SIMF_WINDOW:
        if (ats_cli_parse_int(arg, &ll) || ll < 1 || ll > 64) goto bad;
        c->ctrl.tpot_window = (int)ll;
        return 1;
    case SIMF_NO_PREFETCH: c->ctrl.prefetch = 0; return 1;
    case SIMF_NO_HOSTMEM: c->hostmem = 0; return 1;
    case SIMF_SERIAL: c->force_serialized = 1; return 1;
    case SIMF_ACT_PATH:
        if (strcmp(arg, "sm") == 0) c->act_path = ATS_ACT_SM;
        else if (strcmp(arg, "ce") == 0) c->act_path = ATS_ACT_CE;
        else goto bad;
        return 1;
    case SIMF_SEED:
        if (ats_cli_parse_int(arg, &ll) || ll < 0) goto bad;
        c->seed = (uint64_t)ll;
        return 1;
    default: return 0;
    }
bad:
    for (int i = 0; i < 1; i++) {
        static const struct option all[] = {SIM_CLI_LONG_OPTIONS, {0, 0, 0, 0}};
        const char *name = "?";
        for (const struct option *op = all; op->name; op++)
            if (op->val == id) name = op->name;
        ats_cli_error(cmd, "--%s: bad value '%s'", name, arg);
    }
    return -1;
}

int sim_cli_load(sim_cli *o, const char *cmd)
{
    ats_err err = {{0}};
    ats_cli_model_path(o->model, o->model_path, sizeof o->model_path);
    if (atsc_model_load(o->model_path, &o->arch, &err) != ATS_OK) {
        ats_cli_error(cmd, "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    o->cfg.recipe = o->arch.default_recipe;
    if (o->quant && ats_recipe_from_name(o->quant, &o->cfg.recipe) != ATS_OK) {
        ats_cli_error(cmd, "--quant: '%s' is not a known quantization (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)", o->quant);
        return ATS_EXIT_USAGE;
    }
    ats_cli_hw_path(o->hw, o->hw_path, sizeof o->hw_path);
    if (atsc_hw_load(o->hw_path, &o->hw_desc, &err) != ATS_OK) {
        ats_cli_error(cmd, "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    if (o->cfg.routing == SIM_ROUTE_FILE) { /* check the routing file once, before any simulation */
        sim_routing *r = NULL;
        if (!ats_arch_is_moe(&o->arch)) {
            ats_cli_error(cmd, "--routing: model %s has no routed experts", o->arch.name);
            return ATS_EXIT_USAGE;
        }
        if (sim_routing_load(o->routing_path, &o->arch, &r, &err) != ATS_OK) {
            ats_cli_error(cmd, "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        sim_routing_free(r);
    }
    if (o->cfg.vram_budget_bytes == 0) {
        /* 85% of the GPU's memory, in whole MiB: leaves room for the runtime and compute buffers */
        o->cfg.vram_budget_bytes = (uint64_t)((double)o->hw_desc.gpu_vram_bytes * 0.85) & ~((1ull << 20) - 1);
    }
    if (strcmp(o->trace, "none") != 0) {
        ats_cli_trace_path(o->trace, o->trace_path, sizeof o->trace_path);
        if (atsc_trace_load(o->trace_path, &o->tr, &err) != ATS_OK) {
            ats_cli_error(cmd, "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        o->st.n = (int32_t)o->tr->n;
        o->st.t_s = o->tr->t_s;
        o->st.cpu = o->tr->cpu_avail;
        o->st.gpu = o->tr->gpu_avail;
        o->st.pcie = o->tr->pcie_avail;
        const char *b = strrchr(o->trace_path, '/');
        snprintf(o->trace_name, sizeof o->trace_name, "%.63s", b ? b + 1 : o->trace_path);
        char *dot = strrchr(o->trace_name, '.');
        if (dot && strcmp(dot, ".h5") == 0) *dot = 0;
        if (!o->duration_given && !o->requests_given) {
            double d = atsc_trace_duration(o->tr) - o->cfg.trace_offset_s;
            if (d > 0) o->cfg.duration_s = d;
        }
    } else {
        snprintf(o->trace_name, sizeof o->trace_name, "none");
    }
    /* a duration without --requests means "as many requests as fit" */
    if (o->cfg.duration_s > 0 && !o->requests_given) o->cfg.n_requests = 0;
    return 0;
}

double sim_cli_resched_cost(const sim_cli *o, const char *policy, char *source, size_t len)
{
    if (o->resched_given) {
        if (source) snprintf(source, len, "--resched-cost");
        return o->cfg.resched_cost_s;
    }
    char path[1200];
    const char *env = getenv("ATS_BENCH_SCHED");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else { /* the source tree: the models directory's parent */
        snprintf(path, sizeof path, "%s", ATS_DEFAULT_MODELS_DIR);
        char *slash = strrchr(path, '/');
        if (slash) *slash = 0;
        strncat(path, "/experiments/bench/bench-sched.json", sizeof path - strlen(path) - 1);
    }
    double cost = 0.016;
    if (source) snprintf(source, len, "paper 9 ms + 7 ms");
    json_t *root = json_load_file(path, 0, NULL);
    json_t *m = root ? json_object_get(json_object_get(root, "results"), o->arch.name) : NULL;
    if (m) {
        int paper = policy && strcmp(policy, "ats-paper") == 0;
        json_t *dp = json_object_get(m, paper ? "dynamic_transfer_paper_us" : "dynamic_transfer_us");
        json_t *pb = json_object_get(m, "plan_build_us");
        if (json_is_number(dp) && json_is_number(pb) && json_number_value(dp) >= 0 && json_number_value(pb) >= 0) {
            cost = (json_number_value(dp) + json_number_value(pb)) * 1e-6;
            if (source) snprintf(source, len, "ats bench sched (%s)", path);
        }
    }
    json_decref(root);
    return cost;
}

const char *sim_cli_config_json(const sim_cli *o, const char *policies, char *buf, size_t len)
{
    const sim_session_cfg *c = &o->cfg;
    snprintf(buf, len,
             "{\"model\": \"%s\", \"quant\": \"%s\", \"hw\": \"%s\", \"trace\": \"%s\", \"policies\": \"%s\", "
             "\"vram_budget_bytes\": %llu, \"temp_bytes\": %llu, \"prompt_tok\": %lld, \"gen_tok\": %lld, "
             "\"chunk_tok\": %lld, \"requests\": %lld, \"duration_s\": %.9g, \"gap_s\": %.9g, "
             "\"jitter_sigma\": %.9g, \"routing\": \"%s\", \"zipf_skew\": %.9g, \"eps\": %.9g, "
             "\"tau_s\": %.9g, \"tau_tpot_mult\": %.9g, \"tpot_window\": %d, \"prefetch\": %d, "
             "\"resched_cost_s\": %.9g, \"hostmem\": %d, \"serialized\": %d, \"act_path\": %d, "
             "\"seed\": %llu, \"trace_offset_s\": %.9g}",
             o->arch.name, ats_recipe_name(c->recipe), o->hw_desc.name, o->trace_name, policies,
             (unsigned long long)c->vram_budget_bytes, (unsigned long long)c->temp_bytes, (long long)c->prompt_tok,
             (long long)c->gen_tok, (long long)c->chunk_tok, (long long)c->n_requests, c->duration_s, c->gap_s,
             c->jitter_sigma, c->routing == SIM_ROUTE_FILE ? o->routing_path : sim_routing_kind_name(c->routing),
             c->zipf_skew, c->ctrl.eps, c->ctrl.tau_s, c->ctrl.tau_tpot_mult, c->ctrl.tpot_window, c->ctrl.prefetch,
             c->resched_cost_s, c->hostmem, c->force_serialized, c->act_path, (unsigned long long)c->seed,
             c->trace_offset_s);
    return buf;
}

void sim_cli_progress(const char *label, double frac, int done)
{
    if (!isatty(STDERR_FILENO)) return;
    int w = 40, k = (int)(frac * w + 0.5);
    if (k > w) k = w;
    fprintf(stderr, "\r%-16s [", label);
    for (int i = 0; i < w; i++) fputc(i < k ? '#' : '.', stderr);
    fprintf(stderr, "] %3.0f%%", 100.0 * frac);
    if (done) fputc('\n', stderr);
    fflush(stderr);
}
