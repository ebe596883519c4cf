/*
 * tfc_attention, the graph door of flash attention: saves q, k, v, the
 * output and the per-row log-sum-exp [B,H,T] — O(B·H·T) extra, never the
 * [T,S] probabilities — and backward recomputes them per tile
 * (tfc_attention_backward).
 *
 * The explicit doors tfc_attention_forward / tfc_attention_backward: checks, then the backend's attention entries.
 * Their _ex forms take grouped-query heads (k, v with Hkv heads dividing q's H) and tfc_attention_options (a
 * sliding window); the plain forms are the _ex ones with Hkv = H required and no window.
 */
#include <math.h>
#include <string.h>

#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

/* The first struct_size of tfc_attention_options this library shipped; later versions only append fields. */
#define ATTN_OPTIONS_V1_SIZE (offsetof(tfc_attention_options, window) + sizeof(int64_t))

/*
 * What a call asks beyond q, k, v: causal (0/1), the window (0: none), and
 * whether k, v may have fewer heads than q (the _ex doors).
 */
typedef struct attn_args {
    int32_t causal, grouped;
    double scale;
    int64_t window;
} attn_args;

/* The _ex doors' arguments: opts read up to its struct_size (NULL: defaults), the window checked against causal. */
static tfc_status ex_args(const char *fn, int32_t causal, double scale, const tfc_attention_options *opts,
                          attn_args *a) {
    tfc_attention_options o = TFC_ATTENTION_OPTIONS_INIT;
    if (opts) {
        if (opts->struct_size < ATTN_OPTIONS_V1_SIZE || opts->struct_size > sizeof o)
            return tfc_err(TFC_ERR_VERSION,
                           "%s: opts->struct_size is %u: this library knows %u (set it to "
                           "sizeof(tfc_attention_options), or use TFC_ATTENTION_OPTIONS_INIT)",
                           fn, (unsigned)opts->struct_size, (unsigned)sizeof o);
        memcpy(&o, opts, opts->struct_size);
    }
    if (o.window < 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: opts->window is %lld, must be >= 0 (0: no window)", fn,
                       (long long)o.window);
    if (o.window > 0 && !causal)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: opts->window is %lld but causal is 0; a sliding window needs causal attention", fn,
                       (long long)o.window);
    *a = (attn_args){.causal = causal != 0, .grouped = 1, .scale = scale, .window = o.window};
    return TFC_OK;
}

/*
 * q [B,H,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv] of one float dtype, Hkv = H
 * unless a->grouped (then Hkv divides H); fills the sizes, causal, scale
 * and window of p (a window of S keys or more hides nothing: 0).
 */
