"""tfcore.distributed in one process (world size 1, no launcher): the
collectives' one-rank semantics and errors, DDP gradients against torch,
no_sync, the hook hand-over with tfcore.autograd.set_grad_hook, ZeRO-1 on
one rank against an unsharded optimizer, destroy/init. The multi-rank
behaviour is checked under mpirun by tests/dist/py_ddp_check.py."""
import numpy as np
import pytest
import torch

import tfcore
import tfcore.distributed as dist

ROWS, IN, HID, OUT = 6, 5, 7, 3


@pytest.fixture(autouse=True)
def _comm():
    dist.init()
    yield
    tfcore.autograd.set_grad_hook(None)


def _param_values():
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s) * 0.5 for s in ((IN, HID), (HID,), (HID, OUT), (OUT,))]


def _batch():
    return np.random.default_rng(11).standard_normal((ROWS, IN))


def _forward(x, p):
    w1, b1, w2, b2 = p
    return ((x @ w1 + b1).tanh() @ w2 + b2).mean()


def _torch_grads(values, xs):
    """Gradients of the sum over xs of the mean losses (torch, f64)."""
    p = [torch.tensor(v, requires_grad=True) for v in values]
    for x in xs:
        _forward(torch.tensor(x), p).backward()
    return [t.grad.numpy() for t in p]


def _params(values):
    return [tfcore.tensor(v, dtype="float64", requires_grad=True) for v in values]


def test_init_is_idempotent_and_reports_one_rank():
    c = dist.init()
    assert dist.init() == c
    assert dist.is_initialized()
    assert (dist.rank(), dist.world_size(), dist.backend()) == (0, 1, "single")
    dist.barrier()


def test_all_reduce_in_place_identity_on_one_rank():
    a = np.arange(12.0).reshape(3, 4)
    t = tfcore.tensor(a, dtype="float64")
    ptr = t.data_ptr()
    assert dist.all_reduce(t) is t
    assert dist.all_reduce(t, op="avg") is t
    assert t.data_ptr() == ptr
    np.testing.assert_array_equal(t.numpy(), a)
    # A view (non-contiguous) is written back through the view.
    base = tfcore.tensor(a, dtype="float64")
    dist.all_reduce(base.t(), "sum")
    np.testing.assert_array_equal(base.numpy(), a)
    i = tfcore.tensor([1, 2, 3], dtype="int64")
    np.testing.assert_array_equal(dist.all_reduce(i).numpy(), [1, 2, 3])


def test_collective_errors_raise_the_packages_exceptions():
    t = tfcore.ones(3, dtype="float64")
    with pytest.raises(ValueError, match="'sum' or 'avg'"):
        dist.all_reduce(t, op="max")
    with pytest.raises(TypeError, match="tfcore Tensor"):
        dist.all_reduce(np.ones(3))
    with pytest.raises(tfcore.DtypeError, match="tfc_all_reduce") as e:
        dist.all_reduce(tfcore.tensor([1, 2], dtype="int32"), op="avg")
    assert e.value.status_name == "TFC_ERR_DTYPE"
    with pytest.raises(tfcore.DtypeError, match="tfc_all_reduce"):
        dist.all_reduce(tfcore.tensor([True, False], dtype="bool"))
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_broadcast: root is 1"):
        dist.broadcast(t, src=1)
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_comm_set_timeout"):
        dist.set_timeout(0)
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_comm_set_timeout"):
        dist.set_timeout(float("nan"))
    dist.set_timeout(600)
    with pytest.raises(tfcore.ShapeError, match="tfc_reduce_scatter: out is \\[\\], in is \\[\\]"):
        dist.reduce_scatter(tfcore.tensor(1.0, dtype="float64"))


def test_broadcast_gather_scatter_on_one_rank():
    a = np.arange(6.0).reshape(2, 3)
    t = tfcore.tensor(a, dtype="float64")
    assert dist.broadcast(t, src=0) is t
    np.testing.assert_array_equal(t.numpy(), a)
    g = dist.all_gather(t)
    assert g.shape == (2, 3) and g.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(g.numpy(), a)
    assert dist.all_gather(tfcore.tensor(2.5, dtype="float32")).shape == (1,)
    for op in ("sum", "avg"):
        r = dist.reduce_scatter(t.t(), op)  # a non-contiguous input
        assert r.shape == (3, 2)
        np.testing.assert_array_equal(r.numpy(), a.T)


def test_ddp_gradients_match_torch_and_count_syncs():
    values = _param_values()
    p = _params(values)
    x = _batch()
    with dist.DistributedDataParallel(p, bucket_bytes=64) as ddp:
        assert ddp.stats()["syncs"] == 0
        _forward(tfcore.tensor(x, dtype="float64"), p).backward()
        ddp.finish()
        want = _torch_grads(values, [x])
        for t, w in zip(p, want):
            np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-12, atol=1e-15)
        st = ddp.stats()
        assert st["syncs"] == 1
        assert set(st) == {"syncs", "buckets", "bytes", "comm_s", "exposed_s"}
        # Parameters are unchanged by the construction's broadcast from rank 0 (this rank).
        for t, v in zip(p, values):
            np.testing.assert_array_equal(t.numpy(), v)


