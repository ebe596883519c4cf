/*
 * Views share storage and never copy; each records a node whose backward
 * maps the gradient back to the input's layout:
 *   view/reshape/squeeze/unsqueeze/flatten: reshape dy to the input shape
 *   permute/transpose: permute dy by the inverse permutation
 *   slice/narrow/split: dy written into a zero tensor at the sliced place
 *   expand: dy summed over the stretched dims
 *   contiguous: dy itself;  cast: dy cast back to the input dtype
 */
#include <string.h>

#include "core/checked.h"
#include "ops/op_util.h"

typedef enum { V_RESHAPE, V_PERMUTE, V_SLICE, V_EXPAND, V_IDENTITY, V_CAST } view_kind;

typedef struct view_ctx {
    view_kind kind;
    int64_t perm[TFC_MAX_DIMS]; /* V_PERMUTE: output dim i is input dim perm[i] */
    int32_t dim;                /* V_SLICE: the input's [start:stop:step] along dim */
    int64_t start, stop, step;
} view_ctx;

/* The gradient of slice_scatter's output reaches its input as the same slice (a view). */
static tfc_status slice_scatter_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const view_ctx *c = n->ctx;
    if (!gout[0] || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    return tfc_slice(tfc_node_grad_graph(n), gout[0], c->dim, c->start, c->stop, c->step, &gin[0]);
}

/*
 * Slice's backward: dy written into zeros of the input's shape at the
 * sliced place; recorded on gg (a create_graph pass) as a node whose own
 * backward slices again, so it differentiates to any order.
 */
static tfc_status slice_scatter(tfc_graph *gg, const tfc_edge *e, const view_ctx *c, tfc_tensor *dy, tfc_tensor **out) {
    tfc_tensor *dx, *part;
    TFC_TRY(tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &dx));
    tfc_status s = tfc_tensor_fill(dx, 0.0);
    if (s == TFC_OK) s = tfc_slice(NULL, dx, c->dim, c->start, c->stop, c->step, &part);
    if (s == TFC_OK) {
        s = tfc_tensor_copy_from(part, dy);
        tfc_tensor_release(part);
    }
    const tfc_tensor *ins[1] = {dy};
    if (s == TFC_OK && tfc_should_record(gg, ins, 1)) {
        tfc_node *n;
        s = tfc_node_new(gg, "tfc_slice (backward)", slice_scatter_backward, 1, 1, sizeof(view_ctx), &n);
        if (s == TFC_OK) {
            *(view_ctx *)n->ctx = *c;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, dy);
            s = tfc_node_attach_output(n, 0, dx);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    *out = dx;
    return TFC_OK;
}

static tfc_status view_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const tfc_edge *e = &n->in[0];
    tfc_tensor *dy = gout[0];
    const view_ctx *c = n->ctx;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    /* NULL unless create_graph: then each step below is recorded and differentiable */
    tfc_graph *gg = tfc_node_grad_graph(n);
    switch (c->kind) {
    case V_RESHAPE: return tfc_reshape(gg, dy, e->shape, e->ndim, &gin[0]);
    case V_PERMUTE: {
        int32_t inv[TFC_MAX_DIMS];
        for (int32_t i = 0; i < e->ndim; i++) inv[c->perm[i]] = i;
        return tfc_permute(gg, dy, inv, e->ndim, &gin[0]);
    }
    case V_SLICE: return slice_scatter(gg, e, c, dy, &gin[0]);
    case V_EXPAND: return tfc_sum_to_shape_g(gg, tfc_tensor_retain(dy), e->shape, e->ndim, &gin[0]);
    case V_IDENTITY: gin[0] = tfc_tensor_retain(dy); return TFC_OK;
    case V_CAST: return tfc_cast(gg, dy, e->dtype, &gin[0]);
    }
    return tfc_err(TFC_ERR_INTERNAL, "view backward: unknown kind");
}

