/*
 * SiLU and SwiGLU: tfc_silu, tfc_swiglu, tfc_swiglu_fused and the explicit
 * tfc_swiglu_forward / tfc_swiglu_backward. Values against hand-derived
 * numbers (30-digit mpmath, quoted below) and naive f64 loops written here
 * as x / (1 + exp(−x)); gradients against centred finite differences in
 * f64, both of the explicit door and of the graph doors (tfc_gradcheck);
 * the two layouts (separate [N, F] tensors, and the column halves of one
 * [N, 2F] buffer, for outputs too); f32 on both CPU paths; large |x|
 * without overflow; accumulate, NULL outputs, thread-count independence,
 * and every bad argument with its message.
 */
#include "tfc_test.h"

#include "cpu/kernels.h"

TFC_TEST_MAIN

static uint64_t rng_state;
static void seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
static double urand(double lo, double hi) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
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

/* Any float tensor (any strides) as doubles in row-major order, malloc'd. */
static double *vals(const tfc_tensor *t) {
    tfc_tensor *c = NULL, *d = NULL;
    int64_t n = tfc_tensor_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (tfc_contiguous(NULL, t, &c) != TFC_OK || tfc_cast(NULL, c, TFC_DTYPE_F64, &d) != TFC_OK) {
        TFC_FAIL_AT("vals: %s", tfc_last_error());
        for (int64_t i = 0; i < n; i++) v[i] = NAN;
    } else {
        memcpy(v, tfc_tensor_data(d), (size_t)n * sizeof *v);
    }
    tfc_tensor_release(c);
    tfc_tensor_release(d);
    return v;
}

static double *rand_vec(int64_t n, double lo, double hi) {
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = urand(lo, hi);
    return v;
}

