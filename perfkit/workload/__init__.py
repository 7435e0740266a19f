"""Which kernels matter: per-op FLOPs, bytes and predicted time of real networks.

The flow::

    w = workload.characterize("bert-base", batch=8, seq=128, mode="train")   # meta device: no memory
    ops = w.predict("h100-sxm")          # one row per aten op: class, FLOPs, bytes, Problem, time
    workload.by_class(ops)               # per class: ops, GFLOP, GB, predicted ms, share, Amdahl

Every aten op of the step (forward, and backward for ``mode="train"``) is recorded on the
``meta`` device (:mod:`.ops`): nothing is allocated, no weights are downloaded, no GPU is needed.
Its predicted time on a device of ``data/devices.yaml`` is the roofline bound (the slower of
``flops / peak`` and ``bytes / DRAM bandwidth``, published figures, with a per-kernel floor),
or, with ``ladders="top"`` or ``"best"``, ``perfkit.model.estimate(variant, problem, gpu)`` of
the ladder rung that stands for the op where a perfkit ladder exists.  Ops of the same kind and
shape share one prediction (a memo per call; estimates are cached per problem for the process):
a network takes seconds with roofline bounds.  An estimate compiles its rung, seconds per unique
problem and rung on a laptop, which is why the ladders are opt-in.

Kernels run one after another on one stream, so the step's predicted time is the sum over ops,
and the share of a class is its time over that sum.  The Amdahl view: a class with share ``s``
made ``f`` times faster turns the step into ``1 - s + s / f`` of itself.

With a GPU, :func:`perfkit.workload.measure.profile` times the same step with ``torch.profiler``
and puts the measured time per class beside the prediction.
"""
from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field

import pandas as pd

from .networks import NETWORKS, PARAMS, resolve
from .ops import CLASSES, FLOPS_PER_ELEMENT, OpRecord, Recorder, classify

__all__ = ["WorkloadError", "Workload", "trace", "characterize", "predict", "by_class", "amdahl",
           "compare_devices", "published_flops", "count_params", "NETWORKS", "PARAMS", "CLASSES",
           "TEACHES", "KERNEL_FLOOR_S", "OpRecord", "classify", "FLOPS_PER_ELEMENT", "resolve"]

#: the notebook that teaches the kernel of each class
TEACHES = {
    "gemm": "02_gemm",
    "conv": "03_convolution",
    "attention": "02_gemm + 04_normalization (its matmuls and its softmax)",
    "normalization": "04_normalization",
    "softmax": "04_normalization",
    "elementwise": "01_timing_and_roofline (copy bandwidth)",
    "reduction": "01_timing_and_roofline (copy bandwidth)",
    "data movement": "01_timing_and_roofline (copy bandwidth)",
}

#: the least time a kernel takes in a stream of launches, seconds (an assumption of this roofline
#: fallback, not a measurement: launch and drain of a grid on a current NVIDIA GPU are a few
#: microseconds; perfkit.model.estimate, where it applies, has its own launch leg)
KERNEL_FLOOR_S = 2e-6

MODES = ("infer", "train")
DTYPES = ("float32", "float16", "bfloat16")


class WorkloadError(ValueError):
    """A workload cannot be traced, characterized or profiled as asked."""


def _torch():
    import torch

    return torch


def count_params(model) -> int:
    """Parameters of a model, each shared tensor counted once (GPT-2's tied LM head)."""
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return int(total)


def trace(model, inputs, *, mode: str = "infer", loss_fn=None) -> list[OpRecord]:
    """Every aten op of one inference (``mode="infer"``: eval mode, no grad) or one training
    step (``"train"``: train mode, forward, ``loss_fn(output)``, backward; no optimizer step).

    ``model`` and ``inputs`` (a tensor, a tuple of them, or a dict of keyword arguments) must be
    on the ``meta`` device: build the model under ``with torch.device("meta"):``.
    """
    torch = _torch()
    if mode not in MODES:
        raise WorkloadError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    tensors = [p for p in model.parameters()] + [t for t in (inputs.values() if isinstance(inputs, dict)
                                                             else inputs if isinstance(inputs, (tuple, list))
                                                             else [inputs]) if isinstance(t, torch.Tensor)]
    off_meta = sorted({str(t.device) for t in tensors if t.device.type != "meta"})
    if off_meta:
        raise WorkloadError(f"trace runs on the meta device; got tensors on {', '.join(off_meta)}: build the "
                            "model under `with torch.device('meta'):` and make the inputs there too")
    if mode == "train" and loss_fn is None:
        raise WorkloadError("mode='train' needs loss_fn(output) -> scalar loss")

    def call():
        if isinstance(inputs, dict):
            return model(**inputs)
        return model(*inputs) if isinstance(inputs, (tuple, list)) else model(inputs)

    rec = Recorder()
    # the records are the step's ops and nothing else: a collection of cyclic garbage during the
    # step would run its finalizers on this thread, under the recorder, and a finalizer's tensor
    # op (a detach) would become a row of the step, at a place that depends on what the process
    # allocated before.  So the garbage is collected before, and the collector waits till after.
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        if mode == "infer":
            model.eval()
            with torch.no_grad(), _FusedDropout(), rec:
                call()
        else:
            model.train()
            with _FusedDropout(), rec:
                loss = loss_fn(call())
                rec.phase = "backward"
                loss.backward()
            for p in model.parameters():
                p.grad = None
    finally:
        if collecting:
            gc.enable()
    return rec.records


