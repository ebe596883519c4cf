/*
 * tfcore/core.h — status codes, error messages, versions, dtypes, devices.
 *
 * Conventions for the whole API (see docs/ARCHITECTURE.md):
 *  - Every fallible function returns tfc_status (TFC_OK == 0, errors < 0).
 *    Results come back through out-parameters, which are left untouched on
 *    error. tfc_last_error() then holds a message naming the function, the
 *    argument and the shapes involved.
 *  - Every function that hands out a handle hands out a new reference.
 *  - Nothing reachable from caller input aborts the process.
 */
#ifndef TFCORE_CORE_H
#define TFCORE_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TFCORE_BUILDING_LIBRARY) && defined(__GNUC__)
#define TFC_API __attribute__((visibility("default")))
#else
#define TFC_API
#endif

#if defined(__GNUC__)
#define TFC_NODISCARD __attribute__((warn_unused_result))
#else
#define TFC_NODISCARD
#endif

#define TFC_VERSION_MAJOR 1
#define TFC_VERSION_MINOR 0
#define TFC_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, comparable with tfc_version(). */
#define TFC_VERSION_NUMBER 10000

/* Largest number of dimensions a tensor may have. */
#define TFC_MAX_DIMS 8

/*
 * Status codes. Values are part of the ABI: append only, never renumber.
 */
typedef enum tfc_status {
    TFC_OK = 0,
    TFC_ERR_INVALID_ARG = -1,      /* NULL handle, bad value, bad state */
    TFC_ERR_SHAPE = -2,            /* shapes do not agree */
    TFC_ERR_DTYPE = -3,            /* dtype not accepted or not matching */
    TFC_ERR_DEVICE = -4,           /* device missing or not matching; CUDA errors */
    TFC_ERR_OOM = -5,              /* allocation failed or size overflows */
    TFC_ERR_IO = -6,               /* file system error */
    TFC_ERR_FORMAT = -7,           /* malformed file or text */
    TFC_ERR_UNSUPPORTED = -8,      /* valid request this build cannot do */
    TFC_ERR_BUFFER_TOO_SMALL = -9, /* caller buffer too small; size reported */
    TFC_ERR_CANCELLED = -10,       /* stopped by a caller callback */
    TFC_ERR_VERSION = -11,         /* struct_size / file version mismatch */
    TFC_ERR_INTERNAL = -12,        /* a bug in libtfcore: please report */
    TFC_ERR_NONFINITE = -13,       /* NaN or Inf where a finite value is required */
    TFC_STATUS_FORCE_INT32 = 0x7fffffff
} tfc_status;

/* Element types. Values are part of the ABI: append only. */
typedef enum tfc_dtype {
    TFC_DTYPE_F32 = 0,
    TFC_DTYPE_F64 = 1,
    TFC_DTYPE_BF16 = 2,
    TFC_DTYPE_F16 = 3,
    TFC_DTYPE_I32 = 4,
    TFC_DTYPE_I64 = 5,
    TFC_DTYPE_U8 = 6,
    TFC_DTYPE_BOOL = 7,
    TFC_DTYPE_FORCE_INT32 = 0x7fffffff
} tfc_dtype;

/* Device kinds; the numbers are DLPack's DLDeviceType values. */
typedef enum tfc_device_type {
    TFC_DEVICE_CPU = 1,
    TFC_DEVICE_CUDA = 2,
    TFC_DEVICE_FORCE_INT32 = 0x7fffffff
} tfc_device_type;

/* Flags for explicit backward kernels. */
#define TFC_GRAD_ACCUMULATE 1u /* add into gradient outputs instead of overwriting */

/* Library version as MAJOR*10000 + MINOR*100 + PATCH. Thread-safe. */
TFC_API int32_t tfc_version(void);

/* Library version as static text, e.g. "1.0.0". Never NULL. Thread-safe. */
TFC_API const char *tfc_version_string(void);

/*
 * Static text describing how the library was built: backends, BLAS,
 * OpenMP, CUDA architectures compiled in. Never NULL. Thread-safe.
 */
TFC_API const char *tfc_build_info(void);

/*
 * The message of the last failing call made on this thread, naming the
 * function, the argument and shapes. Never NULL ("" when nothing failed).
 * The text stays valid until the next failing call on this thread.
 */
TFC_API const char *tfc_last_error(void);

/* Clear this thread's last error message. */
TFC_API void tfc_clear_error(void);

/* Static name of a status code, e.g. "TFC_ERR_SHAPE". Never NULL. */
TFC_API const char *tfc_status_name(tfc_status s);

/* Static name of a dtype ("f32", "bf16", ...); "?" for unknown values. */
TFC_API const char *tfc_dtype_name(tfc_dtype dtype);

/* Size of one element of dtype in bytes, 0 for unknown values. */
TFC_API size_t tfc_dtype_size(tfc_dtype dtype);

/*
 * Free memory the library returned to the caller (strings, id arrays).
 * NULL is accepted. Thread-safe.
 */
TFC_API void tfc_free(void *p /* nullable */);

/*
 * Number of CPU threads kernels use (OpenMP). n == 0 restores the default
 * (all cores). Affects the whole process. Errors: n negative or above 4096
 * (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_set_num_threads(int32_t n);

/* Number of CPU threads kernels use. */
TFC_API int32_t tfc_get_num_threads(void);

/*
 * 1 when CUDA tensors can be created in this process (the CUDA module is
 * built, loads, and a device is present), else 0. When 0, tfc_last_error()
 * says why. Thread-safe.
 */
TFC_API int32_t tfc_cuda_available(void);

/*
 * How exactly f32 matrix products are computed (PyTorch's
 * torch.set_float32_matmul_precision). HIGHEST, the default, computes them
 * in full f32 everywhere, so CUDA agrees with the CPU to f32 rounding.
 * HIGH allows CUDA to round the f32 inputs of a GEMM (matmul, linear,
 * their backwards) to TF32 (10 mantissa bits) on tensor cores, with f32
 * accumulation: several times faster, relative error about 1e-3. MEDIUM is
 * HIGH on CUDA (as in PyTorch, whose CUDA matmuls read it as "allow TF32").
 * The CPU ignores the setting; f64 and bf16 products are not affected.
 */
typedef enum tfc_matmul_precision {
    TFC_MATMUL_PRECISION_HIGHEST = 0,
    TFC_MATMUL_PRECISION_HIGH = 1,
    TFC_MATMUL_PRECISION_MEDIUM = 2,
    TFC_MATMUL_PRECISION_FORCE_INT32 = 0x7fffffff
} tfc_matmul_precision;

/*
 * Set the f32 matmul precision for the whole process; it applies to GEMMs
 * started after the call. Errors: precision not one of
 * tfc_matmul_precision (TFC_ERR_INVALID_ARG, the setting unchanged).
 * Thread-safe (an atomic store).
 */
TFC_API TFC_NODISCARD tfc_status tfc_set_float32_matmul_precision(tfc_matmul_precision precision);

/* The current f32 matmul precision (TFC_MATMUL_PRECISION_HIGHEST unless set). Thread-safe. */
TFC_API tfc_matmul_precision tfc_get_float32_matmul_precision(void);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_CORE_H */
