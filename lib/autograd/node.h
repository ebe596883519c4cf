/*
 * Graph nodes: what an op leaves on the tape for its backward.
 *
 * An op keeps what its backward needs in a context struct declared next to
 * that backward: saved tensors as tfc_saved slots, parameters as fields.
 *   typedef struct attention_ctx { tfc_saved q, k, v, out, lse; int32_t causal; double scale; } attention_ctx;
 * It records, in order:
 *   tfc_node *n;
 *   if (tfc_should_record(g, inputs, k)) {
 *       TFC_TRY(tfc_node_new(g, "attention", &attention_backward, n_inputs, n_outputs,
 *                                sizeof(attention_ctx), &n));
 *       attention_ctx *c = n->ctx;                 // zeroed, freed with the node
 *       c->scale = scale; ...                      // op parameters
 *       tfc_node_set_input(n, 0, q); ...           // where input grads go
 *       s = tfc_node_keep(n, &c->q, q); ...        // what backward reads
 *       s = tfc_node_attach_output(n, 0, out);     // out->node = n; an anomaly error
 *   }
 * and its backward reads them back: const attention_ctx *c = n->ctx; c->q.t.
 * The op computes its output first and records afterwards, so a failing op
 * leaves nothing on the tape.
 * Backward receives the gradient of each output (NULL when that output got
 * none) and returns, for each input i with tfc_node_needs_grad(n, i), a
 * new tensor of that input's shape (or NULL if it contributes nothing).
 * Backward runs with recording off: it may call any op with g = NULL.
 *
 * Higher-order gradients (create_graph): a backward made of differentiable
 * ops declares so with tfc_node_set_double_backward(n) when the op records;
 * in a create_graph pass the engine then hands it a graph through
 * tfc_node_grad_graph(n) (NULL otherwise), on which it runs its ops, and it
 * reads its saved tensors through tfc_node_saved(n, &c->x, &x), which gives
 * them back attached to the node or leaf they came from, so the recorded
 * backward is itself differentiable. A node that did not declare support
 * stops a create_graph pass with TFC_ERR_UNSUPPORTED naming its op, before
 * any gradient is written.
 */
#ifndef TFC_AUTOGRAD_NODE_H
#define TFC_AUTOGRAD_NODE_H

#include <stdatomic.h>

#include "tensor/tensor_impl.h"
#include "tfcore/graph.h"

#define TFC_NODE_MAX_SAVED 8

typedef struct tfc_node tfc_node;

typedef tfc_status (*tfc_backward_fn)(tfc_node *n, tfc_tensor *const *grad_out, tfc_tensor **grad_in);

/* Where the gradient of one input goes: a producing node's output, or a leaf. */
typedef struct tfc_edge {
    tfc_node *node;              /* strong ref, or NULL */
    int32_t index;               /* output index of node */
    tfc_tensor *leaf;            /* strong ref to a leaf that requires grad, or NULL */
    int64_t shape[TFC_MAX_DIMS]; /* the input's shape and dtype, for checks */
    int32_t ndim;
    tfc_dtype dtype;
} tfc_edge;

/*
 * A tensor saved for backward: a detached alias (so a node never holds a
 * reference cycle through its graph) and its storage version when saved,
 * which backward checks. t is NULL when the op saved nothing there, and
 * again once the graph is cleared.
 */
typedef struct tfc_saved {
    tfc_tensor *t;
    uint64_t version;
    /*
     * Where t came from, so a create_graph backward can use it with its
     * history: the leaf it is (strong), or the node and output that produced
     * it (strong; NULL when it is the saving node's own output, then self is
     * 1 + that output's index: a strong reference would be a cycle).
     */
    tfc_tensor *src_leaf;
    struct tfc_node *src_node;
    int32_t src_index;
    int32_t self;
    const tfc_tensor *orig; /* weak, only while the op records: matched by tfc_node_attach_output */
} tfc_saved;

