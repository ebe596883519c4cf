/*
 * ZeRO stage 1: an optimizer whose state is sharded across the ranks of a
 * communicator (tfc_optim_shard).
 *
 * The P parameters, in the optimizer's order, are one vector of T elements;
 * parameter k holds elements [start_k, start_k + n_k). Rank r owns
 * [lo, hi) = its share of T (tfc_comm_share) and keeps state only for the
 * part of each parameter that falls there: buf[j] of parameter k is a 1-D
 * tensor of |[start_k, start_k + n_k) ∩ [lo, hi)| elements (or NULL).
 * A step is
 *   g_shard = reduce_scatter(pack(local grads)) / N   (skipped if clipping did it)
 *   the fused optimizer pass over this rank's pieces  (the same per-element
 *                                                     rule as one process)
 *   params  = all_gather(this rank's updated pieces)
 * and clipping scales g_shard by max_norm / (‖g‖ + 1e-6), ‖g‖² being the
 * all-reduced sum of every rank's Σ g_shard², as clip.c does in one process.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm_impl.h"
#include "optim/optim_impl.h"
#include "tensor/dispatch.h"

struct tfc_shard_state {
    tfc_comm *c;
    tfc_dtype dtype;
    int64_t total, lo, hi;
    int64_t *counts;   /* [size]: every rank's share */
    int64_t *start;    /* [n_params]: parameter k's first element in the vector */
    void *flat;        /* [total]: packed gradients (reduce-scatter's input), then the gathered parameters */
    void *gshard;      /* [hi - lo]: this rank's averaged gradients */
    int reduced;       /* gshard holds this step's gradients (clipping reduced them) */
    uint8_t *has_grad; /* [n_params]: parameter k had a gradient when reduced */
};

/* This rank's piece of parameter k: elements [a, b) of the vector (a == b: none). */
static void piece(const tfc_optim *o, int64_t k, int64_t *a, int64_t *b) {
    const tfc_shard_state *z = o->shard;
    int64_t s = z->start[k], e = s + tfc_numel(o->params[k].p);
    *a = s > z->lo ? s : z->lo;
    *b = e < z->hi ? e : z->hi;
    if (*b < *a) *b = *a;
}

void tfc_optim_shard_free(tfc_shard_state *z) {
    if (!z) return;
    tfc_comm_release(z->c);
    free(z->counts);
    free(z->start);
    free(z->flat);
    free(z->gshard);
    free(z->has_grad);
    free(z);
}

