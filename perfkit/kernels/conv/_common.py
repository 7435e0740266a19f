"""What every convolution rung shares: the Problem (shapes, layouts, reference, tolerance), the
implicit GEMM's views, the launch check, the traffic record, and the cuDNN call through PyTorch
that the oracle and the torch peer both make (:mod:`perfkit.kernels.conv`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import cuda

from ... import backend
from ..base import Problem, ProblemError, Traffic, UnsupportedProblem, Variant, check_launch_shape

__all__ = ["Problem", "LAYOUTS", "to_layout", "torch_nchw", "torch_conv"]

Base = Problem
LAYOUTS = ("NCHW", "NHWC")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclass(frozen=True)
class Problem(Base):
    """``y = conv2d(x, w, stride, pad)``; x (n, c, h, w) or (n, h, w, c), w (k, c, r, s) or
    (k, r, s, c), y (n, k, p, q) or (n, p, q, k) with p = (h + 2 pad - r) // stride + 1."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int = 1
    pad: int = 0
    dtype: str = "float32"
    layout: str = "NCHW"

    op: ClassVar[str] = "conv"
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float16")

    def validate(self) -> None:
        for name in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad"):
            v = getattr(self, name)
            if not _is_int(v):
                raise ProblemError(f"conv: {name} must be an int, got {v!r} ({type(v).__name__})")
        for name in ("n", "c", "h", "w", "k", "r", "s"):
            if getattr(self, name) < 1:
                raise ProblemError(f"conv: {name} must be >= 1, got {getattr(self, name)}")
        if self.stride < 1:
            raise ProblemError(f"conv: stride must be >= 1, got {self.stride}")
        if self.pad < 0:
            raise ProblemError(f"conv: pad must be >= 0, got {self.pad}")
        if self.layout not in LAYOUTS:
            raise ProblemError(f"conv: layout must be 'NCHW' or 'NHWC', got {self.layout!r}")
        if self.r > self.h + 2 * self.pad:
            raise ProblemError(f"conv: filter height r={self.r} is larger than the padded input height "
                               f"h + 2*pad = {self.h + 2 * self.pad}")
        if self.s > self.w + 2 * self.pad:
            raise ProblemError(f"conv: filter width s={self.s} is larger than the padded input width "
                               f"w + 2*pad = {self.w + 2 * self.pad}")

    # --- shapes ---------------------------------------------------------------------------
    @property
    def p(self) -> int:
        return (self.h + 2 * self.pad - self.r) // self.stride + 1

    @property
    def q(self) -> int:
        return (self.w + 2 * self.pad - self.s) // self.stride + 1

    @property
    def nhwc(self) -> bool:
        return self.layout == "NHWC"

    @property
    def gemm_mnk(self) -> tuple[int, int, int]:
        """The implicit GEMM's (M, N, K) = (N*P*Q, K, C*R*S)."""
        return self.n * self.p * self.q, self.k, self.c * self.r * self.s

    @property
    def out_dtype(self) -> str:
        return self.dtype  # float32 -> float32; float16 -> float16 (float32 accumulation), as cuDNN

    def x_shape(self):
        return (self.n, self.h, self.w, self.c) if self.nhwc else (self.n, self.c, self.h, self.w)

    def w_shape(self):
        return (self.k, self.r, self.s, self.c) if self.nhwc else (self.k, self.c, self.r, self.s)

    def y_shape(self):
        return (self.n, self.p, self.q, self.k) if self.nhwc else (self.n, self.k, self.p, self.q)

    def input_specs(self):
        return {"x": (self.x_shape(), self.dtype), "w": (self.w_shape(), self.dtype)}

    def output_specs(self):
        return {"y": (self.y_shape(), self.out_dtype)}

    def check_inputs(self, inputs):
        # name the mismatch the shape check would only show as numbers: the channel counts
        if isinstance(inputs, dict) and all(isinstance(inputs.get(k), np.ndarray) for k in ("x", "w")):
            xs, ws = inputs["x"].shape, inputs["w"].shape
            if len(xs) == 4 and len(ws) == 4:
                xc, wc = (xs[3], ws[3]) if self.nhwc else (xs[1], ws[1])
                if xc != wc:
                    raise ProblemError(f"conv: channels do not match: x has c={xc} and w has c={wc} "
                                       f"({self.layout}); the problem says c={self.c}")
        super().check_inputs(inputs)

    def _make(self, g):
        return {"x": g.uniform(-1, 1, self.x_shape()).astype(self.dtype),
                "w": g.uniform(-1, 1, self.w_shape()).astype(self.dtype)}

    def _reference(self, inputs):
        """float64 NumPy: pad, then one tensordot per filter tap over the channels."""
        x = inputs["x"].astype(np.float64)
        w = inputs["w"].astype(np.float64)
        if self.nhwc:  # canonical NCHW / KCRS for the arithmetic, back to NHWC at the end
            x = x.transpose(0, 3, 1, 2)
            w = w.transpose(0, 3, 1, 2)
        pd, st = self.pad, self.stride
        xp = np.zeros((self.n, self.c, self.h + 2 * pd, self.w + 2 * pd))
        xp[:, :, pd:pd + self.h, pd:pd + self.w] = x
        y = np.zeros((self.n, self.k, self.p, self.q))
        for i in range(self.r):
            for j in range(self.s):
                patch = xp[:, :, i:i + st * (self.p - 1) + 1:st, j:j + st * (self.q - 1) + 1:st]  # n c p q
                y += np.einsum("ncpq,kc->nkpq", patch, w[:, :, i, j], optimize=True)
        return np.ascontiguousarray(y.transpose(0, 2, 3, 1)) if self.nhwc else y

    def tolerance(self) -> tuple[float, float]:
        # as GEMM (perfkit.kernels.gemm.Problem.tolerance) with the reduction length c*r*s; a
        # float16 output adds its own rounding (2**-11 relative, values O(sqrt(c*r*s)))
        kred = self.c * self.r * self.s
        tol = 1e-5 * math.sqrt(kred) + 1e-5
        if self.out_dtype == "float16":
            return 2e-3 + tol, 2e-3 + tol + 1e-7 * kred
        return tol, tol + 1e-7 * kred

    @property
    def flops(self) -> float:
        return 2.0 * self.n * self.k * self.p * self.q * self.c * self.r * self.s

    @property
    def elem(self) -> int:
        return np.dtype(self.dtype).itemsize