/* Largest |a − b| / (atol + rtol·|b|); <= 1 is close (NaN is worst). */
static double worst(const double *a, const double *b, int64_t n, double atol, double rtol) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(e <= w)) w = e;
    }
    return w;
}
#define CHECK_ALLCLOSE(a, b, n, atol, rtol)                                         \
    do {                                                                            \
        double w_ = worst((a), (b), (n), (atol), (rtol));                           \
        tfc_test_checks++;                                                          \
        if (!(w_ <= 1)) TFC_FAIL_AT("%s vs %s: off by %g x tolerance", #a, #b, w_); \
    } while (0)

#define FOR_BOTH_F32_PATHS(...)               \
    for (int path_ = 0; path_ < 2; path_++) { \
        tfc_cpu_avx2_disabled = path_ == 0;   \
        __VA_ARGS__                           \
    }                                         \
    tfc_cpu_avx2_disabled = 0

static void rel(tfc_tensor **ts, int n) {
    for (int i = 0; i < n; i++) tfc_tensor_release(ts[i]);
}

/* The references, written from the definitions: silu(x) = x / (1 + e^−x), silu' = σ + x σ (1 − σ). */
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
static double ref_dsilu(double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return s + x * s * (1.0 - s);
}

/* ---- SiLU --------------------------------------------------------------------------- */

TEST(silu_hand_values_and_large_inputs) {
    /* x, silu(x), silu'(x) to 20 digits (mpmath, 30 digits) */
    static const double H[][3] = {
        {1.0, 0.73105857863000487925, 0.92767051187148673179},
        {-1.0, -0.26894142136999512075, 0.072329488128513268211},
        {20.0, 19.999999958776927636, 1.0000000391619186606},
        {-20.0, -4.1223072363804071629e-8, -3.9161918660646783292e-8},
        {0.5, 0.31122966560092728232, 0.73996118730265180917},
        {-3.0, -0.14227761953270034264, -0.088104106015169617069},
        {0.0, 0.0, 0.5},
    };
    const int64_t n = 7;
    double x[7], y[7], d[7], ones[7];
    for (int i = 0; i < 7; i++) x[i] = H[i][0], y[i] = H[i][1], d[i] = H[i][2], ones[i] = 1;
    tfc_dtype dts[2] = {TFC_DTYPE_F64, TFC_DTYPE_F32};
    for (int k = 0; k < 2; k++) {
        FOR_BOTH_F32_PATHS({
            tfc_tensor *tx = mk(dts[k], &n, 1, x), *out = NULL, *dx = NULL, *seed_t = mk(dts[k], &n, 1, ones);
            tfc_graph *g = NULL;
            CHECK_OK(tfc_tensor_set_requires_grad(tx, 1));
            CHECK_OK(tfc_graph_new(&g));
            CHECK_OK(tfc_silu(g, tx, &out));
            CHECK_OK(tfc_graph_backward(g, out, seed_t));
            CHECK_OK(tfc_tensor_grad(tx, &dx));
            double *gy = vals(out), *gd = vals(dx);
            if (k == 0) {
                CHECK_ALLCLOSE(gy, y, n, 1e-300, 1e-15);
                CHECK_ALLCLOSE(gd, d, n, 1e-300, 1e-15);
            } else {
                CHECK_ALLCLOSE(gy, y, n, 1e-30, 5e-7);
                CHECK_ALLCLOSE(gd, d, n, 1e-30, 5e-7);
            }
            free(gy), free(gd);
            tfc_graph_release(g);
            rel((tfc_tensor *[]){tx, out, dx, seed_t}, 4);
        });
    }
    /* Far out: x·σ(x) is x above and 0 below, the derivative 1 and 0; nothing overflows to NaN or inf. */
    const int64_t m = 6;
    double big[6] = {1000, -1000, 100, -100, 88.5, -88.5};
    for (int k = 0; k < 2; k++) {
        FOR_BOTH_F32_PATHS({
            tfc_tensor *tx = mk(dts[k], &m, 1, big), *out = NULL, *dx = NULL, *seed_t = mk(dts[k], &m, 1, ones);
            tfc_graph *g = NULL;
            CHECK_OK(tfc_tensor_set_requires_grad(tx, 1));
            CHECK_OK(tfc_graph_new(&g));
            CHECK_OK(tfc_silu(g, tx, &out));
            CHECK_OK(tfc_graph_backward(g, out, seed_t));
            CHECK_OK(tfc_tensor_grad(tx, &dx));
            double *gy = vals(out), *gd = vals(dx);
            for (int i = 0; i < 6; i++) {
                double want_y = big[i] > 0 ? big[i] : 0, want_d = big[i] > 0 ? 1 : 0;
                /* e^-88.5 = 3.8e-39: below f32's normal range, so f32 rounds the tail to the limit */
                CHECK_CLOSE(gy[i], big[i] > 0 || k == 1 ? want_y : ref_silu(big[i]), 1e-30);
                CHECK_CLOSE(gd[i], big[i] > 0 || k == 1 ? want_d : ref_dsilu(big[i]), 1e-30);
                CHECK(isfinite(gy[i]) && isfinite(gd[i]));
            }
            free(gy), free(gd);
            tfc_graph_release(g);
            rel((tfc_tensor *[]){tx, out, dx, seed_t}, 4);
        });
    }
}

/* loss = Σ out ⊙ W with a fixed random W, so the upstream gradient is not all ones. */
static tfc_status weighted(tfc_graph *g, tfc_tensor *out, tfc_tensor **loss) {
    int64_t dims[8];
    int32_t nd = tfc_tensor_ndim(out);
    tfc_status s = tfc_tensor_shape(out, dims, 8);
    tfc_tensor *w = NULL, *p = NULL;
    if (s == TFC_OK) s = tfc_tensor_uniform(dims, nd, tfc_tensor_dtype(out), -1, 1, 77, 0, &w);
    if (s == TFC_OK) s = tfc_mul(g, out, w, &p);
    if (s == TFC_OK) s = tfc_sum(g, p, NULL, 0, 0, loss);
    tfc_tensor_release(w);
    tfc_tensor_release(p);
    tfc_tensor_release(out);
    return s;
}

static tfc_status f_silu(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n, (void)ctx;
    tfc_tensor *o = NULL;
    tfc_status s = tfc_silu(g, in[0], &o);
    return s == TFC_OK ? weighted(g, o, loss) : s;
}
/* silu of a transposed (strided) view */
static tfc_status f_silu_t(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n, (void)ctx;
    tfc_tensor *t = NULL, *o = NULL;
    tfc_status s = tfc_transpose(g, in[0], 0, 1, &t);
    if (s == TFC_OK) s = tfc_silu(g, t, &o);
    tfc_tensor_release(t);
    return s == TFC_OK ? weighted(g, o, loss) : s;
}
static tfc_status f_swiglu(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n, (void)ctx;
    tfc_tensor *o = NULL;
    tfc_status s = tfc_swiglu(g, in[0], in[1], &o);
    return s == TFC_OK ? weighted(g, o, loss) : s;
}
/* tfc_swiglu on the two narrowed halves of one leaf [.., 2F] */
static tfc_status f_swiglu_views(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n, (void)ctx;
    int64_t f = *(const int64_t *)ctx;
    tfc_tensor *a = NULL, *b = NULL, *o = NULL;
    tfc_status s = tfc_narrow(g, in[0], -1, 0, f, &a);
    if (s == TFC_OK) s = tfc_narrow(g, in[0], -1, f, f, &b);
    if (s == TFC_OK) s = tfc_swiglu(g, a, b, &o);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    return s == TFC_OK ? weighted(g, o, loss) : s;
}
static tfc_status f_swiglu_fused(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *ctx) {
    (void)n, (void)ctx;
    tfc_tensor *o = NULL;
    tfc_status s = tfc_swiglu_fused(g, in[0], &o);
    return s == TFC_OK ? weighted(g, o, loss) : s;
}

static void gradcheck(const char *name, tfc_gradcheck_fn f, tfc_tensor **in, int32_t n, void *ctx) {
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    tfc_status s = tfc_gradcheck(f, in, n, ctx, 1e-6, &err, &wi, &wk);
    tfc_test_checks++;
    if (s != TFC_OK)
        TFC_FAIL_AT("%s: gradcheck failed to run: %s", name, tfc_last_error());
    else if (!(err < 1e-6))
        TFC_FAIL_AT("%s: worst relative error %g at input %d element %lld", name, err, wi, (long long)wk);
    if (getenv("TFC_TEST_VERBOSE")) printf("gradcheck %s: %g\n", name, err);
    rel(in, n);
}

TEST(graph_doors_against_finite_differences) {
    seed(1);
    const int64_t d[2] = {5, 7}, d2[3] = {2, 3, 8}, d3[3] = {2, 3, 4};
    double *x = rand_vec(35, -6, 6), *gu = rand_vec(48, -4, 4), *gg = rand_vec(24, -4, 4), *uu = rand_vec(24, -3, 3);
    int64_t f = 4;
    gradcheck("silu", f_silu, (tfc_tensor *[]){mk(TFC_DTYPE_F64, d, 2, x)}, 1, NULL);
    gradcheck("silu of a transposed view", f_silu_t, (tfc_tensor *[]){mk(TFC_DTYPE_F64, d, 2, x)}, 1, NULL);
    gradcheck("swiglu", f_swiglu, (tfc_tensor *[]){mk(TFC_DTYPE_F64, d3, 3, gg), mk(TFC_DTYPE_F64, d3, 3, uu)}, 2,
              NULL);
    gradcheck("swiglu of narrowed halves", f_swiglu_views, (tfc_tensor *[]){mk(TFC_DTYPE_F64, d2, 3, gu)}, 1, &f);
    gradcheck("swiglu_fused", f_swiglu_fused, (tfc_tensor *[]){mk(TFC_DTYPE_F64, d2, 3, gu)}, 1, NULL);
    free(x), free(gu), free(gg), free(uu);
}

/* ---- SwiGLU, explicit doors ---------------------------------------------------------- */

/*
 * The operands of one case: gate, up, dgate, dup either separate
 * contiguous [N, F] tensors (fused = 0) or the column halves of one
 * [N, 2F] tensor (fused = 1; gate_up and dgate_up own the memory).
 */
typedef struct operands {
    tfc_tensor *gate_up, *dgate_up; /* fused only */
    tfc_tensor *gate, *up, *dgate, *dup;
} operands;

static void make(operands *o, int fused, tfc_dtype dt, int64_t N, int64_t F, const double *g, const double *u) {
    memset(o, 0, sizeof *o);
    const int64_t d[2] = {N, F}, d2[2] = {N, 2 * F};
    if (!fused) {
        o->gate = mk(dt, d, 2, g), o->up = mk(dt, d, 2, u);
        o->dgate = mk(dt, d, 2, NULL), o->dup = mk(dt, d, 2, NULL);
        return;
    }
    double *gu = malloc((size_t)(N * 2 * F) * sizeof *gu);
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < F; j++) gu[r * 2 * F + j] = g[r * F + j], gu[r * 2 * F + F + j] = u[r * F + j];
    o->gate_up = mk(dt, d2, 2, gu), o->dgate_up = mk(dt, d2, 2, NULL);
    free(gu);
    CHECK_OK(tfc_narrow(NULL, o->gate_up, 1, 0, F, &o->gate));
    CHECK_OK(tfc_narrow(NULL, o->gate_up, 1, F, F, &o->up));
    CHECK_OK(tfc_narrow(NULL, o->dgate_up, 1, 0, F, &o->dgate));
    CHECK_OK(tfc_narrow(NULL, o->dgate_up, 1, F, F, &o->dup));
}
static void unmake(operands *o) { rel((tfc_tensor *[]){o->gate_up, o->dgate_up, o->gate, o->up, o->dgate, o->dup}, 6); }

