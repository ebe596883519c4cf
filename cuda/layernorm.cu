/*
 * LayerNorm and RMSNorm over the last dim of x [rows, C], weight w [C].
 *
 * LayerNorm, with bias b [C] (b may be NULL):
 *   mean = sum_c x_c / C,  var = sum_c (x_c - mean)^2 / C (biased),
 *   rstd = 1 / sqrt(var + eps),  xhat_c = (x_c - mean) rstd,
 *   y_c = xhat_c w_c + b_c;  mean and rstd [rows] (f32) are saved.
 * RMSNorm (no mean, no bias):
 *   rstd = 1 / sqrt(sum_c x_c^2 / C + eps),  xhat_c = x_c rstd,
 *   y_c = xhat_c w_c;  rstd [rows] (f32) is saved.
 * Backward, with g_c = dy_c w_c:
 *   LayerNorm: dx_c = rstd (g_c - mean_j g_j - xhat_c mean_j(g_j xhat_j))
 *              dw_c = sum_r dy_rc xhat_rc,  db_c = sum_r dy_rc
 *   RMSNorm:   dx_c = rstd (g_c - xhat_c mean_j(g_j xhat_j)),  dw_c as above
 *              (the derivation is in lib/cpu/layernorm.c's head comment).
 * RMSNorm is LayerNorm with the mean taken as 0 and the mean(g) term and
 * db dropped, so one set of kernels serves both: Centered = true is
 * LayerNorm, false RMSNorm. Everything is computed in f32; a bf16 y or
 * gradient is rounded once, when stored.
 * One warp per row for the row statistics (warp shuffles, no shared
 * memory). dw/db are column sums over rows, done deterministically in two
 * kernels: per-chunk partial sums into scratch [chunks, C], then a
 * fixed-order sum over chunks. The launchers are the backend table's
 * layernorm and rmsnorm entries (tfc_layernorm_problem,
 * tfc_rmsnorm_problem): a NULL weight is a scratch vector of ones, NULL
 * mean/rstd scratch the forward drops.
 */
#include "common.cuh"
#include "entries.h"

template <class T, bool Centered>
__global__ void norm_forward_kernel(const T *x, const T *w, const T *b, float eps, T *y, float *mean, float *rstd,
                                    size_t rows, size_t C) {
    int lane = threadIdx.x & 31;
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const T *xr = x + r * C;
        float m = 0.0f;
        if (Centered) {
            float s = 0.0f;
            for (size_t c = lane; c < C; c += 32) s += tfcu_load(xr, c);
            m = tfcu_warp_sum(s) / (float)C;
        }
        float v = 0.0f;
        for (size_t c = lane; c < C; c += 32) {
            float d = tfcu_load(xr, c) - m;
            v += d * d;
        }
        float rs = rsqrtf(tfcu_warp_sum(v) / (float)C + eps);
        for (size_t c = lane; c < C; c += 32) {
            float o = (tfcu_load(xr, c) - m) * rs * tfcu_load(w, c);
            if (b) o += tfcu_load(b, c);
            y[r * C + c] = tfcu_from_f<T>(o);
        }
        if (lane == 0) {
            if (Centered) mean[r] = m;
            rstd[r] = rs;
        }
    }
}

template <class T, bool Centered>
__global__ void norm_dx_kernel(const T *dy, const T *x, const T *w, const float *mean, const float *rstd, T *dx,
                               size_t rows, size_t C, bool acc) {
    int lane = threadIdx.x & 31;
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        size_t off = r * C;
        float m = Centered ? mean[r] : 0.0f, rs = rstd[r], sg = 0.0f, sgx = 0.0f;
        for (size_t c = lane; c < C; c += 32) {
            float g = tfcu_load(dy, off + c) * tfcu_load(w, c);
            sg += g;
            sgx += g * (tfcu_load(x, off + c) - m) * rs;
        }
        sg = Centered ? tfcu_warp_sum(sg) / (float)C : 0.0f;
        sgx = tfcu_warp_sum(sgx) / (float)C;
        for (size_t c = lane; c < C; c += 32) {
            float g = tfcu_load(dy, off + c) * tfcu_load(w, c), xh = (tfcu_load(x, off + c) - m) * rs;
            tfcu_store_grad(dx, off + c, rs * (g - sg - xh * sgx), acc);
        }
    }
}

/* partial_w/partial_b [chunks, C]: sums over rows [chunk*rows_per, (chunk+1)*rows_per); no partial_b for RMSNorm. */
template <class T, bool Centered>
__global__ void norm_dwdb_partial_kernel(const T *dy, const T *x, const float *mean, const float *rstd,
                                         float *partial_w, float *partial_b, size_t rows, size_t C, size_t rows_per) {
    size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= C) return;
    size_t r0 = chunk * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
    float sw = 0.0f, sb = 0.0f;
    for (size_t r = r0; r < r1; r++) {
        float g = tfcu_load(dy, r * C + c);
        sw += g * (tfcu_load(x, r * C + c) - (Centered ? mean[r] : 0.0f)) * rstd[r];
        sb += g;
    }
    partial_w[chunk * C + c] = sw;
    if (Centered) partial_b[chunk * C + c] = sb;
}

