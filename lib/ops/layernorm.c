/*
 * The normalization family's doors: LayerNorm and RMSNorm.
 *
 * Each norm has one forward function behind both of its doors (the
 * explicit tfc_<norm>_forward of kernels.h and the graph door tfc_<norm>
 * of ops.h): it checks the arguments once, fills the problem struct and runs
 * the backend's entry, into the caller's outputs or into new ones the graph
 * door then records. The graph doors save x, the weight and the statistics,
 * and their backward calls the explicit backward door, which checks its own
 * arguments once (see kernels.h for the formulas).
 */
#include <math.h>

#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- LayerNorm: the explicit doors (include/tfcore/kernels.h) ---- */

/* x's last dim C and row count N; x must have a last dim of size >= 1. */
static tfc_status rows_of(const char *fn, const tfc_tensor *x, int64_t *n, int64_t *c) {
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s; it needs a last dim of size >= 1 to normalise over", fn, SHAPE(x));
    *c = x->shape[x->ndim - 1];
    *n = tfc_numel(x) / *c;
    return TFC_OK;
}

/*
 * The LayerNorm forward behind both doors, every argument checked once:
 * x, weight, bias and eps, then either the caller's y, mean and rstd (the
 * explicit door; mean and rstd may be NULL) or, when made is non-NULL (the
 * graph door), new y, mean and rstd on x's device, handed over in made[0..2]
 * only on success.
 */
static tfc_status layernorm_fwd(const char *fn, const tfc_tensor *x, const tfc_tensor *weight, const tfc_tensor *bias,
                                double eps, tfc_tensor *y, tfc_tensor *mean, tfc_tensor *rstd, tfc_tensor **made) {
    const tfc_backend *b;
    int64_t n, c;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(rows_of(fn, x, &n, &c));
    if (!(eps >= 0 && isfinite(eps)))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: eps is %g, must be finite and >= 0", fn, eps);
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    if (bias) TFC_TRY(tfc_karg_float_like(fn, "bias", bias, &c, 1, "x", x));
    tfc_dtype st = tfc_backend_stats_dtype(b, x->dtype);
    tfc_tensor *own[3] = {NULL, NULL, NULL};
    tfc_status s = TFC_OK;
    if (made) {
        s = tfc_tensor_new_like(x, x->dtype, &own[0]);
        if (s == TFC_OK) s = tfc_tensor_new_on(x, &n, 1, st, &own[1]);
        if (s == TFC_OK) s = tfc_tensor_new_on(x, &n, 1, st, &own[2]);
        y = own[0], mean = own[1], rstd = own[2];
    } else {
        TFC_CHECK_NOT_NULL(fn, y);
        TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
        if (mean) TFC_TRY(tfc_karg_output(fn, "mean", mean, st, &n, 1, "x", x));
        if (rstd) TFC_TRY(tfc_karg_output(fn, "rstd", rstd, st, &n, 1, "x", x));
        const tfc_tensor *all[] = {y, mean, rstd, x, weight, bias};
        const char *names[] = {"y", "mean", "rstd", "x", "weight", "bias"};
        TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 6));
    }

    tfc_layernorm_problem p = {.device = tfc_device_index(x),
                               .dtype = x->dtype,
                               .rows = n,
                               .cols = c,
                               .eps = eps,
                               .y = tfc_out_data(y),
                               .mean = tfc_out_data(mean),
                               .rstd = tfc_out_data(rstd)};
    tfc_operands o = {0};
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = tfc_operand(&o, weight, &p.weight);
    if (s == TFC_OK) s = tfc_operand(&o, bias, &p.bias);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, layernorm_forward, &p);
    if (s == TFC_OK) tfc_written(y, mean, rstd);
    tfc_operands_release(&o);
    for (int i = 0; i < 3; i++) {
        if (s == TFC_OK && made)
            made[i] = own[i];
        else
            tfc_tensor_release(own[i]);
    }
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_layernorm_forward(const tfc_tensor *x, const tfc_tensor *weight, const tfc_tensor *bias,
                                         double eps, tfc_tensor *y, tfc_tensor *mean, tfc_tensor *rstd) {
    return layernorm_fwd("tfc_layernorm_forward", x, weight, bias, eps, y, mean, rstd, NULL);
}

