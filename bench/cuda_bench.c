/*
 * GPU benchmarks for the CUDA module, printed as ratios:
 *  - GEMMs through the backend table's gemm entry (what tfc_matmul and
 *    tfc_linear call) vs a bare cuBLASLt call of the same problem, on every
 *    GEMM of a GPT-2 124M training step (B*T = 16384, C = 768: qkv, attn
 *    proj, fc, mlp proj with their bias epilogue forward, dx and dW
 *    backward; the LM head with vocab 50257 unpadded, forward, dh, dW),
 *    bf16 (f32 accumulation), plus f32 and TF32 rows; each timed with CUDA
 *    events on its own stream (ours: the module's, from native_stream);
 *    ratio = bare time / our time per shape, and over all bf16 shapes;
 *    target >= 0.95;
 *  - attention forward + backward, B=8, H=12, T=1024, d=64, causal, bf16,
 *    in TFLOP/s by the causal FLOP formula (forward 4 B H T^2 d / 2,
 *    backward 2.5x the forward), and as a fraction of the dense bf16 peak
 *    (TFC_PEAK_TFLOPS, default 989 for H100/H200 SXM), for both kernel
 *    paths (TFC_CUDA_ATTENTION=simple and =flash), timed by CUDA events.
 * Usage: cuda_bench <path to libtfcore-cuda.so>. Ours runs through the
 * module's backend table (lib/backend/backend.h), as libtfcore calls it.
 * The attention times are wall-clock over repeated calls between stream
 * syncs.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"

static const tfc_backend *A;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define DIE(...)                      \
    do {                              \
        fprintf(stderr, __VA_ARGS__); \
        fprintf(stderr, "\n");        \
        exit(1);                      \
    } while (0)
#define CU(x)                                                             \
    do {                                                                  \
        cudaError_t e_ = (x);                                             \
        if (e_ != cudaSuccess) DIE("%s: %s", #x, cudaGetErrorString(e_)); \
    } while (0)
#define LT(x)                                                                            \
    do {                                                                                 \
        cublasStatus_t s_ = (x);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) DIE("%s: %s", #x, cublasLtGetStatusString(s_)); \
    } while (0)
#define TF(x)                                                 \
    do {                                                      \
        tfc_status s_ = (x);                                  \
        if (s_ != TFC_OK) DIE("%s: %s", #x, A->last_error()); \
    } while (0)

/* Module buffer of n bf16 values uniform in [-1, 1) (the bare path draws the same range). */
static void *module_rand(size_t n, uint64_t seed) {
    void *p;
    TF(A->alloc(0, n * 2, &p));
    tfc_random_problem r = {.device = 0, .kind = TFC_RANDOM_UNIFORM, .a = -1.0, .b = 2.0, .seed = seed};
    r.dst = (tfc_sview){.data = p, .dtype = TFC_DTYPE_BF16, .ndim = 1, .shape = {(int64_t)n}, .strides = {1}};
    TF(A->random(&r));
    return p;
}

/* Seconds per call of ours(): warm up, then repeat until ~0.5 s has passed. */
static double time_module(void (*fn)(void *), void *arg) {
    for (int i = 0; i < 3; i++) fn(arg);
    TF(A->synchronize(0));
    int iters = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 5; i++) fn(arg);
        iters += 5;
        TF(A->synchronize(0));
        t = now() - t0;
    } while (t < 0.5 && iters < 2000);
    return t / iters;
}

/* ---- GEMMs: ours through the table vs bare cuBLASLt, timed with CUDA events ---- */

/*
 * One row-major GEMM C [M, N] = op(A) op(B) (+ bias [N]): op(A) is A [M, K]
 * or (ta) A [K, M]; op(B) is B [K, N] or (tb) B [N, K].
 * prec: 0 bf16 (f32 accumulation), 1 f32, 2 f32 with TF32.
 */
typedef struct gemm_case {
    const char *name;
    int64_t M, N, K;
    int ta, tb, bias, prec;
} gemm_case;

static size_t es_of(int prec) { return prec == 0 ? 2 : 4; }

