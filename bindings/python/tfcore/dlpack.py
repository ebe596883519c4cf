"""DLPack: Tensor.__dlpack__ / __dlpack_device__ and tfcore.from_dlpack.

The library does the DLPack work (include/tfcore/dlpack.h): it exports a
tensor as a legacy DLManagedTensor (what numpy 1.24 and torch 1.13 read) or,
when the consumer asks with max_version >= (1, 0), a DLManagedTensorVersioned
— data at the first element, byte_offset 0, strides always filled — and
imports either kind, honouring byte_offset and NULL strides. Its deleters are
native code, callable from any thread. Neither direction copies.

What is left here is Python's capsule protocol, through Python's C API via
ctypes.pythonapi (which holds the GIL, unlike cffi's ABI calls): the capsule
is named "dltensor" / "dltensor_versioned" and a consumer renames it
"used_dltensor[_versioned]". The capsule destructor, which frees a tensor no
consumer took, is a cffi callback (a native trampoline) that receives the
dying capsule as a raw address, never as a Python object: re-referencing an
object under destruction is what makes a py_object-typed ctypes destructor
crash.
"""
import ctypes

import numpy as np

from ._lib import check, ffi, lib
from .tensor import _wrap, from_numpy

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3

# Capsule names must outlive every capsule: module-level buffers, never freed.
_NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
_NAME_USED = ctypes.create_string_buffer(b"used_dltensor")
_NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")

_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object,
                                     ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(("PyCapsule_SetName", _api))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
# The destructor's view: the capsule as a bare address.
_raw_name = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetName", _api))
_raw_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetPointer", _api))


def _addr(x):
    return int(ffi.cast("uintptr_t", x))


def _capsule_destructor(capsule):
    """Free a capsule's tensor unless a consumer took it (and renamed the capsule)."""
    try:
        cap = _addr(capsule)
        name = _raw_name(cap)
        if name == ctypes.addressof(_NAME_LEGACY):
            managed = ffi.cast("DLManagedTensor *", _raw_pointer(cap, name))
        elif name == ctypes.addressof(_NAME_VERSIONED):
            managed = ffi.cast("DLManagedTensorVersioned *", _raw_pointer(cap, name))
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
    """The DLPack capsule of t (no copy). stream is accepted for the protocol
    and not needed: tfcore finishes its work before an op returns."""
    if copy:
        raise BufferError("tfcore: __dlpack__(copy=True) is not supported; export t.clone()")
    if dl_device is not None and tuple(dl_device) != device_of(t):
        raise BufferError("tfcore: __dlpack__: cannot export a %s tensor to device %s" % (t.device, dl_device))
    if max_version is not None and tuple(max_version)[0] >= 1:
        out = ffi.new("DLManagedTensorVersioned **")
        check(lib.tfc_tensor_to_dlpack_versioned(t._h, out))
        name = _NAME_VERSIONED
    else:
        out = ffi.new("DLManagedTensor **")
        check(lib.tfc_tensor_to_dlpack(t._h, out))
        name = _NAME_LEGACY
    try:
        return _capsule_new(_addr(out[0]), ctypes.addressof(name), _addr(_capsule_destructor_cb))
    except BaseException:
        out[0].deleter(out[0])
        raise


def from_dlpack(obj):
    """A tensor over the memory of any DLPack producer (an object with
    __dlpack__, e.g. a numpy array or torch tensor, or a raw capsule), no
    copy. The producer's memory stays alive until the last tfcore tensor
    over it is released. CPU memory only."""
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
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = ffi.cast("DLManagedTensorVersioned *", _capsule_pointer(capsule, b"dltensor_versioned"))
        fn, used = lib.tfc_tensor_from_dlpack_versioned, _NAME_USED_VERSIONED
    elif _capsule_is_valid(capsule, b"dltensor"):
        managed = ffi.cast("DLManagedTensor *", _capsule_pointer(capsule, b"dltensor"))
        fn, used = lib.tfc_tensor_from_dlpack, _NAME_USED
    elif type(capsule).__name__ != "PyCapsule":
        raise TypeError("tfcore.from_dlpack: expected an object with __dlpack__ or a 'dltensor' capsule, got %s"
                        % type(capsule).__name__)
    else:
        name = _capsule_name(capsule)
        if name in (b"used_dltensor", b"used_dltensor_versioned"):
            raise ValueError("tfcore.from_dlpack: this capsule was consumed already (DLPack capsules can be "
                             "consumed only once)")
        raise ValueError("tfcore.from_dlpack: expected a 'dltensor' capsule, got one named %r" % name)
    out = ffi.new("tfc_tensor **")
    check(fn(managed, out))  # on error the capsule still owns the tensor
    _capsule_set_name(capsule, ctypes.addressof(used))
    return _wrap(out[0])
