/*
 * Inverted dropout: y = x ⊙ m / (1 − p) with m_i = [u_i ≥ p], u_i the i-th
 * uniform of the Philox stream (seed, offset) in row-major order of x.
 * Backward regenerates the same mask: dx = dy ⊙ m / (1 − p).
 */
#include "ops/op_util.h"
#include "ops/operands.h"

/* out = dropout(x) through the backend's entry: x's mask (seed, offset), scaled by 1 / (1 − p). */
static tfc_status run_dropout(const char *fn, const tfc_tensor *x, double p, uint64_t seed, uint64_t offset,
                              tfc_tensor **out) {
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &r));
    tfc_dropout_problem pr = {.device = tfc_device_index(x),
                              .dtype = x->dtype,
                              .n = tfc_numel(x),
                              .p = p,
                              .seed = seed,
                              .offset = offset,
                              .out = tfc_data(r)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &pr.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, dropout, &pr);
    tfc_operands_release(&o);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

/* The mask is regenerated from the stream, never stored. */
typedef struct dropout_ctx {
    double p;
    uint64_t seed, offset;
} dropout_ctx;

static tfc_status dropout_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const dropout_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    /* create_graph: the same mask applied by a recorded dropout (its own backward is this again) */
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return tfc_dropout(gg, dy, c->p, c->seed, c->offset, &gin[0]);
    return run_dropout("tfc_dropout (backward)", dy, c->p, c->seed, c->offset, &gin[0]);
}

TFC_API tfc_status tfc_dropout(tfc_graph *g, const tfc_tensor *x, double p, uint64_t seed, uint64_t offset,
                               tfc_tensor **out) {
    const char *fn = "tfc_dropout";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (!(p >= 0.0 && p < 1.0)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: p is %g, must be in [0, 1)", fn, p);
    tfc_tensor *r;
    TFC_TRY(run_dropout(fn, x, p, seed, offset, &r));
    tfc_status s = TFC_OK;
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, dropout_backward, 1, 1, sizeof(dropout_ctx), &n);
        if (s == TFC_OK) {
            *(dropout_ctx *)n->ctx = (dropout_ctx){.p = p, .seed = seed, .offset = offset};
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_attach_output(n, 0, r);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(r);
            return tfc_err_in(fn, s);
        }
    }
    *out = r;
    return TFC_OK;
}
