/*
 * The quantized linear with AVX-512 (avx512f/bw/vl): codes widened to f32 in
 * registers (16 a vector) and accumulated with FMA against f32 x, four rows
 * of x at a time so each unpacked weight vector feeds four FMAs, two
 * accumulators per row to hide FMA latency. K tails use masked loads.
 * Built for these instructions only inside this file; called only when
 * tfc_cpu_qisa() says the CPU has them.
 */
#include "cpu/quant.h"

#if TFC_HAVE_QUANT_SIMD
#include <immintrin.h>
#include <stdlib.h>

#include "tfcore/quant.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#endif

#define INLINE static inline __attribute__((always_inline))
/* MB is a constant after inlining: unrolled, the row accumulators stay in registers (not so at -O2 otherwise). */
#define ROWS(i) _Pragma("GCC unroll 4") for (int i = 0; i < MB; i++)

INLINE __m512 widen(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

/* 32 int4 codes (16 bytes, low nibble first) as two vectors of k order 0..15, 16..31. */
INLINE void unpack32(const uint8_t *p, __m512 *w0, __m512 *w1) {
    const __m128i b = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(15), e = _mm_set1_epi8(8);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    *w0 = widen(_mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), e));
    *w1 = widen(_mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), e));
}

/* out[i] = Σ_k c[k] · x_i[k] for MB rows x_i = x + i·K (int8 codes of one row). */
INLINE void dot_i8(int MB, int64_t K, const int8_t *c, const float *x, float *out) {
    __m512 a[4], a2[4];
    ROWS(i) a[i] = a2[i] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        const __m512 w0 = widen(_mm_loadu_si128((const __m128i *)(c + k)));
        const __m512 w1 = widen(_mm_loadu_si128((const __m128i *)(c + k + 16)));
        ROWS(i) {
            a[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i * K + k), a[i]);
            a2[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i * K + k + 16), a2[i]);
        }
    }
    for (; k < K; k += 16) {
        const int64_t r = K - k < 16 ? K - k : 16;
        const __mmask16 mk = (__mmask16)((1u << r) - 1u);
        const __m512 w0 = widen(_mm_maskz_loadu_epi8(mk, c + k));
        ROWS(i) a[i] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk, x + i * K + k), a[i]);
    }
    ROWS(i) out[i] = _mm512_reduce_add_ps(_mm512_add_ps(a[i], a2[i]));
}

/*
 * x for the int4 dot products: each block of 32 as its 16 even k, then its
 * 16 odd k, so a byte's low nibble (even k) and high nibble (odd k) pair
 * with x without interleaving the codes (PREPARE_X of quant_rows.h). Once
 * per call, M·K values, against N·K codes to unpack. NULL (x as it is) for
 * int8, and when there is no memory (the driver then runs the AVX2 rows).
 */
static float *int4_x(int32_t format, int64_t M, int64_t K, const float *x) {
    if (format != TFC_QFORMAT_INT4) return NULL;
    float *xp = malloc((size_t)(M * K) * sizeof *xp);
    if (!xp) return NULL;
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t e = 0; e < M * K; e += 32) { /* K is a multiple of 32 */
        const __m512 lo = _mm512_loadu_ps(x + e), hi = _mm512_loadu_ps(x + e + 16);
        _mm512_storeu_ps(xp + e, _mm512_permutex2var_ps(lo, ev, hi));
        _mm512_storeu_ps(xp + e + 16, _mm512_permutex2var_ps(lo, od, hi));
    }
    return xp;
}
#define PREPARE_X int4_x
#define PREPARE_X_NEEDED(format) ((format) == TFC_QFORMAT_INT4)
#define PREPARE_X_FALLBACK tfc_cpu_qrows_avx2 /* an AVX-512 CPU has AVX2; it reads x as it is */

/*
 * The same for int4 codes with one scale per group of G (a multiple of 32),
 * x in int4_x's layout. 32 codes cost one zero-extending load (a byte per
 * lane) and two vpermps that read the nibble as an index into the table of
 * code values −8..7 (vpermps uses the low 4 bits of each lane: no mask, no
 * subtract, no int-to-float conversion), plus one shift for the high
 * nibbles.
 */
INLINE void dot_i4(int MB, int64_t K, int64_t G, const uint8_t *c, const float *s, const float *x, float *out) {
    const __m512 vals = _mm512_set_ps(7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8);
    __m512 acc[4];
    ROWS(i) acc[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < K / G; g++) {
        __m512 a[4], a2[4];
        ROWS(i) a[i] = a2[i] = _mm512_setzero_ps();
        for (int64_t k = g * G; k < (g + 1) * G; k += 32) {
            const __m512i by = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + k / 2)));
            const __m512 w0 = _mm512_permutexvar_ps(by, vals);
            const __m512 w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(by, 4), vals);
            ROWS(i) {
                a[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i * K + k), a[i]);
                a2[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i * K + k + 16), a2[i]);
            }
        }
        const __m512 sv = _mm512_set1_ps(s[g]);
        ROWS(i) acc[i] = _mm512_fmadd_ps(_mm512_add_ps(a[i], a2[i]), sv, acc[i]);
    }
    ROWS(i) out[i] = _mm512_reduce_add_ps(acc[i]);
}

/* Rows [n0, n0+nb) of W as f32 into dst [nb, K]: the same product (float)q · scale per element as quant.c's. */
void tfc_cpu_qtile_avx512(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                          const void *codes, const float *scales, float *dst) {
    for (int64_t r = 0; r < nb; r++) {
        float *d = dst + r * kb;
        if (format == TFC_QFORMAT_INT8) {
            const int8_t *c = (const int8_t *)codes + (n0 + r) * K + k0;
            const float s = scales[n0 + r];
            const __m512 sv = _mm512_set1_ps(s);
            int64_t k = 0;
            for (; k + 16 <= kb; k += 16)
                _mm512_storeu_ps(d + k, _mm512_mul_ps(widen(_mm_loadu_si128((const __m128i *)(c + k))), sv));
            for (; k < kb; k++) d[k] = (float)c[k] * s;
        } else {
            const uint8_t *c = (const uint8_t *)codes + (n0 + r) * (K / 2) + k0 / 2;
            const float *s = scales + (n0 + r) * (K / G);
            for (int64_t k = 0; k < kb; k += 32) {
                __m512 w0, w1;
                unpack32(c + k / 2, &w0, &w1);
                const __m512 sv = _mm512_set1_ps(s[(k0 + k) / G]);
                _mm512_storeu_ps(d + k, _mm512_mul_ps(w0, sv));
                _mm512_storeu_ps(d + k + 16, _mm512_mul_ps(w1, sv));
            }
        }
    }
}

#define QROWS_NAME tfc_cpu_qrows_avx512
#include "cpu/quant_rows.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
