/*
 * The CPU's backend table: the entries of backend/backend.h. Every kernel
 * entry is the kernel itself, tfc_cpu_<entry>(const tfc_<x>_problem *),
 * declared in kernels.h, optim_kernels.h or quant.h; only the memory
 * entries live here. The CPU runs every entry in f32 and f64, and gemm in
 * bf16 too; the quantized-weight entries (cpu/quant.h) in f32 only; stats
 * keep the input's dtype.
 */
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/gemm_bf16_amx.h"
#include "cpu/gemm_small_m.h"
#include "cpu/kernels.h"
#include "cpu/optim_kernels.h"
#include "cpu/quant.h"

static const char *cpu_describe(void) { return "CPU"; }
static int32_t cpu_device_count(void) { return 1; }
/* CPU entries set the library's thread-local message themselves. */
static const char *cpu_last_error(void) { return tfc_last_error(); }

/* ---- memory ---- */

static tfc_status cpu_alloc(int32_t device, size_t nbytes, void **out) {
    (void)device;
    void *p = tfc_host_alloc(nbytes);
    if (!p) return tfc_err(TFC_ERR_OOM, "out of memory allocating %zu bytes", nbytes);
    *out = p;
    return TFC_OK;
}

static void cpu_free(int32_t device, void *p, size_t nbytes) {
    (void)device;
    tfc_host_free(p, nbytes);
}

static tfc_status cpu_memset0(int32_t device, void *p, size_t nbytes) {
    (void)device;
    if (nbytes) memset(p, 0, nbytes);
    return TFC_OK;
}

static tfc_status cpu_memcpy(int32_t device, void *dst, const void *src, size_t nbytes, tfc_memcpy_kind kind) {
    (void)device, (void)kind;
    if (nbytes) memmove(dst, src, nbytes);
    return TFC_OK;
}

static tfc_status cpu_synchronize(int32_t device) {
    (void)device;
    return TFC_OK;
}

tfc_backend tfc_cpu_backend = {
    .struct_size = sizeof(tfc_backend),
    .abi_version = TFC_BACKEND_ABI,
    .name = "cpu",
    .caps =
        {
            .float_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_F64),
            .gemm_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_F64) | (1u << TFC_DTYPE_BF16),
            .gemm_epilogues = 0, /* linear writes the bias rows, then accumulates the GEMM onto them (beta = 1) */
            .stats_f32 = 0,
            /* gemm_bf16.c widens to f32 above the small-M kernel's rows (docs/PERFORMANCE.md, "bf16 GEMM");
               0 on AMX tiles, which multiply bf16 (settle_table) */
            .gemm_bf16_widen_rows = TFC_GEMM_SMALL_M_MAX + 1,
            .gemm_pad_cols = 0,
            .autocast_attention = TFC_DTYPE_F32, /* attention takes f32 and f64 only */
        },
    .describe = cpu_describe,
    .device_count = cpu_device_count,
    .last_error = cpu_last_error,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset0 = cpu_memset0,
    .memcpy = cpu_memcpy,
    .synchronize = cpu_synchronize,
    .copy = tfc_cpu_copy,
    .fill = tfc_cpu_fill,
    .random = tfc_cpu_random,
    .map = tfc_cpu_map,
    .reduce = tfc_cpu_reduce,
    .reduce_scatter = tfc_cpu_reduce_scatter,
    .gemm = tfc_cpu_gemm,
    .bias_rows = tfc_cpu_bias_rows,
    .bias_grad = tfc_cpu_bias_grad,
    .layernorm_forward = tfc_cpu_layernorm_forward,
    .layernorm_backward = tfc_cpu_layernorm_backward,
    .rmsnorm_forward = tfc_cpu_rmsnorm_forward,
    .rmsnorm_backward = tfc_cpu_rmsnorm_backward,
    .softmax_forward = tfc_cpu_softmax_forward,
    .softmax_backward = tfc_cpu_softmax_backward,
    .cross_entropy_forward = tfc_cpu_cross_entropy_forward,
    .cross_entropy_backward = tfc_cpu_cross_entropy_backward,
    .cross_entropy_rows = tfc_cpu_cross_entropy_rows,
    .embedding_forward = tfc_cpu_embedding_forward,
    .embedding_backward = tfc_cpu_embedding_backward,
    .gelu_forward = tfc_cpu_gelu_forward,
    .gelu_backward = tfc_cpu_gelu_backward,
    .attention_forward = tfc_cpu_attention_forward,
    .attention_backward = tfc_cpu_attention_backward,
    .rope_forward = tfc_cpu_rope_forward,
    .rope_backward = tfc_cpu_rope_backward,
    .dropout = tfc_cpu_dropout,
    .swiglu_forward = tfc_cpu_swiglu_forward,
    .swiglu_backward = tfc_cpu_swiglu_backward,
    .topk = tfc_cpu_topk,
    .topk_backward = tfc_cpu_topk_backward,
    .optim_step = tfc_cpu_optim_step,
    .grad_norm = tfc_cpu_grad_norm,
    .grad_scale = tfc_cpu_grad_scale,
    .quantize = tfc_cpu_quantize,
    .dequantize = tfc_cpu_dequantize,
    .qlinear = tfc_cpu_qlinear,
    .gather = tfc_cpu_gather,
    .scatter = tfc_cpu_scatter,
    .cumsum = tfc_cpu_cumsum,
    .multinomial = tfc_cpu_multinomial,
    .native_stream = NULL, /* no streams on the CPU */
};

static void settle_table(void) {
    if (tfc_cpu_bf16_gemm_kind() != TFC_BF16_GEMM_WIDEN) tfc_cpu_backend.caps.gemm_bf16_widen_rows = 0;
}

const tfc_backend *tfc_cpu_backend_table(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, settle_table);
    return &tfc_cpu_backend;
}
