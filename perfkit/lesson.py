"""Literate helpers for the notebooks: what a rung's kernel is, what changed, and what it did.

* :func:`source` / :func:`source_diff`: a rung's **kernel** (the function it launches, with its
  launch shape and config) and the helpers that kernel calls inside ``perfkit.kernels``
  (``load4``, ``mma_16816``, ``group_sum``...), found from the kernel's global names and
  closure; the diff between two rungs is the diff of those, not of the rung classes.
* :func:`recorded` / :class:`RungCard`: the recorded GPU measurement of one (problem, rung):
  median, rate, x the rung before, fraction of the oracle, with GPU, date and commit; the
  model's estimate beside it (``perfkit.model.estimate`` when present) and a paragraph that
  reads, from the numbers, where the estimate misses.  :func:`ladder_cards` and
  :func:`card_table` give a whole ladder; :func:`records` gives the recorded frame with the
  current ladder's labels (for :func:`perfkit.plots.ladder` and the roofline).
* :func:`predict_prompt` / :func:`answer`: "predict before you run", then the answer folded.
* :func:`quiet_numba_warnings`, :func:`sweep_table`, :func:`fold`, :func:`anatomy_table`:
  output a reader can read.

How a record is matched to a rung (:data:`MATCH_RULE`): ladders are renumbered as rungs are
added, so a record matches by **op + variant name + problem parameters**, never by rung number.
"""
from __future__ import annotations

import ast
import difflib
import functools
import html
import inspect
import re
import textwrap
import types
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .history import source_changed_since  # re-exported: the notebooks ask lesson
from .kernels import registry
from .kernels.base import Problem, Variant

__all__ = ["source", "source_diff", "kernel_sources", "kernel_helpers", "MATCH_RULE", "records",
           "recorded", "RungCard", "ladder_cards", "card_table", "ladder_for", "predict_prompt", "answer",
           "rung_section", "source_changed_since", "quiet_numba_warnings", "numba_warning_summary",
           "sweep_table", "fold", "anatomy_table", "fmt_seconds", "metric_for", "false_no_record_claims", "reload"]

MATCH_RULE = ("a record matches a rung when its op and variant name are the rung's and every problem "
              "parameter it carries equals the problem's (a parameter added to the problem since, at its "
              "default value, is ignored); the rung number is not used, since ladders are renumbered")

_KERNELS_PKG = "perfkit.kernels"


# --- small formatting helpers ----------------------------------------------------------------
def fmt_seconds(s) -> str:
    """Seconds in a unit a reader reads at a glance: 5.70 ms, 62.1 µs, 1.37 s."""
    try:
        s = float(s)
    except (TypeError, ValueError):
        return "—"
    if not np.isfinite(s):
        return "—"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e9:.3g} ns"


_FLOP_OPS = {"gemm", "conv", "conv2d", "attention", "mlp"}


def metric_for(op: str) -> str:
    """``"tflops"`` for compute-heavy ops (GEMM, convolution), ``"gbps"`` for the rest."""
    return "tflops" if op in _FLOP_OPS or op.startswith("conv") else "gbps"


_UNIT = {"tflops": "TFLOP/s", "gbps": "GB/s"}


def fmt_rate(x) -> str:
    """A rate with three significant digits and no exponent: 24.1, 0.499, 2163."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "—"
    if not np.isfinite(x):
        return "—"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _rate(metric: str, flops, nbytes, seconds) -> float:
    try:
        return (float(flops) / float(seconds) / 1e12) if metric == "tflops" else (float(nbytes) / float(seconds) / 1e9)
    except (TypeError, ValueError, ZeroDivisionError):
        return float("nan")


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
        for name in sorted(names, key=lambda n: code.co_names.index(n) if n in code.co_names else 1 << 30):
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
            val = _const_eval(m.group(3), consts)
            if val is not None:
                line += f"  # <- {'taken' if val else 'not taken'} here ({_names_in(m.group(3), consts)})"
        out.append(line)
    return "\n".join(out)


def _names_in(expr: str, consts: dict) -> str:
    names = sorted({n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)})
    return ", ".join(f"{n}={consts[n]!r}" for n in names)


def _const_eval(expr: str, consts: dict):
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
                open_: bool = True) -> _Code:
    """Unified diff of what ``cur`` runs against what ``prev`` runs: kernel bodies, launch shapes
    and the helpers they call (a change that lives in a helper shows in that helper)."""
    a = kernel_sources(prev, problem).splitlines()
    b = kernel_sources(cur, problem).splitlines()
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


# --- recorded measurements, matched to rungs --------------------------------------------------
def ladder_for(op: str) -> list[Variant]:
    """The current ladder of an op (:mod:`perfkit.kernels.registry`); LookupError if it has none."""
    return registry.ladder(op)


@functools.lru_cache(maxsize=16)
def _load(op: str | None, root: str | None) -> pd.DataFrame:
    from . import results

    return results.load(op=op, root=root, latest=False)


def records(op: str, ladder: list[Variant] | None = None, *, root=None, gpu: str | None = None,
            latest: bool = True) -> pd.DataFrame:
    """Results recorded on real GPUs for ``op`` (``perfkit.results.load``), with ``label`` (the
    *current* ladder's label of the variant, matched by name: ``"08 double_buffer"``; peers
    ``"peer torch"``; a variant no longer in the ladder keeps its recorded number and says so),
    ``rate`` in the op's unit, and ``date``.  The newest record per (gpu, problem, variant)."""
    df = _load(op, str(root) if root is not None else None).copy()
    if df.empty:
        return df.assign(label=pd.Series(dtype=object), rate=pd.Series(dtype=float), date=pd.Series(dtype=object))
    if "simulated" in df:
        df = df[~df["simulated"].fillna(False).astype(bool)]
    if gpu is not None:
        g = gpu.lower()
        df = df[(df["gpu"].astype(str).str.lower() == g) | (df["gpu_slug"].astype(str).str.lower() == g)]
    if latest and not df.empty:
        df = df.sort_values("utc").drop_duplicates(["gpu", "problem", "variant"], keep="last")
    try:
        ladder = ladder if ladder is not None else ladder_for(op)
    except LookupError:
        ladder = []
    by_name = {v.name: v for v in ladder}

    def label(r):
        v = by_name.get(r["variant"])
        if v is not None:
            return v.label
        if int(r["rung"]) < 0:
            return f"peer {r['variant']}"
        return f"{int(r['rung']):02d} {r['variant']} (not in today's ladder)"

    df["label"] = df.apply(label, axis=1) if not df.empty else []
    df["rung_now"] = [by_name[n].rung if n in by_name else (r if r < 0 else np.nan)
                      for n, r in zip(df["variant"], df["rung"])]
    metric = metric_for(op)
    df["rate"] = df[metric] if metric in df else np.nan
    df["date"] = df["utc"].astype(str).str[:10]
    sort = [c for c in ("problem", "rung_now", "rung") if c in df]
    return df.sort_values(sort).reset_index(drop=True)


