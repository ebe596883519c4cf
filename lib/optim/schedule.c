/*
 * Learning-rate schedules: pure functions of the 0-based step. The formulas
 * (and the values they hit at the end of warmup, the midpoint and the end)
 * are in include/tfcore/optim.h and docs/OPTIM.md.
 */
#include <math.h>

#include "core/error.h"
#include "tfcore/optim.h"

static tfc_status check_common(const char *fn, int64_t step, double max_lr, int64_t warmup, const double *lr) {
    TFC_CHECK_NOT_NULL(fn, lr);
    if (step < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: step is %lld: must be >= 0", fn, (long long)step);
    if (warmup < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: warmup is %lld: must be >= 0", fn, (long long)warmup);
    if (!isfinite(max_lr) || max_lr < 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_lr is %g: must be finite and >= 0", fn, max_lr);
    return TFC_OK;
}

static tfc_status check_decay(const char *fn, double min_lr, int64_t warmup, int64_t total) {
    if (!isfinite(min_lr) || min_lr < 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: min_lr is %g: must be finite and >= 0", fn, min_lr);
    if (total <= warmup)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: total is %lld, warmup %lld: total must exceed warmup", fn,
                       (long long)total, (long long)warmup);
    return TFC_OK;
}

/* nanoGPT's ramp: max_lr·(s + 1)/(warmup + 1) for s < warmup. */
static double warmup_lr(int64_t step, double max_lr, int64_t warmup) {
    return max_lr * ((double)step + 1.0) / ((double)warmup + 1.0); /* in double: warmup + 1 may not fit */
}

TFC_API tfc_status tfc_lr_constant(int64_t step, double max_lr, int64_t warmup, double *lr) {
    TFC_TRY(check_common("tfc_lr_constant", step, max_lr, warmup, lr));
    *lr = step < warmup ? warmup_lr(step, max_lr, warmup) : max_lr;
    return TFC_OK;
}

TFC_API tfc_status tfc_lr_cosine(int64_t step, double max_lr, double min_lr, int64_t warmup, int64_t total,
                                 double *lr) {
    const char *fn = "tfc_lr_cosine";
    TFC_TRY(check_common(fn, step, max_lr, warmup, lr));
    TFC_TRY(check_decay(fn, min_lr, warmup, total));
    if (step < warmup)
        *lr = warmup_lr(step, max_lr, warmup);
    else if (step > total)
        *lr = min_lr;
    else {
        double r = (double)(step - warmup) / (double)(total - warmup);
        double coeff = 0.5 * (1.0 + cos(M_PI * r));
        *lr = min_lr + coeff * (max_lr - min_lr);
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_lr_linear(int64_t step, double max_lr, double min_lr, int64_t warmup, int64_t total,
                                 double *lr) {
    const char *fn = "tfc_lr_linear";
    TFC_TRY(check_common(fn, step, max_lr, warmup, lr));
    TFC_TRY(check_decay(fn, min_lr, warmup, total));
    if (step < warmup)
        *lr = warmup_lr(step, max_lr, warmup);
    else if (step > total)
        *lr = min_lr;
    else
        *lr = max_lr + (min_lr - max_lr) * ((double)(step - warmup) / (double)(total - warmup));
    return TFC_OK;
}

TFC_API tfc_status tfc_lr_inverse_sqrt(int64_t step, double max_lr, int64_t warmup, double *lr) {
    const char *fn = "tfc_lr_inverse_sqrt";
    TFC_TRY(check_common(fn, step, max_lr, warmup, lr));
    if (warmup < 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: warmup is %lld: must be >= 1 (lr = max_lr·√(warmup/step))", fn,
                       (long long)warmup);
    *lr = step < warmup ? warmup_lr(step, max_lr, warmup) : max_lr * sqrt((double)warmup / (double)step);
    return TFC_OK;
}
