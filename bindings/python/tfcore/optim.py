"""Optimizers with PyTorch's interface over libtfcore's fused ones
(include/tfcore/optim.h): SGD, Adam, AdamW, clip_grad_norm_, and the
learning-rate schedules.

    opt = tfcore.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    loss.backward(); opt.step(); opt.zero_grad()

Parameters are leaf f32/f64 CPU tensors with contiguous memory. param_groups
is a list of dicts as in PyTorch: assigning group["lr"] or
group["weight_decay"] changes the optimizer.
"""
import math

from ._lib import check, ffi, lib
from .tensor import Tensor, _wrap, tensor


def _param_list(params):
    params = list(params)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError("tfcore.optim: parameters must be tfcore Tensors, got %s" % type(p).__name__)
    return params


class _Group(dict):
    """A parameter group; lr and weight_decay write through to the optimizer."""

    def __init__(self, opt, index, values):
        super().__init__(values)
        self._opt = opt
        self._index = index

    def __setitem__(self, key, value):
        if key == "lr":
            check(lib.tfc_optim_set_group_lr(self._opt._h, self._index, float(value)))
        elif key == "weight_decay":
            check(lib.tfc_optim_set_group_weight_decay(self._opt._h, self._index, float(value)))
        elif key == "params":
            raise ValueError("tfcore.optim: a group's params cannot be replaced; use add_param_group")
        super().__setitem__(key, value)


class Optimizer:
    """Base of SGD, Adam and AdamW: one tfc_optim handle."""

    _kind = None

    def __init__(self, params, options):
        opts = ffi.new("tfc_optim_options *")
        kind = getattr(lib, self._kind)  # looked up late: a library without optim.h still imports
        check(lib.tfc_optim_options_default(kind, opts))
        for k, v in options.items():
            setattr(opts, k, v)
        out = ffi.new("tfc_optim **")
        check(lib.tfc_optim_new(kind, opts, out))
        self._h = ffi.gc(out[0], lib.tfc_optim_release)
        self.defaults = dict(options)
        self.param_groups = []
        params = list(params)
        if not params:
            raise ValueError("tfcore.optim: optimizer got an empty parameter list")
        if isinstance(params[0], dict):
            for g in params:
                self.add_param_group(g)
        else:
            self.add_param_group({"params": params})

    def add_param_group(self, group):
        """Add {"params": [...], "lr": ..., "weight_decay": ...} (missing values: the defaults)."""
        group = dict(group)
        ps = group["params"]
        ps = _param_list([ps] if isinstance(ps, Tensor) else ps)
        lr = float(group.get("lr", self.defaults["lr"]))
        wd = float(group.get("weight_decay", self.defaults["weight_decay"]))
        handles = ffi.new("tfc_tensor *[]", [p._h for p in ps]) if ps else ffi.NULL
        index = ffi.new("int32_t *")
        check(lib.tfc_optim_add_group(self._h, handles, len(ps), lr, wd, index))
        values = dict(self._public_defaults())
        values.update(group)
        values.update(params=ps, lr=lr, weight_decay=wd)
        self.param_groups.append(_Group(self, index[0], values))

    def _public_defaults(self):
        return self.defaults

    def step(self, closure=None):
        """One update of every parameter that has a gradient. closure, when
        given, is called first (to recompute the loss) and its value returned."""
        loss = closure() if closure is not None else None
        check(lib.tfc_optim_step(self._h))
        return loss

    def zero_grad(self, set_to_none=True):
        check(lib.tfc_optim_zero_grad(self._h, 1 if set_to_none else 0))

    @property
    def step_count(self):
        out = ffi.new("int64_t *")
        check(lib.tfc_optim_step_count(self._h, out))
        return int(out[0])

    def state_dict(self):
        """The optimizer's state as {name: Tensor} (copies; names as in docs/OPTIM.md)."""
        n = ffi.new("int64_t *")
        check(lib.tfc_optim_state_count(self._h, n))
        out = {}
        for i in range(n[0]):
            name = ffi.new("char **")
            t = ffi.new("tfc_tensor **")
            check(lib.tfc_optim_state_get(self._h, i, name, t))
            try:
                key = ffi.string(name[0]).decode()
            finally:
                lib.tfc_free(name[0])
            out[key] = _wrap(t[0]).clone()
        return out

    def load_state_dict(self, state):
        """Load what state_dict() returned into an optimizer built the same way."""
        names = list(state)
        keep = [ffi.new("char[]", k.encode()) for k in names]
        tensors = [state[k] if isinstance(state[k], Tensor) else tensor(state[k]) for k in names]
        check(lib.tfc_optim_state_load(self._h, ffi.new("char *[]", keep),
                                       ffi.new("tfc_tensor *[]", [t._h for t in tensors]), len(names)))
        for g in self.param_groups:
            v = ffi.new("double *")
            check(lib.tfc_optim_get_group_lr(self._h, g._index, v))
            dict.__setitem__(g, "lr", v[0])
            check(lib.tfc_optim_get_group_weight_decay(self._h, g._index, v))
            dict.__setitem__(g, "weight_decay", v[0])

    def __repr__(self):
        return "%s(%d groups, step %d)" % (type(self).__name__, len(self.param_groups), self.step_count)


