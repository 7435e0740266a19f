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


def apply() -> None:
    """Patch ``FakeCUDAShared.array`` (idempotent)."""
    global _applied
    if _applied:
        return
    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    original = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or (isinstance(shape, int) and shape == 0):
            return original(self, shape, dtype, alignment)  # errors and dynamic shared memory
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with _LOCK:
            res = self._allocations.get(key)
            if res is None:
                res = self._allocations[key] = np.empty(shape, dtype)
        return res

    array.__doc__ = original.__doc__
    kernelapi.FakeCUDAShared.array = array
    _applied = True
