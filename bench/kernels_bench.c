/*
 * Micro-benchmark of the fused kernels' explicit entry points (f32, CPU):
 * attention forward and forward+backward, LayerNorm, GELU and softmax
 * cross-entropy forward+backward at GPT-2-small-like sizes. Prints ms per
 * call and GFLOP/s (attention: 4·D flops per visible query-key pair forward,
 * 2.5× that backward) or effective GB/s (the bytes a single fused pass must
 * move: inputs read once, outputs written once). Times are the fastest of
 * several calls.
 *
 *   kernels_bench [threads]      (default: all cores)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tfcore/tfcore.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define OK(expr)                                                         \
    do {                                                                 \
        tfc_status s_ = (expr);                                          \
        if (s_ != TFC_OK) {                                              \
            fprintf(stderr, "%s failed: %s\n", #expr, tfc_last_error()); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

static tfc_tensor *randn(const int64_t *dims, int32_t nd, uint64_t seed, double scale) {
    tfc_tensor *t;
    OK(tfc_tensor_randn(dims, nd, TFC_DTYPE_F32, seed, 0, &t));
    float *p = tfc_tensor_data(t);
    for (int64_t i = 0; i < tfc_tensor_numel(t); i++) p[i] *= (float)scale;
    return t;
}
static tfc_tensor *empty(const int64_t *dims, int32_t nd, tfc_dtype dt) {
    tfc_tensor *t;
    OK(tfc_tensor_zeros(dims, nd, dt, &t));
    return t;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * Seconds per call of fn(ctx), wall clock and process CPU time: the fastest
 * of several calls after 2 warm-up calls (at least 5, until ~0.5 s or 50
 * calls). The minimum, not the mean, because on a shared machine the slower
 * calls measure the neighbours; with 1 thread the CPU time is what the
 * kernel costs on one core even when the machine is oversubscribed.
 */
typedef void (*bench_fn)(void *ctx);
typedef struct {
    double wall, cpu;
} timing;
static timing time_it(bench_fn fn, void *ctx) {
    fn(ctx);
    fn(ctx);
    timing best = {1e30, 1e30};
    double t0 = now();
    for (int n = 0; n < 50 && (n < 5 || now() - t0 < 0.5); n++) {
        double w = now(), c = cpu_now();
        fn(ctx);
        w = now() - w, c = cpu_now() - c;
        best.wall = w < best.wall ? w : best.wall;
        best.cpu = c < best.cpu ? c : best.cpu;
    }
    return best;
}

static void report(const char *name, timing t, double amount, const char *unit) {
    printf("%-46s %9.3f ms %9.3f ms %9.2f %-7s %9.2f %s\n", name, t.wall * 1e3, t.cpu * 1e3, amount / t.wall * 1e-9,
           unit, amount / t.cpu * 1e-9, unit);
}

/* ---- attention ----------------------------------------------------------- */

typedef struct {
    tfc_tensor *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
    double scale;
} att_ctx;
static void att_fwd(void *p) {
    att_ctx *a = p;
    OK(tfc_attention_forward(a->q, a->k, a->v, 1, a->scale, a->out, a->lse));
}
static void att_fwd_bwd(void *p) {
    att_ctx *a = p;
    OK(tfc_attention_forward(a->q, a->k, a->v, 1, a->scale, a->out, a->lse));
    OK(tfc_attention_backward(a->dout, a->q, a->k, a->v, a->out, a->lse, 1, a->scale, a->dq, a->dk, a->dv, 0));
}

/* ---- LayerNorm ------------------------------------------------------------ */

typedef struct {
    tfc_tensor *x, *w, *b, *y, *mean, *rstd, *dy, *dx, *dw, *db;
} ln_ctx;
static void ln_fwd_bwd(void *p) {
    ln_ctx *l = p;
    OK(tfc_layernorm_forward(l->x, l->w, l->b, 1e-5, l->y, l->mean, l->rstd));
    OK(tfc_layernorm_backward(l->dy, l->x, l->w, l->mean, l->rstd, l->dx, l->dw, l->db, 0));
}

/* ---- GELU ------------------------------------------------------------------ */

typedef struct {
    tfc_tensor *x, *y, *dy, *dx;
    int32_t approximate;
} gelu_ctx;
static void gelu_fwd_bwd(void *p) {
    gelu_ctx *g = p;
    OK(tfc_gelu_forward(g->x, g->approximate, g->y));
    OK(tfc_gelu_backward(g->dy, g->x, g->approximate, g->dx, 0));
}

/* ---- cross-entropy ---------------------------------------------------------- */

typedef struct {
    tfc_tensor *logits, *targets, *loss, *lse, *dloss, *dlogits;
} ce_ctx;
static void ce_fwd_bwd(void *p) {
    ce_ctx *c = p;
    OK(tfc_cross_entropy_forward(c->logits, c->targets, -100, c->loss, c->lse));
    OK(tfc_cross_entropy_backward(c->dloss, c->logits, c->targets, c->lse, -100, c->dlogits, 0));
}

