/* tfc_layernorm_forward / tfc_layernorm_backward: checks, then the backend's layernorm entries. */
#include <math.h>

#include "ops/operands.h"

/* x's last dim C and row count N; x must have a last dim of size >= 1. */
static tfc_status rows_of(const char *fn, const tfc_tensor *x, int64_t *n, int64_t *c) {
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s; it needs a last dim of size >= 1 to normalise over", fn,
                       SHAPE(x));
    *c = x->shape[x->ndim - 1];
    *n = tfc_numel(x) / *c;
    return TFC_OK;
}

TFC_API tfc_status tfc_layernorm_forward(const tfc_tensor *x, const tfc_tensor *weight, const tfc_tensor *bias,
                                         double eps, tfc_tensor *y, tfc_tensor *mean, tfc_tensor *rstd) {
    const char *fn = "tfc_layernorm_forward";
    const tfc_backend *b;
    int64_t n, c;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(rows_of(fn, x, &n, &c));
    if (!(eps >= 0 && isfinite(eps)))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: eps is %g, must be finite and >= 0", fn, eps);
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    if (bias) TFC_TRY(tfc_karg_float_like(fn, "bias", bias, &c, 1, "x", x));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    tfc_dtype st = tfc_backend_stats_dtype(b, x->dtype);
    if (mean) TFC_TRY(tfc_karg_output(fn, "mean", mean, st, &n, 1, "x", x));
    if (rstd) TFC_TRY(tfc_karg_output(fn, "rstd", rstd, st, &n, 1, "x", x));
    const tfc_tensor *all[] = {y, mean, rstd, x, weight, bias};
    const char *names[] = {"y", "mean", "rstd", "x", "weight", "bias"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 6));

    tfc_layernorm_problem p = {.device = tfc_device_index(x), .dtype = x->dtype, .rows = n, .cols = c, .eps = eps,
                               .y = tfc_data(y), .mean = tfc_out_data(mean), .rstd = tfc_out_data(rstd)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = tfc_operand(&o, weight, &p.weight);
    if (s == TFC_OK) s = tfc_operand(&o, bias, &p.bias);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, layernorm_forward, &p);
    if (s == TFC_OK) tfc_written(y, mean, rstd);
    tfc_operands_release(&o);
    return s;
}

TFC_API tfc_status tfc_layernorm_backward(const tfc_tensor *dy, const tfc_tensor *x, const tfc_tensor *weight,
                                          const tfc_tensor *mean, const tfc_tensor *rstd, tfc_tensor *dx,
                                          tfc_tensor *dweight, tfc_tensor *dbias, uint32_t flags) {
    const char *fn = "tfc_layernorm_backward";
    const tfc_backend *b;
    int64_t n, c;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(rows_of(fn, x, &n, &c));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    tfc_dtype st = tfc_backend_stats_dtype(b, x->dtype);
    TFC_TRY(tfc_karg_stats(fn, "mean", mean, st, &n, 1, "x", x));
    TFC_TRY(tfc_karg_stats(fn, "rstd", rstd, st, &n, 1, "x", x));
    if (dweight && !weight)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dweight %s is given but weight is NULL", fn, SHAPE(dweight));
    if (dx) TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    if (dweight) TFC_TRY(tfc_karg_output(fn, "dweight", dweight, x->dtype, &c, 1, "x", x));
    if (dbias) TFC_TRY(tfc_karg_output(fn, "dbias", dbias, x->dtype, &c, 1, "x", x));
    const tfc_tensor *all[] = {dx, dweight, dbias, dy, x, weight, mean, rstd};
    const char *names[] = {"dx", "dweight", "dbias", "dy", "x", "weight", "mean", "rstd"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 8));
    if (!dx && !dweight && !dbias) return TFC_OK;

    tfc_layernorm_problem p = {.device = tfc_device_index(x), .dtype = x->dtype, .rows = n, .cols = c,
                               .dx = tfc_out_data(dx), .dweight = tfc_out_data(dweight), .dbias = tfc_out_data(dbias),
                               .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    const void *pm = NULL, *pr = NULL;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = tfc_operand(&o, weight, &p.weight);
    if (s == TFC_OK) s = tfc_operand(&o, mean, &pm);
    if (s == TFC_OK) s = tfc_operand(&o, rstd, &pr);
    p.mean = (void *)pm, p.rstd = (void *)pr;
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, layernorm_backward, &p);
    if (s == TFC_OK) tfc_written(dx, dweight, dbias);
    tfc_operands_release(&o);
    return s;
}
