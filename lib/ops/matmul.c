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

#include "cpu/gemm.h"
#include "ops/matmul_into.h"
#include "ops/op_util.h"

static int blas_ok(const tfc_tensor *t) {
    int tr;
    int64_t ld;
    int32_t n = t->ndim;
    return tfc_cpu_gemm_layout(t->shape[n - 2], t->shape[n - 1], t->strides[n - 2], t->strides[n - 1], &tr, &ld);
}

static tfc_status cuda_matmul_into(tfc_tensor *out, const tfc_tensor *a_in, const tfc_tensor *b_in, double beta);

/* Declared in ops/matmul_into.h; CUDA outputs go to cuda_matmul_into below. */
tfc_status tfc_matmul_into(tfc_tensor *out, const tfc_tensor *a_in, const tfc_tensor *b_in, double beta) {
    if (tfc_is_cuda(out)) return cuda_matmul_into(out, a_in, b_in, beta);
    tfc_tensor *a = NULL, *b = NULL;
    tfc_status s = blas_ok(a_in) ? (a = tfc_tensor_retain((tfc_tensor *)a_in), TFC_OK) : tfc_make_contiguous(a_in, &a);
    if (s == TFC_OK) s = blas_ok(b_in) ? (b = tfc_tensor_retain((tfc_tensor *)b_in), TFC_OK) : tfc_make_contiguous(b_in, &b);
    if (s != TFC_OK) {
        tfc_tensor_release(a);
        return s;
    }
    int32_t nd = out->ndim, nb = nd - 2;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[a->ndim - 1];
    int ta, tb;
    int64_t lda, ldb;
    tfc_cpu_gemm_layout(M, K, a->strides[a->ndim - 2], a->strides[a->ndim - 1], &ta, &lda);
    tfc_cpu_gemm_layout(K, N, b->strides[b->ndim - 2], b->strides[b->ndim - 1], &tb, &ldb);
    /* Batch strides of a and b broadcast to out's batch shape. */
    int64_t as[TFC_MAX_DIMS] = {0}, bs[TFC_MAX_DIMS] = {0}, batch = 1;
    for (int32_t d = 0; d < nb; d++) {
        int32_t da = d - (nb - (a->ndim - 2)), db = d - (nb - (b->ndim - 2));
        as[d] = (da >= 0 && a->shape[da] != 1) ? a->strides[da] : 0;
        bs[d] = (db >= 0 && b->shape[db] != 1) ? b->strides[db] : 0;
        batch *= out->shape[d];
    }
    size_t es = tfc_dtype_size(out->dtype);
    char *pa = tfc_data(a), *pb = tfc_data(b), *pc = tfc_data(out);
    /* Fold the batch into M when b is shared and a's rows run on across batches. */
    int fold = !ta && batch > 1;
    int64_t expect = M * lda;
    for (int32_t d = nb - 1; d >= 0 && fold; d--) {
        if (bs[d] != 0 || (out->shape[d] > 1 && as[d] != expect)) fold = 0;
        expect *= out->shape[d];
    }
    if (fold || batch == 1) {
        tfc_cpu_gemm(out->dtype, ta, tb, M * batch, N, K, 1.0, pa, lda, pb, ldb, beta, pc, N);
    } else {
        for (int64_t i = 0; i < batch; i++) {
            int64_t oa = 0, ob = 0, rem = i;
            for (int32_t d = nb - 1; d >= 0; d--) {
                int64_t idx = rem % out->shape[d];
                rem /= out->shape[d];
                oa += idx * as[d];
                ob += idx * bs[d];
            }
            tfc_cpu_gemm(out->dtype, ta, tb, M, N, K, 1.0, pa + oa * (int64_t)es, lda, pb + ob * (int64_t)es, ldb,
                         beta, pc + i * M * N * (int64_t)es, N);
        }
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    return TFC_OK;
}

/*
 * The CUDA form of matmul_into. cuBLASLt takes each operand's matrices
 * contiguous (or contiguous transposed, as a flag) at one batch stride, so
 * an operand whose last two dims are neither, or whose batch dims do not
 * collapse to one stride, is compacted first (broadcast batch dims become
 * stride 0 after expanding to out's batch shape).
 */
static int unit_matrix(const tfc_tensor *t, int64_t rows, int64_t cols, int *trans) {
    int32_t n = t->ndim;
    int64_t rs = t->strides[n - 2], cs = t->strides[n - 1];
    if ((cs == 1 || cols == 1) && (rs == cols || rows == 1)) return *trans = 0, 1;
    if ((rs == 1 || rows == 1) && (cs == rows || cols == 1)) return *trans = 1, 1;
    return 0;
}

/* One stride for t's batch dims broadcast to out's batch shape, or 0 when none fits. */
static int batch_stride(const tfc_tensor *t, const tfc_tensor *out, int64_t *stride) {
    int32_t nb = out->ndim - 2, tb = t->ndim - 2;
    int64_t st = -1, expect = -1;
    for (int32_t d = nb - 1; d >= 0; d--) {
        int32_t it = d - (nb - tb);
        int64_t size = out->shape[d], ts = (it >= 0 && t->shape[it] != 1) ? t->strides[it] : 0;
        if (size == 1) continue;
        if (st < 0) {
            st = ts;
            expect = ts * size;
        } else {
            if (st == 0 ? ts != 0 : ts != expect) return 0;
            expect = ts * size;
        }
    }
    *stride = st < 0 ? 0 : st;
    return 1;
}

/* t as cuBLASLt can read it for out: as is, compacted, or expanded to out's batch shape and compacted. */
static tfc_status cuda_operand(const tfc_tensor *t, int64_t rows, int64_t cols, const tfc_tensor *out, tfc_tensor **res,
                               int *trans, int64_t *stride) {
    if (unit_matrix(t, rows, cols, trans) && batch_stride(t, out, stride)) {
        *res = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    tfc_tensor *c;
    *trans = 0;
    if (t->ndim == out->ndim || batch_stride(t, out, stride)) {
        TFC_TRY(tfc_make_contiguous(t, &c));
        if (batch_stride(c, out, stride)) {
            *res = c;
            return TFC_OK;
        }
        tfc_tensor_release(c);
    }
    /* Mixed broadcast batch dims: materialise t at out's full batch shape. */
    int64_t shape[TFC_MAX_DIMS], st[TFC_MAX_DIMS];
    for (int32_t d = 0; d < out->ndim - 2; d++) shape[d] = out->shape[d];
    shape[out->ndim - 2] = rows;
    shape[out->ndim - 1] = cols;
    tfc_broadcast_strides(t, shape, out->ndim, st);
    TFC_TRY(tfc_cuda_gather("tfc_matmul", t, shape, st, out->ndim, &c));
    *stride = rows * cols;
    *res = c;
    return TFC_OK;
}

static tfc_status cuda_matmul_into(tfc_tensor *out, const tfc_tensor *a_in, const tfc_tensor *b_in, double beta) {
    const char *fn = "tfc_matmul";
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, out, &api, &dev));
    int32_t nd = out->ndim;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a_in->shape[a_in->ndim - 1], batch = 1;
    for (int32_t d = 0; d < nd - 2; d++) batch *= out->shape[d];
    int ta = 0, tb = 0;
    int64_t sa = 0, sb = 0;
    tfc_tensor *a = NULL, *b = NULL;
    tfc_status s = cuda_operand(a_in, M, K, out, &a, &ta, &sa);
    if (s == TFC_OK) s = cuda_operand(b_in, K, N, out, &b, &tb, &sb);
    if (s == TFC_OK && batch * M * N > 0) {
        tfc_cuda_matmul_desc d;
        memset(&d, 0, sizeof d);
        d.struct_size = sizeof d;
        d.dtype = out->dtype;
        d.M = M, d.N = N, d.K = K, d.batch = batch;
        d.trans_a = ta, d.trans_b = tb;
        d.a = tfc_data(a), d.b = tfc_data(b), d.c = tfc_data(out);
        d.stride_a = sa, d.stride_b = sb, d.stride_c = M * N;
        d.alpha = 1.0f, d.beta = (float)beta;
        d.epilogue = TFC_CUDA_EPI_NONE;
        /* b shared and a's batches back to back without a transpose: one [batch·M, K] GEMM. */
        if (batch > 1 && sb == 0 && !ta && sa == M * K) d.M = batch * M, d.batch = 1, d.stride_a = d.stride_c = 0;
        if (K == 0) s = beta == 0.0 ? tfc_cuda_fill(fn, out, 0.0) : TFC_OK;
        else s = tfc_cuda_done(fn, "matmul", api, api->matmul(dev, &d));
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    return s;
}

/* Shapes of a matmul after 1-D promotion; fails with the DESIGN message. */
typedef struct mm_shapes {
    int64_t out[TFC_MAX_DIMS]; /* batch + [M, N] */
    int32_t nout;
    int64_t final_shape[TFC_MAX_DIMS]; /* with promoted dims removed */
    int32_t nfinal;
} mm_shapes;

static tfc_status promote(const char *fn, const tfc_tensor *t, int is_b, tfc_tensor **out) {
    if (t->ndim == 0) return tfc_err(TFC_ERR_SHAPE, "%s: %s is a scalar; matmul needs at least 1-D", fn, is_b ? "b" : "a");
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

static tfc_status check_operands(const char *fn, const tfc_tensor *a, const tfc_tensor *b) {
    TFC_TRY(tfc_check_float_dev(fn, "a", a));
    TFC_TRY(tfc_check_float_dev(fn, "b", b));
    return tfc_check_same(fn, a, b);
}

/* Gradient of one operand at the broadcast shape, summed to the operand's. */
static tfc_status mm_grad(const char *fn, const tfc_tensor *dout, const tfc_tensor *a, const tfc_tensor *b,
                          int want_a, tfc_tensor **out) {
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
            s = tfc_tensor_new_on(dout, shape, nd, dout->dtype, &full);
            if (s == TFC_OK) s = tfc_matmul_into(full, dout, bt, 0.0);
        }
        tfc_tensor_release(bt);
        if (s == TFC_OK) return tfc_sum_to_shape(full, a->shape, a->ndim, out);
    } else if (b->ndim == 2 && nd > 2) {
        /* Shared weight: fold the batch, db = a_flatᵀ · dout_flat. */
        tfc_tensor *af = NULL, *df = NULL;
        int64_t M = a->shape[a->ndim - 2] , K = a->shape[a->ndim - 1];
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
        if (s == TFC_OK) s = tfc_matmul_into(full, at, df, 0.0);
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
            s = tfc_tensor_new_on(dout, shape, nd, dout->dtype, &full);
            if (s == TFC_OK) s = tfc_matmul_into(full, at, dout, 0.0);
        }
        tfc_tensor_release(at);
        if (s == TFC_OK) return tfc_sum_to_shape(full, b->shape, b->ndim, out);
    }
    tfc_tensor_release(full);
    (void)fn;
    return s;
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
        return s;
    }
    if (da) *da = ga;
    if (db) *db = gb;
    return TFC_OK;
}

