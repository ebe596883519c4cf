/*
 * Argument checks and input compaction shared by the explicit kernel entry
 * points (lib/ops/<op>_kernels.c). Each check returns TFC_OK or sets a
 * message naming the public function fn, the argument and the shapes.
 */
#ifndef TFC_OPS_KERNEL_ARGS_H
#define TFC_OPS_KERNEL_ARGS_H

#include "core/error.h"
#include "device/dispatch.h"
#include "tensor/tensor_impl.h"

/*
 * A float input: not NULL; f32 or f64 on the CPU, or f32 or bf16 on CUDA
 * (every user of these checks dispatches to CUDA; see device/dispatch.h).
 */
tfc_status tfc_karg_float(const char *fn, const char *arg, const tfc_tensor *t);
/* An index input: not NULL, i32 or i64 (CPU or CUDA). */
tfc_status tfc_karg_index(const char *fn, const char *arg, const tfc_tensor *t);
/* t (already checked) has ref's dtype and device. */
tfc_status tfc_karg_dtype_like(const char *fn, const char *arg, const tfc_tensor *t, const char *refname,
                               const tfc_tensor *ref);
/* t has shape dims; the message also shows ref's shape. */
tfc_status tfc_karg_shape(const char *fn, const char *arg, const tfc_tensor *t, const int64_t *dims, int32_t ndim,
                          const char *refname, const tfc_tensor *ref);
/* A float input of ref's dtype and shape dims: the three checks above. */
tfc_status tfc_karg_float_like(const char *fn, const char *arg, const tfc_tensor *t, const int64_t *dims,
                               int32_t ndim, const char *refname, const tfc_tensor *ref);
/* An output (non-NULL): on ref's device, dtype dt, shape dims, contiguous. */
tfc_status tfc_karg_output(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *dims,
                           int32_t ndim, const char *refname, const tfc_tensor *ref);
/* flags has no bit but TFC_GRAD_ACCUMULATE. */
tfc_status tfc_karg_flags(const char *fn, uint32_t flags);
/*
 * No output's memory overlaps an input's or another output's. NULL entries
 * are skipped. names[i] names tensors[i]; the first nout are outputs.
 */
tfc_status tfc_karg_disjoint(const char *fn, const tfc_tensor *const *tensors, const char *const *names,
                             int32_t nout, int32_t n);

/*
 * *use = t when it is contiguous (*tmp = NULL), else a contiguous copy held
 * in *tmp (release it with tfc_tensor_release). NULL t gives NULL.
 */
tfc_status tfc_karg_contiguous(const tfc_tensor *t, tfc_tensor **tmp, const tfc_tensor **use);
/* As tfc_karg_contiguous, but only copies when the last dim is strided. */
tfc_status tfc_karg_unit_last_stride(const tfc_tensor *t, tfc_tensor **tmp, const tfc_tensor **use);

#endif
