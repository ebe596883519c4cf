/*
 * Collectives on tensors: check this rank's arguments, then check with the
 * other ranks that all made the same call and none refused its arguments
 * (tfc_comm_check: a rank with bad arguments must not leave the others
 * waiting in a collective it will not run), stage views and 16-bit floats through a
 * contiguous buffer of the wire dtype, run the raw collective, write back.
 *
 * CPU tensors go through MPI (host buffers), CUDA tensors through NCCL
 * (the CUDA module's coll_* entries; lib/dist/nccl.c).
 *
 * all_reduce:     t[i] = sum_r t_r[i]            (avg: / N)
 * broadcast:      t[i] = t_root[i]
 * all_gather:     out[r*n + i] = in_r[i]         in: n elements, out: N*n
 * reduce_scatter: out_r[i] = sum_q in_q[r*n + i] in: N*n elements, out: n
 */
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm_impl.h"
#include "tensor/dispatch.h"

static int on_cuda(const tfc_tensor *t) { return t->storage->device == TFC_DEVICE_CUDA; }

/*
 * The dtype a tensor travels as: on the CPU 16-bit floats are summed in
 * f32, as MPI has no such type; NCCL (CUDA) takes every dtype as it is.
 */
static tfc_dtype wire_dtype(const tfc_tensor *t) {
    if (on_cuda(t)) return t->dtype;
    return t->dtype == TFC_DTYPE_BF16 || t->dtype == TFC_DTYPE_F16 ? TFC_DTYPE_F32 : t->dtype;
}

static tfc_status check_tensor(const char *fn, const char *name, const tfc_tensor *t) {
    if (!t) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    if (t->storage->device != TFC_DEVICE_CPU && t->storage->device != TFC_DEVICE_CUDA) {
        char dev[32];
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s is on %s; collectives take CPU or CUDA tensors", fn, name,
                       tfc_device_str(t, dev, sizeof dev));
    }
    switch (t->dtype) {
    case TFC_DTYPE_F32:
    case TFC_DTYPE_F64:
    case TFC_DTYPE_BF16:
    case TFC_DTYPE_F16:
    case TFC_DTYPE_I32:
    case TFC_DTYPE_I64: return TFC_OK;
    default:
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s; collectives take f32, f64, bf16, f16, i32 or i64", fn, name,
                       tfc_dtype_name(t->dtype));
    }
}

static tfc_status check_op(const char *fn, const tfc_tensor *t, tfc_comm_op op) {
    if (op != TFC_COMM_SUM && op != TFC_COMM_AVG)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: op is %d; it must be TFC_COMM_SUM or TFC_COMM_AVG", fn, (int)op);
    if (op == TFC_COMM_AVG && !tfc_dtype_is_float(t->dtype))
        return tfc_err(TFC_ERR_DTYPE, "%s: TFC_COMM_AVG of a %s tensor (an average needs a float dtype)", fn,
                       tfc_dtype_name(t->dtype));
    return TFC_OK;
}

/*
 * A contiguous buffer of t's elements in the wire dtype: t's own memory
 * when it already is one, else a new tensor (*stage) holding a copy (when
 * copy_in) or nothing yet.
 */
static tfc_status stage_of(const char *fn, const tfc_tensor *t, int copy_in, tfc_tensor **stage, void **ptr) {
    *stage = NULL;
    tfc_dtype w = wire_dtype(t);
    if (w == t->dtype && tfc_is_contiguous(t)) {
        *ptr = tfc_numel(t) ? tfc_data(t) : NULL;
        return TFC_OK;
    }
    TFC_TRY(tfc_tensor_new(t->shape, t->ndim, w, t->storage->device, t->storage->device_index, stage));
    if (copy_in) {
        tfc_status s = tfc_tensor_copy_view(fn, *stage, t);
        if (s != TFC_OK) {
            tfc_tensor_release(*stage);
            *stage = NULL;
            return tfc_err_in(fn, s);
        }
    }
    *ptr = tfc_data(*stage);
    return TFC_OK;
}

