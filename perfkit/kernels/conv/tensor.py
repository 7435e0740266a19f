"""Rungs 8-10: the implicit GEMM on the tensor cores (float16 in, float32 accumulation), from rung 8's
2-byte gathers to 16-byte NHWC chunks in filter-position order and ldmatrix fragments."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, int64, uint32
from numba.types import float16

from ... import backend, occupancy, specs
from .._ptx import (cp_async16_off_zfill, cp_async_commit, cp_async_wait, frag_a, frag_b, frag_c,  # and their
                    ld16_u32_off, ldmatrix_x4_off, mma_16816, mma_16816_u32, pack_h2, st16_u32_off,  # simulator
                    st_u32_off)  # twins
from ..base import Launch, TunableVariant, UnsupportedProblem
from . import _common as C
from ._common import to_layout


@lru_cache(maxsize=None)
def _tensor_core_kernel(NHWC: bool, WARPS_M: int, WARPS_N: int, NTILES: int):
    BM = 16 * WARPS_M
    BN = 8 * NTILES * WARPS_N
    BK = 16
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    NACC = NTILES * 4
    ROWS = BM * BK // NT  # rows of the A tile each thread gathers per k step
    RSTEP = NT // BK

    @cuda.jit
    def conv_tensor_core(x, w2, y, N, C, H, W, K, R, S, P, Q, stride, pad):
        As = cuda.shared.array((BM, BK), float16)  # gathered A tile (output pixels x taps)
        Bs = cuda.shared.array((BK, BN), float16)  # B tile: taps x output channels
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's mma only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        acc = cuda.local.array(NACC, float32)
        fa = cuda.local.array(8, float16)
        fb = cuda.local.array(4, float16)
        pb = cuda.local.array(ROWS, int64)  # batch index of each gathered row (-1: past the end)
        ph = cuda.local.array(ROWS, int64)  # its input row and column at tap (0, 0)
        pw = cuda.local.array(ROWS, int64)
        t = cuda.threadIdx.x
        lane = t % 32
        warp = t // 32
        wm = (warp // WARPS_N) * 16
        wn = (warp % WARPS_N) * (8 * NTILES)
        M = N * P * Q
        CRS = C * R * S
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        for i in range(NACC):
            acc[i] = float32(0)
        # this thread's part of the A tile: column qq (one tap per k step) of ROWS rows (output
        # pixels) NT / BK apart.  Decode the pixels once; keep the tap as (c, r, s) counters
        # advanced by BK per step: no integer division inside the k loop.
        qq = t % BK
        for i in range(ROWS):
            m = m0 + t // BK + i * RSTEP
            pq = m % (P * Q)
            pb[i] = m // (P * Q) if m < M else -1  # -1: a row past the end of y
            ph[i] = (pq // Q) * stride - pad
            pw[i] = (pq % Q) * stride - pad
        if NHWC:  # (r, s, c), c fastest
            tc = qq % C
            ts = (qq // C) % S
            tr = qq // (C * S)
        else:  # (c, r, s), s fastest
            ts = qq % S
            tr = (qq // S) % R
            tc = qq // (S * R)
        for j0 in range(0, CRS, BK):
            j_ok = j0 + qq < CRS
            for i in range(ROWS):
                v = float16(0)
                ih = ph[i] + tr
                iw = pw[i] + ts
                if j_ok and pb[i] >= 0 and ih >= 0 and ih < H and iw >= 0 and iw < W:
                    if NHWC:
                        v = x[pb[i], ih, iw, tc]
                    else:
                        v = x[pb[i], tc, ih, iw]
                As[t // BK + i * RSTEP, qq] = v
            if NHWC:  # the next step's tap: j + BK
                tc += BK
                while tc >= C:
                    tc -= C
                    ts += 1
                    if ts == S:
                        ts = 0
                        tr += 1
            else:
                ts += BK
                while ts >= S:
                    ts -= S
                    tr += 1
                    if tr == R:
                        tr = 0
                        tc += 1
            for idx in range(t, BK * BN, NT):
                nn = idx // BK  # lanes walk along a row of w2 (coalesced)
                qq = idx % BK
                u = float16(0)
                if n0 + nn < K and j0 + qq < CRS:
                    u = w2[n0 + nn, j0 + qq]
                Bs[qq, nn] = u
            cuda.syncthreads()
            for i in range(8):
                r, q = frag_a(lane, i)
                fa[i] = As[wm + r, q]
            for nt in range(NTILES):
                for i in range(4):
                    r, q = frag_b(lane, i)
                    fb[i] = Bs[r, wn + nt * 8 + q]
                acc[nt * 4], acc[nt * 4 + 1], acc[nt * 4 + 2], acc[nt * 4 + 3] = mma_16816(
                    fa[0], fa[1], fa[2], fa[3], fa[4], fa[5], fa[6], fa[7], fb[0], fb[1], fb[2], fb[3],
                    acc[nt * 4], acc[nt * 4 + 1], acc[nt * 4 + 2], acc[nt * 4 + 3], scr_a, scr_b)
            cuda.syncthreads()
        for nt in range(NTILES):
            for i in range(4):
                r, q = frag_c(lane, i)
                m = m0 + wm + r
                n = n0 + wn + nt * 8 + q
                if m < M and n < K:
                    oq = m % Q
                    ot = m // Q
                    op = ot % P
                    ob = ot // P
                    if NHWC:
                        y[ob, op, oq, n] = acc[nt * 4 + i]
                    else:
                        y[ob, n, op, oq] = acc[nt * 4 + i]

    return conv_tensor_core


@dataclass(frozen=True)
class TensorCore(TunableVariant):
    WARPS_M: int = 4
    WARPS_N: int = 2
    NTILES: int = 4

    rung: ClassVar[int] = 8
    name: ClassVar[str] = "tensor_core"
    what: ClassVar[str] = (
        "The implicit GEMM on the tensor cores: float16 x and w, float32 accumulation. Each block "
        "gathers a 64x16 tile of A from x and a 16x64 tile of B from w into shared memory, and "
        "each warp issues mma.sync.m16n8k16 on fragments read from there.")

    def example(self, problem):
        return to_layout(problem, "NHWC", "float16")

    def threads(self):
        return 32 * self.WARPS_M * self.WARPS_N

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return C._ceil(n, 8 * self.NTILES * self.WARPS_N), C._ceil(m, 16 * self.WARPS_M)

    def shared_bytes(self):
        return (16 * self.WARPS_M * 16 + 16 * 8 * self.NTILES * self.WARPS_N) * 2

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")
        if (16 * self.WARPS_M * 16) % self.threads() or self.threads() % 16:
            raise UnsupportedProblem(f"{self.label}: the 16-wide A tile must split into whole rows per thread "
                                     f"({16 * self.WARPS_M} x 16 over {self.threads()} threads)")
        C._check(self, problem, self.grid(problem), self.threads(), self.shared_bytes())

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        kern = _tensor_core_kernel(p.nhwc, self.WARPS_M, self.WARPS_N, self.NTILES)
        return [Launch(kern, self.grid(p), self.threads(),
                       (bufs["x"], C._view2d(bufs["w"], n, k), bufs["y"], p.n, p.c, p.h, p.w, p.k, p.r, p.s,
                        p.p, p.q, p.stride, p.pad))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        BM, BN = 16 * self.WARPS_M, 8 * self.NTILES * self.WARPS_N
        l2 = (m * k * C._ceil(n, BN) + k * n * C._ceil(m, BM)) * 2 + m * n * 2
        return C._traffic(p, l2, (l2 - m * n * 2) * 2 + m * n * k / 8 * 2 * 2, "l2/smem",
                        "tensor-core math is ~15x the FP32 rate; an element-wise gather into a 64x64 "
                        "tile, without ldmatrix or cp.async, leaves it bound by operand traffic",
                        peak="tensor.fp16")



# --- rungs 9-10: the tensor-core sub-ladder (NHWC, 16-byte chunks) ---------------------------------
@lru_cache(maxsize=None)
def _tc_conv_kernel(WARPS_M: int, WARPS_N: int, MT: int, NT8: int, BK: int, LDSM: bool, STAGES: int,
                    EPI: bool):
    """float16 NHWC implicit GEMM on mma.m16n8k16 (rungs 9-10), GEMM rungs 13-14's design with
    the implicit GEMM's operands.  A block of WARPS_M x WARPS_N warps owns a (BM, BN) tile of
    the (M, K) output; each warp MT x NT8 mma tiles of 16x8.

    The reduction runs in filter-position order, as CUTLASS's optimized iterators do: for each
    tap (r, s), the channels in k-tiles of BK; so a k-tile of A is BK consecutive channels of one
    input pixel per row: 16-byte chunks (8 channels) of x viewed as (N*H*W, C), C % 8 == 0.  A
    thread owns LA rows of the A tile (RA rows apart) at one chunk column; before the k-loop it
    decodes each row's pixel once into a 32-bit offset of its tap-(0, 0) input pixel and two
    validity masks (bit r: row inside the input at filter row r; bit s likewise for columns);
    at each new tap the row predicates are one AND of mask bits, and the offsets move by a
    constant (C per s, (W - S + 1) * C per r).  B is w viewed (K, R*S*C) and read along its
    rows (K-contiguous, no transpose), stored (BN, BK): the mma's B operand is column-major, so
    a row of the tile is a column of B.  ``LDSM``: both tiles XOR-swizzled (16-byte chunk c of
    row r at c ^ (r / RPL mod CPR)) and fragments by ldmatrix.x4 (non-transposed for both: A
    rows are pixels, B rows output channels, both k-contiguous).  ``STAGES`` > 1: cp.async into a
    ring of STAGES tiles, STAGES - 1 in flight, one barrier per k-tile; a chunk in the padding,
    past M or K, or past C copies 0 of its 16 bytes (the copy zero-fills: the predicate becomes
    the copy size).  ``EPI``: a block inside M and K (K % 8 == 0) stages each warp's tile of y as
    float16 in shared memory (warp-private: the first half of the warps in the A ring, the rest
    in the B ring), two halves packed per 4-byte store, each row's 16-byte chunks XOR-swizzled by
    the row (conflict-free stores and reloads), and writes it back 16 bytes (8 channels of one
    pixel) per store; edge blocks store one half at a time."""
    i32 = int32
    BM, BN = 16 * MT * WARPS_M, 8 * NT8 * WARPS_N
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    KS = BK // 16
    CPR = BK // 8  # 16-byte chunks per tile row (A and B alike)
    RPL = max(8 // CPR, 1)  # tile rows per 128-byte line
    LA, LB = BM * CPR // NT, BN * CPR // NT  # chunks per thread (supports: whole rows of threads)
    RA = NT // CPR  # rows between a thread's chunks
    NACC = MT * NT8 * 4
    NFA, NFB, NRA, NRB = MT * 8, NT8 * 4, MT * 4, NT8 * 2
    NBP = max(NT8 // 2, 1)
    NBO = KS * NBP  # B ldmatrix addresses: one per k-step and pair of n8 tiles
    NU = 4 * (LA + LB)
    S_ = STAGES
    ASH, BSH = S_ * BM, S_ * BN  # rows of the A and B rings
    ASTAGE, BSTAGE = BM * BK, BN * BK  # elements of one stage
    WAIT = max(STAGES - 2, 0)
    WT = 16 * MT * 8 * NT8  # halves of one warp's tile of y
    WCPR = NT8  # its 16-byte chunks per row (8 * NT8 halves)
    WCH = WT // 8 // 32  # chunks per lane
    HALF = max(WARPS // 2, 1)
    dev = C._jit(device=True, forceinline=True)

    @dev
    def phys(r, ch):  # physical chunk of logical chunk ch of tile row r
        return i32(ch ^ i32(i32(r // RPL) % CPR)) if LDSM else ch

    @dev
    def compute(As, Bs, acc, fa, fb, ra, rb, wm, wn, lane, aoff, boff, scr_a, scr_b, scr_l, stage):
        sta = i32(stage * ASTAGE)
        stb = i32(stage * BSTAGE)
        for ks in range(KS):
            for mt in range(MT):
                if LDSM:
                    ra[mt * 4], ra[mt * 4 + 1], ra[mt * 4 + 2], ra[mt * 4 + 3] = ldmatrix_x4_off(
                        As, i32(i32(sta + aoff[ks]) + i32(mt * (16 * BK))), scr_l)
                else:
                    for i in range(8):
                        fr, fc = frag_a(lane, i)
                        fa[mt * 8 + i] = As[stage * BM + wm + mt * 16 + fr, ks * 16 + fc]
            for np_ in range(NBP if LDSM else NT8):
                if LDSM:  # two n8 tiles per ldmatrix.x4: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, ...)
                    rb[np_ * 4], rb[np_ * 4 + 1], rb[np_ * 4 + 2], rb[np_ * 4 + 3] = ldmatrix_x4_off(
                        Bs, i32(stb + boff[ks * NBP + np_]), scr_l)
                else:
                    for i in range(4):
                        fr, fc = frag_b(lane, i)  # (k, n) of the fragment: Bs is (n, k)
                        fb[np_ * 4 + i] = Bs[stage * BN + wn + np_ * 8 + fc, ks * 16 + fr]
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    if LDSM:
                        q = (nt // 2) * 4 + (nt % 2) * 2
                        acc[o], acc[o + 1], acc[o + 2], acc[o + 3] = mma_16816_u32(
                            ra[mt * 4], ra[mt * 4 + 1], ra[mt * 4 + 2], ra[mt * 4 + 3], rb[q], rb[q + 1],
                            acc[o], acc[o + 1], acc[o + 2], acc[o + 3], scr_a, scr_b)
                    else:
                        f = mt * 8
                        g = nt * 4
                        acc[o], acc[o + 1], acc[o + 2], acc[o + 3] = mma_16816(
                            fa[f], fa[f + 1], fa[f + 2], fa[f + 3], fa[f + 4], fa[f + 5], fa[f + 6], fa[f + 7],
                            fb[g], fb[g + 1], fb[g + 2], fb[g + 3], acc[o], acc[o + 1], acc[o + 2], acc[o + 3],
                            scr_a, scr_b)

    @dev
    def tap_rows(mh, mw, r, s):  # bit i: this thread's A row i sees the input at tap (r, s)
        pa = i32(0)
        for i in range(LA):
            pa |= i32(i32(i32(mh[i] >> r) & i32(mw[i] >> s) & 1) << i)
        return pa

    @dev
    def load_async(x2, w2, As, Bs, stage, xoff, toff, c0, jb, pa, pb, ca, sa0, goff_b, RSC, Ci):
        """cp.async of this thread's chunks of one k-tile into ``stage``: 16 bytes where the chunk
        is inside x (w), 0 (zero-filled, from an in-bounds address) where it is not."""
        cok = c0 + ca * 8 < Ci
        for i in range(LA):
            ok = cok and (pa >> i) & 1
            cp_async16_off_zfill(As, i32(i32(stage * ASTAGE) + i32(sa0 + i * (RA * BK))), x2,
                                 i32(i32(xoff[i] + toff) + i32(c0 + ca * 8)) if ok else i32(0), 16 if ok else 0)
        for i in range(LB):
            ok = cok and (pb >> i) & 1
            cp_async16_off_zfill(Bs, i32(i32(stage * BSTAGE) + i32(sa0 + i * (RA * BK))), w2,
                                 i32(goff_b + i32(i * RA) * RSC + jb) if ok else i32(0), 16 if ok else 0)

    @dev
    def advance(c0, jb, s, r, toff, Ci, Si, inc_r):
        """The next k-tile: BK more channels, or the next tap (pointer increments, no division)."""
        c0 = i32(c0 + BK)
        jb = i32(jb + BK)
        if c0 >= Ci:
            jb = i32(jb - c0 + Ci)
            c0 = i32(0)
            s = i32(s + 1)
            toff = i32(toff + Ci)
            if s == Si:
                s = i32(0)
                r = i32(r + 1)
                toff = i32(toff + inc_r - Ci)
        return c0, jb, s, r, toff

    @C._jit(launch_bounds=NT)
    def conv_tc(x2, w2, y1, y2, M, K, Cc, H, W, P, Q, R, S, stride, pad, vec_y):
        As = cuda.shared.array((ASH, BK), float16)  # STAGES x (BM, BK): pixels x channels of one tap
        Bs = cuda.shared.array((BSH, BK), float16)  # STAGES x (BN, BK): output channels x the same taps
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's twins only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        scr_l = cuda.shared.array((WARPS, 32, 2), int32)
        acc = cuda.local.array(NACC, float32)
        fa = cuda.local.array(NFA, float16)
        fb = cuda.local.array(NFB, float16)
        ra = cuda.local.array(NRA, uint32)
        rb = cuda.local.array(NRB, uint32)
        ru = cuda.local.array(NU, uint32)
        xoff = cuda.local.array(LA, int32)  # each A row's tap-(0, 0) pixel, as an element offset
        mh = cuda.local.array(LA, int32)    # bit r: that row's input row is inside x at filter row r
        mw = cuda.local.array(LA, int32)    # bit s: likewise its input column at filter column s
        aoff = cuda.local.array(KS, int32)
        boff = cuda.local.array(NBO, int32)
        Mi, Ki, Ci, Hi, Wi = i32(M), i32(K), i32(Cc), i32(H), i32(W)
        Si = i32(S)
        PQ = i32(i32(P) * i32(Q))
        t = i32(cuda.threadIdx.x)
        lane = i32(t % 32)
        warp = i32(t // 32)
        wm = i32(i32(warp // WARPS_N) * (16 * MT))
        wn = i32(i32(warp % WARPS_N) * (8 * NT8))
        bm = i32(i32(cuda.blockIdx.y) * BM)
        bn = i32(i32(cuda.blockIdx.x) * BN)
        for i in range(NACC):
            acc[i] = float32(0)
        if LDSM:  # this lane's ldmatrix row addresses (tile rows of a lane keep its swizzle: see phys)
            l16 = i32(lane % 16)
            hi = i32(lane // 16)
            l8 = i32(lane % 8)
            for ks in range(KS):
                aoff[ks] = i32(i32(i32(wm + l16) * BK) + i32(phys(l16, i32(ks * 2 + hi)) * 8))
                for np_ in range(NBP):
                    brow = i32(i32(wn + np_ * 16) + i32(hi * 8 + l8))
                    bch = i32(ks * 2 + i32(i32(lane // 8) % 2))
                    boff[ks * NBP + np_] = i32(i32(brow * BK) + i32(phys(l8, bch) * 8))
        # this thread's chunks: column ca of rows ra0 + i * RA (A) and rb0 + i * RA (B)
        ra0 = i32(t // CPR)
        ca = i32(t % CPR)
        sa0 = i32(i32(ra0 * BK) + i32(phys(ra0, ca) * 8))  # the rows RA apart share the swizzle
        for i in range(LA):
            m = i32(bm + i32(ra0 + i * RA))
            b = i32(m // PQ)
            pq = i32(m - b * PQ)
            op = i32(pq // i32(Q))
            hb = i32(i32(op * i32(stride)) - i32(pad))
            wb = i32(i32(i32(pq - op * i32(Q)) * i32(stride)) - i32(pad))
            xoff[i] = i32(i32(i32(i32(b * Hi) + hb) * Wi + wb) * Ci)
            bits_h = i32(0)
            bits_w = i32(0)
            if m < Mi:
                for r in range(R):
                    if hb + r >= 0 and hb + r < Hi:
                        bits_h |= i32(1 << r)
                for s in range(S):
                    if wb + s >= 0 and wb + s < Wi:
                        bits_w |= i32(1 << s)
            mh[i] = bits_h
            mw[i] = bits_w
        RSC = i32(i32(R) * i32(Si * Ci))
        goff_b = i32(i32(i32(bn + ra0) * RSC) + ca * 8)  # B chunk 0: row bn + ra0 of w2
        pb = i32(0)  # bit i: B row bn + ra0 + i * RA is an output channel
        for i in range(LB):
            if bn + ra0 + i * RA < Ki:
                pb |= i32(1 << i)
        inc_r = i32(i32(Wi - Si + 1) * Ci)  # the pixel offset from tap (r, S - 1) to (r + 1, 0)
        r = i32(0)
        s = i32(0)
        c0 = i32(0)
        toff = i32(0)  # (r * W + s) * C: the tap's pixel shift
        jb = i32(0)    # (r * S + s) * C + c0: the k-tile's first column of w2
        pa = i32(0)
        n_k = i32(i32(R) * Si * i32(i32(Ci + (BK - 1)) // BK))
        kt = i32(0)
        if STAGES > 1:
            for st in range(STAGES - 1):  # prologue: STAGES - 1 k-tiles in flight
                if st < n_k:
                    if c0 == 0:
                        pa = tap_rows(mh, mw, r, s)
                    load_async(x2, w2, As, Bs, st, xoff, toff, c0, jb, pa, pb, ca, sa0, goff_b, RSC, Ci)
                    c0, jb, s, r, toff = advance(c0, jb, s, r, toff, Ci, Si, inc_r)
                cp_async_commit()
            rs = i32(0)           # the stage read this k-tile
            ws = i32(STAGES - 1)  # the stage written (k-tile kt + STAGES - 1)
            while kt < n_k:
                cp_async_wait(WAIT)  # k-tile kt has landed (this thread's copies) ...
                cuda.syncthreads()   # ... and everyone's; the stage read at kt - 1 is free
                if kt + (STAGES - 1) < n_k:
                    if c0 == 0:
                        pa = tap_rows(mh, mw, r, s)
                    load_async(x2, w2, As, Bs, ws, xoff, toff, c0, jb, pa, pb, ca, sa0, goff_b, RSC, Ci)
                    c0, jb, s, r, toff = advance(c0, jb, s, r, toff, Ci, Si, inc_r)
                cp_async_commit()
                compute(As, Bs, acc, fa, fb, ra, rb, wm, wn, lane, aoff, boff, scr_a, scr_b, scr_l, rs)
                rs = i32(rs + 1)
                if rs == STAGES:
                    rs = i32(0)
                ws = i32(ws + 1)
                if ws == STAGES:
                    ws = i32(0)
                kt = i32(kt + 1)
            cp_async_wait(0)
        else:
            while kt < n_k:  # one stage: through registers, two barriers per k-tile
                if c0 == 0:  # a new tap: which of this thread's rows see the input there
                    pa = tap_rows(mh, mw, r, s)
                cok = c0 + ca * 8 < Ci
                for i in range(LA):  # every load before the first store: the loads overlap
                    if cok and (pa >> i) & 1:
                        ru[4 * i], ru[4 * i + 1], ru[4 * i + 2], ru[4 * i + 3] = ld16_u32_off(
                            x2, i32(i32(xoff[i] + toff) + i32(c0 + ca * 8)))
                    else:  # padding, a row past M, or channels past C: zeros
                        ru[4 * i] = uint32(0)
                        ru[4 * i + 1] = uint32(0)
                        ru[4 * i + 2] = uint32(0)
                        ru[4 * i + 3] = uint32(0)
                for i in range(LB):
                    q = 4 * (LA + i)
                    if cok and (pb >> i) & 1:
                        ru[q], ru[q + 1], ru[q + 2], ru[q + 3] = ld16_u32_off(w2, i32(goff_b + i32(i * RA) * RSC + jb))
                    else:
                        ru[q] = uint32(0)
                        ru[q + 1] = uint32(0)
                        ru[q + 2] = uint32(0)
                        ru[q + 3] = uint32(0)
                for i in range(LA):
                    st16_u32_off(As, i32(sa0 + i * (RA * BK)), ru[4 * i], ru[4 * i + 1], ru[4 * i + 2], ru[4 * i + 3])
                for i in range(LB):
                    q = 4 * (LA + i)
                    st16_u32_off(Bs, i32(sa0 + i * (RA * BK)), ru[q], ru[q + 1], ru[q + 2], ru[q + 3])
                cuda.syncthreads()
                compute(As, Bs, acc, fa, fb, ra, rb, wm, wn, lane, aoff, boff, scr_a, scr_b, scr_l, 0)
                cuda.syncthreads()
                c0, jb, s, r, toff = advance(c0, jb, s, r, toff, Ci, Si, inc_r)
                kt = i32(kt + 1)
        g = lane // 4
        t4 = lane % 4
        if EPI and vec_y and bm + BM <= Mi and bn + BN <= Ki:  # uniform across the block
            cuda.syncthreads()  # every warp is done reading the rings
            in_a = warp < HALF
            base = i32(i32(warp if in_a else warp - HALF) * WT)  # this warp's (16 MT, 8 NT8) tile
            # the warp's tile, row-major, 16-byte chunk c of row r stored at chunk c ^ (r % WCPR):
            # a lane's two adjacent outputs leave as one packed 4-byte store, and the 8 rows a store
            # spans (g = 0..7, 128 bytes apart) land on 8 different chunks: all 32 banks, one
            # wavefront (unswizzled, 8-way); the reload reads whole rows, a permutation of their chunks
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    for h in range(2):  # rows g and g + 8 of the mma tile
                        r = i32(mt * 16 + g + 8 * h)
                        e = i32(i32(base + r * (8 * NT8)) + i32(i32(i32(nt ^ i32(r % WCPR)) * 8) + 2 * t4))
                        u = pack_h2(float16(acc[o + 2 * h]), float16(acc[o + 2 * h + 1]))
                        if in_a:
                            st_u32_off(As, e, u)
                        else:
                            st_u32_off(Bs, e, u)
            cuda.syncthreads()
            for j in range(WCH):  # 16 bytes a store: 8 output channels of one pixel
                ch = i32(lane + j * 32)
                r = i32(ch // WCPR)
                cc = i32(ch % WCPR)
                soff = i32(i32(base + r * (8 * NT8)) + i32(cc ^ i32(r % WCPR)) * 8)
                if in_a:
                    u0, u1, u2, u3 = ld16_u32_off(As, soff)
                else:
                    u0, u1, u2, u3 = ld16_u32_off(Bs, soff)
                st16_u32_off(y2, i32(i32(i32(bm + wm + r) * Ki) + i32(bn + wn + cc * 8)), u0, u1, u2, u3)
        else:
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    row = bm + wm + mt * 16 + g
                    col = bn + wn + nt * 8 + 2 * t4
                    for i in range(4):
                        rr = row + 8 * (i // 2)
                        q = col + (i % 2)
                        if rr < Mi and q < Ki:
                            y1[i32(i32(rr * Ki) + q)] = float16(acc[o + i])

    return conv_tc


@dataclass(frozen=True)
class _TCBase(TunableVariant):
    """Shared by the tensor-core rungs 9 and up (one kernel, one idea switched on per rung)."""
    WARPS_M: int = 2
    WARPS_N: int = 2
    MT: int = 2
    NT8: int = 4
    BK: int = 32

    LDSM: ClassVar[bool] = False
    STAGES: ClassVar[int] = 1
    EPI: ClassVar[bool] = False

    def example(self, problem):
        return to_layout(problem, "NHWC", "float16")

    @property
    def BM(self) -> int:
        return 16 * self.MT * self.WARPS_M

    @property
    def BN(self) -> int:
        return 8 * self.NT8 * self.WARPS_N

    def threads(self):
        return 32 * self.WARPS_M * self.WARPS_N

    def grid(self, p):
        m, n, _ = p.gemm_mnk
        return C._ceil(n, self.BN), C._ceil(m, self.BM)

    def shared_bytes(self):
        """The float16 A and B tiles (all stages); the simulator's scratch is dropped on a GPU."""
        return self.STAGES * (self.BM + self.BN) * self.BK * 2

    def supports(self, problem):
        p = problem
        if p.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {p.dtype}")
        if not p.nhwc:
            raise UnsupportedProblem(f"{self.label} reads 8 channels of one pixel as one 16-byte chunk: NHWC only "
                                     "(rung 8 takes NCHW)")
        if p.c % 8:
            raise UnsupportedProblem(f"{self.label}: c={p.c} is not a multiple of 8, so a pixel's channels do not "
                                     "split into 16-byte chunks (rung 8 takes any c)")
        if p.r > 31 or p.s > 31:
            raise UnsupportedProblem(f"{self.label}: the per-row validity masks hold 31 filter rows and columns; "
                                     f"got {p.r}x{p.s}")
        cpr = self.BK // 8
        if self.BK % 16 or self.BK > 64 or (self.BM * cpr) % self.threads() or (self.BN * cpr) % self.threads() \
                or self.threads() % cpr or (self.LDSM and self.NT8 % 2):
            raise UnsupportedProblem(f"{self.label}: tile {self.BM}x{self.BN}x{self.BK} does not split into whole "
                                     f"rows of 16-byte chunks over {self.threads()} threads (or NT8 odd with ldmatrix)")
        if self.EPI and self.NT8 & (self.NT8 - 1):
            raise UnsupportedProblem(f"{self.label}: NT8={self.NT8} must be a power of two (the epilogue's staging "
                                     "swizzles a row's 16-byte chunks by XOR)")
        m, n, k = p.gemm_mnk
        for what, size in (("x", p.n * p.h * p.w * p.c), ("w", n * k), ("y", m * n)):
            if size + 64 > 2**31 - 1:
                raise UnsupportedProblem(f"{self.label}: {what} has {size} elements; this rung's offsets are 32-bit")
        C._check(self, p, self.grid(p), self.threads(), self.shared_bytes())

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        kern = _tc_conv_kernel(self.WARPS_M, self.WARPS_N, self.MT, self.NT8, self.BK, self.LDSM, self.STAGES,
                               self.EPI)
        return [Launch(kern, self.grid(p), self.threads(),
                       (C._view2d(bufs["x"], p.n * p.h * p.w, p.c), C._view2d(bufs["w"], n, k),
                        bufs["y"].reshape(-1), C._view2d(bufs["y"], m, n), m, n, p.c, p.h, p.w, p.p, p.q, p.r, p.s,
                        p.stride, p.pad, n % 8 == 0))]

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        kp = p.r * p.s * C._ceil(p.c, self.BK) * self.BK  # the reduction as the k-tiles cover it
        l2 = (m * kp * C._ceil(n, self.BN) + kp * n * C._ceil(m, self.BM)) * 2 + m * n * 2
        return C._traffic(p, l2, float(l2 - m * n * 2) * 2, "l2/smem",
                          f"{self.BM}x{self.BN}x{self.BK} block tile, {self.STAGES} stage(s); every global byte stored once in shared "
                          "memory and read once by the fragment loads", peak="tensor.fp16")


