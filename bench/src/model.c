/* `ats bench model`: whole-model tokens/s in llama-bench's form (bench/model.h). */
#include "bench/model.h"

#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ats/policy.h"
#include "ats_version.h"
#include "bench/bench.h"
#include "ex/backend.h"
#include "ex/runtime.h"
#include "ex/session.h"
#ifdef ATS_HAVE_CUDA
#include "ex/gpu.h"
#endif

bench_model_opts bench_model_opts_default(void)
{
    bench_model_opts o = {5, 0, 512, ATS_Q_F16, 42, NULL};
    return o;
}

enum ats_status bench_model_load(const bench_model_src *src, ex_model **out, double *load_s, ats_err *err)
{
    int64_t t0 = bench_now_ns();
    enum ats_status st = src->gguf_path ? ex_model_load_gguf(src->gguf_path, out, err)
                                        : ex_model_new_dummy_progress(src->arch, src->recipe, src->seed, src->progress,
                                                                      src->progress_ctx, out, err);
    *load_s = (double)(bench_now_ns() - t0) * 1e-9;
    return st;
}

/* ---- backends --------------------------------------------------------------------------------- */

struct bench_model_dev {
    bench_model_exec ex;
    const ex_backend *a, *b;
    char gpu_name[256]; /* ex_gpu_props.name's size */
    ex_device *rt_dev;  /* policy row: the plan executor's device; NULL: every op on the CPU */
    int own_rt_dev;     /* rt_dev opened here (ex_device_cuda_new), freed with the handle */
#ifdef ATS_HAVE_CUDA
    ex_gpu *gpu;
    struct ex_backend *cuda;
#endif
};

enum ats_status bench_model_exec_policy(const char *policy, uint64_t vram_budget_bytes, int serialized,
                                        bench_model_exec *out, ats_err *err)
{
    memset(out, 0, sizeof *out);
    char label[64];
    /* the budget in GiB as short as it reads exactly enough: 4.5GiB, 1GiB, 0.0625GiB */
    int w = snprintf(label, sizeof label, "%s@%.4gGiB%s", policy, (double)vram_budget_bytes / 1073741824.0,
                     serialized ? " serialized" : "");
    if (strlen(policy) >= sizeof out->policy || w < 0 || (size_t)w >= sizeof out->backend)
        return ats_err_set(err, ATS_EINVAL, "--policy '%s': name too long", policy);
    snprintf(out->policy, sizeof out->policy, "%s", policy);
    memcpy(out->backend, label, (size_t)w + 1); /* w < sizeof backend: checked above */
    out->split = -1;
    out->vram_budget_bytes = vram_budget_bytes;
    out->serialized = serialized;
    return ATS_OK;
}

/* A policy row's handle without a device yet: the policy named must exist. */
static enum ats_status policy_dev_new(const bench_model_exec *ex, bench_model_dev **out, ats_err *err)
{
    const ats_policy_ops *po;
    if (ats_policy_find(ex->policy, &po) != ATS_OK)
        return ats_err_set(err, ATS_EINVAL, "--policy: unknown policy '%s' (%s)", ex->policy, ats_policy_names());
    bench_model_dev *d = calloc(1, sizeof *d);
    if (!d) return ATS_ENOMEM;
    d->ex = *ex;
    d->a = d->b = ex_backend_cpu();
    *out = d;
    return ATS_OK;
}

/* A policy row's device: the plan executor's CUDA device where there is one, its name from a
 * short-lived handle (ex_device does not carry it) */
static enum ats_status dev_open_policy(const bench_model_exec *ex, bench_model_dev **out, ats_err *err)
{
    bench_model_dev *d;
    enum ats_status st = policy_dev_new(ex, &d, err);
    if (st) return st;
    st = ex_device_cuda_new(&d->rt_dev, err);
    d->own_rt_dev = st == ATS_OK;
    if (st == ATS_ENOTFOUND) { /* no device, or a build without CUDA: the CPU runs every op */
        d->rt_dev = NULL;
        memset(err, 0, sizeof *err);
    } else if (st != ATS_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        free(d);
        return ats_err_set(err, ATS_EIO, "--policy %s: %s", ex->policy, msg);
    }
#ifdef ATS_HAVE_CUDA
    ex_gpu *g = NULL;
    if (d->rt_dev && ex_gpu_open(0, &g) == EX_GPU_OK) {
        snprintf(d->gpu_name, sizeof d->gpu_name, "%s", ex_gpu_info(g)->name);
        ex_gpu_close(g);
    } else if (d->rt_dev) {
        snprintf(d->gpu_name, sizeof d->gpu_name, "%s", d->rt_dev->name);
    }
#endif
    *out = d;
    return ATS_OK;
}

