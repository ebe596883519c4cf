/*
 * Optimizer state as named tensors, for checkpoints (docs/OPTIM.md,
 * "State format"). The entry list is derived on demand from the handle:
 *   step, group.<g>.lr, group.<g>.weight_decay, then for each parameter k
 *   with state: param.<k>.step (Adam/AdamW), param.<k>.<buffer>...
 * Loading checks every entry before applying any.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim_impl.h"

typedef enum entry_kind { E_STEP, E_GROUP_LR, E_GROUP_WD, E_PARAM_STEP, E_PARAM_BUF } entry_kind;

typedef struct entry {
    entry_kind kind;
    int64_t index; /* group or parameter number */
    int32_t buf;   /* E_PARAM_BUF: which buffer */
} entry;

static int64_t param_entries(const tfc_optim *o) {
    return tfc_optim_num_bufs(o) + (tfc_optim_has_param_step(o) ? 1 : 0);
}

static int64_t count_entries(const tfc_optim *o) {
    int64_t n = 1 + 2 * (int64_t)o->n_groups;
    for (int64_t k = 0; k < o->n_params; k++)
        if (o->params[k].has_state) n += param_entries(o);
    return n;
}

/* Entry i in the documented order; 0 when out of range. */
static int entry_at(const tfc_optim *o, int64_t i, entry *e) {
    if (i < 0) return 0;
    if (i == 0) {
        *e = (entry){E_STEP, 0, 0};
        return 1;
    }
    i -= 1;
    if (i < 2 * (int64_t)o->n_groups) {
        *e = (entry){i % 2 ? E_GROUP_WD : E_GROUP_LR, i / 2, 0};
        return 1;
    }
    i -= 2 * (int64_t)o->n_groups;
    int64_t per = param_entries(o);
    int has_step = tfc_optim_has_param_step(o);
    for (int64_t k = 0; k < o->n_params; k++) {
        if (!o->params[k].has_state) continue;
        if (i < per) {
            if (has_step && i == 0)
                *e = (entry){E_PARAM_STEP, k, 0};
            else
                *e = (entry){E_PARAM_BUF, k, (int32_t)(i - has_step)};
            return 1;
        }
        i -= per;
    }
    return 0;
}

