/*
 * RMSNorm (tfc_rmsnorm_forward / tfc_rmsnorm_backward in kernels.h, the
 * graph op tfc_rmsnorm in ops.h) on the CPU:
 *  - a small case computed by hand (forward, dx, dweight);
 *  - the forward against a naive f64 loop written here, with and without
 *    weight, on a strided input, in f64 and f32 (portable and AVX2 paths);
 *  - the backward against centred finite differences of the f64 forward,
 *    TFC_GRAD_ACCUMULATE, NULL outputs, many row chunks, thread-count
 *    independence;
 *  - the graph door: the same bits as the explicit door, tfc_gradcheck
 *    through the graph, and a double backward against finite differences of
 *    the gradient;
 *  - the stand-in backend: the op follows the table; a missing entry is
 *    TFC_ERR_UNSUPPORTED naming it;
 *  - every bad argument, with its message, at both doors.
 */
#include "tfc_test.h"

#include "standin_backend.h"

#include "cpu/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/tensor_impl.h"

TFC_TEST_MAIN

/* ---- helpers ----------------------------------------------------------------- */

static uint64_t rng_state;
static void seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
/* Uniform in [lo, hi). */
static double urand(double lo, double hi) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}
static double *rand_vec(int64_t n, double lo, double hi) {
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = urand(lo, hi);
    return v;
}

/* New contiguous tensor of dtype dt (f32 or f64) holding vals (NULL: zeros). */
static tfc_tensor *mk(tfc_dtype dt, const int64_t *dims, int nd, const double *vals) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_zeros(dims, nd, dt, &t) != TFC_OK) return NULL;
    int64_t n = tfc_tensor_numel(t);
    for (int64_t i = 0; vals && i < n; i++) {
        if (dt == TFC_DTYPE_F32)
            ((float *)tfc_tensor_data(t))[i] = (float)vals[i];
        else
            ((double *)tfc_tensor_data(t))[i] = vals[i];
    }
    return t;
}
/* A contiguous f32/f64 tensor's values as doubles, malloc'd. */
static double *rd(const tfc_tensor *t) {
    int64_t n = tfc_tensor_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = tfc_tensor_dtype(t) == TFC_DTYPE_F32 ? ((const float *)tfc_tensor_data(t))[i]
                                                    : ((const double *)tfc_tensor_data(t))[i];
    return v;
}
static void rel(tfc_tensor *a, tfc_tensor *b, tfc_tensor *c, tfc_tensor *d, tfc_tensor *e, tfc_tensor *f) {
    tfc_tensor *t[6] = {a, b, c, d, e, f};
    for (int i = 0; i < 6; i++) tfc_tensor_release(t[i]);
}

