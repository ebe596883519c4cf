/* Argument checks and operand preparation shared by the explicit doors. */
#include "ops/operands.h"

#include "core/dtype.h"

tfc_status tfc_karg_float(const char *fn, const char *arg, const tfc_tensor *t) {
    if (!t) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, t, &b));
    if (!tfc_backend_takes(b, t->dtype)) {
        char dev[32];
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; only %s are supported on %s", fn, arg, tfc_dtype_name(t->dtype),
                       SHAPE(t), tfc_backend_dtype_list(b, "and"), tfc_device_str(t, dev, sizeof dev));
    }
    return TFC_OK;
}

tfc_status tfc_karg_index(const char *fn, const char *arg, const tfc_tensor *t) {
    if (!t) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    if (t->dtype != TFC_DTYPE_I32 && t->dtype != TFC_DTYPE_I64)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; indices must be i32 or i64", fn, arg, tfc_dtype_name(t->dtype),
                       SHAPE(t));
    return TFC_OK;
}

tfc_status tfc_karg_dtype_like(const char *fn, const char *arg, const tfc_tensor *t, const char *refname,
                               const tfc_tensor *ref) {
    const tfc_tensor *ts[2] = {ref, t};
    const char *names[2] = {refname, arg};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    if (t->dtype != ref->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s, must be %s like %s %s", fn, arg, tfc_dtype_name(t->dtype),
                       SHAPE(t), tfc_dtype_name(ref->dtype), refname, SHAPE(ref));
    return TFC_OK;
}

static int same_dims(const tfc_tensor *t, const int64_t *dims, int32_t ndim) {
    if (t->ndim != ndim) return 0;
    for (int32_t i = 0; i < ndim; i++)
        if (t->shape[i] != dims[i]) return 0;
    return 1;
}

tfc_status tfc_karg_shape(const char *fn, const char *arg, const tfc_tensor *t, const int64_t *dims, int32_t ndim,
                          const char *refname, const tfc_tensor *ref) {
    if (!same_dims(t, dims, ndim))
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, must be %s (%s is %s)", fn, arg, SHAPE(t),
                       tfc_fmt_dims(dims, ndim), refname, SHAPE(ref));
    return TFC_OK;
}

tfc_status tfc_karg_float_like(const char *fn, const char *arg, const tfc_tensor *t, const int64_t *dims, int32_t ndim,
                               const char *refname, const tfc_tensor *ref) {
    TFC_TRY(tfc_karg_float(fn, arg, t));
    TFC_TRY(tfc_karg_dtype_like(fn, arg, t, refname, ref));
    return tfc_karg_shape(fn, arg, t, dims, ndim, refname, ref);
}

tfc_status tfc_karg_stats(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype st, const int64_t *dims,
                          int32_t ndim, const char *refname, const tfc_tensor *ref) {
    if (!t) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    const tfc_tensor *ts[2] = {ref, t};
    const char *names[2] = {refname, arg};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    if (t->dtype != st) {
        if (st == ref->dtype)
            return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s, must be %s like %s %s", fn, arg, tfc_dtype_name(t->dtype),
                           SHAPE(t), tfc_dtype_name(st), refname, SHAPE(ref));
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s, must be %s (statistics of %s %s %s are %s on this device)", fn,
                       arg, tfc_dtype_name(t->dtype), SHAPE(t), tfc_dtype_name(st), refname, tfc_dtype_name(ref->dtype),
                       SHAPE(ref), tfc_dtype_name(st));
    }
    return tfc_karg_shape(fn, arg, t, dims, ndim, refname, ref);
}

/* tfc_karg_output's checks but the layout. */
static tfc_status output_like(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *dims,
                              int32_t ndim, const char *refname, const tfc_tensor *ref) {
    const tfc_tensor *ts[2] = {ref, t};
    const char *names[2] = {refname, arg};
    TFC_TRY(tfc_tensor_check_writable(fn, arg, t));
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    if (t->dtype != dt)
        return tfc_err(TFC_ERR_DTYPE, "%s: output %s is %s %s, must be %s (%s is %s %s)", fn, arg,
                       tfc_dtype_name(t->dtype), SHAPE(t), tfc_dtype_name(dt), refname, tfc_dtype_name(ref->dtype),
                       SHAPE(ref));
    if (!same_dims(t, dims, ndim))
        return tfc_err(TFC_ERR_SHAPE, "%s: output %s is %s, must be %s (%s is %s)", fn, arg, SHAPE(t),
                       tfc_fmt_dims(dims, ndim), refname, SHAPE(ref));
    return TFC_OK;
}

