/*
 * The fused kernels' public forward/backward entry points (tfcore/kernels.h):
 * forwards against naive f64 loops written here, backwards against centred
 * finite differences of the f64 forwards, f32 (portable and AVX2 paths)
 * against f64, strided inputs, TFC_GRAD_ACCUMULATE, NULL outputs,
 * thread-count independence, and every kind of bad argument.
 */
#include "tfc_test.h"

#include "standin_backend.h"

#include "cpu/kernels.h"
#include "cpu/vmath.h"
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

static int64_t prod(const int64_t *dims, int nd) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= dims[i];
    return n;
}

static void store(void *data, tfc_dtype dt, int64_t i, double v) {
    switch (dt) {
    case TFC_DTYPE_F32: ((float *)data)[i] = (float)v; break;
    case TFC_DTYPE_F64: ((double *)data)[i] = v; break;
    case TFC_DTYPE_I32: ((int32_t *)data)[i] = (int32_t)v; break;
    case TFC_DTYPE_I64: ((int64_t *)data)[i] = (int64_t)v; break;
    default: break;
    }
}
static double load(const void *data, tfc_dtype dt, int64_t i) {
    switch (dt) {
    case TFC_DTYPE_F32: return ((const float *)data)[i];
    case TFC_DTYPE_F64: return ((const double *)data)[i];
    case TFC_DTYPE_I32: return ((const int32_t *)data)[i];
    case TFC_DTYPE_I64: return (double)((const int64_t *)data)[i];
    default: return NAN;
    }
}

/* New contiguous tensor of dtype dt holding vals (NULL: filled with 0). */
static tfc_tensor *mk(tfc_dtype dt, const int64_t *dims, int nd, const double *vals) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_zeros(dims, nd, dt, &t) != TFC_OK) return NULL;
    if (vals)
        for (int64_t i = 0; i < prod(dims, nd); i++) store(tfc_tensor_data(t), dt, i, vals[i]);
    return t;
}
/* A tensor's values (contiguous) as doubles, malloc'd. */
static double *rd(const tfc_tensor *t) {
    int64_t n = tfc_tensor_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = load(tfc_tensor_data(t), tfc_tensor_dtype(t), i);
    return v;
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

/*
 * Centred finite differences: for every element of param, the derivative of
 * L = Σ R ⊙ f(param) with f evaluated by eval (f64 forward), compared with
 * analytic[i] by |a − n| / (|a| + |n| + 1e-8). The difference of the two
 * outputs is taken element by element before weighting, so outputs that the
 * perturbation does not touch cancel exactly.
 */
typedef void (*eval_fn)(void *ctx, double *out);
static double gradcheck(eval_fn eval, void *ctx, double *param, int64_t nparam, const double *analytic, const double *R,
                        int64_t nout) {
    const double eps = 1e-6;
    double *yp = malloc((size_t)nout * sizeof *yp), *ym = malloc((size_t)nout * sizeof *ym);
    double w = 0;
    for (int64_t i = 0; i < nparam; i++) {
        double save = param[i];
        param[i] = save + eps;
        eval(ctx, yp);
        param[i] = save - eps;
        eval(ctx, ym);
        param[i] = save;
        double num = 0;
        for (int64_t j = 0; j < nout; j++) num += R[j] * (yp[j] - ym[j]);
        num /= 2 * eps;
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

/* Run body for the portable f32 kernels and again for the AVX2 ones. */
#define FOR_BOTH_F32_PATHS(...)               \
    for (int path_ = 0; path_ < 2; path_++) { \
        tfc_cpu_avx2_disabled = path_ == 0;   \
        __VA_ARGS__                           \
    }                                         \
    tfc_cpu_avx2_disabled = 0

static void rel(tfc_tensor *a, tfc_tensor *b, tfc_tensor *c, tfc_tensor *d, tfc_tensor *e, tfc_tensor *f) {
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(c);
    tfc_tensor_release(d);
    tfc_tensor_release(e);
    tfc_tensor_release(f);
}

/* ---- LayerNorm ----------------------------------------------------------------- */

static void ref_layernorm(const double *x, const double *w, const double *b, double eps, int64_t n, int64_t c,
                          double *y, double *mean, double *rstd) {
    for (int64_t r = 0; r < n; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < c; j++) m += x[r * c + j];
        m /= c;
        for (int64_t j = 0; j < c; j++) v += (x[r * c + j] - m) * (x[r * c + j] - m);
        double rs = 1 / sqrt(v / c + eps);
        for (int64_t j = 0; j < c; j++) y[r * c + j] = (x[r * c + j] - m) * rs * (w ? w[j] : 1) + (b ? b[j] : 0);
        mean[r] = m;
        rstd[r] = rs;
    }
}

TEST(layernorm_forward_matches_reference) {
    int64_t dims[3] = {3, 5, 37}, n = 15, c = 37;
    seed(1);
    double *x = rand_vec(n * c, -2, 3), *w = rand_vec(c, 0.5, 1.5), *b = rand_vec(c, -1, 1);
    double *ry = malloc(sizeof(double) * n * c), rm[15], rr[15];
    for (int affine = 0; affine < 2; affine++) {
        ref_layernorm(x, affine ? w : NULL, affine ? b : NULL, 1e-5, n, c, ry, rm, rr);
        for (int t = 0; t < 2; t++) {
            tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
            double tol = t ? 2e-6 : 1e-13;
            FOR_BOTH_F32_PATHS({
                tfc_tensor *tx = mk(dt, dims, 3, x), *tw = affine ? mk(dt, &c, 1, w) : NULL;
                tfc_tensor *tb = affine ? mk(dt, &c, 1, b) : NULL, *ty = mk(dt, dims, 3, NULL);
                tfc_tensor *tm = mk(dt, &n, 1, NULL), *tr = mk(dt, &n, 1, NULL);
                CHECK_OK(tfc_layernorm_forward(tx, tw, tb, 1e-5, ty, tm, tr));
                double *gy = rd(ty), *gm = rd(tm), *gr = rd(tr);
                CHECK_ALLCLOSE(gy, ry, n * c, tol, tol);
                CHECK_ALLCLOSE(gm, rm, n, tol, tol);
                CHECK_ALLCLOSE(gr, rr, n, tol, tol);
                /* mean/rstd are optional */
                CHECK_OK(tfc_layernorm_forward(tx, tw, tb, 1e-5, ty, NULL, NULL));
                free(gy);
                gy = rd(ty);
                CHECK_ALLCLOSE(gy, ry, n * c, tol, tol);
                free(gy), free(gm), free(gr);
                rel(tx, tw, tb, ty, tm, tr);
            });
        }
    }
    free(x), free(w), free(b), free(ry);
}

struct ln_ctx {
    int64_t n, c;
    double *x, *w, *b;
};
static void ln_eval(void *p, double *out) {
    struct ln_ctx *k = p;
    int64_t dims[2] = {k->n, k->c};
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, k->x), *w = mk(TFC_DTYPE_F64, &k->c, 1, k->w);
    tfc_tensor *b = mk(TFC_DTYPE_F64, &k->c, 1, k->b), *y = mk(TFC_DTYPE_F64, dims, 2, NULL);
    if (tfc_layernorm_forward(x, w, b, 1e-5, y, NULL, NULL) != TFC_OK) abort();
    memcpy(out, tfc_tensor_data(y), sizeof(double) * k->n * k->c);
    rel(x, w, b, y, NULL, NULL);
}

TEST(layernorm_backward_gradcheck_accumulate_and_null_outputs) {
    struct ln_ctx k = {4, 9, NULL, NULL, NULL};
    int64_t dims[2] = {4, 9}, nc = 36;
    seed(2);
    k.x = rand_vec(nc, -2, 2), k.w = rand_vec(9, 0.5, 2), k.b = rand_vec(9, -1, 1);
    double *R = rand_vec(nc, -1, 1);
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, k.x), *w = mk(TFC_DTYPE_F64, &k.c, 1, k.w);
    tfc_tensor *b = mk(TFC_DTYPE_F64, &k.c, 1, k.b), *y = mk(TFC_DTYPE_F64, dims, 2, NULL);
    tfc_tensor *m = mk(TFC_DTYPE_F64, &k.n, 1, NULL), *rs = mk(TFC_DTYPE_F64, &k.n, 1, NULL);
    CHECK_OK(tfc_layernorm_forward(x, w, b, 1e-5, y, m, rs));
    tfc_tensor *dy = mk(TFC_DTYPE_F64, dims, 2, R), *dx = mk(TFC_DTYPE_F64, dims, 2, NULL);
    tfc_tensor *dw = mk(TFC_DTYPE_F64, &k.c, 1, NULL), *db = mk(TFC_DTYPE_F64, &k.c, 1, NULL);
    CHECK_OK(tfc_layernorm_backward(dy, x, w, m, rs, dx, dw, db, 0));
    double *gx = rd(dx), *gw = rd(dw), *gb = rd(db);
    CHECK_GRAD("layernorm dx", gradcheck(ln_eval, &k, k.x, nc, gx, R, nc));
    CHECK_GRAD("layernorm dweight", gradcheck(ln_eval, &k, k.w, 9, gw, R, nc));
    CHECK_GRAD("layernorm dbias", gradcheck(ln_eval, &k, k.b, 9, gb, R, nc));

    /* TFC_GRAD_ACCUMULATE adds onto what is there. */
    CHECK_OK(tfc_tensor_fill(dx, 0.25));
    CHECK_OK(tfc_tensor_fill(dw, -1.5));
    CHECK_OK(tfc_layernorm_backward(dy, x, w, m, rs, dx, dw, NULL, TFC_GRAD_ACCUMULATE));
    double *ax = rd(dx), *aw = rd(dw);
    for (int64_t i = 0; i < nc; i++) CHECK_CLOSE(ax[i], gx[i] + 0.25, 1e-14);
    for (int64_t i = 0; i < 9; i++) CHECK_CLOSE(aw[i], gw[i] - 1.5, 1e-14);
    /* Only dbias asked for: dx is left alone. */
    CHECK_OK(tfc_tensor_fill(dx, 7));
    CHECK_OK(tfc_tensor_fill(db, 0));
    CHECK_OK(tfc_layernorm_backward(dy, x, w, m, rs, NULL, NULL, db, 0));
    double *ox = rd(dx), *ob = rd(db);
    for (int64_t i = 0; i < nc; i++) CHECK(ox[i] == 7);
    for (int64_t i = 0; i < 9; i++) CHECK(ob[i] == gb[i]);

    /* f32 backward (both paths) agrees with f64. */
    FOR_BOTH_F32_PATHS({
        tfc_tensor *x32 = mk(TFC_DTYPE_F32, dims, 2, k.x), *w32 = mk(TFC_DTYPE_F32, &k.c, 1, k.w);
        tfc_tensor *y32 = mk(TFC_DTYPE_F32, dims, 2, NULL), *m32 = mk(TFC_DTYPE_F32, &k.n, 1, NULL);
        tfc_tensor *r32 = mk(TFC_DTYPE_F32, &k.n, 1, NULL), *dy32 = mk(TFC_DTYPE_F32, dims, 2, R);
        tfc_tensor *dx32 = mk(TFC_DTYPE_F32, dims, 2, NULL), *dw32 = mk(TFC_DTYPE_F32, &k.c, 1, NULL);
        CHECK_OK(tfc_layernorm_forward(x32, w32, NULL, 1e-5, y32, m32, r32));
        CHECK_OK(tfc_layernorm_backward(dy32, x32, w32, m32, r32, dx32, dw32, NULL, 0));
        double *fx = rd(dx32), *fw = rd(dw32);
        CHECK_ALLCLOSE(fx, gx, nc, 1e-5, 1e-4);
        CHECK_ALLCLOSE(fw, gw, 9, 1e-5, 1e-4);
        free(fx), free(fw);
        rel(x32, w32, y32, m32, r32, dy32);
        rel(dx32, dw32, NULL, NULL, NULL, NULL);
    });
    free(gx), free(gw), free(gb), free(ax), free(aw), free(ox), free(ob);
    free(k.x), free(k.w), free(k.b), free(R);
    rel(x, w, b, y, m, rs);
    rel(dy, dx, dw, db, NULL, NULL);
}

