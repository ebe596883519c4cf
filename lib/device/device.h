/*
 * Device memory and the backend tables. CPU memory comes from the caching
 * host allocator; CUDA memory and kernels come from the separately built
 * module libtfcore-cuda.so, loaded with dlopen on first use so that CPU-only
 * programs never need the CUDA runtime.
 */
#ifndef TFC_DEVICE_H
#define TFC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_api.h"
#include "tfcore/core.h"

tfc_status tfc_device_alloc(tfc_device_type dev, int32_t index, size_t nbytes, void **out);
void tfc_device_free(tfc_device_type dev, int32_t index, void *p, size_t nbytes);
tfc_status tfc_device_memset0(tfc_device_type dev, int32_t index, void *p, size_t nbytes);
/* Copy nbytes between any two devices (CPU index is 0). */
tfc_status tfc_device_memcpy(tfc_device_type dst_dev, int32_t dst_index, void *dst, tfc_device_type src_dev,
                             int32_t src_index, const void *src, size_t nbytes);

/*
 * The CUDA module's function table, loading the module on first call.
 * NULL (with tfc_last_error() set, TFC_ERR_DEVICE) when the module is not
 * built, fails to load, or finds no device.
 */
const tfc_cuda_api *tfc_cuda(void);

#endif
