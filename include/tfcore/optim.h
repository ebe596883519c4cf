/*
 * tfcore/optim.h — optimizers (SGD, Adam, AdamW), gradient clipping,
 * learning-rate schedules, optimizer state for checkpoints.
 *
 * A tfc_optim holds parameter groups (each with its own lr and weight
 * decay), per-parameter state (momentum / first and second moments) and a
 * step count. One tfc_optim_step updates every parameter that has a
 * gradient in one fused pass over their memory; parameters without a
 * gradient are skipped, as in PyTorch. The update rules, their PyTorch 1.13
 * correspondences and the state names are written out in docs/OPTIM.md.
 *
 * Typical loop (GPT recipe: decay 2-D weights only):
 *
 *   tfc_optim_options o = TFC_ADAMW_OPTIONS_INIT;
 *   o.lr = 6e-4; o.beta2 = 0.95;
 *   tfc_optim *opt;
 *   tfc_optim_adamw(&o, &opt);
 *   tfc_optim_add_group(opt, weights, n_weights, 6e-4, 0.1, NULL);
 *   tfc_optim_add_group(opt, others, n_others, 6e-4, 0.0, NULL);
 *   for (step = 0; step < steps; step++) {
 *       ... forward on a graph, tfc_graph_backward, tfc_graph_clear ...
 *       tfc_optim_clip_grad_norm(opt, 1.0, &norm);
 *       tfc_lr_cosine(step, 6e-4, 6e-5, 2000, 600000, &lr);
 *       tfc_optim_set_lr(opt, lr);
 *       tfc_optim_step(opt);
 *       tfc_optim_zero_grad(opt, 1);
 *   }
 *
 * Parameters must be leaf CPU tensors of dtype f32 or f64 with contiguous
 * memory; their gradients (tfc_tensor_grad) must be contiguous too, which
 * backward always produces. A parameter belongs to one group only.
 *
 * Thread-safety: an optimizer is used by one thread at a time; the step
 * itself runs on the library's OpenMP threads. Writing parameters bumps
 * their version (tfc_tensor_version), so a graph that saved a parameter
 * before the step refuses to backward through it afterwards.
 */
#ifndef TFCORE_OPTIM_H
#define TFCORE_OPTIM_H

#include "tfcore/core.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_optim tfc_optim;

/* Optimizer kinds. Values are part of the ABI: append only. */
typedef enum tfc_optim_kind {
    TFC_OPTIM_SGD = 0,
    TFC_OPTIM_ADAM = 1,  /* weight decay as L2: g ← g + wd·p (Kingma & Ba; torch.optim.Adam) */
    TFC_OPTIM_ADAMW = 2, /* decoupled decay: p ← p − lr·wd·p (Loshchilov & Hutter; torch.optim.AdamW) */
    TFC_OPTIM_KIND_FORCE_INT32 = 0x7fffffff
} tfc_optim_kind;

/*
 * Hyperparameters, with PyTorch's names and meanings. Fill with an *_INIT
 * macro (or tfc_optim_options_default) and change what you need; set
 * struct_size = sizeof(tfc_optim_options) (the macros do), so later
 * versions can append fields without breaking callers.
 *
 * Fields each kind reads (the others are ignored):
 *   SGD:        lr, weight_decay, momentum, dampening, nesterov, maximize
 *   Adam/AdamW: lr, weight_decay, beta1, beta2, eps, amsgrad, maximize
 * Rules: lr, weight_decay, momentum >= 0; dampening finite; beta1, beta2 in
 * [0, 1); eps > 0 (PyTorch also allows 0, which divides by zero on a zero
 * gradient); flags 0 or 1; nesterov needs momentum > 0 and dampening == 0;
 * every value finite.
 */