/* Largest |a − b| / (atol + rtol·|b|) over n values; <= 1 means close. */
static double worst(const double *a, const double *b, int64_t n, double atol, double rtol) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(e <= w)) w = e; /* NaN counts as worst */
    }
    return w;
}
#define CHECK_ALLCLOSE(a, b, n, atol, rtol)                                         \
    do {                                                                            \
        double w_ = worst((a), (b), (n), (atol), (rtol));                           \
        tfc_test_checks++;                                                          \
        if (!(w_ <= 1)) TFC_FAIL_AT("%s vs %s: off by %g x tolerance", #a, #b, w_); \
    } while (0)

/* Run body for the portable f32 kernels and again for the AVX2 ones. */
#define FOR_BOTH_F32_PATHS(...)               \
    for (int path_ = 0; path_ < 2; path_++) { \
        tfc_cpu_avx2_disabled = path_ == 0;   \
        __VA_ARGS__                           \
    }                                         \
    tfc_cpu_avx2_disabled = 0

/* The published formula, naively in f64: y = x / sqrt(mean(x²) + eps) · w (w NULL: 1). */
static void ref_rmsnorm(const double *x, const double *w, double eps, int64_t n, int64_t c, double *y, double *rstd) {
    for (int64_t r = 0; r < n; r++) {
        double ms = 0;
        for (int64_t j = 0; j < c; j++) ms += x[r * c + j] * x[r * c + j];
        double rs = 1 / sqrt(ms / c + eps);
        for (int64_t j = 0; j < c; j++) y[r * c + j] = x[r * c + j] * rs * (w ? w[j] : 1);
        rstd[r] = rs;
    }
}

/* ---- a case by hand -------------------------------------------------------------- */

/*
 * x = [[3, 4], [1, 0], [-4, 3]], w = [2, -1], eps = 3.5, so mean(x²) + eps
 * is 16, 4, 16 and rstd = 1/4, 1/2, 1/4; y = x · rstd · w.
 * With dy = 1: L = Σ y, ∂L/∂x_j = w_j·rstd − (Σ_k w_k x_k)·rstd³·x_j / C
 * (C = 2), Σ_k w_k x_k = 2, 2, −11 per row:
 *   row 0: 2/4 − 2·3/128 = 0.453125,   −1/4 − 2·4/128 = −0.3125
 *   row 1: 2/2 − 2·1/16  = 0.875,      −1/2 − 0        = −0.5
 *   row 2: 2/4 − 11·4/128 = 0.15625,   −1/4 + 11·3/128 = 0.0078125
 * dw = Σ_rows x · rstd = [3/4 + 1/2 − 1, 1 + 0 + 3/4] = [0.25, 1.75].
 * All of these are exact in binary floating point.
 */
TEST(small_case_by_hand) {
    const double xv[6] = {3, 4, 1, 0, -4, 3}, wv[2] = {2, -1}, ones[6] = {1, 1, 1, 1, 1, 1};
    const double y_want[6] = {1.5, -1, 1, 0, -2, -0.75}, rstd_want[3] = {0.25, 0.5, 0.25};
    const double dx_want[6] = {0.453125, -0.3125, 0.875, -0.5, 0.15625, 0.0078125}, dw_want[2] = {0.25, 1.75};
    int64_t d[2] = {3, 2}, c = 2, n = 3;
    for (int t = 0; t < 2; t++) {
        tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
        tfc_tensor *x = mk(dt, d, 2, xv), *w = mk(dt, &c, 1, wv), *y = mk(dt, d, 2, NULL), *rs = mk(dt, &n, 1, NULL);
        tfc_tensor *dy = mk(dt, d, 2, ones), *dx = mk(dt, d, 2, NULL), *dw = mk(dt, &c, 1, NULL);
        CHECK_OK(tfc_rmsnorm_forward(x, w, 3.5, y, rs));
        CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, dx, dw, 0));
        double *gy = rd(y), *gr = rd(rs), *gx = rd(dx), *gw = rd(dw);
        for (int i = 0; i < 6; i++) CHECK(gy[i] == y_want[i]);
        for (int i = 0; i < 3; i++) CHECK(gr[i] == rstd_want[i]);
        for (int i = 0; i < 6; i++) CHECK_CLOSE(gx[i], dx_want[i], t ? 1e-6 : 1e-15);
        for (int i = 0; i < 2; i++) CHECK_CLOSE(gw[i], dw_want[i], t ? 1e-6 : 1e-15);
        free(gy), free(gr), free(gx), free(gw);
        rel(x, w, y, rs, dy, dx);
        tfc_tensor_release(dw);
    }
}

/* ---- forward ------------------------------------------------------------------------ */

TEST(forward_matches_reference) {
    int64_t dims[3] = {3, 5, 37}, n = 15, c = 37;
    seed(1);
    double *x = rand_vec(n * c, -2, 3), *w = rand_vec(c, -1.5, 1.5);
    double *ry = malloc(sizeof(double) * n * c), rr[15];
    for (int weighted = 0; weighted < 2; weighted++) {
        ref_rmsnorm(x, weighted ? w : NULL, 1e-6, n, c, ry, rr);
        for (int t = 0; t < 2; t++) {
            tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
            double tol = t ? 2e-6 : 1e-14;
            FOR_BOTH_F32_PATHS({
                tfc_tensor *tx = mk(dt, dims, 3, x), *tw = weighted ? mk(dt, &c, 1, w) : NULL;
                tfc_tensor *ty = mk(dt, dims, 3, NULL), *tr = mk(dt, &n, 1, NULL);
                CHECK_OK(tfc_rmsnorm_forward(tx, tw, 1e-6, ty, tr));
                double *gy = rd(ty), *gr = rd(tr);
                CHECK_ALLCLOSE(gy, ry, n * c, tol, tol);
                CHECK_ALLCLOSE(gr, rr, n, tol, tol);
                /* rstd is optional */
                CHECK_OK(tfc_tensor_fill(ty, 0));
                CHECK_OK(tfc_rmsnorm_forward(tx, tw, 1e-6, ty, NULL));
                free(gy);
                gy = rd(ty);
                CHECK_ALLCLOSE(gy, ry, n * c, tol, tol);
                free(gy), free(gr);
                rel(tx, tw, ty, tr, NULL, NULL);
            });
        }
    }
    free(x), free(w), free(ry);
}

TEST(forward_strided_input_and_a_large_eps) {
    /* x viewed transposed: a [9, 40] buffer read as [40, 9]; eps large enough to matter. */
    seed(3);
    int64_t n = 40, c = 9, dims[2] = {40, 9}, strides[2] = {1, 40};
    double *buf = rand_vec(n * c, -1, 1), *xc = malloc(sizeof(double) * n * c), *ry = malloc(sizeof(double) * n * c);
    double rr[40];
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < c; j++) xc[r * c + j] = buf[j * n + r];
    ref_rmsnorm(xc, NULL, 0.5, n, c, ry, rr);
    tfc_tensor *xs = NULL, *y = mk(TFC_DTYPE_F64, dims, 2, NULL);
    CHECK_OK(tfc_tensor_wrap(buf, dims, strides, 2, TFC_DTYPE_F64, NULL, NULL, &xs));
    CHECK_OK(tfc_rmsnorm_forward(xs, NULL, 0.5, y, NULL));
    double *gy = rd(y);
    CHECK_ALLCLOSE(gy, ry, n * c, 1e-14, 1e-14);
    free(gy), free(buf), free(xc), free(ry);
    rel(xs, y, NULL, NULL, NULL, NULL);
}

