/*
 * Autograd: gradcheck of every op on random f64 inputs (strided and
 * broadcast), hand-derived examples, graph semantics and bad input.
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* loss = Σ out ⊙ W with W a fixed random tensor, so upstream grads are not all 1. */
static tfc_status weighted_sum(tfc_graph *g, tfc_tensor *out, tfc_tensor **loss) {
    int64_t dims[8];
    int32_t nd = tfc_tensor_ndim(out);
    tfc_status s = tfc_tensor_shape(out, dims, 8);
    tfc_tensor *w = NULL, *p = NULL;
    if (s == TFC_OK) s = tfc_tensor_uniform(dims, nd, tfc_tensor_dtype(out), -1, 1, 99, 0, &w);
    if (s == TFC_OK) s = tfc_mul(g, out, w, &p);
    if (s == TFC_OK) s = tfc_sum(g, p, NULL, 0, 0, loss);
    tfc_tensor_release(w);
    tfc_tensor_release(p);
    tfc_tensor_release(out);
    return s;
}

typedef tfc_status (*op_fn)(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out);

static tfc_status run_op(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n;
    op_fn f = *(op_fn *)ctx;
    tfc_tensor *out = NULL;
    tfc_status s = f(g, in, &out);
    if (s != TFC_OK) return s;
    return weighted_sum(g, out, loss);
}

/* Check op on the given inputs (all require grad); worst relative error < 1e-6. */
static void gradcheck_op(const char *name, op_fn f, tfc_tensor **in, int32_t n) {
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    tfc_status s = tfc_gradcheck(run_op, in, n, &f, 1e-6, &err, &wi, &wk);
    tfc_test_checks++;
    if (s != TFC_OK)
        TFC_FAIL_AT("%s: gradcheck failed to run: %s", name, tfc_last_error());
    else if (!(err < 1e-6))
        TFC_FAIL_AT("%s: max relative error %g at input %d element %lld", name, err, wi, (long long)wk);
    for (int32_t i = 0; i < n; i++) tfc_tensor_release(in[i]);
}

#define OP1(name, call) \
    static tfc_status name(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) { return call; }

OP1(op_add, tfc_add(g, in[0], in[1], out))
OP1(op_sub, tfc_sub(g, in[0], in[1], out))
OP1(op_mul, tfc_mul(g, in[0], in[1], out))
OP1(op_div, tfc_div(g, in[0], in[1], out))
OP1(op_neg, tfc_neg(g, in[0], out))
OP1(op_exp, tfc_exp(g, in[0], out))
OP1(op_log, tfc_log(g, in[0], out))
OP1(op_sqrt, tfc_sqrt(g, in[0], out))
OP1(op_rsqrt, tfc_rsqrt(g, in[0], out))
OP1(op_tanh, tfc_tanh(g, in[0], out))
OP1(op_sigmoid, tfc_sigmoid(g, in[0], out))
OP1(op_relu, tfc_relu(g, in[0], out))
OP1(op_gelu_tanh, tfc_gelu(g, in[0], TFC_GELU_TANH, out))
OP1(op_gelu_erf, tfc_gelu(g, in[0], TFC_GELU_ERF, out))
OP1(op_add_s, tfc_add_scalar(g, in[0], 0.7, out))
OP1(op_mul_s, tfc_mul_scalar(g, in[0], -1.3, out))
OP1(op_rsub_s, tfc_rsub_scalar(g, in[0], 2.0, out))
OP1(op_rdiv_s, tfc_rdiv_scalar(g, in[0], 2.0, out))
OP1(op_pow_s, tfc_pow_scalar(g, in[0], 2.5, out))
OP1(op_sum01, tfc_sum(g, in[0], (int32_t[]){0, 2}, 2, 0, out))
OP1(op_mean_k, tfc_mean(g, in[0], (int32_t[]){-1}, 1, 1, out))
OP1(op_max, tfc_max(g, in[0], (int32_t[]){1}, 1, 0, out))
OP1(op_min, tfc_min(g, in[0], NULL, 0, 0, out))
OP1(op_var, tfc_var(g, in[0], (int32_t[]){-1}, 1, 1, 0, out))
OP1(op_matmul, tfc_matmul(g, in[0], in[1], out))

static tfc_tensor *rnd(int64_t a, int64_t b, int64_t c, double lo, double hi, uint64_t seed) {
    int64_t d[3] = {a, b, c};
    int32_t nd = c ? 3 : b ? 2 : 1;
    return t_rand(d, nd, lo, hi, seed);
}

/* mul of a transposed (strided) view: the input itself stays contiguous for perturbation. */
static tfc_status op_mul_strided(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    tfc_tensor *t = NULL;
    tfc_status s = tfc_transpose(g, in[0], 0, 1, &t);
    if (s == TFC_OK) s = tfc_mul(g, t, in[1], out);
    tfc_tensor_release(t);
    return s;
}

