"""BatchNorm forward in training mode, per channel over N, H, W, layout ``"NCHW"`` or ``"NHWC"``:

    mean_c = mean(x[:, c]),  var_c = mean((x[:, c] - mean_c)^2)       (biased, used to normalize)
    y = (x - mean_c) / sqrt(var_c + eps) * gamma_c + beta_c
    running_mean = (1 - momentum) * running_mean_in + momentum * mean_c
    running_var  = (1 - momentum) * running_var_in  + momentum * var_c * M / (M - 1)   (unbiased)

with M = N*H*W and momentum 0.1, as PyTorch does.  x and y are float32 or float16; gamma, beta and
the running statistics are float32 (as under PyTorch autocast).  The inputs ``running_mean_in``
and ``running_var_in`` are not modified: the updated statistics are the outputs ``running_mean``
and ``running_var``.

Kernels see x as a 3-D view (A, C, B): (N, C, H*W) for NCHW and (N*H*W, C, 1) for NHWC, so one
channel's elements are ``x[a, c, b]``.  In NCHW a channel is N contiguous runs of H*W; in NHWC
its elements are C apart, and a block per channel reads one element per 32-byte sector.

Ledger (one line per rung; numbers and names live only in ``LADDER``):

  0 oracle      torch.nn.functional.batch_norm(training=True) on a GPU (CuPy without torch); NumPy here
  1 naive       one thread per channel, three kernels (mean; variance + running stats; write)
  2 fused       one block per channel, shared-memory tree reductions, three sweeps in one kernel
  3 warp        the same with warp-shuffle reductions
  4 welford     single-pass statistics (Welford, Chan's merge): two sweeps
  5 split       the reduction split over many blocks (channel tiles x slices of N*H*W, coalesced
                in both layouts, V loads in flight), a finalize kernel, and a fully parallel
                grid-stride normalize: all SMs busy even with few channels
  6 ticket      16-byte loads, shifted sums and a shuffle tree in the statistics kernel, its finish
                folded in by a last-block ticket; the normalize walks x backwards (its end is in L2)
  7 nhwc        rung 6 in NHWC with the tile's per-channel sums reduced across row groups through a
                channel-major (bank-conflict-free) shared layout, one barrier a reduction
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32, int32

from ..base import Traffic
from ..base import TOLERANCES, Launch, OracleVariant, Problem, ProblemError, UnsupportedProblem, Variant, registry_check
from . import _common as C
from ._vec import vec_load, vec_store
from ._common import ONE, ZERO, chan_merge, group_sum, group_welford, tree_sum, welford_push

__all__ = ["Problem", "LADDER", "Oracle", "Naive", "Fused", "Warp", "Welford", "Split", "Ticket", "Nhwc",
           "EXAMPLE_PROBLEM"]

Base = Problem
LAYOUTS = ("NCHW", "NHWC")


@dataclass(frozen=True)
class Problem(Base):
    """Training-mode BatchNorm of x (layout NCHW or NHWC) with per-channel gamma, beta."""

    n: int
    c: int
    h: int
    w: int
    dtype: str = "float32"
    layout: str = "NCHW"
    eps: float = 1e-5
    momentum: float = 0.1

    op: ClassVar[str] = "batchnorm"
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float16")

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", C.check_dtype(self.op, self.dtype, self.dtypes))
        super().__post_init__()

    def validate(self) -> None:
        for k in ("n", "c", "h", "w"):
            C.check_count(self.op, k, getattr(self, k))
        if self.layout not in LAYOUTS:
            raise ProblemError(f"batchnorm: unknown layout {self.layout!r}; allowed: {', '.join(LAYOUTS)}")
        C.check_eps(self.op, self.eps)
        try:
            ok = 0.0 <= float(self.momentum) <= 1.0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ProblemError(f"batchnorm: momentum must be a number in [0, 1], got {self.momentum!r}")
        if self.m < 2:
            raise ProblemError("batchnorm: training mode needs more than one value per channel "
                               f"(n*h*w = {self.m}); the unbiased variance of one value is undefined")

    @property
    def m(self) -> int:
        """Values per channel, N*H*W."""
        return self.n * self.h * self.w

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.c, self.h, self.w) if self.layout == "NCHW" else (self.n, self.h, self.w, self.c)

    @property
    def view3(self) -> tuple[int, int, int]:
        """(A, C, B): channel c's elements are x3[a, c, b]."""
        return (self.n, self.c, self.h * self.w) if self.layout == "NCHW" else (self.m, self.c, 1)

    def input_specs(self):
        ch = ((self.c,), "float32")
        return {"x": (self.shape, self.dtype), "gamma": ch, "beta": ch, "running_mean_in": ch,
                "running_var_in": ch}

    def output_specs(self):
        ch = ((self.c,), "float32")
        return {"y": (self.shape, self.dtype), "running_mean": ch, "running_var": ch}

    def _make(self, g):
        c = self.c
        return {"x": (1.0 + 2.0 * g.standard_normal(self.shape)).astype(self.dtype),
                "gamma": (1.0 + 0.1 * g.standard_normal(c)).astype(np.float32),
                "beta": (0.1 * g.standard_normal(c)).astype(np.float32),
                "running_mean_in": (0.1 * g.standard_normal(c)).astype(np.float32),
                "running_var_in": (1.0 + 0.1 * np.abs(g.standard_normal(c))).astype(np.float32)}

    def _axes(self):
        return (0, 2, 3) if self.layout == "NCHW" else (0, 1, 2)

    def _bcast(self, v):
        return v.reshape((1, -1, 1, 1) if self.layout == "NCHW" else (1, 1, 1, -1))

    def _reference(self, inputs):
        x = inputs["x"].astype(np.float64)
        ax = self._axes()
        mean = x.mean(axis=ax)
        var = ((x - self._bcast(mean)) ** 2).mean(axis=ax)
        y = (x - self._bcast(mean)) / np.sqrt(self._bcast(var) + self.eps) \
            * self._bcast(inputs["gamma"].astype(np.float64)) + self._bcast(inputs["beta"].astype(np.float64))
        mo = self.momentum
        rm = (1 - mo) * inputs["running_mean_in"].astype(np.float64) + mo * mean
        rv = (1 - mo) * inputs["running_var_in"].astype(np.float64) + mo * var * self.m / (self.m - 1)
        return {"y": y, "running_mean": rm, "running_var": rv}

    def tolerance(self):
        return C.scaled_tolerance(TOLERANCES[self.dtype], self.m)

    @property
    def flops(self) -> float:
        return 8.0 * self.n * self.c * self.h * self.w

    @property
    def elem_bytes(self) -> float:
        return float(self.n) * self.c * self.h * self.w * np.dtype(self.dtype).itemsize


def _scalars(p: Problem):
    return np.float32(p.eps), np.float32(p.momentum)


def _x3(p, bufs):
    return C.view(bufs["x"], p.view3), C.view(bufs["y"], p.view3)


