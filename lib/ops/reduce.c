/*
 * Reductions over a set of dims and their backward:
 *   sum:  dx = expand(dy)            mean: dx = expand(dy) / n
 *   var:  dx = expand(dy) ⊙ 2 (x − mean) / (n − correction)
 *   max/min: dx = dy at the first extremal element, 0 elsewhere
 * The input is viewed with kept dims first and reduced dims last, so the
 * backend's reduce entry reduces trailing dims of a strided view; nothing
 * is copied.
 */
#include <math.h>

#include "ops/op_util.h"
#include "ops/operands.h"

typedef struct reduce_plan {
    int32_t red[TFC_MAX_DIMS]; /* 1 when dim i is reduced */
    int32_t nkeep;
    int64_t n;      /* elements reduced per output */
    tfc_sview perm; /* input viewed as [kept..., reduced...] */
    int64_t out_shape[TFC_MAX_DIMS];
    int32_t out_ndim;
    int64_t keep_shape[TFC_MAX_DIMS]; /* keepdim=1 shape, for backward broadcasting */
} reduce_plan;

static tfc_status plan_reduce(const char *fn, const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim,
                              reduce_plan *p) {
    if (ndims < 0 || ndims > TFC_MAX_DIMS || (ndims > 0 && !dims))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dims/ndims invalid (ndims %d)", fn, (int)ndims);
    for (int32_t i = 0; i < TFC_MAX_DIMS; i++) p->red[i] = ndims == 0;
    for (int32_t i = 0; i < ndims; i++) {
        int32_t d;
        TFC_TRY(tfc_norm_dim(fn, dims[i], x->ndim == 0 ? 1 : x->ndim, &d));
        if (x->ndim > 0 && p->red[d])
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: dim %d listed twice for x %s", fn, (int)dims[i], SHAPE(x));
        p->red[d] = 1;
    }
    tfc_sview v = tfc_sview_of(x);
    p->perm = v;
    int32_t k = 0;
    p->n = 1;
    p->out_ndim = 0;
    for (int32_t i = 0; i < x->ndim; i++) {
        p->keep_shape[i] = p->red[i] ? 1 : x->shape[i];
        if (!p->red[i]) {
            p->perm.shape[k] = x->shape[i];
            p->perm.strides[k++] = x->strides[i];
            p->out_shape[p->out_ndim++] = x->shape[i];
        } else if (keepdim) {
            p->out_shape[p->out_ndim++] = 1;
        }
    }
    p->nkeep = k;
    for (int32_t i = 0; i < x->ndim; i++)
        if (p->red[i]) {
            p->perm.shape[k] = x->shape[i];
            p->perm.strides[k++] = x->strides[i];
            p->n *= x->shape[i];
        }
    return TFC_OK;
}

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_VAR } red_kind;
static const char *const red_names[] = {"tfc_sum", "tfc_mean", "tfc_max", "tfc_min", "tfc_var"};

/* The backend's reduce entry: out (contiguous over p's kept dims) = op over p's reduced dims. */
static tfc_status run_reduce(const char *fn, const tfc_tensor *x, const reduce_plan *p, tfc_reduce_op op,
                             tfc_tensor *out, double scale) {
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    tfc_reduce_problem pr = {.device = tfc_device_index(x),
                             .op = op,
                             .in = p->perm,
                             .nkeep = p->nkeep,
                             .out = tfc_data(out),
                             .scale = scale};
    return TFC_BACKEND_RUN_DT(fn, be, reduce, &pr, x->dtype);
}

/* Backward of max/min: dx (zeroed, planned as p) gets dy at the saved positions. */
static tfc_status scatter_max(tfc_tensor *dx, const reduce_plan *p, const tfc_tensor *pos, const tfc_tensor *dyk) {
    const char *fn = "tfc_max/tfc_min (backward)";
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, dx, &be));
    tfc_scatter_problem pr = {
        .device = tfc_device_index(dx), .dst = p->perm, .nkeep = p->nkeep, .pos = (const int64_t *)tfc_data(pos)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dyk, &pr.dy);
    if (s == TFC_OK) s = TFC_BACKEND_RUN_DT(fn, be, reduce_scatter, &pr, dx->dtype);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

