/*
 * tfcore/graph.h — the autograd tape.
 *
 * Ops take an optional tfc_graph*. With NULL, or with recording turned off
 * (tfc_graph_set_grad_enabled(g, 0): this library's torch.no_grad()),
 * nothing is recorded. With a graph, an op any of whose inputs requires
 * grad records a node holding exactly what its backward needs, and its
 * output requires grad too.
 *
 * tfc_graph_backward walks the nodes reachable from the loss in reverse
 * topological order (iteratively: no recursion limit) and ACCUMULATES
 * (+=) into the .grad of leaf tensors that require grad — a tensor used
 * twice receives both contributions, broadcast inputs receive gradients
 * summed back to their shape, and gradients flow through views.
 *
 * Lifetimes: the graph keeps its nodes; a node keeps its saved tensors and
 * the leaves it feeds; a tensor keeps the node that produced it. Release
 * order never matters. tfc_graph_clear frees every node's saved tensors;
 * tfc_graph_backward_ex without retain_graph frees only those of the nodes
 * its pass went through (PyTorch's behaviour); backward through a cleared
 * or freed node is a clear TFC_ERR_INVALID_ARG. Nodes that no tensor and
 * no later node refers to leave the graph by themselves.
 *
 * Higher-order gradients: tfc_graph_backward_ex / tfc_autograd_grad with
 * create_graph record the backward on the graph, as PyTorch does. As
 * there, a leaf whose .grad was made that way and the graph refer to each
 * other: set its .grad to NULL (tfc_tensor_set_grad) when done, or the
 * nodes stay alive with the leaf.
 *
 * Thread-safety: a graph is used by one thread at a time.
 */
#ifndef TFCORE_GRAPH_H
#define TFCORE_GRAPH_H

#include "tfcore/core.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_graph tfc_graph;

/* New empty graph with recording enabled. */
TFC_API TFC_NODISCARD tfc_status tfc_graph_new(tfc_graph **out);
/* Drop the caller's graph reference; nodes stay valid while tensors use them. NULL ok. */
TFC_API void tfc_graph_release(tfc_graph *g /* nullable */);
/*
 * Release every recorded node's saved tensors and forget the nodes, so the
 * activations' memory returns. Tensors produced before the clear keep
 * their values; backward through them fails with a clear message.
 */
TFC_API TFC_NODISCARD tfc_status tfc_graph_clear(tfc_graph *g);
/* Turn recording on (1) or off (0: no_grad). */
TFC_API TFC_NODISCARD tfc_status tfc_graph_set_grad_enabled(tfc_graph *g, int32_t on);
/* 1 when g records, 0 when not (or g is NULL). */
TFC_API int32_t tfc_graph_is_grad_enabled(const tfc_graph *g /* nullable: 0 */);
/* Number of nodes currently recorded on g. */
TFC_API int64_t tfc_graph_num_nodes(const tfc_graph *g /* nullable: 0 */);

/*
 * Backpropagate from loss, which must have been produced by an op recorded
 * on g. seed is d(objective)/d(loss): NULL for a 1-element loss (then 1),
 * else a tensor of loss's shape and dtype. The graph is kept (call
 * tfc_graph_clear when done), so calling backward again accumulates again,
 * like retain_graph=True. Before any gradient is written every node on the
 * path is checked (not cleared, saved tensors not modified in place since
 * they were saved), so a failure leaves all gradients untouched.
 */
TFC_API TFC_NODISCARD tfc_status tfc_graph_backward(tfc_graph *g, const tfc_tensor *loss,
                                                    const tfc_tensor *seed /* nullable */);

