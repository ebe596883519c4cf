/*
 * tfcore/io.h — files: safetensors read/write, token files for training
 * data, GPT checkpoints. Guide: docs/MODEL.md.
 *
 * Thread-safety: distinct handles may be used from distinct threads; a
 * loaded safetensors file or an open token file is read-only and may be
 * read from several threads at once.
 */
#ifndef TFCORE_IO_H
#define TFCORE_IO_H

#include "tfcore/core.h"
#include "tfcore/gpt.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors ------------------------------------------------------------ */

/*
 * Write n tensors (any strides, CPU or CUDA; dtypes f32 f64 bf16 f16 i32
 * i64 u8 bool) under names[i] plus n_meta metadata pairs ("__metadata__",
 * strings) to a safetensors file: 8-byte little-endian header length, the
 * JSON header (padded with spaces to a multiple of 8 bytes), then the data.
 * Tensors are laid out sorted by dtype alignment (largest first) then name,
 * as the reference implementation does, so every tensor is aligned.
 * The file is written to a temporary file in the same directory, fsync'd
 * and renamed over path: a crash leaves either the old or the new file.
 * Errors: NULL arguments, empty or duplicate names, the name
 * "__metadata__", NUL-free strings only (TFC_ERR_INVALID_ARG),
 * TFC_ERR_IO naming the path, TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_save(const char *path, const char *const *names,
                                                      tfc_tensor *const *tensors, int32_t n,
                                                      const char *const *meta_keys /* nullable when n_meta == 0 */,
                                                      const char *const *meta_values /* nullable when n_meta == 0 */,
                                                      int32_t n_meta);

/* A parsed safetensors file: its tensors (in file order) and metadata. */
typedef struct tfc_safetensors tfc_safetensors;

/*
 * Open and validate a whole safetensors file: header length within the
 * file and at most 100,000,000 bytes, well-formed JSON, known dtypes,
 * non-negative shapes, data_offsets that match dtype size × shape, do not
 * overlap and tile the data section exactly, no duplicate names, string
 * metadata. Any violation is TFC_ERR_FORMAT naming what and where;
 * unreadable files (and anything but a regular file) TFC_ERR_IO. Release
 * with tfc_safetensors_release.
 * The file is memory-mapped (read-only, private), not read: its tensors
 * are read-only views of the mapping (tfc_tensor_is_read_only; a write
 * through one is refused naming it; clone for a writable copy), each
 * keeping the mapping alive, and their values are read from the file as
 * they are first touched. A tensor whose offset is not a multiple of its
 * element size is a (read-only) copy instead. The file's size is checked
 * against the header before any tensor is made; the file must then not
 * shrink while tensors over it live (truncated and rewritten in place by
 * another program: touching a page past its new end raises SIGBUS).
 * Writers that replace a file by renaming a new one over it, as
 * tfc_safetensors_save does, are safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_load(const char *path, tfc_safetensors **out);
/* As tfc_safetensors_load from len bytes in memory (copied, writable tensors; data may be freed after). */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_load_buffer(const void *data, size_t len, tfc_safetensors **out);
/* Free a loaded file; tensors handed out stay valid. NULL is accepted. */
TFC_API void tfc_safetensors_release(tfc_safetensors *f /* nullable */);
/* Number of tensors (0 for NULL). */
TFC_API int32_t tfc_safetensors_count(const tfc_safetensors *f /* nullable: 0 */);
/*
 * Tensor i (file order = order of data_offsets): *name is borrowed (valid
 * while f lives), *tensor a new reference to a CPU tensor (either may be
 * NULL = not wanted). Errors: NULL f, i out of range (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_get(const tfc_safetensors *f, int32_t i,
                                                     const char **name /* nullable */,
                                                     tfc_tensor **tensor /* nullable */);
/* The tensor called name (new reference). Missing: TFC_ERR_INVALID_ARG naming it. */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_find(const tfc_safetensors *f, const char *name, tfc_tensor **tensor);
/* Number of metadata pairs (0 for NULL). */
TFC_API int32_t tfc_safetensors_metadata_count(const tfc_safetensors *f /* nullable: 0 */);
/* Metadata pair i (both borrowed). Errors: NULL arguments, i out of range. */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_metadata_at(const tfc_safetensors *f, int32_t i, const char **key,
                                                             const char **value);
/* Value of metadata key (borrowed), or *value = NULL when absent (still TFC_OK). */
TFC_API TFC_NODISCARD tfc_status tfc_safetensors_metadata(const tfc_safetensors *f, const char *key,
                                                          const char **value);

/* ---- token files ----------------------------------------------------------------- */

