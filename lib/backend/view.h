/*
 * A raw strided view: memory, dtype, shape and strides, nothing else. The
 * operand type of the backend table's strided entries (copy, fill, map,
 * reduce): backends know nothing of tensors, refcounts or graphs.
 */
#ifndef TFC_BACKEND_VIEW_H
#define TFC_BACKEND_VIEW_H

#include <stdint.h>

#include "tfcore/core.h"

typedef struct tfc_sview {
    char *data; /* address of element 0 (host or device memory) */
    tfc_dtype dtype;
    int32_t ndim;
    int64_t shape[TFC_MAX_DIMS];
    int64_t strides[TFC_MAX_DIMS]; /* elements; 0 broadcasts */
} tfc_sview;

/* 1 when v's elements are laid out row-major without gaps (size-1 dims ignored). */
static inline int tfc_sview_is_contiguous(const tfc_sview *v) {
    int64_t want = 1;
    for (int32_t i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->strides[i] != want) return 0;
        want *= v->shape[i];
    }
    return 1;
}

static inline int64_t tfc_sview_numel(const tfc_sview *v) {
    int64_t n = 1;
    for (int32_t i = 0; i < v->ndim; i++) n *= v->shape[i];
    return n;
}

/* Element i of an i32 or i64 index buffer in host memory. */
static inline int64_t tfc_index_at(const void *ids, tfc_dtype idt, int64_t i) {
    return idt == TFC_DTYPE_I32 ? (int64_t)((const int32_t *)ids)[i] : ((const int64_t *)ids)[i];
}

#endif
