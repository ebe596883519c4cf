/*
 * The backend table's gemm (tfc_gemm_problem), batched row-major GEMM
 * through cuBLASLt:
 *   C_i = epilogue(alpha op(A_i) op(B_i) + beta C_i),  C_i [M, N]
 * cuBLASLt is column-major, and a row-major [R, C] matrix is the same bytes
 * as a column-major [C, R] one, so we ask for C^T = op(B)^T op(A)^T: the
 * operands swap places, transposes stay flags, nothing is copied.
 * bf16 runs with f32 accumulation (CUBLAS_COMPUTE_32F), to a bf16 C or
 * (c_f32) an f32 one; f32 runs in full f32 so results match the CPU
 * closely, or with TF32 inputs (CUBLAS_COMPUTE_32F_FAST_TF32) when the
 * caller allows it (tfc_set_float32_matmul_precision). The bias [N]
 * becomes a per-row bias of the column-major C^T, which is what cuBLASLt
 * offers. Where cuBLASLt finds no algorithm for an epilogue, the plain
 * GEMM runs and bias/GELU are applied by a small kernel.
 * Plans are cached per shape: the operation descriptor, the three layouts
 * and the heuristic's algorithm (or its "none"), so a repeated shape (every
 * training step) creates no descriptor and asks no heuristic; only the
 * bias pointer is set per call. K = 0 scales C (and adds the bias) through
 * the fill and map entries instead, so any ldc works.
 */
#include <cublasLt.h>

#include <mutex>

#include "common.cuh"
#include "entries.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)

static std::mutex g_lt_mu;

/* Matmul epilogues (bias is a [N] vector added to every row of C). */
enum { TFC_CUDA_EPI_NONE = 0, TFC_CUDA_EPI_BIAS = 1, TFC_CUDA_EPI_GELU = 2, TFC_CUDA_EPI_BIAS_GELU = 3 };

/*
 * What the cuBLASLt path runs, filled by tfcu_gemm from the problem:
 * for each of `batch` items,
 *   C = alpha * op(A) @ op(B) + beta * C   (then the epilogue),
 * op(A) is [M,K] (A stored [M,K], or [K,M] when trans_a), op(B) is [K,N]
 * (B stored [K,N], or [N,K] when trans_b), C is [M,N]; item i at
 * base + i*stride (elements; 0 shares one matrix). dtype is that of A, B,
 * C and bias: bf16 (f32 accumulation) or f32 (full f32 precision unless
 * allow_tf32); with c_f32, bf16 A and B and f32 C and bias. Epilogues:
 * bias [N] added to every row, then GELU (tanh form) when asked (the
 * table's gemm asks for the bias only). lda/ldb/ldc are the row strides of
 * the stored matrices (0: contiguous). alpha and beta are floats because
 * cuBLASLt reads them as its f32 scale type.
 */
typedef struct tfc_cuda_matmul_desc {
    int32_t dtype;
    int64_t M, N, K, batch;
    int32_t trans_a, trans_b;
    const void *a;
    const void *b;
    void *c;
    const void *bias; /* [N], needed for the BIAS epilogues */
    int64_t stride_a, stride_b, stride_c;
    float alpha, beta;
    int32_t epilogue;
    int64_t lda, ldb, ldc;
    int32_t c_f32;      /* 1: C (and bias) f32 while A and B are bf16 */
    int32_t allow_tf32; /* 1: f32 A and B may be rounded to TF32 (CUBLAS_COMPUTE_32F_FAST_TF32) */
} tfc_cuda_matmul_desc;

static tfc_status lt_check(cublasStatus_t st, const char *fn, const char *what) {
    if (st == CUBLAS_STATUS_SUCCESS) return TFC_OK;
    return tfcu_err(st == CUBLAS_STATUS_ALLOC_FAILED ? TFC_ERR_OOM : TFC_ERR_DEVICE, "%s: %s: %s (%s)", fn, what,
                    cublasLtGetStatusString(st), cublasLtGetStatusName(st));
}

