"""The whole network, not one layer: every distinct ResNet-50 convolution, its best rung of the
conv ladder beside cuDNN, read from GPU records, and the fraction of cuDNN's time the ladder
reaches over the network, each layer weighted by how often it occurs::

    rep = resnet50_sweep(results.load("conv"), gpu="NVIDIA H200")   # float16 NHWC at batch 32
    rep.table      # per layer: count, best rung and its time, cuDNN's time, cuDNN / best
    rep.fraction   # sum(count * cuDNN) / sum(count * best), over the layers with both
    rep.missing    # layers with no record of a rung or of cuDNN (the table says which)

A rung that failed its check is never counted; the latest record of a rung at a layer stands for
it.  With no records the table lists the layers with empty times and ``fraction`` is None.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..kernels import conv

__all__ = ["resnet50_sweep", "SweepReport", "COLUMNS"]

COLUMNS = ["layer", "problem", "count", "best_rung", "best_us", "cudnn_us", "x_cudnn", "weighted_best_us",
           "weighted_cudnn_us"]


@dataclass
class SweepReport:
    table: pd.DataFrame
    fraction: float | None  # cuDNN's time / the best rungs' time over the measured layers (1.0: parity)
    missing: list = field(default_factory=list)  # layer names without a rung or a cuDNN record
    gpu: str | None = None

    def __str__(self) -> str:
        frac = "no layer has both records" if self.fraction is None else f"{self.fraction:.2f} of cuDNN"
        return (f"ResNet-50 conv layers on {self.gpu or 'any GPU'}: time-weighted {frac}; "
                f"{len(self.table) - len(self.missing)} of {len(self.table)} layers measured")


def _latest(df: pd.DataFrame) -> pd.DataFrame:
    if "utc" in df:
        df = df.sort_values("utc")
    return df.groupby(["problem", "variant"], as_index=False).last()


def resnet50_sweep(records: pd.DataFrame | None = None, *, gpu: str | None = None, dtype: str = "float16",
                   layout: str = "NHWC", batch: int = 32) -> SweepReport:
    """Per distinct ResNet-50 conv layer (:data:`perfkit.kernels.conv.RESNET50`): the fastest
    checked rung (rung >= 1) and cuDNN (rung 0, the oracle) from ``records`` (a
    ``perfkit.results.load("conv")`` frame), restricted to ``gpu`` (its name or slug) when given."""
    layers = conv.resnet50_layers(batch, dtype, layout)
    df = records if records is not None else pd.DataFrame()
    if len(df) and gpu is not None:
        df = df[(df.get("gpu") == gpu) | (df.get("gpu_slug") == gpu)]
    if len(df):
        df = df[df["check_ok"].astype(bool) & df["median_s"].notna()]
        df = _latest(df) if len(df) else df
    rows, missing = [], []
    for name, p, count in layers:
        at = df[df["problem"] == p.label] if len(df) else df
        rungs = at[at["rung"] >= 1] if len(at) else at
        oracle = at[at["rung"] == 0] if len(at) else at
        best = rungs.loc[rungs["median_s"].idxmin()] if len(rungs) else None
        cudnn_s = float(oracle["median_s"].iloc[0]) if len(oracle) else None
        best_s = float(best["median_s"]) if best is not None else None
        if best_s is None or cudnn_s is None:
            missing.append(name)
        rows.append({"layer": name, "problem": p.label, "count": count,
                     "best_rung": best["label"] if best is not None else None,
                     "best_us": None if best_s is None else best_s * 1e6,
                     "cudnn_us": None if cudnn_s is None else cudnn_s * 1e6,
                     "x_cudnn": None if best_s is None or cudnn_s is None else cudnn_s / best_s,
                     "weighted_best_us": None if best_s is None else count * best_s * 1e6,
                     "weighted_cudnn_us": None if cudnn_s is None else count * cudnn_s * 1e6})
    table = pd.DataFrame(rows, columns=COLUMNS)
    both = table.dropna(subset=["best_us", "cudnn_us"])
    fraction = float(both["weighted_cudnn_us"].sum() / both["weighted_best_us"].sum()) if len(both) else None
    return SweepReport(table=table, fraction=fraction, missing=missing, gpu=gpu)
