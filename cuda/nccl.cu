/*
 * Collectives on device memory through NCCL (the backend table's coll_*
 * entries; lib/dist calls them for CUDA tensors). libnccl.so.2 is opened
 * with dlopen on the first use, not linked: the module, and every
 * single-GPU program, loads on machines without NCCL, and asking for a
 * collective there is a clear TFC_ERR_UNSUPPORTED.
 *
 * Each call is enqueued on the device context's stream (the stream every
 * other kernel of the module uses, so it follows them in order) and waited
 * for before returning.
 */
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.cuh"
#include "entries.h"

static_assert(sizeof(ncclUniqueId) == TFC_COLL_ID_BYTES, "TFC_COLL_ID_BYTES must hold an ncclUniqueId");

namespace {

struct nccl_api {
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    const char *(*error_string)(ncclResult_t);
};

pthread_once_t g_once = PTHREAD_ONCE_INIT;
nccl_api g_api;
int g_loaded;
char g_why[512];

template <class F> void resolve(void *h, const char *name, F *out) { *(void **)out = dlsym(h, name); }

void load(void) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(g_why, sizeof g_why, "NCCL is not installed (cannot load libnccl.so.2: %s)", dlerror());
        return;
    }
    resolve(h, "ncclGetUniqueId", &g_api.get_unique_id);
    resolve(h, "ncclCommInitRank", &g_api.comm_init_rank);
    resolve(h, "ncclCommDestroy", &g_api.comm_destroy);
    resolve(h, "ncclAllReduce", &g_api.all_reduce);
    resolve(h, "ncclBroadcast", &g_api.broadcast);
    resolve(h, "ncclAllGather", &g_api.all_gather);
    resolve(h, "ncclReduceScatter", &g_api.reduce_scatter);
    resolve(h, "ncclGetErrorString", &g_api.error_string);
    if (!g_api.get_unique_id || !g_api.comm_init_rank || !g_api.comm_destroy || !g_api.all_reduce || !g_api.broadcast ||
        !g_api.all_gather || !g_api.reduce_scatter || !g_api.error_string) {
        snprintf(g_why, sizeof g_why, "libnccl.so.2 lacks a function this module needs (NCCL >= 2.10 is required)");
        return;
    }
    g_loaded = 1;
}

tfc_status api(const char *fn) {
    pthread_once(&g_once, load);
    return g_loaded ? TFC_OK : tfcu_err(TFC_ERR_UNSUPPORTED, "%s: %s", fn, g_why);
}

tfc_status check(ncclResult_t r, const char *fn, const char *what) {
    if (r == ncclSuccess) return TFC_OK;
    return tfcu_err(TFC_ERR_DEVICE, "%s: %s failed: %s (NCCL error %d)", fn, what, g_api.error_string(r), (int)r);
}

tfc_status nccl_type(const char *fn, int32_t dtype, ncclDataType_t *t) {
    switch (dtype) {
    case TFC_DTYPE_F32: *t = ncclFloat32; return TFC_OK;
    case TFC_DTYPE_F64: *t = ncclFloat64; return TFC_OK;
    case TFC_DTYPE_BF16: *t = ncclBfloat16; return TFC_OK;
    case TFC_DTYPE_F16: *t = ncclFloat16; return TFC_OK;
    case TFC_DTYPE_I32: *t = ncclInt32; return TFC_OK;
    case TFC_DTYPE_I64: *t = ncclInt64; return TFC_OK;
    default: return tfcu_err(TFC_ERR_DTYPE, "%s: NCCL has no type for dtype %s", fn, tfcu_dtype_name(dtype));
    }
}

/* The problem's NCCL type and the device's stream, after the common checks. */
tfc_status prepare(const char *fn, const tfc_coll_problem *p, ncclDataType_t *t, tfcu_ctx **c) {
    TFCU_TRY(api(fn));
    TFCU_NOT_NULL(fn, p);
    if (!p->comm) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: no communicator", fn);
    if (p->count < 0) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: count is %lld", fn, (long long)p->count);
    TFCU_TRY(nccl_type(fn, p->dtype, t));
    return tfcu_ctx_get(p->device, fn, c);
}