/* The cuBLASLt handle and its workspace, created on the first matmul of a device. */
static tfc_status lt_init(tfcu_ctx *c, const char *fn) {
    std::lock_guard<std::mutex> lock(g_lt_mu);
    if (c->lt) return TFC_OK;
    cublasLtHandle_t h;
    TFCU_TRY(lt_check(cublasLtCreate(&h), fn, "cublasLtCreate"));
    /* Plain cudaMalloc once per device: the workspace lives as long as the process. */
    tfc_status s = tfcu_cuda(cudaMalloc(&c->workspace, WORKSPACE_BYTES), fn, "cudaMalloc (cuBLASLt workspace)");
    if (s != TFC_OK) {
        cublasLtDestroy(h);
        return s;
    }
    c->workspace_size = WORKSPACE_BYTES;
    c->lt = h;
    return TFC_OK;
}

/* Largest power of two (<= 256) dividing the address: cuBLASLt's alignment preference. */
static uint32_t alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a % al)) al >>= 1;
    return al;
}

typedef struct plan_key {
    int32_t dtype, trans_a, trans_b, epilogue, beta_nonzero, device, c_f32, tf32;
    int64_t M, N, K, batch, stride_a, stride_b, stride_c, lda, ldb, ldc;
    uint32_t align_a, align_b, align_c, align_bias;
} plan_key;

/* A cached plan: its descriptors live until the entry is evicted (or the process ends). */
typedef struct plan_entry {
    int used;
    plan_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    bool has_algo; /* false: the heuristic found none (remembered too) */
    cublasLtMatmulAlgo_t algo;
} plan_entry;

/*
 * Bounded: a model has a few dozen GEMM shapes; 256 leaves room for
 * several models and devices. Round-robin eviction; g_lt_mu guards the
 * table and every use of an entry's descriptors.
 */
#define PLAN_CACHE 256
static plan_entry g_plans[PLAN_CACHE];
static unsigned g_plan_next;

static void plan_destroy(plan_entry *e) {
    if (e->c) cublasLtMatrixLayoutDestroy(e->c);
    if (e->b) cublasLtMatrixLayoutDestroy(e->b);
    if (e->a) cublasLtMatrixLayoutDestroy(e->a);
    if (e->op) cublasLtMatmulDescDestroy(e->op);
    memset(e, 0, sizeof *e);
}

/*
 * c[r, n] = gelu?(scale c[r, n] + bias[n]): the fallback epilogue (scale 1)
 * and the K = 0 case (scale beta; beta 0 never reads C, as in BLAS).
 */
template <class T>
__global__ void bias_gelu_kernel(T *c, float scale, const T *bias, size_t total, size_t N, bool gelu) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float v = scale == 0.0f ? 0.0f : scale * tfcu_load(c, i);
        if (bias) v += tfcu_load(bias, i % N);
        c[i] = tfcu_from_f<T>(gelu ? tfcu_gelu(v) : v);
    }
}

