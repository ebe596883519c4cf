"""tfcore.Tokenizer: BPE tokenizers (include/tfcore/tokenizer.h) — train,
encode, decode; GPT-2 / tiktoken / Hugging Face tokenizer.json / own file
formats.

    tok = tfcore.Tokenizer.from_gpt2("encoder.json", "vocab.bpe")
    ids = tok.encode("Hello world")            # list of ints
    text = tok.decode(ids)                     # str (invalid UTF-8 replaced)

    llama = tfcore.Tokenizer.from_file("tokenizer.json", add_special_tokens=True)
    ids = llama.encode("Hello", special="allowed")   # Hugging Face's ids, BOS first

Text arguments may be str (encoded as UTF-8) or bytes.
"""
import os

from ._lib import check, ffi, lib

PATTERNS = {"none": "TFC_SPLIT_NONE", "gpt2": "TFC_SPLIT_GPT2", "cl100k": "TFC_SPLIT_CL100K",
            "llama3": "TFC_SPLIT_LLAMA3", "qwen2": "TFC_SPLIT_QWEN2"}
SPECIAL = {"text": "TFC_SPECIAL_AS_TEXT", "allowed": "TFC_SPECIAL_ALLOWED", "all": "TFC_SPECIAL_ALLOWED",
           "disallowed": "TFC_SPECIAL_DISALLOWED"}


def _bytes(text):
    return text.encode("utf-8") if isinstance(text, str) else bytes(text)


def _path(p):
    return os.fsencode(os.fspath(p))


def _pattern(pattern):
    if pattern not in PATTERNS:
        raise ValueError("tfcore.Tokenizer: pattern must be one of %s, got %r" % (sorted(PATTERNS), pattern))
    return getattr(lib, PATTERNS[pattern])


def _special(mode):
    if mode not in SPECIAL:
        raise ValueError("tfcore.Tokenizer: special must be one of %s, got %r" % (sorted(SPECIAL), mode))
    return getattr(lib, SPECIAL[mode])