TEST(layernorm_strided_input_and_column_sums_thread_independent) {
    /* x viewed transposed: a [9, 40] buffer read as [40, 9]. */
    seed(3);
    int64_t n = 40, c = 9, dims[2] = {40, 9}, strides[2] = {1, 40};
    double *buf = rand_vec(n * c, -1, 1), *xc = malloc(sizeof(double) * n * c), *R = rand_vec(n * c, -1, 1);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < c; j++) xc[r * c + j] = buf[j * n + r];
    tfc_tensor *xs = NULL;
    CHECK_OK(tfc_tensor_wrap(buf, dims, strides, 2, TFC_DTYPE_F64, NULL, NULL, &xs));
    tfc_tensor *xcon = mk(TFC_DTYPE_F64, dims, 2, xc), *y1 = mk(TFC_DTYPE_F64, dims, 2, NULL);
    tfc_tensor *y2 = mk(TFC_DTYPE_F64, dims, 2, NULL), *m = mk(TFC_DTYPE_F64, &n, 1, NULL);
    tfc_tensor *rs = mk(TFC_DTYPE_F64, &n, 1, NULL);
    CHECK_OK(tfc_layernorm_forward(xs, NULL, NULL, 1e-5, y1, m, rs));
    CHECK_OK(tfc_layernorm_forward(xcon, NULL, NULL, 1e-5, y2, NULL, NULL));
    double *a = rd(y1), *b = rd(y2);
    for (int64_t i = 0; i < n * c; i++) CHECK(a[i] == b[i]);
    /* dbias/dweight-style column sums: same bits with 1 and 2 threads. */
    tfc_tensor *w = mk(TFC_DTYPE_F64, &c, 1, NULL), *dy = mk(TFC_DTYPE_F64, dims, 2, R);
    CHECK_OK(tfc_tensor_fill(w, 1));
    tfc_tensor *dw1 = mk(TFC_DTYPE_F64, &c, 1, NULL), *dw2 = mk(TFC_DTYPE_F64, &c, 1, NULL);
    int32_t nt = tfc_get_num_threads();
    CHECK_OK(tfc_set_num_threads(1));
    CHECK_OK(tfc_layernorm_backward(dy, xs, w, m, rs, NULL, dw1, NULL, 0));
    CHECK_OK(tfc_set_num_threads(2));
    CHECK_OK(tfc_layernorm_backward(dy, xs, w, m, rs, NULL, dw2, NULL, 0));
    CHECK_OK(tfc_set_num_threads(nt));
    CHECK(memcmp(tfc_tensor_data(dw1), tfc_tensor_data(dw2), sizeof(double) * c) == 0);
    free(a), free(b), free(buf), free(xc), free(R);
    rel(xs, xcon, y1, y2, m, rs);
    rel(w, dy, dw1, dw2, NULL, NULL);
}

TEST(layernorm_backward_many_row_chunks_matches_naive) {
    /* n spans several of the one-pass backward's 64-row partial sums (the
     * last one ragged); dx, dw, db against the formulas evaluated naively
     * here in f64, and the same bits with 1 and 2 threads. */
    seed(4);
    int64_t n = 150, c = 37, dims[2] = {150, 37}, nc = 150 * 37;
    double *xv = rand_vec(nc, -2, 2), *wv = rand_vec(c, 0.5, 2), *R = rand_vec(nc, -1, 1);
    double *rx = calloc((size_t)nc, sizeof(double)), *rw = calloc((size_t)c, sizeof(double)),
           *rb = calloc((size_t)c, sizeof(double));
    for (int64_t r = 0; r < n; r++) {
        const double *xr = xv + r * c, *dyr = R + r * c;
        double mu = 0, var = 0, mg = 0, mgx = 0;
        for (int64_t j = 0; j < c; j++) mu += xr[j] / c;
        for (int64_t j = 0; j < c; j++) var += (xr[j] - mu) * (xr[j] - mu) / c;
        double rstd = 1 / sqrt(var + 1e-5);
        for (int64_t j = 0; j < c; j++) {
            double xh = (xr[j] - mu) * rstd;
            mg += dyr[j] * wv[j] / c;
            mgx += dyr[j] * wv[j] * xh / c;
            rw[j] += dyr[j] * xh;
            rb[j] += dyr[j];
        }
        for (int64_t j = 0; j < c; j++) rx[r * c + j] = rstd * (dyr[j] * wv[j] - mg - (xr[j] - mu) * rstd * mgx);
    }
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, xv), *w = mk(TFC_DTYPE_F64, &c, 1, wv);
    tfc_tensor *y = mk(TFC_DTYPE_F64, dims, 2, NULL), *m = mk(TFC_DTYPE_F64, &n, 1, NULL);
    tfc_tensor *rs = mk(TFC_DTYPE_F64, &n, 1, NULL), *dy = mk(TFC_DTYPE_F64, dims, 2, R);
    CHECK_OK(tfc_layernorm_forward(x, w, NULL, 1e-5, y, m, rs));
    double *got[2][3];
    int32_t nt = tfc_get_num_threads();
    for (int t = 0; t < 2; t++) {
        tfc_tensor *dx = mk(TFC_DTYPE_F64, dims, 2, NULL), *dw = mk(TFC_DTYPE_F64, &c, 1, NULL);
        tfc_tensor *db = mk(TFC_DTYPE_F64, &c, 1, NULL);
        CHECK_OK(tfc_set_num_threads(t + 1));
        CHECK_OK(tfc_layernorm_backward(dy, x, w, m, rs, dx, dw, db, 0));
        got[t][0] = rd(dx), got[t][1] = rd(dw), got[t][2] = rd(db);
        rel(dx, dw, db, NULL, NULL, NULL);
    }
    CHECK_OK(tfc_set_num_threads(nt));
    CHECK_ALLCLOSE(got[0][0], rx, nc, 1e-12, 1e-12);
    CHECK_ALLCLOSE(got[0][1], rw, c, 1e-12, 1e-12);
    CHECK_ALLCLOSE(got[0][2], rb, c, 1e-12, 1e-12);
    CHECK(memcmp(got[0][1], got[1][1], sizeof(double) * c) == 0);
    CHECK(memcmp(got[0][2], got[1][2], sizeof(double) * c) == 0);
    for (int t = 0; t < 2; t++) free(got[t][0]), free(got[t][1]), free(got[t][2]);
    free(xv), free(wv), free(R), free(rx), free(rw), free(rb);
    rel(x, w, y, m, rs, dy);
}

TEST(layernorm_bad_arguments) {
    const char *fn = "tfc_layernorm_forward";
    (void)fn;
    int64_t d2[2] = {4, 8}, d1[1] = {8}, d7[1] = {7}, n4[1] = {4}, d0[2] = {4, 0};
    tfc_tensor *x = mk(TFC_DTYPE_F32, d2, 2, NULL), *y = mk(TFC_DTYPE_F32, d2, 2, NULL);
    tfc_tensor *w7 = mk(TFC_DTYPE_F32, d7, 1, NULL), *w64 = mk(TFC_DTYPE_F64, d1, 1, NULL);
    tfc_tensor *wi = mk(TFC_DTYPE_I32, d1, 1, NULL), *xi = mk(TFC_DTYPE_I32, d2, 2, NULL);
    tfc_tensor *m = mk(TFC_DTYPE_F32, n4, 1, NULL), *m8 = mk(TFC_DTYPE_F32, d1, 1, NULL);
    /* tfc_tensor_empty, not zeros: tfc_tensor_fill divides by zero on an empty tensor (lib/cpu/strided.c) */
    tfc_tensor *x0 = NULL, *w = mk(TFC_DTYPE_F32, d1, 1, NULL);
    CHECK_OK(tfc_tensor_empty(d0, 2, TFC_DTYPE_F32, &x0));
    tfc_tensor *ybig = mk(TFC_DTYPE_F32, (int64_t[]){8, 4}, 2, NULL), *yt = NULL;
    CHECK_OK(tfc_tensor_wrap(tfc_tensor_data(ybig), d2, (int64_t[]){1, 4}, 2, TFC_DTYPE_F32, NULL, NULL, &yt));
    CHECK_ERR(tfc_layernorm_forward(NULL, NULL, NULL, 1e-5, y, NULL, NULL), TFC_ERR_INVALID_ARG,
              "tfc_layernorm_forward: x is NULL");
    CHECK_ERR(tfc_layernorm_forward(x, NULL, NULL, 1e-5, NULL, NULL, NULL), TFC_ERR_INVALID_ARG, "y is NULL");
    CHECK_ERR(tfc_layernorm_forward(x, w7, NULL, 1e-5, y, NULL, NULL), TFC_ERR_SHAPE,
              "tfc_layernorm_forward: weight is [7], must be [8] (x is [4,8])");
    CHECK_ERR(tfc_layernorm_forward(x, w64, NULL, 1e-5, y, NULL, NULL), TFC_ERR_DTYPE,
              "weight is f64 [8], must be f32 like x [4,8]");
    CHECK_ERR(tfc_layernorm_forward(x, wi, NULL, 1e-5, y, NULL, NULL), TFC_ERR_DTYPE,
              "weight is i32 [8]; only f32 and f64 are supported");
    CHECK_ERR(tfc_layernorm_forward(x, NULL, w7, 1e-5, y, NULL, NULL), TFC_ERR_SHAPE, "bias is [7], must be [8]");
    CHECK_ERR(tfc_layernorm_forward(xi, NULL, NULL, 1e-5, y, NULL, NULL), TFC_ERR_DTYPE, "x is i32 [4,8]");
    CHECK_ERR(tfc_layernorm_forward(x, NULL, NULL, -1, y, NULL, NULL), TFC_ERR_INVALID_ARG, "eps");
    CHECK_ERR(tfc_layernorm_forward(x, NULL, NULL, 1e-5, y, m8, NULL), TFC_ERR_SHAPE,
              "output mean is [8], must be [4] (x is [4,8])");
    CHECK_ERR(tfc_layernorm_forward(x, NULL, NULL, 1e-5, yt, NULL, NULL), TFC_ERR_INVALID_ARG,
              "output y [4,8] has strides [1,4]; outputs must be contiguous");
    CHECK_ERR(tfc_layernorm_forward(x, NULL, NULL, 1e-5, x, NULL, NULL), TFC_ERR_INVALID_ARG,
              "output y [4,8] overlaps x [4,8]");
    CHECK_ERR(tfc_layernorm_forward(x0, NULL, NULL, 1e-5, x0, NULL, NULL), TFC_ERR_SHAPE, "x is [4,0]");
    CHECK_ERR(tfc_layernorm_backward(y, x, NULL, m, m8, y, NULL, NULL, 0), TFC_ERR_SHAPE,
              "tfc_layernorm_backward: rstd is [8], must be [4]");
    CHECK_ERR(tfc_layernorm_backward(y, x, NULL, m, m, x0, w, NULL, 0), TFC_ERR_INVALID_ARG,
              "dweight [8] is given but weight is NULL");
    CHECK_ERR(tfc_layernorm_backward(y, x, NULL, m, m, NULL, NULL, NULL, 4), TFC_ERR_INVALID_ARG, "flags is 0x4");
    CHECK_ERR(tfc_layernorm_backward(y, x, NULL, NULL, m, NULL, NULL, NULL, 0), TFC_ERR_INVALID_ARG, "mean is NULL");
    rel(x, y, w7, w64, wi, xi);
    rel(m, m8, x0, w, ybig, yt);
}

