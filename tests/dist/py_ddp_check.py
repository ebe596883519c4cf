"""tfcore.distributed on several ranks, launched by
`bash tests/dist/run_mpi.sh 2 /usr/bin/python3 tests/dist/py_ddp_check.py`
(tests/dist/meson.build; needs TFCORE_LIBRARY or a build/lib in the checkout).

Each rank checks the collectives against numpy computed from every rank's
(deterministic) data, DDP gradients of a small model against torch on the
whole batch (rank r takes rows [r*ROWS, (r+1)*ROWS)), gradient accumulation
with no_sync, ZeRO-1 against torch's AdamW on the whole batch, and that
calls disagreeing across ranks raise on every rank. Any failure ends the
whole job at once (tfc_comm_abort), so no rank waits for a dead peer.
"""
import os
import sys
import traceback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tfcore  # noqa: E402
import tfcore.distributed as dist  # noqa: E402

ROWS, IN, HID, OUT = 4, 5, 7, 3
SHAPES = ((IN, HID), (HID,), (HID, OUT), (OUT,))
TOL = dict(rtol=1e-12, atol=1e-14)


def data(r, shape, salt=0):
    """Rank r's values: known to every rank, so each can compute the reference."""
    return np.random.default_rng(1000 * salt + r).standard_normal(shape)


def forward(x, p):
    w1, b1, w2, b2 = p
    return ((x @ w1 + b1).tanh() @ w2 + b2).mean()


def torch_grads(values, xs):
    """Gradients of the sum over xs of the mean losses, in f64."""
    p = [torch.tensor(v, requires_grad=True) for v in values]
    for x in xs:
        forward(torch.tensor(x), p).backward()
    return [t.grad.numpy() for t in p]


def params(values):
    return [tfcore.tensor(v, dtype="float64", requires_grad=True) for v in values]


def expect_error(kind, fn, *args):
    try:
        fn(*args)
    except kind as e:
        return str(e)
    raise AssertionError("%s%r did not raise %s" % (fn.__name__, args, kind))


def check_collectives(r, n):
    ranks = range(n)
    for dt, npdt in (("float64", np.float64), ("float32", np.float32)):
        tol = TOL if dt == "float64" else dict(rtol=1e-6, atol=1e-6)
        t = tfcore.tensor(data(r, (3, 4)), dtype=dt)
        dist.all_reduce(t, "sum")
        np.testing.assert_allclose(t.numpy(), sum(data(q, (3, 4)).astype(npdt) for q in ranks), **tol)
        t = tfcore.tensor(data(r, (3, 4)), dtype=dt)
        dist.all_reduce(t, "avg")
        np.testing.assert_allclose(t.numpy(), sum(data(q, (3, 4)) for q in ranks) / n, **tol)
    i = tfcore.tensor(np.arange(5) * (r + 1), dtype="int64")
    np.testing.assert_array_equal(dist.all_reduce(i).numpy(), np.arange(5) * sum(q + 1 for q in ranks))
    # A view, written back through the view.
    base = tfcore.tensor(data(r, (4, 3)), dtype="float64")
    dist.all_reduce(base.t(), "sum")
    np.testing.assert_allclose(base.numpy(), sum(data(q, (4, 3)) for q in ranks), **TOL)

    for src in ranks:
        t = tfcore.tensor(data(r, (2, 5), salt=1), dtype="float64")
        dist.broadcast(t, src=src)
        np.testing.assert_array_equal(t.numpy(), data(src, (2, 5), salt=1))

    g = dist.all_gather(tfcore.tensor(data(r, (2, 3)), dtype="float64"))
    np.testing.assert_array_equal(g.numpy(), np.concatenate([data(q, (2, 3)) for q in ranks]))
    g0 = dist.all_gather(tfcore.tensor(float(r) + 0.5, dtype="float64"))
    np.testing.assert_array_equal(g0.numpy(), [q + 0.5 for q in ranks])

    full = [data(q, (2 * n, 3), salt=2) for q in ranks]
    for op in ("sum", "avg"):
        out = dist.reduce_scatter(tfcore.tensor(full[r], dtype="float64"), op)
        want = sum(full)[2 * r:2 * r + 2] / (n if op == "avg" else 1)
        assert out.shape == (2, 3)
        np.testing.assert_allclose(out.numpy(), want, **TOL)
    dist.barrier()


