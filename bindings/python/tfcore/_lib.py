"""Loading libtfcore and turning its status codes into Python exceptions.

cffi ABI mode: the declarations come from _cdef.h (generated from the public
headers by gen_cdef.py), the library is opened with ffi.dlopen. Nothing here
is compiled, so the package is pure Python.
"""
import os
import subprocess

import cffi

ffi = cffi.FFI()
_HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(_HERE, "_cdef.h"), encoding="utf-8") as _f:
    ffi.cdef(_f.read())

SONAME = "libtfcore.so.1"


def _candidates():
    """Where libtfcore.so.1 may be, most explicit first."""
    env = os.environ.get("TFCORE_LIBRARY")
    if env:
        yield env
        return  # an explicit choice is never silently replaced by another library
    yield os.path.join(_HERE, SONAME)                                        # shipped next to the package
    yield os.path.join(_HERE, "..", "..", "..", "build", "lib", SONAME)      # meson build dir of a checkout
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "tfcore"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        if libdir:
            yield os.path.join(libdir, SONAME)
    except (OSError, subprocess.SubprocessError):
        pass
    yield SONAME                                                             # the dynamic loader's search path


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ffi.dlopen(os.path.normpath(path) if os.sep in path else path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    if os.environ.get("TFCORE_LIBRARY"):
        raise ImportError("tfcore: cannot load libtfcore from TFCORE_LIBRARY=%s (%s); point TFCORE_LIBRARY "
                          "at libtfcore.so.1, or unset it to search through pkg-config (tfcore.pc) and the "
                          "dynamic loader" % (os.environ["TFCORE_LIBRARY"], "; ".join(tried)))
    raise ImportError("tfcore: cannot find %s: set TFCORE_LIBRARY to its path, or install libtfcore (the "
                      "libtfcore1 package, or meson install) so that `pkg-config --variable=libdir tfcore` "
                      "or the dynamic loader finds it. Tried: %s" % (SONAME, "; ".join(tried)))


lib, library_path = _load()


class Error(Exception):
    """Base of every error libtfcore reports. .status is the tfc_status code,
    .status_name its name (e.g. "TFC_ERR_SHAPE"); str() is tfc_last_error()."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status
        self.status_name = ffi.string(lib.tfc_status_name(status)).decode() if status is not None else None


class ShapeError(Error, ValueError):
    pass


class InvalidArgumentError(Error, ValueError):
    pass


class DtypeError(Error, TypeError):
    pass


class OutOfMemoryError(Error, MemoryError):
    pass


class TfcIOError(Error, OSError):
    pass


class TfcRuntimeError(Error, RuntimeError):
    pass


class GraphError(InvalidArgumentError, RuntimeError):
    """A backward through nodes whose saved tensors a backward without
    retain_graph freed, a tensor saved for backward and modified in place
    since, or an anomaly found by detect_anomaly(): a RuntimeError as in
    PyTorch (and a ValueError, as before)."""


class ReadOnlyError(InvalidArgumentError, RuntimeError):
    """A write into a tensor over read-only memory (a non-writable numpy array
    or memmap, a read-only DLPack import, or a view of one): a RuntimeError,
    as torch raises for writes it refuses, and a ValueError like every
    InvalidArgumentError."""


class UnsupportedDtypeError(DtypeError, RuntimeError):
    """A dtype an op does not take where PyTorch raises RuntimeError (the mean
    or variance of an integer tensor, argmax of bool): a RuntimeError as in
    PyTorch, and a TypeError like every DtypeError."""


# Messages of TFC_ERR_DTYPE for which torch raises RuntimeError (lib/ops/reduce.c).
_TORCH_RUNTIME_DTYPE = ("mean cannot infer an output dtype", "var only supports floating point",
                        "do not take bool (as in torch)")

_BY_STATUS = {
    lib.TFC_ERR_INVALID_ARG: InvalidArgumentError,
    lib.TFC_ERR_SHAPE: ShapeError,
    lib.TFC_ERR_DTYPE: DtypeError,
    lib.TFC_ERR_OOM: OutOfMemoryError,
    lib.TFC_ERR_IO: TfcIOError,
}


def error_for(status):
    """The exception for a failed call, carrying this thread's tfc_last_error()."""
    msg = ffi.string(lib.tfc_last_error()).decode("utf-8", "replace")
    if not msg:
        msg = ffi.string(lib.tfc_status_name(status)).decode()
    if status == lib.TFC_ERR_INVALID_ARG and ("anomaly detected" in msg or "without retain_graph=True" in msg
                                              or "was modified in place" in msg):
        return GraphError(msg, status)
    if status == lib.TFC_ERR_INVALID_ARG and "is read-only (it wraps memory its owner marked read-only)" in msg:
        return ReadOnlyError(msg, status)
    if status == lib.TFC_ERR_DTYPE and any(m in msg for m in _TORCH_RUNTIME_DTYPE):
        return UnsupportedDtypeError(msg, status)
    return _BY_STATUS.get(status, TfcRuntimeError)(msg, status)


def check(status):
    """Raise the matching exception when status is not TFC_OK."""
    if status != 0:
        raise error_for(status)
