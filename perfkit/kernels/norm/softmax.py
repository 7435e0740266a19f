"""Softmax over the last dimension of a (rows, cols) array, numerically stable:
``y[r, j] = exp(x[r, j] - max_r) / sum_j exp(x[r, j] - max_r)``.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.softmax on a GPU (a CuPy expression without torch); NumPy here
  1 naive       one thread per row, three kernels (max, sum, write); statistics in a workspace
  2 fused       one block per row, one kernel, shared-memory tree reductions (three sweeps)
  3 warp        the same with warp-shuffle reductions (two barriers per reduction, not log2(B))
  4 online      single-pass statistics: running max and a sum rescaled when the max grows
  5 multirow    G threads per row, R rows per block; the row stays in registers between the
                statistics and the write (x read from DRAM once); 16-byte / half2 vector loads
  6 tuned       rung 5 at the launch shape of a rule drawn from the H100 records (``search``
                ranks shapes by measurement on a GPU)
  7 smem_row    one block per row, the row staged once in dynamic shared memory (16-byte
                cp.async): every sweep reads it there, so x leaves DRAM once at any width
                up to 227 KiB a row
  8 packed      float16 by bytes: 64 bytes of its row a thread (32 halves, not 16), held packed
                two halves a register; 16-byte loads and stores of half2 words
  9 persist     narrow rows: a persistent grid (SMs x blocks an SM holds) loops over rows, each
                group loading its next row into registers before it reduces this one
 10 split_row   rows too wide for shared memory alone (65536 float32): one block per row holds
                part of the row in registers and stages the rest in shared memory (cp.async),
                so x leaves DRAM once at any width up to 16384 + 227 KiB of columns

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
from numba import cuda, float32, uint32
from numba.types import float16

from ..base import Traffic
from ..base import Launch, OracleVariant, UnsupportedProblem, Variant, registry_check
from . import _common as C
from ._vec import vec_load, vec_store
from ._common import NEG_INF, ONE, ZERO, group_max, group_softmax_stats, group_sum, softmax_merge, tree_max, tree_sum
from ._smemrow import SmemRowShape, jit_row, per_copy, stage_row
from ._packed import CHUNK, WORDS, PackedShape, halves, load_chunk, pack2, store_chunk
from ._persist import PersistShape, jit_persist
from ._splitrow import SplitRowShape, block_max, block_sum, jit_split, stage_part
from .._dynsmem import OptInSharedLaunch, shared_tile

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Online", "MultiRow", "Tuned",
           "SmemRow", "Packed", "Persist", "SplitRow", "search", "EXAMPLE_PROBLEM"]


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
                   l2_bytes=C.sweep_l2(p.rows, p.cols, p.dtype, sweeps) + e + extra_dram,
                   l1_bytes=sweeps * e + e + extra_dram, smem_bytes=smem, limiter="dram", notes=note)


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
        "One thread per row and one kernel per pass (max, sum of exp(x - max), write), statistics "
        "through global temporaries: x is read three times. Neighbouring threads read addresses a "
        "row apart, so no load coalesces.")

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
        return Traffic(flops=problem.flops, dram_bytes=3 * e + e + ws, l1_bytes=3 * e + e + ws,
                       l2_bytes=3 * e + C.scattered_store_l2(e, problem.dtype) + ws,
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
def _rows_kernel(G: int, R: int, V: int, W: int, NC: int, TAIL: bool = True):
    """G threads per row, R rows per block; loads and stores of W elements (W * itemsize bytes:
    128-bit float4 / 8 halves, a half2 pair, or scalars); the first NC chunks of W elements of
    each thread's share of the row (chunk c at column W * (lane + c * G): a warp's chunk is
    contiguous) stay in registers from the statistics to the write, so that part of x is read
    from DRAM once.  Wider rows: the rest is swept in trips of V chunks and read again."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W
    VW = V * W

    @C.jit_cached(G * R, CW)
    def softmax_rows(x, y, rows, cols):
        scr_m = cuda.shared.array(32, float32)
        scr_s = cuda.shared.array(32, float32)
        cache = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        buf = cuda.local.array(VW, float32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0  # idle groups still join the reductions
        r = min(r, rows - 1)
        for c in range(NC):  # every load issued before any use: NC * W * itemsize bytes in flight
            j = W * (lane + c * G)
            if j < n:
                ld(x, r, j, cache, c * W)
            else:
                for q in range(W):
                    cache[c * W + q] = NEG_INF
        m = NEG_INF  # not cache[0]: a NaN must not seed the max (max(NaN, a) is NaN in Python, a on a GPU)
        for i in range(CW):
            m = max(m, cache[i])
        s = ZERO
        for i in range(CW):  # keep exp(x - m) in the cache: one exp per element, not two
            e = math.exp(cache[i] - m) if cache[i] != NEG_INF else ZERO
            cache[i] = e
            s += e
        mc = m  # the cache holds exp(x - mc)
        if TAIL:  # compiled only for rows wider than the register cache
            for base in range(W * (lane + NC * G), n, G * V * W):  # rows wider than the cache
                for v in range(V):
                    j = base + v * G * W
                    if j < n:
                        ld(x, r, j, buf, v * W)
                    else:
                        for q in range(W):
                            buf[v * W + q] = NEG_INF
                mt = NEG_INF
                for i in range(V * W):
                    mt = max(mt, buf[i])
                sv = ZERO
                for i in range(V * W):
                    sv += math.exp(buf[i] - mt) if buf[i] != NEG_INF else ZERO
                m, s = softmax_merge(m, s, mt, sv)
        m, s = group_softmax_stats(m, s, G, scr_m, scr_s)
        inv = ONE / s if n > 0 else ZERO
        f = (math.exp(mc - m) if mc != NEG_INF else ZERO) * inv  # exp(x - m) / s = exp(x - mc) * f
        for c in range(NC):  # the write, from registers
            j = W * (lane + c * G)
            if j < n:
                for q in range(W):
                    cache[c * W + q] = cache[c * W + q] * f
                st(y, r, j, cache, c * W)
        if TAIL:  # compiled only for rows wider than the register cache
            for base in range(W * (lane + NC * G), n, G * V * W):  # the uncached tail, read again
                for v in range(V):
                    j = base + v * G * W
                    if j < n:
                        ld(x, r, j, buf, v * W)
                for v in range(V):
                    j = base + v * G * W
                    if j < n:
                        for q in range(W):
                            buf[v * W + q] = math.exp(buf[v * W + q] - m) * inv
                        st(y, r, j, buf, v * W)

    return softmax_rows


@dataclass(frozen=True)
class MultiRow(C.MultiRowShape, Variant):
    threads_per_row: int = 128  # x 32 floats in registers: a 4096-wide row is read once
    rows_per_block: int = 2
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "threads_per_row threads per row and rows_per_block rows per block, so narrow rows keep a "
        "block busy; each thread loads its whole share of the row into registers (vector loads, "
        "all in flight) before using any. Max, sum and exp(x - max) stay there, so x leaves DRAM "
        "once.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, V, W, NC = self.kernel_params(problem)
        return [Launch(_rows_kernel(G, R, V, W, NC, C.cached_cols(problem.cols, G, W, NC) < problem.cols), -(-problem.rows // R), G * R,
                       (bufs["x"], bufs["y"], problem.rows, problem.cols))]

    def traffic(self, problem):
        G, R, V, W, NC = self.kernel_params(problem)
        kept = C.cached_cols(problem.cols, G, W, NC)
        tail = C.tail_dram(problem.rows, problem.cols - kept, problem.dtype, problem.cols - kept, R, G * R)
        it = np.dtype(problem.dtype).itemsize
        e = problem.elem_bytes
        l2_tail = float(problem.rows) * (problem.cols - kept) * it
        note = (f"one DRAM read of x (in registers: {kept} of {problem.cols} columns per row, "
                f"{NC * W} floats per thread), one write of y; {8 * W * it}-bit loads and stores")
        if kept < problem.cols:
            note += "; the uncached tail is swept twice" + (" (second read from DRAM)" if tail else " (from L2)")
        return Traffic(flops=problem.flops, dram_bytes=2 * e + tail, l2_bytes=2 * e + l2_tail, limiter="dram",
                       notes=note)


# --- rung 6 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tuned(MultiRow):
    # 0 = the rule of _common.tuned_shape; search(problem, time_fn=...) on a GPU ranks shapes
    # by measurement, and its winner's fields can be passed instead.
    threads_per_row: int = 0
    rows_per_block: int = 0
    vec: int = 4

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "tuned"
    what: ClassVar[str] = (
        "Rung 5 at a launch shape chosen by a rule: each thread holds 16 elements of its row in "
        "registers, so threads_per_row = cols / 16 rounded up to a power of two (32 to 512), rows "
        "per block fill 256 threads, and loads are the widest vector the width allows.")

    def shape(self, problem) -> C.Shape:
        st = C.tuned_shape(problem.cols, problem.dtype)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R,
                       self.vec if (self.threads_per_row or self.rows_per_block) else st.V)


def search(problem: Problem, time_fn: Callable[[Variant], float] | None = None,
           candidates: list[C.Shape] | None = None) -> list[tuple[Variant, float | None]]:
    """Rank launch shapes of rung 6 for ``problem``: ``time_fn(variant) -> seconds`` on a GPU
    (e.g. ``lambda v: bench.sweep([problem], [v]).median_s[0]``), else by closeness to its rule."""
    return C.search(lambda s: Tuned(threads_per_row=s.G, rows_per_block=s.R, vec=s.V), problem.cols,
                    time_fn, candidates, pick=Tuned().shape(problem))


# --- rung 7 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _smem_row_kernel(B: int, W: int, dtype: str, PEEL: bool, REGS: int):
    """One block of B threads per row; the row staged in shared memory in its own dtype, then
    three sweeps over it there (max, sum of exp, write), W elements a shared load.  A float32 row
    keeps exp(x - max) in place from the sum to the write (one exp an element, not two; each
    thread reads back only what it wrote); a float16 row could not hold it exactly."""
    ld = vec_load(W)
    st = vec_store(W)
    stage = stage_row(B, per_copy(dtype), PEEL)
    PADMAX = per_copy(dtype) - 1 if PEEL else 0  # an unaligned row's pad ahead of it
    sdt = float16 if dtype == "float16" else float32
    KEEP = dtype == "float32"

    @jit_row(B, REGS)
    def softmax_smem_row(x, y, cols):
        smem = cuda.shared.array(0, sdt)  # dynamic: the row
        row = shared_tile(smem, 0, 1, cols + PADMAX)
        scr = cuda.shared.array(32, float32)
        buf = cuda.local.array(W, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        pad = stage(x, r, row, cols)  # the only read of x; the row from row[0, pad] on
        m = NEG_INF
        for j in range(W * t, cols, W * B):
            ld(row, 0, pad + j, buf, 0)
            for q in range(W):
                m = max(m, buf[q])  # m first: a NaN never raises the max (as fmaxf on a GPU)
        m = group_max(m, B, scr)
        s = ZERO
        for j in range(W * t, cols, W * B):
            ld(row, 0, pad + j, buf, 0)
            for q in range(W):
                e = math.exp(buf[q] - m)
                buf[q] = e
                s += e
            if KEEP:
                st(row, 0, pad + j, buf, 0)
        s = group_sum(s, B, scr)
        inv = ONE / s
        for j in range(W * t, cols, W * B):
            ld(row, 0, pad + j, buf, 0)
            for q in range(W):
                buf[q] = (buf[q] if KEEP else math.exp(buf[q] - m)) * inv
            st(y, r, j, buf, 0)

    return softmax_smem_row


@dataclass(frozen=True)
class SmemRow(SmemRowShape, Variant):
    threads: int = 0  # 0: the rule of _smemrow.row_threads (about 8 vectors of the row a thread)

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "smem_row"
    instead = "rung 6 tuned (part of the row in registers, the rest read twice)"
    what: ClassVar[str] = (
        "One block per row copies its row once into dynamic shared memory (16-byte cp.async, all "
        "in flight at once) and sweeps it there for the max, the sum and the write. x leaves DRAM "
        "once at any width, with no register cache to size.")

    def plan(self, problem, bufs):
        self.supports(problem)
        B, W, PEEL, REGS = self.kernel_params(problem)
        return [OptInSharedLaunch(_smem_row_kernel(B, W, problem.dtype, PEEL, REGS), problem.rows, B,
                                  (bufs["x"], bufs["y"], problem.cols), self.shared_bytes(problem))]

    def traffic(self, problem):
        B, W, PEEL, REGS = self.kernel_params(problem)
        e = problem.elem_bytes
        how = self.copy_note(problem)
        keep = problem.dtype == "float32"
        return Traffic(flops=problem.flops, dram_bytes=2 * e, l2_bytes=2 * e, smem_bytes=(5 if keep else 4) * e,
                       limiter="dram",
                       notes=f"one DRAM read of x ({how} into shared memory), one write of y; the row written to "
                             "shared memory once and read there three times"
                             + ("; exp(x - max) written back in place (one exp an element)" if keep else ""))



# --- rung 8 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _packed_kernel(G: int, R: int, NC: int, VEC: bool, TAIL: bool):
    """Rung 5's kernel for float16 rows held packed: each thread keeps NC chunks of 8 halves
    (4 registers each; chunk c at column 8 * (lane + c * G)) from the loads to the write, and
    exp(x - its max) packed in their place (one exp an element; y = that times a float32 factor,
    rounded once more: y <= exp(x - max), so nothing that y keeps underflows first)."""
    load = load_chunk(VEC)
    store = store_chunk(VEC)
    CW = NC * WORDS

    @C.jit_cached(G * R, CW)
    def softmax_packed(x, y, rows, cols):
        scr_m = cuda.shared.array(32, float32)
        scr_s = cuda.shared.array(32, float32)
        cw = cuda.local.array(CW, uint32)  # constant size, constant indices: registers
        tw = cuda.local.array(WORDS, uint32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0  # idle groups still join the reductions
        r = min(r, rows - 1)
        for c in range(NC):  # every load issued before any use: 16 * NC bytes in flight
            load(x, r, CHUNK * (lane + c * G), n, NEG_INF, cw, c * WORDS)
        m = NEG_INF
        for i in range(CW):
            a, b = halves(cw[i])
            m = max(m, a)  # m first: a NaN never raises the max (fmaxf on a GPU)
            m = max(m, b)
        s = ZERO
        for i in range(CW):
            a, b = halves(cw[i])
            ea = math.exp(a - m) if a != NEG_INF else ZERO
            eb = math.exp(b - m) if b != NEG_INF else ZERO
            s += ea + eb
            cw[i] = pack2(ea, eb)
        mc = m  # the registers hold exp(x - mc)
        if TAIL:  # compiled only for rows wider than the register cache
            for j in range(CHUNK * (lane + NC * G), n, CHUNK * G):
                load(x, r, j, n, NEG_INF, tw, 0)
                mt = NEG_INF
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    mt = max(mt, a)
                    mt = max(mt, b)
                sv = ZERO
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    sv += (math.exp(a - mt) if a != NEG_INF else ZERO) + (math.exp(b - mt) if b != NEG_INF else ZERO)
                m, s = softmax_merge(m, s, mt, sv)
        m, s = group_softmax_stats(m, s, G, scr_m, scr_s)
        inv = ONE / s if n > 0 else ZERO
        f = (math.exp(mc - m) if mc != NEG_INF else ZERO) * inv  # exp(x - m) / s = exp(x - mc) * f
        for c in range(NC):  # the write, from registers
            for i in range(WORDS):
                a, b = halves(cw[c * WORDS + i])
                cw[c * WORDS + i] = pack2(a * f, b * f)
            store(y, r, CHUNK * (lane + c * G), n, cw, c * WORDS)
        if TAIL:  # the uncached tail, read again
            for j in range(CHUNK * (lane + NC * G), n, CHUNK * G):
                load(x, r, j, n, NEG_INF, tw, 0)
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    tw[i] = pack2(math.exp(a - m) * inv, math.exp(b - m) * inv)
                store(y, r, j, n, tw, 0)

    return softmax_packed


@dataclass(frozen=True)
class Packed(PackedShape, Variant):
    threads_per_row: int = 0  # 0: the rule of _packed.packed_shape (64 bytes of the row a thread)
    rows_per_block: int = 0

    rung: ClassVar[int] = 8
    name: ClassVar[str] = "packed"
    instead = "rung 6 tuned"
    what: ClassVar[str] = (
        "float16 rows by bytes, not elements: a thread holds 64 bytes of its row (32 halves, "
        "threads_per_row = cols / 32) kept packed as loaded, two halves a 32-bit register, the "
        "float32 row's register budget. Max, sum and the scale are float32; exp(x - max) and y "
        "stay packed.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, NC, VEC, TAIL = self.kernel_params(problem)
        return [Launch(_packed_kernel(G, R, NC, VEC, TAIL), -(-problem.rows // R), G * R,
                       (bufs["x"], bufs["y"], problem.rows, problem.cols))]

    def traffic(self, problem):
        G, R, NC, VEC, TAIL = self.kernel_params(problem)
        kept = self.kept_cols(problem)
        e = problem.elem_bytes
        l2_tail = float(problem.rows) * (problem.cols - kept) * 2
        tail = C.tail_dram(problem.rows, problem.cols, problem.dtype, problem.cols - kept, R, G * R)
        note = (f"one DRAM read of x (in registers, packed: {kept} of {problem.cols} columns per row, "
                f"{NC * WORDS} registers a thread), one write of y; "
                + ("128-bit loads and stores" if VEC else "16-bit loads and stores (rows not 16-byte aligned)"))
        if kept < problem.cols:
            note += "; the uncached tail is swept twice" + (" (second read from DRAM)" if tail else " (from L2)")
        return Traffic(flops=problem.flops, dram_bytes=2 * e + tail, l2_bytes=2 * e + l2_tail, limiter="dram",
                       notes=note)


# --- rung 9 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _persist_kernel(G: int, R: int, W: int, NC: int, REGS: int):
    """A persistent grid: the block's R groups of G threads take rows ``base + t // G`` for
    ``base`` = blockIdx.x * R, + gridDim.x * R, ...; each thread holds NC vectors of W elements of
    its row (chunk c at column W * (lane + c * G)) and loads those of its next row into ``nxt``
    before it reduces and writes this one."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W

    @jit_persist(REGS)
    def softmax_persist(x, y, rows, cols):
        scr_m = cuda.shared.array(32, float32)
        scr_s = cuda.shared.array(32, float32)
        cur = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        nxt = cuda.local.array(CW, float32)
        t = cuda.threadIdx.x
        lane = t % G
        step = cuda.gridDim.x * R
        first = cuda.blockIdx.x * R + t // G
        for c in range(NC):  # the first row
            j = W * (lane + c * G)
            if first < rows and j < cols:
                ld(x, first, j, cur, c * W)
        for base in range(cuda.blockIdx.x * R, rows, step):  # the same trips for the whole block
            r = base + t // G
            n = cols if r < rows else 0  # a group past the last row reduces the identity
            rn = r + step
            for c in range(NC):  # the next row's loads go out before this row's work
                j = W * (lane + c * G)
                if rn < rows and j < cols:
                    ld(x, rn, j, nxt, c * W)
            m = NEG_INF
            for c in range(NC):
                if W * (lane + c * G) < n:
                    for q in range(W):
                        m = max(m, cur[c * W + q])  # m first: a NaN never raises the max
            m = group_max(m, G, scr_m)
            s = ZERO
            for c in range(NC):
                if W * (lane + c * G) < n:
                    for q in range(W):
                        e = math.exp(cur[c * W + q] - m)
                        cur[c * W + q] = e
                        s += e
            s = group_sum(s, G, scr_s)
            inv = ONE / s if n > 0 else ZERO
            for c in range(NC):
                j = W * (lane + c * G)
                if j < n:
                    for q in range(W):
                        cur[c * W + q] = cur[c * W + q] * inv
                    st(y, r, j, cur, c * W)
            for i in range(CW):
                cur[i] = nxt[i]

    return softmax_persist


@dataclass(frozen=True)
class Persist(PersistShape, Variant):
    threads_per_row: int = 0  # 0: the rule of _persist.persist_shape (32 bytes of the row a thread)
    rows_per_block: int = 0
    blocks_per_sm: int = 0  # 0: as many as the occupancy calculator allows at the register cap

    rung: ClassVar[int] = 9
    name: ClassVar[str] = "persist"
    instead = "rung 6 tuned (or rung 7 smem_row)"
    what: ClassVar[str] = (
        "A persistent grid, filling the GPU once, loops over narrow rows: each group of threads "
        "loads its next row into spare registers before it reduces and writes this one, hiding "
        "that row's DRAM latency. A thread holds 32 bytes of its row, so rows up to 4096 float32 "
        "or 8192 float16 columns.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, W, NC = self.kernel_params(problem)
        return [Launch(_persist_kernel(G, R, W, NC, self.reg_cap(problem)), self.blocks(problem), G * R,
                       (bufs["x"], bufs["y"], problem.rows, problem.cols))]

    def traffic(self, problem):
        G, R, W, NC = self.kernel_params(problem)
        e = problem.elem_bytes
        it = np.dtype(problem.dtype).itemsize
        return Traffic(flops=problem.flops, dram_bytes=2 * e, l2_bytes=2 * e, limiter="dram",
                       notes=f"one DRAM read of x (the row in registers, {NC * W} elements a thread, the next row's "
                             f"loads in flight beside it), one write of y; {8 * W * it}-bit loads and stores; "
                             f"a persistent grid of {self.blocks(problem)} blocks")


# --- rung 10 ------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _split_row_kernel(B: int, W: int, NC: int, dtype: str, PEEL: bool, REGS: int):
    """One block of B threads per row; each thread loads NC vectors of W elements of the row's
    first K = B * NC * W columns into registers (vector c at column W * (t + c * B)), the rest of
    the row is staged in shared memory in its own dtype (:func:`_splitrow.stage_part`); then
    three sweeps (max, sum of exp, write) over both parts.  exp(x - max) replaces x in the
    registers and, for a float32 row, in shared memory (one exp an element, as rung 7)."""
    ld = vec_load(W)
    st = vec_store(W)
    E = per_copy(dtype)
    K = B * NC * W
    stage = stage_part(B, E, PEEL, K)
    PADMAX = E - 1 if PEEL else 0  # an unaligned row's pad ahead of the staged part
    sdt = float16 if dtype == "float16" else float32
    KEEP = dtype == "float32"
    CW = NC * W

    @jit_split(B, REGS)
    def softmax_split_row(x, y, cols):
        smem = cuda.shared.array(0, sdt)  # dynamic: columns K.. of the row
        row = shared_tile(smem, 0, 1, max(cols - K, 0) + PADMAX)
        scr = cuda.shared.array(32, float32)
        cache = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        buf = cuda.local.array(W, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        for c in range(NC):  # the registers' share, all loads in flight before any use ...
            j = W * (t + c * B)
            if j < cols:
                ld(x, r, j, cache, c * W)
        pad = stage(x, r, row, cols)  # ... beside the cp.async copies of the rest: x read once
        m = NEG_INF
        for c in range(NC):
            if W * (t + c * B) < cols:
                for q in range(W):
                    m = max(m, cache[c * W + q])  # m first: a NaN never raises the max (fmaxf on a GPU)
        for j in range(K + W * t, cols, W * B):
            ld(row, 0, pad + j - K, buf, 0)
            for q in range(W):
                m = max(m, buf[q])
        m = block_max(m, B, scr)
        s = ZERO
        for c in range(NC):
            if W * (t + c * B) < cols:
                for q in range(W):
                    e = math.exp(cache[c * W + q] - m)
                    cache[c * W + q] = e
                    s += e
        for j in range(K + W * t, cols, W * B):
            ld(row, 0, pad + j - K, buf, 0)
            for q in range(W):
                e = math.exp(buf[q] - m)
                buf[q] = e
                s += e
            if KEEP:
                st(row, 0, pad + j - K, buf, 0)
        s = block_sum(s, B, scr)
        inv = ONE / s
        for c in range(NC):  # the write: the registers' share ...
            j = W * (t + c * B)
            if j < cols:
                for q in range(W):
                    cache[c * W + q] = cache[c * W + q] * inv
                st(y, r, j, cache, c * W)
        for j in range(K + W * t, cols, W * B):  # ... and the staged part
            ld(row, 0, pad + j - K, buf, 0)
            for q in range(W):
                buf[q] = (buf[q] if KEEP else math.exp(buf[q] - m)) * inv
            st(y, r, j, buf, 0)

    return softmax_split_row


@dataclass(frozen=True)
class SplitRow(SplitRowShape, Variant):
    threads: int = 0  # 0: the rule of _splitrow.split_threads (about 64 elements of the row a thread)
    held: int = 0  # elements a thread keeps in registers; 0: _splitrow.HELD (16)

    rung: ClassVar[int] = 10
    name: ClassVar[str] = "split_row"
    instead = "rung 6 tuned (part of the row in registers, the rest read twice)"
    what: ClassVar[str] = (
        "For rows too wide for rung 7's shared memory: one block per row keeps 16 elements a thread "
        "in registers and stages the rest of the row in shared memory by cp.async, so x leaves "
        "DRAM once at 65536 float32 columns too.")

    def plan(self, problem, bufs):
        self.supports(problem)
        B, W, NC, PEEL, REGS = self.kernel_params(problem)
        return [OptInSharedLaunch(_split_row_kernel(B, W, NC, problem.dtype, PEEL, REGS), problem.rows, B,
                                  (bufs["x"], bufs["y"], problem.cols), self.shared_bytes(problem))]

    def traffic(self, problem):
        e = problem.elem_bytes
        keep = problem.dtype == "float32"
        f = 1.0 - self.register_cols(problem) / problem.cols  # the staged share of the row
        return Traffic(flops=problem.flops, dram_bytes=2 * e, l2_bytes=2 * e, smem_bytes=(5 if keep else 4) * e * f,
                       limiter="dram",
                       notes=self.split_note(problem) + "; the staged part written to shared memory once and read "
                             "there three times" + ("; exp(x - max) kept in place (one exp an element)" if keep else ""))


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), Online(), MultiRow(), Tuned(), SmemRow(),
                         Packed(), Persist(), SplitRow()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)  # for the anatomy view (compiled, never run here)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384, 65536)]
#: float16 at the widths that matter, appended so that the indices above keep their problems
GPU_SWEEP += [Problem(4096, c, "float16") for c in (1024, 4096, 16384)]
SIM_SWEEP = [Problem(3, 37)]
