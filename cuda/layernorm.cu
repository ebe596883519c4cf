/*
 * LayerNorm over the last dim of x [rows, C] with weight w [C] and bias
 * b [C] (b may be NULL):
 *   mean = sum_c x_c / C,  var = sum_c (x_c - mean)^2 / C (biased),
 *   rstd = 1 / sqrt(var + eps),  xhat_c = (x_c - mean) rstd,
 *   y_c = xhat_c w_c + b_c;  mean and rstd [rows] (f32) are saved.
 * Backward, with g_c = dy_c w_c:
 *   dx_c = rstd (g_c - mean_j g_j - xhat_c mean_j(g_j xhat_j))
 *   dw_c = sum_r dy_rc xhat_rc,  db_c = sum_r dy_rc
 * One warp per row for the row statistics (warp shuffles, no shared
 * memory). dw/db are column sums over rows, done deterministically in two
 * kernels: per-chunk partial sums into scratch [chunks, C], then a
 * fixed-order sum over chunks. The launchers are the backend table's
 * layernorm entries (tfc_layernorm_problem): a NULL weight is a scratch
 * vector of ones, NULL mean/rstd scratch the forward drops.
 */
#include "common.cuh"
#include "entries.h"

template <class T>
__global__ void layernorm_forward_kernel(const T *x, const T *w, const T *b, float eps, T *y, float *mean, float *rstd,
                                         size_t rows, size_t C) {
    int lane = threadIdx.x & 31;
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const T *xr = x + r * C;
        float s = 0.0f;
        for (size_t c = lane; c < C; c += 32) s += tfcu_load(xr, c);
        float m = tfcu_warp_sum(s) / (float)C;
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
            mean[r] = m;
            rstd[r] = rs;
        }
    }
}

template <class T>
__global__ void layernorm_dx_kernel(const T *dy, const T *x, const T *w, const float *mean, const float *rstd, T *dx,
                                    size_t rows, size_t C, bool acc) {
    int lane = threadIdx.x & 31;
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        size_t off = r * C;
        float m = mean[r], rs = rstd[r], sg = 0.0f, sgx = 0.0f;
        for (size_t c = lane; c < C; c += 32) {
            float g = tfcu_load(dy, off + c) * tfcu_load(w, c);
            sg += g;
            sgx += g * (tfcu_load(x, off + c) - m) * rs;
        }
        sg = tfcu_warp_sum(sg) / (float)C;
        sgx = tfcu_warp_sum(sgx) / (float)C;
        for (size_t c = lane; c < C; c += 32) {
            float g = tfcu_load(dy, off + c) * tfcu_load(w, c), xh = (tfcu_load(x, off + c) - m) * rs;
            tfcu_store_grad(dx, off + c, rs * (g - sg - xh * sgx), acc);
        }
    }
}

/* partial_w/partial_b [chunks, C]: sums over rows [chunk*rows_per, (chunk+1)*rows_per). */
template <class T>
__global__ void layernorm_dwdb_partial_kernel(const T *dy, const T *x, const float *mean, const float *rstd,
                                              float *partial_w, float *partial_b, size_t rows, size_t C,
                                              size_t rows_per) {
    size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= C) return;
    size_t r0 = chunk * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
    float sw = 0.0f, sb = 0.0f;
    for (size_t r = r0; r < r1; r++) {
        float g = tfcu_load(dy, r * C + c);
        sw += g * (tfcu_load(x, r * C + c) - mean[r]) * rstd[r];
        sb += g;
    }
    partial_w[chunk * C + c] = sw;
    partial_b[chunk * C + c] = sb;
}

template <class T>
__global__ void layernorm_dwdb_final_kernel(const float *partial_w, const float *partial_b, T *dw, T *db, size_t C,
                                            size_t chunks, bool acc) {
    size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (size_t k = 0; k < chunks; k++) {
        sw += partial_w[k * C + c];
        sb += partial_b[k * C + c];
    }
    if (dw) tfcu_store_grad(dw, c, sw, acc);
    if (db) tfcu_store_grad(db, c, sb, acc);
}

static unsigned warp_row_blocks(size_t rows) {
    size_t b = (rows + 7) / 8; /* 8 warps of 256 threads */
    return b < 65535u * 16 ? (unsigned)(b ? b : 1) : 65535u * 16;
}

