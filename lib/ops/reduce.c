/*
 * Reductions over a set of dims and their backward:
 *   sum:  dx = expand(dy)            mean: dx = expand(dy) / n
 *   var:  dx = expand(dy) ⊙ 2 (x − mean) / (n − correction)
 *   max/min: dx = dy at the first extremal element, 0 elsewhere
 * The input is viewed with kept dims first and reduced dims last, so the
 * backend's reduce entry reduces trailing dims of a strided view; nothing
 * is copied.
 *
 * Integer and bool inputs follow PyTorch 1.13: sum gives i64, exact (two's
 * complement wrap on overflow, as torch); max/min keep the dtype; argmax
 * takes i32/i64/u8 (torch refuses bool); mean and var refuse them (torch:
 * "could not infer output dtype", "std and var only support floating
 * point"). The backends' reduce entries take floats only, so these run
 * here on the host (int_reduce), where an exact i64 accumulator is cheap.
 */
#include <math.h>
#include <string.h>

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

/* Element i of an integer or bool buffer, exactly. */
static int64_t int_load(const char *data, tfc_dtype dt, int64_t i) {
    switch (dt) {
    case TFC_DTYPE_I32: return ((const int32_t *)(const void *)data)[i];
    case TFC_DTYPE_I64: return ((const int64_t *)(const void *)data)[i];
    default: return ((const uint8_t *)data)[i]; /* u8, bool */
    }
}

static void int_store(void *out, tfc_dtype dt, int64_t o, int64_t v) {
    switch (dt) {
    case TFC_DTYPE_I32: ((int32_t *)out)[o] = (int32_t)v; break;
    case TFC_DTYPE_I64: ((int64_t *)out)[o] = v; break;
    case TFC_DTYPE_BOOL: ((uint8_t *)out)[o] = v != 0; break;
    default: ((uint8_t *)out)[o] = (uint8_t)v; break;
    }
}

/* Offset (elements) of row-major index lin over dims [from, to) of v. */
static int64_t view_offset(const tfc_sview *v, int32_t from, int32_t to, int64_t lin) {
    int64_t off = 0;
    for (int32_t d = to - 1; d >= from; d--) {
        off += (lin % v->shape[d]) * v->strides[d];
        lin /= v->shape[d];
    }
    return off;
}

/*
 * The reduce entry for integer views, on the host: out[o] (contiguous over
 * the nkeep kept dims, dtype odt) = Σ in[o, r] over the reduced index r
 * (accumulated in uint64_t: exact, wrapping like torch's int64), or the
 * first max/min value or its row-major position r. n may be 0 only for SUM.
 */
static void int_reduce(tfc_reduce_op op, const tfc_sview *in, int32_t nkeep, void *out, tfc_dtype odt) {
    int64_t nout = 1, n = 1;
    for (int32_t d = 0; d < in->ndim; d++) *(d < nkeep ? &nout : &n) *= in->shape[d];
    int want_max = op == TFC_REDUCE_MAX || op == TFC_REDUCE_ARGMAX;
    for (int64_t o = 0; o < nout; o++) {
        int64_t base = view_offset(in, 0, nkeep, o), best = 0, at = 0;
        uint64_t sum = 0;
        for (int64_t r = 0; r < n; r++) {
            int64_t v = int_load(in->data, in->dtype, base + view_offset(in, nkeep, in->ndim, r));
            if (op == TFC_REDUCE_SUM)
                sum += (uint64_t)v;
            else if (r == 0 || (want_max ? v > best : v < best)) {
                best = v;
                at = r;
            }
        }
        int64_t res = op == TFC_REDUCE_SUM                         ? (int64_t)sum
            : (op == TFC_REDUCE_ARGMAX || op == TFC_REDUCE_ARGMIN) ? at
                                                                   : best;
        int_store(out, odt, o, res);
    }
}

/*
 * An integer or bool reduction (never recorded: such tensors take no
 * gradient). A tensor off the CPU is reduced on a host copy and the result
 * moved back to its device.
 */