/* Write a staged result back into t (when staged) and mark t modified. */
static tfc_status unstage(const char *fn, tfc_tensor *t, tfc_tensor *stage) {
    tfc_status s = TFC_OK;
    if (stage) s = tfc_tensor_copy_view(fn, t, stage);
    tfc_tensor_release(stage);
    if (s == TFC_OK) tfc_bump_version(t);
    return tfc_err_in(fn, s);
}

/* p[0..n) /= size: a division, not a multiplication by 1/size, so every element is correctly rounded. */
static void divide(void *p, int64_t n, tfc_dtype w, int32_t size) {
    if (w == TFC_DTYPE_F64) {
        double *d = p;
        for (int64_t i = 0; i < n; i++) d[i] /= (double)size;
    } else {
        float *f = p;
        for (int64_t i = 0; i < n; i++) f[i] /= (float)size;
    }
}

/* The NCCL problem of a collective on t's device (send/recv: the staged buffers, n elements per rank). */
static tfc_coll_problem coll_of(const tfc_tensor *t, tfc_comm_op op, int32_t root, const void *send, void *recv,
                                int64_t n) {
    return (tfc_coll_problem){.device = t->storage->device_index,
                              .dtype = t->dtype,
                              .avg = op == TFC_COMM_AVG,
                              .root = root,
                              .send = send,
                              .recv = recv,
                              .count = n};
}

static int overlap(const tfc_tensor *a, const tfc_tensor *b) { return a->storage == b->storage; }

/* in and out of one collective live on one device. */
static tfc_status same_device(const char *fn, const tfc_tensor *in, const tfc_tensor *out) {
    const tfc_tensor *ts[2] = {in, out};
    const char *names[2] = {"in", "out"};
    return tfc_same_device(fn, ts, names, 2);
}

TFC_API tfc_status tfc_barrier(tfc_comm *c) {
    const char *fn = "tfc_barrier";
    TFC_CHECK_NOT_NULL(fn, c);
    /* The agreement check is itself an all-reduce: no rank leaves it before all arrived. */
    const int64_t v[1] = {TFC_COLL_BARRIER};
    const tfc_status codes[1] = {TFC_ERR_INVALID_ARG};
    const char *names[1] = {"the collective called (barrier vs another)"};
    return tfc_comm_check(fn, c, TFC_OK, v, codes, names, 1);
}

/*
 * The check every collective starts with: local is this rank's verdict on
 * its arguments; then the same collective, dtype, element count and root/op
 * on every rank.
 */
static tfc_status agree(const char *fn, tfc_comm *c, tfc_status local, int64_t kind, const tfc_tensor *t, int64_t numel,
                        int64_t arg, const char *argname) {
    const int64_t v[5] = {kind, local == TFC_OK ? t->dtype : 0, numel, arg, local == TFC_OK ? on_cuda(t) : 0};
    const tfc_status codes[5] = {TFC_ERR_INVALID_ARG, TFC_ERR_DTYPE, TFC_ERR_SHAPE, TFC_ERR_INVALID_ARG,
                                 TFC_ERR_DEVICE};
    const char *names[5] = {"the collective called", "the dtype (tfc_dtype code)", "the element count", argname,
                            "whether the tensor is on a CUDA device (1) or the CPU (0)"};
    return tfc_comm_check(fn, c, local, v, codes, names, 5);
}

/* A collective on CUDA memory through NCCL (the CUDA module's coll_* entries); p has all but the communicator. */
typedef enum { COLL_ALL_REDUCE, COLL_BROADCAST, COLL_ALL_GATHER, COLL_REDUCE_SCATTER } coll_kind;
static tfc_status run_nccl(const char *fn, tfc_comm *c, coll_kind k, tfc_coll_problem *p) {
    const tfc_backend *be;
    TFC_TRY(tfc_comm_nccl(fn, c, p->device, &be, &p->comm));
    tfc_status s;
    tfc_comm_busy(c, fn);
    switch (k) {
    case COLL_ALL_REDUCE: s = TFC_BACKEND_RUN(fn, be, coll_all_reduce, p); break;
    case COLL_BROADCAST: s = TFC_BACKEND_RUN(fn, be, coll_broadcast, p); break;
    case COLL_ALL_GATHER: s = TFC_BACKEND_RUN(fn, be, coll_all_gather, p); break;
    default: s = TFC_BACKEND_RUN(fn, be, coll_reduce_scatter, p); break;
    }
    tfc_comm_idle(c);
    return s;
}

