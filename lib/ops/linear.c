/*
 * tfc_linear: out[..., N] = x[..., K] · w[K, N] + b[N]   (w in the Conv1D
 * layout [in, out], as GPT-2 stores it; b optional). The leading dims of x
 * fold into the GEMM's M, so the layer is one GEMM however x is batched.
 *   forward:  out rows ← b, then out += x·w (one GEMM, beta = 1): the bias
 *             costs one write pass instead of a second tensor and an add;
 *             on a backend that fuses a bias epilogue (gemm_epilogues,
 *             CUDA) the GEMM adds b itself and there is no extra pass.
 *   backward: dx = dy · wᵀ, dw = x_flatᵀ · dy_flat (GEMMs, transposes as
 *             BLAS flags), db = Σ_rows dy — each only when its input needs it.
 */
#include <limits.h>

#include "ops/matmul_into.h"
#include "ops/op_util.h"
#include "ops/operands.h"

/* out = a · b, or zeros when the inner dimension is empty. */
static tfc_status gemm_or_zero(tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b) {
    if (tfc_numel(out) == 0) return TFC_OK;
    if (a->shape[a->ndim - 1] == 0) return tfc_tensor_fill(out, 0.0);
    return tfc_matmul_into("tfc_linear", out, a, b, 0.0);
}

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

/* db = column sums of dy2 [rows, N], read with unit column stride. */
static tfc_status bias_grad(const tfc_tensor *dy2, tfc_tensor **db) {
    const char *fn = "tfc_linear (backward)";
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, dy2, &be));
    int64_t rows = dy2->shape[0], N = dy2->shape[1];
    tfc_tensor *d = NULL, *r = NULL;
    if (N > 1 && dy2->strides[1] != 1)
        TFC_TRY(tfc_make_contiguous(dy2, &d));
    else
        d = tfc_tensor_retain((tfc_tensor *)dy2);
    tfc_status s = tfc_tensor_new_on(dy2, &N, 1, dy2->dtype, &r);
    if (s == TFC_OK) {
        tfc_bias_problem p = {.device = tfc_device_index(d),
                              .dtype = d->dtype,
                              .rows = rows,
                              .n = N,
                              .ld = rows > 1 ? d->strides[0] : N,
                              .dy = tfc_data(d),
                              .db = tfc_data(r)};
        s = TFC_BACKEND_RUN(fn, be, bias_grad, &p);
    }
    if (s == TFC_OK)
        *db = r;
    else
        tfc_tensor_release(r);
    tfc_tensor_release(d);
    return tfc_err_in(fn, s);
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
    tfc_status s = n->n_in == 3 && tfc_node_needs_grad(n, 2) ? bias_grad(dy2, &gin[2]) : TFC_OK;
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) {
        const tfc_tensor *x = c->x.t;
        tfc_tensor *x2 = NULL;
        s = tfc_reshape(NULL, x, (int64_t[]){M, K}, 2, &x2);
        if (s == TFC_OK) s = tfc_transpose(NULL, x2, 0, 1, &xt);
        if (s == TFC_OK) s = tfc_tensor_new_on(dy, ew->shape, 2, dy->dtype, &t);
        if (s == TFC_OK) s = gemm_or_zero(t, xt, dy2);
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
        if (s == TFC_OK) s = gemm_or_zero(flat, dy2, xt);
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

/* out2 [M, N] = bias rows (or nothing) + x2 · w. */
static tfc_status forward(tfc_tensor *out2, const tfc_tensor *x2, const tfc_tensor *w, const tfc_tensor *b) {
    const char *fn = "tfc_linear";
    int64_t M = out2->shape[0], N = out2->shape[1];
    if (M * N == 0) return TFC_OK;
    if (!b) return gemm_or_zero(out2, x2, w);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, out2, &be));
    if ((be->gemm_epilogues & (1u << TFC_GEMM_EPI_BIAS)) && x2->shape[1] > 0) {
        /* One GEMM whose epilogue adds the bias (cuBLASLt): no bias_rows pass over out. */
        return tfc_matmul_into_bias(fn, out2, x2, w, 0.0, b);
    }
    tfc_bias_problem p = {
        .device = tfc_device_index(out2), .dtype = out2->dtype, .rows = M, .n = N, .ld = N, .y = tfc_data(out2)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, b, &p.b);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, bias_rows, &p);
    tfc_operands_release(&o);
    TFC_TRY(s);
    if (x2->shape[1] == 0) return TFC_OK;
    return tfc_matmul_into("tfc_linear", out2, x2, w, 1.0);
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
    if (s == TFC_OK) s = forward(r2, x2, w, b);
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
