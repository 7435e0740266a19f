"""The static store: answers that need only the compiler and the simulator, shipped in the repository.

A rung's anatomy (its build for a target: registers, shared memory, spills, the SASS the model
reads) and its access simulation (bank conflicts, coalescing) have one answer per (kernel code,
problem, target, tool versions).  Computing them costs ~10 s a rung cold (NVVM, ptxas, the
simulator); the store in ``data/static/<kind>/<key>.json`` holds them so that a fresh clone
answers in milliseconds.

* A lookup (:func:`get`) goes local cache -> store -> compute (the caller computes and caches
  locally).  An entry is used only where its tool versions are the ones installed (another
  compiler may build other code); otherwise the answer is computed as if no entry existed.
* Keys hash what the answer depends on (the rung's class and config, the problem, the target,
  the source files the rung's code can reach, by their path inside the package), never an absolute
  path, so a clone anywhere finds the same entries.
* Nothing is written into the repository unless asked: ``perfkit static refresh`` (or
  ``PERFKIT_STATIC_WRITE=1``) writes entries; refresh also drops the entries no target uses.
* :func:`targets` is the list the store must cover (every rung of every ladder at its example
  problem, for sm_90); ``tests/test_static.py`` fails, naming the rung, where one has no entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from . import paths

STORE = paths.DATA / "static"
KINDS = ("anatomy", "banks")
#: the target the store covers (the H100 and H200 the records come from)
CC = (9, 0)


class StaticError(RuntimeError):
    pass


def store_dir() -> Path:
    return Path(os.environ.get("PERFKIT_STATIC_DIR") or STORE)


def key(doc) -> str:
    """The store key of a JSON-able description of what an answer depends on."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def writing() -> bool:
    """True while the store is being refreshed (entries computed now are written to it)."""
    return os.environ.get("PERFKIT_STATIC_WRITE") == "1"


def _path(kind: str, k: str) -> Path:
    if kind not in KINDS:
        raise StaticError(f"no store kind {kind!r}: one of {', '.join(KINDS)}")
    return store_dir() / kind / f"{k}.json"


def has(kind: str, k: str) -> bool:
    return _path(kind, k).exists()


def get(kind: str, k: str, tools: dict | None = None):
    """The stored answer of ``kind`` under key ``k``, or None (no entry, a damaged one, or one
    made with other tool versions than ``tools``)."""
    p = _path(kind, k)
    if not p.exists():
        return None
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    if tools is not None and doc.get("tools") != tools:
        return None
    _USED.add((kind, k))
    return doc.get("answer")


def put(kind: str, k: str, answer, *, what: str, tools: dict | None = None) -> Path | None:
    """Write an entry (only while :func:`writing`); returns its path, or None."""
    _USED.add((kind, k))
    if not writing():
        return None
    p = _path(kind, k)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {"kind": kind, "key": k, "what": what, "tools": tools, "answer": answer}
    fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=0, sort_keys=True)
        f.write("\n")
    os.replace(tmp, p)
    return p


#: (kind, key) of every entry read or written in this process: what refresh keeps
_USED: set = set()


def used() -> set:
    """(kind, key) of every entry this process read or wrote."""
    return set(_USED)


def entries(kind: str) -> list[Path]:
    return sorted((store_dir() / kind).glob("*.json"))


# --- what the store covers ------------------------------------------------------------------------
def targets(ops=None) -> list:
    """(op, variant, problem) for every non-library rung of every ladder (or of ``ops``) at the
    rung's own example problem: what the notebooks' cards and the model's estimates compile."""
    from .kernels import registry

    out = []
    for op in (ops or registry.OPS):
        mod = registry.module(op)
        base = mod.EXAMPLE_PROBLEM
        for v in mod.LADDER:
            if v.oracle:
                continue
            p = v.example(base) if hasattr(v, "example") else base
            out.append((op, v, p))
    return out


def missing(ops=None) -> list[str]:
    """``"<op> <rung label> @ <problem>"`` for every target whose build has no entry: what
    ``perfkit static refresh`` must be run for."""
    from . import anatomy

    return [f"{op} {v.label} @ {p.label}" for op, v, p in targets(ops)
            if not has("anatomy", anatomy.static_key(v, p, CC))]
