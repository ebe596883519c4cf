#!/usr/bin/python3
"""Generate the bad-argument test over the whole public header.

Reads every `TFC_API` declaration of include/tfcore/*.h (return type, name,
parameter types and names, and the `/* nullable */` markers on parameters)
and writes one C program with, for every function:

  - a valid call (every argument a fixture, see FIXTURES below): must succeed;
  - one call per pointer parameter with that pointer NULL and the others
    valid: a parameter not marked nullable must give a status != TFC_OK and
    a message "fn: ..." naming the parameter, with every out-parameter left
    untouched; a nullable one must not crash (a status != TFC_OK still
    names fn). For a function that returns a value instead of a status, the
    marker says what NULL gives (`/* nullable: -1 */`) and the test checks
    it; `/* nullable when n == 0 */` says NULL is fine only with that count
    0, and the test calls it both ways;
  - calls with each integer size / count / index / dim parameter negative
    (must be refused where a negative value means nothing) and at its
    type's extremes (must not crash; an error names fn).

Each case runs in its own forked child (badargs_main.c), so a crash, an
ASan/UBSan report or a leak fails that case and the run goes on.

Marker convention (docs/ARCHITECTURE.md, "Public API conventions"): a
comment right after a parameter in a public declaration,
    /* nullable */                 NULL is accepted
    /* nullable: EXPR */           NULL is accepted; the function returns EXPR
    /* nullable when N == 0 */     NULL is accepted when parameter N is 0
Every other pointer parameter must not be NULL.

A declaration the parser cannot read, a function without a fixture for one
of its parameters, or a value-returning function taking a pointer that is
not marked nullable stops the generator with an error naming it, so a new
public function is covered (or fails the build) automatically.

Usage: gen_badargs.py OUTPUT.c [HEADER...]   (default: include/tfcore/*.h)
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# Function-pointer typedefs of the API: pointer parameters without a '*'.
FUNC_PTR_TYPES = {"tfc_deleter", "tfc_gpt_token_fn", "tfc_gpt_batch_token_fn", "tfc_gradcheck_fn", "tfc_grad_hook_fn",
                  "tfc_checkpoint_fn"}
INT_TYPES = {"int32_t", "int64_t", "size_t", "uint32_t", "uint64_t"}
LIMITS = {"int32_t": ("INT32_MIN", "INT32_MAX"), "int64_t": ("INT64_MIN", "INT64_MAX")}

# Integer parameters for which a negative value means nothing: the test
# requires it to be refused (with fn and the parameter named).
NONNEG = {"n", "ndim", "ndims", "cap", "batch", "B", "T", "max_new", "n_prompt", "n_seq", "n_paths", "n_meta", "vocab_size",
          "length", "k", "top_k", "i", "id", "group", "warmup", "total", "begin", "n_in", "n_out",
          "n_outputs", "n_inputs", "head_dim", "seq_len"}
NONNEG_BY_FN = {("tfc_multinomial", "num_samples"), ("tfc_slice", "step"), ("tfc_lr_constant", "step"), ("tfc_lr_cosine", "step"),
                ("tfc_lr_linear", "step"), ("tfc_lr_inverse_sqrt", "step"), ("tfc_set_num_threads", "n")}
# Integer parameters also tried at their type's extremes (INT_MIN, INT_MAX).
EXTREME = NONNEG | {"num_samples", "num_classes", "diagonal", "dim", "dim0", "dim1", "start", "end", "step", "max_per_dim", "device_index", "correction",
                    "ignore_index", "root"}
# Counts of a caller's array: the library cannot see past the array, so a
# too-large count is the caller's bug, not a case to try.
BUFFER_COUNTS = {("tfc_concat", "n"), ("tfc_graph_checkpoint", "n_in"), ("tfc_graph_checkpoint", "n_out"), ("tfc_custom_op", "n_in"), ("tfc_custom_op", "n_out"), ("tfc_split", "n"), ("tfc_gradcheck", "n"), ("tfc_optim_add_group", "n"),
                 ("tfc_optim_add_params", "n"), ("tfc_clip_grad_norm", "n"), ("tfc_optim_state_load", "n"),
                 ("tfc_safetensors_save", "n"), ("tfc_safetensors_save", "n_meta"), ("tfc_gpt_save", "n_meta"), ("tfc_gpt_save_lora", "n_meta"),
                 ("tfc_token_file_write", "n"), ("tfc_sample", "n"), ("tfc_gpt_generate", "n_prompt"),
                 ("tfc_gpt_generate", "cap"), ("tfc_gpt_generate_batch", "n_seq"),
                 ("tfc_gpt_generate_batch", "cap"), ("tfc_gpt_generate_speculative", "n_prompt"),
                 ("tfc_gpt_generate_speculative", "cap"), ("tfc_tokenizer_train_files", "n_paths"),
                 ("tfc_token_file_read", "n"), ("tfc_token_file_open_shards", "n"), ("tfc_token_file_write_shard", "n"),
                 ("tfc_tensor_shape", "cap"), ("tfc_tensor_strides", "cap"),
                 ("tfc_autograd_grad", "n_outputs"), ("tfc_autograd_grad", "n_inputs"),
                 ("tfc_rope_inv_freq", "head_dim")}
# A tensor of a few dims/sizes: ndim up to the INT32_MAX case is refused
# before the array is read; the arrays themselves are tests/c/test_shape_safety.c's.

T23 = "fx_f32(2, 2, 3, 0, 0)"
OUT_T = "fx_out_tensor()"

# (type, name) -> fixture expression; then type -> expression.
BY_TYPE_NAME = {
    ("const int64_t *", "dims"): "fx_i64s(2, (int64_t)2, (int64_t)3)",
    ("const int32_t *", "dims"): "fx_i32s(1, 1)",
    ("const int32_t *", "perm"): "fx_i32s(2, 1, 0)",
    ("int32_t", "ndim"): "2",
    ("int32_t", "ndims"): "1",
    ("int32_t", "dim"): "0",
    ("int32_t", "keepdim"): "0",
    ("tfc_tensor *", "grad"): T23,
    ("int64_t", "ignore_index"): "-100",
    ("double", "eps"): "1e-5",
    ("double", "scale"): "0.5",
    ("double", "p"): "0.25",
    ("double", "lr"): "0.01",
    ("double", "max_lr"): "0.01",
    ("double", "min_lr"): "0.001",
    ("double", "max_norm"): "1.0",
    ("double", "temperature"): "1.0",
    ("double", "top_p"): "0.9",
    ("double", "high"): "1.0",
    ("double", "std"): "1.0",
    ("double", "end"): "5.0",
    ("double", "step"): "1.0",
    ("int32_t", "approximate"): "1",
    ("int32_t", "causal"): "1",
    ("int32_t", "largest"): "1",
    ("int32_t", "on"): "1",
    ("int32_t", "set_to_none"): "1",
    ("int32_t", "pattern"): "TFC_SPLIT_GPT2",
    ("int32_t", "special_mode"): "TFC_SPECIAL_AS_TEXT",
    ("int32_t", "n_threads"): "1",
    ("int32_t", "max_per_dim"): "0",
    ("int32_t", "device_index"): "0",
    ("int32_t", "correction"): "1",
    ("int32_t", "vocab_size"): "260",
    ("int32_t", "group"): "0",
    ("int32_t", "i"): "0",
    ("int64_t", "i"): "0",
    ("int64_t", "step"): "3",
    ("int64_t", "warmup"): "2",
    ("int64_t", "total"): "10",
    ("int32_t", "top_k"): "0",
    ("tfc_device_type", "device"): "TFC_DEVICE_CPU",
    ("tfc_optim_kind", "kind"): "TFC_OPTIM_ADAMW",
    ("tfc_status", "s"): "TFC_ERR_SHAPE",
    ("const char *", "path"): 'fx_out_path("file")',
    ("void *", "ctx"): "fx_ctx()",
    ("int32_t", "family"): "TFC_CHAT_CHATML",
    ("int32_t", "add_generation_prompt"): "1",
}
BY_TYPE = {
    "const tfc_tensor *": T23,
    "tfc_tensor *": T23,
    "tfc_tensor **": OUT_T,
    "tfc_graph *": "fx_graph()",
    "const tfc_graph *": "fx_graph()",
    "tfc_graph **": "fx_out_graph()",
    "tfc_optim *": "fx_optim()",
    "const tfc_optim *": "fx_optim()",
    "tfc_optim **": "fx_out_optim()",
    "tfc_comm *": "fx_comm()",
    "const tfc_comm *": "fx_comm()",
    "tfc_comm **": "fx_out_comm()",
    "tfc_ddp *": "fx_ddp()",
    "const tfc_ddp *": "fx_ddp()",
    "tfc_ddp **": "fx_out_ddp()",
    "tfc_ddp_stats *": "fx_ddp_stats()",
    "tfc_spec_stats *": "fx_spec_stats()",
    "tfc_comm_op": "TFC_COMM_SUM",
    "const tfc_custom_op_def *": "fx_custom_def()",
    "const tfc_optim_options *": "fx_opts()",
    "const tfc_attention_options *": "fx_attn_opts()",
    "const tfc_hf_save_options *": "fx_hf_save_opts()",
    "tfc_optim_options *": "fx_opts()",
    "tfc_tokenizer *": "fx_tok()",
    "const tfc_tokenizer *": "fx_tok()",
    "tfc_tokenizer **": "fx_out_tok()",
    "tfc_gpt *": "fx_gpt()",
    "const tfc_gpt *": "fx_gpt()",
    "tfc_gpt **": "fx_out_gpt()",
    "const tfc_gpt_config *": "fx_gpt_config()",
    "tfc_gpt_config *": "fx_gpt_config()",
    "const tfc_lora_config *": "fx_lora_config()",
    "const tfc_rope_config *": "fx_rope_config()",
    "tfc_lora_config *": "fx_lora_config()",
    "tfc_gpt_cache *": "fx_cache()",
    "const tfc_gpt_cache *": "fx_cache()",
    "tfc_gpt_cache **": "fx_out_cache()",
    "tfc_safetensors *": "fx_st()",
    "const tfc_safetensors *": "fx_st()",
    "tfc_safetensors **": "fx_out_st()",
    "tfc_token_file *": "fx_tf()",
    "const tfc_token_file *": "fx_tf()",
    "tfc_token_file **": "fx_out_tf()",
    "tfc_qweight *": "fx_qweight()",
    "const tfc_qweight *": "fx_qweight()",
    "tfc_qweight **": "fx_out_qweight()",
    "tfc_qformat": "TFC_QFORMAT_INT8",
    "tfc_token_format": "TFC_TOKENS_U16",
    "DLManagedTensor **": "fx_out_dlpack()",
    "DLManagedTensorVersioned **": "fx_out_dlpack_v()",
    "char **": "fx_out_mem()",
    "int32_t **": "fx_out_mem()",
    "size_t **": "fx_out_mem()",
    "void *": "fx_ctx()",
    "tfc_deleter": "fx_deleter",
    "tfc_gpt_token_fn": "fx_on_token",
    "tfc_gpt_batch_token_fn": "fx_on_batch_token",
    "tfc_gradcheck_fn": "fx_gradcheck_fn",
    "tfc_grad_hook_fn": "fx_grad_hook",
    "tfc_checkpoint_fn": "fx_checkpoint_fn",
    "tfc_dtype": "TFC_DTYPE_F32",
    "double": "1.0",
    "uint32_t": "0",
    "uint64_t": "1",
    "int64_t": "1",
    "int32_t": "1",
    "size_t": "1",
    "tfc_matmul_precision": "TFC_MATMUL_PRECISION_HIGHEST",
    "const tfc_chat_message *": "fx_chat()",
}
# Plain out-parameters (int32_t *, double *, const char **, ...): zeroed scratch.
SCRATCH_TYPES = {"int32_t *", "int64_t *", "uint64_t *", "double *", "size_t *", "const char **",
                 "const char *const **", "tfc_tensor *const **"}


def t(*dims, dtype="TFC_DTYPE_F32"):
    d = list(dims) + [0] * (4 - len(dims))
    return "fx_t(%s, %d, %s)" % (dtype, len(dims), ", ".join(str(x) for x in d))


def dims64(*v):
    return "fx_i64s(%d, %s)" % (len(v), ", ".join("(int64_t)%d" % x for x in v))


SCALAR = "fx_t(TFC_DTYPE_F32, 0, 0, 0, 0, 0)"
Q = t(1, 2, 2, 4)
KV = t(1, 1, 2, 4)  # one kv head for Q's two (grouped-query attention)
LSE = t(1, 2, 2)
IDS2 = "fx_ids(2, 2)"

# Per function: parameter -> fixture, where the defaults do not make a valid call.
FIXTURES = {
    "tfc_set_num_threads": {"n": "1"},
    "tfc_tensor_from_data": {"data": "fx_floats(6)"},
    "tfc_tensor_wrap": {"data": "fx_floats(6)", "strides": dims64(3, 1)},
    "tfc_tensor_wrap_ex": {"data": "fx_floats(6)", "strides": dims64(3, 1), "flags": "0"},
    "tfc_tensor_shape": {"dims": "fx_scratch(64)", "cap": "8"},
    "tfc_tensor_strides": {"strides": "fx_scratch(64)", "cap": "8"},
    "tfc_tensor_dim": {"dim": "0"},
    "tfc_tensor_copy_to_host": {"dst": "fx_scratch(64)", "nbytes": "64"},
    "tfc_tensor_copy_from_host": {"src": "fx_floats(6)", "nbytes": "24"},
    "tfc_tensor_item": {"t": SCALAR},
    "tfc_tensor_to_device": {"device_index": "0"},
    "tfc_graph_backward": {"loss": "fx_loss()", "seed": SCALAR},
    "tfc_graph_backward_ex": {"loss": "fx_loss()", "seed": SCALAR, "retain_graph": "1", "create_graph": "0"},
    "tfc_autograd_grad": {"outputs": "(const tfc_tensor *const *)fx_tensors(1, fx_loss())", "n_outputs": "1",
                          "inputs": "(const tfc_tensor *const *)fx_tensors(1, fx_leaf())", "n_inputs": "1",
                          "grad_outputs": "(const tfc_tensor *const *)fx_tensors(1, %s)" % SCALAR,
                          "retain_graph": "1", "create_graph": "0", "allow_unused": "1",
                          "grads_out": "fx_out_tensors(1)"},
    "tfc_tensor_retain_grad": {"t": "fx_nonleaf()"},
    "tfc_graph_checkpoint": {"inputs": "fx_tensors(1, fx_leaf())", "n_in": "1", "n_out": "1", "ctx_size": "0"},
    "tfc_gradcheck": {"inputs": "fx_tensors(1, fx_leaf64())", "n": "1", "eps": "1e-6"},
    "tfc_custom_op": {"inputs": "fx_tensors(1, fx_leaf())", "n_in": "1", "n_out": "1"},
    "tfc_matmul": {"b": t(3, 2)},
    "tfc_matmul_backward": {"dout": t(2, 2), "b": t(3, 2), "da": t(2, 3), "db": t(3, 2)},
    "tfc_linear": {"w": t(3, 4), "b": t(4)},
    "tfc_layernorm": {"weight": t(3), "bias": t(3)},
    "tfc_rmsnorm": {"weight": t(3)},
    "tfc_embedding": {"table": t(5, 3), "ids": IDS2},
    "tfc_cross_entropy": {"targets": IDS2},
    "tfc_linear_cross_entropy": {"h": t(2, 3), "w": t(5, 3), "targets": IDS2},
    "tfc_attention": {"q": Q, "k": Q, "v": Q},
    "tfc_swiglu_fused": {"gate_up": t(2, 4)},
    "tfc_where": {"cond": t(2, 3, dtype="TFC_DTYPE_BOOL")},
    "tfc_masked_fill": {"mask": t(2, 3, dtype="TFC_DTYPE_BOOL")},
    "tfc_concat": {"xs": "fx_tensors(2, %s, %s)" % (T23, T23), "n": "2"},
    "tfc_split": {"sizes": dims64(1, 1), "n": "2", "outs": "fx_out_tensors(2)"},
    "tfc_topk": {"k": "1", "dim": "1"},
    "tfc_one_hot": {"ids": IDS2, "num_classes": "3"},
    "tfc_multinomial": {"probs": t(2, 3), "num_samples": "2"},
    "tfc_sort": {"dim": "1"},
    "tfc_argsort": {"dim": "-1"},
    "tfc_cumsum": {"dim": "1"},
    "tfc_triu": {"diagonal": "1"},
    "tfc_tril": {"diagonal": "-1"},
    "tfc_view": {"dims": dims64(3, 2)},
    "tfc_reshape": {"dims": dims64(3, 2)},
    "tfc_permute": {"ndim": "2"},
    "tfc_transpose": {"dim0": "0", "dim1": "1"},
    "tfc_slice": {"start": "0", "end": "1", "step": "1"},
    "tfc_narrow": {"start": "0", "length": "1"},
    "tfc_squeeze": {"x": t(1, 3)},
    "tfc_flatten": {"start": "0", "end": "1"},
    "tfc_layernorm_forward": {"weight": t(3), "bias": t(3), "mean": t(2), "rstd": t(2)},
    "tfc_layernorm_backward": {"weight": t(3), "mean": t(2), "rstd": t(2), "dweight": t(3), "dbias": t(3)},
    "tfc_rmsnorm_forward": {"weight": t(3), "rstd": t(2)},
    "tfc_rmsnorm_backward": {"weight": t(3), "rstd": t(2), "dweight": t(3)},
    "tfc_softmax_forward": {"log": "0"},
    "tfc_softmax_backward": {"log": "0"},
    "tfc_cross_entropy_forward": {"targets": IDS2, "loss": SCALAR, "lse": t(2)},
    "tfc_cross_entropy_backward": {"dloss": SCALAR, "targets": IDS2, "lse": t(2)},
    "tfc_embedding_forward": {"table": t(5, 3), "ids": IDS2},
    "tfc_embedding_backward": {"ids": IDS2, "dtable": t(5, 3)},
    "tfc_attention_forward": {"q": Q, "k": Q, "v": Q, "out": Q, "lse": LSE},
    "tfc_attention_backward": {"dout": Q, "q": Q, "k": Q, "v": Q, "out": Q, "lse": LSE, "dq": Q, "dk": Q, "dv": Q},
    "tfc_attention_ex": {"q": Q, "k": KV, "v": KV},
    "tfc_attention_forward_ex": {"q": Q, "k": KV, "v": KV, "out": Q, "lse": LSE},
    "tfc_attention_backward_ex": {"dout": Q, "q": Q, "k": KV, "v": KV, "out": Q, "lse": LSE, "dq": Q, "dk": KV,
                                  "dv": KV},
    "tfc_tensor_from_dlpack": {"m": "m_", "__pre": "DLManagedTensor *m_ = fx_dlpack();",
                               "__post": "fx_dlpack_done(s, m_);"},
    "tfc_tensor_from_dlpack_versioned": {"m": "m_", "__pre": "DLManagedTensorVersioned *m_ = fx_dlpack_v();",
                                         "__post": "fx_dlpack_v_done(s, m_);"},
    "tfc_gpt_config_preset": {"name": '"char-tiny"'},
    "tfc_gpt_arch_from_name": {"name": '"llama"', "arch": "fx_scratch(8)"},
    "tfc_gpt_params": {"n": "fx_scratch(8)"},
    "tfc_gpt_forward": {"idx": "fx_ids2(1, 4, 16)", "targets": "fx_ids2(1, 4, 16)"},
    "tfc_gpt_cache_new": {"batch": "1"},
    "tfc_gpt_forward_cached": {"idx": "fx_ids2(1, 2, 16)"},
    "tfc_sample": {"logits": "fx_floats(8)", "n": "8", "top_k": "0"},
    "tfc_gpt_generate": {"prompt": "fx_i32s(2, 1, 2)", "n_prompt": "2", "max_new": "2", "out": "fx_scratch(64)",
                         "cap": "8"},
    "tfc_gpt_generate_speculative": {"prompt": "fx_i32s(2, 1, 2)", "n_prompt": "2", "max_new": "2", "k": "1",
                                     "out": "fx_scratch(64)", "cap": "8"},
    "tfc_gpt_generate_batch": {"n_seq": "2", "prompts": "fx_prompts()", "n_prompts": "fx_i32s(2, 2, 1)",
                               "max_new": "2", "out": "fx_scratch(64)", "cap": "8",
                               "lengths": "fx_scratch(64)"},
    "tfc_safetensors_save": {"names": 'fx_strs(2, "a", "b")', "tensors": "fx_tensors(2, %s, %s)" % (T23, T23),
                             "n": "2", "meta_keys": 'fx_strs(1, "k")', "meta_values": 'fx_strs(1, "v")',
                             "n_meta": "1"},
    "tfc_safetensors_load": {"path": 'fx_path("st.safetensors")'},
    "tfc_safetensors_load_buffer": {"data": "fx_st_bytes()", "len": "fx_st_len()"},
    "tfc_safetensors_find": {"name": '"a"'},
    "tfc_safetensors_metadata": {"key": '"k"'},
    "tfc_token_file_write": {"ids": "fx_i32s(3, 1, 2, 3)", "n": "3", "vocab_size": "16"},
    "tfc_token_file_open": {"path": 'fx_path("tokens.bin")'},
    # the token file read as headerless u16 (160 bytes); a vocabulary of 65536 admits any u16
    "tfc_token_file_open_shards": {"paths": 'fx_strs(1, fx_path("tokens.bin"))', "n": "1", "vocab_size": "65536"},
    "tfc_token_file_write_shard": {"ids": "fx_i32s(3, 1, 2, 3)", "n": "3"},
    "tfc_token_file_read": {"start": "0", "n": "2", "ids": "fx_scratch(64)"},
    "tfc_token_file_batch": {"begin": "0", "end": "64", "B": "2", "T": "4", "x": OUT_T, "y": OUT_T},
    "tfc_gpt_save": {"meta_keys": 'fx_strs(1, "k")', "meta_values": 'fx_strs(1, "v")', "n_meta": "1"},
    "tfc_gpt_load": {"path": 'fx_path("gpt.safetensors")'},
    "tfc_gpt_config_from_metadata": {"f": "fx_gpt_st()"},
    "tfc_gpt_load_into": {"path": 'fx_path("gpt.safetensors")'},
    "tfc_gpt_load_llmc": {"path": 'fx_path("gpt.llmc.bin")'},
    "tfc_gpt_save_llmc": {"path": 'fx_path("gpt.out.llmc.bin")'},
    "tfc_gpt_load_hf": {"dir": 'fx_path("hf")'},
    "tfc_gpt_save_hf": {"dir": 'fx_path("hf.out")', "bos_token_id": "-1", "eos_token_id": "0"},
    "tfc_gpt_save_hf_ex": {"dir": 'fx_path("hf.out.ex")'},
    "tfc_gpt_lora_params": {"n": "fx_scratch(8)"},
    "tfc_gpt_merge_lora": {"m": "fx_gpt_lora()"},
    "tfc_gpt_save_lora": {"m": "fx_gpt_lora()", "meta_keys": 'fx_strs(1, "k")', "meta_values": 'fx_strs(1, "v")',
                          "n_meta": "1"},
    "tfc_gpt_save_lora_config": {"m": "fx_gpt_lora()", "base_model": '"gpt2"'},
    "tfc_gpt_load_lora": {"path": 'fx_path("lora.safetensors")'},
    "tfc_optim_add_group": {"params": "fx_tensors(1, fx_leaf())", "n": "1", "weight_decay": "0.0"},
    "tfc_optim_add_params": {"params": "fx_tensors(1, fx_leaf())", "n": "1"},
    "tfc_optim_param": {"k": "0"},
    "tfc_clip_grad_norm": {"params": "fx_tensors(1, fx_leaf())", "n": "1"},
    "tfc_lr_inverse_sqrt": {"warmup": "1"},
    "tfc_optim_state_get": {"i": "0"},
    "tfc_optim_gather": {"opt": "fx_optim_sharded()", "root": "0"},
    "tfc_broadcast": {"root": "0"},
    "tfc_ddp_new": {"params": "fx_tensors(1, fx_leaf())", "n": "1", "bucket_bytes": "0"},
    "tfc_optim_state_load": {"names": 'fx_strs(1, "step")',
                             "tensors": "fx_tensors(1, fx_t(TFC_DTYPE_I64, 0, 0, 0, 0, 0))", "n": "1"},
    "tfc_optim_state_set": {"name": '"step"', "tensor": "fx_t(TFC_DTYPE_I64, 0, 0, 0, 0, 0)"},
    "tfc_tokenizer_train": {"tok": "fx_tok_fresh()", "text": '"abababab cdcd"', "len": "13"},
    "tfc_tokenizer_train_files": {"tok": "fx_tok_fresh()", "paths": 'fx_strs(1, fx_path("train.txt"))',
                                  "n_paths": "1"},
    "tfc_tokenizer_add_special": {"text": '"<|x|>"', "id": "1000"},
    "tfc_tokenizer_encode": {"text": '"the cat"', "len": "7"},
    "tfc_tokenizer_encode_batch": {"texts": 'fx_strs(2, "ab", "cd")', "lens": "fx_sizes(2, (size_t)2, (size_t)2)",
                                   "n_texts": "2"},
    "tfc_tokenizer_decode": {"ids": "fx_i32s(2, 104, 105)", "n_ids": "2"},
    "tfc_tokenizer_decode_utf8": {"ids": "fx_i32s(2, 104, 105)", "n_ids": "2"},
    "tfc_tokenizer_token_bytes": {"id": "65"},
    "tfc_tokenizer_load_gpt2": {"encoder_json_path": 'fx_path("encoder.json")',
                                "vocab_bpe_path": 'fx_path("vocab.bpe")'},
    "tfc_tokenizer_load_tiktoken": {"path": 'fx_path("ranks.tiktoken")'},
    "tfc_tokenizer_load": {"path": 'fx_path("tok.txt")'},
    "tfc_tokenizer_load_hf_json": {"path": 'fx_path("tokenizer.json")', "flags": "TFC_TOKENIZER_ADD_SPECIAL"},
    "tfc_quantize": {"format": "TFC_QFORMAT_INT8", "group_size": "0", "flags": "0"},
    "tfc_gpt_quantize": {"format": "TFC_QFORMAT_INT8", "group_size": "0"},
    "tfc_gpt_quantize_head": {"format": "TFC_QFORMAT_INT8", "group_size": "0"},
    "tfc_qweight_dequantize": {"flags": "0"},
    "tfc_qlinear": {"x": t(2, 64), "b": t(4)},
    "tfc_qweight_from_tensors": {"format": "TFC_QFORMAT_INT8", "n": "2", "k": "3", "group_size": "0",
                                 "packed": "fx_t(TFC_DTYPE_U8, 2, 2, 3, 0, 0)", "scales": t(2)},
    # indexing (lib/ops/index.c): x is the default [2, 3] tensor, indices in range
    "tfc_index_select": {"dim": "1", "index": IDS2},
    "tfc_gather": {"dim": "1", "index": "fx_ids2(2, 2, 2)"},
    "tfc_scatter_add": {"dim": "1", "index": "fx_ids2(2, 2, 2)"},
    "tfc_index_put": {"index": IDS2, "values": t(2), "accumulate": "0"},
    "tfc_nonzero": {"mask": t(2, 3, dtype="TFC_DTYPE_BOOL")},
    "tfc_masked_select": {"mask": t(2, 3, dtype="TFC_DTYPE_BOOL")},
    "tfc_linear_bf16": {"w": t(3, 4), "w_bf16": t(3, 4, dtype="TFC_DTYPE_BF16"), "b": t(4)},
    "tfc_gpt_set_autocast": {"dtype": "TFC_DTYPE_BF16"},
    "tfc_rope": {"x": Q, "positions": "fx_ids(2, 16)", "inv_freq": t(2)},
    "tfc_rope_forward": {"x": Q, "positions": "fx_ids(2, 16)", "inv_freq": t(2), "y": Q},
    "tfc_rope_backward": {"dy": Q, "positions": "fx_ids(2, 16)", "inv_freq": t(2), "dx": Q},
    "tfc_rope_inv_freq": {"head_dim": "4", "seq_len": "0"},
    "tfc_chat_render": {"n_messages": "2"},
    "tfc_chat_encode": {"tok": "fx_tok_chat()", "n_messages": "2"},
    "tfc_chat_template_detect": {"chat_template": "fx_chat_template()"},
    "tfc_chat_config_load": {"path": 'fx_path("tokenizer_config.json")'},
    "tfc_chat_family_from_name": {"name": '"chatml"'},
}
# Release-style functions: a valid call would free a fixture, so only NULL is tried.
# Functions that end the process by design (tfc_comm_abort): no case can run them.
ENDS_PROCESS = {"tfc_comm_abort"}
NO_VALID_CALL = {"tfc_comm_release", "tfc_ddp_release", "tfc_free", "tfc_tensor_release", "tfc_graph_release", "tfc_optim_release",
                 "tfc_tokenizer_release", "tfc_gpt_release", "tfc_gpt_cache_release", "tfc_safetensors_release",
                 "tfc_token_file_close", "tfc_qweight_release"}
# Returned handles the caller owns.
RETURN_RELEASE = {"tfc_tensor *": "tfc_tensor_release", "tfc_qweight *": "tfc_qweight_release"}


class ParseError(Exception):
    pass


MARKER = re.compile(r"/\*\s*nullable\b(.*?)\*/", re.S)
COMMENT = re.compile(r"/\*.*?\*/", re.S)


def split_params(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_param(raw, where):
    nullable = None
    m = MARKER.search(raw)
    if m:
        rest = m.group(1).strip()
        if rest == "":
            nullable = ("yes", None)
        elif rest.startswith(":"):
            nullable = ("returns", rest[1:].strip())
        else:
            w = re.fullmatch(r"when\s+(\w+)\s*==\s*0", rest)
            if not w:
                raise ParseError("%s: cannot read the marker '%s'" % (where, m.group(0)))
            nullable = ("when", w.group(1))
    text = re.sub(r"\s+", " ", COMMENT.sub(" ", raw)).strip()
    pm = re.fullmatch(r"(.*?[\s*])([A-Za-z_]\w*)", text)
    if not pm or pm.group(2) == "const" or not re.fullmatch(r"(?:const )?\w+(?: \w+)*(?: ?\*(?: ?const)?)*",
                                                             pm.group(1).strip()):
        raise ParseError("%s: cannot parse parameter '%s'" % (where, text))
    ptype = re.sub(r"\s*\*", " *", pm.group(1)).replace("* *", "**").replace("* const", "*const").strip()
    ptype = re.sub(r"\*\s+\*", "**", ptype)
    ptype = re.sub(r"\*const \*", "*const *", ptype)
    return {"type": ptype, "name": pm.group(2), "nullable": nullable}


def parse_headers(paths):
    funcs = []
    for path in paths:
        src = open(path, encoding="utf-8").read()
        for m in re.finditer(r"^TFC_API\b(.*?);", src, re.S | re.M):
            where = "%s:%d" % (os.path.relpath(path, ROOT), src.count("\n", 0, m.start()) + 1)
            body = m.group(1)
            dm = re.fullmatch(r"\s*(?:TFC_NODISCARD\s+)?(.*?)\b(tfc_\w+)\s*\((.*)\)\s*", body, re.S)
            if not dm:
                raise ParseError("%s: cannot parse declaration 'TFC_API%s;'" % (where, body))
            ret = re.sub(r"\s+", " ", dm.group(1)).strip()
            ret = re.sub(r"\s*\*", " *", ret).strip()
            name, ptext = dm.group(2), dm.group(3)
            if "TFC_NODISCARD" in ret or not re.fullmatch(r"(?:const )?\w+(?: \*)*", ret):
                raise ParseError("%s: cannot parse return type '%s' of %s" % (where, ret, name))
            params = []
            if COMMENT.sub("", ptext).strip() != "void":
                params = [parse_param(p, "%s (%s)" % (where, name)) for p in split_params(ptext)]
            funcs.append({"ret": ret, "name": name, "params": params, "where": where})
    if not funcs:
        raise ParseError("no TFC_API declarations found")
    return funcs


def is_pointer(ptype):
    return "*" in ptype or ptype in FUNC_PTR_TYPES


def fixture(fn, p):
    over = FIXTURES.get(fn["name"], {})
    if p["name"] in over:
        return over[p["name"]]
    key = (p["type"], p["name"])
    if key in BY_TYPE_NAME:
        return BY_TYPE_NAME[key]
    if p["type"] in SCRATCH_TYPES:
        return "fx_scratch(64)"
    if p["type"] in BY_TYPE:
        return BY_TYPE[p["type"]]
    raise ParseError("%s: no fixture for parameter '%s %s' of %s: add one to FIXTURES in %s" %
                     (fn["where"], p["type"], p["name"], fn["name"], os.path.relpath(__file__, ROOT)))


class Emitter:
    def __init__(self):
        self.cases = []  # (fn, description, body)

    def add(self, fn, desc, args, verdict, value_check=None):
        name = fn["name"]
        over = FIXTURES.get(name, {})
        lines = ["    tfc_clear_error();"]
        if "__pre" in over:
            lines.append("    " + over["__pre"])
        # Arguments first, so fx_arm() (the OOM mode's injection) sees only the call's allocations.
        for k, (p, a) in enumerate(zip(fn["params"], args)):
            lines.append("    %s a%d = %s;" % (p["type"], k, a))
        call = "%s(%s)" % (name, ", ".join("a%d" % k for k in range(len(args))))
        ret = fn["ret"]
        lines.append("    fx_arm();")
        if ret == "tfc_status":
            lines.append("    tfc_status s = %s;" % call)
            lines.append("    fx_disarm();")
            if "__post" in over:
                lines.append("    " + over["__post"])
            lines.append("    return %s;" % verdict)
        elif ret == "void":
            lines.append("    %s;" % call)
            lines.append("    fx_disarm();")
            lines.append("    return 0;")
        else:
            lines.append("    %s r = %s;" % (ret, call))
            lines.append("    fx_disarm();")
            rel = RETURN_RELEASE.get(ret)
            check = "0"
            if value_check is not None:
                # a string is compared by content: two equal literals need not share an address
                cond = ("r && strcmp(r, %s) == 0" % value_check if value_check.startswith('"')
                        else "r == (%s)" % value_check)
                check = "fx_expect_value(%s, \"%s\")" % (cond, value_check.replace('"', '\\"'))
            lines.append("    int bad = %s;" % check)
            if rel:
                lines.append("    %s(r);" % rel)
            else:
                lines.append("    (void)r;")
            lines.append("    return bad;")
        self.cases.append((name, desc, "\n".join(lines), desc == "valid call" and ret == "tfc_status"))


def generate(funcs):
    em = Emitter()
    for fn in funcs:
        name, params = fn["name"], fn["params"]
        if name in ENDS_PROCESS:
            continue
        valid = [("(%s)(%s)" % (p["type"], fixture(fn, p))) if "*" in p["type"] else fixture(fn, p) for p in params]
        status = fn["ret"] == "tfc_status"
        if name not in NO_VALID_CALL:
            em.add(fn, "valid call", valid, 'fx_expect_ok(s, "%s")' % name)
        for i, p in enumerate(params):
            if not is_pointer(p["type"]):
                continue
            args = list(valid)
            args[i] = "NULL"
            nl = p["nullable"]
            if nl is None:
                if not status:
                    raise ParseError("%s: %s returns %s, not a status, so its pointer '%s' must be marked "
                                     "/* nullable: VALUE */ with what NULL gives" % (fn["where"], name, fn["ret"],
                                                                                     p["name"]))
                em.add(fn, "%s = NULL" % p["name"], args, 'fx_expect_error(s, "%s", "%s")' % (name, p["name"]))
            elif nl[0] == "when":
                if not status:
                    raise ParseError("%s: 'nullable when' on %s, which returns no status" % (fn["where"], name))
                em.add(fn, "%s = NULL" % p["name"], args, 'fx_expect_error(s, "%s", "%s")' % (name, p["name"]))
                idx = [q["name"] for q in params].index(nl[1]) if nl[1] in [q["name"] for q in params] else None
                if idx is None:
                    raise ParseError("%s: marker names '%s', not a parameter of %s" % (fn["where"], nl[1], name))
                args2 = list(args)
                args2[idx] = "0"
                em.add(fn, "%s = NULL, %s = 0" % (p["name"], nl[1]), args2, 'fx_expect_clean(s, "%s")' % name)
            else:
                value = nl[1] if nl[0] == "returns" else None
                if not status and fn["ret"] != "void" and value is None:
                    raise ParseError("%s: %s returns %s: its marker must say what NULL gives "
                                     "(/* nullable: VALUE */)" % (fn["where"], name, fn["ret"]))
                em.add(fn, "%s = NULL (nullable)" % p["name"], args, 'fx_expect_clean(s, "%s")' % name, value)
        for i, p in enumerate(params):
            if p["type"] not in LIMITS or p["name"] not in EXTREME:
                continue
            lo, hi = LIMITS[p["type"]]
            nonneg = p["name"] in NONNEG or (name, p["name"]) in NONNEG_BY_FN
            if p["name"] == "step" and (name, "step") not in NONNEG_BY_FN:
                nonneg = False
            tries = [("-1", nonneg), (lo, nonneg)]
            if (name, p["name"]) not in BUFFER_COUNTS:
                tries.append((hi, False))
            for value, must_fail in tries:
                args = list(valid)
                args[i] = value
                if status:
                    verdict = ('fx_expect_error(s, "%s", "%s")' % (name, p["name"]) if must_fail
                               else 'fx_expect_clean(s, "%s")' % name)
                else:
                    verdict = "0"
                em.add(fn, "%s = %s" % (p["name"], value), args, verdict)
    return em.cases


def emit_c(cases, n_funcs):
    out = ["/* Generated by tests/badargs/gen_badargs.py from the headers in include/tfcore. Do not edit. */",
           "#include <stdint.h>", "#include <stdlib.h>", "#include <string.h>", '#include "fixtures.h"', '#include "badargs.h"', ""]
    for k, (name, desc, body, _) in enumerate(cases):
        out.append("static int case_%d(void) { /* %s: %s */" % (k, name, desc))
        out.append(body)
        out.append("}")
    out.append("")
    out.append("const badargs_case badargs_cases[] = {")
    for k, (name, desc, _, valid) in enumerate(cases):
        out.append('    {"%s", "%s", case_%d, %d},' % (name, desc.replace('"', '\\"'), k, int(valid)))
    out.append("};")
    out.append("const int badargs_n_cases = %d;" % len(cases))
    out.append("const int badargs_n_functions = %d;" % n_funcs)
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    headers = argv[2:] or sorted(glob.glob(os.path.join(ROOT, "include", "tfcore", "*.h")))
    try:
        funcs = parse_headers(headers)
        cases = generate(funcs)
    except ParseError as e:
        print("gen_badargs.py: error: %s" % e, file=sys.stderr)
        return 1
    text = emit_c(cases, len(funcs))
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
