/*
 * tfcore/gpt.h — decoder-only transformers (GPT-2 and the Llama family):
 * construction, forward with
 * loss, named parameters, incremental decoding with a KV cache, sampling.
 * Guide: docs/MODEL.md.
 *
 * Architectures (tfc_gpt_config.arch; docs/MODEL.md "Architectures"):
 *
 * GPT-2 (TFC_GPT_ARCH_GPT2): token embedding wte [V,C] + learned position
 * embedding wpe [block,C]; n_layer pre-LN blocks
 *     x = x + attn(ln_1(x))      causal multi-head self-attention
 *     x = x + mlp(ln_2(x))       C -> 4C, GELU (tanh form), 4C -> C
 * then ln_f and the LM head logits = ln_f(x) · wteᵀ (tied), or with its
 * own lm_head.weight [V,C] when untied. Parameter names and layouts are
 * Hugging Face GPT-2's (transformer.wte.weight,
 * transformer.h.0.attn.c_attn.weight, ...). The Linear layers inside blocks
 * store their weight as [in, out] (HF's Conv1D layout, y = x · W + b), so
 * weights travel to and from transformers' GPT2LMHeadModel without
 * transposing.
 *
 * The Llama family (TFC_GPT_ARCH_LLAMA, _MISTRAL, _QWEN2): token embedding
 * only (no position table); n_layer pre-norm blocks
 *     x = x + o_proj(attn(rope(q_proj(h)), rope(k_proj(h)), v_proj(h))),  h = RMSNorm(x)
 *     x = x + down_proj(silu(gate_proj(h)) ⊙ up_proj(h)),                  h = RMSNorm(x)
 * with rotary positions (HF's rotate-half form, rope_theta and rope_scaling:
 * cfg.rope), grouped-query attention (n_kv_head key/value heads) and, for
 * Mistral and Qwen2, an optional sliding window; then RMSNorm and the LM
 * head. Names and layouts are transformers' LlamaForCausalLM /
 * MistralForCausalLM / Qwen2ForCausalLM ones (model.embed_tokens.weight,
 * model.layers.0.self_attn.q_proj.weight, ...), every Linear [out, in]
 * (nn.Linear's layout, y = x · Wᵀ + b).
 *
 * lm_head.weight is [V, C] like HF's nn.Linear in every architecture.
 *
 * Thread-safety: a model may be read (forward without a graph, generate
 * with distinct caches) from several threads; training steps that write
 * its parameters must not run concurrently with anything else on it.
 */
#ifndef TFCORE_GPT_H
#define TFCORE_GPT_H

#include "tfcore/core.h"
#include "tfcore/graph.h"
#include "tfcore/kernels.h" /* tfc_rope_config */
#include "tfcore/quant.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_gpt tfc_gpt;
typedef struct tfc_gpt_cache tfc_gpt_cache;

/*
 * Model hyper-parameters. Set struct_size = sizeof(tfc_gpt_config) (the
 * INIT macro does): fields added later go at the end.
 */
/* The architecture a config describes (tfc_gpt_config.arch). */
typedef enum tfc_gpt_arch {
    TFC_GPT_ARCH_GPT2 = 0,    /* GPT-2: LayerNorm, learned positions, GELU MLP, Conv1D weights */
    TFC_GPT_ARCH_LLAMA = 1,   /* Llama 2/3.x, TinyLlama, SmolLM: RMSNorm, RoPE, SwiGLU, GQA */
    TFC_GPT_ARCH_MISTRAL = 2, /* Llama's blocks, no biases, optional sliding window */
    TFC_GPT_ARCH_QWEN2 = 3    /* Llama's blocks with q/k/v biases, optional sliding window */
} tfc_gpt_arch;

/*
 * Model hyper-parameters. Set struct_size = sizeof(tfc_gpt_config) (the
 * INIT macro does): fields added later go at the end, and a caller built
 * against an older, shorter struct gets the defaults of the fields it lacks.
 */