struct fd_ctx {
    int fused;
    int64_t N, F;
    double *g, *u;
};
/* out of the f64 forward through the explicit door, for the finite differences */
static void eval_forward(void *p, double *out) {
    struct fd_ctx *k = p;
    operands o;
    make(&o, k->fused, TFC_DTYPE_F64, k->N, k->F, k->g, k->u);
    const int64_t d[2] = {k->N, k->F};
    tfc_tensor *y = mk(TFC_DTYPE_F64, d, 2, NULL);
    if (tfc_swiglu_forward(o.gate, o.up, y) != TFC_OK) TFC_FAIL_AT("eval_forward: %s", tfc_last_error());
    memcpy(out, tfc_tensor_data(y), sizeof(double) * (size_t)(k->N * k->F));
    tfc_tensor_release(y);
    unmake(&o);
}
/* Max relative error of analytic vs the centred difference of Σ R ⊙ out in each element of param. */
static double fd_check(struct fd_ctx *k, double *param, const double *analytic, const double *R) {
    const int64_t n = k->N * k->F;
    const double eps = 1e-6;
    double *yp = malloc((size_t)n * sizeof *yp), *ym = malloc((size_t)n * sizeof *ym), w = 0;
    for (int64_t i = 0; i < n; i++) {
        double save = param[i];
        param[i] = save + eps;
        eval_forward(k, yp);
        param[i] = save - eps;
        eval_forward(k, ym);
        param[i] = save;
        double num = 0;
        for (int64_t j = 0; j < n; j++) num += R[j] * (yp[j] - ym[j]);
        num /= 2 * eps;
        double e = fabs(analytic[i] - num) / (fabs(analytic[i]) + fabs(num) + 1e-8);
        if (!(e <= w)) w = e;
    }
    free(yp), free(ym);
    return w;
}

