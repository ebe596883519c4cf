/*
 * Elementwise unary maps and their derivatives, dx = dy ⊙ f'(x):
 *   exp: y          log: 1/x          sqrt: 1/(2y)       rsqrt: −y³/2
 *   tanh: 1 − y²    sigmoid: y(1−y)   relu: [x > 0]      neg: −1
 *   x+s: 1   x·s: s   s−x: −1   s/x: −(s/x)/x   xˢ: s·xˢ⁻¹
 *   silu x·σ(x): σ(x)(1 + x(1 − σ(x)))
 * Each op saves only what its derivative reads: x, y, or nothing.
 */
#include "ops/op_util.h"

typedef struct unary_def {
    const char *name;
    tfc_map_op fwd;
    tfc_map_op bwd; /* map over (dy, x, y); COPY for the ±1/·s cases below */
    int save_x, save_y;
} unary_def;

enum { U_NEG, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_TANH, U_SIGMOID, U_RELU, U_ADD_S, U_MUL_S, U_RSUB_S, U_RDIV_S, U_POW_S };
enum { U_SILU = U_POW_S + 1 };

static const unary_def defs[] = {
    [U_NEG] = {"tfc_neg", TFC_MAP_NEG, TFC_MAP_NEG, 0, 0},
    [U_EXP] = {"tfc_exp", TFC_MAP_EXP, TFC_MAP_EXP_BWD, 0, 1},
    [U_LOG] = {"tfc_log", TFC_MAP_LOG, TFC_MAP_DIV, 1, 0},
    [U_SQRT] = {"tfc_sqrt", TFC_MAP_SQRT, TFC_MAP_SQRT_BWD, 0, 1},
    [U_RSQRT] = {"tfc_rsqrt", TFC_MAP_RSQRT, TFC_MAP_RSQRT_BWD, 0, 1},
    [U_TANH] = {"tfc_tanh", TFC_MAP_TANH, TFC_MAP_TANH_BWD, 0, 1},
    [U_SIGMOID] = {"tfc_sigmoid", TFC_MAP_SIGMOID, TFC_MAP_SIGMOID_BWD, 0, 1},
    [U_RELU] = {"tfc_relu", TFC_MAP_RELU, TFC_MAP_RELU_BWD, 1, 0},
    [U_ADD_S] = {"tfc_add_scalar", TFC_MAP_ADD_S, TFC_MAP_COPY, 0, 0},
    [U_MUL_S] = {"tfc_mul_scalar", TFC_MAP_MUL_S, TFC_MAP_MUL_S, 0, 0},
    [U_RSUB_S] = {"tfc_rsub_scalar", TFC_MAP_RSUB_S, TFC_MAP_NEG, 0, 0},
    [U_RDIV_S] = {"tfc_rdiv_scalar", TFC_MAP_RDIV_S, TFC_MAP_RDIV_S_BWD, 1, 1},
    [U_POW_S] = {"tfc_pow_scalar", TFC_MAP_POW_S, TFC_MAP_POW_S_BWD, 1, 0},
    [U_SILU] = {"tfc_silu", TFC_MAP_SILU, TFC_MAP_SILU_BWD, 1, 0},
};

/* x and y are empty unless def says the derivative reads them. */
typedef struct unary_ctx {
    tfc_saved x, y;
    const unary_def *def;
    double p;
} unary_ctx;

/* silu'(x) = σ(x)(1 + x(1 − σ(x))) from recorded ops on gg. */
static tfc_status silu_grad_graph(tfc_graph *gg, const tfc_tensor *x, tfc_tensor **out) {
    tfc_tensor *t[4] = {0};
    tfc_status s = tfc_sigmoid(gg, x, &t[0]);
    if (s == TFC_OK) s = tfc_rsub_scalar(gg, t[0], 1.0, &t[1]);
    if (s == TFC_OK) s = tfc_mul(gg, x, t[1], &t[2]);
    if (s == TFC_OK) s = tfc_add_scalar(gg, t[2], 1.0, &t[3]);
    if (s == TFC_OK) s = tfc_mul(gg, t[0], t[3], out);
    for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]);
    return s;
}

/*
 * create_graph: dx = dy ⊙ f'(x) built from recorded ops on gg (relu's
 * [x > 0] is a constant mask), so it can be differentiated again.
 */
