/*
 * What every explicit door does around its backend call: argument checks
 * (each returns TFC_OK or sets a message naming the public function fn, the
 * argument and the shapes) and operand preparation — inputs compacted into
 * temporaries where the kernel needs them contiguous, all released on one
 * cleanup path, and the versions of written outputs bumped.
 */
#ifndef TFC_OPS_OPERANDS_H
#define TFC_OPS_OPERANDS_H

#include "core/error.h"
#include "tensor/dispatch.h"
#include "tensor/tensor_impl.h"

/* A float input: not NULL, of a dtype its device's backend takes (f32/f64 on the CPU, f32/bf16 on CUDA). */
tfc_status tfc_karg_float(const char *fn, const char *arg, const tfc_tensor *t);
/* An index input: not NULL, i32 or i64. */
tfc_status tfc_karg_index(const char *fn, const char *arg, const tfc_tensor *t);
/* t (already checked) has ref's dtype and device. */
tfc_status tfc_karg_dtype_like(const char *fn, const char *arg, const tfc_tensor *t, const char *refname,
                               const tfc_tensor *ref);
/* t has shape dims; the message also shows ref's shape. */
tfc_status tfc_karg_shape(const char *fn, const char *arg, const tfc_tensor *t, const int64_t *dims, int32_t ndim,
                          const char *refname, const tfc_tensor *ref);
/* A float input of ref's dtype and shape dims: the three checks above. */
tfc_status tfc_karg_float_like(const char *fn, const char *arg, const tfc_tensor *t, const int64_t *dims, int32_t ndim,
                               const char *refname, const tfc_tensor *ref);
/*
 * A statistics input (mean, rstd, lse, dloss: what a forward saved): not
 * NULL, on ref's device, dtype st (tfc_backend_stats_dtype), shape dims.
 */
tfc_status tfc_karg_stats(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype st, const int64_t *dims,
                          int32_t ndim, const char *refname, const tfc_tensor *ref);
/* An output (non-NULL): on ref's device, dtype dt, shape dims, contiguous. */
tfc_status tfc_karg_output(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *dims,
                           int32_t ndim, const char *refname, const tfc_tensor *ref);
/* flags has no bit but TFC_GRAD_ACCUMULATE. */
tfc_status tfc_karg_flags(const char *fn, uint32_t flags);
/*
 * No output's memory overlaps an input's or another output's. NULL entries
 * are skipped. names[i] names tensors[i]; the first nout are outputs. Two
 * tensors whose rows interleave without sharing an element (tfc_rows_ld:
 * the column halves of one matrix) do not overlap.
 */
tfc_status tfc_karg_disjoint(const char *fn, const tfc_tensor *const *tensors, const char *const *names, int32_t nout,
                             int32_t n);

/* ---- operands ---- */

#define TFC_OPERANDS_MAX 8

/* The temporaries of one call; zero-initialise, release once with tfc_operands_release. */
typedef struct tfc_operands {
    tfc_tensor *tmp[TFC_OPERANDS_MAX];
    int32_t n;
} tfc_operands;

/* *data = t's element 0, after compacting t into a temporary when it is not contiguous; NULL t gives NULL. */
tfc_status tfc_operand(tfc_operands *o, const tfc_tensor *t, const void **data);
/* *use = t, or a contiguous temporary copy when t's last dim is strided (kernels that take row strides). */
tfc_status tfc_operand_rows(tfc_operands *o, const tfc_tensor *t, const tfc_tensor **use);
void tfc_operands_release(tfc_operands *o);

/* The data of an optional output (NULL for NULL). */
static inline void *tfc_out_data(tfc_tensor *t) { return t ? tfc_data(t) : NULL; }

/* Mark the non-NULL outputs written (their versions bump: autograd sees the in-place write). */
void tfc_written(tfc_tensor *a, tfc_tensor *b, tfc_tensor *c);

/* ---- row-strided operands (kernels that take a row stride per operand) ---- */

/*
 * 1 when t, seen as rows of its last dim (cols = the last dim, rows = the
 * product of the others; a 0-d t is one row of one), has unit column stride
 * and its rows at one stride *ld >= cols elements apart: contiguous, or a
 * column slice of a wider row-major matrix such as one half of a
 * [N, 2F] buffer. *ld = that stride (cols when there is at most one row or
 * no element). 0 otherwise, *ld untouched.
 */
int tfc_rows_ld(const tfc_tensor *t, int64_t *ld);
/* *data = t's element 0 and *ld its row stride (tfc_rows_ld), after compacting t into a temporary (ld = cols) when it has none. */
tfc_status tfc_operand_ld(tfc_operands *o, const tfc_tensor *t, const void **data, int64_t *ld);
/* An output as tfc_karg_output checks it, but rows at one stride (tfc_rows_ld, into *ld) instead of contiguous. */
tfc_status tfc_karg_output_rows(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *dims,
                                int32_t ndim, const char *refname, const tfc_tensor *ref, int64_t *ld);

#endif