/*
 * Backpropagate from loss like tfc_graph_backward, with PyTorch's two
 * switches (torch.Tensor.backward(retain_graph=, create_graph=)).
 *
 * retain_graph 0: once the pass succeeded, the saved tensors of every node
 * it went through that saved any are freed and those nodes leave g (their
 * memory returns as soon as no tensor refers to them); nodes of other
 * losses recorded on g, and nodes that saved nothing, stay usable, so two
 * losses that share part of a graph can each be backpropagated once.
 * Going through a freed node again fails with TFC_ERR_INVALID_ARG, the
 * message saying its saved tensors were freed by a backward without
 * retain_graph=True. retain_graph 1 keeps everything (tfc_graph_backward).
 *
 * create_graph 1: the backward computation is itself recorded on g (even
 * while recording is off), so the gradients it leaves have history and can
 * be differentiated again (second and higher derivatives, Hessian-vector
 * products, gradient penalties). Each leaf's .grad then holds that
 * gradient tensor itself (it requires grad); a later contribution
 * replaces it with a new recorded sum instead of adding in place. A seed
 * with history is used as is, so gradients flow into it too. Every node
 * on the path must have a differentiable backward: one that does not (a
 * fused kernel: attention, the fused LM head, top-k, a checkpoint,
 * custom ops that did not declare it) makes the call fail with
 * TFC_ERR_UNSUPPORTED naming that op, before any gradient is written.
 * PyTorch's default is retain_graph = create_graph.
 *
 * Errors: as tfc_graph_backward, plus retain_graph or create_graph not 0/1
 * (TFC_ERR_INVALID_ARG), the freed-node and unsupported errors above, and,
 * in anomaly mode (tfc_graph_set_detect_anomaly), a gradient holding NaN
 * or Inf (TFC_ERR_INVALID_ARG naming the op). A failure before the pass
 * starts leaves every gradient untouched; an anomaly or a failing hook
 * stops midway (gradients may be partly accumulated) and frees nothing.
 * Thread-safety: as for the graph.
 */
TFC_API TFC_NODISCARD tfc_status tfc_graph_backward_ex(tfc_graph *g, const tfc_tensor *loss,
                                                       const tfc_tensor *seed /* nullable */, int32_t retain_graph,
                                                       int32_t create_graph);

/*
 * torch.autograd.grad: the gradients of sum_r <outputs[r], grad_outputs[r]>
 * with respect to inputs[0..n_inputs), returned instead of accumulated:
 * no tensor's .grad is read or written (leaves', retained ones') and the
 * grad hook is not called. Every outputs[r] must have been produced by an
 * op recorded on g; grad_outputs (nullable, and each entry nullable) gives
 * each output's seed, of its shape, dtype and device, NULL meaning 1 for a
 * 1-element output. inputs may be leaves or tensors produced on g; each
 * must require grad. retain_graph and create_graph as in
 * tfc_graph_backward_ex (PyTorch's default: retain_graph = create_graph);
 * with create_graph the returned gradients have history on g.
 *
 * Only the part of the graph that leads to inputs runs (PyTorch's
 * pruning): nodes on other branches are not differentiated, need no
 * differentiable backward under create_graph, and keep their saved
 * tensors even without retain_graph.
 *
 * grads_out[k] receives a new reference to the gradient of inputs[k] (of
 * its shape), summed over every path. An input no gradient reaches is an
 * error (TFC_ERR_INVALID_ARG naming inputs[k]) unless allow_unused is 1,
 * then grads_out[k] is NULL. On failure grads_out is untouched.
 *
 * Errors (TFC_ERR_INVALID_ARG unless said): g, outputs, inputs or
 * grads_out NULL; n_outputs or n_inputs < 1; an outputs[r] or inputs[k]
 * NULL; an input that does not require grad; an output not produced on g
 * or freed by an earlier backward without retain_graph; a seed of the
 * wrong shape (TFC_ERR_SHAPE) or dtype (TFC_ERR_DTYPE); retain_graph,
 * create_graph or allow_unused not 0/1; create_graph through an op
 * without a differentiable backward (TFC_ERR_UNSUPPORTED); TFC_ERR_OOM.
 * Thread-safety: as for the graph.
 */
TFC_API TFC_NODISCARD tfc_status tfc_autograd_grad(tfc_graph *g, const tfc_tensor *const *outputs, int32_t n_outputs,
                                                   const tfc_tensor *const *inputs, int32_t n_inputs,
                                                   const tfc_tensor *const *grad_outputs /* nullable */,
                                                   int32_t retain_graph, int32_t create_graph, int32_t allow_unused,
                                                   tfc_tensor **grads_out);

