"""Output a reader can read: times and rates in their units, an op's metric, the summary tables
of a ladder's anatomy and of a sweep, and what changed between two anatomy reports."""
from __future__ import annotations

import numpy as np
import pandas as pd


# --- small formatting helpers ----------------------------------------------------------------
def _finite(x) -> float | None:
    """``x`` as a float, or None where there is no number to show (None, text, NaN, inf)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


def fmt_seconds(s) -> str:
    """Seconds in a unit a reader reads at a glance: 5.70 ms, 62.1 µs, 1.37 s."""
    s = _finite(s)
    if s is None:
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


UNIT = {"tflops": "TFLOP/s", "gbps": "GB/s"}


def fmt_rate(x) -> str:
    """A rate with three significant digits and no exponent: 24.1, 0.499, 2163."""
    x = _finite(x)
    if x is None:
        return "—"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def rate_of(metric: str, flops, nbytes, seconds) -> float:
    try:
        return (float(flops) / float(seconds) / 1e12) if metric == "tflops" else (float(nbytes) / float(seconds) / 1e9)
    except (TypeError, ValueError, ZeroDivisionError):
        return float("nan")


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
    rate in its unit, the model's time, and the error if any.  Simulated rows show no rate (a
    dash, as does a row with no rate) and say their time is simulated (host clock), not a speed."""
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
        # a dash, never NaN, where there is no rate: a simulated row (its time is no speed) or none recorded
        UNIT[metric]: ["—" if s or v is None or v != v else v
                       for s, v in zip(sim, df.get(metric, pd.Series(np.nan, index=df.index)))],
        "model": [fmt_seconds(t) for t in df.get("model_s", pd.Series(np.nan, index=df.index))],
        "error": df.get("error", pd.Series("", index=df.index)).fillna(""),
    })
    return out.reset_index(drop=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, singular for one ("1 measured layer", "2 GPUs"), never "layer(s)";
    ``many``: the plural where it is not ``word`` + "s"."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