/* The operands as given (before the 1-D promotion). */
typedef struct matmul_ctx {
    tfc_saved a, b;
} matmul_ctx;

static tfc_status matmul_backward_node(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    if (!gout[0]) return TFC_OK;
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
    if (s == TFC_OK) s = tfc_matmul_into(r, a, b, 0.0);
    if (s == TFC_OK) {
        int64_t strides[TFC_MAX_DIMS];
        tfc_contiguous_strides(p.final_shape, p.nfinal, strides);
        s = tfc_tensor_alias(r, p.final_shape, strides, p.nfinal, 0, &res);
    }
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(r);
    if (s != TFC_OK) return s;
    const tfc_tensor *ins[2] = {a0, b0};
    if (tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new_ctx(g, fn, matmul_backward_node, 2, 1, sizeof(matmul_ctx), &n);
        if (s == TFC_OK) {
            matmul_ctx *c = n->ctx;
            tfc_node_set_input(n, 0, a0);
            tfc_node_set_input(n, 1, b0);
            s = tfc_node_keep(n, &c->a, a0);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->b, b0);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, res);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(res);
            return s;
        }
    }
    *out = res;
    return TFC_OK;
}

/* dst = src (or dst += src with TFC_GRAD_ACCUMULATE), same shape. */
static tfc_status store_grad(const char *fn, const char *arg, tfc_tensor *dst, tfc_tensor *src, uint32_t flags) {
    tfc_status s = TFC_OK;
    if ((flags & TFC_GRAD_ACCUMULATE) && tfc_is_cuda(dst)) {
        s = tfc_cuda_add_into(fn, dst, src);
    } else if (flags & TFC_GRAD_ACCUMULATE) {
        tfc_sview dv = tfc_sview_of(dst), sv = tfc_sview_of(src);
        tfc_cpu_map(TFC_MAP_ADD, &dv, &dv, &sv, NULL, 0.0, 0);
        tfc_bump_version(dst);
    } else {
        s = tfc_tensor_copy_from(dst, src);
    }
    (void)fn;
    (void)arg;
    tfc_tensor_release(src);
    return s;
}

