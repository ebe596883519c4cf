/*
 * Prints optimizer trajectories of a tiny MLP trained with the library
 * (clipping + cosine schedule + two parameter groups), for
 * torch_check.py to replay with torch.optim and compare. Public API only.
 *
 * Output, one record per line, numbers as %.17g:
 *   case <label> <f32|f64> <sgd|adam|adamw> lr wd momentum dampening nesterov beta1 beta2 eps amsgrad maximize
 *   data <name> <n> v...            x [6,3], t [6,2], w1 [3,4], b1 [4], w2 [4,2], b2 [2] (initial values)
 *   step <s> <lr> <pre-clip norm>
 *   param <k> <n> v...              parameter k after the step (w1, b1, w2, b2)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/tfcore.h"

#define TRY(expr)                                                                                    \
    do {                                                                                             \
        tfc_status s_ = (expr);                                                                      \
        if (s_ != TFC_OK) {                                                                          \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr, tfc_status_name(s_), \
                    tfc_last_error());                                                               \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

enum { N = 6, I = 3, H = 4, O = 2, STEPS = 60, WARMUP = 5 };
static const double MAX_NORM = 0.5, MIN_LR_FRAC = 0.1;

static uint64_t rng = 1234;
static double urand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

typedef struct cfg {
    const char *label;
    tfc_optim_kind kind;
    double lr, wd, momentum, dampening;
    int nesterov;
    double beta1, beta2, eps;
    int amsgrad, maximize;
} cfg;

static const cfg cases[] = {
    {"sgd_momentum_dampening", TFC_OPTIM_SGD, 0.2, 0.01, 0.9, 0.1, 0, 0.9, 0.999, 1e-8, 0, 0},
    {"sgd_nesterov", TFC_OPTIM_SGD, 0.2, 0.001, 0.8, 0, 1, 0.9, 0.999, 1e-8, 0, 0},
    {"adam_l2_amsgrad", TFC_OPTIM_ADAM, 0.02, 0.05, 0, 0, 0, 0.85, 0.99, 1e-7, 1, 0},
    {"adamw", TFC_OPTIM_ADAMW, 0.02, 0.1, 0, 0, 0, 0.9, 0.95, 1e-8, 0, 0},
    {"adamw_amsgrad_maximize", TFC_OPTIM_ADAMW, 0.01, 0.1, 0, 0, 0, 0.9, 0.999, 1e-8, 1, 1},
};

static tfc_tensor *make(const double *v, const int64_t *dims, int32_t nd, tfc_dtype dt, int param) {
    tfc_tensor *t64, *t;
    TRY(tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_F64, &t64));
    TRY(tfc_tensor_empty(dims, nd, dt, &t));
    TRY(tfc_tensor_copy_from(t, t64));
    tfc_tensor_release(t64);
    if (param) TRY(tfc_tensor_set_requires_grad(t, 1));
    return t;
}

static void print_tensor(const char *tag, const char *name, const tfc_tensor *t) {
    int64_t n = tfc_tensor_numel(t);
    tfc_tensor *c;
    TRY(tfc_tensor_empty(&n, 1, TFC_DTYPE_F64, &c));
    tfc_tensor *flat;
    TRY(tfc_reshape(NULL, t, &n, 1, &flat));
    TRY(tfc_tensor_copy_from(c, flat));
    const double *v = tfc_tensor_data(c);
    printf("%s %s %lld", tag, name, (long long)n);
    for (int64_t i = 0; i < n; i++) printf(" %.17g", v[i]);
    printf("\n");
    tfc_tensor_release(flat);
    tfc_tensor_release(c);
}

static void run(const cfg *c, tfc_dtype dt) {
    static const char *const kinds[] = {"sgd", "adam", "adamw"};
    printf("case %s %s %s %.17g %.17g %.17g %.17g %d %.17g %.17g %.17g %d %d\n", c->label, tfc_dtype_name(dt),
           kinds[c->kind], c->lr, c->wd, c->momentum, c->dampening, c->nesterov, c->beta1, c->beta2, c->eps, c->amsgrad,
           c->maximize);
    rng = 1234;
    double x[N * I], t[N * O], w1[I * H], b1[H], w2[H * O], b2[O];
    for (int i = 0; i < N * I; i++) x[i] = urand();
    for (int i = 0; i < N * O; i++) t[i] = 0.8 * urand();
    for (int i = 0; i < I * H; i++) w1[i] = 0.7 * urand();
    for (int i = 0; i < H; i++) b1[i] = 0.1 * urand();
    for (int i = 0; i < H * O; i++) w2[i] = 0.7 * urand();
    for (int i = 0; i < O; i++) b2[i] = 0.1 * urand();
    int64_t dx[2] = {N, I}, dt2[2] = {N, O}, dw1[2] = {I, H}, db1 = H, dw2[2] = {H, O}, db2 = O;
    tfc_tensor *X = make(x, dx, 2, dt, 0), *T = make(t, dt2, 2, dt, 0);
    tfc_tensor *P[4] = {make(w1, dw1, 2, dt, 1), make(b1, &db1, 1, dt, 1), make(w2, dw2, 2, dt, 1),
                        make(b2, &db2, 1, dt, 1)};
    const char *names[] = {"x", "t", "w1", "b1", "w2", "b2"};
    tfc_tensor *all[] = {X, T, P[0], P[1], P[2], P[3]};
    for (int i = 0; i < 6; i++) print_tensor("data", names[i], all[i]);

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
    tfc_optim *opt;
    TRY(tfc_optim_new(c->kind, &o, &opt));
    tfc_tensor *mats[2] = {P[0], P[2]}, *vecs[2] = {P[1], P[3]};
    TRY(tfc_optim_add_group(opt, mats, 2, c->lr, c->wd, NULL));
    TRY(tfc_optim_add_group(opt, vecs, 2, c->lr, 0.0, NULL));
    tfc_graph *g;
    TRY(tfc_graph_new(&g));
    for (int s = 0; s < STEPS; s++) {
        tfc_tensor *z0, *z, *h, *o0, *out, *d, *sq, *loss;
        TRY(tfc_matmul(g, X, P[0], &z0));
        TRY(tfc_add(g, z0, P[1], &z));
        TRY(tfc_tanh(g, z, &h));
        TRY(tfc_matmul(g, h, P[2], &o0));
        TRY(tfc_add(g, o0, P[3], &out));
        TRY(tfc_sub(g, out, T, &d));
        TRY(tfc_mul(g, d, d, &sq));
        TRY(tfc_mean(g, sq, NULL, 0, 0, &loss));
        TRY(tfc_graph_backward(g, loss, NULL));
        TRY(tfc_graph_clear(g));
        tfc_tensor *tmp[] = {z0, z, h, o0, out, d, sq, loss};
        for (int i = 0; i < 8; i++) tfc_tensor_release(tmp[i]);
        double norm, lr;
        TRY(tfc_optim_clip_grad_norm(opt, MAX_NORM, &norm));
        TRY(tfc_lr_cosine(s, c->lr, c->lr * MIN_LR_FRAC, WARMUP, STEPS - 10, &lr));
        TRY(tfc_optim_set_lr(opt, lr));
        TRY(tfc_optim_step(opt));
        TRY(tfc_optim_zero_grad(opt, 1));
        printf("step %d %.17g %.17g\n", s, lr, norm);
        for (int k = 0; k < 4; k++) {
            char kn[8];
            snprintf(kn, sizeof kn, "%d", k);
            print_tensor("param", kn, P[k]);
        }
    }
    tfc_graph_release(g);
    tfc_optim_release(opt);
    for (int i = 0; i < 6; i++) tfc_tensor_release(all[i]);
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run(&cases[i], TFC_DTYPE_F64);
        run(&cases[i], TFC_DTYPE_F32);
    }
    return 0;
}
