/* CPU matmul y = W x: activations quantized to 8 bits (ex_block_q8_1 per 32, ex_block_q8_K per 256)
 * and integer dot products with the weight blocks, as llama.cpp does; OpenMP over output rows.
 * Three paths per type, chosen at run time: scalar, AVX2, AVX-512 VNNI (MXFP4, and Q4_0 / Q8_0 decode:
 * 256-bit vpdpbusd; Q4_0 / Q8_0 prefill: 512-bit vpdpbusd on two tokens at once, 4 or 8 tokens per
 * weight row; Q4_K and Q6_K: 512-bit vpdpbusd + vpackssdw + vpdpwssd, 8 tokens per weight row in prefill). */
#include "ex/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ex/quant.h"
#include "ex/quant_blocks.h"
#include "cpu_amx.h"
#include "cpu_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define EX_X86 1
#endif

/* cpuid: the SIMD features this CPU has (EX_CPU_*) */
static unsigned detect_features(void)
{
    unsigned f = 0;
#ifdef EX_X86
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)); /* F16C: CPUID.1:ECX[29] */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) f |= EX_CPU_AVX2;
    if ((f & EX_CPU_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        f |= EX_CPU_AVX512;
    if ((f & EX_CPU_AVX512) && __builtin_cpu_supports("avx512vnni")) f |= EX_CPU_AVX512VNNI;
    /* AMX-TILE CPUID.(7,0):EDX[24], AMX-INT8 EDX[25]; XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA) set by the
       OS; then Linux's per-process permission for the tile data (ex_amx_request_perm) */
    if ((f & EX_CPU_AVX512VNNI) && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (3u << 24)) == (3u << 24)) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        if ((lo & (3u << 17)) == (3u << 17) && ex_amx_request_perm()) f |= EX_CPU_AMX;
    }
#endif
    return f;
}

unsigned ex_cpu_features(void)
{
    /* cpuid once: under a hypervisor every cpuid traps (~9 us for this set on the dev VM), and the ops
     * ask once per call (matmul, kv_store, attention). A memo of a hardware constant, not state: any
     * thread that finds it empty stores the same value. Bit 31 marks it filled. */
    static _Atomic unsigned hw;
    unsigned f = atomic_load_explicit(&hw, memory_order_relaxed);
    if (!f) {
        f = detect_features() | 0x80000000u;
        atomic_store_explicit(&hw, f, memory_order_relaxed);
    }
    f &= ~0x80000000u;
    const char *env = getenv("ATS_CPU_FEATURES");
    if (env && *env) f &= (unsigned)strtoul(env, NULL, 0);
    return f;
}

/* ---- activation quantization ---------------------------------------------------------------- */

/* max |x| so far with x: a NaN sticks (fmaxf skipped it, so a NaN activation was quantized as 0 and
 * the matmul's output came out finite: NaN weights or activations ran silently). A block with a NaN
 * gets d = NaN (id 0, codes 0), so its dot products are NaN, as the CUDA kernels' (v4: "a non-finite
 * value makes the block's d NaN") and ggml's quantize_row_q8_1 (MAX keeps a NaN); an Inf gives d = Inf,
 * codes 0 and d x 0 = NaN the same way. */
static inline float amax_step(float amax, float x)
{
    const float a = fabsf(x);
    return (a > amax || a != a) && amax == amax ? a : amax;
}

static void quant_q8_1(const float *x, ex_block_q8_1 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = amax_step(amax, x[j]);
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int q = (int)lrintf(x[j] * id);
            b[i].qs[j] = (int8_t)q;
            sum += q;
        }
        b[i].d = d;
        b[i].s = d * (float)sum;
    }
}

/* The Q4_0 / Q8_0 AVX-512 VNNI prefill kernels read a group of 8 tokens (8g .. 8g + 7) at once: the
 * tokens' ex_block_q8_1 values (copied, so every value equals the decode call's) regrouped per 32-block
 * i into Q8G_BLOCK_BYTES at 64-byte boundaries: 4 token pairs of 64 bytes (pair p: token 2p's 32 codes,
 * then token 2p + 1's; Q8_0: x + 128 as u8, Q4_0: x as s8), then the 8 tokens' d, then their s. Tokens
 * past n_tokens are zeros. Bytes of one group: nb * Q8G_BLOCK_BYTES. */
enum { Q8G_BLOCK_BYTES = 4 * 64 + 2 * 8 * 4 };

#ifdef EX_X86
static void q8_group(const ex_block_q8_1 *a, size_t astride, int n_tok, int64_t nb, int u8, uint8_t *out)
{
    memset(out, 0, (size_t)nb * Q8G_BLOCK_BYTES);
    for (int j = 0; j < n_tok; j++) {
        const ex_block_q8_1 *aj = (const ex_block_q8_1 *)((const uint8_t *)a + (size_t)j * astride);
        for (int64_t i = 0; i < nb; i++) {
            uint8_t *o = out + (size_t)i * Q8G_BLOCK_BYTES;
            for (int k = 0; k < 32; k++) o[32 * j + k] = (uint8_t)(aj[i].qs[k] + (u8 ? 128 : 0));
            memcpy(o + 256 + 4 * j, &aj[i].d, sizeof(float));
            memcpy(o + 288 + 4 * j, &aj[i].s, sizeof(float));
        }
    }
}
#endif

static void quant_q8_K(const float *x, ex_block_q8_K *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float amax = 0;
        for (int j = 0; j < 256; j++) amax = amax_step(amax, x[j]);
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < 256; j++) b[i].qs[j] = (int8_t)lrintf(x[j] * id);
        for (int s = 0; s < 16; s++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += b[i].qs[16 * s + j];
            b[i].bsums[s] = (int16_t)sum;
        }
        b[i].d = d;
    }
}

/* ---- scalar dot products ------------------------------------------------------------------ */

typedef float (*vec_dot_fn)(const void *w, const void *a, int64_t nb);

static float dot_q4_0_scalar(const void *wv, const void *av, int64_t nb)
{
    const ex_block_q4_0 *w = wv;
    const ex_block_q8_1 *a = av;
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += (w[i].qs[j] & 0xF) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
        acc += ex_fp16_to_f32(w[i].d) * (a[i].d * (float)s - 8.0f * a[i].s);
    }
    return acc;
}

static float dot_q8_0_scalar(const void *wv, const void *av, int64_t nb)
{
    const ex_block_q8_0 *w = wv;
    const ex_block_q8_1 *a = av;
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += w[i].qs[j] * a[i].qs[j];
        acc += ex_fp16_to_f32(w[i].d) * a[i].d * (float)s;
    }
    return acc;
}

static const int8_t E2M1X2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float dot_mxfp4_scalar(const void *wv, const void *av, int64_t nb)
{
    const ex_block_mxfp4 *w = wv;
    const ex_block_q8_1 *a = av;
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += E2M1X2[w[i].qs[j] & 0xF] * a[i].qs[j] + E2M1X2[w[i].qs[j] >> 4] * a[i].qs[j + 16];
        acc += 0.5f * ex_e8m0_to_f32(w[i].e) * a[i].d * (float)s;
    }
    return acc;
}

static float dot_q4_K_scalar(const void *wv, const void *av, int64_t nb)
{
    const ex_block_q4_K *w = wv;
    const ex_block_q8_K *a = av;
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0, summ = 0;
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            ex_q4k_scale_min(w[i].scales, 2 * c, &sc0, &m0);
            ex_q4k_scale_min(w[i].scales, 2 * c + 1, &sc1, &m1);
            const uint8_t *q = w[i].qs + 32 * c;
            const int8_t *x = a[i].qs + 64 * c;
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += (q[l] & 0xF) * x[l];
                s1 += (q[l] >> 4) * x[l + 32];
            }
            sumi += sc0 * s0 + sc1 * s1;
            summ += m0 * (a[i].bsums[4 * c] + a[i].bsums[4 * c + 1]) +
                    m1 * (a[i].bsums[4 * c + 2] + a[i].bsums[4 * c + 3]);
        }
        acc += a[i].d * (ex_fp16_to_f32(w[i].d) * (float)sumi - ex_fp16_to_f32(w[i].dmin) * (float)summ);
    }
    return acc;
}

static float dot_q6_K_scalar(const void *wv, const void *av, int64_t nb)
{
    const ex_block_q6_K *w = wv;
    const ex_block_q8_K *a = av;
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = w[i].ql + 64 * h, *H = w[i].qh + 32 * h;
            const int8_t *S = w[i].scales + 8 * h, *x = a[i].qs + 128 * h;
            int s[8] = {0};
            for (int l = 0; l < 32; l++) {
                int g = l / 16;
                s[g + 0] += ((L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)) * x[l];
                s[g + 2] += ((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) * x[l + 32];
                s[g + 4] += ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) * x[l + 64];
                s[g + 6] += ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) * x[l + 96];
            }
            for (int k = 0; k < 8; k++) sumi += S[k] * (s[k] - 32 * a[i].bsums[8 * h + k]);
        }
        acc += a[i].d * ex_fp16_to_f32(w[i].d) * (float)sumi;
    }
    return acc;
}

/* ---- AVX2 / AVX-512 VNNI ------------------------------------------------------------------ */
#ifdef EX_X86
#define AVX2_FN __attribute__((target("avx2,fma,f16c")))
#define VNNI_FN __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* fp16 → float with the F16C instruction (every AVX2 CPU has it) */
#define H2F(h) _cvtsh_ss(h)

static inline AVX2_FN float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline AVX2_FN __m256i load_q4(const uint8_t *qs)
{
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* u8 x s8 → i32 x8, by maddubs (AVX2) */
static inline AVX2_FN __m256i dot_us_avx2(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

static inline VNNI_FN __m256i dot_us_vnni(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

/* The activation quantizers with 8 lanes (quant_q8_1_avx2, quant_q8_K_avx2), bit for bit the scalar
 * ones: max is exact in any order, the products and the divisions are the same F32 operations,
 * vcvtps2dq rounds as lrintf (MXCSR, nearest-even by default) and its out-of-range 0x80000000 (NaN,
 * from an Inf input) becomes 0 as (int)lrintf's does; the integer sums are exact. A decode call
 * quantizes its one token serially: 17408 floats took ~90 us on the dev VM with the scalar loop
 * (lrintf is a libm call), ~7 us with these (a 16-thread ffn_down GEMV: ~840 us on the H200 host). */

/* 32 floats (4 x 8) times id to int8 at out (round as lrintf; 0x80000000 -> 0); returns the int32 lanes */
static inline AVX2_FN void quant32_avx2(const float *x, __m256 id, int8_t *out, __m256i q[4])
{
    const __m256i ooo = _mm256_set1_epi32((int)0x80000000u), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int k = 0; k < 4; k++) {
        q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id));
        q[k] = _mm256_andnot_si256(_mm256_cmpeq_epi32(q[k], ooo), q[k]);
    }
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256((__m256i *)out, _mm256_permutevar8x32_epi32(p, perm));
}

