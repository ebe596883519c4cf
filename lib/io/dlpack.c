/*
 * DLPack export and import. An export is one allocation holding the managed
 * struct, its shape and strides arrays, and a reference to a tensor alias
 * that keeps the storage alive; the deleter frees all of it.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tensor/tensor_impl.h"
#include "tfcore/dlpack.h"

#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#define DLPACK_FLAG_BITMASK_READ_ONLY 1u /* DLManagedTensorVersioned.flags bit 0 (DLPack >= 1.0) */
#endif

enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_BOOL = 6 };
enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };

static DLDataType to_dl(tfc_dtype d) {
    DLDataType t = {0, 0, 1};
    switch (d) {
    case TFC_DTYPE_F32:
        t.code = DL_FLOAT;
        t.bits = 32;
        break;
    case TFC_DTYPE_F64:
        t.code = DL_FLOAT;
        t.bits = 64;
        break;
    case TFC_DTYPE_F16:
        t.code = DL_FLOAT;
        t.bits = 16;
        break;
    case TFC_DTYPE_BF16:
        t.code = DL_BFLOAT;
        t.bits = 16;
        break;
    case TFC_DTYPE_I32:
        t.code = DL_INT;
        t.bits = 32;
        break;
    case TFC_DTYPE_I64:
        t.code = DL_INT;
        t.bits = 64;
        break;
    case TFC_DTYPE_U8:
        t.code = DL_UINT;
        t.bits = 8;
        break;
    case TFC_DTYPE_BOOL:
        t.code = DL_BOOL;
        t.bits = 8;
        break;
    default: break;
    }
    return t;
}

static int from_dl(DLDataType t, tfc_dtype *d) {
    if (t.lanes != 1) return 0;
    if (t.code == DL_FLOAT && t.bits == 32)
        *d = TFC_DTYPE_F32;
    else if (t.code == DL_FLOAT && t.bits == 64)
        *d = TFC_DTYPE_F64;
    else if (t.code == DL_FLOAT && t.bits == 16)
        *d = TFC_DTYPE_F16;
    else if (t.code == DL_BFLOAT && t.bits == 16)
        *d = TFC_DTYPE_BF16;
    else if (t.code == DL_INT && t.bits == 32)
        *d = TFC_DTYPE_I32;
    else if (t.code == DL_INT && t.bits == 64)
        *d = TFC_DTYPE_I64;
    else if (t.code == DL_UINT && t.bits == 8)
        *d = TFC_DTYPE_U8;
    else if (t.code == DL_BOOL && t.bits == 8)
        *d = TFC_DTYPE_BOOL;
    else
        return 0;
    return 1;
}

typedef struct export_ctx {
    tfc_tensor *keep;
    int64_t shape[TFC_MAX_DIMS];
    int64_t strides[TFC_MAX_DIMS];
} export_ctx;

static void fill_dl(DLTensor *dl, const tfc_tensor *t, export_ctx *ctx) {
    dl->data = tfc_data(t);
    dl->device.device_type = t->storage->device == TFC_DEVICE_CUDA ? DL_CUDA : DL_CPU;
    dl->device.device_id = t->storage->device == TFC_DEVICE_CUDA ? t->storage->device_index : 0;
    dl->ndim = t->ndim;
    dl->dtype = to_dl(t->dtype);
    for (int32_t i = 0; i < t->ndim; i++) {
        ctx->shape[i] = t->shape[i];
        ctx->strides[i] = t->strides[i];
    }
    dl->shape = ctx->shape;
    dl->strides = ctx->strides;
    dl->byte_offset = 0;
}

typedef struct legacy_export {
    DLManagedTensor m;
    export_ctx ctx;
} legacy_export;

typedef struct versioned_export {
    DLManagedTensorVersioned m;
    export_ctx ctx;
} versioned_export;

static void legacy_deleter(DLManagedTensor *self) {
    legacy_export *e = (legacy_export *)self;
    tfc_tensor_release(e->ctx.keep);
    free(e);
}

static void versioned_deleter(DLManagedTensorVersioned *self) {
    versioned_export *e = (versioned_export *)self;
    tfc_tensor_release(e->ctx.keep);
    free(e);
}

static tfc_status export_keep(const char *fn, const tfc_tensor *t, tfc_tensor **keep) {
    TFC_CHECK_NOT_NULL(fn, t);
    /* the consumer may write the memory behind the library's back: no recorded range survives that */
    atomic_store(&t->storage->range_set, 0);
    /* An alias, not t itself: the export must not keep t's graph node alive. */
    return tfc_err_in(fn, tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, keep));
}

