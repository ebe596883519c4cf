"""Read-only memory stays read-only (issue 41): a tensor over a non-writable
numpy array, a read-only memmap or a DLPack tensor flagged read-only refuses
every in-place write (RuntimeError, and the array is unchanged); views of it
too. torch 1.13 only warns for torch.from_numpy of a non-writable array and
then writes (a segfault on a read-only memmap): tfcore is stricter."""
import numpy as np
import pytest

import tfcore

# Every in-place method of tfcore.Tensor, with arguments.
INPLACE = {
    "add_": lambda t: t.add_(1.0),
    "add_tensor": lambda t: t.add_(tfcore.ones(*t.shape, dtype=t.dtype)),
    "sub_": lambda t: t.sub_(1.0),
    "mul_": lambda t: t.mul_(2.0),
    "div_": lambda t: t.div_(2.0),
    "iadd": lambda t: t.__iadd__(1.0),
    "isub": lambda t: t.__isub__(1.0),
    "imul": lambda t: t.__imul__(2.0),
    "itruediv": lambda t: t.__itruediv__(2.0),
    "clamp_": lambda t: t.clamp_(min=1.5),
    "fill_": lambda t: t.fill_(7.0),
    "zero_": lambda t: t.zero_(),
    "copy_": lambda t: t.copy_(tfcore.zeros(*t.shape, dtype=t.dtype)),
    "copy_broadcast": lambda t: t.copy_(tfcore.zeros(1, dtype=t.dtype)),
    "normal_": lambda t: t.normal_(),
    "uniform_": lambda t: t.uniform_(),
    "index_put_": lambda t: t.index_put_((tfcore.tensor([0]),), tfcore.tensor([9.0], dtype=t.dtype)),
    "setitem": lambda t: t.__setitem__(0, 9.0),
    "setitem_mask": lambda t: t.__setitem__(t > 2.0, 0.0),
}


