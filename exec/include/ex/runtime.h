/*
 * ex/runtime.h — where a plan runs on hardware: the executor's twin of sim/src/plan_exec.c.
 *
 * A runtime (ex_rt) runs the rounds of one request (prefill chunks, then decode steps) of a model
 * under one of sched's policies (ats_policy_new by name: layer, layer-opoffload, expert, gpu-stream,
 * static, static-opoffload, ats-paper, ats). Each round it takes the plan of sched's controller
 * (ats_controller_plan), executes it with the dependency rules R1-R7 of ats/plan.h, measures per-op
 * and per-transfer times into an ats_round_obs and feeds them to the same ats_controller_observe the
 * simulator uses (DESIGN.md contracts 1-3).
 *
 * The device side is a table (ex_device) of memory, copy, stream and event calls plus the op table
 * (ex_backend) of its ops: ex_device_cuda_new (CUDA: compute stream + transfer stream, events) or
 * ex_device_host_new (a device emulated over host memory, CPU kernels, synchronous streams; it poisons
 * each temp slot after its last reader and checks every op reads its weight intact, so the plan
 * following is testable without a GPU). Without a device every op runs on the CPU.
 *
 * Memory layout (exec/README.md "Plans"): one device region holds the placement's GPU-resident weights
 * (uploaded by ex_rt_new, before any timing); one holds the temp ring (the policy's temp capacity;
 * transfer k lands at plan offset_bytes); the op table binds each weight to its address there
 * (ex_backend.bind_weight) and refuses any other (bound_only). Host weights stay where the model
 * keeps them, registered as pinned memory (ex_device.host_pin) when the device can.
 *
 * Lifecycle: ex_rt_new(model, session opts, device or NULL, cfg) → ex_rt_round() per round →
 * ex_rt_free(). One thread; not thread-safe.
 */
#ifndef EX_RUNTIME_H
#define EX_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "ats/controller.h"
#include "ats/hw.h"
#include "ats/plan.h"
#include "ats/status.h"
#include "ex/backend.h"
#include "ex/model.h"
#include "ex/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Streams of a device. */
enum { EX_DEV_COMPUTE = 0, EX_DEV_TRANSFER = 1 };

/** A device: memory, copies, streams and events, and its op table. Every entry returns ATS_OK or a
 *  status whose message (err) names the call. Events are opaque handles of the device. */
typedef struct ex_device {
    const char *name;
    void *ctx;
    const ex_backend *backend; /* op table; needs bind_weight and bound_only */
    /** Device memory of `bytes` [bytes]; *dev new (free_mem). */
    enum ats_status (*alloc)(void *ctx, size_t bytes, void **dev, ats_err *err);
    void (*free_mem)(void *ctx, void *dev);
    /** Copy host → device on `stream` (asynchronous where the host bytes are pinned). */
    enum ats_status (*h2d)(void *ctx, void *dev, const void *host, size_t bytes, int stream, ats_err *err);
    enum ats_status (*event_new)(void *ctx, void **ev, ats_err *err);
    void (*event_free)(void *ctx, void *ev);
    /** Records ev on `stream` (it completes when the work queued there before it has). */
    enum ats_status (*record)(void *ctx, void *ev, int stream, ats_err *err);
    /** `stream` waits (on the device) for ev. */
    enum ats_status (*wait)(void *ctx, int stream, void *ev, ats_err *err);
    /** The host waits for everything queued on `stream`. */
    enum ats_status (*sync)(void *ctx, int stream, ats_err *err);
    /** Time between two completed events [ns]. */
    enum ats_status (*elapsed_ns)(void *ctx, void *ev_a, void *ev_b, int64_t *ns, ats_err *err);
    /** Optional: registers host bytes as pinned, mapped memory. ATS_ENOMEM when refused (the
     *  runtime then copies from pageable memory, with one warning). */
    enum ats_status (*host_pin)(void *ctx, void *host, size_t bytes, ats_err *err);
    void (*host_unpin)(void *ctx, void *host);
    /** Optional: device bytes [dev, dev + bytes) are read by no queued op after ev (their last
     *  reader's end); the host-memory device poisons them there. */
    void (*retire)(void *ctx, void *dev, size_t bytes, void *ev);
    /** Optional (host-memory device): the weight bound at host key `host` is a compact copy of the
     *  experts ids[0..n) of that stacked tensor (expert_bytes each, in that order), so its read check
     *  compares chunk j with expert ids[j]. */
    void (*note_gather)(void *ctx, const void *host, size_t expert_bytes, const int32_t *ids, int32_t n);
} ex_device;

