/* Memory on CPU or CUDA, and the lazy loading of the CUDA module. */
#include "device/device.h"

#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "tfc_config.h"

static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;
static const tfc_cuda_api *g_cuda;
static char g_cuda_why[512];

static void load_cuda_module(void) {
#if !TFC_HAVE_CUDA_MODULE
    snprintf(g_cuda_why, sizeof g_cuda_why, "this libtfcore was built without the CUDA module (-Dcuda=disabled or no nvcc)");
#else
    /* Next to libtfcore.so first, then the loader's search path. */
    char path[4096] = TFC_CUDA_MODULE_NAME;
    Dl_info info;
    if (dladdr((void *)&load_cuda_module, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && (size_t)(slash - info.dli_fname) + 1 + sizeof TFC_CUDA_MODULE_NAME < sizeof path)
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                     TFC_CUDA_MODULE_NAME);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen(TFC_CUDA_MODULE_NAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "cannot load the CUDA module: %s", dlerror());
        return;
    }
    tfc_cuda_module_get_fn get = (tfc_cuda_module_get_fn)dlsym(h, "tfc_cuda_module_get");
    const tfc_cuda_api *api = get ? get(TFC_CUDA_API_VERSION) : NULL;
    if (!api || api->api_version != TFC_CUDA_API_VERSION) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "the CUDA module %s does not offer API version %d", path,
                 TFC_CUDA_API_VERSION);
        return;
    }
    if (api->device_count() <= 0) {
        snprintf(g_cuda_why, sizeof g_cuda_why, "no CUDA device: %s", api->last_error());
        return;
    }
    g_cuda = api;
#endif
}

const tfc_cuda_api *tfc_cuda(void) {
    pthread_once(&g_cuda_once, load_cuda_module);
    if (!g_cuda) tfc_err(TFC_ERR_DEVICE, "CUDA unavailable: %s", g_cuda_why);
    return g_cuda;
}

TFC_API int32_t tfc_cuda_available(void) { return tfc_cuda() != NULL; }

static tfc_status bad_device(tfc_device_type dev) {
    return tfc_err(TFC_ERR_DEVICE, "unknown device type %d", (int)dev);
}

tfc_status tfc_device_alloc(tfc_device_type dev, int32_t index, size_t nbytes, void **out) {
    if (dev == TFC_DEVICE_CPU) {
        void *p = tfc_host_alloc(nbytes);
        if (!p) return tfc_err(TFC_ERR_OOM, "out of memory allocating %zu bytes", nbytes);
        *out = p;
        return TFC_OK;
    }
    if (dev == TFC_DEVICE_CUDA) {
        const tfc_cuda_api *c = tfc_cuda();
        if (!c) return TFC_ERR_DEVICE;
        tfc_status s = c->alloc(index, nbytes, out);
        return s == TFC_OK ? s : tfc_err(s, "cuda:%d: allocating %zu bytes: %s", (int)index, nbytes, c->last_error());
    }
    return bad_device(dev);
}

void tfc_device_free(tfc_device_type dev, int32_t index, void *p, size_t nbytes) {
    if (dev == TFC_DEVICE_CPU) tfc_host_free(p, nbytes);
    else if (dev == TFC_DEVICE_CUDA && g_cuda) g_cuda->free(index, p);
}

tfc_status tfc_device_memset0(tfc_device_type dev, int32_t index, void *p, size_t nbytes) {
    if (dev == TFC_DEVICE_CPU) {
        memset(p, 0, nbytes);
        return TFC_OK;
    }
    if (dev == TFC_DEVICE_CUDA) {
        const tfc_cuda_api *c = tfc_cuda();
        if (!c) return TFC_ERR_DEVICE;
        tfc_status s = c->memset0(index, p, nbytes);
        return s == TFC_OK ? s : tfc_err(s, "cuda:%d: memset: %s", (int)index, c->last_error());
    }
    return bad_device(dev);
}

tfc_status tfc_device_memcpy(tfc_device_type dst_dev, int32_t dst_index, void *dst, tfc_device_type src_dev,
                             int32_t src_index, const void *src, size_t nbytes) {
    if (dst_dev == TFC_DEVICE_CPU && src_dev == TFC_DEVICE_CPU) {
        memmove(dst, src, nbytes);
        return TFC_OK;
    }
    const tfc_cuda_api *c = tfc_cuda();
    if (!c) return TFC_ERR_DEVICE;
    int32_t dev = -1, kind = -1;
    if (dst_dev == TFC_DEVICE_CUDA && src_dev == TFC_DEVICE_CPU) dev = dst_index, kind = 0;
    else if (dst_dev == TFC_DEVICE_CPU && src_dev == TFC_DEVICE_CUDA) dev = src_index, kind = 1;
    else if (dst_dev == TFC_DEVICE_CUDA && src_dev == TFC_DEVICE_CUDA && dst_index == src_index) dev = dst_index, kind = 2;
    if (kind >= 0) {
        tfc_status s = c->memcpy(dev, dst, src, nbytes, kind);
        return s == TFC_OK ? s : tfc_err(s, "cuda:%d: copying %zu bytes: %s", (int)dev, nbytes, c->last_error());
    }
    return tfc_err(TFC_ERR_UNSUPPORTED, "copy between CUDA devices %d and %d is not supported", (int)src_index,
                   (int)dst_index);
}