typedef struct tfc_gpt_config {
    uint32_t struct_size;
    int32_t n_layer;     /* transformer blocks, >= 1 */
    int32_t n_head;      /* attention (query) heads; must divide n_embd */
    int32_t n_embd;      /* model width C */
    int32_t block_size;  /* longest context (GPT-2: rows of wpe; Llama family: max_position_embeddings) */
    int32_t vocab_size;  /* rows of wte */
    int32_t bias;        /* GPT-2: 1: Linear and LayerNorm layers have biases, 0: none. Llama family: unread */
    int32_t tie_weights; /* 1: LM head is wte (GPT-2), 0: its own lm_head.weight */
    tfc_dtype dtype;     /* parameter dtype: TFC_DTYPE_F32 or TFC_DTYPE_F64 */
    double ln_eps;       /* the norm's epsilon in (0, 1]: LayerNorm's 1e-5 (GPT-2), rms_norm_eps (Llama family) */
    /*
     * Dropout probability in [0, 1), nanoGPT's places: after the embedding
     * sum, on the attention probabilities, after the attention output
     * projection and after the MLP output projection. Applied only by a
     * training forward (tfc_gpt_forward with a graph whose grad is enabled);
     * evaluation, the KV cache and generation never drop. Added after ln_eps:
     * a caller built against the older struct (struct_size ending at ln_eps)
     * gets 0. Masks: tfc_gpt_set_dropout_stream.
     */
    double dropout;
    /*
     * Added with the Llama family; a caller whose struct ends at dropout
     * gets GPT-2 and the defaults below.
     */
    int32_t arch;           /* a tfc_gpt_arch */
    int32_t n_kv_head;      /* key/value heads (grouped-query attention), dividing n_head; 0: n_head. GPT-2: n_head */
    int64_t mlp_hidden;     /* the MLP's inner width (intermediate_size); 0: the family's default (GPT-2: 4·n_embd,
                           which is the only width it takes; Llama family: 8·n_embd/3 rounded up to a multiple of 32) */
    tfc_rope_config rope;   /* Llama family: rope_theta and rope_scaling (kernels.h); GPT-2 does not read it */
    int32_t attention_bias; /* llama: q, k, v and o projections have biases; qwen2: q, k and v have them (its
                               loader sets 1, as Qwen2's own does); mistral: must be 0. GPT-2: unread */
    int32_t mlp_bias;       /* llama: gate/up/down projections have biases; mistral, qwen2: must be 0 */
    int32_t sliding_window; /* mistral, qwen2: a query sees at most this many keys, itself included; 0: all */
} tfc_gpt_config;

/* Defaults: the char-tiny preset (GPT-2) with a 256-token vocabulary, no dropout. */
#define TFC_GPT_CONFIG_INIT                                                                                          \
    {                                                                                                                \
        (uint32_t)sizeof(tfc_gpt_config), 4, 4, 128, 128, 256, 1, 1, TFC_DTYPE_F32, 1e-5, 0.0, TFC_GPT_ARCH_GPT2, 0, \
            0, TFC_ROPE_CONFIG_INIT, 0, 0, 0                                                                         \
    }

/*
 * The name of an architecture ("gpt2", "llama", "mistral", "qwen2": the
 * model_type of its Hugging Face config.json), or NULL for another value.
 * Thread-safe; the string is static.
 */
