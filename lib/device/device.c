/* Devices → backend tables, and memory of any device through them. */
#include "device/device.h"

#include <stdio.h>

#include "core/error.h"
#include "cpu/kernels.h"
#include "device/sync_count.h"

static const tfc_backend *g_override_cuda;

void tfc_device_override_backend(tfc_device_type dev, const tfc_backend *b) {
    if (dev == TFC_DEVICE_CUDA) g_override_cuda = b;
}

const char *tfc_device_name(tfc_device_type dev, int32_t index, char *buf, size_t cap) {
    if (dev == TFC_DEVICE_CPU)
        snprintf(buf, cap, "cpu");
    else if (dev == TFC_DEVICE_CUDA)
        snprintf(buf, cap, "cuda:%d", (int)index);
    else
        snprintf(buf, cap, "device %d:%d", (int)dev, (int)index);
    return buf;
}

tfc_status tfc_backend_of(tfc_device_type dev, int32_t index, const tfc_backend **out) {
    if (dev == TFC_DEVICE_CUDA && g_override_cuda) {
        *out = g_override_cuda;
        return TFC_OK;
    }
    if (dev == TFC_DEVICE_CPU) {
        *out = tfc_cpu_backend_table();
        return TFC_OK;
    }
    if (dev != TFC_DEVICE_CUDA) return tfc_err(TFC_ERR_DEVICE, "unknown device type %d", (int)dev);
    const tfc_backend *b = tfc_cuda_module();
    if (!b) return TFC_ERR_DEVICE;
    int32_t n = b->device_count();
    if (index < 0 || index >= n)
        return tfc_err(TFC_ERR_DEVICE, "cuda:%d does not exist (%d CUDA device%s)", (int)index, (int)n,
                       n == 1 ? "" : "s");
    *out = b;
    return TFC_OK;
}

/* A failed memory entry of a module: its message, prefixed with the device. */
static tfc_status mem_failed(const tfc_backend *b, tfc_device_type dev, int32_t index, const char *what, tfc_status s) {
    if (s == TFC_OK || b == &tfc_cpu_backend) return s;
    char name[32], msg[700];
    snprintf(msg, sizeof msg, "%s", b->last_error());
    return tfc_err(s, "%s: %s: %s", tfc_device_name(dev, index, name, sizeof name), what, msg);
}

tfc_status tfc_device_alloc(tfc_device_type dev, int32_t index, size_t nbytes, void **out) {
    const tfc_backend *b;
    TFC_TRY(tfc_backend_of(dev, index, &b));
    char what[64];
    snprintf(what, sizeof what, "allocating %zu bytes", nbytes);
    return mem_failed(b, dev, index, what, b->alloc(index, nbytes, out));
}

void tfc_device_free(tfc_device_type dev, int32_t index, void *p, size_t nbytes) {
    const tfc_backend *b;
    /* Memory exists only where a backend allocated it, so the lookup cannot fail here. */
    if (tfc_backend_of(dev, index, &b) == TFC_OK) b->free(index, p, nbytes);
}

tfc_status tfc_device_memset0(tfc_device_type dev, int32_t index, void *p, size_t nbytes) {
    const tfc_backend *b;
    TFC_TRY(tfc_backend_of(dev, index, &b));
    return mem_failed(b, dev, index, "memset", b->memset0(index, p, nbytes));
}

tfc_status tfc_device_memcpy(tfc_device_type dst_dev, int32_t dst_index, void *dst, tfc_device_type src_dev,
                             int32_t src_index, const void *src, size_t nbytes) {
    /* The device side does the copy: host↔device, or within one device. */
    tfc_device_type dev = dst_dev;
    int32_t index = dst_index;
    tfc_memcpy_kind kind = TFC_MEMCPY_D2D;
    if (dst_dev == TFC_DEVICE_CPU && src_dev != TFC_DEVICE_CPU)
        dev = src_dev, index = src_index, kind = TFC_MEMCPY_D2H;
    else if (dst_dev != TFC_DEVICE_CPU && src_dev == TFC_DEVICE_CPU)
        kind = TFC_MEMCPY_H2D;
    else if (dst_dev != src_dev || dst_index != src_index)
        return tfc_err(TFC_ERR_UNSUPPORTED, "copy between %s devices %d and %d is not supported",
                       dst_dev == TFC_DEVICE_CUDA ? "CUDA" : "different", (int)src_index, (int)dst_index);
    const tfc_backend *b;
    TFC_TRY(tfc_backend_of(dev, index, &b));
    char what[64];
    snprintf(what, sizeof what, "copying %zu bytes", nbytes);
    /* a copy to the host returns once the data is there: the host waits for the device's queue */
    if (kind == TFC_MEMCPY_D2H) {
        char why[96];
        snprintf(why, sizeof why, "a copy of %zu bytes to the host", nbytes);
        tfc_device_note_sync(dev, index, why);
    }
    return mem_failed(b, dev, index, what, b->memcpy(index, dst, src, nbytes, kind));
}