static tfc_status check_grad_buf(const char *fn, const char *arg, const tfc_tensor *buf, const tfc_tensor *like) {
    if (!buf) return TFC_OK;
    TFC_TRY(tfc_check_float_dev(fn, arg, buf));
    if (buf->dtype != like->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s, expected %s", fn, arg, tfc_dtype_name(buf->dtype),
                       tfc_dtype_name(like->dtype));
    int same = buf->ndim == like->ndim;
    for (int32_t i = 0; same && i < buf->ndim; i++) same = buf->shape[i] == like->shape[i];
    if (!same) return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, must match %s", fn, arg, SHAPE(buf), SHAPE(like));
    return TFC_OK;
}

TFC_API tfc_status tfc_matmul_backward(const tfc_tensor *dout, const tfc_tensor *a, const tfc_tensor *b,
                                       tfc_tensor *da, tfc_tensor *db, uint32_t flags) {
    const char *fn = "tfc_matmul_backward";
    TFC_TRY(check_operands(fn, a, b));
    TFC_TRY(tfc_check_float_dev(fn, "dout", dout));
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
    if (da) s = store_grad(fn, "da", da, ga, flags);
    else tfc_tensor_release(ga);
    if (db && s == TFC_OK) s = store_grad(fn, "db", db, gb, flags);
    else tfc_tensor_release(gb);
    return s;
}