/* max |x| over n floats (n a multiple of 8); NaN when any is NaN (amax_step) */
static inline AVX2_FN float amax_avx2(const float *x, int n)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int k = 0; k < n; k += 8) {
        const __m256 v = _mm256_loadu_ps(x + k);
        m = _mm256_max_ps(_mm256_and_ps(v, absmask), m);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan)) return NAN;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static AVX2_FN void quant_q8_1_avx2(const float *x, ex_block_q8_1 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = amax_avx2(x, 32);
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        __m256i q[4];
        quant32_avx2(x, _mm256_set1_ps(id), b[i].qs, q);
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        b[i].d = d;
        b[i].s = d * (float)_mm_cvtsi128_si32(s4);
    }
}

/* quant_q8_K the same way (bsums: exact integer sums of 16) */
static AVX2_FN void quant_q8_K_avx2(const float *x, ex_block_q8_K *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float amax = amax_avx2(x, 256);
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int c = 0; c < 8; c++) {
            __m256i q[4];
            quant32_avx2(x + 32 * c, _mm256_set1_ps(id), b[i].qs + 32 * c, q);
            __m256i u = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            u = _mm256_hadd_epi32(u, u);
            __m128i v = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
            b[i].bsums[2 * c] = (int16_t)_mm_cvtsi128_si32(v);
            b[i].bsums[2 * c + 1] = (int16_t)_mm_extract_epi32(v, 1);
        }
        b[i].d = d;
    }
}

#define DEF_Q4_0(NAME, ATTR, DOT)                                                                 \
    static ATTR float NAME(const void *wv, const void *av, int64_t nb)                            \
    {                                                                                             \
        const ex_block_q4_0 *w = wv;                                                              \
        const ex_block_q8_1 *a = av;                                                              \
        __m256 acc = _mm256_setzero_ps();                                                         \
        float corr = 0;                                                                           \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            float dw = H2F(w[i].d);                                                    \
            __m256i q = load_q4(w[i].qs);                                                         \
            __m256i x = _mm256_loadu_si256((const __m256i *)a[i].qs);                             \
            __m256 p = _mm256_cvtepi32_ps(DOT(q, x));                                             \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[i].d), p, acc);                           \
            corr += dw * a[i].s;                                                                  \
        }                                                                                         \
        return hsum_ps(acc) - 8.0f * corr;                                                        \
    }

#define DEF_Q8_0(NAME, ATTR, DOT)                                                                 \
    static ATTR float NAME(const void *wv, const void *av, int64_t nb)                            \
    {                                                                                             \
        const ex_block_q8_0 *w = wv;                                                              \
        const ex_block_q8_1 *a = av;                                                              \
        __m256 acc = _mm256_setzero_ps();                                                         \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            __m256i q = _mm256_loadu_si256((const __m256i *)w[i].qs);                             \
            __m256i x = _mm256_loadu_si256((const __m256i *)a[i].qs);                             \
            __m256 p = _mm256_cvtepi32_ps(DOT(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q)));   \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(w[i].d) * a[i].d), p, acc);       \
        }                                                                                         \
        return hsum_ps(acc);                                                                      \
    }

/* Q4_K: the 12 packed scale bytes are unpacked with 32-bit masks (sc 0..3 | sc 4..7 | m 0..3 | m 4..7,
 * see ex_q4k_scale_min); int16 pair sums (maddubs) weighted by the sub-block scales with madd. */
static inline void q4k_unpack(const uint8_t *scales, uint8_t out[16])
{
    uint32_t u[3], r[4];
    memcpy(u, scales, 12);
    r[0] = u[0] & 0x3F3F3F3Fu;                                            /* sc[0..3] */
    r[1] = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);     /* sc[4..7] */
    r[2] = u[1] & 0x3F3F3F3Fu;                                            /* m[0..3] */
    r[3] = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4); /* m[4..7] */
    memcpy(out, r, 16);
}

#define DEF_Q4_K(NAME, ATTR)                                                                      \
    static ATTR float NAME(const void *wv, const void *av, int64_t nb)                            \
    {                                                                                             \
        const ex_block_q4_K *w = wv;                                                              \
        const ex_block_q8_K *a = av;                                                              \
        __m256 acc = _mm256_setzero_ps();                                                         \
        float accm = 0;                                                                           \
        const __m256i m4 = _mm256_set1_epi8(0x0F);                                                \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            uint8_t sm[16];                                                                       \
            q4k_unpack(w[i].scales, sm);                                                          \
            /* Σ_k m[k] * (bsums[2k] + bsums[2k+1]) */                                            \
            __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[i].bsums),              \
                                        _mm_loadu_si128((const __m128i *)(a[i].bsums + 8)));      \
            __m128i mm = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(sm + 8)));          \
            __m128i pm = _mm_madd_epi16(bs, mm);                                                  \
            pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, 0x4E));                                  \
            pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, 0xB1));                                  \
            int summ = _mm_cvtsi128_si32(pm);                                                     \
            __m256i sumi = _mm256_setzero_si256();                                                \
            for (int c = 0; c < 4; c++) {                                                         \
                __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * c));              \
                __m256i lo = _mm256_and_si256(q, m4);                                             \
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);                       \
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c));             \
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c + 32));        \
                __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_set1_epi16(sm[2 * c])); \
                __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), _mm256_set1_epi16(sm[2 * c + 1])); \
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));                          \
            }                                                                                     \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * H2F(w[i].d)),                           \
                                  _mm256_cvtepi32_ps(sumi), acc);                                 \
            accm += a[i].d * H2F(w[i].dmin) * (float)summ;                                        \
        }                                                                                         \
        return hsum_ps(acc) - accm;                                                               \
    }

#define DEF_Q6_K(NAME, ATTR)                                                                      \
    static ATTR float NAME(const void *wv, const void *av, int64_t nb)                            \
    {                                                                                             \
        const ex_block_q6_K *w = wv;                                                              \
        const ex_block_q8_K *a = av;                                                              \
        __m256 acc = _mm256_setzero_ps();                                                         \
        const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);                      \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            __m256i sumi = _mm256_setzero_si256();                                                \
            int corr = 0;                                                                         \
            for (int k = 0; k < 16; k++) corr += w[i].scales[k] * a[i].bsums[k];                  \
            for (int h = 0; h < 2; h++) {                                                         \
                const int8_t *S = w[i].scales + 8 * h;                                            \
                const int8_t *x = a[i].qs + 128 * h;                                              \
                __m256i L0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));             \
                __m256i L1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));        \
                __m256i H = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));              \
                __m256i q[4];                                                                     \
                q[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_slli_epi16(_mm256_and_si256(H, m2), 4)); \
                q[1] = _mm256_or_si256(_mm256_and_si256(L1, m4),                                  \
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m2), 4)); \
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4),            \
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m2), 4)); \
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),            \
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m2), 4)); \
                for (int g = 0; g < 4; g++) {                                                     \
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(x + 32 * g));               \
                    __m256i scv = _mm256_set_m128i(_mm_set1_epi16(S[2 * g + 1]), _mm_set1_epi16(S[2 * g])); \
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], xv), scv)); \
                }                                                                                 \
            }                                                                                     \
            float dd = a[i].d * H2F(w[i].d);                                           \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc);             \
            acc = _mm256_add_ps(acc, _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, -32.0f * dd * (float)corr)); \
        }                                                                                         \
        return hsum_ps(acc);                                                                      \
    }

/* ---- decode: 4 weight rows per call (one token) ------------------------------------------------
 * A one-row dot is bound by its loop-carried FMA chain (one 4-cycle fmadd a block); four rows give four
 * independent chains and share the activation loads. Each row takes exactly the operations of its
 * one-row kernel in the same order (the same integer dot a block, the same F32 products, the same
 * lane-wise FMA sequence, the same horizontal sum), so a row's result is bit for bit the one-row
 * kernel's, and so the prefill (X4) kernels' too: test_exec_ops and test_exec_decode check this. */
typedef void (*vec_dotr4_fn)(const void *w, size_t wstride, const void *a, int64_t nb, const void *next, float out[4]);

/* Four rows are four streams at wstride apart, several in one 4 KiB page when rows are short (ffn_up:
 * 2880 bytes), where the hardware stream prefetchers lose them: on the dev VM (Zen 4, 1 thread) the
 * 4-row kernel read ffn_up at 5-10 GB/s against the one-row kernel's 15. So each call prefetches the
 * next call's rows (`next`, 4 * wstride contiguous bytes, or NULL) into L2 as one linear stream, two
 * lines a block: 15-16 GB/s on ffn_up and ffn_down (one-row kernel: 15 and 10). */
static inline void prefetch_next(const void *next, size_t bytes, int64_t i)
{
    if (next && 128 * (size_t)i < bytes) {
        _mm_prefetch((const char *)next + 128 * i, _MM_HINT_T1);
        _mm_prefetch((const char *)next + 128 * i + 64, _MM_HINT_T1);
    }
}

#define DEF_Q4_0_R4(NAME, ATTR, DOT)                                                              \
    static ATTR void NAME(const void *wv, size_t ws, const void *av, int64_t nb, const void *next, float out[4]) \
    {                                                                                             \
        const ex_block_q4_0 *w[4];                                                                \
        for (int r = 0; r < 4; r++) w[r] = (const ex_block_q4_0 *)((const uint8_t *)wv + r * ws); \
        const ex_block_q8_1 *a = av;                                                              \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        float corr[4] = {0, 0, 0, 0};                                                             \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            __m256i x = _mm256_loadu_si256((const __m256i *)a[i].qs);                             \
            prefetch_next(next, 4 * ws, i);                                                       \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++) {                                                         \
                float dw = H2F(w[r][i].d);                                                        \
                __m256 p = _mm256_cvtepi32_ps(DOT(load_q4(w[r][i].qs), x));                       \
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[i].d), p, acc[r]);                 \
                corr[r] += dw * a[i].s;                                                           \
            }                                                                                     \
        }                                                                                         \
        for (int r = 0; r < 4; r++) out[r] = hsum_ps(acc[r]) - 8.0f * corr[r];                    \
    }

