/*
 * The ops of issue #16 ("ops a user expects"): pointwise maps, clamp,
 * minimum/maximum, comparisons, any/all, cumsum, triu/tril, sort/argsort,
 * one_hot, multinomial. Values against loops written here, gradients by
 * tfc_gradcheck in f64 (strided inputs included) and hand-derived values
 * at the points where torch fixes a convention (ties, bounds, zero),
 * multinomial by chi-square against its probabilities, and bad input.
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* ---- helpers --------------------------------------------------------------- */

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

/* The op under test; transposed: 2-D inputs are handed to it as (recorded) transposed views. */
typedef struct op_case {
    op_fn f;
    int transposed;
} op_case;

static tfc_status run_op(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    const op_case *c = ctx;
    tfc_tensor *use[4] = {0}, *out = NULL;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++)
        s = c->transposed && tfc_tensor_ndim(in[i]) == 2 ? tfc_transpose(g, in[i], 0, 1, &use[i])
                                                         : (use[i] = tfc_tensor_retain(in[i]), TFC_OK);
    if (s == TFC_OK) s = c->f(g, use, &out);
    for (int32_t i = 0; i < n; i++) tfc_tensor_release(use[i]);
    if (s != TFC_OK) return s;
    return weighted_sum(g, out, loss);
}

/*
 * Gradcheck of f on in[0..n) (contiguous; each made to require grad;
 * released after). With transposed, f sees the 2-D inputs as strided views.
 */
static void gradcheck_case(const char *name, op_fn f, int transposed, tfc_tensor **in, int32_t n) {
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    op_case c = {f, transposed};
    tfc_status s = tfc_gradcheck(run_op, in, n, &c, 1e-6, &err, &wi, &wk);
    tfc_test_checks++;
    if (s != TFC_OK)
        TFC_FAIL_AT("%s: gradcheck failed to run: %s", name, tfc_last_error());
    else if (!(err < 1e-6))
        TFC_FAIL_AT("%s: max relative error %g at input %d element %lld", name, err, wi, (long long)wk);
    for (int32_t i = 0; i < n; i++) tfc_tensor_release(in[i]);
}
#define gradcheck_op(name, f, in, n) gradcheck_case(name, f, 0, in, n)
#define gradcheck_strided(name, f, in, n) gradcheck_case(name, f, 1, in, n)

static tfc_tensor *rnd3(int64_t a, int64_t b, int64_t c, double lo, double hi, uint64_t seed) {
    int64_t d[3] = {a, b, c};
    return t_rand(d, c ? 3 : b ? 2 : 1, lo, hi, seed);
}

/* A [cols, rows] f64 tensor's transpose: a strided [rows, cols] view. */
static tfc_tensor *strided(int64_t rows, int64_t cols, double lo, double hi, uint64_t seed) {
    tfc_tensor *base = rnd3(cols, rows, 0, lo, hi, seed), *t = NULL;
    if (tfc_transpose(NULL, base, 0, 1, &t) != TFC_OK) abort();
    tfc_tensor_release(base);
    return t;
}

static tfc_tensor *from(const double *v, int64_t n) { return t_from(v, &n, 1); }

static tfc_tensor *from_dt(const double *v, int64_t n, tfc_dtype dt) {
    tfc_tensor *t = from(v, n), *c = NULL;
    if (tfc_cast(NULL, t, dt, &c) != TFC_OK) abort();
    tfc_tensor_release(t);
    return c;
}

/* t's gradient values (caller frees). */
static double *grad_vals(const tfc_tensor *t) {
    tfc_tensor *g = NULL;
    if (tfc_tensor_grad(t, &g) != TFC_OK || !g) abort();
    double *v = t_vals(g);
    tfc_tensor_release(g);
    return v;
}

/* Backward of Σ out (seed 1) for a one-input op; returns x's gradient values (caller frees). */
static double *grad_of_sum(tfc_status (*op)(tfc_graph *, const tfc_tensor *, tfc_tensor **), tfc_tensor *x) {
    tfc_graph *g = NULL;
    tfc_tensor *y = NULL, *l = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(op(g, x, &y));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    double *v = grad_vals(x);
    tfc_tensor_release(y);
    tfc_tensor_release(l);
    tfc_graph_release(g);
    return v;
}

/* ---- pointwise ------------------------------------------------------------- */

typedef tfc_status (*unary_fn)(tfc_graph *, const tfc_tensor *, tfc_tensor **);

static double ref_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

