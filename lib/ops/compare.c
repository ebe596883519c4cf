/*
 * Comparisons a < b, a <= b, a > b, a >= b, a == b, a != b (broadcast) and
 * the same against a scalar, giving bool tensors. Not differentiable: no
 * graph argument and nothing recorded.
 *
 * Operands of one float dtype the device's backend takes are compared in
 * that dtype (an f32 tensor against a scalar compares with the scalar
 * rounded to f32, as torch does). Any other pair — integer, bool, u8,
 * bf16 on the CPU, or two different dtypes — is converted to f64 (f32
 * where the backend has no f64, i.e. CUDA) and compared there: exact for
 * integers up to 2^53 (2^24 on CUDA). The comparison is a map writing 1/0
 * in the compute dtype, then a conversion to bool.
 */
#include "ops/op_util.h"

typedef enum { C_LT, C_LE, C_GT, C_GE, C_EQ, C_NE } cmp_kind;
static const tfc_map_op cmp_maps[] = {TFC_MAP_LT, TFC_MAP_LE, TFC_MAP_GT, TFC_MAP_GE, TFC_MAP_EQ, TFC_MAP_NE};
static const char *const cmp_names[] = {"tfc_lt", "tfc_le", "tfc_gt", "tfc_ge", "tfc_eq", "tfc_ne"};
static const char *const cmp_scalar_names[] = {"tfc_lt_scalar", "tfc_le_scalar", "tfc_gt_scalar",
                                               "tfc_ge_scalar", "tfc_eq_scalar", "tfc_ne_scalar"};

/* The dtype both operands are compared in (see the top of the file). */
static tfc_dtype compute_dtype(const tfc_backend *be, tfc_dtype a, tfc_dtype b) {
    if (a == b && tfc_backend_takes(be, a)) return a;
    return tfc_backend_takes(be, TFC_DTYPE_F64) ? TFC_DTYPE_F64 : TFC_DTYPE_F32;
}

/* x itself (a new reference) when it has dtype dt, else a converted copy. */
static tfc_status as_dtype(const char *fn, const tfc_tensor *x, tfc_dtype dt, tfc_tensor **out) {
    if (x->dtype == dt) {
        *out = tfc_tensor_retain((tfc_tensor *)x);
        return TFC_OK;
    }
    return tfc_err_in(fn, tfc_cast(NULL, x, dt, out));
}

/* out = bool(map(a, b)) at the broadcast shape; a and b already share dtype dt. */
static tfc_status compare_same(const char *fn, cmp_kind k, const tfc_tensor *a, const tfc_tensor *b, tfc_dtype dt,
                               tfc_tensor **out) {
    int64_t shape[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(tfc_broadcast_shape(fn, a, b, shape, &nd));
    tfc_tensor *ones = NULL, *r = NULL;
    TFC_TRY(tfc_map_new(fn, cmp_maps[k], shape, nd, dt, a, b, NULL, 0.0, &ones));
    tfc_status s = tfc_tensor_new_on(ones, shape, nd, TFC_DTYPE_BOOL, &r);
    if (s == TFC_OK) s = tfc_tensor_copy_view(fn, r, ones);
    tfc_tensor_release(ones);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

static tfc_status compare(cmp_kind k, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    const char *fn = cmp_names[k];
    TFC_CHECK_NOT_NULL(fn, a);
    TFC_CHECK_NOT_NULL(fn, b);
    TFC_CHECK_NOT_NULL(fn, out);
    const tfc_tensor *ts[2] = {a, b};
    const char *names[2] = {"a", "b"};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, a, &be));
    tfc_dtype dt = compute_dtype(be, a->dtype, b->dtype);
    tfc_tensor *ca = NULL, *cb = NULL;
    tfc_status s = as_dtype(fn, a, dt, &ca);
    if (s == TFC_OK) s = as_dtype(fn, b, dt, &cb);
    if (s == TFC_OK) s = compare_same(fn, k, ca, cb, dt, out);
    tfc_tensor_release(ca);
    tfc_tensor_release(cb);
    return s;
}

static tfc_status compare_scalar(cmp_kind k, const tfc_tensor *x, double s_value, tfc_tensor **out) {
    const char *fn = cmp_scalar_names[k];
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, out);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    tfc_dtype dt = compute_dtype(be, x->dtype, x->dtype);
    tfc_tensor *cx = NULL, *cs = NULL;
    tfc_status s = as_dtype(fn, x, dt, &cx);
    if (s == TFC_OK) s = tfc_tensor_new_on(x, NULL, 0, dt, &cs);
    if (s == TFC_OK) s = tfc_tensor_fill(cs, s_value);
    if (s == TFC_OK) s = compare_same(fn, k, cx, cs, dt, out);
    tfc_tensor_release(cx);
    tfc_tensor_release(cs);
    return tfc_err_in(fn, s);
}

#define COMPARE_API(name, kind)                                                                 \
    TFC_API tfc_status tfc_##name(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) { \
        return compare(kind, a, b, out);                                                        \
    }                                                                                           \
    TFC_API tfc_status tfc_##name##_scalar(const tfc_tensor *x, double s, tfc_tensor **out) {   \
        return compare_scalar(kind, x, s, out);                                                 \
    }
COMPARE_API(lt, C_LT)
COMPARE_API(le, C_LE)
COMPARE_API(gt, C_GT)
COMPARE_API(ge, C_GE)
COMPARE_API(eq, C_EQ)
COMPARE_API(ne, C_NE)
