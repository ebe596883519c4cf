/*
 * tfc_rope, the graph door of the rotary position embedding: saves
 * positions and inv_freq (the rotation does not need x), and its backward
 * is the rotation by −angle, recorded when a create_graph pass asks, whose
 * own backward is the forward rotation again: both directions are linear,
 * each the other's adjoint.
 *
 * The explicit doors tfc_rope_forward / tfc_rope_backward: checks, then the
 * backend's rope entries (formula and shapes in kernels.h). The frequencies
 * come from tfc_rope_inv_freq (rope_scaling.c).
 */
#include "device/sync_count.h"
#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

/* f64 angles for f64 tensors; f32 for f32 and bf16, as transformers computes them. */
static tfc_dtype angle_dtype(tfc_dtype dt) { return dt == TFC_DTYPE_F64 ? TFC_DTYPE_F64 : TFC_DTYPE_F32; }

/*
 * x (named xname: x or dy) [B,H,T,D] of a float dtype with D even,
 * positions i64 [T], [1,T] or [B,T] and inv_freq [D/2] of the angle dtype,
 * all on x's device; fills p's sizes and pos_sb.
 */
static tfc_status check_rope(const char *fn, const char *xname, const tfc_tensor *x, const tfc_tensor *positions,
                             const tfc_tensor *inv_freq, tfc_rope_problem *p) {
    TFC_TRY(tfc_karg_float(fn, xname, x));
    if (x->ndim != 4) return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s; it must be 4-D [B,H,T,D]", fn, xname, SHAPE(x));
    const int64_t B = x->shape[0], T = x->shape[2], D = x->shape[3];
    if (D % 2)
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s; its head dim D = %lld must be even (rotate-half pairs i, i + D/2)",
                       fn, xname, SHAPE(x), (long long)D);
    if (!positions) return tfc_err(TFC_ERR_INVALID_ARG, "%s: positions is NULL", fn);
    if (!inv_freq) return tfc_err(TFC_ERR_INVALID_ARG, "%s: inv_freq is NULL", fn);
    {
        const tfc_tensor *ts[3] = {x, positions, inv_freq};
        const char *names[3] = {xname, "positions", "inv_freq"};
        TFC_TRY(tfc_same_device(fn, ts, names, 3));
    }
    if (positions->dtype != TFC_DTYPE_I64)
        return tfc_err(TFC_ERR_DTYPE, "%s: positions is %s %s; positions must be i64", fn,
                       tfc_dtype_name(positions->dtype), SHAPE(positions));
    const int shared = (positions->ndim == 1 && positions->shape[0] == T) ||
        (positions->ndim == 2 && positions->shape[0] == 1 && positions->shape[1] == T);
    const int per_seq = positions->ndim == 2 && positions->shape[0] == B && positions->shape[1] == T;
    if (!shared && !per_seq)
        return tfc_err(TFC_ERR_SHAPE,
                       "%s: positions is %s, %s is %s; positions must be [T], [1,T] or [B,T] = [%lld,%lld]", fn,
                       SHAPE(positions), xname, SHAPE(x), (long long)B, (long long)T);
    const tfc_dtype ad = angle_dtype(x->dtype);
    if (inv_freq->dtype != ad)
        return tfc_err(TFC_ERR_DTYPE,
                       "%s: inv_freq is %s %s, must be %s for %s %s %s (angles are f64 for f64 tensors, else f32)", fn,
                       tfc_dtype_name(inv_freq->dtype), SHAPE(inv_freq), tfc_dtype_name(ad), tfc_dtype_name(x->dtype),
                       xname, SHAPE(x));
    const int64_t half = D / 2;
    TFC_TRY(tfc_karg_shape(fn, "inv_freq", inv_freq, &half, 1, xname, x));
    p->device = tfc_device_index(x);
    p->dtype = x->dtype;
    p->B = B;
    p->H = x->shape[1];
    p->Tn = T;
    p->D = D;
    p->pos_sb = shared ? 0 : T;
    /* positions copied from the host were range-checked there: a device need not check them and wait */
    p->pos_checked = tfc_storage_range_within(positions, INT64_MAX, 0);
    return TFC_OK;
}

static tfc_attn_operand operand(const tfc_tensor *t) {
    tfc_attn_operand o = {tfc_data(t), t->strides[0], t->strides[1], t->strides[2]};
    return o;
}

