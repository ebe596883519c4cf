/*
 * Shape arithmetic that a caller or a file controls cannot wrap into a view
 * outside its buffer (issue #21, defect 1): each reproducer of the audit is
 * an error now, with the values of the audit. Run under ASan+UBSan too,
 * where the old code's overflows were undefined behaviour.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tfc_test.h"

TFC_TEST_MAIN

static tfc_tensor *iota(int64_t n) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_arange(0, (double)n, 1, TFC_DTYPE_F32, &t));
    return t;
}

TEST(reshape_whose_element_count_wraps_is_refused) {
    tfc_tensor *x = iota(2), *r = NULL, *sentinel = (tfc_tensor *)&r;
    r = sentinel;
    /* 3 · 6148914691236517206 wraps to 2 in 64 bits */
    CHECK_ERR(tfc_reshape(NULL, x, (int64_t[]){3, 6148914691236517206LL}, 2, &r), TFC_ERR_SHAPE,
              "tfc_reshape: cannot view x [2] as [3,6148914691236517206]: the element count overflows");
    CHECK_ERR(tfc_reshape(NULL, x, (int64_t[]){-1, 6148914691236517206LL, 3}, 3, &r), TFC_ERR_SHAPE, "overflows");
    CHECK(r == sentinel);
    CHECK_OK(tfc_reshape(NULL, x, (int64_t[]){1, 2}, 2, &r)); /* the ordinary case still works */
    CHECK(tfc_tensor_dim(r, 1) == 2);
    tfc_tensor_release(r);
    tfc_tensor_release(x);
}

TEST(narrow_range_check_cannot_overflow) {
    tfc_tensor *x = iota(6), *r = NULL;
    CHECK_ERR(tfc_narrow(NULL, x, 0, INT64_MAX - 1, 4, &r), TFC_ERR_INVALID_ARG,
              "tfc_narrow: start 9223372036854775806, length 4 out of range for dim 0 of x [6]");
    CHECK_ERR(tfc_narrow(NULL, x, 0, 4, INT64_MAX, &r), TFC_ERR_INVALID_ARG, "out of range");
    CHECK(r == NULL);
    CHECK_OK(tfc_narrow(NULL, x, 0, 4, 2, &r));
    CHECK(tfc_tensor_dim(r, 0) == 2 && ((float *)tfc_tensor_data(r))[0] == 4.0f);
    tfc_tensor_release(r);
    tfc_tensor_release(x);
}

TEST(slice_with_a_huge_step_keeps_one_element) {
    /* torch: torch.arange(6.)[2:6:2**63-2] is tensor([2.]) */
    tfc_tensor *x = iota(6), *r = NULL;
    CHECK_OK(tfc_slice(NULL, x, 0, 2, 6, INT64_MAX - 1, &r));
    CHECK(tfc_tensor_ndim(r) == 1 && tfc_tensor_dim(r, 0) == 1);
    tfc_tensor *c = NULL;
    CHECK_OK(tfc_contiguous(NULL, r, &c));
    CHECK(((float *)tfc_tensor_data(c))[0] == 2.0f);
    tfc_tensor_release(c);
    tfc_tensor_release(r);
    CHECK_OK(tfc_slice(NULL, x, 0, 1, 6, 2, &r)); /* 1, 3, 5 */
    CHECK(tfc_tensor_dim(r, 0) == 3);
    tfc_tensor_release(r);
    CHECK_OK(tfc_slice(NULL, x, 0, 5, 2, 1, &r)); /* empty */
    CHECK(tfc_tensor_dim(r, 0) == 0);
    tfc_tensor_release(r);
    tfc_tensor_release(x);
}

TEST(a_zero_dim_does_not_hide_overflowing_strides) {
    tfc_tensor *t = NULL;
    const int64_t big = (int64_t)1 << 40;
    CHECK_ERR(tfc_tensor_empty((int64_t[]){0, big, big}, 3, TFC_DTYPE_F32, &t), TFC_ERR_OOM,
              "tfc_tensor_empty: dims [0,1099511627776,1099511627776] overflow the element count");
    CHECK(t == NULL);
    CHECK_OK(tfc_tensor_empty((int64_t[]){0, 3, 4}, 3, TFC_DTYPE_F32, &t)); /* an ordinary empty tensor */
    CHECK(tfc_tensor_numel(t) == 0);
    tfc_tensor_release(t);
    tfc_tensor *x = iota(1), *r = NULL;
    CHECK_ERR(tfc_expand(NULL, x, (int64_t[]){big, big, big}, 3, &r), TFC_ERR_SHAPE, "the element count overflows");
    tfc_tensor_release(x);
}

