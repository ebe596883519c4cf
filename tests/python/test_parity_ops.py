"""Every op forward and backward against torch 1.13 autograd, on random
inputs in float64 (error <= 1e-10 relative to scale) and float32 (<= 1e-5).
Each case is written once and run by both frameworks: `ns` is tfcore or
helpers.TorchNS, and tensor methods/indexing are spelled alike in both."""
import numpy as np
import pytest

from helpers import needs, parity

DTYPES = ["float64", "float32"]
rng = np.random.default_rng(1234)


def randn(*shape):
    return rng.standard_normal(shape)


def positive(*shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(*shape):
    x = rng.uniform(0.3, 1.5, shape)
    return x * np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def rms_norm(ns, *args):
    """tfcore.functional.rms_norm (not re-exported as tfcore.rms_norm) or its torch twin (helpers.TorchNS)."""
    return (ns.functional if hasattr(ns, "functional") else ns).rms_norm(*args)


# name: (fn(ns, *inputs), inputs)
ELEMENTWISE = {
    "add": (lambda ns, a, b: a + b, [randn(3, 4), randn(3, 4)]),
    "add_broadcast": (lambda ns, a, b: a + b, [randn(2, 1, 4), randn(3, 1)]),
    "sub_broadcast": (lambda ns, a, b: a - b, [randn(3, 4), randn(4)]),
    "mul_broadcast": (lambda ns, a, b: a * b, [randn(2, 3, 4), randn(1, 3, 1)]),
    "div_broadcast": (lambda ns, a, b: a / b, [randn(3, 4), away_from_zero(4)]),
    "same_input_twice": (lambda ns, a: a * a + a, [randn(5)]),
    "add_scalar": (lambda ns, a: a + 2.5, [randn(3, 4)]),
    "radd_scalar": (lambda ns, a: 2.5 + a, [randn(3, 4)]),
    "sub_scalar": (lambda ns, a: a - 1.5, [randn(3, 4)]),
    "rsub_scalar": (lambda ns, a: 1.5 - a, [randn(3, 4)]),
    "mul_scalar": (lambda ns, a: a * -3.0, [randn(3, 4)]),
    "div_scalar": (lambda ns, a: a / 3.0, [randn(3, 4)]),
    "rdiv_scalar": (lambda ns, a: 3.0 / a, [away_from_zero(3, 4)]),
    "pow_scalar": (lambda ns, a: a ** 3, [randn(3, 4)]),
    "pow_fraction": (lambda ns, a: a ** 0.5, [positive(3, 4)]),
    "neg": (lambda ns, a: -a, [randn(3, 4)]),
    "exp": (lambda ns, a: a.exp(), [randn(3, 4)]),
    "log": (lambda ns, a: a.log(), [positive(3, 4)]),
    "sqrt": (lambda ns, a: a.sqrt(), [positive(3, 4)]),
    "rsqrt": (lambda ns, a: a.rsqrt(), [positive(3, 4)]),
    "tanh": (lambda ns, a: a.tanh(), [randn(3, 4)]),
    "sigmoid": (lambda ns, a: a.sigmoid(), [randn(3, 4)]),
    "relu": (lambda ns, a: a.relu(), [away_from_zero(3, 4)]),
    "gelu_exact": (lambda ns, a: ns.gelu(a), [randn(3, 4)]),
    "gelu_tanh": (lambda ns, a: ns.gelu(a, approximate="tanh"), [randn(3, 4)]),
    "silu": (lambda ns, a: ns.silu(a * 4.0), [randn(3, 4)]),
    "chain": (lambda ns, a, b: ((a * b).tanh() + a.exp() / (b * b + 1.0)).sigmoid(), [randn(4, 5), randn(4, 5)]),
}

REDUCTIONS = {
    "sum_all": (lambda ns, a: a.sum(), [randn(3, 4)]),
    "sum_dim": (lambda ns, a: a.sum(1), [randn(3, 4, 5)]),
    "sum_dims_keepdim": (lambda ns, a: a.sum(dim=(0, 2), keepdim=True), [randn(3, 4, 5)]),
    "mean_all": (lambda ns, a: a.mean(), [randn(3, 4)]),
    "mean_dim_neg": (lambda ns, a: a.mean(-1, keepdim=True), [randn(3, 4)]),
    "max_all": (lambda ns, a: a.max(), [randn(3, 4)]),
    "max_dim": (lambda ns, a: a.max(1), [randn(3, 4)]),
    "min_all": (lambda ns, a: a.min(), [randn(3, 4)]),
    "min_dim_keepdim": (lambda ns, a: a.min(0, keepdim=True), [randn(3, 4)]),
    "var_all": (lambda ns, a: a.var(), [randn(3, 4)]),
    "var_dim_biased": (lambda ns, a: a.var(1, unbiased=False, keepdim=True), [randn(3, 4)]),
    "var_dim_unbiased": (lambda ns, a: a.var(0), [randn(5, 4)]),
    "argmax_dim": (lambda ns, a: a.argmax(1), [randn(3, 7)]),
    "argmax_all": (lambda ns, a: a.argmax(), [randn(3, 7)]),
    "argmin_dim": (lambda ns, a: a.argmin(0), [randn(3, 7)]),
}

VIEWS = {
    "reshape": (lambda ns, a: a.reshape(4, 3) * 2.0, [randn(3, 4)]),
    "reshape_infer": (lambda ns, a: a.reshape(-1, 2).exp(), [randn(3, 4)]),
    "reshape_copy": (lambda ns, a: a.transpose(0, 1).reshape(12).exp(), [randn(3, 4)]),
    "view": (lambda ns, a: a.view(2, 6).tanh(), [randn(3, 4)]),
    "transpose": (lambda ns, a: a.transpose(0, 2).exp(), [randn(2, 3, 4)]),
    "permute": (lambda ns, a: a.permute(2, 0, 1).sigmoid(), [randn(2, 3, 4)]),
    "T": (lambda ns, a: a.T * 3.0, [randn(3, 4)]),
    "slice_step": (lambda ns, a: a[1:, ::2].exp(), [randn(4, 6)]),
    "slice_negative": (lambda ns, a: a[-3:-1, 1:5:3].tanh(), [randn(4, 6)]),
    "int_index": (lambda ns, a: a[1].exp(), [randn(4, 6)]),
    "int_index_negative": (lambda ns, a: a[:, -2] * 3.0, [randn(4, 6)]),
    "newaxis_ellipsis": (lambda ns, a: a[None, ..., 1:2] * 2.0, [randn(3, 4, 5)]),
    "ellipsis_middle": (lambda ns, a: a[0, ..., ::2].exp(), [randn(3, 4, 5)]),
    "expand": (lambda ns, a: a.expand(3, 4) * 1.5, [randn(1, 4)]),
    "expand_add": (lambda ns, a, b: a.expand(2, 3, 4) + b, [randn(3, 1), randn(2, 3, 4)]),
    "squeeze_all": (lambda ns, a: a.squeeze().exp(), [randn(3, 1, 4, 1)]),
    "squeeze_dim": (lambda ns, a: a.squeeze(1).exp(), [randn(3, 1, 4)]),
    "unsqueeze": (lambda ns, a: a.unsqueeze(1).exp(), [randn(3, 4)]),
    "flatten": (lambda ns, a: a.flatten(1).exp(), [randn(2, 3, 4)]),
    "flatten_strided": (lambda ns, a: a.transpose(0, 1).flatten().exp(), [randn(3, 4)]),
    "contiguous": (lambda ns, a: a.T.contiguous() * 2.0, [randn(3, 4)]),
    "strided_binary": (lambda ns, a, b: a[:, ::2] * b.T, [randn(4, 6), randn(3, 4)]),
    "narrow": (lambda ns, a: a.narrow(1, 1, 2).exp(), [randn(3, 4)]),
}

LINALG = {
    "matmul_2d": (lambda ns, a, b: ns.matmul(a, b), [randn(5, 7), randn(7, 3)]),
    "matmul_operator": (lambda ns, a, b: a @ b, [randn(5, 7), randn(7, 3)]),
    "matmul_batched_broadcast": (lambda ns, a, b: a @ b, [randn(2, 3, 4, 5), randn(3, 5, 2)]),
    "matmul_vec_mat": (lambda ns, a, b: a @ b, [randn(5), randn(5, 3)]),
    "matmul_mat_vec": (lambda ns, a, b: a @ b, [randn(4, 5), randn(5)]),
    "matmul_transposed": (lambda ns, a, b: a.T @ b.transpose(0, 1), [randn(7, 5), randn(3, 7)]),
    "matmul_sliced": (lambda ns, a, b: a[:, ::2] @ b[1:4], [randn(5, 6), randn(5, 3)]),
    "linear": (lambda ns, x, w, b: ns.linear(x, w, b), [randn(4, 5), randn(3, 5), randn(3)]),
    "linear_batched": (lambda ns, x, w, b: ns.linear(x, w, b), [randn(2, 4, 5), randn(3, 5), randn(3)]),
    "linear_no_bias": (lambda ns, x, w: ns.linear(x, w), [randn(2, 4, 5), randn(3, 5)]),
}

SELECT = {
    "where": (lambda ns, c, a, b: ns.where(c, a, b), [rng.random((3, 4)) < 0.5, randn(3, 4), randn(1, 4)]),
    "masked_fill": (lambda ns, a, m: ns.masked_fill(a, m, -2.5), [randn(3, 4), rng.random((1, 4)) < 0.5]),
    "cat": (lambda ns, a, b: ns.cat([a, b], 1), [randn(2, 3), randn(2, 4)]),
    "cat_dim0_strided": (lambda ns, a, b: ns.cat([a.T, b], 0), [randn(2, 3), randn(4, 2)]),
    "stack": (lambda ns, a, b: ns.stack([a, b], 1), [randn(2, 3), randn(2, 3)]),
    "split_size": (lambda ns, a: ns.split(a, 2, 1), [randn(3, 5)]),
    "split_sections": (lambda ns, a: ns.split(a, [1, 3, 1], 1), [randn(3, 5)]),
    "split_of_transposed_one_part_used": (lambda ns, a: ns.split(a.T, [2, 1, 2], 1)[1], [randn(5, 3)]),
    "topk_largest": (lambda ns, a: ns.topk(a, 3, -1), [randn(4, 7)]),
    "topk_smallest_dim0": (lambda ns, a: ns.topk(a, 2, 0, largest=False), [randn(4, 7)]),
}

SOFTMAX = {
    "softmax_last": (lambda ns, a: ns.softmax(a, -1), [randn(3, 5)]),
    "softmax_dim0": (lambda ns, a: ns.softmax(a, 0), [randn(3, 5)]),
    "softmax_method_strided": (lambda ns, a: a.T.softmax(1), [randn(3, 5)]),
    "log_softmax": (lambda ns, a: ns.log_softmax(a, -1), [randn(3, 5) * 4]),
    "log_softmax_method": (lambda ns, a: a.log_softmax(1), [randn(2, 4, 3)]),
}

LAYERS = {
    "layer_norm": (lambda ns, x, w, b: ns.layer_norm(x, (6,), w, b, 1e-5), [randn(2, 3, 6), randn(6), randn(6)]),
    "layer_norm_no_affine": (lambda ns, x: ns.layer_norm(x, (6,)), [randn(4, 6)]),
    "layer_norm_strided": (lambda ns, x, w, b: ns.layer_norm(x.transpose(0, 1), (4,), w, b),
                           [randn(4, 3), randn(4), randn(4)]),
    "rms_norm": (lambda ns, x, w: rms_norm(ns, x, (6,), w, 1e-5), [randn(2, 3, 6), randn(6)]),
    "rms_norm_no_weight_default_eps": (lambda ns, x: rms_norm(ns, x, (6,)), [randn(4, 6)]),
    "rms_norm_strided": (lambda ns, x, w: rms_norm(ns, x.transpose(0, 1), (4,), w, 1e-3), [randn(4, 3), randn(4)]),
    "embedding": (lambda ns, ids, w: ns.embedding(ids, w), [rng.integers(0, 7, (3, 4)), randn(7, 5)]),
    "embedding_repeated": (lambda ns, ids, w: ns.embedding(ids, w), [np.array([1, 1, 3, 1]), randn(4, 3)]),
    "cross_entropy": (lambda ns, x, t: ns.cross_entropy(x, t), [randn(6, 5), rng.integers(0, 5, 6)]),
    "cross_entropy_ignore": (lambda ns, x, t: ns.cross_entropy(x, t, ignore_index=-1),
                             [randn(6, 5), np.array([0, -1, 4, 2, -1, 1])]),
    "linear_cross_entropy": (lambda ns, h, w, t: ns.linear_cross_entropy(h, w, t),
                             [randn(7, 4), randn(9, 4), rng.integers(0, 9, 7)]),
    "linear_cross_entropy_ignore_transposed_w": (
        lambda ns, h, wt, t: ns.linear_cross_entropy(h, wt.T, t, ignore_index=-1),
        [randn(6, 3), randn(3, 5), np.array([0, -1, 4, 2, -1, 1])]),
    "swiglu": (lambda ns, g, u: ns.swiglu(g, u), [randn(2, 3, 5) * 3, randn(2, 3, 5)]),
    "swiglu_fused": (lambda ns, gu: ns.swiglu(gu), [randn(4, 10) * 3]),
    "swiglu_narrowed_halves": (lambda ns, gu: ns.swiglu(gu[:, :5], gu[:, 5:]), [randn(4, 10) * 3]),
    "attention_causal": (lambda ns, q, k, v: ns.attention(q, k, v, causal=True),
                         [randn(2, 3, 5, 4), randn(2, 3, 5, 4), randn(2, 3, 5, 4)]),
    "attention_full": (lambda ns, q, k, v: ns.attention(q, k, v, causal=False),
                       [randn(1, 2, 4, 3), randn(1, 2, 6, 3), randn(1, 2, 6, 5)]),
    "attention_causal_kv_longer": (lambda ns, q, k, v: ns.attention(q, k, v, causal=True, scale=0.3),
                                   [randn(1, 2, 3, 4), randn(1, 2, 7, 4), randn(1, 2, 7, 4)]),
    "attention_permuted_views": (lambda ns, q, k, v: ns.attention(q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3),
                                                                  v.permute(0, 2, 1, 3), causal=True),
                                 [randn(2, 6, 2, 4), randn(2, 6, 2, 4), randn(2, 6, 2, 4)]),
}

