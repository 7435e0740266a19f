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
  1 naive       one thread per row: stats, the two means, dx (three kernels); temporaries in a
                workspace; dgamma/dbeta by the two-stage column reduction
  2 fused       one block per row for stats + means + dx (shared-memory trees), then the column
                reduction: stage 1, blocks of 32 columns x a chunk of rows (coalesced, ~8 blocks per
                SM) write partial sums; stage 2 adds the few partials per column
  3 warp        the same with warp-shuffle reductions
  4 welford     single-pass row statistics: Welford for (mean, M2) plus the co-moment
                sum (x - mean)(g - mean g) = sum g (x - mean), merged with Chan's formulas
  5 multirow    G threads per row, R rows per block, a persistent grid: a row's x and dy stay in
                registers (read from DRAM once) and each lane keeps dgamma/dbeta partials for its
                columns in registers across rows; the two-stage column reduction sums the slots
  6 tuned       rung 5 at the launch shape of the rule of the forward ops (``search`` ranks shapes
                by measurement on a GPU)
  7 twosum      one row a block, persistent: two plain all-reduces of two sums (then the centred
                ones from registers), gamma in registers, dgamma/dbeta partials in shared memory,
                the next row's x and dy loaded before this row's reductions
  8 packed      float16 by bytes: rung 7 with 16 halves of x and of dy a thread (32 bytes, rung 7's
                float32 share), held packed two a register, gamma and the next row's x and dy too
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, ClassVar

import numpy as np
from numba import cuda, float32, int32, uint32

