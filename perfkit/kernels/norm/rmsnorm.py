"""RMSNorm forward over the last dimension of a (rows, cols) array:
``y[r, j] = x[r, j] / sqrt(mean_j(x[r, :]**2) + eps) * gamma[j]``.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.rms_norm on a GPU (a CuPy expression without it); NumPy here
  1 naive       one thread per row, two kernels (sum of squares -> rstd in a workspace, write)
  2 fused       one block per row, shared-memory tree reduction, two sweeps in one kernel
  3 warp        the same with warp-shuffle reductions
  4 multirow    G threads per row, R rows per block; the row stays in registers between the
                sum of squares and the write (x read from DRAM once); 16-byte / half2 vector loads
  5 tuned       rung 4 at the launch shape of a rule drawn from the H100 records (``search``
                ranks shapes by measurement on a GPU)
  6 smem_row    one block per row, the row staged once in dynamic shared memory (16-byte
                cp.async): the sum of squares and the write read it there, so x leaves DRAM
                once at any width up to 227 KiB a row
  7 packed      float16 by bytes: 64 bytes of its row a thread (32 halves, not 16), held packed
                two halves a register; 16-byte loads and stores of half2 words
  8 persist     narrow rows: a persistent grid (SMs x blocks an SM holds) loops over rows, each
                group loading its next row into registers before it reduces this one
  9 split_row   rows too wide for shared memory alone (65536 float32): one block per row holds
                part of the row in registers and stages the rest in shared memory (cp.async),
                so x leaves DRAM once at any width up to 16384 + 227 KiB of columns

There is no "single-pass statistics" rung: the one statistic (a sum of squares) already takes
one sweep.  Minimal traffic: read x and gamma once, write y once.
"""
from __future__ import annotations

