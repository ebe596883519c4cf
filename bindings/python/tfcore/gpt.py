"""tfcore.GPT: the decoder models of include/tfcore/gpt.h (GPT-2 and the Llama family).

    model = tfcore.GPT(tfcore.GPTConfig.preset("char-tiny", vocab_size=65))
    logits, loss = model(idx, targets)          # idx, targets [B, T] int
    loss.backward(); opt.step()                 # opt over model.parameters()
    model.generate([1, 2, 3], 50, temperature=0.8, top_k=40)
    model.save("ckpt.safetensors"); m2 = tfcore.GPT.load("ckpt.safetensors")

Parameter names are Hugging Face's: GPT-2's (transformer.h.0.attn.c_attn.weight,
..., block Linear weights [in, out], HF's Conv1D layout) or the Llama family's
(model.layers.0.self_attn.q_proj.weight, ..., nn.Linear's [out, in]).
"""
import numbers
import os

from . import _dtype
from . import autograd as _ag
from ._dtype import as_dtype
from ._lib import InvalidArgumentError, check, ffi, lib
from .tensor import Tensor, _id_array, _int_arg, _wrap, tensor

_LLMC_MAGIC = 20240326  # llm.c GPT-2 checkpoints start with it (int32 little-endian)
_OWN = object()  # save_hf's default: the model's own bos/eos ids
# PEFT's default target_modules per model_type (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING)
_LORA_DEFAULT_TARGETS = {"gpt2": "c_attn", "llama": "q_proj,v_proj", "mistral": "q_proj,v_proj",
                         "qwen2": "q_proj,v_proj"}

_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias", "tie_weights", "dtype", "ln_eps",
           "dropout", "arch", "n_kv_head", "mlp_hidden", "attention_bias", "mlp_bias", "sliding_window", "rope_theta",
           "rope_scaling")
_FLOAT_FIELDS = ("ln_eps", "dropout", "rope_theta")
_BOOL_FIELDS = ("bias", "tie_weights", "attention_bias", "mlp_bias")
_ROPE_TYPES = {"default": 0, "linear": 1, "dynamic": 2, "llama3": 3}
# rope_scaling's keys as Hugging Face's config.json spells them -> tfc_rope_config's fields
_ROPE_KEYS = {"factor": "factor", "low_freq_factor": "low_freq_factor", "high_freq_factor": "high_freq_factor",
              "original_max_position_embeddings": "original_max_position_embeddings"}


def _rope_scaling_get(c):
    t = int(c.rope.rope_type)
    if t == 0:
        return None
    name = [k for k, v in _ROPE_TYPES.items() if v == t][0]
    d = {"rope_type": name, "factor": float(c.rope.factor)}
    if name == "llama3":
        d.update(low_freq_factor=float(c.rope.low_freq_factor), high_freq_factor=float(c.rope.high_freq_factor),
                 original_max_position_embeddings=int(c.rope.original_max_position_embeddings))
    return d


def _rope_scaling_set(c, v):
    """rope_scaling as in config.json: None, or a dict with rope_type (or type) and its fields."""
    if v is None:
        c.rope.rope_type = 0
        return
    if not isinstance(v, dict):
        raise TypeError("tfcore.GPTConfig: rope_scaling must be None or a dict like config.json's")
    v = dict(v)
    t = v.pop("rope_type", v.pop("type", None))
    if t not in _ROPE_TYPES:
        raise ValueError("tfcore.GPTConfig: rope_scaling type %r is not one of %s" % (t, ", ".join(_ROPE_TYPES)))
    c.rope.rope_type = _ROPE_TYPES[t]
    for k, x in v.items():
        if k not in _ROPE_KEYS:
            raise ValueError("tfcore.GPTConfig: rope_scaling key %r is not read (keys: %s)" % (k, ", ".join(_ROPE_KEYS)))
        setattr(c.rope, _ROPE_KEYS[k], int(x) if k == "original_max_position_embeddings" else float(x))


