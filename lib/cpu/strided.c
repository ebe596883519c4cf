/* Strided iteration, and the copy (dtype-converting) and fill entries. */
#include "cpu/strided.h"

#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

tfc_status tfc_cpu_check_float_view(const char *entry, const tfc_sview *v) {
    if (!v || v->dtype == TFC_DTYPE_F32 || v->dtype == TFC_DTYPE_F64 || !tfc_dtype_is_float(v->dtype)) return TFC_OK;
    return tfc_err(TFC_ERR_UNSUPPORTED, "%s is not implemented on cpu:0 for %s (f32 or f64; only gemm takes bf16)",
                   entry, tfc_dtype_name(v->dtype));
}

void tfc_iter_init(tfc_iter *it, const tfc_sview *const *views, int32_t nviews) {
    const tfc_sview *v0 = views[0];
    it->nviews = nviews;
    it->ndim = 0;
    it->numel = 1;
    for (int32_t d = 0; d < v0->ndim; d++) it->numel *= v0->shape[d] ? 1 : 0;
    /*
     * An empty view addresses nothing, so its strides were never checked
     * (DLPack hands in any): multiplying them below could overflow. It is
     * one empty dim. Otherwise the dims' product and every stride × (shape
     * - 1) fit in 64 bits, and a merge's stride × shape is checked.
     */
    if (it->numel == 0) {
        it->ndim = 1;
        it->shape[0] = 0;
        for (int32_t v = 0; v < nviews; v++) it->strides[v][0] = 0;
        return;
    }
    for (int32_t d = 0; d < v0->ndim; d++) it->numel *= v0->shape[d];
    /* Drop size-1 dims, then merge dim d into d+1 when every view has
     * stride[d] == stride[d+1] * shape[d+1]. */
    for (int32_t d = 0; d < v0->ndim; d++) {
        if (v0->shape[d] == 1) continue;
        int32_t k = it->ndim;
        if (k > 0) {
            int mergeable = 1;
            for (int32_t v = 0; v < nviews; v++) {
                int64_t outer;
                if (__builtin_mul_overflow(views[v]->strides[d], v0->shape[d], &outer) ||
                    it->strides[v][k - 1] != outer)
                    mergeable = 0;
            }
            if (mergeable) {
                it->shape[k - 1] *= v0->shape[d];
                for (int32_t v = 0; v < nviews; v++) it->strides[v][k - 1] = views[v]->strides[d];
                continue;
            }
        }
        it->shape[k] = v0->shape[d];
        for (int32_t v = 0; v < nviews; v++) it->strides[v][k] = views[v]->strides[d];
        it->ndim++;
    }
    if (it->ndim == 0) { /* scalar or all-ones shape: one element */
        it->ndim = 1;
        it->shape[0] = 1;
        for (int32_t v = 0; v < nviews; v++) it->strides[v][0] = 0;
    }
}

void tfc_iter_seek(const tfc_iter *it, int64_t start, int64_t *idx, int64_t *off) {
    for (int32_t v = 0; v < it->nviews; v++) off[v] = 0;
    /* An empty range has a zero-sized dim: nothing to seek (and no dividing by it). */
    if (it->numel == 0) {
        for (int32_t d = 0; d < it->ndim; d++) idx[d] = 0;
        return;
    }
    for (int32_t d = it->ndim - 1; d >= 0; d--) {
        idx[d] = start % it->shape[d];
        start /= it->shape[d];
        for (int32_t v = 0; v < it->nviews; v++) off[v] += idx[d] * it->strides[v][d];
    }
}

/*
 * Copy and fill walk rows of the innermost merged dimension: each thread
 * seeks to its first row (a few divisions), then steps from row to row
 * with a carry — with short rows (one head's 32 floats) divisions per row
 * cost more than the copy. A row is one memcpy when both sides are dense,
 * or a typed strided loop — never a per-element call.
 */
#define STRIDED_ROW_COPY(T, d, ds, s, ss, n)                                \
    do {                                                                    \
        T *d_ = (T *)(d);                                                   \
        const T *s_ = (const T *)(s);                                       \
        for (int64_t j_ = 0; j_ < (n); j_++) d_[j_ * (ds)] = s_[j_ * (ss)]; \
    } while (0)