TEST(pointwise_values_against_libm_f64_f32_strided) {
    unary_fn fs[] = {tfc_abs, tfc_sign, tfc_sin, tfc_cos, tfc_floor, tfc_ceil, tfc_round};
    double (*ref[])(double) = {fabs, ref_sign, sin, cos, floor, ceil, nearbyint};
    const char *names[] = {"abs", "sign", "sin", "cos", "floor", "ceil", "round"};
    for (int k = 0; k < 7; k++)
        for (int dt = 0; dt < 2; dt++) {
            tfc_tensor *x64 = strided(3, 5, -4, 4, 7 + k), *x = NULL, *y = NULL;
            CHECK_OK(tfc_cast(NULL, x64, dt ? TFC_DTYPE_F32 : TFC_DTYPE_F64, &x));
            CHECK_OK(tfc_transpose(NULL, x, 0, 1, &y)); /* re-strided after the cast made it contiguous */
            tfc_tensor_release(x);
            CHECK_OK(tfc_transpose(NULL, y, 0, 1, &x));
            tfc_tensor_release(y);
            CHECK_OK(fs[k](NULL, x, &y));
            double *xv = t_vals(x), *yv = t_vals(y);
            for (int i = 0; i < 15; i++) {
                double want = ref[k](xv[i]);
                if (dt) want = (double)(float)want;
                if (!(fabs(yv[i] - want) <= (dt ? 1e-6 : 1e-15) * (1 + fabs(want))))
                    TFC_FAIL_AT("%s (%s) of %.17g: %.17g, want %.17g", names[k], dt ? "f32" : "f64", xv[i], yv[i],
                                want);
                tfc_test_checks++;
            }
            free(xv), free(yv);
            tfc_tensor_release(x64), tfc_tensor_release(x), tfc_tensor_release(y);
        }
}

TEST(round_is_half_to_even_and_sign_of_zero_and_nan_is_zero) {
    double v[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 0.0, -0.0, NAN};
    double want_round[] = {0, 2, 2, -0.0, -2, -2, 0, 0, -0.0, NAN};
    double want_sign[] = {1, 1, 1, -1, -1, -1, 1, 0, 0, 0};
    tfc_tensor *x = from(v, 10), *r = NULL, *s = NULL;
    CHECK_OK(tfc_round(NULL, x, &r));
    CHECK_OK(tfc_sign(NULL, x, &s));
    double *rv = t_vals(r), *sv = t_vals(s);
    for (int i = 0; i < 9; i++) CHECK(rv[i] == want_round[i]);
    CHECK(isnan(rv[9]));
    for (int i = 0; i < 10; i++) CHECK(sv[i] == want_sign[i]);
    free(rv), free(sv);
    tfc_tensor_release(x), tfc_tensor_release(r), tfc_tensor_release(s);
}

static tfc_status op_abs(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) { return tfc_abs(g, in[0], out); }
static tfc_status op_sin(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) { return tfc_sin(g, in[0], out); }
static tfc_status op_cos(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) { return tfc_cos(g, in[0], out); }
static tfc_status op_clamp(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    return tfc_clamp(g, in[0], -0.5, 0.5, out);
}
static tfc_status op_clamp_min(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    return tfc_clamp(g, in[0], 0.25, INFINITY, out);
}
static tfc_status op_max(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    return tfc_maximum(g, in[0], in[1], out);
}
static tfc_status op_min(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    return tfc_minimum(g, in[0], in[1], out);
}

/* Values kept |x| in [0.1, 1] with random signs and away from ±0.5 / 0.25 (the clamp bounds used). */
static tfc_tensor *away_from_kinks(uint64_t seed) {
    tfc_tensor *t = strided(4, 3, 0, 1, seed);
    double *v = t_vals(t);
    double w[12];
    for (int i = 0; i < 12; i++) {
        double a = 0.1 + 0.08 * (double)(i % 12) + 0.01 * v[i];
        if (fabs(a - 0.5) < 0.03 || fabs(a - 0.25) < 0.03) a += 0.05;
        w[i] = (i % 3 ? a : -a);
    }
    free(v);
    tfc_tensor_release(t);
    int64_t d[2] = {3, 4};
    return t_from(w, d, 2);
}

TEST(gradcheck_pointwise_clamp_minmax) {
    struct {
        const char *n;
        op_fn f;
    } u[] = {{"abs", op_abs}, {"sin", op_sin}, {"cos", op_cos}, {"clamp", op_clamp}, {"clamp_min", op_clamp_min}};
    for (int k = 0; k < 5; k++) {
        tfc_tensor *in[1] = {away_from_kinks(30 + k)};
        gradcheck_strided(u[k].n, u[k].f, in, 1);
    }
    /* broadcast [2,3,4] against [3,1]; uniform draws never tie */
    tfc_tensor *in[2] = {rnd3(2, 3, 4, -1, 1, 41), rnd3(3, 1, 0, -1, 1, 42)};
    gradcheck_op("maximum", op_max, in, 2);
    tfc_tensor *in2[2] = {rnd3(4, 3, 0, -1, 1, 43), rnd3(4, 3, 0, -1, 1, 44)};
    gradcheck_strided("minimum", op_min, in2, 2);
}