static tfc_status make_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld,
                              int64_t batch, int64_t stride, const char *fn) {
    TFCU_TRY(lt_check(cublasLtMatrixLayoutCreate(l, t, rows, cols, ld), fn, "cublasLtMatrixLayoutCreate"));
    if (batch > 1) {
        int32_t bc = (int32_t)batch;
        TFCU_TRY(lt_check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc), fn,
                          "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
        TFCU_TRY(lt_check(
            cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
            fn, "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
    }
    return TFC_OK;
}

static bool has_bias(cublasLtEpilogue_t epi) {
    return epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_BIAS;
}

/* The descriptors and algorithm for key (fields of d), into the empty entry e. */
static tfc_status plan_build(tfcu_ctx *c, const tfc_cuda_matmul_desc *d, const plan_key *key, cublasLtEpilogue_t epi,
                             plan_entry *e, const char *fn) {
    const cudaDataType_t t = d->dtype == TFC_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const cudaDataType_t tc = d->c_f32 ? CUDA_R_32F : t;
    const cublasComputeType_t compute = key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TFCU_TRY(lt_check(cublasLtMatmulDescCreate(&e->op, compute, CUDA_R_32F), fn, "cublasLtMatmulDescCreate"));
    /* Column-major view: Lt-A = our B, Lt-B = our A, Lt-C = C^T [N, M]. */
    cublasOperation_t ta = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TFCU_TRY(lt_check(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), fn,
                      "cublasLtMatmulDescSetAttribute(TRANSA)"));
    TFCU_TRY(lt_check(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), fn,
                      "cublasLtMatmulDescSetAttribute(TRANSB)"));
    TFCU_TRY(lt_check(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), fn,
                      "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
    if (has_bias(epi)) {
        /* The bias has C's type; its pointer is set per call (plans outlive buffers). */
        TFCU_TRY(lt_check(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &tc, sizeof tc),
                          fn, "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"));
    }
    /* A row-major matrix of row stride ld is a column-major one of leading dimension ld. */
    if (d->trans_b)
        TFCU_TRY(make_layout(&e->a, t, (uint64_t)d->K, (uint64_t)d->N, key->ldb, d->batch, d->stride_b, fn));
    else
        TFCU_TRY(make_layout(&e->a, t, (uint64_t)d->N, (uint64_t)d->K, key->ldb, d->batch, d->stride_b, fn));
    if (d->trans_a)
        TFCU_TRY(make_layout(&e->b, t, (uint64_t)d->M, (uint64_t)d->K, key->lda, d->batch, d->stride_a, fn));
    else
        TFCU_TRY(make_layout(&e->b, t, (uint64_t)d->K, (uint64_t)d->M, key->lda, d->batch, d->stride_a, fn));
    TFCU_TRY(make_layout(&e->c, tc, (uint64_t)d->N, (uint64_t)d->M, key->ldc, d->batch, d->stride_c, fn));

    cublasLtMatmulPreference_t pref = NULL;
    TFCU_TRY(lt_check(cublasLtMatmulPreferenceCreate(&pref), fn, "cublasLtMatmulPreferenceCreate"));
    uint64_t ws = c->workspace_size;
    tfc_status s =
        lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                 fn, "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    /* Lt-A is our B and Lt-B our A. */
    const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t al_val[4] = {key->align_b, key->align_a, key->align_c, key->align_c};
    for (int i = 0; i < 4 && s == TFC_OK; i++)
        s = lt_check(cublasLtMatmulPreferenceSetAttribute(pref, al_attr[i], &al_val[i], sizeof al_val[i]), fn,
                     "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
    if (s == TFC_OK) {
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(c->lt, e->op, e->a, e->b, e->c, e->c, pref, 1, &res, &found);
        /* An epilogue cuBLASLt rejects in any way (a bias type it lacks for these types) falls back to the kernel. */
        if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0) ||
            (st != CUBLAS_STATUS_SUCCESS && epi != CUBLASLT_EPILOGUE_DEFAULT)) {
            e->has_algo = false;
        } else {
            s = lt_check(st, fn, "cublasLtMatmulAlgoGetHeuristic");
            e->has_algo = true;
            e->algo = res.algo;
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    return s;
}

/* Run the GEMM with the given cuBLASLt epilogue; *no_algo set when the heuristic finds none. */
static tfc_status run_gemm(tfcu_ctx *c, const tfc_cuda_matmul_desc *d, cublasLtEpilogue_t epi, bool *no_algo,
                           const char *fn) {
    plan_key key;
    memset(&key, 0, sizeof key); /* padding must compare equal */
    key.dtype = d->dtype, key.trans_a = d->trans_a, key.trans_b = d->trans_b, key.epilogue = (int32_t)epi;
    key.beta_nonzero = d->beta != 0.0f, key.device = c->device, key.c_f32 = d->c_f32 != 0;
    key.tf32 = d->allow_tf32 && d->dtype == TFC_DTYPE_F32;
    key.M = d->M, key.N = d->N, key.K = d->K, key.batch = d->batch;
    key.stride_a = d->stride_a, key.stride_b = d->stride_b, key.stride_c = d->stride_c;
    key.lda = d->lda ? d->lda : (d->trans_a ? d->M : d->K);
    key.ldb = d->ldb ? d->ldb : (d->trans_b ? d->K : d->N);
    key.ldc = d->ldc ? d->ldc : d->N;
    key.align_a = alignment(d->a), key.align_b = alignment(d->b), key.align_c = alignment(d->c);
    key.align_bias = has_bias(epi) ? alignment(d->bias) : 256;

    std::lock_guard<std::mutex> lock(g_lt_mu);
    plan_entry *e = NULL;
    for (int i = 0; i < PLAN_CACHE && !e; i++)
        if (g_plans[i].used && !memcmp(&g_plans[i].key, &key, sizeof key)) e = &g_plans[i];
    if (!e) {
        e = &g_plans[g_plan_next++ % PLAN_CACHE];
        plan_destroy(e);
        tfc_status s = plan_build(c, d, &key, epi, e, fn);
        if (s != TFC_OK) {
            plan_destroy(e);
            return s;
        }
        e->key = key;
        e->used = 1;
    }
    *no_algo = !e->has_algo;
    if (!e->has_algo) return TFC_OK;
    if (has_bias(epi))
        TFCU_TRY(
            lt_check(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d->bias, sizeof d->bias),
                     fn, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
    return lt_check(cublasLtMatmul(c->lt, e->op, &d->alpha, d->b, e->a, d->a, e->b, &d->beta, d->c, e->c, d->c, e->c,
                                   &e->algo, c->workspace, c->workspace_size, c->stream),
                    fn, "cublasLtMatmul");
}

/* bias_gelu_kernel over every batch item (C_i at c + i*stride_c). */
static tfc_status apply_epilogue(tfcu_ctx *c, const tfc_cuda_matmul_desc *d, float scale, bool bias, bool gelu,
                                 const char *fn) {
    return tfcu_dispatch_float(fn, d->c_f32 ? (int32_t)TFC_DTYPE_F32 : d->dtype, [&](auto tt) -> tfc_status {
        typedef decltype(tt) T;
        size_t total = (size_t)d->M * (size_t)d->N;
        if (d->ldc && d->ldc != d->N)
            return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: the epilogue pass needs a contiguous C (ldc %lld, N %lld)", fn,
                            (long long)d->ldc, (long long)d->N);
        for (int64_t i = 0; i < (d->stride_c ? d->batch : 1); i++) {
            bias_gelu_kernel<T><<<tfcu_blocks(c, total, 256), 256, 0, c->stream>>>(
                (T *)d->c + i * d->stride_c, scale, bias ? (const T *)d->bias : NULL, total, (size_t)d->N, gelu);
            TFCU_TRY(TFCU_LAUNCHED(fn, "bias_gelu_kernel"));
        }
        return TFC_OK;
    });
}

/* The product on cuBLASLt with the desc's epilogue, or the plain product and the epilogue kernel. */
static tfc_status matmul(int32_t device, const tfc_cuda_matmul_desc *d) {
    const char *fn = "tfcu_gemm";
    tfcu_ctx *c;
    if (d->batch > INT32_MAX)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: batch %lld; cuBLASLt's batch count is below 2^31", fn,
                        (long long)d->batch);
    bool want_bias = d->epilogue == TFC_CUDA_EPI_BIAS || d->epilogue == TFC_CUDA_EPI_BIAS_GELU;
    bool want_gelu = d->epilogue == TFC_CUDA_EPI_GELU || d->epilogue == TFC_CUDA_EPI_BIAS_GELU;
    if (!d->M || !d->N || !d->batch) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    if (!d->K) return apply_epilogue(c, d, d->beta, want_bias, want_gelu, fn);
    TFCU_TRY(lt_init(c, fn));
    cublasLtEpilogue_t epi = want_bias ? (want_gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                       : (want_gelu ? CUBLASLT_EPILOGUE_GELU : CUBLASLT_EPILOGUE_DEFAULT);
    /* cuBLASLt reads the bias in vectors: one that is not 16-byte aligned (a sliced tensor) takes the kernel path. */
    if (want_bias && alignment(d->bias) < 16) epi = CUBLASLT_EPILOGUE_DEFAULT;
    bool no_algo = false;
    TFCU_TRY(run_gemm(c, d, epi, &no_algo, fn));
    if (no_algo && epi != CUBLASLT_EPILOGUE_DEFAULT) { /* the plain GEMM, then the epilogue kernel */
        epi = CUBLASLT_EPILOGUE_DEFAULT;
        TFCU_TRY(run_gemm(c, d, epi, &no_algo, fn));
    }
    if (no_algo)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: cuBLASLt has no algorithm for M %lld, N %lld, K %lld, dtype %s", fn,
                        (long long)d->M, (long long)d->N, (long long)d->K, tfcu_dtype_name(d->dtype));
    if (epi != CUBLASLT_EPILOGUE_DEFAULT || !(want_bias || want_gelu)) return TFC_OK;
    return apply_epilogue(c, d, 1.0f, want_bias, want_gelu, fn);
}