enum ats_status bench_model_dev_open_on(const bench_model_exec *ex, ex_device *dev, bench_model_dev **out, ats_err *err)
{
    if (!ex->policy[0]) return ats_err_set(err, ATS_EINVAL, "--backend %s: a device of the plan executor needs a policy", ex->backend);
    bench_model_dev *d;
    enum ats_status st = policy_dev_new(ex, &d, err);
    if (st) return st;
    d->rt_dev = dev;
    if (dev) snprintf(d->gpu_name, sizeof d->gpu_name, "%s", dev->name);
    *out = d;
    return ATS_OK;
}

enum ats_status bench_model_dev_open(const bench_model_exec *ex, bench_model_dev **out, ats_err *err)
{
    if (ex->policy[0]) return dev_open_policy(ex, out, err);
    char name[2][16] = {"", ""};
    const char *comma = strchr(ex->backend, ',');
    size_t n0 = comma ? (size_t)(comma - ex->backend) : strlen(ex->backend);
    snprintf(name[0], sizeof name[0], "%.*s", (int)(n0 < 15 ? n0 : 15), ex->backend);
    snprintf(name[1], sizeof name[1], "%s", comma ? comma + 1 : name[0]);
    int cuda = 0;
    for (int i = 0; i < 2; i++) {
        if (strcmp(name[i], "cpu") && strcmp(name[i], "cuda"))
            return ats_err_set(err, ATS_EINVAL, "--backend '%s': '%s' (each must be cpu or cuda)", ex->backend, name[i]);
        cuda |= !strcmp(name[i], "cuda");
    }
    bench_model_dev *d = calloc(1, sizeof *d);
    if (!d) return ATS_ENOMEM;
    d->ex = *ex;
    d->a = d->b = ex_backend_cpu();
    if (cuda) {
#ifdef ATS_HAVE_CUDA
        ex_gpu_status gs = ex_gpu_open(0, &d->gpu);
        if (gs == EX_GPU_OK) gs = ex_backend_cuda_new(d->gpu, &d->cuda);
        if (gs != EX_GPU_OK) {
            enum ats_status st = ats_err_set(err, gs == EX_GPU_ENODEV ? ATS_EINVAL : ATS_EIO, "--backend %s: %s",
                                             ex->backend, ex_gpu_status_str(gs));
            bench_model_dev_free(d);
            return st;
        }
        snprintf(d->gpu_name, sizeof d->gpu_name, "%s", ex_gpu_info(d->gpu)->name);
        if (!strcmp(name[0], "cuda")) d->a = d->cuda;
        if (!strcmp(name[1], "cuda")) d->b = d->cuda;
#else
        free(d);
        return ats_err_set(err, ATS_EINVAL, "--backend %s: this build has no CUDA backend (configure with nvcc, -DATS_CUDA=ON)",
                           ex->backend);
#endif
    }
    *out = d;
    return ATS_OK;
}

void bench_model_dev_free(bench_model_dev *d)
{
    if (!d) return;
    if (d->rt_dev && d->own_rt_dev) ex_device_cuda_free(d->rt_dev);
#ifdef ATS_HAVE_CUDA
    if (d->cuda) ex_backend_cuda_free(d->cuda);
    if (d->gpu) ex_gpu_close(d->gpu);
#endif
    free(d);
}

const char *bench_model_dev_gpu_name(const bench_model_dev *d) { return d->gpu_name; }

/* ---- running ---------------------------------------------------------------------------------- */

/* n token ids drawn uniformly from the vocabulary with *rng */
static void draw_tokens(uint64_t *rng, int32_t *tok, int64_t n, int64_t V)
{
    for (int64_t i = 0; i < n; i++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((*rng >> 33) % (uint64_t)V);
    }
}

