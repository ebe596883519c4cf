"""Indexing against PyTorch 1.13 in f64: x[index] values and gradients for
every pattern (basic indices are views that share memory, advanced ones
copies), x[index] = v, the index ops (index_select, gather, scatter_add,
index_put_), and bad indices: IndexError / TypeError / ValueError as torch
raises them, never a crash (risky cases run in a fresh interpreter)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tfcore as tc

A = np.random.default_rng(0).standard_normal((4, 5, 6))
MASK3 = A > 0.3
MASK2 = A[:, :, 0] > 0
MASK1 = np.array([True, False, True, True, False])
I = np.array([3, 0, 3, -1])

# (name, index expression over numpy arrays); the same expression indexes torch and tfcore
PATTERNS = [
    ("int", lambda: (1,)),
    ("neg_int", lambda: (-1,)),
    ("int_int", lambda: (2, -3)),
    ("slice", lambda: (slice(1, 3),)),
    ("slice_step", lambda: (slice(None), slice(0, 5, 2))),
    ("slice_neg_bounds", lambda: (slice(-3, None), slice(None, -1))),
    ("slice_past_end", lambda: (slice(2, 100),)),
    ("empty_slice", lambda: (slice(3, 1),)),
    ("none", lambda: (None, 0)),
    ("ellipsis", lambda: (Ellipsis, 1)),
    ("ellipsis_none", lambda: (0, Ellipsis, None)),
    ("mixed_basic", lambda: (slice(None, None, 3), -2, slice(1, None, 2))),
    ("list", lambda: ([2, 0, 2],)),
    ("list_neg", lambda: ([-1, 0],)),
    ("tensor_dim1", lambda: (slice(None), I)),
    ("tensor_last", lambda: (Ellipsis, np.array([5, 0, 1]))),
    ("tensor_2d", lambda: (np.array([[0, 1], [3, 3]]),)),
    ("two_adjacent", lambda: (slice(None), np.array([0, 4]), np.array([1, 5]))),
    ("two_broadcast", lambda: (np.array([[0], [3]]), np.array([1, 2, 4]))),
    ("two_apart", lambda: (np.array([0, 3]), slice(None), np.array([1, 5]))),
    ("int_then_adv", lambda: (0, slice(None), np.array([1, 2]))),
    ("adv_then_int", lambda: (np.array([1, 0]), 2)),
    ("slice_and_adv", lambda: (slice(1, 3), np.array([4, 0]), slice(None, None, 2))),
    ("none_between", lambda: (np.array([0, 1]), None, np.array([2, 3]))),
    ("mask_full", lambda: (MASK3,)),
    ("mask_lead", lambda: (MASK2,)),
    ("mask_mid", lambda: (slice(None), MASK1)),
    ("bool_list", lambda: ([True, False, False, True],)),
    ("empty_list", lambda: ([],)),
    ("int_and_mask", lambda: (1, A[0] > 0)),
]


def _torch_index(idx):
    return tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)


def _tc_index(idx):
    return tuple(tc.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)


@pytest.mark.parametrize("name,make", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_getitem_values_and_gradients_match_torch(name, make):
    idx = make()
    xt = torch.tensor(A, requires_grad=True)
    yt = xt[_torch_index(idx)]
    w = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    (yt * torch.tensor(w)).sum().backward()

    x = tc.tensor(A, requires_grad=True)
    y = x[_tc_index(idx)]
    assert tuple(y.shape) == tuple(yt.shape)
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    (y * tc.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=0, atol=1e-15)


BASIC = [p for p in PATTERNS if p[0] in ("int", "int_int", "slice", "slice_step", "none", "ellipsis",
                                         "mixed_basic", "slice_neg_bounds")]


@pytest.mark.parametrize("name,make", BASIC, ids=[p[0] for p in BASIC])
def test_basic_indexing_is_a_view_sharing_memory(name, make):
    x = tc.tensor(A)
    y = x[make()]
    y.fill_(7.0)
    ref = A.copy()
    ref[make()] = 7.0
    np.testing.assert_array_equal(x.numpy(), ref)


def test_advanced_indexing_is_a_copy():
    x = tc.tensor(A)
    y = x[[0, 1]]
    y.fill_(0.0)
    np.testing.assert_array_equal(x.numpy(), A)


SET_PATTERNS = [
    ("int", lambda: (1,), 2.5),
    ("slice_step_tensor", lambda: (slice(None), slice(0, 5, 2)), np.arange(6.0)),
    ("list", lambda: ([3, 0],), -1.0),
    ("list_repeat_accum_free", lambda: ([1, 2],), np.arange(30.0).reshape(5, 6)),
    ("tensor_dim1", lambda: (slice(None), np.array([4, 0, -2])), np.arange(6.0)),
    ("two_broadcast", lambda: (np.array([[0], [3]]), np.array([1, 2, 4])), np.arange(6.0)),
    ("two_apart", lambda: (np.array([0, 3]), slice(None), np.array([1, 5])), np.arange(5.0)),
    ("int_then_adv", lambda: (0, slice(None), np.array([1, 2])), np.array([[1.0], [2.0], [3.0], [4.0], [5.0]])),
    ("mask_full", lambda: (MASK3,), 0.0),
    ("mask_lead", lambda: (MASK2,), np.arange(6.0)),
    ("mask_mid", lambda: (slice(None), MASK1), -3.0),
    ("ellipsis", lambda: (Ellipsis, 0), 9.0),
]


@pytest.mark.parametrize("name,make,value", SET_PATTERNS, ids=[p[0] for p in SET_PATTERNS])
def test_setitem_matches_torch_in_place(name, make, value):
    xt = torch.tensor(A)
    base_t = xt
    xt[_torch_index(make())] = value if np.isscalar(value) else torch.tensor(value)
    x = tc.tensor(A)
    ptr, ver = x.data_ptr(), tc.lib.tfc_tensor_version(x._h)
    x[_tc_index(make())] = value if np.isscalar(value) else tc.tensor(value)
    assert x.data_ptr() == ptr
    np.testing.assert_array_equal(x.numpy(), base_t.numpy())
    assert tc.lib.tfc_tensor_version(x._h) > ver


def test_setitem_through_a_transposed_view_writes_the_base():
    x = tc.tensor(A)
    v = x.transpose(0, 2)  # [6, 5, 4], strided
    v[[1, 3], 2] = tc.tensor([10.0, 20.0, 30.0, 40.0])
    ref = A.copy()
    ref.transpose(2, 1, 0)[[1, 3], 2] = [10.0, 20.0, 30.0, 40.0]
    np.testing.assert_array_equal(x.numpy(), ref)


def test_setitem_value_of_own_memory():
    x = tc.tensor(A[0])
    xt = torch.tensor(A[0])
    x[[0, 1]] = x[1:3]
    xt[[0, 1]] = xt[1:3].clone()
    np.testing.assert_array_equal(x.numpy(), xt.numpy())


def test_setitem_after_save_fails_backward_like_torch():
    x = tc.tensor(A[0, 0], requires_grad=True)
    y = x * 2.0
    z = y * y  # saves y
    y2 = y.detach()
    with tc.no_grad():
        y[[0]] = 5.0  # not a leaf: allowed under no_grad, bumps the version
    with pytest.raises(Exception, match="modified|version"):
        z.sum().backward()
    del y2


def test_setitem_on_leaf_requiring_grad_is_refused_outside_no_grad():
    x = tc.tensor(A[0, 0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 1.0
    with pytest.raises(RuntimeError, match="leaf"):
        x[[0, 1]] = 1.0
    with tc.no_grad():
        x[[0, 1]] = 1.0
        x[2] = 2.0
    np.testing.assert_array_equal(x.detach().numpy()[:3], [1.0, 1.0, 2.0])


def test_setitem_on_a_graph_tensor_is_not_silently_undifferentiated():
    x = tc.tensor(A[0, 0], requires_grad=True)
    y = x * 2.0
    with pytest.raises(NotImplementedError):
        y[[0]] = 0.0


def test_setitem_with_a_value_requiring_grad_is_refused_not_silently_detached():
    w = tc.tensor(A[0, 0, :2], requires_grad=True)
    out = tc.zeros(6, dtype=tc.float64)
    with pytest.raises(NotImplementedError):
        out[[0, 1]] = w * 2.0
    with pytest.raises(NotImplementedError):
        out[0:2] = w
    with tc.no_grad():
        out[[0, 1]] = w
    np.testing.assert_array_equal(out.numpy()[:2], A[0, 0, :2])


def test_index_put_accumulate_sums_repeats_like_torch():
    xt = torch.tensor(A[0])
    xt.index_put_((torch.tensor([1, 1, 0]), torch.tensor([2, 2, 5])), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
                  accumulate=True)
    x = tc.tensor(A[0])
    x.index_put_((tc.tensor([1, 1, 0]), tc.tensor([2, 2, 5])), tc.tensor([1.0, 2.0, 3.0]), accumulate=True)
    np.testing.assert_allclose(x.numpy(), xt.numpy(), rtol=0, atol=1e-15)


# ---- the index ops ----

def _grads(fn_t, fn_c, inputs):
    ts = [torch.tensor(a, requires_grad=True) if a.dtype == np.float64 else torch.tensor(a) for a in inputs]
    cs = [tc.tensor(a, requires_grad=True) if a.dtype == np.float64 else tc.tensor(a) for a in inputs]
    yt, yc = fn_t(*ts), fn_c(*cs)
    np.testing.assert_allclose(yc.detach().numpy(), yt.detach().numpy(), rtol=0, atol=1e-15)
    w = np.random.default_rng(2).standard_normal(tuple(yt.shape))
    (yt * torch.tensor(w)).sum().backward()
    (yc * tc.tensor(w)).sum().backward()
    for t, c in zip(ts, cs):
        if t.requires_grad:
            np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), rtol=0, atol=1e-14)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_matches_torch(dim):
    idx = np.array([1, 0, 1, 3])
    _grads(lambda x, i: torch.index_select(x, dim, i), lambda x, i: tc.index_select(x, dim, i), [A, idx])
    _grads(lambda x, i: x.index_select(dim, i), lambda x, i: x.index_select(dim, i), [A, idx])


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_matches_torch(dim):
    rng = np.random.default_rng(3)
    shape = [3, 4, 5]
    idx = rng.integers(0, A.shape[dim], size=shape)
    _grads(lambda x, i: torch.gather(x, dim, i), lambda x, i: tc.gather(x, dim, i), [A, idx])
    _grads(lambda x, i: x.gather(dim, i), lambda x, i: x.gather(dim, i), [A, idx])


@pytest.mark.parametrize("dim", [0, 2])
def test_scatter_add_matches_torch(dim):
    rng = np.random.default_rng(4)
    idx = rng.integers(0, A.shape[dim], size=[3, 4, 5])
    src = rng.standard_normal((3, 4, 5))  # torch 1.13 mis-shapes dsrc when index is smaller than src
    _grads(lambda x, i, s: torch.scatter_add(x, dim, i, s), lambda x, i, s: tc.scatter_add(x, dim, i, s),
           [A, idx, src])
    _grads(lambda x, i, s: x.scatter_add(dim, i, s), lambda x, i, s: x.scatter_add(dim, i, s), [A, idx, src])


def test_index_ops_take_int32_indices():
    x = tc.tensor(A)
    i32 = tc.tensor(np.array([2, 0], dtype=np.int32))
    np.testing.assert_array_equal(tc.index_select(x, 1, i32).numpy(), A[:, [2, 0]])


def test_nonzero_and_masked_select_match_torch():
    m = A[:, :, 1] > 0.2
    np.testing.assert_array_equal(tc.nonzero(tc.tensor(m)).numpy(), torch.nonzero(torch.tensor(m)).numpy())
    for a, b in zip(tc.tensor(m).nonzero(as_tuple=True), torch.tensor(m).nonzero(as_tuple=True)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    mask = A[0] > 0  # [5, 6], broadcast over A's first dim
    _grads(lambda x: torch.masked_select(x, torch.tensor(mask)), lambda x: tc.masked_select(x, tc.tensor(mask)),
           [A])
    _grads(lambda x: x.masked_select(torch.tensor(mask)), lambda x: x.masked_select(tc.tensor(mask)), [A])


# ---- bad indices ----

BAD = [
    ("int_out_of_range", "x[4]", IndexError, "out of bounds"),
    ("neg_int_out_of_range", "x[-5]", IndexError, "out of bounds"),
    ("list_out_of_range", "x[[0, 4]]", IndexError, "index 4 is out of bounds for dimension 0 with size 4"),
    ("tensor_neg_out_of_range", "x[:, tfcore.tensor([-6])]", IndexError, "out of bounds"),
    ("setitem_out_of_range", "x[[9]] = 1.0", IndexError, "out of bounds"),
    ("mask_wrong_shape", "x[tfcore.tensor(np.ones((3, 5), bool))]", IndexError, "shape of the mask"),
    ("too_many", "x[0, 0, 0, 0]", IndexError, "too many indices"),
    ("two_ellipses", "x[..., ...]", IndexError, "single ellipsis"),
    ("float_index", "x[1.5]", IndexError, "valid indices"),
    ("float_tensor_index", "x[tfcore.tensor([0.0])]", IndexError, "long, int, byte or bool"),
    ("string_index", "x['a']", IndexError, "valid indices"),
    ("negative_step", "x[::-1]", ValueError, "step must be greater than zero"),
    ("no_broadcast", "x[[0, 1], [0, 1, 2]]", IndexError, "could not be broadcast"),
    ("value_shape", "x[[0, 1]] = tfcore.zeros(3)", ValueError, "cannot be broadcast"),
    ("none_value", "x[0] = None", TypeError, "None"),
    ("none_value_adv", "x[[0]] = None", TypeError, "None"),
    ("index_select_oob", "tfcore.index_select(x, 0, tfcore.tensor([4]))", IndexError,
     "tfc_index_select: index [1] at flat position 0 is 4, out of range"),
    ("index_select_neg", "tfcore.index_select(x, 0, tfcore.tensor([-1]))", IndexError, "out of range"),
    ("gather_oob", "tfcore.gather(x, 1, tfcore.tensor(np.full((1, 1, 1), 5)))", IndexError, "tfc_gather"),
    ("scatter_add_oob", "tfcore.scatter_add(x, 0, tfcore.tensor(np.full((1, 1, 1), 4)), x)", IndexError,
     "tfc_scatter_add"),
    ("index_select_list", "tfcore.index_select(x, 0, [0])", TypeError, "integer tensor"),
    ("index_select_none", "tfcore.index_select(None, 0, tfcore.tensor([0]))", TypeError, "input"),
    ("gather_float_index", "tfcore.gather(x, 0, x)", TypeError, "index"),
    ("scatter_add_none_src", "tfcore.scatter_add(x, 0, tfcore.tensor([[[0]]]), None)", TypeError, "src"),
    ("gather_bad_shape", "tfcore.gather(x, 0, tfcore.tensor([0]))", ValueError, "same number of dims"),
    ("masked_select_shape", "tfcore.masked_select(x, tfcore.tensor(np.ones(4, bool)))", ValueError,
     "does not broadcast"),
    ("masked_select_none", "tfcore.masked_select(x, None)", TypeError, "mask"),
    ("nonzero_none", "tfcore.nonzero(None)", TypeError, "input"),
    ("index_put_not_tuple", "x.index_put_([tfcore.tensor([0])], tfcore.zeros(1))", TypeError, "tuple"),
]


@pytest.mark.parametrize("name,code,exc,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_indices_raise_in_a_fresh_interpreter(name, code, exc, fragment):
    body = ("import numpy as np, tfcore\n"
            "x = tfcore.tensor(np.zeros((4, 5, 6)))\n"
            "try:\n"
            "    %s\n"
            "except %s as e:\n"
            "    assert %r in str(e), str(e)\n"
            "    print('RAISED', type(e).__name__)\n"
            "else:\n"
            "    print('NO ERROR')\n" % (code, exc.__name__, fragment))
    r = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RAISED" in r.stdout, r.stdout + r.stderr