NEEDS = {"softmax": ["tfc_softmax"], "log_softmax": ["tfc_log_softmax"], "layer_norm": ["tfc_layernorm"],
         "embedding": ["tfc_embedding"], "cross_entropy": ["tfc_cross_entropy"], "attention": ["tfc_attention"],
         "linear_cross_entropy": ["tfc_linear_cross_entropy"]}


def _cases(table):
    out = []
    for name, (fn, arrays) in table.items():
        syms = [s for key, v in NEEDS.items() if name.startswith(key) for s in v]
        for dt in DTYPES:
            out.append(pytest.param(fn, arrays, dt, id="%s-%s" % (name, dt), marks=needs(*syms)))
    return out


@pytest.mark.parametrize("fn,arrays,dtype", _cases(ELEMENTWISE))
def test_elementwise(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("fn,arrays,dtype", _cases(REDUCTIONS))
def test_reductions(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("fn,arrays,dtype", _cases(VIEWS))
def test_views(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("fn,arrays,dtype", _cases(LINALG))
def test_linalg(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("fn,arrays,dtype", _cases(SELECT))
def test_select(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("fn,arrays,dtype", _cases(SOFTMAX))
def test_softmax(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("fn,arrays,dtype", _cases(LAYERS))
def test_layers(fn, arrays, dtype):
    parity(fn, arrays, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cast_gradient_flows_back(dtype):
    other = "float32" if dtype == "float64" else "float64"
    parity(lambda ns, a: (a.double() if other == "float64" else a.float()).exp(), [randn(3, 4)], dtype,
           grad_tol="float32")
