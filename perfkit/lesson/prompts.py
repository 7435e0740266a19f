"""Predict before you run: the prompt, the card folded behind it, and other output folded."""
from __future__ import annotations

import html

import pandas as pd

from ..kernels.base import Problem, Variant
from .cards import RungCard, recorded
from .formatting import anatomy_changes


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
