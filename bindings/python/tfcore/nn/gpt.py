"""The GPT-2 model of tfcore.GPT written with tfcore.nn modules (the readable
version; tfcore.GPT, one C call a forward, stays the fast path).

Module and parameter names are Hugging Face GPT2LMHeadModel's, so
state_dict() keys are HF's and tfcore.GPT's (transformer.h.0.attn.c_attn.weight,
...), block Linear weights [in, out] as HF's Conv1D. GPT.from_gpt(model) copies
a tfcore.GPT's weights; the logits, loss and gradients are then tfcore.GPT's."""
import math

from .. import functional as F
from .._dtype import as_dtype
from ..tensor import arange, empty
from . import init
from .activation import GELU
from .container import ModuleList
from .dropout import Dropout
from .embedding import Embedding
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .parameter import Parameter


class Conv1D(Module):
    """HF GPT-2's Conv1D: y = x·W + b with weight [nx, nf] (the transpose of Linear's layout)."""

    def __init__(self, nf, nx, bias=True, dtype=None):
        super().__init__()
        dt = as_dtype(dtype if dtype is not None else "float32")
        self.nf, self.nx = int(nf), int(nx)
        self.weight = Parameter(empty(self.nx, self.nf, dtype=dt))
        init.normal_(self.weight, std=0.02)
        if bias:
            self.bias = Parameter(empty(self.nf, dtype=dt))
            init.zeros_(self.bias)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        # linear takes [out, in]: the transposed view goes back to W itself, one GEMM with the bias
        return F.linear(x, self.weight.transpose(0, 1), self.bias)

    def extra_repr(self):
        return "nf=%d, nx=%d" % (self.nf, self.nx)


class CausalSelfAttention(Module):
    def __init__(self, cfg):
        super().__init__()
        C, dt = cfg.n_embd, cfg.dtype
        self.n_head = cfg.n_head
        self.c_attn = Conv1D(3 * C, C, bias=cfg.bias, dtype=dt)
        self.c_proj = Conv1D(C, C, bias=cfg.bias, dtype=dt)
        self.attn_dropout_p = float(cfg.dropout)
        self.resid_dropout = Dropout(cfg.dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.attn_dropout_p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, C)))


class MLP(Module):
    def __init__(self, cfg):
        super().__init__()
        C, dt = cfg.n_embd, cfg.dtype
        self.c_fc = Conv1D(4 * C, C, bias=cfg.bias, dtype=dt)
        self.act = GELU(approximate="tanh")
        self.c_proj = Conv1D(C, 4 * C, bias=cfg.bias, dtype=dt)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


def _layer_norm(cfg):
    ln = LayerNorm(cfg.n_embd, eps=cfg.ln_eps, bias=cfg.bias, dtype=cfg.dtype)
    return ln


class Block(Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = _layer_norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = _layer_norm(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(Module):
    """HF's GPT2Model: wte, wpe, drop, h (the blocks), ln_f."""

    def __init__(self, cfg):
        super().__init__()
        self.wte = Embedding(cfg.vocab_size, cfg.n_embd, dtype=cfg.dtype)
        self.wpe = Embedding(cfg.block_size, cfg.n_embd, dtype=cfg.dtype)
        self.drop = Dropout(cfg.dropout)
        self.h = ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = _layer_norm(cfg)

    def forward(self, idx):
        T = idx.shape[-1]
        x = self.drop(self.wte(idx) + self.wpe(arange(T)))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT(Module):
    """GPT(config=None, **fields): config a tfcore.GPTConfig or a preset name (fields override it).
    forward(idx, targets=None) -> (logits [B, T, V], mean cross-entropy or None; targets of -100 skipped).
    Initialised as GPT-2/nanoGPT (N(0, 0.02), residual projections N(0, 0.02/√(2·n_layer)), zero biases)
    from tfcore's stream; with tie_weights lm_head.weight is transformer.wte.weight (one Parameter)."""

    def __init__(self, config=None, **fields):
        super().__init__()
        from ..gpt import GPTConfig
        if config is None:
            config = GPTConfig(**fields)
        elif isinstance(config, str):
            config = GPTConfig.preset(config, **fields)
        elif fields:
            raise TypeError("tfcore.nn.gpt.GPT: pass a config or fields, not both")
        if config.n_embd % config.n_head:
            raise ValueError("tfcore.nn.gpt.GPT: n_embd %d is not a multiple of n_head %d"
                             % (config.n_embd, config.n_head))
        self.config = config
        self.transformer = Transformer(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False, dtype=config.dtype)
        init.normal_(self.transformer.wte.weight, std=0.02)
        init.normal_(self.transformer.wpe.weight, std=0.02)
        init.normal_(self.lm_head.weight, std=0.02)
        for block in self.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                init.normal_(proj.weight, std=0.02 / math.sqrt(2 * config.n_layer))
        if config.tie_weights:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx, targets=None):
        from ..gpt import _ids
        idx = _ids(idx)
        if idx.ndim != 2:
            raise ValueError("tfcore.nn.gpt.GPT: idx must be [B, T], got %s" % (idx.shape,))
        T = idx.shape[1]
        if T > self.config.block_size:
            raise ValueError("tfcore.nn.gpt.GPT: sequence length %d exceeds block_size %d"
                             % (T, self.config.block_size))
        logits = self.lm_head(self.transformer(idx))
        if targets is None:
            return logits, None
        targets = _ids(targets)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        return logits, loss

    def load_state_dict(self, state_dict, strict=True):
        """As Module's; a state dict of a tied model without lm_head.weight (tfcore.GPT's, HF's files)
        is complete: the head is the embedding."""
        if self.config.tie_weights and "lm_head.weight" not in state_dict and \
                "transformer.wte.weight" in state_dict:
            state_dict = dict(state_dict)
            state_dict["lm_head.weight"] = state_dict["transformer.wte.weight"]
        return super().load_state_dict(state_dict, strict)

    @classmethod
    def from_gpt(cls, model):
        """A module GPT with a tfcore.GPT's config and a copy of its weights."""
        m = cls(model.config)
        m.load_state_dict(model.state_dict())
        return m

    def generate(self, prompt, max_new_tokens, temperature=1.0, top_k=0, top_p=1.0, seed=0, callback=None):
        """max_new_tokens ids after prompt (a list of ids), nanoGPT's loop: each step runs the whole context
        (its last block_size tokens; no KV cache) in eval mode without recording, and draws token i with
        tfcore.gpt.sample(..., seed, offset=i) — tfcore.GPT.generate's rule, so within block_size the tokens
        are the same as tfcore.GPT's for the same weights. callback(token) returning True stops."""
        from .. import autograd as _ag
        from ..gpt import sample
        from ..tensor import Tensor
        seq = [int(i) for i in (prompt.tolist() if isinstance(prompt, Tensor) else prompt)]
        if not seq:
            raise ValueError("tfcore.nn.gpt.GPT.generate: the prompt must hold at least one token")
        was_training = self.training
        self.eval()
        out = []
        try:
            with _ag.no_grad():
                for i in range(int(max_new_tokens)):
                    logits, _ = self([seq[-self.config.block_size:]])
                    tok = sample(logits[0, -1].float(), temperature, top_k, top_p, seed, i)
                    seq.append(tok)
                    out.append(tok)
                    if callback is not None and callback(tok):
                        break
        finally:
            self.train(was_training)
        return out

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())
