/*
 * The tensor and storage structs, private to the library. Every layer
 * above lib/tensor reads them through this header.
 */
#ifndef TFC_TENSOR_IMPL_H
#define TFC_TENSOR_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "backend/view.h"
#include "tfcore/tensor.h"

struct tfc_node;

typedef struct tfc_storage {
    atomic_int refcount;
    void *data;
    size_t nbytes;
    tfc_device_type device;
    int32_t device_index;
    tfc_deleter deleter; /* external memory: called on last release */
    void *deleter_ctx;
    int32_t from_allocator; /* data came from the device's caching allocator */
    /*
     * Wrapped memory the owner marked read-only (TFC_WRAP_READ_ONLY: a
     * read-only numpy array or memmap, a DLPack tensor flagged so). Every
     * view shares the storage, so every view is read-only too; each write
     * path asks tfc_tensor_check_writable before it writes.
     */
    int32_t read_only;
    atomic_uint_fast64_t version;
    /*
     * Integers the library scanned on the host as it filled this storage
     * (tfc_tensor_to_device of i32/i64): while version is still
     * range_version, every element is below range_hi and either >= 0 or,
     * when range_neg is 1, equal to range_neg_value (an ignore index;
     * range_neg 0: no negative element, 2: negatives of several values;
     * range_neg_value is meaningful only when range_neg is 1). Lets an op
     * skip a device-side range check of ids or targets and the host wait
     * that reading its verdict costs (tfc_storage_range_within). Cleared
     * for good when a raw pointer to the memory is handed out (the library
     * cannot see writes through it).
     */
    atomic_int range_set;
    int32_t range_neg;
    int64_t range_neg_value, range_hi;
    uint64_t range_version;
} tfc_storage;

struct tfc_tensor {
    atomic_int refcount;
    tfc_storage *storage;
    int64_t offset; /* elements */
    int32_t ndim;
    tfc_dtype dtype;
    int64_t shape[TFC_MAX_DIMS];
    int64_t strides[TFC_MAX_DIMS];
    /* autograd */
    int32_t requires_grad;
    int32_t retains_grad;
    tfc_tensor *grad;      /* accumulated gradient (leaf or retained) */
    struct tfc_node *node; /* producing node (strong); NULL for leaves */
    int32_t out_index;     /* which output of node this is */
    /*
     * Grad-hook bookkeeping of the backward pass numbered hook_epoch: the
     * edges still to deliver to this leaf (lib/autograd/graph.c). Stale
     * values from an earlier pass are ignored, so nothing resets them.
     */
    int64_t hook_epoch;
    int32_t hook_pending;
};

/* Elements (1 for scalars) — overflow already excluded at creation. */
static inline int64_t tfc_numel(const tfc_tensor *t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Pointer to element 0 of the tensor (host or device address). */
static inline void *tfc_data(const tfc_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)tfc_dtype_size(t->dtype);
}

int tfc_is_contiguous(const tfc_tensor *t);
void tfc_contiguous_strides(const int64_t *shape, int32_t ndim, int64_t *strides);

/* Validate (dims, ndim) for a public function fn; computes numel. */
tfc_status tfc_check_dims(const char *fn, const int64_t *dims, int32_t ndim, int64_t *numel);

/* New contiguous tensor on device (kind, index) — uninitialised. */
tfc_status tfc_tensor_new(const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_device_type dev, int32_t dev_index,
                          tfc_tensor **out);
/* New contiguous uninitialised tensor with t's shape, device and the given dtype. */
tfc_status tfc_tensor_new_like(const tfc_tensor *t, tfc_dtype dtype, tfc_tensor **out);
/* Zero-filled tensor like t (shape/device), dtype dt. */
tfc_status tfc_tensor_zeros_like(const tfc_tensor *t, tfc_dtype dt, tfc_tensor **out);

/*
 * A new handle over t's storage with the given shape/strides/offset: the
 * raw material of every view. No autograd fields are copied.
 */
tfc_status tfc_tensor_alias(const tfc_tensor *t, const int64_t *shape, const int64_t *strides, int32_t ndim,
                            int64_t offset, tfc_tensor **out);

/*
 * TFC_OK when t's memory may be written; TFC_ERR_INVALID_ARG "<fn>: <arg>
 * <dtype> <shape> is read-only ..." when it wraps read-only memory. The one
 * test every in-place write passes first: copies, fills, random fills, map
 * and copy kernels into an existing tensor (tfc_tensor_map, copy_view), the
 * explicit kernels' outputs, optimizer steps, gradient accumulation and
 * clipping, collectives.
 */
tfc_status tfc_tensor_check_writable(const char *fn, const char *arg, const tfc_tensor *t);

/* Mark an in-place write on t's storage. */
static inline void tfc_bump_version(tfc_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }

/*
 * Whether every element of t is known, without reading it, to be in [0, hi) or equal to `also` (an ignore index;
 * pass 0 for none): t's storage holds a range recorded from the host (tfc_storage above) that is still current.
 */
static inline int tfc_storage_range_within(const tfc_tensor *t, int64_t hi, int64_t also) {
    const tfc_storage *s = t->storage;
    if (!atomic_load(&s->range_set) || s->range_version != atomic_load(&s->version) || s->range_hi > hi) return 0;
    return s->range_neg == 0 || (s->range_neg == 1 && s->range_neg_value == also);
}

/* Contiguous copy of t (new reference to t itself when already contiguous). */
tfc_status tfc_make_contiguous(const tfc_tensor *t, tfc_tensor **out);

/* The broadcast shape of a and b (numpy rules); TFC_ERR_SHAPE names fn. */
tfc_status tfc_broadcast_shape(const char *fn, const tfc_tensor *a, const tfc_tensor *b, int64_t *shape, int32_t *ndim);
/* Strides that read t as if it had `shape` (stride 0 on broadcast dims). */
void tfc_broadcast_strides(const tfc_tensor *t, const int64_t *shape, int32_t ndim, int64_t *strides);

/*
 * The one call from this layer up into autograd, inverted into a hook: the
 * autograd layer registers it at load time (lib/autograd/node.c, a
 * constructor) and tfc_tensor_release calls it for a dying tensor that has
 * a producing node, to drop the node reference and forget a retained-grad
 * slot. Only autograd gives a tensor a node, so a node without the hook is a
 * broken build: tfc_tensor_release then reports TFC_ERR_INTERNAL through
 * tfc_last_error() and on stderr (it cannot return a status) and leaks the
 * node rather than free memory it does not own.
 */
extern void (*tfc_tensor_autograd_release_hook)(tfc_tensor *t);

/* The raw strided view kernels take. */
static inline tfc_sview tfc_sview_of(const tfc_tensor *t) {
    tfc_sview v;
    v.data = (char *)tfc_data(t);
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    for (int32_t i = 0; i < t->ndim; i++) {
        v.shape[i] = t->shape[i];
        v.strides[i] = t->strides[i];
    }
    return v;
}

#define SHAPE(t) tfc_fmt_dims((t)->shape, (t)->ndim)

#endif