@dataclass(frozen=True)
class TCVector(_TCBase):
    rung: ClassVar[int] = 9
    name: ClassVar[str] = "tc_vector"
    what: ClassVar[str] = (
        "The reduction runs tap by tap in 32-deep k-tiles of channels, so in NHWC a row of an A "
        "tile is 32 consecutive channels of one pixel, moved in 16-byte chunks. Each thread "
        "decodes its pixels once into 32-bit offsets and validity masks: a new tap costs a mask "
        "test and a pointer increment.")


@dataclass(frozen=True)
class TCLdmatrix(TCVector):
    rung: ClassVar[int] = 10
    name: ClassVar[str] = "tc_ldmatrix"
    LDSM: ClassVar[bool] = True
    what: ClassVar[str] = (
        "Fragments by ldmatrix.x4 instead of 2-byte gathers, non-transposed since both tiles are "
        "k-contiguous. Both tiles are stored XOR-swizzled (16-byte chunk c of row r at c ^ (r/2 "
        "mod 4)) so the 8 rows of an ldmatrix phase fall on 8 bank groups.")


@dataclass(frozen=True)
class TCPipeline(TCLdmatrix):
    rung: ClassVar[int] = 12
    name: ClassVar[str] = "tc_cp_async"
    STAGES: ClassVar[int] = 3
    what: ClassVar[str] = (
        "cp.async (LDGSTS) copies x and w straight into shared memory in a ring of 3 stages: 2 "
        "k-tiles in flight while the warps multiply the third, one barrier a k-tile. A chunk in "
        "the padding or past an edge copies 0 of its 16 bytes, so the copy zero-fills it with no "
        "branch.")


