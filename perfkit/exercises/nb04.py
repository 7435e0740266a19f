"""Exercises of notebook 04 (normalization): a warp-shuffle row sum and the online-softmax
update."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import cuda, float32

from ..kernels.base import Launch
from ._core import (Check, Exercise, inspect_rung, plain, register, register_budget, register_check, resolve,
                    run_checked, with_rung)
from .nb01 import LearnerVariant, Rows


# --- 04.warp_sum --------------------------------------------------------------------------------
WARPS_PER_BLOCK = 4


@dataclass(frozen=True)
class RowSum(Rows):
    """``out[r] = sum(x[r, :])``."""

    op: ClassVar[str] = "exercise.row_sum"

    def output_specs(self):
        return {"out": ((self.rows,), self.dtype)}

    def _reference(self, inputs):
        return inputs["x"].astype(np.float64).sum(axis=1)

    def tolerance(self):
        # a float32 sum of cols standard-normal terms, in any order: error ~ eps * sqrt(cols) * |terms|
        t = 2e-6 * math.sqrt(self.cols) * 4 + 1e-6
        return 1e-5, t

    @property
    def flops(self):
        return float(self.rows * self.cols)


@dataclass(frozen=True)
class WarpRowSum(LearnerVariant):
    name: ClassVar[str] = "learner_warp_sum"

    def plan(self, problem, bufs):
        grid = -(-problem.rows // WARPS_PER_BLOCK)
        return [Launch(self._kernel(), grid, 32 * WARPS_PER_BLOCK, (bufs["out"], bufs["x"], problem.rows, problem.cols))]


@with_rung(WarpRowSum)
def _warp_sum_steps(v, seed: int, cc=(9, 0), **_):
    for rows, cols in ((1, 1), (5, 37), (3, 100)):
        ok, msg = run_checked(v, RowSum(rows, cols), seed + rows * cols,
                              f": warp w of block b sums row b * {WARPS_PER_BLOCK} + w, lane 0 writes it; "
                              "every lane of every warp must take part in the shuffles, even past the last row")
        yield Check(f"correct at {rows}x{cols}", ok, msg)
        if not ok:
            return
    rep = inspect_rung(v, RowSum(4096, 4096), cc)
    if isinstance(rep, str):
        yield Check("reduces with warp shuffles", False, rep)
        return
    shfl = rep.mix.get("shuffle", 0)
    yield Check("reduces with warp shuffles", shfl >= 5,
                f"{shfl} SHFL instructions in the SASS"
                + ("" if shfl >= 5 else ": a warp's 32 partial sums meet in log2(32) = 5 shuffles "
                   "(v += shfl_down(v, off) for off = 16, 8, 4, 2, 1)"))
    have = rep.shared_bytes - rep.reserved_shared_bytes
    atomics = rep.mix.get("atomic", 0)
    yield Check("no shared memory, no atomics", have == 0 and atomics == 0,
                f"{have} B of shared memory, {atomics} atomics: "
                + ("the reduction stays in registers" if have == 0 and atomics == 0 else
                   "a warp reduces in registers; nothing needs shared memory or atomics"))
    yield register_check(rep, 40)


register(Exercise(
    name="04.warp_sum", notebook="04_normalization", title="a warp-shuffle row sum",
    task=(f"Write row_sum(out, x, rows, cols): out[r] = x[r, :].sum() (float32), one warp per row: "
          f"the grader launches blocks of {32 * WARPS_PER_BLOCK} threads ({WARPS_PER_BLOCK} warps, "
          f"ceil(rows / {WARPS_PER_BLOCK}) blocks). Each lane sums a strided part of the row, then the "
          "warp adds its 32 partials with shfl_down (from perfkit.exercises; it is cuda.shfl_down_sync on "
          "a GPU and an exact emulation in the simulator) and lane 0 writes. Every thread must call "
          "shfl_down, so do not return early."),
    checks=["correct at 1x1, 5x37, 3x100", "reduces with warp shuffles (SASS: SHFL)",
            "no shared memory, no atomics", "registers <= 40"],
    steps=_warp_sum_steps, solution="perfkit.exercises.solutions.nb04:row_sum"))


# --- 04.online_softmax --------------------------------------------------------------------------
NEG_INF = float32(-np.inf)


@dataclass(frozen=True)
class Softmax(Rows):
    """``out[r] = softmax(x[r, :])``; some rows hold large values, one starts with -inf (masked)."""

    op: ClassVar[str] = "exercise.softmax"

    def output_specs(self):
        return {"out": ((self.rows, self.cols), self.dtype)}

    def _make(self, g):
        x = g.standard_normal((self.rows, self.cols)).astype(self.dtype) * 4
        if self.rows >= 2:
            x[1] += 1000.0  # exp(x) overflows float32 without the running max
        if self.rows >= 3 and self.cols >= 2:
            x[2, : self.cols // 2] = -np.inf  # masked positions first: the running max starts at -inf
        return {"x": np.ascontiguousarray(x)}

    def _reference(self, inputs):
        x = inputs["x"].astype(np.float64)
        m = x.max(axis=1, keepdims=True)
        e = np.exp(x - m)
        return e / e.sum(axis=1, keepdims=True)

    @property
    def flops(self):
        return 5.0 * self.rows * self.cols


@lru_cache(maxsize=None)
def _softmax_kernel(update):
    """One thread per row: one pass of ``update`` for the running (max, sum), one to write."""

    @cuda.jit
    def softmax_online(out, x, rows, cols):
        r = cuda.grid(1)
        if r < rows:
            m = NEG_INF
            s = float32(0)
            for j in range(cols):
                m, s = update(m, s, x[r, j])
            for j in range(cols):
                out[r, j] = math.exp(x[r, j] - m) / s

    return softmax_online


@dataclass(frozen=True)
class OnlineSoftmax(LearnerVariant):
    name: ClassVar[str] = "learner_online_softmax"

    def plan(self, problem, bufs):
        kern = _softmax_kernel(resolve(self.module, self.kernel))
        return [Launch(kern, -(-problem.rows // 32), 32, (bufs["out"], bufs["x"], problem.rows, problem.cols))]


@with_rung(OnlineSoftmax, "device function")
def _online_softmax_steps(v, seed: int, cc=(9, 0), **_):
    why = {0: "an ordinary row", 1: "row 1 holds values near 1000: exp(x) overflows unless the sum is kept "
                                    "relative to the running max",
           2: "row 2 starts with -inf (masked positions): while the running max is -inf, "
              "exp(m - m_new) is exp(-inf - (-inf)) = NaN; keep s as it is when the new max is -inf"}
    for rows, cols in ((1, 1), (3, 37), (4, 6)):
        p = Softmax(rows, cols)
        try:
            inputs = p.make_inputs(seed + rows * cols)
            ref = p.reference(inputs)
            out = v.run(p, inputs)
        except Exception as exc:
            last = str(exc).strip().splitlines()
            yield Check(f"correct at {rows}x{cols}", False,
                        f"{p.label}: raised {exc.__class__.__name__}: {last[-1] if last else ''}")
            return
        res = p.check(out, ref)
        if not res.ok:
            bad = ~np.isclose(np.asarray(out, np.float64), ref, rtol=res.rtol, atol=res.atol, equal_nan=True)
            row = int(np.argwhere(bad)[0][0]) if bad.any() else 0
            yield Check(f"correct at {rows}x{cols}", False,
                        f"{p.label}: {plain(res.message)} (row {row}: {why.get(row, 'an ordinary row')})")
            return
        yield Check(f"correct at {rows}x{cols}", True, f"ok (max abs error {res.max_abs_err:.2g})")
    yield from register_budget(v, Softmax(4096, 4096), cc, 40)


register(Exercise(
    name="04.online_softmax", notebook="04_normalization", title="the online-softmax update",
    task=("Write the device function online_update(m, s, x) -> (m_new, s_new): given the running max m and "
          "the running sum s = sum(exp(x_i - m)) of a row so far, take in one more element x. The grader's "
          "kernel starts each row at (m, s) = (-inf, 0), calls online_update for every element in one pass, "
          "then writes exp(x - m) / s. Rows include values near 1000 and masked (-inf) positions."),
    checks=["correct at 1x1, 3x37, 4x6 (large values, a row starting with -inf)", "registers <= 40",
            "no local memory"],
    steps=_online_softmax_steps, answer_kind="device function",
    solution="perfkit.exercises.solutions.nb04:online_update"))
