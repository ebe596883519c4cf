/*
 * Optimizer options: PyTorch's defaults and the rules a valid set obeys.
 * torch.optim raises ValueError for the same cases (negative lr, betas
 * outside [0, 1), ...); here each is TFC_ERR_INVALID_ARG naming the field.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim_impl.h"

/* The first struct_size this library shipped; later versions only append fields. */
#define OPTIONS_V1_SIZE (offsetof(tfc_optim_options, maximize) + sizeof(int32_t))

const char *tfc_optim_kind_name(tfc_optim_kind kind) {
    switch (kind) {
    case TFC_OPTIM_SGD: return "SGD";
    case TFC_OPTIM_ADAM: return "Adam";
    case TFC_OPTIM_ADAMW: return "AdamW";
    default: return "?";
    }
}

static void defaults(tfc_optim_kind kind, tfc_optim_options *o) {
    tfc_optim_options d = TFC_OPTIM_OPTIONS_INIT, dw = TFC_ADAMW_OPTIONS_INIT;
    *o = kind == TFC_OPTIM_ADAMW ? dw : d;
}

static int valid_kind(tfc_optim_kind kind) {
    return kind == TFC_OPTIM_SGD || kind == TFC_OPTIM_ADAM || kind == TFC_OPTIM_ADAMW;
}

TFC_API tfc_status tfc_optim_options_default(tfc_optim_kind kind, tfc_optim_options *opts) {
    TFC_CHECK_NOT_NULL("tfc_optim_options_default", opts);
    if (!valid_kind(kind))
        return tfc_err(TFC_ERR_INVALID_ARG, "tfc_optim_options_default: kind %d is not a tfc_optim_kind", (int)kind);
    defaults(kind, opts);
    return TFC_OK;
}

tfc_status tfc_optim_check_nonneg(const char *fn, const char *what, double v) {
    if (!isfinite(v) || v < 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is %g: must be finite and >= 0", fn, what, v);
    return TFC_OK;
}

static tfc_status check_flag(const char *fn, const char *what, int32_t v) {
    if (v != 0 && v != 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is %d: must be 0 or 1", fn, what, (int)v);
    return TFC_OK;
}

static tfc_status check_beta(const char *fn, const char *what, double v) {
    if (!(v >= 0 && v < 1)) /* NaN fails too */
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is %g: must be in [0, 1)", fn, what, v);
    return TFC_OK;
}

/* Copy the caller's options over the kind's defaults and check the fields the kind reads. */
static tfc_status resolve(const char *fn, tfc_optim_kind kind, const tfc_optim_options *in, tfc_optim_options *o) {
    defaults(kind, o);
    if (in) {
        if (in->struct_size < OPTIONS_V1_SIZE || in->struct_size > sizeof *o)
            return tfc_err(TFC_ERR_VERSION,
                           "%s: opts->struct_size is %u: this library knows %u (set it to "
                           "sizeof(tfc_optim_options), or use TFC_OPTIM_OPTIONS_INIT)",
                           fn, (unsigned)in->struct_size, (unsigned)sizeof *o);
        /* An older, shorter struct leaves the appended fields at their defaults. */
        memcpy(o, in, in->struct_size);
        o->struct_size = (uint32_t)sizeof *o;
    }
    TFC_TRY(tfc_optim_check_nonneg(fn, "opts->lr", o->lr));
    TFC_TRY(tfc_optim_check_nonneg(fn, "opts->weight_decay", o->weight_decay));
    TFC_TRY(check_flag(fn, "opts->maximize", o->maximize));
    if (kind == TFC_OPTIM_SGD) {
        TFC_TRY(tfc_optim_check_nonneg(fn, "opts->momentum", o->momentum));
        if (!isfinite(o->dampening))
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: opts->dampening is %g: must be finite", fn, o->dampening);
        TFC_TRY(check_flag(fn, "opts->nesterov", o->nesterov));
        if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: nesterov needs momentum > 0 and dampening == 0 "
                           "(momentum %g, dampening %g)",
                           fn, o->momentum, o->dampening);
    } else {
        TFC_TRY(check_beta(fn, "opts->beta1", o->beta1));
        TFC_TRY(check_beta(fn, "opts->beta2", o->beta2));
        if (!isfinite(o->eps) || o->eps <= 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: opts->eps is %g: must be finite and > 0", fn, o->eps);
        TFC_TRY(check_flag(fn, "opts->amsgrad", o->amsgrad));
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_new(tfc_optim_kind kind, const tfc_optim_options *opts, tfc_optim **out) {
    const char *fn = "tfc_optim_new";
    TFC_CHECK_NOT_NULL(fn, out);
    if (!valid_kind(kind)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: kind %d is not a tfc_optim_kind", fn, (int)kind);
    return tfc_optim_create(fn, kind, opts, out);
}

TFC_API tfc_status tfc_optim_sgd(const tfc_optim_options *opts, tfc_optim **out) {
    TFC_CHECK_NOT_NULL("tfc_optim_sgd", out);
    return tfc_optim_create("tfc_optim_sgd", TFC_OPTIM_SGD, opts, out);
}

TFC_API tfc_status tfc_optim_adam(const tfc_optim_options *opts, tfc_optim **out) {
    TFC_CHECK_NOT_NULL("tfc_optim_adam", out);
    return tfc_optim_create("tfc_optim_adam", TFC_OPTIM_ADAM, opts, out);
}

TFC_API tfc_status tfc_optim_adamw(const tfc_optim_options *opts, tfc_optim **out) {
    TFC_CHECK_NOT_NULL("tfc_optim_adamw", out);
    return tfc_optim_create("tfc_optim_adamw", TFC_OPTIM_ADAMW, opts, out);
}

/* Shared by the constructors: validated options → an empty optimizer. */
tfc_status tfc_optim_create(const char *fn, tfc_optim_kind kind, const tfc_optim_options *opts, tfc_optim **out) {
    tfc_optim_options o;
    TFC_TRY(resolve(fn, kind, opts, &o));
    tfc_optim *opt = calloc(1, sizeof *opt);
    if (!opt) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    opt->kind = kind;
    opt->opts = o;
    *out = opt;
    return TFC_OK;
}