TFC_API tfc_status tfc_layernorm_backward(const tfc_tensor *dy, const tfc_tensor *x, const tfc_tensor *weight,
                                          const tfc_tensor *mean, const tfc_tensor *rstd, tfc_tensor *dx,
                                          tfc_tensor *dweight, tfc_tensor *dbias, uint32_t flags) {
    const char *fn = "tfc_layernorm_backward";
    const tfc_backend *b;
    int64_t n, c;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(rows_of(fn, x, &n, &c));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    tfc_dtype st = tfc_backend_stats_dtype(b, x->dtype);
    TFC_TRY(tfc_karg_stats(fn, "mean", mean, st, &n, 1, "x", x));
    TFC_TRY(tfc_karg_stats(fn, "rstd", rstd, st, &n, 1, "x", x));
    if (dweight && !weight)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dweight %s is given but weight is NULL", fn, SHAPE(dweight));
    if (dx) TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    if (dweight) TFC_TRY(tfc_karg_output(fn, "dweight", dweight, x->dtype, &c, 1, "x", x));
    if (dbias) TFC_TRY(tfc_karg_output(fn, "dbias", dbias, x->dtype, &c, 1, "x", x));
    const tfc_tensor *all[] = {dx, dweight, dbias, dy, x, weight, mean, rstd};
    const char *names[] = {"dx", "dweight", "dbias", "dy", "x", "weight", "mean", "rstd"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 8));
    if (!dx && !dweight && !dbias) return TFC_OK;

    tfc_layernorm_problem p = {.device = tfc_device_index(x),
                               .dtype = x->dtype,
                               .rows = n,
                               .cols = c,
                               .dx = tfc_out_data(dx),
                               .dweight = tfc_out_data(dweight),
                               .dbias = tfc_out_data(dbias),
                               .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    const void *pm = NULL, *pr = NULL;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = tfc_operand(&o, weight, &p.weight);
    if (s == TFC_OK) s = tfc_operand(&o, mean, &pm);
    if (s == TFC_OK) s = tfc_operand(&o, rstd, &pr);
    p.mean = (void *)pm, p.rstd = (void *)pr;
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, layernorm_backward, &p);
    if (s == TFC_OK) tfc_written(dx, dweight, dbias);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- LayerNorm: the graph door (include/tfcore/ops.h) ---- */

/* weight is empty when the layer has none. */
typedef struct layernorm_ctx {
    tfc_saved x, mean, rstd, weight;
    double eps;
} layernorm_ctx;

/*
 * create_graph: the statistics recomputed from x by recorded ops (the
 * saved ones have no history), then with x̂ = (x − μ)·rstd, ĝ = dy ⊙ w:
 *   dx = rstd ⊙ (ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)),  dw = Σ dy ⊙ x̂,  db = Σ dy.
 */
