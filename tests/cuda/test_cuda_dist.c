/*
 * Collectives on CUDA tensors through NCCL (the CUDA module's coll_*
 * entries, lib/dist/nccl.c), on one rank: what the GPU device check
 * (tests/cuda/device-check.sh) can run on one GPU. With one rank every
 * collective is a copy, so the result must equal the input exactly —
 * which still takes the whole path: the NCCL communicator made from a
 * unique id, the call on the module's stream, staging of views on the
 * device, bf16 and f64 as NCCL types. Exit 77 (skipped) without a GPU.
 */
#include "tfc_test.h"

#define main tfc_test_main_
TFC_TEST_MAIN
#undef main

static tfc_comm *C;

/* A CPU tensor of dt with element i = (i % 17) - 8 (exact in bf16), and its copy on cuda:0. */
static tfc_tensor *host(const int64_t *d, int nd, tfc_dtype dt) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_empty(d, nd, TFC_DTYPE_F64, &t));
    double *p = tfc_tensor_data(t);
    for (int64_t i = 0; i < tfc_tensor_numel(t); i++) p[i] = (double)(i % 17) - 8;
    tfc_tensor *c = NULL;
    CHECK_OK(tfc_cast(NULL, t, dt, &c));
    tfc_tensor_release(t);
    return c;
}

static tfc_tensor *on_gpu(const tfc_tensor *t) {
    tfc_tensor *g = NULL;
    CHECK_OK(tfc_tensor_to_device(t, TFC_DEVICE_CUDA, 0, &g));
    return g;
}

/* max |a - b| over the elements of a CUDA tensor a and a CPU tensor b (both as f64). */
static double diff(const tfc_tensor *a, const tfc_tensor *b) {
    tfc_tensor *ah = NULL, *a64 = NULL, *b64 = NULL;
    double worst = INFINITY;
    if (tfc_tensor_to_device(a, TFC_DEVICE_CPU, 0, &ah) == TFC_OK &&
        tfc_cast(NULL, ah, TFC_DTYPE_F64, &a64) == TFC_OK && tfc_cast(NULL, b, TFC_DTYPE_F64, &b64) == TFC_OK &&
        tfc_tensor_numel(a64) == tfc_tensor_numel(b64)) {
        worst = 0;
        const double *x = tfc_tensor_data(a64), *y = tfc_tensor_data(b64);
        for (int64_t i = 0; i < tfc_tensor_numel(a64); i++) worst = fmax(worst, fabs(x[i] - y[i]));
    }
    tfc_tensor_release(ah);
    tfc_tensor_release(a64);
    tfc_tensor_release(b64);
    return worst;
}

TEST(all_reduce_and_broadcast_every_dtype) {
    const tfc_dtype dts[] = {TFC_DTYPE_F32, TFC_DTYPE_F64, TFC_DTYPE_BF16, TFC_DTYPE_I32, TFC_DTYPE_I64};
    const int64_t sizes[] = {0, 1, 1031, 1 << 20};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            tfc_tensor *h = host(&sizes[k], 1, dts[d]), *g = on_gpu(h);
            CHECK_OK(tfc_all_reduce(C, g, TFC_COMM_SUM));
            CHECK(diff(g, h) == 0);
            if (dts[d] != TFC_DTYPE_I32 && dts[d] != TFC_DTYPE_I64) {
                CHECK_OK(tfc_all_reduce(C, g, TFC_COMM_AVG));
                CHECK(diff(g, h) == 0);
            }
            CHECK_OK(tfc_broadcast(C, g, 0));
            CHECK(diff(g, h) == 0);
            tfc_tensor_release(g);
            tfc_tensor_release(h);
        }
}

TEST(gather_scatter_and_views_on_the_device) {
    int64_t dims[2] = {6, 5};
    tfc_tensor *h = host(dims, 2, TFC_DTYPE_F32), *g = on_gpu(h), *out = NULL, *gt = NULL, *ht = NULL;
    CHECK_OK(tfc_tensor_to_device(h, TFC_DEVICE_CUDA, 0, &out));
    CHECK_OK(tfc_tensor_fill(out, 0.0));
    CHECK_OK(tfc_all_gather(C, g, out)); /* one rank: out = in */
    CHECK(diff(out, h) == 0);
    CHECK_OK(tfc_tensor_fill(out, 0.0));
    CHECK_OK(tfc_reduce_scatter(C, g, out, TFC_COMM_SUM));
    CHECK(diff(out, h) == 0);
    /* a transposed view is staged through a contiguous buffer on the device and written back */
    CHECK_OK(tfc_transpose(NULL, g, 0, 1, &gt));
    CHECK_OK(tfc_transpose(NULL, h, 0, 1, &ht));
    CHECK_OK(tfc_all_reduce(C, gt, TFC_COMM_SUM));
    CHECK(diff(gt, ht) == 0);
    /* in on the GPU, out on the CPU: refused before any communication */
    CHECK_ERR(tfc_all_gather(C, g, h), TFC_ERR_DEVICE, "tfc_all_gather");
    tfc_tensor_release(gt);
    tfc_tensor_release(ht);
    tfc_tensor_release(out);
    tfc_tensor_release(g);
    tfc_tensor_release(h);
}

int main(int argc, char **argv) {
    /* The names need no device: the device check lists them to run each test in its own process. */
    if (tfc_test_listing(argc, argv)) return tfc_test_main_(argc, argv);
    if (!tfc_cuda_available()) {
        const char *why = tfc_last_error();
        const char *tail = strstr(why, "no CUDA device");
        if (tail) {
            printf("%s\n", tail);
            return 77;
        }
        printf("FAIL: %s\n", why);
        return 1;
    }
    if (tfc_comm_init_single(&C) != TFC_OK) return 1;
    int rc = tfc_test_main_(argc, argv);
    tfc_comm_release(C);
    return rc;
}
