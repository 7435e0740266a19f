"""The check a notebook runs before it shows anything (:func:`check_rungs`: every rung against the
float64 reference), and the bytes each rung moves against the ideal (:func:`traffic_table`: the
model before anything runs), so that no notebook cell defines them."""
from __future__ import annotations

import html

import pandas as pd

from ..kernels.base import UnsupportedProblem
from .matching import runs_as_is
from .prompts import Rendered


def check_rungs(cases, seed=None) -> pd.DataFrame:
    """Run every ``(problem, rung)`` of ``cases`` and compare it with the float64 reference.

    Each problem's inputs are drawn once (``problem.make_inputs(seed)``: fresh ones with
    ``seed=None``) with one reference, and every rung gets its own copy of them; the rung writes a
    NaN-poisoned output (its ``run``).  A rung whose ``supports`` refuses the problem (Winograd's
    3x3 stride-1 layers only, a TMA rung's 16-byte rows) is a row with ``supported`` False and the
    reason, not run.  One row per case: op, problem, label, supported, ok, max_abs_err, atol,
    message.  Raises AssertionError naming every rung whose output is wrong."""
    drawn: dict[tuple, tuple] = {}
    rows = []
    for p, v in cases:
        row = {"op": p.op, "problem": p.label, "label": v.label, "supported": True, "ok": True,
               "max_abs_err": float("nan"), "atol": float("nan"), "message": ""}
        try:
            v.supports(p)
        except UnsupportedProblem as exc:
            rows.append({**row, "supported": False, "message": f"not supported: {exc}"})
            continue
        key = (type(p).__module__, type(p).__qualname__, p.label)  # two ops' problems may share a label
        if key not in drawn:
            x = p.make_inputs(seed)
            drawn[key] = (x, p.reference(x))
        x, ref = drawn[key]
        res = p.check(v.run(p, {k: a.copy() for k, a in x.items()}), ref)
        rows.append({**row, "ok": bool(res.ok), "max_abs_err": res.max_abs_err, "atol": res.atol,
                     "message": "" if res.ok else res.message})
    out = pd.DataFrame(rows)
    bad = out[out["supported"] & ~out["ok"].astype(bool)] if len(out) else out
    if len(bad):
        raise AssertionError("wrong output: " + "; ".join(f"{r.label} at {r.problem}: {r.message}"
                                                          for r in bad.itertuples()))
    return out


def traffic_table(ladder, problem, bandwidth: float, source: str) -> Rendered:
    """Each rung's DRAM bytes (its ``traffic``) over the problem's ideal bytes (inputs read once,
    outputs written once), under a line with the ideal's size and its time at ``bandwidth``
    (bytes/s, named by ``source``, e.g. "the published 3.35 TB/s of h100-sxm")."""
    head = (f"{problem.op} at {problem.label}: ideal traffic {problem.bytes / 1e6:.1f} MB "
            f"({problem.bytes / bandwidth * 1e6:.1f} µs at {source})")
    rungs = [v for v in ladder if not v.oracle]
    here = [v for v in rungs if runs_as_is(v, problem)]  # a float16-only or narrow-rows rung is not at this problem
    tab = pd.DataFrame([{"rung": v.label, "DRAM bytes / ideal": v.traffic(problem).dram_bytes / problem.bytes}
                        for v in here])
    gone = [v.label for v in rungs if v not in here]
    note = f"left out, not run at this problem (each is at its own example): {', '.join(gone)}" if gone else ""
    return Rendered(f"<p><b>{html.escape(problem.op)}</b> at <code>{html.escape(problem.label)}</code>: ideal traffic "
                    f"{problem.bytes / 1e6:.1f} MB ({problem.bytes / bandwidth * 1e6:.1f} µs at {html.escape(source)})</p>"
                    + tab.style.format(precision=2).hide(axis="index").to_html()
                    + (f"<p><i>{html.escape(note)}</i></p>" if note else ""),
                    head + "\n" + tab.to_string(index=False) + (f"\n{note}" if note else ""))
