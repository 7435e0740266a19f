"""GEMM's Hopper rungs (sm_90a), from rung 20: float16 in, float32 accumulate, ``wgmma``
(warpgroup matrix multiply-accumulate, HGMMA in SASS) through inline PTX
(:mod:`perfkit.kernels._ptx_hopper`, with simulator twins).  Each is checked in the simulator
(its twins replay the instructions' documented semantics) and compiled for sm_90a with no GPU.
Rungs 20-23 were first recorded on the H200 on 2026-11-27 (commit 6ba0514, 4096^3 float16) and
on the H100 on 2026-11-28 (commit 516b940, today's code); rung 24 hung on both and has no
record."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32
from numba.types import float16

from ... import backend
from .._dynsmem import DynamicSharedLaunch, check_dynamic_shared, shared_tile
from .._ptx import cp_async16, cp_async16_off, cp_async_commit, cp_async_wait
from .._ptx_hopper import (fence_proxy_async, smem_addr, wgmma_commit, wgmma_desc, wgmma_fence, wgmma_m64n64k16,
                           wgmma_m64n128k16, wgmma_m64n256k16, wgmma_wait)
from ..base import Traffic, UnsupportedProblem
from . import _common as C
from ._common import F32, I32_LIMIT, Problem

#: the wgmma of each tile width N (m64nNk16), for the Hopper rungs' kernels
WGMMA_BY_N = {64: wgmma_m64n64k16, 128: wgmma_m64n128k16, 256: wgmma_m64n256k16}


def require_hopper(v, problem, needs: str = "wgmma.mma_async, a warpgroup's asynchronous matrix multiply") -> None:
    """Refuse a GPU older than sm_90 (wgmma, like TMA and mbarrier transaction counts, is Hopper's),
    saying what the rung ``needs``; the simulator runs the twins, and the compile-only backend
    builds for the target it is given.  Refuse inputs other than float16."""
    d = backend.device()
    cc = d.compute_capability
    if not d.simulated and cc is not None and tuple(cc) < (9, 0):
        raise UnsupportedProblem(f"{v.label} needs a Hopper GPU (sm_90: {needs}); {d.name} is sm_{cc[0]}{cc[1]}")
    if problem.dtype != "float16":
        raise UnsupportedProblem(f"{v.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")



def require_tma_shapes(v, problem, c_offsets: bool = True) -> tuple[int, int, int]:
    """The refusals rungs 21-24 share (the ring of their config, the launch, rows a tensor map can
    describe, 32-bit box coordinates, the shared memory a block may opt in to, and with
    ``c_offsets`` the 32-bit offsets of an epilogue that stores C element by element); returns
    (m, n, k)."""
    if v.BN not in (64, 128, 256) or v.STAGES < 2:
        raise UnsupportedProblem(f"{v.label}: BN must be 64, 128 or 256 (wgmma m64nBNk16) and STAGES >= 2 "
                                 f"(got BN={v.BN}, STAGES={v.STAGES})")
    C._check_launch(v, problem, v.grid(problem), v.threads())
    m, n, k = C._dims(problem)
    for what, size in (("k", k), ("n", n)):
        if size % 8:
            raise UnsupportedProblem(
                f"{v.label}: a TMA tensor map needs row strides that are multiples of 16 bytes; {what}={size} "
                f"float16 elements make rows of {2 * size} bytes: use rung 20 wgmma (cp.async, which stores "
                "such rows 2 bytes at a time)")
    if max(m, n, k) + v.BM >= 2**31:  # (a block past m, rung 24's padding one, starts its box there)
        raise UnsupportedProblem(f"{v.label}: TMA box coordinates are 32-bit; m, n, k must be < 2**31 - {v.BM}")
    check_dynamic_shared(f"{v.label} {v.config}", v.dynamic_shared_bytes(), v.shared_bytes())
    if c_offsets and m * n + 64 > I32_LIMIT:
        raise UnsupportedProblem(f"{v.label}: C has {m * n} elements; the epilogue's offsets are 32-bit, "
                                 "which reach 2**31 - 1")
    return m, n, k

class TmaRing(C._Tunable):
    """What rungs 21-24 (a TMA ring of STAGES k-tiles of BM x BK of A and BK x BN of B, guarded by
    mbarriers) share beyond their kernels: the example shape, the block, the shared memory a
    block asks for.  A subclass names its threads (THREADS), its mbarrier arrays of STAGES
    barriers each (BARRIER_ARRAYS) and the dynamic shared bytes it keeps after the ring
    (AFTER_RING: the persistent rung's C boxes)."""
    BM: ClassVar[int] = 128
    BK: ClassVar[int] = 64
    THREADS: ClassVar[int] = 384
    BARRIER_ARRAYS: ClassVar[int] = 2  # full and empty
    AFTER_RING: ClassVar[int] = 0

    def example(self, problem):
        """The float16 twin, n and k rounded up to multiples of 8 (rows TMA can stride): the
        notebook's check shape 37 x 41 x 29 is shown at 37 x 48 x 32."""
        n, k = -(-problem.n // 8) * 8, -(-problem.k // 8) * 8
        if (problem.dtype, n, k) == ("float16", problem.n, problem.k):
            return problem
        return Problem(problem.m, n, k, "float16")

    def threads(self) -> int:
        return self.THREADS

    def dynamic_shared_bytes(self) -> int:
        """The ring (STAGES x (BM x BK + BK x BN) float16), what follows it, and 1 KiB to align
        the ring's start to 1024 bytes (the 128-byte swizzle's period)."""
        return self.STAGES * (self.BM * self.BK + self.BK * self.BN) * 2 + self.AFTER_RING + 1024

    def shared_bytes(self) -> int:
        """The mbarriers, 8 bytes each, as ptxas allocates an array of them (in 16-byte steps)."""
        return self.BARRIER_ARRAYS * -(-8 * self.STAGES // 16) * 16


# --- rung 20: wgmma fed by cp.async ------------------------------------------------------------
@lru_cache(maxsize=None)
def _wgmma_kernel(BN: int, STAGES: int):
    """C (BM=128 x BN) per block, 2 warpgroups (256 threads), each the 64 x BN half of the tile
    with one ``wgmma m64nBNk16`` a k-step of 16 (4 a k-tile of BK = 64), its 64 x BN float32
    accumulators (BN / 2 a thread) in registers.

    Shared memory (dynamic, padded at run time to a 1024-byte aligned start: the swizzle pattern
    repeats every 8 rows of 128 bytes and the hardware applies it to the address bits), a ring of
    STAGES k-tiles, each: A (128 rows x 64 k, 128 bytes a row, K-major), then B as BN / 64 blocks
    of 64 columns (64 k-rows x 128 bytes, MN-major).  Every 16-byte chunk c of row r is stored at
    chunk ``c ^ (r % 8)`` of its row: the 128-byte swizzle (``_ptx_hopper.sw128``), which the
    descriptors name, so that wgmma reads 8 rows of a column of chunks from 8 distinct bank
    groups.  Global -> shared by cp.async, 16 bytes a chunk (zero-filled past m, n or k; 2-byte
    stores for rows that are not 16-byte aligned), STAGES - 1 tiles in flight.  A k-tile: wait
    for its copies, fence the generic proxy's writes for the async proxy, barrier, 4 wgmma, commit,
    wait for them (so the stage can be refilled: one idea at a time, the next rungs overlap),
    barrier."""
    BM, BK, NT = 128, 64, 256
    A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2
    STAGE = A_BYTES + B_BYTES
    A_CH, STAGE_CH = A_BYTES // 16, STAGE // 16
    BCPR = BN // 8  # 16-byte chunks in a k-row of the B tile
    LA, LB = BM * 8 // NT, BK * BCPR // NT
    NACC = BN // 2
    RB = NT // BCPR  # B rows between a thread's chunks (8, 16 or 32: multiples of the swizzle's 8)
    NCH = STAGES * STAGE_CH
    WAITN = STAGES - 1
    mma = WGMMA_BY_N[BN]
    i32 = int32
    dev = C._jit(device=True, forceinline=True)

    @dev
    def load_tile(a, b, sm16, stage, k0, M, N, K, t, bm, bn, vec_a, vec_b):
        for i in range(LA):  # A: 128 rows x 8 chunks
            idx = t + i * NT
            r = idx // 8
            ch = idx % 8
            dst = stage * STAGE_CH + r * 8 + (ch ^ (r % 8))
            grow = bm + r
            gcol = k0 + ch * 8
            if vec_a:
                nb = min(max(K - gcol, 0), 8) * 2 if grow < M else 0
                cp_async16(sm16, dst, 0, a, grow if nb > 0 else 0, gcol if nb > 0 else 0, nb)
            else:
                for e in range(8):
                    sm16[dst, e] = a[grow, gcol + e] if grow < M and gcol + e < K else float16(0)
        for i in range(LB):  # B: 64 k-rows x BCPR chunks, in 64-column blocks of 8 KiB
            idx = t + i * NT
            kr = idx // BCPR
            nc = idx % BCPR
            dst = stage * STAGE_CH + A_CH + (nc // 8) * 512 + kr * 8 + ((nc % 8) ^ (kr % 8))
            grow = k0 + kr
            gcol = bn + nc * 8
            if vec_b:
                nb = min(max(N - gcol, 0), 8) * 2 if grow < K else 0
                cp_async16(sm16, dst, 0, b, grow if nb > 0 else 0, gcol if nb > 0 else 0, nb)
            else:
                for e in range(8):
                    sm16[dst, e] = b[grow, gcol + e] if grow < K and gcol + e < N else float16(0)

    @dev
    def load_fast(a, b, sm16, st, ga, gb, sa0, sb0, K, N):
        """A full k-tile of a block inside m and n (16-byte aligned rows): no checks; a thread's
        chunk i is 32 A rows (RB B rows) below chunk 0, the swizzle repeats every 8 rows, so its
        shared offset is chunk 0's plus a constant and its global one chunk 0's plus i rows."""
        for i in range(LA):
            cp_async16_off(sm16, i32(i32(st + sa0 + i * (32 * 8)) * 8), a, i32(ga + i32(i * 32) * K))
        for i in range(LB):
            cp_async16_off(sm16, i32(i32(st + sb0 + i * (RB * 8)) * 8), b, i32(gb + i32(i * RB) * N))

    @dev
    def tile_mma(acc, smem, a0, b0):
        wgmma_fence()
        for kk in range(BK // 16):
            mma(acc, smem, wgmma_desc(a0 + uint32(kk * 32), 16, 1024),
                wgmma_desc(b0 + uint32(kk * 2048), 8192, 1024), 1)
        wgmma_commit()
        wgmma_wait(0)

    @C._jit(launch_bounds=(NT, 1))
    def gemm_wgmma(a, b, c, M, N, K, vec_a, vec_b):
        smem = cuda.shared.array(0, float16)  # the ring, + 1 KiB to align its start to 1024 bytes
        base = smem_addr(smem)
        pad = (uint32(1024) - (base & uint32(1023))) & uint32(1023)
        sm16 = shared_tile(smem, i32(pad // uint32(2)), NCH, 8)  # (16-byte chunks, 8 halves)
        acc = cuda.local.array(NACC, float32)
        for i in range(NACC):
            acc[i] = float32(0)
        t = i32(cuda.threadIdx.x)
        wg = t // 128
        bm = i32(cuda.blockIdx.y) * BM
        bn = i32(cuda.blockIdx.x) * BN
        n_k = (K + (BK - 1)) // BK
        n_full = i32(0)
        if vec_a and vec_b and bm + BM <= M and bn + BN <= N:
            n_full = i32(K // BK)
        # the unchecked loader's bases: this thread's chunk 0 of the A and the B tile
        r0 = t // 8
        ca = t % 8
        kb0 = t // BCPR
        cb = t % BCPR
        sa0 = i32(r0 * 8 + (ca ^ (r0 % 8)))
        sb0 = i32(A_CH + (cb // 8) * 512 + kb0 * 8 + ((cb % 8) ^ (kb0 % 8)))
        Ki = i32(K)
        Ni = i32(N)
        ga = i32(i32(bm + r0) * Ki + ca * 8)
        gb = i32(kb0 * Ni + bn + cb * 8)
        for kt in range(n_k + (STAGES - 1)):
            if kt < n_full:  # issue the copies of tile kt into stage kt % STAGES
                load_fast(a, b, sm16, i32((kt % STAGES) * STAGE_CH), i32(ga + kt * BK), i32(gb + i32(kt * BK) * Ni),
                          sa0, sb0, Ki, Ni)
            elif kt < n_k:
                load_tile(a, b, sm16, kt % STAGES, kt * BK, M, N, K, t, bm, bn, vec_a, vec_b)
            cp_async_commit()
            if kt >= STAGES - 1:  # multiply tile kt - (STAGES - 1)
                cp_async_wait(WAITN)
                fence_proxy_async()  # this thread's writes (cp.async, st.shared) -> the async proxy
                cuda.syncthreads()
                s = (kt - (STAGES - 1)) % STAGES
                a0 = base + pad + uint32(s * STAGE + wg * (64 * 128))
                b0 = base + pad + uint32(s * STAGE + A_BYTES)
                tile_mma(acc, smem, a0, b0)
                cuda.syncthreads()  # every warpgroup done with the stage before it is refilled
        cp_async_wait(0)
        w = (t % 128) // 32
        lane = t % 32
        r = bm + wg * 64 + 16 * w + lane // 4
        for j in range(BN // 8):
            q = bn + 8 * j + 2 * (lane % 4)
            x0, x1, x2, x3 = acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]
            if r < M:
                if q < N:
                    c[r * N + q] = x0
                if q + 1 < N:
                    c[r * N + q + 1] = x1
            if r + 8 < M:
                if q < N:
                    c[(r + 8) * N + q] = x2
                if q + 1 < N:
                    c[(r + 8) * N + q + 1] = x3

    return gemm_wgmma


@dataclass(frozen=True)
class Wgmma(C._Tunable):
    BN: int = 128
    STAGES: int = 3

    rung: ClassVar[int] = 20
    name: ClassVar[str] = "wgmma"
    what: ClassVar[str] = (
        "Hopper's wgmma.mma_async: a warpgroup of 4 warps multiplies a 64x128x16 block reading "
        "both operands straight from 128-byte-swizzled shared memory through descriptors, not "
        "from registers. Two warpgroups share a 128x128 tile, fed by a 3-stage cp.async ring of "
        "64-deep k-tiles.")

    BM: ClassVar[int] = 128
    BK: ClassVar[int] = 64

    def example(self, problem):
        return problem if problem.dtype == "float16" else Problem(problem.m, problem.n, problem.k, "float16")

    def threads(self) -> int:
        return 256

    def grid(self, problem):
        return C._tile_grid(problem, self.BM, self.BN)

    def dynamic_shared_bytes(self) -> int:
        """The ring (STAGES x (BM x BK + BK x BN) float16) and 1 KiB to align its start."""
        return self.STAGES * (self.BM * self.BK + self.BK * self.BN) * 2 + 1024

    def supports(self, problem):
        require_hopper(self, problem)
        if self.BN not in (64, 128, 256) or self.STAGES < 2:
            raise UnsupportedProblem(f"{self.label}: BN must be 64, 128 or 256 (wgmma m64nBNk16) and STAGES >= 2 "
                                     f"(got BN={self.BN}, STAGES={self.STAGES})")
        C._check_launch(self, problem, self.grid(problem), self.threads())
        check_dynamic_shared(f"{self.label} {self.config}", self.dynamic_shared_bytes())
        m, n, k = C._dims(problem)
        for what, size in (("A (m*k)", m * k), ("B (k*n)", k * n), ("C (m*n)", m * n)):
            if size + 64 > I32_LIMIT:
                raise UnsupportedProblem(f"{self.label}: {what} has {size} elements; this rung's offsets are "
                                         "32-bit, which reach 2**31 - 1")

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        kern = _wgmma_kernel(self.BN, self.STAGES)
        args = (bufs["a"], bufs["b"], bufs["c"].reshape(-1), m, n, k, k % 8 == 0, n % 8 == 0)
        return [DynamicSharedLaunch(kern, self.grid(problem), self.threads(), args, self.dynamic_shared_bytes())]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        l2 = (m * k * math.ceil(n / self.BN) + k * n * math.ceil(m / self.BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                       smem_bytes=float(l2 - m * n * F32) * 2, limiter="tensor",
                       notes=f"{self.BM}x{self.BN}x{self.BK} block tile, wgmma from swizzled shared memory, "
                             f"{self.STAGES} cp.async stages",
                       extra={"peak": "tensor.fp16"})
