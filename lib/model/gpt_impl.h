/*
 * The GPT model's private layout, shared by gpt_config.c (presets,
 * validation), gpt_params.c (the parameter table: construction, the
 * parameter list, device moves), gpt.c (forward) and gpt_cache.c
 * (incremental decoding). Built on the public API only.
 */
#ifndef TFC_MODEL_GPT_IMPL_H
#define TFC_MODEL_GPT_IMPL_H

#include <stddef.h>

#include "tfcore/gpt.h"
#include "tfcore/io.h"
#include "tfcore/lora.h"
#include "tfcore/ops.h"
#include "tfcore/quant.h"
#include "model/gpt_table.h"

/* One adapted Linear layer (gpt_lora.c): A [r, in], B [out, r], aliases of the adapter set's tensors. */
typedef struct gpt_lora {
    tfc_tensor *a, *b;
    double scale; /* alpha / r */
} gpt_lora;

typedef struct gpt_linear gpt_linear;

/*
 * How a Linear runs: a strategy (gpt_linear.c) chosen once for every Linear
 * when the model's mode changes (tfc_gpt_choose_linears: construction,
 * tfc_gpt_set_autocast, quantizing, adding, loading, merging or dropping
 * LoRA, device moves), never per call. run: *y = a new reference to
 * x [N, in] through l, recorded on g when g is not NULL.
 */
typedef struct gpt_linear_ops {
    const char *name;
    tfc_status (*run)(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x, tfc_tensor **y);
} gpt_linear_ops;

/*
 * One block Linear, y = x · w (+ b) with w [in, out] (HF's Conv1D, GPT-2),
 * or y = x · wᵀ (+ b) with w [out, in] (nn.Linear, the Llama family). Its
 * tensors alias the model's parameters (fields of gpt_params.c's table);
 * after tfc_gpt_quantize, q holds the weight and w is NULL.
 */
struct gpt_linear {
    tfc_tensor *w, *b;          /* b NULL without biases */
    int32_t in_out;             /* w is [in, out] (the table's transpose column); else [out, in] */
    tfc_qweight *q;             /* owned; the quantized weight, or NULL */
    gpt_lora *lora;             /* the LoRA adapter (owned by tfc_gpt.lora), or NULL */
    int32_t slot;               /* layer · GPT_N_LINEAR + index: this Linear's autocast copy */
    const gpt_linear_ops *base; /* f32, bf16 autocast or quantized: how w (or q) runs */
    const gpt_linear_ops *ops;  /* what a forward calls: base, or LoRA over base */
};

/* The block Linears, in gpt_block.lin[] order (the table's `linear` column): GPT-2's ... */
enum { GPT_LIN_QKV = 0, GPT_LIN_ATTN_OUT = 1, GPT_LIN_MLP_IN = 2, GPT_LIN_MLP_OUT = 3 };
/* ... and the Llama family's. */
enum { GPT_LIN_Q = 0, GPT_LIN_K = 1, GPT_LIN_V = 2, GPT_LIN_O = 3, GPT_LIN_GATE = 4, GPT_LIN_UP = 5, GPT_LIN_DOWN = 6 };

/*
 * One transformer block's parameters, for the forward pass; the biases are
 * NULL when the architecture has none. Which fields exist, their shapes and
 * init: gpt_params.c's table.
 */
typedef struct gpt_block {
    tfc_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    gpt_linear lin[GPT_N_LINEAR]; /* the architecture's first table->n_linear are used */
} gpt_block;

/*
 * How the LM head runs, chosen with the block Linears (gpt_linear.c): the
 * f32 head, the bf16 autocast head or the quantized head. h [N, C] is the
 * final norm's output, W [V, C] the head weight (wte when tied).
 * logits: *lg [N, V] = h · Wᵀ; with `padded` (for a loss only) the head may
 * hand over a device's padded width Vp > V whose extra logits are −1e30.
 * loss: *loss = mean cross-entropy of those logits against targets [N]
 * (TFC_GPT_IGNORE_INDEX rows skipped), by the fused kernel where the
 * strategy has one, so the [N, V] logits need not exist. Both record on g
 * when g is not NULL (the quantized head never does: inference only).
 */
typedef struct gpt_head_ops {
    const char *name;
    tfc_status (*logits)(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, int padded, tfc_tensor **lg);
    tfc_status (*loss)(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *targets,
                       tfc_tensor **loss);
} gpt_head_ops;