def _traffic(p: Problem, sweeps: int, note: str, smem: float = 0.0, coalesced: bool = True) -> Traffic:
    e = p.elem_bytes
    ch = p.c * 4.0 * 7
    dram = C.sweep_dram(p.c, p.m, p.dtype, sweeps) + e + ch
    if not coalesced:
        # NHWC, one channel per block: a 32-byte sector holds 32/itemsize neighbouring channels
        # and serves only one of them per request; L2 moves that many times the bytes (DRAM
        # too, whenever the sector is evicted before the neighbouring channels' blocks use it).
        note += ("; NHWC: one useful element per 32-byte sector; about 30% more DRAM bytes as sectors "
                 "are evicted before the neighbouring channels' blocks use them (Nsight Compute on the H100 "
                 "at 32x256x56x56: 1.28x and 1.39x the coalesced bytes)")
        dram *= 1.3
        l2 = (sweeps + 1) * e * 32.0 / np.dtype(p.dtype).itemsize
    else:
        l2 = (sweeps + 1) * e + ch
    return Traffic(flops=p.flops, dram_bytes=dram, l2_bytes=l2, smem_bytes=smem, limiter="dram", notes=note)


# --- rung 0 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = ("torch.nn.functional.batch_norm(training=True) (cuDNN / native kernels, running "
                           "stats updated in place on copies) on a GPU, a CuPy expression without torch; NumPy "
                           "in float32 on the host.")

    def gpu(self, problem, x, out):
        try:
            import torch

            ok = torch.cuda.is_available()
        except Exception:
            ok = False
        if ok:
            xt = torch.from_dlpack(x["x"])
            if problem.layout == "NHWC":  # a channels_last NCHW tensor over the same memory
                xt = xt.permute(0, 3, 1, 2)
            rm = torch.from_dlpack(out["running_mean"])
            rv = torch.from_dlpack(out["running_var"])
            rm.copy_(torch.from_dlpack(x["running_mean_in"]))
            rv.copy_(torch.from_dlpack(x["running_var_in"]))
            y = torch.nn.functional.batch_norm(xt, rm, rv, torch.from_dlpack(x["gamma"]),
                                               torch.from_dlpack(x["beta"]), training=True,
                                               momentum=problem.momentum, eps=problem.eps)
            # y stays in torch's buffer (a view back to NHWC where needed): no copy of ours is timed
            return {"y": y.permute(0, 2, 3, 1) if problem.layout == "NHWC" else y,
                    "running_mean": rm, "running_var": rv}
        import cupy as cp

        res = _host_math(cp, problem, x)
        for k, a in res.items():
            out[k][...] = a.astype(out[k].dtype)

    def host(self, problem, x):
        # float64 on the host: NumPy sums float32 one element after another along strided axes
        # (NHWC, or NCHW's n), which at |mean| / std ~ 20 puts the centred values off by more than
        # the check's float32 tolerance; the library it stands for (cuDNN) keeps those digits
        res = _host_math(np, problem, x, np.float64)
        return {"y": res["y"].astype(problem.dtype), "running_mean": res["running_mean"].astype(np.float32),
                "running_var": res["running_var"].astype(np.float32)}

    def traffic(self, problem):
        e = problem.elem_bytes
        if problem.layout == "NHWC":  # Nsight Compute on the H100: 115 MB read, 82 MB written for 103 MB of x
            return Traffic(flops=problem.flops, dram_bytes=2 * e, l2_bytes=3 * e, limiter="dram",
                           notes="cuDNN's NHWC kernel: x leaves DRAM once (the statistics pass keeps it in L2 "
                                 "or on chip), y written once")
        return Traffic(flops=problem.flops, dram_bytes=3 * e, l2_bytes=3 * e, limiter="dram",
                       notes="library kernels: statistics pass + normalize pass (2 reads of x, 1 write of y)")


def _host_math(xp, p, x, f=None):
    f = f or xp.float32
    xf = x["x"].astype(f)
    ax = p._axes()
    mean = xf.mean(axis=ax)
    var = ((xf - p._bcast(mean)) ** 2).mean(axis=ax)
    y = (xf - p._bcast(mean)) / xp.sqrt(p._bcast(var) + f(p.eps)) * p._bcast(x["gamma"]) + p._bcast(x["beta"])
    mo = f(p.momentum)
    rm = (f(1) - mo) * x["running_mean_in"] + mo * mean
    rv = (f(1) - mo) * x["running_var_in"] + mo * var * f(p.m / (p.m - 1))
    return {"y": y, "running_mean": rm, "running_var": rv}


# --- rung 1 -------------------------------------------------------------------------------
@cuda.jit
def bn_chan_mean(x3, mean, nc):
    c = cuda.grid(1)
    if c < nc:
        A = x3.shape[0]
        B = x3.shape[2]
        s = ZERO
        for a in range(A):
            for b in range(B):
                s += float32(x3[a, c, b])
        mean[c] = s / float32(A * B)


@cuda.jit
def bn_chan_var(x3, mean, invstd, rm_in, rv_in, rm, rv, eps, mom, nc):
    c = cuda.grid(1)
    if c < nc:
        A = x3.shape[0]
        B = x3.shape[2]
        m = mean[c]
        s = ZERO
        for a in range(A):
            for b in range(B):
                d = float32(x3[a, c, b]) - m
                s += d * d
        cnt = float32(A * B)
        var = s / cnt
        invstd[c] = ONE / math.sqrt(var + eps)
        rm[c] = (ONE - mom) * rm_in[c] + mom * m
        rv[c] = (ONE - mom) * rv_in[c] + mom * var * cnt / (cnt - ONE)


@cuda.jit
def bn_chan_write(x3, y3, mean, invstd, gamma, beta, nc):
    c = cuda.grid(1)
    if c < nc:
        A = x3.shape[0]
        B = x3.shape[2]
        m = mean[c]
        k = invstd[c] * gamma[c]
        bb = beta[c]
        for a in range(A):
            for b in range(B):
                y3[a, c, b] = (float32(x3[a, c, b]) - m) * k + bb


