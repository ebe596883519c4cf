/*
 * tfc_linear: forward against naive loops written here, gradients against
 * f64 finite differences (tfc_gradcheck) and against the unfused
 * tfc_matmul + tfc_add graph, only-what-needs-grad, empty dims, bad input.
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* loss = Σ out ⊙ R with R a fixed random tensor (so dy is not all ones). */
static tfc_status weighted_sum(tfc_graph *g, tfc_tensor *out, tfc_tensor **loss) {
    int64_t dims[8];
    int32_t nd = tfc_tensor_ndim(out);
    tfc_tensor *r = NULL, *p = NULL;
    tfc_status s = tfc_tensor_shape(out, dims, 8);
    if (s == TFC_OK) s = tfc_tensor_uniform(dims, nd, tfc_tensor_dtype(out), -1, 1, 77, 0, &r);
    if (s == TFC_OK) s = tfc_mul(g, out, r, &p);
    if (s == TFC_OK) s = tfc_sum(g, p, NULL, 0, 0, loss);
    tfc_tensor_release(r);
    tfc_tensor_release(p);
    tfc_tensor_release(out);
    return s;
}

/* ctx: how w (in[1]) and x (in[0]) reach the op. */
typedef struct lin_case {
    int transpose_w; /* in[1] is [out, in]; the op gets its transposed view */
    int permute_x;   /* in[0] is [3, 2, in]; the op gets it permuted to [2, 3, in] */
} lin_case;

static tfc_status run_linear(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    const lin_case *c = ctx;
    tfc_tensor *x = NULL, *w = NULL, *y = NULL;
    tfc_status s =
        c->permute_x ? tfc_permute(g, in[0], (int32_t[]){1, 0, 2}, 3, &x) : (x = tfc_tensor_retain(in[0]), TFC_OK);
    if (s == TFC_OK) s = c->transpose_w ? tfc_transpose(g, in[1], 0, 1, &w) : (w = tfc_tensor_retain(in[1]), TFC_OK);
    if (s == TFC_OK) s = tfc_linear(g, x, w, n > 2 ? in[2] : NULL, &y);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
    if (s != TFC_OK) return s;
    return weighted_sum(g, y, loss);
}

static void gradcheck_linear(const char *name, lin_case c, tfc_tensor **in, int32_t n) {
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    tfc_status s = tfc_gradcheck(run_linear, in, n, &c, 1e-6, &err, &wi, &wk);
    tfc_test_checks++;
    if (s != TFC_OK)
        TFC_FAIL_AT("%s: gradcheck failed to run: %s", name, tfc_last_error());
    else if (!(err < 1e-6))
        TFC_FAIL_AT("%s: max relative error %g at input %d element %lld", name, err, wi, (long long)wk);
    for (int32_t i = 0; i < n; i++) tfc_tensor_release(in[i]);
}

TEST(gradcheck_batched_with_and_without_bias_strided_w_and_x) {
    int64_t dx[3] = {2, 3, 4}, dxp[3] = {3, 2, 4}, dw[2] = {4, 5}, dwt[2] = {5, 4}, db[1] = {5};
    tfc_tensor *a[3] = {t_rand(dx, 3, -1, 1, 1), t_rand(dw, 2, -1, 1, 2), t_rand(db, 1, -1, 1, 3)};
    gradcheck_linear("x [2,3,4], w [4,5], b [5]", (lin_case){0, 0}, a, 3);
    tfc_tensor *b[2] = {t_rand(dx, 3, -1, 1, 4), t_rand(dw, 2, -1, 1, 5)};
    gradcheck_linear("no bias", (lin_case){0, 0}, b, 2);
    tfc_tensor *c[3] = {t_rand(dxp, 3, -1, 1, 6), t_rand(dwt, 2, -1, 1, 7), t_rand(db, 1, -1, 1, 8)};
    gradcheck_linear("permuted x, transposed w, bias", (lin_case){1, 1}, c, 3);
    tfc_tensor *d[2] = {t_rand(dx, 3, -1, 1, 9), t_rand(dwt, 2, -1, 1, 10)};
    gradcheck_linear("transposed w, no bias", (lin_case){1, 0}, d, 2);
    int64_t d1[1] = {4};
    tfc_tensor *e[3] = {t_rand(d1, 1, -1, 1, 11), t_rand(dw, 2, -1, 1, 12), t_rand(db, 1, -1, 1, 13)};
    gradcheck_linear("1-D x", (lin_case){0, 0}, e, 3);
}

