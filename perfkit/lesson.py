"""Literate helpers for the notebooks: a rung's kernel source and its diff against the rung
before, rendered as HTML (plain text outside a notebook)."""
from __future__ import annotations

import difflib
import html
import inspect
import textwrap

from .kernels.base import Variant

__all__ = ["source", "source_diff", "kernel_sources"]


def _pyfunc(kernel):
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel


def kernel_sources(variant: Variant, problem=None) -> str:
    """Source of the rung: its class (launch plan, model) and every kernel it launches."""
    parts = [textwrap.dedent(inspect.getsource(type(variant)))]
    if problem is not None and not variant.oracle:
        seen = set()
        for launch in variant.plan(problem, variant.host_buffers(problem)):
            fn = _pyfunc(launch.kernel)
            if id(fn) not in seen:
                seen.add(id(fn))
                parts.insert(len(seen) - 1, textwrap.dedent(inspect.getsource(fn)))
    return "\n\n".join(parts)


class _Code:
    def __init__(self, text: str, title: str, diff: bool = False):
        self.text, self.title, self.diff = text, title, diff

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
        return (f"<details open><summary><b>{html.escape(self.title)}</b></summary>"
                f'<pre style="font-size:11px;line-height:1.25">{body}</pre></details>')


def source(variant: Variant, problem=None) -> _Code:
    """The rung's source (the kernels it launches when a problem is given)."""
    return _Code(kernel_sources(variant, problem), f"source of rung {variant.label}")


def source_diff(prev: Variant, cur: Variant, problem=None, context: int = 3) -> _Code:
    """Unified diff of the rung's source against the rung before."""
    a = kernel_sources(prev, problem).splitlines()
    b = kernel_sources(cur, problem).splitlines()
    diff = difflib.unified_diff(a, b, fromfile=prev.label, tofile=cur.label, n=context, lineterm="")
    return _Code("\n".join(diff), f"what changed: {prev.label} -> {cur.label}", diff=True)