import dataclasses
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
from ._common import ONE, ZERO, group_sum, tree_sum
from ._smemrow import SmemRowShape, jit_row, param_unroll, per_copy, stage_row
from ._packed import CHUNK, WORDS, PackedShape, halves, load_chunk, pack2, store_chunk
from ._persist import PersistShape, jit_persist
from ._splitrow import SplitRowShape, block_sum, jit_split, stage_part
from .._dynsmem import OptInSharedLaunch, shared_tile

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "MultiRow", "Tuned", "SmemRow",
           "Packed", "Persist", "SplitRow", "search", "EXAMPLE_PROBLEM"]


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
                   l2_bytes=C.sweep_l2(p.rows, p.cols, p.dtype, sweeps) + e + C.reread_l2(g, p.rows, p.cols, p.dtype),
                   l1_bytes=sweeps * e + e + g * p.rows, smem_bytes=smem, limiter="dram", notes=note)


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
                       l1_bytes=3 * e + g * problem.rows,
                       l2_bytes=2 * e + C.scattered_store_l2(e, problem.dtype) + g * problem.rows / 32, limiter="dram",
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
def _rows_kernel(G: int, R: int, V: int, W: int, NC: int, TAIL: bool = True):
    """G threads per row, R rows per block, W-element vector loads/stores; each thread's first
    NC chunks (chunk c at column W * (lane + c * G)) stay in registers from the sum of squares
    to the write (x read from DRAM once); the rest of a wider row is read twice."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W
    VW = V * W

    @C.jit_cached(G * R, CW)
    def rms_rows(x, gamma, y, eps, rows, cols):
        scr = cuda.shared.array(32, float32)
        cache = cuda.local.array(CW, float32)
        buf = cuda.local.array(VW, float32)
        par = cuda.local.array(W, float32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0  # idle groups still join the reduction
        r = min(r, rows - 1)
        for c in range(NC):  # all loads in flight before any use
            j = W * (lane + c * G)
            if j < n:
                ld(x, r, j, cache, c * W)
            else:
                for q in range(W):
                    cache[c * W + q] = ZERO
        s = ZERO
        for i in range(CW):
            s += cache[i] * cache[i]
        if TAIL:  # compiled only for rows wider than the register cache
            for base in range(W * (lane + NC * G), n, G * V * W):  # rows wider than the cache
                for v in range(V):
                    j = base + v * G * W
                    if j < n:
                        ld(x, r, j, buf, v * W)
                    else:
                        for q in range(W):
                            buf[v * W + q] = ZERO
                for i in range(V * W):
                    s += buf[i] * buf[i]
        s = group_sum(s, G, scr)
        rs = ONE / math.sqrt(s / float32(cols) + eps)
        for c in range(NC):  # the write, from registers
            j = W * (lane + c * G)
            if j < n:
                ld(gamma, 0, j, par, 0)
                for e in range(W):
                    cache[c * W + e] = cache[c * W + e] * rs * par[e]
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
                        ld(gamma, 0, j, par, 0)
                        for e in range(W):
                            buf[v * W + e] = buf[v * W + e] * rs * par[e]
                        st(y, r, j, buf, v * W)

    return rms_rows


@dataclass(frozen=True)
class MultiRow(C.MultiRowShape, Variant):
    threads_per_row: int = 128  # x 32 floats in registers: a 4096-wide row is read once
    rows_per_block: int = 2
    vec: int = 4

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "threads_per_row threads per row and rows_per_block rows per block; each thread loads its "
        "whole share of the row into registers (vector loads, all in flight) before summing the "
        "squares. y is written from those registers, so x leaves DRAM once.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, V, W, NC = self.kernel_params(problem)
        c = problem.cols
        return [Launch(_rows_kernel(G, R, V, W, NC, C.cached_cols(problem.cols, G, W, NC) < problem.cols), -(-problem.rows // R), G * R,
                       (bufs["x"], C.view(bufs["gamma"], (1, c)), bufs["y"], C.eps32(problem), problem.rows, c))]

    def traffic(self, problem):
        G, R, V, W, NC = self.kernel_params(problem)
        kept = C.cached_cols(problem.cols, G, W, NC)
        tail = C.tail_dram(problem.rows, problem.cols, problem.dtype, problem.cols - kept, R, G * R)
        it = np.dtype(problem.dtype).itemsize
        note = (f"one DRAM read of x (in registers: {kept} of {problem.cols} columns per row), one write "
                f"of y; {8 * W * it}-bit loads and stores")
        if kept < problem.cols:
            note += "; the uncached tail is swept twice" + (" (second read from DRAM)" if tail else " (from L2)")
        t = _traffic(problem, 1, note)
        l2_tail = float(problem.rows) * (problem.cols - kept) * it
        return dataclasses.replace(t, dram_bytes=t.dram_bytes + tail, l2_bytes=t.l2_bytes + l2_tail)


# --- rung 5 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tuned(MultiRow):
    # 0 = the rule of _common.tuned_shape; search(problem, time_fn=...) on a GPU ranks shapes
    # by measurement, and its winner's fields can be passed instead.
    threads_per_row: int = 0
    rows_per_block: int = 0
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "tuned"
    what: ClassVar[str] = (
        "Rung 4 at the launch shape of softmax's rule: each thread holds 16 elements of its row "
        "in registers, so threads_per_row = cols / 16 rounded up to a power of two (32 to 512), "
        "rows per block fill 256 threads, and loads are the widest vector the width allows.")

    def shape(self, problem) -> C.Shape:
        st = C.tuned_shape(problem.cols, problem.dtype)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R, self.vec)


def search(problem: Problem, time_fn: Callable[[Variant], float] | None = None,
           candidates: list[C.Shape] | None = None) -> list[tuple[Variant, float | None]]:
    """Rank launch shapes of the tuned rung (timed by ``time_fn`` on a GPU, else by closeness to its rule)."""
    return C.search(lambda s: Tuned(threads_per_row=s.G, rows_per_block=s.R, vec=s.V), problem.cols,
                    time_fn, candidates, pick=Tuned().shape(problem))


# --- rung 6 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _smem_row_kernel(B: int, W: int, dtype: str, PEEL: bool, REGS: int):
    """One block of B threads per row; the row staged in shared memory in its own dtype, then
    two sweeps over it there (sum of squares, write), W elements a shared load; the write loads
    gamma for U vectors before it uses any (one L2 latency per trip)."""
    ld = vec_load(W)
    st = vec_store(W)
    U = param_unroll(W)
    UW = U * W
    stage = stage_row(B, per_copy(dtype), PEEL)
    PADMAX = per_copy(dtype) - 1 if PEEL else 0  # an unaligned row's pad ahead of it
    sdt = float16 if dtype == "float16" else float32

    @jit_row(B, REGS)
    def rms_smem_row(x, gamma, y, eps, cols):
        smem = cuda.shared.array(0, sdt)  # dynamic: the row
        row = shared_tile(smem, 0, 1, cols + PADMAX)
        scr = cuda.shared.array(32, float32)
        buf = cuda.local.array(W, float32)
        gam = cuda.local.array(UW, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        pad = stage(x, r, row, cols)  # the only read of x; the row from row[0, pad] on
        s = ZERO
        for j in range(W * t, cols, W * B):
            ld(row, 0, pad + j, buf, 0)
            for e in range(W):
                s += buf[e] * buf[e]
        rs = ONE / math.sqrt(group_sum(s, B, scr) / float32(cols) + eps)
        for base in range(W * t, cols, U * W * B):  # U vectors a trip: gamma's loads all in flight
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(gamma, 0, j, gam, u * W)
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(row, 0, pad + j, buf, 0)
                    for e in range(W):
                        buf[e] = buf[e] * rs * gam[u * W + e]
                    st(y, r, j, buf, 0)

    return rms_smem_row


@dataclass(frozen=True)
class SmemRow(SmemRowShape, Variant):
    threads: int = 0  # 0: the rule of _smemrow.row_threads (about 8 vectors of the row a thread)

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "smem_row"
    instead = "rung 5 tuned (part of the row in registers, the rest read twice)"
    what: ClassVar[str] = (
        "One block per row copies its row once into dynamic shared memory (16-byte cp.async, all "
        "in flight at once) and sweeps it there for the sum of squares and the write. x leaves "
        "DRAM once at any width, with no register cache to size.")

    def plan(self, problem, bufs):
        self.supports(problem)
        B, W, PEEL, REGS = self.kernel_params(problem)
        c = problem.cols
        return [OptInSharedLaunch(_smem_row_kernel(B, W, problem.dtype, PEEL, REGS), problem.rows, B,
                                  (bufs["x"], C.view(bufs["gamma"], (1, c)), bufs["y"], C.eps32(problem), c),
                                  self.shared_bytes(problem))]

    def traffic(self, problem):
        B, W, PEEL, REGS = self.kernel_params(problem)
        how = self.copy_note(problem)
        t = _traffic(problem, 1, f"one DRAM read of x ({how} into shared memory), one write of y; the row "
                                 "written to shared memory once and read there twice")
        return dataclasses.replace(t, smem_bytes=3 * problem.elem_bytes)



# --- rung 7 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _packed_kernel(G: int, R: int, NC: int, VEC: bool, TAIL: bool):
    """Rung 4's kernel for float16 rows held packed: each thread keeps NC chunks of 8 halves
    (4 registers each; chunk c at column 8 * (lane + c * G)) from the loads to the write; gamma
    loaded packed in the write, a chunk at a time."""
    load = load_chunk(VEC)
    store = store_chunk(VEC)
    CW = NC * WORDS

    @C.jit_cached(G * R, CW)
    def rms_packed(x, gamma, y, eps, rows, cols):
        scr = cuda.shared.array(32, float32)
        cw = cuda.local.array(CW, uint32)  # constant size, constant indices: registers
        tw = cuda.local.array(WORDS, uint32)
        gw = cuda.local.array(WORDS, uint32)
        t = cuda.threadIdx.x
        lane = t % G
        r = cuda.blockIdx.x * R + t // G
        n = cols if r < rows else 0  # idle groups still join the reduction
        r = min(r, rows - 1)
        for c in range(NC):  # every load issued before any use: 16 * NC bytes in flight
            load(x, r, CHUNK * (lane + c * G), n, ZERO, cw, c * WORDS)
        s = ZERO
        for i in range(CW):
            a, b = halves(cw[i])
            s += a * a + b * b  # padding is 0
        if TAIL:  # compiled only for rows wider than the register cache
            for j in range(CHUNK * (lane + NC * G), n, CHUNK * G):
                load(x, r, j, n, ZERO, tw, 0)
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    s += a * a + b * b
        s = group_sum(s, G, scr)
        rs = ONE / math.sqrt(s / float32(cols) + eps)
        for c in range(NC):  # the write, from registers
            j = CHUNK * (lane + c * G)
            if j < n:
                load(gamma, 0, j, n, ZERO, gw, 0)
                for i in range(WORDS):
                    a, b = halves(cw[c * WORDS + i])
                    ga, gb = halves(gw[i])
                    cw[c * WORDS + i] = pack2(a * rs * ga, b * rs * gb)
                store(y, r, j, n, cw, c * WORDS)
        if TAIL:  # the uncached tail, read again
            for j in range(CHUNK * (lane + NC * G), n, CHUNK * G):
                load(x, r, j, n, ZERO, tw, 0)
                load(gamma, 0, j, n, ZERO, gw, 0)
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    ga, gb = halves(gw[i])
                    tw[i] = pack2(a * rs * ga, b * rs * gb)
                store(y, r, j, n, tw, 0)

    return rms_packed


@dataclass(frozen=True)
class Packed(PackedShape, Variant):
    threads_per_row: int = 0  # 0: the rule of _packed.packed_shape (64 bytes of the row a thread)
    rows_per_block: int = 0

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "packed"
    instead = "rung 5 tuned"
    what: ClassVar[str] = (
        "float16 rows by bytes, not elements: a thread holds 64 bytes of its row (32 halves, "
        "threads_per_row = cols / 32) kept packed as loaded, two halves a 32-bit register, the "
        "float32 row's register budget. The sum of squares and the scale are float32; gamma and y "
        "stay packed.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, NC, VEC, TAIL = self.kernel_params(problem)
        c = problem.cols
        return [Launch(_packed_kernel(G, R, NC, VEC, TAIL), -(-problem.rows // R), G * R,
                       (bufs["x"], C.view(bufs["gamma"], (1, c)), bufs["y"], C.eps32(problem), problem.rows, c))]

    def traffic(self, problem):
        G, R, NC, VEC, TAIL = self.kernel_params(problem)
        kept = self.kept_cols(problem)
        tail = C.tail_dram(problem.rows, problem.cols, problem.dtype, problem.cols - kept, R, G * R)
        note = (f"one DRAM read of x (in registers, packed: {kept} of {problem.cols} columns per row, "
                f"{NC * WORDS} registers a thread), one write of y; "
                + ("128-bit loads and stores" if VEC else "16-bit loads and stores (rows not 16-byte aligned)"))
        if kept < problem.cols:
            note += "; the uncached tail is swept twice" + (" (second read from DRAM)" if tail else " (from L2)")
        t = _traffic(problem, 1, note)
        l2_tail = float(problem.rows) * (problem.cols - kept) * 2
        return dataclasses.replace(t, dram_bytes=t.dram_bytes + tail, l2_bytes=t.l2_bytes + l2_tail)


# --- rung 8 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _persist_kernel(G: int, R: int, W: int, NC: int, REGS: int):
    """A persistent grid: the block's R groups of G threads take rows ``base + t // G`` for
    ``base`` = blockIdx.x * R, + gridDim.x * R, ...; each thread holds NC vectors of W elements of
    its row (chunk c at column W * (lane + c * G)) and loads those of its next row into ``nxt``
    before it reduces and writes this one; gamma read in the write (the same columns every
    row: L1)."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W

    @jit_persist(REGS)
    def rms_persist(x, gamma, y, eps, rows, cols):
        scr = cuda.shared.array(32, float32)
        cur = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        nxt = cuda.local.array(CW, float32)
        par = cuda.local.array(W, float32)
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
            s = ZERO
            for c in range(NC):
                if W * (lane + c * G) < n:
                    for q in range(W):
                        s += cur[c * W + q] * cur[c * W + q]
            rs = ONE / math.sqrt(group_sum(s, G, scr) / float32(cols) + eps)
            for c in range(NC):
                j = W * (lane + c * G)
                if j < n:
                    ld(gamma, 0, j, par, 0)
                    for e in range(W):
                        cur[c * W + e] = cur[c * W + e] * rs * par[e]
                    st(y, r, j, cur, c * W)
            for i in range(CW):
                cur[i] = nxt[i]

    return rms_persist


