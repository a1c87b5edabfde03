/*
 * exec/kernels/cuda/gemv.cuh — the decode GEMV kernels behind exc_gemv_batched / ex_cuda_gemv (private to
 * the CUDA backend). The one dispatch table is gemv_pick in gemv.cu (README.md, "Decode GEMV"): for each
 * weight type, architecture class and shape class exactly one of the kernels below.
 *
 *   warp  (gemv.cu)       quantize_x + one warp per row; every type, and the batched / MoE form (n_z > 1)
 *   ring  (gemv_ring.cu)  one persistent kernel, a cp.async ring per warp, x quantized per block
 *   rows2 (gemv_rows.cu)  quantize_x (interleaved) + two rows per warp, direct 16-byte weight loads
 *   rows1 (gemv_rows.cu)  quantize_x (plain) + one row per warp (Q4_0 rows of many columns)
 *   tma   (gemv_tma.cu)   one kernel, 1-D TMA bulk copies into a ring per warp, x quantized per block (sm_90)
 *
 * Per-device state (opt-in shared memory, which kernels have sm_90 code, the ring kernel's launch geometry
 * per shape) lives in the ex_gpu handle (exc_gemv_dev, set up by ex_gpu_open); no process-wide state.
 */
#ifndef EXC_GEMV_CUH
#define EXC_GEMV_CUH

#include "common.cuh"

typedef enum { EXC_GEMV_WARP = 0, EXC_GEMV_RING, EXC_GEMV_ROWS2, EXC_GEMV_ROWS1, EXC_GEMV_TMA } exc_gemv_kind;

/* Q6_K weights of task j (0..15) of the super-block at bp (210 bytes, 2-byte aligned; global or shared
 * memory), the unpack of the warp (gemv.cu, task_q6_K) and ring (gemv_ring.cu, ring_q6_K) kernels: half
 * h = j/8, l0 = 4·(j%8); q[g] = the 4 6-bit values at offsets 128h + l0 + {0..3} + 32g, one a byte, g = 0..3
 * (QUANT_FORMATS.md §Q6_K; the caller subtracts 32, __vsubss4, next to its __dp4a); *S points at group g's
 * scale S[2g]; *hp = h, *l0p = l0 (the task's first value is at 128h + l0). The callers read the activations
 * their own way (gemv.cu from global memory through __ldg, gemv_ring.cu from shared memory). */
static __device__ __forceinline__ void exc_q6_K_task(const uint8_t *bp, int j, int q[4], const int8_t **S, int *hp,
                                                     int *l0p)
{
    int h = j >> 3, l0 = 4 * (j & 7), s = (j & 7) >> 2;
    *hp = h;
    *l0p = l0;
    int a = exc_ld_u16x2(bp + 64 * h + l0);
    int bb = exc_ld_u16x2(bp + 64 * h + 32 + l0);
    int hh = exc_ld_u16x2(bp + 128 + 32 * h + l0);
    q[0] = (a & 0x0F0F0F0F) | ((hh & 0x03030303) << 4);
    q[1] = (bb & 0x0F0F0F0F) | (((hh >> 2) & 0x03030303) << 4);
    q[2] = ((a >> 4) & 0x0F0F0F0F) | (((hh >> 4) & 0x03030303) << 4);
    q[3] = ((bb >> 4) & 0x0F0F0F0F) | (((hh >> 6) & 0x03030303) << 4);
    *S = (const int8_t *)(bp + 192 + 8 * h + s);
}

/* The ring kernel's launch geometry for one (type, cols): worked out once per handle, since the CUDA
 * queries behind it (occupancy) cost several µs of host time, as long as a small GEMV on the GPU. */
typedef struct exc_gemv_ring_cfg {
    int type;
    int64_t cols;
    int warps;   /* 0: the ring kernel does not fit (shared memory) */
    int per_sm;  /* resident blocks per SM */
    size_t smem; /* dynamic shared memory per block [bytes] */
} exc_gemv_ring_cfg;
#define EXC_GEMV_RING_CFGS 64

typedef struct exc_gemv_dev {
    int sm_count, cc_major;
    int smem_optin;  /* opt-in shared memory a block may take [bytes] (227 KiB on sm_90, 99 KiB on sm_120) */
    int ring_ok;     /* the ring kernels' dynamic shared memory limit is raised to smem_optin */
    int tma_ok[2];   /* the Q4_0 / Q4_K tma kernel has sm_90 code (ptxVersion >= 90), the device cc >= 9, and
                      * its dynamic shared memory limit is raised to tma_smem */
    int tma_smem;    /* dynamic shared memory a tma block may take [bytes] */
    exc_gemv_ring_cfg ring[EXC_GEMV_RING_CFGS];
    int n_ring;
} exc_gemv_dev;

/** Fills the per-device state for the current device (ex_gpu_open, after cudaSetDevice); never fails: a
 *  kernel that cannot be set up is marked unavailable and the table falls back to the next one. */
void exc_gemv_dev_init(exc_gemv_dev *d, const ex_gpu_props *pr);
/** The handle's GEMV state (gpu.cu). */
exc_gemv_dev *exc_gemv_state(ex_gpu *g);

/* The kernels' sets of shapes (1: the kernel takes this single GEMV) and launchers (one matrix, one
 * activation row; W and x 16-byte aligned, checked by exc_gemv_batched). */
int exc_gemv_ring_fits(exc_gemv_dev *d, int type, int64_t rows, int64_t cols); /* Q4_0, Q8_0, Q6_K */
ex_gpu_status exc_gemv_ring(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                            cudaStream_t s);
int exc_gemv_rows_fits(int type, int64_t rows, int64_t cols); /* Q4_0, Q4_K, Q6_K; cols % 256 == 0 */
/* one_row: the rows1 kernel (Q4_0 only), else rows2 */
ex_gpu_status exc_gemv_rows(ex_gpu *g, int type, int one_row, const void *W, int64_t rows, int64_t cols, const float *x,
                            float *y, cudaStream_t s);
int exc_gemv_tma_fits(const exc_gemv_dev *d, int type, int64_t rows, int64_t cols); /* Q4_0, Q4_K on sm_90 */
ex_gpu_status exc_gemv_tma(ex_gpu *g, int type, const void *W, int64_t rows, int64_t cols, const float *x, float *y,
                           cudaStream_t s);

/* Setup of the ring and tma kernels for the current device (exc_gemv_dev_init). */
void exc_gemv_ring_init(exc_gemv_dev *d);
void exc_gemv_tma_init(exc_gemv_dev *d);

#endif