from ... import backend
from ..base import Traffic
from ..base import TOLERANCES, Launch, OracleVariant, UnsupportedProblem, Variant, registry_check
from . import _common as C
from ._packed import CHUNK, WORDS, cvt_halves, load_chunk, pack2, store_chunk
from ._vec import vec_load, vec_store
from ._common import ONE, ZERO, group_sum, shfl_xor, tree_sum

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Welford", "MultiRow", "Tuned",
           "TwoSum", "Packed", "search", "EXAMPLE_PROBLEM"]


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
    dx; the two-stage column reduction (``col_pass``) reads x and dy once more and its partials."""
    e = p.elem_bytes
    it = np.dtype(p.dtype).itemsize
    par = 3 * p.cols * it
    x_dram = C.sweep_dram(p.rows, p.cols, p.dtype, row_sweeps)
    dy_dram = C.sweep_dram(p.rows, p.cols, p.dtype, 2)
    dram = x_dram + dy_dram + e + par + (_col_bytes(p) if col_pass else 0.0)
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
        return Traffic(flops=problem.flops, dram_bytes=7 * e, l2_bytes=7 * e, limiter="dram",
                       notes="torch's backward kernels as Nsight Compute saw them on the H100 (4096x4096 fp32): "
                             "the dx kernel reads x and dy twice (4 units) and writes dx, the dgamma/dbeta "
                             "kernel reads x and dy again")


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
        s = ZERO  # the plain mean, then corrected by the sum about it (rung 1 of layernorm: why)
        for j in range(cols):
            s += float32(x[r, j])
        m = s / float32(cols)
        if math.isfinite(m):
            s = ZERO
            for j in range(cols):
                s += float32(x[r, j]) - m
            m = m + s / float32(cols)
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


COL_TILE = 32   # columns per block of the column reduction (one warp's worth: 128 coalesced bytes)
#: row lanes per block: 256 threads on a GPU.  The simulator runs the same kernels with 1 lane
#: (32-thread blocks): it runs every thread as a Python thread and every barrier costs thread
#: switches; 256 threads per 32 columns made the backward ladder's tests several times slower.
#: (So the cross-lane merge in shared memory runs only on a GPU: the GPU test run checks it.)
COL_LANES = 1 if backend.is_simulator() else 8  # the kernels' constant; plans ask _col_lanes()


def _for_simulator() -> bool:
    """Whether the plan being made is for the simulator's kernels (1 lane, 32 tile blocks)
    rather than a GPU's: a simulator process plans for the simulator, except inside
    :func:`perfkit.backend.planning_for` (the model's estimate of a target GPU), where the plan
    must be the one a GPU runs, matching the SASS the anatomy compiles (with the GPU's
    ``COL_LANES``)."""
    return bool(getattr(backend.device(), "simulated", False))


def _col_lanes() -> int:
    return 1 if _for_simulator() else 8


def _col_block() -> int:
    """Threads of a column-reduction block: COL_TILE columns x the planned device's lanes."""
    return COL_TILE * _col_lanes()


def _tile_blocks(cols: int) -> int:
    """Column tiles in flight along grid.x (blocks loop over the rest): every tile on a GPU; 32
    in the simulator, where each block is Python threads (a 65537-wide row made 2049 blocks)."""
    cap = 32 if _for_simulator() else 2**31 - 1
    return max(1, min(-(-cols // COL_TILE), cap))


@cuda.jit
def lnb_col_partials(x, dy, mean, rstd, pg, pb, rows, cols, chunk):
    """Stage 1 of dgamma/dbeta: block (tile, k) sums dy * xhat and dy over rows
    [k * chunk, (k + 1) * chunk) for 32 columns (looping over tiles when grid.x has fewer);
    its 8 warps take every 8th row (each warp reads 32 neighbouring columns of a row:
    coalesced) and meet in shared memory; one partial per column and chunk goes to pg[k, j],
    pb[k, j]."""
    sh = cuda.shared.array((2, COL_LANES, COL_TILE), float32)
    t = cuda.threadIdx.x
    tx = t % COL_TILE
    ty = t // COL_TILE
    k = cuda.blockIdx.y
    lo = k * chunk
    hi = min(rows, lo + chunk)
    for tile in range(cuda.blockIdx.x, (cols + COL_TILE - 1) // COL_TILE, cuda.gridDim.x):
        j = tile * COL_TILE + tx
        a = ZERO
        b = ZERO
        if j < cols:
            for r in range(lo + ty, hi, COL_LANES):
                d = float32(dy[r, j])
                a += d * (float32(x[r, j]) - mean[r]) * rstd[r]
                b += d
        sh[0, ty, tx] = a
        sh[1, ty, tx] = b
        cuda.syncthreads()
        if ty == 0 and j < cols:
            for u in range(1, COL_LANES):
                a += sh[0, u, tx]
                b += sh[1, u, tx]
            pg[k, j] = a
            pb[k, j] = b
        cuda.syncthreads()  # sh is reused by the next tile


@cuda.jit
def lnb_sum_partials(sg, sb, pg, pb, nslots, cols, chunk):
    """Stage 1 for rung 5: the same tiling over its (nslots, cols) per-slot partials."""
    sh = cuda.shared.array((2, COL_LANES, COL_TILE), float32)
    t = cuda.threadIdx.x
    tx = t % COL_TILE
    ty = t // COL_TILE
    k = cuda.blockIdx.y
    lo = k * chunk
    hi = min(nslots, lo + chunk)
    for tile in range(cuda.blockIdx.x, (cols + COL_TILE - 1) // COL_TILE, cuda.gridDim.x):
        j = tile * COL_TILE + tx
        a = ZERO
        b = ZERO
        if j < cols:
            for r in range(lo + ty, hi, COL_LANES):
                a += sg[r, j]
                b += sb[r, j]
        sh[0, ty, tx] = a
        sh[1, ty, tx] = b
        cuda.syncthreads()
        if ty == 0 and j < cols:
            for u in range(1, COL_LANES):
                a += sh[0, u, tx]
                b += sh[1, u, tx]
            pg[k, j] = a
            pb[k, j] = b
        cuda.syncthreads()  # sh is reused by the next tile


@cuda.jit
def lnb_sum_partials_ticket(sg, sb, pg, pb, count, dgamma, dbeta, nslots, cols, chunk):
    """Stage 1 of rung 7's column sums with stage 2 folded in: as :func:`lnb_sum_partials`, then
    each block fences its partials and takes a ticket of its column tile (an atomic counter);
    the tile's last block (of the gridDim.y row chunks) adds the chunks' partials and writes
    dgamma, dbeta, and resets the counter: one launch fewer (perfkit's launch cost, ~55 us a
    launch on the H100 machine of the records, is what narrow problems wait on)."""
    sh = cuda.shared.array((2, COL_LANES, COL_TILE), float32)
    last = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    tx = t % COL_TILE
    ty = t // COL_TILE
    k = cuda.blockIdx.y
    nparts = cuda.gridDim.y
    lo = k * chunk
    hi = min(nslots, lo + chunk)
    for tile in range(cuda.blockIdx.x, (cols + COL_TILE - 1) // COL_TILE, cuda.gridDim.x):
        j = tile * COL_TILE + tx
        a = ZERO
        b = ZERO
        if j < cols:
            for r in range(lo + ty, hi, COL_LANES):
                a += sg[r, j]
                b += sb[r, j]
        sh[0, ty, tx] = a
        sh[1, ty, tx] = b
        cuda.syncthreads()
        if ty == 0 and j < cols:
            for u in range(1, COL_LANES):
                a += sh[0, u, tx]
                b += sh[1, u, tx]
            pg[k, j] = a
            pb[k, j] = b
            cuda.threadfence()  # the partials reach L2 before the ticket says so
        cuda.syncthreads()
        if t == 0:
            last[0] = cuda.atomic.add(count, tile, 1) == nparts - 1
        cuda.syncthreads()
        if last[0]:  # the tile's last block: every chunk's partials are in L2
            cuda.threadfence()
            if ty == 0 and j < cols:
                a = ZERO
                b = ZERO
                for kk in range(nparts):
                    a += pg[kk, j]
                    b += pb[kk, j]
                dgamma[j] = a
                dbeta[j] = b
            if t == 0:
                count[tile] = 0  # ready for the next launch
        cuda.syncthreads()  # sh and last are reused by the next tile


@cuda.jit
def lnb_col_finish(pg, pb, dgamma, dbeta, nparts, cols):
    """Stage 2: one thread per column adds its few partials (consecutive threads, consecutive
    columns: coalesced) and writes dgamma, dbeta in the output dtype."""
    j = cuda.grid(1)
    if j < cols:
        a = ZERO
        b = ZERO
        for k in range(nparts):
            a += pg[k, j]
            b += pb[k, j]
        dgamma[j] = a
        dbeta[j] = b


def _sms() -> int:
    return C.sm_count()


def col_split(nrows: int, cols: int) -> tuple[int, int]:
    """(parts, chunk): enough row chunks that tiles x parts fill every SM about 8 blocks deep,
    at most 64 partials per column and at least 64 rows per chunk (8 per warp)."""
    tiles = -(-cols // COL_TILE)
    parts = max(1, min(64, -(-_sms() * 8 // tiles), nrows // 64))
    chunk = -(-nrows // parts)
    return -(-nrows // chunk), chunk


def _stats_ws(problem) -> dict:
    parts, _ = col_split(problem.rows, problem.cols)
    pc = ((parts, problem.cols), "float32")
    return {"mean": ((problem.rows,), "float32"), "rstd": ((problem.rows,), "float32"),
            "col_dgamma": pc, "col_dbeta": pc}


def _col_launches(problem, bufs) -> list:
    parts, chunk = col_split(problem.rows, problem.cols)
    c = problem.cols
    return [Launch(lnb_col_partials, (_tile_blocks(c), parts), _col_block(),
                   (bufs["x"], bufs["dy"], bufs["mean"], bufs["rstd"], bufs["col_dgamma"], bufs["col_dbeta"],
                    problem.rows, c, chunk)),
            Launch(lnb_col_finish, -(-c // 128), 128,
                   (bufs["col_dgamma"], bufs["col_dbeta"], bufs["dgamma"], bufs["dbeta"], parts, c))]


def _col_bytes(problem) -> float:
    """DRAM bytes of the two-stage column reduction: x and dy once more, the partials out and in."""
    parts, _ = col_split(problem.rows, problem.cols)
    return 2 * problem.elem_bytes + 2 * 2 * 4.0 * parts * problem.cols + 8.0 * problem.rows


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
                *_col_launches(problem, bufs)]

    def traffic(self, problem):
        e = problem.elem_bytes
        cb = _col_bytes(problem) - 2 * e
        return Traffic(flops=problem.flops, dram_bytes=5 * e + 3 * e + e + cb,
                       l2_bytes=8 * e + C.scattered_store_l2(e, problem.dtype) + cb, limiter="dram",
                       notes="x read 5 times, dy 3 times, dx written once; row-per-thread is uncoalesced "
                             "(every dx element its own 32-byte sector write in L2); dgamma/dbeta by a "
                             "two-stage column reduction")


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
        "One block per row does all the row work in one kernel (four sweeps: mean, variance, the "
        "two means, dx), and dgamma/dbeta come from a two-stage column reduction: blocks of 32 "
        "columns by a chunk of rows write partial sums that a small kernel adds.")

    def supports(self, problem):
        _check_block(self.block)

    def workspace(self, problem):
        return _stats_ws(problem)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_fused_kernel(self.block), problem.rows, self.block,
                       (bufs["x"], bufs["dy"], bufs["gamma"], bufs["dx"], bufs["mean"], bufs["rstd"],
                        C.eps32(problem), problem.cols)),
                *_col_launches(problem, bufs)]

    def traffic(self, problem):
        return _traffic(problem, 4, True, "row kernel: 4 sweeps (3 from cache); the two-stage column reduction re-reads x, dy",
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
        "each instead of log2(block)); dgamma/dbeta by the two-stage column reduction of rung 2."
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
                *_col_launches(problem, bufs)]

    def traffic(self, problem):
        return _traffic(problem, 4, True, "row kernel: 4 sweeps (3 from cache), shuffles; the column "
                                          "reduction re-reads x, dy", smem=problem.rows * 256.0 * 4)


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
                *_col_launches(problem, bufs)]

    def traffic(self, problem):
        return _traffic(problem, 2, True, "row kernel: 2 sweeps (stats, dx); the column reduction re-reads x, dy",
                        smem=problem.rows * 640.0 * 4)


# --- rung 5 -------------------------------------------------------------------------------
#: arrays a rung-5 thread keeps per cached column: x, dy, and its dgamma and dbeta partials
BWD_ARRAYS = 4


@lru_cache(maxsize=None)
def _rows_kernel(G: int, R: int, V: int, W: int, NC: int, TAIL: bool = True):
    """Persistent: slot = one group of G threads, looping over rows slot, slot + nslots, ...
    Its lane's columns are the same in every row, so its dgamma / dbeta partials for the NC
    cached chunks (chunk c at column W * (lane + c * G)) live in registers across rows and are
    written once at the end; x and dy of a row stay in registers from the statistics to dx (read
    from DRAM once).  Columns past the cache (very wide rows) are read again and their partials
    updated in the slot's row of pg / pb (slot-private: no race)."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W
    VW = V * W

    @C.jit_cached(G * R, 4 * CW if TAIL else 2 * CW)  # the tail code needs more (it spilled 1 KB at 64)
    def lnb_rows(x, dy, gamma, dx, pg, pb, eps, rows, cols):
        scr = cuda.shared.array((5, 32), float32)
        xc = cuda.local.array(CW, float32)
        dc = cuda.local.array(CW, float32)
        ag = cuda.local.array(CW, float32)
        ab = cuda.local.array(CW, float32)
        xb = cuda.local.array(VW, float32)
        db = cuda.local.array(VW, float32)
        par = cuda.local.array(VW, float32)
        t = cuda.threadIdx.x
        lane = t % G
        slot = cuda.blockIdx.x * R + t // G
        nslots = cuda.gridDim.x * R
        kept = W * G * NC
        for i in range(CW):
            ag[i] = ZERO
            ab[i] = ZERO
        for j in range(kept + lane, cols, G):  # partials of the uncached columns start at zero
            pg[slot, j] = ZERO
            pb[slot, j] = ZERO
        trips = (rows + nslots - 1) // nslots  # same trip count for every group (barriers inside)
        for it in range(trips):
            row = slot + it * nslots
            n_ = cols if row < rows else 0
            r = min(row, rows - 1)
            for c in range(NC):  # x and dy of the cached chunks, all in flight
                j = W * (lane + c * G)
                if j < n_:
                    ld(x, r, j, xc, c * W)
                    ld(dy, r, j, dc, c * W)
                else:
                    for q in range(W):
                        xc[c * W + q] = ZERO
                        dc[c * W + q] = ZERO
            k = ZERO
            sx = ZERO
            sg = ZERO
            for c in range(NC):
                j = W * (lane + c * G)
                if j < n_:
                    ld(gamma, 0, j, par, 0)
                    k += float32(W)
                    for q in range(W):
                        sx += xc[c * W + q]
                        sg += dc[c * W + q] * par[q]
            n = k
            mx = sx / k if k > ZERO else ZERO
            mg = sg / k if k > ZERO else ZERO
            m2 = ZERO
            cc = ZERO
            for c in range(NC):
                j = W * (lane + c * G)
                if j < n_:
                    ld(gamma, 0, j, par, 0)
                    for q in range(W):
                        d = xc[c * W + q] - mx
                        m2 += d * d
                        cc += d * (dc[c * W + q] * par[q] - mg)
            if TAIL:  # compiled only for rows wider than the register cache
                for base in range(kept + W * lane, n_, G * VW):  # rows wider than the cache
                    kt = ZERO
                    tx = ZERO
                    tg = ZERO
                    for v in range(V):
                        j = base + v * G * W
                        if j < n_:
                            ld(x, r, j, xb, v * W)
                            ld(dy, r, j, db, v * W)
                            ld(gamma, 0, j, par, v * W)
                            kt += float32(W)
                            for q in range(W):
                                tx += xb[v * W + q]
                                tg += db[v * W + q] * par[v * W + q]
                    tmx = tx / kt
                    tmg = tg / kt
                    tq = ZERO
                    tc = ZERO
                    for v in range(V):
                        if base + v * G * W < n_:
                            for q in range(W):
                                d = xb[v * W + q] - tmx
                                tq += d * d
                                tc += d * (db[v * W + q] * par[v * W + q] - tmg)
                    n, mx, m2, mg, cc = comoment_merge(n, mx, m2, mg, cc, kt, tmx, tq, tmg, tc)
            n, mx, m2, mg, cc = group_comoment(n, mx, m2, mg, cc, G, scr)
            q = ONE / math.sqrt(m2 / n + eps) if n_ > 0 else ZERO
            b = cc / n * q if n_ > 0 else ZERO
            for c in range(NC):  # dx and the partials, from registers
                j = W * (lane + c * G)
                if j < n_:
                    ld(gamma, 0, j, par, 0)
                    for e in range(W):
                        i = c * W + e
                        xh = (xc[i] - mx) * q
                        ag[i] += dc[i] * xh
                        ab[i] += dc[i]
                        xc[i] = q * (dc[i] * par[e] - mg - xh * b)
                    st(dx, r, j, xc, c * W)
            if TAIL:  # compiled only for rows wider than the register cache
                for base in range(kept + W * lane, n_, G * VW):  # the uncached columns, read again
                    for v in range(V):
                        j = base + v * G * W
                        if j < n_:
                            ld(x, r, j, xb, v * W)
                            ld(dy, r, j, db, v * W)
                    for v in range(V):
                        j = base + v * G * W
                        if j < n_:
                            ld(gamma, 0, j, par, v * W)
                            for e in range(W):
                                i = v * W + e
                                xh = (xb[i] - mx) * q
                                pg[slot, j + e] += db[i] * xh  # this lane always owns column j: no race
                                pb[slot, j + e] += db[i]
                                xb[i] = q * (db[i] * par[i] - mg - xh * b)
                            st(dx, r, j, xb, v * W)
        for c in range(NC):  # the cached columns' partials, written once
            j = W * (lane + c * G)
            if j < cols:
                for e in range(W):
                    pg[slot, j + e] = ag[c * W + e]
                    pb[slot, j + e] = ab[c * W + e]

    return lnb_rows


def _persistent_blocks(problem, R: int, blocks_per_sm: int = 2) -> int:
    return max(1, min(_sms() * blocks_per_sm, -(-problem.rows // R)))


@dataclass(frozen=True)
class MultiRow(C.MultiRowShape, Variant):
    threads_per_row: int = 512  # x 8 floats of x (and of dy, dgamma, dbeta) in registers: 4096 columns
    rows_per_block: int = 1
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "multirow"
    what: ClassVar[str] = (
        "A persistent grid of groups of threads_per_row threads, each looping over rows with the "
        "row's x and dy loaded once into registers (vector loads) for the statistics and dx. A "
        "lane owns the same columns in every row, so its dgamma/dbeta partials stay in registers "
        "and are written once.")

    def kernel_params(self, problem) -> tuple[int, int, int, int, int]:
        s = self.shape(problem)
        W = C.vec_width(problem.cols, problem.dtype)
        return s.G, s.R, s.V, W, C.cached_chunks(problem.cols, s.G, W, s.block, BWD_ARRAYS)

    def slots(self, problem) -> int:
        s = self.shape(problem)
        return _persistent_blocks(problem, s.R) * s.R

    def workspace(self, problem):
        n = self.slots(problem)
        parts, _ = col_split(n, problem.cols)
        return {"part_dgamma": ((n, problem.cols), "float32"), "part_dbeta": ((n, problem.cols), "float32"),
                "col_dgamma": ((parts, problem.cols), "float32"), "col_dbeta": ((parts, problem.cols), "float32")}

    def plan(self, problem, bufs):
        self.supports(problem)
        G, R, V, W, NC = self.kernel_params(problem)
        grid = _persistent_blocks(problem, R)
        nslots = grid * R
        parts, chunk = col_split(nslots, problem.cols)
        c = problem.cols
        return [Launch(_rows_kernel(G, R, V, W, NC, C.cached_cols(problem.cols, G, W, NC) < problem.cols), grid, G * R,
                       (bufs["x"], bufs["dy"], C.view(bufs["gamma"], (1, c)), bufs["dx"], bufs["part_dgamma"],
                        bufs["part_dbeta"], C.eps32(problem), problem.rows, c)),
                Launch(lnb_sum_partials, (_tile_blocks(c), parts), _col_block(),
                       (bufs["part_dgamma"], bufs["part_dbeta"], bufs["col_dgamma"], bufs["col_dbeta"], nslots, c,
                        chunk)),
                Launch(lnb_col_finish, -(-c // 128), 128,
                       (bufs["col_dgamma"], bufs["col_dbeta"], bufs["dgamma"], bufs["dbeta"], parts, c))]

    def traffic(self, problem):
        G, R, V, W, NC = self.kernel_params(problem)
        kept = C.cached_cols(problem.cols, G, W, NC)
        unc = problem.cols - kept
        it = np.dtype(problem.dtype).itemsize
        e = problem.elem_bytes
        nsl = self.slots(problem)
        parts, _ = col_split(nsl, problem.cols)
        part = nsl * problem.cols * 4.0 * 2  # written by the row kernel, read by stage 1
        small = parts * problem.cols * 4.0 * 2 * 2
        tail = 2 * C.tail_dram(problem.rows, problem.cols, problem.dtype, unc, R, G * R)
        rmw = float(problem.rows) * unc * 4.0 * 2 * 2  # uncached columns' partials, per row (L2)
        par = 3 * problem.cols * it
        dram = 3 * e + par + 2 * part + small + tail
        note = (f"x and dy read once ({kept} of {problem.cols} columns per row in registers), dx written once; "
                f"dgamma/dbeta partials of {nsl} slots ({part / 2**20:.1f} MiB) written once and summed in two "
                f"stages")
        if unc:
            note += "; the uncached columns are read twice and their partials updated in L2 per row"
        return Traffic(flops=problem.flops, dram_bytes=dram, l2_bytes=dram + rmw + float(problem.rows) * unc * it * 2,
                       limiter="dram", notes=note)


# --- rung 6 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tuned(MultiRow):
    # 0 = the rule of _common.tuned_shape (4 cached arrays); search(problem, time_fn=...) on a
    # GPU ranks shapes by measurement, and its winner's fields can be passed instead.
    threads_per_row: int = 0
    rows_per_block: int = 0
    vec: int = 4

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "tuned"
    what: ClassVar[str] = (
        "Rung 5 at a launch shape chosen like the forward rows': enough threads per row that a "
        "thread's share fits its registers (8 elements of each of x, dy and the two partials), so "
        "threads_per_row = cols / 8 rounded up to a power of two (32 to 512).")

    def shape(self, problem) -> C.Shape:
        st = C.tuned_shape(problem.cols, problem.dtype, BWD_ARRAYS)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R, self.vec)


def search(problem: Problem, time_fn: Callable[[Variant], float] | None = None,
           candidates: list[C.Shape] | None = None) -> list[tuple[Variant, float | None]]:
    """Rank launch shapes of the tuned rung (timed by ``time_fn`` on a GPU, else by closeness to its rule)."""
    return C.search(lambda s: Tuned(threads_per_row=s.G, rows_per_block=s.R, vec=s.V), problem.cols,
                    time_fn, candidates, pick=Tuned().shape(problem))


# --- rung 7 -------------------------------------------------------------------------------
#: elements of its row a thread of rung 7 holds (of x and of dy, and of gamma, as float32): the
#: next row's x and dy fit beside them (5 x 8 registers) at 512 threads a row (4096 columns)
TWOSUM_ELEMS = 8
#: the most shared memory a block's dgamma/dbeta partials may take (two floats a column); past
#: it (rows wider than 5120 columns) they live in the block's row of the global workspace
TWOSUM_SMEM_BYTES = 40 * 1024
#: threads an SM of rung 7 (its registers capped at 64 so that they fit)
TWOSUM_THREADS_PER_SM = 1024


@lru_cache(maxsize=None)
def _twosum_kernel(G: int, W: int, NC: int, PF: bool, SMEM: bool):  # noqa: C901
    """One row per block of G threads, a persistent grid (blocks loop over rows).  Lane ``lane``
    holds the chunks at columns W * (lane + c * G), c < NC, of x, dy and gamma (gamma loaded
    once).  Per row: two plain sums (x, dy * gamma) in one all-reduce, then the centred sums
    ((x - mean)^2, (x - mean) * g) from the registers in a second; dx from registers.  The
    dgamma/dbeta partials of the lane's columns accumulate in shared memory (SMEM; lane-major,
    so a warp's accesses hit 32 banks) or, for wide rows, in the block's row of pg/pb (only
    this lane touches those columns: no race); PF: the next row's x and dy are loaded before
    this row's reductions, so their latency hides behind the row's work.  Gamma stays in
    registers with PF (up to TWOSUM_ELEMS a thread); wider rows read it per chunk (L1).  The
    registers are capped at 64 (1024 threads an SM), which these fit without spills at 8
    elements a thread."""
    ld = vec_load(W)
    st = vec_store(W)
    CW = NC * W
    SC = G * CW if SMEM else 1
    PW = CW if PF else 1
    GW = CW if PF else W  # gamma: the whole share in registers, or one chunk at a time

    @C.jit_block(TWOSUM_THREADS_PER_SM)
    def lnb_twosum(x, dy, gamma, dx, pg, pb, eps, rows, cols):
        scr = cuda.shared.array((2, 32), float32)
        acc = cuda.shared.array((2, SC), float32)
        xc = cuda.local.array(CW, float32)
        dc = cuda.local.array(CW, float32)
        gm = cuda.local.array(GW, float32)
        xn = cuda.local.array(PW, float32)
        dn = cuda.local.array(PW, float32)
        lane = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        nf = float32(cols)
        for i in range(CW):
            xc[i] = ZERO  # columns past the row stay zero: the plain sums need no mask
            dc[i] = ZERO
        for i in range(GW):
            gm[i] = ZERO
        for i in range(PW):
            xn[i] = ZERO
            dn[i] = ZERO
        for c in range(NC):
            j = W * (lane + c * G)
            if j < cols:
                if PF:
                    ld(gamma, 0, j, gm, c * W)
                if PF and blk < rows:  # the first row
                    ld(x, blk, j, xc, c * W)
                    ld(dy, blk, j, dc, c * W)
                for e in range(W):
                    if SMEM:
                        acc[0, (c * W + e) * G + lane] = ZERO
                        acc[1, (c * W + e) * G + lane] = ZERO
                    else:
                        pg[blk, j + e] = ZERO
                        pb[blk, j + e] = ZERO
        for r in range(blk, rows, cuda.gridDim.x):
            if PF:  # the next row's loads go out now
                rn = r + cuda.gridDim.x
                if rn < rows:
                    for c in range(NC):
                        j = W * (lane + c * G)
                        if j < cols:
                            ld(x, rn, j, xn, c * W)
                            ld(dy, rn, j, dn, c * W)
            else:
                for c in range(NC):
                    j = W * (lane + c * G)
                    if j < cols:
                        ld(x, r, j, xc, c * W)
                        ld(dy, r, j, dc, c * W)
            sx = ZERO
            sg = ZERO
            for c in range(NC):
                if not PF and W * (lane + c * G) < cols:
                    ld(gamma, 0, W * (lane + c * G), gm, 0)
                for e in range(W):
                    i = c * W + e
                    sx += xc[i]
                    sg += dc[i] * gm[i if PF else e]
            sx, sg = C.group_sum2(sx, sg, G, scr)
            mx = sx / nf
            mg = sg / nf
            m2 = ZERO
            cc = ZERO
            for c in range(NC):
                if W * (lane + c * G) < cols:
                    if not PF:
                        ld(gamma, 0, W * (lane + c * G), gm, 0)
                    for e in range(W):
                        i = c * W + e
                        d = xc[i] - mx
                        m2 += d * d
                        cc += d * (dc[i] * gm[i if PF else e])  # sum (x - mean) g = n mean(g xhat) / rstd
            m2, cc = C.group_sum2(m2, cc, G, scr)
            q = ONE / math.sqrt(m2 / nf + eps)
            b = cc / nf * q
            for c in range(NC):
                j = W * (lane + c * G)
                if j < cols:
                    if not PF:
                        ld(gamma, 0, j, gm, 0)
                    for e in range(W):
                        i = c * W + e
                        xh = (xc[i] - mx) * q
                        if SMEM:
                            acc[0, i * G + lane] += dc[i] * xh
                            acc[1, i * G + lane] += dc[i]
                        else:
                            pg[blk, j + e] += dc[i] * xh
                            pb[blk, j + e] += dc[i]
                        xc[i] = q * (dc[i] * gm[i if PF else e] - mg - xh * b)
                    st(dx, r, j, xc, c * W)
            if PF:
                for i in range(CW):
                    xc[i] = xn[i]
                    dc[i] = dn[i]
        if SMEM:  # the block's partials, written once
            for c in range(NC):
                j = W * (lane + c * G)
                if j < cols:
                    for e in range(W):
                        pg[blk, j + e] = acc[0, (c * W + e) * G + lane]
                        pb[blk, j + e] = acc[1, (c * W + e) * G + lane]

    return lnb_twosum


@dataclass(frozen=True)
class TwoSum(Variant):
    threads_per_row: int = 0  # 0: the rule (TWOSUM_ELEMS elements a thread)
    smem: int = 1  # 1: partials in shared memory where they fit; 0: always in the global slot row
    blocks_per_sm: int = 0  # 0: as many as the threads and shared memory allow

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "twosum"
    what: ClassVar[str] = (
        "One row per block on a persistent grid, 8 elements of x and dy a thread: the statistics "
        "are two plain all-reduces of two sums each (no division, no Chan merge), and "
        "dgamma/dbeta partials move to shared memory where they fit. Registers hold gamma, loaded "
        "once, and the next row's x and dy instead.")

    def kernel_params(self, problem) -> tuple[int, int, int, bool, bool]:
        W = C.vec_width(problem.cols, problem.dtype)
        G = self.threads_per_row or min(1024, max(32, C.next_pow2(-(-problem.cols // TWOSUM_ELEMS))))
        NC = -(-problem.cols // (G * W))
        CW = NC * W
        smem = bool(self.smem) and 2 * 4 * G * CW <= TWOSUM_SMEM_BYTES
        # the prefetch where it fits the 64 registers: float32 (float16 spilled 84 B at 4096
        # columns: its conversions need registers of their own)
        pf = CW <= TWOSUM_ELEMS and np.dtype(problem.dtype).itemsize == 4
        return G, W, NC, pf, smem

    def supports(self, problem):
        G = self.kernel_params(problem)[0]
        if G < 32 or G > 1024 or G & (G - 1):
            raise UnsupportedProblem(f"twosum: threads_per_row={G} must be a power of two in 32..1024")

    def threads_per_sm(self, problem) -> int:
        """Threads an SM runs at the kernel's register cap."""
        return TWOSUM_THREADS_PER_SM

    def blocks(self, problem) -> int:
        G, W, NC, PF, smem = self.kernel_params(problem)
        per_sm = self.blocks_per_sm or max(1, self.threads_per_sm(problem) // G)
        if smem:
            per_sm = max(1, min(per_sm, (228 * 1024) // (2 * 4 * G * NC * W + 1024)))
        return max(1, min(problem.rows, _sms() * per_sm))

    def workspace(self, problem):
        n = self.blocks(problem)
        parts, _ = col_split(n, problem.cols)
        return {"part_dgamma": ((n, problem.cols), "float32"), "part_dbeta": ((n, problem.cols), "float32"),
                "col_dgamma": ((parts, problem.cols), "float32"), "col_dbeta": ((parts, problem.cols), "float32"),
                "col_count": ((-(-problem.cols // COL_TILE),), "int32")}

    def zeroed(self, problem):
        return frozenset({"col_count"})

    def row_kernel(self, problem):
        """The kernel of the first launch (one row a block)."""
        return _twosum_kernel(*self.kernel_params(problem))

    def plan(self, problem, bufs):
        self.supports(problem)
        G = self.kernel_params(problem)[0]
        n = self.blocks(problem)
        parts, chunk = col_split(n, problem.cols)
        c = problem.cols
        return [Launch(self.row_kernel(problem), n, G,
                       (bufs["x"], bufs["dy"], C.view(bufs["gamma"], (1, c)), bufs["dx"], bufs["part_dgamma"],
                        bufs["part_dbeta"], C.eps32(problem), problem.rows, c)),
                Launch(lnb_sum_partials_ticket, (_tile_blocks(c), parts), _col_block(),
                       (bufs["part_dgamma"], bufs["part_dbeta"], bufs["col_dgamma"], bufs["col_dbeta"],
                        bufs["col_count"], bufs["dgamma"], bufs["dbeta"], n, c, chunk))]

    def traffic(self, problem):
        G, W, NC, PF, smem = self.kernel_params(problem)
        e = problem.elem_bytes
        it = np.dtype(problem.dtype).itemsize
        n = self.blocks(problem)
        parts, _ = col_split(n, problem.cols)
        part = n * problem.cols * 4.0 * 2  # written by the row kernel, read by stage 1
        small = parts * problem.cols * 4.0 * 2 * 2
        gam = n * problem.cols * it  # gamma, once per block (from L2)
        dram = 3 * e + 3 * problem.cols * it + 2 * part + small
        rmw = 0.0 if smem else float(problem.rows) * problem.cols * 4.0 * 2 * 2  # global partials, per row
        note = (f"x and dy read once, dx written once (the whole row in registers); dgamma/dbeta partials of "
                f"{n} blocks ({part / 2**20:.1f} MiB) written once and summed in two stages; gamma read once a block")
        if not smem:
            note += "; the partials of these wide rows are updated in L2 every row"
        return Traffic(flops=problem.flops, dram_bytes=dram, l2_bytes=dram + gam + rmw, limiter="dram", notes=note)


# --- rung 8 -------------------------------------------------------------------------------
#: bytes of its row's x (and of dy) a thread of rung 8 holds: rung 7's float32 share
#: (TWOSUM_ELEMS floats), here 16 halves in 8 registers
PACKED_BYTES = 4 * TWOSUM_ELEMS
#: chunks of 8 halves a thread may hold: past them (rows wider than 1024 threads x 16 halves)
#: the registers would not hold x, dy, gamma and the next row beside each other
PACKED_MAX_CHUNKS = PACKED_BYTES // (2 * CHUNK)
#: threads an SM of rung 8 where its partials are in shared memory (blocks of <= 256 threads):
#: its registers capped at 80 so that gamma stays in registers beside the accumulators' updates
PACKED_SMEM_THREADS_PER_SM = 768


@lru_cache(maxsize=None)
def _packed_kernel(G: int, NC: int, VEC: bool, SMEM: bool):  # noqa: C901
    """Rung 7's kernel for float16 rows held packed: lane ``lane`` holds the chunks of 8 halves
    at columns 8 * (lane + c * G), c < NC, of x, dy and gamma (gamma loaded once), two halves a
    32-bit register as loaded, and the next row's x and dy beside them (loaded before this row's
    reductions).  Every half is converted to float32 where it is used, in each pass again
    (``cvt_halves``: merged conversions would hold 48 float32 values across the barriers): the
    sums, the statistics, dx and the dgamma/dbeta partials are float32; dx is rounded two halves
    at a time and stored packed.  VEC: rows of whole 16-byte chunks (cols % 8 == 0), one
    16-byte access a chunk; else scalar accesses into the same registers and a mask per element
    in the centred sums (the padding is zero: the plain sums need no mask).  Partials in shared
    memory (SMEM, lane-major) or in the block's row of pg/pb.  Registers capped at 64 (1024 threads an SM), with shared
    partials at 80 (768 threads: at 64 ptxas spilled gamma, 60 bytes, to make room for the
    shared accumulators' updates; 92 with the conversions merged)."""
    load = load_chunk(VEC)
    store = store_chunk(VEC)
    CW = NC * WORDS  # registers an array
    SC = G * NC * CHUNK if SMEM else 1

    @C.jit_block(PACKED_SMEM_THREADS_PER_SM if SMEM else TWOSUM_THREADS_PER_SM)
    def lnb_packed(x, dy, gamma, dx, pg, pb, eps, rows, cols):
        scr = cuda.shared.array((2, 32), float32)
        acc = cuda.shared.array((2, SC), float32)
        xw = cuda.local.array(CW, uint32)
        dw = cuda.local.array(CW, uint32)
        gw = cuda.local.array(CW, uint32)
        xn = cuda.local.array(CW, uint32)
        dn = cuda.local.array(CW, uint32)
        lane = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        nf = float32(cols)
        for c in range(NC):  # gamma and the first row (a grid never has more blocks than rows)
            j = CHUNK * (lane + c * G)
            load(gamma, 0, j, cols, ZERO, gw, c * WORDS)
            load(x, blk, j, cols, ZERO, xw, c * WORDS)
            load(dy, blk, j, cols, ZERO, dw, c * WORDS)
            for e in range(CHUNK):
                if SMEM:
                    acc[0, (c * CHUNK + e) * G + lane] = ZERO
                    acc[1, (c * CHUNK + e) * G + lane] = ZERO
                elif j + e < cols:
                    pg[blk, j + e] = ZERO
                    pb[blk, j + e] = ZERO
        for r in range(blk, rows, cuda.gridDim.x):
            rn = r + cuda.gridDim.x
            if rn < rows:  # the next row's loads go out now
                for c in range(NC):
                    j = CHUNK * (lane + c * G)
                    load(x, rn, j, cols, ZERO, xn, c * WORDS)
                    load(dy, rn, j, cols, ZERO, dn, c * WORDS)
            sx = ZERO
            sg = ZERO
            for i in range(CW):
                a, b = cvt_halves(xw[i])
                da, db = cvt_halves(dw[i])
                ga, gb = cvt_halves(gw[i])
                sx += a + b
                sg += da * ga + db * gb
            sx, sg = C.group_sum2(sx, sg, G, scr)
            mx = sx / nf
            mg = sg / nf
            m2 = ZERO
            cc = ZERO
            for c in range(NC):
                j = CHUNK * (lane + c * G)
                if j < cols:
                    for i in range(WORDS):
                        a, b = cvt_halves(xw[c * WORDS + i])
                        da, db = cvt_halves(dw[c * WORDS + i])
                        ga, gb = cvt_halves(gw[c * WORDS + i])
                        if VEC or j + 2 * i < cols:
                            d = a - mx
                            m2 += d * d
                            cc += d * (da * ga)
                        if VEC or j + 2 * i + 1 < cols:
                            d = b - mx
                            m2 += d * d
                            cc += d * (db * gb)
            m2, cc = C.group_sum2(m2, cc, G, scr)
            q = ONE / math.sqrt(m2 / nf + eps)
            bq = cc / nf * q
            for c in range(NC):  # dx and the partials, from registers
                j = CHUNK * (lane + c * G)
                if j < cols:
                    for i in range(WORDS):
                        a, b = cvt_halves(xw[c * WORDS + i])
                        da, db = cvt_halves(dw[c * WORDS + i])
                        ga, gb = cvt_halves(gw[c * WORDS + i])
                        xa = (a - mx) * q
                        xb = (b - mx) * q
                        e = c * CHUNK + 2 * i
                        if SMEM:  # a padded column adds dy = 0: no mask
                            acc[0, e * G + lane] += da * xa
                            acc[1, e * G + lane] += da
                            acc[0, (e + 1) * G + lane] += db * xb
                            acc[1, (e + 1) * G + lane] += db
                        else:
                            if VEC or j + 2 * i < cols:
                                pg[blk, j + 2 * i] += da * xa
                                pb[blk, j + 2 * i] += da
                            if VEC or j + 2 * i + 1 < cols:
                                pg[blk, j + 2 * i + 1] += db * xb
                                pb[blk, j + 2 * i + 1] += db
                        xw[c * WORDS + i] = pack2(q * (da * ga - mg - xa * bq), q * (db * gb - mg - xb * bq))
                    store(dx, r, j, cols, xw, c * WORDS)
            for i in range(CW):
                xw[i] = xn[i]
                dw[i] = dn[i]
        if SMEM:  # the block's partials, written once
            for c in range(NC):
                j = CHUNK * (lane + c * G)
                for e in range(CHUNK):
                    if j + e < cols:
                        pg[blk, j + e] = acc[0, (c * CHUNK + e) * G + lane]
                        pb[blk, j + e] = acc[1, (c * CHUNK + e) * G + lane]

    return lnb_packed


@dataclass(frozen=True)
class Packed(TwoSum):
    threads_per_row: int = 0  # 0: the rule (PACKED_BYTES of x a thread: 16 halves)
    smem: int = 1
    blocks_per_sm: int = 0

    rung: ClassVar[int] = 8
    name: ClassVar[str] = "packed"
    what: ClassVar[str] = (
        "float16 by bytes: a thread holds 32 bytes of its row (16 halves, threads per row = cols "
        "/ 16) kept packed, two halves a 32-bit register, so x, dy, gamma and the next row fit in "
        "40 registers. Each half becomes float32 where it is used; dx is stored packed with "
        "16-byte stores.")

    def kernel_params(self, problem) -> tuple[int, int, int, bool, bool]:
        """(G, CHUNK, NC, VEC, SMEM): rung 7's tuple with the chunk of 8 halves as its width and
        whether rows are 16-byte aligned in its prefetch's place (the prefetch is always on)."""
        per = PACKED_BYTES // np.dtype(problem.dtype).itemsize
        G = self.threads_per_row or min(1024, max(32, C.next_pow2(-(-problem.cols // per))))
        NC = -(-problem.cols // (G * CHUNK))
        smem = bool(self.smem) and 2 * 4 * G * NC * CHUNK <= TWOSUM_SMEM_BYTES
        return G, CHUNK, NC, problem.cols % CHUNK == 0, smem

    def example(self, problem):
        """The float16 twin of the op's example (the rung takes float16 only)."""
        return problem if problem.dtype == "float16" else dataclasses.replace(problem, dtype="float16")

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(
                f"{self.label}: holds float16 rows packed two halves a register; a {problem.dtype} row "
                f"already has {PACKED_BYTES} bytes of x a thread in flight in rung {TwoSum.rung} twosum: "
                "use it instead")
        G, _, NC, _, _ = self.kernel_params(problem)
        if NC > PACKED_MAX_CHUNKS:
            raise UnsupportedProblem(
                f"{self.label}: registers hold {PACKED_MAX_CHUNKS * CHUNK} halves of a row a thread beside the "
                f"next row's (rows up to {1024 * PACKED_MAX_CHUNKS * CHUNK} columns at 1024 threads), "
                f"{problem.cols} columns need {NC * CHUNK} at {G}: use rung {TwoSum.rung} twosum")
        super().supports(problem)

    def threads_per_sm(self, problem) -> int:
        return PACKED_SMEM_THREADS_PER_SM if self.kernel_params(problem)[4] else TWOSUM_THREADS_PER_SM

    def row_kernel(self, problem):
        G, _, NC, VEC, smem = self.kernel_params(problem)
        return _packed_kernel(G, NC, VEC, smem)

    def traffic(self, problem):
        t = super().traffic(problem)
        VEC = self.kernel_params(problem)[3]
        note = t.notes.replace("gamma read once a block", "gamma read once a block and held packed") + (
            "; 128-bit loads and stores" if VEC else "; 16-bit loads and stores (rows not 16-byte aligned)")
        return dataclasses.replace(t, notes=note)


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), Welford(), MultiRow(), Tuned(), TwoSum(), Packed()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(rows=4096, cols=4096)
GPU_SWEEP = [Problem(4096, c) for c in (128, 512, 1024, 4096, 16384)]
#: float16 at the widths that matter, appended so that the indices above keep their problems
GPU_SWEEP += [Problem(4096, c, "float16") for c in (1024, 4096, 16384)]
SIM_SWEEP = [Problem(3, 37)]