/* The slice [a, b) - start of a full-shape state buffer as a new 1-D tensor. */
static tfc_status slice_state(const tfc_tensor *full, int64_t from, int64_t len, tfc_tensor **out) {
    int64_t d = len;
    TFC_TRY(tfc_tensor_new(&d, 1, full->dtype, TFC_DEVICE_CPU, 0, out));
    if (len)
        memcpy(tfc_data(*out), (const char *)tfc_data(full) + from * (int64_t)tfc_dtype_size(full->dtype),
               (size_t)len * tfc_dtype_size(full->dtype));
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_shard(tfc_optim *opt, tfc_comm *c) {
    const char *fn = "tfc_optim_shard";
    TFC_CHECK_NOT_NULL(fn, opt);
    TFC_CHECK_NOT_NULL(fn, c);
    tfc_status local = TFC_OK;
    if (opt->shard) local = tfc_err(TFC_ERR_UNSUPPORTED, "%s: the optimizer is sharded already", fn);
    tfc_dtype dt = opt->n_params ? opt->params[0].p->dtype : TFC_DTYPE_F32;
    int64_t total = 0;
    for (int64_t k = 0; k < opt->n_params && local == TFC_OK; k++) {
        const tfc_tensor *p = opt->params[k].p;
        if (p->storage->device != TFC_DEVICE_CPU)
            local = tfc_err(TFC_ERR_UNSUPPORTED,
                            "%s: parameter %lld %s is on a CUDA device; sharding needs NCCL, which this build does not "
                            "provide",
                            fn, (long long)k, SHAPE(p));
        else if (p->dtype != dt || (dt != TFC_DTYPE_F32 && dt != TFC_DTYPE_F64))
            local = tfc_err(TFC_ERR_UNSUPPORTED,
                            "%s: parameter %lld is %s, parameter 0 is %s; sharding takes parameters of one dtype, f32 "
                            "or f64",
                            fn, (long long)k, tfc_dtype_name(p->dtype), tfc_dtype_name(dt));
        else if (!tfc_is_contiguous(p))
            local = tfc_err(TFC_ERR_UNSUPPORTED, "%s: parameter %lld %s is not contiguous", fn, (long long)k, SHAPE(p));
        else {
            /* every sharded step writes every parameter (the all-gather): refused here, on every rank at once */
            char pname[64];
            snprintf(pname, sizeof pname, "parameter %lld", (long long)k);
            local = tfc_tensor_check_writable(fn, pname, p);
        }
        total += tfc_numel(p);
    }
    {
        const int64_t v[4] = {TFC_COLL_SHARD, opt->n_params, total, dt};
        const tfc_status codes[4] = {TFC_ERR_INVALID_ARG, TFC_ERR_SHAPE, TFC_ERR_SHAPE, TFC_ERR_DTYPE};
        const char *names[4] = {"the collective called (tfc_optim_shard vs another)", "the number of parameters",
                                "the total element count of the parameters", "the parameters' dtype"};
        TFC_TRY(tfc_comm_check(fn, c, local, v, codes, names, 4));
    }
    tfc_shard_state *z = calloc(1, sizeof *z);
    if (!z) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    z->c = tfc_comm_retain(c);
    z->dtype = dt;
    z->total = total;
    tfc_comm_share(total, c->size, c->rank, &z->lo, &z->hi);
    const size_t es = tfc_dtype_size(dt);
    z->counts = malloc(sizeof *z->counts * (size_t)c->size);
    z->start = malloc(sizeof *z->start * (size_t)(opt->n_params ? opt->n_params : 1));
    z->flat = malloc((size_t)(total ? total : 1) * es);
    z->gshard = malloc((size_t)(z->hi - z->lo ? z->hi - z->lo : 1) * es);
    z->has_grad = calloc((size_t)(opt->n_params ? opt->n_params : 1), 1);
    if (!z->counts || !z->start || !z->flat || !z->gshard || !z->has_grad) {
        tfc_optim_shard_free(z);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory for %lld elements", fn, (long long)total);
    }
    for (int32_t r = 0; r < c->size; r++) {
        int64_t a, b;
        tfc_comm_share(total, c->size, r, &a, &b);
        z->counts[r] = b - a;
    }
    int64_t off = 0;
    for (int64_t k = 0; k < opt->n_params; k++) {
        z->start[k] = off;
        off += tfc_numel(opt->params[k].p);
    }
    /* Keep this rank's slice of any state the optimizer holds already (a resumed run's). */
    opt->shard = z;
    tfc_tensor *sliced[TFC_OPTIM_MAX_BUFS];
    for (int64_t k = 0; k < opt->n_params; k++) {
        tfc_optim_slot *pp = &opt->params[k];
        int64_t a, b;
        piece(opt, k, &a, &b);
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) {
            sliced[j] = NULL;
            if (!pp->buf[j] || a == b) continue;
            tfc_status s = slice_state(pp->buf[j], a - z->start[k], b - a, &sliced[j]);
            if (s != TFC_OK) {
                for (int32_t q = 0; q < j; q++) tfc_tensor_release(sliced[q]);
                opt->shard = NULL;
                tfc_optim_shard_free(z);
                return tfc_err_in(fn, s);
            }
        }
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) {
            tfc_tensor_release(pp->buf[j]);
            pp->buf[j] = sliced[j];
        }
    }
    return TFC_OK;
}

TFC_API int32_t tfc_optim_is_sharded(const tfc_optim *opt) { return opt && opt->shard; }

