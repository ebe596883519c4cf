/*
 * The module's kernels and memory functions. The kernel launchers take the
 * backend table's problem structs (lib/backend/backend.h) and are its
 * entries; each lives in the file of its kernels and prepares there what
 * it needs (scratch operands, attention's choice of kernels, the
 * optimizer's grouping, a cuBLASLt or AdamW descriptor). module.cu puts
 * them in the table.
 */
#ifndef TFCU_ENTRIES_H
#define TFCU_ENTRIES_H

#include "backend/backend.h"

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

/*
 * Tensor-core attention (attention_flash.cu): bf16, D = Dv = 64 or 128,
 * on contiguous q [B,H,T,D], k/v [B,Hkv,S,D] (Hkv dividing H), out
 * [B,H,T,D], lse [B,H,T] f32, window as tfc_attn_problem's
 * (tfc_attn_problem's formulas); attention.cu's entries call them
 * where tfcu_flash_attention_applies says a problem fits (dtype, dims,
 * T, S > 0, the given operand pointers 16-byte aligned; NULLs ignored).
 */
int tfcu_flash_attention_applies(int32_t dtype, size_t D, size_t Dv, size_t T, size_t S, const void *const *ptrs,
                                 int nptrs);
tfc_status tfcu_flash_attention_forward(int32_t device, const void *q, const void *k, const void *v, void *out,
                                        float *lse, size_t B, size_t H, size_t Hkv, size_t T, size_t S, size_t D,
                                        float scale, int32_t causal, int64_t window);
tfc_status tfcu_flash_attention_backward(int32_t device, const void *dout, const void *q, const void *k, const void *v,
                                         const void *out, const float *lse, void *dq, void *dk, void *dv, size_t B,
                                         size_t H, size_t Hkv, size_t T, size_t S, size_t D, float scale,
                                         int32_t causal, int64_t window, uint32_t flags);

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
tfc_status tfcu_rmsnorm_forward(const tfc_rmsnorm_problem *p);
tfc_status tfcu_rmsnorm_backward(const tfc_rmsnorm_problem *p);
tfc_status tfcu_softmax_forward(const tfc_softmax_problem *p);
tfc_status tfcu_softmax_backward(const tfc_softmax_problem *p);
/* The forward reads back the device's target check unless accumulate has TFC_IDS_CHECKED; the backward needs lse_in. */
tfc_status tfcu_cross_entropy_forward(const tfc_cross_entropy_problem *p);
tfc_status tfcu_cross_entropy_backward(const tfc_cross_entropy_problem *p);
/* Both read back the device's id check unless accumulate has TFC_IDS_CHECKED. */
tfc_status tfcu_embedding_forward(const tfc_embedding_problem *p);
tfc_status tfcu_embedding_backward(const tfc_embedding_problem *p);
tfc_status tfcu_gemm(const tfc_gemm_problem *p);
tfc_status tfcu_bias_rows(const tfc_bias_problem *p);
tfc_status tfcu_bias_grad(const tfc_bias_problem *p);
/* Non-contiguous operands are compacted into scratch; TFC_CUDA_ATTENTION picks the kernels (attention.cu). */
tfc_status tfcu_attention_forward(const tfc_attn_problem *p);
tfc_status tfcu_attention_backward(const tfc_attn_problem *p);
/* AdamW (and Adam without weight decay) on f32 parameters; the rest is refused. */
tfc_status tfcu_optim_step(const tfc_optim_problem *p);
tfc_status tfcu_grad_norm(const tfc_grad_norm_problem *p);
tfc_status tfcu_grad_scale(const tfc_grad_norm_problem *p);
/* RoPE (rope.cu): a device-side check of the positions, read back, unless pos_checked. */
tfc_status tfcu_rope_forward(const tfc_rope_problem *p);
tfc_status tfcu_rope_backward(const tfc_rope_problem *p);

#endif
