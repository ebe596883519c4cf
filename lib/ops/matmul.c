/*
 * Matrix products, numpy.matmul semantics:
 *   out[..., M, N] = a[..., M, K] · b[..., K, N]   (batch dims broadcast)
 * Backward (the explicit door, tfc_matmul_backward, and the graph's):
 *   da = dout · bᵀ   summed over batch dims a was broadcast along
 *   db = aᵀ · dout   summed over batch dims b was broadcast along
 * Every transpose is a stride view handed to BLAS as a flag. When b has no
 * batch dims, the batch folds into M: one GEMM of [batch·M, K] · [K, N]
 * instead of many small ones (and db = a_flatᵀ · dout_flat in one GEMM).
 */
#include <limits.h>
#include <string.h>

#include "ops/matmul_into.h"
#include "ops/op_util.h"
#include "ops/operands.h"

/* 1 when the GEMM can address t's last two dims as they are (rows or columns contiguous). */
static int gemm_ok(const tfc_tensor *t) {
    int tr;
    int64_t ld;
    int32_t n = t->ndim;
    return tfc_gemm_layout(t->shape[n - 2], t->shape[n - 1], t->strides[n - 2], t->strides[n - 1], &tr, &ld);
}

/*
 * The batch dims of out that one gemm call covers: the innermost run of
 * dims over which a, b and out each advance by one stride per item (dims
 * [*first, nb)). The dims before it are looped over.
 */
static int64_t batch_run(const tfc_tensor *out, const int64_t *as, const int64_t *bs, int32_t nb, int32_t *first,
                         int64_t *sa, int64_t *sb) {
    int64_t count = 1;
    *first = nb, *sa = 0, *sb = 0;
    for (int32_t d = nb - 1; d >= 0; d--) {
        int64_t size = out->shape[d];
        if (size == 1) {
            *first = d;
            continue;
        }
        if (count == 1) {
            *sa = as[d], *sb = bs[d];
        } else if (as[d] != *sa * count || bs[d] != *sb * count) {
            break;
        }
        count *= size;
        *first = d;
    }
    return count;
}

/* Declared in ops/matmul_into.h. */
tfc_status tfc_matmul_into(const char *fn, tfc_tensor *out, const tfc_tensor *a_in, const tfc_tensor *b_in,
                           double beta) {
    return tfc_matmul_into_bias(fn, out, a_in, b_in, beta, NULL);
}

/* Declared in ops/matmul_into.h. */
int tfc_gemm_allow_tf32(tfc_dtype dtype) {
    return dtype == TFC_DTYPE_F32 && tfc_get_float32_matmul_precision() != TFC_MATMUL_PRECISION_HIGHEST;
}

/* Declared in ops/matmul_into.h. */
tfc_status tfc_matmul_into_or_zero(const char *fn, tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b) {
    if (tfc_numel(out) == 0) return TFC_OK;
    if (a->shape[a->ndim - 1] == 0) return tfc_err_in(fn, tfc_tensor_fill(out, 0.0));
    return tfc_matmul_into(fn, out, a, b, 0.0);
}

