"""The Pythonic layer: creation, numpy views and lifetimes, indexing,
autograd bookkeeping (grad mode, retain_graph, per-thread graphs), errors."""
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import tfcore


def test_tensor_copies_with_pytorch_default_dtypes():
    assert tfcore.tensor([1.0, 2.0]).dtype is tfcore.float32
    assert tfcore.tensor([1, 2]).dtype is tfcore.int64
    assert tfcore.tensor([True, False]).dtype is tfcore.bool
    assert tfcore.tensor(np.zeros(3)).dtype is tfcore.float64
    assert tfcore.tensor(np.zeros(3, np.int32)).dtype is tfcore.int32
    assert tfcore.tensor(3.5, dtype="float64").shape == ()
    a = np.arange(6.0).reshape(2, 3)
    t = tfcore.tensor(a)
    a[0, 0] = 100
    assert t[0, 0].item() == 0.0  # a copy
    assert tfcore.tensor(a.T).numpy().tolist() == a.T.tolist()  # strided input
    b = tfcore.tensor([[1.5, 2.5]], dtype=tfcore.bfloat16)
    assert b.dtype is tfcore.bfloat16 and b.numpy().dtype == np.float32
    assert b.tolist() == [[1.5, 2.5]]


def test_creation_functions():
    assert tfcore.zeros(2, 3).numpy().tolist() == [[0, 0, 0]] * 2
    assert tfcore.ones((2,), dtype=tfcore.int32).tolist() == [1, 1]
    assert tfcore.full((2, 2), 7, dtype="float64").sum().item() == 28
    assert tfcore.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert tfcore.arange(0, 1, 0.25).dtype is tfcore.float32
    tfcore.manual_seed(3)
    a = tfcore.randn(1000, dtype="float64").numpy()
    assert abs(a.mean()) < 0.15 and abs(a.std() - 1) < 0.1
    b = tfcore.randn(1000, dtype="float64").numpy()
    assert not np.array_equal(a, b)  # the stream advances
    tfcore.manual_seed(3)
    assert np.array_equal(tfcore.randn(1000, dtype="float64").numpy(), a)  # and is reproducible
    u = tfcore.rand(500).numpy()
    assert u.min() >= 0 and u.max() < 1


def test_numpy_is_a_view_that_keeps_the_tensor_alive():
    t = tfcore.zeros(3, 4, dtype="float64")
    a = t.numpy()
    assert a.ctypes.data == t.data_ptr()
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    v = t[:, 1::2].numpy()  # strided view, no copy
    assert v.strides == (32, 16) and v.ctypes.data == t.data_ptr() + 8
    e = t[0:1].expand(5, 4).numpy()
    assert e.strides == (0, 8)
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is not None  # the array's base holds it
    del a, v, e
    gc.collect()
    assert ref() is None


def test_from_numpy_is_zero_copy_and_keeps_the_array_alive():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tfcore.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data
    t[0, 0] = 42
    assert a[0, 0] == 42
    ts = tfcore.from_numpy(a[:, ::2])
    assert ts.stride() == (4, 2) and ts.tolist() == a[:, ::2].tolist()
    registry = sys.modules["tfcore.tensor"]._live_arrays
    live = len(registry)
    view = t[1:]
    del a, t, ts
    gc.collect()
    assert view.tolist()[0] == [4, 5, 6, 7]  # memory still valid through the view
    del view
    gc.collect()
    assert len(registry) == live - 2  # both wrapped arrays were handed back
    with pytest.raises(ValueError, match="negative strides"):
        tfcore.from_numpy(np.arange(4.0)[::-1])
    with pytest.raises(TypeError):
        tfcore.from_numpy(np.zeros(3, np.complex64))
    assert len(registry) == live - 2  # failures register nothing


def test_indexing_matches_numpy():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    t = tfcore.tensor(a)
    for idx in [1, -1, (0, 2), (slice(None), 1), (Ellipsis, 2), (None, 0, Ellipsis, None),
                (slice(1, None), slice(None, None, 2), slice(-3, -1)), (0, Ellipsis, slice(0, 5, 3)),
                (slice(5, 2),), (1, None, slice(1, 3), 0, 4), np.int64(1)]:
        got = t[idx]
        assert got.shape == a[idx].shape, idx
        np.testing.assert_array_equal(got.numpy(), a[idx])
        assert got.numel() == 0 or got.data_ptr() == t.data_ptr() + 8 * (a[idx].ctypes.data - a.ctypes.data) // 8
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        t[::-1]
    np.testing.assert_array_equal(t[[1, 0]].numpy(), a[[1, 0]])  # advanced indexing: tests/python/test_indexing.py
    with pytest.raises(IndexError):
        t[[0, 2]]


