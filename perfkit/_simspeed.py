"""Faster paths through Numba's CUDA simulator, applied with :mod:`perfkit._simfix`.

They change no result, only how much Python runs per simulated operation (most of the suite's
time and the ``ci`` notebooks' checks are simulated kernels).  Kept apart from ``_simfix`` on
purpose: that module's text is part of every bank-conflict store key (its race fix can change an
answer); nothing here can, so an edit here leaves the store's builds and bank simulations valid
(its kept estimates list this module among their producers: ``perfkit static refresh`` after an
edit).

* **Device-function calls.**  Each call of a ``@cuda.jit(device=True)`` function inside a kernel
  enters ``swapped_cuda_module`` (two locks, a generator context manager, an import) to point its
  module's ``cuda`` at the fake one, and leaves it on return.  The simulator runs one kernel at a
  time (``_push_kernel_context`` asserts it), so here a module is swapped on its first device call
  in a launch and restored when the launch ends: the same globals seen by the same code, once.
* **Array indexing and attributes inside kernels.**  A kernel sees each array argument through
  two wrappers (``FakeWithinKernelCUDAArray`` around ``FakeCUDAArray``); an element read or write
  goes through three Python calls and a type test, and ``arr.shape`` builds a new ``FakeShape``
  each time.  Here an element access reaches the NumPy array in one step (sub-arrays are wrapped
  exactly as before), and shape, strides, dtype, ndim and size, which no kernel can change, are
  looked up once per argument per launch.
* **A block's threads as greenlets.**  The simulator starts an OS thread per CUDA thread of every
  block and meets at each barrier through an ``Event`` per thread: about 120 us per thread and
  50 us per thread per barrier here, most of it in the kernel.  Here a block's threads take turns
  on the launching thread, each running to its next ``syncthreads`` (or its end) before the next
  starts (:func:`_green_blocks`).  A race-free kernel computes the same; the bank-conflict counts
  of every rung are the same as with OS threads (checked rung by rung when this was written).
* **Threads that wait on each other beyond barriers.**  A thread of a warp-specialized kernel
  waits on an mbarrier phase that another thread of its block completes (a producer's copies, a
  consumer's release), or at a barrier of some of the block's threads.  Under greenlets it must
  let the others run rather than spin: :func:`yield_to_block` parks it until its ``ready()``
  holds, and the scheduler finds a block where no thread can go on and raises, naming what each
  thread waits for, where a GPU would hang.  :func:`block_local` gives a block's twins a place
  for state of the whole block (a named barrier's arrivals).
* **Shared arrays.**  Every thread of a block calls ``cuda.shared.array`` and gets the block's
  one array for that line; after the first, a dict lookup (no lock, no dtype conversion).
* **Scalar casts.**  ``float32(x)`` in a simulated kernel is ``numba.types.Type.__call__``, which
  imports ``signature`` and makes an ABC instance check on every call before it casts; a plain
  Python or NumPy scalar goes straight to the cast here: the NumPy type an integer or float type
  casts with, looked up once per type, and a value already of that type returned as it is (an
  ``int32(i32(...))`` chain).  Measured on 2026-11-28 (cProfile, 2 cores): casts were 2.0 M of
  the 10.5 M Python calls of a simulated winograd_f4 float16 run, which took 13% less CPU with
  this module; 67 simulated rungs took 17% less.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager

_applied = False
#: the simulator's own BlockManager.run (a block's threads as OS threads), kept for tests
os_threads_run = None
#: attributes of an array argument that stay fixed for a launch (each wrapper is made per launch)
FIXED_ATTRS = frozenset({"shape", "strides", "dtype", "ndim", "size", "itemsize"})


def apply() -> None:
    """Install both fast paths (idempotent)."""
    global _applied
    if _applied:
        return
    _device_calls()
    _kernel_arrays()
    _scalar_casts()
    _shared_arrays()
    _thread_waits()
    _green_blocks()
    _applied = True


def _device_calls() -> None:
    from numba.cuda.simulator import kernel as sk

    held: dict[int, object] = {}  # id(module globals) -> the entered swap, for the current launch
    lock = threading.Lock()
    push = sk._push_kernel_context
    call = sk.FakeCUDAKernel.__call__

    @contextmanager
    def push_kernel_context(mod):
        with push(mod):
            try:
                yield
            finally:  # the launch is over: restore every module swapped during it
                with lock:
                    entered = list(held.values())
                    held.clear()
                for cm in entered:
                    cm.__exit__(None, None, None)

    def fast_call(self, *args):
        ctx = sk._kernel_context
        if ctx is None:  # a launch from the host, or a device function called outside a kernel
            return call(self, *args)
        gid = id(self.fn.__globals__)
        if gid not in held:
            with lock:
                if gid not in held:
                    cm = sk.swapped_cuda_module(self.fn, ctx)
                    cm.__enter__()
                    held[gid] = cm
        return self.fn(*args)

    fast_call.__doc__ = call.__doc__
    sk._push_kernel_context = push_kernel_context
    sk.FakeCUDAKernel.__call__ = fast_call


def _kernel_arrays() -> None:
    import numpy as np
    from numba.cuda.simulator.cudadrv import devicearray as da

    inner, outer = da.FakeCUDAArray, da.FakeWithinKernelCUDAArray
    wrapped = (np.ndarray, np.void)  # what FakeCUDAArray.__getitem__ wraps again
    getitem, setitem, getattr_ = outer.__getitem__, outer.__setitem__, outer.__getattr__

    def fast_getitem(self, idx):
        item = self.__dict__["_item"]
        if type(item) is not inner or type(item._ary) is not np.ndarray:  # a subclass may index its own
            return getitem(self, idx)  # way (banks's recording buffer names the kernel line past these frames)
        ret = item._ary[idx]
        if type(ret) in wrapped:
            return outer(inner(ret, stream=item.stream))
        return ret

    def fast_setitem(self, idx, val):
        item = self.__dict__["_item"]
        if type(item) is not inner or type(item._ary) is not np.ndarray:
            return setitem(self, idx, val)
        item._ary[idx] = val

    def cached_getattr(self, name):
        value = getattr_(self, name)
        if name in FIXED_ATTRS:  # found in the instance dict from now on: __getattr__ is skipped
            self.__dict__[name] = value
        return value

    outer.__getitem__, outer.__setitem__, outer.__getattr__ = fast_getitem, fast_setitem, cached_getattr


def _scalar_casts() -> None:
    import numpy as np
    from numba.core.types import abstract

    scalars = frozenset({int, float, bool, np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                         np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_})
    call = abstract.Type.__call__
    from numba.core.types import scalars as numba_scalars

    own_casts = {numba_scalars.Integer: numba_scalars.Integer.cast_python_value,
                 numba_scalars.Float: numba_scalars.Float.cast_python_value}

    def numpy_type(t):
        """(the NumPy scalar type ``t``'s cast makes, a memo of small ints cast to it), kept on
        ``t`` (numba interns its types): Integer and Float cast with ``getattr(np, name)(value)``;
        (None, None) for any other type."""
        to = memo = None
        own = own_casts.get(type(t))
        if own is not None and type(t).cast_python_value is own:
            to = getattr(np, t.name, None)
            memo = {} if type(t) is numba_scalars.Integer and to is not None else None
        t.__dict__["_perfkit_np_cast"] = to, memo
        return to, memo

    def fast_call(self, *args):
        if len(args) == 1:
            x = args[0]
            tx = type(x)
            if tx in scalars:  # never a Type: the cast, as the original does
                try:
                    to, memo = self._perfkit_np_cast
                except AttributeError:
                    to, memo = numpy_type(self)
                if to is None:
                    return self.cast_python_value(x)
                if tx is to:  # a NumPy scalar of that type already: itself (immutable, the same value)
                    return x
                if memo is not None and tx is int:  # loop indices and constants: made once each
                    r = memo.get(x)
                    if r is None:
                        r = to(x)
                        if -1024 <= x < 65536:  # bounded: a few MB at most
                            memo[x] = r
                    return r
                return to(x)
        return call(self, *args)

    fast_call.__doc__ = call.__doc__
    abstract.Type.__call__ = fast_call


def _shared_arrays() -> None:
    """A block's second and later ``cuda.shared.array`` calls at a line: the array made by the
    first (the dict holds it; :func:`perfkit._simfix.shared_alloc` made it under its lock), looked
    up before the lock, the dtype conversion and the imports a first call needs."""
    import sys

    from numba.cuda.simulator import kernelapi

    from . import _simfix

    first = kernelapi.FakeCUDAShared.array  # _simfix's: dynamic shared memory and errors too
    getframe = sys._getframe

    def array(self, shape, dtype, alignment=None):
        if alignment is None and not (isinstance(shape, int) and shape == 0):
            caller = getframe(1)
            hit = self._allocations.get((caller.f_code.co_filename, caller.f_lineno))
            return hit if hit is not None else _simfix.shared_alloc(self, shape, dtype, caller)
        return first(self, shape, dtype, alignment)

    array.__doc__ = first.__doc__
    kernelapi.FakeCUDAShared.array = array


class GreenThread:
    """One simulated CUDA thread run as a greenlet: what the simulator's ``BlockThread`` offers a
    kernel (``threadIdx``, ``blockIdx``, ``thread_id``, ``syncthreads`` and its reductions),
    without an OS thread.  State a twin keeps per CUDA thread lives on this object."""

    def __init__(self, manager, target, blockIdx, threadIdx, debug):
        from numba.cuda.simulator.kernel import Dim3

        self._manager = manager
        self.blockIdx = Dim3(*blockIdx)
        self.threadIdx = Dim3(*threadIdx)
        bd = manager._block_dim
        self.thread_id = threadIdx[0] + bd[0] * (threadIdx[1] + bd[1] * threadIdx[2])
        self.exception = None
        self.abort = False
        self.debug = debug
        self.syncthreads_blocked = False
        self.greenlet = None
        self._target = target
        self.waiting = None  # (ready, what) while parked in yield_to_block
        self.block_local = None  # the block's dict (block_local())

    def run(self):
        try:
            if self.debug:
                import numpy as np

                with np.errstate(divide="raise"):
                    self._target()
            else:
                self._target()
        except Exception as e:  # reported as the simulator's BlockThread reports it
            import sys

            tid, ctaid = "tid=%s" % list(self.threadIdx), "ctaid=%s" % list(self.blockIdx)
            msg = "%s %s" % (tid, ctaid) if str(e) == "" else "%s %s: %s" % (tid, ctaid, e)
            self.exception = (type(e)(msg), sys.exc_info()[2])

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        self.syncthreads_blocked = True
        self.greenlet.parent.switch()  # back to the block's scheduler until every thread is here
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def is_alive(self):
        return self.greenlet is not None and not self.greenlet.dead

    def __str__(self):
        return "Thread <<<%s, %s>>>" % (self.blockIdx, self.threadIdx)


def _borrow_reductions() -> None:
    from numba.cuda.simulator import kernel as sk

    for name in ("syncthreads_count", "syncthreads_and", "syncthreads_or"):
        setattr(GreenThread, name, getattr(sk.BlockThread, name))


def _green_blocks() -> None:
    """Run a block's CUDA threads as greenlets on the launching thread, not as OS threads.

    The simulator starts one ``threading.Thread`` per CUDA thread of every block (about 120 us
    each here) and meets at each ``syncthreads`` through an ``Event`` per thread (about 50 us per
    thread per barrier, mostly in the kernel's futex calls).  A block's threads only ever run one
    at a time under the GIL, so the same can be had cooperatively: each thread runs until it
    reaches a barrier, parks (:func:`yield_to_block`) or ends, then the next; when every live
    thread waits at the barrier, all go on (:func:`_schedule`).  A race-free kernel gives the same results (a race gives some answer, as before, now the
    same one each run).  ``threading.current_thread()`` answers the simulated thread inside a
    block, as the simulator's own code and banks's recording expect.  Without the ``greenlet``
    package the simulator's threads are used."""
    try:
        import greenlet
    except ImportError:  # pragma: no cover - greenlet is a dependency; the OS threads still work
        return
    import numpy as np
    from numba.cuda.simulator import kernel as sk
    from numba.cuda.simulator import kernelapi

    _borrow_reductions()
    getcurrent = greenlet.getcurrent
    os_current = threading.current_thread

    def current_thread():
        t = getattr(getcurrent(), "cuda_thread", None)
        return t if t is not None else os_current()

    current_thread.__doc__ = os_current.__doc__
    threading.current_thread = current_thread

    def run_block(self, grid_point, *args):
        f = self._f
        cluster = getattr(f, "pk_cluster_dims", None)
        if cluster is not None and cluster != (1, 1, 1):
            return _run_cluster(self, grid_point, cluster, args)
        threads = []
        local: dict = {}
        for block_point in np.ndindex(*self._block_dim):
            t = GreenThread(self, lambda: f(*args), grid_point, block_point, self._debug)
            g = t.greenlet = greenlet.greenlet(t.run)
            g.cuda_thread = t
            t.block_local = local
            threads.append(t)
        _schedule(threads)

    def _run_cluster(self, grid_point, cluster, args):
        """The whole cluster whose first block is ``grid_point`` (the launch's other blocks of it
        return at once): every block its own shared memory and block state, their threads in one
        scheduler, each knowing its rank and the cluster's state (what the cluster twins of
        perfkit.kernels._ptx_hopper read)."""
        if any(g % c for g, c in zip(self._grid_dim, cluster)):  # the driver refuses such a launch
            raise RuntimeError(f"a grid of {tuple(self._grid_dim)} blocks is not whole clusters of {tuple(cluster)}")
        if any(g % c for g, c in zip(grid_point, cluster)):
            return  # ran with its cluster's first block
        ctx = sk._kernel_context
        nthreads = int(np.prod(self._block_dim))
        shared = []
        state = {"dims": tuple(cluster), "shared": shared, "threads": nthreads}
        threads = []
        for dz, dy, dx in np.ndindex(cluster[2], cluster[1], cluster[0]):  # rank: x fastest
            point = (grid_point[0] + dx, grid_point[1] + dy, grid_point[2] + dz)
            mem = kernelapi.FakeCUDAShared(ctx._shared._dynshared_size)
            shared.append(mem)
            local: dict = {}
            for block_point in np.ndindex(*self._block_dim):
                t = GreenThread(self, lambda: self._f(*args), point, block_point, self._debug)
                g = t.greenlet = greenlet.greenlet(t.run)
                g.cuda_thread = t
                t.block_local = local
                t.pk_shared, t.cluster_rank, t.cluster_local, t.cluster_dims = mem, len(shared) - 1, state, state["dims"]
                threads.append(t)
        _schedule(threads)

    module_shared = kernelapi.FakeCUDAModule.shared

    def shared(self):  # a block of a cluster has its own (the launch's is every other block's)
        mem = getattr(current_thread(), "pk_shared", None)
        return module_shared.fget(self) if mem is None else mem

    kernelapi.FakeCUDAModule.shared = property(shared, doc=module_shared.__doc__)

    global os_threads_run
    os_threads_run = sk.BlockManager.run
    run_block.__doc__ = sk.BlockManager.run.__doc__
    sk.BlockManager.run = run_block


def _schedule(threads: list) -> None:
    """Run a block's greenlets: each runnable thread runs to its next barrier, its next
    :func:`yield_to_block` or its end, in thread order.  When none is runnable: if every live
    thread is at ``syncthreads``, all go on; else the parked threads whose ``ready()`` holds go on;
    if none does, the parked threads are resumed once anyway (a ``try_wait`` that times out on a
    GPU: a kernel may do other work before it polls again), and if that changes nothing (no
    thread ended, reached the barrier or made another's wait ready) the block is deadlocked."""
    runnable = deque(threads)
    at_sync, parked = [], []
    live = len(threads)
    # the threads of a cluster's blocks share this scheduler; syncthreads is each block's own
    block_live: dict = {}
    for t in threads:
        block_live[id(t.block_local)] = block_live.get(id(t.block_local), 0) + 1
    stalled = False  # the parked threads were resumed with nothing ready, and nothing moved since
    while live:
        while runnable:
            t = runnable.popleft()
            t.syncthreads_blocked = False
            t.waiting = None
            t.greenlet.switch()
            if t.exception:
                for o in threads:
                    o.abort = True
                raise t.exception[0].with_traceback(t.exception[1])
            if t.greenlet.dead:
                live -= 1
                block_live[id(t.block_local)] -= 1
                stalled = False
            elif t.waiting is not None:
                parked.append(t)
            else:
                at_sync.append(t)
                stalled = False
        if not live:
            break
        if at_sync and len(at_sync) == live:  # every live thread at the barrier: all go on
            runnable.extend(at_sync)
            at_sync = []
            continue
        if len(block_live) > 1 and at_sync:  # a block of a cluster whose live threads are all at its barrier
            waiting: dict = {}
            for t in at_sync:
                waiting[id(t.block_local)] = waiting.get(id(t.block_local), 0) + 1
            done = {b for b, n in waiting.items() if n == block_live[b]}
            if done:
                runnable.extend(t for t in at_sync if id(t.block_local) in done)
                at_sync = [t for t in at_sync if id(t.block_local) not in done]
                stalled = False
                continue
        if not parked:  # pragma: no cover - live threads are at the barrier, parked or runnable
            raise RuntimeError("the block's scheduler lost track of its threads")
        go = [t.waiting[0]() for t in parked]
        if any(go):
            runnable.extend(t for t, ok in zip(parked, go) if ok)
            parked = [t for t, ok in zip(parked, go) if not ok]
            stalled = False
            continue
        if stalled:
            for o in threads:
                o.abort = True
            raise DeadlockError(_deadlock_message(threads, parked, at_sync))
        stalled = True
        runnable.extend(parked)
        parked = []


class DeadlockError(RuntimeError):
    """Every live thread of a simulated block waits for something no thread can complete."""


def _deadlock_message(threads, parked, at_sync) -> str:
    why = {}

    def block(t):  # in a cluster, which block a thread id is of
        return f"(block {t.cluster_rank} of the cluster) " if getattr(t, "cluster_local", None) is not None else ""

    for t in parked:
        what = t.waiting[1]
        why.setdefault(block(t) + str(what() if callable(what) else what), []).append(t.thread_id)
    for t in at_sync:
        why.setdefault(block(t) + "at syncthreads (bar.sync 0, every thread of the block)", []).append(t.thread_id)
    b = threads[0].blockIdx
    lines = [f"  thread{'s' if len(ids) > 1 else ''} {_ranges(ids)}: {w}" for w, ids in why.items()]
    where = f"block ({b.x}, {b.y}, {b.z})"
    if getattr(threads[0], "cluster_local", None) is not None:
        where = f"the cluster of {len(threads[0].cluster_local['shared'])} blocks from {where}"
    return (f"deadlock in {where}: no live thread can go on (a GPU would hang here); "
            "they wait on\n" + "\n".join(lines))


def _ranges(ids) -> str:
    ids, out = sorted(ids), []
    start = prev = ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(out)


#: under the simulator's OS threads (no greenlet), how long a thread polls a wait that does not
#: complete before it gives up (no scheduler there to prove a deadlock)
OS_THREAD_WAIT_S = 60.0


def yield_to_block(ready, what) -> bool:
    """Let the other threads of this simulated block run until ``ready()`` holds (or, once, until
    none of them can go on: then the caller finds its condition still false and polls again, as
    after a GPU's ``try_wait`` times out).  ``what``: a string or a callable that says what the
    thread waits for, for the deadlock error.  False when there is no block to yield to (a
    twin called from the host): nothing can change, the caller decides.

    Under greenlets the thread parks and the block's scheduler resumes it; under the
    simulator's OS threads (no greenlet package) it polls ``ready()`` and raises after
    :data:`OS_THREAD_WAIT_S` seconds without it.  Both are the simulated thread's ``park``
    method, which twins call through ``threading.current_thread()`` (as they call its
    ``syncthreads``): they import nothing from here, so that this module's text stays out of the
    rungs' source closures (:mod:`perfkit.static`)."""
    park = getattr(threading.current_thread(), "park", None)
    return park is not None and park(ready, what)


def block_local() -> dict | None:
    """A dict shared by the threads of the current simulated block (fresh for every block), for
    twins that keep state of the whole block; None outside a block (the host).  The simulated
    thread's ``block_state`` method."""
    state = getattr(threading.current_thread(), "block_state", None)
    return None if state is None else state()


def _green_park(self, ready, what) -> bool:
    self.waiting = (ready, what)
    self.greenlet.parent.switch()
    if self.abort:
        raise RuntimeError("abort flag set while waiting")
    return True


def _os_park(self, ready, what) -> bool:
    deadline = time.monotonic() + OS_THREAD_WAIT_S
    while not ready():
        if self.abort:
            raise RuntimeError("abort flag set while waiting")
        if time.monotonic() > deadline:
            w = what() if callable(what) else what
            raise DeadlockError(f"{self}: no progress in {OS_THREAD_WAIT_S:g} s waiting on {w} (the simulator's OS "
                                "threads, without greenlet, cannot prove a deadlock: probably one)")
        time.sleep(1e-4)
    return True


def _os_block_state(self) -> dict:
    per_block = self._manager.__dict__.setdefault("pk_block_local", {})  # the manager runs the blocks one by one
    b = self.blockIdx
    return per_block.setdefault((b.x, b.y, b.z), {})


def _thread_waits() -> None:
    """``park`` and ``block_state`` on both kinds of simulated thread (see :func:`yield_to_block`)."""
    from numba.cuda.simulator import kernel as sk

    GreenThread.park = _green_park
    GreenThread.block_state = lambda self: self.block_local
    sk.BlockThread.park = _os_park
    sk.BlockThread.block_state = _os_block_state