/* Declared in ops/matmul_into.h. */
tfc_status tfc_matmul_into_bias(const char *fn, tfc_tensor *out, const tfc_tensor *a_in, const tfc_tensor *b_in,
                                double beta, const tfc_tensor *bias_t) {
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, out, &be));
    tfc_tensor *a = NULL, *b = NULL;
    tfc_operands o = {0};
    const void *bias = NULL;
    tfc_status s = bias_t ? tfc_operand(&o, bias_t, &bias) : TFC_OK;
    if (s == TFC_OK)
        s = gemm_ok(a_in) ? (a = tfc_tensor_retain((tfc_tensor *)a_in), TFC_OK) : tfc_make_contiguous(a_in, &a);
    if (s == TFC_OK)
        s = gemm_ok(b_in) ? (b = tfc_tensor_retain((tfc_tensor *)b_in), TFC_OK) : tfc_make_contiguous(b_in, &b);
    if (s != TFC_OK) {
        tfc_tensor_release(a);
        tfc_operands_release(&o);
        return tfc_err_in(fn, s);
    }
    int32_t nd = out->ndim, nb = nd - 2;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[a->ndim - 1];
    tfc_gemm_problem p = {.device = tfc_device_index(out),
                          .dtype = a->dtype,
                          .c_f32 = out->dtype != a->dtype,
                          .M = M,
                          .N = N,
                          .K = K,
                          .batch = 1,
                          .alpha = 1.0,
                          .beta = beta,
                          .ldc = N,
                          .stride_c = M * N,
                          .bias = bias,
                          .epilogue = bias ? TFC_GEMM_EPI_BIAS : TFC_GEMM_EPI_NONE,
                          .allow_tf32 = tfc_gemm_allow_tf32(a->dtype)};
    int ta, tb;
    tfc_gemm_layout(M, K, a->strides[a->ndim - 2], a->strides[a->ndim - 1], &ta, &p.lda);
    tfc_gemm_layout(K, N, b->strides[b->ndim - 2], b->strides[b->ndim - 1], &tb, &p.ldb);
    p.trans_a = ta, p.trans_b = tb;
    /* Batch strides of a and b broadcast to out's batch shape. */
    int64_t as[TFC_MAX_DIMS] = {0}, bs[TFC_MAX_DIMS] = {0}, batch = 1;
    for (int32_t d = 0; d < nb; d++) {
        int32_t da = d - (nb - (a->ndim - 2)), db = d - (nb - (b->ndim - 2));
        as[d] = (da >= 0 && a->shape[da] != 1) ? a->strides[da] : 0;
        bs[d] = (db >= 0 && b->shape[db] != 1) ? b->strides[db] : 0;
        batch *= out->shape[d];
    }
    const int64_t es = (int64_t)tfc_dtype_size(a->dtype), esc = (int64_t)tfc_dtype_size(out->dtype);
    char *pa = tfc_data(a), *pb = tfc_data(b), *pc = tfc_data(out);
    /* Fold the batch into M when b is shared and a's rows run on across batches: one tall GEMM. */
    int fold = !ta && batch > 1;
    int64_t expect = M * p.lda;
    for (int32_t d = nb - 1; d >= 0 && fold; d--) {
        if (bs[d] != 0 || (out->shape[d] > 1 && as[d] != expect)) fold = 0;
        expect *= out->shape[d];
    }
    if (fold || batch <= 1) {
        p.M = fold ? M * batch : M;
        p.a = pa, p.b = pb, p.c = pc;
        s = batch == 0 ? TFC_OK : TFC_BACKEND_RUN(fn, be, gemm, &p);
    } else {
        int32_t first;
        p.batch = batch_run(out, as, bs, nb, &first, &p.stride_a, &p.stride_b);
        for (int64_t i = 0; i < batch / p.batch && s == TFC_OK; i++) {
            int64_t oa = 0, ob = 0, oc = i * p.batch * M * N, rem = i;
            for (int32_t d = first - 1; d >= 0; d--) {
                int64_t idx = rem % out->shape[d];
                rem /= out->shape[d];
                oa += idx * as[d];
                ob += idx * bs[d];
            }
            p.a = pa + oa * es, p.b = pb + ob * es, p.c = pc + oc * esc;
            s = TFC_BACKEND_RUN(fn, be, gemm, &p);
        }
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* Shapes of a matmul after 1-D promotion; fails with the DESIGN message. */
typedef struct mm_shapes {
    int64_t out[TFC_MAX_DIMS]; /* batch + [M, N] */
    int32_t nout;
    int64_t final_shape[TFC_MAX_DIMS]; /* with promoted dims removed */
    int32_t nfinal;
} mm_shapes;

static tfc_status promote(const char *fn, const tfc_tensor *t, int is_b, tfc_tensor **out) {
    if (t->ndim == 0)
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is a scalar; matmul needs at least 1-D", fn, is_b ? "b" : "a");
    if (t->ndim > 1) {
        *out = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    int64_t shape[2] = {is_b ? t->shape[0] : 1, is_b ? 1 : t->shape[0]};
    int64_t strides[2] = {is_b ? t->strides[0] : 0, is_b ? 0 : t->strides[0]};
    return tfc_tensor_alias(t, shape, strides, 2, t->offset, out);
}

static tfc_status mm_plan(const char *fn, const tfc_tensor *a0, const tfc_tensor *b0, const tfc_tensor *a,
                          const tfc_tensor *b, mm_shapes *p) {
    int64_t K = a->shape[a->ndim - 1], K2 = b->shape[b->ndim - 2];
    if (K != K2)
        return tfc_err(TFC_ERR_SHAPE, "%s: a is %s, b is %s: inner dimensions %lld and %lld differ", fn, SHAPE(a0),
                       SHAPE(b0), (long long)K, (long long)K2);
    int32_t na = a->ndim - 2, nbb = b->ndim - 2, nb = na > nbb ? na : nbb;
    for (int32_t d = 0; d < nb; d++) {
        int32_t ia = d - (nb - na), ib = d - (nb - nbb);
        int64_t x = ia >= 0 ? a->shape[ia] : 1, y = ib >= 0 ? b->shape[ib] : 1;
        if (x != y && x != 1 && y != 1)
            return tfc_err(TFC_ERR_SHAPE, "%s: a is %s, b is %s: batch dimensions %lld and %lld do not broadcast", fn,
                           SHAPE(a0), SHAPE(b0), (long long)x, (long long)y);
        p->out[d] = x == 1 ? y : x;
    }
    p->out[nb] = a->shape[a->ndim - 2];
    p->out[nb + 1] = b->shape[b->ndim - 1];
    p->nout = nb + 2;
    if (p->out[nb] > INT_MAX || p->out[nb + 1] > INT_MAX || K > INT_MAX)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: matrix dims above 2^31 are not supported", fn);
    p->nfinal = 0;
    for (int32_t d = 0; d < nb; d++) p->final_shape[p->nfinal++] = p->out[d];
    if (a0->ndim > 1) p->final_shape[p->nfinal++] = p->out[nb];
    if (b0->ndim > 1) p->final_shape[p->nfinal++] = p->out[nb + 1];
    return TFC_OK;
}

/* x is a dtype the gemm entry of its device's backend takes (bf16 too on the CPU, whose other ops take f32/f64). */
static tfc_status check_gemm_dtype(const char *fn, const char *arg, const tfc_tensor *x) {
    if (!x) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    if (!tfc_backend_gemm_takes(b, x->dtype)) {
        char dev[32];
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; matmul needs %s on %s", fn, arg, tfc_dtype_name(x->dtype),
                       SHAPE(x), tfc_dtype_mask_list(b->caps.gemm_dtypes, "or"), tfc_device_str(x, dev, sizeof dev));
    }
    return TFC_OK;
}

static tfc_status check_operands(const char *fn, const tfc_tensor *a, const tfc_tensor *b) {
    TFC_TRY(check_gemm_dtype(fn, "a", a));
    TFC_TRY(check_gemm_dtype(fn, "b", b));
    return tfc_check_same(fn, a, b);
}

/*
 * The dtype to compute a gradient in before it is summed over broadcast
 * dims: dout's, unless the backend's sum cannot take it (bf16 on the CPU),
 * then f32 (the GEMM's f32 accumulation, summed, rounded to bf16 once).
 */
static tfc_dtype sum_dtype(const tfc_tensor *dout, const int64_t *full, int32_t nd, const tfc_tensor *operand) {
    int same = nd == operand->ndim;
    for (int32_t i = 0; same && i < nd; i++) same = full[i] == operand->shape[i];
    const tfc_backend *b;
    if (same || tfc_tensor_backend("tfc_matmul", dout, &b) != TFC_OK || tfc_backend_takes(b, dout->dtype))
        return dout->dtype;
    return TFC_DTYPE_F32;
}

/* tfc_sum_to_shape, then back to dtype when the sum ran in f32 (sum_dtype). Consumes full. */
static tfc_status sum_to_operand(tfc_tensor *full, const tfc_tensor *operand, tfc_dtype dtype, tfc_tensor **out) {
    tfc_tensor *summed;
    TFC_TRY(tfc_sum_to_shape(full, operand->shape, operand->ndim, &summed));
    if (summed->dtype == dtype) {
        *out = summed;
        return TFC_OK;
    }
    tfc_status s = tfc_cast(NULL, summed, dtype, out);
    tfc_tensor_release(summed);
    return s;
}

/* Gradient of one operand at the broadcast shape, summed to the operand's. */
static tfc_status mm_grad(const char *fn, const tfc_tensor *dout, const tfc_tensor *a, const tfc_tensor *b, int want_a,
                          tfc_tensor **out) {
    /* a, b promoted to >= 2-D; dout has the promoted out shape. */
    tfc_tensor *bt = NULL, *at = NULL, *full = NULL;
    tfc_status s;
    int32_t nd = dout->ndim;
    if (want_a) {
        s = tfc_transpose(NULL, b, -1, -2, &bt);
        if (s == TFC_OK) {
            int64_t shape[TFC_MAX_DIMS];
            memcpy(shape, dout->shape, sizeof(int64_t) * (size_t)nd);
            shape[nd - 1] = a->shape[a->ndim - 1];
            s = tfc_tensor_new_on(dout, shape, nd, sum_dtype(dout, shape, nd, a), &full);
            if (s == TFC_OK) s = tfc_matmul_into(fn, full, dout, bt, 0.0);
        }
        tfc_tensor_release(bt);
        if (s == TFC_OK) return sum_to_operand(full, a, dout->dtype, out);
    } else if (b->ndim == 2 && nd > 2) {
        /* Shared weight: fold the batch, db = a_flatᵀ · dout_flat. */
        tfc_tensor *af = NULL, *df = NULL;
        int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
        int64_t rows = tfc_numel(dout) / dout->shape[nd - 1];
        tfc_tensor *aexp = NULL;
        int64_t ashape[TFC_MAX_DIMS];
        memcpy(ashape, dout->shape, sizeof(int64_t) * (size_t)nd);
        ashape[nd - 1] = K;
        (void)M;
        s = tfc_expand(NULL, a, ashape, nd, &aexp);
        if (s == TFC_OK) s = tfc_reshape(NULL, aexp, (int64_t[]){rows, K}, 2, &af);
        if (s == TFC_OK) s = tfc_reshape(NULL, dout, (int64_t[]){rows, dout->shape[nd - 1]}, 2, &df);
        if (s == TFC_OK) s = tfc_transpose(NULL, af, 0, 1, &at);
        if (s == TFC_OK) s = tfc_tensor_new_on(dout, b->shape, 2, dout->dtype, &full);
        if (s == TFC_OK) s = tfc_matmul_into(fn, full, at, df, 0.0);
        tfc_tensor_release(aexp);
        tfc_tensor_release(af);
        tfc_tensor_release(df);
        tfc_tensor_release(at);
        if (s == TFC_OK) {
            *out = full;
            return TFC_OK;
        }
    } else {
        s = tfc_transpose(NULL, a, -1, -2, &at);
        if (s == TFC_OK) {
            int64_t shape[TFC_MAX_DIMS];
            memcpy(shape, dout->shape, sizeof(int64_t) * (size_t)nd);
            shape[nd - 2] = b->shape[b->ndim - 2];
            s = tfc_tensor_new_on(dout, shape, nd, sum_dtype(dout, shape, nd, b), &full);
            if (s == TFC_OK) s = tfc_matmul_into(fn, full, at, dout, 0.0);
        }
        tfc_tensor_release(at);
        if (s == TFC_OK) return sum_to_operand(full, b, dout->dtype, out);
    }
    tfc_tensor_release(full);
    return tfc_err_in(fn, s);
}

/* Gradients for the original (unpromoted) operands. */
static tfc_status matmul_grads(const char *fn, const tfc_tensor *dout0, const tfc_tensor *a0, const tfc_tensor *b0,
                               tfc_tensor **da, tfc_tensor **db) {
    tfc_tensor *a = NULL, *b = NULL, *dout = NULL;
    mm_shapes p;
    tfc_status s = promote(fn, a0, 0, &a);
    if (s == TFC_OK) s = promote(fn, b0, 1, &b);
    if (s == TFC_OK) s = mm_plan(fn, a0, b0, a, b, &p);
    if (s == TFC_OK) s = tfc_reshape(NULL, dout0, p.out, p.nout, &dout);
    tfc_tensor *ga = NULL, *gb = NULL;
    if (s == TFC_OK && da) s = mm_grad(fn, dout, a, b, 1, &ga);
    if (s == TFC_OK && db) s = mm_grad(fn, dout, a, b, 0, &gb);
    /* Undo the 1-D promotion. */
    if (s == TFC_OK && ga && a0->ndim == 1) {
        tfc_tensor *t;
        s = tfc_reshape(NULL, ga, a0->shape, 1, &t);
        tfc_tensor_release(ga);
        ga = s == TFC_OK ? t : NULL;
    }
    if (s == TFC_OK && gb && b0->ndim == 1) {
        tfc_tensor *t;
        s = tfc_reshape(NULL, gb, b0->shape, 1, &t);
        tfc_tensor_release(gb);
        gb = s == TFC_OK ? t : NULL;
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(dout);
    if (s != TFC_OK) {
        tfc_tensor_release(ga);
        tfc_tensor_release(gb);
        return tfc_err_in(fn, s);
    }
    if (da) *da = ga;
    if (db) *db = gb;
    return TFC_OK;
}

/* The operands as given (before the 1-D promotion). */
typedef struct matmul_ctx {
    tfc_saved a, b;
} matmul_ctx;

/*
 * create_graph: with 1-D operands made 2-D (a as a row, b as a column),
 * da = dy · bᵀ and db = aᵀ · dy as recorded matmuls on gg, each summed
 * over broadcast batch dims and shaped back to its operand.
 */
static tfc_status matmul_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **gin) {
    const matmul_ctx *c = n->ctx;
    tfc_tensor *a0 = NULL, *b0 = NULL, *a = NULL, *b = NULL, *d = NULL, *t = NULL, *full = NULL, *sum = NULL;
    tfc_status s = tfc_node_saved(n, &c->a, &a0);
    if (s == TFC_OK) s = tfc_node_saved(n, &c->b, &b0);
    if (s == TFC_OK) s = a0->ndim == 1 ? tfc_unsqueeze(gg, a0, 0, &a) : (a = tfc_tensor_retain(a0), TFC_OK);
    if (s == TFC_OK) s = b0->ndim == 1 ? tfc_unsqueeze(gg, b0, 1, &b) : (b = tfc_tensor_retain(b0), TFC_OK);
    if (s == TFC_OK) {
        /* dy at the promoted output shape: broadcast batch dims, then [M, N] */
        int64_t shape[TFC_MAX_DIMS];
        int32_t nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
        for (int32_t i = 0; i < nb; i++) {
            int32_t ia = i - (nb - (a->ndim - 2)), ib = i - (nb - (b->ndim - 2));
            int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
            shape[i] = da == 1 ? db : da;
        }
        shape[nb] = a->shape[a->ndim - 2];
        shape[nb + 1] = b->shape[b->ndim - 1];
        s = tfc_reshape(gg, dy, shape, nb + 2, &d);
    }
    for (int32_t i = 0; i < 2 && s == TFC_OK; i++) {
        if (!tfc_node_needs_grad(n, i)) continue;
        const tfc_tensor *op = i == 0 ? a : b, *op0 = i == 0 ? a0 : b0;
        s = tfc_transpose(gg, i == 0 ? b : a, -1, -2, &t);
        if (s == TFC_OK) s = i == 0 ? tfc_matmul(gg, d, t, &full) : tfc_matmul(gg, t, d, &full);
        if (s == TFC_OK) s = tfc_sum_to_shape_g(gg, full, op->shape, op->ndim, &sum);
        full = NULL;
        if (s == TFC_OK) s = tfc_reshape(gg, sum, op0->shape, op0->ndim, &gin[i]);
        tfc_tensor_release(t);
        tfc_tensor_release(sum);
        t = sum = NULL;
    }
    tfc_tensor *all[] = {a0, b0, a, b, d};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    return s;
}

static tfc_status matmul_backward_node(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    if (!gout[0]) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return matmul_backward_graph(n, gg, gout[0], gin);
    const matmul_ctx *c = n->ctx;
    return matmul_grads("tfc_matmul", gout[0], c->a.t, c->b.t, tfc_node_needs_grad(n, 0) ? &gin[0] : NULL,
                        tfc_node_needs_grad(n, 1) ? &gin[1] : NULL);
}

TFC_API tfc_status tfc_matmul(tfc_graph *g, const tfc_tensor *a0, const tfc_tensor *b0, tfc_tensor **out) {
    const char *fn = "tfc_matmul";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(check_operands(fn, a0, b0));
    tfc_tensor *a = NULL, *b = NULL, *r = NULL, *res = NULL;
    mm_shapes p;
    tfc_status s = promote(fn, a0, 0, &a);
    if (s == TFC_OK) s = promote(fn, b0, 1, &b);
    if (s == TFC_OK) s = mm_plan(fn, a0, b0, a, b, &p);
    if (s == TFC_OK) s = tfc_tensor_new_on(a0, p.out, p.nout, a0->dtype, &r);
    if (s == TFC_OK) s = tfc_matmul_into(fn, r, a, b, 0.0);
    if (s == TFC_OK) {
        int64_t strides[TFC_MAX_DIMS];
        tfc_contiguous_strides(p.final_shape, p.nfinal, strides);
        s = tfc_tensor_alias(r, p.final_shape, strides, p.nfinal, 0, &res);
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(r);
    if (s != TFC_OK) return tfc_err_in(fn, s);
    const tfc_tensor *ins[2] = {a0, b0};
    if (tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, matmul_backward_node, 2, 1, sizeof(matmul_ctx), &n);
        if (s == TFC_OK) {
            matmul_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, a0);
            tfc_node_set_input(n, 1, b0);
            s = tfc_node_keep(n, &c->a, a0);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->b, b0);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, res);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(res);
            return tfc_err_in(fn, s);
        }
    }
    *out = res;
    return TFC_OK;
}