typedef struct reduce_ctx {
    red_kind kind;
    int64_t n;                        /* elements reduced per output */
    double correction;                /* var */
    int64_t keep_shape[TFC_MAX_DIMS]; /* the input's shape with reduced dims as 1 */
    tfc_saved x;                      /* var: the input */
    tfc_saved pos;                    /* max/min: i64 positions of the extremes */
} reduce_ctx;

static tfc_status reduce_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin);
/*
 * create_graph: the same gradients from recorded ops on gg — sum/mean an
 * expand and a scale, var through recorded mean and products, max/min dy
 * times a constant one-hot mask of the saved positions.
 */
static tfc_status reduce_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **dx) {
    const reduce_ctx *c = n->ctx;
    const tfc_edge *e = &n->in[0];
    tfc_tensor *dyk = NULL, *t = NULL, *u = NULL, *x = NULL, *mean = NULL;
    int32_t dims[TFC_MAX_DIMS], nd = 0;
    for (int32_t i = 0; i < e->ndim; i++)
        if (c->keep_shape[i] == 1 && e->shape[i] != 1) dims[nd++] = i;
    tfc_status s = tfc_reshape(gg, dy, c->keep_shape, e->ndim, &dyk);
    if (s != TFC_OK) return s;
    switch (c->kind) {
    case R_SUM:
    case R_MEAN:
        s = tfc_expand(gg, dyk, e->shape, e->ndim, &t);
        if (s == TFC_OK) s = tfc_mul_scalar(gg, t, c->kind == R_MEAN ? 1.0 / (double)c->n : 1.0, dx);
        break;
    case R_VAR:
        s = tfc_node_saved(n, &c->x, &x);
        if (s == TFC_OK) s = nd ? tfc_mean(gg, x, dims, nd, 1, &mean) : tfc_mul_scalar(gg, x, 1.0, &mean);
        if (s == TFC_OK) s = tfc_sub(gg, x, mean, &t);
        if (s == TFC_OK) s = tfc_mul(gg, t, dyk, &u);
        if (s == TFC_OK) s = tfc_mul_scalar(gg, u, 2.0 / ((double)c->n - c->correction), dx);
        break;
    default: { /* max/min: the plain backward of a gradient of ones is the mask */
        tfc_tensor *ones = NULL, *mask = NULL;
        tfc_tensor *g1[1] = {NULL};
        s = tfc_tensor_new_on(dy, dy->shape, dy->ndim, dy->dtype, &ones);
        if (s == TFC_OK) s = tfc_tensor_fill(ones, 1.0);
        if (s == TFC_OK) {
            tfc_graph *saved_graph = n->graph;
            /* run the plain path on a constant: no graph, so nothing records */
            ((tfc_node *)n)->graph = NULL;
            s = reduce_backward(n, &ones, g1);
            ((tfc_node *)n)->graph = saved_graph;
            mask = g1[0];
        }
        if (s == TFC_OK) s = tfc_mul(gg, mask, dyk, dx);
        tfc_tensor_release(ones);
        tfc_tensor_release(mask);
        break;
    }
    }
    tfc_tensor_release(dyk);
    tfc_tensor_release(t);
    tfc_tensor_release(u);
    tfc_tensor_release(x);
    tfc_tensor_release(mean);
    return s;
}

