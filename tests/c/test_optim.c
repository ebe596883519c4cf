/*
 * Optimizers against an independent reference written here from the
 * textbook formulas (f64, each with its own copy of the parameters and its
 * own hand-derived gradients): SGD / Adam / AdamW trajectories on a
 * quadratic and on a tiny MLP, AdamW vs Adam+L2, skipped parameters,
 * clipping, schedules, state save/load, bad input.
 */
#include "tfc_test.h"

TFC_TEST_MAIN

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng_state;
/* Uniform in [-1, 1) from a 64-bit LCG: deterministic test data. */
static double urand(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static tfc_tensor *make(const double *v, const int64_t *dims, int32_t nd, int requires_grad) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_F64, &t));
    if (requires_grad) CHECK_OK(tfc_tensor_set_requires_grad(t, 1));
    return t;
}

static void read(const tfc_tensor *t, double *out) {
    CHECK_OK(tfc_tensor_copy_to_host(t, out, (size_t)tfc_tensor_numel(t) * sizeof(double)));
}

/* Give t the gradient g (a fresh f64 tensor of t's shape). */
static void set_grad(tfc_tensor *t, const double *g) {
    int64_t dims[TFC_MAX_DIMS];
    int32_t nd = tfc_tensor_ndim(t);
    CHECK_OK(tfc_tensor_shape(t, dims, TFC_MAX_DIMS));
    tfc_tensor *gt = make(g, dims, nd, 0);
    CHECK_OK(tfc_tensor_set_grad(t, gt));
    tfc_tensor_release(gt);
}

/* max over i of |a − b| / max(|b|, 1): the trajectories' agreement measure. */
static double max_rel(const double *a, const double *b, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]) / fmax(fabs(b[i]), 1.0);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* ---- the reference optimizer: textbook formulas, straight loops ----------------------- */

typedef struct ref_cfg {
    const char *label;
    tfc_optim_kind kind;
    double lr, wd, momentum, dampening, beta1, beta2, eps;
    int nesterov, amsgrad, maximize;
} ref_cfg;

typedef struct ref_state {
    double *m, *v, *vmax, *buf;
    int64_t t;
    int has;
} ref_state;

static void ref_init(ref_state *s, int64_t n) {
    s->m = calloc((size_t)n, sizeof(double));
    s->v = calloc((size_t)n, sizeof(double));
    s->vmax = calloc((size_t)n, sizeof(double));
    s->buf = calloc((size_t)n, sizeof(double));
    s->t = 0;
    s->has = 0;
}

static void ref_free(ref_state *s) {
    free(s->m);
    free(s->v);
    free(s->vmax);
    free(s->buf);
}

/*
 * SGD (Sutskever momentum as torch): g ← g + λθ; b ← g on the first step,
 * else μb + (1 − τ)g; g ← g + μb (Nesterov) or b; θ ← θ − γg.
 * Adam: g ← g + λθ (AdamW instead θ ← θ − γλθ); m ← β1 m + (1 − β1) g;
 * v ← β2 v + (1 − β2) g²; m̂ = m/(1 − β1ᵗ); v̂ = v/(1 − β2ᵗ) with v replaced
 * by its running max under amsgrad; θ ← θ − γ m̂/(√v̂ + ε).
 */
static void ref_update(const ref_cfg *c, double lr, double wd, double *p, const double *grad, int64_t n, ref_state *s) {
    s->t++;
    for (int64_t i = 0; i < n; i++) {
        double g = c->maximize ? -grad[i] : grad[i];
        if (c->kind == TFC_OPTIM_SGD) {
            if (wd != 0) g += wd * p[i];
            if (c->momentum != 0) {
                s->buf[i] = s->has ? c->momentum * s->buf[i] + (1 - c->dampening) * g : g;
                g = c->nesterov ? g + c->momentum * s->buf[i] : s->buf[i];
            }
            p[i] -= lr * g;
        } else {
            if (c->kind == TFC_OPTIM_ADAMW)
                p[i] -= lr * wd * p[i];
            else if (wd != 0)
                g += wd * p[i];
            s->m[i] = c->beta1 * s->m[i] + (1 - c->beta1) * g;
            s->v[i] = c->beta2 * s->v[i] + (1 - c->beta2) * g * g;
            double vv = s->v[i];
            if (c->amsgrad) {
                s->vmax[i] = fmax(s->vmax[i], s->v[i]);
                vv = s->vmax[i];
            }
            double mhat = s->m[i] / (1 - pow(c->beta1, (double)s->t));
            double vhat = vv / (1 - pow(c->beta2, (double)s->t));
            p[i] -= lr * mhat / (sqrt(vhat) + c->eps);
        }
    }
    s->has = 1;
}

static tfc_optim *make_opt(const ref_cfg *c) {
    tfc_optim_options o = TFC_OPTIM_OPTIONS_INIT;
    o.lr = c->lr;
    o.weight_decay = c->wd;
    o.momentum = c->momentum;
    o.dampening = c->dampening;
    o.nesterov = c->nesterov;
    o.beta1 = c->beta1;
    o.beta2 = c->beta2;
    o.eps = c->eps;
    o.amsgrad = c->amsgrad;
    o.maximize = c->maximize;
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_new(c->kind, &o, &opt));
    return opt;
}

static const ref_cfg configs[] = {
    {"sgd", TFC_OPTIM_SGD, 0.1, 0, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0},
    {"sgd momentum dampening wd", TFC_OPTIM_SGD, 0.05, 0.01, 0.9, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0},
    {"sgd nesterov wd", TFC_OPTIM_SGD, 0.05, 0.001, 0.8, 0, 0.9, 0.999, 1e-8, 1, 0, 0},
    {"sgd maximize momentum", TFC_OPTIM_SGD, 0.002, 0, 0.5, 0, 0.9, 0.999, 1e-8, 0, 0, 1},
    {"adam", TFC_OPTIM_ADAM, 0.01, 0, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0},
    {"adam l2 betas", TFC_OPTIM_ADAM, 0.02, 0.1, 0, 0, 0.8, 0.99, 1e-6, 0, 0, 0},
    {"adam amsgrad", TFC_OPTIM_ADAM, 0.01, 0.01, 0, 0, 0.9, 0.999, 1e-8, 0, 1, 0},
    {"adamw", TFC_OPTIM_ADAMW, 0.01, 0.1, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0},
    {"adamw amsgrad", TFC_OPTIM_ADAMW, 0.02, 0.05, 0, 0, 0.9, 0.95, 1e-8, 0, 1, 0},
    {"adam maximize", TFC_OPTIM_ADAM, 0.001, 0, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 1},
};
#define N_CONFIGS ((int)(sizeof configs / sizeof *configs))

/* ---- trajectory 1: a quadratic in two parameter groups ------------------------------- */
/* loss = ½ Σ a ⊙ (X − C)² + ½ Σ b ⊙ (y − d)², X [3,4] in group 0, y [5] in group 1. */

#define QX 12
#define QY 5

typedef struct quad {
    double a[QX], c[QX], b[QY], d[QY], x0[QX], y0[QY];
} quad;

static void quad_init(quad *q) {
    rng_state = 42;
    for (int i = 0; i < QX; i++) {
        q->a[i] = 1.75 + 1.25 * urand();
        q->c[i] = urand();
        q->x0[i] = 2 * urand();
    }
    for (int i = 0; i < QY; i++) {
        q->b[i] = 1.5 + urand();
        q->d[i] = urand();
        q->y0[i] = 2 * urand();
    }
}

/* The library's loss on graph g, built from ops. */
static tfc_tensor *quad_loss(tfc_graph *g, tfc_tensor *x, tfc_tensor *a, tfc_tensor *c) {
    tfc_tensor *d = NULL, *sq = NULL, *w = NULL, *s = NULL, *l = NULL;
    CHECK_OK(tfc_sub(g, x, c, &d));
    CHECK_OK(tfc_mul(g, d, d, &sq));
    CHECK_OK(tfc_mul(g, a, sq, &w));
    CHECK_OK(tfc_sum(g, w, NULL, 0, 0, &s));
    CHECK_OK(tfc_mul_scalar(g, s, 0.5, &l));
    tfc_tensor_release(d);
    tfc_tensor_release(sq);
    tfc_tensor_release(w);
    tfc_tensor_release(s);
    return l;
}