/*
 * Token file layout (little-endian): 32-byte header
 *   char magic[8] = "TFCTOKS\0"; u32 version = 1; u32 width (2 or 4 bytes
 *   per token); u64 count; u32 vocab_size; u32 reserved = 0
 * then count tokens of `width` bytes. width is 2 when vocab_size <= 65536.
 */

/*
 * Write n token ids (each in [0, vocab_size)) to path atomically (temp
 * file, fsync, rename). Errors: NULL arguments, vocab_size < 1, an id out
 * of range (TFC_ERR_INVALID_ARG naming its index), TFC_ERR_IO.
 */
TFC_API TFC_NODISCARD tfc_status tfc_token_file_write(const char *path, const int32_t *ids, int64_t n,
                                                      int32_t vocab_size);

/* An open, memory-mapped token file. */
typedef struct tfc_token_file tfc_token_file;

/*
 * Map a token file read-only. Errors: TFC_ERR_IO, TFC_ERR_FORMAT (bad
 * magic, width, size not matching count, an id >= vocab_size is checked
 * lazily by reads), TFC_ERR_VERSION (newer version).
 */
TFC_API TFC_NODISCARD tfc_status tfc_token_file_open(const char *path, tfc_token_file **out);
/* Unmap and free. NULL is accepted. */
TFC_API void tfc_token_file_close(tfc_token_file *f /* nullable */);
/* Number of tokens (0 for NULL). */
TFC_API int64_t tfc_token_file_count(const tfc_token_file *f /* nullable: 0 */);
/* The vocabulary size recorded in the header (0 for NULL). */
TFC_API int32_t tfc_token_file_vocab_size(const tfc_token_file *f /* nullable: 0 */);
/* Copy tokens [start, start + n) into ids. Errors: range outside the file, an id >= vocab (TFC_ERR_FORMAT). */
TFC_API TFC_NODISCARD tfc_status tfc_token_file_read(const tfc_token_file *f, int64_t start, int64_t n, int32_t *ids);

/*
 * A random training batch from tokens [begin, end): B windows of T+1
 * tokens starting at offsets drawn uniformly from [begin, end - T - 1]
 * with the Philox stream (seed, counter = step·B + b); x [B,T] i32 is the
 * window's first T tokens, y [B,T] i32 the next T (x shifted by one).
 * The same (seed, step) always gives the same batch. Errors: NULL
 * arguments, B < 1, T < 1, a range that is not inside the file or holds
 * fewer than T + 1 tokens (TFC_ERR_INVALID_ARG naming both), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_token_file_batch(const tfc_token_file *f, int64_t begin, int64_t end, int32_t B,
                                                      int32_t T, uint64_t seed, uint64_t step, tfc_tensor **x,
                                                      tfc_tensor **y);

/*
 * Token files of other tools, read in place by tfc_token_file_open_shards
 * (all integers little-endian):
 *
 * TFC_TOKENS_LLMC — llm.c's data shards (dev/data/data_common.py,
 *   write_datafile): a header of 256 int32, [0] magic, [1] version,
 *   [2] token count, the rest 0; then the tokens. Magic 20240520 with
 *   version 1 holds u16 tokens (GPT-2's vocabulary); magic 20240801 with
 *   version 7 holds u32 tokens (Llama 3's). The file is exactly
 *   1024 + count x width bytes.
 * TFC_TOKENS_U16 — headerless u16 tokens, the whole file (nanoGPT's
 *   prepare.py train.bin / val.bin, a numpy uint16 array's bytes).
 */
typedef enum tfc_token_format {
    TFC_TOKENS_LLMC = 1,
    TFC_TOKENS_U16 = 2,
    TFC_TOKENS_FORCE_INT32 = 0x7fffffff
} tfc_token_format;

/*
 * Open n shard files of one format as one token file: their tokens in the
 * order given (a window of a batch may run from one shard into the next),
 * each file memory-mapped read-only. Every token is checked against
 * vocab_size here, one sequential pass over the files, so reads and batches
 * of the result cannot meet a bad id. The handle is used and closed as one
 * from tfc_token_file_open (count, read, batch, close);
 * tfc_token_file_vocab_size returns vocab_size.
 * Errors, each naming the file, with nothing left open: NULL arguments,
 * n < 1, an unknown format, vocab_size < 1 (TFC_ERR_INVALID_ARG);
 * TFC_ERR_IO (missing, unreadable, not a regular file); TFC_ERR_FORMAT for
 * a header shorter than 1024 bytes, an unknown magic, a token count that is
 * negative or does not match the file's size, an odd-length headerless
 * file, or a token >= vocab_size (naming its index and byte offset in the
 * file); TFC_ERR_VERSION for a known magic with a newer version.
 */
