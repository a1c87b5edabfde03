/* AMX (TMUL int8) prefill matmul for Q4_K and Q6_K: y (n_tokens, n_out) = W x.
 *
 * Tiles: C (16 weight rows x 16 tokens, int32) += A (16 weight rows x 64 int8 of K) . B (64 of K x 16
 * tokens, stored as 16 rows of 4 K-bytes per token: the "VNNI" layout tdpbusd reads). The weights are A,
 * so a weight row's bytes stay contiguous and no transpose is needed; the activations (B) are regrouped
 * once per call. A K-quant's sub-block scales (per 32 or 16 elements) change inside a 64-element K step,
 * so they are folded into the weight bytes instead of applied per sub-block after the tile product:
 *  - Q4_K (d·sc·q − dmin·m, sc, m 6-bit, q 4-bit): sc = 16·sh + sl, so sc·q = 16·(sh·q) + sl·q with
 *    sh·q <= 45 and sl·q <= 225 (u8): 2 tdpbusd per 64 K, int32 sums exact over a super-block (|Σ sc q x|
 *    <= 256·63·15·127); the mins term Σ_k m_k Σ_{j in k} x_j is 4 vpdpwssd per row in the epilogue (the
 *    tokens' sums of 32 against the row's mins), and two token tiles share each weight tile load. A third
 *    u8 matrix of the mins on the tiles (3 products, one token tile at a time) was 1.5x slower (dev VM).
 *  - Q6_K (d·sc·(q − 32), sc s8, q 6-bit): v = sc·(q − 32) in [−3968, 4096] computed in 16 bits, then
 *    v = 64·hi + lo with hi = v >> 6 in [−62, 64] and lo = v & 63 (both s8): 2 tdpbssd per 64 K,
 *    64·C_hi + C_lo exact. (Balanced base-8 digits of sc, 3 products per 64 K, were slower: dev VM, 1
 *    thread, 2048x5120 at 128 tokens, best of 4: 253 against 282 GMAC/s, medians 207 against 264.)
 * The super-block's integer sums are then those of dot_q4_K_scalar / dot_q6_K_scalar, and the F32
 * epilogue does their operations in their order (C11, so no contraction into FMA): every output is bit
 * for bit the scalar path's.
 * Work: OpenMP over 16-row groups; a group runs super-block by super-block, each unpacked once per call
 * (2 bytes a weight, 8 KB, L1) and then multiplied with every 16-token tile, two at a time, while the
 * next super-block is unpacked between the tile products (double buffer); the F32 sums of the group's
 * token tiles stay in a per-thread buffer. Weights are not repacked at load (no memory or load time). */
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

#define AMX_FN __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")))

enum { P = 2, TILE = 1024 }; /* pieces (A matrices) of a type; bytes of a 16 x 64 tile */

/* palette 1, every tile 16 rows x 64 bytes (C: 16 x 16 int32): tmm0..3 C (two token tiles x 2 pieces),
   tmm4..5 A (the pieces), tmm6..7 B (the two token tiles) */
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
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}

/* One super-block of a group's rows, unpacked (P pieces of 4 K-steps, 8 KB: stays in L1) with its scales */
typedef struct {
    uint8_t ab[4 * P * TILE] __attribute__((aligned(64)));
    float dq[16], dm[16];
    uint32_t mp[16][4]; /* Q4_K: row's mins of sub-blocks 2k, 2k + 1 as an int16 pair, k = 0..3 */
} sb_buf;

/* Q4_K: the 6-bit scales and mins of a super-block (ex_q4k_scale_min) with 32-bit masks: sc 0..7, m 0..7 */
static inline void q4k_unpack(const uint8_t *scales, uint8_t out[16])
{
    uint32_t u[3], r[4];
    memcpy(u, scales, 12);
    r[0] = u[0] & 0x3F3F3F3Fu;
    r[1] = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    r[2] = u[1] & 0x3F3F3F3Fu;
    r[3] = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    memcpy(out, r, 16);
}

