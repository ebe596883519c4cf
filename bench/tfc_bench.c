/*
 * Our side of the benchmark suite (bench/bench.py runs it and pairs every
 * line with PyTorch). Each case prints one JSON line:
 *   {"bench": name, "case": shape text, "ms": median, "ms_min": best, ...}
 *
 *   tfc_bench gemm    tfc_matmul (and its backward shapes) vs a bare
 *                     cblas_sgemm on the same buffers, interleaved rep by rep
 *   tfc_bench gemm_bf16  tfc_matmul in f32 and in bf16 (f32 accumulation) on
 *                     the same shapes, interleaved block by block
 *   tfc_bench micro   fused kernels through their public explicit doors
 *   tfc_bench qlinear f32 tfc_linear vs int8 and int4 tfc_qlinear on GPT-2
 *                     layer shapes, M = 1, 4, 16 rows, interleaved block by block
 *
 * Timing: warm-up, then reps until a time budget (at least min_reps),
 * median reported. The machine may be shared: medians, never means.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfcore/tfcore.h"
#include "bench_util.h"

#define MAX_REPS 200

typedef struct {
    double t[MAX_REPS];
    int n;
} samples;

static double median(samples *s) {
    qsort(s->t, (size_t)s->n, sizeof(double), cmp_double);
    return s->n ? 1e3 * s->t[s->n / 2] : 0;
}
static double best(samples *s) {
    qsort(s->t, (size_t)s->n, sizeof(double), cmp_double);
    return s->n ? 1e3 * s->t[0] : 0;
}

static double g_budget = 1.0; /* seconds per case */

static tfc_tensor *randn(const int64_t *dims, int32_t nd, uint64_t seed) {
    tfc_tensor *t;
    OK(tfc_tensor_randn(dims, nd, TFC_DTYPE_F32, seed, 0, &t));
    return t;
}
static tfc_tensor *empty(const int64_t *dims, int32_t nd) {
    tfc_tensor *t;
    OK(tfc_tensor_empty(dims, nd, TFC_DTYPE_F32, &t));
    return t;
}
static float *fp(const tfc_tensor *t) { return (float *)tfc_tensor_data(t); }

/* ---- GEMM ----------------------------------------------------------------- */

typedef struct {
    const char *what;
    int m, n, k, ta, tb;
} gemm_case;

/* out = op(A) op(B) with A stored [k,m] when ta, B stored [n,k] when tb. */
static int g_blas_owned; /* libtfcore runs OpenBLAS single-threaded */
#define GEMM_BLOCK 4
#define GEMM_QUIET_S 0.15

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void bench_gemm(const gemm_case *c) {
    int64_t ad[2] = {c->ta ? c->k : c->m, c->ta ? c->m : c->k};
    int64_t bd[2] = {c->tb ? c->n : c->k, c->tb ? c->k : c->n};
    int64_t cd[2] = {c->m, c->n};
    tfc_tensor *a = randn(ad, 2, 1), *b = randn(bd, 2, 2), *cc = empty(cd, 2);
    tfc_tensor *av = a, *bv = b;
    if (c->ta) OK(tfc_transpose(NULL, a, 0, 1, &av));
    if (c->tb) OK(tfc_transpose(NULL, b, 0, 1, &bv));
    samples ours = {.n = 0}, bare = {.n = 0};
    /*
     * Blocks of GEMM_BLOCK reps per side, the sides alternating and taking
     * turns to go first, so both sample the same machine and neither always
     * runs right after an idle pause. The bare call gets OpenBLAS's own
     * threading over all our threads (libtfcore set OpenBLAS to one thread
     * at load and splits GEMMs itself, lib/cpu/blas_threads.c). OpenBLAS's
     * workers, and OpenMP's, spin for a while after their work and would
     * steal a core from the other side, so each block starts after a pause
     * of GEMM_QUIET_S, then one untimed warm-up rep.
     */
    double t_end = now() + g_budget;
    for (int blk = 0; ours.n + GEMM_BLOCK <= MAX_REPS && (blk < 4 || now() < t_end); blk++) {
        for (int turn = 0; turn < 2; turn++) {
            int bare_side = (turn + blk) % 2;
            sleep_s(GEMM_QUIET_S);
            if (bare_side) openblas_set_num_threads(tfc_get_num_threads());
            for (int r = -1; r < GEMM_BLOCK; r++) {
                double t0 = now();
                if (bare_side) {
                    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans,
                                c->m, c->n, c->k, 1.0f, fp(a), (int)ad[1], fp(b), (int)bd[1], 0.0f, fp(cc), c->n);
                } else {
                    tfc_tensor *o;
                    OK(tfc_matmul(NULL, av, bv, &o));
                    tfc_tensor_release(o);
                }
                double t1 = now();
                samples *sm = bare_side ? &bare : &ours;
                if (r >= 0) sm->t[sm->n++] = t1 - t0;
            }
            if (bare_side && g_blas_owned) openblas_set_num_threads(1);
        }
    }
    double flop = 2.0 * c->m * c->n * c->k;
    double mo = median(&ours), mb = median(&bare);
    printf("{\"bench\":\"gemm\",\"case\":\"%s [%d,%d]%sx[%d,%d]%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"ta\":%d,\"tb\":%d,"
           "\"ms\":%.4f,\"ms_min\":%.4f,\"bare_ms\":%.4f,\"bare_ms_min\":%.4f,\"gflops\":%.2f,\"bare_gflops\":%.2f,"
           "\"reps\":%d}\n",
           c->what, (int)ad[0], (int)ad[1], c->ta ? "T" : "", (int)bd[0], (int)bd[1], c->tb ? "T" : "", c->m, c->n,
           c->k, c->ta, c->tb, mo, best(&ours), mb, best(&bare), flop / mo / 1e6, flop / mb / 1e6, ours.n);
    fflush(stdout);
    if (av != a) tfc_tensor_release(av);
    if (bv != b) tfc_tensor_release(bv);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(cc);
}

