"""The grader's machinery: checks and grades, the learner's kernel carried to the anatomy
compiler, runs against the float64 reference with NaN-poisoned outputs, and the registry.

How a learner's kernel reaches :func:`perfkit.anatomy.inspect`: the anatomy compiler builds a
rung in a child process (the real ``numba.cuda``, no GPU) by importing the rung's module.  A
kernel typed in a notebook cell lives in ``__main__`` of the notebook's kernel, which that child
cannot import, so :func:`carry` writes the kernel's source (and that of any device function it
calls, with the constants and imports it uses) into a small module under the cache directory,
``perfkit.exercises.learner.m_<hash>``; the exercise's rung names that module and the function in
its configuration.  In this process the rung uses the learner's own object (:func:`resolve`).
"""
from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import html
import importlib
import inspect as _inspect
import os
import textwrap
import types as _pytypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from .. import backend, cache

__all__ = ["Check", "Grade", "Exercise", "EXERCISES", "register", "CarryError", "carry", "resolve",
           "is_kernel", "is_device_function", "kernel_rung", "with_rung", "run_checked", "inspect_rung",
           "register_budget", "fresh_seed"]


# --- checks and grades ------------------------------------------------------------------------
@dataclass
class Check:
    """One graded property.  ``ok`` is True (passed), False (failed) or None (not run / could
    not be checked here; a None does not fail the grade)."""

    name: str
    ok: bool | None
    message: str = ""

    @property
    def mark(self) -> str:
        return {True: "PASS", False: "FAIL", None: "skip"}[self.ok]