/* One run of test t in a fresh session: *dt_ns the time of the prompt chunks or of the decode steps
 * (session creation not counted). Token ids drawn uniformly from the vocabulary with *rng. */
static enum ats_status run_once(const ex_model *m, const bench_model_dev *d, const bench_model_test *t,
                                const bench_model_opts *o, uint64_t *rng, int32_t *tok, float *logits,
                                int64_t *dt_ns, ats_err *err)
{
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = t->n_prompt + t->n_gen;
    so.split_layer = d->ex.split;
    so.backend_a = d->a;
    so.backend_b = d->b;
    so.kv_type = o->kv_type;
    ex_session *s = NULL;
    enum ats_status st = ex_session_new(m, &so, &s, err);
    if (st != ATS_OK) return st;
    const int64_t n = t->n_prompt > 0 ? t->n_prompt : t->n_gen;
    draw_tokens(rng, tok, n, m->arch.n_vocab);
    int64_t t0 = bench_now_ns();
    if (t->n_prompt > 0) {
        for (int64_t i = 0; i < n && st == ATS_OK; i += o->chunk)
            st = ex_session_forward(s, tok + i, n - i < o->chunk ? n - i : o->chunk, logits, err);
    } else {
        for (int64_t i = 0; i < n && st == ATS_OK; i++) st = ex_session_forward(s, tok + i, 1, logits, err);
    }
    *dt_ns = bench_now_ns() - t0; /* forward returns the logits in host memory: the device work is done */
    ex_session_free(s);
    return st;
}

/* A backend row: one warm-up run, then the timed repetitions into row->samples_tok_s. */
static enum ats_status backend_row(const ex_model *m, const bench_model_dev *d, const bench_model_test *t,
                                   const bench_model_opts *o, bench_model_row *row, uint64_t *rng, int32_t *tok,
                                   float *logits, ats_err *err)
{
    const int64_t n = t->n_prompt > 0 ? t->n_prompt : t->n_gen;
    int64_t dt, tw = bench_now_ns();
    enum ats_status st = run_once(m, d, t, o, rng, tok, logits, &dt, err); /* warm-up */
    row->warmup_s = (double)(bench_now_ns() - tw) * 1e-9;
    for (int r = 0; r < o->reps && st == ATS_OK; r++)
        if ((st = run_once(m, d, t, o, rng, tok, logits, &dt, err)) == ATS_OK)
            row->samples_tok_s[r] = (double)n / ((double)dt * 1e-9);
    return st;
}

/* One run of test t through the plan executor from an empty KV cache: ppN the prefill rounds of the
 * N-token prompt (chunks of o->chunk); tgN a 1-token prefill round (not timed), then N decode rounds.
 * *dt_ns the host clock around the timed rounds (each round returns the logits in host memory, and
 * the controller's observe and any re-plan after it are part of the round's cost, as in ats run);
 * *h2d the bytes those rounds copied host → device. */
static enum ats_status policy_once(ex_rt *rt, const ex_model *m, const bench_model_test *t, const bench_model_opts *o,
                                   uint64_t *rng, int32_t *tok, float *logits, int64_t *dt_ns, uint64_t *h2d,
                                   ats_err *err)
{
    ex_session_clear(ex_rt_session(rt));
    const int pp = t->n_prompt > 0;
    const int64_t n = pp ? t->n_prompt : t->n_gen;
    draw_tokens(rng, tok, pp ? n : n + 1, m->arch.n_vocab);
    ex_rt_round info;
    enum ats_status st = ATS_OK;
    *h2d = 0;
    if (!pp) st = ex_rt_round_run(rt, ATS_PHASE_PREFILL, tok, 1, logits, &info, err);
    int64_t t0 = bench_now_ns();
    if (pp) {
        for (int64_t i = 0; i < n && st == ATS_OK; i += o->chunk) {
            st = ex_rt_round_run(rt, ATS_PHASE_PREFILL, tok + i, n - i < o->chunk ? n - i : o->chunk, logits, &info, err);
            if (st == ATS_OK) *h2d += info.bytes_h2d;
        }
    } else {
        for (int64_t i = 1; i <= n && st == ATS_OK; i++) {
            st = ex_rt_round_run(rt, ATS_PHASE_DECODE, tok + i, 1, logits, &info, err);
            if (st == ATS_OK) *h2d += info.bytes_h2d;
        }
    }
    *dt_ns = bench_now_ns() - t0;
    return st;
}