TEST(gradcheck_binary_with_broadcast) {
    op_fn fs[] = {op_add, op_sub, op_mul, op_div};
    const char *names[] = {"add", "sub", "mul", "div"};
    for (int k = 0; k < 4; k++) {
        tfc_tensor *in[2] = {rnd(2, 3, 4, -1, 1, 10 + k), rnd(3, 1, 0, 0.5, 1.5, 20 + k)};
        gradcheck_op(names[k], fs[k], in, 2);
    }
}

TEST(gradcheck_unary) {
    struct {
        const char *n;
        op_fn f;
        double lo, hi;
    } u[] = {{"neg", op_neg, -1, 1},
             {"exp", op_exp, -1, 1},
             {"log", op_log, 0.5, 2},
             {"sqrt", op_sqrt, 0.5, 2},
             {"rsqrt", op_rsqrt, 0.5, 2},
             {"tanh", op_tanh, -2, 2},
             {"sigmoid", op_sigmoid, -2, 2},
             {"relu", op_relu, 0.1, 1},
             {"gelu_tanh", op_gelu_tanh, -2, 2},
             {"gelu_erf", op_gelu_erf, -2, 2},
             {"add_scalar", op_add_s, -1, 1},
             {"mul_scalar", op_mul_s, -1, 1},
             {"rsub_scalar", op_rsub_s, -1, 1},
             {"rdiv_scalar", op_rdiv_s, 0.5, 2},
             {"pow_scalar", op_pow_s, 0.5, 2}};
    for (size_t k = 0; k < sizeof u / sizeof u[0]; k++) {
        tfc_tensor *in[1] = {rnd(3, 5, 0, u[k].lo, u[k].hi, 30 + k)};
        gradcheck_op(u[k].n, u[k].f, in, 1);
    }
    /* relu on negative inputs: zero gradient, exactly */
    tfc_tensor *in[1] = {rnd(4, 0, 0, -1, -0.1, 3)};
    gradcheck_op("relu-negative", op_relu, in, 1);
}

TEST(gradcheck_reductions) {
    struct {
        const char *n;
        op_fn f;
    } r[] = {{"sum", op_sum01}, {"mean", op_mean_k}, {"max", op_max}, {"min", op_min}, {"var", op_var}};
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        tfc_tensor *in[1] = {rnd(2, 3, 4, -1, 1, 40 + k)};
        gradcheck_op(r[k].n, r[k].f, in, 1);
    }
}

TEST(gradcheck_matmul_batched_broadcast_and_strided) {
    tfc_tensor *in[2] = {rnd(2, 3, 4, -1, 1, 50), rnd(4, 5, 0, -1, 1, 51)};
    gradcheck_op("matmul [2,3,4]@[4,5]", op_matmul, in, 2);
    int64_t da[4] = {2, 1, 3, 4}, db[3] = {3, 4, 2};
    tfc_tensor *in2[2] = {t_rand(da, 4, -1, 1, 52), t_rand(db, 3, -1, 1, 53)};
    gradcheck_op("matmul broadcast batch", op_matmul, in2, 2);
    tfc_tensor *in3[2] = {rnd(4, 0, 0, -1, 1, 54), rnd(4, 3, 0, -1, 1, 55)};
    gradcheck_op("matmul 1-D @ 2-D", op_matmul, in3, 2);
    tfc_tensor *in4[2] = {rnd(4, 3, 0, -1, 1, 56), rnd(3, 4, 0, -1, 1, 57)};
    gradcheck_op("mul through a transposed view", op_mul_strided, in4, 2);
}

/* Views and joins: every view kind feeds a mul so the upstream grad varies. */
static tfc_status op_views(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    tfc_tensor *x = in[0], *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL, *h = NULL, *k = NULL;
    tfc_status s = tfc_permute(g, x, (int32_t[]){2, 0, 1}, 3, &a);      /* [4,2,3] */
    if (s == TFC_OK) s = tfc_slice(g, a, 0, 1, 4, 2, &b);               /* [2,2,3] */
    if (s == TFC_OK) s = tfc_reshape(g, b, (int64_t[]){4, 3}, 2, &c);   /* copy */
    if (s == TFC_OK) s = tfc_unsqueeze(g, c, 0, &d);                    /* [1,4,3] */
    if (s == TFC_OK) s = tfc_expand(g, d, (int64_t[]){2, 4, 3}, 3, &e); /* stride 0 */
    if (s == TFC_OK) s = tfc_contiguous(g, e, &f);
    if (s == TFC_OK) s = tfc_flatten(g, f, 0, 1, &h);   /* [8,3] */
    if (s == TFC_OK) s = tfc_narrow(g, h, 0, 2, 5, &k); /* [5,3] */
    tfc_tensor *objs[] = {a, b, c, d, e, f, h};
    for (int i = 0; i < 7; i++) tfc_tensor_release(objs[i]);
    if (s == TFC_OK) *out = k;
    return s;
}

