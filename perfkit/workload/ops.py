"""Trace every aten op of a PyTorch step on the meta device, and describe each one.

A :class:`Recorder` (a ``TorchDispatchMode``) sees each aten op after autograd has turned the
Python code into kernels-to-be, forward and backward alike.  For each op it keeps only metadata
(no tensor is held, so autograd still steals gradients as it does in a real step):

* ``flops``: ``torch.utils.flop_counter``'s count where it has a formula (matmuls, convolutions,
  attention); perfkit's own count where it leaves an op at zero (see :data:`FLOPS_PER_ELEMENT`);
* ``bytes``: the minimal DRAM traffic, every distinct input element read once and every output
  element written once (an expanded operand counts its distinct elements only; views,
  allocations and other metadata ops move nothing);
* ``cls``: gemm, conv, attention, normalization, softmax, elementwise, reduction,
  data movement, or ``view`` (no kernel: views, allocations, detach);
* ``problem``: the perfkit ladder Problem that stands for the op, where one exists, as
  ``(module, fields, count)``: ``count`` problems (a batched matmul is ``count`` GEMMs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["OpRecord", "Recorder", "CLASSES", "classify", "FLOPS_PER_ELEMENT"]

#: op classes, in the order tables list them; ``view`` ops launch no kernel
CLASSES = ("gemm", "conv", "attention", "normalization", "softmax", "elementwise", "reduction",
           "data movement", "view")

_GEMM = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "_scaled_mm", "addmv", "mv", "dot", "_int_mm",
         "matmul", "linear"}
_CONV = {"convolution", "convolution_backward", "_convolution", "cudnn_convolution",
         "cudnn_convolution_transpose", "conv2d", "conv1d", "conv3d", "_slow_conv2d_forward",
         "_slow_conv2d_backward", "mkldnn_convolution", "thnn_conv2d"}
_NORM = {"native_layer_norm", "native_layer_norm_backward", "native_batch_norm", "native_batch_norm_backward",
         "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
         "_native_batch_norm_legit_no_training", "cudnn_batch_norm", "cudnn_batch_norm_backward",
         "miopen_batch_norm", "batch_norm_backward", "_batch_norm_with_update", "_batch_norm_no_update",
         "native_group_norm", "native_group_norm_backward", "_fused_rms_norm", "_fused_rms_norm_backward"}
_SOFTMAX = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data", "_safe_softmax"}
_DATA = {"clone", "copy_", "_to_copy", "copy", "cat", "stack", "index", "_unsafe_index", "index_select", "gather",
         "scatter", "scatter_add", "scatter_reduce", "index_put", "index_put_", "_index_put_impl_", "index_add",
         "index_add_", "index_copy", "embedding", "embedding_dense_backward", "constant_pad_nd", "repeat",
         "flip", "roll", "masked_scatter", "narrow_copy", "slice_backward", "select_backward",
         "slice_scatter", "select_scatter", "as_strided_scatter", "diagonal_backward", "contiguous",
         "tril", "triu", "masked_select", "nonzero", "unfold_backward", "im2col", "col2im",
         "_unsafe_view_copy", "permute_copy", "transpose_copy", "expand_copy", "view_copy"}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "var_mean",
              "std_mean", "prod", "norm", "linalg_vector_norm", "logsumexp", "cumsum", "cumprod", "topk", "sort",
              "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
              "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "adaptive_max_pool2d", "nll_loss_forward",
              "nll_loss2d_forward", "count_nonzero", "any", "all"}
_ALLOC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "alias",
          "lift_fresh", "_local_scalar_dense", "_unsafe_view", "resize_", "set_", "sym_size", "sym_stride",
          "sym_numel", "sym_storage_offset", "_reshape_alias", "view", "split", "split_with_sizes", "unbind",
          "chunk", "_to_dense"}
_WRITE_ONLY = {"fill_", "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros",
               "new_ones", "new_full", "scalar_tensor", "arange", "randn", "rand", "randint", "normal_",
               "uniform_", "bernoulli_", "random_", "linspace", "eye"}
_GATHER = {"embedding", "index_select", "gather", "index", "_unsafe_index"}

#: perfkit's own FLOP counts for the ops flop_counter leaves at zero, per element of the op's
#: largest tensor (normalization and softmax match the norm ladders' Problems; elementwise ops
#: count one FLOP per output element, a transcendental included; reductions one per input element)
FLOPS_PER_ELEMENT = {
    "native_layer_norm": 8, "native_layer_norm_backward": 16, "native_batch_norm": 8,
    "_native_batch_norm_legit": 8, "_native_batch_norm_legit_functional": 8, "cudnn_batch_norm": 8,
    "_native_batch_norm_legit_no_training": 2, "native_batch_norm_backward": 10, "cudnn_batch_norm_backward": 10,
    "batch_norm_backward": 10, "native_group_norm": 8, "native_group_norm_backward": 16, "_fused_rms_norm": 4,
    "_fused_rms_norm_backward": 8, "_softmax": 5, "_log_softmax": 5, "_safe_softmax": 5,
    "_softmax_backward_data": 4, "_log_softmax_backward_data": 3,
}


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple
    stride: tuple
    dtype: str
    itemsize: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def distinct(self) -> int:
        """Elements the tensor addresses: an expanded (stride 0) dimension holds one."""
        if any(s == 0 for s in self.shape):
            return 0
        return math.prod(n for n, st in zip(self.shape, self.stride) if st != 0)

    @property
    def nbytes(self) -> int:
        return self.distinct * self.itemsize

    def channels_last(self) -> bool:
        if len(self.shape) != 4:
            return False
        n, c, h, w = self.shape
        return c > 1 and self.stride[1] == 1 and self.stride[3] == c and (h * w > 1)


def _info(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()),
                      str(t.dtype).replace("torch.", ""), t.element_size())


@dataclass
class OpRecord:
    index: int
    op: str                 # "aten.mm"
    overload: str           # "aten.mm.default"
    phase: str              # "forward" or "backward"
    cls: str
    inputs: tuple           # TensorInfo of each tensor argument
    outputs: tuple
    flops: float
    flop_source: str        # "flop_counter", "perfkit" or "none"
    bytes: float
    problem: tuple | None = None   # (module, ((field, value), ...), count)
    note: str = ""

    @property
    def dtype(self) -> str:
        src = self.inputs or self.outputs
        floats = [t.dtype for t in src if t.dtype.startswith(("float", "bfloat"))]
        return floats[0] if floats else (src[0].dtype if src else "")

    @property
    def key(self) -> tuple:
        """What decides this op's cost: ops with the same key cost the same."""
        return (self.overload, self.cls, self.dtype, self.flops, self.bytes, self.problem,
                tuple(t.shape for t in self.inputs))

    def shapes(self) -> str:
        return " ".join("x".join(map(str, t.shape)) or "()" for t in self.inputs)

    def problem_label(self) -> str:
        if not self.problem:
            return ""
        mod, fields, count = self.problem
        body = ", ".join(f"{k}={v!r}" for k, v in fields)
        return f"{mod}.Problem({body})" + (f" x{count}" if count > 1 else "")


