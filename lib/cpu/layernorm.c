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
 * the mean (no cancellation as with E[x²] − E[x]²). The backward reads x
 * and dy once: dw and db are summed per fixed chunk of rows alongside dx,
 * then the chunks in order, so they do not depend on the thread count.
 */
#ifndef TFC_T

#include "cpu/kernels.h"

/* Columns per block of the dw/db reduction (their f64 sums live on the stack). */
#define LN_COLS 32
/* Rows per partial sum of dw/db in the one-pass backward. */
#define LN_ROWS 64

#include "core/alloc.h"

#define TFC_TMPL_FILE "cpu/layernorm.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_layernorm_forward(const tfc_layernorm_problem *p) {
    TFC_DISPATCH(p->dtype, layernorm_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_layernorm_backward(const tfc_layernorm_problem *p) {
    TFC_DISPATCH(p->dtype, layernorm_backward, p);
    return TFC_OK;
}

#else /* TFC_T: the kernels for element type T */

static void FN(layernorm_forward)(const tfc_layernorm_problem *p) {
    const int64_t n = p->rows, c = p->cols;
    const double eps = p->eps;
    const T *x = p->x, *w = p->weight, *b = p->bias;
    T *y = p->y, *mean = p->mean, *rstd = p->rstd;
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

/* mean(g) and mean(g · x̂) of one row, g = dy · w (the dx formula's row terms). */
static inline void FN(layernorm_row_means)(int64_t c, const T *restrict dyr, const T *restrict xr, const T *restrict w,
                                           T m, T rs, T *mg, T *mgx) {
    ACC sg = 0, sgx = 0;
    SIMD_SUM(sg, sgx)
    for (int64_t j = 0; j < c; j++) {
        T g = w ? dyr[j] * w[j] : dyr[j];
        sg += g;
        sgx += g * ((xr[j] - m) * rs);
    }
    *mg = (T)(sg / (ACC)c);
    *mgx = (T)(sgx / (ACC)c);
}

/* dx for rows [lo, hi). */
static void FN(layernorm_dx_rows)(int64_t lo, int64_t hi, int64_t c, const T *dy, const T *x, const T *w, const T *mean,
                                  const T *rstd, T *dx, int accumulate) {
    for (int64_t r = lo; r < hi; r++) {
        const T *xr = x + r * c, *dyr = dy + r * c;
        T *dxr = dx + r * c;
        T m = mean[r], rs = rstd[r], mg, mgx;
        FN(layernorm_row_means)(c, dyr, xr, w, m, rs, &mg, &mgx);
        for (int64_t j = 0; j < c; j++) {
            T g = w ? dyr[j] * w[j] : dyr[j];
            T v = rs * (g - mg - (xr[j] - m) * rs * mgx);
            dxr[j] = accumulate ? dxr[j] + v : v;
        }
    }
}

/*
 * dw, db by columns in blocks of LN_COLS, each block summing the rows in
 * order: a second pass over x and dy. Used without dx, or when the scratch
 * of the one-pass version cannot be had.
 */
static void FN(layernorm_dwdb_columns)(int64_t n, int64_t c, const T *dy, const T *x, const T *mean, const T *rstd,
                                       T *dw, T *db, int accumulate) {
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

/* One row of the one-pass backward: dx, and dy·x̂, dy added into pw, pb. */
static inline void FN(layernorm_bwd_row)(int64_t c, const T *restrict dyr, const T *restrict xr, const T *restrict w,
                                         T m, T rs, T *restrict dxr, T *restrict pw, T *restrict pb, int accumulate) {
    T mg, mgx;
    FN(layernorm_row_means)(c, dyr, xr, w, m, rs, &mg, &mgx);
    if (accumulate)
        for (int64_t j = 0; j < c; j++) {
            T xh = (xr[j] - m) * rs, g = w ? dyr[j] * w[j] : dyr[j];
            dxr[j] += rs * (g - mg - xh * mgx);
            pw[j] += dyr[j] * xh;
            pb[j] += dyr[j];
        }
    else
        for (int64_t j = 0; j < c; j++) {
            T xh = (xr[j] - m) * rs, g = w ? dyr[j] * w[j] : dyr[j];
            dxr[j] = rs * (g - mg - xh * mgx);
            pw[j] += dyr[j] * xh;
            pb[j] += dyr[j];
        }
}

/*
 * One pass over x and dy for dx, dw and db together: rows go in fixed
 * chunks of LN_ROWS, each chunk sums its rows' dy·x̂ and dy into its own
 * partial [2, c] (part), and dw, db are then the partials summed in chunk
 * order, in ACC. The chunking does not depend on the thread count, so
 * neither do dw and db.
 */
static void FN(layernorm_backward_fused)(int64_t n, int64_t c, const T *dy, const T *x, const T *w, const T *mean,
                                         const T *rstd, T *dx, T *dw, T *db, int accumulate, T *part) {
    int64_t nchunks = (n + LN_ROWS - 1) / LN_ROWS;
    TFC_PARALLEL_RANGE(nchunks, TFC_GRAIN(LN_ROWS * c), lo, hi) {
        for (int64_t ch = lo; ch < hi; ch++) {
            T *pw = part + ch * 2 * c, *pb = pw + c;
            for (int64_t j = 0; j < 2 * c; j++) pw[j] = 0;
            int64_t r1 = (ch + 1) * LN_ROWS < n ? (ch + 1) * LN_ROWS : n;
            for (int64_t r = ch * LN_ROWS; r < r1; r++)
                FN(layernorm_bwd_row)(c, dy + r * c, x + r * c, w, mean[r], rstd[r], dx + r * c, pw, pb, accumulate);
        }
    }
    int64_t nblocks = (c + LN_COLS - 1) / LN_COLS;
    TFC_PARALLEL_RANGE(nblocks, TFC_GRAIN(nchunks * 2 * LN_COLS), lo, hi) {
        for (int64_t blk = lo; blk < hi; blk++) {
            int64_t c0 = blk * LN_COLS, nc = c - c0 < LN_COLS ? c - c0 : LN_COLS;
            ACC sw[LN_COLS] = {0}, sb[LN_COLS] = {0};
            for (int64_t ch = 0; ch < nchunks; ch++) {
                const T *pw = part + ch * 2 * c + c0, *pb = pw + c;
                for (int64_t j = 0; j < nc; j++) {
                    sw[j] += (ACC)pw[j];
                    sb[j] += (ACC)pb[j];
                }
            }
            for (int64_t j = 0; j < nc; j++) {
                if (dw) dw[c0 + j] = (T)(accumulate ? dw[c0 + j] + sw[j] : sw[j]);
                if (db) db[c0 + j] = (T)(accumulate ? db[c0 + j] + sb[j] : sb[j]);
            }
        }
    }
}

static void FN(layernorm_backward)(const tfc_layernorm_problem *p) {
    const int64_t n = p->rows, c = p->cols;
    const T *dy = p->dy, *x = p->x, *w = p->weight, *mean = p->mean, *rstd = p->rstd;
    T *dx = p->dx, *dw = p->dweight, *db = p->dbias;
    const int accumulate = p->accumulate;
    if (dx && (dw || db) && n > 0 && c > 0) {
        size_t bytes = (size_t)((n + LN_ROWS - 1) / LN_ROWS) * 2 * (size_t)c * sizeof(T);
        T *part = tfc_host_alloc(bytes);
        if (part) {
            FN(layernorm_backward_fused)(n, c, dy, x, w, mean, rstd, dx, dw, db, accumulate, part);
            tfc_host_free(part, bytes);
            return;
        }
    }
    if (dx) {
        TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
            FN(layernorm_dx_rows)(lo, hi, c, dy, x, w, mean, rstd, dx, accumulate);
        }
    }
    if (dw || db) FN(layernorm_dwdb_columns)(n, c, dy, x, mean, rstd, dw, db, accumulate);
}

#endif
