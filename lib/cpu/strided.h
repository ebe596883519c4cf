/*
 * Raw strided views for CPU kernels: the backend layer knows nothing of
 * tensors, refcounts or graphs — only memory, shapes and strides.
 */
#ifndef TFC_CPU_STRIDED_H
#define TFC_CPU_STRIDED_H

#include <stdint.h>

#include "tfcore/core.h"

typedef struct tfc_sview {
    char *data; /* address of element 0 */
    tfc_dtype dtype;
    int32_t ndim;
    int64_t shape[TFC_MAX_DIMS];
    int64_t strides[TFC_MAX_DIMS]; /* elements */
} tfc_sview;

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

/* dst = src converted to dst's dtype; src must already have dst's shape
 * (broadcast dims as stride 0). */
void tfc_cpu_copy(const tfc_sview *dst, const tfc_sview *src);
/* Every element of dst = value. */
void tfc_cpu_fill(const tfc_sview *dst, double value);

#endif
