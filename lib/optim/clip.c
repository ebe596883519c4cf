/*
 * Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_):
 *   N = √(Σ over all grads of g²),  c = max_norm / (N + 1e-6),  g ← g·c when c < 1.
 * The backend's grad_norm entry takes the norm (the CPU's in f64 over fixed
 * blocks, so it is the same for every thread count), its grad_scale entry
 * scales; a NaN/Inf anywhere is reported before any gradient is touched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/sync_count.h"
#include "optim/optim_impl.h"
#include "tensor/dispatch.h"

static tfc_status clip(const char *fn, tfc_tensor *const *params, int64_t n, double max_norm, double *total_norm) {
    if (n > 0 && !params) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params is NULL with n = %lld", fn, (long long)n);
    if (!(max_norm > 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_norm is %g: must be > 0 (+INFINITY only measures)", fn, max_norm);
    const tfc_tensor *ref = NULL; /* the first gradient: the norm is taken on its device */
    for (int64_t i = 0; i < n && !ref; i++) {
        if (!params[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%lld] is NULL", fn, (long long)i);
        ref = params[i]->grad;
    }
    if (!ref) {
        for (int64_t i = 0; i < n; i++)
            if (!params[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%lld] is NULL", fn, (long long)i);
        if (total_norm) *total_norm = 0.0;
        return TFC_OK;
    }
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, ref, &be));
    for (int64_t i = 0; i < n; i++) {
        if (!params[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%lld] is NULL", fn, (long long)i);
        const tfc_tensor *g = params[i]->grad;
        if (!g) continue;
        char gname[64];
        snprintf(gname, sizeof gname, ref == g ? "the grad of params[%lld]" : "a later gradient", (long long)i);
        TFC_TRY(tfc_optim_check_grad(fn, gname, g, "the first gradient", ref, NULL));
        if (!tfc_backend_takes(be, g->dtype))
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: the grad of params[%lld] is %s %s: clipping on %s takes %s "
                           "gradients",
                           fn, (long long)i, tfc_dtype_name(g->dtype), SHAPE(g), be->name,
                           tfc_backend_dtype_list(be, "or"));
    }
    tfc_optim_seg small[32];
    tfc_optim_seg *segs = n <= 32 ? small : malloc((size_t)n * sizeof *segs);
    if (!segs) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int64_t nseg = 0, start = 0;
    for (int64_t i = 0; i < n; i++) {
        tfc_tensor *g = params[i]->grad;
        if (!g || tfc_numel(g) == 0) continue;
        tfc_optim_seg *s = &segs[nseg++];
        *s = (tfc_optim_seg){.grad = tfc_data(g), .n = tfc_numel(g), .start = start, .dtype = g->dtype};
        start += s->n;
    }
    double norm = 0;
    int32_t overflow = 0;
    tfc_grad_norm_problem pr = {
        .device = tfc_device_index(ref), .segs = segs, .nseg = nseg, .norm = &norm, .overflow = &overflow};
    tfc_status st = nseg ? TFC_BACKEND_RUN_DT(fn, be, grad_norm, &pr, ref->dtype) : TFC_OK;
    /* the norm comes back in host memory: the host waits for the gradients (tfc_optim_clip_grad_norm_async doesn't) */
    if (nseg) tfc_device_note_sync(ref->storage->device, pr.device, "tfc_clip_grad_norm: the norm read on the host");
    if (st == TFC_OK && !isfinite(norm))
        st = overflow ? tfc_err(TFC_ERR_NONFINITE, "%s: the total norm exceeds the %s range; gradients left unchanged",
                                fn, tfc_dtype_name(ref->dtype))
                      : tfc_err(TFC_ERR_NONFINITE,
                                "%s: the gradients hold %s: total norm is not finite; gradients "
                                "left unchanged",
                                fn, isnan(norm) ? "NaN" : "Inf");
    double c = max_norm / (norm + 1e-6);
    for (int64_t i = 0; i < n && st == TFC_OK && c < 1; i++)
        if (params[i]->grad) st = tfc_tensor_check_writable(fn, "a parameter's grad", params[i]->grad);
    if (st == TFC_OK && c < 1) {
        pr.c = c;
        st = TFC_BACKEND_RUN_DT(fn, be, grad_scale, &pr, ref->dtype);
        for (int64_t i = 0; i < n && st == TFC_OK; i++)
            if (params[i]->grad) tfc_bump_version(params[i]->grad);
    }
    if (st == TFC_OK && total_norm) *total_norm = norm;
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
    if (opt->shard) return tfc_optim_shard_clip(fn, opt, max_norm, total_norm);
    if (opt->n_params == 0) return clip(fn, NULL, 0, max_norm, total_norm);
    tfc_tensor **ps = malloc((size_t)opt->n_params * sizeof *ps);
    if (!ps) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int64_t k = 0; k < opt->n_params; k++) ps[k] = opt->params[k].p;
    tfc_status st = clip(fn, ps, opt->n_params, max_norm, total_norm);
    free(ps);
    return st;
}
