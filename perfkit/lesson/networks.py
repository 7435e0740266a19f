"""A ladder over a network's layers (notebook 03's ResNet-50 tables): each rung's estimate per layer
and, where records exist, its measured fraction of the oracle, with no column that is all dashes."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..kernels.base import Problem, UnsupportedProblem, Variant
from .cards import choose_record


def layer_estimate(v: Variant, p: Problem, gpu: str, estimator: str = "auto") -> tuple[float, str]:
    """(seconds, bound) of rung ``v`` at ``p`` on ``gpu``: ``model.estimate`` (``estimator="auto"``),
    else, or where the model cannot take the rung, the plain roofline bound (FLOPs at the peak or
    bytes at the bandwidth: one number for every rung of a problem)."""
    from .. import model, roofline

    if estimator == "auto":
        try:
            e = model.estimate(v, p, gpu=gpu)
            return float(e.seconds), str(e.bound)
        except Exception:  # noqa: BLE001  (a rung the model cannot take: the roofline below)
            pass
    t = v.traffic(p)
    r = roofline.published_rates(t, gpu=gpu)
    pr = model.predict(t, peak_flops=r["flops"], dram_bw=r["dram_bw"])
    return float(pr.seconds), str(pr.limiter)


def measured_s(table: pd.DataFrame | None, v: Variant, p: Problem) -> float:
    """The recorded median of rung ``v`` at exactly ``p`` in ``table`` (one GPU's records), chosen by
    code as its card chooses (:func:`.cards.choose_record`: the newest of today's code, else the
    newest); NaN where there is none.  One record, never a median over records of several commits."""
    if table is None or table.empty:
        return float("nan")
    rows = table[(table["variant"] == v.name) & (table["problem"] == p.label)]
    if rows.empty:
        return float("nan")
    rows = rows.sort_values("utc", kind="stable") if "utc" in rows else rows
    return float(choose_record(rows, v)["median_s"])


def _supports(v: Variant, p: Problem) -> bool:
    try:
        v.supports(p)
        return True
    except (UnsupportedProblem, Exception):  # noqa: BLE001  (e.g. the tensor-core rung at float32)
        return False


def network_table(layers, ladder: list[Variant], *, table: pd.DataFrame | None, gpu: str,
                  estimator: str = "auto", measured: bool = False) -> pd.DataFrame:
    """One row per layer (``layers``: (name, Problem, count)): its shape, GFLOP, MB and each rung's
    estimate in ms (one roofline column where ``estimator="roofline"``, the same for every rung).
    ``measured=True``: instead, each rung's measured fraction of the oracle, only at the layers
    and for the rungs that have records (no column or row of dashes)."""
    oracle = next((v for v in ladder if v.oracle), None)
    rows = []
    for name, p, count in layers:
        row = {"layer": name, "count": count, "c": p.c, "hxw": f"{p.h}x{p.w}", "k": p.k, "rxs": f"{p.r}x{p.s}",
               "stride": p.stride, "GFLOP": p.flops / 1e9, "MB": p.bytes / 1e6}
        if estimator == "roofline" and oracle is not None and not measured:
            row["roofline bound est ms"] = layer_estimate(oracle, p, gpu, "roofline")[0] * 1e3
        base = measured_s(table, oracle, p) if oracle is not None else float("nan")
        for v in ladder:
            if v.oracle or not _supports(v, p):
                continue
            if estimator != "roofline" and not measured:
                row[f"{v.name} est ms"] = layer_estimate(v, p, gpu, estimator)[0] * 1e3
            m = measured_s(table, v, p)
            row[f"{v.name} of oracle"] = base / m if np.isfinite(base) and np.isfinite(m) else np.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    of = [c for c in df.columns if c.endswith(" of oracle")]
    if measured:
        df = df[df[of].notna().any(axis=1)] if of else df.iloc[0:0]
        return df[[c for c in ("layer", "count", "GFLOP") if c in df] + of].dropna(axis=1, how="all")
    return df.drop(columns=of)


def weighted_of_oracle(layers, ladder: list[Variant], table: pd.DataFrame | None) -> dict[str, float]:
    """Per rung, the oracle's time over the rung's, each layer weighted by its count, over
    ``layers``; only rungs measured at every one of them (so no partial sums)."""
    oracle = next((v for v in ladder if v.oracle), None)
    out = {}
    if oracle is None:
        return out
    for v in ladder:
        if v.oracle:
            continue
        pairs = [(measured_s(table, oracle, p) * c, measured_s(table, v, p) * c) for _, p, c in layers]
        pairs = [(a, b) for a, b in pairs if np.isfinite(a) and np.isfinite(b)]
        if pairs and len(pairs) == len(layers):
            out[v.label] = sum(a for a, _ in pairs) / sum(b for _, b in pairs)
    return out