/* One Q4_K super-block of one row into o at row rl: o->ab[(c·2 + p)·TILE + rl·64 + j] holds piece p of
   element 64c + j (0: sh·q, 1: sl·q); d, dmin into o->dq[rl], o->dm[rl]; the mins as int16 pairs into
   o->mp[rl] (they meet the activations' sums of 32 in the epilogue, not on the tiles). */
static AMX_FN void unpack_q4_K(const ex_block_q4_K *w, int rl, sb_buf *o)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), shr = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    uint8_t sm[16];
    q4k_unpack(w->scales, sm);
    o->dq[rl] = _cvtsh_ss(w->d);
    o->dm[rl] = _cvtsh_ss(w->dmin);
    for (int k = 0; k < 4; k++) o->mp[rl][k] = (uint32_t)sm[8 + 2 * k] | (uint32_t)sm[9 + 2 * k] << 16;
    for (int c = 0; c < 4; c++) {
        const uint8_t sc0 = sm[2 * c], sc1 = sm[2 * c + 1];
        /* bytes 0..31: low nibbles (sub-block 2c), 32..63: high nibbles (sub-block 2c + 1) */
        const __m512i q = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qs + 32 * c))), shr), m4);
        /* u8 x small int16 in 16-bit lanes: the low byte's product (<= 225) never carries into the high one */
        const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16(sc0 >> 4), _mm256_set1_epi16(sc1 >> 4), 1);
        const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(sc0 & 15), _mm256_set1_epi16(sc1 & 15), 1);
        uint8_t *a = o->ab + (size_t)c * 2 * TILE + 64 * rl;
        _mm512_store_si512(a, _mm512_mullo_epi16(q, sh));
        _mm512_store_si512(a + TILE, _mm512_mullo_epi16(q, sl));
    }
}

/* 32 + 32 int16 (each in [-62, 64] or [0, 63]) to 64 bytes in order (vpacksswb works per 128-bit lane) */
static inline AMX_FN __m512i pack_bytes(__m512i a, __m512i b)
{
    return _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), _mm512_packs_epi16(a, b));
}

/* One Q6_K super-block of one row into o at row rl: v = sc·(q − 32) (|v| <= 4096) as 64·hi + lo with
   hi = v >> 6 in [-62, 64] (piece 0) and lo = v & 63 (piece 1), s8 both; d into o->dq[rl]. */
static AMX_FN void unpack_q6_K(const ex_block_q6_K *w, int rl, sb_buf *o)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3), o32 = _mm512_set1_epi8(32);
    const __m512i m63 = _mm512_set1_epi16(63);
    /* int16 lane j of 32 elements lies in the sub-block j / 16 of the two they cover */
    const __m512i lane_sb = _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
                                                               15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 4);
    o->dq[rl] = _cvtsh_ss(w->d);
    const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales)));
    for (int h = 0; h < 2; h++) {
        const __m512i L = _mm512_loadu_si512(w->ql + 64 * h);
        const __m256i H0 = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
        const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(H0), _mm256_srli_epi16(H0, 2), 1);
        __m512i q[2];
        /* elements 128h + 0..63 (sub-blocks 8h + 0..3, one per 128-bit lane), then 128h + 64..127 */
        q[0] = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_slli_epi16(_mm512_and_si512(H, m2), 4));
        q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                               _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 4), m2), 4));
        for (int g = 0; g < 2; g++) {
            const __m512i x = _mm512_sub_epi8(q[g], o32);
            const short sb0 = (short)(8 * h + 4 * g);
            const __m512i vl = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_castsi512_si256(x)),
                                                  _mm512_permutexvar_epi16(_mm512_add_epi16(lane_sb, _mm512_set1_epi16(sb0)), s16));
            const __m512i vh = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(x, 1)),
                                                  _mm512_permutexvar_epi16(_mm512_add_epi16(lane_sb, _mm512_set1_epi16((short)(sb0 + 2))), s16));
            uint8_t *a = o->ab + (size_t)(2 * h + g) * 2 * TILE + 64 * rl;
            _mm512_store_si512(a, pack_bytes(_mm512_srai_epi16(vl, 6), _mm512_srai_epi16(vh, 6)));
            _mm512_store_si512(a + TILE, pack_bytes(_mm512_and_si512(vl, m63), _mm512_and_si512(vh, m63)));
        }
    }
}

