"""GEMM's SIMT rungs, 0-11: the oracle, then Simon Boehm's SGEMM worklog step for step, to
warp tiling and the configuration the autotuner picked (:mod:`perfkit.kernels.gemm` has
the ledger)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32, int32, int64, uint32, uint64

from ... import backend
from .._vector import ld4, load4, st4
from ..base import (MAX_STATIC_SHARED, MAX_THREADS_PER_BLOCK, Launch, OracleVariant, Traffic, UnsupportedProblem,
                    Variant)
from . import _common as C
from ._common import F32, I32_LIMIT, Problem


# --- rung 0 --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = (
        "cuBLAS through CuPy: SGEMM with TF32 off for float32, and for float16 cublasGemmEx's "
        "tensor-core HGEMM with float32 accumulation and output, the tensor-core rungs' contract. "
        "NumPy in float32 in the simulator.")

    def gpu(self, problem, x, out):
        import cupy as cp

        if problem.dtype == "float32":
            cp.matmul(x["a"], x["b"], out=out["c"])
        else:
            C._gemm_ex_f16_f32(x["a"], x["b"], out["c"])

    def host(self, problem, x):
        return x["a"].astype(np.float32) @ x["b"].astype(np.float32)


# --- rung 1 --------------------------------------------------------------------------------
@cuda.jit
def gemm_naive(a, b, c, M, N, K):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # neighbours in a warp: rows
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < M and col < N:
        acc = float32(0)
        for i in range(K):
            acc += a[row, i] * b[i, col]
        c[row, col] = acc


@dataclass(frozen=True)
class Naive(C._Tunable):
    block: int = 32

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per element of C, looping over k. threadIdx.x indexes rows, so the 32 threads "
        "of a warp read 32 different rows of A and write a column of C: nothing coalesces.")

    def supports(self, problem):
        C._require_float32(self, problem)
        C._check_launch(self, problem, self.grid(problem), (self.block, self.block))

    def grid(self, problem):
        return -(-problem.m // self.block), -(-problem.n // self.block)  # rows of C along grid.x

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        return [Launch(gemm_naive, self.grid(problem), (self.block, self.block),
                       (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l1_bytes=2.0 * m * n * k * F32 * 8,
                       l2_bytes=C._l1_tiled_l2(m, n, k, self.block) + m * n * 32.0,
                       limiter="l2/lsu",
                       notes="uncoalesced: each warp load of A touches 32 sectors; expect ~1% of cuBLAS")


# --- rung 2 --------------------------------------------------------------------------------
@cuda.jit
def gemm_coalesced(a, b, c, M, N, K):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # neighbours in a warp: columns
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < M and col < N:
        acc = float32(0)
        for i in range(K):
            acc += a[row, i] * b[i, col]  # a[row, i]: one broadcast; b[i, col]: one 128-B line
        c[row, col] = acc


@dataclass(frozen=True)
class Coalesced(Naive):
    rung: ClassVar[int] = 2
    name: ClassVar[str] = "coalesced"
    what: ClassVar[str] = (
        "Swap the roles of threadIdx.x and threadIdx.y: a warp now covers 32 consecutive columns "
        "of C, so its loads of B and stores of C coalesce and its load of A is a broadcast. Same "
        "arithmetic, far fewer memory transactions.")

    def grid(self, problem):
        return C._tile_grid(problem, self.block, self.block)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        return [Launch(gemm_coalesced, self.grid(problem), (self.block, self.block),
                       (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l1_bytes=m * n * k * F32 * (1 / 32 + 1),
                       l2_bytes=C._l1_tiled_l2(m, n, k, self.block) + m * n * F32,
                       limiter="l2", notes="coalesced B loads: ~6-8x the naive rung; still one load per FMA")


# --- rung 3 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _smem_kernel(T: int):
    @cuda.jit
    def gemm_smem_tiling(a, b, c, M, N, K):
        As = cuda.shared.array((T, T), float32)  # (BM, BK) tile of A
        Bs = cuda.shared.array((T, T), float32)  # (BK, BN) tile of B
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * T + ty
        col = cuda.blockIdx.x * T + tx
        acc = float32(0)
        for k0 in range(0, K, T):
            As[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0)
            Bs[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0)
            cuda.syncthreads()
            for kk in range(T):
                acc += As[ty, kk] * Bs[kk, tx]
            cuda.syncthreads()
        if row < M and col < N:
            c[row, col] = acc

    return gemm_smem_tiling


@dataclass(frozen=True)
class SmemTiling(C._Tunable):
    tile: int = 32

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "smem_tiling"
    what: ClassVar[str] = (
        "Each block stages a 32x32 tile of A and of B in shared memory and its threads read their "
        "operands from there: a global element is fetched once per block, not once per thread. "
        "Partial tiles are zero-filled, so any size works.")

    def supports(self, problem):
        C._require_float32(self, problem)
        T = self.tile
        C._check_launch(self, problem, C._tile_grid(problem, T, T), (T, T), self.shared_bytes())

    def shared_bytes(self) -> int:
        return 2 * self.tile * self.tile * F32  # As and Bs

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        T = self.tile
        return [Launch(_smem_kernel(T), C._tile_grid(problem, T, T), (T, T), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        T = self.tile
        return C._tiled_traffic(problem, T, T, T, 2 * F32, "smem",
                              "global traffic / 32; now 2 shared loads per FMA bound it: ~2x rung 2")


# --- rung 4 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _blocktile_1d_kernel(BM: int, BN: int, BK: int, TM: int, MIN_BLOCKS: int = 1):
    NT = BM * BN // TM
    LA, LB = -(-BM * BK // NT), -(-BK * BN // NT)  # loads per thread per tile (the last may be idle)

    @C._jit(launch_bounds=(NT, MIN_BLOCKS))
    def gemm_blocktile_1d(a, b, c, M, N, K):
        As = cuda.shared.array((BM, BK), float32)
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TM, float32)  # TM results of one column: registers
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % BN
        t_row = t // BN  # this thread's rows: t_row * TM ... + TM - 1
        r0 = uint64(t_row * TM)  # unsigned: no negative-index fix-up on every shared load
        c0 = uint64(t_col)
        for i in range(TM):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for s in range(LA):  # a constant trip count: each thread's loads are known at compile time
                idx = t + s * NT
                r = idx // BK
                q = idx % BK
                if idx < BM * BK:
                    As[r, q] = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
            for s in range(LB):
                idx = t + s * NT
                r = idx // BN
                q = idx % BN
                if idx < BK * BN:
                    Bs[r, q] = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
            cuda.syncthreads()
            for kk in range(BK):
                ku = uint64(kk)
                bt = Bs[ku, c0]  # one shared load of B feeds TM FMAs
                for i in range(TM):
                    acc[i] += As[r0 + uint64(i), ku] * bt
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            if r < M and bn + t_col < N:
                c[r, bn + t_col] = acc[i]

    return gemm_blocktile_1d


@dataclass(frozen=True)
class Blocktile1D(C._Tunable):
    BM: int = 64
    BN: int = 64
    BK: int = 8
    TM: int = 8
    MIN_BLOCKS: int = 2  # launch_bounds(512, 2): at most 64 registers, 2 blocks (32 warps) per SM

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "blocktile_1d"
    what: ClassVar[str] = (
        "Each thread computes 8 results down a column of C in a 64x64 block tile, keeping each "
        "value of B it reads from shared memory in a register for 8 FMAs. Shared loads per FMA "
        "fall from 2 to about 1.1.")

    def supports(self, problem):
        C._require_float32(self, problem)
        if self.BM % self.TM:
            raise UnsupportedProblem(f"{self.label}: BM={self.BM} must be a multiple of TM={self.TM}")
        C._check_launch(self, problem, C._tile_grid(problem, self.BM, self.BN), self.threads(), self.shared_bytes())

    def threads(self) -> int:
        return self.BM * self.BN // self.TM

    def shared_bytes(self) -> int:
        return (self.BM * self.BK + self.BK * self.BN) * F32

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        kern = _blocktile_1d_kernel(self.BM, self.BN, self.BK, self.TM, self.MIN_BLOCKS)
        grid = C._tile_grid(problem, self.BM, self.BN)
        return [Launch(kern, grid, self.threads(), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        return C._tiled_traffic(problem, self.BM, self.BN, self.BK, (1 + 1 / self.TM) * F32, "smem",
                              "~1.1 shared loads per FMA: ~2-3x rung 3")


# --- rung 5 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _blocktile_2d_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, MIN_BLOCKS: int = 1):
    NT = (BM // TM) * (BN // TN)
    TMN = TM * TN  # array shapes must be compile-time constants: computed here, not in the kernel
    LA, LB = -(-BM * BK // NT), -(-BK * BN // NT)  # loads per thread per tile (the last may be idle)

    @C._jit(launch_bounds=(NT, MIN_BLOCKS))
    def gemm_blocktile_2d(a, b, c, M, N, K):
        As = cuda.shared.array((BM, BK), float32)
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)  # (TM, TN) tile of C in registers
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % (BN // TN)
        t_row = t // (BN // TN)
        r0 = uint64(t_row * TM)
        c0 = uint64(t_col * TN)
        for i in range(TM * TN):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for s in range(LA):  # constant trip counts
                idx = t + s * NT
                r = idx // BK
                q = idx % BK
                if idx < BM * BK:
                    As[r, q] = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
            for s in range(LB):
                idx = t + s * NT
                r = idx // BN
                q = idx % BN
                if idx < BK * BN:
                    Bs[r, q] = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
            cuda.syncthreads()
            for kk in range(BK):
                ku = uint64(kk)  # unsigned indices: no negative-index fix-up on each shared load
                for i in range(TM):
                    reg_m[i] = As[r0 + uint64(i), ku]
                for j in range(TN):
                    reg_n[j] = Bs[ku, c0 + uint64(j)]
                for i in range(TM):  # outer product: TM + TN loads feed TM * TN FMAs
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < N:
                    c[r, q] = acc[i * TN + j]

    return gemm_blocktile_2d


@dataclass(frozen=True)
class Blocktile2D(C._Tunable):
    BM: int = 128
    BN: int = 128
    BK: int = 8
    TM: int = 8
    TN: int = 8
    MIN_BLOCKS: int = 2  # launch_bounds(256, 2): at most 128 registers, 2 blocks (16 warps) per SM

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "blocktile_2d"
    what: ClassVar[str] = (
        "Each thread computes an 8x8 tile of C as a sum of outer products: per k step it loads 8 "
        "values of A and 8 of B into registers for 64 FMAs, so shared loads per FMA fall to 0.25. "
        "The 128x128 block tile also reads fewer global bytes per FMA.")

    def supports(self, problem):
        C._require_float32(self, problem)
        if self.BM % self.TM or self.BN % self.TN:
            raise UnsupportedProblem(f"{self.label}: BM, BN must be multiples of TM, TN")
        C._check_launch(self, problem, C._tile_grid(problem, self.BM, self.BN), self.threads(), self.shared_bytes())

    def _kernel(self):
        return _blocktile_2d_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, self.MIN_BLOCKS)

    def threads(self) -> int:
        return (self.BM // self.TM) * (self.BN // self.TN)

    def shared_bytes(self) -> int:
        return (self.BM * self.BK + self.BK * self.BN) * F32

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        grid = C._tile_grid(problem, self.BM, self.BN)
        return [Launch(self._kernel(), grid, self.threads(), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        return C._tiled_traffic(problem, self.BM, self.BN, self.BK, (1 / self.TN + 1 / self.TM) * F32, "fma",
                              "0.25 shared loads per FMA: FMA-bound at last, ~2x rung 4")


# --- rung 6 --------------------------------------------------------------------------------
#: rungs 7-9 store B's column tc * TN + j at j * (TCOLS + 4) + tc (TCOLS = BN / TN threads along
#: a row): the swizzle makes a half-warp's TN loads of B 16 consecutive words each; the 4-word
#: pad after each of the TN runs spreads the stores.  A warp stores one 128-wide row of B as 4
#: consecutive columns a lane, so lanes 2i and 2i + 1 write runs j and j + 4 at the same tc:
#: unpadded, 4 * 16 = 64 words = 0 banks apart (2-way); padded, 4 * 20 = 80 = 16 banks apart.
_B_PAD = 4


def _b_row(BN: int, TN: int) -> int:
    """Words of one row of the swizzled, padded B tile of rungs 7-9."""
    return TN * (BN // TN + _B_PAD)


@lru_cache(maxsize=None)
def _vectorized_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, PAD: int, SWIZZLE: bool, MIN_BLOCKS: int = 1):
    """Rungs 6 and 7: 128-bit global loads, A^T in shared memory (rung 7 adds PAD and SWIZZLE)."""
    NT = (BM // TM) * (BN // TN)
    TCOLS = BN // TN  # threads along a row of the block tile
    TMN = TM * TN
    BMP = BM + PAD
    SB = TCOLS + _B_PAD  # rung 7: words between the swizzled runs of B (rung 6: unused)
    BNS = _b_row(BN, TN) if SWIZZLE else BN
    LA, LB = -(-BM * BK // 4 // NT), -(-BK * BN // 4 // NT)  # 4-vectors per thread per tile

    @C._jit(launch_bounds=(NT, MIN_BLOCKS))
    def gemm_vectorized(a, b, c, M, N, K, vec_a, vec_b):
        AsT = cuda.shared.array((BK, BMP), float32)  # A tile stored transposed: (BK, BM + PAD)
        Bs = cuda.shared.array((BK, BNS), float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % TCOLS
        t_row = t // TCOLS
        r0 = uint64(t_row * TM)
        c0 = uint64(t_col) if SWIZZLE else uint64(t_col * TN)
        for i in range(TM * TN):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for s in range(LA):  # 4 consecutive k of one row of A per load
                v = t + s * NT
                if v >= BM * BK // 4:
                    break
                r = v // (BK // 4)
                q = (v % (BK // 4)) * 4
                if vec_a and bm + r < M and k0 + q + 3 < K:
                    x0, x1, x2, x3 = load4(a, bm + r, k0 + q)  # one 128-bit load
                else:
                    x0 = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
                    x1 = a[bm + r, k0 + q + 1] if bm + r < M and k0 + q + 1 < K else float32(0)
                    x2 = a[bm + r, k0 + q + 2] if bm + r < M and k0 + q + 2 < K else float32(0)
                    x3 = a[bm + r, k0 + q + 3] if bm + r < M and k0 + q + 3 < K else float32(0)
                AsT[q, r] = x0
                AsT[q + 1, r] = x1
                AsT[q + 2, r] = x2
                AsT[q + 3, r] = x3
            for s in range(LB):  # 4 consecutive columns of one row of B
                v = t + s * NT
                if v >= BK * BN // 4:
                    break
                r = v // (BN // 4)
                q = (v % (BN // 4)) * 4
                if vec_b and k0 + r < K and bn + q + 3 < N:
                    y0, y1, y2, y3 = load4(b, k0 + r, bn + q)
                else:
                    y0 = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
                    y1 = b[k0 + r, bn + q + 1] if k0 + r < K and bn + q + 1 < N else float32(0)
                    y2 = b[k0 + r, bn + q + 2] if k0 + r < K and bn + q + 2 < N else float32(0)
                    y3 = b[k0 + r, bn + q + 3] if k0 + r < K and bn + q + 3 < N else float32(0)
                if SWIZZLE:  # column (tc * TN + j) is stored at (j * SB + tc), SB = TCOLS + 4
                    Bs[r, ((q) % TN) * SB + (q) // TN] = y0
                    Bs[r, ((q + 1) % TN) * SB + (q + 1) // TN] = y1
                    Bs[r, ((q + 2) % TN) * SB + (q + 2) // TN] = y2
                    Bs[r, ((q + 3) % TN) * SB + (q + 3) // TN] = y3
                else:
                    Bs[r, q] = y0
                    Bs[r, q + 1] = y1
                    Bs[r, q + 2] = y2
                    Bs[r, q + 3] = y3
            cuda.syncthreads()
            for kk in range(BK):
                ku = uint64(kk)  # unsigned indices: no negative-index fix-up on each shared load
                for i in range(TM):
                    reg_m[i] = AsT[ku, r0 + uint64(i)]  # consecutive: one broadcast per warp
                for j in range(TN):
                    if SWIZZLE:
                        reg_n[j] = Bs[ku, c0 + uint64(j * SB)]  # 16 consecutive words: no conflict
                    else:
                        reg_n[j] = Bs[ku, c0 + uint64(j)]  # stride TN words: 4-way conflicts
                for i in range(TM):
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < N:
                    c[r, q] = acc[i * TN + j]

    return gemm_vectorized


@dataclass(frozen=True)
class Vectorized(Blocktile2D):
    rung: ClassVar[int] = 6
    name: ClassVar[str] = "vectorized"
    what: ClassVar[str] = (
        "Global loads become 128-bit (load4: one ld.global.v4.f32 for 4 floats) when k (for A) or "
        "n (for B) is a multiple of 4, so rows stay 16-byte aligned. A is stored transposed so "
        "each thread's 8 values of A are consecutive in shared memory.")
    PAD: ClassVar[int] = 0
    SWIZZLE: ClassVar[bool] = False
    MIN_BLOCKS: int = 2

    def supports(self, problem):
        super().supports(problem)
        if self.BK % 4 or self.BN % 4:
            raise UnsupportedProblem(f"{self.label}: BK and BN must be multiples of 4 (vector loads)")

    def _kernel(self):
        return _vectorized_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, self.PAD, self.SWIZZLE, self.MIN_BLOCKS)

    def shared_bytes(self) -> int:
        bn = _b_row(self.BN, self.TN) if self.SWIZZLE else self.BN
        return self.BK * (self.BM + self.PAD + bn) * F32  # AsT (padded) and Bs (rung 7: swizzled, padded)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        grid = C._tile_grid(problem, self.BM, self.BN)
        args = (bufs["a"], bufs["b"], bufs["c"], m, n, k, k % 4 == 0, n % 4 == 0)
        return [Launch(self._kernel(), grid, self.threads(), args)]

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "4x fewer global load instructions; same bytes: ~+10%"})


# --- rung 7 --------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoBankConflicts(Vectorized):
    rung: ClassVar[int] = 7
    name: ClassVar[str] = "no_bank_conflicts"
    what: ClassVar[str] = (
        "Neighbouring threads read B from shared memory 8 words apart, a 4-way bank conflict; "
        "storing B swizzled (column t_col*8 + j at j*20 + t_col) makes those reads 16 consecutive "
        "words. Padding each A^T row by 4 words spreads the transposing stores of A over all "
        "banks.")
    PAD: ClassVar[int] = 4
    SWIZZLE: ClassVar[bool] = True

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "same bytes, no 4-way replays of shared loads: ~+10-20%"})


# --- rung 8 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _double_buffer_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, MIN_BLOCKS: int = 1):
    """Rung 8: rung 7's tiles and layouts, double-buffered.

    Tile i of k lives in buffer i % 2.  Step i issues the global loads of tile i + 1 into
    registers, multiplies tile i from its buffer while they are in flight, stores tile i + 1
    into the other buffer, then one barrier.  What keeps the buffering cheap: the k-loop is
    unrolled by 2, so buffer 0 and buffer 1 are separate shared arrays named at compile time
    (no buffer index to compute, every shared offset a base plus a constant); each thread's
    tile coordinates (which 4-vectors of A and B it moves, where they go in shared memory) are
    computed once before the loop; the tile counter is a 32-bit int.  The global loads are
    rung 7's (bounds-checked, int64 indices: rung 9 takes those on).
    """
    NT = (BM // TM) * (BN // TN)
    TCOLS = BN // TN
    NA = BM * BK // 4 // NT  # 4-vectors of A each thread loads per tile
    NB = BK * BN // 4 // NT
    PAD = 4
    BMP = BM + PAD
    SB, BNS = TCOLS + _B_PAD, _b_row(BN, TN)  # B swizzled and padded as rung 7
    TMN = TM * TN
    NA4, NB4 = NA * 4, NB * 4
    ASZ, BSZ = BK * BMP, BK * BNS  # words of one buffer of A^T and of B (shapes: constants)
    RUNS = TN % 4 == 0  # a 4-vector of B (columns q..q+3, q % 4 == 0) stays in one run: column q + e at +e*SB
    dev = C._jit(device=True, forceinline=True)

    @dev
    def fetch(a, b, ra, rb, a_row, a_col, b_row, b_col, k0, M, N, K, vec_a, vec_b):
        """Global -> registers: tile (k0 // BK) of A and B, zeros outside (rung 7's loads)."""
        for s in range(NA):
            r = a_row[s]
            q = k0 + a_col[s]
            if vec_a and r < M and q + 3 < K:
                ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = load4(a, r, q)
            else:
                for e in range(4):
                    ra[4 * s + e] = a[r, q + e] if r < M and q + e < K else float32(0)
        for s in range(NB):
            r = k0 + b_row[s]
            q = b_col[s]
            if vec_b and r < K and q + 3 < N:
                rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = load4(b, r, q)
            else:
                for e in range(4):
                    rb[4 * s + e] = b[r, q + e] if r < K and q + e < N else float32(0)

    @dev
    def stash(AsT, Bs, ra, rb, at_off, bs_off):
        """Registers -> one shared buffer: A transposed, B swizzled (offsets hoisted)."""
        for s in range(NA):
            for e in range(4):  # A[r, q + e] at A^T row q + e, column r
                AsT[at_off[s] + uint32(e * BMP)] = ra[4 * s + e]
        for s in range(NB):
            for e in range(4):
                if RUNS:  # columns q..q+3 of B in one run of the swizzle: SB words apart
                    Bs[bs_off[4 * s] + uint32(e * SB)] = rb[4 * s + e]
                else:
                    Bs[bs_off[4 * s + e]] = rb[4 * s + e]

    @dev
    def multiply(AsT, Bs, acc, reg_m, reg_n, r0, c0):
        """The BK outer products of one shared buffer (rung 7's k-step), with a 32-bit counter
        and this thread's two shared offsets advanced by a row each step."""
        ao = r0
        bo = c0
        for kk in range(int32(0), int32(BK)):
            for i in range(TM):
                reg_m[i] = AsT[ao + uint32(i)]
            for j in range(TN):
                reg_n[j] = Bs[bo + uint32(j * SB)]
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += reg_m[i] * reg_n[j]
            ao += uint32(BMP)
            bo += uint32(BNS)

    @C._jit(launch_bounds=(NT, MIN_BLOCKS))
    def gemm_double_buffer(a, b, c, M, N, K, vec_a, vec_b):
        AsT0 = cuda.shared.array(ASZ, float32)  # buffer 0, even tiles: A^T rows of BMP words
        Bs0 = cuda.shared.array(BSZ, float32)  # B rows of BNS words, swizzled
        AsT1 = cuda.shared.array(ASZ, float32)  # buffer 1: odd tiles
        Bs1 = cuda.shared.array(BSZ, float32)
        ra = cuda.local.array(NA4, float32)  # the next tile, staged in registers
        rb = cuda.local.array(NB4, float32)
        a_row = cuda.local.array(NA, int64)  # hoisted: this thread's global rows / columns
        a_col = cuda.local.array(NA, int64)
        b_row = cuda.local.array(NB, int64)
        b_col = cuda.local.array(NB, int64)
        at_off = cuda.local.array(NA, uint32)  # hoisted: where they go in a shared buffer
        bs_off = cuda.local.array(NB4, uint32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % TCOLS
        t_row = t // TCOLS
        r0 = uint32(t_row * TM)  # this thread's first word in a row of A^T and of B
        c0 = uint32(t_col)
        for i in range(TM * TN):
            acc[i] = float32(0)
        for s in range(NA):  # 4 consecutive k of one row of A
            v = t + s * NT
            r = v // (BK // 4)
            q = (v % (BK // 4)) * 4
            a_row[s] = bm + r
            a_col[s] = q
            at_off[s] = uint32(q * BMP + r)  # stored transposed: A[r, q + e] at A^T row q + e
        for s in range(NB):  # 4 consecutive columns of one row of B
            v = t + s * NT
            r = v // (BN // 4)
            q = (v % (BN // 4)) * 4
            b_row[s] = r
            b_col[s] = bn + q
            for e in range(4):  # column (tc * TN + j) is stored at (j * SB + tc), as rung 7
                bs_off[4 * s + e] = uint32(r * BNS + ((q + e) % TN) * SB + (q + e) // TN)
        n_tiles = int32((K + BK - 1) // BK)
        fetch(a, b, ra, rb, a_row, a_col, b_row, b_col, 0, M, N, K, vec_a, vec_b)
        stash(AsT0, Bs0, ra, rb, at_off, bs_off)
        cuda.syncthreads()
        # unrolled by 2: tile i (even) in buffer 0, tile i + 1 in buffer 1
        for i in range(int32(0), n_tiles, int32(2)):
            # tile i + 1 loads while tile i multiplies; it lands in buffer 1; one barrier
            if i + int32(1) < n_tiles:
                fetch(a, b, ra, rb, a_row, a_col, b_row, b_col, int64(i + int32(1)) * BK, M, N, K, vec_a, vec_b)
            multiply(AsT0, Bs0, acc, reg_m, reg_n, r0, c0)
            if i + int32(1) < n_tiles:
                stash(AsT1, Bs1, ra, rb, at_off, bs_off)
            cuda.syncthreads()
            if i + int32(1) < n_tiles:  # the same with the buffers swapped
                if i + int32(2) < n_tiles:
                    fetch(a, b, ra, rb, a_row, a_col, b_row, b_col, int64(i + int32(2)) * BK, M, N, K, vec_a, vec_b)
                multiply(AsT1, Bs1, acc, reg_m, reg_n, r0, c0)
                if i + int32(2) < n_tiles:
                    stash(AsT0, Bs0, ra, rb, at_off, bs_off)
                cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < N:
                    c[r, q] = acc[i * TN + j]

    return gemm_double_buffer


@dataclass(frozen=True)
class DoubleBuffer(Blocktile2D):
    rung: ClassVar[int] = 8
    name: ClassVar[str] = "double_buffer"
    what: ClassVar[str] = (
        "Two shared buffers: while the block multiplies tile t from one, the global loads of tile "
        "t+1 are in flight and then land in the other, so their latency hides behind FMAs and a "
        "k-tile needs one barrier, not two. The k-loop is unrolled by two so each buffer is its "
        "own shared array.")

    def supports(self, problem):
        super().supports(problem)
        nt = self.threads()
        if (self.BM * self.BK // 4) % nt or (self.BK * self.BN // 4) % nt or self.BK % 4 or self.BN % 4:
            raise UnsupportedProblem(f"{self.label}: the A and B tiles must split into whole 4-vectors "
                                     f"per thread ({nt} threads)")

    def _kernel(self):
        return _double_buffer_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, self.MIN_BLOCKS)

    def shared_bytes(self) -> int:
        return 2 * self.BK * (self.BM + 4 + _b_row(self.BN, self.TN)) * F32  # two buffers of AsT and Bs (padded)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        grid = C._tile_grid(problem, self.BM, self.BN)
        args = (bufs["a"], bufs["b"], bufs["c"], m, n, k, k % 4 == 0, n % 4 == 0)
        return [Launch(self._kernel(), grid, self.threads(), args)]

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "same bytes as rung 7; the loads' latency hidden, one "
                                                  "barrier a tile (model: ~+10%)"})


# --- rungs 9 and 10: 32-bit index arithmetic, then warp tiling --------------------------------


def _require_int32_offsets(v: Variant, problem: Problem) -> None:
    """Rungs whose offsets are 32-bit ints: every element of A, B and C must be reachable."""
    m, n, k = C._dims(problem)
    for name, size in (("A (m*k)", m * k), ("B (k*n)", k * n), ("C (m*n)", m * n)):
        if size + 64 > I32_LIMIT:
            raise UnsupportedProblem(f"{v.label}: {name} has {size} elements; this rung indexes with 32-bit "
                                     f"offsets, which reach 2**31 - 1 (use rung 8 for larger matrices)")


#: the A^T tile of rungs 9-11: rows of BM + 4 words, and 8 more words after every 8 rows
_AT_PAD, _AT_SKEW = 4, 8


def _at_words(BM: int, BK: int) -> int:
    """Words of one A^T buffer: BK rows of BM + 4, skewed by 8 words every 8 rows."""
    return BK * (BM + _AT_PAD) + _AT_SKEW * ((BK - 1) // 8)


if backend.is_simulator():

    def st2(arr, off, x0, x1):
        """``arr[off:off+2] = x0, x1`` (1-D float32, ``off`` even): one 64-bit store on a GPU."""
        off = int(off)
        if arr.ndim != 1 or arr.strides[0] != 4 or off % 2 or not 0 <= off <= arr.shape[0] - 2:
            raise RuntimeError(f"st2: 64-bit access at element {off} of a {arr.shape} array "
                               f"(strides {arr.strides}) is misaligned or out of bounds: a GPU would fault here")
        arr[off], arr[off + 1] = x0, x1

else:
    from llvmlite import ir
    from numba import types as _nbtypes
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def st2(typingctx, arr, off, x0, x1):
        """``arr[off:off+2] = x0, x1`` as one 64-bit store (``STS.64`` in shared memory): 1-D
        float32 ``arr``, ``off`` even (8-byte aligned), no negative-index wraparound."""
        if not (isinstance(arr, _nbtypes.Array) and arr.ndim == 1 and arr.dtype == _nbtypes.float32
                and isinstance(off, _nbtypes.Integer)):
            return None
        sig = _nbtypes.void(arr, off, x0, x1)

        def codegen(context, builder, signature, args):
            aryty, offty = signature.args[0], signature.args[1]
            ary = context.make_array(aryty)(context, builder, args[0])
            idx = [context.cast(builder, args[1], offty, _nbtypes.intp)]
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
            vty = ir.VectorType(ir.FloatType(), 2)
            vec = ir.Constant(vty, ir.Undefined)
            for k in range(2):
                x = context.cast(builder, args[2 + k], signature.args[2 + k], _nbtypes.float32)
                vec = builder.insert_element(vec, x, ir.Constant(ir.IntType(32), k))
            builder.store(vec, builder.bitcast(ptr, vty.as_pointer()), align=8)
            return context.get_dummy_value()

        return sig, codegen


@lru_cache(maxsize=None)
def _k_block(BK: int, BMP: int, BN: int, TM: int, TN: int, TCOLS: int, SUBM: int, SUBN: int, WARP: bool,
             SKEW: int = 0):
    """The BK k-steps of one shared tile, written out one after another (generated source): a
    loop over k with 64 FMAs a step is past LLVM's full-unroll threshold, and a rolled loop pays
    a 64-bit counter and recomputed addresses every step.  Unrolled, every shared offset is the
    lane's base (``abase``, ``bbase``: int64, computed once per tile) plus a constant, which
    ptxas folds into the LDS instruction's immediate.  Row ``kk`` of the A^T tile starts at
    ``kk * BMP + SKEW * (kk // 8)`` (see ``_simt_kernel``)."""
    body = ["def k_block(As, Bs, acc, rm, rn, abase, bbase):"]
    for kk in range(BK):
        for i4 in range(TM // 4):
            off = kk * BMP + SKEW * (kk // 8) + i4 * (SUBM if WARP else 4)
            body.append(f"    rm[{4 * i4}], rm[{4 * i4 + 1}], rm[{4 * i4 + 2}], rm[{4 * i4 + 3}] = ld4(As, abase + {off})")
        if WARP:
            for j4 in range(TN // 4):
                off = kk * BN + j4 * SUBN
                body.append(f"    rn[{4 * j4}], rn[{4 * j4 + 1}], rn[{4 * j4 + 2}], rn[{4 * j4 + 3}] = ld4(Bs, bbase + {off})")
        else:  # B swizzled as rung 8: column (tc * TN + j) at (j * TCOLS + tc), TCOLS (here) the padded
            # run length and BN (here) the padded row; unsigned: no wraparound
            for j in range(TN):
                body.append(f"    rn[{j}] = Bs[uint64(bbase + {kk * BN + j * TCOLS})]")
        body.append(f"    for i in range({TM}):")
        body.append(f"        for j in range({TN}):")
        body.append(f"            acc[i * {TN} + j] += rm[i] * rn[j]")
    ns = {"ld4": ld4, "uint64": uint64}
    exec(compile("\n".join(body), f"<gemm k_block BK={BK} TM={TM} TN={TN} warp={WARP}>", "exec"), ns)
    return C._jit(device=True, forceinline=True)(ns["k_block"])


@lru_cache(maxsize=None)
def _simt_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, LR: int, WARP: bool, MIN_BLOCKS: int = 1):
    """Double-buffered register-tiled SGEMM with 32-bit flat offsets (rungs 9, 10, 11).

    A, B, C arrive as 1-D views; every offset is an int32 (Numba would type them int64:
    numba#8447), array accesses on the hot path go through ld4/st4 (128-bit, no negative-index
    wraparound), every inner loop has a compile-time trip count and the k-steps of a tile are
    written out (``_k_block``).  Full k-tiles of aligned matrices take a loop with no bounds
    checks: rows of A past m and columns of B past n are clamped to the last one (they feed only
    elements of C that are never stored); the partial last k-tile and unaligned matrices take a
    second loop whose loads are checked and zero-filled.

    ``WARP=False`` keeps rung 8's thread layout (a TM x TN tile per thread, B read with a
    swizzle as TN scalar loads); ``WARP=True`` arranges each warp's 32 lanes as LR x LC over
    4x4 sub-tiles, so a lane's operands are 4 consecutive floats (one LDS.128) and a
    quarter-warp's loads hit distinct 16-byte chunks of one 128-byte row or the same one.

    The A^T tile (row k holds A[:, k] of the block) is padded to BM + 4 words a row, and every
    8 rows further by SKEW = 8 words: row k starts at ``k * (BM + 4) + 8 * (k // 8)`` (16-byte
    aligned, so the LDS.128 loads stay; a constant per k, so they stay immediates).  When each
    thread moves an even number of A's 4-vectors (PAIR), it loads them from two adjacent rows
    at the same 4 k and stores each k's pair with one 64-bit STS.  Why, for BK = 16: a warp's
    transposing stores cover 8 rows (4 row pairs per 16-lane phase of an STS.64) at 4 k-groups
    q = 0, 4, 8, 12; with the pad alone rows q and q + 8 start 8 * 132 = 1056 = 0 (mod 32)
    banks apart, a 2-way conflict; the skew moves the q = 8, 12 rows by 8 banks, so the four
    groups land on banks 0-7, 16-23, 8-15, 24-31 (+4e for element e).  BK = 8 has no row 8: no
    skew, the layout rungs 9 and 10 always had.
    """
    i32 = int32
    if WARP:
        LC = 32 // LR
        WM, WN = LR * TM, LC * TN
        WARPS_N = BN // WN
        NT = 32 * (BM // WM) * (BN // WN)
    else:
        NT = (BM // TM) * (BN // TN)
        LC = WM = WN = WARPS_N = 1
    TCOLS = BN // TN
    BMP = BM + _AT_PAD
    SKEW = _AT_SKEW
    SB = BN // TN if WARP else BN // TN + _B_PAD  # WARP=False: B swizzled and padded as rung 8
    BROW = BN if WARP else _b_row(BN, TN)
    ABUF, BBUF = _at_words(BM, BK), BK * BROW
    NA = BM * BK // 4 // NT  # 4-vectors of A and of B each thread moves per tile
    NB = BK * BN // 4 // NT
    PAIR = NA % 2 == 0  # A's vectors in row pairs: 64-bit transposing stores
    TM4, TN4 = TM // 4, TN // 4
    SUBM, SUBN = LR * 4, LC * 4
    BK4, BN4 = BK // 4, BN // 4
    ASZ, BSZ, RA, RB, TMN = 2 * ABUF, 2 * BBUF, 4 * NA, 4 * NB, TM * TN  # array shapes: constants
    kblock = _k_block(BK, BMP, BROW, TM, TN, SB, SUBM, SUBN, WARP, SKEW)
    dev = C._jit(device=True, forceinline=True)

    @dev
    def a_vec(t, s):
        """This thread's 4-vector ``s`` of the A tile: (row, first k) in the tile.  PAIR: vectors
        2p and 2p + 1 are rows 2r and 2r + 1 at the same 4 k (one STS.64 per k stores both)."""
        if PAIR:
            v = i32(t + i32((s // 2) * NT))
            return i32(i32(v // i32(BK4)) * i32(2) + i32(s % 2)), i32(i32(v % i32(BK4)) * i32(4))
        v = i32(t + i32(s * NT))
        return i32(v // i32(BK4)), i32(i32(v % i32(BK4)) * i32(4))

    @dev
    def kblock_rolled(As, Bs, acc, rm, rn, abase, bbase):
        """The same k-steps as a loop: for the checked tail (at most one tile of aligned
        matrices), so that the unrolled copy stays the kernel's one hot loop."""
        for kk in range(BK):
            ao = abase + kk * BMP + (kk // 8) * SKEW
            bo = bbase + kk * BROW
            for i4 in range(TM4):
                rm[4 * i4], rm[4 * i4 + 1], rm[4 * i4 + 2], rm[4 * i4 + 3] = ld4(
                    As, ao + i4 * (SUBM if WARP else 4))
            if WARP:
                for j4 in range(TN4):
                    rn[4 * j4], rn[4 * j4 + 1], rn[4 * j4 + 2], rn[4 * j4 + 3] = ld4(Bs, bo + j4 * SUBN)
            else:
                for j in range(TN):
                    rn[j] = Bs[uint64(bo + j * SB)]
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += rm[i] * rn[j]

    @dev
    def fetch_fast(a, b, ra, rb, a_off, b_off, k0, N32):
        """A full k-tile of aligned matrices: one unchecked 128-bit load per 4-vector."""
        for s in range(NA):
            ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = ld4(a, a_off[s] + k0)
        for s in range(NB):
            rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = ld4(b, b_off[s] + k0 * N32)

    @dev
    def fetch_checked(a, b, ra, rb, t, bm, bn, k0, M32, N32, K32, vec_a, vec_b):
        """Any k-tile of any matrices: out-of-range elements read as zeros."""
        for s in range(NA):
            r, q = a_vec(t, s)
            r = i32(bm + r)
            q = i32(k0 + q)
            if vec_a and r < M32 and q + i32(3) < K32:
                ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = ld4(a, i32(r * K32 + q))
            else:
                for e in range(4):
                    ra[4 * s + e] = a[i32(r * K32 + q + e)] if r < M32 and q + e < K32 else float32(0)
        for s in range(NB):
            v = i32(t + i32(s * NT))
            r = i32(k0 + i32(v // i32(BN4)))
            q = i32(bn + i32(v % i32(BN4)) * i32(4))
            if vec_b and r < K32 and q + i32(3) < N32:
                rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = ld4(b, i32(r * N32 + q))
            else:
                for e in range(4):
                    rb[4 * s + e] = b[i32(r * N32 + q + e)] if r < K32 and q + e < N32 else float32(0)

    @dev
    def stash(As, Bs, ra, rb, t, buf):
        """Registers -> shared buffer ``buf``: A transposed (padded rows), B as stored."""
        abase = i32(buf * i32(ABUF))
        bbase = i32(buf * i32(BBUF))
        if PAIR:  # rows r, r + 1 at k = q + e: one 64-bit store per k
            for p in range(NA // 2):
                r, q = a_vec(t, 2 * p)
                o = i32(abase + q * i32(BMP) + i32(q // i32(8)) * i32(SKEW) + r)  # (q + e) // 8 == q // 8
                for e in range(4):
                    st2(As, i32(o + i32(e * BMP)), ra[8 * p + e], ra[8 * p + 4 + e])
        else:
            for s in range(NA):
                r, q = a_vec(t, s)
                o = i32(abase + q * i32(BMP) + i32(q // i32(8)) * i32(SKEW) + r)
                for e in range(4):
                    As[uint64(o + i32(e * BMP))] = ra[4 * s + e]
        for s in range(NB):
            v = i32(t + i32(s * NT))
            r = i32(v // i32(BN4))
            q = i32(i32(v % i32(BN4)) * i32(4))
            if WARP:
                st4(Bs, i32(bbase + r * i32(BN) + q), rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3])
            else:  # column (tc * TN + j) stored at (j * SB + tc), as rung 8
                for e in range(4):
                    Bs[uint64(bbase + r * i32(BROW) + i32(i32(q + e) % i32(TN)) * i32(SB)
                              + i32(q + e) // i32(TN))] = rb[4 * s + e]

    @C._jit(launch_bounds=(NT, MIN_BLOCKS))  # MIN_BLOCKS resident blocks: caps registers at 64K / (NT * MIN_BLOCKS)
    def gemm_simt(a, b, c, M, N, K, vec_a, vec_b, vec_c):
        As = cuda.shared.array(ASZ, float32)  # two buffers of the A^T tile, rows padded and skewed
        Bs = cuda.shared.array(BSZ, float32)
        ra = cuda.local.array(RA, float32)  # the next tile, staged in registers
        rb = cuda.local.array(RB, float32)
        a_off = cuda.local.array(NA, int32)  # hoisted: this thread's global offsets at k0 = 0
        b_off = cuda.local.array(NB, int32)
        acc = cuda.local.array(TMN, float32)
        rm = cuda.local.array(TM, float32)
        rn = cuda.local.array(TN, float32)
        M32 = i32(M)
        N32 = i32(N)
        K32 = i32(K)
        t = i32(cuda.threadIdx.x)
        bm = i32(i32(cuda.blockIdx.y) * i32(BM))
        bn = i32(i32(cuda.blockIdx.x) * i32(BN))
        if WARP:
            warp = i32(t // i32(32))
            lane = i32(t % i32(32))
            row0 = i32(i32(warp // i32(WARPS_N)) * i32(WM) + i32(lane // i32(LC)) * i32(4))
            col0 = i32(i32(warp % i32(WARPS_N)) * i32(WN) + i32(lane % i32(LC)) * i32(4))
        else:
            row0 = i32(i32(t // i32(TCOLS)) * i32(TM))
            col0 = i32(t % i32(TCOLS))
        for i in range(TMN):
            acc[i] = float32(0)
        for s in range(NA):  # clamped: a row past m reads row m-1 (its products are never stored)
            r, q = a_vec(t, s)
            a_off[s] = i32(min(i32(bm + r), i32(M32 - i32(1))) * K32 + q)
        for s in range(NB):  # clamped to the last 4 columns (n is a multiple of 4 on this path)
            v = i32(t + i32(s * NT))
            b_off[s] = i32(i32(v // i32(BN4)) * N32 + min(i32(bn + i32(v % i32(BN4)) * i32(4)), i32(N32 - i32(4))))
        a_lane = int64(row0)  # this lane's first operand in each shared buffer
        b_lane = int64(col0)
        n_tiles = i32(i32(K32 + i32(BK - 1)) // i32(BK))
        n_fast = i32(K32 // i32(BK)) if vec_a and vec_b else i32(0)  # unchecked full tiles
        fetch_checked(a, b, ra, rb, t, bm, bn, i32(0), M32, N32, K32, vec_a, vec_b)
        stash(As, Bs, ra, rb, t, i32(0))
        cuda.syncthreads()
        # the hot loop: fetch tile `tile` into registers, multiply tile - 1, stash, one barrier
        for tile in range(i32(1), n_fast):
            fetch_fast(a, b, ra, rb, a_off, b_off, i32(tile * i32(BK)), N32)
            cur = int64(i32(tile - i32(1)) & i32(1))
            kblock(As, Bs, acc, rm, rn, cur * ABUF + a_lane, cur * BBUF + b_lane)
            stash(As, Bs, ra, rb, t, i32(tile & i32(1)))
            cuda.syncthreads()
        # the rest: a partial last tile, or every tile of unaligned matrices, checked
        for tile in range(max(n_fast, i32(1)), i32(n_tiles + i32(1))):
            if tile < n_tiles:
                fetch_checked(a, b, ra, rb, t, bm, bn, i32(tile * i32(BK)), M32, N32, K32, vec_a, vec_b)
            cur = int64(i32(tile - i32(1)) & i32(1))
            kblock_rolled(As, Bs, acc, rm, rn, cur * ABUF + a_lane, cur * BBUF + b_lane)
            if tile < n_tiles:
                stash(As, Bs, ra, rb, t, i32(tile & i32(1)))
            cuda.syncthreads()
        # epilogue: 128-bit stores of 4 consecutive columns where they fit
        for i in range(TM):
            if WARP:
                r = i32(bm + row0 + i32((i // 4) * SUBM + i % 4))
            else:
                r = i32(bm + row0 + i)
            for j4 in range(TN4):
                if WARP:
                    q = i32(bn + col0 + i32(j4 * SUBN))
                else:
                    q = i32(bn + col0 * i32(TN) + i32(4 * j4))
                if r < M32:
                    if vec_c and q + i32(3) < N32:
                        st4(c, i32(r * N32 + q), acc[i * TN + 4 * j4], acc[i * TN + 4 * j4 + 1],
                            acc[i * TN + 4 * j4 + 2], acc[i * TN + 4 * j4 + 3])
                    else:
                        for e in range(4):
                            if q + e < N32:
                                c[i32(r * N32 + q + e)] = acc[i * TN + 4 * j4 + e]

    return gemm_simt


@dataclass(frozen=True)
class Index32(DoubleBuffer):
    MIN_BLOCKS: int = 2  # launch_bounds' minimum resident blocks per SM: ptxas keeps <= 128 registers
    rung: ClassVar[int] = 9
    name: ClassVar[str] = "index32"
    what: ClassVar[str] = (
        "Rung 8 with its address arithmetic in 32 bits, since Numba makes every integer int64: A, "
        "B and C are flat views indexed by int32 offsets computed once per thread, so full "
        "aligned k-tiles load with no bounds checks. C is written with 128-bit stores.")

    def supports(self, problem):
        super().supports(problem)
        if self.TM % 4 or self.TN % 4:
            raise UnsupportedProblem(f"{self.label}: TM and TN must be multiples of 4 (128-bit shared loads)")
        _require_int32_offsets(self, problem)

    def _kernel(self):
        return _simt_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, 1, False, self.MIN_BLOCKS)

    def shared_bytes(self) -> int:
        return 2 * (_at_words(self.BM, self.BK) + self.BK * _b_row(self.BN, self.TN)) * F32  # A^T and B (padded)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        grid = C._tile_grid(problem, self.BM, self.BN)
        args = (bufs["a"].reshape(-1), bufs["b"].reshape(-1), bufs["c"].reshape(-1), m, n, k,
                k % 4 == 0, n % 4 == 0, n % 4 == 0)
        return [Launch(self._kernel(), grid, self.threads(), args)]

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "same bytes as rung 8; fewer integer instructions per FMA"})


@dataclass(frozen=True)
class WarpTile(C._Tunable):
    BM: int = 128
    BN: int = 128
    BK: int = 8
    TM: int = 8
    TN: int = 8
    LR: int = 8  # lanes of a warp along its rows; 32 // LR along its columns
    MIN_BLOCKS: int = 2  # launch_bounds' minimum resident blocks per SM (a register cap)

    rung: ClassVar[int] = 10
    name: ClassVar[str] = "warptile"
    what: ClassVar[str] = (
        "A level between block and thread: each warp owns a 64x32 tile of C and its lanes sweep "
        "it in 4x4 sub-tiles, so per k step 4 LDS.128 feed 64 FFMAs and a quarter-warp's loads "
        "are conflict-free. The block tile, 32-bit offsets and double buffering stay as in rung "
        "9.")

    @property
    def LC(self) -> int:
        return 32 // self.LR

    def threads(self) -> int:
        return 32 * (self.BM // (self.LR * self.TM)) * (self.BN // (self.LC * self.TN)) if self.LR <= 32 else 0

    def constraints(self) -> list[str]:
        """Tile constraints, each stated as the check it is (empty when the config is legal)."""
        bad = []
        if 32 % self.LR:
            bad.append(f"LR={self.LR} lanes along rows must divide the 32 lanes of a warp")
            return bad
        if self.TM % 4 or self.TN % 4:
            bad.append(f"TM={self.TM}, TN={self.TN} must be multiples of 4 (4x4 sub-tiles, 128-bit loads)")
            return bad
        wm, wn = self.LR * self.TM, self.LC * self.TN
        if self.BM % wm or self.BN % wn:
            bad.append(f"the warp tile {wm}x{wn} must divide the block tile {self.BM}x{self.BN}")
            return bad
        nt = self.threads()
        if self.BK % 4 or self.BN % 4:
            bad.append("BK and BN must be multiples of 4 (vector loads)")
        elif (self.BM * self.BK // 4) % nt or (self.BK * self.BN // 4) % nt:
            bad.append(f"the A and B tiles must split into whole 4-vectors per thread ({nt} threads)")
        if nt > MAX_THREADS_PER_BLOCK:
            bad.append(f"{nt} threads per block > {MAX_THREADS_PER_BLOCK}")
        if self.shared_bytes() > MAX_STATIC_SHARED:
            bad.append(f"{self.shared_bytes()} bytes of static shared memory per block > {MAX_STATIC_SHARED} "
                       "(48 KiB), the static limit")
        return bad

    def supports(self, problem):
        C._require_float32(self, problem)
        bad = self.constraints()
        if bad:
            raise UnsupportedProblem(f"{self.label} {self.config}: " + "; ".join(bad))
        C._check_launch(self, problem, C._tile_grid(problem, self.BM, self.BN), self.threads(), self.shared_bytes())
        _require_int32_offsets(self, problem)

    def _kernel(self):
        return _simt_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, self.LR, True, self.MIN_BLOCKS)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        grid = C._tile_grid(problem, self.BM, self.BN)
        args = (bufs["a"].reshape(-1), bufs["b"].reshape(-1), bufs["c"].reshape(-1), m, n, k,
                k % 4 == 0, n % 4 == 0, n % 4 == 0)
        return [Launch(self._kernel(), grid, self.threads(), args)]

    def shared_bytes(self) -> int:
        return 2 * (_at_words(self.BM, self.BK) + self.BK * self.BN) * F32  # two buffers of A^T and B

    def traffic(self, problem):
        return C._tiled_traffic(problem, self.BM, self.BN, self.BK, (1 / self.TN + 1 / self.TM) * F32, "fma",
                              "same bytes as rung 9; a quarter of its shared-load instructions for B")


# --- rung 11: the autotuner's search space (the search itself: perfkit.autotune) ------------------
def search_space() -> list[WarpTile]:
    """Legal warp-tiling configurations (the tile constraints are WarpTile.constraints())."""
    out = []
    for BM, BN, BK, TM, TN, LR in itertools.product((64, 128, 256), (64, 128, 256), (8, 16), (4, 8), (4, 8),
                                                    (2, 4, 8, 16)):
        v = WarpTile(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, LR=LR)
        if not v.constraints():  # shared memory within 48 KiB included
            out.append(v)
    return out


#: how the autotuned rung's configuration was chosen; a GPU session reruns perfkit.autotune.search_gemm() with
#: time_fn and records the timing through perfkit.results (tools/record_gpu.py)
AUTOTUNE_PICK = {"problem": (4096, 4096, 4096), "cc": (9, 0), "timed": False, "how": "perfkit.model.estimate",
                 "config": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "LR": 4, "MIN_BLOCKS": 2},
                 "model_ms": 3.48, "registers": 128, "spills": 0, "occupancy": 0.25,
                 "note": "search_gemm(EXAMPLE_PROBLEM, keep=10) on 2026-11-23 with no GPU: 68 legal tilings, the "
                         "best 10 by model_estimate compiled, spilling ones rejected (rung 10's 128x128x8 "
                         "spills 20 bytes), survivors ranked by perfkit.model.estimate: 128x128x16 3.48 ms "
                         "(every LR alike to 1e-6), 64x256x16 3.64 ms; LR chosen by the fewest distinct "
                         "16-byte chunks a warp reads per k step. Not timed: rerun with time_fn on a GPU."}


@dataclass(frozen=True)
class Autotuned(WarpTile):
    # perfkit.autotune.search_gemm(EXAMPLE_PROBLEM, cc=(9, 0)) with no GPU: the model's pick among the compiled
    # survivors (AUTOTUNE_PICK says so); rerun it with time_fn on a GPU to retune.
    BM: int = 128
    BN: int = 128
    BK: int = 16
    TM: int = 8
    TN: int = 8
    LR: int = 4
    MIN_BLOCKS: int = 2

    rung: ClassVar[int] = 11
    name: ClassVar[str] = "autotuned"
    what: ClassVar[str] = (
        "The warp-tile kernel at the configuration perfkit.autotune.search_gemm()'s static model "
        "ranks best: 128x128 block, BK=16, 8x8 per thread, 32x64 warp tile. Rows 8-15 of the A^T "
        "tile are skewed by 8 words and stored in pairs (STS.64), so its shared stores are "
        "conflict-free too.")

