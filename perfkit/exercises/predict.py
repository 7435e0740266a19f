"""Prediction exercises, one per notebook 01-06: the learner writes down a number or a choice
(a time from bytes and bandwidth, which rung is faster, which leg binds, which GPU wins) and the
grader checks it against a GPU record or the performance model.  A failed check names what to
reconsider, never the value; a passed one shows the record or estimate it was checked against.

The answer is a dict, e.g. ``grade("01.predict_saxpy", {"us": 250})``.
"""
from __future__ import annotations

import csv

from .. import paths
from ._core import Check, Exercise, register

_DATA = paths.DATA
_NCU = _DATA / "ncu" / "h100-sxm-2026-11-23.csv"


def _need(answer, keys: dict) -> str:
    """'' when ``answer`` is a dict with ``keys`` of the right kinds, else what is wrong."""
    if not isinstance(answer, dict):
        return f"answer with a dict with the keys {sorted(keys)}, got {type(answer).__name__}"
    missing = [k for k in keys if k not in answer]
    if missing:
        return f"the answer lacks {missing} (wanted: {', '.join(f'{k}: {t}' for k, t in keys.items())})"
    for k, kind in keys.items():
        v = answer[k]
        if kind == "number" and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            return f"{k} must be a positive number, got {v!r}"
        if kind == "yes/no" and not isinstance(v, bool):
            return f"{k} must be True or False, got {v!r}"
        if kind not in ("number", "yes/no") and not isinstance(v, str):
            return f"{k} must be a string ({kind}), got {v!r}"
    return ""


def _within(guess: float, truth: float, tol: float) -> bool:
    return abs(guess / truth - 1) <= tol


def _record(op: str, variant: str, problem: str) -> dict | None:
    """The newest H100 record of (op, variant name, problem label): median seconds, provenance."""
    from .. import results

    df = results.load(op=op)
    df = df[(df["variant"] == variant) & (df["problem"] == problem) & ~df["simulated"].fillna(False).astype(bool)
            & df["gpu"].astype(str).str.contains("H100")]  # the prompts ask about the H100
    if df.empty:
        return None
    r = df.sort_values("utc").iloc[-1]
    return {"s": float(r["median_s"]), "where": f"{r['gpu']}, {str(r['utc'])[:10]}, commit {str(r['commit'])[:7]}"}


# --- 01: bytes -> time ------------------------------------------------------------------------
def _saxpy_steps(answer, **_):
    bad = _need(answer, {"us": "number"})
    if bad:
        yield Check("a time in microseconds", False, bad)
        return
    yield Check("a time in microseconds", True, f"{answer['us']:g} us")
    with open(_NCU) as f:
        rows = [r for r in csv.DictReader(f) if r["op"] == "saxpy" and r["rung"] == "02 grid_stride"]
    truth = sum(float(r["time_us"]) for r in rows)
    ok = _within(answer["us"], truth, 0.30)
    yield Check("within 30% of the H100's kernel time (Nsight Compute)", ok,
                f"measured {truth:.0f} us on an H100 SXM (data/ncu, 2026-11-23): yours is "
                f"{answer['us'] / truth:.2f}x it" if ok else
                f"yours is {answer['us'] / truth:.2f}x the measured kernel time. Count the bytes saxpy moves per "
                "element (what it reads, what it writes, their size), multiply by n, and divide by the DRAM "
                "bandwidth of data/devices.yaml's h100-sxm")


register(Exercise(
    name="01.predict_saxpy", notebook="01_timing_and_roofline", title="predict a time from bytes",
    task=("Before any GPU runs it: how many microseconds does saxpy's grid_stride rung take at n = 2**26 "
          "(float32) on an H100 SXM? Answer {'us': ...}. Graded against the kernel time Nsight Compute "
          "measured (data/ncu/)."),
    checks=["a time in microseconds", "within 30% of the H100's kernel time (Nsight Compute)"],
    steps=_saxpy_steps, answer_kind="prediction", solution="perfkit.exercises.solutions.predict:saxpy"))