/*
 * Anomaly detection (torch.autograd.detect_anomaly): with on = 1, every op
 * that records a node on g checks its outputs, and every backward on g
 * checks each gradient a node produces, for NaN or Inf; the first one
 * found stops the op (its output is released, nothing is recorded for the
 * caller) or the backward with TFC_ERR_INVALID_ARG and a message that
 * starts "anomaly detected" and names the op, the shapes, and for a
 * backward the forward op that recorded the node. It costs a read of every
 * output and gradient (a host copy on a device): a debugging mode. Ops run
 * while g does not record are not checked. Errors: g NULL, on not 0/1
 * (TFC_ERR_INVALID_ARG). Thread-safety: as for the graph.
 */
TFC_API TFC_NODISCARD tfc_status tfc_graph_set_detect_anomaly(tfc_graph *g, int32_t on);
/* 1 when g is in anomaly-detection mode, else 0 (also for g NULL). */
TFC_API int32_t tfc_graph_is_detect_anomaly(const tfc_graph *g /* nullable: 0 */);

/*
 * Gradient hook: called during tfc_graph_backward on g once a leaf's
 * gradient for that pass is final — what data-parallel training needs to
 * start reducing a bucket of gradients while backward still runs (PyTorch
 * DDP's post-accumulate-grad hooks).
 *
 * When: for every leaf (a tensor that requires grad and was not produced by
 * a recorded op) that at least one node reachable from the loss takes as an
 * input, fn(leaf, user) is called exactly once per backward call, right
 * after the last of those edges has accumulated its contribution, so
 * leaf's .grad (tfc_tensor_grad) then holds its final value for the pass:
 * this pass's contributions plus whatever earlier backward calls left
 * there. A leaf used by several ops, or twice by one (a tied weight, x·x),
 * is called once, after its last use has been differentiated. If none of
 * those nodes passed it a gradient (a node's backward may return none for
 * an input), fn is still called once, after its last edge was processed,
 * and .grad is whatever it was before (possibly none). Leaves not reachable
 * from the loss are not called; neither are non-leaf tensors that retain
 * their grad (tfc_tensor_retain_grad). Calls come in the order leaves
 * become final — roughly the reverse of the forward pass: a parameter used
 * last in the forward is final first.
 *
 * Threading: fn runs on the thread that called tfc_graph_backward, between
 * two nodes' backwards. It may read, scale or replace leaf's gradient
 * (tfc_tensor_grad, in-place ops, tfc_tensor_set_grad), run ops (with any
 * graph; nodes it records on g are not part of this pass), and hand a
 * reference to the gradient to another thread (to start an all-reduce):
 * this pass writes that leaf's .grad no more, but the next backward or
 * optimizer step must wait until that thread is done with it. While
 * backward runs, fn must not call tfc_graph_backward or tfc_graph_clear on
 * g (both refuse with TFC_ERR_INVALID_ARG); tfc_graph_release(g) from fn
 * is deferred until backward returns.
 *
 * Ownership: leaf is borrowed for the call (tfc_tensor_retain to keep it);
 * user is passed through untouched and never freed by the library. The
 * hook belongs to g: setting one replaces the previous one, fn NULL removes
 * it, tfc_graph_clear keeps it, and a backward already running keeps
 * calling the hook it started with (a change made from inside the hook
 * takes effect from the next backward call). With no hook set, backward
 * does no extra work.
 *
 * Errors: fn returning a status other than TFC_OK stops backward, which
 * returns that status. tfc_last_error() then holds, prefixed
 * "tfc_graph_backward: ", the message of the library call that failed
 * inside fn (the status fn passed on), or, when fn failed without a failing
 * library call (returning TFC_ERR_CANCELLED, say), a message naming that
 * status and the leaf. Unlike a failed validation, a hook failure leaves
 * gradients partially accumulated: leaves already final hold this pass's
 * gradient, others may hold part of it (zero them before retrying).
 * tfc_graph_set_grad_hook itself fails only on g NULL (TFC_ERR_INVALID_ARG).
 *
 * Thread-safety: as for the graph itself, one thread at a time.
 */
typedef tfc_status (*tfc_grad_hook_fn)(tfc_tensor *leaf, void *user);
TFC_API TFC_NODISCARD tfc_status tfc_graph_set_grad_hook(tfc_graph *g, tfc_grad_hook_fn fn /* nullable */,
                                                         void *user /* nullable */);