def test_setitem_writes_through():
    t = tfcore.zeros(3, 4)
    t[1] = 2.0
    t[:, 3] = tfcore.tensor([7.0, 8.0, 9.0])
    t[0, :2] = [1.0, -1.0]
    assert t.tolist() == [[1, -1, 0, 7], [2, 2, 2, 8], [0, 0, 0, 9]]


def test_operators_with_scalars_and_numpy():
    x = tfcore.tensor([1.0, 2.0, 4.0], dtype="float64")
    assert (x + 1).tolist() == [2, 3, 5]
    assert (1 - x).tolist() == [0, -1, -3]
    assert (2 * x).tolist() == [2, 4, 8]
    assert (x / 2).tolist() == [0.5, 1, 2]
    assert (4 / x).tolist() == [4, 2, 1]
    assert (x ** 2).tolist() == [1, 4, 16]
    assert (-x).tolist() == [-1, -2, -4]
    assert (np.array([1.0, 1.0, 1.0]) + x).tolist() == [2, 3, 5]
    assert (x @ x).item() == 21
    assert float(x.sum()) == 7.0 and int(x.max()) == 4
    vals, idx = tfcore.tensor([[1.0, 5.0], [7.0, 2.0]]).max(1)
    assert vals.tolist() == [5, 7] and idx.tolist() == [1, 0]


def test_requires_grad_grad_and_detach():
    x = tfcore.tensor([1.0, 2.0], requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    y = (x * x).sum()
    assert y.requires_grad and not y.is_leaf
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]
    (x * 3).sum().backward()  # accumulates
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    assert x.grad is None
    d = x.detach()
    assert not d.requires_grad and d.data_ptr() == x.data_ptr()
    with pytest.raises(ValueError):
        y.requires_grad = False  # not a leaf
    x.requires_grad = False
    assert not (x * 2).requires_grad


def test_no_grad_records_nothing():
    x = tfcore.tensor([1.0, 2.0], requires_grad=True)
    tfcore.autograd.clear_graph()
    with tfcore.no_grad():
        y = x * 2
        assert not tfcore.is_grad_enabled()
        with tfcore.enable_grad():
            z = x * 2
    assert tfcore.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad

    @tfcore.no_grad()
    def f():
        return x * 3
    assert not f().requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_backward_clears_graph_unless_retained():
    x = tfcore.tensor([1.0, 2.0, 3.0], dtype="float64", requires_grad=True)
    tfcore.autograd.clear_graph()
    loss = (x.exp() * x).sum()
    assert tfcore.autograd.num_nodes() > 0
    loss.backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1)
    # the nodes that saved tensors are freed and gone; only sum's (it saved nothing, loss holds it) is left
    assert tfcore.autograd.num_nodes() <= 1
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()  # its nodes were freed


def test_backward_with_explicit_seed():
    x = tfcore.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    with pytest.raises(ValueError):
        y.backward(retain_graph=True)  # non-scalar without a seed
    y.backward([1.0, 0.5], retain_graph=True)
    assert x.grad.tolist() == [2.0, 2.0]
    y.backward(grad=tfcore.tensor([1.0, 1.0]))
    assert x.grad.tolist() == [4.0, 6.0]


def test_each_thread_has_its_own_graph():
    results = {}

    def work(i):
        x = tfcore.tensor([float(i)], dtype="float64", requires_grad=True)
        for _ in range(50):
            loss = (x * x * 3.0).sum()
            loss.backward()
        results[i] = x.grad.item()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {i: 50 * 6.0 * i for i in range(1, 5)}


def test_errors_map_to_python_exceptions_with_the_library_message():
    a = tfcore.zeros(4, 8)
    b = tfcore.zeros(7, 3)
    with pytest.raises(ValueError, match=r"tfc_matmul: .*\[4,8\].*\[7,3\]") as e:
        a @ b
    assert isinstance(e.value, tfcore.ShapeError) and e.value.status_name == "TFC_ERR_SHAPE"
    with pytest.raises(TypeError, match="dtype"):
        a + tfcore.zeros(4, 8, dtype="float64")
    with pytest.raises(ValueError, match="cannot be viewed"):
        a.T.view(32)
    with pytest.raises(MemoryError):
        tfcore.empty(2**40, 2**20)
    with pytest.raises(tfcore.Error):
        tfcore.zeros(3).reshape(4)
    with pytest.raises(TypeError):
        tfcore.Tensor()


