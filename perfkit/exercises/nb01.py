"""Exercises of notebook 01 (timing and the roofline): a grid-stride saxpy, the launch that
fills an H100, and a copy with 16-byte loads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..kernels import saxpy
from ..kernels.base import Launch, Problem, ProblemError, UnsupportedProblem, Variant, check_launch_shape
from ..model import Traffic
from ._core import (Check, Exercise, inspect_rung, register, register_budget, register_check, resolve, run_checked,
                    with_rung)

H100_SMS = 132  # SMs of the H100 SXM the anatomy view targets (cc 9.0)


@dataclass(frozen=True)
class LearnerVariant(Variant):
    """A rung whose kernel is the learner's: ``module`` and ``kernel`` name it (see
    :func:`perfkit.exercises._core.carry`), so the anatomy compiler can rebuild it."""

    module: str = ""
    kernel: str = ""

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "learner"
    what: ClassVar[str] = "the learner's kernel"

    def _kernel(self):
        return resolve(self.module, self.kernel)


@dataclass(frozen=True)
class Rows(Problem):
    """A (rows, cols) float32 input named ``source``; subclasses say what it becomes."""

    rows: int
    cols: int
    dtype: str = "float32"

    dtypes: ClassVar[tuple[str, ...]] = ("float32",)
    source: ClassVar[str] = "x"
    who: ClassVar[str] = ""  # the name a ProblemError gives it ('': op); keeps each problem's own messages

    def validate(self):
        for k in ("rows", "cols"):
            v = getattr(self, k)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ProblemError(f"{self.who or self.op}: {k} must be an int >= 1, got {v!r}")

    def input_specs(self):
        return {self.source: ((self.rows, self.cols), self.dtype)}

    def _make(self, g):
        return {self.source: g.standard_normal((self.rows, self.cols)).astype(self.dtype)}


# --- 01.grid_stride ---------------------------------------------------------------------------
GRID_STRIDE_LAUNCH = (3, 64)  # a fixed grid: 192 threads, fewer than most of the test lengths


@dataclass(frozen=True)
class FixedGridSaxpy(LearnerVariant):
    grid: int = GRID_STRIDE_LAUNCH[0]
    block: int = GRID_STRIDE_LAUNCH[1]

    name: ClassVar[str] = "learner_grid_stride"

    def plan(self, problem, bufs):
        alpha = np.dtype(problem.dtype).type(problem.alpha)
        return [Launch(self._kernel(), self.grid, self.block, (bufs["out"], bufs["x"], bufs["y"], alpha, problem.n))]

    def traffic(self, problem):
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, limiter="dram")


@with_rung(FixedGridSaxpy)
def _grid_stride_steps(v, seed: int, cc=(9, 0), **_):
    g, b = GRID_STRIDE_LAUNCH
    for n in (1, 193, 1000):
        ok, msg = run_checked(v, saxpy.Problem(n=n), seed + n,
                              f": with a fixed grid of {g} x {b} = {g * b} threads, thread i must also do "
                              f"i + {g * b}, i + {2 * g * b}, ... (step cuda.gridsize(1))")
        yield Check(f"correct at n={n} with a fixed grid of {g}x{b}", ok, msg)
        if not ok:
            return
    yield from register_budget(v, saxpy.Problem(n=1 << 26), cc, 40,
                               "a saxpy needs few; keep the loop body to one element",
                               name_cc=True, local="no local memory (stack, spills)")


register(Exercise(
    name="01.grid_stride", notebook="01_timing_and_roofline", title="a grid-stride saxpy",
    task=("Write saxpy_grid_stride(out, x, y, alpha, n): out[i] = alpha * x[i] + y[i] for every i < n. "
          f"The grader launches it with a fixed grid of {GRID_STRIDE_LAUNCH[0]} blocks of "
          f"{GRID_STRIDE_LAUNCH[1]} threads whatever n is, so each thread must stride through the array."),
    checks=["correct at n = 1, 193, 1000 (NaN-poisoned output, float64 reference)", "registers <= 40",
            "no local memory"],
    steps=_grid_stride_steps, solution="perfkit.exercises.solutions.nb01:saxpy_grid_stride"))


# --- 01.launch --------------------------------------------------------------------------------
def _as_grid_stride(answer) -> saxpy.GridStride:
    if isinstance(answer, saxpy.GridStride):
        return answer
    if isinstance(answer, dict):
        unknown = set(answer) - {"block", "blocks_per_sm"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}: give block and blocks_per_sm")
        return saxpy.GridStride(**answer)
    raise ValueError(f"give dict(block=..., blocks_per_sm=...) or saxpy.GridStride(...), got {type(answer).__name__}")


def _launch_steps(answer, seed: int, cc=(9, 0), **_):
    try:
        v = _as_grid_stride(answer)
    except Exception as exc:  # UnsupportedProblem for 0 or a float, ValueError for a bad dict
        yield Check("a launch", False, str(exc))
        return
    block, bps = v.block, v.blocks_per_sm
    yield Check("a launch", True, f"block {block}, {bps} blocks per SM: grid {H100_SMS} x {bps} = {H100_SMS * bps} on an H100")
    try:
        check_launch_shape("saxpy grid_stride", H100_SMS * bps, block)
        yield Check("a launch the GPU can run", True, f"{block} threads per block <= 1024")
    except UnsupportedProblem as exc:
        yield Check("a launch the GPU can run", False, str(exc))
        return
    whole = block % 32 == 0
    yield Check("whole warps", whole, f"{block} threads = {block // 32} warps"
                + ("" if whole else f" and {block % 32} threads: the last warp runs with {32 - block % 32} lanes idle"))
    if not whole:
        return
    for n in (1000, 4099):
        ok, msg = run_checked(v, saxpy.Problem(n=n), seed + n)
        yield Check(f"correct at n={n}", ok, msg)
        if not ok:
            return
    rep = inspect_rung(v, saxpy.Problem(n=1 << 26), cc)
    if isinstance(rep, str):
        yield Check("100% theoretical occupancy", False, rep)
        return
    o = rep.occupancy
    yield Check("100% theoretical occupancy", o.ratio >= 0.999,
                f"{o} with {rep.registers} registers per thread"
                + ("" if o.ratio >= 0.999 else f": {block} threads x {o.blocks_per_sm} resident blocks fill "
                   f"{o.blocks_per_sm * block // 32} of the SM's warp slots"))
    resident = o.blocks_per_sm
    yield Check("one full wave", bps == resident,
                f"{bps} blocks per SM launched, {resident} can be resident"
                + ("" if bps == resident else
                   (": some resident slots stay empty for the whole run" if bps < resident else
                    f": the grid needs {-(-bps // resident)} waves, and a grid-stride loop gains nothing from more than one")))


register(Exercise(
    name="01.launch", notebook="01_timing_and_roofline", title="choose the launch",
    task=("Choose block (threads per block) and blocks_per_sm for the grid-stride saxpy "
          "(saxpy.GridStride) so that on an H100 (cc 9.0, 132 SMs) every block is whole warps, "
          "the SM is fully occupied, and the grid is exactly one full wave of resident blocks."),
    checks=["a launch the GPU can run", "whole warps", "correct at n = 1000, 4099",
            "100% theoretical occupancy (anatomy: registers -> occupancy)", "one full wave"],
    steps=_launch_steps, answer_kind="config", solution="perfkit.exercises.solutions.nb01:launch"))


# --- 01.vec_copy ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Copy2D(Rows):
    """``dst = src`` for a (rows, cols) float32 array with cols a multiple of 4."""

    op: ClassVar[str] = "exercise.copy2d"
    source: ClassVar[str] = "src"
    who: ClassVar[str] = "copy2d"

    def validate(self):
        super().validate()
        if self.cols % 4:
            raise ProblemError(f"copy2d: cols must be a multiple of 4 (16-byte rows), got {self.cols}")

    def output_specs(self):
        return {"dst": ((self.rows, self.cols), self.dtype)}

    def _reference(self, inputs):
        return inputs["src"].astype(np.float64)

    @property
    def flops(self):
        return 0.0


VEC_BLOCK = 64


@dataclass(frozen=True)
class VecCopy(LearnerVariant):
    name: ClassVar[str] = "learner_vec_copy"

    def plan(self, problem, bufs):
        groups = problem.rows * problem.cols // 4
        return [Launch(self._kernel(), -(-groups // VEC_BLOCK), VEC_BLOCK,
                       (bufs["dst"], bufs["src"], problem.rows, problem.cols))]


@with_rung(VecCopy)
def _vec_copy_steps(v, seed: int, cc=(9, 0), **_):
    for rows, cols in ((1, 4), (37, 44), (5, 12)):
        ok, msg = run_checked(v, Copy2D(rows, cols), seed + rows * cols,
                              f": the launch has one thread per 4 elements (ceil(rows * cols / 4 / {VEC_BLOCK}) "
                              f"blocks of {VEC_BLOCK}); thread t copies row t // (cols // 4), "
                              "columns 4 * (t % (cols // 4)) ... + 3")
        yield Check(f"correct at {rows}x{cols}", ok, msg)
        if not ok:
            return
    rep = inspect_rung(v, Copy2D(4096, 4096), cc)
    if isinstance(rep, str):
        yield Check("16-byte loads", False, rep)
        return
    wide, narrow = rep.mix.get("global load 128", 0), rep.mix.get("global load 32", 0)
    yield Check("16-byte loads", wide > 0 and narrow == 0,
                f"the SASS has {wide} 16-byte loads (LDG.E.128) and {narrow} 4-byte loads (LDG.E)"
                + ("" if wide and not narrow else ": read src with load4(src, row, col), one ld.global.v4.f32"))
    yield register_check(rep, 40)


register(Exercise(
    name="01.vec_copy", notebook="01_timing_and_roofline", title="a copy with 16-byte loads",
    task=("Write copy4(dst, src, rows, cols) for float32 (rows, cols) arrays, cols a multiple of 4: "
          f"one thread per 4 consecutive elements of a row (the grader launches ceil(rows * cols / 4 / {VEC_BLOCK}) "
          f"blocks of {VEC_BLOCK}); read the 4 with load4(src, r, c) (one 128-bit load) and store them."),
    checks=["correct at 1x4, 37x44, 5x12", "16-byte loads only (SASS mix: LDG.E.128, no LDG.E)",
            "registers <= 40"],
    steps=_vec_copy_steps, solution="perfkit.exercises.solutions.nb01:copy4"))