/* Seconds per call of fn(arg) from CUDA events on stream st: warm-up, a 3-call estimate, then ~0.2 s of calls. */
static double time_events(cudaStream_t st, void (*fn)(void *), void *arg) {
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int i = 0; i < 2; i++) fn(arg); /* first call: plan, heuristic */
    CU(cudaStreamSynchronize(st));
    float ms = 0;
    CU(cudaEventRecord(e0, st));
    for (int i = 0; i < 3; i++) fn(arg);
    CU(cudaEventRecord(e1, st));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    int iters = (int)(200.0 / (ms / 3.0 + 1e-3));
    if (iters < 5) iters = 5;
    if (iters > 500) iters = 500;
    CU(cudaEventRecord(e0, st));
    for (int i = 0; i < iters; i++) fn(arg);
    CU(cudaEventRecord(e1, st));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return ms * 1e-3 / iters;
}

static tfc_gemm_problem g_gemm;
static void run_ours(void *arg) {
    (void)arg;
    TF(A->gemm(&g_gemm));
}

/* n values of roughly unit size, in the case's storage type, uploaded in one copy. */
static void fill_host_random(void *dev_ptr, size_t n, int prec) {
    size_t es = es_of(prec);
    unsigned char *h = malloc(n * es);
    if (!h) DIE("out of host memory");
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float f = (float)(s >> 8) / 16777216.0f * 2.0f - 1.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (es == 2) {
            uint16_t b = (uint16_t)(u >> 16);
            memcpy(h + i * 2, &b, 2);
        } else {
            memcpy(h + i * 4, &u, 4);
        }
    }
    CU(cudaMemcpy(dev_ptr, h, n * es, cudaMemcpyHostToDevice));
    free(h);
}

/* Module buffer of n values uniform in [-1, 1) of the case's storage type. */
static void *module_rand_dt(size_t n, int prec, uint64_t seed) {
    void *p;
    tfc_dtype dt = prec == 0 ? TFC_DTYPE_BF16 : TFC_DTYPE_F32;
    TF(A->alloc(0, n * es_of(prec), &p));
    tfc_random_problem r = {.device = 0, .kind = TFC_RANDOM_UNIFORM, .a = -1.0, .b = 2.0, .seed = seed};
    r.dst = (tfc_sview){.data = p, .dtype = dt, .ndim = 1, .shape = {(int64_t)n}, .strides = {1}};
    TF(A->random(&r));
    return p;
}

typedef struct bare_gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    void *a, *b, *c, *ws;
    size_t ws_size;
    cudaStream_t st;
} bare_gemm;

static void run_bare(void *arg) {
    bare_gemm *g = arg;
    float alpha = 1.0f, beta = 0.0f;
    LT(cublasLtMatmul(g->lt, g->op, &alpha, g->b, g->la, g->a, g->lb, &beta, g->c, g->lc, g->c, g->lc, &g->algo, g->ws,
                      g->ws_size, g->st));
}

/*
 * The same GEMM as one bare cuBLASLt call, its own stream and buffers
 * (this program's CUDA runtime; the module links its own statically):
 * row-major C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T, the
 * heuristic's first algorithm, descriptors made once outside the timing.
 */
static double time_bare(const gemm_case *g, void *ws, size_t ws_size, cublasLtHandle_t lt, cudaStream_t st) {
    const size_t es = es_of(g->prec);
    const cudaDataType_t t = g->prec == 0 ? CUDA_R_16BF : CUDA_R_32F;
    bare_gemm b = {.lt = lt, .ws = ws, .ws_size = ws_size, .st = st};
    void *bias = NULL;
    CU(cudaMalloc(&b.a, (size_t)g->M * g->K * es));
    CU(cudaMalloc(&b.b, (size_t)g->K * g->N * es));
    CU(cudaMalloc(&b.c, (size_t)g->M * g->N * es));
    fill_host_random(b.a, (size_t)g->M * g->K, g->prec);
    fill_host_random(b.b, (size_t)g->K * g->N, g->prec);
    LT(cublasLtMatmulDescCreate(&b.op, g->prec == 2 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (g->bias) {
        CU(cudaMalloc(&bias, (size_t)g->N * es));
        fill_host_random(bias, (size_t)g->N, g->prec);
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t));
    }
    /* Lt-A = our B (op(B)^T is [N, K] column-major), Lt-B = our A. */
    if (g->tb)
        LT(cublasLtMatrixLayoutCreate(&b.la, t, (uint64_t)g->K, (uint64_t)g->N, g->K));
    else
        LT(cublasLtMatrixLayoutCreate(&b.la, t, (uint64_t)g->N, (uint64_t)g->K, g->N));
    if (g->ta)
        LT(cublasLtMatrixLayoutCreate(&b.lb, t, (uint64_t)g->M, (uint64_t)g->K, g->M));
    else
        LT(cublasLtMatrixLayoutCreate(&b.lb, t, (uint64_t)g->K, (uint64_t)g->M, g->K));
    LT(cublasLtMatrixLayoutCreate(&b.lc, t, (uint64_t)g->N, (uint64_t)g->M, g->N));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_size;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, b.op, b.la, b.lb, b.lc, b.lc, pref, 1, &res, &found));
    if (!found) DIE("bare cuBLASLt: no algorithm for %s", g->name);
    b.algo = res.algo;
    double t_call = time_events(st, run_bare, &b);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(b.la), cublasLtMatrixLayoutDestroy(b.lb), cublasLtMatrixLayoutDestroy(b.lc);
    cublasLtMatmulDescDestroy(b.op);
    CU(cudaFree(b.a));
    CU(cudaFree(b.b));
    CU(cudaFree(b.c));
    if (bias) CU(cudaFree(bias));
    return t_call;
}