TEST(gradients_at_the_conventions_torch_fixes) {
    /* abs at 0: 0; sign/floor/ceil/round: 0 everywhere */
    double v[] = {-1.0, 0.0, 2.0};
    tfc_tensor *xa = from(v, 3);
    double *g = grad_of_sum(tfc_abs, xa);
    CHECK(g[0] == -1 && g[1] == 0 && g[2] == 1);
    free(g);
    tfc_tensor_release(xa);
    unary_fn zero[] = {tfc_sign, tfc_floor, tfc_ceil, tfc_round};
    for (int k = 0; k < 4; k++) {
        tfc_tensor *x = from(v, 3);
        g = grad_of_sum(zero[k], x);
        CHECK(g[0] == 0 && g[1] == 0 && g[2] == 0);
        free(g);
        tfc_tensor_release(x);
    }
    /* clamp(x, 0, 1): gradient 1 at both bounds, 0 outside; min > max: value max, gradient 0 */
    double c[] = {-1, 0, 0.5, 1, 2};
    for (int swap = 0; swap < 2; swap++) {
        tfc_tensor *x = from(c, 5), *y = NULL, *l = NULL;
        tfc_graph *gr = NULL;
        CHECK_OK(tfc_graph_new(&gr));
        CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
        CHECK_OK(tfc_clamp(gr, x, swap ? 1.5 : 0, swap ? 0.5 : 1, &y));
        CHECK_OK(tfc_sum(gr, y, NULL, 0, 0, &l));
        CHECK_OK(tfc_graph_backward(gr, l, NULL));
        double *yv = t_vals(y), *gv = grad_vals(x);
        for (int i = 0; i < 5; i++) {
            CHECK(yv[i] == (swap ? 0.5 : fmin(fmax(c[i], 0), 1)));
            CHECK(gv[i] == (swap ? 0 : (c[i] >= 0 && c[i] <= 1)));
        }
        free(yv), free(gv);
        tfc_tensor_release(x), tfc_tensor_release(y), tfc_tensor_release(l);
        tfc_graph_release(gr);
    }
    /* maximum/minimum at a tie: dy split in half */
    double a[] = {1, 2, 3}, b[] = {1, 1, 4};
    for (int is_max = 0; is_max < 2; is_max++) {
        tfc_tensor *ta = from(a, 3), *tb = from(b, 3), *y = NULL, *l = NULL;
        tfc_graph *gr = NULL;
        CHECK_OK(tfc_graph_new(&gr));
        CHECK_OK(tfc_tensor_set_requires_grad(ta, 1));
        CHECK_OK(tfc_tensor_set_requires_grad(tb, 1));
        CHECK_OK(is_max ? tfc_maximum(gr, ta, tb, &y) : tfc_minimum(gr, ta, tb, &y));
        CHECK_OK(tfc_sum(gr, y, NULL, 0, 0, &l));
        CHECK_OK(tfc_graph_backward(gr, l, NULL));
        double *ga = grad_vals(ta), *gb = grad_vals(tb);
        CHECK(ga[0] == 0.5 && gb[0] == 0.5);
        CHECK(ga[1] == (is_max ? 1 : 0) && gb[1] == (is_max ? 0 : 1));
        CHECK(ga[2] == (is_max ? 0 : 1) && gb[2] == (is_max ? 1 : 0));
        free(ga), free(gb);
        tfc_tensor_release(ta), tfc_tensor_release(tb), tfc_tensor_release(y), tfc_tensor_release(l);
        tfc_graph_release(gr);
    }
}

TEST(nan_propagates_through_clamp_and_minmax) {
    double v[] = {NAN, 1.0};
    double w[] = {1.0, NAN};
    tfc_tensor *x = from(v, 2), *y = from(w, 2), *c = NULL, *mx = NULL, *mn = NULL;
    CHECK_OK(tfc_clamp(NULL, x, 0, 0.5, &c));
    CHECK_OK(tfc_maximum(NULL, x, y, &mx));
    CHECK_OK(tfc_minimum(NULL, x, y, &mn));
    double *cv = t_vals(c), *a = t_vals(mx), *b = t_vals(mn);
    CHECK(isnan(cv[0]) && cv[1] == 0.5);
    CHECK(isnan(a[0]) && isnan(a[1]) && isnan(b[0]) && isnan(b[1]));
    free(cv), free(a), free(b);
    tfc_tensor_release(x), tfc_tensor_release(y), tfc_tensor_release(c), tfc_tensor_release(mx), tfc_tensor_release(mn);
}

/* ---- comparisons, any/all ---------------------------------------------------- */

TEST(comparisons_broadcast_against_loops_any_dtype) {
    tfc_status (*fs[])(const tfc_tensor *, const tfc_tensor *, tfc_tensor **) = {tfc_lt, tfc_le, tfc_gt,
                                                                                 tfc_ge, tfc_eq, tfc_ne};
    tfc_status (*ss[])(const tfc_tensor *, double, tfc_tensor **) = {tfc_lt_scalar, tfc_le_scalar, tfc_gt_scalar,
                                                                     tfc_ge_scalar, tfc_eq_scalar, tfc_ne_scalar};
    double av[6] = {1, 2, 3, NAN, 2, -1}, bv[3] = {2, 2, NAN};
    int64_t da[2] = {2, 3};
    for (int k = 0; k < 6; k++) {
        tfc_tensor *a = t_from(av, da, 2), *b = from(bv, 3), *o = NULL, *os = NULL;
        CHECK_OK(fs[k](a, b, &o));
        CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_BOOL);
        CHECK_OK(ss[k](a, 2.0, &os));
        double *ov = t_vals(o), *sv = t_vals(os);
        for (int i = 0; i < 6; i++) {
            double x = av[i], y = bv[i % 3];
            int want[6] = {x<y, x <= y, x> y, x >= y, x == y, x != y};
            int want_s[6] = {x<2, x <= 2, x> 2, x >= 2, x == 2, x != 2};
            CHECK(ov[i] == want[k]);
            CHECK(sv[i] == want_s[k]);
        }
        free(ov), free(sv);
        tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(o), tfc_tensor_release(os);
    }
    /* i64 ids against a scalar and against an f32 tensor (mixed dtypes compare in f64) */
    double iv[4] = {0, 3, 7, 3};
    tfc_tensor *ids = from_dt(iv, 4, TFC_DTYPE_I64), *f = from_dt(iv, 4, TFC_DTYPE_F32), *o = NULL;
    CHECK_OK(tfc_eq_scalar(ids, 3, &o));
    double *ov = t_vals(o);
    CHECK(ov[0] == 0 && ov[1] == 1 && ov[2] == 0 && ov[3] == 1);
    free(ov);
    tfc_tensor_release(o);
    CHECK_OK(tfc_ge(ids, f, &o));
    ov = t_vals(o);
    CHECK(ov[0] == 1 && ov[1] == 1 && ov[2] == 1 && ov[3] == 1);
    free(ov);
    tfc_tensor_release(o);
    /* f32 against a scalar compares with the scalar rounded to f32 (torch): 0.1f == 0.1 */
    double tenth = 0.1;
    tfc_tensor *t32 = from_dt(&tenth, 1, TFC_DTYPE_F32);
    CHECK_OK(tfc_eq_scalar(t32, 0.1, &o));
    CHECK(t_item(o) == 1);
    tfc_tensor_release(o), tfc_tensor_release(t32), tfc_tensor_release(ids), tfc_tensor_release(f);
}

