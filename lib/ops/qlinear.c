/*
 * tfc_qlinear: out[..., N] = x[..., K] · Wᵀ + b with W a tfc_qweight
 * (include/tfcore/quant.h). The leading dims of x fold into the M rows of
 * one small-batch product (the backend's qlinear entry), x compacted when
 * strided. Inference only: a graph that would need its backward is refused.
 */
#include "ops/op_util.h"
#include "ops/operands.h"
#include "ops/qweight_impl.h"

static tfc_status check_f32(const char *fn, const char *arg, const tfc_tensor *t) {
    if (t->dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; the quantized linear takes f32", fn, arg,
                       tfc_dtype_name(t->dtype), SHAPE(t));
    return TFC_OK;
}

TFC_API tfc_status tfc_qlinear(tfc_graph *g, const tfc_tensor *x, const tfc_qweight *w, const tfc_tensor *b,
                               tfc_tensor **out) {
    const char *fn = "tfc_qlinear";
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, w);
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(check_f32(fn, "x", x));
    if (b) TFC_TRY(check_f32(fn, "b", b));
    const int64_t N = w->n, K = w->k;
    if (x->ndim < 1) return tfc_err(TFC_ERR_SHAPE, "%s: x is a scalar; need x [..., %lld]", fn, (long long)K);
    if (x->shape[x->ndim - 1] != K)
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s, W is [%lld,%lld] (out, in): x's last dim must be %lld", fn,
                       SHAPE(x), (long long)N, (long long)K, (long long)K);
    if (b && (b->ndim != 1 || b->shape[0] != N))
        return tfc_err(TFC_ERR_SHAPE, "%s: b is %s, W is [%lld,%lld]: need b [%lld]", fn, SHAPE(b), (long long)N,
                       (long long)K, (long long)N);
    {
        const tfc_tensor *ts[3] = {x, w->codes, b};
        const char *names[3] = {"x", "w", "b"};
        TFC_TRY(tfc_same_device(fn, ts, names, 3));
    }
    const tfc_tensor *ins[2] = {x, b};
    if (tfc_should_record(g, ins, b ? 2 : 1))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: x or b requires grad on a recording graph; the quantized linear has no backward "
                       "(train through tfc_linear on tfc_qweight_dequantize's weight)",
                       fn);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    int64_t M = 1, oshape[TFC_MAX_DIMS];
    for (int32_t d = 0; d + 1 < x->ndim; d++) M *= oshape[d] = x->shape[d];
    oshape[x->ndim - 1] = N;
    tfc_tensor *x2 = NULL, *r = NULL;
    tfc_operands o = {0};
    tfc_quant_problem p = {.device = tfc_device_index(x),
                           .dtype = TFC_DTYPE_F32,
                           .format = w->format,
                           .N = N,
                           .K = K,
                           .group = w->group,
                           .codes = tfc_data(w->codes),
                           .scales = tfc_data(w->scales),
                           .M = M};
    tfc_status s = tfc_tensor_new_on(x, oshape, x->ndim, TFC_DTYPE_F32, &r);
    if (s == TFC_OK && M > 0) {
        s = tfc_reshape(NULL, x, (int64_t[]){M, K}, 2, &x2);
        if (s == TFC_OK) s = tfc_operand(&o, x2, &p.x);
        if (s == TFC_OK) s = tfc_operand(&o, b, &p.b);
        p.y = tfc_data(r);
        if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, qlinear, &p);
    }
    tfc_operands_release(&o);
    tfc_tensor_release(x2);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}
