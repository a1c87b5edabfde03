/*
 * sim/routing.h — MoE routing for the simulator: which experts each token selects in each layer.
 *
 * Three sources: uniform (every expert equally likely), Zipf with skew s (expert of popularity
 * rank r chosen with probability ∝ 1 / r^s; the rank order is a seeded permutation per layer), or
 * a routing file recorded by the executor. Each token picks k distinct experts per MoE layer.
 *
 * Routing file (HDF5): dataset `/routing/expert_ids`, int32, shape (n_tokens, n_layer, k), row-major;
 * entry [t][l][j] is the j-th expert chosen by token t in layer l, in [0, n_expert); dense layers
 * hold -1. Tokens are replayed in order and wrap around when a session needs more of them.
 *
 * Lifecycle: sim_routing_new_dist or sim_routing_load → sim_routing_round per round and layer →
 * sim_routing_free. A handle owns its GSL RNG (gsl_rng_mt19937 seeded by `seed`), so two handles
 * with the same seed produce the same routing; not thread-safe on one handle.
 */
#ifndef SIM_ROUTING_H
#define SIM_ROUTING_H

#include <stdint.h>

#include "ats/arch.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sim_routing_kind { SIM_ROUTE_UNIFORM = 0, SIM_ROUTE_ZIPF, SIM_ROUTE_FILE } sim_routing_kind;

typedef struct sim_routing sim_routing;

/**
 * Seeded distribution for the MoE layers of `arch` (borrowed). `skew` is Zipf's exponent s > 0
 * (ignored for uniform). *out is new (sim_routing_free). ATS_EINVAL when the model has no experts,
 * k > n_expert, or skew ≤ 0 / NaN for Zipf.
 */
enum ats_status sim_routing_new_dist(const ats_arch *arch, sim_routing_kind kind, double skew,
                                     uint64_t seed, sim_routing **out, ats_err *err);

/**
 * Loads a routing file for `arch` (schema above). ATS_ENOTFOUND when the file is missing;
 * ATS_EINVAL naming the file, the dataset and the index for a wrong type, rank or shape (n_layer
 * and k must match the model), or an expert id outside [0, n_expert) in an MoE layer.
 */
enum ats_status sim_routing_load(const char *path, const ats_arch *arch, sim_routing **out,
                                 ats_err *err);

void sim_routing_free(sim_routing *r);

/**
 * Routes the next `n_tokens` tokens through MoE layer `layer`: sets sel[e] = 1 for every expert
 * selected by at least one of them, 0 otherwise (sel has n_expert entries, caller-owned) and
 * returns the number of distinct experts selected. Call once per MoE layer per round, layers in
 * increasing order, then sim_routing_next_round(r, n_tokens) to move the token cursor.
 */
int sim_routing_round(sim_routing *r, int64_t n_tokens, int32_t layer, uint8_t *sel);
/** Advances the token cursor by n_tokens (file replay; the distributions draw fresh tokens). */
void sim_routing_next_round(sim_routing *r, int64_t n_tokens);

/** Spelling of a kind ("uniform", "zipf", "file"). */
const char *sim_routing_kind_name(sim_routing_kind k);

#ifdef __cplusplus
}
#endif
#endif
