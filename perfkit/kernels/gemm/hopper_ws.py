"""GEMM rung 22 ``warp_specialized`` (sm_90a): rung 21's TMA ring and wgmma, the work split by
warpgroup: one producer warpgroup only issues the copies, two consumer warpgroups only
multiply, and registers move from the one to the others (setmaxnreg).  Checked in the
simulator through the twins of :mod:`perfkit.kernels._ptx_hopper` (a waiting thread yields to
its block there), compiled for sm_90a with no GPU, and recorded on the H200 on 2026-11-27
(commit 6ba0514: 234.3 us at 4096^3 float16, cuBLAS 188.8; the code has changed since: the
bounded mbarrier wait) and on the H100 on 2026-11-28 (516b940: 250.7 us, cuBLAS 188.9)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32, uint64
from numba.types import float16

from .._dynsmem import DynamicSharedLaunch
from .._ptx_hopper import (fence_mbarrier_init, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait,
                           setmaxnreg_dec, setmaxnreg_inc, smem_addr, tensor_map_2d, tensormap_acquire, tma_load_2d,
                           wgmma_commit, wgmma_desc, wgmma_fence, wgmma_wait)
from ..base import Traffic
from . import _common as C
from ._common import F32
from .hopper import WGMMA_BY_N, TmaRing, require_hopper, require_tma_shapes

BM, BK = 128, 64
#: registers a thread after setmaxnreg: the producer gives back what the consumers take
#: (168 at launch, ptxas's cap for 384 threads; 128 x 40 + 256 x 232 = 384 x 168)
PRODUCER_REGS, CONSUMER_REGS = 40, 232


@lru_cache(maxsize=None)
def _ws_kernel(BN: int, STAGES: int):
    """C (BM=128 x BN) per block, 384 threads: warpgroup 0 the producer, warpgroups 1 and 2 the
    consumers, each owning a 64 x BN half of the tile with one ``wgmma m64nBNk16`` a k-step of 16
    (BN / 2 float32 accumulators a thread).  The shared ring of rung 21 (STAGES k-tiles, each A
    128 rows x 128 bytes then B as BN / 64 blocks of 64 k-rows x 128 bytes, 128-byte swizzled,
    its start aligned to 1024 bytes at run time), now with two mbarriers a stage: "full" (one
    arrival: the producer's expect_tx, then the copies' bytes) and "empty" (two arrivals: one
    thread of each consumer warpgroup once its wgmma on the stage has completed).

    The producer (one thread) waits for a stage to be empty (parity: the round before this one,
    so the first round passes at once) and refills it, up to STAGES tiles ahead of the
    consumers, with no block barrier anywhere in the loop: the two sides meet only on the
    mbarriers.  The producer warpgroup lowers its register limit to 40 and the consumers raise
    theirs to 232 (setmaxnreg; kept by ptxas only with LTO and the launch bound pinned)."""
    NT = 384
    A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2
    STAGE = A_BYTES + B_BYTES
    NACC = BN // 2
    mma = WGMMA_BY_N[BN]
    dev = C._jit(device=True, forceinline=True)

    @dev
    def fill(smem, tma, tmb, full, s, kt, pad, bm, bn):
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
    def gemm_ws(tma, tmb, c, M, N, K):
        smem = cuda.shared.array(0, float16)  # the ring, + 1 KiB to align its start to 1024 bytes
        full = cuda.shared.array(STAGES, uint64)  # a stage's tile has landed
        empty = cuda.shared.array(STAGES, uint64)  # both consumer warpgroups are done with a stage
        base = smem_addr(smem)
        pad = (uint32(1024) - (base & uint32(1023))) & uint32(1023)
        t = int32(cuda.threadIdx.x)
        wg = t // 128
        bm = int32(cuda.blockIdx.y) * BM
        bn = int32(cuda.blockIdx.x) * BN
        n_k = (K + (BK - 1)) // BK
        if t == 0:
            tensormap_acquire(tma)
            tensormap_acquire(tmb)
            for s in range(STAGES):
                mbar_init(full, s, 1)
                mbar_init(empty, s, 2)
            fence_mbarrier_init()
        cuda.syncthreads()  # the barriers initialized before anyone waits on them; the last block barrier
        if wg == 0:
            setmaxnreg_dec(PRODUCER_REGS)
            if t == 0:
                for kt in range(n_k):
                    s = kt % STAGES
                    mbar_wait(empty, s, ((kt // STAGES) & 1) ^ 1)  # released in the previous round
                    fill(smem, tma, tmb, full, s, kt, pad, bm, bn)
        else:
            setmaxnreg_inc(CONSUMER_REGS)
            cw = wg - 1
            acc = cuda.local.array(NACC, float32)
            for i in range(NACC):
                acc[i] = float32(0)
            for kt in range(n_k):
                s = kt % STAGES
                mbar_wait(full, s, (kt // STAGES) & 1)
                a0 = base + pad + uint32(s * STAGE + cw * (64 * 128))
                b0 = base + pad + uint32(s * STAGE + A_BYTES)
                tile_mma(acc, smem, a0, b0)
                if t % 128 == 0:  # the warpgroup's wgmma have completed: the stage may be refilled
                    mbar_arrive(empty, s)
            w = (t % 128) // 32
            lane = t % 32
            r = bm + cw * 64 + 16 * w + lane // 4
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

    return gemm_ws


@dataclass(frozen=True)
class WarpSpecialized(TmaRing):
    BN: int = 256
    STAGES: int = 4

    rung: ClassVar[int] = 22
    name: ClassVar[str] = "warp_specialized"
    what: ClassVar[str] = (
        "Warp specialization: a producer warpgroup only issues TMA copies, two consumer "
        "warpgroups only multiply (wgmma m64n256k16, 64x256 each of a 128x256 tile), through a "
        "4-stage ring with a full and an empty mbarrier a stage. setmaxnreg moves registers from "
        "the producer to the consumers.")

    def grid(self, problem):
        return C._tile_grid(problem, BM, self.BN)

    def supports(self, problem):
        require_hopper(self, problem, "TMA, mbarriers, wgmma and setmaxnreg")
        require_tma_shapes(self, problem)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        tma = tensor_map_2d(bufs["a"], (k, m), 2 * k, (BK, BM))  # A (m, k): rows of k
        tmb = tensor_map_2d(bufs["b"], (n, k), 2 * n, (64, BK))  # B (k, n): rows of n, 64-column boxes
        kern = _ws_kernel(self.BN, self.STAGES)
        args = (tma, tmb, bufs["c"].reshape(-1), m, n, k)
        return [DynamicSharedLaunch(kern, self.grid(problem), self.threads(), args, self.dynamic_shared_bytes())]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        l2 = (m * k * math.ceil(n / self.BN) + k * n * math.ceil(m / BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                       smem_bytes=float(l2 - m * n * F32) * 2, limiter="tensor",
                       notes=f"{BM}x{self.BN}x{BK} block tile, a TMA producer warpgroup and 2 wgmma consumer "
                             f"warpgroups, {self.STAGES} stages on full/empty mbarriers, setmaxnreg",
                       extra={"peak": "tensor.fp16"})