static void run_gemm(void) {
    /* The model's GEMMs at B·T = 2048 rows (char-small: C=384) and the LM head. */
    static const gemm_case cases[] = {
        {"qkv fwd C=128", 2048, 384, 128, 0, 0}, {"qkv fwd C=384", 2048, 1152, 384, 0, 0},
        {"mlp up fwd", 2048, 1536, 384, 0, 0},   {"mlp down fwd", 2048, 384, 1536, 0, 0},
        {"mlp up dX", 2048, 384, 1536, 0, 1},    {"mlp up dW", 384, 1536, 2048, 1, 0},
        {"mlp down dW", 1536, 384, 2048, 1, 0},  {"lm head fwd", 4096, 50257, 128, 0, 1},
        {"lm head dX", 4096, 128, 50257, 0, 0},  {"lm head dW", 50257, 128, 4096, 1, 0},
        {"square", 512, 512, 512, 0, 0},         {"square", 1024, 1024, 1024, 0, 0},
        {"square", 2048, 2048, 2048, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) bench_gemm(&cases[i]);
}

/* ---- fused kernels ---------------------------------------------------------- */

typedef void (*step_fn)(void *ctx);

static void timeit(const char *bench, const char *cas, step_fn fn, void *ctx, double gbytes, double gflop) {
    samples s = {.n = 0};
    double t_end = now() + g_budget;
    for (int r = -1; r < MAX_REPS && (r < 3 || now() < t_end); r++) {
        double t0 = now();
        fn(ctx);
        if (r >= 0) s.t[s.n++] = now() - t0;
    }
    double ms = median(&s);
    printf("{\"bench\":\"%s\",\"case\":\"%s\",\"ms\":%.4f,\"ms_min\":%.4f,\"gbs\":%.2f,\"gflops\":%.2f,\"reps\":%d}\n",
           bench, cas, ms, best(&s), gbytes / ms * 1e3, gflop / ms * 1e3, s.n);
    fflush(stdout);
}

typedef struct {
    tfc_tensor *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
    double scale;
} attn_ctx;
static void attn_fwd(void *p) {
    attn_ctx *c = p;
    OK(tfc_attention_forward(c->q, c->k, c->v, 1, c->scale, c->out, c->lse));
}
static void attn_fwd_bwd(void *p) {
    attn_ctx *c = p;
    attn_fwd(p);
    OK(tfc_attention_backward(c->dout, c->q, c->k, c->v, c->out, c->lse, 1, c->scale, c->dq, c->dk, c->dv, 0));
}

typedef struct {
    tfc_tensor *x, *w, *b, *y, *mean, *rstd, *dy, *dx, *dw, *db;
} ln_ctx;
static void ln_fwd_bwd(void *p) {
    ln_ctx *c = p;
    OK(tfc_layernorm_forward(c->x, c->w, c->b, 1e-5, c->y, c->mean, c->rstd));
    OK(tfc_layernorm_backward(c->dy, c->x, c->w, c->mean, c->rstd, c->dx, c->dw, c->db, 0));
}

typedef struct {
    tfc_tensor *x, *y, *dy, *dx;
} gelu_ctx;
static void gelu_fwd_bwd(void *p) {
    gelu_ctx *c = p;
    OK(tfc_gelu_forward(c->x, 1, c->y));
    OK(tfc_gelu_backward(c->dy, c->x, 1, c->dx, 0));
}

typedef struct {
    tfc_tensor *logits, *targets, *loss, *lse, *dloss, *dlogits;
} ce_ctx;
static void ce_fwd_bwd(void *p) {
    ce_ctx *c = p;
    OK(tfc_cross_entropy_forward(c->logits, c->targets, -100, c->loss, c->lse));
    OK(tfc_cross_entropy_backward(c->dloss, c->logits, c->targets, c->lse, -100, c->dlogits, 0));
}

static void run_micro(void) {
    {
        int64_t B = 8, H = 6, T = 256, D = 64, d4[4] = {B, H, T, D}, d3[3] = {B, H, T};
        attn_ctx c = {randn(d4, 4, 1), randn(d4, 4, 2), randn(d4, 4, 3), empty(d4, 4), empty(d3, 3),
                      randn(d4, 4, 4), empty(d4, 4),    empty(d4, 4),    empty(d4, 4), 1.0 / sqrt((double)D)};
        /* Useful (causal: half the score matrix) flops: fwd QKᵀ and PV, bwd four products. */
        double f = 2.0 * B * H * T * T * D;
        timeit("attention_fwd", "B=8 H=6 T=256 d=64 causal", attn_fwd, &c, 0, f / 1e9);
        timeit("attention_fwd_bwd", "B=8 H=6 T=256 d=64 causal", attn_fwd_bwd, &c, 0, 3 * f / 1e9);
        tfc_tensor *all[] = {c.q, c.k, c.v, c.out, c.lse, c.dout, c.dq, c.dk, c.dv};
        for (size_t i = 0; i < 9; i++) tfc_tensor_release(all[i]);
    }
    {
        int64_t d2[2] = {2048, 384}, d1[1] = {384}, dn[1] = {2048};
        ln_ctx c = {randn(d2, 2, 1), randn(d1, 1, 2), randn(d1, 1, 3), empty(d2, 2), empty(dn, 1),
                    empty(dn, 1),    randn(d2, 2, 4), empty(d2, 2),    empty(d1, 1), empty(d1, 1)};
        /* x read twice (fwd, bwd), y and dx written, dy read. */
        timeit("layernorm_fwd_bwd", "(2048, 384)", ln_fwd_bwd, &c, 5.0 * 2048 * 384 * 4 / 1e9, 0);
        tfc_tensor *all[] = {c.x, c.w, c.b, c.y, c.mean, c.rstd, c.dy, c.dx, c.dw, c.db};
        for (size_t i = 0; i < 10; i++) tfc_tensor_release(all[i]);
    }
    {
        int64_t d2[2] = {2048, 1536};
        gelu_ctx c = {randn(d2, 2, 1), empty(d2, 2), randn(d2, 2, 2), empty(d2, 2)};
        timeit("gelu_fwd_bwd", "(2048, 1536) tanh", gelu_fwd_bwd, &c, 5.0 * 2048 * 1536 * 4 / 1e9, 0);
        tfc_tensor *all[] = {c.x, c.y, c.dy, c.dx};
        for (size_t i = 0; i < 4; i++) tfc_tensor_release(all[i]);
    }
    static const int64_t ce_shapes[2][2] = {{2048, 65}, {1024, 50257}};
    for (int i = 0; i < 2; i++) {
        int64_t n = ce_shapes[i][0], v = ce_shapes[i][1], d2[2] = {n, v}, dn[1] = {n};
        int64_t *ids = malloc(sizeof(int64_t) * (size_t)n);
        for (int64_t j = 0; j < n; j++) ids[j] = (j * 7919) % v;
        ce_ctx c = {randn(d2, 2, 1), NULL, empty(NULL, 0), empty(dn, 1), NULL, empty(d2, 2)};
        OK(tfc_tensor_from_data(ids, dn, 1, TFC_DTYPE_I64, &c.targets));
        OK(tfc_tensor_full(NULL, 0, TFC_DTYPE_F32, 1.0, &c.dloss));
        free(ids);
        char cas[64];
        snprintf(cas, sizeof cas, "(%lld, %lld)", (long long)n, (long long)v);
        /* logits read by fwd and bwd, dlogits written. */
        timeit("cross_entropy_fwd_bwd", cas, ce_fwd_bwd, &c, 3.0 * (double)(n * v) * 4 / 1e9, 0);
        tfc_tensor *all[] = {c.logits, c.targets, c.loss, c.lse, c.dloss, c.dlogits};
        for (size_t j = 0; j < 6; j++) tfc_tensor_release(all[j]);
    }
}

/*
 * bf16 vs f32 tfc_matmul on the same shapes, reps of the two alternating in
 * blocks so both sample the same machine. Which bf16 path runs is the
 * library's choice (TFC_BF16_GEMM=portable forces the portable one).
 */
static void run_gemm_bf16(void) {
    static const gemm_case cases[] = {
        {"qkv fwd C=384", 1024, 1152, 384, 0, 0}, {"mlp up fwd", 1024, 1536, 384, 0, 0},
        {"mlp down fwd", 1024, 384, 1536, 0, 0},  {"mlp up dX", 1024, 384, 1536, 0, 1},
        {"mlp up dW", 384, 1536, 1024, 1, 0},     {"qkv fwd C=256", 8192, 768, 256, 0, 0},
        {"square", 1024, 1024, 1024, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const gemm_case *c = &cases[i];
        int64_t ad[2] = {c->ta ? c->k : c->m, c->ta ? c->m : c->k};
        int64_t bd[2] = {c->tb ? c->n : c->k, c->tb ? c->k : c->n};
        tfc_tensor *x[2][2] = {{randn(ad, 2, 1), randn(bd, 2, 2)}, {NULL, NULL}}, *v[2][2];
        for (int j = 0; j < 2; j++) OK(tfc_cast(NULL, x[0][j], TFC_DTYPE_BF16, &x[1][j]));
        for (int d = 0; d < 2; d++) {
            v[d][0] = x[d][0], v[d][1] = x[d][1];
            if (c->ta) OK(tfc_transpose(NULL, x[d][0], 0, 1, &v[d][0]));
            if (c->tb) OK(tfc_transpose(NULL, x[d][1], 0, 1, &v[d][1]));
        }
        samples sm[2] = {{.n = 0}, {.n = 0}};
        double t_end = now() + g_budget;
        for (int blk = 0; sm[0].n + GEMM_BLOCK <= MAX_REPS && (blk < 3 || now() < t_end); blk++)
            for (int d = 0; d < 2; d++)
                for (int r = -1; r < GEMM_BLOCK; r++) {
                    tfc_tensor *o;
                    double t0 = now();
                    OK(tfc_matmul(NULL, v[d][0], v[d][1], &o));
                    double t1 = now();
                    tfc_tensor_release(o);
                    if (r >= 0) sm[d].t[sm[d].n++] = t1 - t0;
                }
        double flop = 2.0 * c->m * c->n * c->k;
        for (int d = 0; d < 2; d++) {
            double ms = median(&sm[d]);
            printf("{\"bench\":\"gemm_bf16\",\"case\":\"%s [%d,%d]%sx[%d,%d]%s\",\"dtype\":\"%s\",\"threads\":%d,"
                   "\"ms\":%.4f,\"ms_min\":%.4f,\"gflops\":%.2f,\"reps\":%d}\n",
                   c->what, (int)ad[0], (int)ad[1], c->ta ? "T" : "", (int)bd[0], (int)bd[1], c->tb ? "T" : "",
                   d ? "bf16" : "f32", tfc_get_num_threads(), ms, best(&sm[d]), flop / ms / 1e6, sm[d].n);
        }
        fflush(stdout);
        for (int d = 0; d < 2; d++)
            for (int j = 0; j < 2; j++) {
                if (v[d][j] != x[d][j]) tfc_tensor_release(v[d][j]);
                tfc_tensor_release(x[d][j]);
            }
    }
}

/*
 * The quantized linear against the f32 one on GPT-2 (124M) layer shapes:
 * qkv (768 -> 2304), mlp up (768 -> 3072), mlp down (3072 -> 768), with M
 * rows of activations (1: one decoded token; 16 and 64: batched decoding). GB/s is the weight's bytes
 * (f32: 4·K·N; quantized: codes + scales) over the median time: at M = 1
 * the layer is one pass over its weight, so this is the memory roofline's
 * measure. The three kinds alternate in blocks so they sample the same load.
 */
static void run_qlinear(void) {
    static const int64_t shapes[][2] = {{768, 2304}, {768, 3072}, {3072, 768}};
    static const int64_t Ms[] = {1, 4, 16, 64};
    const char *isa = getenv("TFC_QUANT_KERNEL");
    for (size_t si = 0; si < 3; si++) {
        const int64_t K = shapes[si][0], N = shapes[si][1];
        tfc_tensor *w = randn((int64_t[]){K, N}, 2, 1), *b = randn((int64_t[]){N}, 1, 2);
        tfc_qweight *q[2] = {NULL, NULL};
        OK(tfc_quantize(w, TFC_QFORMAT_INT8, 0, TFC_QUANT_IN_OUT, &q[0]));
        OK(tfc_quantize(w, TFC_QFORMAT_INT4, 32, TFC_QUANT_IN_OUT, &q[1]));
        const double bytes[3] = {4.0 * (double)(K * N), (double)tfc_qweight_nbytes(q[0]),
                                 (double)tfc_qweight_nbytes(q[1])};
        static const char *kinds[3] = {"f32", "int8", "int4"};
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            const int64_t M = Ms[mi];
            tfc_tensor *x = randn((int64_t[]){M, K}, 2, 3);
            samples sm[3] = {{.n = 0}, {.n = 0}, {.n = 0}};
            double t_end = now() + g_budget;
            for (int blk = 0; sm[0].n + GEMM_BLOCK <= MAX_REPS && (blk < 3 || now() < t_end); blk++)
                for (int d = 0; d < 3; d++)
                    for (int r = -1; r < GEMM_BLOCK; r++) {
                        tfc_tensor *o;
                        double t0 = now();
                        if (d == 0)
                            OK(tfc_linear(NULL, x, w, b, &o));
                        else
                            OK(tfc_qlinear(NULL, x, q[d - 1], b, &o));
                        double t1 = now();
                        tfc_tensor_release(o);
                        if (r >= 0) sm[d].t[sm[d].n++] = t1 - t0;
                    }
            for (int d = 0; d < 3; d++) {
                double ms = median(&sm[d]);
                printf("{\"bench\":\"qlinear\",\"case\":\"K=%lld N=%lld M=%lld\",\"kind\":\"%s\",\"threads\":%d,"
                       "\"isa\":\"%s\",\"ms\":%.4f,\"ms_min\":%.4f,\"gbs\":%.2f,\"weight_mb\":%.2f,\"reps\":%d}\n",
                       (long long)K, (long long)N, (long long)M, kinds[d], tfc_get_num_threads(), isa ? isa : "auto",
                       ms, best(&sm[d]), bytes[d] / ms / 1e6, bytes[d] / 1e6, sm[d].n);
            }
            fflush(stdout);
            tfc_tensor_release(x);
        }
        tfc_qweight_release(q[0]);
        tfc_qweight_release(q[1]);
        tfc_tensor_release(w);
        tfc_tensor_release(b);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tfc_bench gemm|gemm_bf16|micro|qlinear [seconds per case]\n");
        return 2;
    }
    if (argc > 2) g_budget = atof(argv[2]);
    if (!strcmp(argv[1], "gemm")) {
        const char *keep = getenv("TFC_BLAS_THREADS");
        g_blas_owned = !(keep && !strcmp(keep, "keep"));
        printf("{\"bench\":\"gemm_info\",\"coretype\":\"%s\",\"threads\":%d}\n", openblas_get_corename(),
               tfc_get_num_threads());
        run_gemm();
    } else if (!strcmp(argv[1], "gemm_bf16")) {
        run_gemm_bf16();
    } else if (!strcmp(argv[1], "micro")) {
        run_micro();
    } else if (!strcmp(argv[1], "qlinear")) {
        run_qlinear();
    } else {
        fprintf(stderr, "tfc_bench: unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