/* dst = src (or dst += src with TFC_GRAD_ACCUMULATE), same shape. Consumes src. */
static tfc_status store_grad(const char *fn, tfc_tensor *dst, tfc_tensor *src, uint32_t flags) {
    tfc_status s;
    if (flags & TFC_GRAD_ACCUMULATE) {
        s = tfc_tensor_map(fn, TFC_MAP_ADD, dst, dst, src, NULL, 0.0, 0);
        if (s == TFC_OK) tfc_bump_version(dst);
    } else {
        s = tfc_tensor_copy_from(dst, src);
    }
    tfc_tensor_release(src);
    return tfc_err_in(fn, s);
}

static tfc_status check_grad_buf(const char *fn, const char *arg, const tfc_tensor *buf, const tfc_tensor *like) {
    if (!buf) return TFC_OK;
    TFC_TRY(check_gemm_dtype(fn, arg, buf));
    if (buf->dtype != like->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s, expected %s", fn, arg, tfc_dtype_name(buf->dtype),
                       tfc_dtype_name(like->dtype));
    int same = buf->ndim == like->ndim;
    for (int32_t i = 0; same && i < buf->ndim; i++) same = buf->shape[i] == like->shape[i];
    if (!same) return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, must match %s", fn, arg, SHAPE(buf), SHAPE(like));
    return TFC_OK;
}

