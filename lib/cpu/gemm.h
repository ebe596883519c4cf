/*
 * The CPU's GEMMs. The gemm entry tfc_cpu_gemm (tfc_gemm_problem, declared
 * in kernels.h) runs each item of a batch through one of the matrix
 * products below, which other kernels (quant.c's tiles, gemm_bf16.c) call
 * directly:
 * C = alpha · op(A) · op(B) + beta · C for row-major matrices, where op(X)
 * is X or Xᵀ. Transposes are flags, never copies. Backed by CBLAS
 * (OpenBLAS) when built with it, else by the blocked C kernel below.
 */
#ifndef TFC_CPU_GEMM_H
#define TFC_CPU_GEMM_H

#include <stdint.h>

#include "tfcore/core.h"

/* One f32 or f64 product. */
void tfc_cpu_gemm_matrix(tfc_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                         const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* The portable kernel, also used when BLAS is off (exposed for tests). */
void tfc_cpu_gemm_blocked(tfc_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/*
 * bf16 GEMM (gemm_bf16.c): C = alpha · op(A) · op(B) + beta · C for bf16 A
 * and B, products summed in f32; C is f32 (c_f32) or bf16, rounded once at
 * the end. TFC_ERR_OOM (message set) when scratch cannot be allocated;
 * nothing is written then.
 */
tfc_status tfc_cpu_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                             int64_t lda, const uint16_t *b, int64_t ldb, double beta, void *c, int64_t ldc, int c_f32);

/* OpenBLAS's kernel family before (before != 0) and after the load-time
 * choice in blas_coretype.c; "" without a DYNAMIC_ARCH OpenBLAS. */
const char *tfc_cpu_blas_coretype(int before);

/* 1 when libtfcore set OpenBLAS to one thread at load (blas_threads.c) and
 * tfc_cpu_gemm_matrix splits large products over its own OpenMP threads. */
int tfc_cpu_blas_threads_owned(void);

#endif
