/*
 * The CUDA module without a GPU: it loads, negotiates the backend ABI
 * version, fills every entry it claims, refuses what CUDA does not offer
 * with TFC_ERR_UNSUPPORTED, and reports a missing device as TFC_ERR_DEVICE
 * with a message instead of aborting. Runs on every CI machine where the
 * module is built. The module's path comes from TFC_CUDA_MODULE (set by
 * meson).
 */
#include <dlfcn.h>
#include <math.h>

#include "backend/backend.h"
#include "tfc_test.h"

TFC_TEST_MAIN

static const tfc_backend *load(uint32_t version) {
    const char *path = getenv("TFC_CUDA_MODULE");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        TFC_FAIL_AT("cannot load %s: %s", path ? path : "(TFC_CUDA_MODULE unset)", dlerror());
        return NULL;
    }
    tfc_backend_module_get_fn get = (tfc_backend_module_get_fn)dlsym(h, "tfc_backend_module_get");
    CHECK(get != NULL);
    return get ? get(version) : NULL;
}

TEST(version_negotiation) {
    CHECK(load(2) == NULL);
    CHECK(load(TFC_BACKEND_ABI + 1) == NULL);
    const tfc_backend *a = load(TFC_BACKEND_ABI);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a->struct_size == sizeof(tfc_backend));
    CHECK(a->abi_version == TFC_BACKEND_ABI);
    CHECK(strcmp(a->name, "cuda") == 0);
    CHECK(a->caps.stats_f32 == 1);
    CHECK(tfc_backend_takes(a, TFC_DTYPE_F32) && tfc_backend_takes(a, TFC_DTYPE_BF16));
    CHECK(!tfc_backend_takes(a, TFC_DTYPE_F64));
    CHECK(a->caps.gemm_dtypes == a->caps.float_dtypes);
}

TEST(every_entry_but_the_cpu_only_ones_is_filled) {
    const tfc_backend *a = load(TFC_BACKEND_ABI);
    if (!a) return;
    /* From describe to the end the table is nothing but function pointers. */
    size_t first = offsetof(tfc_backend, describe), n = (sizeof(tfc_backend) - first) / sizeof(void (*)(void));
    CHECK(n == 57);
    int missing = 0;
    for (size_t i = 0; i < n; i++) {
        void (*fp)(void);
        memcpy(&fp, (const char *)a + first + i * sizeof fp, sizeof fp);
        missing += fp == NULL;
    }
    /* CPU-only so far: reduce_scatter (max/min backward), cross_entropy_rows (the fused LM head), topk, the
       quantized-weight entries, gather and scatter (indexing), cumsum and multinomial. */
    CHECK(missing == 11);
    CHECK(a->reduce_scatter == NULL && a->cross_entropy_rows == NULL && a->topk == NULL && a->topk_backward == NULL);
    CHECK(a->quantize == NULL && a->dequantize == NULL && a->qlinear == NULL);
    CHECK(a->gather == NULL && a->scatter == NULL);
    CHECK(a->cumsum == NULL && a->multinomial == NULL);
    /* the NCCL collectives, all there */
    CHECK(a->coll_unique_id && a->coll_init && a->coll_release && a->coll_all_reduce && a->coll_broadcast &&
          a->coll_all_gather && a->coll_reduce_scatter);
    CHECK(a->native_stream != NULL);
    /* caps: the gemm fuses the bias epilogue (tfc_linear's forward is one cuBLASLt call); autocast runs attention
       on the bf16 flash kernels; the autocast LM head pads to 64 columns; bf16 GEMMs take bf16 storage. */
    CHECK(a->caps.gemm_epilogues == (1u << TFC_GEMM_EPI_BIAS));
    CHECK(a->caps.autocast_attention == TFC_DTYPE_BF16);
    CHECK(a->caps.gemm_pad_cols == 64);
    CHECK(a->caps.gemm_bf16_widen_rows == 0);
    CHECK(tfc_backend_bf16_operands(a, 1 << 20) == TFC_DTYPE_BF16);
}

