"""tfcore.nn: layers as torch.nn's (Module, Parameter, Linear, Embedding,
LayerNorm, Dropout, GELU, ReLU, Tanh, Sequential, ModuleList), tfcore.nn.init
and tfcore.nn.functional. Parameter names, state_dict keys, default
initialisations and errors follow torch's; values come from tfcore's ops (so
autograd records them as any other op). tfcore.nn.gpt.GPT is the GPT-2 model
built from these modules (tfcore.GPT stays the fast path). See docs/PYTHON.md."""
from . import functional, gpt, init  # noqa: F401
from .activation import GELU, ReLU, Sigmoid, Softmax, Tanh
from .activation import SiLU
from .container import ModuleList, Sequential
from .dropout import Dropout
from .embedding import Embedding
from .linear import Identity, Linear
from .module import Module
from .normalization import LayerNorm
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "Identity", "Embedding", "LayerNorm", "Dropout", "GELU", "ReLU",
           "Tanh", "Sigmoid", "Softmax", "Sequential", "ModuleList", "init", "functional"]
__all__ += ["SiLU"]