def to_layout(p: Problem, layout: str | None = None, dtype: str | None = None) -> Problem:
    """The same convolution in another layout and/or dtype."""
    return Problem(p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.stride, p.pad, dtype or p.dtype, layout or p.layout)


def _view2d(arr, rows: int, cols: int):
    """A C-contiguous array as (rows, cols) without a copy.  The host stand-ins the anatomy
    compiler passes hold one element: they become (1, 1), same dtype and rank as the real view."""
    return arr.reshape((1, 1)) if arr.size == 1 else arr.reshape((rows, cols))


def _dims(p: Problem):
    return p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.p, p.q, p.stride, p.pad


def _check(v: Variant, p: Problem, grid, block, shared: int = 0) -> None:
    check_launch_shape(f"{v.label} {v.config}", grid, block, shared, p.label)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _jit(**opts):
    """cuda.jit with target options (launch_bounds, forceinline) the simulator does not take (as
    GEMM's _common._jit: a shared home would re-key every GEMM record's code)."""
    if backend.is_simulator():
        return cuda.jit(device=opts.get("device", False))
    return cuda.jit(**opts)


def _traffic(p: Problem, l2: float, smem: float | None, limiter: str, notes: str, dram: float | None = None,
             **extra) -> Traffic:
    return Traffic(flops=p.flops, dram_bytes=p.bytes if dram is None else dram, l2_bytes=max(l2, p.bytes),
                   smem_bytes=smem, limiter=limiter, notes=notes,
                   extra={k: v for k, v in extra.items() if v is not None})


def torch_nchw(t, nhwc: bool):
    """A torch tensor in our layout as the logical NCHW tensor torch wants (channels_last view
    over the same memory for NHWC; weights (k, r, s, c) likewise)."""
    return t.permute(0, 3, 1, 2) if nhwc else t


def _host_conv(problem: Problem, x: dict) -> np.ndarray:
    """float32 convolution on the CPU: torch when installed, else NumPy (float32 taps)."""
    xs, ws = x["x"].astype(np.float32), x["w"].astype(np.float32)
    if problem.nhwc:
        xs, ws = xs.transpose(0, 3, 1, 2), ws.transpose(0, 3, 1, 2)
    try:
        import torch

        y = torch.nn.functional.conv2d(torch.from_numpy(np.ascontiguousarray(xs)),
                                       torch.from_numpy(np.ascontiguousarray(ws)),
                                       stride=problem.stride, padding=problem.pad).numpy()
    except ImportError:
        pd, st = problem.pad, problem.stride
        xp = np.pad(xs, ((0, 0), (0, 0), (pd, pd), (pd, pd)))
        y = np.zeros((problem.n, problem.k, problem.p, problem.q), np.float32)
        for i in range(problem.r):
            for j in range(problem.s):
                patch = xp[:, :, i:i + st * (problem.p - 1) + 1:st, j:j + st * (problem.q - 1) + 1:st]
                y += np.einsum("ncpq,kc->nkpq", patch, ws[:, :, i, j])
    if problem.nhwc:
        y = y.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(y).astype(problem.out_dtype)


def torch_conv(problem: Problem, x: dict, benchmark: bool):
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedProblem("conv oracle: torch has no CUDA device here")
    xt = torch_nchw(torch.from_dlpack(x["x"]), problem.nhwc)
    wt = torch_nchw(torch.from_dlpack(x["w"]), problem.nhwc)
    flags = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.allow_tf32 = False  # IEEE float32 products, as our SIMT rungs
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = benchmark
    try:
        y = torch.nn.functional.conv2d(xt, wt, stride=problem.stride, padding=problem.pad)
    finally:
        (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,
         torch.backends.cudnn.benchmark) = flags
    return {"y": y.permute(0, 2, 3, 1) if problem.nhwc else y}  # torch's buffer: no copy of ours is timed

