"""tfcore.distributed: several processes training one model (include/tfcore/dist.h).

A thin layer over libtfcore's communicator, modelled on torch.distributed:

    import tfcore, tfcore.distributed as dist
    dist.init()                                  # mpirun's ranks, or this process alone
    ddp = dist.DistributedDataParallel(params)   # rank 0's values broadcast to all
    for step in ...:
        loss = model(rows of this rank).backward()
        ddp.finish()                             # every .grad is now the average over ranks
        opt.step(); opt.zero_grad()

Launched by `mpirun -np N python3 train.py` the process is one of N ranks
(libtfcore loads its MPI module libtfcore-mpi.so); launched plainly it is
rank 0 of 1 and every collective is a local copy, so the same script runs
either way. Collectives are blocking and collective: every rank calls them
in the same order with tensors of the same dtype and element count; a
disagreement raises on EVERY rank (ShapeError / DtypeError /
InvalidArgumentError) instead of hanging. The communicator made by init() is
module-wide; destroy() (also run at interpreter exit) releases it, and with
the last reference MPI is finalized, as mpirun requires of every rank.
"""
import atexit
import contextlib
import itertools
import threading
import weakref

from . import autograd as _ag
from ._lib import check, ffi, lib
from .tensor import Tensor, empty

_lock = threading.Lock()
_comm = None          # the module's tfc_comm* (a plain pointer: released by destroy(), not by the GC)
_finalized = False    # destroy() ran after an MPI init: MPI cannot start again in this process
_owners = weakref.WeakSet()  # DDP wrappers and sharded optimizers: they hold references to _comm
_atexit_registered = False
_tokens = itertools.count(1)

_OPS = {"sum": 0, "avg": 1}  # TFC_COMM_SUM, TFC_COMM_AVG


def _op(op):
    try:
        return _OPS[op]
    except (KeyError, TypeError):
        raise ValueError("tfcore.distributed: op must be 'sum' or 'avg', got %r" % (op,)) from None


def init():
    """Join the job: under mpirun (or another MPI launcher) every rank of
    MPI_COMM_WORLD, otherwise this process alone (rank 0 of 1). Collective
    under MPI. Idempotent: later calls return the same communicator.
    Returns the communicator handle (a tfc_comm* cdata)."""
    global _comm, _atexit_registered
    with _lock:
        if _comm is not None:
            return _comm
        if _finalized:
            raise RuntimeError("tfcore.distributed.init: destroy() already finalized MPI in this process; "
                               "MPI cannot start twice")
        out = ffi.new("tfc_comm **")
        check(lib.tfc_comm_init(out))
        _comm = out[0]
        if not _atexit_registered:
            # mpirun reports an error for a rank that exits without MPI_Finalize.
            atexit.register(destroy)
            _atexit_registered = True
        return _comm


def is_initialized():
    """True between init() and destroy()."""
    return _comm is not None


def _get():
    c = _comm
    if c is None:
        raise RuntimeError("tfcore.distributed: call tfcore.distributed.init() first")
    return c


def destroy():
    """Release the module's communicator, every DistributedDataParallel
    wrapper and the communicator references of sharded optimizers (each is
    unusable afterwards). When libtfcore started MPI, this finalizes it, and
    init() cannot be called again. Registered with atexit by init(); calling
    it twice, or without init(), does nothing."""
    global _comm, _finalized
    with _lock:
        c = _comm
        if c is None:
            return
        for owner in list(_owners):
            owner._close()
        _owners.clear()
        single = lib.tfc_comm_size(c) == 1 and ffi.string(lib.tfc_comm_backend(c)).decode() == "single"
        _comm = None
        _finalized = _finalized or not single
        lib.tfc_comm_release(c)


def rank():
    """This process's rank, 0 .. world_size() - 1."""
    return int(lib.tfc_comm_rank(_get()))


def world_size():
    """Number of ranks in the job."""
    return int(lib.tfc_comm_size(_get()))


def backend():
    """What carries the collectives: 'single', or 'mpi (Open MPI v4.1.4, ...)'."""
    return ffi.string(lib.tfc_comm_backend(_get())).decode()


def set_timeout(seconds):
    """A collective that waits longer than seconds for its peers ends the
    whole job (naming the collective and rank) instead of hanging. Local to
    this rank: set it on every rank. Default $TFCORE_DIST_TIMEOUT, else 600."""
    check(lib.tfc_comm_set_timeout(_get(), float(seconds)))


def barrier():
    """Wait until every rank has called barrier()."""
    check(lib.tfc_barrier(_get()))


