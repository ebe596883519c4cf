/*
 * Elementwise maximum / minimum of two broadcast tensors (NaN propagates).
 * Gradient as torch 1.13: dy goes to the larger (smaller) operand; where
 * the two are equal each gets dy/2. Each operand's gradient is the map
 * MAXIMUM_BWD(dy, this, other) (MINIMUM_BWD), summed to its shape.
 */
#include "ops/op_util.h"

typedef struct minmax_ctx {
    tfc_saved a, b;
    int is_max;
} minmax_ctx;

/*
 * create_graph: dy times a constant mask (1, ½ at ties, 0: the map over
 * (1, this, other)), recorded, then summed to the operand's shape recorded;
 * the mask's own derivative is zero almost everywhere, as in torch.
 */
static tfc_status minmax_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **gin) {
    const minmax_ctx *c = n->ctx;
    tfc_map_op op = c->is_max ? TFC_MAP_MAXIMUM_BWD : TFC_MAP_MINIMUM_BWD;
    tfc_tensor *one = NULL;
    tfc_status s = tfc_tensor_new_on(dy, NULL, 0, dy->dtype, &one);
    if (s == TFC_OK) s = tfc_tensor_fill(one, 1.0);
    for (int32_t i = 0; i < 2 && s == TFC_OK; i++) {
        if (!tfc_node_needs_grad(n, i)) continue;
        tfc_tensor *mask = NULL, *full = NULL;
        s = tfc_map_new(n->name, op, dy->shape, dy->ndim, dy->dtype, one, i == 0 ? c->a.t : c->b.t,
                        i == 0 ? c->b.t : c->a.t, 0.0, &mask);
        if (s == TFC_OK) s = tfc_mul(gg, dy, mask, &full);
        if (s == TFC_OK) s = tfc_sum_to_shape_g(gg, full, n->in[i].shape, n->in[i].ndim, &gin[i]);
        tfc_tensor_release(mask);
    }
    tfc_tensor_release(one);
    return s;
}

static tfc_status minmax_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const minmax_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return minmax_backward_graph(n, gg, dy, gin);
    tfc_map_op op = c->is_max ? TFC_MAP_MAXIMUM_BWD : TFC_MAP_MINIMUM_BWD;
    for (int32_t i = 0; i < 2; i++) {
        if (!tfc_node_needs_grad(n, i)) continue;
        tfc_tensor *full;
        TFC_TRY(tfc_map_new(n->name, op, dy->shape, dy->ndim, dy->dtype, dy, i == 0 ? c->a.t : c->b.t,
                            i == 0 ? c->b.t : c->a.t, 0.0, &full));
        TFC_TRY(tfc_sum_to_shape(full, n->in[i].shape, n->in[i].ndim, &gin[i]));
    }
    return TFC_OK;
}

static tfc_status minmax(int is_max, tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    const char *fn = is_max ? "tfc_maximum" : "tfc_minimum";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "a", a));
    TFC_TRY(tfc_check_float(fn, "b", b));
    TFC_TRY(tfc_check_same(fn, a, b));
    int64_t shape[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(tfc_broadcast_shape(fn, a, b, shape, &nd));
    tfc_tensor *r;
    TFC_TRY(tfc_map_new(fn, is_max ? TFC_MAP_MAXIMUM : TFC_MAP_MINIMUM, shape, nd, a->dtype, a, b, NULL, 0.0, &r));
    const tfc_tensor *ins[2] = {a, b};
    if (tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        tfc_status s = tfc_node_new(g, fn, minmax_backward, 2, 1, sizeof(minmax_ctx), &n);
        if (s == TFC_OK) {
            minmax_ctx *c = n->ctx;
            c->is_max = is_max;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, a);
            tfc_node_set_input(n, 1, b);
            s = tfc_node_keep(n, &c->a, a);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->b, b);
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

TFC_API tfc_status tfc_maximum(tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    return minmax(1, g, a, b, out);
}
TFC_API tfc_status tfc_minimum(tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    return minmax(0, g, a, b, out);
}
