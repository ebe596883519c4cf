/*
 * Attention with grouped-query heads and a sliding window
 * (tfc_attention_forward_ex / tfc_attention_backward_ex, tfc_attention_ex)
 * on the CPU: forwards against a naive f64 loop written here from the
 * definitions (query head h reads kv head h / G as Hugging Face's
 * repeat_kv orders them; causal keeps j <= i + S - T, a window W also
 * j > i + S - T - W, i.e. transformers' kv_idx > q_idx - sliding_window
 * with q_idx the query's position), backwards against centred finite
 * differences of the f64 forward (dk, dv of a kv head summing over its
 * query heads), hand-derived values (a window of 1), f32 on both kernel
 * paths, strided k/v, thread-count independence, the graph door, and bad
 * arguments with their messages.
 */
#include "tfc_test.h"

#include "cpu/kernels.h"
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t rng_state;
static void seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
static double *rand_vec(int64_t n, double lo, double hi) {
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
    }
    return v;
}

/* A contiguous tensor of dtype dt holding vals (NULL: zeros). */
static tfc_tensor *mk(tfc_dtype dt, const int64_t *dims, int nd, const double *vals) {
    tfc_tensor *t = NULL, *f = NULL;
    if (!vals) {
        if (tfc_tensor_zeros(dims, nd, dt, &t) != TFC_OK) abort();
        return t;
    }
    f = t_from(vals, dims, nd);
    if (tfc_cast(NULL, f, dt, &t) != TFC_OK) abort();
    tfc_tensor_release(f);
    return t;
}

/* Largest |a − b| / (atol + rtol·|b|) over n values; -inf == -inf counts as equal; <= 1 means close. */
static double worst(const double *a, const double *b, int64_t n, double atol, double rtol) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(b[i]) && a[i] == b[i]) continue;
        double e = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(e <= w)) w = e;
    }
    return w;
}
#define CHECK_ALLCLOSE(a, b, n, atol, rtol, what)                                             \
    do {                                                                                      \
        double w_ = worst((a), (b), (n), (atol), (rtol));                                     \
        tfc_test_checks++;                                                                    \
        if (!(w_ <= 1)) TFC_FAIL_AT("%s: %s vs %s: off by %g x tolerance", what, #a, #b, w_); \
    } while (0)

static void rel(tfc_tensor *a, tfc_tensor *b, tfc_tensor *c, tfc_tensor *d, tfc_tensor *e, tfc_tensor *f) {
    tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(c);
    tfc_tensor_release(d), tfc_tensor_release(e), tfc_tensor_release(f);
}

/* ---- the problem and its reference ------------------------------------------------------ */

typedef struct gqa_cfg {
    int64_t B, H, Hkv, T, S, D, Dv;
    int causal;
    int64_t window;
} gqa_cfg;

static void cfg_name(const gqa_cfg *c, char *buf, size_t n) {
    snprintf(buf, n, "B %lld H %lld Hkv %lld T %lld S %lld D %lld Dv %lld causal %d window %lld", (long long)c->B,
             (long long)c->H, (long long)c->Hkv, (long long)c->T, (long long)c->S, (long long)c->D, (long long)c->Dv,
             c->causal, (long long)c->window);
}

/*
 * Naive attention, one score row at a time: query head h of batch b reads
 * kv head h / (H / Hkv); query i (position i + S − T) sees key j iff
 * !causal, or j <= i + S − T and (W == 0 or j > i + S − T − W).
 */
static void ref_attention(const gqa_cfg *c, double scale, const double *q, const double *k, const double *v,
                          double *out, double *lse) {
    const int64_t G = c->H / c->Hkv, off = c->S - c->T;
    double *s = malloc(sizeof(double) * (size_t)(c->S > 0 ? c->S : 1));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++) {
            const int64_t bh = b * c->H + h, bk = b * c->Hkv + h / G;
            for (int64_t i = 0; i < c->T; i++) {
                const double *qi = q + (bh * c->T + i) * c->D;
                double *oi = out + (bh * c->T + i) * c->Dv, m = -INFINITY;
                for (int64_t j = 0; j < c->S; j++) {
                    int seen = !c->causal || (j <= i + off && (c->window == 0 || j > i + off - c->window));
                    double d = 0;
                    for (int64_t e = 0; e < c->D; e++) d += qi[e] * k[(bk * c->S + j) * c->D + e];
                    s[j] = seen ? scale * d : -INFINITY;
                    m = fmax(m, s[j]);
                }
                for (int64_t e = 0; e < c->Dv; e++) oi[e] = 0;
                if (m == -INFINITY) {
                    lse[bh * c->T + i] = -INFINITY;
                    continue;
                }
                double z = 0;
                for (int64_t j = 0; j < c->S; j++) z += exp(s[j] - m);
                const double l = m + log(z);
                lse[bh * c->T + i] = l;
                for (int64_t j = 0; j < c->S; j++)
                    for (int64_t e = 0; e < c->Dv; e++) oi[e] += exp(s[j] - l) * v[(bk * c->S + j) * c->Dv + e];
            }
        }
    free(s);
}

typedef struct gqa_data {
    gqa_cfg c;
    double scale;
    double *q, *k, *v, *R; /* R: the upstream gradient dout */
    int64_t qd[4], kd[4], vd[4], od[4], nq, nk, nv, no;
} gqa_data;