#define DEF_MXFP4_R4(NAME, ATTR, DOT)                                                             \
    static ATTR void NAME(const void *wv, size_t ws, const void *av, int64_t nb, const void *next, float out[4]) \
    {                                                                                             \
        const ex_block_mxfp4 *w[4];                                                               \
        for (int r = 0; r < 4; r++) w[r] = (const ex_block_mxfp4 *)((const uint8_t *)wv + r * ws); \
        const ex_block_q8_1 *a = av;                                                              \
        const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)E2M1X2)); \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            __m256i x = _mm256_loadu_si256((const __m256i *)a[i].qs);                             \
            prefetch_next(next, 4 * ws, i);                                                       \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++) {                                                         \
                __m256i v = _mm256_shuffle_epi8(tab, load_q4(w[r][i].qs));                        \
                __m256 p = _mm256_cvtepi32_ps(DOT(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v))); \
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(0.5f * ex_e8m0_to_f32(w[r][i].e) * a[i].d), p, acc[r]); \
            }                                                                                     \
        }                                                                                         \
        for (int r = 0; r < 4; r++) out[r] = hsum_ps(acc[r]);                                     \
    }

/* AVX-512 VNNI: two rows a zmm (rows 0|1, 2|3; a row's 8 lanes in one 256-bit half), so one
 * vpdpbusd, cvt and fmadd serve two rows: each 128-bit lane holds a row's 16 nibble bytes (broadcast
 * loads), shifted by 0 | 4 per lane (vpsrlvw) to the low | high nibbles that meet the block's
 * activations broadcast to both halves. Each half's operations are the 256-bit kernel's, lane for
 * lane: the four fp16 scales are converted and multiplied by a.d (and a.s) in one xmm, the same F32
 * products as the scalar code. */
static VNNI_FN void dotr4_q4_0_vnni(const void *wv, size_t ws, const void *av, int64_t nb, const void *next,
                                    float out[4])
{
    const ex_block_q4_0 *w0 = wv, *w1 = (const ex_block_q4_0 *)((const uint8_t *)wv + ws);
    const ex_block_q4_0 *w2 = (const ex_block_q4_0 *)((const uint8_t *)wv + 2 * ws);
    const ex_block_q4_0 *w3 = (const ex_block_q4_0 *)((const uint8_t *)wv + 3 * ws);
    const ex_block_q8_1 *a = av;
    const __m512i sh = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                        0x0004000400040004, 0, 0); /* 128-bit lanes 0..3: >> 0, 4, 0, 4 */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i i01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i i23 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
    __m128 corr = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_next(next, 4 * ws, i);
        const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a[i].qs));
        __m512i q01 = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)w0[i].qs)),
                                                  0xFF00, _mm_loadu_si128((const __m128i *)w1[i].qs));
        __m512i q23 = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)w2[i].qs)),
                                                  0xFF00, _mm_loadu_si128((const __m128i *)w3[i].qs));
        q01 = _mm512_and_si512(_mm512_srlv_epi16(q01, sh), m4);
        q23 = _mm512_and_si512(_mm512_srlv_epi16(q23, sh), m4);
        const __m512 p01 = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q01, x));
        const __m512 p23 = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q23, x));
        __m128i h = _mm_cvtsi32_si128(w0[i].d);
        h = _mm_insert_epi16(h, w1[i].d, 1);
        h = _mm_insert_epi16(h, w2[i].d, 2);
        h = _mm_insert_epi16(h, w3[i].d, 3);
        const __m128 dw = _mm_cvtph_ps(h);
        const __m512 sc = _mm512_castps128_ps512(_mm_mul_ps(dw, _mm_set1_ps(a[i].d)));
        corr = _mm_add_ps(corr, _mm_mul_ps(dw, _mm_set1_ps(a[i].s)));
        acc01 = _mm512_fmadd_ps(_mm512_permutexvar_ps(i01, sc), p01, acc01);
        acc23 = _mm512_fmadd_ps(_mm512_permutexvar_ps(i23, sc), p23, acc23);
    }
    float c[4];
    _mm_storeu_ps(c, corr);
    out[0] = hsum_ps(_mm512_castps512_ps256(acc01)) - 8.0f * c[0];
    out[1] = hsum_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc01), 1))) - 8.0f * c[1];
    out[2] = hsum_ps(_mm512_castps512_ps256(acc23)) - 8.0f * c[2];
    out[3] = hsum_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc23), 1))) - 8.0f * c[3];
}

/* ---- 4 tokens per weight row (prefill): each weight block is loaded and unpacked once ------- */

typedef void (*vec_dot4_fn)(const void *w, const void *a, size_t astride, int64_t nb, float out[4]);
typedef void (*vec_dot8_fn)(const void *w, const void *a, size_t astride, int64_t nb, float out[8]);

#define DEF_Q4_0_X4(NAME, ATTR, DOT)                                                              \
    static ATTR void NAME(const void *wv, const void *av, size_t astride, int64_t nb, float out[4]) \
    {                                                                                             \
        const ex_block_q4_0 *w = wv;                                                              \
        const ex_block_q8_1 *a[4];                                                                \
        for (int j = 0; j < 4; j++) a[j] = (const ex_block_q8_1 *)((const uint8_t *)av + j * astride); \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        float corr[4] = {0, 0, 0, 0};                                                             \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            float dw = H2F(w[i].d);                                                               \
            __m256i q = load_q4(w[i].qs);                                                         \
            for (int j = 0; j < 4; j++) {                                                         \
                __m256i x = _mm256_loadu_si256((const __m256i *)a[j][i].qs);                      \
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[j][i].d), _mm256_cvtepi32_ps(DOT(q, x)), acc[j]); \
                corr[j] += dw * a[j][i].s;                                                        \
            }                                                                                     \
        }                                                                                         \
        for (int j = 0; j < 4; j++) out[j] = hsum_ps(acc[j]) - 8.0f * corr[j];                    \
    }

#define DEF_Q8_0_X4(NAME, ATTR, DOT)                                                              \
    static ATTR void NAME(const void *wv, const void *av, size_t astride, int64_t nb, float out[4]) \
    {                                                                                             \
        const ex_block_q8_0 *w = wv;                                                              \
        const ex_block_q8_1 *a[4];                                                                \
        for (int j = 0; j < 4; j++) a[j] = (const ex_block_q8_1 *)((const uint8_t *)av + j * astride); \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            float dw = H2F(w[i].d);                                                               \
            __m256i q = _mm256_loadu_si256((const __m256i *)w[i].qs);                             \
            __m256i aq = _mm256_sign_epi8(q, q);                                                  \
            for (int j = 0; j < 4; j++) {                                                         \
                __m256i x = _mm256_loadu_si256((const __m256i *)a[j][i].qs);                      \
                __m256 p = _mm256_cvtepi32_ps(DOT(aq, _mm256_sign_epi8(x, q)));                   \
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[j][i].d), p, acc[j]);              \
            }                                                                                     \
        }                                                                                         \
        for (int j = 0; j < 4; j++) out[j] = hsum_ps(acc[j]);                                     \
    }

static AVX2_FN void dot4_q4_K_avx2(const void *wv, const void *av, size_t astride, int64_t nb, float out[4])
{
    const ex_block_q4_K *w = wv;
    const ex_block_q8_K *a[4];
    for (int j = 0; j < 4; j++) a[j] = (const ex_block_q8_K *)((const uint8_t *)av + j * astride);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float accm[4] = {0, 0, 0, 0};
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sm[16];
        q4k_unpack(w[i].scales, sm);
        const __m128i mm = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(sm + 8)));
        const float d = H2F(w[i].d), dmin = H2F(w[i].dmin);
        __m256i sumi[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i s0 = _mm256_set1_epi16(sm[2 * c]), s1 = _mm256_set1_epi16(sm[2 * c + 1]);
            for (int j = 0; j < 4; j++) {
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(a[j][i].qs + 64 * c));
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(a[j][i].qs + 64 * c + 32));
                __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), s0);
                __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), s1);
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p0, p1));
            }
        }
        for (int j = 0; j < 4; j++) {
            __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[j][i].bsums),
                                        _mm_loadu_si128((const __m128i *)(a[j][i].bsums + 8)));
            __m128i pm = _mm_madd_epi16(bs, mm);
            pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, 0x4E));
            pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, 0xB1));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(a[j][i].d * d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            accm[j] += a[j][i].d * dmin * (float)_mm_cvtsi128_si32(pm);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = hsum_ps(acc[j]) - accm[j];
}

static AVX2_FN void dot4_q6_K_avx2(const void *wv, const void *av, size_t astride, int64_t nb, float out[4])
{
    const ex_block_q6_K *w = wv;
    const ex_block_q8_K *a[4];
    for (int j = 0; j < 4; j++) a[j] = (const ex_block_q8_K *)((const uint8_t *)av + j * astride);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < nb; i++) {
        __m256i sumi[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int h = 0; h < 2; h++) {
            const int8_t *S = w[i].scales + 8 * h;
            __m256i L0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            __m256i L1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            __m256i H = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            __m256i q[4], sc[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_slli_epi16(_mm256_and_si256(H, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m2), 4));
            for (int g = 0; g < 4; g++) sc[g] = _mm256_set_m128i(_mm_set1_epi16(S[2 * g + 1]), _mm_set1_epi16(S[2 * g]));
            for (int j = 0; j < 4; j++) {
                const int8_t *x = a[j][i].qs + 128 * h;
                for (int g = 0; g < 4; g++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(x + 32 * g));
                    sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], xv), sc[g]));
                }
            }
        }
        /* same float operations as dot_q6_K_avx2, so a prefill row equals its decode call bit for bit */
        for (int j = 0; j < 4; j++) {
            int corr = 0;
            for (int k = 0; k < 16; k++) corr += w[i].scales[k] * a[j][i].bsums[k];
            float dd = a[j][i].d * H2F(w[i].d);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            acc[j] = _mm256_add_ps(acc[j], _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, -32.0f * dd * (float)corr));
        }
    }
    for (int j = 0; j < 4; j++) out[j] = hsum_ps(acc[j]);
}

/* ---- AVX-512 VNNI kernels for Q4_K / Q6_K: NT tokens (1, 4 or 8) per weight row -------------
 * 512-bit vectors hold two 32-byte halves at once (Q4_K: a chunk's low and high nibbles against its
 * 64 activations; Q6_K: four 16-element sub-blocks). vpdpbusd sums 4 products into int32 (|sum| <=
 * 4*63*127 < 2^15, so vpackssdw packs two such vectors to int16 exactly) and one vpdpwssd weights the
 * packed sums by their sub-block scales and accumulates: 3 multiplies per 128 products, against 8
 * (vpmaddubsw + vpmaddwd, 256-bit) on the AVX2 path. The corrections (Σ m·bsums, Σ scales·bsums) are
 * vector madds kept in 8 lanes, and the float work per block and token is 8-lane: integer sums exact,
 * float summation order not the AVX2 path's (within float rounding of it). NT = 1 is the decode dot,
 * so a prefill row equals its decode call bit for bit. */

