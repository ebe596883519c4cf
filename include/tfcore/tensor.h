/*
 * tfcore/tensor.h — tensors: creation, queries, copies, memory.
 *
 * A tensor is storage + element offset + shape + strides (in elements) +
 * dtype + device. Shapes are in numpy order (outermost first). Handles are
 * reference counted: every function that returns a tensor returns a new
 * reference, released with tfc_tensor_release(). Views (see ops.h) share
 * storage and keep it alive, so release order never matters.
 *
 * Thread-safety: a tensor handle may be read from several threads at once;
 * writing its data (copy_from, fill, optimizer steps) while another thread
 * reads it is a data race, as with any buffer. Retain/release are atomic.
 */
#ifndef TFCORE_TENSOR_H
#define TFCORE_TENSOR_H

#include "tfcore/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_tensor tfc_tensor;

/* Called once with (data, ctx) when the last reference to wrapped memory goes. */
typedef void (*tfc_deleter)(void *data, void *ctx);

/* ---- creation (CPU, contiguous) ---------------------------------------- */

/*
 * New contiguous CPU tensor of the given shape, uninitialised data.
 * ndim == 0 makes a scalar (dims may then be NULL). Errors: NULL out,
 * ndim outside [0, TFC_MAX_DIMS], negative dims, bad dtype
 * (TFC_ERR_INVALID_ARG / TFC_ERR_DTYPE), sizes that overflow or cannot be
 * allocated (TFC_ERR_OOM).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_empty(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                  tfc_dtype dtype, tfc_tensor **out);
/* As tfc_tensor_empty, filled with 0. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_zeros(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                  tfc_dtype dtype, tfc_tensor **out);
/* As tfc_tensor_empty, filled with 1. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_ones(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                 tfc_dtype dtype, tfc_tensor **out);
/* As tfc_tensor_empty, filled with value (converted to dtype). */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_full(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                 tfc_dtype dtype, double value, tfc_tensor **out);
/*
 * 1-D tensor start, start+step, ... while < end (> end for negative step),
 * like numpy.arange. step == 0 or a non-finite bound is TFC_ERR_INVALID_ARG.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_arange(double start, double end, double step, tfc_dtype dtype,
                                                   tfc_tensor **out);
/*
 * A new contiguous CPU tensor holding a copy of data (row-major, numel
 * elements of dtype). ndim == 0 makes a scalar (then dims may be NULL).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_from_data(const void *data,
                                                      const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                      tfc_dtype dtype, tfc_tensor **out);
/*
 * Zero-copy: a CPU tensor over the caller's memory `data` with the given
 * shape and strides (in elements; NULL strides = contiguous). The library
 * never frees data itself; when the last reference (views included) is
 * released, deleter(data, deleter_ctx) is called, on whatever thread drops
 * it. deleter may be NULL when the caller keeps the memory alive longer than
 * every tensor over it. On error the deleter is NOT called.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_wrap(void *data, const int64_t *dims /* nullable when ndim == 0 */,
                                                 const int64_t *strides /* nullable */, int32_t ndim, tfc_dtype dtype,
                                                 tfc_deleter deleter /* nullable */, void *deleter_ctx /* nullable */,
                                                 tfc_tensor **out);

/* tfc_tensor_wrap_ex flags: the memory must not be written through the tensor. */
#define TFC_WRAP_READ_ONLY 1u
/*
 * tfc_tensor_wrap with flags (0 or TFC_WRAP_READ_ONLY; other bits are
 * TFC_ERR_INVALID_ARG). A read-only tensor and every view of it refuse every
 * write through the library: in-place ops, copies and fills into it,
 * optimizer steps on it, gradients accumulated or clipped into it, kernels
 * writing it as an output, collectives: each fails with TFC_ERR_INVALID_ARG
 * naming the function and argument ("... is read-only ..."), before anything
 * is written. Reading it (any op with it as input) is unaffected; clone()
 * gives a writable copy. Ownership and deleter as tfc_tensor_wrap (the
 * deleter is not called on error). Thread-safe (creates a new tensor).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_wrap_ex(void *data, const int64_t *dims /* nullable when ndim == 0 */,
                                                    const int64_t *strides /* nullable */, int32_t ndim,
                                                    tfc_dtype dtype, uint32_t flags, tfc_deleter deleter /* nullable */,
                                                    void *deleter_ctx /* nullable */, tfc_tensor **out);

/*
 * Random tensors from the Philox 4x32-10 stream keyed by (seed, offset).
 * Element i depends only on (seed, offset, i); a draw of n elements uses
 * counters offset .. offset + ceil(n/4) - 1, so the next independent draw
 * should use offset + ceil(n/4). dtype must be a float type.
 *  - randn: standard normal (Box-Muller); normal: mean + std * randn
 *  - rand: uniform [0, 1); uniform: low + (high - low) * rand
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_randn(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                  tfc_dtype dtype, uint64_t seed, uint64_t offset, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_tensor_rand(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                 tfc_dtype dtype, uint64_t seed, uint64_t offset, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_tensor_uniform(const int64_t *dims /* nullable when ndim == 0 */, int32_t ndim,
                                                    tfc_dtype dtype, double low, double high, uint64_t seed,
                                                    uint64_t offset, tfc_tensor **out);
/* In-place fills of an existing float tensor (any strides) from the same streams. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_fill_normal(tfc_tensor *t, double mean, double std, uint64_t seed,
                                                        uint64_t offset);
TFC_API TFC_NODISCARD tfc_status tfc_tensor_fill_uniform(tfc_tensor *t, double low, double high, uint64_t seed,
                                                         uint64_t offset);

/* ---- references ---------------------------------------------------------- */

