/*
 * tfc_linear_bf16: the autocast Linear of bf16 mixed-precision training.
 *   out[..., N] = bf16(x) · bf16(w) + b, products summed in f32, out f32.
 * x, w (the f32 master weight) and b are f32; the GEMM operands are rounded
 * to bf16 (round-to-nearest-even) as they enter the GEMM, which is all that
 * torch.autocast('cpu', torch.bfloat16) changes about a Linear. The rounded
 * weight is the caller's cached copy wb when given (the model refreshes it
 * once per optimizer step, not per GEMM), else rounded here.
 *   backward: dyb = bf16(dy); dx = dyb · wbᵀ and dw = xbᵀ · dyb, both with
 *             f32 accumulation and f32 results (so w's gradient accumulates
 *             in f32 on the master weight); db = Σ_rows dy in f32.
 * The bf16 copy of x is what backward keeps: half the bytes of saving x.
 *
 * The operands take the storage form the device's GEMM asks for
 * (tfc_backend_bf16_operands, for x's rows): bf16 tensors where it
 * multiplies bf16 (CUDA's tensor cores, the CPU's small-M decode kernel),
 * or bf16 values in f32 storage (the ROUND_BF16 map, one pass) for the f32
 * GEMM where it would widen bf16 to f32 anyway (the CPU from 33 rows on):
 * identical products and sums, without writing bf16 and widening it again
 * for every GEMM that reads it. In the f32 form backward keeps the rounded
 * x in f32 (the bytes of saving x, as f32 training does) and widens the
 * bf16 weight copy.
 * This is the one place the mixed-precision Linear formula lives; the GPT's
 * autocast (lib/model/gpt_autocast.c) calls it for every Linear.
 */
#include <limits.h>

#include "ops/linear_bf16.h"
#include "ops/linear_bias.h"
#include "ops/matmul_into.h"
#include "ops/op_util.h"

static const char *const FN = "tfc_linear_bf16";

/* A bf16 copy of t (round-to-nearest-even), no graph. */
static tfc_status to_bf16(const tfc_tensor *t, tfc_tensor **out) { return tfc_cast(NULL, t, TFC_DTYPE_BF16, out); }

/*
 * The GEMM operand bf16(t) in the form the device's GEMM takes: bf16
 * storage, or (f32) the same values in f32 storage: an f32 t rounded by
 * the ROUND_BF16 map, a bf16 t (a weight copy) widened exactly.
 */
static tfc_status operand(const tfc_tensor *t, int f32, tfc_tensor **out) {
    if (!f32) return t->dtype == TFC_DTYPE_BF16 ? (*out = tfc_tensor_retain((tfc_tensor *)t), TFC_OK) : to_bf16(t, out);
    if (t->dtype != TFC_DTYPE_F32) return tfc_cast(NULL, t, TFC_DTYPE_F32, out);
    return tfc_map_new(FN, TFC_MAP_ROUND_BF16, t->shape, t->ndim, TFC_DTYPE_F32, t, NULL, NULL, 0.0, out);
}

typedef struct linear_bf16_ctx {
    tfc_saved xb, wb; /* the rounded operands: xb when w needs a gradient, wb when x does */
    int32_t f32;      /* operand()'s form: 1 = bf16 values in f32 storage */
} linear_bf16_ctx;