class SGD(Optimizer):
    """torch.optim.SGD: p ← p − lr·(g + wd·p) with optional (Nesterov) momentum."""

    _kind = "TFC_OPTIM_SGD"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        super().__init__(params, dict(lr=float(lr), momentum=float(momentum), dampening=float(dampening),
                                      weight_decay=float(weight_decay), nesterov=int(bool(nesterov)),
                                      maximize=int(bool(maximize))))


class Adam(Optimizer):
    """torch.optim.Adam (weight decay added to the gradient, L2 style)."""

    _kind = "TFC_OPTIM_ADAM"
    _default_wd = 0.0

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=None, amsgrad=False,
                 maximize=False):
        if weight_decay is None:
            weight_decay = self._default_wd
        super().__init__(params, dict(lr=float(lr), beta1=float(betas[0]), beta2=float(betas[1]), eps=float(eps),
                                      weight_decay=float(weight_decay), amsgrad=int(bool(amsgrad)),
                                      maximize=int(bool(maximize))))

    def _public_defaults(self):
        d = dict(self.defaults)
        d["betas"] = (d.pop("beta1"), d.pop("beta2"))
        return d


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay p ← p − lr·wd·p (default wd 1e-2)."""

    _kind = "TFC_OPTIM_ADAMW"
    _default_wd = 1e-2


def clip_grad_norm_(parameters, max_norm):
    """torch.nn.utils.clip_grad_norm_: scale all gradients so their global L2
    norm is at most max_norm; returns the norm before clipping (0-d float64
    tensor). A NaN/Inf gradient raises (and changes nothing)."""
    ps = _param_list([parameters] if isinstance(parameters, Tensor) else parameters)
    handles = ffi.new("tfc_tensor *[]", [p._h for p in ps]) if ps else ffi.NULL
    norm = ffi.new("double *")
    check(lib.tfc_clip_grad_norm(handles, len(ps), float(max_norm), norm))
    return tensor(norm[0], dtype="float64")


def _lr(fn, *args):
    out = ffi.new("double *")
    check(fn(*args, out))
    return out[0]


def lr_constant(step, max_lr, warmup=0):
    """Linear warmup lr·(s+1)/(warmup+1) for s < warmup, then max_lr."""
    return _lr(lib.tfc_lr_constant, int(step), float(max_lr), int(warmup))


def lr_cosine(step, max_lr, min_lr, warmup, total):
    """nanoGPT's schedule: warmup, cosine decay to min_lr at step total, then min_lr."""
    return _lr(lib.tfc_lr_cosine, int(step), float(max_lr), float(min_lr), int(warmup), int(total))


def lr_linear(step, max_lr, min_lr, warmup, total):
    """Warmup, then linear decay to min_lr at step total, then min_lr."""
    return _lr(lib.tfc_lr_linear, int(step), float(max_lr), float(min_lr), int(warmup), int(total))


def lr_inverse_sqrt(step, max_lr, warmup):
    """Warmup, then max_lr·sqrt(warmup/step)."""
    return _lr(lib.tfc_lr_inverse_sqrt, int(step), float(max_lr), int(warmup))


class LRScheduler:
    """Sets the lr of every group of opt from fn(step) at each .step(), e.g.
    LRScheduler(opt, lambda s: lr_cosine(s, 6e-4, 6e-5, 100, 5000))."""

    def __init__(self, optimizer, fn):
        self.optimizer = optimizer
        self.fn = fn
        self.last_step = 0
        self._apply()

    def _apply(self):
        lr = float(self.fn(self.last_step))
        if not math.isfinite(lr) or lr < 0:
            raise ValueError("tfcore.optim.LRScheduler: schedule gave lr %r at step %d" % (lr, self.last_step))
        for g in self.optimizer.param_groups:
            g["lr"] = lr

    def step(self):
        self.last_step += 1
        self._apply()

    def get_last_lr(self):
        return [g["lr"] for g in self.optimizer.param_groups]


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm_", "lr_constant", "lr_cosine", "lr_linear",
           "lr_inverse_sqrt", "LRScheduler"]