TFC_API const char *tfc_gpt_arch_name(int32_t arch);
/*
 * The architecture of a name as tfc_gpt_arch_name spells it into *arch.
 * Errors: NULL arguments, an unknown name (TFC_ERR_INVALID_ARG listing the
 * known ones; *arch untouched). Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_arch_from_name(const char *name, int32_t *arch);

/*
 * Fill *cfg with a named preset (cfg->struct_size must be set):
 *   "char-tiny"  4 layers, 4 heads, 128 dims, block 128   (vocab left as in *cfg)
 *   "char-small" 6 layers, 6 heads, 384 dims, block 256   (vocab left as in *cfg)
 *   "gpt2-mini"  4 layers, 4 heads, 256 dims, block 128, vocab 50257
 *   "gpt2"      12 layers, 12 heads, 768 dims, block 1024, vocab 50257
 *   "llama-tiny" the Llama family at char-tiny's scale: arch llama, 4 layers,
 *                4 heads, 2 kv heads, 128 dims, MLP 352, block 128, untied
 *                head, rope_theta 10000 (vocab left as in *cfg)
 * The GPT-2 presets set arch to GPT-2 and n_kv_head, mlp_hidden to their
 * defaults (0). Other fields are left as they are. Errors: NULL arguments,
 * unknown name (TFC_ERR_INVALID_ARG listing the known ones).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_config_preset(const char *name, tfc_gpt_config *cfg);

/*
 * Build a model from the Philox stream `seed`. GPT-2's initialisation:
 * every weight matrix and embedding ~ normal(0, 0.02), the residual output
 * projections (attn.c_proj, mlp.c_proj) ~ normal(0, 0.02/sqrt(2·n_layer)),
 * biases 0, LayerNorm weight 1 / bias 0. The Llama family's (transformers'
 * _init_weights): every Linear and the embedding ~ normal(0, 0.02), biases
 * 0, RMSNorm weights 1. Each parameter draws from its own offset, so the
 * values depend only on (config, seed). Every parameter requires grad. The
 * model's config (tfc_gpt_get_config) has n_kv_head and mlp_hidden
 * resolved from their 0 defaults. Errors: NULL arguments, struct_size too
 * small (TFC_ERR_VERSION; a struct ending at ln_eps is accepted, dropout 0),
 * non-positive sizes, n_embd % n_head != 0, dropout outside [0, 1), bad
 * dtype, an unknown arch, n_kv_head not dividing n_head, a field the
 * architecture does not have set (GPT-2 with n_kv_head or mlp_hidden of
 * its own, mistral with biases, llama with a sliding window), an odd head
 * dim or a bad rope config for the Llama family, dropout with grouped-query
 * attention or a sliding window (the unfused attention it needs has
 * neither) (TFC_ERR_INVALID_ARG naming the field), TFC_ERR_OOM.
 * Release with tfc_gpt_release.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_new(const tfc_gpt_config *cfg, uint64_t seed, tfc_gpt **out);

/*
 * Where a training forward's dropout masks come from (cfg.dropout > 0). The
 * training forward numbered `counter` (counted from the value set here, +1
 * per training forward) draws the mask of site s (0: the embedding sum; for
 * layer l, 1 + 3l: the attention probabilities, 2 + 3l: after attn.c_proj,
 * 3 + 3l: after mlp.c_proj) from the Philox stream (key, 0) with key =
 * splitmix64(splitmix64(seed ^ splitmix64(counter)) + s) (docs/MODEL.md,
 * "Dropout"), the stream tfc_dropout(..., key, 0, ...) uses, so a mask is a
 * function of (seed, counter, site) alone: set (seed, step) before a step
 * and a resumed run repeats the masks of an unbroken one. A new model
 * starts at (its tfc_gpt_new seed, 0); a loaded one at (0, 0). Errors: NULL
 * m (TFC_ERR_INVALID_ARG). Not thread-safe with a forward on m.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_set_dropout_stream(tfc_gpt *m, uint64_t seed, uint64_t counter);

/* Free the model; tensors the caller still holds stay valid. NULL is accepted. */
TFC_API void tfc_gpt_release(tfc_gpt *m /* nullable */);

/* Copy the model's config into *cfg (cfg->struct_size must be set; copies that many bytes at most). */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_get_config(const tfc_gpt *m, tfc_gpt_config *cfg);

/*
 * The parameters in a fixed order with their Hugging Face names:
 * *names[i] and *params[i] for i < *n. Both arrays and their contents are
 * borrowed: valid while the model lives (retain a tensor to keep it
 * longer). With tied weights there is no lm_head.weight entry.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_params(const tfc_gpt *m, int32_t *n, const char *const **names,
                                                tfc_tensor *const **params);

/*
 * Whether parameter i (in tfc_gpt_params order) takes weight decay in
 * GPT-2's training recipe: 1 for the weight matrices and the embeddings, 0
 * for biases and LayerNorm parameters. The model's parameter table says
 * which; optimizer groups built from it (tfcore train does) follow the
 * model. Errors: NULL m or decay, i outside [0, n) (TFC_ERR_INVALID_ARG);
 * *decay is untouched on error. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_param_decay(const tfc_gpt *m, int32_t i, int32_t *decay);

/* Total number of parameter elements (tied weights counted once). */
TFC_API int64_t tfc_gpt_num_elements(const tfc_gpt *m /* nullable: 0 */);