static tfc_status unary_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **dx) {
    const unary_ctx *c = n->ctx;
    const double p = c->p;
    tfc_tensor *x = NULL, *y = NULL, *t = NULL, *u = NULL;
    tfc_status s = tfc_node_saved(n, &c->x, &x);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->y, &y);
    if (s == TFC_OK) {
        switch ((int)(c->def - defs)) {
        case U_NEG:
        case U_RSUB_S: s = tfc_neg(gg, dy, dx); break;
        case U_EXP: s = tfc_mul(gg, dy, y, dx); break;
        case U_LOG: s = tfc_div(gg, dy, x, dx); break;
        case U_SQRT:
            s = tfc_mul_scalar(gg, dy, 0.5, &t);
            if (s == TFC_OK) s = tfc_div(gg, t, y, dx);
            break;
        case U_RSQRT:
            s = tfc_pow_scalar(gg, y, 3.0, &t);
            if (s == TFC_OK) s = tfc_mul(gg, dy, t, &u);
            if (s == TFC_OK) s = tfc_mul_scalar(gg, u, -0.5, dx);
            break;
        case U_TANH:
            s = tfc_mul(gg, y, y, &t);
            if (s == TFC_OK) s = tfc_rsub_scalar(gg, t, 1.0, &u);
            if (s == TFC_OK) s = tfc_mul(gg, dy, u, dx);
            break;
        case U_SIGMOID:
            s = tfc_rsub_scalar(gg, y, 1.0, &t);
            if (s == TFC_OK) s = tfc_mul(gg, y, t, &u);
            if (s == TFC_OK) s = tfc_mul(gg, dy, u, dx);
            break;
        case U_RELU:
            s = tfc_tensor_new_on(dy, NULL, 0, dy->dtype, &u);
            if (s == TFC_OK) s = tfc_tensor_fill(u, 1.0);
            if (s == TFC_OK)
                s = tfc_map_new(n->name, TFC_MAP_RELU_BWD, x->shape, x->ndim, x->dtype, u, x, NULL, 0.0, &t);
            if (s == TFC_OK) s = tfc_mul(gg, dy, t, dx);
            break;
        case U_ADD_S: *dx = tfc_tensor_retain(dy); break;
        case U_MUL_S: s = tfc_mul_scalar(gg, dy, p, dx); break;
        case U_RDIV_S:
            s = tfc_mul(gg, dy, y, &t);
            if (s == TFC_OK) s = tfc_div(gg, t, x, &u);
            if (s == TFC_OK) s = tfc_neg(gg, u, dx);
            break;
        case U_SILU:
            s = silu_grad_graph(gg, x, &t);
            if (s == TFC_OK) s = tfc_mul(gg, dy, t, dx);
            break;
        default: /* U_POW_S */
            s = tfc_pow_scalar(gg, x, p - 1.0, &t);
            if (s == TFC_OK) s = tfc_mul_scalar(gg, t, p, &u);
            if (s == TFC_OK) s = tfc_mul(gg, dy, u, dx);
            break;
        }
    }
    tfc_tensor_release(t);
    tfc_tensor_release(u);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    return s;
}

static tfc_status unary_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const unary_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return unary_backward_graph(n, gg, dy, &gin[0]);
    /* Maps read (a = dy, b = x, c = y); log's dy/x uses DIV(a = dy, b = x). */
    return tfc_map_new(n->name, c->def->bwd, dy->shape, dy->ndim, dy->dtype, dy, c->x.t, c->y.t, c->p, &gin[0]);
}

static tfc_status unary(int which, tfc_graph *g, const tfc_tensor *x, double p, tfc_tensor **out) {
    const unary_def *d = &defs[which];
    TFC_CHECK_NOT_NULL(d->name, out);
    TFC_TRY(tfc_check_float(d->name, "x", x));
    tfc_tensor *r;
    TFC_TRY(tfc_map_new(d->name, d->fwd, x->shape, x->ndim, x->dtype, x, NULL, NULL, p, &r));
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        tfc_status s = tfc_node_new(g, d->name, unary_backward, 1, 1, sizeof(unary_ctx), &n);
        if (s == TFC_OK) {
            unary_ctx *c = n->ctx;
            c->def = d;
            c->p = p;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->x, d->save_x ? x : NULL);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->y, d->save_y ? r : NULL);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, r);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(r);
            return s;
        }
    }
    *out = r;
    return TFC_OK;
}

#define UNARY_API(fname, which)                                                     \
    TFC_API tfc_status fname(tfc_graph *g, const tfc_tensor *x, tfc_tensor **out) { \
        return unary(which, g, x, 0.0, out);                                        \
    }
UNARY_API(tfc_neg, U_NEG)
UNARY_API(tfc_exp, U_EXP)
UNARY_API(tfc_log, U_LOG)
UNARY_API(tfc_sqrt, U_SQRT)
UNARY_API(tfc_rsqrt, U_RSQRT)
UNARY_API(tfc_tanh, U_TANH)
UNARY_API(tfc_sigmoid, U_SIGMOID)
UNARY_API(tfc_relu, U_RELU)
UNARY_API(tfc_silu, U_SILU)

#define SCALAR_API(fname, which)                                                              \
    TFC_API tfc_status fname(tfc_graph *g, const tfc_tensor *x, double s, tfc_tensor **out) { \
        return unary(which, g, x, s, out);                                                    \
    }
SCALAR_API(tfc_add_scalar, U_ADD_S)
SCALAR_API(tfc_mul_scalar, U_MUL_S)
SCALAR_API(tfc_rsub_scalar, U_RSUB_S)
SCALAR_API(tfc_rdiv_scalar, U_RDIV_S)
SCALAR_API(tfc_pow_scalar, U_POW_S)
