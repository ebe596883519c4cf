/* tfc_attention_forward / tfc_attention_backward: checks, then lib/cpu/attention.c. */
#include <math.h>

#include "cpu/kernels.h"
#include "ops/kernel_args.h"

/* q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv] of one float dtype; fills the sizes of p. */
static tfc_status check_qkv(const char *fn, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                            double scale, tfc_attn_problem *p) {
    TFC_TRY(tfc_karg_float(fn, "q", q));
    TFC_TRY(tfc_karg_float(fn, "k", k));
    TFC_TRY(tfc_karg_float(fn, "v", v));
    TFC_TRY(tfc_karg_dtype_like(fn, "k", k, "q", q));
    TFC_TRY(tfc_karg_dtype_like(fn, "v", v, "q", q));
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s, v is %s; all must be 4-D [B,H,rows,dim]", fn, SHAPE(q),
                       SHAPE(k), SHAPE(v));
    if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] ||
        v->shape[1] != q->shape[1])
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s, v is %s; batch and head dims (0, 1) must agree", fn,
                       SHAPE(q), SHAPE(k), SHAPE(v));
    if (k->shape[3] != q->shape[3])
        return tfc_err(TFC_ERR_SHAPE, "%s: q is %s, k is %s; head dims D (dim 3) must agree", fn, SHAPE(q), SHAPE(k));
    if (v->shape[2] != k->shape[2])
        return tfc_err(TFC_ERR_SHAPE, "%s: k is %s, v is %s; key counts S (dim 2) must agree", fn, SHAPE(k),
                       SHAPE(v));
    if (!isfinite(scale)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: scale is %g, must be finite", fn, scale);
    p->dtype = q->dtype;
    p->B = q->shape[0];
    p->H = q->shape[1];
    p->Tq = q->shape[2];
    p->S = k->shape[2];
    p->D = q->shape[3];
    p->Dv = v->shape[3];
    p->scale = scale;
    return TFC_OK;
}

/*
 * The CUDA forms: the table takes contiguous [B,H,rows,dim] buffers (the
 * head-split views of a GPT block are compacted here) and f32 lse.
 */
static tfc_status cuda_forward(const char *fn, const tfc_attn_problem *p, const tfc_tensor *q, const tfc_tensor *k,
                               const tfc_tensor *v, int32_t causal, tfc_tensor *out, tfc_tensor *lse) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, q, &api, &dev));
    tfc_tensor *tmp[3] = {NULL}, *own_lse = NULL;
    const tfc_tensor *u[3], *in[3] = {q, k, v};
    tfc_status s = TFC_OK;
    for (int i = 0; i < 3 && s == TFC_OK; i++) s = tfc_karg_contiguous(in[i], &tmp[i], &u[i]);
    if (s == TFC_OK && !lse) { /* the entry always writes lse */
        int64_t ld[3] = {p->B, p->H, p->Tq};
        s = tfc_tensor_new_on(q, ld, 3, TFC_DTYPE_F32, &own_lse);
        lse = own_lse;
    }
    if (s == TFC_OK && tfc_numel(out) > 0)
        s = tfc_cuda_done(fn, "attention_forward", api,
                          api->attention_forward(dev, q->dtype, tfc_data(u[0]), tfc_data(u[1]), tfc_data(u[2]),
                                                 tfc_data(out), (float *)tfc_data(lse), (size_t)p->B, (size_t)p->H,
                                                 (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (size_t)p->Dv,
                                                 (float)p->scale, causal != 0));
    if (s == TFC_OK) {
        tfc_bump_version(out);
        tfc_bump_version(lse);
    }
    for (int i = 0; i < 3; i++) tfc_tensor_release(tmp[i]);
    tfc_tensor_release(own_lse);
    return s;
}

