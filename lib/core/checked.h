/*
 * Checked size arithmetic. Every shape product, stride, element span and
 * range computed from sizes a caller or a file supplies goes through these,
 * so an overflow is an error, never a wrapped value that later addresses
 * memory outside a buffer. Each returns 1 when the result fits (and stores
 * it), 0 when it overflows (and leaves *out untouched).
 */
#ifndef TFC_CORE_CHECKED_H
#define TFC_CORE_CHECKED_H

#include <stdint.h>

#include "tfcore/core.h"

static inline int tfc_mul_i64(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return 0;
    *out = r;
    return 1;
}

static inline int tfc_add_i64(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return 0;
    *out = r;
    return 1;
}

/*
 * The element count of dims (each >= 0). A zero dim makes the count 0 but
 * not the strides: the product of the nonzero dims (what the last element
 * of a contiguous layout is offset by) must fit too, so [0, 2^40, 2^40] is
 * refused like [1, 2^40, 2^40]. Both must stay below limit.
 */
static inline int tfc_dims_numel(const int64_t *dims, int32_t ndim, int64_t limit, int64_t *numel) {
    int64_t n = 1, nonzero = 1;
    for (int32_t i = 0; i < ndim; i++) {
        if (dims[i] < 0) return 0;
        if (dims[i] > 0 && (!tfc_mul_i64(nonzero, dims[i], &nonzero) || nonzero > limit)) return 0;
        n = dims[i] == 0 ? 0 : n * dims[i]; /* n <= nonzero: cannot overflow */
    }
    *numel = n;
    return 1;
}

/*
 * The offsets, in elements, of the lowest and highest element a strided
 * view addresses relative to its element 0 (lo <= 0 <= hi); an empty view
 * gives 0 and 0.
 */
static inline int tfc_view_span(const int64_t *shape, const int64_t *strides, int32_t ndim, int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = 0, ext;
    for (int32_t i = 0; i < ndim; i++)
        if (shape[i] == 0) {
            *lo = *hi = 0;
            return 1;
        }
    for (int32_t i = 0; i < ndim; i++) {
        if (!tfc_mul_i64(shape[i] - 1, strides[i], &ext)) return 0;
        if (!tfc_add_i64(ext < 0 ? l : h, ext, ext < 0 ? &l : &h)) return 0;
    }
    *lo = l;
    *hi = h;
    return 1;
}

#endif