TEST(explicit_doors_both_layouts_f64_f32_accumulate) {
    const int64_t N = 13, F = 11, n = N * F, d[2] = {N, F};
    seed(2);
    double *g = rand_vec(n, -8, 8), *u = rand_vec(n, -2, 2), *R = rand_vec(n, -1, 1);
    g[0] = 0, g[1] = 30, g[2] = -30, g[3] = 1e-4;
    double *want = malloc((size_t)n * sizeof *want), *wdg = malloc((size_t)n * sizeof *wdg);
    double *wdu = malloc((size_t)n * sizeof *wdu);
    for (int64_t i = 0; i < n; i++) {
        want[i] = ref_silu(g[i]) * u[i];
        wdg[i] = R[i] * u[i] * ref_dsilu(g[i]);
        wdu[i] = R[i] * ref_silu(g[i]);
    }
    for (int fused = 0; fused < 2; fused++) {
        operands o;
        make(&o, fused, TFC_DTYPE_F64, N, F, g, u);
        tfc_tensor *y = mk(TFC_DTYPE_F64, d, 2, NULL), *dy = mk(TFC_DTYPE_F64, d, 2, R);
        CHECK_OK(tfc_swiglu_forward(o.gate, o.up, y));
        double *got = vals(y);
        CHECK_ALLCLOSE(got, want, n, 1e-300, 1e-14);
        free(got);
        CHECK_OK(tfc_swiglu_backward(dy, o.gate, o.up, o.dgate, o.dup, 0));
        double *gg = vals(o.dgate), *gu = vals(o.dup);
        CHECK_ALLCLOSE(gg, wdg, n, 1e-300, 1e-14);
        CHECK_ALLCLOSE(gu, wdu, n, 1e-300, 1e-14);
        struct fd_ctx k = {fused, N, F, g, u};
        double eg = fd_check(&k, g, gg, R), eu = fd_check(&k, u, gu, R);
        tfc_test_checks += 2;
        if (!(eg < 1e-6 && eu < 1e-6)) TFC_FAIL_AT("fused %d: finite differences %g (dgate), %g (dup)", fused, eg, eu);
        if (fused) {
            /* both halves of the one gradient buffer, as the rows say */
            double *all = vals(o.dgate_up);
            int ok = 1;
            for (int64_t r = 0; r < N; r++)
                for (int64_t j = 0; j < F; j++)
                    ok &= all[r * 2 * F + j] == gg[r * F + j] && all[r * 2 * F + F + j] == gu[r * F + j];
            CHECK(ok);
            free(all);
        }
        /* accumulate onto 2: the same gradient plus 2; NULL dgate leaves only dup written */
        CHECK_OK(tfc_tensor_fill(fused ? o.dgate_up : o.dgate, 2));
        if (!fused) CHECK_OK(tfc_tensor_fill(o.dup, 2));
        CHECK_OK(tfc_swiglu_backward(dy, o.gate, o.up, o.dgate, o.dup, TFC_GRAD_ACCUMULATE));
        double *ag = vals(o.dgate), *au = vals(o.dup);
        for (int64_t i = 0; i < n; i++) ag[i] -= 2, au[i] -= 2;
        CHECK_ALLCLOSE(ag, wdg, n, 1e-14, 1e-13);
        CHECK_ALLCLOSE(au, wdu, n, 1e-14, 1e-13);
        free(ag), free(au);
        CHECK_OK(tfc_tensor_fill(fused ? o.dgate_up : o.dgate, -5));
        if (!fused) CHECK_OK(tfc_tensor_fill(o.dup, -5));
        CHECK_OK(tfc_swiglu_backward(dy, o.gate, o.up, NULL, o.dup, 0));
        ag = vals(o.dgate), au = vals(o.dup);
        int untouched = 1;
        for (int64_t i = 0; i < n; i++) untouched &= ag[i] == -5;
        CHECK(untouched);
        CHECK_ALLCLOSE(au, wdu, n, 1e-300, 1e-14);
        free(ag), free(au);
        CHECK_OK(tfc_swiglu_backward(dy, o.gate, o.up, o.dgate, NULL, 0));
        ag = vals(o.dgate);
        CHECK_ALLCLOSE(ag, wdg, n, 1e-300, 1e-14);
        free(ag);
        /* f32 on both CPU paths against f64 on the f32-rounded inputs */
        FOR_BOTH_F32_PATHS({
            operands o32;
            make(&o32, fused, TFC_DTYPE_F32, N, F, g, u);
            tfc_tensor *y32 = mk(TFC_DTYPE_F32, d, 2, NULL), *dy32 = mk(TFC_DTYPE_F32, d, 2, R);
            double *g32 = vals(o32.gate), *u32 = vals(o32.up), *r32 = vals(dy32);
            double *wy = malloc((size_t)n * sizeof *wy), *wg = malloc((size_t)n * sizeof *wg);
            double *wu = malloc((size_t)n * sizeof *wu);
            for (int64_t i = 0; i < n; i++) {
                wy[i] = ref_silu(g32[i]) * u32[i];
                wg[i] = r32[i] * u32[i] * ref_dsilu(g32[i]);
                wu[i] = r32[i] * ref_silu(g32[i]);
            }
            CHECK_OK(tfc_swiglu_forward(o32.gate, o32.up, y32));
            CHECK_OK(tfc_swiglu_backward(dy32, o32.gate, o32.up, o32.dgate, o32.dup, 0));
            double *fy = vals(y32), *fg = vals(o32.dgate), *fu = vals(o32.dup);
            CHECK_ALLCLOSE(fy, wy, n, 1e-30, 1e-6);
            CHECK_ALLCLOSE(fg, wg, n, 1e-30, 1e-6);
            CHECK_ALLCLOSE(fu, wu, n, 1e-30, 1e-6);
            free(g32), free(u32), free(r32), free(wy), free(wg), free(wu), free(fy), free(fg), free(fu);
            rel((tfc_tensor *[]){y32, dy32}, 2);
            unmake(&o32);
        });
        free(gg), free(gu);
        rel((tfc_tensor *[]){y, dy}, 2);
        unmake(&o);
    }
    free(g), free(u), free(R), free(want), free(wdg), free(wdu);
}