static void gqa_make(gqa_data *a, gqa_cfg c, uint64_t s) {
    a->c = c;
    a->scale = 1 / sqrt((double)c.D);
    const int64_t qd[4] = {c.B, c.H, c.T, c.D}, kd[4] = {c.B, c.Hkv, c.S, c.D}, vd[4] = {c.B, c.Hkv, c.S, c.Dv},
                  od[4] = {c.B, c.H, c.T, c.Dv};
    memcpy(a->qd, qd, sizeof qd), memcpy(a->kd, kd, sizeof kd), memcpy(a->vd, vd, sizeof vd);
    memcpy(a->od, od, sizeof od);
    a->nq = c.B * c.H * c.T * c.D, a->nk = c.B * c.Hkv * c.S * c.D, a->nv = c.B * c.Hkv * c.S * c.Dv;
    a->no = c.B * c.H * c.T * c.Dv;
    seed(s);
    a->q = rand_vec(a->nq, -1.5, 1.5), a->k = rand_vec(a->nk, -1.5, 1.5), a->v = rand_vec(a->nv, -1, 1);
    a->R = rand_vec(a->no, -1, 1);
}
static void gqa_free(gqa_data *a) { free(a->q), free(a->k), free(a->v), free(a->R); }

static tfc_attention_options opts_of(const gqa_cfg *c) {
    tfc_attention_options o = TFC_ATTENTION_OPTIONS_INIT;
    o.window = c->window;
    return o;
}

/* Forward (out, lse) and backward (dq, dk, dv with dout = R) of a in dtype dt through the explicit _ex doors. */
static void gqa_run(const gqa_data *a, tfc_dtype dt, double **out, double **lse, double **dq, double **dk,
                    double **dv) {
    const tfc_attention_options o = opts_of(&a->c);
    tfc_tensor *q = mk(dt, a->qd, 4, a->q), *k = mk(dt, a->kd, 4, a->k), *v = mk(dt, a->vd, 4, a->v);
    tfc_tensor *ot = mk(dt, a->od, 4, NULL), *l = mk(dt, a->od, 3, NULL), *go = mk(dt, a->od, 4, a->R);
    tfc_tensor *gq = mk(dt, a->qd, 4, NULL), *gk = mk(dt, a->kd, 4, NULL), *gv = mk(dt, a->vd, 4, NULL);
    CHECK_OK(tfc_attention_forward_ex(q, k, v, a->c.causal, a->scale, &o, ot, l));
    CHECK_OK(tfc_attention_backward_ex(go, q, k, v, ot, l, a->c.causal, a->scale, &o, gq, gk, gv, 0));
    *out = t_vals(ot), *lse = t_vals(l), *dq = t_vals(gq), *dk = t_vals(gk), *dv = t_vals(gv);
    rel(q, k, v, ot, l, go);
    rel(gq, gk, gv, NULL, NULL, NULL);
}

/* The f64 forward's out, for finite differences. */
static void gqa_eval(const gqa_data *a, double *out) {
    const tfc_attention_options o = opts_of(&a->c);
    tfc_tensor *q = mk(TFC_DTYPE_F64, a->qd, 4, a->q), *k = mk(TFC_DTYPE_F64, a->kd, 4, a->k);
    tfc_tensor *v = mk(TFC_DTYPE_F64, a->vd, 4, a->v), *ot = mk(TFC_DTYPE_F64, a->od, 4, NULL);
    if (tfc_attention_forward_ex(q, k, v, a->c.causal, a->scale, &o, ot, NULL) != TFC_OK) abort();
    memcpy(out, tfc_tensor_data(ot), sizeof(double) * (size_t)a->no);
    rel(q, k, v, ot, NULL, NULL);
}

/*
 * Worst relative error |a − n| / (|a| + |n| + 1e-8) of analytic against
 * the finite difference of L = Σ R ⊙ out over every element of param. The
 * difference is the fourth-order centred one,
 *   n = (L(x − 2h) − 8 L(x − h) + 8 L(x + h) − L(x + 2h)) / 12h,  h = 1e-4,
 * whose truncation error (~h⁴) and rounding error (~1e-16 / h) both stay
 * near 1e-12: the plain (L(x + h) − L(x − h)) / 2h at h = 1e-6 carries
 * ~1e-10 of rounding, which is a relative 1e-6 on the small dk elements of
 * keys few queries see.
 */
static double gqa_gradcheck(gqa_data *a, double *param, int64_t nparam, const double *analytic) {
    const double h = 1e-4;
    double *y[4], w = 0;
    for (int s = 0; s < 4; s++) y[s] = malloc(sizeof(double) * (size_t)a->no);
    for (int64_t i = 0; i < nparam; i++) {
        const double save = param[i];
        for (int s = 0; s < 4; s++) {
            param[i] = save + (s < 2 ? s - 2 : s - 1) * h; /* x − 2h, x − h, x + h, x + 2h */
            gqa_eval(a, y[s]);
        }
        param[i] = save;
        /* Output by output before weighting, so outputs the perturbation does not touch cancel exactly. */
        double num = 0;
        for (int64_t j = 0; j < a->no; j++) num += a->R[j] * ((y[0][j] - y[3][j]) + 8 * (y[2][j] - y[1][j]));
        num /= 12 * h;
        const double e = fabs(analytic[i] - num) / (fabs(analytic[i]) + fabs(num) + 1e-8);
        if (!(e <= w)) w = e;
    }
    for (int s = 0; s < 4; s++) free(y[s]);
    return w;
}

/* Run body for the portable f32 kernels and again for the AVX2 ones. */
#define FOR_BOTH_F32_PATHS(...)               \
    for (int path_ = 0; path_ < 2; path_++) { \
        tfc_cpu_avx2_disabled = path_ == 0;   \
        __VA_ARGS__                           \
    }                                         \
    tfc_cpu_avx2_disabled = 0

