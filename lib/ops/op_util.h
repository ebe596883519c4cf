/* Shared argument checks and helpers of the ops layer's graph doors. */
#ifndef TFC_OPS_UTIL_H
#define TFC_OPS_UTIL_H

#include "autograd/node.h"
#include "backend/map_ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "tensor/dispatch.h"
#include "tensor/tensor_impl.h"
#include "tfcore/ops.h"

/*
 * x is non-NULL and of a float dtype its device's backend takes (f32/f64
 * on the CPU, f32/bf16 on CUDA); TFC_ERR_DEVICE with the loader's reason
 * when its device has no backend.
 */
tfc_status tfc_check_float(const char *fn, const char *arg, const tfc_tensor *x);
/* a and b share dtype and device. */
tfc_status tfc_check_same(const char *fn, const tfc_tensor *a, const tfc_tensor *b);
/* Normalise a possibly negative dim against ndim. */
tfc_status tfc_norm_dim(const char *fn, int32_t dim, int32_t ndim, int32_t *out);

/*
 * out = map(a, b, c; p) into a new contiguous tensor of `shape` and dtype
 * (inputs broadcast to it), on the inputs' device, through the backend's
 * map entry; fn names the public op in messages.
 */
tfc_status tfc_map_new(const char *fn, tfc_map_op op, const int64_t *shape, int32_t ndim, tfc_dtype dtype,
                       const tfc_tensor *a, const tfc_tensor *b, const tfc_tensor *c, double p, tfc_tensor **out);

/* grad (broadcast shape) summed over broadcast dims down to shape (lib/ops/reduce.c). Consumes grad. */
tfc_status tfc_sum_to_shape(tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out);
/* The same, recorded on g (a create_graph backward's graph; NULL: not recorded). Consumes grad. */
tfc_status tfc_sum_to_shape_g(tfc_graph *g, tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out);

#endif
