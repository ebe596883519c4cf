/*
 * tfc_cross_entropy, the graph door of the fused softmax + NLL: saves the
 * logits, targets and per-row log-sum-exp; backward is one fused pass
 * (tfc_cross_entropy_backward). Logits [..., C] are flattened to [N, C].
 *
 * The explicit doors tfc_cross_entropy_forward / _backward: checks, then the backend's cross_entropy entries.
 */
#include <stdlib.h>

#include "core/dtype.h"
#include "device/sync_count.h"
#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

/* logits [N, C] (C >= 1) and targets [N]; the backend checks each target is in [0, C) or ignore_index. */
static tfc_status check_problem(const char *fn, const tfc_tensor *logits, const tfc_tensor *targets) {
    TFC_TRY(tfc_karg_float(fn, "logits", logits));
    if (logits->ndim != 2 || logits->shape[1] < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: logits is %s, must be [N, C] with C >= 1", fn, SHAPE(logits));
    TFC_TRY(tfc_karg_index(fn, "targets", targets));
    const tfc_tensor *ts[2] = {logits, targets};
    const char *names[2] = {"logits", "targets"};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    return tfc_karg_shape(fn, "targets", targets, logits->shape, 1, "logits", logits);
}

TFC_API tfc_status tfc_cross_entropy_forward(const tfc_tensor *logits, const tfc_tensor *targets, int64_t ignore_index,
                                             tfc_tensor *loss, tfc_tensor *lse) {
    const char *fn = "tfc_cross_entropy_forward";
    const tfc_backend *b;
    TFC_TRY(check_problem(fn, logits, targets));
    TFC_TRY(tfc_tensor_backend(fn, logits, &b));
    TFC_CHECK_NOT_NULL(fn, loss);
    tfc_dtype st = tfc_backend_stats_dtype(b, logits->dtype);
    TFC_TRY(tfc_karg_output(fn, "loss", loss, st, NULL, 0, "logits", logits));
    if (lse) TFC_TRY(tfc_karg_output(fn, "lse", lse, st, logits->shape, 1, "logits", logits));
    const tfc_tensor *all[] = {loss, lse, logits, targets};
    const char *names[] = {"loss", "lse", "logits", "targets"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 2, 4));

    tfc_cross_entropy_problem p = {.device = tfc_device_index(logits),
                                   .dtype = logits->dtype,
                                   .index_dtype = targets->dtype,
                                   .n = logits->shape[0],
                                   .c = logits->shape[1],
                                   .ignore_index = ignore_index,
                                   .loss = tfc_data(loss),
                                   .lse = tfc_out_data(lse)};
    /* targets copied from the host were range-checked there: the device need not check them and wait */
    const int checked = tfc_storage_range_within(targets, p.c, ignore_index);
    if (checked) p.accumulate = TFC_IDS_CHECKED;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, logits, &p.logits);
    if (s == TFC_OK) s = tfc_operand(&o, targets, &p.targets);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, cross_entropy_forward, &p);
    /* otherwise off the CPU the kernel checks them and its verdict is read back before it returns */
    if (!checked)
        tfc_device_note_sync(logits->storage->device, p.device,
                             "tfc_cross_entropy: the targets' range check on the device");
    if (s == TFC_OK) tfc_written(loss, lse, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_cross_entropy_backward(const tfc_tensor *dloss, const tfc_tensor *logits,
                                              const tfc_tensor *targets, const tfc_tensor *lse, int64_t ignore_index,
                                              tfc_tensor *dlogits, uint32_t flags) {
    const char *fn = "tfc_cross_entropy_backward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(check_problem(fn, logits, targets));
    TFC_TRY(tfc_tensor_backend(fn, logits, &b));
    tfc_dtype st = tfc_backend_stats_dtype(b, logits->dtype);
    TFC_TRY(tfc_karg_float(fn, "dloss", dloss));
    TFC_TRY(tfc_karg_stats(fn, "dloss", dloss, st, dloss->shape, dloss->ndim, "logits", logits));
    if (tfc_numel(dloss) != 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: dloss is %s, must hold one element (the loss is a scalar)", fn,
                       SHAPE(dloss));
    if (lse) TFC_TRY(tfc_karg_stats(fn, "lse", lse, st, logits->shape, 1, "logits", logits));
    TFC_CHECK_NOT_NULL(fn, dlogits);
    TFC_TRY(tfc_karg_output(fn, "dlogits", dlogits, logits->dtype, logits->shape, 2, "logits", logits));
    const tfc_tensor *all[] = {dlogits, dloss, logits, targets, lse};
    const char *names[] = {"dlogits", "dloss", "logits", "targets", "lse"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 5));

    tfc_cross_entropy_problem p = {.device = tfc_device_index(logits),
                                   .dtype = logits->dtype,
                                   .index_dtype = targets->dtype,
                                   .n = logits->shape[0],
                                   .c = logits->shape[1],
                                   .ignore_index = ignore_index,
                                   .dlogits = tfc_data(dlogits),
                                   .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, logits, &p.logits);
    if (s == TFC_OK) s = tfc_operand(&o, targets, &p.targets);
    if (s == TFC_OK) s = tfc_operand(&o, lse, &p.lse_in);
    if (s == TFC_OK) s = tfc_operand(&o, dloss, &p.dloss);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, cross_entropy_backward, &p);
    if (s == TFC_OK) tfc_written(dlogits, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

/* logits and targets as the [N, C] and [N] views the kernels saw; orig: logits as given (its history). */
typedef struct ce_ctx {
    tfc_saved logits, targets, lse, orig;
    int64_t ignore_index;
} ce_ctx;

/*
 * create_graph: dx = dl · (softmax(x) ⊙ m − onehot ⊙ m) with m_r = [t_r valid]
 * / n_valid — the fused backward's formula with the softmax recorded on gg.
 * The masks are constants built on the host from the targets.
 */
static tfc_status ce_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dl, tfc_tensor **dx) {
    const ce_ctx *c = n->ctx;
    const tfc_tensor *lg = c->logits.t;
    int64_t N = lg->shape[0], C = lg->shape[1], nv = 0;
    tfc_tensor *tgt = NULL, *tc = NULL, *x = NULL, *x2 = NULL, *p = NULL, *pm = NULL, *d = NULL, *u = NULL;
    tfc_tensor *rowm = NULL, *oneh = NULL, *rowm_d = NULL, *oneh_d = NULL;
    double *rm = calloc((size_t)(N ? N : 1), sizeof *rm), *oh = calloc((size_t)(N * C > 0 ? N * C : 1), sizeof *oh);
    int64_t *tv = calloc((size_t)(N ? N : 1), sizeof *tv);
    tfc_status s = rm && oh && tv ? TFC_OK : tfc_err(TFC_ERR_OOM, "tfc_cross_entropy (backward): out of memory");
    if (s == TFC_OK) s = tfc_tensor_to_device(c->targets.t, TFC_DEVICE_CPU, 0, &tgt);
    if (s == TFC_OK) s = tfc_make_contiguous(tgt, &tc);
    if (s == TFC_OK) {
        for (int64_t r = 0; r < N; r++) {
            tv[r] = (int64_t)tfc_scalar_load(tfc_data(tc), tc->dtype, r);
            nv += tv[r] != c->ignore_index;
        }
        for (int64_t r = 0; r < N; r++)
            if (tv[r] != c->ignore_index) {
                rm[r] = 1.0 / (double)nv;
                oh[r * C + tv[r]] = 1.0 / (double)nv;
            }
        s = tfc_tensor_from_data(rm, (int64_t[]){N, 1}, 2, TFC_DTYPE_F64, &rowm);
    }
    if (s == TFC_OK) s = tfc_tensor_from_data(oh, (int64_t[]){N, C}, 2, TFC_DTYPE_F64, &oneh);
    /* on the logits' device and dtype */
    if (s == TFC_OK) s = tfc_tensor_to_device(rowm, lg->storage->device, tfc_device_index(lg), &u);
    if (s == TFC_OK) s = tfc_cast(NULL, u, lg->dtype, &rowm_d);
    tfc_tensor_release(u);
    u = NULL;
    if (s == TFC_OK) s = tfc_tensor_to_device(oneh, lg->storage->device, tfc_device_index(lg), &u);
    if (s == TFC_OK) s = tfc_cast(NULL, u, lg->dtype, &oneh_d);
    tfc_tensor_release(u);
    u = NULL;
    if (s == TFC_OK) s = tfc_node_saved(n, &c->orig, &x);
    if (s == TFC_OK) s = tfc_reshape(gg, x, (int64_t[]){N, C}, 2, &x2);
    if (s == TFC_OK) s = tfc_softmax(gg, x2, -1, &p);
    if (s == TFC_OK) s = tfc_mul(gg, p, rowm_d, &pm);
    if (s == TFC_OK) s = tfc_sub(gg, pm, oneh_d, &d);
    if (s == TFC_OK) s = tfc_mul(gg, d, dl, &u);
    if (s == TFC_OK) s = tfc_reshape(gg, u, n->in[0].shape, n->in[0].ndim, dx);
    tfc_tensor *all[] = {tgt, tc, x, x2, p, pm, d, u, rowm, oneh, rowm_d, oneh_d};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    free(rm);
    free(oh);
    free(tv);
    return s;
}

