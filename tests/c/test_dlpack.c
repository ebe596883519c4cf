/* DLPack export/import: zero copy, strides, byte_offset, deleters, bad input. */
#include "tfc_test_util.h"

TFC_TEST_MAIN

TEST(export_import_round_trip_shares_memory) {
    tfc_tensor *t = NULL, *tt = NULL, *back = NULL;
    CHECK_OK(tfc_tensor_arange(0, 6, 1, TFC_DTYPE_F32, &t));
    tfc_tensor *v = NULL;
    CHECK_OK(tfc_view(NULL, t, (int64_t[]){2, 3}, 2, &v));
    CHECK_OK(tfc_transpose(NULL, v, 0, 1, &tt)); /* [3,2] strides [1,3] */
    DLManagedTensor *m = NULL;
    CHECK_OK(tfc_tensor_to_dlpack(tt, &m));
    CHECK(m->dl_tensor.data == tfc_tensor_data(tt) && m->dl_tensor.byte_offset == 0);
    CHECK(m->dl_tensor.ndim == 2 && m->dl_tensor.shape[0] == 3 && m->dl_tensor.strides[0] == 1 &&
          m->dl_tensor.strides[1] == 3);
    CHECK(m->dl_tensor.dtype.code == 2 && m->dl_tensor.dtype.bits == 32 && m->dl_tensor.dtype.lanes == 1);
    CHECK(m->dl_tensor.device.device_type == 1);
    /* the export keeps the storage alive after every tensor is gone */
    tfc_tensor_release(t);
    tfc_tensor_release(v);
    tfc_tensor_release(tt);
    CHECK_OK(tfc_tensor_from_dlpack(m, &back));
    float out[6];
    CHECK_OK(tfc_tensor_copy_to_host(back, out, sizeof out));
    CHECK(out[0] == 0 && out[1] == 3 && out[2] == 1 && out[5] == 5);
    tfc_tensor_release(back); /* runs the export's deleter */
}

static int deleted;
static void count(DLManagedTensor *self) {
    deleted++;
    (void)self;
}

TEST(import_honours_byte_offset_and_null_strides) {
    double buf[8] = {9, 9, 1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    DLManagedTensor m = {{buf, {1, 0}, 2, {2, 64, 1}, shape, NULL, 2 * sizeof(double)}, NULL, count};
    tfc_tensor *t = NULL;
    deleted = 0;
    CHECK_OK(tfc_tensor_from_dlpack(&m, &t));
    CHECK(tfc_tensor_data(t) == &buf[2] && tfc_tensor_is_contiguous(t));
    double v[6];
    CHECK_OK(tfc_tensor_copy_to_host(t, v, sizeof v));
    CHECK(v[0] == 1 && v[5] == 6);
    tfc_tensor_release(t);
    CHECK(deleted == 1);
    /* bad input: the caller keeps ownership, the deleter is not called */
    DLManagedTensor bad = m;
    bad.dl_tensor.dtype.lanes = 4;
    CHECK_ERR(tfc_tensor_from_dlpack(&bad, &t), TFC_ERR_DTYPE, "lanes 4");
    bad = m;
    bad.dl_tensor.device.device_type = 2;
    CHECK_ERR(tfc_tensor_from_dlpack(&bad, &t), TFC_ERR_UNSUPPORTED, "device type 2");
    bad = m;
    bad.dl_tensor.ndim = 12;
    CHECK_ERR(tfc_tensor_from_dlpack(&bad, &t), TFC_ERR_UNSUPPORTED, "ndim 12");
    CHECK(deleted == 1);
    CHECK_ERR(tfc_tensor_from_dlpack(NULL, &t), TFC_ERR_INVALID_ARG, "m is NULL");
}

TEST(versioned_export_and_import) {
    tfc_tensor *t = NULL, *b = NULL;
    CHECK_OK(tfc_tensor_ones((int64_t[]){4}, 1, TFC_DTYPE_BF16, &t));
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tfc_tensor_to_dlpack_versioned(t, &m));
    CHECK(m->version.major == 1 && m->dl_tensor.dtype.code == 4 && m->dl_tensor.dtype.bits == 16);
    m->version.major = 2;
    CHECK_ERR(tfc_tensor_from_dlpack_versioned(m, &b), TFC_ERR_VERSION, "major version 2");
    m->version.major = 1;
    CHECK_OK(tfc_tensor_from_dlpack_versioned(m, &b));
    CHECK(tfc_tensor_data(b) == tfc_tensor_data(t) && tfc_tensor_dtype(b) == TFC_DTYPE_BF16);
    tfc_tensor_release(t);
    tfc_tensor_release(b);
}

/* Found by tests/fuzz/fuzz_dlpack: a byte_offset that wraps the address space is refused, not added. */
TEST(import_refuses_a_byte_offset_past_the_address_space) {
    double buf[2] = {1, 2};
    int64_t shape[1] = {1};
    DLManagedTensor m = {{buf, {1, 0}, 1, {2, 64, 1}, shape, NULL, UINT64_MAX - 7}, NULL, count};
    tfc_tensor *t = NULL;
    deleted = 0;
    CHECK_ERR(tfc_tensor_from_dlpack(&m, &t), TFC_ERR_INVALID_ARG, "passes the end of the address space");
    CHECK(t == NULL && deleted == 0);
}

/*
 * Found by tests/fuzz/fuzz_dlpack: a stride of INT64_MAX on a dim of 2
 * makes the highest element's offset INT64_MAX, one past which (the
 * storage's element count) does not fit; UBSan reported the signed
 * overflow before the span was refused.
 */
TEST(import_refuses_a_span_one_past_int64_max) {
    float buf[1] = {0};
    int64_t shape[2] = {2, 1}, strides[2] = {INT64_MAX, 1};
    DLManagedTensor m = {{buf, {1, 0}, 2, {2, 32, 1}, shape, strides, 0}, NULL, count};
    tfc_tensor *t = NULL;
    deleted = 0;
    CHECK_ERR(tfc_tensor_from_dlpack(&m, &t), TFC_ERR_INVALID_ARG, "address beyond the 64-bit range");
    CHECK(t == NULL && deleted == 0);
    CHECK_ERR(tfc_tensor_wrap(buf, shape, strides, 2, TFC_DTYPE_F32, NULL, NULL, &t), TFC_ERR_INVALID_ARG,
              "for shape [2,1]");
    CHECK(t == NULL);
}

/*
 * Found by tests/fuzz/fuzz_dlpack: an empty tensor's strides address
 * nothing, so import takes any; copying it must not multiply them (UBSan
 * reported a signed overflow in the strided iterator).
 */
TEST(empty_import_with_huge_strides_copies) {
    float buf[1] = {0};
    int64_t shape[4] = {6, 0, 4, 3}, strides[4] = {3, 0, INT64_C(7566047373982433280), 1};
    DLManagedTensor m = {{buf, {1, 0}, 4, {2, 32, 1}, shape, strides, 0}, NULL, count};
    tfc_tensor *t = NULL, *c = NULL;
    deleted = 0;
    CHECK_OK(tfc_tensor_from_dlpack(&m, &t));
    CHECK(tfc_tensor_numel(t) == 0);
    CHECK_OK(tfc_tensor_clone(t, &c));
    CHECK(c && tfc_tensor_numel(c) == 0);
    tfc_tensor_release(c);
    tfc_tensor_release(t);
    CHECK(deleted == 1);
}