/*
 * Move every parameter of m to `device` (TFC_DEVICE_CPU, index 0, or
 * TFC_DEVICE_CUDA, index device_index), keeping values and requires_grad.
 * The model's previous parameter tensors are released and their gradients
 * dropped: pointers from an earlier tfc_gpt_params and optimizers built
 * on them no longer refer to the model, so move first, then build the
 * optimizer. On CUDA, tfc_gpt_forward accepts idx/targets on the CPU
 * (copied to the device each call) or on the model's device, and its
 * logits and loss live on the device (the loss is f32); the KV cache and
 * tfc_gpt_generate need the model on the CPU. Errors: NULL m
 * (TFC_ERR_INVALID_ARG), an unknown device type or CUDA unavailable
 * (TFC_ERR_DEVICE with the loader's reason), TFC_ERR_OOM; on error m is
 * unchanged. Not thread-safe with any other use of m.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_to_device(tfc_gpt *m, tfc_device_type device, int32_t device_index);

/*
 * Forward pass. idx [B, T] token ids (i32 or i64, each in [0, vocab),
 * 1 <= T <= block_size). *logits (may be NULL: not wanted) receives
 * [B, T, vocab] of the model's dtype. With targets [B, T] (same rules,
 * except that a target of -100, PyTorch's ignore_index, marks a position to skip; NULL = no loss),
 * *loss receives the mean cross-entropy over the B·T positions not skipped as a scalar. When logits is NULL the LM head and the
 * loss are one fused op (tfc_linear_cross_entropy): the [B·T, vocab] logits and their gradient are never allocated.
 * Ops are recorded on g (NULL = no graph, nothing recorded). Errors: NULL m/idx, wrong shapes or dtypes, ids out of range
 * (TFC_ERR_SHAPE / TFC_ERR_DTYPE / TFC_ERR_INVALID_ARG), targets with
 * loss == NULL, TFC_ERR_OOM. On error nothing is written.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_forward(tfc_gpt *m, tfc_graph *g /* nullable */, const tfc_tensor *idx,
                                                 const tfc_tensor *targets /* nullable */,
                                                 tfc_tensor **logits /* nullable */, tfc_tensor **loss);

/*
 * Activation checkpointing of the transformer blocks (PyTorch's
 * torch.utils.checkpoint around each block): with on = 1, a forward on a
 * recording graph keeps, per block, only the block's input [B·T, n_embd]
 * for backward (tfc_graph_checkpoint) instead of its activations (the
 * LayerNorm inputs and statistics, q/k/v, attention outputs and row
 * statistics, the MLP's [B·T, 4·n_embd] pre- and post-GELU); backward
 * re-runs each block's forward from that input just before
 * differentiating it. Gradients are bitwise those of on = 0; the cost is
 * about one more forward pass per step. Forwards without a graph (or with
 * recording off) and cached decoding are unaffected. The model must
 * outlive the backward of a forward run with it on. Default 0.
 * Errors: NULL m, on not 0 or 1 (TFC_ERR_INVALID_ARG).
 * Not thread-safe with any other use of m.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_set_recompute(tfc_gpt *m, int32_t on);
/* 1 when tfc_gpt_set_recompute turned recompute on, else 0 (also for NULL). */
TFC_API int32_t tfc_gpt_get_recompute(const tfc_gpt *m /* nullable: 0 */);

