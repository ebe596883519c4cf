"""tfcore.set_float32_matmul_precision / get_float32_matmul_precision, as
torch's: the values, errors of the right type with the setting unchanged,
and that the CPU ignores it (an f32 matmul bit for bit the same under
'high', and equal to torch's f64 product to f32 accuracy)."""
import numpy as np
import pytest
import torch

import tfcore


@pytest.fixture(autouse=True)
def restore():
    yield
    tfcore.set_float32_matmul_precision("highest")


def test_default_and_round_trip_as_torch():
    assert tfcore.get_float32_matmul_precision() == "highest"
    assert torch.get_float32_matmul_precision() == "highest"
    for p in ("high", "medium", "highest"):
        tfcore.set_float32_matmul_precision(p)
        assert tfcore.get_float32_matmul_precision() == p


@pytest.mark.parametrize("bad,exc", [("low", ValueError), ("HIGH", ValueError), ("", ValueError), (1, TypeError),
                                     (None, TypeError), (b"high", TypeError)])
def test_bad_values_raise_and_leave_the_setting(bad, exc):
    tfcore.set_float32_matmul_precision("high")
    with pytest.raises(exc, match="set_float32_matmul_precision"):
        tfcore.set_float32_matmul_precision(bad)
    assert tfcore.get_float32_matmul_precision() == "high"


def test_the_c_function_refuses_a_value_outside_the_enum():
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_set_float32_matmul_precision: precision is 7"):
        from tfcore._lib import check
        check(tfcore.lib.tfc_set_float32_matmul_precision(7))
    assert tfcore.get_float32_matmul_precision() == "highest"


def test_the_cpu_ignores_it():
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (37, 129)).astype(np.float32)
    b = rng.uniform(-1, 1, (129, 23)).astype(np.float32)
    ta, tb = tfcore.tensor(a), tfcore.tensor(b)
    c0 = (ta @ tb).numpy()
    tfcore.set_float32_matmul_precision("high")
    c1 = (ta @ tb).numpy()
    assert np.array_equal(c0, c1)
    ref = (torch.from_numpy(a).double() @ torch.from_numpy(b).double()).numpy()
    assert np.max(np.abs(c1 - ref)) < 1e-5  # TF32 inputs would be off by ~1e-3
