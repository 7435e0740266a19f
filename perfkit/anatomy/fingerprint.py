"""The per-kernel build cache's key: what identifies a kernel to the compiler (its code, its
closure's values, the globals it names, recursively), written down as JSON-able data; a kernel
naming an object of a kind this cannot write down is built every time."""
from __future__ import annotations

import functools
import hashlib
import json
import types
from pathlib import Path

from .. import static
from .target import versions


class Uncacheable(Exception):
    """A kernel whose identity cannot be written down (it names an object of a kind not known)."""


def _code_fp(code, depth: int, seen: dict) -> list:
    """A code object by its bytecode, flags, argument counts, names and constants (nested code
    objects: the same)."""
    consts = []
    for c in code.co_consts:
        consts.append(_code_fp(c, depth + 1, seen) if hasattr(c, "co_code") else fingerprint_of(c, depth + 1, seen))
    return [hashlib.sha256(code.co_code).hexdigest(), code.co_flags, code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, list(code.co_names), list(code.co_varnames), list(code.co_freevars),
            list(code.co_cellvars), consts]


def _code_names(code) -> set:
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            out |= _code_names(c)
    return out


#: modules a kernel may name whose contents are pinned by their versions (in the key's tools)
#: or by the language: named, not walked
_LIBRARY_MODULES = ("numba", "llvmlite", "numpy", "math", "cmath", "operator", "cuda", "builtins", "functools")


def _is_library(modname: str) -> bool:
    return modname.split(".")[0] in _LIBRARY_MODULES


