/*
 * One optimizer step: the per-parameter bookkeeping of SGD and Adam(W)
 * (momentum buffer creation, each parameter's own step count and bias
 * corrections), then one fused kernel pass over all parameters with a
 * gradient. The per-element rules are in lib/cpu/optim_kernels.h; the
 * formulas with their PyTorch correspondences in docs/OPTIM.md.
 */
#include <math.h>

#include "core/error.h"
#include "optim/cuda_step.h"

/* Declared in optim_impl.h. */
void tfc_optim_commit(tfc_optim *opt) {
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        if (!pp->p->grad) continue;
        pp->has_state = 1;
        pp->step++;
        tfc_bump_version(pp->p);
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++)
            if (pp->buf[j]) tfc_bump_version(pp->buf[j]);
    }
    opt->step++;
}

/* A gradient the fused pass can read as one block of param's dtype. */
static tfc_status check_grad(const char *fn, int64_t k, const tfc_tensor *p, const tfc_tensor *g) {
    if (g->dtype != p->dtype || tfc_numel(g) != tfc_numel(p))
        return tfc_err(TFC_ERR_INTERNAL, "%s: parameter %lld is %s %s but its grad is %s %s", fn, (long long)k,
                       tfc_dtype_name(p->dtype), SHAPE(p), tfc_dtype_name(g->dtype), SHAPE(g));
    if (g->storage->device != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: the grad of parameter %lld %s is not on the CPU", fn,
                       (long long)k, SHAPE(p));
    if (!tfc_is_contiguous(g))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: the grad of parameter %lld %s is not contiguous (set with "
                       "tfc_tensor_set_grad?): the fused update reads it as one block", fn, (long long)k, SHAPE(p));
    if (g->storage == p->storage)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: the grad of parameter %lld %s shares the parameter's memory",
                       fn, (long long)k, SHAPE(p));
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_step(tfc_optim *opt) {
    const char *fn = "tfc_optim_step";
    TFC_CHECK_NOT_NULL(fn, opt);
    for (int64_t k = 0; k < opt->n_params; k++) {
        const tfc_tensor *pg[2] = {opt->params[k].p, opt->params[k].p->grad};
        if (pg[1] && tfc_optim_any_cuda(pg, 2)) return tfc_optim_step_cuda(fn, opt);
    }
    /* 1. Check every gradient and allocate missing state before writing anything. */
    TFC_TRY(tfc_optim_reserve_segs(fn, opt, opt->n_params));
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        if (!pp->p->grad) continue;
        TFC_TRY(check_grad(fn, k, pp->p, pp->p->grad));
        TFC_TRY(tfc_optim_alloc_state(fn, opt, pp));
    }
    /* 2. Lay the parameters with a gradient end to end, each with its own scalars. */
    const tfc_optim_options *o = &opt->opts;
    int adam = opt->kind != TFC_OPTIM_SGD;
    int64_t nseg = 0, start = 0;
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        int64_t n = tfc_numel(pp->p);
        if (!pp->p->grad || n == 0) continue;
        const tfc_optim_group *g = &opt->groups[pp->group];
        tfc_optim_seg *s = &opt->segs[nseg++];
        s->param = tfc_data(pp->p);
        s->grad = tfc_data(pp->p->grad);
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) s->buf[j] = pp->buf[j] ? tfc_data(pp->buf[j]) : NULL;
        s->n = n;
        s->start = start;
        start += n;
        s->dtype = pp->p->dtype;
        s->first = !pp->has_state;
        s->lr = g->lr;
        s->weight_decay = g->weight_decay;
        if (adam) {
            /* torch: bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1. */
            double t = (double)(pp->step + 1);
            s->step_size = g->lr / (1.0 - pow(o->beta1, t));
            s->bc2_sqrt = sqrt(1.0 - pow(o->beta2, t));
        } else {
            s->step_size = s->bc2_sqrt = 0;
        }
    }
    /* 3. The fused pass. */
    tfc_optim_hyper h = {
        .momentum = o->momentum, .dampening = o->dampening, .beta1 = o->beta1, .beta2 = o->beta2,
        .eps = o->eps, .nesterov = o->nesterov, .amsgrad = o->amsgrad,
        .decoupled = opt->kind == TFC_OPTIM_ADAMW, .maximize = o->maximize,
    };
    if (adam) tfc_cpu_adam_step(&h, opt->segs, nseg);
    else tfc_cpu_sgd_step(&h, opt->segs, nseg);
    /* 4. Commit: state exists now, counts advance, in-place writes are visible to autograd. */
    tfc_optim_commit(opt);
    return TFC_OK;
}
