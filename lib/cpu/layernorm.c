/*
 * LayerNorm and RMSNorm over rows x [n, c], forward and backward.
 *
 * LayerNorm:
 *   mean = (1/c) Σ x,   rstd = 1 / sqrt((1/c) Σ (x − mean)² + eps),
 *   y = x̂ · w + b   with x̂ = (x − mean) · rstd
 * RMSNorm (LayerNorm without the mean and the bias):
 *   rstd = 1 / sqrt((1/c) Σ x² + eps),   y = x̂ · w   with x̂ = x · rstd
 *
 * Backward, with g = dy · w (w = 1 when absent). LayerNorm:
 *   dx = rstd · (g − mean(g) − x̂ · mean(g · x̂))      per row
 *   dw = Σ_rows dy · x̂,   db = Σ_rows dy              per column
 * RMSNorm, derived from y = x · rstd · w, rstd = (s/c + eps)^(−1/2), s = Σ_k x_k²:
 *   ∂rstd/∂x_j = −½ (s/c + eps)^(−3/2) · 2x_j/c = −rstd³ · x_j / c, so
 *   dx_j = Σ_k g_k ∂(x_k · rstd)/∂x_j = g_j · rstd − (Σ_k g_k x_k) · rstd³ · x_j / c
 *        = rstd · (g_j − x̂_j · mean(g · x̂))             per row
 *   dw = Σ_rows dy · x̂                                  per column
 * which is LayerNorm's backward with mean = 0 and without the mean(g) term:
 * both run the same code below, a NULL mean meaning RMSNorm's.
 *
 * Row statistics are summed in f64, LayerNorm's variance in a second pass
 * around the mean (no cancellation as with E[x²] − E[x]²). The backward
 * reads x and dy once: dw and db are summed per fixed chunk of rows
 * alongside dx, then the chunks in order, so they do not depend on the
 * thread count.
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

tfc_status tfc_cpu_rmsnorm_forward(const tfc_rmsnorm_problem *p) {
    TFC_DISPATCH(p->dtype, rmsnorm_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_rmsnorm_backward(const tfc_rmsnorm_problem *p) {
    TFC_DISPATCH(p->dtype, rmsnorm_backward, p);
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

static void FN(rmsnorm_forward)(const tfc_rmsnorm_problem *p) {
    const int64_t n = p->rows, c = p->cols;
    const double eps = p->eps;
    const T *x = p->x, *w = p->weight;
    T *y = p->y, *rstd = p->rstd;
    TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            const T *xr = x + r * c;
            T *yr = y + r * c;
            ACC sq = 0;
            SIMD_SUM(sq)
            for (int64_t j = 0; j < c; j++) sq += (ACC)xr[j] * (ACC)xr[j];
            T rs = (T)(1.0 / sqrt(sq / (ACC)c + eps));
            if (w)
                for (int64_t j = 0; j < c; j++) yr[j] = xr[j] * rs * w[j];
            else
                for (int64_t j = 0; j < c; j++) yr[j] = xr[j] * rs;
            if (rstd) rstd[r] = rs;
        }
    }
}

/*
 * The backward below serves both norms: mean == NULL is RMSNorm (m = 0,
 * and no mean(g) term), and db is then NULL.
 */

/* mean(g) (0 for RMSNorm) and mean(g · x̂) of one row, g = dy · w (the dx formula's row terms). */
static inline void FN(layernorm_row_means)(int64_t c, const T *restrict dyr, const T *restrict xr, const T *restrict w,
                                           T m, T rs, int centered, T *mg, T *mgx) {
    ACC sg = 0, sgx = 0;
    SIMD_SUM(sg, sgx)
    for (int64_t j = 0; j < c; j++) {
        T g = w ? dyr[j] * w[j] : dyr[j];
        sg += g;
        sgx += g * ((xr[j] - m) * rs);
    }
    *mg = centered ? (T)(sg / (ACC)c) : 0;
    *mgx = (T)(sgx / (ACC)c);
}

