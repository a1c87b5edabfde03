/* cli/sim_cli.c — shared flags and loading for `ats sim`, `ats sweep`, `ats bench sim` (sim_cli.h). */
#include "sim_cli.h"

/* Plausibility limits of the session flags (a typo must not become hours of simulation). */
#define SIM_CLI_MAX_TOKENS 16777216   /* = ATS_ARCH_MAX_CTX */
#define SIM_CLI_MAX_TIME_S 1e7        /* --duration, --trace-offset [s] (~115 days) */
#define SIM_CLI_MAX_GAP_S 86400.0     /* --gap [s] */
#define SIM_CLI_MAX_RESCHED_S 10.0    /* --resched-cost [s] (the paper's is 16 ms) */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "ats_version.h"
#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "atsc/text.h"
#include "ats/graph.h"
#include "cli.h"

const char sim_cli_help[] =
    "  --model M          model name (models/M.json), JSON path, or GGUF file (its architecture and\n"
    "                     per-tensor types; no --quant) [qwen3-14b]\n"
    "  --quant Q          quantization recipe [the model's default]; refused with a GGUF file\n"
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
    "                     `ats bench sched` (experiments/sched-speed/bench-sched.json, or the file named by\n"
    "                     $ATS_BENCH_SCHED: a missing or bad one is an error); a model it lacks: its op\n"
    "                     count x the largest per-op figures there; without the file the paper's 16ms]\n"
    "  --tpot-window N    rounds in the controller's recent-TPOT median [8]\n"
    "  --no-prefetch      no decode prefetch into the previous round's idle copy engine\n"
    "  --no-hostmem       no host-memory interference between CPU ops and DMA\n"
    "  --serialized       no transfer/compute overlap (llama.cpp's path; ablation)\n"
    "  --act-path P       sm or ce: activations by SM copy kernels or the copy engine [policy's]\n"
    "  --seed N           RNG seed (jitter, routing) [1]\n"
    "  --max-rounds N     refuse a run that may simulate more rounds (estimated up front from\n"
    "                     --requests / --duration / the trace's length) [10000000]\n";

void sim_cli_init(sim_cli *o)
{
    memset(o, 0, sizeof *o);
    o->model = "qwen3-14b";
    o->hw = "rtx3060-laptop";
    o->trace = "h200-cpu-compile"; /* recorded on the GPU machine (traces/README.md) */
    o->cfg = sim_session_cfg_default();
}