TEST(any_all_dims_keepdim_empty) {
    double v[6] = {0, 0, 1, 0, NAN, 2};
    int64_t d[2] = {2, 3};
    tfc_tensor *x = t_from(v, d, 2), *o = NULL;
    int32_t dim1 = 1, dim0 = 0;
    CHECK_OK(tfc_any(x, NULL, 0, 0, &o));
    CHECK(tfc_tensor_ndim(o) == 0 && tfc_tensor_dtype(o) == TFC_DTYPE_BOOL && t_item(o) == 1);
    tfc_tensor_release(o);
    CHECK_OK(tfc_all(x, NULL, 0, 0, &o));
    CHECK(t_item(o) == 0);
    tfc_tensor_release(o);
    CHECK_OK(tfc_any(x, &dim0, 1, 1, &o)); /* columns: {0,0}, {0,nan}, {1,2} */
    double *ov = t_vals(o);
    CHECK(tfc_tensor_ndim(o) == 2 && ov[0] == 0 && ov[1] == 1 && ov[2] == 1);
    free(ov);
    tfc_tensor_release(o);
    CHECK_OK(tfc_all(x, &dim1, 1, 0, &o)); /* rows: {0,0,1}, {0,nan,2} */
    ov = t_vals(o);
    CHECK(ov[0] == 0 && ov[1] == 0);
    free(ov);
    tfc_tensor_release(o);
    CHECK_OK(tfc_all(x, &dim0, 1, 0, &o)); /* columns all non-zero: only {1,2} */
    ov = t_vals(o);
    CHECK(ov[0] == 0 && ov[1] == 0 && ov[2] == 1);
    free(ov);
    tfc_tensor_release(o);
    int64_t zero = 0;
    tfc_tensor *e = NULL;
    CHECK_OK(tfc_tensor_zeros(&zero, 1, TFC_DTYPE_BOOL, &e));
    CHECK_OK(tfc_any(e, NULL, 0, 0, &o));
    CHECK(t_item(o) == 0);
    tfc_tensor_release(o);
    CHECK_OK(tfc_all(e, NULL, 0, 0, &o));
    CHECK(t_item(o) == 1);
    tfc_tensor_release(o), tfc_tensor_release(e), tfc_tensor_release(x);
}

/* ---- cumsum, triu/tril ---------------------------------------------------------- */

static tfc_status op_cumsum0(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    return tfc_cumsum(g, in[0], 0, out);
}
static tfc_status op_cumsum_last(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    return tfc_cumsum(g, in[0], -1, out);
}
static tfc_status op_triu(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) { return tfc_triu(g, in[0], 1, out); }
static tfc_status op_tril(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) { return tfc_tril(g, in[0], -1, out); }

TEST(cumsum_values_every_dim_against_loops) {
    tfc_tensor *x = rnd3(3, 4, 5, -1, 1, 51);
    double *xv = t_vals(x);
    int64_t sh[3] = {3, 4, 5};
    for (int32_t d = 0; d < 3; d++) {
        tfc_tensor *y = NULL;
        CHECK_OK(tfc_cumsum(NULL, x, d, &y));
        double *yv = t_vals(y);
        for (int64_t i = 0; i < 3; i++)
            for (int64_t j = 0; j < 4; j++)
                for (int64_t k = 0; k < 5; k++) {
                    int64_t idx[3] = {i, j, k};
                    double s = 0;
                    for (int64_t m = 0; m <= idx[d]; m++) {
                        int64_t at[3] = {i, j, k};
                        at[d] = m;
                        s += xv[(at[0] * sh[1] + at[1]) * sh[2] + at[2]];
                    }
                    CHECK_CLOSE(yv[(i * 4 + j) * 5 + k], s, 1e-14);
                }
        free(yv);
        tfc_tensor_release(y);
    }
    free(xv);
    tfc_tensor_release(x);
    /* f32, a long line: summed in double, so the last element matches the exact sum to f32 rounding */
    int64_t n = 100000;
    tfc_tensor *ones = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_full(&n, 1, TFC_DTYPE_F32, 0.1, &ones));
    CHECK_OK(tfc_cumsum(NULL, ones, 0, &y));
    double *yv = t_vals(y);
    CHECK_CLOSE(yv[n - 1], (double)n * (double)0.1f, 1e-7);
    free(yv);
    tfc_tensor_release(ones), tfc_tensor_release(y);
    /* 0-d */
    double one = 3;
    tfc_tensor *s = NULL, *o = NULL;
    CHECK_OK(tfc_tensor_from_data(&one, NULL, 0, TFC_DTYPE_F64, &s));
    CHECK_OK(tfc_cumsum(NULL, s, -1, &o));
    CHECK(tfc_tensor_ndim(o) == 0 && t_item(o) == 3);
    tfc_tensor_release(s), tfc_tensor_release(o);
}

