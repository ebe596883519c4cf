/*
 * Dispatch of ops to the device their tensors live on. Every op that has a
 * CUDA path does the same three things, through these helpers:
 *   1. tfc_same_device: all its tensors are on one device (else
 *      TFC_ERR_DEVICE naming the function, both arguments and devices);
 *   2. tfc_cuda_for: the CUDA table and device index for those tensors
 *      (TFC_ERR_DEVICE with the loader's reason when CUDA is unavailable);
 *   3. tfc_cuda_done: the entry's status, with the module's message copied
 *      into tfc_last_error() under the function's name.
 * Ops without a CUDA path fail with tfc_cuda_unimplemented (or through
 * tfc_require_cpu), whose message says "not implemented on CUDA".
 *
 * The tensor-level device primitives every op composes from live here
 * too: contiguous copies of strided views, fills, casts, and elementwise
 * arithmetic into new contiguous tensors.
 */
#ifndef TFC_DEVICE_DISPATCH_H
#define TFC_DEVICE_DISPATCH_H

#include "core/error.h"
#include "device/device.h"
#include "tensor/tensor_impl.h"

static inline int tfc_is_cuda(const tfc_tensor *t) { return t && t->storage->device == TFC_DEVICE_CUDA; }

/* "cpu" or "cuda:N" for t's device (static buffer per call site slot; for messages). */
const char *tfc_device_str(const tfc_tensor *t, char *buf, size_t cap);

/*
 * The non-NULL tensors ts[0..n) share one device. On a mismatch:
 * TFC_ERR_DEVICE, "fn: x lives on cuda:0 but y lives on cpu; ...".
 */
tfc_status tfc_same_device(const char *fn, const tfc_tensor *const *ts, const char *const *names, int32_t n);

/* The CUDA table and device index for CUDA tensor t; TFC_ERR_DEVICE (naming fn) when unavailable. */
tfc_status tfc_cuda_for(const char *fn, const tfc_tensor *t, const tfc_cuda_api **api, int32_t *dev);

/* TFC_OK when t is on the CPU or CUDA is usable; else as tfc_cuda_for (for ops composed from other ops). */
tfc_status tfc_cuda_ready(const char *fn, const tfc_tensor *t);

/* s from table entry `entry`: TFC_OK, or s with "fn: entry: <module message>". */
tfc_status tfc_cuda_done(const char *fn, const char *entry, const tfc_cuda_api *api, tfc_status s);

/* TFC_ERR_DEVICE: "fn: what is not implemented on CUDA". */
tfc_status tfc_cuda_unimplemented(const char *fn, const char *what);

/* Uninitialised contiguous tensor of `shape` and dtype on like's device. */
tfc_status tfc_tensor_new_on(const tfc_tensor *like, const int64_t *shape, int32_t ndim, tfc_dtype dtype,
                             tfc_tensor **out);

/*
 * CUDA tensor t read with `shape` and element strides (stride 0 broadcasts)
 * written to a new contiguous tensor (copy_strided; memcpy when the view is
 * already contiguous).
 */
tfc_status tfc_cuda_gather(const char *fn, const tfc_tensor *t, const int64_t *shape, const int64_t *strides,
                           int32_t ndim, tfc_tensor **out);
/* Contiguous copy of CUDA tensor t (always a new tensor). */
tfc_status tfc_cuda_clone(const char *fn, const tfc_tensor *t, tfc_tensor **out);
/* CUDA tensor t (contiguous) = value. */
tfc_status tfc_cuda_fill(const char *fn, tfc_tensor *t, double value);
/* New CUDA tensor with x's shape and dtype dt (f32/bf16 casts and same-type copies). */
tfc_status tfc_cuda_cast(const char *fn, const tfc_tensor *x, tfc_dtype dt, tfc_tensor **out);

/*
 * Elementwise on CUDA, into a new contiguous tensor of `shape` (inputs
 * broadcast to it). op is a TFC_CUDA_* binary op / unary op.
 */
tfc_status tfc_cuda_binary_new(const char *fn, int32_t op, const tfc_tensor *a, const tfc_tensor *b,
                               const int64_t *shape, int32_t ndim, tfc_tensor **out);
tfc_status tfc_cuda_scalar_new(const char *fn, int32_t op, const tfc_tensor *a, double s, const int64_t *shape,
                               int32_t ndim, tfc_tensor **out);
tfc_status tfc_cuda_unary_new(const char *fn, int32_t op, const tfc_tensor *a, const int64_t *shape, int32_t ndim,
                              tfc_tensor **out);
/* dx = dy * f'(x) (unary_backward; op a TFC_CUDA unary op), both read at `shape`. */
tfc_status tfc_cuda_unary_bwd_new(const char *fn, int32_t op, const tfc_tensor *dy, const tfc_tensor *x,
                                  const int64_t *shape, int32_t ndim, tfc_tensor **out);
/* dst (contiguous CUDA) += src (same shape, any strides). */
tfc_status tfc_cuda_add_into(const char *fn, tfc_tensor *dst, const tfc_tensor *src);
/* dst (contiguous CUDA) = src (same shape and dtype, any strides). */
tfc_status tfc_cuda_copy_into(const char *fn, tfc_tensor *dst, const tfc_tensor *src);

#endif
