/*
 * From tensors to the backend table: which backend serves a tensor, the
 * one-device rule of every call, and the tensor-level primitives built on
 * the table's data-movement and map entries (contiguous copies, fills,
 * casts, elementwise maps) that every layer above composes from.
 */
#ifndef TFC_TENSOR_DISPATCH_H
#define TFC_TENSOR_DISPATCH_H

#include "backend/backend.h"
#include "core/error.h"
#include "device/device.h"
#include "tensor/tensor_impl.h"

/* The device index of t's storage (0 on the CPU). */
static inline int32_t tfc_device_index(const tfc_tensor *t) { return t->storage->device_index; }

/* "cpu" or "cuda:N" for t's device, formatted into buf (for messages). */
const char *tfc_device_str(const tfc_tensor *t, char *buf, size_t cap);

/*
 * The backend serving t's device, for public function fn: TFC_ERR_DEVICE
 * "fn: <the loader's reason>" when the device has none (e.g. no GPU).
 */
tfc_status tfc_tensor_backend(const char *fn, const tfc_tensor *t, const tfc_backend **out);

/*
 * The dtype of the statistics a fused kernel saves for x (LayerNorm
 * mean/rstd, cross-entropy loss/lse, attention lse): its backend's rule
 * (f32 on CUDA, x's dtype on the CPU). x's backend was looked up already.
 */
tfc_dtype tfc_tensor_stats_dtype(const tfc_tensor *x);

/*
 * All non-NULL tensors of ts live on one device; else TFC_ERR_DEVICE naming
 * fn, both arguments (names[i] names ts[i]) and both devices.
 */
tfc_status tfc_same_device(const char *fn, const tfc_tensor *const *ts, const char *const *names, int32_t n);

/* A new contiguous tensor on like's device. */
tfc_status tfc_tensor_new_on(const tfc_tensor *like, const int64_t *shape, int32_t ndim, tfc_dtype dtype,
                             tfc_tensor **out);

/*
 * out = f(a, b, c; p) for a map of backend/map_ops.h, on out's device, or
 * out += f(...) when accumulate; the inputs (NULL where the map reads none)
 * are read broadcast to out's shape. Does not bump out's version.
 */
tfc_status tfc_tensor_map(const char *fn, tfc_map_op op, tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b,
                          const tfc_tensor *c, double p, int32_t accumulate);

/* dst = src (converted to dst's dtype), src broadcast to dst's shape; same device; no version bump. */
tfc_status tfc_tensor_copy_view(const char *fn, tfc_tensor *dst, const tfc_tensor *src);

#endif