/*
 * bf16 mixed precision (autocast), torch.autocast('cpu', torch.bfloat16)'s
 * recipe: with dtype TFC_DTYPE_BF16, every Linear of the blocks and the LM
 * head runs as tfc_linear_bf16 — weights and activations rounded to bf16
 * (round-to-nearest-even) as they enter the GEMM, products summed in f32,
 * f32 results — while the parameters stay f32 (the master weights the
 * optimizer and its state update in f32; their gradients accumulate in
 * f32), and embeddings, LayerNorm, GELU, softmax, cross-entropy and all
 * reductions stay f32. Attention follows the device: f32 on the CPU; on
 * CUDA, as PyTorch's CUDA autocast runs SDPA, q, k, v are rounded to bf16
 * for the tensor-core attention kernels and its output and gradients come
 * back f32 (training forwards; with a KV cache, sampling, it stays f32).
 * The model keeps a
 * bf16 copy of each Linear weight (half the bytes of the weight), rounded
 * on first use and again only when the weight's version changed (an
 * optimizer step, a load): once per step, not per GEMM. With autocast on
 * the loss-only forward runs the head and its loss fused, without the
 * logits, on the CPU (the same bf16 formula, ∂loss/∂logits rounded to bf16
 * before the head's gradient products); on CUDA it materialises the
 * (padded) logits. Saved
 * checkpoints are the f32 parameters, loadable with autocast on or off.
 * TFC_DTYPE_F32 turns it off (frees the copies). The same switch serves
 * inference (tfcore sample / eval --dtype bf16). On the CPU it runs on any
 * CPU (lib/cpu/gemm_bf16.c: exact bf16 products, f32 accumulation); on CUDA
 * the GEMMs are the module's bf16 x bf16 -> f32 cuBLASLt products (see
 * docs/CUDA.md for what has run on a GPU). The setting stays on across
 * tfc_gpt_to_device either way; the bf16 copies are dropped by the move and
 * remade on the new device at the next forward.
 * Errors: NULL m, dtype neither bf16 nor f32 (TFC_ERR_INVALID_ARG); an f64
 * model (TFC_ERR_DTYPE); a quantized model, where autocast is not
 * implemented (TFC_ERR_UNSUPPORTED; a model quantized after autocast was set
 * fails its forward so); TFC_ERR_OOM. On error the
 * setting is unchanged. Not thread-safe with any other use of m (forwards
 * without a graph may still run concurrently once it is set).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_set_autocast(tfc_gpt *m, tfc_dtype dtype);
/* TFC_DTYPE_BF16 when tfc_gpt_set_autocast turned autocast on, else TFC_DTYPE_F32 (also for NULL). */
TFC_API tfc_dtype tfc_gpt_get_autocast(const tfc_gpt *m /* nullable: TFC_DTYPE_F32 */);
/*
 * How many bf16 weight copies autocast has made on m since it was turned on
 * (one per Linear weight per change of that weight): 0 when off or m NULL.
 * For tests and diagnostics of the once-per-step refresh. Thread-safe.
 */
TFC_API int64_t tfc_gpt_autocast_refreshes(const tfc_gpt *m /* nullable: 0 */);

/*
 * A key/value cache for incremental decoding of `batch` sequences: holds
 * keys and values of every layer for up to block_size positions.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_cache_new(const tfc_gpt *m, int32_t batch, tfc_gpt_cache **out);
/* Forget the cached positions (length back to 0). */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_cache_reset(tfc_gpt_cache *c);
/* Number of positions currently cached (0 for NULL). */
TFC_API int32_t tfc_gpt_cache_length(const tfc_gpt_cache *c /* nullable: 0 */);
/* Free a cache. NULL is accepted. */
TFC_API void tfc_gpt_cache_release(tfc_gpt_cache *c /* nullable */);

/*
 * Incremental forward, no graph: idx [batch, T] are the tokens at
 * positions len .. len+T-1 after the len already cached; their keys and
 * values are appended and only these T positions are computed (the prefix
 * is never recomputed). *logits receives [batch, T, vocab]. The logits equal
 * those of tfc_gpt_forward on the whole sequence. Errors: as forward, a
 * cache of another model or batch size, len + T > block_size
 * (TFC_ERR_INVALID_ARG; the cache is unchanged).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_forward_cached(tfc_gpt *m, tfc_gpt_cache *c, const tfc_tensor *idx,
                                                        tfc_tensor **logits);

/*
 * Draw one token from a logits vector of n entries (f32 host memory):
 *  - temperature == 0: greedy (the first maximum), no randomness;
 *  - else logits / temperature, then top_k (> 0: keep the k largest; 0 =
 *    all), then top_p (in (0, 1]: keep the smallest set of most probable
 *    tokens whose probability mass reaches p, including the token that
 *    crosses it; 1 = all), renormalise, and draw with the uniform number
 *    from the Philox stream (seed, offset) — the same inputs give the same
 *    token. Ties in ordering go to the lower id.
 * Errors: NULL arguments, n < 1, negative or non-finite temperature,
 * top_k < 0, top_p outside (0, 1], non-finite logits (TFC_ERR_INVALID_ARG),
 * TFC_ERR_OOM. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_sample(const float *logits, int64_t n, double temperature, int32_t top_k,
                                            double top_p, uint64_t seed, uint64_t offset, int32_t *token);

/*
 * Called with each generated token; return non-zero to stop generation
 * (tfc_gpt_generate then returns TFC_ERR_CANCELLED, with the tokens so far
 * in out).
 */