/* ---- softmax --------------------------------------------------------------------- */

static void ref_softmax(const double *x, int64_t outer, int64_t d, int64_t inner, int is_log, double *y) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < d; j++) m = fmax(m, x[(o * d + j) * inner + i]);
            for (int64_t j = 0; j < d; j++) s += exp(x[(o * d + j) * inner + i] - m);
            for (int64_t j = 0; j < d; j++) {
                double v = x[(o * d + j) * inner + i];
                y[(o * d + j) * inner + i] = is_log ? v - m - log(s) : exp(v - m) / s;
            }
        }
}

struct sm_ctx {
    int64_t dims[3];
    int32_t dim, is_log;
    double *x;
};
static void sm_eval(void *p, double *out) {
    struct sm_ctx *k = p;
    tfc_tensor *x = mk(TFC_DTYPE_F64, k->dims, 3, k->x), *y = mk(TFC_DTYPE_F64, k->dims, 3, NULL);
    if (tfc_softmax_forward(x, k->dim, k->is_log, y) != TFC_OK) abort();
    memcpy(out, tfc_tensor_data(y), sizeof(double) * prod(k->dims, 3));
    rel(x, y, NULL, NULL, NULL, NULL);
}

TEST(softmax_forward_and_backward_every_dim) {
    int64_t dims[3] = {3, 70, 5}, n = 3 * 70 * 5;
    seed(4);
    double *x = rand_vec(n, -4, 4), *R = rand_vec(n, -1, 1), *ref = malloc(sizeof(double) * n);
    for (int32_t dim = -3; dim < 3; dim++)
        for (int32_t is_log = 0; is_log < 2; is_log++) {
            int32_t dd = dim < 0 ? dim + 3 : dim;
            int64_t outer = 1, inner = 1;
            for (int i = 0; i < dd; i++) outer *= dims[i];
            for (int i = dd + 1; i < 3; i++) inner *= dims[i];
            ref_softmax(x, outer, dims[dd], inner, is_log, ref);
            for (int t = 0; t < 2; t++) {
                tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
                double tol = t ? 1e-6 : 1e-14;
                FOR_BOTH_F32_PATHS({
                    tfc_tensor *tx = mk(dt, dims, 3, x), *ty = mk(dt, dims, 3, NULL);
                    CHECK_OK(tfc_softmax_forward(tx, dim, is_log, ty));
                    double *got = rd(ty);
                    CHECK_ALLCLOSE(got, ref, n, tol, tol);
                    free(got);
                    rel(tx, ty, NULL, NULL, NULL, NULL);
                });
            }
            /* backward: f64 gradcheck on a few dims only (cost), f32 vs f64 always */
            struct sm_ctx k = {{3, 70, 5}, dim, is_log, x};
            tfc_tensor *tx = mk(TFC_DTYPE_F64, dims, 3, x), *ty = mk(TFC_DTYPE_F64, dims, 3, NULL);
            tfc_tensor *dy = mk(TFC_DTYPE_F64, dims, 3, R), *dx = mk(TFC_DTYPE_F64, dims, 3, NULL);
            CHECK_OK(tfc_softmax_forward(tx, dim, is_log, ty));
            CHECK_OK(tfc_softmax_backward(dy, ty, dim, is_log, dx, 0));
            double *g = rd(dx);
            if (dim == 1 || dim == -1) {
                int64_t small[3] = {2, 6, 3};
                double xs[36]; /* milder logits: gradients well above the f64 roundoff of finite differences */
                for (int i = 0; i < 36; i++) xs[i] = x[i] / 2;
                struct sm_ctx ks = {{2, 6, 3}, dim, is_log, xs};
                tfc_tensor *sx = mk(TFC_DTYPE_F64, small, 3, xs), *sy = mk(TFC_DTYPE_F64, small, 3, NULL);
                tfc_tensor *sdy = mk(TFC_DTYPE_F64, small, 3, R), *sdx = mk(TFC_DTYPE_F64, small, 3, NULL);
                CHECK_OK(tfc_softmax_forward(sx, dim, is_log, sy));
                CHECK_OK(tfc_softmax_backward(sdy, sy, dim, is_log, sdx, 0));
                double *sg = rd(sdx);
                CHECK_GRAD(is_log ? "log_softmax dx" : "softmax dx", gradcheck(sm_eval, &ks, xs, 36, sg, R, 36));
                free(sg);
                rel(sx, sy, sdy, sdx, NULL, NULL);
            }
            (void)k;
            FOR_BOTH_F32_PATHS({
                tfc_tensor *x32 = mk(TFC_DTYPE_F32, dims, 3, x), *y32 = mk(TFC_DTYPE_F32, dims, 3, NULL);
                tfc_tensor *dy32 = mk(TFC_DTYPE_F32, dims, 3, R), *dx32 = mk(TFC_DTYPE_F32, dims, 3, NULL);
                CHECK_OK(tfc_softmax_forward(x32, dim, is_log, y32));
                CHECK_OK(tfc_tensor_fill(dx32, 1));
                CHECK_OK(tfc_softmax_backward(dy32, y32, dim, is_log, dx32, TFC_GRAD_ACCUMULATE));
                double *f = rd(dx32);
                for (int64_t i = 0; i < n; i++) f[i] -= 1;
                CHECK_ALLCLOSE(f, g, n, 1e-5, 1e-4);
                free(f);
                rel(x32, y32, dy32, dx32, NULL, NULL);
            });
            free(g);
            rel(tx, ty, dy, dx, NULL, NULL);
        }
    free(x), free(R), free(ref);
}

TEST(softmax_strided_scalar_and_bad_arguments) {
    /* a transposed input gives the same as its contiguous copy */
    int64_t dims[2] = {6, 4}, st[2] = {1, 6};
    double buf[24], xc[24];
    seed(5);
    for (int i = 0; i < 24; i++) buf[i] = urand(-3, 3);
    for (int r = 0; r < 6; r++)
        for (int j = 0; j < 4; j++) xc[r * 4 + j] = buf[j * 6 + r];
    tfc_tensor *xs = NULL;
    CHECK_OK(tfc_tensor_wrap(buf, dims, st, 2, TFC_DTYPE_F64, NULL, NULL, &xs));
    tfc_tensor *y = mk(TFC_DTYPE_F64, dims, 2, NULL);
    CHECK_OK(tfc_softmax_forward(xs, 1, 0, y));
    double ref[24];
    ref_softmax(xc, 6, 4, 1, 0, ref);
    double *got = rd(y);
    CHECK_ALLCLOSE(got, ref, 24, 1e-15, 1e-14);
    free(got);
    /* 0-d: softmax of one value is 1, log_softmax 0 */
    double v = 3.5;
    tfc_tensor *s = mk(TFC_DTYPE_F64, NULL, 0, &v), *sy = mk(TFC_DTYPE_F64, NULL, 0, NULL);
    CHECK_OK(tfc_softmax_forward(s, -1, 0, sy));
    CHECK(*(double *)tfc_tensor_data(sy) == 1);
    CHECK_OK(tfc_softmax_forward(s, 0, 1, sy));
    CHECK(*(double *)tfc_tensor_data(sy) == 0);
    tfc_tensor *y32 = mk(TFC_DTYPE_F32, dims, 2, NULL), *yw = mk(TFC_DTYPE_F64, (int64_t[]){4, 6}, 2, NULL);
    CHECK_ERR(tfc_softmax_forward(xs, 2, 0, y), TFC_ERR_INVALID_ARG,
              "tfc_softmax_forward: dim 2 is out of range for x [6,4]");
    CHECK_ERR(tfc_softmax_forward(xs, -3, 0, y), TFC_ERR_INVALID_ARG, "dim -3");
    CHECK_ERR(tfc_softmax_forward(xs, 1, 2, y), TFC_ERR_INVALID_ARG, "log is 2");
    CHECK_ERR(tfc_softmax_forward(xs, 1, 0, y32), TFC_ERR_DTYPE, "output y is f32 [6,4], must be f64");
    CHECK_ERR(tfc_softmax_forward(xs, 1, 0, yw), TFC_ERR_SHAPE, "output y is [4,6], must be [6,4] (x is [6,4])");
    CHECK_ERR(tfc_softmax_backward(y32, y, 1, 0, yw, 0), TFC_ERR_DTYPE,
              "tfc_softmax_backward: dy is f32 [6,4], must be f64 like y [6,4]");
    CHECK_ERR(tfc_softmax_backward(y, y, 1, 0, NULL, 0), TFC_ERR_INVALID_ARG, "dx is NULL");
    CHECK_ERR(tfc_softmax_backward(y, y, 1, 0, y, 0), TFC_ERR_INVALID_ARG, "overlaps");
    rel(xs, y, s, sy, y32, yw);
}

/* ---- GELU ------------------------------------------------------------------------- */

