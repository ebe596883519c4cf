/*
 * The memory half of the table: stream-ordered allocation from the
 * device's pool, copies and memsets on the device's stream, and the sync
 * that makes the host wait for everything enqueued so far.
 */
#include <stdio.h>

#include <mutex>

#include "common.cuh"
#include "entries.h"

tfc_status tfcu_alloc(int32_t device, size_t nbytes, void **out) {
    tfcu_ctx *c;
    TFCU_NOT_NULL("tfcu_alloc", out);
    TFCU_TRY(tfcu_ctx_get(device, "tfcu_alloc", &c));
    void *p = NULL;
    /*
     * Only cudaErrorMemoryAllocation is out of memory (tfcu_cuda maps it to
     * TFC_ERR_OOM); anything else, an illegal address left by an earlier
     * kernel above all, is a device error with CUDA's own name for it, so a
     * dead context is never mistaken for a full one.
     */
    char what[96];
    snprintf(what, sizeof what, "cudaMallocAsync of %zu bytes on CUDA device %d", nbytes, (int)device);
    TFCU_TRY(tfcu_cuda(cudaMallocAsync(&p, nbytes ? nbytes : 1, c->stream), "tfcu_alloc", what));
    *out = p;
    return TFC_OK;
}

void tfcu_free(int32_t device, void *p) {
    tfcu_ctx *c;
    if (!p || tfcu_ctx_get(device, "tfcu_free", &c) != TFC_OK) return;
    (void)cudaFreeAsync(p, c->stream);
}

tfc_status tfcu_memset0(int32_t device, void *p, size_t nbytes) {
    tfcu_ctx *c;
    if (!nbytes) return TFC_OK;
    TFCU_NOT_NULL("tfcu_memset0", p);
    TFCU_TRY(tfcu_ctx_get(device, "tfcu_memset0", &c));
    return tfcu_cuda(cudaMemsetAsync(p, 0, nbytes, c->stream), "tfcu_memset0", "cudaMemsetAsync");
}

tfc_status tfcu_memcpy(int32_t device, void *dst, const void *src, size_t nbytes, int32_t kind) {
    static const cudaMemcpyKind kinds[3] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
    const char *fn = "tfcu_memcpy";
    tfcu_ctx *c;
    if (kind < 0 || kind > 2) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: kind %d is not 0, 1 or 2", fn, (int)kind);
    if (!nbytes) return TFC_OK;
    TFCU_NOT_NULL(fn, dst);
    TFCU_NOT_NULL(fn, src);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    /*
     * Host->device from pageable memory returns once the source has been
     * staged, so the caller may reuse it; device->host must wait for the
     * data before the host reads it.
     */
    TFCU_TRY(tfcu_cuda(cudaMemcpyAsync(dst, src, nbytes, kinds[kind], c->stream), fn, "cudaMemcpyAsync"));
    if (kind == 1) return tfcu_cuda(cudaStreamSynchronize(c->stream), fn, "cudaStreamSynchronize");
    return TFC_OK;
}

tfc_status tfcu_synchronize(int32_t device) {
    tfcu_ctx *c;
    TFCU_TRY(tfcu_ctx_get(device, "tfcu_synchronize", &c));
    return tfcu_cuda(cudaStreamSynchronize(c->stream), "tfcu_synchronize", "cudaStreamSynchronize");
}

static std::once_flag g_describe_once;
static char g_describe[256];

static void build_description(void) {
    int n = tfcu_device_count();
    cudaDeviceProp p;
    if (n <= 0) {
        snprintf(g_describe, sizeof g_describe, "no CUDA device: %s", tfcu_last_error());
    } else if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(g_describe, sizeof g_describe, "%d CUDA device%s (properties unavailable)", n, n == 1 ? "" : "s");
    } else {
        snprintf(g_describe, sizeof g_describe, "%.200s (sm_%d%d, %.0f GiB)%s", p.name, p.major, p.minor,
                 (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), n > 1 ? " and more" : "");
    }
}

const char *tfcu_describe(void) {
    std::call_once(g_describe_once, build_description);
    return g_describe;
}
