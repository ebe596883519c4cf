/* hello.c: make tensors, broadcast-copy and cast, print the result. */
#include <stdio.h>
#include <tfcore/tfcore.h>

#define TRY(call) do { tfc_status s_ = (call); if (s_ != TFC_OK) { \
    fprintf(stderr, "%s: %s\n", tfc_status_name(s_), tfc_last_error()); return 1; } } while (0)

int main(void) {
    printf("%s\n", tfc_build_info());
    float row[3] = {1.0f, 2.0f, 3.0f};
    int64_t row_dims[1] = {3}, dims[2] = {2, 3};
    tfc_tensor *r = NULL, *m = NULL;
    TRY(tfc_tensor_from_data(row, row_dims, 1, TFC_DTYPE_F32, &r));
    TRY(tfc_tensor_zeros(dims, 2, TFC_DTYPE_F64, &m));
    TRY(tfc_tensor_copy_from(m, r)); /* [3] f32 broadcast into [2,3] f64 */
    TRY(tfc_tensor_print(m, 0));
    double v[6], sum = 0;
    TRY(tfc_tensor_copy_to_host(m, v, sizeof v));
    for (int i = 0; i < 6; i++) sum += v[i];
    printf("sum = %g\n", sum);
    tfc_tensor_release(r);
    tfc_tensor_release(m);
    return sum == 12.0 ? 0 : 1;
}
