"""tfcore.nn.Module: the base class of layers, shaped like torch.nn.Module."""
from collections import OrderedDict, namedtuple

import numpy as np

from .. import autograd as _ag
from .._dtype import as_dtype
from ..tensor import Tensor, tensor
from .parameter import Parameter

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _shape_of(value):
    return tuple(int(d) for d in value.shape)


class Module:
    """Base class of layers: attributes that are Parameters, Modules or buffers
    are registered (in assignment order), which gives parameters(),
    named_parameters(), state_dict() and load_state_dict() with torch's names
    ("0.weight", "h.1.attn.c_attn.bias", ...). Subclasses define forward();
    calling the module calls it."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())

    # -- registration ------------------------------------------------------------------

    def _check_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign %s before Module.__init__() call" % what)

    def register_parameter(self, name, param):
        self._check_init("parameters")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError("parameter name must be a non-empty string without '.', got %r" % (name,))
        if param is not None and not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (tfcore.nn.Parameter or None required)"
                            % (type(param).__name__, name))
        self._discard(name)
        self._parameters[name] = param

    def register_buffer(self, name, value, persistent=True):
        """A tensor that is state but not a parameter (saved in state_dict when persistent)."""
        self._check_init("buffers")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError("buffer name must be a non-empty string without '.', got %r" % (name,))
        if value is not None and not isinstance(value, Tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (tfcore.Tensor or None required)"
                            % (type(value).__name__, name))
        self._discard(name)
        self._buffers[name] = value
        if not persistent:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        self._check_init("child modules")
        if not isinstance(name, str) or "." in name:
            raise KeyError("module name must be a string without '.', got %r" % (name,))
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a tfcore.nn.Module subclass" % type(module).__name__)
        self._discard(name)
        self._modules[name] = module

    register_module = add_module

    def _discard(self, name):
        for d in ("_parameters", "_buffers", "_modules"):
            self.__dict__[d].pop(name, None)
        self._non_persistent_buffers.discard(name)
        self.__dict__.pop(name, None)

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif "_parameters" in d and name in d["_parameters"]:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (tfcore.nn.Parameter or None expected)"
                                % (type(value).__name__, name))
            d["_parameters"][name] = None
        elif isinstance(value, Module):
            self.add_module(name, value)
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (tfcore.nn.Module or None expected)"
                                % (type(value).__name__, name))
            d["_modules"][name] = None
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError("cannot assign '%s' as buffer '%s' (tfcore.Tensor or None expected)"
                                % (type(value).__name__, name))
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            if k in d and name in d[k]:
                return d[k][name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name):
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            if k in d and name in d[k]:
                del d[k][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # -- calling -----------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError("Module [%s] is missing the required \"forward\" function" % type(self).__name__)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- traversal ---------------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, which, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, which).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, Parameter) pairs; a parameter shared by two modules (tied weights) once, under its first name."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- state -------------------------------------------------------------------------

    def _state_items(self, prefix=""):
        """(key, tensor) of every parameter and persistent buffer, shared ones under each of their names
        (as torch's state_dict: a tied weight appears under both keys)."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                yield prefix + name, b
        for name, m in self._modules.items():
            if m is not None:
                yield from m._state_items(prefix + name + ".")

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An OrderedDict name -> Tensor (detached views sharing memory unless keep_vars)."""
        out = OrderedDict() if destination is None else destination
        with _ag.no_grad():
            for k, v in self._state_items(prefix):
                out[k] = v if keep_vars else v.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy the values of state_dict (tfcore Tensors, numpy arrays or torch tensors) into this module's
        parameters and buffers, converting dtypes. Every shape mismatch is an error; with strict, so are missing
        and unexpected keys (torch's RuntimeError and message). Nothing is copied when an error is raised.
        Returns (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError("Expected state_dict to be dict-like, got %s." % type(state_dict).__name__)
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in own]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.append("Missing key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in missing))
        todo = []
        for k, dst in own.items():
            if k not in state_dict:
                continue
            src = state_dict[k]
            if not (isinstance(src, Tensor) or isinstance(src, np.ndarray) or hasattr(src, "shape")):
                errors.append('While copying the parameter named "%s", expected a tensor, got %s.'
                              % (k, type(src).__name__))
                continue
            if _shape_of(src) != dst.shape:
                errors.append("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                              "current model is %s." % (k, list(_shape_of(src)), list(dst.shape)))
                continue
            todo.append((dst, src))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s" % (type(self).__name__,
                                                                                  "\n\t".join(errors)))
        with _ag.no_grad():
            for dst, src in todo:
                if not isinstance(src, Tensor):
                    src = tensor(src, dtype=dst.dtype)
                dst.copy_(src.to(dst.dtype) if src.dtype is not dst.dtype else src)
        return _IncompatibleKeys(missing, unexpected)

    # -- modes and conversions ---------------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                p.zero_grad(set_to_none)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, convert):
        """Replace every parameter's and buffer's storage by convert(tensor), keeping the Python objects
        (optimizers holding the parameters see the new values), as torch's module.to does."""
        with _ag.no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is None:
                        continue
                    new = convert(p)
                    if new is p:
                        continue
                    g = p.grad
                    rg = p.requires_grad
                    p._h = new.detach()._h
                    if rg:
                        p.requires_grad = True
                    if g is not None:
                        p.grad = convert(g)
                for name, b in list(m._buffers.items()):
                    if b is not None:
                        m._buffers[name] = convert(b)
        return self

    def to(self, *args, dtype=None, device=None):
        """to(dtype), to(device) or both: floating-point parameters and buffers get converted storage; the
        Parameter objects stay the same. Make optimizers after this call (torch's advice): a tfcore
        optimizer holds the library tensors it was given, not the Python objects."""
        for a in args:
            if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda"):
                device = a
            elif a is not None and type(a).__name__ == "Device":
                device = a
            else:
                dtype = a
        dt = as_dtype(dtype) if dtype is not None else None
        if dt is not None and not dt.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point dtypes, but got desired dtype=%r" % (dt,))

        def convert(t):
            out = t
            if dt is not None and t.is_floating_point():
                out = out.to(dt)
            if device is not None:
                out = out.to(device)
            return out
        return self._apply(convert)

    def float(self):
        return self.to(as_dtype("float32"))

    def double(self):
        return self.to(as_dtype("float64"))

    def bfloat16(self):
        return self.to(as_dtype("bfloat16"))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else "cuda:%d" % int(device))

    # -- printing ----------------------------------------------------------------------

    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append("(" + name + "): " + body)
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