_PARAM_RE = re.compile(r"(\w+)=(\S+)")


def _same_value(a, b) -> bool:
    if str(a) == str(b):
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def _matches(problem: Problem | str | dict, record_label: str) -> bool:
    rec = dict(_PARAM_RE.findall(str(record_label)))
    if isinstance(problem, str):
        want = dict(_PARAM_RE.findall(problem))
        defaults = {}
    elif isinstance(problem, dict):
        want, defaults = problem, {}
    else:
        want = problem.params
        import dataclasses

        defaults = {f.name: f.default for f in dataclasses.fields(problem)
                    if f.default is not dataclasses.MISSING}
    if not rec:
        return False
    for k, v in rec.items():
        if k not in want or not _same_value(want[k], v):
            return False
    for k, v in want.items():
        if k not in rec and not (k in defaults and _same_value(defaults[k], v)):
            return False
    return True


def _match_rows(df: pd.DataFrame, problem, variant_name: str) -> pd.DataFrame:
    if df.empty:
        return df
    rows = df[df["variant"] == variant_name]
    if rows.empty:
        return rows
    keep = [_matches(problem, lab) for lab in rows["problem"]]
    rows = rows[keep]
    return rows.sort_values("utc", na_position="last") if "utc" in rows else rows


def _head_commit() -> str | None:
    from .results import git_commit

    return git_commit()


def shown_gpu(want: str | None = None, ops=()) -> str | None:
    """The GPU whose records a notebook shows (its cards, tables, plots and ceilings are of one
    GPU): the recorded GPU ``want`` names (a name or slug, case-insensitive), else the GPU of the
    newest real record of ``ops``; None when there is none."""
    frames = []
    for op in ops:
        df = _load(op, None)
        if not df.empty:
            frames.append(df[~df["simulated"].fillna(False).astype(bool)] if "simulated" in df else df)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if df.empty:
        return want
    if want:
        w = str(want).lower()
        hit = df[(df["gpu"].astype(str).str.lower() == w) | (df["gpu_slug"].astype(str).str.lower() == w)]
        if hit.empty:
            raise LookupError(f"no records of GPU {want!r}; recorded: {', '.join(sorted(set(df['gpu'])))}")
        return str(hit["gpu"].iloc[0])
    return str(df.sort_values("utc")["gpu"].iloc[-1])


def spec_key(gpu_name: str | None, default: str = "h100-sxm") -> str:
    """devices.yaml key of a recorded GPU's name (``default`` when it is unknown or None)."""
    return _spec_key(gpu_name, default)


def _spec_key(gpu_name: str | None, default: str) -> str:
    from . import specs

    for name in (gpu_name, default):
        if not name:
            continue
        try:
            return specs.get(name).key
        except Exception:
            continue
    return default