/* dw, db (each or NULL) = the partials summed over chunks in order; partial_b is read only for db. */
template <class T>
__global__ void norm_dwdb_final_kernel(const float *partial_w, const float *partial_b, T *dw, T *db, size_t C,
                                       size_t chunks, bool acc) {
    size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (size_t k = 0; k < chunks; k++) {
        sw += partial_w[k * C + c];
        if (db) sb += partial_b[k * C + c];
    }
    if (dw) tfcu_store_grad(dw, c, sw, acc);
    if (db) tfcu_store_grad(db, c, sb, acc);
}

static unsigned warp_row_blocks(size_t rows) {
    size_t b = (rows + 7) / 8; /* 8 warps of 256 threads */
    return b < 65535u * 16 ? (unsigned)(b ? b : 1) : 65535u * 16;
}

/*
 * One scratch block, released (stream-ordered) with tfcu_scratch_free once
 * the kernels are queued, holding what the caller lacks: when *w is NULL a
 * weight of ones [C] (a norm without weight), and, where the pointers are
 * given and *mean / *rstd are NULL, mean and rstd [rows] the forward's
 * caller does not keep. *block is NULL when nothing was needed.
 */
static tfc_status norm_scratch(tfcu_ctx *c, const char *fn, int32_t device, tfc_dtype dtype, size_t rows, size_t C,
                               void **block, const void **w, float **mean, float **rstd) {
    const size_t es = dtype == TFC_DTYPE_BF16 ? 2 : 4;
    const size_t wbytes = *w ? 0 : (C * es + 15) / 16 * 16;
    const size_t mbytes = mean && !*mean ? rows * 4 : 0, rbytes = rstd && !*rstd ? rows * 4 : 0;
    *block = NULL;
    if (!wbytes && !mbytes && !rbytes) return TFC_OK;
    TFCU_TRY(tfcu_scratch(c, fn, wbytes + mbytes + rbytes, block));
    char *at = (char *)*block;
    if (wbytes) {
        tfc_fill_problem f = {};
        f.device = device, f.value = 1.0;
        f.dst.data = at, f.dst.dtype = dtype, f.dst.ndim = 1, f.dst.shape[0] = (int64_t)C, f.dst.strides[0] = 1;
        tfc_status s = tfcu_fill(&f);
        if (s != TFC_OK) {
            tfcu_scratch_free(c, *block);
            *block = NULL;
            return s;
        }
        *w = at;
        at += wbytes;
    }
    if (mbytes) *mean = (float *)at, at += mbytes;
    if (rbytes) *rstd = (float *)at;
    return TFC_OK;
}

/* Queues dw and db (each or NULL; db only for LayerNorm) from dy, x and the statistics. */
template <class T, bool Centered>
static tfc_status norm_dwdb(tfcu_ctx *c, const char *fn, const T *dy, const T *x, const float *mean, const float *rstd,
                            T *dw, T *db, size_t rows, size_t C, bool acc) {
    /* Enough chunks to fill the GPU, few enough that the final pass is short. */
    size_t col_blocks = (C + 255) / 256, want = (size_t)c->sm_count * 4 / col_blocks + 1;
    size_t chunks = rows ? (want < rows ? want : rows) : 1, rows_per = rows ? (rows + chunks - 1) / chunks : 1;
    if (chunks > 65535) chunks = 65535, rows_per = (rows + chunks - 1) / chunks;
    const size_t nparts = Centered ? 2 : 1;
    float *partial;
    TFCU_TRY(tfcu_scratch(c, fn, nparts * chunks * C * sizeof(float), (void **)&partial));
    float *partial_b = Centered ? partial + chunks * C : NULL;
    tfc_status s = TFC_OK;
    if (rows) {
        norm_dwdb_partial_kernel<T, Centered><<<dim3((unsigned)col_blocks, (unsigned)chunks), 256, 0, c->stream>>>(
            dy, x, mean, rstd, partial, partial_b, rows, C, rows_per);
        s = TFCU_LAUNCHED(fn, "norm_dwdb_partial_kernel");
    } else {
        s = tfcu_cuda(cudaMemsetAsync(partial, 0, nparts * chunks * C * sizeof(float), c->stream), fn,
                      "cudaMemsetAsync");
    }
    if (s == TFC_OK) {
        norm_dwdb_final_kernel<T>
            <<<(unsigned)col_blocks, 256, 0, c->stream>>>(partial, partial_b, dw, db, C, chunks, acc);
        s = TFCU_LAUNCHED(fn, "norm_dwdb_final_kernel");
    }
    tfcu_scratch_free(c, partial);
    return s;
}

