"""RMSNorm forward over the last dimension of a (rows, cols) array:
``y[r, j] = x[r, j] / sqrt(mean_j(x[r, :]**2) + eps) * gamma[j]``.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.rms_norm on a GPU (a CuPy expression without it); NumPy here
  1 naive       one thread per row, two kernels (sum of squares -> rstd in a workspace, write)
  2 fused       one block per row, shared-memory tree reduction, two sweeps in one kernel
  3 warp        the same with warp-shuffle reductions
  4 multirow    G threads per row, R rows per block, V loads in flight (128-bit for float32)
  5 tuned       rung 4 at the launch shape chosen by ``search`` (static rule without a GPU)

There is no "single-pass statistics" rung: the one statistic (a sum of squares) already takes
one sweep.  Minimal traffic: read x and gamma once, write y once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, ClassVar

import numpy as np
from numba import cuda, float32

from ...model import Traffic
from .._vector import load4
from ..base import Launch, OracleVariant, UnsupportedProblem, Variant, registry_check
from . import _common as C
from ._common import ONE, ZERO, group_sum, tree_sum

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "MultiRow", "Tuned", "search",
           "EXAMPLE_PROBLEM"]


@dataclass(frozen=True)
class Problem(C.RowProblem):
    """RMSNorm of every row of x (rows, cols), scaled by gamma (cols,)."""

    rows: int
    cols: int
    dtype: str = "float32"
    eps: float = 1e-6
    axis: int = -1

    op: ClassVar[str] = "rmsnorm"

    def input_specs(self):
        return {"x": ((self.rows, self.cols), self.dtype), "gamma": ((self.cols,), self.dtype)}

    def output_specs(self):
        return {"y": ((self.rows, self.cols), self.dtype)}

    def _make(self, g):
        return {"x": g.standard_normal((self.rows, self.cols)).astype(self.dtype),
                "gamma": (1.0 + 0.1 * g.standard_normal(self.cols)).astype(self.dtype)}

    def _reference(self, inputs):
        x = inputs["x"].astype(np.float64)
        ms = np.mean(x * x, axis=1, keepdims=True)
        return x / np.sqrt(ms + self.eps) * inputs["gamma"].astype(np.float64)

    @property
    def flops(self) -> float:
        return 4.0 * self.rows * self.cols  # square-add, then scale by rstd and gamma


def _traffic(p: Problem, sweeps: int, note: str, smem: float = 0.0) -> Traffic:
    e = p.elem_bytes
    g = p.cols * np.dtype(p.dtype).itemsize
    return Traffic(flops=p.flops, dram_bytes=C.sweep_dram(p.rows, p.cols, p.dtype, sweeps) + e + g,
                   l2_bytes=sweeps * e + e + g * p.rows, smem_bytes=smem, limiter="dram", notes=note)


# --- rung 0 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = ("torch.nn.functional.rms_norm on a GPU (PyTorch >= 2.4), else a CuPy expression in "
                           "float32; NumPy in float32 on the host.")

    def gpu(self, problem, x, out):
        try:
            import torch

            fn = torch.nn.functional.rms_norm
        except Exception:
            fn = None
        if fn is not None:
            xt, gt = torch.from_dlpack(x["x"]), torch.from_dlpack(x["gamma"])
            return {"y": fn(xt, (problem.cols,), gt, problem.eps)}  # torch's buffer: no copy timed
        import cupy as cp

        xf = x["x"].astype(cp.float32)
        rstd = 1.0 / cp.sqrt((xf * xf).mean(axis=1, keepdims=True) + cp.float32(problem.eps))
        out["y"][...] = (xf * rstd * x["gamma"].astype(cp.float32)).astype(out["y"].dtype)

    def host(self, problem, x):
        xf = x["x"].astype(np.float32)
        rstd = np.float32(1) / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + np.float32(problem.eps))
        return (xf * rstd * x["gamma"].astype(np.float32)).astype(problem.dtype)

    def traffic(self, problem):
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=problem.bytes, limiter="dram",
                       notes="a fused library kernel: read x, write y (into its own buffer)")


# --- rung 1 -------------------------------------------------------------------------------
@cuda.jit
def rms_row_rstd(x, rstd, eps, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        s = ZERO
        for j in range(cols):
            v = float32(x[r, j])
            s += v * v
        rstd[r] = ONE / math.sqrt(s / float32(cols) + eps)


@cuda.jit
def rms_row_write(x, gamma, rstd, y, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        q = rstd[r]
        for j in range(cols):
            y[r, j] = float32(x[r, j]) * q * float32(gamma[j])


@dataclass(frozen=True)
class Naive(Variant):
    block: int = 128

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per row, one kernel per pass: sum of squares into a global rstd, then the "
        "write. x is read twice, and neighbouring threads read a row apart (uncoalesced)."
    )

    def workspace(self, problem):
        return {"rstd": ((problem.rows,), "float32")}

    def plan(self, problem, bufs):
        g = -(-problem.rows // self.block)
        n, c = problem.rows, problem.cols
        return [Launch(rms_row_rstd, g, self.block, (bufs["x"], bufs["rstd"], C.eps32(problem), n, c)),
                Launch(rms_row_write, g, self.block, (bufs["x"], bufs["gamma"], bufs["rstd"], bufs["y"], n, c))]

    def traffic(self, problem):
        e = problem.elem_bytes
        g = problem.cols * np.dtype(problem.dtype).itemsize
        return Traffic(flops=problem.flops, dram_bytes=3 * e + g + problem.rows * 8.0,
                       l2_bytes=3 * e + g * problem.rows, limiter="dram",
                       notes="two kernels each read x (2 reads + 1 write); uncoalesced row-per-thread access")


# --- rung 2 -------------------------------------------------------------------------------
def _check_block(block: int) -> None:
    if block < 32 or block > 1024 or block & (block - 1):
        raise UnsupportedProblem(f"block={block} must be a power of two in 32..1024")


@lru_cache(maxsize=None)
def _fused_kernel(B: int):
    @C.jit_block(B)
    def rms_fused(x, gamma, y, eps, cols):
        sh = cuda.shared.array(B, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        s = ZERO
        for j in range(t, cols, B):
            v = float32(x[r, j])
            s += v * v
        s = tree_sum(s, sh, B)
        q = ONE / math.sqrt(s / float32(cols) + eps)
        for j in range(t, cols, B):  # second sweep from L1/L2
            y[r, j] = float32(x[r, j]) * q * float32(gamma[j])

    return rms_fused


@dataclass(frozen=True)
class Fused(Variant):
    block: int = 256

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "fused"
    what: ClassVar[str] = (
        "One block per row, one kernel: coalesced strided sweeps, a shared-memory tree for the "
        "sum of squares; the second sweep re-reads the row from L1/L2, not DRAM."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_fused_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["gamma"], bufs["y"], C.eps32(problem), problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 2, "2 sweeps per row (1 from cache), one write; tree reduction",
                        smem=problem.rows * self.block * 4.0 * 1.5 * math.log2(self.block))


# --- rung 3 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _warp_kernel(B: int):
    @C.jit_block(B)
    def rms_warp(x, gamma, y, eps, cols):
        scr = cuda.shared.array(32, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        s = ZERO
        for j in range(t, cols, B):
            v = float32(x[r, j])
            s += v * v
        s = group_sum(s, B, scr)  # shuffles, then one slot per warp
        q = ONE / math.sqrt(s / float32(cols) + eps)
        for j in range(t, cols, B):
            y[r, j] = float32(x[r, j]) * q * float32(gamma[j])

    return rms_warp


@dataclass(frozen=True)
class Warp(Variant):
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "warp"
    what: ClassVar[str] = (
        "The sum of squares by warp shuffles (shfl_xor_sync butterflies in registers) and one "
        "shared slot per warp: two barriers instead of log2(block)."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_warp_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["gamma"], bufs["y"], C.eps32(problem), problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 2, "2 sweeps per row (1 from cache); shuffle reduction",
                        smem=problem.rows * 64.0 * 4)


# --- rung 4 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _rows_kernel(G: int, R: int, V: int):
    @C.jit_block(G * R)
    def rms_rows(x, gamma, y, eps, rows, cols):
        scr = cuda.shared.array(32, float32)
        buf = cuda.local.array(V, float32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0  # idle groups still join the reduction
        r = min(r, rows - 1)
        s = ZERO
        for base in range(lane, n, G * V):
            for v in range(V):  # V independent loads before any use
                j = base + v * G
                buf[v] = float32(x[r, j]) if j < n else ZERO
            for v in range(V):
                s += buf[v] * buf[v]
        s = group_sum(s, G, scr)
        q = ONE / math.sqrt(s / float32(cols) + eps)
        for base in range(lane, n, G * V):
            for v in range(V):
                j = base + v * G
                if j < n:
                    buf[v] = float32(x[r, j])
            for v in range(V):
                j = base + v * G
                if j < n:
                    y[r, j] = buf[v] * q * float32(gamma[j])

    return rms_rows


@lru_cache(maxsize=None)
def _rows4_kernel(G: int, R: int, V: int):
    @C.jit_block(G * R)
    def rms_rows4(x, gamma, y, eps, rows, cols):
        scr = cuda.shared.array(32, float32)
        buf = cuda.local.array((V, 4), float32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0
        r = min(r, rows - 1)
        s = ZERO
        for base in range(4 * lane, n, 4 * G * V):
            for v in range(V):  # V 128-bit loads in flight
                j = base + 4 * v * G
                if j < n:
                    buf[v, 0], buf[v, 1], buf[v, 2], buf[v, 3] = load4(x, r, j)
                else:
                    for q in range(4):
                        buf[v, q] = ZERO
            for v in range(V):
                for q in range(4):
                    s += buf[v, q] * buf[v, q]
        s = group_sum(s, G, scr)
        rs = ONE / math.sqrt(s / float32(cols) + eps)
        for base in range(4 * lane, n, 4 * G * V):
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    buf[v, 0], buf[v, 1], buf[v, 2], buf[v, 3] = load4(x, r, j)
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    for q in range(4):
                        y[r, j + q] = buf[v, q] * rs * gamma[j + q]

    return rms_rows4


def _vec4_ok(problem) -> bool:
    return problem.dtype == "float32" and problem.cols % 4 == 0


@dataclass(frozen=True)
class MultiRow(Variant):
    threads_per_row: int = 32
    rows_per_block: int = 4
    vec: int = 4

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "threads_per_row threads per row, rows_per_block rows per block, vec independent loads "
        "per thread before any use. Numba has no float4: float32 rows with cols % 4 == 0 use "
        "real 128-bit loads (load4 intrinsic); other rows use vec scalar loads a group apart."
    )

    def shape(self, problem) -> C.Shape:
        return C.Shape(self.threads_per_row, self.rows_per_block, self.vec)

    def supports(self, problem):
        s = self.shape(problem)
        bad = C.check_shape(s.G, s.R, s.V)
        if bad:
            raise UnsupportedProblem(f"{self.name}: " + "; ".join(bad))

    def plan(self, problem, bufs):
        self.supports(problem)
        s = self.shape(problem)
        k = (_rows4_kernel if _vec4_ok(problem) else _rows_kernel)(s.G, s.R, s.V)
        return [Launch(k, -(-problem.rows // s.R), s.block,
                       (bufs["x"], bufs["gamma"], bufs["y"], C.eps32(problem), problem.rows, problem.cols))]

    def traffic(self, problem):
        s = self.shape(problem)
        return _traffic(problem, 2, f"2 sweeps per row (1 from cache), {s.V} loads in flight per thread, "
                                    f"{s.R} rows per block")


# --- rung 5 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tuned(MultiRow):
    # 0 = the static rule of _common.static_shape (no GPU timed candidates when this was
    # written); run search(problem, time_fn=...) on a GPU and pass the winner's fields instead.
    threads_per_row: int = 0
    rows_per_block: int = 0
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "tuned"
    what: ClassVar[str] = (
        "Rung 4 at a launch shape fitted to the row width: search() times every legal shape with "
        "a time_fn on a GPU; without one, the static rule (~4 trips of vec per thread, >= 128 "
        "threads per block)."
    )

    def shape(self, problem) -> C.Shape:
        st = C.static_shape(problem.cols, self.vec)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R, self.vec)


def search(problem: Problem, time_fn: Callable[[Variant], float] | None = None,
           candidates: list[C.Shape] | None = None) -> list[tuple[Variant, float | None]]:
    """Rank launch shapes of the tuned rung (timed by ``time_fn`` on a GPU, else static rule)."""
    return C.search(lambda s: Tuned(threads_per_row=s.G, rows_per_block=s.R, vec=s.V), problem.cols,
                    time_fn, candidates)


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), MultiRow(), Tuned()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384, 65536)]
SIM_SWEEP = [Problem(3, 37)]
