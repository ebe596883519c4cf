/* Tensor handles: creation, references, queries, broadcasting helpers. */
#include "tensor/tensor_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/checked.h"
#include "core/error.h"
#include "device/device.h"

void (*tfc_tensor_autograd_release_hook)(tfc_tensor *t);

tfc_status tfc_check_dims(const char *fn, const int64_t *dims, int32_t ndim, int64_t *numel) {
    if (ndim < 0 || ndim > TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: ndim is %d, must be in [0, %d]", fn, (int)ndim, TFC_MAX_DIMS);
    if (ndim > 0 && !dims) return tfc_err(TFC_ERR_INVALID_ARG, "%s: dims is NULL with ndim %d", fn, (int)ndim);
    for (int32_t i = 0; i < ndim; i++)
        if (dims[i] < 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: dims %s has negative size at dim %d", fn, tfc_fmt_dims(dims, ndim),
                           (int)i);
    /* Byte sizes of up to 16-byte elements must fit too. */
    if (!tfc_dims_numel(dims, ndim, INT64_MAX / 16, numel))
        return tfc_err(TFC_ERR_OOM, "%s: dims %s overflow the element count", fn, tfc_fmt_dims(dims, ndim));
    return TFC_OK;
}

void tfc_contiguous_strides(const int64_t *shape, int32_t ndim, int64_t *strides) {
    int64_t s = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

int tfc_is_contiguous(const tfc_tensor *t) {
    int64_t s = 1;
    for (int32_t i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0) return 1;
        if (t->shape[i] != 1 && t->strides[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

static tfc_status storage_new(size_t nbytes, tfc_device_type dev, int32_t dev_index, tfc_storage **out) {
    tfc_storage *s = calloc(1, sizeof *s);
    if (!s) return tfc_err(TFC_ERR_OOM, "out of memory allocating a storage header");
    tfc_status st = tfc_device_alloc(dev, dev_index, nbytes, &s->data);
    if (st != TFC_OK) {
        free(s);
        return st;
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->nbytes = nbytes;
    s->device = dev;
    s->device_index = dev_index;
    s->from_allocator = 1;
    *out = s;
    return TFC_OK;
}

static void storage_release(tfc_storage *s) {
    if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
    if (s->from_allocator)
        tfc_device_free(s->device, s->device_index, s->data, s->nbytes);
    else if (s->deleter)
        s->deleter(s->data, s->deleter_ctx);
    free(s);
}

static tfc_tensor *handle_new(tfc_storage *s, const int64_t *shape, const int64_t *strides, int32_t ndim,
                              int64_t offset, tfc_dtype dtype) {
    tfc_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    atomic_init(&t->refcount, 1);
    t->storage = s;
    t->offset = offset;
    t->ndim = ndim;
    t->dtype = dtype;
    for (int32_t i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
    return t;
}

tfc_status tfc_tensor_new(const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_device_type dev, int32_t dev_index,
                          tfc_tensor **out) {
    int64_t numel;
    TFC_TRY(tfc_check_dims("tfc_tensor_new", dims, ndim, &numel));
    size_t es = tfc_dtype_size(dtype);
    if (!es) return tfc_err(TFC_ERR_DTYPE, "tfc_tensor_new: unknown dtype %d", (int)dtype);
    tfc_storage *s;
    TFC_TRY(storage_new((size_t)numel * es, dev, dev_index, &s));
    int64_t strides[TFC_MAX_DIMS];
    tfc_contiguous_strides(dims, ndim, strides);
    tfc_tensor *t = handle_new(s, dims, strides, ndim, 0, dtype);
    if (!t) {
        storage_release(s);
        return tfc_err(TFC_ERR_OOM, "out of memory allocating a tensor handle");
    }
    *out = t;
    return TFC_OK;
}

tfc_status tfc_tensor_new_like(const tfc_tensor *t, tfc_dtype dtype, tfc_tensor **out) {
    return tfc_tensor_new(t->shape, t->ndim, dtype, t->storage->device, t->storage->device_index, out);
}

tfc_status tfc_tensor_zeros_like(const tfc_tensor *t, tfc_dtype dt, tfc_tensor **out) {
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(t, dt, &r));
    tfc_status s =
        tfc_device_memset0(r->storage->device, r->storage->device_index, r->storage->data, r->storage->nbytes);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

tfc_status tfc_tensor_alias(const tfc_tensor *t, const int64_t *shape, const int64_t *strides, int32_t ndim,
                            int64_t offset, tfc_tensor **out) {
    tfc_tensor *r = handle_new(t->storage, shape, strides, ndim, offset, t->dtype);
    if (!r) return tfc_err(TFC_ERR_OOM, "out of memory allocating a view handle");
    atomic_fetch_add(&t->storage->refcount, 1);
    *out = r;
    return TFC_OK;
}

static tfc_status cpu_create(const char *fn, const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    if (!tfc_dtype_valid(dtype)) return tfc_err(TFC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
    int64_t numel;
    TFC_TRY(tfc_check_dims(fn, dims, ndim, &numel));
    tfc_status s = tfc_tensor_new(dims, ndim, dtype, TFC_DEVICE_CPU, 0, out);
    if (s == TFC_ERR_OOM)
        return tfc_err(s, "%s: cannot allocate %s %s (%lld bytes)", fn, tfc_dtype_name(dtype), tfc_fmt_dims(dims, ndim),
                       (long long)(numel * (int64_t)tfc_dtype_size(dtype)));
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_tensor_empty(const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_tensor **out) {
    return cpu_create("tfc_tensor_empty", dims, ndim, dtype, out);
}

static tfc_status create_filled(const char *fn, const int64_t *dims, int32_t ndim, tfc_dtype dtype, double value,
                                tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_tensor *t;
    TFC_TRY(cpu_create(fn, dims, ndim, dtype, &t));
    tfc_status s = tfc_tensor_fill(t, value);
    if (s != TFC_OK) {
        tfc_tensor_release(t);
        return tfc_err_in(fn, s);
    }
    *out = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_zeros(const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_tensor **out) {
    return create_filled("tfc_tensor_zeros", dims, ndim, dtype, 0.0, out);
}

TFC_API tfc_status tfc_tensor_ones(const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_tensor **out) {
    return create_filled("tfc_tensor_ones", dims, ndim, dtype, 1.0, out);
}

TFC_API tfc_status tfc_tensor_full(const int64_t *dims, int32_t ndim, tfc_dtype dtype, double value, tfc_tensor **out) {
    return create_filled("tfc_tensor_full", dims, ndim, dtype, value, out);
}

TFC_API tfc_status tfc_tensor_arange(double start, double end, double step, tfc_dtype dtype, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_arange", out);
    if (!isfinite(start) || !isfinite(end) || !isfinite(step) || step == 0.0)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "tfc_tensor_arange: start %g, end %g, step %g: need finite bounds "
                       "and a non-zero step",
                       start, end, step);
    double count = ceil((end - start) / step);
    if (count < 0) count = 0;
    if (count > 1e15) return tfc_err(TFC_ERR_OOM, "tfc_tensor_arange: %g elements is too many", count);
    int64_t n = (int64_t)count;
    tfc_tensor *t;
    TFC_TRY(cpu_create("tfc_tensor_arange", &n, 1, dtype, &t));
    for (int64_t i = 0; i < n; i++) tfc_scalar_store(t->storage->data, dtype, i, start + (double)i * step);
    *out = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_from_data(const void *data, const int64_t *dims, int32_t ndim, tfc_dtype dtype,
                                        tfc_tensor **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_from_data", out);
    tfc_tensor *t;
    TFC_TRY(cpu_create("tfc_tensor_from_data", dims, ndim, dtype, &t));
    size_t nbytes = (size_t)tfc_numel(t) * tfc_dtype_size(dtype);
    if (nbytes && !data) {
        tfc_tensor_release(t);
        return tfc_err(TFC_ERR_INVALID_ARG, "tfc_tensor_from_data: data is NULL for shape %s",
                       tfc_fmt_dims(dims, ndim));
    }
    if (nbytes) memcpy(t->storage->data, data, nbytes);
    *out = t;
    return TFC_OK;
}

static tfc_status wrap(const char *fn, void *data, const int64_t *dims, const int64_t *strides, int32_t ndim,
                       tfc_dtype dtype, uint32_t flags, tfc_deleter deleter, void *deleter_ctx, tfc_tensor **out);

TFC_API tfc_status tfc_tensor_wrap(void *data, const int64_t *dims, const int64_t *strides, int32_t ndim,
                                   tfc_dtype dtype, tfc_deleter deleter, void *deleter_ctx, tfc_tensor **out) {
    return wrap("tfc_tensor_wrap", data, dims, strides, ndim, dtype, 0, deleter, deleter_ctx, out);
}

TFC_API tfc_status tfc_tensor_wrap_ex(void *data, const int64_t *dims, const int64_t *strides, int32_t ndim,
                                      tfc_dtype dtype, uint32_t flags, tfc_deleter deleter, void *deleter_ctx,
                                      tfc_tensor **out) {
    return wrap("tfc_tensor_wrap_ex", data, dims, strides, ndim, dtype, flags, deleter, deleter_ctx, out);
}

static tfc_status wrap(const char *fn, void *data, const int64_t *dims, const int64_t *strides, int32_t ndim,
                       tfc_dtype dtype, uint32_t flags, tfc_deleter deleter, void *deleter_ctx, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    if (flags & ~(uint32_t)TFC_WRAP_READ_ONLY)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: flags 0x%x has bits other than TFC_WRAP_READ_ONLY", fn,
                       (unsigned)flags);
    if (!tfc_dtype_valid(dtype)) return tfc_err(TFC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
    int64_t numel;
    TFC_TRY(tfc_check_dims(fn, dims, ndim, &numel));
    if (!data && numel)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: data is NULL for shape %s", fn, tfc_fmt_dims(dims, ndim));
    if ((uintptr_t)data % tfc_dtype_size(dtype))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: data %p is not aligned to its %zu-byte %s elements", fn, data,
                       tfc_dtype_size(dtype), tfc_dtype_name(dtype));
    int64_t st[TFC_MAX_DIMS];
    if (strides) {
        for (int32_t i = 0; i < ndim; i++) st[i] = strides[i];
    } else {
        tfc_contiguous_strides(dims, ndim, st);
    }
    /* Span of the addressed elements, for the storage size; its byte size must fit too. */
    int64_t lo = 0, hi = 0, count, bytes;
    if (!tfc_view_span(dims, st, ndim, &lo, &hi) || !tfc_add_i64(hi, 1, &count) ||
        !tfc_mul_i64(count, (int64_t)tfc_dtype_size(dtype), &bytes))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: strides %s for shape %s address beyond the 64-bit range", fn,
                       tfc_fmt_dims(st, ndim), tfc_fmt_dims(dims, ndim));
    if (lo < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: negative strides are not supported", fn);
    tfc_storage *s = calloc(1, sizeof *s);
    if (!s) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = data;
    s->nbytes = numel ? (size_t)(hi + 1) * tfc_dtype_size(dtype) : 0;
    s->device = TFC_DEVICE_CPU;
    s->deleter = deleter;
    s->deleter_ctx = deleter_ctx;
    s->read_only = (flags & TFC_WRAP_READ_ONLY) != 0;
    tfc_tensor *t = handle_new(s, dims, st, ndim, 0, dtype);
    if (!t) {
        free(s);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    *out = t;
    return TFC_OK;
}

TFC_API tfc_tensor *tfc_tensor_retain(tfc_tensor *t) {
    if (t) atomic_fetch_add(&t->refcount, 1);
    return t;
}

TFC_API void tfc_tensor_release(tfc_tensor *t) {
    if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
    if (t->node) {
        if (tfc_tensor_autograd_release_hook) {
            tfc_tensor_autograd_release_hook(t);
        } else {
            tfc_err(TFC_ERR_INTERNAL,
                    "tfc_tensor_release: a tensor %s has a graph node but the autograd layer "
                    "registered no release hook (a broken build); the node is leaked",
                    SHAPE(t));
            fprintf(stderr, "libtfcore: %s\n", tfc_last_error());
        }
    }
    tfc_tensor_release(t->grad);
    storage_release(t->storage);
    free(t);
}

TFC_API int32_t tfc_tensor_ndim(const tfc_tensor *t) { return t ? t->ndim : -1; }

TFC_API tfc_status tfc_tensor_shape(const tfc_tensor *t, int64_t *dims, int32_t cap) {
    TFC_CHECK_NOT_NULL("tfc_tensor_shape", t);
    if (t->ndim > 0) TFC_CHECK_NOT_NULL("tfc_tensor_shape", dims);
    if (cap < t->ndim)
        return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "tfc_tensor_shape: cap is %d, tensor %s has %d dims", (int)cap,
                       SHAPE(t), (int)t->ndim);
    for (int32_t i = 0; i < t->ndim; i++) dims[i] = t->shape[i];
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_strides(const tfc_tensor *t, int64_t *strides, int32_t cap) {
    TFC_CHECK_NOT_NULL("tfc_tensor_strides", t);
    if (t->ndim > 0) TFC_CHECK_NOT_NULL("tfc_tensor_strides", strides);
    if (cap < t->ndim)
        return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "tfc_tensor_strides: cap is %d, tensor %s has %d dims", (int)cap,
                       SHAPE(t), (int)t->ndim);
    for (int32_t i = 0; i < t->ndim; i++) strides[i] = t->strides[i];
    return TFC_OK;
}

TFC_API int64_t tfc_tensor_dim(const tfc_tensor *t, int32_t dim) {
    if (!t) return -1;
    if (dim < 0) dim += t->ndim;
    if (dim < 0 || dim >= t->ndim) return -1;
    return t->shape[dim];
}

TFC_API int64_t tfc_tensor_numel(const tfc_tensor *t) { return t ? tfc_numel(t) : 0; }
TFC_API tfc_dtype tfc_tensor_dtype(const tfc_tensor *t) { return t ? t->dtype : (tfc_dtype)-1; }
TFC_API tfc_device_type tfc_tensor_device_type(const tfc_tensor *t) {
    return t ? t->storage->device : (tfc_device_type)0;
}
TFC_API int32_t tfc_tensor_device_index(const tfc_tensor *t) { return t ? t->storage->device_index : -1; }
TFC_API void *tfc_tensor_data(const tfc_tensor *t) {
    if (!t) return NULL;
    atomic_store(&t->storage->range_set, 0); /* writes through the pointer would go unseen */
    return tfc_data(t);
}
TFC_API int64_t tfc_tensor_storage_offset(const tfc_tensor *t) { return t ? t->offset : 0; }
TFC_API int32_t tfc_tensor_is_contiguous(const tfc_tensor *t) { return t ? tfc_is_contiguous(t) : 0; }
TFC_API int32_t tfc_tensor_shares_storage(const tfc_tensor *a, const tfc_tensor *b) {
    return a && b && a->storage == b->storage;
}
TFC_API int32_t tfc_tensor_is_read_only(const tfc_tensor *t) { return t ? t->storage->read_only : 0; }

tfc_status tfc_tensor_check_writable(const char *fn, const char *arg, const tfc_tensor *t) {
    if (!t || !t->storage->read_only) return TFC_OK;
    return tfc_err(TFC_ERR_INVALID_ARG,
                   "%s: %s %s %s is read-only (it wraps memory its owner marked read-only); "
                   "in-place writes into it are refused: write into a copy (clone) instead",
                   fn, arg, tfc_dtype_name(t->dtype), tfc_fmt_dims(t->shape, t->ndim));
}

TFC_API uint64_t tfc_tensor_version(const tfc_tensor *t) { return t ? atomic_load(&t->storage->version) : 0; }

tfc_status tfc_broadcast_shape(const char *fn, const tfc_tensor *a, const tfc_tensor *b, int64_t *shape,
                               int32_t *ndim) {
    int32_t n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int32_t i = 0; i < n; i++) {
        int32_t ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return tfc_err(TFC_ERR_SHAPE, "%s: a is %s, b is %s: cannot broadcast (dim %d: %lld vs %lld)", fn, SHAPE(a),
                           SHAPE(b), (int)i, (long long)da, (long long)db);
        shape[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return TFC_OK;
}

void tfc_broadcast_strides(const tfc_tensor *t, const int64_t *shape, int32_t ndim, int64_t *strides) {
    for (int32_t i = 0; i < ndim; i++) {
        int32_t it = i - (ndim - t->ndim);
        strides[i] = (it < 0 || (t->shape[it] == 1 && shape[i] != 1)) ? 0 : t->strides[it];
    }
}
