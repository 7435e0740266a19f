"""LayerNorm forward over the last dimension of a (rows, cols) array:
``y = (x - mean) * rstd * gamma + beta`` with ``rstd = 1 / sqrt(var + eps)`` (biased variance).
The per-row ``mean`` and ``rstd`` (float32) are outputs too: the backward pass uses them.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.layer_norm on a GPU (a CuPy expression without torch); NumPy here
  1 naive       one thread per row, three kernels (mean; centred variance -> rstd; write)
  2 fused       one block per row, shared-memory tree reductions, three sweeps in one kernel
  3 warp        the same with warp-shuffle reductions
  4 welford     single-pass statistics: Welford per thread, Chan's merge across lanes (2 sweeps)
  5 multirow    G threads per row, R rows per block; the row stays in registers between the
                statistics and the write (x read from DRAM once); 16-byte / half2 vector loads
  6 tuned       rung 5 at the launch shape of a rule drawn from the H100 records (``search``
                ranks shapes by measurement on a GPU)
  7 smem_row    one block per row, the row staged once in dynamic shared memory (16-byte
                cp.async): both statistics and the write read it there, so x leaves DRAM once
                at any width up to 227 KiB a row
  8 packed      float16 by bytes: 64 bytes of its row a thread (32 halves, not 16), held packed
                two halves a register; 16-byte loads and stores of half2 words
  9 persist     narrow rows: a persistent grid (SMs x blocks an SM holds) loops over rows, each
                group loading its next row into registers before it reduces this one
 10 split_row   rows too wide for shared memory alone (65536 float32): one block per row holds
                part of the row in registers and stages the rest in shared memory (cp.async),
                so x leaves DRAM once at any width up to 16384 + 227 KiB of columns

The variance is never computed as E[x^2] - E[x]^2 (catastrophic cancellation when
|mean| >> std): rungs 1-3, 7 and 10 use two passes (mean, then sum of (x - mean)^2), rungs 4-6 and 8 Welford
(rungs 5, 6 and 8: a thread's chunk two-pass in registers, Chan's merge across lanes).
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
from ._common import ONE, ZERO, chan_merge, group_sum, group_welford, tree_sum, welford_push
from ._smemrow import SmemRowShape, jit_row, param_unroll, per_copy, stage_row
from ._packed import CHUNK, WORDS, PackedShape, halves, load_chunk, pack2, store_chunk
from ._persist import PersistShape, jit_persist
from ._splitrow import SplitRowShape, block_sum, jit_split, stage_part
from .._dynsmem import OptInSharedLaunch, shared_tile

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Welford", "MultiRow", "Tuned",
           "SmemRow", "Packed", "Persist", "SplitRow", "search", "EXAMPLE_PROBLEM"]


@dataclass(frozen=True)
class Problem(C.RowProblem):
    """LayerNorm of every row of x (rows, cols) with gamma, beta (cols,)."""

    rows: int
    cols: int
    dtype: str = "float32"
    eps: float = 1e-5
    axis: int = -1

    op: ClassVar[str] = "layernorm"

    def input_specs(self):
        return {"x": ((self.rows, self.cols), self.dtype), "gamma": ((self.cols,), self.dtype),
                "beta": ((self.cols,), self.dtype)}

    def output_specs(self):
        return {"y": ((self.rows, self.cols), self.dtype), "mean": ((self.rows,), "float32"),
                "rstd": ((self.rows,), "float32")}

    def _make(self, g):
        return {"x": (1.0 + 2.0 * g.standard_normal((self.rows, self.cols))).astype(self.dtype),
                "gamma": (1.0 + 0.1 * g.standard_normal(self.cols)).astype(self.dtype),
                "beta": (0.1 * g.standard_normal(self.cols)).astype(self.dtype)}

    def _reference(self, inputs):
        x = inputs["x"].astype(np.float64)
        mean = x.mean(axis=1)
        rstd = 1.0 / np.sqrt(((x - mean[:, None]) ** 2).mean(axis=1) + self.eps)
        y = (x - mean[:, None]) * rstd[:, None] * inputs["gamma"].astype(np.float64) \
            + inputs["beta"].astype(np.float64)
        return {"y": y, "mean": mean, "rstd": rstd}

    @property
    def flops(self) -> float:
        return 8.0 * self.rows * self.cols  # mean, centred square-add, normalize, scale, shift


def _traffic(p: Problem, sweeps: int, note: str, smem: float = 0.0) -> Traffic:
    e = p.elem_bytes
    par = 2 * p.cols * np.dtype(p.dtype).itemsize
    stats = 8.0 * p.rows
    return Traffic(flops=p.flops, dram_bytes=C.sweep_dram(p.rows, p.cols, p.dtype, sweeps) + e + par + stats,
                   l2_bytes=C.sweep_l2(p.rows, p.cols, p.dtype, sweeps) + e + C.reread_l2(par, p.rows, p.cols, p.dtype)
                   + stats, l1_bytes=sweeps * e + e + par * p.rows + stats, smem_bytes=smem, limiter="dram", notes=note)


# --- rung 0 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = ("torch.native_layer_norm on a GPU (the kernel behind F.layer_norm, which also "
                           "returns the mean and rstd the backward pass uses), else a CuPy expression; NumPy "
                           "in float32 on the host.")

    def gpu(self, problem, x, out):
        import cupy as cp

        try:
            import torch

            ok = torch.cuda.is_available()
        except Exception:
            ok = False
        if ok:  # one fused kernel; its own output buffers, so no copy of ours is timed
            y, mean, rstd = torch.native_layer_norm(torch.from_dlpack(x["x"]), [problem.cols],
                                                    torch.from_dlpack(x["gamma"]), torch.from_dlpack(x["beta"]),
                                                    problem.eps)
            return {"y": y, "mean": mean, "rstd": rstd}
        xf = x["x"].astype(cp.float32)
        mean = xf.mean(axis=1)
        rstd = 1.0 / cp.sqrt(((xf - mean[:, None]) ** 2).mean(axis=1) + cp.float32(problem.eps))
        out["mean"][...] = mean
        out["rstd"][...] = rstd
        y = (xf - mean[:, None]) * rstd[:, None] * x["gamma"].astype(cp.float32) + x["beta"].astype(cp.float32)
        out["y"][...] = y.astype(out["y"].dtype)

    def host(self, problem, x):
        xf = x["x"].astype(np.float32)
        mean = xf.mean(axis=1, dtype=np.float32)
        rstd = np.float32(1) / np.sqrt(((xf - mean[:, None]) ** 2).mean(axis=1) + np.float32(problem.eps))
        y = (xf - mean[:, None]) * rstd[:, None] * x["gamma"].astype(np.float32) + x["beta"].astype(np.float32)
        return {"y": y.astype(problem.dtype), "mean": mean.astype(np.float32), "rstd": rstd.astype(np.float32)}

    def traffic(self, problem):
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=problem.bytes, limiter="dram",
                       notes="torch's fused kernel: read x, write y (and a float per row of mean and rstd)")


# --- rung 1 -------------------------------------------------------------------------------
@cuda.jit
def ln_row_mean(x, mean, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        # the plain mean, then corrected by the sum about it: a plain float32 sum of 4096 values
        # near 10 (std 1) is off by ~1e-5 of the mean, past y's tolerance; a shift by one value
        # instead (far from the mean in a row of +-1e4) loses the mean's digits the other way
        s = ZERO
        for j in range(cols):
            s += float32(x[r, j])
        k = s / float32(cols)
        if math.isfinite(k):  # an infinite (or NaN) mean stays as the plain sum gives it
            s = ZERO
            for j in range(cols):
                s += float32(x[r, j]) - k
            k = k + s / float32(cols)
        mean[r] = k


@cuda.jit
def ln_row_rstd(x, mean, rstd, eps, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = mean[r]
        s = ZERO
        for j in range(cols):
            d = float32(x[r, j]) - m
            s += d * d
        rstd[r] = ONE / math.sqrt(s / float32(cols) + eps)


@cuda.jit
def ln_row_write(x, gamma, beta, mean, rstd, y, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = mean[r]
        q = rstd[r]
        for j in range(cols):
            y[r, j] = (float32(x[r, j]) - m) * q * float32(gamma[j]) + float32(beta[j])


@dataclass(frozen=True)
class Naive(Variant):
    block: int = 128

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per row, one kernel per pass: mean, centred variance (two passes, so no "
        "cancellation), write. x is read three times; statistics travel through global memory; "
        "neighbouring threads read a row apart (uncoalesced)."
    )

    def plan(self, problem, bufs):
        g = -(-problem.rows // self.block)
        n, c = problem.rows, problem.cols
        x, mean, rstd = bufs["x"], bufs["mean"], bufs["rstd"]
        return [Launch(ln_row_mean, g, self.block, (x, mean, n, c)),
                Launch(ln_row_rstd, g, self.block, (x, mean, rstd, C.eps32(problem), n, c)),
                Launch(ln_row_write, g, self.block, (x, bufs["gamma"], bufs["beta"], mean, rstd, bufs["y"], n, c))]

    def traffic(self, problem):
        e = problem.elem_bytes
        par = 2 * problem.cols * np.dtype(problem.dtype).itemsize
        return Traffic(flops=problem.flops, dram_bytes=3 * e + e + par + problem.rows * 16.0,
                       l1_bytes=3 * e + e + par * problem.rows,
                       l2_bytes=3 * e + C.scattered_store_l2(e, problem.dtype) + par * problem.rows / 32, limiter="dram",
                       notes="three kernels each read x (3 reads + 1 write); uncoalesced row-per-thread")


# --- rung 2 -------------------------------------------------------------------------------
def _check_block(block: int) -> None:
    if block < 32 or block > 1024 or block & (block - 1):
        raise UnsupportedProblem(f"block={block} must be a power of two in 32..1024")


@lru_cache(maxsize=None)
def _fused_kernel(B: int):
    @C.jit_block(B)
    def ln_fused(x, gamma, beta, y, mean, rstd, eps, cols):
        sh = cuda.shared.array(B, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        s = ZERO
        for j in range(t, cols, B):
            s += float32(x[r, j])
        m = tree_sum(s, sh, B) / float32(cols)
        s = ZERO
        for j in range(t, cols, B):  # second sweep, from L1/L2
            d = float32(x[r, j]) - m
            s += d * d
        q = ONE / math.sqrt(tree_sum(s, sh, B) / float32(cols) + eps)
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for j in range(t, cols, B):
            y[r, j] = (float32(x[r, j]) - m) * q * float32(gamma[j]) + float32(beta[j])

    return ln_fused


@dataclass(frozen=True)
class Fused(Variant):
    block: int = 256

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "fused"
    what: ClassVar[str] = (
        "One block per row, one kernel: coalesced strided sweeps and shared-memory tree "
        "reductions for the mean and then the centred variance; three sweeps, two from cache."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_fused_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["gamma"], bufs["beta"], bufs["y"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 3, "3 sweeps per row (2 from cache); tree reductions",
                        smem=problem.rows * self.block * 4.0 * 3 * math.log2(self.block))


# --- rung 3 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _warp_kernel(B: int):
    @C.jit_block(B)
    def ln_warp(x, gamma, beta, y, mean, rstd, eps, cols):
        scr = cuda.shared.array(32, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        s = ZERO
        for j in range(t, cols, B):
            s += float32(x[r, j])
        m = group_sum(s, B, scr) / float32(cols)
        s = ZERO
        for j in range(t, cols, B):
            d = float32(x[r, j]) - m
            s += d * d
        q = ONE / math.sqrt(group_sum(s, B, scr) / float32(cols) + eps)
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for j in range(t, cols, B):
            y[r, j] = (float32(x[r, j]) - m) * q * float32(gamma[j]) + float32(beta[j])

    return ln_warp


@dataclass(frozen=True)
class Warp(Variant):
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "warp"
    what: ClassVar[str] = (
        "Both reductions by warp shuffles (shfl_xor_sync butterflies) plus one shared slot per "
        "warp: two barriers per reduction instead of log2(block)."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_warp_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["gamma"], bufs["beta"], bufs["y"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 3, "3 sweeps per row (2 from cache); shuffle reductions",
                        smem=problem.rows * 128.0 * 4)


# --- rung 4 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _welford_kernel(B: int):
    @C.jit_block(B)
    def ln_welford(x, gamma, beta, y, mean, rstd, eps, cols):
        scr_n = cuda.shared.array(32, float32)
        scr_m = cuda.shared.array(32, float32)
        scr_q = cuda.shared.array(32, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        n = ZERO
        m = ZERO
        m2 = ZERO
        for j in range(t, cols, B):  # one sweep: count, mean and M2 together
            n, m, m2 = welford_push(n, m, m2, float32(x[r, j]))
        n, m, m2 = group_welford(n, m, m2, B, scr_n, scr_m, scr_q)  # Chan's merge
        q = ONE / math.sqrt(m2 / n + eps)
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for j in range(t, cols, B):
            y[r, j] = (float32(x[r, j]) - m) * q * float32(gamma[j]) + float32(beta[j])

    return ln_welford


@dataclass(frozen=True)
class Welford(Variant):
    block: int = 256

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "welford"
    what: ClassVar[str] = (
        "Single-pass statistics without cancellation: each thread runs Welford's update "
        "(mean += d/n, M2 += d*(x - mean)); lanes merge (n, mean, M2) with Chan's formula "
        "M2 = M2a + M2b + d^2 na nb / n. Two sweeps per row instead of three."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_welford_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["gamma"], bufs["beta"], bufs["y"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols))]

    def traffic(self, problem):
        return _traffic(problem, 2, "2 sweeps per row (stats, write); a division per element in Welford",
                        smem=problem.rows * 192.0 * 4)


# --- rung 5 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _rows_kernel(G: int, R: int, V: int, W: int, NC: int, TAIL: bool = True):
    """G threads per row, R rows per block, W-element vector loads/stores; each thread's first
    NC chunks (chunk c at column W * (lane + c * G)) stay in registers from the statistics to
    the write (x read from DRAM once); the rest of a wider row goes in trips of V chunks, each
    trip folded into the Welford state with one Chan merge, and is read again for the write."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W
    VW = V * W

    @C.jit_cached(G * R, CW)
    def ln_rows(x, gamma, beta, y, mean, rstd, eps, rows, cols):
        scr_n = cuda.shared.array(32, float32)
        scr_m = cuda.shared.array(32, float32)
        scr_q = cuda.shared.array(32, float32)
        cache = cuda.local.array(CW, float32)
        buf = cuda.local.array(VW, float32)
        par = cuda.local.array(W, float32)
        t = cuda.threadIdx.x
        lane = t % G
        row = cuda.blockIdx.x * R + t // G
        n = cols if row < rows else 0  # idle groups still join the reductions
        r = min(row, rows - 1)
        k = ZERO
        for c in range(NC):  # all loads in flight before any use
            j = W * (lane + c * G)
            if j < n:
                ld(x, r, j, cache, c * W)
                k += float32(W)
            else:
                for q in range(W):
                    cache[c * W + q] = ZERO
        sm = ZERO
        for i in range(CW):
            sm += cache[i]  # padding is 0
        cm = sm / k if k > ZERO else ZERO
        cq = ZERO
        for c in range(NC):
            if W * (lane + c * G) < n:
                for q in range(W):
                    d = cache[c * W + q] - cm
                    cq += d * d
        cnt = k
        m = cm
        m2 = cq
        if TAIL:  # compiled only for rows wider than the register cache
            for base in range(W * (lane + NC * G), n, G * V * W):  # rows wider than the cache
                kt = ZERO
                s = ZERO
                for v in range(V):
                    j = base + v * G * W
                    if j < n:
                        ld(x, r, j, buf, v * W)
                        kt += float32(W)
                        for q in range(W):
                            s += buf[v * W + q]
                tm = s / kt
                tq = ZERO
                for v in range(V):
                    if base + v * G * W < n:
                        for q in range(W):
                            d = buf[v * W + q] - tm
                            tq += d * d
                cnt, m, m2 = chan_merge(cnt, m, m2, kt, tm, tq)  # merge the trip: one division
        cnt, m, m2 = group_welford(cnt, m, m2, G, scr_n, scr_m, scr_q)
        q = ONE / math.sqrt(m2 / cnt + eps) if n > 0 else ZERO
        if lane == 0 and row < rows:
            mean[r] = m
            rstd[r] = q
        for c in range(NC):  # the write, from registers
            j = W * (lane + c * G)
            if j < n:
                ld(gamma, 0, j, par, 0)  # gamma, then beta through the same W registers
                for e in range(W):
                    cache[c * W + e] = (cache[c * W + e] - m) * q * par[e]
                ld(beta, 0, j, par, 0)
                for e in range(W):
                    cache[c * W + e] += par[e]
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
                            buf[v * W + e] = (buf[v * W + e] - m) * q * par[e]
                        ld(beta, 0, j, par, 0)
                        for e in range(W):
                            buf[v * W + e] += par[e]
                        st(y, r, j, buf, v * W)

    return ln_rows


