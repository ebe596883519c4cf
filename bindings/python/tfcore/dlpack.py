"""DLPack: Tensor.__dlpack__ / __dlpack_device__ and tfcore.from_dlpack.

Export hands out a legacy DLManagedTensor in a "dltensor" capsule (what numpy
1.24 and torch 1.13 read), or a DLManagedTensorVersioned in a
"dltensor_versioned" capsule when the consumer asks with max_version >= (1, 0).
data points at the first element with byte_offset = 0 (torch 1.13 ignores
byte_offset) and strides are always filled in. Import accepts both capsule
kinds (and raw capsules), honours byte_offset and NULL strides, and renames
the capsule to "used_dltensor[_versioned]". Neither direction copies.

The capsule machinery is Python's C API reached through ctypes.pythonapi
(which holds the GIL, unlike cffi's ABI calls). The capsule destructor and
the DLPack deleters are cffi callbacks: native trampolines that take the GIL
themselves, so a consumer may call the deleter from any thread. The
destructor receives the dying capsule as a raw address (void *), never as a
Python object: re-referencing an object under destruction is what makes a
py_object-typed ctypes destructor crash.
"""
import ctypes
import itertools
import os

from . import _dtype
from ._lib import check, ffi, lib
import numpy as np

from .tensor import Tensor, _i64, _wrap, from_numpy

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dlpack_cdef.h"), encoding="utf-8") as _f:
    ffi.cdef(_f.read())

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6

_TO_DL = {
    _dtype.float32: (kDLFloat, 32), _dtype.float64: (kDLFloat, 64), _dtype.float16: (kDLFloat, 16),
    _dtype.bfloat16: (kDLBfloat, 16), _dtype.int32: (kDLInt, 32), _dtype.int64: (kDLInt, 64),
    _dtype.uint8: (kDLUInt, 8), _dtype.bool_: (kDLBool, 8),
}
_FROM_DL = {v: k for k, v in _TO_DL.items()}

# Capsule names must outlive every capsule: module-level buffers, never freed.
_NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
_NAME_USED = ctypes.create_string_buffer(b"used_dltensor")
_NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]
# The destructor's view of the same functions: the capsule as a bare address.
_get_name = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetName", _api))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetPointer", _api))


def _addr(x):
    return int(ffi.cast("uintptr_t", x))


# ---- export ---------------------------------------------------------------------

# manager_ctx id -> (managed struct, shape array, strides array, Tensor): what a
# handed-out DLPack tensor needs alive until its deleter runs.
_exported = {}
_export_ids = itertools.count(1)


def _release_exported(managed):
    _exported.pop(_addr(managed.manager_ctx), None)


_legacy_deleter = ffi.callback("void(DLManagedTensor *)", _release_exported)
_versioned_deleter = ffi.callback("void(DLManagedTensorVersioned *)", _release_exported)


def _capsule_destructor(capsule):
    """Free a capsule's tensor unless a consumer took it (and renamed the capsule)."""
    try:
        name = _get_name(_addr(capsule))
        if name == ctypes.addressof(_NAME_LEGACY):
            ptr = _get_pointer(_addr(capsule), name)
            managed = ffi.cast("DLManagedTensor *", ptr)
        elif name == ctypes.addressof(_NAME_VERSIONED):
            ptr = _get_pointer(_addr(capsule), name)
            managed = ffi.cast("DLManagedTensorVersioned *", ptr)
        else:
            return  # consumed: the consumer owns it now
        managed.deleter(managed)
    except Exception:  # interpreter shutdown: nothing sensible left to do
        pass


_capsule_destructor_cb = ffi.callback("void(void *)", _capsule_destructor)


def device_of(t):
    """(DLDeviceType, device id) of a tensor: (1, 0) for CPU, (2, i) for CUDA i."""
    d = t.device
    return (kDLCPU, 0) if d.type == "cpu" else (kDLCUDA, d.index)


