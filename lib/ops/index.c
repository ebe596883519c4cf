/*
 * Indexed reads and writes: tfc_index_select, tfc_gather, tfc_scatter_add
 * (graph doors, differentiable) and tfc_index_put (an in-place write,
 * recording nothing), all through the backend's gather and scatter entries
 * (tfc_index_problem). Each backward is the other entry: a gather's
 * gradient is a scatter-add into zeros, a scatter-add's gradient to src is
 * a gather. The kernels check every index before writing anything.
 */
#include "ops/op_util.h"
#include "ops/operands.h"

/* ---- shared steps ---- */

/* x and index on one device, index i32/i64. */
static tfc_status check_pair(const char *fn, const tfc_tensor *x, const tfc_tensor *index) {
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_TRY(tfc_karg_index(fn, "index", index));
    const tfc_tensor *ts[2] = {x, index};
    const char *nm[2] = {"x", "index"};
    return tfc_same_device(fn, ts, nm, 2);
}

/* Run the gather (scatter = 0) or scatter entry of x's backend. */
static tfc_status run_index(const char *fn, const tfc_tensor *on, int scatter, const tfc_index_problem *p) {
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, on, &b));
    if (scatter) return TFC_BACKEND_RUN_DT(fn, b, scatter, p, p->x.dtype);
    return TFC_BACKEND_RUN_DT(fn, b, gather, p, p->x.dtype);
}

/* index_select's index as a view over out's shape: its one stride along dim, 0 elsewhere. */
static tfc_sview select_index_view(const tfc_tensor *index, const int64_t *shape, int32_t ndim, int32_t dim) {
    tfc_sview v = tfc_sview_of(index);
    v.ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) {
        v.shape[i] = shape[i];
        v.strides[i] = 0;
    }
    if (index->ndim == 1) v.strides[dim] = index->strides[0];
    return v;
}

/* A view of t with shape (same ndim, each dim no larger): t's strides, the leading corner. */
static tfc_sview corner_view(const tfc_tensor *t, const int64_t *shape) {
    tfc_sview v = tfc_sview_of(t);
    for (int32_t i = 0; i < t->ndim; i++) v.shape[i] = shape[i];
    return v;
}

/* dx = zeros(shape); dx[index] += dy along dim (index viewed over dy's shape). */
static tfc_status scatter_grad(const char *fn, const tfc_tensor *dy, const tfc_sview *index, int32_t dim,
                               const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    tfc_tensor *dx;
    TFC_TRY(tfc_tensor_new_on(dy, shape, ndim, dy->dtype, &dx));
    tfc_status s = tfc_tensor_fill(dx, 0.0);
    if (s == TFC_OK) {
        tfc_index_problem p = {.device = tfc_device_index(dy),
                               .dim = dim,
                               .x = tfc_sview_of(dx),
                               .y = tfc_sview_of(dy),
                               .index = *index,
                               .accumulate = 1};
        s = run_index(fn, dy, 1, &p);
    }
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return tfc_err_in(fn, s);
    }
    *out = dx;
    return TFC_OK;
}

/* ---- the create_graph backwards: gather and scatter-add as adjoint nodes ---- */

/*
 * In a create_graph pass each index op's gradient is recorded as an
 * index_move node: GATHER reads t at index into zeros(shape) (the corner
 * the index covers), SCATTER adds t at index into zeros(shape). Each is
 * linear and the other's adjoint (same index, dim and view), so each
 * node's backward is a recorded index_move of the other kind: any order.
 * SELECT views index_select's 1-D index over the index side's full shape;
 * FULL uses the index tensor itself over the index side's leading corner.
 */
enum { MOVE_GATHER, MOVE_SCATTER };
enum { VIEW_SELECT, VIEW_FULL };

typedef struct index_move_ctx {
    tfc_saved index;
    int32_t dim, kind, view;
} index_move_ctx;

static tfc_status index_move(tfc_graph *g, const char *fn, int kind, int view, const tfc_tensor *t,
                             const tfc_tensor *index, int32_t dim, const int64_t *shape, int32_t ndim,
                             tfc_tensor **out);

static tfc_status index_move_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const index_move_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    return index_move(tfc_node_grad_graph(n), n->name, c->kind == MOVE_GATHER ? MOVE_SCATTER : MOVE_GATHER, c->view, dy,
                      c->index.t, c->dim, e->shape, e->ndim, &gin[0]);
}