class Tokenizer:
    """A BPE tokenizer. Tokenizer(pattern='gpt2') is untrained (256 byte
    tokens); use train(), or the from_* / load constructors."""

    def __init__(self, pattern="gpt2"):
        out = ffi.new("tfc_tokenizer **")
        check(lib.tfc_tokenizer_new(_pattern(pattern), out))
        self._h = ffi.gc(out[0], lib.tfc_tokenizer_release)

    @classmethod
    def _adopt(cls, ptr):
        t = cls.__new__(cls)
        t._h = ffi.gc(ptr, lib.tfc_tokenizer_release)
        return t

    @classmethod
    def from_gpt2(cls, encoder_json, vocab_bpe):
        """GPT-2's encoder.json + vocab.bpe ("<|endoftext|>" becomes a special token)."""
        out = ffi.new("tfc_tokenizer **")
        check(lib.tfc_tokenizer_load_gpt2(_path(encoder_json), _path(vocab_bpe), out))
        return cls._adopt(out[0])

    @classmethod
    def from_tiktoken(cls, path, pattern="gpt2", special_tokens=None):
        """A tiktoken rank file (gpt2, r50k_base, cl100k_base, ...); special_tokens {text: id}."""
        out = ffi.new("tfc_tokenizer **")
        check(lib.tfc_tokenizer_load_tiktoken(_path(path), _pattern(pattern), out))
        tok = cls._adopt(out[0])
        for text, i in (special_tokens or {}).items():
            tok.add_special(text, i)
        return tok

    @classmethod
    def from_file(cls, path, add_special_tokens=False):
        """A Hugging Face tokenizer.json (BPE: Llama 2/3, Mistral, Qwen2, GPT-2 ...),
        encoding to the ids Hugging Face's tokenizers gives. encode(text,
        special="allowed") is tokenizers' default (special tokens in the text
        recognised); add_special_tokens=True puts the file's template tokens
        (BOS) around every text. A malformed file, or anything in it the
        library cannot honour, raises tfcore.Error (status TFC_ERR_FORMAT, a
        RuntimeError) naming the file and the field (docs/TOKENIZER.md); a
        missing file OSError. Such a tokenizer cannot be save()d: keep the
        tokenizer.json."""
        out = ffi.new("tfc_tokenizer **")
        flags = lib.TFC_TOKENIZER_ADD_SPECIAL if add_special_tokens else 0
        check(lib.tfc_tokenizer_load_hf_json(_path(path), flags, out))
        return cls._adopt(out[0])

    @classmethod
    def load(cls, path):
        """A file written by save()."""
        out = ffi.new("tfc_tokenizer **")
        check(lib.tfc_tokenizer_load(_path(path), out))
        return cls._adopt(out[0])

    def save(self, path):
        check(lib.tfc_tokenizer_save(self._h, _path(path)))

    def train(self, text, vocab_size):
        """Learn vocab_size - 256 merges from text (str, bytes, or a list of file paths via train_files)."""
        data = _bytes(text)
        check(lib.tfc_tokenizer_train(self._h, data, len(data), int(vocab_size)))
        return self

    def train_files(self, paths, vocab_size):
        """As train, over the concatenated files (streamed)."""
        keep = [ffi.new("char[]", _path(p)) for p in paths]
        check(lib.tfc_tokenizer_train_files(self._h, ffi.new("char *[]", keep), len(keep), int(vocab_size)))
        return self

    def add_special(self, text, id):
        check(lib.tfc_tokenizer_add_special(self._h, _bytes(text), int(id)))

    def encode(self, text, special="text"):
        """Token ids of text. special: 'text' (special tokens' text encoded as
        ordinary text), 'allowed'/'all' (mapped to their ids) or 'disallowed'
        (their appearance raises ValueError)."""
        data = _bytes(text)
        ids = ffi.new("int32_t **")
        n = ffi.new("size_t *")
        check(lib.tfc_tokenizer_encode(self._h, data, len(data), _special(special), ids, n))
        try:
            return list(ffi.unpack(ids[0], n[0])) if n[0] else []
        finally:
            lib.tfc_free(ids[0])

    def encode_batch(self, texts, special="text", num_threads=0):
        """encode() of each text, on num_threads threads (0: one per core)."""
        datas = [_bytes(t) for t in texts]
        keep = [ffi.new("char[]", d) for d in datas]
        lens = ffi.new("size_t[]", [len(d) for d in datas])
        ids = ffi.new("int32_t **")
        offs = ffi.new("size_t **")
        check(lib.tfc_tokenizer_encode_batch(self._h, ffi.new("char *[]", keep), lens, len(datas),
                                             _special(special), int(num_threads), ids, offs))
        try:
            o = ffi.unpack(offs[0], len(datas) + 1)
            flat = ffi.unpack(ids[0], o[-1]) if o[-1] else []
            return [list(flat[o[i]:o[i + 1]]) for i in range(len(datas))]
        finally:
            lib.tfc_free(ids[0])
            lib.tfc_free(offs[0])

    def decode_bytes(self, ids):
        """The exact bytes the ids stand for."""
        return self._decode(lib.tfc_tokenizer_decode, ids)

    def decode(self, ids):
        """The text of ids; ill-formed UTF-8 is replaced with U+FFFD."""
        return self._decode(lib.tfc_tokenizer_decode_utf8, ids).decode("utf-8")

    def _decode(self, fn, ids):
        ids = [int(i) for i in ids]
        arr = ffi.new("int32_t[]", ids) if ids else ffi.NULL
        out = ffi.new("char **")
        n = ffi.new("size_t *")
        check(fn(self._h, arr, len(ids), out, n))
        try:
            return ffi.unpack(out[0], n[0])
        finally:
            lib.tfc_free(out[0])

    @property
    def vocab_size(self):
        out = ffi.new("int32_t *")
        check(lib.tfc_tokenizer_vocab_size(self._h, out))
        return int(out[0])

    @property
    def n_merges(self):
        out = ffi.new("int32_t *")
        check(lib.tfc_tokenizer_n_merges(self._h, out))
        return int(out[0])

    def token_bytes(self, id):
        """(bytes of token id, is_special)."""
        b = ffi.new("char **")
        n = ffi.new("size_t *")
        sp = ffi.new("int32_t *")
        check(lib.tfc_tokenizer_token_bytes(self._h, int(id), b, n, sp))
        return ffi.unpack(b[0], n[0]), bool(sp[0])

    def merges(self):
        """[(left, right, id, rank)] in rank order."""
        out = []
        vals = [ffi.new("int32_t *") for _ in range(4)]
        for i in range(self.n_merges):
            check(lib.tfc_tokenizer_get_merge(self._h, i, *vals))
            out.append(tuple(int(v[0]) for v in vals))
        return out

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        return "Tokenizer(vocab_size=%d, merges=%d)" % (self.vocab_size, self.n_merges)