/** The device emulated over host memory (CPU kernels; copies and ops synchronous). Its op table
 *  reads a weight only through its binding (unbound: ATS_EINVAL) and checks the bound bytes equal
 *  the host's; retire() fills the range with 0xFF (NaN in every float type). *out new
 *  (ex_device_host_free). */
enum ats_status ex_device_host_new(ex_device **out);
void ex_device_host_free(ex_device *d);
/** What the host-memory device saw: weight reads from a binding whose bytes differed from the host
 *  weight (poison or a stale slot: must stay 0), stream-order violations (unwaited: must stay 0),
 *  bound reads, bytes allocated now and at peak, and its host_pin ledger as cudaHostRegister would
 *  keep it (page-rounded ranges; a pin overlapping a pinned range is refused and counted in
 *  pin_overlaps, an unpin of a pointer never pinned in unpin_unknown: both must stay 0; pins_live
 *  must be 0 once the runtime is freed). */
typedef struct ex_device_host_stats {
    int64_t bad_reads, bound_reads, copies, retired, gathers; /* gathers: compact expert copies bound */
    int64_t unwaited; /* copies over bytes a not-waited-for op read, or reads of a not-waited-for copy */
    int64_t pins, pins_live, pin_overlaps, unpin_unknown, pins_refused;
    uint64_t pinned_bytes; /* page-rounded bytes pinned now */
    uint64_t alloc_bytes, peak_alloc_bytes;
} ex_device_host_stats;
ex_device_host_stats ex_device_host_get_stats(const ex_device *d);
/** on: every later host_pin is refused (ATS_ENOMEM, counted in pins_refused), as cudaHostRegister is
 *  under a small `ulimit -l` or in a container: the runtime must fall back to pageable copies. */
void ex_device_host_refuse_pins(ex_device *d, int on);

/** The CUDA device over device 0 (compute stream, one transfer stream, events; the op table
 *  ex_backend_cuda_new's). ATS_ENOTFOUND without a device (no message printed), ATS_ERANGE on a
 *  CUDA failure. Only with ATS_HAVE_CUDA (else ATS_ENOTFOUND). *out new (ex_device_cuda_free). */
enum ats_status ex_device_cuda_new(ex_device **out, ats_err *err);
void ex_device_cuda_free(ex_device *d);

/** Configuration of a runtime. */
typedef struct ex_rt_cfg {
    const char *policy;          /* sched policy name (ats_policy_names) */
    uint64_t vram_budget_bytes;  /* everything the run puts on the device [bytes]: resident weights,
                                    temp ring, KV caches of GPU attention, compute buffers */
    const ats_hw *hw;            /* starting cost snapshot (ats_costs_from_model); borrowed */
    ats_controller_cfg ctrl;     /* ε, τ (ats_controller_cfg_default) */
    int64_t prompt_tok;          /* prompt length: placement from the decode round at this context */
    int64_t chunk_tok;           /* prefill chunk [tok] */
    int64_t gen_tok;             /* decode steps of the request (>= 0: the policy's automatic temp ring
                                    is chosen for ceil(prompt / chunk) prefill rounds + gen_tok decode
                                    rounds, ats_policy_place_request; -1 (default): for a decode round
                                    alone) */
    int serialized;              /* 1: every plan runs serialized (R7, llama.cpp's path) */
    int act_path;                /* -1: the plan's; ATS_ACT_SM / ATS_ACT_CE (the ablation's) */
    int time_every;              /* GPU op times by events every this many rounds (≥ 1; 0 = auto:
                                    so that event cost stays below ~2% of a round) */
    int measured;                /* 1 (default): after the first round of a phase its cost snapshot
                                    is the measured one (each op's last measured time; unmeasured ops
                                    the model's scaled by measured / model); 0: the --hw model's,
                                    scaled only by the controller's load factors */
    uint64_t quantum_bytes;      /* placement DP unit [bytes]; 0 (default): the policy's (1 MiB). Tests
                                    of models of a few hundred KiB use 4 KiB */
} ex_rt_cfg;

ex_rt_cfg ex_rt_cfg_default(void);

/** One executed round, as measured. Times [s] since ex_rt_new's epoch (wall clock). */
typedef struct ex_rt_round {
    int phase;                   /* ATS_PHASE_PREFILL / ATS_PHASE_DECODE */
    int64_t tokens;
    double t_start_s, latency_s;
    int32_t n_promoted;          /* plan's promoted ops */
    uint64_t bytes_h2d;          /* weight bytes copied host → device this round [bytes] */
    int rescheduled;             /* the controller re-planned before this round */
    double resched_cost_s;       /* measured cost of that re-plan (observe + plan) [s]; 0 if none */
    ats_load load;               /* the controller's factors after this round */
    int32_t n_off_plan;          /* ops run on another backend than the plan's (fused MoE rule) */
    int timed_gpu;               /* GPU op times of this round come from events */
    uint64_t upload_bytes;       /* the decode placement's weights uploaded before this round [bytes]
                                    (0: none; ex_rt_decode_placement), also in bytes_h2d ... */
    double upload_s;             /* ... and how long from the round's start that took (events) [s] */
} ex_rt_round;