static tfc_status check_qkv(const char *fn, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                            const attn_args *a, tfc_attn_problem *p) {
    TFC_TRY(tfc_karg_float(fn, "q", q));
    TFC_TRY(tfc_karg_float(fn, "k", k));
    TFC_TRY(tfc_karg_float(fn, "v", v));
    TFC_TRY(tfc_karg_dtype_like(fn, "k", k, "q", q));
    TFC_TRY(tfc_karg_dtype_like(fn, "v", v, "q", q));
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s, v is %s; all must be 4-D [B,H,rows,dim]", fn, SHAPE(q),
                       SHAPE(k), SHAPE(v));
    if (!a->grouped &&
        (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] ||
         v->shape[1] != q->shape[1]))
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s, v is %s; batch and head dims (0, 1) must agree", fn,
                       SHAPE(q), SHAPE(k), SHAPE(v));
    if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0])
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s, v is %s; batch dims (0) must agree", fn, SHAPE(q),
                       SHAPE(k), SHAPE(v));
    if (v->shape[1] != k->shape[1])
        return tfc_err(TFC_ERR_SHAPE, "%s: k is %s, v is %s; k and v must have the same heads (dim 1)", fn, SHAPE(k),
                       SHAPE(v));
    if (k->shape[1] == 0 ? q->shape[1] != 0 : q->shape[1] % k->shape[1] != 0)
        return tfc_err(TFC_ERR_SHAPE,
                       "%s: q is %s, k is %s; k's %lld heads (dim 1) must divide q's %lld (grouped-query attention)",
                       fn, SHAPE(q), SHAPE(k), (long long)k->shape[1], (long long)q->shape[1]);
    if (k->shape[3] != q->shape[3])
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s; head dims D (dim 3) must agree", fn, SHAPE(q), SHAPE(k));
    if (v->shape[2] != k->shape[2])
        return tfc_err(TFC_ERR_SHAPE, "%s: k is %s, v is %s; key counts S (dim 2) must agree", fn, SHAPE(k), SHAPE(v));
    if (!isfinite(a->scale)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: scale is %g, must be finite", fn, a->scale);
    p->device = tfc_device_index(q);
    p->dtype = q->dtype;
    p->B = q->shape[0];
    p->H = q->shape[1];
    p->Hkv = k->shape[1];
    p->Tq = q->shape[2];
    p->S = k->shape[2];
    p->D = q->shape[3];
    p->Dv = v->shape[3];
    p->causal = a->causal;
    p->scale = a->scale;
    p->window = a->window < p->S ? a->window : 0;
    return TFC_OK;
}

static tfc_attn_operand operand(const tfc_tensor *t) {
    tfc_attn_operand o = {tfc_data(t), t->strides[0], t->strides[1], t->strides[2]};
    return o;
}

