"""The roofline: ceilings, arithmetic intensity, attainable rate, and the figure.

A kernel doing ``F`` FLOPs while moving ``B`` bytes from DRAM has arithmetic intensity
``I = F / B``.  It cannot run faster than ``min(peak_flops, I * bandwidth)`` (Williams,
Waterman and Patterson, "Roofline", CACM 2009).  Ceilings come from two places:

* **published**: the datasheet figures in ``data/devices.yaml`` (see :mod:`perfkit.specs`);
* **measured**: a Numba copy kernel for DRAM bandwidth and a Numba FMA-chain kernel for the
  FP32 rate, timed with :func:`perfkit.timing.measure` and recorded in ``data/results/``
  under op ``roofline`` (real GPUs only).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from numba import cuda

from . import backend
# the ceiling kernels, re-exported: roofline.COPY / FMA / CopyProblem / FmaProblem as before
from .kernels.ceilings import (COPY, FMA, FMA_BLOCK, FMA_CHAINS, FMA_UNROLL, CopyProblem,  # noqa: F401
                               FmaProblem, copy_launcher, fma_kernel, full_wave_blocks)

__all__ = ["Ceiling", "ceilings", "published_rates", "intensity", "attainable",
           "copy_bandwidth", "fp32_rate", "copy_launcher", "best_recorded", "plot", "DEFAULT_GPU",
           "CopyProblem", "FmaProblem", "COPY", "FMA"]

#: The GPU whose published ceilings are shown when there is no GPU and nothing recorded.
DEFAULT_GPU = "h100-sxm"


@dataclass(frozen=True)
class Ceiling:
    """One roof: ``kind`` is "compute" (value in FLOP/s) or "memory" (value in byte/s)."""

    name: str
    kind: str
    value: float
    origin: str  # "published" or "measured"
    source: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def intensity(flops, nbytes):
    """Arithmetic intensity, FLOP per byte (array-friendly)."""
    flops, nbytes = np.asarray(flops, dtype=float), np.asarray(nbytes, dtype=float)
    if np.any(nbytes <= 0):
        raise ValueError("bytes must be positive to compute an arithmetic intensity")
    return flops / nbytes


def attainable(ai, ceilings_: list[Ceiling]):
    """The roofline: min over compute roofs and over ``ai * bandwidth`` of memory roofs."""
    ai = np.asarray(ai, dtype=float)
    compute = [c.value for c in ceilings_ if c.kind == "compute"]
    memory = [c.value for c in ceilings_ if c.kind == "memory"]
    if not compute or not memory:
        raise ValueError("attainable() needs at least one compute and one memory ceiling")
    return np.minimum(max(compute), ai * max(memory))


def _gpu_name(gpu: str | None) -> str:
    if gpu is not None:
        return gpu
    if not backend.is_simulator():
        return backend.device().name
    from . import results

    recorded = results.load()
    if not recorded.empty and "gpu" in recorded:  # the GPU the notebooks show: the newest recorded
        return str(recorded.sort_values("utc")["gpu"].iloc[-1]) if "utc" in recorded else recorded["gpu"].iloc[-1]
    return DEFAULT_GPU


def _published(gpu: str) -> list[Ceiling]:
    from . import specs

    s = specs.get(gpu)
    out = [Ceiling(f"{s.name} FP32", "compute", s.fp32_flops, "published", s.sources.get("fp32_flops", "")),
           Ceiling(f"{s.name} DRAM", "memory", s.dram_bw, "published", s.sources.get("dram_bw", ""))]
    for dt, rate in sorted(s.tensor_flops.items()):
        if dt in ("fp16", "tf32"):
            out.append(Ceiling(f"{s.name} tensor {dt} (dense)", "compute", rate, "published",
                               s.sources.get(f"tensor_flops.{dt}", "")))
    return out


def _measured(gpu: str) -> list[Ceiling]:
    from . import results

    df = results.load(op="roofline", gpu=None)
    if df.empty:
        return []
    from . import specs

    try:  # match the recorded GPU name to the asked one through the spec aliases
        key = specs.get(gpu).key
        df = df[[_spec_key(g) == key for g in df["gpu"]]]
    except Exception:
        df = df[df["gpu"].str.lower() == gpu.lower()]
    out = []
    for _, r in df.iterrows():
        if r["variant"] == "copy":
            out.append(Ceiling(f"measured copy ({r['gpu']})", "memory", r["gbps"] * 1e9, "measured", _repo_path(r["path"])))
        elif r["variant"] == "fma":
            out.append(Ceiling(f"measured FP32 FMA ({r['gpu']})", "compute", r["tflops"] * 1e12, "measured",
                               _repo_path(r["path"])))
    return out


def _repo_path(path) -> str:
    """A record's path as the repository names it (data/results/...), not where this clone lies."""
    from pathlib import Path

    from . import paths

    try:
        return "data/" + Path(path).resolve().relative_to(Path(paths.DATA).resolve()).as_posix()
    except (ValueError, TypeError):
        return str(path)