static tfc_status backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const linear_bf16_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    const tfc_edge *ex = &n->in[0], *ew = &n->in[1];
    /* N: dy's columns (the padded width for tfc_linear_bf16_padded), Nw ≤ N: w's */
    int64_t K = ew->shape[0], Nw = ew->shape[1], N = dy->shape[dy->ndim - 1], M = 1;
    for (int32_t d = 0; d + 1 < ex->ndim; d++) M *= ex->shape[d];
    tfc_tensor *dy2 = NULL, *dyb = NULL, *t = NULL, *flat = NULL, *tr = NULL;
    tfc_status s = tfc_reshape(NULL, dy, (int64_t[]){M, N}, 2, &dy2);
    if (s == TFC_OK && n->n_in == 3 && tfc_node_needs_grad(n, 2)) s = tfc_linear_bias_grad(FN, dy2, &gin[2]);
    if (s == TFC_OK && (tfc_node_needs_grad(n, 0) || tfc_node_needs_grad(n, 1))) s = operand(dy2, c->f32, &dyb);
    if (s == TFC_OK && tfc_node_needs_grad(n, 1)) { /* dw [K, N] = xbᵀ · dyb */
        s = tfc_transpose(NULL, c->xb.t, 0, 1, &tr);
        if (s == TFC_OK) s = tfc_tensor_new_on(dy, (int64_t[]){K, N}, 2, TFC_DTYPE_F32, &t);
        if (s == TFC_OK) s = tfc_matmul_into_or_zero(FN, t, tr, dyb);
        if (s == TFC_OK && Nw < N) { /* padded: w's columns only, a view with row stride N */
            tfc_tensor *v = NULL;
            s = tfc_narrow(NULL, t, 1, 0, Nw, &v);
            tfc_tensor_release(t);
            t = v;
        }
        if (s == TFC_OK)
            gin[1] = t;
        else
            tfc_tensor_release(t);
        tfc_tensor_release(tr);
        t = tr = NULL;
    }
    if (s == TFC_OK && tfc_node_needs_grad(n, 0)) { /* dx [M, K] = dyb · wbᵀ, in x's shape */
        s = tfc_tensor_new_on(dy, ex->shape, ex->ndim, TFC_DTYPE_F32, &t);
        if (s == TFC_OK) s = tfc_tensor_alias(t, (int64_t[]){M, K}, (int64_t[]){K, 1}, 2, 0, &flat);
        tfc_tensor *wop = NULL;
        /* wb is bf16, or (f32 form, no cached copy given) w already rounded into f32 */
        if (s == TFC_OK)
            s = c->wb.t->dtype == TFC_DTYPE_F32 ? (wop = tfc_tensor_retain(c->wb.t), TFC_OK)
                                                : operand(c->wb.t, c->f32, &wop);
        if (s == TFC_OK) s = tfc_transpose(NULL, wop, 0, 1, &tr);
        if (s == TFC_OK) s = tfc_matmul_into_or_zero(FN, flat, dyb, tr);
        tfc_tensor_release(wop);
        if (s == TFC_OK)
            gin[0] = t;
        else
            tfc_tensor_release(t);
        tfc_tensor_release(flat);
        tfc_tensor_release(tr);
    }
    tfc_tensor_release(dyb);
    tfc_tensor_release(dy2);
    return s;
}

static tfc_status need_f32(const char *arg, const tfc_tensor *t) {
    if (t->dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; need f32 (the f32 operand the GEMM rounds to bf16)", FN, arg,
                       tfc_dtype_name(t->dtype), SHAPE(t));
    return TFC_OK;
}

static tfc_status check_args(const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *wb, const tfc_tensor *b,
                             int padded) {
    TFC_CHECK_NOT_NULL(FN, x);
    TFC_CHECK_NOT_NULL(FN, w);
    TFC_TRY(need_f32("x", x));
    TFC_TRY(need_f32("w", w));
    if (b) TFC_TRY(need_f32("b", b));
    if (wb && wb->dtype != TFC_DTYPE_BF16)
        return tfc_err(TFC_ERR_DTYPE, "%s: w_bf16 is %s %s; need bf16 (w rounded to bf16) or NULL", FN,
                       tfc_dtype_name(wb->dtype), SHAPE(wb));
    {
        const tfc_tensor *ts[4] = {x, w, wb, b};
        const char *names[4] = {"x", "w", "w_bf16", "b"};
        TFC_TRY(tfc_same_device(FN, ts, names, 4));
    }
    if (x->ndim < 1) return tfc_err(TFC_ERR_SHAPE, "%s: x is a scalar; need x [..., in]", FN);
    if (w->ndim != 2) return tfc_err(TFC_ERR_SHAPE, "%s: w is %s; need w [in, out] (the Conv1D layout)", FN, SHAPE(w));
    if (x->shape[x->ndim - 1] != w->shape[0])
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s, w is %s: x's last dim %lld must equal w's in dim %lld", FN,
                       SHAPE(x), SHAPE(w), (long long)x->shape[x->ndim - 1], (long long)w->shape[0]);
    if (padded && !wb) return tfc_err(TFC_ERR_INVALID_ARG, "%s: w_bf16 is NULL; the padded form needs it", FN);
    if (wb &&
        (wb->ndim != 2 || wb->shape[0] != w->shape[0] ||
         (padded ? wb->shape[1] < w->shape[1] : wb->shape[1] != w->shape[1])))
        return tfc_err(TFC_ERR_SHAPE, "%s: w_bf16 is %s, w is %s: need w's shape%s", FN, SHAPE(wb), SHAPE(w),
                       padded ? " with at least as many columns" : "");
    const int64_t nb = padded ? wb->shape[1] : w->shape[1]; /* the output's columns */
    if (b && (b->ndim != 1 || b->shape[0] != nb))
        return tfc_err(TFC_ERR_SHAPE, "%s: b is %s, w is %s: need b [%lld]", FN, SHAPE(b), SHAPE(w), (long long)nb);
    if (w->shape[0] > INT_MAX || nb > INT_MAX)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: w is %s: matrix dims above 2^31 are not supported", FN, SHAPE(w));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(FN, x, &be));
    if (!tfc_backend_gemm_takes(be, TFC_DTYPE_BF16)) {
        char dev[32];
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: x is on %s, whose backend has no bf16 GEMM", FN,
                       tfc_device_str(x, dev, sizeof dev));
    }
    return TFC_OK;
}

