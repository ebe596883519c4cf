/*
 * Devices and their backends. Every device type has one backend table
 * (backend/backend.h): the CPU's is compiled in (lib/cpu/cpu_backend.c);
 * CUDA's comes from the separately built module libtfcore-cuda.so, loaded
 * with dlopen on first use so CPU-only programs never need the CUDA
 * runtime (cuda_module.c). Memory of any device is allocated, zeroed and
 * copied here, through the tables.
 */
#ifndef TFC_DEVICE_H
#define TFC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "tfcore/core.h"

/*
 * The backend of device (dev, index): the CPU table, or the CUDA module's
 * (loaded on first call). TFC_ERR_DEVICE with the reason (module not built,
 * not loadable, no device, index out of range) when there is none; *out is
 * then untouched. Thread-safe.
 */
tfc_status tfc_backend_of(tfc_device_type dev, int32_t index, const tfc_backend **out);

/*
 * For tests of the dispatch itself: serve CUDA devices from table b
 * (NULL restores the real one). Not thread-safe; not part of the ABI.
 */
void tfc_device_override_backend(tfc_device_type dev, const tfc_backend *b);

tfc_status tfc_device_alloc(tfc_device_type dev, int32_t index, size_t nbytes, void **out);
void tfc_device_free(tfc_device_type dev, int32_t index, void *p, size_t nbytes);
tfc_status tfc_device_memset0(tfc_device_type dev, int32_t index, void *p, size_t nbytes);
/* Copy nbytes between any two devices (CPU index is 0). */
tfc_status tfc_device_memcpy(tfc_device_type dst_dev, int32_t dst_index, void *dst, tfc_device_type src_dev,
                             int32_t src_index, const void *src, size_t nbytes);

/* "cpu" or "cuda:N" into buf (for messages). */
const char *tfc_device_name(tfc_device_type dev, int32_t index, char *buf, size_t cap);

/* The CUDA module's table, loading it on first call; NULL (message set, TFC_ERR_DEVICE) when unavailable. */
const tfc_backend *tfc_cuda_module(void);

#endif
