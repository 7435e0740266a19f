"""GEMM rung 24 ``cluster`` (sm_90a): rung 22's warp-specialized block in clusters of two blocks
along m, which share their tile of B: each block loads half of it and the copy engine
multicasts both halves into both blocks' shared memory, so B crosses from L2 to the SMs once a
cluster instead of once a block.  Checked in the simulator (the blocks of a cluster run together
there, through the twins of :mod:`perfkit.kernels._ptx_hopper`) and compiled for sm_90a; on the
H200 (2026-11-27) its first launch hung, and on the H100 (2026-11-28) its tests hung again, with
no trap, while the probe of each mechanism on its own passed (tests/test_gemm_hopper.py).  With
no more k-tiles than stages in every shape that hung, a lost arrival would have trapped after
``MBAR_WAIT_LIMIT_NS``: docs/CLUSTER_HANG.md ranks the unbounded waits left (the exit cluster
barrier, the consumers' setmaxnreg.inc, the launch) and a trap that does not surface, and
``_cluster_kernel``'s switches (off for the rung) let the GPU probes bisect and trace it."""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32, uint64
from numba.types import float16

from ... import backend
from .._dynsmem import DynamicSharedLaunch
from .._ptx_hopper import (cluster_ctarank, clustered, cluster_dims, cluster_sync, fence_mbarrier_init,
                           mbar_arrive, mbar_arrive_cluster, mbar_arrive_expect_tx, mbar_init, mbar_wait, setmaxnreg_dec,
                           setmaxnreg_inc, smem_addr, tensor_map_2d, tensormap_acquire, tma_load_2d,
                           tma_load_2d_multicast, wgmma_commit, wgmma_desc, wgmma_fence, wgmma_wait)
from ..base import Traffic, UnsupportedProblem
from . import _common as C
from ._common import F32
from .hopper import WGMMA_BY_N, TmaRing, require_hopper, require_tma_shapes
from .hopper_ws import CONSUMER_REGS, PRODUCER_REGS

BM, BK = 128, 64
#: the rung hung on both GPUs, with no trap (docs/CLUSTER_HANG.md): on a real GPU its launch is
#: refused, not left to hang the process, unless this environment variable is 1 (the GPU probes'
#: full-rung launches, a notebook's ``launch_hung``); the simulator and the compiler never refuse
LAUNCH_HUNG_ENV = "PERFKIT_LAUNCH_HUNG"
#: blocks a cluster, along m (grid.y): the two share their k-tiles of B
CLUSTER_M = 2
#: the k-rows of a 64-column block of B's k-tile that each block of the pair loads for both
HALF_K = BK // CLUSTER_M


#: the switches of :func:`_cluster_kernel` the GPU probes bisect the rung with (tests/test_gemm_hopper.py's
#: ``test_cluster_bisect_probe``, docs/CLUSTER_HANG.md); the rung itself runs with all of them off
PROBE_SWITCHES = ("no_mma", "no_multicast", "no_remote", "no_setmaxnreg", "producer_tail", "trace")
#: the progress words a traced block writes after C (``trace``): slot -> what has happened (the
#: value: 1, or how many k-tiles)
TRACE_WORDS = 32
TRACE_SLOTS = {16: "entered", 17: "barriers initialized", 0: "first cluster_sync passed",
               1: "producer past setmaxnreg.dec", 2: "fills issued", 3: "producer loop done",
               4: "wg1 past setmaxnreg.inc", 5: "wg2 past setmaxnreg.inc", 6: "wg1 full waits passed",
               7: "wg2 full waits passed", 8: "wg1 mma done", 9: "wg2 mma done", 10: "wg1 released",
               11: "wg2 released", 12: "wg1 epilogue done", 13: "wg2 epilogue done", 15: "producer tail done",
               14: "exit passed (t 0)"}


