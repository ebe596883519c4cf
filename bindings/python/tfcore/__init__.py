"""tfcore: Python binding of libtfcore (cffi, ABI mode).

    import tfcore
    x = tfcore.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    loss = (x @ x).relu().sum()
    loss.backward()
    print(x.grad.numpy())

The library is found through $TFCORE_LIBRARY, next to this package, in a
meson build dir of the source checkout (build/lib), through pkg-config, or
on the dynamic loader's path. See docs/PYTHON.md.
"""
from ._dtype import (bfloat16, bool_, dtype, float16, float32, float64, int32, int64, uint8)
from ._lib import (DtypeError, Error, InvalidArgumentError, OutOfMemoryError, ShapeError, TfcIOError,
                   TfcRuntimeError, ffi, lib, library_path)
from .autograd import checkpoint, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._lib import GraphError  # noqa: F401  (freed graph, saved tensor modified in place, anomaly)
from ._lib import UnsupportedDtypeError  # noqa: F401  (mean of ints, argmax of bool: RuntimeError and TypeError)
from ._lib import ReadOnlyError  # noqa: F401  (a write into read-only memory: RuntimeError and ValueError)
from .tensor import (Device, Tensor, arange, as_tensor, device, empty, from_numpy, full, full_like, manual_seed,
                     ones, ones_like, rand, randn, tensor, zeros, zeros_like)
from .functional import (argmax, argmin, attention, cat, chunk, concat, cross_entropy, dropout, embedding, exp,
                         flatten, gelu, layer_norm, linear, linear_cross_entropy, log, log_softmax, masked_fill, matmul, max, mean,
                         min, permute, relu, reshape, rsqrt, scaled_dot_product_attention, sigmoid, softmax,
                         split, sqrt, squeeze, stack, std, sum, tanh, topk, transpose, unsqueeze, var, where)
from .functional import gather, index_select, masked_select, nonzero, scatter_add  # noqa: E402 (indexing ops)
from .functional import (abs, all, any, argsort, ceil, clamp, clip, cos, cumsum, eq, floor, ge, gt, le, lt,  # noqa: A001
                         maximum, minimum, multinomial, ne, round, sign, sin, sort, tril, triu)
from .dlpack import from_dlpack
from . import autograd, distributed, functional, kernels, optim  # noqa: F401
from .tokenizer import ChatTemplateError, Tokenizer
from .gpt import GPT, GPTConfig
from .model_files import load_model
from .io import TokenFile, load_safetensors, save_safetensors
from . import io  # noqa: F401
from .quant import QWeight, qlinear, quantize
from . import quant  # noqa: F401
from . import nn  # noqa: F401  (tfcore.nn: Module, Linear, ..., init, functional)
from . import utils  # noqa: F401
from .functional import linear_bf16  # noqa: F401  (bf16 mixed precision)
from .functional import silu, swiglu  # noqa: F401  (Llama's MLP activations)

bool = bool_  # tfcore.bool, like torch.bool  # noqa: A001

__version__ = ffi.string(lib.tfc_version_string()).decode()


def version():
    """libtfcore's version string, e.g. '1.0.0'."""
    return __version__


def build_info():
    """How libtfcore was built (backends, BLAS, OpenMP, CUDA architectures)."""
    return ffi.string(lib.tfc_build_info()).decode()


def set_num_threads(n):
    """CPU threads kernels use (process-wide); n <= 0 restores the default."""
    from ._lib import check
    check(lib.tfc_set_num_threads(int(n)))


def get_num_threads():
    return int(lib.tfc_get_num_threads())


def cuda_is_available():
    return lib.tfc_cuda_available() != 0  # (the name bool is tfcore.bool here)


_MATMUL_PRECISIONS = ("highest", "high", "medium")  # index = tfc_matmul_precision


def set_float32_matmul_precision(precision):
    """How f32 matmuls are computed, process-wide, as torch.set_float32_matmul_precision:
    'highest' (default: full f32 everywhere), 'high' or 'medium' (CUDA may use TF32
    tensor cores; the CPU ignores it). A non-str is TypeError, another string ValueError."""
    if not isinstance(precision, str):
        raise TypeError("set_float32_matmul_precision: precision must be a str ('highest', 'high' or 'medium'), "
                        "not %s" % type(precision).__name__)
    if precision not in _MATMUL_PRECISIONS:
        raise ValueError("set_float32_matmul_precision: precision is %r; need 'highest', 'high' or 'medium'"
                         % (precision,))
    from ._lib import check
    check(lib.tfc_set_float32_matmul_precision(_MATMUL_PRECISIONS.index(precision)))


def get_float32_matmul_precision():
    """The current f32 matmul precision: 'highest', 'high' or 'medium'."""
    return _MATMUL_PRECISIONS[int(lib.tfc_get_float32_matmul_precision())]