/* ---- backward ----------------------------------------------------------------------- */

/*
 * Centred finite differences: for every element of param, the derivative of
 * L = Σ R ⊙ f(param) with f evaluated by eval (f64 forward), compared with
 * analytic[i] by |a − n| / (|a| + |n| + 1e-8).
 */
typedef void (*eval_fn)(void *ctx, double *out);
static double gradcheck(eval_fn eval, void *ctx, double *param, int64_t nparam, const double *analytic, const double *R,
                        int64_t nout) {
    const double h = 1e-6;
    double *yp = malloc((size_t)nout * sizeof *yp), *ym = malloc((size_t)nout * sizeof *ym);
    double w = 0;
    for (int64_t i = 0; i < nparam; i++) {
        double save = param[i];
        param[i] = save + h;
        eval(ctx, yp);
        param[i] = save - h;
        eval(ctx, ym);
        param[i] = save;
        double num = 0;
        for (int64_t j = 0; j < nout; j++) num += R[j] * (yp[j] - ym[j]);
        num /= 2 * h;
        double e = fabs(analytic[i] - num) / (fabs(analytic[i]) + fabs(num) + 1e-8);
        if (!(e <= w)) w = e;
    }
    free(yp);
    free(ym);
    return w;
}
#define CHECK_GRAD(what, w)                                                                 \
    do {                                                                                    \
        tfc_test_checks++;                                                                  \
        if (getenv("TFC_TEST_VERBOSE")) printf("gradcheck %s: %g\n", what, (w));            \
        if (!((w) < 1e-6)) TFC_FAIL_AT("gradcheck %s: worst relative error %g", what, (w)); \
    } while (0)

struct rms_ctx {
    int64_t n, c;
    double *x, *w; /* w NULL: no weight */
    double eps;
};
/* The f64 forward through the explicit door. */
static void rms_eval(void *p, double *out) {
    struct rms_ctx *k = p;
    int64_t dims[2] = {k->n, k->c};
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, k->x), *w = k->w ? mk(TFC_DTYPE_F64, &k->c, 1, k->w) : NULL;
    tfc_tensor *y = mk(TFC_DTYPE_F64, dims, 2, NULL);
    if (tfc_rmsnorm_forward(x, w, k->eps, y, NULL) != TFC_OK) abort();
    memcpy(out, tfc_tensor_data(y), sizeof(double) * k->n * k->c);
    rel(x, w, y, NULL, NULL, NULL);
}