TFC_API TFC_NODISCARD tfc_status tfc_token_file_open_shards(const char *const *paths, int32_t n,
                                                            tfc_token_format format, int32_t vocab_size,
                                                            tfc_token_file **out);

/*
 * Write n token ids as one file of another tool's format, atomically (temp
 * file, fsync, rename): TFC_TOKENS_U16 the ids as u16, no header (nanoGPT's
 * train.bin); TFC_TOKENS_LLMC an llm.c data shard, GPT-2's layout (magic
 * 20240520, version 1, u16) when every id fits 16 bits, else Llama 3's
 * (magic 20240801, version 7, u32). Errors: NULL arguments, n < 0, an
 * unknown format, a negative id, an id above 65535 for TFC_TOKENS_U16,
 * more than INT32_MAX tokens for TFC_TOKENS_LLMC (TFC_ERR_INVALID_ARG);
 * TFC_ERR_IO naming the path.
 */
TFC_API TFC_NODISCARD tfc_status tfc_token_file_write_shard(const char *path, const int32_t *ids, int64_t n,
                                                            tfc_token_format format);

/* ---- GPT weights ------------------------------------------------------------------ */

/*
 * Save the model's parameters to a safetensors file under their Hugging
 * Face names (layouts as in gpt.h), with the config in the metadata
 * (keys "tfc.n_layer", "tfc.n_head", "tfc.n_embd", "tfc.block_size",
 * "tfc.vocab_size", "tfc.bias", "tfc.tie_weights", "tfc.ln_eps",
 * "tfc.dtype", "tfc.dropout"; for the Llama family also "tfc.arch",
 * "tfc.n_kv_head", "tfc.mlp_hidden", "tfc.attention_bias", "tfc.mlp_bias",
 * "tfc.sliding_window" and "tfc.rope.*", the fields of tfc_rope_config),
 * plus "format" = "pt" that transformers expects) and
 * n_meta extra pairs of the caller. With tied weights lm_head.weight is not
 * stored (transformers re-ties it). Atomic as tfc_safetensors_save.
 * A quantized model (tfc_gpt_quantize) stores each quantized weight NAME as
 * NAME.qcodes (u8) and NAME.qscales (f32) in tfc_qweight_tensors' layouts
 * ([out, in], include/tfcore/quant.h) instead of NAME, with metadata
 * "tfc.quant.format" = "int8" | "int4" and "tfc.quant.group_size".
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_save(const tfc_gpt *m, const char *path,
                                              const char *const *meta_keys /* nullable when n_meta == 0 */,
                                              const char *const *meta_values /* nullable when n_meta == 0 */,
                                              int32_t n_meta);

/*
 * The model config a file written by tfc_gpt_save describes, from its
 * metadata (the keys tfc_gpt_save lists; a file without "tfc.arch" is
 * GPT-2), validated as tfc_gpt_new validates it, into *cfg
 * (cfg->struct_size must be sizeof(tfc_gpt_config)). For tools that
 * build or resume a model of a checkpoint's shape. Errors: NULL
 * arguments, a short struct (TFC_ERR_VERSION), a missing or malformed key
 * or an invalid config (TFC_ERR_FORMAT / TFC_ERR_INVALID_ARG naming it);
 * *cfg is untouched on error. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_config_from_metadata(const tfc_safetensors *f, tfc_gpt_config *cfg);

/*
 * Build a model from a file written by tfc_gpt_save (config from the
 * metadata, every parameter present with the right shape; f32/f64/bf16/f16
 * values are converted to the config dtype). A file with "tfc.quant.format"
 * gives a quantized model (as tfc_gpt_quantize leaves it; the f32 model is
 * built first, then its quantized weights dropped). Every tensor of the
 * file must be one the model of its metadata has (a tfc.n_layer or
 * tfc.bias that contradicts the tensors is refused, naming the first
 * tensor that model lacks), and every dtype is checked before anything
 * converts (docs/ARCHITECTURE.md, "The loader contract"). Errors:
 * TFC_ERR_IO, TFC_ERR_FORMAT naming the missing key, a missing, extra or
 * integer-typed tensor or a shape mismatch, and for a quantized file an
 * unknown format, a missing or ill-sized .qcodes/.qscales tensor, a wrong
 * dtype or a non-finite scale (the message gives tfc_qweight_from_tensors'
 * reason). *out is untouched on error.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_load(const char *path, tfc_gpt **out);

/*
 * Copy the parameters stored in a file written by tfc_gpt_save into an
 * existing model of the same config. Every tensor is checked before the
 * first value is copied, so on error the model is unchanged. Errors: a
 * config that differs (TFC_ERR_INVALID_ARG naming the field and both
 * values), a quantized model or file (TFC_ERR_UNSUPPORTED: use
 * tfc_gpt_load), as tfc_gpt_load otherwise.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_load_into(tfc_gpt *m, const char *path);

/* ---- other tools' GPT-2 files: llm.c checkpoints, Hugging Face directories ------------- */