/* The NT token rows of the K-quant VNNI kernels below: row j's activation blocks at av + j·astride, its
 * accumulator zeroed. */
static inline __attribute__((always_inline)) VNNI_FN void kq_rows_start(const void *av, size_t astride, const int NT,
                                                                       const ex_block_q8_K **a, __m256 *acc)
{
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NT; j++) {
        a[j] = (const ex_block_q8_K *)((const uint8_t *)av + j * astride);
        acc[j] = _mm256_setzero_ps();
    }
}

static inline __attribute__((always_inline)) VNNI_FN void dotn_q4_K_vnni(const void *wv, const void *av, size_t astride,
                                                                        int64_t nb, float *out, const int NT)
{
    const ex_block_q4_K *w = wv;
    const ex_block_q8_K *a[8];
    __m256 acc[8];
    kq_rows_start(av, astride, NT, a, acc);
    const __m512i m4 = _mm512_set1_epi8(0x0F), shr = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    /* vpackssdw(P_2p, P_2p+1) puts, in each 128-bit lane L, 4 sums of chunk 2p then 4 of chunk 2p+1; chunk
       c's lanes L < 2 are sub-block 2c, L >= 2 sub-block 2c+1: int16 lane l takes scale
       2 (2p + (l % 8) / 4) + l / 16. Lane s of 16 -> 8 + s / 2 (the min of bsums[s]). */
    const __m512i pk = _mm512_set_epi16(7, 7, 7, 7, 5, 5, 5, 5, 7, 7, 7, 7, 5, 5, 5, 5, 6, 6, 6, 6, 4, 4, 4, 4, 6, 6, 6, 6, 4, 4, 4, 4);
    const __m256i midx = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sm[16];
        q4k_unpack(w[i].scales, sm);
        const __m256i sm16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sm)); /* sc 0..7, m 0..7 */
        const __m256i mdup = _mm256_permutexvar_epi16(midx, sm16);
        const __m512i s16 = _mm512_castsi256_si512(sm16);
        const __m256 d = _mm256_set1_ps(H2F(w[i].d)), dmin = _mm256_set1_ps(H2F(w[i].dmin));
        __m512i q[4], sc[2];
        _Pragma("GCC unroll 8")
        for (int c = 0; c < 4; c++) {
            /* low nibbles of chunk c in bytes 0..31, high nibbles in 32..63: elements 64c..64c+63 */
            __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * c)));
            q[c] = _mm512_and_si512(_mm512_srlv_epi64(b, shr), m4);
        }
        sc[0] = _mm512_permutexvar_epi16(_mm512_sub_epi16(pk, _mm512_set1_epi16(4)), s16);
        sc[1] = _mm512_permutexvar_epi16(pk, s16);
        _Pragma("GCC unroll 8")
        for (int j = 0; j < NT; j++) {
            /* vpdpbusd sums of 4 products (|sum| <= 4*15*127), packed to int16 exactly, weighted by vpdpwssd */
            __m512i p[4], s = _mm512_setzero_si512();
            _Pragma("GCC unroll 8")
            for (int c = 0; c < 4; c++)
                p[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[c], _mm512_loadu_si512(a[j][i].qs + 64 * c));
            s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(p[0], p[1]), sc[0]);
            s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(p[2], p[3]), sc[1]);
            __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
            /* lane k: m[k] (bsums[2k] + bsums[2k+1]); the lanes sum to the min correction of the block */
            __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[j][i].bsums), mdup);
            __m256 t = _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(mins)));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(a[j][i].d), t, acc[j]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NT; j++) out[j] = hsum_ps(acc[j]);
}

static inline __attribute__((always_inline)) VNNI_FN void dotn_q6_K_vnni(const void *wv, const void *av, size_t astride,
                                                                        int64_t nb, float *out, const int NT)
{
    const ex_block_q6_K *w = wv;
    const ex_block_q8_K *a[8];
    __m256 acc[8];
    kq_rows_start(av, astride, NT, a, acc);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
    /* vpackssdw(P_a, P_b): in 128-bit lane L, 4 sums of sub-block L of qa then 4 of sub-block 4 + L of qb:
       int16 lane l takes scale 8h + l / 8 + 4 ((l % 8) / 4) */
    const __m512i pk6 = _mm512_set_epi16(7, 7, 7, 7, 3, 3, 3, 3, 6, 6, 6, 6, 2, 2, 2, 2, 5, 5, 5, 5, 1, 1, 1, 1, 4, 4, 4, 4, 0, 0, 0, 0);
    for (int64_t i = 0; i < nb; i++) {
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m512i s16z = _mm512_castsi256_si512(s16);
        const float dw = H2F(w[i].d);
        /* per half h: qa = groups 0|1 (elements 128h + 0..63), qb = groups 2|3 (128h + 64..127);
           sc: 16-element sub-blocks 8h+0..3 and 8h+4..7, 8 int16 lanes each */
        __m512i qa[2], qb[2], sc[2];
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            __m512i L = _mm512_loadu_si512(w[i].ql + 64 * h);
            __m256i H0 = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(H0), _mm256_srli_epi16(H0, 2), 1);
            qa[h] = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_slli_epi16(_mm512_and_si512(H, m2), 4));
            qb[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                    _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 4), m2), 4));
            sc[h] = _mm512_permutexvar_epi16(_mm512_add_epi16(pk6, _mm512_set1_epi16((short)(8 * h))), s16z);
        }
        _Pragma("GCC unroll 8")
        for (int j = 0; j < NT; j++) {
            const int8_t *x = a[j][i].qs;
            /* vpdpbusd sums of 4 products (|sum| <= 4*63*127 = 32004 < 2^15), packed to int16 exactly */
            __m512i s = _mm512_setzero_si512();
            _Pragma("GCC unroll 8")
            for (int h = 0; h < 2; h++) {
                __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa[h], _mm512_loadu_si512(x + 128 * h));
                __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qb[h], _mm512_loadu_si512(x + 128 * h + 64));
                s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(pa, pb), sc[h]);
            }
            /* q - 32: Σ_k scales[k] bsums[k] over the lanes, taken 32 times from the exact int32 sums */
            __m256i corr = _mm256_madd_epi16(s16, _mm256_loadu_si256((const __m256i *)a[j][i].bsums));
            __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(a[j][i].d * dw), _mm256_cvtepi32_ps(sumi), acc[j]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NT; j++) out[j] = hsum_ps(acc[j]);
}

/* The 1-, 4- and 8-token entry points (vec_dot_fn, vec_dot4_fn, pick_dot8's) of a dotn_*_vnni kernel. */
#define DEF_DOTN_VNNI(T)                                                                                      \
    static VNNI_FN float dot_##T##_vnni(const void *w, const void *a, int64_t nb)                             \
    {                                                                                                         \
        float o;                                                                                              \
        dotn_##T##_vnni(w, a, 0, nb, &o, 1);                                                                  \
        return o;                                                                                             \
    }                                                                                                         \
    static VNNI_FN void dot4_##T##_vnni(const void *w, const void *a, size_t as, int64_t nb, float out[4])    \
    {                                                                                                         \
        dotn_##T##_vnni(w, a, as, nb, out, 4);                                                                \
    }                                                                                                         \
    static VNNI_FN void dot8_##T##_vnni(const void *w, const void *a, size_t as, int64_t nb, float out[8])    \
    {                                                                                                         \
        dotn_##T##_vnni(w, a, as, nb, out, 8);                                                                \
    }
DEF_DOTN_VNNI(q4_K)
DEF_DOTN_VNNI(q6_K)

/* ---- AVX-512 VNNI decode kernels for Q4_K / Q6_K: 4 weight rows a call ----------------------
 * Per row and block the integer and float work of dotn_*_vnni with NT = 1, in its order, so a row
 * equals its one-row call bit for bit (and so every prefill path that equals that call). Shared by the
 * 4 rows: the activation block's loads, the scale bytes unpacked in one 512-bit vector (a 128-bit lane
 * a row), the 4 rows' fp16 d (and dmin) converted in one instruction; 4 independent rows in flight.
 * The one-row kernels spent ~75 instructions a Q4_K block, 25 of them unpacking scales and converting
 * d/dmin, and a row of a routed expert (Qwen3-30B-A3B: 8 blocks, 3 for ffn_down) pays its epilogue
 * every few blocks. `next` (the next call's 4 rows, 4·ws contiguous bytes) is prefetched into L2 a
 * block's share at a time, as dotr4_q4_0_vnni does. */
/* Prefetches the `b`-th `share`-byte part of next (a block of each of the 4 rows: 576 bytes of Q4_K,
 * 840 of Q6_K; at most 14 lines). Always inlined: GCC finds a called function of prefetches "const"
 * and deletes the call. */
static inline __attribute__((always_inline)) void prefetch_next_k(const void *next, size_t bytes, int64_t b, size_t share)
{
    if (!next || share * (size_t)(b + 1) > bytes) return;
    const char *p = (const char *)next + share * (size_t)b;
#define PF(k) if (64 * (k) < share) _mm_prefetch(p + 64 * (k), _MM_HINT_T1)
    PF(0); PF(1); PF(2); PF(3); PF(4); PF(5); PF(6); PF(7); PF(8); PF(9); PF(10); PF(11); PF(12); PF(13);
#undef PF
}

/* 128-bit lane r of v: an immediate per case (the intrinsic takes only a constant), one instruction once
 * the caller's loop over r is unrolled; a variable r does not build at -O0 or with clang. */
static inline __attribute__((always_inline)) VNNI_FN __m128i lane128(__m512i v, int r)
{
    switch (r) {
    case 0: return _mm512_extracti32x4_epi32(v, 0);
    case 1: return _mm512_extracti32x4_epi32(v, 1);
    case 2: return _mm512_extracti32x4_epi32(v, 2);
    default: return _mm512_extracti32x4_epi32(v, 3);
    }
}

