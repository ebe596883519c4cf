"""Files (include/tfcore/io.h): safetensors and token files.

    tfcore.save_safetensors("w.safetensors", {"a": t1, "b": t2}, metadata={"k": "v"})
    tensors, metadata = tfcore.load_safetensors("w.safetensors")
"""
import os

from ._lib import check, ffi, lib
from .tensor import Tensor, _wrap


def _path(p):
    return os.fsencode(os.fspath(p))


def _cstrings(items):
    keep = [ffi.new("char[]", s.encode("utf-8")) for s in items]
    return keep, (ffi.new("char *[]", keep) if keep else ffi.NULL)


def save_safetensors(path, tensors, metadata=None):
    """Write {name: Tensor} (and string metadata) to a safetensors file, atomically."""
    names = list(tensors)
    for n in names:
        if not isinstance(tensors[n], Tensor):
            raise TypeError("tfcore.save_safetensors: %r is not a tfcore Tensor" % (n,))
    meta = dict(metadata or {})
    keep_n, c_names = _cstrings(names)
    keep_k, c_keys = _cstrings(list(meta))
    keep_v, c_vals = _cstrings([str(v) for v in meta.values()])
    handles = ffi.new("tfc_tensor *[]", [tensors[n]._h for n in names]) if names else ffi.NULL
    check(lib.tfc_safetensors_save(_path(path), c_names, handles, len(names), c_keys, c_vals, len(meta)))
    del keep_n, keep_k, keep_v


def load_safetensors(path):
    """({name: Tensor} in file order, {key: value} metadata) of a safetensors file.

    The file is memory-mapped: the tensors are read-only views of it (``is_read_only``; ``clone()`` for a
    writable copy), read from disk as they are first touched."""
    out = ffi.new("tfc_safetensors **")
    check(lib.tfc_safetensors_load(_path(path), out))
    f = ffi.gc(out[0], lib.tfc_safetensors_release)
    tensors = {}
    name = ffi.new("char **")
    t = ffi.new("tfc_tensor **")
    for i in range(lib.tfc_safetensors_count(f)):
        check(lib.tfc_safetensors_get(f, i, name, t))
        tensors[ffi.string(name[0]).decode("utf-8")] = _wrap(t[0])
    meta = {}
    k = ffi.new("char **")
    v = ffi.new("char **")
    for i in range(lib.tfc_safetensors_metadata_count(f)):
        check(lib.tfc_safetensors_metadata_at(f, i, k, v))
        meta[ffi.string(k[0]).decode("utf-8")] = ffi.string(v[0]).decode("utf-8")
    return tensors, meta


class TokenFile:
    """A memory-mapped token file (training data): len(), [start:stop] ids, batch()."""

    def __init__(self, path):
        out = ffi.new("tfc_token_file **")
        check(lib.tfc_token_file_open(_path(path), out))
        self._h = ffi.gc(out[0], lib.tfc_token_file_close)

    @staticmethod
    def write(path, ids, vocab_size):
        ids = [int(i) for i in ids]
        check(lib.tfc_token_file_write(_path(path), ffi.new("int32_t[]", ids) if ids else ffi.NULL, len(ids),
                                       int(vocab_size)))

    _FORMATS = {"llmc": 1, "u16": 2}  # tfc_token_format

    @classmethod
    def open_shards(cls, paths, vocab_size, format="llmc"):
        """Other tools' token files read in place as one: llm.c data shards (format "llmc") or nanoGPT's
        headerless u16 train.bin ("u16"), in the order given; every token is checked against vocab_size."""
        if format not in cls._FORMATS:
            raise ValueError("tfcore.TokenFile.open_shards: format must be 'llmc' or 'u16', got %r" % (format,))
        if isinstance(paths, (str, bytes, os.PathLike)):
            paths = [paths]
        keep = [ffi.new("char[]", _path(p)) for p in paths]
        out = ffi.new("tfc_token_file **")
        check(lib.tfc_token_file_open_shards(ffi.new("char *[]", keep) if keep else ffi.NULL, len(keep),
                                             cls._FORMATS[format], int(vocab_size), out))
        self = cls.__new__(cls)
        self._h = ffi.gc(out[0], lib.tfc_token_file_close)
        return self

    @classmethod
    def write_shard(cls, path, ids, format="llmc"):
        """Write ids as an llm.c data shard ("llmc") or headerless u16 ("u16", nanoGPT), atomically."""
        if format not in cls._FORMATS:
            raise ValueError("tfcore.TokenFile.write_shard: format must be 'llmc' or 'u16', got %r" % (format,))
        ids = [int(i) for i in ids]
        check(lib.tfc_token_file_write_shard(_path(path), ffi.new("int32_t[]", ids) if ids else ffi.NULL, len(ids),
                                             cls._FORMATS[format]))

    def __len__(self):
        return int(lib.tfc_token_file_count(self._h))

    @property
    def vocab_size(self):
        return int(lib.tfc_token_file_vocab_size(self._h))

    def read(self, start, n):
        buf = ffi.new("int32_t[]", max(int(n), 1))
        check(lib.tfc_token_file_read(self._h, int(start), int(n), buf))
        return list(ffi.unpack(buf, int(n))) if n else []

    def batch(self, B, T, seed=0, step=0, begin=0, end=None):
        """(x [B,T], y [B,T]) int32 windows drawn with the Philox stream (seed, step)."""
        x = ffi.new("tfc_tensor **")
        y = ffi.new("tfc_tensor **")
        check(lib.tfc_token_file_batch(self._h, int(begin), len(self) if end is None else int(end), int(B), int(T),
                                       int(seed), int(step), x, y))
        return _wrap(x[0]), _wrap(y[0])