/*
 * Build a model from an llm.c GPT-2 checkpoint (gpt2_124M.bin as llm.c's
 * train_gpt2.py writes it): a header of 256 little-endian int32 — [0] magic
 * 20240326, [1] version 3 (fp32 values) or 5 (bf16), [2] maxT, [3] V,
 * [4] L, [5] NH, [6] C, [7] Vp (V padded, >= V) — then the parameters in
 * llm.c's order: wte [Vp,C], wpe [maxT,C], ln1w [L,C], ln1b [L,C],
 * qkvw [L,3C,C], qkvb [L,3C], attprojw [L,C,C], attprojb [L,C], ln2w,
 * ln2b, fcw [L,4C,C], fcb [L,4C], fcprojw [L,C,4C], fcprojb [L,C],
 * lnfw [C], lnfb [C]. The model is f32 with block_size maxT, vocab_size V
 * (wte's padding rows V..Vp are dropped), biases, a head tied to wte and
 * ln_eps 1e-5; llm.c's [out, in] Linear weights are transposed to gpt.h's
 * [in, out]. Errors (*out untouched, nothing allocated for a bad file): NULL
 * arguments (TFC_ERR_INVALID_ARG); TFC_ERR_IO (cannot open, not a regular
 * file); TFC_ERR_FORMAT for a file shorter than the header, another magic,
 * a header field below 1, Vp < V, C not a multiple of NH, sizes that
 * overflow, or a file size other than the header's (truncated parameters,
 * trailing bytes), each naming the field or the sizes; TFC_ERR_VERSION for a
 * version other than 3 and 5; TFC_ERR_OOM. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_load_llmc(const char *path, tfc_gpt **out);

/*
 * Write m as an llm.c GPT-2 checkpoint that llm.c's train_gpt2.c reads
 * (layout: tfc_gpt_load_llmc), version 3 (fp32; an f64 model is rounded),
 * Vp = V rounded up to a multiple of 128 with zero rows, a model without
 * biases written with zero biases (the same function). Atomic as
 * tfc_safetensors_save. Errors: NULL arguments (TFC_ERR_INVALID_ARG); an
 * untied LM head, ln_eps other than 1e-5, a quantized model
 * (TFC_ERR_UNSUPPORTED: llm.c's GPT-2 has none of these); TFC_ERR_IO naming
 * the path; TFC_ERR_OOM. m is only read.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_save_llmc(const tfc_gpt *m, const char *path);

/*
 * Build a model from a Hugging Face directory (transformers'
 * save_pretrained of GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM
 * or Qwen2ForCausalLM; docs/MODEL.md): dir/config.json — GPT2Config's
 * schema (n_layer, n_head, n_embd, vocab_size, n_positions or n_ctx
 * required; layer_norm_epsilon 1e-5 and tie_word_embeddings true when
 * absent), or with model_type llama, mistral or qwen2 that family's
 * (num_hidden_layers, num_attention_heads, hidden_size, intermediate_size,
 * vocab_size, max_position_embeddings required; num_key_value_heads,
 * rms_norm_eps, rope_theta, rope_scaling, tie_word_embeddings,
 * attention_bias, mlp_bias, sliding_window read; what each family implies
 * implied as its own code does) — and dir/model.safetensors, or
 * dir/model.safetensors.index.json and the shards it names (memory-mapped:
 * each tensor's pages are read as it is copied and given back, so the peak
 * memory is about the model's). Tensors are found under the names
 * tfc_gpt_params gives (transformer.h.0.attn.c_attn.weight,
 * model.layers.0.self_attn.q_proj.weight, ...) or GPT2Model's bare ones
 * (h.0.attn.c_attn.weight), never both; GPT-2's attention mask buffers and
 * the Llama family's rotary inv_freq buffers are ignored, and a tied
 * model's stored lm_head.weight must be the embedding's copy byte for
 * byte; f32/f64/bf16/f16 values become an f32 model. Every tensor is
 * checked against config.json before the model is allocated. Tokenizer
 * files are not read (a directory with config.json and its weights alone
 * loads). Errors (*out untouched): NULL arguments (TFC_ERR_INVALID_ARG);
 * TFC_ERR_IO (a file or shard missing or unreadable, naming it);
 * TFC_ERR_FORMAT for config.json that is not JSON, lacks a required key,
 * has a value of the wrong kind or a config the model refuses (naming the
 * key), for an index that is malformed, names a tensor its shard lacks or
 * misses one a shard holds, and for the weights as tfc_safetensors_load,
 * holding far fewer values than the config needs, a missing parameter, a
 * shape other than the config's, an integer dtype, a tied lm_head.weight
 * that differs from the embedding or a tensor no model of that config has
 * (naming the tensor, its file and both shapes); TFC_ERR_UNSUPPORTED for
 * what the model cannot compute (another model_type, GPT-2's activation
 * other than GELU's tanh form, n_inner other than 4 x n_embd,
 * scale_attn_by_inverse_layer_idx, add_cross_attention; the family's
 * hidden_act other than silu, a rope_scaling type other than default,
 * linear, dynamic and llama3, head_dim other than hidden_size /
 * num_attention_heads, pretraining_tp > 1, attention_dropout, Qwen2's
 * window on some layers only) and for pytorch_model.bin-only directories;
 * TFC_ERR_OOM. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_load_hf(const char *dir, tfc_gpt **out);

/*
 * Write m as a Hugging Face directory that transformers' from_pretrained
 * loads (GPT2LMHeadModel for GPT-2, LlamaForCausalLM / MistralForCausalLM
 * / Qwen2ForCausalLM for the family): dir (created when missing; other
 * files in it are left alone) gets config.json (GPT2Config's schema:
 * model_type gpt2, architectures [GPT2LMHeadModel], n_layer, n_head,
 * n_embd, n_positions = n_ctx = block_size, vocab_size,
 * layer_norm_epsilon, activation_function gelu_new, tie_word_embeddings,
 * GPT-2's dropout rates 0.1; or the family's: hidden_size,
 * intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps,
 * rope_theta, rope_scaling, tie_word_embeddings, hidden_act silu and the
 * family's bias and window keys; bos_token_id / eos_token_id when >= 0)
 * and model.safetensors (HF names, f32, metadata format = pt;
 * lm_head.weight only when untied). HF's GPT-2 always has biases: a model
 * without them is written with zero biases, which compute the same.
 * bos_token_id and eos_token_id: -1 for none. Tokenizer files are not
 * written (the CLI's tfcore export writes them). Each file is replaced
 * atomically. Errors: NULL arguments, an id outside [-1, vocab_size)
 * (TFC_ERR_INVALID_ARG); a quantized model (TFC_ERR_UNSUPPORTED);
 * TFC_ERR_IO naming the path; TFC_ERR_OOM. m is only read.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_save_hf(const tfc_gpt *m, const char *dir, int32_t bos_token_id,
                                                 int32_t eos_token_id);

/*
 * How tfc_gpt_save_hf_ex writes: set struct_size = sizeof(tfc_hf_save_options)
 * (TFC_HF_SAVE_OPTIONS_INIT does); fields added later go at the end.
 */
