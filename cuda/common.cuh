/*
 * Shared pieces of the CUDA module: the per-device context (one stream,
 * the stream-ordered memory pool, the cuBLASLt handle), error reporting
 * into the module's thread-local message, stream-ordered scratch buffers,
 * dtype dispatch and flat views for launchers that compose other entries,
 * element loads and stores in f32, and warp/block reductions.
 */
#ifndef TFCU_COMMON_CUH
#define TFCU_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "backend/backend.h"

typedef __nv_bfloat16 bf16;

/* ---- errors ---- */

/* Set the thread's message and return s. */
tfc_status tfcu_err(tfc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* TFC_OK for cudaSuccess; else a message "fn: what: <CUDA error string> (<name>)". */
tfc_status tfcu_cuda(cudaError_t e, const char *fn, const char *what);
/* After a kernel launch: report launch-configuration errors. */
#define TFCU_LAUNCHED(fn, kernel) tfcu_cuda(cudaGetLastError(), fn, "launch of " kernel)
#define TFCU_TRY(expr)                         \
    do {                                       \
        tfc_status tfcu_s_ = (expr);           \
        if (tfcu_s_ != TFC_OK) return tfcu_s_; \
    } while (0)
#define TFCU_NOT_NULL(fn, arg)                                                               \
    do {                                                                                     \
        if ((arg) == NULL) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, #arg); \
    } while (0)

/* ---- per-device context ---- */

struct cublasLtContext;
typedef struct tfcu_ctx {
    int32_t device;
    cudaStream_t stream;
    cudaMemPool_t pool;
    int sm_count;
    int cc_major, cc_minor;
    size_t smem_optin; /* max dynamic shared memory per block after opt-in */
    /* cuBLASLt state, created on the first matmul. */
    struct cublasLtContext *lt;
    void *workspace;
    size_t workspace_size;
} tfcu_ctx;

/*
 * The context of `device`, created on first use, with that device made
 * current on the calling thread. fn names the entry for messages.
 */
tfc_status tfcu_ctx_get(int32_t device, const char *fn, tfcu_ctx **out);

/* Stream-ordered scratch memory from the pool; free with tfcu_scratch_free. */
tfc_status tfcu_scratch(tfcu_ctx *c, const char *fn, size_t nbytes, void **out);
void tfcu_scratch_free(tfcu_ctx *c, void *p);

/*
 * Scratch buffers released (stream-ordered) when the object goes out of
 * scope, for launchers that take several: set c (tfcu_ctx_get) before get.
 */
struct tfcu_scratch_set {
    tfcu_ctx *c = NULL;
    std::vector<void *> bufs;
    ~tfcu_scratch_set() {
        for (void *p : bufs) tfcu_scratch_free(c, p);
    }
    tfc_status get(const char *fn, size_t nbytes, void **out) {
        TFCU_TRY(tfcu_scratch(c, fn, nbytes ? nbytes : 1, out));
        bufs.push_back(*out);
        return TFC_OK;
    }
};

/* Blocks for a grid-stride loop over n items with `threads` per block. */
static inline unsigned tfcu_blocks(const tfcu_ctx *c, size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads, cap = (size_t)c->sm_count * 32;
    if (b > cap) b = cap;
    return b ? (unsigned)b : 1u;
}

/* ---- dtypes ---- */

const char *tfcu_dtype_name(int32_t dtype);

/* Bytes per element of a float dtype the module takes (f32 or bf16). */
static inline size_t tfcu_float_size(int32_t dtype) { return dtype == TFC_DTYPE_BF16 ? 2 : 4; }

/* A contiguous view of n elements at data, for handing a buffer to the copy, fill and map entries. */
static inline tfc_sview tfcu_flat_view(void *data, int32_t dtype, int64_t n) {
    tfc_sview v = {};
    v.data = (char *)data;
    v.dtype = (tfc_dtype)dtype;
    v.ndim = 1;
    v.shape[0] = n;
    v.strides[0] = 1;
    return v;
}

/* Call f(T{}) with T = float or bf16 for the float dtypes; error otherwise. */
template <class F> static inline tfc_status tfcu_dispatch_float(const char *fn, int32_t dtype, F &&f) {
    if (dtype == TFC_DTYPE_F32) return f(float{});
    if (dtype == TFC_DTYPE_BF16) return f(bf16{});
    return tfcu_err(TFC_ERR_DTYPE, "%s: dtype %s is not supported on CUDA (f32 or bf16)", fn, tfcu_dtype_name(dtype));
}

/* Call f(I{}) with I = int32_t or int64_t for index tensors. */
template <class F> static inline tfc_status tfcu_dispatch_index(const char *fn, int32_t dtype, F &&f) {
    if (dtype == TFC_DTYPE_I32) return f(int32_t{});
    if (dtype == TFC_DTYPE_I64) return f(int64_t{});
    return tfcu_err(TFC_ERR_DTYPE, "%s: index dtype %s is not i32 or i64", fn, tfcu_dtype_name(dtype));
}

__device__ __forceinline__ float tfcu_load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float tfcu_load(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
template <class T> __device__ __forceinline__ T tfcu_from_f(float x);
template <> __device__ __forceinline__ float tfcu_from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 tfcu_from_f<bf16>(float x) { return __float2bfloat16_rn(x); }

/* Store a gradient: overwrite, or add to what is there (TFC_GRAD_ACCUMULATE). */
template <class T> __device__ __forceinline__ void tfcu_store_grad(T *p, size_t i, float g, bool acc) {
    p[i] = tfcu_from_f<T>(acc ? tfcu_load(p, i) + g : g);
}

/* ---- reductions ---- */

__device__ __forceinline__ float tfcu_warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float tfcu_warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/*
 * Sum (or max) of x over the block, returned to every thread. blockDim.x
 * is a multiple of 32 and at most 1024; `shared` holds 32 floats. The
 * order of additions is fixed by the block shape, so results are
 * deterministic.
 */
template <bool IS_MAX> __device__ __forceinline__ float tfcu_block_reduce(float x, float *shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    x = IS_MAX ? tfcu_warp_max(x) : tfcu_warp_sum(x);
    __syncthreads(); /* shared may still be read by a previous call */
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    float r = lane < nwarps ? shared[lane] : (IS_MAX ? -INFINITY : 0.0f);
    return IS_MAX ? tfcu_warp_max(r) : tfcu_warp_sum(r);
}

/* GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its derivative. */
__device__ __forceinline__ float tfcu_gelu(float x) {
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float tfcu_gelu_grad(float x) {
    const float k = 0.7978845608028654f;
    float u = k * (x + 0.044715f * x * x * x), t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

#endif
