"""A fix for a race in Numba's CUDA simulator, applied when perfkit chooses the simulator.

The simulator runs each CUDA thread of a block as a Python thread.  Its shared-memory arrays
(``FakeCUDAShared.array``) are looked up by the calling source line in a dict and created on
first use, with no lock: when two threads of a block reach the same ``cuda.shared.array`` line
for the first time together, both can miss, each create its own array and keep it for that
call.  The threads then no longer share memory, and a reduction silently gives a wrong result
once in a few thousand launches (found by fuzzing the normalization ladders).  A GPU has no
such race.  This replacement does the lookup under a lock, and finds the calling line with
``sys._getframe`` instead of formatting a whole traceback on every call (much faster).
"""
from __future__ import annotations

import sys
import threading

_LOCK = threading.Lock()
_applied = False


def shared_alloc(shared, shape, dtype, caller):
    """A block's static shared array for the ``cuda.shared.array`` call at ``caller``'s line:
    the one already made for that line, or a new one, under a lock (the fix); banks's recording
    allocator uses it too."""
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    key = (caller.f_code.co_filename, caller.f_lineno)
    with _LOCK:
        res = shared._allocations.get(key)
        if res is None:
            res = shared._allocations[key] = np.empty(shape, dtype)
    return res


def apply() -> None:
    """Patch ``FakeCUDAShared.array`` (idempotent)."""
    global _applied
    if _applied:
        return
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or (isinstance(shape, int) and shape == 0):
            return original(self, shape, dtype, alignment)  # errors and dynamic shared memory
        return shared_alloc(self, shape, dtype, sys._getframe(1))

    array.__doc__ = original.__doc__
    kernelapi.FakeCUDAShared.array = array
    _event_driven_blocks()
    _applied = True


def _event_driven_blocks() -> None:
    """Replace ``BlockManager.run``'s busy loop with waiting on a condition.

    The simulator's manager polls its threads in a ``while`` loop, holding the GIL its own CUDA
    threads need; every barrier of a 256-thread block waits for that loop to come round.  Here a
    thread tells the manager when it blocks in ``syncthreads`` or ends, and the manager sleeps
    until every live thread is blocked (release them all), one failed (abort all, raise its
    exception, as the original does) or all ended.  Same semantics, no polling: the
    normalization rungs' simulator runs take about half the time."""
    from numba.cuda.simulator import kernel as sk

    thread_run, thread_sync = sk.BlockThread.run, sk.BlockThread.syncthreads

    def run_thread(self):
        try:
            thread_run(self)
        finally:
            st = getattr(self._manager, "_pk_state", None)
            if st is not None:
                with st["cond"]:
                    st["live"] -= 1
                    st["failed"] = st["failed"] or (self if self.exception else None)
                    st["cond"].notify()

    def syncthreads(self):
        st = getattr(self._manager, "_pk_state", None)
        if st is None or self.abort:
            return thread_sync(self)
        self.syncthreads_blocked = True
        with st["cond"]:
            st["blocked"].append(self)
            st["cond"].notify()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def run_block(self, grid_point, *args):
        import numpy as np

        cond = threading.Condition()
        st = self._pk_state = {"cond": cond, "live": 0, "blocked": [], "failed": None}
        threads = []
        try:
            for block_point in np.ndindex(*self._block_dim):
                t = sk.BlockThread(lambda: self._f(*args), self, grid_point, block_point, self._debug)
                threads.append(t)
            st["live"] = len(threads)
            for t in threads:
                t.start()
            with cond:
                while True:
                    while not (st["failed"] or st["live"] == 0 or len(st["blocked"]) == st["live"]):
                        cond.wait()
                    if st["failed"] is not None:
                        for o in threads:
                            o.abort = True
                            o.syncthreads_blocked = False
                            o.syncthreads_event.set()
                        e = st["failed"].exception
                        raise e[0].with_traceback(e[1])
                    if st["live"] == 0:
                        break
                    for t in st["blocked"]:
                        t.syncthreads_blocked = False
                        t.syncthreads_event.set()
                    st["blocked"] = []
        finally:
            self._pk_state = None
        for t in threads:
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    sk.BlockThread.run, sk.BlockThread.syncthreads = run_thread, syncthreads
    sk.BlockManager.run = run_block
