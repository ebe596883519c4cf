/*
 * Masks as indices: tfc_nonzero (the positions of a mask's nonzero
 * elements) and tfc_masked_select (x[mask] as a 1-D copy, differentiable:
 * x flattened, then tfc_index_select at the mask's flat positions). The
 * count of selected elements decides the output's shape, so the mask is
 * read on the host (a CUDA mask is copied there first, as torch
 * synchronises on nonzero).
 */
#include <stdlib.h>

#include "core/checked.h"
#include "ops/op_util.h"
#include "ops/operands.h"

/* m on the host: m itself (a new reference) on the CPU, else a host copy. */
static tfc_status host_view(const char *fn, const tfc_tensor *m, tfc_tensor **out) {
    if (m->storage->device == TFC_DEVICE_CPU) {
        *out = tfc_tensor_retain((tfc_tensor *)m);
        return TFC_OK;
    }
    return tfc_err_in(fn, tfc_tensor_to_device(m, TFC_DEVICE_CPU, 0, out));
}

/*
 * The nonzero elements of host tensor m (any dtype), in row-major order:
 * *n of them; when pos is not NULL their flat positions (malloc'ed, freed
 * by the caller).
 */
static tfc_status scan_nonzero(const char *fn, const tfc_tensor *m, int64_t *n, int64_t **pos) {
    int64_t total = tfc_numel(m), count = 0;
    const char *base = tfc_data(m);
    size_t es = tfc_dtype_bytes(m->dtype);
    int64_t *p = NULL;
    for (int pass = 0; pass < 2; pass++) {
        count = 0;
        for (int64_t lin = 0; lin < total; lin++) {
            int64_t off = 0, rest = lin;
            for (int32_t d = m->ndim - 1; d >= 0; d--) {
                off += (rest % m->shape[d]) * m->strides[d];
                rest /= m->shape[d];
            }
            if (tfc_scalar_load(base + off * (int64_t)es, m->dtype, 0) != 0.0) {
                if (p) p[count] = lin;
                count++;
            }
        }
        if (pass == 1 || !pos) break;
        p = malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
        if (!p) return tfc_err(TFC_ERR_OOM, "%s: out of memory for %lld positions", fn, (long long)count);
    }
    *n = count;
    if (pos) *pos = p;
    return TFC_OK;
}

/* A new i64 tensor of shape dims holding v, on like's device. */
static tfc_status i64_on(const char *fn, const tfc_tensor *like, const int64_t *v, const int64_t *dims, int32_t nd,
                         tfc_tensor **out) {
    tfc_tensor *h = NULL;
    TFC_TRY(tfc_err_in(fn, tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_I64, &h)));
    if (like->storage->device == TFC_DEVICE_CPU) {
        *out = h;
        return TFC_OK;
    }
    tfc_status s = tfc_tensor_to_device(h, like->storage->device, tfc_device_index(like), out);
    tfc_tensor_release(h);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_nonzero(const tfc_tensor *mask, tfc_tensor **out) {
    const char *fn = "tfc_nonzero";
    TFC_CHECK_NOT_NULL(fn, mask);
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_tensor *h = NULL;
    TFC_TRY(host_view(fn, mask, &h));
    int64_t n = 0, *pos = NULL;
    tfc_status s = scan_nonzero(fn, h, &n, &pos);
    int64_t *coords = NULL, nd = mask->ndim, cells = 0;
    if (s == TFC_OK && !tfc_mul_i64(n, nd ? nd : 1, &cells))
        s = tfc_err(TFC_ERR_OOM, "%s: %lld positions of %d dims overflow", fn, (long long)n, (int)nd);
    if (s == TFC_OK) {
        coords = malloc(sizeof(int64_t) * (size_t)(cells ? cells : 1));
        if (!coords) s = tfc_err(TFC_ERR_OOM, "%s: out of memory for %lld coordinates", fn, (long long)cells);
    }
    if (s == TFC_OK) {
        for (int64_t k = 0; k < n; k++) {
            int64_t rest = pos[k];
            for (int32_t d = (int32_t)nd - 1; d >= 0; d--) {
                coords[k * nd + d] = rest % mask->shape[d];
                rest /= mask->shape[d];
            }
        }
        int64_t dims[2] = {n, nd};
        s = i64_on(fn, mask, coords, dims, 2, out);
    }
    free(coords);
    free(pos);
    tfc_tensor_release(h);
    return s;
}

TFC_API tfc_status tfc_masked_select(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *mask, tfc_tensor **out) {
    const char *fn = "tfc_masked_select";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, mask);
    if (mask->dtype != TFC_DTYPE_BOOL && mask->dtype != TFC_DTYPE_U8)
        return tfc_err(TFC_ERR_DTYPE, "%s: mask is %s; it must be bool or u8", fn, tfc_dtype_name(mask->dtype));
    {
        const tfc_tensor *ts[2] = {x, mask};
        const char *nm[2] = {"x", "mask"};
        TFC_TRY(tfc_same_device(fn, ts, nm, 2));
    }
    /* mask broadcast to x's shape (a stride-0 view, no copy) */
    tfc_tensor *m = NULL, *h = NULL, *flat = NULL, *idx = NULL;
    tfc_status s = tfc_expand(NULL, mask, x->shape, x->ndim, &m);
    if (s == TFC_ERR_SHAPE)
        return tfc_err(TFC_ERR_SHAPE, "%s: mask %s does not broadcast to x %s", fn, SHAPE(mask), SHAPE(x));
    if (s != TFC_OK) return tfc_err_in(fn, s);
    int64_t n = 0, *pos = NULL, total = tfc_numel(x);
    s = host_view(fn, m, &h);
    if (s == TFC_OK) s = scan_nonzero(fn, h, &n, &pos);
    if (s == TFC_OK) s = i64_on(fn, x, pos, &n, 1, &idx);
    if (s == TFC_OK) s = tfc_reshape(g, x, &total, 1, &flat);
    if (s == TFC_OK) s = tfc_index_select(g, flat, 0, idx, out);
    free(pos);
    tfc_tensor_release(flat);
    tfc_tensor_release(idx);
    tfc_tensor_release(h);
    tfc_tensor_release(m);
    return tfc_err_in(fn, s);
}