def classify(name: str, in_elems: int = 0, out_elems: int = 0, aliases: bool = False) -> str:
    """The class of an aten op by its name (``"mm"``, ``"native_layer_norm"``...).  Unknown ops
    are elementwise when their output is at least as large as their largest input, else a
    reduction."""
    if name in _ALLOC or aliases:
        return "view"
    if name in _GEMM:
        return "gemm"
    if name in _CONV:
        return "conv"
    if any(s in name for s in ("scaled_dot_product", "flash_attention", "efficient_attention",
                               "cudnn_attention", "flex_attention")):
        return "attention"
    if name in _NORM:
        return "normalization"
    if name in _SOFTMAX:
        return "softmax"
    if name in _DATA:
        return "data movement"
    if name in _REDUCTION:
        return "reduction"
    if name in _WRITE_ONLY:
        return "elementwise"
    return "elementwise" if out_elems >= in_elems else "reduction"


def _ladder_dtype(dtype: str) -> tuple[str | None, str]:
    if dtype in ("float32", "float16"):
        return dtype, ""
    if dtype == "bfloat16":
        return "float16", "bfloat16 stands as float16 in the ladder (same bytes; NumPy has no bfloat16)"
    return None, ""


def _problem(name: str, args, tin: list, tout: list):
    """(module, fields, count) of the perfkit Problem that stands for this op, or None."""
    def fields(**kw):
        return tuple(kw.items())

    try:
        if name in ("mm", "addmm", "bmm", "baddbmm"):
            a, b = (args[0], args[1]) if name in ("mm", "bmm") else (args[1], args[2])
            dt, note = _ladder_dtype(str(a.dtype).replace("torch.", ""))
            if dt is None:
                return None, ""
            if a.dim() == 2:
                (m, k), n = a.shape, b.shape[1]
                return ("gemm", fields(m=int(m), n=int(n), k=int(k), dtype=dt), 1), note
            bt, m, k = a.shape
            return ("gemm", fields(m=int(m), n=int(b.shape[2]), k=int(k), dtype=dt), int(bt)), \
                (note + "; " if note else "") + "batched: one GEMM problem per matrix"
        if name == "convolution":
            x, w = args[0], args[1]
            stride, pad, dil, transposed, groups = args[3], args[4], args[5], args[6], args[8]
            dt, note = _ladder_dtype(str(x.dtype).replace("torch.", ""))
            if (dt is None or x.dim() != 4 or transposed or groups != 1 or any(d != 1 for d in dil)
                    or len(set(stride)) != 1 or len(set(pad)) != 1):
                return None, ""
            n, c, h, wd = (int(s) for s in x.shape)
            k, _, r, s = (int(v) for v in w.shape)
            layout = "NHWC" if _info(x).channels_last() else "NCHW"
            return ("conv", fields(n=n, c=c, h=h, w=wd, k=k, r=r, s=s, stride=int(stride[0]), pad=int(pad[0]),
                                   dtype=dt, layout=layout), 1), note
        if name == "_softmax":
            x, dim = args[0], args[1]
            dt, note = _ladder_dtype(str(x.dtype).replace("torch.", ""))
            if dt is None or x.dim() < 1 or dim % x.dim() != x.dim() - 1:
                return None, ""
            cols = int(x.shape[-1])
            return ("norm.softmax", fields(rows=x.numel() // cols, cols=cols, dtype=dt), 1), note
        if name in ("native_layer_norm", "native_layer_norm_backward", "_fused_rms_norm"):
            x = args[0] if name != "native_layer_norm_backward" else args[1]
            normalized = args[1] if name != "native_layer_norm_backward" else args[2]
            dt, note = _ladder_dtype(str(x.dtype).replace("torch.", ""))
            if dt is None or len(normalized) != 1:
                return None, ""
            cols = int(normalized[0])
            rows = x.numel() // cols
            if name == "native_layer_norm":
                if args[2] is None or args[3] is None:
                    return None, ""
                return ("norm.layernorm", fields(rows=rows, cols=cols, dtype=dt, eps=float(args[4])), 1), note
            if name == "_fused_rms_norm":
                eps = args[3] if len(args) > 3 and args[3] is not None else 1e-6
                return ("norm.rmsnorm", fields(rows=rows, cols=cols, dtype=dt, eps=float(eps)), 1), note
            return ("norm.layernorm_bwd", fields(rows=rows, cols=cols, dtype=dt), 1), note
        if name in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
                    "cudnn_batch_norm"):
            x, weight, training = args[0], args[1], args[5]
            dt, note = _ladder_dtype(str(x.dtype).replace("torch.", ""))
            if dt is None or x.dim() != 4 or not training or weight is None:
                return None, ""
            n, c, h, w = (int(s) for s in x.shape)
            if n * h * w < 2:
                return None, ""
            layout = "NHWC" if _info(x).channels_last() else "NCHW"
            return ("norm.batchnorm", fields(n=n, c=c, h=h, w=w, dtype=dt, layout=layout,
                                             eps=float(args[7]), momentum=float(args[6])), 1), note
    except (IndexError, TypeError, AttributeError, ValueError):
        return None, ""
    return None, ""


def _flop_counter_registry():
    try:
        from torch.utils.flop_counter import flop_registry
    except ImportError:  # pragma: no cover - very old torch
        return {}
    return flop_registry


class Recorder(TorchDispatchMode):
    """Records an :class:`OpRecord` for every aten op run under it.  Set ``phase`` to say
    whether ops belong to the forward or the backward pass."""

    def __init__(self):
        super().__init__()
        self.records: list[OpRecord] = []
        self.phase = "forward"
        self._flops = _flop_counter_registry()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self.records.append(self._describe(func, args, kwargs, out))
        except Exception as exc:  # a description must never break the traced step
            self.records.append(OpRecord(len(self.records), f"aten.{func._overloadpacket.__name__}", str(func),
                                         self.phase, "elementwise", (), (), 0.0, "none", 0.0,
                                         note=f"not described: {type(exc).__name__}: {exc}"))
        return out

    def _describe(self, func, args, kwargs, out) -> OpRecord:
        packet = func._overloadpacket
        name = packet.__name__
        ins = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        mutable = func._schema.is_mutable
        aliases = bool(outs) and not mutable and all(
            any(_alias(o, i) for i in ins) for o in outs)
        # distinct inputs (the same tensor passed twice is read once)
        seen, uniq = set(), []
        for t in ins:
            if id(t) not in seen:
                seen.add(id(t))
                uniq.append(t)
        tin = [_info(t) for t in uniq]
        tout = [_info(t) for t in outs]
        in_elems = max((t.distinct for t in tin), default=0)
        out_elems = max((t.numel for t in tout), default=0)
        cls = classify(name, in_elems, out_elems, aliases)

        # bytes: inputs once, outputs once
        if cls == "view":
            nbytes = 0.0
        elif name in _WRITE_ONLY or name in ("fill_", "zero_"):
            nbytes = float(sum(t.nbytes for t in tout))
        elif name == "copy_":  # dst is written, not read
            nbytes = float(_info(args[1]).nbytes + _info(args[0]).nbytes) if len(args) > 1 and \
                isinstance(args[1], torch.Tensor) else float(sum(t.nbytes for t in tout))
        elif name in _GATHER:  # rows gathered: index read, rows read, output written
            idx = sum(t.nbytes for t in tin if not t.dtype.startswith(("float", "bfloat")))
            nbytes = float(idx + 2 * sum(t.nbytes for t in tout))
        else:
            nbytes = float(sum(t.nbytes for t in tin) + sum(t.nbytes for t in tout))

        # FLOPs
        flops, source = 0.0, "none"
        if packet in self._flops and cls != "view":
            try:
                flops, source = float(self._flops[packet](*args, **kwargs, out_val=out)), "flop_counter"
            except Exception:
                flops, source = 0.0, "none"
        if source == "none" and cls not in ("view", "data movement"):
            biggest = max(in_elems, out_elems)
            if name in FLOPS_PER_ELEMENT:
                flops, source = float(FLOPS_PER_ELEMENT[name] * biggest), "perfkit"
            elif cls == "elementwise" and name not in _WRITE_ONLY:
                flops, source = float(out_elems), "perfkit"
            elif cls == "reduction":
                flops, source = float(in_elems), "perfkit"

        problem, note = _problem(name, args, tin, tout) if cls != "view" else (None, "")
        return OpRecord(len(self.records), f"aten.{name}", str(func), self.phase, cls, tuple(tin), tuple(tout),
                        flops, source, nbytes, problem, note)


def _alias(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage()._cdata == b.untyped_storage()._cdata
    except Exception:
        return False