void sim_cli_free(sim_cli *o)
{
    atsc_trace_free(o->tr);
    o->tr = NULL;
    free(o->tensor_types);
    o->tensor_types = NULL;
    o->cfg.tensor_types = NULL;
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

/* a time unit at the end of tok (s, ms, us): its exponent (0, -3, -6) and tok cut before it; 1 = none */
static int cut_time_unit(char *tok)
{
    size_t n = strlen(tok);
    if (n > 2 && strcmp(tok + n - 2, "ms") == 0) return tok[n - 2] = 0, -3;
    if (n > 2 && strcmp(tok + n - 2, "us") == 0) return tok[n - 2] = 0, -6;
    if (n > 1 && tok[n - 1] == 's') return tok[n - 1] = 0, 0;
    return 1;
}

int sim_cli_parse_range(const char *s, double *vals, int max, int *in_s, char *why, size_t len)
{
    char buf[128], dummy[8];
    if (!why) why = dummy, len = sizeof dummy;
    if (strlen(s) >= sizeof buf) {
        snprintf(why, len, "longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    strcpy(buf, s);
    /* strtok_r skips empty fields: '1:' or '0::2' would pass as '1' or '0:2' */
    if (buf[0] && ats_cli_list_has_empty(buf, ':')) {
        snprintf(why, len, "an empty field (A, A:B or A:B:S)");
        return -1;
    }
    int n_unit = 0, expo[3] = {1, 1, 1}, finest = 1;
    double v[3];
    int nv = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        if (nv == 3) {
            snprintf(why, len, "more than three fields (A:B:S)");
            return -1;
        }
        expo[nv] = in_s ? cut_time_unit(tok) : 1;
        if (expo[nv] != 1) {
            n_unit++;
            if (finest == 1 || expo[nv] < finest) finest = expo[nv];
        }
        if (ats_cli_parse_double(tok, &v[nv])) {
            snprintf(why, len, "field %d '%.60s' is not a number", nv + 1, tok);
            return -1;
        }
        nv++;
    }
    if (n_unit != 0 && n_unit != nv) {
        snprintf(why, len, "%d of %d fields carry a time unit (s, ms, us): all or none (not necessarily the same unit)",
                 n_unit, nv);
        return -1;
    }
    /* with units: the grid is built in the finest unit given (50ms:1s:50ms = 50, 100, ... 1000 ms), then
     * each point is converted to seconds, so 50ms:800ms:50ms gives exactly the 0.05 .. 0.8 s that
     * `ats sim --interval 50ms` .. `800ms` give */
    for (int i = 0; i < nv && n_unit; i++) v[i] *= pow(10.0, expo[i] - finest);
    if (nv == 1) v[1] = v[0], v[2] = 1.0;
    else if (nv == 2) v[2] = v[1] - v[0] > 0 ? v[1] - v[0] : 1.0;
    else if (nv != 3) {
        snprintf(why, len, "empty");
        return -1;
    }
    if (!(v[2] > 0) || v[1] < v[0]) {
        snprintf(why, len, "need A <= B and S > 0");
        return -1;
    }
    double q = (v[1] - v[0]) / v[2], npts = floor(q);
    if (q - npts > 1.0 - 1e-6) npts += 1.0; /* just below a whole step: rounding, the end point counts */
    npts += 1.0;
    if (npts > max) {
        snprintf(why, len, "too many grid points (%.0f, limit %d)", npts, max);
        return -1;
    }
    /* npts points (counted above, ≤ max): A + i·S never loops forever where A + S == A in doubles */
    const double to_s = n_unit ? (finest == -3 ? 1e-3 : finest == -6 ? 1e-6 : 1.0) : 1.0;
    int n = 0;
    for (int i = 0; i < (int)npts; i++) vals[n++] = (v[0] + i * v[2]) * to_s;
    if (in_s) *in_s = n_unit > 0;
    return n;
}

int sim_cli_flag(sim_cli *o, const char *cmd, int id, const char *arg)
{
    long long ll;
    double d;
    sim_session_cfg *c = &o->cfg;
    switch (id) {
    case SIMF_MODEL: if (ats_cli_file_value(cmd, "--model", arg)) return -1; o->model = arg; return 1;
    case SIMF_QUANT: o->quant = arg; return 1;
    case SIMF_HW: if (ats_cli_file_value(cmd, "--hw", arg)) return -1; o->hw = arg; return 1;
    case SIMF_TRACE:
        if (ats_cli_file_value(cmd, "--trace", arg)) return -1;
        o->trace = arg;
        o->trace_given = 1;
        return 1;
    case SIMF_VRAM: return ats_cli_parse_vram(cmd, arg, &c->vram_budget_bytes) ? -1 : 1;
    case SIMF_TEMP: {
        char why[200];
        if (ats_cli_parse_bytes_why(arg, &c->temp_bytes, why, sizeof why)) {
            ats_cli_error(cmd, "--temp-bytes: %s", why);
            return -1;
        }
        return 1;
    }
    case SIMF_MAX_ROUNDS:
        if (ats_cli_parse_int(arg, &ll) || ll < 1) goto bad;
        c->max_rounds = ll;
        return 1;
    case SIMF_PROMPT:
        if (ats_cli_parse_int(arg, &ll) || ll < 1 || ll > SIM_CLI_MAX_TOKENS) goto bad_range;
        c->prompt_tok = ll;
        return 1;
    case SIMF_GEN:
        if (ats_cli_parse_int(arg, &ll) || ll < 1 || ll > SIM_CLI_MAX_TOKENS) goto bad_range;
        c->gen_tok = ll;
        return 1;
    case SIMF_CHUNK:
        if (ats_cli_parse_int(arg, &ll) || ll < 1 || ll > SIM_CLI_MAX_TOKENS) goto bad_range;
        c->chunk_tok = ll;
        return 1;
    case SIMF_REQUESTS:
        if (ats_cli_parse_int(arg, &ll) || ll < 1) goto bad;
        c->n_requests = ll;
        o->requests_given = 1;
        return 1;
    case SIMF_DURATION:
        if (sim_cli_parse_time(arg, &d) || !(d > 0) || d > SIM_CLI_MAX_TIME_S) goto bad_range;
        c->duration_s = d;
        o->duration_given = 1;
        return 1;
    case SIMF_GAP:
        if (sim_cli_parse_time(arg, &d) || !(d >= 0) || d > SIM_CLI_MAX_GAP_S) goto bad_range;
        c->gap_s = d;
        return 1;
    case SIMF_TRACE_OFFSET:
        if (sim_cli_parse_time(arg, &d) || !(d >= 0) || d > SIM_CLI_MAX_TIME_S) goto bad_range;
        c->trace_offset_s = d;
        return 1;
    case SIMF_JITTER:
        if (ats_cli_parse_double(arg, &d) || !(d >= 0 && d < 5)) goto bad;
        c->jitter_sigma = d;
        return 1;
    case SIMF_ROUTING:
        if (ats_cli_file_value(cmd, "--routing", arg)) return -1;
        if (strcmp(arg, "uniform") == 0) {
            c->routing = SIM_ROUTE_UNIFORM;
        } else if (strncmp(arg, "zipf", 4) == 0 && (arg[4] == 0 || arg[4] == ':')) {
            c->routing = SIM_ROUTE_ZIPF;
            c->zipf_skew = 1.0;
            /* the session's range, checked before any output (was refused once per policy) */
            if (arg[4] == ':' &&
                (ats_cli_parse_double(arg + 5, &c->zipf_skew) || !(c->zipf_skew > 0 && c->zipf_skew < 100)))
                goto bad;
        } else {
            c->routing = SIM_ROUTE_FILE;
            snprintf(o->routing_path, sizeof o->routing_path, "%s", arg);
            c->routing_path = o->routing_path;
        }
        return 1;
    case SIMF_RESCHED:
        if (sim_cli_parse_time(arg, &d) || !(d >= 0) || d > SIM_CLI_MAX_RESCHED_S) goto bad_range;
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
bad_range:
    {
        static const struct option all[] = {SIM_CLI_LONG_OPTIONS, {0, 0, 0, 0}};
        const char *name = "?";
        for (const struct option *op = all; op->name; op++)
            if (op->val == id) name = op->name;
        const char *lim = id == SIMF_PROMPT || id == SIMF_GEN || id == SIMF_CHUNK ? "1..16777216 tokens"
                          : id == SIMF_GAP                                     ? "0..86400 s"
                          : id == SIMF_RESCHED                                 ? "0..10 s"
                          : id == SIMF_DURATION                                ? "(0, 1e7] s"
                                                                               : "0..1e7 s";
        ats_cli_error(cmd, "--%s: '%.60s%s' (must be in %s; see ats %s --help)", name, arg,
                      strlen(arg) > 60 ? "..." : "", lim, cmd);
        return -1;
    }
bad:
    for (int i = 0; i < 1; i++) {
        static const struct option all[] = {SIM_CLI_LONG_OPTIONS, {0, 0, 0, 0}};
        const char *name = "?";
        for (const struct option *op = all; op->name; op++)
            if (op->val == id) name = op->name;
        const char *want = id == SIMF_MAX_ROUNDS || id == SIMF_REQUESTS ? "an integer >= 1"
                           : id == SIMF_JITTER                          ? "a number in [0, 5)"
                           : id == SIMF_ROUTING                         ? "uniform, zipf[:S] with S in (0, 100), or an HDF5 file"
                           : id == SIMF_WINDOW                          ? "an integer 1..64"
                           : id == SIMF_SEED                            ? "an integer >= 0"
                           : id == SIMF_ACT_PATH                        ? "sm or ce"
                                                                        : "see --help";
        ats_cli_error(cmd, "--%s: bad value '%.60s%s' (%s)", name, arg, strlen(arg) > 60 ? "..." : "", want);
    }
    return -1;
}

static int load_checked(sim_cli *o, const char *cmd)
{
    ats_err err = {{0}};
    int rc = ats_cli_load_model(cmd, o->model, o->quant, o->model_path, sizeof o->model_path, &o->arch,
                                &o->cfg.recipe, &o->tensor_types);
    if (rc) return rc;
    o->cfg.tensor_types = o->tensor_types;
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
    if (ats_cli_budget_for_hw(cmd, &o->cfg.vram_budget_bytes, o->hw_desc.gpu_vram_bytes, o->hw_desc.name, o->hw_path))
        return ATS_EXIT_USAGE;
    if (o->cfg.temp_bytes > o->cfg.vram_budget_bytes) {
        ats_cli_error(cmd, "--temp-bytes: %llu bytes exceeds the VRAM budget of %llu bytes",
                      (unsigned long long)o->cfg.temp_bytes, (unsigned long long)o->cfg.vram_budget_bytes);
        return ATS_EXIT_USAGE;
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
        double tr_len = atsc_trace_duration(o->tr);
        if (o->cfg.trace_offset_s > 0 && !(o->cfg.trace_offset_s < tr_len)) {
            ats_cli_error(cmd, "--trace-offset: %g s is at or past the end of trace %s (%g s long)",
                          o->cfg.trace_offset_s, o->trace_path, tr_len);
            return ATS_EXIT_USAGE;
        }
        if (!o->duration_given && !o->requests_given) {
            double d = tr_len - o->cfg.trace_offset_s;
            if (d > 0) o->cfg.duration_s = d;
        }
    } else {
        snprintf(o->trace_name, sizeof o->trace_name, "none");
    }
    /* a duration without --requests means "as many requests as fit" */
    if (o->cfg.duration_s > 0 && !o->requests_given) o->cfg.n_requests = 0;
    /* the session's own checks (prompt + gen within the context, ...), once for every policy, before any
       output: one error, not one "policy P skipped" line per policy after the table's header */
    if (sim_session_check(&o->arch, &o->cfg, &err) != ATS_OK) {
        ats_cli_error(cmd, "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    /* bound the work before doing any */
    if (o->cfg.max_rounds > 0) {
        char why[160];
        double bound = sim_session_round_bound(&o->arch, &o->hw_desc, &o->cfg, why, sizeof why);
        if (!(bound <= (double)o->cfg.max_rounds)) {
            const char *src = o->requests_given && o->cfg.n_requests > 0 && !o->duration_given ? "--requests"
                              : o->duration_given ? "--duration" : "the trace's length";
            if (o->tr && !o->duration_given && !o->requests_given)
                ats_cli_error(cmd, "trace %s: %g s long (times not in seconds?): the run may simulate up to %.3g "
                              "rounds (%s), over the limit of %lld (--max-rounds; or --duration / --requests)",
                              o->trace_path, o->cfg.duration_s + o->cfg.trace_offset_s, bound, why,
                              (long long)o->cfg.max_rounds);
            else
                ats_cli_error(cmd, "%s: the run may simulate up to %.3g rounds (%s), over the limit of %lld "
                              "(raise it with --max-rounds)", src, bound, why, (long long)o->cfg.max_rounds);
            return ATS_EXIT_USAGE;
        }
    }
    rc = sim_cli_resched_cost(o, cmd, "ats", &o->resched_s, o->resched_src, sizeof o->resched_src);
    if (!rc)
        rc = sim_cli_resched_cost(o, cmd, "ats-paper", &o->resched_paper_s, o->resched_paper_src,
                                  sizeof o->resched_paper_src);
    o->cfg.resched_cost_s = o->resched_s;
    return rc;
}

/* sim_cli_load: load_checked, and on any failure free what it loaded (the trace), so an early
 * refusal leaks nothing (LeakSanitizer in CI). */
int sim_cli_load(sim_cli *o, const char *cmd)
{
    int rc = load_checked(o, cmd);
    if (rc) sim_cli_free(o);
    return rc;
}

int sim_cli_policy_applies(const sim_cli *o, const char *policy, char *why, size_t len)
{
    if (strcmp(policy, "expert") == 0 && !ats_arch_is_moe(&o->arch)) {
        if (why) snprintf(why, len, "not applicable to a dense model");
        return 1;
    }
    return 0;
}

double sim_cli_resched_for(const sim_cli *o, const char *policy, const char **source)
{
    int paper = policy && strcmp(policy, "ats-paper") == 0;
    if (source) *source = paper ? o->resched_paper_src : o->resched_src;
    return paper ? o->resched_paper_s : o->resched_s;
}

/* a figure of bench-sched.json [us]: a number in --resched-cost's range 0 .. SIM_CLI_MAX_RESCHED_S */
static int us_in_range(const json_t *v)
{
    return json_is_number(v) && json_number_value(v) >= 0 && json_number_value(v) <= SIM_CLI_MAX_RESCHED_S * 1e6;
}

/* The re-schedule cost of a model bench-sched.json has no figures for [us]: its decode graph's op count
 * times the largest per-op DP time and per-op plan-build time over the models it has (the DP is a pass
 * over the ops; per op the measured models spread 0.03-0.22 us, the largest is the bound taken). -1
 * (source untouched) when no entry has usable figures or the graph cannot be built: the caller keeps the
 * paper's 16 ms. env_path: the ATS_BENCH_SCHED file, or NULL for the committed one. */
static double estimate_resched_us(const sim_cli *o, const json_t *res, const char *policy, char *source, size_t len,
                                  const char *env_path)
{
    const int paper = policy && strcmp(policy, "ats-paper") == 0;
    double dp_op = -1, pb_op = -1;
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)res, key, v) {
        json_t *dp = json_object_get(v, paper ? "dynamic_transfer_paper_us" : "dynamic_transfer_us");
        json_t *pb = json_object_get(v, "plan_build_us"), *no = json_object_get(v, "n_ops");
        if (!us_in_range(dp) || !us_in_range(pb) || !json_is_integer(no) || json_integer_value(no) < 1) continue;
        const double k = (double)json_integer_value(no);
        if (json_number_value(dp) / k > dp_op) dp_op = json_number_value(dp) / k;
        if (json_number_value(pb) / k > pb_op) pb_op = json_number_value(pb) / k;
        n++;
    }
    if (n == 0) return -1;
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = o->cfg.recipe;
    go.tensor_types = o->cfg.tensor_types;
    ats_graph *g = NULL;
    ats_err err;
    if (ats_graph_build(&o->arch, &go, &g, &err) != ATS_OK) return -1;
    const double us = (double)g->n_ops * (dp_op + pb_op);
    if (source)
        snprintf(source, len, "estimated: '%s' is not in %s; %d ops x %.3g us DP + %.3g us plan build, the largest "
                 "per-op times of its %d models; --resched-cost sets it", o->arch.name,
                 env_path ? env_path : "experiments/sched-speed/bench-sched.json", g->n_ops, dp_op, pb_op, n);
    ats_graph_free(g);
    return us;
}

int sim_cli_resched_cost(const sim_cli *o, const char *cmd, const char *policy, double *cost_s, char *source,
                         size_t len)
{
    if (o->resched_given) {
        if (source) snprintf(source, len, "--resched-cost");
        *cost_s = o->cfg.resched_cost_s;
        return 0;
    }
    char path[1200];
    const char *env = getenv("ATS_BENCH_SCHED");
    const int from_env = env && *env;
    if (from_env) {
        snprintf(path, sizeof path, "%s", env);
    } else { /* the source tree: the models directory's parent */
        snprintf(path, sizeof path, "%s", ATS_DEFAULT_MODELS_DIR);
        char *slash = strrchr(path, '/');
        if (slash) *slash = 0;
        strncat(path, "/experiments/sched-speed/bench-sched.json", sizeof path - strlen(path) - 1);
    }
    double cost = 0.016;
    if (source) snprintf(source, len, "paper 9 ms + 7 ms");
    struct stat sb;
    if (from_env && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* json_load_file said "not JSON ... end of file" */
        char pe[ATSC_ESC_PATH];
        ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': is a directory; expected the result file of `ats bench sched`",
                      atsc_esc(path, strlen(path), pe, sizeof pe));
        return ATS_EXIT_USAGE;
    }
    json_error_t je;
    json_t *root = json_load_file(path, from_env ? JSON_REJECT_DUPLICATES : 0, &je); /* a key twice: which? */
    json_t *res = root ? json_object_get(root, "results") : NULL;
    /* a file the user named must be one: a bad path or file is an error, not a silent 16 ms (the
       committed default is optional: a tree without it uses the paper's figure) */
    if (from_env && (!root || !json_is_object(res))) {
        char pe[ATSC_ESC_PATH], we[ATSC_ESC_SIZE(160)];
        if (!root && access(path, R_OK) != 0)
            ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': cannot read it (%s); unset it for the committed "
                          "experiments/sched-speed/bench-sched.json", atsc_esc(path, strlen(path), pe, sizeof pe), strerror(errno));
        else if (!root)
            ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': not JSON (line %d: %s); expected the output of `ats bench "
                          "sched --format json`", atsc_esc(path, strlen(path), pe, sizeof pe), je.line,
                          atsc_esc(je.text, strlen(je.text), we, sizeof we));
        else
            ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': no object 'results' (not the output of `ats bench sched "
                          "--format json`)", atsc_esc(path, strlen(path), pe, sizeof pe));
        json_decref(root);
        return ATS_EXIT_USAGE;
    }
    json_t *m = res ? json_object_get(res, o->arch.name) : NULL;
    if (m && !json_is_object(m) && from_env) { /* results.qwen3-14b = 5 said "dynamic_transfer_us: missing" */
        char pe[ATSC_ESC_PATH];
        atsc_esc(path, strlen(path), pe, sizeof pe);
        ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': results.%s is not an object (expected the figures of `ats bench "
                      "sched`)", pe, o->arch.name);
        json_decref(root);
        return ATS_EXIT_USAGE;
    }
    if (m) {
        int paper = policy && strcmp(policy, "ats-paper") == 0;
        json_t *dp = json_object_get(m, paper ? "dynamic_transfer_paper_us" : "dynamic_transfer_us");
        json_t *pb = json_object_get(m, "plan_build_us");
        const char *dp_name = paper ? "dynamic_transfer_paper_us" : "dynamic_transfer_us";
        if (us_in_range(dp) && us_in_range(pb) &&
            json_number_value(dp) + json_number_value(pb) <= SIM_CLI_MAX_RESCHED_S * 1e6) {
            cost = (json_number_value(dp) + json_number_value(pb)) * 1e-6;
            if (source) snprintf(source, len, "ats bench sched, %s", path);
        } else if (from_env) { /* a file the user named: a bad figure is an error, not a silent 16 ms */
            const char *bad_name = !us_in_range(dp) ? dp_name : !us_in_range(pb) ? "plan_build_us" : NULL;
            json_t *bad = !us_in_range(dp) ? dp : pb;
            char pe[ATSC_ESC_PATH], ve[ATSC_ESC_SIZE(64)], *v = bad ? json_dumps(bad, JSON_ENCODE_ANY | JSON_REAL_PRECISION(9)) : NULL;
            atsc_esc(path, strlen(path), pe, sizeof pe);
            if (bad_name) /* "x", -5, 1e300 or missing */
                ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': results.%s.%s: %s (expected microseconds, 0 .. 1e+07 = "
                              "10 s, as --resched-cost)", pe, o->arch.name, bad_name,
                              bad && v ? atsc_esc(v, strlen(v), ve, sizeof ve) : "missing");
            else /* each fits, their sum does not */
                ats_cli_error(cmd, "ATS_BENCH_SCHED: '%s': results.%s: %s + plan_build_us = %.9g us, over 10 s "
                              "(--resched-cost's limit)", pe, o->arch.name, dp_name,
                              json_number_value(dp) + json_number_value(pb));
            free(v);
            json_decref(root);
            return ATS_EXIT_USAGE;
        }
    } else if (json_is_object(res)) { /* a model without figures (a GGUF file, a JSON of one's own) */
        double e = estimate_resched_us(o, res, policy, source, len, from_env ? path : NULL);
        if (e >= 0)
            cost = e * 1e-6;
        else if (source) /* no entry with n_ops and usable figures: say why, and how to set it */
            snprintf(source, len, "paper 9 ms + 7 ms: no '%s' in %s and no figures to estimate it from; "
                     "--resched-cost sets it", o->arch.name, from_env ? path : "experiments/sched-speed/bench-sched.json");
    }
    json_decref(root);
    *cost_s = cost;
    return 0;
}

