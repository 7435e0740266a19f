"""Figures the notebooks share.  None of them draws a simulated time as a speed: rows marked
``simulated`` (or with no real rate) are dropped and the figure says so."""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["ladder", "metric_vs", "placeholder", "real_rows", "provenance"]

_UNITS = {"tflops": "TFLOP/s", "gbps": "GB/s"}


def _rows_word(n: int) -> str:
    """'1 simulated row', '8 simulated rows': never "row(s)" on a figure (lesson.plural's rule;
    lesson sits above this module)."""
    return f"{n} simulated {'row' if n == 1 else 'rows'}"


def real_rows(table: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, int]:
    """Rows with a real measured ``metric``; also how many simulated rows were dropped."""
    if table is None or table.empty:
        return pd.DataFrame(), 0
    sim = table.get("simulated", pd.Series(False, index=table.index)).fillna(False).astype(bool)
    ok = table.get("check_ok", pd.Series(True, index=table.index)).fillna(False).astype(bool)
    val = pd.to_numeric(table.get(metric, pd.Series(np.nan, index=table.index)), errors="coerce")
    keep = ~sim & ok & val.notna() & (val > 0)
    return table[keep], int(sim.sum())


def placeholder(message: str, ax=None, title: str | None = None):
    """An empty, clearly labelled axes in place of a figure that has no real data."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 2.2))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=10, color="dimgrey",
            transform=ax.transAxes)
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    return ax


def ladder(table: pd.DataFrame, metric: str = "tflops", title: str | None = None, ax=None,
           problem: str | None = None, estimates: dict | None = None, changed=None):
    """Horizontal bars, one per rung, with each rung's fraction of the oracle (rung 0).

    With several problems in the table, ``problem`` picks one (default: the largest by FLOPs).
    Rungs are ordered by today's ladder (``rung_now``, from :func:`perfkit.lesson.records`)
    where the table has it.  ``estimates`` maps a label to the model's estimated rate (same
    unit), drawn as a black tick on its bar.  The x label names the GPU, date and commit.
    ``changed``: labels whose record is of a kernel that has changed since; their bars are drawn
    hatched and faded, and the legend says so.
    """
    import matplotlib.pyplot as plt

    if metric not in _UNITS:
        raise ValueError(f"metric must be one of {sorted(_UNITS)}, got {metric!r}")
    rows, n_sim = real_rows(table, metric)
    if not rows.empty and problem is None:
        problem = rows.sort_values("flops")["problem"].iloc[-1]
    if not rows.empty:
        order = "rung_now" if "rung_now" in rows and rows["rung_now"].notna().any() else "rung"
        rows = rows[rows["problem"] == problem].sort_values(order)
    if rows.empty:
        why = ("no GPU measurements" + (f" at {problem}" if problem else "")
               + (f" ({_rows_word(n_sim)} left out: simulated times are not speeds)" if n_sim else ""))
        if estimates and any(e is not None and np.isfinite(e) for e in estimates.values()):
            return _estimates_only(estimates, metric, why, ax=ax, title=title or "ladder")
        return placeholder(why.replace("no GPU measurements", "no GPU measurements to plot", 1)
                           if not problem else why, ax=ax, title=title or "ladder")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    labels = rows["label"] if "label" in rows else rows["rung"].astype(str) + " " + rows["variant"]
    vals = rows[metric].to_numpy(float)
    oracle = rows.loc[rows["rung"] == 0, metric]
    base = float(oracle.iloc[0]) if len(oracle) else np.nan
    colors = ["#7f7f7f" if r == 0 else "#ff7f0e" if r < 0 else "#1f77b4" for r in rows["rung"]]  # oracle, peers
    bars = ax.barh(list(labels), vals, color=colors)
    changed = set(changed or ())
    old = [b for b, lab in zip(bars, labels) if lab in changed]
    for b in old:  # a record of other code than today's: not a bar like the others
        b.set_hatch("//")
        b.set_alpha(0.45)
    if old:
        old[0].set_label("recorded kernel changed since")
    ax.invert_yaxis()
    est = [estimates.get(lab, np.nan) if estimates else np.nan for lab in labels]
    est = [e if e is not None and np.isfinite(e) else np.nan for e in est]
    ok = [i for i, e in enumerate(est) if np.isfinite(e)]
    drawn = [est[i] for i in ok]  # the estimates of the bars shown (a rung not drawn sets no scale)
    for i, v in enumerate(vals):  # beyond the bar's end and its tick, whichever is further out
        frac = f"  {v / base:.0%} of oracle" if np.isfinite(base) and base > 0 else ""
        _label_at(ax, max(v, est[i]) if np.isfinite(est[i]) else v, i, f" {_rate_text(v)}{frac}")
    if ok:
        ax.scatter([est[i] for i in ok], ok, marker="|", s=_TICK_S, linewidths=_TICK_LW, color="black", zorder=3,
                   label="model estimate (of the code measured)")
    if old or drawn:  # beside the axes, never over the last bar, its label or the title
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, borderaxespad=0)
    ax.set_xlabel(f"{_UNITS[metric]}" + provenance(rows))
    ax.set_title(title or f"ladder: {problem}")
    top = max([vals.max()] + drawn)
    ax.set_xlim(0, top * 1.35)
    return ax


_TICK_S, _TICK_LW = 300, 1.5  # an estimate's tick: marker area (points^2) and line width (points)
_LABEL_GAP_PT = 2.0  # a value label starts this far right of its x, clear of a tick's half width there


def _label_at(ax, x: float, y: float, text: str):
    """A bar's or tick's value label, left-aligned ``_LABEL_GAP_PT`` points right of ``x``."""
    return ax.annotate(text, (x, y), xytext=(_LABEL_GAP_PT, 0), textcoords="offset points", va="center",
                       fontsize=8)


def _rate_text(v: float) -> str:
    """A rate as a bar's label: three digits and no exponent (2740 GB/s, not 2.74e+03)."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _estimates_only(estimates: dict, metric: str, why: str, ax=None, title: str = "ladder"):
    """The model's estimates as ticks, one row per rung, where nothing was measured: labelled so."""
    import matplotlib.pyplot as plt

    labels = list(estimates)
    vals = [estimates[k] if estimates[k] is not None and np.isfinite(estimates[k]) else np.nan for k in labels]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * len(labels) + 1.4))
    ys = list(range(len(labels)))
    ok = [i for i, v in enumerate(vals) if np.isfinite(v)]
    ax.scatter([vals[i] for i in ok], ok, marker="|", s=_TICK_S, linewidths=_TICK_LW, color="black",
               label="model estimate")
    for i in ok:
        _label_at(ax, vals[i], i, f" {_rate_text(vals[i])}")
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals[i] for i in ok) * 1.3)
    ax.set_xlabel(f"{_UNITS[metric]}, model estimate only: {why}")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return ax