# --- 02: which rung is faster, by how much ------------------------------------------------------
_GEMM_PROBLEM = "m=4096 n=4096 k=4096 dtype=float32"


def _gemm_steps(answer, **_):
    bad = _need(answer, {"faster": "no_bank_conflicts or warptile", "x": "number"})
    if bad or answer["faster"] not in ("no_bank_conflicts", "warptile"):
        yield Check("a rung and a factor", False, bad or f"faster must be 'no_bank_conflicts' or 'warptile', "
                                                        f"got {answer['faster']!r}")
        return
    yield Check("a rung and a factor", True, f"{answer['faster']}, x{answer['x']:g}")
    a, b = _record("gemm", "no_bank_conflicts", _GEMM_PROBLEM), _record("gemm", "warptile", _GEMM_PROBLEM)
    if a is None or b is None:
        yield Check("the faster rung, as recorded", None, "no H100 record of both rungs here")
        return
    faster = "no_bank_conflicts" if a["s"] < b["s"] else "warptile"
    x = max(a["s"], b["s"]) / min(a["s"], b["s"])
    ok = answer["faster"] == faster
    yield Check("the faster rung, as recorded", ok,
                f"{faster} was faster on {a['where']}" if ok else
                "not what the H100 recorded: compare the two rungs' anatomy (registers, occupancy, shared "
                "memory per block) and the work each thread does per shared load")
    if ok:
        okx = answer["x"] >= 1 and _within(answer["x"], x, 0.25)
        yield Check("the factor within 25% of the recorded one", okx,
                    f"recorded x{x:.2f}" if okx else
                    f"your x{answer['x']:g} is off by more than 25% (a factor >= 1: slower time / faster time)")


register(Exercise(
    name="02.predict_order", notebook="02_gemm", title="which rung is faster?",
    task=("At 4096^3 float32 on an H100, which is faster: no_bank_conflicts or warptile, and by what factor "
          "(slower time / faster time)? Answer {'faster': 'no_bank_conflicts' or 'warptile', 'x': ...}. "
          "Graded against the H100 records."),
    checks=["a rung and a factor", "the faster rung, as recorded", "the factor within 25% of the recorded one"],
    steps=_gemm_steps, answer_kind="prediction", solution="perfkit.exercises.solutions.predict:gemm_order"))


# --- 03 and 06: which leg binds, which GPU wins (the model) ------------------------------------
_LEGS = ("dram", "l2", "smem", "lsu", "issue", "fp32", "alu", "tensor", "latency", "launch")


#: the layer 03.predict_bound asks about: a late ResNet-50 3x3 layer (7x7 images, 512 channels), not the
#: notebook's example layer, whose card (rung 1's, above the exercise) already says what binds it there
_CONV_LAYER = "s4 3x3 512"
#: legs within this fraction of the binding leg bind as much: the model cannot tell them apart
#: (the direct rung's latency and issue legs are within 1% of each other at every ResNet-50 layer)
_TIE = 0.02


def conv_bound_problem():
    """The problem of 03.predict_bound: rung 1 ``direct`` at :data:`_CONV_LAYER` (float32 NCHW, batch 32)."""
    from ..kernels import conv

    return next(p for name, p, _ in conv.resnet50_layers(32, "float32", "NCHW") if name == _CONV_LAYER)