/*
 * (B, H, Hkv, T, S, D, Dv, causal, window): multi-query (Hkv 1), grouped
 * (Hkv 2), Hkv = H; windows shorter than S, within one 64-key tile and
 * across tiles; T < S (a KV cache, bottom-right aligned: T new queries at
 * positions S − T .. S − 1); T > S (rows seeing no key); non-causal GQA.
 */
static const gqa_cfg cfgs[] = {
    {2, 4, 1, 37, 37, 8, 8, 1, 0},   {2, 4, 2, 37, 37, 8, 8, 1, 0},     {2, 4, 4, 37, 37, 8, 8, 1, 0},
    {1, 6, 2, 30, 45, 16, 12, 0, 0}, {2, 4, 2, 100, 100, 16, 16, 1, 7}, {1, 4, 1, 100, 130, 64, 64, 1, 70},
    {1, 6, 3, 5, 150, 16, 8, 1, 64}, {1, 2, 1, 1, 130, 16, 16, 1, 40},  {1, 4, 2, 70, 20, 5, 3, 1, 6},
    {1, 4, 2, 200, 200, 8, 8, 1, 1}, {1, 8, 2, 65, 129, 32, 32, 1, 65},
};

/* ---- tests ------------------------------------------------------------------------------- */

TEST(gqa_window_forward_matches_reference_f64_and_f32) {
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        gqa_data a;
        gqa_make(&a, cfgs[ci], 100 + ci);
        char what[160];
        cfg_name(&a.c, what, sizeof what);
        double *ro = malloc(sizeof(double) * (size_t)a.no), *rl = malloc(sizeof(double) * (size_t)(a.no / a.c.Dv));
        ref_attention(&a.c, a.scale, a.q, a.k, a.v, ro, rl);
        double *o, *l, *dq, *dk, *dv;
        gqa_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
        CHECK_ALLCLOSE(o, ro, a.no, 1e-14, 1e-12, what);
        CHECK_ALLCLOSE(l, rl, a.no / a.c.Dv, 1e-12, 1e-12, what);
        FOR_BOTH_F32_PATHS({
            double *o32, *l32, *dq32, *dk32, *dv32;
            gqa_run(&a, TFC_DTYPE_F32, &o32, &l32, &dq32, &dk32, &dv32);
            CHECK_ALLCLOSE(o32, ro, a.no, 1e-5, 1e-4, what);
            CHECK_ALLCLOSE(l32, rl, a.no / a.c.Dv, 1e-5, 1e-5, what);
            CHECK_ALLCLOSE(dq32, dq, a.nq, 1e-5, 1e-3, what);
            CHECK_ALLCLOSE(dk32, dk, a.nk, 1e-5, 1e-3, what);
            CHECK_ALLCLOSE(dv32, dv, a.nv, 1e-5, 1e-3, what);
            free(o32), free(l32), free(dq32), free(dk32), free(dv32);
        });
        free(o), free(l), free(dq), free(dk), free(dv), free(ro), free(rl);
        gqa_free(&a);
    }
}

TEST(gqa_window_backward_gradcheck_f64) {
    /* Small enough for finite differences, yet several key tiles and query tiles where the window crosses them. */
    static const gqa_cfg gc[] = {
        {1, 4, 1, 9, 9, 3, 2, 1, 0},   /* multi-query, causal */
        {2, 4, 2, 7, 11, 3, 4, 1, 0},  /* grouped, KV-cache shaped (T < S) */
        {1, 2, 2, 6, 6, 2, 3, 0, 0},   /* Hkv = H, not causal */
        {1, 4, 2, 40, 70, 3, 2, 1, 9}, /* a window of 9 over 70 keys, two query tiles, two key tiles */
        {1, 3, 1, 5, 69, 2, 3, 1, 66}, /* T < S, the window crossing the tile edge at 64 */
        {1, 4, 2, 9, 6, 3, 2, 1, 2},   /* T > S: rows 0..2 see nothing */
    };
    for (size_t ci = 0; ci < sizeof gc / sizeof gc[0]; ci++) {
        gqa_data a;
        gqa_make(&a, gc[ci], 200 + ci);
        char what[200], w2[220];
        cfg_name(&a.c, what, sizeof what);
        double *o, *l, *dq, *dk, *dv;
        gqa_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
        const double e[3] = {gqa_gradcheck(&a, a.q, a.nq, dq), gqa_gradcheck(&a, a.k, a.nk, dk),
                             gqa_gradcheck(&a, a.v, a.nv, dv)};
        const char *names[3] = {"dq", "dk", "dv"};
        for (int i = 0; i < 3; i++) {
            tfc_test_checks++;
            snprintf(w2, sizeof w2, "%s %s", what, names[i]);
            if (getenv("TFC_TEST_VERBOSE")) printf("gradcheck %s: %g\n", w2, e[i]);
            if (!(e[i] < 1e-7)) TFC_FAIL_AT("gradcheck %s: worst relative error %g", w2, e[i]);
        }
        free(o), free(l), free(dq), free(dk), free(dv);
        gqa_free(&a);
    }
}

/*
 * A window of 1: query i sees only key i + S − T, so out_i = v_{i+S−T} and
 * lse_i = scale · q_i · k_{i+S−T} (derived by hand: a softmax over one
 * score is 1); its gradients: dv_j = Σ over the group's heads of dout at
 * the query at j, dq = dk = 0 (dS = P (dP − Δ) with P = 1 and Δ = dP).
 */
