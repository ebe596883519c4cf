/*
 * How lib/dist hands CUDA tensors to the CUDA backend's coll_* entries
 * (lib/dist/nccl.c, collectives.c), on any machine: the stand-in backend
 * (standin_backend.h: the CPU's table serving "cuda", tensors in host
 * memory) with coll_* entries that record what they are asked and, on one
 * rank, copy send to recv as NCCL would. It tests the dispatch — one
 * communicator made from one id, the problem each collective passes, views
 * staged and written back, the refusals — never NCCL itself: the device
 * check runs tests/cuda/test_cuda_dist.c on a GPU.
 */
#include "tfc_test.h"

#include <string.h>

#include "standin_backend.h"

TFC_TEST_MAIN

static int n_id, n_init, n_release, n_calls;
static tfc_coll_problem last;
static int32_t init_rank = -1, init_size = -1, init_device = -1;
static unsigned char id_seen[TFC_COLL_ID_BYTES];
static int comm_token;

static tfc_status fake_id(void *id) {
    n_id++;
    memset(id, 0x5a, TFC_COLL_ID_BYTES);
    return TFC_OK;
}
static tfc_status fake_init(const void *id, int32_t rank, int32_t size, int32_t device, void **comm) {
    n_init++;
    memcpy(id_seen, id, TFC_COLL_ID_BYTES);
    init_rank = rank, init_size = size, init_device = device;
    *comm = &comm_token;
    return TFC_OK;
}
static void fake_release(void *comm) { n_release += comm == &comm_token; }
/* One rank: every collective is send -> recv. */
static tfc_status fake_copy(const tfc_coll_problem *p) {
    n_calls++;
    last = *p;
    size_t es = tfc_dtype_size(p->dtype);
    if (p->recv != p->send) memcpy(p->recv, p->send, (size_t)p->count * es);
    return TFC_OK;
}

static tfc_tensor *iota(const int64_t *d, int nd, tfc_device_type dev) {
    tfc_tensor *t = NULL, *a = NULL;
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    CHECK_OK(tfc_tensor_arange(0, (double)n, 1, TFC_DTYPE_F32, &a));
    tfc_tensor *v = NULL;
    CHECK_OK(tfc_reshape(NULL, a, d, nd, &v));
    CHECK_OK(tfc_tensor_to_device(v, dev, 0, &t));
    tfc_tensor_release(a);
    tfc_tensor_release(v);
    return t;
}

TEST(cuda_tensors_without_nccl_are_refused_clearly) {
    standin_install(); /* the CPU's table: no coll_* entries */
    tfc_comm *c = NULL;
    CHECK_OK(tfc_comm_init_single(&c));
    int64_t d[1] = {4};
    tfc_tensor *t = iota(d, 1, TFC_DEVICE_CUDA);
    CHECK_ERR(tfc_all_reduce(c, t, TFC_COMM_SUM), TFC_ERR_UNSUPPORTED, "coll_init is not implemented on cuda");
    tfc_tensor_release(t);
    tfc_comm_release(c);
    standin_remove();
}

TEST(collectives_on_cuda_tensors_reach_the_coll_entries) {
    tfc_backend *b = standin_install();
    b->coll_unique_id = fake_id;
    b->coll_init = fake_init;
    b->coll_release = fake_release;
    b->coll_all_reduce = b->coll_broadcast = b->coll_all_gather = b->coll_reduce_scatter = fake_copy;
    n_id = n_init = n_release = n_calls = 0;
    tfc_comm *c = NULL;
    CHECK_OK(tfc_comm_init_single(&c));
    int64_t d[2] = {3, 4};
    tfc_tensor *t = iota(d, 2, TFC_DEVICE_CUDA), *want = iota(d, 2, TFC_DEVICE_CPU);
    CHECK_OK(tfc_all_reduce(c, t, TFC_COMM_AVG));
    CHECK(n_id == 1 && n_init == 1 && init_rank == 0 && init_size == 1 && init_device == 0);
    CHECK(id_seen[0] == 0x5a && id_seen[TFC_COLL_ID_BYTES - 1] == 0x5a);
    CHECK(n_calls == 1 && last.avg == 1 && last.count == 12 && last.dtype == TFC_DTYPE_F32 && last.comm == &comm_token);
    CHECK(last.send == last.recv && last.send == tfc_tensor_data(t)); /* contiguous: in place, no staging */
    CHECK_OK(tfc_broadcast(c, t, 0));
    CHECK(n_calls == 2 && last.root == 0 && n_init == 1); /* the communicator is made once */
    /* a transposed view is staged: the entry sees a contiguous copy, the result lands in the view */
    tfc_tensor *tt = NULL;
    CHECK_OK(tfc_transpose(NULL, t, 0, 1, &tt));
    CHECK_OK(tfc_all_reduce(c, tt, TFC_COMM_SUM));
    CHECK(n_calls == 3 && last.avg == 0 && last.send != tfc_tensor_data(t));
    const float *x = tfc_tensor_data(t), *y = tfc_tensor_data(want);
    for (int i = 0; i < 12; i++) CHECK(x[i] == y[i]);
    /* all_gather and reduce_scatter pass the per-rank count */
    tfc_tensor *out = iota(d, 2, TFC_DEVICE_CUDA);
    CHECK_OK(tfc_all_gather(c, t, out));
    CHECK(n_calls == 4 && last.count == 12 && last.recv == tfc_tensor_data(out));
    CHECK_OK(tfc_reduce_scatter(c, t, out, TFC_COMM_SUM));
    CHECK(n_calls == 5 && last.count == 12);
    /* CPU and CUDA in one call: refused before anything moves */
    CHECK_ERR(tfc_all_gather(c, t, want), TFC_ERR_DEVICE, "tfc_all_gather");
    CHECK(n_calls == 5);
    /* bf16 travels as bf16 (NCCL has the type): no staging into f32 */
    tfc_tensor *h = NULL;
    CHECK_OK(tfc_cast(NULL, t, TFC_DTYPE_BF16, &h));
    CHECK_OK(tfc_all_reduce(c, h, TFC_COMM_SUM));
    CHECK(n_calls == 6 && last.dtype == TFC_DTYPE_BF16 && last.send == tfc_tensor_data(h));
    tfc_tensor_release(h);
    tfc_tensor_release(out);
    tfc_tensor_release(tt);
    tfc_tensor_release(t);
    tfc_tensor_release(want);
    tfc_comm_release(c);
    CHECK(n_release == 1);
    standin_remove();
}

TEST(a_failing_id_is_every_ranks_error) {
    tfc_backend *b = standin_install();
    b->coll_unique_id = NULL; /* what a module without NCCL looks like */
    b->coll_init = fake_init;
    tfc_comm *c = NULL;
    CHECK_OK(tfc_comm_init_single(&c));
    int64_t d[1] = {2};
    tfc_tensor *t = iota(d, 1, TFC_DEVICE_CUDA);
    CHECK_ERR(tfc_broadcast(c, t, 0), TFC_ERR_UNSUPPORTED, "tfc_broadcast");
    tfc_tensor_release(t);
    tfc_comm_release(c);
    standin_remove();
}
