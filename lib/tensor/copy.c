/* Moving data in and out of tensors: copies, fills, casts across devices. */
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/dispatch.h"
#include "tensor/tensor_impl.h"

tfc_status tfc_require_cpu(const char *fn, const char *arg, const tfc_tensor *t) {
    if (t->storage->device != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_DEVICE, "%s: %s lives on cuda:%d; %s is not implemented on CUDA (it needs CPU "
                       "tensors)", fn, arg, (int)t->storage->device_index, fn);
    return TFC_OK;
}

tfc_status tfc_make_contiguous(const tfc_tensor *t, tfc_tensor **out) {
    if (tfc_is_contiguous(t)) {
        *out = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    if (tfc_is_cuda(t)) return tfc_cuda_clone("tfc_contiguous", t, out);
    TFC_TRY(tfc_require_cpu("tfc_contiguous", "x", t));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(t, t->dtype, &r));
    tfc_sview dv = tfc_sview_of(r), sv = tfc_sview_of(t);
    tfc_cpu_copy(&dv, &sv);
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_copy_to_host(const tfc_tensor *t, void *dst, size_t nbytes) {
    const char *fn = "tfc_tensor_copy_to_host";
    TFC_CHECK_NOT_NULL(fn, t);
    size_t need = (size_t)tfc_numel(t) * tfc_dtype_size(t->dtype);
    if (need && !dst) return tfc_err(TFC_ERR_INVALID_ARG, "%s: dst is NULL", fn);
    if (nbytes < need)
        return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "%s: t is %s %s (%zu bytes), dst holds %zu bytes", fn,
                       tfc_dtype_name(t->dtype), SHAPE(t), need, nbytes);
    if (!need) return TFC_OK;
    if (t->storage->device != TFC_DEVICE_CPU) {
        tfc_tensor *c;
        if (!tfc_is_contiguous(t))
            return tfc_err(TFC_ERR_UNSUPPORTED, "%s: non-contiguous CUDA tensor: call tfc_contiguous first", fn);
        c = (tfc_tensor *)t;
        return tfc_device_memcpy(TFC_DEVICE_CPU, 0, dst, c->storage->device, c->storage->device_index, tfc_data(c),
                                 need);
    }
    if (tfc_is_contiguous(t)) {
        memcpy(dst, tfc_data(t), need);
        return TFC_OK;
    }
    tfc_sview dv = tfc_sview_of(t), sv = tfc_sview_of(t);
    dv.data = dst;
    tfc_contiguous_strides(dv.shape, dv.ndim, dv.strides);
    tfc_cpu_copy(&dv, &sv);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_copy_from_host(tfc_tensor *t, const void *src, size_t nbytes) {
    const char *fn = "tfc_tensor_copy_from_host";
    TFC_CHECK_NOT_NULL(fn, t);
    size_t need = (size_t)tfc_numel(t) * tfc_dtype_size(t->dtype);
    if (nbytes != need)
        return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "%s: t is %s %s (%zu bytes), src has %zu bytes", fn,
                       tfc_dtype_name(t->dtype), SHAPE(t), need, nbytes);
    if (need && !src) return tfc_err(TFC_ERR_INVALID_ARG, "%s: src is NULL", fn);
    if (!need) return TFC_OK;
    if (t->storage->device != TFC_DEVICE_CPU) {
        if (!tfc_is_contiguous(t))
            return tfc_err(TFC_ERR_UNSUPPORTED, "%s: non-contiguous CUDA destination", fn);
        TFC_TRY(tfc_device_memcpy(t->storage->device, t->storage->device_index, tfc_data(t), TFC_DEVICE_CPU, 0, src,
                                  need));
    } else {
        tfc_sview dv = tfc_sview_of(t), sv = tfc_sview_of(t);
        sv.data = (char *)src;
        tfc_contiguous_strides(sv.shape, sv.ndim, sv.strides);
        tfc_cpu_copy(&dv, &sv);
    }
    tfc_bump_version(t);
    return TFC_OK;
}

/* Does writing dst while reading src risk reading already-written elements? */
static int may_overlap(const tfc_tensor *dst, const tfc_tensor *src) { return dst->storage == src->storage; }

