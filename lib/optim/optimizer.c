/*
 * The optimizer handle: parameter groups, their learning rates and weight
 * decays, the parameters' state buffers, zero_grad, release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "core/error.h"
#include "optim/optim_impl.h"

TFC_API void tfc_optim_release(tfc_optim *opt) {
    if (!opt) return;
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_tensor_release(opt->params[k].p);
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) tfc_tensor_release(opt->params[k].buf[j]);
    }
    free(opt->params);
    free(opt->groups);
    free(opt->segs);
    tfc_optim_shard_free(opt->shard);
    free(opt);
}

int32_t tfc_optim_num_bufs(const tfc_optim *o) {
    if (o->kind == TFC_OPTIM_SGD) return o->opts.momentum != 0 ? 1 : 0;
    return o->opts.amsgrad ? 3 : 2;
}

const char *tfc_optim_buf_name(const tfc_optim *o, int32_t i) {
    static const char *const adam[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    if (o->kind == TFC_OPTIM_SGD) return "momentum_buffer";
    return adam[i];
}

int tfc_optim_has_param_step(const tfc_optim *o) { return o->kind != TFC_OPTIM_SGD; }

tfc_status tfc_optim_refuse_sharded(const char *fn, const tfc_optim *o) {
    if (!o->shard) return TFC_OK;
    return tfc_err(TFC_ERR_UNSUPPORTED,
                   "%s: the optimizer is sharded across ranks (ZeRO-1, tfc_optim_shard); its whole state is on no "
                   "rank: gather it first with tfc_optim_gather",
                   fn);
}

tfc_status tfc_optim_alloc_state(const char *fn, tfc_optim *o, tfc_optim_slot *pp) {
    for (int32_t j = 0; j < tfc_optim_num_bufs(o); j++) {
        if (pp->buf[j]) continue;
        tfc_status s = tfc_tensor_zeros_like(pp->p, pp->p->dtype, &pp->buf[j]);
        if (s != TFC_OK)
            return tfc_err(s, "%s: cannot allocate %s for a parameter %s: %s", fn, tfc_optim_buf_name(o, j),
                           SHAPE(pp->p), tfc_last_error());
    }
    return TFC_OK;
}

tfc_status tfc_optim_reserve_segs(const char *fn, tfc_optim *o, int64_t n) {
    if (n <= o->cap_segs) return TFC_OK;
    tfc_optim_seg *s = realloc(o->segs, (size_t)n * sizeof *s);
    if (!s) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    o->segs = s;
    o->cap_segs = n;
    return TFC_OK;
}

/* Do a and b touch any common element of one storage? (contiguous ranges) */
static int overlaps(const tfc_tensor *a, const tfc_tensor *b) {
    if (a->storage != b->storage) return 0;
    int64_t na = tfc_numel(a), nb = tfc_numel(b);
    if (na == 0 || nb == 0) return a == b;
    return a->offset < b->offset + nb && b->offset < a->offset + na;
}

static tfc_status check_param(const char *fn, const tfc_optim *o, tfc_tensor *const *params, int32_t i) {
    const tfc_tensor *p = params[i];
    if (!p) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%d] is NULL", fn, (int)i);
    if (p->node)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: params[%d] %s is not a leaf (produced by %s): only leaves "
                       "can be optimized",
                       fn, (int)i, SHAPE(p), p->node->name);
    if (p->dtype != TFC_DTYPE_F32 && p->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_DTYPE, "%s: params[%d] %s is %s: the optimizers take f32 or f64 parameters", fn, (int)i,
                       SHAPE(p), tfc_dtype_name(p->dtype));
    /* CUDA parameters are accepted; tfc_optim_step checks what the device path supports. */
    if (!tfc_is_contiguous(p))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: params[%d] %s is not contiguous: the fused update needs "
                       "each parameter in one block of memory",
                       fn, (int)i, SHAPE(p));
    for (int64_t k = 0; k < o->n_params; k++)
        if (overlaps(p, o->params[k].p))
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: params[%d] %s %s parameter %lld (group %d) of this "
                           "optimizer: a parameter belongs to one group only",
                           fn, (int)i, SHAPE(p), p == o->params[k].p ? "is already" : "overlaps the memory of",
                           (long long)k, (int)o->params[k].group);
    for (int32_t j = 0; j < i; j++)
        if (overlaps(p, params[j]))
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%d] %s %s params[%d]", fn, (int)i, SHAPE(p),
                           p == params[j] ? "is the same tensor as" : "overlaps the memory of", (int)j);
    return TFC_OK;
}