# --- rung 13's block tile, chosen for the layer's wave count --------------------------------------
#: the block tiles of 64x64 warp tiles rung 13 may launch, as (WARPS_M, WARPS_N): 128x128,
#: 64x128, 128x64, 64x64 (each its own compiled kernel)
WARPTILE_BLOCKS = ((2, 2), (1, 2), (2, 1), (1, 1))
#: registers a lane of a 64x64 warp tile holds: its 128 float32 accumulators alone are 128, so
#: ptxas takes more (sm_90: 230 in the static baseline) and at most 255; anywhere in 129..255 a
#: sub-partition holds 2 such warps (16K registers each), so the occupancy is the same: 8 warps/SM
WARPTILE_REGS = 255
#: where no GPU is in use (the simulator, the anatomy compiler): tiles are chosen for an H100 SXM
DEFAULT_GPU = "h100-sxm"


@dataclass(frozen=True)
class TileChoice:
    """One candidate block tile for a problem on a GPU, and what its grid costs there."""
    warps_m: int
    warps_n: int
    bm: int
    bn: int
    blocks: int            # blocks of the grid
    blocks_per_sm: int     # resident per SM (perfkit.occupancy: registers, shared memory, warps)
    waves: float           # blocks / (SMs * blocks_per_sm)
    busiest: int           # blocks the busiest SM runs: ceil(blocks / SMs)
    loss: float            # 1 - useful outputs / (SMs * busiest * bm * bn): idle SMs, the last wave, padding
    l2_elems: int          # A gathered ceil(K / bn) times, B read ceil(M / bm) times


