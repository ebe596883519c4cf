/*
 * Gradient check: analytic gradients from one backward pass against the
 * centred difference (f(x + ε) − f(x − ε)) / 2ε for every element of every
 * input that requires grad, with relative error |a − n| / (|a| + |n| + 1e-8).
 */
#include <math.h>

#include "autograd/node.h"
#include "core/dtype.h"
#include "core/error.h"

/*
 * f on g: a failure keeps f's message (or gets one when f set none), and
 * TFC_OK without an output is an error too (a binding's callback that
 * caught an exception may return either way).
 */
static tfc_status call_f(const char *fn, tfc_gradcheck_fn f, tfc_graph *g, tfc_tensor *const *inputs, int32_t n,
                         void *ctx, tfc_tensor **out) {
    *out = NULL;
    tfc_clear_error(); /* a stale message must not pass for f's own */
    tfc_status s = f(g, inputs, n, out, ctx);
    if (s != TFC_OK) {
        tfc_tensor_release(*out);
        *out = NULL;
        if (!tfc_last_error()[0]) return tfc_err(s, "%s: f returned %s without a message", fn, tfc_status_name(s));
        return tfc_err_in(fn, s);
    }
    if (!*out) return tfc_err(TFC_ERR_INVALID_ARG, "%s: f returned TFC_OK but no output (*out is NULL)", fn);
    return TFC_OK;
}

static tfc_status eval(tfc_gradcheck_fn f, tfc_tensor *const *inputs, int32_t n, void *ctx, double *val) {
    tfc_graph *g;
    TFC_TRY(tfc_graph_new(&g));
    tfc_status s = tfc_graph_set_grad_enabled(g, 0);
    tfc_tensor *out = NULL;
    if (s == TFC_OK) s = call_f("tfc_gradcheck", f, g, inputs, n, ctx, &out);
    if (s == TFC_OK && tfc_numel(out) != 1)
        s = tfc_err(TFC_ERR_SHAPE, "tfc_gradcheck: f returned %s; it must return one element", SHAPE(out));
    if (s == TFC_OK) s = tfc_tensor_item(out, val);
    tfc_tensor_release(out);
    tfc_graph_release(g);
    return s;
}

TFC_API tfc_status tfc_gradcheck(tfc_gradcheck_fn f, tfc_tensor *const *inputs, int32_t n, void *ctx, double eps,
                                 double *max_rel_err, int32_t *worst_input, int64_t *worst_index) {
    const char *fn = "tfc_gradcheck";
    TFC_CHECK_NOT_NULL(fn, f);
    TFC_CHECK_NOT_NULL(fn, max_rel_err);
    if (n < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, must be >= 0", fn, (int)n);
    if (n > 0) TFC_CHECK_NOT_NULL(fn, inputs);
    if (!(eps > 0)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: eps is %g, must be > 0", fn, eps);
    for (int32_t i = 0; i < n; i++) {
        if (!inputs[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: inputs[%d] is NULL", fn, (int)i);
        if (inputs[i]->requires_grad && !tfc_is_contiguous(inputs[i]))
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: inputs[%d] %s must be contiguous to be perturbed", fn, (int)i,
                           SHAPE(inputs[i]));
        if (inputs[i]->requires_grad && inputs[i]->storage->device != TFC_DEVICE_CPU)
            return tfc_err(TFC_ERR_DEVICE, "%s: inputs[%d] must be a CPU tensor", fn, (int)i);
        TFC_TRY(tfc_tensor_zero_grad(inputs[i], 1));
    }
    /* Analytic gradients. */
    tfc_graph *g;
    TFC_TRY(tfc_graph_new(&g));
    tfc_tensor *out = NULL;
    tfc_status s = call_f(fn, f, g, inputs, n, ctx, &out);
    if (s == TFC_OK && tfc_numel(out) != 1)
        s = tfc_err(TFC_ERR_SHAPE, "%s: f returned %s; it must return one element", fn, SHAPE(out));
    if (s == TFC_OK) s = tfc_graph_backward(g, out, NULL);
    tfc_tensor_release(out);
    tfc_graph_release(g);
    TFC_TRY(s);
    double worst = 0.0;
    int32_t wi = -1;
    int64_t wk = -1;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        tfc_tensor *x = inputs[i];
        if (!x->requires_grad) continue;
        int64_t numel = tfc_numel(x);
        void *data = tfc_data(x);
        for (int64_t k = 0; k < numel && s == TFC_OK; k++) {
            double orig = tfc_scalar_load(data, x->dtype, k), fp, fm;
            tfc_scalar_store(data, x->dtype, k, orig + eps);
            s = eval(f, inputs, n, ctx, &fp);
            tfc_scalar_store(data, x->dtype, k, orig - eps);
            if (s == TFC_OK) s = eval(f, inputs, n, ctx, &fm);
            tfc_scalar_store(data, x->dtype, k, orig);
            if (s != TFC_OK) break;
            double num = (fp - fm) / (2 * eps);
            double ana = x->grad ? tfc_scalar_load(tfc_data(x->grad), x->grad->dtype, k) : 0.0;
            double rel = fabs(ana - num) / (fabs(ana) + fabs(num) + 1e-8);
            if (isnan(rel)) rel = INFINITY;
            if (rel > worst || wi < 0) {
                if (rel > worst) worst = rel;
                wi = i;
                wk = k;
            }
        }
    }
    TFC_TRY(s);
    *max_rel_err = worst;
    if (worst_input) *worst_input = wi;
    if (worst_index) *worst_index = wk;
    return TFC_OK;
}
