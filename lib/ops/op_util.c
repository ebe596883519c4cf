/* Shared helpers of the ops layer. */
#include "ops/op_util.h"

tfc_status tfc_check_float(const char *fn, const char *arg, const tfc_tensor *x) {
    if (!x) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    if (x->dtype != TFC_DTYPE_F32 && x->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; this op needs f32 or f64", fn, arg, tfc_dtype_name(x->dtype),
                       SHAPE(x));
    return tfc_require_cpu(fn, arg, x);
}

tfc_status tfc_check_float_dev(const char *fn, const char *arg, const tfc_tensor *x) {
    if (!x) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    if (tfc_is_cuda(x)) {
        if (x->dtype != TFC_DTYPE_F32 && x->dtype != TFC_DTYPE_BF16)
            return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s on cuda:%d; this op needs f32 or bf16 on CUDA", fn, arg,
                           tfc_dtype_name(x->dtype), SHAPE(x), (int)x->storage->device_index);
        return TFC_OK;
    }
    return tfc_check_float(fn, arg, x);
}

tfc_status tfc_check_same(const char *fn, const tfc_tensor *a, const tfc_tensor *b) {
    if (a->dtype != b->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: a is %s %s, b is %s %s: dtypes differ", fn, tfc_dtype_name(a->dtype),
                       SHAPE(a), tfc_dtype_name(b->dtype), SHAPE(b));
    const tfc_tensor *ts[2] = {a, b};
    const char *names[2] = {"a", "b"};
    return tfc_same_device(fn, ts, names, 2);
}

tfc_status tfc_norm_dim(const char *fn, int32_t dim, int32_t ndim, int32_t *out) {
    int32_t d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dim %d is out of range for a %d-d tensor", fn, (int)dim, (int)ndim);
    *out = d;
    return TFC_OK;
}

static tfc_sview broadcast_view(const tfc_tensor *t, const int64_t *shape, int32_t ndim) {
    tfc_sview v = tfc_sview_of(t);
    v.ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) v.shape[i] = shape[i];
    tfc_broadcast_strides(t, shape, ndim, v.strides);
    return v;
}

/*
 * One CUDA step of a composed map: r = x OP y (y a tensor), x OP s (y NULL,
 * op a TFC_CUDA binary op), or f(x) (unary >= 0). Consumes *acc when it is
 * the x operand (tmp chains).
 */
typedef struct cuda_chain {
    const int64_t *shape;
    int32_t ndim;
    tfc_tensor *acc; /* the running result, owned */
    tfc_status s;
} cuda_chain;

static const char *const map_fn = "tfc_map (CUDA)";

static void chain_bin(cuda_chain *ch, const tfc_tensor *x, int32_t op, const tfc_tensor *y) {
    if (ch->s != TFC_OK) return;
    tfc_tensor *r;
    ch->s = tfc_cuda_binary_new(map_fn, op, x, y, ch->shape, ch->ndim, &r);
    if (ch->s != TFC_OK) return;
    tfc_tensor_release(ch->acc);
    ch->acc = r;
}

static void chain_scalar(cuda_chain *ch, const tfc_tensor *x, int32_t op, double v) {
    if (ch->s != TFC_OK) return;
    tfc_tensor *r;
    ch->s = tfc_cuda_scalar_new(map_fn, op, x, v, ch->shape, ch->ndim, &r);
    if (ch->s != TFC_OK) return;
    tfc_tensor_release(ch->acc);
    ch->acc = r;
}

static void chain_unary(cuda_chain *ch, const tfc_tensor *x, int32_t op) {
    if (ch->s != TFC_OK) return;
    tfc_tensor *r;
    ch->s = tfc_cuda_unary_new(map_fn, op, x, ch->shape, ch->ndim, &r);
    if (ch->s != TFC_OK) return;
    tfc_tensor_release(ch->acc);
    ch->acc = r;
}

