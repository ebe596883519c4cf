/* Moving data in and out of tensors: copies, fills, casts across devices. */
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/tensor_impl.h"

tfc_status tfc_make_contiguous(const tfc_tensor *t, tfc_tensor **out) {
    if (tfc_is_contiguous(t)) {
        *out = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(t, t->dtype, &r));
    tfc_status s = tfc_tensor_copy_view("tfc_contiguous", r, t);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
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
        /* Compacted on the device first: one host transfer of exactly the elements. */
        tfc_tensor *c;
        TFC_TRY(tfc_make_contiguous(t, &c));
        tfc_status s =
            tfc_device_memcpy(TFC_DEVICE_CPU, 0, dst, c->storage->device, c->storage->device_index, tfc_data(c), need);
        tfc_tensor_release(c);
        return tfc_err_in(fn, s);
    }
    tfc_sview dv = tfc_sview_of(t);
    dv.data = dst;
    tfc_contiguous_strides(dv.shape, dv.ndim, dv.strides);
    tfc_copy_problem p = {.device = 0, .dst = dv, .src = tfc_sview_of(t)};
    return TFC_BACKEND_RUN_DT(fn, &tfc_cpu_backend, copy, &p, t->dtype);
}

TFC_API tfc_status tfc_tensor_copy_from_host(tfc_tensor *t, const void *src, size_t nbytes) {
    const char *fn = "tfc_tensor_copy_from_host";
    TFC_CHECK_NOT_NULL(fn, t);
    TFC_TRY(tfc_tensor_check_writable(fn, "t", t));
    size_t need = (size_t)tfc_numel(t) * tfc_dtype_size(t->dtype);
    if (nbytes != need)
        return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "%s: t is %s %s (%zu bytes), src has %zu bytes", fn,
                       tfc_dtype_name(t->dtype), SHAPE(t), need, nbytes);
    if (need && !src) return tfc_err(TFC_ERR_INVALID_ARG, "%s: src is NULL", fn);
    if (!need) return TFC_OK;
    if (t->storage->device != TFC_DEVICE_CPU) {
        if (!tfc_is_contiguous(t)) return tfc_err(TFC_ERR_UNSUPPORTED, "%s: non-contiguous CUDA destination", fn);
        TFC_TRY(
            tfc_device_memcpy(t->storage->device, t->storage->device_index, tfc_data(t), TFC_DEVICE_CPU, 0, src, need));
    } else {
        tfc_sview sv = tfc_sview_of(t);
        sv.data = (char *)src;
        tfc_contiguous_strides(sv.shape, sv.ndim, sv.strides);
        tfc_copy_problem p = {.device = 0, .dst = tfc_sview_of(t), .src = sv};
        TFC_TRY(TFC_BACKEND_RUN_DT(fn, &tfc_cpu_backend, copy, &p, t->dtype));
    }
    tfc_bump_version(t);
    return TFC_OK;
}

/*
 * Does writing dst while reading src risk reading already-written elements?
 * Decided by address, not only by storage: two storages may cover the same
 * memory (two tfc_tensor_wrap calls over one buffer, Python's .data).
 */
static int may_overlap(const tfc_tensor *dst, const tfc_tensor *src) {
    if (dst->storage == src->storage) return 1;
    if (dst->storage->device != src->storage->device || dst->storage->device_index != src->storage->device_index)
        return 0;
    int64_t dlo, dhi, slo, shi;
    if (!tfc_view_span(dst->shape, dst->strides, dst->ndim, &dlo, &dhi) ||
        !tfc_view_span(src->shape, src->strides, src->ndim, &slo, &shi))
        return 1;
    intptr_t dz = (intptr_t)tfc_dtype_size(dst->dtype), sz = (intptr_t)tfc_dtype_size(src->dtype);
    intptr_t d0 = (intptr_t)tfc_data(dst) + (intptr_t)dlo * dz, d1 = (intptr_t)tfc_data(dst) + (intptr_t)(dhi + 1) * dz;
    intptr_t s0 = (intptr_t)tfc_data(src) + (intptr_t)slo * sz, s1 = (intptr_t)tfc_data(src) + (intptr_t)(shi + 1) * sz;
    return s0 < d1 && d0 < s1;
}

