/* Device dispatch helpers and the CUDA tensor primitives ops compose from. */
#include "device/dispatch.h"

#include <stdio.h>
#include <string.h>

#include "core/dtype.h"

const char *tfc_device_str(const tfc_tensor *t, char *buf, size_t cap) {
    if (t->storage->device == TFC_DEVICE_CPU) snprintf(buf, cap, "cpu");
    else if (t->storage->device == TFC_DEVICE_CUDA) snprintf(buf, cap, "cuda:%d", (int)t->storage->device_index);
    else snprintf(buf, cap, "device %d:%d", (int)t->storage->device, (int)t->storage->device_index);
    return buf;
}

tfc_status tfc_same_device(const char *fn, const tfc_tensor *const *ts, const char *const *names, int32_t n) {
    int32_t first = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (first < 0) {
            first = i;
            continue;
        }
        const tfc_storage *a = ts[first]->storage, *b = ts[i]->storage;
        if (a->device != b->device || a->device_index != b->device_index) {
            char da[32], db[32];
            return tfc_err(TFC_ERR_DEVICE, "%s: %s lives on %s but %s lives on %s; the tensors of one call must "
                           "share a device (move them with tfc_tensor_to_device)", fn, names[first],
                           tfc_device_str(ts[first], da, sizeof da), names[i], tfc_device_str(ts[i], db, sizeof db));
        }
    }
    return TFC_OK;
}

tfc_status tfc_cuda_for(const char *fn, const tfc_tensor *t, const tfc_cuda_api **api, int32_t *dev) {
    const tfc_cuda_api *c = tfc_cuda();
    if (!c) {
        char why[600];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(TFC_ERR_DEVICE, "%s: %s", fn, why);
    }
    *api = c;
    *dev = t->storage->device_index;
    return TFC_OK;
}

tfc_status tfc_cuda_ready(const char *fn, const tfc_tensor *t) {
    const tfc_cuda_api *api;
    int32_t dev;
    return tfc_is_cuda(t) ? tfc_cuda_for(fn, t, &api, &dev) : TFC_OK;
}

tfc_status tfc_cuda_done(const char *fn, const char *entry, const tfc_cuda_api *api, tfc_status s) {
    if (s == TFC_OK) return TFC_OK;
    return tfc_err(s, "%s: CUDA %s: %s", fn, entry, api->last_error());
}

tfc_status tfc_cuda_unimplemented(const char *fn, const char *what) {
    return tfc_err(TFC_ERR_DEVICE, "%s: %s is not implemented on CUDA", fn, what);
}

tfc_status tfc_tensor_new_on(const tfc_tensor *like, const int64_t *shape, int32_t ndim, tfc_dtype dtype,
                             tfc_tensor **out) {
    return tfc_tensor_new(shape, ndim, dtype, like->storage->device, like->storage->device_index, out);
}

/* A layout for the table: rank >= 1 (a scalar is [1]). */
static void layout_of(tfc_cuda_strided *l, const int64_t *shape, const int64_t *sa, const int64_t *sb, int32_t ndim) {
    memset(l, 0, sizeof *l);
    l->ndim = ndim > 0 ? ndim : 1;
    l->shape[0] = 1;
    for (int32_t i = 0; i < ndim; i++) {
        l->shape[i] = shape[i];
        l->stride_a[i] = sa ? sa[i] : 0;
        l->stride_b[i] = sb ? sb[i] : 0;
    }
}