@dataclass(frozen=True)
class Naive(Variant):
    block: int = 64

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per channel, one kernel per pass (mean; variance and running statistics; "
        "write), statistics through a global workspace. Only C threads run: a GPU wants tens "
        "of thousands. x is read three times."
    )

    def workspace(self, problem):
        return {"mean": ((problem.c,), "float32"), "invstd": ((problem.c,), "float32")}

    def plan(self, problem, bufs):
        eps, mom = _scalars(problem)
        x3, y3 = _x3(problem, bufs)
        g = -(-problem.c // self.block)
        nc = problem.c
        return [Launch(bn_chan_mean, g, self.block, (x3, bufs["mean"], nc)),
                Launch(bn_chan_var, g, self.block, (x3, bufs["mean"], bufs["invstd"], bufs["running_mean_in"],
                                                    bufs["running_var_in"], bufs["running_mean"],
                                                    bufs["running_var"], eps, mom, nc)),
                Launch(bn_chan_write, g, self.block, (x3, y3, bufs["mean"], bufs["invstd"], bufs["gamma"],
                                                      bufs["beta"], nc))]

    def traffic(self, problem):
        e = problem.elem_bytes
        # one thread per channel: in NCHW neighbouring threads write a channel plane apart
        w = C.scattered_store_l2(e, problem.dtype) if problem.layout == "NCHW" else e
        return Traffic(flops=problem.flops, dram_bytes=4 * e, l1_bytes=4 * e, l2_bytes=3 * e + w, limiter="dram",
                       notes="3 reads + 1 write; only C threads in flight (latency-bound in practice)")


# --- rung 2 -------------------------------------------------------------------------------
def _check_block(block: int) -> None:
    if block < 32 or block > 1024 or block & (block - 1):
        raise UnsupportedProblem(f"block={block} must be a power of two in 32..1024")


@cuda.jit(device=True)
def _adv(a, b, da, db, nb):
    """Advance the position (a, b) of a flat index by (da, db) = divmod(step, nb): no integer
    division per element (a 64-bit division is ~70 instructions, and it made these kernels
    instruction-bound: 18-31% of DRAM bandwidth on the H100)."""
    b += db
    a += da
    if b >= nb:
        b -= nb
        a += 1
    return a, b


@cuda.jit(device=True)
def _finish(c, m, var, cnt, eps, mom, rm_in, rv_in, rm, rv):
    rm[c] = (ONE - mom) * rm_in[c] + mom * m
    rv[c] = (ONE - mom) * rv_in[c] + mom * var * cnt / (cnt - ONE)


@lru_cache(maxsize=None)
def _fused_kernel(B: int):
    @C.jit_block(B)
    def bn_fused(x3, y3, gamma, beta, rm_in, rv_in, rm, rv, eps, mom):
        sh = cuda.shared.array(B, float32)
        c = cuda.blockIdx.x
        t = cuda.threadIdx.x
        nb = x3.shape[2]
        total = x3.shape[0] * nb
        cnt = float32(total)
        s = ZERO
        da = B // nb
        db = B - da * nb
        a0 = t // nb  # the one division: then (a, b) walks with the flat index
        b0 = t - a0 * nb
        a = a0
        b = b0
        for i in range(t, total, B):  # flat index over (a, b): coalesced along b in NCHW
            s += float32(x3[a, c, b])
            a, b = _adv(a, b, da, db, nb)
        m = tree_sum(s, sh, B) / cnt
        s = ZERO
        a = a0
        b = b0
        for i in range(t, total, B):
            d = float32(x3[a, c, b]) - m
            s += d * d
            a, b = _adv(a, b, da, db, nb)
        var = tree_sum(s, sh, B) / cnt
        k = gamma[c] / math.sqrt(var + eps)
        bb = beta[c]
        if t == 0:
            _finish(c, m, var, cnt, eps, mom, rm_in, rv_in, rm, rv)
        a = a0
        b = b0
        for i in range(t, total, B):
            y3[a, c, b] = (float32(x3[a, c, b]) - m) * k + bb
            a, b = _adv(a, b, da, db, nb)

    return bn_fused


def _per_channel_args(problem, bufs):
    eps, mom = _scalars(problem)
    x3, y3 = _x3(problem, bufs)
    return (x3, y3, bufs["gamma"], bufs["beta"], bufs["running_mean_in"], bufs["running_var_in"],
            bufs["running_mean"], bufs["running_var"], eps, mom)


@dataclass(frozen=True)
class Fused(Variant):
    block: int = 256

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "fused"
    what: ClassVar[str] = (
        "One block per channel, one kernel: three sweeps (mean, centred variance, write) with "
        "shared-memory tree reductions. Coalesced in NCHW, where a channel is runs of H*W; in "
        "NHWC a channel's elements are C apart, one element per sector.")

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_fused_kernel(self.block), problem.c, self.block, _per_channel_args(problem, bufs))]

    def traffic(self, problem):
        return _traffic(problem, 3, "3 sweeps per channel (2 from cache when a channel fits)",
                        coalesced=problem.layout == "NCHW")


# --- rung 3 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _warp_kernel(B: int):
    @C.jit_block(B)
    def bn_warp(x3, y3, gamma, beta, rm_in, rv_in, rm, rv, eps, mom):
        scr = cuda.shared.array(32, float32)
        c = cuda.blockIdx.x
        t = cuda.threadIdx.x
        nb = x3.shape[2]
        total = x3.shape[0] * nb
        cnt = float32(total)
        s = ZERO
        da = B // nb
        db = B - da * nb
        a0 = t // nb  # the one division: then (a, b) walks with the flat index
        b0 = t - a0 * nb
        a = a0
        b = b0
        for i in range(t, total, B):
            s += float32(x3[a, c, b])
            a, b = _adv(a, b, da, db, nb)
        m = group_sum(s, B, scr) / cnt
        s = ZERO
        a = a0
        b = b0
        for i in range(t, total, B):
            d = float32(x3[a, c, b]) - m
            s += d * d
            a, b = _adv(a, b, da, db, nb)
        var = group_sum(s, B, scr) / cnt
        k = gamma[c] / math.sqrt(var + eps)
        bb = beta[c]
        if t == 0:
            _finish(c, m, var, cnt, eps, mom, rm_in, rv_in, rm, rv)
        a = a0
        b = b0
        for i in range(t, total, B):
            y3[a, c, b] = (float32(x3[a, c, b]) - m) * k + bb
            a, b = _adv(a, b, da, db, nb)

    return bn_warp


@dataclass(frozen=True)
class Warp(Variant):
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "warp"
    what: ClassVar[str] = "Rung 2 with warp-shuffle reductions: two barriers per reduction, not log2(block)."

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_warp_kernel(self.block), problem.c, self.block, _per_channel_args(problem, bufs))]

    def traffic(self, problem):
        return _traffic(problem, 3, "3 sweeps per channel; shuffle reductions", coalesced=problem.layout == "NCHW")


# --- rung 4 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _welford_kernel(B: int):
    @C.jit_block(B)
    def bn_welford(x3, y3, gamma, beta, rm_in, rv_in, rm, rv, eps, mom):
        scr_n = cuda.shared.array(32, float32)
        scr_m = cuda.shared.array(32, float32)
        scr_q = cuda.shared.array(32, float32)
        c = cuda.blockIdx.x
        t = cuda.threadIdx.x
        nb = x3.shape[2]
        total = x3.shape[0] * nb
        n = ZERO
        m = ZERO
        m2 = ZERO
        da = B // nb
        db = B - da * nb
        a0 = t // nb
        b0 = t - a0 * nb
        a = a0
        b = b0
        for i in range(t, total, B):  # one sweep for mean and M2
            n, m, m2 = welford_push(n, m, m2, float32(x3[a, c, b]))
            a, b = _adv(a, b, da, db, nb)
        n, m, m2 = group_welford(n, m, m2, B, scr_n, scr_m, scr_q)
        var = m2 / n
        k = gamma[c] / math.sqrt(var + eps)
        bb = beta[c]
        if t == 0:
            _finish(c, m, var, n, eps, mom, rm_in, rv_in, rm, rv)
        a = a0
        b = b0
        for i in range(t, total, B):
            y3[a, c, b] = (float32(x3[a, c, b]) - m) * k + bb
            a, b = _adv(a, b, da, db, nb)

    return bn_welford