static tfc_status index_move(tfc_graph *g, const char *fn, int kind, int view, const tfc_tensor *t,
                             const tfc_tensor *index, int32_t dim, const int64_t *shape, int32_t ndim,
                             tfc_tensor **out) {
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(t, shape, ndim, t->dtype, &r));
    tfc_status s = tfc_tensor_fill(r, 0.0);
    /* the index side: the output of a gather, the input of a scatter */
    const tfc_tensor *side = kind == MOVE_GATHER ? r : t;
    tfc_sview iv = view == VIEW_SELECT ? select_index_view(index, side->shape, side->ndim, dim) : tfc_sview_of(index);
    tfc_sview sv = view == VIEW_SELECT ? tfc_sview_of(side) : corner_view(side, index->shape);
    tfc_index_problem p = {.device = tfc_device_index(t),
                           .dim = dim,
                           .x = tfc_sview_of(kind == MOVE_GATHER ? t : r),
                           .y = sv,
                           .index = iv,
                           .accumulate = kind == MOVE_SCATTER};
    if (s == TFC_OK) s = run_index(fn, t, kind == MOVE_SCATTER, &p);
    if (s == TFC_OK && tfc_should_record(g, &t, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, index_move_backward, 1, 1, sizeof(index_move_ctx), &n);
        if (s == TFC_OK) {
            index_move_ctx *c = n->ctx;
            c->dim = dim;
            c->kind = kind;
            c->view = view;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, t);
            s = tfc_node_keep(n, &c->index, index);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, r);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

/* ---- index_select ---- */

/* What index_select's and gather's backwards need: the index and the dim. */
typedef struct index_ctx {
    tfc_saved index;
    int32_t dim;
} index_ctx;

/* Record the node of a one-input index op (index_select, gather) whose output y was read from x by index. */
static tfc_status record_index_node(tfc_graph *g, const char *fn, tfc_backward_fn backward, const tfc_tensor *x,
                                    const tfc_tensor *index, int32_t dim, tfc_tensor *y) {
    tfc_node *n;
    TFC_TRY(tfc_node_new(g, fn, backward, 1, 1, sizeof(index_ctx), &n));
    index_ctx *c = n->ctx;
    tfc_node_set_double_backward(n);
    c->dim = dim;
    tfc_node_set_input(n, 0, x);
    tfc_status s = tfc_node_keep(n, &c->index, index);
    if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
    return s;
}

static tfc_status index_select_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const index_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg)
        return index_move(gg, "tfc_index_select (backward)", MOVE_SCATTER, VIEW_SELECT, dy, c->index.t, c->dim,
                          e->shape, e->ndim, &gin[0]);
    tfc_sview iv = select_index_view(c->index.t, dy->shape, dy->ndim, c->dim);
    return scatter_grad("tfc_index_select (backward)", dy, &iv, c->dim, e->shape, e->ndim, &gin[0]);
}

TFC_API tfc_status tfc_index_select(tfc_graph *g, const tfc_tensor *x, int32_t dim, const tfc_tensor *index,
                                    tfc_tensor **out) {
    const char *fn = "tfc_index_select";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(check_pair(fn, x, index));
    if (x->ndim == 0) return tfc_err(TFC_ERR_SHAPE, "%s: x is a scalar (0-d); index_select needs a dim", fn);
    if (index->ndim > 1) return tfc_err(TFC_ERR_SHAPE, "%s: index is %s; it must be 1-D (or 0-d)", fn, SHAPE(index));
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    int64_t shape[TFC_MAX_DIMS];
    for (int32_t i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[d] = tfc_numel(index);
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_on(x, shape, x->ndim, x->dtype, &y));
    tfc_index_problem p = {.device = tfc_device_index(x),
                           .dim = d,
                           .x = tfc_sview_of(x),
                           .y = tfc_sview_of(y),
                           .index = select_index_view(index, shape, x->ndim, d)};
    tfc_status s = run_index(fn, x, 0, &p);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) s = record_index_node(g, fn, index_select_backward, x, index, d, y);
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}

/* ---- gather ---- */

static tfc_status gather_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const index_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg)
        return index_move(gg, "tfc_gather (backward)", MOVE_SCATTER, VIEW_FULL, dy, c->index.t, c->dim, e->shape,
                          e->ndim, &gin[0]);
    tfc_sview iv = tfc_sview_of(c->index.t);
    return scatter_grad("tfc_gather (backward)", dy, &iv, c->dim, e->shape, e->ndim, &gin[0]);
}

