"""Rungs 0-2 of the convolution ladder: the oracle (cuDNN), the definition as a kernel, and the
direct method with its input tile and halo staged in shared memory."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32

from ... import backend
from ..base import Launch, OracleVariant, TunableVariant, UnsupportedProblem
from . import _common as C
from ._common import Problem, torch_conv


def _host_conv(problem: Problem, x: dict) -> np.ndarray:
    """float32 convolution on the CPU: torch when installed, else NumPy (float32 taps)."""
    xs, ws = x["x"].astype(np.float32), x["w"].astype(np.float32)
    if problem.nhwc:
        xs, ws = xs.transpose(0, 3, 1, 2), ws.transpose(0, 3, 1, 2)
    try:
        import torch

        y = torch.nn.functional.conv2d(torch.from_numpy(np.ascontiguousarray(xs)),
                                       torch.from_numpy(np.ascontiguousarray(ws)),
                                       stride=problem.stride, padding=problem.pad).numpy()
    except ImportError:
        pd, st = problem.pad, problem.stride
        xp = np.pad(xs, ((0, 0), (0, 0), (pd, pd), (pd, pd)))
        y = np.zeros((problem.n, problem.k, problem.p, problem.q), np.float32)
        for i in range(problem.r):
            for j in range(problem.s):
                patch = xp[:, :, i:i + st * (problem.p - 1) + 1:st, j:j + st * (problem.q - 1) + 1:st]
                y += np.einsum("ncpq,kc->nkpq", patch, ws[:, :, i, j])
    if problem.nhwc:
        y = y.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(y).astype(problem.out_dtype)



@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = (
        "cuDNN through torch.nn.functional.conv2d with TF32 and cudnn.benchmark off, so cuDNN's "
        "heuristics pick the algorithm; NHWC goes in as channels_last views, float16 gives a "
        "float16 output. In the simulator, torch on the CPU in float32.")

    def supports(self, problem):
        if not backend.is_simulator():  # on a GPU, cuDNN comes through PyTorch only
            try:
                import torch

                ok = torch.cuda.is_available()
            except ImportError:
                ok = False
            if not ok:
                raise UnsupportedProblem(f"{self.label}: needs PyTorch with CUDA (cuDNN) on a GPU; "
                                         "this PyTorch has no CUDA device")

    def prepare(self, problem, inputs):
        self.supports(problem)
        return super().prepare(problem, inputs)

    def gpu(self, problem, x, out):
        return torch_conv(problem, x, benchmark=False)

    def host(self, problem, x):
        return _host_conv(problem, x)

    def traffic(self, problem):
        return C._traffic(problem, problem.bytes, None, "compute",
                        "cuDNN: its own algorithm choice; the model assumes each tensor crosses DRAM once",
                        peak="tensor.fp16" if problem.dtype == "float16" else None)


# --- rung 1: direct ----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _direct_kernel(NHWC: bool):
    @cuda.jit
    def conv_direct(x, w, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        i = cuda.grid(1)  # consecutive threads: consecutive elements of y in memory
        if i >= N * K * P * Q:
            return
        if NHWC:
            k = i % K
            t = i // K
            q = t % Q
            t = t // Q
            p = t % P
            b = t // P
        else:
            q = i % Q
            t = i // Q
            p = t % P
            t = t // P
            k = t % K
            b = t // K
        acc = float32(0)
        for r in range(R):
            ih = p * stride - pad + r
            if ih >= 0 and ih < H:
                for s in range(S):
                    iw = q * stride - pad + s
                    if iw >= 0 and iw < W:
                        for c in range(C):
                            if NHWC:
                                acc += float32(x[b, ih, iw, c]) * float32(w[k, r, s, c])
                            else:
                                acc += float32(x[b, c, ih, iw]) * float32(w[k, c, r, s])
        if NHWC:
            y[b, p, q, k] = acc
        else:
            y[b, k, p, q] = acc

    return conv_direct


@dataclass(frozen=True)
class Direct(TunableVariant):
    block: int = 256

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "direct"
    what: ClassVar[str] = (
        "The definition as a kernel: one thread per output element (in y's memory order, so "
        "stores coalesce) loops over filter taps and input channels, reading x and w from global "
        "memory. Every output that sees an x value loads it again, and only the caches catch the "
        "reuse.")

    def grid(self, p):
        return C._ceil(p.n * p.k * p.p * p.q, self.block)

    def supports(self, problem):
        C._check(self, problem, self.grid(problem), self.block)

    def plan(self, problem, bufs):
        return [Launch(_direct_kernel(problem.nhwc), self.grid(problem), self.block,
                       (bufs["x"], bufs["w"], bufs["y"], problem.n, problem.c, problem.h, problem.w, problem.k,
                        problem.r, problem.s, problem.p, problem.q, problem.stride, problem.pad))]

    def traffic(self, p):
        e = p.elem
        taps = p.n * p.k * p.p * p.q * p.c * p.r * p.s  # loads of x and of w, one each per FMA
        if p.nhwc:  # a warp = 32 output channels of one pixel: x broadcast, w 32 rows apart (a sector each)
            l2 = taps / 32 * (e + 32 * 32) / 8  # L1 keeps ~1/8 of the w sectors it fetched
            note = "NHWC: warp-wide w loads touch 32 sectors (strided by r*s*c); x is a broadcast"
        else:  # a warp = 32 neighbouring q of one channel: x one or two lines, w a broadcast
            l2 = taps / 32 * (32 * e * p.stride + e) / max(1, min(p.r * p.s, 8))
            note = "NCHW: warp loads of x coalesce (stride * 128 B), w is a broadcast; L1 catches tap overlap"
        return C._traffic(p, l2, None, "l1/lsu", note + "; 2 loads per FMA: far below the FMA peak")


# --- rung 2: direct, input tile + halo in shared memory ---------------------------------------------
@lru_cache(maxsize=None)
def _halo_kernel(NHWC: bool, R: int, S: int, STRIDE: int, TP: int, TQ: int, KB: int):
    IH = (TP - 1) * STRIDE + R  # input rows a TP x TQ output tile needs (the tile and its halo)
    IW = (TQ - 1) * STRIDE + S
    NT = TP * TQ
    RS = R * S

    @cuda.jit
    def conv_direct_halo(x, w, y, N, C, H, W, K, P, Q, pad):
        tile = cuda.shared.array((IH, IW), float32)  # one input channel of the tile + halo
        wsh = cuda.shared.array((KB, RS), float32)  # that channel's taps of KB filters
        acc = cuda.local.array(KB, float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        t = ty * TQ + tx
        tiles_q = (Q + TQ - 1) // TQ
        p0 = (cuda.blockIdx.x // tiles_q) * TP
        q0 = (cuda.blockIdx.x % tiles_q) * TQ
        k0 = cuda.blockIdx.y * KB
        b = cuda.blockIdx.z
        h0 = p0 * STRIDE - pad
        w0 = q0 * STRIDE - pad
        for kk in range(KB):
            acc[kk] = float32(0)
        for c in range(C):
            for idx in range(t, IH * IW, NT):
                ii = idx // IW
                jj = idx % IW
                ih = h0 + ii
                iw = w0 + jj
                v = float32(0)
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = float32(x[b, ih, iw, c])
                    else:
                        v = float32(x[b, c, ih, iw])
                tile[ii, jj] = v
            for idx in range(t, KB * RS, NT):
                kk = idx // RS
                rs = idx % RS
                u = float32(0)
                if k0 + kk < K:
                    if NHWC:
                        u = float32(w[k0 + kk, rs // S, rs % S, c])
                    else:
                        u = float32(w[k0 + kk, c, rs // S, rs % S])
                wsh[kk, rs] = u
            cuda.syncthreads()
            for r in range(R):
                for s in range(S):
                    xv = tile[ty * STRIDE + r, tx * STRIDE + s]  # one shared load feeds KB FMAs
                    for kk in range(KB):
                        acc[kk] += xv * wsh[kk, r * S + s]
            cuda.syncthreads()
        p = p0 + ty
        q = q0 + tx
        if p < P and q < Q:
            for kk in range(KB):
                if k0 + kk < K:
                    if NHWC:
                        y[b, p, q, k0 + kk] = acc[kk]
                    else:
                        y[b, k0 + kk, p, q] = acc[kk]

    return conv_direct_halo


@dataclass(frozen=True)
class DirectHalo(TunableVariant):
    TP: int = 8
    TQ: int = 16
    KB: int = 8

    rung: ClassVar[int] = 2
    name: ClassVar[str] = "direct_halo"
    what: ClassVar[str] = (
        "A block owns a TP x TQ tile of output pixels for KB output channels and, channel by "
        "channel, stages the input tile with its halo and the KB filters in shared memory. Each x "
        "value then comes from global memory about once per block, and each shared load of x "
        "feeds KB FMAs.")

    def halo(self, p):
        return (self.TP - 1) * p.stride + p.r, (self.TQ - 1) * p.stride + p.s

    def shared_bytes(self, p) -> int:
        ih, iw = self.halo(p)
        return (ih * iw + self.KB * p.r * p.s) * 4

    def grid(self, p):
        return C._ceil(p.p, self.TP) * C._ceil(p.q, self.TQ), C._ceil(p.k, self.KB), p.n

    def supports(self, problem):
        C._check(self, problem, self.grid(problem), (self.TQ, self.TP), self.shared_bytes(problem))

    def plan(self, problem, bufs):
        p = problem
        kern = _halo_kernel(p.nhwc, p.r, p.s, p.stride, self.TP, self.TQ, self.KB)
        return [Launch(kern, self.grid(p), (self.TQ, self.TP),
                       (bufs["x"], bufs["w"], bufs["y"], p.n, p.c, p.h, p.w, p.k, p.p, p.q, p.pad))]

    def traffic(self, p):
        e = p.elem
        gx, gk, gn = self.grid(p)
        ih, iw = self.halo(p)
        blocks = gx * gk * gn
        x_l2 = blocks * p.c * ih * iw * e * (8 if p.nhwc else 1)  # NHWC: one useful element per sector
        w_l2 = blocks * p.c * self.KB * p.r * p.s * e
        smem = p.flops / 2 * 4 * (1 + 1 / self.KB) + blocks * p.c * (ih * iw + self.KB * p.r * p.s) * 4
        note = (f"x read once per block and per {gk} channel group(s); "
                + ("NHWC gathers one channel at a time: 4-8x the sectors" if p.nhwc else "rows of x coalesce")
                + f"; {1 + 1 / self.KB:.2f} shared loads per FMA")
        return C._traffic(p, x_l2 + w_l2 + p.n * p.k * p.p * p.q * e, smem, "smem", note)