@lru_cache(maxsize=64)
def _spec_key(name: str) -> str | None:
    from . import specs

    try:
        return specs.get(name).key
    except Exception:
        return None


def ceilings(gpu: str | None = None, measured: bool = True) -> list[Ceiling]:
    """Published ceilings of ``gpu`` (default: the GPU in use; in the simulator the GPU of the
    newest record, else H100 SXM), plus the measured ones recorded for it."""
    name = _gpu_name(gpu)
    out = _published(name)
    if measured:
        out += _measured(name)
    return out


def published_rates(traffic=None, gpu: str | None = None) -> dict:
    """Peak FLOP/s and DRAM byte/s of the GPU in use, for the models in :mod:`perfkit.model`.

    A traffic model may name the unit it runs on in ``extra["peak"]`` (e.g. ``"tensor.fp16"``);
    the default is the FP32 (non-tensor) rate.
    """
    from . import specs

    if gpu is None and backend.is_simulator():
        raise LookupError("the simulator has no published ceilings; pass gpu=")
    s = specs.get(gpu or backend.device().name)
    peak = (getattr(traffic, "extra", None) or {}).get("peak", "fp32")
    flops = s.tensor_flops[peak.split(".", 1)[1]] if peak.startswith("tensor.") else s.fp32_flops
    return {"flops": flops, "dram_bw": s.dram_bw}


# --- measured ceilings (the kernels: perfkit.kernels.ceilings) ----------------------------


def _record(op_variant: str, flops: float, nbytes: float, m, params: dict, extra: dict | None = None,
            root=None):
    from . import results

    if m.simulated:
        return None
    return results.record({"op": "roofline", "problem": " ".join(f"{k}={v}" for k, v in params.items()),
                           "params": params, "rung": 0 if op_variant == "copy" else 1,
                           "variant": op_variant, "flops": flops, "bytes": nbytes,
                           "timing": m.as_dict(), "check": {"ok": True}, "check_ok": True,
                           **(extra or {})}, root=root)


def best_recorded(kind: str, gpu: str | None = None, *, root=None) -> dict | None:
    """The best recorded result of the GPU in use (or ``gpu``) that a ceiling of ``kind`` must not
    fall below: ``"memory"``, the highest GB/s of a record whose problem streams at least twice the
    L2 (smaller ones may run from L2); ``"compute"``, the highest TFLOP/s of a float32 record
    (not a tensor-core rung, not the roofline's own, not a convolution a library ran or a
    Winograd rung: their FLOPs are the direct convolution's, more than a Winograd or FFT
    algorithm executes).  None if there is none."""
    from . import results

    name = gpu or (None if backend.is_simulator() else backend.device().name)
    if name is None:
        return None
    df = results.load(gpu=name, root=root)
    if df.empty:
        return None
    df = df[(df["op"] != "roofline") & (df["simulated"].fillna(False).astype(bool) == False)]  # noqa: E712
    df = df[df.get("check_ok", True).fillna(True).astype(bool)] if "check_ok" in df else df
    if kind == "memory":
        l2 = (None if backend.is_simulator() or gpu else backend.device().l2_bytes) or 50 << 20
        df = df[pd.to_numeric(df["bytes"], errors="coerce") >= 2 * l2]
        col, unit = "gbps", 1e9
    elif kind == "compute":
        dt = df["dtype"] if "dtype" in df else pd.Series("float32", index=df.index)
        df = df[(dt.fillna("float32") == "float32") & ~df["variant"].astype(str).str.contains("tensor")]
        nominal = (df["op"] == "conv") & ((pd.to_numeric(df["rung"], errors="coerce") <= 0)
                                          | df["variant"].astype(str).str.contains("winograd"))
        df = df[~nominal]
        col, unit = "tflops", 1e12
    else:
        raise ValueError(f"kind must be 'memory' or 'compute', got {kind!r}")
    df = df[pd.to_numeric(df[col], errors="coerce").notna()]
    if df.empty:
        return None
    r = df.loc[pd.to_numeric(df[col]).idxmax()]
    return {"value": float(r[col]) * unit, "op": r["op"], "problem": r["problem"], "variant": r["variant"],
            "path": r["path"]}


