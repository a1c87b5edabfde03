/* experiments/cpu-kernels/attention-decode.c — one decode step of ex_cpu_attention per layer over a
 * KV cache laid out as the session's (n_layer, n_ctx, kv_dim), F32: the median over REPS passes of
 * µs a layer. Usage: attention-decode [POS [N_HEAD N_HEAD_KV HEAD_DIM]] (default 512 40 8 128: Qwen3-14B
 * at a 512-token context); threads from OMP_NUM_THREADS. Build from the repository root after a build in
 * build/:  gcc -O2 -fopenmp -Iexec/include -Isched/include experiments/cpu-kernels/attention-decode.c \
 *            -o /tmp/attention-decode build/exec/libats_exec.a build/sched/libats_sched.a -lm */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ex/ops.h"

enum { N_LAYER = 40, N_CTX = 4096, REPS = 5 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 1 && argc != 2 && argc != 5) {
        fprintf(stderr, "usage: attention-decode [POS [N_HEAD N_HEAD_KV HEAD_DIM]]\n");
        return 2;
    }
    const int64_t pos = argc > 1 ? atoll(argv[1]) : 512, H = argc > 4 ? atoll(argv[2]) : 40,
                  KV = argc > 4 ? atoll(argv[3]) : 8, hd = argc > 4 ? atoll(argv[4]) : 128;
    if (pos < 0 || pos >= N_CTX || H < 1 || KV < 1 || H % KV || hd < 1) {
        fprintf(stderr, "attention-decode: POS in [0, %d), N_HEAD a multiple of N_HEAD_KV\n", N_CTX);
        return 2;
    }
    const size_t slab = (size_t)N_CTX * (size_t)(KV * hd), n = (size_t)N_LAYER * slab;
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v), *q = malloc((size_t)(H * hd) * sizeof *q),
          *o = malloc((size_t)(H * hd) * sizeof *o);
    if (!k || !v || !q || !o) return 1;
    for (size_t i = 0; i < n; i++) {
        k[i] = (float)(i % 97) * 1e-3f;
        v[i] = (float)(i % 89) * 1e-3f;
    }
    for (int64_t i = 0; i < H * hd; i++) q[i] = (float)(i % 13) * 1e-2f;
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (int l = 0; l < N_LAYER; l++)
            if (ex_cpu_attention(q, 1, pos, k + l * slab, v + l * slab, H, KV, hd, 0.088f, o) != ATS_OK) return 1;
        t[r] = (now_s() - t0) / N_LAYER;
    }
    qsort(t, REPS, sizeof t[0], cmp_d);
    printf("attention decode: %lld positions, %lld/%lld heads, head_dim %lld: %.1f us a layer (median of %d)\n",
           (long long)(pos + 1), (long long)H, (long long)KV, (long long)hd, 1e6 * t[REPS / 2], REPS);
    free(k); free(v); free(q); free(o);
    return 0;
}