/* A policy row (bench/model.h's comment): one runtime over a session of N + 1 positions (ex_rt_new:
 * placement and resident upload, timed apart), ex_rt_warmup and one untimed run of the test, then the
 * timed repetitions, the controllers' state carried over between them. */
static enum ats_status policy_row(const ex_model *m, const bench_model_dev *d, const bench_model_test *t,
                                  const bench_model_opts *o, bench_model_row *row, uint64_t *rng, int32_t *tok,
                                  float *logits, ats_err *err)
{
    if (!o->hw) return ats_err_set(err, ATS_EINVAL, "policy %s: no cost snapshot (bench_model_opts.hw)", d->ex.policy);
    ats_hw hw = *o->hw;
    hw.cpu_threads = omp_get_max_threads();
    const int pp = t->n_prompt > 0;
    const int64_t n = pp ? t->n_prompt : t->n_gen;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = n + 1; /* pp: the runtime's placement is of a decode step after the prompt; tg: its 1-token prompt */
    so.kv_type = o->kv_type;
    ex_rt_cfg cfg = ex_rt_cfg_default();
    cfg.policy = d->ex.policy;
    cfg.vram_budget_bytes = d->ex.vram_budget_bytes;
    cfg.hw = &hw;
    cfg.prompt_tok = pp ? n : 1;
    cfg.chunk_tok = o->chunk;
    cfg.gen_tok = pp ? 0 : n; /* the temp ring for this test's request (ats_policy_place_request) */
    cfg.serialized = d->ex.serialized;
    ex_rt *rt = NULL;
    int64_t t0 = bench_now_ns();
    enum ats_status st = ex_rt_new(m, &so, d->rt_dev, &cfg, &rt, err);
    row->setup_s = (double)(bench_now_ns() - t0) * 1e-9;
    if (st != ATS_OK) return st;
    row->upload_s = ex_rt_upload_s(rt);
    uint64_t temp, kv, compute;
    ex_rt_layout(rt, &row->resident_bytes, &temp, &kv, &compute);
    int64_t dt;
    uint64_t h2d, h2d_sum = 0;
    int64_t tw = bench_now_ns();
    st = ex_rt_warmup(rt, pp ? (n < o->chunk ? n : o->chunk) : 1, err);
    if (st == ATS_OK) st = policy_once(rt, m, t, o, rng, tok, logits, &dt, &h2d, err);
    row->warmup_s = (double)(bench_now_ns() - tw) * 1e-9;
    const int64_t resched0 = st == ATS_OK ? ex_rt_n_reschedules(rt) : 0;
    for (int r = 0; r < o->reps && st == ATS_OK; r++)
        if ((st = policy_once(rt, m, t, o, rng, tok, logits, &dt, &h2d, err)) == ATS_OK) {
            row->samples_tok_s[r] = (double)n / ((double)dt * 1e-9);
            h2d_sum += h2d;
        }
    if (st == ATS_OK) {
        row->n_reschedules = ex_rt_n_reschedules(rt) - resched0;
        row->gb_h2d = (double)h2d_sum / o->reps / 1e9;
    }
    ex_rt_free(rt);
    return st;
}

