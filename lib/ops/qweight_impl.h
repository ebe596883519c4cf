/*
 * The private struct behind tfc_qweight (include/tfcore/quant.h), shared by
 * its handle functions (qweight.c) and the quantized linear (qlinear.c).
 */
#ifndef TFC_OPS_QWEIGHT_IMPL_H
#define TFC_OPS_QWEIGHT_IMPL_H

#include <stdatomic.h>

#include "tensor/tensor_impl.h"
#include "tfcore/quant.h"

/* Immutable once made; codes and scales are contiguous, in format's layout, on one device (the CPU). */
struct tfc_qweight {
    atomic_int refcount;
    tfc_qformat format;
    int64_t n, k;  /* W [n, k] = [out, in] */
    int32_t group; /* int4 group along k; 0 for int8 */
    tfc_tensor *codes, *scales;
};

#endif