def _fused_dropout_mode():
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    class FusedDropout(TorchFunctionMode):
        """The kernels a GPU would run where the meta device would take another path:

        * dropout as the one fused kernel (``native_dropout``: output and mask in one pass,
          ``native_dropout_backward`` in the backward), not the CPU path's ``bernoulli_``,
          ``div_``, ``mul`` (three kernels);
        * ``F.scaled_dot_product_attention`` as the fused kernel a GPU picks: flash attention for
          float16/bfloat16 with no mask and head size <= 256, memory-efficient attention otherwise
          (the meta device would decompose it into the math path's matmuls and softmax)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is F.scaled_dot_product_attention:
                return _fused_sdpa(*args, **kwargs)
            if func in (F.dropout, torch.dropout):
                x = args[0]
                p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
                training = args[2] if len(args) > 2 else kwargs.get("training", True if func is F.dropout else False)
                if not training or p == 0:
                    return x
                return torch.native_dropout(x, float(p), True)[0]
            return func(*args, **kwargs)

    return FusedDropout


def _fused_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    import torch

    if enable_gqa:
        raise WorkloadError("scaled_dot_product_attention with enable_gqa is not traced")
    if attn_mask is None and q.dtype in (torch.float16, torch.bfloat16) and q.shape[-1] <= 256:
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, float(dropout_p), bool(is_causal),
                                                                  False, scale=scale)[0]
    need_lse = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    return torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, attn_mask, need_lse, float(dropout_p),
                                                                  bool(is_causal), scale=scale)[0]


def _FusedDropout():
    return _fused_dropout_mode()()


@dataclass
class Workload:
    """One network's step, traced: its ops and how it was built."""

    network: str
    batch: int
    seq: int | None
    mode: str
    dtype: str
    params: int
    records: list = field(repr=False)
    trace_s: float = 0.0
    attention: str = ""

    @property
    def label(self) -> str:
        s = f" seq {self.seq}" if self.seq else ""
        a = " sdpa" if self.attention == "sdpa" else ""
        return f"{self.network} batch {self.batch}{s} {self.mode} {self.dtype}{a}"

    def table(self) -> pd.DataFrame:
        """One row per aten op (views included) with its class, FLOPs, bytes and Problem."""
        return _records_frame(self.records)

    def predict(self, gpu: str = "h100-sxm", **kw) -> pd.DataFrame:
        return predict(self, gpu, **kw)

    def by_class(self, gpu: str = "h100-sxm", **kw) -> pd.DataFrame:
        return by_class(predict(self, gpu, **kw))

    def matmul_flops(self) -> float:
        """FLOPs of the matmul-like ops (gemm, conv, attention), as published figures count them."""
        return float(sum(r.flops for r in self.records if r.cls in ("gemm", "conv", "attention")))