typedef int32_t (*tfc_gpt_token_fn)(int32_t token, void *ctx);

/*
 * Generate max_new tokens after the n_prompt prompt tokens (n_prompt >= 1),
 * one sequence, with a KV cache: the prompt is run once, then each new
 * token is one T=1 step. Token i is drawn with tfc_sample(..., seed, i).
 * When the context reaches block_size the cache is rebuilt from the last
 * block_size/2 tokens (the model cannot see further back anyway).
 * out receives the new tokens (cap >= max_new); on_token (may be NULL) sees
 * each as it comes. Errors: as tfc_sample and forward, cap < max_new,
 * TFC_ERR_CANCELLED.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_generate(tfc_gpt *m, const int32_t *prompt, int32_t n_prompt, int32_t max_new,
                                                  double temperature, int32_t top_k, double top_p, uint64_t seed,
                                                  int32_t *out, int32_t cap, tfc_gpt_token_fn on_token /* nullable */,
                                                  void *ctx /* nullable */);

/*
 * Called by tfc_gpt_generate_batch with each token as it is drawn: seq is
 * the sequence's index in the batch. Return non-zero to stop that sequence
 * (the token just seen is its last); the others go on.
 */
typedef int32_t (*tfc_gpt_batch_token_fn)(int32_t seq, int32_t token, void *ctx);

/*
 * Generate max_new tokens after each of n_seq prompts together: prompts[i]
 * holds n_prompts[i] >= 1 ids, and the prompts may differ in length. Each
 * sequence has its own KV cache and its own position (no padding): its
 * prompt is run once on its own, then every step decodes one token of every
 * unfinished sequence in one forward pass, so each weight is read once per
 * step for all of them (the Linear layers and the LM head are [n, C] GEMMs;
 * attention is taken per sequence over its own cache). Throughput grows
 * with n_seq until the GEMMs become compute-bound.
 *
 * Sequence i draws its token j with tfc_sample(..., seed + i, j), so its
 * tokens are those tfc_gpt_generate(m, prompts[i], ..., seed + i, ...)
 * gives, up to the rounding of a GEMM over n rows instead of one (greedy
 * decoding gives the same tokens unless two logits tie to that rounding).
 * A sequence whose context reaches block_size restarts from its last
 * block_size/2 tokens, as in tfc_gpt_generate.
 *
 * out receives n_seq rows of max_new ids (out[i·max_new + j]); a sequence
 * stopped early by on_token has its remaining slots set to -1. lengths (may
 * be NULL) receives n_seq counts of the tokens each sequence produced.
 * Cache memory is allocated for min(block_size, longest prompt + max_new)
 * positions per sequence, not for block_size.
 *
 * Errors (out unchanged on every argument error): NULL m, prompts,
 * n_prompts or (max_new > 0) out, n_seq < 1, n_prompts[i] < 1, a NULL
 * prompts[i], an id outside [0, vocab), max_new < 0, the sampling arguments
 * as tfc_sample (TFC_ERR_INVALID_ARG, naming the sequence and position);
 * cap < n_seq·max_new (TFC_ERR_BUFFER_TOO_SMALL); m on CUDA
 * (TFC_ERR_DEVICE: the KV caches are host memory, as for
 * tfc_gpt_generate); TFC_ERR_OOM. Thread-safety: as tfc_gpt_generate (m only read).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_generate_batch(tfc_gpt *m, int32_t n_seq, const int32_t *const *prompts,
                                                        const int32_t *n_prompts, int32_t max_new, double temperature,
                                                        int32_t top_k, double top_p, uint64_t seed, int32_t *out,
                                                        int64_t cap, int32_t *lengths /* nullable */,
                                                        tfc_gpt_batch_token_fn on_token /* nullable */,
                                                        void *ctx /* nullable */);