TEST(triu_tril_values_against_loops) {
    tfc_tensor *x = rnd3(2, 3, 4, -1, 1, 61);
    double *xv = t_vals(x);
    int64_t diags[] = {-5, -1, 0, 1, 2, 7};
    for (int k = 0; k < 6; k++)
        for (int up = 0; up < 2; up++) {
            tfc_tensor *y = NULL;
            CHECK_OK(up ? tfc_triu(NULL, x, diags[k], &y) : tfc_tril(NULL, x, diags[k], &y));
            double *yv = t_vals(y);
            for (int b = 0; b < 2; b++)
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++) {
                        int at = (b * 3 + i) * 4 + j;
                        int keep = up ? j - i >= diags[k] : j - i <= diags[k];
                        CHECK(yv[at] == (keep ? xv[at] : 0));
                    }
            free(yv);
            tfc_tensor_release(y);
        }
    free(xv);
    tfc_tensor_release(x);
}

TEST(gradcheck_cumsum_triu_tril_strided) {
    tfc_tensor *a[1] = {rnd3(4, 3, 0, -1, 1, 71)};
    gradcheck_strided("cumsum dim 0", op_cumsum0, a, 1);
    tfc_tensor *b[1] = {rnd3(4, 3, 0, -1, 1, 72)};
    gradcheck_strided("cumsum dim -1", op_cumsum_last, b, 1);
    tfc_tensor *b3[1] = {rnd3(2, 3, 4, -1, 1, 75)};
    gradcheck_op("cumsum 3-d dim 0", op_cumsum0, b3, 1);
    tfc_tensor *c[1] = {rnd3(2, 3, 4, -1, 1, 73)};
    gradcheck_op("triu", op_triu, c, 1);
    tfc_tensor *d[1] = {rnd3(4, 3, 0, -1, 1, 74)};
    gradcheck_strided("tril", op_tril, d, 1);
}

/* ---- sort / argsort ----------------------------------------------------------- */

static tfc_status op_sort(tfc_graph *g, tfc_tensor *const *in, tfc_tensor **out) {
    tfc_tensor *idx = NULL;
    tfc_status s = tfc_sort(g, in[0], 0, 1, out, &idx);
    tfc_tensor_release(idx);
    return s;
}

TEST(sort_is_stable_nan_last_and_argsort_agrees) {
    double v[] = {3, NAN, 1, 3, -2, 1};
    int64_t want_asc[] = {4, 2, 5, 0, 3, 1}, want_desc[] = {1, 0, 3, 2, 5, 4};
    for (int desc = 0; desc < 2; desc++) {
        tfc_tensor *x = from(v, 6), *vals = NULL, *idx = NULL, *arg = NULL;
        CHECK_OK(tfc_sort(NULL, x, 0, desc, &vals, &idx));
        CHECK_OK(tfc_argsort(x, -1, desc, &arg));
        CHECK(tfc_tensor_dtype(idx) == TFC_DTYPE_I64 && tfc_tensor_dtype(arg) == TFC_DTYPE_I64);
        double *vv = t_vals(vals), *iv = t_vals(idx), *av = t_vals(arg);
        const int64_t *want = desc ? want_desc : want_asc;
        for (int i = 0; i < 6; i++) {
            CHECK(iv[i] == (double)want[i]);
            CHECK(av[i] == (double)want[i]);
            double wv = v[want[i]];
            CHECK(isnan(wv) ? isnan(vv[i]) : vv[i] == wv);
        }
        free(vv), free(iv), free(av);
        tfc_tensor_release(x), tfc_tensor_release(vals), tfc_tensor_release(idx), tfc_tensor_release(arg);
    }
    /* along dim 0 of a strided [4,3]: each column sorted, against insertion sort */
    tfc_tensor *x = strided(4, 3, -1, 1, 81), *vals = NULL, *idx = NULL;
    CHECK_OK(tfc_sort(NULL, x, 0, 0, &vals, &idx));
    double *xv = t_vals(x), *vv = t_vals(vals), *iv = t_vals(idx);
    for (int c = 0; c < 3; c++) {
        double col[4];
        for (int r = 0; r < 4; r++) col[r] = xv[r * 3 + c];
        for (int i = 1; i < 4; i++)
            for (int j = i; j > 0 && col[j - 1] > col[j]; j--) {
                double t = col[j];
                col[j] = col[j - 1];
                col[j - 1] = t;
            }
        for (int r = 0; r < 4; r++) {
            CHECK(vv[r * 3 + c] == col[r]);
            CHECK(xv[(int)iv[r * 3 + c] * 3 + c] == col[r]);
        }
    }
    free(xv), free(vv), free(iv);
    tfc_tensor_release(x), tfc_tensor_release(vals), tfc_tensor_release(idx);
    tfc_tensor *g[1] = {rnd3(5, 3, 0, -1, 1, 82)};
    gradcheck_strided("sort", op_sort, g, 1);
}