@dataclass(frozen=True)
class MultiRow(C.MultiRowShape, Variant):
    threads_per_row: int = 128  # x 32 floats in registers: a 4096-wide row is read once
    rows_per_block: int = 2
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "threads_per_row threads per row, rows_per_block rows per block; each thread loads its "
        "share of the row into registers (vector loads, all in flight), takes its exact mean and "
        "centred M2 there and merges lanes with Chan's formula. y comes from the same registers: "
        "x leaves DRAM once.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, V, W, NC = self.kernel_params(problem)
        c = problem.cols
        return [Launch(_rows_kernel(G, R, V, W, NC, C.cached_cols(problem.cols, G, W, NC) < problem.cols), -(-problem.rows // R), G * R,
                       (bufs["x"], C.view(bufs["gamma"], (1, c)), C.view(bufs["beta"], (1, c)), bufs["y"],
                        bufs["mean"], bufs["rstd"], C.eps32(problem), problem.rows, c))]

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
        "Rung 5 at the launch shape of softmax's rule: each thread holds 16 elements of its row "
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


# --- rung 7 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _smem_row_kernel(B: int, W: int, dtype: str, PEEL: bool, REGS: int):
    """One block of B threads per row; the row staged in shared memory in its own dtype, then
    three sweeps over it there (sum, centred sum of squares, write), W elements a shared load;
    the write loads gamma and beta for U vectors before it uses any (one L2 latency per trip)."""
    ld = vec_load(W)
    st = vec_store(W)
    U = param_unroll(W)
    UW = U * W
    stage = stage_row(B, per_copy(dtype), PEEL)
    PADMAX = per_copy(dtype) - 1 if PEEL else 0  # an unaligned row's pad ahead of it
    sdt = float16 if dtype == "float16" else float32

    @jit_row(B, REGS)
    def ln_smem_row(x, gamma, beta, y, mean, rstd, eps, cols):
        smem = cuda.shared.array(0, sdt)  # dynamic: the row
        row = shared_tile(smem, 0, 1, cols + PADMAX)
        scr = cuda.shared.array(32, float32)
        buf = cuda.local.array(W, float32)
        gam = cuda.local.array(UW, float32)
        bet = cuda.local.array(UW, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        pad = stage(x, r, row, cols)  # the only read of x; the row from row[0, pad] on
        s = ZERO
        for j in range(W * t, cols, W * B):
            ld(row, 0, pad + j, buf, 0)
            for e in range(W):
                s += buf[e]
        m = group_sum(s, B, scr) / float32(cols)
        s = ZERO
        for j in range(W * t, cols, W * B):  # the exact two-pass variance: no cancellation
            ld(row, 0, pad + j, buf, 0)
            for e in range(W):
                d = buf[e] - m
                s += d * d
        q = ONE / math.sqrt(group_sum(s, B, scr) / float32(cols) + eps)
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for base in range(W * t, cols, U * W * B):  # U vectors a trip: gamma's and beta's loads all in flight
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(gamma, 0, j, gam, u * W)
                    ld(beta, 0, j, bet, u * W)
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(row, 0, pad + j, buf, 0)
                    for e in range(W):
                        buf[e] = (buf[e] - m) * q * gam[u * W + e] + bet[u * W + e]
                    st(y, r, j, buf, 0)

    return ln_smem_row


@dataclass(frozen=True)
class SmemRow(SmemRowShape, Variant):
    threads: int = 0  # 0: the rule of _smemrow.row_threads (about 8 vectors of the row a thread)

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "smem_row"
    instead = "rung 6 tuned (part of the row in registers, the rest read twice)"
    what: ClassVar[str] = (
        "One block per row copies its row once into dynamic shared memory (16-byte cp.async, all "
        "in flight at once) and sweeps it there for the mean, the exact centred variance and the "
        "write. x leaves DRAM once at any width, with no register cache to size.")

    def plan(self, problem, bufs):
        self.supports(problem)
        B, W, PEEL, REGS = self.kernel_params(problem)
        c = problem.cols
        return [OptInSharedLaunch(_smem_row_kernel(B, W, problem.dtype, PEEL, REGS), problem.rows, B,
                                  (bufs["x"], C.view(bufs["gamma"], (1, c)), C.view(bufs["beta"], (1, c)), bufs["y"],
                                   bufs["mean"], bufs["rstd"], C.eps32(problem), c), self.shared_bytes(problem))]

    def traffic(self, problem):
        B, W, PEEL, REGS = self.kernel_params(problem)
        how = self.copy_note(problem)
        t = _traffic(problem, 1, f"one DRAM read of x ({how} into shared memory), one write of y; the row "
                                 "written to shared memory once and read there three times")
        return dataclasses.replace(t, smem_bytes=4 * problem.elem_bytes)



# --- rung 8 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _packed_kernel(G: int, R: int, NC: int, VEC: bool, TAIL: bool):
    """Rung 5's kernel for float16 rows held packed: each thread keeps NC chunks of 8 halves
    (4 registers each; chunk c at column 8 * (lane + c * G)) from the loads to the write; the
    chunk's mean and centred M2 from them (exact two-pass), Chan's merge across lanes; gamma and
    beta loaded packed in the write, a chunk at a time."""
    load = load_chunk(VEC)
    store = store_chunk(VEC)
    CW = NC * WORDS

    @C.jit_cached(G * R, CW)
    def ln_packed(x, gamma, beta, y, mean, rstd, eps, rows, cols):
        scr_n = cuda.shared.array(32, float32)
        scr_m = cuda.shared.array(32, float32)
        scr_q = cuda.shared.array(32, float32)
        cw = cuda.local.array(CW, uint32)  # constant size, constant indices: registers
        tw = cuda.local.array(WORDS, uint32)
        gw = cuda.local.array(WORDS, uint32)
        bw = cuda.local.array(WORDS, uint32)
        t = cuda.threadIdx.x
        lane = t % G
        row = cuda.blockIdx.x * R + t // G
        n = cols if row < rows else 0  # idle groups still join the reductions
        r = min(row, rows - 1)
        for c in range(NC):  # every load issued before any use: 16 * NC bytes in flight
            load(x, r, CHUNK * (lane + c * G), n, ZERO, cw, c * WORDS)
        sm = ZERO
        for i in range(CW):
            a, b = halves(cw[i])
            sm += a + b  # padding is 0
        k = ZERO
        for c in range(NC):
            j = CHUNK * (lane + c * G)
            k += float32(max(0, min(CHUNK, n - j)))
        cm = sm / k if k > ZERO else ZERO
        cq = ZERO
        for c in range(NC):
            j = CHUNK * (lane + c * G)
            for i in range(WORDS):
                a, b = halves(cw[c * WORDS + i])
                if j + 2 * i < n:
                    d = a - cm
                    cq += d * d
                if j + 2 * i + 1 < n:
                    d = b - cm
                    cq += d * d
        cnt = k
        m = cm
        m2 = cq
        if TAIL:  # compiled only for rows wider than the register cache
            for j in range(CHUNK * (lane + NC * G), n, CHUNK * G):
                load(x, r, j, n, ZERO, tw, 0)
                kt = float32(min(CHUNK, n - j))
                s = ZERO
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    s += a + b
                tm = s / kt
                tq = ZERO
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    if j + 2 * i < n:
                        d = a - tm
                        tq += d * d
                    if j + 2 * i + 1 < n:
                        d = b - tm
                        tq += d * d
                cnt, m, m2 = chan_merge(cnt, m, m2, kt, tm, tq)  # merge the chunk: one division
        cnt, m, m2 = group_welford(cnt, m, m2, G, scr_n, scr_m, scr_q)
        q = ONE / math.sqrt(m2 / cnt + eps) if n > 0 else ZERO
        if lane == 0 and row < rows:
            mean[r] = m
            rstd[r] = q
        for c in range(NC):  # the write, from registers
            j = CHUNK * (lane + c * G)
            if j < n:
                load(gamma, 0, j, n, ZERO, gw, 0)
                load(beta, 0, j, n, ZERO, bw, 0)
                for i in range(WORDS):
                    a, b = halves(cw[c * WORDS + i])
                    ga, gb = halves(gw[i])
                    ba, bb = halves(bw[i])
                    cw[c * WORDS + i] = pack2((a - m) * q * ga + ba, (b - m) * q * gb + bb)
                store(y, r, j, n, cw, c * WORDS)
        if TAIL:  # the uncached tail, read again
            for j in range(CHUNK * (lane + NC * G), n, CHUNK * G):
                load(x, r, j, n, ZERO, tw, 0)
                load(gamma, 0, j, n, ZERO, gw, 0)
                load(beta, 0, j, n, ZERO, bw, 0)
                for i in range(WORDS):
                    a, b = halves(tw[i])
                    ga, gb = halves(gw[i])
                    ba, bb = halves(bw[i])
                    tw[i] = pack2((a - m) * q * ga + ba, (b - m) * q * gb + bb)
                store(y, r, j, n, tw, 0)

    return ln_packed


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
        "float32 row's register budget. The statistics and the write are float32; gamma, beta and "
        "y stay packed.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, NC, VEC, TAIL = self.kernel_params(problem)
        c = problem.cols
        return [Launch(_packed_kernel(G, R, NC, VEC, TAIL), -(-problem.rows // R), G * R,
                       (bufs["x"], C.view(bufs["gamma"], (1, c)), C.view(bufs["beta"], (1, c)), bufs["y"],
                        bufs["mean"], bufs["rstd"], C.eps32(problem), problem.rows, c))]

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


# --- rung 9 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _persist_kernel(G: int, R: int, W: int, NC: int, REGS: int):
    """A persistent grid: the block's R groups of G threads take rows ``base + t // G`` for
    ``base`` = blockIdx.x * R, + gridDim.x * R, ...; each thread holds NC vectors of W elements of
    its row (chunk c at column W * (lane + c * G)) and loads those of its next row into ``nxt``
    before it reduces and writes this one.  Two plain all-reduces (the sum, then the centred sum
    of squares from the registers: the exact two-pass variance); gamma and beta read in the
    write (the same columns every row: L1)."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W

    @jit_persist(REGS)
    def ln_persist(x, gamma, beta, y, mean, rstd, eps, rows, cols):
        scr = cuda.shared.array(32, float32)
        cur = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        nxt = cuda.local.array(CW, float32)
        par = cuda.local.array(W, float32)
        t = cuda.threadIdx.x
        lane = t % G
        nf = float32(cols)
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
                        s += cur[c * W + q]
            m = group_sum(s, G, scr) / nf
            s = ZERO
            for c in range(NC):
                if W * (lane + c * G) < n:
                    for q in range(W):
                        d = cur[c * W + q] - m
                        s += d * d
            q = ONE / math.sqrt(group_sum(s, G, scr) / nf + eps)
            if lane == 0 and r < rows:
                mean[r] = m
                rstd[r] = q
            for c in range(NC):
                j = W * (lane + c * G)
                if j < n:
                    ld(gamma, 0, j, par, 0)
                    for e in range(W):
                        cur[c * W + e] = (cur[c * W + e] - m) * q * par[e]
                    ld(beta, 0, j, par, 0)
                    for e in range(W):
                        cur[c * W + e] += par[e]
                    st(y, r, j, cur, c * W)
            for i in range(CW):
                cur[i] = nxt[i]

    return ln_persist


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
        "that row's DRAM latency. A thread holds 32 bytes of its row; the statistics are two "
        "plain all-reduces.")

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, W, NC = self.kernel_params(problem)
        c = problem.cols
        return [Launch(_persist_kernel(G, R, W, NC, self.reg_cap(problem)), self.blocks(problem), G * R,
                       (bufs["x"], C.view(bufs["gamma"], (1, c)), C.view(bufs["beta"], (1, c)), bufs["y"],
                        bufs["mean"], bufs["rstd"], C.eps32(problem), problem.rows, c))]

    def traffic(self, problem):
        G, R, W, NC = self.kernel_params(problem)
        it = np.dtype(problem.dtype).itemsize
        return _traffic(problem, 1, f"one DRAM read of x (the row in registers, {NC * W} elements a thread, the next "
                                    f"row's loads in flight beside it), one write of y; {8 * W * it}-bit loads and "
                                    f"stores; a persistent grid of {self.blocks(problem)} blocks")


# --- rung 10 ------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _split_row_kernel(B: int, W: int, NC: int, dtype: str, PEEL: bool, REGS: int):
    """One block of B threads per row; each thread loads NC vectors of W elements of the row's
    first K = B * NC * W columns into registers (vector c at column W * (t + c * B)), the rest of
    the row is staged in shared memory in its own dtype (:func:`_splitrow.stage_part`); then the
    sum, the exact centred sum of squares and the write over both parts, gamma and beta loaded U
    vectors at a time before any is used (as rung 7)."""
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
    def ln_split_row(x, gamma, beta, y, mean, rstd, eps, cols):
        smem = cuda.shared.array(0, sdt)  # dynamic: columns K.. of the row
        row = shared_tile(smem, 0, 1, max(cols - K, 0) + PADMAX)
        scr = cuda.shared.array(32, float32)
        cache = cuda.local.array(CW, float32)  # constant size, constant indices: registers
        buf = cuda.local.array(W, float32)
        gam = cuda.local.array(UW, float32)
        bet = cuda.local.array(UW, float32)
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
                    s += cache[c * W + e]
        for j in range(K + W * t, cols, W * B):
            ld(row, 0, pad + j - K, buf, 0)
            for e in range(W):
                s += buf[e]
        m = block_sum(s, B, scr) / float32(cols)
        s = ZERO
        for c in range(NC):  # the exact two-pass variance: no cancellation
            if W * (t + c * B) < cols:
                for e in range(W):
                    d = cache[c * W + e] - m
                    s += d * d
        for j in range(K + W * t, cols, W * B):
            ld(row, 0, pad + j - K, buf, 0)
            for e in range(W):
                d = buf[e] - m
                s += d * d
        q = ONE / math.sqrt(block_sum(s, B, scr) / float32(cols) + eps)
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for c0 in range(0, NC, U):  # the write: the registers' share, U vectors of gamma and beta a trip ...
            for u in range(U):
                j = W * (t + (c0 + u) * B)
                if c0 + u < NC and j < cols:
                    ld(gamma, 0, j, gam, u * W)
                    ld(beta, 0, j, bet, u * W)
            for u in range(U):
                c = c0 + u
                j = W * (t + c * B)
                if c < NC and j < cols:
                    for e in range(W):
                        cache[c * W + e] = (cache[c * W + e] - m) * q * gam[u * W + e] + bet[u * W + e]
                    st(y, r, j, cache, c * W)
        for base in range(K + W * t, cols, U * W * B):  # ... and the staged part
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(gamma, 0, j, gam, u * W)
                    ld(beta, 0, j, bet, u * W)
            for u in range(U):
                j = base + u * W * B
                if j < cols:
                    ld(row, 0, pad + j - K, buf, 0)
                    for e in range(W):
                        buf[e] = (buf[e] - m) * q * gam[u * W + e] + bet[u * W + e]
                    st(y, r, j, buf, 0)

    return ln_split_row


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
        c = problem.cols
        return [OptInSharedLaunch(_split_row_kernel(B, W, NC, problem.dtype, PEEL, REGS), problem.rows, B,
                                  (bufs["x"], C.view(bufs["gamma"], (1, c)), C.view(bufs["beta"], (1, c)), bufs["y"],
                                   bufs["mean"], bufs["rstd"], C.eps32(problem), c), self.shared_bytes(problem))]

    def traffic(self, problem):
        f = 1.0 - self.register_cols(problem) / problem.cols  # the staged share of the row
        t = _traffic(problem, 1, self.split_note(problem) + "; the staged part written to shared memory once and "
                                                            "read there three times")
        return dataclasses.replace(t, smem_bytes=4 * problem.elem_bytes * f)


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), Welford(), MultiRow(), Tuned(), SmemRow(),
                         Packed(), Persist(), SplitRow()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384, 65536)]
#: float16 at the widths that matter, appended so that the indices above keep their problems
GPU_SWEEP += [Problem(4096, c, "float16") for c in (1024, 4096, 16384)]
SIM_SWEEP = [Problem(3, 37)]