/* Mark a leaf tensor as requiring (1) or not (0) a gradient. Non-leaves refuse. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_set_requires_grad(tfc_tensor *t, int32_t on);
/* 1 when t requires grad (leaf flag set, or produced from such a tensor on a recording graph). */
TFC_API int32_t tfc_tensor_requires_grad(const tfc_tensor *t /* nullable: 0 */);
/* 1 when t was not produced by a recorded op. */
TFC_API int32_t tfc_tensor_is_leaf(const tfc_tensor *t /* nullable: 0 */);
/*
 * The accumulated gradient of t: *out is a new reference, or NULL when t has
 * none yet (returns TFC_OK either way).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_grad(const tfc_tensor *t, tfc_tensor **out);
/* Replace t's gradient with grad (same shape and dtype) or NULL. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_set_grad(tfc_tensor *t, tfc_tensor *grad /* nullable */);
/*
 * Zero t's gradient: set_to_none=1 drops it (the next backward allocates a
 * fresh one), 0 fills the existing one with zeros. Errors: NULL t; with
 * set_to_none=0, a .grad over read-only memory (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_zero_grad(tfc_tensor *t, int32_t set_to_none);
/* Ask backward to keep the gradient of non-leaf t in its .grad too. */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_retain_grad(tfc_tensor *t);
/*
 * A new tensor sharing t's storage, shape and strides, cut from the graph
 * (a leaf that does not require grad).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tensor_detach(const tfc_tensor *t, tfc_tensor **out);

/*
 * Gradient check for a scalar function of n inputs. f(inputs, n, &out, ctx)
 * must build its result with the ops on graph g it is handed; gradcheck
 * compares the analytic gradient of every element of every input that
 * requires grad with the centred finite difference (f(x+eps) − f(x−eps)) /
 * 2eps, using relative error |a − n| / (|a| + |n| + 1e-8). Inputs should be
 * f64 for meaningful results. *max_rel_err receives the worst relative
 * error; *worst_input / *worst_index (may be NULL) where it happened.
 * The inputs' values are restored and their .grad left as analytic grads.
 * Errors: f failing returns its status with its message prefixed
 * "tfc_gradcheck: " (one naming the status when f set none); f returning
 * TFC_OK with *out NULL (TFC_ERR_INVALID_ARG) or more than one element
 * (TFC_ERR_SHAPE); f NULL, max_rel_err NULL, n < 0, an inputs[i] NULL, eps
 * <= 0, an input requiring grad that is not contiguous
 * (TFC_ERR_INVALID_ARG) or not on the CPU (TFC_ERR_DEVICE).
 */
typedef tfc_status (*tfc_gradcheck_fn)(tfc_graph *g, tfc_tensor *const *inputs, int32_t n, tfc_tensor **out, void *ctx);
TFC_API TFC_NODISCARD tfc_status tfc_gradcheck(tfc_gradcheck_fn f, tfc_tensor *const *inputs, int32_t n,
                                               void *ctx /* nullable */, double eps, double *max_rel_err,
                                               int32_t *worst_input /* nullable */,
                                               int64_t *worst_index /* nullable */);

/* ---- activation checkpointing (recompute in backward) -------------------------- */

/*
 * The function a checkpoint runs: outputs[0..n_out) = f(inputs[0..n_in)),
 * built with the library's ops on graph g. On success it sets every
 * outputs[i] to a new reference; on failure it returns the status of the
 * call that failed (entries it did set are released by the library, so
 * leave the others NULL: they start NULL). ctx is the pointer the caller
 * gave tfc_graph_checkpoint, or a copy of it (see ctx_size there).
 */
typedef tfc_status (*tfc_checkpoint_fn)(tfc_graph *g, const tfc_tensor *const *inputs, int32_t n_in,
                                        tfc_tensor **outputs, int32_t n_out, void *ctx);

/* The most inputs one checkpoint takes. */
#define TFC_CHECKPOINT_MAX_INPUTS 8