static tfc_status layernorm_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **gin) {
    enum { N_TMP = 16 };
    const layernorm_ctx *c = n->ctx;
    tfc_tensor *t[N_TMP] = {0}, *x = NULL, *w = NULL;
    const int32_t last = -1;
    const tfc_edge *e = &n->in[0];
    int64_t C = e->shape[e->ndim - 1];
    tfc_status s = tfc_node_saved(n, &c->x, &x);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->weight, &w);
    if (s == TFC_OK) s = tfc_mean(gg, x, &last, 1, 1, &t[0]);
    if (s == TFC_OK) s = tfc_sub(gg, x, t[0], &t[1]); /* x − μ */
    if (s == TFC_OK) s = tfc_mul(gg, t[1], t[1], &t[2]);
    if (s == TFC_OK) s = tfc_mean(gg, t[2], &last, 1, 1, &t[3]);
    if (s == TFC_OK) s = tfc_add_scalar(gg, t[3], c->eps, &t[4]);
    if (s == TFC_OK) s = tfc_rsqrt(gg, t[4], &t[5]);     /* rstd */
    if (s == TFC_OK) s = tfc_mul(gg, t[1], t[5], &t[6]); /* x̂ */
    if (s == TFC_OK && tfc_node_needs_grad(n, 2)) s = tfc_sum_to_shape_g(gg, tfc_tensor_retain(dy), &C, 1, &gin[2]);
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) {
        s = tfc_mul(gg, dy, t[6], &t[7]);
        if (s == TFC_OK) s = tfc_sum_to_shape_g(gg, t[7], &C, 1, &gin[1]);
        t[7] = NULL;
    }
    if (s == TFC_OK && tfc_node_needs_grad(n, 0)) {
        s = w ? tfc_mul(gg, dy, w, &t[8]) : (t[8] = tfc_tensor_retain(dy), TFC_OK); /* ĝ */
        if (s == TFC_OK) s = tfc_mean(gg, t[8], &last, 1, 1, &t[9]);
        if (s == TFC_OK) s = tfc_mul(gg, t[8], t[6], &t[10]);
        if (s == TFC_OK) s = tfc_mean(gg, t[10], &last, 1, 1, &t[11]);
        if (s == TFC_OK) s = tfc_mul(gg, t[6], t[11], &t[12]);
        if (s == TFC_OK) s = tfc_sub(gg, t[8], t[9], &t[13]);
        if (s == TFC_OK) s = tfc_sub(gg, t[13], t[12], &t[14]);
        if (s == TFC_OK) s = tfc_mul(gg, t[5], t[14], &gin[0]);
    }
    for (int i = 0; i < N_TMP; i++) tfc_tensor_release(t[i]);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
    return s;
}

static tfc_status layernorm_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return layernorm_backward_graph(n, gg, dy, gin);
    const layernorm_ctx *c = n->ctx;
    tfc_tensor *x = c->x.t, *mean = c->mean.t, *rstd = c->rstd.t, *w = c->weight.t;
    tfc_tensor *g[3] = {NULL, NULL, NULL};
    int64_t C = x->shape[x->ndim - 1];
    tfc_status s = TFC_OK;
    if (tfc_node_needs_grad(n, 0)) s = tfc_tensor_new_like(x, x->dtype, &g[0]);
    for (int32_t i = 1; i < 3 && s == TFC_OK; i++)
        if (tfc_node_needs_grad(n, i)) s = tfc_tensor_new_on(x, &C, 1, x->dtype, &g[i]);
    if (s == TFC_OK) s = tfc_layernorm_backward(dy, x, w, mean, rstd, g[0], g[1], g[2], 0);
    for (int32_t i = 0; i < 3; i++) {
        if (s == TFC_OK)
            gin[i] = g[i];
        else
            tfc_tensor_release(g[i]);
    }
    return s;
}

TFC_API tfc_status tfc_layernorm(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *weight, const tfc_tensor *bias,
                                 double eps, tfc_tensor **out) {
    const char *fn = "tfc_layernorm";
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_tensor *t[3] = {NULL, NULL, NULL}; /* y, mean, rstd */
    TFC_TRY(layernorm_fwd(fn, x, weight, bias, eps, NULL, NULL, NULL, t));
    tfc_tensor *y = t[0], *mean = t[1], *rstd = t[2];
    tfc_status s = TFC_OK;
    const tfc_tensor *ins[3] = {x, weight, bias};
    if (tfc_should_record(g, ins, 3)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, layernorm_node_backward, 3, 1, sizeof(layernorm_ctx), &n);
        if (s == TFC_OK) {
            layernorm_ctx *c = n->ctx;
            c->eps = eps;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            /* A missing weight/bias is recorded as an input that needs no grad. */
            if (weight) tfc_node_set_input(n, 1, weight);
            if (bias) tfc_node_set_input(n, 2, bias);
            s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->mean, mean);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->rstd, rstd);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->weight, weight);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    tfc_tensor_release(mean);
    tfc_tensor_release(rstd);
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}

/* ---- RMSNorm: the explicit doors (include/tfcore/kernels.h) ---- */

/*
 * The RMSNorm forward behind both doors, every argument checked once: x,
 * weight and eps, then either the caller's y and rstd (the explicit door;
 * rstd may be NULL) or, when made is non-NULL (the graph door), new y and
 * rstd on x's device, handed over in made[0..1] only on success.
 */