typedef struct tfc_optim_options {
    uint32_t struct_size; /* sizeof(tfc_optim_options) */
    int32_t nesterov;     /* SGD: Nesterov momentum (default 0) */
    double lr;            /* learning rate (default 1e-3) */
    double weight_decay;  /* default 0; 1e-2 for AdamW */
    double momentum;      /* SGD (default 0: no momentum buffer) */
    double dampening;     /* SGD (default 0) */
    double beta1;         /* Adam/AdamW betas[0] (default 0.9) */
    double beta2;         /* Adam/AdamW betas[1] (default 0.999) */
    double eps;           /* Adam/AdamW (default 1e-8) */
    int32_t amsgrad;      /* Adam/AdamW: use the running max of v (default 0) */
    int32_t maximize;     /* ascend instead of descend (default 0) */
} tfc_optim_options;

/* PyTorch's defaults for SGD and Adam (torch 1.13's SGD has no default lr; 1e-3 is torch 2's). */
#define TFC_OPTIM_OPTIONS_INIT \
    { (uint32_t)sizeof(tfc_optim_options), 0, 1e-3, 0.0, 0.0, 0.0, 0.9, 0.999, 1e-8, 0, 0 }
#define TFC_SGD_OPTIONS_INIT TFC_OPTIM_OPTIONS_INIT
#define TFC_ADAM_OPTIONS_INIT TFC_OPTIM_OPTIONS_INIT
/* As above with AdamW's default weight_decay 1e-2. */
#define TFC_ADAMW_OPTIONS_INIT \
    { (uint32_t)sizeof(tfc_optim_options), 0, 1e-3, 1e-2, 0.0, 0.0, 0.9, 0.999, 1e-8, 0, 0 }

/*
 * Fill *opts with the defaults of kind (what the *_INIT macros give), for
 * callers that cannot use C macros. Errors: NULL opts, unknown kind
 * (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_options_default(tfc_optim_kind kind, tfc_optim_options *opts);

/*
 * New optimizer with no parameters. opts may be NULL (the kind's
 * defaults); it is copied. Errors: NULL out; a hyperparameter breaking the
 * rules above (TFC_ERR_INVALID_ARG, naming the field and its value);
 * struct_size not one this library knows (TFC_ERR_VERSION); TFC_ERR_OOM.
 * Release with tfc_optim_release.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_sgd(const tfc_optim_options *opts /* nullable */, tfc_optim **out);
TFC_API TFC_NODISCARD tfc_status tfc_optim_adam(const tfc_optim_options *opts /* nullable */, tfc_optim **out);
TFC_API TFC_NODISCARD tfc_status tfc_optim_adamw(const tfc_optim_options *opts /* nullable */, tfc_optim **out);
/* The same, kind chosen by value (for bindings). */
TFC_API TFC_NODISCARD tfc_status tfc_optim_new(tfc_optim_kind kind, const tfc_optim_options *opts /* nullable */,
                                               tfc_optim **out);

/* Free the optimizer, its state and its references to the parameters. NULL ok. */
TFC_API void tfc_optim_release(tfc_optim *opt /* nullable */);

/* ---- parameters and groups ------------------------------------------------ */

/*
 * Add a parameter group: n parameters updated with learning rate lr and
 * weight decay weight_decay (the other hyperparameters are the
 * optimizer's). The optimizer keeps a reference to each parameter.
 * Parameters are numbered in the order they are added, across groups (the
 * numbers used in state names). n == 0 adds an empty group (params may
 * then be NULL). *group (may be NULL) receives the group's index.
 * Errors (nothing added): NULL opt, NULL params with n > 0, NULL params[i],
 * lr or weight_decay negative or not finite (TFC_ERR_INVALID_ARG); a
 * parameter that is not a leaf, is already in this optimizer (or overlaps
 * the memory of one), or is not contiguous (TFC_ERR_INVALID_ARG); dtype not
 * f32/f64 (TFC_ERR_DTYPE). Parameters may live on the CPU or CUDA;
 * tfc_optim_step checks what the device offers.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_add_group(tfc_optim *opt,
                                                     tfc_tensor *const *params /* nullable when n == 0 */, int32_t n,
                                                     double lr, double weight_decay, int32_t *group /* nullable */);
