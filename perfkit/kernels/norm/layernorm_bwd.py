"""LayerNorm backward over the last dimension of a (rows, cols) array.

Given x, dy and gamma (the forward's mean and rstd are recomputed from x, as a fused
training step that does not keep them would), with ``xhat = (x - mean) * rstd`` and
``g = dy * gamma``::

    dx     = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))     per row
    dgamma = sum_r dy * xhat                                       per column
    dbeta  = sum_r dy                                              per column

Two reductions in different directions: along rows (the statistics, then two means for dx)
and down columns (dgamma, dbeta).

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.autograd through F.layer_norm on a GPU (CuPy expression without torch); NumPy here
  1 naive       one thread per row: stats, the two means, dx (three kernels); one thread per column
                for dgamma/dbeta (a fourth); temporaries in a workspace
  2 fused       one block per row for stats + means + dx (shared-memory trees), then the column kernel
  3 warp        the same with warp-shuffle reductions
  4 welford     single-pass row statistics: Welford for (mean, M2) plus the co-moment
                sum (x - mean)(g - mean g) = sum g (x - mean), merged with Chan's formulas
  5 multirow    G threads per row, R rows per block, a persistent grid: each row group also keeps
                partial dgamma/dbeta for its columns, so x and dy leave DRAM once; a small kernel
                sums the partials
  6 tuned       rung 5 at the launch shape chosen by ``search`` (static rule without a GPU)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, ClassVar

import numpy as np
from numba import cuda, float32

from ... import backend
from ...model import Traffic
from ..base import TOLERANCES, Launch, OracleVariant, UnsupportedProblem, Variant, registry_check
from . import _common as C
from ._common import ONE, ZERO, group_sum, shfl_xor, tree_sum

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Welford", "MultiRow", "Tuned",
           "search", "EXAMPLE_PROBLEM"]


@dataclass(frozen=True)
class Problem(C.RowProblem):
    """LayerNorm backward for x, dy (rows, cols) and gamma (cols,)."""

    rows: int
    cols: int
    dtype: str = "float32"
    eps: float = 1e-5
    axis: int = -1

    op: ClassVar[str] = "layernorm_bwd"

    def input_specs(self):
        rc = (self.rows, self.cols)
        return {"x": (rc, self.dtype), "dy": (rc, self.dtype), "gamma": ((self.cols,), self.dtype)}

    def output_specs(self):
        return {"dx": ((self.rows, self.cols), self.dtype), "dgamma": ((self.cols,), self.dtype),
                "dbeta": ((self.cols,), self.dtype)}

    def _make(self, g):
        rc = (self.rows, self.cols)
        return {"x": (1.0 + 2.0 * g.standard_normal(rc)).astype(self.dtype),
                "dy": g.standard_normal(rc).astype(self.dtype),
                "gamma": (1.0 + 0.1 * g.standard_normal(self.cols)).astype(self.dtype)}

    def _reference(self, inputs):
        x = inputs["x"].astype(np.float64)
        dy = inputs["dy"].astype(np.float64)
        mean = x.mean(axis=1, keepdims=True)
        rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + self.eps)
        xhat = (x - mean) * rstd
        g = dy * inputs["gamma"].astype(np.float64)
        dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        return {"dx": dx, "dgamma": (dy * xhat).sum(axis=0), "dbeta": dy.sum(axis=0)}

    def tolerance(self):
        rtol, atol = C.scaled_tolerance(TOLERANCES[self.dtype], max(self.cols, self.rows))
        return rtol, atol * max(1.0, math.sqrt(self.rows))  # dgamma/dbeta are sums over rows

    @property
    def flops(self) -> float:
        return 16.0 * self.rows * self.cols


def _traffic(p: Problem, row_sweeps: int, col_pass: bool, note: str, smem: float = 0.0,
             extra_l2: float = 0.0) -> Traffic:
    """Row kernel: ``row_sweeps`` sweeps over x (dy is read by the last two sweeps), one write of
    dx; the column kernel (``col_pass``) reads x and dy once more."""
    e = p.elem_bytes
    it = np.dtype(p.dtype).itemsize
    par = 3 * p.cols * it
    x_dram = C.sweep_dram(p.rows, p.cols, p.dtype, row_sweeps)
    dy_dram = C.sweep_dram(p.rows, p.cols, p.dtype, 2)
    dram = x_dram + dy_dram + e + par + (2 * e if col_pass else 0.0)
    l2 = row_sweeps * e + 2 * e + e + par + (2 * e if col_pass else 0.0) + extra_l2
    return Traffic(flops=p.flops, dram_bytes=dram, l2_bytes=l2, smem_bytes=smem, limiter="dram", notes=note)


# --- rung 0 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = ("PyTorch's layer_norm backward kernels (torch.ops.aten.native_layer_norm_backward, "
                           "what autograd calls for F.layer_norm) on a GPU, with the forward's mean and rstd "
                           "computed once before timing; a CuPy expression without torch; NumPy in float32 "
                           "on the host.")

    def gpu(self, problem, x, out):
        try:
            import torch

            ok = torch.cuda.is_available()
        except Exception:
            ok = False
        if ok:
            xt, gt, dyt = (torch.from_dlpack(x[k]) for k in ("x", "gamma", "dy"))
            if "_saved" not in x:  # the forward's saved statistics, made once (the warm-up call)
                bt = torch.zeros_like(gt)
                _, mean, rstd = torch.native_layer_norm(xt, [problem.cols], gt, bt, problem.eps)
                x["_saved"] = (mean, rstd, bt)
            mean, rstd, bt = x["_saved"]
            dx, dg, db = torch.ops.aten.native_layer_norm_backward(dyt, xt, [problem.cols], mean, rstd, gt, bt,
                                                                   [True, True, True])
            return {"dx": dx, "dgamma": dg, "dbeta": db}  # torch's buffers: no copy of ours is timed
        import cupy as cp

        res = _host_math(cp, x["x"], x["dy"], x["gamma"], problem.eps)
        for n, a in res.items():
            out[n][...] = a.astype(out[n].dtype)

    def host(self, problem, x):
        res = _host_math(np, x["x"], x["dy"], x["gamma"], problem.eps)
        return {n: a.astype(problem.dtype) for n, a in res.items()}

    def traffic(self, problem):
        e = problem.elem_bytes
        return Traffic(flops=problem.flops, dram_bytes=4 * e, l2_bytes=4 * e, limiter="dram",
                       notes="the backward kernels: dx (read x, dy; write dx) and dgamma/dbeta (read x, dy "
                             "again unless they stay in L2)")


def _host_math(xp, x, dy, gamma, eps):
    f = xp.float32
    x, dy, gamma = x.astype(f), dy.astype(f), gamma.astype(f)
    mean = x.mean(axis=1, keepdims=True)
    rstd = f(1) / xp.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + f(eps))
    xhat = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return {"dx": dx, "dgamma": (dy * xhat).sum(axis=0), "dbeta": dy.sum(axis=0)}


# --- rung 1 -------------------------------------------------------------------------------
@cuda.jit
def lnb_row_stats(x, mean, rstd, eps, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        s = ZERO
        for j in range(cols):
            s += float32(x[r, j])
        m = s / float32(cols)
        s = ZERO
        for j in range(cols):
            d = float32(x[r, j]) - m
            s += d * d
        mean[r] = m
        rstd[r] = ONE / math.sqrt(s / float32(cols) + eps)


@cuda.jit
def lnb_row_coefs(x, dy, gamma, mean, rstd, c1, c2, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = mean[r]
        q = rstd[r]
        a = ZERO
        b = ZERO
        for j in range(cols):
            g = float32(dy[r, j]) * float32(gamma[j])
            a += g
            b += g * (float32(x[r, j]) - m) * q
        c1[r] = a / float32(cols)
        c2[r] = b / float32(cols)


@cuda.jit
def lnb_row_dx(x, dy, gamma, mean, rstd, c1, c2, dx, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        m = mean[r]
        q = rstd[r]
        a = c1[r]
        b = c2[r]
        for j in range(cols):
            xh = (float32(x[r, j]) - m) * q
            dx[r, j] = q * (float32(dy[r, j]) * float32(gamma[j]) - a - xh * b)


@cuda.jit
def lnb_col_params(x, dy, mean, rstd, dgamma, dbeta, rows, cols):
    """One thread per column (grid-stride over columns), looping down the rows: neighbouring
    threads read neighbouring columns (coalesced); x and dy are read once more."""
    for j in range(cuda.grid(1), cols, cuda.gridsize(1)):
        a = ZERO
        b = ZERO
        for r in range(rows):
            d = float32(dy[r, j])
            a += d * (float32(x[r, j]) - mean[r]) * rstd[r]
            b += d
        dgamma[j] = a
        dbeta[j] = b


def _stats_ws(problem) -> dict:
    return {"mean": ((problem.rows,), "float32"), "rstd": ((problem.rows,), "float32")}


def _col_grid(cols: int, block: int) -> int:
    """Enough blocks for every column, at most 8 per SM (grid-stride beyond that)."""
    return max(1, min(-(-cols // block), _sms() * 8))


def _col_launch(problem, bufs, block=128) -> Launch:
    return Launch(lnb_col_params, _col_grid(problem.cols, block), block,
                  (bufs["x"], bufs["dy"], bufs["mean"], bufs["rstd"], bufs["dgamma"], bufs["dbeta"],
                   problem.rows, problem.cols))


@dataclass(frozen=True)
class Naive(Variant):
    block: int = 128

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per row for the row work (statistics, the two means, dx: three kernels, "
        "temporaries in global memory) and one thread per column for dgamma/dbeta. x is read "
        "five times and dy three; row-per-thread access is uncoalesced."
    )

    def workspace(self, problem):
        return {**_stats_ws(problem), "c1": ((problem.rows,), "float32"), "c2": ((problem.rows,), "float32")}

    def plan(self, problem, bufs):
        g = -(-problem.rows // self.block)
        n, c = problem.rows, problem.cols
        x, dy, gm, mean, rstd, c1, c2 = (bufs[k] for k in ("x", "dy", "gamma", "mean", "rstd", "c1", "c2"))
        return [Launch(lnb_row_stats, g, self.block, (x, mean, rstd, C.eps32(problem), n, c)),
                Launch(lnb_row_coefs, g, self.block, (x, dy, gm, mean, rstd, c1, c2, n, c)),
                Launch(lnb_row_dx, g, self.block, (x, dy, gm, mean, rstd, c1, c2, bufs["dx"], n, c)),
                _col_launch(problem, bufs)]

    def traffic(self, problem):
        e = problem.elem_bytes
        return Traffic(flops=problem.flops, dram_bytes=5 * e + 3 * e + e, l2_bytes=9 * e, limiter="dram",
                       notes="x read 5 times, dy 3 times, dx written once; row-per-thread is uncoalesced")


# --- rung 2 -------------------------------------------------------------------------------
def _check_block(block: int) -> None:
    if block < 32 or block > 1024 or block & (block - 1):
        raise UnsupportedProblem(f"block={block} must be a power of two in 32..1024")


@lru_cache(maxsize=None)
def _fused_kernel(B: int):
    @C.jit_block(B)
    def lnb_fused(x, dy, gamma, dx, mean, rstd, eps, cols):
        sh = cuda.shared.array(B, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        nf = float32(cols)
        s = ZERO
        for j in range(t, cols, B):
            s += float32(x[r, j])
        m = tree_sum(s, sh, B) / nf
        s = ZERO
        for j in range(t, cols, B):
            d = float32(x[r, j]) - m
            s += d * d
        q = ONE / math.sqrt(tree_sum(s, sh, B) / nf + eps)
        a = ZERO
        b = ZERO
        for j in range(t, cols, B):
            g = float32(dy[r, j]) * float32(gamma[j])
            a += g
            b += g * (float32(x[r, j]) - m) * q
        a = tree_sum(a, sh, B) / nf
        b = tree_sum(b, sh, B) / nf
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for j in range(t, cols, B):
            xh = (float32(x[r, j]) - m) * q
            dx[r, j] = q * (float32(dy[r, j]) * float32(gamma[j]) - a - xh * b)

    return lnb_fused


@dataclass(frozen=True)
class Fused(Variant):
    block: int = 256

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "fused"
    what: ClassVar[str] = (
        "One block per row does all the row work in one kernel (four sweeps: mean, variance, "
        "the two means, dx; shared-memory trees), keeping mean/rstd for the column kernel. "
        "Row sweeps after the first hit L1/L2."
    )

    def supports(self, problem):
        _check_block(self.block)

    def workspace(self, problem):
        return _stats_ws(problem)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_fused_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["dy"], bufs["gamma"], bufs["dx"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols)),
                _col_launch(problem, bufs)]

    def traffic(self, problem):
        return _traffic(problem, 4, True, "row kernel: 4 sweeps (3 from cache); column kernel re-reads x, dy",
                        smem=problem.rows * self.block * 4.0 * 6 * math.log2(self.block))


# --- rung 3 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _warp_kernel(B: int):
    @C.jit_block(B)
    def lnb_warp(x, dy, gamma, dx, mean, rstd, eps, cols):
        scr = cuda.shared.array(32, float32)
        scr2 = cuda.shared.array(32, float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        nf = float32(cols)
        s = ZERO
        for j in range(t, cols, B):
            s += float32(x[r, j])
        m = group_sum(s, B, scr) / nf
        s = ZERO
        for j in range(t, cols, B):
            d = float32(x[r, j]) - m
            s += d * d
        q = ONE / math.sqrt(group_sum(s, B, scr) / nf + eps)
        a = ZERO
        b = ZERO
        for j in range(t, cols, B):
            g = float32(dy[r, j]) * float32(gamma[j])
            a += g
            b += g * (float32(x[r, j]) - m) * q
        a = group_sum(a, B, scr) / nf
        b = group_sum(b, B, scr2) / nf
        if t == 0:
            mean[r] = m
            rstd[r] = q
        for j in range(t, cols, B):
            xh = (float32(x[r, j]) - m) * q
            dx[r, j] = q * (float32(dy[r, j]) * float32(gamma[j]) - a - xh * b)

    return lnb_warp


@dataclass(frozen=True)
class Warp(Variant):
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "warp"
    what: ClassVar[str] = (
        "The four row reductions by warp shuffles plus one shared slot per warp (two barriers "
        "each instead of log2(block)); the column kernel is unchanged."
    )

    def supports(self, problem):
        _check_block(self.block)

    def workspace(self, problem):
        return _stats_ws(problem)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_warp_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["dy"], bufs["gamma"], bufs["dx"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols)),
                _col_launch(problem, bufs)]

    def traffic(self, problem):
        return _traffic(problem, 4, True, "row kernel: 4 sweeps (3 from cache), shuffles; column kernel "
                                          "re-reads x, dy", smem=problem.rows * 256.0 * 4)


# --- rung 4 -------------------------------------------------------------------------------
@cuda.jit(device=True)
def comoment_merge(na, mxa, m2a, mga, ca, nb, mxb, m2b, mgb, cb):
    """Chan's merge of (count, mean x, M2 of x, mean g, co-moment of x and g) for two parts:
    M2 += dx^2 na nb / n and C += dx dg na nb / n; an empty part is a no-op."""
    n = na + nb
    if n == ZERO:
        return ZERO, ZERO, ZERO, ZERO, ZERO
    wb = nb / n
    dxm = mxb - mxa
    dgm = mgb - mga
    f = na * wb
    return n, mxa + dxm * wb, m2a + m2b + dxm * dxm * f, mga + dgm * wb, ca + cb + dxm * dgm * f


@cuda.jit(device=True)
def group_comoment(n, mx, m2, mg, c, G, scr):
    """All-reduce of co-moment states over a group of G threads; ``scr`` is shared (5, 32)."""
    off = min(G, 32) // 2
    while off > 0:
        n2 = shfl_xor(n, off)
        mx2 = shfl_xor(mx, off)
        q2 = shfl_xor(m2, off)
        mg2 = shfl_xor(mg, off)
        c2 = shfl_xor(c, off)
        n, mx, m2, mg, c = comoment_merge(n, mx, m2, mg, c, n2, mx2, q2, mg2, c2)
        off //= 2
    if G > 32:
        t = cuda.threadIdx.x
        w = t // 32
        if t % 32 == 0:
            scr[0, w] = n
            scr[1, w] = mx
            scr[2, w] = m2
            scr[3, w] = mg
            scr[4, w] = c
        cuda.syncthreads()
        first = (t // G) * (G // 32)
        n = ZERO
        mx = ZERO
        m2 = ZERO
        mg = ZERO
        c = ZERO
        for i in range(G // 32):
            k = first + i
            n, mx, m2, mg, c = comoment_merge(n, mx, m2, mg, c, scr[0, k], scr[1, k], scr[2, k], scr[3, k], scr[4, k])
        cuda.syncthreads()
    return n, mx, m2, mg, c


@lru_cache(maxsize=None)
def _welford_kernel(B: int):
    @C.jit_block(B)
    def lnb_welford(x, dy, gamma, dx, mean, rstd, eps, cols):
        scr = cuda.shared.array((5, 32), float32)
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        n = ZERO
        mx = ZERO
        m2 = ZERO
        mg = ZERO
        c = ZERO
        for j in range(t, cols, B):  # one sweep for all the row statistics
            xv = float32(x[r, j])
            g = float32(dy[r, j]) * float32(gamma[j])
            n += ONE
            d = xv - mx
            mx += d / n
            mg += (g - mg) / n
            m2 += d * (xv - mx)
            c += d * (g - mg)  # co-moment: (x - old mean x)(g - new mean g)
        n, mx, m2, mg, c = group_comoment(n, mx, m2, mg, c, B, scr)
        q = ONE / math.sqrt(m2 / n + eps)
        b = c / n * q  # mean(g * xhat) = rstd * mean(g * (x - mean))
        if t == 0:
            mean[r] = mx
            rstd[r] = q
        for j in range(t, cols, B):
            xh = (float32(x[r, j]) - mx) * q
            dx[r, j] = q * (float32(dy[r, j]) * float32(gamma[j]) - mg - xh * b)

    return lnb_welford


@dataclass(frozen=True)
class Welford(Variant):
    block: int = 256

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "welford"
    what: ClassVar[str] = (
        "All row statistics in one sweep: Welford's update for mean and M2 of x, the running "
        "mean of g = dy*gamma, and their co-moment sum (x - mean x)(g - mean g), which equals "
        "sum g (x - mean) = n mean(g xhat) / rstd; lanes merge with Chan's formulas. Two row "
        "sweeps instead of four."
    )

    def supports(self, problem):
        _check_block(self.block)

    def workspace(self, problem):
        return _stats_ws(problem)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_welford_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["dy"], bufs["gamma"], bufs["dx"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols)),
                _col_launch(problem, bufs)]

    def traffic(self, problem):
        return _traffic(problem, 2, True, "row kernel: 2 sweeps (stats, dx); column kernel re-reads x, dy",
                        smem=problem.rows * 640.0 * 4)


# --- rung 5 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _rows_kernel(G: int, R: int, V: int):
    @C.jit_block(G * R)
    def lnb_rows(x, dy, gamma, dx, pg, pb, eps, rows, cols):
        scr = cuda.shared.array((5, 32), float32)
        xb = cuda.local.array(V, float32)
        gb = cuda.local.array(V, float32)
        t = cuda.threadIdx.x
        lane = t % G
        slot = cuda.blockIdx.x * R + t // G
        nslots = cuda.gridDim.x * R
        for j in range(lane, cols, G):  # this group's partial sums start at zero
            pg[slot, j] = ZERO
            pb[slot, j] = ZERO
        trips = (rows + nslots - 1) // nslots  # same trip count for every group (barriers inside)
        for it in range(trips):
            row = slot + it * nslots
            n_ = cols if row < rows else 0
            r = min(row, rows - 1)
            n = ZERO
            mx = ZERO
            m2 = ZERO
            mg = ZERO
            c = ZERO
            for base in range(lane, n_, G * V):
                k = ZERO
                sx = ZERO
                sg = ZERO
                for v in range(V):  # V loads of x and dy in flight
                    j = base + v * G
                    if j < n_:
                        xb[v] = float32(x[r, j])
                        gb[v] = float32(dy[r, j]) * float32(gamma[j])
                        k += ONE
                        sx += xb[v]
                        sg += gb[v]
                cmx = sx / k
                cmg = sg / k
                cq = ZERO
                cc = ZERO
                for v in range(V):
                    if base + v * G < n_:
                        d = xb[v] - cmx
                        cq += d * d
                        cc += d * (gb[v] - cmg)
                n, mx, m2, mg, c = comoment_merge(n, mx, m2, mg, c, k, cmx, cq, cmg, cc)
            n, mx, m2, mg, c = group_comoment(n, mx, m2, mg, c, G, scr)
            q = ONE / math.sqrt(m2 / n + eps) if n_ > 0 else ZERO
            b = c / n * q if n_ > 0 else ZERO
            for base in range(lane, n_, G * V):
                for v in range(V):
                    j = base + v * G
                    if j < n_:
                        xb[v] = float32(x[r, j])
                        gb[v] = float32(dy[r, j])
                for v in range(V):
                    j = base + v * G
                    if j < n_:
                        xh = (xb[v] - mx) * q
                        dx[r, j] = q * (gb[v] * float32(gamma[j]) - mg - xh * b)
                        pg[slot, j] += gb[v] * xh  # this lane always owns column j: no race
                        pb[slot, j] += gb[v]

    return lnb_rows


@cuda.jit
def lnb_sum_partials(pg, pb, dgamma, dbeta, nslots, cols):
    for j in range(cuda.grid(1), cols, cuda.gridsize(1)):
        a = ZERO
        b = ZERO
        for s in range(nslots):
            a += pg[s, j]
            b += pb[s, j]
        dgamma[j] = a
        dbeta[j] = b


def _sms() -> int:
    try:
        return backend.device().sm_count or 4
    except Exception:
        return 4


def _persistent_blocks(problem, R: int, blocks_per_sm: int = 4) -> int:
    return max(1, min(_sms() * blocks_per_sm, -(-problem.rows // R)))


@dataclass(frozen=True)
class MultiRow(Variant):
    threads_per_row: int = 32
    rows_per_block: int = 4
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "A persistent grid (a few blocks per SM), rows_per_block groups of threads_per_row "
        "threads, each group looping over rows with vec loads of x and dy in flight. Every lane "
        "owns the same columns in every row, so it adds its dy*xhat and dy into its group's "
        "partial-sum row (L2-resident); a small kernel sums the partials. x and dy leave DRAM "
        "once. (No float4 in Numba: the vec scalar loads a group apart are its equivalent.)"
    )

    def shape(self, problem) -> C.Shape:
        return C.Shape(self.threads_per_row, self.rows_per_block, self.vec)

    def supports(self, problem):
        s = self.shape(problem)
        bad = C.check_shape(s.G, s.R, s.V)
        if bad:
            raise UnsupportedProblem(f"{self.name}: " + "; ".join(bad))

    def slots(self, problem) -> int:
        s = self.shape(problem)
        return _persistent_blocks(problem, s.R) * s.R

    def workspace(self, problem):
        n = self.slots(problem)
        return {"part_dgamma": ((n, problem.cols), "float32"), "part_dbeta": ((n, problem.cols), "float32")}

    def plan(self, problem, bufs):
        self.supports(problem)
        s = self.shape(problem)
        grid = _persistent_blocks(problem, s.R)
        nslots = grid * s.R
        return [Launch(_rows_kernel(s.G, s.R, s.V), grid, s.block,
                       (bufs["x"], bufs["dy"], bufs["gamma"], bufs["dx"], bufs["part_dgamma"],
                        bufs["part_dbeta"], C.eps32(problem), problem.rows, problem.cols)),
                Launch(lnb_sum_partials, _col_grid(problem.cols, 128), 128,
                       (bufs["part_dgamma"], bufs["part_dbeta"], bufs["dgamma"], bufs["dbeta"], nslots,
                        problem.cols))]

    def traffic(self, problem):
        part = self.slots(problem) * problem.cols * 4.0 * 2
        # partials: zeroed, then read+written once per row a group handles (L2), summed once
        rmw = problem.rows * problem.cols * 4.0 * 2 * 2
        return _traffic(problem, 2, False, f"2 row sweeps, no column re-read; partial dgamma/dbeta in "
                                           f"{self.slots(problem)} slots ({part / 2**20:.1f} MiB, L2)",
                        extra_l2=rmw + 2 * part)


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
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384)]
SIM_SWEEP = [Problem(3, 37)]