static tfc_status add_group(const char *fn, tfc_optim *opt, tfc_tensor *const *params, int32_t n, double lr, double wd,
                            int32_t *group) {
    TFC_CHECK_NOT_NULL(fn, opt);
    tfc_optim *o = opt;
    TFC_TRY(tfc_optim_refuse_sharded(fn, o));
    if (n < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d: must be >= 0", fn, (int)n);
    if (n > 0 && !params) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params is NULL with n = %d", fn, (int)n);
    TFC_TRY(tfc_optim_check_nonneg(fn, "lr", lr));
    TFC_TRY(tfc_optim_check_nonneg(fn, "weight_decay", wd));
    for (int32_t i = 0; i < n; i++) TFC_TRY(check_param(fn, o, params, i));
    if (o->n_groups == INT32_MAX) return tfc_err(TFC_ERR_INVALID_ARG, "%s: too many groups", fn);
    if (o->n_groups == o->cap_groups) {
        int32_t cap = o->cap_groups ? o->cap_groups * 2 : 4;
        tfc_optim_group *g = realloc(o->groups, (size_t)cap * sizeof *g);
        if (!g) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        o->groups = g;
        o->cap_groups = cap;
    }
    if (o->n_params + n > o->cap_params) {
        int64_t cap = o->cap_params ? o->cap_params : 16;
        while (cap < o->n_params + n) cap *= 2;
        tfc_optim_slot *p = realloc(o->params, (size_t)cap * sizeof *p);
        if (!p) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        o->params = p;
        o->cap_params = cap;
    }
    int32_t g = o->n_groups++;
    o->groups[g].lr = lr;
    o->groups[g].weight_decay = wd;
    for (int32_t i = 0; i < n; i++) {
        tfc_optim_slot *pp = &o->params[o->n_params++];
        memset(pp, 0, sizeof *pp);
        pp->p = tfc_tensor_retain(params[i]);
        pp->group = g;
    }
    if (group) *group = g;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_add_group(tfc_optim *opt, tfc_tensor *const *params, int32_t n, double lr,
                                       double weight_decay, int32_t *group) {
    return add_group("tfc_optim_add_group", opt, params, n, lr, weight_decay, group);
}

TFC_API tfc_status tfc_optim_add_params(tfc_optim *opt, tfc_tensor *const *params, int32_t n, int32_t *group) {
    TFC_CHECK_NOT_NULL("tfc_optim_add_params", opt);
    return add_group("tfc_optim_add_params", opt, params, n, opt->opts.lr, opt->opts.weight_decay, group);
}

TFC_API tfc_status tfc_optim_num_groups(const tfc_optim *opt, int32_t *out) {
    TFC_CHECK_NOT_NULL("tfc_optim_num_groups", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_num_groups", out);
    *out = opt->n_groups;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_num_params(const tfc_optim *opt, int64_t *out) {
    TFC_CHECK_NOT_NULL("tfc_optim_num_params", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_num_params", out);
    *out = opt->n_params;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_param(const tfc_optim *opt, int64_t k, tfc_tensor **param, int32_t *group) {
    const char *fn = "tfc_optim_param";
    TFC_CHECK_NOT_NULL(fn, opt);
    TFC_CHECK_NOT_NULL(fn, param);
    if (k < 0 || k >= opt->n_params)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: k is %lld: the optimizer has %lld parameters", fn, (long long)k,
                       (long long)opt->n_params);
    *param = tfc_tensor_retain(opt->params[k].p);
    if (group) *group = opt->params[k].group;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_zero_grad(tfc_optim *opt, int32_t set_to_none) {
    const char *fn = "tfc_optim_zero_grad";
    TFC_CHECK_NOT_NULL(fn, opt);
    /* zeroing writes every .grad in place: all of them writable, or none is zeroed */
    for (int64_t k = 0; k < opt->n_params && !set_to_none; k++) {
        char gname[64];
        snprintf(gname, sizeof gname, "the grad of parameter %lld", (long long)k);
        TFC_TRY(tfc_tensor_check_writable(fn, gname, opt->params[k].p->grad));
    }
    for (int64_t k = 0; k < opt->n_params; k++) TFC_TRY(tfc_tensor_zero_grad(opt->params[k].p, set_to_none));
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_state_bytes(const tfc_optim *opt, int64_t *out) {
    TFC_CHECK_NOT_NULL("tfc_optim_state_bytes", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_state_bytes", out);
    int64_t total = 0;
    for (int64_t k = 0; k < opt->n_params; k++)
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) {
            const tfc_tensor *b = opt->params[k].buf[j];
            if (b) total += tfc_numel(b) * (int64_t)tfc_dtype_size(b->dtype);
        }
    *out = total;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_step_count(const tfc_optim *opt, int64_t *out) {
    TFC_CHECK_NOT_NULL("tfc_optim_step_count", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_step_count", out);
    *out = opt->step;
    return TFC_OK;
}

/* ---- learning rate and weight decay ------------------------------------------ */

static tfc_status check_group(const char *fn, const tfc_optim *opt, int32_t group) {
    TFC_CHECK_NOT_NULL(fn, opt);
    const tfc_optim *o = opt;
    if (group < 0 || group >= o->n_groups)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: group is %d: the optimizer has %d groups", fn, (int)group,
                       (int)o->n_groups);
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_set_lr(tfc_optim *opt, double lr) {
    TFC_CHECK_NOT_NULL("tfc_optim_set_lr", opt);
    TFC_TRY(tfc_optim_check_nonneg("tfc_optim_set_lr", "lr", lr));
    opt->opts.lr = lr;
    for (int32_t g = 0; g < opt->n_groups; g++) opt->groups[g].lr = lr;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_get_lr(const tfc_optim *opt, double *lr) {
    TFC_CHECK_NOT_NULL("tfc_optim_get_lr", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_get_lr", lr);
    *lr = opt->opts.lr;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_set_group_lr(tfc_optim *opt, int32_t group, double lr) {
    TFC_TRY(check_group("tfc_optim_set_group_lr", opt, group));
    TFC_TRY(tfc_optim_check_nonneg("tfc_optim_set_group_lr", "lr", lr));
    opt->groups[group].lr = lr;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_get_group_lr(const tfc_optim *opt, int32_t group, double *lr) {
    TFC_TRY(check_group("tfc_optim_get_group_lr", opt, group));
    TFC_CHECK_NOT_NULL("tfc_optim_get_group_lr", lr);
    *lr = opt->groups[group].lr;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_set_group_weight_decay(tfc_optim *opt, int32_t group, double wd) {
    TFC_TRY(check_group("tfc_optim_set_group_weight_decay", opt, group));
    TFC_TRY(tfc_optim_check_nonneg("tfc_optim_set_group_weight_decay", "wd", wd));
    opt->groups[group].weight_decay = wd;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_get_group_weight_decay(const tfc_optim *opt, int32_t group, double *wd) {
    TFC_TRY(check_group("tfc_optim_get_group_weight_decay", opt, group));
    TFC_CHECK_NOT_NULL("tfc_optim_get_group_weight_decay", wd);
    *wd = opt->groups[group].weight_decay;
    return TFC_OK;
}