/*
 * K = 0: C_i = beta · C_i (+ bias rows) for every item, through the strided
 * fill and map entries, so any ldc works.
 */
static tfc_status gemm_k0(const tfc_gemm_problem *p) {
    const int32_t ct = p->c_f32 ? (int32_t)TFC_DTYPE_F32 : (int32_t)p->dtype;
    const size_t es = tfcu_float_size(ct);
    for (int64_t i = 0; i < p->batch; i++) {
        tfc_sview c = tfcu_flat_view((char *)p->c + (size_t)(i * p->stride_c) * es, ct, 0);
        c.ndim = 2, c.shape[0] = p->M, c.shape[1] = p->N, c.strides[0] = p->ldc ? p->ldc : p->N, c.strides[1] = 1;
        if (p->beta == 0.0) {
            tfc_fill_problem f = {p->device, c, 0.0};
            TFCU_TRY(tfcu_fill(&f));
        } else if (p->beta != 1.0) {
            tfc_map_problem m = {};
            m.device = p->device, m.op = TFC_MAP_MUL_S, m.out = &c, m.a = &c, m.p = p->beta;
            TFCU_TRY(tfcu_map(&m));
        }
        if (p->epilogue == TFC_GEMM_EPI_BIAS) {
            tfc_sview b = c;
            b.data = (char *)p->bias, b.strides[0] = 0;
            tfc_map_problem m = {};
            m.device = p->device, m.op = TFC_MAP_ADD, m.out = &c, m.a = &c, m.b = &b;
            TFCU_TRY(tfcu_map(&m));
        }
        if (!p->stride_c) break;
    }
    return TFC_OK;
}