TEST(wrap_refuses_overflowing_strides_and_misaligned_data) {
    static float buf[16];
    tfc_tensor *t = NULL;
    /* (3 - 1) · 2^62 overflows: the byte span must not wrap past the checks */
    CHECK_ERR(tfc_tensor_wrap(buf, (int64_t[]){3}, (int64_t[]){(int64_t)1 << 62}, 1, TFC_DTYPE_F32, NULL, NULL, &t),
              TFC_ERR_INVALID_ARG, "address beyond the 64-bit range");
    CHECK_ERR(tfc_tensor_wrap(buf, (int64_t[]){2, 3}, (int64_t[]){INT64_MAX / 2, 1}, 2, TFC_DTYPE_F32, NULL, NULL, &t),
              TFC_ERR_INVALID_ARG, "tfc_tensor_wrap: strides");
    CHECK_ERR(tfc_tensor_wrap((char *)buf + 2, (int64_t[]){3}, NULL, 1, TFC_DTYPE_F32, NULL, NULL, &t),
              TFC_ERR_INVALID_ARG, "is not aligned to its 4-byte f32 elements");
    CHECK(t == NULL);
    CHECK_OK(tfc_tensor_wrap(buf, (int64_t[]){2, 3}, (int64_t[]){1, 2}, 2, TFC_DTYPE_F32, NULL, NULL, &t));
    tfc_tensor_release(t);
}

TEST(dlpack_import_checks_its_pointer) {
    static float buf[8];
    int64_t shape[1] = {3};
    DLManagedTensor m = {0};
    m.dl_tensor.device.device_type = 1; /* kDLCPU */
    m.dl_tensor.ndim = 1;
    m.dl_tensor.shape = shape;
    m.dl_tensor.dtype.code = 2; /* float */
    m.dl_tensor.dtype.bits = 32;
    m.dl_tensor.dtype.lanes = 1;
    tfc_tensor *t = NULL;
    m.dl_tensor.data = NULL;
    m.dl_tensor.byte_offset = 64;
    CHECK_ERR(tfc_tensor_from_dlpack(&m, &t), TFC_ERR_INVALID_ARG, "data is NULL with byte_offset 64");
    m.dl_tensor.data = buf;
    m.dl_tensor.byte_offset = 2; /* misaligned floats: vector loads would fault or be UB */
    CHECK_ERR(tfc_tensor_from_dlpack(&m, &t), TFC_ERR_INVALID_ARG, "not aligned");
    CHECK(t == NULL);
    m.dl_tensor.byte_offset = 4;
    CHECK_OK(tfc_tensor_from_dlpack(&m, &t)); /* aligned: imported, m handed back on release (no deleter) */
    CHECK(tfc_tensor_data(t) == (void *)&buf[1]);
    tfc_tensor_release(t);
}

TEST(filled_creators_reject_a_null_out) {
    const int64_t d[1] = {2};
    CHECK_ERR(tfc_tensor_zeros(d, 1, TFC_DTYPE_F32, NULL), TFC_ERR_INVALID_ARG, "tfc_tensor_zeros: out is NULL");
    CHECK_ERR(tfc_tensor_ones(d, 1, TFC_DTYPE_F32, NULL), TFC_ERR_INVALID_ARG, "tfc_tensor_ones: out is NULL");
    CHECK_ERR(tfc_tensor_full(d, 1, TFC_DTYPE_F32, 3.0, NULL), TFC_ERR_INVALID_ARG, "tfc_tensor_full: out is NULL");
}

TEST(negative_thread_counts_are_refused) {
    int32_t before = tfc_get_num_threads();
    CHECK_ERR(tfc_set_num_threads(-5), TFC_ERR_INVALID_ARG, "tfc_set_num_threads: n is -5; 0 restores the default");
    CHECK(tfc_get_num_threads() == before);
    CHECK_OK(tfc_set_num_threads(0));
}

TEST(token_file_ranges_cannot_overflow_their_messages) {
    char path[] = "/tmp/tfc_shape_safety_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 0};
    CHECK_OK(tfc_token_file_write(path, ids, 8, 16));
    tfc_token_file *f = NULL;
    CHECK_OK(tfc_token_file_open(path, &f));
    int32_t out[4];
    CHECK_ERR(tfc_token_file_read(f, INT64_MAX - 1, 4, out), TFC_ERR_INVALID_ARG,
              "start 9223372036854775806, n 4 is outside the file's 8 tokens");
    tfc_tensor *x = NULL, *y = NULL;
    CHECK_ERR(tfc_token_file_batch(f, 0, INT64_MIN, 1, INT32_MAX, 1, 0, &x, &y), TFC_ERR_INVALID_ARG,
              "cannot hold a window of T+1 = 2147483648 tokens");
    CHECK(x == NULL && y == NULL);
    tfc_token_file_close(f);
    remove(path);
}
