"""tfcore.nn.gpt.GPT (GPT-2 built from tfcore.nn modules) against tfcore.GPT,
which test_gpt.py checks against a torch GPT-2: with the same weights the
logits, the loss (targets of -100 skipped) and every gradient agree in
float64; parameter and state_dict names are tfcore.GPT's / Hugging Face's;
and the module model overfits one batch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from helpers import needs, rel_err
from tfcore.nn.gpt import GPT as ModuleGPT

pytestmark = needs("tfc_gpt_new")


def perturb(model, seed):
    """GPT-2 init zeroes the biases and sets LayerNorms to 1/0: make every parameter matter."""
    rng = np.random.default_rng(seed)
    with tfcore.no_grad():
        for _, p in model.named_parameters():
            p.copy_(p.numpy() + rng.standard_normal(p.shape) * 0.05)


@pytest.mark.parametrize("fields", [{}, {"tie_weights": False}, {"bias": False, "tie_weights": False},
                                    {"n_layer": 3, "n_head": 4, "ln_eps": 1e-6}, {"dtype": "float32"}])
def test_module_gpt_equals_tfcore_gpt(fields):
    cfg = dict(n_layer=2, n_head=2, n_embd=16, block_size=12, vocab_size=23, dtype="float64")
    cfg.update(fields)
    fast = tfcore.GPT(tfcore.GPTConfig(**cfg), seed=4)
    perturb(fast, 5)
    slow = ModuleGPT.from_gpt(fast)
    assert [n for n, _ in slow.named_parameters()] == [n for n, _ in fast.named_parameters()]
    assert [tuple(p.shape) for p in slow.parameters()] == [tuple(p.shape) for p in fast.parameters()]
    keys = list(slow.state_dict())
    if fast.config.tie_weights:  # HF's state_dict lists the tied head too; named_parameters once
        assert keys == [n for n, _ in fast.named_parameters()] + ["lm_head.weight"]
        assert slow.lm_head.weight is slow.transformer.wte.weight
    else:
        assert keys == [n for n, _ in fast.named_parameters()]
    rng = np.random.default_rng(6)
    idx = rng.integers(0, cfg["vocab_size"], (3, 9))
    tg = rng.integers(0, cfg["vocab_size"], (3, 9))
    tg[0, 2] = tg[2, 8] = -100
    lf, Lf = fast(idx, tg)
    Lf.backward()
    ls, Ls = slow(idx, tg)
    Ls.backward()
    tol = 1e-12 if cfg["dtype"] == "float64" else 1e-5
    assert slow.transformer.wte.weight.dtype is fast.config.dtype
    assert rel_err(ls.numpy(), lf.numpy()) < tol
    assert abs(Ls.item() - Lf.item()) < tol
    # the loss is torch's cross_entropy of these logits (ignore_index -100)
    ref = TF.cross_entropy(torch.tensor(ls.numpy()).reshape(-1, cfg["vocab_size"]), torch.tensor(tg).reshape(-1))
    assert abs(Ls.item() - ref.item()) < tol
    for (n, pf), ps in zip(fast.named_parameters(), slow.parameters()):
        assert rel_err(ps.grad.numpy(), pf.grad.numpy()) < tol * 100, n


def test_module_gpt_state_dict_round_trip_and_errors():
    cfg = tfcore.GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=8, vocab_size=11, dtype="float64")
    a, b = ModuleGPT(cfg), ModuleGPT(cfg)
    b.load_state_dict(a.state_dict())
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(pa.numpy(), pb.numpy()), n
    # into a tfcore.GPT by name: the same logits
    fast = tfcore.GPT(cfg, seed=1)
    with tfcore.no_grad():
        for n, p in fast.named_parameters():
            p.copy_(a.state_dict()[n])
        assert rel_err(fast([[1, 2, 3]])[0].numpy(), a([[1, 2, 3]])[0].numpy()) < 1e-12
    sd = a.state_dict()
    del sd["transformer.h.0.ln_1.bias"]
    with pytest.raises(RuntimeError, match='Missing key.*"transformer.h.0.ln_1.bias"'):
        b.load_state_dict(sd)
    with pytest.raises(ValueError, match="block_size"):
        a(np.zeros((1, 9), np.int64))


def test_module_gpt_overfits_one_batch():
    tfcore.manual_seed(0)
    model = ModuleGPT(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=20)
    rng = np.random.default_rng(0)
    data = rng.integers(0, 20, (4, 17))
    x, y = data[:, :-1], data[:, 1:]
    opt = tfcore.optim.AdamW(list(model.parameters()), lr=3e-3, weight_decay=0.0)
    first = None
    for _ in range(120):
        _, loss = model(x, y)
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert first > 2.5 and loss.item() < 0.1, (first, loss.item())


def test_module_gpt_generate_matches_tfcore_gpt_within_block_size():
    """Greedy and seeded sampling give tfcore.GPT.generate's tokens (same weights, same sampling rule and
    stream offsets); the callback stops; the training mode is restored."""
    cfg = tfcore.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=24, vocab_size=17, dtype="float64")
    fast = tfcore.GPT(cfg, seed=8)
    perturb(fast, 9)
    slow = ModuleGPT.from_gpt(fast)
    assert slow.generate([1, 2, 3], 12, temperature=0) == fast.generate([1, 2, 3], 12, temperature=0)
    assert slow.generate([4], 15, temperature=0.9, top_k=6, seed=5) == \
        fast.generate([4], 15, temperature=0.9, top_k=6, seed=5)
    seen = []
    got = slow.generate([4], 15, temperature=0, callback=lambda t: seen.append(t) or len(seen) == 3)
    assert got == seen and len(got) == 3 and slow.training
    with pytest.raises(ValueError, match="at least one token"):
        slow.generate([], 3)


def test_module_gpt_dropout_trains_and_evaluates_as_tfcore_gpt():
    """With dropout the training forward differs from the evaluation forward and backward runs through the four
    dropout places; eval() gives tfcore.GPT's (dropout-free) evaluation logits."""
    cfg = tfcore.GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=13, dtype="float64", dropout=0.2)
    fast = tfcore.GPT(cfg, seed=2)
    perturb(fast, 3)
    slow = ModuleGPT.from_gpt(fast)
    idx = [[1, 2, 3, 4, 5]]
    tfcore.manual_seed(1)
    lt, Lt = slow(idx, idx)
    Lt.backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in slow.parameters())
    slow.eval()
    with tfcore.no_grad():
        le, _ = slow(idx)
        lf, _ = fast(idx)
    assert rel_err(le.numpy(), lf.numpy()) < 1e-12
    assert rel_err(lt.numpy(), le.numpy()) > 1e-3
