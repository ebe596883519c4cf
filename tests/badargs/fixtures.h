/*
 * Fixtures for the generated bad-argument test (gen_badargs.py): valid
 * objects of every type a public function takes, made on demand inside the
 * forked child that runs one case, and all released by fx_cleanup() before
 * the child exits, so LeakSanitizer sees only what the library leaked.
 *
 * Handles the cases share (fx_graph, fx_optim, fx_gpt, ...) are made once per
 * child; fx_t() makes a fresh tensor each call so outputs never overlap
 * inputs. Out-parameter slots (fx_out_*) start NULL; fx_outs_untouched()
 * says whether every one is still NULL (out-parameters are left untouched on
 * error).
 */
#ifndef TFC_BADARGS_FIXTURES_H
#define TFC_BADARGS_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/tfcore.h"

/* Files the cases read, written once by fx_setup_files(dir) before any case runs. */
void fx_set_dir(const char *dir);
int fx_setup_files(void);
const char *fx_path(const char *name);     /* an existing fixture file: "st", "gpt", "tok", "tokens", ... */
const char *fx_out_path(const char *name); /* a fresh path in the fixture dir to write to */

/* A fresh tensor of dtype with ndim dims (the rest ignored), values 1, 2, 3, ... (0/1 for bool). */
tfc_tensor *fx_t(tfc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
tfc_tensor *fx_f32(int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
tfc_tensor *fx_ids(int64_t n, int64_t mod);             /* i64 [n], values i % mod */
tfc_tensor *fx_ids2(int64_t b, int64_t t, int64_t mod); /* i64 [b, t], values i % mod */
tfc_tensor *fx_leaf(void);                              /* f32 [2,3] leaf requiring grad, with a gradient */
tfc_tensor *fx_leaf64(void);                            /* f64 [3] leaf requiring grad */
tfc_tensor *fx_loss(void);                              /* a scalar recorded on fx_graph() */
tfc_tensor *fx_nonleaf(void);                           /* a [2,3] tensor recorded on fx_graph() */

/* Arrays (zeroed scratch unless said), freed at cleanup. */
void *fx_scratch(size_t bytes);
int64_t *fx_i64s(int n, ...);
int32_t *fx_i32s(int n, ...);
float *fx_floats(int n); /* 0.5, 1.0, 1.5, ... */
tfc_tensor **fx_tensors(int n, ...);
const char **fx_strs(int n, ...);
size_t *fx_sizes(int n, ...);

/* Shared handles, made once per child. */
tfc_graph *fx_graph(void);
tfc_optim *fx_optim(void);   /* AdamW over fx_leaf()-like parameters with gradients */
tfc_tokenizer *fx_tok(void); /* trained (has merges) */
tfc_tokenizer *fx_tok_fresh(void);
tfc_tokenizer *fx_tok_chat(void);      /* untrained, with <|im_start|> and <|im_end|> as special tokens */
const tfc_chat_message *fx_chat(void); /* user "Hello", assistant "Hi!" */
const char *fx_chat_template(void);    /* Qwen2-Instruct's chat_template */
tfc_gpt *fx_gpt(void);                 /* tiny: 1 layer, 2 heads, 8 dims, block 8, vocab 16 */
tfc_gpt_config *fx_gpt_config(void);
tfc_gpt *fx_gpt_lora(void); /* fx_gpt's config with rank-2 LoRA adapters on c_attn and c_proj */
tfc_lora_config *fx_lora_config(void);
const tfc_rope_config *fx_rope_config(void);
tfc_gpt_cache *fx_cache(void);
tfc_safetensors *fx_st(void);
/* gpt.safetensors (fx_gpt saved by tfc_gpt_save), loaded once */
tfc_safetensors *fx_gpt_st(void);
const void *fx_st_bytes(void);
size_t fx_st_len(void);
tfc_token_file *fx_tf(void);
tfc_qweight *fx_qweight(void); /* int8, W [4, 64] */
tfc_optim_options *fx_opts(void);
tfc_attention_options *fx_attn_opts(void);  /* window 1 (the fixtures pass causal 1) */
tfc_hf_save_options *fx_hf_save_opts(void); /* bf16, shards of 4 KB */
tfc_comm *fx_comm(void);                    /* one rank (tfc_comm_init_single) */
tfc_optim *fx_optim_sharded(void);          /* fx_optim()-like, sharded over fx_comm(), stepped once */
tfc_ddp *fx_ddp(void);                      /* over one fx_leaf() */
tfc_spec_stats *fx_spec_stats(void);
tfc_ddp_stats *fx_ddp_stats(void); /* struct_size set */
DLManagedTensor *fx_dlpack(void);
DLManagedTensorVersioned *fx_dlpack_v(void);
/* After a from_dlpack call: on error the caller still owns m. */
void fx_dlpack_done(tfc_status s, DLManagedTensor *m);
void fx_dlpack_v_done(tfc_status s, DLManagedTensorVersioned *m);

/* Callbacks. */
void fx_deleter(void *data, void *ctx);
int32_t fx_on_token(int32_t token, void *ctx);
int32_t fx_on_batch_token(int32_t seq, int32_t token, void *ctx);
/* Two prompts of 2 and 1 ids (char-tiny's vocabulary). */
const int32_t *const *fx_prompts(void);
tfc_status fx_gradcheck_fn(tfc_graph *g, tfc_tensor *const *inputs, int32_t n, tfc_tensor **out, void *ctx);
tfc_status fx_grad_hook(tfc_tensor *leaf, void *user);
tfc_status fx_checkpoint_fn(tfc_graph *g, const tfc_tensor *const *inputs, int32_t n_in, tfc_tensor **outputs,
                            int32_t n_out, void *ctx);
void *fx_ctx(void);
/* A custom op y = x * x (tfc_custom_op). */
const tfc_custom_op_def *fx_custom_def(void);

/* Out-parameter slots, released by type at cleanup. */
tfc_tensor **fx_out_tensor(void);
tfc_tensor **fx_out_tensors(int n);
tfc_graph **fx_out_graph(void);
tfc_optim **fx_out_optim(void);
tfc_comm **fx_out_comm(void);
tfc_ddp **fx_out_ddp(void);
tfc_tokenizer **fx_out_tok(void);
tfc_gpt **fx_out_gpt(void);
tfc_qweight **fx_out_qweight(void);
tfc_gpt_cache **fx_out_cache(void);
tfc_safetensors **fx_out_st(void);
tfc_token_file **fx_out_tf(void);
DLManagedTensor **fx_out_dlpack(void);
DLManagedTensorVersioned **fx_out_dlpack_v(void);
void *fx_out_mem(void); /* a slot for memory the library returns (char **, int32_t **): tfc_free */
int fx_outs_untouched(void);

void fx_cleanup(void);

/*
 * Allocation-failure injection (oom_inject.c): after fx_oom_set(n), the
 * n-th allocation libtfcore makes between fx_arm() and fx_disarm() fails.
 * fx_oom_injected() says whether it happened.
 */
void fx_oom_set(long n);
void fx_arm(void);
void fx_disarm(void);
int fx_oom_injected(void);

/* Verdicts; each prints why it fails to stderr and returns 0 (pass) or 1 (fail). */
int fx_expect_ok(tfc_status s, const char *fn);
int fx_expect_error(tfc_status s, const char *fn, const char *arg);
int fx_expect_clean(tfc_status s, const char *fn);
int fx_expect_value(int ok, const char *want);

#endif
