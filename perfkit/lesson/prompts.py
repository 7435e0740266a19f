"""Predict before you run: the prompt, the card folded behind it, and other output folded."""
from __future__ import annotations

import html

import pandas as pd

from ..kernels.base import Problem, Variant
from .cards import RungCard, recorded
from .formatting import anatomy_changes


# --- predict before you run -------------------------------------------------------------------
class Rendered:
    """HTML for a notebook with a text twin for everything else."""

    def __init__(self, html_: str, text: str):
        self.html, self.text = html_, text

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


# every leg a card's answer can name ("bound by lsu"), with the name it prints
_RESOURCES = ("DRAM bandwidth (dram), L2 (l2), shared memory and its bank conflicts (smem), the global-memory lines "
              "warps touch (lsu), instruction issue (issue), the FP32 / tensor / integer pipes (fp32, tensor, alu), "
              "latency (latency), the launch (launch)")


def predict_prompt(prev: Variant | None, cur: Variant, problem: Problem | str, *,
                   prev_problem: str | None = None) -> Rendered:
    """The question a reader answers before the measurement and the estimate are shown;
    ``prev_problem``: the problem the rung before is compared at, where it cannot run this one."""
    plabel = problem.label if isinstance(problem, Problem) else str(problem)
    if prev is None:
        q = f"How long will {cur.label} take at {plabel}, and which resource binds it?"
    elif prev_problem and prev_problem != plabel:
        q = (f"Will {cur.label} at {plabel} be faster or slower than {prev.label} at its own problem, "
             f"{prev_problem}? By how much (x)? Which resource binds it?")
    else:
        q = (f"Will {cur.label} be faster or slower than {prev.label} at {plabel}? By how much (x)? "
             "Which resource binds it?")
    text = f"Predict before you look: {q} (one of: {_RESOURCES}). Write it down, then open the answer."
    return Rendered(f"<div style='background:#fff8c5;padding:6px 10px;border-radius:4px'><b>Predict before you look:</b> "
                 f"{html.escape(q)}<br><small>Resources: {html.escape(_RESOURCES)}. Write your guess down, "
                 "then open the answer below.</small></div>", text)


def ask(question: str, note: str = "Write your guess down, then open the answer below.") -> Rendered:
    """A question of the reader's own (not graded) in the prompt's box: the answer comes after it, folded."""
    return Rendered(f"<div style='background:#fff8c5;padding:6px 10px;border-radius:4px'><b>Predict before you look:</b> "
                    f"{html.escape(question)}<br><small>{html.escape(note)}</small></div>",
                    f"Predict before you look: {question} {note}")


def answer(card: RungCard, *extra, summary: str | None = None, open_: bool = False) -> Rendered:
    """The card (and any extra renderables, e.g. the anatomy diff) folded in a ``<details>``
    block, so the reader predicts first."""
    summary = summary or (f"answer for {card.label}: the time recorded on {card.gpu} and the model's estimate"
                          if card.found else f"answer for {card.label}: no GPU record yet, the model's estimate only")
    inner = card._repr_html_() + "".join(_html_of(x) for x in extra)
    text = str(card) + "".join("\n" + str(x) for x in extra)
    return Rendered(f"<details{' open' if open_ else ''}><summary><b>{html.escape(summary)}</b> (click to open)"
                 f"</summary>{inner}</details>", f"[{summary}]\n{text}")


def rung_section(op: str, prev: Variant | None, cur: Variant, problem: Problem, *, reports: tuple = (None, None),
                 **kw) -> tuple[Rendered, Rendered, RungCard]:
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


def fold(*objs, summary: str, open_: bool = False) -> Rendered:
    """Objects (anatomy reports, diffs, tables) folded in one ``<details>`` block: details on demand."""
    return Rendered(f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>"
                 + "".join(_html_of(o) for o in objs) + "</details>",
                 f"[{summary}]\n" + "\n".join(str(o) for o in objs))


# --- predict, then reveal: a check over an executed notebook -----------------------------------
def _outside_details(h: str) -> str:
    """``h`` with every ``<details>...</details>`` block (nested ones too) removed."""
    import re

    out, depth, pos = [], 0, 0
    for m in re.finditer(r"<(/?)details\b[^>]*>", h):
        if depth == 0:
            out.append(h[pos:m.start()])
        depth = max(0, depth + (-1 if m.group(1) else 1))
        pos = m.end()
    if depth == 0:
        out.append(h[pos:])
    return "".join(out)


def answers_shown_before(cells: list, stop: int, gpus) -> list[str]:
    """Outputs of ``cells[:stop]`` (an executed notebook's cells, as nbformat JSON dicts) that show
    a recorded answer unfolded: any figure (a bare PNG), or displayed HTML or text that names a
    recorded GPU outside a folded ``<details>`` block.  Printed lines (streams) are not checked.
    Empty: every record table and figure before cell ``stop`` waits behind a fold."""
    bad = []
    gpus = [g for g in gpus if g]
    for i, c in enumerate(cells[:stop]):
        for o in c.get("outputs", []) if c.get("cell_type") == "code" else []:
            data = o.get("data") or {}
            if "image/png" in data:
                bad.append(f"cell {i}: a figure")
                continue
            h = data.get("text/html") or data.get("text/markdown") or data.get("text/plain") or ""
            h = _outside_details("".join(h) if isinstance(h, list) else h)
            hit = next((g for g in gpus if g in h), None)
            if hit:
                bad.append(f"cell {i}: names {hit} outside a fold")
    return bad


def values_shown_before(cells: list, stop: int, values, decimals=(0, 1, 2)) -> list[str]:
    """Outputs of ``cells[:stop]`` (executed nbformat JSON cells) that show one of ``values`` (the
    numbers a graded prediction is checked against, in the unit the page prints them in) outside a
    folded ``<details>`` block: printed lines included, each value as written with any of
    ``decimals`` places.  For a prediction whose page shows other records unfolded above it (so
    :func:`answers_shown_before` cannot apply) but must not show its answer.  Empty: none."""
    import re

    pats = {f"{v:.{d}f}": re.compile(rf"(?<![\d.]){re.escape(f'{v:.{d}f}')}(?!\d|\.\d)")
            for v in values for d in decimals}
    bad = []
    for i, c in enumerate(cells[:stop]):
        for o in c.get("outputs", []) if c.get("cell_type") == "code" else []:
            data = o.get("data") or {}
            t = o.get("text") or data.get("text/html") or data.get("text/markdown") or data.get("text/plain") or ""
            t = _outside_details("".join(t) if isinstance(t, list) else t)
            t = re.sub(r"<[^>]+>", " ", t)
            bad += [f"cell {i}: {s}" for s, pat in pats.items() if pat.search(t)]
    return sorted(set(bad), key=bad.index)


def paragraph(text: str) -> Rendered:
    """Prose written from numbers (a takeaway) as a paragraph, to display or to :func:`fold`."""
    return Rendered(f"<p style='max-width:60em'>{html.escape(text)}</p>", text)