TFC_API tfc_status tfc_matmul_backward(const tfc_tensor *dout, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor *da,
                                       tfc_tensor *db, uint32_t flags) {
    const char *fn = "tfc_matmul_backward";
    TFC_TRY(check_operands(fn, a, b));
    TFC_TRY(check_gemm_dtype(fn, "dout", dout));
    if (dout->dtype != a->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: dout is %s %s, a and b are %s: dtypes differ", fn,
                       tfc_dtype_name(dout->dtype), SHAPE(dout), tfc_dtype_name(a->dtype));
    TFC_TRY(check_grad_buf(fn, "da", da, a));
    TFC_TRY(check_grad_buf(fn, "db", db, b));
    {
        const tfc_tensor *ts[5] = {a, b, dout, da, db};
        const char *names[5] = {"a", "b", "dout", "da", "db"};
        TFC_TRY(tfc_same_device(fn, ts, names, 5));
    }
    if (flags & ~TFC_GRAD_ACCUMULATE) return tfc_err(TFC_ERR_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags);
    tfc_tensor *ga = NULL, *gb = NULL;
    TFC_TRY(matmul_grads(fn, dout, a, b, da ? &ga : NULL, db ? &gb : NULL));
    tfc_status s = TFC_OK;
    if (da)
        s = store_grad(fn, da, ga, flags);
    else
        tfc_tensor_release(ga);
    if (db && s == TFC_OK)
        s = store_grad(fn, db, gb, flags);
    else
        tfc_tensor_release(gb);
    return tfc_err_in(fn, s);
}
