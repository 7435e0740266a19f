"""Theoretical occupancy, computed the way the CUDA Occupancy Calculator does it.

The per-compute-capability limits come from the CUDA C++ Programming Guide's table
"Technical Specifications per Compute Capability" (LIMITS_SOURCE) and the allocation rules of
the CUDA Occupancy Calculator / ``cuda_occupancy.h`` shipped with the CUDA toolkit
(CALCULATOR_SOURCE): registers are allocated per warp in units of 256, each SM's register
file is split between 4 sub-partitions, and every block is charged 1 KiB of shared memory
reserved for the system on compute capability 8.0 and newer.

A block may use at most 48 KiB of shared memory (static plus dynamic) unless the kernel opts
in to more with ``cudaFuncSetAttribute(..., MaxDynamicSharedMemorySize, ...)``, up to the
per-block maximum of its compute capability. ``occupancy()`` assumes the opt-in, as the
calculator does (``opt_in=True``); Numba never opts in, so the anatomy view passes
``opt_in=False``. A launch over the limit gets 0 blocks per SM, as ``cuda_occupancy.h``
reports it (and the launch fails).

A block is resident only if there is room for it under every limit; the smallest number of
blocks under any limit wins, and that limit is named as the limiter.
"""
from __future__ import annotations

import operator
from dataclasses import asdict, dataclass

__all__ = ["Limits", "LIMITS", "Occupancy", "OccupancyError", "occupancy", "limits_for",
           "LIMITS_SOURCE", "CALCULATOR_SOURCE"]

LIMITS_SOURCE = ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
                 "#features-and-technical-specifications")
CALCULATOR_SOURCE = "https://docs.nvidia.com/cuda/cuda-occupancy-calculator/index.html"
HEADER_SOURCE = ("cuda_occupancy.h, CUDA 13.5 (pip wheel nvidia-cuda-runtime, "
                 "nvidia/cu13/include/cuda_occupancy.h): cudaOccMaxBlocksPerMultiprocessor")
KiB = 1024


class OccupancyError(ValueError):
    pass


@dataclass(frozen=True)
class Limits:
    cc: tuple[int, int]
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_block: int
    shared_per_sm: int           # bytes, at the largest shared-memory carveout
    max_shared_per_block: int    # bytes, with opt-in
    default_shared_per_block: int  # bytes, without opt-in (48 KiB)
    reserved_shared_per_block: int
    shared_granularity: int
    register_unit: int = 256     # registers are allocated per warp in units of this
    sub_partitions: int = 4
    warp_size: int = 32
    source: str = LIMITS_SOURCE


def _L(cc, warps, blocks, smem_sm_kib, smem_blk_kib, reserved, gran, source=LIMITS_SOURCE):
    return Limits(cc=cc, source=source, max_warps_per_sm=warps, max_blocks_per_sm=blocks, registers_per_sm=65536,
                  max_registers_per_thread=255, max_threads_per_block=1024,
                  shared_per_sm=smem_sm_kib * KiB, max_shared_per_block=smem_blk_kib * KiB,
                  default_shared_per_block=min(48, smem_blk_kib) * KiB,
                  reserved_shared_per_block=reserved, shared_granularity=gran)


#: compute capability -> limits (Programming Guide table; granularity and reservation from the
#: occupancy calculator: 256-byte shared allocation on 7.x, 128 bytes and 1 KiB reserved on 8.0+)
LIMITS = {
    (7, 0): _L((7, 0), 64, 32, 96, 96, 0, 256),
    (7, 5): _L((7, 5), 32, 16, 64, 64, 0, 256),
    (8, 0): _L((8, 0), 64, 32, 164, 163, 1 * KiB, 128),
    (8, 6): _L((8, 6), 48, 16, 100, 99, 1 * KiB, 128),
    (8, 7): _L((8, 7), 48, 16, 164, 163, 1 * KiB, 128),
    (8, 9): _L((8, 9), 48, 24, 100, 99, 1 * KiB, 128),
    (9, 0): _L((9, 0), 64, 32, 228, 227, 1 * KiB, 128),
    (10, 0): _L((10, 0), 64, 32, 228, 227, 1 * KiB, 128),
    # 24 resident blocks: what cuda_occupancy.h (CUDA 13.5, cudaOccMaxBlocksPerMultiprocessor)
    # and so cudaOccupancyMaxActiveBlocksPerMultiprocessor use for every 12.x device
    (12, 0): _L((12, 0), 48, 24, 100, 99, 1 * KiB, 128, source=HEADER_SOURCE),
}


