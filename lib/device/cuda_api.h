/*
 * The ABI between libtfcore.so and libtfcore-cuda.so. The module exports
 * one symbol, tfc_cuda_module_get(api_version), returning this table;
 * libtfcore refuses a module whose api_version differs. Kernel entries take
 * raw device pointers and sizes (contiguous buffers unless a stride is
 * given) and return tfc_status with the CUDA error string in the message.
 *
 * Append only: new entries go at the end and bump TFC_CUDA_API_VERSION.
 */
#ifndef TFC_CUDA_API_H
#define TFC_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/core.h"

#define TFC_CUDA_API_VERSION 1

typedef struct tfc_cuda_api {
    uint32_t struct_size;
    uint32_t api_version;
    /* Human-readable device summary, e.g. "NVIDIA H200 (sm_90, 139 GiB)". */
    const char *(*describe)(void);
    int32_t (*device_count)(void);
    /* Message of the last failure inside the module (thread-local). */
    const char *(*last_error)(void);
    tfc_status (*alloc)(int32_t device, size_t nbytes, void **out);
    void (*free)(int32_t device, void *p);
    tfc_status (*memset0)(int32_t device, void *p, size_t nbytes);
    /* kind: 0 host->device, 1 device->host, 2 device->device */
    tfc_status (*memcpy)(int32_t device, void *dst, const void *src, size_t nbytes, int32_t kind);
    tfc_status (*synchronize)(int32_t device);
    /* Kernel entries are appended by the CUDA backend (see cuda/README.md). */
    void *reserved[64];
} tfc_cuda_api;

typedef const tfc_cuda_api *(*tfc_cuda_module_get_fn)(uint32_t api_version);

#endif
