/*
 * tfcore/dlpack.h — zero-copy exchange with numpy, PyTorch, JAX, CuPy…
 * through DLPack (https://dmlc.github.io/dlpack/latest/).
 *
 * The structs below are DLPack's frozen C ABI (v1.1 layout), declared here
 * so callers need no other header. When the real <dlpack/dlpack.h> is
 * included first (DLPACK_VERSION defined), its definitions are used.
 */
#ifndef TFCORE_DLPACK_H
#define TFCORE_DLPACK_H

#include "tfcore/core.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_VERSION
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Device types used here: kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3. */
typedef int32_t DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

/* Type codes: kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6. */
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* elements; NULL = compact row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags; /* bit 0: read only, bit 1: is copied */
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/*
 * Export t without copying as a legacy DLManagedTensor (what numpy 1.24 and
 * torch 1.13 read). data points at the first element, byte_offset is 0, and
 * strides are always filled. The export holds a reference to t's storage
 * until the consumer calls (*out)->deleter(*out), from any thread.
 * f32/f64/f16/bf16/i32/i64/u8/bool map to DLPack's codes (bool as kDLBool).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_to_dlpack(const tfc_tensor *t, DLManagedTensor **out);
/* The same as a versioned DLManagedTensorVersioned (DLPack >= 1.0 consumers). */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_to_dlpack_versioned(const tfc_tensor *t, DLManagedTensorVersioned **out);
/*
 * Import without copying. On success the tensor owns m: m->deleter(m) runs
 * when the last reference to the tensor (and its views) goes. On error the
 * caller still owns m. byte_offset is honoured; NULL strides mean compact.
 * Accepted: CPU (kDLCPU, kDLCUDAHost) memory, lanes == 1, ndim <= 8, the
 * dtypes listed above. Anything else is TFC_ERR_UNSUPPORTED / TFC_ERR_DTYPE.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_from_dlpack(DLManagedTensor *m, tfc_tensor **out);
/*
 * As tfc_tensor_from_dlpack for the versioned struct (major version must be
 * 1). A producer's DLPACK_FLAG_BITMASK_READ_ONLY (flags bit 0) makes the
 * tensor read-only (tfc_tensor_wrap_ex, TFC_WRAP_READ_ONLY); the versioned
 * export of a read-only tensor sets that bit.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_from_dlpack_versioned(DLManagedTensorVersioned *m, tfc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_DLPACK_H */