def to_capsule(t, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of t (no copy). stream is accepted for the protocol;
    tfcore's CUDA work is synchronous with respect to the host, so no
    synchronisation is needed before the consumer uses the memory."""
    if copy:
        raise BufferError("tfcore: __dlpack__(copy=True) is not supported; export t.clone()")
    if dl_device is not None and tuple(dl_device) != device_of(t):
        raise BufferError("tfcore: __dlpack__: cannot export a %s tensor to device %s" % (t.device, dl_device))
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    code, bits = _TO_DL[t.dtype]
    managed = ffi.new("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *")
    shape = t.shape
    shape_arr = ffi.new("int64_t[]", list(shape) or [0])
    strides_arr = ffi.new("int64_t[]", list(t.stride()) or [0])
    dl = managed.dl_tensor
    dl.data = ffi.NULL if t.numel() == 0 else lib.tfc_tensor_data(t._h)
    dl.device.device_type, dl.device.device_id = device_of(t)
    dl.ndim = len(shape)
    dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = code, bits, 1
    dl.shape = shape_arr
    dl.strides = strides_arr
    dl.byte_offset = 0
    key = next(_export_ids)
    managed.manager_ctx = ffi.cast("void *", key)
    if versioned:
        managed.version.major, managed.version.minor = 1, 0
        managed.flags = 0
        managed.deleter = _versioned_deleter
        name = _NAME_VERSIONED
    else:
        managed.deleter = _legacy_deleter
        name = _NAME_LEGACY
    _exported[key] = (managed, shape_arr, strides_arr, t)
    try:
        return _api.PyCapsule_New(_addr(managed), ctypes.addressof(name), _addr(_capsule_destructor_cb))
    except BaseException:
        del _exported[key]
        raise


# ---- import ---------------------------------------------------------------------

# id -> the imported managed tensor, until the last tfcore reference to its memory goes.
_imported = {}
_import_ids = itertools.count(1)


def _release_imported(data, ctx):
    managed = _imported.pop(_addr(ctx), None)
    if managed is not None and managed.deleter != ffi.NULL:
        managed.deleter(managed)


_release_imported_cb = ffi.callback("tfc_deleter", _release_imported)


def from_dlpack(obj):
    """A tensor over the memory of any DLPack producer (an object with
    __dlpack__, e.g. a numpy array or torch tensor, or a raw capsule), no copy.
    The producer's memory stays alive until the last tfcore tensor over it
    is released. CPU memory only."""
    if isinstance(obj, np.ndarray) and not obj.flags.writeable:
        # numpy 1.24 refuses to export read-only arrays (np.from_dlpack makes
        # exactly those); wrapping the array is just as zero-copy.
        return from_numpy(obj)
    if hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__dlpack_device__"):
            dev = obj.__dlpack_device__()
            if int(dev[0]) not in (kDLCPU, kDLCUDAHost):
                raise BufferError("tfcore.from_dlpack: only CPU memory can be imported (device %s)" % (dev,))
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # producers of the 2021 protocol (numpy 1.24, torch 1.13)
            capsule = obj.__dlpack__()
    else:
        capsule = obj
    if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        versioned, name, used = True, b"dltensor_versioned", _NAME_USED_VERSIONED
    elif _api.PyCapsule_IsValid(capsule, b"dltensor"):
        versioned, name, used = False, b"dltensor", _NAME_USED
    else:
        raise ValueError("tfcore.from_dlpack: expected a 'dltensor' capsule (DLPack capsules can be "
                         "consumed only once)")
    ptr = _api.PyCapsule_GetPointer(capsule, name)
    managed = ffi.cast("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *", ptr)
    if versioned and managed.version.major != 1:
        raise BufferError("tfcore.from_dlpack: DLPack major version %d is not supported (1 is)"
                          % managed.version.major)
    dl = managed.dl_tensor
    if dl.device.device_type not in (kDLCPU, kDLCUDAHost):
        raise BufferError("tfcore.from_dlpack: only CPU memory can be imported (device type %d)"
                          % dl.device.device_type)
    key_dt = (dl.dtype.code, dl.dtype.bits)
    if dl.dtype.lanes != 1 or key_dt not in _FROM_DL:
        raise TypeError("tfcore.from_dlpack: DLPack dtype (code %d, bits %d, lanes %d) has no tfcore "
                        "equivalent" % (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes))
    dt = _FROM_DL[key_dt]
    ndim = dl.ndim
    shape = [dl.shape[i] for i in range(ndim)]
    strides = None if dl.strides == ffi.NULL else [dl.strides[i] for i in range(ndim)]
    data = ffi.cast("char *", dl.data) + dl.byte_offset if dl.data != ffi.NULL else ffi.NULL
    key = next(_import_ids)
    _imported[key] = managed
    out = ffi.new("tfc_tensor **")
    status = lib.tfc_tensor_wrap(data, _i64(shape), ffi.NULL if strides is None else _i64(strides), ndim,
                                 dt.code, _release_imported_cb, ffi.cast("void *", key), out)
    if status != 0:
        del _imported[key]  # not consumed: the capsule's destructor still frees it
        check(status)
    _api.PyCapsule_SetName(capsule, ctypes.addressof(used))
    return _wrap(out[0])


__all__ = ["from_dlpack", "Tensor"]
