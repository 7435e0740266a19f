"""2-D forward convolution, ``y = conv2d(x, w)``: cross-correlation as in cuDNN and PyTorch, no
bias, groups 1, zero padding on all sides, NCHW or NHWC.

Convolution is where a GEMM ladder meets data layout.  Seen as a GEMM (the *implicit GEMM* view
that cuDNN and CUTLASS use for most forward convolutions)::

    GEMM M = N * P * Q   (one row per output pixel)
    GEMM N = K           (one column per output channel)
    GEMM K = C * R * S   (the reduction: every input channel under every filter tap)

with A[m, j] = x at the pixel of row m shifted by the tap of j (zero in the padding) and
B[j, n] = w[n, j], w flattened over its trailing dims ((c, r, s) for NCHW, (r, s, c) for NHWC).

Ledger (the rung number and name live only in ``LADDER``):

  0 oracle          cuDNN through torch.nn.functional.conv2d (TF32 off); torch on the CPU (or
                    NumPy) in float32 in the simulator
  1 direct          one thread per output element, loops over (c, r, s) reading x and w from memory
  2 direct_halo     a block stages its input tile and halo (and KB filters) in shared memory
  3 im2col_gemm     explicit im2col buffer (N*P*Q x C*R*S) then the GEMM ladder's best SIMT rung
  4 igemm_naive     implicit GEMM, one thread per (pixel, channel), gathering A on the fly
  5 igemm_smem      implicit GEMM with 16x16 tiles of A (gathered) and B staged in shared memory
  6 igemm_regblock  8x4 register blocking, 128x64 block tile, 16-byte loads of NHWC x and of w
  7 winograd        F(2x2, 3x3) for 3x3 stride-1 layers: 16 multiplies per 2x2 tile instead of 36
  8 tensor_core     float16 implicit GEMM on mma.sync.m16n8k16 (float32 accumulation)

Every rung is correct for every valid problem (partial tiles read zeros, stores outside y are
skipped); what a rung cannot take it refuses in ``supports`` with the reason.  SIMT rungs take
float32 or float16 inputs (float32 accumulation); the tensor-core rung takes float16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32, int64
from numba.types import float16

from .. import backend
from ._vector import load4
from .base import Peer, Traffic
from .base import (Launch, OracleVariant, Problem, ProblemError, TunableVariant, UnsupportedProblem,
                   Variant, check_launch_shape, registry_check)

from ._ptx import frag_a, frag_b, frag_c, mma_16816  # the tensor-core intrinsic and its simulator twin

__all__ = ["Problem", "LADDER", "EXAMPLE_PROBLEM", "GPU_SWEEP", "SIM_SWEEP", "RESNET50", "resnet50_layers",
           "Oracle", "Direct", "DirectHalo", "Im2colGemm", "IgemmNaive", "IgemmSmem", "IgemmRegblock",
           "Winograd", "TensorCore", "TorchConv", "TritonConv", "PEERS", "to_layout"]

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


def _traffic(p: Problem, l2: float, smem: float | None, limiter: str, notes: str, dram: float | None = None,
             **extra) -> Traffic:
    return Traffic(flops=p.flops, dram_bytes=p.bytes if dram is None else dram, l2_bytes=max(l2, p.bytes),
                   smem_bytes=smem, limiter=limiter, notes=notes,
                   extra={k: v for k, v in extra.items() if v is not None})


# --- rung 0 ----------------------------------------------------------------------------------
def _torch_nchw(t, nhwc: bool):
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


def _torch_conv(problem: Problem, x: dict, benchmark: bool):
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedProblem("conv oracle: torch has no CUDA device here")
    xt = _torch_nchw(torch.from_dlpack(x["x"]), problem.nhwc)
    wt = _torch_nchw(torch.from_dlpack(x["w"]), problem.nhwc)
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


@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = (
        "cuDNN through torch.nn.functional.conv2d with TF32 off (torch.backends.cudnn.allow_tf32 and "
        "matmul TF32 False) and cudnn.benchmark off, so cuDNN's heuristics pick the algorithm (implicit "
        "GEMM, FFT, Winograd...). NHWC tensors go in as channels_last views over the same memory. "
        "float16 inputs give a float16 output (float32 accumulation). In the simulator: torch on the "
        "CPU in float32 (NumPy without torch).")

    def supports(self, problem):
        if not backend.is_simulator():  # on a GPU, cuDNN comes through PyTorch only
            try:
                import torch

                ok = torch.cuda.is_available()
            except ImportError:
                ok = False
            if not ok:
                raise UnsupportedProblem(f"{self.label}: needs PyTorch with CUDA (cuDNN) on a GPU; "
                                         "this PyTorch has no CUDA device")

    def prepare(self, problem, inputs):
        self.supports(problem)
        return super().prepare(problem, inputs)

    def gpu(self, problem, x, out):
        return _torch_conv(problem, x, benchmark=False)

    def host(self, problem, x):
        return _host_conv(problem, x)

    def traffic(self, problem):
        return _traffic(problem, problem.bytes, None, "compute",
                        "cuDNN: its own algorithm choice; the model assumes each tensor crosses DRAM once",
                        peak="tensor.fp16" if problem.dtype == "float16" else None)


# --- rung 1: direct ----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _direct_kernel(NHWC: bool):
    @cuda.jit
    def conv_direct(x, w, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        i = cuda.grid(1)  # consecutive threads: consecutive elements of y in memory
        if i >= N * K * P * Q:
            return
        if NHWC:
            k = i % K
            t = i // K
            q = t % Q
            t = t // Q
            p = t % P
            b = t // P
        else:
            q = i % Q
            t = i // Q
            p = t % P
            t = t // P
            k = t % K
            b = t // K
        acc = float32(0)
        for r in range(R):
            ih = p * stride - pad + r
            if ih >= 0 and ih < H:
                for s in range(S):
                    iw = q * stride - pad + s
                    if iw >= 0 and iw < W:
                        for c in range(C):
                            if NHWC:
                                acc += float32(x[b, ih, iw, c]) * float32(w[k, r, s, c])
                            else:
                                acc += float32(x[b, c, ih, iw]) * float32(w[k, c, r, s])
        if NHWC:
            y[b, p, q, k] = acc
        else:
            y[b, k, p, q] = acc

    return conv_direct


@dataclass(frozen=True)
class Direct(TunableVariant):
    block: int = 256

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "direct"
    what: ClassVar[str] = (
        "The definition as a kernel: one thread per output element (in y's memory order, so stores "
        "coalesce), looping over the filter taps and input channels and reading x and w straight "
        "from global memory. Padding is a bounds test, not a padded copy. Every x value is loaded "
        "by every output that sees it (up to K*R*S times) and only L1/L2 catch the reuse.")

    def grid(self, p):
        return _ceil(p.n * p.k * p.p * p.q, self.block)

    def supports(self, problem):
        _check(self, problem, self.grid(problem), self.block)

    def plan(self, problem, bufs):
        return [Launch(_direct_kernel(problem.nhwc), self.grid(problem), self.block,
                       (bufs["x"], bufs["w"], bufs["y"], problem.n, problem.c, problem.h, problem.w, problem.k,
                        problem.r, problem.s, problem.p, problem.q, problem.stride, problem.pad))]

    def traffic(self, p):
        e = p.elem
        taps = p.n * p.k * p.p * p.q * p.c * p.r * p.s  # loads of x and of w, one each per FMA
        if p.nhwc:  # a warp = 32 output channels of one pixel: x broadcast, w 32 rows apart (a sector each)
            l2 = taps / 32 * (e + 32 * 32) / 8  # L1 keeps ~1/8 of the w sectors it fetched
            note = "NHWC: warp-wide w loads touch 32 sectors (strided by r*s*c); x is a broadcast"
        else:  # a warp = 32 neighbouring q of one channel: x one or two lines, w a broadcast
            l2 = taps / 32 * (32 * e * p.stride + e) / max(1, min(p.r * p.s, 8))
            note = "NCHW: warp loads of x coalesce (stride * 128 B), w is a broadcast; L1 catches tap overlap"
        return _traffic(p, l2, None, "l1/lsu", note + "; 2 loads per FMA: far below the FMA peak")


# --- rung 2: direct, input tile + halo in shared memory ---------------------------------------------
@lru_cache(maxsize=None)
def _halo_kernel(NHWC: bool, R: int, S: int, STRIDE: int, TP: int, TQ: int, KB: int):
    IH = (TP - 1) * STRIDE + R  # input rows a TP x TQ output tile needs (the tile and its halo)
    IW = (TQ - 1) * STRIDE + S
    NT = TP * TQ
    RS = R * S

    @cuda.jit
    def conv_direct_halo(x, w, y, N, C, H, W, K, P, Q, pad):
        tile = cuda.shared.array((IH, IW), float32)  # one input channel of the tile + halo
        wsh = cuda.shared.array((KB, RS), float32)  # that channel's taps of KB filters
        acc = cuda.local.array(KB, float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        t = ty * TQ + tx
        tiles_q = (Q + TQ - 1) // TQ
        p0 = (cuda.blockIdx.x // tiles_q) * TP
        q0 = (cuda.blockIdx.x % tiles_q) * TQ
        k0 = cuda.blockIdx.y * KB
        b = cuda.blockIdx.z
        h0 = p0 * STRIDE - pad
        w0 = q0 * STRIDE - pad
        for kk in range(KB):
            acc[kk] = float32(0)
        for c in range(C):
            for idx in range(t, IH * IW, NT):
                ii = idx // IW
                jj = idx % IW
                ih = h0 + ii
                iw = w0 + jj
                v = float32(0)
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = float32(x[b, ih, iw, c])
                    else:
                        v = float32(x[b, c, ih, iw])
                tile[ii, jj] = v
            for idx in range(t, KB * RS, NT):
                kk = idx // RS
                rs = idx % RS
                u = float32(0)
                if k0 + kk < K:
                    if NHWC:
                        u = float32(w[k0 + kk, rs // S, rs % S, c])
                    else:
                        u = float32(w[k0 + kk, c, rs // S, rs % S])
                wsh[kk, rs] = u
            cuda.syncthreads()
            for r in range(R):
                for s in range(S):
                    xv = tile[ty * STRIDE + r, tx * STRIDE + s]  # one shared load feeds KB FMAs
                    for kk in range(KB):
                        acc[kk] += xv * wsh[kk, r * S + s]
            cuda.syncthreads()
        p = p0 + ty
        q = q0 + tx
        if p < P and q < Q:
            for kk in range(KB):
                if k0 + kk < K:
                    if NHWC:
                        y[b, p, q, k0 + kk] = acc[kk]
                    else:
                        y[b, k0 + kk, p, q] = acc[kk]

    return conv_direct_halo


@dataclass(frozen=True)
class DirectHalo(TunableVariant):
    TP: int = 8
    TQ: int = 16
    KB: int = 8

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "direct_halo"
    what: ClassVar[str] = (
        "A block owns a TP x TQ tile of output pixels for KB output channels. Channel by channel it "
        "stages the input tile plus its halo ((TP-1)*stride + R rows, likewise columns) and the KB "
        "filters' taps in shared memory; each x value is then read from global memory about once per "
        "block instead of R*S times, and each shared load of x feeds KB FMAs. The kernel is compiled "
        "per (R, S, stride), which fixes the shared-array shapes.")

    def halo(self, p):
        return (self.TP - 1) * p.stride + p.r, (self.TQ - 1) * p.stride + p.s

    def shared_bytes(self, p) -> int:
        ih, iw = self.halo(p)
        return (ih * iw + self.KB * p.r * p.s) * 4

    def grid(self, p):
        return _ceil(p.p, self.TP) * _ceil(p.q, self.TQ), _ceil(p.k, self.KB), p.n

    def supports(self, problem):
        _check(self, problem, self.grid(problem), (self.TQ, self.TP), self.shared_bytes(problem))

    def plan(self, problem, bufs):
        p = problem
        kern = _halo_kernel(p.nhwc, p.r, p.s, p.stride, self.TP, self.TQ, self.KB)
        return [Launch(kern, self.grid(p), (self.TQ, self.TP),
                       (bufs["x"], bufs["w"], bufs["y"], p.n, p.c, p.h, p.w, p.k, p.p, p.q, p.pad))]

    def traffic(self, p):
        e = p.elem
        gx, gk, gn = self.grid(p)
        ih, iw = self.halo(p)
        blocks = gx * gk * gn
        x_l2 = blocks * p.c * ih * iw * e * (8 if p.nhwc else 1)  # NHWC: one useful element per sector
        w_l2 = blocks * p.c * self.KB * p.r * p.s * e
        smem = p.flops / 2 * 4 * (1 + 1 / self.KB) + blocks * p.c * (ih * iw + self.KB * p.r * p.s) * 4
        note = (f"x read once per block and per {gk} channel group(s); "
                + ("NHWC gathers one channel at a time: 4-8x the sectors" if p.nhwc else "rows of x coalesce")
                + f"; {1 + 1 / self.KB:.2f} shared loads per FMA")
        return _traffic(p, x_l2 + w_l2 + p.n * p.k * p.p * p.q * e, smem, "smem", note)


# --- rung 3: explicit im2col + the GEMM ladder -----------------------------------------------------
@lru_cache(maxsize=None)
def _im2col_kernel(NHWC: bool):
    @cuda.jit
    def conv_im2col(x, col, N, C, H, W, R, S, P, Q, stride, pad):
        i = cuda.grid(1)
        CRS = C * R * S
        if i >= N * P * Q * CRS:
            return
        j = i % CRS  # column of the buffer: (r, s, c) for NHWC, (c, r, s) for NCHW, as w is stored
        m = i // CRS  # row: one output pixel
        q = m % Q
        t = m // Q
        p = t % P
        b = t // P
        if NHWC:
            c = j % C
            t2 = j // C
            s = t2 % S
            r = t2 // S
        else:
            s = j % S
            t2 = j // S
            r = t2 % R
            c = t2 // R
        ih = p * stride - pad + r
        iw = q * stride - pad + s
        v = float32(0)
        if ih >= 0 and ih < H and iw >= 0 and iw < W:
            if NHWC:
                v = float32(x[b, ih, iw, c])
            else:
                v = float32(x[b, c, ih, iw])
        col[m, j] = v

    return conv_im2col


@cuda.jit
def conv_weights_t(w2, wt, K, CRS):
    """wt (CRS, K) = w2 (K, CRS) transposed, as float32: the GEMM's B operand."""
    i = cuda.grid(1)
    if i < K * CRS:
        n = i % K
        j = i // K
        wt[j, n] = float32(w2[n, j])


