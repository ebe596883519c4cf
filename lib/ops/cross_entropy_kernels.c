/* tfc_cross_entropy_forward / _backward: checks, then lib/cpu/cross_entropy.c. */
#include "core/dtype.h"
#include "cpu/kernels.h"
#include "ops/kernel_args.h"

/* logits [N, C] (C >= 1) and targets [N] with every target in [0, C) or ignore_index. */
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

static tfc_status check_targets(const char *fn, const tfc_tensor *targets, const void *data, int64_t c,
                                int64_t ignore_index) {
    int64_t bad = tfc_cpu_first_bad_index(data, targets->dtype, targets->shape[0], c, 1, ignore_index);
    if (bad >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: targets[%lld] is %lld, outside [0, %lld) and not ignore_index %lld",
                       fn, (long long)bad, (long long)tfc_index_at(data, targets->dtype, bad), (long long)c,
                       (long long)ignore_index);
    return TFC_OK;
}

TFC_API tfc_status tfc_cross_entropy_forward(const tfc_tensor *logits, const tfc_tensor *targets,
                                             int64_t ignore_index, tfc_tensor *loss, tfc_tensor *lse) {
    const char *fn = "tfc_cross_entropy_forward";
    TFC_TRY(check_problem(fn, logits, targets));
    TFC_CHECK_NOT_NULL(fn, loss);
    /* On CUDA the loss and lse are f32 whatever the logits' dtype. */
    tfc_dtype ldt = tfc_is_cuda(logits) ? TFC_DTYPE_F32 : logits->dtype;
    TFC_TRY(tfc_karg_output(fn, "loss", loss, ldt, NULL, 0, "logits", logits));
    if (lse) TFC_TRY(tfc_karg_output(fn, "lse", lse, ldt, logits->shape, 1, "logits", logits));
    const tfc_tensor *all[] = {loss, lse, logits, targets};
    const char *names[] = {"loss", "lse", "logits", "targets"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 4));
    if (tfc_is_cuda(logits)) {
        const tfc_cuda_api *api;
        int32_t dev;
        TFC_TRY(tfc_cuda_for(fn, logits, &api, &dev));
        tfc_tensor *tl, *tt = NULL;
        const tfc_tensor *ul, *ut;
        tfc_status s = tfc_karg_contiguous(logits, &tl, &ul);
        if (s == TFC_OK) s = tfc_karg_contiguous(targets, &tt, &ut);
        /* The entry checks the targets on the device (one stream sync) and names the first bad row. */
        if (s == TFC_OK)
            s = tfc_cuda_done(fn, "cross_entropy_forward", api,
                              api->cross_entropy_forward(dev, logits->dtype, tfc_data(ul), targets->dtype,
                                                         tfc_data(ut), ignore_index, (size_t)logits->shape[0],
                                                         (size_t)logits->shape[1], (float *)tfc_data(loss),
                                                         lse ? (float *)tfc_data(lse) : NULL));
        if (s == TFC_OK) {
            tfc_bump_version(loss);
            if (lse) tfc_bump_version(lse);
        }
        tfc_tensor_release(tl);
        tfc_tensor_release(tt);
        return s;
    }
    tfc_tensor *tl, *tt = NULL;
    const tfc_tensor *ul, *ut;
    tfc_status s = tfc_karg_contiguous(logits, &tl, &ul);
    if (s == TFC_OK) s = tfc_karg_contiguous(targets, &tt, &ut);
    if (s == TFC_OK) s = check_targets(fn, targets, tfc_data(ut), logits->shape[1], ignore_index);
    if (s == TFC_OK) {
        tfc_cpu_cross_entropy_forward(logits->dtype, targets->dtype, logits->shape[0], logits->shape[1],
                                      tfc_data(ul), tfc_data(ut), ignore_index, tfc_data(loss),
                                      lse ? tfc_data(lse) : NULL);
        tfc_bump_version(loss);
        if (lse) tfc_bump_version(lse);
    }
    tfc_tensor_release(tl);
    tfc_tensor_release(tt);
    return s;
}

