/*
 * The optimizer on CUDA: AdamW through the table's fused multi-tensor
 * `adamw` entry and gradient clipping through `grad_norm`. Same
 * bookkeeping as the CPU step (per-parameter step counts, state created
 * zeroed on first use, versions bumped); the per-element rule is PyTorch's
 * AdamW, as on the CPU. What the entry does not offer (SGD, Adam with
 * weight decay, amsgrad, maximize, non-f32 master weights) fails with
 * "not implemented on CUDA".
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "device/dispatch.h"
#include "optim/cuda_step.h"

int tfc_optim_any_cuda(const tfc_tensor *const *ts, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (ts[i] && tfc_is_cuda(ts[i])) return 1;
    return 0;
}

/* Parameter k and its grad: on the device of `ref`, f32, contiguous, not aliased. */
static tfc_status check_slot(const char *fn, int64_t k, const tfc_tensor *ref, const tfc_tensor *p) {
    const tfc_tensor *g = p->grad;
    const tfc_tensor *ts[3] = {ref, p, g};
    const char *names[3] = {"the first parameter with a gradient", "a parameter", "its grad"};
    TFC_TRY(tfc_same_device(fn, ts, names, 3));
    if (p->dtype != TFC_DTYPE_F32 || g->dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: parameter %lld is %s %s with a %s grad; the CUDA AdamW takes f32 master "
                       "weights and f32 grads", fn, (long long)k, tfc_dtype_name(p->dtype), SHAPE(p),
                       tfc_dtype_name(g->dtype));
    if (!tfc_is_contiguous(p) || !tfc_is_contiguous(g) || tfc_numel(g) != tfc_numel(p))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: parameter %lld %s or its grad %s is not contiguous or differs in "
                       "size: the fused update reads each as one block", fn, (long long)k, SHAPE(p), SHAPE(g));
    if (g->storage == p->storage)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: the grad of parameter %lld %s shares the parameter's memory", fn,
                       (long long)k, SHAPE(p));
    return TFC_OK;
}

tfc_status tfc_optim_step_cuda(const char *fn, tfc_optim *opt) {
    const tfc_optim_options *o = &opt->opts;
    int no_decay = 1;
    for (int32_t i = 0; i < opt->n_groups; i++) no_decay &= opt->groups[i].weight_decay == 0.0;
    /* Adam without weight decay is AdamW without weight decay. */
    if (!(opt->kind == TFC_OPTIM_ADAMW || (opt->kind == TFC_OPTIM_ADAM && no_decay)))
        return tfc_cuda_unimplemented(fn, opt->kind == TFC_OPTIM_SGD ? "SGD" : "Adam with (coupled) weight decay");
    if (o->amsgrad) return tfc_cuda_unimplemented(fn, "AdamW with amsgrad");
    if (o->maximize) return tfc_cuda_unimplemented(fn, "AdamW with maximize");
    const tfc_tensor *ref = NULL;
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        if (!pp->p->grad) continue;
        if (!ref) ref = pp->p;
        TFC_TRY(check_slot(fn, k, ref, pp->p));
        TFC_TRY(tfc_optim_alloc_state(fn, opt, pp));
    }
    if (!ref) {
        opt->step++;
        return TFC_OK;
    }
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, ref, &api, &dev));
    size_t n = (size_t)opt->n_params;
    float **params = malloc(n * sizeof *params), **m = malloc(n * sizeof *m), **v = malloc(n * sizeof *v);
    const void **grads = malloc(n * sizeof *grads);
    size_t *numel = malloc(n * sizeof *numel);
    float *wd = malloc(n * sizeof *wd);
    char *done = calloc(n, 1);
    tfc_status s = TFC_OK;
    if (!params || !m || !v || !grads || !numel || !wd || !done) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    /* One launch per distinct (step, lr): parameters skipped on earlier steps have their own counts. */
    for (int64_t first = 0; first < opt->n_params && s == TFC_OK; first++) {
        tfc_optim_slot *f = &opt->params[first];
        if (done[first] || !f->p->grad || tfc_numel(f->p) == 0) continue;
        double lr = opt->groups[f->group].lr;
        int64_t step = f->step + 1;
        int32_t count = 0;
        for (int64_t k = first; k < opt->n_params; k++) {
            tfc_optim_slot *pp = &opt->params[k];
            if (done[k] || !pp->p->grad || tfc_numel(pp->p) == 0) continue;
            if (pp->step + 1 != step || opt->groups[pp->group].lr != lr) continue;
            done[k] = 1;
            params[count] = tfc_data(pp->p);
            grads[count] = tfc_data(pp->p->grad);
            m[count] = tfc_data(pp->buf[0]);
            v[count] = tfc_data(pp->buf[1]);
            numel[count] = (size_t)tfc_numel(pp->p);
            wd[count] = (float)opt->groups[pp->group].weight_decay;
            count++;
        }
        tfc_cuda_adamw_desc d = {
            .struct_size = sizeof d, .count = count, .grad_dtype = TFC_DTYPE_F32, .params = params,
            .grads = grads, .m = m, .v = v, .params_bf16 = NULL, .numel = numel, .weight_decay = wd,
            .grad_scale = NULL, .lr = (float)lr, .beta1 = (float)o->beta1, .beta2 = (float)o->beta2,
            .eps = (float)o->eps, .step = step,
        };
        s = tfc_cuda_done(fn, "adamw", api, api->adamw(dev, &d));
    }
    free(params), free(m), free(v), free(grads), free(numel), free(wd), free(done);
    TFC_TRY(s);
    tfc_optim_commit(opt);
    return TFC_OK;
}

