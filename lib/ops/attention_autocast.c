/*
 * tfc_attention_autocast (attention_autocast.h): the dtype the device's
 * attention computes in under autocast (tfc_backend_autocast_dtype), then
 * casts around tfc_attention — three graph ops (cast, attention, cast)
 * whose backward casts the bf16 gradients back to f32, so nothing here has
 * a backward of its own.
 */
#include "ops/attention_autocast.h"

#include "ops/op_util.h"

tfc_status tfc_attention_autocast(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                  int32_t causal, double scale, tfc_tensor **out) {
    return tfc_attention_autocast_ex(g, q, k, v, causal, scale, NULL, out);
}

tfc_status tfc_attention_autocast_ex(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                     int32_t causal, double scale, const tfc_attention_options *opts,
                                     tfc_tensor **out) {
    const char *fn = "tfc_attention_autocast";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_CHECK_NOT_NULL(fn, q);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, q, &be));
    const tfc_dtype dt = tfc_backend_autocast_dtype(be, q->dtype);
    if (dt == q->dtype) return tfc_attention_ex(g, q, k, v, causal, scale, opts, out);
    const tfc_tensor *in[3] = {q, k, v};
    tfc_tensor *b[3] = {NULL, NULL, NULL}, *ob = NULL;
    tfc_status s = TFC_OK;
    for (int i = 0; i < 3 && s == TFC_OK; i++) s = tfc_cast(g, in[i], dt, &b[i]);
    if (s == TFC_OK) s = tfc_attention_ex(g, b[0], b[1], b[2], causal, scale, opts, &ob);
    if (s == TFC_OK) s = tfc_cast(g, ob, q->dtype, out);
    for (int i = 0; i < 3; i++) tfc_tensor_release(b[i]);
    tfc_tensor_release(ob);
    return s == TFC_OK ? TFC_OK : tfc_err_in(fn, s);
}
