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
from numba import cuda, float32  # module level: the simulator swaps only a kernel's globals

from . import backend

__all__ = ["Ceiling", "ceilings", "published_rates", "intensity", "attainable",
           "copy_bandwidth", "fp32_rate", "plot", "DEFAULT_GPU"]

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
    if not recorded.empty and "gpu" in recorded:
        return recorded["gpu"].value_counts().index[0]
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
            out.append(Ceiling(f"measured copy ({r['gpu']})", "memory", r["gbps"] * 1e9, "measured", r["path"]))
        elif r["variant"] == "fma":
            out.append(Ceiling(f"measured FP32 FMA ({r['gpu']})", "compute", r["tflops"] * 1e12, "measured", r["path"]))
    return out


@lru_cache(maxsize=64)
def _spec_key(name: str) -> str | None:
    from . import specs

    try:
        return specs.get(name).key
    except Exception:
        return None


def ceilings(gpu: str | None = None, measured: bool = True) -> list[Ceiling]:
    """Published ceilings of ``gpu`` (default: the GPU in use; in the simulator the GPU with
    recorded results, else H100 SXM), plus the measured ones recorded for it."""
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


# --- measured ceilings ---------------------------------------------------------------------
@lru_cache(maxsize=None)
def _copy_kernel():
    @cuda.jit
    def copy(dst, src):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < src.size:
            dst[i] = src[i]
            i += stride

    return copy


@lru_cache(maxsize=None)
def _fma_kernel(iters: int):
    @cuda.jit
    def fma_chain(out, b, c):
        # 8 independent chains per thread so the FMA pipeline is never waiting on its own result
        x0 = float32(cuda.threadIdx.x)
        x1 = x0 + float32(1)
        x2 = x0 + float32(2)
        x3 = x0 + float32(3)
        x4 = x0 + float32(4)
        x5 = x0 + float32(5)
        x6 = x0 + float32(6)
        x7 = x0 + float32(7)
        for _ in range(iters):
            x0 = x0 * b + c
            x1 = x1 * b + c
            x2 = x2 * b + c
            x3 = x3 * b + c
            x4 = x4 * b + c
            x5 = x5 * b + c
            x6 = x6 * b + c
            x7 = x7 * b + c
        i = cuda.grid(1)
        if i < out.size:  # keep the result so the compiler cannot drop the loop
            out[i] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7

    return fma_chain


def _record(op_variant: str, flops: float, nbytes: float, m, params: dict):
    from . import results

    if m.simulated:
        return None
    return results.record({"op": "roofline", "problem": " ".join(f"{k}={v}" for k, v in params.items()),
                           "params": params, "rung": 0 if op_variant == "copy" else 1,
                           "variant": op_variant, "flops": flops, "bytes": nbytes,
                           "timing": m.as_dict(), "check": {"ok": True}, "check_ok": True})


def copy_bandwidth(nbytes: int | None = None, *, record: bool = True, **timer) -> dict:
    """Measure DRAM bandwidth with a grid-stride float32 copy (reads + writes count).

    Default size: 8x the L2 on a GPU (so the copy streams from DRAM); 64 KiB in the simulator.
    Returns ``{"bytes_per_s", "measurement", "nbytes", "path"}``.
    """
    sim = backend.is_simulator()
    if nbytes is None:
        nbytes = 64 << 10 if sim else max(8 * (backend.device().l2_bytes or 0), 1 << 30)
    if nbytes < 4:
        raise ValueError(f"nbytes must be at least 4, got {nbytes}")
    n = int(nbytes) // 4
    src = cuda.to_device(np.arange(n, dtype=np.float32))
    dst = cuda.device_array(n, dtype=np.float32)
    kernel = _copy_kernel()
    sms = backend.device().sm_count or 2
    grid = min(sms * 8, -(-n // 256))
    from .timing import measure

    m = measure(lambda: kernel[grid, 256](dst, src), **timer)
    if not np.array_equal(dst.copy_to_host()[:1024], np.arange(min(n, 1024), dtype=np.float32)):
        raise RuntimeError("copy kernel produced wrong data: bandwidth not recorded")
    moved = 2.0 * n * 4
    path = _record("copy", 0.0, moved, m, {"n": n, "dtype": "float32"}) if record else None
    return {"bytes_per_s": np.nan if m.simulated else moved / m.median_s, "measurement": m,
            "nbytes": moved, "path": path}


def fp32_rate(iters: int | None = None, *, record: bool = True, **timer) -> dict:
    """Measure the FP32 FMA rate with 8 independent FMA chains per thread (2 FLOPs per FMA)."""
    sim = backend.is_simulator()
    iters = iters or (16 if sim else 4096)
    blocks = 2 if sim else (backend.device().sm_count or 1) * 16
    threads = 32 if sim else 256
    out = cuda.device_array(blocks * threads, dtype=np.float32)
    kernel = _fma_kernel(int(iters))
    b, c = np.float32(0.999), np.float32(0.001)
    from .timing import measure

    m = measure(lambda: kernel[blocks, threads](out, b, c), **{"l2": "hot", **timer})
    flops = 2.0 * 8 * iters * blocks * threads
    path = _record("fma", flops, float(out.size * 4), m, {"iters": iters, "blocks": blocks, "threads": threads}) if record else None
    return {"flops_per_s": np.nan if m.simulated else flops / m.median_s, "measurement": m,
            "flops": flops, "path": path}


# --- the figure ----------------------------------------------------------------------------
def plot(table: pd.DataFrame | None = None, ceilings_: list[Ceiling] | None = None, ax=None,
         title: str | None = None, label_col: str = "label"):
    """Log-log roofline with every ceiling and the points of a results table.

    A point needs ``flops``, ``bytes`` and a real (not simulated) ``median_s``.  Simulated rows
    are never drawn: the figure says how many were left out.
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
    for mem in memory:
        for comp in compute:  # one roof per pair; dashed when either side is measured
            ls = "--" if "measured" in (comp.origin, mem.origin) else "-"
            ax.plot(x, np.minimum(comp.value, x * mem.value) / 1e12, ls, lw=1, alpha=0.5, color="grey")
        ax.annotate(mem.name, (x[40], x[40] * mem.value / 1e12), fontsize=7, rotation=28, color="grey")
    for comp in compute:
        ax.axhline(comp.value / 1e12, ls=styles.get(comp.origin, "-"), lw=0.6, color="grey", alpha=0.6)
        ax.annotate(comp.name, (x[-1], comp.value / 1e12), fontsize=7, ha="right", va="bottom", color="grey")
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
            for xi, yi, lab in zip(ai, rate, labels):
                ax.scatter([xi], [yi], s=25, zorder=3)
                ax.annotate(str(lab), (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points")
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