@dataclass(frozen=True)
class Welford(Variant):
    block: int = 256

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "welford"
    what: ClassVar[str] = (
        "Single-pass statistics: Welford per thread, Chan's merge across lanes and warps; two "
        "sweeps per channel instead of three, with no E[x^2] - E[x]^2 cancellation."
    )

    def supports(self, problem):
        _check_block(self.block)

    def plan(self, problem, bufs):
        self.supports(problem)
        return [Launch(_welford_kernel(self.block), problem.c, self.block, _per_channel_args(problem, bufs))]

    def traffic(self, problem):
        return _traffic(problem, 2, "2 sweeps per channel (stats, write)", coalesced=problem.layout == "NCHW")


# --- rung 5 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _split_stats_kernel(CT: int, RB: int, V: int):
    """Block (CT channels x RB row groups): lane % CT picks the channel, so a warp reads CT
    consecutive channels of the same position in NHWC (coalesced); in NCHW CT == 1 and the
    whole block walks one channel's runs.  Each block reduces one slice of the A*B positions
    and writes a Welford partial to part[:, split, c]."""

    @C.jit_block(CT * RB)
    def bn_split_stats(x3, part, nsplit):
        scr = cuda.shared.array((3, 1024), float32)
        t = cuda.threadIdx.x
        cl = t % CT
        grp = t // CT
        c = cuda.blockIdx.x * CT + cl
        nc = x3.shape[1]
        nb = x3.shape[2]
        total = x3.shape[0] * nb
        sp = cuda.blockIdx.y
        per = (total + nsplit - 1) // nsplit
        lo = sp * per
        hi = min(total, lo + per)
        if c >= nc:
            hi = lo  # a channel tile past the end: reduce nothing
        n = ZERO
        m = ZERO
        m2 = ZERO
        buf = cuda.local.array(V, float32)
        da = RB // nb
        db = RB - da * nb
        a = (lo + grp) // nb  # the one division: (a, b) then walks with the flat index
        b = lo + grp - a * nb
        for base in range(lo + grp, hi, RB * V):
            k = ZERO
            s = ZERO
            for v in range(V):  # V loads in flight
                i = base + v * RB
                if i < hi:
                    buf[v] = float32(x3[a, c, b])
                    k += ONE
                    s += buf[v]
                a, b = _adv(a, b, da, db, nb)  # after V steps: the next trip's base
            cm = s / k
            cq = ZERO
            for v in range(V):
                if base + v * RB < hi:
                    d = buf[v] - cm
                    cq += d * d
            n, m, m2 = chan_merge(n, m, m2, k, cm, cq)
        scr[0, t] = n
        scr[1, t] = m
        scr[2, t] = m2
        cuda.syncthreads()
        if grp == 0 and c < nc:
            for g in range(1, RB):
                u = g * CT + cl
                n, m, m2 = chan_merge(n, m, m2, scr[0, u], scr[1, u], scr[2, u])
            part[0, sp, c] = n
            part[1, sp, c] = m
            part[2, sp, c] = m2

    return bn_split_stats


@cuda.jit
def bn_split_finish(part, nsplit, mean, scale, gamma, rm_in, rv_in, rm, rv, eps, mom, nc):
    """One thread per channel merges its nsplit partials (Chan), then folds gamma into a
    per-channel scale = gamma * rstd for the normalize kernel and updates the running statistics."""
    c = cuda.grid(1)
    if c < nc:
        n = ZERO
        m = ZERO
        m2 = ZERO
        for s in range(nsplit):
            n, m, m2 = chan_merge(n, m, m2, part[0, s, c], part[1, s, c], part[2, s, c])
        var = m2 / n
        k = gamma[c] / math.sqrt(var + eps)
        mean[c] = m
        scale[c] = k
        rm[c] = (ONE - mom) * rm_in[c] + mom * m
        rv[c] = (ONE - mom) * rv_in[c] + mom * var * n / (n - ONE)


NORM_VEC = 2  # vector loads in flight per thread in the normalize kernel


@lru_cache(maxsize=None)
def _normalize_kernel(W: int, V: int):
    """y = (x - mean[c]) * scale[c] + beta[c] over x seen as 2-D (P, L): NCHW as (N*C planes,
    H*W), the channel fixed per plane (one modulo per plane, none per element); NHWC as (N*H*W,
    C), the channel = the column.  blockIdx.y strides over planes, threads along the contiguous
    row with V vector loads of W elements (16 bytes where L allows) in flight before any store:
    coalesced, and no 64-bit division per element (the old flat-index kernel spent two per
    element, one 4-byte load at a time, and ran at 31% of DRAM bandwidth).  (Not x * scale +
    shift with shift = beta - mean * scale: when |mean * scale| >> |y|, as in a near-constant
    channel where scale ~ 1/sqrt(eps), the float32 rounding of that shift swamps y.)"""
    ld = vec_load(W)
    st = vec_store(W)
    VW = V * W

    @cuda.jit
    def bn_normalize(x2, y2, mean, scale, beta, nc, chan_in_row):
        buf = cuda.local.array(VW, float32)
        P = x2.shape[0]
        L = x2.shape[1]
        l0 = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) * W
        lstep = cuda.gridDim.x * cuda.blockDim.x * W
        for p in range(cuda.blockIdx.y, P, cuda.gridDim.y):
            cp = p % nc
            for base in range(l0, L, lstep * V):
                for v in range(V):
                    l = base + v * lstep
                    if l < L:
                        ld(x2, p, l, buf, v * W)
                for v in range(V):
                    l = base + v * lstep
                    if l < L:
                        for q in range(W):
                            c = l + q if chan_in_row else cp
                            buf[v * W + q] = (buf[v * W + q] - mean[c]) * scale[c] + beta[c]
                        st(y2, p, l, buf, v * W)

    return bn_normalize


def _norm_view(problem) -> tuple[tuple[int, int], int]:
    """(shape of the 2-D view, chan_in_row) for the normalize kernel."""
    if problem.layout == "NCHW":
        return (problem.n * problem.c, problem.h * problem.w), 0
    return (problem.m, problem.c), 1


