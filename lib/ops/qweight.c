/*
 * tfc_qweight: quantizing a float weight into codes + scales (the backend's
 * quantize entry), dequantizing it back, and the handle's accessors and
 * tensor round trip. Formats byte by byte: include/tfcore/quant.h.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/op_util.h"
#include "ops/qweight_impl.h"

/* format and group_size are a valid pair for K columns. */
static tfc_status check_format(const char *fn, tfc_qformat format, int32_t group, int64_t K) {
    if (format == TFC_QFORMAT_INT8) {
        if (group != 0)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: group_size %d: int8 is quantized per output row; group_size must be 0", fn, group);
        return TFC_OK;
    }
    if (format != TFC_QFORMAT_INT4)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: format %d is not a tfc_qformat (TFC_QFORMAT_INT8 = 1, TFC_QFORMAT_INT4 = 2)", fn,
                       (int)format);
    if (group <= 0 || group % 32 != 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: group_size %d: int4 needs a positive multiple of 32 (32, 64, ...)", fn,
                       group);
    if (K % group != 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: group_size %d does not divide K = %lld (in_features)", fn, group,
                       (long long)K);
    return TFC_OK;
}

/* The shapes of codes and scales for W [n, k]. */
static void array_shapes(tfc_qformat format, int64_t n, int64_t k, int32_t group, int64_t cshape[2], int64_t sshape[2],
                         int32_t *snd) {
    cshape[0] = n;
    cshape[1] = format == TFC_QFORMAT_INT4 ? k / 2 : k;
    sshape[0] = n;
    sshape[1] = format == TFC_QFORMAT_INT4 ? k / group : 1;
    *snd = format == TFC_QFORMAT_INT4 ? 2 : 1;
}

static tfc_status new_handle(tfc_qformat format, int64_t n, int64_t k, int32_t group, tfc_tensor *codes,
                             tfc_tensor *scales, tfc_qweight **out) {
    tfc_qweight *q = calloc(1, sizeof *q);
    if (!q) return tfc_err(TFC_ERR_OOM, "out of memory allocating a tfc_qweight");
    atomic_init(&q->refcount, 1);
    q->format = format;
    q->n = n, q->k = k, q->group = group;
    q->codes = codes, q->scales = scales;
    *out = q;
    return TFC_OK;
}

TFC_API tfc_status tfc_quantize(const tfc_tensor *w, tfc_qformat format, int32_t group_size, uint32_t flags,
                                tfc_qweight **out) {
    const char *fn = "tfc_quantize";
    TFC_CHECK_NOT_NULL(fn, w);
    TFC_CHECK_NOT_NULL(fn, out);
    if (flags & ~TFC_QUANT_IN_OUT)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: flags 0x%x has bits other than TFC_QUANT_IN_OUT", fn, flags);
    const int in_out = (flags & TFC_QUANT_IN_OUT) != 0;
    if (w->ndim != 2)
        return tfc_err(TFC_ERR_SHAPE, "%s: w is %s; need a 2-D weight %s", fn, SHAPE(w),
                       in_out ? "[in, out] (TFC_QUANT_IN_OUT)" : "[out, in]");
    if (w->dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: w is %s %s; quantization takes f32 weights (tfc_cast first)", fn,
                       tfc_dtype_name(w->dtype), SHAPE(w));
    const int64_t N = w->shape[in_out], K = w->shape[!in_out];
    if (N < 1 || K < 1) return tfc_err(TFC_ERR_SHAPE, "%s: w is %s; need a non-empty weight", fn, SHAPE(w));
    TFC_TRY(check_format(fn, format, group_size, K));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, w, &be));
    int64_t cs[2], ss[2];
    int32_t snd;
    array_shapes(format, N, K, group_size, cs, ss, &snd);
    tfc_tensor *codes = NULL, *scales = NULL;
    tfc_status s = tfc_tensor_new_on(w, cs, 2, TFC_DTYPE_U8, &codes);
    if (s == TFC_OK) s = tfc_tensor_new_on(w, ss, snd, TFC_DTYPE_F32, &scales);
    if (s == TFC_OK) {
        tfc_quant_problem p = {.device = tfc_device_index(w),
                               .dtype = TFC_DTYPE_F32,
                               .format = format,
                               .N = N,
                               .K = K,
                               .group = group_size,
                               .w = tfc_data(w),
                               .w_sn = w->strides[in_out],
                               .w_sk = w->strides[!in_out],
                               .codes = tfc_data(codes),
                               .scales = tfc_data(scales)};
        s = TFC_BACKEND_RUN(fn, be, quantize, &p);
    }
    if (s == TFC_OK) s = new_handle(format, N, K, group_size, codes, scales, out);
    if (s != TFC_OK) {
        tfc_tensor_release(codes);
        tfc_tensor_release(scales);
    }
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_qweight_dequantize(const tfc_qweight *q, uint32_t flags, tfc_tensor **out) {
    const char *fn = "tfc_qweight_dequantize";
    TFC_CHECK_NOT_NULL(fn, q);
    TFC_CHECK_NOT_NULL(fn, out);
    if (flags & ~TFC_QUANT_IN_OUT)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: flags 0x%x has bits other than TFC_QUANT_IN_OUT", fn, flags);
    const int in_out = (flags & TFC_QUANT_IN_OUT) != 0;
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, q->codes, &be));
    int64_t shape[2] = {in_out ? q->k : q->n, in_out ? q->n : q->k};
    tfc_tensor *r = NULL;
    TFC_TRY(tfc_tensor_new_on(q->codes, shape, 2, TFC_DTYPE_F32, &r));
    tfc_quant_problem p = {.device = tfc_device_index(r),
                           .dtype = TFC_DTYPE_F32,
                           .format = q->format,
                           .N = q->n,
                           .K = q->k,
                           .group = q->group,
                           .w_out = tfc_data(r),
                           .out_in = in_out,
                           .codes = tfc_data(q->codes),
                           .scales = tfc_data(q->scales)};
    tfc_status s = TFC_BACKEND_RUN(fn, be, dequantize, &p);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_qweight_tensors(const tfc_qweight *q, tfc_tensor **packed, tfc_tensor **scales) {
    TFC_CHECK_NOT_NULL("tfc_qweight_tensors", q);
    if (packed) *packed = tfc_tensor_retain(q->codes);
    if (scales) *scales = tfc_tensor_retain(q->scales);
    return TFC_OK;
}