@dataclass(frozen=True)
class Persist(PersistShape, Variant):
    threads_per_row: int = 0  # 0: the rule of _persist.persist_shape (32 bytes of the row a thread)
    rows_per_block: int = 0
    blocks_per_sm: int = 0  # 0: as many as the occupancy calculator allows at the register cap

    rung: ClassVar[int] = 8
    name: ClassVar[str] = "persist"
    instead = "rung 5 tuned (or rung 6 smem_row)"
    regs = {"float32": 40, "float16": 64}  # float32: no spills at 40 (6 blocks an SM, not 5)
    what: ClassVar[str] = (
        "A persistent grid, filling the GPU once, loops over narrow rows: each group of threads "
        "loads its next row into spare registers before it reduces and writes this one, hiding "
        "that row's DRAM latency. A thread holds 32 bytes of its row, so rows up to 4096 float32 "
        "or 8192 float16 columns.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, W, NC = self.kernel_params(problem)
        c = problem.cols
        return [Launch(_persist_kernel(G, R, W, NC, self.reg_cap(problem)), self.blocks(problem), G * R,
                       (bufs["x"], C.view(bufs["gamma"], (1, c)), bufs["y"], C.eps32(problem), problem.rows, c))]

    def traffic(self, problem):
        G, R, W, NC = self.kernel_params(problem)
        it = np.dtype(problem.dtype).itemsize
        return _traffic(problem, 1, f"one DRAM read of x (the row in registers, {NC * W} elements a thread, the next "
                                    f"row's loads in flight beside it), one write of y; {8 * W * it}-bit loads and "
                                    f"stores; a persistent grid of {self.blocks(problem)} blocks")


# --- rung 9 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _split_row_kernel(B: int, W: int, NC: int, dtype: str, PEEL: bool, REGS: int):
    """One block of B threads per row; each thread loads NC vectors of W elements of the row's
    first K = B * NC * W columns into registers (vector c at column W * (t + c * B)), the rest of
    the row is staged in shared memory in its own dtype (:func:`_splitrow.stage_part`); then the
    sum of squares and the write over both parts, gamma loaded U vectors at a time before any is
    used (as rung 6)."""
    ld = vec_load(W)
    st = vec_store(W)
    U = param_unroll(W)
    UW = U * W
    E = per_copy(dtype)
    K = B * NC * W
    stage = stage_part(B, E, PEEL, K)
    PADMAX = E - 1 if PEEL else 0  # an unaligned row's pad ahead of the staged part
    sdt = float16 if dtype == "float16" else float32
    CW = NC * W

    @jit_split(B, REGS)
    def rms_split_row(x, gamma, y, eps, cols):
        smem = cuda.shared.array(0, sdt)  # dynamic: columns K.. of the row
        row = shared_tile(smem, 0, 1, max(cols - K, 0) + PADMAX)
        scr = cuda.shared.array(32, float32)
        cache = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        buf = cuda.local.array(W, float32)
        gam = cuda.local.array(UW, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        for c in range(NC):  # the registers' share, all loads in flight before any use ...
            j = W * (t + c * B)
            if j < cols:
                ld(x, r, j, cache, c * W)
        pad = stage(x, r, row, cols)  # ... beside the cp.async copies of the rest: x read once
        s = ZERO
        for c in range(NC):
            if W * (t + c * B) < cols:
                for e in range(W):
                    s += cache[c * W + e] * cache[c * W + e]
        for j in range(K + W * t, cols, W * B):
            ld(row, 0, pad + j - K, buf, 0)
            for e in range(W):
                s += buf[e] * buf[e]
        rs = ONE / math.sqrt(block_sum(s, B, scr) / float32(cols) + eps)
        for c0 in range(0, NC, U):  # the write: the registers' share, U vectors of gamma a trip ...
            for u in range(U):
                j = W * (t + (c0 + u) * B)
                if c0 + u < NC and j < cols:
                    ld(gamma, 0, j, gam, u * W)
            for u in range(U):
                c = c0 + u
                j = W * (t + c * B)
                if c < NC and j < cols:
                    for e in range(W):
                        cache[c * W + e] = cache[c * W + e] * rs * gam[u * W + e]
                    st(y, r, j, cache, c * W)
        for base in range(K + W * t, cols, U * W * B):  # ... and the staged part
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(gamma, 0, j, gam, u * W)
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(row, 0, pad + j - K, buf, 0)
                    for e in range(W):
                        buf[e] = buf[e] * rs * gam[u * W + e]
                    st(y, r, j, buf, 0)

    return rms_split_row


@dataclass(frozen=True)
class SplitRow(SplitRowShape, Variant):
    threads: int = 0  # 0: the rule of _splitrow.split_threads (about 64 elements of the row a thread)
    held: int = 0  # elements a thread keeps in registers; 0: _splitrow.HELD (16)

    rung: ClassVar[int] = 9
    name: ClassVar[str] = "split_row"
    instead = "rung 5 tuned (part of the row in registers, the rest read twice)"
    what: ClassVar[str] = (
        "For rows too wide for rung 6's shared memory: one block per row keeps 16 elements a thread "
        "in registers and stages the rest of the row in shared memory by cp.async, so x leaves "
        "DRAM once at 65536 float32 columns too.")

    def plan(self, problem, bufs):
        self.supports(problem)
        B, W, NC, PEEL, REGS = self.kernel_params(problem)
        c = problem.cols
        return [OptInSharedLaunch(_split_row_kernel(B, W, NC, problem.dtype, PEEL, REGS), problem.rows, B,
                                  (bufs["x"], C.view(bufs["gamma"], (1, c)), bufs["y"], C.eps32(problem), c),
                                  self.shared_bytes(problem))]

    def traffic(self, problem):
        f = 1.0 - self.register_cols(problem) / problem.cols  # the staged share of the row
        t = _traffic(problem, 1, self.split_note(problem) + "; the staged part written to shared memory once and "
                                                            "read there twice")
        return dataclasses.replace(t, smem_bytes=3 * problem.elem_bytes * f)


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), MultiRow(), Tuned(), SmemRow(), Packed(),
                         Persist(), SplitRow()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384, 65536)]
#: float16 at the widths that matter, appended so that the indices above keep their problems
GPU_SWEEP += [Problem(4096, c, "float16") for c in (1024, 4096, 16384)]
SIM_SWEEP = [Problem(3, 37)]
