/* tfc_cross_entropy_forward / _backward: checks, then the backend's cross_entropy entries. */
#include "ops/operands.h"

/* logits [N, C] (C >= 1) and targets [N]; the backend checks each target is in [0, C) or ignore_index. */
static tfc_status check_problem(const char *fn, const tfc_tensor *logits, const tfc_tensor *targets) {
    TFC_TRY(tfc_karg_float(fn, "logits", logits));
    if (logits->ndim != 2 || logits->shape[1] < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: logits is %s, must be [N, C] with C >= 1", fn, SHAPE(logits));
    TFC_TRY(tfc_karg_index(fn, "targets", targets));
    const tfc_tensor *ts[2] = {logits, targets};
    const char *names[2] = {"logits", "targets"};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    return tfc_karg_shape(fn, "targets", targets, logits->shape, 1, "logits", logits);
}

TFC_API tfc_status tfc_cross_entropy_forward(const tfc_tensor *logits, const tfc_tensor *targets,
                                             int64_t ignore_index, tfc_tensor *loss, tfc_tensor *lse) {
    const char *fn = "tfc_cross_entropy_forward";
    const tfc_backend *b;
    TFC_TRY(check_problem(fn, logits, targets));
    TFC_TRY(tfc_tensor_backend(fn, logits, &b));
    TFC_CHECK_NOT_NULL(fn, loss);
    tfc_dtype st = tfc_backend_stats_dtype(b, logits->dtype);
    TFC_TRY(tfc_karg_output(fn, "loss", loss, st, NULL, 0, "logits", logits));
    if (lse) TFC_TRY(tfc_karg_output(fn, "lse", lse, st, logits->shape, 1, "logits", logits));
    const tfc_tensor *all[] = {loss, lse, logits, targets};
    const char *names[] = {"loss", "lse", "logits", "targets"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 4));

    tfc_cross_entropy_problem p = {.device = tfc_device_index(logits), .dtype = logits->dtype,
                                   .index_dtype = targets->dtype, .n = logits->shape[0], .c = logits->shape[1],
                                   .ignore_index = ignore_index, .loss = tfc_data(loss), .lse = tfc_out_data(lse)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, logits, &p.logits);
    if (s == TFC_OK) s = tfc_operand(&o, targets, &p.targets);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, cross_entropy_forward, &p);
    if (s == TFC_OK) tfc_written(loss, lse, NULL);
    tfc_operands_release(&o);
    return s;
}

TFC_API tfc_status tfc_cross_entropy_backward(const tfc_tensor *dloss, const tfc_tensor *logits,
                                              const tfc_tensor *targets, const tfc_tensor *lse, int64_t ignore_index,
                                              tfc_tensor *dlogits, uint32_t flags) {
    const char *fn = "tfc_cross_entropy_backward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_problem(fn, logits, targets));
    TFC_TRY(tfc_tensor_backend(fn, logits, &b));
    tfc_dtype st = tfc_backend_stats_dtype(b, logits->dtype);
    TFC_TRY(tfc_karg_float(fn, "dloss", dloss));
    TFC_TRY(tfc_karg_stats(fn, "dloss", dloss, st, dloss->shape, dloss->ndim, "logits", logits));
    if (tfc_numel(dloss) != 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: dloss is %s, must hold one element (the loss is a scalar)", fn,
                       SHAPE(dloss));
    if (lse) TFC_TRY(tfc_karg_stats(fn, "lse", lse, st, logits->shape, 1, "logits", logits));
    TFC_CHECK_NOT_NULL(fn, dlogits);
    TFC_TRY(tfc_karg_output(fn, "dlogits", dlogits, logits->dtype, logits->shape, 2, "logits", logits));
    const tfc_tensor *all[] = {dlogits, dloss, logits, targets, lse};
    const char *names[] = {"dlogits", "dloss", "logits", "targets", "lse"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 5));

    tfc_cross_entropy_problem p = {.device = tfc_device_index(logits), .dtype = logits->dtype,
                                   .index_dtype = targets->dtype, .n = logits->shape[0], .c = logits->shape[1],
                                   .ignore_index = ignore_index, .dlogits = tfc_data(dlogits),
                                   .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, logits, &p.logits);
    if (s == TFC_OK) s = tfc_operand(&o, targets, &p.targets);
    if (s == TFC_OK) s = tfc_operand(&o, lse, &p.lse_in);
    if (s == TFC_OK) s = tfc_operand(&o, dloss, &p.dloss);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, cross_entropy_backward, &p);
    if (s == TFC_OK) tfc_written(dlogits, NULL, NULL);
    tfc_operands_release(&o);
    return s;
}