TFC_API tfc_status tfc_all_reduce(tfc_comm *c, tfc_tensor *t, tfc_comm_op op) {
    const char *fn = "tfc_all_reduce";
    TFC_CHECK_NOT_NULL(fn, c);
    tfc_status local = check_tensor(fn, "t", t);
    if (local == TFC_OK) local = tfc_tensor_check_writable(fn, "t", t);
    if (local == TFC_OK) local = check_op(fn, t, op);
    const int64_t n = local == TFC_OK ? tfc_numel(t) : 0;
    TFC_TRY(agree(fn, c, local, TFC_COLL_ALL_REDUCE, t, n, op, "the reduce op"));
    tfc_tensor *stage;
    void *p;
    TFC_TRY(stage_of(fn, t, 1, &stage, &p));
    tfc_status s;
    if (on_cuda(t)) {
        tfc_coll_problem cp = coll_of(t, op, 0, p, p, n);
        s = n ? run_nccl(fn, c, COLL_ALL_REDUCE, &cp) : TFC_OK;
    } else {
        s = tfc_comm_sum_raw(fn, c, p, n, wire_dtype(t));
        if (s == TFC_OK && op == TFC_COMM_AVG && c->size > 1) divide(p, n, wire_dtype(t), c->size);
    }
    if (s != TFC_OK) {
        tfc_tensor_release(stage);
        return s;
    }
    return unstage(fn, t, stage);
}

TFC_API tfc_status tfc_broadcast(tfc_comm *c, tfc_tensor *t, int32_t root) {
    const char *fn = "tfc_broadcast";
    TFC_CHECK_NOT_NULL(fn, c);
    tfc_status local = check_tensor(fn, "t", t);
    if (local == TFC_OK) local = tfc_tensor_check_writable(fn, "t", t);
    if (local == TFC_OK && (root < 0 || root >= c->size))
        local = tfc_err(TFC_ERR_INVALID_ARG, "%s: root is %d; the communicator has ranks 0..%d", fn, root, c->size - 1);
    const int64_t n = local == TFC_OK ? tfc_numel(t) : 0;
    TFC_TRY(agree(fn, c, local, TFC_COLL_BROADCAST, t, n, root, "the root rank"));
    tfc_tensor *stage;
    void *p;
    TFC_TRY(stage_of(fn, t, c->rank == root, &stage, &p));
    tfc_status s;
    if (on_cuda(t)) {
        tfc_coll_problem cp = coll_of(t, TFC_COMM_SUM, root, p, p, n);
        s = n ? run_nccl(fn, c, COLL_BROADCAST, &cp) : TFC_OK;
    } else {
        s = tfc_comm_bcast_raw(fn, c, p, n, wire_dtype(t), root);
    }
    if (s != TFC_OK) {
        tfc_tensor_release(stage);
        return s;
    }
    return unstage(fn, t, stage);
}

/* big's shape is N times small's along dim 0 (a 0-d small: big is [N]). */
static tfc_status check_stacked(const char *fn, const char *bigname, const tfc_tensor *big, const char *smallname,
                                const tfc_tensor *small, int32_t N) {
    int ok = small->dtype == big->dtype;
    if (!ok)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s, %s is %s; they must match", fn, smallname,
                       tfc_dtype_name(small->dtype), bigname, tfc_dtype_name(big->dtype));
    if (small->ndim == 0) {
        ok = big->ndim == 1 && big->shape[0] == N;
    } else {
        ok = big->ndim == small->ndim && big->shape[0] == (int64_t)N * small->shape[0];
        for (int32_t i = 1; ok && i < small->ndim; i++) ok = big->shape[i] == small->shape[i];
    }
    if (!ok)
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, %s is %s; %s must be %d times %s along dim 0 (%d ranks)", fn,
                       smallname, SHAPE(small), bigname, SHAPE(big), bigname, N, smallname, N);
    if (overlap(small, big))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s and %s share memory; they must not overlap", fn, smallname,
                       bigname);
    return TFC_OK;
}