/* dx for rows [lo, hi). */
static void FN(layernorm_dx_rows)(int64_t lo, int64_t hi, int64_t c, const T *dy, const T *x, const T *w, const T *mean,
                                  const T *rstd, T *dx, int accumulate) {
    for (int64_t r = lo; r < hi; r++) {
        const T *xr = x + r * c, *dyr = dy + r * c;
        T *dxr = dx + r * c;
        T m = mean ? mean[r] : 0, rs = rstd[r], mg, mgx;
        FN(layernorm_row_means)(c, dyr, xr, w, m, rs, mean != NULL, &mg, &mgx);
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
                T m = mean ? mean[r] : 0, rs = rstd[r];
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

/* One row of the one-pass backward: dx, and dy·x̂, dy added into pw, pb (pb NULL: skipped). */
static inline void FN(layernorm_bwd_row)(int64_t c, const T *restrict dyr, const T *restrict xr, const T *restrict w,
                                         T m, T rs, int centered, T *restrict dxr, T *restrict pw, T *restrict pb,
                                         int accumulate) {
    T mg, mgx;
    FN(layernorm_row_means)(c, dyr, xr, w, m, rs, centered, &mg, &mgx);
    if (accumulate)
        for (int64_t j = 0; j < c; j++) {
            T xh = (xr[j] - m) * rs, g = w ? dyr[j] * w[j] : dyr[j];
            dxr[j] += rs * (g - mg - xh * mgx);
            pw[j] += dyr[j] * xh;
            if (pb) pb[j] += dyr[j];
        }
    else
        for (int64_t j = 0; j < c; j++) {
            T xh = (xr[j] - m) * rs, g = w ? dyr[j] * w[j] : dyr[j];
            dxr[j] = rs * (g - mg - xh * mgx);
            pw[j] += dyr[j] * xh;
            if (pb) pb[j] += dyr[j];
        }
}

/*
 * One pass over x and dy for dx, dw and db together: rows go in fixed
 * chunks of LN_ROWS, each chunk sums its rows' dy·x̂ (and dy, when db is
 * asked for) into its own partial [np, c] (part; np = 2 with db, else 1),
 * and dw, db are then the partials summed in chunk order, in ACC. The
 * chunking does not depend on the thread count, so neither do dw and db.
 */
static void FN(layernorm_backward_fused)(int64_t n, int64_t c, const T *dy, const T *x, const T *w, const T *mean,
                                         const T *rstd, T *dx, T *dw, T *db, int accumulate, T *part) {
    const int64_t nchunks = (n + LN_ROWS - 1) / LN_ROWS, np = db ? 2 : 1;
    TFC_PARALLEL_RANGE(nchunks, TFC_GRAIN(LN_ROWS * c), lo, hi) {
        for (int64_t ch = lo; ch < hi; ch++) {
            T *pw = part + ch * np * c, *pb = db ? pw + c : NULL;
            for (int64_t j = 0; j < np * c; j++) pw[j] = 0;
            int64_t r1 = (ch + 1) * LN_ROWS < n ? (ch + 1) * LN_ROWS : n;
            for (int64_t r = ch * LN_ROWS; r < r1; r++) {
                const int64_t o = r * c;
                const T m = mean ? mean[r] : 0;
                FN(layernorm_bwd_row)(c, dy + o, x + o, w, m, rstd[r], mean != NULL, dx + o, pw, pb, accumulate);
            }
        }
    }
    int64_t nblocks = (c + LN_COLS - 1) / LN_COLS;
    TFC_PARALLEL_RANGE(nblocks, TFC_GRAIN(nchunks * np * LN_COLS), lo, hi) {
        for (int64_t blk = lo; blk < hi; blk++) {
            int64_t c0 = blk * LN_COLS, nc = c - c0 < LN_COLS ? c - c0 : LN_COLS;
            ACC sw[LN_COLS] = {0}, sb[LN_COLS] = {0};
            for (int64_t ch = 0; ch < nchunks; ch++) {
                const T *pw = part + ch * np * c + c0;
                for (int64_t j = 0; j < nc; j++) sw[j] += (ACC)pw[j];
                if (db)
                    for (int64_t j = 0; j < nc; j++) sb[j] += (ACC)pw[c + j];
            }
            for (int64_t j = 0; j < nc; j++) {
                if (dw) dw[c0 + j] = (T)(accumulate ? dw[c0 + j] + sw[j] : sw[j]);
                if (db) db[c0 + j] = (T)(accumulate ? db[c0 + j] + sb[j] : sb[j]);
            }
        }
    }
}

/* Both norms' backward (mean NULL: RMSNorm's, with db NULL). */
static void FN(norm_backward)(int64_t n, int64_t c, const T *dy, const T *x, const T *w, const T *mean, const T *rstd,
                              T *dx, T *dw, T *db, int accumulate) {
    if (dx && (dw || db) && n > 0 && c > 0) {
        size_t bytes = (size_t)((n + LN_ROWS - 1) / LN_ROWS) * (db ? 2 : 1) * (size_t)c * sizeof(T);
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

static void FN(layernorm_backward)(const tfc_layernorm_problem *p) {
    FN(norm_backward)
    (p->rows, p->cols, p->dy, p->x, p->weight, p->mean, p->rstd, p->dx, p->dweight, p->dbias, p->accumulate);
}

static void FN(rmsnorm_backward)(const tfc_rmsnorm_problem *p) {
    FN(norm_backward)(p->rows, p->cols, p->dy, p->x, p->weight, NULL, p->rstd, p->dx, p->dweight, NULL, p->accumulate);
}

#endif
