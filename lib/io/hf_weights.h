/*
 * The weights of a Hugging Face model directory: one `model.safetensors`,
 * or `model.safetensors.index.json` and the shards it names, as
 * transformers writes them (docs/MODEL.md, "Sharded safetensors"):
 *
 *   {"metadata": {"total_size": N, ...},
 *    "weight_map": {"tensor name": "model-00001-of-00002.safetensors", ...}}
 *
 * Reading maps every file (safetensors_impl.h: nothing is read into memory
 * until a loader copies it, and the copied pages are given back), checks
 * that the index and the shards say the same thing, and hands all their
 * tensors to a loader contract (tensor_contract.h), each naming its own
 * shard in faults. Writing saves named tensors as one model.safetensors or
 * as shards and an index, as transformers' save_pretrained does.
 *
 * lib/model's loaders call these (gpt_hf.c); nothing here knows a model.
 * Not thread-safe per handle; distinct handles are independent.
 */
#ifndef TFC_IO_HF_WEIGHTS_H
#define TFC_IO_HF_WEIGHTS_H

#include <stdint.h>

#include "io/tensor_contract.h"
#include "tfcore/io.h"

#define TFC_HF_SINGLE_NAME "model.safetensors"
#define TFC_HF_INDEX_NAME "model.safetensors.index.json"
/* The largest index read (HF's for a 405B model is about 100 KB). */
#define TFC_HF_INDEX_MAX ((size_t)16 << 20)

/* An opened weights directory: its files, mapped, each a loaded safetensors file. */
typedef struct tfc_hf_weights tfc_hf_weights;

/*
 * Open the weights of directory dir for the public function fn (named in
 * every message). dir/model.safetensors is read when it exists (it wins
 * over an index beside it, as in transformers); else
 * dir/model.safetensors.index.json and each distinct shard it names, in
 * name order. Refused, nothing handed out:
 *   - neither file: TFC_ERR_IO naming both;
 *   - a malformed index: not JSON, not an object, over TFC_HF_INDEX_MAX,
 *     "metadata" present and not an object, "weight_map" missing or not an
 *     object, a key repeated, a value not a string (TFC_ERR_FORMAT naming
 *     the index and the tensor);
 *   - a shard name with '/', "..", a NUL, or not ending in ".safetensors"
 *     (TFC_ERR_FORMAT naming the tensor mapped to it);
 *   - a shard that cannot be opened (TFC_ERR_IO naming the shard, the index
 *     and a tensor mapped to it) or is not a valid safetensors file
 *     (tfc_safetensors_load's error, naming the shard);
 *   - a tensor the index maps to a shard that does not hold it, a tensor a
 *     shard holds that the index does not list or maps to another shard,
 *     a tensor held by two shards (TFC_ERR_FORMAT naming the shard(s), the
 *     index and the tensor).
 * metadata.total_size is not checked against the tensors: transformers'
 * loader ignores it, and writers disagree on what it counts.
 * Errors also TFC_ERR_OOM. Free *out with tfc_hf_weights_free.
 */
tfc_status tfc_hf_weights_open(const char *fn, const char *dir, tfc_hf_weights **out);
/* Free w (NULL accepted). Tensors taken from it (held by a contract) stay valid: they keep their mapping. */
void tfc_hf_weights_free(tfc_hf_weights *w);

/* Whether w was read through an index (1) or from model.safetensors (0). */
int32_t tfc_hf_weights_sharded(const tfc_hf_weights *w);
/* The file that stands for the whole set in messages: the index's path, or model.safetensors'. Borrowed. */
const char *tfc_hf_weights_path(const tfc_hf_weights *w);
/* Number of files (shards; 1 for model.safetensors). */
int32_t tfc_hf_weights_file_count(const tfc_hf_weights *w);
/* File k's path (dir/name; borrowed) and loaded contents (borrowed), 0 <= k < file_count; NULL when out of range. */
const char *tfc_hf_weights_file(const tfc_hf_weights *w, int32_t k);
const tfc_safetensors *tfc_hf_weights_shard(const tfc_hf_weights *w, int32_t k);
/* Tensors in all files, and their elements in all (a loader's check that a config asks no more than the files hold). */
int32_t tfc_hf_weights_count(const tfc_hf_weights *w);
int64_t tfc_hf_weights_numel(const tfc_hf_weights *w);
/* The first metadata value of key across the files, in file order (borrowed), or NULL when none has it. */
const char *tfc_hf_weights_metadata(const tfc_hf_weights *w, const char *key);

/*
 * Every tensor of every file of w as held by c (tfc_contract_hold_safetensors_in):
 * file order, then each file's order; each names its shard in faults and
 * gives its pages back as it is copied. Errors: TFC_ERR_OOM.
 */
tfc_status tfc_contract_hold_hf_weights(tfc_contract *c, const tfc_hf_weights *w);

/*
 * Save n float tensors (any float dtype, any strides, CPU or CUDA) under
 * names[i] into directory dir (which must exist) as transformers does:
 *   - stored as `dtype` (TFC_DTYPE_F32, TFC_DTYPE_BF16 or TFC_DTYPE_F16;
 *     converting rounds to nearest, ties to even);
 *   - max_shard_bytes == 0, or all tensors' stored bytes within it: one
 *     dir/model.safetensors;
 *   - else shards dir/model-%05d-of-%05d.safetensors, filled in the given
 *     order, a new shard begun when the next tensor would take the current
 *     one past max_shard_bytes (a tensor larger than that alone in its
 *     shard), and dir/model.safetensors.index.json with metadata.total_size
 *     the sum of the stored tensor bytes and weight_map sorted by name;
 *   - every file's metadata "format": "pt" (transformers refuses a file
 *     without it) plus the n_meta pairs given.
 * Each file is written atomically (tfc_safetensors_save, atomic_file.h).
 * A sharded save first removes an older index and model.safetensors (so a
 * failure part way leaves no checkpoint that looks complete: shards of two
 * saves never pass for one), writes the shards, and the index last; a
 * single-file save removes an older index after its file is in place.
 * Shards of an older save that the new index does not name are left.
 * Errors: NULL arguments, n < 1, an empty, repeated or reserved name,
 * a non-float tensor, another storage dtype (TFC_ERR_INVALID_ARG /
 * TFC_ERR_DTYPE, naming fn), more than 99999 shards, TFC_ERR_IO naming the
 * file, TFC_ERR_OOM.
 */
tfc_status tfc_hf_weights_save(const char *fn, const char *dir, const char *const *names, tfc_tensor *const *tensors,
                               int32_t n, tfc_dtype dtype, uint64_t max_shard_bytes,
                               const char *const *meta_keys /* nullable when n_meta == 0 */,
                               const char *const *meta_values /* nullable when n_meta == 0 */, int32_t n_meta);

#endif