static tfc_status rmsnorm_fwd(const char *fn, const tfc_tensor *x, const tfc_tensor *weight, double eps, tfc_tensor *y,
                              tfc_tensor *rstd, tfc_tensor **made) {
    const tfc_backend *b;
    int64_t n, c;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(rows_of(fn, x, &n, &c));
    /* eps = 0 would make a row of zeros 0 · ∞ */
    if (!(eps > 0 && isfinite(eps)))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: eps is %g, must be finite and > 0", fn, eps);
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    tfc_dtype st = tfc_backend_stats_dtype(b, x->dtype);
    tfc_tensor *own[2] = {NULL, NULL};
    tfc_status s = TFC_OK;
    if (made) {
        s = tfc_tensor_new_like(x, x->dtype, &own[0]);
        if (s == TFC_OK) s = tfc_tensor_new_on(x, &n, 1, st, &own[1]);
        y = own[0], rstd = own[1];
    } else {
        TFC_CHECK_NOT_NULL(fn, y);
        TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
        if (rstd) TFC_TRY(tfc_karg_output(fn, "rstd", rstd, st, &n, 1, "x", x));
        const tfc_tensor *all[] = {y, rstd, x, weight};
        const char *names[] = {"y", "rstd", "x", "weight"};
        TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 4));
    }

    tfc_rmsnorm_problem p = {.device = tfc_device_index(x),
                             .dtype = x->dtype,
                             .rows = n,
                             .cols = c,
                             .eps = eps,
                             .y = tfc_out_data(y),
                             .rstd = tfc_out_data(rstd)};
    tfc_operands o = {0};
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = tfc_operand(&o, weight, &p.weight);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, rmsnorm_forward, &p);
    if (s == TFC_OK) tfc_written(y, rstd, NULL);
    tfc_operands_release(&o);
    for (int i = 0; i < 2; i++) {
        if (s == TFC_OK && made)
            made[i] = own[i];
        else
            tfc_tensor_release(own[i]);
    }
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_rmsnorm_forward(const tfc_tensor *x, const tfc_tensor *weight, double eps, tfc_tensor *y,
                                       tfc_tensor *rstd) {
    return rmsnorm_fwd("tfc_rmsnorm_forward", x, weight, eps, y, rstd, NULL);
}

