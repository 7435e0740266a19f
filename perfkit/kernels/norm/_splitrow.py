"""The ``split_row`` rungs (softmax, layernorm, rmsnorm): rows too wide for the ``smem_row`` rungs'
shared memory (past about 58k float32 columns: the norms' GPU_SWEEP has 4096 x 65536 float32, 256
KiB a row) kept on chip all the same, part in registers and the rest in shared memory, so that x
leaves DRAM exactly once and y is written once (issue 44: at 65536 columns smem_row refuses and
the tuned rung reads the uncached part of every row twice).

One block of B threads a row.  Each thread holds ``held`` elements of its row in registers (as
float32, whatever the input dtype): ``held / W`` vectors of W elements (16 bytes where the width
allows), vector c at column ``W * (t + c * B)``, all loaded before any is used.  Those are the
row's first ``K = B * held`` columns; columns K and up are staged in dynamic shared memory in the
input dtype, as :mod:`._smemrow` stages a whole row (16-byte cp.async, a scalar head and tail
where the row is not whole 16-byte chunks).  At 65536 float32 columns: 1024 threads x 16 floats
(64 KiB of registers) and 49152 columns (192 KiB) of shared memory, one block an SM.  A row
wider than that (the register share plus 227 KiB) is refused, naming the rung to use.

What the three rungs share lives here:

* :class:`SplitRowShape`: the launch shape (``threads`` per block, 0 = :func:`split_threads`;
  ``held``, elements a thread keeps in registers, 0 = :data:`HELD`), the refusal, the bytes of
  shared memory asked for and the compiled kernel's constants (:meth:`SplitRowShape.kernel_params`);
* :func:`stage_part`: the device function that copies columns K.. of row ``r`` into the shared
  row by 16-byte cp.async copies (K is a multiple of 16 bytes of elements, so the pad of an
  unaligned row is :mod:`._smemrow`'s, ``(r * cols) mod (16 / itemsize)``);
* :func:`block_sum` / :func:`block_max`: all-reduces over the block whose second stage is one
  warp's shuffles (each lane reads one warp's partial), not :func:`._common.group_sum`'s loop in
  which every thread reads all B / 32 partials (32 loads a thread at 1024 threads, a quarter of
  the softmax kernel's instructions at 65536 columns in perfkit.model's count);
* :func:`jit_split`: ``cuda.jit`` with the register cap the launch was sized for.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np
from numba import cuda

from ... import backend
from .._dynsmem import MAX_OPT_IN_SHARED, check_dynamic_shared
from .._ptx import cp_async16, cp_async_commit, cp_async_wait
from ..base import UnsupportedProblem
from ._common import NEG_INF, ZERO, block_reg_cap, next_pow2, vec_width, warp_max, warp_sum
from ._smemrow import BLOCK_RESERVED, SM_BLOCKS, SM_REGS, SM_SHARED, SM_THREADS, aligned, per_copy

__all__ = ["SplitRowShape", "split_threads", "stage_part", "jit_split", "staged_bytes", "widest", "block_sum", "block_max",
           "HELD", "ELEMS_PER_THREAD", "STATIC_SHARED", "WIDE_COLS"]

#: elements of its row a thread keeps in registers (float32 registers, whatever the dtype): 4
#: vectors of 4 floats or 2 of 8 halves.  At 1024 threads (64 registers a thread) that leaves
#: the reductions and the write their registers (sm_90, no spills: perfkit anatomy)
HELD = 16
#: elements of its row a thread covers, registers and shared memory together, for the rule's
#: threads: 1024 at 65536 columns (16 in registers, 48 staged), 256 at 16384
ELEMS_PER_THREAD = 64
MIN_THREADS = 64
MAX_THREADS = 1024
#: static shared memory: the reductions' 32-float scratch (at most two)
STATIC_SHARED = 2 * 32 * 4
#: the width the rungs are for (the widest row of the norms' GPU_SWEEP), and shown at
WIDE_COLS = 65536


def split_threads(cols: int) -> int:
    """Threads per block: ``cols / ELEMS_PER_THREAD`` rounded up to a power of two, 64..1024."""
    return min(MAX_THREADS, max(MIN_THREADS, next_pow2(-(-int(cols) // ELEMS_PER_THREAD))))


def staged_cols(cols: int, B: int, held: int) -> int:
    """Columns of the row past the registers' share (staged in shared memory)."""
    return max(0, int(cols) - B * held)