def _flag_below_recorded(kind: str, value: float, what: str) -> dict | None:
    """A measured ceiling below a recorded result of the same device is no ceiling: warn and say so."""
    if not np.isfinite(value):
        return None
    best = best_recorded(kind)
    if best is None or value >= best["value"]:
        return None
    import warnings

    unit, scale = ("GB/s", 1e9) if kind == "memory" else ("TFLOP/s", 1e12)
    warnings.warn(f"measured {what} {value / scale:.1f} {unit} is below a recorded result on this GPU "
                  f"({best['op']} {best['variant']} {best['problem']}: {best['value'] / scale:.1f} {unit}): "
                  "this ceiling under-measures the hardware", RuntimeWarning, stacklevel=3)
    return best


def copy_bandwidth(nbytes: int | None = None, *, record: bool = True, results_root=None, **timer) -> dict:
    """Measure DRAM bandwidth with the 16-byte copy kernel (bytes read + bytes written).

    Default size: 8x the L2 (at least 1 GiB) on a GPU, so the copy streams from DRAM; 64 KiB in
    the simulator.  Returns ``{"bytes_per_s", "measurement", "nbytes", "path", "below_recorded"}``;
    ``below_recorded`` is the recorded result of this GPU that beats the measured ceiling (a
    warning says so too), else None.  ``results_root``: where to record (default: data/results).
    """
    sim = backend.is_simulator()
    if nbytes is None:
        nbytes = 64 << 10 if sim else max(8 * (backend.device().l2_bytes or 0), 1 << 30)
    if nbytes < 4:
        raise ValueError(f"nbytes must be at least 4, got {nbytes}")
    n = int(nbytes) // 4
    src_host = np.arange(n, dtype=np.float32)
    src = cuda.to_device(src_host)
    dst = cuda.to_device(np.full(n, np.nan, dtype=np.float32))
    from .timing import measure

    m = measure(copy_launcher(dst, src), **timer)
    if not np.array_equal(dst.copy_to_host(), src_host):
        raise RuntimeError("copy kernel produced wrong data: bandwidth not recorded")
    moved = 2.0 * n * 4
    bw = np.nan if m.simulated else moved / m.median_s
    below = None if m.simulated else _flag_below_recorded("memory", bw, "copy bandwidth")
    path = _record("copy", 0.0, moved, m, {"n": n, "dtype": "float32", "kernel": "copy16"},
                   {"below_recorded": below}, root=results_root) if record else None
    return {"bytes_per_s": bw, "measurement": m, "nbytes": moved, "path": path, "below_recorded": below,
            "params": {"n": n, "dtype": "float32", "kernel": "copy16"}}


def fp32_rate(iters: int | None = None, *, record: bool = True, results_root=None, **timer) -> dict:
    """Measure the FP32 FMA rate: FMA_CHAINS independent chains per thread, FMA_UNROLL-fold
    unrolled, one full wave of blocks (2 FLOPs per FMA).  Same return fields as
    :func:`copy_bandwidth` with ``flops_per_s`` and ``flops``."""
    sim = backend.is_simulator()
    iters = iters or (2 if sim else 1024)  # GPU: 131072 FMAs per thread, ~1 ms on an H100
    threads = 32 if sim else FMA_BLOCK
    blocks = full_wave_blocks(threads)
    prob = FmaProblem(int(iters), blocks, threads)
    out = cuda.to_device(np.full(blocks * threads, np.nan, dtype=np.float32))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        launch = fma_kernel()[blocks, threads]
    b, c = np.float32(prob.B), np.float32(prob.C)
    from .timing import measure

    m = measure(lambda: launch(out, b, c, int(iters)), **{"l2": "hot", **timer})
    chk = prob.check(out.copy_to_host(), prob.reference({}))
    if not chk.ok:
        raise RuntimeError(f"FMA kernel produced wrong data ({chk.message}): rate not recorded")
    flops = prob.flops
    rate = np.nan if m.simulated else flops / m.median_s
    below = None if m.simulated else _flag_below_recorded("compute", rate, "FP32 FMA rate")
    params = {"iters": int(iters), "blocks": blocks, "threads": threads, "chains": FMA_CHAINS, "unroll": FMA_UNROLL}
    path = _record("fma", flops, prob.bytes, m, params, {"below_recorded": below}, root=results_root) \
        if record else None
    return {"flops_per_s": rate, "measurement": m, "flops": flops, "path": path, "below_recorded": below,
            "params": params, "nbytes": prob.bytes}


