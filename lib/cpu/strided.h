/*
 * Walking raw strided views (backend/view.h) on the CPU: the iterator every
 * strided CPU kernel uses (the copy and fill entries of strided.c among
 * them, declared in kernels.h).
 */
#ifndef TFC_CPU_STRIDED_H
#define TFC_CPU_STRIDED_H

#include <stdint.h>

#include "backend/view.h"

/*
 * Up to 4 views of one shape walked together. Dimensions that are
 * contiguous across all views are merged first so the inner loop is as
 * long as possible; offsets are in elements of each view.
 */
typedef struct tfc_iter {
    int32_t nviews, ndim;
    int64_t shape[TFC_MAX_DIMS];
    int64_t strides[4][TFC_MAX_DIMS];
    int64_t numel;
} tfc_iter;

void tfc_iter_init(tfc_iter *it, const tfc_sview *const *views, int32_t nviews);
/*
 * Element offsets (per view) of linear index `start` in the iteration
 * order. Used to split work between threads: each thread starts from its
 * own linear index and advances with tfc_iter_next.
 */
void tfc_iter_seek(const tfc_iter *it, int64_t start, int64_t *idx, int64_t *off);
/* Advance one element along the innermost dimension with carry. */
static inline void tfc_iter_next(const tfc_iter *it, int64_t *idx, int64_t *off) {
    for (int32_t d = it->ndim - 1; d >= 0; d--) {
        idx[d]++;
        for (int32_t v = 0; v < it->nviews; v++) off[v] += it->strides[v][d];
        if (idx[d] < it->shape[d]) return;
        for (int32_t v = 0; v < it->nviews; v++) off[v] -= it->strides[v][d] * it->shape[d];
        idx[d] = 0;
    }
}

/* Advance to the start of the next row (idx[ndim-1] stays 0): a carry over
 * the outer dims, no division — for loops that seek once, then walk rows. */
static inline void tfc_iter_next_row(const tfc_iter *it, int64_t *idx, int64_t *off) {
    for (int32_t d = it->ndim - 2; d >= 0; d--) {
        idx[d]++;
        for (int32_t v = 0; v < it->nviews; v++) off[v] += it->strides[v][d];
        if (idx[d] < it->shape[d]) return;
        for (int32_t v = 0; v < it->nviews; v++) off[v] -= it->strides[v][d] * it->shape[d];
        idx[d] = 0;
    }
}

/*
 * TFC_OK when the element kernels can read v: NULL, f32, f64 or a non-float
 * dtype (a mask). A bf16 view reaches them since bf16 GEMM results exist on
 * the CPU (a gradient accumulated by the autograd engine); it is
 * TFC_ERR_UNSUPPORTED naming entry rather than read as f32.
 */
tfc_status tfc_cpu_check_float_view(const char *entry, const tfc_sview *v);

#endif