TFC_API tfc_status tfc_tensor_copy_from(tfc_tensor *dst, const tfc_tensor *src) {
    const char *fn = "tfc_tensor_copy_from";
    TFC_CHECK_NOT_NULL(fn, dst);
    TFC_CHECK_NOT_NULL(fn, src);
    /* src must broadcast to dst's shape exactly. */
    if (src->ndim > dst->ndim)
        return tfc_err(TFC_ERR_SHAPE, "%s: src %s does not broadcast to dst %s", fn, SHAPE(src), SHAPE(dst));
    for (int32_t i = 0; i < src->ndim; i++) {
        int64_t ds = dst->shape[dst->ndim - src->ndim + i];
        if (src->shape[i] != ds && src->shape[i] != 1)
            return tfc_err(TFC_ERR_SHAPE, "%s: src %s does not broadcast to dst %s", fn, SHAPE(src), SHAPE(dst));
    }
    if (tfc_is_cuda(dst) && tfc_is_cuda(src) && dst->storage->device_index == src->storage->device_index &&
        dst->dtype == src->dtype && tfc_is_contiguous(dst) && dst->ndim == src->ndim &&
        tfc_numel(dst) == tfc_numel(src) && dst->storage != src->storage) {
        int same = 1;
        for (int32_t i = 0; i < dst->ndim; i++) same &= dst->shape[i] == src->shape[i];
        if (same) return tfc_cuda_copy_into(fn, dst, src); /* a strided view into a contiguous one, on the device */
    }
    if (dst->storage->device != TFC_DEVICE_CPU || src->storage->device != TFC_DEVICE_CPU) {
        /* Cross-device: same shape, dtype and contiguous on both sides. */
        if (src->dtype != dst->dtype || tfc_numel(src) != tfc_numel(dst) || !tfc_is_contiguous(src) ||
            !tfc_is_contiguous(dst))
            return tfc_err(TFC_ERR_UNSUPPORTED, "%s: copies involving CUDA need equal dtype, shape and contiguous "
                           "tensors (dst %s %s, src %s %s)", fn, tfc_dtype_name(dst->dtype), SHAPE(dst),
                           tfc_dtype_name(src->dtype), SHAPE(src));
        TFC_TRY(tfc_device_memcpy(dst->storage->device, dst->storage->device_index, tfc_data(dst), src->storage->device,
                                  src->storage->device_index, tfc_data(src),
                                  (size_t)tfc_numel(src) * tfc_dtype_size(src->dtype)));
        tfc_bump_version(dst);
        return TFC_OK;
    }
    tfc_tensor *staged = NULL;
    if (may_overlap(dst, src)) TFC_TRY(tfc_tensor_clone(src, &staged));
    const tfc_tensor *s = staged ? staged : src;
    tfc_sview dv = tfc_sview_of(dst), sv = tfc_sview_of(s);
    sv.ndim = dv.ndim;
    tfc_broadcast_strides(s, dst->shape, dst->ndim, sv.strides);
    for (int32_t i = 0; i < dv.ndim; i++) sv.shape[i] = dv.shape[i];
    tfc_cpu_copy(&dv, &sv);
    tfc_tensor_release(staged);
    tfc_bump_version(dst);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_fill(tfc_tensor *t, double value) {
    TFC_CHECK_NOT_NULL("tfc_tensor_fill", t);
    if (t->storage->device != TFC_DEVICE_CPU) {
        TFC_TRY(tfc_cuda_fill("tfc_tensor_fill", t, value));
    } else {
        tfc_sview v = tfc_sview_of(t);
        tfc_cpu_fill(&v, value);
    }
    tfc_bump_version(t);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_item(const tfc_tensor *t, double *out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_item", t);
    TFC_CHECK_NOT_NULL("tfc_tensor_item", out);
    if (tfc_numel(t) != 1)
        return tfc_err(TFC_ERR_SHAPE, "tfc_tensor_item: t is %s, need exactly one element", SHAPE(t));
    unsigned char buf[8];
    TFC_TRY(tfc_tensor_copy_to_host(t, buf, sizeof buf));
    *out = tfc_scalar_load(buf, t->dtype, 0);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_clone(const tfc_tensor *t, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_clone", t);
    TFC_CHECK_NOT_NULL("tfc_tensor_clone", out);
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(t, t->dtype, &r));
    tfc_status s;
    if (t->storage->device == TFC_DEVICE_CPU) {
        tfc_sview dv = tfc_sview_of(r), sv = tfc_sview_of(t);
        tfc_cpu_copy(&dv, &sv);
        s = TFC_OK;
    } else {
        tfc_tensor_release(r);
        return tfc_cuda_clone("tfc_tensor_clone", t, out);
    }
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_to_device(const tfc_tensor *t, tfc_device_type device, int32_t device_index,
                                        tfc_tensor **out) {
    const char *fn = "tfc_tensor_to_device";
    TFC_CHECK_NOT_NULL(fn, t);
    TFC_CHECK_NOT_NULL(fn, out);
    if (device != TFC_DEVICE_CPU && device != TFC_DEVICE_CUDA)
        return tfc_err(TFC_ERR_DEVICE, "%s: unknown device type %d", fn, (int)device);
    if (device == TFC_DEVICE_CPU) device_index = 0;
    if (t->storage->device == device && t->storage->device_index == device_index) {
        *out = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    tfc_tensor *src;
    TFC_TRY(tfc_make_contiguous(t, &src));
    tfc_tensor *r;
    tfc_status s = tfc_tensor_new(t->shape, t->ndim, t->dtype, device, device_index, &r);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        tfc_tensor_release(src);
        return tfc_err(s, "%s: %s %s to %s:%d: %s", fn, tfc_dtype_name(t->dtype), SHAPE(t),
                       device == TFC_DEVICE_CUDA ? "cuda" : "cpu", (int)device_index, why);
    }
    if (s == TFC_OK) {
        s = tfc_device_memcpy(device, device_index, tfc_data(r), src->storage->device, src->storage->device_index,
                              tfc_data(src), (size_t)tfc_numel(t) * tfc_dtype_size(t->dtype));
        if (s != TFC_OK) tfc_tensor_release(r);
    }
    tfc_tensor_release(src);
    if (s != TFC_OK) return s;
    *out = r;
    return TFC_OK;
}