/* g_shard = reduce_scatter(local gradients) / N; a parameter without a gradient packs zeros. */
static tfc_status reduce(const char *fn, tfc_optim *o) {
    tfc_shard_state *z = o->shard;
    const size_t es = tfc_dtype_size(z->dtype);
    int64_t mask_hash = 0;
    tfc_status local = TFC_OK;
    for (int64_t k = 0; k < o->n_params && local == TFC_OK; k++) {
        const tfc_tensor *p = o->params[k].p, *g = p->grad;
        char *dst = (char *)z->flat + (size_t)z->start[k] * es;
        z->has_grad[k] = g != NULL;
        if (g) {
            char gname[64];
            snprintf(gname, sizeof gname, "the grad of parameter %lld", (long long)k);
            local = tfc_optim_check_grad(fn, gname, g, "its parameter", p, p);
            if (local == TFC_OK) memcpy(dst, tfc_data(g), (size_t)tfc_numel(p) * es);
            mask_hash = mask_hash * 31 + k + 1;
        } else {
            memset(dst, 0, (size_t)tfc_numel(p) * es);
        }
    }
    /* Every rank must update the same parameters, or their copies would drift apart. */
    const int64_t v[1] = {mask_hash};
    const tfc_status codes[1] = {TFC_ERR_INVALID_ARG};
    const char *names[1] = {"which parameters have a gradient"};
    TFC_TRY(tfc_comm_check(fn, z->c, local, v, codes, names, 1));
    TFC_TRY(tfc_comm_reduce_scatterv_raw(fn, z->c, z->flat, z->gshard, z->counts, z->dtype));
    const int64_t n = z->hi - z->lo;
    if (z->c->size > 1) {
        if (z->dtype == TFC_DTYPE_F64)
            for (int64_t i = 0; i < n; i++) ((double *)z->gshard)[i] /= (double)z->c->size;
        else
            for (int64_t i = 0; i < n; i++) ((float *)z->gshard)[i] /= (float)z->c->size;
    }
    z->reduced = 1;
    return TFC_OK;
}

