"""Other tools' GPT-2 files: llm.c checkpoints (gpt2_124M.bin layout) and
Hugging Face GPT-2 directories (config.json + model.safetensors).

The files the readers are tested on are built here from the formats'
documentation, with numpy, never with our writers: llm.c's header of 256
int32 and its parameter order with nn.Linear [out, in] weights
(train_gpt2.py write_model), safetensors' 8-byte length + JSON header + data.
The logits are compared with test_gpt.py's torch GPT-2 written from the
architecture. What our writers produce is read back by this file's own
parsers and checked the same way."""
import json
import os
import struct

import numpy as np
import pytest
import torch

import tfcore
from helpers import needs
from test_gpt import read_safetensors, torch_gpt

pytestmark = needs("tfc_gpt_load_llmc", "tfc_gpt_save_llmc", "tfc_gpt_load_hf", "tfc_gpt_save_hf")

LLMC_MAGIC = 20240326
CFG = dict(n_layer=2, n_head=2, n_embd=16, block_size=12, vocab_size=37, ln_eps=1e-5)


def random_llmc_params(cfg, vp, seed):
    """llm.c's tensors in its own names and layouts (Linear weights [out, in])."""
    rng = np.random.default_rng(seed)
    L, C, T = cfg["n_layer"], cfg["n_embd"], cfg["block_size"]

    def r(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)
    wte = r(vp, C)
    wte[cfg["vocab_size"]:] = 0  # llm.c pads with zero rows
    return [("wte", wte), ("wpe", r(T, C)), ("ln1w", 1 + r(L, C)), ("ln1b", r(L, C)),
            ("qkvw", r(L, 3 * C, C)), ("qkvb", r(L, 3 * C)), ("attprojw", r(L, C, C)), ("attprojb", r(L, C)),
            ("ln2w", 1 + r(L, C)), ("ln2b", r(L, C)), ("fcw", r(L, 4 * C, C)), ("fcb", r(L, 4 * C)),
            ("fcprojw", r(L, C, 4 * C)), ("fcprojb", r(L, C)), ("lnfw", 1 + r(C)), ("lnfb", r(C))]


