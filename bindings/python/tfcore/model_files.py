"""tfcore.load_model: a model from whichever file or directory holds one.

    model = tfcore.load_model("TinyLlama-1.1B")        # a Hugging Face directory
    model = tfcore.load_model("runs/shakespeare")      # a directory of `tfcore train --out`
    model = tfcore.load_model("gpt2_124M.bin")         # an llm.c checkpoint
    model = tfcore.load_model("ckpt.safetensors")      # a file of GPT.save
    logits, loss = model(idx, targets)
    ids = model.tokenizer.encode("Hello")              # when the directory has tokenizer files

The format is told by content, as the CLI's model_source.c tells it (a run
directory and a Hugging Face directory both hold config.json and
model.safetensors; a run directory also has checkpoint.json, or from before
it the vocabulary in its weights' metadata). The loaders themselves are the
library's (tfc_gpt_load_hf, tfc_gpt_load, tfc_gpt_load_llmc); this module
only chooses one and gathers what sits beside the weights: the tokenizer,
and the bos/eos ids of config.json.
"""
import json
import os
import shutil
import struct
import tempfile

from . import _dtype
from ._dtype import as_dtype
from ._lib import Error, TfcIOError, TfcRuntimeError, lib
from .autograd import no_grad
from .gpt import _LLMC_MAGIC, GPT
from .tokenizer import Tokenizer

_STAGE = ".checkpoint.new"  # tools/checkpoint.c: a committed save not yet moved into place
_LOOKED_FOR = ("a Hugging Face directory (config.json + model.safetensors), a directory of tfcore train "
               "(model.safetensors, or adapter_model.safetensors on a base), a safetensors file of "
               "tfcore.GPT.save or an llm.c GPT-2 checkpoint (magic %d)" % _LLMC_MAGIC)


def _io_error(msg):
    return TfcIOError(msg, lib.TFC_ERR_IO)


def _format_error(msg):
    return TfcRuntimeError(msg, lib.TFC_ERR_FORMAT)


def _safetensors_metadata(path):
    """The __metadata__ of a safetensors file (its header only: u64 little-endian length, JSON), or None
    when the file is not one. The weights are not read here; the library's loader validates them."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                return None
            n = struct.unpack("<Q", head)[0]
            if n < 2 or n > min(100_000_000, os.fstat(f.fileno()).st_size - 8):
                return None
            doc = json.loads(f.read(n).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    meta = doc.get("__metadata__")
    return meta if isinstance(meta, dict) else {}


def _is_llmc(path):
    with open(path, "rb") as f:
        head = f.read(4)
    return len(head) == 4 and int.from_bytes(head, "little") == _LLMC_MAGIC


def _run_files(directory):
    """Where a run directory's files are: a committed staging directory first (checkpoint.c's readers do
    the same, so a save running meanwhile is never seen half done)."""
    stage = os.path.join(directory, _STAGE)
    return stage if os.path.isfile(os.path.join(stage, "checkpoint.json")) else directory


def _is_run(directory):
    """A directory tfcore train wrote: checkpoint.json, or (older runs) tfc.vocab in the weights' metadata."""
    src = _run_files(directory)
    if os.path.isfile(os.path.join(src, "checkpoint.json")):
        return True
    meta = _safetensors_metadata(os.path.join(src, "model.safetensors"))
    return bool(meta) and "tfc.vocab" in meta


def _config_json(directory, fn):
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except ValueError as e:
        raise _format_error("%s: %s is not JSON (%s)" % (fn, path, e)) from None
    if not isinstance(cfg, dict):
        raise _format_error("%s: %s holds a %s, not an object" % (fn, path, type(cfg).__name__))
    return cfg