/* The formulas of cpu/elementwise.h (a = dy, b = x, c = y for the backward maps) as table calls. */
static tfc_status cuda_map(tfc_map_op op, const int64_t *shape, int32_t ndim, const tfc_tensor *a,
                           const tfc_tensor *b, const tfc_tensor *c, double p, tfc_tensor **out) {
    cuda_chain ch = {shape, ndim, NULL, TFC_OK};
#define ACC ((const tfc_tensor *)ch.acc)
    switch (op) {
    case TFC_MAP_ADD: chain_bin(&ch, a, TFC_CUDA_ADD, b); break;
    case TFC_MAP_SUB: chain_bin(&ch, a, TFC_CUDA_SUB, b); break;
    case TFC_MAP_MUL: chain_bin(&ch, a, TFC_CUDA_MUL, b); break;
    case TFC_MAP_DIV: chain_bin(&ch, a, TFC_CUDA_DIV, b); break;
    case TFC_MAP_NEG: chain_unary(&ch, a, TFC_CUDA_NEG); break;
    case TFC_MAP_EXP: chain_unary(&ch, a, TFC_CUDA_EXP); break;
    case TFC_MAP_LOG: chain_unary(&ch, a, TFC_CUDA_LOG); break;
    case TFC_MAP_SQRT: chain_unary(&ch, a, TFC_CUDA_SQRT); break;
    case TFC_MAP_TANH: chain_unary(&ch, a, TFC_CUDA_TANH); break;
    case TFC_MAP_SIGMOID: chain_unary(&ch, a, TFC_CUDA_SIGMOID); break;
    case TFC_MAP_RELU: chain_unary(&ch, a, TFC_CUDA_RELU); break;
    case TFC_MAP_RSQRT: /* 1 / sqrt(a) */
        chain_unary(&ch, a, TFC_CUDA_SQRT);
        chain_scalar(&ch, ACC, TFC_CUDA_RDIV, 1.0);
        break;
    case TFC_MAP_ADD_S: chain_scalar(&ch, a, TFC_CUDA_ADD, p); break;
    case TFC_MAP_MUL_S: chain_scalar(&ch, a, TFC_CUDA_MUL, p); break;
    case TFC_MAP_RSUB_S: chain_scalar(&ch, a, TFC_CUDA_RSUB, p); break;
    case TFC_MAP_RDIV_S: chain_scalar(&ch, a, TFC_CUDA_RDIV, p); break;
    case TFC_MAP_POW_S: chain_scalar(&ch, a, TFC_CUDA_POW, p); break;
    case TFC_MAP_COPY: chain_scalar(&ch, a, TFC_CUDA_MUL, 1.0); break;
    case TFC_MAP_EXP_BWD: chain_bin(&ch, a, TFC_CUDA_MUL, c); break; /* dy * y */
    case TFC_MAP_SQRT_BWD: /* dy * 0.5 / y */
        chain_bin(&ch, a, TFC_CUDA_DIV, c);
        chain_scalar(&ch, ACC, TFC_CUDA_MUL, 0.5);
        break;
    case TFC_MAP_RSQRT_BWD: /* dy * -0.5 * y³ */
        chain_bin(&ch, c, TFC_CUDA_MUL, c);
        chain_bin(&ch, ACC, TFC_CUDA_MUL, c);
        chain_bin(&ch, ACC, TFC_CUDA_MUL, a);
        chain_scalar(&ch, ACC, TFC_CUDA_MUL, -0.5);
        break;
    case TFC_MAP_TANH_BWD: /* dy * (1 - y²) */
        chain_bin(&ch, c, TFC_CUDA_MUL, c);
        chain_scalar(&ch, ACC, TFC_CUDA_RSUB, 1.0);
        chain_bin(&ch, ACC, TFC_CUDA_MUL, a);
        break;
    case TFC_MAP_SIGMOID_BWD: /* dy * y * (1 - y) */
        chain_scalar(&ch, c, TFC_CUDA_RSUB, 1.0);
        chain_bin(&ch, ACC, TFC_CUDA_MUL, c);
        chain_bin(&ch, ACC, TFC_CUDA_MUL, a);
        break;
    case TFC_MAP_POW_S_BWD: /* dy * p * x^(p-1) */
        chain_scalar(&ch, b, TFC_CUDA_POW, p - 1.0);
        chain_scalar(&ch, ACC, TFC_CUDA_MUL, p);
        chain_bin(&ch, ACC, TFC_CUDA_MUL, a);
        break;
    case TFC_MAP_DIV_BWD_B:  /* -dy * c / b */
    case TFC_MAP_RDIV_S_BWD:
        chain_bin(&ch, a, TFC_CUDA_MUL, c);
        chain_bin(&ch, ACC, TFC_CUDA_DIV, b);
        chain_unary(&ch, ACC, TFC_CUDA_NEG);
        break;
    case TFC_MAP_RELU_BWD: { /* dy * [x > 0]: the table's ReLU derivative, read from x */
        tfc_tensor *r;
        ch.s = tfc_cuda_unary_bwd_new(map_fn, TFC_CUDA_RELU, a, b, shape, ndim, &r);
        if (ch.s == TFC_OK) ch.acc = r;
        break;
    }
    default: return tfc_cuda_unimplemented("tfc_map", "this elementwise map (a masked select)");
    }
#undef ACC
    if (ch.s != TFC_OK) {
        tfc_tensor_release(ch.acc);
        return ch.s;
    }
    *out = ch.acc;
    return TFC_OK;
}

tfc_status tfc_map_new(tfc_map_op op, const int64_t *shape, int32_t ndim, tfc_dtype dtype, const tfc_tensor *a,
                       const tfc_tensor *b, const tfc_tensor *c, double p, tfc_tensor **out) {
    if (tfc_is_cuda(a) || tfc_is_cuda(b) || tfc_is_cuda(c)) {
        const tfc_tensor *ts[3] = {a, b, c};
        const char *names[3] = {"a", "b", "c"};
        TFC_TRY(tfc_same_device("tfc_map", ts, names, 3));
        (void)dtype;
        return cuda_map(op, shape, ndim, a, b, c, p, out);
    }
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new(shape, ndim, dtype, TFC_DEVICE_CPU, 0, &r));
    tfc_sview rv = tfc_sview_of(r), av, bv, cv;
    if (a) av = broadcast_view(a, shape, ndim);
    if (b) bv = broadcast_view(b, shape, ndim);
    if (c) cv = broadcast_view(c, shape, ndim);
    tfc_cpu_map(op, &rv, a ? &av : NULL, b ? &bv : NULL, c ? &cv : NULL, p, 0);
    *out = r;
    return TFC_OK;
}

tfc_status tfc_sum_to_shape(tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    int same = grad->ndim == ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = grad->shape[i] == shape[i];
    if (same) {
        *out = grad;
        return TFC_OK;
    }
    /* Sum the leading extra dims and the dims where shape has 1. */
    int32_t dims[TFC_MAX_DIMS], nd = 0, lead = grad->ndim - ndim;
    for (int32_t i = 0; i < grad->ndim; i++) {
        int32_t k = i - lead;
        if (k < 0 || (shape[k] == 1 && grad->shape[i] != 1)) dims[nd++] = i;
    }
    tfc_tensor *summed, *r;
    tfc_status s = tfc_sum(NULL, grad, dims, nd, 1, &summed);
    tfc_tensor_release(grad);
    TFC_TRY(s);
    s = tfc_reshape(NULL, summed, shape, ndim, &r);
    tfc_tensor_release(summed);
    TFC_TRY(s);
    *out = r;
    return TFC_OK;
}