/* As tfc_optim_add_group with the optimizer's current lr and weight decay. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_add_params(tfc_optim *opt,
                                                      tfc_tensor *const *params /* nullable when n == 0 */, int32_t n,
                                                      int32_t *group /* nullable */);

/* Number of groups / of parameters over all groups. NULL out is TFC_ERR_INVALID_ARG. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_num_groups(const tfc_optim *opt, int32_t *out);
TFC_API TFC_NODISCARD tfc_status tfc_optim_num_params(const tfc_optim *opt, int64_t *out);
/*
 * Parameter k (in the order added): *param is a new reference, *group (may
 * be NULL) its group. k out of range is TFC_ERR_INVALID_ARG.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_param(const tfc_optim *opt, int64_t k, tfc_tensor **param,
                                                 int32_t *group /* nullable */);

/* ---- stepping ---------------------------------------------------------------- */

/*
 * One update of every parameter that has a gradient (others are skipped
 * and their state left alone), then the step count goes up by one.
 * Parameters and state are written in place (versions bumped). All checks
 * and state allocations happen before anything is written: on error
 * nothing changed. The step runs on the device of the parameters (all on
 * one device). Errors: NULL opt; a gradient that is not contiguous, a
 * parameter over read-only memory (tfc_tensor_wrap_ex with
 * TFC_WRAP_READ_ONLY; TFC_ERR_INVALID_ARG naming it, every optimizer
 * kind); parameters or gradients on different devices, or
 * no usable GPU (TFC_ERR_DEVICE); a parameter dtype its device does not
 * take (TFC_ERR_DTYPE); a rule the device does not offer — on CUDA only
 * AdamW (and Adam without weight decay) on f32 parameters, without amsgrad
 * or maximize (TFC_ERR_UNSUPPORTED); TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_step(tfc_optim *opt);

/*
 * Clear every parameter's gradient: set_to_none = 1 drops it (the next
 * backward allocates a fresh one, as PyTorch's zero_grad(set_to_none=True)),
 * 0 fills it with zeros. Errors: NULL opt; with set_to_none = 0, a .grad
 * over read-only memory (TFC_ERR_INVALID_ARG naming the parameter, checked
 * for every parameter before any .grad is zeroed).
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_zero_grad(tfc_optim *opt, int32_t set_to_none);

/* Number of completed tfc_optim_step calls (restored by state load). */
TFC_API TFC_NODISCARD tfc_status tfc_optim_step_count(const tfc_optim *opt, int64_t *out);
/*
 * Bytes of state buffers (momentum, exp_avg, ...) this optimizer holds in
 * this process now: allocated on a parameter's first step or state load;
 * a sharded optimizer (tfc_optim_shard, include/tfcore/dist.h) holds only
 * its rank's slice. Read-only; not thread-safe against a concurrent step.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_state_bytes(const tfc_optim *opt, int64_t *out);

/* ---- learning rate and weight decay --------------------------------------------- */

/*
 * Set the learning rate of every group and the optimizer's default (used
 * by later tfc_optim_add_params). lr must be finite and >= 0.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_set_lr(tfc_optim *opt, double lr);
/* The optimizer's default lr: the constructor's, or the last tfc_optim_set_lr. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_get_lr(const tfc_optim *opt, double *lr);
/* One group's lr / weight decay. group out of range is TFC_ERR_INVALID_ARG. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_set_group_lr(tfc_optim *opt, int32_t group, double lr);
TFC_API TFC_NODISCARD tfc_status tfc_optim_get_group_lr(const tfc_optim *opt, int32_t group, double *lr);
TFC_API TFC_NODISCARD tfc_status tfc_optim_set_group_weight_decay(tfc_optim *opt, int32_t group, double wd);
TFC_API TFC_NODISCARD tfc_status tfc_optim_get_group_weight_decay(const tfc_optim *opt, int32_t group, double *wd);

/* ---- gradient clipping -------------------------------------------------------------- */