TEST(backward_finite_differences_accumulate_and_null_outputs) {
    struct rms_ctx k = {4, 9, NULL, NULL, 1e-3};
    int64_t dims[2] = {4, 9}, nc = 36;
    seed(2);
    k.x = rand_vec(nc, -2, 2), k.w = rand_vec(9, -2, 2);
    double *R = rand_vec(nc, -1, 1);
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, k.x), *w = mk(TFC_DTYPE_F64, &k.c, 1, k.w);
    tfc_tensor *y = mk(TFC_DTYPE_F64, dims, 2, NULL), *rs = mk(TFC_DTYPE_F64, &k.n, 1, NULL);
    CHECK_OK(tfc_rmsnorm_forward(x, w, k.eps, y, rs));
    tfc_tensor *dy = mk(TFC_DTYPE_F64, dims, 2, R), *dx = mk(TFC_DTYPE_F64, dims, 2, NULL);
    tfc_tensor *dw = mk(TFC_DTYPE_F64, &k.c, 1, NULL);
    CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, dx, dw, 0));
    double *gx = rd(dx), *gw = rd(dw);
    CHECK_GRAD("rmsnorm dx", gradcheck(rms_eval, &k, k.x, nc, gx, R, nc));
    CHECK_GRAD("rmsnorm dweight", gradcheck(rms_eval, &k, k.w, 9, gw, R, nc));

    /* Without weight. */
    double *wsave = k.w;
    k.w = NULL;
    tfc_tensor *dx0 = mk(TFC_DTYPE_F64, dims, 2, NULL);
    CHECK_OK(tfc_rmsnorm_forward(x, NULL, k.eps, y, rs));
    CHECK_OK(tfc_rmsnorm_backward(dy, x, NULL, rs, dx0, NULL, 0));
    double *g0 = rd(dx0);
    CHECK_GRAD("rmsnorm dx without weight", gradcheck(rms_eval, &k, k.x, nc, g0, R, nc));
    k.w = wsave;
    CHECK_OK(tfc_rmsnorm_forward(x, w, k.eps, y, rs));

    /* TFC_GRAD_ACCUMULATE adds onto what is there. */
    CHECK_OK(tfc_tensor_fill(dx, 0.25));
    CHECK_OK(tfc_tensor_fill(dw, -1.5));
    CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, dx, dw, TFC_GRAD_ACCUMULATE));
    double *ax = rd(dx), *aw = rd(dw);
    for (int64_t i = 0; i < nc; i++) CHECK_CLOSE(ax[i], gx[i] + 0.25, 1e-14);
    for (int64_t i = 0; i < 9; i++) CHECK_CLOSE(aw[i], gw[i] - 1.5, 1e-14);
    /* Only dweight asked for: dx is left alone; and only dx. */
    CHECK_OK(tfc_tensor_fill(dx, 7));
    CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, NULL, dw, 0));
    double *ox = rd(dx), *ow = rd(dw);
    for (int64_t i = 0; i < nc; i++) CHECK(ox[i] == 7);
    for (int64_t i = 0; i < 9; i++) CHECK_CLOSE(ow[i], gw[i], 1e-14);
    CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, dx, NULL, 0));
    free(ox);
    ox = rd(dx);
    for (int64_t i = 0; i < nc; i++) CHECK_CLOSE(ox[i], gx[i], 1e-14);

    /* f32 backward (both paths) agrees with f64. */
    FOR_BOTH_F32_PATHS({
        tfc_tensor *x32 = mk(TFC_DTYPE_F32, dims, 2, k.x), *w32 = mk(TFC_DTYPE_F32, &k.c, 1, k.w);
        tfc_tensor *y32 = mk(TFC_DTYPE_F32, dims, 2, NULL), *r32 = mk(TFC_DTYPE_F32, &k.n, 1, NULL);
        tfc_tensor *dy32 = mk(TFC_DTYPE_F32, dims, 2, R), *dx32 = mk(TFC_DTYPE_F32, dims, 2, NULL);
        tfc_tensor *dw32 = mk(TFC_DTYPE_F32, &k.c, 1, NULL);
        CHECK_OK(tfc_rmsnorm_forward(x32, w32, k.eps, y32, r32));
        CHECK_OK(tfc_rmsnorm_backward(dy32, x32, w32, r32, dx32, dw32, 0));
        double *fx = rd(dx32), *fw = rd(dw32);
        CHECK_ALLCLOSE(fx, gx, nc, 1e-5, 1e-4);
        CHECK_ALLCLOSE(fw, gw, 9, 1e-5, 1e-4);
        free(fx), free(fw);
        rel(x32, w32, y32, r32, dy32, dx32);
        tfc_tensor_release(dw32);
    });
    free(gx), free(gw), free(g0), free(ax), free(aw), free(ox), free(ow);
    free(k.x), free(k.w), free(R);
    rel(x, w, y, rs, dy, dx);
    rel(dw, dx0, NULL, NULL, NULL, NULL);
}

TEST(backward_many_row_chunks_matches_naive_and_thread_count) {
    /* n spans several of the one-pass backward's 64-row partial sums (the
     * last one ragged); dx and dw against the formulas evaluated naively
     * here in f64, and the same bits with 1 and 2 threads. */
    seed(4);
    int64_t n = 150, c = 37, dims[2] = {150, 37}, nc = 150 * 37;
    double *xv = rand_vec(nc, -2, 2), *wv = rand_vec(c, 0.5, 2), *R = rand_vec(nc, -1, 1);
    double *rx = calloc((size_t)nc, sizeof(double)), *rw = calloc((size_t)c, sizeof(double));
    for (int64_t r = 0; r < n; r++) {
        const double *xr = xv + r * c, *dyr = R + r * c;
        double ms = 0, mgx = 0;
        for (int64_t j = 0; j < c; j++) ms += xr[j] * xr[j] / c;
        double rstd = 1 / sqrt(ms + 1e-5);
        for (int64_t j = 0; j < c; j++) {
            mgx += dyr[j] * wv[j] * xr[j] * rstd / c;
            rw[j] += dyr[j] * xr[j] * rstd;
        }
        for (int64_t j = 0; j < c; j++) rx[r * c + j] = rstd * (dyr[j] * wv[j] - xr[j] * rstd * mgx);
    }
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, xv), *w = mk(TFC_DTYPE_F64, &c, 1, wv);
    tfc_tensor *y = mk(TFC_DTYPE_F64, dims, 2, NULL), *rs = mk(TFC_DTYPE_F64, &n, 1, NULL);
    tfc_tensor *dy = mk(TFC_DTYPE_F64, dims, 2, R);
    CHECK_OK(tfc_rmsnorm_forward(x, w, 1e-5, y, rs));
    double *got[2][3];
    int32_t nt = tfc_get_num_threads();
    for (int t = 0; t < 2; t++) {
        tfc_tensor *dx = mk(TFC_DTYPE_F64, dims, 2, NULL), *dw = mk(TFC_DTYPE_F64, &c, 1, NULL);
        tfc_tensor *dw_only = mk(TFC_DTYPE_F64, &c, 1, NULL);
        CHECK_OK(tfc_set_num_threads(t + 1));
        CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, dx, dw, 0));
        CHECK_OK(tfc_rmsnorm_backward(dy, x, w, rs, NULL, dw_only, 0)); /* the two-pass column sums */
        got[t][0] = rd(dx), got[t][1] = rd(dw), got[t][2] = rd(dw_only);
        rel(dx, dw, dw_only, NULL, NULL, NULL);
    }
    CHECK_OK(tfc_set_num_threads(nt));
    CHECK_ALLCLOSE(got[0][0], rx, nc, 1e-12, 1e-12);
    CHECK_ALLCLOSE(got[0][1], rw, c, 1e-12, 1e-12);
    CHECK_ALLCLOSE(got[0][2], rw, c, 1e-12, 1e-12);
    for (int k = 0; k < 3; k++) CHECK(memcmp(got[0][k], got[1][k], sizeof(double) * (size_t)(k ? c : nc)) == 0);
    for (int t = 0; t < 2; t++) free(got[t][0]), free(got[t][1]), free(got[t][2]);
    free(xv), free(wv), free(R), free(rx), free(rw);
    rel(x, w, y, rs, dy, NULL);
}