/* Our gemm entry on the same problem, module buffers, timed on the module's stream. */
static double time_ours(const gemm_case *g, uint64_t seed) {
    const size_t es = es_of(g->prec);
    void *a = module_rand_dt((size_t)g->M * g->K, g->prec, seed),
         *b = module_rand_dt((size_t)g->K * g->N, g->prec, seed + 1);
    void *bias = g->bias ? module_rand_dt((size_t)g->N, g->prec, seed + 2) : NULL, *c;
    TF(A->alloc(0, (size_t)g->M * g->N * es, &c));
    tfc_gemm_problem d = {.device = 0,
                          .dtype = g->prec == 0 ? TFC_DTYPE_BF16 : TFC_DTYPE_F32,
                          .trans_a = g->ta,
                          .trans_b = g->tb,
                          .M = g->M,
                          .N = g->N,
                          .K = g->K,
                          .batch = 1,
                          .alpha = 1.0,
                          .beta = 0.0,
                          .a = a,
                          .b = b,
                          .c = c,
                          .lda = g->ta ? g->M : g->K,
                          .ldb = g->tb ? g->K : g->N,
                          .ldc = g->N,
                          .bias = bias,
                          .epilogue = g->bias ? TFC_GEMM_EPI_BIAS : TFC_GEMM_EPI_NONE,
                          .allow_tf32 = g->prec == 2};
    g_gemm = d;
    cudaStream_t st = (cudaStream_t)A->native_stream(0);
    if (!st) DIE("native_stream(0): %s", A->last_error());
    double t = time_events(st, run_ours, NULL);
    A->free(0, a, 0), A->free(0, b, 0), A->free(0, c, 0);
    if (bias) A->free(0, bias, 0);
    TF(A->synchronize(0));
    return t;
}

