/* AMX (TMUL int8) prefill matmul for Q4_K and Q6_K: y (n_tokens, n_out) = W x.
 *
 * Tiles: C (16 weight rows x 16 tokens, int32) += A (16 weight rows x 64 int8 of K) . B (64 of K x 16
 * tokens, stored as 16 rows of 4 K-bytes per token: the "VNNI" layout tdpbusd reads). The weights are A,
 * so a weight row's bytes stay contiguous and no transpose is needed; the activations (B) are regrouped
 * once per call. A K-quant's sub-block scales (per 32 or 16 elements) change inside a 64-element K step,
 * so they are folded into the weight bytes instead of applied per sub-block after the tile product:
 *  - Q4_K (d·sc·q − dmin·m, sc, m 6-bit, q 4-bit): sc = 16·sh + sl, so sc·q = 16·(sh·q) + sl·q with
 *    sh·q <= 45 and sl·q <= 225 (u8), and the mins term Σ m x is a third u8 matrix (m repeated over its
 *    sub-block): 3 tdpbusd per 64 K, int32 sums exact over a super-block (|Σ sc q x| <= 256·63·15·127).
 *  - Q6_K (d·sc·(q − 32), sc s8, q 6-bit): sc = p0 + 8·p1 + 64·p2 with digits p in −3..4 (balanced base
 *    8), so each p·(q − 32) lies in [−128, 124] (s8): 3 tdpbssd per 64 K, C0 + 8·C1 + 64·C2 exact.
 * The super-block's integer sums are then those of dot_q4_K_scalar / dot_q6_K_scalar, and the F32
 * epilogue does their operations in their order (C11, so no contraction into FMA): every output is bit
 * for bit the scalar path's.
 * Work: each 16-row group is unpacked once per call into a per-thread buffer (3 bytes a weight, L2), then
 * every 16-token tile runs over it; OpenMP over row groups. Weights are not repacked at load. */
#include "cpu_amx.h"

#include <stdlib.h>
#include <string.h>

#include "ex/quant_blocks.h"

#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define EX_AMX 1
#endif

#ifdef EX_AMX
int ex_amx_request_perm(void)
{
    /* arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18): Linux >= 5.16; process-wide */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

#define AMX_FN __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,amx-tile,amx-int8")))

enum { P = 3, TILE = 1024 }; /* pieces (A matrices, C tiles) per type; bytes of a 16 x 64 tile */

/* palette 1: tmm0..2 C (16 x 16 int32), tmm3 B (16 x 64), tmm4..6 A (16 x 64) */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

static AMX_FN void tile_config(void)
{
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 7; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}

/* Q4_K row (nsb super-blocks) into the group buffer at row rl: ab[(s·P + p)·TILE + rl·64 + j] holds piece p
   of K-element 64s + j (0: sh·q, 1: sl·q, 2: m); d and dmin per super-block into dq, dm [nsb][16]. */
static AMX_FN void unpack_q4_K(const ex_block_q4_K *w, int64_t nsb, int rl, uint8_t *ab, float *dq, float *dm)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), shr = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    for (int64_t b = 0; b < nsb; b++) {
        dq[16 * b + rl] = _cvtsh_ss(w[b].d);
        dm[16 * b + rl] = _cvtsh_ss(w[b].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            ex_q4k_scale_min(w[b].scales, 2 * c, &sc0, &m0);
            ex_q4k_scale_min(w[b].scales, 2 * c + 1, &sc1, &m1);
            /* bytes 0..31: low nibbles (sub-block 2c), 32..63: high nibbles (sub-block 2c + 1) */
            const __m512i q = _mm512_and_si512(
                _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c))), shr),
                m4);
            /* u8 x small int16 in 16-bit lanes: the low byte's product (<= 225) never carries into the high one */
            const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16(sc0 >> 4), _mm256_set1_epi16(sc1 >> 4), 1);
            const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(sc0 & 15), _mm256_set1_epi16(sc1 & 15), 1);
            const __m512i mm = _mm512_inserti64x4(_mm512_set1_epi8((char)m0), _mm256_set1_epi8((char)m1), 1);
            uint8_t *o = ab + (size_t)(4 * b + c) * P * TILE + 64 * rl;
            _mm512_store_si512(o, _mm512_mullo_epi16(q, sh));
            _mm512_store_si512(o + TILE, _mm512_mullo_epi16(q, sl));
            _mm512_store_si512(o + 2 * TILE, mm);
        }
    }
}

/* signed bytes v times the signed int16 digit of each 16-bit lane (products fit s8) */
static inline AMX_FN __m512i mul_s8(__m512i ev, __m512i od, __m512i dg)
{
    return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, _mm512_mullo_epi16(ev, dg),
                                  _mm512_slli_epi16(_mm512_mullo_epi16(od, dg), 8));
}