@lru_cache(maxsize=None)
def _cluster_kernel(BN: int, STAGES: int, no_mma: bool = False, no_multicast: bool = False, no_remote: bool = False,
                    no_setmaxnreg: bool = False, producer_tail: bool = False, trace: bool = False):
    """Rung 22's block (a producer warpgroup, two consumer warpgroups of 64 x BN each, STAGES
    k-tiles with full and empty mbarriers, setmaxnreg) in a cluster of two blocks, rank r = m
    tile mod 2: block tiles (2i, j) and (2i + 1, j) of C, which need the same k-tiles of B.

    Each stage's B (BN / 64 blocks of 64 k-rows x 128 bytes, 128-byte swizzled) is loaded half by
    each block: block r's producer copies k-rows 32r..32r + 31 of every 64-column block with the
    multicast mask 0b11, so the copy lands at the same offset in both blocks' shared memory
    (4 KiB-aligned halves: the swizzle, a function of the address, comes out as one 64-row box
    would) and completes its bytes on both blocks' "full" barrier of the stage; A (the block's
    own rows) is loaded as before.  A block's full barrier expects the whole stage (A, its half
    of B and its peer's half), so its consumers start once both halves have landed.

    A stage is written by both producers, so it is free only when both blocks' consumers are
    done with it: the "empty" barriers count 4 arrivals (2 consumer warpgroups x 2 blocks), and a
    consumer warpgroup releasing a stage arrives on its own block's barrier and on its peer's
    (mapa + a remote arrive).  The cluster meets (barrier.cluster) after the barriers are
    initialized, before any copy or arrival of the peer can reach them, and again before
    exiting: a block must not end while its peer may still arrive on its barriers.  An odd
    number of m tiles gets a last block past m (its A all zeros from the copy engine, its C
    rows not written), which still loads its half of B for its partner.

    The switches (all off for the rung; the GPU probes' bisection of the hang of 2026-11-27/28,
    docs/CLUSTER_HANG.md), each a compile-time constant (a branch not taken is not compiled in):
    ``no_mma`` the consumers only wait for a stage and release it (C = 0); ``no_multicast`` each
    producer loads both halves of B itself with plain TMA copies (the empty barriers still count
    both blocks' consumers); ``no_remote`` (with ``no_multicast``: rung 22's block in a cluster)
    a consumer releases a stage on its own block's barrier only, which counts 2; ``no_setmaxnreg``
    no register moves; ``producer_tail`` no cluster barrier before exit: the producer thread waits
    until every stage has been released by all four consumer warpgroups (CUTLASS's
    ``load_tail``/``producer_tail``), the consumers exit after their epilogue; ``trace``
    progress words after C's m x n floats (``TRACE_WORDS`` a block, row-major block order:
    ``TRACE_SLOTS``),
    each stored with a system fence, so that a host polling C in mapped memory sees how far each
    role of each block got while the kernel hangs."""
    NT = 384
    TRACE = trace
    A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2
    STAGE = A_BYTES + B_BYTES
    NACC = BN // 2
    mma = WGMMA_BY_N[BN]
    dev = C._jit(device=True, forceinline=True)

    @dev
    def fill(smem, tma, tmb, full, s, kt, pad, bm, bn, rank):
        off = pad + uint32(s * STAGE)
        mbar_arrive_expect_tx(full, s, STAGE)  # A, this block's half of B and the peer's
        tma_load_2d(smem, off, tma, kt * BK, bm, full, s)
        for j in range(BN // 64):  # (64 n, 32 k) boxes, to both blocks of the cluster (mask 0b11)
            if no_multicast:  # probe: both halves by this block's own plain copies
                for h in range(CLUSTER_M):
                    tma_load_2d(smem, off + uint32(A_BYTES + j * (BK * 128) + h * (HALF_K * 128)), tmb,
                                bn + 64 * j, kt * BK + h * HALF_K, full, s)
            else:
                tma_load_2d_multicast(smem, off + uint32(A_BYTES + j * (BK * 128) + rank * (HALF_K * 128)), tmb,
                                      bn + 64 * j, kt * BK + rank * HALF_K, full, s, 3)

    @dev
    def mark(c, M, N, slot, v):  # probe: a progress word after C, for a host polling mapped memory
        if TRACE:
            blk = int32(cuda.blockIdx.y) * int32(cuda.gridDim.x) + int32(cuda.blockIdx.x)
            c[M * N + TRACE_WORDS * blk + slot] = float32(v)
            cuda.threadfence_system()

    @dev
    def tile_mma(acc, smem, a0, b0):
        wgmma_fence()
        for kk in range(BK // 16):
            mma(acc, smem, wgmma_desc(a0 + uint32(kk * 32), 16, 1024),
                wgmma_desc(b0 + uint32(kk * 2048), 8192, 1024), 1)
        wgmma_commit()
        wgmma_wait(0)

    @C._jit(launch_bounds=(NT, 1))
    def gemm_cluster(tma, tmb, c, M, N, K):
        cluster_dims(1, CLUSTER_M, 1)  # the kernel's cluster shape (.reqnctapercluster 1, 2, 1)
        smem = cuda.shared.array(0, float16)  # the ring, + 1 KiB to align its start to 1024 bytes
        full = cuda.shared.array(STAGES, uint64)  # a stage's tile has landed (both halves of B)
        empty = cuda.shared.array(STAGES, uint64)  # all four consumer warpgroups of the pair are done with it
        base = smem_addr(smem)
        pad = (uint32(1024) - (base & uint32(1023))) & uint32(1023)
        t = int32(cuda.threadIdx.x)
        wg = t // 128
        rank = int32(cluster_ctarank())
        bm = int32(cuda.blockIdx.y) * BM
        bn = int32(cuda.blockIdx.x) * BN
        n_k = (K + (BK - 1)) // BK
        if t == 0:
            mark(c, M, N, 16, 1)
            tensormap_acquire(tma)
            tensormap_acquire(tmb)
            for s in range(STAGES):
                mbar_init(full, s, 1)
                mbar_init(empty, s, 2 if no_remote else 2 * CLUSTER_M)
            fence_mbarrier_init()
            mark(c, M, N, 17, 1)
        cluster_sync()  # both blocks' barriers initialized before the peer's copies and arrivals reach them
        if t == 0:
            mark(c, M, N, 0, 1)
        if wg == 0:
            if not no_setmaxnreg:
                setmaxnreg_dec(PRODUCER_REGS)
            if t == 0:
                mark(c, M, N, 1, 1)
                for kt in range(n_k):
                    s = kt % STAGES
                    mbar_wait(empty, s, ((kt // STAGES) & 1) ^ 1)  # released by both blocks' consumers
                    fill(smem, tma, tmb, full, s, kt, pad, bm, bn, rank)
                    mark(c, M, N, 2, kt + 1)
                mark(c, M, N, 3, 1)
                if producer_tail:  # every stage released by all four consumer warpgroups: no arrival to come
                    for kt in range(n_k, n_k + STAGES):
                        s = kt % STAGES
                        mbar_wait(empty, s, ((kt // STAGES) & 1) ^ 1)
                    mark(c, M, N, 15, 1)
        else:
            if not no_setmaxnreg:
                setmaxnreg_inc(CONSUMER_REGS)
            cw = wg - 1
            if t % 128 == 0:
                mark(c, M, N, 4 + cw, 1)
            acc = cuda.local.array(NACC, float32)
            for i in range(NACC):
                acc[i] = float32(0)
            for kt in range(n_k):
                s = kt % STAGES
                mbar_wait(full, s, (kt // STAGES) & 1)
                if t % 128 == 0:
                    mark(c, M, N, 6 + cw, kt + 1)
                a0 = base + pad + uint32(s * STAGE + cw * (64 * 128))
                b0 = base + pad + uint32(s * STAGE + A_BYTES)
                if not no_mma:
                    tile_mma(acc, smem, a0, b0)
                if t % 128 == 0:  # both producers write this stage: release it to both
                    mark(c, M, N, 8 + cw, kt + 1)
                    if no_remote:
                        mbar_arrive(empty, s)
                    else:
                        for cta in range(CLUSTER_M):
                            mbar_arrive_cluster(empty, s, cta)
                    mark(c, M, N, 10 + cw, kt + 1)
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
            if t % 128 == 0:
                mark(c, M, N, 12 + cw, 1)
        if not producer_tail:
            cluster_sync()  # the peer may still arrive on this block's barriers until it is done
        if t == 0:
            mark(c, M, N, 14, 1)

    return clustered(gemm_cluster, (1, CLUSTER_M, 1))


@dataclass(frozen=True)
class Cluster(TmaRing):
    BN: int = 256
    STAGES: int = 4

    rung: ClassVar[int] = 24
    name: ClassVar[str] = "cluster"
    what: ClassVar[str] = (
        "Rung 22's block in clusters of two along m that share B: each producer loads half of B's "
        "k-tiles with a multicast TMA copy landing in both blocks' shared memory, so B crosses "
        "from L2 once a cluster. A stage is free once both blocks' consumers arrive on its empty "
        "barrier.")

    def grid(self, problem):
        """(n tiles, m tiles rounded up to whole clusters)."""
        gx, gy = C._tile_grid(problem, BM, self.BN)
        return gx, -(-gy // CLUSTER_M) * CLUSTER_M

    def supports(self, problem):
        require_hopper(self, problem, "thread-block clusters, TMA multicast, mbarriers, wgmma and setmaxnreg")
        require_tma_shapes(self, problem)

    def plan(self, problem, bufs):
        m, n, k = C._dims(problem)
        tma = tensor_map_2d(bufs["a"], (k, m), 2 * k, (BK, BM))  # A (m, k): rows of k
        tmb = tensor_map_2d(bufs["b"], (n, k), 2 * n, (64, HALF_K))  # B (k, n): half a k-tile of 64 columns
        kern = _cluster_kernel(self.BN, self.STAGES)
        args = (tma, tmb, bufs["c"].reshape(-1), m, n, k)
        return [_HungGuard(kern, self.grid(problem), self.threads(), args, self.dynamic_shared_bytes())]

    def traffic(self, problem):
        """A read once a block (ceil(n / BN) times), B once a cluster (ceil(m tiles / 2) times);
        shared memory still receives (and the wgmma read) B once a block, padding blocks too."""
        m, n, k = C._dims(problem)
        gx, gy = self.grid(problem)
        l2 = (m * k * gx + k * n * (gy // CLUSTER_M)) * 2 + m * n * F32
        smem = (m * k * gx + k * n * gy) * 2 * 2
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2, smem_bytes=float(smem),
                       limiter="tensor",
                       notes=f"{BM}x{self.BN}x{BK} block tile, rung 22's warp specialization, {self.STAGES} "
                             f"stages, clusters of {CLUSTER_M} blocks along m multicasting B",
                       extra={"peak": "tensor.fp16"})


class _HungGuard(DynamicSharedLaunch):
    """The rung's launch, refused on a real GPU until its hang is understood (``LAUNCH_HUNG_ENV``):
    a hang holds the process (and a notebook's cell) with no error; the refusal names the cause."""

    def __call__(self) -> None:
        if not backend.is_simulator() and os.environ.get(LAUNCH_HUNG_ENV) != "1":
            raise UnsupportedProblem(
                "24 cluster is not launched on a GPU: it hung on the H200 (2026-11-27) and the H100 "
                "(2026-11-28) with no trap, cause not yet found (docs/CLUSTER_HANG.md; the probes in "
                f"tools/gpu_window.sh settle it); {LAUNCH_HUNG_ENV}=1 launches it anyway")
        super().__call__()