@dataclass
class RungCard:
    """One rung at one problem: the recorded measurement, the rung before, the oracle and the
    model's estimate.  Renders as HTML in a notebook, as text elsewhere; ``as_dict()`` is one
    row of :func:`card_table`."""

    op: str
    problem: str
    variant: str
    label: str
    metric: str
    found: bool = False
    median_s: float = float("nan")
    iqr_s: float = float("nan")
    n_samples: float = float("nan")
    rate: float = float("nan")
    gpu: str | None = None
    date: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    changed_since: bool | None = None
    prev_label: str | None = None
    prev_median_s: float = float("nan")
    prev_note: str = ""
    x_prev: float = float("nan")
    oracle_median_s: float = float("nan")
    of_oracle: float = float("nan")
    estimate: object = None
    estimate_s: float = float("nan")
    bound: str | None = None
    legs: dict = field(default_factory=dict)
    estimate_kind: str = ""
    estimate_error: str = ""
    prev_estimate_s: float = float("nan")
    #: the model's estimate of the kernel as it was at the record's commit (where it changed since)
    estimate_then_s: float = float("nan")
    estimate_then_note: str = ""
    model_gpu: str | None = None
    oracle_label: str | None = None
    anatomy_note: str = ""
    prev_commit: str = ""
    best_before_label: str | None = None  # the fastest recorded rung before this one
    best_before_s: float = float("nan")
    estimate_banks: bool = True  # the estimate simulated the shared-memory bank conflicts
    flops: float = float("nan")  # the problem's minimal work, for rates of estimates with no record
    bytes: float = float("nan")
    other_problems: list = field(default_factory=list)
    path: str | None = None

    # -- derived --
    @property
    def measured_code_estimate_s(self) -> float:
        """The estimate of the program that was measured: of the kernel at the record's commit
        where it changed since (and could be rebuilt), else of today's kernel."""
        if self.changed_since:
            return self.estimate_then_s
        return self.estimate_s

    @property
    def ratio(self) -> float:
        """Measured over estimated, both of the same code (> 1: the GPU was slower than the model
        said); NaN where the recorded kernel changed since and could not be rebuilt."""
        e = self.measured_code_estimate_s
        if self.found and np.isfinite(e) and e > 0:
            return self.median_s / e
        return float("nan")

    @property
    def estimate_rate(self) -> float:
        """The model's estimate of the measured code as a rate in the card's unit (ladder plot);
        with no record, today's estimate at the problem's FLOPs or bytes."""
        e = self.measured_code_estimate_s if self.found else self.estimate_s
        if not (np.isfinite(e) and e > 0):
            return float("nan")
        if self.found:
            return self.rate * self.median_s / e
        return _rate(self.metric, self.flops, self.bytes, e)

    def verdict(self) -> str:
        """What the records say happened at this rung, in words: faster or slower than the rung
        before and by how much, and its share of the oracle's speed (what the anatomy changed is
        :attr:`anatomy_note`).  Written from the numbers, so it cannot contradict them."""
        if not self.found:
            est = (f" The model estimates {fmt_seconds(self.estimate_s)} on {self.model_gpu}, bound by {self.bound}."
                   if np.isfinite(self.estimate_s) else "")
            return f"No record of {self.label} at this problem on a real GPU yet.{est}"
        out = []
        if np.isfinite(self.x_prev):
            x = self.x_prev
            word = "faster than" if x >= 1.02 else "slower than" if x <= 0.98 else "about as fast as"
            out.append(f"Measured on {self.gpu}: {word} {self.prev_label}, x{x:.2f} "
                       f"({fmt_seconds(self.median_s)} against {fmt_seconds(self.prev_median_s)}){self.prev_note}.")
        else:
            out.append(f"Measured on {self.gpu}: {fmt_seconds(self.median_s)}"
                       + (f"; {self.prev_label} has no record here to compare with." if self.prev_label else "."))
        if (self.best_before_label and self.best_before_label != self.prev_label
                and np.isfinite(self.best_before_s) and self.best_before_s < self.median_s * 0.98):
            out.append(f"Still slower than {self.best_before_label} ({fmt_seconds(self.best_before_s)}), the fastest "
                       f"rung before it, x{self.best_before_s / self.median_s:.2f}.")
        if np.isfinite(self.of_oracle):
            out.append(f"It runs at {self.of_oracle:.1%} of the oracle's speed ({self.oracle_label or 'rung 0'}: "
                       f"{fmt_seconds(self.oracle_median_s)}).")
        if self.changed_since:
            out.append(f"The record is of the kernel at {(self.commit or '?')[:7]}; it has changed since, so today's "
                       "kernel may not do the same.")
        return " ".join(out)

    @property
    def provenance(self) -> str:
        if not self.found:
            return ""
        c = (self.commit or "?")[:7] + ("+dirty" if self.dirty else "")
        s = f"{self.gpu}, {self.date}, commit {c}"
        if self.changed_since:
            s += f" (recorded at {c}, kernel changed since)"
        elif self.changed_since is None and self.commit and self.commit != _head_commit():
            s += " (cannot tell whether the kernel changed since)"
        return s

    @property
    def status(self) -> str:
        if not self.found:
            return "no record"
        return "kernel changed since" if self.changed_since else "recorded"

    def explanation(self) -> str:
        """Where the estimate misses, read from the numbers (nothing asserted beyond them)."""
        if not self.found:
            return ""
        if not np.isfinite(self.estimate_s):
            return ("No per-rung estimate to compare" + (f" ({self.estimate_error})" if self.estimate_error else "")
                    + ".")
        r, m, e = self.ratio, self.median_s, self.measured_code_estimate_s
        kind = "estimate" if self.estimate_kind == "estimate" else "roofline bound"
        if self.changed_since and not np.isfinite(e):
            return (f"The record is of this rung's kernel at {(self.commit or '?')[:7]}, which has changed since and "
                    f"could not be rebuilt here ({self.estimate_then_note}): today's estimate describes other code, so "
                    "no comparison is drawn.")
        caveat = (f"The record is of this rung's kernel at {(self.commit or '?')[:7]}, which has changed since: the "
                  "estimate compared here is of that kernel, rebuilt from its commit. "
                  if self.changed_since else "")
        legs = sorted(((k, float(v)) for k, v in (self.legs or {}).items()
                       if v is not None and np.isfinite(float(v))), key=lambda kv: -kv[1])
        total = sum(v for _, v in legs)
        out = []
        if 0.8 <= r <= 1.25:
            out.append(f"The {kind} ({fmt_seconds(e)}, bound by {self.bound}) is within 25% of the measured "
                       f"{fmt_seconds(m)} (measured/estimate {r:.2f}).")
        elif r > 1.25:
            out.append(f"The GPU took {r:.1f}x the {kind} ({fmt_seconds(m)} measured, {fmt_seconds(e)} estimated, "
                       f"bound by {self.bound}).")
            if self.estimate_kind != "estimate":
                out.append("A roofline bound counts only FLOPs and DRAM bytes: everything the rung spends on "
                           "L2, shared memory, latency and instruction issue is missing from it.")
            elif legs and len(legs) > 1:
                if m <= total:
                    out.append(f"The measured time lies between the largest leg ({legs[0][0]}, "
                               f"{fmt_seconds(legs[0][1])}) and the sum of all legs ({fmt_seconds(total)}): on the GPU "
                               "the legs overlapped less than the model lets them.")
                else:
                    out.append(f"It is {m / total:.1f}x even the sum of every leg ({fmt_seconds(total)}), so "
                               f"{fmt_seconds(m - total)} per launch is time none of the legs the model counts "
                               "accounts for.")
        else:
            out.append(f"The GPU ran {1 / r:.1f}x faster than the {kind} ({fmt_seconds(m)} measured, "
                       f"{fmt_seconds(e)} estimated).")
            if legs:
                k, v = legs[0]
                if v > m:
                    out.append(f"The {k} leg alone ({fmt_seconds(v)}) exceeds the measured time, so the model "
                               f"over-counts it here: either less traffic reaches that level on the GPU than the "
                               f"model charges, or the level serves it faster than the rate the model assumes.")
        if len(legs) > 1 and legs[1][1] >= 0.5 * legs[0][1]:
            out.append(f"The {legs[1][0]} leg ({fmt_seconds(legs[1][1])}) is within 2x of the bound, so a small "
                       "error in either would change which one binds.")
        if np.isfinite(self.x_prev) and np.isfinite(self.prev_estimate_s) and np.isfinite(e):
            pred = self.prev_estimate_s / e
            meas = self.x_prev
            if abs(pred - 1) < 0.02:
                verdict = " (the model sees no difference between the two)"
            elif abs(meas - 1) < 0.02:
                verdict = " (measured, the two are about as fast)"
            elif (pred > 1) != (meas > 1):
                verdict = " (the model got the direction wrong)"
            else:
                verdict = ""
            out.append(f"Against {self.prev_label}: measured x{meas:.2f}, the model said x{pred:.2f}{verdict}.")
        return caveat + " ".join(out)

    # -- rendering --
    def rows(self) -> list[tuple[str, str]]:
        unit = _UNIT[self.metric]
        if not self.found:
            msg = f"no record of {self.label} at {self.problem} on a real GPU"
            if self.other_problems:
                msg += "; recorded at: " + "; ".join(self.other_problems[:4])
            rows = [("measured", msg)]
            if np.isfinite(self.estimate_s):
                legs = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in
                                 sorted(self.legs.items(), key=lambda kv: -float(kv[1] or 0)) if v)
                name = "model estimate" if self.estimate_kind == "estimate" else "roofline bound (model.estimate absent)"
                if not self.estimate_banks:
                    name += " (bank conflicts not simulated)"
                rows.append((name, f"{fmt_seconds(self.estimate_s)} on {self.model_gpu}, bound by {self.bound}"
                             + (f"; legs: {legs}" if legs else "")))
            elif self.estimate_error:
                rows.append(("model estimate", self.estimate_error))
            return rows
        rows = [("what happened", self.verdict() + (f" In the anatomy: {self.anatomy_note}." if self.anatomy_note else "")),
                ("measured (median)", f"{fmt_seconds(self.median_s)}  ±{fmt_seconds(self.iqr_s / 2)} (IQR/2), "
                 f"{int(self.n_samples) if np.isfinite(self.n_samples) else '?'} samples"),
                ("rate", f"{fmt_rate(self.rate)} {unit}")]
        if self.prev_label:
            if np.isfinite(self.x_prev):
                rows.append(("x the rung before", f"x{self.x_prev:.2f} vs {self.prev_label} "
                             f"({fmt_seconds(self.prev_median_s)}){self.prev_note}"))
            else:
                rows.append(("x the rung before", f"— ({self.prev_label} has no record here)"))
        rows.append(("of the oracle", f"{self.of_oracle:.1%}" if np.isfinite(self.of_oracle) else "— (no oracle record)"))
        rows.append(("recorded on", self.provenance))
        if np.isfinite(self.estimate_s):
            legs = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in
                             sorted(self.legs.items(), key=lambda kv: -float(kv[1] or 0)) if v)
            name = "model estimate" if self.estimate_kind == "estimate" else "roofline bound (model.estimate absent)"
            if self.changed_since:
                name += " of today's kernel"
                then = (f"{fmt_seconds(self.estimate_then_s)}" if np.isfinite(self.estimate_then_s)
                        else f"— ({self.estimate_then_note or 'not rebuilt'})")
                rows.append((f"model estimate of the kernel measured (at {(self.commit or '?')[:7]})", then))
            rows.append((name, f"{fmt_seconds(self.estimate_s)}, bound by {self.bound}" + (f"; legs: {legs}" if legs else "")))
            rows.append(("measured / estimate" + (" (same code)" if self.changed_since else ""),
                         f"{self.ratio:.2f}" if np.isfinite(self.ratio) else "— (the measured kernel's estimate is missing)"))
        elif self.estimate_error:
            rows.append(("model estimate", self.estimate_error))
        return rows

    def __str__(self) -> str:
        head = f"{self.label} at {self.problem}"
        lines = [head] + [f"  {k:<20} {v}" for k, v in self.rows()]
        ex = self.explanation()
        if ex:
            lines.append("  " + "\n  ".join(textwrap.wrap(ex, 96)))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.found and not self.changed_since else "#9a6700" if self.found else "#cf222e"
        rows = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>" for k, v in self.rows())
        ex = self.explanation()
        return (f"<div style='border-left:4px solid {color};padding-left:8px;margin:4px 0'>"
                f"<b>{html.escape(self.label)}</b> at <code>{html.escape(self.problem)}</code> "
                f"<span style='color:{color}'>[{html.escape(self.status)}]</span><table>{rows}</table>"
                + (f"<p style='max-width:60em'>{html.escape(ex)}</p>" if ex else "") + "</div>")

    def as_dict(self) -> dict:
        unit = _UNIT[self.metric]
        return {"rung": self.label, "status": self.status, "median": fmt_seconds(self.median_s) if self.found else "—",
                unit: self.rate if self.found else np.nan, "x prev": self.x_prev, "of oracle": self.of_oracle,
                # the estimate of the code that was measured (of the kernel at the record's commit
                # where it changed since), and of today's kernel where that differs
                "estimate": fmt_seconds(self.measured_code_estimate_s if self.found else self.estimate_s),
                "estimate, today's code": fmt_seconds(self.estimate_s) if self.changed_since else "same",
                "bound": self.bound, "measured/est": self.ratio, "recorded on": self.provenance}


