"""Element types: tfcore.float32, float64, bfloat16, float16, int32, int64, uint8, bool."""
import numpy as np

from ._lib import lib


class dtype:
    """A tfcore element type. Compares equal to itself only; .numpy is the
    numpy dtype used for .numpy() (bfloat16 has none: None)."""

    __slots__ = ("name", "code", "numpy", "itemsize", "is_floating_point")

    def __init__(self, name, code, np_dtype, itemsize, is_floating_point):
        self.name = name
        self.code = code
        self.numpy = np.dtype(np_dtype) if np_dtype is not None else None
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point

    def __repr__(self):
        return "tfcore." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


float32 = dtype("float32", lib.TFC_DTYPE_F32, np.float32, 4, True)
float64 = dtype("float64", lib.TFC_DTYPE_F64, np.float64, 8, True)
bfloat16 = dtype("bfloat16", lib.TFC_DTYPE_BF16, None, 2, True)
float16 = dtype("float16", lib.TFC_DTYPE_F16, np.float16, 2, True)
int32 = dtype("int32", lib.TFC_DTYPE_I32, np.int32, 4, False)
int64 = dtype("int64", lib.TFC_DTYPE_I64, np.int64, 8, False)
uint8 = dtype("uint8", lib.TFC_DTYPE_U8, np.uint8, 1, False)
bool_ = dtype("bool", lib.TFC_DTYPE_BOOL, np.bool_, 1, False)

ALL = (float32, float64, bfloat16, float16, int32, int64, uint8, bool_)
BY_CODE = {d.code: d for d in ALL}
_NAMES = {d.name: d for d in ALL}
_NAMES.update({"f32": float32, "float": float32, "f64": float64, "double": float64, "bf16": bfloat16,
               "f16": float16, "half": float16, "i32": int32, "int": int32, "i64": int64, "long": int64,
               "u8": uint8, "bool_": bool_})
_BY_NUMPY = {d.numpy: d for d in ALL if d.numpy is not None}


def _by_name(name):
    return _NAMES[name]


def as_dtype(x):
    """tfcore dtype for a tfcore dtype, a name ('float32', 'f32', 'bf16'...),
    a numpy dtype or type, a torch dtype, or the Python types float/int/bool."""
    if isinstance(x, dtype):
        return x
    if x is float:
        return float32
    if x is int:
        return int64
    if x is bool:
        return bool_
    if isinstance(x, str):
        key = x[len("torch."):] if x.startswith("torch.") else x
        if key in _NAMES:
            return _NAMES[key]
        raise TypeError("tfcore: unknown dtype %r" % (x,))
    mod = type(x).__module__
    if mod.startswith("torch"):
        return as_dtype(str(x))
    try:
        nd = np.dtype(x)
    except TypeError:
        raise TypeError("tfcore: cannot interpret %r as a dtype" % (x,)) from None
    if nd in _BY_NUMPY:
        return _BY_NUMPY[nd]
    raise TypeError("tfcore: numpy dtype %s has no tfcore equivalent (float16/32/64, int32/64, uint8, bool)"
                    % nd)