/*
 * Record out as a view-kind node of x (out already computed); params are
 * the permutation (V_PERMUTE) or dim, start, stop, step (V_SLICE).
 */
static tfc_status record(tfc_graph *g, const char *fn, view_kind k, const tfc_tensor *x, tfc_tensor *out,
                         const int64_t *params, int32_t np) {
    if (!tfc_should_record(g, &x, 1)) return TFC_OK;
    tfc_node *n;
    TFC_TRY(tfc_node_new(g, fn, view_backward, 1, 1, sizeof(view_ctx), &n));
    view_ctx *c = n->ctx;
    c->kind = k;
    if (k == V_PERMUTE)
        for (int32_t i = 0; i < np; i++) c->perm[i] = params[i];
    if (k == V_SLICE) c->dim = (int32_t)params[0], c->start = params[1], c->stop = params[2], c->step = params[3];
    tfc_node_set_double_backward(n);
    tfc_node_set_input(n, 0, x);
    return tfc_node_attach_output(n, 0, out);
}

/* Finish an op: record, or release out on failure. */
static tfc_status finish(tfc_graph *g, const char *fn, view_kind k, const tfc_tensor *x, tfc_tensor *r,
                         const int64_t *params, int32_t np, tfc_tensor **out) {
    tfc_status s = record(g, fn, k, x, r, params, np);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

static tfc_status check_x(const char *fn, const tfc_tensor *x, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, out);
    return TFC_OK;
}

/* Resolve one -1 and check the element count. */
static tfc_status infer_shape(const char *fn, const tfc_tensor *x, const int64_t *dims, int32_t ndim, int64_t *shape) {
    int64_t numel;
    if (ndim < 0 || ndim > TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: ndim is %d, must be in [0, %d]", fn, (int)ndim, TFC_MAX_DIMS);
    if (ndim > 0 && !dims) return tfc_err(TFC_ERR_INVALID_ARG, "%s: dims is NULL with ndim %d", fn, (int)ndim);
    int32_t infer = -1;
    int64_t known = 1;
    for (int32_t i = 0; i < ndim; i++) {
        if (dims[i] == -1) {
            if (infer >= 0)
                return tfc_err(TFC_ERR_INVALID_ARG, "%s: more than one -1 in %s", fn, tfc_fmt_dims(dims, ndim));
            infer = i;
        } else if (dims[i] < 0) {
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: negative size in %s", fn, tfc_fmt_dims(dims, ndim));
        } else if (!tfc_mul_i64(known, dims[i], &known)) {
            return tfc_err(TFC_ERR_SHAPE, "%s: cannot view x %s as %s: the element count overflows", fn, SHAPE(x),
                           tfc_fmt_dims(dims, ndim));
        }
        shape[i] = dims[i];
    }
    numel = tfc_numel(x);
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return tfc_err(TFC_ERR_SHAPE, "%s: cannot view x %s as %s", fn, SHAPE(x), tfc_fmt_dims(dims, ndim));
        shape[infer] = numel / known;
    } else if (known != numel) {
        return tfc_err(TFC_ERR_SHAPE, "%s: x %s has %lld elements, shape %s has %lld", fn, SHAPE(x), (long long)numel,
                       tfc_fmt_dims(dims, ndim), (long long)known);
    }
    return TFC_OK;
}

/*
 * Strides for viewing x as `shape` without copying, if possible: each run
 * of x's dims that is contiguous in memory can be re-split freely.
 * Returns 0 when impossible.
 */