def provenance(rows: pd.DataFrame, most: int = 3) -> str:
    """" on <GPU> (<date> <commit>, ...)" for the rows shown: each GPU with its runs, a run being
    a date and the commit it measured, paired so that no date reads as another's commit; past
    ``most`` runs a GPU's are "N runs, <first date> to <last date>"."""
    if "gpu" not in rows or rows["gpu"].dropna().empty:
        return ""
    parts = []
    for gpu, g in rows.dropna(subset=["gpu"]).groupby("gpu", sort=True):
        dates = g["utc"].astype(str).str[:10] if "utc" in g else pd.Series("", index=g.index)
        commits = g["commit"].fillna("").astype(str).str[:7] if "commit" in g else pd.Series("", index=g.index)
        runs = sorted({(d if d not in ("", "nan", "None") else "", c) for d, c in zip(dates, commits)})
        runs = [(d, c) for d, c in runs if d or c]
        if not runs:
            parts.append(str(gpu))
        elif len(runs) <= most:
            parts.append(f"{gpu} (" + ", ".join(f"{d} {c}".strip() if c else d for d, c in runs) + ")")
        else:
            days = sorted(d for d, _ in runs if d)
            parts.append(f"{gpu} ({len(runs)} runs" + (f", {days[0]} to {days[-1]})" if days else ")"))
    return " on " + "; ".join(parts)


def metric_vs(table: pd.DataFrame, x: str, metric: str = "gbps", hue: str = "label",
              title: str | None = None, ax=None, ceiling: float | None = None, logx: bool = True,
              ceiling_label: str = "measured copy bandwidth"):
    """Line plot of ``metric`` against a problem parameter (e.g. bandwidth vs row width), the
    legend beside the axes (never over the lines), ``ceiling`` a dashed line named ``ceiling_label``.
    Each point is one record, never a mean: where the rows hold several dtypes, each dtype is a
    line of its own (its style named in the legend), since a float16 and a float32 time at one
    width are not two samples of one thing."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    rows, n_sim = real_rows(table, metric)
    if rows.empty:
        msg = (f"no GPU measurements of {_UNITS.get(metric, metric)} vs {x}"
               + (f": {_rows_word(n_sim)} left out" if n_sim else ""))
        return placeholder(msg, ax=ax, title=title)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    if "dtype" not in rows and "problem" in rows:
        rows = rows.assign(dtype=rows["problem"].astype(str).str.extract(r"dtype=(\S+)", expand=False))
    style = "dtype" if "dtype" in rows and rows["dtype"].nunique() > 1 else None
    # a marker shape per dtype: a dtype recorded at one width is a lone point, with no dashes to show
    marks = {"markers": True} if style else {"marker": "o"}
    sns.lineplot(data=rows.sort_values(x), x=x, y=metric, hue=hue, style=style, estimator=None, ax=ax, **marks)
    if ceiling:
        ax.axhline(ceiling, ls="--", color="grey", lw=1)
        ax.annotate(ceiling_label, (rows[x].min(), ceiling), fontsize=8, va="bottom", color="grey")
        ax.set_ylim(0, max(ceiling, float(rows[metric].max())) * 1.12)
    if logx:
        ax.set_xscale("log", base=2)
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    ax.set_ylabel(_UNITS.get(metric, metric))
    ax.set_title(title or f"{metric} vs {x}")
    return ax