tfc_status tfcu_layernorm_forward(const tfc_layernorm_problem *p) {
    const char *fn = "tfcu_layernorm_forward";
    const size_t rows = (size_t)p->rows, C = (size_t)p->cols;
    const float eps = (float)p->eps;
    const void *x = p->x, *w = p->weight, *b = p->bias;
    void *y = p->y, *block;
    float *mean = (float *)p->mean, *rstd = (float *)p->rstd;
    tfcu_ctx *c;
    if (!rows) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    TFCU_TRY(norm_scratch(c, fn, p->device, p->dtype, rows, C, &block, &w, &mean, &rstd));
    tfc_status st = tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        norm_forward_kernel<T, true><<<warp_row_blocks(rows), 256, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)b, eps, (T *)y, mean, rstd, rows, C);
        return TFCU_LAUNCHED(fn, "norm_forward_kernel");
    });
    if (block) tfcu_scratch_free(c, block);
    return st;
}

/* The weight may be NULL (ones); dx, dweight, dbias each or NULL. */
tfc_status tfcu_layernorm_backward(const tfc_layernorm_problem *p) {
    const char *fn = "tfcu_layernorm_backward";
    const size_t rows = (size_t)p->rows, C = (size_t)p->cols;
    const void *dy = p->dy, *x = p->x, *w = p->weight;
    const float *mean = (const float *)p->mean, *rstd = (const float *)p->rstd;
    void *dx = p->dx, *dw = p->dweight, *db = p->dbias, *block = NULL;
    const bool acc = p->accumulate != 0;
    tfcu_ctx *c;
    if (!C) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    if (dx && rows) TFCU_TRY(norm_scratch(c, fn, p->device, p->dtype, rows, C, &block, &w, NULL, NULL));
    tfc_status st = tfcu_dispatch_float(fn, p->dtype, [&](auto t) -> tfc_status {
        typedef decltype(t) T;
        if (dx && rows) {
            norm_dx_kernel<T, true><<<warp_row_blocks(rows), 256, 0, c->stream>>>(
                (const T *)dy, (const T *)x, (const T *)w, mean, rstd, (T *)dx, rows, C, acc);
            TFCU_TRY(TFCU_LAUNCHED(fn, "norm_dx_kernel"));
        }
        if (!dw && !db) return TFC_OK;
        return norm_dwdb<T, true>(c, fn, (const T *)dy, (const T *)x, mean, rstd, (T *)dw, (T *)db, rows, C, acc);
    });
    if (block) tfcu_scratch_free(c, block);
    return st;
}

tfc_status tfcu_rmsnorm_forward(const tfc_rmsnorm_problem *p) {
    const char *fn = "tfcu_rmsnorm_forward";
    const size_t rows = (size_t)p->rows, C = (size_t)p->cols;
    const float eps = (float)p->eps;
    const void *x = p->x, *w = p->weight;
    void *y = p->y, *block;
    float *rstd = (float *)p->rstd;
    tfcu_ctx *c;
    if (!rows) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    TFCU_TRY(norm_scratch(c, fn, p->device, p->dtype, rows, C, &block, &w, NULL, &rstd));
    tfc_status st = tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        norm_forward_kernel<T, false><<<warp_row_blocks(rows), 256, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)NULL, eps, (T *)y, (float *)NULL, rstd, rows, C);
        return TFCU_LAUNCHED(fn, "norm_forward_kernel");
    });
    if (block) tfcu_scratch_free(c, block);
    return st;
}

/* The weight may be NULL (ones); dx, dweight each or NULL. */
tfc_status tfcu_rmsnorm_backward(const tfc_rmsnorm_problem *p) {
    const char *fn = "tfcu_rmsnorm_backward";
    const size_t rows = (size_t)p->rows, C = (size_t)p->cols;
    const void *dy = p->dy, *x = p->x, *w = p->weight;
    const float *rstd = (const float *)p->rstd;
    void *dx = p->dx, *dw = p->dweight, *block = NULL;
    const bool acc = p->accumulate != 0;
    tfcu_ctx *c;
    if (!C) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    if (dx && rows) TFCU_TRY(norm_scratch(c, fn, p->device, p->dtype, rows, C, &block, &w, NULL, NULL));
    tfc_status st = tfcu_dispatch_float(fn, p->dtype, [&](auto t) -> tfc_status {
        typedef decltype(t) T;
        if (dx && rows) {
            norm_dx_kernel<T, false><<<warp_row_blocks(rows), 256, 0, c->stream>>>(
                (const T *)dy, (const T *)x, (const T *)w, (const float *)NULL, rstd, (T *)dx, rows, C, acc);
            TFCU_TRY(TFCU_LAUNCHED(fn, "norm_dx_kernel"));
        }
        if (!dw) return TFC_OK;
        return norm_dwdb<T, false>(c, fn, (const T *)dy, (const T *)x, (const float *)NULL, rstd, (T *)dw, (T *)NULL,
                                   rows, C, acc);
    });
    if (block) tfcu_scratch_free(c, block);
    return st;
}
