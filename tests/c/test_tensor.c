/* Tensor creation, queries, copies, wrapping, random streams, bad input. */
#include "tfc_test.h"

#include "core/rng.h"

TFC_TEST_MAIN

TEST(from_data_and_copy_out) {
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_from_data(data, dims, 2, TFC_DTYPE_F32, &t));
    CHECK(tfc_tensor_ndim(t) == 2 && tfc_tensor_numel(t) == 6);
    int64_t got[8], st[8];
    CHECK_OK(tfc_tensor_shape(t, got, 8));
    CHECK(got[0] == 2 && got[1] == 3);
    CHECK_OK(tfc_tensor_strides(t, st, 8));
    CHECK(st[0] == 3 && st[1] == 1);
    CHECK(tfc_tensor_is_contiguous(t));
    float out[6] = {0};
    CHECK_OK(tfc_tensor_copy_to_host(t, out, sizeof out));
    CHECK(memcmp(out, data, sizeof out) == 0);
    CHECK_ERR(tfc_tensor_copy_to_host(t, out, 8), TFC_ERR_BUFFER_TOO_SMALL, "[2,3]");
    CHECK_ERR(tfc_tensor_shape(t, got, 1), TFC_ERR_BUFFER_TOO_SMALL, "tfc_tensor_shape");
    tfc_tensor_release(t);
}

TEST(scalar_tensor) {
    double v = 3.5, item = 0;
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_from_data(&v, NULL, 0, TFC_DTYPE_F64, &t));
    CHECK(tfc_tensor_ndim(t) == 0 && tfc_tensor_numel(t) == 1);
    CHECK_OK(tfc_tensor_item(t, &item));
    CHECK(item == 3.5);
    tfc_tensor_release(t);
}

TEST(fills_and_arange) {
    int64_t dims[1] = {5};
    tfc_tensor *z = NULL, *o = NULL, *f = NULL, *a = NULL;
    CHECK_OK(tfc_tensor_zeros(dims, 1, TFC_DTYPE_F64, &z));
    CHECK_OK(tfc_tensor_ones(dims, 1, TFC_DTYPE_I32, &o));
    CHECK_OK(tfc_tensor_full(dims, 1, TFC_DTYPE_BF16, 2.5, &f));
    CHECK_OK(tfc_tensor_arange(0, 1, 0.25, TFC_DTYPE_F32, &a));
    double zd[5];
    int32_t oi[5];
    uint16_t fb[5];
    float av[4];
    CHECK_OK(tfc_tensor_copy_to_host(z, zd, sizeof zd));
    CHECK_OK(tfc_tensor_copy_to_host(o, oi, sizeof oi));
    CHECK_OK(tfc_tensor_copy_to_host(f, fb, sizeof fb));
    CHECK(tfc_tensor_numel(a) == 4);
    CHECK_OK(tfc_tensor_copy_to_host(a, av, sizeof av));
    for (int i = 0; i < 5; i++) CHECK(zd[i] == 0 && oi[i] == 1 && fb[i] == 0x4020);
    CHECK(av[0] == 0 && av[3] == 0.75f);
    CHECK_ERR(tfc_tensor_arange(0, 1, 0, TFC_DTYPE_F32, &a), TFC_ERR_INVALID_ARG, "step");
    tfc_tensor_release(z);
    tfc_tensor_release(o);
    tfc_tensor_release(f);
    tfc_tensor_release(a);
}

static int deleted;
static void count_delete(void *data, void *ctx) {
    (void)data;
    deleted += *(int *)ctx;
}

TEST(wrap_calls_deleter_once_at_last_release) {
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    int64_t dims[2] = {3, 2}, strides[2] = {4, 2}; /* every other element of rows of 4 */
    int one = 1;
    tfc_tensor *t = NULL;
    deleted = 0;
    CHECK_OK(tfc_tensor_wrap(buf, dims, strides, 2, TFC_DTYPE_F32, count_delete, &one, &t));
    CHECK(tfc_tensor_data(t) == buf);
    CHECK(!tfc_tensor_is_contiguous(t));
    float out[6];
    CHECK_OK(tfc_tensor_copy_to_host(t, out, sizeof out));
    CHECK(out[0] == 0 && out[1] == 2 && out[2] == 4 && out[5] == 10);
    tfc_tensor *c = NULL;
    CHECK_OK(tfc_tensor_clone(t, &c));
    CHECK(tfc_tensor_is_contiguous(c) && !tfc_tensor_shares_storage(c, t));
    tfc_tensor_retain(t);
    tfc_tensor_release(t);
    CHECK(deleted == 0);
    tfc_tensor_release(t);
    CHECK(deleted == 1);
    tfc_tensor_release(c);
}

