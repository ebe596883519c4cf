/*
 * Pointwise maps a PyTorch user expects, and their derivatives (torch 1.13's):
 *   abs: dy·sgn(x) (0 at 0)     sin: dy·cos x     cos: −dy·sin x
 *   sign, floor, ceil, round: 0 everywhere (a zero tensor, not dy·0, so an
 *     infinite dy does not make NaN)
 *   clamp(x, lo, hi) = min(max(x, lo), hi): dy where lo ≤ x ≤ hi, else 0 —
 *     1 at the bounds themselves, as torch; lo > hi gives hi and gradient 0.
 * Kept apart from unary.c's table because the derivative is not always one
 * map of (dy, x, y): the zero-gradient ops record a node whose backward
 * makes zeros, and clamp is two one-sided nodes.
 */
#include <math.h>

#include "ops/op_util.h"

typedef enum {
    P_ABS,
    P_SIGN,
    P_SIN,
    P_COS,
    P_FLOOR,
    P_CEIL,
    P_ROUND,
    P_CLAMP_MIN, /* max(x, p) */
    P_CLAMP_MAX  /* min(x, p) */
} pw_kind;

typedef struct pw_def {
    const char *name;
    tfc_map_op fwd;
    tfc_map_op bwd; /* over (dy, x; p); TFC_MAP_COUNT_ = the gradient is zero */
} pw_def;

static const pw_def defs[] = {
    [P_ABS] = {"tfc_abs", TFC_MAP_ABS, TFC_MAP_ABS_BWD},
    [P_SIGN] = {"tfc_sign", TFC_MAP_SIGN, TFC_MAP_COUNT_},
    [P_SIN] = {"tfc_sin", TFC_MAP_SIN, TFC_MAP_SIN_BWD},
    [P_COS] = {"tfc_cos", TFC_MAP_COS, TFC_MAP_COS_BWD},
    [P_FLOOR] = {"tfc_floor", TFC_MAP_FLOOR, TFC_MAP_COUNT_},
    [P_CEIL] = {"tfc_ceil", TFC_MAP_CEIL, TFC_MAP_COUNT_},
    [P_ROUND] = {"tfc_round", TFC_MAP_ROUND, TFC_MAP_COUNT_},
    [P_CLAMP_MIN] = {"tfc_clamp", TFC_MAP_MAX_S, TFC_MAP_MAX_S_BWD},
    [P_CLAMP_MAX] = {"tfc_clamp", TFC_MAP_MIN_S, TFC_MAP_MIN_S_BWD},
};

typedef struct pw_ctx {
    tfc_saved x; /* empty for the zero-gradient ops */
    const pw_def *def;
    double p;
} pw_ctx;

/*
 * create_graph: sin and cos differentiate through recorded cos/sin of x;
 * abs and clamp multiply dy by a constant mask (sgn x, [lo ≤ x ≤ hi]) — its
 * own derivative is zero almost everywhere, as in torch.
 */
static tfc_status pw_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **dx) {
    const pw_ctx *c = n->ctx;
    tfc_tensor *x = NULL, *t = NULL, *u = NULL;
    tfc_status s = tfc_node_saved(n, &c->x, &x);
    if (s == TFC_OK) {
        switch ((int)(c->def - defs)) {
        case P_SIN: s = tfc_cos(gg, x, &t); break;
        case P_COS:
            s = tfc_sin(gg, x, &u);
            if (s == TFC_OK) s = tfc_neg(gg, u, &t);
            break;
        default: /* abs, clamp: the map over (1, x) is the mask */
            s = tfc_tensor_new_on(dy, NULL, 0, dy->dtype, &u);
            if (s == TFC_OK) s = tfc_tensor_fill(u, 1.0);
            if (s == TFC_OK) s = tfc_map_new(n->name, c->def->bwd, x->shape, x->ndim, x->dtype, u, x, NULL, c->p, &t);
            break;
        }
    }
    if (s == TFC_OK) s = tfc_mul(gg, dy, t, dx);
    tfc_tensor_release(t);
    tfc_tensor_release(u);
    tfc_tensor_release(x);
    return s;
}

static tfc_status pw_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const pw_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    /* The zero gradient is a constant: the same tensor serves create_graph. */
    if (c->def->bwd == TFC_MAP_COUNT_) {
        tfc_tensor *z;
        TFC_TRY(tfc_tensor_new_on(dy, n->in[0].shape, n->in[0].ndim, dy->dtype, &z));
        tfc_status s = tfc_tensor_fill(z, 0.0);
        if (s != TFC_OK) {
            tfc_tensor_release(z);
            return s;
        }
        gin[0] = z;
        return TFC_OK;
    }
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return pw_backward_graph(n, gg, dy, &gin[0]);
    return tfc_map_new(n->name, c->def->bwd, dy->shape, dy->ndim, dy->dtype, dy, c->x.t, NULL, c->p, &gin[0]);
}

static tfc_status pointwise(pw_kind k, tfc_graph *g, const tfc_tensor *x, double p, tfc_tensor **out) {
    const pw_def *d = &defs[k];
    const char *fn = d->name;
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    tfc_tensor *r;
    TFC_TRY(tfc_map_new(fn, d->fwd, x->shape, x->ndim, x->dtype, x, NULL, NULL, p, &r));
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        tfc_status s = tfc_node_new(g, fn, pw_backward, 1, 1, sizeof(pw_ctx), &n);
        if (s == TFC_OK) {
            pw_ctx *c = n->ctx;
            c->def = d;
            c->p = p;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->x, d->bwd == TFC_MAP_COUNT_ ? NULL : x);
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

#define POINTWISE_API(fname, kind)                                                  \
    TFC_API tfc_status fname(tfc_graph *g, const tfc_tensor *x, tfc_tensor **out) { \
        return pointwise(kind, g, x, 0.0, out);                                     \
    }
POINTWISE_API(tfc_abs, P_ABS)
POINTWISE_API(tfc_sign, P_SIGN)
POINTWISE_API(tfc_sin, P_SIN)
POINTWISE_API(tfc_cos, P_COS)
POINTWISE_API(tfc_floor, P_FLOOR)
POINTWISE_API(tfc_ceil, P_CEIL)
POINTWISE_API(tfc_round, P_ROUND)

TFC_API tfc_status tfc_clamp(tfc_graph *g, const tfc_tensor *x, double min, double max, tfc_tensor **out) {
    const char *fn = "tfc_clamp";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (isnan(min) || isnan(max))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: min %g / max %g: a bound is NaN (pass -inf/+inf for no bound)", fn,
                       min, max);
    int has_min = min > -INFINITY, has_max = max < INFINITY;
    if (!has_min && !has_max) return pointwise(P_CLAMP_MIN, g, x, -INFINITY, out); /* a copy, gradient dy */
    tfc_tensor *lo = NULL;
    if (has_min) TFC_TRY(pointwise(P_CLAMP_MIN, g, x, min, &lo));
    if (!has_max) {
        *out = lo;
        return TFC_OK;
    }
    tfc_status s = pointwise(P_CLAMP_MAX, g, lo ? lo : x, max, out);
    tfc_tensor_release(lo);
    return s;
}
