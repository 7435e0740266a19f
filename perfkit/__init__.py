"""perfkit: a hands-on GPU performance-engineering workbook.

Importing perfkit decides, once, between a real GPU and Numba's CUDA simulator (see
:mod:`perfkit.backend`); import it before the first ``from numba import cuda``.
"""
from . import _npcompat

_npcompat.apply()  # NumPy 2.5 dropped numpy.row_stack, which numba-cuda 0.30 still registers

from . import backend  # noqa: E402

import os  # noqa: E402

# the banner once a process; a worker a notebook starts (its Dask cluster) chooses silently, since
# its stderr reaches the page that printed the banner already
backend.choose(verbose=not os.environ.get("PERFKIT_QUIET_BACKEND"))
if backend.is_simulator():  # make the simulator's shared-memory allocation thread-safe
    from . import _simfix, _simspeed

    _simfix.apply()
    _simspeed.apply()  # faster simulated device calls and array accesses, the same results

__version__ = "0.1.0"
__all__ = ["backend", "__version__"]
