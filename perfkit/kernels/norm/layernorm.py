"""LayerNorm forward over the last dimension of a (rows, cols) array:
``y = (x - mean) * rstd * gamma + beta`` with ``rstd = 1 / sqrt(var + eps)`` (biased variance).
The per-row ``mean`` and ``rstd`` (float32) are outputs too: the backward pass uses them.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.layer_norm on a GPU (a CuPy expression without torch); NumPy here
  1 naive       one thread per row, three kernels (mean; centred variance -> rstd; write)
  2 fused       one block per row, shared-memory tree reductions, three sweeps in one kernel
  3 warp        the same with warp-shuffle reductions
  4 welford     single-pass statistics: Welford per thread, Chan's merge across lanes (2 sweeps)
  5 multirow    G threads per row, R rows per block, V loads in flight (128-bit for float32),
                Welford over whole chunks (one division per chunk, not per element)
  6 tuned       rung 5 at the launch shape chosen by ``search`` (static rule without a GPU)

The variance is never computed as E[x^2] - E[x]^2 (catastrophic cancellation when
|mean| >> std): rungs 1-3 use two passes (mean, then sum of (x - mean)^2), rungs 4-6 Welford.
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
from ._common import ONE, ZERO, chan_merge, group_sum, group_welford, tree_sum, welford_push

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Welford", "MultiRow", "Tuned",
           "search", "EXAMPLE_PROBLEM"]


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
                   l2_bytes=sweeps * e + e + par * p.rows + stats, smem_bytes=smem, limiter="dram", notes=note)


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
        s = ZERO
        for j in range(cols):
            s += float32(x[r, j])
        mean[r] = s / float32(cols)


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
                       l2_bytes=3 * e + e + par * problem.rows, limiter="dram",
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
def _rows_kernel(G: int, R: int, V: int):
    @C.jit_block(G * R)
    def ln_rows(x, gamma, beta, y, mean, rstd, eps, rows, cols):
        scr_n = cuda.shared.array(32, float32)
        scr_m = cuda.shared.array(32, float32)
        scr_q = cuda.shared.array(32, float32)
        buf = cuda.local.array(V, float32)
        t = cuda.threadIdx.x
        lane = t % G
        row = cuda.blockIdx.x * R + t // G
        n = cols if row < rows else 0  # idle groups still join the reductions
        r = min(row, rows - 1)
        cnt = ZERO
        m = ZERO
        m2 = ZERO
        for base in range(lane, n, G * V):
            k = ZERO
            s = ZERO
            for v in range(V):  # V independent loads before any use
                j = base + v * G
                if j < n:
                    buf[v] = float32(x[r, j])
                    k += ONE
                    s += buf[v]
                else:
                    buf[v] = ZERO
            cm = s / k
            cq = ZERO
            for v in range(V):
                if base + v * G < n:
                    d = buf[v] - cm
                    cq += d * d
            cnt, m, m2 = chan_merge(cnt, m, m2, k, cm, cq)  # merge the chunk: one division
        cnt, m, m2 = group_welford(cnt, m, m2, G, scr_n, scr_m, scr_q)
        q = ONE / math.sqrt(m2 / cnt + eps) if n > 0 else ZERO
        if lane == 0 and row < rows:
            mean[r] = m
            rstd[r] = q
        for base in range(lane, n, G * V):
            for v in range(V):
                j = base + v * G
                if j < n:
                    buf[v] = float32(x[r, j])
            for v in range(V):
                j = base + v * G
                if j < n:
                    y[r, j] = (buf[v] - m) * q * float32(gamma[j]) + float32(beta[j])

    return ln_rows


@lru_cache(maxsize=None)
def _rows4_kernel(G: int, R: int, V: int):
    @C.jit_block(G * R)
    def ln_rows4(x, gamma, beta, y, mean, rstd, eps, rows, cols):
        scr_n = cuda.shared.array(32, float32)
        scr_m = cuda.shared.array(32, float32)
        scr_q = cuda.shared.array(32, float32)
        buf = cuda.local.array((V, 4), float32)
        t = cuda.threadIdx.x
        lane = t % G
        row = cuda.blockIdx.x * R + t // G
        n = cols if row < rows else 0
        r = min(row, rows - 1)
        cnt = ZERO
        m = ZERO
        m2 = ZERO
        for base in range(4 * lane, n, 4 * G * V):
            k = ZERO
            s = ZERO
            for v in range(V):  # V 128-bit loads in flight
                j = base + 4 * v * G
                if j < n:
                    buf[v, 0], buf[v, 1], buf[v, 2], buf[v, 3] = load4(x, r, j)
                    k += float32(4.0)
                    s += buf[v, 0] + buf[v, 1] + buf[v, 2] + buf[v, 3]
            cm = s / k
            cq = ZERO
            for v in range(V):
                if base + 4 * v * G < n:
                    for e in range(4):
                        d = buf[v, e] - cm
                        cq += d * d
            cnt, m, m2 = chan_merge(cnt, m, m2, k, cm, cq)
        cnt, m, m2 = group_welford(cnt, m, m2, G, scr_n, scr_m, scr_q)
        q = ONE / math.sqrt(m2 / cnt + eps) if n > 0 else ZERO
        if lane == 0 and row < rows:
            mean[r] = m
            rstd[r] = q
        for base in range(4 * lane, n, 4 * G * V):
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    buf[v, 0], buf[v, 1], buf[v, 2], buf[v, 3] = load4(x, r, j)
            for v in range(V):
                j = base + 4 * v * G
                if j < n:
                    for e in range(4):
                        y[r, j + e] = (buf[v, e] - m) * q * gamma[j + e] + beta[j + e]

    return ln_rows4


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
        "threads_per_row threads per row and rows_per_block rows per block; each thread loads vec "
        "elements before using any and folds the whole chunk into its Welford state with one "
        "Chan merge (one division per chunk). Numba has no float4: float32 rows with cols % 4 == 0 "
        "use real 128-bit loads (load4); others use vec scalar loads a group apart."
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
                       (bufs["x"], bufs["gamma"], bufs["beta"], bufs["y"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.rows, problem.cols))]

    def traffic(self, problem):
        s = self.shape(problem)
        return _traffic(problem, 2, f"2 sweeps per row (1 from cache), {s.V} loads in flight per thread, "
                                    f"{s.R} rows per block")


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
        "Rung 5 at a launch shape fitted to the row width: search() times every legal shape with "
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


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), Welford(), MultiRow(), Tuned()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384, 65536)]
SIM_SWEEP = [Problem(3, 37)]