def read_only_array():
    a = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_every_inplace_method_refuses_a_read_only_tensor(name):
    a = read_only_array()
    t = tfcore.from_numpy(a)
    assert t.is_read_only
    with pytest.raises(RuntimeError, match="read-only"):
        INPLACE[name](t)
    np.testing.assert_array_equal(a, np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_views_of_a_read_only_tensor_are_read_only(name):
    a = read_only_array()
    v = tfcore.from_numpy(a)[1]
    assert v.is_read_only and v.reshape(3).is_read_only and tfcore.from_numpy(a).t().is_read_only
    with pytest.raises(RuntimeError, match="read-only"):
        INPLACE[name](v)
    assert a[1].tolist() == [4.0, 5.0, 6.0]


def test_copy_into_read_only_names_function_and_argument():
    t = tfcore.from_numpy(read_only_array())
    with pytest.raises(tfcore.ReadOnlyError, match=r"tfc_tensor_copy_from: dst f32 \[2,3\] is read-only"):
        t.copy_(tfcore.zeros(2, 3))
    with pytest.raises(ValueError):  # an InvalidArgumentError too
        t.copy_(tfcore.zeros(2, 3))


def test_writable_array_stays_writable_and_reads_work():
    a = np.ones((2, 3), dtype=np.float32)
    t = tfcore.from_numpy(a)
    assert not t.is_read_only
    t.add_(1.0)
    assert a[0, 0] == 2.0
    r = tfcore.from_numpy(read_only_array())
    assert float((r * 2).sum()) == 42.0 and not r.clone().is_read_only
    c = r.clone()
    c.add_(1.0)
    assert float(c.sum()) == 27.0


def test_read_only_memmap_add_raises_instead_of_crashing(tmp_path):
    path = tmp_path / "m.bin"
    np.arange(8, dtype=np.float32).tofile(path)
    m = np.memmap(path, dtype=np.float32, mode="r", shape=(8,))
    t = tfcore.from_numpy(m)
    with pytest.raises(RuntimeError, match="read-only"):
        t.add_(1.0)
    del t
    assert np.fromfile(path, dtype=np.float32).tolist() == list(range(8))


def test_data_of_a_read_only_tensor_is_read_only():
    t = tfcore.from_numpy(read_only_array())
    with pytest.raises(RuntimeError, match="read-only"):
        t.data.add_(1.0)


def test_optimizer_step_on_a_read_only_parameter_raises():
    a = read_only_array()
    p = tfcore.from_numpy(a)
    p.requires_grad_(True)
    (p * p).sum().backward()
    opt = tfcore.optim.SGD([p], lr=0.1)
    with pytest.raises(RuntimeError, match="read-only"):
        opt.step()
    assert a[0, 0] == 1.0


OPTIMIZERS = {
    "SGD": lambda ps: tfcore.optim.SGD(ps, lr=0.1),
    "SGD momentum": lambda ps: tfcore.optim.SGD(ps, lr=0.1, momentum=0.9),
    "Adam": lambda ps: tfcore.optim.Adam(ps, lr=0.1),
    "AdamW": lambda ps: tfcore.optim.AdamW(ps, lr=0.1, weight_decay=0.1),
    "Adam amsgrad": lambda ps: tfcore.optim.Adam(ps, lr=0.1, amsgrad=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_refuses_a_read_only_parameter_and_moves_nothing(name):
    w = tfcore.ones(2, 3, requires_grad=True)
    a = read_only_array()
    p = tfcore.from_numpy(a)
    p.requires_grad_(True)
    ((w * p).sum() + (p * p).sum()).backward()
    opt = OPTIMIZERS[name]([w, p])
    with pytest.raises(tfcore.ReadOnlyError, match="tfc_optim_step: parameter 1 f32 \\[2,3\\] is read-only"):
        opt.step()
    np.testing.assert_array_equal(a, read_only_array())
    np.testing.assert_array_equal(w.numpy(), np.ones((2, 3), np.float32))  # the writable one did not move either
    assert opt.step_count == 0


def test_zero_grad_refuses_a_read_only_grad_and_zeroes_none():
    w = tfcore.ones(2, 3, requires_grad=True)
    w.grad = tfcore.full((2, 3), 5.0)
    p = tfcore.ones(2, 3, requires_grad=True)
    g = read_only_array()
    p.grad = tfcore.from_numpy(g)
    opt = tfcore.optim.SGD([w, p], lr=0.1)
    with pytest.raises(tfcore.ReadOnlyError, match="tfc_optim_zero_grad: the grad of parameter 1"):
        opt.zero_grad(set_to_none=False)
    assert float(w.grad.sum()) == 30.0  # not half-zeroed
    np.testing.assert_array_equal(g, read_only_array())
    opt.zero_grad()  # set_to_none drops the reference, writes nothing
    assert p.grad is None and w.grad is None
    np.testing.assert_array_equal(g, read_only_array())


def test_distributed_refuses_read_only_parameters():
    import tfcore.distributed as dist

    dist.init()
    a = np.arange(1.0, 7.0).reshape(2, 3)
    a.setflags(write=False)
    p = tfcore.from_numpy(a)
    assert p.is_read_only
    p.requires_grad_(True)
    with pytest.raises(tfcore.ReadOnlyError, match="tfc_ddp_new: params\\[0\\] f64 \\[2,3\\] is read-only"):
        dist.DDP([p])
    opt = tfcore.optim.AdamW([tfcore.ones(3, dtype="float64", requires_grad=True), p], lr=0.1)
    with pytest.raises(tfcore.ReadOnlyError, match="tfc_optim_shard: parameter 1 f64 \\[2,3\\] is read-only"):
        dist.shard_optimizer(opt)
    assert not dist.is_sharded(opt)


def test_grad_accumulation_never_writes_a_read_only_grad():
    p = tfcore.ones(2, 3, requires_grad=True)
    g = read_only_array()
    p.grad = tfcore.from_numpy(g)
    (p * 2).sum().backward()  # accumulates: a new sum replaces the read-only .grad
    np.testing.assert_array_equal(g, read_only_array())
    np.testing.assert_array_equal(p.grad.numpy(), read_only_array() + 2)


def test_clip_grad_norm_into_a_read_only_grad_raises():
    p = tfcore.ones(2, 3, requires_grad=True)
    g = read_only_array()
    p.grad = tfcore.from_numpy(g)
    with pytest.raises(RuntimeError, match="read-only"):
        tfcore.optim.clip_grad_norm_([p], 0.1)
    np.testing.assert_array_equal(g, read_only_array())


class _ReadOnlyProducer:
    """A DLPack producer exporting a read-only versioned capsule (the flag numpy 2 sets for read-only arrays)."""

    def __init__(self, t):
        self.t = t

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, max_version=None, **kw):
        return self.t.__dlpack__(max_version=(1, 0))


def test_dlpack_read_only_flag_round_trips():
    src = tfcore.from_numpy(read_only_array())
    t = tfcore.from_dlpack(_ReadOnlyProducer(src))  # versioned export of a read-only tensor sets the flag
    assert t.is_read_only
    with pytest.raises(RuntimeError, match="read-only"):
        t.fill_(0.0)
    w = tfcore.from_dlpack(_ReadOnlyProducer(tfcore.ones(3)))
    assert not w.is_read_only
    w.fill_(2.0)


def test_numpy_view_of_a_read_only_tensor_is_not_writable():
    t = tfcore.from_numpy(read_only_array())
    a = t.numpy()
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 5.0
    assert tfcore.ones(2).numpy().flags.writeable