static tfc_status attention_forward(const char *fn, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                    const attn_args *a, tfc_tensor *out, tfc_tensor *lse) {
    const tfc_backend *b;
    tfc_attn_problem p = {0};
    TFC_TRY(check_qkv(fn, q, k, v, a, &p));
    TFC_TRY(tfc_tensor_backend(fn, q, &b));
    int64_t od[4] = {p.B, p.H, p.Tq, p.Dv};
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_karg_output(fn, "out", out, q->dtype, od, 4, "q", q));
    if (lse) TFC_TRY(tfc_karg_output(fn, "lse", lse, tfc_backend_stats_dtype(b, q->dtype), od, 3, "q", q));
    const tfc_tensor *all[] = {out, lse, q, k, v};
    const char *names[] = {"out", "lse", "q", "k", "v"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 5));
    if (p.Hkv == 0) return TFC_OK; /* H = 0 too: out and lse are empty */

    p.out_w = tfc_data(out);
    p.lse_w = tfc_out_data(lse);
    const tfc_tensor *u[3];
    tfc_operands o = {0};
    tfc_status s = tfc_operand_rows(&o, q, &u[0]);
    if (s == TFC_OK) s = tfc_operand_rows(&o, k, &u[1]);
    if (s == TFC_OK) s = tfc_operand_rows(&o, v, &u[2]);
    if (s == TFC_OK) {
        p.q = operand(u[0]);
        p.k = operand(u[1]);
        p.v = operand(u[2]);
        s = TFC_BACKEND_RUN(fn, b, attention_forward, &p);
    }
    if (s == TFC_OK) tfc_written(out, lse, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_attention_forward(const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v, int32_t causal,
                                         double scale, tfc_tensor *out, tfc_tensor *lse) {
    const attn_args a = {.causal = causal != 0, .scale = scale};
    return attention_forward("tfc_attention_forward", q, k, v, &a, out, lse);
}

TFC_API tfc_status tfc_attention_forward_ex(const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                            int32_t causal, double scale, const tfc_attention_options *opts,
                                            tfc_tensor *out, tfc_tensor *lse) {
    const char *fn = "tfc_attention_forward_ex";
    attn_args a;
    TFC_TRY(ex_args(fn, causal, scale, opts, &a));
    return attention_forward(fn, q, k, v, &a, out, lse);
}

static tfc_status attention_backward(const char *fn, const tfc_tensor *dout, const tfc_tensor *q, const tfc_tensor *k,
                                     const tfc_tensor *v, const tfc_tensor *out, const tfc_tensor *lse,
                                     const attn_args *a, tfc_tensor *dq, tfc_tensor *dk, tfc_tensor *dv,
                                     uint32_t flags) {
    const tfc_backend *b;
    tfc_attn_problem p = {0};
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_qkv(fn, q, k, v, a, &p));
    TFC_TRY(tfc_tensor_backend(fn, q, &b));
    int64_t od[4] = {p.B, p.H, p.Tq, p.Dv};
    TFC_TRY(tfc_karg_float_like(fn, "dout", dout, od, 4, "q", q));
    TFC_TRY(tfc_karg_float_like(fn, "out", out, od, 4, "q", q));
    TFC_TRY(tfc_karg_stats(fn, "lse", lse, tfc_backend_stats_dtype(b, q->dtype), od, 3, "q", q));
    if (dq) TFC_TRY(tfc_karg_output(fn, "dq", dq, q->dtype, q->shape, 4, "q", q));
    if (dk) TFC_TRY(tfc_karg_output(fn, "dk", dk, q->dtype, k->shape, 4, "k", k));
    if (dv) TFC_TRY(tfc_karg_output(fn, "dv", dv, q->dtype, v->shape, 4, "v", v));
    const tfc_tensor *all[] = {dq, dk, dv, dout, q, k, v, out, lse};
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out", "lse"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 9));
    if ((!dq && !dk && !dv) || p.Hkv == 0) return TFC_OK; /* Hkv = 0: H = 0 too, every gradient is empty */

    p.dq = tfc_out_data(dq);
    p.dk = tfc_out_data(dk);
    p.dv = tfc_out_data(dv);
    p.accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0;
    const tfc_tensor *u[5], *in[5] = {q, k, v, out, dout};
    tfc_operands o = {0};
    tfc_status s = TFC_OK;
    for (int i = 0; i < 5 && s == TFC_OK; i++) s = tfc_operand_rows(&o, in[i], &u[i]);
    if (s == TFC_OK) s = tfc_operand(&o, lse, &p.lse);
    if (s == TFC_OK) {
        p.q = operand(u[0]);
        p.k = operand(u[1]);
        p.v = operand(u[2]);
        p.out = operand(u[3]);
        p.dout = operand(u[4]);
        s = TFC_BACKEND_RUN(fn, b, attention_backward, &p);
    }
    if (s == TFC_OK) tfc_written(dq, dk, dv);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_attention_backward(const tfc_tensor *dout, const tfc_tensor *q, const tfc_tensor *k,
                                          const tfc_tensor *v, const tfc_tensor *out, const tfc_tensor *lse,
                                          int32_t causal, double scale, tfc_tensor *dq, tfc_tensor *dk, tfc_tensor *dv,
                                          uint32_t flags) {
    const attn_args a = {.causal = causal != 0, .scale = scale};
    return attention_backward("tfc_attention_backward", dout, q, k, v, out, lse, &a, dq, dk, dv, flags);
}

TFC_API tfc_status tfc_attention_backward_ex(const tfc_tensor *dout, const tfc_tensor *q, const tfc_tensor *k,
                                             const tfc_tensor *v, const tfc_tensor *out, const tfc_tensor *lse,
                                             int32_t causal, double scale, const tfc_attention_options *opts,
                                             tfc_tensor *dq, tfc_tensor *dk, tfc_tensor *dv, uint32_t flags) {
    const char *fn = "tfc_attention_backward_ex";
    attn_args a;
    TFC_TRY(ex_args(fn, causal, scale, opts, &a));
    return attention_backward(fn, dout, q, k, v, out, lse, &a, dq, dk, dv, flags);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

typedef struct attention_ctx {
    tfc_saved q, k, v, out, lse;
    int32_t causal;
    double scale;
    int64_t window; /* tfc_attention_options.window: 0 = none */
} attention_ctx;

static tfc_status attention_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    const attention_ctx *c = n->ctx;
    tfc_tensor *q = c->q.t, *k = c->k.t, *v = c->v.t, *o = c->out.t, *lse = c->lse.t;
    tfc_tensor *g[3] = {NULL, NULL, NULL};
    const tfc_tensor *like[3] = {q, k, v};
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < 3 && s == TFC_OK; i++)
        if (tfc_node_needs_grad(n, i)) s = tfc_tensor_new_like(like[i], q->dtype, &g[i]);
    tfc_attention_options opts = TFC_ATTENTION_OPTIONS_INIT;
    opts.window = c->window;
    /* The _ex door also for tfc_attention's nodes: their heads were checked equal in the forward. */
    if (s == TFC_OK)
        s = tfc_attention_backward_ex(dy, q, k, v, o, lse, c->causal, c->scale, &opts, g[0], g[1], g[2], 0);
    for (int32_t i = 0; i < 3; i++) {
        if (s == TFC_OK)
            gin[i] = g[i];
        else
            tfc_tensor_release(g[i]);
    }
    return s;
}