static void quad_run(const ref_cfg *cfg) {
    quad q;
    quad_init(&q);
    int64_t dx[2] = {3, 4}, dy[1] = {QY};
    tfc_tensor *X = make(q.x0, dx, 2, 1), *Y = make(q.y0, dy, 1, 1);
    tfc_tensor *A = make(q.a, dx, 2, 0), *C = make(q.c, dx, 2, 0);
    tfc_tensor *B = make(q.b, dy, 1, 0), *D = make(q.d, dy, 1, 0);
    tfc_optim *opt = make_opt(cfg);
    /* Group 1 has its own lr and weight decay. */
    double lr1 = cfg->lr * 0.5, wd1 = cfg->wd * 2;
    int32_t g0 = -1, g1 = -1;
    CHECK_OK(tfc_optim_add_params(opt, &X, 1, &g0));
    CHECK_OK(tfc_optim_add_group(opt, &Y, 1, lr1, wd1, &g1));
    CHECK(g0 == 0 && g1 == 1);
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));

    double rx[QX], ry[QY], gx[QX], gy[QY], lx[QX], ly[QY];
    memcpy(rx, q.x0, sizeof rx);
    memcpy(ry, q.y0, sizeof ry);
    ref_state sx, sy;
    ref_init(&sx, QX);
    ref_init(&sy, QY);
    double worst = 0;
    for (int step = 0; step < 200; step++) {
        tfc_tensor *l1 = quad_loss(g, X, A, C), *l2 = quad_loss(g, Y, B, D), *loss = NULL;
        CHECK_OK(tfc_add(g, l1, l2, &loss));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_zero_grad(opt, step % 2)); /* both kinds of zeroing keep the trajectory */
        CHECK_OK(tfc_graph_clear(g));
        tfc_tensor_release(l1);
        tfc_tensor_release(l2);
        tfc_tensor_release(loss);
        /* The reference: hand-derived gradient a ⊙ (x − c). */
        for (int i = 0; i < QX; i++) gx[i] = q.a[i] * (rx[i] - q.c[i]);
        for (int i = 0; i < QY; i++) gy[i] = q.b[i] * (ry[i] - q.d[i]);
        ref_update(cfg, cfg->lr, cfg->wd, rx, gx, QX, &sx);
        ref_update(cfg, lr1, wd1, ry, gy, QY, &sy);
        read(X, lx);
        read(Y, ly);
        worst = fmax(worst, fmax(max_rel(lx, rx, QX), max_rel(ly, ry, QY)));
    }
    if (getenv("TFC_OPTIM_VERBOSE")) printf("quadratic %-28s worst %.3g\n", cfg->label, worst);
    if (!(worst <= 1e-12)) TFC_FAIL_AT("quadratic %s: worst relative difference %.3g", cfg->label, worst);
    tfc_test_checks++;
    /* The trajectory went somewhere: it is not a test that cannot fail. */
    CHECK(max_rel(lx, q.x0, QX) > 1e-3);
    int64_t steps = 0;
    CHECK_OK(tfc_optim_step_count(opt, &steps));
    CHECK(steps == 200);
    ref_free(&sx);
    ref_free(&sy);
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_tensor_release(X);
    tfc_tensor_release(Y);
    tfc_tensor_release(A);
    tfc_tensor_release(B);
    tfc_tensor_release(C);
    tfc_tensor_release(D);
}

TEST(quadratic_trajectories_match_reference) {
    for (int i = 0; i < N_CONFIGS; i++) quad_run(&configs[i]);
}

/* ---- trajectory 2: a tiny MLP ---------------------------------------------------------- */
/* o = tanh(x W1 + b1) W2 + b2, loss = mean((o − t)²); x [6,3], W1 [3,4], W2 [4,2], t [6,2]. */

enum { MN = 6, MI = 3, MH = 4, MO = 2 };

typedef struct mlp {
    double x[MN * MI], t[MN * MO];
    double w1[MI * MH], b1[MH], w2[MH * MO], b2[MO];
} mlp;

static void mlp_init(mlp *m) {
    rng_state = 7;
    for (int i = 0; i < MN * MI; i++) m->x[i] = urand();
    for (int i = 0; i < MN * MO; i++) m->t[i] = 0.8 * urand();
    for (int i = 0; i < MI * MH; i++) m->w1[i] = 0.7 * urand();
    for (int i = 0; i < MH; i++) m->b1[i] = 0.1 * urand();
    for (int i = 0; i < MH * MO; i++) m->w2[i] = 0.7 * urand();
    for (int i = 0; i < MO; i++) m->b2[i] = 0.1 * urand();
}

/* Hand-derived gradients of the MLP loss at m's parameters (naive loops). */
static void mlp_grads(const mlp *m, double *gw1, double *gb1, double *gw2, double *gb2) {
    double h[MN * MH], dout[MN * MO], dz[MN * MH];
    for (int n = 0; n < MN; n++)
        for (int j = 0; j < MH; j++) {
            double z = m->b1[j];
            for (int i = 0; i < MI; i++) z += m->x[n * MI + i] * m->w1[i * MH + j];
            h[n * MH + j] = tanh(z);
        }
    for (int n = 0; n < MN; n++)
        for (int k = 0; k < MO; k++) {
            double s = m->b2[k];
            for (int j = 0; j < MH; j++) s += h[n * MH + j] * m->w2[j * MO + k];
            dout[n * MO + k] = 2.0 * (s - m->t[n * MO + k]) / (MN * MO);
        }
    memset(gw2, 0, sizeof(double) * MH * MO);
    memset(gb2, 0, sizeof(double) * MO);
    memset(gw1, 0, sizeof(double) * MI * MH);
    memset(gb1, 0, sizeof(double) * MH);
    for (int n = 0; n < MN; n++)
        for (int k = 0; k < MO; k++) {
            gb2[k] += dout[n * MO + k];
            for (int j = 0; j < MH; j++) gw2[j * MO + k] += h[n * MH + j] * dout[n * MO + k];
        }
    for (int n = 0; n < MN; n++)
        for (int j = 0; j < MH; j++) {
            double dh = 0;
            for (int k = 0; k < MO; k++) dh += dout[n * MO + k] * m->w2[j * MO + k];
            dz[n * MH + j] = dh * (1 - h[n * MH + j] * h[n * MH + j]);
        }
    for (int n = 0; n < MN; n++)
        for (int j = 0; j < MH; j++) {
            gb1[j] += dz[n * MH + j];
            for (int i = 0; i < MI; i++) gw1[i * MH + j] += m->x[n * MI + i] * dz[n * MH + j];
        }
}

static tfc_tensor *mlp_loss(tfc_graph *g, tfc_tensor *x, tfc_tensor *t, tfc_tensor *const *P) {
    tfc_tensor *z0 = NULL, *z = NULL, *h = NULL, *o0 = NULL, *o = NULL, *d = NULL, *sq = NULL, *l = NULL;
    CHECK_OK(tfc_matmul(g, x, P[0], &z0));
    CHECK_OK(tfc_add(g, z0, P[1], &z));
    CHECK_OK(tfc_tanh(g, z, &h));
    CHECK_OK(tfc_matmul(g, h, P[2], &o0));
    CHECK_OK(tfc_add(g, o0, P[3], &o));
    CHECK_OK(tfc_sub(g, o, t, &d));
    CHECK_OK(tfc_mul(g, d, d, &sq));
    CHECK_OK(tfc_mean(g, sq, NULL, 0, 0, &l));
    tfc_tensor *tmp[] = {z0, z, h, o0, o, d, sq};
    for (int i = 0; i < 7; i++) tfc_tensor_release(tmp[i]);
    return l;
}

static void mlp_run(const ref_cfg *cfg) {
    mlp m;
    mlp_init(&m);
    int64_t dx[2] = {MN, MI}, dt[2] = {MN, MO}, dw1[2] = {MI, MH}, db1[1] = {MH}, dw2[2] = {MH, MO}, db2[1] = {MO};
    tfc_tensor *x = make(m.x, dx, 2, 0), *t = make(m.t, dt, 2, 0);
    tfc_tensor *P[4] = {make(m.w1, dw1, 2, 1), make(m.b1, db1, 1, 1), make(m.w2, dw2, 2, 1), make(m.b2, db2, 1, 1)};
    int64_t sizes[4] = {MI * MH, MH, MH * MO, MO};
    double *ref[4] = {m.w1, m.b1, m.w2, m.b2};
    /* The GPT recipe: decay the matrices only. */
    tfc_tensor *mats[2] = {P[0], P[2]}, *vecs[2] = {P[1], P[3]};
    tfc_optim *opt = make_opt(cfg);
    CHECK_OK(tfc_optim_add_group(opt, mats, 2, cfg->lr, cfg->wd, NULL));
    CHECK_OK(tfc_optim_add_group(opt, vecs, 2, cfg->lr, 0.0, NULL));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    ref_state st[4];
    for (int k = 0; k < 4; k++) ref_init(&st[k], sizes[k]);
    double grads[4][MI * MH > MH * MO ? MI * MH : MH * MO], lib[MI * MH > MH * MO ? MI * MH : MH * MO];
    double worst = 0, first_loss = 0, last_loss = 0;
    for (int step = 0; step < 200; step++) {
        tfc_tensor *loss = mlp_loss(g, x, t, P);
        CHECK_OK(tfc_tensor_item(loss, step == 0 ? &first_loss : &last_loss));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        CHECK_OK(tfc_graph_clear(g));
        tfc_tensor_release(loss);
        mlp_grads(&m, grads[0], grads[1], grads[2], grads[3]);
        for (int k = 0; k < 4; k++) ref_update(cfg, cfg->lr, k % 2 ? 0.0 : cfg->wd, ref[k], grads[k], sizes[k], &st[k]);
        for (int k = 0; k < 4; k++) {
            read(P[k], lib);
            worst = fmax(worst, max_rel(lib, ref[k], sizes[k]));
        }
    }
    if (getenv("TFC_OPTIM_VERBOSE"))
        printf("MLP %-28s worst %.3g loss %.4g -> %.4g\n", cfg->label, worst, first_loss, last_loss);
    if (!(worst <= 1e-12)) TFC_FAIL_AT("MLP %s: worst relative difference %.3g", cfg->label, worst);
    tfc_test_checks++;
    if (!cfg->maximize && !(last_loss < first_loss))
        TFC_FAIL_AT("MLP %s: loss %g -> %g did not decrease", cfg->label, first_loss, last_loss);
    for (int k = 0; k < 4; k++) {
        ref_free(&st[k]);
        tfc_tensor_release(P[k]);
    }
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_tensor_release(x);
    tfc_tensor_release(t);
}