TEST(large_gates_stay_finite) {
    const int64_t d[1] = {6};
    double g[6] = {1000, -1000, 200, -200, 90, -90}, u[6] = {0.5, 0.5, -2, -2, 3, 3}, one[6] = {1, 1, 1, 1, 1, 1};
    tfc_dtype dts[2] = {TFC_DTYPE_F64, TFC_DTYPE_F32};
    for (int k = 0; k < 2; k++) {
        tfc_tensor *tg = mk(dts[k], d, 1, g), *tu = mk(dts[k], d, 1, u), *dy = mk(dts[k], d, 1, one);
        tfc_tensor *y = mk(dts[k], d, 1, NULL), *dg = mk(dts[k], d, 1, NULL), *du = mk(dts[k], d, 1, NULL);
        CHECK_OK(tfc_swiglu_forward(tg, tu, y));
        CHECK_OK(tfc_swiglu_backward(dy, tg, tu, dg, du, 0));
        double *vy = vals(y), *vg = vals(dg), *vu = vals(du);
        for (int i = 0; i < 6; i++) {
            int pos = g[i] > 0;
            /* the exact values are these to within e^-90 relative */
            CHECK_CLOSE(vy[i], pos ? g[i] * u[i] : 0.0, 1e-30);
            CHECK_CLOSE(vg[i], pos ? u[i] : 0.0, 1e-30);
            CHECK_CLOSE(vu[i], pos ? g[i] : 0.0, 1e-30);
        }
        free(vy), free(vg), free(vu);
        rel((tfc_tensor *[]){tg, tu, dy, y, dg, du}, 6);
    }
}

