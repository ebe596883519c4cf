/*
 * Broadcasting binary arithmetic. Backward of out = f(a, b) with
 * broadcasting: each input's gradient is computed at the broadcast shape,
 * then summed back over the dims the input was stretched along.
 *   add: da = dy, db = dy        sub: da = dy, db = −dy
 *   mul: da = dy ⊙ b, db = dy ⊙ a
 *   div: da = dy / b, db = −dy ⊙ (a/b) / b
 */
#include "ops/op_util.h"

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } bin_kind;
static const char *const bin_names[] = {"tfc_add", "tfc_sub", "tfc_mul", "tfc_div"};
static const tfc_map_op bin_maps[] = {TFC_MAP_ADD, TFC_MAP_SUB, TFC_MAP_MUL, TFC_MAP_DIV};

/* Saved only where backward reads them: mul (a, b), div (b, out), add/sub nothing. */
typedef struct binary_ctx {
    tfc_saved a, b, out;
    bin_kind kind;
} binary_ctx;

/*
 * create_graph: the same formulas as recorded ops on gg, with the saved
 * tensors attached to where they came from, so the gradient is itself
 * differentiable (div's db = −(dy ⊙ out) / b).
 */
static tfc_status binary_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **gin) {
    const binary_ctx *c = n->ctx;
    tfc_tensor *a = NULL, *b = NULL, *out = NULL;
    tfc_status s = tfc_node_saved(n, &c->a, &a);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->b, &b);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->out, &out);
    for (int32_t i = 0; i < 2 && s == TFC_OK; i++) {
        if (!tfc_node_needs_grad(n, i)) continue;
        tfc_tensor *gi = NULL, *t = NULL, *u = NULL;
        switch (c->kind) {
        case BIN_ADD: gi = tfc_tensor_retain(dy); break;
        case BIN_SUB: s = i == 0 ? (gi = tfc_tensor_retain(dy), TFC_OK) : tfc_neg(gg, dy, &gi); break;
        case BIN_MUL: s = tfc_mul(gg, dy, i == 0 ? b : a, &gi); break;
        default: /* BIN_DIV */
            if (i == 0) {
                s = tfc_div(gg, dy, b, &gi);
            } else {
                s = tfc_mul(gg, dy, out, &t);
                if (s == TFC_OK) s = tfc_div(gg, t, b, &u);
                if (s == TFC_OK) s = tfc_neg(gg, u, &gi);
                tfc_tensor_release(t);
                tfc_tensor_release(u);
            }
            break;
        }
        const tfc_edge *e = &n->in[i];
        if (s == TFC_OK) s = tfc_sum_to_shape_g(gg, gi, e->shape, e->ndim, &gin[i]);
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(out);
    return s;
}

static tfc_status binary_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const binary_ctx *c = n->ctx;
    bin_kind k = c->kind;
    tfc_tensor *dy = gout[0], *a = c->a.t, *b = c->b.t, *out = c->out.t;
    if (!dy) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return binary_backward_graph(n, gg, dy, gin);
    for (int32_t i = 0; i < 2; i++) {
        if (!tfc_node_needs_grad(n, i)) continue;
        tfc_tensor *gi = NULL;
        tfc_status s;
        switch (k) {
        case BIN_ADD:
            s = TFC_OK;
            gi = tfc_tensor_retain(dy);
            break;
        case BIN_SUB: s = i == 0 ? (gi = tfc_tensor_retain(dy), TFC_OK) : tfc_neg(NULL, dy, &gi); break;
        case BIN_MUL: s = tfc_mul(NULL, dy, i == 0 ? b : a, &gi); break;
        default: /* BIN_DIV */
            s = i == 0 ? tfc_div(NULL, dy, b, &gi)
                       : tfc_map_new(n->name, TFC_MAP_DIV_BWD_B, dy->shape, dy->ndim, dy->dtype, dy, b, out, 0.0, &gi);
            break;
        }
        TFC_TRY(s);
        const tfc_edge *e = &n->in[i];
        TFC_TRY(tfc_sum_to_shape(gi, e->shape, e->ndim, &gin[i]));
    }
    return TFC_OK;
}

static tfc_status binary(bin_kind k, tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    const char *fn = bin_names[k];
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "a", a));
    TFC_TRY(tfc_check_float(fn, "b", b));
    TFC_TRY(tfc_check_same(fn, a, b));
    int64_t shape[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(tfc_broadcast_shape(fn, a, b, shape, &nd));
    tfc_tensor *r;
    TFC_TRY(tfc_map_new(fn, bin_maps[k], shape, nd, a->dtype, a, b, NULL, 0.0, &r));
    const tfc_tensor *ins[2] = {a, b};
    if (tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        tfc_status s = tfc_node_new(g, fn, binary_backward, 2, 1, sizeof(binary_ctx), &n);
        if (s == TFC_OK) {
            binary_ctx *c = n->ctx;
            c->kind = k;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, a);
            tfc_node_set_input(n, 1, b);
            s = tfc_node_keep(n, &c->a, k == BIN_MUL ? a : NULL);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->b, k == BIN_MUL || k == BIN_DIV ? b : NULL);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->out, k == BIN_DIV ? r : NULL);
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

TFC_API tfc_status tfc_add(tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    return binary(BIN_ADD, g, a, b, out);
}
TFC_API tfc_status tfc_sub(tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    return binary(BIN_SUB, g, a, b, out);
}
TFC_API tfc_status tfc_mul(tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    return binary(BIN_MUL, g, a, b, out);
}
TFC_API tfc_status tfc_div(tfc_graph *g, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    return binary(BIN_DIV, g, a, b, out);
}