/*
 * Activation checkpointing (PyTorch's torch.utils.checkpoint): trade
 * compute for memory by not keeping what fn's ops would save for backward.
 *
 * When g records (g not NULL, recording on): fn runs once with g = NULL,
 * so nothing inside it is recorded and its intermediate tensors are freed
 * as soon as fn drops them. One node "tfc_graph_checkpoint" is recorded
 * on g instead; it keeps only the inputs (aliases, not copies) and the
 * outputs it returns require grad, whether or not an input does (so
 * parameters fn reaches through ctx get their gradients even when no input
 * requires grad, unlike torch's reentrant checkpoint). When backward
 * reaches that node, it replays fn on a private recording graph, with the
 * saved inputs as fresh leaves (those whose gradient is needed require
 * grad), runs backward from the replayed outputs seeded with their
 * incoming gradients, passes the inputs' gradients on, and frees the
 * replay's graph. Tensors fn reads through ctx that require grad (a
 * model's parameters) receive their gradient in their .grad during that
 * replay, accumulated as in a plain backward. With deterministic ops the
 * gradients are bitwise those of running fn directly on g.
 *
 * When g is NULL or not recording, fn simply runs with g as given and its
 * outputs are returned as it made them.
 *
 * Randomness replays: the library keeps no hidden random state (dropout
 * takes its Philox seed and offset as arguments), so fn's randomness is
 * whatever it reads from ctx. With ctx_size > 0, the ctx_size bytes at ctx
 * are copied before the forward call (the "RNG state" torch saves): the
 * forward run gets ctx itself (so it may advance a counter there for the
 * caller's later calls) and every replay gets a fresh copy of the bytes as
 * they were before the forward, so a dropout seeded from ctx draws the same
 * mask in the replay. With ctx_size 0, ctx is handed over as is and must
 * stay valid, and unchanged where fn reads it, until the graph is cleared
 * or released. Either way what ctx points to (a model) must outlive the
 * backward.
 *
 * fn must be deterministic in its inputs and ctx (same output shapes in
 * the replay; a different shape is an error naming the output), must not
 * modify its inputs in place, and must not call tfc_graph_backward or
 * tfc_graph_clear on the graph it is handed. It may itself call
 * tfc_graph_checkpoint (nested checkpoints replay in turn). A leaf fn
 * reaches through ctx that is also used outside fn receives both
 * contributions; with a grad hook on g (tfc_graph_set_grad_hook), the hook
 * is also called during the replay, once a leaf's last use inside fn is
 * differentiated, so a hooked leaf must be used only inside fn or only
 * outside it.
 *
 * Arguments: inputs[0..n_in), 1 <= n_in <= TFC_CHECKPOINT_MAX_INPUTS, none
 * NULL (borrowed: the node keeps its own references); outputs receives
 * n_out >= 1 new references. Memory kept between forward and backward: the
 * inputs and the outputs (which the caller holds anyway); the replay holds
 * fn's activations only while that node's backward runs.
 *
 * Errors: fn, inputs or outputs NULL, an inputs[i] NULL, n_in or n_out out
 * of range, ctx NULL with ctx_size > 0 (TFC_ERR_INVALID_ARG); fn failing in
 * forward returns its status and message prefixed "tfc_graph_checkpoint: "
 * (nothing recorded, outputs untouched); fn failing in the replay fails
 * tfc_graph_backward with its status, the message prefixed
 * "tfc_graph_backward: tfc_graph_checkpoint (replay): " (gradients may then
 * be partly accumulated, as with a failing grad hook); fn returning TFC_OK
 * but leaving an output NULL is TFC_ERR_INVALID_ARG; TFC_ERR_OOM. Nothing
 * leaks on any path.
 *
 * Profile (TFC_PROFILE): the replay belongs to the backward pass that runs
 * it; the ops inside fn appear in their own rows (the replayed forward
 * counted in their forward column) and the row "tfc_graph_checkpoint"
 * counts the whole replay again, so its time overlaps theirs.
 *
 * Thread-safety: as for the graph, one thread at a time; fn runs on the
 * calling thread (forward) and on the thread running backward (replay).
 */
TFC_API TFC_NODISCARD tfc_status tfc_graph_checkpoint(tfc_graph *g /* nullable */, tfc_checkpoint_fn fn,
                                                      void *ctx /* nullable */, size_t ctx_size,
                                                      const tfc_tensor *const *inputs, int32_t n_in,
                                                      tfc_tensor **outputs, int32_t n_out);