/* ---- one_hot --------------------------------------------------------------------- */

TEST(one_hot_values_and_max_plus_one) {
    double v[] = {0, 2, 1, 2};
    int64_t d[2] = {2, 2};
    tfc_tensor *f = t_from(v, d, 2), *ids = NULL, *o = NULL;
    CHECK_OK(tfc_cast(NULL, f, TFC_DTYPE_I64, &ids));
    for (int k = 0; k < 2; k++) {
        int64_t C = k ? -1 : 4, want_c = k ? 3 : 4;
        CHECK_OK(tfc_one_hot(ids, C, &o));
        int64_t sh[3];
        CHECK(tfc_tensor_ndim(o) == 3 && tfc_tensor_dtype(o) == TFC_DTYPE_I64);
        CHECK_OK(tfc_tensor_shape(o, sh, 3));
        CHECK(sh[0] == 2 && sh[1] == 2 && sh[2] == want_c);
        double *ov = t_vals(o);
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < want_c; c++) CHECK(ov[i * want_c + c] == (c == (int)v[i]));
        free(ov);
        tfc_tensor_release(o);
    }
    CHECK_ERR(tfc_one_hot(ids, 2, &o), TFC_ERR_INVALID_ARG, "tfc_one_hot: ids [2,2] holds 2 at element 1");
    CHECK_ERR(tfc_one_hot(ids, -2, &o), TFC_ERR_INVALID_ARG, "num_classes is -2");
    CHECK_ERR(tfc_one_hot(f, 4, &o), TFC_ERR_DTYPE, "tfc_one_hot: ids is f64");
    double neg = -1;
    tfc_tensor *nf = from(&neg, 1), *ni = NULL;
    CHECK_OK(tfc_cast(NULL, nf, TFC_DTYPE_I32, &ni));
    CHECK_ERR(tfc_one_hot(ni, 4, &o), TFC_ERR_INVALID_ARG, "ids must be >= 0");
    tfc_tensor_release(nf), tfc_tensor_release(ni), tfc_tensor_release(f), tfc_tensor_release(ids);
}

/* ---- multinomial --------------------------------------------------------------------- */

/* Pearson's chi-square of counts against expected counts n·p over the categories with p > 0. */
static double chi2(const int64_t *count, const double *p, int k, double n) {
    double s = 0;
    for (int i = 0; i < k; i++)
        if (p[i] > 0) s += (count[i] - n * p[i]) * (count[i] - n * p[i]) / (n * p[i]);
    return s;
}

TEST(multinomial_with_replacement_chi_square) {
    double w[] = {1, 2, 0, 3, 4}; /* unnormalised; category 2 must never come */
    double p[] = {0.1, 0.2, 0, 0.3, 0.4};
    int64_t n = 40000;
    for (int dt = 0; dt < 2; dt++) {
        tfc_tensor *probs = from_dt(w, 5, dt ? TFC_DTYPE_F32 : TFC_DTYPE_F64), *o = NULL;
        CHECK_OK(tfc_multinomial(probs, n, 1, 1234, 0, &o));
        CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && tfc_tensor_numel(o) == n);
        double *ov = t_vals(o);
        int64_t count[5] = {0};
        for (int64_t i = 0; i < n; i++) count[(int)ov[i]]++;
        CHECK(count[2] == 0);
        double c = chi2(count, p, 5, (double)n);
        /* 3 degrees of freedom: P(chi2 > 21.1) = 1e-4 */
        if (!(c < 21.1))
            TFC_FAIL_AT("chi-square %g (counts %lld %lld %lld %lld)", c, (long long)count[0], (long long)count[1],
                        (long long)count[3], (long long)count[4]);
        tfc_test_checks++;
        /* same (seed, offset): the same draws; another offset: other draws */
        tfc_tensor *o2 = NULL, *o3 = NULL;
        CHECK_OK(tfc_multinomial(probs, n, 1, 1234, 0, &o2));
        CHECK_OK(tfc_multinomial(probs, n, 1, 1234, (uint64_t)n, &o3));
        double *v2 = t_vals(o2), *v3 = t_vals(o3);
        int same = 1, diff = 0;
        for (int64_t i = 0; i < n; i++) same &= v2[i] == ov[i], diff += v3[i] != ov[i];
        CHECK(same);
        CHECK(diff > n / 4);
        free(ov), free(v2), free(v3);
        tfc_tensor_release(o), tfc_tensor_release(o2), tfc_tensor_release(o3), tfc_tensor_release(probs);
    }
}