static int view_strides(const tfc_tensor *x, const int64_t *shape, int32_t ndim, int64_t *strides) {
    if (tfc_numel(x) == 0 || x->ndim == 0) {
        tfc_contiguous_strides(shape, ndim, strides);
        return 1;
    }
    int32_t vd = ndim - 1;
    int64_t base = x->strides[x->ndim - 1], tn = 1, vn = 1;
    for (int32_t td = x->ndim - 1; td >= 0; td--) {
        tn *= x->shape[td];
        int chunk_ends = td == 0 || (x->shape[td - 1] != 1 && x->strides[td - 1] != tn * base);
        if (!chunk_ends) continue;
        while (vd >= 0 && (vn < tn || shape[vd] == 1)) {
            strides[vd] = vn * base;
            vn *= shape[vd];
            vd--;
        }
        if (vn != tn) return 0;
        if (td > 0) {
            base = x->strides[td - 1];
            tn = vn = 1;
        }
    }
    return vd == -1;
}

TFC_API tfc_status tfc_view(tfc_graph *g, const tfc_tensor *x, const int64_t *dims, int32_t ndim, tfc_tensor **out) {
    const char *fn = "tfc_view";
    TFC_TRY(check_x(fn, x, out));
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    TFC_TRY(infer_shape(fn, x, dims, ndim, shape));
    if (!view_strides(x, shape, ndim, strides))
        return tfc_err(TFC_ERR_SHAPE, "%s: x %s with strides %s cannot be viewed as %s without a copy; use tfc_reshape",
                       fn, SHAPE(x), tfc_fmt_dims(x->strides, x->ndim), tfc_fmt_dims(shape, ndim));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_alias(x, shape, strides, ndim, x->offset, &r));
    return finish(g, fn, V_RESHAPE, x, r, NULL, 0, out);
}

TFC_API tfc_status tfc_reshape(tfc_graph *g, const tfc_tensor *x, const int64_t *dims, int32_t ndim, tfc_tensor **out) {
    const char *fn = "tfc_reshape";
    TFC_TRY(check_x(fn, x, out));
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    TFC_TRY(infer_shape(fn, x, dims, ndim, shape));
    tfc_tensor *r;
    if (view_strides(x, shape, ndim, strides)) {
        TFC_TRY(tfc_tensor_alias(x, shape, strides, ndim, x->offset, &r));
    } else {
        tfc_tensor *c;
        TFC_TRY(tfc_make_contiguous(x, &c));
        tfc_contiguous_strides(shape, ndim, strides);
        tfc_status s = tfc_tensor_alias(c, shape, strides, ndim, c->offset, &r);
        tfc_tensor_release(c);
        TFC_TRY(s);
    }
    return finish(g, fn, V_RESHAPE, x, r, NULL, 0, out);
}

TFC_API tfc_status tfc_permute(tfc_graph *g, const tfc_tensor *x, const int32_t *perm, int32_t ndim, tfc_tensor **out) {
    const char *fn = "tfc_permute";
    TFC_TRY(check_x(fn, x, out));
    if (ndim != x->ndim)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: x is %s, perm has ndim = %d entries", fn, SHAPE(x), (int)ndim);
    if (ndim > 0 && !perm) return tfc_err(TFC_ERR_INVALID_ARG, "%s: perm is NULL with ndim %d", fn, (int)ndim);
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS], params[TFC_MAX_DIMS];
    int seen[TFC_MAX_DIMS] = {0};
    for (int32_t i = 0; i < ndim; i++) {
        int32_t d;
        TFC_TRY(tfc_norm_dim(fn, perm[i], ndim, &d));
        if (seen[d]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: perm repeats dim %d", fn, (int)d);
        seen[d] = 1;
        shape[i] = x->shape[d];
        strides[i] = x->strides[d];
        params[i] = d;
    }
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_alias(x, shape, strides, ndim, x->offset, &r));
    return finish(g, fn, V_PERMUTE, x, r, params, ndim, out);
}