static double ref_gelu(double x, int approximate) {
    if (approximate) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

struct gelu_ctx {
    int64_t n;
    int approximate;
    double *x;
};
static void gelu_eval(void *p, double *out) {
    struct gelu_ctx *k = p;
    tfc_tensor *x = mk(TFC_DTYPE_F64, &k->n, 1, k->x), *y = mk(TFC_DTYPE_F64, &k->n, 1, NULL);
    if (tfc_gelu_forward(x, k->approximate, y) != TFC_OK) abort();
    memcpy(out, tfc_tensor_data(y), sizeof(double) * k->n);
    rel(x, y, NULL, NULL, NULL, NULL);
}

TEST(gelu_forward_backward) {
    int64_t n = 3001;
    seed(6);
    double *x = rand_vec(n, -9, 9), *R = rand_vec(n, -1, 1), *ref = malloc(sizeof(double) * n);
    x[0] = 0, x[1] = -30, x[2] = 30, x[3] = 1e-3, x[4] = -5;
    for (int approximate = 0; approximate < 2; approximate++) {
        for (int64_t i = 0; i < n; i++) ref[i] = ref_gelu(x[i], approximate);
        tfc_tensor *tx = mk(TFC_DTYPE_F64, &n, 1, x), *ty = mk(TFC_DTYPE_F64, &n, 1, NULL);
        CHECK_OK(tfc_gelu_forward(tx, approximate, ty));
        double *got = rd(ty);
        CHECK_ALLCLOSE(got, ref, n, 1e-15, 1e-13);
        free(got);
        FOR_BOTH_F32_PATHS({
            tfc_tensor *x32 = mk(TFC_DTYPE_F32, &n, 1, x), *y32 = mk(TFC_DTYPE_F32, &n, 1, NULL);
            CHECK_OK(tfc_gelu_forward(x32, approximate, y32));
            double *g32 = rd(y32), *r32 = malloc(sizeof(double) * n);
            for (int64_t i = 0; i < n; i++) r32[i] = ref_gelu((float)x[i], approximate);
            CHECK_ALLCLOSE(g32, r32, n, 1e-7, 2e-6);
            free(g32), free(r32);
            rel(x32, y32, NULL, NULL, NULL, NULL);
        });
        /* backward */
        tfc_tensor *dy = mk(TFC_DTYPE_F64, &n, 1, R), *dx = mk(TFC_DTYPE_F64, &n, 1, NULL);
        CHECK_OK(tfc_gelu_backward(dy, tx, approximate, dx, 0));
        double *g = rd(dx);
        struct gelu_ctx k = {200, approximate, x};
        CHECK_GRAD(approximate ? "gelu tanh" : "gelu erf", gradcheck(gelu_eval, &k, x, 200, g, R, 200));
        FOR_BOTH_F32_PATHS({
            tfc_tensor *x32 = mk(TFC_DTYPE_F32, &n, 1, x), *dy32 = mk(TFC_DTYPE_F32, &n, 1, R);
            tfc_tensor *dx32 = mk(TFC_DTYPE_F32, &n, 1, NULL), *dy64 = mk(TFC_DTYPE_F64, &n, 1, NULL);
            tfc_tensor *x64 = mk(TFC_DTYPE_F64, &n, 1, NULL), *dx64 = mk(TFC_DTYPE_F64, &n, 1, NULL);
            /* reference from f64 on the f32-rounded inputs */
            CHECK_OK(tfc_tensor_copy_from(x64, x32));
            CHECK_OK(tfc_tensor_copy_from(dy64, dy32));
            CHECK_OK(tfc_gelu_backward(dy64, x64, approximate, dx64, 0));
            CHECK_OK(tfc_tensor_fill(dx32, 2));
            CHECK_OK(tfc_gelu_backward(dy32, x32, approximate, dx32, TFC_GRAD_ACCUMULATE));
            double *f = rd(dx32), *r64 = rd(dx64);
            for (int64_t i = 0; i < n; i++) f[i] -= 2;
            CHECK_ALLCLOSE(f, r64, n, 1e-6, 1e-5);
            free(f), free(r64);
            rel(x32, dy32, dx32, dy64, x64, dx64);
        });
        free(g);
        rel(tx, ty, dy, dx, NULL, NULL);
    }
    int64_t d3[1] = {3};
    tfc_tensor *a = mk(TFC_DTYPE_F64, &n, 1, NULL), *b = mk(TFC_DTYPE_F64, d3, 1, NULL);
    tfc_tensor *c = mk(TFC_DTYPE_I64, &n, 1, NULL);
    CHECK_ERR(tfc_gelu_forward(a, 2, b), TFC_ERR_INVALID_ARG, "tfc_gelu_forward: approximate is 2");
    CHECK_ERR(tfc_gelu_forward(a, 0, b), TFC_ERR_SHAPE, "tfc_gelu_forward: output y is [3], must be [3001]");
    CHECK_ERR(tfc_gelu_forward(c, 0, a), TFC_ERR_DTYPE, "x is i64 [3001]; only f32 and f64");
    CHECK_ERR(tfc_gelu_backward(b, a, 0, a, 0), TFC_ERR_SHAPE, "tfc_gelu_backward: dy is [3], must be [3001]");
    CHECK_ERR(tfc_gelu_backward(a, a, 0, NULL, 0), TFC_ERR_INVALID_ARG, "dx is NULL");
    rel(a, b, c, NULL, NULL, NULL);
    free(x), free(R), free(ref);
}

/* ---- cross-entropy ---------------------------------------------------------------- */

static double ref_cross_entropy(const double *x, const int64_t *t, int64_t n, int64_t c, int64_t ignore, double *lse) {
    double sum = 0;
    int64_t nv = 0;
    for (int64_t r = 0; r < n; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < c; j++) m = fmax(m, x[r * c + j]);
        for (int64_t j = 0; j < c; j++) s += exp(x[r * c + j] - m);
        lse[r] = m + log(s);
        if (t[r] == ignore) continue;
        sum += lse[r] - x[r * c + t[r]];
        nv++;
    }
    return sum / (double)nv;
}

struct ce_ctx {
    int64_t n, c, ignore;
    double *x, *t;
};
static void ce_eval(void *p, double *out) {
    struct ce_ctx *k = p;
    int64_t dims[2] = {k->n, k->c};
    tfc_tensor *x = mk(TFC_DTYPE_F64, dims, 2, k->x), *t = mk(TFC_DTYPE_I64, &k->n, 1, k->t);
    tfc_tensor *loss = mk(TFC_DTYPE_F64, NULL, 0, NULL);
    if (tfc_cross_entropy_forward(x, t, k->ignore, loss, NULL) != TFC_OK) abort();
    out[0] = *(double *)tfc_tensor_data(loss);
    rel(x, t, loss, NULL, NULL, NULL);
}

TEST(cross_entropy_forward_backward_with_ignore_index) {
    enum { N = 37, C = 11 };
    int64_t dims[2] = {N, C}, n = N;
    seed(7);
    double *x = rand_vec(N * C, -5, 5), td[N];
    int64_t ti[N];
    for (int i = 0; i < N; i++) ti[i] = (int64_t)urand(0, C);
    ti[3] = ti[10] = ti[11] = -100;
    for (int i = 0; i < N; i++) td[i] = (double)ti[i];
    double rlse[N];
    double rloss = ref_cross_entropy(x, ti, N, C, -100, rlse);
    for (int t = 0; t < 2; t++)
        for (int it = 0; it < 2; it++) {
            tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
            double tol = t ? 2e-6 : 1e-14;
            FOR_BOTH_F32_PATHS({
                tfc_tensor *tx = mk(dt, dims, 2, x), *tt = mk(it ? TFC_DTYPE_I32 : TFC_DTYPE_I64, &n, 1, td);
                tfc_tensor *loss = mk(dt, NULL, 0, NULL), *lse = mk(dt, &n, 1, NULL);
                CHECK_OK(tfc_cross_entropy_forward(tx, tt, -100, loss, lse));
                double *gl = rd(loss), *gs = rd(lse);
                CHECK_ALLCLOSE(gl, &rloss, 1, tol, tol);
                CHECK_ALLCLOSE(gs, rlse, N, tol, tol);
                free(gl), free(gs);
                rel(tx, tt, loss, lse, NULL, NULL);
            });
        }
    /* backward: gradcheck with dloss = 1, then dloss = 2.5 scales, with and without lse */
    tfc_tensor *tx = mk(TFC_DTYPE_F64, dims, 2, x), *tt = mk(TFC_DTYPE_I64, &n, 1, td);
    tfc_tensor *loss = mk(TFC_DTYPE_F64, NULL, 0, NULL), *lse = mk(TFC_DTYPE_F64, &n, 1, NULL);
    tfc_tensor *dl = mk(TFC_DTYPE_F64, NULL, 0, (double[]){1}), *dx = mk(TFC_DTYPE_F64, dims, 2, NULL);
    CHECK_OK(tfc_cross_entropy_forward(tx, tt, -100, loss, lse));
    CHECK_OK(tfc_cross_entropy_backward(dl, tx, tt, lse, -100, dx, 0));
    double *g = rd(dx), one = 1, ref[N * C];
    /* hand-derived: (softmax − onehot) / n_valid from the reference lse */
    for (int r = 0; r < N; r++)
        for (int j = 0; j < C; j++)
            ref[r * C + j] = ti[r] == -100 ? 0 : (exp(x[r * C + j] - rlse[r]) - (j == ti[r])) / (N - 3);
    CHECK_ALLCLOSE(g, ref, N * C, 1e-15, 1e-12);
    {
        /* Finite differences need gradients well above the f64 roundoff of the
         * loss (~1e-10 after dividing by 2·eps): a small problem, mild logits. */
        double xs[6 * 5], ts[6] = {4, 0, -100, 2, 2, 1};
        int64_t sd[2] = {6, 5}, sn = 6;
        for (int i = 0; i < 30; i++) xs[i] = urand(-2, 2);
        tfc_tensor *sx = mk(TFC_DTYPE_F64, sd, 2, xs), *st = mk(TFC_DTYPE_I64, &sn, 1, ts);
        tfc_tensor *sdx = mk(TFC_DTYPE_F64, sd, 2, NULL);
        CHECK_OK(tfc_cross_entropy_backward(dl, sx, st, NULL, -100, sdx, 0));
        double *sg = rd(sdx);
        struct ce_ctx k = {6, 5, -100, xs, ts};
        CHECK_GRAD("cross_entropy dlogits", gradcheck(ce_eval, &k, xs, 30, sg, &one, 1));
        free(sg);
        rel(sx, st, sdx, NULL, NULL, NULL);
    }
    for (int j = 0; j < C; j++) CHECK(g[3 * C + j] == 0 && g[11 * C + j] == 0);
    tfc_tensor *dl2 = mk(TFC_DTYPE_F64, (int64_t[]){1}, 1, (double[]){2.5});
    CHECK_OK(tfc_tensor_fill(dx, 1));
    CHECK_OK(tfc_cross_entropy_backward(dl2, tx, tt, NULL, -100, dx, TFC_GRAD_ACCUMULATE));
    double *g2 = rd(dx);
    for (int i = 0; i < N * C; i++) CHECK_CLOSE(g2[i], 1 + 2.5 * g[i], 1e-14);
    FOR_BOTH_F32_PATHS({
        tfc_tensor *x32 = mk(TFC_DTYPE_F32, dims, 2, x), *dl32 = mk(TFC_DTYPE_F32, NULL, 0, (double[]){1});
        tfc_tensor *dx32 = mk(TFC_DTYPE_F32, dims, 2, NULL), *t32 = mk(TFC_DTYPE_I32, &n, 1, td);
        CHECK_OK(tfc_cross_entropy_backward(dl32, x32, t32, NULL, -100, dx32, 0));
        double *f = rd(dx32);
        CHECK_ALLCLOSE(f, g, N * C, 1e-7, 1e-5);
        free(f);
        rel(x32, dl32, dx32, t32, NULL, NULL);
    });
    /* every row ignored: NaN loss (like PyTorch), zero gradient */
    tfc_tensor *tall = mk(TFC_DTYPE_I64, &n, 1, NULL);
    CHECK_OK(tfc_tensor_fill(tall, 5));
    CHECK_OK(tfc_cross_entropy_forward(tx, tall, 5, loss, NULL));
    CHECK(isnan(*(double *)tfc_tensor_data(loss)));
    CHECK_OK(tfc_cross_entropy_backward(dl, tx, tall, NULL, 5, dx, 0));
    double *g0 = rd(dx);
    for (int i = 0; i < N * C; i++) CHECK(g0[i] == 0);
    free(g), free(g2), free(g0), free(x);
    rel(tx, tt, loss, lse, dl, dx);
    rel(dl2, tall, NULL, NULL, NULL, NULL);
}

