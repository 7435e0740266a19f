"""Rungs 7, 11 and 14: Winograd F(2x2, 3x3), as transforms and 16 batched GEMMs (rung 11: the GEMM
warp-tiled, its A operand stored k-major by the filter transform), and F(4x4, 3x3) on rung 11's GEMM."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32, int32

from .._vector import ld4, st4
from ..base import Launch, Traffic, TunableVariant, UnsupportedProblem
from . import _common as C


# Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016): a 2x2 output tile of a
# 3x3 stride-1 convolution is  Y = A^T [ sum_c (G g_c G^T) * (B^T d_c B) ] A  with a 4x4 input tile
# d_c, so 16 multiplies per (tile, c, k) replace 36.  The 16 products over c are 16 independent
# GEMMs:  M_e (K x T) = U_e (K x C) @ V_e (C x T),  e < 16, T = number of 2x2 tiles.
#   B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
#   G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
#   A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
@lru_cache(maxsize=None)
def _wino_filter_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_filter(w, U, K, C):
        """U[e * K + k, c] = (G g G^T)[e // 4, e % 4] for the 3x3 filter g of (k, c)."""
        i = cuda.grid(1)
        if i >= K * C:
            return
        c = i % C
        k = i // C
        g = cuda.local.array((3, 3), float32)
        t = cuda.local.array((4, 3), float32)
        for r in range(3):
            for s in range(3):
                if NHWC:
                    g[r, s] = float32(w[k, r, s, c])
                else:
                    g[r, s] = float32(w[k, c, r, s])
        for s in range(3):  # G g
            t[0, s] = g[0, s]
            t[1, s] = float32(0.5) * (g[0, s] + g[1, s] + g[2, s])
            t[2, s] = float32(0.5) * (g[0, s] - g[1, s] + g[2, s])
            t[3, s] = g[2, s]
        for a in range(4):  # (G g) G^T
            U[(a * 4) * K + k, c] = t[a, 0]
            U[(a * 4 + 1) * K + k, c] = float32(0.5) * (t[a, 0] + t[a, 1] + t[a, 2])
            U[(a * 4 + 2) * K + k, c] = float32(0.5) * (t[a, 0] - t[a, 1] + t[a, 2])
            U[(a * 4 + 3) * K + k, c] = t[a, 2]

    return conv_winograd_filter


@lru_cache(maxsize=None)
def _wino_input_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_input(x, V, N, C, H, W, TP, TQ, pad):
        """V[e * C + c, t] = (B^T d B)[e // 4, e % 4] for the 4x4 input tile d of (c, tile t)."""
        i = cuda.grid(1)
        T = N * TP * TQ
        if i >= C * T:
            return
        t = i % T  # neighbouring threads: neighbouring tiles (coalesced stores of V)
        c = i // T
        tq = t % TQ
        tp = (t // TQ) % TP
        b = t // (TQ * TP)
        d = cuda.local.array((4, 4), float32)
        m = cuda.local.array((4, 4), float32)
        for a in range(4):
            ih = 2 * tp - pad + a
            for e in range(4):
                iw = 2 * tq - pad + e
                v = float32(0)
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = float32(x[b, ih, iw, c])
                    else:
                        v = float32(x[b, c, ih, iw])
                d[a, e] = v
        for e in range(4):  # B^T d
            m[0, e] = d[0, e] - d[2, e]
            m[1, e] = d[1, e] + d[2, e]
            m[2, e] = d[2, e] - d[1, e]
            m[3, e] = d[1, e] - d[3, e]
        for a in range(4):  # (B^T d) B
            V[(a * 4) * C + c, t] = m[a, 0] - m[a, 2]
            V[(a * 4 + 1) * C + c, t] = m[a, 1] + m[a, 2]
            V[(a * 4 + 2) * C + c, t] = m[a, 2] - m[a, 1]
            V[(a * 4 + 3) * C + c, t] = m[a, 1] - m[a, 3]

    return conv_winograd_input


@lru_cache(maxsize=None)
def _batched_gemm_kernel(BM: int, BN: int, BK: int, TM: int, TN: int):
    """Mo[e] = Ua[e] @ Vb[e] for e = blockIdx.z, the operands stacked by rows: Ua (E*M, Kd),
    Vb (E*Kd, Nn), Mo (E*M, Nn); GEMM rung 5's 2-D register blocking."""
    NT = (BM // TM) * (BN // TN)
    TMN = TM * TN

    @cuda.jit
    def conv_winograd_gemm(Ua, Vb, Mo, M, Nn, Kd):
        As = cuda.shared.array((BK, BM), float32)  # A tile stored k-major
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        e = cuda.blockIdx.z
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        ra = e * M  # this product's first row in Ua and Mo
        rb = e * Kd  # and in Vb
        t_col = t % (BN // TN)
        t_row = t // (BN // TN)
        for i in range(TMN):
            acc[i] = float32(0)
        for k0 in range(0, Kd, BK):
            for idx in range(t, BM * BK, NT):
                r = idx // BK
                q = idx % BK
                As[q, r] = Ua[ra + bm + r, k0 + q] if bm + r < M and k0 + q < Kd else float32(0)
            for idx in range(t, BK * BN, NT):
                r = idx // BN
                q = idx % BN
                Bs[r, q] = Vb[rb + k0 + r, bn + q] if k0 + r < Kd and bn + q < Nn else float32(0)
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    reg_m[i] = As[kk, t_row * TM + i]
                for j in range(TN):
                    reg_n[j] = Bs[kk, t_col * TN + j]
                for i in range(TM):
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < Nn:
                    Mo[ra + r, q] = acc[i * TN + j]

    return conv_winograd_gemm


@lru_cache(maxsize=None)
def _wino_output_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_output(Mo, y, N, K, P, Q, TP, TQ):
        """y's 2x2 tile (k, t) = A^T m A, m[a, e] = Mo[(a * 4 + e) * K + k, t]."""
        i = cuda.grid(1)
        T = N * TP * TQ
        if i >= K * T:
            return
        t = i % T
        k = i // T
        tq = t % TQ
        tp = (t // TQ) % TP
        b = t // (TQ * TP)
        o = cuda.local.array((2, 4), float32)
        for e in range(4):  # A^T m
            m0 = Mo[e * K + k, t]
            m1 = Mo[(4 + e) * K + k, t]
            m2 = Mo[(8 + e) * K + k, t]
            m3 = Mo[(12 + e) * K + k, t]
            o[0, e] = m0 + m1 + m2
            o[1, e] = m1 - m2 - m3
        for a in range(2):  # (A^T m) A
            for j in range(2):
                v = o[a, 0] + o[a, 1] + o[a, 2] if j == 0 else o[a, 1] - o[a, 2] - o[a, 3]
                p = 2 * tp + a
                q = 2 * tq + j
                if p < P and q < Q:
                    if NHWC:
                        y[b, p, q, k] = v
                    else:
                        y[b, k, p, q] = v

    return conv_winograd_output


@dataclass(frozen=True)
class Winograd(TunableVariant):
    BM: int = 64
    BN: int = 64
    BK: int = 8
    TM: int = 4
    TN: int = 4
    block: int = 256

    rung: ClassVar[int] = 7
    name: ClassVar[str] = "winograd"
    what: ClassVar[str] = (
        "Winograd F(2x2, 3x3) for 3x3 stride-1 layers: transform the filters and overlapping 4x4 "
        "input tiles, run 16 batched GEMMs over channels, transform back: 16 multiplies per 2x2 "
        "output tile where direct does 36. The price: three float32 workspaces in DRAM and larger "
        "rounding errors.")

    def example(self, problem):
        return problem  # the example layer is a 3x3 stride-1 layer

    def tiles(self, p):
        return C._ceil(p.p, 2), C._ceil(p.q, 2)

    def workspace(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        return {"U": ((16 * p.k, p.c), "float32"), "V": ((16 * p.c, t), "float32"),
                "M": ((16 * p.k, t), "float32")}

    def threads(self):
        return (self.BM // self.TM) * (self.BN // self.TN)

    def gemm_grid(self, p):
        tp, tq = self.tiles(p)
        return C._ceil(p.n * tp * tq, self.BN), C._ceil(p.k, self.BM), 16

    def supports(self, problem):
        p = problem
        if (p.r, p.s, p.stride) != (3, 3, 1):
            raise UnsupportedProblem(f"{self.label}: F(2x2, 3x3) takes 3x3 filters at stride 1; got "
                                     f"{p.r}x{p.s} at stride {p.stride}")
        if self.BM % self.TM or self.BN % self.TN:
            raise UnsupportedProblem(f"{self.label}: BM, BN must be multiples of TM, TN")
        C._check(self, p, self.gemm_grid(p), self.threads(), self.BK * (self.BM + self.BN) * 4)
        tp, tq = self.tiles(p)
        C._check(self, p, C._ceil(16 * max(p.k, p.c) * p.n * tp * tq, self.block), self.block)

    def plan(self, problem, bufs):
        p = problem
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        nb = self.block
        return [
            Launch(_wino_input_kernel(p.nhwc), C._ceil(p.c * t, nb), nb,
                   (bufs["x"], bufs["V"], p.n, p.c, p.h, p.w, tp, tq, p.pad)),
            Launch(_wino_filter_kernel(p.nhwc), C._ceil(p.k * p.c, nb), nb, (bufs["w"], bufs["U"], p.k, p.c)),
            Launch(_batched_gemm_kernel(self.BM, self.BN, self.BK, self.TM, self.TN), self.gemm_grid(p),
                   self.threads(), (bufs["U"], bufs["V"], bufs["M"], p.k, t, p.c)),
            Launch(_wino_output_kernel(p.nhwc), C._ceil(p.k * t, nb), nb,
                   (bufs["M"], bufs["y"], p.n, p.k, p.p, p.q, tp, tq)),
        ]

    def traffic(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        e = p.elem
        v_b, m_b, u_b = 16 * p.c * t * 4.0, 16 * p.k * t * 4.0, 16 * p.k * p.c * 4.0
        x_b, y_b, w_b = p.n * p.c * p.h * p.w * e, p.n * p.k * p.p * p.q * e, p.k * p.c * 9 * e
        dram = x_b + w_b + y_b + 2 * (v_b + m_b + u_b)  # each workspace written once and read once
        l2 = dram + v_b * (C._ceil(p.k, self.BM) - 1) + u_b * (C._ceil(t, self.BN) - 1)
        gemm_flops = 2.0 * 16 * p.k * p.c * t
        return Traffic(flops=gemm_flops, dram_bytes=dram, l2_bytes=l2,
                       smem_bytes=(1 / self.TM + 1 / self.TN) * 4 * gemm_flops / 2, limiter="fma",
                       notes=f"{gemm_flops / p.flops:.2f}x the direct FLOPs (16 products per 2x2 tile instead of "
                             f"36, plus tile rounding); workspaces V, M, U: {(v_b + m_b + u_b) / 1e6:.0f} MB "
                             "written and read back",
                       extra={"algorithmic_flops": p.flops})



# --- rung 11: Winograd F(2x2, 3x3) with a warp-tiled batched GEMM ---------------------------------
@lru_cache(maxsize=None)
def _wino_filter_t_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd_filter_t(w, UT, K, C):
        """UT[e * C + c, k] = (G g G^T)[e // 4, e % 4] for the 3x3 filter g of (k, c): each
        element's U stored k-major (transposed), so the GEMM reads its A tiles along rows."""
        i = cuda.grid(1)
        if i >= K * C:
            return
        k = i % K  # neighbouring threads: neighbouring k (coalesced stores of UT)
        c = i // K
        g = cuda.local.array((3, 3), float32)
        t = cuda.local.array((4, 3), float32)
        for r in range(3):
            for s in range(3):
                if NHWC:
                    g[r, s] = float32(w[k, r, s, c])
                else:
                    g[r, s] = float32(w[k, c, r, s])
        for s in range(3):  # G g
            t[0, s] = g[0, s]
            t[1, s] = float32(0.5) * (g[0, s] + g[1, s] + g[2, s])
            t[2, s] = float32(0.5) * (g[0, s] - g[1, s] + g[2, s])
            t[3, s] = g[2, s]
        for a in range(4):  # (G g) G^T
            UT[(a * 4) * C + c, k] = t[a, 0]
            UT[(a * 4 + 1) * C + c, k] = float32(0.5) * (t[a, 0] + t[a, 1] + t[a, 2])
            UT[(a * 4 + 2) * C + c, k] = float32(0.5) * (t[a, 0] - t[a, 1] + t[a, 2])
            UT[(a * 4 + 3) * C + c, k] = t[a, 2]

    return conv_winograd_filter_t


@lru_cache(maxsize=None)
def _batched_warptile_kernel(WARPS_M: int, WARPS_N: int, BK: int):
    """Mo[e] (M x Nn) = UT[e]^T (M x Kd) @ Vb[e] (Kd x Nn) for e = blockIdx.z, every operand
    stacked by rows and k-major (UT (E*Kd, M), Vb (E*Kd, Nn), Mo (E*M, Nn), flat).  GEMM rung
    10's main loop: a warp owns 64x32 of Mo, its lanes 8 x 4 of them, each lane two 4x4
    sub-tiles per dimension (8x8), so a k-step is 4 LDS.128 for 64 FFMA; both tiles stored as
    they are read (k-major, 16-byte stores: no transposing store), double-buffered with one
    barrier per k-tile.  32-bit offsets."""
    i32 = int32
    TM = TN = 8
    WM, WN = 8 * TM, 4 * TN  # the warp tile
    SUBM, SUBN = WM // 2, WN // 2
    BM, BN = WARPS_M * WM, WARPS_N * WN
    NT = 32 * WARPS_M * WARPS_N
    ABUF, BBUF = BK * BM, BK * BN
    ASZ, BSZ = 2 * ABUF, 2 * BBUF  # two buffers each
    BM4, BN4 = BM // 4, BN // 4
    NA, NB = BK * BM4 // NT, BK * BN4 // NT  # 16-byte chunks per thread and k-tile
    RA, RB = 4 * NA, 4 * NB
    TMN = TM * TN
    dev = C._jit(device=True, forceinline=True)

    @dev
    def fetch(ut, vb, ra, rb, t, arow, brow, bm, bn, k0, M, Nn, Kd, vec_a, vec_b):
        for s in range(NA):
            v = i32(t + s * NT)
            kr = i32(k0 + i32(v // BM4))
            q = i32(bm + i32(i32(v % BM4) * 4))
            off = i32(i32(i32(arow + kr) * M) + q)
            if kr < Kd and vec_a and q + 3 < M:
                ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = ld4(ut, off)
            else:
                for e in range(4):
                    ra[4 * s + e] = ut[i32(off + e)] if kr < Kd and q + e < M else float32(0)
        for s in range(NB):
            v = i32(t + s * NT)
            kr = i32(k0 + i32(v // BN4))
            q = i32(bn + i32(i32(v % BN4) * 4))
            off = i32(i32(i32(brow + kr) * Nn) + q)
            if kr < Kd and vec_b and q + 3 < Nn:
                rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = ld4(vb, off)
            else:
                for e in range(4):
                    rb[4 * s + e] = vb[i32(off + e)] if kr < Kd and q + e < Nn else float32(0)

    @dev
    def stash(As, Bs, ra, rb, t, buf):
        for s in range(NA):
            v = i32(t + s * NT)
            st4(As, i32(i32(buf * ABUF) + i32(i32(v // BM4) * BM) + i32(i32(v % BM4) * 4)),
                ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3])
        for s in range(NB):
            v = i32(t + s * NT)
            st4(Bs, i32(i32(buf * BBUF) + i32(i32(v // BN4) * BN) + i32(i32(v % BN4) * 4)),
                rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3])

    @dev
    def kblock(As, Bs, acc, rm, rn, abase, bbase):
        for kk in range(BK):
            a0 = i32(abase + kk * BM)
            b0 = i32(bbase + kk * BN)
            rm[0], rm[1], rm[2], rm[3] = ld4(As, a0)
            rm[4], rm[5], rm[6], rm[7] = ld4(As, i32(a0 + SUBM))
            rn[0], rn[1], rn[2], rn[3] = ld4(Bs, b0)
            rn[4], rn[5], rn[6], rn[7] = ld4(Bs, i32(b0 + SUBN))
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += rm[i] * rn[j]

    @C._jit(launch_bounds=(NT, 2))
    def conv_winograd_gemm_tiled(ut, vb, mo, M, Nn, Kd, vec_a, vec_b, vec_c):
        As = cuda.shared.array(ASZ, float32)  # two (BK, BM) tiles of UT: k-major, as in memory
        Bs = cuda.shared.array(BSZ, float32)  # two (BK, BN) tiles of Vb
        ra = cuda.local.array(RA, float32)  # the next k-tile, staged in registers
        rb = cuda.local.array(RB, float32)
        acc = cuda.local.array(TMN, float32)
        rm = cuda.local.array(TM, float32)
        rn = cuda.local.array(TN, float32)
        Mi, Ni, Ki = i32(M), i32(Nn), i32(Kd)
        t = i32(cuda.threadIdx.x)
        e = i32(cuda.blockIdx.z)
        bm = i32(i32(cuda.blockIdx.y) * BM)
        bn = i32(i32(cuda.blockIdx.x) * BN)
        arow = i32(e * Ki)  # this element's first row of UT and Vb
        orow = i32(e * Mi)  # and of Mo
        warp = i32(t // 32)
        lane = i32(t % 32)
        row0 = i32(i32(i32(warp // WARPS_N) * WM) + i32(lane // 4) * 4)
        col0 = i32(i32(i32(warp % WARPS_N) * WN) + i32(lane % 4) * 4)
        for i in range(TMN):
            acc[i] = float32(0)
        n_tiles = i32(i32(Ki + (BK - 1)) // BK)
        fetch(ut, vb, ra, rb, t, arow, arow, bm, bn, i32(0), Mi, Ni, Ki, vec_a, vec_b)
        stash(As, Bs, ra, rb, t, i32(0))
        cuda.syncthreads()
        tile = i32(1)
        while tile < n_tiles:  # fetch tile into registers, multiply tile - 1, stash, one barrier
            fetch(ut, vb, ra, rb, t, arow, arow, bm, bn, i32(tile * BK), Mi, Ni, Ki, vec_a, vec_b)
            cur = i32(i32(tile - 1) & 1)
            kblock(As, Bs, acc, rm, rn, i32(i32(cur * ABUF) + row0), i32(i32(cur * BBUF) + col0))
            stash(As, Bs, ra, rb, t, i32(tile & 1))
            cuda.syncthreads()
            tile = i32(tile + 1)
        cur = i32(i32(n_tiles - 1) & 1)
        kblock(As, Bs, acc, rm, rn, i32(i32(cur * ABUF) + row0), i32(i32(cur * BBUF) + col0))
        for i in range(TM):
            r = i32(bm + row0 + i32((i // 4) * SUBM + i % 4))
            for j4 in range(2):
                q = i32(bn + col0 + i32(j4 * SUBN))
                if r < Mi:
                    off = i32(i32(i32(orow + r) * Ni) + q)
                    if vec_c and q + 3 < Ni:
                        st4(mo, off, acc[i * TN + 4 * j4], acc[i * TN + 4 * j4 + 1], acc[i * TN + 4 * j4 + 2],
                            acc[i * TN + 4 * j4 + 3])
                    else:
                        for e4 in range(4):
                            if q + e4 < Ni:
                                mo[i32(off + e4)] = acc[i * TN + 4 * j4 + e4]

    return conv_winograd_gemm_tiled


@dataclass(frozen=True)
class WinogradTiled(TunableVariant):
    WARPS_M: int = 2
    WARPS_N: int = 4
    BK: int = 8
    block: int = 256

    rung: ClassVar[int] = 11
    name: ClassVar[str] = "winograd_tiled"
    what: ClassVar[str] = (
        "Rung 7's F(2x2, 3x3) with GEMM rung 10's warp-tiled loop for its 16 batched GEMMs: "
        "128x128x8 block tiles, double-buffered, 4 LDS.128 for 64 FFMA a k-step. The filter "
        "transform writes U transposed, so both operand tiles go into shared memory as read, 16 "
        "bytes at a time.")

    def example(self, problem):
        return problem

    @property
    def BM(self) -> int:
        return 64 * self.WARPS_M

    @property
    def BN(self) -> int:
        return 32 * self.WARPS_N

    def tiles(self, p):
        return C._ceil(p.p, 2), C._ceil(p.q, 2)

    def threads(self):
        return 32 * self.WARPS_M * self.WARPS_N

    def shared_bytes(self):
        return 2 * self.BK * (self.BM + self.BN) * 4

    def workspace(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        return {"UT": ((16 * p.c, p.k), "float32"), "V": ((16 * p.c, t), "float32"),
                "M": ((16 * p.k, t), "float32")}

    def gemm_grid(self, p):
        tp, tq = self.tiles(p)
        return C._ceil(p.n * tp * tq, self.BN), C._ceil(p.k, self.BM), 16

    def supports(self, problem):
        p = problem
        if (p.r, p.s, p.stride) != (3, 3, 1):
            raise UnsupportedProblem(f"{self.label}: F(2x2, 3x3) takes 3x3 filters at stride 1; got "
                                     f"{p.r}x{p.s} at stride {p.stride}")
        nt = self.threads()
        if (self.BK * self.BM // 4) % nt or (self.BK * self.BN // 4) % nt:
            raise UnsupportedProblem(f"{self.label}: the {self.BK}x{self.BM} and {self.BK}x{self.BN} tiles must split "
                                     f"into whole 16-byte chunks per thread ({nt} threads)")
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        if 16 * max(p.c, p.k) * max(t, p.k) + 64 > 2**31 - 1:
            raise UnsupportedProblem(f"{self.label}: a workspace would have 2**31 elements or more (32-bit offsets)")
        C._check(self, p, self.gemm_grid(p), nt, self.shared_bytes())
        C._check(self, p, C._ceil(16 * max(p.k, p.c) * t, self.block), self.block)

    def plan(self, problem, bufs):
        p = problem
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        nb = self.block
        return [
            Launch(_wino_input_kernel(p.nhwc), C._ceil(p.c * t, nb), nb,
                   (bufs["x"], bufs["V"], p.n, p.c, p.h, p.w, tp, tq, p.pad)),
            Launch(_wino_filter_t_kernel(p.nhwc), C._ceil(p.k * p.c, nb), nb, (bufs["w"], bufs["UT"], p.k, p.c)),
            Launch(_batched_warptile_kernel(self.WARPS_M, self.WARPS_N, self.BK), self.gemm_grid(p), self.threads(),
                   (bufs["UT"].reshape(-1), bufs["V"].reshape(-1), bufs["M"].reshape(-1), p.k, t, p.c,
                    p.k % 4 == 0, t % 4 == 0, t % 4 == 0)),
            Launch(_wino_output_kernel(p.nhwc), C._ceil(p.k * t, nb), nb,
                   (bufs["M"], bufs["y"], p.n, p.k, p.p, p.q, tp, tq)),
        ]

    def traffic(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        e = p.elem
        v_b, m_b, u_b = 16 * p.c * t * 4.0, 16 * p.k * t * 4.0, 16 * p.k * p.c * 4.0
        x_b, y_b, w_b = p.n * p.c * p.h * p.w * e, p.n * p.k * p.p * p.q * e, p.k * p.c * 9 * e
        dram = x_b + w_b + y_b + 2 * (v_b + m_b + u_b)  # each workspace written once and read once
        l2 = dram + v_b * (C._ceil(p.k, self.BM) - 1) + u_b * (C._ceil(t, self.BN) - 1)
        gemm_flops = 2.0 * 16 * p.k * p.c * t
        return Traffic(flops=gemm_flops, dram_bytes=dram, l2_bytes=l2,
                       smem_bytes=(1 / 8 + 1 / 8) * 4 * gemm_flops / 2, limiter="fma",
                       notes=f"{gemm_flops / p.flops:.2f}x the direct FLOPs; the batched GEMM's k-step is 4 LDS.128 "
                             f"for 64 FFMA; workspaces V, M, U: {(v_b + m_b + u_b) / 1e6:.0f} MB written and read back",
                       extra={"algorithmic_flops": p.flops})


# --- rung 14: Winograd F(4x4, 3x3) ----------------------------------------------------------------
# Lavin & Gray (2016), F(4x4, 3x3): a 6x6 input tile gives a 4x4 output tile with 36 multiplies
# per (tile, c, k) where the direct method does 144 (4x fewer); 36 independent GEMMs.  The larger
# constants (up to 8 in A^T, 5 in B^T, 1/24 in G) cost accuracy: see WinogradF4.what.
_BT4 = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                 [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float32)
_G4 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float32)
_AT4 = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], np.float32)


@lru_cache(maxsize=None)
def _wino4_filter_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd4_filter(w, UT, K, C):
        """UT[e * C + c, k] = (G g G^T)[e // 6, e % 6] for the 3x3 filter g of (k, c), k-major."""
        i = cuda.grid(1)
        if i >= K * C:
            return
        k = i % K
        c = i // K
        G = cuda.const.array_like(_G4)
        g = cuda.local.array((3, 3), float32)
        t = cuda.local.array((6, 3), float32)
        for r in range(3):
            for s in range(3):
                g[r, s] = float32(w[k, r, s, c]) if NHWC else float32(w[k, c, r, s])
        for a in range(6):  # G g
            for s in range(3):
                t[a, s] = G[a, 0] * g[0, s] + G[a, 1] * g[1, s] + G[a, 2] * g[2, s]
        for a in range(6):  # (G g) G^T
            for b in range(6):
                UT[(a * 6 + b) * C + c, k] = t[a, 0] * G[b, 0] + t[a, 1] * G[b, 1] + t[a, 2] * G[b, 2]

    return conv_winograd4_filter


@lru_cache(maxsize=None)
def _wino4_input_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd4_input(x, V, N, C, H, W, TP, TQ, pad):
        """V[e * C + c, t] = (B^T d B)[e // 6, e % 6] for the 6x6 input tile d of (c, tile t)."""
        i = cuda.grid(1)
        T = N * TP * TQ
        if i >= C * T:
            return
        t = i % T
        c = i // T
        tq = t % TQ
        tp = (t // TQ) % TP
        b = t // (TQ * TP)
        BT = cuda.const.array_like(_BT4)
        d = cuda.local.array((6, 6), float32)
        m = cuda.local.array((6, 6), float32)
        for a in range(6):
            ih = 4 * tp - pad + a
            for e in range(6):
                iw = 4 * tq - pad + e
                v = float32(0)
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    v = float32(x[b, ih, iw, c]) if NHWC else float32(x[b, c, ih, iw])
                d[a, e] = v
        for a in range(6):  # B^T d
            for e in range(6):
                acc = float32(0)
                for j in range(6):
                    acc += BT[a, j] * d[j, e]
                m[a, e] = acc
        for a in range(6):  # (B^T d) B
            for e in range(6):
                acc = float32(0)
                for j in range(6):
                    acc += m[a, j] * BT[e, j]
                V[(a * 6 + e) * C + c, t] = acc

    return conv_winograd4_input


@lru_cache(maxsize=None)
def _wino4_output_kernel(NHWC: bool):
    @cuda.jit
    def conv_winograd4_output(Mo, y, N, K, P, Q, TP, TQ):
        """y's 4x4 tile (k, t) = A^T m A, m[a, e] = Mo[(a * 6 + e) * K + k, t]."""
        i = cuda.grid(1)
        T = N * TP * TQ
        if i >= K * T:
            return
        t = i % T
        k = i // T
        tq = t % TQ
        tp = (t // TQ) % TP
        b = t // (TQ * TP)
        AT = cuda.const.array_like(_AT4)
        o = cuda.local.array((4, 6), float32)
        for a in range(4):  # A^T m
            for e in range(6):
                acc = float32(0)
                for j in range(6):
                    acc += AT[a, j] * Mo[(j * 6 + e) * K + k, t]
                o[a, e] = acc
        for a in range(4):  # (A^T m) A
            p = 4 * tp + a
            for e in range(4):
                q = 4 * tq + e
                v = float32(0)
                for j in range(6):
                    v += o[a, j] * AT[e, j]
                if p < P and q < Q:
                    if NHWC:
                        y[b, p, q, k] = v
                    else:
                        y[b, k, p, q] = v

    return conv_winograd4_output


@dataclass(frozen=True)
class WinogradF4(WinogradTiled):
    rung: ClassVar[int] = 14
    name: ClassVar[str] = "winograd_f4"
    what: ClassVar[str] = (
        "F(4x4, 3x3): a 6x6 input tile gives a 4x4 output tile with 36 multiplies where direct "
        "does 144, as 36 batched GEMMs on rung 11's warp-tiled loop. The price is accuracy: the "
        "transforms' larger constants (1/24 in G, 5 in B^T, 8 in A^T) amplify float32 rounding.")

    def tiles(self, p):
        return C._ceil(p.p, 4), C._ceil(p.q, 4)

    def supports(self, problem):
        """F(4x4, 3x3)'s own refusals, each naming the rung to use instead.  What it takes: 3x3
        filters at stride 1, any n, c, k, h, w and padding (partial 4x4 output tiles read zeros
        past the input and store only inside y), float32 or float16 in either layout (float16 is
        computed in float32), while every workspace fits 32-bit offsets.  No refusal for
        accuracy: its error grows with c as the tolerance does (tests/test_conv.py measures both)."""
        p = problem
        if (p.r, p.s) != (3, 3):
            raise UnsupportedProblem(
                f"{self.label}: F(4x4, 3x3) takes 3x3 filters at stride 1 (its transforms are built for a 3x3 "
                f"filter); got {p.r}x{p.s}: use igemm_regblock (rung 6), or in float16 NHWC with c a multiple "
                "of 8 the tensor-core rungs (tc_cp_async and up)")
        if p.stride != 1:
            raise UnsupportedProblem(
                f"{self.label}: F(4x4, 3x3) takes 3x3 filters at stride 1; at stride {p.stride} the 4x4 output "
                "tile's overlapping 6x6 input tiles no longer cover the output, and 3 of 4 outputs would be "
                "computed to be thrown away: use igemm_regblock (rung 6), or in float16 NHWC with c a multiple "
                "of 8 the tensor-core rungs (tc_cp_async and up)")
        nt = self.threads()
        if (self.BK * self.BM // 4) % nt or (self.BK * self.BN // 4) % nt:
            raise UnsupportedProblem(f"{self.label}: the {self.BK}x{self.BM} and {self.BK}x{self.BN} tiles must split "
                                     f"into whole 16-byte chunks per thread ({nt} threads)")
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        if 36 * max(p.c, p.k) * max(t, p.k) + 64 > 2**31 - 1:
            raise UnsupportedProblem(
                f"{self.label}: a workspace of 36 x {max(p.c, p.k)} x {max(t, p.k)} float32 elements would have "
                "2**31 or more (its offsets are 32-bit): use igemm_regblock (rung 6), which needs no workspace")
        C._check(self, p, self.gemm_grid(p), nt, self.shared_bytes())
        C._check(self, p, C._ceil(max(p.c * t, p.k * p.c, p.k * t), self.block), self.block)  # the transforms

    def workspace(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        return {"UT": ((36 * p.c, p.k), "float32"), "V": ((36 * p.c, t), "float32"),
                "M": ((36 * p.k, t), "float32")}

    def gemm_grid(self, p):
        tp, tq = self.tiles(p)
        return C._ceil(p.n * tp * tq, self.BN), C._ceil(p.k, self.BM), 36

    def plan(self, problem, bufs):
        p = problem
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        nb = self.block
        return [
            Launch(_wino4_input_kernel(p.nhwc), C._ceil(p.c * t, nb), nb,
                   (bufs["x"], bufs["V"], p.n, p.c, p.h, p.w, tp, tq, p.pad)),
            Launch(_wino4_filter_kernel(p.nhwc), C._ceil(p.k * p.c, nb), nb, (bufs["w"], bufs["UT"], p.k, p.c)),
            Launch(_batched_warptile_kernel(self.WARPS_M, self.WARPS_N, self.BK), self.gemm_grid(p), self.threads(),
                   (bufs["UT"].reshape(-1), bufs["V"].reshape(-1), bufs["M"].reshape(-1), p.k, t, p.c,
                    p.k % 4 == 0, t % 4 == 0, t % 4 == 0)),
            Launch(_wino4_output_kernel(p.nhwc), C._ceil(p.k * t, nb), nb,
                   (bufs["M"], bufs["y"], p.n, p.k, p.p, p.q, tp, tq)),
        ]

    def traffic(self, p):
        tp, tq = self.tiles(p)
        t = p.n * tp * tq
        e = p.elem
        v_b, m_b, u_b = 36 * p.c * t * 4.0, 36 * p.k * t * 4.0, 36 * p.k * p.c * 4.0
        x_b, y_b, w_b = p.n * p.c * p.h * p.w * e, p.n * p.k * p.p * p.q * e, p.k * p.c * 9 * e
        dram = x_b + w_b + y_b + 2 * (v_b + m_b + u_b)
        l2 = dram + v_b * (C._ceil(p.k, self.BM) - 1) + u_b * (C._ceil(t, self.BN) - 1)
        gemm_flops = 2.0 * 36 * p.k * p.c * t
        return Traffic(flops=gemm_flops, dram_bytes=dram, l2_bytes=l2,
                       smem_bytes=(1 / 8 + 1 / 8) * 4 * gemm_flops / 2, limiter="fma",
                       notes=f"{gemm_flops / p.flops:.2f}x the direct FLOPs (36 products per 4x4 tile instead of "
                             f"144, plus tile rounding); workspaces V, M, U: {(v_b + m_b + u_b) / 1e6:.0f} MB",
                       extra={"algorithmic_flops": p.flops})