tfc_status tfc_karg_output(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *dims,
                           int32_t ndim, const char *refname, const tfc_tensor *ref) {
    TFC_TRY(output_like(fn, arg, t, dt, dims, ndim, refname, ref));
    if (!tfc_is_contiguous(t))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: output %s %s has strides %s; outputs must be contiguous", fn, arg,
                       SHAPE(t), tfc_fmt_dims(t->strides, t->ndim));
    return TFC_OK;
}

tfc_status tfc_karg_flags(const char *fn, uint32_t flags) {
    if (flags & ~TFC_GRAD_ACCUMULATE)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: flags is 0x%x; only TFC_GRAD_ACCUMULATE (0x%x) is defined", fn,
                       (unsigned)flags, (unsigned)TFC_GRAD_ACCUMULATE);
    return TFC_OK;
}

/* Byte range [lo, hi) of t's elements inside its storage; empty when numel is 0. */
static void byte_range(const tfc_tensor *t, int64_t *lo, int64_t *hi) {
    int64_t a = t->offset, b = t->offset;
    for (int32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) {
            *lo = *hi = 0;
            return;
        }
        int64_t span = (t->shape[i] - 1) * t->strides[i];
        if (span < 0)
            a += span;
        else
            b += span;
    }
    int64_t es = (int64_t)tfc_dtype_size(t->dtype);
    *lo = a * es;
    *hi = (b + 1) * es;
}

/* a floor-divided by b > 0. */
static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

/*
 * 1 when a and b (one storage, whose byte ranges overlap), both rows at one
 * stride L (tfc_rows_ld), share no element. a's rows start at offA + i·L
 * (i < ra) and hold ca elements, b's likewise; row i of a meets row j of b
 * iff k = i − j has d − ca < k·L < d + cb, d = offB − offA. The smallest k
 * above the lower bound decides. Different strides or element sizes count
 * as overlapping (not needed so far).
 */
static int rows_apart(const tfc_tensor *a, const tfc_tensor *b) {
    int64_t la, lb;
    if (tfc_dtype_size(a->dtype) != tfc_dtype_size(b->dtype) || !tfc_rows_ld(a, &la) || !tfc_rows_ld(b, &lb)) return 0;
    int64_t ca = a->ndim ? a->shape[a->ndim - 1] : 1, cb = b->ndim ? b->shape[b->ndim - 1] : 1;
    int64_t ra = tfc_numel(a) / ca, rb = tfc_numel(b) / cb; /* both hold elements: their byte ranges overlap */
    if ((ra > 1 && rb > 1 && la != lb) || (ra <= 1 && rb <= 1)) return 0; /* one row each: the byte ranges said it */
    int64_t L = ra > 1 ? la : lb, d = b->offset - a->offset;
    int64_t k = floor_div(d - ca, L) + 1;
    if (k < -(rb - 1)) k = -(rb - 1);
    return !(k <= ra - 1 && k * L < d + cb);
}

tfc_status tfc_karg_disjoint(const char *fn, const tfc_tensor *const *tensors, const char *const *names, int32_t nout,
                             int32_t n) {
    for (int32_t i = 0; i < nout; i++) {
        const tfc_tensor *o = tensors[i];
        if (!o) continue;
        int64_t olo, ohi;
        byte_range(o, &olo, &ohi);
        if (olo == ohi) continue;
        for (int32_t j = 0; j < n; j++) {
            const tfc_tensor *t = tensors[j];
            if (j == i || !t || t->storage != o->storage) continue;
            int64_t lo, hi;
            byte_range(t, &lo, &hi);
            if (lo < ohi && olo < hi && !rows_apart(o, t))
                return tfc_err(TFC_ERR_INVALID_ARG, "%s: output %s %s overlaps %s%s %s in memory", fn, names[i],
                               SHAPE(o), j < nout ? "output " : "", names[j], SHAPE(t));
        }
    }
    return TFC_OK;
}

