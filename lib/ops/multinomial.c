/*
 * multinomial: num_samples category indices per row of probs drawn from
 * the Philox stream (seed, offset) — the library keeps no hidden RNG
 * state, like dropout; the caller advances its stream by
 * rows · num_samples blocks. The backend's multinomial entry validates
 * the weights and draws (lib/cpu/multinomial.c).
 */
#include "ops/op_util.h"
#include "ops/operands.h"

TFC_API tfc_status tfc_multinomial(const tfc_tensor *probs, int64_t num_samples, int32_t replacement, uint64_t seed,
                                   uint64_t offset, tfc_tensor **out) {
    const char *fn = "tfc_multinomial";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "probs", probs));
    if (probs->ndim != 1 && probs->ndim != 2)
        return tfc_err(TFC_ERR_SHAPE, "%s: probs is %s; it must be 1-D [n] or 2-D [rows, n]", fn, SHAPE(probs));
    int64_t n = probs->shape[probs->ndim - 1], rows = probs->ndim == 2 ? probs->shape[0] : 1;
    if (n == 0) return tfc_err(TFC_ERR_SHAPE, "%s: probs %s has no categories", fn, SHAPE(probs));
    if (num_samples <= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: num_samples is %lld; it must be >= 1", fn, (long long)num_samples);
    if (!replacement && num_samples > n)
        return tfc_err(
            TFC_ERR_INVALID_ARG,
            "%s: num_samples %lld > %lld categories of probs %s: cannot sample that many without replacement", fn,
            (long long)num_samples, (long long)n, SHAPE(probs));
    int64_t total;
    if (__builtin_mul_overflow(rows, num_samples, &total) || total > ((int64_t)1 << 48))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %lld rows x num_samples %lld is too many draws", fn, (long long)rows,
                       (long long)num_samples);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, probs, &be));
    int64_t shape[2] = {rows, num_samples};
    const int64_t *sh = probs->ndim == 2 ? shape : shape + 1;
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(probs, sh, probs->ndim, TFC_DTYPE_I64, &r));
    tfc_multinomial_problem p = {.device = tfc_device_index(probs),
                                 .dtype = probs->dtype,
                                 .rows = rows,
                                 .n = n,
                                 .num_samples = num_samples,
                                 .replacement = replacement != 0,
                                 .seed = seed,
                                 .offset = offset,
                                 .out = tfc_data(r)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, probs, &p.probs);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, multinomial, &p);
    tfc_operands_release(&o);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}