def _conv_steps(answer, **_):
    bad = _need(answer, {"bound": " / ".join(_LEGS)})
    if bad or answer["bound"] not in _LEGS:
        yield Check("a leg", False, bad or f"bound must be one of {', '.join(_LEGS)}, got {answer['bound']!r}")
        return
    yield Check("a leg", True, answer["bound"])
    from .. import model
    from ..kernels import conv

    v = next(x for x in conv.LADDER if x.name == "direct")
    e = model.estimate(v, conv_bound_problem(), "h100-sxm", banks=False)
    legs = {k: s for k, s in e.legs.items() if s}
    top_s = legs.get(e.bound, 0.0)
    tied = sorted(k for k, s in legs.items() if top_s > 0 and s >= (1 - _TIE) * top_s)
    ok = answer["bound"] == e.bound or answer["bound"] in tied
    top = sorted(legs.items(), key=lambda kv: -kv[1])[:3]
    tie = (f"; {' and '.join(tied)} are within {_TIE:.0%} of each other, so the model cannot tell which binds"
           if len(tied) > 1 else "")
    yield Check("the leg the model says binds", ok,
                f"the model: bound by {e.bound} ({', '.join(f'{k} {s * 1e6:.0f} us' for k, s in top)}){tie}" if ok else
                "not the model's: per output pixel, count the loads each thread issues, how far apart its "
                "lanes' addresses are, and how many warps an SM holds to hide their wait")


register(Exercise(
    name="03.predict_bound", notebook="03_convolution", title="which leg binds the direct convolution?",
    task=("The direct convolution (rung 1) at ResNet-50's stage-4 3x3 layer (batch 32, 512 channels in and out, "
          "7x7 images, float32 NCHW: not the notebook's example layer) on an H100: which of the model's legs binds "
          f"it ({', '.join(_LEGS)})? Answer {{'bound': ...}}. Graded against perfkit.model.estimate (bank "
          f"conflicts not simulated); a leg within {_TIE:.0%} of the binding one counts as binding."),
    checks=["a leg", "the leg the model says binds"],
    steps=_conv_steps, answer_kind="prediction", solution="perfkit.exercises.solutions.predict:conv_bound"))


def _gpu_steps(answer, **_):
    gpus = ("h100-sxm", "a100-sxm-80gb")
    bad = _need(answer, {"faster": " or ".join(gpus), "bound": " / ".join(_LEGS)})
    if bad or answer["faster"] not in gpus or answer["bound"] not in _LEGS:
        yield Check("a GPU and a leg", False, bad or f"faster: one of {gpus}; bound: one of {_LEGS}")
        return
    yield Check("a GPU and a leg", True, f"{answer['faster']}, {answer['bound']}")
    from .. import model
    from ..kernels import saxpy

    v = next(x for x in saxpy.LADDER if x.name == "grid_stride")
    p = saxpy.Problem(n=1 << 26)
    est = {g: model.estimate(v, p, g, banks=False) for g in gpus}
    faster = min(gpus, key=lambda g: est[g].seconds)
    ok = answer["faster"] == faster
    yield Check("the GPU the model says is faster", ok,
                ", ".join(f"{g} {est[g].seconds * 1e6:.0f} us" for g in gpus) if ok else
                "not the model's: which resource does a saxpy spend its time on, and which of the two GPUs "
                "has more of it (data/devices.yaml)?")
    okb = answer["bound"] == est["h100-sxm"].bound
    yield Check("the leg that binds on the H100", okb,
                f"bound by {est['h100-sxm'].bound}" if okb else "not the model's leg: compare saxpy's bytes per FLOP "
                "with the H100's ratio of bandwidth to FP32 rate")


register(Exercise(
    name="06.predict_gpu", notebook="06_performance_model", title="which GPU wins, and why?",
    task=("saxpy's grid_stride rung at n = 2**26: is it faster on an H100 SXM or an A100 SXM 80GB, and which "
          "leg binds it on the H100? Answer {'faster': 'h100-sxm' or 'a100-sxm-80gb', 'bound': ...}. Graded "
          "against perfkit.model.estimate on both."),
    checks=["a GPU and a leg", "the GPU the model says is faster", "the leg that binds on the H100"],
    steps=_gpu_steps, answer_kind="prediction", solution="perfkit.exercises.solutions.predict:gpu"))


