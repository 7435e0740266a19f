"""Measured per-op times of a network's step with ``torch.profiler`` (GPU only), beside the
prediction, recorded under ``data/results/`` with provenance.

Every GPU kernel the profiler sees is charged to the innermost aten op that launched it (the
profiler links a kernel to the CPU op through its correlation id); ops are classed by the same
rules as the trace (:func:`perfkit.workload.ops.classify`), so measured and predicted time per
class sit side by side.  The step's wall time (CUDA events around each step) is recorded too:
its excess over the kernels' sum is time the GPU sat idle (launch-bound stretches).

Nothing here runs without a CUDA GPU and PyTorch's CUDA build: :func:`unavailable` says why.
"""
from __future__ import annotations

import statistics

import pandas as pd

from . import WorkloadError, by_class, characterize, predict
from .networks import resolve
from .ops import CLASSES, classify

__all__ = ["unavailable", "profile"]


def unavailable() -> str | None:
    """Why a step cannot be profiled here (None when it can): a GPU and torch's CUDA build."""
    from .. import backend

    if backend.is_simulator():
        return "perfkit runs in Numba's CUDA simulator here: there is no GPU to profile"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device (a CPU build, or no driver)"
    return None


def _step_fn(spec, model, inp, mode):
    import torch

    if mode == "infer":
        model.eval()

        def step():
            with torch.no_grad():
                model(inp["x"])
    else:
        model.train()

        def step():
            model.zero_grad(set_to_none=True)
            spec.loss(model(inp["x"]), inp["target"]).backward()
    return step


def profile(network: str, *, batch: int | None = None, seq: int | None = None, mode: str = "train",
            dtype: str = "float32", gpu: str | None = None, steps: int = 5, warmup: int = 3,
            record: bool | str = "auto", attention: str = "eager", results_root=None) -> dict:
    """Profile ``steps`` steps of a network on the GPU and compare with the prediction.

    Returns ``{"per_op": DataFrame (aten op, class, kernels, measured_ms per step),
    "per_class": DataFrame (class, measured_ms, predicted_ms, ratio), "step_ms": [...],
    "path": recorded file or None}``.  ``gpu`` is the devices.yaml key whose specs feed the
    prediction (default: the device's own name).  ``results_root``: where the record goes
    (default ``data/results/``; a device run gives its ``$OUT``, the only folder that comes back).
    Raises :class:`WorkloadError` with the reason
    when there is no GPU (see :func:`unavailable`).
    """
    reason = unavailable()
    if reason:
        raise WorkloadError(f"cannot profile {network}: {reason}")
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    from .. import backend, specs

    spec = resolve(network)
    w = characterize(spec.name, batch=batch, seq=seq, mode=mode, dtype=dtype, attention=attention)  # validates too
    gpu_key = specs.get(gpu or backend.device().name).key
    tdt = getattr(torch, dtype)
    with torch.device("cuda"):
        model = (spec.build(attention=attention) if spec.kind == "tokens" else spec.build()).to(tdt)
        inp = spec.inputs(w.batch, w.seq, device="cuda", dtype=tdt)
    step = _step_fn(spec, model, inp, mode)
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    step_ms = []
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            torch.cuda.synchronize()
            step_ms.append(a.elapsed_time(b))
    rows = {}
    for e in prof.events():
        kernels = getattr(e, "kernels", None) or []
        if not kernels:
            continue
        name = e.name
        short = name.split("::", 1)[1] if name.startswith("aten::") else name
        r = rows.setdefault(name, {"op": name, "class": classify(short, 0, 0), "kernels": 0, "us": 0.0})
        r["kernels"] += len(kernels)
        r["us"] += sum(float(k.duration) for k in kernels)
    per_op = pd.DataFrame(list(rows.values()), columns=["op", "class", "kernels", "us"])
    per_op["measured_ms"] = per_op["us"] / 1e3 / steps
    per_op["kernels"] = per_op["kernels"] / steps
    per_op = per_op.drop(columns="us").sort_values("measured_ms", ascending=False).reset_index(drop=True)
    pred = by_class(predict(w, gpu_key)).set_index("class")["predicted_ms"]
    meas = per_op.groupby("class")["measured_ms"].sum()
    classes = [c for c in CLASSES if c in meas.index or c in pred.index]
    per_class = pd.DataFrame({"class": classes,
                              "measured_ms": [float(meas.get(c, 0.0)) for c in classes],
                              "predicted_ms": [float(pred.get(c, 0.0)) for c in classes]})
    per_class["ratio"] = per_class["predicted_ms"] / per_class["measured_ms"].where(per_class["measured_ms"] > 0)
    out = {"workload": w.label, "gpu": gpu_key, "per_op": per_op, "per_class": per_class, "step_ms": step_ms,
           "kernel_ms": float(per_op["measured_ms"].sum()), "predicted_ms": float(per_class["predicted_ms"].sum()),
           "path": None}
    if record is True or (record == "auto" and not backend.is_simulator()):
        out["path"] = str(_record(out, w, steps, warmup, results_root))
    return out


def _record(out: dict, w, steps: int, warmup: int, root=None):
    """One perfkit result: op ``workload``, the step's times per class and op, with provenance."""
    from .. import results

    med = statistics.median(out["step_ms"]) / 1e3
    entry = {
        "op": "workload", "problem": w.label, "rung": "profile", "variant": f"torch-eager-{w.network}",
        "params": {"network": w.network, "batch": w.batch, "seq": w.seq, "mode": w.mode, "dtype": w.dtype,
                   "attention": w.attention or None},
        "timing": {"median_s": med, "min_s": min(out["step_ms"]) / 1e3, "n": len(out["step_ms"]),
                   "samples": [t / 1e3 for t in out["step_ms"]], "warmup_steps": warmup,
                   "timer": "torch.cuda.Event around each step, torch.profiler kernels per op"},
        "kernel_s": out["kernel_ms"] / 1e3, "predicted_s": out["predicted_ms"] / 1e3, "model_gpu": out["gpu"],
        "per_class": out["per_class"].to_dict(orient="records"),
        "per_op": out["per_op"].to_dict(orient="records"),
    }
    return results.record(entry, root=root)