/* ---- the graph door ----------------------------------------------------------------- */

/*
 * Σ y ⊙ R for the fixed weights R (ctx, y's shape): a generic weighting (Σ y
 * alone or Σ y² without weight are nearly flat in x and would hide a wrong
 * gradient behind rounding).
 */
static tfc_status op_rms(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **out, void *ctx) {
    tfc_tensor *y = NULL, *r = NULL;
    tfc_status s = tfc_rmsnorm(g, in[0], n > 1 ? in[1] : NULL, 1e-3, &y);
    if (s == TFC_OK) s = tfc_mul(g, y, (const tfc_tensor *)ctx, &r);
    if (s == TFC_OK) s = tfc_sum(g, r, NULL, 0, 0, out);
    tfc_tensor_release(y);
    tfc_tensor_release(r);
    return s;
}

TEST(graph_door_equals_explicit_door_and_gradchecks) {
    seed(5);
    int64_t dims[3] = {2, 3, 8}, c = 8, n = 6;
    double *xv = rand_vec(48, -2, 2), *wv = rand_vec(8, -1.5, 1.5), *R = rand_vec(48, -1, 1);
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 3, xv), *w = mk(TFC_DTYPE_F64, &c, 1, wv), *y = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    CHECK_OK(tfc_rmsnorm(g, x, w, 1e-3, &y));
    /* forward: the same bits as the explicit door */
    tfc_tensor *ye = mk(TFC_DTYPE_F64, dims, 3, NULL), *rs = mk(TFC_DTYPE_F64, &n, 1, NULL);
    CHECK_OK(tfc_rmsnorm_forward(x, w, 1e-3, ye, rs));
    CHECK(memcmp(tfc_tensor_data(y), tfc_tensor_data(ye), 48 * sizeof(double)) == 0);
    /* backward with seed R: the explicit backward's bits */
    tfc_tensor *seedt = mk(TFC_DTYPE_F64, dims, 3, R), *dx = mk(TFC_DTYPE_F64, dims, 3, NULL);
    tfc_tensor *dw = mk(TFC_DTYPE_F64, &c, 1, NULL);
    CHECK_OK(tfc_graph_backward(g, y, seedt));
    CHECK_OK(tfc_rmsnorm_backward(seedt, x, w, rs, dx, dw, 0));
    tfc_tensor *gx = NULL, *gw = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK_OK(tfc_tensor_grad(w, &gw));
    CHECK(gx && gw);
    if (gx && gw) {
        CHECK(memcmp(tfc_tensor_data(gx), tfc_tensor_data(dx), 48 * sizeof(double)) == 0);
        CHECK(memcmp(tfc_tensor_data(gw), tfc_tensor_data(dw), 8 * sizeof(double)) == 0);
    }
    tfc_graph_release(g);
    rel(y, ye, rs, seedt, dx, dw);
    rel(gx, gw, NULL, NULL, NULL, NULL);
    CHECK_OK(tfc_tensor_set_grad(x, NULL));
    CHECK_OK(tfc_tensor_set_grad(w, NULL));

    /* tfc_gradcheck through the graph, with and without weight */
    double err = 1;
    tfc_tensor *in[2] = {x, w}, *rt = mk(TFC_DTYPE_F64, dims, 3, R);
    CHECK_OK(tfc_gradcheck(op_rms, in, 2, rt, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-6);
    err = 1;
    CHECK_OK(tfc_gradcheck(op_rms, in, 1, rt, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-6);
    free(xv), free(wv), free(R);
    rel(x, w, rt, NULL, NULL, NULL);
}

/* s(x, w) = Σ_i v_i · ∂/∂x_i (Σ y ⊙ R) for fixed v and R, through create_graph; its own gradient. */
static void double_backward(const double *xv, const double *wv, const double *v, const double *R, double *s,
                            double *dsx, double *dsw) {
    int64_t d[2] = {3, 5}, c = 5;
    tfc_tensor *x = mk(TFC_DTYPE_F64, d, 2, xv), *w = mk(TFC_DTYPE_F64, &c, 1, wv), *vt = mk(TFC_DTYPE_F64, d, 2, v);
    tfc_tensor *rt = mk(TFC_DTYPE_F64, d, 2, R), *loss = NULL, *gx = NULL, *p = NULL, *st = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    tfc_tensor *in[2] = {x, w};
    CHECK_OK(op_rms(g, in, 2, &loss, rt));
    const tfc_tensor *outs[1] = {loss}, *ins[1] = {x};
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 1, 1, 0, &gx));
    CHECK_OK(tfc_mul(g, gx, vt, &p));
    CHECK_OK(tfc_sum(g, p, NULL, 0, 0, &st));
    *s = *(const double *)tfc_tensor_data(st);
    if (dsx) {
        tfc_tensor *gx2 = NULL, *gw2 = NULL;
        CHECK_OK(tfc_graph_backward(g, st, NULL));
        CHECK_OK(tfc_tensor_grad(x, &gx2));
        CHECK_OK(tfc_tensor_grad(w, &gw2));
        if (gx2 && gw2) {
            memcpy(dsx, tfc_tensor_data(gx2), 15 * sizeof(double));
            memcpy(dsw, tfc_tensor_data(gw2), 5 * sizeof(double));
        }
        rel(gx2, gw2, NULL, NULL, NULL, NULL);
    }
    tfc_graph_release(g);
    rel(x, w, vt, loss, gx, p);
    rel(st, rt, NULL, NULL, NULL, NULL);
}

