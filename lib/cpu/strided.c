/* Strided iteration and the dtype-converting copy. */
#include "cpu/strided.h"

#include <string.h>

#include "core/dtype.h"
#include "cpu/parallel.h"

void tfc_iter_init(tfc_iter *it, const tfc_sview *const *views, int32_t nviews) {
    const tfc_sview *v0 = views[0];
    it->nviews = nviews;
    it->ndim = 0;
    it->numel = 1;
    for (int32_t d = 0; d < v0->ndim; d++) it->numel *= v0->shape[d];
    /* Drop size-1 dims, then merge dim d into d+1 when every view has
     * stride[d] == stride[d+1] * shape[d+1]. */
    for (int32_t d = 0; d < v0->ndim; d++) {
        if (v0->shape[d] == 1) continue;
        int32_t k = it->ndim;
        if (k > 0) {
            int mergeable = 1;
            for (int32_t v = 0; v < nviews; v++)
                if (it->strides[v][k - 1] != views[v]->strides[d] * v0->shape[d]) mergeable = 0;
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

void tfc_cpu_copy(const tfc_sview *dst, const tfc_sview *src) {
    const tfc_sview *views[2] = {dst, src};
    tfc_iter it;
    tfc_iter_init(&it, views, 2);
    size_t es = tfc_dtype_size(dst->dtype);
    int same = dst->dtype == src->dtype;
    TFC_PARALLEL_RANGE(it.numel, 1 << 15, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        tfc_iter_seek(&it, lo, idx, off);
        for (int64_t i = lo; i < hi; i++) {
            if (same)
                memcpy(dst->data + off[0] * (int64_t)es, src->data + off[1] * (int64_t)es, es);
            else
                tfc_scalar_store(dst->data, dst->dtype, off[0], tfc_scalar_load(src->data, src->dtype, off[1]));
            tfc_iter_next(&it, idx, off);
        }
    }
}

void tfc_cpu_fill(const tfc_sview *dst, double value) {
    const tfc_sview *views[1] = {dst};
    tfc_iter it;
    tfc_iter_init(&it, views, 1);
    size_t es = tfc_dtype_size(dst->dtype);
    unsigned char pattern[8];
    tfc_scalar_store(pattern, dst->dtype, 0, value);
    TFC_PARALLEL_RANGE(it.numel, 1 << 16, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        tfc_iter_seek(&it, lo, idx, off);
        for (int64_t i = lo; i < hi; i++) {
            memcpy(dst->data + off[0] * (int64_t)es, pattern, es);
            tfc_iter_next(&it, idx, off);
        }
    }
}