/* padded: w_bf16 may be wider than w (tfc_linear_bf16_padded); the output has w_bf16's columns. */
static tfc_status linear_bf16(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *w_bf16,
                              const tfc_tensor *b, int padded, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(FN, out);
    TFC_TRY(check_args(x, w, w_bf16, b, padded));
    int64_t K = w->shape[0], N = padded ? w_bf16->shape[1] : w->shape[1], M = 1, oshape[TFC_MAX_DIMS];
    for (int32_t d = 0; d + 1 < x->ndim; d++) M *= oshape[d] = x->shape[d];
    oshape[x->ndim - 1] = N;
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(FN, x, &be));
    const int f32 = tfc_backend_bf16_operands(be, M) == TFC_DTYPE_F32;
    /* wb: the weight kept for backward (the caller's bf16 copy, else w rounded here); wop: the GEMM's form of it */
    tfc_tensor *x2 = NULL, *xb = NULL, *wb = NULL, *wop = NULL, *r = NULL, *r2 = NULL;
    tfc_status s = tfc_reshape(NULL, x, (int64_t[]){M, K}, 2, &x2);
    if (s == TFC_OK) s = operand(x2, f32, &xb);
    if (s == TFC_OK) s = operand(w_bf16 ? w_bf16 : w, f32, &wop);
    if (s == TFC_OK) wb = tfc_tensor_retain(w_bf16 ? (tfc_tensor *)w_bf16 : wop);
    if (s == TFC_OK) s = tfc_tensor_new_on(x, oshape, x->ndim, TFC_DTYPE_F32, &r);
    if (s == TFC_OK) s = tfc_tensor_alias(r, (int64_t[]){M, N}, (int64_t[]){N, 1}, 2, 0, &r2);
    if (s == TFC_OK) s = tfc_linear_bias_forward(FN, r2, xb, wop, b);
    tfc_tensor_release(x2);
    tfc_tensor_release(wop);
    tfc_tensor_release(r2);
    const tfc_tensor *ins[3] = {x, w, b};
    int32_t n_in = b ? 3 : 2;
    if (s == TFC_OK && tfc_should_record(g, ins, n_in)) {
        tfc_node *n;
        s = tfc_node_new(g, FN, backward, n_in, 1, sizeof(linear_bf16_ctx), &n);
        if (s == TFC_OK) {
            linear_bf16_ctx *c = n->ctx;
            c->f32 = f32;
            for (int32_t i = 0; i < n_in; i++) tfc_node_set_input(n, i, ins[i]);
            s = tfc_node_keep(n, &c->xb, tfc_node_needs_grad(n, 1) ? xb : NULL);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->wb, tfc_node_needs_grad(n, 0) ? wb : NULL);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, r);
        }
    }
    tfc_tensor_release(xb);
    tfc_tensor_release(wb);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(FN, s);
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_linear_bf16(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *w_bf16,
                                   const tfc_tensor *b, tfc_tensor **out) {
    return linear_bf16(g, x, w, w_bf16, b, 0, out);
}

tfc_status tfc_linear_bf16_padded(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *w_bf16,
                                  const tfc_tensor *b, tfc_tensor **out) {
    return linear_bf16(g, x, w, w_bf16, b, 1, out);
}

int64_t tfc_gemm_pad_cols(const tfc_tensor *t, int64_t n) {
    const tfc_backend *be = NULL;
    if (!t || tfc_tensor_backend("tfc_gemm_pad_cols", t, &be) != TFC_OK) {
        tfc_clear_error();
        return n;
    }
    return tfc_backend_pad_cols(be, n);
}