TEST(window_of_one_is_the_diagonal) {
    gqa_cfg c = {1, 4, 2, 5, 8, 3, 2, 1, 1};
    gqa_data a;
    gqa_make(&a, c, 300);
    double *o, *l, *dq, *dk, *dv;
    gqa_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
    const int64_t G = c.H / c.Hkv, off = c.S - c.T;
    double *wdv = calloc((size_t)a.nv, sizeof(double));
    for (int64_t h = 0; h < c.H; h++)
        for (int64_t i = 0; i < c.T; i++) {
            const int64_t j = i + off, hk = h / G;
            double d = 0;
            for (int64_t e = 0; e < c.D; e++) d += a.q[(h * c.T + i) * c.D + e] * a.k[(hk * c.S + j) * c.D + e];
            CHECK_CLOSE(l[h * c.T + i], a.scale * d, 1e-14);
            for (int64_t e = 0; e < c.Dv; e++) {
                CHECK_CLOSE(o[(h * c.T + i) * c.Dv + e], a.v[(hk * c.S + j) * c.Dv + e], 1e-14);
                wdv[(hk * c.S + j) * c.Dv + e] += a.R[(h * c.T + i) * c.Dv + e];
            }
        }
    CHECK_ALLCLOSE(dv, wdv, a.nv, 1e-14, 1e-14, "window 1 dv");
    for (int64_t i = 0; i < a.nq; i++) CHECK(fabs(dq[i]) < 1e-14);
    for (int64_t i = 0; i < a.nk; i++) CHECK(fabs(dk[i]) < 1e-14);
    free(o), free(l), free(dq), free(dk), free(dv), free(wdv);
    gqa_free(&a);
}

/*
 * Grouped heads equal multi-head attention over K/V repeated as Hugging
 * Face's repeat_kv makes them (kv head j copied to query heads jG ..
 * jG + G − 1): the forward bit for bit (the same arithmetic on the same
 * values), dk, dv the group sums of the repeated heads' gradients. And a
 * window of S keys or more is no window, bit for bit.
 */
TEST(gqa_equals_repeated_kv_and_long_windows_are_none) {
    const gqa_cfg c = {2, 6, 2, 33, 70, 16, 8, 1, 0};
    gqa_data a;
    gqa_make(&a, c, 400);
    const int64_t G = c.H / c.Hkv;
    double *kr = malloc(sizeof(double) * (size_t)(a.nk * G)), *vr = malloc(sizeof(double) * (size_t)(a.nv * G));
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.H; h++) {
            const int64_t src = b * c.Hkv + h / G, dst = b * c.H + h;
            memcpy(kr + dst * c.S * c.D, a.k + src * c.S * c.D, sizeof(double) * (size_t)(c.S * c.D));
            memcpy(vr + dst * c.S * c.Dv, a.v + src * c.S * c.Dv, sizeof(double) * (size_t)(c.S * c.Dv));
        }
    for (int t = 0; t < 2; t++) {
        const tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
        double *o, *l, *dq, *dk, *dv;
        gqa_run(&a, dt, &o, &l, &dq, &dk, &dv);
        /* The plain doors on the repeated K/V. */
        const int64_t krd[4] = {c.B, c.H, c.S, c.D}, vrd[4] = {c.B, c.H, c.S, c.Dv};
        tfc_tensor *q = mk(dt, a.qd, 4, a.q), *k = mk(dt, krd, 4, kr), *v = mk(dt, vrd, 4, vr);
        tfc_tensor *ot = mk(dt, a.od, 4, NULL), *lt = mk(dt, a.od, 3, NULL), *go = mk(dt, a.od, 4, a.R);
        tfc_tensor *gq = mk(dt, a.qd, 4, NULL), *gk = mk(dt, krd, 4, NULL), *gv = mk(dt, vrd, 4, NULL);
        CHECK_OK(tfc_attention_forward(q, k, v, 1, a.scale, ot, lt));
        CHECK_OK(tfc_attention_backward(go, q, k, v, ot, lt, 1, a.scale, gq, gk, gv, 0));
        double *o2 = t_vals(ot), *l2 = t_vals(lt), *dq2 = t_vals(gq), *dk2 = t_vals(gk), *dv2 = t_vals(gv);
        CHECK(memcmp(o, o2, sizeof(double) * (size_t)a.no) == 0);
        CHECK(memcmp(l, l2, sizeof(double) * (size_t)(a.no / c.Dv)) == 0);
        CHECK(memcmp(dq, dq2, sizeof(double) * (size_t)a.nq) == 0);
        double *sk = calloc((size_t)a.nk, sizeof(double)), *sv = calloc((size_t)a.nv, sizeof(double));
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t h = 0; h < c.H; h++) {
                const int64_t src = b * c.H + h, dst = b * c.Hkv + h / G;
                for (int64_t i = 0; i < c.S * c.D; i++) sk[dst * c.S * c.D + i] += dk2[src * c.S * c.D + i];
                for (int64_t i = 0; i < c.S * c.Dv; i++) sv[dst * c.S * c.Dv + i] += dv2[src * c.S * c.Dv + i];
            }
        const double tol = t ? 1e-5 : 1e-13;
        CHECK_ALLCLOSE(dk, sk, a.nk, tol, tol, "dk vs the repeated heads' sum");
        CHECK_ALLCLOSE(dv, sv, a.nv, tol, tol, "dv vs the repeated heads' sum");
        /* window S and S + 100: the same bits as none */
        for (int64_t w = c.S; w <= c.S + 100; w += 100) {
            gqa_data aw = a;
            aw.c.window = w;
            double *o3, *l3, *dq3, *dk3, *dv3;
            gqa_run(&aw, dt, &o3, &l3, &dq3, &dk3, &dv3);
            CHECK(memcmp(o3, o, sizeof(double) * (size_t)a.no) == 0);
            CHECK(memcmp(dq3, dq, sizeof(double) * (size_t)a.nq) == 0);
            CHECK(memcmp(dk3, dk, sizeof(double) * (size_t)a.nk) == 0);
            CHECK(memcmp(dv3, dv, sizeof(double) * (size_t)a.nv) == 0);
            free(o3), free(l3), free(dq3), free(dk3), free(dv3);
        }
        free(o), free(l), free(dq), free(dk), free(dv), free(o2), free(l2), free(dq2), free(dk2), free(dv2);
        free(sk), free(sv);
        rel(q, k, v, ot, lt, go);
        rel(gq, gk, gv, NULL, NULL, NULL);
    }
    free(kr), free(vr);
    gqa_free(&a);
}