TEST(mlp_trajectories_match_reference) {
    for (int i = 0; i < N_CONFIGS; i++) mlp_run(&configs[i]);
}

/* maximize on −f walks exactly the path of minimize on f (both negations are exact). */
TEST(maximize_of_negated_loss_is_minimize) {
    for (int kind = 0; kind < 3; kind++) {
        quad q;
        quad_init(&q);
        int64_t dx[2] = {3, 4};
        tfc_tensor *A = make(q.a, dx, 2, 0), *C = make(q.c, dx, 2, 0);
        tfc_tensor *X[2] = {make(q.x0, dx, 2, 1), make(q.x0, dx, 2, 1)};
        tfc_optim *opt[2];
        for (int j = 0; j < 2; j++) {
            tfc_optim_options o = TFC_OPTIM_OPTIONS_INIT;
            o.lr = 0.01;
            o.momentum = 0.9;
            o.weight_decay = 0.01;
            o.maximize = j;
            CHECK_OK(tfc_optim_new((tfc_optim_kind)kind, &o, &opt[j]));
            CHECK_OK(tfc_optim_add_params(opt[j], &X[j], 1, NULL));
        }
        tfc_graph *g = NULL;
        CHECK_OK(tfc_graph_new(&g));
        for (int step = 0; step < 20; step++)
            for (int j = 0; j < 2; j++) {
                tfc_tensor *l = quad_loss(g, X[j], A, C), *nl = NULL;
                if (j) CHECK_OK(tfc_neg(g, l, &nl));
                CHECK_OK(tfc_graph_backward(g, j ? nl : l, NULL));
                CHECK_OK(tfc_optim_step(opt[j]));
                CHECK_OK(tfc_optim_zero_grad(opt[j], 1));
                CHECK_OK(tfc_graph_clear(g));
                tfc_tensor_release(l);
                tfc_tensor_release(nl);
            }
        double a[QX], b[QX];
        read(X[0], a);
        read(X[1], b);
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(max_rel(a, q.x0, QX) > 1e-3);
        for (int j = 0; j < 2; j++) {
            tfc_optim_release(opt[j]);
            tfc_tensor_release(X[j]);
        }
        tfc_graph_release(g);
        tfc_tensor_release(A);
        tfc_tensor_release(C);
    }
}

/* ---- many parameters, many threads, f32 ------------------------------------------------ */

/* Sizes that make the fused range's thread splits fall inside and between parameters. */
static const int64_t big_sizes[] = {70001, 3, 40000, 1, 33333, 0, 17};
#define N_BIG ((int)(sizeof big_sizes / sizeof *big_sizes))

static void big_run(tfc_dtype dtype, int threads, double **out) {
    CHECK_OK(tfc_set_num_threads(threads));
    ref_cfg cfg = {"adamw amsgrad", TFC_OPTIM_ADAMW, 0.01, 0.1, 0, 0, 0.9, 0.99, 1e-8, 0, 1, 0};
    tfc_optim *opt = make_opt(&cfg);
    tfc_tensor *P[N_BIG];
    rng_state = 99;
    for (int k = 0; k < N_BIG; k++) {
        double *v = malloc((size_t)(big_sizes[k] + 1) * sizeof *v);
        for (int64_t i = 0; i < big_sizes[k]; i++) v[i] = urand();
        tfc_tensor *t64 = make(v, &big_sizes[k], 1, 0);
        if (dtype == TFC_DTYPE_F64)
            P[k] = t64;
        else {
            CHECK_OK(tfc_tensor_empty(&big_sizes[k], 1, dtype, &P[k]));
            CHECK_OK(tfc_tensor_copy_from(P[k], t64));
            tfc_tensor_release(t64);
        }
        CHECK_OK(tfc_tensor_set_requires_grad(P[k], 1));
        free(v);
    }
    CHECK_OK(tfc_optim_add_params(opt, P, N_BIG, NULL));
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < N_BIG; k++) {
            tfc_tensor *gt = NULL;
            CHECK_OK(tfc_tensor_randn(&big_sizes[k], 1, dtype, 5, (uint64_t)(step * 100000 + k * 20000), &gt));
            CHECK_OK(tfc_tensor_set_grad(P[k], gt));
            tfc_tensor_release(gt);
        }
        CHECK_OK(tfc_optim_step(opt));
    }
    /* Final parameters and the last gradients, as f64. */
    for (int k = 0; k < N_BIG; k++) {
        int64_t n = big_sizes[k];
        out[2 * k] = malloc((size_t)(n + 1) * sizeof(double));
        out[2 * k + 1] = malloc((size_t)(n + 1) * sizeof(double));
        tfc_tensor *c = NULL, *gt = NULL, *gc = NULL;
        CHECK_OK(tfc_tensor_empty(&n, 1, TFC_DTYPE_F64, &c));
        CHECK_OK(tfc_tensor_copy_from(c, P[k]));
        read(c, out[2 * k]);
        CHECK_OK(tfc_tensor_grad(P[k], &gt));
        CHECK_OK(tfc_tensor_empty(&n, 1, TFC_DTYPE_F64, &gc));
        CHECK_OK(tfc_tensor_copy_from(gc, gt));
        read(gc, out[2 * k + 1]);
        tfc_tensor_release(c);
        tfc_tensor_release(gt);
        tfc_tensor_release(gc);
        tfc_tensor_release(P[k]);
    }
    tfc_optim_release(opt);
    CHECK_OK(tfc_set_num_threads(0));
}

/* The library's switch between the AVX2+FMA and the portable f32 kernels (lib/cpu/cpu_features.c). */
extern int tfc_cpu_avx2_disabled;

TEST(fused_pass_over_many_parameters_is_thread_independent) {
    double *one[2 * N_BIG], *four[2 * N_BIG], *f32[2 * N_BIG], *f32p[2 * N_BIG];
    big_run(TFC_DTYPE_F64, 1, one);
    big_run(TFC_DTYPE_F64, 4, four);
    big_run(TFC_DTYPE_F32, 3, f32);
    tfc_cpu_avx2_disabled = 1;
    big_run(TFC_DTYPE_F32, 3, f32p);
    tfc_cpu_avx2_disabled = 0;
    for (int k = 0; k < N_BIG; k++) {
        size_t bytes = (size_t)big_sizes[k] * sizeof(double);
        CHECK(memcmp(one[2 * k], four[2 * k], bytes) == 0);
        /* f32 follows the f64 path to f32 precision (the gradients are rounded randn, too). */
        double w = 0, wp = 0;
        for (int64_t i = 0; i < big_sizes[k]; i++) {
            w = fmax(w, fabs(f32[2 * k][i] - one[2 * k][i]) / fmax(fabs(one[2 * k][i]), 1.0));
            wp = fmax(wp, fabs(f32p[2 * k][i] - one[2 * k][i]) / fmax(fabs(one[2 * k][i]), 1.0));
        }
        if (!(w < 2e-5 && wp < 2e-5)) TFC_FAIL_AT("f32 parameter %d off by %g (portable kernel: %g)", k, w, wp);
        tfc_test_checks++;
    }
    for (int i = 0; i < 2 * N_BIG; i++) {
        free(one[i]);
        free(four[i]);
        free(f32[i]);
        free(f32p[i]);
    }
}

/* ---- skipped parameters -------------------------------------------------------------- */