/* Targets equal to this are skipped by the loss: PyTorch's cross_entropy default, so a target batch padded for
 * torch (or for tfcore.cross_entropy) means the same here. */
#define TFC_GPT_IGNORE_INDEX (-100)

/*
 * A model of config cfg whose parameter values are left unwritten, for a
 * loader that writes every one of them (through the loader contract) before
 * handing the model out: tfc_gpt_new's random init of a large model would
 * cost seconds and be overwritten. Errors as tfc_gpt_new's, prefixed by fn.
 */
tfc_status tfc_gpt_alloc(const char *fn, const tfc_gpt_config *cfg, tfc_gpt **out);

/* Choose every block Linear's strategy and the head's for m's current mode (gpt_linear.c); cannot fail. */
void tfc_gpt_choose_linears(tfc_gpt *m);

/*
 * The last step of quantizing or loading a quantized model, given the status
 * s of building the handles qs[l·GPT_N_LINEAR + j] (a malloc'd array, freed
 * here; failed slots are NULL). When s is TFC_OK, m becomes quantized with
 * them (ownership passes to m): the f32 weights they replace leave the
 * parameter list and are released. Otherwise every handle is released and m
 * is untouched. Allocates nothing; returns s.
 */
tfc_status tfc_gpt_install_qweights(tfc_gpt *m, tfc_qformat format, int32_t group_size, tfc_qweight **qs, tfc_status s);

/*
 * params[] owns the model's one reference to each parameter. The named
 * fields (wte … lm_head, blocks[]) are aliases of those same pointers and
 * hold no reference: tfc_gpt_release releases params[] only, and a device
 * move rewrites each field through fields[].
 */
struct tfc_gpt {
    tfc_gpt_config cfg;
    gpt_arch arch;                                   /* what the forward computes: gpt_arch_of(cfg) */
    tfc_tensor *wte, *wpe, *lnf_w, *lnf_b, *lm_head; /* lm_head NULL when tied */
    gpt_block *blocks;                               /* n_layer */
    int32_t n_params;
    char **names;                     /* n_params owned strings (Hugging Face names) */
    tfc_tensor **params;              /* n_params owned references, in tfc_gpt_params order */
    tfc_tensor ***fields;             /* fields[i]: the named field that aliases params[i] */
    const gpt_param_row **rows;       /* rows[i]: params[i]'s table row (its decay, Linear, llm.c place) */
    tfc_qformat qformat;              /* 0: f32 (or f64); else the block Linears' weights are their handles q */
    int32_t qgroup;                   /* the int4 group size; 0 for int8 */
    tfc_qweight *head_q;              /* owned; after tfc_gpt_quantize_head the LM head [V, C] (else NULL) */
    struct gpt_lora_set *lora;        /* owned; the LoRA adapters (gpt_lora.c), or NULL */
    int32_t recompute;                /* tfc_gpt_set_recompute: each block a tfc_graph_checkpoint in training */
    uint64_t drop_seed, drop_counter; /* the next training forward's dropout stream (tfc_gpt_set_dropout_stream) */
    struct gpt_autocast *autocast;    /* owned; bf16 autocast's weight copies (gpt_autocast.c), NULL when off */
    const gpt_head_ops *head;         /* how the LM head runs (tfc_gpt_choose_linears) */
};

/* bf16 autocast (gpt_autocast.c): the cached bf16 weight copies of tfc_gpt_set_autocast. */
typedef struct gpt_autocast gpt_autocast;
/* Release m's autocast state and turn it off; nothing when it is off. */
void tfc_gpt_autocast_free(tfc_gpt *m);
/* Release the cached bf16 copies (and their references to the f32 weights), keeping autocast on: after a move. */
void tfc_gpt_autocast_drop_copies(tfc_gpt *m);
/* TFC_OK when m can run autocast now (f32, not quantized), else the error prefixed by fn. */
tfc_status tfc_gpt_autocast_check(const char *fn, const tfc_gpt *m);
/*
 * *y = tfc_linear_bf16(g, x, l->w, bf16 copy of l->w, l->b), the copy in
 * l's slot, cached and refreshed when w's version changes. m->autocast must
 * be set.
 */
tfc_status tfc_gpt_autocast_linear(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x,
                                   tfc_tensor **y);
/*
 * The LM head's logits [N, V] = bf16(h) · bf16(w)ᵀ in f32, for h [N, C] and w [V, C], w's copy cached. With
 * `padded` (for a softmax cross-entropy only) they may be [N, Vp], Vp ≥ V the device's padded width, the extra
 * columns -1e30 (gpt_autocast.c says why that leaves the loss and the gradients exact).
 */