static void bench_gemms(void) {
    enum { BT = 16384, C = 768, V = 50257 };
    /* x [BT, in] · W [in, out] (+ b): forward; dx = dy · Wᵀ; dW = xᵀ · dy. LM head: h · wteᵀ, wte [V, C]. */
    const gemm_case cases[] = {
        {"qkv   fwd  x@W+b   16384x768 @768x2304", BT, 3 * C, C, 0, 0, 1, 0},
        {"qkv   bwd  dy@Wt   16384x2304@2304x768", BT, C, 3 * C, 0, 1, 0, 0},
        {"qkv   bwd  xt@dy   768x16384 @16384x2304", C, 3 * C, BT, 1, 0, 0, 0},
        {"proj  fwd  x@W+b   16384x768 @768x768", BT, C, C, 0, 0, 1, 0},
        {"proj  bwd  dy@Wt   16384x768 @768x768", BT, C, C, 0, 1, 0, 0},
        {"proj  bwd  xt@dy   768x16384 @16384x768", C, C, BT, 1, 0, 0, 0},
        {"fc    fwd  x@W+b   16384x768 @768x3072", BT, 4 * C, C, 0, 0, 1, 0},
        {"fc    bwd  dy@Wt   16384x3072@3072x768", BT, C, 4 * C, 0, 1, 0, 0},
        {"fc    bwd  xt@dy   768x16384 @16384x3072", C, 4 * C, BT, 1, 0, 0, 0},
        {"mproj fwd  x@W+b   16384x3072@3072x768", BT, C, 4 * C, 0, 0, 1, 0},
        {"mproj bwd  dy@Wt   16384x768 @768x3072", BT, 4 * C, C, 0, 1, 0, 0},
        {"mproj bwd  xt@dy   3072x16384@16384x768", 4 * C, C, BT, 1, 0, 0, 0},
        {"lm    fwd  h@wteT  16384x768 @768x50257", BT, V, C, 0, 1, 0, 0},
        {"lm    bwd  dz@wte  16384x50257@50257x768", BT, C, V, 0, 0, 0, 0},
        {"lm    bwd  dzt@h   50257x16384@16384x768", V, C, BT, 1, 0, 0, 0},
        /* f32: full precision, then TF32 (tfc_set_float32_matmul_precision "high") */
        {"fc    fwd  x@W+b   f32", BT, 4 * C, C, 0, 0, 1, 1},
        {"fc    fwd  x@W+b   tf32", BT, 4 * C, C, 0, 0, 1, 2},
        {"lm    fwd  h@wteT  f32", BT, V, C, 0, 1, 0, 1},
        {"lm    fwd  h@wteT  tf32", BT, V, C, 0, 1, 0, 2},
    };
    cublasLtHandle_t lt;
    cudaStream_t st;
    void *ws;
    size_t ws_size = (size_t)32 << 20; /* the module's workspace size */
    LT(cublasLtCreate(&lt));
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CU(cudaMalloc(&ws, ws_size));
    printf("\n%-42s %9s %9s %7s\n", "GEMM, GPT-2 124M step (B*T 16384)", "ours TF/s", "bare TF/s", "ratio");
    double sum_ours = 0, sum_bare = 0, worst = 1e30;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gemm_case *g = &cases[i];
        double ours = time_ours(g, 10 * i + 1);
        double bare = time_bare(g, ws, ws_size, lt, st);
        double flop = 2.0 * (double)g->M * (double)g->N * (double)g->K;
        printf("%-42s %9.1f %9.1f %7.3f%s\n", g->name, flop / ours / 1e12, flop / bare / 1e12, bare / ours,
               g->prec ? "" : (bare / ours < 0.95 ? "  < 0.95" : ""));
        if (g->prec == 0) {
            sum_ours += ours, sum_bare += bare;
            if (bare / ours < worst) worst = bare / ours;
        }
    }
    printf("%-42s %9s %9s %7.3f  (worst shape %.3f; target >= 0.95)\n", "bf16 step GEMMs overall (time ratio)", "", "",
           sum_bare / sum_ours, worst);
    CU(cudaFree(ws));
    CU(cudaStreamDestroy(st));
    cublasLtDestroy(lt);
}

typedef struct attn_bufs {
    void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse;
    size_t B, H, T, D;
} attn_bufs;

/* The attention problem of a's contiguous [B, H, T, D] buffers. */
static tfc_attn_problem attn_problem(const attn_bufs *a) {
    int64_t sr = (int64_t)a->D, sh = (int64_t)(a->T * a->D), sb = (int64_t)(a->H * a->T * a->D);
    tfc_attn_problem p = {.device = 0,
                          .dtype = TFC_DTYPE_BF16,
                          .B = (int64_t)a->B,
                          .H = (int64_t)a->H,
                          .Tq = (int64_t)a->T,
                          .S = (int64_t)a->T,
                          .D = (int64_t)a->D,
                          .Dv = (int64_t)a->D,
                          .causal = 1,
                          .scale = 0.125};
    p.q = (tfc_attn_operand){a->q, sb, sh, sr};
    p.k = (tfc_attn_operand){a->k, sb, sh, sr};
    p.v = (tfc_attn_operand){a->v, sb, sh, sr};
    p.out = (tfc_attn_operand){a->o, sb, sh, sr};
    p.dout = (tfc_attn_operand){a->dout, sb, sh, sr};
    p.out_w = a->o, p.lse_w = a->lse, p.lse = a->lse;
    p.dq = a->dq, p.dk = a->dk, p.dv = a->dv;
    return p;
}

static void run_attn_fwd(void *arg) {
    tfc_attn_problem p = attn_problem(arg);
    TF(A->attention_forward(&p));
}
static void run_attn_fwd_bwd(void *arg) {
    run_attn_fwd(arg);
    tfc_attn_problem p = attn_problem(arg);
    TF(A->attention_backward(&p));
}

/*
 * Seconds per call of fn(arg) by CUDA events: the module runs on its own
 * non-blocking stream, which the bench cannot reach, so the events go on
 * the legacy stream around a batch of calls that ends in the module's
 * synchronize; the stop event is recorded once the batch has finished, and
 * the few microseconds that adds are spread over the batch.
 */