/* Rows [rl0, rl1) of super-block b of the group at w0 (rows row_bytes apart) into o; prefetches each row's
   next super-block (or, at the last, the next group's first: 16 rows are 16 streams 144 / 210 bytes a
   step apart, which the hardware prefetchers miss). */
static AMX_FN void unpack_rows(int q6, const uint8_t *w0, size_t row_bytes, int64_t b, int64_t nsb, int more_rows,
                               int rl0, int rl1, sb_buf *o)
{
    const size_t bsz = q6 ? sizeof(ex_block_q6_K) : sizeof(ex_block_q4_K);
    for (int rl = rl0; rl < rl1; rl++) {
        const uint8_t *row = w0 + (size_t)rl * row_bytes;
        if (q6) unpack_q6_K((const ex_block_q6_K *)row + b, rl, o);
        else unpack_q4_K((const ex_block_q4_K *)row + b, rl, o);
        const uint8_t *nx = b + 1 < nsb ? row + (size_t)(b + 1) * bsz : row + (size_t)16 * row_bytes;
        if (b + 1 < nsb || more_rows)
            for (size_t l = 0; l < bsz; l += 64) _mm_prefetch((const char *)nx + l, _MM_HINT_T0);
    }
}

/* What superblock_tiles unpacks between its tile products: rows of super-block b + 1 (nr rows at w0) */
typedef struct {
    const uint8_t *w0;
    size_t row_bytes;
    int64_t b, nsb;
    int nr, more_rows;
    sb_buf *o;
} next_sb;

/* The slice of the next super-block's rows that token tile tt (of n_tt) unpacks, if any */
static inline AMX_FN void unpack_slice(int q6, const next_sb *nx, int64_t tt, int64_t n_tt)
{
    if (nx->o)
        unpack_rows(q6, nx->w0, nx->row_bytes, nx->b, nx->nsb, nx->more_rows, (int)(tt * nx->nr / n_tt),
                    (int)((tt + 1) * nx->nr / n_tt), nx->o);
}

/* Q4_K epilogue of one token tile: acc += a.d * (d * (float)sumi - dmin * (float)summ) per row, sumi =
   16 C_hi + C_lo from the tiles, summ = Σ_k m_k bs32_k (4 vpdpwssd of the row's min pairs against the
   tokens' sums of 32, bsp: 4 x 16 int16 pairs) */
static inline AMX_FN void q4k_epilogue(const sb_buf *cur, int32_t cb[2][16][16], __m512 adv, const int32_t *bsp,
                                       float *acc)
{
    const __m512i b0 = _mm512_load_si512(bsp), b1 = _mm512_load_si512(bsp + 16);
    const __m512i b2 = _mm512_load_si512(bsp + 32), b3 = _mm512_load_si512(bsp + 48);
    for (int r = 0; r < 16; r++) {
        const __m512i si = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cb[0][r]), 4), _mm512_load_si512(cb[1][r]));
        __m512i sm = _mm512_dpwssd_epi32(_mm512_setzero_si512(), b0, _mm512_set1_epi32((int)cur->mp[r][0]));
        sm = _mm512_dpwssd_epi32(sm, b1, _mm512_set1_epi32((int)cur->mp[r][1]));
        sm = _mm512_dpwssd_epi32(sm, b2, _mm512_set1_epi32((int)cur->mp[r][2]));
        sm = _mm512_dpwssd_epi32(sm, b3, _mm512_set1_epi32((int)cur->mp[r][3]));
        const __m512 t = _mm512_mul_ps(adv, _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(cur->dq[r]), _mm512_cvtepi32_ps(si)),
                                                          _mm512_mul_ps(_mm512_set1_ps(cur->dm[r]), _mm512_cvtepi32_ps(sm))));
        _mm512_store_ps(acc + 16 * r, _mm512_add_ps(_mm512_load_ps(acc + 16 * r), t));
    }
}