TFC_API tfc_status tfc_cross_entropy_backward(const tfc_tensor *dloss, const tfc_tensor *logits,
                                              const tfc_tensor *targets, const tfc_tensor *lse, int64_t ignore_index,
                                              tfc_tensor *dlogits, uint32_t flags) {
    const char *fn = "tfc_cross_entropy_backward";
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_problem(fn, logits, targets));
    TFC_TRY(tfc_karg_float(fn, "dloss", dloss));
    if (tfc_is_cuda(logits)) {
        /* CUDA: dloss and lse are the f32 device scalars/rows the forward wrote. */
        int64_t n0 = logits->shape[0];
        TFC_TRY(tfc_karg_output(fn, "dloss", dloss, TFC_DTYPE_F32, dloss->shape, dloss->ndim, "logits", logits));
        if (!lse) return tfc_cuda_unimplemented(fn, "the backward without the forward's lse");
        TFC_TRY(tfc_karg_output(fn, "lse", lse, TFC_DTYPE_F32, &n0, 1, "logits", logits));
    } else {
        TFC_TRY(tfc_karg_dtype_like(fn, "dloss", dloss, "logits", logits));
    }
    if (tfc_numel(dloss) != 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: dloss is %s, must hold one element (the loss is a scalar)", fn,
                       SHAPE(dloss));
    if (lse && !tfc_is_cuda(logits)) TFC_TRY(tfc_karg_float_like(fn, "lse", lse, logits->shape, 1, "logits", logits));
    TFC_CHECK_NOT_NULL(fn, dlogits);
    TFC_TRY(tfc_karg_output(fn, "dlogits", dlogits, logits->dtype, logits->shape, 2, "logits", logits));
    const tfc_tensor *all[] = {dlogits, dloss, logits, targets, lse};
    const char *names[] = {"dlogits", "dloss", "logits", "targets", "lse"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 5));
    tfc_tensor *tmp[3] = {NULL};
    const tfc_tensor *u[3];
    const tfc_tensor *in[3] = {logits, targets, lse};
    tfc_status s = TFC_OK;
    for (int i = 0; i < 3 && s == TFC_OK; i++) s = tfc_karg_contiguous(in[i], &tmp[i], &u[i]);
    if (s == TFC_OK && tfc_is_cuda(logits)) {
        const tfc_cuda_api *api;
        int32_t dev;
        s = tfc_cuda_for(fn, logits, &api, &dev);
        if (s == TFC_OK)
            s = tfc_cuda_done(fn, "cross_entropy_backward", api,
                              api->cross_entropy_backward(dev, logits->dtype, (const float *)tfc_data(dloss),
                                                          tfc_data(u[0]), targets->dtype, tfc_data(u[1]),
                                                          ignore_index, (const float *)tfc_data(u[2]),
                                                          tfc_data(dlogits), (size_t)logits->shape[0],
                                                          (size_t)logits->shape[1], flags));
        if (s == TFC_OK) tfc_bump_version(dlogits);
        for (int i = 0; i < 3; i++) tfc_tensor_release(tmp[i]);
        return s;
    }
    if (s == TFC_OK) s = check_targets(fn, targets, tfc_data(u[1]), logits->shape[1], ignore_index);
    if (s == TFC_OK) {
        double g = tfc_scalar_load(tfc_data(dloss), dloss->dtype, 0);
        tfc_cpu_cross_entropy_backward(logits->dtype, targets->dtype, logits->shape[0], logits->shape[1], g,
                                       tfc_data(u[0]), tfc_data(u[1]), lse ? tfc_data(u[2]) : NULL, ignore_index,
                                       tfc_data(dlogits), (flags & TFC_GRAD_ACCUMULATE) != 0);
        tfc_bump_version(dlogits);
    }
    for (int i = 0; i < 3; i++) tfc_tensor_release(tmp[i]);
    return s;
}
