/*
 * Inverted dropout: y = x ⊙ m / (1 − p) with m_i = [u_i ≥ p], u_i the i-th
 * uniform of the Philox stream (seed, offset) in row-major order of x.
 * Backward regenerates the same mask: dx = dy ⊙ m / (1 − p).
 */
#include "core/rng.h"
#include "cpu/parallel.h"
#include "ops/op_util.h"

/* The scaled mask m / (1 − p) as a tensor of x's shape and dtype. */
static tfc_status make_mask(const int64_t *shape, int32_t ndim, tfc_dtype dt, double p, uint64_t seed,
                            uint64_t offset, tfc_tensor **out) {
    tfc_tensor *m;
    TFC_TRY(tfc_tensor_new(shape, ndim, dt, TFC_DEVICE_CPU, 0, &m));
    int64_t n = tfc_numel(m);
    double keep = 1.0 / (1.0 - p);
    void *data = tfc_data(m);
    TFC_PARALLEL_RANGE(n, 1 << 14, lo, hi) {
        for (int64_t i = lo; i < hi; i++) {
            double v = tfc_rng_uniform(seed, offset, (uint64_t)i) >= p ? keep : 0.0;
            if (dt == TFC_DTYPE_F64) ((double *)data)[i] = v;
            else ((float *)data)[i] = (float)v;
        }
    }
    *out = m;
    return TFC_OK;
}

static tfc_status dropout_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0], *m;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    TFC_TRY(make_mask(dy->shape, dy->ndim, dy->dtype, n->params.f[0], (uint64_t)n->params.i[0],
                      (uint64_t)n->params.i[1], &m));
    tfc_status s = tfc_mul(NULL, dy, m, &gin[0]);
    tfc_tensor_release(m);
    return s;
}

TFC_API tfc_status tfc_dropout(tfc_graph *g, const tfc_tensor *x, double p, uint64_t seed, uint64_t offset,
                               tfc_tensor **out) {
    const char *fn = "tfc_dropout";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (!(p >= 0.0 && p < 1.0)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: p is %g, must be in [0, 1)", fn, p);
    tfc_tensor *m, *r;
    TFC_TRY(make_mask(x->shape, x->ndim, x->dtype, p, seed, offset, &m));
    tfc_status s = tfc_mul(NULL, x, m, &r);
    tfc_tensor_release(m);
    TFC_TRY(s);
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, dropout_backward, 1, 1, &n);
        if (s == TFC_OK) {
            n->params.f[0] = p;
            n->params.i[0] = (int64_t)seed;
            n->params.i[1] = (int64_t)offset;
            tfc_node_set_input(n, 0, x);
            tfc_node_attach_output(n, 0, r);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(r);
            return s;
        }
    }
    *out = r;
    return TFC_OK;
}
