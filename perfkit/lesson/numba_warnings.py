"""Numba's performance warnings shown once per kind in a notebook, the repeats counted."""
from __future__ import annotations

import re
import warnings

import pandas as pd


class WarningLog:
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self.installed = False
        self._orig = None


_WARN = WarningLog()


def _warning_kind(message: str) -> str:
    return re.sub(r"\d+", "N", str(message).splitlines()[0])[:120]


def quiet_numba_warnings(show_first: bool = True):
    """Numba's performance warnings (grid too small, host arrays copied per launch...) printed
    once per kind, the repeats counted (see :func:`numba_warning_summary`).  Call at the top
    of a notebook; other warnings are untouched.  Idempotent."""
    try:
        from numba.core.errors import NumbaPerformanceWarning
    except ImportError:  # pragma: no cover
        return
    if _WARN.installed:
        return
    _WARN.installed = True
    orig = warnings.showwarning
    _WARN._orig = orig

    def show(message, category, filename, lineno, file=None, line=None):
        if isinstance(category, type) and issubclass(category, NumbaPerformanceWarning):
            kind = _warning_kind(message)
            _WARN.counts[kind] = _WARN.counts.get(kind, 0) + 1
            if _WARN.counts[kind] == 1:
                _WARN.examples[kind] = str(message)
                if show_first:
                    import sys

                    print(f"NumbaPerformanceWarning (shown once; repeats are counted, "
                          f"lesson.numba_warning_summary() lists them): {str(message).strip()}", file=sys.stderr)
            return
        return orig(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    warnings.filterwarnings("always", category=NumbaPerformanceWarning)


def numba_warning_summary() -> pd.DataFrame:
    """How many of each kind of Numba performance warning were raised since
    :func:`quiet_numba_warnings`, with one example message."""
    return pd.DataFrame([{"warning": k, "times": n, "example": _WARN.examples.get(k, "")}
                         for k, n in sorted(_WARN.counts.items(), key=lambda kv: -kv[1])])