/* ---- per-op time profile ------------------------------------------------------ */

/*
 * A process-wide table of where graph work spends its time, per op name:
 * calls, forward ms (the time since the previous recorded node: an op
 * computes, then records, so only ops run on a recording graph are seen)
 * and backward ms (each node's turn in tfc_graph_backward, gradient
 * accumulation included). The time from the end of a backward pass to the
 * next recorded node (gradient clipping, the optimizer step, the next
 * batch) is the row "(between steps: clip, optimizer, data)"; turning the
 * profile off closes that row, so enable → one training step → disable
 * counts the step's optimizer work too. Setting the environment variable
 * TFC_PROFILE=1 turns it on from the start and prints the table to stderr
 * at exit.
 *
 * Thread-safety: the calls are thread-safe, but the table is meant for one
 * thread driving graphs at a time; with several, forward times overlap
 * and are approximate.
 */
/* Turn the profile on (1) or off (0); the table keeps its rows. Errors: on not 0/1 (TFC_ERR_INVALID_ARG). */
TFC_API TFC_NODISCARD tfc_status tfc_profile_enable(int32_t on);
/* 1 when the profile is recording (by tfc_profile_enable or TFC_PROFILE), else 0. */
TFC_API int32_t tfc_profile_is_enabled(void);
/* Forget every row and the count of backward passes. Never fails. */
TFC_API TFC_NODISCARD tfc_status tfc_profile_reset(void);
/*
 * The table as text: a line "backward passes: N; calls and ms per pass",
 * a header line (op, calls, fwd ms, bwd ms, total ms, %), one line per op
 * sorted by total time, and a "total" line; every figure is divided by the
 * number of backward passes (by 1 when there was none). An empty string
 * when nothing was recorded since the start or the last reset. *out is a
 * new string owned by the caller (free with tfc_free). Errors: NULL out
 * (TFC_ERR_INVALID_ARG), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_profile_report(char **out);

/* ---- custom ops (a caller's forward and backward on the graph) ----------------- */

/* The most tensors one custom op's forward may save for its backward. */
#define TFC_CUSTOM_MAX_SAVED 8

/*
 * A custom op's forward: outputs[0..n_out) = f(inputs[0..n_in)), computed
 * with recording off (call ops with g = NULL). On success every outputs[o]
 * must be set to a new reference. saved is an array of
 * TFC_CUSTOM_MAX_SAVED entries, all NULL on entry: set saved[k] to a new
 * reference to keep a tensor for backward (an input, an output, anything).
 * On failure return the status of the call that failed (or any error
 * status, having set no message: the library then writes one); entries of
 * outputs and saved already set are released by the library. ctx is the
 * pointer given to tfc_custom_op. inputs are borrowed for the call.
 */
typedef tfc_status (*tfc_custom_forward_fn)(void *ctx, const tfc_tensor *const *inputs, int32_t n_in,
                                            tfc_tensor **outputs, int32_t n_out, tfc_tensor **saved);
/*
 * A custom op's backward, called at most once per tfc_graph_backward pass
 * that reaches the op's node, with recording off. saved[0..
 * TFC_CUSTOM_MAX_SAVED) are what forward saved (NULL where it saved
 * nothing), as detached aliases sharing the saved tensors' memory, checked
 * unmodified before the call. grad_outputs[o] is the gradient of
 * outputs[o], or NULL when that output received none (treat it as zeros).
 * needs_input_grad[i] is 1 when inputs[i] needs a gradient. For each such
 * input set grad_inputs[i] (NULL on entry) to a new reference to a tensor
 * of that input's shape and dtype on its device, or leave it NULL
 * (contributes nothing); a gradient returned where needs_input_grad[i] is 0
 * is released and ignored. On failure return an error status (entries set
 * are released). Everything is borrowed for the call.
 */
typedef tfc_status (*tfc_custom_backward_fn)(void *ctx, const tfc_tensor *const *saved,
                                             const tfc_tensor *const *grad_outputs, int32_t n_out,
                                             const int32_t *needs_input_grad, tfc_tensor **grad_inputs, int32_t n_in);
