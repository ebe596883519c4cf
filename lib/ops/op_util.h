/* Shared argument checks and small helpers of the ops layer. */
#ifndef TFC_OPS_UTIL_H
#define TFC_OPS_UTIL_H

#include "autograd/node.h"
#include "core/dtype.h"
#include "core/error.h"
#include "device/dispatch.h"
#include "cpu/elementwise.h"
#include "tensor/tensor_impl.h"
#include "tfcore/ops.h"

/* x is non-NULL, f32/f64, on the CPU (ops with no CUDA path). */
tfc_status tfc_check_float(const char *fn, const char *arg, const tfc_tensor *x);
/* x is non-NULL and f32/f64 on the CPU or f32/bf16 on CUDA (ops with a CUDA path). */
tfc_status tfc_check_float_dev(const char *fn, const char *arg, const tfc_tensor *x);
/* a and b share dtype and device. */
tfc_status tfc_check_same(const char *fn, const tfc_tensor *a, const tfc_tensor *b);
/* Normalise a possibly negative dim against ndim (rank 0 accepts 0/-1 when allow_scalar). */
tfc_status tfc_norm_dim(const char *fn, int32_t dim, int32_t ndim, int32_t *out);

/*
 * out = map(a, b, c; p) into a new tensor of `shape` (inputs broadcast), on
 * the inputs' device. On CUDA the maps are composed from the table's
 * binary/scalar/unary/unary_backward entries; MASK_SELECT has no
 * composition and fails with "not implemented on CUDA".
 */
tfc_status tfc_map_new(tfc_map_op op, const int64_t *shape, int32_t ndim, tfc_dtype dtype, const tfc_tensor *a,
                       const tfc_tensor *b, const tfc_tensor *c, double p, tfc_tensor **out);

/* grad (broadcast shape) summed over broadcast dims down to shape. Consumes grad. */
tfc_status tfc_sum_to_shape(tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out);

/* Release the first reference and move the second into it (for results). */
#define TFC_REL(t) tfc_tensor_release(t)

#endif