TFC_API tfc_status tfc_tensor_to_dlpack(const tfc_tensor *t, DLManagedTensor **out) {
    const char *fn = "tfc_tensor_to_dlpack";
    TFC_CHECK_NOT_NULL(fn, out);
    legacy_export *e = calloc(1, sizeof *e);
    if (!e) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = export_keep(fn, t, &e->ctx.keep);
    if (s != TFC_OK) {
        free(e);
        return s;
    }
    fill_dl(&e->m.dl_tensor, t, &e->ctx);
    e->m.manager_ctx = e;
    e->m.deleter = legacy_deleter;
    *out = &e->m;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_to_dlpack_versioned(const tfc_tensor *t, DLManagedTensorVersioned **out) {
    const char *fn = "tfc_tensor_to_dlpack_versioned";
    TFC_CHECK_NOT_NULL(fn, out);
    versioned_export *e = calloc(1, sizeof *e);
    if (!e) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = export_keep(fn, t, &e->ctx.keep);
    if (s != TFC_OK) {
        free(e);
        return s;
    }
    e->m.version.major = DLPACK_MAJOR_VERSION;
    e->m.version.minor = DLPACK_MINOR_VERSION;
    fill_dl(&e->m.dl_tensor, t, &e->ctx);
    e->m.manager_ctx = e;
    e->m.deleter = versioned_deleter;
    e->m.flags = tfc_tensor_is_read_only(t) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    *out = &e->m;
    return TFC_OK;
}

/* The wrapped tensor's deleter hands the managed struct back to its producer. */
static void release_legacy(void *data, void *ctx) {
    (void)data;
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

static void release_versioned(void *data, void *ctx) {
    (void)data;
    DLManagedTensorVersioned *m = ctx;
    if (m->deleter) m->deleter(m);
}

static tfc_status import_dl(const char *fn, const DLTensor *dl, uint32_t wrap_flags, tfc_deleter del, void *ctx,
                            tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_dtype dt;
    if (dl->device.device_type != DL_CPU && dl->device.device_type != DL_CUDA_HOST)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: device type %d is not CPU memory", fn, (int)dl->device.device_type);
    if (!from_dl(dl->dtype, &dt))
        return tfc_err(TFC_ERR_DTYPE, "%s: DLPack dtype (code %d, bits %d, lanes %d) is not supported", fn,
                       (int)dl->dtype.code, (int)dl->dtype.bits, (int)dl->dtype.lanes);
    if (dl->ndim < 0 || dl->ndim > TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: ndim %d (at most %d)", fn, (int)dl->ndim, TFC_MAX_DIMS);
    if (dl->ndim > 0 && !dl->shape) return tfc_err(TFC_ERR_INVALID_ARG, "%s: shape is NULL", fn);
    if (!dl->data && dl->byte_offset)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: data is NULL with byte_offset %llu", fn,
                       (unsigned long long)dl->byte_offset);
    if (dl->data && dl->byte_offset > UINTPTR_MAX - (uintptr_t)dl->data)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: byte_offset %llu from data %p passes the end of the address space", fn,
                       (unsigned long long)dl->byte_offset, dl->data);
    /* wrap refuses data not aligned to the element size: kernels load whole elements, vectors too. */
    char *data = dl->data ? (char *)dl->data + dl->byte_offset : NULL;
    TFC_TRY(tfc_err_in(fn, tfc_tensor_wrap(data, dl->shape, dl->strides, dl->ndim, dt, del, ctx, out)));
    (*out)->storage->read_only = (wrap_flags & TFC_WRAP_READ_ONLY) != 0; /* as tfc_tensor_wrap_ex would set it */
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_from_dlpack(DLManagedTensor *m, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_from_dlpack", m);
    return import_dl("tfc_tensor_from_dlpack", &m->dl_tensor, 0, release_legacy, m, out);
}

TFC_API tfc_status tfc_tensor_from_dlpack_versioned(DLManagedTensorVersioned *m, tfc_tensor **out) {
    const char *fn = "tfc_tensor_from_dlpack_versioned";
    TFC_CHECK_NOT_NULL(fn, m);
    if (m->version.major != 1)
        return tfc_err(TFC_ERR_VERSION, "%s: DLPack major version %u, this library reads 1", fn, m->version.major);
    /* A producer's read-only flag makes the tensor read-only (tfc_tensor_wrap_ex). */
    uint32_t wrap = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? TFC_WRAP_READ_ONLY : 0;
    return import_dl(fn, &m->dl_tensor, wrap, release_versioned, m, out);
}