TEST(copy_from_broadcasts_and_casts) {
    int64_t d2[2] = {2, 3}, d1[1] = {3};
    double row[3] = {1, 2, 3};
    tfc_tensor *dst = NULL, *src = NULL;
    CHECK_OK(tfc_tensor_zeros(d2, 2, TFC_DTYPE_F32, &dst));
    CHECK_OK(tfc_tensor_from_data(row, d1, 1, TFC_DTYPE_F64, &src));
    uint64_t v0 = tfc_tensor_version(dst);
    CHECK_OK(tfc_tensor_copy_from(dst, src));
    CHECK(tfc_tensor_version(dst) == v0 + 1);
    float out[6];
    CHECK_OK(tfc_tensor_copy_to_host(dst, out, sizeof out));
    CHECK(out[0] == 1 && out[2] == 3 && out[3] == 1 && out[5] == 3);
    int64_t d4[1] = {4};
    tfc_tensor *bad = NULL;
    CHECK_OK(tfc_tensor_zeros(d4, 1, TFC_DTYPE_F32, &bad));
    CHECK_ERR(tfc_tensor_copy_from(dst, bad), TFC_ERR_SHAPE, "[4]");
    tfc_tensor_release(bad);
    tfc_tensor_release(dst);
    tfc_tensor_release(src);
}

TEST(random_streams_are_keyed_by_seed_and_offset) {
    int64_t dims[1] = {10};
    tfc_tensor *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tfc_tensor_randn(dims, 1, TFC_DTYPE_F64, 42, 0, &a));
    CHECK_OK(tfc_tensor_randn(dims, 1, TFC_DTYPE_F64, 42, 0, &b));
    CHECK_OK(tfc_tensor_randn(dims, 1, TFC_DTYPE_F64, 42, 1, &c));
    double va[10], vb[10], vc[10];
    CHECK_OK(tfc_tensor_copy_to_host(a, va, sizeof va));
    CHECK_OK(tfc_tensor_copy_to_host(b, vb, sizeof vb));
    CHECK_OK(tfc_tensor_copy_to_host(c, vc, sizeof vc));
    CHECK(memcmp(va, vb, sizeof va) == 0);
    /* offset 1 skips one Philox block = four elements */
    CHECK(va[4] == vc[0] && va[9] == vc[5]);
    for (int i = 0; i < 10; i++) CHECK(va[i] == tfc_rng_normal(42, 0, (uint64_t)i));
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(c);
    /* Moments of a large uniform and normal draw. */
    int64_t big[1] = {200000};
    tfc_tensor *u = NULL, *n = NULL;
    CHECK_OK(tfc_tensor_uniform(big, 1, TFC_DTYPE_F32, -1, 3, 7, 0, &u));
    CHECK_OK(tfc_tensor_randn(big, 1, TFC_DTYPE_F32, 7, 0, &n));
    float *vu = malloc(sizeof(float) * 200000), *vn = malloc(sizeof(float) * 200000);
    CHECK_OK(tfc_tensor_copy_to_host(u, vu, sizeof(float) * 200000));
    CHECK_OK(tfc_tensor_copy_to_host(n, vn, sizeof(float) * 200000));
    double su = 0, sn = 0, sn2 = 0, umin = 9, umax = -9;
    for (int i = 0; i < 200000; i++) {
        su += vu[i];
        sn += vn[i];
        sn2 += (double)vn[i] * vn[i];
        if (vu[i] < umin) umin = vu[i];
        if (vu[i] > umax) umax = vu[i];
    }
    CHECK(fabs(su / 200000 - 1.0) < 0.02);
    CHECK(umin >= -1 && umax < 3);
    CHECK(fabs(sn / 200000) < 0.01);
    CHECK(fabs(sn2 / 200000 - 1.0) < 0.02);
    free(vu);
    free(vn);
    tfc_tensor_release(u);
    tfc_tensor_release(n);
}

TEST(bad_inputs_are_reported) {
    tfc_tensor *t = NULL;
    int64_t neg[2] = {2, -1}, huge[3] = {1LL << 40, 1LL << 40, 1LL << 20}, ok[1] = {3};
    CHECK_ERR(tfc_tensor_empty(neg, 2, TFC_DTYPE_F32, &t), TFC_ERR_INVALID_ARG, "[2,-1]");
    CHECK_ERR(tfc_tensor_empty(ok, 9, TFC_DTYPE_F32, &t), TFC_ERR_INVALID_ARG, "ndim");
    CHECK_ERR(tfc_tensor_empty(ok, 1, (tfc_dtype)42, &t), TFC_ERR_DTYPE, "dtype");
    CHECK_ERR(tfc_tensor_empty(huge, 3, TFC_DTYPE_F32, &t), TFC_ERR_OOM, "tfc_tensor_empty");
    int64_t big[1] = {1LL << 44};
    CHECK_ERR(tfc_tensor_zeros(big, 1, TFC_DTYPE_F64, &t), TFC_ERR_OOM, "cannot allocate");
    CHECK_ERR(tfc_tensor_empty(ok, 1, TFC_DTYPE_F32, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_tensor_from_data(NULL, ok, 1, TFC_DTYPE_F32, &t), TFC_ERR_INVALID_ARG, "data is NULL");
    CHECK_ERR(tfc_tensor_randn(ok, 1, TFC_DTYPE_I32, 0, 0, &t), TFC_ERR_DTYPE, "float");
    CHECK(t == NULL);
    CHECK(tfc_tensor_ndim(NULL) == -1);
    tfc_tensor_release(NULL);
}

TEST(describe_and_print) {
    int64_t dims[2] = {2, 2};
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_ones(dims, 2, TFC_DTYPE_F32, &t));
    char *s = NULL;
    CHECK_OK(tfc_tensor_describe(t, &s));
    CHECK(s && strstr(s, "f32 [2,2]") != NULL);
    tfc_free(s);
    CHECK_OK(tfc_tensor_print(t, 0));
    tfc_tensor_release(t);
}