static int64_t numel_of(const int64_t *shape, int32_t ndim) {
    int64_t n = 1;
    for (int32_t i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

static int is_contig_strides(const int64_t *shape, const int64_t *strides, int32_t ndim) {
    int64_t want = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
        if (shape[i] != 1 && strides[i] != want) return 0;
        want *= shape[i];
    }
    return 1;
}

tfc_status tfc_cuda_gather(const char *fn, const tfc_tensor *t, const int64_t *shape, const int64_t *strides,
                           int32_t ndim, tfc_tensor **out) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, t, &api, &dev));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(t, shape, ndim, t->dtype, &r));
    int64_t n = numel_of(shape, ndim);
    tfc_status s = TFC_OK;
    if (n > 0) {
        if (is_contig_strides(shape, strides, ndim)) {
            s = tfc_cuda_done(fn, "memcpy", api,
                              api->memcpy(dev, tfc_data(r), tfc_data(t), (size_t)n * tfc_dtype_size(t->dtype), 2));
        } else {
            tfc_cuda_strided l;
            layout_of(&l, shape, strides, NULL, ndim);
            s = tfc_cuda_done(fn, "copy_strided", api, api->copy_strided(dev, t->dtype, tfc_data(t), tfc_data(r), &l));
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

tfc_status tfc_cuda_clone(const char *fn, const tfc_tensor *t, tfc_tensor **out) {
    return tfc_cuda_gather(fn, t, t->shape, t->strides, t->ndim, out);
}

tfc_status tfc_cuda_fill(const char *fn, tfc_tensor *t, double value) {
    const tfc_cuda_api *api;
    int32_t dev;
    if (!tfc_is_contiguous(t)) return tfc_cuda_unimplemented(fn, "filling a non-contiguous view");
    TFC_TRY(tfc_cuda_for(fn, t, &api, &dev));
    size_t n = (size_t)tfc_numel(t);
    if (n == 0) return TFC_OK;
    if (value == 0.0)
        return tfc_cuda_done(fn, "memset0", api, api->memset0(dev, tfc_data(t), n * tfc_dtype_size(t->dtype)));
    return tfc_cuda_done(fn, "fill", api, api->fill(dev, t->dtype, tfc_data(t), n, value));
}

/* t as a contiguous tensor (a new reference to t when it already is). */
static tfc_status contiguous(const char *fn, const tfc_tensor *t, tfc_tensor **out) {
    if (tfc_is_contiguous(t)) {
        *out = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    return tfc_cuda_clone(fn, t, out);
}

tfc_status tfc_cuda_cast(const char *fn, const tfc_tensor *x, tfc_dtype dt, tfc_tensor **out) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, x, &api, &dev));
    tfc_tensor *c, *r;
    TFC_TRY(contiguous(fn, x, &c));
    tfc_status s = tfc_tensor_new_like(c, dt, &r);
    if (s == TFC_OK && tfc_numel(c) > 0) {
        s = tfc_cuda_done(fn, "cast", api, api->cast(dev, c->dtype, tfc_data(c), dt, tfc_data(r), (size_t)tfc_numel(c)));
        if (s != TFC_OK) tfc_tensor_release(r);
    }
    tfc_tensor_release(c);
    TFC_TRY(s);
    *out = r;
    return TFC_OK;
}

/* t read as `shape` (broadcast), as a contiguous tensor of exactly that shape. */
static tfc_status broadcast_contiguous(const char *fn, const tfc_tensor *t, const int64_t *shape, int32_t ndim,
                                       tfc_tensor **out) {
    int same = t->ndim == ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return contiguous(fn, t, out);
    int64_t st[TFC_MAX_DIMS];
    tfc_broadcast_strides(t, shape, ndim, st);
    return tfc_cuda_gather(fn, t, shape, st, ndim, out);
}

tfc_status tfc_cuda_binary_new(const char *fn, int32_t op, const tfc_tensor *a, const tfc_tensor *b,
                               const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, a, &api, &dev));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(a, shape, ndim, a->dtype, &r));
    int64_t n = numel_of(shape, ndim);
    tfc_status s = TFC_OK;
    if (n > 0) {
        int64_t sa[TFC_MAX_DIMS], sb[TFC_MAX_DIMS];
        tfc_broadcast_strides(a, shape, ndim, sa);
        tfc_broadcast_strides(b, shape, ndim, sb);
        if (is_contig_strides(shape, sa, ndim) && is_contig_strides(shape, sb, ndim)) {
            s = tfc_cuda_done(fn, "binary", api,
                              api->binary(dev, op, a->dtype, tfc_data(a), tfc_data(b), tfc_data(r), (size_t)n));
        } else {
            tfc_cuda_strided l;
            layout_of(&l, shape, sa, sb, ndim);
            s = tfc_cuda_done(fn, "binary_strided", api,
                              api->binary_strided(dev, op, a->dtype, tfc_data(a), tfc_data(b), tfc_data(r), &l));
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

/* The two contiguous single-input forms: r = f(a) with a materialised at `shape` first. */
static tfc_status single_new(const char *fn, int32_t is_unary, int32_t op, const tfc_tensor *a, double sc,
                             const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, a, &api, &dev));
    tfc_tensor *c, *r;
    TFC_TRY(broadcast_contiguous(fn, a, shape, ndim, &c));
    tfc_status s = tfc_tensor_new_like(c, c->dtype, &r);
    size_t n = (size_t)tfc_numel(c);
    if (s == TFC_OK && n > 0) {
        s = is_unary ? tfc_cuda_done(fn, "unary", api, api->unary(dev, op, c->dtype, tfc_data(c), tfc_data(r), n))
                     : tfc_cuda_done(fn, "binary_scalar", api,
                                     api->binary_scalar(dev, op, c->dtype, tfc_data(c), sc, tfc_data(r), n));
        if (s != TFC_OK) tfc_tensor_release(r);
    }
    tfc_tensor_release(c);
    TFC_TRY(s);
    *out = r;
    return TFC_OK;
}

