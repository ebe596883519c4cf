/*
 * Rotary position embedding (tfc_rope, tfc_rope_forward/backward) and its
 * frequencies (tfc_rope_inv_freq), against references written here: a
 * tiny case with values derived by hand, naive loops of HF's rotate-half
 * formula in double, f64 finite differences (gradcheck and a Hessian-vector
 * product), the adjoint identity <R x, dy> = <x, Rᵀ dy>, RoPE's relative
 * property, and each rope_scaling type's frequencies from its published
 * equations (and hand-derived numbers); every bad input names function and
 * argument; and the dispatch: through a stand-in table serving "cuda" (the
 * CPU's entries, standin_backend.h) the op runs where the table says, a
 * NULL entry is TFC_ERR_UNSUPPORTED naming op, device and dtype, and mixed
 * devices are TFC_ERR_DEVICE.
 */
#include <math.h>

#include "tfc_test.h"
#include "tfc_test_util.h"

#include "standin_backend.h"

TFC_TEST_MAIN

static tfc_tensor *i64s(const int64_t *v, const int64_t *dims, int32_t nd) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_I64, &t) != TFC_OK) abort();
    return t;
}

static tfc_tensor *f64s(const double *v, int64_t n) { return t_from(v, &n, 1); }

/* inv_freq [D/2] of the default config (theta) in dtype dt. */
static tfc_tensor *freqs(double theta, int64_t D, tfc_dtype dt) {
    tfc_rope_config c = TFC_ROPE_CONFIG_INIT;
    c.theta = theta;
    double f[512];
    if (tfc_rope_inv_freq(&c, D, 0, f) != TFC_OK) abort();
    tfc_tensor *t = f64s(f, D / 2), *r = NULL;
    if (tfc_cast(NULL, t, dt, &r) != TFC_OK) abort();
    tfc_tensor_release(t);
    return r;
}

static double max_abs_diff(const tfc_tensor *a, const tfc_tensor *b) {
    int64_t n = tfc_tensor_numel(a);
    double *va = t_vals(a), *vb = t_vals(b), m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(va[i] - vb[i]));
    if (tfc_tensor_numel(b) != n) m = INFINITY;
    free(va), free(vb);
    return m;
}

/* ---- forward: hand-derived values ---- */

/*
 * x [1,1,2,4] = [[0.5, -1, 2, 0.25], [1, 2, 3, 4]] at positions {0, 2},
 * theta 100, D 4: inv_freq = {1, 100^-1/2 = 0.1}. Position 0 leaves the row
 * as it is; at position 2 the pairs (x0, x2) = (1, 3) turn by 2 rad and
 * (x1, x3) = (2, 4) by 0.2 rad:
 *   y0 = 1 cos 2 − 3 sin 2,   y2 = 3 cos 2 + 1 sin 2,
 *   y1 = 2 cos .2 − 4 sin .2, y3 = 4 cos .2 + 2 sin .2,
 * evaluated (to 17 digits) as the literals below; the backward at the same
 * position with dy = (1, 2, 3, 4) turns the other way:
 *   dx0 = 1 cos 2 + 3 sin 2,  dx2 = 3 cos 2 − 1 sin 2,  dx1 = 2 cos .2 + 4 sin .2,  dx3 = 4 cos .2 − 2 sin .2.
 */
TEST(forward_and_backward_hand_values) {
    const double xv[8] = {0.5, -1, 2, 0.25, 1, 2, 3, 4};
    const int64_t dims[4] = {1, 1, 2, 4}, pv[2] = {0, 2}, pd[1] = {2};
    tfc_tensor *x = t_from(xv, dims, 4), *pos = i64s(pv, pd, 1), *inv = freqs(100.0, 4, TFC_DTYPE_F64), *y = NULL,
               *dx = NULL;
    double *iv = t_vals(inv);
    CHECK_CLOSE(iv[0], 1.0, 1e-16);
    CHECK_CLOSE(iv[1], 0.1, 1e-16);
    free(iv);
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F64, &y));
    CHECK_OK(tfc_rope_forward(x, pos, inv, y));
    double *v = t_vals(y);
    const double want[8] = {
        0.5, -1, 2, 0.25, -3.1440391170241875, 1.1654558325022384, -0.33914308281574557, 4.317604972955089};
    for (int i = 0; i < 8; i++) CHECK_CLOSE(v[i], want[i], 1e-15);
    free(v);
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F64, &dx));
    CHECK_OK(tfc_rope_backward(x, pos, inv, dx, 0)); /* dy = x's values */
    v = t_vals(dx);
    const double want_dx[8] = {
        0.5, -1, 2, 0.25, 2.3117454439299023, 2.754810478862728, -2.157737936467109, 3.522927649774844};
    for (int i = 0; i < 8; i++) CHECK_CLOSE(v[i], want_dx[i], 1e-15);
    free(v);
    /* TFC_GRAD_ACCUMULATE adds: twice the gradient */
    CHECK_OK(tfc_rope_backward(x, pos, inv, dx, TFC_GRAD_ACCUMULATE));
    v = t_vals(dx);
    for (int i = 0; i < 8; i++) CHECK_CLOSE(v[i], 2 * want_dx[i], 1e-15);
    free(v);
    tfc_tensor *all[] = {x, pos, inv, y, dx};
    for (int i = 0; i < 5; i++) tfc_tensor_release(all[i]);
}

