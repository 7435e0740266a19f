"""The kernels as they were at an earlier commit, for comparing a model with old measurements.

A record in ``data/results/`` was measured on the code of its commit
(``provenance.git_commit``).  Where a rung's kernel code has changed since
(:func:`perfkit.lesson.source_changed_since`), estimating today's kernel and comparing with that
record compares two different programs.  :func:`variant_at` rebuilds the rung as it was: it
writes ``perfkit/kernels/`` of that commit (``git show``) into a cache folder as the package
``perfkit_at_<commit>.kernels`` and imports it, so it can be compiled
(:mod:`perfkit.anatomy`), bank-simulated (:mod:`perfkit.banks`) and estimated
(:func:`perfkit.model.estimate`) like a rung of today's ladders.

What the old kernels import from outside ``perfkit/kernels`` (``perfkit.backend``, the
``Traffic`` of ``perfkit.model``, ``perfkit.anatomy``) is today's module, and ``kernels/base.py``
(the Problem / Variant / Launch contract) is today's too, so that old rungs are Variants to
today's tools; the kernels, their launch plans and their declared traffic are the old ones.
Where that cannot work (no git, the commit unknown here, an old module that no longer imports),
:func:`variant_at` returns ``None`` and says why in :func:`why_not`.
"""
from __future__ import annotations

import functools
import importlib
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

from . import cache
from .kernels import registry

__all__ = ["variant_at", "kernels_at", "why_not", "package_name"]

_WHY: dict = {}


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _cache_root() -> Path:
    return cache.folder("history")


def package_name(commit: str) -> str:
    return f"perfkit_at_{commit[:12]}"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=_repo_root(), capture_output=True, text=True, timeout=60)


def why_not(commit: str) -> str | None:
    """Why the kernels at ``commit`` could not be loaded (``None`` if they were, or were not tried)."""
    return _WHY.get(commit[:12])


_ALIASES = ("backend", "model", "anatomy", "banks", "occupancy", "specs", "_npcompat", "_simfix")

_INIT = '''"""perfkit/kernels as at commit {commit} (written by perfkit.history; do not edit)."""
import importlib as _il
import sys as _sys

for _n in {aliases!r}:
    try:
        _m = _il.import_module("perfkit." + _n)
    except Exception:  # noqa: BLE001
        continue
    _sys.modules[__name__ + "." + _n] = _m
    globals()[_n] = _m
'''

_KINIT = '''"""perfkit/kernels as at commit {commit}: base.py is today's (the contract), the rest as then."""
import sys as _sys

import perfkit.kernels.base as _base

_sys.modules[__name__ + ".base"] = _base
base = _base
'''


@functools.lru_cache(maxsize=8)
def _materialize(commit: str) -> tuple[Path, str] | None:
    """Write ``perfkit/kernels`` of ``commit`` under the cache: (the folder to put on sys.path,
    the full commit)."""
    key = commit[:12]
    r = _git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if r.returncode != 0:
        _WHY[key] = f"commit {commit} is not in this repository's history (git rev-parse failed)"
        return None
    full = r.stdout.strip()
    root = _cache_root() / full[:12]
    pkg = root / package_name(full)
    if not (pkg / ".complete").exists():
        ls = _git("ls-tree", "-r", "--name-only", full, "perfkit/kernels")
        if ls.returncode != 0 or not ls.stdout.strip():
            _WHY[key] = f"no perfkit/kernels at {full[:12]}"
            return None
        # written into a fresh folder and renamed into place: parallel test workers never see
        # half a package
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        for rel in ls.stdout.split():
            if not rel.endswith(".py"):
                continue
            show = _git("show", f"{full}:{rel}")
            if show.returncode != 0:
                _WHY[key] = f"git show {full[:12]}:{rel} failed: {show.stderr.strip()[:120]}"
                shutil.rmtree(tmp, ignore_errors=True)
                return None
            sub = Path(rel).relative_to("perfkit")
            dst = tmp / sub
            dst.parent.mkdir(parents=True, exist_ok=True)
            text = show.stdout
            if sub.as_posix() == "kernels/__init__.py":
                text = _KINIT.format(commit=full[:12]) + "\n" + text
            elif sub.as_posix() == "kernels/base.py":
                text = "from perfkit.kernels.base import *  # noqa: F401,F403  (today's contract)\n"
            dst.write_text(text, encoding="utf-8")
        (tmp / "__init__.py").write_text(_INIT.format(commit=full[:12], aliases=_ALIASES), encoding="utf-8")
        (tmp / ".complete").write_text(full)
        try:
            os.rename(tmp, pkg)
        except OSError:  # another process got there first
            shutil.rmtree(tmp, ignore_errors=True)
        if not (pkg / ".complete").exists():
            _WHY[key] = f"could not write the kernels at {full[:12]} under {root}"
            return None
    return root, full


def kernels_at(commit: str):
    """The package ``perfkit_at_<commit>.kernels`` (``perfkit/kernels`` as at ``commit``), or ``None``."""
    got = _materialize(commit)
    if got is None:
        return None
    root, full = got
    s = str(root)
    if s not in sys.path:
        sys.path.insert(0, s)
    # the compiler runs in a child process (perfkit.anatomy): it must find the package too
    pp = os.environ.get("PYTHONPATH", "")
    if s not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = s + (os.pathsep + pp if pp else "")
    name = package_name(full)
    try:
        return importlib.import_module(name + ".kernels")
    except Exception as exc:  # noqa: BLE001
        _WHY[commit[:12]] = f"importing the kernels at {commit[:12]} failed: {exc.__class__.__name__}: {exc}"
        return None


def variant_at(commit: str, op: str, name: str, config: dict | None = None):
    """The rung ``name`` of ``op``'s ladder as it was at ``commit`` (with ``config`` when it
    matches the rung's fields), and that commit's module (for its ``Problem``); ``(None, None)``
    when it cannot be rebuilt (see :func:`why_not`)."""
    pk = kernels_at(commit)
    if pk is None:
        return None, None
    modname = registry.module_name(op, pk.__name__)
    try:
        mod = importlib.import_module(modname)
    except Exception as exc:  # noqa: BLE001
        _WHY[commit[:12]] = f"importing {modname} failed: {exc.__class__.__name__}: {exc}"
        return None, None
    for v in getattr(mod, "LADDER", []):
        if v.name == name:
            if config and list(config) == list(v.config):
                try:
                    return type(v)(**config), mod
                except Exception:  # noqa: BLE001
                    return v, mod
            return v, mod
    return None, mod