def llmc_header(cfg, vp, version=3, magic=LLMC_MAGIC):
    h = np.zeros(256, dtype="<i4")
    h[:8] = [magic, version, cfg["block_size"], cfg["vocab_size"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"], vp]
    return h


def write_llmc(path, cfg, params, vp, version=3):
    with open(path, "wb") as f:
        f.write(llmc_header(cfg, vp, version).tobytes())
        for _, a in params:
            if version == 5:  # bf16: the high half of each f32 (values chosen exactly representable below)
                f.write((a.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes())
            else:
                f.write(a.astype("<f4").tobytes())


def hf_from_llmc(params, cfg):
    """The same model under HF names and Conv1D [in, out] layouts, for torch_gpt."""
    p = dict(params)
    V, L = cfg["vocab_size"], cfg["n_layer"]
    P = {"transformer.wte.weight": p["wte"][:V], "transformer.wpe.weight": p["wpe"],
         "transformer.ln_f.weight": p["lnfw"], "transformer.ln_f.bias": p["lnfb"]}
    for l in range(L):
        h = "transformer.h.%d." % l
        P[h + "ln_1.weight"], P[h + "ln_1.bias"] = p["ln1w"][l], p["ln1b"][l]
        P[h + "attn.c_attn.weight"], P[h + "attn.c_attn.bias"] = p["qkvw"][l].T, p["qkvb"][l]
        P[h + "attn.c_proj.weight"], P[h + "attn.c_proj.bias"] = p["attprojw"][l].T, p["attprojb"][l]
        P[h + "ln_2.weight"], P[h + "ln_2.bias"] = p["ln2w"][l], p["ln2b"][l]
        P[h + "mlp.c_fc.weight"], P[h + "mlp.c_fc.bias"] = p["fcw"][l].T, p["fcb"][l]
        P[h + "mlp.c_proj.weight"], P[h + "mlp.c_proj.bias"] = p["fcprojw"][l].T, p["fcprojb"][l]
    return {k: torch.tensor(np.ascontiguousarray(v)) for k, v in P.items()}


def check_logits(model, P, cfg, tol=1e-4, seed=7):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, cfg["vocab_size"], (2, cfg["block_size"]))
    tg = rng.integers(0, cfg["vocab_size"], (2, cfg["block_size"]))
    logits, loss = model(idx, tg)
    ref, ref_loss = torch_gpt(P, cfg, torch.tensor(idx), torch.tensor(tg))
    assert logits.shape == tuple(ref.shape)
    err = np.max(np.abs(logits.numpy() - ref.numpy()))
    assert err <= tol * max(1.0, ref.abs().max().item()), err
    assert abs(loss.item() - ref_loss.item()) <= tol


# ---- llm.c ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [3, 5])
def test_llmc_reader_matches_torch(version, tmp_path):
    vp = 64  # V = 37 padded
    params = random_llmc_params(CFG, vp, 1)
    if version == 5:  # values bf16 holds exactly, so the fp32 reference is the same model
        params = [(n, (a.view(np.uint32) & 0xFFFF0000).view(np.float32)) for n, a in params]
    path = tmp_path / "gpt2.bin"
    write_llmc(path, CFG, params, vp, version)
    model = tfcore.GPT.load_llmc(path)
    c = model.config
    assert (c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size) == (2, 2, 16, 12, 37)
    assert c.bias and c.tie_weights
    check_logits(model, hf_from_llmc(params, CFG), CFG)
    assert type(tfcore.GPT.load(path).config) is type(c)  # GPT.load tells the format by its magic


def test_llmc_writer_layout(tmp_path):
    cfg = tfcore.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=12, vocab_size=37)
    model = tfcore.GPT(cfg, seed=3)
    rng = np.random.default_rng(4)
    with tfcore.no_grad():
        for _, p in model.named_parameters():
            p.copy_(p.numpy() + rng.standard_normal(p.shape).astype(np.float32) * 0.05)
    path = tmp_path / "out.bin"
    model.save_llmc(path)
    raw = open(path, "rb").read()
    h = np.frombuffer(raw[:1024], dtype="<i4")
    assert list(h[:8]) == [LLMC_MAGIC, 3, 12, 37, 2, 2, 16, 128] and not h[8:].any()
    vals = np.frombuffer(raw[1024:], dtype="<f4")
    # parse in llm.c's order with llm.c's shapes, then compare with our parameters by name
    shapes = [a.shape for _, a in random_llmc_params(CFG, 128, 0)]
    assert vals.size == sum(int(np.prod(s)) for s in shapes)
    got, at = {}, 0
    for (name, _), s in zip(random_llmc_params(CFG, 128, 0), shapes):
        n = int(np.prod(s))
        got[name] = vals[at:at + n].reshape(s)
        at += n
    assert not got["wte"][37:].any()  # zero padding rows
    P = hf_from_llmc(list(got.items()), CFG)
    ours = {n: p.numpy() for n, p in model.named_parameters()}
    assert sorted(P) == sorted(ours)
    for n in P:
        np.testing.assert_array_equal(P[n].numpy(), ours[n], err_msg=n)
    check_logits(tfcore.GPT.load_llmc(path), P, CFG)


def test_llmc_writer_refuses_untied(tmp_path):
    m = tfcore.GPT(tfcore.GPTConfig(n_layer=1, n_head=1, n_embd=8, block_size=4, vocab_size=10, tie_weights=False))
    with pytest.raises(tfcore.Error, match="tfc_gpt_save_llmc: .*lm_head"):
        m.save_llmc(tmp_path / "x.bin")
    assert not (tmp_path / "x.bin").exists()


def test_llmc_writer_zero_biases_for_a_model_without(tmp_path):
    m = tfcore.GPT(tfcore.GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=10, bias=False), seed=2)
    m.save_llmc(tmp_path / "nb.bin")
    back = tfcore.GPT.load_llmc(tmp_path / "nb.bin")
    idx = np.array([[1, 2, 3, 4]])
    np.testing.assert_allclose(back(idx)[0].numpy(), m(idx)[0].numpy(), atol=1e-6)


def _bad_llmc(tmp_path, mutate):
    vp = 64
    params = random_llmc_params(CFG, vp, 1)
    raw = bytearray(llmc_header(CFG, vp).tobytes() + b"".join(a.tobytes() for _, a in params))
    raw = mutate(raw)
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(raw))
    return path


def _set(i, v):
    def f(raw):
        raw[4 * i:4 * i + 4] = struct.pack("<i", v)
        return raw
    return f


@pytest.mark.parametrize("mutate,match", [
    (_set(0, 20240520), "magic 20240520"),
    (_set(1, 4), "version 4"),
    (lambda r: r[:1000], "shorter than llm.c's 1024-byte header"),
    (lambda r: r[:-4], "truncated parameters"),
    (lambda r: r + b"\0\0\0\0", "trailing bytes"),
    (_set(4, -1), "L .*= -1"),
    (_set(6, 0), "C .*= 0"),
    (_set(7, 36), "Vp 36 below V 37"),
    (_set(6, 15), "C 15 not a multiple of NH 2"),
    (_set(7, 2**31 - 1), "needs"),
    (lambda r: _set(6, 2**30)(_set(5, 2**30)(r)), "overflow|needs"),
])
def test_llmc_bad_files(tmp_path, mutate, match):
    path = _bad_llmc(tmp_path, mutate)
    with pytest.raises(tfcore.Error, match="tfc_gpt_load_llmc: .*" + match):
        tfcore.GPT.load_llmc(path)