/* Q6_K row into the group buffer (pieces p0, p1, p2 of sc·(q − 32), see the top); d into dq */
static AMX_FN void unpack_q6_K(const ex_block_q6_K *w, int64_t nsb, int rl, uint8_t *ab, float *dq)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3), o32 = _mm512_set1_epi8(32);
    const __m256i three = _mm256_set1_epi16(3), seven = _mm256_set1_epi16(7);
    for (int64_t b = 0; b < nsb; b++) {
        dq[16 * b + rl] = _cvtsh_ss(w[b].d);
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[b].scales));
        __m256i dg[3], v = s16;
        for (int p = 0; p < 3; p++) { /* balanced base-8 digits in -3..4 */
            dg[p] = _mm256_sub_epi16(_mm256_and_si256(_mm256_add_epi16(v, three), seven), three);
            v = _mm256_srai_epi16(_mm256_sub_epi16(v, dg[p]), 3);
        }
        for (int h = 0; h < 2; h++) {
            const __m512i L = _mm512_loadu_si512(w[b].ql + 64 * h);
            const __m256i H0 = _mm256_loadu_si256((const __m256i *)(w[b].qh + 32 * h));
            const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(H0), _mm256_srli_epi16(H0, 2), 1);
            __m512i q[2];
            /* elements 128h + 0..63 (sub-blocks 8h + 0..3, one per 128-bit lane), then 128h + 64..127 */
            q[0] = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_slli_epi16(_mm512_and_si512(H, m2), 4));
            q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 4), m2), 4));
            for (int g = 0; g < 2; g++) {
                const __m512i x = _mm512_sub_epi8(q[g], o32);
                const __m512i ev = _mm512_srai_epi16(_mm512_slli_epi16(x, 8), 8), od = _mm512_srai_epi16(x, 8);
                /* int16 lane j of the 64 bytes lies in sub-block 8h + 4g + j / 8 */
                const __m512i idx = _mm512_add_epi16(_mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 3),
                                                     _mm512_set1_epi16((short)(8 * h + 4 * g)));
                uint8_t *o = ab + (size_t)(4 * b + 2 * h + g) * P * TILE + 64 * rl;
                for (int p = 0; p < 3; p++)
                    _mm512_store_si512(o + p * TILE,
                                       mul_s8(ev, od, _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(dg[p]))));
            }
        }
    }
}

/* 16 accumulators (one per weight row, lanes = tokens) to y rows t0.., columns r0.. (only those < nt, nr) */
static AMX_FN void store_tile(const __m512 *acc, float *y, int64_t n_out, int64_t r0, int nr, int nt)
{
    float tmp[16][16] __attribute__((aligned(64)));
    for (int r = 0; r < 16; r++) _mm512_store_ps(tmp[r], acc[r]);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) y[t * n_out + r0 + r] = tmp[r][t];
}

/* One 16-row group against every 16-token tile. q6: Q6_K (else Q4_K). */
static AMX_FN void group_tiles(int q6, const uint8_t *ab, const float *dq, const float *dm, const uint8_t *xb,
                               const float *ad, int64_t nsb, int64_t n_tokens, int64_t n_out, int64_t r0, float *y)
{
    const int64_t nks = 4 * nsb, n_tt = (n_tokens + 15) / 16;
    const int nr = n_out - r0 < 16 ? (int)(n_out - r0) : 16;
    int32_t cb[P][16][16] __attribute__((aligned(64)));
    for (int64_t tt = 0; tt < n_tt; tt++) {
        __m512 acc[16];
        for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nsb; b++) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            for (int c = 0; c < 4; c++) {
                const int64_t s = 4 * b + c;
                const uint8_t *a = ab + (size_t)s * P * TILE;
                _tile_loadd(3, xb + (size_t)(tt * nks + s) * TILE, 64);
                _tile_loadd(4, a, 64);
                _tile_loadd(5, a + TILE, 64);
                _tile_loadd(6, a + 2 * TILE, 64);
                if (q6) {
                    _tile_dpbssd(0, 4, 3);
                    _tile_dpbssd(1, 5, 3);
                    _tile_dpbssd(2, 6, 3);
                } else {
                    _tile_dpbusd(0, 4, 3);
                    _tile_dpbusd(1, 5, 3);
                    _tile_dpbusd(2, 6, 3);
                }
            }
            _tile_stored(0, cb[0], 64);
            _tile_stored(1, cb[1], 64);
            _tile_stored(2, cb[2], 64);
            const __m512 adv = _mm512_load_ps(ad + (size_t)(tt * nsb + b) * 16);
            for (int r = 0; r < 16; r++) {
                const __m512i c0 = _mm512_load_si512(cb[0][r]), c1 = _mm512_load_si512(cb[1][r]);
                const __m512i c2 = _mm512_load_si512(cb[2][r]);
                const __m512 d = _mm512_set1_ps(dq[16 * b + r]);
                __m512 t;
                if (q6) { /* acc += a.d * d * (float)sumi, sumi = C0 + 8 C1 + 64 C2 */
                    const __m512i si = _mm512_add_epi32(_mm512_add_epi32(c0, _mm512_slli_epi32(c1, 3)), _mm512_slli_epi32(c2, 6));
                    t = _mm512_mul_ps(_mm512_mul_ps(adv, d), _mm512_cvtepi32_ps(si));
                } else { /* acc += a.d * (d * (float)sumi - dmin * (float)summ), sumi = 16 C0 + C1, summ = C2 */
                    const __m512i si = _mm512_add_epi32(_mm512_slli_epi32(c0, 4), c1);
                    const __m512 dmn = _mm512_set1_ps(dm[16 * b + r]);
                    t = _mm512_mul_ps(adv, _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(si)),
                                                         _mm512_mul_ps(dmn, _mm512_cvtepi32_ps(c2))));
                }
                acc[r] = _mm512_add_ps(acc[r], t);
            }
        }
        const int64_t t0 = 16 * tt;
        store_tile(acc, y + t0 * n_out, n_out, r0, nr, n_tokens - t0 < 16 ? (int)(n_tokens - t0) : 16);
    }
}