enum ats_status bench_model_run(const ex_model *m, const bench_model_dev *d, const bench_model_test *t,
                                const bench_model_opts *o, bench_model_row *row, ats_err *err)
{
    if ((t->n_prompt > 0) == (t->n_gen > 0) || t->n_prompt < 0 || t->n_gen < 0)
        return ats_err_set(err, ATS_EINVAL, "test pp%lld tg%lld: exactly one of the two must be > 0",
                           (long long)t->n_prompt, (long long)t->n_gen);
    if (o->reps < 1 || o->chunk < 1 || o->threads < 0)
        return ats_err_set(err, ATS_EINVAL, "repetitions %d, chunk %lld, threads %d: must be >= 1 (threads >= 0)",
                           o->reps, (long long)o->chunk, o->threads);
    const int threads_before = omp_get_max_threads();
    if (o->threads > 0) omp_set_num_threads(o->threads);
    memset(row, 0, sizeof *row);
    row->exec = d->ex;
    snprintf(row->gpu, sizeof row->gpu, "%.63s", d->gpu_name); /* the column holds 63 characters */
    row->threads = omp_get_max_threads();
    row->test = *t;
    row->reps = o->reps;
    const int64_t n = t->n_prompt > 0 ? t->n_prompt : t->n_gen;
    int32_t *tok = malloc((size_t)(n + 1) * sizeof *tok); /* a policy row's tgN: the prompt token too */
    float *logits = malloc((size_t)m->arch.n_vocab * sizeof *logits);
    row->samples_tok_s = calloc((size_t)o->reps, sizeof *row->samples_tok_s);
    enum ats_status st = ATS_OK;
    if (!tok || !logits || !row->samples_tok_s) {
        st = ATS_ENOMEM;
        goto done;
    }
    uint64_t rng = o->seed ^ 0x5DEECE66Dull;
    st = d->ex.policy[0] ? policy_row(m, d, t, o, row, &rng, tok, logits, err)
                         : backend_row(m, d, t, o, row, &rng, tok, logits, err);
    if (st != ATS_OK) goto done;
    double sum = 0, sum2 = 0;
    for (int r = 0; r < o->reps; r++) sum += row->samples_tok_s[r];
    row->mean_tok_s = sum / o->reps;
    for (int r = 0; r < o->reps; r++) sum2 += (row->samples_tok_s[r] - row->mean_tok_s) * (row->samples_tok_s[r] - row->mean_tok_s);
    row->std_tok_s = o->reps > 1 ? sqrt(sum2 / (o->reps - 1)) : 0.0;
done:
    omp_set_num_threads(threads_before);
    free(tok);
    free(logits);
    if (st != ATS_OK) {
        free(row->samples_tok_s);
        row->samples_tok_s = NULL;
    }
    return st;
}

void bench_model_row_free(bench_model_row *row)
{
    if (!row) return;
    free(row->samples_tok_s);
    row->samples_tok_s = NULL;
}

/* ---- output ----------------------------------------------------------------------------------- */

enum ats_status bench_model_fmt_from_name(const char *name, bench_model_fmt *out)
{
    if (!strcmp(name, "md")) *out = BENCH_MODEL_MD;
    else if (!strcmp(name, "csv")) *out = BENCH_MODEL_CSV;
    else if (!strcmp(name, "json")) *out = BENCH_MODEL_JSON;
    else return ATS_ENOTFOUND;
    return ATS_OK;
}

static void test_name(const bench_model_test *t, char *buf, size_t len)
{
    if (t->n_prompt > 0) snprintf(buf, len, "pp%lld", (long long)t->n_prompt);
    else snprintf(buf, len, "tg%lld", (long long)t->n_gen);
}

static void backend_name(const bench_model_exec *e, char *buf, size_t len)
{
    if (strchr(e->backend, ',') && e->split >= 0) snprintf(buf, len, "%s split %lld", e->backend, (long long)e->split);
    else snprintf(buf, len, "%s", e->backend);
}

/* The columns of the markdown table and the CSV, in order: adding one (a policy) is one entry here.
 * cell() writes the row's value, as text for md (human units) and csv (raw numbers). */
typedef struct column {
    const char *md, *csv; /* headers */
    int right;            /* md: right-aligned */
    void (*cell)(const bench_model_row *r, int csv, char *buf, size_t len);
} column;

