/*
 * Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_):
 *   N = √(Σ over all grads of g²),  c = max_norm / (N + 1e-6),  g ← g·c when c < 1.
 * The sum is taken in f64 over fixed blocks (lib/cpu/optim_kernels.c) so the
 * norm is the same for every thread count; a NaN/Inf anywhere is reported
 * before any gradient is touched.
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "device/dispatch.h"
#include "optim/cuda_step.h"

static tfc_status clip(const char *fn, tfc_tensor *const *params, int64_t n, double max_norm, double *total_norm) {
    if (n > 0 && !params) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params is NULL with n = %lld", fn, (long long)n);
    if (!(max_norm > 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_norm is %g: must be > 0 (+INFINITY only measures)", fn,
                       max_norm);
    int on_cuda = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!params[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%lld] is NULL", fn, (long long)i);
        on_cuda |= params[i]->grad && tfc_is_cuda(params[i]->grad);
    }
    if (on_cuda) return tfc_clip_cuda(fn, params, n, max_norm, total_norm);
    for (int64_t i = 0; i < n; i++) {
        const tfc_tensor *p = params[i];
        const tfc_tensor *g = p->grad;
        if (!g) continue;
        if ((g->dtype != TFC_DTYPE_F32 && g->dtype != TFC_DTYPE_F64) || g->storage->device != TFC_DEVICE_CPU ||
            !tfc_is_contiguous(g))
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: the grad of params[%lld] is %s %s%s: clipping needs "
                           "contiguous f32/f64 CPU gradients", fn, (long long)i, tfc_dtype_name(g->dtype),
                           SHAPE(g), tfc_is_contiguous(g) ? "" : " (not contiguous)");
    }
    tfc_optim_seg small[32];
    tfc_optim_seg *segs = n <= 32 ? small : malloc((size_t)n * sizeof *segs);
    if (!segs) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int64_t nseg = 0, start = 0;
    for (int64_t i = 0; i < n; i++) {
        tfc_tensor *g = params[i]->grad;
        if (!g || tfc_numel(g) == 0) continue;
        tfc_optim_seg *s = &segs[nseg++];
        s->grad = tfc_data(g);
        s->n = tfc_numel(g);
        s->start = start;
        start += s->n;
        s->dtype = g->dtype;
    }
    tfc_status st = TFC_OK;
    double sumsq = 0, norm = 0;
    if (tfc_cpu_grad_sumsq(segs, nseg, 1.0, &sumsq) != TFC_OK) {
        st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        goto done;
    }
    norm = sqrt(sumsq);
    if (!isfinite(norm)) {
        /* Either a NaN/Inf element, or f64 values past ~1e154 whose squares overflow: rescale those. */
        double mx = tfc_cpu_grad_maxabs(segs, nseg);
        if (!isfinite(mx)) {
            st = tfc_err(TFC_ERR_NONFINITE, "%s: the gradients hold %s: total norm is not finite; gradients "
                         "left unchanged", fn, isnan(mx) ? "NaN" : "Inf");
            goto done;
        }
        if (tfc_cpu_grad_sumsq(segs, nseg, 1.0 / mx, &sumsq) != TFC_OK) {
            st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
            goto done;
        }
        norm = mx * sqrt(sumsq);
        if (!isfinite(norm)) {
            st = tfc_err(TFC_ERR_NONFINITE, "%s: the total norm exceeds the f64 range; gradients left unchanged",
                         fn);
            goto done;
        }
    }
    double c = max_norm / (norm + 1e-6);
    if (c < 1) {
        tfc_cpu_grad_scale(segs, nseg, c);
        for (int64_t i = 0; i < n; i++)
            if (params[i]->grad) tfc_bump_version(params[i]->grad);
    }
    if (total_norm) *total_norm = norm;
done:
    if (segs != small) free(segs);
    return st;
}

TFC_API tfc_status tfc_clip_grad_norm(tfc_tensor *const *params, int32_t n, double max_norm, double *total_norm) {
    const char *fn = "tfc_clip_grad_norm";
    if (n < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d: must be >= 0", fn, (int)n);
    return clip(fn, params, n, max_norm, total_norm);
}

TFC_API tfc_status tfc_optim_clip_grad_norm(tfc_optim *opt, double max_norm, double *total_norm) {
    const char *fn = "tfc_optim_clip_grad_norm";
    TFC_CHECK_NOT_NULL(fn, opt);
    if (opt->n_params == 0) return clip(fn, NULL, 0, max_norm, total_norm);
    tfc_tensor **ps = malloc((size_t)opt->n_params * sizeof *ps);
    if (!ps) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int64_t k = 0; k < opt->n_params; k++) ps[k] = opt->params[k].p;
    tfc_status st = clip(fn, ps, opt->n_params, max_norm, total_norm);
    free(ps);
    return st;
}
