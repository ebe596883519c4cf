/*
 * Internals of safetensors.c for the rest of lib/io and the layers above:
 * the writer with a storage dtype, and the memory behind a loaded file.
 *
 * A loaded file (tfc_safetensors_load) is mapped read-only (mmap,
 * MAP_PRIVATE) and each of its tensors is a read-only view of that mapping
 * that keeps it alive, except a tensor not aligned for its dtype, which is
 * a copy. A
 * mapped page costs memory (RSS) from the first time it is touched until
 * it is given back: a loader that has copied a tensor's values into their
 * destination gives its pages back with tfc_safetensors_done, so loading a
 * model holds the model plus the tensor being copied, not the model plus
 * the file (docs/ARCHITECTURE.md, lib/io, "Mapped files").
 */
#ifndef TFC_IO_SAFETENSORS_IMPL_H
#define TFC_IO_SAFETENSORS_IMPL_H

#include <stdint.h>

#include "tfcore/tensor.h"

/*
 * tfc_safetensors_save for the public function fn (named in errors), each
 * tensor stored as dtype `store` (a float dtype; its values converted as
 * they are written, one tensor at a time, rounding to nearest even) or, when
 * store < 0, as its own dtype (tfc_safetensors_save itself). Errors as
 * tfc_safetensors_save's; a non-float tensor or `store` is TFC_ERR_DTYPE.
 */
tfc_status tfc_safetensors_save_as(const char *fn, const char *path, const char *const *names,
                                   tfc_tensor *const *tensors, int32_t n, int32_t store, const char *const *meta_keys,
                                   const char *const *meta_values, int32_t n_meta);

/*
 * The caller is done, for now, with bytes [from, to) of t's data (offsets
 * from its first element): when t views a safetensors mapping, the whole
 * pages inside that span leave the process's memory (madvise
 * MADV_DONTNEED; the pages at the span's ends may hold a neighbour's
 * bytes and stay). Nothing is lost: the mapping is private and never
 * written, so a dropped page reads back from the file if touched again.
 * For any other tensor (a copy, a buffer load's tensor, caller memory) it
 * does nothing. ctx is unused: the signature is tfc_held's done hook
 * (tensor_contract.h). Thread-safe; never fails.
 */
void tfc_safetensors_done(void *ctx, const tfc_tensor *t, uint64_t from, uint64_t to);

#endif
