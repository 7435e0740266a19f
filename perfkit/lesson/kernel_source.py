"""A rung's kernel source: the kernels it launches, the helpers they call inside
``perfkit.kernels``, the compile-time constants and the branches they pick, and the diff
between two rungs."""
from __future__ import annotations

import ast
import difflib
import html
import inspect
import re
import textwrap
import types

import numpy as np

from ..kernels.base import Problem, Variant


_KERNELS_PKG = "perfkit.kernels"


# --- the kernel's source and the helpers it calls --------------------------------------------
def _pyfunc(kernel):
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel


def _in_kernels(obj) -> bool:
    mod = getattr(obj, "__module__", "") or ""
    return mod.startswith(_KERNELS_PKG) and mod != f"{_KERNELS_PKG}.base"


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def kernel_helpers(fn) -> list:
    """The functions inside ``perfkit.kernels`` that a kernel (or device function) calls,
    directly or through other helpers, in the order first met: global names of its code (and
    of nested code), attributes of kernel modules it names (``_common.group_sum``), and
    functions held in its closure (device functions a factory built)."""
    fn = _pyfunc(fn)
    out, seen = [], {id(fn)}

    def visit(f):
        code = getattr(f, "__code__", None)
        if code is None:
            return
        glb = getattr(f, "__globals__", {})
        found = []
        names = _code_names(code)
        # names of nested code are not in co_names: after those, by name (a set's order changes run to run)
        for name in sorted(names, key=lambda n: (code.co_names.index(n) if n in code.co_names else 1 << 30, n)):
            obj = glb.get(name)
            if isinstance(obj, types.ModuleType) and obj.__name__.startswith(_KERNELS_PKG):
                found += [getattr(obj, a) for a in sorted(names) if hasattr(obj, a)]
            elif obj is not None:
                found.append(obj)
        for cell in (getattr(f, "__closure__", None) or ()):
            try:
                found.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        for obj in found:
            g = _pyfunc(obj)
            if not callable(g) or isinstance(g, type) or not _in_kernels(g) or id(g) in seen:
                continue
            if getattr(g, "__code__", None) is None:
                continue
            seen.add(id(g))
            out.append(g)
            visit(g)

    visit(fn)
    return out


def _getsource(fn) -> str:
    try:
        return textwrap.dedent(inspect.getsource(fn)).rstrip()
    except (OSError, TypeError):
        return f"# (source of {getattr(fn, '__qualname__', fn)!r} not available)"


def _dims(x) -> str:
    return "x".join(str(int(v)) for v in (x if isinstance(x, (tuple, list)) else (x,)))


def kernel_sources(variant: Variant, problem: Problem | None = None) -> str:
    """What the rung runs: per kernel it launches, a header (launch shape, shared memory, the
    rung's config), the kernel's source, then the helpers it calls.  Oracles and peers (library
    calls), or with no ``problem``, the rung's class instead."""
    if problem is None or variant.oracle:
        return _getsource(type(variant))
    problem = variant.example(problem) if hasattr(variant, "example") else problem
    try:
        launches = variant.plan(problem, variant.host_buffers(problem))
    except Exception as exc:  # a rung that cannot plan this problem still shows its class
        return f"# plan() failed for {problem.label}: {exc}\n" + _getsource(type(variant))
    parts, helpers_shown = [], set()
    config = getattr(variant, "config", {}) or {}
    parts.append(f"# rung {variant.label}" + (f", config {config}" if config else ""))
    seen = set()
    for launch in launches:
        fn = _pyfunc(launch.kernel)
        shared = getattr(launch, "shared_bytes", 0) or 0
        parts.append(f"# launch {getattr(fn, '__name__', 'kernel')}: grid {_dims(launch.grid)}, "
                     f"block {_dims(launch.block)}" + (f", dynamic shared {shared} B" if shared else ""))
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        consts = constants(fn)
        if consts:  # one a line, so that a diff names the constant that changed
            parts.append(f"# compile-time constants of {fn.__name__} (values Numba freezes into the kernel):\n"
                         + "\n".join(f"#   {k} = {v!r}" for k, v in consts.items()))
        parts.append(_annotate_branches(_getsource(fn), consts))
        for h in kernel_helpers(fn):
            if id(h) in helpers_shown:
                continue
            helpers_shown.add(id(h))
            mod = h.__module__.rsplit(".", 1)[-1]
            hc = {**consts, **constants(h)}
            parts.append(f"# helper {mod}.{h.__name__}\n" + _annotate_branches(_getsource(h), hc))
    return "\n\n".join(parts)


