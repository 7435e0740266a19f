"""The ``persist`` rungs (softmax, layernorm, rmsnorm): narrow rows (1024 columns) on a persistent
grid with the next row prefetched.

At 4096 x 1024 the tuned rungs launch 1024 blocks of 4 rows: 1.3 to 1.6 waves on an H100 (5 or 6
blocks an SM at their registers), each block loads its rows, waits for them, reduces and writes,
then exits, and the last wave leaves half the SMs or more idle; between one block's last
store and the next block's first load its SM slots idle (issue 44: 0.15-0.64 of the copy
ceiling there).  Here a grid that fills the GPU once (SMs x the blocks an SM holds, from the
occupancy calculator at the kernel's register cap) loops over rows; each group of G threads
issues the loads of its *next* row into a second set of registers before it reduces and writes
the current one, so a row's DRAM latency hides behind the previous row's work.

What the three rungs share lives here:

* :class:`PersistShape`: the launch shape (``threads_per_row`` x ``rows_per_block``, 0 = the rule
  of :func:`persist_shape`), the grid (:meth:`PersistShape.blocks`, from :mod:`perfkit.specs`'s
  facts through :func:`_common.sm_count` and :func:`perfkit.occupancy.occupancy`), the refusal of
  rows wider than the registers take (naming the rung to use), the compiled kernel's constants;
* :func:`jit_persist`: ``cuda.jit`` with the register cap the grid was sized for;
* :data:`NARROW_COLS`: the width the rungs are for, and shown at (:meth:`PersistShape.example`).

Every thread of a block runs the same number of row trips (the block's rows advance together:
row ``base + t // G`` for ``base`` in ``blockIdx.x * R, +gridDim.x * R, ...``), so the group
reductions' barriers always meet; a group past the last row reduces the identity.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from ... import backend, occupancy
from ..base import UnsupportedProblem
from . import _common as C

__all__ = ["PersistShape", "persist_shape", "jit_persist", "BYTES_PER_THREAD", "MAX_G", "REGS", "NARROW_COLS"]

#: bytes of its row a thread holds (and as many again of the next row in flight): two 16-byte
#: loads, 8 float32 or 16 float16 elements.  Held as float32: 16 (float32) or 32 (float16)
#: registers for the two rows.
BYTES_PER_THREAD = 32
MAX_G = 512  # threads a row: the widest row taken is MAX_G x the elements a thread holds
BLOCK = 256  # threads a block (rows per block fill it)
#: registers a thread (ptxas's cap, and what the grid is sized for).  Left alone ptxas took 56-70
#: (float32) and 80-87 (float16) on sm_90, a quarter to a half of the SM's threads; at 40 layernorm
#: spilled 20 bytes (float32, 1024 columns) and softmax 52 (float32, 4096); at these caps none of
#: the three spills at 1024 or 4096 columns (perfkit anatomy, sm_90); rmsnorm's float32 kernel
#: takes 40 (a rung's class attribute ``regs`` overrides these)
REGS = {"float32": 48, "float16": 64}
#: compute capability the grid is sized for where no GPU is present (the model's H100)
DEFAULT_CC = (9, 0)
#: the row width the rungs are for: at the ops' example width (4096) a tuned block already has a
#: whole row's work, so the cards, the anatomy and the profiles show them at this width instead
NARROW_COLS = 1024


def elems_per_thread(dtype: str) -> int:
    return BYTES_PER_THREAD // np.dtype(dtype).itemsize


def persist_shape(cols: int, dtype: str) -> C.Shape:
    """threads_per_row = cols / (``BYTES_PER_THREAD`` of elements) rounded up to a power of two,
    32..``MAX_G``; rows per block filling ``BLOCK`` threads."""
    G = min(MAX_G, max(32, C.next_pow2(-(-cols // elems_per_thread(dtype)))))
    return C.Shape(G, max(1, BLOCK // G), 1)


def jit_persist(regs: int):
    """``cuda.jit`` with the register cap :meth:`PersistShape.blocks` sizes the grid for."""
    if backend.is_simulator():
        return cuda.jit
    return cuda.jit(max_registers=regs)


def _cc() -> tuple[int, int]:
    try:
        d = backend.device()
        if not getattr(d, "simulated", False) and d.compute_capability:
            return tuple(d.compute_capability)
    except Exception:
        pass
    return DEFAULT_CC


class PersistShape:
    """Launch shape of the persist rungs: fields ``threads_per_row``, ``rows_per_block`` (0 = the
    rule) and ``blocks_per_sm`` (0 = what the occupancy calculator allows), and a class attribute
    ``instead``, the rung named for rows too wide."""

    instead = "the tuned rung"
    regs = REGS

    def example(self, problem):
        """The op's example with narrow rows (:data:`NARROW_COLS` columns, the same rows and
        dtype): the width the rung is for."""
        return dataclasses.replace(problem, cols=NARROW_COLS)

    def reg_cap(self, problem) -> int:
        """Registers a thread: ptxas's cap, and what the grid is sized for."""
        return self.regs[problem.dtype]

    def shape(self, problem) -> C.Shape:
        st = persist_shape(problem.cols, problem.dtype)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R, 1)

    def kernel_params(self, problem) -> tuple[int, int, int, int]:
        """(G, R, W, NC): threads a row, rows a block, elements a vector load (16 bytes where
        the width allows), vectors a thread holds (the whole row's share)."""
        s = self.shape(problem)
        W = C.vec_width(problem.cols, problem.dtype)
        return s.G, s.R, W, -(-problem.cols // (s.G * W))

    def supports(self, problem):
        s = self.shape(problem)
        bad = C.check_shape(s.G, s.R, 1)
        if bad:
            raise UnsupportedProblem(f"{self.label}: " + "; ".join(bad))
        G, R, W, NC = self.kernel_params(problem)
        widest = MAX_G * elems_per_thread(problem.dtype)
        most = 2 * elems_per_thread(problem.dtype)  # a launch shape of the caller's: twice the rule's share
        if problem.cols > widest or NC * W > most:
            raise UnsupportedProblem(
                f"{self.label}: a row of {problem.cols} {problem.dtype} columns is {NC * W} elements a thread at "
                f"{G} threads a row; its registers hold {elems_per_thread(problem.dtype)} beside the next row's at "
                f"the rule's shape (rows up to {widest} columns); use {self.instead} instead")

    def blocks_per_sm_of(self, problem) -> int:
        if self.blocks_per_sm:
            return self.blocks_per_sm
        s = self.shape(problem)
        o = occupancy.occupancy(_cc(), s.block, self.reg_cap(problem), 3 * 32 * 4)
        return max(1, o.blocks_per_sm)

    def blocks(self, problem) -> int:
        """The persistent grid: SMs x blocks an SM holds, never more than the rows need."""
        s = self.shape(problem)
        return max(1, min(-(-problem.rows // s.R), C.sm_count() * self.blocks_per_sm_of(problem)))
