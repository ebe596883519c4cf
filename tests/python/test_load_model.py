"""tfcore.load_model (issue #35): one call for every file a model comes in.

The Hugging Face Llama directory is written here from numpy (test_llama_hf's
writers), the llm.c file from llm.c's documented layout (test_model_formats's
writers); the run directories by the real `tfcore train` (skipped when the CLI
is not built). Logits, losses, greedy tokens, LoRA and int8 results are
checked against test_llama_family's PyTorch Llama written from the equations,
fed with weights transformed here in numpy (LoRA's W + (alpha/r)·B·A, int8's
per-row round-half-even codes times their scale)."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import tfcore
from helpers import needs
from test_llama_family import torch_llama
from test_llama_hf import LLAMA, hf_dir, llama_weights
from test_model_formats import CFG as GPT2_CFG
from test_model_formats import check_logits, hf_from_llmc, random_llmc_params, write_llmc
from test_tokenizer_json import sentencepiece_file

pytestmark = needs("tfc_gpt_load_hf", "tfc_gpt_arch_from_name", "tfc_tokenizer_load_hf_json")

CFG = dict(LLAMA, vocab_size=272)  # the hand-made tokenizer.json has 265 tokens


def ref(cfg, W, idx):
    """(logits, loss against idx shifted by one) of the torch reference in float64."""
    c = dict(n_layer=cfg["num_hidden_layers"], n_head=cfg["num_attention_heads"], n_embd=cfg["hidden_size"],
             n_kv_head=cfg["num_key_value_heads"], ln_eps=cfg["rms_norm_eps"], rope_theta=cfg["rope_theta"],
             rope_scaling=cfg.get("rope_scaling"), max_pos=cfg["max_position_embeddings"], window=0)
    P = {k: torch.tensor(np.asarray(v, np.float64)) for k, v in W.items()}
    t = torch.tensor(np.asarray(idx))
    logits, _ = torch_llama(P, c, t, t, torch.float64)
    return logits.numpy()


def greedy_ref(cfg, W, prompt, n):
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(np.argmax(ref(cfg, W, [seq])[0, -1])))
    return seq[len(prompt):]


def close(a, b, tol=1e-4):
    return np.max(np.abs(np.asarray(a) - b)) <= tol * max(1.0, np.max(np.abs(b)))


@pytest.fixture
def llama_dir(tmp_path):
    W = llama_weights(CFG, np.random.default_rng(11))
    d = hf_dir(tmp_path, CFG, W, name="llama")
    sentencepiece_file(d / "tokenizer.json")
    return d, W


def test_hf_llama_directory(llama_dir, tmp_path):
    d, W = llama_dir
    model = tfcore.load_model(d)
    assert isinstance(model, tfcore.GPT) and model.config.arch == "llama"
    assert model.config.n_kv_head == 2 and model.config.dtype is tfcore.float32
    # what sits beside the weights: the tokenizer (ids derived by hand in test_tokenizer_json) and config.json's ids
    assert model.tokenizer.vocab_size == 265 and model.tokenizer.encode("ab") == [264]
    assert (model.bos_token_id, model.eos_token_id) == (1, 2)

    rng = np.random.default_rng(12)
    idx = rng.integers(0, CFG["vocab_size"], (2, 9))
    tg = rng.integers(0, CFG["vocab_size"], (2, 9))
    want = ref(CFG, W, idx)
    logits, loss = model.forward(idx, targets=tg)
    assert close(logits.numpy(), want)
    lse = np.log(np.exp(want - want.max(-1, keepdims=True)).sum(-1)) + want.max(-1)
    want_loss = np.mean(lse - np.take_along_axis(want, tg[..., None], -1)[..., 0])
    assert abs(loss.item() - want_loss) <= 1e-4
    assert model(idx)[1] is None

    # greedy decoding against the reference's argmax chain; the batch gives each prompt's tokens
    prompts = [[1, 264, 7], [1, 30]]
    want_tokens = [greedy_ref(CFG, W, p, 5) for p in prompts]
    assert model.generate(prompts[0], 5, temperature=0) == want_tokens[0]
    assert model.generate_batch(prompts, 5, temperature=0) == want_tokens

    # save_hf writes the ids it read back into config.json by default; load_model reads the same model
    out = tmp_path / "saved"
    model.save_hf(out)
    saved = json.loads((out / "config.json").read_text())
    assert (saved["bos_token_id"], saved["eos_token_id"], saved["model_type"]) == (1, 2, "llama")
    again = tfcore.load_model(out)
    assert np.array_equal(again(idx)[0].numpy(), logits.numpy())
    assert again.tokenizer is None  # save_hf writes no tokenizer files
    assert (again.bos_token_id, again.eos_token_id) == (1, 2)
    model.save_hf(tmp_path / "none", bos_token_id=None, eos_token_id=None)  # None: none written
    saved = json.loads((tmp_path / "none" / "config.json").read_text())
    assert saved.get("bos_token_id") is None and saved.get("eos_token_id") is None


def test_lora_on_a_loaded_llama(llama_dir):
    d, W = llama_dir
    model = tfcore.load_model(d)
    idx = np.random.default_rng(13).integers(0, CFG["vocab_size"], (2, 7))
    before = model(idx)[0].numpy()
    params = model.add_lora(rank=4, alpha=8)  # PEFT's default targets for llama: q_proj, v_proj
    names = [n for n, _ in model.lora_named_parameters()]
    assert len(params) == len(names) == 2 * 2 * CFG["num_hidden_layers"]
    assert names[0] == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    assert {n.split(".")[-3] for n in names} == {"q_proj", "v_proj"}
    assert np.array_equal(model(idx)[0].numpy(), before)  # B starts at zero
    rng = np.random.default_rng(14)
    Weff = dict(W)
    lora = dict(model.lora_named_parameters())
    with tfcore.no_grad():
        for n, p in model.lora_named_parameters():
            if n.endswith("lora_B.weight"):
                p.copy_(rng.standard_normal(p.shape).astype(np.float32) * 0.1)
    for n in names:
        if n.endswith("lora_A.weight"):
            base = n[len("base_model.model."):-len(".lora_A.weight")] + ".weight"
            A, B = lora[n].numpy().astype(np.float64), lora[n.replace("lora_A", "lora_B")].numpy().astype(np.float64)
            Weff[base] = W[base] + (8 / 4) * B @ A
    with tfcore.no_grad():
        assert close(model(idx)[0].numpy(), ref(CFG, Weff, idx))
    # and it trains: one AdamW step on the adapters lowers the loss on its batch
    opt = tfcore.optim.AdamW(params, lr=1e-2)
    _, l0 = model(idx[:, :-1], idx[:, 1:])
    l0.backward()
    opt.step()
    with tfcore.no_grad():
        _, l1 = model(idx[:, :-1], idx[:, 1:])
    assert l1.item() < l0.item()


def test_int8_on_a_loaded_llama(llama_dir):
    d, W = llama_dir
    model = tfcore.load_model(d)
    names = {n for n, _ in model.named_parameters()}
    model.quantize("int8")
    dropped = names - {n for n, _ in model.named_parameters()}
    assert dropped == {n for n in W if n.startswith("model.layers.") and W[n].ndim == 2}  # every block Linear
    Wq = dict(W)
    for n in dropped:  # quant.h's INT8: per output row, scale = max|w| / 127, codes round half to even
        w = W[n].astype(np.float32)
        scale = (np.max(np.abs(w), axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
        Wq[n] = np.round(w / scale).astype(np.float32) * scale
    idx = np.random.default_rng(15).integers(0, CFG["vocab_size"], (1, 8))
    assert close(model(idx)[0].numpy(), ref(CFG, Wq, idx))
    assert model.generate([1, 2, 3], 4, temperature=0) == greedy_ref(CFG, Wq, [1, 2, 3], 4)
    with pytest.raises(tfcore.TfcRuntimeError, match="quantized"):
        model.save_hf(d.parent / "q")  # HF directories hold float weights only


def test_eos_list_dtype_and_tokenizer_off(tmp_path):
    cfg = dict(CFG, eos_token_id=[2, 5, 9], bos_token_id=None)
    W = llama_weights(cfg, np.random.default_rng(16))
    d = hf_dir(tmp_path, cfg, W, name="l3")
    m = tfcore.load_model(d)
    assert m.eos_token_id == [2, 5, 9] and m.bos_token_id is None and m.tokenizer is None
    m.save_hf(tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert saved["eos_token_id"] == [2, 5, 9] and saved.get("bos_token_id") is None
    assert tfcore.load_model(tmp_path / "out").eos_token_id == [2, 5, 9]
    with pytest.raises(ValueError, match=r"eos_token_id\[1\] is 300, outside \[0, 272\)"):
        m.save_hf(tmp_path / "bad", eos_token_id=[2, 300])
    # float64: the same weights widened, the reference's logits to f64 rounding of f32 inputs
    m64 = tfcore.load_model(d, dtype="float64")
    assert m64.config.dtype is tfcore.float64
    idx = np.arange(12).reshape(2, 6)
    assert np.max(np.abs(m64(idx)[0].numpy() - ref(cfg, W, idx))) < 1e-9
    with pytest.raises(ValueError, match="autocast"):
        tfcore.load_model(d, dtype="bfloat16")
    # a tokenizer.json the library cannot read is named; tokenizer=False loads the model without it
    (d / "tokenizer.json").write_text("{not json")
    with pytest.raises(tfcore.Error, match="tokenizer=False"):
        tfcore.load_model(d)
    assert tfcore.load_model(d, tokenizer=False).tokenizer is None


def test_tokenizer_larger_than_the_model_is_refused(tmp_path):
    W = llama_weights(LLAMA, np.random.default_rng(17))  # vocab 40 < 265
    d = hf_dir(tmp_path, LLAMA, W)
    sentencepiece_file(d / "tokenizer.json")
    with pytest.raises(tfcore.TfcRuntimeError, match="265 tokens but the model has 40"):
        tfcore.load_model(d)


def test_tfcore_checkpoint_file_and_directory(tmp_path):
    cfg = tfcore.GPTConfig.preset("llama-tiny", vocab_size=50, n_layer=2)
    m = tfcore.GPT(cfg, seed=3)
    m.save(tmp_path / "ckpt.safetensors")
    idx = np.arange(10).reshape(2, 5)
    want = m(idx)[0].numpy()
    got = tfcore.load_model(tmp_path / "ckpt.safetensors")
    assert got.config.arch == "llama" and got.config.n_kv_head == 2
    assert np.array_equal(got(idx)[0].numpy(), want)
    assert got.tokenizer is None and got.bos_token_id is None
    (tmp_path / "d").mkdir()
    m.save(tmp_path / "d" / "model.safetensors")
    assert np.array_equal(tfcore.load_model(os.fspath(tmp_path / "d"))(idx)[0].numpy(), want)
    # dtype converts a checkpoint too
    m64 = tfcore.load_model(tmp_path / "ckpt.safetensors", dtype=tfcore.float64)
    assert m64.config.dtype is tfcore.float64
    assert np.max(np.abs(m64(idx)[0].numpy() - want)) < 1e-4
    for (n, a), (n2, b) in zip(m.named_parameters(), m64.named_parameters()):
        assert n == n2 and np.array_equal(a.numpy().astype(np.float64), b.numpy())


def test_llmc_file(tmp_path):
    params = random_llmc_params(GPT2_CFG, 64, 1)
    write_llmc(tmp_path / "gpt2.bin", GPT2_CFG, params, 64)
    model = tfcore.load_model(tmp_path / "gpt2.bin")
    assert model.config.arch == "gpt2" and model.tokenizer is None
    check_logits(model, hf_from_llmc(params, GPT2_CFG), GPT2_CFG)
    assert len(model.generate([1, 2], 3, temperature=0)) == 3
    assert len(model.add_lora(rank=2)) == 2 * GPT2_CFG["n_layer"]  # GPT-2's default: c_attn


def test_errors_name_the_path_and_what_was_looked_for(tmp_path):
    with pytest.raises(tfcore.TfcIOError, match="absent.*does not exist.*config.json") as e:
        tfcore.load_model(tmp_path / "absent")
    assert isinstance(e.value, OSError) and e.value.status_name == "TFC_ERR_IO"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hello")
    with pytest.raises(tfcore.TfcIOError, match="empty.*neither config.json.*nor model.safetensors"):
        tfcore.load_model(tmp_path / "empty")
    (tmp_path / "random.bin").write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(tfcore.TfcRuntimeError, match="random.bin.*is not a model file.*llm.c.*safetensors") as e:
        tfcore.load_model(tmp_path / "random.bin")
    assert e.value.status_name == "TFC_ERR_FORMAT"
    (tmp_path / "tiny").write_bytes(b"ab")
    with pytest.raises(tfcore.TfcRuntimeError, match="not a model file"):
        tfcore.load_model(tmp_path / "tiny")
    # a safetensors file that is no tfcore checkpoint: the library's loader names the missing key
    tfcore.save_safetensors(tmp_path / "w.safetensors", {"w": tfcore.zeros(2)})
    with pytest.raises(tfcore.Error, match="tfc.n_layer"):
        tfcore.load_model(tmp_path / "w.safetensors")
    # config.json that is not JSON: the Hugging Face loader names it
    bad = tmp_path / "badcfg"
    bad.mkdir()
    (bad / "config.json").write_text("{")
    with pytest.raises(tfcore.Error, match="config.json"):
        tfcore.load_model(bad)


# ---- directories of tfcore train (the real CLI) -----------------------------------------

def _cli():
    lib = os.environ.get("TFCORE_LIBRARY", "")
    path = os.path.join(os.path.dirname(lib), "..", "tools", "tfcore")
    return os.path.normpath(path) if lib and os.path.isfile(path) else None


needs_cli = pytest.mark.skipif(_cli() is None, reason="the tfcore CLI is not built next to TFCORE_LIBRARY")


def _train(tmp_path, out, *extra):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "data", "tinyshakespeare.txt"), "rb") as f:
            corpus.write_bytes(f.read(20000))
    cmd = [_cli(), "train", "--data", str(corpus), "--batch", "2", "--steps", "2", "--eval-every", "100",
           "--eval-batches", "1", "--sample-tokens", "0", "--out", str(out), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_cli
def test_run_directories_of_tfcore_train(tmp_path):
    run = tmp_path / "run"
    _train(tmp_path, run, "--tokenizer", "bpe:300", "--n-layer", "1", "--n-head", "2", "--n-embd", "32",
           "--block-size", "32")
    assert (run / "checkpoint.json").exists() and (run / "config.json").exists()  # both kinds' files: told apart
    m = tfcore.load_model(run)
    direct = tfcore.GPT.load(run / "model.safetensors")
    idx = np.arange(16).reshape(2, 8)
    assert np.array_equal(m(idx)[0].numpy(), direct(idx)[0].numpy())
    text = "To be, or not to be"
    assert m.tokenizer.encode(text) == tfcore.Tokenizer.load(run / "tokenizer.tfctok").encode(text)
    # the run exported as a Hugging Face GPT-2 directory: vocab.json + merges.txt become the tokenizer
    hf = tmp_path / "hf"
    r = subprocess.run([_cli(), "export", "--format", "hf", str(run), str(hf)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    h = tfcore.load_model(hf)
    assert np.max(np.abs(h(idx)[0].numpy() - direct(idx)[0].numpy())) < 1e-5
    assert h.tokenizer.encode(text) == m.tokenizer.encode(text)
    # a LoRA run: its base loaded as above, then its adapters
    lora = tmp_path / "lora"
    _train(tmp_path, lora, "--lora-rank", "2", "--lora-base", str(run), "--lr", "1e-2")
    assert not (lora / "model.safetensors").exists()
    lm = tfcore.load_model(lora)
    assert lm.lora_config["rank"] == 2
    want = tfcore.GPT.load(run / "model.safetensors")
    want.load_lora(lora)
    assert np.array_equal(lm(idx)[0].numpy(), want(idx)[0].numpy())
    assert not np.array_equal(lm(idx)[0].numpy(), direct(idx)[0].numpy())  # the adapters trained
    assert lm.tokenizer.encode(text) == m.tokenizer.encode(text)


@pytest.mark.parametrize("kind", ["checkpoint", "llmc"])
def test_the_model_api_on_other_kinds(kind, tmp_path):
    """generate_batch, add_lora, quantize and save_hf on a checkpoint (a Llama) and an llm.c file (GPT-2)."""
    if kind == "checkpoint":
        m = tfcore.GPT(tfcore.GPTConfig.preset("llama-tiny", vocab_size=40, n_layer=2), seed=4)
        path = tmp_path / "ckpt.safetensors"
        m.save(path)
    else:
        path = tmp_path / "gpt2.bin"
        write_llmc(path, GPT2_CFG, random_llmc_params(GPT2_CFG, 64, 2), 64)
    model = tfcore.load_model(path)
    prompts = [[1, 2, 3], [4, 5]]
    batch = model.generate_batch(prompts, 4, temperature=0)
    assert batch == [model.generate(p, 4, temperature=0) for p in prompts]
    idx = np.array([[1, 2, 3, 4, 5, 6]])
    logits = model(idx)[0].numpy()
    # save_hf -> load_model: the same model
    model.save_hf(tmp_path / "hf")
    assert np.array_equal(tfcore.load_model(tmp_path / "hf")(idx)[0].numpy(), logits)
    # LoRA with PEFT's default targets for the architecture: outputs unchanged until B moves
    lora = tfcore.load_model(path)
    assert len(lora.add_lora(rank=2)) == (8 if kind == "checkpoint" else 4)
    assert np.array_equal(lora(idx)[0].numpy(), logits)
    # int8: within the error of weights rounded to 1/254 of each row's range
    q = tfcore.load_model(path).quantize("int8")
    assert q.quant_format == "int8"
    with tfcore.no_grad():
        err = np.max(np.abs(q(idx)[0].numpy() - logits))
    assert 0 < err < 0.05 * max(1.0, np.max(np.abs(logits)))