_ESTIMATES: dict = {}


def _estimate(variant: Variant, problem: Problem, gpu_key: str, banks: bool = True):
    """(seconds, bound, legs, kind, error) from ``model.estimate`` when it exists, else the
    roofline; remembered per (rung, config, problem, gpu, banks) for the session."""
    key = (type(variant).__module__, type(variant).__qualname__, repr(getattr(variant, "config", None)),
           type(problem).__qualname__, problem.label, gpu_key, banks)
    if key not in _ESTIMATES:
        _ESTIMATES[key] = _estimate_now(variant, problem, gpu_key, banks)
    return _ESTIMATES[key]


def _estimate_then(op: str, v: Variant, problem: Problem, commit: str, gpu_key: str) -> tuple[float, str]:
    """(seconds, note) of the model's estimate of rung ``v`` as it was at ``commit``
    (:func:`perfkit.history.variant_at`); NaN and the reason where it cannot be rebuilt."""
    from . import history

    try:
        old, old_mod = history.variant_at(commit, op, v.name, getattr(v, "config", None))
    except Exception as exc:  # noqa: BLE001  (no git, an old module that fails: say so on the card)
        return float("nan"), f"{type(exc).__name__}: {exc}"
    if old is None:
        return float("nan"), history.why_not(commit) or f"{v.name} is not in the ladder at {commit[:7]}"
    try:
        old_p = old_mod.Problem(**problem.params)
    except Exception:  # noqa: BLE001  (the Problem's fields changed since: today's is the same shape)
        old_p = problem
    t, _, _, kind, err = _estimate(old, old_p, gpu_key)
    return t, (err or f"{kind} of the kernel at {commit[:7]}")


