/*
 * Gradient clipping that never makes the host wait (issue #19: no host syncs
 * in a training step): the same formula as clip.c,
 *   N = √(Σ g²),  c = min(1, max_norm / (N + 1e-6)),  g ← g·c,
 * computed on the gradients' device by the map and reduce entries, with N
 * and c kept there as 0-d tensors. clip.c's grad_norm entry returns N in
 * host memory, which on CUDA means waiting for the whole backward; this
 * version queues its kernels behind it and returns. The price is that a
 * non-finite norm cannot be refused before the gradients are touched: NaN
 * propagates into them (c = NaN) and an infinite norm zeroes the finite ones;
 * the caller finds out when it reads the norm or the loss (tfcore train does
 * at its logging steps). Multiplying by c = 1 is exact, so unclipped
 * gradients come out bit for bit as they went in.
 * Sums of squares are in the gradients' dtype (f32: the CUDA reduce's f32
 * accumulation; the CPU's reduce sums in double), one reduction per tensor.
 */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "optim/optim_impl.h"
#include "tensor/dispatch.h"
#include "tfcore/ops.h"

static const char *const FN = "tfc_optim_clip_grad_norm_async";

/* *acc += Σ g² (a 0-d tensor on g's device; *acc NULL on the first call). */
static tfc_status add_sumsq(tfc_tensor **acc, const tfc_tensor *g) {
    tfc_tensor *sq = NULL, *s = NULL;
    tfc_status st = tfc_mul(NULL, g, g, &sq);
    if (st == TFC_OK) st = tfc_sum(NULL, sq, NULL, 0, 0, &s);
    tfc_tensor_release(sq);
    if (st == TFC_OK && *acc) st = tfc_tensor_map(FN, TFC_MAP_ADD, *acc, *acc, s, NULL, 0.0, 0);
    if (st == TFC_OK && !*acc) {
        *acc = s;
        s = NULL;
    }
    tfc_tensor_release(s);
    return st;
}

TFC_API tfc_status tfc_optim_clip_grad_norm_async(tfc_optim *opt, double max_norm, tfc_tensor **total_norm) {
    TFC_CHECK_NOT_NULL(FN, opt);
    if (total_norm) *total_norm = NULL;
    if (!(max_norm > 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_norm is %g: must be > 0 (+INFINITY only measures)", FN, max_norm);
    TFC_TRY(tfc_optim_refuse_sharded(FN, opt));
    const tfc_tensor *ref = NULL; /* the first gradient: the norm lives on its device, in its dtype */
    for (int64_t k = 0; k < opt->n_params && !ref; k++) ref = opt->params[k].p->grad;
    if (!ref) return TFC_OK; /* no gradient: N = 0, nothing to scale, *total_norm stays NULL */
    for (int64_t k = 0; k < opt->n_params; k++) {
        const tfc_tensor *g = opt->params[k].p->grad;
        if (!g) continue;
        char gname[64];
        snprintf(gname, sizeof gname, "the grad of parameter %lld", (long long)k);
        TFC_TRY(tfc_optim_check_grad(FN, gname, g, "the first gradient", ref, NULL));
        if (isfinite(max_norm)) TFC_TRY(tfc_tensor_check_writable(FN, gname, g)); /* scaled in place below */
        if (g->dtype != ref->dtype || (g->dtype != TFC_DTYPE_F32 && g->dtype != TFC_DTYPE_F64))
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: %s is %s %s and the first gradient %s: the device-side norm needs f32 or f64 "
                           "gradients of one dtype",
                           FN, gname, tfc_dtype_name(g->dtype), SHAPE(g), tfc_dtype_name(ref->dtype));
    }
    tfc_tensor *acc = NULL, *norm = NULL, *c = NULL;
    tfc_status st = TFC_OK;
    for (int64_t k = 0; k < opt->n_params && st == TFC_OK; k++)
        if (opt->params[k].p->grad) st = add_sumsq(&acc, opt->params[k].p->grad);
    if (st == TFC_OK) st = tfc_sqrt(NULL, acc, &norm);
    if (st == TFC_OK && isfinite(max_norm)) {
        tfc_tensor *t = NULL;
        st = tfc_add_scalar(NULL, norm, 1e-6, &t);
        if (st == TFC_OK) st = tfc_rdiv_scalar(NULL, t, max_norm, &c); /* max_norm / (N + 1e-6) */
        tfc_tensor_release(t);
        /* min(c, 1) in place; MIN_S lets a NaN through, so a NaN norm reaches the gradients rather than hiding */
        if (st == TFC_OK) st = tfc_tensor_map(FN, TFC_MAP_MIN_S, c, c, NULL, NULL, 1.0, 0);
        for (int64_t k = 0; k < opt->n_params && st == TFC_OK; k++) {
            tfc_tensor *g = opt->params[k].p->grad;
            if (!g) continue;
            st = tfc_tensor_map(FN, TFC_MAP_MUL, g, g, c, NULL, 0.0, 0);
            if (st == TFC_OK) tfc_bump_version(g);
        }
    }
    tfc_tensor_release(acc);
    tfc_tensor_release(c);
    if (st != TFC_OK) {
        tfc_tensor_release(norm);
        return tfc_err_in(FN, st);
    }
    if (total_norm)
        *total_norm = norm;
    else
        tfc_tensor_release(norm);
    return TFC_OK;
}