TFC_API tfc_status tfc_optim_state_count(const tfc_optim *opt, int64_t *n) {
    TFC_CHECK_NOT_NULL("tfc_optim_state_count", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_state_count", n);
    TFC_TRY(tfc_optim_refuse_sharded("tfc_optim_state_count", opt));
    *n = count_entries(opt);
    return TFC_OK;
}

static tfc_status scalar_tensor(const char *fn, tfc_dtype dtype, const void *value, tfc_tensor **out) {
    tfc_status s = tfc_tensor_from_data(value, NULL, 0, dtype, out);
    if (s != TFC_OK) return tfc_err(s, "%s: %s", fn, tfc_last_error());
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_state_get(const tfc_optim *opt, int64_t i, char **name, tfc_tensor **tensor) {
    const char *fn = "tfc_optim_state_get";
    TFC_CHECK_NOT_NULL(fn, opt);
    TFC_TRY(tfc_optim_refuse_sharded(fn, opt));
    entry e;
    if (!entry_at(opt, i, &e))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: i is %lld: the optimizer has %lld state entries", fn, (long long)i,
                       (long long)count_entries(opt));
    char buf[96];
    switch (e.kind) {
    case E_STEP: snprintf(buf, sizeof buf, "step"); break;
    case E_GROUP_LR: snprintf(buf, sizeof buf, "group.%lld.lr", (long long)e.index); break;
    case E_GROUP_WD: snprintf(buf, sizeof buf, "group.%lld.weight_decay", (long long)e.index); break;
    case E_PARAM_STEP: snprintf(buf, sizeof buf, "param.%lld.step", (long long)e.index); break;
    case E_PARAM_BUF:
        snprintf(buf, sizeof buf, "param.%lld.%s", (long long)e.index, tfc_optim_buf_name(opt, e.buf));
        break;
    }
    tfc_tensor *t = NULL;
    if (tensor) {
        switch (e.kind) {
        case E_STEP: TFC_TRY(scalar_tensor(fn, TFC_DTYPE_I64, &opt->step, &t)); break;
        case E_GROUP_LR: TFC_TRY(scalar_tensor(fn, TFC_DTYPE_F64, &opt->groups[e.index].lr, &t)); break;
        case E_GROUP_WD: TFC_TRY(scalar_tensor(fn, TFC_DTYPE_F64, &opt->groups[e.index].weight_decay, &t)); break;
        case E_PARAM_STEP: TFC_TRY(scalar_tensor(fn, TFC_DTYPE_I64, &opt->params[e.index].step, &t)); break;
        case E_PARAM_BUF: t = tfc_tensor_retain(opt->params[e.index].buf[e.buf]); break;
        }
    }
    if (name) {
        char *s = strdup(buf);
        if (!s) {
            tfc_tensor_release(t);
            return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        }
        *name = s;
    }
    if (tensor) *tensor = t;
    return TFC_OK;
}

/* ---- loading -------------------------------------------------------------- */

/* "<digits>" at *s, up to the next '.' or the end; advances *s. */
static int parse_index(const char **s, int64_t *out) {
    const char *p = *s;
    if (*p < '0' || *p > '9') return 0;
    errno = 0;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (errno || (*end != '.' && *end != '\0')) return 0;
    *out = v;
    *s = end;
    return 1;
}

/* Name → entry for this optimizer, or TFC_ERR_INVALID_ARG naming what is wrong. */
static tfc_status parse_name(const char *fn, const tfc_optim *o, int64_t i, const char *name, entry *e) {
    const char *s = name;
    int64_t idx;
    if (strcmp(name, "step") == 0) {
        *e = (entry){E_STEP, 0, 0};
        return TFC_OK;
    }
    if (strncmp(s, "group.", 6) == 0) {
        s += 6;
        if (!parse_index(&s, &idx) || *s != '.') goto unknown;
        if (idx >= o->n_groups)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%lld] '%s': group %lld, but the optimizer has %d groups", fn,
                           (long long)i, name, (long long)idx, (int)o->n_groups);
        if (strcmp(s, ".lr") == 0)
            *e = (entry){E_GROUP_LR, idx, 0};
        else if (strcmp(s, ".weight_decay") == 0)
            *e = (entry){E_GROUP_WD, idx, 0};
        else
            goto unknown;
        return TFC_OK;
    }
    if (strncmp(s, "param.", 6) == 0) {
        s += 6;
        if (!parse_index(&s, &idx) || *s != '.') goto unknown;
        s++;
        if (idx >= o->n_params)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: names[%lld] '%s': parameter %lld, but the optimizer has %lld "
                           "parameters",
                           fn, (long long)i, name, (long long)idx, (long long)o->n_params);
        if (strcmp(s, "step") == 0) {
            if (!tfc_optim_has_param_step(o))
                return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%lld] '%s': %s keeps no per-parameter step", fn,
                               (long long)i, name, tfc_optim_kind_name(o->kind));
            *e = (entry){E_PARAM_STEP, idx, 0};
            return TFC_OK;
        }
        for (int32_t j = 0; j < tfc_optim_num_bufs(o); j++)
            if (strcmp(s, tfc_optim_buf_name(o, j)) == 0) {
                *e = (entry){E_PARAM_BUF, idx, j};
                return TFC_OK;
            }
        static const char *const known[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"};
        for (size_t j = 0; j < sizeof known / sizeof *known; j++)
            if (strcmp(s, known[j]) == 0)
                return tfc_err(TFC_ERR_INVALID_ARG,
                               "%s: names[%lld] '%s': this %s optimizer has no %s "
                               "(momentum %g, amsgrad %d)",
                               fn, (long long)i, name, tfc_optim_kind_name(o->kind), known[j], o->opts.momentum,
                               (int)o->opts.amsgrad);
    }
unknown:
    return tfc_err(TFC_ERR_INVALID_ARG,
                   "%s: names[%lld] '%s' is not an optimizer state name (see "
                   "tfc_optim_state_get)",
                   fn, (long long)i, name);
}

/* The single value of a numeric scalar tensor. */
static tfc_status scalar_value(const char *fn, int64_t i, const char *name, const tfc_tensor *t, double *v) {
    if (tfc_numel(t) != 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: tensors[%lld] for '%s' is %s: must hold one element", fn, (long long)i, name,
                       SHAPE(t));
    const void *d = tfc_data(t);
    switch (t->dtype) {
    case TFC_DTYPE_F32: *v = *(const float *)d; break;
    case TFC_DTYPE_F64: *v = *(const double *)d; break;
    case TFC_DTYPE_I32: *v = *(const int32_t *)d; break;
    case TFC_DTYPE_I64: {
        int64_t x = *(const int64_t *)d;
        if (x > (INT64_C(1) << 53) || x < -(INT64_C(1) << 53)) {
            *v = NAN;
            break;
        }
        *v = (double)x;
        break;
    }
    default:
        return tfc_err(TFC_ERR_DTYPE, "%s: tensors[%lld] for '%s' is %s: must be f32, f64, i32 or i64", fn,
                       (long long)i, name, tfc_dtype_name(t->dtype));
    }
    return TFC_OK;
}

typedef struct parsed {
    entry e;
    double value; /* scalars */
} parsed;