/* out[m, j] = Σ_k x[m, k] w[k, j] + b[j], written out for the reference. */
TEST(forward_matches_naive_loops_f32_and_f64) {
    const int64_t M = 7, K = 9, N = 5;
    for (int f32 = 0; f32 < 2; f32++) {
        tfc_dtype dt = f32 ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
        tfc_tensor *x = NULL, *w = NULL, *b = NULL, *y = NULL;
        CHECK_OK(tfc_tensor_uniform((int64_t[]){M, K}, 2, dt, -1, 1, 20, 0, &x));
        CHECK_OK(tfc_tensor_uniform((int64_t[]){K, N}, 2, dt, -1, 1, 21, 0, &w));
        CHECK_OK(tfc_tensor_uniform((int64_t[]){N}, 1, dt, -1, 1, 22, 0, &b));
        CHECK_OK(tfc_linear(NULL, x, w, b, &y));
        double *xv = t_vals(x), *wv = t_vals(w), *bv = t_vals(b), *yv = t_vals(y);
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                double acc = bv[j];
                for (int64_t k = 0; k < K; k++) acc += xv[m * K + k] * wv[k * N + j];
                CHECK_CLOSE(yv[m * N + j], acc, f32 ? 1e-5 : 1e-13);
            }
        CHECK(tfc_tensor_dtype(y) == dt);
        free(xv);
        free(wv);
        free(bv);
        free(yv);
        tfc_tensor *objs[] = {x, w, b, y};
        for (int i = 0; i < 4; i++) tfc_tensor_release(objs[i]);
    }
}

/* Values and all three gradients of linear vs matmul + add, f64, to 1e-12. */
static void compare_with_unfused(int with_bias) {
    int64_t dx[3] = {2, 3, 6}, dw[2] = {6, 4}, db[1] = {4}, dy[3] = {2, 3, 4};
    tfc_tensor *x = t_rand(dx, 3, -1, 1, 30), *w = t_rand(dw, 2, -1, 1, 31), *b = t_rand(db, 1, -1, 1, 32);
    tfc_tensor *seed = t_rand(dy, 3, -1, 1, 33);
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(b, 1));
    double *vals[2][4] = {{0}};
    for (int fused = 0; fused < 2; fused++) {
        tfc_graph *g = NULL;
        tfc_tensor *y = NULL, *xw = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
        CHECK_OK(tfc_graph_new(&g));
        if (fused) {
            CHECK_OK(tfc_linear(g, x, w, with_bias ? b : NULL, &y));
        } else {
            CHECK_OK(tfc_matmul(g, x, w, &xw));
            if (with_bias)
                CHECK_OK(tfc_add(g, xw, b, &y));
            else
                y = tfc_tensor_retain(xw);
        }
        CHECK_OK(tfc_graph_backward(g, y, seed));
        CHECK_OK(tfc_tensor_grad(x, &gx));
        CHECK_OK(tfc_tensor_grad(w, &gw));
        CHECK_OK(tfc_tensor_grad(b, &gb));
        CHECK(with_bias == (gb != NULL));
        vals[fused][0] = t_vals(y);
        vals[fused][1] = t_vals(gx);
        vals[fused][2] = t_vals(gw);
        vals[fused][3] = gb ? t_vals(gb) : NULL;
        tfc_tensor *objs[] = {y, xw, gx, gw, gb};
        for (int i = 0; i < 5; i++) tfc_tensor_release(objs[i]);
        CHECK_OK(tfc_tensor_zero_grad(x, 1));
        CHECK_OK(tfc_tensor_zero_grad(w, 1));
        CHECK_OK(tfc_tensor_zero_grad(b, 1));
        tfc_graph_release(g);
    }
    const int64_t counts[4] = {24, 36, 24, 4};
    for (int k = 0; k < 4; k++) {
        if (k == 3 && !with_bias) continue;
        for (int64_t i = 0; i < counts[k]; i++) CHECK_CLOSE(vals[1][k][i], vals[0][k][i], 1e-12);
    }
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 4; k++) free(vals[f][k]);
    tfc_tensor *objs[] = {x, w, b, seed};
    for (int i = 0; i < 4; i++) tfc_tensor_release(objs[i]);
}

TEST(equals_matmul_plus_add_f64) {
    compare_with_unfused(1);
    compare_with_unfused(0);
}

