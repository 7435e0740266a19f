"""The ``smem_row`` rungs (softmax, layernorm, rmsnorm): one block per row, the row staged once
in dynamic shared memory, so that x leaves DRAM exactly once whatever the width (the register
caches of the multirow / tuned rungs hold 512 x 32 floats at most, wider rows read their tail
twice, and at width 16384 the tuned rungs' 56-64 registers a thread leave two 512-thread blocks
an SM on sm_90; issue 44's records: 0.43-0.51 of the copy ceiling there).  What the three rungs
share lives here:

* :class:`SmemRowShape`: the rung's launch shape (``threads`` per block, 0 = the rule of
  :func:`row_threads`), its refusal of rows that do not fit a block's shared memory
  (:func:`check_row_fits`, naming the rung to use instead), the bytes it asks for and the
  compiled kernel's constants;
* :func:`stage_row`: the device function that copies row ``r`` of x into the shared row by 16-byte
  ``cp.async`` copies (``perfkit.kernels._ptx``; global to shared without registers, all of a
  thread's copies in flight at once).  A row that is not a whole number of 16-byte chunks starts
  unaligned (row r at byte r * cols * itemsize): its first columns up to the next 16-byte boundary
  (the head, fewer than 16 bytes) and its last ones past the final boundary (the tail) are copied
  one element a thread, the rest by cp.async; the shared row then starts ``pad`` = (r * cols) mod
  (16 / itemsize) elements in, so that each copy's shared address is as aligned as its global one
  (and the W-element shared loads of the sweeps stay aligned: W divides r * cols and 16 / itemsize).

The row is kept in the input dtype (float16 rows take half the bytes, so twice the width fits);
every pass over it reads W elements with one shared load (``LDS.128`` for 16 bytes) and converts
to float32.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import cuda

from ... import backend
from .._dynsmem import MAX_OPT_IN_SHARED, check_dynamic_shared
from .._ptx import cp_async16, cp_async_commit, cp_async_wait
from ..base import UnsupportedProblem
from ._common import block_reg_cap, next_pow2, vec_width

__all__ = ["SmemRowShape", "row_threads", "row_bytes", "max_cols", "check_row_fits", "stage_row", "reg_cap",
           "jit_row", "param_unroll", "per_copy", "STATIC_SHARED", "VECS_PER_THREAD", "MAX_THREADS", "MIN_THREADS"]

#: static shared memory of the smem_row kernels: the reductions' 32-float scratch (at most two)
STATIC_SHARED = 2 * 32 * 4
#: vectors (16 bytes where the width allows) of its row each thread copies, all in flight at
#: once: 256 threads at 16384 float32 columns, three blocks an SM (3 x 64 KiB of rows in an H100
#: SM's 228 KiB).  Fewer threads a row amortize more elements over each thread's fixed work (the
#: two block reductions read one partial per warp; perfkit.model at 4096 x 16384 float32 on the
#: H100: 235 us at 256 or 128 threads, 371 us at 512, 1159 us at 1024 for the softmax)
VECS_PER_THREAD = 16
MAX_THREADS = 512  # 1024 would leave two 64 KiB rows an SM at width 16384 (2048 threads an SM)
MIN_THREADS = 64  # 32 blocks an SM at most: blocks of one warp would fill half its thread slots
#: elements of gamma (and of beta) a thread loads before using any in the write: 2 vectors of 4
#: floats, 1 of 8 halves (16 cost float16 rows at width 16384 spills under their cap of 80)
PARAM_ELEMS = 8


def param_unroll(W: int) -> int:
    """Vectors of gamma (and beta) loaded a trip of the write, all before any is used."""
    return max(1, PARAM_ELEMS // W)
#: an H100 SM (sm_90): 228 KiB of shared memory (1 KiB of it reserved for each block), 2048
#: threads, 32 blocks, 65536 registers
SM_SHARED = 228 * 1024
BLOCK_RESERVED = 1024
SM_THREADS = 2048
SM_BLOCKS = 32
SM_REGS = 65536
MIN_REG_CAP = 40  # 32 spilled layernorm at width 1024 (gamma and beta for 8 elements in flight)


def per_copy(dtype: str) -> int:
    """Elements of one 16-byte cp.async copy: 4 float32, 8 float16."""
    return 16 // np.dtype(dtype).itemsize


def aligned(cols: int, dtype: str) -> bool:
    """Whether every row starts 16-byte aligned (a whole number of 16-byte chunks a row)."""
    return int(cols) * np.dtype(dtype).itemsize % 16 == 0


def row_bytes(cols: int, dtype: str) -> int:
    """Dynamic shared memory of one staged row, rounded up to whole 16-byte chunks; an unaligned
    row's ``pad`` (up to 16 / itemsize - 1 elements) ahead of it."""
    n = int(cols) + (0 if aligned(cols, dtype) else per_copy(dtype) - 1)
    return -(-n * np.dtype(dtype).itemsize // 16) * 16


def max_cols(dtype: str) -> int:
    """The widest row a block can stage (227 KiB less the static scratch, less an unaligned
    row's pad): 58045 float32 or 116089 float16 columns."""
    return (MAX_OPT_IN_SHARED - STATIC_SHARED) // np.dtype(dtype).itemsize - (per_copy(dtype) - 1)


def check_row_fits(label: str, cols: int, dtype: str, instead: str) -> None:
    """UnsupportedProblem when a row does not fit a block's shared memory, naming ``instead``."""
    if cols > max_cols(dtype):
        raise UnsupportedProblem(
            f"{label}: a row of {cols} {dtype} columns ({int(cols) * np.dtype(dtype).itemsize} bytes) does not fit "
            f"the {MAX_OPT_IN_SHARED // 1024} KiB of shared memory a block may have (at most {max_cols(dtype)} "
            f"columns of {dtype}); use {instead} instead")
    check_dynamic_shared(label, row_bytes(cols, dtype), STATIC_SHARED)


def row_threads(cols: int, dtype: str) -> int:
    """Threads per block: each copies about ``VECS_PER_THREAD`` vectors of its row, a power of
    two from ``MIN_THREADS`` to ``MAX_THREADS``."""
    W = vec_width(cols, dtype)
    return min(MAX_THREADS, max(MIN_THREADS, next_pow2(-(-cols // (W * VECS_PER_THREAD)))))


def reg_cap(B: int, cols: int, dtype: str) -> int:
    """Registers per thread that let as many blocks share an SM as its shared memory (and thread
    slots) allow: 40 for three 512-thread blocks of 64 KiB rows (ptxas took 47 for the softmax
    left alone, and registers then allowed two), 80 for three of 256.  At least ``MIN_REG_CAP``."""
    per_block = row_bytes(cols, dtype) + STATIC_SHARED + BLOCK_RESERVED
    nb = max(1, min(SM_SHARED // per_block, SM_THREADS // B, SM_BLOCKS))
    return max(MIN_REG_CAP, min(255, SM_REGS // (B * nb) // 8 * 8))


def jit_row(B: int, regs: int):
    """``cuda.jit`` for an smem_row kernel: ``regs`` (:func:`reg_cap`) as ptxas's register cap,
    never more than a block of B threads may have."""
    if backend.is_simulator():
        return cuda.jit
    cap = min(regs, block_reg_cap(B))
    return cuda.jit(max_registers=cap if cap < 255 else None)


class SmemRowShape:
    """Launch shape of the smem_row rungs: a field ``threads`` (0 = :func:`row_threads`) and a
    class attribute ``instead``, the rung named when a row does not fit."""

    instead = "the tuned rung"

    def block(self, problem) -> int:
        return self.threads or row_threads(problem.cols, problem.dtype)

    def supports(self, problem):
        B = self.block(problem)
        if B < 32 or B > 1024 or B & (B - 1):
            raise UnsupportedProblem(f"{self.name}: threads={B} must be a power of two in 32..1024")
        check_row_fits(self.label, problem.cols, problem.dtype, self.instead)

    def kernel_params(self, problem) -> tuple[int, int, bool, int]:
        """(B, W, PEEL, REGS): threads, elements per shared vector load, whether rows start
        unaligned (a scalar head and tail around the cp.async copies, the row ``pad`` elements
        into shared memory), the register cap."""
        W = vec_width(problem.cols, problem.dtype)
        B = self.block(problem)
        return B, W, not aligned(problem.cols, problem.dtype), reg_cap(B, problem.cols, problem.dtype)

    def staged_cols(self, problem) -> int:
        """Columns of the shared row view: the row, and an unaligned row's pad ahead of it."""
        return problem.cols + (per_copy(problem.dtype) - 1 if self.kernel_params(problem)[2] else 0)

    def copy_note(self, problem) -> str:
        if self.kernel_params(problem)[2]:
            return "16-byte cp.async, a scalar head and tail where the unaligned row is not 16-byte chunks"
        return "16-byte cp.async"

    def shared_bytes(self, problem) -> int:
        return row_bytes(problem.cols, problem.dtype)


@lru_cache(maxsize=None)
def stage_row(B: int, E: int, PEEL: bool):
    """``stage(x, r, row, cols) -> pad``: row ``r`` of x into the shared ``row`` (a (1, cols + pad)
    view) from element ``pad`` on, then a barrier.  16-byte cp.async copies of E elements, all
    committed as one group and waited for.  PEEL (rows not a whole number of 16-byte chunks):
    ``pad`` = (r * cols) mod E; the head (columns before the first 16-byte boundary of the row,
    fewer than E) and the tail (past the last whole chunk) go one element a thread through
    registers, the chunks between by cp.async; else ``pad`` = 0 and the row is all chunks."""
    if not PEEL:
        @cuda.jit(device=True)
        def stage(x, r, row, cols):
            for j in range(E * cuda.threadIdx.x, cols, E * B):
                cp_async16(row, 0, j, x, r, j, 16)
            cp_async_commit()
            cp_async_wait(0)
            cuda.syncthreads()  # the copies are visible to the other threads after the wait and a barrier
            return 0
        return stage

    @cuda.jit(device=True)
    def stage(x, r, row, cols):
        t = cuda.threadIdx.x
        pad = (r * cols) % E  # global column j is 16-byte aligned where pad + j is a multiple of E
        head = min((E - pad) % E, cols)
        body = (cols - head) // E  # whole 16-byte chunks after the head
        end = head + E * body
        for j in range(head + E * t, end, E * B):
            cp_async16(row, 0, pad + j, x, r, j, 16)
        cp_async_commit()
        if t < head:  # while the copies fly: the head ...
            row[0, pad + t] = x[r, t]
        if end + t < cols:  # ... and the tail, an element a thread (E - 1 at most each)
            row[0, pad + end + t] = x[r, end + t]
        cp_async_wait(0)
        cuda.syncthreads()
        return pad
    return stage
