/*
 * consumer.c — a program written the way a user writes one: it sees only
 * the installed public header and links with `pkg-config --libs tfcore`.
 * tests/consumer/run.sh builds it against a `meson install --destdir` tree;
 * tests/consumer/meson.build also builds it against the in-tree library so
 * the sanitizer build runs it too.
 *
 * Checks: the header and the library agree on the version, tensors round-trip
 * data, broadcast copies convert dtypes, wrapped memory is handed back through
 * the deleter, and a bad call reports a status and a message naming the
 * function while leaving the out-parameter untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfcore/tfcore.h>

static int failures, checks;

#define EXPECT(cond)                                                                                           \
    do {                                                                                                       \
        checks++;                                                                                              \
        if (!(cond)) {                                                                                         \
            failures++;                                                                                        \
            fprintf(stderr, "consumer.c:%d: FAILED %s (last error: %s)\n", __LINE__, #cond, tfc_last_error()); \
        }                                                                                                      \
    } while (0)

static int deleter_calls;
static void count_deleter(void *data, void *ctx) {
    (void)data;
    deleter_calls += *(const int *)ctx;
}

static void version_and_build_info(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TFC_VERSION_MAJOR, TFC_VERSION_MINOR, TFC_VERSION_PATCH);
    printf("version %s (%d); header %s\n", tfc_version_string(), (int)tfc_version(), want);
    printf("build: %s\n", tfc_build_info());
    EXPECT(tfc_version() == TFC_VERSION_NUMBER);
    EXPECT(strcmp(tfc_version_string(), want) == 0);
    EXPECT(strncmp(tfc_build_info(), "libtfcore ", 10) == 0);
    EXPECT(tfc_last_error() != NULL);
    EXPECT(strcmp(tfc_status_name(TFC_ERR_SHAPE), "TFC_ERR_SHAPE") == 0);
    EXPECT(tfc_dtype_size(TFC_DTYPE_BF16) == 2);
}

static void round_trip(void) {
    float data[6] = {1.5f, -2, 3, 4, 5, 6.25f};
    int64_t dims[2] = {2, 3}, got[TFC_MAX_DIMS];
    tfc_tensor *t = NULL;
    EXPECT(tfc_tensor_from_data(data, dims, 2, TFC_DTYPE_F32, &t) == TFC_OK);
    if (!t) return;
    EXPECT(tfc_tensor_ndim(t) == 2);
    EXPECT(tfc_tensor_shape(t, got, TFC_MAX_DIMS) == TFC_OK && got[0] == 2 && got[1] == 3);
    EXPECT(tfc_tensor_numel(t) == 6 && tfc_tensor_dtype(t) == TFC_DTYPE_F32);
    EXPECT(tfc_tensor_device_type(t) == TFC_DEVICE_CPU);
    float back[6] = {0};
    EXPECT(tfc_tensor_copy_to_host(t, back, sizeof back) == TFC_OK);
    EXPECT(memcmp(back, data, sizeof back) == 0);

    char *desc = NULL;
    EXPECT(tfc_tensor_describe(t, &desc) == TFC_OK && desc && strstr(desc, "[2,3]"));
    if (desc) printf("describe: %s\n", desc);
    tfc_free(desc);

    /* f32 [2,3] broadcast into f64 [4,2,3]: every block equals the input. */
    int64_t big_dims[3] = {4, 2, 3};
    tfc_tensor *big = NULL;
    EXPECT(tfc_tensor_zeros(big_dims, 3, TFC_DTYPE_F64, &big) == TFC_OK);
    EXPECT(tfc_tensor_copy_from(big, t) == TFC_OK);
    double bv[24] = {0};
    EXPECT(tfc_tensor_copy_to_host(big, bv, sizeof bv) == TFC_OK);
    int same = 1;
    for (int i = 0; i < 24; i++) same &= bv[i] == (double)data[i % 6];
    EXPECT(same);
    tfc_tensor_release(big);
    tfc_tensor_release(t);
}

static void wrapped_memory(void) {
    double *buf = malloc(4 * sizeof *buf);
    if (!buf) return;
    for (int i = 0; i < 4; i++) buf[i] = i * 0.5;
    int64_t dims[1] = {4};
    int one = 1;
    tfc_tensor *w = NULL;
    deleter_calls = 0;
    EXPECT(tfc_tensor_wrap(buf, dims, NULL, 1, TFC_DTYPE_F64, count_deleter, &one, &w) == TFC_OK);
    EXPECT(tfc_tensor_data(w) == buf);
    double item = 0;
    tfc_tensor *scalar = NULL;
    EXPECT(tfc_tensor_from_data(&buf[3], NULL, 0, TFC_DTYPE_F64, &scalar) == TFC_OK);
    EXPECT(tfc_tensor_item(scalar, &item) == TFC_OK && item == 1.5);
    tfc_tensor_release(scalar);
    tfc_tensor_retain(w);
    tfc_tensor_release(w);
    EXPECT(deleter_calls == 0);
    tfc_tensor_release(w);
    EXPECT(deleter_calls == 1);
    free(buf);
}

static void error_paths(void) {
    tfc_tensor *const sentinel = (tfc_tensor *)&deleter_calls;
    tfc_tensor *out = sentinel;
    int64_t bad[2] = {2, -3};
    tfc_status s = tfc_tensor_from_data(NULL, bad, 2, TFC_DTYPE_F32, &out);
    printf("expected error: %s: %s\n", tfc_status_name(s), tfc_last_error());
    EXPECT(s == TFC_ERR_INVALID_ARG);
    EXPECT(strstr(tfc_last_error(), "tfc_tensor_from_data") != NULL);
    EXPECT(strstr(tfc_last_error(), "[2,-3]") != NULL);
    EXPECT(out == sentinel);

    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    s = tfc_tensor_empty(huge, 2, TFC_DTYPE_F32, &out);
    EXPECT(s == TFC_ERR_OOM);
    EXPECT(out == sentinel);

    int64_t one[1] = {1};
    s = tfc_tensor_zeros(one, 1, (tfc_dtype)99, &out);
    EXPECT(s == TFC_ERR_DTYPE);
    EXPECT(out == sentinel);
    EXPECT(tfc_tensor_shape(NULL, bad, 2) != TFC_OK);
    tfc_tensor_release(NULL); /* documented as accepted */
}

int main(void) {
    version_and_build_info();
    round_trip();
    wrapped_memory();
    error_paths();
    printf("consumer: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