/* An array of a checkpoint: dtype dt, exactly shape, on the CPU; *use = t or a contiguous copy. */
static tfc_status take_array(const char *fn, const char *arg, const tfc_tensor *t, tfc_dtype dt, const int64_t *shape,
                             int32_t nd, tfc_tensor **use) {
    if (t->storage->device != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s is not on the CPU; quantized weights are CPU-only for now", fn,
                       arg);
    if (t->dtype != dt)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; need %s", fn, arg, tfc_dtype_name(t->dtype), SHAPE(t),
                       tfc_dtype_name(dt));
    int same = t->ndim == nd;
    for (int32_t d = 0; same && d < nd; d++) same = t->shape[d] == shape[d];
    if (!same)
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s; the format needs %s", fn, arg, SHAPE(t), tfc_fmt_dims(shape, nd));
    if (tfc_is_contiguous(t)) {
        *use = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    return tfc_make_contiguous(t, use);
}

TFC_API tfc_status tfc_qweight_from_tensors(tfc_qformat format, int64_t n, int64_t k, int32_t group_size,
                                            const tfc_tensor *packed, const tfc_tensor *scales, tfc_qweight **out) {
    const char *fn = "tfc_qweight_from_tensors";
    TFC_CHECK_NOT_NULL(fn, packed);
    TFC_CHECK_NOT_NULL(fn, scales);
    TFC_CHECK_NOT_NULL(fn, out);
    if (n < 1 || k < 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: n = %lld, k = %lld; both must be >= 1", fn, (long long)n,
                       (long long)k);
    TFC_TRY(check_format(fn, format, group_size, k));
    int64_t cs[2], ss[2];
    int32_t snd;
    array_shapes(format, n, k, group_size, cs, ss, &snd);
    tfc_tensor *c = NULL, *sc = NULL;
    tfc_status s = take_array(fn, "packed", packed, TFC_DTYPE_U8, cs, 2, &c);
    if (s == TFC_OK) s = take_array(fn, "scales", scales, TFC_DTYPE_F32, ss, snd, &sc);
    if (s == TFC_OK) {
        const float *v = tfc_data(sc);
        for (int64_t i = 0; i < tfc_numel(sc); i++)
            if (!isfinite(v[i])) {
                s = tfc_err(TFC_ERR_NONFINITE, "%s: scales element %lld (of %s) is %g; every scale must be finite", fn,
                            (long long)i, SHAPE(sc), (double)v[i]);
                break;
            }
    }
    if (s == TFC_OK) s = new_handle(format, n, k, group_size, c, sc, out);
    if (s != TFC_OK) {
        tfc_tensor_release(c);
        tfc_tensor_release(sc);
    }
    return tfc_err_in(fn, s);
}

TFC_API tfc_qweight *tfc_qweight_retain(tfc_qweight *q) {
    if (q) atomic_fetch_add(&q->refcount, 1);
    return q;
}

TFC_API void tfc_qweight_release(tfc_qweight *q) {
    if (!q || atomic_fetch_sub(&q->refcount, 1) != 1) return;
    tfc_tensor_release(q->codes);
    tfc_tensor_release(q->scales);
    free(q);
}

TFC_API tfc_qformat tfc_qweight_format(const tfc_qweight *q) { return q ? q->format : (tfc_qformat)0; }
TFC_API int64_t tfc_qweight_out_features(const tfc_qweight *q) { return q ? q->n : -1; }
TFC_API int64_t tfc_qweight_in_features(const tfc_qweight *q) { return q ? q->k : -1; }
TFC_API int32_t tfc_qweight_group_size(const tfc_qweight *q) { return q ? q->group : -1; }
TFC_API int64_t tfc_qweight_nbytes(const tfc_qweight *q) {
    return q ? tfc_numel(q->codes) + 4 * tfc_numel(q->scales) : -1;
}