/*
 * One kv head and four query heads: with 1 thread the backward runs a
 * thread per kv head, with 2 it splits key blocks (dk, dv) and query
 * blocks (dq) over two passes; the bits are the same. TFC_GRAD_ACCUMULATE
 * adds onto what is there; NULL gradients are skipped.
 */
TEST(gqa_backward_is_thread_independent_and_accumulates) {
    const gqa_cfg c = {1, 4, 1, 100, 150, 16, 8, 1, 50};
    gqa_data a;
    gqa_make(&a, c, 500);
    const tfc_attention_options o = opts_of(&c);
    tfc_tensor *q = mk(TFC_DTYPE_F32, a.qd, 4, a.q), *k = mk(TFC_DTYPE_F32, a.kd, 4, a.k);
    tfc_tensor *v = mk(TFC_DTYPE_F32, a.vd, 4, a.v), *ot = mk(TFC_DTYPE_F32, a.od, 4, NULL);
    tfc_tensor *l = mk(TFC_DTYPE_F32, a.od, 3, NULL), *go = mk(TFC_DTYPE_F32, a.od, 4, a.R);
    tfc_tensor *g[2][3];
    const int32_t nt = tfc_get_num_threads();
    for (int run = 0; run < 2; run++) {
        CHECK_OK(tfc_set_num_threads(run + 1));
        g[run][0] = mk(TFC_DTYPE_F32, a.qd, 4, NULL);
        g[run][1] = mk(TFC_DTYPE_F32, a.kd, 4, NULL);
        g[run][2] = mk(TFC_DTYPE_F32, a.vd, 4, NULL);
        CHECK_OK(tfc_attention_forward_ex(q, k, v, 1, a.scale, &o, ot, l));
        CHECK_OK(tfc_attention_backward_ex(go, q, k, v, ot, l, 1, a.scale, &o, g[run][0], g[run][1], g[run][2], 0));
    }
    CHECK_OK(tfc_set_num_threads(nt));
    CHECK(memcmp(tfc_tensor_data(g[0][0]), tfc_tensor_data(g[1][0]), sizeof(float) * (size_t)a.nq) == 0);
    CHECK(memcmp(tfc_tensor_data(g[0][1]), tfc_tensor_data(g[1][1]), sizeof(float) * (size_t)a.nk) == 0);
    CHECK(memcmp(tfc_tensor_data(g[0][2]), tfc_tensor_data(g[1][2]), sizeof(float) * (size_t)a.nv) == 0);
    /* dk alone, then accumulated onto itself: twice dk */
    tfc_tensor *dk = mk(TFC_DTYPE_F32, a.kd, 4, NULL);
    CHECK_OK(tfc_attention_backward_ex(go, q, k, v, ot, l, 1, a.scale, &o, NULL, dk, NULL, 0));
    CHECK(memcmp(tfc_tensor_data(dk), tfc_tensor_data(g[0][1]), sizeof(float) * (size_t)a.nk) == 0);
    CHECK_OK(tfc_attention_backward_ex(go, q, k, v, ot, l, 1, a.scale, &o, NULL, dk, NULL, TFC_GRAD_ACCUMULATE));
    double *d2 = t_vals(dk), *d1 = t_vals(g[0][1]);
    for (int64_t i = 0; i < a.nk; i++) d1[i] *= 2;
    CHECK_ALLCLOSE(d2, d1, a.nk, 1e-6, 1e-6, "accumulated dk");
    free(d1), free(d2);
    rel(q, k, v, ot, l, go);
    rel(g[0][0], g[0][1], g[0][2], g[1][0], g[1][1], g[1][2]);
    tfc_tensor_release(dk);
    gqa_free(&a);
}

/*
 * k and v as a model holds them before the head split, [B, S, Hkv, D]
 * permuted to [B, Hkv, S, D] (unit last stride: read in place), give the
 * bits of contiguous k and v.
 */
