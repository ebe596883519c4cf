/*
 * LayerNorm over rows x [n, c], forward and backward.
 *
 *   mean = (1/c) Σ x,   rstd = 1 / sqrt((1/c) Σ (x − mean)² + eps),
 *   y = x̂ · w + b   with x̂ = (x − mean) · rstd
 *
 * Backward, with g = dy · w (w = 1 when absent):
 *   dx = rstd · (g − mean(g) − x̂ · mean(g · x̂))      per row
 *   dw = Σ_rows dy · x̂,   db = Σ_rows dy              per column
 *
 * Row statistics are summed in f64, the variance in a second pass around
 * the mean (no cancellation as with E[x²] − E[x]²). The column sums are
 * parallel over blocks of columns, each summing the rows in order, so dw
 * and db do not depend on the thread count.
 */
#ifndef TFC_T

#include "cpu/kernels.h"

/* Columns per block of the dw/db reduction (their f64 sums live on the stack). */
#define LN_COLS 32

#define TFC_TMPL_FILE "cpu/layernorm.c"
#include "cpu/kernel_tmpl.h"

void tfc_cpu_layernorm_forward(tfc_dtype dt, int64_t n, int64_t c, const void *x, const void *weight,
                               const void *bias, double eps, void *y, void *mean, void *rstd) {
    TFC_DISPATCH(dt, layernorm_forward, n, c, x, weight, bias, eps, y, mean, rstd);
}

void tfc_cpu_layernorm_backward(tfc_dtype dt, int64_t n, int64_t c, const void *dy, const void *x,
                                const void *weight, const void *mean, const void *rstd, void *dx, void *dweight,
                                void *dbias, int accumulate) {
    TFC_DISPATCH(dt, layernorm_backward, n, c, dy, x, weight, mean, rstd, dx, dweight, dbias, accumulate);
}

#else /* TFC_T: the kernels for element type T */

static void FN(layernorm_forward)(int64_t n, int64_t c, const T *x, const T *w, const T *b, double eps, T *y,
                                  T *mean, T *rstd) {
    TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            const T *xr = x + r * c;
            T *yr = y + r * c;
            ACC sum = 0;
            SIMD_SUM(sum)
            for (int64_t j = 0; j < c; j++) sum += xr[j];
            ACC mu = sum / (ACC)c;
            ACC sq = 0;
            SIMD_SUM(sq)
            for (int64_t j = 0; j < c; j++) sq += ((ACC)xr[j] - mu) * ((ACC)xr[j] - mu);
            T m = (T)mu, rs = (T)(1.0 / sqrt(sq / (ACC)c + eps));
            if (w && b)
                for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - m) * rs * w[j] + b[j];
            else if (w)
                for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - m) * rs * w[j];
            else if (b)
                for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - m) * rs + b[j];
            else
                for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - m) * rs;
            if (mean) mean[r] = m;
            if (rstd) rstd[r] = rs;
        }
    }
}

/* dx for rows [lo, hi). */
static void FN(layernorm_dx_rows)(int64_t lo, int64_t hi, int64_t c, const T *dy, const T *x, const T *w,
                                  const T *mean, const T *rstd, T *dx, int accumulate) {
    for (int64_t r = lo; r < hi; r++) {
        const T *xr = x + r * c, *dyr = dy + r * c;
        T *dxr = dx + r * c;
        T m = mean[r], rs = rstd[r];
        ACC sg = 0, sgx = 0;
        SIMD_SUM(sg, sgx)
        for (int64_t j = 0; j < c; j++) {
            T g = w ? dyr[j] * w[j] : dyr[j];
            sg += g;
            sgx += g * ((xr[j] - m) * rs);
        }
        T mg = (T)(sg / (ACC)c), mgx = (T)(sgx / (ACC)c);
        for (int64_t j = 0; j < c; j++) {
            T g = w ? dyr[j] * w[j] : dyr[j];
            T v = rs * (g - mg - (xr[j] - m) * rs * mgx);
            dxr[j] = accumulate ? dxr[j] + v : v;
        }
    }
}

static void FN(layernorm_backward)(int64_t n, int64_t c, const T *dy, const T *x, const T *w, const T *mean,
                                   const T *rstd, T *dx, T *dw, T *db, int accumulate) {
    if (dx) {
        TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
            FN(layernorm_dx_rows)(lo, hi, c, dy, x, w, mean, rstd, dx, accumulate);
        }
    }
    if (!dw && !db) return;
    int64_t nblocks = (c + LN_COLS - 1) / LN_COLS;
    TFC_PARALLEL_RANGE(nblocks, TFC_GRAIN(n * LN_COLS), lo, hi) {
        for (int64_t blk = lo; blk < hi; blk++) {
            int64_t c0 = blk * LN_COLS, nc = c - c0 < LN_COLS ? c - c0 : LN_COLS;
            ACC sw[LN_COLS] = {0}, sb[LN_COLS] = {0};
            for (int64_t r = 0; r < n; r++) {
                const T *xr = x + r * c + c0, *dyr = dy + r * c + c0;
                T m = mean[r], rs = rstd[r];
                for (int64_t j = 0; j < nc; j++) {
                    sw[j] += (ACC)(dyr[j] * ((xr[j] - m) * rs));
                    sb[j] += (ACC)dyr[j];
                }
            }
            for (int64_t j = 0; j < nc; j++) {
                if (dw) dw[c0 + j] = (T)(accumulate ? dw[c0 + j] + sw[j] : sw[j]);
                if (db) db[c0 + j] = (T)(accumulate ? db[c0 + j] + sb[j] : sb[j]);
            }
        }
    }
}

#endif