def anatomy_changes(before, after) -> str:
    """What changed between two anatomy reports that moves time (occupancy and its limiter,
    registers, spills, shared memory per block), as a phrase; '' when nothing did."""
    if after is None:
        return ""
    parts = []
    occ = getattr(after, "occupancy", None)
    if before is None:
        if occ is not None:
            parts.append(f"occupancy {occ.ratio:.0%} (limited by {occ.limiter})")
        return ", ".join(parts)
    o0 = getattr(before, "occupancy", None)
    if occ is not None and o0 is not None and abs(occ.ratio - o0.ratio) > 1e-9:
        parts.append(f"occupancy {o0.ratio:.0%} -> {occ.ratio:.0%} (limited by {occ.limiter})")
    if before.registers != after.registers:
        parts.append(f"registers {before.registers} -> {after.registers}")
    sp0 = before.spill_store_bytes + before.spill_load_bytes
    sp1 = after.spill_store_bytes + after.spill_load_bytes
    if sp0 != sp1:
        parts.append(f"spilled bytes {sp0} -> {sp1}")
    if before.shared_bytes != after.shared_bytes:
        parts.append(f"shared memory {before.shared_bytes} -> {after.shared_bytes} B a block")
    return ", ".join(parts)


def _estimate_now(variant: Variant, problem: Problem, gpu_key: str, banks: bool = True):
    from . import model

    if hasattr(model, "estimate"):
        try:
            e = model.estimate(variant, problem, gpu=gpu_key, banks=banks)
            return float(e.seconds), str(e.bound), dict(e.legs or {}), "estimate", ""
        except Exception as exc:  # a rung the model cannot take yet: say so, do not fail the lesson
            err = f"model.estimate failed: {type(exc).__name__}: {exc}"
    else:
        err = ""
    try:
        from .roofline import published_rates

        t = variant.traffic(problem)
        r = published_rates(t, gpu=gpu_key)
        pr = model.predict(t, peak_flops=r["flops"], dram_bw=r["dram_bw"])
        return float(pr.seconds), str(pr.limiter), dict(pr.per_level or {}), "roofline", err
    except Exception as exc:
        return float("nan"), None, {}, "", err or f"no model for this rung: {type(exc).__name__}: {exc}"