/* ---- forward: naive loops on the layout a model hands it ---- */

/*
 * q, k as [B,H,T,D] views of a fused projection [B,T,3,H,D] (row strides,
 * no copy), positions [B,T] (a KV cache's offsets) and shared [T] / [1,T]:
 * the kernel against the formula looped here in double, for f64 (angles in
 * f64) and f32 (the angle the f32 product (float)p · inv_freq, as HF).
 */
static void check_layout(tfc_dtype dt, int pos_kind) {
    const int64_t B = 2, T = 5, H = 3, D = 10, h = D / 2, d5[5] = {B, T, 3, H, D};
    tfc_tensor *qkv64 = t_rand(d5, 5, -1, 1, 11), *qkv = NULL, *qkv5 = NULL, *perm = NULL, *parts[3] = {0}, *k = NULL;
    CHECK_OK(tfc_cast(NULL, qkv64, dt, &qkv5));
    CHECK_OK(tfc_permute(NULL, qkv5, (int32_t[]){2, 0, 3, 1, 4}, 5, &perm)); /* [3,B,H,T,D] */
    CHECK_OK(tfc_split(NULL, perm, (int64_t[]){1, 1, 1}, 3, 0, parts));
    CHECK_OK(tfc_squeeze(NULL, parts[1], 0, &k)); /* k [B,H,T,D], strided */
    CHECK(!tfc_tensor_is_contiguous(k));
    int64_t pv[10];
    for (int i = 0; i < 10; i++) pv[i] = pos_kind == 2 ? 17 + (i % 5) + 40 * (i / 5) : 3 + i;
    const int64_t pd2[2] = {B, T}, pd1[1] = {T}, pd12[2] = {1, T};
    tfc_tensor *pos = pos_kind == 2 ? i64s(pv, pd2, 2) : pos_kind == 1 ? i64s(pv, pd12, 2) : i64s(pv, pd1, 1);
    tfc_tensor *inv = freqs(10000.0, D, dt == TFC_DTYPE_F64 ? TFC_DTYPE_F64 : TFC_DTYPE_F32), *y = NULL;
    const int64_t dk[4] = {B, H, T, D};
    CHECK_OK(tfc_tensor_empty(dk, 4, dt, &y));
    CHECK_OK(tfc_rope_forward(k, pos, inv, y));
    double *xv = t_vals(qkv5), *yv = t_vals(y), *fv = t_vals(inv), worst = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t hd = 0; hd < H; hd++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t p = pv[pos_kind == 2 ? b * T + t : t];
                const double *xr = xv + (((b * T + t) * 3 + 1) * H + hd) * D; /* the k slot of qkv[b, t] */
                const double *yr = yv + ((b * H + hd) * T + t) * D;
                for (int64_t i = 0; i < h; i++) {
                    const double a = dt == TFC_DTYPE_F64 ? (double)p * fv[i] : (double)((float)p * (float)fv[i]);
                    const double y1 = xr[i] * cos(a) - xr[i + h] * sin(a), y2 = xr[i + h] * cos(a) + xr[i] * sin(a);
                    worst = fmax(worst, fmax(fabs(yr[i] - y1), fabs(yr[i + h] - y2)));
                }
            }
    tfc_test_checks++;
    if (!(worst <= (dt == TFC_DTYPE_F64 ? 1e-15 : 1e-6)))
        TFC_FAIL_AT("rope forward (%s, positions kind %d) is %.3g from the loops", dt == TFC_DTYPE_F64 ? "f64" : "f32",
                    pos_kind, worst);
    free(xv), free(yv), free(fv);
    tfc_tensor *all[] = {qkv64, qkv, qkv5, perm, parts[0], parts[1], parts[2], k, pos, inv, y};
    for (int i = 0; i < 11; i++) tfc_tensor_release(all[i]);
}