/* index (of index's ndim == x's) fits x at every dim but dim, and other (when given) at every dim. */
static tfc_status check_fits(const char *fn, const tfc_tensor *x, int32_t d, const tfc_tensor *index, const char *oname,
                             const tfc_tensor *other) {
    if (index->ndim != x->ndim)
        return tfc_err(TFC_ERR_SHAPE, "%s: index is %s but x is %s; they must have the same number of dims", fn,
                       SHAPE(index), SHAPE(x));
    if (other && other->ndim != x->ndim)
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s but x is %s; they must have the same number of dims", fn, oname,
                       SHAPE(other), SHAPE(x));
    for (int32_t i = 0; i < x->ndim; i++) {
        if (i != d && index->shape[i] > x->shape[i])
            return tfc_err(TFC_ERR_SHAPE, "%s: index is %s, larger than x %s at dim %d (only dim %d may differ)", fn,
                           SHAPE(index), SHAPE(x), (int)i, (int)d);
        if (other && index->shape[i] > other->shape[i])
            return tfc_err(TFC_ERR_SHAPE, "%s: index is %s, larger than %s %s at dim %d", fn, SHAPE(index), oname,
                           SHAPE(other), (int)i);
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_gather(tfc_graph *g, const tfc_tensor *x, int32_t dim, const tfc_tensor *index,
                              tfc_tensor **out) {
    const char *fn = "tfc_gather";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(check_pair(fn, x, index));
    int32_t d = 0;
    if (x->ndim > 0)
        TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    else if (dim != 0 && dim != -1)
        return tfc_err(TFC_ERR_SHAPE, "%s: dim is %d but x is a scalar (0-d): only 0 or -1", fn, (int)dim);
    TFC_TRY(check_fits(fn, x, d, index, NULL, NULL));
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_on(x, index->shape, index->ndim, x->dtype, &y));
    /* A 0-d x is a 1-element dim: the kernel addresses it flat. */
    tfc_index_problem p = {.device = tfc_device_index(x),
                           .dim = x->ndim ? d : -1,
                           .x = tfc_sview_of(x),
                           .y = tfc_sview_of(y),
                           .index = tfc_sview_of(index)};
    tfc_status s = run_index(fn, x, 0, &p);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) s = record_index_node(g, fn, gather_backward, x, index, p.dim, y);
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}

/* ---- scatter_add ---- */

typedef struct scatter_add_ctx {
    tfc_saved index;
    int32_t dim;
} scatter_add_ctx;

static tfc_status scatter_add_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const char *fn = "tfc_scatter_add (backward)";
    const scatter_add_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *index = c->index.t, *dsrc = NULL;
    if (!dy) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg && tfc_node_needs_grad(n, 1)) {
        const tfc_edge *e = &n->in[1];
        TFC_TRY(index_move(gg, fn, MOVE_GATHER, VIEW_FULL, dy, index, c->dim, e->shape, e->ndim, &dsrc));
        gin[1] = dsrc;
    } else if (tfc_node_needs_grad(n, 1)) {
        /* dsrc is zero outside index's corner (those src elements are not read), dy gathered inside it. */
        const tfc_edge *e = &n->in[1];
        TFC_TRY(tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &dsrc));
        tfc_status s = tfc_tensor_fill(dsrc, 0.0);
        if (s == TFC_OK) {
            tfc_index_problem p = {.device = tfc_device_index(dy),
                                   .dim = c->dim,
                                   .x = tfc_sview_of(dy),
                                   .y = corner_view(dsrc, index->shape),
                                   .index = tfc_sview_of(index)};
            s = run_index(fn, dy, 0, &p);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(dsrc);
            return tfc_err_in(fn, s);
        }
        gin[1] = dsrc;
    }
    if (tfc_node_needs_grad(n, 0)) gin[0] = tfc_tensor_retain(dy);
    return TFC_OK;
}