def _tensor(fn, t):
    if not isinstance(t, Tensor):
        raise TypeError("tfcore.distributed.%s: expected a tfcore Tensor, got %s" % (fn, type(t).__name__))
    return t


def all_reduce(t, op="sum"):
    """t becomes, in place, the sum ('sum') or average ('avg') of t over all
    ranks; returns t. f32, f64, bf16/f16 (summed in f32), i32, i64 ('avg'
    needs a float dtype)."""
    check(lib.tfc_all_reduce(_get(), _tensor("all_reduce", t)._h, _op(op)))
    return t


def broadcast(t, src=0):
    """t becomes, in place, rank src's t on every rank; returns t."""
    check(lib.tfc_broadcast(_get(), _tensor("broadcast", t)._h, int(src)))
    return t


def all_gather(t):
    """A new tensor: every rank's t laid end to end along dim 0, rank 0
    first ([d0, ...] gives [N*d0, ...]; a 0-d t gives [N])."""
    c = _get()
    _tensor("all_gather", t)
    n = int(lib.tfc_comm_size(c))
    shape = t.shape
    out = empty((n * shape[0],) + shape[1:] if shape else (n,), dtype=t.dtype)
    check(lib.tfc_all_gather(c, t._h, out._h))
    return out


def reduce_scatter(t, op="sum"):
    """The reverse of all_gather: t [N*d0, ...] is summed (or averaged) over
    ranks and rank r gets rows [r*d0, (r+1)*d0) as a new tensor [d0, ...]."""
    c = _get()
    _tensor("reduce_scatter", t)
    code = _op(op)
    n = int(lib.tfc_comm_size(c))
    shape = t.shape
    # A t whose dim 0 does not split over the ranks still goes to the library, with
    # the nearest out: its check refuses it on this rank and tells the other ranks,
    # so theirs fail at once instead of waiting for this one until the timeout.
    out = empty((shape[0] // n,) + shape[1:] if shape else (), dtype=t.dtype)
    check(lib.tfc_reduce_scatter(c, t._h, out._h, code))
    return out


class DistributedDataParallel:
    """Average the gradients of params over the ranks (tfc_ddp).

    At construction rank 0's parameter values are broadcast into every
    rank's params (collective: every rank passes the same shapes in the same
    order). Parameters are leaf f32/f64 CPU tensors with requires_grad.
    Gradients are all-reduced in buckets of about bucket_bytes (0: 25 MiB)
    during backward: the wrapper attaches to the calling thread's autograd
    tape (or to graph, a tfc_graph* cdata), replacing any
    tfcore.autograd.set_grad_hook. After each backward call finish() (alias
    sync()): it waits for the buckets and writes the average into every
    .grad. Every rank should hold the same number of rows so the average of
    the local mean losses' gradients is the global mean's gradient.
    """

    def __init__(self, params, bucket_bytes=0, graph=None, attach=True):
        c = _get()
        self.params = list(params)
        for p in self.params:
            if not isinstance(p, Tensor):
                raise TypeError("tfcore.distributed.DistributedDataParallel: parameters must be tfcore Tensors, "
                                "got %s" % type(p).__name__)
        handles = ffi.new("tfc_tensor *[]", [p._h for p in self.params]) if self.params else ffi.NULL
        out = ffi.new("tfc_ddp **")
        check(lib.tfc_ddp_new(c, handles, len(self.params), int(bucket_bytes), out))
        self._h = out[0]
        self._graph = None
        self._token = next(_tokens)
        _owners.add(self)
        if attach:
            self.attach(graph)

    def _handle(self):
        if self._h is None:
            raise RuntimeError("tfcore.distributed.DistributedDataParallel: used after close() or destroy()")
        return self._h

    def attach(self, graph=None):
        """Start bucket reductions during backward on graph (default: the
        calling thread's autograd tape), overlapping them with the rest of
        backward. Without it, finish() reduces everything after backward."""
        h = self._handle()
        g = _ag.graph() if graph is None else graph
        self._detach()
        check(lib.tfc_ddp_attach(h, g))
        _ag._claim_hook(g, self._token)
        self._graph = g  # keeps the graph alive while its hook points at this tfc_ddp

    def _detach(self):
        g, self._graph = self._graph, None
        if g is not None and _ag._release_hook(g, self._token):
            check(lib.tfc_graph_set_grad_hook(g, ffi.NULL, ffi.NULL))

    def finish(self):
        """After backward: wait for the reductions and replace every
        parameter's .grad with its average over ranks (a parameter without
        a gradient contributes zeros). Collective. Does nothing inside
        no_sync()."""
        check(lib.tfc_ddp_finish(self._handle()))

    sync = finish

    def set_sync(self, on):
        """on=False: backward passes only accumulate and finish() does
        nothing; on=True (default): the next backward and finish() average."""
        check(lib.tfc_ddp_set_sync(self._handle(), 1 if on else 0))

    @contextlib.contextmanager
    def no_sync(self):
        """Gradient accumulation (torch's DDP.no_sync()): backward passes
        inside only accumulate into .grad locally; the first backward after
        it, followed by finish(), averages the accumulated gradients."""
        self.set_sync(False)
        try:
            yield self
        finally:
            self.set_sync(True)

    def stats(self):
        """What was measured: syncs, buckets, bytes (all-reduced per rank),
        comm_s (seconds reducing) and exposed_s (seconds finish() waited;
        comm_s - exposed_s was hidden behind backward)."""
        st = ffi.new("tfc_ddp_stats *")
        st.struct_size = ffi.sizeof("tfc_ddp_stats")
        check(lib.tfc_ddp_get_stats(self._handle(), st))
        return {"syncs": int(st.syncs), "buckets": int(st.buckets), "bytes": int(st.bytes),
                "comm_s": float(st.comm_s), "exposed_s": float(st.exposed_s)}

    def _close(self):
        if self._h is None:
            return
        self._detach()
        h, self._h = self._h, None
        lib.tfc_ddp_release(h)
        _owners.discard(self)

    def close(self):
        """Detach from the graph and release the tfc_ddp (and its references
        to the parameters and the communicator)."""
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._close()
        return False

    def __del__(self):
        try:
            self._close()
        except Exception:  # noqa: BLE001 - nothing may escape a finalizer at interpreter exit
            pass


DDP = DistributedDataParallel


class _ShardedOptimizer:
    """What destroy() needs of a sharded Optimizer: to drop its handle (which
    holds a reference to the communicator) before MPI is finalized."""

    __slots__ = ("opt", "__weakref__")

    def __init__(self, opt):
        self.opt = weakref.ref(opt)

    def _close(self):
        opt = self.opt()
        if opt is not None and opt._h != ffi.NULL:
            h = opt._h
            opt._h = ffi.NULL  # a later step() reports a NULL optimizer instead of touching freed memory
            ffi.release(h)


_sharded = {}  # id(opt) -> _ShardedOptimizer (kept alive while the optimizer is)


def shard_optimizer(opt):
    """ZeRO stage 1: shard opt (a tfcore.optim optimizer) over the ranks, so
    each keeps about 1/N of the optimizer state. From then on opt.step()
    (and tfcore.optim clipping through the optimizer) reduce-scatter the
    gradients, update this rank's slice and all-gather the parameters: pass
    each rank's own un-averaged gradients (no DistributedDataParallel).
    Collective. Returns opt."""
    from .optim import Optimizer
    if not isinstance(opt, Optimizer):
        raise TypeError("tfcore.distributed.shard_optimizer: expected a tfcore.optim optimizer, got %s"
                        % type(opt).__name__)
    check(lib.tfc_optim_shard(opt._h, _get()))
    token = _ShardedOptimizer(opt)
    _sharded[id(opt)] = token
    _owners.add(token)
    weakref.finalize(opt, _sharded.pop, id(opt), None)
    return opt


def is_sharded(opt):
    """True when opt was sharded by shard_optimizer."""
    return bool(lib.tfc_optim_is_sharded(opt._h))


def gather_optimizer(opt, root=0):
    """The whole state of a sharded optimizer gathered on root: a new,
    unsharded optimizer of opt's class over the same parameters holding
    every parameter's state (save its state_dict() like any optimizer's);
    None on the other ranks. Collective."""
    out = ffi.new("tfc_optim **")
    check(lib.tfc_optim_gather(opt._h, int(root), out))
    if out[0] == ffi.NULL:
        return None
    from .optim import _Group
    new = type(opt).__new__(type(opt))
    new._h = ffi.gc(out[0], lib.tfc_optim_release)
    new.defaults = dict(opt.defaults)
    new.param_groups = []
    for g in opt.param_groups:
        ng = _Group(new, g._index, {})
        dict.update(ng, g)
        new.param_groups.append(ng)
    return new


__all__ = ["init", "is_initialized", "destroy", "rank", "world_size", "backend", "set_timeout", "barrier",
           "all_reduce", "broadcast", "all_gather", "reduce_scatter", "DistributedDataParallel", "DDP",
           "shard_optimizer", "is_sharded", "gather_optimizer"]