TEST(forward_on_strided_heads_matches_loops) {
    for (int kind = 0; kind < 3; kind++) {
        check_layout(TFC_DTYPE_F64, kind);
        check_layout(TFC_DTYPE_F32, kind);
    }
}

/*
 * Head dims above the kernel's 64-frequency chunk (D 160: chunks of 64 and
 * 16) and positions past 2^16: the f64 kernel against the loops.
 */
TEST(wide_heads_and_large_positions) {
    const int64_t D = 160, dims[4] = {1, 2, 3, D}, pv[3] = {0, 70000, 1 << 20}, pd[1] = {3};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 5), *pos = i64s(pv, pd, 1), *inv = freqs(500000.0, D, TFC_DTYPE_F64),
               *y = NULL;
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F64, &y));
    CHECK_OK(tfc_rope_forward(x, pos, inv, y));
    double *xv = t_vals(x), *yv = t_vals(y), worst = 0;
    for (int64_t r = 0; r < 6; r++)
        for (int64_t i = 0; i < D / 2; i++) {
            const double a = (double)pv[r % 3] / pow(500000.0, 2.0 * (double)i / (double)D);
            const double *xr = xv + r * D, *yr = yv + r * D;
            worst = fmax(worst, fabs(yr[i] - (xr[i] * cos(a) - xr[i + D / 2] * sin(a))));
            worst = fmax(worst, fabs(yr[i + D / 2] - (xr[i + D / 2] * cos(a) + xr[i] * sin(a))));
        }
    /* angles up to 2^20 rad: an ulp of the angle is 2e-10 */
    CHECK(worst <= 1e-9);
    free(xv), free(yv);
    tfc_tensor *all[] = {x, pos, inv, y};
    for (int i = 0; i < 4; i++) tfc_tensor_release(all[i]);
}

/* ---- backward ---- */

typedef struct rope_args {
    tfc_tensor *pos, *inv, *w;
} rope_args;

/* Σ w ⊙ rope(x)², so the gradient depends on x and weighs each output differently. */
static tfc_status rope_objective(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **out, void *ctx) {
    (void)n;
    const rope_args *a = ctx;
    tfc_tensor *y = NULL, *y2 = NULL, *wy = NULL;
    tfc_status s = tfc_rope(g, in[0], a->pos, a->inv, &y);
    if (s == TFC_OK) s = tfc_mul(g, y, y, &y2);
    if (s == TFC_OK) s = tfc_mul(g, y2, a->w, &wy);
    if (s == TFC_OK) s = tfc_sum(g, wy, NULL, 0, 0, out);
    tfc_tensor_release(y), tfc_tensor_release(y2), tfc_tensor_release(wy);
    return s;
}

TEST(gradcheck_f64_per_sequence_positions) {
    const int64_t dims[4] = {2, 2, 3, 6}, pv[6] = {4, 5, 6, 0, 1, 2}, pd[2] = {2, 3};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 21), *w = t_rand(dims, 4, -1, 1, 22);
    rope_args a = {i64s(pv, pd, 2), freqs(10.0, 6, TFC_DTYPE_F64), w};
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    double err = 1;
    CHECK_OK(tfc_gradcheck(rope_objective, &x, 1, &a, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-7);
    tfc_tensor *all[] = {x, w, a.pos, a.inv};
    for (int i = 0; i < 4; i++) tfc_tensor_release(all[i]);
}

