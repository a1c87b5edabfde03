/*
 * ats/plan.h — the execution plan of one round: THE interface executed by both sim/ and exec/.
 *
 * A plan is built from (graph, placement, assignment, cost snapshot) by ats_plan_build(). It holds:
 *  - splits: maximal runs of consecutive ops on one backend, in op order;
 *  - weight transfers (wxfers) in issue order: the promoted ops' weights, each with its copy engine,
 *    its range [offset, offset+bytes) in the GPU temp region, the op it feeds, and the ops whose END
 *    it must wait for (wait_router: the layer's router for EXPERTS transfers; wait_op: the previous
 *    reader of an overlapping temp range, or in serialized plans the op just before the consumer);
 *  - activation transfers (axfers) at split boundaries: direction, bytes, path (SM copy kernel on the
 *    compute stream, or the copy engine);
 *  - per op: backend, the weight transfer it waits for, its incoming activation transfer, whether the
 *    host must synchronize with the compute stream before it (GPU→CPU switch), whether some transfer
 *    waits for its end (record an event after it).
 * Temp region: a ring of temp_capacity_bytes; transfers are allocated in issue order at increasing
 * offsets, wrapping to 0 when the next one does not fit; a transfer overlapping live ranges waits for
 * the last reader among them. With double_buffer (policy "ats"), two slots of capacity/2 instead:
 * transfer k uses slot k mod 2 at offset (k mod 2)·capacity/2 and waits for the op just before the
 * previous transfer's consumer (which also frees its slot: that slot's reader is two back). With
 * fused_groups, a fused group's transfers (ats_op_fused_head) count as one transfer here: one
 * slot or ring range, side by side, all before the group's first op. peak_temp_bytes ≤ temp_capacity_bytes always; resident + temp capacity
 * ≤ the VRAM budget is the policy's job (policy.h).
 *
 * Dependency rules (DESIGN.md contract 2), shared by ats_plan_predict, the simulator and the
 * executor — with no bandwidth sharing and no noise, all three give the same times:
 *  R1 compute stream: ops run one at a time in op order (CPU and GPU ops alike, batch 1);
 *     op i starts at S_i = max(E_{i−1} + a_i, X_i) where a_i = c_i when an activation transfer enters
 *     op i (backend change; either direction, either path) and 0 otherwise, and X_i = end of op i's
 *     weight transfer (promoted ops) or −∞. E_{−1} = 0. GPU→CPU: the host waits for the compute
 *     stream, which R1 already implies.
 *  R2 copy engines: one FIFO queue per engine in plan order; transfer k starts at
 *     max(queue free, release_k) and lasts w[op_k] (cost snapshot; routing applied). release_k =
 *     max(end of wait_router, end of wait_op, 0), or −prefetch_lead_s when k is a prefetch transfer
 *     (prefetch = 1: issued during the previous round; its waits refer to that round and are taken
 *     as met). Queues are free from −prefetch_lead_s.
 *  R3 a GPU op that was promoted waits for its transfer's end (X_i in R1).
 *  R4 temp ranges are reused only after their last reader ended (wait_op in R2).
 *  R5 routed-expert transfers start after their router ended (wait_router in R2).
 *  R6 host memory (optional, predict opts): while any copy engine is busy, a CPU op progresses at
 *     rate hostmem_cpu_factor (its remaining work is stretched); GPU ops and transfers are unaffected.
 *  R7 serialized plans (llama.cpp path): every transfer has wait_op = consumer − 1, and the
 *     activation transfer into a promoted op follows its weight transfer: S_i = max(E_{i−1}, X_i)
 *     + a_i; so nothing overlaps and the latency is Σ t + Σ a + Σ w. Otherwise identical rules.
 * Activation transfer time is c_i on the compute timeline whatever its path; the path only matters
 * where PCIe bandwidth is shared (simulator) or for which engine runs it (executor).
 *
 * Lifecycle: ats_plan_init() (empty) → ats_plan_build() (reallocates as needed; may be called every
 * round on the same plan) → ats_plan_free(). A built plan is immutable and may be read by many
 * threads.
 */
#ifndef ATS_PLAN_H
#define ATS_PLAN_H

#include <stdint.h>
#include <stddef.h>
#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/placement.h"
#include "ats/status.h"
#include "ats/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ats_act_path { ATS_ACT_SM = 0, ATS_ACT_CE = 1 } ats_act_path;
typedef enum ats_xfer_dir { ATS_H2D = 0, ATS_D2H = 1 } ats_xfer_dir;