tfc_status tfc_gpt_autocast_head(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w, int padded,
                                 tfc_tensor **lg);
/*
 * The loss of that head in the fused pass, without the logits
 * (tfc_linear_cross_entropy_autocast), where the device runs it (the CPU):
 * *fused = 1 and *loss set. *fused = 0 elsewhere (CUDA, whose head pads):
 * the caller takes tfc_gpt_autocast_head and the cross-entropy.
 */
tfc_status tfc_gpt_autocast_loss(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w,
                                 const tfc_tensor *targets, int64_t ignore_index, int *fused, tfc_tensor **loss);

/* Release m's LoRA adapters (gpt_lora.c); nothing when it has none. */
void tfc_gpt_lora_free(tfc_gpt *m);

/*
 * y = base + scale·(x·Aᵀ)·Bᵀ for one adapted layer (recorded on g when it is
 * not NULL): *y is a new reference.
 */
tfc_status tfc_gpt_lora_apply(tfc_graph *g, const gpt_lora *lo, const tfc_tensor *x, const tfc_tensor *base,
                              tfc_tensor **y);

/*
 * Copies of m's adapter tensors on (device, index) into a malloc'd array
 * *moved (NULL when m has none), for tfc_gpt_to_device; the model is not
 * changed. tfc_gpt_lora_install_moved then puts them in place (consumes the
 * array, cannot fail); tfc_gpt_lora_drop_moved discards them.
 */
tfc_status tfc_gpt_lora_move(const tfc_gpt *m, tfc_device_type device, int32_t index, tfc_tensor ***moved);
void tfc_gpt_lora_install_moved(tfc_gpt *m, tfc_tensor **moved);
void tfc_gpt_lora_drop_moved(const tfc_gpt *m, tfc_tensor **moved);

/*
 * Dropout of one site in a training forward (gpt_dropout.c): *y = x when
 * the model has no dropout or `train` is 0 (a new reference), else
 * tfc_dropout(g, x, p, key(seed, counter, site), 0) with the key that
 * tfc_gpt_set_dropout_stream documents. `counter` is the forward's number,
 * fixed at its start, so re-running a block's forward with the same counter
 * (activation recomputation) draws the same masks.
 */
tfc_status tfc_gpt_dropout_site(const tfc_gpt *m, tfc_graph *g, int train, uint64_t counter, int64_t site,
                                const tfc_tensor *x, tfc_tensor **y);

/* The Philox key of site `site` in training forward `counter` of stream `seed`. */
uint64_t tfc_gpt_dropout_key(uint64_t seed, uint64_t counter, int64_t site);

/*
 * Causal attention with dropout p on the probabilities, unfused (the fused
 * kernel has no dropout): softmax(q kᵀ·scale + causal) → dropout(key) → · v.
 * q, k, v [B,H,T,D]; *att [B,H,T,D]. Keeps the [B,H,T,T] probabilities
 * alive for backward, as nanoGPT's non-flash path does.
 */
tfc_status tfc_gpt_attention_dropout(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                     double scale, double p, uint64_t key, tfc_tensor **att);

/* Whether m is inference-only: its block Linears or its LM head are quantized. */
static inline int tfc_gpt_is_quantized(const tfc_gpt *m) { return m->qformat != 0 || m->head_q != NULL; }

/* The LM head's weight [V, C]: wte when tied. */
static inline const tfc_tensor *tfc_gpt_head_weight(const tfc_gpt *m) { return m->lm_head ? m->lm_head : m->wte; }

/*
 * What is quantized, for messages: "int8", "int4 (head int8)", "f32 blocks, head int8"
 * and so on, written into buf (n >= 48 bytes) and returned.
 */
const char *tfc_gpt_quant_desc(const tfc_gpt *m, char *buf, size_t n);

/*
 * Make q (owned from here) m's LM head: an untied lm_head.weight then leaves
 * the parameter list and is released (a tied wte stays: the embedding reads
 * it), and the head's strategy becomes the quantized one. Allocates nothing.
 */
void tfc_gpt_install_head(tfc_gpt *m, tfc_qweight *q);

/* The size of tfc_gpt_config before dropout was added: callers built against it keep working (dropout 0). */
#define TFC_GPT_CONFIG_V1_SIZE (offsetof(tfc_gpt_config, ln_eps) + sizeof(double))