TEST(cross_entropy_long_rows_chunked_lse) {
    /* rows longer than one chunk of the one-pass log-sum-exp: the max in a
     * later chunk, a chunk of −∞, a huge range */
    enum { N = 4, C = 5000 };
    int64_t dims[2] = {N, C}, n = N;
    seed(9);
    double *x = rand_vec(N * C, -3, 3), td[N] = {0, 4999, 100, 17};
    int64_t ti[N] = {0, 4999, 100, 17};
    x[1 * C + 4500] = 40;                                       /* row 1: max in the last chunk */
    for (int j = 2048; j < 4096; j++) x[2 * C + j] = -INFINITY; /* row 2: a whole chunk masked */
    x[3 * C + 10] = -80, x[3 * C + 3000] = 60;                  /* row 3: wide range */
    double rlse[N], rloss = ref_cross_entropy(x, ti, N, C, -100, rlse);
    for (int t = 0; t < 2; t++) {
        tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
        double tol = t ? 2e-6 : 1e-14;
        FOR_BOTH_F32_PATHS({
            tfc_tensor *tx = mk(dt, dims, 2, x), *tt = mk(TFC_DTYPE_I64, &n, 1, td);
            tfc_tensor *loss = mk(dt, NULL, 0, NULL), *lse = mk(dt, &n, 1, NULL);
            CHECK_OK(tfc_cross_entropy_forward(tx, tt, -100, loss, lse));
            double *gl = rd(loss), *gs = rd(lse);
            CHECK_ALLCLOSE(gl, &rloss, 1, tol, tol);
            CHECK_ALLCLOSE(gs, rlse, N, tol, tol);
            free(gl), free(gs);
            /* backward recomputing lse (chunked) matches the one given lse */
            tfc_tensor *dl = mk(dt, NULL, 0, (double[]){1}), *d1 = mk(dt, dims, 2, NULL), *d2 = mk(dt, dims, 2, NULL);
            CHECK_OK(tfc_cross_entropy_backward(dl, tx, tt, lse, -100, d1, 0));
            CHECK_OK(tfc_cross_entropy_backward(dl, tx, tt, NULL, -100, d2, 0));
            double *g1 = rd(d1), *g2 = rd(d2);
            CHECK_ALLCLOSE(g2, g1, N * C, 1e-12, t ? 1e-5 : 1e-12);
            free(g1), free(g2);
            rel(tx, tt, loss, lse, dl, d1);
            rel(d2, NULL, NULL, NULL, NULL, NULL);
        });
    }
    free(x);
}

TEST(cross_entropy_bad_arguments) {
    int64_t d2[2] = {4, 3}, n4[1] = {4}, n5[1] = {5}, d1[1] = {1};
    tfc_tensor *x = mk(TFC_DTYPE_F32, d2, 2, NULL), *t = mk(TFC_DTYPE_I64, n4, 1, (double[]){0, 2, -100, 1});
    tfc_tensor *bad = mk(TFC_DTYPE_I32, n4, 1, (double[]){0, 2, 3, 1}),
               *neg = mk(TFC_DTYPE_I64, n4, 1, (double[]){0, -1, 0, 0});
    tfc_tensor *loss = mk(TFC_DTYPE_F32, NULL, 0, NULL), *loss1 = mk(TFC_DTYPE_F32, d1, 1, NULL);
    tfc_tensor *t5 = mk(TFC_DTYPE_I64, n5, 1, NULL), *tf = mk(TFC_DTYPE_F32, n4, 1, NULL);
    tfc_tensor *dx = mk(TFC_DTYPE_F32, d2, 2, NULL), *dl64 = mk(TFC_DTYPE_F64, NULL, 0, NULL);
    tfc_tensor *lse5 = mk(TFC_DTYPE_F32, n5, 1, NULL);
    CHECK_OK(tfc_cross_entropy_forward(x, t, -100, loss, NULL));
    CHECK_ERR(tfc_cross_entropy_forward(x, bad, -100, loss, NULL), TFC_ERR_INVALID_ARG,
              "tfc_cross_entropy_forward: targets[2] is 3, outside [0, 3)");
    CHECK_ERR(tfc_cross_entropy_forward(x, neg, -100, loss, NULL), TFC_ERR_INVALID_ARG, "targets[1] is -1");
    CHECK_ERR(tfc_cross_entropy_forward(x, t, -100, loss1, NULL), TFC_ERR_SHAPE, "output loss is [1], must be []");
    CHECK_ERR(tfc_cross_entropy_forward(x, t5, -100, loss, NULL), TFC_ERR_SHAPE,
              "targets is [5], must be [4] (logits is [4,3])");
    CHECK_ERR(tfc_cross_entropy_forward(x, tf, -100, loss, NULL), TFC_ERR_DTYPE,
              "targets is f32 [4]; indices must be i32 or i64");
    CHECK_ERR(tfc_cross_entropy_forward(t, t, -100, loss, NULL), TFC_ERR_DTYPE, "logits is i64");
    CHECK_ERR(tfc_cross_entropy_forward(x, t, -100, loss, lse5), TFC_ERR_SHAPE, "output lse is [5], must be [4]");
    CHECK_ERR(tfc_cross_entropy_forward(x, t, -100, NULL, NULL), TFC_ERR_INVALID_ARG, "loss is NULL");
    CHECK_ERR(tfc_cross_entropy_forward(lse5, t, -100, loss, NULL), TFC_ERR_SHAPE, "logits is [5], must be [N, C]");
    CHECK_ERR(tfc_cross_entropy_backward(dl64, x, t, NULL, -100, dx, 0), TFC_ERR_DTYPE,
              "tfc_cross_entropy_backward: dloss is f64 [], must be f32 like logits [4,3]");
    CHECK_ERR(tfc_cross_entropy_backward(lse5, x, t, NULL, -100, dx, 0), TFC_ERR_SHAPE,
              "dloss is [5], must hold one element");
    CHECK_ERR(tfc_cross_entropy_backward(loss, x, bad, NULL, -100, dx, 0), TFC_ERR_INVALID_ARG, "targets[2] is 3");
    CHECK_ERR(tfc_cross_entropy_backward(loss, x, t, NULL, -100, x, 0), TFC_ERR_INVALID_ARG,
              "output dlogits [4,3] overlaps logits [4,3]");
    rel(x, t, bad, neg, loss, loss1);
    rel(t5, tf, dx, dl64, lse5, NULL);
}

/* ---- embedding -------------------------------------------------------------------- */