# --- the figure ----------------------------------------------------------------------------
def plot(table: pd.DataFrame | None = None, ceilings_: list[Ceiling] | None = None, ax=None,
         title: str | None = None, label_col: str = "label", group_col: str | None = None):
    """Log-log roofline with every ceiling and the points of a results table.

    A point needs ``flops``, ``bytes`` and a real (not simulated) ``median_s``.  Simulated rows
    are never drawn: the figure says how many were left out.  ``group_col`` (e.g. ``"op"``):
    one colour per ladder, one legend entry per ladder naming its fastest point (ringed), and no
    text beside the points, so that tens of rungs stay readable.
    """
    import matplotlib.pyplot as plt

    ceilings_ = ceilings_ if ceilings_ is not None else ceilings()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    compute = [c for c in ceilings_ if c.kind == "compute"]
    memory = [c for c in ceilings_ if c.kind == "memory"]
    if not compute or not memory:
        raise ValueError("a roofline needs at least one compute and one memory ceiling")
    x = np.logspace(-2, 4, 400)
    styles = {"published": "-", "measured": "--"}
    for i, mem in enumerate(sorted(memory, key=lambda c: -c.value)):
        for comp in compute:  # one roof per pair; dashed when either side is measured
            ls = "--" if "measured" in (comp.origin, mem.origin) else "-"
            ax.plot(x, np.minimum(comp.value, x * mem.value) / 1e12, ls, lw=1, alpha=0.5, color="grey")
        # the highest slope's label above its line, the others' below their own: two close slopes
        # (a measured copy beside the datasheet's) would otherwise print their names over each other
        j = 40
        ax.annotate(mem.name, (x[j], x[j] * mem.value / 1e12), fontsize=7, rotation=28, color="grey",
                    va="bottom" if i == 0 else "top", rotation_mode="anchor")
    last = None
    for comp in sorted(compute, key=lambda c: -c.value):
        ax.axhline(comp.value / 1e12, ls=styles.get(comp.origin, "-"), lw=0.6, color="grey", alpha=0.6)
        # two roofs within 25% of each other: the higher one's label above its line, the lower
        # one's below its own, so that neither sits in the gap over the other
        close = last is not None and comp.value * 1.25 > last
        ax.annotate(comp.name, (x[-1], comp.value / 1e12), fontsize=7, ha="right",
                    va="top" if close else "bottom", color="grey")
        last = comp.value
    left_out = 0
    if table is not None and not table.empty:
        t = table.copy()
        sim = t.get("simulated", pd.Series(False, index=t.index)).fillna(False).astype(bool)
        left_out = int(sim.sum())
        t = t[~sim & t["median_s"].notna() & (pd.to_numeric(t["median_s"], errors="coerce") > 0)]
        if not t.empty:
            ai = intensity(t["flops"].astype(float), t["bytes"].astype(float))
            rate = t["flops"].astype(float) / t["median_s"].astype(float) / 1e12
            labels = t[label_col] if label_col in t else t.get("variant")
            if group_col is not None and group_col in t:
                ai_s = pd.Series(np.asarray(ai, dtype=float), index=t.index)
                # each ladder's fastest point ringed and named in the legend, not beside the point:
                # ladders of one kind share an intensity, and their names printed over each other
                # (five norms' at ~1 FLOP/byte on notebook 04's roofline)
                for i, (g, idx) in enumerate(t.groupby(group_col, sort=True).groups.items()):
                    best = rate[idx].idxmax()
                    ax.scatter(ai_s[idx], rate[idx], s=18, zorder=3, color=f"C{i % 10}", alpha=0.8,
                               label=f"{g} ({len(idx)}; fastest {labels[best]})")
                    ax.scatter([ai_s[best]], [rate[best]], s=70, zorder=4, facecolors="none",
                               edgecolors=f"C{i % 10}", linewidths=1.2)
                ax.legend(fontsize=7, loc="upper left", title=f"{group_col} (rungs; the ringed point)",
                          title_fontsize=7, frameon=False)
            many = len(t) > 4  # rungs of one problem share an intensity: their labels would overlap
            for xi, yi, lab in ([] if group_col is not None and group_col in t else zip(ai, rate, labels)):
                ax.scatter([xi], [yi], s=25, zorder=3, label=str(lab))
                if not many:
                    ax.annotate(str(lab), (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points")
            if many and not (group_col is not None and group_col in t):
                ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title or "roofline")
    if left_out:
        ax.text(0.02, 0.02, f"{left_out} simulated result(s) not plotted: simulated times are not speeds",
                transform=ax.transAxes, fontsize=8, color="firebrick")
    ax.grid(True, which="both", lw=0.3, alpha=0.4)
    return ax
