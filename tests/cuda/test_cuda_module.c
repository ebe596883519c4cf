/*
 * The CUDA module without a GPU: it loads, negotiates its API version,
 * fills every table entry, validates arguments before touching the
 * device, and reports a missing device as TFC_ERR_DEVICE with a message
 * instead of aborting. Runs on every CI machine where the module is built.
 * The module's path comes from TFC_CUDA_MODULE (set by meson).
 */
#include <dlfcn.h>
#include <math.h>

#include "device/cuda_api.h"
#include "tfc_test.h"

TFC_TEST_MAIN

static const tfc_cuda_api *load(uint32_t version) {
    const char *path = getenv("TFC_CUDA_MODULE");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        TFC_FAIL_AT("cannot load %s: %s", path ? path : "(TFC_CUDA_MODULE unset)", dlerror());
        return NULL;
    }
    tfc_cuda_module_get_fn get = (tfc_cuda_module_get_fn)dlsym(h, "tfc_cuda_module_get");
    CHECK(get != NULL);
    return get ? get(version) : NULL;
}

TEST(version_negotiation) {
    CHECK(load(1) == NULL);
    CHECK(load(TFC_CUDA_API_VERSION + 1) == NULL);
    const tfc_cuda_api *a = load(TFC_CUDA_API_VERSION);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a->struct_size == sizeof(tfc_cuda_api));
    CHECK(a->api_version == TFC_CUDA_API_VERSION);
}

TEST(every_entry_is_filled) {
    const tfc_cuda_api *a = load(TFC_CUDA_API_VERSION);
    if (!a) return;
    /* After the two uint32 fields the table is nothing but function pointers. */
    size_t first = offsetof(tfc_cuda_api, describe), n = (sizeof(tfc_cuda_api) - first) / sizeof(void (*)(void));
    CHECK(n == 33); /* 8 memory entries + 25 kernels */
    for (size_t i = 0; i < n; i++) {
        void (*fp)(void);
        memcpy(&fp, (const char *)a + first + i * sizeof fp, sizeof fp);
        if (!fp) TFC_FAIL_AT("table entry %zu is NULL", i);
    }
}

TEST(arguments_are_checked_before_the_device) {
    const tfc_cuda_api *a = load(TFC_CUDA_API_VERSION);
    if (!a) return;
    int x;
    CHECK(a->binary(0, 42, TFC_DTYPE_F32, &x, &x, &x, 1) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "op 42") != NULL);
    CHECK(a->unary(0, -1, TFC_DTYPE_F32, &x, &x, 1) == TFC_ERR_INVALID_ARG);
    CHECK(a->reduce(0, 3, TFC_DTYPE_F32, &x, &x, 1, 1, 1) == TFC_ERR_INVALID_ARG);
    CHECK(a->memcpy(0, &x, &x, 4, 3) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "kind 3") != NULL);
    CHECK(a->dropout(0, TFC_DTYPE_F32, &x, &x, 1, -0.5f, 1, 0) == TFC_ERR_INVALID_ARG);
    CHECK(a->attention_forward(0, TFC_DTYPE_F32, &x, &x, &x, &x, NULL, 1, 1, 1, 1, 200, 64, 1.0f, 0) ==
          TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "D 200") != NULL);
    tfc_cuda_matmul_desc m = {4, TFC_DTYPE_F32, 1, 1, 1, 1, 0, 0, &x, &x, &x, NULL, 0, 0, 0, 1.0f, 0.0f, 0};
    CHECK(a->matmul(0, &m) == TFC_ERR_VERSION);
    m.struct_size = sizeof m, m.dtype = TFC_DTYPE_I64;
    CHECK(a->matmul(0, &m) == TFC_ERR_DTYPE);
    CHECK(strstr(a->last_error(), "i64") != NULL);
    m.dtype = TFC_DTYPE_F32, m.epilogue = TFC_CUDA_EPI_BIAS;
    CHECK(a->matmul(0, &m) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "bias is NULL") != NULL);
    tfc_cuda_adamw_desc o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o, o.count = 1, o.step = 0;
    CHECK(a->adamw(0, &o) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "step is 0") != NULL);
    float norm;
    CHECK(a->grad_norm(0, TFC_DTYPE_F32, NULL, NULL, 0, 0.0f, &norm, &norm) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "max_norm") != NULL);
    CHECK(a->random_normal(0, TFC_DTYPE_F32, &x, 1, 1, 0, 0.0, INFINITY) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "must be finite") != NULL);
    tfc_cuda_strided L = {9, {0}, {0}, {0}};
    CHECK(a->copy_strided(0, TFC_DTYPE_F32, &x, &x, &L) == TFC_ERR_INVALID_ARG);
    CHECK(strstr(a->last_error(), "ndim 9") != NULL);
    L.ndim = 1, L.shape[0] = 1;
    CHECK(a->copy_strided(0, 99, &x, &x, &L) == TFC_ERR_DTYPE);
    /* Empty work is a no-op that never needs a device. */
    CHECK(a->fill(0, TFC_DTYPE_F32, NULL, 0, 1.0) == TFC_OK);
    CHECK(a->binary(0, TFC_CUDA_ADD, TFC_DTYPE_F32, NULL, NULL, NULL, 0) == TFC_OK);
}

TEST(missing_device_is_an_error_not_an_abort) {
    const tfc_cuda_api *a = load(TFC_CUDA_API_VERSION);
    if (!a) return;
    int32_t n = a->device_count();
    CHECK(n >= 0);
    CHECK(a->describe() != NULL && a->describe()[0] != '\0');
    void *p = (void *)&n;
    if (n == 0) {
        printf("(no device: %s)\n", a->describe());
        CHECK(strncmp(a->describe(), "no CUDA device", 14) == 0);
        CHECK(a->alloc(0, 16, &p) == TFC_ERR_DEVICE);
        CHECK(p == (void *)&n); /* out-param untouched */
        CHECK(a->last_error()[0] != '\0');
        CHECK(a->synchronize(0) == TFC_ERR_DEVICE);
        CHECK(a->fill(0, TFC_DTYPE_F32, &n, 1, 1.0) == TFC_ERR_DEVICE);
    } else {
        CHECK(a->alloc(n, 16, &p) == TFC_ERR_DEVICE); /* one past the last device */
        CHECK(strstr(a->last_error(), "does not exist") != NULL);
    }
}

TEST(library_reports_availability) {
    /* Through libtfcore's loader (objects linked in; module via LD_LIBRARY_PATH). */
    int32_t avail = tfc_cuda_available();
    const tfc_cuda_api *a = load(TFC_CUDA_API_VERSION);
    if (!a) return;
    CHECK(avail == (a->device_count() > 0));
    if (!avail) CHECK(strstr(tfc_last_error(), "no CUDA device") != NULL);
}