static tfc_status op_joins(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    tfc_tensor *parts[2] = {NULL, NULL}, *cat = NULL, *cond = NULL, *w = NULL, *v = NULL, *idx = NULL, *mf = NULL;
    tfc_status s = tfc_split(g, in[0], (int64_t[]){1, 3}, 2, 1, parts);
    const tfc_tensor *xs[3] = {parts[1], in[1], parts[0]};
    if (s == TFC_OK) s = tfc_concat(g, xs, 3, 1, &cat); /* [3, 3+2+1] */
    uint8_t m[6] = {1, 0, 0, 1, 1, 0};
    if (s == TFC_OK) s = tfc_tensor_from_data(m, (int64_t[]){6}, 1, TFC_DTYPE_BOOL, &cond);
    if (s == TFC_OK) s = tfc_where(g, cond, cat, in[2], &w); /* in[2] [3,1] broadcast */
    if (s == TFC_OK) s = tfc_masked_fill(g, w, cond, 0.5, &mf);
    if (s == TFC_OK) s = tfc_topk(g, mf, 2, 1, 1, &v, &idx);
    tfc_tensor *objs[] = {parts[0], parts[1], cat, cond, w, idx, mf};
    for (int i = 0; i < 7; i++) tfc_tensor_release(objs[i]);
    if (s == TFC_OK) *out = v;
    return s;
}

static tfc_status op_dropout_cast(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    tfc_tensor *d = NULL, *c32 = NULL;
    tfc_status s = tfc_dropout(g, in[0], 0.3, 5, 0, &d);
    (void)c32;
    if (s == TFC_OK) s = tfc_cast(g, d, TFC_DTYPE_F64, out);
    tfc_tensor_release(d);
    return s;
}

TEST(gradcheck_views_joins_dropout) {
    tfc_tensor *in[1] = {rnd(2, 3, 4, -1, 1, 60)};
    gradcheck_op("views", op_views, in, 1);
    /* distinct values so topk has no ties under perturbation */
    tfc_tensor *in2[3] = {rnd(3, 4, 0, -1, 1, 61), rnd(3, 2, 0, 1.5, 2.5, 62), rnd(3, 1, 0, -3, -2, 63)};
    gradcheck_op("split/concat/where/masked_fill/topk", op_joins, in2, 3);
    tfc_tensor *in3[1] = {rnd(5, 6, 0, -1, 1, 64)};
    gradcheck_op("dropout+cast", op_dropout_cast, in3, 1);
}

/* Two-layer MLP: loss = mean((tanh(x W1 + b1) W2 + b2 − y)²). */
static tfc_status mlp(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n;
    (void)ctx;
    tfc_tensor *x = in[0], *W1 = in[1], *b1 = in[2], *W2 = in[3], *b2 = in[4], *y = in[5];
    tfc_tensor *h = NULL, *hb = NULL, *a = NULL, *o = NULL, *ob = NULL, *dlt = NULL, *sq = NULL;
    tfc_status s = tfc_matmul(g, x, W1, &h);
    if (s == TFC_OK) s = tfc_add(g, h, b1, &hb);
    if (s == TFC_OK) s = tfc_tanh(g, hb, &a);
    if (s == TFC_OK) s = tfc_matmul(g, a, W2, &o);
    if (s == TFC_OK) s = tfc_add(g, o, b2, &ob);
    if (s == TFC_OK) s = tfc_sub(g, ob, y, &dlt);
    if (s == TFC_OK) s = tfc_mul(g, dlt, dlt, &sq);
    if (s == TFC_OK) s = tfc_mean(g, sq, NULL, 0, 0, loss);
    tfc_tensor *objs[] = {h, hb, a, o, ob, dlt, sq};
    for (int i = 0; i < 7; i++) tfc_tensor_release(objs[i]);
    return s;
}

