/*
 * Loading the CUDA backend module libtfcore-cuda.so on first use: next to
 * libtfcore.so first, then the loader's search path. The module exports one
 * symbol, tfc_backend_module_get(abi), returning its backend table; a
 * module of another TFC_BACKEND_ABI is refused with both versions named
 * (tfc_backend_check_module), as is one that sees no GPU.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "tfc_config.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const tfc_backend *g_cuda;
static char g_why[512];

static void load_module(void) {
#if !TFC_HAVE_CUDA_MODULE
    snprintf(g_why, sizeof g_why, "this libtfcore was built without the CUDA module (-Dcuda=disabled or no nvcc)");
#else
    char path[4096] = TFC_CUDA_MODULE_NAME;
    Dl_info info;
    if (dladdr((void *)&load_module, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && (size_t)(slash - info.dli_fname) + 1 + sizeof TFC_CUDA_MODULE_NAME < sizeof path)
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, TFC_CUDA_MODULE_NAME);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen(TFC_CUDA_MODULE_NAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(g_why, sizeof g_why, "cannot load the CUDA module: %s", dlerror());
        return;
    }
    tfc_backend_module_get_fn get = (tfc_backend_module_get_fn)dlsym(h, "tfc_backend_module_get");
    const tfc_backend *b = NULL;
    if (tfc_backend_check_module(get, path, &b, g_why, sizeof g_why) != TFC_OK) return;
    if (b->device_count() <= 0) {
        snprintf(g_why, sizeof g_why, "no CUDA device: %s", b->last_error());
        return;
    }
    g_cuda = b;
#endif
}

const tfc_backend *tfc_cuda_module(void) {
    pthread_once(&g_once, load_module);
    if (!g_cuda) tfc_err(TFC_ERR_DEVICE, "CUDA unavailable: %s", g_why);
    return g_cuda;
}

TFC_API int32_t tfc_cuda_available(void) { return tfc_cuda_module() != NULL; }