def _norm_launch(problem, bufs) -> Launch:
    shape2, in_row = _norm_view(problem)
    P, L = shape2
    W = C.vec_width(L, problem.dtype)
    per_thread = W * NORM_VEC
    threads = min(256, max(32, C.next_pow2(-(-L // per_thread))))
    gx = max(1, min(-(-L // (threads * per_thread)), 64))
    gy = max(1, min(P, 65535, -(-_sms() * 2048 // (threads * gx))))  # about a full GPU of threads
    return Launch(_normalize_kernel(W, NORM_VEC), (gx, gy), threads,
                  (C.view(bufs["x"], shape2), C.view(bufs["y"], shape2), bufs["mean"], bufs["scale"], bufs["beta"],
                   problem.c, in_row))


def _sms() -> int:
    return C.sm_count()


@dataclass(frozen=True)
class Split(Variant):
    threads: int = 256
    vec: int = 4

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "split"
    what: ClassVar[str] = (
        "The per-channel reduction split over a 2-D grid (channel tiles x slices of N*H*W) so "
        "every SM works even with few channels: Welford partials, a finalize kernel (Chan merge, "
        "running stats), then a normalize pass. No integer division per element; x is read twice.")

    def tile(self, problem) -> tuple[int, int]:
        ct = 32 if problem.layout == "NHWC" else 1
        return ct, self.threads // ct

    def splits(self, problem) -> int:
        ct, rb = self.tile(problem)
        tiles = -(-problem.c // ct)
        want = max(1, (_sms() * 8) // tiles)  # about 8 blocks per SM in all (4 left it at 40% occupancy)
        return max(1, min(want, -(-problem.m // (rb * self.vec))))

    def supports(self, problem):
        if self.threads < 32 or self.threads > 1024 or self.threads % 32:
            raise UnsupportedProblem(f"split: threads={self.threads} must be a multiple of 32 in 32..1024")
        if not 1 <= self.vec <= 16:
            raise UnsupportedProblem(f"split: vec={self.vec} must be 1..16")

    def workspace(self, problem):
        c = (problem.c,)
        return {"part": ((3, self.splits(problem), problem.c), "float32"), "mean": (c, "float32"),
                "scale": (c, "float32")}

    def plan(self, problem, bufs):
        self.supports(problem)
        eps, mom = _scalars(problem)
        x3, y3 = _x3(problem, bufs)
        ct, rb = self.tile(problem)
        ns = self.splits(problem)
        return [Launch(_split_stats_kernel(ct, rb, self.vec), (-(-problem.c // ct), ns), self.threads,
                       (x3, bufs["part"], ns)),
                Launch(bn_split_finish, -(-problem.c // 128), 128,
                       (bufs["part"], ns, bufs["mean"], bufs["scale"], bufs["gamma"],
                        bufs["running_mean_in"], bufs["running_var_in"], bufs["running_mean"], bufs["running_var"],
                        eps, mom, problem.c)),
                _norm_launch(problem, bufs)]

    def traffic(self, problem):
        e = problem.elem_bytes
        part = 3 * 4.0 * self.splits(problem) * problem.c * 2
        return Traffic(flops=problem.flops, dram_bytes=3 * e + part, l2_bytes=3 * e + part, limiter="dram",
                       notes="stats pass + normalize pass: x read twice, y written once; coalesced in both layouts")


# --- rung 6 -------------------------------------------------------------------------------
#: blocks per SM of the statistics grid, by layout: one wave (the kernels' registers are capped
#: so that this many blocks fit an SM), so no SM waits on a last partial wave.  NHWC threads
#: hold W channels' sums and shifts besides the loads in flight: 3 blocks (80 registers; at 64
#: the float16 kernel, 8 channels a thread, spilled)
STATS_BLOCKS_PER_SM = {"NCHW": 4, "NHWC": 3}

@cuda.jit(device=True)
def _ticket_finish(c, k, s1, s2, cnt, eps, stats):
    """Channel c's statistics from its shifted sums s1 = sum(x - k), s2 = sum((x - k)^2) over
    cnt values: mean = k + s1/cnt, var = s2/cnt - (s1/cnt)^2 (biased): stats[:, c] = (mean,
    rstd, var)."""
    d = s1 / cnt
    var = s2 / cnt - d * d
    if var < ZERO:  # rounding; a NaN stays NaN (fmaxf would drop it)
        var = ZERO
    stats[0, c] = k + d
    stats[1, c] = ONE / math.sqrt(var + eps)
    stats[2, c] = var


@lru_cache(maxsize=None)
def _ticket_nchw_kernel(T: int, W: int, V: int):
    """NCHW statistics, block (channel c, slice sp): x as (N*C planes, H*W), channel c's data
    the planes n*C + c; the slice is a range of its N*(H*W/W) W-element chunks (16-byte loads
    along H*W), V of them in flight per thread.  Shifted sums (no division per element), a
    shuffle tree, the block's sums to part[:, sp, c]; the last block of the channel (ticket)
    adds the slices' sums and finishes."""
    ld = vec_load(W)
    VW = V * W

    @C.jit_block(STATS_BLOCKS_PER_SM["NCHW"] * T)  # registers capped so that the wave fits
    def bn_ticket_stats_nchw(x2, part, count, stats, eps, nc):
        scr1 = cuda.shared.array(32, float32)
        scr2 = cuda.shared.array(32, float32)
        last = cuda.shared.array(1, int32)
        buf = cuda.local.array(VW, float32)
        kb = cuda.local.array(W, float32)
        c = cuda.blockIdx.x
        sp = cuda.blockIdx.y
        ns = cuda.gridDim.y
        t = cuda.threadIdx.x
        nchunk = x2.shape[1] // W  # chunks per plane
        total = (x2.shape[0] // nc) * nchunk
        per = (total + ns - 1) // ns
        lo = sp * per
        hi = min(total, lo + per)
        if t == 0:  # the shift: a value of the channel, so (mean - k)^2 is of the order of var
            ld(x2, c, 0, kb, 0)
            scr1[0] = kb[0]
        cuda.syncthreads()
        k = scr1[0]
        cuda.syncthreads()  # scr1 is the reductions' scratch
        dn = T // nchunk
        doff = T - dn * nchunk
        n = (lo + t) // nchunk  # the one division: (n, off) then walks with the chunk index
        off = lo + t - n * nchunk
        s1 = ZERO
        s2 = ZERO
        for base in range(lo + t, hi, T * V):
            for v in range(V):  # V 16-byte loads in flight
                if base + v * T < hi:
                    ld(x2, n * nc + c, off * W, buf, v * W)
                else:
                    for q in range(W):
                        buf[v * W + q] = k  # contributes zero
                n, off = _adv(n, off, dn, doff, nchunk)
            for i in range(VW):
                d = buf[i] - k
                s1 += d
                s2 += d * d
        s1 = group_sum(s1, T, scr1)
        s2 = group_sum(s2, T, scr2)
        if t == 0:
            part[0, sp, c] = s1
            part[1, sp, c] = s2
            cuda.threadfence()  # the sums reach L2 before the ticket says so
            last[0] = cuda.atomic.add(count, c, 1) == ns - 1
        cuda.syncthreads()
        if last[0]:  # the channel's last block: every slice's sums are in L2
            cuda.threadfence()
            s1 = ZERO
            s2 = ZERO
            for s in range(t, ns, T):
                s1 += part[0, s, c]
                s2 += part[1, s, c]
            s1 = group_sum(s1, T, scr1)
            s2 = group_sum(s2, T, scr2)
            if t == 0:
                _ticket_finish(c, k, s1, s2, float32(total * W), eps, stats)
                count[c] = 0  # ready for the next launch

    return bn_ticket_stats_nchw


@lru_cache(maxsize=None)
def _ticket_nhwc_kernel(CT: int, RB: int, W: int, V: int):
    """NHWC statistics, block (channel tile, slice sp): x as (N*H*W, C); lane % CT owns W
    consecutive channels (one 16-byte load a row), t // CT is one of RB row groups; V rows in
    flight.  Shifted sums per channel, the RB groups summed by a shared-memory tree, the tile's
    sums to part[:, sp, ch]; the tile's last block (ticket) adds the slices' sums and finishes."""
    ld = vec_load(W)
    VW = V * W
    TW = CT * W  # channels of a tile

    @C.jit_block(STATS_BLOCKS_PER_SM["NHWC"] * CT * RB)  # registers capped so that the wave fits
    def bn_ticket_stats_nhwc(x2, part, count, stats, eps, nc):
        sh = cuda.shared.array((2, RB, TW), float32)
        last = cuda.shared.array(1, int32)
        buf = cuda.local.array(VW, float32)
        kb = cuda.local.array(W, float32)
        s1 = cuda.local.array(W, float32)
        s2 = cuda.local.array(W, float32)
        t = cuda.threadIdx.x
        cl = t % CT
        grp = t // CT
        ch = cuda.blockIdx.x * TW + cl * W  # first of this thread's W channels
        sp = cuda.blockIdx.y
        ns = cuda.gridDim.y
        total = x2.shape[0]
        per = (total + ns - 1) // ns
        lo = sp * per
        hi = min(total, lo + per)
        if ch >= nc:
            hi = lo  # past the last channel: reduce nothing
        elif grp == 0:
            ld(x2, 0, ch, kb, 0)  # the shifts: a value of each channel, shared with the row groups
            for q in range(W):
                sh[0, 0, cl * W + q] = kb[q]
        cuda.syncthreads()
        for q in range(W):
            kb[q] = sh[0, 0, cl * W + q] if ch < nc else ZERO
        cuda.syncthreads()  # sh is the tree's scratch
        for q in range(W):
            s1[q] = ZERO
            s2[q] = ZERO
        for base in range(lo + grp, hi, RB * V):
            for v in range(V):  # V rows in flight
                if base + v * RB < hi:
                    ld(x2, base + v * RB, ch, buf, v * W)
                else:
                    for q in range(W):
                        buf[v * W + q] = kb[q]
            for v in range(V):
                for q in range(W):
                    d = buf[v * W + q] - kb[q]
                    s1[q] += d
                    s2[q] += d * d
        for q in range(W):
            sh[0, grp, cl * W + q] = s1[q]
            sh[1, grp, cl * W + q] = s2[q]
        cuda.syncthreads()
        h = RB // 2
        while h > 0:  # tree over the row groups
            if grp < h:
                for q in range(W):
                    sh[0, grp, cl * W + q] += sh[0, grp + h, cl * W + q]
                    sh[1, grp, cl * W + q] += sh[1, grp + h, cl * W + q]
            cuda.syncthreads()
            h //= 2
        if grp == 0 and ch < nc:
            for q in range(W):
                part[0, sp, ch + q] = sh[0, 0, cl * W + q]
                part[1, sp, ch + q] = sh[1, 0, cl * W + q]
            cuda.threadfence()  # the sums reach L2 before the ticket says so
        cuda.syncthreads()
        if t == 0:
            last[0] = cuda.atomic.add(count, cuda.blockIdx.x, 1) == ns - 1
        cuda.syncthreads()
        if last[0]:  # the tile's last block
            cuda.threadfence()
            for q in range(W):
                s1[q] = ZERO
                s2[q] = ZERO
            if ch < nc:
                for s in range(grp, ns, RB):
                    for q in range(W):
                        s1[q] += part[0, s, ch + q]
                        s2[q] += part[1, s, ch + q]
            for q in range(W):
                sh[0, grp, cl * W + q] = s1[q]
                sh[1, grp, cl * W + q] = s2[q]
            cuda.syncthreads()
            h = RB // 2
            while h > 0:
                if grp < h:
                    for q in range(W):
                        sh[0, grp, cl * W + q] += sh[0, grp + h, cl * W + q]
                        sh[1, grp, cl * W + q] += sh[1, grp + h, cl * W + q]
                cuda.syncthreads()
                h //= 2
            if grp == 0 and ch < nc:
                for q in range(W):
                    _ticket_finish(ch + q, kb[q], sh[0, 0, cl * W + q], sh[1, 0, cl * W + q], float32(total),
                                   eps, stats)
            if t == 0:
                count[cuda.blockIdx.x] = 0  # ready for the next launch

    return bn_ticket_stats_nhwc


@lru_cache(maxsize=None)
def _reverse_normalize_kernel(W: int, V: int, IN_ROW: bool, TR: int, RPB: int):
    """y = (x - mean[c]) * rstd[c] * gamma[c] + beta[c] over x as 2-D (P, L) (NCHW: N*C planes
    x H*W, the channel per plane; NHWC: N*H*W rows x C, the channel per column, its statistics,
    gamma and beta read as vectors too), walking the planes from the LAST: the statistics kernel
    read the end of x last, so what of x is still in L2 is read first, before the new y evicts
    it.  A block is RPB rows of TR threads (narrow NHWC rows: several rows a block, not 32-thread
    blocks).  Block (0, 0) also updates the running statistics (momentum, unbiased variance)."""
    ld = vec_load(W)
    st = vec_store(W)
    WP = min(W, 4)  # the float32 parameters: 16 bytes at most per load
    ldp = vec_load(WP)
    VW = V * W

    @cuda.jit
    def bn_normalize_reverse(x2, y2, stats, gamma, beta, rm_in, rv_in, rm, rv, cnt, mom):
        buf = cuda.local.array(VW, float32)
        mb = cuda.local.array(VW, float32)
        kb = cuda.local.array(VW, float32)
        bb = cuda.local.array(VW, float32)
        P = x2.shape[0]
        L = x2.shape[1]
        nc = gamma.shape[1]
        t = cuda.threadIdx.x
        if cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0:
            for c in range(t, nc, TR * RPB):
                rm[c] = (ONE - mom) * rm_in[c] + mom * stats[0, c]
                rv[c] = (ONE - mom) * rv_in[c] + mom * stats[2, c] * cnt / (cnt - ONE)
        l0 = (cuda.blockIdx.x * TR + t % TR) * W
        lstep = cuda.gridDim.x * TR * W  # the grid spans a row: V * lstep >= L
        if IN_ROW:  # NHWC: a thread's V * W channels are the same in every row: load them once
            for v in range(V):
                l = l0 + v * lstep
                if l < L:
                    for h in range(0, W, WP):
                        ldp(stats, 0, l + h, mb, v * W + h)
                        ldp(stats, 1, l + h, kb, v * W + h)
                        ldp(gamma, 0, l + h, bb, v * W + h)
                    for q in range(W):
                        kb[v * W + q] *= bb[v * W + q]  # rstd * gamma
                    for h in range(0, W, WP):
                        ldp(beta, 0, l + h, bb, v * W + h)
        for pr in range(cuda.blockIdx.y * RPB + t // TR, P, cuda.gridDim.y * RPB):
            p = P - 1 - pr
            m0 = ZERO
            k0 = ZERO
            b0 = ZERO
            if not IN_ROW:  # NCHW: one channel per plane, its parameters loaded once
                cp = p % nc
                m0 = stats[0, cp]
                k0 = stats[1, cp] * gamma[0, cp]
                b0 = beta[0, cp]
            for v in range(V):
                l = l0 + v * lstep
                if l < L:
                    ld(x2, p, l, buf, v * W)
            for v in range(V):
                l = l0 + v * lstep
                if l < L:
                    for q in range(W):
                        i = v * W + q
                        if IN_ROW:
                            buf[i] = (buf[i] - mb[i]) * kb[i] + bb[i]
                        else:
                            buf[i] = (buf[i] - m0) * k0 + b0
                    st(y2, p, l, buf, v * W)

    return bn_normalize_reverse


#: L2 bytes of x trusted to survive from the statistics pass to the normalize pass: half of
#: ONCHIP_BYTES (the normalize pass's own writes of y share L2 with it)
L2_REUSE_BYTES = C.ONCHIP_BYTES // 2


@dataclass(frozen=True)
class Ticket(Variant):
    threads: int = 256
    vec: int = 4

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "ticket"
    what: ClassVar[str] = (
        "Two kernels: statistics on a 2-D grid with 16-byte loads and shifted sums (no division "
        "per element; partials just add), the channel's last block finishing them by an atomic "
        "ticket, then a normalize that walks x from its end, so the part of x still in L2 is read "
        "from there.")

    def width(self, problem) -> int:
        return C.vec_width(problem.h * problem.w if problem.layout == "NCHW" else problem.c, problem.dtype)

    def tile(self, problem) -> tuple[int, int]:
        """(CT, RB): lanes across channels and row groups of an NHWC block (NCHW: (1, threads))."""
        if problem.layout == "NCHW":
            return 1, self.threads
        ct = min(32, self.threads, C.next_pow2(-(-problem.c // self.width(problem))))
        return ct, self.threads // ct

    def tiles(self, problem) -> int:
        if problem.layout == "NCHW":
            return problem.c
        ct, _ = self.tile(problem)
        return -(-problem.c // (ct * self.width(problem)))

    def splits(self, problem) -> int:
        ct, rb = self.tile(problem)
        W = self.width(problem)
        work = problem.n * (problem.h * problem.w // W) if problem.layout == "NCHW" else problem.m
        per_block = rb * self.vec  # chunks (NCHW) or rows (NHWC) of one trip of a block
        want = max(1, _sms() * STATS_BLOCKS_PER_SM[problem.layout] // self.tiles(problem))  # about one wave
        return max(1, min(want, 65535, -(-work // per_block)))

    def supports(self, problem):
        t = self.threads
        if t < 32 or t > 1024 or t & (t - 1):
            raise UnsupportedProblem(f"ticket: threads={t} must be a power of two in 32..1024")
        if not 1 <= self.vec <= 8:
            raise UnsupportedProblem(f"ticket: vec={self.vec} must be 1..8")

    def workspace(self, problem):
        # the slices' sums; a ticket per channel tile; (mean, rstd, var) of every channel
        return {"part": ((2, self.splits(problem), problem.c), "float32"),
                "count": ((self.tiles(problem),), "int32"), "stats": ((3, problem.c), "float32")}

    def zeroed(self, problem):
        return frozenset({"count"})

    def stats_kernel(self, problem):
        """The statistics launch's kernel."""
        if problem.layout == "NCHW":
            return _ticket_nchw_kernel(self.threads, self.width(problem), self.vec)
        return _ticket_nhwc_kernel(*self.tile(problem), self.width(problem), self.vec)

    def plan(self, problem, bufs):
        self.supports(problem)
        eps, mom = _scalars(problem)
        W = self.width(problem)
        ns = self.splits(problem)
        if problem.layout == "NCHW":
            shape2 = (problem.n * problem.c, problem.h * problem.w)
        else:
            shape2 = (problem.m, problem.c)
        stats = Launch(self.stats_kernel(problem), (self.tiles(problem), ns), self.threads,
                       (C.view(bufs["x"], shape2), bufs["part"], bufs["count"], bufs["stats"], eps, problem.c))
        P, L = shape2
        per_thread = W * NORM_VEC
        tr = min(256, max(32, C.next_pow2(-(-L // per_thread))))  # threads along a row
        rpb = 256 // tr  # rows per block
        gx = -(-L // (tr * per_thread))  # the grid spans a row: a thread's columns are fixed
        gy = max(1, min(-(-P // rpb), 65535, -(-_sms() * 2048 // (256 * gx))))  # about a full GPU of threads
        ch = (1, problem.c)
        norm = Launch(_reverse_normalize_kernel(W, NORM_VEC, problem.layout == "NHWC", tr, rpb), (gx, gy), 256,
                      (C.view(bufs["x"], shape2), C.view(bufs["y"], shape2), bufs["stats"],
                       C.view(bufs["gamma"], ch), C.view(bufs["beta"], ch), bufs["running_mean_in"],
                       bufs["running_var_in"], bufs["running_mean"], bufs["running_var"],
                       np.float32(problem.m), mom))
        return [stats, norm]

    def traffic(self, problem):
        e = problem.elem_bytes
        reuse = min(e, float(L2_REUSE_BYTES))  # the end of x, read last by the stats, first by the normalize
        part = 2 * 4.0 * self.splits(problem) * problem.c * 2
        ch = problem.c * 4.0 * 9
        dram = 3 * e - reuse + part + ch
        return Traffic(flops=problem.flops, dram_bytes=dram, l2_bytes=3 * e + part + ch, limiter="dram",
                       notes=(f"x read twice (it does not fit in L2), {reuse / 2**20:.0f} MiB of the second read "
                              "from L2 (the normalize walks x from the end the statistics read last), y written "
                              "once; 16-byte accesses in both layouts"))


# --- rung 7 -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _nhwc_stats_kernel(CT: int, RB: int, W: int, V: int):
    """Rung 6's NHWC statistics with the tile's sums reduced across its RB row groups in a
    channel-major shared layout: thread (grp, lane cl) puts channel cl * W + q's sum at column
    q * CT + cl of row grp, so a warp's 32 lanes store 32 consecutive words (one wavefront; rung
    6's cl * W + q put them W words apart: W-way bank conflicts), then one thread per column adds
    the RB rows (consecutive columns again) after one barrier, where rung 6's tree took log2(RB)
    barriers of conflicted accesses.  The column's thread writes the slice's sums; the tile's
    last block (ticket) adds the slices' sums the same way and finishes."""
    ld = vec_load(W)
    VW = V * W
    TW = CT * W  # channels of a tile
    T = CT * RB
    CPT = -(-TW // T)  # columns a thread adds (1 unless W > RB)

    @C.jit_block(STATS_BLOCKS_PER_SM["NHWC"] * T)  # registers capped so that the wave fits
    def bn_nhwc_stats(x2, part, count, stats, eps, nc):
        sh = cuda.shared.array((2, RB, TW), float32)
        shk = cuda.shared.array(TW, float32)  # the shifts, channel-major
        last = cuda.shared.array(1, int32)
        buf = cuda.local.array(VW, float32)
        kb = cuda.local.array(W, float32)
        s1 = cuda.local.array(W, float32)
        s2 = cuda.local.array(W, float32)
        t = cuda.threadIdx.x
        cl = t % CT
        grp = t // CT
        tile0 = cuda.blockIdx.x * TW
        ch = tile0 + cl * W  # first of this thread's W channels
        sp = cuda.blockIdx.y
        ns = cuda.gridDim.y
        total = x2.shape[0]
        per = (total + ns - 1) // ns
        lo = sp * per
        hi = min(total, lo + per)
        if ch >= nc:
            hi = lo  # past the last channel: reduce nothing
        elif grp == 0:
            ld(x2, 0, ch, kb, 0)  # the shifts: a value of each channel, shared with the row groups
            for q in range(W):
                shk[q * CT + cl] = kb[q]
        cuda.syncthreads()
        for q in range(W):
            kb[q] = shk[q * CT + cl] if ch < nc else ZERO
            s1[q] = ZERO
            s2[q] = ZERO
        for base in range(lo + grp, hi, RB * V):
            for v in range(V):  # V rows in flight
                if base + v * RB < hi:
                    ld(x2, base + v * RB, ch, buf, v * W)
                else:
                    for q in range(W):
                        buf[v * W + q] = kb[q]
            for v in range(V):
                for q in range(W):
                    d = buf[v * W + q] - kb[q]
                    s1[q] += d
                    s2[q] += d * d
        for q in range(W):  # channel-major: a warp's lanes store consecutive words
            sh[0, grp, q * CT + cl] = s1[q]
            sh[1, grp, q * CT + cl] = s2[q]
        cuda.syncthreads()
        for u in range(CPT):  # one thread a column adds the row groups (constant trips: unrolled)
            col = t + u * T
            c = tile0 + (col % CT) * W + col // CT
            if col < TW and c < nc:
                a1 = ZERO
                a2 = ZERO
                for g in range(RB):
                    a1 += sh[0, g, col]
                    a2 += sh[1, g, col]
                part[0, sp, c] = a1
                part[1, sp, c] = a2
        cuda.threadfence()  # the sums reach L2 before the ticket says so
        cuda.syncthreads()
        if t == 0:
            last[0] = cuda.atomic.add(count, cuda.blockIdx.x, 1) == ns - 1
        cuda.syncthreads()
        if last[0]:  # the tile's last block: every slice's sums are in L2
            cuda.threadfence()
            for q in range(W):
                s1[q] = ZERO
                s2[q] = ZERO
            if ch < nc:
                for s in range(grp, ns, RB):
                    for q in range(W):
                        s1[q] += part[0, s, ch + q]
                        s2[q] += part[1, s, ch + q]
            for q in range(W):
                sh[0, grp, q * CT + cl] = s1[q]
                sh[1, grp, q * CT + cl] = s2[q]
            cuda.syncthreads()
            for u in range(CPT):
                col = t + u * T
                c = tile0 + (col % CT) * W + col // CT
                if col < TW and c < nc:
                    a1 = ZERO
                    a2 = ZERO
                    for g in range(RB):
                        a1 += sh[0, g, col]
                        a2 += sh[1, g, col]
                    _ticket_finish(c, shk[col], a1, a2, float32(total), eps, stats)
            if t == 0:
                count[cuda.blockIdx.x] = 0  # ready for the next launch

    return bn_nhwc_stats


@dataclass(frozen=True)
class Nhwc(Ticket):
    threads: int = 256
    vec: int = 4

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "nhwc"
    what: ClassVar[str] = (
        "Rung 6 for NHWC with the block's per-channel sums laid out channel-major in shared "
        "memory: lane cl stores channel slot q at word q*CT + cl, so a warp's stores take one "
        "wavefront instead of conflicting. After one barrier, one thread per channel adds the row "
        "groups' values.")

    def supports(self, problem):
        if problem.layout != "NHWC":
            raise UnsupportedProblem(f"{self.label}: changes the NHWC statistics kernel only; an NCHW block "
                                     f"holds one channel and reduces by shuffles: use rung {Ticket.rung} ticket")
        super().supports(problem)

    def example(self, problem):
        """The NHWC twin of the op's example (the rung takes NHWC only)."""
        return problem if problem.layout == "NHWC" else dataclasses.replace(problem, layout="NHWC")

    def stats_kernel(self, problem):
        return _nhwc_stats_kernel(*self.tile(problem), self.width(problem), self.vec)

    def traffic(self, problem):
        t = super().traffic(problem)
        return dataclasses.replace(t, notes=t.notes + "; the tile's sums reduced through a conflict-free "
                                   "channel-major shared layout, one barrier a reduction")


LADDER: list[Variant] = [Oracle(), Naive(), Fused(), Warp(), Welford(), Split(), Ticket(), Nhwc()]
registry_check(LADDER)
EXAMPLE_PROBLEM = Problem(n=32, c=256, h=56, w=56)
GPU_SWEEP = [Problem(32, 256, 56, 56, layout=lay) for lay in LAYOUTS] + \
            [Problem(32, 64, 112, 112, layout=lay) for lay in LAYOUTS]
#: float16 at the widths that matter, appended so that the indices above keep their problems
GPU_SWEEP += [Problem(32, 256, 56, 56, "float16", layout=lay) for lay in LAYOUTS]
SIM_SWEEP = [Problem(2, 3, 4, 5), Problem(2, 3, 4, 5, layout="NHWC")]