TEST(computes_only_the_gradients_asked_for) {
    int64_t dx[2] = {5, 3}, dw[2] = {3, 2}, db[1] = {2};
    tfc_tensor *x = t_rand(dx, 2, -1, 1, 40), *w = t_rand(dw, 2, -1, 1, 41), *b = t_rand(db, 1, -1, 1, 42);
    tfc_tensor *y = NULL, *l = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(b, 1)); /* only b */
    CHECK_OK(tfc_linear(g, x, w, b, &y));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK_OK(tfc_tensor_grad(w, &gw));
    CHECK_OK(tfc_tensor_grad(b, &gb));
    CHECK(gx == NULL && gw == NULL && gb != NULL);
    if (gb) {
        double *v = t_vals(gb); /* d Σy / db_j = number of rows */
        CHECK_CLOSE(v[0], 5.0, 0);
        CHECK_CLOSE(v[1], 5.0, 0);
        free(v);
    }
    /* Nothing requires grad: nothing is recorded. */
    int64_t before = tfc_graph_num_nodes(g);
    tfc_tensor *y2 = NULL;
    CHECK_OK(tfc_linear(g, x, w, NULL, &y2));
    CHECK(tfc_graph_num_nodes(g) == before);
    CHECK(!tfc_tensor_requires_grad(y2));
    tfc_tensor *objs[] = {x, w, b, y, l, gb, y2};
    for (int i = 0; i < 7; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

TEST(empty_dims) {
    /* in = 0: out = b in every row, dw is [0, 3], db = row count. */
    tfc_tensor *x = NULL, *w = NULL, *b = NULL, *y = NULL, *l = NULL, *gb = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_empty((int64_t[]){4, 0}, 2, TFC_DTYPE_F64, &x));
    CHECK_OK(tfc_tensor_empty((int64_t[]){0, 3}, 2, TFC_DTYPE_F64, &w));
    b = t_from((double[]){1, 2, 3}, (int64_t[]){3}, 1);
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(b, 1));
    CHECK_OK(tfc_linear(g, x, w, b, &y));
    double *v = t_vals(y);
    for (int i = 0; i < 12; i++) CHECK_CLOSE(v[i], (double)(i % 3 + 1), 0);
    free(v);
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_tensor_grad(b, &gb));
    v = t_vals(gb);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(v[i], 4.0, 0);
    free(v);
    tfc_tensor *objs[] = {x, w, b, y, l, gb};
    for (int i = 0; i < 6; i++) tfc_tensor_release(objs[i]);
    /* no rows: dw = 0 */
    tfc_tensor *x0 = NULL, *w0 = NULL, *y0 = NULL, *l0 = NULL, *gw = NULL;
    CHECK_OK(tfc_tensor_empty((int64_t[]){0, 2}, 2, TFC_DTYPE_F64, &x0));
    CHECK_OK(tfc_tensor_full((int64_t[]){2, 3}, 2, TFC_DTYPE_F64, 1.0, &w0));
    CHECK_OK(tfc_tensor_set_requires_grad(w0, 1));
    CHECK_OK(tfc_linear(g, x0, w0, NULL, &y0));
    CHECK(tfc_tensor_numel(y0) == 0);
    CHECK_OK(tfc_sum(g, y0, NULL, 0, 0, &l0));
    CHECK_OK(tfc_graph_backward(g, l0, NULL));
    CHECK_OK(tfc_tensor_grad(w0, &gw));
    v = t_vals(gw);
    for (int i = 0; i < 6; i++) CHECK_CLOSE(v[i], 0.0, 0);
    free(v);
    tfc_tensor *objs2[] = {x0, w0, y0, l0, gw};
    for (int i = 0; i < 5; i++) tfc_tensor_release(objs2[i]);
    tfc_graph_release(g);
}

TEST(bad_inputs_name_function_argument_and_shapes) {
    int64_t dx[3] = {2, 3, 4}, dw[2] = {4, 5}, dbad[2] = {5, 5};
    tfc_tensor *x = t_rand(dx, 3, -1, 1, 50), *w = t_rand(dw, 2, -1, 1, 51), *wbad = t_rand(dbad, 2, -1, 1, 52);
    tfc_tensor *b4 = t_rand((int64_t[]){4}, 1, -1, 1, 53), *b2d = t_rand((int64_t[]){1, 5}, 2, -1, 1, 54);
    tfc_tensor *x32 = NULL, *xi = NULL, *y = NULL, *w1 = t_rand((int64_t[]){4}, 1, -1, 1, 55);
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_F32, &x32));
    CHECK_OK(tfc_tensor_zeros(dx, 3, TFC_DTYPE_I32, &xi));
    CHECK_ERR(tfc_linear(NULL, NULL, w, NULL, &y), TFC_ERR_INVALID_ARG, "tfc_linear: x is NULL");
    CHECK_ERR(tfc_linear(NULL, x, NULL, NULL, &y), TFC_ERR_INVALID_ARG, "tfc_linear: w is NULL");
    CHECK_ERR(tfc_linear(NULL, x, w, NULL, NULL), TFC_ERR_INVALID_ARG, "tfc_linear: out is NULL");
    CHECK_ERR(tfc_linear(NULL, x, wbad, NULL, &y), TFC_ERR_SHAPE,
              "tfc_linear: x is [2,3,4], w is [5,5]: x's last dim 4 must equal w's in dim 5");
    CHECK_ERR(tfc_linear(NULL, x, w1, NULL, &y), TFC_ERR_SHAPE, "tfc_linear: w is [4]; need w [in, out]");
    CHECK_ERR(tfc_linear(NULL, x, w, b4, &y), TFC_ERR_SHAPE, "tfc_linear: b is [4], w is [4,5]: need b [5]");
    CHECK_ERR(tfc_linear(NULL, x, w, b2d, &y), TFC_ERR_SHAPE, "tfc_linear: b is [1,5]");
    CHECK_ERR(tfc_linear(NULL, x32, w, NULL, &y), TFC_ERR_DTYPE, "tfc_linear: x is f32, w is f64");
    CHECK_ERR(tfc_linear(NULL, xi, w, NULL, &y), TFC_ERR_DTYPE, "tfc_linear: x is i32");
    CHECK(y == NULL);
    tfc_tensor *objs[] = {x, w, wbad, b4, b2d, x32, xi, w1};
    for (int i = 0; i < 8; i++) tfc_tensor_release(objs[i]);
}