TEST(gqa_reads_permuted_kv_in_place) {
    const gqa_cfg c = {2, 6, 3, 11, 13, 8, 5, 1, 4};
    gqa_data a;
    gqa_make(&a, c, 600);
    double *o, *l, *dq, *dk, *dv;
    gqa_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
    double *kb = malloc(sizeof(double) * (size_t)a.nk), *vb = malloc(sizeof(double) * (size_t)a.nv);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.Hkv; h++)
            for (int64_t s = 0; s < c.S; s++) {
                for (int64_t e = 0; e < c.D; e++)
                    kb[((b * c.S + s) * c.Hkv + h) * c.D + e] = a.k[((b * c.Hkv + h) * c.S + s) * c.D + e];
                for (int64_t e = 0; e < c.Dv; e++)
                    vb[((b * c.S + s) * c.Hkv + h) * c.Dv + e] = a.v[((b * c.Hkv + h) * c.S + s) * c.Dv + e];
            }
    const int64_t ks[4] = {c.S * c.Hkv * c.D, c.D, c.Hkv * c.D, 1}, vs[4] = {c.S * c.Hkv * c.Dv, c.Dv, c.Hkv * c.Dv, 1};
    tfc_tensor *k = NULL, *v = NULL;
    CHECK_OK(tfc_tensor_wrap(kb, a.kd, ks, 4, TFC_DTYPE_F64, NULL, NULL, &k));
    CHECK_OK(tfc_tensor_wrap(vb, a.vd, vs, 4, TFC_DTYPE_F64, NULL, NULL, &v));
    tfc_tensor *q = mk(TFC_DTYPE_F64, a.qd, 4, a.q), *go = mk(TFC_DTYPE_F64, a.od, 4, a.R);
    tfc_tensor *ot = mk(TFC_DTYPE_F64, a.od, 4, NULL), *lt = mk(TFC_DTYPE_F64, a.od, 3, NULL);
    tfc_tensor *gq = mk(TFC_DTYPE_F64, a.qd, 4, NULL), *gk = mk(TFC_DTYPE_F64, a.kd, 4, NULL);
    tfc_tensor *gv = mk(TFC_DTYPE_F64, a.vd, 4, NULL);
    const tfc_attention_options opt = opts_of(&c);
    CHECK_OK(tfc_attention_forward_ex(q, k, v, 1, a.scale, &opt, ot, lt));
    CHECK_OK(tfc_attention_backward_ex(go, q, k, v, ot, lt, 1, a.scale, &opt, gq, gk, gv, 0));
    CHECK(memcmp(tfc_tensor_data(ot), o, sizeof(double) * (size_t)a.no) == 0);
    CHECK(memcmp(tfc_tensor_data(gq), dq, sizeof(double) * (size_t)a.nq) == 0);
    CHECK(memcmp(tfc_tensor_data(gk), dk, sizeof(double) * (size_t)a.nk) == 0);
    CHECK(memcmp(tfc_tensor_data(gv), dv, sizeof(double) * (size_t)a.nv) == 0);
    free(o), free(l), free(dq), free(dk), free(dv), free(kb), free(vb);
    rel(q, k, v, go, ot, lt);
    rel(gq, gk, gv, NULL, NULL, NULL);
    gqa_free(&a);
}

/*
 * The kernels without BLAS: with BLAS (this build's default) the tiles'
 * products are GEMMs, which need row strides of at least the row length;
 * k and v whose rows overlap in memory (row stride 1: key s is buf[s ..
 * s + D)) are read in place by the loop kernels instead. Against the
 * reference on the same values, forward and backward, f64 and both f32
 * paths.
 */
TEST(gqa_window_loop_kernels_on_overlapping_rows) {
    const gqa_cfg cs[] = {
        {2, 4, 2, 70, 100, 16, 8, 1, 30}, {1, 6, 1, 40, 40, 150, 12, 1, 0}, {1, 4, 4, 33, 65, 8, 8, 0, 0}};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        const gqa_cfg c = cs[ci];
        gqa_data a;
        gqa_make(&a, c, 800 + ci);
        char what[160];
        cfg_name(&c, what, sizeof what);
        /* Per (b, kv head) a buffer of S + D − 1 (S + Dv − 1) values; the dense k, v the reference reads. */
        const int64_t lk = c.S + c.D - 1, lv = c.S + c.Dv - 1, BK = c.B * c.Hkv;
        double *kb = malloc(sizeof(double) * (size_t)(BK * lk)), *vb = malloc(sizeof(double) * (size_t)(BK * lv));
        for (int64_t i = 0; i < BK * lk; i++) kb[i] = a.k[i % a.nk];
        for (int64_t i = 0; i < BK * lv; i++) vb[i] = a.v[i % a.nv];
        for (int64_t bk = 0; bk < BK; bk++)
            for (int64_t s = 0; s < c.S; s++) {
                for (int64_t e = 0; e < c.D; e++) a.k[(bk * c.S + s) * c.D + e] = kb[bk * lk + s + e];
                for (int64_t e = 0; e < c.Dv; e++) a.v[(bk * c.S + s) * c.Dv + e] = vb[bk * lv + s + e];
            }
        double *ro = malloc(sizeof(double) * (size_t)a.no), *rl = malloc(sizeof(double) * (size_t)(a.no / c.Dv));
        ref_attention(&c, a.scale, a.q, a.k, a.v, ro, rl);
        double *o, *l, *dq, *dk, *dv; /* the dense run: BLAS tiles */
        gqa_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
        const int64_t ks[4] = {c.Hkv * lk, lk, 1, 1}, vs[4] = {c.Hkv * lv, lv, 1, 1};
        const tfc_attention_options opt = opts_of(&c);
        for (int t = 0; t < 2; t++) {
            const tfc_dtype dt = t ? TFC_DTYPE_F32 : TFC_DTYPE_F64;
            FOR_BOTH_F32_PATHS({
                const int64_t nkb[1] = {BK * lk}, nvb[1] = {BK * lv};
                tfc_tensor *kf = mk(dt, nkb, 1, kb), *vf = mk(dt, nvb, 1, vb), *k = NULL, *v = NULL;
                CHECK_OK(tfc_tensor_wrap(tfc_tensor_data(kf), a.kd, ks, 4, dt, NULL, NULL, &k));
                CHECK_OK(tfc_tensor_wrap(tfc_tensor_data(vf), a.vd, vs, 4, dt, NULL, NULL, &v));
                tfc_tensor *q = mk(dt, a.qd, 4, a.q), *go = mk(dt, a.od, 4, a.R);
                tfc_tensor *ot = mk(dt, a.od, 4, NULL), *lt = mk(dt, a.od, 3, NULL);
                tfc_tensor *gq = mk(dt, a.qd, 4, NULL), *gk = mk(dt, a.kd, 4, NULL), *gv = mk(dt, a.vd, 4, NULL);
                CHECK_OK(tfc_attention_forward_ex(q, k, v, c.causal, a.scale, &opt, ot, lt));
                CHECK_OK(tfc_attention_backward_ex(go, q, k, v, ot, lt, c.causal, a.scale, &opt, gq, gk, gv, 0));
                double *o2 = t_vals(ot), *l2 = t_vals(lt), *dq2 = t_vals(gq), *dk2 = t_vals(gk), *dv2 = t_vals(gv);
                const double tol = t ? 1e-5 : 1e-12, gtol = t ? 1e-3 : 1e-11;
                CHECK_ALLCLOSE(o2, ro, a.no, tol, tol, what);
                CHECK_ALLCLOSE(l2, rl, a.no / c.Dv, tol, tol, what);
                CHECK_ALLCLOSE(dq2, dq, a.nq, t ? 1e-5 : 1e-13, gtol, what);
                CHECK_ALLCLOSE(dk2, dk, a.nk, t ? 1e-5 : 1e-13, gtol, what);
                CHECK_ALLCLOSE(dv2, dv, a.nv, t ? 1e-5 : 1e-13, gtol, what);
                free(o2), free(l2), free(dq2), free(dk2), free(dv2);
                rel(q, k, v, go, ot, lt);
                rel(gq, gk, gv, kf, vf, NULL);
            });
        }
        free(o), free(l), free(dq), free(dk), free(dv), free(ro), free(rl), free(kb), free(vb);
        gqa_free(&a);
    }
}

