/*
 * Types internal to the CUDA module: the cuBLASLt GEMM and the fused AdamW
 * descriptors. What crosses
 * into libtfcore is only the backend table (lib/backend/backend.h), filled
 * in module.cu.
 */
#ifndef TFCU_TYPES_H
#define TFCU_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Matmul epilogues (bias is a [N] vector added to every row of C). */
enum { TFC_CUDA_EPI_NONE = 0, TFC_CUDA_EPI_BIAS = 1, TFC_CUDA_EPI_GELU = 2, TFC_CUDA_EPI_BIAS_GELU = 3 };

/*
 * Batched row-major GEMM: for each of `batch` items,
 *   C = alpha * op(A) @ op(B) + beta * C   (then the epilogue),
 * op(A) is [M,K] (A stored [M,K], or [K,M] when trans_a), op(B) is [K,N]
 * (B stored [K,N], or [N,K] when trans_b), C is [M,N]; all contiguous
 * per item, item i at base + i*stride (elements; 0 shares one matrix).
 * dtype is that of A, B, C and bias: bf16 (f32 accumulation) or f32
 * (full f32 precision unless allow_tf32); with c_f32, bf16 A and B and
 * f32 C and bias. Epilogues: bias [N] added to every row,
 * then GELU (tanh form) when asked. lda/ldb/ldc are the row strides of the
 * stored matrices (0: contiguous).
 */
typedef struct tfc_cuda_matmul_desc {
    uint32_t struct_size;
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

/*
 * One fused AdamW step over `count` tensors (PyTorch's AdamW):
 *   g = grad * grad_scale   (grad_scale: device f32 scalar, NULL = 1)
 *   p -= lr * weight_decay[t] * p
 *   m = beta1 m + (1-beta1) g;  v = beta2 v + (1-beta2) g^2
 *   p -= lr * (m / (1-beta1^step)) / (sqrt(v / (1-beta2^step)) + eps)
 * params/m/v are f32; grads are grad_dtype (f32 or bf16); params_bf16
 * (NULL, or per-tensor NULL) receives a bf16 copy of the new params for
 * mixed precision. Pointer arrays live in host memory.
 */
typedef struct tfc_cuda_adamw_desc {
    uint32_t struct_size;
    int32_t count;
    int32_t grad_dtype;
    float *const *params;
    const void *const *grads;
    float *const *m;
    float *const *v;
    void *const *params_bf16;
    const size_t *numel;
    const float *weight_decay; /* [count], host */
    const float *grad_scale;   /* device scalar or NULL */
    float lr, beta1, beta2, eps;
    int64_t step; /* 1 on the first step */
} tfc_cuda_adamw_desc;

#endif