def characterize(network: str, *, batch: int | None = None, seq: int | None = None, mode: str = "infer",
                 dtype: str = "float32", attention: str = "eager") -> Workload:
    """Trace one of :data:`NETWORKS` (``resnet50``, ``bert-base``, ``gpt2``) on the meta device.

    ``attention`` (transformers only): ``"eager"`` (matmuls, scale, mask, softmax, dropout as
    separate kernels) or ``"sdpa"`` (one fused attention kernel)."""
    torch = _torch()
    spec = resolve(network)
    if mode not in MODES:
        raise WorkloadError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if dtype not in DTYPES:
        raise WorkloadError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    batch = spec.default_batch if batch is None else batch
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise WorkloadError(f"batch must be an int >= 1, got {batch!r}")
    if spec.default_seq is None:
        if seq is not None:
            raise WorkloadError(f"{spec.name} takes 224x224 images, not a sequence length (got seq={seq})")
    else:
        seq = spec.default_seq if seq is None else seq
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= spec.max_seq:
            raise WorkloadError(f"seq must be an int in 1..{spec.max_seq} for {spec.name}, got {seq!r}")
    if attention not in ("eager", "sdpa"):
        raise WorkloadError(f"attention must be eager or sdpa, got {attention!r}")
    if attention != "eager" and spec.kind != "tokens":
        raise WorkloadError(f"{spec.name} has no attention: attention={attention!r} does not apply")
    t0 = time.perf_counter()
    tdt = getattr(torch, dtype)
    with torch.device("meta"):
        model = (spec.build(attention=attention) if spec.kind == "tokens" else spec.build()).to(tdt)
        inp = spec.inputs(batch, seq, device="meta", dtype=tdt)
    records = trace(model, (inp["x"],), mode=mode, loss_fn=lambda out: spec.loss(out, inp["target"]))
    return Workload(spec.name, batch, seq, mode, dtype, count_params(model), records,
                    time.perf_counter() - t0, attention if spec.kind == "tokens" else "")


def published_flops(network: str, *, batch: int, seq: int | None = None) -> dict:
    """Forward FLOPs of a network from its published figures and formulas (matmuls only).

    * ResNet-50 at 224x224: 4.1 GMAC = 8.2 GFLOP per image (He et al. 2016, Table 1: 3.8e9
      "FLOPs" for v1, which counts multiply-adds; torchvision's v1.5 lists 4.09 GFLOPS, also MACs).
    * Transformers (Kaplan et al. 2020, "Scaling laws", Table 1): per token, 2 FLOPs per weight
      of every matmul (``2 * N``) plus the attention matmuls, ``QK^T`` and ``AV``, over the full
      ``S x S`` score matrix that eager attention computes: ``4 * L * S * d``.
      BERT-base: ``N`` = the 12 encoder layers' weights (85.0 M; embeddings are lookups), plus the
      pooler once per sequence.  GPT-2 small: ``N`` = all 124.4 M parameters: the tied token
      embedding is the LM head's matrix (``2 * d * V`` per token) and the 0.8 M position
      embeddings and LayerNorm weights (0.6%) are not matmuls, which the 2% tolerance absorbs.
    """
    spec = resolve(network)
    if spec.name == "resnet50":
        return {"flops": 8.2e9 * batch, "formula": "4.1 GMAC x 2 FLOP/MAC per 224x224 image"}
    L, d = 12, 768
    T = batch * seq
    if spec.name == "bert-base":
        n_layer = 12 * (4 * d * d + 2 * d * 3072)
        return {"flops": 2 * n_layer * T + 4 * L * seq * d * T + 2 * d * d * batch,
                "formula": "2*N_layers*T + 4*L*S*d*T + 2*d^2*B (pooler), N_layers = 12*(4d^2 + 2*d*4d)"}
    return {"flops": 2 * PARAMS["gpt2"] * T + 4 * L * seq * d * T,
            "formula": "2*N*T + 4*L*S*d*T, N = 124,439,808 parameters, T = batch*seq tokens"}


# --- prediction ------------------------------------------------------------------------------
_LADDER_CACHE: dict = {}


def _records_frame(records) -> pd.DataFrame:
    rows = [{"index": r.index, "phase": r.phase, "op": r.op, "class": r.cls, "dtype": r.dtype,
             "shapes": r.shapes(), "flops": r.flops, "flop_source": r.flop_source, "bytes": r.bytes,
             "problem": r.problem_label(), "count": r.problem[2] if r.problem else 0, "note": r.note}
            for r in records]
    return pd.DataFrame(rows, columns=["index", "phase", "op", "class", "dtype", "shapes", "flops", "flop_source",
                                       "bytes", "problem", "count", "note"])


def _peak(spec, cls: str, dtype: str, tf32) -> tuple[float, str]:
    """The compute ceiling an op of this class and dtype can reach, FLOP/s, and its name.

    ``tf32=None`` follows PyTorch's defaults: cuDNN convolutions may use TF32
    (``torch.backends.cudnn.allow_tf32`` is True), matmuls may not
    (``torch.backends.cuda.matmul.allow_tf32`` is False)."""
    if cls in ("gemm", "conv", "attention"):
        half = {"float16": "fp16", "bfloat16": "bf16"}.get(dtype)
        if half and half in spec.tensor_flops:
            return spec.tensor_flops[half], f"tensor {half}"
        use_tf32 = (cls == "conv") if tf32 is None else bool(tf32)
        if dtype == "float32" and use_tf32 and "tf32" in spec.tensor_flops:
            return spec.tensor_flops["tf32"], "tensor tf32"
    return spec.fp32_flops, "fp32"