static VNNI_FN void dotr4_q4_K_vnni(const void *wv, size_t ws, const void *av, int64_t nb, const void *next, float out[4])
{
    const ex_block_q4_K *w[4];
    for (int r = 0; r < 4; r++) w[r] = (const ex_block_q4_K *)((const uint8_t *)wv + r * ws);
    const ex_block_q8_K *a = av;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m512i m4 = _mm512_set1_epi8(0x0F), shr = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    const __m512i pk = _mm512_set_epi16(7, 7, 7, 7, 5, 5, 5, 5, 7, 7, 7, 7, 5, 5, 5, 5, 6, 6, 6, 6, 4, 4, 4, 4, 6, 6, 6, 6, 4, 4, 4, 4);
    const __m512i pk0 = _mm512_sub_epi16(pk, _mm512_set1_epi16(4));
    const __m256i midx = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    /* q4k_unpack per 128-bit lane (u0 u1 u2 = the 12 scale bytes as 32-bit words): A = (u0, u2, u1, u2)
       >> (0, 0, 0, 4) masked 3F/0F/3F/0F, or'ed with B = (u0, u0, u1, u1) >> 2 masked 0/30/0/30 */
    const __m512i ush = _mm512_set_epi32(4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0);
    const __m512i umlo = _mm512_set_epi32(0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F,
                                          0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F,
                                          0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F);
    const __m512i umhi = _mm512_set_epi32(0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0,
                                          0x30303030, 0, 0x30303030, 0, 0x30303030, 0);
    for (int64_t i = 0; i < nb; i++) {
        prefetch_next_k(next, 4 * ws, i, 4 * sizeof(ex_block_q4_K));
        __m512i u = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)w[0][i].scales));
        u = _mm512_inserti32x4(u, _mm_loadu_si128((const __m128i *)w[1][i].scales), 1);
        u = _mm512_inserti32x4(u, _mm_loadu_si128((const __m128i *)w[2][i].scales), 2);
        u = _mm512_inserti32x4(u, _mm_loadu_si128((const __m128i *)w[3][i].scales), 3);
        const __m512i A = _mm512_srlv_epi32(_mm512_shuffle_epi32(u, (_MM_PERM_ENUM)0x98), ush);
        const __m512i sm = _mm512_or_si512(_mm512_and_si512(A, umlo),
                                           _mm512_and_si512(_mm512_srli_epi32(_mm512_shuffle_epi32(u, (_MM_PERM_ENUM)0x50), 2), umhi));
        uint32_t dm[4]; /* d, dmin of each row: in registers (a vector load of 4 scalar stores stalls) */
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) memcpy(&dm[r], &w[r][i].d, 4);
        const __m256 dd = _mm256_cvtph_ps(_mm_set_epi32((int)dm[3], (int)dm[2], (int)dm[1], (int)dm[0])); /* d0 dmin0 d1 ... */
        __m512i x[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++) x[c] = _mm512_loadu_si512(a[i].qs + 64 * c);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        const __m256 ad = _mm256_set1_ps(a[i].d);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            const __m256i sm16 = _mm256_cvtepu8_epi16(lane128(sm, r)); /* sc 0..7, m 0..7 */
            const __m256i mdup = _mm256_permutexvar_epi16(midx, sm16);
            const __m512i s16 = _mm512_castsi256_si512(sm16);
            const __m256 d = _mm256_permutexvar_ps(_mm256_set1_epi32(2 * r), dd);
            const __m256 dmin = _mm256_permutexvar_ps(_mm256_set1_epi32(2 * r + 1), dd);
            __m512i p[4];
            _Pragma("GCC unroll 4")
            for (int c = 0; c < 4; c++) {
                __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[r][i].qs + 32 * c)));
                p[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(_mm512_srlv_epi64(b, shr), m4), x[c]);
            }
            __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(p[0], p[1]),
                                            _mm512_permutexvar_epi16(pk0, s16));
            s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(p[2], p[3]), _mm512_permutexvar_epi16(pk, s16));
            const __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
            const __m256i mins = _mm256_madd_epi16(bsums, mdup);
            const __m256 t = _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(mins)));
            acc[r] = _mm256_fmadd_ps(ad, t, acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = hsum_ps(acc[r]);
}

static VNNI_FN void dotr4_q6_K_vnni(const void *wv, size_t ws, const void *av, int64_t nb, const void *next, float out[4])
{
    const ex_block_q6_K *w[4];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++) w[r] = (const ex_block_q6_K *)((const uint8_t *)wv + r * ws);
    const ex_block_q8_K *a = av;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
    const __m512i pk6 = _mm512_set_epi16(7, 7, 7, 7, 3, 3, 3, 3, 6, 6, 6, 6, 2, 2, 2, 2, 5, 5, 5, 5, 1, 1, 1, 1, 4, 4, 4, 4, 0, 0, 0, 0);
    const __m512i pk6h = _mm512_add_epi16(pk6, _mm512_set1_epi16(8));
    for (int64_t i = 0; i < nb; i++) {
        prefetch_next_k(next, 4 * ws, i, 4 * sizeof(ex_block_q6_K));
        const __m256 dd = _mm256_castps128_ps256(_mm_mul_ps(
            _mm_set1_ps(a[i].d), _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)w[3][i].d, (short)w[2][i].d, (short)w[1][i].d,
                                                           (short)w[0][i].d)))); /* a.d * d of rows 0..3 */
        __m512i x[4];
        _Pragma("GCC unroll 4")
        for (int c = 0; c < 4; c++) x[c] = _mm512_loadu_si512(a[i].qs + 64 * c);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            const ex_block_q6_K *wb = &w[r][i];
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
            const __m512i s16z = _mm512_castsi256_si512(s16);
            __m512i s = _mm512_setzero_si512();
            _Pragma("GCC unroll 2")
            for (int h = 0; h < 2; h++) {
                __m512i L = _mm512_loadu_si512(wb->ql + 64 * h);
                __m256i H0 = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
                __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(H0), _mm256_srli_epi16(H0, 2), 1);
                __m512i qa = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_slli_epi16(_mm512_and_si512(H, m2), 4));
                __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                             _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 4), m2), 4));
                __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, x[2 * h]);
                __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qb, x[2 * h + 1]);
                s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(pa, pb), _mm512_permutexvar_epi16(h ? pk6h : pk6, s16z));
            }
            __m256i corr = _mm256_madd_epi16(s16, bsums);
            __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
            acc[r] = _mm256_fmadd_ps(_mm256_permutexvar_ps(_mm256_set1_epi32(r), dd), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = hsum_ps(acc[r]);
}

/* ---- AVX-512 VNNI prefill kernels for Q4_0 / Q8_0: NT tokens (4 or 8) per weight row -------
 * Bit for bit the float work of the 1-token decode dot (DEF_Q4_0 / DEF_Q8_0 with dot_us_vnni), done
 * for two tokens per 512-bit vector: per block i and token, 8 int32 lanes of exact sums over 4
 * elements (Q4_0: nibble (u8) x x, minus 8 Σ dw s in float at the end; Q8_0: Σ w x, from vpdpbusd of
 * x + 128 against w starting at -128 Σ w), converted and fused-multiply-added by dw d_t in the same
 * order, summed by hsum_ps. The weight block is unpacked once for NT tokens, the tokens' dw d (and
 * Q4_0's dw s) are one 8-lane multiply per block, and a token pair costs one aligned load, vpdpbusd,
 * convert, vpermps and fma per 64 codes. Activations: q8_group (t a multiple of 8). */
static inline __attribute__((always_inline)) VNNI_FN void dotn_q80_vnni(const void *wv, const void *ag, int64_t nb,
                                                                       float *out, const int NT, const int q4)
{
    __m512 acc[4];
    _Pragma("GCC unroll 4")
    for (int p = 0; p < NT / 2; p++) acc[p] = _mm512_setzero_ps();
    __m256 corr = _mm256_setzero_ps();
    /* vpermps index of pair p: lanes 0..7 take token 2p's dw d, lanes 8..15 token 2p + 1's */
    __m512i pidx[4];
    _Pragma("GCC unroll 4")
    for (int p = 0; p < NT / 2; p++)
        pidx[p] = _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
    const __m512i b128 = _mm512_set1_epi8((char)0x80), m4 = _mm512_set1_epi8(0x0F);
    const __m512i q4sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *g = (const uint8_t *)ag + (size_t)i * Q8G_BLOCK_BYTES;
        float dw;
        __m512i q, c0 = _mm512_setzero_si512();
        if (q4) {
            const ex_block_q4_0 *b = (const ex_block_q4_0 *)wv + i;
            dw = H2F(b->d);
            /* load_q4's 32 codes in both halves: the 16 bytes in every 128-bit lane, odd lanes shifted by 4 */
            q = _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)b->qs)), q4sh),
                                 m4);
        } else {
            const ex_block_q8_0 *b = (const ex_block_q8_0 *)wv + i;
            dw = H2F(b->d);
            q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->qs));
            /* -128 Σ w over each lane's 4 codes: (x + 128) w summed from here is x w */
            c0 = _mm512_sub_epi32(c0, _mm512_dpbusd_epi32(c0, b128, q));
        }
        const __m256 vdw = _mm256_set1_ps(dw);
        const __m256 dd = _mm256_mul_ps(vdw, _mm256_load_ps((const float *)(g + 256)));
        if (q4) corr = _mm256_add_ps(corr, _mm256_mul_ps(vdw, _mm256_load_ps((const float *)(g + 288))));
        const __m512 dd2 = _mm512_castps256_ps512(dd);
        _Pragma("GCC unroll 4")
        for (int p = 0; p < NT / 2; p++) {
            const __m512i x = _mm512_load_si512(g + 64 * p);
            const __m512i s = q4 ? _mm512_dpbusd_epi32(c0, q, x) : _mm512_dpbusd_epi32(c0, x, q);
            acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pidx[p], dd2), _mm512_cvtepi32_ps(s), acc[p]);
        }
    }
    float cr[8];
    _mm256_storeu_ps(cr, corr);
    _Pragma("GCC unroll 4")
    for (int p = 0; p < NT / 2; p++) {
        out[2 * p] = hsum_ps(_mm512_castps512_ps256(acc[p]));
        out[2 * p + 1] = hsum_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p]), 1)));
        if (q4) {
            out[2 * p] = out[2 * p] - 8.0f * cr[2 * p];
            out[2 * p + 1] = out[2 * p + 1] - 8.0f * cr[2 * p + 1];
        }
    }
}

/* The 4- and 8-token entry points (vec_dot4_fn, pick_dot8's) of dotn_q80_vnni; a points at a q8_group
   group, so the token stride is not used. */
#define DEF_DOTN_Q80(T, Q4)                                                                                   \
    static VNNI_FN void dot4_##T##_vnni(const void *w, const void *a, size_t as, int64_t nb, float out[4])    \
    {                                                                                                         \
        (void)as;                                                                                             \
        dotn_q80_vnni(w, a, nb, out, 4, Q4);                                                                  \
    }                                                                                                         \
    static VNNI_FN void dot8_##T##_vnni(const void *w, const void *a, size_t as, int64_t nb, float out[8])    \
    {                                                                                                         \
        (void)as;                                                                                             \
        dotn_q80_vnni(w, a, nb, out, 8, Q4);                                                                  \
    }