class GPTConfig:
    """Hyper-parameters: n_layer, n_head, n_embd, block_size, vocab_size,
    bias (True), tie_weights (True), dtype (float32 or float64), ln_eps (1e-5),
    dropout (0.0: nanoGPT's four places, training forwards only); and for the
    Llama family arch ("gpt2", "llama", "mistral", "qwen2"), n_kv_head (0: n_head),
    mlp_hidden (0: the family's default), attention_bias, mlp_bias,
    sliding_window (0: none), rope_theta and rope_scaling (None or a dict as in
    config.json, e.g. {"rope_type": "linear", "factor": 2.0}).
    Defaults are the char-tiny preset (GPT-2) with vocab 256."""

    def __init__(self, **kwargs):
        self._c = self._defaults()
        for k, v in kwargs.items():
            if k not in _FIELDS:
                raise TypeError("tfcore.GPTConfig: unknown field %r (fields: %s)" % (k, ", ".join(_FIELDS)))
            setattr(self, k, v)

    @staticmethod
    def _defaults():
        c = ffi.new("tfc_gpt_config *")
        c.struct_size = ffi.sizeof("tfc_gpt_config")
        check(lib.tfc_gpt_config_preset(b"char-tiny", c))
        c.vocab_size, c.bias, c.tie_weights, c.dtype, c.ln_eps = 256, 1, 1, lib.TFC_DTYPE_F32, 1e-5
        r = c.rope  # TFC_ROPE_CONFIG_INIT's values (Llama 2's theta, no scaling)
        r.struct_size, r.rope_type, r.theta, r.factor = ffi.sizeof("tfc_rope_config"), 0, 10000.0, 1.0
        r.low_freq_factor, r.high_freq_factor = 1.0, 4.0
        r.original_max_position_embeddings, r.max_position_embeddings = 8192, 2048
        return c

    @classmethod
    def preset(cls, name, **overrides):
        """'char-tiny', 'char-small', 'gpt2-mini', 'gpt2' or 'llama-tiny', with fields overridden."""
        cfg = cls()
        check(lib.tfc_gpt_config_preset(name.encode(), cfg._c))
        for k, v in overrides.items():
            setattr(cfg, k, v)
        return cfg

    def __getattr__(self, k):
        if k in _FIELDS:
            if k == "arch":
                return ffi.string(lib.tfc_gpt_arch_name(self._c.arch)).decode()
            if k == "rope_theta":
                return float(self._c.rope.theta)
            if k == "rope_scaling":
                return _rope_scaling_get(self._c)
            v = getattr(self._c, k)
            if k == "dtype":
                return _dtype.BY_CODE[int(v)]
            return bool(v) if k in _BOOL_FIELDS else v
        raise AttributeError(k)

    def __setattr__(self, k, v):
        if k == "_c":
            object.__setattr__(self, k, v)
        elif k == "arch":
            a = ffi.new("int32_t *")
            check(lib.tfc_gpt_arch_from_name(str(v).encode(), a))
            self._c.arch = a[0]
        elif k == "rope_theta":
            self._c.rope.theta = float(v)
        elif k == "rope_scaling":
            _rope_scaling_set(self._c, v)
        elif k in _FIELDS:
            setattr(self._c, k, as_dtype(v).code if k == "dtype" else (float(v) if k in _FLOAT_FIELDS else int(v)))
        else:
            raise AttributeError("tfcore.GPTConfig has no field %r" % (k,))

    def to_dict(self):
        return {k: getattr(self, k) for k in _FIELDS}

    def __repr__(self):
        return "GPTConfig(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())


def _ids(x, fn="tfcore.GPT.forward", name="idx"):
    x = _id_array(fn, name, x)
    return x if isinstance(x, Tensor) else tensor(x, dtype=_dtype.int64)


def _id_list(fn, name, x):
    """A prompt as a list of Python ints (integer ids only: floats are a TypeError)."""
    a = _id_array(fn, name, x)
    return [int(i) for i in (a.tolist() if isinstance(a, Tensor) else a.reshape(-1).tolist())]


