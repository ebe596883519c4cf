/*
 * SwiGLU, out = silu(gate) ⊙ up with silu(g) = g·σ(g): the explicit doors
 * tfc_swiglu_forward / tfc_swiglu_backward (checks, then the backend's
 * swiglu entries) and the graph doors tfc_swiglu (gate and up as two
 * tensors) and tfc_swiglu_fused (one [..., 2F] tensor, gate first), which
 * save their inputs and run the explicit backward.
 *
 * Operands are passed to the kernel as rows of their last dim with a row
 * stride each, so the halves of a [N, 2F] GEMM output (Llama's gate_proj
 * and up_proj in one product) are read where they lie, and the fused
 * backward writes both halves of d(gate_up) in place, with no copy and no
 * concatenation.
 */
#include <string.h>

#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

/* gate: a float tensor with a last dim; *rows, *cols: gate seen as rows of its last dim. */
static tfc_status check_gate(const char *fn, const tfc_tensor *gate, const tfc_backend **b, int64_t *rows,
                             int64_t *cols) {
    TFC_TRY(tfc_karg_float(fn, "gate", gate));
    TFC_TRY(tfc_tensor_backend(fn, gate, b));
    if (gate->ndim == 0) return tfc_err(TFC_ERR_SHAPE, "%s: gate is a scalar; SwiGLU needs a last dim", fn);
    *cols = gate->shape[gate->ndim - 1];
    *rows = 1;
    for (int32_t i = 0; i + 1 < gate->ndim; i++) *rows *= gate->shape[i];
    return TFC_OK;
}