/* Q6_K epilogue of one token tile: acc += a.d * d * (float)sumi per row, sumi = 64 C_hi + C_lo */
static inline AMX_FN void q6k_epilogue(const sb_buf *cur, int32_t cb[2][16][16], __m512 adv, float *acc)
{
    for (int r = 0; r < 16; r++) {
        const __m512i si = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cb[0][r]), 6), _mm512_load_si512(cb[1][r]));
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(adv, _mm512_set1_ps(cur->dq[r])), _mm512_cvtepi32_ps(si));
        _mm512_store_ps(acc + 16 * r, _mm512_add_ps(_mm512_load_ps(acc + 16 * r), t));
    }
}

/* One super-block of a 16-row group (unpacked in cur, 2 pieces) against every 16-token tile, two token
   tiles at a time (C: tmm0..3, A: tmm4..5, B: tmm6..7), so each weight tile load serves 32 tokens: 4
   products and 4 tile loads per 64 K and token-tile pair. The F32 partial sums of the group live in
   accb[tt][row][token] between super-blocks. While the products run on the TMUL unit, a slice of the next
   super-block's rows is unpacked (nx): the vector work overlaps the tile work. q6: Q6_K (tdpbssd), else
   Q4_K (tdpbusd). */
static AMX_FN void superblock_tiles(int q6, const sb_buf *cur, const next_sb *nx, const uint8_t *xb, const float *ad,
                                    const int32_t *bsp, int64_t b, int64_t nsb, int64_t n_tt, float *accb)
{
    const int64_t nks = 4 * nsb;
    int32_t cb[2][2][16][16] __attribute__((aligned(64)));
    for (int64_t tt = 0; tt < n_tt; tt += 2) {
        const int two = tt + 1 < n_tt;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int c = 0; c < 4; c++) {
            const uint8_t *a = cur->ab + (size_t)c * 2 * TILE;
            _tile_loadd(4, a, 64);
            _tile_loadd(5, a + TILE, 64);
            _tile_loadd(6, xb + (size_t)(tt * nks + 4 * b + c) * TILE, 64);
            if (two) _tile_loadd(7, xb + (size_t)((tt + 1) * nks + 4 * b + c) * TILE, 64);
            if (q6) {
                _tile_dpbssd(0, 4, 6);
                _tile_dpbssd(1, 5, 6);
                if (two) {
                    _tile_dpbssd(2, 4, 7);
                    _tile_dpbssd(3, 5, 7);
                }
            } else {
                _tile_dpbusd(0, 4, 6);
                _tile_dpbusd(1, 5, 6);
                if (two) {
                    _tile_dpbusd(2, 4, 7);
                    _tile_dpbusd(3, 5, 7);
                }
            }
        }
        unpack_slice(q6, nx, tt / 2, (n_tt + 1) / 2);
        for (int u = 0; u <= two; u++) {
            if (u == 0) {
                _tile_stored(0, cb[0][0], 64);
                _tile_stored(1, cb[0][1], 64);
            } else {
                _tile_stored(2, cb[1][0], 64);
                _tile_stored(3, cb[1][1], 64);
            }
            const int64_t t = tt + u;
            const __m512 adv = _mm512_load_ps(ad + (size_t)(t * nsb + b) * 16);
            if (q6) q6k_epilogue(cur, cb[u], adv, accb + (size_t)t * 256);
            else q4k_epilogue(cur, cb[u], adv, bsp + (size_t)(t * nsb + b) * 64, accb + (size_t)t * 256);
        }
    }
}

/* Activations of token tile tt into B tiles: xb[(tt·nks + s)·TILE + 64 kk + 4 t + i] = x_t[64 s + 4 kk + i]
   (zeros past n_tokens); ad[(tt·nsb + b)·16 + t] = the token's block scale d; bsp[(tt·nsb + b)·64 + 16 k + t] =
   its sums of 32 of sub-blocks 2k and 2k + 1 as an int16 pair (Q4_K's mins). */