/* Activations of token tile tt into B tiles: xb[(tt·nks + s)·TILE + 64 kk + 4 t + i] = x_t[64 s + 4 kk + i]
   (zeros past n_tokens); ad[(tt·nsb + b)·16 + t] = the token's block scale d. */
static void regroup_acts(const uint8_t *xq, size_t abytes, int64_t n_tokens, int64_t nsb, int64_t tt, uint8_t *xb,
                         float *ad)
{
    const int64_t nks = 4 * nsb;
    uint8_t *o = xb + (size_t)(tt * nks) * TILE;
    memset(o, 0, (size_t)nks * TILE);
    memset(ad + (size_t)tt * nsb * 16, 0, (size_t)nsb * 16 * sizeof(float));
    for (int t = 0; t < 16 && 16 * tt + t < n_tokens; t++) {
        const ex_block_q8_K *a = (const ex_block_q8_K *)(xq + abytes * (size_t)(16 * tt + t));
        for (int64_t b = 0; b < nsb; b++) {
            ad[(size_t)(tt * nsb + b) * 16 + t] = a[b].d;
            for (int c = 0; c < 4; c++)
                for (int kk = 0; kk < 16; kk++)
                    memcpy(o + (size_t)(4 * b + c) * TILE + 64 * kk + 4 * t, a[b].qs + 64 * c + 4 * kk, 4);
        }
    }
}

AMX_FN enum ats_status ex_amx_matmul_kq(const ex_tensor *w, const uint8_t *xq, size_t abytes, int64_t n_tokens,
                                        float *y, int par)
{
    const int q6 = w->type == ATS_Q_Q6_K;
    const int64_t n_in = w->ne[0], n_out = w->ne[1], nsb = n_in / 256, nks = 4 * nsb;
    const int64_t n_tt = (n_tokens + 15) / 16, n_g = (n_out + 15) / 16;
    uint8_t *xb = aligned_alloc(64, (size_t)(n_tt * nks) * TILE);
    float *ad = aligned_alloc(64, (size_t)(n_tt * nsb) * 16 * sizeof(float));
    int bad = !xb || !ad;
    if (!bad) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t tt = 0; tt < n_tt; tt++) regroup_acts(xq, abytes, n_tokens, nsb, tt, xb, ad);
#pragma omp parallel if (par)
        {
            /* per thread: the group's pieces (3 bytes a weight) and its scales */
            uint8_t *ab = aligned_alloc(64, (size_t)nks * P * TILE);
            float *dq = aligned_alloc(64, (size_t)nsb * 16 * sizeof(float) * 2);
            if (!ab || !dq) {
#pragma omp atomic write
                bad = 1;
            } else {
                memset(ab, 0, (size_t)nks * P * TILE);
                memset(dq, 0, (size_t)nsb * 16 * sizeof(float) * 2);
                tile_config();
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t g = 0; g < n_g; g++) {
                if (!ab || !dq) continue;
                const int64_t r0 = 16 * g;
                const int nr = n_out - r0 < 16 ? (int)(n_out - r0) : 16;
                for (int rl = 0; rl < nr; rl++) {
                    const uint8_t *row = (const uint8_t *)w->data + (size_t)(r0 + rl) * w->row_bytes;
                    if (q6) unpack_q6_K((const ex_block_q6_K *)row, nsb, rl, ab, dq);
                    else unpack_q4_K((const ex_block_q4_K *)row, nsb, rl, ab, dq, dq + nsb * 16);
                }
                group_tiles(q6, ab, dq, dq + nsb * 16, xb, ad, nsb, n_tokens, n_out, r0, y);
            }
            if (ab && dq) _tile_release();
            free(ab);
            free(dq);
        }
    }
    free(xb);
    free(ad);
    return bad ? ATS_ENOMEM : ATS_OK;
}
#else
int ex_amx_request_perm(void)
{
    return 0;
}

enum ats_status ex_amx_matmul_kq(const ex_tensor *w, const uint8_t *xq, size_t abytes, int64_t n_tokens, float *y,
                                 int par)
{
    (void)w, (void)xq, (void)abytes, (void)n_tokens, (void)y, (void)par;
    return ATS_EINVAL;
}
#endif
