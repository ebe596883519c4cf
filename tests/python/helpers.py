"""Shared pieces of the parity tests: torch twins of tfcore's functions and
the comparison rule (max abs error relative to the reference's scale)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore

TOL = {"float64": 1e-10, "float32": 1e-5}
TORCH_DTYPE = {"float64": torch.float64, "float32": torch.float32}


def needs(*symbols):
    """Skip when the library does not export these functions yet (ops whose
    kernels land later); once exported, the test runs."""
    missing = [s for s in symbols if not hasattr(tfcore.lib, s)]
    return pytest.mark.skipif(bool(missing), reason="libtfcore lacks " + ", ".join(missing))


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, "shape %s vs reference %s" % (got.shape, ref.shape)
    if ref.size == 0:
        return 0.0
    scale = max(1.0, float(np.max(np.abs(ref))))
    return float(np.max(np.abs(got - ref))) / scale


def assert_close(got, ref, dtype, what=""):
    err = rel_err(got, ref)
    assert err <= TOL[dtype], "%s: error %.3g > %.1g" % (what, err, TOL[dtype])


def torch_attention(q, k, v, causal=True, scale=None):
    """softmax(scale q kᵀ + mask) v with the bottom-right causal mask, written out."""
    T, S = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        i = torch.arange(T).unsqueeze(1)
        j = torch.arange(S).unsqueeze(0)
        s = s.masked_fill(j > i + (S - T), float("-inf"))
    return torch.softmax(s, -1) @ v


class TorchNS:
    """tfcore's module functions, spelled with torch."""
    matmul = staticmethod(torch.matmul)
    softmax = staticmethod(torch.softmax)
    log_softmax = staticmethod(torch.log_softmax)
    layer_norm = staticmethod(TF.layer_norm)
    embedding = staticmethod(TF.embedding)
    cross_entropy = staticmethod(TF.cross_entropy)
    attention = staticmethod(torch_attention)
    where = staticmethod(torch.where)
    cat = staticmethod(torch.cat)
    split = staticmethod(torch.split)
    topk = staticmethod(torch.topk)
    linear = staticmethod(TF.linear)
    stack = staticmethod(torch.stack)

    @staticmethod
    def linear_cross_entropy(h, w, target, ignore_index=-100):
        return TF.cross_entropy(TF.linear(h, w), target, ignore_index=ignore_index)

    @staticmethod
    def rms_norm(x, normalized_shape, weight=None, eps=None):
        """torch 2.x's F.rms_norm (Llama's RMSNorm) written from its equation: torch 1.13 has none."""
        assert tuple(normalized_shape) == tuple(x.shape[-1:])
        if eps is None:
            eps = torch.finfo(x.dtype).eps
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y if weight is None else y * weight

    @staticmethod
    def gelu(x, approximate="none"):
        return TF.gelu(x, approximate=approximate)

    silu = staticmethod(TF.silu)

    @staticmethod
    def swiglu(gate, up=None):
        """As HF's LlamaMLP writes it: F.silu(gate_proj(x)) * up_proj(x); one argument is gate_up, gate first."""
        if up is None:
            gate, up = gate.chunk(2, dim=-1)
        return TF.silu(gate) * up

    @staticmethod
    def masked_fill(x, mask, value):
        return x.masked_fill(mask, value)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for o in out]
    return [out]


def parity(fn, arrays, dtype, grad=None, seed=0, grad_tol=None):
    """Run fn(ns, *inputs) with tfcore and torch on the same data and compare
    the outputs and the gradients of every float input (grad: which inputs
    require grad; default all float arrays). Returns the worst error."""
    rng = np.random.default_rng(seed)
    if grad is None:
        grad = [np.issubdtype(a.dtype, np.floating) for a in arrays]
    tf_in, th_in = [], []
    for a, g in zip(arrays, grad):
        if np.issubdtype(a.dtype, np.floating):
            tf_in.append(tfcore.tensor(a, dtype=dtype, requires_grad=g))
            th_in.append(torch.tensor(a, dtype=TORCH_DTYPE[dtype], requires_grad=g))
        else:
            tf_in.append(tfcore.tensor(a))
            th_in.append(torch.tensor(a))
    tf_out = _flat(fn(tfcore, *tf_in))
    th_out = _flat(fn(TorchNS, *th_in))
    assert len(tf_out) == len(th_out)
    worst = 0.0
    seeds_tf, seeds_th, outs_tf, outs_th = [], [], [], []
    for i, (o, r) in enumerate(zip(tf_out, th_out)):
        assert o.shape == tuple(r.shape), "output %d: shape %s vs torch %s" % (i, o.shape, tuple(r.shape))
        if r.dtype in (torch.float32, torch.float64):
            odt = "float64" if r.dtype == torch.float64 else "float32"
            assert_close(o.numpy(), r.detach().numpy(), "float32" if "float32" in (odt, dtype) else dtype,
                         "output %d" % i)
            worst = max(worst, rel_err(o.numpy(), r.detach().numpy()))
            if r.requires_grad:
                w = rng.standard_normal(tuple(r.shape))
                seeds_tf.append(tfcore.tensor(w, dtype=odt))
                seeds_th.append(torch.tensor(w, dtype=TORCH_DTYPE[odt]))
                outs_tf.append(o)
                outs_th.append(r)
        else:
            np.testing.assert_array_equal(o.numpy(), r.numpy(), "output %d" % i)
    if not outs_tf:
        return worst
    # one scalar objective over all float outputs: Σ_i <w_i, out_i>
    loss_tf = sum((o * w).sum() for o, w in zip(outs_tf, seeds_tf))
    loss_th = sum((o * w).sum() for o, w in zip(outs_th, seeds_th))
    loss_tf.backward()
    loss_th.backward()
    for i, (t, r) in enumerate(zip(tf_in, th_in)):
        if r.requires_grad:
            assert r.grad is not None
            assert t.grad is not None, "input %d got no gradient" % i
            assert_close(t.grad.numpy(), r.grad.numpy(), grad_tol or dtype, "grad of input %d" % i)
            worst = max(worst, rel_err(t.grad.numpy(), r.grad.numpy()))
    return worst