TEST(parameters_without_grad_are_skipped_with_their_own_step_count) {
    ref_cfg cfg = {"adam", TFC_OPTIM_ADAM, 0.05, 0.01, 0, 0, 0.9, 0.999, 1e-8, 0, 1, 0};
    double a0[3] = {1, -2, 3}, b0[2] = {0.5, -0.5}, c0[2] = {7, 8};
    int64_t d3 = 3, d2 = 2;
    tfc_tensor *A = make(a0, &d3, 1, 1), *B = make(b0, &d2, 1, 1), *Cn = make(c0, &d2, 1, 1);
    tfc_tensor *ps[3] = {A, B, Cn};
    tfc_optim *opt = make_opt(&cfg);
    CHECK_OK(tfc_optim_add_params(opt, ps, 3, NULL));
    double ra[3], rb[2], ga[3], gb[2];
    memcpy(ra, a0, sizeof ra);
    memcpy(rb, b0, sizeof rb);
    ref_state sa, sb;
    ref_init(&sa, 3);
    ref_init(&sb, 2);
    for (int step = 0; step < 12; step++) {
        for (int i = 0; i < 3; i++) ga[i] = 0.3 * ra[i] + 0.1 * i;
        set_grad(A, ga);
        if (step % 3 == 2) { /* B gets a gradient every third step only */
            for (int i = 0; i < 2; i++) gb[i] = rb[i] - 1;
            set_grad(B, gb);
        }
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        ref_update(&cfg, cfg.lr, cfg.wd, ra, ga, 3, &sa);
        if (step % 3 == 2) ref_update(&cfg, cfg.lr, cfg.wd, rb, gb, 2, &sb);
    }
    double la[3], lb[2], lc[2];
    read(A, la);
    read(B, lb);
    read(Cn, lc);
    CHECK(max_rel(la, ra, 3) <= 1e-13);
    CHECK(max_rel(lb, rb, 2) <= 1e-13); /* bias correction used B's own t = 4, not 12 */
    CHECK(memcmp(lc, c0, sizeof lc) == 0);
    /* C never had a gradient: no state entries for it (param 2), A and B have theirs. */
    int64_t n = 0;
    CHECK_OK(tfc_optim_state_count(opt, &n));
    CHECK(n == 1 + 2 + 2 * 4);
    for (int64_t i = 0; i < n; i++) {
        char *name = NULL;
        tfc_tensor *t = NULL;
        CHECK_OK(tfc_optim_state_get(opt, i, &name, &t));
        CHECK(strncmp(name, "param.2.", 8) != 0);
        if (strcmp(name, "param.1.step") == 0) {
            double v = 0;
            CHECK_OK(tfc_tensor_item(t, &v));
            CHECK(v == 4);
        }
        tfc_free(name);
        tfc_tensor_release(t);
    }
    /* A zero-filled gradient is a gradient: AdamW's decay still applies, as in PyTorch. */
    tfc_optim *w = NULL;
    tfc_optim_options o = TFC_ADAMW_OPTIONS_INIT;
    CHECK_OK(tfc_optim_adamw(&o, &w));
    CHECK_OK(tfc_optim_add_params(w, &Cn, 1, NULL));
    double zeros[2] = {0, 0};
    set_grad(Cn, zeros);
    CHECK_OK(tfc_optim_zero_grad(w, 0));
    CHECK_OK(tfc_optim_step(w));
    read(Cn, lc);
    CHECK_CLOSE(lc[0], 7 * (1 - 1e-3 * 1e-2), 1e-15);
    tfc_optim_release(w);
    ref_free(&sa);
    ref_free(&sb);
    tfc_optim_release(opt);
    tfc_tensor_release(A);
    tfc_tensor_release(B);
    tfc_tensor_release(Cn);
}

/* ---- AdamW vs Adam + L2 --------------------------------------------------------------- */

TEST(adamw_decays_by_lr_wd_p_adam_l2_much_faster) {
    const double lr = 1e-3, wd = 0.01, p0 = 2.0, tiny = 1e-18;
    tfc_tensor *pw = NULL, *pa = NULL;
    int64_t d1 = 1;
    pw = make(&p0, &d1, 1, 1);
    pa = make(&p0, &d1, 1, 1);
    tfc_optim_options o = TFC_OPTIM_OPTIONS_INIT;
    o.lr = lr;
    o.weight_decay = wd;
    tfc_optim *w = NULL, *a = NULL;
    CHECK_OK(tfc_optim_adamw(&o, &w));
    CHECK_OK(tfc_optim_adam(&o, &a));
    CHECK_OK(tfc_optim_add_params(w, &pw, 1, NULL));
    CHECK_OK(tfc_optim_add_params(a, &pa, 1, NULL));
    double vw = p0, va = p0;
    for (int step = 0; step < 50; step++) {
        double before_w = vw, before_a = va;
        set_grad(pw, &tiny);
        set_grad(pa, &tiny);
        CHECK_OK(tfc_optim_step(w));
        CHECK_OK(tfc_optim_step(a));
        read(pw, &vw);
        read(pa, &va);
        /* AdamW: the gradient term is lr·tiny/eps = 1e-10·lr; the decay is exactly lr·wd·p. */
        CHECK_CLOSE(before_w - vw, lr * wd * before_w, 1e-7 * lr * wd * before_w);
        /* Adam + L2: g = tiny + wd·p ≫ eps, so m̂/√v̂ ≈ 1 (exactly 1 at the first step, then just
         * under as p shrinks): each step removes ≈ lr, 1/(wd·p) = 50× more than AdamW. */
        CHECK_CLOSE(before_a - va, lr, (step == 0 ? 1e-6 : 1e-2) * lr);
    }
    /* plus 50 gradient terms of 1e-13 */
    CHECK_CLOSE(vw, p0 * pow(1 - lr * wd, 50), 1e-11);
    CHECK_CLOSE(va, p0 - 50 * lr, 1e-2 * 50 * lr);
    CHECK((p0 - va) / (p0 - vw) > 40);
    tfc_optim_release(w);
    tfc_optim_release(a);
    tfc_tensor_release(pw);
    tfc_tensor_release(pa);
}

/* ---- clipping ------------------------------------------------------------------------- */

static void clip_setup(tfc_tensor **P, double scale) {
    int64_t d0[2] = {4, 5}, d1 = 7, d2 = 3;
    double v[20] = {0};
    P[0] = make(v, d0, 2, 1);
    P[1] = make(v, &d1, 1, 1);
    P[2] = make(v, &d2, 1, 1); /* never gets a gradient */
    rng_state = 3;
    double g[20];
    for (int i = 0; i < 20; i++) g[i] = scale * urand();
    set_grad(P[0], g);
    for (int i = 0; i < 7; i++) g[i] = scale * urand();
    set_grad(P[1], g);
}

static void grads_of(tfc_tensor **P, double *g) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_grad(P[0], &t));
    read(t, g);
    tfc_tensor_release(t);
    CHECK_OK(tfc_tensor_grad(P[1], &t));
    read(t, g + 20);
    tfc_tensor_release(t);
}

TEST(clip_returns_true_norm_and_scales_to_max_norm) {
    tfc_tensor *P[3];
    clip_setup(P, 3.0);
    double g[27], after[27], ref = 0;
    grads_of(P, g);
    for (int i = 0; i < 27; i++) ref += g[i] * g[i];
    ref = sqrt(ref);
    /* Below the norm: scaled by max_norm/(N + 1e-6). */
    double norm = -1, max_norm = ref / 3;
    CHECK_OK(tfc_clip_grad_norm(P, 3, max_norm, &norm));
    CHECK_CLOSE(norm, ref, 1e-14);
    grads_of(P, after);
    double c = max_norm / (ref + 1e-6), n2 = 0;
    for (int i = 0; i < 27; i++) {
        CHECK_CLOSE(after[i], g[i] * c, 1e-15);
        n2 += after[i] * after[i];
    }
    CHECK_CLOSE(sqrt(n2), max_norm, 1e-6);
    /* Measuring again gives the clipped norm; above the norm nothing changes, bit for bit. */
    CHECK_OK(tfc_clip_grad_norm(P, 3, 1e9, &norm));
    CHECK_CLOSE(norm, max_norm, 1e-6);
    double again[27];
    grads_of(P, again);
    CHECK(memcmp(again, after, sizeof again) == 0);
    CHECK_OK(tfc_clip_grad_norm(P, 3, INFINITY, NULL));
    for (int i = 0; i < 3; i++) tfc_tensor_release(P[i]);
}

TEST(clip_through_the_optimizer_and_in_f32) {
    tfc_tensor *P[3];
    clip_setup(P, 1.0);
    double g[27], ref = 0;
    grads_of(P, g);
    for (int i = 0; i < 27; i++) ref += g[i] * g[i];
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_sgd(NULL, &opt));
    CHECK_OK(tfc_optim_add_params(opt, P, 3, NULL));
    double norm = 0;
    CHECK_OK(tfc_optim_clip_grad_norm(opt, 0.5, &norm));
    CHECK_CLOSE(norm, sqrt(ref), 1e-14);
    tfc_optim_release(opt);
    /* f32 gradients are summed in f64: the norm of 10⁶ ones is exactly 1000. */
    int64_t n = 1000000;
    tfc_tensor *p = NULL, *gt = NULL;
    CHECK_OK(tfc_tensor_zeros(&n, 1, TFC_DTYPE_F32, &p));
    CHECK_OK(tfc_tensor_set_requires_grad(p, 1));
    CHECK_OK(tfc_tensor_full(&n, 1, TFC_DTYPE_F32, 1.0, &gt));
    CHECK_OK(tfc_tensor_set_grad(p, gt));
    CHECK_OK(tfc_set_num_threads(1));
    double n1 = 0, n4 = 0;
    CHECK_OK(tfc_clip_grad_norm(&p, 1, INFINITY, &n1));
    CHECK_OK(tfc_set_num_threads(4));
    CHECK_OK(tfc_clip_grad_norm(&p, 1, INFINITY, &n4));
    CHECK_OK(tfc_set_num_threads(0));
    CHECK(n1 == 1000.0 && n4 == 1000.0);
    tfc_tensor_release(gt);
    tfc_tensor_release(p);
    for (int i = 0; i < 3; i++) tfc_tensor_release(P[i]);
}