const char *sim_cli_config_json(const sim_cli *o, const char *policies, char *buf, size_t len)
{
    const sim_session_cfg *c = &o->cfg;
    char esc[700]; /* the source as a JSON string body: quotes and backslashes escaped */
    size_t k = 0;
    for (const char *p = o->resched_src; *p && k + 3 < sizeof esc; p++) {
        if (*p == '"' || *p == '\\') esc[k++] = '\\';
        esc[k++] = (unsigned char)*p < 0x20 ? ' ' : *p;
    }
    esc[k] = 0;
    snprintf(buf, len,
             "{\"model\": \"%s\", \"quant\": \"%s\", \"hw\": \"%s\", \"trace\": \"%s\", \"policies\": \"%s\", "
             "\"vram_budget_bytes\": %llu, \"temp_bytes\": %llu, \"prompt_tok\": %lld, \"gen_tok\": %lld, "
             "\"chunk_tok\": %lld, \"requests\": %lld, \"duration_s\": %.9g, \"gap_s\": %.9g, "
             "\"jitter_sigma\": %.9g, \"routing\": \"%s\", \"zipf_skew\": %.9g, \"eps\": %.9g, "
             "\"tau_s\": %.9g, \"tau_tpot_mult\": %.9g, \"tpot_window\": %d, \"prefetch\": %d, "
             "\"resched_cost_s\": %.9g, \"resched_cost_source\": \"%s\", \"resched_cost_ats_paper_s\": %.9g, "
             "\"max_rounds\": %lld, \"hostmem\": %d, \"serialized\": %d, \"act_path\": %d, "
             "\"seed\": %llu, \"trace_offset_s\": %.9g}",
             o->arch.name, ats_cli_quant_name(c->recipe, c->tensor_types), o->hw_desc.name, o->trace_name, policies,
             (unsigned long long)c->vram_budget_bytes, (unsigned long long)c->temp_bytes, (long long)c->prompt_tok,
             (long long)c->gen_tok, (long long)c->chunk_tok, (long long)c->n_requests, c->duration_s, c->gap_s,
             c->jitter_sigma, c->routing == SIM_ROUTE_FILE ? o->routing_path : sim_routing_kind_name(c->routing),
             c->zipf_skew, c->ctrl.eps, c->ctrl.tau_s, c->ctrl.tau_tpot_mult, c->ctrl.tpot_window, c->ctrl.prefetch,
             o->resched_s, esc, o->resched_paper_s, (long long)c->max_rounds, c->hostmem, c->force_serialized, c->act_path, (unsigned long long)c->seed,
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
