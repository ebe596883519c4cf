/* Tensors → backend entries: the one-device rule, maps and copies on tensors. */
#include "tensor/dispatch.h"

#include <stdio.h>

const char *tfc_device_str(const tfc_tensor *t, char *buf, size_t cap) {
    return tfc_device_name(t->storage->device, t->storage->device_index, buf, cap);
}

tfc_status tfc_tensor_backend(const char *fn, const tfc_tensor *t, const tfc_backend **out) {
    tfc_status s = tfc_backend_of(t->storage->device, t->storage->device_index, out);
    if (s == TFC_OK) return TFC_OK;
    char why[600];
    snprintf(why, sizeof why, "%s", tfc_last_error());
    return tfc_err(s, "%s: %s", fn, why);
}

tfc_dtype tfc_tensor_stats_dtype(const tfc_tensor *x) {
    const tfc_backend *b;
    if (tfc_backend_of(x->storage->device, x->storage->device_index, &b) != TFC_OK) return x->dtype;
    return tfc_backend_stats_dtype(b, x->dtype);
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
            return tfc_err(TFC_ERR_DEVICE,
                           "%s: %s lives on %s but %s lives on %s; the tensors of one call must "
                           "share a device (move them with tfc_tensor_to_device)",
                           fn, names[first], tfc_device_str(ts[first], da, sizeof da), names[i],
                           tfc_device_str(ts[i], db, sizeof db));
        }
    }
    return TFC_OK;
}

tfc_status tfc_tensor_new_on(const tfc_tensor *like, const int64_t *shape, int32_t ndim, tfc_dtype dtype,
                             tfc_tensor **out) {
    return tfc_tensor_new(shape, ndim, dtype, like->storage->device, like->storage->device_index, out);
}

/* t read as out's shape: stride 0 along broadcast dims. */
static tfc_sview broadcast_view(const tfc_tensor *t, const tfc_tensor *out) {
    tfc_sview v = tfc_sview_of(t);
    v.ndim = out->ndim;
    for (int32_t i = 0; i < out->ndim; i++) v.shape[i] = out->shape[i];
    tfc_broadcast_strides(t, out->shape, out->ndim, v.strides);
    return v;
}

tfc_status tfc_tensor_map(const char *fn, tfc_map_op op, tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b,
                          const tfc_tensor *c, double p, int32_t accumulate) {
    const tfc_tensor *ts[4] = {out, a, b, c};
    const char *names[4] = {"out", "a", "b", "c"};
    TFC_TRY(tfc_tensor_check_writable(fn, "out", out));
    TFC_TRY(tfc_same_device(fn, ts, names, 4));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, out, &be));
    tfc_sview ov = tfc_sview_of(out), av, bv, cv;
    if (a) av = broadcast_view(a, out);
    if (b) bv = broadcast_view(b, out);
    if (c) cv = broadcast_view(c, out);
    tfc_map_problem pr = {
        .device = tfc_device_index(out),
        .op = op,
        .out = &ov,
        .a = a ? &av : NULL,
        .b = b ? &bv : NULL,
        .c = c ? &cv : NULL,
        .p = p,
        .accumulate = accumulate,
    };
    return TFC_BACKEND_RUN_DT(fn, be, map, &pr, out->dtype);
}

tfc_status tfc_tensor_copy_view(const char *fn, tfc_tensor *dst, const tfc_tensor *src) {
    const tfc_tensor *ts[2] = {dst, src};
    const char *names[2] = {"dst", "src"};
    TFC_TRY(tfc_tensor_check_writable(fn, "dst", dst));
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, dst, &be));
    tfc_copy_problem pr = {.device = tfc_device_index(dst), .dst = tfc_sview_of(dst), .src = broadcast_view(src, dst)};
    return TFC_BACKEND_RUN_DT(fn, be, copy, &pr, src->dtype);
}