TEST(clip_huge_f64_gradients_do_not_overflow) {
    tfc_tensor *P[3];
    clip_setup(P, 1e200);
    double g[27], ref = 0;
    grads_of(P, g);
    for (int i = 0; i < 27; i++) ref += (g[i] / 1e200) * (g[i] / 1e200);
    ref = 1e200 * sqrt(ref);
    double norm = 0;
    CHECK_OK(tfc_clip_grad_norm(P, 3, 1.0, &norm));
    CHECK(fabs(norm - ref) <= 1e-14 * ref);
    grads_of(P, g);
    double n2 = 0;
    for (int i = 0; i < 27; i++) n2 += g[i] * g[i];
    CHECK_CLOSE(sqrt(n2), 1.0, 1e-12);
    for (int i = 0; i < 3; i++) tfc_tensor_release(P[i]);
}

TEST(clip_nonfinite_gradient_leaves_everything_untouched) {
    const double bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        tfc_tensor *P[3];
        clip_setup(P, 1.0);
        tfc_tensor *gt = NULL;
        CHECK_OK(tfc_tensor_grad(P[1], &gt));
        ((double *)tfc_tensor_data(gt))[4] = bad[b];
        tfc_tensor_release(gt);
        double before[27], after[27], norm = 12345;
        grads_of(P, before);
        CHECK_ERR(tfc_clip_grad_norm(P, 3, 0.1, &norm), TFC_ERR_NONFINITE, b ? "Inf" : "NaN");
        grads_of(P, after);
        CHECK(memcmp(before, after, sizeof before) == 0);
        CHECK(norm == 12345);
        for (int i = 0; i < 3; i++) tfc_tensor_release(P[i]);
    }
}

TEST(clip_bad_input) {
    tfc_tensor *P[3];
    clip_setup(P, 1.0);
    double norm = 0;
    CHECK_ERR(tfc_clip_grad_norm(NULL, 2, 1.0, &norm), TFC_ERR_INVALID_ARG, "params is NULL");
    CHECK_ERR(tfc_clip_grad_norm(P, -1, 1.0, &norm), TFC_ERR_INVALID_ARG, "n is -1");
    CHECK_ERR(tfc_clip_grad_norm(P, 3, 0.0, &norm), TFC_ERR_INVALID_ARG, "max_norm is 0");
    CHECK_ERR(tfc_clip_grad_norm(P, 3, -1.0, &norm), TFC_ERR_INVALID_ARG, "max_norm");
    CHECK_ERR(tfc_clip_grad_norm(P, 3, NAN, &norm), TFC_ERR_INVALID_ARG, "max_norm is nan");
    tfc_tensor *withnull[2] = {P[0], NULL};
    CHECK_ERR(tfc_clip_grad_norm(withnull, 2, 1.0, &norm), TFC_ERR_INVALID_ARG, "params[1] is NULL");
    CHECK_ERR(tfc_optim_clip_grad_norm(NULL, 1.0, &norm), TFC_ERR_INVALID_ARG, "opt is NULL");
    /* A strided gradient (set by hand) is refused, not read wrongly. */
    int64_t d = 14;
    double big[14] = {0};
    tfc_tensor *base = make(big, &d, 1, 0), *strided = NULL;
    CHECK_OK(tfc_slice(NULL, base, 0, 0, 14, 2, &strided));
    CHECK_OK(tfc_tensor_set_grad(P[1], strided));
    CHECK_ERR(tfc_clip_grad_norm(P, 3, 1.0, &norm), TFC_ERR_INVALID_ARG, "not contiguous");
    tfc_tensor_release(strided);
    tfc_tensor_release(base);
    /* Nothing with a gradient: the norm is 0. */
    CHECK_OK(tfc_clip_grad_norm(&P[2], 1, 1.0, &norm));
    CHECK(norm == 0);
    CHECK_OK(tfc_clip_grad_norm(NULL, 0, 1.0, &norm));
    for (int i = 0; i < 3; i++) tfc_tensor_release(P[i]);
}

/* ---- schedules ---------------------------------------------------------------------------- */

/* The schedule's value; v is read after the call (a pointer, since argument order is unspecified). */
static double lr_of(tfc_status s, const double *v) {
    CHECK(s == TFC_OK);
    return *v;
}

TEST(schedules_hit_documented_values) {
    double lr = 0;
    const double M = 6e-4, m = 6e-5;
    /* cosine, warmup 100, total 1100 */
    CHECK(lr_of(tfc_lr_cosine(0, M, m, 100, 1100, &lr), &lr) == M * 1 / 101);
    CHECK(lr_of(tfc_lr_cosine(99, M, m, 100, 1100, &lr), &lr) == M * 100 / 101);
    CHECK(lr_of(tfc_lr_cosine(100, M, m, 100, 1100, &lr), &lr) == M);
    CHECK_CLOSE(lr_of(tfc_lr_cosine(600, M, m, 100, 1100, &lr), &lr), (M + m) / 2, 1e-15);
    CHECK_CLOSE(lr_of(tfc_lr_cosine(350, M, m, 100, 1100, &lr), &lr), m + 0.5 * (1 + cos(M_PI / 4)) * (M - m), 1e-15);
    CHECK(lr_of(tfc_lr_cosine(1100, M, m, 100, 1100, &lr), &lr) == m);
    CHECK(lr_of(tfc_lr_cosine(5000, M, m, 100, 1100, &lr), &lr) == m);
    CHECK(lr_of(tfc_lr_cosine(0, M, m, 0, 10, &lr), &lr) == M);
    /* linear */
    CHECK(lr_of(tfc_lr_linear(0, M, m, 100, 1100, &lr), &lr) == M / 101);
    CHECK(lr_of(tfc_lr_linear(100, M, m, 100, 1100, &lr), &lr) == M);
    CHECK_CLOSE(lr_of(tfc_lr_linear(600, M, m, 100, 1100, &lr), &lr), (M + m) / 2, 1e-15);
    CHECK_CLOSE(lr_of(tfc_lr_linear(1100, M, m, 100, 1100, &lr), &lr), m, 1e-15);
    CHECK(lr_of(tfc_lr_linear(2000, M, 0.0, 100, 1100, &lr), &lr) == 0);
    CHECK(lr_of(tfc_lr_linear(1100, M, 0.0, 100, 1100, &lr), &lr) == 0);
    /* inverse sqrt, warmup 400 */
    CHECK(lr_of(tfc_lr_inverse_sqrt(0, M, 400, &lr), &lr) == M / 401);
    CHECK(lr_of(tfc_lr_inverse_sqrt(400, M, 400, &lr), &lr) == M);
    CHECK_CLOSE(lr_of(tfc_lr_inverse_sqrt(1600, M, 400, &lr), &lr), M / 2, 1e-15);
    CHECK_CLOSE(lr_of(tfc_lr_inverse_sqrt(40000, M, 400, &lr), &lr), M / 10, 1e-15);
    /* constant */
    CHECK(lr_of(tfc_lr_constant(0, M, 0, &lr), &lr) == M);
    CHECK(lr_of(tfc_lr_constant(3, M, 9, &lr), &lr) == M * 4 / 10);
    CHECK(lr_of(tfc_lr_constant(9, M, 9, &lr), &lr) == M);
    CHECK(lr_of(tfc_lr_constant(1000000, M, 9, &lr), &lr) == M);
    /* bad input, *lr untouched */
    lr = 42;
    CHECK_ERR(tfc_lr_cosine(-1, M, m, 10, 100, &lr), TFC_ERR_INVALID_ARG, "step is -1");
    CHECK_ERR(tfc_lr_cosine(0, M, m, 100, 100, &lr), TFC_ERR_INVALID_ARG, "total must exceed warmup");
    CHECK_ERR(tfc_lr_cosine(0, NAN, m, 10, 100, &lr), TFC_ERR_INVALID_ARG, "max_lr is nan");
    CHECK_ERR(tfc_lr_cosine(0, M, -1, 10, 100, &lr), TFC_ERR_INVALID_ARG, "min_lr is -1");
    CHECK_ERR(tfc_lr_linear(0, M, m, -5, 100, &lr), TFC_ERR_INVALID_ARG, "warmup is -5");
    CHECK_ERR(tfc_lr_inverse_sqrt(0, M, 0, &lr), TFC_ERR_INVALID_ARG, "warmup is 0");
    CHECK_ERR(tfc_lr_constant(0, -M, 0, &lr), TFC_ERR_INVALID_ARG, "max_lr");
    CHECK_ERR(tfc_lr_constant(0, INFINITY, 0, &lr), TFC_ERR_INVALID_ARG, "max_lr is inf");
    CHECK_ERR(tfc_lr_constant(0, M, 0, NULL), TFC_ERR_INVALID_ARG, "lr is NULL");
    CHECK(lr == 42);
}

/* ---- state save / load ----------------------------------------------------------------- */

typedef struct saved {
    int64_t n;
    char **names;
    tfc_tensor **t;
} saved;

static saved save_state(const tfc_optim *opt) {
    saved s = {0, NULL, NULL};
    CHECK_OK(tfc_optim_state_count(opt, &s.n));
    s.names = calloc((size_t)s.n, sizeof *s.names);
    s.t = calloc((size_t)s.n, sizeof *s.t);
    for (int64_t i = 0; i < s.n; i++) {
        tfc_tensor *live = NULL;
        CHECK_OK(tfc_optim_state_get(opt, i, &s.names[i], &live));
        CHECK_OK(tfc_tensor_clone(live, &s.t[i])); /* a checkpoint holds a snapshot */
        tfc_tensor_release(live);
    }
    return s;
}

