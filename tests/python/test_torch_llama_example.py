"""examples/torch_llama.py: its Llama-style decoder (plain PyTorch) trains on
tfcore.torch's kernels exactly as on PyTorch's own ops.

The two models (same initialisation, same batches, torch's AdamW) differ
only in the five kernels the example swaps: RMSNorm, RoPE, grouped-query
causal attention, SwiGLU, the LM head with its loss. The reference side is
the example's TorchKernels, transformers' equations in PyTorch 1.13 ops, not
tfcore. Per step the losses and every parameter's gradient must agree (f64:
1e-10 relative, f32: 1e-5), and a gradient perturbed by one part in 10^6
at any one of the five kernels must be caught, so the check sees each
kernel's backward.
"""
import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_spec = importlib.util.spec_from_file_location("torch_llama", os.path.join(ROOT, "examples", "torch_llama.py"))
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)

# Small enough for milliseconds a step; grouped heads (4 query heads on 2 kv heads), two blocks.
CFG = ex.Config(vocab_size=23, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48)


def data(steps, batch=2, seq=16):
    ids = torch.randint(0, CFG.vocab_size, (400,), generator=torch.Generator().manual_seed(5))
    return ex.batches(ids, steps, batch, seq, seed=6)


def train_side_by_side(models, dtype, steps):
    """Train the models in lockstep; per step (loss rel. difference, worst per-parameter gradient
    rel. difference ‖g₁ − g₀‖ / ‖g₀‖) of models[1] against models[0]."""
    opts = [ex.make_optimizer(m, 3e-3) for m in models]
    out = []
    for x, y in data(steps):
        losses, grads = [], []
        for m, o in zip(models, opts):
            loss = m(x, y)
            o.zero_grad(set_to_none=True)
            loss.backward()
            losses.append(loss.item())
            grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
            o.step()
        assert set(grads[0]) == set(grads[1])
        g_rel = max(((grads[1][n] - g).norm() / g.norm()).item() for n, g in grads[0].items())
        out.append((abs(losses[1] - losses[0]) / abs(losses[0]), g_rel))
    return out


@pytest.mark.parametrize("dtype,tol,steps", [(torch.float64, 1e-10, 4), (torch.float32, 1e-5, 3)])
def test_tfcore_kernels_train_like_torch_ops(dtype, tol, steps):
    models = ex.build(CFG, ["torch", "tfcore"], dtype, seed=0)
    assert models[0].kern is ex.TorchKernels and models[1].kern is ex.TfcoreKernels
    for p in models[0].parameters():
        assert p.dtype == dtype
    for i, (loss_rel, grad_rel) in enumerate(train_side_by_side(models, dtype, steps)):
        assert loss_rel <= tol, "step %d: losses differ by %.3g (relative)" % (i, loss_rel)
        assert grad_rel <= tol, "step %d: gradients differ by %.3g (relative)" % (i, grad_rel)


class _Nudge(torch.autograd.Function):
    """Identity forward; the gradient on its way back scaled by 1 + 1e-6."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * (1 + 1e-6)


def _nudged(slot):
    """TfcoreKernels with the backward of kernel `slot` off by one part in 10^6."""
    base = getattr(ex.TfcoreKernels, slot)

    def wrapped(*args):
        out = base(*args)
        return tuple(_Nudge.apply(o) for o in out) if isinstance(out, tuple) else _Nudge.apply(out)

    return type("Nudged", (ex.TfcoreKernels,), {slot: staticmethod(wrapped)})


@pytest.mark.parametrize("slot", ["rms_norm", "rope", "attention", "swiglu", "lm_loss"])
def test_a_wrong_gradient_in_any_kernel_is_caught(slot):
    models = ex.build(CFG, ["torch", "tfcore"], torch.float64, seed=0)
    kern = _nudged(slot)
    for m in models[1].modules():
        if hasattr(m, "kern"):
            m.kern = kern
    (loss_rel, grad_rel), = train_side_by_side(models, torch.float64, 1)
    assert loss_rel <= 1e-10  # the forward is untouched
    assert grad_rel > 1e-8, "a 1e-6 error in %s's gradient went unnoticed (%.3g)" % (slot, grad_rel)


def test_example_runs_and_reports(capsys):
    """The script's own loop: both sides, the side-by-side table, the speed lines."""
    losses = ex.main(["--steps", "2", "--batch", "2", "--seq", "16", "--dim", "32", "--layers", "1",
                      "--ffn", "48", "--threads", "1"])
    out = capsys.readouterr().out
    assert len(losses) == 2 and len(losses[0]) == 2
    assert abs(losses[0][0] - losses[1][0]) <= 1e-5 * losses[0][0]
    assert "largest relative loss difference" in out and out.count("tokens/s") == 2
