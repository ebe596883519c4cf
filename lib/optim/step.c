/*
 * One optimizer step: the per-parameter bookkeeping of SGD and Adam(W)
 * (momentum buffer creation, each parameter's own step count and bias
 * corrections), then one fused kernel pass over all parameters with a
 * gradient, through the backend's optim_step entry. The per-element rules
 * are in lib/cpu/optim_kernels.h; the formulas with their PyTorch
 * correspondences in docs/OPTIM.md.
 */
#include <math.h>

#include <stdio.h>

#include "core/dtype.h"
#include "core/error.h"
#include "optim/optim_impl.h"
#include "tensor/dispatch.h"

/* After a step's kernels ran (CPU or CUDA): every parameter with a gradient
 * now has state and one more step, and the in-place writes to it and its
 * buffers are visible to autograd's version counters; opt->step advances. */
static void commit(tfc_optim *opt) {
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

/* Every gradient as the fused pass reads it, on ref's backend, and every parameter's state allocated. */
static tfc_status check_and_reserve(const char *fn, tfc_optim *opt, const tfc_tensor *ref, const tfc_backend *be) {
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        if (!pp->p->grad) continue;
        char gname[64];
        snprintf(gname, sizeof gname, "the grad of parameter %lld", (long long)k);
        const tfc_tensor *ts[2] = {ref, pp->p};
        const char *names[2] = {"the first parameter with a gradient", "a parameter"};
        TFC_TRY(tfc_same_device(fn, ts, names, 2));
        TFC_TRY(tfc_optim_check_grad(fn, gname, pp->p->grad, "the first parameter with a gradient", ref, pp->p));
        snprintf(gname, sizeof gname, "parameter %lld", (long long)k);
        TFC_TRY(tfc_tensor_check_writable(fn, gname, pp->p));
        if (!tfc_backend_takes(be, pp->p->dtype))
            return tfc_err(TFC_ERR_DTYPE, "%s: parameter %lld is %s %s; the optimizer on %s takes %s", fn, (long long)k,
                           tfc_dtype_name(pp->p->dtype), SHAPE(pp->p), be->name, tfc_backend_dtype_list(be, "or"));
        TFC_TRY(tfc_optim_alloc_state(fn, opt, pp));
    }
    return TFC_OK;
}

/* The parameters with a gradient laid end to end in opt->segs, each with its own scalars; returns their count. */
static int64_t lay_segments(tfc_optim *opt) {
    const tfc_optim_options *o = &opt->opts;
    const int adam = opt->kind != TFC_OPTIM_SGD;
    int64_t nseg = 0, start = 0;
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        int64_t n = tfc_numel(pp->p);
        if (!pp->p->grad || n == 0) continue;
        const tfc_optim_group *g = &opt->groups[pp->group];
        tfc_optim_seg *s = &opt->segs[nseg++];
        *s = (tfc_optim_seg){.param = tfc_data(pp->p),
                             .grad = tfc_data(pp->p->grad),
                             .n = n,
                             .start = start,
                             .dtype = pp->p->dtype,
                             .first = !pp->has_state,
                             .step = pp->step + 1,
                             .lr = g->lr,
                             .weight_decay = g->weight_decay};
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) s->buf[j] = pp->buf[j] ? tfc_data(pp->buf[j]) : NULL;
        start += n;
        if (adam) {
            /* torch: bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1. */
            double t = (double)(pp->step + 1);
            s->step_size = g->lr / (1.0 - pow(o->beta1, t));
            s->bc2_sqrt = sqrt(1.0 - pow(o->beta2, t));
        }
    }
    return nseg;
}

/* The step's rule and hyperparameters (segments and device left for the caller). */
static tfc_optim_problem problem_of(const tfc_optim *opt) {
    const tfc_optim_options *o = &opt->opts;
    return (tfc_optim_problem){
        .rule = opt->kind != TFC_OPTIM_SGD ? TFC_OPTIM_RULE_ADAM : TFC_OPTIM_RULE_SGD,
        .momentum = o->momentum,
        .dampening = o->dampening,
        .beta1 = o->beta1,
        .beta2 = o->beta2,
        .eps = o->eps,
        .nesterov = o->nesterov,
        .amsgrad = o->amsgrad,
        .decoupled = opt->kind == TFC_OPTIM_ADAMW,
        .maximize = o->maximize,
    };
}

TFC_API tfc_status tfc_optim_step(tfc_optim *opt) {
    const char *fn = "tfc_optim_step";
    TFC_CHECK_NOT_NULL(fn, opt);
    if (opt->shard) {
        const tfc_optim_problem proto = problem_of(opt);
        return tfc_optim_shard_step(fn, opt, &proto);
    }
    TFC_TRY(tfc_optim_reserve_segs(fn, opt, opt->n_params));
    const tfc_tensor *ref = NULL; /* the first parameter with a gradient: the step runs on its device */
    for (int64_t k = 0; k < opt->n_params && !ref; k++)
        if (opt->params[k].p->grad) ref = opt->params[k].p;
    if (!ref) {
        opt->step++;
        return TFC_OK;
    }
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, ref, &be));
    /* 1. Check everything and allocate missing state before writing anything. */
    TFC_TRY(check_and_reserve(fn, opt, ref, be));
    /* 2. The fused pass. */
    tfc_optim_problem pr = problem_of(opt);
    pr.device = tfc_device_index(ref);
    pr.segs = opt->segs;
    pr.nseg = lay_segments(opt);
    if (pr.nseg > 0) TFC_TRY(TFC_BACKEND_RUN_DT(fn, be, optim_step, &pr, ref->dtype));
    /* 3. Commit: state exists now, counts advance, in-place writes are visible to autograd. */
    commit(opt);
    return TFC_OK;
}