/* Rotate in (x or dy) into out (y or dx): forward (inverse 0) or backward (inverse 1), checks done by the caller. */
static tfc_status run_rope(const char *fn, const tfc_backend *b, tfc_rope_problem *p, int inverse, const tfc_tensor *in,
                           const tfc_tensor *positions, const tfc_tensor *inv_freq, tfc_tensor *out) {
    const tfc_tensor *u;
    const void *pos;
    tfc_operands o = {0};
    tfc_status s = tfc_operand_rows(&o, in, &u);
    if (s == TFC_OK) s = tfc_operand(&o, positions, &pos);
    if (s == TFC_OK) s = tfc_operand(&o, inv_freq, &p->inv_freq);
    if (s == TFC_OK) {
        p->pos = pos;
        if (inverse) {
            p->dy = operand(u);
            p->dx = tfc_data(out);
            s = TFC_BACKEND_RUN(fn, b, rope_backward, p);
        } else {
            p->x = operand(u);
            p->y = tfc_data(out);
            s = TFC_BACKEND_RUN(fn, b, rope_forward, p);
        }
    }
    /* otherwise off the CPU the kernel checked them and its verdict was read back before it returned */
    if (!p->pos_checked)
        tfc_device_note_sync(in->storage->device, p->device, "tfc_rope: the positions' check on the device");
    if (s == TFC_OK) tfc_written(out, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_rope_forward(const tfc_tensor *x, const tfc_tensor *positions, const tfc_tensor *inv_freq,
                                    tfc_tensor *y) {
    const char *fn = "tfc_rope_forward";
    const tfc_backend *b;
    tfc_rope_problem p = {0};
    TFC_TRY(check_rope(fn, "x", x, positions, inv_freq, &p));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, 4, "x", x));
    const tfc_tensor *all[] = {y, x, positions, inv_freq};
    const char *names[] = {"y", "x", "positions", "inv_freq"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 4));
    return run_rope(fn, b, &p, 0, x, positions, inv_freq, y);
}

TFC_API tfc_status tfc_rope_backward(const tfc_tensor *dy, const tfc_tensor *positions, const tfc_tensor *inv_freq,
                                     tfc_tensor *dx, uint32_t flags) {
    const char *fn = "tfc_rope_backward";
    const tfc_backend *b;
    tfc_rope_problem p = {0};
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_rope(fn, "dy", dy, positions, inv_freq, &p));
    TFC_TRY(tfc_tensor_backend(fn, dy, &b));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, dy->dtype, dy->shape, 4, "dy", dy));
    const tfc_tensor *all[] = {dx, dy, positions, inv_freq};
    const char *names[] = {"dx", "dy", "positions", "inv_freq"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 4));
    p.accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0;
    return run_rope(fn, b, &p, 1, dy, positions, inv_freq, dx);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

typedef struct rope_ctx {
    tfc_saved positions, inv_freq;
    int32_t inverse; /* this node rotated by −angle (a recorded backward) */
} rope_ctx;

static tfc_status rotate(tfc_graph *g, const char *fn, const tfc_tensor *x, const tfc_tensor *positions,
                         const tfc_tensor *inv_freq, int32_t inverse, tfc_tensor **out);

/* The adjoint of a rotation by ±angle is the rotation by ∓angle, recorded on a create_graph pass's graph. */
static tfc_status rope_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const rope_ctx *c = n->ctx;
    if (!gout[0] || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    return rotate(tfc_node_grad_graph(n), c->inverse ? "tfc_rope" : "tfc_rope (backward)", gout[0], c->positions.t,
                  c->inv_freq.t, !c->inverse, &gin[0]);
}

/* *out = x rotated by +angle (tfc_rope_forward) or −angle (tfc_rope_backward), recorded on g as op fn. */
static tfc_status rotate(tfc_graph *g, const char *fn, const tfc_tensor *x, const tfc_tensor *positions,
                         const tfc_tensor *inv_freq, int32_t inverse, tfc_tensor **out) {
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &y));
    tfc_status s =
        inverse ? tfc_rope_backward(x, positions, inv_freq, y, 0) : tfc_rope_forward(x, positions, inv_freq, y);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, rope_node_backward, 1, 1, sizeof(rope_ctx), &n);
        if (s == TFC_OK) {
            rope_ctx *c = n->ctx;
            c->inverse = inverse;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->positions, positions);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->inv_freq, inv_freq);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return s;
    }
    *out = y;
    return TFC_OK;
}

TFC_API tfc_status tfc_rope(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *positions, const tfc_tensor *inv_freq,
                            tfc_tensor **out) {
    const char *fn = "tfc_rope";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    TFC_CHECK_NOT_NULL(fn, positions);
    TFC_CHECK_NOT_NULL(fn, inv_freq);
    if (tfc_should_record(g, &inv_freq, 1))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: inv_freq %s requires grad on a recording graph; rope gives gradients to x only "
                       "(inv_freq is a buffer, as in transformers)",
                       fn, SHAPE(inv_freq));
    return tfc_err_in(fn, rotate(g, fn, x, positions, inv_freq, 0, out));
}