tfc_status tfc_cuda_scalar_new(const char *fn, int32_t op, const tfc_tensor *a, double s, const int64_t *shape,
                               int32_t ndim, tfc_tensor **out) {
    return single_new(fn, 0, op, a, s, shape, ndim, out);
}

tfc_status tfc_cuda_unary_new(const char *fn, int32_t op, const tfc_tensor *a, const int64_t *shape, int32_t ndim,
                              tfc_tensor **out) {
    return single_new(fn, 1, op, a, 0.0, shape, ndim, out);
}

tfc_status tfc_cuda_unary_bwd_new(const char *fn, int32_t op, const tfc_tensor *dy, const tfc_tensor *x,
                                  const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, dy, &api, &dev));
    tfc_tensor *cdy = NULL, *cx = NULL, *r = NULL;
    tfc_status s = broadcast_contiguous(fn, dy, shape, ndim, &cdy);
    if (s == TFC_OK) s = broadcast_contiguous(fn, x, shape, ndim, &cx);
    if (s == TFC_OK) s = tfc_tensor_new_like(cdy, cdy->dtype, &r);
    size_t n = s == TFC_OK ? (size_t)tfc_numel(r) : 0;
    if (s == TFC_OK && n > 0)
        s = tfc_cuda_done(fn, "unary_backward", api,
                          api->unary_backward(dev, op, cdy->dtype, tfc_data(cdy), tfc_data(cx), tfc_data(r), n, 0));
    tfc_tensor_release(cdy);
    tfc_tensor_release(cx);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

/* dst (contiguous) = dst OP src, or = src when op < 0. */
static tfc_status into(const char *fn, int32_t op, tfc_tensor *dst, const tfc_tensor *src) {
    const tfc_cuda_api *api;
    int32_t dev;
    if (!tfc_is_contiguous(dst)) return tfc_cuda_unimplemented(fn, "writing into a non-contiguous view");
    TFC_TRY(tfc_cuda_for(fn, dst, &api, &dev));
    int64_t n = tfc_numel(dst);
    if (n == 0) return TFC_OK;
    tfc_status s;
    if (tfc_is_contiguous(src)) {
        s = op < 0 ? tfc_cuda_done(fn, "memcpy", api,
                                   api->memcpy(dev, tfc_data(dst), tfc_data(src),
                                               (size_t)n * tfc_dtype_size(dst->dtype), 2))
                   : tfc_cuda_done(fn, "binary", api,
                                   api->binary(dev, op, dst->dtype, tfc_data(dst), tfc_data(src), tfc_data(dst),
                                               (size_t)n));
    } else {
        /* out[i] reads dst[i] (same element, same thread) and src through its strides. */
        tfc_cuda_strided l;
        if (op < 0) {
            layout_of(&l, dst->shape, src->strides, NULL, dst->ndim);
            s = tfc_cuda_done(fn, "copy_strided", api, api->copy_strided(dev, dst->dtype, tfc_data(src), tfc_data(dst), &l));
        } else {
            int64_t cs[TFC_MAX_DIMS];
            tfc_contiguous_strides(dst->shape, dst->ndim, cs);
            layout_of(&l, dst->shape, cs, src->strides, dst->ndim);
            s = tfc_cuda_done(fn, "binary_strided", api,
                              api->binary_strided(dev, op, dst->dtype, tfc_data(dst), tfc_data(src), tfc_data(dst), &l));
        }
    }
    if (s == TFC_OK) tfc_bump_version(dst);
    return s;
}

tfc_status tfc_cuda_add_into(const char *fn, tfc_tensor *dst, const tfc_tensor *src) {
    return into(fn, TFC_CUDA_ADD, dst, src);
}

tfc_status tfc_cuda_copy_into(const char *fn, tfc_tensor *dst, const tfc_tensor *src) { return into(fn, -1, dst, src); }