/** A run of consecutive ops on one backend. */
typedef struct ats_split {
    int32_t first_op;
    int32_t n_ops;
    uint8_t backend; /* ats_backend */
} ats_split;

/** A host→device weight transfer into the temp region. */
typedef struct ats_wxfer {
    int32_t op;            /* the op it feeds (promoted) */
    int32_t ce;            /* copy-engine index in [0, n_copy_engines) */
    uint64_t offset_bytes; /* start in the temp region [bytes] */
    uint64_t bytes;        /* bytes moved [bytes] */
    uint64_t slot_bytes;   /* temp bytes held from offset_bytes (≥ bytes): ats_op_slot_bytes with
                              fused_groups, else bytes */
    int32_t wait_router;   /* op whose end releases it (EXPERTS: the router); 0 when !has_wait_router */
    int32_t wait_op;       /* op whose end frees its temp range (previous reader), or the op before
                              the consumer in serialized plans; 0 when !has_wait_op */
    uint8_t has_wait_router; /* 1: wait_router is an op to wait for */
    uint8_t has_wait_op;     /* 1: wait_op is an op to wait for */
    double n_experts;      /* EXPERTS: experts moved (routing count or expected); 0 otherwise */
    int32_t ids_off, n_ids;/* selected expert ids in plan->expert_ids (n_ids = 0 when unknown) */
    uint8_t prefetch;      /* 1: issued during the previous round (R2) */
} ats_wxfer;

/** An activation transfer into op `op` at a split boundary. */
typedef struct ats_axfer {
    int32_t op;      /* the op whose input moves (first op of the new split) */
    uint8_t dir;     /* ats_xfer_dir: H2D when op runs on the GPU */
    uint8_t path;    /* ats_act_path */
    uint64_t bytes;  /* op.act_in_bytes [bytes] */
} ats_axfer;

/** Per-op schedule entries. */
typedef struct ats_plan_op {
    uint8_t backend;       /* ats_backend this round */
    uint8_t promoted;      /* default CPU, runs on GPU */
    uint8_t sync_compute;  /* host waits for the compute stream before this op (GPU→CPU switch) */
    uint8_t record_event;  /* some transfer waits for this op's end */
    int32_t split;         /* index into splits */
    uint8_t has_wait_xfer; /* 1: the op waits for weight transfer wait_xfer */
    uint8_t has_act_xfer;  /* 1: activation transfer act_xfer enters this op */
    int32_t wait_xfer;     /* wxfer index whose end it waits for; 0 when !has_wait_xfer */
    int32_t act_xfer;      /* axfer index entering this op; 0 when !has_act_xfer */
} ats_plan_op;

typedef struct ats_plan {
    int32_t n_ops;
    ats_plan_op *ops;        /* n_ops, owned */
    int32_t n_splits;
    ats_split *splits;       /* owned */
    int32_t n_wxfers;
    ats_wxfer *wxfers;       /* issue order, owned */
    int32_t n_axfers;
    ats_axfer *axfers;       /* op order, owned */
    int32_t n_expert_ids;
    int32_t *expert_ids;     /* owned; referenced by wxfers */
    uint8_t serialized;      /* R7 */
    uint8_t double_buffer;   /* temp region as two slots (see above) */
    uint8_t act_path;        /* ats_act_path of all axfers */
    int32_t n_copy_engines;
    uint64_t resident_bytes;      /* GPU-resident bytes of the placement [bytes] */
    uint64_t temp_capacity_bytes; /* size of the temp ring [bytes] */
    uint64_t peak_temp_bytes;     /* highest offset+bytes used [bytes] ≤ capacity */
    uint64_t h2d_weight_bytes;    /* Σ wxfer bytes [bytes] */
    int32_t n_promoted;
    int32_t cap_;                 /* internal: allocated op capacity */
    int32_t cap_wx_, cap_ids_;    /* internal */
} ats_plan;