TEST(embedding_forward_backward_duplicates_deterministic) {
    enum { V = 13, C = 40, P = 300 };
    int64_t tdims[2] = {V, C}, idims[2] = {20, 15}, odims[3] = {20, 15, C};
    seed(8);
    double *table = rand_vec(V * C, -1, 1), *R = rand_vec(P * C, -1, 1), ids[P];
    for (int p = 0; p < P; p++) ids[p] = (double)(int)urand(0, 5); /* many duplicates, rows 5.. unused */
    ids[7] = V - 1;
    for (int t = 0; t < 2; t++)
        for (int it = 0; it < 2; it++) {
            tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
            tfc_tensor *tt = mk(dt, tdims, 2, table), *ti = mk(it ? TFC_DTYPE_I32 : TFC_DTYPE_I64, idims, 2, ids);
            tfc_tensor *out = mk(dt, odims, 3, NULL), *dout = mk(dt, odims, 3, R), *dtab = mk(dt, tdims, 2, NULL);
            CHECK_OK(tfc_embedding_forward(tt, ti, out));
            double *o = rd(out);
            int ok = 1;
            for (int p = 0; p < P; p++)
                for (int j = 0; j < C; j++)
                    ok &= o[p * C + j] == (double)(t ? (float)table[(int)ids[p] * C + j] : table[(int)ids[p] * C + j]);
            CHECK(ok);
            /* scatter-add against a naive loop (f64 sums), accumulate onto 0.5 */
            CHECK_OK(tfc_tensor_fill(dtab, 0.5));
            CHECK_OK(tfc_embedding_backward(dout, ti, dtab, TFC_GRAD_ACCUMULATE));
            double *g = rd(dtab), ref[V * C];
            for (int i = 0; i < V * C; i++) ref[i] = 0.5;
            for (int p = 0; p < P; p++)
                for (int j = 0; j < C; j++) ref[(int)ids[p] * C + j] += t ? (float)R[p * C + j] : R[p * C + j];
            CHECK_ALLCLOSE(g, ref, V * C, t ? 1e-5 : 1e-14, t ? 1e-5 : 1e-14);
            /* without the flag, unused rows are 0; 1 and 2 threads give the same bits */
            int32_t nt = tfc_get_num_threads();
            CHECK_OK(tfc_set_num_threads(1));
            CHECK_OK(tfc_embedding_backward(dout, ti, dtab, 0));
            double *g1 = rd(dtab);
            CHECK_OK(tfc_set_num_threads(2));
            CHECK_OK(tfc_embedding_backward(dout, ti, dtab, 0));
            double *g2 = rd(dtab);
            CHECK_OK(tfc_set_num_threads(nt));
            CHECK(memcmp(g1, g2, sizeof(double) * V * C) == 0);
            for (int j = 0; j < C; j++) CHECK(g1[6 * C + j] == 0);
            free(o), free(g), free(g1), free(g2);
            rel(tt, ti, out, dout, dtab, NULL);
        }
    /* bad input */
    tfc_tensor *tt = mk(TFC_DTYPE_F32, tdims, 2, table), *out = mk(TFC_DTYPE_F32, (int64_t[]){3, C}, 2, NULL);
    tfc_tensor *bad = mk(TFC_DTYPE_I64, (int64_t[]){3}, 1, (double[]){1, 13, 2});
    tfc_tensor *neg = mk(TFC_DTYPE_I32, (int64_t[]){3}, 1, (double[]){-2, 0, 2});
    tfc_tensor *ok = mk(TFC_DTYPE_I32, (int64_t[]){3}, 1, (double[]){1, 0, 2});
    tfc_tensor *outw = mk(TFC_DTYPE_F32, (int64_t[]){3, C + 1}, 2, NULL),
               *fids = mk(TFC_DTYPE_F32, (int64_t[]){3}, 1, NULL);
    CHECK_OK(tfc_tensor_fill(out, 9));
    CHECK_ERR(tfc_embedding_forward(tt, bad, out), TFC_ERR_INVALID_ARG,
              "tfc_embedding_forward: ids [3] at flat position 1 is 13, outside [0, 13)");
    double *untouched = rd(out);
    CHECK(untouched[0] == 9 && untouched[3 * C - 1] == 9);
    free(untouched);
    CHECK_ERR(tfc_embedding_forward(tt, neg, out), TFC_ERR_INVALID_ARG, "position 0 is -2");
    CHECK_ERR(tfc_embedding_forward(tt, ok, outw), TFC_ERR_SHAPE, "output out is [3,41], must be [3,40]");
    CHECK_ERR(tfc_embedding_forward(tt, fids, out), TFC_ERR_DTYPE, "ids is f32 [3]; indices must be i32 or i64");
    CHECK_ERR(tfc_embedding_forward(ok, ok, out), TFC_ERR_DTYPE, "table is i32");
    CHECK_ERR(tfc_embedding_backward(out, bad, tt, 0), TFC_ERR_INVALID_ARG, "tfc_embedding_backward: ids [3]");
    CHECK_ERR(tfc_embedding_backward(outw, ok, tt, 0), TFC_ERR_SHAPE, "dout is [3,41], must be [3,40]");
    CHECK_ERR(tfc_embedding_backward(out, ok, NULL, 0), TFC_ERR_INVALID_ARG, "dtable is NULL");
    free(table), free(R);
    rel(tt, out, bad, neg, ok, outw);
    rel(fids, NULL, NULL, NULL, NULL, NULL);
}

/* ---- attention ------------------------------------------------------------------------ */

typedef struct att_cfg {
    int64_t B, H, T, S, D, Dv;
    int causal;
} att_cfg;

/* Naive attention with the whole score row: query i sees key j iff !causal or j <= i + S − T. */
static void ref_attention(const att_cfg *c, double scale, const double *q, const double *k, const double *v,
                          double *out, double *lse) {
    double *s = malloc(sizeof(double) * (size_t)(c->S > 0 ? c->S : 1));
    for (int64_t bh = 0; bh < c->B * c->H; bh++)
        for (int64_t i = 0; i < c->T; i++) {
            const double *qi = q + (bh * c->T + i) * c->D;
            double *oi = out + (bh * c->T + i) * c->Dv;
            int64_t nvis = 0;
            double m = -INFINITY;
            for (int64_t j = 0; j < c->S; j++) {
                if (c->causal && j > i + c->S - c->T) break;
                double d = 0;
                for (int64_t e = 0; e < c->D; e++) d += qi[e] * k[(bh * c->S + j) * c->D + e];
                s[j] = scale * d;
                m = fmax(m, s[j]);
                nvis++;
            }
            for (int64_t e = 0; e < c->Dv; e++) oi[e] = 0;
            if (nvis == 0) {
                lse[bh * c->T + i] = -INFINITY;
                continue;
            }
            double z = 0;
            for (int64_t j = 0; j < nvis; j++) z += exp(s[j] - m);
            double l = m + log(z);
            lse[bh * c->T + i] = l;
            for (int64_t j = 0; j < nvis; j++)
                for (int64_t e = 0; e < c->Dv; e++) oi[e] += exp(s[j] - l) * v[(bh * c->S + j) * c->Dv + e];
        }
    free(s);
}

typedef struct att_data {
    att_cfg c;
    double scale;
    double *q, *k, *v, *R;
    int64_t qd[4], kd[4], vd[4], od[4], nq, nk, nv, no;
} att_data;

static void att_make(att_data *a, att_cfg c, uint64_t s) {
    a->c = c;
    a->scale = 1 / sqrt((double)c.D);
    int64_t qd[4] = {c.B, c.H, c.T, c.D}, kd[4] = {c.B, c.H, c.S, c.D}, vd[4] = {c.B, c.H, c.S, c.Dv},
            od[4] = {c.B, c.H, c.T, c.Dv};
    memcpy(a->qd, qd, sizeof qd), memcpy(a->kd, kd, sizeof kd), memcpy(a->vd, vd, sizeof vd);
    memcpy(a->od, od, sizeof od);
    a->nq = prod(qd, 4), a->nk = prod(kd, 4), a->nv = prod(vd, 4), a->no = prod(od, 4);
    seed(s);
    a->q = rand_vec(a->nq, -1.5, 1.5), a->k = rand_vec(a->nk, -1.5, 1.5), a->v = rand_vec(a->nv, -1, 1);
    a->R = rand_vec(a->no, -1, 1);
}
static void att_free(att_data *a) { free(a->q), free(a->k), free(a->v), free(a->R); }

static void att_eval(void *p, double *out) {
    att_data *a = p;
    tfc_tensor *q = mk(TFC_DTYPE_F64, a->qd, 4, a->q), *k = mk(TFC_DTYPE_F64, a->kd, 4, a->k);
    tfc_tensor *v = mk(TFC_DTYPE_F64, a->vd, 4, a->v), *o = mk(TFC_DTYPE_F64, a->od, 4, NULL);
    if (tfc_attention_forward(q, k, v, a->c.causal, a->scale, o, NULL) != TFC_OK) abort();
    memcpy(out, tfc_tensor_data(o), sizeof(double) * a->no);
    rel(q, k, v, o, NULL, NULL);
}

/* Forward (out, lse) and backward (dq, dk, dv with dout = R) of a, in dtype dt. */
static void att_run(const att_data *a, tfc_dtype dt, double **out, double **lse, double **dq, double **dk,
                    double **dv) {
    tfc_tensor *q = mk(dt, a->qd, 4, a->q), *k = mk(dt, a->kd, 4, a->k), *v = mk(dt, a->vd, 4, a->v);
    tfc_tensor *o = mk(dt, a->od, 4, NULL), *l = mk(dt, a->od, 3, NULL), *go = mk(dt, a->od, 4, a->R);
    tfc_tensor *gq = mk(dt, a->qd, 4, NULL), *gk = mk(dt, a->kd, 4, NULL), *gv = mk(dt, a->vd, 4, NULL);
    CHECK_OK(tfc_attention_forward(q, k, v, a->c.causal, a->scale, o, l));
    CHECK_OK(tfc_attention_backward(go, q, k, v, o, l, a->c.causal, a->scale, gq, gk, gv, 0));
    *out = rd(o), *lse = rd(l), *dq = rd(gq), *dk = rd(gk), *dv = rd(gv);
    rel(q, k, v, o, l, go);
    rel(gq, gk, gv, NULL, NULL, NULL);
}

static const att_cfg att_cfgs[] = {
    {2, 3, 37, 37, 8, 8, 0},     {2, 3, 37, 37, 8, 8, 1},   /* square, both masks */
    {1, 2, 5, 70, 16, 12, 1},    {1, 2, 1, 130, 16, 16, 1}, /* few queries, many keys (KV cache) */
    {1, 2, 70, 20, 5, 3, 1},     {1, 1, 70, 20, 5, 3, 0},   /* more queries than keys; causal rows with no key */
    {1, 2, 100, 130, 64, 64, 1}, {2, 1, 33, 65, 7, 9, 0},   /* several tiles each way, odd dims */
};

TEST(attention_forward_matches_reference_f64_and_f32) {
    for (size_t ci = 0; ci < sizeof att_cfgs / sizeof att_cfgs[0]; ci++) {
        att_data a;
        att_make(&a, att_cfgs[ci], 100 + ci);
        double *ro = malloc(sizeof(double) * a.no), *rl = malloc(sizeof(double) * a.no / a.c.Dv);
        ref_attention(&a.c, a.scale, a.q, a.k, a.v, ro, rl);
        double *o, *l, *dq, *dk, *dv;
        att_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
        CHECK_ALLCLOSE(o, ro, a.no, 1e-14, 1e-12);
        for (int64_t i = 0; i < a.no / a.c.Dv; i++)
            CHECK(isinf(rl[i]) ? l[i] == rl[i] : fabs(l[i] - rl[i]) <= 1e-12 * (1 + fabs(rl[i])));
        FOR_BOTH_F32_PATHS({
            double *o32, *l32, *dq32, *dk32, *dv32;
            att_run(&a, TFC_DTYPE_F32, &o32, &l32, &dq32, &dk32, &dv32);
            CHECK_ALLCLOSE(o32, ro, a.no, 1e-5, 1e-4);
            CHECK_ALLCLOSE(dq32, dq, a.nq, 1e-5, 1e-3);
            CHECK_ALLCLOSE(dk32, dk, a.nk, 1e-5, 1e-3);
            CHECK_ALLCLOSE(dv32, dv, a.nv, 1e-5, 1e-3);
            for (int64_t i = 0; i < a.no / a.c.Dv; i++)
                CHECK(isinf(rl[i]) ? l32[i] == rl[i] : fabs(l32[i] - rl[i]) <= 1e-5 * (1 + fabs(rl[i])));
            free(o32), free(l32), free(dq32), free(dk32), free(dv32);
        });
        free(o), free(l), free(dq), free(dk), free(dv), free(ro), free(rl);
        att_free(&a);
    }
}

TEST(attention_backward_gradcheck) {
    static const att_cfg cfgs[] = {
        {1, 2, 40, 70, 3, 2, 1}, /* causal, T < S, several key tiles, two query tiles */
        {1, 1, 9, 6, 3, 4, 1},   /* causal, T > S: rows 0..2 see nothing */
        {2, 1, 7, 69, 2, 3, 0},  /* full attention over two key tiles */
    };
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        att_data a;
        att_make(&a, cfgs[ci], 200 + ci);
        double *o, *l, *dq, *dk, *dv;
        att_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
        CHECK_GRAD("attention dq", gradcheck(att_eval, &a, a.q, a.nq, dq, a.R, a.no));
        CHECK_GRAD("attention dk", gradcheck(att_eval, &a, a.k, a.nk, dk, a.R, a.no));
        CHECK_GRAD("attention dv", gradcheck(att_eval, &a, a.v, a.nv, dv, a.R, a.no));
        free(o), free(l), free(dq), free(dk), free(dv);
        att_free(&a);
    }
}

