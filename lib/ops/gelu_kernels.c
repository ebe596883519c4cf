/* tfc_gelu_forward / tfc_gelu_backward: checks, then the backend's gelu entries. */
#include "ops/operands.h"

static tfc_status check_approximate(const char *fn, int32_t approximate) {
    if (approximate != 0 && approximate != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: approximate is %d, must be 0 (erf) or 1 (tanh)", fn,
                       (int)approximate);
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu_forward(const tfc_tensor *x, int32_t approximate, tfc_tensor *y) {
    const char *fn = "tfc_gelu_forward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {y, x};
    const char *names[] = {"y", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 2));

    tfc_gelu_problem p = {.device = tfc_device_index(x), .dtype = x->dtype, .n = tfc_numel(x),
                          .approximate = approximate, .y = tfc_data(y)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, gelu_forward, &p);
    if (s == TFC_OK) tfc_written(y, NULL, NULL);
    tfc_operands_release(&o);
    return s;
}

TFC_API tfc_status tfc_gelu_backward(const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate, tfc_tensor *dx,
                                     uint32_t flags) {
    const char *fn = "tfc_gelu_backward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {dx, dy, x};
    const char *names[] = {"dx", "dy", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));

    tfc_gelu_problem p = {.device = tfc_device_index(x), .dtype = x->dtype, .n = tfc_numel(x),
                          .approximate = approximate, .dx = tfc_data(dx),
                          .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, gelu_backward, &p);
    if (s == TFC_OK) tfc_written(dx, NULL, NULL);
    tfc_operands_release(&o);
    return s;
}
