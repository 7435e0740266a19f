"""GEMM's rung 18, mma.sync to its ceiling: rung 17's kernel with 64-deep k-tiles in a 3-stage
ring of dynamic shared memory, double-buffered fragments and grouped block rasterization
(:mod:`perfkit.kernels.gemm` has the ledger)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32
from numba.types import float16

from .._dynsmem import DynamicSharedLaunch, check_dynamic_shared, shared_tile
from .._ptx import (cp_async16, cp_async16_off, cp_async_commit, cp_async_wait, ldmatrix_x4_off,
                    ldmatrix_x4_trans_off, mma_16816_u32, shfl_xor)
from .._vector import st4
from ..base import Traffic, UnsupportedProblem
from . import _common as C
from ._common import F32, I32_LIMIT, Problem


# --- rung 18: mma.sync to its ceiling ----------------------------------------------------------
@lru_cache(maxsize=None)
def _tc_deep_kernel(WARPS_M: int, WARPS_N: int, MT: int, NT8: int, BK: int, STAGES: int, GROUP_M: int):
    """Rung 17's kernel (ldmatrix from swizzled tiles, cp.async ring, 16-byte epilogue) made
    deeper, in three ways:

    * the ring lives in dynamic shared memory (``STAGES`` x (BM x BK + BK x BN) float16: 96 KiB
      at 128x128x64 and 3 stages, past the 48 KiB a static array may hold; the launch opts in);
    * fragments are double-buffered: the ldmatrix of k-step ks + 1 is issued before the mma of
      step ks (two sets of A and B registers, ``buf = ks % 2``), and the wait and barrier for
      the next k-tile sit inside the last k-step of this one, after which the first fragments of
      the next tile are loaded while this tile's last mmas run.  One barrier per k-tile; the
      stage read by tile kt is free once every warp has passed that barrier (its last fragments
      are in registers), and tile kt + STAGES - 1 is issued into it at the top of tile kt + 1;
    * blocks are rasterized in groups of ``GROUP_M`` block rows (Triton's "grouped ordering"):
      the linear block index walks down GROUP_M rows of tiles before moving one tile right, so
      the blocks resident at once share fewer, more reused A and B panels in L2.

    Edges as rung 13-17's kernel: full k-tiles of blocks inside m and n take the unchecked
    loader, the rest the checked one."""
    i32 = int32
    BM, BN = 16 * MT * WARPS_M, 8 * NT8 * WARPS_N
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    KS = BK // 16
    ACPR, BCPR = BK // 8, BN // 8
    ACH, BCH = BM * ACPR, BK * BCPR
    LA, LB = -(-ACH // NT), -(-BCH // NT)
    S = STAGES
    ASH, BSH = S * BM, S * BK
    ASTAGE, BSTAGE = BM * BK, BK * BN
    NACC = MT * NT8 * 4
    NRA, NRB = MT * 4, NT8 * 2  # fragment registers of one buffer
    NRA2, NRB2 = 2 * NRA, 2 * NRB  # two buffers
    NBP = NT8 // 2
    WAIT = S - 2
    AROWS_PER_LINE = max(8 // ACPR, 1)
    FAST = ACH % NT == 0 and BCH % NT == 0 and NT % ACPR == 0 and NT % BCPR == 0
    RA, RB = max(NT // ACPR, 1), max(NT // BCPR, 1)
    PER_A, PER_B = RA % 8 == 0, RB % 8 == 0
    dev = C._jit(device=True, forceinline=True)

    @dev
    def a_phys(r, ch):
        return i32(ch ^ i32(i32(r // AROWS_PER_LINE) % ACPR))

    @dev
    def b_phys(r, ch):
        return i32(ch ^ i32(r % 8))

    @dev
    def a_soff(i, sa0, ra0, ca):
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
    def load_fast(a, b, As, Bs, sta, stb, ga, gb, gas, gbs, sa0, ra0, ca, sb0, rb0, cb):
        for i in range(LA):
            cp_async16_off(As, i32(sta + a_soff(i, sa0, ra0, ca)), a, i32(ga + i32(i * gas)))
        for i in range(LB):
            cp_async16_off(Bs, i32(stb + b_soff(i, sb0, rb0, cb)), b, i32(gb + i32(i * gbs)))

    @dev
    def load_checked(a, b, As, Bs, stage, k0, M, N, K, t, bm, bn, vec_a, vec_b):
        for i in range(LA):
            chn = t + i * NT
            if chn < ACH:
                r = chn // ACPR
                cc = chn % ACPR
                srow = stage * BM + r
                scol = a_phys(r, cc) * 8
                grow = bm + r
                gcol = k0 + cc * 8
                if vec_a:
                    nb = min(max(K - gcol, 0), 8) * 2 if grow < M else 0
                    cp_async16(As, srow, scol, a, grow if nb > 0 else 0, gcol if nb > 0 else 0, nb)
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
                if vec_b:
                    nb = min(max(N - gcol, 0), 8) * 2 if grow < K else 0
                    cp_async16(Bs, srow, scol, b, grow if nb > 0 else 0, gcol if nb > 0 else 0, nb)
                else:
                    for e in range(8):
                        Bs[srow, scol + e] = b[grow, gcol + e] if grow < K and gcol + e < N else float16(0)

    @dev
    def load_frags(As, Bs, ra, rb, buf, sta, stb, ks, aoff, boff, scr_l):
        """Buffer ``buf`` <- the A and B fragments of k-step ``ks`` of the stage at sta/stb."""
        for mt in range(MT):
            o = buf * NRA + mt * 4
            ra[o], ra[o + 1], ra[o + 2], ra[o + 3] = ldmatrix_x4_off(
                As, i32(i32(sta + aoff[ks]) + i32(mt * (16 * BK))), scr_l)
        for np_ in range(NBP):
            o = buf * NRB + np_ * 4
            rb[o], rb[o + 1], rb[o + 2], rb[o + 3] = ldmatrix_x4_trans_off(
                Bs, i32(i32(stb + boff[np_]) + i32(ks * (16 * BN))), scr_l)

    @dev
    def mmas(ra, rb, acc, buf, scr_a, scr_b):
        for mt in range(MT):
            for nt in range(NT8):
                o = (mt * NT8 + nt) * 4
                p = buf * NRA + mt * 4
                q = buf * NRB + (nt // 2) * 4 + (nt % 2) * 2
                acc[o], acc[o + 1], acc[o + 2], acc[o + 3] = mma_16816_u32(
                    ra[p], ra[p + 1], ra[p + 2], ra[p + 3], rb[q], rb[q + 1],
                    acc[o], acc[o + 1], acc[o + 2], acc[o + 3], scr_a, scr_b)

    @C._jit(launch_bounds=NT)
    def gemm_tc_deep(a, b, c, M, N, K, vec_a, vec_b, vec_c):
        smem = cuda.shared.array(0, float16)  # dynamic: STAGES tiles of A, then STAGES of B
        As = shared_tile(smem, 0, ASH, BK)         # (STAGES * BM, BK)
        Bs = shared_tile(smem, ASH * BK, BSH, BN)  # (STAGES * BK, BN)
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's twins only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        scr_l = cuda.shared.array((WARPS, 32, 2), int32)
        acc = cuda.local.array(NACC, float32)
        ra = cuda.local.array(NRA2, uint32)  # two buffers of fragments
        rb = cuda.local.array(NRB2, uint32)
        aoff = cuda.local.array(KS, int32)
        boff = cuda.local.array(NBP, int32)
        Mi, Ni, Ki = i32(M), i32(N), i32(K)
        t = i32(cuda.threadIdx.x)
        lane = i32(t % 32)
        warp = i32(t // 32)
        wm = i32(i32(warp // WARPS_N) * (16 * MT))
        wn = i32(i32(warp % WARPS_N) * (8 * NT8))
        # grouped rasterization: the linear block index -> (tile row, tile column)
        num_n = i32(cuda.gridDim.x)
        num_m = i32(cuda.gridDim.y)
        pid = i32(i32(i32(cuda.blockIdx.y) * num_n) + i32(cuda.blockIdx.x))
        gsize = i32(GROUP_M * num_n)
        grp = i32(pid // gsize)
        first = i32(grp * GROUP_M)
        gm = i32(min(i32(num_m - first), GROUP_M))
        rem = i32(pid - i32(grp * gsize))
        bm = i32(i32(first + i32(rem % gm)) * BM)
        bn = i32(i32(rem // gm) * BN)
        for i in range(NACC):
            acc[i] = float32(0)
        l16 = i32(lane % 16)
        hi = i32(lane // 16)
        for ks in range(KS):
            aoff[ks] = i32(i32(i32(wm + l16) * BK) + i32(a_phys(l16, i32(ks * 2 + hi)) * 8))
        for np_ in range(NBP):
            boff[np_] = i32(i32(l16 * BN) + i32(b_phys(l16, i32(i32(wn // 8) + i32(np_ * 2 + hi))) * 8))
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
        for s in range(S - 1):  # prologue: STAGES - 1 tiles in flight
            if s < n_full:
                load_fast(a, b, As, Bs, i32(s * ASTAGE), i32(s * BSTAGE), ga, gb, gas, gbs, sa0, ra0, ca,
                          sb0, rb0, cb)
            elif s < n_k:
                load_checked(a, b, As, Bs, s, i32(s * BK), M, N, K, t, bm, bn, vec_a, vec_b)
            ga = i32(ga + BK)
            gb = i32(gb + gbk)
            cp_async_commit()
        cp_async_wait(WAIT)
        cuda.syncthreads()
        load_frags(As, Bs, ra, rb, 0, i32(0), i32(0), 0, aoff, boff, scr_l)
        rs = i32(0)      # the stage read this k-tile
        ws = i32(S - 1)  # the stage written (tile kt + STAGES - 1): read by tile kt - 1, now free
        kt = i32(0)
        while kt < n_k:
            nk = i32(kt + (S - 1))
            if nk < n_full:
                load_fast(a, b, As, Bs, i32(ws * ASTAGE), i32(ws * BSTAGE), ga, gb, gas, gbs, sa0, ra0, ca,
                          sb0, rb0, cb)
            elif nk < n_k:
                load_checked(a, b, As, Bs, ws, i32(nk * BK), M, N, K, t, bm, bn, vec_a, vec_b)
            cp_async_commit()
            ga = i32(ga + BK)
            gb = i32(gb + gbk)
            sta = i32(rs * ASTAGE)
            stb = i32(rs * BSTAGE)
            rn = i32(rs + 1)
            if rn == S:
                rn = i32(0)
            for ks in range(KS - 1):  # fragments of step ks + 1 load while step ks multiplies
                load_frags(As, Bs, ra, rb, (ks + 1) % 2, sta, stb, ks + 1, aoff, boff, scr_l)
                mmas(ra, rb, acc, ks % 2, scr_a, scr_b)
            # the last step (outside the loop, which the barrier would keep from unrolling)
            cp_async_wait(WAIT)  # tile kt + 1 has landed (this thread's copies) ...
            cuda.syncthreads()   # ... and everyone's; every warp is done reading stage rs
            load_frags(As, Bs, ra, rb, 0, i32(rn * ASTAGE), i32(rn * BSTAGE), 0, aoff, boff, scr_l)
            mmas(ra, rb, acc, 1, scr_a, scr_b)
            rs = rn
            ws = i32(ws + 1)
            if ws == S:
                ws = i32(0)
            kt = i32(kt + 1)
        cp_async_wait(0)
        g = lane // 4
        t4 = lane % 4
        if vec_c and bm + BM <= Mi and bn + BN <= Ni:  # rung 17's 16-byte epilogue
            odd = i32(t4 % 2)
            cbase = i32(i32(i32(bm + wm + g + 8 * odd) * Ni) + i32(bn + wn + 2 * t4 - 2 * odd))
            up = odd == 1
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
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

    return gemm_tc_deep


@dataclass(frozen=True)
class TCDeep(C._Tunable):
    WARPS_M: int = 2
    WARPS_N: int = 2
    MT: int = 4
    NT8: int = 8
    BK: int = 64
    STAGES: int = 3
    GROUP_M: int = 8

    rung: ClassVar[int] = 18
    name: ClassVar[str] = "tc_deep"
    what: ClassVar[str] = (
        "mma.sync to its ceiling: 64-deep k-tiles in a 3-stage cp.async ring of 96 KiB of dynamic "
        "shared memory, fragments double-buffered (step k+1's ldmatrix before step k's mmas), and "
        "blocks rasterized in groups of 8 block rows so the blocks resident at once share A and B "
        "panels in L2.")

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

    def dynamic_shared_bytes(self) -> int:
        """The ring, float16: STAGES x (BM x BK + BK x BN)."""
        return self.STAGES * (self.BM * self.BK + self.BK * self.BN) * 2

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")
        if self.BK not in (32, 64) or self.STAGES < 2 or self.NT8 % 2 or self.BN // 8 < 8:
            raise UnsupportedProblem(f"{self.label}: needs BK 32 or 64 (an even number of k-steps), STAGES >= 2, "
                                     f"NT8 even and BN >= 64 (got BK={self.BK}, STAGES={self.STAGES}, "
                                     f"NT8={self.NT8}, BN={self.BN})")
        C._check_launch(self, problem, self.grid(problem), self.threads())
        check_dynamic_shared(f"{self.label} {self.config}", self.dynamic_shared_bytes())
        m, n, k = C._dims(problem)
        for what, size in (("A (m*k)", m * k), ("B (k*n)", k * n), ("C (m*n)", m * n)):
            if size + 64 > I32_LIMIT:
                raise UnsupportedProblem(f"{self.label}: {what} has {size} elements; this rung's offsets are "
                                         "32-bit, which reach 2**31 - 1")

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        kern = _tc_deep_kernel(self.WARPS_M, self.WARPS_N, self.MT, self.NT8, self.BK, self.STAGES, self.GROUP_M)
        args = (bufs["a"], bufs["b"], bufs["c"].reshape(-1), m, n, k, k % 8 == 0, n % 8 == 0, n % 4 == 0)
        return [DynamicSharedLaunch(kern, self.grid(problem), self.threads(), args, self.dynamic_shared_bytes())]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        l2 = (m * k * math.ceil(n / self.BN) + k * n * math.ceil(m / self.BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                       smem_bytes=float(l2 - m * n * F32) * 2, limiter="tensor",
                       notes=f"{self.BM}x{self.BN}x{self.BK} block tile, {self.STAGES} stages in dynamic shared "
                             f"memory, blocks in groups of {self.GROUP_M} block rows",
                       extra={"peak": "tensor.fp16", "group_m": self.GROUP_M})