TEST(multinomial_without_replacement_chi_square_first_and_second_draw) {
    double w[] = {1, 2, 3, 4};
    int64_t rows = 20000, d[2] = {rows, 4};
    double *rep = malloc(sizeof(double) * (size_t)(rows * 4));
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < 4; j++) rep[r * 4 + j] = w[j];
    tfc_tensor *probs = t_from(rep, d, 2), *o = NULL;
    free(rep);
    CHECK_OK(tfc_multinomial(probs, 2, 0, 99, 0, &o));
    double *ov = t_vals(o);
    int64_t first[4] = {0}, second[4] = {0}, repeats = 0;
    for (int64_t r = 0; r < rows; r++) {
        first[(int)ov[2 * r]]++;
        second[(int)ov[2 * r + 1]]++;
        repeats += ov[2 * r] == ov[2 * r + 1];
    }
    CHECK(repeats == 0);
    /* P(first = i) = w_i / 10; P(second = j) = Σ_{i≠j} (w_i/10) · w_j / (10 − w_i) */
    double p1[4], p2[4];
    for (int j = 0; j < 4; j++) {
        p1[j] = w[j] / 10;
        p2[j] = 0;
        for (int i = 0; i < 4; i++)
            if (i != j) p2[j] += w[i] / 10 * w[j] / (10 - w[i]);
    }
    double c1 = chi2(first, p1, 4, (double)rows), c2 = chi2(second, p2, 4, (double)rows);
    if (!(c1 < 21.1 && c2 < 21.1)) TFC_FAIL_AT("chi-square first %g second %g", c1, c2);
    tfc_test_checks++;
    /* all four without replacement from a row with one zero weight is refused; three is a permutation */
    double wz[] = {1, 0, 2, 5};
    tfc_tensor *pz = from(wz, 4), *oz = NULL;
    CHECK_ERR(tfc_multinomial(pz, 4, 0, 1, 0, &oz), TFC_ERR_INVALID_ARG, "fewer than num_samples 4");
    CHECK_OK(tfc_multinomial(pz, 3, 0, 1, 0, &oz));
    double *zv = t_vals(oz);
    CHECK(zv[0] != 1 && zv[1] != 1 && zv[2] != 1 && zv[0] != zv[1] && zv[1] != zv[2] && zv[0] != zv[2]);
    free(zv), free(ov);
    tfc_tensor_release(oz), tfc_tensor_release(pz), tfc_tensor_release(o), tfc_tensor_release(probs);
}

/* ---- bad input ----------------------------------------------------------------------- */

TEST(bad_inputs_name_the_function_and_argument) {
    tfc_tensor *x = rnd3(2, 3, 0, -1, 1, 91), *v = rnd3(3, 0, 0, -1, 1, 92), *o = NULL, *o2 = NULL;
    tfc_tensor *ids = NULL, *x32 = NULL, *bad = rnd3(4, 0, 0, -1, 1, 93);
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_I64, &ids));
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_F32, &x32));
    CHECK_ERR(tfc_abs(NULL, ids, &o), TFC_ERR_DTYPE, "tfc_abs: x is i64 [2,3]");
    CHECK_ERR(tfc_round(NULL, NULL, &o), TFC_ERR_INVALID_ARG, "tfc_round: x is NULL");
    CHECK_ERR(tfc_clamp(NULL, x, NAN, 1, &o), TFC_ERR_INVALID_ARG, "tfc_clamp: min nan");
    CHECK_ERR(tfc_maximum(NULL, x, x32, &o), TFC_ERR_DTYPE, "tfc_maximum: a is f64 [2,3], b is f32 [2,3]");
    CHECK_ERR(tfc_minimum(NULL, x, bad, &o), TFC_ERR_SHAPE, "tfc_minimum");
    CHECK_ERR(tfc_lt(x, bad, &o), TFC_ERR_SHAPE, "tfc_lt");
    CHECK_ERR(tfc_eq(x, NULL, &o), TFC_ERR_INVALID_ARG, "tfc_eq: b is NULL");
    CHECK_ERR(tfc_any(x, (int32_t[]){2}, 1, 0, &o), TFC_ERR_INVALID_ARG, "tfc_any: dim 2 is out of range");
    CHECK_ERR(tfc_cumsum(NULL, x, 2, &o), TFC_ERR_INVALID_ARG, "tfc_cumsum: dim 2 is out of range");
    CHECK_ERR(tfc_cumsum(NULL, ids, 0, &o), TFC_ERR_DTYPE, "tfc_cumsum: x is i64");
    CHECK_ERR(tfc_triu(NULL, v, 0, &o), TFC_ERR_SHAPE, "tfc_triu: x is [3]");
    CHECK_ERR(tfc_sort(NULL, x, -3, 0, &o, &o2), TFC_ERR_INVALID_ARG, "tfc_sort: dim -3 is out of range");
    CHECK_ERR(tfc_argsort(x, 5, 0, &o), TFC_ERR_INVALID_ARG, "tfc_argsort: dim 5 is out of range");
    CHECK_ERR(tfc_argsort(ids, 0, 0, &o), TFC_ERR_DTYPE, "tfc_argsort: x is i64");
    double neg[] = {0.5, -0.1, 1}, nan_[] = {0.5, NAN}, zero[] = {0, 0};
    tfc_tensor *pn = from(neg, 3), *pnan = from(nan_, 2), *pz = from(zero, 2);
    CHECK_ERR(tfc_multinomial(pn, 1, 1, 0, 0, &o), TFC_ERR_INVALID_ARG,
              "tfc_multinomial: probs row 0 holds -0.1 at column 1");
    CHECK_ERR(tfc_multinomial(pnan, 1, 1, 0, 0, &o), TFC_ERR_INVALID_ARG, "holds nan");
    CHECK_ERR(tfc_multinomial(pz, 1, 1, 0, 0, &o), TFC_ERR_INVALID_ARG, "sums to 0");
    CHECK_ERR(tfc_multinomial(pn, 0, 1, 0, 0, &o), TFC_ERR_INVALID_ARG, "num_samples is 0");
    CHECK_ERR(tfc_multinomial(pz, 3, 0, 0, 0, &o), TFC_ERR_INVALID_ARG, "cannot sample that many");
    CHECK_ERR(tfc_multinomial(ids, 1, 1, 0, 0, &o), TFC_ERR_DTYPE, "tfc_multinomial: probs is i64");
    CHECK(o == NULL && o2 == NULL);
    tfc_tensor_release(pn), tfc_tensor_release(pnan), tfc_tensor_release(pz);
    tfc_tensor_release(x), tfc_tensor_release(v), tfc_tensor_release(ids), tfc_tensor_release(x32),
        tfc_tensor_release(bad);
}