TFC_API tfc_status tfc_transpose(tfc_graph *g, const tfc_tensor *x, int32_t dim0, int32_t dim1, tfc_tensor **out) {
    const char *fn = "tfc_transpose";
    TFC_TRY(check_x(fn, x, out));
    int32_t d0, d1, perm[TFC_MAX_DIMS];
    TFC_TRY(tfc_norm_dim(fn, dim0, x->ndim, &d0));
    TFC_TRY(tfc_norm_dim(fn, dim1, x->ndim, &d1));
    for (int32_t i = 0; i < x->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return tfc_err_in(fn, tfc_permute(g, x, perm, x->ndim, out));
}

TFC_API tfc_status tfc_slice(tfc_graph *g, const tfc_tensor *x, int32_t dim, int64_t start, int64_t end, int64_t step,
                             tfc_tensor **out) {
    const char *fn = "tfc_slice";
    TFC_TRY(check_x(fn, x, out));
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    if (step < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: step is %lld, must be >= 1", fn, (long long)step);
    int64_t n = x->shape[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end > n) end = n;
    if (end < start) end = start;
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(strides, x->strides, sizeof strides);
    /* ceil((end - start) / step) without forming end - start + step, which can overflow */
    shape[d] = end > start ? (end - start - 1) / step + 1 : 0;
    if (shape[d] > 1 && !tfc_mul_i64(x->strides[d], step, &strides[d]))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: step %lld overflows the stride of dim %d of x %s", fn, (long long)step,
                       (int)d, SHAPE(x));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_alias(x, shape, strides, x->ndim, x->offset + start * x->strides[d], &r));
    int64_t params[4] = {d, start, end, step};
    return finish(g, fn, V_SLICE, x, r, params, 4, out);
}

TFC_API tfc_status tfc_narrow(tfc_graph *g, const tfc_tensor *x, int32_t dim, int64_t start, int64_t length,
                              tfc_tensor **out) {
    const char *fn = "tfc_narrow";
    TFC_TRY(check_x(fn, x, out));
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    if (start < 0 || length < 0 || start > x->shape[d] || length > x->shape[d] - start)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: start %lld, length %lld out of range for dim %d of x %s", fn,
                       (long long)start, (long long)length, (int)d, SHAPE(x));
    return tfc_err_in(fn, tfc_slice(g, x, d, start, start + length, 1, out));
}

TFC_API tfc_status tfc_expand(tfc_graph *g, const tfc_tensor *x, const int64_t *dims, int32_t ndim, tfc_tensor **out) {
    const char *fn = "tfc_expand";
    TFC_TRY(check_x(fn, x, out));
    if (ndim > 0 && !dims) return tfc_err(TFC_ERR_INVALID_ARG, "%s: dims is NULL with ndim %d", fn, (int)ndim);
    if (ndim < x->ndim || ndim > TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_SHAPE, "%s: cannot expand x %s to ndim = %d dims", fn, SHAPE(x), (int)ndim);
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    for (int32_t i = 0; i < ndim; i++) {
        int32_t k = i - (ndim - x->ndim);
        int64_t have = k >= 0 ? x->shape[k] : 1, want = dims[i] == -1 ? have : dims[i];
        if (k < 0 && dims[i] == -1)
            return tfc_err(TFC_ERR_SHAPE, "%s: -1 is not allowed for the new leading dim %d", fn, (int)i);
        if (want < 0 || (have != want && have != 1))
            return tfc_err(TFC_ERR_SHAPE, "%s: x %s cannot be expanded to %s", fn, SHAPE(x), tfc_fmt_dims(dims, ndim));
        shape[i] = want;
        strides[i] = (k < 0 || (have == 1 && want != 1)) ? 0 : x->strides[k];
    }
    int64_t numel;
    if (!tfc_dims_numel(shape, ndim, INT64_MAX / 16, &numel))
        return tfc_err(TFC_ERR_SHAPE, "%s: x %s expanded to %s: the element count overflows", fn, SHAPE(x),
                       tfc_fmt_dims(dims, ndim));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_alias(x, shape, strides, ndim, x->offset, &r));
    return finish(g, fn, V_EXPAND, x, r, NULL, 0, out);
}

