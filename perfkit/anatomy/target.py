"""The anatomy's targets and tools: which compute capabilities it builds for, where ``cuobjdump``
is, the tool versions that key every build, and its errors."""
from __future__ import annotations

import functools
from pathlib import Path

from .. import occupancy as occ
from ..kernels.base import UnsupportedProblem


SUPPORTED_CC = [cc for cc in occ.LIMITS if cc >= (7, 5)]  # numba-cuda 0.30 compiles 7.5 and up


class AnatomyError(RuntimeError):
    """A rung cannot be inspected for the asked target; the message names both."""


class UnsupportedRung(AnatomyError, UnsupportedProblem):
    """The rung cannot take this (valid) problem at all (its ``supports`` says no): both an
    :class:`AnatomyError` and the rung's own :class:`~perfkit.kernels.base.UnsupportedProblem`,
    so a caller that skips unsupported problems (``except UnsupportedProblem``) skips it in
    ``inspect`` and ``model.estimate`` alike."""


# --- target and tools ------------------------------------------------------------------------
def check_cc(cc) -> tuple[int, int]:
    try:
        cc = tuple(int(x) for x in (cc.split(".") if isinstance(cc, str) else cc))
    except (TypeError, ValueError, AttributeError):
        raise AnatomyError(f"target compute capability {cc!r} is malformed; use e.g. (9, 0) or '9.0'") from None
    if len(cc) != 2 or cc not in SUPPORTED_CC:
        why = " (CUDA 13 and numba-cuda 0.30 no longer build for sm_70)" if cc == (7, 0) else ""
        raise AnatomyError(f"target compute capability {'.'.join(map(str, cc))} is not supported{why}; "
                           f"supported: {', '.join(f'{a}.{b}' for a, b in SUPPORTED_CC)}")
    return cc


def tool_path(name: str) -> str:
    """``cuobjdump`` / ``nvdisasm`` from the nvidia-cuda-* wheels (or PATH)."""
    import nvidia

    for base in nvidia.__path__:
        for sub in ("cu13", "cuda_cuobjdump", "cuda_nvdisasm"):
            p = Path(base) / sub / "bin" / name
            if p.exists():
                return str(p)
    import shutil

    found = shutil.which(name)
    if not found:
        raise AnatomyError(f"{name} not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    return found


def versions() -> dict:
    return dict(_versions())


@functools.lru_cache(maxsize=1)  # installed packages do not change under a running process (8 lookups a call)
def _versions() -> tuple:
    from importlib import metadata

    out = {}
    for pkg in ("numba", "numba-cuda", "cuda-bindings", "cuda-core", "nvidia-nvjitlink", "nvidia-nvvm",
                "nvidia-cuda-cuobjdump", "llvmlite"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return tuple(out.items())