/** Options of ats_plan_build. */
typedef struct ats_plan_opts {
    uint64_t temp_bytes;        /* temp ring capacity [bytes]; every promoted op must fit */
    int n_copy_engines;         /* transfers go round-robin over this many engines (default 1) */
    ats_act_path act_path;      /* default ATS_ACT_SM */
    double prefetch_lead_s;     /* R2; > 0 only in decode; default 0 */
    const ats_routing *routing; /* borrowed; EXPERTS counts / ids; NULL = expected */
    int double_buffer;          /* 1: two slots of temp_bytes/2 (model A of transfer.h) instead of
                                   the ring; default 0 */
    int fused_groups;           /* 1 (policies' plans, ats_policy_plan): the executor's fused groups
                                   (ats_op_fused_head) move as one unit before the group's first op:
                                   side by side in one slot (double_buffer) or one ring range, R7
                                   waits for the op before the group; routed experts hold
                                   ats_op_slot_bytes. 0 (default; the transfer DP's own model):
                                   every transfer alone, slot_bytes = bytes */
} ats_plan_opts;

ats_plan_opts ats_plan_opts_default(void);

void ats_plan_init(ats_plan *pl);
void ats_plan_free(ats_plan *pl);

/**
 * Builds the plan of one round. All inputs borrowed; `cur` (routing applied) decides which
 * transfers are prefetches: the leading transfers of each engine without waits that start before 0
 * under R2 with prefetch_lead_s (with double_buffer only the first transfer; never EXPERTS
 * transfers, never in serialized plans). Returns ATS_EINVAL when sizes mismatch, an assignment puts
 * a GPU-resident op on the CPU, an EMBED op is promoted, or a promoted op's bytes exceed
 * temp_bytes (message names the op); ATS_ENOMEM. A promoted ATTN op's transfer moves its layer's KV
 * cache (ats_op_xfer_bytes; transfer.h promote_kv). O(n + T·L) for T transfers and L live ranges.
 */
enum ats_status ats_plan_build(const ats_graph *g, const ats_placement *p, const ats_assignment *a,
                               const ats_costs *cur, const ats_plan_opts *opts, ats_plan *out,
                               ats_err *err);

/** Options of ats_plan_predict. */
typedef struct ats_predict_opts {
    double hostmem_cpu_factor; /* R6: CPU op rate while a copy engine is busy, (0,1]; 1 = off */
    double prefetch_lead_s;    /* R2: queues free from −prefetch_lead_s [s] */
} ats_predict_opts;

ats_predict_opts ats_predict_opts_default(void);

/** Optional per-op and per-transfer times of a prediction [s since round start]. */
typedef struct ats_timeline {
    int32_t n_ops, n_wxfers;
    double *op_start, *op_end;     /* n_ops each */
    double *xfer_start, *xfer_end; /* n_wxfers each */
} ats_timeline;

/** Allocates a timeline for a plan's sizes. ATS_ENOMEM. */
enum ats_status ats_timeline_init(ats_timeline *t, int32_t n_ops, int32_t n_wxfers);
void ats_timeline_free(ats_timeline *t);

/**
 * Round latency of `plan` under rules R1–R7 [s] = end of the last op. `costs` borrowed, same n as
 * the plan (routing applied as when building). `tl` NULL or initialised with the plan's sizes.
 * ATS_EINVAL on size mismatch. Exact (event by event, no approximation); O(n + T·B) with B the
 * transfers overlapping one CPU op. Thread-safe.
 */
enum ats_status ats_plan_predict(const ats_plan *plan, const ats_costs *costs,
                                 const ats_predict_opts *opts, double *latency_s, ats_timeline *tl,
                                 ats_err *err);

/**
 * R6 inverted: the idle time [s] of a CPU op measured from t0 to t1 [s] while copy engines ran
 * during the intervals [x0[k], x1[k]) (any order, may overlap; NaN or empty intervals ignored):
 * (t1 - t0) - (1 - factor) · |[t0, t1) ∩ ∪ intervals|, the work the op did at rate factor while a
 * copy ran and at rate 1 otherwise. The executor's measured cost snapshot holds idle times, as the
 * model's nominal does, so that prediction (which applies R6 itself) does not count the copies'
 * interference twice. factor in (0, 1]; nx ≥ 0; scratch needs 2·nx doubles (NULL when nx is 0).
 * Pure, thread-safe.
 */
double ats_cpu_idle_time(double t0, double t1, const double *x0, const double *x1, int32_t nx, double factor,
                         double *scratch);

/**
 * Text dump for debugging (libats_sched writes no files): one line per split, weight transfer and
 * activation transfer, with op names from g (g may be NULL: indices only), into buf (len bytes,
 * always NUL-terminated when len > 0). Returns the length the full dump needs (snprintf-style), so
 * call once with len 0 to size the buffer.
 */
size_t ats_plan_dump(const ats_plan *plan, const ats_graph *g, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
