/*
 * Selection by a mask:  where(c, a, b) = c ? a : b,  masked_fill(x, m, v) = m ? v : x.
 * Backward: da = where(c, dy, 0), db = where(c, 0, dy) (summed to shape);
 * masked_fill passes dy where the mask is false.
 */
#include "ops/op_util.h"

static tfc_status check_mask(const char *fn, const char *arg, const tfc_tensor *m) {
    if (!m) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    if (m->dtype != TFC_DTYPE_BOOL && m->dtype != TFC_DTYPE_U8)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; it must be bool or u8", fn, arg, tfc_dtype_name(m->dtype),
                       SHAPE(m));
    return TFC_OK;
}

/* m is a bool/u8 mask on x's device. */
static tfc_status check_mask_device(const char *fn, const char *arg, const tfc_tensor *m, const tfc_tensor *x) {
    const tfc_tensor *ts[2] = {x, m};
    const char *names[2] = {"the values", arg};
    return tfc_same_device(fn, ts, names, 2);
}

/* Broadcast shape of three tensors. */
static tfc_status shape3(const char *fn, const tfc_tensor *x, const tfc_tensor *y, const tfc_tensor *z, int64_t *shape,
                         int32_t *nd) {
    TFC_TRY(tfc_broadcast_shape(fn, x, y, shape, nd));
    tfc_tensor tmp = {0};
    tmp.ndim = *nd;
    for (int32_t i = 0; i < *nd; i++) tmp.shape[i] = shape[i];
    return tfc_broadcast_shape(fn, &tmp, z, shape, nd);
}

typedef struct where_ctx {
    tfc_saved cond;
} where_ctx;

static tfc_status where_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const where_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *cond = c->cond.t, *zero = NULL;
    if (!dy) return TFC_OK;
    TFC_TRY(tfc_tensor_new_on(dy, NULL, 0, dy->dtype, &zero));
    tfc_status s = tfc_tensor_fill(zero, 0.0);
    /* input 0 is the condition (no gradient); inputs 1, 2 are a, b. */
    for (int32_t i = 1; i <= 2 && s == TFC_OK; i++) {
        if (!tfc_node_needs_grad(n, i)) continue;
        tfc_tensor *full;
        /* create_graph: the selection is itself a recorded where, differentiable in dy */
        tfc_graph *gg = tfc_node_grad_graph(n);
        if (gg)
            s = tfc_where(gg, cond, i == 1 ? dy : zero, i == 1 ? zero : dy, &full);
        else
            s = tfc_map_new(n->name, TFC_MAP_MASK_SELECT, dy->shape, dy->ndim, dy->dtype, i == 1 ? dy : zero,
                            i == 1 ? zero : dy, cond, 0.0, &full);
        if (s == TFC_OK) s = tfc_sum_to_shape_g(gg, full, n->in[i].shape, n->in[i].ndim, &gin[i]);
    }
    tfc_tensor_release(zero);
    return s;
}

TFC_API tfc_status tfc_where(tfc_graph *g, const tfc_tensor *cond, const tfc_tensor *a, const tfc_tensor *b,
                             tfc_tensor **out) {
    const char *fn = "tfc_where";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(check_mask(fn, "cond", cond));
    TFC_TRY(tfc_check_float(fn, "a", a));
    TFC_TRY(tfc_check_float(fn, "b", b));
    TFC_TRY(tfc_check_same(fn, a, b));
    TFC_TRY(check_mask_device(fn, "cond", cond, a));
    int64_t shape[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(shape3(fn, a, b, cond, shape, &nd));
    tfc_tensor *r;
    TFC_TRY(tfc_map_new(fn, TFC_MAP_MASK_SELECT, shape, nd, a->dtype, a, b, cond, 0.0, &r));
    const tfc_tensor *ins[3] = {cond, a, b};
    if (tfc_should_record(g, ins, 3)) {
        tfc_node *n;
        tfc_status s = tfc_node_new(g, fn, where_backward, 3, 1, sizeof(where_ctx), &n);
        if (s == TFC_OK) {
            where_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            for (int32_t i = 0; i < 3; i++) tfc_node_set_input(n, i, ins[i]);
            s = tfc_node_keep(n, &c->cond, cond);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, r);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(r);
            return tfc_err_in(fn, s);
        }
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_masked_fill(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *mask, double value,
                                   tfc_tensor **out) {
    const char *fn = "tfc_masked_fill";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    TFC_TRY(check_mask(fn, "mask", mask));
    TFC_TRY(check_mask_device(fn, "mask", mask, x));
    int64_t shape[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(tfc_broadcast_shape(fn, x, mask, shape, &nd));
    if (nd != x->ndim)
        return tfc_err(TFC_ERR_SHAPE, "%s: mask %s does not broadcast to x %s", fn, SHAPE(mask), SHAPE(x));
    for (int32_t i = 0; i < nd; i++)
        if (shape[i] != x->shape[i])
            return tfc_err(TFC_ERR_SHAPE, "%s: mask %s does not broadcast to x %s", fn, SHAPE(mask), SHAPE(x));
    tfc_tensor *v;
    TFC_TRY(tfc_tensor_new_on(x, NULL, 0, x->dtype, &v));
    tfc_status s = tfc_tensor_fill(v, value);
    if (s == TFC_OK) s = tfc_where(g, mask, v, x, out);
    tfc_tensor_release(v);
    return tfc_err_in(fn, s);
}
