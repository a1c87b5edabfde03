/*
 * bench/src/kernels_impl.h — what bench/src/kernels.c (CPU part, whole model, the run) and
 * bench/src/kernels_gpu.c (GPU part) share: the Qwen3-14B shapes, random quantized weights, the
 * ceilings one part measures for the next. Private to libats_bench.
 */
#ifndef BENCH_KERNELS_IMPL_H
#define BENCH_KERNELS_IMPL_H

#include <stdint.h>

#include <jansson.h>

#include "ats/quant.h"
#include "bench/kernels.h"

typedef struct kb_shape {
    const char *name;
    int64_t rows, cols; /* W (rows, cols): y (rows) = W x (cols) */
} kb_shape;

/* Qwen3-14B: hidden 5120, intermediate 17408, 40 heads / 8 KV heads of 128 (models/qwen3-14b.json) */
#define KB_N_SHAPES 4
extern const kb_shape kb_shapes[KB_N_SHAPES];

/* Ceilings measured by the kernel parts, used as floors for the whole-model part [B/s, FLOP/s]. */
typedef struct kb_ceilings {
    double gpu_read_Bps, gpu_gemm_flops, cpu_read_Bps;
} kb_ceilings;

/* splitmix64 step: the random stream of weights and activations */
uint64_t kb_splitmix(uint64_t *s);
/* a random value in [-1, 1) */
float kb_rand_pm1(uint64_t *s);
/* rows x cols random values in [-1, 1) quantized to `t` (rows in parallel); *bytes_out its size.
 * New (free), NULL when out of memory. */
void *kb_make_weights(ats_qtype t, int64_t rows, int64_t cols, uint64_t seed, uint64_t *bytes_out);
/* a JSON row {type, shape, rows, cols} (new reference) */
json_t *kb_entry(const char *type, const char *shape_name, int64_t rows, int64_t cols);

/* The GPU part (kernels_gpu.c; without CUDA a "built without CUDA" entry): sets root.gpu and cl's GPU
 * ceilings; 0, or -1 when a part failed (said through o->sink). */
int kb_bench_gpu(const bench_kernels_opts *o, json_t *root, kb_ceilings *cl);

#endif