def _gpu_facts(gpu: str | None):
    """(SMs, compute capability) of ``gpu`` (a perfkit.specs name), else of the GPU in use, else
    of DEFAULT_GPU."""
    if gpu is None:
        d = backend.device()
        if not d.simulated and d.sm_count and d.compute_capability:
            return int(d.sm_count), tuple(d.compute_capability)
        gpu = DEFAULT_GPU
    spec = specs.get(gpu)
    return spec.sm_count, tuple(spec.compute_capability)


def warptile_choices(problem, gpu: str | None = None, stages: int = 3, bk: int = 32,
                     warp: tuple[int, int] = (64, 64)) -> list[TileChoice]:
    """Every block tile of WARPTILE_BLOCKS that fits on an SM, best first (see block_tile):
    ``stages`` k-tiles of ``bk`` in the ring, ``warp`` the warp tile (rows, columns)."""
    sms, cc = _gpu_facts(gpu)
    m, n, k = problem.gemm_mnk
    kp = problem.r * problem.s * C._ceil(problem.c, bk) * bk
    out = []
    for wm, wn in WARPTILE_BLOCKS:
        bm, bn = warp[0] * wm, warp[1] * wn
        occ = occupancy.occupancy(cc, 32 * wm * wn, WARPTILE_REGS, stages * (bm + bn) * bk * 2, opt_in=False)
        if occ.blocks_per_sm == 0:
            continue
        blocks = C._ceil(m, bm) * C._ceil(n, bn)
        busiest = C._ceil(blocks, sms)
        out.append(TileChoice(wm, wn, bm, bn, blocks, occ.blocks_per_sm, blocks / (sms * occ.blocks_per_sm),
                              busiest, 1 - m * n / (sms * busiest * bm * bn),
                              m * kp * C._ceil(n, bn) + kp * n * C._ceil(m, bm)))
    # The rule: the least wave-quantization loss, i.e. the least output area on the busiest SM.
    # Why that measure: every candidate keeps 8 warps (8 warp tiles) resident per SM (occupancy:
    # 2 warps of 129-255 registers per sub-partition, and the shared memory allows more), so an
    # SM's tensor pipes do the same work per unit of time whatever the block shape, and the grid
    # ends when the SM given the most output area ends: ceil(blocks / SMs) blocks of bm x bn,
    # whether they run in one wave or several (occupancy changes how many waves, not this area).
    # A tile that leaves SMs idle (few blocks) or a last wave half empty, or pads M or K, loses.
    # Ties (equal area): the fewer L2 reads (larger blocks re-read less), then the wider bn (A,
    # gathered pixel by pixel with masks, is the dearer operand to read twice).
    return sorted(out, key=lambda t: (t.busiest * t.bm * t.bn, t.l2_elems, -t.bn))