static tfc_status reduce_int(const char *fn, tfc_reduce_op op, const tfc_tensor *x, const int32_t *dims, int32_t ndims,
                             int32_t keepdim, tfc_tensor **out) {
    tfc_dtype odt =
        op == TFC_REDUCE_SUM || op == TFC_REDUCE_ARGMAX || op == TFC_REDUCE_ARGMIN ? TFC_DTYPE_I64 : x->dtype;
    reduce_plan p;
    TFC_TRY(plan_reduce(fn, x, dims, ndims, keepdim, &p));
    if (op != TFC_REDUCE_SUM && p.n == 0)
        return tfc_err(TFC_ERR_SHAPE, "%s: x %s: cannot reduce an empty dim to a max/min", fn, SHAPE(x));
    const tfc_tensor *hx = x;
    tfc_tensor *host = NULL, *r = NULL, *res = NULL;
    int on_cpu = x->storage->device == TFC_DEVICE_CPU;
    tfc_status s = TFC_OK;
    if (!on_cpu) s = tfc_tensor_to_device(x, TFC_DEVICE_CPU, 0, &host);
    if (s == TFC_OK && host) {
        hx = host;
        s = plan_reduce(fn, hx, dims, ndims, keepdim, &p);
    }
    if (s == TFC_OK) s = tfc_tensor_new(p.out_shape, p.out_ndim, odt, TFC_DEVICE_CPU, 0, &r);
    if (s == TFC_OK) int_reduce(op, &p.perm, p.nkeep, tfc_data(r), odt);
    if (s == TFC_OK && !on_cpu) {
        s = tfc_tensor_to_device(r, x->storage->device, x->storage->device_index, &res);
        tfc_tensor_release(r);
        r = res;
    }
    tfc_tensor_release(host);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

/* The float-only reductions refuse an integer or bool x with torch's reasons. */
static tfc_status refuse_int(const char *fn, const tfc_tensor *x) {
    const char *why = strcmp(fn, "tfc_var") == 0 ? "var only supports floating point dtypes"
        : strcmp(fn, "tfc_mean") == 0
        ? "mean cannot infer an output dtype from an integer input; cast x to a float dtype first"
        : "argmax/argmin do not take bool (as in torch)";
    return tfc_err(TFC_ERR_DTYPE, "%s: x is %s %s; %s", fn, tfc_dtype_name(x->dtype), SHAPE(x), why);
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
    if (x && tfc_dtype_is_int(x->dtype)) {
        if (k == R_MEAN || k == R_VAR) return refuse_int(fn, x);
        tfc_reduce_op op = k == R_SUM ? TFC_REDUCE_SUM : k == R_MAX ? TFC_REDUCE_MAX : TFC_REDUCE_MIN;
        return reduce_int(fn, op, x, dims, ndims, keepdim, out);
    }
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

static tfc_status arg_reduce(const char *fn, tfc_reduce_op op, const tfc_tensor *x, int32_t dim, int32_t keepdim,
                             tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    if (x && x->dtype == TFC_DTYPE_BOOL) return refuse_int(fn, x);
    if (x && tfc_dtype_is_int(x->dtype)) return reduce_int(fn, op, x, &dim, 1, keepdim, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    reduce_plan p;
    TFC_TRY(plan_reduce(fn, x, &dim, 1, keepdim, &p));
    if (p.n == 0) return tfc_err(TFC_ERR_SHAPE, "%s: x %s has an empty dim %d", fn, SHAPE(x), (int)dim);
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(x, p.out_shape, p.out_ndim, TFC_DTYPE_I64, &r));
    tfc_status s = run_reduce(fn, x, &p, op, r, 0.0);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_argmax(const tfc_tensor *x, int32_t dim, int32_t keepdim, tfc_tensor **out) {
    return arg_reduce("tfc_argmax", TFC_REDUCE_ARGMAX, x, dim, keepdim, out);
}

TFC_API tfc_status tfc_argmin(const tfc_tensor *x, int32_t dim, int32_t keepdim, tfc_tensor **out) {
    return arg_reduce("tfc_argmin", TFC_REDUCE_ARGMIN, x, dim, keepdim, out);
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