tfc_status tfc_operand(tfc_operands *o, const tfc_tensor *t, const void **data) {
    *data = NULL;
    if (!t) return TFC_OK;
    if (tfc_is_contiguous(t)) {
        *data = tfc_data(t);
        return TFC_OK;
    }
    if (o->n == TFC_OPERANDS_MAX)
        return tfc_err(TFC_ERR_INTERNAL, "tfc_operand: more than %d temporaries", TFC_OPERANDS_MAX);
    TFC_TRY(tfc_make_contiguous(t, &o->tmp[o->n]));
    *data = tfc_data(o->tmp[o->n++]);
    return TFC_OK;
}

tfc_status tfc_operand_rows(tfc_operands *o, const tfc_tensor *t, const tfc_tensor **use) {
    *use = t;
    if (!t || t->ndim == 0 || t->shape[t->ndim - 1] <= 1 || t->strides[t->ndim - 1] == 1) return TFC_OK;
    if (o->n == TFC_OPERANDS_MAX)
        return tfc_err(TFC_ERR_INTERNAL, "tfc_operand: more than %d temporaries", TFC_OPERANDS_MAX);
    TFC_TRY(tfc_make_contiguous(t, &o->tmp[o->n]));
    *use = o->tmp[o->n++];
    return TFC_OK;
}

void tfc_operands_release(tfc_operands *o) {
    for (int32_t i = 0; i < o->n; i++) tfc_tensor_release(o->tmp[i]);
    o->n = 0;
}

void tfc_written(tfc_tensor *a, tfc_tensor *b, tfc_tensor *c) {
    if (a) tfc_bump_version(a);
    if (b) tfc_bump_version(b);
    if (c) tfc_bump_version(c);
}

int tfc_rows_ld(const tfc_tensor *t, int64_t *ld) {
    const int32_t nd = t->ndim;
    const int64_t cols = nd ? t->shape[nd - 1] : 1;
    if (tfc_numel(t) == 0) {
        *ld = cols;
        return 1;
    }
    if (cols > 1 && t->strides[nd - 1] != 1) return 0;
    /* The leading dims (size-1 ones aside) must nest: each one's stride is the next inner one's times its size. */
    int64_t L = cols, span = 0; /* span: rows covered by the leading dims seen so far (0: none yet) */
    for (int32_t i = nd - 2; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (!span) {
            L = t->strides[i];
            span = t->shape[i];
        } else {
            if (t->strides[i] != L * span) return 0;
            span *= t->shape[i];
        }
    }
    if (span && L < cols) return 0;
    *ld = L;
    return 1;
}

tfc_status tfc_operand_ld(tfc_operands *o, const tfc_tensor *t, const void **data, int64_t *ld) {
    if (tfc_rows_ld(t, ld)) {
        *data = tfc_data(t);
        return TFC_OK;
    }
    if (o->n == TFC_OPERANDS_MAX)
        return tfc_err(TFC_ERR_INTERNAL, "tfc_operand: more than %d temporaries", TFC_OPERANDS_MAX);
    TFC_TRY(tfc_make_contiguous(t, &o->tmp[o->n]));
    *data = tfc_data(o->tmp[o->n++]);
    *ld = t->ndim ? t->shape[t->ndim - 1] : 1;
    return TFC_OK;
}

tfc_status tfc_karg_output_rows(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *dims,
                                int32_t ndim, const char *refname, const tfc_tensor *ref, int64_t *ld) {
    TFC_TRY(output_like(fn, arg, t, dt, dims, ndim, refname, ref));
    if (!tfc_rows_ld(t, ld))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: output %s %s has strides %s; it must be rows of its last dim, unit stride along it and one "
                       "stride (at least the row length) between rows",
                       fn, arg, SHAPE(t), tfc_fmt_dims(t->strides, t->ndim));
    return TFC_OK;
}