/*
 * torch.nn.utils.clip_grad_norm_: the global L2 norm of all gradients of
 * params, N = √(Σ g²) (on the CPU accumulated in f64, in an order that does
 * not depend on the thread count; on CUDA in f32), goes to *total_norm
 * (pre-clip, may be NULL); when
 * c = max_norm / (N + 1e-6) < 1 every gradient is multiplied by c, so the
 * new norm is max_norm·N/(N + 1e-6) ≈ max_norm. Parameters without a
 * gradient are skipped. max_norm = +INFINITY only measures.
 * Errors: NULL params with n > 0 or NULL params[i], max_norm NaN or <= 0,
 * a gradient not contiguous or of a dtype its device does not take (f32/f64
 * on the CPU, f32/bf16 on CUDA) (TFC_ERR_INVALID_ARG); gradients on
 * different devices or no usable GPU (TFC_ERR_DEVICE);
 * a NaN/Inf gradient element or a norm beyond the f64 range
 * (TFC_ERR_NONFINITE): then no gradient is changed and *total_norm is left
 * untouched.
 */
TFC_API TFC_NODISCARD tfc_status tfc_clip_grad_norm(tfc_tensor *const *params /* nullable when n == 0 */, int32_t n,
                                                    double max_norm, double *total_norm /* nullable */);
/* tfc_clip_grad_norm over all of opt's parameters. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_clip_grad_norm(tfc_optim *opt, double max_norm,
                                                          double *total_norm /* nullable */);
/*
 * tfc_optim_clip_grad_norm without a host wait: N = √(Σ g²) over opt's
 * gradients and c = min(1, max_norm / (N + 1e-6)) are computed on the
 * gradients' device and every gradient is multiplied by c there (c = 1
 * leaves it bit for bit unchanged), so on CUDA the call only queues kernels
 * behind the backward pass. *total_norm (nullable) gets a new 0-d tensor on
 * that device holding N (the caller releases it; NULL when no parameter has
 * a gradient); read it with tfc_tensor_item when the value is wanted (that
 * read waits). max_norm = +INFINITY only measures. Unlike the synchronous
 * form a non-finite norm is not refused (refusing needs the host to read
 * it): NaN gradients stay NaN and NaN spreads to all of them, an infinite
 * norm zeroes the finite ones; read N or the loss to detect it. The sums of
 * squares are in the gradients' dtype (f32 sums on CUDA).
 * Errors: NULL opt, max_norm NaN or <= 0, a gradient not contiguous or not
 * f32/f64, gradients of two dtypes (TFC_ERR_INVALID_ARG); gradients on
 * different devices or no usable GPU (TFC_ERR_DEVICE); a sharded optimizer
 * (TFC_ERR_UNSUPPORTED: use tfc_optim_clip_grad_norm); TFC_ERR_OOM. An error
 * before the scaling leaves every gradient unchanged.
 * Not thread-safe with other uses of opt or its parameters' gradients.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_clip_grad_norm_async(tfc_optim *opt, double max_norm,
                                                                tfc_tensor **total_norm /* nullable */);

/* ---- learning-rate schedules ----------------------------------------------------------- */
/*
 * Plain functions of the step (0-based). Every warmup is the same linear
 * ramp lr(s) = max_lr·(s + 1)/(warmup + 1) for s < warmup (nanoGPT's), so
 * the first step already has a non-zero lr and step `warmup` reaches
 * max_lr. Arguments: step >= 0, warmup >= 0, learning rates finite and
 * >= 0; errors are TFC_ERR_INVALID_ARG and leave *lr untouched.
 */

/* Warmup, then lr(s) = max_lr. */
TFC_API TFC_NODISCARD tfc_status tfc_lr_constant(int64_t step, double max_lr, int64_t warmup, double *lr);
/*
 * nanoGPT's get_lr: warmup; then for warmup <= s <= total
 *   r = (s − warmup)/(total − warmup),  lr = min_lr + ½(1 + cos(π r))·(max_lr − min_lr);
 * and min_lr for s > total. Values: s = warmup → max_lr, s = warmup +
 * (total − warmup)/2 → (max_lr + min_lr)/2, s = total → min_lr. total > warmup.
 */