TFC_API tfc_status tfc_tensor_copy_from(tfc_tensor *dst, const tfc_tensor *src) {
    const char *fn = "tfc_tensor_copy_from";
    TFC_CHECK_NOT_NULL(fn, dst);
    TFC_CHECK_NOT_NULL(fn, src);
    TFC_TRY(tfc_tensor_check_writable(fn, "dst", dst));
    /* src must broadcast to dst's shape exactly. */
    if (src->ndim > dst->ndim)
        return tfc_err(TFC_ERR_SHAPE, "%s: src %s does not broadcast to dst %s", fn, SHAPE(src), SHAPE(dst));
    for (int32_t i = 0; i < src->ndim; i++) {
        int64_t ds = dst->shape[dst->ndim - src->ndim + i];
        if (src->shape[i] != ds && src->shape[i] != 1)
            return tfc_err(TFC_ERR_SHAPE, "%s: src %s does not broadcast to dst %s", fn, SHAPE(src), SHAPE(dst));
    }
    if (dst->storage->device != src->storage->device || dst->storage->device_index != src->storage->device_index) {
        /* Across devices: one transfer of equal layouts (src compacted on its own device first). */
        if (src->dtype != dst->dtype || tfc_numel(src) != tfc_numel(dst) || !tfc_is_contiguous(dst))
            return tfc_err(TFC_ERR_UNSUPPORTED,
                           "%s: copies between devices need equal dtype and shape and a "
                           "contiguous dst (dst %s %s, src %s %s)",
                           fn, tfc_dtype_name(dst->dtype), SHAPE(dst), tfc_dtype_name(src->dtype), SHAPE(src));
        tfc_tensor *c;
        TFC_TRY(tfc_make_contiguous(src, &c));
        tfc_status s =
            tfc_device_memcpy(dst->storage->device, dst->storage->device_index, tfc_data(dst), c->storage->device,
                              c->storage->device_index, tfc_data(c), (size_t)tfc_numel(c) * tfc_dtype_size(c->dtype));
        tfc_tensor_release(c);
        TFC_TRY(s);
        tfc_bump_version(dst);
        return TFC_OK;
    }
    tfc_tensor *staged = NULL;
    if (may_overlap(dst, src)) TFC_TRY(tfc_tensor_clone(src, &staged));
    tfc_status s = tfc_tensor_copy_view(fn, dst, staged ? staged : src);
    tfc_tensor_release(staged);
    TFC_TRY(s);
    tfc_bump_version(dst);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_fill(tfc_tensor *t, double value) {
    const char *fn = "tfc_tensor_fill";
    TFC_CHECK_NOT_NULL(fn, t);
    TFC_TRY(tfc_tensor_check_writable(fn, "t", t));
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, t, &b));
    tfc_fill_problem p = {.device = tfc_device_index(t), .dst = tfc_sview_of(t), .value = value};
    TFC_TRY(TFC_BACKEND_RUN_DT(fn, b, fill, &p, t->dtype));
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
    TFC_TRY_IN("tfc_tensor_clone", tfc_tensor_new_like(t, t->dtype, &r));
    tfc_status s = tfc_tensor_copy_view("tfc_tensor_clone", r, t);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

/*
 * Ids and targets going to a device: their range, read here on the host where it is free, so the ops on the device
 * need not check it there and read the verdict back (tensor_impl.h, tfc_storage_range_within). r is src's new copy.
 */
static void record_range(tfc_tensor *r, const tfc_tensor *src) {
    if (src->dtype != TFC_DTYPE_I32 && src->dtype != TFC_DTYPE_I64) return;
    const int64_t n = tfc_numel(src);
    int64_t hi = -1, neg_value = 0;
    int32_t neg = 0; /* 0: no negative element; 1: all equal neg_value; 2: several */
    for (int64_t i = 0; i < n; i++) {
        const int64_t v =
            src->dtype == TFC_DTYPE_I32 ? ((const int32_t *)tfc_data(src))[i] : ((const int64_t *)tfc_data(src))[i];
        if (v > hi) hi = v;
        if (v < 0 && neg == 0) neg = 1, neg_value = v;
        if (v < 0 && v != neg_value) neg = 2;
    }
    if (hi == INT64_MAX) return; /* below hi + 1 would not fit */
    tfc_storage *st = r->storage;
    st->range_neg = neg;
    st->range_neg_value = neg_value;
    st->range_hi = hi + 1;
    st->range_version = atomic_load(&st->version);
    atomic_store(&st->range_set, 1);
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
    if (s == TFC_OK && device != TFC_DEVICE_CPU && src->storage->device == TFC_DEVICE_CPU) record_range(r, src);
    tfc_tensor_release(src);
    if (s != TFC_OK) return tfc_err_in(fn, s);
    *out = r;
    return TFC_OK;
}