static void saved_free(saved *s) {
    for (int64_t i = 0; i < s->n; i++) {
        tfc_free(s->names[i]);
        tfc_tensor_release(s->t[i]);
    }
    free(s->names);
    free(s->t);
}

/* The quadratic's gradient (hand-derived) for a parameter with n elements. */
static void quad_grad_step(tfc_tensor *const *P, int np, int step) {
    for (int k = 0; k < np; k++) {
        if (k == np - 1 && step % 2) continue; /* the last parameter is skipped every other step */
        int64_t n = tfc_tensor_numel(P[k]);
        double v[16], g[16];
        read(P[k], v);
        for (int64_t i = 0; i < n; i++) g[i] = (1.0 + 0.5 * (double)i) * (v[i] - 0.25 * (double)k);
        set_grad(P[k], g);
    }
}

static void build(const ref_cfg *cfg, const double *init, tfc_tensor **P, tfc_optim **opt, double lr_scale) {
    int64_t d0[2] = {3, 4}, d1 = 5, d2 = 2;
    P[0] = make(init, d0, 2, 1);
    P[1] = make(init + 12, &d1, 1, 1);
    P[2] = make(init + 17, &d2, 1, 1);
    *opt = make_opt(cfg);
    CHECK_OK(tfc_optim_add_group(*opt, P, 2, cfg->lr * lr_scale, cfg->wd, NULL));
    CHECK_OK(tfc_optim_add_group(*opt, &P[2], 1, cfg->lr * 0.5 * lr_scale, 0.0, NULL));
}

static void resume_case(const ref_cfg *cfg) {
    double init[19];
    rng_state = 11;
    for (int i = 0; i < 19; i++) init[i] = urand();
    /* Uninterrupted: 14 steps, saving after 6. */
    tfc_tensor *P[3], *Q[3];
    tfc_optim *a = NULL, *b = NULL;
    build(cfg, init, P, &a, 1.0);
    saved s = {0, NULL, NULL};
    double mid[19];
    for (int step = 0; step < 14; step++) {
        if (step == 6) {
            s = save_state(a);
            read(P[0], mid);
            read(P[1], mid + 12);
            read(P[2], mid + 17);
        }
        quad_grad_step(P, 3, step);
        CHECK_OK(tfc_optim_step(a));
        CHECK_OK(tfc_optim_zero_grad(a, 1));
    }
    /* Resumed: a fresh optimizer (other lrs, to be overwritten by the load) over the saved parameters. */
    build(cfg, mid, Q, &b, 3.0);
    CHECK_OK(tfc_optim_state_load(b, (const char *const *)s.names, (const tfc_tensor *const *)s.t, s.n));
    int64_t steps = 0;
    CHECK_OK(tfc_optim_step_count(b, &steps));
    CHECK(steps == 6);
    for (int step = 6; step < 14; step++) {
        quad_grad_step(Q, 3, step);
        CHECK_OK(tfc_optim_step(b));
        CHECK_OK(tfc_optim_zero_grad(b, 1));
    }
    for (int k = 0; k < 3; k++) {
        double x[16], y[16];
        read(P[k], x);
        read(Q[k], y);
        if (memcmp(x, y, (size_t)tfc_tensor_numel(P[k]) * sizeof(double)) != 0)
            TFC_FAIL_AT("%s: parameter %d differs after resume", cfg->label, k);
        tfc_test_checks++;
        CHECK(max_rel(x, init + (k == 0 ? 0 : k == 1 ? 12 : 17), tfc_tensor_numel(P[k])) > 1e-3);
    }
    /* The states agree too, entry by entry. */
    saved sa = save_state(a), sb = save_state(b);
    CHECK(sa.n == sb.n && sa.n > 5);
    for (int64_t i = 0; i < sa.n && i < sb.n; i++) {
        CHECK(strcmp(sa.names[i], sb.names[i]) == 0);
        int64_t n = tfc_tensor_numel(sa.t[i]);
        size_t bytes = (size_t)n * tfc_dtype_size(tfc_tensor_dtype(sa.t[i]));
        CHECK(tfc_tensor_numel(sb.t[i]) == n && memcmp(tfc_tensor_data(sa.t[i]), tfc_tensor_data(sb.t[i]), bytes) == 0);
    }
    saved_free(&sa);
    saved_free(&sb);
    saved_free(&s);
    tfc_optim_release(a);
    tfc_optim_release(b);
    for (int k = 0; k < 3; k++) {
        tfc_tensor_release(P[k]);
        tfc_tensor_release(Q[k]);
    }
}