TEST(explicit_door_equals_graph_door_and_threads_do_not_matter) {
    const int64_t N = 300, F = 96, d[2] = {N, F}, d2[2] = {N, 2 * F}, n = N * F;
    seed(3);
    double *gu = rand_vec(2 * n, -5, 5);
    tfc_tensor *x = mk(TFC_DTYPE_F32, d2, 2, gu), *gate = NULL, *up = NULL, *a = NULL, *b = NULL;
    tfc_tensor *y1 = mk(TFC_DTYPE_F32, d, 2, NULL);
    CHECK_OK(tfc_narrow(NULL, x, 1, 0, F, &gate));
    CHECK_OK(tfc_narrow(NULL, x, 1, F, F, &up));
    CHECK_OK(tfc_swiglu_forward(gate, up, y1));
    CHECK_OK(tfc_swiglu(NULL, gate, up, &a));
    CHECK_OK(tfc_swiglu_fused(NULL, x, &b));
    int32_t saved = tfc_get_num_threads();
    CHECK_OK(tfc_set_num_threads(1));
    tfc_tensor *y2 = mk(TFC_DTYPE_F32, d, 2, NULL);
    CHECK_OK(tfc_swiglu_forward(gate, up, y2));
    CHECK_OK(tfc_set_num_threads(saved));
    CHECK(memcmp(tfc_tensor_data(y1), tfc_tensor_data(a), (size_t)n * 4) == 0);
    CHECK(memcmp(tfc_tensor_data(y1), tfc_tensor_data(b), (size_t)n * 4) == 0);
    CHECK(memcmp(tfc_tensor_data(y1), tfc_tensor_data(y2), (size_t)n * 4) == 0);
    rel((tfc_tensor *[]){x, gate, up, a, b, y1, y2}, 7);
    free(gu);
}