@lru_cache(maxsize=None)
def _scatter_kernel(NHWC: bool):
    @cuda.jit
    def conv_gemm_to_y(yg, y, N, K, P, Q):
        """y (in its layout and dtype) from the GEMM's (N*P*Q, K) float32 result."""
        i = cuda.grid(1)
        if i >= N * K * P * Q:
            return
        if NHWC:
            k = i % K
            m = i // K
            y[m // (P * Q), (m // Q) % P, m % Q, k] = yg[m, k]
        else:
            q = i % Q
            t = i // Q
            p = t % P
            t = t // P
            k = t % K
            b = t // K
            y[b, k, p, q] = yg[(b * P + p) * Q + q, k]

    return conv_gemm_to_y


#: GEMM rungs to run on the im2col buffer, best first; the first one the ladder has is used
GEMM_PREFERENCE = ("autotuned", "warptile", "double_buffer", "no_bank_conflicts", "vectorized",
                   "blocktile_2d", "smem_tiling")


def _gemm_rung(name: str):
    from . import gemm

    by_name = {v.name: v for v in gemm.LADDER}
    for cand in ((name,) if name != "best" else ()) + GEMM_PREFERENCE:
        if cand in by_name and not by_name[cand].oracle:
            return by_name[cand]
    raise UnsupportedProblem(f"im2col_gemm: the GEMM ladder has none of {(name,) + GEMM_PREFERENCE}; "
                             f"it has {sorted(by_name)}")


@dataclass(frozen=True)
class Im2colGemm(Variant):
    gemm_rung: str = "best"  # a name in gemm.LADDER, or "best": the first of GEMM_PREFERENCE it has
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "im2col_gemm"
    what: ClassVar[str] = (
        "Caffe's recipe: copy every receptive field into a row of an explicit (N*P*Q) x (C*R*S) "
        "float32 buffer (im2col), transpose w into a (C*R*S) x K matrix, and run the GEMM ladder's "
        "best SIMT rung on them unchanged. The GEMM is fast, but the buffer is R*S/stride^2 times "
        "the size of x (9x for a 3x3 layer): it is written once and read back through L2 by every "
        "column of GEMM tiles, traffic the implicit GEMM rungs avoid. NCHW or a float16 output also "
        "needs a pass that scatters the GEMM's (N*P*Q, K) result into y.")

    def gemm_variant(self):
        return _gemm_rung(self.gemm_rung)

    def gemm_problem(self, p):
        from . import gemm

        m, n, k = p.gemm_mnk
        return gemm.Problem(m, n, k, "float32")

    def direct_out(self, p) -> bool:
        return p.nhwc and p.out_dtype == "float32"  # y is the GEMM's C itself

    def workspace(self, p):
        m, n, k = p.gemm_mnk
        ws = {"col": ((m, k), "float32"), "wt": ((k, n), "float32")}
        if not self.direct_out(p):
            ws["yg"] = ((m, n), "float32")
        return ws

    def supports(self, problem):
        m, n, k = problem.gemm_mnk
        if m * k >= 2**31:
            raise UnsupportedProblem(f"{self.label}: the im2col buffer would have {m * k} elements (>= 2**31)")
        self.gemm_variant().supports(self.gemm_problem(problem))
        _check(self, problem, _ceil(m * k, self.block), self.block)

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        w2 = _view2d(bufs["w"], n, k)
        c_out = _view2d(bufs["y"], m, n) if self.direct_out(p) else bufs["yg"]
        g = self.gemm_variant()
        launches = [
            Launch(_im2col_kernel(p.nhwc), _ceil(m * k, self.block), self.block,
                   (bufs["x"], bufs["col"], p.n, p.c, p.h, p.w, p.r, p.s, p.p, p.q, p.stride, p.pad)),
            Launch(conv_weights_t, _ceil(n * k, self.block), self.block, (w2, bufs["wt"], n, k)),
        ]
        launches += g.plan(self.gemm_problem(p), {"a": bufs["col"], "b": bufs["wt"], "c": c_out})
        if not self.direct_out(p):
            launches.append(Launch(_scatter_kernel(p.nhwc), _ceil(m * n, self.block), self.block,
                                   (bufs["yg"], bufs["y"], p.n, p.k, p.p, p.q)))
        return launches

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        col = m * k * 4.0
        gt = self.gemm_variant().traffic(self.gemm_problem(p))
        extra_y = 0.0 if self.direct_out(p) else 2 * m * n * 4.0  # write yg, read it back
        im2col = p.n * p.c * p.h * p.w * e + col  # read x, write the buffer
        dram = im2col + gt.dram_bytes + extra_y + n * k * (e + 4) \
            + (0 if self.direct_out(p) else p.n * p.k * p.p * p.q * e)
        l2 = im2col + (gt.l2_bytes or gt.dram_bytes) + extra_y + n * k * (e + 4)
        return _traffic(p, l2, gt.smem_bytes, gt.limiter or "fma",
                        f"im2col buffer {col / 1e6:.1f} MB ({col / max(1, p.n * p.c * p.h * p.w * e):.1f}x x), "
                        f"written then read by the GEMM ({self.gemm_variant().label}); "
                        + ("" if self.direct_out(p) else "plus a scatter pass into y"), dram=dram)


# --- rung 4: implicit GEMM, naive ---------------------------------------------------------------
@lru_cache(maxsize=None)
def _igemm_naive_kernel(NHWC: bool, BX: int, BY: int):
    @cuda.jit
    def conv_igemm_naive(x, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        M = N * P * Q
        tiles_m = (M + BY - 1) // BY
        n = (cuda.blockIdx.x // tiles_m) * BX + cuda.threadIdx.x  # GEMM column: output channel
        m = (cuda.blockIdx.x % tiles_m) * BY + cuda.threadIdx.y  # GEMM row: output pixel
        if m >= M or n >= K:
            return
        q = m % Q
        t = m // Q
        p = t % P
        b = t // P
        acc = float32(0)
        for j in range(C * R * S):  # the GEMM's k loop: decode j into (c, r, s)
            if NHWC:
                c = j % C
                t2 = j // C
                s = t2 % S
                r = t2 // S
            else:
                s = j % S
                t2 = j // S
                r = t2 % R
                c = t2 // R
            ih = p * stride - pad + r
            iw = q * stride - pad + s
            if ih >= 0 and ih < H and iw >= 0 and iw < W:  # A[m, j] is 0 in the padding
                if NHWC:
                    acc += float32(x[b, ih, iw, c]) * float32(w2[n, j])
                else:
                    acc += float32(x[b, c, ih, iw]) * float32(w2[n, j])
        if NHWC:
            y[b, p, q, n] = acc
        else:
            y[b, n, p, q] = acc

    return conv_igemm_naive


@dataclass(frozen=True)
class IgemmNaive(TunableVariant):
    BX: int = 32
    BY: int = 8

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "igemm_naive"
    what: ClassVar[str] = (
        "The implicit GEMM view, naively: M = N*P*Q output pixels, N = K channels, K = C*R*S taps. "
        "One thread per (pixel, channel) loops over the flattened reduction index j, decoding j into "
        "(c, r, s) and gathering A[m, j] from x on the fly (zero in the padding): no buffer. Lanes "
        "of a warp take neighbouring output channels, so the gathered x value is a broadcast and "
        "each lane reads its own row of w.")

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return _ceil(m, self.BY) * _ceil(n, self.BX)

    def supports(self, problem):
        _check(self, problem, self.grid(problem), (self.BX, self.BY))

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        return [Launch(_igemm_naive_kernel(p.nhwc, self.BX, self.BY), self.grid(p), (self.BX, self.BY),
                       (bufs["x"], _view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        # per warp and tap: x one broadcast sector, w 32 rows -> 32 sectors; L1 holds w rows for
        # ~8 taps (a 32-byte sector) while the warp walks j
        l2 = m * n * k / 32 * (32 + 32 * 32 / (32 / e)) / 1.0
        return _traffic(p, l2 / 4, None, "l1/lsu",
                        "2 global loads per FMA plus an integer decode of j; w rows strided by C*R*S")


# --- rung 5: implicit GEMM tiled in shared memory ---------------------------------------------------
@lru_cache(maxsize=None)
def _igemm_smem_kernel(NHWC: bool, T: int):
    TP1 = T + 1  # B is stored transposed: one word of padding keeps the transposing stores conflict-free

    @cuda.jit
    def conv_igemm_smem(x, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        As = cuda.shared.array((T, T), float32)  # A[m0 + row, j0 + col], gathered from x
        Bs = cuda.shared.array((T, TP1), float32)  # B[j0 + row, n0 + col] = w2[n0 + col, j0 + row]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        M = N * P * Q
        CRS = C * R * S
        m0 = cuda.blockIdx.y * T
        n0 = cuda.blockIdx.x * T
        # the pixel of A-row m0 + ty (loaded by this thread for every k tile): decode once
        am = m0 + ty
        aq = am % Q
        at = am // Q
        ap = at % P
        ab = at // P
        acc = float32(0)
        for j0 in range(0, CRS, T):
            j = j0 + tx  # neighbouring lanes: neighbouring taps (contiguous c in NHWC, s in NCHW)
            v = float32(0)
            if am < M and j < CRS:
                if NHWC:
                    c = j % C
                    t2 = j // C
                    s = t2 % S
                    r = t2 // S
                else:
                    s = j % S
                    t2 = j // S
                    r = t2 % R
                    c = t2 // R
                ih = ap * stride - pad + r
                iw = aq * stride - pad + s
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = float32(x[ab, ih, iw, c])
                    else:
                        v = float32(x[ab, c, ih, iw])
            As[ty, tx] = v
            u = float32(0)  # lanes walk along a row of w2 (coalesced); stored transposed
            if n0 + ty < K and j < CRS:
                u = float32(w2[n0 + ty, j])
            Bs[tx, ty] = u
            cuda.syncthreads()
            for kk in range(T):
                acc += As[ty, kk] * Bs[kk, tx]
            cuda.syncthreads()
        n = n0 + tx
        if am < M and n < K:
            if NHWC:
                y[ab, ap, aq, n] = acc
            else:
                y[ab, n, ap, aq] = acc

    return conv_igemm_smem


@dataclass(frozen=True)
class IgemmSmem(TunableVariant):
    tile: int = 16

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "igemm_smem"
    what: ClassVar[str] = (
        "GEMM rung 3's shared-memory tiling on the implicit GEMM: a block stages a T x T tile of A, "
        "gathered from x (the im2col happens in shared memory, never in DRAM), and a T x T tile of "
        "B read along rows of w (coalesced) and stored transposed with one word of padding. Each "
        "global value is now loaded once per block instead of once per thread; the pixel of each "
        "A row is decoded once, the tap of each column once per tile.")

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return _ceil(n, self.tile), _ceil(m, self.tile)

    def supports(self, problem):
        T = self.tile
        _check(self, problem, self.grid(problem), (T, T), (T * T + T * (T + 1)) * 4)

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        T = self.tile
        return [Launch(_igemm_smem_kernel(p.nhwc, T), self.grid(p), (T, T),
                       (bufs["x"], _view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        T = self.tile
        l2 = (m * k * _ceil(n, T) + k * n * _ceil(m, T)) * e + m * n * e
        return _traffic(p, l2, 2 * 4 * m * n * k + (l2 - m * n * e) * 4 / e, "smem",
                        "global loads / T; 2 shared loads per FMA bound it (as GEMM rung 3)")


# --- rung 6: register-blocked, 16-byte loads --------------------------------------------------------
@cuda.jit(device=True)
def _load4_scalar(arr, i, j):
    """Four consecutive elements as float32, one load each (float16, or no 16-byte alignment)."""
    return float32(arr[i, j]), float32(arr[i, j + 1]), float32(arr[i, j + 2]), float32(arr[i, j + 3])


@lru_cache(maxsize=None)
def _igemm_regblock_kernel(NHWC: bool, VEC: bool, BM: int, BN: int, BK: int, TM: int, TN: int):
    NT = (BM // TM) * (BN // TN)
    TCOLS = BN // TN
    TMN = TM * TN
    PAD = 4
    BMP = BM + PAD
    BK4 = BK // 4
    ld4 = load4 if VEC else _load4_scalar  # load4 is float32-only: float16 takes four scalar loads

    @cuda.jit
    def conv_igemm_regblock(x, x2, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad, vec_x, vec_w):
        AsT = cuda.shared.array((BK, BMP), float32)  # A tile transposed (k-major), padded
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        tc = cuda.local.array(4, int64)  # (c, r, s) of this thread's 4 taps of A
        tr = cuda.local.array(4, int64)
        ts = cuda.local.array(4, int64)
        t = cuda.threadIdx.x
        M = N * P * Q
        CRS = C * R * S
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        t_col = t % TCOLS
        t_row = t // TCOLS
        for i in range(TMN):
            acc[i] = float32(0)
        # this thread's row of the A tile and its 4 taps: BM * BK / 4 == NT, so one 4-vector of A
        # per thread and k step, always the same output pixel: decode the pixel once, and keep the
        # taps as (c, r, s) counters advanced by BK per step instead of dividing j every time
        rr = t // BK4
        qq = (t % BK4) * 4
        m = m0 + rr
        m_ok = m < M
        oq = m % Q
        ot = m // Q
        op = ot % P
        ob = ot // P
        hb = op * stride - pad
        wb = oq * stride - pad
        for e in range(4):
            je = qq + e
            if NHWC:  # (r, s, c), c fastest
                tc[e] = je % C
                ts[e] = (je // C) % S
                tr[e] = je // (C * S)
            else:  # (c, r, s), s fastest
                ts[e] = je % S
                tr[e] = (je // S) % R
                tc[e] = je // (S * R)
        vec = NHWC and vec_x  # C % 4 == 0: the 4 taps are 4 channels of one pixel
        for j0 in range(0, CRS, BK):
            j = j0 + qq
            a0 = float32(0)
            a1 = float32(0)
            a2 = float32(0)
            a3 = float32(0)
            if m_ok:
                if vec:
                    if j < CRS:
                        ih = hb + tr[0]
                        iw = wb + ts[0]
                        if ih >= 0 and ih < H and iw >= 0 and iw < W:
                            a0, a1, a2, a3 = ld4(x2, (ob * H + ih) * W + iw, tc[0])
                else:
                    for e in range(4):
                        u = float32(0)
                        if j + e < CRS:
                            ih = hb + tr[e]
                            iw = wb + ts[e]
                            if ih >= 0 and ih < H and iw >= 0 and iw < W:
                                if NHWC:
                                    u = float32(x[ob, ih, iw, tc[e]])
                                else:
                                    u = float32(x[ob, tc[e], ih, iw])
                        if e == 0:
                            a0 = u
                        elif e == 1:
                            a1 = u
                        elif e == 2:
                            a2 = u
                        else:
                            a3 = u
            AsT[qq, rr] = a0
            AsT[qq + 1, rr] = a1
            AsT[qq + 2, rr] = a2
            AsT[qq + 3, rr] = a3
            for e in range(4):  # the next step's taps: j + BK (a constant trip count keeps them in registers)
                if NHWC:
                    tc[e] += BK
                    while tc[e] >= C:
                        tc[e] -= C
                        ts[e] += 1
                        if ts[e] == S:
                            ts[e] = 0
                            tr[e] += 1
                else:
                    ts[e] += BK
                    while ts[e] >= S:
                        ts[e] -= S
                        tr[e] += 1
                        if tr[e] == R:
                            tr[e] = 0
                            tc[e] += 1
            # B: 4 consecutive taps of one filter (a row of w2): one 16-byte load when C*R*S % 4 == 0
            for v in range(t, BN * BK4, NT):
                nn = v // BK4
                qb = (v % BK4) * 4
                n = n0 + nn
                jb = j0 + qb
                b0 = float32(0)
                b1 = float32(0)
                b2 = float32(0)
                b3 = float32(0)
                if n < K:
                    if vec_w and jb < CRS:
                        b0, b1, b2, b3 = ld4(w2, n, jb)
                    else:
                        if jb < CRS:
                            b0 = float32(w2[n, jb])
                        if jb + 1 < CRS:
                            b1 = float32(w2[n, jb + 1])
                        if jb + 2 < CRS:
                            b2 = float32(w2[n, jb + 2])
                        if jb + 3 < CRS:
                            b3 = float32(w2[n, jb + 3])
                Bs[qb, nn] = b0
                Bs[qb + 1, nn] = b1
                Bs[qb + 2, nn] = b2
                Bs[qb + 3, nn] = b3
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    reg_m[i] = AsT[kk, t_row * TM + i]
                for jn in range(TN):
                    reg_n[jn] = Bs[kk, t_col * TN + jn]
                for i in range(TM):  # outer product: TM + TN shared loads feed TM * TN FMAs
                    for jn in range(TN):
                        acc[i * TN + jn] += reg_m[i] * reg_n[jn]
            cuda.syncthreads()
        for i in range(TM):
            m = m0 + t_row * TM + i
            if m < M:
                oq = m % Q
                ot = m // Q
                op = ot % P
                ob = ot // P
                for jn in range(TN):
                    n = n0 + t_col * TN + jn
                    if n < K:
                        if NHWC:
                            y[ob, op, oq, n] = acc[i * TN + jn]
                        else:
                            y[ob, n, op, oq] = acc[i * TN + jn]

    return conv_igemm_regblock


@dataclass(frozen=True)
class IgemmRegblock(TunableVariant):
    BM: int = 128
    BN: int = 64
    BK: int = 8
    TM: int = 8
    TN: int = 4

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "igemm_regblock"
    what: ClassVar[str] = (
        "GEMM rungs 5-6 on the implicit GEMM: a 128x64 block tile, each thread an 8x4 tile of "
        "outputs accumulated as outer products (12 shared loads feed 32 FMAs), A stored transposed. "
        "In NHWC with c % 4 == 0 four consecutive taps are four consecutive channels of one input "
        "pixel, so the gather is one 16-byte load (load4, ld.global.v4.f32); rows of w are read 16 "
        "bytes at a time when C*R*S % 4 == 0. NCHW, odd channel counts and float16 take scalar "
        "loads: the layout decides whether the gather vectorizes. Each thread gathers the same "
        "output pixel at every k step, so it decodes the pixel once and walks the taps as (c, r, s) "
        "counters: no 64-bit integer division (a ~60-instruction subroutine) inside the k loop.")

    def example(self, problem):
        return to_layout(problem, "NHWC")

    def threads(self):
        return (self.BM // self.TM) * (self.BN // self.TN)

    def shared_bytes(self):
        return self.BK * (self.BM + 4 + self.BN) * 4

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return _ceil(n, self.BN), _ceil(m, self.BM)

    def supports(self, problem):
        if self.BM % self.TM or self.BN % self.TN or self.BK % 4:
            raise UnsupportedProblem(f"{self.label}: BM, BN must be multiples of TM, TN and BK of 4")
        if self.BM * self.BK // 4 != self.threads() or self.BN * self.BK // 4 > self.threads():
            raise UnsupportedProblem(f"{self.label}: the A tile must be one 4-vector per thread "
                                     f"(BM*BK/4 = {self.BM * self.BK // 4} != {self.threads()} threads) and "
                                     "the B tile at most one")
        _check(self, problem, self.grid(problem), self.threads(), self.shared_bytes())

    def vectorized(self, p) -> tuple[bool, bool]:
        """(x, w) take 16-byte loads: float32, and (for x) NHWC with c % 4 == 0."""
        f32 = p.dtype == "float32"
        return f32 and p.nhwc and p.c % 4 == 0, f32 and (p.c * p.r * p.s) % 4 == 0

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        vx, vw = self.vectorized(p)
        kern = _igemm_regblock_kernel(p.nhwc, p.dtype == "float32", self.BM, self.BN, self.BK, self.TM, self.TN)
        x2 = _view2d(bufs["x"], p.n * p.h * p.w, p.c) if p.nhwc else _view2d(bufs["x"], p.n * p.c * p.h, p.w)
        return [Launch(kern, self.grid(p), self.threads(),
                       (bufs["x"], x2, _view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad, vx, vw))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        l2 = (m * k * _ceil(n, self.BN) + k * n * _ceil(m, self.BM)) * e + m * n * e
        vx, vw = self.vectorized(p)
        smem = (1 / self.TM + 1 / self.TN) * 4 * m * n * k + (l2 - m * n * e) * 4 / e
        return _traffic(p, l2, smem, "fma",
                        f"{1 / self.TM + 1 / self.TN:.2f} shared loads per FMA; 16-byte loads of x: "
                        f"{'yes' if vx else 'no'}, of w: {'yes' if vw else 'no'}; the gather's integer "
                        "decode costs issue slots the GEMM does not pay")


# --- rung 7: Winograd F(2x2, 3x3) ----------------------------------------------------------------
# Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016): a 2x2 output tile of a
# 3x3 stride-1 convolution is  Y = A^T [ sum_c (G g_c G^T) * (B^T d_c B) ] A  with a 4x4 input tile
# d_c, so 16 multiplies per (tile, c, k) replace 36.  The 16 products over c are 16 independent
# GEMMs:  M_e (K x T) = U_e (K x C) @ V_e (C x T),  e < 16, T = number of 2x2 tiles.
#   B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
#   G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
#   A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
@lru_cache(maxsize=None)
def _wino_filter_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_filter(w, U, K, C):
        """U[e * K + k, c] = (G g G^T)[e // 4, e % 4] for the 3x3 filter g of (k, c)."""
        i = cuda.grid(1)
        if i >= K * C:
            return
        c = i % C
        k = i // C
        g = cuda.local.array((3, 3), float32)
        t = cuda.local.array((4, 3), float32)
        for r in range(3):
            for s in range(3):
                if NHWC:
                    g[r, s] = float32(w[k, r, s, c])
                else:
                    g[r, s] = float32(w[k, c, r, s])
        for s in range(3):  # G g
            t[0, s] = g[0, s]
            t[1, s] = float32(0.5) * (g[0, s] + g[1, s] + g[2, s])
            t[2, s] = float32(0.5) * (g[0, s] - g[1, s] + g[2, s])
            t[3, s] = g[2, s]
        for a in range(4):  # (G g) G^T
            U[(a * 4) * K + k, c] = t[a, 0]
            U[(a * 4 + 1) * K + k, c] = float32(0.5) * (t[a, 0] + t[a, 1] + t[a, 2])
            U[(a * 4 + 2) * K + k, c] = float32(0.5) * (t[a, 0] - t[a, 1] + t[a, 2])
            U[(a * 4 + 3) * K + k, c] = t[a, 2]

    return conv_winograd_filter


@lru_cache(maxsize=None)
def _wino_input_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_input(x, V, N, C, H, W, TP, TQ, pad):
        """V[e * C + c, t] = (B^T d B)[e // 4, e % 4] for the 4x4 input tile d of (c, tile t)."""
        i = cuda.grid(1)
        T = N * TP * TQ
        if i >= C * T:
            return
        t = i % T  # neighbouring threads: neighbouring tiles (coalesced stores of V)
        c = i // T
        tq = t % TQ
        tp = (t // TQ) % TP
        b = t // (TQ * TP)
        d = cuda.local.array((4, 4), float32)
        m = cuda.local.array((4, 4), float32)
        for a in range(4):
            ih = 2 * tp - pad + a
            for e in range(4):
                iw = 2 * tq - pad + e
                v = float32(0)
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = float32(x[b, ih, iw, c])
                    else:
                        v = float32(x[b, c, ih, iw])
                d[a, e] = v
        for e in range(4):  # B^T d
            m[0, e] = d[0, e] - d[2, e]
            m[1, e] = d[1, e] + d[2, e]
            m[2, e] = d[2, e] - d[1, e]
            m[3, e] = d[1, e] - d[3, e]
        for a in range(4):  # (B^T d) B
            V[(a * 4) * C + c, t] = m[a, 0] - m[a, 2]
            V[(a * 4 + 1) * C + c, t] = m[a, 1] + m[a, 2]
            V[(a * 4 + 2) * C + c, t] = m[a, 2] - m[a, 1]
            V[(a * 4 + 3) * C + c, t] = m[a, 1] - m[a, 3]

    return conv_winograd_input


@lru_cache(maxsize=None)
def _batched_gemm_kernel(BM: int, BN: int, BK: int, TM: int, TN: int):
    """Mo[e] = Ua[e] @ Vb[e] for e = blockIdx.z, the operands stacked by rows: Ua (E*M, Kd),
    Vb (E*Kd, Nn), Mo (E*M, Nn); GEMM rung 5's 2-D register blocking."""
    NT = (BM // TM) * (BN // TN)
    TMN = TM * TN

    @cuda.jit
    def conv_winograd_gemm(Ua, Vb, Mo, M, Nn, Kd):
        As = cuda.shared.array((BK, BM), float32)  # A tile stored k-major
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        e = cuda.blockIdx.z
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        ra = e * M  # this product's first row in Ua and Mo
        rb = e * Kd  # and in Vb
        t_col = t % (BN // TN)
        t_row = t // (BN // TN)
        for i in range(TMN):
            acc[i] = float32(0)
        for k0 in range(0, Kd, BK):
            for idx in range(t, BM * BK, NT):
                r = idx // BK
                q = idx % BK
                As[q, r] = Ua[ra + bm + r, k0 + q] if bm + r < M and k0 + q < Kd else float32(0)
            for idx in range(t, BK * BN, NT):
                r = idx // BN
                q = idx % BN
                Bs[r, q] = Vb[rb + k0 + r, bn + q] if k0 + r < Kd and bn + q < Nn else float32(0)
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    reg_m[i] = As[kk, t_row * TM + i]
                for j in range(TN):
                    reg_n[j] = Bs[kk, t_col * TN + j]
                for i in range(TM):
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < Nn:
                    Mo[ra + r, q] = acc[i * TN + j]

    return conv_winograd_gemm


@lru_cache(maxsize=None)
def _wino_output_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_output(Mo, y, N, K, P, Q, TP, TQ):
        """y's 2x2 tile (k, t) = A^T m A, m[a, e] = Mo[(a * 4 + e) * K + k, t]."""
        i = cuda.grid(1)
        T = N * TP * TQ
        if i >= K * T:
            return
        t = i % T
        k = i // T
        tq = t % TQ
        tp = (t // TQ) % TP
        b = t // (TQ * TP)
        o = cuda.local.array((2, 4), float32)
        for e in range(4):  # A^T m
            m0 = Mo[e * K + k, t]
            m1 = Mo[(4 + e) * K + k, t]
            m2 = Mo[(8 + e) * K + k, t]
            m3 = Mo[(12 + e) * K + k, t]
            o[0, e] = m0 + m1 + m2
            o[1, e] = m1 - m2 - m3
        for a in range(2):  # (A^T m) A
            for j in range(2):
                v = o[a, 0] + o[a, 1] + o[a, 2] if j == 0 else o[a, 1] - o[a, 2] - o[a, 3]
                p = 2 * tp + a
                q = 2 * tq + j
                if p < P and q < Q:
                    if NHWC:
                        y[b, p, q, k] = v
                    else:
                        y[b, k, p, q] = v

    return conv_winograd_output


@dataclass(frozen=True)
class Winograd(TunableVariant):
    BM: int = 64
    BN: int = 64
    BK: int = 8
    TM: int = 4
    TN: int = 4
    block: int = 256

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "winograd"
    what: ClassVar[str] = (
        "Winograd F(2x2, 3x3) for 3x3 stride-1 layers (Lavin & Gray 2016): transform each 3x3 filter "
        "to 4x4 (U = G g G^T) and each overlapping 4x4 input tile (V = B^T d B), multiply "
        "element-wise and sum over channels (16 independent GEMMs, one launch, blockIdx.z picks the "
        "element), and transform back (Y = A^T M A) to a 2x2 output tile: 16 multiplies where the "
        "direct method does 36 (2.25x fewer), at the price of three float32 workspaces in DRAM and "
        "slightly larger rounding errors (the transforms add and halve).")

    def example(self, problem):
        return problem  # the example layer is a 3x3 stride-1 layer

    def tiles(self, p):
        return _ceil(p.p, 2), _ceil(p.q, 2)

    def workspace(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        return {"U": ((16 * p.k, p.c), "float32"), "V": ((16 * p.c, t), "float32"),
                "M": ((16 * p.k, t), "float32")}

    def threads(self):
        return (self.BM // self.TM) * (self.BN // self.TN)

    def gemm_grid(self, p):
        tp, tq = self.tiles(p)
        return _ceil(p.n * tp * tq, self.BN), _ceil(p.k, self.BM), 16

    def supports(self, problem):
        p = problem
        if (p.r, p.s, p.stride) != (3, 3, 1):
            raise UnsupportedProblem(f"{self.label}: F(2x2, 3x3) takes 3x3 filters at stride 1; got "
                                     f"{p.r}x{p.s} at stride {p.stride}")
        if self.BM % self.TM or self.BN % self.TN:
            raise UnsupportedProblem(f"{self.label}: BM, BN must be multiples of TM, TN")
        _check(self, p, self.gemm_grid(p), self.threads(), self.BK * (self.BM + self.BN) * 4)
        tp, tq = self.tiles(p)
        _check(self, p, _ceil(16 * max(p.k, p.c) * p.n * tp * tq, self.block), self.block)

    def plan(self, problem, bufs):
        p = problem
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        nb = self.block
        return [
            Launch(_wino_input_kernel(p.nhwc), _ceil(p.c * t, nb), nb,
                   (bufs["x"], bufs["V"], p.n, p.c, p.h, p.w, tp, tq, p.pad)),
            Launch(_wino_filter_kernel(p.nhwc), _ceil(p.k * p.c, nb), nb, (bufs["w"], bufs["U"], p.k, p.c)),
            Launch(_batched_gemm_kernel(self.BM, self.BN, self.BK, self.TM, self.TN), self.gemm_grid(p),
                   self.threads(), (bufs["U"], bufs["V"], bufs["M"], p.k, t, p.c)),
            Launch(_wino_output_kernel(p.nhwc), _ceil(p.k * t, nb), nb,
                   (bufs["M"], bufs["y"], p.n, p.k, p.p, p.q, tp, tq)),
        ]

    def traffic(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        e = p.elem
        v_b, m_b, u_b = 16 * p.c * t * 4.0, 16 * p.k * t * 4.0, 16 * p.k * p.c * 4.0
        x_b, y_b, w_b = p.n * p.c * p.h * p.w * e, p.n * p.k * p.p * p.q * e, p.k * p.c * 9 * e
        dram = x_b + w_b + y_b + 2 * (v_b + m_b + u_b)  # each workspace written once and read once
        l2 = dram + v_b * (_ceil(p.k, self.BM) - 1) + u_b * (_ceil(t, self.BN) - 1)
        gemm_flops = 2.0 * 16 * p.k * p.c * t
        return Traffic(flops=gemm_flops, dram_bytes=dram, l2_bytes=l2,
                       smem_bytes=(1 / self.TM + 1 / self.TN) * 4 * gemm_flops / 2, limiter="fma",
                       notes=f"{gemm_flops / p.flops:.2f}x the direct FLOPs (16 products per 2x2 tile instead of "
                             f"36, plus tile rounding); workspaces V, M, U: {(v_b + m_b + u_b) / 1e6:.0f} MB "
                             "written and read back",
                       extra={"algorithmic_flops": p.flops})


# --- rung 8: tensor cores -----------------------------------------------------------------------
@lru_cache(maxsize=None)
def _tensor_core_kernel(NHWC: bool, WARPS_M: int, WARPS_N: int, NTILES: int):
    BM = 16 * WARPS_M
    BN = 8 * NTILES * WARPS_N
    BK = 16
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    NACC = NTILES * 4
    ROWS = BM * BK // NT  # rows of the A tile each thread gathers per k step
    RSTEP = NT // BK

    @cuda.jit
    def conv_tensor_core(x, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        As = cuda.shared.array((BM, BK), float16)  # gathered A tile (output pixels x taps)
        Bs = cuda.shared.array((BK, BN), float16)  # B tile: taps x output channels
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's mma only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        acc = cuda.local.array(NACC, float32)
        fa = cuda.local.array(8, float16)
        fb = cuda.local.array(4, float16)
        pb = cuda.local.array(ROWS, int64)  # batch index of each gathered row (-1: past the end)
        ph = cuda.local.array(ROWS, int64)  # its input row and column at tap (0, 0)
        pw = cuda.local.array(ROWS, int64)
        t = cuda.threadIdx.x
        lane = t % 32
        warp = t // 32
        wm = (warp // WARPS_N) * 16
        wn = (warp % WARPS_N) * (8 * NTILES)
        M = N * P * Q
        CRS = C * R * S
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        for i in range(NACC):
            acc[i] = float32(0)
        # this thread's part of the A tile: column qq (one tap per k step) of ROWS rows (output
        # pixels) NT / BK apart.  Decode the pixels once; keep the tap as (c, r, s) counters
        # advanced by BK per step: no integer division inside the k loop.
        qq = t % BK
        for i in range(ROWS):
            m = m0 + t // BK + i * RSTEP
            pq = m % (P * Q)
            pb[i] = m // (P * Q) if m < M else -1  # -1: a row past the end of y
            ph[i] = (pq // Q) * stride - pad
            pw[i] = (pq % Q) * stride - pad
        if NHWC:  # (r, s, c), c fastest
            tc = qq % C
            ts = (qq // C) % S
            tr = qq // (C * S)
        else:  # (c, r, s), s fastest
            ts = qq % S
            tr = (qq // S) % R
            tc = qq // (S * R)
        for j0 in range(0, CRS, BK):
            j_ok = j0 + qq < CRS
            for i in range(ROWS):
                v = float16(0)
                ih = ph[i] + tr
                iw = pw[i] + ts
                if j_ok and pb[i] >= 0 and ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = x[pb[i], ih, iw, tc]
                    else:
                        v = x[pb[i], tc, ih, iw]
                As[t // BK + i * RSTEP, qq] = v
            if NHWC:  # the next step's tap: j + BK
                tc += BK
                while tc >= C:
                    tc -= C
                    ts += 1
                    if ts == S:
                        ts = 0
                        tr += 1
            else:
                ts += BK
                while ts >= S:
                    ts -= S
                    tr += 1
                    if tr == R:
                        tr = 0
                        tc += 1
            for idx in range(t, BK * BN, NT):
                nn = idx // BK  # lanes walk along a row of w2 (coalesced)
                qq = idx % BK
                u = float16(0)
                if n0 + nn < K and j0 + qq < CRS:
                    u = w2[n0 + nn, j0 + qq]
                Bs[qq, nn] = u
            cuda.syncthreads()
            for i in range(8):
                r, q = frag_a(lane, i)
                fa[i] = As[wm + r, q]
            for nt in range(NTILES):
                for i in range(4):
                    r, q = frag_b(lane, i)
                    fb[i] = Bs[r, wn + nt * 8 + q]
                acc[nt * 4], acc[nt * 4 + 1], acc[nt * 4 + 2], acc[nt * 4 + 3] = mma_16816(
                    fa[0], fa[1], fa[2], fa[3], fa[4], fa[5], fa[6], fa[7], fb[0], fb[1], fb[2], fb[3],
                    acc[nt * 4], acc[nt * 4 + 1], acc[nt * 4 + 2], acc[nt * 4 + 3], scr_a, scr_b)
            cuda.syncthreads()
        for nt in range(NTILES):
            for i in range(4):
                r, q = frag_c(lane, i)
                m = m0 + wm + r
                n = n0 + wn + nt * 8 + q
                if m < M and n < K:
                    oq = m % Q
                    ot = m // Q
                    op = ot % P
                    ob = ot // P
                    if NHWC:
                        y[ob, op, oq, n] = acc[nt * 4 + i]
                    else:
                        y[ob, n, op, oq] = acc[nt * 4 + i]

    return conv_tensor_core


@dataclass(frozen=True)
class TensorCore(TunableVariant):
    WARPS_M: int = 4
    WARPS_N: int = 2
    NTILES: int = 4

    rung: ClassVar[int] = 8
    name: ClassVar[str] = "tensor_core"
    what: ClassVar[str] = (
        "The implicit GEMM on the tensor cores: float16 x and w, float32 accumulation, a float16 "
        "y. Each block gathers a 64x16 tile of A from x (the same (c, r, s) decode as rung 5) and a "
        "16x64 tile of B from w into shared memory; each warp then issues mma.sync.m16n8k16 (GEMM "
        "rung 11's inline-PTX intrinsic, exactly emulated in the simulator) on fragments read from "
        "there. As in rung 6, each thread decodes its 4 output pixels once and advances its tap by "
        "counters. No ldmatrix, no cp.async pipeline: the gather and the fragment loads bound it.")

    def example(self, problem):
        return to_layout(problem, "NHWC", "float16")

    def threads(self):
        return 32 * self.WARPS_M * self.WARPS_N

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return _ceil(n, 8 * self.NTILES * self.WARPS_N), _ceil(m, 16 * self.WARPS_M)

    def shared_bytes(self):
        return (16 * self.WARPS_M * 16 + 16 * 8 * self.NTILES * self.WARPS_N) * 2

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")
        if (16 * self.WARPS_M * 16) % self.threads() or self.threads() % 16:
            raise UnsupportedProblem(f"{self.label}: the 16-wide A tile must split into whole rows per thread "
                                     f"({16 * self.WARPS_M} x 16 over {self.threads()} threads)")
        _check(self, problem, self.grid(problem), self.threads(), self.shared_bytes())

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        kern = _tensor_core_kernel(p.nhwc, self.WARPS_M, self.WARPS_N, self.NTILES)
        return [Launch(kern, self.grid(p), self.threads(),
                       (bufs["x"], _view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        BM, BN = 16 * self.WARPS_M, 8 * self.NTILES * self.WARPS_N
        l2 = (m * k * _ceil(n, BN) + k * n * _ceil(m, BM)) * 2 + m * n * 2
        return _traffic(p, l2, (l2 - m * n * 2) * 2 + m * n * k / 8 * 2 * 2, "l2/smem",
                        "tensor-core math is ~15x the FP32 rate; an element-wise gather into a 64x64 "
                        "tile, without ldmatrix or cp.async, leaves it bound by operand traffic",
                        peak="tensor.fp16")


LADDER: list[Variant] = [Oracle(), Direct(), DirectHalo(), Im2colGemm(), IgemmNaive(), IgemmSmem(),
                         IgemmRegblock(), Winograd(), TensorCore()]
registry_check(LADDER)


# --- peers: torch's autotuned choice and a Triton implicit GEMM (GPU only) ---------------------------
@lru_cache(maxsize=None)
def _triton_conv():
    import triton
    import triton.language as tl

    @triton.jit
    def conv_igemm(x_ptr, w_ptr, y_ptr, N, C, H, W, K, R, S, P, Q, stride, pad,
                   sxn, sxc, sxh, sxw, swk, swc, swr, sws, syn, syk, syp, syq,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        M = N * P * Q
        CRS = C * R * S
        rm = pid_m * BM + tl.arange(0, BM)  # output pixels
        rn = pid_n * BN + tl.arange(0, BN)  # output channels
        b = rm // (P * Q)
        pq = rm % (P * Q)
        op = pq // Q
        oq = pq % Q
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for j0 in range(0, CRS, BK):
            rk = j0 + tl.arange(0, BK)  # taps in (r, s, c) order: c fastest
            c = rk % C
            rs = rk // C
            s = rs % S
            r = rs // S
            ih = op[:, None] * stride - pad + r[None, :]
            iw = oq[:, None] * stride - pad + s[None, :]
            amask = (rm[:, None] < M) & (rk[None, :] < CRS) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a = tl.load(x_ptr + b[:, None] * sxn + c[None, :] * sxc + ih * sxh + iw * sxw, mask=amask, other=0.0)
            bmask = (rk[:, None] < CRS) & (rn[None, :] < K)
            bt = tl.load(w_ptr + rn[None, :] * swk + c[:, None] * swc + r[:, None] * swr + s[:, None] * sws,
                         mask=bmask, other=0.0)
            acc = tl.dot(a, bt, acc, input_precision=PRECISION)
        ymask = (rm[:, None] < M) & (rn[None, :] < K)
        tl.store(y_ptr + b[:, None] * syn + rn[None, :] * syk + op[:, None] * syp + oq[:, None] * syq,
                 acc.to(y_ptr.dtype.element_ty), mask=ymask)

    return conv_igemm


@dataclass(frozen=True)
class TorchConv(Peer):
    name: ClassVar[str] = "torch"
    library: ClassVar[str] = "torch"
    ops: ClassVar[tuple[str, ...]] = ("conv",)
    what: ClassVar[str] = (
        "torch.nn.functional.conv2d with torch.backends.cudnn.benchmark on: cuDNN times its "
        "algorithms for the shape once and keeps the fastest (the oracle takes cuDNN's heuristic "
        "pick). TF32 off, so the products are IEEE float32 as in the oracle.")

    def gpu(self, problem, x, out):
        return _torch_conv(problem, x, benchmark=True)

@dataclass(frozen=True)
class TritonConv(Peer):
    name: ClassVar[str] = "triton"
    library: ClassVar[str] = "triton"
    ops: ClassVar[tuple[str, ...]] = ("conv",)
    what: ClassVar[str] = (
        "A Triton implicit GEMM written here: each program gathers a BM x BK tile of A from x "
        "(any layout, through strides; taps in (r, s, c) order) and a BK x BN tile of w, and "
        "accumulates tl.dot in float32 (IEEE float32 products for float32, tensor cores for "
        "float16). One fixed configuration, not autotuned.")
    BM: int = 128
    BN: int = 64
    BK: int = 32
    num_warps: int = 4
    num_stages: int = 3

    def gpu(self, problem, x, out):
        import torch
        import triton

        p = problem
        xt = _torch_nchw(torch.from_dlpack(x["x"]), p.nhwc)  # logical NCHW strides over our memory
        wt = _torch_nchw(torch.from_dlpack(x["w"]), p.nhwc)
        yt = _torch_nchw(torch.from_dlpack(out["y"]), p.nhwc)
        m = p.n * p.p * p.q
        grid = (triton.cdiv(m, self.BM), triton.cdiv(p.k, self.BN))
        _triton_conv()[grid](xt, wt, yt, p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.p, p.q, p.stride, p.pad,
                             *xt.stride(), *wt.stride(), *yt.stride(), BM=self.BM, BN=self.BN, BK=self.BK,
                             PRECISION="ieee" if p.dtype == "float32" else "tf32",
                             num_warps=self.num_warps, num_stages=self.num_stages)


PEERS = [TorchConv(), TritonConv()]


# --- problems -----------------------------------------------------------------------------------
#: ResNet-50 (torchvision v1.5: stride 2 on the 3x3 of the first block of stages 2-4) forward
#: conv layers, one entry per distinct shape: (name, c, h, k, r, stride, pad, times it occurs)
RESNET50 = [
    ("conv1 7x7/2", 3, 224, 64, 7, 2, 3, 1),
    ("s1 1x1 64->64", 64, 56, 64, 1, 1, 0, 1),
    ("s1 3x3 64", 64, 56, 64, 3, 1, 1, 3),
    ("s1 1x1 64->256", 64, 56, 256, 1, 1, 0, 4),  # 3 expansions + the downsample
    ("s1 1x1 256->64", 256, 56, 64, 1, 1, 0, 2),
    ("s2 1x1 256->128", 256, 56, 128, 1, 1, 0, 1),
    ("s2 3x3 128/2", 128, 56, 128, 3, 2, 1, 1),
    ("s2 1x1 128->512", 128, 28, 512, 1, 1, 0, 4),
    ("s2 down 256->512/2", 256, 56, 512, 1, 2, 0, 1),
    ("s2 1x1 512->128", 512, 28, 128, 1, 1, 0, 3),
    ("s2 3x3 128", 128, 28, 128, 3, 1, 1, 3),
    ("s3 1x1 512->256", 512, 28, 256, 1, 1, 0, 1),
    ("s3 3x3 256/2", 256, 28, 256, 3, 2, 1, 1),
    ("s3 1x1 256->1024", 256, 14, 1024, 1, 1, 0, 6),
    ("s3 down 512->1024/2", 512, 28, 1024, 1, 2, 0, 1),
    ("s3 1x1 1024->256", 1024, 14, 256, 1, 1, 0, 5),
    ("s3 3x3 256", 256, 14, 256, 3, 1, 1, 5),
    ("s4 1x1 1024->512", 1024, 14, 512, 1, 1, 0, 1),
    ("s4 3x3 512/2", 512, 14, 512, 3, 2, 1, 1),
    ("s4 1x1 512->2048", 512, 7, 2048, 1, 1, 0, 3),
    ("s4 down 1024->2048/2", 1024, 14, 2048, 1, 2, 0, 1),
    ("s4 1x1 2048->512", 2048, 7, 512, 1, 1, 0, 2),
    ("s4 3x3 512", 512, 7, 512, 3, 1, 1, 2),
]


def resnet50_layers(batch: int = 32, dtype: str = "float32", layout: str = "NCHW"):
    """[(name, Problem, count)] for the distinct ResNet-50 conv layers at ``batch``."""
    return [(name, Problem(batch, c, h, h, k, r, r, st, pd, dtype, layout), count)
            for name, c, h, k, r, st, pd, count in RESNET50]


GPU_SWEEP = ([p for _, p, _ in resnet50_layers(32, "float32", "NCHW")]
             + [p for _, p, _ in resnet50_layers(32, "float32", "NHWC")]
             + [p for _, p, _ in resnet50_layers(32, "float16", "NHWC")])
EXAMPLE_PROBLEM = Problem(32, 128, 28, 28, 128, 3, 3, 1, 1)  # ResNet-50 stage 2 3x3; compiled, never run here
SIM_SWEEP = [Problem(2, 3, 7, 6, 5, 3, 3, 1, 1), Problem(1, 4, 6, 7, 3, 3, 2, 2, 1, "float32", "NHWC"),
             Problem(1, 8, 5, 5, 6, 3, 3, 1, 1, "float16", "NHWC")]
