/*
 * concat(xs, dim): out = [x0; x1; ...] along dim, each piece copied into a
 * slice of out.  Backward: dxi = dy sliced back at xi's place.
 * split(x, sizes, dim): n views of x along dim, recorded as ONE node with n
 * outputs.  Backward: dx = [dy0; dy1; ...] along dim, written once into one
 * buffer (a part whose output got no gradient is zero-filled), laid out in
 * x's memory order so the view/permute nodes behind a split stay copy-free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_util.h"

typedef struct concat_ctx {
    int32_t dim;
} concat_ctx;

static tfc_status concat_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    int32_t dim = ((const concat_ctx *)n->ctx)->dim;
    int64_t start = 0;
    for (int32_t i = 0; i < n->n_in; i++) {
        int64_t len = n->in[i].shape[dim];
        if (tfc_node_needs_grad(n, i)) TFC_TRY(tfc_narrow(tfc_node_grad_graph(n), dy, dim, start, len, &gin[i]));
        start += len;
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_concat(tfc_graph *g, const tfc_tensor *const *xs, int32_t n, int32_t dim, tfc_tensor **out) {
    const char *fn = "tfc_concat";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_CHECK_NOT_NULL(fn, xs);
    if (n < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, need at least one tensor", fn, (int)n);
    for (int32_t i = 0; i < n; i++) {
        if (!xs[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: xs[%d] is NULL", fn, (int)i);
        char arg[32];
        snprintf(arg, sizeof arg, "xs[%d]", (int)i);
        const tfc_tensor *ts[2] = {xs[0], xs[i]};
        const char *names[2] = {"xs[0]", arg};
        TFC_TRY(tfc_same_device(fn, ts, names, 2));
    }
    const tfc_tensor *x0 = xs[0];
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x0->ndim, &d));
    int64_t shape[TFC_MAX_DIMS], total = 0;
    for (int32_t k = 0; k < x0->ndim; k++) shape[k] = x0->shape[k];
    for (int32_t i = 0; i < n; i++) {
        const tfc_tensor *x = xs[i];
        if (x->dtype != x0->dtype)
            return tfc_err(TFC_ERR_DTYPE, "%s: xs[%d] is %s, xs[0] is %s", fn, (int)i, tfc_dtype_name(x->dtype),
                           tfc_dtype_name(x0->dtype));
        int ok = x->ndim == x0->ndim;
        for (int32_t k = 0; ok && k < x->ndim; k++) ok = k == d || x->shape[k] == x0->shape[k];
        if (!ok)
            return tfc_err(TFC_ERR_SHAPE, "%s: xs[%d] is %s, xs[0] is %s: shapes differ outside dim %d", fn, (int)i,
                           SHAPE(x), SHAPE(x0), (int)d);
        total += x->shape[d];
    }
    shape[d] = total;
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(x0, shape, x0->ndim, x0->dtype, &r));
    int64_t start = 0;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        tfc_tensor *part;
        s = tfc_narrow(NULL, r, d, start, xs[i]->shape[d], &part);
        if (s == TFC_OK) {
            s = tfc_tensor_copy_view(fn, part, xs[i]);
            tfc_tensor_release(part);
        }
        start += xs[i]->shape[d];
    }
    if (s == TFC_OK && tfc_should_record(g, xs, n)) {
        tfc_node *node;
        s = tfc_node_new(g, fn, concat_backward, n, 1, sizeof(concat_ctx), &node);
        if (s == TFC_OK) {
            ((concat_ctx *)node->ctx)->dim = d;
            tfc_node_set_double_backward(node);
            for (int32_t i = 0; i < n; i++) tfc_node_set_input(node, i, xs[i]);
            s = tfc_node_attach_output(node, 0, r);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

/*
 * Strides for a fresh buffer of x's shape in x's memory order when x is a
 * dense permutation of its elements (no gaps, no overlap); else the
 * row-major strides.
 */
