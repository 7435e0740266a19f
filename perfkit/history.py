"""The kernels as they were at an earlier commit, for comparing a model with old measurements.

A record in ``data/results/`` was measured on the code of its commit
(``provenance.git_commit``).  Where a rung's kernel code has changed since
(:func:`source_changed_since`), estimating today's kernel and comparing with that
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

import ast
import functools
import importlib
import inspect
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

from . import cache, paths
from .kernels import registry
from .kernels.base import Variant

__all__ = ["variant_at", "kernels_at", "why_not", "package_name", "source_changed_since"]

_WHY: dict = {}


def _repo_root() -> Path:
    return paths.repo_root()


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


# --- has a rung's code changed since a commit? (static: the files at that commit, parsed) -----
@functools.lru_cache(maxsize=4096)  # a commit's files never change: one `git show` each per process
def _git_show(commit: str, rel: str) -> str | None:
    try:
        out = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=_repo_root(), capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _worktree(rel: str) -> str | None:
    p = _repo_root() / rel
    try:
        return p.read_text()
    except OSError:
        return None


def _simulator_test(test) -> bool | None:
    """True for ``backend.is_simulator()`` (the body is the simulator's), False for its negation
    (the body is the GPU's), None for any other condition."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _simulator_test(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Call) and not test.args:
        f = test.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return True if name == "is_simulator" else None
    return None


class _Mod:
    """Top-level definitions and relative imports of one module's text."""

    def __init__(self, rel: str, text: str):
        self.rel = rel
        self.lines = text.splitlines()
        tree = ast.parse(text)
        self.defs, self.imports, self.modules = {}, {}, {}

        def top(body):  # module level, and inside module-level if/try (per-backend definitions)
            for node in body:
                if isinstance(node, ast.If):
                    sim = _simulator_test(node.test)
                    # the simulator's twins never run on a GPU: a record measured the other branch
                    if sim is not True:
                        yield from top(node.body)
                    if sim is not False:
                        yield from top(node.orelse)
                elif isinstance(node, ast.Try):
                    yield from top(node.body)
                    for h in node.handlers:
                        yield from top(h.body)
                    yield from top(node.orelse)
                    yield from top(node.finalbody)
                else:
                    yield node

        def add(name, node):  # a name defined in both branches: both definitions count
            if name in self.defs:
                node = ast.Module(body=[self.defs[name], node], type_ignores=[])
            self.defs[name] = node

        for node in top(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                add(node.name, node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        add(t.id, node)
            elif isinstance(node, ast.ImportFrom) and node.level:
                base = Path(rel).parent
                for _ in range(node.level - 1):
                    base = base.parent
                if node.module:
                    target = (base / node.module.replace(".", "/")).as_posix()
                    for a in node.names:
                        self.imports[a.asname or a.name] = (target, a.name)
                else:
                    for a in node.names:
                        self.modules[a.asname or a.name] = (base / a.name).as_posix()


def _unqualified(node, m: "_Mod"):
    """``node`` with every ``alias.name`` of a module ``m`` imported (``from . import _common as
    C``: ``C.group_sum``) written as plain ``name``: a helper is the same whether the rung's code
    reaches it through its module or imports it by name (the walk has already followed it).  A
    relative import inside the code is written as the module it names (``from . import gemm`` in
    kernels/conv.py and ``from .. import gemm`` in kernels/conv/im2col.py import one module)."""
    relative = any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(node))
    if not m.modules and not relative:
        return node

    class _Plain(ast.NodeTransformer):
        def visit_Attribute(self, n):
            if isinstance(n.value, ast.Name) and n.value.id in m.modules:
                return ast.copy_location(ast.Name(id=n.attr, ctx=n.ctx), n)
            return self.generic_visit(n)

        def visit_ImportFrom(self, n):
            if not n.level:
                return n
            base = Path(m.rel).parent
            for _ in range(n.level - 1):
                base = base.parent
            target = ".".join(base.parts + (tuple(n.module.split(".")) if n.module else ()))
            return ast.copy_location(ast.ImportFrom(module=target, names=n.names, level=0), n)

    copy = ast.parse(ast.unparse(node))  # a copy: the module's tree stays as it is
    return _Plain().visit(copy if isinstance(node, ast.Module) else copy.body[0])


def _strip_docstrings(node):
    if isinstance(node, ast.Module):  # several definitions of one name (per backend)
        return ast.Module(body=[_strip_docstrings(n) for n in node.body], type_ignores=[])
    node = ast.parse(ast.unparse(node)).body[0]  # a copy
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body and \
                isinstance(n.body[0], ast.Expr) and isinstance(getattr(n.body[0], "value", None), ast.Constant) \
                and isinstance(n.body[0].value.value, str):
            n.body = n.body[1:] or [ast.Pass()]
    return node


_LABEL_ATTRS = {"name", "what", "rung", "oracle"}


@functools.lru_cache(maxsize=1024)
def _parsed(rel: str, text: str) -> _Mod:
    """One parse per module text: a module unchanged between two commits (most of them) and the
    working tree is parsed once, however many rungs and commits ask (a notebook's cards ask
    hundreds of times).  The result is only read: the closure copies what it rewrites."""
    return _Mod(rel, text)


def _segment(m: _Mod, node):
    """The source text of a top-level definition (decorators included), or of each definition of
    a name defined twice: what decides its canonical text and the names it uses."""
    if isinstance(node, ast.Module):
        return tuple(_segment(m, n) for n in node.body)
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
    return "\n".join(m.lines[start - 1:node.end_lineno])


_CANON: dict = {}
_NAMES: dict = {}


def _canonical(m: _Mod, node) -> str:
    """The canonical text of one definition of ``m`` (aliases unqualified, docstrings dropped),
    computed once per definition text, module path and module aliases: a definition unchanged
    between two commits is canonicalised once."""
    key = (m.rel, tuple(sorted(m.modules.items())), type(node).__name__, _segment(m, node))
    if key not in _CANON:
        _CANON[key] = ast.dump(_strip_docstrings(_unqualified(node, m)))
    return _CANON[key]


def _names_used(m: _Mod, node) -> list:
    """The plain names (``("", name)``) and ``alias.attr`` pairs a definition's code uses, in
    walk order, computed once per definition text."""
    key = (type(node).__name__, _segment(m, node))
    if key not in _NAMES:
        out = []
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.append(("", n.id))
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                out.append((n.value.id, n.attr))
        _NAMES[key] = out
    return _NAMES[key]


def _rung_closure(read, rel: str, variant_name: str) -> dict | None:
    """Canonical text of what decides a rung's kernels in the files ``read`` returns: the rung
    class's fields and its ``plan`` (and the methods ``plan`` calls on self), then every
    top-level definition those name, followed into sibling kernel modules (not base.py)."""
    mods: dict[str, _Mod | None] = {}

    root = Path(rel).parent.as_posix()
    while root and not root.endswith("kernels") and "/" in root:
        root = root.rsplit("/", 1)[0]  # perfkit/kernels: definitions are followed only inside it

    def mod(r: str):
        if r != rel and (not r.startswith(root + "/") or r.endswith("/base") or r.endswith("/base.py")):
            return None
        if r not in mods:
            text, r_file = None, r
            for cand in (f"{r}.py", f"{r}/__init__.py") if not r.endswith(".py") else (r,):
                text = read(cand)
                if text is not None:
                    r_file = cand
                    break
            try:
                mods[r] = _parsed(r_file, text) if text is not None else None
            except SyntaxError:
                mods[r] = None
        return mods[r]

    start = mod(rel)
    if start is None:
        return None
    cls = None
    for node in start.defs.values():
        if isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, (ast.Assign, ast.AnnAssign)):
                    tg = st.targets[0] if isinstance(st, ast.Assign) else st.target
                    if isinstance(tg, ast.Name) and tg.id == "name" and isinstance(st.value, ast.Constant) \
                            and st.value.value == variant_name:
                        cls = node
    if cls is None:
        return None
    out: dict[str, str] = {}
    chain, todo = [], [(start, cls)]
    while todo:  # the class and its bases in this module (or a sibling kernel module)
        m, c = todo.pop(0)
        chain.append((m, c))
        for b in c.bases:
            if isinstance(b, ast.Name):
                if b.id in m.defs and isinstance(m.defs[b.id], ast.ClassDef):
                    todo.append((m, m.defs[b.id]))
                elif b.id in m.imports and not m.imports[b.id][0].endswith("/base"):
                    m2, orig = mod(m.imports[b.id][0]), m.imports[b.id][1]
                    if m2 and isinstance(m2.defs.get(orig), ast.ClassDef):
                        todo.append((m2, m2.defs[orig]))
            elif isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name) and b.value.id in m.modules:
                m2 = mod(m.modules[b.value.id])  # a base reached through its module (C._Tunable)
                if m2 and isinstance(m2.defs.get(b.attr), ast.ClassDef):
                    todo.append((m2, m2.defs[b.attr]))
    methods = {}
    for m, c in chain:  # nearest definition wins, as in the MRO
        for st in c.body:
            if isinstance(st, ast.FunctionDef):
                methods.setdefault(st.name, (m, st))
    fields = []
    for m, c in chain:
        for st in c.body:
            if isinstance(st, (ast.Assign, ast.AnnAssign)):
                tg = st.targets[0] if isinstance(st, ast.Assign) else st.target
                if isinstance(tg, ast.Name) and tg.id not in _LABEL_ATTRS:
                    fields.append(ast.dump(st))
    out["fields"] = "\n".join(fields)
    wanted, todo_m = set(), ["plan"]
    roots = []
    while todo_m:
        name = todo_m.pop()
        if name in wanted or name not in methods:
            continue
        wanted.add(name)
        m, fn = methods[name]
        roots.append((m, fn))
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                todo_m.append(n.attr)
    for m, fn in roots:
        out[f"method {fn.name}"] = _canonical(m, fn)
    todo = list(roots)
    seen_defs: set = set()
    while todo:
        m, node = todo.pop()
        for alias, ident in _names_used(m, node):
            refs = []
            if not alias:
                refs.append((m, ident))
            elif alias in m.modules:
                m2 = mod(m.modules[alias])
                if m2 is not None:
                    refs.append((m2, ident))
            for mm, name in refs:
                tgt = None
                if name in mm.defs:
                    tgt = (mm, mm.defs[name])
                elif name in mm.imports and not mm.imports[name][0].endswith("/base"):
                    m2 = mod(mm.imports[name][0])
                    orig = mm.imports[name][1]
                    if m2 is not None and orig in m2.defs:
                        tgt = (m2, m2.defs[orig])
                if tgt is None or isinstance(tgt[1], ast.ClassDef):
                    continue  # classes named in the code are problems and types (annotations), not kernel code
                # known by the name the code uses and its text, not by its file: a helper moved to
                # another kernel module unchanged is no change to the rung (the same name defined
                # in two modules: both count, in the order the walk meets them)
                where = (tgt[0].rel, name)
                if where in seen_defs:
                    continue
                seen_defs.add(where)
                key, k = name, 1
                while key in out:
                    k += 1
                    key = f"{name}#{k}"
                out[key] = _canonical(tgt[0], tgt[1])
                todo.append(tgt)
    return out


def _former_paths(rel: str) -> list[str]:
    """Where a rung's file may have been at an older commit: its path, then the module that a
    package of modules replaced (``perfkit/kernels/gemm/simt.py`` was ``perfkit/kernels/gemm.py``)."""
    parent = Path(rel).parent
    return [rel] + ([f"{parent.as_posix()}.py"] if parent.name != "kernels" else [])


_CLOSURES: dict = {}


def _closure(read, where, rel: str, variant_name: str) -> dict | None:
    """:func:`_rung_closure`, remembered with the files it read: reused while ``read`` still
    returns the same text for each of them (a working tree can change under a long session; a
    commit cannot).  A notebook asks for the same rung's closure once per record's commit."""
    key = (where, rel, variant_name)
    hit = _CLOSURES.get(key)
    if hit is not None and all(read(r) == text for r, text in hit[1]):
        return hit[0]
    seen = []

    def reading(r):
        text = read(r)
        seen.append((r, text))
        return text

    out = _rung_closure(reading, rel, variant_name)
    _CLOSURES[key] = (out, seen)
    return out


@functools.lru_cache(maxsize=512)
def _changed_since(commit: str, rel: str, then_rel: str, variant_name: str) -> bool | None:
    now = _closure(_worktree, "worktree", rel, variant_name)
    if now is None:
        return None
    then = _closure(lambda r: _git_show(commit, r), commit, then_rel, variant_name)
    return True if then is None else then != now  # not there then: a new (or renamed) rung


def source_changed_since(variant: Variant, commit: str | None) -> bool | None:
    """Has the code that decides this rung's kernels changed between ``commit`` and the working
    tree?  Compared statically (the files parsed at both points, comments and docstrings
    ignored): the rung class's fields, its ``plan`` and what ``plan`` calls, and every
    definition those reach in ``perfkit.kernels`` (kernel factories, device helpers; not
    base.py).  ``None`` when it cannot tell (no git, or the file was not there)."""
    if not commit:
        return None
    try:
        f = Path(inspect.getsourcefile(type(variant))).resolve()
        rel = f.relative_to(_repo_root().resolve()).as_posix()
    except (TypeError, ValueError, OSError):
        return None
    then_rel = next((r for r in _former_paths(rel) if _git_show(commit, r) is not None), None)
    if then_rel is None:
        return None if _git_show(commit, "perfkit/__init__.py") is None else True
    return _changed_since(commit, rel, then_rel, variant.name)


# --- recorded measurements, matched to rungs --------------------------------------------------
