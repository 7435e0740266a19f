"""NumPy compatibility, applied by ``import perfkit`` before ``numba.cuda`` is first imported.

NumPy 2.5 removed ``numpy.row_stack`` (deprecated since 2.0 as an alias of ``numpy.vstack``).
numba-cuda 0.30.4 still registers an overload for it while its array support loads at the first
kernel compile (``overload(np.row_stack)`` in ``numba/cuda/np/arrayobj.py``), so with NumPy 2.5
every compile raises ``AttributeError: module 'numpy' has no attribute 'row_stack'``.

:func:`apply` puts the alias back, only when the name is missing, and records that it did in
:data:`APPLIED`.  It changes nothing where NumPy still has the name (NumPy < 2.5, which
pyproject.toml pins); it exists for machines whose image already ships a newer NumPy (the lent
GPU machines have 2.5.2).
"""
from __future__ import annotations

import numpy

__all__ = ["apply", "APPLIED"]

#: names this module added to numpy in this process (empty where nothing was missing)
APPLIED: list[str] = []


def apply() -> list[str]:
    """Add ``numpy.row_stack = numpy.vstack`` if NumPy lacks it; return the names added."""
    if not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack
        if "row_stack" not in APPLIED:
            APPLIED.append("row_stack")
    return list(APPLIED)