def _as_variant(rung, ladder: list[Variant]) -> Variant:
    if isinstance(rung, Variant):
        return rung
    for v in ladder:
        if (isinstance(rung, str) and (v.name == rung or v.label == rung)) or \
                (isinstance(rung, (int, np.integer)) and not isinstance(rung, bool) and v.rung == rung):
            return v
    raise LookupError(f"rung {rung!r} is not in the ladder ({[v.label for v in ladder]})")


def recorded(op: str, problem: Problem | str | dict, rung, *, ladder: list[Variant] | None = None,
             gpu: str | None = None, model_gpu: str = "h100-sxm", estimate: bool = True, root=None,
             table: pd.DataFrame | None = None, banks_unrecorded: bool = True) -> RungCard:
    """The **rung card** of ``rung`` (a Variant, its name, label or current number) at ``problem``
    (a Problem, its label, or a dict of parameters).

    Matching (:data:`MATCH_RULE`): op + variant name + problem parameters; the rung number is
    never used.  The newest matching record (of ``gpu`` if given) is shown, with the rung
    before it in today's ladder and the oracle, recorded on the same GPU at the same problem.
    A rung whose record was made at another commit and whose kernel code changed since is
    labelled "recorded at <commit>, kernel changed since".  With ``estimate``, the model's
    estimate for the recorded GPU (``model.estimate``; the roofline bound until it exists).
    ``table`` replaces the recorded frame (e.g. with a fresh sweep's rows added).
    ``banks_unrecorded=False``: a card with no record is estimated without the bank-conflict
    simulation (the slow part for the tensor-core rungs in the simulator), and says so."""
    ladder = list(ladder) if ladder is not None else ladder_for(op)
    v = _as_variant(rung, ladder)
    base = problem
    df = table if table is not None else records(op, ladder, root=root, gpu=gpu)
    if "op" in df and not df.empty:  # a table of every op: layernorm_bwd shares layernorm's labels and names
        df = df[df["op"] == op]
    if isinstance(problem, Problem) and hasattr(v, "example") and not v.oracle:
        # the rung's own twin of the problem (float16, NHWC), unless it was recorded at the
        # problem as asked (conv's igemm_regblock at the NCHW layer: its record is shown)
        if _match_rows(df[~df["simulated"].fillna(False).astype(bool)] if "simulated" in df else df,
                       problem, v.name).empty:
            problem = v.example(problem)
    plabel = problem.label if isinstance(problem, Problem) else (
        problem if isinstance(problem, str) else " ".join(f"{k}={x}" for k, x in problem.items()))
    metric = metric_for(op)
    card = RungCard(op=op, problem=plabel, variant=v.name, label=v.label, metric=metric)
    if isinstance(problem, Problem):
        card.flops, card.bytes = float(problem.flops), float(problem.bytes)
    idx = [i for i, x in enumerate(ladder) if x is v or x.name == v.name]
    i = idx[0] if idx else None
    prev = next((ladder[j] for j in range(i - 1, -1, -1) if not ladder[j].oracle), None) if i is not None else None
    oracle = next((x for x in ladder if x.oracle), None)
    card.prev_label = prev.label if prev is not None else None
    if "simulated" in df and not df.empty:
        df = df[~df["simulated"].fillna(False).astype(bool)]
    mine = _match_rows(df, problem, v.name)
    card.oracle_label = oracle.label if oracle is not None else None
    if mine.empty:  # no record: the card still shows what the model says (for the default GPU)
        others = df[df["variant"] == v.name]["problem"].drop_duplicates().tolist() if not df.empty else []
        card.other_problems = others
        if not estimate:
            card.estimate_error = "not computed here (estimate=False)"
        elif isinstance(problem, Problem):
            card.model_gpu = _spec_key(gpu, model_gpu)
            card.estimate_banks = bool(banks_unrecorded)
            card.estimate_s, card.bound, card.legs, card.estimate_kind, card.estimate_error = \
                _estimate(v, problem, card.model_gpu, card.estimate_banks)
        return card
    r = mine.iloc[-1]
    card.found = True
    card.median_s = float(r["median_s"])
    card.iqr_s = float(r.get("iqr_s", np.nan) if r.get("iqr_s") is not None else np.nan)
    card.n_samples = float(r.get("n_samples", np.nan) if r.get("n_samples") is not None else np.nan)
    card.rate = _rate(metric, r.get("flops"), r.get("bytes"), card.median_s)
    card.gpu, card.commit, card.dirty = r.get("gpu"), r.get("commit"), bool(r.get("dirty")) if r.get("dirty") is not None else None
    card.date = str(r.get("utc", ""))[:10]
    card.path = r.get("path")
    card.changed_since = source_changed_since(v, card.commit) if card.commit else None
    same_gpu = df[df["gpu"] == card.gpu] if "gpu" in df else df
    if prev is not None:
        pr = _match_rows(same_gpu, problem, prev.name)
        if pr.empty and isinstance(base, Problem) and hasattr(prev, "example"):
            alt = prev.example(base)  # e.g. the rung before takes float32, this one float16
            if alt.label != problem.label:
                pr = _match_rows(same_gpu, alt, prev.name)
                if not pr.empty:
                    card.prev_note = f"; the rung before at its own problem {alt.label}"
        if pr.empty and i is not None:  # the rung just before has no record here: the nearest that has
            for j in range(i - 2, -1, -1):
                cand = ladder[j]
                if cand.oracle:
                    continue
                pr = _match_rows(same_gpu, problem, cand.name)
                if not pr.empty:
                    card.prev_note = f" ({prev.label}, the rung just before, has no record here)"
                    card.prev_label, prev = cand.label, cand
                    break
        if not pr.empty:
            card.prev_median_s = float(pr.iloc[-1]["median_s"])
            card.x_prev = card.prev_median_s / card.median_s
            card.prev_commit = str(pr.iloc[-1].get("commit") or "")
    if i is not None:  # the fastest rung before this one, as recorded here
        best = None
        for u in ladder[:i]:
            if u.oracle:
                continue
            ur = _match_rows(same_gpu, problem, u.name)
            if not ur.empty and (best is None or float(ur.iloc[-1]["median_s"]) < best[1]):
                best = (u.label, float(ur.iloc[-1]["median_s"]))
        if best is not None:
            card.best_before_label, card.best_before_s = best
    if oracle is not None:
        orc = _match_rows(same_gpu, problem, oracle.name)
        if not orc.empty:
            card.oracle_median_s = float(orc.iloc[-1]["median_s"])
            card.of_oracle = card.oracle_median_s / card.median_s
    if not estimate:
        card.estimate_error = "not computed here (estimate=False)"
    elif isinstance(problem, Problem):
        key = card.model_gpu = _spec_key(card.gpu, model_gpu)
        card.estimate_s, card.bound, card.legs, card.estimate_kind, card.estimate_error = _estimate(v, problem, key)
        if card.changed_since:  # the record measured other code: estimate that code too
            card.estimate_then_s, card.estimate_then_note = _estimate_then(op, v, problem, card.commit, key)
        if prev is not None and np.isfinite(card.x_prev) and "at its own problem" not in card.prev_note:
            # like for like: the rung before's estimate of the code its record measured
            then = source_changed_since(prev, card.prev_commit) if card.prev_commit else None
            card.prev_estimate_s = (_estimate_then(op, prev, problem, card.prev_commit, key)[0] if then
                                    else _estimate(prev, problem, key)[0])
    return card