DEF_DOTN_Q80(q4_0, 1)
DEF_DOTN_Q80(q8_0, 0)

DEF_Q4_0_X4(dot4_q4_0_avx2, AVX2_FN, dot_us_avx2)
DEF_Q8_0_X4(dot4_q8_0_avx2, AVX2_FN, dot_us_avx2)

static AVX2_FN float dot_f32_avx2(const float *w, const float *x, int64_t n)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc);
    float s = hsum_ps(acc);
    for (; i < n; i++) s += w[i] * x[i];
    return s;
}

#define DEF_MXFP4(NAME, ATTR, DOT)                                                                \
    static ATTR float NAME(const void *wv, const void *av, int64_t nb)                            \
    {                                                                                             \
        const ex_block_mxfp4 *w = wv;                                                             \
        const ex_block_q8_1 *a = av;                                                              \
        const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)E2M1X2)); \
        __m256 acc = _mm256_setzero_ps();                                                         \
        for (int64_t i = 0; i < nb; i++) {                                                        \
            __m256i v = _mm256_shuffle_epi8(tab, load_q4(w[i].qs));                               \
            __m256i x = _mm256_loadu_si256((const __m256i *)a[i].qs);                             \
            __m256 p = _mm256_cvtepi32_ps(DOT(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v)));   \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(0.5f * ex_e8m0_to_f32(w[i].e) * a[i].d), p, acc); \
        }                                                                                         \
        return hsum_ps(acc);                                                                      \
    }

static AVX2_FN float fdot_f16_avx2(const void *wv, const float *x, int64_t n)
{
    const uint8_t *w = wv;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))), _mm256_loadu_ps(x + i), acc);
    float s = hsum_ps(acc);
    for (; i < n; i++) {
        ex_fp16 h;
        memcpy(&h, w + 2 * i, 2);
        s += ex_fp16_to_f32(h) * x[i];
    }
    return s;
}

static AVX2_FN float fdot_bf16_avx2(const void *wv, const float *x, int64_t n)
{
    const uint8_t *w = wv;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + 2 * i))), 16);
        acc = _mm256_fmadd_ps(_mm256_castsi256_ps(v), _mm256_loadu_ps(x + i), acc);
    }
    float s = hsum_ps(acc);
    for (; i < n; i++) {
        ex_bf16 h;
        memcpy(&h, w + 2 * i, 2);
        s += ex_bf16_to_f32(h) * x[i];
    }
    return s;
}

DEF_MXFP4(dot_mxfp4_avx2, AVX2_FN, dot_us_avx2)
DEF_MXFP4(dot_mxfp4_vnni, VNNI_FN, dot_us_vnni)
DEF_Q4_0(dot_q4_0_avx2, AVX2_FN, dot_us_avx2)
DEF_Q4_0(dot_q4_0_vnni, VNNI_FN, dot_us_vnni)
DEF_Q4_0_R4(dotr4_q4_0_avx2, AVX2_FN, dot_us_avx2)
DEF_MXFP4_R4(dotr4_mxfp4_avx2, AVX2_FN, dot_us_avx2)
DEF_MXFP4_R4(dotr4_mxfp4_vnni, VNNI_FN, dot_us_vnni)
DEF_Q8_0(dot_q8_0_avx2, AVX2_FN, dot_us_avx2)
DEF_Q8_0(dot_q8_0_vnni, VNNI_FN, dot_us_vnni)
DEF_Q4_K(dot_q4_K_avx2, AVX2_FN)
DEF_Q6_K(dot_q6_K_avx2, AVX2_FN)
#endif

static float dot_f32_scalar(const float *w, const float *x, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += w[i] * x[i];
    return s;
}

static void axpy_f32_scalar(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

#ifdef EX_X86
static AVX2_FN void axpy_f32_avx2(float *y, float a, const float *x, int64_t n)
{
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
#endif

/* Scores s[p] = scale·q·k_p over n positions, their maximum m and exp-sum l (s[p] replaced by
 * exp(s[p] - m)): the softmax half of an attention block partial (cpu_simd.h ex_attn_part_fn). */
static void part_softmax(float *s, int64_t n, float *m, float *l)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t p = 0; p < n; p++) mx = fmaxf(mx, s[p]);
    for (int64_t p = 0; p < n; p++) sum += (s[p] = expf(s[p] - mx));
    *m = mx;
    *l = sum;
}

static void attn_part_scalar(const float *q, int64_t nh, const void *kbv, const void *vbv, int64_t kv_stride,
                             int64_t n, int64_t hd, float scale, float *s, float *m, float *l, float *o)
{
    const float *kb = kbv, *vb = vbv;
    for (int64_t j = 0; j < nh; j++) {
        for (int64_t p = 0; p < n; p++) s[p] = dot_f32_scalar(q + j * hd, kb + p * kv_stride, hd) * scale;
        part_softmax(s, n, &m[j], &l[j]);
        float *oj = o + j * hd;
        for (int64_t i = 0; i < hd; i++) oj[i] = 0.0f;
        for (int64_t p = 0; p < n; p++) axpy_f32_scalar(oj, s[p], vb + p * kv_stride, hd);
    }
}



/* ---- attention rows over an F16 KV cache, F32 -> F16 conversion (cpu_simd.h) ----------------- */

static void attn_part_f16_scalar(const float *q, int64_t nh, const void *kbv, const void *vbv, int64_t kv_stride,
                                 int64_t n, int64_t hd, float scale, float *s, float *m, float *l, float *o)
{
    const ex_fp16 *kb = kbv, *vb = vbv;
    for (int64_t j = 0; j < nh; j++) {
        const float *qj = q + j * hd;
        for (int64_t p = 0; p < n; p++) {
            const ex_fp16 *k = kb + p * kv_stride;
            float d = 0.0f;
            for (int64_t i = 0; i < hd; i++) d += qj[i] * ex_fp16_to_f32(k[i]);
            s[p] = d * scale;
        }
        part_softmax(s, n, &m[j], &l[j]);
        float *oj = o + j * hd;
        for (int64_t i = 0; i < hd; i++) oj[i] = 0.0f;
        for (int64_t p = 0; p < n; p++) {
            const ex_fp16 *v = vb + p * kv_stride;
            for (int64_t i = 0; i < hd; i++) oj[i] += s[p] * ex_fp16_to_f32(v[i]);
        }
    }
}

static void f32_to_f16_scalar(const float *src, ex_fp16 *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = ex_f32_to_fp16(src[i]);
}

#ifdef EX_X86

/* 8 F16 values at h (any alignment) widened to F32 (vcvtph2ps, exact) */
static inline AVX2_FN __m256 load8_f16(const ex_fp16 *h)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* One block partial (ex_attn_part_fn) over a cache of T read 8 values at a time by LOAD8 (F32: a
 * plain load; F16: widened with vcvtph2ps, exact); head_dim a multiple of 8 and <= 256, else FALLBACK
 * (the scalar partial). Per query head: q in registers, scores of 4 positions at a time (4 independent
 * FMA chains), then the exp-weighted V rows summed in registers; the block's K and V rows stay in
 * L1/L2 across the group's heads. */
#define DEF_ATTN_PART_AVX2(NAME, T, LOAD8, FALLBACK)                                                            \
    static AVX2_FN void NAME(const float *q, int64_t nh, const void *kbv, const void *vbv, int64_t kv_stride,     \
                             int64_t n, int64_t hd, float scale, float *s, float *m, float *l, float *o)          \
    {                                                                                                           \
        if (hd % 8 || hd > 256) {                                                                               \
            FALLBACK(q, nh, kbv, vbv, kv_stride, n, hd, scale, s, m, l, o);                                     \
            return;                                                                                             \
        }                                                                                                       \
        const T *kb = kbv, *vb = vbv;                                                                           \
        const int64_t nv = hd / 8;                                                                              \
        for (int64_t j = 0; j < nh; j++) {                                                                      \
            __m256 qv[32], ov[32];                                                                              \
            for (int64_t c = 0; c < nv; c++) qv[c] = _mm256_loadu_ps(q + j * hd + 8 * c);                      \
            int64_t p = 0;                                                                                      \
            for (; p + 4 <= n; p += 4) {                                                                        \
                const T *k0 = kb + p * kv_stride, *k1 = k0 + kv_stride, *k2 = k1 + kv_stride, *k3 = k2 + kv_stride; \
                __m256 a0 = _mm256_mul_ps(qv[0], LOAD8(k0)), a1 = _mm256_mul_ps(qv[0], LOAD8(k1));              \
                __m256 a2 = _mm256_mul_ps(qv[0], LOAD8(k2)), a3 = _mm256_mul_ps(qv[0], LOAD8(k3));              \
                for (int64_t c = 1; c < nv; c++) {                                                              \
                    a0 = _mm256_fmadd_ps(qv[c], LOAD8(k0 + 8 * c), a0);                                         \
                    a1 = _mm256_fmadd_ps(qv[c], LOAD8(k1 + 8 * c), a1);                                         \
                    a2 = _mm256_fmadd_ps(qv[c], LOAD8(k2 + 8 * c), a2);                                         \
                    a3 = _mm256_fmadd_ps(qv[c], LOAD8(k3 + 8 * c), a3);                                         \
                }                                                                                               \
                s[p] = hsum_ps(a0) * scale;                                                                     \
                s[p + 1] = hsum_ps(a1) * scale;                                                                 \
                s[p + 2] = hsum_ps(a2) * scale;                                                                 \
                s[p + 3] = hsum_ps(a3) * scale;                                                                 \
            }                                                                                                   \
            for (; p < n; p++) {                                                                                \
                const T *k = kb + p * kv_stride;                                                                \
                __m256 a = _mm256_mul_ps(qv[0], LOAD8(k));                                                      \
                for (int64_t c = 1; c < nv; c++) a = _mm256_fmadd_ps(qv[c], LOAD8(k + 8 * c), a);               \
                s[p] = hsum_ps(a) * scale;                                                                      \
            }                                                                                                   \
            part_softmax(s, n, &m[j], &l[j]);                                                                   \
            for (int64_t c = 0; c < nv; c++) ov[c] = _mm256_setzero_ps();                                       \
            for (p = 0; p < n; p++) {                                                                           \
                const T *v = vb + p * kv_stride;                                                                \
                const __m256 a = _mm256_set1_ps(s[p]);                                                          \
                for (int64_t c = 0; c < nv; c++) ov[c] = _mm256_fmadd_ps(a, LOAD8(v + 8 * c), ov[c]);           \
            }                                                                                                   \
            for (int64_t c = 0; c < nv; c++) _mm256_storeu_ps(o + j * hd + 8 * c, ov[c]);                       \
        }                                                                                                       \
    }

