/*
 * The module's single export: the function table libtfcore asks for with
 * dlopen/dlsym. Everything else in libtfcore-cuda.so is hidden (compiled
 * with -fvisibility=hidden and linked with a version script).
 */
#include "common.cuh"
#include "entries.h"

static const tfc_cuda_api g_api = {
    sizeof(tfc_cuda_api),
    TFC_CUDA_API_VERSION,
    tfcu_describe,
    tfcu_device_count,
    tfcu_last_error,
    tfcu_alloc,
    tfcu_free,
    tfcu_memset0,
    tfcu_memcpy,
    tfcu_synchronize,
    tfcu_fill,
    tfcu_cast,
    tfcu_binary,
    tfcu_binary_strided,
    tfcu_binary_scalar,
    tfcu_unary,
    tfcu_unary_backward,
    tfcu_reduce,
    tfcu_softmax_forward,
    tfcu_softmax_backward,
    tfcu_layernorm_forward,
    tfcu_layernorm_backward,
    tfcu_cross_entropy_forward,
    tfcu_cross_entropy_backward,
    tfcu_embedding_forward,
    tfcu_embedding_backward,
    tfcu_matmul,
    tfcu_attention_forward,
    tfcu_attention_backward,
    tfcu_grad_norm,
    tfcu_adamw,
    tfcu_random_uniform,
    tfcu_random_normal,
    tfcu_dropout,
    tfcu_copy_strided,
};

/* The table for api_version, or NULL when this module speaks another version. */
extern "C" __attribute__((visibility("default"))) const tfc_cuda_api *tfc_cuda_module_get(uint32_t api_version) {
    return api_version == TFC_CUDA_API_VERSION ? &g_api : NULL;
}