static tfc_status reduce_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const reduce_ctx *c = n->ctx;
    red_kind k = c->kind;
    tfc_tensor *dy = gout[0];
    const tfc_edge *e = &n->in[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const int64_t *keep_shape = c->keep_shape;
    int64_t nred = c->n;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return reduce_backward_graph(n, gg, dy, &gin[0]);
    tfc_tensor *dyk; /* dy with reduced dims as size 1 */
    TFC_TRY(tfc_reshape(NULL, dy, keep_shape, e->ndim, &dyk));
    tfc_status s = TFC_OK;
    if (k == R_SUM || k == R_MEAN) {
        s = tfc_map_new(n->name, TFC_MAP_MUL_S, e->shape, e->ndim, dy->dtype, dyk, NULL, NULL,
                        k == R_MEAN ? 1.0 / (double)nred : 1.0, &gin[0]);
    } else if (k == R_VAR) {
        /* dx = dy ⊙ 2 (x − mean) / (n − correction) */
        tfc_tensor *x = c->x.t, *mean = NULL, *dev = NULL, *t = NULL;
        int32_t dims[TFC_MAX_DIMS], nd = 0;
        for (int32_t i = 0; i < e->ndim; i++)
            if (keep_shape[i] == 1 && e->shape[i] != 1) dims[nd++] = i;
        s = nd ? tfc_mean(NULL, x, dims, nd, 1, &mean) : tfc_tensor_clone(x, &mean);
        if (s == TFC_OK) s = tfc_sub(NULL, x, mean, &dev);
        if (s == TFC_OK) s = tfc_mul(NULL, dev, dyk, &t);
        if (s == TFC_OK) s = tfc_mul_scalar(NULL, t, 2.0 / ((double)nred - c->correction), &gin[0]);
        tfc_tensor_release(mean);
        tfc_tensor_release(dev);
        tfc_tensor_release(t);
    } else {
        /* max/min: scatter dy to the saved positions. */
        tfc_tensor *pos = c->pos.t, *dx;
        s = tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &dx);
        if (s == TFC_OK) {
            s = tfc_tensor_fill(dx, 0.0);
            reduce_plan p;
            int32_t all[TFC_MAX_DIMS], na = 0;
            for (int32_t i = 0; i < e->ndim; i++)
                if (keep_shape[i] == 1 && e->shape[i] != 1) all[na++] = i;
            if (s == TFC_OK) {
                if (na == 0) {
                    s = tfc_tensor_copy_from(dx, dyk);
                } else {
                    s = plan_reduce("backward", dx, all, na, 0, &p);
                    if (s == TFC_OK) {
                        s = scatter_max(dx, &p, pos, dyk);
                    }
                }
            }
            if (s == TFC_OK)
                gin[0] = dx;
            else
                tfc_tensor_release(dx);
        }
    }
    tfc_tensor_release(dyk);
    return s;
}

