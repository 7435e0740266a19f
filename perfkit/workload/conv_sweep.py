"""The whole network, not one layer: every distinct ResNet-50 convolution, its best rung of the
conv ladder beside cuDNN, read from GPU records, and the fraction of cuDNN's time the ladder
reaches over the network, each layer weighted by how often it occurs::

    rep = resnet50_sweep(results.load("conv"), gpu="NVIDIA H200")   # float16 NHWC at batch 32
    rep.table      # per layer: count, best rung and its time, cuDNN's time, cuDNN / best
    rep.fraction   # sum(count * cuDNN) / sum(count * best), over the layers with both
    rep.missing    # layers with no record of a rung or of cuDNN (the table says which)
    rep.measured() # the rows with both records (notebook 03's table: no rows of dashes)
    rep.sentences()  # which layers the ladder does not yet serve and why, from the records and
                     # from each rung's own supports() refusal (refusals()), so they stay true
    sweep_figure([rep, ...])  # each layer's share of the network's FLOPs, measured ones marked
    predicted_sweep("h200")   # the same table from the model's estimates, before any record

A rung that failed its check is never counted; the latest record of a rung at a layer stands for
it.  With no records the table lists the layers with empty times and ``fraction`` is None.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..kernels import conv

__all__ = ["resnet50_sweep", "predicted_sweep", "SweepReport", "COLUMNS", "refusals", "sweep_figure"]

COLUMNS = ["layer", "problem", "count", "best_rung", "best_us", "cudnn_us", "x_cudnn", "weighted_best_us",
           "weighted_cudnn_us"]


@dataclass
class SweepReport:
    table: pd.DataFrame
    fraction: float | None  # cuDNN's time / the best rungs' time over the measured layers (1.0: parity)
    missing: list = field(default_factory=list)  # layer names without a rung or a cuDNN record
    gpu: str | None = None
    dtype: str = "float16"
    layout: str = "NHWC"
    batch: int = 32
    predicted: bool = False  # the model's estimates (predicted_sweep), not records

    def measured(self) -> pd.DataFrame:
        """The layers with a record of both a checked rung and cuDNN (the rest are in ``missing``)."""
        return self.table.dropna(subset=["best_us", "cudnn_us"]).reset_index(drop=True)

    def flops_share(self) -> pd.Series:
        """Each layer's share of the network's convolution FLOPs (count x FLOPs), by layer name."""
        f = {name: count * p.flops for name, p, count in conv.resnet50_layers(self.batch, self.dtype, self.layout)}
        tot = sum(f.values())
        return pd.Series({k: x / tot for k, x in f.items()})

    def sentences(self, ladder=None) -> list[str]:
        """Which layers the ladder does not yet serve, and why, in sentences computed from the
        records (no record of a rung or of cuDNN) and from each rung's ``supports()`` refusal
        at this dtype and layout (:func:`refusals`).  The first says what the records cover (and
        nothing of their values), so it can be shown before a prompt; the fraction comes second."""
        t, meas = self.table, self.measured()
        share = self.flops_share()
        where = f"{self.dtype} {self.layout} on {self.gpu or 'any GPU'}"
        n, total = len(t), int(t["count"].sum())
        out = []
        if len(meas):
            f = float(share[meas["layer"]].sum())
            one = len(meas) == 1
            out.append(f"{where}: records of both a checked rung and cuDNN cover {len(meas)} of the {n} distinct "
                       f"layers ({int(meas['count'].sum())} of the {total} conv layers, {f:.0%} of the network's "
                       f"convolution FLOPs): {_names(meas['layer'])}.")
            out.append(f"Time-weighted over {'that layer' if one else 'those layers'} only, the best "
                       f"rung{'' if one else 's'} reach"
                       f"{'es' if one else ''} {self.fraction:.2f} of cuDNN; that is a figure for "
                       f"{'one layer' if one else f'{len(meas)} layers'}, not for the network.")
        else:
            out.append(f"{where}: no layer has a record of both a checked rung and cuDNN, so there is no "
                       "network figure yet.")
        rest = t[~t["layer"].isin(meas["layer"])]
        if len(rest):
            why = rest.apply(lambda r: "no record" if pd.isna(r["best_us"]) and pd.isna(r["cudnn_us"])
                             else "no record of cuDNN" if pd.isna(r["cudnn_us"]) else "no record of a checked rung",
                             axis=1)
            for reason, rows in rest.groupby(why, sort=False):
                out.append(f"{_n(len(rows), 'layer')} ({_n(int(rows['count'].sum()), 'conv layer')}, "
                           f"{float(share[rows['layer']].sum()):.0%} of the FLOPs: {_kinds(rows, self)}) "
                           f"{'have' if len(rows) > 1 else 'has'} {reason} on {self.gpu or 'any GPU'} yet; "
                           "`tools/record_gpu.py --plan full --ops conv` measures every layer.")
        ref = refusals(self.dtype, self.layout, self.batch, ladder)
        if len(ref):
            # rungs whose refusals are the same (same layers, same reasons) are said once
            sig = ref.groupby("rung", sort=False).apply(lambda g: tuple(zip(g["layer"], g["reason"])))
            for s, rungs in sig.groupby(sig, sort=False):
                g = ref[ref["rung"] == rungs.index[0]]
                labels = ", ".join(ref.loc[ref["rung"].isin(rungs.index), "label"].drop_duplicates())
                verb = "refuse" if len(rungs) > 1 else "refuses"
                if len(g) == n:
                    out.append(f"{labels} {verb} every layer at {self.dtype} {self.layout}: "
                               f"{g['reason'].iloc[0]}.")
                    continue
                out.append(f"{labels} {verb} {len(g)} of the {n} layers ({_n(int(g['count'].sum()), 'conv layer')}, "
                           f"{float(share[g['layer']].sum()):.0%} of the FLOPs): {_reasons(g)}.")
        served = set(t["layer"]) - set(ref.groupby("layer").filter(lambda g: len(g) == len(_rungs(ladder)))["layer"])
        if len(served) == n:
            out.append(f"Every layer is taken by at least one rung, so none is out of the ladder's reach; what is "
                       "missing is records.")
        else:
            out.append(f"No rung takes {_names([x for x in t['layer'] if x not in served])}.")
        return out

    def __str__(self) -> str:
        if self.predicted:
            frac = "no rung takes any layer" if self.fraction is None else f"{self.fraction:.2f} of cuDNN's roofline"
            return (f"ResNet-50 conv layers on {self.gpu}, predicted by the model (nothing measured): time-weighted "
                    f"{frac}; {len(self.table) - len(self.missing)} of {len(self.table)} layers taken by a rung")
        frac = "no layer has both records" if self.fraction is None else f"{self.fraction:.2f} of cuDNN"
        return (f"ResNet-50 conv layers on {self.gpu or 'any GPU'}: time-weighted {frac}; "
                f"{len(self.table) - len(self.missing)} of {len(self.table)} layers measured")


def _rungs(ladder=None) -> list:
    return [v for v in (ladder if ladder is not None else conv.LADDER) if not v.oracle]


def refusals(dtype: str = "float16", layout: str = "NHWC", batch: int = 32, ladder=None) -> pd.DataFrame:
    """One row per (rung, ResNet-50 layer) that the rung's ``supports()`` refuses at this dtype and
    layout: rung, label, layer, count and reason (the refusal's own message, its label taken out)."""
    from ..kernels.base import UnsupportedProblem

    rows = []
    for v in _rungs(ladder):
        for name, p, count in conv.resnet50_layers(batch, dtype, layout):
            try:
                v.supports(p)
            except UnsupportedProblem as exc:
                msg = str(exc)
                reason = msg[len(v.label):].lstrip(":").strip() if msg.startswith(v.label) else msg
                rows.append({"rung": v.name, "label": v.label, "layer": name, "count": count, "reason": reason})
    return pd.DataFrame(rows, columns=["rung", "label", "layer", "count", "reason"])


def _n(k: int, what: str) -> str:
    return f"{k} {what}{'' if k == 1 else 's'}"


def _names(names, most: int = 4) -> str:
    names = list(names)
    return ", ".join(names) if len(names) <= most else ", ".join(names[:most]) + f" and {len(names) - most} more"


def _kinds(rows: pd.DataFrame, rep: "SweepReport") -> str:
    """The filter shapes of some layers, counted: '13 1x1, 3 3x3 at stride 2, ...'."""
    ps = {name: p for name, p, _ in conv.resnet50_layers(rep.batch, rep.dtype, rep.layout)}
    kinds = pd.Series([f"{ps[x].r}x{ps[x].s}" + (f" at stride {ps[x].stride}" if ps[x].stride > 1 else "")
                       for x in rows["layer"]]).value_counts(sort=False)
    return ", ".join(f"{c} {k}" for k, c in kinds.items())


def _reasons(g: pd.DataFrame) -> str:
    """The refusal reasons of one rung, each with its layers; reasons that share a first clause
    ('...; got 1x1 at stride 1', '...; got 3x3 at stride 2') say it once."""
    by = g.groupby("reason", sort=False)
    heads = {r.split("; ")[0] for r in by.groups}
    if len(heads) == 1 and len(by) > 1 and all("; " in r for r in by.groups):
        head = heads.pop()
        return head + ": " + "; ".join(f"{r.split('; ', 1)[1]} ({_names(rows['layer'], 2)})" for r, rows in by)
    return "; ".join(f"{r} ({_names(rows['layer'], 2)})" for r, rows in by)


def sweep_figure(reports: list, title: str = "ResNet-50 conv layers"):
    """One panel per report: each distinct layer's share of the network's convolution FLOPs as a
    bar, filled where the layer is measured (best rung and cuDNN) and written with cuDNN / best,
    hollow where it has no record.  Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(5.5 * len(reports), 6), sharey=True, squeeze=False)
    for ax, rep in zip(axes[0], reports):
        share = rep.flops_share()
        t = rep.table.set_index("layer")
        y = range(len(t))
        done = t["x_cudnn"].notna()
        ax.barh(list(y), [share[x] * 100 for x in t.index], color=["tab:blue" if d else "white" for d in done],
                edgecolor="tab:blue")
        for i, (name, r) in enumerate(t.iterrows()):
            if done[name]:
                ax.text(share[name] * 100 + 0.3, i, f"{r['x_cudnn']:.2f} of cuDNN ({r['best_rung']})", va="center",
                        fontsize=8)
        ax.set_yticks(list(y), list(t.index), fontsize=8)
        ax.set_xlim(0, float(share.max()) * 100 * 1.7)  # room for the labels
        ax.set_xlabel("share of the network's conv FLOPs, % (count x FLOPs)")
        ax.set_title(f"{rep.dtype} {rep.layout}, {rep.gpu or 'any GPU'}:\n{len(rep.measured())} of {len(t)} layers "
                     "measured (filled)", fontsize=9)
    axes[0][0].invert_yaxis()  # the network's order, top down (once: the panels share the axis)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def predicted_sweep(gpu: str, *, dtype: str = "float16", layout: str = "NHWC", batch: int = 32, ladder=None,
                    layers=None, banks: bool = True) -> SweepReport:
    """The model's prediction of :func:`resnet50_sweep`, made before the records: per distinct
    layer (or the ``layers`` named), the rung whose estimate (:func:`perfkit.model.estimate`,
    behind today's timer) is the smallest among those whose ``supports()`` takes the layer, and
    cuDNN as the model sees any library: its roofline (FLOPs at the peak of the dtype's pipe,
    bytes at the DRAM rate) plus one library call (``library_call_s``, ``data/rates.yaml``).  The
    model has no model of cuDNN's own kernels, so ``fraction`` (that line's time over the best
    rungs', weighted by count) is against the line, not a prediction of what cuDNN will be
    measured at.  ``gpu``: a ``devices.yaml`` key.  The
    table has :data:`COLUMNS` (times in microseconds, estimates) and ``bound`` (the best rung's
    leg); ``missing`` lists layers no rung takes.  ``banks=False``: shared memory taken as
    conflict-free (no simulated twin: seconds, not minutes, where nothing is stored)."""
    from .. import model
    from ..kernels.base import UnsupportedProblem

    rungs = _rungs(ladder)
    oracle = next((v for v in (ladder if ladder is not None else conv.LADDER) if v.oracle), conv.LADDER[0])
    rows, missing = [], []
    for name, p, count in conv.resnet50_layers(batch, dtype, layout):
        if layers is not None and name not in layers:
            continue
        best = None
        for v in rungs:
            try:
                v.supports(p)
            except UnsupportedProblem:
                continue
            e = model.estimate(v, p, gpu, banks=banks)
            if best is None or e.seconds < best[1].seconds:
                best = (v, e)
        lib = model.estimate(oracle, p, gpu, banks=banks).seconds
        if best is None:
            missing.append(name)
        b_s = best[1].seconds if best else None
        rows.append({"layer": name, "problem": p.label, "count": count,
                     "best_rung": best[0].label if best else None,
                     "best_us": None if b_s is None else b_s * 1e6, "cudnn_us": lib * 1e6,
                     "x_cudnn": None if b_s is None else lib / b_s,
                     "weighted_best_us": None if b_s is None else count * b_s * 1e6,
                     "weighted_cudnn_us": count * lib * 1e6, "bound": best[1].bound if best else None})
    table = pd.DataFrame(rows, columns=COLUMNS + ["bound"])
    both = table.dropna(subset=["best_us"])
    fraction = float(both["weighted_cudnn_us"].sum() / both["weighted_best_us"].sum()) if len(both) else None
    return SweepReport(table=table, fraction=fraction, missing=missing, gpu=gpu, dtype=dtype, layout=layout,
                       batch=batch, predicted=True)


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
    return SweepReport(table=table, fraction=fraction, missing=missing, gpu=gpu, dtype=dtype, layout=layout,
                       batch=batch)