DEF_ATTN_PART_AVX2(attn_part_avx2, float, _mm256_loadu_ps, attn_part_scalar)
DEF_ATTN_PART_AVX2(attn_part_f16_avx2, ex_fp16, load8_f16, attn_part_f16_scalar)

/* vcvtps2ph with round to nearest even (immediate, not MXCSR); the tail as the scalar path */
static AVX2_FN void f32_to_f16_avx2(const float *src, ex_fp16 *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = ex_f32_to_fp16(src[i]);
}
#endif

ex_attn_part_fn ex_pick_attn_part(void)
{
#ifdef EX_X86
    if (ex_cpu_features() & EX_CPU_AVX2) return attn_part_avx2;
#endif
    return attn_part_scalar;
}

ex_attn_part_fn ex_pick_attn_part_f16(void)
{
#ifdef EX_X86
    if (ex_cpu_features() & EX_CPU_AVX2) return attn_part_f16_avx2;
#endif
    return attn_part_f16_scalar;
}

ex_f32_to_f16_fn ex_pick_f32_to_f16(void)
{
#ifdef EX_X86
    if (ex_cpu_features() & EX_CPU_AVX2) return f32_to_f16_avx2;
#endif
    return f32_to_f16_scalar;
}

ex_dot_f32_fn ex_pick_dot_f32(void)
{
#ifdef EX_X86
    if (ex_cpu_features() & EX_CPU_AVX2) return dot_f32_avx2;
#endif
    return dot_f32_scalar;
}

ex_axpy_f32_fn ex_pick_axpy_f32(void)
{
#ifdef EX_X86
    if (ex_cpu_features() & EX_CPU_AVX2) return axpy_f32_avx2;
#endif
    return axpy_f32_scalar;
}

/* ---- matmul --------------------------------------------------------------------------------- */

static vec_dot_fn pick_dot(ats_qtype t, unsigned f)
{
    (void)f;
    switch (t) {
#ifdef EX_X86
    case ATS_Q_Q4_0: return (f & EX_CPU_AVX512VNNI) ? dot_q4_0_vnni : (f & EX_CPU_AVX2) ? dot_q4_0_avx2 : dot_q4_0_scalar;
    case ATS_Q_Q8_0: return (f & EX_CPU_AVX512VNNI) ? dot_q8_0_vnni : (f & EX_CPU_AVX2) ? dot_q8_0_avx2 : dot_q8_0_scalar;
    case ATS_Q_Q4_K: return (f & EX_CPU_AVX512VNNI) ? dot_q4_K_vnni : (f & EX_CPU_AVX2) ? dot_q4_K_avx2 : dot_q4_K_scalar;
    case ATS_Q_Q6_K: return (f & EX_CPU_AVX512VNNI) ? dot_q6_K_vnni : (f & EX_CPU_AVX2) ? dot_q6_K_avx2 : dot_q6_K_scalar;
#else
    case ATS_Q_Q4_0: return dot_q4_0_scalar;
    case ATS_Q_Q8_0: return dot_q8_0_scalar;
    case ATS_Q_Q4_K: return dot_q4_K_scalar;
    case ATS_Q_Q6_K: return dot_q6_K_scalar;
#endif
#ifdef EX_X86
    case ATS_Q_MXFP4: return (f & EX_CPU_AVX512VNNI) ? dot_mxfp4_vnni : (f & EX_CPU_AVX2) ? dot_mxfp4_avx2 : dot_mxfp4_scalar;
#else
    case ATS_Q_MXFP4: return dot_mxfp4_scalar;
#endif
    default: return NULL;
    }
}

static vec_dot4_fn pick_dot4(ats_qtype t, unsigned f)
{
    (void)t;
    (void)f;
#ifdef EX_X86
    switch (t) {
    case ATS_Q_Q4_0: return (f & EX_CPU_AVX512VNNI) ? dot4_q4_0_vnni : (f & EX_CPU_AVX2) ? dot4_q4_0_avx2 : NULL;
    case ATS_Q_Q8_0: return (f & EX_CPU_AVX512VNNI) ? dot4_q8_0_vnni : (f & EX_CPU_AVX2) ? dot4_q8_0_avx2 : NULL;
    case ATS_Q_Q4_K: return (f & EX_CPU_AVX512VNNI) ? dot4_q4_K_vnni : (f & EX_CPU_AVX2) ? dot4_q4_K_avx2 : NULL;
    case ATS_Q_Q6_K: return (f & EX_CPU_AVX512VNNI) ? dot4_q6_K_vnni : (f & EX_CPU_AVX2) ? dot4_q6_K_avx2 : NULL;
    default: break;
    }
#endif
    return NULL;
}

/* decode (one token): 4 weight rows per call, bit for bit the one-row kernels (pick_dot) */
static vec_dotr4_fn pick_dotr4(ats_qtype t, unsigned f)
{
    (void)t;
    (void)f;
#ifdef EX_X86
#ifdef EX_DECODE_ONE_ROW /* an A/B build (experiments/kernels/ab.sh): the one-row kernels only */
    f = 0;
#endif
    switch (t) {
    case ATS_Q_Q4_0: return (f & EX_CPU_AVX512VNNI) ? dotr4_q4_0_vnni : (f & EX_CPU_AVX2) ? dotr4_q4_0_avx2 : NULL;
    case ATS_Q_MXFP4: return (f & EX_CPU_AVX512VNNI) ? dotr4_mxfp4_vnni : (f & EX_CPU_AVX2) ? dotr4_mxfp4_avx2 : NULL;
    case ATS_Q_Q4_K: return (f & EX_CPU_AVX512VNNI) ? dotr4_q4_K_vnni : NULL;
    case ATS_Q_Q6_K: return (f & EX_CPU_AVX512VNNI) ? dotr4_q6_K_vnni : NULL;
    default: break;
    }
#endif
    return NULL;
}

/* 8 tokens per weight row: only where 32 vector registers hold the unpacked block and 8 sums */
static vec_dot8_fn pick_dot8(ats_qtype t, unsigned f)
{
    (void)t;
    (void)f;
#ifdef EX_X86
    switch (t) {
    case ATS_Q_Q4_0: return (f & EX_CPU_AVX512VNNI) ? dot8_q4_0_vnni : NULL;
    case ATS_Q_Q8_0: return (f & EX_CPU_AVX512VNNI) ? dot8_q8_0_vnni : NULL;
    case ATS_Q_Q4_K: return (f & EX_CPU_AVX512VNNI) ? dot8_q4_K_vnni : NULL;
    case ATS_Q_Q6_K: return (f & EX_CPU_AVX512VNNI) ? dot8_q6_K_vnni : NULL;
    default: break;
    }
#endif
    return NULL;
}

static int valid_matmul(const ex_tensor *w)
{
    uint64_t rb;
    if (!ex_qtype_supported(w->type) || w->ne[0] <= 0 || w->ne[1] <= 0) return 0;
    return ats_qtype_bytes(w->type, w->ne[0], &rb) == ATS_OK && rb == w->row_bytes;
}

/* One-token rows [r0, r1) of W (nb blocks a row) against the quantized activation xq, the decode tiles of
   ex_cpu_matmul and ex_cpu_matmul_multi: dotr4 on 4-row groups where the type has one, the one-row dot else. */
static void decode_rows(const ex_tensor *w, vec_dot_fn dot, vec_dotr4_fn dotr4, const uint8_t *xq, int64_t nb,
                        int64_t r0, int64_t r1, float *y)
{
    const uint8_t *W = w->data;
    const int64_t n_out = w->ne[1];
    int64_t r = r0;
    if (dotr4)
        for (; r + 4 <= r1; r += 4)
            dotr4(W + (size_t)r * w->row_bytes, w->row_bytes, xq, nb,
                  r + 8 <= n_out ? W + (size_t)(r + 4) * w->row_bytes : NULL, y + r);
    for (; r < r1; r++) y[r] = dot(W + (size_t)r * w->row_bytes, xq, nb);
}

enum ats_status ex_cpu_matmul(const ex_tensor *w, const float *x, int64_t n_tokens, float *y)
{
    if (!valid_matmul(w) || n_tokens < 1) return ATS_EINVAL;
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    const uint8_t *W = w->data;
    const unsigned f = ex_cpu_features();
    /* Parallel regions only pay off above ~256K multiply-adds: a region costs a wake-up of every
       thread, and under background load a descheduled thread delays it by a scheduler tick. */
    const int par = (double)n_out * (double)n_in * (double)n_tokens >= 262144.0;
    if (w->type == ATS_Q_F32) {
        float (*dot)(const float *, const float *, int64_t) = dot_f32_scalar;
#ifdef EX_X86
        if (f & EX_CPU_AVX2) dot = dot_f32_avx2;
#endif
#pragma omp parallel for schedule(dynamic, 32) if (par)
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t t = 0; t < n_tokens; t++)
                y[t * n_out + r] = dot((const float *)(W + (size_t)r * w->row_bytes), x + t * n_in, n_in);
        return ATS_OK;
    }
    if (w->type == ATS_Q_F16 || w->type == ATS_Q_BF16) {
#ifdef EX_X86
        if (f & EX_CPU_AVX2) {
            float (*fd)(const void *, const float *, int64_t) = w->type == ATS_Q_F16 ? fdot_f16_avx2 : fdot_bf16_avx2;
#pragma omp parallel for schedule(dynamic, 32) if (par)
            for (int64_t r = 0; r < n_out; r++)
                for (int64_t t = 0; t < n_tokens; t++) y[t * n_out + r] = fd(W + (size_t)r * w->row_bytes, x + t * n_in, n_in);
            return ATS_OK;
        }
#endif
        int bad = 0;
#pragma omp parallel if (par)
        {
            float *row = malloc((size_t)n_in * sizeof(float));
            if (!row) {
#pragma omp atomic write
                bad = 1;
            }
#pragma omp for schedule(static)
            for (int64_t r = 0; r < n_out; r++) {
                if (!row) continue;
                ex_dequantize_row(w->type, W + (size_t)r * w->row_bytes, row, n_in);
                for (int64_t t = 0; t < n_tokens; t++) {
                    const float *xt = x + t * n_in;
                    float s = 0;
                    for (int64_t i = 0; i < n_in; i++) s += row[i] * xt[i];
                    y[t * n_out + r] = s;
                }
            }
            free(row);
        }
        return bad ? ATS_ENOMEM : ATS_OK;
    }
    const int kq = w->type == ATS_Q_Q4_K || w->type == ATS_Q_Q6_K;
    const int64_t nb = n_in / (kq ? 256 : 32);
    const size_t abytes = (size_t)nb * (kq ? sizeof(ex_block_q8_K) : sizeof(ex_block_q8_1));
    uint8_t *xq = malloc(abytes * (size_t)n_tokens);
    void (*q81)(const float *, ex_block_q8_1 *, int64_t) = quant_q8_1;
    void (*q8k)(const float *, ex_block_q8_K *, int64_t) = quant_q8_K;