TEST(gradcheck_two_layer_mlp) {
    tfc_tensor *in[6] = {rnd(5, 3, 0, -1, 1, 70), rnd(3, 4, 0, -1, 1, 71),     rnd(4, 0, 0, -0.1, 0.1, 72),
                         rnd(4, 2, 0, -1, 1, 73), rnd(2, 0, 0, -0.1, 0.1, 74), rnd(5, 2, 0, -1, 1, 75)};
    for (int i = 1; i < 5; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    double err = 1;
    CHECK_OK(tfc_gradcheck(mlp, in, 6, NULL, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-6);
    /* x and y did not require grad: no gradient was made for them */
    tfc_tensor *gx = NULL, *gw = NULL;
    CHECK_OK(tfc_tensor_grad(in[0], &gx));
    CHECK_OK(tfc_tensor_grad(in[1], &gw));
    CHECK(gx == NULL && gw != NULL);
    tfc_tensor_release(gw);
    for (int i = 0; i < 6; i++) tfc_tensor_release(in[i]);
}

/* relu(a·b + c): the micrograd example, by hand. */
static void relu_example(double c, double ga, double gb, double gc) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    double va = 2, vb = -3;
    tfc_tensor *a = t_from(&va, NULL, 0), *b = t_from(&vb, NULL, 0), *cc = t_from(&c, NULL, 0);
    tfc_tensor *ab = NULL, *s = NULL, *r = NULL, *gr = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(a, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(b, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(cc, 1));
    CHECK_OK(tfc_mul(g, a, b, &ab));
    CHECK_OK(tfc_add(g, ab, cc, &s));
    CHECK_OK(tfc_relu(g, s, &r));
    CHECK_OK(tfc_graph_backward(g, r, NULL));
    CHECK_OK(tfc_tensor_grad(a, &gr));
    CHECK(gr && t_item(gr) == ga);
    tfc_tensor_release(gr);
    CHECK_OK(tfc_tensor_grad(b, &gr));
    CHECK(gr && t_item(gr) == gb);
    tfc_tensor_release(gr);
    CHECK_OK(tfc_tensor_grad(cc, &gr));
    CHECK(gr && t_item(gr) == gc);
    tfc_tensor_release(gr);
    tfc_tensor *objs[] = {a, b, cc, ab, s, r};
    for (int i = 0; i < 6; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

TEST(scalar_relu_example) {
    relu_example(5, 0, 0, 0);  /* 2·(−3)+5 = −1 → relu kills it */
    relu_example(7, -3, 2, 1); /* 2·(−3)+7 = 1 > 0 */
}

TEST(shared_subexpression_gets_both_contributions) {
    /* y = x·x + 3x  →  dy/dx = 2x + 3 */
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    double v = 1.5;
    tfc_tensor *x = t_from(&v, NULL, 0), *xx = NULL, *x3 = NULL, *y = NULL, *gx = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_mul(g, x, x, &xx));
    CHECK_OK(tfc_mul_scalar(g, x, 3, &x3));
    CHECK_OK(tfc_add(g, xx, x3, &y));
    CHECK_OK(tfc_graph_backward(g, y, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(t_item(gx) == 2 * 1.5 + 3);
    tfc_tensor_release(gx);
    /* backward again without clearing accumulates (retain_graph) */
    CHECK_OK(tfc_graph_backward(g, y, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(t_item(gx) == 2 * (2 * 1.5 + 3));
    tfc_tensor_release(gx);
    /* zero_grad: fill with zeros, then set to none */
    CHECK_OK(tfc_tensor_zero_grad(x, 0));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx && t_item(gx) == 0);
    tfc_tensor_release(gx);
    CHECK_OK(tfc_tensor_zero_grad(x, 1));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx == NULL);
    /* after clear, backward through the old nodes is a clear error */
    CHECK_OK(tfc_graph_clear(g));
    CHECK(tfc_graph_num_nodes(g) == 0);
    CHECK_ERR(tfc_graph_backward(g, y, NULL), TFC_ERR_INVALID_ARG, "cleared");
    tfc_tensor *objs[] = {x, xx, x3, y};
    for (int i = 0; i < 4; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

TEST(no_grad_detach_retain_grad_and_seed) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    int64_t d[1] = {3};
    tfc_tensor *x = rnd(3, 0, 0, -1, 1, 80), *y = NULL, *z = NULL, *det = NULL, *gy = NULL, *gx = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_graph_set_grad_enabled(g, 0));
    CHECK_OK(tfc_exp(g, x, &y));
    CHECK(!tfc_tensor_requires_grad(y) && tfc_graph_num_nodes(g) == 0);
    tfc_tensor_release(y);
    CHECK_OK(tfc_graph_set_grad_enabled(g, 1));
    CHECK_OK(tfc_exp(g, x, &y));
    CHECK(tfc_tensor_requires_grad(y) && !tfc_tensor_is_leaf(y));
    CHECK_OK(tfc_tensor_retain_grad(y));
    CHECK_OK(tfc_mul_scalar(g, y, 2, &z));
    /* non-scalar loss needs a seed */
    CHECK_ERR(tfc_graph_backward(g, z, NULL), TFC_ERR_SHAPE, "seed");
    tfc_tensor *bad = NULL, *badt = NULL, *seed = NULL;
    CHECK_OK(tfc_tensor_ones((int64_t[]){4}, 1, TFC_DTYPE_F64, &bad));
    CHECK_OK(tfc_tensor_ones(d, 1, TFC_DTYPE_F32, &badt));
    CHECK_ERR(tfc_graph_backward(g, z, bad), TFC_ERR_SHAPE, "seed is [4], loss is [3]");
    CHECK_ERR(tfc_graph_backward(g, z, badt), TFC_ERR_DTYPE, "seed is f32");
    CHECK_OK(tfc_tensor_ones(d, 1, TFC_DTYPE_F64, &seed));
    CHECK_OK(tfc_graph_backward(g, z, seed));
    CHECK_OK(tfc_tensor_grad(y, &gy));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double *vy = t_vals(y), *vgy = t_vals(gy), *vgx = t_vals(gx);
    for (int i = 0; i < 3; i++) {
        CHECK(vgy[i] == 2);
        CHECK_CLOSE(vgx[i], 2 * vy[i], 1e-15);
    }
    free(vy);
    free(vgy);
    free(vgx);
    /* detach shares storage but is a leaf outside the graph */
    CHECK_OK(tfc_tensor_detach(y, &det));
    CHECK(tfc_tensor_is_leaf(det) && !tfc_tensor_requires_grad(det) && tfc_tensor_shares_storage(det, y));
    CHECK_ERR(tfc_graph_backward(g, det, NULL), TFC_ERR_INVALID_ARG, "not produced");
    CHECK_ERR(tfc_tensor_set_requires_grad(y, 1), TFC_ERR_INVALID_ARG, "not a leaf");
    tfc_tensor *objs[] = {x, y, z, det, gy, gx, bad, badt, seed};
    for (int i = 0; i < 9; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

TEST(in_place_modification_of_saved_tensor_is_detected) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *a = rnd(3, 0, 0, -1, 1, 81), *b = rnd(3, 0, 0, -1, 1, 82), *p = NULL, *l = NULL, *ga = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(a, 1));
    CHECK_OK(tfc_mul(g, a, b, &p));
    CHECK_OK(tfc_sum(g, p, NULL, 0, 0, &l));
    CHECK_OK(tfc_tensor_fill(b, 2.0)); /* b was saved by mul */
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, "modified in place");
    CHECK_OK(tfc_tensor_grad(a, &ga));
    CHECK(ga == NULL); /* nothing was written */
    tfc_tensor *objs[] = {a, b, p, l};
    for (int i = 0; i < 4; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

/* loss = Σ y; backward through it must fail with the given message. */
static void check_backward_refused(tfc_graph *g, const tfc_tensor *y, const char *fragment) {
    tfc_tensor *l = NULL;
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, fragment);
    tfc_tensor_release(l);
}

/* Ops keep saved tensors in named context slots (attention's five, exp's
 * output) or, not yet converted, positionally (var): both are checked. */
TEST(in_place_modification_of_any_saved_slot_is_detected) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    int64_t d4[4] = {1, 2, 3, 2};
    tfc_tensor *q = t_rand(d4, 4, -1, 1, 83), *k = t_rand(d4, 4, -1, 1, 84), *v = t_rand(d4, 4, -1, 1, 85);
    tfc_tensor *x = rnd(4, 0, 0, -1, 1, 86), *o = NULL, *y = NULL, *var = NULL, *gq = NULL, *gx = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(q, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_attention(g, q, k, v, 1, 0.5, &o));
    CHECK_OK(tfc_tensor_fill(v, 0.5)); /* the third of attention's slots */
    check_backward_refused(g, o, "a tensor [1,2,3,2] saved by tfc_attention for backward was modified in place");
    CHECK_OK(tfc_tensor_fill(o, 0.0)); /* its output, also saved */
    check_backward_refused(g, o, "saved by tfc_attention");
    CHECK_OK(tfc_exp(g, x, &y));
    CHECK_OK(tfc_tensor_fill(y, 1.0)); /* exp saves only its output */
    check_backward_refused(g, y, "saved by tfc_exp");
    CHECK_OK(tfc_var(g, x, NULL, 0, 0, 1, &var));
    CHECK_OK(tfc_tensor_fill(x, 2.0)); /* var saves x positionally */
    check_backward_refused(g, var, "saved by tfc_var");
    CHECK_OK(tfc_tensor_grad(q, &gq));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gq == NULL && gx == NULL); /* nothing was written */
    tfc_tensor *objs[] = {q, k, v, x, o, y, var};
    for (int i = 0; i < 7; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

/* An empty optional slot (layernorm without weight) runs; once cleared, the slots are gone. */
TEST(cleared_graph_refuses_backward_through_named_slots) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = rnd(3, 4, 0, -1, 1, 87), *y = NULL, *p = NULL, *l = NULL, *gx = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_layernorm(g, x, NULL, NULL, 1e-5, &y));
    CHECK_OK(tfc_mul(g, y, y, &p));
    CHECK_OK(tfc_sum(g, p, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx != NULL);
    tfc_tensor_release(gx);
    CHECK_OK(tfc_graph_clear(g));
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, "cleared");
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, "cleared"); /* still, and no crash */
    tfc_graph_release(g);
    tfc_tensor *objs[] = {x, y, p, l}; /* the nodes, with their contexts, go with these */
    for (int i = 0; i < 4; i++) tfc_tensor_release(objs[i]);
}

TEST(deep_graph_has_no_recursion_limit) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    double v = 1.0;
    tfc_tensor *x = t_from(&v, NULL, 0), *cur = NULL, *gx = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    cur = tfc_tensor_retain(x);
    for (int i = 0; i < 200000; i++) {
        tfc_tensor *nx = NULL;
        CHECK_OK(tfc_add_scalar(g, cur, 1e-6, &nx));
        tfc_tensor_release(cur);
        cur = nx;
    }
    CHECK_OK(tfc_graph_backward(g, cur, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(t_item(gx) == 1.0);
    tfc_tensor_release(gx);
    tfc_graph_release(g); /* nodes stay alive through cur, then free iteratively */
    tfc_tensor_release(cur);
    tfc_tensor_release(x);
}

/*
 * Nodes become ready in backward later than the DFS that collects them
 * discovers them: here the chain visits each b_i one at a time, but all
 * 300 become ready together when the concat runs. The run needs room for
 * every node, not just the collecting stack's peak.
 */
TEST(backward_with_many_nodes_ready_at_once) {
    enum { K = 300 };
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    double one = 1.0;
    tfc_tensor *x = t_from(&one, (int64_t[]){1}, 1), *b[K], *d = NULL, *z = NULL, *sz = NULL, *l = NULL, *gx = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    for (int i = 0; i < K; i++) CHECK_OK(tfc_mul_scalar(g, x, i + 1, &b[i]));
    d = tfc_tensor_retain(b[K - 1]);
    for (int i = K - 2; i >= 0; i--) { /* d_i = d_{i+1} + b_i */
        tfc_tensor *nd = NULL;
        CHECK_OK(tfc_add(g, d, b[i], &nd));
        tfc_tensor_release(d);
        d = nd;
    }
    CHECK_OK(tfc_concat(g, (const tfc_tensor *const *)b, K, 0, &z));
    CHECK_OK(tfc_sum(g, z, NULL, 0, 0, &sz));
    CHECK_OK(tfc_add(g, sz, d, &l)); /* collected first: d's chain, then sz */
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(t_item(gx) == (double)K * (K + 1));
    for (int i = 0; i < K; i++) tfc_tensor_release(b[i]);
    tfc_tensor *objs[] = {x, d, z, sz, l, gx};
    for (int i = 0; i < 6; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

TEST(release_order_does_not_matter) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = rnd(4, 0, 0, -1, 1, 90), *y = NULL, *l = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_tanh(g, x, &y));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    tfc_tensor_release(x); /* the node keeps the leaf alive */
    tfc_tensor_release(y);
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    tfc_graph_release(g);
    tfc_tensor_release(l);
}

/* ---- fused layers through the graph -------------------------------------- */

OP1(op_softmax, tfc_softmax(g, in[0], 1, out))
OP1(op_log_softmax, tfc_log_softmax(g, in[0], -1, out))
OP1(op_layernorm, tfc_layernorm(g, in[0], in[1], in[2], 1e-5, out))
OP1(op_attention_causal, tfc_attention(g, in[0], in[1], in[2], 1, 0.4, out))
OP1(op_attention_full, tfc_attention(g, in[0], in[1], in[2], 0, 0.3, out))

static tfc_status op_cross_entropy(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    int64_t t[5] = {1, 0, 3, -100, 2};
    tfc_tensor *tg = NULL;
    tfc_status s = tfc_tensor_from_data(t, (int64_t[]){5}, 1, TFC_DTYPE_I64, &tg);
    if (s == TFC_OK) s = tfc_cross_entropy(g, in[0], tg, -100, out);
    tfc_tensor_release(tg);
    return s;
}

static tfc_status op_embedding(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    int32_t ids[6] = {1, 4, 1, 0, 4, 4};
    tfc_tensor *t = NULL;
    tfc_status s = tfc_tensor_from_data(ids, (int64_t[]){2, 3}, 2, TFC_DTYPE_I32, &t);
    if (s == TFC_OK) s = tfc_embedding(g, in[0], t, out);
    tfc_tensor_release(t);
    return s;
}

TEST(gradcheck_fused_layers) {
    tfc_tensor *in1[1] = {rnd(2, 5, 3, -2, 2, 100)};
    gradcheck_op("softmax dim 1", op_softmax, in1, 1);
    tfc_tensor *in2[1] = {rnd(4, 6, 0, -2, 2, 101)};
    gradcheck_op("log_softmax", op_log_softmax, in2, 1);
    tfc_tensor *in3[3] = {rnd(2, 3, 8, -2, 2, 102), rnd(8, 0, 0, 0.5, 1.5, 103), rnd(8, 0, 0, -1, 1, 104)};
    gradcheck_op("layernorm", op_layernorm, in3, 3);
    tfc_tensor *in4[1] = {rnd(5, 4, 0, -2, 2, 105)};
    gradcheck_op("cross_entropy with ignore_index", op_cross_entropy, in4, 1);
    tfc_tensor *in5[1] = {rnd(5, 3, 0, -1, 1, 106)};
    gradcheck_op("embedding with duplicate ids", op_embedding, in5, 1);
    int64_t dq[4] = {1, 2, 5, 3}, dk[4] = {1, 2, 7, 3}, dv[4] = {1, 2, 7, 4};
    tfc_tensor *in6[3] = {t_rand(dq, 4, -1, 1, 107), t_rand(dk, 4, -1, 1, 108), t_rand(dv, 4, -1, 1, 109)};
    gradcheck_op("attention causal T=5 S=7", op_attention_causal, in6, 3);
    tfc_tensor *in7[3] = {t_rand(dq, 4, -1, 1, 110), t_rand(dk, 4, -1, 1, 111), t_rand(dv, 4, -1, 1, 112)};
    gradcheck_op("attention full", op_attention_full, in7, 3);
}

/*
 * One transformer block on x [B,T,C] with H heads:
 *   h = x + proj(attn(ln1(x)));  y = h + W2 gelu(W1 ln2(h))
 * Inputs: x, ln1 w/b, Wqkv [C,3C], Wo [C,C], ln2 w/b, W1 [C,4C], W2 [4C,C].
 */
enum { BB = 2, BT = 4, BC = 4, BH = 2 };
static tfc_status block(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n;
    (void)ctx;
    tfc_tensor *x = in[0], *t[24] = {0};
    int k = 0;
    tfc_status s = tfc_layernorm(g, x, in[1], in[2], 1e-5, &t[k++]);                            /* 0 ln1 */
    if (s == TFC_OK) s = tfc_matmul(g, t[0], in[3], &t[k++]);                                   /* 1 qkv [B,T,3C] */
    if (s == TFC_OK) s = tfc_reshape(g, t[1], (int64_t[]){BB, BT, 3, BH, BC / BH}, 5, &t[k++]); /* 2 */
    if (s == TFC_OK) s = tfc_permute(g, t[2], (int32_t[]){2, 0, 3, 1, 4}, 5, &t[k++]);          /* 3 [3,B,H,T,D] */
    tfc_tensor *qkv[3] = {0};
    if (s == TFC_OK) s = tfc_split(g, t[3], (int64_t[]){1, 1, 1}, 3, 0, qkv);
    for (int i = 0; i < 3 && s == TFC_OK; i++) {
        tfc_tensor *sq = NULL;
        s = tfc_squeeze(g, qkv[i], 0, &sq);
        tfc_tensor_release(qkv[i]);
        qkv[i] = sq;
    }
    if (s == TFC_OK) s = tfc_attention(g, qkv[0], qkv[1], qkv[2], 1, 1.0 / sqrt(BC / BH), &t[k++]); /* 4 */
    if (s == TFC_OK) s = tfc_transpose(g, t[4], 1, 2, &t[k++]);                                     /* 5 [B,T,H,D] */
    if (s == TFC_OK) s = tfc_reshape(g, t[5], (int64_t[]){BB, BT, BC}, 3, &t[k++]);                 /* 6 */
    if (s == TFC_OK) s = tfc_matmul(g, t[6], in[4], &t[k++]);                                       /* 7 */
    if (s == TFC_OK) s = tfc_add(g, x, t[7], &t[k++]);                                              /* 8 h */
    if (s == TFC_OK) s = tfc_layernorm(g, t[8], in[5], in[6], 1e-5, &t[k++]);                       /* 9 */
    if (s == TFC_OK) s = tfc_matmul(g, t[9], in[7], &t[k++]);                                       /* 10 */
    if (s == TFC_OK) s = tfc_gelu(g, t[10], TFC_GELU_TANH, &t[k++]);                                /* 11 */
    if (s == TFC_OK) s = tfc_matmul(g, t[11], in[8], &t[k++]);                                      /* 12 */
    if (s == TFC_OK) s = tfc_add(g, t[8], t[12], &t[k++]);                                          /* 13 y */
    for (int i = 0; i < 3; i++) tfc_tensor_release(qkv[i]);
    if (s == TFC_OK) {
        s = weighted_sum(g, t[13], loss); /* consumes t[13] */
        t[13] = NULL;
    }
    for (int i = 0; i < k; i++) tfc_tensor_release(t[i]);
    return s;
}

TEST(gradcheck_transformer_block) {
    int64_t dx[3] = {BB, BT, BC};
    tfc_tensor *in[9] = {
        t_rand(dx, 3, -1, 1, 120),        rnd(BC, 0, 0, 0.5, 1.5, 121),     rnd(BC, 0, 0, -.2, .2, 122),
        rnd(BC, 3 * BC, 0, -.5, .5, 123), rnd(BC, BC, 0, -.5, .5, 124),     rnd(BC, 0, 0, .5, 1.5, 125),
        rnd(BC, 0, 0, -.2, .2, 126),      rnd(BC, 4 * BC, 0, -.5, .5, 127), rnd(4 * BC, BC, 0, -.5, .5, 128)};
    for (int i = 0; i < 9; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    /* ε = 1e-5 balances truncation (ε²) against rounding (1e-16·|f|/ε) for this deeper function. */
    CHECK_OK(tfc_gradcheck(block, in, 9, NULL, 1e-5, &err, &wi, &wk));
    tfc_test_checks++;
    if (!(err < 1e-6)) TFC_FAIL_AT("block: max rel err %g at input %d elem %lld", err, wi, (long long)wk);
    for (int i = 0; i < 9; i++) tfc_tensor_release(in[i]);
}

/* The explicit door and the graph door give the same gradients. */
TEST(explicit_entry_points_equal_graph_path) {
    int64_t dq[4] = {2, 2, 6, 4};
    tfc_tensor *q = t_rand(dq, 4, -1, 1, 130), *k = t_rand(dq, 4, -1, 1, 131), *v = t_rand(dq, 4, -1, 1, 132);
    tfc_tensor *o = NULL, *l = NULL, *dout = t_rand(dq, 4, -1, 1, 133);
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    for (int i = 0; i < 3; i++) CHECK_OK(tfc_tensor_set_requires_grad(i == 0 ? q : i == 1 ? k : v, 1));
    CHECK_OK(tfc_attention(g, q, k, v, 1, 0.5, &o));
    CHECK_OK(tfc_graph_backward(g, o, dout));
    tfc_tensor *o2 = NULL, *lse = NULL, *dq2 = NULL, *dk2 = NULL, *dv2 = NULL, *gq = NULL, *gk = NULL, *gv = NULL;
    CHECK_OK(tfc_tensor_empty(dq, 4, TFC_DTYPE_F64, &o2));
    CHECK_OK(tfc_tensor_empty(dq, 3, TFC_DTYPE_F64, &lse));
    CHECK_OK(tfc_tensor_zeros(dq, 4, TFC_DTYPE_F64, &dq2));
    CHECK_OK(tfc_tensor_zeros(dq, 4, TFC_DTYPE_F64, &dk2));
    CHECK_OK(tfc_tensor_zeros(dq, 4, TFC_DTYPE_F64, &dv2));
    CHECK_OK(tfc_attention_forward(q, k, v, 1, 0.5, o2, lse));
    CHECK_OK(tfc_attention_backward(dout, q, k, v, o2, lse, 1, 0.5, dq2, dk2, dv2, TFC_GRAD_ACCUMULATE));
    CHECK_OK(tfc_tensor_grad(q, &gq));
    CHECK_OK(tfc_tensor_grad(k, &gk));
    CHECK_OK(tfc_tensor_grad(v, &gv));
    tfc_tensor *pairs[4][2] = {{o, o2}, {gq, dq2}, {gk, dk2}, {gv, dv2}};
    for (int p = 0; p < 4; p++) {
        double *a = t_vals(pairs[p][0]), *b = t_vals(pairs[p][1]);
        int same = 1;
        for (int i = 0; i < 96; i++) same &= a[i] == b[i];
        CHECK(same);
        free(a);
        free(b);
    }
    /* matmul's explicit backward against the graph's */
    int64_t da[3] = {3, 4, 5}, dbb[2] = {5, 2}, dd[3] = {3, 4, 2};
    tfc_tensor *A = t_rand(da, 3, -1, 1, 134), *B = t_rand(dbb, 2, -1, 1, 135), *D = t_rand(dd, 3, -1, 1, 136);
    tfc_tensor *M = NULL, *gA = NULL, *gB = NULL, *eA = NULL, *eB = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(A, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(B, 1));
    CHECK_OK(tfc_matmul(g, A, B, &M));
    CHECK_OK(tfc_graph_backward(g, M, D));
    CHECK_OK(tfc_tensor_empty(da, 3, TFC_DTYPE_F64, &eA));
    CHECK_OK(tfc_tensor_empty(dbb, 2, TFC_DTYPE_F64, &eB));
    CHECK_OK(tfc_matmul_backward(D, A, B, eA, eB, 0));
    CHECK_OK(tfc_tensor_grad(A, &gA));
    CHECK_OK(tfc_tensor_grad(B, &gB));
    double *x1 = t_vals(gA), *x2 = t_vals(eA), *y1 = t_vals(gB), *y2 = t_vals(eB);
    for (int i = 0; i < 60; i++) CHECK_CLOSE(x1[i], x2[i], 1e-15);
    for (int i = 0; i < 10; i++) CHECK_CLOSE(y1[i], y2[i], 1e-15);
    free(x1);
    free(x2);
    free(y1);
    free(y2);
    CHECK_ERR(tfc_matmul_backward(D, A, B, eB, NULL, 0), TFC_ERR_SHAPE, "da is [5,2]");
    tfc_tensor *objs[] = {q, k, v, o, l, dout, o2, lse, dq2, dk2, dv2, gq, gk, gv, A, B, D, M, gA, gB, eA, eB};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}