TEST(save_load_continue_is_bit_identical) {
    static const ref_cfg cases[] = {
        {"adam amsgrad", TFC_OPTIM_ADAM, 0.05, 0.01, 0, 0, 0.9, 0.999, 1e-8, 0, 1, 0},
        {"adamw", TFC_OPTIM_ADAMW, 0.05, 0.1, 0, 0, 0.9, 0.95, 1e-8, 0, 0, 0},
        {"sgd momentum", TFC_OPTIM_SGD, 0.05, 0.01, 0.9, 0.2, 0.9, 0.999, 1e-8, 0, 0, 0},
        {"sgd nesterov", TFC_OPTIM_SGD, 0.05, 0, 0.9, 0, 0.9, 0.999, 1e-8, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) resume_case(&cases[i]);
}

TEST(state_names_and_live_buffers) {
    ref_cfg cfg = {"adamw amsgrad", TFC_OPTIM_ADAMW, 0.05, 0.1, 0, 0, 0.9, 0.999, 1e-8, 0, 1, 0};
    double init[19] = {0};
    tfc_tensor *P[3];
    tfc_optim *opt = NULL;
    build(&cfg, init, P, &opt, 1.0);
    int64_t n = 0;
    CHECK_OK(tfc_optim_state_count(opt, &n));
    CHECK(n == 5); /* step + 2 groups × (lr, weight_decay): no per-parameter state before a step */
    quad_grad_step(P, 3, 0);
    CHECK_OK(tfc_optim_step(opt));
    CHECK_OK(tfc_optim_state_count(opt, &n));
    CHECK(n == 5 + 3 * 4);
    static const char *const want[] = {"step",
                                       "group.0.lr",
                                       "group.0.weight_decay",
                                       "group.1.lr",
                                       "group.1.weight_decay",
                                       "param.0.step",
                                       "param.0.exp_avg",
                                       "param.0.exp_avg_sq",
                                       "param.0.max_exp_avg_sq",
                                       "param.1.step"};
    for (int i = 0; i < 10; i++) {
        char *name = NULL;
        CHECK_OK(tfc_optim_state_get(opt, i, &name, NULL));
        CHECK(strcmp(name, want[i]) == 0);
        tfc_free(name);
    }
    tfc_tensor *t = NULL;
    double v = 0;
    CHECK_OK(tfc_optim_state_get(opt, 3, NULL, &t));
    CHECK(tfc_tensor_dtype(t) == TFC_DTYPE_F64 && tfc_tensor_ndim(t) == 0);
    CHECK_OK(tfc_tensor_item(t, &v));
    CHECK(v == 0.025);
    tfc_tensor_release(t);
    CHECK_OK(tfc_optim_state_get(opt, 0, NULL, &t));
    CHECK(tfc_tensor_dtype(t) == TFC_DTYPE_I64);
    tfc_tensor_release(t);
    /* Buffers are the optimizer's own: the next step changes what the caller holds. */
    CHECK_OK(tfc_optim_state_get(opt, 6, NULL, &t));
    int64_t dims[2];
    CHECK_OK(tfc_tensor_shape(t, dims, 2));
    CHECK(tfc_tensor_ndim(t) == 2 && dims[0] == 3 && dims[1] == 4);
    uint64_t ver = tfc_tensor_version(t);
    quad_grad_step(P, 3, 0);
    CHECK_OK(tfc_optim_step(opt));
    CHECK(tfc_tensor_version(t) > ver);
    tfc_tensor_release(t);
    /* set_lr reaches every group; a loaded group lr is what get_group_lr reads. */
    CHECK_OK(tfc_optim_set_lr(opt, 0.125));
    double lr = 0;
    CHECK_OK(tfc_optim_get_group_lr(opt, 1, &lr));
    CHECK(lr == 0.125);
    CHECK_OK(tfc_optim_get_lr(opt, &lr));
    CHECK(lr == 0.125);
    double half = 0.5;
    tfc_tensor *h = make(&half, NULL, 0, 0);
    CHECK_OK(tfc_optim_state_set(opt, "group.1.lr", h));
    CHECK_OK(tfc_optim_get_group_lr(opt, 1, &lr));
    CHECK(lr == 0.5);
    CHECK_OK(tfc_optim_state_set(opt, "group.1.weight_decay", h));
    CHECK_OK(tfc_optim_get_group_weight_decay(opt, 1, &lr));
    CHECK(lr == 0.5);
    tfc_tensor_release(h);
    tfc_optim_release(opt);
    for (int k = 0; k < 3; k++) tfc_tensor_release(P[k]);
}

TEST(state_load_bad_input_changes_nothing) {
    ref_cfg cfg = {"adam", TFC_OPTIM_ADAM, 0.05, 0.1, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0};
    double init[19] = {0};
    tfc_tensor *P[3];
    tfc_optim *opt = NULL;
    build(&cfg, init, P, &opt, 1.0);
    quad_grad_step(P, 3, 1);
    CHECK_OK(tfc_optim_step(opt));
    saved before = save_state(opt);
    int64_t d34[2] = {3, 4}, d43[2] = {4, 3}, d5 = 5;
    double z[12] = {0}, seven = 7, neg = -1, frac = 2.5, nan_v = NAN;
    tfc_tensor *m34 = make(z, d34, 2, 0), *m43 = make(z, d43, 2, 0), *v5 = make(z, &d5, 1, 0);
    tfc_tensor *s7 = make(&seven, NULL, 0, 0), *sneg = make(&neg, NULL, 0, 0), *sfrac = make(&frac, NULL, 0, 0);
    tfc_tensor *snan = make(&nan_v, NULL, 0, 0), *f32 = NULL, *u8 = NULL;
    CHECK_OK(tfc_tensor_zeros(d34, 2, TFC_DTYPE_F32, &f32));
    CHECK_OK(tfc_tensor_zeros(NULL, 0, TFC_DTYPE_U8, &u8));

    CHECK_ERR(tfc_optim_state_set(opt, "param.0.exp_avg", m43), TFC_ERR_SHAPE, "[4,3] but parameter 0 is [3,4]");
    CHECK_ERR(tfc_optim_state_set(opt, "param.1.exp_avg_sq", m34), TFC_ERR_SHAPE, "parameter 1 is [5]");
    CHECK_ERR(tfc_optim_state_set(opt, "param.0.exp_avg", f32), TFC_ERR_DTYPE, "f32 but parameter 0 is f64");
    CHECK_ERR(tfc_optim_state_set(opt, "param.0.max_exp_avg_sq", m34), TFC_ERR_INVALID_ARG, "no max_exp_avg_sq");
    CHECK_ERR(tfc_optim_state_set(opt, "param.0.momentum_buffer", m34), TFC_ERR_INVALID_ARG, "no momentum_buffer");
    CHECK_ERR(tfc_optim_state_set(opt, "param.9.exp_avg", m34), TFC_ERR_INVALID_ARG, "has 3 parameters");
    CHECK_ERR(tfc_optim_state_set(opt, "group.2.lr", s7), TFC_ERR_INVALID_ARG, "has 2 groups");
    CHECK_ERR(tfc_optim_state_set(opt, "param.0.velocity", m34), TFC_ERR_INVALID_ARG, "not an optimizer state name");
    CHECK_ERR(tfc_optim_state_set(opt, "param.x.exp_avg", m34), TFC_ERR_INVALID_ARG, "not an optimizer state name");
    CHECK_ERR(tfc_optim_state_set(opt, "stepp", s7), TFC_ERR_INVALID_ARG, "not an optimizer state name");
    CHECK_ERR(tfc_optim_state_set(opt, "step", sneg), TFC_ERR_INVALID_ARG, "whole number >= 0");
    CHECK_ERR(tfc_optim_state_set(opt, "param.1.step", sfrac), TFC_ERR_INVALID_ARG, "whole number");
    CHECK_ERR(tfc_optim_state_set(opt, "step", v5), TFC_ERR_SHAPE, "one element");
    CHECK_ERR(tfc_optim_state_set(opt, "step", u8), TFC_ERR_DTYPE, "u8");
    CHECK_ERR(tfc_optim_state_set(opt, "group.0.lr", snan), TFC_ERR_INVALID_ARG, "finite");
    CHECK_ERR(tfc_optim_state_set(opt, "group.0.weight_decay", sneg), TFC_ERR_INVALID_ARG, "weight_decay");
    CHECK_ERR(tfc_optim_state_set(opt, NULL, s7), TFC_ERR_INVALID_ARG, "name is NULL");
    CHECK_ERR(tfc_optim_state_set(opt, "step", NULL), TFC_ERR_INVALID_ARG, "tensor is NULL");
    CHECK_ERR(tfc_optim_state_set(NULL, "step", s7), TFC_ERR_INVALID_ARG, "opt is NULL");
    CHECK_ERR(tfc_optim_state_load(opt, NULL, NULL, 2), TFC_ERR_INVALID_ARG, "names is NULL");
    /* A batch with one bad entry applies none of the good ones. */
    const char *names[3] = {"step", "param.2.exp_avg", "param.0.exp_avg"};
    const tfc_tensor *ts[3] = {s7, v5, m34};
    CHECK_ERR(tfc_optim_state_load(opt, names, ts, 3), TFC_ERR_SHAPE, "tensors[1] for 'param.2.exp_avg'");
    saved after = save_state(opt);
    CHECK(after.n == before.n);
    for (int64_t i = 0; i < after.n && i < before.n; i++) {
        size_t bytes = (size_t)tfc_tensor_numel(before.t[i]) * tfc_dtype_size(tfc_tensor_dtype(before.t[i]));
        CHECK(memcmp(tfc_tensor_data(before.t[i]), tfc_tensor_data(after.t[i]), bytes) == 0);
    }
    CHECK_ERR(tfc_optim_state_get(opt, after.n, NULL, NULL), TFC_ERR_INVALID_ARG, "state entries");
    CHECK_ERR(tfc_optim_state_get(opt, -1, NULL, NULL), TFC_ERR_INVALID_ARG, "i is -1");
    saved_free(&after);
    saved_free(&before);
    /* SGD without momentum keeps no per-parameter state at all. */
    tfc_optim *sgd = NULL;
    CHECK_OK(tfc_optim_sgd(NULL, &sgd));
    CHECK_OK(tfc_optim_add_params(sgd, P, 3, NULL));
    CHECK_ERR(tfc_optim_state_set(sgd, "param.0.step", s7), TFC_ERR_INVALID_ARG, "no per-parameter step");
    CHECK_ERR(tfc_optim_state_set(sgd, "param.0.momentum_buffer", m34), TFC_ERR_INVALID_ARG, "momentum 0");
    tfc_optim_release(sgd);
    tfc_tensor *all[] = {m34, m43, v5, s7, sneg, sfrac, snan, f32, u8};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_optim_release(opt);
    for (int k = 0; k < 3; k++) tfc_tensor_release(P[k]);
}

/* ---- constructors, groups, setters: bad input -------------------------------------------- */

TEST(bad_hyperparameters_are_refused) {
    tfc_optim *opt = NULL;
    tfc_optim_options o = TFC_OPTIM_OPTIONS_INIT;
#define BAD(kind, field, value, fragment)                                         \
    do {                                                                          \
        tfc_optim_options b_ = o;                                                 \
        b_.field = value;                                                         \
        CHECK_ERR(tfc_optim_new(kind, &b_, &opt), TFC_ERR_INVALID_ARG, fragment); \
    } while (0)
    BAD(TFC_OPTIM_SGD, lr, -0.1, "opts->lr is -0.1");
    BAD(TFC_OPTIM_ADAM, lr, NAN, "opts->lr is nan");
    BAD(TFC_OPTIM_ADAMW, lr, INFINITY, "opts->lr is inf");
    BAD(TFC_OPTIM_ADAM, weight_decay, -1, "opts->weight_decay");
    BAD(TFC_OPTIM_SGD, weight_decay, NAN, "opts->weight_decay is nan");
    BAD(TFC_OPTIM_ADAM, beta1, 1.0, "opts->beta1 is 1: must be in [0, 1)");
    BAD(TFC_OPTIM_ADAM, beta1, -0.1, "opts->beta1");
    BAD(TFC_OPTIM_ADAMW, beta2, 1.5, "opts->beta2 is 1.5");
    BAD(TFC_OPTIM_ADAMW, beta2, NAN, "opts->beta2 is nan");
    BAD(TFC_OPTIM_ADAM, eps, 0.0, "opts->eps is 0");
    BAD(TFC_OPTIM_ADAM, eps, -1e-8, "opts->eps");
    BAD(TFC_OPTIM_ADAMW, eps, NAN, "opts->eps is nan");
    BAD(TFC_OPTIM_ADAM, amsgrad, 2, "opts->amsgrad is 2");
    BAD(TFC_OPTIM_SGD, momentum, -0.5, "opts->momentum");
    BAD(TFC_OPTIM_SGD, momentum, NAN, "opts->momentum is nan");
    BAD(TFC_OPTIM_SGD, dampening, NAN, "opts->dampening is nan");
    BAD(TFC_OPTIM_SGD, nesterov, 1, "nesterov needs momentum > 0");
    BAD(TFC_OPTIM_SGD, maximize, -1, "opts->maximize");
    {
        tfc_optim_options b = o;
        b.momentum = 0.9;
        b.dampening = 0.1;
        b.nesterov = 1;
        CHECK_ERR(tfc_optim_sgd(&b, &opt), TFC_ERR_INVALID_ARG, "dampening == 0");
        b.struct_size = 8;
        CHECK_ERR(tfc_optim_sgd(&b, &opt), TFC_ERR_VERSION, "struct_size is 8");
        b.struct_size = (uint32_t)sizeof b + 8;
        CHECK_ERR(tfc_optim_adam(&b, &opt), TFC_ERR_VERSION, "struct_size");
    }
    /* Fields a kind does not read are not checked (SGD ignores the betas). */
    {
        tfc_optim_options b = o;
        b.beta1 = 7;
        CHECK_OK(tfc_optim_sgd(&b, &opt));
        tfc_optim_release(opt);
    }
    CHECK_ERR(tfc_optim_new((tfc_optim_kind)7, NULL, &opt), TFC_ERR_INVALID_ARG, "kind 7");
    CHECK_ERR(tfc_optim_adam(NULL, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_optim_options_default(TFC_OPTIM_SGD, NULL), TFC_ERR_INVALID_ARG, "opts is NULL");
    CHECK_ERR(tfc_optim_options_default((tfc_optim_kind)-3, &o), TFC_ERR_INVALID_ARG, "kind -3");
    /* Defaults are PyTorch's. */
    tfc_optim_options d;
    CHECK_OK(tfc_optim_options_default(TFC_OPTIM_ADAMW, &d));
    CHECK(d.struct_size == sizeof d && d.lr == 1e-3 && d.weight_decay == 1e-2 && d.beta1 == 0.9 && d.beta2 == 0.999 &&
          d.eps == 1e-8 && !d.amsgrad && !d.maximize);
    CHECK_OK(tfc_optim_options_default(TFC_OPTIM_ADAM, &d));
    CHECK(d.weight_decay == 0 && d.lr == 1e-3);
    CHECK_OK(tfc_optim_adamw(NULL, &opt));
    double lr = 0;
    CHECK_OK(tfc_optim_get_lr(opt, &lr));
    CHECK(lr == 1e-3);
    tfc_optim_release(opt);
    tfc_optim_release(NULL);
#undef BAD
}

TEST(bad_parameters_and_groups_are_refused) {
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_adamw(NULL, &opt));
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t d6 = 6, d23[2] = {2, 3};
    tfc_tensor *p = make(v, &d6, 1, 1), *q = make(v, d23, 2, 1), *nl = NULL, *view = NULL, *tr = NULL;
    tfc_tensor *ints = NULL;
    CHECK_OK(tfc_tensor_zeros(&d6, 1, TFC_DTYPE_I32, &ints));
    CHECK_OK(tfc_mul_scalar(NULL, p, 1.0, &nl)); /* a fresh leaf: fine */
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *produced = NULL;
    CHECK_OK(tfc_mul_scalar(g, p, 2.0, &produced));
    CHECK_OK(tfc_narrow(NULL, p, 0, 2, 3, &view));
    CHECK_OK(tfc_transpose(NULL, q, 0, 1, &tr));

    CHECK_ERR(tfc_optim_add_group(NULL, &p, 1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "opt is NULL");
    CHECK_ERR(tfc_optim_add_group(opt, NULL, 1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "params is NULL");
    tfc_tensor *withnull[2] = {p, NULL};
    CHECK_ERR(tfc_optim_add_group(opt, withnull, 2, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "params[1] is NULL");
    CHECK_ERR(tfc_optim_add_group(opt, &p, -1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "n is -1");
    CHECK_ERR(tfc_optim_add_group(opt, &p, 1, -0.1, 0, NULL), TFC_ERR_INVALID_ARG, "lr is -0.1");
    CHECK_ERR(tfc_optim_add_group(opt, &p, 1, NAN, 0, NULL), TFC_ERR_INVALID_ARG, "lr is nan");
    CHECK_ERR(tfc_optim_add_group(opt, &p, 1, 0.1, NAN, NULL), TFC_ERR_INVALID_ARG, "weight_decay is nan");
    CHECK_ERR(tfc_optim_add_group(opt, &ints, 1, 0.1, 0, NULL), TFC_ERR_DTYPE, "i32");
    CHECK_ERR(tfc_optim_add_group(opt, &produced, 1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "not a leaf");
    CHECK_ERR(tfc_optim_add_group(opt, &tr, 1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "not contiguous");
    tfc_tensor *twice[2] = {p, p};
    CHECK_ERR(tfc_optim_add_group(opt, twice, 2, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "same tensor as params[0]");
    int32_t n_groups = -1;
    CHECK_OK(tfc_optim_num_groups(opt, &n_groups));
    CHECK(n_groups == 0); /* failed calls add nothing */
    CHECK_OK(tfc_optim_add_group(opt, &p, 1, 0.1, 0, NULL));
    CHECK_ERR(tfc_optim_add_group(opt, &p, 1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "already parameter 0 (group 0)");
    CHECK_ERR(tfc_optim_add_group(opt, &view, 1, 0.1, 0, NULL), TFC_ERR_INVALID_ARG, "overlaps the memory");
    CHECK_OK(tfc_optim_add_group(opt, NULL, 0, 0.1, 0, NULL)); /* an empty group is fine */
    CHECK_OK(tfc_optim_add_params(opt, &nl, 1, NULL));
    int64_t np = 0;
    CHECK_OK(tfc_optim_num_params(opt, &np));
    CHECK(np == 2);
    tfc_tensor *got = NULL;
    int32_t grp = -1;
    CHECK_OK(tfc_optim_param(opt, 1, &got, &grp));
    CHECK(got == nl && grp == 2);
    tfc_tensor_release(got);
    CHECK_ERR(tfc_optim_param(opt, 2, &got, NULL), TFC_ERR_INVALID_ARG, "k is 2");
    /* Setters. */
    CHECK_ERR(tfc_optim_set_lr(opt, -1), TFC_ERR_INVALID_ARG, "lr is -1");
    CHECK_ERR(tfc_optim_set_lr(opt, NAN), TFC_ERR_INVALID_ARG, "lr is nan");
    CHECK_ERR(tfc_optim_set_group_lr(opt, 3, 0.1), TFC_ERR_INVALID_ARG, "group is 3");
    CHECK_ERR(tfc_optim_set_group_lr(opt, -1, 0.1), TFC_ERR_INVALID_ARG, "group is -1");
    CHECK_ERR(tfc_optim_set_group_lr(opt, 0, INFINITY), TFC_ERR_INVALID_ARG, "lr is inf");
    CHECK_ERR(tfc_optim_set_group_weight_decay(opt, 0, -2), TFC_ERR_INVALID_ARG, "wd is -2");
    double x = 0;
    CHECK_ERR(tfc_optim_get_group_lr(opt, 0, NULL), TFC_ERR_INVALID_ARG, "lr is NULL");
    CHECK_ERR(tfc_optim_get_group_weight_decay(opt, 9, &x), TFC_ERR_INVALID_ARG, "group is 9");
    CHECK_ERR(tfc_optim_step(NULL), TFC_ERR_INVALID_ARG, "opt is NULL");
    CHECK_ERR(tfc_optim_zero_grad(NULL, 1), TFC_ERR_INVALID_ARG, "opt is NULL");
    CHECK_ERR(tfc_optim_step_count(opt, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_optim_num_params(NULL, &np), TFC_ERR_INVALID_ARG, "opt is NULL");
    CHECK_ERR(tfc_optim_state_count(opt, NULL), TFC_ERR_INVALID_ARG, "n is NULL");
    /* A strided gradient is refused before anything is written. */
    double big[12] = {0};
    int64_t d12 = 12;
    tfc_tensor *base = make(big, &d12, 1, 0), *strided = NULL;
    CHECK_OK(tfc_slice(NULL, base, 0, 0, 12, 2, &strided));
    CHECK_OK(tfc_tensor_set_grad(p, strided));
    CHECK_ERR(tfc_optim_step(opt), TFC_ERR_INVALID_ARG, "not contiguous");
    double now[6];
    read(p, now);
    CHECK(memcmp(now, v, sizeof now) == 0);
    int64_t steps = -1;
    CHECK_OK(tfc_optim_step_count(opt, &steps));
    CHECK(steps == 0);
    tfc_tensor_release(strided);
    tfc_tensor_release(base);
    tfc_tensor *all[] = {p, q, nl, view, tr, ints, produced};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
    tfc_optim_release(opt);
}

TEST(step_bumps_versions_so_stale_graphs_refuse_backward) {
    double v[3] = {1, 2, 3};
    int64_t d3 = 3;
    tfc_tensor *p = make(v, &d3, 1, 1), *sq = NULL, *l = NULL;
    tfc_optim *opt = NULL;
    tfc_optim_options o = TFC_SGD_OPTIONS_INIT;
    o.lr = 0.1;
    CHECK_OK(tfc_optim_sgd(&o, &opt));
    CHECK_OK(tfc_optim_add_params(opt, &p, 1, NULL));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_mul(g, p, p, &sq)); /* saves p */
    CHECK_OK(tfc_sum(g, sq, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    uint64_t ver = tfc_tensor_version(p);
    CHECK_OK(tfc_optim_step(opt));
    CHECK(tfc_tensor_version(p) > ver);
    double now[3];
    read(p, now);
    for (int i = 0; i < 3; i++) CHECK(now[i] == v[i] - 0.1 * (2 * v[i]));
    CHECK(tfc_graph_backward(g, l, NULL) != TFC_OK);
    tfc_tensor_release(sq);
    tfc_tensor_release(l);
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_tensor_release(p);
}
