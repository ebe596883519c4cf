/*
 * The quantized linear with AVX2+FMA: as quant_avx512.c with 8-lane vectors
 * (codes widened to f32 in registers, four rows of x per unpacked weight
 * vector, two accumulators a row); an int8 K tail below 16 runs in scalar.
 */
#include "cpu/quant.h"

#if TFC_HAVE_QUANT_SIMD
#include <immintrin.h>

#include "tfcore/quant.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#define INLINE static inline __attribute__((always_inline))
/* MB is a constant after inlining: unrolled, the row accumulators stay in registers (not so at -O2 otherwise). */
#define ROWS(i) _Pragma("GCC unroll 4") for (int i = 0; i < MB; i++)

/* 16 int8 as two 8-lane f32 vectors. */
INLINE void widen16(__m128i v, __m256 *w0, __m256 *w1) {
    *w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
    *w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
}

INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE void dot_i8(int MB, int64_t K, const int8_t *c, const float *x, float *out) {
    __m256 a[4], a2[4];
    ROWS(i) a[i] = a2[i] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m256 w0, w1;
        widen16(_mm_loadu_si128((const __m128i *)(c + k)), &w0, &w1);
        ROWS(i) {
            a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * K + k), a[i]);
            a2[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * K + k + 8), a2[i]);
        }
    }
    ROWS(i) {
        float t = hsum(_mm256_add_ps(a[i], a2[i]));
        for (int64_t j = k; j < K; j++) t += (float)c[j] * x[i * K + j];
        out[i] = t;
    }
}

INLINE void dot_i4(int MB, int64_t K, int64_t G, const uint8_t *c, const float *s, const float *x, float *out) {
    const __m128i m15 = _mm_set1_epi8(15), e8 = _mm_set1_epi8(8);
    __m256 acc[4];
    ROWS(i) acc[i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < K / G; g++) {
        __m256 a[4], a2[4];
        ROWS(i) a[i] = a2[i] = _mm256_setzero_ps();
        for (int64_t k = g * G; k < (g + 1) * G; k += 32) {
            const __m128i bt = _mm_loadu_si128((const __m128i *)(c + k / 2));
            const __m128i lo = _mm_and_si128(bt, m15), hi = _mm_and_si128(_mm_srli_epi16(bt, 4), m15);
            __m256 w[4];
            widen16(_mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), e8), &w[0], &w[1]);
            widen16(_mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), e8), &w[2], &w[3]);
            ROWS(i) {
                const float *xi = x + i * K + k;
                a[i] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xi), a[i]);
                a2[i] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xi + 8), a2[i]);
                a[i] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xi + 16), a[i]);
                a2[i] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xi + 24), a2[i]);
            }
        }
        const __m256 sv = _mm256_set1_ps(s[g]);
        ROWS(i) acc[i] = _mm256_fmadd_ps(_mm256_add_ps(a[i], a2[i]), sv, acc[i]);
    }
    ROWS(i) out[i] = hsum(acc[i]);
}

/* Rows [n0, n0+nb) of W as f32 into dst [nb, K]: the same product (float)q · scale per element as quant.c's. */
void tfc_cpu_qtile_avx2(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                        const void *codes, const float *scales, float *dst) {
    const __m128i m15 = _mm_set1_epi8(15), e8 = _mm_set1_epi8(8);
    for (int64_t r = 0; r < nb; r++) {
        float *d = dst + r * kb;
        if (format == TFC_QFORMAT_INT8) {
            const int8_t *c = (const int8_t *)codes + (n0 + r) * K + k0;
            const float s = scales[n0 + r];
            const __m256 sv = _mm256_set1_ps(s);
            int64_t k = 0;
            for (; k + 16 <= kb; k += 16) {
                __m256 w0, w1;
                widen16(_mm_loadu_si128((const __m128i *)(c + k)), &w0, &w1);
                _mm256_storeu_ps(d + k, _mm256_mul_ps(w0, sv));
                _mm256_storeu_ps(d + k + 8, _mm256_mul_ps(w1, sv));
            }
            for (; k < kb; k++) d[k] = (float)c[k] * s;
        } else {
            const uint8_t *c = (const uint8_t *)codes + (n0 + r) * (K / 2) + k0 / 2;
            const float *s = scales + (n0 + r) * (K / G);
            for (int64_t k = 0; k < kb; k += 32) {
                const __m128i bt = _mm_loadu_si128((const __m128i *)(c + k / 2));
                const __m128i lo = _mm_and_si128(bt, m15), hi = _mm_and_si128(_mm_srli_epi16(bt, 4), m15);
                __m256 w[4];
                widen16(_mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), e8), &w[0], &w[1]);
                widen16(_mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), e8), &w[2], &w[3]);
                const __m256 sv = _mm256_set1_ps(s[(k0 + k) / G]);
                for (int j = 0; j < 4; j++) _mm256_storeu_ps(d + k + 8 * j, _mm256_mul_ps(w[j], sv));
            }
        }
    }
}

#define QROWS_NAME tfc_cpu_qrows_avx2
#include "cpu/quant_rows.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