/*
 * A weight of ones [C] (a LayerNorm without weight) and, where the forward's
 * caller wants no statistics, mean and rstd [rows] in one scratch block,
 * released (stream-ordered) with tfcu_scratch_free once the kernels are queued.
 */
static tfc_status ln_scratch(tfcu_ctx *c, const char *fn, const tfc_layernorm_problem *p, bool need_stats, void **block,
                             const void **w, float **mean, float **rstd) {
    const size_t C = (size_t)p->cols, rows = (size_t)p->rows, es = p->dtype == TFC_DTYPE_BF16 ? 2 : 4;
    const size_t wbytes = p->weight ? 0 : (C * es + 15) / 16 * 16;
    const size_t sbytes = need_stats ? (p->mean ? 0 : rows * 4) + (p->rstd ? 0 : rows * 4) : 0;
    *block = NULL;
    if (!wbytes && !sbytes) return TFC_OK;
    TFCU_TRY(tfcu_scratch(c, fn, wbytes + sbytes, block));
    char *at = (char *)*block;
    if (wbytes) {
        tfc_fill_problem f = {};
        f.device = p->device, f.value = 1.0;
        f.dst.data = at, f.dst.dtype = p->dtype, f.dst.ndim = 1, f.dst.shape[0] = (int64_t)C, f.dst.strides[0] = 1;
        tfc_status s = tfcu_fill(&f);
        if (s != TFC_OK) {
            tfcu_scratch_free(c, *block);
            return s;
        }
        *w = at;
        at += wbytes;
    }
    if (need_stats && !p->mean) *mean = (float *)at, at += rows * 4;
    if (need_stats && !p->rstd) *rstd = (float *)at;
    return TFC_OK;
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
    TFCU_TRY(ln_scratch(c, fn, p, true, &block, &w, &mean, &rstd));
    tfc_status st = tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        layernorm_forward_kernel<T><<<warp_row_blocks(rows), 256, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)b, eps, (T *)y, mean, rstd, rows, C);
        return TFCU_LAUNCHED(fn, "layernorm_forward_kernel");
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
    if (dx && rows) {
        float *unused_mean = NULL, *unused_rstd = NULL;
        TFCU_TRY(ln_scratch(c, fn, p, false, &block, &w, &unused_mean, &unused_rstd));
    }
    tfc_status st = tfcu_dispatch_float(fn, p->dtype, [&](auto t) -> tfc_status {
        typedef decltype(t) T;
        if (dx && rows) {
            layernorm_dx_kernel<T><<<warp_row_blocks(rows), 256, 0, c->stream>>>(
                (const T *)dy, (const T *)x, (const T *)w, mean, rstd, (T *)dx, rows, C, acc);
            TFCU_TRY(TFCU_LAUNCHED(fn, "layernorm_dx_kernel"));
        }
        if (!dw && !db) return TFC_OK;
        /* Enough chunks to fill the GPU, few enough that the final pass is short. */
        size_t col_blocks = (C + 255) / 256, want = (size_t)c->sm_count * 4 / col_blocks + 1;
        size_t chunks = rows ? (want < rows ? want : rows) : 1, rows_per = rows ? (rows + chunks - 1) / chunks : 1;
        if (chunks > 65535) chunks = 65535, rows_per = (rows + chunks - 1) / chunks;
        float *partial;
        TFCU_TRY(tfcu_scratch(c, fn, 2 * chunks * C * sizeof(float), (void **)&partial));
        tfc_status s = TFC_OK;
        if (rows) {
            layernorm_dwdb_partial_kernel<T><<<dim3((unsigned)col_blocks, (unsigned)chunks), 256, 0, c->stream>>>(
                (const T *)dy, (const T *)x, mean, rstd, partial, partial + chunks * C, rows, C, rows_per);
            s = TFCU_LAUNCHED(fn, "layernorm_dwdb_partial_kernel");
        } else {
            s = tfcu_cuda(cudaMemsetAsync(partial, 0, 2 * chunks * C * sizeof(float), c->stream), fn,
                          "cudaMemsetAsync");
        }
        if (s == TFC_OK) {
            layernorm_dwdb_final_kernel<T><<<(unsigned)col_blocks, 256, 0, c->stream>>>(
                partial, partial + chunks * C, (T *)dw, (T *)db, C, chunks, acc);
            s = TFCU_LAUNCHED(fn, "layernorm_dwdb_final_kernel");
        }
        tfcu_scratch_free(c, partial);
        return s;
    });
    if (block) tfcu_scratch_free(c, block);
    return st;
}