# --- 04: a memory-bound op at the bandwidth, and the oracle ----------------------------------------
_SOFTMAX = "rows=4096 cols=4096 dtype=float32 axis=-1"


def _softmax_steps(answer, **_):
    bad = _need(answer, {"us": "number", "beats_oracle": "yes/no"})
    if bad:
        yield Check("a time and a yes/no", False, bad)
        return
    yield Check("a time and a yes/no", True, f"{answer['us']:g} us, beats the oracle: {answer['beats_oracle']}")
    from ..kernels.norm import softmax

    ours = [r for r in (_record("softmax", v.name, _SOFTMAX) for v in softmax.LADDER if not v.oracle) if r]
    orc = _record("softmax", "oracle", _SOFTMAX)
    if not ours or orc is None:
        yield Check("within 30% of the best recorded rung", None, "no H100 records of softmax here")
        return
    best = min(ours, key=lambda r: r["s"])
    ok = _within(answer["us"] * 1e-6, best["s"], 0.30)
    yield Check("within 30% of the best recorded rung", ok,
                f"the best rung took {best['s'] * 1e6:.1f} us ({best['where']})" if ok else
                f"yours is {answer['us'] * 1e-6 / best['s']:.2f}x the best rung's record: a softmax that reads x once "
                "and writes y once moves how many bytes, at what share of the datasheet bandwidth?")
    beats = best["s"] < orc["s"]
    yield Check("whether the best rung beat the oracle", answer["beats_oracle"] == beats,
                f"oracle {orc['s'] * 1e6:.1f} us, best rung {best['s'] * 1e6:.1f} us" if answer["beats_oracle"] == beats
                else "not what the records say: look at the ladder table's 'of oracle' column")


register(Exercise(
    name="04.predict_softmax", notebook="04_normalization", title="a softmax at the bandwidth",
    task=("Softmax at 4096 x 4096 float32 on an H100: how many microseconds does the best perfkit rung take, "
          "and did it beat the oracle (rung 0)? Answer {'us': ..., 'beats_oracle': True or False}. Graded "
          "against the H100 records."),
    checks=["a time and a yes/no", "within 30% of the best recorded rung", "whether the best rung beat the oracle"],
    steps=_softmax_steps, answer_kind="prediction", solution="perfkit.exercises.solutions.predict:softmax"))


# --- 05: where a network's step goes ------------------------------------------------------------------
def _workload_steps(answer, batch: int = 2, dtype: str = "float32", **_):
    bad = _need(answer, {"class": "an op class of perfkit.workload.CLASSES"})
    from .. import workload

    if bad or answer["class"] not in workload.CLASSES:
        yield Check("an op class", False, bad or f"class must be one of {', '.join(workload.CLASSES)}")
        return
    yield Check("an op class", True, answer["class"])
    w = workload.characterize("resnet50", batch=batch, mode="train", dtype=dtype)
    t = workload.by_class(w.predict("h100-sxm"))
    t = t[t["class"] != "total"] if "class" in t else t
    top = t.sort_values("predicted_ms", ascending=False).iloc[0]
    ok = answer["class"] == top["class"]
    yield Check("the class with the largest predicted time", ok,
                f"{top['class']}: {top['predicted_ms']:.2f} ms of the step (model, batch {batch}, {dtype})" if ok else
                "not the model's: a class's time is its FLOPs over the peak or its bytes over the bandwidth, "
                "whichever is larger; compare FLOP share with bytes moved per class")


register(Exercise(
    name="05.predict_share", notebook="05_workloads", title="where does ResNet-50's step go?",
    task=("ResNet-50, one training step on an H100: which op class takes the largest predicted time? Answer "
          "{'class': ...} (one of perfkit.workload.CLASSES). Graded against perfkit.workload's prediction."),
    checks=["an op class", "the class with the largest predicted time"],
    steps=_workload_steps, answer_kind="prediction", solution="perfkit.exercises.solutions.predict:share"))
