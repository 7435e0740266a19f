"""Rungs 4-6: the implicit GEMM, naive, tiled in shared memory, and register-blocked with
16-byte loads."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int64

from .._vector import load4
from ..base import Launch, TunableVariant, UnsupportedProblem
from . import _common as C
from ._common import to_layout


@lru_cache(maxsize=None)
def _igemm_naive_kernel(NHWC: bool, BX: int, BY: int):
    @cuda.jit
    def conv_igemm_naive(x, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        M = N * P * Q
        tiles_m = (M + BY - 1) // BY
        n = (cuda.blockIdx.x // tiles_m) * BX + cuda.threadIdx.x  # GEMM column: output channel
        m = (cuda.blockIdx.x % tiles_m) * BY + cuda.threadIdx.y  # GEMM row: output pixel
        if m >= M or n >= K:
            return
        q = m % Q
        t = m // Q
        p = t % P
        b = t // P
        acc = float32(0)
        for j in range(C * R * S):  # the GEMM's k loop: decode j into (c, r, s)
            if NHWC:
                c = j % C
                t2 = j // C
                s = t2 % S
                r = t2 // S
            else:
                s = j % S
                t2 = j // S
                r = t2 % R
                c = t2 // R
            ih = p * stride - pad + r
            iw = q * stride - pad + s
            if ih >= 0 and ih < H and iw >= 0 and iw < W:  # A[m, j] is 0 in the padding
                if NHWC:
                    acc += float32(x[b, ih, iw, c]) * float32(w2[n, j])
                else:
                    acc += float32(x[b, c, ih, iw]) * float32(w2[n, j])
        if NHWC:
            y[b, p, q, n] = acc
        else:
            y[b, n, p, q] = acc

    return conv_igemm_naive


@dataclass(frozen=True)
class IgemmNaive(TunableVariant):
    BX: int = 32
    BY: int = 8

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "igemm_naive"
    what: ClassVar[str] = (
        "The implicit GEMM view (M = N*P*Q pixels, N = K channels, K = C*R*S taps) with no "
        "buffer: one thread per (pixel, channel) decodes each reduction index into (c, r, s) and "
        "gathers x on the fly. Lanes take neighbouring channels, so the gathered x value is a "
        "broadcast.")

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return C._ceil(m, self.BY) * C._ceil(n, self.BX)

    def supports(self, problem):
        C._check(self, problem, self.grid(problem), (self.BX, self.BY))

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        return [Launch(_igemm_naive_kernel(p.nhwc, self.BX, self.BY), self.grid(p), (self.BX, self.BY),
                       (bufs["x"], C._view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        # per warp and tap: x one broadcast sector, w 32 rows -> 32 sectors; L1 holds w rows for
        # ~8 taps (a 32-byte sector) while the warp walks j
        l2 = m * n * k / 32 * (32 + 32 * 32 / (32 / e)) / 1.0
        return C._traffic(p, l2 / 4, None, "l1/lsu",
                        "2 global loads per FMA plus an integer decode of j; w rows strided by C*R*S")


# --- rung 5: implicit GEMM tiled in shared memory ---------------------------------------------------
@lru_cache(maxsize=None)
def _igemm_smem_kernel(NHWC: bool, T: int):
    TP1 = T + 1  # B is stored transposed: one word of padding keeps the transposing stores conflict-free

    @cuda.jit
    def conv_igemm_smem(x, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        As = cuda.shared.array((T, T), float32)  # A[m0 + row, j0 + col], gathered from x
        Bs = cuda.shared.array((T, TP1), float32)  # B[j0 + row, n0 + col] = w2[n0 + col, j0 + row]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        M = N * P * Q
        CRS = C * R * S
        m0 = cuda.blockIdx.y * T
        n0 = cuda.blockIdx.x * T
        # the pixel of A-row m0 + ty (loaded by this thread for every k tile): decode once
        am = m0 + ty
        aq = am % Q
        at = am // Q
        ap = at % P
        ab = at // P
        acc = float32(0)
        for j0 in range(0, CRS, T):
            j = j0 + tx  # neighbouring lanes: neighbouring taps (contiguous c in NHWC, s in NCHW)
            v = float32(0)
            if am < M and j < CRS:
                if NHWC:
                    c = j % C
                    t2 = j // C
                    s = t2 % S
                    r = t2 // S
                else:
                    s = j % S
                    t2 = j // S
                    r = t2 % R
                    c = t2 // R
                ih = ap * stride - pad + r
                iw = aq * stride - pad + s
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = float32(x[ab, ih, iw, c])
                    else:
                        v = float32(x[ab, c, ih, iw])
            As[ty, tx] = v
            u = float32(0)  # lanes walk along a row of w2 (coalesced); stored transposed
            if n0 + ty < K and j < CRS:
                u = float32(w2[n0 + ty, j])
            Bs[tx, ty] = u
            cuda.syncthreads()
            for kk in range(T):
                acc += As[ty, kk] * Bs[kk, tx]
            cuda.syncthreads()
        n = n0 + tx
        if am < M and n < K:
            if NHWC:
                y[ab, ap, aq, n] = acc
            else:
                y[ab, n, ap, aq] = acc

    return conv_igemm_smem


@dataclass(frozen=True)
class IgemmSmem(TunableVariant):
    tile: int = 16

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "igemm_smem"
    what: ClassVar[str] = (
        "GEMM rung 3's shared-memory tiling on the implicit GEMM: a block gathers a T x T tile of "
        "A from x (the im2col happens in shared memory, never in DRAM) and a T x T tile of w, so "
        "each global value is loaded once per block instead of once per thread.")

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return C._ceil(n, self.tile), C._ceil(m, self.tile)

    def supports(self, problem):
        T = self.tile
        C._check(self, problem, self.grid(problem), (T, T), (T * T + T * (T + 1)) * 4)

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        T = self.tile
        return [Launch(_igemm_smem_kernel(p.nhwc, T), self.grid(p), (T, T),
                       (bufs["x"], C._view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        T = self.tile
        l2 = (m * k * C._ceil(n, T) + k * n * C._ceil(m, T)) * e + m * n * e
        return C._traffic(p, l2, 2 * 4 * m * n * k + (l2 - m * n * e) * 4 / e, "smem",
                        "global loads / T; 2 shared loads per FMA bound it (as GEMM rung 3)")


# --- rung 6: register-blocked, 16-byte loads --------------------------------------------------------
@cuda.jit(device=True)
def _load4_scalar(arr, i, j):
    """Four consecutive elements as float32, one load each (float16, or no 16-byte alignment)."""
    return float32(arr[i, j]), float32(arr[i, j + 1]), float32(arr[i, j + 2]), float32(arr[i, j + 3])


@lru_cache(maxsize=None)
def _igemm_regblock_kernel(NHWC: bool, VEC: bool, BM: int, BN: int, BK: int, TM: int, TN: int):
    NT = (BM // TM) * (BN // TN)
    TCOLS = BN // TN
    TMN = TM * TN
    PAD = 4
    BMP = BM + PAD
    BK4 = BK // 4
    ld4 = load4 if VEC else _load4_scalar  # load4 is float32-only: float16 takes four scalar loads

    @cuda.jit
    def conv_igemm_regblock(x, x2, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad, vec_x, vec_w):
        AsT = cuda.shared.array((BK, BMP), float32)  # A tile transposed (k-major), padded
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        tc = cuda.local.array(4, int64)  # (c, r, s) of this thread's 4 taps of A
        tr = cuda.local.array(4, int64)
        ts = cuda.local.array(4, int64)
        t = cuda.threadIdx.x
        M = N * P * Q
        CRS = C * R * S
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        t_col = t % TCOLS
        t_row = t // TCOLS
        for i in range(TMN):
            acc[i] = float32(0)
        # this thread's row of the A tile and its 4 taps: BM * BK / 4 == NT, so one 4-vector of A
        # per thread and k step, always the same output pixel: decode the pixel once, and keep the
        # taps as (c, r, s) counters advanced by BK per step instead of dividing j every time
        rr = t // BK4
        qq = (t % BK4) * 4
        m = m0 + rr
        m_ok = m < M
        oq = m % Q
        ot = m // Q
        op = ot % P
        ob = ot // P
        hb = op * stride - pad
        wb = oq * stride - pad
        for e in range(4):
            je = qq + e
            if NHWC:  # (r, s, c), c fastest
                tc[e] = je % C
                ts[e] = (je // C) % S
                tr[e] = je // (C * S)
            else:  # (c, r, s), s fastest
                ts[e] = je % S
                tr[e] = (je // S) % R
                tc[e] = je // (S * R)
        vec = NHWC and vec_x  # C % 4 == 0: the 4 taps are 4 channels of one pixel
        for j0 in range(0, CRS, BK):
            j = j0 + qq
            a0 = float32(0)
            a1 = float32(0)
            a2 = float32(0)
            a3 = float32(0)
            if m_ok:
                if vec:
                    if j < CRS:
                        ih = hb + tr[0]
                        iw = wb + ts[0]
                        if ih >= 0 and ih < H and iw >= 0 and iw < W:
                            a0, a1, a2, a3 = ld4(x2, (ob * H + ih) * W + iw, tc[0])
                else:
                    for e in range(4):
                        u = float32(0)
                        if j + e < CRS:
                            ih = hb + tr[e]
                            iw = wb + ts[e]
                            if ih >= 0 and ih < H and iw >= 0 and iw < W:
                                if NHWC:
                                    u = float32(x[ob, ih, iw, tc[e]])
                                else:
                                    u = float32(x[ob, tc[e], ih, iw])
                        if e == 0:
                            a0 = u
                        elif e == 1:
                            a1 = u
                        elif e == 2:
                            a2 = u
                        else:
                            a3 = u
            AsT[qq, rr] = a0
            AsT[qq + 1, rr] = a1
            AsT[qq + 2, rr] = a2
            AsT[qq + 3, rr] = a3
            for e in range(4):  # the next step's taps: j + BK (a constant trip count keeps them in registers)
                if NHWC:
                    tc[e] += BK
                    while tc[e] >= C:
                        tc[e] -= C
                        ts[e] += 1
                        if ts[e] == S:
                            ts[e] = 0
                            tr[e] += 1
                else:
                    ts[e] += BK
                    while ts[e] >= S:
                        ts[e] -= S
                        tr[e] += 1
                        if tr[e] == R:
                            tr[e] = 0
                            tc[e] += 1
            # B: 4 consecutive taps of one filter (a row of w2): one 16-byte load when C*R*S % 4 == 0
            for v in range(t, BN * BK4, NT):
                nn = v // BK4
                qb = (v % BK4) * 4
                n = n0 + nn
                jb = j0 + qb
                b0 = float32(0)
                b1 = float32(0)
                b2 = float32(0)
                b3 = float32(0)
                if n < K:
                    if vec_w and jb < CRS:
                        b0, b1, b2, b3 = ld4(w2, n, jb)
                    else:
                        if jb < CRS:
                            b0 = float32(w2[n, jb])
                        if jb + 1 < CRS:
                            b1 = float32(w2[n, jb + 1])
                        if jb + 2 < CRS:
                            b2 = float32(w2[n, jb + 2])
                        if jb + 3 < CRS:
                            b3 = float32(w2[n, jb + 3])
                Bs[qb, nn] = b0
                Bs[qb + 1, nn] = b1
                Bs[qb + 2, nn] = b2
                Bs[qb + 3, nn] = b3
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    reg_m[i] = AsT[kk, t_row * TM + i]
                for jn in range(TN):
                    reg_n[jn] = Bs[kk, t_col * TN + jn]
                for i in range(TM):  # outer product: TM + TN shared loads feed TM * TN FMAs
                    for jn in range(TN):
                        acc[i * TN + jn] += reg_m[i] * reg_n[jn]
            cuda.syncthreads()
        for i in range(TM):
            m = m0 + t_row * TM + i
            if m < M:
                oq = m % Q
                ot = m // Q
                op = ot % P
                ob = ot // P
                for jn in range(TN):
                    n = n0 + t_col * TN + jn
                    if n < K:
                        if NHWC:
                            y[ob, op, oq, n] = acc[i * TN + jn]
                        else:
                            y[ob, n, op, oq] = acc[i * TN + jn]

    return conv_igemm_regblock


@dataclass(frozen=True)
class IgemmRegblock(TunableVariant):
    BM: int = 128
    BN: int = 64
    BK: int = 8
    TM: int = 8
    TN: int = 4

    rung: ClassVar[int] = 6
    name: ClassVar[str] = "igemm_regblock"
    what: ClassVar[str] = (
        "GEMM rungs 5-6 on the implicit GEMM: a 128x64 block tile, 8x4 outputs a thread as outer "
        "products, A stored transposed. In NHWC with c % 4 == 0 four consecutive taps are four "
        "channels of one pixel, so the gather is one 16-byte load: the layout decides whether it "
        "vectorizes.")

    def example(self, problem):
        return to_layout(problem, "NHWC")

    def threads(self):
        return (self.BM // self.TM) * (self.BN // self.TN)

    def shared_bytes(self):
        return self.BK * (self.BM + 4 + self.BN) * 4

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return C._ceil(n, self.BN), C._ceil(m, self.BM)

    def supports(self, problem):
        if self.BM % self.TM or self.BN % self.TN or self.BK % 4:
            raise UnsupportedProblem(f"{self.label}: BM, BN must be multiples of TM, TN and BK of 4")
        if self.BM * self.BK // 4 != self.threads() or self.BN * self.BK // 4 > self.threads():
            raise UnsupportedProblem(f"{self.label}: the A tile must be one 4-vector per thread "
                                     f"(BM*BK/4 = {self.BM * self.BK // 4} != {self.threads()} threads) and "
                                     "the B tile at most one")
        C._check(self, problem, self.grid(problem), self.threads(), self.shared_bytes())

    def vectorized(self, p) -> tuple[bool, bool]:
        """(x, w) take 16-byte loads: float32, and (for x) NHWC with c % 4 == 0."""
        f32 = p.dtype == "float32"
        return f32 and p.nhwc and p.c % 4 == 0, f32 and (p.c * p.r * p.s) % 4 == 0

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        vx, vw = self.vectorized(p)
        kern = _igemm_regblock_kernel(p.nhwc, p.dtype == "float32", self.BM, self.BN, self.BK, self.TM, self.TN)
        x2 = C._view2d(bufs["x"], p.n * p.h * p.w, p.c) if p.nhwc else C._view2d(bufs["x"], p.n * p.c * p.h, p.w)
        return [Launch(kern, self.grid(p), self.threads(),
                       (bufs["x"], x2, C._view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad, vx, vw))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        l2 = (m * k * C._ceil(n, self.BN) + k * n * C._ceil(m, self.BM)) * e + m * n * e
        vx, vw = self.vectorized(p)
        smem = (1 / self.TM + 1 / self.TN) * 4 * m * n * k + (l2 - m * n * e) * 4 / e
        return C._traffic(p, l2, smem, "fma",
                        f"{1 / self.TM + 1 / self.TN:.2f} shared loads per FMA; 16-byte loads of x: "
                        f"{'yes' if vx else 'no'}, of w: {'yes' if vw else 'no'}; the gather's integer "
                        "decode costs issue slots the GEMM does not pay")

