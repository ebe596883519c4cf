/*
 * tfc_linear: out[..., N] = x[..., K] · w[K, N] + b[N]   (w in the Conv1D
 * layout [in, out], as GPT-2 stores it; b optional). The leading dims of x
 * fold into the GEMM's M, so the layer is one GEMM however x is batched.
 *   forward:  out rows ← b, then out += x·w (one GEMM, beta = 1): the bias
 *             costs one write pass instead of a second tensor and an add;
 *             on a backend that fuses a bias epilogue (tfc_backend_gemm_fuses,
 *             CUDA) the GEMM adds b itself and there is no extra pass.
 *   backward: dx = dy · wᵀ, dw = x_flatᵀ · dy_flat (GEMMs, transposes as
 *             BLAS flags), db = Σ_rows dy — each only when its input needs it.
 */
#include <limits.h>

#include "ops/linear_bias.h"
#include "ops/matmul_into.h"
#include "ops/op_util.h"

/* A fresh contiguous tensor of `shape` on like's device, and its [rows, cols] alias. */
static tfc_status new_flat(const tfc_tensor *like, const int64_t *shape, int32_t ndim, tfc_dtype dt, int64_t rows,
                           int64_t cols, tfc_tensor **t, tfc_tensor **flat) {
    TFC_TRY(tfc_tensor_new_on(like, shape, ndim, dt, t));
    tfc_status s = tfc_tensor_alias(*t, (int64_t[]){rows, cols}, (int64_t[]){cols, 1}, 2, 0, flat);
    if (s != TFC_OK) {
        tfc_tensor_release(*t);
        *t = NULL;
    }
    return s;
}

/* x is saved only when w needs a gradient, w only when x does. */
typedef struct linear_ctx {
    tfc_saved x, w;
} linear_ctx;

/* create_graph: db = Σ_rows dy, dw = x_flatᵀ · dy_flat, dx = dy · wᵀ as recorded ops on gg. */
static tfc_status linear_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, int64_t M, int64_t K, int64_t N,
                                        tfc_tensor **gin) {
    const linear_ctx *c = n->ctx;
    const tfc_edge *ex = &n->in[0];
    tfc_tensor *dy2 = NULL, *x = NULL, *w = NULL, *x2 = NULL, *t = NULL, *u = NULL;
    tfc_status s = tfc_reshape(gg, dy, (int64_t[]){M, N}, 2, &dy2);
    if (s == TFC_OK && n->n_in == 3 && tfc_node_needs_grad(n, 2)) s = tfc_sum(gg, dy2, (int32_t[]){0}, 1, 0, &gin[2]);
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) {
        s = tfc_node_saved(n, &c->x, &x);
        if (s == TFC_OK) s = tfc_reshape(gg, x, (int64_t[]){M, K}, 2, &x2);
        if (s == TFC_OK) s = tfc_transpose(gg, x2, 0, 1, &t);
        if (s == TFC_OK) s = tfc_matmul(gg, t, dy2, &gin[1]);
        tfc_tensor_release(t);
        t = NULL;
    }
    if (s == TFC_OK && tfc_node_needs_grad(n, 0)) {
        s = tfc_node_saved(n, &c->w, &w);
        if (s == TFC_OK) s = tfc_transpose(gg, w, 0, 1, &t);
        if (s == TFC_OK) s = tfc_matmul(gg, dy2, t, &u);
        if (s == TFC_OK) s = tfc_reshape(gg, u, ex->shape, ex->ndim, &gin[0]);
    }
    tfc_tensor *all[] = {dy2, x, w, x2, t, u};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    return s;
}