def limits_for(cc) -> Limits:
    cc = tuple(cc)
    if cc not in LIMITS:
        raise OccupancyError(f"no occupancy limits for compute capability {cc[0]}.{cc[1]}; "
                             f"known: {', '.join(f'{a}.{b}' for a, b in LIMITS)}")
    return LIMITS[cc]


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: str          # "registers", "shared memory", "warps" or "blocks"
    limits: dict          # blocks per SM allowed by each resource (None: not limited by it)
    warps_per_block: int
    registers_per_warp: int
    shared_per_block: int  # bytes charged per block (with reservation and rounding)

    @property
    def ratio(self) -> float:
        return self.active_warps / self.max_warps

    def as_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}

    def __str__(self) -> str:
        if self.blocks_per_sm == 0:
            if self.limiter == "shared memory":  # only over the per-block limit can it allow 0
                return (f"0%: {self.shared_per_block} bytes of shared memory per block (with the "
                        "reservation) are over the per-block limit; the launch fails")
            return (f"0%: not even one block fits on an SM ({self.limiter}); the launch fails "
                    "with 'too many resources requested'")
        return (f"{self.ratio:.0%} ({self.active_warps}/{self.max_warps} warps, "
                f"{self.blocks_per_sm} blocks/SM, limited by {self.limiter})")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(cc, threads_per_block: int, registers_per_thread: int, shared_per_block: int = 0,
              *, opt_in: bool = True) -> Occupancy:
    """Resident blocks and warps per SM for a launch.

    ``shared_per_block``: static + dynamic shared bytes per block, without the system's
    reservation (this function adds it). ``opt_in``: whether the kernel raised its dynamic
    shared-memory limit above 48 KiB (the calculator assumes so; Numba kernels never do)."""
    lim = limits_for(cc)
    ints = []
    for name, v in (("threads_per_block", threads_per_block), ("registers_per_thread", registers_per_thread),
                    ("shared_per_block", shared_per_block)):
        try:
            if isinstance(v, bool):
                raise TypeError
            ints.append(operator.index(v))
        except TypeError:
            raise OccupancyError(f"{name} must be an integer, got {v!r}") from None
    threads_per_block, registers_per_thread, shared_per_block = ints
    if not 1 <= threads_per_block <= lim.max_threads_per_block:
        raise OccupancyError(f"block of {threads_per_block} threads: must be 1..{lim.max_threads_per_block}")
    if not 0 <= registers_per_thread <= lim.max_registers_per_thread:
        raise OccupancyError(f"{registers_per_thread} registers per thread: must be 0..the limit of "
                             f"{lim.max_registers_per_thread} on cc {cc[0]}.{cc[1]}")
    if shared_per_block < 0:
        raise OccupancyError(f"shared_per_block must be >= 0, got {shared_per_block}")
    warps = -(-threads_per_block // lim.warp_size)
    by_warps = lim.max_warps_per_sm // warps
    regs_per_warp = _round_up(max(registers_per_thread, 1) * lim.warp_size, lim.register_unit)
    per_partition = lim.registers_per_sm // lim.sub_partitions
    warps_by_regs = (per_partition // regs_per_warp) * lim.sub_partitions
    by_regs = warps_by_regs // warps
    # the system's reservation is charged to every block, one that uses no shared memory too
    # (cuda_occupancy.h: 1 KiB a block, 228 such blocks an SM on 9.0; the block limit binds first)
    smem = _round_up(shared_per_block + lim.reserved_shared_per_block, lim.shared_granularity) \
        if shared_per_block + lim.reserved_shared_per_block > 0 else 0
    per_block_cap = (lim.max_shared_per_block if opt_in else lim.default_shared_per_block) \
        + lim.reserved_shared_per_block
    if smem > per_block_cap:  # cuda_occupancy.h: over the per-block limit, no block is resident
        return Occupancy(blocks_per_sm=0, active_warps=0, max_warps=lim.max_warps_per_sm,
                         limiter="shared memory",
                         limits={"warps": by_warps, "registers": by_regs, "shared memory": 0,
                                 "blocks": lim.max_blocks_per_sm},
                         warps_per_block=warps, registers_per_warp=regs_per_warp, shared_per_block=smem)
    by_smem = lim.shared_per_sm // smem if smem else None  # no shared memory: no limit
    # on a tie the first named wins: warps (the block shape) before the resources it uses
    limits = {"warps": by_warps, "registers": by_regs, "shared memory": by_smem,
              "blocks": lim.max_blocks_per_sm}
    blocks = min(v for v in limits.values() if v is not None)
    limiter = next(k for k, v in limits.items() if v == blocks)
    return Occupancy(blocks_per_sm=blocks, active_warps=blocks * warps, max_warps=lim.max_warps_per_sm,
                     limiter=limiter, limits=limits, warps_per_block=warps,
                     registers_per_warp=regs_per_warp, shared_per_block=smem)
