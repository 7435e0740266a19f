"""GEMM, ``C = A @ B`` (row-major; A is (m, k), B is (k, n), C is (m, n) float32).

The ladder follows Simon Boehm's SGEMM worklog ("How to Optimize a CUDA Matmul Kernel for
cuBLAS-like Performance", github.com/siboehm/SGEMM_CUDA) step for step in Numba, then goes
one rung further onto the tensor cores.  Ledger (the rung number and name live only in LADDER):

   0 oracle        cuBLAS through CuPy (TF32 off); NumPy on the host in the simulator
   1 naive         one thread per C element, threadIdx.x walks down a column of C
   2 coalesced     threadIdx.x walks along a row of C: loads of B and stores of C coalesce
   3 smem_tiling   32x32 tiles of A and B staged in shared memory, reused 32 times each
   4 blocktile_1d  each thread computes 8 C elements of a column: fewer shared loads per FMA
   5 blocktile_2d  each thread computes an 8x8 C tile from registers: outer products
   6 vectorized    128-bit global loads (load4) and A stored transposed in shared memory
   7 no_bank_conflicts  padded A^T and swizzled, padded B tiles: shared loads and stores without conflicts
   8 double_buffer      two shared buffers: the next tile's loads overlap this tile's FMAs (k-loop unrolled by 2)
   9 index32       rung 8 with 32-bit offsets, written-out k-steps, hoisted addresses
  10 warptile      warps own 64x32 tiles of 4x4 sub-tiles: every operand load is an LDS.128
  11 autotuned     warp tiling at the configuration a search picked (see ``search``)
  12 tensor_core   float16 in, float32 accumulate, ``mma.sync.m16n8k16`` through inline PTX
  13 tc_vector     16-byte global loads (hoisted 32-bit offsets), 32-deep k-tiles, 32x32 warp tiles
  14 tc_ldmatrix   fragments by ``ldmatrix`` from XOR-swizzled (conflict-free) shared tiles
  15 tc_cp_async   ``cp.async`` into a 3-stage ring: two k-tiles in flight, one barrier each
  16 tc_warptile   64x64 warp tiles: each fragment feeds 4-8 mma
  17 tc_epilogue   lanes pair up by shuffle: C written with 16-byte stores
  18 tc_deep       64-deep k-tiles in a 3-stage ring (dynamic shared memory), double-buffered
                   fragments, blocks in groups of 8 block rows
  19 simt_wide     SIMT again: 128x256 block, 8x16 thread tile, launch_bounds(256, 1), operands
                   double-buffered in registers
  20 wgmma         Hopper (sm_90a): wgmma.mma_async from 128-byte-swizzled shared memory through
                   descriptors, fed by a cp.async ring
  21 tma           the tiles by TMA (one thread's bulk tensor copies, swizzled by the copy engine,
                   zeros past the edges; tensor maps encoded on the host, kept in global memory)
                   into a ring guarded by mbarriers (expect_tx, phase parity); k and n multiples
                   of 8
  22 warp_specialized  a TMA producer warpgroup and two wgmma consumer warpgroups (128x256 tile,
                   64x256 each) meeting only on full/empty mbarriers of a 4-stage ring;
                   setmaxnreg moves registers from producer to consumers
  23 persistent    rung 22's block once per SM walking the tiles (the ring runs on across tiles),
                   C leaving through shared memory by TMA stores
  24 cluster       rung 22's block in 2-block clusters along m: each block loads half of the
                   pair's B tile by TMA multicast into both, a stage freed by both blocks'
                   consumers (remote mbarrier arrives)

On a GPU: rungs 18-23 were first recorded on the H200 on 2026-11-27 (commit 6ba0514), at 4096^3
only (float16; rung 19 float32), the Hopper rungs 20-23 at 287, 245, 234 and 197 us against
cuBLAS's 189; rungs 21-23 changed since (the bounded mbarrier wait, eab63e5): those records
are of the code at 6ba0514.  The H100 recorded 18-23 at today's code on 2026-11-28 (516b940):
315, 2953 (float32), 291, 289, 251 and 198 us, cuBLAS 189 (float32: 2662).  Rung 24
``cluster`` hung on both GPUs and has no record.

The inline-PTX helpers (mma, ldmatrix, cp.async, shuffles) and their simulator twins live in
:mod:`perfkit.kernels._ptx`; the 128-bit float32 loads and stores in :mod:`._vector`.

Every rung is correct for every (m, n, k) >= 1: loads outside A or B read zeros and stores
outside C are skipped, so no size needs to be a multiple of a tile.  SIMT rungs take float32;
the tensor-core rungs take float16.  Rungs 9-11 and 13-17 index with 32-bit offsets and refuse
matrices of 2**31 elements or more.  ``supports`` refuses, by arithmetic alone, a launch no GPU
runs: over 1024 threads or 48 KiB of static shared memory per block (a tile configuration), or
over 65535 blocks along grid.y (m beyond 65535 row tiles; the naive rung puts n there).

The package: ``_common`` (the Problem and what every rung shares), ``simt`` (rungs 0-11),
``tensor`` (rungs 12-17), then the rungs of issue 45, appended so that
existing labels keep their meaning: ``tensor_deep`` (18), ``simt_wide`` (19), ``hopper`` (20;
sm_90a), ``hopper_tma`` (21), ``hopper_ws`` (22), ``hopper_persistent`` (23), ``hopper_cluster``
(24); this module is the index: ``LADDER`` and the problems to sweep.
"""
from __future__ import annotations

from ..base import Variant, registry_check
from ._common import F32, I32_LIMIT, Problem  # noqa: F401  (perfkit.kernels.gemm.Problem, as before)
from .simt import (AUTOTUNE_PICK, Autotuned, Blocktile1D, Blocktile2D, Coalesced, DoubleBuffer, Index32,  # noqa: F401
                   Naive, NoBankConflicts, Oracle, SmemTiling, Vectorized, WarpTile, search_space)
from .simt_wide import SimtWide, search_space_wide
from .hopper import Wgmma
from .hopper_tma import Tma
from .hopper_ws import WarpSpecialized
from .hopper_persistent import Persistent
from .hopper_cluster import Cluster
from .tensor_deep import TCDeep
from .tensor import TCEpilogue, TCLdmatrix, TCPipeline, TCVector, TCWarpTile, TensorCore

__all__ = ["Problem", "LADDER", "EXAMPLE_PROBLEM", "GPU_SWEEP", "LLM_SHAPES", "search_space", "search_space_wide"]

LADDER: list[Variant] = [Oracle(), Naive(), Coalesced(), SmemTiling(), Blocktile1D(), Blocktile2D(),
                         Vectorized(), NoBankConflicts(), DoubleBuffer(), Index32(), WarpTile(), Autotuned(),
                         TensorCore(), TCVector(), TCLdmatrix(), TCPipeline(), TCWarpTile(), TCEpilogue(),
                         TCDeep(), SimtWide(), Wgmma(), Tma(), WarpSpecialized(), Persistent(), Cluster()]
registry_check(LADDER)

EXAMPLE_PROBLEM = Problem(4096, 4096, 4096)
LLM_SHAPES = [Problem(4096, 4096, 11008), Problem(8192, 1024, 4096), Problem(4096, 11008, 4096)]
GPU_SWEEP = [Problem(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)] + LLM_SHAPES \
    + [Problem(s, s, s, "float16") for s in (1024, 4096, 8192)]
# float16: n and k multiples of 8, which every float16 rung takes (TMA's rows are 16-byte multiples)
SIM_SWEEP = [Problem(37, 41, 29), Problem(37, 40, 24, "float16")]