def _make_problem(problem: tuple):
    import importlib

    import perfkit  # noqa: F401  (chooses GPU or simulator before numba.cuda loads)

    mod, fields, _count = problem
    module = importlib.import_module(f"perfkit.kernels.{mod}")
    return module, module.Problem(**dict(fields))


LADDER_MODES = ("off", "top", "best")


def _estimate_call(estimate, v, prob, gpu):
    """GPU time of one rung by ``perfkit.model.estimate``: its launch sequence less the host's
    launch leg (Numba's launch cost, which a torch step does not pay, and which a stream of
    kernels hides behind the GPU's work)."""
    try:
        e = estimate(v, prob, gpu, banks=False)  # conflict-free shared memory: no simulated run
    except TypeError:
        e = estimate(v, prob, gpu)
    sec = float(e.seconds)
    legs = getattr(e, "legs", None) or {}
    busy = sec - float(legs.get("launch", 0.0) or 0.0)
    return (busy if busy > 0 else sec), str(getattr(e, "bound", ""))


def _ladder_estimate(problem: tuple, gpu: str, which: str = "top"):
    """``(seconds, bound, rung label)`` by ``perfkit.model.estimate`` for the ladder rung that
    stands for the problem, or ``(None, reason)`` when there is none (no ``estimate``, no
    ladder, no rung that takes the problem).  ``which="top"``: the highest rung that takes the
    problem (the ladder's end, one estimate); ``"best"``: the fastest estimate over all rungs
    (one estimate per rung).  Each estimate compiles its rung (seconds each): results are
    cached per (problem, gpu, which) for the life of the process."""
    key = (problem, gpu, which)
    if key in _LADDER_CACHE:
        return _LADDER_CACHE[key]
    from .. import model

    estimate = getattr(model, "estimate", None)
    if estimate is None:
        result = (None, "perfkit.model.estimate is not available")
    else:
        try:
            module, prob = _make_problem(problem)
        except ImportError as exc:
            result = (None, f"no ladder: {exc}")
        except Exception as exc:  # a shape the ladder's Problem refuses
            result = (None, f"{type(exc).__name__}: {exc}")
        else:
            rungs = [v for v in getattr(module, "LADDER", []) if v.rung >= 1]  # rung 0: a vendor library
            best = None
            for v in sorted(rungs, key=lambda v: -v.rung):
                try:
                    v.supports(prob)
                    sec, bound = _estimate_call(estimate, v, prob, gpu)
                except Exception:
                    continue
                if math.isfinite(sec) and sec > 0 and (best is None or sec < best[0]):
                    best = (sec, bound, v.label)
                if best and which == "top":
                    break
            result = best if best else (None, "no rung of the ladder takes this problem")
    _LADDER_CACHE[key] = result
    return result


def predict(workload, gpu: str = "h100-sxm", *, ladders: str | bool = "off", tf32: bool | None = None,
            floor_s: float = KERNEL_FLOOR_S) -> pd.DataFrame:
    """Per-op table with the predicted time of each op on ``gpu`` (a key or alias of
    ``data/devices.yaml``).

    ``roofline_s`` is ``max(flops / peak, bytes / dram_bw, floor_s)`` for every op that launches a
    kernel (peak: the tensor-core rate of the dtype for gemm, conv and attention in float16 and
    bfloat16; for float32, TF32 when ``tf32`` is True, FP32 when False, and PyTorch's defaults when
    None: TF32 for convolutions, FP32 for matmuls; the FP32 rate for every other class).

    ``predicted_s`` is ``roofline_s`` unless ``ladders`` asks for ``perfkit.model.estimate`` of the
    perfkit ladder that stands for an op (single, unbatched problems): ``"top"`` estimates the
    ladder's highest rung that takes the problem, ``"best"`` every rung and keeps the fastest
    (``True`` means ``"best"``).  Each estimate compiles a rung (seconds each, cached per unique
    problem), so the default is ``"off"``: a network in seconds.  ``method`` says which applied.
    """
    from .. import specs

    if ladders is True:
        ladders = "best"
    elif ladders is False or ladders is None:
        ladders = "off"
    if ladders not in LADDER_MODES:
        raise WorkloadError(f"ladders must be one of {', '.join(LADDER_MODES)}, got {ladders!r}")
    records = workload.records if isinstance(workload, Workload) else workload
    spec = specs.get(gpu)
    df = _records_frame(records)
    roof, bound, method, pred = [], [], [], []
    memo: dict = {}
    for r in records:
        if r.cls == "view":
            roof.append(0.0), bound.append(""), method.append("no kernel"), pred.append(0.0)
            continue
        k = r.key
        if k not in memo:
            peak, peak_name = _peak(spec, r.cls, r.dtype, tf32)
            legs = {peak_name: r.flops / peak, "dram": r.bytes / spec.dram_bw, "floor": floor_s}
            b = max(legs, key=legs.get)
            t_roof = legs[b]
            t, m, bnd = t_roof, "roofline", b
            if ladders != "off" and r.problem and r.problem[2] == 1:
                est = _ladder_estimate(r.problem, spec.key, ladders)
                if est[0] is not None:
                    t, bnd, m = est[0], est[1], f"estimate {est[2]}"
            memo[k] = (t_roof, bnd, m, t)
        t_roof, bnd, m, t = memo[k]
        roof.append(t_roof), bound.append(bnd), method.append(m), pred.append(t)
    df["roofline_s"], df["predicted_s"], df["bound"], df["method"] = roof, pred, bound, method
    df.attrs.update(gpu=spec.key, label=getattr(workload, "label", ""))
    return df


