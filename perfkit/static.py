"""The static store: answers that need only the compiler and the simulator, shipped in the repository.

A rung's anatomy (its build for a target: registers, shared memory, spills, the SASS the model
reads) and its access simulation (bank conflicts, coalescing) have one answer per (kernel code,
problem, target, tool versions).  Computing them costs ~10 s a rung cold (NVVM, ptxas, the
simulator); the store in ``data/static/<kind>/<key>.json`` holds them so that a fresh clone
answers in milliseconds.  The model's estimates made from them (``estimate``: ~0.1 s each, and
a notebook asks for hundreds) are kept the same way (:mod:`perfkit.model.stored`).

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

import functools
import hashlib
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path

from . import cache, paths

STORE = paths.DATA / "static"
KINDS = ("anatomy", "banks", "estimate")
#: the code that computes each kind's answers (paths inside the package): its version, derived
#: from its text by :func:`perfkit.cache.code_version`, is part of every key of that kind
PRODUCERS = {"anatomy": ("anatomy/build.py", "anatomy/target.py", "anatomy/sass.py"),
             "banks": ("banks/rules.py", "banks/record.py", "banks/tally.py", "banks/simulate.py", "banks/report.py",
                       "_simfix.py"),
             # an estimate reads the builds and simulations (keyed by their own producers, above) through
             # these: the model, the anatomy's reading of the SASS, the access simulation's report, occupancy
             "estimate": ("model/__init__.py", "model/branches.py", "model/equations.py", "model/inputs.py",
                          "model/latency.py", "model/launch.py", "model/memory.py", "model/pipes.py", "model/plans.py",
                          "model/trips.py", "model/scalars.py", "model/stored.py", "anatomy/__init__.py", "anatomy/build.py",
                          "anatomy/fingerprint.py", "anatomy/report.py", "anatomy/sass.py", "anatomy/target.py",
                          "banks/__init__.py", "banks/record.py", "banks/report.py", "banks/rules.py",
                          "banks/simulate.py", "banks/tally.py", "_simfix.py", "_simspeed.py", "occupancy.py",
                          "specs.py", "cache.py", "static.py")}
#: the target the store covers (the H100 and H200 the records come from)
CC = (9, 0)


class StaticError(RuntimeError):
    pass


def producer_version(kind: str) -> str:
    """The version of the code that computes ``kind``'s answers (an edit to it misses every entry)."""
    return cache.code_version(*PRODUCERS[kind])


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


#: modules whose source cannot change a compiled kernel (the tools that read it)
_NOT_KERNEL_CODE = {"perfkit.model", "perfkit.banks", "perfkit.anatomy", "perfkit.bench", "perfkit.results",
                    "perfkit.workbook", "perfkit.lesson", "perfkit.plots", "perfkit.timing", "perfkit.roofline"}
#: their submodules too (anatomy and lesson are packages)
_NOT_KERNEL_PREFIXES = tuple(f"{m}." for m in sorted(_NOT_KERNEL_CODE))


def source_files(modname: str) -> list[str]:
    """The source files a rung's code can reach: its module and, transitively, every perfkit
    module its globals name (modules, functions, classes, kernels), so an edit to a helper it
    uses (norm/_common.py, _vector.py, base.py) misses the cache while an edit to an unrelated
    ladder does not."""
    import types

    seen: set[str] = set()
    todo = [modname]
    top = modname.split(".")[0]
    files = []
    parents: set[str] = set()
    named_packages: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in _NOT_KERNEL_CODE or name.startswith(_NOT_KERNEL_PREFIXES):
            continue
        seen.add(name)
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = importlib.import_module(name)
            except Exception:  # noqa: BLE001
                continue
        f = getattr(mod, "__file__", None)
        if f:
            files.append(f)
        if "." in name:
            parents.add(name.rsplit(".", 1)[0])  # the package's __init__: its file, not its globals
        package = getattr(mod, "__path__", None) is not None and name != modname
        if package and name not in named_packages:
            continue  # a package: its globals list whatever submodules happen to be imported
        for base, names in _imported_in_source(mod):  # imports inside functions too (conv's rung 03 runs gemm's kernel)
            if not (base == "perfkit" or base.startswith("perfkit.") or base.split(".")[0] == top):
                continue
            todo.append(base)
            parent = sys.modules.get(base)
            for n in names:  # ``from . import gemm``: a submodule imported by name
                sub = getattr(parent, n, None)
                if sub is None and f"{base}.{n}" not in _NOT_KERNEL_CODE:
                    try:  # not imported yet in this process (an import inside a function): import it
                        sub = importlib.import_module(f"{base}.{n}")
                    except Exception:  # noqa: BLE001  (a name, not a module; or one that cannot load here)
                        sub = None
                if isinstance(sub, types.ModuleType):
                    todo.append(f"{base}.{n}")
                    if getattr(sub, "__path__", None) is not None:  # gemm, a package: what its __init__ imports
                        named_packages.add(f"{base}.{n}")
        if package:
            continue  # its own imports followed; its globals are those same modules
        for v in list(vars(mod).values()):
            target = None
            if isinstance(v, types.ModuleType):
                target = v.__name__
            else:
                target = getattr(getattr(v, "py_func", v), "__module__", None)
            if isinstance(target, str) and (target == "perfkit" or target.startswith("perfkit.")) \
                    or (isinstance(target, str) and target == modname):
                todo.append(target)
    for name in parents - seen:
        f = getattr(sys.modules.get(name), "__file__", None)
        if f:
            files.append(f)
    # the top package's __init__ only chooses the backend (backend.py is in the closure) and applies
    # the simulator's fixes (a producer of the bank counts): no kernel's code, so an edit to it
    # leaves every key as it was
    top_init = getattr(sys.modules.get(top), "__file__", None)
    return sorted(set(files) - {top_init})