tfc_status tfc_clip_cuda(const char *fn, tfc_tensor *const *params, int64_t n, double max_norm, double *total_norm) {
    const tfc_tensor *ref = NULL;
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        const tfc_tensor *g = params[i]->grad;
        if (!g || tfc_numel(g) == 0) continue;
        if (!ref) ref = g;
        const tfc_tensor *ts[2] = {ref, g};
        const char *names[2] = {"the first gradient", "a later gradient"};
        TFC_TRY(tfc_same_device(fn, ts, names, 2));
        if (g->dtype != ref->dtype || (g->dtype != TFC_DTYPE_F32 && g->dtype != TFC_DTYPE_BF16) ||
            !tfc_is_contiguous(g))
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: the grad of params[%lld] is %s %s%s: clipping on CUDA needs "
                           "contiguous gradients of one dtype, f32 or bf16", fn, (long long)i,
                           tfc_dtype_name(g->dtype), SHAPE(g), tfc_is_contiguous(g) ? "" : " (not contiguous)");
        count++;
    }
    if (!ref) {
        if (total_norm) *total_norm = 0.0;
        return TFC_OK;
    }
    if (count > INT32_MAX) return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %lld gradients", fn, (long long)count);
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, ref, &api, &dev));
    const void **ptrs = malloc((size_t)count * sizeof *ptrs);
    size_t *numel = malloc((size_t)count * sizeof *numel);
    tfc_tensor *norm_t = NULL;
    tfc_status s = ptrs && numel ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int32_t k = 0;
    for (int64_t i = 0; i < n && s == TFC_OK; i++) {
        const tfc_tensor *g = params[i]->grad;
        if (!g || tfc_numel(g) == 0) continue;
        ptrs[k] = tfc_data(g);
        numel[k++] = (size_t)tfc_numel(g);
    }
    if (s == TFC_OK) s = tfc_tensor_new_on(ref, NULL, 0, TFC_DTYPE_F32, &norm_t);
    if (s == TFC_OK)
        s = tfc_cuda_done(fn, "grad_norm", api,
                          api->grad_norm(dev, ref->dtype, ptrs, numel, k, (float)max_norm, tfc_data(norm_t), NULL));
    float normf = 0;
    /* The host needs the norm (the return value, and whether to scale): one stream sync. */
    if (s == TFC_OK) s = tfc_tensor_copy_to_host(norm_t, &normf, sizeof normf);
    free(ptrs);
    free(numel);
    tfc_tensor_release(norm_t);
    TFC_TRY(s);
    double norm = normf;
    if (!isfinite(norm))
        return tfc_err(TFC_ERR_NONFINITE, "%s: the total gradient norm on CUDA is %s (a NaN/Inf gradient, or f32 "
                       "overflow); gradients left unchanged", fn, isnan(norm) ? "NaN" : "Inf");
    double c = max_norm / (norm + 1e-6);
    if (c < 1) {
        for (int64_t i = 0; i < n && s == TFC_OK; i++) {
            tfc_tensor *g = params[i]->grad;
            if (!g || tfc_numel(g) == 0) continue;
            s = tfc_cuda_done(fn, "binary_scalar", api,
                              api->binary_scalar(dev, TFC_CUDA_MUL, g->dtype, tfc_data(g), c, tfc_data(g),
                                                 (size_t)tfc_numel(g)));
            if (s == TFC_OK) tfc_bump_version(g);
        }
        TFC_TRY(s);
    }
    if (total_norm) *total_norm = norm;
    return TFC_OK;
}
