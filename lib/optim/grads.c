/* The gradient check shared by the optimizer step and gradient clipping. */
#include "core/dtype.h"
#include "core/error.h"
#include "optim/optim_impl.h"
#include "tensor/dispatch.h"

tfc_status tfc_optim_check_grad(const char *fn, const char *gname, const tfc_tensor *g, const char *refname,
                                const tfc_tensor *ref, const tfc_tensor *param) {
    const tfc_tensor *ts[2] = {ref, g};
    const char *names[2] = {refname, gname};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    if (param && (g->dtype != param->dtype || tfc_numel(g) != tfc_numel(param)))
        return tfc_err(TFC_ERR_INTERNAL, "%s: %s is %s %s but its parameter is %s %s", fn, gname,
                       tfc_dtype_name(g->dtype), SHAPE(g), tfc_dtype_name(param->dtype), SHAPE(param));
    if (!tfc_is_contiguous(g))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: %s %s is not contiguous (set with tfc_tensor_set_grad?): the fused "
                       "pass reads it as one block",
                       fn, gname, SHAPE(g));
    if (param && g->storage == param->storage)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s %s shares its parameter's memory", fn, gname, SHAPE(g));
    return TFC_OK;
}