def test_llmc_missing_file(tmp_path):
    with pytest.raises(tfcore.TfcIOError, match="tfc_gpt_load_llmc: cannot open"):
        tfcore.GPT.load_llmc(tmp_path / "absent.bin")


# ---- Hugging Face ---------------------------------------------------------------------------

def write_safetensors(path, tensors):
    """safetensors by hand: u64 header length, JSON, data (numpy f32)."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {np.float32: "F32", np.float16: "F16"}[a.dtype.type],
                        "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_config(cfg, **over):
    c = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
         "bos_token_id": 0, "eos_token_id": 0, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
         "model_type": "gpt2", "n_ctx": cfg["block_size"], "n_embd": cfg["n_embd"], "n_head": cfg["n_head"],
         "n_inner": None, "n_layer": cfg["n_layer"], "n_positions": cfg["block_size"],
         "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
         "summary_type": "cls_index", "transformers_version": "4.26.0", "vocab_size": cfg["vocab_size"]}
    c.update(over)
    return c


def write_hf_dir(d, cfg, P, bare=False, buffers=False, config=None):
    """A GPT-2 directory as transformers writes one: GPT2LMHeadModel names, or GPT2Model's bare ones."""
    os.makedirs(d, exist_ok=True)
    T = {}
    for n, t in P.items():
        T[n[len("transformer."):] if bare and n.startswith("transformer.") else n] = t.numpy()
    if buffers:  # the causal mask buffers older transformers saved
        for l in range(cfg["n_layer"]):
            pre = "" if bare else "transformer."
            T[pre + "h.%d.attn.bias" % l] = np.tril(np.ones((1, 1, 12, 12), np.float32))
            T[pre + "h.%d.attn.masked_bias" % l] = np.array(-1e4, np.float32)
    write_safetensors(os.path.join(d, "model.safetensors"), T)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config if config is not None else hf_config(cfg), f, indent=2)


@pytest.mark.parametrize("bare,buffers", [(False, False), (True, True)])
def test_hf_reader_matches_torch(bare, buffers, tmp_path):
    P = hf_from_llmc(random_llmc_params(CFG, 37, 5), CFG)
    write_hf_dir(tmp_path / "hf", CFG, P, bare=bare, buffers=buffers)
    model = tfcore.GPT.load_hf(tmp_path / "hf")
    check_logits(model, P, CFG)
    check_logits(tfcore.GPT.load(tmp_path / "hf"), P, CFG)


def test_hf_reader_untied_and_f16(tmp_path):
    P = hf_from_llmc(random_llmc_params(CFG, 37, 6), CFG)
    P["lm_head.weight"] = torch.tensor(np.random.default_rng(9).standard_normal((37, 16)).astype(np.float32))
    P16 = {k: torch.tensor(v.numpy().astype(np.float16)) for k, v in P.items()}
    write_hf_dir(tmp_path / "hf", CFG, P16, config=hf_config(CFG, tie_word_embeddings=False))
    model = tfcore.GPT.load_hf(tmp_path / "hf")
    assert not model.config.tie_weights
    check_logits(model, {k: v.float() for k, v in P16.items()}, CFG)


@pytest.mark.parametrize("bias,tie", [(True, True), (False, True), (True, False)])
def test_hf_writer_round_trip(bias, tie, tmp_path):
    cfg = tfcore.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=12, vocab_size=37, bias=bias,
                           tie_weights=tie)
    model = tfcore.GPT(cfg, seed=8)
    rng = np.random.default_rng(10)
    with tfcore.no_grad():
        for _, p in model.named_parameters():
            p.copy_(p.numpy() + rng.standard_normal(p.shape).astype(np.float32) * 0.05)
    d = tmp_path / "export"
    model.save_hf(d, bos_token_id=36, eos_token_id=36)
    conf = json.load(open(d / "config.json"))
    assert conf["model_type"] == "gpt2" and conf["architectures"] == ["GPT2LMHeadModel"]
    assert conf["activation_function"] == "gelu_new" and conf["layer_norm_epsilon"] == 1e-5
    assert (conf["n_layer"], conf["n_head"], conf["n_embd"], conf["n_positions"], conf["n_ctx"],
            conf["vocab_size"]) == (2, 2, 16, 12, 12, 37)
    assert conf["tie_word_embeddings"] is tie and conf["bos_token_id"] == 36 and conf["eos_token_id"] == 36
    tensors, meta = read_safetensors(d / "model.safetensors")
    assert meta == {"format": "pt"}
    assert ("lm_head.weight" in tensors) == (not tie)
    # HF's GPT-2 always has biases: a model without them gets zero ones
    assert "transformer.h.1.mlp.c_fc.bias" in tensors and "transformer.ln_f.bias" in tensors
    if not bias:
        assert not tensors["transformer.h.1.mlp.c_fc.bias"].any()
    ref_cfg = dict(n_layer=2, n_head=2, n_embd=16, block_size=12, vocab_size=37, ln_eps=1e-5)
    check_logits(model, tensors, ref_cfg)
    check_logits(tfcore.GPT.load_hf(d), tensors, ref_cfg)