def check_ddp(r, n):
    x_all = data(99, (n * ROWS, IN), salt=3)
    x = tfcore.tensor(x_all[r * ROWS:(r + 1) * ROWS], dtype="float64")
    mine = [data(r, s, salt=4) * 0.5 for s in SHAPES]  # ranks start different ...
    root = [data(0, s, salt=4) * 0.5 for s in SHAPES]  # ... and end with rank 0's values
    p = params(mine)
    ddp = dist.DistributedDataParallel(p, bucket_bytes=8 * HID * OUT)  # several buckets
    for t, v in zip(p, root):
        np.testing.assert_array_equal(t.numpy(), v)

    forward(x, p).backward()
    ddp.finish()
    for t, w in zip(p, torch_grads(root, [x_all])):
        np.testing.assert_allclose(t.grad.numpy(), w, **TOL)
    st = ddp.stats()
    want_bytes = 8 * sum(int(np.prod(s)) for s in SHAPES) if n > 1 else 0
    assert st["syncs"] == 1 and st["bytes"] == want_bytes, st
    assert n == 1 or st["buckets"] >= 2, st

    # Gradient accumulation: a first micro-batch under no_sync stays local ...
    for t in p:
        t.grad = None
    half = ROWS // 2
    lo = x_all[r * ROWS:r * ROWS + half]
    hi = x_all[r * ROWS + half:(r + 1) * ROWS]
    with ddp.no_sync():
        forward(tfcore.tensor(lo, dtype="float64"), p).backward()
        ddp.finish()
    for t, w in zip(p, torch_grads(root, [lo])):
        np.testing.assert_allclose(t.grad.numpy(), w, **TOL)
    # ... and the synced second one averages the sum of both over the ranks.
    forward(tfcore.tensor(hi, dtype="float64"), p).backward()
    ddp.finish()
    lows = [x_all[q * ROWS:q * ROWS + half] for q in range(n)]
    highs = [x_all[q * ROWS + half:(q + 1) * ROWS] for q in range(n)]
    want = [sum(gs) / n for gs in zip(*(torch_grads(root, [a, b]) for a, b in zip(lows, highs)))]
    for t, w in zip(p, want):
        np.testing.assert_allclose(t.grad.numpy(), w, **TOL)
    assert ddp.stats()["syncs"] == 2
    ddp.close()


def check_zero1(r, n):
    x_all = data(77, (n * ROWS, IN), salt=5)
    x = tfcore.tensor(x_all[r * ROWS:(r + 1) * ROWS], dtype="float64")
    values = [data(0, s, salt=6) * 0.5 for s in SHAPES]
    p = params(values)
    opt = dist.shard_optimizer(tfcore.optim.AdamW(p, lr=0.05, weight_decay=0.1))
    tp = [torch.tensor(v, requires_grad=True) for v in values]
    topt = torch.optim.AdamW(tp, lr=0.05, weight_decay=0.1)
    for _ in range(3):
        forward(x, p).backward()  # each rank's own gradients: the sharded step averages them
        opt.step()
        opt.zero_grad()
        forward(torch.tensor(x_all), tp).backward()
        topt.step()
        topt.zero_grad()
    for a, b in zip(p, tp):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **TOL)
    full = dist.gather_optimizer(opt, root=n - 1)
    assert (full is not None) == (r == n - 1)
    if full is not None:
        assert full.step_count == 3 and not dist.is_sharded(full)
        state = full.state_dict()
        ts = topt.state_dict()["state"]
        for k, v in state.items():
            if k.endswith("exp_avg") or k.endswith("exp_avg_sq"):
                idx = int(k.split(".")[1])
                np.testing.assert_allclose(v.numpy(), ts[idx][k.split(".")[-1]].numpy(), **TOL)


def check_disagreement(r, n):
    if n > 1:
        # Element counts differing across ranks: every rank raises, none hangs.
        msg = expect_error(tfcore.ShapeError, dist.all_reduce, tfcore.ones(3 + r, dtype="float64"))
        assert "tfc_all_reduce" in msg and "element count" in msg, msg
        # (dist.h promises TFC_ERR_DTYPE here; lib/dist/collectives.c reports TFC_ERR_SHAPE today.)
        msg = expect_error((tfcore.DtypeError, tfcore.ShapeError), dist.all_reduce,
                           tfcore.ones(3, dtype="float64" if r == 0 else "float32"))
        assert "dtype" in msg, msg
        msg = expect_error(tfcore.ShapeError, dist.all_gather, tfcore.ones(2 + r, 3, dtype="float64"))
        assert "tfc_all_gather" in msg, msg
        # Rank 1's dim 0 does not split over the ranks: it cannot even call
        # reduce_scatter, yet the others must not wait for it.
        rows = 2 * n + (1 if r == 1 else 0)
        # Rank 1 keeps its own shape error; the others learn that rank 1 refused.
        msg = expect_error(tfcore.ShapeError if r == 1 else tfcore.InvalidArgumentError, dist.reduce_scatter,
                           tfcore.ones(rows, 3, dtype="float64"))
        assert "reduce_scatter" in msg and (r == 1 or "rank 1 refused" in msg), msg
        msg = expect_error(tfcore.Error, dist.broadcast, tfcore.ones(3, dtype="float64"), r)
        assert "tfc_broadcast" in msg and "root" in msg, msg
        bad = [tfcore.ones(3 + r, dtype="float64", requires_grad=True)]
        msg = expect_error(tfcore.ShapeError, dist.DistributedDataParallel, bad)
        assert "tfc_ddp_new" in msg, msg
    # The communicator still works after the errors.
    t = tfcore.ones(2, dtype="float64")
    np.testing.assert_array_equal(dist.all_reduce(t).numpy(), [n, n])


def main():
    dist.init()
    dist.set_timeout(120)  # a bug that desynchronises the ranks ends the job instead of hanging it
    r, n = dist.rank(), dist.world_size()
    try:
        check_collectives(r, n)
        check_ddp(r, n)
        check_zero1(r, n)
        check_disagreement(r, n)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        tfcore.lib.tfc_comm_abort(dist.init(), 1)
    print("py_ddp_check: rank %d of %d (%s): ok" % (r, n, dist.backend()), flush=True)


if __name__ == "__main__":
    main()