def staged_bytes(cols: int, dtype: str, B: int, held: int) -> int:
    """Dynamic shared memory of the staged part: its columns, an unaligned row's pad (up to
    16 / itemsize - 1 elements) ahead of them, rounded up to whole 16-byte chunks; 0 when the
    whole row fits in registers and rows are 16-byte aligned."""
    n = staged_cols(cols, B, held) + (0 if aligned(cols, dtype) else per_copy(dtype) - 1)
    return -(-n * np.dtype(dtype).itemsize // 16) * 16


def widest(dtype: str, B: int, held: int) -> int:
    """The widest row a block of B threads holds: B * held columns in registers and what 227 KiB
    of shared memory (less the static scratch and an unaligned row's pad) stage: 74429 float32
    or 132473 float16 columns at the rule's 1024 threads x 16."""
    it = np.dtype(dtype).itemsize
    return B * held + (MAX_OPT_IN_SHARED - STATIC_SHARED) // it - (per_copy(dtype) - 1)


def reg_cap(B: int, shared: int, held: int) -> int:
    """Registers a thread that let as many blocks share an SM as its shared memory and thread
    slots allow (64 for one 1024-thread block of a 192 KiB staged part), at least ``held`` + 32,
    never more than a block of B threads may have."""
    per_block = shared + STATIC_SHARED + BLOCK_RESERVED
    nb = max(1, min(SM_SHARED // per_block, SM_THREADS // B, SM_BLOCKS))
    return min(block_reg_cap(B), max(held + 32, min(255, SM_REGS // (B * nb) // 8 * 8)))


def jit_split(B: int, regs: int):
    """``cuda.jit`` for a split_row kernel with ``regs`` (:func:`reg_cap`) as ptxas's cap."""
    if backend.is_simulator():
        return cuda.jit
    return cuda.jit(max_registers=regs if regs < 255 else None)


class SplitRowShape:
    """Launch shape of the split_row rungs: fields ``threads`` (0 = :func:`split_threads`) and
    ``held`` (0 = :data:`HELD`), and a class attribute ``instead``, the rung named for rows too
    wide to hold."""

    instead = "the tuned rung"

    def example(self, problem):
        """The op's example at :data:`WIDE_COLS` columns (the same rows and dtype): the width
        the rung is for (at 4096 columns a row fits smem_row's shared memory)."""
        return dataclasses.replace(problem, cols=WIDE_COLS)

    def block(self, problem) -> int:
        return self.threads or split_threads(problem.cols)

    def elems_held(self) -> int:
        return self.held or HELD

    def supports(self, problem):
        B, h = self.block(problem), self.elems_held()
        if B < 32 or B > 1024 or B & (B - 1):
            raise UnsupportedProblem(f"{self.label}: threads={B} must be a power of two in 32..1024")
        if h % 8 or h > 64:
            raise UnsupportedProblem(f"{self.label}: held={h} elements a thread in registers must be a multiple of "
                                     "8 (whole vectors at any width) and at most 64")
        if problem.cols > widest(problem.dtype, B, h):
            it = np.dtype(problem.dtype).itemsize
            raise UnsupportedProblem(
                f"{self.label}: a row of {problem.cols} {problem.dtype} columns ({problem.cols * it} bytes) does not "
                f"fit on chip: {B * h} columns in registers ({h} a thread x {B} threads) and at most "
                f"{widest(problem.dtype, B, h) - B * h} in the {MAX_OPT_IN_SHARED // 1024} KiB of shared memory a "
                f"block may have (rows up to {widest(problem.dtype, B, h)} columns); use {self.instead} instead")
        check_dynamic_shared(self.label, self.shared_bytes(problem), STATIC_SHARED)

    def kernel_params(self, problem) -> tuple[int, int, int, bool, int]:
        """(B, W, NC, PEEL, REGS): threads, elements a vector (16 bytes where the width allows),
        vectors a thread holds in registers (columns 0..K-1 of the row, K = B * NC * W), whether
        rows start unaligned (a scalar head and tail around the cp.async copies), the register cap."""
        B, h = self.block(problem), self.elems_held()
        W = vec_width(problem.cols, problem.dtype)
        return B, W, h // W, not aligned(problem.cols, problem.dtype), reg_cap(B, self.shared_bytes(problem), h)

    def register_cols(self, problem) -> int:
        """Columns of a row held in registers (the rest are staged in shared memory)."""
        return min(problem.cols, self.block(problem) * self.elems_held())

    def shared_bytes(self, problem) -> int:
        return staged_bytes(problem.cols, problem.dtype, self.block(problem), self.elems_held())

    def split_note(self, problem) -> str:
        B, W, NC, PEEL, _ = self.kernel_params(problem)
        k = self.register_cols(problem)
        how = "16-byte cp.async" + (", a scalar head and tail" if PEEL else "")
        it = np.dtype(problem.dtype).itemsize
        return (f"one DRAM read of x ({k} of {problem.cols} columns a row in registers, {NC} {8 * W * it}-bit "
                f"vectors a thread; the other {problem.cols - k} staged in shared memory by {how}), one write of y")


@lru_cache(maxsize=None)
def stage_part(B: int, E: int, PEEL: bool, K: int):
    """``stage(x, r, row, cols) -> pad``: columns K.. of row ``r`` of x into the shared ``row``
    (a (1, cols - K + pad) view), column j at ``row[0, pad + j - K]``, then a barrier.  16-byte
    cp.async copies of E elements, committed as one group and waited for.  K is a multiple of E,
    so column K starts a 16-byte chunk exactly where the row does; PEEL (rows not a whole number
    of 16-byte chunks): ``pad`` = (r * cols) mod E, the head (before the first 16-byte boundary
    past K, fewer than E columns) and the tail (past the last whole chunk) go one element a
    thread through registers.  Nothing to copy (cols <= K): the barrier only."""
    if not PEEL:
        @cuda.jit(device=True)
        def stage(x, r, row, cols):
            for j in range(K + E * cuda.threadIdx.x, cols, E * B):
                cp_async16(row, 0, j - K, x, r, j, 16)
            cp_async_commit()
            cp_async_wait(0)
            cuda.syncthreads()  # the copies are visible to the other threads after the wait and a barrier
            return 0
        return stage

    @cuda.jit(device=True)
    def stage(x, r, row, cols):
        t = cuda.threadIdx.x
        pad = (r * cols) % E  # global column j is 16-byte aligned where pad + j is a multiple of E
        n = max(cols - K, 0)
        head = min((E - pad) % E, n)
        body = (n - head) // E  # whole 16-byte chunks after the head
        end = K + head + E * body
        for j in range(K + head + E * t, end, E * B):
            cp_async16(row, 0, pad + j - K, x, r, j, 16)
        cp_async_commit()
        if t < head:  # while the copies fly: the head ...
            row[0, pad + t] = x[r, K + t]
        if end + t < cols:  # ... and the tail, an element a thread (E - 1 at most each)
            row[0, pad + end - K + t] = x[r, end + t]
        cp_async_wait(0)
        cuda.syncthreads()
        return pad
    return stage


@cuda.jit(device=True)
def block_sum(v, B, scr):
    """Sum over the block's B threads (a power of two), every thread gets it: warp shuffles, then
    (B > 32) lane 0 of each warp parks its partial in ``scr`` (32 floats), a barrier, each warp
    sums the B / 32 partials by shuffles (lane i reads partial i), a second barrier before
    ``scr`` is reused."""
    v = warp_sum(v, min(B, 32))
    if B > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr[t // 32] = v
        cuda.syncthreads()
        lane = t % 32
        v = scr[lane] if lane < B // 32 else ZERO
        v = warp_sum(v, 32)
        cuda.syncthreads()
    return v


@cuda.jit(device=True)
def block_max(v, B, scr):
    """Max over the block's B threads, as :func:`block_sum` (a NaN never raises it: fmaxf)."""
    v = warp_max(v, min(B, 32))
    if B > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr[t // 32] = v
        cuda.syncthreads()
        lane = t % 32
        v = scr[lane] if lane < B // 32 else NEG_INF
        v = warp_max(v, 32)
        cuda.syncthreads()
    return v