static tfc_status reduce(red_kind k, tfc_graph *g, const tfc_tensor *x, const int32_t *dims, int32_t ndims,
                         int32_t keepdim, double correction, tfc_tensor **out) {
    const char *fn = red_names[k];
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    reduce_plan p;
    TFC_TRY(plan_reduce(fn, x, dims, ndims, keepdim, &p));
    if ((k == R_MAX || k == R_MIN) && p.n == 0)
        return tfc_err(TFC_ERR_SHAPE, "%s: x %s: cannot take max/min over an empty dim", fn, SHAPE(x));
    /* For a reduction over zero dims (e.g. dims of a scalar) n = 1. */
    tfc_tensor *r, *pos = NULL;
    TFC_TRY(tfc_tensor_new_on(x, p.out_shape, p.out_ndim, x->dtype, &r));
    tfc_status s;
    switch (k) {
    case R_SUM: s = run_reduce(fn, x, &p, TFC_REDUCE_SUM, r, 1.0); break;
    case R_MEAN: s = run_reduce(fn, x, &p, TFC_REDUCE_SUM, r, 1.0 / (double)p.n); break;
    case R_VAR: s = run_reduce(fn, x, &p, TFC_REDUCE_VAR, r, correction); break;
    default:
        s = tfc_tensor_new_on(x, p.out_shape, p.out_ndim, TFC_DTYPE_I64, &pos);
        if (s == TFC_OK) s = run_reduce(fn, x, &p, k == R_MAX ? TFC_REDUCE_ARGMAX : TFC_REDUCE_ARGMIN, pos, 0.0);
        if (s == TFC_OK) s = run_reduce(fn, x, &p, k == R_MAX ? TFC_REDUCE_MAX : TFC_REDUCE_MIN, r, 0.0);
    }
    if (s != TFC_OK) {
        tfc_tensor_release(pos);
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, reduce_backward, 1, 1, sizeof(reduce_ctx), &n);
        if (s == TFC_OK) {
            reduce_ctx *c = n->ctx;
            c->kind = k;
            c->n = p.n;
            tfc_node_set_double_backward(n);
            c->correction = correction;
            for (int32_t i = 0; i < x->ndim; i++) c->keep_shape[i] = p.keep_shape[i];
            tfc_node_set_input(n, 0, x);
            if (k == R_VAR) s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->pos, pos);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, r);
        }
    }
    tfc_tensor_release(pos);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_sum(tfc_graph *g, const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim,
                           tfc_tensor **out) {
    return reduce(R_SUM, g, x, dims, ndims, keepdim, 0.0, out);
}
TFC_API tfc_status tfc_mean(tfc_graph *g, const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim,
                            tfc_tensor **out) {
    return reduce(R_MEAN, g, x, dims, ndims, keepdim, 0.0, out);
}
TFC_API tfc_status tfc_max(tfc_graph *g, const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim,
                           tfc_tensor **out) {
    return reduce(R_MAX, g, x, dims, ndims, keepdim, 0.0, out);
}
TFC_API tfc_status tfc_min(tfc_graph *g, const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim,
                           tfc_tensor **out) {
    return reduce(R_MIN, g, x, dims, ndims, keepdim, 0.0, out);
}
TFC_API tfc_status tfc_var(tfc_graph *g, const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t correction,
                           int32_t keepdim, tfc_tensor **out) {
    if (correction < 0) return tfc_err(TFC_ERR_INVALID_ARG, "tfc_var: correction is %d, must be >= 0", (int)correction);
    return reduce(R_VAR, g, x, dims, ndims, keepdim, (double)correction, out);
}

TFC_API tfc_status tfc_argmax(const tfc_tensor *x, int32_t dim, int32_t keepdim, tfc_tensor **out) {
    const char *fn = "tfc_argmax";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    reduce_plan p;
    TFC_TRY(plan_reduce(fn, x, &dim, 1, keepdim, &p));
    if (p.n == 0) return tfc_err(TFC_ERR_SHAPE, "%s: x %s has an empty dim %d", fn, SHAPE(x), (int)dim);
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(x, p.out_shape, p.out_ndim, TFC_DTYPE_I64, &r));
    tfc_status s = run_reduce(fn, x, &p, TFC_REDUCE_ARGMAX, r, 0.0);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

/* Declared in ops/op_util.h: the backward of broadcasting. */
tfc_status tfc_sum_to_shape(tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    return tfc_sum_to_shape_g(NULL, grad, shape, ndim, out);
}

tfc_status tfc_sum_to_shape_g(tfc_graph *g, tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    int same = grad->ndim == ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = grad->shape[i] == shape[i];
    if (same) {
        *out = grad;
        return TFC_OK;
    }
    /* Sum the leading extra dims and the dims where shape has 1. */
    int32_t dims[TFC_MAX_DIMS], nd = 0, lead = grad->ndim - ndim;
    for (int32_t i = 0; i < grad->ndim; i++) {
        int32_t k = i - lead;
        if (k < 0 || (shape[k] == 1 && grad->shape[i] != 1)) dims[nd++] = i;
    }
    tfc_tensor *summed, *r;
    tfc_status s = tfc_sum(g, grad, dims, nd, 1, &summed);
    tfc_tensor_release(grad);
    TFC_TRY(s);
    s = tfc_reshape(g, summed, shape, ndim, &r);
    tfc_tensor_release(summed);
    TFC_TRY(s);
    *out = r;
    return TFC_OK;
}