TFC_API tfc_status tfc_scatter_add(tfc_graph *g, const tfc_tensor *x, int32_t dim, const tfc_tensor *index,
                                   const tfc_tensor *src, tfc_tensor **out) {
    const char *fn = "tfc_scatter_add";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    TFC_TRY(check_pair(fn, x, index));
    TFC_CHECK_NOT_NULL(fn, src);
    if (src->dtype != x->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: src is %s but x is %s; they must have one dtype", fn,
                       tfc_dtype_name(src->dtype), tfc_dtype_name(x->dtype));
    {
        const tfc_tensor *ts[2] = {x, src};
        const char *nm[2] = {"x", "src"};
        TFC_TRY(tfc_same_device(fn, ts, nm, 2));
    }
    int32_t d = 0;
    if (x->ndim > 0)
        TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    else if (dim != 0 && dim != -1)
        return tfc_err(TFC_ERR_SHAPE, "%s: dim is %d but x is a scalar (0-d): only 0 or -1", fn, (int)dim);
    TFC_TRY(check_fits(fn, x, d, index, "src", src));
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_on(x, x->shape, x->ndim, x->dtype, &y));
    tfc_index_problem p = {.device = tfc_device_index(x),
                           .dim = x->ndim ? d : -1,
                           .x = tfc_sview_of(y),
                           .y = corner_view(src, index->shape),
                           .index = tfc_sview_of(index),
                           .accumulate = 1};
    tfc_status s = tfc_tensor_copy_view(fn, y, x);
    if (s == TFC_OK) s = run_index(fn, x, 1, &p);
    const tfc_tensor *ins[2] = {x, src};
    if (s == TFC_OK && tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, scatter_add_backward, 2, 1, sizeof(scatter_add_ctx), &n);
        if (s == TFC_OK) {
            scatter_add_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            c->dim = p.dim;
            tfc_node_set_input(n, 0, x);
            tfc_node_set_input(n, 1, src);
            s = tfc_node_keep(n, &c->index, index);
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

/* ---- index_put ---- */

/* values viewed over index's shape (numpy broadcasting: trailing dims aligned, size 1 stretched). */
static tfc_status broadcast_values(const char *fn, const tfc_tensor *values, const tfc_tensor *index, tfc_sview *v) {
    *v = tfc_sview_of(values);
    if (values->ndim > index->ndim)
        return tfc_err(TFC_ERR_SHAPE, "%s: values %s do not broadcast to index %s", fn, SHAPE(values), SHAPE(index));
    int32_t off = index->ndim - values->ndim;
    v->ndim = index->ndim;
    for (int32_t i = index->ndim - 1; i >= 0; i--) {
        int64_t vs = i >= off ? values->shape[i - off] : 1, st = i >= off ? values->strides[i - off] : 0;
        if (vs != index->shape[i] && vs != 1)
            return tfc_err(TFC_ERR_SHAPE, "%s: values %s do not broadcast to index %s", fn, SHAPE(values),
                           SHAPE(index));
        v->shape[i] = index->shape[i];
        v->strides[i] = vs == 1 ? 0 : st;
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_index_put(tfc_graph *g, tfc_tensor *x, const tfc_tensor *index, const tfc_tensor *values,
                                 int32_t accumulate) {
    const char *fn = "tfc_index_put";
    TFC_TRY(check_pair(fn, x, index));
    TFC_CHECK_NOT_NULL(fn, values);
    {
        const tfc_tensor *ts[2] = {x, values};
        const char *nm[2] = {"x", "values"};
        TFC_TRY(tfc_same_device(fn, ts, nm, 2));
    }
    if (values->dtype != x->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: values are %s but x is %s; they must have one dtype", fn,
                       tfc_dtype_name(values->dtype), tfc_dtype_name(x->dtype));
    if (accumulate != 0 && accumulate != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: accumulate is %d; it must be 0 or 1", fn, (int)accumulate);
    if (accumulate) TFC_TRY(tfc_check_float(fn, "x", x));
    TFC_TRY(tfc_tensor_check_writable(fn, "x", x));
    if (tfc_should_record(g, (const tfc_tensor *const *)&x, 1))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: x requires grad and g records; an indexed write into it is not differentiated "
                       "(write with g = NULL, e.g. under no_grad, or index a copy)",
                       fn);
    {
        const tfc_tensor *all[3] = {x, index, values};
        const char *names[3] = {"x", "index", "values"};
        TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));
    }
    tfc_index_problem p = {.device = tfc_device_index(x),
                           .dim = -1,
                           .x = tfc_sview_of(x),
                           .index = tfc_sview_of(index),
                           .accumulate = accumulate};
    TFC_TRY(broadcast_values(fn, values, index, &p.y));
    TFC_TRY(run_index(fn, x, 1, &p));
    tfc_written(x, NULL, NULL);
    return TFC_OK;
}