/* <rope(x), dy> = <x, rope_backward(dy)> to f64 rounding: the backward is the forward's adjoint. */
TEST(backward_is_the_adjoint_and_the_graph_door_agrees) {
    const int64_t dims[4] = {2, 3, 4, 8}, pv[4] = {9, 3, 0, 100}, pd[1] = {4};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 31), *dy = t_rand(dims, 4, -1, 1, 32), *pos = i64s(pv, pd, 1);
    tfc_tensor *inv = freqs(10000.0, 8, TFC_DTYPE_F64), *y = NULL, *dx = NULL;
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F64, &y));
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F64, &dx));
    CHECK_OK(tfc_rope_forward(x, pos, inv, y));
    CHECK_OK(tfc_rope_backward(dy, pos, inv, dx, 0));
    double *xv = t_vals(x), *yv = t_vals(y), *dyv = t_vals(dy), *dxv = t_vals(dx), l = 0, r = 0;
    for (int i = 0; i < 2 * 3 * 4 * 8; i++) l += yv[i] * dyv[i], r += xv[i] * dxv[i];
    CHECK_CLOSE(l, r, 1e-13);
    /* a rotation keeps each row's norm */
    for (int row = 0; row < 24; row++) {
        double nx = 0, ny = 0;
        for (int i = 0; i < 8; i++) nx += xv[row * 8 + i] * xv[row * 8 + i], ny += yv[row * 8 + i] * yv[row * 8 + i];
        CHECK_CLOSE(ny, nx, 1e-14);
    }
    free(xv), free(yv), free(dyv), free(dxv);
    /* the graph door's backward is the explicit backward */
    tfc_graph *g = NULL;
    tfc_tensor *yg = NULL, *gx = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_rope(g, x, pos, inv, &yg));
    CHECK(max_abs_diff(yg, y) == 0);
    CHECK_OK(tfc_graph_backward(g, yg, dy));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx && max_abs_diff(gx, dx) == 0);
    tfc_tensor *all[] = {x, dy, pos, inv, y, dx, yg, gx};
    for (int i = 0; i < 8; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* The gradient of rope_objective at x (no graph kept). */
static tfc_tensor *grad_at(tfc_tensor *x, rope_args *a) {
    tfc_graph *g = NULL;
    tfc_tensor *l = NULL, *gr = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(rope_objective(g, &x, 1, &l, a));
    CHECK_OK(
        tfc_autograd_grad(g, (const tfc_tensor *const *)&l, 1, (const tfc_tensor *const *)&x, 1, NULL, 0, 0, 0, &gr));
    tfc_tensor_release(l);
    tfc_graph_release(g);
    return gr;
}

/*
 * create_graph through rope: H·v from the double backward against the
 * centred difference of the gradient along v, (g(x + εv) − g(x − εv)) / 2ε.
 */
TEST(double_backward_hessian_vector_product) {
    const int64_t dims[4] = {1, 2, 3, 4}, pv[3] = {1, 7, 2}, pd[2] = {1, 3};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 41), *v = t_rand(dims, 4, -1, 1, 42), *w = t_rand(dims, 4, -1, 1, 43);
    rope_args a = {i64s(pv, pd, 2), freqs(10.0, 4, TFC_DTYPE_F64), w};
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    tfc_graph *g = NULL;
    tfc_tensor *l = NULL, *gr = NULL, *gv = NULL, *s = NULL, *hv = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(rope_objective(g, &x, 1, &l, &a));
    CHECK_OK(
        tfc_autograd_grad(g, (const tfc_tensor *const *)&l, 1, (const tfc_tensor *const *)&x, 1, NULL, 1, 1, 0, &gr));
    CHECK_OK(tfc_mul(g, gr, v, &gv));
    CHECK_OK(tfc_sum(g, gv, NULL, 0, 0, &s));
    CHECK_OK(
        tfc_autograd_grad(g, (const tfc_tensor *const *)&s, 1, (const tfc_tensor *const *)&x, 1, NULL, 0, 0, 0, &hv));
    const double eps = 1e-5;
    double *xv = t_vals(x), *vv = t_vals(v), *hvv = t_vals(hv), xp[24], xm[24];
    for (int i = 0; i < 24; i++) xp[i] = xv[i] + eps * vv[i], xm[i] = xv[i] - eps * vv[i];
    tfc_tensor *tp = t_from(xp, dims, 4), *tm = t_from(xm, dims, 4);
    CHECK_OK(tfc_tensor_set_requires_grad(tp, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(tm, 1));
    tfc_tensor *gp = grad_at(tp, &a), *gm = grad_at(tm, &a);
    double *gpv = t_vals(gp), *gmv = t_vals(gm), worst = 0;
    for (int i = 0; i < 24; i++) worst = fmax(worst, fabs(hvv[i] - (gpv[i] - gmv[i]) / (2 * eps)));
    CHECK(worst < 1e-8);
    free(xv), free(vv), free(hvv), free(gpv), free(gmv);
    tfc_tensor *all[] = {x, v, w, a.pos, a.inv, l, gr, gv, s, hv, tp, tm, gp, gm};
    for (int i = 0; i < 14; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* ---- positions ---- */

/*
 * A KV cache's decode step: the last two tokens alone at positions {3, 4}
 * give the rows that the whole sequence at 0..4 gives them; and q·k after
 * rotation depends only on the distance of their positions (shifting both
 * by 50 changes nothing).
 */
TEST(offset_positions_and_relative_property) {
    const int64_t dims[4] = {1, 2, 5, 6}, pv[5] = {0, 1, 2, 3, 4}, pd[1] = {5}, pv2[2] = {3, 4}, pd2[1] = {2};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 51), *pos = i64s(pv, pd, 1), *pos2 = i64s(pv2, pd2, 1);
    tfc_tensor *inv = freqs(10000.0, 6, TFC_DTYPE_F64), *y = NULL, *tail = NULL, *y2 = NULL, *ytail = NULL;
    CHECK_OK(tfc_rope(NULL, x, pos, inv, &y));
    CHECK_OK(tfc_narrow(NULL, x, 2, 3, 2, &tail));
    CHECK_OK(tfc_rope(NULL, tail, pos2, inv, &y2));
    CHECK_OK(tfc_narrow(NULL, y, 2, 3, 2, &ytail));
    CHECK(max_abs_diff(y2, ytail) == 0);
    /* rows 0 (q at 1) and 1 (k at 4) of head 0, then both shifted by 50 */
    const int64_t qk[2] = {1, 4}, qk50[2] = {51, 54}, d2[1] = {2}, two[4] = {1, 1, 2, 6};
    double *xv = t_vals(x), qkv[12];
    for (int i = 0; i < 12; i++) qkv[i] = xv[i];
    tfc_tensor *xq = t_from(qkv, two, 4), *p1 = i64s(qk, d2, 1), *p2 = i64s(qk50, d2, 1), *r1 = NULL, *r2 = NULL;
    CHECK_OK(tfc_rope(NULL, xq, p1, inv, &r1));
    CHECK_OK(tfc_rope(NULL, xq, p2, inv, &r2));
    double *a = t_vals(r1), *b = t_vals(r2), d1 = 0, dd = 0;
    for (int i = 0; i < 6; i++) d1 += a[i] * a[6 + i], dd += b[i] * b[6 + i];
    CHECK_CLOSE(dd, d1, 1e-13);
    free(xv), free(a), free(b);
    tfc_tensor *all[] = {x, pos, pos2, inv, y, tail, y2, ytail, xq, p1, p2, r1, r2};
    for (int i = 0; i < 13; i++) tfc_tensor_release(all[i]);
}

/* ---- inv_freq of each rope_scaling type ---- */

/* The frequencies of c for head_dim D, seq_len n, against want[] (D/2 values). */
static void check_freqs(const char *what, const tfc_rope_config *c, int64_t D, int64_t n, const double *want) {
    double got[256];
    CHECK_OK(tfc_rope_inv_freq(c, D, n, got));
    for (int64_t i = 0; i < D / 2; i++) {
        tfc_test_checks++;
        if (!(fabs(got[i] - want[i]) <= 1e-15 * fabs(want[i])))
            TFC_FAIL_AT("%s: inv_freq[%lld] is %.17g, want %.17g", what, (long long)i, got[i], want[i]);
    }
}

/*
 * Hand-derived: theta 10000, D 8 → 1, 0.1, 0.01, 0.001; linear (factor 4)
 * divides them by 4; dynamic (D 4, L 10, factor 2) at seq_len 20 uses theta'
 * = 10000 · (2·20/10 − 1)^(4/2) = 90000 → 1, 1/300, and at seq_len ≤ 10 the
 * default; llama3 (factor 8, O 1000, low 1, high 4: wavelengths 2π/f =
 * 6.28, 62.8, 628, 6283 against the bands 250 and 1000) keeps 1 and 0.1,
 * divides 0.001 by 8, and blends 0.01 with s = (1000/(200π) − 1)/3 =
 * 0.1971831436396511: (1 − s)·0.01/8 + s·0.01 = 0.002975352506846947.
 */
TEST(inv_freq_hand_values) {
    tfc_rope_config c = TFC_ROPE_CONFIG_INIT;
    check_freqs("default", &c, 8, 0, (double[]){1, 0.1, 0.01, 0.001});
    c.rope_type = TFC_ROPE_LINEAR, c.factor = 4;
    check_freqs("linear", &c, 8, 0, (double[]){0.25, 0.025, 0.0025, 0.00025});
    c.rope_type = TFC_ROPE_DYNAMIC, c.factor = 2, c.max_position_embeddings = 10;
    check_freqs("dynamic past L", &c, 4, 20, (double[]){1, 1.0 / 300});
    check_freqs("dynamic at L", &c, 4, 10, (double[]){1, 0.01});
    check_freqs("dynamic before any sequence", &c, 4, 0, (double[]){1, 0.01});
    c.rope_type = TFC_ROPE_LLAMA3, c.factor = 8, c.original_max_position_embeddings = 1000;
    c.low_freq_factor = 1, c.high_freq_factor = 4;
    check_freqs("llama3", &c, 8, 123456, (double[]){1, 0.1, 0.002975352506846947, 0.000125});
}

/*
 * Llama 3.1 8B's real config (theta 500000, head_dim 128, factor 8, low 1,
 * high 4, original 8192) and a dynamic one (theta 10000, D 64, L 2048,
 * factor 2, seq_len 5000), against the equations as transformers writes
 * them, looped here: every band of llama3 is hit.
 */
TEST(inv_freq_from_the_published_equations) {
    double want[64];
    tfc_rope_config c = TFC_ROPE_CONFIG_INIT;
    c.rope_type = TFC_ROPE_LLAMA3, c.theta = 500000, c.factor = 8, c.low_freq_factor = 1, c.high_freq_factor = 4;
    c.original_max_position_embeddings = 8192, c.max_position_embeddings = 131072;
    int bands[3] = {0, 0, 0};
    for (int i = 0; i < 64; i++) {
        const double f = 1.0 / pow(500000.0, (2.0 * i) / 128.0), wl = 2 * M_PI / f;
        const double low_wl = 8192.0 / 1.0, high_wl = 8192.0 / 4.0;
        double r = wl > low_wl ? f / 8 : f;
        if (!(wl < high_wl) && !(wl > low_wl)) {
            const double s = (8192.0 / wl - 1.0) / (4.0 - 1.0);
            r = (1 - s) * r / 8 + s * r;
        }
        bands[wl < high_wl ? 0 : wl > low_wl ? 2 : 1]++;
        want[i] = r;
    }
    CHECK(bands[0] > 0 && bands[1] > 0 && bands[2] > 0);
    check_freqs("llama3 (Llama 3.1 8B)", &c, 128, 0, want);
    tfc_rope_config d = TFC_ROPE_CONFIG_INIT;
    d.rope_type = TFC_ROPE_DYNAMIC, d.factor = 2, d.max_position_embeddings = 2048;
    const double base = 10000.0 * pow(2.0 * 5000 / 2048 - (2.0 - 1), 64.0 / 62.0);
    for (int i = 0; i < 32; i++) want[i] = 1.0 / pow(base, (2.0 * i) / 64.0);
    check_freqs("dynamic at 5000 of 2048", &d, 64, 5000, want);
}

/* ---- bad input ---- */

TEST(bad_input_names_function_and_argument) {
    const int64_t dims[4] = {1, 2, 3, 4}, odd[4] = {1, 2, 3, 5}, three[3] = {2, 3, 4}, pv[6] = {0, 1, 2, 3, 4, 5};
    const int64_t pd[1] = {3}, pd23[2] = {2, 3}, pd4[1] = {4};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 61), *xo = t_rand(odd, 4, -1, 1, 62), *x3 = t_rand(three, 3, -1, 1, 63);
    tfc_tensor *pos = i64s(pv, pd, 1), *pos23 = i64s(pv, pd23, 2), *pos4 = i64s(pv, pd4, 1);
    tfc_tensor *inv = freqs(100.0, 4, TFC_DTYPE_F64), *inv32 = freqs(100.0, 4, TFC_DTYPE_F32);
    tfc_tensor *inv3 = freqs(100.0, 6, TFC_DTYPE_F64), *pos32 = NULL, *y = NULL, *y32 = NULL, *r = NULL;
    CHECK_OK(tfc_cast(NULL, pos, TFC_DTYPE_I32, &pos32));
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F64, &y));
    CHECK_OK(tfc_tensor_empty(dims, 4, TFC_DTYPE_F32, &y32));
    CHECK_ERR(tfc_rope(NULL, xo, pos, inv, &r), TFC_ERR_SHAPE, "head dim D = 5 must be even");
    CHECK_ERR(tfc_rope(NULL, x3, pos, inv, &r), TFC_ERR_SHAPE, "x is [2,3,4]; it must be 4-D [B,H,T,D]");
    CHECK_ERR(tfc_rope_forward(x, pos32, inv, y), TFC_ERR_DTYPE, "tfc_rope_forward: positions is i32 [3]");
    CHECK_ERR(tfc_rope_forward(x, pos4, inv, y), TFC_ERR_SHAPE, "positions must be [T], [1,T] or [B,T] = [1,3]");
    CHECK_ERR(tfc_rope_forward(x, pos23, inv, y), TFC_ERR_SHAPE, "positions is [2,3]");
    CHECK_ERR(tfc_rope_forward(x, pos, inv32, y), TFC_ERR_DTYPE, "inv_freq is f32 [2], must be f64");
    CHECK_ERR(tfc_rope_forward(x, pos, inv3, y), TFC_ERR_SHAPE, "inv_freq is [3], must be [2]");
    CHECK_ERR(tfc_rope_forward(x, pos, inv, y32), TFC_ERR_DTYPE, "output y is f32");
    CHECK_ERR(tfc_rope_forward(x, pos, inv, x), TFC_ERR_INVALID_ARG, "output y [1,2,3,4] overlaps x");
    CHECK_ERR(tfc_rope_forward(x, NULL, inv, y), TFC_ERR_INVALID_ARG, "tfc_rope_forward: positions is NULL");
    CHECK_ERR(tfc_rope_backward(x, pos, NULL, y, 0), TFC_ERR_INVALID_ARG, "tfc_rope_backward: inv_freq is NULL");
    CHECK_ERR(tfc_rope_backward(x, pos, inv, y, 4), TFC_ERR_INVALID_ARG, "flags is 0x4");
    CHECK_ERR(tfc_rope_backward(x, pos, inv, NULL, 0), TFC_ERR_INVALID_ARG, "dx");
    /* a negative position: refused before anything is written */
    const int64_t neg[3] = {0, 5, -7};
    tfc_tensor *posn = i64s(neg, pd, 1);
    CHECK_OK(tfc_tensor_fill(y, 3.0));
    CHECK_ERR(tfc_rope_forward(x, posn, inv, y), TFC_ERR_INVALID_ARG,
              "tfc_rope_forward: positions holds -7 at flat index 2; positions must be >= 0");
    CHECK_ERR(tfc_rope_backward(x, posn, inv, y, TFC_GRAD_ACCUMULATE), TFC_ERR_INVALID_ARG, "holds -7");
    double *yv = t_vals(y);
    int untouched = 1;
    for (int i = 0; i < 24; i++) untouched &= yv[i] == 3.0;
    CHECK(untouched);
    free(yv);
    /* gradients reach x only: a trainable inv_freq is refused, not silently ignored */
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(inv, 1));
    CHECK_ERR(tfc_rope(g, x, pos, inv, &r), TFC_ERR_INVALID_ARG, "tfc_rope: inv_freq [2] requires grad");
    CHECK_OK(tfc_rope(NULL, x, pos, inv, &r)); /* nothing recorded: fine */
    CHECK(r != NULL);
    tfc_tensor_release(r);
    r = NULL;
    CHECK_ERR(tfc_rope(g, x, NULL, inv, &r), TFC_ERR_INVALID_ARG, "tfc_rope: positions is NULL");
    CHECK(r == NULL);
    tfc_graph_release(g);
    tfc_tensor *all[] = {x, xo, x3, pos, pos23, pos4, inv, inv32, inv3, pos32, y, y32, posn};
    for (int i = 0; i < 13; i++) tfc_tensor_release(all[i]);
}