def _func_fp(fn, depth: int, seen: dict) -> list:
    """A Python function as Numba compiles it: its code, its closure's values, its defaults and
    the values of the globals it names (functions and kernels it calls: the same, recursively;
    a module of the project: the attributes the code names).  A function met again is named
    by the order it was first met in, which tells apart two functions of one name (a factory's)."""
    if id(fn) in seen:
        return ["again", seen[id(fn)]]
    seen[id(fn)] = len(seen)
    code = fn.__code__
    names = _code_names(code)

    def value(v):
        if isinstance(v, types.ModuleType) and not _is_library(v.__name__):
            # Numba freezes ``mod.ATTR`` as a constant: the attributes the code names
            return ["module", v.__name__, [[a, fingerprint_of(getattr(v, a), depth + 1, seen)]
                                           for a in sorted(names) if hasattr(v, a)]]
        return fingerprint_of(v, depth + 1, seen)

    cells = [value(c.cell_contents) if _cell_full(c) else "empty" for c in (fn.__closure__ or ())]
    g = fn.__globals__
    out = [[n, value(g[n])] for n in sorted(x for x in names if x in g)]
    return ["function", fn.__module__, fn.__qualname__, _code_fp(code, depth, seen), cells,
            fingerprint_of(fn.__defaults__, depth + 1, seen), fingerprint_of(getattr(fn, "__kwdefaults__", None), depth + 1, seen),
            out]


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def fingerprint_of(obj, depth: int = 0, seen: dict | None = None):
    """What identifies ``obj`` to the compiler, as JSON-able data; raises :class:`Uncacheable`
    where it cannot say.  Only kinds of object whose identity can be written down are taken:
    plain values and containers, NumPy scalars, dtypes and arrays (with their layout), Numba
    types and llvmlite IR types, enums and dataclass instances by their fields, modules,
    classes, functions, Numba dispatchers (with the signatures of one compiled eagerly) and
    intrinsics; anything else makes the kernel uncacheable (built every time)."""
    import dataclasses as _dc
    import enum

    import numpy as np

    seen = {} if seen is None else seen
    if depth > 40:
        raise Uncacheable("nested too deep")
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return [type(obj).__name__, repr(obj)]
    if isinstance(obj, (tuple, list)):
        return [type(obj).__name__, [fingerprint_of(x, depth + 1, seen) for x in obj]]
    if isinstance(obj, (set, frozenset)):
        return [type(obj).__name__, sorted(json.dumps(fingerprint_of(x, depth + 1, seen)) for x in obj)]
    if isinstance(obj, dict):
        return ["dict", sorted([repr(k), fingerprint_of(v, depth + 1, seen)] for k, v in obj.items())]
    if isinstance(obj, types.ModuleType):
        return ["module", obj.__name__]
    if isinstance(obj, np.dtype):
        return ["dtype", str(obj)]
    if isinstance(obj, np.generic):
        return ["scalar", str(obj.dtype), repr(obj)]
    if isinstance(obj, np.ndarray):
        import numba

        return ["ndarray", str(numba.typeof(obj)), list(obj.shape), list(obj.strides),
                hashlib.sha256(obj.tobytes(order="A")).hexdigest()]
    if isinstance(obj, enum.Enum):
        return ["enum", fingerprint_of(type(obj), depth + 1, seen), obj.name, fingerprint_of(obj.value, depth + 1, seen)]
    if isinstance(obj, type):
        if issubclass(obj, enum.Enum):
            return ["enumtype", obj.__module__, obj.__qualname__,
                    [[m.name, fingerprint_of(m.value, depth + 1, seen)] for m in obj]]
        if _is_library(obj.__module__):
            return ["type", obj.__module__, obj.__qualname__]
        if id(obj) in seen:
            return ["again", seen[id(obj)]]
        seen[id(obj)] = len(seen)
        return ["class", obj.__module__, obj.__qualname__,
                [[k, fingerprint_of(v, depth + 1, seen)] for k, v in sorted(vars(obj).items())
                 if not (k.startswith("__") and k.endswith("__"))]]
    py = getattr(obj, "py_func", None)
    if isinstance(py, types.FunctionType):  # a Numba dispatcher (kernel or device function)
        sigs = [] if getattr(obj, "_can_compile", True) else [str(x) for x in getattr(obj, "signatures", [])]
        return ["dispatcher", type(obj).__qualname__, fingerprint_of(dict(getattr(obj, "targetoptions", {}) or {}), depth + 1, seen),
                sigs, _func_fp(py, depth + 1, seen)]
    defn = getattr(obj, "_defn", None)
    if isinstance(defn, types.FunctionType):  # a Numba @intrinsic (inline PTX)
        return ["intrinsic", _func_fp(defn, depth + 1, seen)]
    if isinstance(obj, types.FunctionType):
        return _func_fp(obj, depth + 1, seen)
    if isinstance(obj, functools.partial):
        return ["partial", fingerprint_of(obj.func, depth + 1, seen), fingerprint_of(obj.args, depth + 1, seen),
                fingerprint_of(obj.keywords, depth + 1, seen)]
    if _dc.is_dataclass(obj):
        return ["dataclass", fingerprint_of(type(obj), depth + 1, seen),
                [[f.name, fingerprint_of(getattr(obj, f.name), depth + 1, seen)] for f in _dc.fields(obj)]]
    from numba.core import types as nbtypes

    if isinstance(obj, nbtypes.Type):  # a Numba type names itself fully (float32, array(...), ...)
        return ["nbtype", type(obj).__qualname__, str(obj)]
    if type(obj).__module__.split(".")[0] == "llvmlite" and type(obj).__module__.endswith("types"):
        return ["llvmtype", type(obj).__qualname__, str(obj)]
    raise Uncacheable(f"{type(obj).__module__}.{type(obj).__qualname__}")


def kernel_cache_key(fn, sig, opts: dict, full_cc, job: dict) -> str | None:
    """The key of one kernel's build in the per-kernel cache, or None where the kernel cannot
    be named (then it is built every time).  Rungs at different problems, and different rungs,
    often launch the same kernel with the same argument types (a GEMM rung at two sizes; the
    tuned rung at the multirow rung's shape): one build serves them all."""
    try:
        links = [hashlib.sha256(Path(str(f)).read_bytes()).hexdigest() for f in (opts.get("link") or [])]
        doc = {"fn": fingerprint_of(fn), "sig": [str(t) for t in sig], "opts": fingerprint_of(opts), "links": links,
               "cc": [str(c) for c in full_cc], "source": job.get("source"), "tools": versions(),
               "code": static.producer_version("anatomy")}
        text = json.dumps(doc, sort_keys=True, default=str)
    except Exception:  # noqa: BLE001  (Uncacheable, or any kernel this cannot describe: built every time)
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:32]