static void dense_order_strides(const tfc_tensor *x, int64_t *strides) {
    int32_t nd = x->ndim, order[TFC_MAX_DIMS], k = 0;
    tfc_contiguous_strides(x->shape, nd, strides);
    for (int32_t i = 0; i < nd; i++)
        if (x->shape[i] != 1) order[k++] = i;
    for (int32_t i = 1; i < k; i++) /* insertion sort, innermost (smallest stride) last */
        for (int32_t j = i; j > 0 && x->strides[order[j - 1]] < x->strides[order[j]]; j--) {
            int32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t expect = 1;
    for (int32_t j = k - 1; j >= 0; j--) {
        if (x->strides[order[j]] != expect) return;
        expect *= x->shape[order[j]];
    }
    for (int32_t j = 0; j < k; j++) strides[order[j]] = x->strides[order[j]];
}

typedef struct split_ctx {
    int32_t dim;
    int64_t strides[TFC_MAX_DIMS]; /* dx's layout: x's memory order (dense_order_strides) */
    int64_t sizes[];               /* [n_out]: each part's length along dim */
} split_ctx;

/* create_graph: dx = concat of the parts' gradients (zeros for a part that got none), recorded on gg. */
static tfc_status split_backward_graph(tfc_node *n, tfc_graph *gg, const tfc_tensor *ref, tfc_tensor *const *gout,
                                       tfc_tensor **dx) {
    const split_ctx *c = n->ctx;
    const tfc_edge *e = &n->in[0];
    const tfc_tensor **parts = calloc((size_t)n->n_out, sizeof *parts);
    tfc_tensor **zeros = calloc((size_t)n->n_out, sizeof *zeros);
    tfc_status s = parts && zeros ? TFC_OK : tfc_err(TFC_ERR_OOM, "tfc_split (backward): out of memory");
    for (int32_t i = 0; i < n->n_out && s == TFC_OK; i++) {
        if (gout[i]) {
            parts[i] = gout[i];
            continue;
        }
        int64_t shape[TFC_MAX_DIMS];
        memcpy(shape, e->shape, sizeof(int64_t) * (size_t)e->ndim);
        shape[c->dim] = c->sizes[i];
        s = tfc_tensor_new_on(ref, shape, e->ndim, ref->dtype, &zeros[i]);
        if (s == TFC_OK) s = tfc_tensor_fill(zeros[i], 0.0);
        parts[i] = zeros[i];
    }
    if (s == TFC_OK) s = tfc_concat(gg, parts, n->n_out, c->dim, dx);
    for (int32_t i = 0; zeros && i < n->n_out; i++) tfc_tensor_release(zeros[i]);
    free(zeros);
    free(parts);
    return s;
}

static tfc_status split_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    if (!tfc_node_needs_grad(n, 0)) return TFC_OK;
    const split_ctx *c = n->ctx;
    const tfc_edge *e = &n->in[0];
    int32_t dim = c->dim;
    const tfc_tensor *ref = NULL; /* a gradient: dx takes its dtype and device */
    for (int32_t i = 0; i < n->n_out && !ref; i++) ref = gout[i];
    if (!ref) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return split_backward_graph(n, gg, ref, gout, &gin[0]);
    int64_t strides[TFC_MAX_DIMS], numel = 1;
    for (int32_t d = 0; d < e->ndim; d++) numel *= e->shape[d];
    memcpy(strides, c->strides, sizeof(int64_t) * (size_t)e->ndim);
    tfc_tensor *buf = NULL, *dx = NULL;
    TFC_TRY(tfc_tensor_new_on(ref, &numel, 1, ref->dtype, &buf));
    tfc_status s = tfc_tensor_alias(buf, e->shape, strides, e->ndim, 0, &dx);
    tfc_tensor_release(buf);
    TFC_TRY(s);
    int64_t start = 0;
    for (int32_t i = 0; i < n->n_out && s == TFC_OK; i++) {
        int64_t len = c->sizes[i];
        tfc_tensor *part = NULL;
        s = tfc_narrow(NULL, dx, dim, start, len, &part);
        if (s == TFC_OK)
            s = gout[i] ? tfc_tensor_copy_view("tfc_split (backward)", part, gout[i]) : tfc_tensor_fill(part, 0.0);
        tfc_tensor_release(part);
        start += len;
    }
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    gin[0] = dx;
    return TFC_OK;
}

TFC_API tfc_status tfc_split(tfc_graph *g, const tfc_tensor *x, const int64_t *sizes, int32_t n, int32_t dim,
                             tfc_tensor **outs) {
    const char *fn = "tfc_split";
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, outs);
    TFC_CHECK_NOT_NULL(fn, sizes);
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    if (n < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d", fn, (int)n);
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (sizes[i] < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: sizes[%d] is negative", fn, (int)i);
        total += sizes[i];
    }
    if (total != x->shape[d])
        return tfc_err(TFC_ERR_SHAPE, "%s: sizes sum to %lld but dim %d of x %s is %lld", fn, (long long)total, (int)d,
                       SHAPE(x), (long long)x->shape[d]);
    tfc_tensor **tmp = calloc((size_t)n, sizeof *tmp);
    if (!tmp) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int64_t start = 0;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        s = tfc_narrow(NULL, x, d, start, sizes[i], &tmp[i]);
        start += sizes[i];
    }
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) {
        tfc_node *node;
        s = tfc_node_new(g, fn, split_backward, 1, n, sizeof(split_ctx) + sizeof(int64_t) * (size_t)n, &node);
        if (s == TFC_OK) {
            split_ctx *c = node->ctx;
            c->dim = d;
            dense_order_strides(x, c->strides);
            memcpy(c->sizes, sizes, sizeof(int64_t) * (size_t)n);
            tfc_node_set_double_backward(node);
            tfc_node_set_input(node, 0, x);
            for (int32_t i = 0; i < n && s == TFC_OK; i++) s = tfc_node_attach_output(node, i, tmp[i]);
        }
    }
    if (s != TFC_OK) {
        for (int32_t i = 0; i < n; i++) tfc_tensor_release(tmp[i]);
    } else {
        for (int32_t i = 0; i < n; i++) outs[i] = tmp[i];
    }
    free(tmp);
    return tfc_err_in(fn, s);
}