TFC_API tfc_status tfc_squeeze(tfc_graph *g, const tfc_tensor *x, int32_t dim, tfc_tensor **out) {
    const char *fn = "tfc_squeeze";
    TFC_TRY(check_x(fn, x, out));
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    if (x->shape[d] != 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: dim %d of x %s has size %lld, not 1", fn, (int)dim, SHAPE(x),
                       (long long)x->shape[d]);
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    int32_t k = 0;
    for (int32_t i = 0; i < x->ndim; i++)
        if (i != d) {
            shape[k] = x->shape[i];
            strides[k++] = x->strides[i];
        }
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_alias(x, shape, strides, k, x->offset, &r));
    return finish(g, fn, V_RESHAPE, x, r, NULL, 0, out);
}

TFC_API tfc_status tfc_unsqueeze(tfc_graph *g, const tfc_tensor *x, int32_t dim, tfc_tensor **out) {
    const char *fn = "tfc_unsqueeze";
    TFC_TRY(check_x(fn, x, out));
    int32_t d;
    if (x->ndim == TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_SHAPE, "%s: x %s already has %d dims", fn, SHAPE(x), TFC_MAX_DIMS);
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim + 1, &d));
    int64_t shape[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    for (int32_t i = 0, k = 0; i <= x->ndim; i++) {
        if (i == d) {
            shape[i] = 1;
            strides[i] = d < x->ndim ? x->strides[d] * x->shape[d] : 1;
        } else {
            shape[i] = x->shape[k];
            strides[i] = x->strides[k++];
        }
    }
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_alias(x, shape, strides, x->ndim + 1, x->offset, &r));
    return finish(g, fn, V_RESHAPE, x, r, NULL, 0, out);
}

TFC_API tfc_status tfc_flatten(tfc_graph *g, const tfc_tensor *x, int32_t start, int32_t end, tfc_tensor **out) {
    const char *fn = "tfc_flatten";
    TFC_TRY(check_x(fn, x, out));
    if (x->ndim == 0) return tfc_err_in(fn, tfc_reshape(g, x, (int64_t[]){1}, 1, out));
    int32_t s0, e0;
    TFC_TRY(tfc_norm_dim(fn, start, x->ndim, &s0));
    TFC_TRY(tfc_norm_dim(fn, end, x->ndim, &e0));
    if (e0 < s0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: end %d before start %d", fn, (int)end, (int)start);
    int64_t shape[TFC_MAX_DIMS];
    int32_t k = 0;
    for (int32_t i = 0; i < x->ndim; i++) {
        if (i <= s0 || i > e0)
            shape[k++] = x->shape[i];
        else
            shape[k - 1] *= x->shape[i];
    }
    return tfc_err_in(fn, tfc_reshape(g, x, shape, k, out));
}

TFC_API tfc_status tfc_contiguous(tfc_graph *g, const tfc_tensor *x, tfc_tensor **out) {
    const char *fn = "tfc_contiguous";
    TFC_TRY(check_x(fn, x, out));
    if (tfc_is_contiguous(x)) {
        *out = tfc_tensor_retain((tfc_tensor *)x);
        return TFC_OK;
    }
    tfc_tensor *r;
    TFC_TRY(tfc_make_contiguous(x, &r));
    return finish(g, fn, V_IDENTITY, x, r, NULL, 0, out);
}

TFC_API tfc_status tfc_cast(tfc_graph *g, const tfc_tensor *x, tfc_dtype dtype, tfc_tensor **out) {
    const char *fn = "tfc_cast";
    TFC_TRY(check_x(fn, x, out));
    if (!tfc_dtype_valid(dtype)) return tfc_err(TFC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(x, dtype, &r));
    tfc_status s = tfc_tensor_copy_view(fn, r, x);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    if (!tfc_dtype_is_float(dtype)) { /* integer results carry no gradient */
        *out = r;
        return TFC_OK;
    }
    return finish(g, fn, V_CAST, x, r, NULL, 0, out);
}