/* Frees a custom op's ctx; see tfc_custom_op for when it runs. */
typedef void (*tfc_custom_destroy_fn)(void *ctx);

/*
 * What a custom op is. Set struct_size = sizeof(tfc_custom_op_def); later
 * versions only append fields. The library copies what it needs (the
 * name, backward, destroy) during tfc_custom_op, so the struct and the
 * name string may be temporaries.
 */
typedef struct tfc_custom_op_def {
    uint32_t struct_size;
    /* the node's name in messages, profiles and anomaly reports; 1 to 63 bytes */
    const char *name;
    tfc_custom_forward_fn forward;
    tfc_custom_backward_fn backward;
    tfc_custom_destroy_fn destroy; /* NULL: ctx needs no freeing */
} tfc_custom_op_def;

/*
 * Run a caller's op and put it on the graph: what another framework
 * embedding the library (and the Python tfcore.autograd.Function) builds
 * differentiable ops from; torch.autograd.Function in C.
 *
 * def->forward(ctx, inputs, n_in, outputs, n_out, saved) runs once, with
 * recording off. When g records (not NULL, recording on) and any input
 * requires grad, one node named def->name is recorded on g: its inputs
 * are inputs[0..n_in) and every output requires grad. The tensors forward
 * put in saved are kept by the node (aliases, not copies) with their
 * storage versions, and backward through the node first checks them like
 * any op's saved tensors: one modified in place since (tfc_tensor_copy_from,
 * fill, an optimizer step) fails tfc_graph_backward with TFC_ERR_INVALID_ARG
 * "... saved by <name> for backward was modified in place ...". When the
 * engine reaches the node it calls def->backward (see
 * tfc_custom_backward_fn) and checks each returned gradient against its
 * input's shape and dtype. Otherwise (g NULL, recording off, no input
 * requiring grad) nothing is recorded, saved tensors are released at once,
 * and the outputs do not require grad.
 *
 * The outputs returned are fresh handles (detached aliases of what
 * forward made), so forward may return an input's own handle. The
 * backward's work is not recorded: a custom op is differentiable once (a
 * backward that builds a graph for higher-order gradients is not
 * supported).
 *
 * ctx and its destructor: ctx is passed untouched to forward, backward
 * and destroy. Once def has been checked, def->destroy (when not NULL)
 * is called exactly once: when the recorded node is freed (its graph
 * released or cleared and every output released), or before
 * tfc_custom_op returns when nothing was recorded, including when forward
 * or any later step failed. With def NULL or def->struct_size too small
 * nothing is called and ctx stays the caller's. destroy runs on the thread
 * that frees the node and must not fail.
 *
 * Arguments: inputs[0..n_in), n_in >= 1, none NULL (borrowed); outputs
 * receives n_out >= 1 new references (untouched on error).
 *
 * Errors: def, inputs or outputs NULL, an inputs[i] NULL, n_in or n_out
 * below 1, def->name NULL, empty or over 63 bytes, def->forward or
 * def->backward NULL (TFC_ERR_INVALID_ARG); def->struct_size below
 * sizeof(tfc_custom_op_def) of this version (TFC_ERR_VERSION); forward
 * failing returns its status with its message, prefixed
 * "tfc_custom_op: <name> forward: " (nothing recorded); forward returning
 * TFC_OK with an output NULL (TFC_ERR_INVALID_ARG); TFC_ERR_OOM. Nothing is
 * recorded on any error. In backward: def->backward failing fails
 * tfc_graph_backward with its status, the message prefixed
 * "<name> (custom op) backward: "; a returned gradient of the wrong shape,
 * dtype or device is TFC_ERR_INVALID_ARG naming the op and grad_inputs[i]
 * (gradients may then be partly accumulated, as with a failing grad hook).
 *
 * Thread-safety: as for the graph, one thread at a time; forward runs on
 * the calling thread, backward on the thread running backward.
 */
TFC_API TFC_NODISCARD tfc_status tfc_custom_op(tfc_graph *g /* nullable */, const tfc_custom_op_def *def,
                                               void *ctx /* nullable */, const tfc_tensor *const *inputs, int32_t n_in,
                                               tfc_tensor **outputs, int32_t n_out);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_GRAPH_H */
