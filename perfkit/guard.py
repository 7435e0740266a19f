"""The static guard: every rung's build and estimate against a committed baseline, with no GPU.

``perfkit compare --static`` prints, per rung of every ladder at its example problem for sm_90
(:func:`perfkit.static.targets`): registers, spills, shared memory, occupancy, the hot loop's FFMA
share, the bank-conflict degree and the model's estimate, beside ``data/static/baseline.csv``.
A rung **regresses** when it starts to spill (or spills more), loses occupancy, or its estimate
grows by more than :data:`ESTIMATE_GROWTH`; ``tests/test_guard.py`` fails on a regression unless
the baseline is updated in the same commit (``perfkit compare --static --update``: the developer's
statement that the change is intended).  Everything comes from the anatomy and the model (and the
static store behind them): this compares, it analyses nothing new."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from . import anatomy, model, static

BASELINE = static.STORE / "baseline.csv"
#: the estimate of a rung may grow by this much (relative) before it is a regression
ESTIMATE_GROWTH = 0.10
#: the GPU whose rates the guarded estimates use
GPU = "h100-sxm"
COLUMNS = ["op", "rung", "problem", "registers", "spill_bytes", "shared_bytes", "occupancy", "ffma_share",
           "bank_degree", "estimate_us", "bound"]


def figures(ops=None, gpu: str = GPU, progress=None) -> pd.DataFrame:
    """One row per rung (see the module docstring); every launch of a rung counts (registers and
    shared memory: the largest, spills: the sum, occupancy: the lowest)."""
    rows = []
    for op, v, p in static.targets(ops):
        rep = anatomy.inspect(v, p, static.CC)
        reps = [rep] + [anatomy.inspect(v, p, static.CC, kernel=i) for i in range(1, len(rep.launches))]
        try:
            e = model.estimate(v, p, gpu)
        except Exception as exc:  # noqa: BLE001  (a kernel the model cannot take: its build is still guarded)
            e = model.Estimate(seconds=float("nan"), bound=f"error: {exc.__class__.__name__}"[:40], legs={}, inputs={})
        hot = [r.hot_loop for r in reps if r.hot_loop is not None]
        fma = sum(h.mix.get("fp32 fma", 0) for h in hot)
        total = sum(sum(h.mix.values()) for h in hot)
        degrees = [max(float(x.get("bank_degree_load") or 1), float(x.get("bank_degree_store") or 1))
                   for x in e.launches]
        rows.append({"op": op, "rung": v.label, "problem": p.label,
                     "registers": max(r.registers for r in reps),
                     "spill_bytes": sum(r.spill_store_bytes + r.spill_load_bytes for r in reps),
                     "shared_bytes": max(r.shared_bytes for r in reps),
                     "occupancy": round(min(r.occupancy.ratio for r in reps), 4),
                     "ffma_share": round(fma / total, 4) if total else 0.0,
                     "bank_degree": round(max(degrees, default=1.0), 3),
                     "estimate_us": round(e.seconds * 1e6, 3), "bound": e.bound})
        if progress:
            progress(f"{op} {v.label}")
    return pd.DataFrame(rows, columns=COLUMNS)


def load_baseline(path=None) -> pd.DataFrame:
    path = Path(path or BASELINE)
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_csv(path)


def regressions(base: pd.DataFrame, new: pd.DataFrame, growth: float = ESTIMATE_GROWTH) -> list[str]:
    """``"<op> <rung>: <figure> <base> -> <new>"`` for every rung that starts to spill (or spills
    more), loses occupancy, or whose estimate grows by more than ``growth``; a rung with no
    baseline row is no regression (a new rung)."""
    out = []
    b = base.set_index(["op", "rung"])
    for _, r in new.iterrows():
        key = (r["op"], r["rung"])
        if key not in b.index:
            continue
        o = b.loc[key]
        if r["spill_bytes"] > o["spill_bytes"]:
            out.append(f"{r['op']} {r['rung']}: spills {int(o['spill_bytes'])} -> {int(r['spill_bytes'])} bytes")
        if r["occupancy"] < o["occupancy"] - 1e-9:
            out.append(f"{r['op']} {r['rung']}: occupancy {o['occupancy']:.3f} -> {r['occupancy']:.3f}")
        if math.isfinite(o["estimate_us"]) and r["estimate_us"] > o["estimate_us"] * (1 + growth):
            out.append(f"{r['op']} {r['rung']}: estimate {o['estimate_us']:.1f} -> {r['estimate_us']:.1f} us "
                       f"(x{r['estimate_us'] / o['estimate_us']:.2f}, over {1 + growth:.2f})")
    return out


def differences(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``new`` where any figure differs from the baseline (``base_<figure>`` beside it),
    and rungs present on one side only (``change``: new rung / gone)."""
    figs = [c for c in COLUMNS if c not in ("op", "rung", "problem")]
    m = new.merge(base, on=["op", "rung"], how="outer", suffixes=("", "_base"), indicator=True)
    rows = []
    for _, r in m.iterrows():
        if r["_merge"] == "left_only":
            rows.append({"op": r["op"], "rung": r["rung"], "change": "new rung"})
            continue
        if r["_merge"] == "right_only":
            rows.append({"op": r["op"], "rung": r["rung"], "change": "gone"})
            continue
        changed = [f"{f} {_fmt(r[f + '_base'])} -> {_fmt(r[f])}" for f in figs if not _same(r[f], r[f + "_base"])]
        if changed:
            rows.append({"op": r["op"], "rung": r["rung"], "change": "; ".join(changed)})
    return pd.DataFrame(rows, columns=["op", "rung", "change"])


def _same(a, b) -> bool:
    try:
        a, b = float(a), float(b)
        return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    except (TypeError, ValueError):
        return str(a) == str(b)


def _fmt(x) -> str:
    if isinstance(x, float) and math.isfinite(x) and x == int(x):
        return str(int(x))
    return str(x)


def cli(ops=None, update: bool = False, baseline=None) -> int:
    """``perfkit compare --static [--update]``: the differences, the regressions; exit 1 on a
    regression (0 with ``--update``, which writes the baseline)."""
    import sys

    new = figures(ops)
    base = load_baseline(baseline)
    diff = differences(base, new)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 120):
        print(diff.to_string(index=False) if len(diff) else "no figure changed against the baseline")
    bad = regressions(base, new)
    if update:
        path = Path(baseline or BASELINE)
        new.to_csv(path, index=False)
        print(f"baseline written: {path} ({len(new)} rungs)")
        return 0
    for line in bad:
        print(f"regression: {line}", file=sys.stderr)
    if bad:
        print("if intended, update the baseline in the same commit: perfkit compare --static --update",
              file=sys.stderr)
    return 1 if bad else 0