TEST(bad_arguments_are_named) {
    const int64_t d35[2] = {3, 5}, d34[2] = {3, 4}, d37[2] = {3, 7}, d310[2] = {3, 10}, d53[2] = {5, 3};
    tfc_tensor *g = mk(TFC_DTYPE_F64, d35, 2, NULL), *u = mk(TFC_DTYPE_F64, d35, 2, NULL);
    tfc_tensor *u34 = mk(TFC_DTYPE_F64, d34, 2, NULL), *u32 = mk(TFC_DTYPE_F32, d35, 2, NULL);
    tfc_tensor *y = mk(TFC_DTYPE_F64, d35, 2, NULL), *y2 = mk(TFC_DTYPE_F64, d35, 2, NULL);
    tfc_tensor *odd = mk(TFC_DTYPE_F64, d37, 2, NULL), *wide = mk(TFC_DTYPE_F64, d310, 2, NULL);
    tfc_tensor *tbuf = mk(TFC_DTYPE_F64, d53, 2, NULL), *yt = NULL, *gi = NULL, *s = NULL, *r = NULL;
    tfc_tensor *h1 = NULL, *h2 = NULL;
    CHECK_OK(tfc_transpose(NULL, tbuf, 0, 1, &yt)); /* [3,5] with strides (1, 3): columns contiguous */
    CHECK_OK(tfc_tensor_zeros(d35, 2, TFC_DTYPE_I64, &gi));
    CHECK_OK(tfc_tensor_zeros(NULL, 0, TFC_DTYPE_F64, &s));
    /* shapes */
    CHECK_ERR(tfc_swiglu_forward(g, u34, y), TFC_ERR_SHAPE,
              "tfc_swiglu_forward: up is [3,4], must be [3,5] (gate is [3,5])");
    CHECK_ERR(tfc_swiglu_forward(g, u, u34), TFC_ERR_SHAPE, "tfc_swiglu_forward: output out is [3,4], must be [3,5]");
    CHECK_ERR(tfc_swiglu_backward(u34, g, u, y, NULL, 0), TFC_ERR_SHAPE,
              "tfc_swiglu_backward: dy is [3,4], must be [3,5]");
    CHECK_ERR(tfc_swiglu_forward(s, s, s), TFC_ERR_SHAPE, "tfc_swiglu_forward: gate is a scalar");
    CHECK_ERR(tfc_swiglu(NULL, g, u34, &r), TFC_ERR_SHAPE, "up is [3,4], must be [3,5]");
    CHECK_ERR(tfc_swiglu_fused(NULL, odd, &r), TFC_ERR_SHAPE,
              "tfc_swiglu_fused: gate_up is [3,7]; its last dim 7 must be even");
    CHECK_ERR(tfc_swiglu_fused(NULL, s, &r), TFC_ERR_SHAPE, "tfc_swiglu_fused: gate_up is a scalar");
    /* dtypes */
    CHECK_ERR(tfc_swiglu_forward(gi, u, y), TFC_ERR_DTYPE, "tfc_swiglu_forward: gate is i64 [3,5]; only f32 and f64");
    CHECK_ERR(tfc_swiglu_forward(g, u32, y), TFC_ERR_DTYPE,
              "tfc_swiglu_forward: up is f32 [3,5], must be f64 like gate");
    CHECK_ERR(tfc_swiglu_forward(g, u, u32), TFC_ERR_DTYPE, "output out is f32 [3,5], must be f64");
    CHECK_ERR(tfc_swiglu(NULL, g, u32, &r), TFC_ERR_DTYPE, "up is f32 [3,5], must be f64 like gate");
    CHECK_ERR(tfc_swiglu_fused(NULL, gi, &r), TFC_ERR_DTYPE, "tfc_swiglu_fused: gate_up is i64");
    CHECK_ERR(tfc_silu(NULL, gi, &r), TFC_ERR_DTYPE, "tfc_silu: x is i64");
    /* NULLs, flags, layouts, overlaps */
    CHECK_ERR(tfc_swiglu_forward(g, NULL, y), TFC_ERR_INVALID_ARG, "up is NULL");
    CHECK_ERR(tfc_swiglu_forward(g, u, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_swiglu(NULL, g, u, NULL), TFC_ERR_INVALID_ARG, "tfc_swiglu: out is NULL");
    CHECK_ERR(tfc_swiglu_fused(NULL, NULL, &r), TFC_ERR_INVALID_ARG, "tfc_swiglu_fused: gate_up is NULL");
    CHECK_ERR(tfc_silu(NULL, g, NULL), TFC_ERR_INVALID_ARG, "tfc_silu: out is NULL");
    CHECK_ERR(tfc_swiglu_backward(y, g, u, y2, NULL, 4), TFC_ERR_INVALID_ARG, "flags is 0x4");
    CHECK_ERR(tfc_swiglu_forward(g, u, yt), TFC_ERR_INVALID_ARG,
              "tfc_swiglu_forward: output out [3,5] has strides [1,3]; it must be rows of its last dim");
    CHECK_ERR(tfc_swiglu_forward(g, u, g), TFC_ERR_INVALID_ARG, "output out [3,5] overlaps gate [3,5]");
    CHECK_ERR(tfc_swiglu_backward(y, g, u, y2, y2, 0), TFC_ERR_INVALID_ARG, "output dgate [3,5] overlaps output dup");
    CHECK_ERR(tfc_swiglu_backward(y, g, u, y2, y, 0), TFC_ERR_INVALID_ARG, "output dup [3,5] overlaps dy");
    /* interleaved halves that share a column overlap; the exact halves do not */
    CHECK_OK(tfc_narrow(NULL, wide, 1, 0, 5, &h1));
    CHECK_OK(tfc_narrow(NULL, wide, 1, 4, 5, &h2));
    CHECK_ERR(tfc_swiglu_backward(y, g, u, h1, h2, 0), TFC_ERR_INVALID_ARG, "output dgate [3,5] overlaps output dup");
    tfc_tensor_release(h2);
    CHECK_OK(tfc_narrow(NULL, wide, 1, 5, 5, &h2));
    CHECK_OK(tfc_swiglu_backward(y, g, u, h1, h2, 0));
    CHECK_OK(tfc_swiglu_forward(h1, u, h2)); /* one half read, the other written */
    CHECK(r == NULL);
    rel((tfc_tensor *[]){g, u, u34, u32, y, y2, odd, wide, tbuf, yt, gi, s, h1, h2}, 14);
}

/* silu''(x) = σ(1 − σ)(2 + x(1 − 2σ)), differentiated by hand from silu' = σ + xσ(1 − σ). */
static double ref_d2silu(double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1 - s) * (2 + x * (1 - 2 * s));
}