/* Issue 41: memory wrapped read-only refuses every write, through views too, before anything is written. */
TEST(read_only_wrap_refuses_every_write) {
    float mem[6] = {1, 2, 3, 4, 5, 6}, host[6] = {0};
    int64_t dims[2] = {2, 3};
    tfc_tensor *t = NULL, *v = NULL, *src = NULL, *o = NULL, *idx = NULL, *val = NULL;
    CHECK_ERR(tfc_tensor_wrap_ex(mem, dims, NULL, 2, TFC_DTYPE_F32, 2, NULL, NULL, &t), TFC_ERR_INVALID_ARG,
              "tfc_tensor_wrap_ex: flags 0x2");
    CHECK_OK(tfc_tensor_wrap_ex(mem, dims, NULL, 2, TFC_DTYPE_F32, TFC_WRAP_READ_ONLY, NULL, NULL, &t));
    CHECK(tfc_tensor_is_read_only(t) == 1 && tfc_tensor_is_read_only(NULL) == 0);
    CHECK_OK(tfc_transpose(NULL, t, 0, 1, &v));
    CHECK(tfc_tensor_is_read_only(v) == 1);
    CHECK_OK(tfc_tensor_zeros(dims, 2, TFC_DTYPE_F32, &src));
    CHECK(tfc_tensor_is_read_only(src) == 0);
    CHECK_ERR(tfc_tensor_copy_from(t, src), TFC_ERR_INVALID_ARG, "tfc_tensor_copy_from: dst f32 [2,3] is read-only");
    CHECK_ERR(tfc_tensor_copy_from_host(t, host, sizeof host), TFC_ERR_INVALID_ARG,
              "tfc_tensor_copy_from_host: t f32 [2,3] is read-only");
    CHECK_ERR(tfc_tensor_fill(v, 0.0), TFC_ERR_INVALID_ARG, "tfc_tensor_fill: t f32 [3,2] is read-only");
    CHECK_ERR(tfc_tensor_fill_normal(t, 0, 1, 1, 0), TFC_ERR_INVALID_ARG, "is read-only");
    CHECK_ERR(tfc_tensor_fill_uniform(t, 0, 1, 1, 0), TFC_ERR_INVALID_ARG, "is read-only");
    CHECK_ERR(tfc_gelu_forward(src, 0, t), TFC_ERR_INVALID_ARG, "tfc_gelu_forward: y f32 [2,3] is read-only");
    int64_t one = 1, i0 = 0;
    float nine = 9;
    CHECK_OK(tfc_tensor_from_data(&i0, &one, 1, TFC_DTYPE_I64, &idx));
    CHECK_OK(tfc_tensor_from_data(&nine, &one, 1, TFC_DTYPE_F32, &val));
    tfc_tensor *flat = NULL;
    int64_t six = 6;
    CHECK_OK(tfc_reshape(NULL, t, &six, 1, &flat));
    CHECK(tfc_tensor_is_read_only(flat) == 1);
    CHECK_ERR(tfc_index_put(NULL, flat, idx, val, 0), TFC_ERR_INVALID_ARG, "tfc_index_put: x f32 [6] is read-only");
    /* an optimizer step on a read-only parameter is refused before any parameter moves */
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(t, 1));
    CHECK_OK(tfc_tensor_set_grad(t, src));
    CHECK_OK(tfc_optim_sgd(NULL, &opt));
    CHECK_OK(tfc_optim_add_params(opt, &t, 1, NULL));
    CHECK_ERR(tfc_optim_step(opt), TFC_ERR_INVALID_ARG, "parameter 0 f32 [2,3] is read-only");
    for (int i = 0; i < 6; i++) CHECK(mem[i] == (float)(i + 1));
    /* reads are unaffected, and a clone is writable */
    CHECK_OK(tfc_tensor_clone(v, &o));
    CHECK(tfc_tensor_is_read_only(o) == 0);
    CHECK_OK(tfc_tensor_fill(o, 2.0));
    tfc_optim_release(opt);
    tfc_tensor_release(o), tfc_tensor_release(flat), tfc_tensor_release(idx), tfc_tensor_release(val);
    tfc_tensor_release(src), tfc_tensor_release(v), tfc_tensor_release(t);
}