tfc_status finish(const char *fn, tfcu_ctx *c, ncclResult_t r, const char *what) {
    TFCU_TRY(check(r, fn, what));
    return tfcu_cuda(cudaStreamSynchronize(c->stream), fn, what);
}

} // namespace

tfc_status tfcu_coll_unique_id(void *id) {
    const char *fn = "coll_unique_id";
    TFCU_TRY(api(fn));
    TFCU_NOT_NULL(fn, id);
    ncclUniqueId u;
    TFCU_TRY(check(g_api.get_unique_id(&u), fn, "ncclGetUniqueId"));
    memcpy(id, &u, sizeof u);
    return TFC_OK;
}

tfc_status tfcu_coll_init(const void *id, int32_t rank, int32_t size, int32_t device, void **comm) {
    const char *fn = "coll_init";
    TFCU_TRY(api(fn));
    TFCU_NOT_NULL(fn, id);
    TFCU_NOT_NULL(fn, comm);
    tfcu_ctx *c;
    TFCU_TRY(tfcu_ctx_get(device, fn, &c)); /* makes device current: the communicator is bound to it */
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclComm_t nc = NULL;
    TFCU_TRY(check(g_api.comm_init_rank(&nc, size, u, rank), fn, "ncclCommInitRank"));
    *comm = nc;
    return TFC_OK;
}

void tfcu_coll_release(void *comm) {
    if (comm && g_loaded) (void)g_api.comm_destroy((ncclComm_t)comm);
}

tfc_status tfcu_coll_all_reduce(const tfc_coll_problem *p) {
    const char *fn = "coll_all_reduce";
    ncclDataType_t t{}; /* set by prepare; initialised so GCC sees no uninitialised use */
    tfcu_ctx *c;
    TFCU_TRY(prepare(fn, p, &t, &c));
    return finish(fn, c,
                  g_api.all_reduce(p->send, p->recv, (size_t)p->count, t, p->avg ? ncclAvg : ncclSum,
                                   (ncclComm_t)p->comm, c->stream),
                  "ncclAllReduce");
}

tfc_status tfcu_coll_broadcast(const tfc_coll_problem *p) {
    const char *fn = "coll_broadcast";
    ncclDataType_t t{}; /* set by prepare; initialised so GCC sees no uninitialised use */
    tfcu_ctx *c;
    TFCU_TRY(prepare(fn, p, &t, &c));
    return finish(fn, c,
                  g_api.broadcast(p->send, p->recv, (size_t)p->count, t, p->root, (ncclComm_t)p->comm, c->stream),
                  "ncclBroadcast");
}

tfc_status tfcu_coll_all_gather(const tfc_coll_problem *p) {
    const char *fn = "coll_all_gather";
    ncclDataType_t t{}; /* set by prepare; initialised so GCC sees no uninitialised use */
    tfcu_ctx *c;
    TFCU_TRY(prepare(fn, p, &t, &c));
    return finish(fn, c, g_api.all_gather(p->send, p->recv, (size_t)p->count, t, (ncclComm_t)p->comm, c->stream),
                  "ncclAllGather");
}

tfc_status tfcu_coll_reduce_scatter(const tfc_coll_problem *p) {
    const char *fn = "coll_reduce_scatter";
    ncclDataType_t t{}; /* set by prepare; initialised so GCC sees no uninitialised use */
    tfcu_ctx *c;
    TFCU_TRY(prepare(fn, p, &t, &c));
    return finish(fn, c,
                  g_api.reduce_scatter(p->send, p->recv, (size_t)p->count, t, p->avg ? ncclAvg : ncclSum,
                                       (ncclComm_t)p->comm, c->stream),
                  "ncclReduceScatter");
}