TEST(attention_strided_inputs_read_in_place_or_compacted) {
    att_cfg c = {2, 3, 11, 13, 8, 5, 1};
    att_data a;
    att_make(&a, c, 300);
    double *o, *l, *dq, *dk, *dv;
    att_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
    /* q and dout live as [B,T,H,D] (permuted view, unit last stride: read in place); k as
     * [B,H,D,S] (last stride S: compacted); v as [B,S,H,Dv]. */
    int64_t B = c.B, H = c.H, T = c.T, S = c.S, D = c.D, Dv = c.Dv;
    double *qb = malloc(sizeof(double) * a.nq), *kb = malloc(sizeof(double) * a.nk);
    double *vb = malloc(sizeof(double) * a.nv), *gb = malloc(sizeof(double) * a.no);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < T; t++) {
                for (int64_t e = 0; e < D; e++) qb[((b * T + t) * H + h) * D + e] = a.q[((b * H + h) * T + t) * D + e];
                for (int64_t e = 0; e < Dv; e++)
                    gb[((b * T + t) * H + h) * Dv + e] = a.R[((b * H + h) * T + t) * Dv + e];
            }
            for (int64_t s = 0; s < S; s++) {
                for (int64_t e = 0; e < D; e++) kb[((b * H + h) * D + e) * S + s] = a.k[((b * H + h) * S + s) * D + e];
                for (int64_t e = 0; e < Dv; e++)
                    vb[((b * S + s) * H + h) * Dv + e] = a.v[((b * H + h) * S + s) * Dv + e];
            }
        }
    int64_t qs[4] = {T * H * D, D, H * D, 1}, ks[4] = {H * D * S, D * S, 1, S}, vs[4] = {S * H * Dv, Dv, H * Dv, 1},
            gs[4] = {T * H * Dv, Dv, H * Dv, 1};
    tfc_tensor *q = NULL, *k = NULL, *v = NULL, *go = NULL;
    CHECK_OK(tfc_tensor_wrap(qb, a.qd, qs, 4, TFC_DTYPE_F64, NULL, NULL, &q));
    CHECK_OK(tfc_tensor_wrap(kb, a.kd, ks, 4, TFC_DTYPE_F64, NULL, NULL, &k));
    CHECK_OK(tfc_tensor_wrap(vb, a.vd, vs, 4, TFC_DTYPE_F64, NULL, NULL, &v));
    CHECK_OK(tfc_tensor_wrap(gb, a.od, gs, 4, TFC_DTYPE_F64, NULL, NULL, &go));
    tfc_tensor *out = mk(TFC_DTYPE_F64, a.od, 4, NULL), *lse = mk(TFC_DTYPE_F64, a.od, 3, NULL);
    tfc_tensor *gq = mk(TFC_DTYPE_F64, a.qd, 4, NULL), *gk = mk(TFC_DTYPE_F64, a.kd, 4, NULL);
    tfc_tensor *gv = mk(TFC_DTYPE_F64, a.vd, 4, NULL);
    CHECK_OK(tfc_attention_forward(q, k, v, 1, a.scale, out, lse));
    CHECK_OK(tfc_attention_backward(go, q, k, v, out, lse, 1, a.scale, gq, gk, gv, 0));
    double *o2 = rd(out), *dq2 = rd(gq), *dk2 = rd(gk), *dv2 = rd(gv);
    CHECK(memcmp(o2, o, sizeof(double) * a.no) == 0);
    CHECK(memcmp(dq2, dq, sizeof(double) * a.nq) == 0);
    CHECK(memcmp(dk2, dk, sizeof(double) * a.nk) == 0);
    CHECK(memcmp(dv2, dv, sizeof(double) * a.nv) == 0);

    /* k and v expanded over heads (stride 0): every head attends to head 0's keys */
    int64_t ke[4] = {H * S * D, 0, D, 1}, ve[4] = {H * S * Dv, 0, Dv, 1};
    tfc_tensor *kx = NULL, *vx = NULL;
    CHECK_OK(tfc_tensor_wrap(a.k, a.kd, ke, 4, TFC_DTYPE_F64, NULL, NULL, &kx));
    CHECK_OK(tfc_tensor_wrap(a.v, a.vd, ve, 4, TFC_DTYPE_F64, NULL, NULL, &vx));
    tfc_tensor *qc = mk(TFC_DTYPE_F64, a.qd, 4, a.q);
    CHECK_OK(tfc_attention_forward(qc, kx, vx, 1, a.scale, out, lse));
    double *ke_vals = malloc(sizeof(double) * a.nk), *ve_vals = malloc(sizeof(double) * a.nv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            memcpy(ke_vals + (b * H + h) * S * D, a.k + b * H * S * D, sizeof(double) * S * D);
            memcpy(ve_vals + (b * H + h) * S * Dv, a.v + b * H * S * Dv, sizeof(double) * S * Dv);
        }
    double *ro = malloc(sizeof(double) * a.no), *rl = malloc(sizeof(double) * a.no / Dv), *o3 = rd(out);
    ref_attention(&c, a.scale, a.q, ke_vals, ve_vals, ro, rl);
    CHECK_ALLCLOSE(o3, ro, a.no, 1e-14, 1e-12);
    free(qb), free(kb), free(vb), free(gb), free(o2), free(dq2), free(dk2), free(dv2);
    free(ke_vals), free(ve_vals), free(ro), free(rl), free(o3);
    free(o), free(l), free(dq), free(dk), free(dv);
    rel(q, k, v, go, out, lse);
    rel(gq, gk, gv, kx, vx, qc);
    att_free(&a);
}

TEST(attention_null_grads_accumulate_and_thread_independence) {
    /* one head: with 2 threads the backward splits keys and queries over two passes */
    att_cfg c = {1, 1, 100, 150, 16, 8, 1};
    att_data a;
    att_make(&a, c, 400);
    tfc_tensor *q = mk(TFC_DTYPE_F32, a.qd, 4, a.q), *k = mk(TFC_DTYPE_F32, a.kd, 4, a.k);
    tfc_tensor *v = mk(TFC_DTYPE_F32, a.vd, 4, a.v), *o = mk(TFC_DTYPE_F32, a.od, 4, NULL);
    tfc_tensor *l = mk(TFC_DTYPE_F32, a.od, 3, NULL), *go = mk(TFC_DTYPE_F32, a.od, 4, a.R);
    tfc_tensor *g[2][3];
    int32_t nt = tfc_get_num_threads();
    for (int run = 0; run < 2; run++) {
        CHECK_OK(tfc_set_num_threads(run + 1));
        g[run][0] = mk(TFC_DTYPE_F32, a.qd, 4, NULL);
        g[run][1] = mk(TFC_DTYPE_F32, a.kd, 4, NULL);
        g[run][2] = mk(TFC_DTYPE_F32, a.vd, 4, NULL);
        CHECK_OK(tfc_attention_forward(q, k, v, 1, a.scale, o, l));
        CHECK_OK(tfc_attention_backward(go, q, k, v, o, l, 1, a.scale, g[run][0], g[run][1], g[run][2], 0));
    }
    CHECK_OK(tfc_set_num_threads(nt));
    CHECK(memcmp(tfc_tensor_data(g[0][0]), tfc_tensor_data(g[1][0]), sizeof(float) * a.nq) == 0);
    CHECK(memcmp(tfc_tensor_data(g[0][1]), tfc_tensor_data(g[1][1]), sizeof(float) * a.nk) == 0);
    CHECK(memcmp(tfc_tensor_data(g[0][2]), tfc_tensor_data(g[1][2]), sizeof(float) * a.nv) == 0);
    /* only dv asked for: same dv; then accumulate onto it doubles it */
    tfc_tensor *dv = mk(TFC_DTYPE_F32, a.vd, 4, NULL);
    CHECK_OK(tfc_attention_backward(go, q, k, v, o, l, 1, a.scale, NULL, NULL, dv, 0));
    CHECK(memcmp(tfc_tensor_data(dv), tfc_tensor_data(g[0][2]), sizeof(float) * a.nv) == 0);
    CHECK_OK(tfc_attention_backward(go, q, k, v, o, l, 1, a.scale, NULL, NULL, dv, TFC_GRAD_ACCUMULATE));
    double *d2 = rd(dv), *d1 = rd(g[0][2]);
    for (int64_t i = 0; i < a.nv; i++) d1[i] *= 2;
    CHECK_ALLCLOSE(d2, d1, a.nv, 1e-6, 1e-5);
    /* dq alone, accumulated onto 1 */
    tfc_tensor *dq = mk(TFC_DTYPE_F32, a.qd, 4, NULL);
    CHECK_OK(tfc_tensor_fill(dq, 1));
    CHECK_OK(tfc_attention_backward(go, q, k, v, o, l, 1, a.scale, dq, NULL, NULL, TFC_GRAD_ACCUMULATE));
    double *q2 = rd(dq), *q1 = rd(g[0][0]);
    for (int64_t i = 0; i < a.nq; i++) q1[i] += 1;
    CHECK_ALLCLOSE(q2, q1, a.nq, 1e-6, 1e-5);
    free(d1), free(d2), free(q1), free(q2);
    rel(q, k, v, o, l, go);
    rel(g[0][0], g[0][1], g[0][2], g[1][0], g[1][1], g[1][2]);
    rel(dv, dq, NULL, NULL, NULL, NULL);
    att_free(&a);
}

