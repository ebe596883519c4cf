/*
 * Quantize, dequantize and the portable quantized linear (formats byte by
 * byte in include/tfcore/quant.h), and the run-time choice of the linear's
 * instruction family. Rounding is round-half-even of the f32 quotient
 * w / scale (nearbyintf in the default mode), as torch.quantize_per_channel.
 */
#include <math.h>

#include "core/error.h"
#include "cpu/parallel.h"
#include "cpu/quant.h"
#include "tfcore/quant.h"

/* Codes per scale and the largest code of a format. */
static int64_t group_of(const tfc_quant_problem *p) { return p->format == TFC_QFORMAT_INT4 ? p->group : p->K; }

tfc_status tfc_cpu_quantize(const tfc_quant_problem *p) {
    const float *w = p->w;
    const int64_t N = p->N, K = p->K, G = group_of(p), ng = K / G, sn = p->w_sn, sk = p->w_sk;
    const int int4 = p->format == TFC_QFORMAT_INT4;
    const float qmax = int4 ? 7.0f : 127.0f;
    /* A non-finite weight would make its whole group NaN or 0: refuse it by position. */
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            if (!isfinite(w[n * sn + k * sk]))
                return tfc_err(TFC_ERR_NONFINITE, "w[%lld,%lld] (row %lld of W [%lld,%lld]) is %g", (long long)n,
                               (long long)k, (long long)n, (long long)N, (long long)K, (double)w[n * sn + k * sk]);
    float *scales = p->scales;
    int8_t *c8 = p->codes;
    uint8_t *c4 = p->codes;
    TFC_PARALLEL_RANGE(N, 1 + 65536 / K, lo, hi) {
        for (int64_t n = lo; n < hi; n++)
            for (int64_t g = 0; g < ng; g++) {
                const float *wr = w + n * sn + g * G * sk;
                float amax = 0;
                for (int64_t k = 0; k < G; k++) amax = fmaxf(amax, fabsf(wr[k * sk]));
                const float s = amax / qmax;
                scales[n * ng + g] = s;
                for (int64_t k = 0; k < G; k++) {
                    float q = s > 0 ? nearbyintf(wr[k * sk] / s) : 0.0f;
                    q = fminf(fmaxf(q, -qmax), qmax);
                    const int64_t e = n * K + g * G + k;
                    if (!int4)
                        c8[e] = (int8_t)q;
                    else if (k % 2 == 0)
                        c4[e / 2] = (uint8_t)((int)q + 8);
                    else
                        c4[e / 2] |= (uint8_t)(((int)q + 8) << 4);
                }
            }
    }
    return TFC_OK;
}

tfc_status tfc_cpu_dequantize(const tfc_quant_problem *p) {
    const int64_t N = p->N, K = p->K, G = group_of(p), ng = K / G;
    const float *scales = p->scales;
    const int8_t *c8 = p->codes;
    const uint8_t *c4 = p->codes;
    float *out = p->w_out;
    const int64_t sn = p->out_in ? 1 : K, sk = p->out_in ? N : 1;
    TFC_PARALLEL_RANGE(N, 1 + 65536 / K, lo, hi) {
        for (int64_t n = lo; n < hi; n++)
            for (int64_t k = 0; k < K; k++) {
                const int64_t e = n * K + k;
                const int q = p->format == TFC_QFORMAT_INT4 ? ((c4[e / 2] >> (4 * (k & 1))) & 15) - 8 : c8[e];
                out[n * sn + k * sk] = (float)q * scales[n * ng + k / G];
            }
    }
    return TFC_OK;
}

/* One dot product of x [K] with row n's codes: int8 scaled at the end, int4 per group. */
static float dot_row(int32_t format, int64_t K, int64_t G, const float *x, const void *codes, const float *scales) {
    if (format == TFC_QFORMAT_INT8) {
        const int8_t *c = codes;
        float a[4] = {0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 4 <= K; k += 4)
            for (int j = 0; j < 4; j++) a[j] += (float)c[k + j] * x[k + j];
        for (; k < K; k++) a[0] += (float)c[k] * x[k];
        return ((a[0] + a[1]) + (a[2] + a[3])) * scales[0];
    }
    const uint8_t *c = codes;
    float acc = 0;
    for (int64_t g = 0; g < K / G; g++) {
        float ga[2] = {0, 0};
        for (int64_t k = g * G; k < (g + 1) * G; k += 2) {
            ga[0] += (float)((c[k / 2] & 15) - 8) * x[k];
            ga[1] += (float)((c[k / 2] >> 4) - 8) * x[k + 1];
        }
        acc += (ga[0] + ga[1]) * scales[g];
    }
    return acc;
}

void tfc_cpu_qrows_portable(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G,
                            const float *x, const void *codes, const float *scales, const float *b, float *y) {
    const int int4 = format == TFC_QFORMAT_INT4;
    const int64_t row_bytes = int4 ? K / 2 : K, ng = int4 ? K / G : 1;
    for (int64_t n = n0; n < n1; n++) {
        const char *cr = (const char *)codes + n * row_bytes;
        for (int64_t m = 0; m < M; m++)
            y[m * N + n] = dot_row(format, K, G, x + m * K, cr, scales + n * ng) + (b ? b[n] : 0.0f);
    }
}

tfc_status tfc_cpu_qlinear(const tfc_quant_problem *p) {
    tfc_qrows_fn fn = tfc_cpu_qrows_portable;
#if TFC_HAVE_QUANT_SIMD
    const int isa = tfc_cpu_qisa();
    if (isa == TFC_QISA_AVX512)
        fn = tfc_cpu_qrows_avx512;
    else if (isa == TFC_QISA_AVX2)
        fn = tfc_cpu_qrows_avx2;
#endif
    const int64_t N = p->N, M = p->M, K = p->K;
    /* Threads only for at least ~64K multiply-adds each: a GEMV row block of a small layer stays on one core. */
    const int64_t grain = 1 + 65536 / (K * M > 0 ? K * M : 1);
    TFC_PARALLEL_RANGE(N, grain, lo, hi) {
        fn(p->format, lo, hi, M, N, K, p->group, p->x, p->codes, p->scales, p->b, p->y);
    }
    return TFC_OK;
}