static tfc_status ce_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const ce_ctx *c = n->ctx;
    tfc_tensor *dl = gout[0], *logits = c->logits.t, *d2, *d;
    if (!dl || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return ce_backward_graph(n, gg, dl, &gin[0]);
    TFC_TRY(tfc_tensor_new_like(logits, logits->dtype, &d2));
    tfc_status s = tfc_cross_entropy_backward(dl, logits, c->targets.t, c->lse.t, c->ignore_index, d2, 0);
    if (s == TFC_OK) s = tfc_reshape(NULL, d2, n->in[0].shape, n->in[0].ndim, &d);
    tfc_tensor_release(d2);
    TFC_TRY(s);
    gin[0] = d;
    return TFC_OK;
}

TFC_API tfc_status tfc_cross_entropy(tfc_graph *g, const tfc_tensor *logits, const tfc_tensor *targets,
                                     int64_t ignore_index, tfc_tensor **out) {
    const char *fn = "tfc_cross_entropy";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "logits", logits));
    TFC_CHECK_NOT_NULL(fn, targets);
    if (logits->ndim < 1) return tfc_err(TFC_ERR_SHAPE, "%s: logits is a scalar; need [N, C]", fn);
    int64_t C = logits->shape[logits->ndim - 1], N = C ? tfc_numel(logits) / C : 0;
    if (tfc_numel(targets) != N)
        return tfc_err(TFC_ERR_SHAPE, "%s: logits is %s (%lld rows), targets is %s", fn, SHAPE(logits), (long long)N,
                       SHAPE(targets));
    tfc_tensor *l2 = NULL, *t1 = NULL, *loss = NULL, *lse = NULL;
    tfc_status s = tfc_reshape(NULL, logits, (int64_t[]){N, C}, 2, &l2);
    if (s == TFC_OK) s = tfc_reshape(NULL, targets, &N, 1, &t1);
    tfc_dtype ldt = tfc_tensor_stats_dtype(logits);
    if (s == TFC_OK) s = tfc_tensor_new_on(logits, NULL, 0, ldt, &loss);
    if (s == TFC_OK) s = tfc_tensor_new_on(logits, &N, 1, ldt, &lse);
    if (s == TFC_OK) s = tfc_cross_entropy_forward(l2, t1, ignore_index, loss, lse);
    if (s == TFC_OK && tfc_should_record(g, &logits, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, ce_node_backward, 1, 1, sizeof(ce_ctx), &n);
        if (s == TFC_OK) {
            ce_ctx *c = n->ctx;
            c->ignore_index = ignore_index;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, logits);
            s = tfc_node_keep(n, &c->logits, l2);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->orig, logits);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->targets, t1);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->lse, lse);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, loss);
        }
    }
    tfc_tensor_release(l2);
    tfc_tensor_release(t1);
    tfc_tensor_release(lse);
    if (s != TFC_OK) {
        tfc_tensor_release(loss);
        return tfc_err_in(fn, s);
    }
    *out = loss;
    return TFC_OK;
}