def amdahl(share: float, factor: float = 2.0) -> float:
    """Step speedup when a part with ``share`` of the time becomes ``factor`` times faster."""
    return 1.0 / (1.0 - share + share / factor)


def by_class(ops: pd.DataFrame) -> pd.DataFrame:
    """Per op class: kernels, GFLOP, GB, predicted ms and share of the step, FLOP share, and the
    Amdahl view (the step's speedup if that class's kernels were 2x faster)."""
    k = ops[ops["class"] != "view"]
    g = k.groupby("class", sort=False).agg(ops=("op", "size"), flops=("flops", "sum"), bytes=("bytes", "sum"),
                                           s=("predicted_s", "sum"))
    g = g.reindex([c for c in CLASSES if c in g.index])
    total_s, total_f = g["s"].sum(), g["flops"].sum()
    out = pd.DataFrame({
        "class": g.index, "ops": g["ops"].values, "GFLOP": g["flops"].values / 1e9, "GB": g["bytes"].values / 1e9,
        "predicted_ms": g["s"].values * 1e3,
        "share": g["s"].values / total_s if total_s else 0.0,
        "flop_share": g["flops"].values / total_f if total_f else 0.0,
    })
    out["step_speedup_2x"] = [amdahl(s) for s in out["share"]]
    out["notebook"] = [TEACHES.get(c, "") for c in out["class"]]
    out.attrs.update(ops.attrs)
    return out.reset_index(drop=True)


def compare_devices(workload: Workload, gpus=None, **kw) -> pd.DataFrame:
    """Predicted ms per class on each device (what-if): rows classes, one column per GPU."""
    from .. import specs

    gpus = list(gpus) if gpus else specs.names()
    cols = {}
    for g in gpus:
        t = by_class(predict(workload, g, **kw)).set_index("class")["predicted_ms"]
        cols[g] = t
    df = pd.DataFrame(cols)
    df.loc["total"] = df.sum()
    return df


def format_table(table: pd.DataFrame) -> str:
    """The per-class table as fixed-width text (what the CLI prints, notebook 05 shows), with its
    total row: a dash where a row has no number (the total has no Amdahl speed-up of its own)."""
    t = table[["class", "ops", "GFLOP", "GB", "predicted_ms", "share", "flop_share", "step_speedup_2x"]].copy()
    total = pd.DataFrame([{"class": "total", "ops": t["ops"].sum(), "GFLOP": t["GFLOP"].sum(), "GB": t["GB"].sum(),
                           "predicted_ms": t["predicted_ms"].sum(), "share": t["share"].sum(),
                           "flop_share": t["flop_share"].sum(), "step_speedup_2x": float("nan")}])
    t = pd.concat([t, total], ignore_index=True)
    # as text before to_string: a formatter is never given NaN (pandas prints its na_rep instead)
    t["step_speedup_2x"] = [f"{v:.3f}x" if v == v else "—" for v in t["step_speedup_2x"].astype(float)]
    return t.to_string(index=False, formatters={
        "GFLOP": "{:.2f}".format, "GB": "{:.3f}".format, "predicted_ms": "{:.3f}".format,
        "share": "{:.1%}".format, "flop_share": "{:.2%}".format})
