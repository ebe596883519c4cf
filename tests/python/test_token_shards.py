"""tfcore.TokenFile.open_shards / write_shard against files numpy writes in
llm.c's documented layout (256 int32 header: magic 20240520, version 1,
count; u16 tokens) and nanoGPT's headerless uint16, and the exceptions for
bad files."""
import re

import numpy as np
import pytest

import tfcore


def llmc(path, toks, magic=20240520, version=1, count=None):
    header = np.zeros(256, dtype="<i4")
    header[:3] = magic, version, len(toks) if count is None else count
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype="<u2").tobytes())


def test_shards_read_as_one_stream(tmp_path):
    rng = np.random.default_rng(0)
    toks = rng.integers(0, 50257, size=3000)
    llmc(tmp_path / "train_000.bin", toks[:1000])
    llmc(tmp_path / "train_001.bin", toks[1000:])
    f = tfcore.TokenFile.open_shards([tmp_path / "train_000.bin", tmp_path / "train_001.bin"], 50257)
    assert len(f) == 3000 and f.vocab_size == 50257
    assert f.read(0, 3000) == toks.tolist()
    x, y = f.batch(4, 32, seed=1, step=2)
    xs, ys = x.numpy(), y.numpy()
    for row_x, row_y in zip(xs, ys):
        s = next(i for i in range(3000 - 32) if (toks[i:i + 32] == row_x).all())
        assert (toks[s + 1:s + 33] == row_y).all()
    toks[:100].astype("<u2").tofile(tmp_path / "train.bin")
    g = tfcore.TokenFile.open_shards(tmp_path / "train.bin", 50257, format="u16")
    assert g.read(0, 100) == toks[:100].tolist()


def test_write_shard_is_the_documented_layout(tmp_path):
    ids = [0, 5, 50256, 65535]
    tfcore.TokenFile.write_shard(tmp_path / "a.bin", ids)
    raw = (tmp_path / "a.bin").read_bytes()
    head = np.frombuffer(raw[:1024], dtype="<i4")
    assert head[:3].tolist() == [20240520, 1, 4] and not head[3:].any()
    assert np.frombuffer(raw[1024:], dtype="<u2").tolist() == ids
    tfcore.TokenFile.write_shard(tmp_path / "b.bin", ids, format="u16")
    assert np.fromfile(tmp_path / "b.bin", dtype="<u2").tolist() == ids
    with pytest.raises(tfcore.InvalidArgumentError, match="does not fit u16"):
        tfcore.TokenFile.write_shard(tmp_path / "c.bin", [70000], format="u16")


@pytest.mark.parametrize("case, frag", [
    ("magic", "magic 20240521"),
    ("short", "shorter than llm.c's 1024-byte header"),
    ("count", "claims 11 tokens"),
    ("vocab", "token 3 (byte offset 1030) is 50257"),
])
def test_bad_shards_raise_naming_the_file(tmp_path, case, frag):
    p = tmp_path / ("bad_%s.bin" % case)
    toks = [1, 2, 3, 50257 if case == "vocab" else 4, 5, 6, 7, 8, 9, 10]
    llmc(p, toks, magic=20240521 if case == "magic" else 20240520, count=11 if case == "count" else None)
    if case == "short":
        p.write_bytes(p.read_bytes()[:1000])
    with pytest.raises(tfcore.Error, match=re.escape(frag)) as e:
        tfcore.TokenFile.open_shards([p], 50257)
    assert str(p) in str(e.value) and e.value.status_name == "TFC_ERR_FORMAT"
    with pytest.raises(tfcore.TfcIOError):
        tfcore.TokenFile.open_shards([tmp_path / "missing.bin"], 50257)
    with pytest.raises(ValueError, match="format must be"):
        tfcore.TokenFile.open_shards([p], 50257, format="npy")