TFC_API tfc_status tfc_swiglu_forward(const tfc_tensor *gate, const tfc_tensor *up, tfc_tensor *out) {
    const char *fn = "tfc_swiglu_forward";
    const tfc_backend *b;
    tfc_swiglu_problem p = {0};
    TFC_TRY(check_gate(fn, gate, &b, &p.rows, &p.cols));
    TFC_TRY(tfc_karg_float_like(fn, "up", up, gate->shape, gate->ndim, "gate", gate));
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_karg_output_rows(fn, "out", out, gate->dtype, gate->shape, gate->ndim, "gate", gate, &p.ld_out));
    const tfc_tensor *all[] = {out, gate, up};
    const char *names[] = {"out", "gate", "up"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));

    p.device = tfc_device_index(gate);
    p.dtype = gate->dtype;
    p.out = tfc_data(out);
    tfc_operands o = {0};
    tfc_status s = tfc_operand_ld(&o, gate, &p.gate, &p.ld_gate);
    if (s == TFC_OK) s = tfc_operand_ld(&o, up, &p.up, &p.ld_up);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, swiglu_forward, &p);
    if (s == TFC_OK) tfc_written(out, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_swiglu_backward(const tfc_tensor *dy, const tfc_tensor *gate, const tfc_tensor *up,
                                       tfc_tensor *dgate, tfc_tensor *dup, uint32_t flags) {
    const char *fn = "tfc_swiglu_backward";
    const tfc_backend *b;
    tfc_swiglu_problem p = {0};
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_gate(fn, gate, &b, &p.rows, &p.cols));
    TFC_TRY(tfc_karg_float_like(fn, "up", up, gate->shape, gate->ndim, "gate", gate));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, gate->shape, gate->ndim, "gate", gate));
    if (dgate)
        TFC_TRY(
            tfc_karg_output_rows(fn, "dgate", dgate, gate->dtype, gate->shape, gate->ndim, "gate", gate, &p.ld_dgate));
    if (dup)
        TFC_TRY(tfc_karg_output_rows(fn, "dup", dup, gate->dtype, gate->shape, gate->ndim, "gate", gate, &p.ld_dup));
    const tfc_tensor *all[] = {dgate, dup, dy, gate, up};
    const char *names[] = {"dgate", "dup", "dy", "gate", "up"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 5));
    if (!dgate && !dup) return TFC_OK;

    p.device = tfc_device_index(gate);
    p.dtype = gate->dtype;
    p.dgate = tfc_out_data(dgate);
    p.dup = tfc_out_data(dup);
    p.accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0;
    tfc_operands o = {0};
    tfc_status s = tfc_operand_ld(&o, dy, &p.dy, &p.ld_dy);
    if (s == TFC_OK) s = tfc_operand_ld(&o, gate, &p.gate, &p.ld_gate);
    if (s == TFC_OK) s = tfc_operand_ld(&o, up, &p.up, &p.ld_up);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, swiglu_backward, &p);
    if (s == TFC_OK) tfc_written(dgate, dup, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- the graph doors (include/tfcore/ops.h) ---- */

/*
 * create_graph: the gradients from recorded ops on gg, so they can be
 * differentiated again:
 *   dup = dy ⊙ silu(gate),   dgate = dy ⊙ up ⊙ σ(gate)(1 + gate(1 − σ(gate))).
 * *dgate / *dup are computed only when asked for (non-NULL).
 */
static tfc_status swiglu_grads_graph(tfc_graph *gg, const tfc_tensor *dy, const tfc_tensor *gate, const tfc_tensor *up,
                                     tfc_tensor **dgate, tfc_tensor **dup) {
    enum { N_TMP = 8 };
    tfc_tensor *t[N_TMP] = {0};
    tfc_status s = TFC_OK;
    if (dup) {
        s = tfc_silu(gg, gate, &t[0]);
        if (s == TFC_OK) s = tfc_mul(gg, dy, t[0], dup);
    }
    if (s == TFC_OK && dgate) {
        s = tfc_sigmoid(gg, gate, &t[1]);
        if (s == TFC_OK) s = tfc_rsub_scalar(gg, t[1], 1.0, &t[2]);
        if (s == TFC_OK) s = tfc_mul(gg, gate, t[2], &t[3]);
        if (s == TFC_OK) s = tfc_add_scalar(gg, t[3], 1.0, &t[4]);
        if (s == TFC_OK) s = tfc_mul(gg, t[1], t[4], &t[5]); /* silu'(gate) */
        if (s == TFC_OK) s = tfc_mul(gg, dy, up, &t[6]);
        if (s == TFC_OK) s = tfc_mul(gg, t[6], t[5], dgate);
    }
    for (int i = 0; i < N_TMP; i++) tfc_tensor_release(t[i]);
    return s;
}

typedef struct swiglu_ctx {
    tfc_saved gate, up;
} swiglu_ctx;

static tfc_status swiglu_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const swiglu_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    const int need_g = tfc_node_needs_grad(n, 0), need_u = tfc_node_needs_grad(n, 1);
    if (!dy || (!need_g && !need_u)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) {
        tfc_tensor *gate = NULL, *up = NULL;
        tfc_status s = tfc_node_saved(n, &c->gate, &gate);
        if (s == TFC_OK) s = tfc_node_saved(n, &c->up, &up);
        if (s == TFC_OK) s = swiglu_grads_graph(gg, dy, gate, up, need_g ? &gin[0] : NULL, need_u ? &gin[1] : NULL);
        tfc_tensor_release(gate);
        tfc_tensor_release(up);
        return s;
    }
    tfc_tensor *gate = c->gate.t, *up = c->up.t, *dg = NULL, *du = NULL;
    tfc_status s = TFC_OK;
    if (need_g) s = tfc_tensor_new_like(gate, gate->dtype, &dg);
    if (s == TFC_OK && need_u) s = tfc_tensor_new_like(gate, gate->dtype, &du);
    if (s == TFC_OK) s = tfc_swiglu_backward(dy, gate, up, dg, du, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(dg);
        tfc_tensor_release(du);
        return s;
    }
    gin[0] = dg;
    gin[1] = du;
    return TFC_OK;
}

TFC_API tfc_status tfc_swiglu(tfc_graph *g, const tfc_tensor *gate, const tfc_tensor *up, tfc_tensor **out) {
    const char *fn = "tfc_swiglu";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "gate", gate));
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_like(gate, gate->dtype, &y));
    tfc_status s = tfc_swiglu_forward(gate, up, y);
    const tfc_tensor *ins[2] = {gate, up};
    if (s == TFC_OK && tfc_should_record(g, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, swiglu_node_backward, 2, 1, sizeof(swiglu_ctx), &n);
        if (s == TFC_OK) {
            swiglu_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, gate);
            tfc_node_set_input(n, 1, up);
            s = tfc_node_keep(n, &c->gate, gate);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->up, up);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}

