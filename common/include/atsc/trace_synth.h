/*
 * atsc/trace_synth.h — synthetic load traces and the comparison of a recorded trace with a target.
 *
 * Synthesis: each resource's availability is the product of its shapes (1 when none): const:A,
 * step:T=A,..., ramp:T0,A0,T1,A1, bursts:P,L,A[,J], thermal:T0,TAU,AMIN (`ats trace synth --help` has the
 * words). atsc_synth_shape_parse reads one SPEC; atsc_trace_synth samples the product at the dt grid
 * (where a shape is smooth or noise is asked) and at every step and burst edge, multiplies by
 * (1 + noise·N(0,1)), clips to [0.01, 1] and drops repeated samples. Seeded GSL mt19937: the same
 * options give the same trace.
 *
 * Comparison: atsc_trace_compare walks each resource's constant segments of the target and gives, per
 * segment, the time-weighted mean of the recording over it without its margins (recorded time = target
 * time + offset), or why it could not be compared.
 * No state outside the caller's structs; thread-safe.
 */
#ifndef ATSC_TRACE_SYNTH_H
#define ATSC_TRACE_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "ats/status.h"
#include "atsc/trace_io.h"

#ifdef __cplusplus
extern "C" {
#endif

enum atsc_shape_kind { ATSC_SHAPE_CONST, ATSC_SHAPE_STEP, ATSC_SHAPE_RAMP, ATSC_SHAPE_BURSTS, ATSC_SHAPE_THERMAL };

#define ATSC_SHAPE_MAX_STEPS 64

typedef struct atsc_synth_shape {
    enum atsc_shape_kind kind;
    enum atsc_resource res;
    int n;                                  /* step: (t, a) pairs */
    double t[ATSC_SHAPE_MAX_STEPS];         /* step: times [s], increasing */
    double a[ATSC_SHAPE_MAX_STEPS];         /* step: availabilities in (0, 1] */
    double p[4];                            /* ramp T0 A0 T1 A1; thermal T0 TAU AMIN; bursts P L A J */
    const char *spec;                       /* the SPEC as given (borrowed), for messages */
} atsc_synth_shape;

/** Parses SPEC (borrowed; kept in sh->spec) for resource res into sh. ATS_OK; ATS_ENOTFOUND for an
 *  unknown shape ("'SPEC': unknown shape (const, step, ramp, bursts, thermal)"); ATS_EINVAL for bad
 *  numbers ("'SPEC': A must be in (0, 1]", ...); ATS_ENOMEM. */
enum ats_status atsc_synth_shape_parse(const char *spec, enum atsc_resource res, atsc_synth_shape *sh, ats_err *err);

/** When the shape first changes [s] (step: its last step; ramp, thermal: T0; bursts: the earliest start
 *  of the first burst; const: 0); a trace of duration at most this never shows the shape. *what says
 *  which ("its last step", "its step", "it starts", "its first burst starts at the earliest"). */
double atsc_synth_shape_start(const atsc_synth_shape *sh, const char **what);

typedef struct atsc_synth_opts {
    double duration_s;       /* last sample time [s] (> 0) */
    double dt_s;             /* sampling of smooth shapes and noise [s] (> 0) */
    double noise;            /* sigma of the multiplicative Gaussian noise (>= 0) */
    uint64_t seed;           /* GSL mt19937 seed of bursts and noise */
    const char *source, *machine, *description; /* the trace's attributes (borrowed; NULL: "", "synthetic",
                                                   "synthetic trace, D s, seed N") */
} atsc_synth_opts;
/** duration 180 s, dt 1 s, no noise, seed 1, attributes NULL. */
atsc_synth_opts atsc_synth_opts_default(void);

/** The trace of shapes[0..n) (borrowed) under o; *out new (atsc_trace_free). ATS_EINVAL for bad options
 *  (message), ATS_ENOMEM. */
enum ats_status atsc_trace_synth(const atsc_synth_opts *o, const atsc_synth_shape *shapes, int n, atsc_trace **out,
                                 ats_err *err);

/* ---- comparison ------------------------------------------------------------------------------- */

enum atsc_cmp_skip {
    ATSC_CMP_COMPARED = 0,
    ATSC_CMP_OUTSIDE,   /* no part of the segment lies in the recording */
    ATSC_CMP_PARTLY,    /* the part inside the recording is not longer than 2 * margin */
    ATSC_CMP_SHORT      /* the segment is not longer than 2 * margin */
};

typedef struct atsc_cmp_segment {
    enum atsc_resource res;
    double s0, s1;       /* the target's segment [s] */
    double c0, c1;       /* its part inside the recording (target time) [s] */
    double target;       /* the target's availability */
    double recorded;     /* compared: the recording's time-weighted mean over [c0 + margin, c1 - margin] */
    double rel_err;      /* compared: (recorded - target) / target */
    enum atsc_cmp_skip skip;
} atsc_cmp_segment;

typedef struct atsc_cmp_result {
    atsc_cmp_segment *seg; /* n rows, owned (atsc_cmp_result_free) */
    size_t n;
    int n_cmp, n_cmp_loaded;          /* compared segments, of which loaded (target < 1) */
    int n_skip_loaded, n_skip_idle;   /* not compared, loaded / unloaded */
    double worst_loaded, worst_idle;  /* worst |rel_err| of compared loaded / unloaded segments */
} atsc_cmp_result;

/** Compares rec with tgt (both borrowed): each resource's constant segments of tgt up to its last
 *  sample, margin [s] >= 0 cut at both ends, recorded time = target time + offset_s. ATS_OK or ATS_ENOMEM. */
enum ats_status atsc_trace_compare(const atsc_trace *rec, const atsc_trace *tgt, double margin_s, double offset_s,
                                   atsc_cmp_result *out, ats_err *err);
void atsc_cmp_result_free(atsc_cmp_result *r);

#ifdef __cplusplus
}
#endif
#endif