/* Add a reference; returns t. NULL is accepted. */
TFC_API tfc_tensor *tfc_tensor_retain(tfc_tensor *t /* nullable: NULL */);
/* Drop a reference; frees when it was the last. NULL is accepted. */
TFC_API void tfc_tensor_release(tfc_tensor *t /* nullable */);

/* ---- queries (never fail on a valid handle; NULL gives 0 / -1) ------------ */

TFC_API int32_t tfc_tensor_ndim(const tfc_tensor *t /* nullable: -1 */);
/* Copy the shape into dims[0..ndim); cap must be >= ndim (TFC_ERR_BUFFER_TOO_SMALL). */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_shape(const tfc_tensor *t, int64_t *dims, int32_t cap);
/* Copy the strides (in elements) into strides[0..ndim). */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_strides(const tfc_tensor *t, int64_t *strides, int32_t cap);
/* Size of dimension dim (negative counts from the end); -1 when out of range. */
TFC_API int64_t tfc_tensor_dim(const tfc_tensor *t /* nullable: -1 */, int32_t dim);
/* Number of elements (1 for a scalar). */
TFC_API int64_t tfc_tensor_numel(const tfc_tensor *t /* nullable: 0 */);
TFC_API tfc_dtype tfc_tensor_dtype(const tfc_tensor *t /* nullable: (tfc_dtype)-1 */);
/* Device kind (tfc_device_type) and index of the tensor's memory. */
TFC_API tfc_device_type tfc_tensor_device_type(const tfc_tensor *t /* nullable: (tfc_device_type)0 */);
TFC_API int32_t tfc_tensor_device_index(const tfc_tensor *t /* nullable: -1 */);
/*
 * Pointer to the first element (storage base + offset). Borrowed: valid
 * while the tensor lives. For CUDA tensors it is a device pointer.
 */
TFC_API void *tfc_tensor_data(const tfc_tensor *t /* nullable: NULL */);
/* Element offset of the first element inside its storage. */
TFC_API int64_t tfc_tensor_storage_offset(const tfc_tensor *t /* nullable: 0 */);
/* 1 when the tensor is row-major contiguous (size-1 dims ignored), else 0. */
TFC_API int32_t tfc_tensor_is_contiguous(const tfc_tensor *t /* nullable: 0 */);
/* 1 when a and b share storage. */
TFC_API int32_t tfc_tensor_shares_storage(const tfc_tensor *a /* nullable: 0 */, const tfc_tensor *b /* nullable: 0 */);
/*
 * Number of times the storage was written in place through the API
 * (copy_from, fill, optimizer steps). Autograd uses it to detect saved
 * tensors modified before backward.
 */
TFC_API uint64_t tfc_tensor_version(const tfc_tensor *t /* nullable: 0 */);
/*
 * 1 when t wraps memory marked read-only (tfc_tensor_wrap_ex with
 * TFC_WRAP_READ_ONLY, a DLPack import flagged read-only) or is a view of
 * such a tensor; 0 otherwise (NULL included). Thread-safe: the flag is set
 * once at creation.
 */
TFC_API int32_t tfc_tensor_is_read_only(const tfc_tensor *t /* nullable: 0 */);

/* ---- data in and out ---------------------------------------------------- */

/*
 * Contiguous row-major copy of all elements into dst (nbytes must be at
 * least numel * dtype size, else TFC_ERR_BUFFER_TOO_SMALL). Any strides in.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_copy_to_host(const tfc_tensor *t, void *dst, size_t nbytes);
/*
 * Overwrite t's elements from row-major host data of t's dtype
 * (nbytes == numel * size). Any strides of t. Bumps t's version.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_copy_from_host(tfc_tensor *t, const void *src, size_t nbytes);
/*
 * dst[...] = src[...], src broadcast to dst's shape and converted to dst's
 * dtype; any strides on both sides; overlapping memory is handled (src is
 * staged first). Bumps dst's version. Not recorded on a graph.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_copy_from(tfc_tensor *dst, const tfc_tensor *src);
/* Set every element of t to value. Bumps t's version. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_fill(tfc_tensor *t, double value);
/* The single element of a 1-element tensor, as double. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_item(const tfc_tensor *t, double *out);
/* New contiguous tensor with the same values (never shares storage). */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_clone(const tfc_tensor *t, tfc_tensor **out);
/*
 * Copy to another device (device_index 0 for CPU). Returns a new reference
 * to t itself when it already lives there.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_to_device(const tfc_tensor *t, tfc_device_type device, int32_t device_index,
                                                      tfc_tensor **out);

/* ---- printing ------------------------------------------------------------ */

/*
 * Short description, e.g. "tensor f32 [2,3] strides [3,1] cpu contiguous
 * requires_grad". Returned string is owned by the caller: free it with tfc_free.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_describe(const tfc_tensor *t, char **out);
/*
 * Print the description and the values (numpy-like nesting, at most
 * max_per_dim values per dimension with "..." beyond; 0 = 6) to stdout.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_print(const tfc_tensor *t, int32_t max_per_dim);

/* ---- memory -------------------------------------------------------------- */

/*
 * CPU allocator statistics: blocks obtained from the OS so far, bytes in use
 * by tensors, bytes held in the cache, and the peak of bytes in use. Any
 * pointer may be NULL.
 */
TFC_API void tfc_memory_stats(uint64_t *os_allocs /* nullable */, uint64_t *live_bytes /* nullable */,
                              uint64_t *cached_bytes /* nullable */, uint64_t *peak_bytes /* nullable */);
/* Return every cached free block to the OS. */
TFC_API void tfc_memory_empty_cache(void);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_TENSOR_H */