#ifdef EX_X86
#ifdef EX_QUANT_SCALAR /* an A/B build (experiments/kernels/ab.sh): the scalar quantizer only */
    const int simd_quant = 0;
#else
    const int simd_quant = 1;
#endif
    if (simd_quant && (f & EX_CPU_AVX2)) {
        q81 = quant_q8_1_avx2;
        q8k = quant_q8_K_avx2;
    }
#endif
    if (!xq) return ATS_ENOMEM;
#pragma omp parallel for schedule(static) if (par && n_tokens > 1)
    for (int64_t t = 0; t < n_tokens; t++) {
        if (kq) q8k(x + t * n_in, (ex_block_q8_K *)(xq + abytes * (size_t)t), nb);
        else q81(x + t * n_in, (ex_block_q8_1 *)(xq + abytes * (size_t)t), nb);
    }
    /* Q4_K / Q6_K prefill on AMX tiles (cpu_amx.c), bit for bit the scalar path */
    const unsigned amx = EX_CPU_AMX | EX_CPU_AVX512VNNI | EX_CPU_AVX512; /* its epilogue uses VNNI's vpdpwssd */
    if (kq && n_tokens >= EX_CPU_AMX_MIN_TOKENS && (f & amx) == amx) {
        enum ats_status st = ex_amx_matmul_kq(w, xq, abytes, n_tokens, y, par);
        free(xq);
        return st;
    }
    /* Q4_0 / Q8_0 with AVX-512 VNNI: the 4- and 8-token kernels read the tokens regrouped by 8 (q8_group);
       decode and the 1-token rest read xq as on every other path */
    uint8_t *xg = NULL;
    const size_t gbytes = (size_t)nb * Q8G_BLOCK_BYTES;
#ifdef EX_X86
    if ((f & EX_CPU_AVX512VNNI) && (w->type == ATS_Q_Q4_0 || w->type == ATS_Q_Q8_0) && n_tokens >= 4) {
        const int64_t ng = (n_tokens + 7) / 8;
        xg = aligned_alloc(64, gbytes * (size_t)ng);
        if (!xg) {
            free(xq);
            return ATS_ENOMEM;
        }
#pragma omp parallel for schedule(static) if (par)
        for (int64_t g = 0; g < ng; g++)
            q8_group((const ex_block_q8_1 *)(xq + abytes * (size_t)(8 * g)), abytes,
                     n_tokens - 8 * g < 8 ? (int)(n_tokens - 8 * g) : 8, nb, w->type == ATS_Q_Q8_0, xg + gbytes * (size_t)g);
    }
#endif
    vec_dot_fn dot = pick_dot(w->type, f);
    vec_dot4_fn dot4 = n_tokens >= 4 ? pick_dot4(w->type, f) : NULL;
    vec_dot8_fn dot8 = n_tokens >= 8 ? pick_dot8(w->type, f) : NULL;
    vec_dotr4_fn dotr4 = n_tokens == 1 ? pick_dotr4(w->type, f) : NULL;
    /* Tiles of EX_ROW_TILE weight rows x EX_TOK_TILE tokens: a prefill chunk reads each weight row
       from DRAM once, while the tile's activations stay in L2. Decode is one token per tile. */
    enum { EX_ROW_TILE = 16, EX_TOK_TILE = 32 };
    const int64_t n_rt = (n_out + EX_ROW_TILE - 1) / EX_ROW_TILE;
#pragma omp parallel for schedule(dynamic, 2) if (par)
    for (int64_t rt = 0; rt < n_rt; rt++) {
        const int64_t r0 = rt * EX_ROW_TILE, r1 = r0 + EX_ROW_TILE < n_out ? r0 + EX_ROW_TILE : n_out;
        if (n_tokens == 1) {
            decode_rows(w, dot, dotr4, xq, nb, r0, r1, y);
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tokens; t0 += EX_TOK_TILE) {
            const int64_t t1 = t0 + EX_TOK_TILE < n_tokens ? t0 + EX_TOK_TILE : n_tokens;
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *wr = W + (size_t)r * w->row_bytes;
                int64_t t = t0;
                if (dot8)
                    for (; t + 8 <= t1; t += 8) {
                        float o[8];
                        dot8(wr, xg ? xg + gbytes * (size_t)(t / 8) : xq + abytes * (size_t)t, abytes, nb, o);
                        for (int j = 0; j < 8; j++) y[(t + j) * n_out + r] = o[j];
                    }
                if (dot4)
                    for (; t + 4 <= t1; t += 4) {
                        float o[4];
                        /* with xg, t is a multiple of 8 (a group's start): tiles start at multiples of
                           32, dot8 is present from 8 tokens on, and a second 4-token call in a row would
                           have been an 8-token one */
                        if (xg) ATS_ASSERT(t % 8 == 0);
                        dot4(wr, xg ? xg + gbytes * (size_t)(t / 8) : xq + abytes * (size_t)t, abytes, nb, o);
                        for (int j = 0; j < 4; j++) y[(t + j) * n_out + r] = o[j];
                    }
                for (; t < t1; t++) y[t * n_out + r] = dot(wr, xq + abytes * (size_t)t, nb);
            }
        }
    }
    free(xg);
    free(xq);
    return ATS_OK;
}

enum ats_status ex_cpu_matmul_multi(const ex_tensor *w, const float *const *x, float *const *y, int n_mat)
{
    if (n_mat < 1) return ATS_EINVAL;
    const unsigned f = ex_cpu_features();
    int quantized = 1;
    for (int i = 0; i < n_mat; i++) {
        if (!valid_matmul(&w[i])) return ATS_EINVAL;
        if (!pick_dot(w[i].type, f)) quantized = 0;
    }
    if (!quantized) { /* F32 / F16 / BF16: one call each */
        for (int i = 0; i < n_mat; i++) {
            enum ats_status st = ex_cpu_matmul(&w[i], x[i], 1, y[i]);
            if (st != ATS_OK) return st;
        }
        return ATS_OK;
    }
    enum { EX_ROW_TILE = 16 };
    /* per matrix: its quantized input (shared with an earlier matrix of the same input and block kind), its
       first tile in the shared numbering */
    uint8_t **xq = calloc((size_t)n_mat, sizeof *xq);
    int *owner = malloc((size_t)n_mat * sizeof *owner);
    int64_t *tile0 = malloc((size_t)(n_mat + 1) * sizeof *tile0);
    enum ats_status st = xq && owner && tile0 ? ATS_OK : ATS_ENOMEM;
    double work = 0;
    for (int i = 0; i < n_mat && st == ATS_OK; i++) {
        const int kq = w[i].type == ATS_Q_Q4_K || w[i].type == ATS_Q_Q6_K;
        const int64_t n_in = w[i].ne[0], nb = n_in / (kq ? 256 : 32);
        owner[i] = i;
        for (int j = 0; j < i; j++) {
            const int kj = w[j].type == ATS_Q_Q4_K || w[j].type == ATS_Q_Q6_K;
            if (owner[j] == j && x[j] == x[i] && kj == kq && w[j].ne[0] == n_in) {
                owner[i] = j;
                break;
            }
        }
        tile0[i] = i ? tile0[i - 1] + (w[i - 1].ne[1] + EX_ROW_TILE - 1) / EX_ROW_TILE : 0;
        work += (double)w[i].ne[0] * (double)w[i].ne[1];
        if (owner[i] != i) continue;
        xq[i] = malloc((size_t)nb * (kq ? sizeof(ex_block_q8_K) : sizeof(ex_block_q8_1)));
        if (!xq[i]) {
            st = ATS_ENOMEM;
            break;
        }
#ifdef EX_X86
        if (f & EX_CPU_AVX2) {
            if (kq) quant_q8_K_avx2(x[i], (ex_block_q8_K *)xq[i], nb);
            else quant_q8_1_avx2(x[i], (ex_block_q8_1 *)xq[i], nb);
        } else
#endif
        {
            if (kq) quant_q8_K(x[i], (ex_block_q8_K *)xq[i], nb);
            else quant_q8_1(x[i], (ex_block_q8_1 *)xq[i], nb);
        }
    }
    if (st == ATS_OK) {
        tile0[n_mat] = tile0[n_mat - 1] + (w[n_mat - 1].ne[1] + EX_ROW_TILE - 1) / EX_ROW_TILE;
        const int64_t n_t = tile0[n_mat];
#pragma omp parallel for schedule(dynamic, 2) if (work >= 262144.0)
        for (int64_t k = 0; k < n_t; k++) {
            int i = 0;
            while (tile0[i + 1] <= k) i++;
            const int kq = w[i].type == ATS_Q_Q4_K || w[i].type == ATS_Q_Q6_K;
            const int64_t r0 = (k - tile0[i]) * EX_ROW_TILE;
            const int64_t r1 = r0 + EX_ROW_TILE < w[i].ne[1] ? r0 + EX_ROW_TILE : w[i].ne[1];
            decode_rows(&w[i], pick_dot(w[i].type, f), pick_dotr4(w[i].type, f), xq[owner[i]],
                        w[i].ne[0] / (kq ? 256 : 32), r0, r1, y[i]);
        }
    }
    if (xq)
        for (int i = 0; i < n_mat; i++) free(xq[i]);
    free(xq);
    free(owner);
    free(tile0);
    return st;
}

enum ats_status ex_cpu_matmul_ref(const ex_tensor *w, const float *x, int64_t n_tokens, float *y)
{
    if (!valid_matmul(w) || n_tokens < 1) return ATS_EINVAL;
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    float *row = malloc((size_t)n_in * sizeof(float));
    if (!row) return ATS_ENOMEM;
    for (int64_t r = 0; r < n_out; r++) {
        ex_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, row, n_in);
        for (int64_t t = 0; t < n_tokens; t++) {
            double s = 0;
            for (int64_t i = 0; i < n_in; i++) s += (double)row[i] * x[t * n_in + i];
            y[t * n_out + r] = (float)s;
        }
    }
    free(row);
    return ATS_OK;
}
