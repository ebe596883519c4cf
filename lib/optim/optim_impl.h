/*
 * The optimizer handle, private to lib/optim: groups, parameters and their
 * state. Each parameter's state buffers are contiguous tensors of its
 * shape and dtype, allocated on its first step (or state load), as
 * torch.optim does lazily.
 */
#ifndef TFC_OPTIM_IMPL_H
#define TFC_OPTIM_IMPL_H

#include "backend/backend.h"
#include "tensor/tensor_impl.h"
#include "tfcore/optim.h"

/* Most state buffers one parameter has (Adam with amsgrad: m, v, max v). */
#define TFC_OPTIM_MAX_BUFS 3

typedef struct tfc_optim_slot {
    tfc_tensor *p; /* strong reference */
    int32_t group;
    int32_t has_state; /* stepped or loaded at least once: its state entries exist */
    int64_t step;      /* Adam/AdamW: this parameter's own step count (torch's state['step']) */
    tfc_tensor *buf[TFC_OPTIM_MAX_BUFS];
} tfc_optim_slot;

/* ZeRO-1 sharding (lib/optim/shard.c); NULL in an optimizer that holds all its state. */
typedef struct tfc_shard_state tfc_shard_state;

typedef struct tfc_optim_group {
    double lr, weight_decay;
} tfc_optim_group;

struct tfc_optim {
    tfc_optim_kind kind;
    tfc_optim_options opts; /* validated; opts.lr / weight_decay are the defaults for add_params */
    tfc_optim_group *groups;
    int32_t n_groups, cap_groups;
    tfc_optim_slot *params;
    int64_t n_params, cap_params;
    int64_t step;
    tfc_optim_seg *segs; /* scratch for the fused pass, reused every step */
    int64_t cap_segs;
    tfc_shard_state *shard; /* tfc_optim_shard: buf[j] hold this rank's piece only (shard.c) */
};

/* Validate opts (NULL = defaults of kind) and make an empty optimizer; fn names the caller. */
tfc_status tfc_optim_create(const char *fn, tfc_optim_kind kind, const tfc_optim_options *opts, tfc_optim **out);
/* Name of kind for messages: "SGD", "Adam", "AdamW". */
const char *tfc_optim_kind_name(tfc_optim_kind kind);
/* Number of state buffers each parameter of o has (0..3). */
int32_t tfc_optim_num_bufs(const tfc_optim *o);
/* State name of buffer i ("exp_avg", "momentum_buffer", ...). */
const char *tfc_optim_buf_name(const tfc_optim *o, int32_t i);
/* 1 when o keeps a per-parameter step (Adam, AdamW). */
int tfc_optim_has_param_step(const tfc_optim *o);
/* Allocate param k's missing state buffers (zeros). Harmless on failure: has_state decides semantics. */
tfc_status tfc_optim_alloc_state(const char *fn, tfc_optim *o, tfc_optim_slot *pp);
/* Make room for n segments in o->segs. */
tfc_status tfc_optim_reserve_segs(const char *fn, tfc_optim *o, int64_t n);
/* A hyperparameter check shared by constructors, groups and setters: finite and >= 0. */
tfc_status tfc_optim_check_nonneg(const char *fn, const char *what, double v);

/*
 * The gradient g of a parameter as a fused pass reads it: on ref's device
 * (refname and gname name them for messages), contiguous, not sharing
 * param's memory, and — when param is given — of param's dtype and size.
 * The one check tfc_optim_step and clipping share (lib/optim/grads.c).
 */
tfc_status tfc_optim_check_grad(const char *fn, const char *gname, const tfc_tensor *g, const char *refname,
                                const tfc_tensor *ref, const tfc_tensor *param);

/* Sharded (ZeRO-1) clipping and step, for tfc_optim_clip_grad_norm and tfc_optim_step (shard.c). */
tfc_status tfc_optim_shard_clip(const char *fn, tfc_optim *o, double max_norm, double *total_norm);
/* proto: the step's rule and hyperparameters (segs and device are filled in here). */
tfc_status tfc_optim_shard_step(const char *fn, tfc_optim *o, const tfc_optim_problem *proto);
void tfc_optim_shard_free(tfc_shard_state *z);
/* TFC_ERR_UNSUPPORTED naming fn when o is sharded: what needs every parameter's full state. */
tfc_status tfc_optim_refuse_sharded(const char *fn, const tfc_optim *o);

#endif
