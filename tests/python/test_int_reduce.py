"""Reductions of integer and bool tensors against torch 1.13 (issue 34): the
same calls on both, same values and dtypes, and an error where torch raises
one (RuntimeError for the mean/var of integers and the argmax of bool)."""
import numpy as np
import pytest
import torch

import tfcore

A = np.array([[3, 1, 3], [-2, 7, 7]])
DTYPES = ["int32", "int64", "uint8", "bool"]


def pair(name):
    a = np.abs(A) if name == "uint8" else A
    if name == "bool":
        a = a <= 1
    a = a.astype(np.bool_ if name == "bool" else name)
    return tfcore.tensor(a), torch.tensor(a)


def same(got, want):
    if isinstance(want, tuple):  # (values, indices)
        for g, w in zip(got, want):
            same(g, w)
        return
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert list(got.shape) == list(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


CALLS = [("sum", ()), ("sum", (1,)), ("sum", (0, True)), ("max", ()), ("max", (1,)), ("min", ()), ("min", (0,)),
         ("argmax", ()), ("argmax", (1,)), ("argmin", ()), ("argmin", (0, True)), ("mean", ()), ("mean", (1,)),
         ("var", ()), ("std", (1,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op,args", CALLS, ids=["%s%s" % c for c in CALLS])
def test_reduction_matches_torch(dtype, op, args):
    x, xt = pair(dtype)
    try:
        want = getattr(xt, op)(*args)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(x, op)(*args)
        return
    same(getattr(x, op)(*args), want)


def test_bool_mask_sum_counts():
    x = tfcore.tensor(np.linspace(0, 2, 11))
    n = (x <= 1.0).sum()
    assert n.dtype is tfcore.int64 and int(n) == 6


def test_int64_sum_is_exact_past_2_53():
    a = np.array([2 ** 60, 1, 1, -3], dtype=np.int64)
    assert int(tfcore.tensor(a).sum()) == int(torch.tensor(a).sum()) == 2 ** 60 - 1


def test_int_mean_error_is_torch_runtime_error_and_dtype_error():
    with pytest.raises(tfcore.DtypeError, match="tfc_mean: x is i64"):
        tfcore.tensor([1, 2]).mean()
    with pytest.raises(RuntimeError):
        tfcore.tensor([1, 2]).mean()
