/*
 * The finiteness test of anomaly detection (tfc_graph_set_detect_anomaly):
 * only graphs in that mode pay for it, so it reads the values the simple
 * way, through a host copy when the tensor lives on a device.
 */
#include <math.h>

#include "autograd/node.h"
#include "core/dtype.h"
#include "core/error.h"

tfc_status tfc_tensor_nonfinite(const tfc_tensor *t, int *bad) {
    *bad = 0;
    if (!tfc_dtype_is_float(t->dtype) || tfc_numel(t) == 0) return TFC_OK;
    tfc_tensor *c = NULL, *h = NULL;
    TFC_TRY(tfc_make_contiguous(t, &c));
    tfc_status s = TFC_OK;
    if (c->storage->device != TFC_DEVICE_CPU) {
        s = tfc_tensor_to_device(c, TFC_DEVICE_CPU, 0, &h);
    } else {
        h = tfc_tensor_retain(c);
    }
    if (s == TFC_OK) {
        const void *base = tfc_data(h);
        int64_t n = tfc_numel(h);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(tfc_scalar_load(base, h->dtype, i))) {
                *bad = 1;
                break;
            }
    }
    tfc_tensor_release(h);
    tfc_tensor_release(c);
    return s;
}