class GPT:
    """A decoder model (GPT-2 or the Llama family). GPT(config=None, seed=0, **fields):
    config is a GPTConfig, a preset name, or None (fields given as keywords).

    tokenizer, bos_token_id and eos_token_id are what tfcore.load_model found
    beside the weights (a tfcore.Tokenizer; ids from config.json, eos_token_id
    an id or a list of ids); None on a model built or loaded otherwise, and
    assignable."""

    tokenizer = None
    bos_token_id = None
    eos_token_id = None

    def __init__(self, config=None, seed=0, autocast=None, **fields):
        if config is None:
            config = GPTConfig(**fields)
        elif isinstance(config, str):
            config = GPTConfig.preset(config, **fields)
        elif fields:
            raise TypeError("tfcore.GPT: pass a config or fields, not both")
        out = ffi.new("tfc_gpt **")
        check(lib.tfc_gpt_new(config._c, int(seed), out))
        self._adopt(out[0])
        if autocast is not None:
            self.autocast = autocast

    def _adopt(self, ptr):
        self._h = ffi.gc(ptr, lib.tfc_gpt_release)
        self._adopt_params()

    def _adopt_params(self):
        n = ffi.new("int32_t *")
        names = ffi.new("char ***")
        params = ffi.new("tfc_tensor ***")
        check(lib.tfc_gpt_params(self._h, n, ffi.cast("const char *const **", names),
                                 ffi.cast("tfc_tensor *const **", params)))
        self._params = [(ffi.string(names[0][i]).decode(), _wrap(lib.tfc_tensor_retain(params[0][i])))
                        for i in range(n[0])]

    @classmethod
    def _built_by(cls, fn, path):
        out = ffi.new("tfc_gpt **")
        check(fn(os.fsencode(os.fspath(path)), out))
        m = cls.__new__(cls)
        m._adopt(out[0])
        return m

    @classmethod
    def load(cls, path):
        """A model from any file or directory the library reads, told apart by
        content: a Hugging Face directory (config.json, as load_hf), an
        llm.c checkpoint (magic 20240326, as load_llmc), else a file written by
        save() (config from its metadata). tfcore.load_model also tells a
        directory of tfcore train apart and reads the tokenizer and bos/eos ids
        beside the weights."""
        path = os.fspath(path)
        if os.path.isdir(path):
            return cls.load_hf(path)
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError:
            head = b""
        if len(head) == 4 and int.from_bytes(head, "little") == _LLMC_MAGIC:
            return cls.load_llmc(path)
        return cls._built_by(lib.tfc_gpt_load, path)

    @classmethod
    def load_llmc(cls, path):
        """A model from an llm.c GPT-2 checkpoint (gpt2_124M.bin: fp32 version 3
        or bf16 version 5); f32, vocabulary unpadded, head tied."""
        return cls._built_by(lib.tfc_gpt_load_llmc, path)

    def save_llmc(self, path):
        """Write an llm.c GPT-2 checkpoint (version 3, fp32, vocabulary padded to
        a multiple of 128) that llm.c's train_gpt2 reads."""
        check(lib.tfc_gpt_save_llmc(self._h, os.fsencode(os.fspath(path))))

    @classmethod
    def load_hf(cls, directory):
        """A model from a Hugging Face directory (config.json +
        model.safetensors, as save_pretrained of transformers' GPT2LMHeadModel,
        LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM writes it)."""
        return cls._built_by(lib.tfc_gpt_load_hf, directory)

    def save_hf(self, directory, bos_token_id=_OWN, eos_token_id=_OWN, dtype="float32", max_shard_size=None):
        """Write config.json + model.safetensors that transformers'
        GPT2LMHeadModel / LlamaForCausalLM / MistralForCausalLM /
        Qwen2ForCausalLM.from_pretrained(directory) loads. bos_token_id and
        eos_token_id default to the model's own (self.bos_token_id,
        self.eos_token_id: what load_model read); None writes none. An
        eos_token_id list is written as a list. dtype: the stored dtype
        (float32, bfloat16 or float16); max_shard_size (bytes, or None for
        one file): shards and model.safetensors.index.json as
        save_pretrained(max_shard_size=...) writes them."""
        bos = self.bos_token_id if bos_token_id is _OWN else bos_token_id
        eos = self.eos_token_id if eos_token_id is _OWN else eos_token_id
        fn = "tfcore.GPT.save_hf"
        if bos is not None:
            bos = _int_arg(fn, "bos_token_id", bos)
        eos_list = None
        if isinstance(eos, (list, tuple)):
            eos_list = [_int_arg(fn, "eos_token_id[%d]" % i, e) for i, e in enumerate(eos)]
            if not eos_list:
                raise ValueError("%s: eos_token_id is an empty list; give ids or None" % fn)
            eos = eos_list[0]  # tfc_gpt_save_hf checks each id against the vocabulary
            for i, e in enumerate(eos_list):
                if not 0 <= e < int(self.config.vocab_size):
                    raise InvalidArgumentError("%s: eos_token_id[%d] is %d, outside [0, %d)"
                                               % (fn, i, e, int(self.config.vocab_size)))
        elif eos is not None:
            eos = _int_arg(fn, "eos_token_id", eos)
        opts = ffi.new("tfc_hf_save_options *")
        opts.struct_size = ffi.sizeof("tfc_hf_save_options")
        opts.bos_token_id = -1 if bos is None else bos
        opts.eos_token_id = -1 if eos is None else eos
        opts.dtype = as_dtype(dtype).code
        opts.max_shard_bytes = 0 if max_shard_size is None else _int_arg(fn, "max_shard_size", max_shard_size)
        check(lib.tfc_gpt_save_hf_ex(self._h, os.fsencode(os.fspath(directory)), opts))
        if eos_list is not None and len(eos_list) > 1:
            from .model_files import _write_eos_list
            _write_eos_list(directory, eos_list)

    # transformers' names for the same two operations
    from_pretrained = load_hf
    save_pretrained = save_hf

    def load_weights(self, path):
        """Copy the weights of a saved file of the same config into this model."""
        check(lib.tfc_gpt_load_into(self._h, os.fsencode(os.fspath(path))))

    def save(self, path, metadata=None):
        """Safetensors file with Hugging Face names and the config in the metadata."""
        meta = dict(metadata or {})
        keep = [ffi.new("char[]", str(s).encode()) for s in list(meta) + list(meta.values())]
        n = len(meta)
        keys = ffi.new("char *[]", keep[:n]) if n else ffi.NULL
        vals = ffi.new("char *[]", keep[n:]) if n else ffi.NULL
        check(lib.tfc_gpt_save(self._h, os.fsencode(os.fspath(path)), keys, vals, n))

    @property
    def config(self):
        cfg = GPTConfig()
        check(lib.tfc_gpt_get_config(self._h, cfg._c))
        return cfg

    def named_parameters(self):
        """[(Hugging Face name, Tensor)] in the model's fixed order (tied weights once)."""
        return list(self._params)

    def parameters(self):
        return [p for _, p in self._params]

    def state_dict(self):
        return dict(self._params)

    def num_parameters(self):
        return int(lib.tfc_gpt_num_elements(self._h))

    # ---- LoRA (include/tfcore/lora.h; docs/MODEL.md, "Fine-tuning with LoRA") ----

    def add_lora(self, rank=8, alpha=None, targets=None, seed=0):
        """Attach LoRA adapters (tfc_gpt_add_lora): y = x·W + b + (alpha/rank)·(x·Aᵀ)·Bᵀ
        on the block Linear layers targets names (PEFT's target_modules: a list or a
        comma-separated string of module-name suffixes, so "c_proj" is attn.c_proj and
        mlp.c_proj; "all-linear"). targets defaults to PEFT's default for the
        architecture: "c_attn" for GPT-2, "q_proj,v_proj" for the Llama family.
        A starts Kaiming-uniform, B at zero (the model's
        outputs are unchanged); alpha defaults to rank. The base is frozen
        (requires_grad off); train lora_parameters(). Returns them."""
        if targets is None:
            targets = _LORA_DEFAULT_TARGETS.get(self.config.arch, "c_attn")
        rank = _int_arg("tfcore.GPT.add_lora", "rank", rank)
        seed = _int_arg("tfcore.GPT.add_lora", "seed", seed)
        if alpha is not None and (isinstance(alpha, (str, bytes, bool)) or not isinstance(alpha, numbers.Real)):
            raise TypeError("tfcore.GPT.add_lora: alpha must be a number, got %s %r" % (type(alpha).__name__, alpha))
        if not isinstance(targets, str):
            targets = ",".join(targets)
        c = ffi.new("tfc_lora_config *")
        keep = ffi.new("char[]", targets.encode())
        c.struct_size = ffi.sizeof("tfc_lora_config")
        c.rank = int(rank)
        c.alpha = float((rank if int(rank) > 0 else 1) if alpha is None else alpha)
        c.targets = keep
        c.seed = int(seed)
        check(lib.tfc_gpt_add_lora(self._h, c))
        return self.lora_parameters()

    def lora_named_parameters(self):
        """[(PEFT name, Tensor)] of the adapters: base_model.model.transformer.h.0.attn.c_attn.lora_A.weight
        [r, in], ...lora_B.weight [out, r], in module order; [] without adapters."""
        n = ffi.new("int32_t *")
        names = ffi.new("char ***")
        params = ffi.new("tfc_tensor ***")
        check(lib.tfc_gpt_lora_params(self._h, n, ffi.cast("const char *const **", names),
                                      ffi.cast("tfc_tensor *const **", params)))
        return [(ffi.string(names[0][i]).decode(), _wrap(lib.tfc_tensor_retain(params[0][i]))) for i in range(n[0])]

    def lora_parameters(self):
        return [t for _, t in self.lora_named_parameters()]

    @property
    def lora_config(self):
        """{"rank", "alpha", "targets"} of the adapters, or None without them."""
        c = ffi.new("tfc_lora_config *")
        c.struct_size = ffi.sizeof("tfc_lora_config")
        check(lib.tfc_gpt_get_lora_config(self._h, c))
        if c.rank == 0:
            return None
        return {"rank": c.rank, "alpha": c.alpha, "targets": ffi.string(c.targets).decode()}

    def merge_lora(self):
        """Fold the adapters into the base weights (W += (alpha/r)·(B·A)ᵀ), drop them and make the
        base trainable again (tfc_gpt_merge_lora). Returns self."""
        check(lib.tfc_gpt_merge_lora(self._h))
        return self

    def save_lora(self, path, base_model=None, metadata=None):
        """Save the adapters as PEFT does: path a directory receiving adapter_model.safetensors and
        adapter_config.json (base_model_name_or_path = base_model); a path ending in .safetensors
        gets the tensors alone (tfc_gpt_save_lora, PEFT's names and layouts)."""
        path = os.fspath(path)
        meta = dict(metadata or {})
        keep = [ffi.new("char[]", str(s).encode()) for s in list(meta) + list(meta.values())]
        n = len(meta)
        keys = ffi.new("char *[]", keep[:n]) if n else ffi.NULL
        vals = ffi.new("char *[]", keep[n:]) if n else ffi.NULL
        if path.endswith(".safetensors"):
            check(lib.tfc_gpt_save_lora(self._h, os.fsencode(path), keys, vals, n))
            return
        os.makedirs(path, exist_ok=True)
        check(lib.tfc_gpt_save_lora(self._h, os.fsencode(os.path.join(path, "adapter_model.safetensors")), keys,
                                    vals, n))
        bm = ffi.new("char[]", str(base_model).encode()) if base_model is not None else ffi.NULL
        check(lib.tfc_gpt_save_lora_config(self._h, os.fsencode(os.path.join(path, "adapter_config.json")), bm))

    def load_lora(self, path):
        """Attach stored adapters (tfc_gpt_load_lora): a file of save_lora or PEFT, or a directory
        holding adapter_model.safetensors (alpha from its metadata or adapter_config.json).
        Freezes the base. Returns lora_parameters()."""
        check(lib.tfc_gpt_load_lora(self._h, os.fsencode(os.fspath(path))))
        return self.lora_parameters()

    def quantize(self, format="int8", group_size=None, head=False):
        """Quantize the block Linear weights in place for inference (tfc_gpt_quantize):
        format "int8" (per output feature) or "int4" (group_size along the input,
        default 32). Embeddings, LayerNorms, biases and the LM head stay float32
        unless head=True, which then also runs quantize_head(format, group_size);
        the float32 weights of the quantized layers are dropped, so they leave
        named_parameters(). The model is then inference-only (forward records no
        graph). Returns self."""
        from .quant import _format
        fmt = _format(format)
        if group_size is None:
            group_size = 32 if fmt == lib.TFC_QFORMAT_INT4 else 0
        check(lib.tfc_gpt_quantize(self._h, fmt, int(group_size)))
        self._params = []  # the dropped weights must not stay alive through old references
        self._adopt_params()
        if head:
            self.quantize_head(format, group_size)
        return self

    def quantize_head(self, format="int8", group_size=None):
        """Quantize the LM head in place for inference (tfc_gpt_quantize_head),
        independently of the blocks: format "int8" (per vocab row) or "int4"
        (group_size along n_embd, default 32). A tied model keeps wte in float32
        for the embedding and adds the quantized copy for the head; an untied
        lm_head.weight is dropped from named_parameters(). The model is then
        inference-only. Returns self."""
        from .quant import _format
        fmt = _format(format)
        if group_size is None:
            group_size = 32 if fmt == lib.TFC_QFORMAT_INT4 else 0
        check(lib.tfc_gpt_quantize_head(self._h, fmt, int(group_size)))
        self._params = []
        self._adopt_params()
        return self

    @property
    def head_quant_format(self):
        """None for a float32 LM head, else "int8" or "int4"."""
        f = lib.tfc_gpt_head_quant_format(self._h)
        return {lib.TFC_QFORMAT_INT8: "int8", lib.TFC_QFORMAT_INT4: "int4"}.get(f)

    @property
    def head_quant_group_size(self):
        """The int4 group size of the LM head; 0 for int8 and a float32 head."""
        return int(lib.tfc_gpt_head_quant_group_size(self._h))

    @property
    def quant_format(self):
        """None for a float model, else "int8" or "int4"."""
        f = lib.tfc_gpt_quant_format(self._h)
        return {lib.TFC_QFORMAT_INT8: "int8", lib.TFC_QFORMAT_INT4: "int4"}.get(f)

    @property
    def quant_group_size(self):
        """The int4 group size; 0 for int8 and float models."""
        return int(lib.tfc_gpt_quant_group_size(self._h))

    @property
    def recompute(self):
        """True when training forwards checkpoint every block (tfc_gpt_set_recompute):
        only each block's input is kept for backward, which re-runs the block;
        gradients are bitwise the same. Assign True/False to change it."""
        return bool(lib.tfc_gpt_get_recompute(self._h))

    @recompute.setter
    def recompute(self, on):
        check(lib.tfc_gpt_set_recompute(self._h, 1 if on else 0))

    @property
    def autocast(self):
        """tfcore.bfloat16 when bf16 mixed precision is on (tfc_gpt_set_autocast:
        every Linear and the LM head take bf16-rounded operands with f32
        accumulation; weights, gradients, optimizer state and the other ops
        stay f32), else None. Assign tfcore.bfloat16 (or 'bf16',
        torch.bfloat16) to turn it on, None/False/tfcore.float32 to turn it
        off; GPT(..., autocast='bf16') sets it at construction."""
        return _dtype.bfloat16 if lib.tfc_gpt_get_autocast(self._h) == lib.TFC_DTYPE_BF16 else None

    @autocast.setter
    def autocast(self, dtype):
        if dtype is None or dtype is False:
            dt = _dtype.float32
        else:
            dt = as_dtype(dtype)
            if dt is not _dtype.bfloat16 and dt is not _dtype.float32:
                raise ValueError("tfcore.GPT.autocast: only bfloat16 (on) or None/float32 (off), got %r" % (dt,))
        check(lib.tfc_gpt_set_autocast(self._h, dt.code))

    def set_dropout_stream(self, seed, counter=0):
        """Where training forwards draw their dropout masks from: the next one
        is number `counter` of stream `seed` (tfc_gpt_set_dropout_stream)."""
        check(lib.tfc_gpt_set_dropout_stream(self._h, int(seed), int(counter)))
        return self

    def forward(self, idx, targets=None):
        """(logits [B, T, vocab], loss or None) for token ids idx [B, T]; the
        loss is the mean cross-entropy against targets [B, T]. Recorded for
        backward unless under no_grad (never for a quantized model or head)."""
        idx = _ids(idx)
        tg = ffi.NULL if targets is None else _ids(targets, name="targets")._h
        quantized = lib.tfc_gpt_quant_format(self._h) != 0 or lib.tfc_gpt_head_quant_format(self._h) != 0
        g = _ag.graph() if _ag.is_grad_enabled() and not quantized else ffi.NULL
        logits = ffi.new("tfc_tensor **")
        loss = ffi.new("tfc_tensor **")
        check(lib.tfc_gpt_forward(self._h, g, idx._h, tg, logits, loss if targets is not None else ffi.NULL))
        return _wrap(logits[0]), (_wrap(loss[0]) if targets is not None else None)

    __call__ = forward

    def generate(self, prompt, max_new_tokens, temperature=1.0, top_k=0, top_p=1.0, seed=0, callback=None):
        """max_new_tokens ids after prompt (a list of ids), with a KV cache.
        temperature 0 is greedy; top_k 0 and top_p 1 keep every token. The
        same seed gives the same tokens. callback(token) returning True stops;
        an exception it raises stops too and comes out of generate unchanged."""
        prompt = _id_list("tfcore.GPT.generate", "prompt", prompt)
        max_new_tokens = _int_arg("tfcore.GPT.generate", "max_new_tokens", max_new_tokens)
        out = ffi.new("int32_t[]", max(int(max_new_tokens), 1))
        got, cb = _token_callback(callback)
        status = lib.tfc_gpt_generate(self._h, ffi.new("int32_t[]", prompt), len(prompt), int(max_new_tokens),
                                      float(temperature), int(top_k), float(top_p), int(seed), out,
                                      int(max_new_tokens), cb, ffi.NULL)
        return _finish_generate(status, got, out, int(max_new_tokens))

    def generate_batch(self, prompts, max_new_tokens, temperature=1.0, top_k=0, top_p=1.0, seed=0, callback=None):
        """max_new_tokens ids after each prompt of the list prompts (lists of ids, of
        any lengths), decoded together without padding (tfc_gpt_generate_batch):
        each sequence has its own KV cache, and every step runs the Linear layers
        once for all of them. Sequence i samples as generate(prompts[i], ...,
        seed=seed + i) does. callback(seq, token) returning True stops that
        sequence (its list is then shorter). Returns a list of lists of ids."""
        fn = "tfcore.GPT.generate_batch"
        seqs = [_id_list(fn, "prompts[%d]" % i, p) for i, p in enumerate(prompts)]
        n, max_new = len(seqs), _int_arg(fn, "max_new_tokens", max_new_tokens)
        self._check_batch(fn, seqs, max_new)  # before n x max_new ids are allocated
        keep = [ffi.new("int32_t[]", s) for s in seqs]  # alive until the call returns
        arr = ffi.new("const int32_t *[]", max(n, 1))
        lens = ffi.new("int32_t[]", max(n, 1))
        for i, s in enumerate(seqs):
            arr[i], lens[i] = keep[i], len(s)
        out = ffi.new("int32_t[]", max(n * max_new, 1))
        produced = ffi.new("int32_t[]", max(n, 1))
        failed = []

        def on_token(seq, token, ctx):
            if failed:
                return 1
            try:
                return 1 if callback is not None and callback(seq, token) else 0
            except Exception as e:  # stops every sequence; raised after the call
                failed.append(e)
                return 1
        cb = ffi.callback("tfc_gpt_batch_token_fn", on_token) if callback is not None else ffi.NULL
        check(lib.tfc_gpt_generate_batch(self._h, n, arr, lens, max_new, float(temperature), int(top_k),
                                         float(top_p), int(seed), out, n * max_new, produced, cb, ffi.NULL))
        if failed:
            raise failed[0]
        return [list(ffi.unpack(out + i * max_new, produced[i])) for i in range(n)]

    def _check_batch(self, fn, seqs, max_new):
        """tfc_gpt_generate_batch's own argument checks (and its messages), made
        before the n x max_new ids of output are allocated."""
        if not seqs:
            raise InvalidArgumentError("%s: n_seq is 0, need >= 1" % fn)
        if not 0 <= max_new < 2 ** 31:
            raise InvalidArgumentError("%s: max_new is %d, need >= 0 and < 2**31" % (fn, max_new))
        vocab = int(self.config.vocab_size)
        for i, s in enumerate(seqs):
            if not s:
                raise InvalidArgumentError("%s: n_prompts[%d] is 0, need >= 1" % (fn, i))
            for j, t in enumerate(s):
                if not 0 <= t < vocab:
                    raise InvalidArgumentError("%s: prompts[%d][%d] is %d, outside [0, %d)" % (fn, i, j, t, vocab))

    def generate_speculative(self, draft, prompt, max_new_tokens, k=4, temperature=1.0, top_k=0, top_p=1.0, seed=0,
                             callback=None, stats=None):
        """max_new_tokens ids after prompt from this (target) model, with `draft` (a
        smaller GPT of the same vocabulary) proposing k tokens a step that this model
        checks in one pass (tfc_gpt_generate_speculative): the output follows this
        model's distribution exactly; greedy gives generate(..., temperature=0)'s
        tokens. stats, a dict if given, receives drafted, accepted, target_passes."""
        prompt = _id_list("tfcore.GPT.generate_speculative", "prompt", prompt)
        max_new_tokens = _int_arg("tfcore.GPT.generate_speculative", "max_new_tokens", max_new_tokens)
        k = _int_arg("tfcore.GPT.generate_speculative", "k", k)
        out = ffi.new("int32_t[]", max(int(max_new_tokens), 1))
        st = ffi.new("tfc_spec_stats *")
        st.struct_size = ffi.sizeof("tfc_spec_stats")
        got, cb = _token_callback(callback)
        status = lib.tfc_gpt_generate_speculative(self._h, draft._h, ffi.new("int32_t[]", prompt), len(prompt),
                                                  int(max_new_tokens), int(k), float(temperature), int(top_k),
                                                  float(top_p), int(seed), out, int(max_new_tokens), st, cb, ffi.NULL)
        if stats is not None:
            stats.update(drafted=st.drafted, accepted=st.accepted, target_passes=st.target_passes)
        return _finish_generate(status, got, out, int(max_new_tokens))

    def __repr__(self):
        q = ", %s" % self.quant_format if self.quant_format else ""
        return "GPT(%r, %d parameters%s)" % (self.config, self.num_parameters(), q)