TEST(bad_configs_name_the_field) {
    double f[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    tfc_rope_config c = TFC_ROPE_CONFIG_INIT;
    CHECK_ERR(tfc_rope_inv_freq(&c, 7, 0, f), TFC_ERR_INVALID_ARG, "tfc_rope_inv_freq: head_dim is 7, must be even");
    CHECK_ERR(tfc_rope_inv_freq(&c, 0, 0, f), TFC_ERR_INVALID_ARG, "head_dim is 0");
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, -1, f), TFC_ERR_INVALID_ARG, "seq_len is -1, must be >= 0");
    CHECK_ERR(tfc_rope_inv_freq(NULL, 8, 0, f), TFC_ERR_INVALID_ARG, "config");
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, NULL), TFC_ERR_INVALID_ARG, "inv_freq");
    c.theta = 0;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->theta is 0");
    c.theta = NAN;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->theta is nan");
    c = (tfc_rope_config)TFC_ROPE_CONFIG_INIT;
    c.rope_type = 7;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->rope_type is 7; known rope types");
    c.rope_type = TFC_ROPE_LINEAR, c.factor = 0;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->factor is 0, must be finite and > 0");
    c.rope_type = TFC_ROPE_DYNAMIC, c.factor = -2;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->factor is -2");
    c.factor = 2, c.max_position_embeddings = 0;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->max_position_embeddings is 0");
    c.max_position_embeddings = 16;
    CHECK_ERR(tfc_rope_inv_freq(&c, 2, 0, f), TFC_ERR_INVALID_ARG, "dynamic scaling needs head_dim > 2");
    c.rope_type = TFC_ROPE_LLAMA3, c.factor = 8, c.high_freq_factor = 1;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG,
              "config->high_freq_factor is 1, must be finite and >");
    c.high_freq_factor = 4, c.low_freq_factor = 0;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->low_freq_factor is 0");
    c.low_freq_factor = 1, c.original_max_position_embeddings = -1;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_INVALID_ARG, "config->original_max_position_embeddings is -1");
    c = (tfc_rope_config)TFC_ROPE_CONFIG_INIT;
    c.struct_size = 8;
    CHECK_ERR(tfc_rope_inv_freq(&c, 8, 0, f), TFC_ERR_VERSION, "config->struct_size is 8");
    /* nothing written on any error */
    for (int i = 0; i < 8; i++) CHECK(f[i] == 7);
    /* a field the type does not read may hold anything */
    c = (tfc_rope_config)TFC_ROPE_CONFIG_INIT;
    c.factor = -1, c.high_freq_factor = NAN, c.max_position_embeddings = -5;
    CHECK_OK(tfc_rope_inv_freq(&c, 8, 0, f));
}