def test_ddp_no_sync_accumulates_and_skips_finish():
    values = _param_values()
    p = _params(values)
    x = _batch()
    ddp = dist.DDP(p)
    try:
        with ddp.no_sync():
            _forward(tfcore.tensor(x[:3], dtype="float64"), p).backward()
            ddp.finish()  # does nothing inside no_sync
        assert ddp.stats()["syncs"] == 0
        _forward(tfcore.tensor(x[3:], dtype="float64"), p).backward()
        ddp.sync()
        assert ddp.stats()["syncs"] == 1
        want = _torch_grads(values, [x[:3], x[3:]])
        for t, w in zip(p, want):
            np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-12, atol=1e-15)
    finally:
        ddp.close()
    with pytest.raises(RuntimeError, match="after close"):
        ddp.finish()


def test_ddp_bad_parameters():
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_ddp_new"):
        dist.DDP([tfcore.ones(3, dtype="float64")])  # does not require grad
    with pytest.raises(tfcore.DtypeError, match="tfc_ddp_new"):
        dist.DDP([tfcore.ones(3, dtype="bfloat16", requires_grad=True)])
    with pytest.raises(tfcore.InvalidArgumentError, match="bucket_bytes"):
        dist.DDP([tfcore.ones(3, dtype="float64", requires_grad=True)], bucket_bytes=-1)
    with pytest.raises(TypeError, match="tfcore Tensors"):
        dist.DDP([np.ones(3)])


def test_ddp_and_python_grad_hook_hand_over():
    p = _params(_param_values())
    x = tfcore.tensor(_batch(), dtype="float64")
    seen = []
    tfcore.autograd.set_grad_hook(lambda t: seen.append(t), params=p)
    ddp = dist.DDP(p)  # replaces the Python hook
    _forward(x, p).backward()
    ddp.finish()
    assert seen == []
    # A Python hook installed after the DDP replaces it; closing the DDP then leaves that hook alone.
    tfcore.autograd.set_grad_hook(lambda t: seen.append(t), params=p)
    ddp.close()
    _forward(x, p).backward()
    assert sorted(id(t) for t in seen) == sorted(id(t) for t in p)
    # Closing an attached DDP removes its hook: backward afterwards runs without it.
    tfcore.autograd.set_grad_hook(None)
    ddp2 = dist.DDP(p)
    ddp2.close()
    _forward(x, p).backward()


def test_sharded_optimizer_on_one_rank_matches_unsharded():
    values = _param_values()
    x = tfcore.tensor(_batch(), dtype="float64")
    p_ref, p = _params(values), _params(values)
    ref = tfcore.optim.AdamW(p_ref, lr=0.05, weight_decay=0.1)
    opt = tfcore.optim.AdamW(p, lr=0.05, weight_decay=0.1)
    assert not dist.is_sharded(opt)
    assert dist.shard_optimizer(opt) is opt
    assert dist.is_sharded(opt)
    with pytest.raises(tfcore.TfcRuntimeError, match="tfc_optim_shard"):
        dist.shard_optimizer(opt)
    for _ in range(3):
        for params, o in ((p_ref, ref), (p, opt)):
            _forward(x, params).backward()
            o.step()
            o.zero_grad()
    for a, b in zip(p, p_ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-15)
    full = dist.gather_optimizer(opt, root=0)
    assert isinstance(full, tfcore.optim.AdamW) and not dist.is_sharded(full)
    assert full.step_count == 3 and full.param_groups[0]["lr"] == 0.05
    want, got = ref.state_dict(), full.state_dict()
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-13, atol=1e-15)
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_optim_gather"):
        dist.gather_optimizer(ref)
    with pytest.raises(tfcore.InvalidArgumentError, match="tfc_optim_gather"):
        dist.gather_optimizer(opt, root=1)


def test_destroy_releases_everything_and_init_starts_again():
    p = _params(_param_values())
    ddp = dist.DDP(p)
    opt = dist.shard_optimizer(tfcore.optim.SGD(p, lr=0.1))
    dist.destroy()
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init\\(\\) first"):
        dist.rank()
    with pytest.raises(RuntimeError, match="after close"):
        ddp.finish()
    with pytest.raises(tfcore.InvalidArgumentError):
        opt.step()  # its handle was released with the communicator
    dist.destroy()  # twice: nothing
    dist.init()  # one-rank communicators can start again (MPI could not)
    assert dist.world_size() == 1
    # The released DDP left no hook behind on the tape.
    _forward(tfcore.tensor(_batch(), dtype="float64"), p).backward()


def test_launched_by_mpirun_without_the_mpi_module(tmp_path):
    """A program started by an MPI launcher, with a libtfcore that has no
    libtfcore-mpi.so beside it or on the loader's path: tfc_comm_init is a
    clear TFC_ERR_UNSUPPORTED naming the module and what to install."""
    import os
    import shutil
    import subprocess
    import sys

    lib = os.environ["TFCORE_LIBRARY"]
    alone = tmp_path / os.path.basename(lib)
    shutil.copy(os.path.realpath(lib), alone)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(tfcore.__file__)))
    env = dict(os.environ, TFCORE_LIBRARY=str(alone), OMPI_COMM_WORLD_SIZE="2", LD_LIBRARY_PATH=str(tmp_path),
               PYTHONPATH=pkg)
    code = ("import tfcore, tfcore.distributed as d\n"
            "try:\n    d.init()\nexcept tfcore.Error as e:\n"
            "    print(type(e).__name__, e.status_name, e)\nelse:\n    print('no error')\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "TFC_ERR_UNSUPPORTED" in out.stdout, out.stdout + out.stderr
    assert "OMPI_COMM_WORLD_SIZE=2" in out.stdout and "libtfcore-mpi.so" in out.stdout, out.stdout
    assert "libopenmpi-dev" in out.stdout, out.stdout
    assert "processes: " in tfcore.build_info()
