/*
 * The module's single export: the CUDA backend table libtfcore asks for
 * with dlopen/dlsym (tfc_backend_module_get). Every kernel entry is a
 * launcher that takes its problem struct of lib/backend/backend.h and
 * lives in the file of its kernels (declared in entries.h); here are the
 * memory entries' signatures, the native stream, the caps, and the
 * entries CUDA does not offer, left NULL with the reason (calls then fail
 * with TFC_ERR_UNSUPPORTED naming the entry). Everything else in
 * libtfcore-cuda.so is hidden (-fvisibility=hidden, version script).
 */
#include "common.cuh"
#include "entries.h"

/* ---- memory ---- */

static void cu_free(int32_t device, void *p, size_t nbytes) {
    (void)nbytes;
    tfcu_free(device, p);
}

static tfc_status cu_memcpy(int32_t device, void *dst, const void *src, size_t nbytes, tfc_memcpy_kind kind) {
    return tfcu_memcpy(device, dst, src, nbytes, (int32_t)kind);
}

/* The device's stream (the context's), so callers can order their own work or CUDA events against ours. */
static void *cu_native_stream(int32_t device) {
    tfcu_ctx *c;
    return tfcu_ctx_get(device, "native_stream", &c) == TFC_OK ? (void *)c->stream : NULL;
}

static tfc_backend make_table(void) {
    tfc_backend b = {};
    b.struct_size = sizeof(tfc_backend);
    b.abi_version = TFC_BACKEND_ABI;
    b.name = "cuda";
    b.caps.float_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_BF16);
    b.caps.gemm_dtypes = b.caps.float_dtypes;
    b.caps.gemm_epilogues = 1u << TFC_GEMM_EPI_BIAS; /* cuBLASLt's bias epilogue: tfc_linear's forward is one call */
    b.caps.stats_f32 = 1;
    b.caps.gemm_bf16_widen_rows = 0;            /* cuBLASLt multiplies bf16 on tensor cores */
    b.caps.gemm_pad_cols = 64;                  /* 16-byte rows and whole tiles (V = 50257 → 50304) */
    b.caps.autocast_attention = TFC_DTYPE_BF16; /* the flash kernels are bf16 (attention_flash.cu) */
    b.describe = tfcu_describe;
    b.device_count = tfcu_device_count;
    b.last_error = tfcu_last_error;
    b.alloc = tfcu_alloc;
    b.free = cu_free;
    b.memset0 = tfcu_memset0;
    b.memcpy = cu_memcpy;
    b.synchronize = tfcu_synchronize;
    b.copy = tfcu_copy;
    b.fill = tfcu_fill;
    b.random = tfcu_random;
    b.map = tfcu_map;
    b.reduce = tfcu_reduce;
    b.reduce_scatter = NULL; /* max/min backward: CPU only */
    b.gemm = tfcu_gemm;
    b.bias_rows = tfcu_bias_rows;
    b.bias_grad = tfcu_bias_grad;
    b.layernorm_forward = tfcu_layernorm_forward;
    b.layernorm_backward = tfcu_layernorm_backward;
    b.rmsnorm_forward = tfcu_rmsnorm_forward;
    b.rmsnorm_backward = tfcu_rmsnorm_backward;
    b.softmax_forward = tfcu_softmax_forward;
    b.softmax_backward = tfcu_softmax_backward;
    b.cross_entropy_forward = tfcu_cross_entropy_forward;
    b.cross_entropy_backward = tfcu_cross_entropy_backward;
    b.cross_entropy_rows = NULL; /* the fused LM head composes matmul + cross_entropy instead */
    b.embedding_forward = tfcu_embedding_forward;
    b.embedding_backward = tfcu_embedding_backward;
    b.gelu_forward = tfcu_gelu_forward;
    b.gelu_backward = tfcu_gelu_backward;
    b.attention_forward = tfcu_attention_forward;
    b.attention_backward = tfcu_attention_backward;
    b.rope_forward = tfcu_rope_forward;
    b.rope_backward = tfcu_rope_backward;
    b.dropout = tfcu_dropout;
    b.swiglu_forward = tfcu_swiglu_forward;
    b.swiglu_backward = tfcu_swiglu_backward;
    b.topk = NULL; /* top-k: CPU only */
    b.topk_backward = NULL;
    b.optim_step = tfcu_optim_step;
    b.grad_norm = tfcu_grad_norm;
    b.grad_scale = tfcu_grad_scale;
    b.quantize = NULL; /* quantized weights: CPU only so far (docs/CUDA.md) */
    b.dequantize = NULL;
    b.qlinear = NULL;
    b.coll_unique_id = tfcu_coll_unique_id;
    b.coll_init = tfcu_coll_init;
    b.coll_release = tfcu_coll_release;
    b.coll_all_reduce = tfcu_coll_all_reduce;
    b.coll_broadcast = tfcu_coll_broadcast;
    b.coll_all_gather = tfcu_coll_all_gather;
    b.coll_reduce_scatter = tfcu_coll_reduce_scatter;
    /* No CUDA kernels yet for these: the ops on cuda:0 are TFC_ERR_UNSUPPORTED naming the entry. */
    b.gather = NULL;
    b.scatter = NULL;
    b.cumsum = NULL;
    b.multinomial = NULL;
    b.native_stream = cu_native_stream;
    return b;
}

static const tfc_backend g_table = make_table();

/* The table for abi_version, or NULL when this module speaks another version. */
extern "C" __attribute__((visibility("default"))) const tfc_backend *tfc_backend_module_get(uint32_t abi_version) {
    return abi_version == TFC_BACKEND_ABI ? &g_table : NULL;
}