tfc_status tfc_optim_shard_clip(const char *fn, tfc_optim *o, double max_norm, double *total_norm) {
    tfc_shard_state *z = o->shard;
    if (!(max_norm > 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_norm is %g: must be > 0 (+INFINITY only measures)", fn, max_norm);
    if (!z->reduced) TFC_TRY(reduce(fn, o));
    const tfc_backend *be;
    TFC_TRY(tfc_backend_of(TFC_DEVICE_CPU, 0, &be));
    tfc_optim_seg seg = {.grad = z->gshard, .n = z->hi - z->lo, .start = 0, .dtype = z->dtype};
    double local = 0, sq[1];
    int32_t overflow = 0;
    tfc_grad_norm_problem pr = {.device = 0, .segs = &seg, .nseg = seg.n > 0, .norm = &local, .overflow = &overflow};
    if (pr.nseg) TFC_TRY(TFC_BACKEND_RUN_DT(fn, be, grad_norm, &pr, z->dtype));
    sq[0] = local * local;
    TFC_TRY(tfc_comm_sum_raw(fn, z->c, sq, 1, TFC_DTYPE_F64));
    double norm = sqrt(sq[0]);
    if (!isfinite(norm))
        return tfc_err(TFC_ERR_NONFINITE, "%s: the total norm over all ranks is not finite; gradients left unchanged",
                       fn);
    double c = max_norm / (norm + 1e-6);
    if (c < 1 && pr.nseg) {
        pr.c = c;
        TFC_TRY(TFC_BACKEND_RUN_DT(fn, be, grad_scale, &pr, z->dtype));
    }
    if (total_norm) *total_norm = norm;
    return TFC_OK;
}

/* This rank's state buffers of parameter k: 1-D, its piece's length. */
static tfc_status alloc_piece_state(const char *fn, tfc_optim *o, int64_t k, int64_t len) {
    tfc_optim_slot *pp = &o->params[k];
    for (int32_t j = 0; j < tfc_optim_num_bufs(o); j++) {
        if (pp->buf[j]) continue;
        int64_t d = len;
        TFC_TRY(tfc_tensor_new(&d, 1, pp->p->dtype, TFC_DEVICE_CPU, 0, &pp->buf[j]));
        memset(tfc_data(pp->buf[j]), 0, (size_t)len * tfc_dtype_size(pp->p->dtype));
    }
    return TFC_OK;
}

tfc_status tfc_optim_shard_step(const char *fn, tfc_optim *o, const tfc_optim_problem *proto) {
    tfc_shard_state *z = o->shard;
    if (!z->reduced) TFC_TRY(reduce(fn, o));
    z->reduced = 0;
    TFC_TRY(tfc_optim_reserve_segs(fn, o, o->n_params));
    const size_t es = tfc_dtype_size(z->dtype);
    const tfc_optim_options *opts = &o->opts;
    const int adam = o->kind != TFC_OPTIM_SGD;
    int64_t nseg = 0, start = 0;
    for (int64_t k = 0; k < o->n_params; k++) {
        tfc_optim_slot *pp = &o->params[k];
        int64_t a, b;
        piece(o, k, &a, &b);
        if (!z->has_grad[k] || a == b) continue;
        TFC_TRY(alloc_piece_state(fn, o, k, b - a));
        const tfc_optim_group *g = &o->groups[pp->group];
        tfc_optim_seg *s = &o->segs[nseg++];
        *s = (tfc_optim_seg){.param = (char *)tfc_data(pp->p) + (size_t)(a - z->start[k]) * es,
                             .grad = (const char *)z->gshard + (size_t)(a - z->lo) * es,
                             .n = b - a,
                             .start = start,
                             .dtype = z->dtype,
                             .first = !pp->has_state,
                             .step = pp->step + 1,
                             .lr = g->lr,
                             .weight_decay = g->weight_decay};
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++) s->buf[j] = pp->buf[j] ? tfc_data(pp->buf[j]) : NULL;
        start += b - a;
        if (adam) {
            double t = (double)(pp->step + 1);
            s->step_size = g->lr / (1.0 - pow(opts->beta1, t));
            s->bc2_sqrt = sqrt(1.0 - pow(opts->beta2, t));
        }
    }
    tfc_optim_problem pr = *proto;
    pr.device = 0;
    pr.segs = o->segs;
    pr.nseg = nseg;
    const tfc_backend *be;
    TFC_TRY(tfc_backend_of(TFC_DEVICE_CPU, 0, &be));
    if (nseg > 0) TFC_TRY(TFC_BACKEND_RUN_DT(fn, be, optim_step, &pr, z->dtype));
    /* Every rank's updated pieces into every rank's parameters. */
    char *flat = z->flat;
    for (int64_t k = 0; k < o->n_params; k++) {
        int64_t a, b;
        piece(o, k, &a, &b);
        if (a < b)
            memcpy(flat + (size_t)a * es, (const char *)tfc_data(o->params[k].p) + (size_t)(a - z->start[k]) * es,
                   (size_t)(b - a) * es);
    }
    TFC_TRY(tfc_comm_allgatherv_raw(fn, z->c, NULL, flat, z->counts, z->dtype));
    for (int64_t k = 0; k < o->n_params; k++) {
        tfc_optim_slot *pp = &o->params[k];
        memcpy(tfc_data(pp->p), flat + (size_t)z->start[k] * es, (size_t)tfc_numel(pp->p) * es);
        tfc_bump_version(pp->p);
        if (!z->has_grad[k]) continue;
        pp->has_state = 1;
        pp->step++;
        for (int32_t j = 0; j < TFC_OPTIM_MAX_BUFS; j++)
            if (pp->buf[j]) tfc_bump_version(pp->buf[j]);
    }
    o->step++;
    return TFC_OK;
}

/* A new unsharded optimizer of o's kind, options and groups over o's parameters, without state. */
static tfc_status clone_empty(const char *fn, const tfc_optim *o, tfc_optim **out) {
    tfc_optim *n;
    TFC_TRY(tfc_optim_create(fn, o->kind, &o->opts, &n));
    n->groups = malloc(sizeof *n->groups * (size_t)(o->n_groups ? o->n_groups : 1));
    n->params = calloc((size_t)(o->n_params ? o->n_params : 1), sizeof *n->params);
    if (!n->groups || !n->params) {
        tfc_optim_release(n);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    memcpy(n->groups, o->groups, sizeof *n->groups * (size_t)o->n_groups);
    n->n_groups = n->cap_groups = o->n_groups;
    n->cap_params = o->n_params;
    for (int64_t k = 0; k < o->n_params; k++) {
        n->params[k].p = tfc_tensor_retain(o->params[k].p);
        n->params[k].group = o->params[k].group;
        n->params[k].has_state = o->params[k].has_state;
        n->params[k].step = o->params[k].step;
        n->n_params++;
    }
    n->step = o->step;
    *out = n;
    return TFC_OK;
}

TFC_API tfc_status tfc_optim_gather(const tfc_optim *opt, int32_t root, tfc_optim **out) {
    const char *fn = "tfc_optim_gather";
    TFC_CHECK_NOT_NULL(fn, opt);
    TFC_CHECK_NOT_NULL(fn, out);
    const tfc_shard_state *z = opt->shard;
    if (!z) return tfc_err(TFC_ERR_INVALID_ARG, "%s: the optimizer is not sharded (tfc_optim_shard)", fn);
    tfc_status local = TFC_OK;
    if (root < 0 || root >= z->c->size)
        local =
            tfc_err(TFC_ERR_INVALID_ARG, "%s: root is %d; the communicator has ranks 0..%d", fn, root, z->c->size - 1);
    const int64_t v[2] = {TFC_COLL_GATHER, root};
    const tfc_status codes[2] = {TFC_ERR_INVALID_ARG, TFC_ERR_INVALID_ARG};
    const char *names[2] = {"the collective called (tfc_optim_gather vs another)", "the root rank"};
    TFC_TRY(tfc_comm_check(fn, z->c, local, v, codes, names, 2));
    *out = NULL;
    const int is_root = z->c->rank == root;
    const size_t es = tfc_dtype_size(z->dtype);
    tfc_optim *full = NULL;
    if (is_root) TFC_TRY(clone_empty(fn, opt, &full));
    char *send = malloc((size_t)(z->hi - z->lo ? z->hi - z->lo : 1) * es);
    char *recv = is_root ? malloc((size_t)(z->total ? z->total : 1) * es) : NULL;
    tfc_status s = send && (recv || !is_root) ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    /* One buffer kind at a time: this rank's pieces end to end, gathered on root, cut into parameters. */
    for (int32_t j = 0; j < tfc_optim_num_bufs(opt) && s == TFC_OK; j++) {
        for (int64_t k = 0; k < opt->n_params; k++) {
            int64_t a, b;
            piece(opt, k, &a, &b);
            const tfc_tensor *buf = opt->params[k].buf[j];
            if (a == b) continue;
            if (buf)
                memcpy(send + (size_t)(a - z->lo) * es, tfc_data(buf), (size_t)(b - a) * es);
            else
                memset(send + (size_t)(a - z->lo) * es, 0, (size_t)(b - a) * es);
        }
        s = tfc_comm_gatherv_raw(fn, z->c, send, recv, z->counts, z->dtype, root);
        for (int64_t k = 0; is_root && s == TFC_OK && k < opt->n_params; k++) {
            tfc_optim_slot *pp = &full->params[k];
            if (!pp->has_state) continue;
            s = tfc_tensor_new(pp->p->shape, pp->p->ndim, pp->p->dtype, TFC_DEVICE_CPU, 0, &pp->buf[j]);
            if (s == TFC_OK)
                memcpy(tfc_data(pp->buf[j]), recv + (size_t)z->start[k] * es, (size_t)tfc_numel(pp->p) * es);
        }
    }
    free(send);
    free(recv);
    if (s != TFC_OK) {
        tfc_optim_release(full);
        return tfc_err_in(fn, s);
    }
    *out = full;
    return TFC_OK;
}
