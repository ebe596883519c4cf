"""GPT.quantize: the quantized model's logits against the same float model
whose block Linear weights were replaced by tfcore.quantize → dequantize of
them (the ordinary float32 path as the reference), greedy generation, the
saved quantized checkpoint read back by a plain safetensors reader, and the
errors."""
import json
import struct

import numpy as np
import pytest

import tfcore
from helpers import needs

pytestmark = needs("tfc_gpt_quantize")

QLINEARS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
PROMPT = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]


def model():
    return tfcore.GPT(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=50, seed=0)


def logits(m, ids=PROMPT):
    with tfcore.no_grad():
        lg, _ = m(np.array([ids], dtype=np.int64))
    return lg.numpy()[0]


def dequantized_reference(fmt, group):
    ref = model()
    for name, p in ref.named_parameters():
        if name.endswith(QLINEARS):
            q = tfcore.quantize(p, fmt, group_size=group, in_out=True)
            with tfcore.no_grad():
                p.copy_(q.dequantize(in_out=True))
    return ref


@pytest.mark.parametrize("fmt,group", [("int8", 0), ("int4", 32), ("int4", 64)])
def test_quantized_logits_match_the_dequantized_float_model(fmt, group):
    m, f32 = model(), model()
    n_before = m.num_parameters()
    assert m.quantize(fmt, group_size=group) is m
    assert m.quant_format == fmt and m.quant_group_size == group
    # the float weights of the quantized layers are gone: 12·C² values a block
    assert m.num_parameters() == n_before - 2 * 12 * 64 * 64
    assert not any(n.endswith(QLINEARS) for n, _ in m.named_parameters())
    got, ref = logits(m), logits(dequantized_reference(fmt, group))
    # the same products in another summation order: f32 rounding (logits are O(1))
    assert np.abs(got - ref).max() < 2e-5
    # and against the float model (random-init weights, logits up to ~1): int8 within 5e-3, int4 within 0.2
    # (measured: ~1e-3 and ~0.06)
    assert np.abs(got - logits(f32)).max() < (5e-3 if fmt == "int8" else 0.2)
    assert np.abs(got - logits(f32)).max() > 1e-6


def test_quantized_generate_greedy_matches_the_reference():
    m = model().quantize("int8")
    ref = dequantized_reference("int8", 0)
    toks = m.generate(PROMPT, 24, temperature=0)
    assert len(toks) == 24 and all(0 <= t < 50 for t in toks)
    # greedy tokens of the quantized model = the reference's unless two logits tie to within f32 rounding
    want = ref.generate(PROMPT, 24, temperature=0)
    if toks != want:
        i = next(i for i in range(24) if toks[i] != want[i])
        lg = logits(ref, (PROMPT + want)[-32:][: len(PROMPT) + i])[-1]
        assert abs(lg[toks[i]] - lg[want[i]]) < 1e-4
    # sampling is reproducible
    assert m.generate(PROMPT, 10, temperature=0.8, seed=4) == m.generate(PROMPT, 10, temperature=0.8, seed=4)


def test_quantized_checkpoint_round_trip(tmp_path):
    m = model().quantize("int4", group_size=32)
    path = tmp_path / "q.safetensors"
    m.save(path)
    back = tfcore.GPT.load(path)
    assert back.quant_format == "int4" and back.quant_group_size == 32
    np.testing.assert_array_equal(logits(back), logits(m))
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    assert hdr["__metadata__"]["tfc.quant.format"] == "int4"
    assert hdr["__metadata__"]["tfc.quant.group_size"] == "32"
    e = hdr["transformer.h.0.mlp.c_fc.weight.qcodes"]
    assert e["dtype"] == "U8" and e["shape"] == [256, 32]  # [out, in/2]
    assert hdr["transformer.h.0.mlp.c_fc.weight.qscales"]["shape"] == [256, 2]
    assert "transformer.h.0.mlp.c_fc.weight" not in hdr


def test_errors(tmp_path):
    m = model()
    m.save(tmp_path / "f32.safetensors")
    with pytest.raises(ValueError, match="format must be 'int8' or 'int4'"):
        m.quantize("int2")
    with pytest.raises(tfcore.Error, match="group_size is 48"):
        m.quantize("int4", group_size=48)
    assert m.quant_format is None
    m.quantize("int8")
    with pytest.raises(tfcore.Error, match="already quantized"):
        m.quantize("int8")
    # forward under grad mode just runs without a graph; the loss has no backward
    lg, loss = m(np.array([PROMPT]), np.array([PROMPT]))
    assert np.isfinite(loss.item())
    with pytest.raises(tfcore.Error, match="tfc_gpt_load_into: the model is quantized"):
        m.load_weights(tmp_path / "f32.safetensors")


