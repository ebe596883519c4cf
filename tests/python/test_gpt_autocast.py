"""bf16 autocast of tfcore.GPT (tfc_gpt_set_autocast) against an independent
reference: the GPT-2 forward written in torch f64 (test_gpt.torch_gpt) whose
Linears and LM head round their operands to bf16 as they enter the product
(and the incoming gradient as it enters the backward products) — the recipe
the header states — with everything else f64. Also: the step stays close
to the f32 step, master weights and gradients stay f32, the bf16 weight
copies are refreshed once per optimizer step, checkpoints cross between
autocast and f32 runs, and bad requests are refused clearly."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from helpers import needs
from tfcore._lib import check
from test_gpt import perturb, read_safetensors

pytestmark = needs("tfc_gpt_set_autocast")


def r16(t):
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Matmul(torch.autograd.Function):
    """x @ w with both operands rounded to bf16; backward rounds the incoming gradient likewise."""

    @staticmethod
    def forward(ctx, x, w):
        xr, wr = r16(x), r16(w)
        ctx.save_for_backward(xr, wr)
        return xr @ wr

    @staticmethod
    def backward(ctx, gy):
        xr, wr = ctx.saved_tensors
        g = r16(gy)
        return g @ wr.transpose(-1, -2), (xr.reshape(-1, xr.shape[-1]).T @ g.reshape(-1, g.shape[-1]))


def torch_gpt_bf16(P, cfg, idx, targets):
    """GPT-2 forward (HF names, Conv1D weights) in f64 with bf16-rounded Linear/head operands."""
    B, T = idx.shape
    C, nh = cfg["n_embd"], cfg["n_head"]
    x = P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"][:T]

    def ln(x, name):
        return TF.layer_norm(x, (C,), P[name + ".weight"], P.get(name + ".bias"), cfg["ln_eps"])

    def lin(x, name):
        y = Bf16Matmul.apply(x, P[name + ".weight"])
        return y + P[name + ".bias"] if name + ".bias" in P else y
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(cfg["n_layer"]):
        h = "transformer.h.%d." % layer
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.reshape(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)
        y = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
        x = x + lin(y.transpose(1, 2).reshape(B, T, C), h + "attn.c_proj")
        m = TF.gelu(lin(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
        x = x + lin(m, h + "mlp.c_proj")
    x = ln(x, "transformer.ln_f")
    head = P["lm_head.weight"] if "lm_head.weight" in P else P["transformer.wte.weight"]
    logits = Bf16Matmul.apply(x, head.T)
    return logits, TF.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def small_model(seed=3, **kw):
    cfg = dict(vocab_size=96, n_layer=2, n_head=2, n_embd=64, block_size=16)
    cfg.update(kw)
    m = tfcore.GPT("char-tiny", seed=seed, **cfg)
    perturb(m, 4)
    return m


def batch(vocab, B=2, T=16, seed=5):
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, (B, T)), rng.integers(0, vocab, (B, T))


def loss_only_forward(model, idx, tg):
    from tfcore.gpt import _ids
    from tfcore.tensor import _wrap
    loss = tfcore.ffi.new("tfc_tensor **")
    check(tfcore.lib.tfc_gpt_forward(model._h, tfcore.autograd.graph(), _ids(idx)._h, _ids(tg)._h,
                                            tfcore.ffi.NULL, loss))
    return _wrap(loss[0])


def max_rel(got, ref):
    return float(np.max(np.abs(got - ref)) / max(1e-30, np.max(np.abs(ref))))


def grads(model):
    return {n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}


@pytest.mark.parametrize("loss_only", [False, True])
def test_autocast_step_matches_bf16_operand_reference_and_f32(loss_only, tmp_path):
    model = small_model()
    path = tmp_path / "m.safetensors"
    model.save(path)
    P = {n: t.double().requires_grad_(True) for n, t in read_safetensors(path)[0].items()}
    idx, tg = batch(96)
    cfg = model.config.to_dict()

    # the f32 step, for the "close to f32" comparison
    logits32, loss32 = model(idx, tg)
    loss32.backward()
    g32 = grads(model)
    for p in model.parameters():
        p.grad = None
    model.autocast = tfcore.bfloat16
    assert model.autocast is tfcore.bfloat16
    if loss_only:  # tfc_gpt_forward without logits (the path training takes)
        logits, loss = None, loss_only_forward(model, idx, tg)
    else:
        logits, loss = model(idx, tg)
    loss.backward()
    g16 = grads(model)
    assert all(p.dtype == tfcore.float32 and p.grad.dtype == tfcore.float32 for p in model.parameters())

    ref_logits, ref_loss = torch_gpt_bf16(P, cfg, torch.tensor(idx), torch.tensor(tg))
    ref_loss.backward()
    # Reference: the same bf16 recipe in f64. What separates us from it is f32
    # arithmetic elsewhere and, rarely, an activation on the other side of a
    # bf16 rounding boundary in f32 vs f64. Measured: ~1e-7 everywhere (the f32
    # step is ~3e-3 from this reference); stated tolerances 1e-5 (loss,
    # logits) and 1e-4 (gradients, relative to each one's largest entry).
    assert abs(loss.item() - ref_loss.item()) <= 1e-5 * abs(ref_loss.item())
    if logits is not None:
        assert max_rel(logits.numpy(), ref_logits.detach().numpy()) <= 1e-5
    for n in g16:
        assert max_rel(g16[n], P[n].grad.numpy()) <= 1e-4, n
    # Close to the f32 step: the bf16 rounding moves the loss by well under
    # 0.1% and the gradients by under 2% of their scale (measured ~0.5%)...
    assert abs(loss.item() - loss32.item()) <= 1e-3 * abs(loss32.item())
    for n in g16:
        assert max_rel(g16[n], g32[n]) <= 2e-2, n
    # ...and measurably: the bf16 step is not the f32 step (it really rounds),
    # and it is nearer the bf16 reference than the f32 step is.
    assert loss.item() != loss32.item()
    w = "transformer.h.0.mlp.c_fc.weight"
    assert max_rel(g16[w], P[w].grad.numpy()) < max_rel(g32[w], P[w].grad.numpy())


def test_master_weights_stay_f32_and_copies_refresh_once_per_step():
    model = small_model(seed=7)
    n_copies = 2 * 4 + 1  # 4 Linears per layer and the (tied) head
    model.autocast = "bf16"
    assert tfcore.lib.tfc_gpt_autocast_refreshes(model._h) == 0
    opt = tfcore.optim.AdamW(model.parameters(), lr=1e-2)
    idx, tg = batch(96)
    losses = []
    for step in range(3):
        _, loss = model(idx, tg)
        _, again = model(idx, tg)  # a second forward in the same step: no new copies
        assert again.item() == loss.item()
        assert tfcore.lib.tfc_gpt_autocast_refreshes(model._h) == n_copies * (step + 1)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        assert all(p.dtype == tfcore.float32 for p in model.parameters())
    assert losses[-1] < losses[0]
    # the copies follow the weights: a fresh autocast model given these f32
    # weights computes bitwise the same loss (a stale copy would not)
    _, loss = model(idx, tg)
    fresh = small_model(seed=8)
    with tfcore.no_grad():
        for (_, p), (_, q) in zip(fresh.named_parameters(), model.named_parameters()):
            p.copy_(q.numpy())
    fresh.autocast = tfcore.bfloat16
    assert fresh(idx, tg)[1].item() == loss.item()
    # off again: the f32 forward
    model.autocast = None
    assert model.autocast is None and tfcore.lib.tfc_gpt_autocast_refreshes(model._h) == 0


def test_checkpoints_cross_between_autocast_and_f32(tmp_path):
    idx, tg = batch(96)
    a = small_model(seed=9)
    a.autocast = tfcore.bfloat16
    opt = tfcore.optim.AdamW(a.parameters(), lr=1e-2)
    _, loss = a(idx, tg)
    loss.backward()
    opt.step()
    path = tmp_path / "bf16run.safetensors"
    a.save(path)
    tensors, _ = read_safetensors(path)
    assert all(t.dtype == torch.float32 for t in tensors.values())  # checkpoints stay f32
    b = tfcore.GPT.load(path)  # into an f32 run
    assert b.autocast is None
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(p.numpy(), q.numpy())
    a.autocast = None
    assert b(idx, tg)[1].item() == a(idx, tg)[1].item()
    c = small_model(seed=10)  # an f32 checkpoint into an autocast run
    c.autocast = tfcore.bfloat16
    _, before = c(idx, tg)
    c.load_weights(path)  # the copies must follow the loaded weights
    b.autocast = "bf16"
    assert c(idx, tg)[1].item() == b(idx, tg)[1].item() != before.item()


def test_autocast_bad_requests():
    m64 = tfcore.GPT("char-tiny", vocab_size=32, n_layer=1, n_embd=32, n_head=2, block_size=8, dtype="float64")
    with pytest.raises(tfcore.DtypeError, match="tfc_gpt_set_autocast: the model is f64; bf16 autocast needs an f32"):
        m64.autocast = tfcore.bfloat16
    m = tfcore.GPT("char-tiny", vocab_size=32, n_layer=1, n_embd=32, n_head=2, block_size=8)
    with pytest.raises(ValueError, match="only bfloat16"):
        m.autocast = tfcore.float16
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_gpt_set_autocast: dtype is f16"):
        check(tfcore.lib.tfc_gpt_set_autocast(m._h, tfcore.lib.TFC_DTYPE_F16))
    assert m.autocast is None  # unchanged
    m.autocast = "bf16"
    m.quantize("int8")  # quantized after autocast was set: its forward says why it cannot run
    with pytest.raises(tfcore.Error, match="quantized .*bf16 autocast"):
        m(np.zeros((1, 4), np.int64))
    q = tfcore.GPT("char-tiny", vocab_size=32, n_layer=1, n_embd=32, n_head=2, block_size=8)
    q.quantize("int8")
    with pytest.raises(tfcore.Error, match="tfc_gpt_set_autocast: the model is quantized"):
        q.autocast = tfcore.bfloat16
    assert tfcore.GPT("char-tiny", vocab_size=32, n_layer=1, n_embd=32, n_head=2, block_size=8,
                      autocast="bf16").autocast is tfcore.bfloat16


def test_autocast_with_recompute_gives_the_same_gradients():
    # recompute re-runs each block in backward: it must find the same bf16 weight copies
    idx, tg = batch(96)
    out = []
    for rc in (False, True):
        m = small_model(seed=11)
        m.autocast = tfcore.bfloat16
        m.recompute = rc
        _, loss = m(idx, tg)
        loss.backward()
        out.append((loss.item(), grads(m)))
    assert out[0][0] == out[1][0]
    for n in out[0][1]:
        assert np.array_equal(out[0][1][n], out[1][1][n]), n