/* The graph doors: fn's checks, the forward of fn (tfc_attention_forward or its _ex form), the node. */
static tfc_status attention_graph(const char *fn, tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k,
                                  const tfc_tensor *v, int32_t causal, double scale, const tfc_attention_options *opts,
                                  tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "q", q));
    TFC_TRY(tfc_check_float(fn, "k", k));
    TFC_TRY(tfc_check_float(fn, "v", v));
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return tfc_err(TFC_ERR_SHAPE, "%s: q %s, k %s, v %s must be 4-d [B,H,T,D]", fn, SHAPE(q), SHAPE(k), SHAPE(v));
    int64_t oshape[4] = {q->shape[0], q->shape[1], q->shape[2], v->shape[3]};
    tfc_tensor *o = NULL, *lse = NULL;
    tfc_status s = tfc_tensor_new_on(q, oshape, 4, q->dtype, &o);
    if (s == TFC_OK) s = tfc_tensor_new_on(q, oshape, 3, tfc_tensor_stats_dtype(q), &lse);
    if (s == TFC_OK)
        s = opts ? tfc_attention_forward_ex(q, k, v, causal, scale, opts, o, lse)
                 : tfc_attention_forward(q, k, v, causal, scale, o, lse);
    const tfc_tensor *ins[3] = {q, k, v};
    if (s == TFC_OK && tfc_should_record(g, ins, 3)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, attention_node_backward, 3, 1, sizeof(attention_ctx), &n);
        if (s == TFC_OK) {
            attention_ctx *c = n->ctx;
            c->causal = causal != 0;
            c->scale = scale;
            c->window = opts ? opts->window : 0; /* the forward checked opts->struct_size covers it */
            for (int32_t i = 0; i < 3; i++) tfc_node_set_input(n, i, ins[i]);
            s = tfc_node_keep(n, &c->q, q);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->k, k);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->v, v);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->out, o);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->lse, lse);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, o);
        }
    }
    tfc_tensor_release(lse);
    if (s != TFC_OK) {
        tfc_tensor_release(o);
        return tfc_err_in(fn, s);
    }
    *out = o;
    return TFC_OK;
}

TFC_API tfc_status tfc_attention(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                 int32_t causal, double scale, tfc_tensor **out) {
    return attention_graph("tfc_attention", g, q, k, v, causal, scale, NULL, out);
}

TFC_API tfc_status tfc_attention_ex(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                    int32_t causal, double scale, const tfc_attention_options *opts, tfc_tensor **out) {
    const tfc_attention_options none = TFC_ATTENTION_OPTIONS_INIT;
    return attention_graph("tfc_attention_ex", g, q, k, v, causal, scale, opts ? opts : &none, out);
}