/* counts[r] = n for every rank (NULL on OOM). */
static int64_t *equal_counts(int32_t size, int64_t n) {
    int64_t *counts = malloc(sizeof *counts * (size_t)size);
    for (int32_t r = 0; counts && r < size; r++) counts[r] = n;
    return counts;
}

/*
 * The part all_gather and reduce_scatter share once their checks passed:
 * stage in and out, move n elements per rank (NCCL on CUDA, MPI on the
 * CPU), write out back. gather: all-gather, else reduce-scatter with op.
 */
static tfc_status stacked(const char *fn, tfc_comm *c, int gather, const tfc_tensor *in, tfc_tensor *out,
                          tfc_comm_op op, int64_t n) {
    int64_t *counts = equal_counts(c->size, n);
    if (!counts) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_tensor *sin = NULL, *sout = NULL;
    void *pin, *pout;
    tfc_status s = stage_of(fn, in, 1, &sin, &pin);
    if (s == TFC_OK) s = stage_of(fn, out, 0, &sout, &pout);
    if (s == TFC_OK && on_cuda(in)) {
        tfc_coll_problem cp = coll_of(in, op, 0, pin, pout, n);
        s = n ? run_nccl(fn, c, gather ? COLL_ALL_GATHER : COLL_REDUCE_SCATTER, &cp) : TFC_OK;
    } else if (s == TFC_OK && gather) {
        s = tfc_comm_allgatherv_raw(fn, c, pin, pout, counts, wire_dtype(in));
    } else if (s == TFC_OK) {
        s = tfc_comm_reduce_scatterv_raw(fn, c, pin, pout, counts, wire_dtype(in));
        if (s == TFC_OK && op == TFC_COMM_AVG && c->size > 1) divide(pout, n, wire_dtype(in), c->size);
    }
    free(counts);
    tfc_tensor_release(sin);
    if (s != TFC_OK) {
        tfc_tensor_release(sout);
        return s;
    }
    return unstage(fn, out, sout);
}

TFC_API tfc_status tfc_all_gather(tfc_comm *c, const tfc_tensor *in, tfc_tensor *out) {
    const char *fn = "tfc_all_gather";
    TFC_CHECK_NOT_NULL(fn, c);
    tfc_status local = check_tensor(fn, "in", in);
    if (local == TFC_OK) local = check_tensor(fn, "out", out);
    if (local == TFC_OK) local = tfc_tensor_check_writable(fn, "out", out);
    if (local == TFC_OK) local = same_device(fn, in, out);
    if (local == TFC_OK) local = check_stacked(fn, "out", out, "in", in, c->size);
    const int64_t n = local == TFC_OK ? tfc_numel(in) : 0;
    TFC_TRY(agree(fn, c, local, TFC_COLL_ALL_GATHER, in, n, 0, "-"));
    return stacked(fn, c, 1, in, out, TFC_COMM_SUM, n);
}

TFC_API tfc_status tfc_reduce_scatter(tfc_comm *c, const tfc_tensor *in, tfc_tensor *out, tfc_comm_op op) {
    const char *fn = "tfc_reduce_scatter";
    TFC_CHECK_NOT_NULL(fn, c);
    tfc_status local = check_tensor(fn, "in", in);
    if (local == TFC_OK) local = check_tensor(fn, "out", out);
    if (local == TFC_OK) local = tfc_tensor_check_writable(fn, "out", out);
    if (local == TFC_OK) local = check_op(fn, in, op);
    if (local == TFC_OK) local = same_device(fn, in, out);
    if (local == TFC_OK) local = check_stacked(fn, "in", in, "out", out, c->size);
    const int64_t n = local == TFC_OK ? tfc_numel(out) : 0;
    TFC_TRY(agree(fn, c, local, TFC_COLL_REDUCE_SCATTER, out, n, op, "the reduce op"));
    return stacked(fn, c, 0, in, out, op, n);
}
