"""SAXPY, ``out = alpha * x + y``: the memory-bound op of notebook 01.

Ledger (one line per rung; the rung number and name live only in ``LADDER``):

  0 oracle        CuPy's elementwise kernel on a GPU; NumPy on the host in the simulator
  1 naive         one thread per element, as many blocks as it takes
  2 grid_stride   a fixed grid of a few blocks per SM, each thread loops over the array
  3 unrolled      grid-stride with several independent elements in flight per thread

Every rung reads ``x`` and ``y`` once and writes ``out`` once: 12 bytes and 2 FLOPs per
float32 element, an arithmetic intensity of 1/6 FLOP/byte, far left of any GPU's ridge point.
The ladder is about how close to the copy bandwidth a launch shape gets, not about FLOPs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda

from .base import Traffic
from .base import (Launch, OracleVariant, Problem, ProblemError, TunableVariant, Variant,
                   check_launch_shape, registry_check)

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "GridStride", "Unrolled"]

Base = Problem


@dataclass(frozen=True)
class Problem(Base):
    """``out[i] = alpha * x[i] + y[i]`` for ``i < n``."""

    n: int
    dtype: str = "float32"
    alpha: float = 2.0

    op: ClassVar[str] = "saxpy"
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float64")

    def validate(self) -> None:
        if not isinstance(self.n, (int, np.integer)) or isinstance(self.n, bool):
            raise ProblemError(f"saxpy: n must be an int, got {self.n!r}")
        if self.n < 1:
            raise ProblemError(f"saxpy: n must be >= 1, got {self.n} (empty arrays have nothing to time)")
        if not isinstance(self.alpha, (int, float, np.integer, np.floating)) or isinstance(self.alpha, bool):
            raise ProblemError(f"saxpy: alpha must be a real number, got {self.alpha!r} "
                               f"({type(self.alpha).__name__})")
        try:
            finite = math.isfinite(self.alpha) and abs(float(self.alpha)) <= float(np.finfo(self.dtype).max)
        except OverflowError:  # an int beyond float64
            finite = False
        if not finite:
            raise ProblemError(f"saxpy: alpha must be finite in {self.dtype} (|alpha| <= "
                               f"{np.finfo(self.dtype).max:.4g}), got {self.alpha}")

    def input_specs(self):
        return {"x": ((self.n,), self.dtype), "y": ((self.n,), self.dtype)}

    def output_specs(self):
        return {"out": ((self.n,), self.dtype)}

    def _make(self, g):
        return {k: g.standard_normal(self.n).astype(self.dtype) for k in ("x", "y")}

    def _reference(self, inputs):
        return self.alpha * inputs["x"].astype(np.float64) + inputs["y"].astype(np.float64)

    @property
    def flops(self) -> float:
        return 2.0 * self.n


def _traffic(problem: Problem, note: str) -> Traffic:
    return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=problem.bytes,
                   limiter="dram", notes=note)


@dataclass(frozen=True)
class _Tunable(TunableVariant):
    """A rung whose fields (block size, blocks per SM, unroll) must each be an int >= 1;
    ``supports`` checks the launch it plans against what a GPU runs."""

    def grid(self, problem: Problem) -> int:
        raise NotImplementedError

    def supports(self, problem):
        """More than 1024 threads per block or 2**31 - 1 blocks: no GPU launches it."""
        check_launch_shape(f"{self.label} {self.config}", self.grid(problem), self.block, 0, problem.label)


# --- rung 0 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = "The library's own elementwise kernel (CuPy) on a GPU; NumPy on the host."

    def gpu(self, problem, x, out):
        import cupy as cp

        cp.multiply(x["x"], x["x"].dtype.type(problem.alpha), out=out["out"])
        cp.add(out["out"], x["y"], out=out["out"])

    def host(self, problem, x):
        a = x["x"].dtype.type(problem.alpha)
        return (a * x["x"] + x["y"]).astype(problem.dtype)

    def traffic(self, problem):
        # CuPy makes two passes (multiply, then add): out is written twice and read once more.
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes * 5 / 3, limiter="dram",
                       notes="two elementwise kernels: 5 array passes instead of 3")


# --- rung 1 -------------------------------------------------------------------------------
@cuda.jit
def saxpy_naive(out, x, y, alpha, n):
    i = cuda.grid(1)
    if i < n:  # the last block may run past the end
        out[i] = alpha * x[i] + y[i]


@dataclass(frozen=True)
class Naive(_Tunable):
    block: int = 256

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per element and ceil(n / block) blocks. Consecutive threads touch "
        "consecutive addresses, so every warp's load is one coalesced 128-byte transaction."
    )

    def grid(self, problem):
        return -(-problem.n // self.block)

    def plan(self, problem, bufs):
        alpha = np.dtype(problem.dtype).type(problem.alpha)
        return [Launch(saxpy_naive, self.grid(problem), self.block,
                       (bufs["out"], bufs["x"], bufs["y"], alpha, problem.n))]

    def traffic(self, problem):
        return _traffic(problem, "one load of x and y, one store of out per element")


# --- rung 2 -------------------------------------------------------------------------------
@cuda.jit
def saxpy_grid_stride(out, x, y, alpha, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        out[i] = alpha * x[i] + y[i]


def _resident_grid(problem_n: int, block: int, blocks_per_sm: int) -> int:
    """A grid that fills the device once (SMs x blocks_per_sm), never more blocks than work."""
    from .. import backend

    sms = backend.device().sm_count or 4  # the simulator has no SMs: a few blocks suffice
    return max(1, min(sms * blocks_per_sm, -(-problem_n // block)))


@dataclass(frozen=True)
class GridStride(_Tunable):
    block: int = 256
    blocks_per_sm: int = 8

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "grid_stride"
    what: ClassVar[str] = (
        "A fixed grid sized to fill every SM once; each thread strides through the array. "
        "Fewer blocks to schedule and retire, and the launch shape no longer grows with n."
    )

    def grid(self, problem):
        return _resident_grid(problem.n, self.block, self.blocks_per_sm)

    def plan(self, problem, bufs):
        alpha = np.dtype(problem.dtype).type(problem.alpha)
        return [Launch(saxpy_grid_stride, self.grid(problem), self.block,
                       (bufs["out"], bufs["x"], bufs["y"], alpha, problem.n))]

    def traffic(self, problem):
        return _traffic(problem, "same bytes as naive; fewer blocks")


# --- rung 3 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _unrolled_kernel(unroll: int):
    """Each thread keeps ``unroll`` independent loads in flight (memory-level parallelism).

    The element indices of one thread are ``base + j * stride`` so that, for every ``j``,
    a warp still touches consecutive addresses (coalesced).
    """

    @cuda.jit
    def saxpy_unrolled(out, x, y, alpha, n):
        stride = cuda.gridsize(1)
        base = cuda.grid(1)
        step = stride * unroll
        while base < n:
            for j in range(unroll):  # constant trip count: Numba/LLVM unrolls it
                i = base + j * stride
                if i < n:
                    out[i] = alpha * x[i] + y[i]
            base += step

    return saxpy_unrolled


@dataclass(frozen=True)
class Unrolled(_Tunable):
    block: int = 256
    blocks_per_sm: int = 4
    unroll: int = 4

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "unrolled"
    what: ClassVar[str] = (
        "Grid-stride with several independent elements per loop trip. Little's law: to keep "
        "the memory system busy, bytes in flight = bandwidth x latency; more loads per thread "
        "raise bytes in flight without more threads."
    )

    def grid(self, problem):
        return _resident_grid(-(-problem.n // self.unroll), self.block, self.blocks_per_sm)

    def plan(self, problem, bufs):
        alpha = np.dtype(problem.dtype).type(problem.alpha)
        return [Launch(_unrolled_kernel(self.unroll), self.grid(problem), self.block,
                       (bufs["out"], bufs["x"], bufs["y"], alpha, problem.n))]

    def traffic(self, problem):
        return _traffic(problem, f"same bytes; {self.unroll} loads of x and y in flight per thread")


LADDER: list[Variant] = [Oracle(), Naive(), GridStride(), Unrolled()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(n=1 << 26)  # for the anatomy view (compiled, never run)
GPU_SWEEP = [Problem(n=1 << k) for k in (16, 20, 24, 26, 28)]  # tools/record_gpu.py on a GPU
SIM_SWEEP = [Problem(n=1000)]  # the same tool's dry run in the simulator
