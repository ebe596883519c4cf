/*
 * tfc_tensor_copy_from between tensors over the same memory through
 * different storages (two tfc_tensor_wrap calls over one buffer, as
 * Python's .data and from_numpy make): the source is staged, so the result
 * is that of reading src before writing dst.
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

TEST(overlapping_wraps_copy_as_if_staged) {
    double buf[9];
    for (int i = 0; i < 9; i++) buf[i] = i;
    const int64_t d33[2] = {3, 3}, tr[2] = {1, 3};
    tfc_tensor *dst = NULL, *src = NULL;
    CHECK_OK(tfc_tensor_wrap(buf, d33, NULL, 2, TFC_DTYPE_F64, NULL, NULL, &dst));
    CHECK_OK(tfc_tensor_wrap(buf, d33, tr, 2, TFC_DTYPE_F64, NULL, NULL, &src)); /* its transpose */
    CHECK_OK(tfc_tensor_copy_from(dst, src));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) CHECK(buf[i * 3 + j] == (double)(j * 3 + i));
    tfc_tensor_release(dst);
    tfc_tensor_release(src);
    /* shifted by one element: dst[k] = src[k] reads buf[k] before buf[k + 1] is written */
    for (int i = 0; i < 9; i++) buf[i] = i;
    const int64_t d8[1] = {8};
    CHECK_OK(tfc_tensor_wrap(buf + 1, d8, NULL, 1, TFC_DTYPE_F64, NULL, NULL, &dst));
    CHECK_OK(tfc_tensor_wrap(buf, d8, NULL, 1, TFC_DTYPE_F64, NULL, NULL, &src));
    CHECK_OK(tfc_tensor_copy_from(dst, src));
    for (int i = 1; i < 9; i++) CHECK(buf[i] == (double)(i - 1));
    tfc_tensor_release(dst);
    tfc_tensor_release(src);
    /* disjoint halves of one buffer: plain copy */
    for (int i = 0; i < 9; i++) buf[i] = i;
    const int64_t d4[1] = {4};
    CHECK_OK(tfc_tensor_wrap(buf + 5, d4, NULL, 1, TFC_DTYPE_F64, NULL, NULL, &dst));
    CHECK_OK(tfc_tensor_wrap(buf, d4, NULL, 1, TFC_DTYPE_F64, NULL, NULL, &src));
    CHECK_OK(tfc_tensor_copy_from(dst, src));
    for (int i = 0; i < 4; i++) CHECK(buf[5 + i] == (double)i);
    tfc_tensor_release(dst);
    tfc_tensor_release(src);
}