typedef struct ex_rt ex_rt;

/**
 * New runtime: builds the session over `m` (borrowed, outlives the runtime), the policy and its
 * static placement (from the decode graph at context cfg->prompt_tok), the controllers (one per
 * phase, as the simulator), the device regions, and uploads the resident weights (time reported by
 * ex_rt_upload_s). dev NULL: everything on the CPU (the policies still plan; every op is assigned
 * the CPU). ATS_EINFEASIBLE when the layout does not fit the budget (message with the numbers),
 * ATS_ENOTFOUND (policy), ATS_EINVAL, ATS_ENOMEM, ATS_ERANGE (device).
 */
enum ats_status ex_rt_new(const ex_model *m, const ex_session_opts *so, ex_device *dev, const ex_rt_cfg *cfg,
                          ex_rt **out, ats_err *err);
void ex_rt_free(ex_rt *rt);

/** Runs one round (n tokens; phase prefill or decode) following the controller's plan, then feeds
 *  the controller. logits (n_vocab) of the last token. `info` (NULL ok) gets the round's figures. */
enum ats_status ex_rt_round_run(ex_rt *rt, ats_phase_kind phase, const int32_t *tokens, int64_t n, float *logits,
                                ex_rt_round *info, ats_err *err);

/** Warm-up before the first round (llama.cpp's and llama-bench's warm-up run): one prefill round
 *  of n tokens (capped at the context) and one decode round under the controllers' first plans,
 *  then the session's KV cache emptied (ex_session_clear). Device kernels load, workspaces grow and library
 *  handles initialise here instead of in the first timed round; nothing is measured or fed to the
 *  controllers (the controllers start here). No-op on the CPU only runtime. ATS_EINVAL when a round
 *  already ran; the round's statuses otherwise. */
enum ats_status ex_rt_warmup(ex_rt *rt, int64_t n, ats_err *err);

/** The session (borrowed). */
ex_session *ex_rt_session(ex_rt *rt);
/** Seconds the resident upload took. */
double ex_rt_upload_s(const ex_rt *rt);
/** Device bytes laid out: resident weights, temp ring, KV caches of GPU attention, compute estimate. */
void ex_rt_layout(const ex_rt *rt, uint64_t *resident, uint64_t *temp, uint64_t *kv, uint64_t *compute);
/** The decode placement (ats_policy_decode_placement): the bytes of its extra weights, uploaded into
 *  the front of the temp region at a decode round after a prefill, and how many times they were
 *  uploaded so far; 0 and 0 when decode rounds use the placement itself. */
void ex_rt_decode_placement(const ex_rt *rt, uint64_t *extra_bytes, int64_t *uploads);
/** Re-plans so far (both phases). */
int64_t ex_rt_n_reschedules(const ex_rt *rt);
/** Rounds observed by the controllers. */
int64_t ex_rt_n_observed(const ex_rt *rt);
/** Σ measured GPU op time [s] over timed rounds, and those rounds' Σ latency [s] (GPU busy share). */
void ex_rt_gpu_busy(const ex_rt *rt, double *gpu_s, double *timed_round_s);
/** Last round's per-op measurements: backend, start/end [s since epoch] (CPU ops wall clock; GPU
 *  ops enqueue times, event durations in t_exec), transfer start/end [s] (NaN when none). */
typedef struct ex_rt_op_times {
    int32_t n;
    const uint8_t *backend;
    const double *t_start_s, *t_end_s, *t_exec_s;
    const double *x_start_s, *x_end_s;
    const size_t *x_bytes;      /* bytes each op's transfer moved (valid where x_start_s is not NaN) */
    /* the host thread before each op's backend call [s since epoch]: taken up (h_in_s), the backend
       switch done (h_sw_s: the previous backend's flush, KV rows back), the call (h_call_s; between
       h_sw_s and h_call_s the executor issued transfers and stream waits) */
    const double *h_in_s, *h_sw_s, *h_call_s;
} ex_rt_op_times;
ex_rt_op_times ex_rt_last_ops(const ex_rt *rt);
/** The plan the last round ran (borrowed; valid until the next round). */
const ats_plan *ex_rt_last_plan(const ex_rt *rt);

#ifdef __cplusplus
}
#endif
#endif