static tfc_status linear_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const linear_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    const tfc_edge *ex = &n->in[0], *ew = &n->in[1];
    int64_t K = ew->shape[0], N = ew->shape[1], M = 1;
    for (int32_t d = 0; d + 1 < ex->ndim; d++) M *= ex->shape[d];
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return linear_backward_graph(n, gg, dy, M, K, N, gin);
    tfc_tensor *dy2 = NULL, *t = NULL, *flat = NULL, *xt = NULL;
    TFC_TRY(tfc_reshape(NULL, dy, (int64_t[]){M, N}, 2, &dy2));
    /* db, dw, then dx: dx is consumed next (by the op before this one) and
     * is still in cache when written last. */
    tfc_status s = n->n_in == 3 && tfc_node_needs_grad(n, 2)
        ? tfc_linear_bias_grad("tfc_linear (backward)", dy2, &gin[2])
        : TFC_OK;
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) {
        const tfc_tensor *x = c->x.t;
        tfc_tensor *x2 = NULL;
        s = tfc_reshape(NULL, x, (int64_t[]){M, K}, 2, &x2);
        if (s == TFC_OK) s = tfc_transpose(NULL, x2, 0, 1, &xt);
        if (s == TFC_OK) s = tfc_tensor_new_on(dy, ew->shape, 2, dy->dtype, &t);
        if (s == TFC_OK) s = tfc_matmul_into_or_zero("tfc_linear", t, xt, dy2);
        if (s == TFC_OK)
            gin[1] = t;
        else
            tfc_tensor_release(t);
        tfc_tensor_release(x2);
        tfc_tensor_release(xt);
        t = xt = NULL;
    }
    if (s == TFC_OK && tfc_node_needs_grad(n, 0)) {
        const tfc_tensor *w = c->w.t;
        s = new_flat(dy, ex->shape, ex->ndim, dy->dtype, M, K, &t, &flat);
        if (s == TFC_OK) s = tfc_transpose(NULL, w, 0, 1, &xt);
        if (s == TFC_OK) s = tfc_matmul_into_or_zero("tfc_linear", flat, dy2, xt);
        if (s == TFC_OK)
            gin[0] = t;
        else
            tfc_tensor_release(t);
        tfc_tensor_release(flat);
        tfc_tensor_release(xt);
    }
    tfc_tensor_release(dy2);
    return s;
}

static tfc_status check_args(const char *fn, const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *b) {
    TFC_TRY(tfc_check_float(fn, "x", x));
    TFC_TRY(tfc_check_float(fn, "w", w));
    if (b) TFC_TRY(tfc_check_float(fn, "b", b));
    {
        const tfc_tensor *ts[3] = {x, w, b};
        const char *names[3] = {"x", "w", "b"};
        TFC_TRY(tfc_same_device(fn, ts, names, 3));
    }
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return tfc_err(TFC_ERR_DTYPE, "%s: x is %s, w is %s%s%s: dtypes differ", fn, tfc_dtype_name(x->dtype),
                       tfc_dtype_name(w->dtype), b ? ", b is " : "", b ? tfc_dtype_name(b->dtype) : "");
    if (x->ndim < 1) return tfc_err(TFC_ERR_SHAPE, "%s: x is a scalar; need x [..., in]", fn);
    if (w->ndim != 2) return tfc_err(TFC_ERR_SHAPE, "%s: w is %s; need w [in, out] (the Conv1D layout)", fn, SHAPE(w));
    if (x->shape[x->ndim - 1] != w->shape[0])
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s, w is %s: x's last dim %lld must equal w's in dim %lld", fn,
                       SHAPE(x), SHAPE(w), (long long)x->shape[x->ndim - 1], (long long)w->shape[0]);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[1]))
        return tfc_err(TFC_ERR_SHAPE, "%s: b is %s, w is %s: need b [%lld]", fn, SHAPE(b), SHAPE(w),
                       (long long)w->shape[1]);
    if (w->shape[0] > INT_MAX || w->shape[1] > INT_MAX)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: w is %s: matrix dims above 2^31 are not supported", fn, SHAPE(w));
    return TFC_OK;
}

TFC_API tfc_status tfc_linear(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *b,
                              tfc_tensor **out) {
    const char *fn = "tfc_linear";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(check_args(fn, x, w, b));
    int64_t K = w->shape[0], N = w->shape[1], M = 1, oshape[TFC_MAX_DIMS];
    for (int32_t d = 0; d + 1 < x->ndim; d++) M *= oshape[d] = x->shape[d];
    oshape[x->ndim - 1] = N;
    tfc_tensor *x2 = NULL, *r = NULL, *r2 = NULL;
    tfc_status s = tfc_reshape(NULL, x, (int64_t[]){M, K}, 2, &x2);
    if (s == TFC_OK) s = new_flat(x, oshape, x->ndim, x->dtype, M, N, &r, &r2);
    if (s == TFC_OK) s = tfc_linear_bias_forward(fn, r2, x2, w, b);
    tfc_tensor_release(x2);
    tfc_tensor_release(r2);
    const tfc_tensor *ins[3] = {x, w, b};
    int32_t n_in = b ? 3 : 2;
    if (s == TFC_OK && tfc_should_record(g, ins, n_in)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, linear_backward, n_in, 1, sizeof(linear_ctx), &n);
        if (s == TFC_OK) {
            linear_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            for (int32_t i = 0; i < n_in; i++) tfc_node_set_input(n, i, ins[i]);
            s = tfc_node_keep(n, &c->x, tfc_node_needs_grad(n, 1) ? x : NULL);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->w, tfc_node_needs_grad(n, 0) ? w : NULL);
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