TEST(double_backward_matches_finite_differences_of_the_gradient) {
    seed(6);
    double *xv = rand_vec(15, -2, 2), *wv = rand_vec(5, -1.5, 1.5), *v = rand_vec(15, -1, 1), *R = rand_vec(15, -1, 1);
    double s, dsx[15], dsw[5], sp, sm, worst_err = 0;
    double_backward(xv, wv, v, R, &s, dsx, dsw);
    for (int i = 0; i < 20; i++) {
        double *p = i < 15 ? &xv[i] : &wv[i - 15], save = *p, a = i < 15 ? dsx[i] : dsw[i - 15];
        *p = save + 1e-6;
        double_backward(xv, wv, v, R, &sp, NULL, NULL);
        *p = save - 1e-6;
        double_backward(xv, wv, v, R, &sm, NULL, NULL);
        *p = save;
        double num = (sp - sm) / 2e-6, e = fabs(a - num) / (fabs(a) + fabs(num) + 1e-8);
        if (!(e <= worst_err)) worst_err = e;
    }
    CHECK_GRAD("rmsnorm double backward", worst_err);
    free(xv), free(wv), free(v), free(R);
}

/* ---- dispatch ------------------------------------------------------------------------- */

TEST(follows_the_table_and_a_missing_entry_is_unsupported) {
    tfc_backend *sb = standin_install();
    const int64_t d[2] = {2, 3}, c = 3;
    const double xv[6] = {1, -2, 3, 0.5, 0.25, -4}, wv[3] = {1, 2, -1};
    tfc_tensor *xh = mk(TFC_DTYPE_F32, d, 2, xv), *wh = mk(TFC_DTYPE_F32, &c, 1, wv), *x = NULL, *w = NULL;
    tfc_tensor *y = NULL, *yh = NULL, *ref = mk(TFC_DTYPE_F32, d, 2, NULL);
    CHECK_OK(tfc_tensor_to_device(xh, TFC_DEVICE_CUDA, 0, &x));
    CHECK_OK(tfc_tensor_to_device(wh, TFC_DEVICE_CUDA, 0, &w));
    CHECK_OK(tfc_rmsnorm(NULL, x, w, 1e-6, &y));
    CHECK(tfc_tensor_device_type(y) == TFC_DEVICE_CUDA);
    CHECK_OK(tfc_tensor_to_device(y, TFC_DEVICE_CPU, 0, &yh));
    CHECK_OK(tfc_rmsnorm_forward(xh, wh, 1e-6, ref, NULL));
    CHECK(memcmp(tfc_tensor_data(yh), tfc_tensor_data(ref), 6 * sizeof(float)) == 0);
    CHECK_ERR(tfc_rmsnorm_forward(xh, w, 1e-6, ref, NULL), TFC_ERR_DEVICE,
              "tfc_rmsnorm_forward: x lives on cpu but weight lives on cuda:0");
    sb->rmsnorm_forward = NULL;
    sb->rmsnorm_backward = NULL;
    tfc_tensor *out = y, *sentinel = (tfc_tensor *)&out, *rs = NULL;
    CHECK_OK(tfc_tensor_fill(out, 7.0));
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 1e-6, out, NULL), TFC_ERR_UNSUPPORTED,
              "tfc_rmsnorm_forward: rmsnorm_forward is not implemented on cuda:0 for f32");
    float v[6];
    CHECK_OK(tfc_tensor_copy_to_host(out, v, sizeof v));
    for (int i = 0; i < 6; i++) CHECK(v[i] == 7.0f); /* nothing written */
    tfc_tensor *o2 = sentinel;
    CHECK_ERR(tfc_rmsnorm(NULL, x, w, 1e-6, &o2), TFC_ERR_UNSUPPORTED,
              "tfc_rmsnorm: rmsnorm_forward is not implemented on cuda:0 for f32");
    CHECK(o2 == sentinel);
    CHECK_OK(tfc_tensor_new_on(x, (const int64_t[]){2}, 1, TFC_DTYPE_F32, &rs));
    CHECK_ERR(tfc_rmsnorm_backward(x, x, NULL, rs, out, NULL, 0), TFC_ERR_UNSUPPORTED,
              "tfc_rmsnorm_backward: rmsnorm_backward is not implemented on cuda:0 for f32");
    rel(xh, wh, x, w, y, yh);
    rel(ref, rs, NULL, NULL, NULL, NULL);
    standin_remove();
}

