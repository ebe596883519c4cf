/*
 * A Linear's bias (linear_bias.h):
 *   forward:  out[M, N] = a[M, K] · w[K, N] + b[N]
 *   backward: db[N] = Σ_m dy[m, N]
 */
#include "ops/linear_bias.h"

#include "ops/matmul_into.h"
#include "ops/op_util.h"
#include "ops/operands.h"

tfc_status tfc_linear_bias_forward(const char *fn, tfc_tensor *out2, const tfc_tensor *a, const tfc_tensor *w,
                                   const tfc_tensor *b) {
    const int64_t M = out2->shape[0], N = out2->shape[1], K = a->shape[1];
    if (M * N == 0) return TFC_OK;
    if (!b) return tfc_matmul_into_or_zero(fn, out2, a, w);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, out2, &be));
    /* One GEMM whose epilogue adds the bias (cuBLASLt): no bias_rows pass over out. */
    if (tfc_backend_gemm_fuses(be, TFC_GEMM_EPI_BIAS) && K > 0) return tfc_matmul_into_bias(fn, out2, a, w, 0.0, b);
    tfc_bias_problem p = {
        .device = tfc_device_index(out2), .dtype = out2->dtype, .rows = M, .n = N, .ld = N, .y = tfc_data(out2)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, b, &p.b);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, bias_rows, &p);
    tfc_operands_release(&o);
    TFC_TRY(s);
    return K == 0 ? TFC_OK : tfc_matmul_into(fn, out2, a, w, 1.0);
}

tfc_status tfc_linear_bias_grad(const char *fn, const tfc_tensor *dy2, tfc_tensor **db) {
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
