"""Bad input through the Python binding (issue #21): each case runs in a fresh
interpreter, so a crash of the interpreter (a segfault in the library or in
the binding's native glue) fails that case instead of the whole run, and the
case must end in an exception of the documented type carrying the library's
message (statuses map as in tfcore/_lib.py: INVALID_ARG and SHAPE are
ValueErrors, DTYPE a TypeError, OOM a MemoryError, UNSUPPORTED and the
others RuntimeError)."""
import os
import subprocess
import sys

import pytest

PRELUDE = """
import ctypes, numpy as np, tfcore
from tfcore import ffi
api = ctypes.pythonapi
capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", api))
keep = []
def managed(data, shape, strides=None, code=2, bits=32, device=1, ndim=None):
    '''A hand-made legacy DLManagedTensor (no deleter: Python owns every buffer).'''
    m = ffi.new("DLManagedTensor *")
    sh = ffi.new("int64_t[]", shape) if shape is not None else ffi.NULL
    st = ffi.new("int64_t[]", strides) if strides is not None else ffi.NULL
    keep.extend([m, sh, st])
    m.dl_tensor.data = ffi.cast("void *", data)
    m.dl_tensor.device.device_type = device
    m.dl_tensor.ndim = len(shape) if ndim is None else ndim
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = code, bits, 1
    m.dl_tensor.shape, m.dl_tensor.strides = sh, st
    return m
def capsule(m, name=b"dltensor"):
    return capsule_new(int(ffi.cast("uintptr_t", m)), name, None)
buf = np.zeros(64, dtype=np.uint8)
aligned = buf.ctypes.data + (-buf.ctypes.data) % 16
"""