/* ---- dispatch ---- */

/* t on "cuda:0" of the stand-in table (host memory). */
static tfc_tensor *on_standin(const tfc_tensor *t) {
    tfc_tensor *r = NULL;
    CHECK_OK(tfc_tensor_to_device(t, TFC_DEVICE_CUDA, 0, &r));
    return r;
}

TEST(dispatch_follows_the_table) {
    const int64_t dims[4] = {2, 2, 3, 4}, pv[6] = {5, 6, 7, 0, 1, 2}, pd[2] = {2, 3};
    tfc_tensor *x = t_rand(dims, 4, -1, 1, 71), *pos = i64s(pv, pd, 2), *inv = freqs(10000.0, 4, TFC_DTYPE_F64);
    tfc_tensor *want = NULL, *got = NULL, *sentinel = (tfc_tensor *)&got;
    CHECK_OK(tfc_rope(NULL, x, pos, inv, &want));
    tfc_backend *sb = standin_install();
    tfc_tensor *cx = on_standin(x), *cp = on_standin(pos), *ci = on_standin(inv);
    CHECK_OK(tfc_rope(NULL, cx, cp, ci, &got));
    CHECK(tfc_tensor_device_type(got) == TFC_DEVICE_CUDA);
    CHECK(max_abs_diff(got, want) == 0);
    tfc_tensor_release(got);
    got = sentinel;
    CHECK_ERR(tfc_rope(NULL, cx, pos, ci, &got), TFC_ERR_DEVICE,
              "tfc_rope_forward: x lives on cuda:0 but positions lives on cpu");
    CHECK_ERR(tfc_rope(NULL, cx, cp, inv, &got), TFC_ERR_DEVICE, "inv_freq lives on cpu");
    sb->rope_forward = NULL;
    CHECK_ERR(tfc_rope(NULL, cx, cp, ci, &got), TFC_ERR_UNSUPPORTED,
              "rope_forward is not implemented on cuda:0 for f64");
    sb->rope_backward = NULL;
    tfc_tensor *dx = on_standin(x);
    CHECK_ERR(tfc_rope_backward(cx, cp, ci, dx, 0), TFC_ERR_UNSUPPORTED,
              "tfc_rope_backward: rope_backward is not implemented on cuda:0 for f64");
    CHECK(got == sentinel);
    tfc_tensor *all[] = {x, pos, inv, want, cx, cp, ci, dx};
    for (int i = 0; i < 8; i++) tfc_tensor_release(all[i]);
    standin_remove();
}