def _token_callback(callback):
    """The list the tokens are appended to as they come, and the tfc_gpt_token_fn that
    appends them and asks callback(token) whether to stop (an exception stops too)."""
    got = _Tokens()

    def on_token(token, ctx):
        got.append(token)
        try:
            return 1 if callback is not None and callback(token) else 0
        except BaseException as e:  # stops the C loop; re-raised unchanged by _finish_generate
            got.failed = e
            return 1
    return got, ffi.callback("tfc_gpt_token_fn", on_token)


class _Tokens(list):
    """The tokens a callback saw, and the exception it raised (failed), if any."""
    failed = None


def _finish_generate(status, got, out, n):
    """The callback's exception first (unchanged, as torch-style code expects), then a
    stop by the callback (the tokens so far), then the library's status."""
    if got.failed is not None:
        e, got.failed = got.failed, None
        raise e
    if status == lib.TFC_ERR_CANCELLED:
        return list(got)
    check(status)
    return list(ffi.unpack(out, n))

def sample(logits, temperature=1.0, top_k=0, top_p=1.0, seed=0, offset=0):
    """One token id drawn from a 1-D float32 logits vector (tfc_sample's rules).
    Any other number of dims is a ValueError: a [B, V] batch is not flattened
    into one distribution over B·V ids."""
    import numpy as np
    if logits is None or isinstance(logits, (str, bytes)):
        raise TypeError("tfcore.gpt.sample: logits must be a 1-D Tensor or array, got %s" % type(logits).__name__)
    arr = np.asarray(logits.numpy() if isinstance(logits, Tensor) else logits, dtype=np.float32)
    if arr.ndim != 1:
        raise ValueError("tfcore.gpt.sample: logits must be 1-D [vocab], got shape %s (sample each row of a "
                         "batch separately)" % (tuple(arr.shape),))
    arr = np.ascontiguousarray(arr)
    out = ffi.new("int32_t *")
    check(lib.tfc_sample(ffi.cast("const float *", arr.ctypes.data), arr.size, float(temperature), int(top_k),
                         float(top_p), int(seed), int(offset), out))
    return int(out[0])