def _hf_good(tmp_path):
    P = hf_from_llmc(random_llmc_params(CFG, 37, 5), CFG)
    return tmp_path / "hf", P


@pytest.mark.parametrize("case,match", [
    ("no config", "cannot open .*config.json"),
    ("not json", "malformed config.json at byte"),
    ("trailing", "trailing bytes"),
    ("no n_layer", 'has no "n_layer"'),
    ("string n_head", '"n_head" must be an integer'),
    ("fraction", '"n_embd" is 16.5'),
    ("negative", "n_layer is -2"),
    ("model_type", 'model_type "gptj"'),
    ("activation", 'activation_function "relu"'),
    ("n_inner", "n_inner 7"),
    ("eps huge", '"layer_norm_epsilon" is 1e\\+308, need a LayerNorm epsilon in \\(0, 1\\]'),
    ("eps above 1", '"layer_norm_epsilon" is 2, need'),
    ("eps negative", '"layer_norm_epsilon" is -1e-05, need'),
    ("eps zero", '"layer_norm_epsilon" is 0, need'),
    ("n_ctx zero", '"n_ctx" is 0, outside \\[1, '),
    ("shape mismatch", "holds transformer.wpe.weight as \\[12,16\\].*needs \\[20,16\\]"),
    ("missing tensor", "has no tensor 'transformer.h.1.mlp.c_proj.bias'"),
    ("stranger", "tensor 'transformer.h.2.ln_1.weight'"),
    ("untied lm_head missing", "has no tensor 'lm_head.weight'"),
    ("no safetensors", "neither model.safetensors nor model.safetensors.index.json"),
    ("sharded", "sharded"),
    ("too few values", "holds .* values in .* tensors but config.json"),
])
def test_hf_bad_dirs(case, match, tmp_path):
    d, P = _hf_good(tmp_path)
    conf = hf_config(CFG)
    if case == "no n_layer":
        del conf["n_layer"]
    elif case == "string n_head":
        conf["n_head"] = "2"
    elif case == "fraction":
        conf["n_embd"] = 16.5
    elif case == "negative":
        conf["n_layer"] = -2
    elif case == "model_type":
        conf["model_type"] = "gptj"
    elif case == "activation":
        conf["activation_function"] = "relu"
    elif case == "n_inner":
        conf["n_inner"] = 7
    elif case.startswith("eps"):
        conf["layer_norm_epsilon"] = {"eps huge": 1e308, "eps above 1": 2.0, "eps negative": -1e-5, "eps zero": 0}[case]
    elif case == "n_ctx zero":
        conf["n_ctx"] = 0
    elif case == "shape mismatch":
        conf["n_positions"] = conf["n_ctx"] = 20
    elif case == "missing tensor":
        del P["transformer.h.1.mlp.c_proj.bias"]
    elif case == "stranger":
        P["transformer.h.2.ln_1.weight"] = torch.ones(16)
    elif case == "untied lm_head missing":
        conf["tie_word_embeddings"] = False
    elif case == "too few values":
        conf["n_layer"] = 20000
    write_hf_dir(d, CFG, P, config=conf)
    if case == "no config":
        os.remove(d / "config.json")
    elif case == "not json":
        (d / "config.json").write_text('{"n_layer": 2,, }')
    elif case == "trailing":
        (d / "config.json").write_text(json.dumps(conf) + " x")
    elif case in ("no safetensors", "sharded"):
        os.remove(d / "model.safetensors")
        if case == "sharded":
            (d / "model.safetensors.index.json").write_text("{}")
    with pytest.raises(tfcore.Error, match="tfc_gpt_load_hf: .*" + match):
        tfcore.GPT.load_hf(d)


def test_hf_writer_errors(tmp_path):
    m = tfcore.GPT(tfcore.GPTConfig(n_layer=1, n_head=1, n_embd=8, block_size=4, vocab_size=10))
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_gpt_save_hf(_ex)?: eos_token_id is 10"):
        m.save_hf(tmp_path / "x", eos_token_id=10)
    (tmp_path / "file").write_text("")
    with pytest.raises(tfcore.TfcIOError, match="tfc_gpt_save_hf(_ex)?: "):
        m.save_hf(tmp_path / "file" / "sub")