/* gate_up [..., 2F] split into its halves gate = [..., :F], up = [..., F:] (views, recorded on g when set). */
static tfc_status halves(tfc_graph *g, const tfc_tensor *gate_up, tfc_tensor **gate, tfc_tensor **up) {
    int64_t f = gate_up->shape[gate_up->ndim - 1] / 2;
    tfc_status s = tfc_narrow(g, gate_up, -1, 0, f, gate);
    if (s == TFC_OK) s = tfc_narrow(g, gate_up, -1, f, f, up);
    return s;
}

typedef struct swiglu_fused_ctx {
    tfc_saved gate_up;
} swiglu_fused_ctx;

/* d(gate_up) [..., 2F] with dgate written into its first half and dup into its second, by one kernel call. */
static tfc_status swiglu_fused_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const swiglu_fused_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    tfc_tensor *x = NULL, *gate = NULL, *up = NULL, *dgu = NULL, *d[2] = {NULL, NULL};
    tfc_status s = gg ? tfc_node_saved(n, &c->gate_up, &x) : (x = tfc_tensor_retain(c->gate_up.t), TFC_OK);
    if (s == TFC_OK) s = halves(gg, x, &gate, &up);
    if (s == TFC_OK && gg) {
        /* create_graph: the halves' gradients from recorded ops, joined by a recorded concat */
        s = swiglu_grads_graph(gg, dy, gate, up, &d[0], &d[1]);
        if (s == TFC_OK) s = tfc_concat(gg, (const tfc_tensor *const *)d, 2, -1, &gin[0]);
    } else if (s == TFC_OK) {
        s = tfc_tensor_new_like(x, x->dtype, &dgu);
        if (s == TFC_OK) s = halves(NULL, dgu, &d[0], &d[1]);
        if (s == TFC_OK) s = tfc_swiglu_backward(dy, gate, up, d[0], d[1], 0);
        if (s == TFC_OK) gin[0] = tfc_tensor_retain(dgu);
    }
    tfc_tensor *all[] = {x, gate, up, dgu, d[0], d[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    return s;
}

TFC_API tfc_status tfc_swiglu_fused(tfc_graph *g, const tfc_tensor *gate_up, tfc_tensor **out) {
    const char *fn = "tfc_swiglu_fused";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "gate_up", gate_up));
    if (gate_up->ndim == 0) return tfc_err(TFC_ERR_SHAPE, "%s: gate_up is a scalar; SwiGLU needs a last dim", fn);
    int64_t f2 = gate_up->shape[gate_up->ndim - 1];
    if (f2 % 2)
        return tfc_err(TFC_ERR_SHAPE,
                       "%s: gate_up is %s; its last dim %lld must be even (gate and up are its two halves)", fn,
                       SHAPE(gate_up), (long long)f2);
    int64_t dims[TFC_MAX_DIMS];
    memcpy(dims, gate_up->shape, sizeof(int64_t) * (size_t)gate_up->ndim);
    dims[gate_up->ndim - 1] = f2 / 2;
    tfc_tensor *gate = NULL, *up = NULL, *y = NULL;
    tfc_status s = halves(NULL, gate_up, &gate, &up);
    if (s == TFC_OK) s = tfc_tensor_new_on(gate_up, dims, gate_up->ndim, gate_up->dtype, &y);
    if (s == TFC_OK) s = tfc_swiglu_forward(gate, up, y);
    if (s == TFC_OK && tfc_should_record(g, &gate_up, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, swiglu_fused_node_backward, 1, 1, sizeof(swiglu_fused_ctx), &n);
        if (s == TFC_OK) {
            swiglu_fused_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, gate_up);
            s = tfc_node_keep(n, &c->gate_up, gate_up);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    tfc_tensor_release(gate);
    tfc_tensor_release(up);
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}