/*
 * create_graph through the graph doors: with y = Σ out, the first gradient
 * d1 = dy/dx has history, and the gradient of Σ d1 is the hand-derived second
 * derivative. SwiGLU (out = silu(g)·u): d1 = [u silu'(g) | silu(g)], d(Σ d1) =
 * [u silu''(g) + silu'(g) | silu'(g)].
 */
TEST(create_graph_second_derivatives) {
    const double gv[3] = {0.7, -2.5, 4.0}, uv[3] = {1.5, -0.5, 2.0};
    const int64_t n3 = 3, d2[2] = {1, 6};
    for (int form = 0; form < 3; form++) { /* silu, swiglu on two tensors, swiglu_fused */
        tfc_graph *g = NULL;
        CHECK_OK(tfc_graph_new(&g));
        double both[6] = {gv[0], gv[1], gv[2], uv[0], uv[1], uv[2]};
        tfc_tensor *a = form == 2 ? mk(TFC_DTYPE_F64, d2, 2, both) : mk(TFC_DTYPE_F64, &n3, 1, gv);
        tfc_tensor *b = form == 1 ? mk(TFC_DTYPE_F64, &n3, 1, uv) : NULL;
        CHECK_OK(tfc_tensor_set_requires_grad(a, 1));
        if (b) CHECK_OK(tfc_tensor_set_requires_grad(b, 1));
        tfc_tensor *out = NULL, *y = NULL, *s1 = NULL, *d1[2] = {NULL, NULL}, *h[2] = {NULL, NULL};
        if (form == 0) CHECK_OK(tfc_silu(g, a, &out));
        if (form == 1) CHECK_OK(tfc_swiglu(g, a, b, &out));
        if (form == 2) CHECK_OK(tfc_swiglu_fused(g, a, &out));
        CHECK_OK(tfc_sum(g, out, NULL, 0, 0, &y));
        const tfc_tensor *ins[2] = {a, b}, *outs[1] = {y};
        int32_t nin = b ? 2 : 1;
        CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, nin, NULL, 1, 1, 0, d1));
        tfc_tensor *t1 = NULL, *t2 = NULL;
        CHECK_OK(tfc_sum(g, d1[0], NULL, 0, 0, &t1));
        if (b) {
            CHECK_OK(tfc_sum(g, d1[1], NULL, 0, 0, &t2));
            CHECK_OK(tfc_add(g, t1, t2, &s1));
        } else {
            s1 = tfc_tensor_retain(t1);
        }
        outs[0] = s1;
        CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, nin, NULL, 0, 0, 0, h));
        double want1[6], want2[6];
        for (int i = 0; i < 3; i++) {
            double x = gv[i], u = uv[i];
            if (form == 0) {
                want1[i] = ref_dsilu(x), want2[i] = ref_d2silu(x);
            } else {
                want1[i] = u * ref_dsilu(x), want1[3 + i] = ref_silu(x);
                want2[i] = u * ref_d2silu(x) + ref_dsilu(x), want2[3 + i] = ref_dsilu(x);
            }
        }
        double *g1 = vals(d1[0]), *g2 = vals(h[0]);
        double *g1b = b ? vals(d1[1]) : NULL, *g2b = b ? vals(h[1]) : NULL;
        int64_t n = form == 0 ? 3 : 6;
        if (b) { /* the two tensors' gradients side by side, as the fused form has them */
            double c1[6], c2[6];
            for (int i = 0; i < 3; i++) c1[i] = g1[i], c1[3 + i] = g1b[i], c2[i] = g2[i], c2[3 + i] = g2b[i];
            CHECK_ALLCLOSE(c1, want1, n, 1e-14, 1e-13);
            CHECK_ALLCLOSE(c2, want2, n, 1e-14, 1e-13);
        } else {
            CHECK_ALLCLOSE(g1, want1, n, 1e-14, 1e-13);
            CHECK_ALLCLOSE(g2, want2, n, 1e-14, 1e-13);
        }
        free(g1), free(g2), free(g1b), free(g2b);
        rel((tfc_tensor *[]){a, b, out, y, s1, t1, t2, d1[0], d1[1], h[0], h[1]}, 11);
        tfc_graph_release(g);
    }
}
