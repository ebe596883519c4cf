"""tfcore.Tokenizer: BPE tokenizers (include/tfcore/tokenizer.h) — train,
encode, decode; GPT-2 / tiktoken / Hugging Face tokenizer.json / own file
formats.

    tok = tfcore.Tokenizer.from_gpt2("encoder.json", "vocab.bpe")
    ids = tok.encode("Hello world")            # list of ints
    text = tok.decode(ids)                     # str (invalid UTF-8 replaced)

    llama = tfcore.Tokenizer.from_file("tokenizer.json", add_special_tokens=True)
    ids = llama.encode("Hello", special="allowed")   # Hugging Face's ids, BOS first

    # chat: the template of tokenizer_config.json beside the tokenizer.json
    ids = llama.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)

Text arguments may be str (encoded as UTF-8) or bytes.
"""
import os
from collections.abc import Mapping

from ._lib import Error, check, error_for, ffi, lib

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


class ChatTemplateError(Error, ValueError):
    """A chat template the library does not render (a tokenizer_config.json
    whose chat_template is not one of the families', docs/TOKENIZER.md "Chat
    templates"), or a model without one: a ValueError, as Hugging Face's
    apply_chat_template raises for a tokenizer without a template."""


def _chat_check(status):
    """check(), with TFC_ERR_UNSUPPORTED from the chat functions as ChatTemplateError."""
    if status == lib.TFC_ERR_UNSUPPORTED:
        raise ChatTemplateError(str(error_for(status)), status)
    check(status)


CHAT_TEMPLATES = ("chatml", "qwen2", "qwen2.5", "llama3", "llama3.1", "llama2")


def _chat_messages(messages):
    """A list of {"role", "content"} dicts as a tfc_chat_message array (and the buffers it points into)."""
    if isinstance(messages, (str, bytes, Mapping)):
        raise TypeError("apply_chat_template: messages must be a list of {'role': ..., 'content': ...} dicts, got %s"
                        % type(messages).__name__)
    msgs = list(messages)
    arr = ffi.new("tfc_chat_message[]", max(len(msgs), 1))
    keep = []
    for i, m in enumerate(msgs):
        if not isinstance(m, Mapping):
            raise TypeError("apply_chat_template: messages[%d] is a %s, expected a dict with 'role' and 'content'"
                            % (i, type(m).__name__))
        if m.get("tool_calls"):
            raise ValueError("apply_chat_template: messages[%d] has tool_calls: tool calls are not rendered "
                             "(docs/TOKENIZER.md, \"Chat templates\")" % i)
        for key in ("role", "content"):
            if key not in m:
                raise KeyError("apply_chat_template: messages[%d] has no %r" % (i, key))
            v = m[key]
            if not isinstance(v, str):
                raise TypeError("apply_chat_template: messages[%d][%r] is a %s, expected str (text content only)"
                                % (i, key, type(v).__name__))
            if "\0" in v:
                raise ValueError("apply_chat_template: messages[%d][%r] holds a NUL character" % (i, key))
            keep.append(ffi.new("char[]", v.encode("utf-8")))
            setattr(arr[i], key, keep[-1])
    return arr, len(msgs), keep


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
        tok = cls._adopt(out[0])
        tok._path = os.fspath(path)  # apply_chat_template looks for tokenizer_config.json beside it
        return tok

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

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True, template=None):
        """A conversation as the model's chat template writes it, shaped like
        Hugging Face's apply_chat_template: messages is a list of
        {"role": "system"|"user"|"assistant", "content": str} dicts;
        add_generation_prompt=True ends it with the opening of the
        assistant's reply. tokenize=False returns the text; tokenize=True
        its ids, with the template's special tokens ("<|im_start|>",
        "<|eot_id|>", "<s>" ...) as their single ids and no tokens added
        around the text (the template writes its own BOS), which needs those
        tokens in this tokenizer.

        template: None reads the chat_template of the tokenizer_config.json
        beside the tokenizer.json this Tokenizer was loaded from (from_file)
        and renders it when it is one of the families' templates
        (docs/TOKENIZER.md, "Chat templates"); a family name ("chatml" or
        "qwen2", "qwen2.5", "llama3", "llama3.1", "llama2") renders that
        family; a Jinja template string is recognised as one of them.

        Raises ChatTemplateError (a ValueError) for a template the library
        does not render or a tokenizer_config.json without one, ValueError
        when there is no tokenizer_config.json to read, for an unknown
        family name, a role other than the three, a role order Llama 2's
        template refuses (naming the message), or a message with
        tool_calls; TypeError for content that is not a str."""
        family = self._chat_family(template)
        arr, n, _keep = _chat_messages(messages)  # _keep: the strings arr points into
        gen = 1 if add_generation_prompt else 0
        if tokenize:
            ids = ffi.new("int32_t **")
            count = ffi.new("size_t *")
            check(lib.tfc_chat_encode(self._h, family, arr, n, gen, ids, count))
            try:
                return list(ffi.unpack(ids[0], count[0])) if count[0] else []
            finally:
                lib.tfc_free(ids[0])
        text = ffi.new("char **")
        size = ffi.new("size_t *")
        check(lib.tfc_chat_render(family, arr, n, gen, text, size))
        try:
            return ffi.unpack(text[0], size[0]).decode("utf-8")
        finally:
            lib.tfc_free(text[0])

    def _chat_family(self, template):
        out = ffi.new("int32_t *")
        if template is None:
            cached = getattr(self, "_chat_config_family", None)
            if cached is not None:
                return cached
            path = getattr(self, "_path", None)
            if path is None:
                raise ValueError("apply_chat_template: this Tokenizer was not loaded from a tokenizer.json "
                                 "(Tokenizer.from_file), so there is no tokenizer_config.json to read the chat "
                                 "template from; pass template=%s" % " | ".join(repr(t) for t in CHAT_TEMPLATES))
            config = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
            if not os.path.isfile(config):
                raise ValueError("apply_chat_template: no chat template: %s does not exist (looked for beside %s); "
                                 "pass template=%s" % (config, path, " | ".join(repr(t) for t in CHAT_TEMPLATES)))
            _chat_check(lib.tfc_chat_config_load(_path(config), out, ffi.NULL, ffi.NULL))
            self._chat_config_family = int(out[0])
            return self._chat_config_family
        if not isinstance(template, str):
            raise TypeError("apply_chat_template: template must be None, a family name or a Jinja template string, "
                            "got %s" % type(template).__name__)
        if "{{" in template or "{%" in template:
            _chat_check(lib.tfc_chat_template_detect(template.encode("utf-8"), out))
        else:
            check(lib.tfc_chat_family_from_name(template.encode("utf-8"), out))
        return int(out[0])

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        return "Tokenizer(vocab_size=%d, merges=%d)" % (self.vocab_size, self.n_merges)
