/* tests/tu_arch.c — the made-up small architecture of the executor tests (testutil.h, tu_tiny_arch), in a
 * library of its own (ats_testutil_arch) so that only the tests that use it link sched. */
#include <stdio.h>

#include "ats/arch.h"
#include "testutil.h"

void tu_tiny_arch(ats_arch *a, int moe, int64_t n_ctx_max, const char *test_name)
{
    ats_arch_init(a);
    snprintf(a->name, sizeof a->name, "%s", moe ? "tiny-qwen3moe" : "tiny-qwen3");
    snprintf(a->family, sizeof a->family, "%s", moe ? "qwen3_moe" : "qwen3");
    snprintf(a->source, sizeof a->source, "%s: made-up small shapes", test_name);
    a->n_embd = 256;
    a->n_ff = moe ? 0 : 512;
    a->n_layer = 4;
    a->n_head = 4;
    a->n_head_kv = 2;
    a->head_dim = 64;
    a->n_vocab = 1000;
    a->n_expert = moe ? 8 : 0;
    a->n_expert_used = moe ? 2 : 0;
    a->n_ff_exp = moe ? 256 : 0;
    a->n_ctx_max = n_ctx_max;
    a->rope_theta = 1000000.0;
    a->rms_norm_eps = 1e-6;
    a->qk_norm = 1;
    a->rope_type = ATS_ROPE_NEOX;
    a->partial_rotary = 1.0;
}