static void copy_row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t es) {
    if (ds == 1 && ss == 1) {
        memcpy(d, s, (size_t)n * es);
        return;
    }
    switch (es) {
    case 8: STRIDED_ROW_COPY(uint64_t, d, ds, s, ss, n); break;
    case 4: STRIDED_ROW_COPY(uint32_t, d, ds, s, ss, n); break;
    case 2: STRIDED_ROW_COPY(uint16_t, d, ds, s, ss, n); break;
    default:
        for (int64_t j = 0; j < n; j++) memcpy(d + j * ds * (int64_t)es, s + j * ss * (int64_t)es, es);
    }
}

/*
 * A converting row for the pairs the models cast every step (autocast's
 * f32 → bf16 operands and bf16 → f32 results; f32 ↔ f64): a typed loop the
 * compiler vectorizes on dense rows, with the same rounding as the scalar
 * conversions (tfc_f32_to_bf16: nearest-even, NaN kept quiet). Returns 0
 * for other pairs, which take the per-element path through double.
 */
#define STRIDED_ROW_CAST(TD, TS, EXPR, d, ds, s, ss, n) \
    do {                                                \
        TD *d_ = (TD *)(d);                             \
        const TS *s_ = (const TS *)(s);                 \
        if ((ds) == 1 && (ss) == 1) {                   \
            for (int64_t j_ = 0; j_ < (n); j_++) {      \
                TS v_ = s_[j_];                         \
                d_[j_] = (EXPR);                        \
            }                                           \
        } else {                                        \
            for (int64_t j_ = 0; j_ < (n); j_++) {      \
                TS v_ = s_[j_ * (ss)];                  \
                d_[j_ * (ds)] = (EXPR);                 \
            }                                           \
        }                                               \
    } while (0)

static int cast_row(char *d, tfc_dtype dt, int64_t ds, const char *s, tfc_dtype st, int64_t ss, int64_t n) {
    if (dt == TFC_DTYPE_BF16 && st == TFC_DTYPE_F32)
        STRIDED_ROW_CAST(uint16_t, float, tfc_f32_to_bf16(v_), d, ds, s, ss, n);
    else if (dt == TFC_DTYPE_F32 && st == TFC_DTYPE_BF16)
        STRIDED_ROW_CAST(float, uint16_t, tfc_bf16_to_f32(v_), d, ds, s, ss, n);
    else if (dt == TFC_DTYPE_F64 && st == TFC_DTYPE_F32)
        STRIDED_ROW_CAST(double, float, (double)v_, d, ds, s, ss, n);
    else if (dt == TFC_DTYPE_F32 && st == TFC_DTYPE_F64)
        STRIDED_ROW_CAST(float, double, (float)v_, d, ds, s, ss, n);
    else
        return 0;
    return 1;
}

/*
 * A 2-D copy whose source runs along the other dimension (a transpose):
 * walked in TILE×TILE blocks so both sides stay in cache, instead of rows
 * that touch a new cache line of the source at every element.
 */
#define TILE 32
static int copy_transposed(const tfc_iter *it, const tfc_sview *dst, const tfc_sview *src, size_t es) {
    if (it->ndim != 2 || es != 4 || dst->dtype != src->dtype) return 0;
    const int64_t rows = it->shape[0], cols = it->shape[1];
    const int64_t d0 = it->strides[0][0], d1 = it->strides[0][1], s0 = it->strides[1][0], s1 = it->strides[1][1];
    if (d1 != 1 || s0 != 1 || s1 < TILE || rows < TILE || cols < TILE) return 0;
    const int64_t nbr = (rows + TILE - 1) / TILE;
    TFC_PARALLEL_RANGE(nbr, 1, lo, hi) {
        for (int64_t br = lo; br < hi; br++) {
            const int64_t r0 = br * TILE, r1 = r0 + TILE < rows ? r0 + TILE : rows;
            for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
                const int64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
                for (int64_t c = c0; c < c1; c++) {
                    const uint32_t *sp = (const uint32_t *)src->data + c * s1;
                    for (int64_t r = r0; r < r1; r++) ((uint32_t *)dst->data)[r * d0 + c] = sp[r];
                }
            }
        }
    }
    return 1;
}
#undef TILE

