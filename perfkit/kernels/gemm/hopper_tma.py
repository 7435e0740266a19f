"""GEMM rung 21 ``tma`` (sm_90a): rung 20's wgmma, its operand tiles brought by TMA (the Tensor
Memory Accelerator: one thread issues a bulk copy of a whole 2-D box, swizzled on its way into
shared memory) into a ring of stages guarded by mbarriers, instead of 16-byte cp.async by every
thread.  Checked in the simulator through the twins of :mod:`perfkit.kernels._ptx_hopper`,
compiled for sm_90a with no GPU, and recorded on the H200 on 2026-11-27 (commit 6ba0514:
244.9 us at 4096^3 float16, cuBLAS 188.8; the code has changed since: the bounded mbarrier
wait) and on the H100 on 2026-11-28 (516b940: 289.4 us, cuBLAS 188.9)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32, uint64
from numba.types import float16

from .._dynsmem import DynamicSharedLaunch
from .._ptx_hopper import (fence_mbarrier_init, mbar_arrive_expect_tx, mbar_init, mbar_wait, smem_addr,
                           tensor_map_2d, tensormap_acquire, tma_load_2d, wgmma_commit, wgmma_desc, wgmma_fence,
                           wgmma_wait)
from ..base import Traffic
from . import _common as C
from ._common import F32
from .hopper import WGMMA_BY_N, TmaRing, require_hopper, require_tma_shapes

BM, BK = 128, 64


@lru_cache(maxsize=None)
def _tma_kernel(BN: int, STAGES: int):
    """C (BM=128 x BN) per block, 2 warpgroups (256 threads) each owning a 64 x BN half with one
    ``wgmma m64nBNk16`` a k-step of 16, as in rung 20; the same shared layout (a ring of STAGES
    k-tiles, each A 128 rows x 128 bytes then B as BN / 64 blocks of 64 k-rows x 128 bytes, every
    row 128-byte swizzled, the ring's start aligned to 1024 bytes at run time).

    What changes: thread 0 fills a stage with 1 + BN / 64 TMA box copies (A: a 64 k x 128 m box;
    B: 64 n x 64 k boxes), after ``arrive.expect_tx`` of the stage's bytes on the stage's "full"
    mbarrier; the copies complete those bytes as they land (zeros where a box leaves A or B, so no
    edge code), and the barrier's phase flips when all have.  Every thread waits on the phase
    (parity = the number of times the stage was filled before, mod 2), multiplies, waits for its
    wgmma, and a block barrier frees the stage for thread 0's next copy, STAGES - 1 tiles ahead.
    The tensor maps live in global memory (numba-cuda has no __grid_constant__ parameter): thread
    0 acquires them (the proxy fence) before its first copy."""
    NT = 256
    A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2
    STAGE = A_BYTES + B_BYTES
    NACC = BN // 2
    mma = WGMMA_BY_N[BN]
    dev = C._jit(device=True, forceinline=True)

    @dev
    def fill(smem, tma, tmb, full, kt, pad, bm, bn):
        s = kt % STAGES
        off = pad + uint32(s * STAGE)
        mbar_arrive_expect_tx(full, s, STAGE)
        tma_load_2d(smem, off, tma, kt * BK, bm, full, s)  # (inner k, outer m)
        for j in range(BN // 64):
            tma_load_2d(smem, off + uint32(A_BYTES + j * (BK * 128)), tmb, bn + 64 * j, kt * BK, full, s)

    @dev
    def tile_mma(acc, smem, a0, b0):
        wgmma_fence()
        for kk in range(BK // 16):
            mma(acc, smem, wgmma_desc(a0 + uint32(kk * 32), 16, 1024),
                wgmma_desc(b0 + uint32(kk * 2048), 8192, 1024), 1)
        wgmma_commit()
        wgmma_wait(0)

    @C._jit(launch_bounds=(NT, 1))
    def gemm_tma(tma, tmb, c, M, N, K):
        smem = cuda.shared.array(0, float16)  # the ring, + 1 KiB to align its start to 1024 bytes
        full = cuda.shared.array(STAGES, uint64)  # one mbarrier a stage: its tile has landed
        base = smem_addr(smem)
        pad = (uint32(1024) - (base & uint32(1023))) & uint32(1023)
        acc = cuda.local.array(NACC, float32)
        for i in range(NACC):
            acc[i] = float32(0)
        t = int32(cuda.threadIdx.x)
        wg = t // 128
        bm = int32(cuda.blockIdx.y) * BM
        bn = int32(cuda.blockIdx.x) * BN
        n_k = (K + (BK - 1)) // BK
        if t == 0:
            tensormap_acquire(tma)
            tensormap_acquire(tmb)
            for s in range(STAGES):
                mbar_init(full, s, 1)  # one arrival a phase: thread 0's expect_tx
            fence_mbarrier_init()
            for kt in range(min(STAGES - 1, n_k)):
                fill(smem, tma, tmb, full, kt, pad, bm, bn)
        cuda.syncthreads()  # the barriers initialized before anyone waits on them
        for kt in range(n_k):
            if t == 0 and kt + (STAGES - 1) < n_k:  # the stage freed by the last barrier
                fill(smem, tma, tmb, full, kt + (STAGES - 1), pad, bm, bn)
            s = kt % STAGES
            mbar_wait(full, s, (kt // STAGES) & 1)
            a0 = base + pad + uint32(s * STAGE + wg * (64 * 128))
            b0 = base + pad + uint32(s * STAGE + A_BYTES)
            tile_mma(acc, smem, a0, b0)
            cuda.syncthreads()  # every warpgroup done with stage s before thread 0 refills it
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

    return gemm_tma


@dataclass(frozen=True)
class Tma(TmaRing):
    BN: int = 128
    STAGES: int = 3

    rung: ClassVar[int] = 21
    name: ClassVar[str] = "tma"
    THREADS: ClassVar[int] = 256
    BARRIER_ARRAYS: ClassVar[int] = 1  # full only: a block barrier frees a stage
    what: ClassVar[str] = (
        "Rung 20's wgmma with its tiles brought by TMA: one thread issues one bulk copy per "
        "operand tile from a tensor map, and the copy engine swizzles and zero-fills. Each of the "
        "3 stages has an mbarrier that counts the copied bytes (arrive.expect_tx), and the "
        "threads wait on its phase.")

    def grid(self, problem):
        return C._tile_grid(problem, BM, self.BN)

    def supports(self, problem):
        require_hopper(self, problem, "TMA (cp.async.bulk.tensor), mbarrier transaction counts and wgmma")
        require_tma_shapes(self, problem)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        tma = tensor_map_2d(bufs["a"], (k, m), 2 * k, (BK, BM))  # A (m, k): rows of k
        tmb = tensor_map_2d(bufs["b"], (n, k), 2 * n, (64, BK))  # B (k, n): rows of n, 64-column boxes
        kern = _tma_kernel(self.BN, self.STAGES)
        args = (tma, tmb, bufs["c"].reshape(-1), m, n, k)
        return [DynamicSharedLaunch(kern, self.grid(problem), self.threads(), args, self.dynamic_shared_bytes())]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        l2 = (m * k * math.ceil(n / self.BN) + k * n * math.ceil(m / BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                       smem_bytes=float(l2 - m * n * F32) * 2, limiter="tensor",
                       notes=f"{BM}x{self.BN}x{BK} block tile, wgmma from swizzled shared memory, "
                             f"{self.STAGES} TMA stages on mbarriers",
                       extra={"peak": "tensor.fp16"})