static tfc_status cuda_backward(const char *fn, const tfc_attn_problem *p, const tfc_tensor *const in[6],
                                int32_t causal, tfc_tensor *dq, tfc_tensor *dk, tfc_tensor *dv, uint32_t flags) {
    const tfc_cuda_api *api;
    int32_t dev;
    TFC_TRY(tfc_cuda_for(fn, in[0], &api, &dev));
    tfc_tensor *tmp[6] = {NULL};
    const tfc_tensor *u[6];
    tfc_status s = TFC_OK;
    for (int i = 0; i < 6 && s == TFC_OK; i++) s = tfc_karg_contiguous(in[i], &tmp[i], &u[i]);
    if (s == TFC_OK && p->B * p->H * (p->Tq + p->S) > 0)
        s = tfc_cuda_done(fn, "attention_backward", api,
                          api->attention_backward(dev, p->dtype, tfc_data(u[4]), tfc_data(u[0]), tfc_data(u[1]),
                                                  tfc_data(u[2]), tfc_data(u[3]), (const float *)tfc_data(u[5]),
                                                  dq ? tfc_data(dq) : NULL, dk ? tfc_data(dk) : NULL,
                                                  dv ? tfc_data(dv) : NULL, (size_t)p->B, (size_t)p->H,
                                                  (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (size_t)p->Dv,
                                                  (float)p->scale, causal != 0, flags));
    if (s == TFC_OK) {
        if (dq) tfc_bump_version(dq);
        if (dk) tfc_bump_version(dk);
        if (dv) tfc_bump_version(dv);
    }
    for (int i = 0; i < 6; i++) tfc_tensor_release(tmp[i]);
    return s;
}

static tfc_attn_operand operand(const tfc_tensor *t) {
    tfc_attn_operand o = {tfc_data(t), t->strides[0], t->strides[1], t->strides[2]};
    return o;
}

TFC_API tfc_status tfc_attention_forward(const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                         int32_t causal, double scale, tfc_tensor *out, tfc_tensor *lse) {
    const char *fn = "tfc_attention_forward";
    tfc_attn_problem p = {0};
    TFC_TRY(check_qkv(fn, q, k, v, scale, &p));
    int64_t od[4] = {p.B, p.H, p.Tq, p.Dv};
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_karg_output(fn, "out", out, q->dtype, od, 4, "q", q));
    tfc_dtype ldt = tfc_is_cuda(q) ? TFC_DTYPE_F32 : q->dtype; /* f32 lse on CUDA */
    if (lse) TFC_TRY(tfc_karg_output(fn, "lse", lse, ldt, od, 3, "q", q));
    const tfc_tensor *all[] = {out, lse, q, k, v};
    const char *names[] = {"out", "lse", "q", "k", "v"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 5));
    if (tfc_is_cuda(q)) return cuda_forward(fn, &p, q, k, v, causal, out, lse);

    tfc_tensor *tmp[3] = {NULL};
    const tfc_tensor *u[3];
    const tfc_tensor *in[3] = {q, k, v};
    tfc_status s = TFC_OK;
    for (int i = 0; i < 3 && s == TFC_OK; i++) s = tfc_karg_unit_last_stride(in[i], &tmp[i], &u[i]);
    if (s == TFC_OK) {
        p.causal = causal != 0;
        p.q = operand(u[0]);
        p.k = operand(u[1]);
        p.v = operand(u[2]);
        p.out_w = tfc_data(out);
        p.lse_w = lse ? tfc_data(lse) : NULL;
        tfc_cpu_attention_forward(&p);
        tfc_bump_version(out);
        if (lse) tfc_bump_version(lse);
    }
    for (int i = 0; i < 3; i++) tfc_tensor_release(tmp[i]);
    return s;
}

TFC_API tfc_status tfc_attention_backward(const tfc_tensor *dout, const tfc_tensor *q, const tfc_tensor *k,
                                          const tfc_tensor *v, const tfc_tensor *out, const tfc_tensor *lse,
                                          int32_t causal, double scale, tfc_tensor *dq, tfc_tensor *dk, tfc_tensor *dv,
                                          uint32_t flags) {
    const char *fn = "tfc_attention_backward";
    tfc_attn_problem p = {0};
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_qkv(fn, q, k, v, scale, &p));
    int64_t od[4] = {p.B, p.H, p.Tq, p.Dv};
    TFC_TRY(tfc_karg_float_like(fn, "dout", dout, od, 4, "q", q));
    TFC_TRY(tfc_karg_float_like(fn, "out", out, od, 4, "q", q));
    if (tfc_is_cuda(q)) TFC_TRY(tfc_karg_output(fn, "lse", lse, TFC_DTYPE_F32, od, 3, "q", q));
    else TFC_TRY(tfc_karg_float_like(fn, "lse", lse, od, 3, "q", q));
    if (dq) TFC_TRY(tfc_karg_output(fn, "dq", dq, q->dtype, q->shape, 4, "q", q));
    if (dk) TFC_TRY(tfc_karg_output(fn, "dk", dk, q->dtype, k->shape, 4, "k", k));
    if (dv) TFC_TRY(tfc_karg_output(fn, "dv", dv, q->dtype, v->shape, 4, "v", v));
    const tfc_tensor *all[] = {dq, dk, dv, dout, q, k, v, out, lse};
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out", "lse"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 9));
    if (!dq && !dk && !dv) return TFC_OK;
    if (tfc_is_cuda(q)) {
        const tfc_tensor *cin[6] = {q, k, v, out, dout, lse};
        return cuda_backward(fn, &p, cin, causal, dq, dk, dv, flags);
    }

    tfc_tensor *tmp[6] = {NULL};
    const tfc_tensor *u[6];
    const tfc_tensor *in[6] = {q, k, v, out, dout, lse};
    tfc_status s = TFC_OK;
    for (int i = 0; i < 5 && s == TFC_OK; i++) s = tfc_karg_unit_last_stride(in[i], &tmp[i], &u[i]);
    if (s == TFC_OK) s = tfc_karg_contiguous(lse, &tmp[5], &u[5]);
    if (s == TFC_OK) {
        p.causal = causal != 0;
        p.q = operand(u[0]);
        p.k = operand(u[1]);
        p.v = operand(u[2]);
        p.out = operand(u[3]);
        p.dout = operand(u[4]);
        p.lse = tfc_data(u[5]);
        p.dq = dq ? tfc_data(dq) : NULL;
        p.dk = dk ? tfc_data(dk) : NULL;
        p.dv = dv ? tfc_data(dv) : NULL;
        p.accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0;
        tfc_cpu_attention_backward(&p);
        if (dq) tfc_bump_version(dq);
        if (dk) tfc_bump_version(dk);
        if (dv) tfc_bump_version(dv);
    }
    for (int i = 0; i < 6; i++) tfc_tensor_release(tmp[i]);
    return s;
}
