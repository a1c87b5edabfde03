/*
 * tests/sched/sched_fix.h — fixtures shared by the sched tests: small random graphs and cost
 * snapshots (for brute force), and real model graphs + hardware descriptions from the source tree.
 */
#ifndef ATS_TEST_SCHED_FIX_H
#define ATS_TEST_SCHED_FIX_H

#include <stdint.h>

#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/hw.h"

/** A fabricated graph of n ops (n ≥ 2): op 0 EMBED, then norms, matmuls, attention (with a KV
 *  cache) and, when moe, routers followed by 1-3 EXPERTS ops and a shared expert. Sizes are whole
 *  MiB between 1 and 64. Free with ats_graph_free. */
ats_graph *fx_random_graph(uint64_t *rng, int n, int moe);
/** Random costs for g (c[0] = 0; t_gpu < t_cpu mostly, but not always). `c` initialised. */
void fx_random_costs(uint64_t *rng, const ats_graph *g, ats_costs *c);
/** Loads models/<name>.json and builds one round; NULL on failure (a CHECK fails). */
ats_graph *fx_model_graph(const char *name, ats_phase_kind kind, int64_t n_tokens, int64_t ctx_pos);
/** Loads sim/hw/<name>.json; 1 on success (a CHECK fails otherwise). */
int fx_hw(const char *name, ats_hw *hw);

#endif