def constants(fn) -> dict:
    """The plain values (bools, numbers, strings) a kernel factory closed over: the compile-time
    constants that pick tile sizes and code paths (``SWIZZLE``, ``STAGES``, ...), sorted by name."""
    fn = _pyfunc(fn) if not hasattr(fn, "__code__") else fn
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    if code is None:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, cells):
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(v, (bool, int, float, str)) or (isinstance(v, np.generic) and np.ndim(v) == 0):
            out[name] = v.item() if isinstance(v, np.generic) else v
    return dict(sorted(out.items()))


_BRANCH = re.compile(r"^(\s*)(if|elif|while)\s+(.+?):\s*(#.*)?$")


def _annotate_branches(src: str, consts: dict) -> str:
    """Mark each ``if``/``elif``/``while`` whose condition reads only compile-time constants with
    the path it takes in this build (the compiler drops the other)."""
    if not consts:
        return src
    out = []
    for line in src.splitlines():
        m = _BRANCH.match(line)
        if m:
            val, expr = const_eval(m.group(3), consts), m.group(3)
            if val is None:  # `CONST and runtime`: a False constant decides it (`or`: a True one)
                val, expr = _decided_by(m.group(3), consts)
            if val is not None:
                line += f"  # <- {'taken' if val else 'not taken'} here ({_names_in(expr, consts)})"
        out.append(line)
    return "\n".join(out)


def _decided_by(expr: str, consts: dict) -> tuple:
    """(value, operand) where one operand of a top-level ``and`` is a False constant expression
    (or of an ``or`` a True one), which decides the whole; (None, expr) otherwise."""
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None, expr
    if isinstance(tree, ast.BoolOp):
        stop = isinstance(tree.op, ast.Or)  # the value that decides: True for or, False for and
        for operand in tree.values:
            part = ast.get_source_segment(expr, operand)
            if part is not None and const_eval(part, consts) is stop:
                return stop, part
    return None, expr


_NOT_TAKEN = re.compile(r"^(\s*)(?:if|elif|while)\b.*# <- not taken here \((.*)\)$")
_TAKEN = re.compile(r"^(\s*)(?:if|elif)\b.*# <- taken here \((.*)\)$")
_ELSE = re.compile(r"^(\s*)(?:else|elif\b.*):")


def built_only(src: str) -> str:
    """``src`` as annotated by :func:`_annotate_branches`, with the code this build does not
    compile cut out: the body of a branch marked "not taken", and the ``elif``/``else`` clauses
    after one marked "taken".  Each cut leaves one line saying how many lines it held."""
    lines = src.splitlines()
    out, i = [], 0

    def body_end(j: int, indent: int) -> int:  # first line after the block that starts at line j
        k = j + 1
        while k < len(lines) and (not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) > indent):
            k += 1
        while k > j + 1 and not lines[k - 1].strip():  # trailing blank lines stay outside the block
            k -= 1
        return k

    while i < len(lines):
        line = lines[i]
        m = _NOT_TAKEN.match(line)
        if m:
            ind = len(m.group(1))
            end = body_end(i, ind)
            out.append(line)
            out.append(" " * (ind + 4) + f"...  # {end - i - 1} lines not compiled ({m.group(2)})")
            i = end
            continue
        m = _TAKEN.match(line)
        if m:
            ind = len(m.group(1))
            end = body_end(i, ind)
            out.extend(lines[i:end])
            i = end
            while i < len(lines) and _ELSE.match(lines[i]) and len(lines[i]) - len(lines[i].lstrip()) == ind:
                end = body_end(i, ind)
                out.append(" " * ind + f"# {lines[i].strip().split(':')[0]}: {end - i} lines not compiled ({m.group(2)})")
                i = end
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _names_in(expr: str, consts: dict) -> str:
    names = sorted({n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)})
    return ", ".join(f"{n}={consts[n]!r}" for n in names)