static double time_attn_events(void (*fn)(void *), void *arg) {
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) fn(arg);
    TF(A->synchronize(0));
    int iters = 0;
    float ms = 0.0f;
    do {
        CU(cudaEventRecord(e0, 0));
        for (int i = 0; i < 10; i++) fn(arg);
        TF(A->synchronize(0));
        CU(cudaEventRecord(e1, 0));
        CU(cudaEventSynchronize(e1));
        float b;
        CU(cudaEventElapsedTime(&b, e0, e1));
        ms += b, iters += 10;
    } while (ms < 500.0f && iters < 2000);
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return ms * 1e-3 / iters;
}

int main(int argc, char **argv) {
    if (argc < 2) DIE("usage: %s <path to libtfcore-cuda.so>", argv[0]);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) DIE("cannot load %s: %s", argv[1], dlerror());
    tfc_backend_module_get_fn get = (tfc_backend_module_get_fn)dlsym(h, "tfc_backend_module_get");
    A = get ? get(TFC_BACKEND_ABI) : NULL;
    if (!A) DIE("%s does not offer backend ABI version %d", argv[1], TFC_BACKEND_ABI);
    if (A->device_count() <= 0) {
        printf("no CUDA device: %s\n", A->last_error());
        return 77;
    }
    const char *peak_env = getenv("TFC_PEAK_TFLOPS");
    double peak = peak_env ? atof(peak_env) : 989.0;
    printf("device: %s; dense bf16 peak taken as %.0f TFLOP/s\n", A->describe(), peak);

    bench_gemms();

    attn_bufs ab = {0};
    ab.B = 8, ab.H = 12, ab.T = 1024, ab.D = 64;
    size_t n = ab.B * ab.H * ab.T * ab.D;
    ab.q = module_rand(n, 7), ab.k = module_rand(n, 8), ab.v = module_rand(n, 9), ab.dout = module_rand(n, 10);
    TF(A->alloc(0, n * 2, &ab.o));
    TF(A->alloc(0, n * 2, &ab.dq));
    TF(A->alloc(0, n * 2, &ab.dk));
    TF(A->alloc(0, n * 2, &ab.dv));
    TF(A->alloc(0, ab.B * ab.H * ab.T * 4, (void **)&ab.lse));
    double fwd_flop = 4.0 * ab.B * ab.H * (double)ab.T * ab.T * ab.D / 2.0;
    /* Both kernel paths (cuda/module.cu reads TFC_CUDA_ATTENTION on every call). */
    const char *paths[2] = {"simple", "flash"};
    printf("\nattention B=8 H=12 T=1024 d=64 causal bf16 (causal FLOP count; CUDA events)\n");
    for (int pi = 0; pi < 2; pi++) {
        setenv("TFC_CUDA_ATTENTION", paths[pi], 1);
        double tf = time_attn_events(run_attn_fwd, &ab), tfb = time_attn_events(run_attn_fwd_bwd, &ab);
        printf("  %-6s forward:          %8.3f ms %8.1f TFLOP/s (%.1f%% of peak)\n", paths[pi], tf * 1e3,
               fwd_flop / tf / 1e12, 100.0 * fwd_flop / tf / 1e12 / peak);
        printf("  %-6s forward+backward: %8.3f ms %8.1f TFLOP/s (%.1f%% of peak; target >= 50%%)\n", paths[pi],
               tfb * 1e3, 3.5 * fwd_flop / tfb / 1e12, 100.0 * 3.5 * fwd_flop / tfb / 1e12 / peak);
    }
    /* The flash forward's block height for D 64 (cuda/attention_flash.cu's tuning knob): 128 rows (default) vs 64. */
    setenv("TFC_CUDA_FLASH_FWD_ROWS", "64", 1);
    double tf64 = time_attn_events(run_attn_fwd, &ab);
    unsetenv("TFC_CUDA_FLASH_FWD_ROWS");
    printf("  flash  forward, 64-row blocks:   %8.3f ms %8.1f TFLOP/s (%.1f%% of peak)\n", tf64 * 1e3,
           fwd_flop / tf64 / 1e12, 100.0 * fwd_flop / tf64 / 1e12 / peak);
    unsetenv("TFC_CUDA_ATTENTION");
    void *bufs[] = {ab.q, ab.k, ab.v, ab.dout, ab.o, ab.dq, ab.dk, ab.dv, ab.lse};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) A->free(0, bufs[i], 0);
    TF(A->synchronize(0));
    return 0;
}