typedef struct tfc_hf_save_options {
    uint32_t struct_size;
    int32_t bos_token_id;     /* -1: none */
    int32_t eos_token_id;     /* -1: none */
    tfc_dtype dtype;          /* stored as TFC_DTYPE_F32, _BF16 or _F16 (round to nearest even); config.json's
                                           torch_dtype says which */
    uint64_t max_shard_bytes; /* 0: one model.safetensors; else shards model-0000i-of-0000n.safetensors of
                                           at most this many bytes and model.safetensors.index.json (transformers'
                                           max_shard_size) */
} tfc_hf_save_options;

#define TFC_HF_SAVE_OPTIONS_INIT \
    { (uint32_t)sizeof(tfc_hf_save_options), -1, -1, TFC_DTYPE_F32, 0 }

/*
 * tfc_gpt_save_hf with a storage dtype and sharding: the weights as
 * transformers' save_pretrained(max_shard_size=..., torch_dtype=...) writes
 * them (a tensor larger than max_shard_bytes alone in its shard; the index
 * last, so a failure part way leaves no directory that looks complete).
 * Errors: as tfc_gpt_save_hf, plus NULL opts (TFC_ERR_INVALID_ARG), a short
 * struct_size (TFC_ERR_VERSION), another dtype (TFC_ERR_DTYPE).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_save_hf_ex(const tfc_gpt *m, const char *dir, const tfc_hf_save_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_IO_H */