def ladder_cards(op: str, problem: Problem, *, ladder: list[Variant] | None = None, include_oracle: bool = False,
                 **kw) -> list[RungCard]:
    """One card per rung of today's ladder (looped, never a fixed count) at ``problem``."""
    ladder = list(ladder) if ladder is not None else ladder_for(op)
    return [recorded(op, problem, v, ladder=ladder, **kw) for v in ladder if include_oracle or not v.oracle]


def card_table(cards: list[RungCard], style: bool = False):
    """The summary table of a ladder: one row per card, rates and ratios as numbers (with
    ``style``, a Styler that prints them as x1.10, 48%, and a dash where there is nothing)."""
    df = pd.DataFrame([c.as_dict() for c in cards])
    if not style or df.empty:
        return df
    unit = _UNIT[cards[0].metric]
    return df.style.format({unit: "{:.3g}", "x prev": "x{:.2f}", "of oracle": "{:.1%}", "measured/est": "{:.2f}"},
                           na_rep="—").hide(axis="index")


# --- predict before you run -------------------------------------------------------------------
class _HTML:
    def __init__(self, html_: str, text: str):
        self.html, self.text = html_, text

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


_RESOURCES = "DRAM bandwidth, L2, shared memory (bank conflicts), instruction issue, FP32 / tensor pipe, latency"


def predict_prompt(prev: Variant | None, cur: Variant, problem: Problem | str) -> _HTML:
    """The question a reader answers before the measurement and the estimate are shown."""
    plabel = problem.label if isinstance(problem, Problem) else str(problem)
    if prev is None:
        q = f"How long will {cur.label} take at {plabel}, and which resource binds it?"
    else:
        q = (f"Will {cur.label} be faster or slower than {prev.label} at {plabel}? By how much (x)? "
             "Which resource binds it?")
    text = f"Predict before you look: {q} (one of: {_RESOURCES}). Write it down, then open the answer."
    return _HTML(f"<div style='background:#fff8c5;padding:6px 10px;border-radius:4px'><b>Predict before you look:</b> "
                 f"{html.escape(q)}<br><small>Resources: {html.escape(_RESOURCES)}. Write your guess down, "
                 "then open the answer below.</small></div>", text)


