/*
 * tfc_gelu, the graph door of GELU: saves x; backward is tfc_gelu_backward.
 *
 * The explicit doors tfc_gelu_forward / tfc_gelu_backward: checks, then the backend's gelu entries.
 */
#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

static tfc_status check_approximate(const char *fn, int32_t approximate) {
    if (approximate != 0 && approximate != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: approximate is %d, must be 0 (erf) or 1 (tanh)", fn, (int)approximate);
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu_forward(const tfc_tensor *x, int32_t approximate, tfc_tensor *y) {
    const char *fn = "tfc_gelu_forward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {y, x};
    const char *names[] = {"y", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 2));

    tfc_gelu_problem p = {.device = tfc_device_index(x),
                          .dtype = x->dtype,
                          .n = tfc_numel(x),
                          .approximate = approximate,
                          .y = tfc_data(y)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, gelu_forward, &p);
    if (s == TFC_OK) tfc_written(y, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_gelu_backward(const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate, tfc_tensor *dx,
                                     uint32_t flags) {
    const char *fn = "tfc_gelu_backward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {dx, dy, x};
    const char *names[] = {"dx", "dy", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));

    tfc_gelu_problem p = {.device = tfc_device_index(x),
                          .dtype = x->dtype,
                          .n = tfc_numel(x),
                          .approximate = approximate,
                          .dx = tfc_data(dx),
                          .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, gelu_backward, &p);
    if (s == TFC_OK) tfc_written(dx, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

typedef struct gelu_ctx {
    tfc_saved x;
    int32_t approximate;
} gelu_ctx;

/*
 * GELU's second derivative from recorded ops on g (NULL: plain), so a
 * gradient of it is available too:
 *   erf:  φ(x)(2 − x²), φ(x) = exp(−x²/2)/√(2π)
 *   tanh: (1 − t²)(u' − x t u'² + x u''/2), u = c(x + a x³), t = tanh u,
 *         u' = c(1 + 3a x²), u'' = 6 c a x, c = √(2/π), a = 0.044715.
 */
static tfc_status gelu_second(tfc_graph *g, const tfc_tensor *x, int32_t approximate, tfc_tensor **out) {
    enum { N_TMP = 16 };
    tfc_tensor *t[N_TMP] = {0};
    tfc_status s = tfc_mul(g, x, x, &t[0]); /* x² */
    if (approximate == TFC_GELU_ERF) {
        if (s == TFC_OK) s = tfc_mul_scalar(g, t[0], -0.5, &t[1]);
        if (s == TFC_OK) s = tfc_exp(g, t[1], &t[2]);
        if (s == TFC_OK) s = tfc_mul_scalar(g, t[2], 0.3989422804014327, &t[3]); /* φ */
        if (s == TFC_OK) s = tfc_rsub_scalar(g, t[0], 2.0, &t[4]);
        if (s == TFC_OK) s = tfc_mul(g, t[3], t[4], out);
    } else {
        const double c = 0.7978845608028654, a = 0.044715;
        if (s == TFC_OK) s = tfc_mul_scalar(g, t[0], a, &t[1]);
        if (s == TFC_OK) s = tfc_add_scalar(g, t[1], 1.0, &t[2]);
        if (s == TFC_OK) s = tfc_mul(g, x, t[2], &t[3]);
        if (s == TFC_OK) s = tfc_mul_scalar(g, t[3], c, &t[4]); /* u */
        if (s == TFC_OK) s = tfc_tanh(g, t[4], &t[5]);          /* t */
        if (s == TFC_OK) s = tfc_mul_scalar(g, t[0], 3.0 * a * c, &t[6]);
        if (s == TFC_OK) s = tfc_add_scalar(g, t[6], c, &t[7]); /* u' */
        if (s == TFC_OK) s = tfc_mul(g, t[7], t[7], &t[8]);
        if (s == TFC_OK) s = tfc_mul(g, t[8], t[5], &t[9]);
        if (s == TFC_OK) s = tfc_mul(g, t[9], x, &t[10]); /* x t u'² */
        if (s == TFC_OK) s = tfc_sub(g, t[7], t[10], &t[11]);
        if (s == TFC_OK) s = tfc_mul_scalar(g, t[0], 3.0 * c * a, &t[12]); /* x u''/2 */
        if (s == TFC_OK) s = tfc_add(g, t[11], t[12], &t[13]);
        if (s == TFC_OK) s = tfc_mul(g, t[5], t[5], &t[14]);
        if (s == TFC_OK) s = tfc_rsub_scalar(g, t[14], 1.0, &t[15]); /* 1 − t² */
        if (s == TFC_OK) s = tfc_mul(g, t[15], t[13], out);
    }
    for (int i = 0; i < N_TMP; i++) tfc_tensor_release(t[i]);
    return s;
}

typedef struct gelu_grad_ctx {
    tfc_saved dy, x;
    int32_t approximate;
} gelu_grad_ctx;

static tfc_status gelu_grad(tfc_graph *g, const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate,
                            tfc_tensor **out);

/* Of dx = dy ⊙ gelu'(x): d/ddy = gelu'(x) (the same node again), d/dx = dy ⊙ gelu''(x). */
static tfc_status gelu_grad_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const gelu_grad_ctx *c = n->ctx;
    tfc_tensor *ddx = gout[0], *dy = NULL, *x = NULL, *sec = NULL, *t = NULL;
    if (!ddx) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    tfc_status s = tfc_node_saved(n, &c->dy, &dy);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->x, &x);
    if (s == TFC_OK && tfc_node_needs_grad(n, 0)) s = gelu_grad(gg, ddx, x, c->approximate, &gin[0]);
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) {
        s = gelu_second(gg, x, c->approximate, &sec);
        if (s == TFC_OK) s = tfc_mul(gg, ddx, dy, &t);
        if (s == TFC_OK) s = tfc_mul(gg, t, sec, &gin[1]);
    }
    tfc_tensor *all[] = {dy, x, sec, t};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    return s;
}

/* dy ⊙ gelu'(x) by the kernel, recorded on g (a create_graph backward's graph) when dy or x requires grad. */
static tfc_status gelu_grad(tfc_graph *g, const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate,
                            tfc_tensor **out) {
    tfc_tensor *dx;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &dx));
    tfc_status s = tfc_gelu_backward(dy, x, approximate, dx, 0);
    const tfc_tensor *ins[2] = {dy, x};
    if (s == TFC_OK && tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new(g, "tfc_gelu (backward)", gelu_grad_backward, 2, 1, sizeof(gelu_grad_ctx), &n);
        if (s == TFC_OK) {
            gelu_grad_ctx *c = n->ctx;
            c->approximate = approximate;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, dy);
            tfc_node_set_input(n, 1, x);
            s = tfc_node_keep(n, &c->dy, dy);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, dx);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    *out = dx;
    return TFC_OK;
}

static tfc_status gelu_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const gelu_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *x = c->x.t, *dx;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) {
        tfc_tensor *xh = NULL;
        tfc_status s = tfc_node_saved(n, &c->x, &xh);
        if (s == TFC_OK) s = gelu_grad(gg, dy, xh, c->approximate, &gin[0]);
        tfc_tensor_release(xh);
        return s;
    }
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &dx));
    tfc_status s = tfc_gelu_backward(dy, x, c->approximate, dx, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    gin[0] = dx;
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu(tfc_graph *g, const tfc_tensor *x, int32_t approximate, tfc_tensor **out) {
    const char *fn = "tfc_gelu";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (approximate != TFC_GELU_ERF && approximate != TFC_GELU_TANH)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: approximate is %d, must be TFC_GELU_ERF (0) or TFC_GELU_TANH (1)", fn,
                       (int)approximate);
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &y));
    tfc_status s = tfc_gelu_forward(x, approximate, y);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, gelu_node_backward, 1, 1, sizeof(gelu_ctx), &n);
        if (s == TFC_OK) {
            gelu_ctx *c = n->ctx;
            c->approximate = approximate;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}