static void c_model(const bench_model_row *r, int csv, char *b, size_t n)
{
    const char *base = strrchr(r->model, '/'); /* md: the file's name, as llama-bench's model column is short */
    if (csv) snprintf(b, n, "%s", r->model);
    else snprintf(b, n, "%s (%s)", base ? base + 1 : r->model, r->desc);
}
static void c_desc(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%s", r->desc); }
static void c_size(const bench_model_row *r, int csv, char *b, size_t n)
{
    if (csv) snprintf(b, n, "%llu", (unsigned long long)r->size_bytes);
    else if (r->size_bytes >= (1ull << 30)) snprintf(b, n, "%.2f GiB", (double)r->size_bytes / 1073741824.0);
    else snprintf(b, n, "%.2f MiB", (double)r->size_bytes / 1048576.0);
}
static void c_params(const bench_model_row *r, int csv, char *b, size_t n)
{
    if (csv) snprintf(b, n, "%.0f", r->n_params);
    else if (r->n_params >= 1e9) snprintf(b, n, "%.2f B", r->n_params * 1e-9);
    else if (r->n_params >= 1e6) snprintf(b, n, "%.2f M", r->n_params * 1e-6);
    else snprintf(b, n, "%.2f K", r->n_params * 1e-3);
}
static void c_backend(const bench_model_row *r, int csv, char *b, size_t n)
{
    if (csv) snprintf(b, n, "%s", r->exec.backend);
    else backend_name(&r->exec, b, n);
}
static void c_split(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%lld", (long long)r->exec.split); }
static void c_gpu(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%s", r->gpu); }
static void c_threads(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%d", r->threads); }
static void c_test(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; test_name(&r->test, b, n); }
static void c_n_prompt(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%lld", (long long)r->test.n_prompt); }
static void c_n_gen(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%lld", (long long)r->test.n_gen); }
static void c_reps(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%d", r->reps); }
static void c_ts(const bench_model_row *r, int csv, char *b, size_t n)
{
    if (csv) snprintf(b, n, "%.6g", r->mean_tok_s);
    else snprintf(b, n, "%.2f ± %.2f", r->mean_tok_s, r->std_tok_s);
}
static void c_std(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%.6g", r->std_tok_s); }
static void c_load(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%.6g", r->load_s); }
static void c_warm(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%.6g", r->warmup_s); }
static void c_policy(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%s", r->exec.policy); }
static void c_budget(const bench_model_row *r, int csv, char *b, size_t n)
{
    (void)csv;
    snprintf(b, n, "%llu", (unsigned long long)r->exec.vram_budget_bytes);
}
static void c_serial(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%d", r->exec.serialized); }
static void c_setup(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%.6g", r->setup_s); }
static void c_upload(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%.6g", r->upload_s); }
static void c_resident(const bench_model_row *r, int csv, char *b, size_t n)
{
    (void)csv;
    snprintf(b, n, "%llu", (unsigned long long)r->resident_bytes);
}
static void c_resched(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%lld", (long long)r->n_reschedules); }
static void c_h2d(const bench_model_row *r, int csv, char *b, size_t n) { (void)csv; snprintf(b, n, "%.6g", r->gb_h2d); }
static void c_samples(const bench_model_row *r, int csv, char *b, size_t n)
{
    (void)csv;
    size_t o = 0;
    b[0] = 0;
    for (int i = 0; i < r->reps && o + 1 < n; i++) {
        int w = snprintf(b + o, n - o, "%s%.6g", i ? ";" : "", r->samples_tok_s[i]);
        o = w < 0 || (size_t)w >= n - o ? n - 1 : o + (size_t)w;
    }
}

/* md: the table's columns (md header non-NULL); csv: all (csv header non-NULL); the policy rows'
 * columns last (0 or "" on backend rows), so the earlier columns keep their places */
static const column COLUMNS[] = {
    {"model", "model", 0, c_model},       {NULL, "model_desc", 0, c_desc},
    {"size", "size_bytes", 1, c_size},    {"params", "n_params", 1, c_params},
    {"backend", "backend", 0, c_backend}, {NULL, "split", 1, c_split},
    {NULL, "gpu", 0, c_gpu},              {"threads", "threads", 1, c_threads},
    {"test", "test", 1, c_test},          {NULL, "n_prompt", 1, c_n_prompt},
    {NULL, "n_gen", 1, c_n_gen},          {NULL, "reps", 1, c_reps},
    {"t/s", "avg_ts", 1, c_ts},           {NULL, "stddev_ts", 1, c_std},
    {NULL, "samples_ts", 0, c_samples},   {NULL, "load_s", 1, c_load},
    {NULL, "warmup_s", 1, c_warm},        {NULL, "policy", 0, c_policy},
    {NULL, "vram_budget_bytes", 1, c_budget}, {NULL, "serialized", 1, c_serial},
    {NULL, "setup_s", 1, c_setup},        {NULL, "upload_s", 1, c_upload},
    {NULL, "resident_bytes", 1, c_resident}, {NULL, "n_reschedules", 1, c_resched},
    {NULL, "gb_h2d", 1, c_h2d},
};
#define N_COLUMNS (sizeof COLUMNS / sizeof COLUMNS[0])

/* bytes of s as the terminal shows it: UTF-8 continuation bytes do not count ('±') */
static int width_of(const char *s)
{
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

static void print_md(FILE *f, const bench_model_row *rows, int n)
{
    int w[N_COLUMNS];
    char buf[1024];
    for (size_t c = 0; c < N_COLUMNS; c++) {
        if (!COLUMNS[c].md) continue;
        w[c] = width_of(COLUMNS[c].md);
        for (int i = 0; i < n; i++) {
            COLUMNS[c].cell(&rows[i], 0, buf, sizeof buf);
            if (width_of(buf) > w[c]) w[c] = width_of(buf);
        }
    }
    for (int line = -2; line < n; line++) {
        fputc('|', f);
        for (size_t c = 0; c < N_COLUMNS; c++) {
            if (!COLUMNS[c].md) continue;
            if (line == -1) {
                fputc(' ', f);
                for (int k = 0; k < w[c] - (COLUMNS[c].right ? 1 : 0); k++) fputc('-', f);
                fputs(COLUMNS[c].right ? ": |" : " |", f);
                continue;
            }
            if (line == -2) snprintf(buf, sizeof buf, "%s", COLUMNS[c].md);
            else COLUMNS[c].cell(&rows[line], 0, buf, sizeof buf);
            int pad = w[c] - width_of(buf);
            fputc(' ', f);
            if (COLUMNS[c].right) fprintf(f, "%*s%s", pad, "", buf);
            else fprintf(f, "%s%*s", buf, pad, "");
            fputs(" |", f);
        }
        fputc('\n', f);
    }
    /* load and warm-up times, apart from the rates */
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++) first = strcmp(rows[j].model, rows[i].model) != 0;
        if (first) fprintf(f, "load %s: %.3f s\n", rows[i].model, rows[i].load_s);
    }
    for (int i = 0; i < n; i++) {
        const bench_model_row *r = &rows[i];
        char be[96], tn[32];
        backend_name(&r->exec, be, sizeof be);
        test_name(&r->test, tn, sizeof tn);
        fprintf(f, "warm-up %s, %s%s%s, %d threads, %s: %.3f s (not counted)", r->model, be,
                r->gpu[0] ? " on " : (r->exec.policy[0] ? " on the CPU only" : ""), r->gpu, r->threads, tn, r->warmup_s);
        if (r->exec.policy[0])
            fprintf(f, "; placement and upload %.3f s (upload %.3f s, %.3f GiB resident); %lld re-plans in the %d "
                       "timed runs, %.3f GB host->device per run",
                    r->setup_s, r->upload_s, (double)r->resident_bytes / 1073741824.0, (long long)r->n_reschedules,
                    r->reps, r->gb_h2d);
        fputc('\n', f);
    }
}

/* a CSV field: quoted when it holds a comma, a quote or a newline */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void print_csv(FILE *f, const bench_model_row *rows, int n)
{
    char buf[4096];
    for (size_t c = 0; c < N_COLUMNS; c++) fprintf(f, "%s%s", c ? "," : "", COLUMNS[c].csv);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        for (size_t c = 0; c < N_COLUMNS; c++) {
            if (c) fputc(',', f);
            COLUMNS[c].cell(&rows[i], 1, buf, sizeof buf);
            csv_field(f, buf);
        }
        fputc('\n', f);
    }
}

static json_t *rows_json(const bench_model_row *rows, int n)
{
    json_t *arr = json_array();
    char buf[256];
    for (int i = 0; i < n; i++) {
        const bench_model_row *r = &rows[i];
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(r->model));
        json_object_set_new(o, "model_desc", json_string(r->desc));
        json_object_set_new(o, "size_bytes", json_integer((json_int_t)r->size_bytes));
        json_object_set_new(o, "n_params", json_real(r->n_params));
        json_object_set_new(o, "backend", json_string(r->exec.backend));
        json_object_set_new(o, "split", json_integer(r->exec.split));
        json_object_set_new(o, "gpu", json_string(r->gpu));
        json_object_set_new(o, "threads", json_integer(r->threads));
        test_name(&r->test, buf, sizeof buf);
        json_object_set_new(o, "test", json_string(buf));
        json_object_set_new(o, "n_prompt", json_integer(r->test.n_prompt));
        json_object_set_new(o, "n_gen", json_integer(r->test.n_gen));
        json_object_set_new(o, "reps", json_integer(r->reps));
        json_object_set_new(o, "avg_ts", json_real(r->mean_tok_s));
        json_object_set_new(o, "stddev_ts", json_real(r->std_tok_s));
        json_t *s = json_array();
        for (int k = 0; k < r->reps; k++) json_array_append_new(s, json_real(r->samples_tok_s[k]));
        json_object_set_new(o, "samples_ts", s);
        json_object_set_new(o, "load_s", json_real(r->load_s));
        json_object_set_new(o, "warmup_s", json_real(r->warmup_s));
        json_object_set_new(o, "policy", json_string(r->exec.policy));
        json_object_set_new(o, "vram_budget_bytes", json_integer((json_int_t)r->exec.vram_budget_bytes));
        json_object_set_new(o, "serialized", json_boolean(r->exec.serialized));
        json_object_set_new(o, "setup_s", json_real(r->setup_s));
        json_object_set_new(o, "upload_s", json_real(r->upload_s));
        json_object_set_new(o, "resident_bytes", json_integer((json_int_t)r->resident_bytes));
        json_object_set_new(o, "n_reschedules", json_integer(r->n_reschedules));
        json_object_set_new(o, "gb_h2d", json_real(r->gb_h2d));
        json_array_append_new(arr, o);
    }
    return arr;
}

void bench_model_print(FILE *f, bench_model_fmt fmt, const bench_model_row *rows, int n)
{
    if (fmt == BENCH_MODEL_MD) print_md(f, rows, n);
    else if (fmt == BENCH_MODEL_CSV) print_csv(f, rows, n);
    else {
        json_t *a = rows_json(rows, n);
        json_dumpf(a, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        fputc('\n', f);
        json_decref(a);
    }
}

json_t *bench_model_json(const bench_model_row *rows, int n, const bench_model_opts *o)
{
    bench_machine mach;
    bench_machine_get(&mach);
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string("ats bench model"));
    json_object_set_new(root, "version", json_string(ATS_VERSION_STRING));
    json_object_set_new(root, "commit", json_string(ATS_GIT_COMMIT));
    json_object_set_new(root, "machine", json_string(mach.host));
    json_object_set_new(root, "cpu", json_string(mach.cpu));
    json_object_set_new(root, "n_cpu", json_integer(mach.n_cpu));
    json_t *par = json_object();
    json_object_set_new(par, "reps", json_integer(o->reps));
    json_object_set_new(par, "chunk", json_integer(o->chunk));
    json_object_set_new(par, "kv_type", json_string(ats_qtype_name(o->kv_type)));
    json_object_set_new(par, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(par, "statistic", json_string("tokens / wall time of the prompt (ppN) or of the N decode steps "
                                                      "(tgN) in a fresh session, CLOCK_MONOTONIC; mean and sample "
                                                      "standard deviation over reps after one warm-up run"));
    if (o->hw) /* policy rows: how they are run, and the cost snapshot */
        json_object_set_new(par, "policy_rows", json_string("one plan-executor runtime per row (placement and upload: setup_s); "
                                                        "warm-up: ex_rt_warmup and one run of the test; each repetition "
                                                        "from an empty KV cache, the controllers' state carried over; "
                                                        "tgN: N decode rounds after a 1-token prefill round (not timed); "
                                                        "n_reschedules: over the timed runs; gb_h2d: per run"));
    if (o->hw) json_object_set_new(par, "hw", json_string(o->hw->name));
    json_object_set_new(root, "parameters", par);
    json_object_set_new(root, "results", rows_json(rows, n));
    return root;
}