TEST(attention_bad_arguments) {
    int64_t qd[4] = {2, 3, 4, 8}, kd[4] = {2, 3, 5, 8}, vd[4] = {2, 3, 5, 6}, od[4] = {2, 3, 4, 6};
    tfc_tensor *q = mk(TFC_DTYPE_F32, qd, 4, NULL), *k = mk(TFC_DTYPE_F32, kd, 4, NULL);
    tfc_tensor *v = mk(TFC_DTYPE_F32, vd, 4, NULL), *o = mk(TFC_DTYPE_F32, od, 4, NULL);
    tfc_tensor *l = mk(TFC_DTYPE_F32, od, 3, NULL), *k64 = mk(TFC_DTYPE_F64, kd, 4, NULL);
    tfc_tensor *kD = mk(TFC_DTYPE_F32, (int64_t[]){2, 3, 5, 7}, 4, NULL);
    tfc_tensor *vS = mk(TFC_DTYPE_F32, (int64_t[]){2, 3, 6, 6}, 4, NULL);
    tfc_tensor *kB = mk(TFC_DTYPE_F32, (int64_t[]){1, 3, 5, 8}, 4, NULL);
    tfc_tensor *q3 = mk(TFC_DTYPE_F32, qd, 3, NULL), *ki = mk(TFC_DTYPE_I32, kd, 4, NULL);
    tfc_tensor *lw = mk(TFC_DTYPE_F32, (int64_t[]){2, 3, 5}, 3, NULL), *dq = mk(TFC_DTYPE_F32, qd, 4, NULL);
    const char *fn = "tfc_attention_forward";
    (void)fn;
    CHECK_OK(tfc_attention_forward(q, k, v, 1, 0.5, o, l));
    CHECK_ERR(tfc_attention_forward(q, kD, v, 1, 0.5, o, l), TFC_ERR_SHAPE,
              "tfc_attention_forward: q is [2,3,4,8], k is [2,3,5,7]; head dims D (dim 3) must agree");
    CHECK_ERR(tfc_attention_forward(q, k, vS, 1, 0.5, o, l), TFC_ERR_SHAPE,
              "k is [2,3,5,8], v is [2,3,6,6]; key counts S (dim 2) must agree");
    CHECK_ERR(tfc_attention_forward(q, kB, v, 1, 0.5, o, l), TFC_ERR_SHAPE, "batch and head dims");
    CHECK_ERR(tfc_attention_forward(q3, k, v, 1, 0.5, o, l), TFC_ERR_SHAPE, "q is [2,3,4], k is [2,3,5,8]");
    CHECK_ERR(tfc_attention_forward(q, k64, v, 1, 0.5, o, l), TFC_ERR_DTYPE,
              "k is f64 [2,3,5,8], must be f32 like q [2,3,4,8]");
    CHECK_ERR(tfc_attention_forward(q, ki, v, 1, 0.5, o, l), TFC_ERR_DTYPE, "k is i32");
    CHECK_ERR(tfc_attention_forward(q, k, v, 1, NAN, o, l), TFC_ERR_INVALID_ARG, "scale is nan");
    CHECK_ERR(tfc_attention_forward(q, k, v, 1, 0.5, q, l), TFC_ERR_SHAPE,
              "output out is [2,3,4,8], must be [2,3,4,6] (q is [2,3,4,8])");
    CHECK_ERR(tfc_attention_forward(q, k, v, 1, 0.5, o, lw), TFC_ERR_SHAPE, "output lse is [2,3,5], must be [2,3,4]");
    CHECK_ERR(tfc_attention_forward(q, k, v, 1, 0.5, NULL, l), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_attention_forward(NULL, k, v, 1, 0.5, o, l), TFC_ERR_INVALID_ARG, "q is NULL");
    CHECK_ERR(tfc_attention_backward(o, q, k, v, o, NULL, 1, 0.5, dq, NULL, NULL, 0), TFC_ERR_INVALID_ARG,
              "tfc_attention_backward: lse is NULL");
    CHECK_ERR(tfc_attention_backward(o, q, k, v, o, l, 1, 0.5, k, NULL, NULL, 0), TFC_ERR_SHAPE,
              "output dq is [2,3,5,8], must be [2,3,4,8]");
    CHECK_ERR(tfc_attention_backward(q, q, k, v, o, l, 1, 0.5, dq, NULL, NULL, 0), TFC_ERR_SHAPE,
              "dout is [2,3,4,8], must be [2,3,4,6]");
    CHECK_ERR(tfc_attention_backward(o, q, k, v, o, l, 1, 0.5, NULL, NULL, v, 0), TFC_ERR_INVALID_ARG,
              "output dv [2,3,5,6] overlaps v [2,3,5,6]");
    CHECK_ERR(tfc_attention_backward(o, q, k, v, o, l, 1, 0.5, dq, NULL, NULL, 3), TFC_ERR_INVALID_ARG, "flags");
    rel(q, k, v, o, l, k64);
    rel(kD, vS, kB, q3, ki, lw);
    rel(dq, NULL, NULL, NULL, NULL, NULL);
}

/* ---- empty tensors ------------------------------------------------------------------ */

static tfc_tensor *mk_empty(tfc_dtype dt, const int64_t *dims, int nd) {
    tfc_tensor *t = NULL; /* tfc_tensor_empty: tfc_tensor_zeros cannot fill a 0-element tensor yet */
    if (tfc_tensor_empty(dims, nd, dt, &t) != TFC_OK) return NULL;
    return t;
}

TEST(empty_tensors_are_no_ops) {
    int64_t d08[2] = {0, 8}, d8[1] = {8}, d0[1] = {0};
    tfc_tensor *x = mk_empty(TFC_DTYPE_F32, d08, 2), *y = mk_empty(TFC_DTYPE_F32, d08, 2);
    tfc_tensor *m = mk_empty(TFC_DTYPE_F32, d0, 1), *r = mk_empty(TFC_DTYPE_F32, d0, 1);
    tfc_tensor *dw = mk(TFC_DTYPE_F32, d8, 1, NULL), *w = mk(TFC_DTYPE_F32, d8, 1, NULL);
    CHECK_OK(tfc_layernorm_forward(x, w, NULL, 1e-5, y, m, r));
    CHECK_OK(tfc_tensor_fill(dw, 3));
    CHECK_OK(tfc_layernorm_backward(y, x, w, m, r, NULL, dw, NULL, 0));
    CHECK(((float *)tfc_tensor_data(dw))[7] == 0); /* a sum over no rows */
    CHECK_OK(tfc_softmax_forward(x, 0, 0, y));
    CHECK_OK(tfc_gelu_forward(x, 1, y));
    /* cross-entropy over 0 rows: NaN, like a mean over nothing */
    tfc_tensor *t = mk_empty(TFC_DTYPE_I64, d0, 1), *loss = mk(TFC_DTYPE_F32, NULL, 0, NULL);
    CHECK_OK(tfc_cross_entropy_forward(x, t, -100, loss, m));
    CHECK(isnan(*(float *)tfc_tensor_data(loss)));
    CHECK_OK(tfc_cross_entropy_backward(loss, x, t, NULL, -100, y, 0));
    /* embedding of no ids */
    tfc_tensor *table = mk(TFC_DTYPE_F32, (int64_t[]){3, 8}, 2, NULL),
               *dtab = mk(TFC_DTYPE_F32, (int64_t[]){3, 8}, 2, NULL);
    CHECK_OK(tfc_embedding_forward(table, t, y));
    CHECK_OK(tfc_tensor_fill(dtab, 5));
    CHECK_OK(tfc_embedding_backward(y, t, dtab, 0));
    CHECK(((float *)tfc_tensor_data(dtab))[23] == 0);
    /* attention with no keys: out 0, lse −∞; with no queries: nothing */
    int64_t qd[4] = {1, 2, 3, 4}, kd[4] = {1, 2, 0, 4}, od[4] = {1, 2, 3, 4};
    tfc_tensor *q = mk(TFC_DTYPE_F32, qd, 4, NULL), *k = mk_empty(TFC_DTYPE_F32, kd, 4);
    tfc_tensor *v = mk_empty(TFC_DTYPE_F32, kd, 4), *o = mk(TFC_DTYPE_F32, od, 4, NULL),
               *l = mk(TFC_DTYPE_F32, od, 3, NULL);
    CHECK_OK(tfc_tensor_fill(o, 9));
    CHECK_OK(tfc_attention_forward(q, k, v, 0, 0.5, o, l));
    CHECK(((float *)tfc_tensor_data(o))[5] == 0 && isinf(((float *)tfc_tensor_data(l))[2]));
    tfc_tensor *dq = mk(TFC_DTYPE_F32, qd, 4, NULL);
    CHECK_OK(tfc_tensor_fill(dq, 9));
    CHECK_OK(tfc_attention_backward(o, q, k, v, o, l, 1, 0.5, dq, NULL, NULL, 0));
    CHECK(((float *)tfc_tensor_data(dq))[7] == 0);
    rel(x, y, m, r, dw, w);
    rel(t, loss, table, dtab, q, k);
    rel(v, o, l, dq, NULL, NULL);
}

/* ---- device --------------------------------------------------------------------------- */

TEST(tensors_on_two_devices_are_rejected) {
    /* A CPU tensor labelled CUDA, served by the stand-in table: the one-device rule, without a GPU. */
    standin_install();
    int64_t d[2] = {2, 3};
    tfc_tensor *x = mk(TFC_DTYPE_F32, d, 2, NULL), *y = mk(TFC_DTYPE_F32, d, 2, NULL);
    x->storage->device = TFC_DEVICE_CUDA;
    CHECK_ERR(tfc_gelu_forward(x, 0, y), TFC_ERR_DEVICE, "tfc_gelu_forward: x lives on cuda:0 but y lives on cpu");
    CHECK_ERR(tfc_softmax_forward(x, -1, 0, y), TFC_ERR_DEVICE, "tfc_softmax_forward: x lives on cuda");
    x->storage->device = TFC_DEVICE_CPU;
    y->storage->device = TFC_DEVICE_CUDA;
    CHECK_ERR(tfc_layernorm_forward(x, NULL, NULL, 1e-5, y, NULL, NULL), TFC_ERR_DEVICE, "y lives on cuda");
    y->storage->device = TFC_DEVICE_CPU;
    rel(x, y, NULL, NULL, NULL, NULL);
    standin_remove();
}

/* ---- the f32 polynomial exp and erfc ----------------------------------------------------- */

TEST(vmath_exp_and_erfc_accuracy_and_specials) {
    double worst_exp = 0, worst_erfc = 0, worst_tail = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double e = fabs(tfc_vexpf(x) - exp((double)x)) / exp((double)x);
        worst_exp = e > worst_exp ? e : worst_exp;
        float z = -6.0f + 15.0f * (float)i / 200000.0f; /* erfc(9) ~ 4e-37: still a normal float */
        double r = erfc((double)z), g = fabs(tfc_verfcf(z) - r) / r;
        if (z < 6)
            worst_erfc = g > worst_erfc ? g : worst_erfc;
        else
            worst_tail = g > worst_tail ? g : worst_tail;
    }
    CHECK(worst_exp < 2e-7);    /* ~1-2 ulp */
    CHECK(worst_erfc < 5e-6);   /* |z| < 6 */
    CHECK(worst_tail < 1.5e-5); /* z up to 9: f32 rounding of z² (~80) inside the exp */
    CHECK(tfc_vexpf(0.0f) == 1.0f);
    CHECK(tfc_vexpf(-INFINITY) == 0.0f && tfc_vexpf(-100.0f) == 0.0f && tfc_vexpf(-88.5f) == 0.0f);
    CHECK(isfinite(tfc_vexpf(INFINITY)) && tfc_vexpf(INFINITY) > 1e38f);
    CHECK(isnan(tfc_vexpf(NAN)) && isnan(tfc_verfcf(NAN)));
    CHECK(tfc_verfcf(-INFINITY) == 2.0f && tfc_verfcf(INFINITY) == 0.0f);
}