def test_misc_methods():
    x = tfcore.arange(24, dtype="float64").reshape(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size(1) == 3 and x.stride() == (12, 4, 1)
    assert x.ndim == 3 and x.dim() == 3 and x.numel() == 24 and len(x) == 2
    assert x.permute(2, 0, 1).shape == (4, 2, 3) and not x.permute(2, 0, 1).is_contiguous()
    assert x.transpose(0, 2).contiguous().is_contiguous()
    assert x.unsqueeze(0).shape == (1, 2, 3, 4) and x[None].squeeze(0).shape == (2, 3, 4)
    assert x.squeeze(1).shape == (2, 3, 4)  # size 3: unchanged, like torch
    assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12)
    assert x.to(tfcore.float32).dtype is tfcore.float32 and x.long().dtype is tfcore.int64
    assert x.to("cpu") is x and x.device == "cpu"
    assert [p.shape for p in x.split(1, 2)] == [(2, 3, 1)] * 4
    assert [p.shape for p in x.chunk(2, 2)] == [(2, 3, 2)] * 2
    assert tfcore.topk(x[0, 0], 2).values.tolist() == [3, 2]
    assert x.argmax().item() == 23 and x.argmin(2).tolist() == [[0, 0, 0]] * 2
    assert "tensor(" in repr(x) and "float64" in repr(x)
    assert "f64" in x.describe()
    assert [r.shape for r in x] == [(3, 4), (3, 4)]
    assert tfcore.where(tfcore.tensor([True, False]), 1.0, tfcore.tensor([5.0, 6.0])).tolist() == [1, 6]
    assert tfcore.tensor([1.0, 2.0]).masked_fill(tfcore.tensor([False, True]), 0.0).tolist() == [1, 0]
    d = tfcore.dropout(tfcore.ones(1000, dtype="float64"), p=0.25).numpy()
    assert set(np.unique(d)) <= {0.0, 1 / 0.75} and 0.15 < (d == 0).mean() < 0.35
    assert tfcore.dropout(x, 0.5, training=False) is x
    y = tfcore.zeros(3).fill_(2.0)
    assert y.tolist() == [2, 2, 2] and y.zero_().tolist() == [0, 0, 0]


def test_version_and_build_info():
    assert tfcore.version() == tfcore.__version__ and tfcore.version().count(".") == 2
    assert isinstance(tfcore.build_info(), str) and tfcore.build_info()
    assert tfcore.get_num_threads() >= 1


def test_cuda_round_trip_or_clear_error():
    x = tfcore.arange(6, dtype="float32").reshape(2, 3)
    if not tfcore.cuda_is_available():
        with pytest.raises(tfcore.Error):
            x.cuda()
        return
    y = x.cuda()
    assert y.device == "cuda:0" and y.__dlpack_device__() == (2, 0)
    with pytest.raises(TypeError, match="cpu"):
        y.numpy()
    assert y.cpu().tolist() == x.tolist()


def _survives(code):
    """Run code in a fresh interpreter (a crash there must not take the test run down); return its result."""
    import os
    import subprocess
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_overflowing_shapes_raise_instead_of_crashing():
    """Issue #21's reproducers: shapes whose element count or range wraps in 64 bits."""
    r = _survives(
        "import tfcore\n"
        "try:\n"
        "    tfcore.ones(2).reshape(3, 6148914691236517206)[:, :100000000].contiguous()\n"
        "except tfcore.ShapeError as e:\n"
        "    print('ShapeError:', e)\n")
    assert r.returncode == 0, "the interpreter died (%d): %s" % (r.returncode, r.stderr[-2000:])
    assert "ShapeError: tfc_reshape: cannot view x [2] as [3,6148914691236517206]" in r.stdout, r.stdout + r.stderr
    with pytest.raises(tfcore.ShapeError):
        tfcore.ones(1).expand(2 ** 40, 2 ** 40, 2 ** 40)
    x = tfcore.arange(6.0)
    assert x[2:6:2 ** 63 - 2].tolist() == [2.0]  # torch gives one element too