def answer(card: RungCard, *extra, summary: str | None = None, open_: bool = False) -> _HTML:
    """The card (and any extra renderables, e.g. the anatomy diff) folded in a ``<details>``
    block, so the reader predicts first."""
    summary = summary or (f"answer for {card.label}: the time recorded on {card.gpu} and the model's estimate"
                          if card.found else f"answer for {card.label}: no recorded measurement here")
    inner = card._repr_html_() + "".join(_html_of(x) for x in extra)
    text = str(card) + "".join("\n" + str(x) for x in extra)
    return _HTML(f"<details{' open' if open_ else ''}><summary><b>{html.escape(summary)}</b> (click to open)"
                 f"</summary>{inner}</details>", f"[{summary}]\n{text}")


def rung_section(op: str, prev: Variant | None, cur: Variant, problem: Problem, *, reports: tuple = (None, None),
                 **kw) -> tuple[_HTML, _HTML, RungCard]:
    """(prompt, folded answer, card) of one rung: display the first, then the second.
    ``reports``: the anatomy of the rung before and of this one, so that the answer can name
    what changed (occupancy, registers, spills, shared memory) beside what was measured."""
    card = recorded(op, problem, cur, **kw)
    card.anatomy_note = anatomy_changes(*reports) if reports[1] is not None else ""
    return predict_prompt(prev, cur, card.problem), answer(card), card


# --- output a reader can read -------------------------------------------------------------
def _html_of(x) -> str:
    if hasattr(x, "_repr_html_"):
        h = x._repr_html_()
        if h is not None:
            return h
    if isinstance(x, pd.DataFrame):
        return x.to_html()
    return f"<pre>{html.escape(str(x))}</pre>"


def fold(*objs, summary: str, open_: bool = False) -> _HTML:
    """Objects (anatomy reports, diffs, tables) folded in one ``<details>`` block: details on demand."""
    return _HTML(f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>"
                 + "".join(_html_of(o) for o in objs) + "</details>",
                 f"[{summary}]\n" + "\n".join(str(o) for o in objs))


def anatomy_table(reports: dict) -> pd.DataFrame:
    """One row per rung's anatomy report: registers, shared memory, spills, occupancy, SASS size
    and the widest global loads: the summary table of a ladder's anatomy."""
    rows = []
    for label, r in reports.items():
        mix = getattr(r, "mix", {}) or {}
        ldg = {k.split()[-1]: v for k, v in mix.items() if k.startswith("global load") and v}
        rows.append({"rung": label, "registers": r.registers, "shared B": r.shared_bytes,
                     "spills B": r.spill_store_bytes + r.spill_load_bytes,
                     "threads": r.threads_per_block, "occupancy": f"{r.occupancy.ratio:.0%}",
                     "limiter": r.occupancy.limiter, "SASS instr": r.instructions,
                     "global loads (static)": ", ".join(f"{v} x {k}-bit" for k, v in ldg.items()) or "—"})
    return pd.DataFrame(rows)


def sweep_table(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """A sweep's frame as a reader reads it: problem, rung, check, median time in ms/µs, the
    rate in its unit, the model's time, and the error if any.  Simulated rows show no rate and
    say their time is simulated (host clock), not a speed."""
    if df is None or df.empty:
        return pd.DataFrame()
    if metric is None:
        op = str(df["op"].iloc[0]) if "op" in df else ""
        metric = metric_for(op)
    sim = df.get("simulated", pd.Series(False, index=df.index)).fillna(False).astype(bool)
    out = pd.DataFrame({
        "problem": df.get("problem"),
        "rung": df["label"] if "label" in df else df.get("variant"),
        "check": np.where(df.get("check_ok", pd.Series(False, index=df.index)).fillna(False).astype(bool), "ok", "FAILED"),
        "median": [("simulated" if s else fmt_seconds(t)) for s, t in zip(sim, df.get("median_s", pd.Series(np.nan, index=df.index)))],
        _UNIT[metric]: [np.nan if s else v for s, v in zip(sim, df.get(metric, pd.Series(np.nan, index=df.index)))],
        "model": [fmt_seconds(t) for t in df.get("model_s", pd.Series(np.nan, index=df.index))],
        "error": df.get("error", pd.Series("", index=df.index)).fillna(""),
    })
    return out.reset_index(drop=True)


class _WarningLog:
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self.installed = False
        self._orig = None


_WARN = _WarningLog()


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


# --- a check for the notebooks: no "no record" where there is one ------------------------------
_NO_RECORD_RE = re.compile(r"no record of (\d+) (\w+) at ((?:\w+=[^\s<\"\\]+ ?)+?) on a real GPU")


def false_no_record_claims(text: str, *, root=None) -> list[str]:
    """Every "no record of <rung> at <problem> on a real GPU" in ``text`` (a rendered notebook,
    a card) for which a matching record exists (:data:`MATCH_RULE`): the claims that are false."""
    all_rows = _load(None, str(root) if root is not None else None)
    if all_rows.empty:
        return []
    if "simulated" in all_rows:
        all_rows = all_rows[~all_rows["simulated"].fillna(False).astype(bool)]
    bad = []
    for _, name, plabel in set(_NO_RECORD_RE.findall(text)):
        if not _match_rows(all_rows, plabel.strip(), name).empty:
            bad.append(f"{name} at {plabel.strip()}")
    return sorted(bad)


def reload() -> None:
    """Forget the cached records (after a sweep recorded new ones)."""
    _load.cache_clear()