TFC_API TFC_NODISCARD tfc_status tfc_lr_cosine(int64_t step, double max_lr, double min_lr, int64_t warmup,
                                               int64_t total, double *lr);
/*
 * Warmup; then for warmup <= s <= total
 *   lr = max_lr + (min_lr − max_lr)·(s − warmup)/(total − warmup);
 * and min_lr for s > total. total > warmup.
 */
TFC_API TFC_NODISCARD tfc_status tfc_lr_linear(int64_t step, double max_lr, double min_lr, int64_t warmup,
                                               int64_t total, double *lr);
/*
 * Warmup; then lr = max_lr·√(warmup / s) for s >= warmup (the Transformer /
 * fairseq inverse_sqrt schedule): s = warmup → max_lr, s = 4·warmup →
 * max_lr/2. warmup >= 1.
 */
TFC_API TFC_NODISCARD tfc_status tfc_lr_inverse_sqrt(int64_t step, double max_lr, int64_t warmup, double *lr);

/* ---- state for checkpoints ------------------------------------------------------------ */
/*
 * The optimizer's state as named tensors (names as in docs/OPTIM.md; k is
 * the parameter's number, g the group's):
 *   "step"                      i64 scalar, completed steps
 *   "group.<g>.lr"              f64 scalar
 *   "group.<g>.weight_decay"    f64 scalar
 *   "param.<k>.step"            i64 scalar  (Adam/AdamW: this parameter's own step count)
 *   "param.<k>.exp_avg"         like param <k> (Adam/AdamW)
 *   "param.<k>.exp_avg_sq"      like param <k> (Adam/AdamW)
 *   "param.<k>.max_exp_avg_sq"  like param <k> (Adam/AdamW with amsgrad)
 *   "param.<k>.momentum_buffer" like param <k> (SGD with momentum)
 * Per-parameter entries exist once the parameter has been stepped (or
 * loaded), as in PyTorch. Saving every entry and loading them into an
 * optimizer built the same way (same kind, options, groups and parameter
 * shapes) makes the following steps bit-identical to an uninterrupted run.
 */

/* Number of state entries now. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_state_count(const tfc_optim *opt, int64_t *n);
/*
 * Entry i (0 <= i < count): *name is a new string (free with tfc_free),
 * *tensor a new reference. Moment buffers are the optimizer's own memory,
 * changed by the next step: clone them to keep a snapshot; scalars are
 * fresh tensors. Either out may be NULL. Errors: i out of range
 * (TFC_ERR_INVALID_ARG), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_state_get(const tfc_optim *opt, int64_t i, char **name /* nullable */,
                                                     tfc_tensor **tensor /* nullable */);
/*
 * Load n entries (copied; the caller keeps its tensors). Every entry is
 * checked before any is applied, so on error nothing changed. State not
 * named keeps its value (load into a fresh optimizer to replace it all,
 * as PyTorch's load_state_dict does). Errors:
 * NULL arrays with n > 0 or NULL elements, an unknown name, a buffer this
 * optimizer does not use, a parameter or group number out of range, a
 * negative/non-integral step or an invalid lr/weight decay
 * (TFC_ERR_INVALID_ARG); a buffer whose shape differs from its parameter's
 * (TFC_ERR_SHAPE, both shapes named); dtype differing from the parameter's,
 * or a non-numeric scalar (TFC_ERR_DTYPE); a non-CPU tensor
 * (TFC_ERR_UNSUPPORTED); TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_state_load(tfc_optim *opt,
                                                      const char *const *names /* nullable when n == 0 */,
                                                      const tfc_tensor *const *tensors /* nullable when n == 0 */,
                                                      int64_t n);
/* Load one entry: tfc_optim_state_load with n = 1. */
TFC_API TFC_NODISCARD tfc_status tfc_optim_state_set(tfc_optim *opt, const char *name, const tfc_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_OPTIM_H */
