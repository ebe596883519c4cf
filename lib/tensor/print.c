/* Human-readable descriptions of tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "tensor/tensor_impl.h"

TFC_API tfc_status tfc_tensor_describe(const tfc_tensor *t, char **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_describe", t);
    TFC_CHECK_NOT_NULL("tfc_tensor_describe", out);
    char buf[512];
    int n = snprintf(buf, sizeof buf, "tensor %s %s strides %s %s%s%s%s", tfc_dtype_name(t->dtype), SHAPE(t),
                     tfc_fmt_dims(t->strides, t->ndim), t->storage->device == TFC_DEVICE_CPU ? "cpu" : "cuda",
                     tfc_is_contiguous(t) ? " contiguous" : "", t->requires_grad ? " requires_grad" : "",
                     t->node ? " (non-leaf)" : "");
    char *s = malloc((size_t)n + 1);
    if (!s) return tfc_err(TFC_ERR_OOM, "tfc_tensor_describe: out of memory");
    memcpy(s, buf, (size_t)n + 1);
    *out = s;
    return TFC_OK;
}

static void print_rec(FILE *f, const double *v, const tfc_tensor *t, int32_t d, int64_t base, int32_t maxn,
                      int is_float) {
    if (t->ndim == 0) {
        fprintf(f, is_float ? "%.6g" : "%.0f", v[0]);
        return;
    }
    int64_t n = t->shape[d], stride = 1;
    for (int32_t k = d + 1; k < t->ndim; k++) stride *= t->shape[k];
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) {
        if (n > 2 * (int64_t)maxn && i == maxn) {
            fputs("..., ", f);
            i = n - maxn;
        }
        if (d == t->ndim - 1)
            fprintf(f, is_float ? "%.6g" : "%.0f", v[base + i]);
        else
            print_rec(f, v, t, d + 1, base + i * stride, maxn, is_float);
        if (i + 1 < n) fputs(d == t->ndim - 1 ? ", " : ",\n ", f);
    }
    fputc(']', f);
}

TFC_API tfc_status tfc_tensor_print(const tfc_tensor *t, int32_t max_per_dim) {
    TFC_CHECK_NOT_NULL("tfc_tensor_print", t);
    if (max_per_dim <= 0) max_per_dim = 3;
    char *desc;
    TFC_TRY_IN("tfc_tensor_print", tfc_tensor_describe(t, &desc));
    printf("%s\n", desc);
    free(desc);
    int64_t n = tfc_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    size_t es = tfc_dtype_size(t->dtype);
    void *raw = malloc(es * (size_t)(n ? n : 1));
    if (!v || !raw) {
        free(v);
        free(raw);
        return tfc_err(TFC_ERR_OOM, "tfc_tensor_print: out of memory");
    }
    tfc_status s = tfc_tensor_copy_to_host(t, raw, es * (size_t)n);
    if (s == TFC_OK) {
        for (int64_t i = 0; i < n; i++) v[i] = tfc_scalar_load(raw, t->dtype, i);
        print_rec(stdout, v, t, 0, 0, max_per_dim, tfc_dtype_is_float(t->dtype));
        printf("\n");
    }
    free(v);
    free(raw);
    return s;
}
