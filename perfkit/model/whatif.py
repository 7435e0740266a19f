"""What-if across devices: one rung's estimate on every GPU of ``devices.yaml``, and a plot."""
from __future__ import annotations

from .. import model as _pkg  # estimate() through the package, as a monkeypatched model.estimate


def what_if(variant, problem, gpus=None, **kw):
    """The estimate of one rung on every device of ``devices.yaml`` (or ``gpus``): a DataFrame
    with one row per device (seconds, bound, and one column per leg)."""
    import pandas as pd

    from .. import specs

    rows = []
    for g in gpus or specs.names():
        try:
            e = _pkg.estimate(variant, problem, g, **kw)
            rows.append({"gpu": g, "seconds": e.seconds, "bound": e.bound, **{f"leg_{k}": v for k, v in e.legs.items()}})
        except Exception as exc:  # noqa: BLE001  (a target the compiler cannot build)
            rows.append({"gpu": g, "seconds": float("nan"), "bound": f"error: {exc.__class__.__name__}: {exc}"[:120]})
    return pd.DataFrame(rows)


def plot_what_if(df, ax=None, title: str | None = None):
    """Stacked legs per device (each leg's seconds, the combination is the dot)."""
    import matplotlib.pyplot as plt

    legs = [c for c in df.columns if c.startswith("leg_") and df[c].fillna(0).sum() > 0]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    bottom = [0.0] * len(df)
    for c in legs:
        vals = (df[c].fillna(0) * 1e6).tolist()
        ax.bar(df["gpu"], vals, bottom=bottom, label=c[4:])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(df["gpu"], df["seconds"] * 1e6, "ko", label="estimate")
    ax.set_ylabel("microseconds (legs stacked)")
    ax.set_title(title or "which GPU would this kernel like, and why", fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=7, ncol=2)
    return ax
