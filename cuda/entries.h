/*
 * The module's kernels and memory functions. Those listed last take the
 * backend table's problem structs (lib/backend/backend.h) and are its
 * entries; module.cu adapts the others where an entry needs preparation
 * (scratch operands, attention's choice of kernels, the optimizer's
 * grouping) or a descriptor (cuBLASLt, AdamW).
 */
#ifndef TFCU_ENTRIES_H
#define TFCU_ENTRIES_H

#include "cuda_types.h"

const char *tfcu_describe(void);
int32_t tfcu_device_count(void);
const char *tfcu_last_error(void);
tfc_status tfcu_alloc(int32_t device, size_t nbytes, void **out);
void tfcu_free(int32_t device, void *p);
tfc_status tfcu_memset0(int32_t device, void *p, size_t nbytes);
tfc_status tfcu_memcpy(int32_t device, void *dst, const void *src, size_t nbytes, int32_t kind);
tfc_status tfcu_synchronize(int32_t device);

/* NCCL collectives (nccl.cu): the backend table's coll_* entries. */
tfc_status tfcu_coll_unique_id(void *id);
tfc_status tfcu_coll_init(const void *id, int32_t rank, int32_t size, int32_t device, void **comm);
void tfcu_coll_release(void *comm);
tfc_status tfcu_coll_all_reduce(const tfc_coll_problem *p);
tfc_status tfcu_coll_broadcast(const tfc_coll_problem *p);
tfc_status tfcu_coll_all_gather(const tfc_coll_problem *p);
tfc_status tfcu_coll_reduce_scatter(const tfc_coll_problem *p);

tfc_status tfcu_matmul(int32_t device, const tfc_cuda_matmul_desc *desc);
tfc_status tfcu_attention_forward(int32_t device, int32_t dtype, const void *q, const void *k, const void *v, void *out,
                                  float *lse, size_t B, size_t H, size_t T, size_t S, size_t D, size_t Dv, float scale,
                                  int32_t causal);
tfc_status tfcu_attention_backward(int32_t device, int32_t dtype, const void *dout, const void *q, const void *k,
                                   const void *v, const void *out, const float *lse, void *dq, void *dk, void *dv,
                                   size_t B, size_t H, size_t T, size_t S, size_t D, size_t Dv, float scale,
                                   int32_t causal, uint32_t flags);
tfc_status tfcu_grad_norm(int32_t device, int32_t dtype, const void *const *grads, const size_t *numel, int32_t count,
                          float max_norm, float *norm, float *clip_scale);
tfc_status tfcu_adamw(int32_t device, const tfc_cuda_adamw_desc *desc);
/*
 * Tensor-core attention (attention_flash.cu): bf16, D = Dv = 64 or 128,
 * same contract as tfcu_attention_forward/backward with Dv = D.
 * tfcu_flash_attention_applies says whether a problem fits (dtype, dims,
 * T, S > 0, the given operand pointers 16-byte aligned; NULLs ignored).
 */
int tfcu_flash_attention_applies(int32_t dtype, size_t D, size_t Dv, size_t T, size_t S, const void *const *ptrs,
                                 int nptrs);
tfc_status tfcu_flash_attention_forward(int32_t device, const void *q, const void *k, const void *v, void *out,
                                        float *lse, size_t B, size_t H, size_t T, size_t S, size_t D, float scale,
                                        int32_t causal);
tfc_status tfcu_flash_attention_backward(int32_t device, const void *dout, const void *q, const void *k, const void *v,
                                         const void *out, const float *lse, void *dq, void *dk, void *dv, size_t B,
                                         size_t H, size_t T, size_t S, size_t D, float scale, int32_t causal,
                                         uint32_t flags);

/*
 * Entries that take the table's problems as they are (backend.h states what
 * each computes; the door validated the problem, so they do not check again).
 */
tfc_status tfcu_map(const tfc_map_problem *p);
tfc_status tfcu_copy(const tfc_copy_problem *p);
tfc_status tfcu_fill(const tfc_fill_problem *p);
tfc_status tfcu_random(const tfc_random_problem *p); /* contiguous views only */
tfc_status tfcu_reduce(const tfc_reduce_problem *p);
tfc_status tfcu_gelu_forward(const tfc_gelu_problem *p);
tfc_status tfcu_gelu_backward(const tfc_gelu_problem *p);
tfc_status tfcu_dropout(const tfc_dropout_problem *p);
tfc_status tfcu_swiglu_forward(const tfc_swiglu_problem *p);
tfc_status tfcu_swiglu_backward(const tfc_swiglu_problem *p);
tfc_status tfcu_layernorm_forward(const tfc_layernorm_problem *p);
tfc_status tfcu_layernorm_backward(const tfc_layernorm_problem *p);
tfc_status tfcu_softmax_forward(const tfc_softmax_problem *p);
tfc_status tfcu_softmax_backward(const tfc_softmax_problem *p);
/* The forward reads back the device's target check unless accumulate has TFC_IDS_CHECKED; the backward needs lse_in. */
tfc_status tfcu_cross_entropy_forward(const tfc_cross_entropy_problem *p);
tfc_status tfcu_cross_entropy_backward(const tfc_cross_entropy_problem *p);
/* Both read back the device's id check unless accumulate has TFC_IDS_CHECKED. */
tfc_status tfcu_embedding_forward(const tfc_embedding_problem *p);
tfc_status tfcu_embedding_backward(const tfc_embedding_problem *p);
/* out[o] (+)= scale · Σ over the reduced trailing dims of `in` (see reduce.cu). */
tfc_status tfcu_sum(int32_t device, const tfc_sview *in, int32_t nkeep, void *out, double scale, bool accumulate);
/*
 * out[j] (+)= scale · Σ_r x[r·ld + j] for x [rows, n] (reduce.cu): row chunks
 * summed in parallel, then the chunks in order; deterministic. fn names
 * the entry in messages.
 */
tfc_status tfcu_colsum(const char *fn, int32_t device, int32_t dtype, const void *x, int64_t rows, int64_t n,
                       int64_t ld, void *out, double scale, bool accumulate);

#endif
