/*
 * GPU benchmarks for the CUDA module, printed as ratios:
 *  - bf16 GEMM through the module's matmul vs a bare cuBLASLt call of the
 *    same shape (8192^3 and GPT-2 124M training shapes, B*T = 16384);
 *  - attention forward + backward, B=8, H=12, T=1024, d=64, causal, bf16,
 *    in TFLOP/s by the causal FLOP formula (forward 4 B H T^2 d / 2,
 *    backward 2.5x the forward), and as a fraction of the dense bf16 peak
 *    (TFC_PEAK_TFLOPS, default 989 for H100/H200 SXM), for both kernel
 *    paths (TFC_CUDA_ATTENTION=simple and =flash), timed by CUDA events.
 * Usage: cuda_bench <path to libtfcore-cuda.so>. Ours runs through the
 * module's backend table (lib/backend/backend.h), as libtfcore calls it.
 * Times are wall-clock over repeated calls between stream syncs (both
 * paths timed the same way).
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

typedef struct gemm_case {
    const char *name;
    int64_t M, N, K;
    int trans_b;
} gemm_case;

static tfc_gemm_problem g_gemm;
static void run_ours(void *arg) {
    (void)arg;
    TF(A->gemm(&g_gemm));
}

/* n bf16 values of roughly unit size, uploaded in one copy. */
static void fill_host_random(void *dev_ptr, size_t n) {
    uint16_t *h = malloc(n * 2);
    if (!h) DIE("out of host memory");
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float f = (float)(s >> 8) / 16777216.0f * 2.0f - 1.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)(u >> 16);
    }
    CU(cudaMemcpy(dev_ptr, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
}

/* A bare cuBLASLt bf16 GEMM of the same row-major shape, its own stream and buffers. */
static double time_bare(const gemm_case *g, void *ws, size_t ws_size, cublasLtHandle_t lt, cudaStream_t st) {
    void *a, *b, *c;
    CU(cudaMalloc(&a, (size_t)g->M * g->K * 2));
    CU(cudaMalloc(&b, (size_t)g->K * g->N * 2));
    CU(cudaMalloc(&c, (size_t)g->M * g->N * 2));
    /*
     * Our own random data (the module's buffers belong to its statically
     * linked runtime; this path stays independent of it).
     */
    fill_host_random(a, (size_t)g->M * g->K);
    fill_host_random(b, (size_t)g->K * g->N);
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    /* Row-major C = A B as column-major C^T = B^T A^T. */
    if (g->trans_b)
        LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g->K, g->N, g->K));
    else
        LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g->N, g->K, g->N));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, g->K, g->M, g->K));
    LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, g->N, g->M, g->N));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_size;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &found));
    if (!found) DIE("bare cuBLASLt: no algorithm for %s", g->name);
    float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < 3; i++)
        LT(cublasLtMatmul(lt, op, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &res.algo, ws, ws_size, st));
    CU(cudaStreamSynchronize(st));
    int iters = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 5; i++)
            LT(cublasLtMatmul(lt, op, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &res.algo, ws, ws_size, st));
        iters += 5;
        CU(cudaStreamSynchronize(st));
        t = now() - t0;
    } while (t < 0.5 && iters < 2000);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    CU(cudaFree(a));
    CU(cudaFree(b));
    CU(cudaFree(c));
    return t / iters;
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

    const gemm_case cases[] = {
        {"square 8192^3", 8192, 8192, 8192, 0},
        {"gpt2 qkv   16384x768 @ 768x2304", 16384, 2304, 768, 0},
        {"gpt2 fc    16384x768 @ 768x3072", 16384, 3072, 768, 0},
        {"gpt2 proj  16384x3072 @ 3072x768", 16384, 768, 3072, 0},
        {"gpt2 lm    16384x768 @ (50304x768)^T", 16384, 50304, 768, 1},
    };
    cublasLtHandle_t lt;
    cudaStream_t st;
    void *ws;
    size_t ws_size = (size_t)32 << 20;
    LT(cublasLtCreate(&lt));
    CU(cudaStreamCreate(&st));
    CU(cudaMalloc(&ws, ws_size));
    printf("\n%-40s %10s %10s %8s\n", "GEMM (bf16, f32 accumulate)", "ours TF/s", "bare TF/s", "ratio");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gemm_case *g = &cases[i];
        void *a = module_rand((size_t)g->M * g->K, 1 + i), *b = module_rand((size_t)g->K * g->N, 100 + i), *c;
        TF(A->alloc(0, (size_t)g->M * g->N * 2, &c));
        tfc_gemm_problem d = {.device = 0,
                              .dtype = TFC_DTYPE_BF16,
                              .trans_b = g->trans_b,
                              .M = g->M,
                              .N = g->N,
                              .K = g->K,
                              .batch = 1,
                              .alpha = 1.0,
                              .beta = 0.0,
                              .a = a,
                              .b = b,
                              .c = c,
                              .lda = g->K,
                              .ldb = g->trans_b ? g->K : g->N,
                              .ldc = g->N};
        g_gemm = d;
        double ours = time_module(run_ours, NULL);
        TF(A->synchronize(0));
        double bare = time_bare(g, ws, ws_size, lt, st);
        double flop = 2.0 * (double)g->M * (double)g->N * (double)g->K;
        printf("%-40s %10.1f %10.1f %8.3f\n", g->name, flop / ours / 1e12, flop / bare / 1e12, bare / ours);
        A->free(0, a, 0), A->free(0, b, 0), A->free(0, c, 0);
        TF(A->synchronize(0));
    }
    CU(cudaFree(ws));
    CU(cudaStreamDestroy(st));
    cublasLtDestroy(lt);

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
