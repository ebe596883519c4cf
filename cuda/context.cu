/*
 * Per-device state and error reporting. Each device gets one non-blocking
 * stream (all of the module's work for that device runs on it, in call
 * order) and uses the device's default memory pool with its release
 * threshold raised, so that memory freed with cudaFreeAsync stays cached
 * and the next step's allocations never reach the driver.
 */
#include <stdarg.h>
#include <stdio.h>

#include <mutex>

#include "common.cuh"

#define TFCU_MAX_DEVICES 64

static thread_local char g_msg[1024];

const char *tfcu_last_error(void) { return g_msg; }

tfc_status tfcu_err(tfc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return s;
}

/*
 * Errors after which the context is unusable: every later call of the
 * process fails with the same error, whatever it asks for.
 */
static bool is_sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable: return true;
    default: return false;
    }
}

tfc_status tfcu_cuda(cudaError_t e, const char *fn, const char *what) {
    if (e == cudaSuccess) return TFC_OK;
    (void)cudaGetLastError(); /* clear a non-sticky error so later calls are not blamed */
    /* A sticky error is usually raised by an earlier, asynchronous kernel, not by `what`: say so. */
    /* 7xx are the kernel-execution errors; one that survives the reset above is sticky too. */
    bool sticky = is_sticky(e) || ((int)e >= 700 && (int)e < 800 && cudaPeekAtLastError() == e);
    return tfcu_err(e == cudaErrorMemoryAllocation ? TFC_ERR_OOM : TFC_ERR_DEVICE, "%s: %s: %s (%s)%s", fn, what,
                    cudaGetErrorString(e), cudaGetErrorName(e),
                    sticky ? "; the CUDA context is dead (a sticky error, likely from an earlier kernel: "
                             "rerun with CUDA_LAUNCH_BLOCKING=1 to find it); every later CUDA call of this "
                             "process fails"
                           : "");
}

const char *tfcu_dtype_name(int32_t dtype) {
    switch (dtype) {
    case TFC_DTYPE_F32: return "f32";
    case TFC_DTYPE_F64: return "f64";
    case TFC_DTYPE_BF16: return "bf16";
    case TFC_DTYPE_F16: return "f16";
    case TFC_DTYPE_I32: return "i32";
    case TFC_DTYPE_I64: return "i64";
    case TFC_DTYPE_U8: return "u8";
    case TFC_DTYPE_BOOL: return "bool";
    default: return "?";
    }
}

static std::once_flag g_count_once;
static int g_count;
static cudaError_t g_count_err;
static std::mutex g_ctx_mu;
static tfcu_ctx *g_ctx[TFCU_MAX_DEVICES];

static void count_devices(void) {
    g_count_err = cudaGetDeviceCount(&g_count);
    if (g_count_err != cudaSuccess) g_count = 0;
    (void)cudaGetLastError();
}

int32_t tfcu_device_count(void) {
    std::call_once(g_count_once, count_devices);
    if (g_count_err != cudaSuccess)
        tfcu_cuda(g_count_err, "tfc_cuda", "cudaGetDeviceCount");
    else if (g_count == 0)
        tfcu_err(TFC_ERR_DEVICE, "tfc_cuda: cudaGetDeviceCount found no device");
    return g_count > TFCU_MAX_DEVICES ? TFCU_MAX_DEVICES : g_count;
}

static tfc_status create_ctx(int32_t device, const char *fn, tfcu_ctx **out) {
    tfcu_ctx *c = new (std::nothrow) tfcu_ctx();
    if (!c) return tfcu_err(TFC_ERR_OOM, "%s: out of host memory", fn);
    c->device = device;
    int pools = 0, smem = 0;
    tfc_status s = tfcu_cuda(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device), fn,
                             "cudaDeviceGetAttribute");
    if (s == TFC_OK && !pools)
        s = tfcu_err(TFC_ERR_DEVICE, "%s: device %d does not support stream-ordered memory pools", fn, device);
    if (s == TFC_OK)
        s = tfcu_cuda(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device), fn,
                      "cudaDeviceGetAttribute");
    if (s == TFC_OK)
        s = tfcu_cuda(cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, device), fn,
                      "cudaDeviceGetAttribute");
    if (s == TFC_OK)
        s = tfcu_cuda(cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, device), fn,
                      "cudaDeviceGetAttribute");
    if (s == TFC_OK)
        s = tfcu_cuda(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), fn,
                      "cudaDeviceGetAttribute");
    c->smem_optin = (size_t)smem;
    if (s == TFC_OK) s = tfcu_cuda(cudaDeviceGetDefaultMemPool(&c->pool, device), fn, "cudaDeviceGetDefaultMemPool");
    if (s == TFC_OK) {
        uint64_t keep = UINT64_MAX;
        s = tfcu_cuda(cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &keep), fn,
                      "cudaMemPoolSetAttribute");
    }
    if (s == TFC_OK)
        s = tfcu_cuda(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), fn, "cudaStreamCreate");
    if (s != TFC_OK) {
        delete c;
        return s;
    }
    *out = c;
    return TFC_OK;
}

tfc_status tfcu_ctx_get(int32_t device, const char *fn, tfcu_ctx **out) {
    int32_t n = tfcu_device_count();
    if (n <= 0) return TFC_ERR_DEVICE; /* message set by tfcu_device_count */
    if (device < 0 || device >= n)
        return tfcu_err(TFC_ERR_DEVICE, "%s: CUDA device %d does not exist (%d device%s)", fn, (int)device, (int)n,
                        n == 1 ? "" : "s");
    TFCU_TRY(tfcu_cuda(cudaSetDevice(device), fn, "cudaSetDevice"));
    std::lock_guard<std::mutex> lock(g_ctx_mu);
    if (!g_ctx[device]) TFCU_TRY(create_ctx(device, fn, &g_ctx[device]));
    *out = g_ctx[device];
    return TFC_OK;
}

tfc_status tfcu_scratch(tfcu_ctx *c, const char *fn, size_t nbytes, void **out) {
    return tfcu_cuda(cudaMallocAsync(out, nbytes ? nbytes : 1, c->stream), fn, "cudaMallocAsync (scratch)");
}

void tfcu_scratch_free(tfcu_ctx *c, void *p) {
    if (p) (void)cudaFreeAsync(p, c->stream);
}
