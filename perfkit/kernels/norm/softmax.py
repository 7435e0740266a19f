"""Softmax over the last dimension of a (rows, cols) array, numerically stable:
``y[r, j] = exp(x[r, j] - max_r) / sum_j exp(x[r, j] - max_r)``.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.softmax on a GPU (a CuPy expression without torch); NumPy here
  1 naive       one thread per row, three kernels (max, sum, write); statistics in a workspace
  2 fused       one block per row, one kernel, shared-memory tree reductions (three sweeps)
  3 warp        the same with warp-shuffle reductions (two barriers per reduction, not log2(B))
  4 online      single-pass statistics: running max and a sum rescaled when the max grows
  5 multirow    G threads per row, R rows per block, V loads in flight per thread
                (float32 rows with cols % 4 == 0: 128-bit loads through ``_vector.load4``)
  6 tuned       rung 5 at the launch shape chosen by ``search`` (static rule without a GPU)

Memory-bound: ~5 FLOPs per element against 8 bytes (float32 read + write), so the target is
one DRAM read of x and one write of y; every extra sweep over a row should hit L1/L2.
float16 inputs are read and converted to float32; all arithmetic is float32; y is stored in the
input dtype.  A NaN anywhere in a row makes that whole row NaN (as the reference does).
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
from ._common import NEG_INF, ONE, ZERO, group_max, group_softmax_stats, group_sum, softmax_merge, tree_max, tree_sum

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Online", "MultiRow", "Tuned",
           "search", "EXAMPLE_PROBLEM"]


@dataclass(frozen=True)
class Problem(C.RowProblem):
    """Softmax of every row of x (rows, cols) along the last axis."""

    rows: int
    cols: int
    dtype: str = "float32"
    axis: int = -1

    op: ClassVar[str] = "softmax"

    def input_specs(self):
        return {"x": ((self.rows, self.cols), self.dtype)}

    def output_specs(self):
        return {"y": ((self.rows, self.cols), self.dtype)}

    def _make(self, g):
        return {"x": (2.0 * g.standard_normal((self.rows, self.cols))).astype(self.dtype)}

    def _reference(self, inputs):
        x = inputs["x"].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    @property
    def flops(self) -> float:
        return 5.0 * self.rows * self.cols  # max, subtract, exp, add, scale (exp counted as one)


def _traffic(p: Problem, sweeps: int, note: str, smem: float = 0.0, extra_dram: float = 0.0) -> Traffic:
    """``sweeps`` reads of each row (the last one feeds the write) and one write of y."""
    e = p.elem_bytes
    return Traffic(flops=p.flops, dram_bytes=C.sweep_dram(p.rows, p.cols, p.dtype, sweeps) + e + extra_dram,
                   l2_bytes=sweeps * e + e + extra_dram, smem_bytes=smem, limiter="dram", notes=note)


# --- rung 0 -------------------------------------------------------------------------------
def _torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = ("PyTorch's softmax kernel (torch.nn.functional.softmax, fp32 accumulation) on a GPU, "
                           "or a CuPy expression if torch is missing; NumPy in float32 on the host.")

    def gpu(self, problem, x, out):
        torch = _torch()
        if torch is not None:
            return {"y": torch.softmax(torch.from_dlpack(x["x"]), dim=-1)}  # torch's buffer: no copy timed
        import cupy as cp

        xf = x["x"].astype(cp.float32)
        e = cp.exp(xf - xf.max(axis=1, keepdims=True))
        out["y"][...] = (e / e.sum(axis=1, keepdims=True)).astype(out["y"].dtype)

    def host(self, problem, x):
        xf = x["x"].astype(np.float32)
        e = np.exp(xf - xf.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(problem.dtype)

    def traffic(self, problem):
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=problem.bytes, limiter="dram",
                       notes="torch's fused kernel: reads x once and writes y once (into its own buffer)")


# --- rung 1 -------------------------------------------------------------------------------
@cuda.jit
def softmax_row_max(x, row_max, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = NEG_INF
        for j in range(cols):
            m = max(m, float32(x[r, j]))
        row_max[r] = m


@cuda.jit
def softmax_row_sum(x, row_max, row_sum, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = row_max[r]
        s = ZERO
        for j in range(cols):
            s += math.exp(float32(x[r, j]) - m)
        row_sum[r] = s


@cuda.jit
def softmax_row_write(x, row_max, row_sum, y, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = row_max[r]
        inv = ONE / row_sum[r]
        for j in range(cols):
            y[r, j] = math.exp(float32(x[r, j]) - m) * inv


@dataclass(frozen=True)
class Naive(Variant):
    block: int = 128

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per row and one kernel per pass: row max, sum of exp(x - max), write. "
        "Statistics go through global temporaries, x is read three times, and neighbouring "
        "threads read addresses a whole row apart (uncoalesced: 32 sectors per warp load). "
        "With few rows most of the GPU idles: no parallelism inside a row."
    )

    def workspace(self, problem):
        return {"row_max": ((problem.rows,), "float32"), "row_sum": ((problem.rows,), "float32")}

    def plan(self, problem, bufs):
        g = -(-problem.rows // self.block)
        n, c = problem.rows, problem.cols
        x, mx, sm, y = bufs["x"], bufs["row_max"], bufs["row_sum"], bufs["y"]
        return [Launch(softmax_row_max, g, self.block, (x, mx, n, c)),
                Launch(softmax_row_sum, g, self.block, (x, mx, sm, n, c)),
                Launch(softmax_row_write, g, self.block, (x, mx, sm, y, n, c))]

    def traffic(self, problem):
        e = problem.elem_bytes
        ws = problem.rows * 4.0 * 5  # write max, read it twice, write sum, read it once
        return Traffic(flops=problem.flops, dram_bytes=3 * e + e + ws, l2_bytes=3 * e + e + ws,
                       limiter="dram", notes="three kernels each read x: 3 reads + 1 write; uncoalesced "
                                             "row-per-thread access wastes most of every sector")


# --- rung 2 -------------------------------------------------------------------------------
def _check_block(block: int) -> None:
    if block < 32 or block > 1024 or block & (block - 1):
        raise UnsupportedProblem(f"block={block} must be a power of two in 32..1024")


@lru_cache(maxsize=None)
def _fused_kernel(B: int):
    @C.jit_block(B)
    def softmax_fused(x, y, cols):
        sh = cuda.shared.array(B, float32)  # one float per thread for the tree
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        m = NEG_INF
        for j in range(t, cols, B):  # strided by the block: each warp load is coalesced
            m = max(m, float32(x[r, j]))
        m = tree_max(m, sh, B)
        s = ZERO
        for j in range(t, cols, B):  # second sweep: the row is still in L1/L2
            s += math.exp(float32(x[r, j]) - m)
        s = tree_sum(s, sh, B)
        inv = ONE / s
        for j in range(t, cols, B):
            y[r, j] = math.exp(float32(x[r, j]) - m) * inv

    return softmax_fused


@dataclass(frozen=True)
class Fused(Variant):
    block: int = 256

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "fused"
    what: ClassVar[str] = (
        "One block per row and one kernel: threads stride through the row (coalesced), reduce "
        "max and sum with a shared-memory tree (log2(block) steps, a barrier each). The row "
        "is swept three times, but sweeps 2 and 3 hit L1/L2: x leaves DRAM once."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_fused_kernel(self.block), problem.rows, self.block, (bufs["x"], bufs["y"], problem.cols))]

    def traffic(self, problem):
        steps = 2 * int(math.log2(self.block))
        return _traffic(problem, 3, "3 sweeps per row (2 from cache), one write; tree reductions",
                        smem=problem.rows * self.block * 4.0 * 3 * steps / 2)


# --- rung 3 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _warp_kernel(B: int):
    @C.jit_block(B)
    def softmax_warp(x, y, cols):
        scr = cuda.shared.array(32, float32)  # one partial per warp
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        m = NEG_INF
        for j in range(t, cols, B):
            m = max(m, float32(x[r, j]))
        m = group_max(m, B, scr)  # shfl_xor butterflies, then the warps' partials
        s = ZERO
        for j in range(t, cols, B):
            s += math.exp(float32(x[r, j]) - m)
        s = group_sum(s, B, scr)
        inv = ONE / s
        for j in range(t, cols, B):
            y[r, j] = math.exp(float32(x[r, j]) - m) * inv

    return softmax_warp


@dataclass(frozen=True)
class Warp(Variant):
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "warp"
    what: ClassVar[str] = (
        "Reductions by warp shuffles (shfl_xor_sync butterflies: registers to registers, no "
        "shared memory, no barrier), then one shared slot per warp and two barriers per "
        "reduction instead of log2(block)."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_warp_kernel(self.block), problem.rows, self.block, (bufs["x"], bufs["y"], problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 3, "3 sweeps per row (2 from cache); shuffle reductions",
                        smem=problem.rows * 64.0 * 4)


# --- rung 4 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _online_kernel(B: int):
    @C.jit_block(B)
    def softmax_online(x, y, cols):
        scr_m = cuda.shared.array(32, float32)
        scr_s = cuda.shared.array(32, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        m = NEG_INF
        s = ZERO
        for j in range(t, cols, B):  # one sweep for both statistics
            v = float32(x[r, j])
            if v > m:  # new max: rescale what was summed so far
                s = s * math.exp(m - v) + ONE
                m = v
            else:  # (-inf adds nothing; NaN poisons s)
                s += math.exp(v - m) if v != NEG_INF else ZERO
        m, s = group_softmax_stats(m, s, B, scr_m, scr_s)  # merge (max, sum) pairs
        inv = ONE / s
        for j in range(t, cols, B):
            y[r, j] = math.exp(float32(x[r, j]) - m) * inv

    return softmax_online


@dataclass(frozen=True)
class Online(Variant):
    block: int = 256

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "online"
    what: ClassVar[str] = (
        "Online softmax (Milakov & Gimelshein 2018): each thread keeps a running max m and a sum "
        "s of exp(x - m), multiplying s by exp(m_old - m_new) when the max grows; partial (m, s) "
        "pairs merge the same way across lanes. Statistics take one sweep instead of two."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_online_kernel(self.block), problem.rows, self.block, (bufs["x"], bufs["y"], problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 2, "2 sweeps per row (statistics, write), one write",
                        smem=problem.rows * 128.0 * 4)


# --- rung 5 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _rows_kernel(G: int, R: int, V: int):
    """G threads per row, R rows per block, V independent loads per thread per trip: slot v of
    a trip reads x[r, base + v*G] so that, for every v, a warp touches consecutive addresses."""

    @C.jit_block(G * R)
    def softmax_rows(x, y, rows, cols):
        scr_m = cuda.shared.array(32, float32)
        scr_s = cuda.shared.array(32, float32)
        buf = cuda.local.array(V, float32)  # constant size: lives in registers
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0  # idle groups still join the reductions
        r = min(r, rows - 1)
        m = NEG_INF
        s = ZERO
        for base in range(lane, n, G * V):
            for v in range(V):  # issue all V loads before using any
                j = base + v * G
                buf[v] = float32(x[r, j]) if j < n else NEG_INF
            mt = NEG_INF  # not buf[0]: a NaN must not seed the max (max(NaN, a) is NaN in Python, a on a GPU)
            for v in range(V):
                mt = max(mt, buf[v])
            st = ZERO
            for v in range(V):
                st += math.exp(buf[v] - mt) if buf[v] != NEG_INF else ZERO
            m, s = softmax_merge(m, s, mt, st)
        m, s = group_softmax_stats(m, s, G, scr_m, scr_s)
        inv = ONE / s if n > 0 else ZERO
        for base in range(lane, n, G * V):
            for v in range(V):
                j = base + v * G
                if j < n:
                    buf[v] = float32(x[r, j])
            for v in range(V):
                j = base + v * G
                if j < n:
                    y[r, j] = math.exp(buf[v] - m) * inv

    return softmax_rows


@lru_cache(maxsize=None)
def _rows4_kernel(G: int, R: int, V: int):
    """float32 and cols % 4 == 0: each slot is one 128-bit load of 4 consecutive floats
    (``load4``, LDG.E.128), so a warp moves 512 bytes per instruction."""

    @C.jit_block(G * R)
    def softmax_rows4(x, y, rows, cols):
        scr_m = cuda.shared.array(32, float32)
        scr_s = cuda.shared.array(32, float32)
        buf = cuda.local.array((V, 4), float32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0
        r = min(r, rows - 1)
        m = NEG_INF
        s = ZERO
        for base in range(4 * lane, n, 4 * G * V):
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    buf[v, 0], buf[v, 1], buf[v, 2], buf[v, 3] = load4(x, r, j)
                else:
                    buf[v, 0] = NEG_INF
                    buf[v, 1] = NEG_INF
                    buf[v, 2] = NEG_INF
                    buf[v, 3] = NEG_INF
            mt = NEG_INF
            for v in range(V):
                for q in range(4):
                    mt = max(mt, buf[v, q])
            st = ZERO
            for v in range(V):
                for q in range(4):
                    st += math.exp(buf[v, q] - mt) if buf[v, q] != NEG_INF else ZERO
            m, s = softmax_merge(m, s, mt, st)
        m, s = group_softmax_stats(m, s, G, scr_m, scr_s)
        inv = ONE / s if n > 0 else ZERO
        for base in range(4 * lane, n, 4 * G * V):
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    buf[v, 0], buf[v, 1], buf[v, 2], buf[v, 3] = load4(x, r, j)
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    for q in range(4):
                        y[r, j + q] = math.exp(buf[v, q] - m) * inv

    return softmax_rows4


def _vec4_ok(problem) -> bool:
    return problem.dtype == "float32" and problem.cols % 4 == 0


@dataclass(frozen=True)
class MultiRow(Variant):
    threads_per_row: int = 32
    rows_per_block: int = 4
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "A group of threads_per_row threads per row and rows_per_block rows per block (narrow "
        "rows no longer leave most of a block idle), each thread issuing vec independent loads "
        "before using any (Little's law: more bytes in flight). Numba has no float4: for float32 "
        "rows with cols % 4 == 0 each load is a real 128-bit ld.global.v4 through the load4 "
        "intrinsic; otherwise vec scalar loads a group-width apart (each coalesced) play its part."
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
        grid = -(-problem.rows // s.R)
        return [Launch(k, grid, s.block, (bufs["x"], bufs["y"], problem.rows, problem.cols))]

    def traffic(self, problem):
        s = self.shape(problem)
        width = "128-bit" if _vec4_ok(problem) else "scalar"
        return _traffic(problem, 2, f"2 sweeps per row (stats, write), {s.V} {width} loads in flight "
                                    f"per thread, {s.R} rows per block")


# --- rung 6 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tuned(MultiRow):
    # 0 = the static rule of _common.static_shape (no GPU timed candidates when this was
    # written); run search(problem, time_fn=...) on a GPU and pass the winner's fields instead.
    threads_per_row: int = 0
    rows_per_block: int = 0
    vec: int = 4

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "tuned"
    what: ClassVar[str] = (
        "Rung 5 at a launch shape fitted to the row width: search() times every legal "
        "(threads_per_row, rows_per_block, vec) with a time_fn on a GPU; without one, the static "
        "rule: ~4 trips of vec elements per thread, >= 128 threads per block."
    )

    def shape(self, problem) -> C.Shape:
        st = C.static_shape(problem.cols, self.vec)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R, self.vec)


def search(problem: Problem, time_fn: Callable[[Variant], float] | None = None,
           candidates: list[C.Shape] | None = None) -> list[tuple[Variant, float | None]]:
    """Rank launch shapes of rung 6 for ``problem``: ``time_fn(variant) -> seconds`` on a GPU
    (e.g. ``lambda v: bench.sweep([problem], [v]).median_s[0]``), else the static rule."""
    return C.search(lambda s: Tuned(threads_per_row=s.G, rows_per_block=s.R, vec=s.V), problem.cols,
                    time_fn, candidates)


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), Online(), MultiRow(), Tuned()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)  # for the anatomy view (compiled, never run here)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384, 65536)]
SIM_SWEEP = [Problem(3, 37)]