static void regroup_acts(const uint8_t *xq, size_t abytes, int64_t n_tokens, int64_t nsb, int64_t tt, uint8_t *xb,
                         float *ad, int32_t *bsp)
{
    const int64_t nks = 4 * nsb;
    uint8_t *o = xb + (size_t)(tt * nks) * TILE;
    memset(o, 0, (size_t)nks * TILE);
    memset(ad + (size_t)tt * nsb * 16, 0, (size_t)nsb * 16 * sizeof(float));
    memset(bsp + (size_t)tt * nsb * 64, 0, (size_t)nsb * 64 * sizeof(int32_t));
    for (int t = 0; t < 16 && 16 * tt + t < n_tokens; t++) {
        const ex_block_q8_K *a = (const ex_block_q8_K *)(xq + abytes * (size_t)(16 * tt + t));
        for (int64_t b = 0; b < nsb; b++) {
            ad[(size_t)(tt * nsb + b) * 16 + t] = a[b].d;
            for (int k = 0; k < 4; k++) { /* sums of 32 of sub-blocks 2k, 2k + 1 (|s| <= 4064) as an int16 pair */
                const int s0 = a[b].bsums[4 * k] + a[b].bsums[4 * k + 1], s1 = a[b].bsums[4 * k + 2] + a[b].bsums[4 * k + 3];
                bsp[(size_t)(tt * nsb + b) * 64 + 16 * k + t] = (int32_t)((uint32_t)(uint16_t)s0 | (uint32_t)(uint16_t)s1 << 16);
            }
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
    int32_t *bsp = aligned_alloc(64, (size_t)(n_tt * nsb) * 64 * sizeof(int32_t));
    int bad = !xb || !ad || !bsp;
    if (!bad) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t tt = 0; tt < n_tt; tt++) regroup_acts(xq, abytes, n_tokens, nsb, tt, xb, ad, bsp);
#pragma omp parallel if (par)
        {
            /* per thread: two super-blocks of the group (the one in the tiles, the next being unpacked)
               and the group's F32 sums for every token tile */
            sb_buf *sbb = aligned_alloc(64, 2 * sizeof(sb_buf));
            float *accb = aligned_alloc(64, (size_t)n_tt * 256 * sizeof(float));
            if (!sbb || !accb) {
#pragma omp atomic write
                bad = 1;
            } else {
                memset(sbb, 0, 2 * sizeof(sb_buf));
                tile_config();
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t g = 0; g < n_g; g++) {
                if (!sbb || !accb) continue;
                const int64_t r0 = 16 * g;
                const int nr = n_out - r0 < 16 ? (int)(n_out - r0) : 16;
                const uint8_t *w0 = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
                const int more = r0 + 16 < n_out;
                memset(accb, 0, (size_t)n_tt * 256 * sizeof(float));
                unpack_rows(q6, w0, w->row_bytes, 0, nsb, more, 0, nr, &sbb[0]);
                for (int64_t b = 0; b < nsb; b++) {
                    const next_sb nx = {w0, w->row_bytes, b + 1, nsb, nr, more, b + 1 < nsb ? &sbb[(b + 1) & 1] : NULL};
                    superblock_tiles(q6, &sbb[b & 1], &nx, xb, ad, bsp, b, nsb, n_tt, accb);
                }
                for (int64_t tt = 0; tt < n_tt; tt++)
                    for (int64_t t = 16 * tt; t < n_tokens && t < 16 * tt + 16; t++)
                        for (int r = 0; r < nr; r++) y[t * n_out + r0 + r] = accb[tt * 256 + 16 * r + (t - 16 * tt)];
            }
            if (sbb && accb) _tile_release();
            free(sbb);
            free(accb);
        }
    }
    free(xb);
    free(ad);
    free(bsp);
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