/* What a speculative generation did (tfc_gpt_generate_speculative). Set struct_size = sizeof(tfc_spec_stats). */
typedef struct tfc_spec_stats {
    uint32_t struct_size;
    int64_t drafted;       /* tokens the draft model proposed */
    int64_t accepted;      /* of those, tokens the target accepted */
    int64_t target_passes; /* forward passes of the target model, the prompt's included */
} tfc_spec_stats;

/*
 * Speculative decoding: generate max_new tokens after the prompt with
 * `target`, a smaller `draft` model of the same vocabulary proposing k
 * tokens at a time that the target checks in one forward pass of k + 1
 * positions. Token j of the output is accepted from the draft with
 * probability min(1, p(x)/q(x)) (p: the target's distribution, q: the
 * draft's, both after temperature, top_k and top_p as tfc_sample applies
 * them); at the first rejection the token is drawn from the normalised
 * max(0, p − q) instead, and when all k are accepted one more is drawn from
 * the target's next distribution. The output therefore follows the
 * target's distribution exactly (Leviathan et al. 2023; Chen et al. 2023),
 * whatever the draft; greedy (temperature 0) gives the tokens
 * tfc_gpt_generate(target, ...) gives, up to the rounding of a k+1-position
 * pass against single steps. Random numbers: Philox stream (seed, j) for
 * output position j (element 0 for the target's draws, 1 for the draft's,
 * 2 for the acceptance test), so a seed reproduces a text for a given k but
 * not the text tfc_gpt_generate draws with that seed.
 *
 * Each model keeps its own KV cache; rejected positions are dropped from
 * both. A model whose context reaches its block_size restarts from the last
 * half of its block (each by its own, so a small draft never shortens the
 * target's context); greedy equals tfc_gpt_generate while the target's
 * context fits its block. stats (may be NULL) receives the counts (acceptance rate
 * = accepted / drafted). out, cap, on_token and ctx as tfc_gpt_generate
 * (stopping → TFC_ERR_CANCELLED with the tokens so far in out).
 *
 * Errors: NULL target, draft or prompt; vocab sizes that differ; k < 1,
 * k > 64 or k > the smaller block_size / 2; n_prompt < 1, ids outside the vocabulary,
 * max_new < 0, sampling arguments as tfc_sample, stats->struct_size too
 * small (TFC_ERR_INVALID_ARG); cap < max_new (TFC_ERR_BUFFER_TOO_SMALL); a
 * model on CUDA (TFC_ERR_DEVICE); TFC_ERR_OOM. Both models are only read.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_generate_speculative(
    tfc_gpt *target, tfc_gpt *draft, const int32_t *prompt, int32_t n_prompt, int32_t max_new, int32_t k,
    double temperature, int32_t top_k, double top_p, uint64_t seed, int32_t *out, int32_t cap,
    tfc_spec_stats *stats /* nullable */, tfc_gpt_token_fn on_token /* nullable */, void *ctx /* nullable */);

/*
 * Quantize m for inference (formats: include/tfcore/quant.h): the weights
 * of the four Linear layers of every block (attn.c_attn, attn.c_proj,
 * mlp.c_fc, mlp.c_proj) become tfc_qweight handles, and forward passes
 * without a graph, tfc_gpt_forward_cached and tfc_gpt_generate run them
 * with tfc_qlinear. group_size: 0 for INT8 (one scale per output feature);
 * for INT4 a multiple of 32 that divides n_embd (32 or 64 usually).
 *
 * Stays f32: the embeddings wte and wpe, LayerNorms, biases and the LM
 * head. The head is tied to wte (GPT-2), which is also the embedding table
 * the forward pass gathers rows from; tfc_gpt_quantize_head (below)
 * quantizes a copy of it for the head alone (or an untied lm_head).
 *
 * The f32 weights of the quantized layers are dropped (the point is
 * memory): they leave the list of tfc_gpt_params (and tfc_gpt_num_elements),
 * earlier pointers into that list are no longer valid, and the model cannot
 * go back to f32 (load the f32 checkpoint again). tfc_gpt_save then writes
 * the packed codes (docs/MODEL.md, "Quantized inference").
 *
 * A quantized model is inference-only: tfc_gpt_forward with a graph and
 * tfc_gpt_to_device to CUDA are TFC_ERR_UNSUPPORTED, as is tfc_gpt_load_into.
 * Errors (m unchanged): NULL m, an unknown format, a bad group_size (with
 * the reason) → TFC_ERR_INVALID_ARG; m already quantized →
 * TFC_ERR_INVALID_ARG; an f64 model → TFC_ERR_DTYPE (quantize from f32);
 * m on CUDA → TFC_ERR_UNSUPPORTED; a non-finite weight → TFC_ERR_NONFINITE
 * naming the parameter and row; TFC_ERR_OOM. Not thread-safe with any other
 * use of m.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_quantize(tfc_gpt *m, tfc_qformat format, int32_t group_size);

/* The format m's block Linear layers are quantized in; 0 for an f32 (or f64) model and for NULL. */
TFC_API tfc_qformat tfc_gpt_quant_format(const tfc_gpt *m /* nullable: 0 */);
/* The int4 group size of a quantized model; 0 for INT8 and unquantized models; -1 for NULL. */
TFC_API int32_t tfc_gpt_quant_group_size(const tfc_gpt *m /* nullable: -1 */);

