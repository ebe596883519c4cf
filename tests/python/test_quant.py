"""tfcore.quantize / QWeight: the packed layouts against numpy references,
int8 codes against torch.quantize_per_channel (symmetric, zero point 0),
the quantized linear against torch's linear on the dequantized weight, the
numpy views, the array round trip and the errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore

rng = np.random.default_rng(15)


def rand(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def test_int8_codes_and_scales_match_numpy_and_torch():
    w = rand(17, 100)
    q = tfcore.quantize(w, "int8")
    assert q.format == "int8" and q.shape == (17, 100) and q.group_size == 0
    scales = np.abs(w).max(1) / np.float32(127)
    np.testing.assert_array_equal(q.scales, scales)
    codes = np.rint(w / scales[:, None]).astype(np.int8)
    np.testing.assert_array_equal(q.packed, codes)
    # torch: same symmetric grid; it multiplies by 1/scale, so only exact ties may round apart.
    tq = torch.quantize_per_channel(torch.from_numpy(w), torch.from_numpy(scales).double(),
                                    torch.zeros(17, dtype=torch.long), 0, torch.qint8)
    diff = tq.int_repr().numpy().astype(int) - q.packed.astype(int)
    assert np.abs(diff).max() <= 1 and (diff != 0).mean() < 1e-3
    deq = q.dequantize().numpy()
    np.testing.assert_array_equal(deq, codes.astype(np.float32) * scales[:, None])
    assert np.all(np.abs(deq - w) <= scales[:, None] / 2 * (1 + 1e-6))


@pytest.mark.parametrize("group", [32, 64])
def test_int4_layout_byte_by_byte(group):
    w = rand(5, 128)
    q = tfcore.quantize(w, "int4", group_size=group)
    p = q.packed
    assert p.dtype == np.uint8 and p.shape == (5, 64) and q.scales.shape == (5, 128 // group)
    codes = np.empty((5, 128), np.int32)
    codes[:, 0::2] = (p & 15).astype(np.int32) - 8
    codes[:, 1::2] = (p >> 4).astype(np.int32) - 8
    s = np.abs(w.reshape(5, -1, group)).max(2) / np.float32(7)
    np.testing.assert_array_equal(q.scales, s)
    np.testing.assert_array_equal(codes.reshape(5, -1, group), np.rint(w.reshape(5, -1, group) / s[:, :, None]))
    deq = (codes.reshape(5, -1, group).astype(np.float32) * s[:, :, None]).reshape(5, 128)
    np.testing.assert_array_equal(q.dequantize().numpy(), deq)
    assert np.abs(q.dequantize().numpy() - w).max() <= s.max() / 2 * (1 + 1e-6)


@pytest.mark.parametrize("fmt,group,K", [("int8", None, 130), ("int8", None, 5), ("int4", 32, 96), ("int4", 64, 128)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("lead", [(3,), (3, 7)])  # 3 rows: the row kernels; 21: dequantized tiles + f32 GEMM
def test_linear_matches_torch_on_the_dequantized_weight(fmt, group, K, bias, lead):
    w, x, b = rand(17, K), rand(*lead, K), rand(17)
    q = tfcore.quantize(w, fmt, group_size=group)
    y = q.linear(x, b if bias else None).numpy()
    deq = torch.from_numpy(q.dequantize().numpy()).double()
    ref = TF.linear(torch.from_numpy(x).double(), deq, torch.from_numpy(b).double() if bias else None).numpy()
    mag = np.abs(x).astype(np.float64) @ np.abs(deq.numpy()).T + (np.abs(b) if bias else 0)
    assert y.shape == (*lead, 17)
    assert np.all(np.abs(y - ref) <= 1e-5 * mag)
    np.testing.assert_array_equal(tfcore.qlinear(x, q, b if bias else None).numpy(), y)


def test_in_out_layout_and_views_share_memory():
    w = rand(64, 9)  # [in, out], the Conv1D layout
    q = tfcore.quantize(w, "int4", group_size=32, in_out=True)
    assert q.shape == (9, 64)
    np.testing.assert_array_equal(q.dequantize(in_out=True).numpy(), q.dequantize().numpy().T)
    assert np.shares_memory(q.packed, q.packed) and q.packed.ctypes.data == q.tensors()[0].data_ptr()
    assert q.nbytes == 9 * 32 + 4 * 9 * 2


def test_from_tensors_round_trip_and_corrupt_arrays():
    w, x = rand(3, 64), rand(2, 64)
    for fmt, g in (("int8", None), ("int4", 32)):
        q = tfcore.quantize(w, fmt, group_size=g)
        r = tfcore.quant.from_tensors(fmt, 3, 64, q.packed.copy(), q.scales.copy(), group_size=g)
        np.testing.assert_array_equal(r.linear(x).numpy(), q.linear(x).numpy())
    q = tfcore.quantize(w, "int4")
    with pytest.raises(tfcore.ShapeError, match="tfc_qweight_from_tensors: packed is \\[3,32\\]"):
        tfcore.quant.from_tensors("int4", 3, 128, q.packed, q.scales)
    bad = q.scales.copy()
    bad[1, 1] = np.nan
    with pytest.raises(tfcore.Error, match="scales element 3"):
        tfcore.quant.from_tensors("int4", 3, 64, q.packed, bad)


def test_errors():
    with pytest.raises(ValueError, match="'int8' or 'int4'"):
        tfcore.quantize(rand(3, 64), "int2")
    with pytest.raises(tfcore.DtypeError, match="tfc_quantize: w is f64"):
        tfcore.quantize(rand(3, 64).astype(np.float64), "int8")
    with pytest.raises(tfcore.ShapeError, match="tfc_quantize: w is \\[2,3,64\\]"):
        tfcore.quantize(rand(2, 3, 64), "int8")
    with pytest.raises(tfcore.InvalidArgumentError, match="group_size 64 does not divide K = 96"):
        tfcore.quantize(rand(3, 96), "int4", group_size=64)
    q = tfcore.quantize(rand(3, 64), "int8")
    with pytest.raises(tfcore.ShapeError, match="tfc_qlinear: x is \\[2,63\\]"):
        q.linear(rand(2, 63))
    x = tfcore.tensor(rand(2, 64), requires_grad=True)
    with pytest.raises(tfcore.Error, match="no backward"):
        q.linear(x)
    with tfcore.no_grad():
        assert q.linear(x).shape == (2, 3)