def _imported_in_source(mod) -> list[tuple[str, list[str]]]:
    """What ``mod``'s source imports anywhere (inside functions too), as (absolute module, names
    imported from it): ``from . import gemm`` in perfkit.kernels.conv gives
    ("perfkit.kernels", ["gemm"])."""
    f = getattr(mod, "__file__", None)
    if not f or not str(f).endswith(".py"):
        return []
    try:
        stamp = os.stat(f).st_mtime_ns
    except OSError:
        return []
    pkg = mod.__name__ if getattr(mod, "__path__", None) is not None else mod.__name__.rpartition(".")[0]
    return _imports_of_file(str(f), stamp, pkg)


@functools.lru_cache(maxsize=None)
def _imports_of_file(path: str, stamp: int, pkg: str) -> list[tuple[str, list[str]]]:
    import ast
    import importlib.util

    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), pkg) if node.level \
                    else (node.module or "")
            except (ImportError, ValueError):
                continue
            if base:
                out.append((base, [a.name for a in node.names if a.name != "*"]))
    return out


def package_path(f) -> str:
    """``f``'s path inside its top package (``perfkit/kernels/base.py``,
    ``perfkit_at_7c7b2e09825f/kernels/gemm.py``): the folders above it that are packages, and no
    further.  Never the absolute path: a clone elsewhere must find the same cache and store entries."""
    p = Path(f)
    top = p.parent
    while (top.parent / "__init__.py").exists():
        top = top.parent
    return p.relative_to(top.parent).as_posix()


def source_hash(variant) -> str:
    """The rung's source closure: each file by its path inside its top package and its bytes,
    in the order of those paths (a rung rebuilt from an old commit reaches files of the history
    cache and of the checkout, and where each lies must not change the order)."""
    h = hashlib.sha256(b"closure-4")
    for rel, f in sorted((package_path(f), f) for f in source_files(type(variant).__module__)):
        h.update(rel.encode())
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def job(variant, problem, cc) -> dict:
    """What a build depends on besides its source: the rung (class and config), the problem, the target."""
    return {"variant": {"module": type(variant).__module__, "qualname": type(variant).__qualname__,
                        "config": variant.config},
            "problem": {"module": type(problem).__module__, "qualname": type(problem).__qualname__,
                        "params": problem.params},
            "cc": list(cc)}


def rebuild(job: dict):
    """(variant, problem) that :func:`job` describes, rebuilt in another process."""
    import importlib

    def build(part, kwargs):
        obj = importlib.import_module(part["module"])
        for name in part["qualname"].split("."):
            obj = getattr(obj, name)
        return obj(**kwargs)

    return build(job["variant"], job["variant"]["config"]), build(job["problem"], job["problem"]["params"])


def build_key(variant, problem, cc, source: str | None = None) -> str:
    """The store key of a rung's build for ``problem`` and target ``cc``: its job and its source
    closure (``source``, where the caller has hashed it already), not the tool versions (the
    entry carries those)."""
    return key({"job": job(variant, problem, cc), "source": source or source_hash(variant),
                "code": producer_version("anatomy")})


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
    return [f"{op} {v.label} @ {p.label}" for op, v, p in targets(ops)
            if not has("anatomy", build_key(v, p, CC))]