struct tfc_node {
    atomic_int refcount;
    const char *name;
    tfc_graph *graph; /* weak; NULL once the graph cleared this node */
    tfc_backward_fn backward;
    int32_t n_in, n_out;
    tfc_edge *in; /* [n_in] */
    void *ctx;    /* the op's context, zeroed at creation; NULL when it has none */
    size_t ctx_size;
    /* called with ctx just before the node is freed, or NULL (a custom op's destructor: custom_op.c) */
    void (*ctx_free)(void *ctx);
    int32_t n_kept;
    tfc_saved *kept[TFC_NODE_MAX_SAVED]; /* the slots of ctx that hold a tensor */
    /* Backward bookkeeping. */
    tfc_tensor **grad_acc; /* [n_out] */
    tfc_tensor **retained; /* [n_out] weak pointers to outputs that retain grad */
    int64_t visit_epoch;
    int32_t pending;
    uint8_t double_backward; /* its backward records on tfc_node_grad_graph (create_graph) */
    uint8_t freed;           /* a backward without retain_graph freed its saved tensors */
    /* tfc_autograd_grad's pruning (graph.c): run this backward / a gradient must reach here */
    uint8_t needed, reach;
    int32_t order_pending;
};

struct tfc_graph {
    atomic_int refcount;
    int32_t enabled;
    tfc_grad_hook_fn grad_hook; /* NULL: none (then backward counts nothing for it) */
    void *grad_hook_user;
    /*
     * A backward on this graph is running: its hook may not clear or
     * re-enter it, and a release it asks for waits until backward returns
     * (backward walks node pointers the clear would free).
     */
    int32_t in_backward;
    int32_t release_pending;
    tfc_node **nodes;
    int64_t n_nodes, cap_nodes;
    int32_t create_graph;   /* a create_graph backward runs: backwards record on this graph */
    int32_t detect_anomaly; /* forward outputs and backward gradients are checked for NaN/Inf */
};

/* 1 when g records and any of the k tensors requires grad. */
int tfc_should_record(const tfc_graph *g, const tfc_tensor *const *ts, int32_t k);
/* A node on g with a zeroed context of ctx_size bytes at n->ctx (none when 0). */
tfc_status tfc_node_new(tfc_graph *g, const char *name, tfc_backward_fn backward, int32_t n_in, int32_t n_out,
                        size_t ctx_size, tfc_node **out);
/* Input i of n is t (t may not require grad: then no gradient flows there). */
tfc_status tfc_node_set_input(tfc_node *n, int32_t i, const tfc_tensor *t);
/*
 * Save t for backward in slot, a tfc_saved field of n->ctx. t NULL leaves
 * the slot empty (an optional input that is absent or not needed).
 */
tfc_status tfc_node_keep(tfc_node *n, tfc_saved *slot, const tfc_tensor *t);
/*
 * out is output i of n. Returns TFC_ERR_INVALID_ARG (anomaly) when n's graph
 * detects anomalies and out holds a NaN or Inf; out is attached either way,
 * so the op releases it as usual on that error.
 */
tfc_status tfc_node_attach_output(tfc_node *n, int32_t i, tfc_tensor *out);
/* n's backward is made of differentiable ops and supports create_graph (see above). */
void tfc_node_set_double_backward(tfc_node *n);
/* For a backward: the graph to record its ops on (a create_graph pass), else NULL. */
tfc_graph *tfc_node_grad_graph(const tfc_node *n);
/*
 * For a backward: a new reference to the tensor saved in slot (NULL when
 * empty); in a create_graph pass attached to the leaf or node output it
 * came from, else the detached alias itself.
 */
tfc_status tfc_node_saved(const tfc_node *n, const tfc_saved *slot, tfc_tensor **out);
/*
 * Drop from g's list the nodes a backward without retain_graph freed and
 * those nothing but g refers to any more (graph.c).
 */
void tfc_graph_compact(tfc_graph *g);
/* *bad = 1 when t holds a NaN or Inf (lib/autograd/anomaly.c). */
tfc_status tfc_tensor_nonfinite(const tfc_tensor *t, int *bad);
int tfc_node_needs_grad(const tfc_node *n, int32_t i);
/* For backward: an error naming fn if a tensor n saved was modified in place since. */
tfc_status tfc_node_check_saved(const tfc_node *n, const char *fn);
/* Free n's saved tensors (the graph is cleared or the node dies). */
void tfc_node_drop_saved(tfc_node *n);
void tfc_node_unref(tfc_node *n);
/*
 * Backward on g from n >= 1 roots together (each produced on g; seeds NULL
 * or seeds[r] NULL: ones), as tfc_graph_backward does for one; errors
 * name fn. checkpoint.c's replay runs one root per output of its function.
 */
tfc_status tfc_graph_backward_roots(const char *fn, tfc_graph *g, const tfc_tensor *const *roots,
                                    const tfc_tensor *const *seeds, int32_t n);

#endif