static tfc_status check_entry(const char *fn, const tfc_optim *o, int64_t i, const char *name, const tfc_tensor *t,
                              parsed *pe) {
    if (!name) return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%lld] is NULL", fn, (long long)i);
    if (!t) return tfc_err(TFC_ERR_INVALID_ARG, "%s: tensors[%lld] ('%s') is NULL", fn, (long long)i, name);
    TFC_TRY(parse_name(fn, o, i, name, &pe->e));
    if (t->storage->device != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: tensors[%lld] for '%s' is not on the CPU", fn, (long long)i, name);
    if (pe->e.kind == E_PARAM_BUF) {
        const tfc_tensor *p = o->params[pe->e.index].p;
        int same = t->ndim == p->ndim;
        for (int32_t d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (!same)
            return tfc_err(TFC_ERR_SHAPE, "%s: tensors[%lld] for '%s' is %s but parameter %lld is %s", fn, (long long)i,
                           name, SHAPE(t), (long long)pe->e.index, SHAPE(p));
        if (t->dtype != p->dtype)
            return tfc_err(TFC_ERR_DTYPE, "%s: tensors[%lld] for '%s' is %s but parameter %lld is %s", fn, (long long)i,
                           name, tfc_dtype_name(t->dtype), (long long)pe->e.index, tfc_dtype_name(p->dtype));
        return TFC_OK;
    }
    TFC_TRY(scalar_value(fn, i, name, t, &pe->value));
    double v = pe->value;
    if (pe->e.kind == E_STEP || pe->e.kind == E_PARAM_STEP) {
        if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v))
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: tensors[%lld] for '%s' is %g: a step count must be a whole "
                           "number >= 0",
                           fn, (long long)i, name, v);
    } else if (!isfinite(v) || v < 0) {
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: tensors[%lld] for '%s' is %g: must be finite and >= 0", fn,
                       (long long)i, name, v);
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_state_load(tfc_optim *opt, const char *const *names, const tfc_tensor *const *tensors,
                                        int64_t n) {
    const char *fn = "tfc_optim_state_load";
    TFC_CHECK_NOT_NULL(fn, opt);
    TFC_TRY(tfc_optim_refuse_sharded(fn, opt));
    if (n < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %lld: must be >= 0", fn, (long long)n);
    if (n > 0 && (!names || !tensors))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL with n = %lld", fn, !names ? "names" : "tensors",
                       (long long)n);
    if (n == 0) return TFC_OK;
    parsed *pe = malloc((size_t)n * sizeof *pe);
    if (!pe) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status st = TFC_OK;
    /* 1. Check everything. */
    for (int64_t i = 0; i < n && st == TFC_OK; i++) st = check_entry(fn, opt, i, names[i], tensors[i], &pe[i]);
    /* 2. Allocate the buffers of parameters gaining state (harmless if this fails: has_state is unchanged). */
    for (int64_t i = 0; i < n && st == TFC_OK; i++)
        if (pe[i].e.kind == E_PARAM_BUF || pe[i].e.kind == E_PARAM_STEP)
            st = tfc_optim_alloc_state(fn, opt, &opt->params[pe[i].e.index]);
    /* 3. Apply: nothing below can fail. */
    for (int64_t i = 0; i < n && st == TFC_OK; i++) {
        const entry *e = &pe[i].e;
        double v = pe[i].value;
        switch (e->kind) {
        case E_STEP: opt->step = (int64_t)v; break;
        case E_GROUP_LR: opt->groups[e->index].lr = v; break;
        case E_GROUP_WD: opt->groups[e->index].weight_decay = v; break;
        case E_PARAM_STEP:
            opt->params[e->index].step = (int64_t)v;
            opt->params[e->index].has_state = 1;
            break;
        case E_PARAM_BUF: {
            tfc_optim_slot *pp = &opt->params[e->index];
            /* On a CUDA parameter a host-to-device copy: the one step here that can fail (device errors). */
            st = tfc_tensor_copy_from(pp->buf[e->buf], tensors[i]);
            if (st != TFC_OK) break;
            pp->has_state = 1;
            break;
        }
        }
    }
    free(pe);
    return st;
}

TFC_API tfc_status tfc_optim_state_set(tfc_optim *opt, const char *name, const tfc_tensor *tensor) {
    TFC_CHECK_NOT_NULL("tfc_optim_state_set", opt);
    TFC_CHECK_NOT_NULL("tfc_optim_state_set", name);
    TFC_CHECK_NOT_NULL("tfc_optim_state_set", tensor);
    TFC_TRY(tfc_optim_refuse_sharded("tfc_optim_state_set", opt));
    return tfc_err_in("tfc_optim_state_set", tfc_optim_state_load(opt, &name, &tensor, 1));
}