/* TFC_OK for a valid config (struct_size >= TFC_GPT_CONFIG_V1_SIZE), else the error naming the bad field, prefixed by fn. */
tfc_status tfc_gpt_check_config(const char *fn, const tfc_gpt_config *cfg);

/* The MLP width c describes: mlp_hidden, or its family's default when that is 0 (tfc_gpt_config). */
int64_t tfc_gpt_mlp_hidden(const tfc_gpt_config *c);

/* The size of tfc_gpt_config before the Llama family's fields: callers built against it get GPT-2. */
#define TFC_GPT_CONFIG_V2_SIZE (offsetof(tfc_gpt_config, dropout) + sizeof(double))

/* A caller's config of any accepted struct_size as the current struct (fields it lacks: their defaults). */
void tfc_gpt_config_normalize(const tfc_gpt_config *in, tfc_gpt_config *out);

/*
 * Number of parameter values (elements) a model of cfg holds, from the
 * parameter table without building it; INT64_MAX when that overflows.
 * Loaders compare it with what a file holds before allocating anything.
 */
int64_t tfc_gpt_config_numel(const tfc_gpt_config *cfg);

/*
 * Keys and values per layer: [batch, n_kv_head, cap, head_dim], valid up to
 * len. Public caches hold cap = block_size positions; batched generation
 * makes smaller ones (tfc_gpt_cache_with_cap) when it knows how many
 * positions a sequence can reach.
 */
struct tfc_gpt_cache {
    const tfc_gpt *model;
    int32_t batch, len, cap;
    tfc_tensor **k, **v; /* n_layer each */
};

/*
 * Feed tokens[0..n) of one sequence into c (batch 1) after what it holds
 * and copy the last position's logits to row (V floats, f32 whatever the
 * model's dtype).
 */
tfc_status tfc_gpt_feed(tfc_gpt *m, tfc_gpt_cache *c, const int32_t *tokens, int32_t n, float *row);

/*
 * Rows first .. first+n-1 of logits lg (any shape [..., V], taken as
 * [rows, V]) copied to dst as f32; consumes the reference to lg.
 */
tfc_status tfc_gpt_logits_rows(tfc_tensor *lg, int64_t first, int64_t n, float *dst);

/* A cache for batch sequences of at most cap (1 .. block_size) positions; fn names the caller in errors. */
tfc_status tfc_gpt_cache_with_cap(const tfc_gpt *m, int32_t batch, int32_t cap, const char *fn, tfc_gpt_cache **out);

/*
 * The shared forward: embeds idx [B,T] at positions start .. start+T-1,
 * runs the blocks (appending keys/values to cache when it is not NULL,
 * attending over the cached prefix too) and returns logits [B,T,V].
 */
tfc_status tfc_gpt_run(tfc_gpt *m, tfc_graph *g, const tfc_tensor *idx, tfc_gpt_cache *cache, const char *fn,
                       tfc_tensor **logits);

/*
 * One decoding step of n independent sequences, no graph: idx [n, 1] holds
 * each sequence's next token and seqs[i] (a cache of batch 1) its keys and
 * values so far, at its own length. The Linear layers and the head run once
 * on [n, C]; attention runs per sequence over its own cache, to which the
 * new key and value are appended (each seqs[i]->len grows by one on
 * success). *logits receives [n, V].
 */
tfc_status tfc_gpt_run_seqs(tfc_gpt *m, const tfc_tensor *idx, tfc_gpt_cache *const *seqs, const char *fn,
                            tfc_tensor **logits);

/*
 * The distribution tfc_sample draws from (sample.c): candidates most
 * probable first (ties by id), the first *keep of them kept by top-k and
 * top-p, with unnormalised probabilities summing to *mass over the kept
 * ones. Greedy (temperature 0) is the argmax alone with p = 1. Arguments
 * are checked as tfc_sample does, errors prefixed by fn; *out is malloc'd.
 */
typedef struct tfc_sample_cand {
    double p;
    int32_t id;
} tfc_sample_cand;
tfc_status tfc_sample_dist(const char *fn, const float *logits, int64_t n, double temperature, int32_t top_k,
                           double top_p, tfc_sample_cand **out, int64_t *keep, double *mass);
/* The kept candidate whose cumulative probability first exceeds u·mass (u uniform in [0, 1)). */
int32_t tfc_sample_draw(const tfc_sample_cand *c, int64_t keep, double mass, double u);

#endif