@dataclass
class Grade:
    """What :func:`perfkit.exercises.grade` returns: every check, passed or not, with messages.
    ``bool(grade)`` is ``grade.passed``; it renders as a table in a notebook."""

    exercise: str
    title: str
    checks: list[Check] = field(default_factory=list)
    status: str = ""  # "passed", "failed", "not yet solved"
    seed: int | None = None
    backend: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.ok is False]

    @property
    def message(self) -> str:
        """The first failed check's message ('' when passed)."""
        f = self.failures
        return f"{f[0].name}: {f[0].message}" if f else ""

    def __str__(self) -> str:
        head = {"passed": "PASSED", "failed": "NOT YET", "not yet solved": "NOT YET SOLVED"}.get(self.status, self.status)
        lines = [f"{self.exercise} ({self.title}): {head}  [{self.backend}, seed {self.seed}]"]
        for c in self.checks:
            lines.append(f"  [{c.mark}] {c.name}" + (f": {c.message}" if c.message else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colour = {"passed": "#1a7f37", "failed": "#b35900", "not yet solved": "#666"}.get(self.status, "#000")
        sym = {True: "&#10004;", False: "&#10008;", None: "&ndash;"}
        rows = "".join(
            f"<tr><td style='text-align:center'>{sym[c.ok]}</td><td style='text-align:left'>{html.escape(c.name)}</td>"
            f"<td style='text-align:left'>{html.escape(c.message)}</td></tr>" for c in self.checks)
        return (f"<div class='perfkit-grade'><b style='color:{colour}'>{html.escape(self.exercise)}: "
                f"{html.escape(self.status)}</b> &middot; {html.escape(self.title)} "
                f"<small>({html.escape(self.backend)}, seed {self.seed})</small>"
                f"<table><tr><th></th><th style='text-align:left'>check</th><th style='text-align:left'>result</th></tr>"
                f"{rows}</table></div>")


@dataclass
class Exercise:
    """One exercise: ``steps(answer, opts)`` yields :class:`Check` objects in order and stops
    after a failure that makes later checks meaningless."""

    name: str
    notebook: str
    title: str
    task: str
    checks: list[str]            # the names of the checks, in order (shown before grading)
    steps: Callable[..., Iterator[Check]]
    answer_kind: str = "kernel"  # "kernel", "device function" or "config"
    solution: str = ""           # "module:attribute" of the reference solution

    def describe(self) -> str:
        return (f"{self.name}: {self.title}\n{textwrap.fill(self.task, 96)}\n"
                "checked: " + "; ".join(self.checks))


EXERCISES: dict[str, Exercise] = {}


def register(ex: Exercise) -> Exercise:
    if ex.name in EXERCISES:
        raise ValueError(f"exercise {ex.name} registered twice")
    EXERCISES[ex.name] = ex
    return ex


def fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % (2**31))


# --- kernels: what the answer is -------------------------------------------------------------
def py_func(obj) -> Callable | None:
    """The Python function behind a ``@cuda.jit`` object (GPU dispatcher or simulator kernel)."""
    fn = getattr(obj, "py_func", None) or getattr(obj, "fn", None)
    return fn if isinstance(fn, _pytypes.FunctionType) else None


def is_device_function(obj) -> bool:
    if py_func(obj) is None:
        return False
    if hasattr(obj, "_device"):  # the simulator's FakeCUDAKernel
        return bool(obj._device)
    return bool(getattr(obj, "targetoptions", {}).get("device", False))


def is_kernel(obj) -> bool:
    return py_func(obj) is not None and not is_device_function(obj)


# kind of answer: (is it, its decorator, what "expected ..." calls it, is it the other jit kind, that kind named)
_JIT_KINDS = {
    "kernel": (is_kernel, "@cuda.jit", "a @cuda.jit kernel",
               is_device_function, "a device function (cuda.jit(device=True))"),
    "device function": (is_device_function, "@cuda.jit(device=True)", "a @cuda.jit(device=True) function",
                        is_kernel, "a kernel (@cuda.jit)"),
}


def answer_error(obj, kind: str) -> str | None:
    """Why ``obj`` is not the right kind of answer (None when it is)."""
    if kind not in _JIT_KINDS:
        return None
    is_it, deco, expected, is_other, other = _JIT_KINDS[kind]
    if is_it(obj):
        return None
    if is_other(obj):
        return f"this is {other}; the exercise wants a {kind}: {deco}"
    if callable(obj):
        return f"{getattr(obj, '__name__', obj)!r} is a plain Python function: decorate it with {deco}"
    return f"expected {expected}, got {type(obj).__name__}"


# --- carrying the learner's source to the anatomy compiler -----------------------------------
class CarryError(ValueError):
    """The learner's kernel cannot be written out for the compiler (the message says why)."""


_LIVE: dict[tuple[str, str], Any] = {}  # (module, name) -> the learner's object, in this process


def _learner_dir() -> Path:
    base = cache.root()
    return base / "exercises"


def _code_names(code) -> set[str]:
    """Names the function reads as globals (LOAD_GLOBAL; attribute names such as the ``x`` of
    ``cuda.threadIdx.x`` are not globals), in it and in any nested code."""
    import dis

    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for c in code.co_consts:
        if isinstance(c, _pytypes.CodeType):
            names |= _code_names(c)
    return names


def _literal(v) -> str | None:
    """Source for a constant the kernel reads from its globals (None if not a simple one)."""
    if isinstance(v, (bool, int, float, str, type(None))):
        return repr(v)
    if isinstance(v, np.generic) and v.dtype.kind in "biuf":
        return f"_np.{v.dtype.name}({v.item()!r})"
    if isinstance(v, tuple) and all(_literal(x) is not None for x in v):
        return "(" + "".join(_literal(x) + ", " for x in v) + ")"
    return None


def _importable(v) -> tuple[str, str] | None:
    """(module, attribute) that imports ``v`` back, for objects defined in a real module."""
    fn = py_func(v) or v
    mod, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if not mod or not name or mod == "__main__" or mod.startswith("perfkit.exercises.learner"):
        return None
    try:
        m = importlib.import_module(mod)
    except Exception:
        return None
    return (mod, name) if getattr(m, name, None) is v else None


def _function_source(fn) -> str:
    try:
        src = textwrap.dedent(_inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise CarryError(f"cannot read the source of {fn.__name__} ({exc}); define it in a notebook cell or a file") from None
    tree = ast.parse(src)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if node is None:
        raise CarryError(f"cannot find the def of {fn.__name__} in its source")
    lines = src.splitlines()
    return "\n".join(lines[node.lineno - 1:node.end_lineno])  # without the decorators


def carry(answer, extra: dict | None = None) -> tuple[str, str]:
    """Write ``answer`` (a kernel or device function) and what it uses into a module the
    anatomy compiler can import; returns (module name, function name) and remembers the object
    for this process."""
    import numba.core.types as nbt

    header = ["# Written by perfkit.exercises from a learner's answer, for the anatomy compiler.",
              "import perfkit  # noqa: F401  (picks the backend first)",
              "import numpy as _np", "import numba.types as _nbt", "from numba import cuda", ""]
    imports, consts, defs = [], [], []
    done: dict[int, str] = {}

    def visit(obj) -> str:
        fn = py_func(obj)
        if id(obj) in done:
            return done[id(obj)]
        name = fn.__name__
        done[id(obj)] = name
        src = _function_source(fn)
        env = dict(fn.__globals__)
        if fn.__code__.co_freevars:
            for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                try:
                    env[var] = cell.cell_contents
                except ValueError:
                    raise CarryError(f"{name}: closure variable {var!r} is not set") from None
        for g in sorted(_code_names(fn.__code__) | set(fn.__code__.co_freevars)):
            if g not in env:
                if hasattr(builtins, g):
                    continue
                raise CarryError(f"{name} reads the global {g!r}, which is not defined")
            v = env[g]
            if g == name and v is obj:
                continue
            if isinstance(v, _pytypes.ModuleType):
                mod = v.__name__
                if mod.startswith("numba.cuda"):
                    imports.append(f"from numba import cuda as {g}" if g != "cuda" else "")
                else:
                    imports.append(f"import {mod} as {g}")
                continue
            if isinstance(v, nbt.Type):
                if getattr(nbt, str(v), None) == v:
                    consts.append(f"{g} = _nbt.{v}")
                    continue
                raise CarryError(f"{name} uses the Numba type {g} = {v}, which cannot be written out")
            lit = _literal(v)
            if lit is not None:
                consts.append(f"{g} = {lit}")
                continue
            imp = _importable(v)
            if imp is not None:
                imports.append(f"from {imp[0]} import {imp[1]} as {g}" if imp[1] != g else f"from {imp[0]} import {g}")
                continue
            if py_func(v) is not None:
                dep = visit(v)
                if dep != g:
                    defs.append(f"{g} = {dep}\n")
                continue
            raise CarryError(f"{name} uses {g!r} ({type(v).__name__}), which the grader cannot carry to the "
                             "compiler: use ints, floats, math, numba types and @cuda.jit functions")
        deco = "@cuda.jit(device=True)" if is_device_function(obj) else "@cuda.jit"
        defs.append(f"{deco}\n{src}\n")
        return name

    name = visit(answer)
    for alias, obj in (extra or {}).items():
        defs.append(f"{alias} = {visit(obj)}\n")
    body = "\n".join(dict.fromkeys(l for l in imports if l)) + "\n" + "\n".join(dict.fromkeys(consts)) \
        + "\n\n\n" + "\n\n".join(defs)
    text = "\n".join(header) + body
    modname = "m_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    d = _learner_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{modname}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    full = f"perfkit.exercises.learner.{modname}"
    _LIVE[(full, name)] = answer
    for alias, obj in (extra or {}).items():
        _LIVE[(full, alias)] = obj
    return full, name


def resolve(module: str, name: str):
    """The learner's object: the live one in this process, else imported (the compiler child)."""
    if (module, name) in _LIVE:
        return _LIVE[(module, name)]
    if not module:
        raise CarryError("no learner module named")
    return getattr(importlib.import_module(module), name)


# --- running and inspecting --------------------------------------------------------------------
def _nan_hint(res, what: str) -> str:
    return (f" ({res.n_nan} element{'s' if res.n_nan != 1 else ''} still NaN: never written{what})"
            if res.n_nan else "")


def kernel_rung(answer, make, kind: str = "kernel"):
    """``(rung, None)``: the learner's kernel (or device function, per ``kind``) ``answer`` as the
    rung ``make(module=, kernel=)`` builds around it; or ``(None, the failed "a kernel" (or "a
    device function") check)`` when it is not a usable answer of that kind."""
    err = answer_error(answer, kind)
    if err:
        return None, Check(f"a {kind}", False, err)
    try:
        module, name = carry(answer)
    except Exception as exc:  # the learner's object could not be written out: say why
        return None, Check(f"a {kind}", False, str(exc))
    return make(module=module, kernel=name), None


def with_rung(make, kind: str = "kernel"):
    """Decorator for an exercise's steps that grade the rung ``make`` builds around the learner's
    answer (see :func:`kernel_rung`): the decorated ``steps(rung, seed, cc, **options)`` becomes
    ``steps(answer, seed, cc, **options)``, which yields only the failed "a kernel" check when
    the answer is not a usable one."""
    def wrap(steps):
        @functools.wraps(steps)
        def graded(answer, seed: int, cc=(9, 0), **options):
            v, failed = kernel_rung(answer, make, kind)
            if failed:
                yield failed
                return
            yield from steps(v, seed=seed, cc=cc, **options)
        return graded
    return wrap


def run_checked(variant, problem, seed: int, nan_hint: str = "") -> tuple[bool, str]:
    """Run ``variant`` on ``problem`` (outputs poisoned with NaN first) and compare with the
    float64 reference.  Returns (ok, message naming the shape and the first wrong element)."""
    try:
        inputs = problem.make_inputs(seed)
        ref = problem.reference(inputs)
        out = variant.run(problem, inputs)
    except Exception as exc:  # the learner's kernel raised (an index out of range, a typo)
        msg = str(exc).strip().splitlines()
        return False, f"{problem.label}: the kernel raised {exc.__class__.__name__}: {msg[-1] if msg else ''}"
    res = problem.check(out, ref)
    if res.ok:
        return True, f"ok (max abs error {res.max_abs_err:.2g})"
    return False, f"{problem.label}: {plain(res.message)}{_nan_hint(res, nan_hint)}"


def plain(msg: str) -> str:
    """``np.float64(nan)`` -> ``nan`` in a check's message (NumPy 2 reprs)."""
    import re

    return re.sub(r"np\.(?:float|int)\d+\(([^()]*)\)", r"\1", msg)


def inspect_rung(variant, problem, cc=(9, 0)):
    """The anatomy report, or an error message (str) saying why there is none."""
    from .. import anatomy

    try:
        return anatomy.inspect(variant, problem, cc=cc)
    except Exception as exc:
        msg = str(exc).strip()
        hint = ""
        if "array(" in msg and ("shared" in msg or "local" in msg):
            hint = (" -- the shape of a cuda.shared.array or cuda.local.array must be a compile-time "
                    "constant: compute it in a global (W = 32 + PAD), not in the kernel")
        return f"could not compile for sm_{cc[0]}{cc[1]}{hint}: {exc.__class__.__name__}: {msg[-600:]}"


def register_check(rep, limit: int, hint: str = "", cc=None) -> Check:
    """At most ``limit`` registers per thread in ``rep`` (an anatomy Report); ``hint``, what to
    change, is shown only when over; ``cc`` names the target in the message."""
    ok = rep.registers <= limit
    at = f" at sm_{cc[0]}{cc[1]}" if cc else ""
    return Check(f"registers <= {limit}", ok, f"{rep.registers} registers per thread{at}" + ("" if ok or not hint else f": {hint}"))


def local_memory_check(rep, name: str = "no local memory") -> Check:
    """No stack frame and no spills: the registers held everything the kernel keeps."""
    spills = rep.spill_store_bytes + rep.spill_load_bytes
    return Check(name, spills + rep.stack_bytes == 0, f"{rep.stack_bytes} B stack, {spills} B spills")


def register_budget(variant, problem, cc, limit: int, hint: str = "", *, name_cc: bool = False,
                    local: str | None = "no local memory") -> Iterator[Check]:
    """The anatomy checks of a kernel whose point is its resources: :func:`register_check` at
    ``limit`` (``name_cc``: the message names the target), then :func:`local_memory_check` named
    ``local`` (None: no such check).  A kernel that does not compile fails the first; the rest
    are not run."""
    rep = inspect_rung(variant, problem, cc)
    if isinstance(rep, str):
        yield Check(f"registers <= {limit}", False, rep)
        return
    yield register_check(rep, limit, hint, cc if name_cc else None)
    if local is not None:
        yield local_memory_check(rep, local)


def backend_label() -> str:
    return "simulator" if backend.is_simulator() else "GPU"