# name: (code raising the error, exception class the error must be, fragment of its message)
CASES = {
    "reshape_count_overflows": (
        "tfcore.ones(2).reshape(3, 6148914691236517206)", "ShapeError",
        "tfc_reshape: cannot view x [2] as [3,6148914691236517206]: the element count overflows"),
    "view_count_overflows": (
        "tfcore.ones(4).view(-1, 2 ** 62, 4)", "ShapeError", "tfc_view"),
    "expand_count_overflows": (
        "tfcore.ones(1).expand(2 ** 40, 2 ** 40, 2 ** 40)", "ShapeError", "tfc_expand"),
    "narrow_range_overflows": (
        "tfcore.arange(6.0).narrow(0, 2 ** 63 - 2, 4)", "InvalidArgumentError", "tfc_narrow: start"),
    "zeros_too_large": (
        "tfcore.zeros(2 ** 31, 2 ** 31, 2 ** 31)", "MemoryError", "tfc_tensor_zeros"),
    "zeros_negative": ("tfcore.zeros(2, -3)", "ValueError", "tfc_tensor_zeros"),
    "dim_beyond_c_int": ("tfcore.ones(2, 3).sum(dim=2 ** 40)", "OverflowError", ""),
    "from_numpy_misaligned": (
        "tfcore.from_numpy(np.frombuffer(bytearray(17), dtype=np.float32, offset=1))",
        "InvalidArgumentError", "tfc_tensor_wrap: data"),
    "from_numpy_misaligned_strides": (
        "tfcore.from_numpy(np.ndarray((3,), np.float32, buffer=bytearray(20), strides=(5,)))",
        "ValueError", "not multiples of the item size"),
    "from_dlpack_misaligned_array": (
        "tfcore.from_dlpack(np.frombuffer(bytearray(17), dtype=np.float32, offset=1))",
        "ValueError", "not aligned"),
    "capsule_misaligned_data": (
        "tfcore.from_dlpack(capsule(managed(aligned + 1, [4])))", "InvalidArgumentError",
        "tfc_tensor_from_dlpack: tfc_tensor_wrap: data"),
    "capsule_wrong_name": (
        "tfcore.from_dlpack(capsule(managed(aligned, [4]), b'not_a_dltensor'))", "ValueError",
        "expected a 'dltensor' capsule, got one named b'not_a_dltensor'"),
    "capsule_consumed": (
        "c = capsule(managed(aligned, [4]))\n"
        "t = tfcore.from_dlpack(c)\n"
        "tfcore.from_dlpack(c)", "ValueError", "this capsule was consumed already"),
    "not_a_capsule": ("tfcore.from_dlpack(42)", "TypeError", "expected an object with __dlpack__ or a 'dltensor' "
                      "capsule, got int"),
    "none_is_not_a_capsule": ("tfcore.from_dlpack(None)", "TypeError", "got NoneType"),
    "capsule_null_shape": (
        "tfcore.from_dlpack(capsule(managed(aligned, None, ndim=2)))", "InvalidArgumentError",
        "tfc_tensor_from_dlpack: shape is NULL"),
    "capsule_too_many_dims": (
        "tfcore.from_dlpack(capsule(managed(aligned, [1] * 9)))", "TfcRuntimeError", "ndim 9"),
    "capsule_negative_dims": (
        "tfcore.from_dlpack(capsule(managed(aligned, [-4])))", "ValueError",
        "tfc_tensor_from_dlpack: tfc_tensor_wrap: dims [-4] has negative size"),
    "capsule_strides_overflow": (
        "tfcore.from_dlpack(capsule(managed(aligned, [2, 2], strides=[2 ** 62, 1])))", "ValueError",
        "tfc_tensor_from_dlpack: tfc_tensor_wrap: strides"),
    "capsule_unknown_dtype": (
        "tfcore.from_dlpack(capsule(managed(aligned, [4], code=9, bits=7)))", "DtypeError",
        "tfc_tensor_from_dlpack: DLPack dtype"),
    "capsule_gpu_memory": (
        "tfcore.from_dlpack(capsule(managed(aligned, [4], device=2)))", "TfcRuntimeError",
        "is not CPU memory"),
    # in-place ops, Function, gradcheck, utils.checkpoint (issue #16)
    "inplace_add_none": ("t = tfcore.ones(3)\nt += None", "TypeError", "other is None"),
    "inplace_mul_str": ("tfcore.ones(3).mul_('x')", "TypeError", "other is a str"),
    "inplace_copy_none": ("tfcore.ones(3).copy_(None)", "TypeError", "src is None"),
    "inplace_clamp_no_bounds": ("tfcore.ones(3).clamp_()", "ValueError", "at least one of min and max"),
    "inplace_clamp_tensor_bound": ("tfcore.ones(3).clamp_(tfcore.ones(3))", "TypeError", "min is a Tensor"),
    "inplace_bad_broadcast": ("tfcore.ones(3).add_(tfcore.ones(2, 3))", "RuntimeError", "broadcast shape"),
    "inplace_leaf_requires_grad": (
        "tfcore.ones(3, requires_grad=True).sub_(1.0)", "RuntimeError", "a leaf Variable that requires grad"),
    "function_backward_raises": (
        "class F(tfcore.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x): return x * 2.0\n"
        "    @staticmethod\n    def backward(ctx, g): raise LookupError('mine')\n"
        "F.apply(tfcore.ones(2, requires_grad=True)).sum().backward()", "LookupError", "mine"),
    "function_backward_returns_str": (
        "class F(tfcore.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x): return x * 2.0\n"
        "    @staticmethod\n    def backward(ctx, g): return 'g'\n"
        "F.apply(tfcore.ones(2, requires_grad=True)).sum().backward()", "TypeError", "returned a str"),
    "function_save_non_tensor": (
        "class F(tfcore.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(None, 3)\n        return x\n"
        "    @staticmethod\n    def backward(ctx, g): return g\n"
        "F.apply(tfcore.ones(2, requires_grad=True))", "TypeError", "argument 1 is int"),
    "gradcheck_fn_raises": (
        "tfcore.autograd.gradcheck(lambda x: 1 / 0, (tfcore.ones(2, dtype='float64', requires_grad=True),))",
        "ZeroDivisionError", "division"),
    "gradcheck_fn_returns_none": (
        "tfcore.autograd.gradcheck(lambda x: None, (tfcore.ones(2, dtype='float64', requires_grad=True),))",
        "TypeError", "returned a NoneType"),
    "gradcheck_non_contiguous": (
        "x = tfcore.ones(2, 3, dtype='float64').T\nx.requires_grad = True\n"
        "tfcore.autograd.gradcheck(lambda x: x.sum(), (x,))", "ValueError", "tfc_gradcheck: inputs[0]"),
    "checkpoint_not_callable": ("tfcore.utils.checkpoint(3, tfcore.ones(2))", "TypeError", "must be callable"),
    # indexing (tests/python/test_indexing.py has the full list)
    "index_huge": ("tfcore.zeros(3)[2 ** 62]", "IndexError", "out of bounds"),
    "index_list_huge": ("tfcore.zeros(3)[[0, -2 ** 62]]", "IndexError", "out of bounds"),
    "index_none_operand": ("tfcore.index_select(tfcore.zeros(3), 0, None)", "TypeError", "integer tensor"),
    "index_select_i64_max": (
        "tfcore.index_select(tfcore.zeros(3), 0, tfcore.tensor([2 ** 63 - 1]))", "IndexError",
        "tfc_index_select: index [1] at flat position 0 is 9223372036854775807, out of range"),
    "gather_dim_huge": ("tfcore.gather(tfcore.zeros(3), 2 ** 40, tfcore.tensor([0]))", "OverflowError", ""),
    "scatter_add_wrong_dtype": (
        "tfcore.scatter_add(tfcore.zeros(3), 0, tfcore.tensor([0]), tfcore.zeros(1, dtype='float64'))",
        "DtypeError", "tfc_scatter_add: src is f64 but x is f32"),
    "setitem_wrong_type": ("t = tfcore.zeros(3)\nt[[0]] = 'a'", "TypeError", "cannot assign"),
    "masked_select_int_mask": (
        "tfcore.masked_select(tfcore.zeros(3), tfcore.tensor([0, 1, 0]))", "DtypeError", "mask is i64"),
}

RUNNER = PRELUDE + """
try:
{code}
except BaseException as e:
    print("RAISED", " ".join(c.__name__ for c in type(e).__mro__))
    print("MESSAGE", e)
else:
    print("NO EXCEPTION")
"""


def run_case(code):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    body = RUNNER.format(code="\n".join("    " + line for line in code.splitlines()))
    return subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_raises_the_right_exception(name):
    code, exc, fragment = CASES[name]
    r = run_case(code)
    assert r.returncode == 0, "the interpreter died (status %d):\n%s" % (r.returncode, r.stderr[-3000:])
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert "RAISED" in out, "no exception:\n" + r.stdout + r.stderr
    assert exc in out["RAISED"].split(), "raised %s, wanted %s: %s" % (out["RAISED"], exc, out.get("MESSAGE"))
    assert fragment in out.get("MESSAGE", ""), out.get("MESSAGE")