/* The graph door: tfc_gradcheck through tfc_attention_ex, and the leaves' grads equal the explicit backward's. */
typedef struct graph_ctx {
    int32_t causal;
    double scale;
    tfc_attention_options o;
} graph_ctx;

static tfc_status graph_fn(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **out, void *ctx) {
    (void)n;
    const graph_ctx *c = ctx;
    tfc_tensor *y = NULL, *w = NULL, *p = NULL;
    tfc_status s = tfc_attention_ex(g, in[0], in[1], in[2], c->causal, c->scale, &c->o, &y);
    if (s == TFC_OK) s = tfc_mul(g, y, in[3], &p); /* Σ R ⊙ out: every output element weighs differently */
    if (s == TFC_OK) s = tfc_sum(g, p, NULL, 0, 0, &w);
    tfc_tensor_release(y), tfc_tensor_release(p);
    if (s == TFC_OK) *out = w;
    return s;
}

TEST(gqa_graph_door_gradcheck_and_matches_explicit) {
    const gqa_cfg c = {1, 4, 2, 6, 9, 3, 2, 1, 3};
    gqa_data a;
    gqa_make(&a, c, 700);
    tfc_tensor *in[4] = {mk(TFC_DTYPE_F64, a.qd, 4, a.q), mk(TFC_DTYPE_F64, a.kd, 4, a.k),
                         mk(TFC_DTYPE_F64, a.vd, 4, a.v), mk(TFC_DTYPE_F64, a.od, 4, a.R)};
    for (int i = 0; i < 3; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    graph_ctx gc = {1, a.scale, opts_of(&c)};
    double err = 1;
    CHECK_OK(tfc_gradcheck(graph_fn, in, 4, &gc, 1e-6, &err, NULL, NULL));
    tfc_test_checks++;
    if (!(err < 1e-6)) TFC_FAIL_AT("tfc_gradcheck through tfc_attention_ex: %g", err);
    /* One recorded backward: the .grads are the explicit door's dq, dk, dv. */
    for (int i = 0; i < 3; i++) CHECK_OK(tfc_tensor_zero_grad(in[i], 1));
    tfc_graph *g = NULL;
    tfc_tensor *loss = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(graph_fn(g, in, 4, &loss, &gc));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    double *o, *l, *dq, *dk, *dv;
    gqa_run(&a, TFC_DTYPE_F64, &o, &l, &dq, &dk, &dv);
    double *want[3] = {dq, dk, dv};
    const int64_t n[3] = {a.nq, a.nk, a.nv};
    for (int i = 0; i < 3; i++) {
        tfc_tensor *gr = NULL;
        CHECK_OK(tfc_tensor_grad(in[i], &gr));
        CHECK(gr && memcmp(tfc_tensor_data(gr), want[i], sizeof(double) * (size_t)n[i]) == 0);
        tfc_tensor_release(gr);
    }
    /* NULL opts is no window: as the plain door (equal heads here, so both accept). */
    tfc_tensor *y1 = NULL, *y2 = NULL;
    tfc_tensor *kf = mk(TFC_DTYPE_F64, a.qd, 4, a.q);
    CHECK_OK(tfc_attention_ex(NULL, in[0], kf, kf, 1, 0.3, NULL, &y1));
    CHECK_OK(tfc_attention(NULL, in[0], kf, kf, 1, 0.3, &y2));
    CHECK(memcmp(tfc_tensor_data(y1), tfc_tensor_data(y2), sizeof(double) * (size_t)a.nq) == 0);
    free(o), free(l), free(dq), free(dk), free(dv);
    rel(in[0], in[1], in[2], in[3], loss, y1);
    rel(y2, kf, NULL, NULL, NULL, NULL);
    tfc_graph_release(g);
    gqa_free(&a);
}

TEST(gqa_window_bad_arguments) {
    const int64_t qd[4] = {2, 4, 5, 8}, kd[4] = {2, 2, 6, 8}, vd[4] = {2, 2, 6, 3}, od[4] = {2, 4, 5, 3};
    tfc_tensor *q = mk(TFC_DTYPE_F32, qd, 4, NULL), *k = mk(TFC_DTYPE_F32, kd, 4, NULL);
    tfc_tensor *v = mk(TFC_DTYPE_F32, vd, 4, NULL), *o = mk(TFC_DTYPE_F32, od, 4, NULL);
    tfc_tensor *l = mk(TFC_DTYPE_F32, od, 3, NULL), *dk = mk(TFC_DTYPE_F32, kd, 4, NULL);
    tfc_tensor *k3 = mk(TFC_DTYPE_F32, (int64_t[]){2, 3, 6, 8}, 4, NULL);
    tfc_tensor *v3 = mk(TFC_DTYPE_F32, (int64_t[]){2, 3, 6, 3}, 4, NULL);
    tfc_tensor *v1 = mk(TFC_DTYPE_F32, (int64_t[]){2, 1, 6, 3}, 4, NULL);
    tfc_tensor *dk4 = mk(TFC_DTYPE_F32, (int64_t[]){2, 4, 6, 8}, 4, NULL);
    tfc_attention_options w = TFC_ATTENTION_OPTIONS_INIT;
    w.window = 3;
    CHECK_OK(tfc_attention_forward_ex(q, k, v, 1, 0.5, &w, o, l));
    CHECK_OK(tfc_attention_backward_ex(o, q, k, v, o, l, 1, 0.5, &w, NULL, dk, NULL, 0));
    /* heads */
    CHECK_ERR(tfc_attention_forward_ex(q, k3, v3, 1, 0.5, NULL, o, l), TFC_ERR_SHAPE,
              "tfc_attention_forward_ex: q is [2,4,5,8], k is [2,3,6,8]; k's 3 heads (dim 1) must divide q's 4");
    CHECK_ERR(tfc_attention_forward_ex(q, k, v1, 1, 0.5, NULL, o, l), TFC_ERR_SHAPE,
              "k is [2,2,6,8], v is [2,1,6,3]; k and v must have the same heads (dim 1)");
    CHECK_ERR(tfc_attention_forward(q, k, v, 1, 0.5, o, l), TFC_ERR_SHAPE,
              "tfc_attention_forward: q is [2,4,5,8], k is [2,2,6,8], v is [2,2,6,3]; batch and head dims (0, 1)");
    CHECK_ERR(tfc_attention_backward(o, q, k, v, o, l, 1, 0.5, NULL, dk, NULL, 0), TFC_ERR_SHAPE,
              "tfc_attention_backward: q is [2,4,5,8], k is [2,2,6,8]");
    /* dk must have k's (kv) heads, not q's */
    CHECK_ERR(tfc_attention_backward_ex(o, q, k, v, o, l, 1, 0.5, &w, NULL, dk4, NULL, 0), TFC_ERR_SHAPE,
              "output dk is [2,4,6,8], must be [2,2,6,8]");
    /* the window */
    w.window = -1;
    CHECK_ERR(tfc_attention_forward_ex(q, k, v, 1, 0.5, &w, o, l), TFC_ERR_INVALID_ARG,
              "tfc_attention_forward_ex: opts->window is -1, must be >= 0 (0: no window)");
    CHECK_ERR(tfc_attention_backward_ex(o, q, k, v, o, l, 1, 0.5, &w, NULL, dk, NULL, 0), TFC_ERR_INVALID_ARG,
              "tfc_attention_backward_ex: opts->window is -1");
    w.window = 4;
    CHECK_ERR(tfc_attention_forward_ex(q, k, v, 0, 0.5, &w, o, l), TFC_ERR_INVALID_ARG,
              "tfc_attention_forward_ex: opts->window is 4 but causal is 0; a sliding window needs causal attention");
    /* the struct's size */
    tfc_attention_options bad = w;
    bad.struct_size = 4;
    CHECK_ERR(tfc_attention_forward_ex(q, k, v, 1, 0.5, &bad, o, l), TFC_ERR_VERSION,
              "tfc_attention_forward_ex: opts->struct_size is 4");
    bad.struct_size = (uint32_t)sizeof bad + 8;
    CHECK_ERR(tfc_attention_backward_ex(o, q, k, v, o, l, 1, 0.5, &bad, NULL, dk, NULL, 0), TFC_ERR_VERSION,
              "opts->struct_size");
    /* the graph door says which function it is, and records nothing on error */
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(q, 1));
    tfc_tensor *y = (tfc_tensor *)0x1;
    CHECK_ERR(tfc_attention_ex(g, q, k, v, 0, 0.5, &w, &y), TFC_ERR_INVALID_ARG,
              "tfc_attention_ex: tfc_attention_forward_ex: opts->window is 4 but causal is 0");
    CHECK_ERR(tfc_attention_ex(g, q, k3, v3, 1, 0.5, NULL, &y), TFC_ERR_SHAPE, "must divide q's 4");
    CHECK_ERR(tfc_attention(g, q, k, v, 1, 0.5, &y), TFC_ERR_SHAPE, "tfc_attention: tfc_attention_forward:");
    CHECK(y == (tfc_tensor *)0x1);
    tfc_graph_release(g);
    rel(q, k, v, o, l, dk);
    rel(k3, v3, v1, dk4, NULL, NULL);
}