# ---- the quantized LM head (GPT.quantize_head, tfc_gpt_quantize_head) ----------------------------

def head_reference(tie, blocks=None, head=("int8", 0)):
    """The float32 reference: an untied model with m's parameters whose lm_head.weight is
    dequantize(quantize(head weight)) (wte stays the exact embedding), blocks dequantized too."""
    src = tfcore.GPT(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=50, seed=0, tie_weights=tie)
    ref = tfcore.GPT(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=50, seed=0, tie_weights=False)
    sd = src.state_dict()
    hw = sd["transformer.wte.weight" if tie else "lm_head.weight"]
    deq = tfcore.quantize(hw, head[0], group_size=head[1]).dequantize()
    with tfcore.no_grad():
        for name, p in ref.named_parameters():
            if name == "lm_head.weight":
                p.copy_(deq)
            elif blocks and name.endswith(QLINEARS):
                q = tfcore.quantize(sd[name], blocks[0], group_size=blocks[1], in_out=True)
                p.copy_(q.dequantize(in_out=True))
            else:
                p.copy_(sd[name])
    return ref


@pytest.mark.parametrize("tie,blocks,head", [(True, None, ("int8", 0)), (False, None, ("int4", 32)),
                                             (True, ("int4", 32), ("int8", 0)), (False, ("int8", 0), ("int4", 64))])
def test_quantized_head_logits_match_the_dequantized_float_head(tie, blocks, head):
    m = tfcore.GPT(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=50, seed=0, tie_weights=tie)
    f32 = logits(m)
    n_before = m.num_parameters()
    if blocks:
        m.quantize(blocks[0], group_size=blocks[1])
        n_before = m.num_parameters()
    assert m.quantize_head(head[0], group_size=head[1]) is m
    assert m.head_quant_format == head[0] and m.head_quant_group_size == head[1]
    assert m.quant_format == (blocks[0] if blocks else None)
    # untied: lm_head.weight leaves the parameters; tied: wte stays for the embedding
    assert m.num_parameters() == n_before - (0 if tie else 50 * 64)
    names = [n for n, _ in m.named_parameters()]
    assert "lm_head.weight" not in names and "transformer.wte.weight" in names
    got, ref = logits(m), logits(head_reference(tie, blocks, head))
    assert np.abs(got - ref).max() < 2e-5
    assert np.abs(got - f32).max() > 1e-6
    # under grad mode forward runs without a graph (inference-only), loss and all
    _, loss = m(np.array([PROMPT]), np.array([PROMPT]))
    _, want = head_reference(tie, blocks, head)(np.array([PROMPT]), np.array([PROMPT]))
    assert abs(loss.item() - want.item()) < 1e-5


def test_quantize_with_head_and_round_trip(tmp_path):
    m = model().quantize("int4", group_size=32, head=True)
    assert m.quant_format == "int4" and m.head_quant_format == "int4" and m.head_quant_group_size == 32
    path = tmp_path / "qh.safetensors"
    m.save(path)
    back = tfcore.GPT.load(path)
    assert back.head_quant_format == "int4" and back.head_quant_group_size == 32
    np.testing.assert_array_equal(logits(back), logits(m))
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    assert hdr["__metadata__"]["tfc.quant.head.format"] == "int4"
    assert hdr["__metadata__"]["tfc.quant.head.group_size"] == "32"
    assert hdr["lm_head.weight.qcodes"]["dtype"] == "U8" and hdr["lm_head.weight.qcodes"]["shape"] == [50, 32]
    assert hdr["lm_head.weight.qscales"]["shape"] == [50, 2]
    assert "transformer.wte.weight" in hdr  # tied: the embedding stays float32


def test_head_errors(tmp_path):
    m = model()
    m.save(tmp_path / "f32.safetensors")
    with pytest.raises(ValueError, match="format must be 'int8' or 'int4'"):
        m.quantize_head("int3")
    with pytest.raises(tfcore.Error, match="tfc_gpt_quantize_head: group_size is 48"):
        m.quantize_head("int4", group_size=48)
    assert m.head_quant_format is None and m.head_quant_group_size == 0
    m.quantize_head("int8")
    with pytest.raises(tfcore.Error, match="LM head is already quantized"):
        m.quantize_head("int8")
    with pytest.raises(tfcore.Error, match="tfc_gpt_load_into: the model is quantized"):
        m.load_weights(tmp_path / "f32.safetensors")
