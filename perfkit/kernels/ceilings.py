"""The two ceiling kernels perfkit measures a GPU with (:mod:`perfkit.roofline` records and
plots them): a 16-byte copy for the attainable DRAM bandwidth and independent FMA chains for
the attainable FP32 rate, each as a Problem and a Variant, checked like any rung and
inspected by the anatomy."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32  # module level: the simulator swaps only a kernel's globals

from .. import backend
from ._vector import ld4, st4
from .base import Launch, Problem, ProblemError, Traffic, Variant

__all__ = ["COPY_BLOCK", "COPY_UNROLL", "FMA_BLOCK", "FMA_CHAINS", "FMA_UNROLL", "copy16", "copy_launcher",
           "full_wave_blocks", "fma_kernel", "CopyProblem", "Copy16", "FmaProblem", "FmaChains", "COPY", "FMA"]

# --- measured ceilings ---------------------------------------------------------------------
# The first H100 run measured 2360 GB/s (72% of DRAM peak in Nsight Compute: 4-byte accesses,
# too few bytes in flight) and 31.4 TFLOP/s (47% of the FP32 peak: a loop of 8 FMAs with its
# counter, compare and branch, and 16 blocks per SM of 256 threads, two waves). The kernels
# below are built to approach the hardware:
#
# * copy: 16-byte loads and stores (LDG.E.128 / STG.E.128), COPY_UNROLL of them in flight per
#   thread before the first store, a grid of exactly one full wave (2048 threads per SM) that
#   strides through the array;
# * FMA: FMA_CHAINS independent chains per thread, the loop body unrolled FMA_UNROLL times
#   (FMA_CHAINS * FMA_UNROLL FFMAs per counter/compare/branch), one full wave of 256-thread blocks.
COPY_BLOCK, COPY_UNROLL = 256, 4
FMA_BLOCK, FMA_CHAINS, FMA_UNROLL = 256, 8, 16

@cuda.jit
def copy16(dst, src, n):
    """dst[:n] = src[:n] with 16-byte accesses: COPY_UNROLL float4 loads in flight per thread,
    grid-stride over float4 vectors, then a scalar tail (n need not be a multiple of 4)."""
    nv = n // 4
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + 3 * stride < nv:  # COPY_UNROLL = 4: four loads issued before the first store
        a0, a1, a2, a3 = ld4(src, 4 * i)
        b0, b1, b2, b3 = ld4(src, 4 * (i + stride))
        c0, c1, c2, c3 = ld4(src, 4 * (i + 2 * stride))
        d0, d1, d2, d3 = ld4(src, 4 * (i + 3 * stride))
        st4(dst, 4 * i, a0, a1, a2, a3)
        st4(dst, 4 * (i + stride), b0, b1, b2, b3)
        st4(dst, 4 * (i + 2 * stride), c0, c1, c2, c3)
        st4(dst, 4 * (i + 3 * stride), d0, d1, d2, d3)
        i += 4 * stride
    while i < nv:
        a0, a1, a2, a3 = ld4(src, 4 * i)
        st4(dst, 4 * i, a0, a1, a2, a3)
        i += stride
    j = 4 * nv + cuda.grid(1)
    if j < n:  # at most 3 elements
        dst[j] = src[j]


def _fma_source(chains: int, unroll: int) -> str:
    init = "\n".join(f"    x{k} = float32(cuda.threadIdx.x) + float32({k})" for k in range(chains))
    body = "\n".join(f"        x{k} = x{k} * b + c" for _ in range(unroll) for k in range(chains))
    total = " + ".join(f"x{k}" for k in range(chains))
    return (f"def fma_chains(out, b, c, iters):\n{init}\n    for _ in range(iters):\n{body}\n"
            f"    i = cuda.grid(1)\n    if i < out.size:  # keep the result so the loop stays\n"
            f"        out[i] = {total}\n")


@lru_cache(maxsize=None)
def fma_kernel(chains: int = FMA_CHAINS, unroll: int = FMA_UNROLL):
    """``chains`` independent FMA chains per thread, the loop body unrolled ``unroll`` times:
    chains * unroll FFMAs per iteration of a loop whose trip count ``iters`` is an argument."""
    ns = {"cuda": cuda, "float32": float32}
    exec(compile(_fma_source(chains, unroll), f"<perfkit.kernels.ceilings fma {chains}x{unroll}>", "exec"), ns)
    return cuda.jit(ns["fma_chains"])


def full_wave_blocks(block: int, blocks_per_sm: int | None = None) -> int:
    """Blocks that fill every SM once (2048 threads per SM on cc 8.0-9.0); a few in the simulator."""
    if backend.is_simulator():
        return 2
    dev = backend.device()
    per_sm = blocks_per_sm or max(1, 2048 // block)
    return (dev.sm_count or 1) * per_sm


def copy_launcher(dst, src, grid: int | None = None):
    """A callable that copies device array ``src`` into ``dst`` (float32, same size) with the
    16-byte copy kernel, for :func:`perfkit.timing.measure`."""
    n = int(src.size)
    if dst.size != n:
        raise ValueError(f"copy: dst has {dst.size} elements, src {n}")
    grid = grid or max(1, min(full_wave_blocks(COPY_BLOCK), -(-n // (4 * COPY_BLOCK))))
    import warnings

    with warnings.catch_warnings():  # a small grid on purpose in the simulator
        warnings.simplefilter("ignore")
        launch = copy16[grid, COPY_BLOCK]
    return lambda: launch(dst, src, n)


# --- the ceilings as Problems and Variants: checked like any rung, inspected by the anatomy ---
@dataclass(frozen=True)
class CopyProblem(Problem):
    """``dst = src`` for ``n`` float32 elements: the DRAM bandwidth ceiling (reads + writes)."""

    n: int
    op: ClassVar[str] = "copy"

    def validate(self):
        if not isinstance(self.n, (int, np.integer)) or isinstance(self.n, bool) or self.n < 1:
            raise ProblemError(f"copy: n must be an int >= 1, got {self.n!r}")

    def input_specs(self):
        return {"src": ((self.n,), "float32")}

    def output_specs(self):
        return {"dst": ((self.n,), "float32")}

    def _make(self, g):
        return {"src": g.standard_normal(self.n).astype(np.float32)}

    def _reference(self, inputs):
        return inputs["src"].astype(np.float64)

    @property
    def flops(self):
        return 0.0


@dataclass(frozen=True)
class Copy16(Variant):
    block: int = COPY_BLOCK
    rung: ClassVar[int] = 0
    name: ClassVar[str] = "copy"
    what: ClassVar[str] = "16-byte loads and stores, 4 in flight per thread, one full wave, grid-stride"

    def grid(self, problem):
        return max(1, min(full_wave_blocks(self.block), -(-problem.n // (4 * self.block))))

    def plan(self, problem, bufs):
        return [Launch(copy16, self.grid(problem), self.block, (bufs["dst"], bufs["src"], problem.n))]

    def traffic(self, problem):
        return Traffic(flops=0.0, dram_bytes=problem.bytes, l2_bytes=problem.bytes, limiter="dram",
                        notes="read n floats, write n floats")


@dataclass(frozen=True)
class FmaProblem(Problem):
    """``blocks * threads`` threads each run ``FMA_CHAINS`` chains ``x = x * b + c`` for
    ``iters * FMA_UNROLL`` steps; out[i] is the sum of thread i's chains."""

    iters: int
    blocks: int
    threads: int = FMA_BLOCK
    op: ClassVar[str] = "fma"
    B: ClassVar[float] = 0.5  # x -> 0.5 x + 0.5 contracts to 1: exact in float32, no overflow
    C: ClassVar[float] = 0.5

    def validate(self):
        for k in ("iters", "blocks", "threads"):
            v = getattr(self, k)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ProblemError(f"fma: {k} must be an int >= 1, got {v!r}")

    def input_specs(self):
        return {}

    def output_specs(self):
        return {"out": ((self.blocks * self.threads,), "float32")}

    def _make(self, g):
        return {}

    def _reference(self, inputs):
        steps = self.iters * FMA_UNROLL
        tid = np.arange(self.blocks * self.threads, dtype=np.float64) % self.threads
        bn = self.B ** steps
        fixed = self.C / (1 - self.B)
        return sum(bn * (tid + k) + fixed * (1 - bn) for k in range(FMA_CHAINS))

    @property
    def flops(self):
        return 2.0 * FMA_CHAINS * FMA_UNROLL * self.iters * self.blocks * self.threads

    @property
    def bytes(self):
        return 4.0 * self.blocks * self.threads


@dataclass(frozen=True)
class FmaChains(Variant):
    rung: ClassVar[int] = 1
    name: ClassVar[str] = "fma"
    what: ClassVar[str] = (f"{FMA_CHAINS} independent FMA chains per thread, {FMA_UNROLL}x unrolled loop body")

    def plan(self, problem, bufs):
        return [Launch(fma_kernel(), problem.blocks, problem.threads,
                        (bufs["out"], np.float32(problem.B), np.float32(problem.C), problem.iters))]

    def traffic(self, problem):
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, limiter="compute",
                        notes="FFMA only; one store per thread")


COPY, FMA = Copy16(), FmaChains()