/*
 * Quantize m's LM head for inference (formats: include/tfcore/quant.h):
 * the head weight [V, C] — lm_head.weight, or wte for a tied model —
 * becomes a tfc_qweight quantized along C, and forward passes without a
 * graph, tfc_gpt_forward_cached and tfc_gpt_generate compute the logits
 * with tfc_qlinear on it (the loss-only forward then materialises the
 * [B·T, V] logits instead of the fused f32 head). It is the largest matrix
 * of GPT-2 (38.6M of 124M parameters) and is read once per decoded token,
 * so decoding at the memory roofline needs it quantized. group_size: 0 for
 * INT8 (one scale per vocab row); for INT4 a multiple of 32 that divides
 * n_embd.
 *
 * Independent of tfc_gpt_quantize: the head can be quantized on a model
 * whose blocks are f32 or quantized (in either order, in any format), and
 * tfc_gpt_quant_format keeps describing the blocks only.
 *
 * Memory. Untied: lm_head.weight is replaced — it leaves tfc_gpt_params and
 * tfc_gpt_num_elements, earlier pointers into that list are no longer
 * valid. Tied: wte stays f32 (the embedding gathers one row of it per
 * token, a negligible read) and the handle is an extra copy of it: V·C
 * bytes (int8: +4 bytes of scale per row) or V·C/2 (int4: + 4·V·C/G of
 * scales) on top of the f32 model, e.g. +38.8 MB (int8) for GPT-2 124M; the
 * handle is owned by m and freed with it.
 *
 * Like a quantized model, a model with a quantized head is inference-only:
 * tfc_gpt_forward with a graph and tfc_gpt_to_device to CUDA are
 * TFC_ERR_UNSUPPORTED, as is tfc_gpt_load_into; the head cannot go back to
 * f32 (load the f32 checkpoint again). tfc_gpt_save writes the handle as
 * lm_head.weight.qcodes / .qscales with the metadata tfc.quant.head.format
 * and tfc.quant.head.group_size (docs/MODEL.md, "Quantized inference");
 * tfc_gpt_load restores it.
 *
 * Errors (m unchanged): NULL m, an unknown format, a bad group_size (with
 * the reason) → TFC_ERR_INVALID_ARG; the head already quantized →
 * TFC_ERR_INVALID_ARG; an f64 model → TFC_ERR_DTYPE; m on CUDA →
 * TFC_ERR_UNSUPPORTED; a non-finite head weight → TFC_ERR_NONFINITE naming
 * it and its row; TFC_ERR_OOM. Not thread-safe with any other use of m.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_quantize_head(tfc_gpt *m, tfc_qformat format, int32_t group_size);

/* The format m's LM head is quantized in (tfc_gpt_quantize_head); 0 for an f32 head and for NULL. */
TFC_API tfc_qformat tfc_gpt_head_quant_format(const tfc_gpt *m /* nullable: 0 */);
/* The int4 group size of m's quantized LM head; 0 for INT8 and an f32 head; -1 for NULL. */
TFC_API int32_t tfc_gpt_head_quant_group_size(const tfc_gpt *m /* nullable: -1 */);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_GPT_H */