TEST(what_cuda_does_not_offer_is_refused_before_the_device) {
    const tfc_backend *a = load(TFC_BACKEND_ABI);
    if (!a) return;
    float x = 0;
    tfc_sview v = {.data = (char *)&x, .dtype = TFC_DTYPE_F32, .ndim = 1, .shape = {1}, .strides = {1}};
    tfc_reduce_problem r = {.op = TFC_REDUCE_MAX, .in = v, .nkeep = 0, .out = &x};
    CHECK(a->reduce(&r) == TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "only sums") != NULL);
    tfc_gelu_problem g = {.dtype = TFC_DTYPE_F32, .n = 1, .approximate = 0, .x = &x, .y = &x};
    CHECK(a->gelu_forward(&g) == TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "erf form") != NULL);
    tfc_optim_seg seg = {.param = &x, .grad = &x, .n = 1, .dtype = TFC_DTYPE_F32, .step = 1, .lr = 0.1};
    tfc_optim_problem o = {.rule = TFC_OPTIM_RULE_SGD, .segs = &seg, .nseg = 1};
    CHECK(a->optim_step(&o) == TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "SGD") != NULL);
    o.rule = TFC_OPTIM_RULE_ADAM, o.decoupled = 1, o.amsgrad = 1;
    CHECK(a->optim_step(&o) == TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "amsgrad") != NULL);
    tfc_random_problem rp = {.dst = v};
    rp.dst.shape[0] = 2, rp.dst.strides[0] = 2;
    CHECK(a->random(&rp) == TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "non-contiguous") != NULL);
    tfc_copy_problem cp = {.dst = v, .src = v};
    cp.src.dtype = TFC_DTYPE_I32;
    CHECK(a->copy(&cp) == TFC_ERR_UNSUPPORTED);
    CHECK(strstr(a->last_error(), "f32 and bf16") != NULL);
    /* Empty work is a no-op that never needs a device. */
    tfc_fill_problem f = {.dst = v, .value = 1.0};
    f.dst.shape[0] = 0;
    CHECK(a->fill(&f) == TFC_OK);
    tfc_map_problem m = {.op = TFC_MAP_ADD, .out = &f.dst, .a = &f.dst, .b = &f.dst};
    CHECK(a->map(&m) == TFC_OK);
    tfc_rope_problem rope = {.dtype = TFC_DTYPE_F32, .B = 0, .H = 2, .Tn = 3, .D = 4};
    CHECK(a->rope_forward(&rope) == TFC_OK && a->rope_backward(&rope) == TFC_OK);
    tfc_swiglu_problem sw = {.dtype = TFC_DTYPE_F32, .rows = 0, .cols = 4, .gate = &x, .up = &x, .out = &x};
    CHECK(a->swiglu_forward(&sw) == TFC_OK && a->swiglu_backward(&sw) == TFC_OK);
}

TEST(missing_device_is_an_error_not_an_abort) {
    const tfc_backend *a = load(TFC_BACKEND_ABI);
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
        float x = 0;
        tfc_fill_problem f = {
            .dst = {.data = (char *)&x, .dtype = TFC_DTYPE_F32, .ndim = 1, .shape = {1}, .strides = {1}}, .value = 1.0};
        CHECK(a->fill(&f) == TFC_ERR_DEVICE);
    } else {
        CHECK(a->alloc(n, 16, &p) == TFC_ERR_DEVICE); /* one past the last device */
        CHECK(strstr(a->last_error(), "does not exist") != NULL);
    }
}

TEST(library_reports_availability) {
    /* Through libtfcore's loader (objects linked in; module via LD_LIBRARY_PATH). */
    int32_t avail = tfc_cuda_available();
    const tfc_backend *a = load(TFC_BACKEND_ABI);
    if (!a) return;
    CHECK(avail == (a->device_count() > 0));
    if (!avail) CHECK(strstr(tfc_last_error(), "no CUDA device") != NULL);
}