/* n elements from src's element offset so (stride ss) to dst's do (stride ds), converting the dtype if it differs. */
static void convert_row(const tfc_sview *dst, int64_t ds, int64_t dof, const tfc_sview *src, int64_t ss, int64_t sof,
                        int64_t n) {
    const int64_t des = (int64_t)tfc_dtype_size(dst->dtype), ses = (int64_t)tfc_dtype_size(src->dtype);
    char *d = dst->data + dof * des;
    const char *s = src->data + sof * ses;
    if (dst->dtype == src->dtype) {
        copy_row(d, ds, s, ss, n, (size_t)des);
    } else if (!cast_row(d, dst->dtype, ds, s, src->dtype, ss, n)) {
        for (int64_t j = 0; j < n; j++)
            tfc_scalar_store(dst->data, dst->dtype, dof + j * ds, tfc_scalar_load(src->data, src->dtype, sof + j * ss));
    }
}

tfc_status tfc_cpu_copy(const tfc_copy_problem *p) {
    const tfc_sview *dst = &p->dst, *src = &p->src;
    const tfc_sview *views[2] = {dst, src};
    tfc_iter it;
    tfc_iter_init(&it, views, 2);
    size_t es = tfc_dtype_size(dst->dtype);
    if (it.numel > 0 && copy_transposed(&it, dst, src, es)) return TFC_OK;
    int32_t last = it.ndim - 1;
    int64_t row = it.shape[last], rows = it.numel / (row > 0 ? row : 1);
    int64_t dstr = it.strides[0][last], sstr = it.strides[1][last];
    if (it.numel == 0) return TFC_OK;
    if (it.ndim == 1) {
        /* One row (every dense tensor merges into one): split the row itself between the threads. */
        TFC_PARALLEL_RANGE(row, 1 << 15, lo, hi) {
            if (lo < hi) convert_row(dst, dstr, lo * dstr, src, sstr, lo * sstr, hi - lo);
        }
        return TFC_OK;
    }
    TFC_PARALLEL_RANGE(rows, row >= (1 << 15) ? 1 : (1 << 15) / row, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        if (lo < hi) tfc_iter_seek(&it, lo * row, idx, off);
        for (int64_t r = lo; r < hi; r++, tfc_iter_next_row(&it, idx, off))
            convert_row(dst, dstr, off[0], src, sstr, off[1], row);
    }
    return TFC_OK;
}

tfc_status tfc_cpu_fill(const tfc_fill_problem *p) {
    const tfc_sview *dst = &p->dst;
    const double value = p->value;
    const tfc_sview *views[1] = {dst};
    tfc_iter it;
    tfc_iter_init(&it, views, 1);
    size_t es = tfc_dtype_size(dst->dtype);
    unsigned char pattern[8];
    tfc_scalar_store(pattern, dst->dtype, 0, value);
    int32_t last = it.ndim - 1;
    int64_t row = it.shape[last], rows = it.numel / (row > 0 ? row : 1), str = it.strides[0][last];
    if (it.numel == 0) return TFC_OK;
    int zero = 1;
    for (size_t b = 0; b < es; b++) zero &= pattern[b] == 0;
    TFC_PARALLEL_RANGE(rows, row >= (1 << 16) ? 1 : (1 << 16) / row, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        if (lo < hi) tfc_iter_seek(&it, lo * row, idx, off);
        for (int64_t r = lo; r < hi; r++, tfc_iter_next_row(&it, idx, off)) {
            char *d = dst->data + off[0] * (int64_t)es;
            if (zero && str == 1) {
                memset(d, 0, (size_t)row * es);
            } else if (es == 4) {
                uint32_t v;
                memcpy(&v, pattern, 4);
                for (int64_t j = 0; j < row; j++) ((uint32_t *)d)[j * str] = v;
            } else {
                for (int64_t j = 0; j < row; j++) memcpy(d + j * str * (int64_t)es, pattern, es);
            }
        }
    }
    return TFC_OK;
}