static void bench_ce(int64_t n, int64_t c) {
    int64_t dims[2] = {n, c};
    ce_ctx x = {randn(dims, 2, 7, 2.0),      empty(&n, 1, TFC_DTYPE_I64),   empty(NULL, 0, TFC_DTYPE_F32),
                empty(&n, 1, TFC_DTYPE_F32), empty(NULL, 0, TFC_DTYPE_F32), empty(dims, 2, TFC_DTYPE_F32)};
    int64_t *t = tfc_tensor_data(x.targets);
    for (int64_t i = 0; i < n; i++) t[i] = (i * 7919) % c;
    OK(tfc_tensor_fill(x.dloss, 1));
    char name[64];
    snprintf(name, sizeof name, "cross_entropy fwd+bwd (%lld,%lld)", (long long)n, (long long)c);
    report(name, time_it(ce_fwd_bwd, &x), 3.0 * (double)(n * c) * 4, "GB/s");
    tfc_tensor_release(x.logits), tfc_tensor_release(x.targets), tfc_tensor_release(x.loss);
    tfc_tensor_release(x.lse), tfc_tensor_release(x.dloss), tfc_tensor_release(x.dlogits);
}

int main(int argc, char **argv) {
    if (argc > 1) OK(tfc_set_num_threads(atoi(argv[1])));
    printf("libtfcore %s, %d threads, f32\n%s\n\n", tfc_version_string(), (int)tfc_get_num_threads(), tfc_build_info());
    printf("%-46s %12s %12s %17s %17s\n", "kernel", "wall/call", "cpu/call", "rate (wall)", "rate (cpu)");

    {
        const int64_t B = 8, H = 6, T = 256, D = 64;
        int64_t qd[4] = {B, H, T, D};
        att_ctx a = {randn(qd, 4, 1, 1),          randn(qd, 4, 2, 1),
                     randn(qd, 4, 3, 1),          empty(qd, 4, TFC_DTYPE_F32),
                     empty(qd, 3, TFC_DTYPE_F32), randn(qd, 4, 4, 1),
                     empty(qd, 4, TFC_DTYPE_F32), empty(qd, 4, TFC_DTYPE_F32),
                     empty(qd, 4, TFC_DTYPE_F32), 0.125};
        double pairs = (double)(B * H) * (double)T * (double)(T + 1) / 2, fwd = 4.0 * (double)D * pairs;
        report("attention fwd     (B=8,H=6,T=256,d=64,causal)", time_it(att_fwd, &a), fwd, "GFLOP/s");
        report("attention fwd+bwd (B=8,H=6,T=256,d=64,causal)", time_it(att_fwd_bwd, &a), 3.5 * fwd, "GFLOP/s");
        tfc_tensor *all[] = {a.q, a.k, a.v, a.out, a.lse, a.dout, a.dq, a.dk, a.dv};
        for (int i = 0; i < 9; i++) tfc_tensor_release(all[i]);
    }
    {
        const int64_t n = 2048, c = 384;
        int64_t dims[2] = {n, c};
        ln_ctx l = {randn(dims, 2, 5, 1),        randn(&c, 1, 6, 1),
                    empty(&c, 1, TFC_DTYPE_F32), empty(dims, 2, TFC_DTYPE_F32),
                    empty(&n, 1, TFC_DTYPE_F32), empty(&n, 1, TFC_DTYPE_F32),
                    randn(dims, 2, 7, 1),        empty(dims, 2, TFC_DTYPE_F32),
                    empty(&c, 1, TFC_DTYPE_F32), empty(&c, 1, TFC_DTYPE_F32)};
        report("layernorm fwd+bwd (2048,384)", time_it(ln_fwd_bwd, &l), 5.0 * (double)(n * c) * 4, "GB/s");
        tfc_tensor *all[] = {l.x, l.w, l.b, l.y, l.mean, l.rstd, l.dy, l.dx, l.dw, l.db};
        for (int i = 0; i < 10; i++) tfc_tensor_release(all[i]);
    }
    for (int32_t approx = 0; approx < 2; approx++) {
        const int64_t dims[2] = {2048, 1536}, n = 2048 * 1536;
        gelu_ctx g = {randn(dims, 2, 8, 1), empty(dims, 2, TFC_DTYPE_F32), randn(dims, 2, 9, 1),
                      empty(dims, 2, TFC_DTYPE_F32), approx};
        report(approx ? "gelu tanh fwd+bwd (2048,1536)" : "gelu erf fwd+bwd (2048,1536)", time_it(gelu_fwd_bwd, &g),
               5.0 * (double)n * 4, "GB/s");
        tfc_tensor_release(g.x), tfc_tensor_release(g.y), tfc_tensor_release(g.dy), tfc_tensor_release(g.dx);
    }
    bench_ce(2048, 65);
    bench_ce(1024, 50257);
    return 0;
}