TFC_API tfc_status tfc_rmsnorm_backward(const tfc_tensor *dy, const tfc_tensor *x, const tfc_tensor *weight,
                                        const tfc_tensor *rstd, tfc_tensor *dx, tfc_tensor *dweight, uint32_t flags) {
    const char *fn = "tfc_rmsnorm_backward";
    const tfc_backend *b;
    int64_t n, c;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(rows_of(fn, x, &n, &c));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    TFC_TRY(tfc_karg_stats(fn, "rstd", rstd, tfc_backend_stats_dtype(b, x->dtype), &n, 1, "x", x));
    if (dweight && !weight)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dweight %s is given but weight is NULL", fn, SHAPE(dweight));
    if (dx) TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    if (dweight) TFC_TRY(tfc_karg_output(fn, "dweight", dweight, x->dtype, &c, 1, "x", x));
    const tfc_tensor *all[] = {dx, dweight, dy, x, weight, rstd};
    const char *names[] = {"dx", "dweight", "dy", "x", "weight", "rstd"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 6));
    if (!dx && !dweight) return TFC_OK;

    tfc_rmsnorm_problem p = {.device = tfc_device_index(x),
                             .dtype = x->dtype,
                             .rows = n,
                             .cols = c,
                             .dx = tfc_out_data(dx),
                             .dweight = tfc_out_data(dweight),
                             .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    const void *pr = NULL;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = tfc_operand(&o, weight, &p.weight);
    if (s == TFC_OK) s = tfc_operand(&o, rstd, &pr);
    p.rstd = (void *)pr;
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, rmsnorm_backward, &p);
    if (s == TFC_OK) tfc_written(dx, dweight, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- RMSNorm: the graph door (include/tfcore/ops.h) ---- */

/* weight is empty when the layer has none. */
typedef struct rmsnorm_ctx {
    tfc_saved x, rstd, weight;
    double eps;
} rmsnorm_ctx;

/*
 * create_graph: rstd recomputed from x by recorded ops (the saved one has
 * no history), then with x̂ = x·rstd, g = dy ⊙ w:
 *   dx = rstd ⊙ (g − x̂ ⊙ mean(g ⊙ x̂)),  dw = Σ dy ⊙ x̂.
 */
static tfc_status rmsnorm_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **gin) {
    enum { N_TMP = 11 };
    const rmsnorm_ctx *c = n->ctx;
    tfc_tensor *t[N_TMP] = {0}, *x = NULL, *w = NULL;
    const int32_t last = -1;
    const tfc_edge *e = &n->in[0];
    int64_t C = e->shape[e->ndim - 1];
    tfc_status s = tfc_node_saved(n, &c->x, &x);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->weight, &w);
    if (s == TFC_OK) s = tfc_mul(gg, x, x, &t[0]);
    if (s == TFC_OK) s = tfc_mean(gg, t[0], &last, 1, 1, &t[1]);
    if (s == TFC_OK) s = tfc_add_scalar(gg, t[1], c->eps, &t[2]);
    if (s == TFC_OK) s = tfc_rsqrt(gg, t[2], &t[3]);  /* rstd */
    if (s == TFC_OK) s = tfc_mul(gg, x, t[3], &t[4]); /* x̂ */
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) {
        s = tfc_mul(gg, dy, t[4], &t[5]);
        if (s == TFC_OK) s = tfc_sum_to_shape_g(gg, t[5], &C, 1, &gin[1]);
        t[5] = NULL;
    }
    if (s == TFC_OK && tfc_node_needs_grad(n, 0)) {
        s = w ? tfc_mul(gg, dy, w, &t[6]) : (t[6] = tfc_tensor_retain(dy), TFC_OK); /* g */
        if (s == TFC_OK) s = tfc_mul(gg, t[6], t[4], &t[7]);
        if (s == TFC_OK) s = tfc_mean(gg, t[7], &last, 1, 1, &t[8]);
        if (s == TFC_OK) s = tfc_mul(gg, t[4], t[8], &t[9]);
        if (s == TFC_OK) s = tfc_sub(gg, t[6], t[9], &t[10]);
        if (s == TFC_OK) s = tfc_mul(gg, t[3], t[10], &gin[0]);
    }
    for (int i = 0; i < N_TMP; i++) tfc_tensor_release(t[i]);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
    return s;
}

static tfc_status rmsnorm_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return rmsnorm_backward_graph(n, gg, dy, gin);
    const rmsnorm_ctx *c = n->ctx;
    tfc_tensor *x = c->x.t, *g[2] = {NULL, NULL};
    int64_t C = x->shape[x->ndim - 1];
    tfc_status s = TFC_OK;
    if (tfc_node_needs_grad(n, 0)) s = tfc_tensor_new_like(x, x->dtype, &g[0]);
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) s = tfc_tensor_new_on(x, &C, 1, x->dtype, &g[1]);
    if (s == TFC_OK) s = tfc_rmsnorm_backward(dy, x, c->weight.t, c->rstd.t, g[0], g[1], 0);
    for (int32_t i = 0; i < 2; i++) {
        if (s == TFC_OK)
            gin[i] = g[i];
        else
            tfc_tensor_release(g[i]);
    }
    return s;
}

TFC_API tfc_status tfc_rmsnorm(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *weight, double eps,
                               tfc_tensor **out) {
    const char *fn = "tfc_rmsnorm";
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_tensor *t[2] = {NULL, NULL}; /* y, rstd */
    TFC_TRY(rmsnorm_fwd(fn, x, weight, eps, NULL, NULL, t));
    tfc_tensor *y = t[0], *rstd = t[1];
    tfc_status s = TFC_OK;
    const tfc_tensor *ins[2] = {x, weight};
    if (tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, rmsnorm_node_backward, 2, 1, sizeof(rmsnorm_ctx), &n);
        if (s == TFC_OK) {
            rmsnorm_ctx *c = n->ctx;
            c->eps = eps;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            if (weight) tfc_node_set_input(n, 1, weight); /* else an input that needs no grad */
            s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->rstd, rstd);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->weight, weight);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    tfc_tensor_release(rstd);
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}