def block_tile(problem, gpu: str | None = None, **tile) -> tuple[int, int]:
    """(WARPS_M, WARPS_N) of rung 13's block tile for ``problem`` on ``gpu`` (warptile_choices,
    which takes ``tile``'s stages, bk and warp)."""
    best = warptile_choices(problem, gpu, **tile)[0]
    return best.warps_m, best.warps_n


@dataclass(frozen=True)
class TCWarpTile(TCPipeline):
    WARPS_M: int = 0  # 0, 0: the block tile is chosen per problem (block_tile); else fixed
    WARPS_N: int = 0
    MT: int = 4
    NT8: int = 8
    BK: int = 32

    def __post_init__(self) -> None:
        if (self.WARPS_M, self.WARPS_N) != (0, 0):  # fixed: every field checked as a size (>= 1)
            super().__post_init__()
        else:  # chosen per problem: the other fields checked, on a twin with a block tile
            dataclasses.replace(self, WARPS_M=1, WARPS_N=1)

    def at(self, problem) -> "TCWarpTile":
        """This rung with its block tile fixed for ``problem`` (itself when it was given)."""
        if self.WARPS_M:
            return self
        wm, wn = block_tile(problem, stages=self.STAGES, bk=self.BK, warp=(16 * self.MT, 8 * self.NT8))
        return dataclasses.replace(self, WARPS_M=wm, WARPS_N=wn)

    def grid(self, p):
        return _TCBase.grid(self.at(p), p)

    def supports(self, problem):
        return _TCBase.supports(self.at(problem), problem)

    def plan(self, problem, bufs):
        return _TCBase.plan(self.at(problem), problem, bufs)

    def traffic(self, p):
        return _TCBase.traffic(self.at(p), p)

    rung: ClassVar[int] = 13
    name: ClassVar[str] = "tc_warptile"
    what: ClassVar[str] = (
        "Larger warp tiles: each warp owns 64x64 of y (4x8 mma tiles), so an A fragment feeds 8 "
        "mmas and a B fragment 4. The block tile (128x128, 64x128, 128x64 or 64x64) is chosen per "
        "layer for the least output area on the busiest SM.")


@dataclass(frozen=True)
class TCEpilogue(TCWarpTile):
    rung: ClassVar[int] = 15
    name: ClassVar[str] = "tc_epilogue"
    EPI: ClassVar[bool] = True
    what: ClassVar[str] = (
        "A vectorized epilogue: a full block (K % 8 == 0) stages each warp's 64x64 tile as "
        "float16 in XOR-swizzled shared memory, then each lane writes 8 output channels of a "
        "pixel with one 16-byte store (STG.128). Edge blocks store one half at a time.")
