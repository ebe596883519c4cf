"""DLPack both ways with numpy 1.24 and torch 1.13: no copies (pointer
equality), views with offsets and strides, lifetimes, capsule rules."""
import ctypes
import gc
import threading
import weakref

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import tfcore

BIG = 1 << 18  # elements: big enough that live bytes show whether it was freed


def capsule_name(cap):
    f = ctypes.pythonapi.PyCapsule_GetName
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return f(cap)


def live_bytes():
    gc.collect()
    out = tfcore.ffi.new("uint64_t *")
    tfcore.lib.tfc_memory_stats(tfcore.ffi.NULL, out, tfcore.ffi.NULL, tfcore.ffi.NULL)
    return out[0]


def test_device():
    assert tfcore.zeros(2).__dlpack_device__() == (1, 0)


def test_export_to_numpy_no_copy():
    t = tfcore.arange(12, dtype="float64").reshape(3, 4)
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr() and a.tolist() == t.tolist()
    v = t[1:, ::2]  # offset and strides
    b = np.from_dlpack(v)
    assert b.ctypes.data == v.data_ptr() and b.strides == (32, 16)
    assert b.tolist() == [[4, 6], [8, 10]]
    t[1, 0] = -1.0
    assert a[1, 0] == -1.0 and b[0, 0] == -1.0


def test_export_to_torch_no_copy_and_lifetime():
    before = live_bytes()
    t = tfcore.arange(BIG, dtype="float32")
    v = t[2::3]  # data pointer past the storage start: byte_offset must be 0
    tt = torch.utils.dlpack.from_dlpack(v)
    assert tt.data_ptr() == v.data_ptr() and tt[:2].tolist() == [2, 5]
    assert tt.stride() == (3,)
    tt[0] = 100  # torch's result is writable and shares memory
    assert t[2].item() == 100
    del t, v
    assert live_bytes() >= before + 4 * BIG  # the export keeps the memory alive
    assert tt[:2].tolist() == [100, 5]
    del tt
    assert live_bytes() == before  # torch called the deleter


def test_export_transposed_to_torch():
    t = tfcore.tensor(np.arange(6.0).reshape(2, 3))
    tt = torch.from_dlpack(t.T)
    assert tt.stride() == (1, 3) and tt.data_ptr() == t.data_ptr()
    assert tt.tolist() == np.arange(6.0).reshape(2, 3).T.tolist()


def test_import_from_numpy_and_torch_no_copy():
    a = np.arange(10.0)
    t = tfcore.from_dlpack(a[1::2])
    assert t.data_ptr() == a.ctypes.data + 8 and t.tolist() == [1, 3, 5, 7, 9] and t.stride() == (2,)
    x = torch.arange(12.0).reshape(3, 4)
    u = tfcore.from_dlpack(x[1:, 1:].T)
    assert u.data_ptr() == x[1:, 1:].data_ptr() and u.tolist() == x[1:, 1:].T.tolist()
    x[2, 3] = -5
    assert u[2, 1].item() == -5
    del x, a
    gc.collect()
    assert u.tolist()[2][1] == -5  # the producer's memory is still alive


def test_import_hands_memory_back_to_the_producer():
    class Arr(np.ndarray):  # a weak-referenceable array
        pass
    a = np.arange(6.0).view(Arr)
    ref = weakref.ref(a)
    t = tfcore.from_dlpack(a)
    del a
    gc.collect()
    assert ref() is not None and t.tolist() == [0, 1, 2, 3, 4, 5]
    view = t[1:]
    del t
    gc.collect()
    assert ref() is not None  # views keep it too
    del view
    gc.collect()
    assert ref() is None  # numpy's deleter ran


def test_round_trips_keep_the_pointer():
    t = tfcore.randn(3, 5, dtype="float64")
    back = tfcore.from_dlpack(torch.utils.dlpack.from_dlpack(t))
    assert back.data_ptr() == t.data_ptr()
    back2 = tfcore.from_dlpack(np.from_dlpack(t))
    assert back2.data_ptr() == t.data_ptr()
    x = torch.randn(4, 2)
    assert torch.utils.dlpack.from_dlpack(tfcore.from_dlpack(x)).data_ptr() == x.data_ptr()


def test_raw_capsules_and_single_consumption():
    x = torch.arange(4.0)
    cap = torch.utils.dlpack.to_dlpack(x)
    t = tfcore.from_dlpack(cap)
    assert t.tolist() == [0, 1, 2, 3] and capsule_name(cap) == b"used_dltensor"
    with pytest.raises(ValueError, match="consumed only once"):
        tfcore.from_dlpack(cap)
    mine = tfcore.zeros(3).__dlpack__()
    assert capsule_name(mine) == b"dltensor"
    assert torch.utils.dlpack.from_dlpack(mine).tolist() == [0, 0, 0]


def test_unconsumed_capsule_is_freed():
    before = live_bytes()
    cap = tfcore.ones(BIG).__dlpack__()
    assert live_bytes() >= before + 4 * BIG
    del cap
    assert live_bytes() == before


def test_versioned_capsule_when_asked():
    before = live_bytes()
    t = tfcore.arange(6, dtype="float64").reshape(2, 3)
    cap = t.__dlpack__(max_version=(1, 0))
    assert capsule_name(cap) == b"dltensor_versioned"
    u = tfcore.from_dlpack(cap)
    assert capsule_name(cap) == b"used_dltensor_versioned"
    assert u.data_ptr() == t.data_ptr() and u.tolist() == t.tolist()
    del cap, u, t
    assert live_bytes() == before
    assert capsule_name(tfcore.zeros(1).__dlpack__(max_version=(0, 8))) == b"dltensor"


def test_dtypes_across():
    for dt, tdt in ((tfcore.float16, torch.float16), (tfcore.int32, torch.int32), (tfcore.int64, torch.int64),
                    (tfcore.uint8, torch.uint8), (tfcore.bfloat16, torch.bfloat16)):
        t = tfcore.tensor([1, 2, 3], dtype=dt)
        tt = torch.utils.dlpack.from_dlpack(t)
        assert tt.dtype == tdt and tt.tolist() == [1, 2, 3] and tt.data_ptr() == t.data_ptr()
        back = tfcore.from_dlpack(tt)
        assert back.dtype is dt and back.data_ptr() == t.data_ptr()


def test_consumer_releases_on_another_thread():
    before = live_bytes()
    tt = torch.utils.dlpack.from_dlpack(tfcore.ones(BIG))
    box = [tt]
    del tt
    th = threading.Thread(target=box.clear)
    th.start()
    th.join()
    assert live_bytes() == before


def test_copy_and_device_requests():
    t = tfcore.zeros(2)
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
