"""A network's step as measured on a GPU beside its prediction (notebook 05): the per-class kernel
times a workload profile recorded (``op == "workload"``, :mod:`perfkit.workload.measure`), the
prediction the record stored when it was taken, and today's prediction of the same step."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd


def measured_classes(rec: pd.DataFrame, today: dict | None = None) -> pd.DataFrame:
    """One row per class of each recorded profile, the newest per GPU and workload (``rec``:
    ``results.load(op="workload")``): measured ms per step (torch.profiler's kernels), the
    prediction stored in the record (``predicted_ms then``, for its ``model_gpu``), today's
    (``today``: workload label -> ``workload.by_class`` table, where the notebook traced the same
    step; NaN otherwise), and measured / predicted then.  Empty where nothing is recorded."""
    cols = ["workload", "gpu", "commit", "date", "class", "measured_ms", "predicted_ms then", "model_gpu",
            "predicted_ms today", "measured / predicted then"]
    if rec is None or rec.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    newest = rec.sort_values("utc").groupby(["gpu", "problem"], sort=False).tail(1)
    for r in newest.itertuples():
        doc = json.loads(Path(r.path).read_text())
        now = (today or {}).get(r.problem)
        now = now.set_index("class")["predicted_ms"] if now is not None else pd.Series(dtype=float)
        for c in doc.get("per_class") or []:
            meas, then = float(c.get("measured_ms", float("nan"))), float(c.get("predicted_ms", float("nan")))
            rows.append({"workload": r.problem, "gpu": r.gpu, "commit": str(r.commit)[:7], "date": str(r.utc)[:10],
                         "class": c["class"], "measured_ms": meas, "predicted_ms then": then,
                         "model_gpu": doc.get("model_gpu"), "predicted_ms today": float(now.get(c["class"], float("nan"))),
                         "measured / predicted then": meas / then if then > 0 else float("nan")})
    return pd.DataFrame(rows, columns=cols)