/* ---- integer and bool reductions (as PyTorch 1.13) ---------------------------------- */

TEST(integer_reductions_follow_torch) {
    /* i64 [2,3] = {{3, 1, 3}, {-2, 7, 7}}, read through a transposed view too */
    int64_t v[6] = {3, 1, 3, -2, 7, 7}, d[2] = {2, 3};
    tfc_tensor *x = NULL, *o = NULL, *xt = NULL;
    CHECK_OK(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_I64, &x));
    int32_t dim1 = 1, dim0 = 0;
    CHECK_OK(tfc_sum(NULL, x, NULL, 0, 0, &o));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && t_item(o) == 19);
    tfc_tensor_release(o);
    CHECK_OK(tfc_sum(NULL, x, &dim1, 1, 1, &o));
    int64_t got[3];
    CHECK_OK(tfc_tensor_copy_to_host(o, got, sizeof(int64_t) * 2));
    CHECK(tfc_tensor_ndim(o) == 2 && got[0] == 7 && got[1] == 12);
    tfc_tensor_release(o);
    CHECK_OK(tfc_transpose(NULL, x, 0, 1, &xt)); /* [3,2]: max over dim 1 = per column of x */
    CHECK_OK(tfc_max(NULL, xt, &dim1, 1, 0, &o));
    CHECK_OK(tfc_tensor_copy_to_host(o, got, sizeof got));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && got[0] == 3 && got[1] == 7 && got[2] == 7);
    tfc_tensor_release(o);
    CHECK_OK(tfc_min(NULL, x, NULL, 0, 0, &o));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && t_item(o) == -2);
    tfc_tensor_release(o);
    CHECK_OK(tfc_argmax(x, dim1, 0, &o)); /* first maximum: row 1 has 7 at 1 and 2 */
    CHECK_OK(tfc_tensor_copy_to_host(o, got, sizeof(int64_t) * 2));
    CHECK(got[0] == 0 && got[1] == 1);
    tfc_tensor_release(o);
    CHECK_OK(tfc_argmin(xt, dim0, 0, &o));
    CHECK_OK(tfc_tensor_copy_to_host(o, got, sizeof(int64_t) * 2));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && got[0] == 1 && got[1] == 0);
    tfc_tensor_release(o);
    CHECK_ERR(tfc_mean(NULL, x, NULL, 0, 0, &o), TFC_ERR_DTYPE, "tfc_mean: x is i64 [2,3]");
    CHECK_ERR(tfc_var(NULL, x, NULL, 0, 1, 0, &o), TFC_ERR_DTYPE, "tfc_var: x is i64");
    /* exact past 2^53, where an f64 sum would round */
    int64_t big[3] = {(int64_t)1 << 60, 1, 1}, three = 3;
    tfc_tensor *b = NULL;
    CHECK_OK(tfc_tensor_from_data(big, &three, 1, TFC_DTYPE_I64, &b));
    CHECK_OK(tfc_sum(NULL, b, NULL, 0, 0, &o));
    CHECK_OK(tfc_tensor_copy_to_host(o, got, sizeof(int64_t)));
    CHECK(got[0] == ((int64_t)1 << 60) + 2);
    tfc_tensor_release(o), tfc_tensor_release(b);
    /* bool: sum counts (i64), max keeps bool, argmax refuses as torch does */
    tfc_tensor *m = NULL;
    CHECK_OK(tfc_le_scalar(x, 3.0, &m));
    CHECK_OK(tfc_sum(NULL, m, NULL, 0, 0, &o));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && t_item(o) == 4);
    tfc_tensor_release(o);
    CHECK_OK(tfc_max(NULL, m, &dim1, 1, 0, &o));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_BOOL);
    tfc_tensor_release(o);
    CHECK_ERR(tfc_argmax(m, 0, 0, &o), TFC_ERR_DTYPE, "tfc_argmax: x is bool");
    /* u8 and i32 sums widen to i64 */
    uint8_t u[4] = {200, 200, 200, 7};
    int64_t four = 4;
    tfc_tensor *xu = NULL;
    CHECK_OK(tfc_tensor_from_data(u, &four, 1, TFC_DTYPE_U8, &xu));
    CHECK_OK(tfc_sum(NULL, xu, NULL, 0, 0, &o));
    CHECK(tfc_tensor_dtype(o) == TFC_DTYPE_I64 && t_item(o) == 607);
    tfc_tensor_release(o);
    tfc_tensor_release(xu), tfc_tensor_release(m), tfc_tensor_release(xt), tfc_tensor_release(x);
}
