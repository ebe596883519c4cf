/*
 * The gather and scatter entries (tfc_index_problem in lib/backend/backend.h):
 * indexed reads and writes over strided views, behind tfc_index_select,
 * tfc_gather, tfc_scatter_add and tfc_index_put.
 */
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

/* Offsets (elements) of position lin of index's shape in index, y, and x with dim's coordinate left out. */
static void offsets_at(const tfc_index_problem *p, int64_t lin, int64_t *oi, int64_t *oy, int64_t *ox) {
    int64_t a = 0, b = 0, c = 0;
    for (int32_t d = p->index.ndim - 1; d >= 0; d--) {
        int64_t n = p->index.shape[d], k = n ? lin % n : 0;
        lin = n ? lin / n : 0;
        a += k * p->index.strides[d];
        b += k * p->y.strides[d];
        if (d != p->dim) c += k * p->x.strides[d];
    }
    *oi = a;
    *oy = b;
    *ox = c;
}

/* Offset of x's element at row-major position i (flat addressing). */
static int64_t flat_offset(const tfc_sview *x, int64_t i) {
    int64_t off = 0;
    for (int32_t d = x->ndim - 1; d >= 0; d--) {
        int64_t n = x->shape[d];
        off += (i % n) * x->strides[d];
        i /= n;
    }
    return off;
}

static int64_t index_load(const tfc_sview *v, int64_t off) { return tfc_index_at(v->data, v->dtype, off); }

/*
 * Every index in [0, limit) before anything is written; otherwise the message
 * names the first one outside. Broadcast dims (stride 0) are skipped: each
 * stored index is read once, and positions and shapes in the message are
 * those of the index the caller passed (index_select's 1-D index, not its
 * view over the output).
 */
static tfc_status check_indices(const tfc_index_problem *p, int64_t limit) {
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS], n = 1;
    int32_t nd = 0;
    for (int32_t d = 0; d < p->index.ndim; d++) {
        if (p->index.strides[d] == 0 && p->index.shape[d] != 0) continue;
        shape[nd] = p->index.shape[d];
        strides[nd++] = p->index.strides[d];
        n *= p->index.shape[d];
    }
    for (int64_t lin = 0; lin < n; lin++) {
        int64_t off = 0, rest = lin;
        for (int32_t d = nd - 1; d >= 0; d--) {
            off += (rest % shape[d]) * strides[d];
            rest /= shape[d];
        }
        int64_t i = index_load(&p->index, off);
        if (i < 0 || i >= limit) {
            if (p->dim < 0)
                return tfc_err(TFC_ERR_INVALID_ARG,
                               "index %s at flat position %lld is %lld, out of range: outside [0, %lld) "
                               "(the %lld elements of %s)",
                               tfc_fmt_dims(shape, nd), (long long)lin, (long long)i, (long long)limit,
                               (long long)limit, tfc_fmt_dims(p->x.shape, p->x.ndim));
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "index %s at flat position %lld is %lld, out of range: outside [0, %lld) "
                           "(dim %d of %s)",
                           tfc_fmt_dims(shape, nd), (long long)lin, (long long)i, (long long)limit, (int)p->dim,
                           tfc_fmt_dims(p->x.shape, p->x.ndim));
        }
    }
    return TFC_OK;
}

static int64_t limit_of(const tfc_index_problem *p) { return p->dim < 0 ? tfc_sview_numel(&p->x) : p->x.shape[p->dim]; }

/* The element of x that position (ox, i) names. */
static int64_t x_offset(const tfc_index_problem *p, int64_t ox, int64_t i) {
    return p->dim < 0 ? flat_offset(&p->x, i) : ox + i * p->x.strides[p->dim];
}

/*
 * Elements per run: when the last dim is not the indexed one, the index is
 * broadcast along it and x and y are unit-stride there (index_select of
 * rows, and its backward), a position's whole last dim is one contiguous
 * run in both: copied or added in one go instead of element by element.
 */
static int64_t run_length(const tfc_index_problem *p) {
    int32_t last = p->index.ndim - 1;
    if (p->dim < 0 || last < 0 || p->dim == last) return 1;
    if (p->index.strides[last] != 0 || p->x.strides[last] != 1 || p->y.strides[last] != 1) return 1;
    return p->index.shape[last] > 0 ? p->index.shape[last] : 1;
}

tfc_status tfc_cpu_gather(const tfc_index_problem *p) {
    int64_t n = tfc_sview_numel(&p->index);
    TFC_TRY(check_indices(p, limit_of(p)));
    size_t es = tfc_dtype_bytes(p->x.dtype);
    int64_t run = run_length(p), rows = n / run;
    TFC_PARALLEL_RANGE(rows, 4096 / run + 1, lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            int64_t oi, oy, ox;
            offsets_at(p, r * run, &oi, &oy, &ox);
            int64_t xo = x_offset(p, ox, index_load(&p->index, oi));
            memcpy(p->y.data + oy * (int64_t)es, p->x.data + xo * (int64_t)es, es * (size_t)run);
        }
    }
    return TFC_OK;
}

tfc_status tfc_cpu_scatter(const tfc_index_problem *p) {
    if (p->accumulate && p->x.dtype != TFC_DTYPE_F32 && p->x.dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_UNSUPPORTED, "scatter with accumulate is not implemented on cpu:0 for %s",
                       tfc_dtype_name(p->x.dtype));
    int64_t n = tfc_sview_numel(&p->index);
    TFC_TRY(check_indices(p, limit_of(p)));
    size_t es = tfc_dtype_bytes(p->x.dtype);
    int64_t run = run_length(p), rows = n / run;
    /* One thread, positions in order: repeated indices sum (or the last write wins) the same way every run. */
    for (int64_t r = 0; r < rows; r++) {
        int64_t oi, oy, ox;
        offsets_at(p, r * run, &oi, &oy, &ox);
        int64_t xo = x_offset(p, ox, index_load(&p->index, oi));
        if (!p->accumulate) {
            memcpy(p->x.data + xo * (int64_t)es, p->y.data + oy * (int64_t)es, es * (size_t)run);
        } else if (p->x.dtype == TFC_DTYPE_F64) {
            double *dst = (double *)(void *)p->x.data + xo;
            const double *src = (const double *)(const void *)p->y.data + oy;
            for (int64_t k = 0; k < run; k++) dst[k] += src[k];
        } else {
            float *dst = (float *)(void *)p->x.data + xo;
            const float *src = (const float *)(const void *)p->y.data + oy;
            for (int64_t k = 0; k < run; k++) dst[k] += src[k];
        }
    }
    return TFC_OK;
}
