"""GEMM's tensor-core rungs, 12-17: float16 in, float32 accumulate, ``mma.sync.m16n8k16``
through inline PTX, from one warp tile to the pipelined, warp-tiled kernel with a 16-byte
epilogue (:mod:`perfkit.kernels.gemm` has the ledger)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32
from numba.types import float16  # numba.float16 is not exported; the type casts in kernels too

from .._ptx import (cp_async16, cp_async16_off, cp_async_commit, cp_async_wait, frag_a, frag_b, frag_c, ld16_u32,
                     ld16_u32_off, ldmatrix_x4_off, ldmatrix_x4_trans_off, mma_16816, mma_16816_u32, shfl_xor,
                     st16_u32, st16_u32_off)
from .._vector import st4
from ..base import Launch, Traffic, UnsupportedProblem
from . import _common as C
from ._common import F32, I32_LIMIT, Problem


# --- rung 12: tensor cores -------------------------------------------------------------------
# mma_16816 and the fragment maps live in perfkit.kernels._ptx (shared with the conv ladder).


@lru_cache(maxsize=None)
def _tensor_core_kernel(WARPS_M: int, WARPS_N: int, NTILES: int):
    """Block = WARPS_M x WARPS_N warps; each warp owns a 16 x (8 * NTILES) tile of C."""
    BM = 16 * WARPS_M
    BN = 8 * NTILES * WARPS_N
    BK = 16
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    NACC = NTILES * 4

    @cuda.jit
    def gemm_tensor_core(a, b, c, M, N, K):
        As = cuda.shared.array((BM, BK), float16)  # (BM, BK) tile of A, float16
        Bs = cuda.shared.array((BK, BN), float16)  # (BK, BN) tile of B
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's mma only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        acc = cuda.local.array(NACC, float32)
        fa = cuda.local.array(8, float16)
        fb = cuda.local.array(4, float16)
        t = cuda.threadIdx.x
        lane = t % 32
        warp = t // 32
        wm = (warp // WARPS_N) * 16
        wn = (warp % WARPS_N) * (8 * NTILES)
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        for i in range(NTILES * 4):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for idx in range(t, BM * BK, NT):
                r = idx // BK
                q = idx % BK
                As[r, q] = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float16(0)
            for idx in range(t, BK * BN, NT):
                r = idx // BN
                q = idx % BN
                Bs[r, q] = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float16(0)
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
                row = bm + wm + r
                col = bn + wn + nt * 8 + q
                if row < M and col < N:
                    c[row, col] = acc[nt * 4 + i]

    return gemm_tensor_core


@dataclass(frozen=True)
class TensorCore(C._Tunable):
    WARPS_M: int = 4
    WARPS_N: int = 2
    NTILES: int = 4

    rung: ClassVar[int] = 12
    name: ClassVar[str] = "tensor_core"
    what: ClassVar[str] = (
        "float16 inputs, float32 accumulation on the tensor cores: each warp issues "
        "mma.sync.m16n8k16 (HMMA in SASS) through an inline-PTX intrinsic, since Numba has no "
        "tensor-core API. Operands are gathered from shared memory into the instruction's "
        "fragment layout.")

    def example(self, problem):
        return problem if problem.dtype == "float16" else Problem(problem.m, problem.n, problem.k, "float16")

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")
        C._check_launch(self, problem, self.grid(problem), self.threads(), self.shared_bytes())

    def threads(self) -> int:
        return 32 * self.WARPS_M * self.WARPS_N

    def grid(self, problem):
        return C._tile_grid(problem, 16 * self.WARPS_M, 8 * self.NTILES * self.WARPS_N)

    def shared_bytes(self) -> int:
        """As and Bs in float16.  The scratch arrays feed only the simulator's mma; on a GPU the
        instruction ignores them and the compiler drops them."""
        return (16 * self.WARPS_M * 16 + 16 * 8 * self.NTILES * self.WARPS_N) * 2

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        kern = _tensor_core_kernel(self.WARPS_M, self.WARPS_N, self.NTILES)
        return [Launch(kern, self.grid(problem), self.threads(), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        BM, BN = 16 * self.WARPS_M, 8 * self.NTILES * self.WARPS_N
        l2 = (m * k * math.ceil(n / BN) + k * n * math.ceil(m / BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2, limiter="l2/smem",
                       notes="tensor-core math is ~15x the FP32 rate; a 64x64 tile without ldmatrix or "
                             "cp.async pipelining leaves it bound by operand traffic",
                       extra={"peak": "tensor.fp16"})


# --- rungs 13-17: the tensor-core sub-ladder ---------------------------------------------------
@lru_cache(maxsize=None)
def _tc_kernel(WARPS_M: int, WARPS_N: int, MT: int, NT8: int, BK: int, STAGES: int, LDSM: bool, EPI: bool):
    """float16 GEMM on mma.m16n8k16 (rungs 13-17).  A block of WARPS_M x WARPS_N warps; each
    warp owns MT x NT8 tiles of 16x8 (a (16*MT) x (8*NT8) tile of C) and reuses every A
    fragment NT8 times and every B fragment MT times.  Global -> shared moves 16-byte chunks
    (8 halves): ``STAGES == 1`` through registers (LDG.128 then STS.128) with a barrier pair per
    k-tile; ``STAGES >= 2`` with cp.async into a ring of STAGES buffers, STAGES - 1 tiles in
    flight, one barrier per k-tile.  ``LDSM``: fragments come from ldmatrix (x4 for A, x4.trans
    for B) out of XOR-swizzled tiles (16-byte chunk c of row r stored at c ^ f(r)) that make
    each 8-address phase hit 8 distinct bank groups; else they are gathered as halves with the
    frag_* maps.  ``EPI``: in a full block (inside m and n, n a multiple of 4) lanes pair up
    with one shuffle so that each holds 4 consecutive floats of one row of C and writes them
    with one 16-byte store; edge blocks store one float at a time.

    Addresses are 32-bit element offsets (Numba would type them int64: numba#8447), computed
    once per thread before the k-loop: a thread's chunk i of a tile sits RA (RB) rows after its
    chunk 0, and the swizzle repeats every 8 rows, so its shared offset is a constant after
    chunk 0's (an immediate of the LDGSTS/STS) and its global offset chunk 0's plus i * RA * K;
    per k-tile the global offsets advance by BK (A) and BK * N (B), the stage by a constant.
    The ldmatrix row addresses likewise: the A swizzle depends on the lane only (warp and mma
    tile rows are multiples of 16), so each k-step's A address is a per-lane offset plus a
    constant per mma tile, each B address one per pair of n8 tiles plus a constant per k-step.
    The loops over chunks, k-steps and mma tiles have compile-time trip counts (unrolled).

    Edges: a block whose tile lies inside m and n, of matrices with 16-byte aligned rows (k and
    n multiples of 8), takes that unchecked path for its full k-tiles; the partial last k-tile,
    blocks at the m or n edge and unaligned matrices take the checked loader: chunks past m, n
    or k are zero-filled (cp.async reads 0 bytes; registers take zeros), and rows that are not
    16-byte aligned take checked 2-byte loads, on the same shared layout."""
    i32 = int32
    BM, BN = 16 * MT * WARPS_M, 8 * NT8 * WARPS_N
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    KS = BK // 16
    ACPR, BCPR = BK // 8, BN // 8  # 16-byte chunks per row of the A and the B tile
    ACH, BCH = BM * ACPR, BK * BCPR
    LA, LB = -(-ACH // NT), -(-BCH // NT)
    S = STAGES
    ASH, BSH = S * BM, S * BK
    ASTAGE, BSTAGE = BM * BK, BK * BN  # elements of one stage
    NACC = MT * NT8 * 4
    NFA, NFB, NRA, NRB = MT * 8, NT8 * 4, MT * 4, NT8 * 2  # array shapes: constants
    NBP = max(NT8 // 2, 1)
    NU = 4 * (LA + LB)
    WAIT = max(STAGES - 2, 0)
    AROWS_PER_LINE = max(8 // ACPR, 1)  # rows of A sharing one 128-byte line (2 when BK = 32)
    # the unchecked path: every thread moves whole rows' worth of chunks (chunk i of a thread is
    # RA rows below chunk i - 1); PER_*: the swizzle repeats every 8 rows, so those rows share it
    FAST = ACH % NT == 0 and BCH % NT == 0 and NT % ACPR == 0 and NT % BCPR == 0
    RA, RB = max(NT // ACPR, 1), max(NT // BCPR, 1)
    PER_A = not LDSM or RA % 8 == 0
    PER_B = not LDSM or RB % 8 == 0
    dev = C._jit(device=True, forceinline=True)

    @dev
    def a_phys(r, ch):  # physical chunk of logical chunk ch of A-tile row r
        return i32(ch ^ i32(i32(r // AROWS_PER_LINE) % ACPR)) if LDSM else ch

    @dev
    def b_phys(r, ch):
        return i32(ch ^ i32(r % 8)) if LDSM else ch

    @dev
    def a_soff(i, sa0, ra0, ca):  # shared offset (in a stage) of this thread's A chunk i
        if PER_A:
            return i32(sa0 + i32(i * (RA * BK)))
        r = i32(ra0 + i32(i * RA))
        return i32(i32(r * BK) + i32(a_phys(r, ca) * 8))

    @dev
    def b_soff(i, sb0, rb0, cb):
        if PER_B:
            return i32(sb0 + i32(i * (RB * BN)))
        r = i32(rb0 + i32(i * RB))
        return i32(i32(r * BN) + i32(b_phys(r, cb) * 8))

    @dev
    def load_fast(a, b, As, Bs, sta, stb, ga, gb, gas, gbs, sa0, ra0, ca, sb0, rb0, cb, ru):
        """A full k-tile of a block inside m and n: no checks, offsets from the hoisted bases
        (sta, stb: the stage's first element; ga, gb: chunk 0's global offsets this k-tile;
        gas, gbs: RA * K and RB * N, the step between a thread's chunks)."""
        if STAGES > 1:
            for i in range(LA):
                cp_async16_off(As, i32(sta + a_soff(i, sa0, ra0, ca)), a, i32(ga + i32(i * gas)))
            for i in range(LB):
                cp_async16_off(Bs, i32(stb + b_soff(i, sb0, rb0, cb)), b, i32(gb + i32(i * gbs)))
        else:  # every load issued before the first store: the loads overlap
            for i in range(LA):
                ru[4 * i], ru[4 * i + 1], ru[4 * i + 2], ru[4 * i + 3] = ld16_u32_off(a, i32(ga + i32(i * gas)))
            for i in range(LB):
                q = 4 * (LA + i)
                ru[q], ru[q + 1], ru[q + 2], ru[q + 3] = ld16_u32_off(b, i32(gb + i32(i * gbs)))
            for i in range(LA):
                st16_u32_off(As, i32(sta + a_soff(i, sa0, ra0, ca)), ru[4 * i], ru[4 * i + 1], ru[4 * i + 2],
                             ru[4 * i + 3])
            for i in range(LB):
                q = 4 * (LA + i)
                st16_u32_off(Bs, i32(stb + b_soff(i, sb0, rb0, cb)), ru[q], ru[q + 1], ru[q + 2], ru[q + 3])

    @dev
    def load_checked(a, b, As, Bs, stage, k0, M, N, K, t, bm, bn, vec_a, vec_b):
        """Any k-tile of any block: every chunk bounds-checked (edges, unaligned matrices)."""
        for i in range(LA):
            chn = t + i * NT
            if chn < ACH:
                r = chn // ACPR
                cc = chn % ACPR
                srow = stage * BM + r
                scol = a_phys(r, cc) * 8
                grow = bm + r
                gcol = k0 + cc * 8
                if STAGES > 1 and vec_a:
                    nb = min(max(K - gcol, 0), 8) * 2 if grow < M else 0
                    cp_async16(As, srow, scol, a, grow if nb > 0 else 0, gcol if nb > 0 else 0, nb)
                elif vec_a and grow < M and gcol + 8 <= K:
                    u0, u1, u2, u3 = ld16_u32(a, grow, gcol)
                    st16_u32(As, srow, scol, u0, u1, u2, u3)
                else:
                    for e in range(8):
                        As[srow, scol + e] = a[grow, gcol + e] if grow < M and gcol + e < K else float16(0)
        for i in range(LB):
            chn = t + i * NT
            if chn < BCH:
                r = chn // BCPR
                cc = chn % BCPR
                srow = stage * BK + r
                scol = b_phys(r, cc) * 8
                grow = k0 + r
                gcol = bn + cc * 8
                if STAGES > 1 and vec_b:
                    nb = min(max(N - gcol, 0), 8) * 2 if grow < K else 0
                    cp_async16(Bs, srow, scol, b, grow if nb > 0 else 0, gcol if nb > 0 else 0, nb)
                elif vec_b and grow < K and gcol + 8 <= N:
                    u0, u1, u2, u3 = ld16_u32(b, grow, gcol)
                    st16_u32(Bs, srow, scol, u0, u1, u2, u3)
                else:
                    for e in range(8):
                        Bs[srow, scol + e] = b[grow, gcol + e] if grow < K and gcol + e < N else float16(0)

    @dev
    def compute(As, Bs, acc, fa, fb, ra, rb, stage, wm, wn, lane, aoff, boff, scr_a, scr_b, scr_l):
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
            for np_ in range(NT8 // 2 if LDSM else NT8):
                if LDSM:  # two n8 tiles per ldmatrix.x4.trans
                    rb[np_ * 4], rb[np_ * 4 + 1], rb[np_ * 4 + 2], rb[np_ * 4 + 3] = ldmatrix_x4_trans_off(
                        Bs, i32(i32(stb + boff[np_]) + i32(ks * (16 * BN))), scr_l)
                else:
                    for i in range(4):
                        fr, fc = frag_b(lane, i)
                        fb[np_ * 4 + i] = Bs[stage * BK + ks * 16 + fr, wn + np_ * 8 + fc]
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

    @C._jit(launch_bounds=NT)
    def gemm_tc(a, b, c, M, N, K, vec_a, vec_b, vec_c):
        As = cuda.shared.array((ASH, BK), float16)  # STAGES tiles of A, (BM, BK) each
        Bs = cuda.shared.array((BSH, BN), float16)  # STAGES tiles of B, (BK, BN) each
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's twins only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        scr_l = cuda.shared.array((WARPS, 32, 2), int32)
        acc = cuda.local.array(NACC, float32)
        fa = cuda.local.array(NFA, float16)
        fb = cuda.local.array(NFB, float16)
        ra = cuda.local.array(NRA, uint32)
        rb = cuda.local.array(NRB, uint32)
        ru = cuda.local.array(NU, uint32)
        aoff = cuda.local.array(KS, int32)
        boff = cuda.local.array(NBP, int32)
        Mi, Ni, Ki = i32(M), i32(N), i32(K)
        t = i32(cuda.threadIdx.x)
        lane = i32(t % 32)
        warp = i32(t // 32)
        wm = i32(i32(warp // WARPS_N) * (16 * MT))
        wn = i32(i32(warp % WARPS_N) * (8 * NT8))
        bm = i32(i32(cuda.blockIdx.y) * BM)
        bn = i32(i32(cuda.blockIdx.x) * BN)
        for i in range(NACC):
            acc[i] = float32(0)
        if LDSM:  # this lane's ldmatrix row addresses (the swizzle of rows wm + 16 mt + l16 is l16's)
            l16 = i32(lane % 16)
            hi = i32(lane // 16)
            for ks in range(KS):
                aoff[ks] = i32(i32(i32(wm + l16) * BK) + i32(a_phys(l16, i32(ks * 2 + hi)) * 8))
            for np_ in range(NBP):
                boff[np_] = i32(i32(l16 * BN) + i32(b_phys(l16, i32(i32(wn // 8) + i32(np_ * 2 + hi))) * 8))
        # the unchecked loader's bases: chunk 0 of this thread in the A and the B tile
        ra0 = i32(t // ACPR)
        ca = i32(t % ACPR)
        rb0 = i32(t // BCPR)
        cb = i32(t % BCPR)
        sa0 = i32(i32(ra0 * BK) + i32(a_phys(ra0, ca) * 8))
        sb0 = i32(i32(rb0 * BN) + i32(b_phys(rb0, cb) * 8))
        ga = i32(i32(i32(bm + ra0) * Ki) + i32(ca * 8))
        gb = i32(i32(rb0 * Ni) + i32(bn + i32(cb * 8)))
        gas = i32(RA * Ki)
        gbs = i32(RB * Ni)
        gbk = i32(BK * Ni)
        n_k = i32(i32(Ki + (BK - 1)) // BK)
        n_full = i32(0)
        if FAST and vec_a and vec_b and bm + BM <= Mi and bn + BN <= Ni:
            n_full = i32(Ki // BK)
        if STAGES == 1:
            kt = i32(0)
            while kt < n_k:
                if kt < n_full:
                    load_fast(a, b, As, Bs, 0, 0, ga, gb, gas, gbs, sa0, ra0, ca, sb0, rb0, cb, ru)
                else:
                    load_checked(a, b, As, Bs, 0, i32(kt * BK), M, N, K, t, bm, bn, vec_a, vec_b)
                ga = i32(ga + BK)
                gb = i32(gb + gbk)
                cuda.syncthreads()
                compute(As, Bs, acc, fa, fb, ra, rb, 0, wm, wn, lane, aoff, boff, scr_a, scr_b, scr_l)
                cuda.syncthreads()
                kt = i32(kt + 1)
        else:
            for s in range(STAGES - 1):  # prologue: STAGES - 1 tiles in flight
                if s < n_full:
                    load_fast(a, b, As, Bs, i32(s * ASTAGE), i32(s * BSTAGE), ga, gb, gas, gbs, sa0, ra0, ca,
                              sb0, rb0, cb, ru)
                elif s < n_k:
                    load_checked(a, b, As, Bs, s, i32(s * BK), M, N, K, t, bm, bn, vec_a, vec_b)
                ga = i32(ga + BK)
                gb = i32(gb + gbk)
                cp_async_commit()
            rs = i32(0)      # the stage read this k-tile
            ws = i32(S - 1)  # the stage written (tile kt + STAGES - 1)
            kt = i32(0)
            while kt < n_k:
                cp_async_wait(WAIT)  # tile kt has landed (this thread's copies) ...
                cuda.syncthreads()   # ... and everyone's; the stage read at kt - 1 is free
                nk = i32(kt + (S - 1))
                if nk < n_full:
                    load_fast(a, b, As, Bs, i32(ws * ASTAGE), i32(ws * BSTAGE), ga, gb, gas, gbs, sa0, ra0, ca,
                              sb0, rb0, cb, ru)
                elif nk < n_k:
                    load_checked(a, b, As, Bs, ws, i32(nk * BK), M, N, K, t, bm, bn, vec_a, vec_b)
                cp_async_commit()
                compute(As, Bs, acc, fa, fb, ra, rb, rs, wm, wn, lane, aoff, boff, scr_a, scr_b, scr_l)
                ga = i32(ga + BK)
                gb = i32(gb + gbk)
                rs = i32(rs + 1)
                if rs == S:
                    rs = i32(0)
                ws = i32(ws + 1)
                if ws == S:
                    ws = i32(0)
                kt = i32(kt + 1)
            cp_async_wait(0)
        g = lane // 4
        t4 = lane % 4
        if EPI and vec_c and bm + BM <= Mi and bn + BN <= Ni:
            # a full block of a C with 16-byte aligned rows: lanes t4 and t4 ^ 1 trade halves, so
            # each holds 4 consecutive floats of one row (the odd lane row g + 8, columns 2 t4 - 2
            # ... 2 t4 + 1; the even one row g, 2 t4 ... 2 t4 + 3) and stores them with one
            # STG.128; no checks.  The branch is uniform across the block (every lane shuffles),
            # and the (mt, nt) loops hold no other branch, so they unroll and the accumulators
            # stay in registers (edge blocks below store as rung 16 does)
            odd = i32(t4 % 2)
            cbase = i32(i32(i32(bm + wm + g + 8 * odd) * Ni) + i32(bn + wn + 2 * t4 - 2 * odd))
            up = odd == 1  # the odd lane: row g + 8
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    # all four read, then selp on the values (a ternary on acc[...] becomes a
                    # load from a computed address, which puts acc on the stack)
                    x0, x1, x2, x3 = acc[o], acc[o + 1], acc[o + 2], acc[o + 3]
                    r0 = shfl_xor(cuda.selp(up, x0, x2), 1, scr_a)
                    r1 = shfl_xor(cuda.selp(up, x1, x3), 1, scr_a)
                    st4(c, i32(cbase + i32(i32(mt * 16) * Ni) + i32(nt * 8)), cuda.selp(up, r0, x0),
                        cuda.selp(up, r1, x1), cuda.selp(up, x2, r0), cuda.selp(up, x3, r1))
        else:
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    row = bm + wm + mt * 16 + g
                    col = bn + wn + nt * 8 + 2 * t4
                    for i in range(4):
                        r = row + 8 * (i // 2)
                        q = col + (i % 2)
                        if r < M and q < N:
                            c[r * N + q] = acc[o + i]

    return gemm_tc


@dataclass(frozen=True)
class _TCBase(C._Tunable):
    """Shared by the tensor-core rungs 13-17 (one kernel, one idea switched on per rung)."""
    WARPS_M: int = 2
    WARPS_N: int = 2
    MT: int = 2
    NT8: int = 4
    BK: int = 32

    STAGES: ClassVar[int] = 1
    LDSM: ClassVar[bool] = False
    EPI: ClassVar[bool] = False

    def example(self, problem):
        return problem if problem.dtype == "float16" else Problem(problem.m, problem.n, problem.k, "float16")

    @property
    def BM(self) -> int:
        return 16 * self.MT * self.WARPS_M

    @property
    def BN(self) -> int:
        return 8 * self.NT8 * self.WARPS_N

    def threads(self) -> int:
        return 32 * self.WARPS_M * self.WARPS_N

    def grid(self, problem):
        return C._tile_grid(problem, self.BM, self.BN)

    def shared_bytes(self) -> int:
        """The float16 A and B tiles (all stages); the simulator's scratch is dropped on a GPU."""
        return self.STAGES * (self.BM * self.BK + self.BK * self.BN) * 2

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")
        if self.BK % 16 or self.BK > 64:
            raise UnsupportedProblem(f"{self.label}: BK={self.BK} must be 16, 32, 48 or 64 (k steps of 16)")
        if self.LDSM and (self.NT8 % 2 or self.BN // 8 < 8 or self.BK // 8 not in (2, 4, 8)):
            raise UnsupportedProblem(f"{self.label}: ldmatrix needs NT8 even, BN >= 64 and BK in (16, 32, 64) "
                                     f"(got NT8={self.NT8}, BN={self.BN}, BK={self.BK})")
        C._check_launch(self, problem, self.grid(problem), self.threads(), self.shared_bytes())
        m, n, k = C._dims(problem)
        for what, size in (("A (m*k)", m * k), ("B (k*n)", k * n), ("C (m*n)", m * n)):
            if size + 64 > I32_LIMIT:
                raise UnsupportedProblem(f"{self.label}: {what} has {size} elements; this rung's offsets are "
                                         "32-bit, which reach 2**31 - 1")

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        kern = _tc_kernel(self.WARPS_M, self.WARPS_N, self.MT, self.NT8, self.BK, self.STAGES, self.LDSM, self.EPI)
        args = (bufs["a"], bufs["b"], bufs["c"].reshape(-1), m, n, k, k % 8 == 0, n % 8 == 0, n % 4 == 0)
        return [Launch(kern, self.grid(problem), self.threads(), args)]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        l2 = (m * k * math.ceil(n / self.BN) + k * n * math.ceil(m / self.BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                       smem_bytes=float(l2 - m * n * F32) * 2, limiter="l2/smem",
                       notes=f"{self.BM}x{self.BN}x{self.BK} block tile, {self.STAGES} stage(s); shared bytes: "
                             "each global byte stored once and read once by the fragment loads",
                       extra={"peak": "tensor.fp16"})


@dataclass(frozen=True)
class TCVector(_TCBase):
    rung: ClassVar[int] = 13
    name: ClassVar[str] = "tc_vector"
    what: ClassVar[str] = (
        "Every thread moves A and B in 16-byte chunks (LDG.128, STS.128) at offsets computed once "
        "before the k-loop, and a k-tile is 32 deep, so a barrier pair covers two mma k-steps. "
        "Each warp owns a 32x32 tile of C: an A fragment feeds 4 mmas, a B fragment 2.")


@dataclass(frozen=True)
class TCLdmatrix(TCVector):
    rung: ClassVar[int] = 14
    name: ClassVar[str] = "tc_ldmatrix"
    LDSM: ClassVar[bool] = True
    what: ClassVar[str] = (
        "Fragments come from ldmatrix (x4 for A, x4.trans for B) instead of 2-byte loads and "
        "packing. The tiles are stored XOR-swizzled (16-byte chunk c of row r at c ^ (r/2 mod 4) "
        "for A, c ^ (r mod 8) for B) so each ldmatrix phase reads 8 distinct bank groups.")


@dataclass(frozen=True)
class TCPipeline(TCLdmatrix):
    rung: ClassVar[int] = 15
    name: ClassVar[str] = "tc_cp_async"
    STAGES: ClassVar[int] = 3
    what: ClassVar[str] = (
        "cp.async (LDGSTS) copies global memory straight into shared memory without passing "
        "through registers: in a ring of 3 stages, 2 k-tiles are in flight while the warps "
        "multiply the third, with one barrier a k-tile. The copy itself zero-fills chunks past "
        "the matrix edge.")


@dataclass(frozen=True)
class TCWarpTile(TCPipeline):
    WARPS_M: int = 2
    WARPS_N: int = 2
    MT: int = 4
    NT8: int = 8
    BK: int = 32

    rung: ClassVar[int] = 16
    name: ClassVar[str] = "tc_warptile"
    what: ClassVar[str] = (
        "Larger warp tiles: each warp owns 64x64 of C (4x8 mma tiles, 128 float32 accumulators a "
        "lane), so an A fragment feeds 8 mmas and a B fragment 4. The 128x128 block tile halves "
        "the L2 traffic per FLOP again.")


@dataclass(frozen=True)
class TCEpilogue(TCWarpTile):
    rung: ClassVar[int] = 17
    name: ClassVar[str] = "tc_epilogue"
    EPI: ClassVar[bool] = True
    what: ClassVar[str] = (
        "A vectorized epilogue: lanes 2j and 2j+1 swap a pair of accumulators with a shuffle "
        "(SHFL.BFLY), so each holds 4 consecutive floats of a row and writes them with one "
        "16-byte store (STG.128). Edge blocks, or n not a multiple of 4, store one float at a "
        "time.")