def _token_id(fn, path, key, v):
    """config.json's bos_token_id / eos_token_id: null, an id, or (eos_token_id) a list of ids."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, list)) or \
            (isinstance(v, list) and (not v or not all(isinstance(i, int) and not isinstance(i, bool) for i in v))):
        raise _format_error("%s: %s has %s %r; need an integer id, a non-empty list of ids or null"
                            % (fn, path, key, v))
    return list(v) if isinstance(v, list) else v


def _tokenizer_of(fn, directory, model):
    """The tokenizer stored beside the weights, or None: tokenizer.json (Hugging Face), else
    vocab.json + merges.txt (GPT-2's files under transformers' names), else tokenizer.tfctok (tfcore
    train's BPE). A file that is there but cannot be read raises, naming it: a model silently without
    its tokenizer would encode nothing the way its training did."""
    hf = os.path.join(directory, "tokenizer.json")
    vocab, merges = os.path.join(directory, "vocab.json"), os.path.join(directory, "merges.txt")
    own = os.path.join(directory, "tokenizer.tfctok")
    try:
        if os.path.isfile(hf):
            where, tok = hf, Tokenizer.from_file(hf)
        elif os.path.isfile(vocab) and os.path.isfile(merges):
            where, tok = vocab, Tokenizer.from_gpt2(vocab, merges)
        elif os.path.isfile(own):
            where, tok = own, Tokenizer.load(own)
        else:
            return None
    except Error as e:
        raise type(e)("%s: reading the tokenizer beside the model in %s (load_model(..., tokenizer=False) loads "
                      "the model without it): %s" % (fn, directory, e), e.status) from e
    vocab_size = int(model.config.vocab_size)
    if tok.vocab_size > vocab_size:
        raise _format_error("%s: the tokenizer %s has %d tokens but the model has %d (vocab_size): its ids would "
                            "fall outside the embedding" % (fn, where, tok.vocab_size, vocab_size))
    return tok


def _dtype_arg(fn, dtype):
    """load_model's dtype: None, or float32 / float64 (checked before anything is read)."""
    if dtype is None:
        return None
    dt = as_dtype(dtype)
    if dt not in (_dtype.float32, _dtype.float64):
        raise ValueError("%s: dtype must be float32 or float64 (the parameters' dtype), got %s; bf16 compute on "
                         "f32 weights is model.autocast = 'bf16', int8/int4 weights model.quantize()"
                         % (fn, dt.name))
    return dt


def _converted(fn, model, dt):
    """model with float parameters of dtype dt: itself when they already are (or dt is None), else a new model
    of the same config whose parameters are copies (rounded to f32 or widened to f64)."""
    if dt is None:
        return model
    cfg = model.config
    if cfg.dtype is dt:
        return model
    if model.quant_format or model.head_quant_format:
        raise ValueError("%s: the file holds a quantized model (%s), which has no %s form; load the float "
                         "checkpoint instead" % (fn, model.quant_format or model.head_quant_format, dt.name))
    cfg.dtype = dt
    out = GPT(cfg)
    src = model.state_dict()  # the same config gives the same parameter table, names included
    with no_grad():
        for name, dst in out.named_parameters():
            dst.copy_(src[name])
    return out


def load_model(path, dtype=None, tokenizer=True):
    """A tfcore.GPT from whichever of these path is, told apart by content:

    - a Hugging Face directory (config.json + model.safetensors of GPT-2,
      Llama, Mistral or Qwen2): GPT.load_hf;
    - a directory written by `tfcore train --out DIR` (checkpoint.json,
      model.safetensors): GPT.load of its model.safetensors, the config from
      its metadata; a LoRA run's (adapter_model.safetensors naming its base
      as lora.base): the base loaded the same way, then its adapters;
    - a file starting with llm.c's magic 20240326: GPT.load_llmc;
    - a safetensors file of GPT.save: GPT.load.

    dtype None keeps the stored parameter dtype (f32 for Hugging Face and
    llm.c files; a checkpoint's own); float32 or float64 converts.

    With tokenizer=True (the default) the tokenizer files of a directory
    are read into model.tokenizer (a tfcore.Tokenizer): tokenizer.json,
    else vocab.json + merges.txt, else tokenizer.tfctok; None when there
    are none (a file, a character-vocabulary run). tokenizer=False skips
    them. model.bos_token_id and model.eos_token_id come from config.json
    (eos_token_id may be a list, as Llama 3's), None when absent; save_hf
    writes them back by default.

    Errors: a path that does not exist or a directory with none of the
    files above (tfcore.TfcIOError, an OSError, naming the path and what
    was looked for); a file that is no model (tfcore.TfcRuntimeError,
    status TFC_ERR_FORMAT); whatever the loader refuses (its exception,
    naming the file and the field); a tokenizer file that cannot be read
    or has more tokens than the model's vocabulary.
    """
    fn = "tfcore.load_model"
    dt = _dtype_arg(fn, dtype)
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not os.path.exists(path):
        raise _io_error("%s: %r does not exist (looked for %s)" % (fn, path, _LOOKED_FOR))
    if os.path.isdir(path):
        if _is_run(path):
            model, files = _load_run(fn, path, dtype, tokenizer)
        elif os.path.isfile(os.path.join(path, "config.json")):
            model, files = GPT.load_hf(path), path  # the loader names what is wrong in config.json
        elif os.path.isfile(os.path.join(path, "model.safetensors")):
            model, files = GPT.load(os.path.join(path, "model.safetensors")), path
        else:
            raise _io_error("%s: directory %r holds no model: it has neither config.json (a Hugging Face "
                            "directory) nor model.safetensors or checkpoint.json (a directory of tfcore train); "
                            "looked for %s" % (fn, path, _LOOKED_FOR))
    else:
        if _is_llmc(path):
            model = GPT.load_llmc(path)
        elif _safetensors_metadata(path) is not None:
            model = GPT.load(path)
        else:
            raise _format_error("%s: %r is not a model file: neither an llm.c checkpoint (its first 4 bytes are not "
                                "the magic %d) nor a safetensors file (8-byte header length, JSON header); looked "
                                "for %s" % (fn, path, _LLMC_MAGIC, _LOOKED_FOR))
        files = None
    model = _converted(fn, model, dt)
    if files is not None and tokenizer and model.tokenizer is None:
        model.tokenizer = _tokenizer_of(fn, files, model)
    cfg_json = _config_json(files, fn) if files is not None else {}
    where = os.path.join(files or "", "config.json")
    if "bos_token_id" in cfg_json:
        model.bos_token_id = _token_id(fn, where, "bos_token_id", cfg_json["bos_token_id"])
        if isinstance(model.bos_token_id, list):
            raise _format_error("%s: %s has a list as bos_token_id; need one id" % (fn, where))
    if "eos_token_id" in cfg_json:
        model.eos_token_id = _token_id(fn, where, "eos_token_id", cfg_json["eos_token_id"])
    return model


def _load_run(fn, directory, dtype, tokenizer):
    """A tfcore train directory: (model, the directory its other files are in)."""
    src = _run_files(directory)
    weights = os.path.join(src, "model.safetensors")
    if os.path.isfile(weights):
        return GPT.load(weights), src
    adapters = os.path.join(src, "adapter_model.safetensors")
    meta = _safetensors_metadata(adapters) if os.path.isfile(adapters) else None
    if meta is None:
        raise _io_error("%s: %r is a directory of tfcore train (checkpoint.json) without model.safetensors or "
                        "adapter_model.safetensors" % (fn, directory))
    base = meta.get("lora.base")
    if not base:
        raise _format_error("%s: %s names no base model (no lora.base metadata)" % (fn, adapters))
    if not os.path.exists(base):
        raise _io_error("%s: the LoRA run %r is on base %r, which does not exist (a relative base is taken from "
                        "the current directory, as tfcore train recorded it)" % (fn, directory, base))
    model = load_model(base, dtype=dtype, tokenizer=tokenizer)
    model.load_lora(src)
    return model, src


def _write_eos_list(directory, eos):
    """config.json's eos_token_id as the list it was read as: tfc_gpt_save_hf takes one id and writes that;
    Llama 3's configs list several, which generation stops at."""
    path = os.path.join(os.fspath(directory), "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["eos_token_id"] = list(eos)
    fd, tmp = tempfile.mkstemp(prefix="config.json.", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        shutil.copymode(path, tmp)
        os.replace(tmp, path)  # atomic, as the library replaces the files it writes
    except BaseException:
        os.unlink(tmp)
        raise


__all__ = ["load_model"]