/*
 * The table's GEMM: bf16 or f32 C, the f32 C of bf16 A and B (c_f32, the
 * bf16 autocast's gradients), the fused bias epilogue, TF32 when
 * allow_tf32. Refused: epilogues other than the bias, c_f32 of f32 A and B.
 */
tfc_status tfcu_gemm(const tfc_gemm_problem *p) {
    if (p->epilogue != TFC_GEMM_EPI_NONE && p->epilogue != TFC_GEMM_EPI_BIAS)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "tfcu_gemm: epilogue %d is not one CUDA fuses (bias)", (int)p->epilogue);
    if (p->c_f32 && p->dtype != TFC_DTYPE_BF16)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "tfcu_gemm: an f32 C (c_f32) is for bf16 A and B only, not %s",
                        tfcu_dtype_name(p->dtype));
    if (p->M * p->N * p->batch == 0) return TFC_OK;
    if (p->K == 0) return gemm_k0(p);
    tfc_cuda_matmul_desc d = {};
    d.dtype = p->dtype;
    d.M = p->M, d.N = p->N, d.K = p->K, d.batch = p->batch;
    d.trans_a = p->trans_a, d.trans_b = p->trans_b;
    d.a = p->a, d.b = p->b, d.c = p->c;
    d.stride_a = p->stride_a, d.stride_b = p->stride_b, d.stride_c = p->stride_c;
    d.lda = p->lda, d.ldb = p->ldb, d.ldc = p->ldc;
    d.alpha = (float)p->alpha, d.beta = (float)p->beta;
    d.epilogue = p->epilogue == TFC_GEMM_EPI_BIAS ? TFC_CUDA_EPI_BIAS : TFC_CUDA_EPI_NONE;
    d.bias = p->bias;
    d.c_f32 = p->c_f32;
    d.allow_tf32 = p->allow_tf32;
    return matmul(p->device, &d);
}