def const_eval(expr: str, consts: dict):
    """The truth of ``expr`` when it is made only of constants, names in ``consts``, comparisons,
    arithmetic and boolean operators; None otherwise (nothing else is evaluated)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant,
               ast.And, ast.Or, ast.Not, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Add, ast.Sub,
               ast.Mult, ast.FloorDiv, ast.Mod, ast.USub)
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    if not names or any(not isinstance(n, allowed) for n in ast.walk(tree)) or any(n.id not in consts for n in names):
        return None
    try:
        return bool(eval(compile(tree, "<branch>", "eval"), {"__builtins__": {}}, dict(consts)))  # noqa: S307
    except Exception:  # noqa: BLE001
        return None


class _Code:
    def __init__(self, text: str, title: str, diff: bool = False, open_: bool = True):
        self.text, self.title, self.diff, self.open = text, title, diff, open_

    def __str__(self) -> str:
        return f"# {self.title}\n{self.text}"

    def _repr_html_(self) -> str:
        lines = []
        for line in self.text.splitlines():
            style = ""
            if self.diff and line.startswith("+") and not line.startswith("+++"):
                style = "background:#e6ffec"
            elif self.diff and line.startswith("-") and not line.startswith("---"):
                style = "background:#ffebe9"
            elif self.diff and line.startswith("@@"):
                style = "color:#6f42c1"
            lines.append(f'<span style="{style}">{html.escape(line) or " "}</span>')
        body = "\n".join(lines)
        return (f"<details{' open' if self.open else ''}><summary><b>{html.escape(self.title)}</b></summary>"
                f'<pre style="font-size:11px;line-height:1.25">{body}</pre></details>')


def source(variant: Variant, problem: Problem | None = None, open_: bool = True) -> _Code:
    """The rung's kernel source and the helpers it calls (its class when no problem is given)."""
    return _Code(kernel_sources(variant, problem), f"kernel of rung {variant.label}", open_=open_)


def source_diff(prev: Variant, cur: Variant, problem: Problem | None = None, context: int = 3,
                open_: bool = True, built: bool = False) -> _Code:
    """Unified diff of what ``cur`` runs against what ``prev`` runs: kernel bodies, launch shapes
    and the helpers they call (a change that lives in a helper shows in that helper).
    ``built``: diff the code each build compiles (:func:`built_only`), so that rungs of one kernel
    factory that differ by a compile-time switch show the code the switch turns on and off, not
    only the switch's comment."""
    a, b = kernel_sources(prev, problem), kernel_sources(cur, problem)
    if built:
        a, b = built_only(a), built_only(b)
    a, b = a.splitlines(), b.splitlines()
    diff = "\n".join(difflib.unified_diff(a, b, fromfile=prev.label, tofile=cur.label, n=context, lineterm=""))
    n_add = sum(1 for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++"))
    n_del = sum(1 for l in diff.splitlines() if l.startswith("-") and not l.startswith("---"))
    title = f"what changed in the kernel: {prev.label} -> {cur.label} (+{n_add} -{n_del} lines)"
    const = _changed_constants(a, b)
    if const:
        title += "; constants " + ", ".join(const[:6]) + (" ..." if len(const) > 6 else "")
    if n_add + n_del > LONG_DIFF:  # a rewrite: folded, its title says what moved
        title += f"; a long diff, folded: {_changed_defs(diff)}"
        open_ = False
    return _Code(diff or "(no change in the kernels or the helpers they call)", title, diff=True, open_=open_)


#: a diff longer than this (added + removed lines) is folded behind its summary
LONG_DIFF = 80
_CONST_LINE = re.compile(r"^#   (\w+) = (.+)$")


def _changed_constants(a: list[str], b: list[str]) -> list[str]:
    """'NAME old -> new' for each compile-time constant whose value differs (or appears)."""
    def table(lines):
        return {m.group(1): m.group(2) for m in map(_CONST_LINE.match, lines) if m}

    ta, tb = table(a), table(b)
    return [f"{k} {ta.get(k, '—')} -> {tb.get(k, '—')}" for k in sorted(set(ta) | set(tb)) if ta.get(k) != tb.get(k)]


def _changed_defs(diff: str) -> str:
    """The kernels and helpers a diff's hunks touch, as a phrase."""
    names = []
    for line in diff.splitlines():
        m = re.match(r"^[+-](?:def|@\S+\s*def)\s+(\w+)|^[+-]# (?:helper \S+\.|launch )(\w+)", line)
        if m:
            n = m.group(1) or m.group(2)
            if n not in names:
                names.append(n)
    return ("changes in " + ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")) if names else "open it to read"