/* ---- bad arguments ------------------------------------------------------------------ */

TEST(bad_arguments_at_both_doors) {
    int64_t d2[2] = {4, 8}, d1[1] = {8}, d7[1] = {7}, n4[1] = {4}, d0[2] = {4, 0};
    tfc_tensor *x = mk(TFC_DTYPE_F32, d2, 2, NULL), *y = mk(TFC_DTYPE_F32, d2, 2, NULL);
    tfc_tensor *w7 = mk(TFC_DTYPE_F32, d7, 1, NULL), *w64 = mk(TFC_DTYPE_F64, d1, 1, NULL);
    tfc_tensor *w = mk(TFC_DTYPE_F32, d1, 1, NULL), *r4 = mk(TFC_DTYPE_F32, n4, 1, NULL);
    tfc_tensor *r8 = mk(TFC_DTYPE_F32, d1, 1, NULL), *x0 = NULL, *xi = NULL, *xb = NULL, *s = NULL;
    tfc_tensor *out = NULL, *sentinel = (tfc_tensor *)&out;
    CHECK_OK(tfc_tensor_empty(d0, 2, TFC_DTYPE_F32, &x0));
    CHECK_OK(tfc_tensor_zeros(d2, 2, TFC_DTYPE_I32, &xi));
    CHECK_OK(tfc_tensor_zeros(d2, 2, TFC_DTYPE_BF16, &xb));
    CHECK_OK(tfc_tensor_zeros(NULL, 0, TFC_DTYPE_F32, &s));
    tfc_tensor *ybig = mk(TFC_DTYPE_F32, (int64_t[]){8, 4}, 2, NULL), *yt = NULL;
    CHECK_OK(tfc_tensor_wrap(tfc_tensor_data(ybig), d2, (int64_t[]){1, 4}, 2, TFC_DTYPE_F32, NULL, NULL, &yt));

    /* the explicit forward */
    CHECK_ERR(tfc_rmsnorm_forward(NULL, NULL, 1e-5, y, NULL), TFC_ERR_INVALID_ARG, "tfc_rmsnorm_forward: x is NULL");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 1e-5, NULL, NULL), TFC_ERR_INVALID_ARG, "tfc_rmsnorm_forward: y is NULL");
    CHECK_ERR(tfc_rmsnorm_forward(x, w7, 1e-5, y, NULL), TFC_ERR_SHAPE,
              "tfc_rmsnorm_forward: weight is [7], must be [8] (x is [4,8])");
    CHECK_ERR(tfc_rmsnorm_forward(x, w64, 1e-5, y, NULL), TFC_ERR_DTYPE,
              "tfc_rmsnorm_forward: weight is f64 [8], must be f32 like x [4,8]");
    CHECK_ERR(tfc_rmsnorm_forward(xi, NULL, 1e-5, y, NULL), TFC_ERR_DTYPE,
              "tfc_rmsnorm_forward: x is i32 [4,8]; only f32 and f64 are supported on cpu");
    CHECK_ERR(tfc_rmsnorm_forward(xb, NULL, 1e-5, y, NULL), TFC_ERR_DTYPE,
              "tfc_rmsnorm_forward: x is bf16 [4,8]; only f32 and f64 are supported on cpu");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 0, y, NULL), TFC_ERR_INVALID_ARG,
              "tfc_rmsnorm_forward: eps is 0, must be finite and > 0");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, -1e-5, y, NULL), TFC_ERR_INVALID_ARG, "eps is -1e-05, must be finite");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, NAN, y, NULL), TFC_ERR_INVALID_ARG, "eps is nan, must be finite and > 0");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, INFINITY, y, NULL), TFC_ERR_INVALID_ARG, "eps is inf");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 1e-5, y, r8), TFC_ERR_SHAPE,
              "tfc_rmsnorm_forward: output rstd is [8], must be [4] (x is [4,8])");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 1e-5, y, w64), TFC_ERR_DTYPE, "output rstd is f64 [8], must be f32");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 1e-5, yt, NULL), TFC_ERR_INVALID_ARG,
              "output y [4,8] has strides [1,4]; outputs must be contiguous");
    CHECK_ERR(tfc_rmsnorm_forward(x, NULL, 1e-5, x, NULL), TFC_ERR_INVALID_ARG, "output y [4,8] overlaps x [4,8]");
    CHECK_ERR(tfc_rmsnorm_forward(x0, NULL, 1e-5, x0, NULL), TFC_ERR_SHAPE,
              "tfc_rmsnorm_forward: x is [4,0]; it needs a last dim of size >= 1");
    CHECK_ERR(tfc_rmsnorm_forward(s, NULL, 1e-5, s, NULL), TFC_ERR_SHAPE, "x is []; it needs a last dim");

    /* the graph door: the same checks, named after it, *out untouched */
    out = sentinel;
    CHECK_ERR(tfc_rmsnorm(NULL, x, w7, 1e-5, &out), TFC_ERR_SHAPE,
              "tfc_rmsnorm: weight is [7], must be [8] (x is [4,8])");
    CHECK_ERR(tfc_rmsnorm(NULL, x, NULL, 0, &out), TFC_ERR_INVALID_ARG,
              "tfc_rmsnorm: eps is 0, must be finite and > 0");
    CHECK_ERR(tfc_rmsnorm(NULL, x, w64, 1e-5, &out), TFC_ERR_DTYPE, "tfc_rmsnorm: weight is f64 [8], must be f32");
    CHECK_ERR(tfc_rmsnorm(NULL, xi, NULL, 1e-5, &out), TFC_ERR_DTYPE, "tfc_rmsnorm: x is i32 [4,8]");
    CHECK_ERR(tfc_rmsnorm(NULL, NULL, NULL, 1e-5, &out), TFC_ERR_INVALID_ARG, "tfc_rmsnorm: x is NULL");
    CHECK_ERR(tfc_rmsnorm(NULL, s, NULL, 1e-5, &out), TFC_ERR_SHAPE, "tfc_rmsnorm: x is []");
    CHECK_ERR(tfc_rmsnorm(NULL, x, NULL, 1e-5, NULL), TFC_ERR_INVALID_ARG, "tfc_rmsnorm: out is NULL");
    CHECK(out == sentinel);

    /* the explicit backward */
    CHECK_ERR(tfc_rmsnorm_backward(y, x, NULL, r8, y, NULL, 0), TFC_ERR_SHAPE,
              "tfc_rmsnorm_backward: rstd is [8], must be [4]");
    CHECK_ERR(tfc_rmsnorm_backward(y, x, NULL, NULL, y, NULL, 0), TFC_ERR_INVALID_ARG,
              "tfc_rmsnorm_backward: rstd is NULL");
    CHECK_ERR(tfc_rmsnorm_backward(y, x, NULL, r4, NULL, w, 0), TFC_ERR_INVALID_ARG,
              "tfc_rmsnorm_backward: dweight [8] is given but weight is NULL");
    CHECK_ERR(tfc_rmsnorm_backward(y, x, w7, r4, NULL, NULL, 0), TFC_ERR_SHAPE, "weight is [7], must be [8]");
    CHECK_ERR(tfc_rmsnorm_backward(w, x, NULL, r4, NULL, NULL, 0), TFC_ERR_SHAPE, "dy is [8], must be [4,8]");
    CHECK_ERR(tfc_rmsnorm_backward(y, x, w, r4, NULL, w7, 0), TFC_ERR_SHAPE, "output dweight is [7], must be [8]");
    CHECK_ERR(tfc_rmsnorm_backward(y, x, NULL, r4, NULL, NULL, 4), TFC_ERR_INVALID_ARG, "flags is 0x4");
    CHECK_ERR(tfc_rmsnorm_backward(y, x, NULL, r4, y, NULL, 0), TFC_ERR_INVALID_ARG, "output dx [4,8] overlaps dy");
    rel(x, y, w7, w64, w, r4);
    rel(r8, x0, xi, xb, s, ybig);
    tfc_tensor_release(yt);
}
