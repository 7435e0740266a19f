"""GEMM rung 23 ``persistent`` (sm_90a): rung 22's warp-specialized block, launched once per SM
and walking tiles of C (a persistent tile scheduler), its results leaving through shared memory
by TMA stores.  Checked in the simulator through the twins of :mod:`perfkit.kernels._ptx_hopper`,
compiled for sm_90a, and run on the H200 (2026-11-27, commit 6ba0514): correct at 4096^3 and
recorded there (196.7 us float16, cuBLAS 188.8; the code has changed since: the bounded
mbarrier wait); on the H100 on 2026-11-28 (516b940): 197.8 us, cuBLAS 188.9."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32, uint64
from numba.types import float16

from ... import backend
from .._dynsmem import DynamicSharedLaunch
from .._ptx_hopper import (bar_sync, bulk_commit, bulk_wait, bulk_wait_read, fence_mbarrier_init, fence_proxy_async,
                           mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait, setmaxnreg_dec, setmaxnreg_inc,
                           smem_addr, sw128, tensor_map_2d, tensormap_acquire, tma_load_2d, tma_store_2d, wgmma_commit,
                           wgmma_desc, wgmma_fence, wgmma_wait)
from ..base import Traffic, UnsupportedProblem
from . import _common as C
from ._common import F32
from .hopper import WGMMA_BY_N, TmaRing, require_hopper, require_tma_shapes
from .hopper_ws import CONSUMER_REGS, PRODUCER_REGS

BM, BK = 128, 64
#: a TMA store's box of C: 64 rows (a consumer warpgroup's) x 32 float32 columns (128-byte rows, swizzled)
CB_COLS, CB_BYTES = 32, 64 * 32 * 4
#: blocks when planning for a device that does not say how many SMs it has: the H100's and H200's
DEFAULT_SMS = 132
#: blocks in the simulator (no SMs): two, so that at small shapes a block walks several tiles
SIM_BLOCKS = 2


@lru_cache(maxsize=None)
def _persistent_kernel(BN: int, STAGES: int):
    """Rung 22's roles and ring (a producer warpgroup, two consumer warpgroups of 64 x BN each,
    STAGES k-tiles with full and empty mbarriers, setmaxnreg), in a grid of one block per SM:
    block b takes tiles b, b + gridDim.x, ... of the (row, column) grid of BM x BN tiles, in
    row-major order.  The ring's stage and parity run on across tiles (a count of k-tiles this
    block has moved), so the producer fills the next tile's stages while the consumers finish
    this one: no block waits for a launch, and its loads cover the epilogue.

    The epilogue: each consumer warpgroup writes its 64 x BN float32 result to C through shared
    memory in boxes of 64 x 32 (8 KiB, two a warpgroup, after the ring, 128-byte swizzled as the
    map names them, so the fragments' stores do not conflict): its threads store their fragments
    into a box and fence them for the async proxy, meet at the warpgroup's named barrier (1 or
    2, 128 threads), and one thread issues the TMA store (clipped at C's edges by the copy
    engine) and commits it; before a box is written again, that thread waits until the store two
    boxes back has read it (``cp.async.bulk.wait_group.read 1``) and the warpgroup meets again.
    The issuing thread waits for its stores to complete before it exits."""
    NT = 384
    A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2
    STAGE = A_BYTES + B_BYTES
    C_OFF = STAGES * STAGE  # the epilogue's boxes, after the ring (1024-byte aligned)
    NACC = BN // 2
    mma = WGMMA_BY_N[BN]
    dev = C._jit(device=True, forceinline=True)

    @dev
    def fill(smem, tma, tmb, full, s, kt, pad, bm, bn):
        off = pad + uint32(s * STAGE)
        mbar_arrive_expect_tx(full, s, STAGE)
        tma_load_2d(smem, off, tma, kt * BK, bm, full, s)
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

    @dev
    def store_tile(acc, smem, smem32, tmc, pad, cw, t, bm, bn):
        lane = t % 32
        r = 16 * ((t % 128) // 32) + lane // 4  # the fragment's row in the warpgroup's 64
        box0 = uint32(C_OFF + cw * (2 * CB_BYTES))
        for j in range(BN // CB_COLS):
            box = box0 + uint32((j % 2) * CB_BYTES)
            if t % 128 == 0:
                bulk_wait_read(1)  # the store that used this box last (two back) has read it
            bar_sync(1 + cw, 128)
            for q in range(CB_COLS // 8):
                jj = (CB_COLS // 8) * j + q
                cb = uint32(4 * (8 * q + 2 * (lane % 4)))  # the byte of the pair's column in a 128-byte row
                p0 = pad + sw128(box + uint32(r * 128) + cb)
                p1 = pad + sw128(box + uint32((r + 8) * 128) + cb)
                smem32[p0 // 4] = acc[4 * jj]
                smem32[p0 // 4 + 1] = acc[4 * jj + 1]
                smem32[p1 // 4] = acc[4 * jj + 2]
                smem32[p1 // 4 + 1] = acc[4 * jj + 3]
            fence_proxy_async()  # this thread's stores -> the async proxy (the TMA store reads them)
            bar_sync(1 + cw, 128)
            if t % 128 == 0:
                tma_store_2d(tmc, bn + CB_COLS * j, bm + 64 * cw, smem, pad + box)
                bulk_commit()

    @C._jit(launch_bounds=(NT, 1))
    def gemm_persistent(tma, tmb, tmc, M, N, K):
        smem = cuda.shared.array(0, float16)  # the ring, the epilogue's boxes, + 1 KiB for alignment
        smem32 = cuda.shared.array(0, float32)  # the same bytes, as the epilogue writes them
        full = cuda.shared.array(STAGES, uint64)
        empty = cuda.shared.array(STAGES, uint64)
        base = smem_addr(smem)
        pad = (uint32(1024) - (base & uint32(1023))) & uint32(1023)
        t = int32(cuda.threadIdx.x)
        wg = t // 128
        n_k = (K + (BK - 1)) // BK
        tiles_n = (N + (BN - 1)) // BN
        n_tiles = tiles_n * ((M + (BM - 1)) // BM)
        first = int32(cuda.blockIdx.x)
        step = int32(cuda.gridDim.x)
        if t == 0:
            tensormap_acquire(tma)
            tensormap_acquire(tmb)
            for s in range(STAGES):
                mbar_init(full, s, 1)
                mbar_init(empty, s, 2)
            fence_mbarrier_init()
        cuda.syncthreads()
        if wg == 0:
            setmaxnreg_dec(PRODUCER_REGS)
            if t == 0:
                it = int32(0)  # k-tiles this block has loaded: the ring's position across tiles
                for tile in range(first, n_tiles, step):
                    bm = (tile // tiles_n) * BM
                    bn = (tile % tiles_n) * BN
                    for kt in range(n_k):
                        s = it % STAGES
                        mbar_wait(empty, s, ((it // STAGES) & 1) ^ 1)
                        fill(smem, tma, tmb, full, s, kt, pad, bm, bn)
                        it += 1
        else:
            setmaxnreg_inc(CONSUMER_REGS)
            cw = wg - 1
            if t % 128 == 0:
                tensormap_acquire(tmc)  # the thread that issues this warpgroup's stores
            acc = cuda.local.array(NACC, float32)
            it = int32(0)
            for tile in range(first, n_tiles, step):
                bm = (tile // tiles_n) * BM
                bn = (tile % tiles_n) * BN
                for i in range(NACC):
                    acc[i] = float32(0)
                for kt in range(n_k):
                    s = it % STAGES
                    mbar_wait(full, s, (it // STAGES) & 1)
                    a0 = base + pad + uint32(s * STAGE + cw * (64 * 128))
                    b0 = base + pad + uint32(s * STAGE + A_BYTES)
                    tile_mma(acc, smem, a0, b0)
                    if t % 128 == 0:
                        mbar_arrive(empty, s)
                    it += 1
                store_tile(acc, smem, smem32, tmc, pad, cw, t, bm, bn)
            if t % 128 == 0:
                bulk_wait(0)  # every store written to C before the block (and its shared memory) ends

    return gemm_persistent


@dataclass(frozen=True)
class Persistent(TmaRing):
    BN: int = 256
    STAGES: int = 4

    rung: ClassVar[int] = 23
    name: ClassVar[str] = "persistent"
    AFTER_RING: ClassVar[int] = 4 * CB_BYTES  # the epilogue's C boxes, two a consumer warpgroup
    what: ClassVar[str] = (
        "Rung 22's block launched once per SM, each walking the 128x256 tiles of C in steps of "
        "the grid: the ring runs on from tile to tile, so the producer loads the next tile while "
        "the consumers finish this one. C leaves by TMA stores from 128-byte-swizzled 64x32 boxes "
        "of shared memory.")

    def tiles(self, problem) -> int:
        return -(-problem.m // BM) * -(-problem.n // self.BN)

    def sms(self) -> int:
        """Blocks in the grid: the device's SMs; DEFAULT_SMS planning for a device that does not
        say; SIM_BLOCKS in the simulator, so that its blocks walk several tiles at small shapes."""
        d = backend.device()
        if d.simulated:
            return SIM_BLOCKS
        return int(d.sm_count) if d.sm_count else DEFAULT_SMS

    def grid(self, problem):
        return (max(1, min(self.tiles(problem), self.sms())),)

    def supports(self, problem):
        require_hopper(self, problem, "TMA loads and stores, mbarriers, wgmma and setmaxnreg")
        require_tma_shapes(self, problem, c_offsets=False)  # C leaves by TMA stores
        if self.tiles(problem) >= 2**31:
            raise UnsupportedProblem(f"{self.label}: tile numbers are 32-bit; {self.tiles(problem)} tiles")

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        tma = tensor_map_2d(bufs["a"], (k, m), 2 * k, (BK, BM))
        tmb = tensor_map_2d(bufs["b"], (n, k), 2 * n, (64, BK))
        tmc = tensor_map_2d(bufs["c"], (n, m), 4 * n, (CB_COLS, 64), itemsize=4)  # C (m, n) float32
        kern = _persistent_kernel(self.BN, self.STAGES)
        args = (tma, tmb, tmc, m, n, k)
        return [DynamicSharedLaunch(kern, self.grid(problem), self.threads(), args, self.dynamic_shared_bytes())]

    def traffic(self, problem):
        m, n, k = C._dims(problem)
        l2 = (m * k * math.ceil(n / self.BN) + k * n * math.ceil(m / BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                       smem_bytes=float(l2 - m * n * F32) * 2 + 2.0 * m * n * F32, limiter="tensor",
                       notes=f"{BM}x{self.BN}x{BK} tiles walked by one block an SM, rung 22's warp "
                             f"specialization, {self.STAGES} stages, TMA-store epilogue",
                       extra={"peak": "tensor.fp16"})
