"""Exercises of notebook 03 (convolution): the im2col index math and the direct convolution,
both NCHW float32."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..kernels import conv
from ..kernels.base import Launch, Problem, ProblemError
from ._core import Check, Exercise, register, register_budget, run_checked, with_rung
from .nb01 import LearnerVariant

BLOCK = 64

#: awkward shapes: stride 2 with padding, a 1x1 filter, a filter as wide as the padded input
SHAPES = [dict(n=1, c=1, h=1, w=1, k=1, r=1, s=1),
          dict(n=2, c=3, h=7, w=5, k=4, r=3, s=2, stride=2, pad=1),
          dict(n=1, c=2, h=4, w=6, k=3, r=2, s=8, stride=1, pad=1)]


def _label(p: conv.Problem) -> str:
    return (f"x {p.n}x{p.c}x{p.h}x{p.w}, w {p.k}x{p.c}x{p.r}x{p.s}, stride {p.stride}, pad {p.pad} "
            f"(P, Q = {p.p}, {p.q})")


# --- 03.im2col ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Im2col(Problem):
    """The im2col buffer of an NCHW convolution: ``col[m, j]`` with m = (b, p, q) (one row per
    output pixel) and j = (c, r, s) (as w is stored), zero where the tap falls in the padding."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int = 1
    pad: int = 0
    dtype: str = "float32"

    op: ClassVar[str] = "exercise.im2col"
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)

    @property
    def conv(self) -> conv.Problem:
        return conv.Problem(self.n, self.c, self.h, self.w, self.k, self.r, self.s, self.stride, self.pad, "float32")

    def validate(self):
        try:
            self.conv
        except ProblemError as exc:
            raise ProblemError(f"im2col: {exc}") from None

    def input_specs(self):
        return {"x": ((self.n, self.c, self.h, self.w), self.dtype)}

    def output_specs(self):
        cp = self.conv
        return {"col": ((self.n * cp.p * cp.q, self.c * self.r * self.s), self.dtype)}

    def _make(self, g):
        return {"x": g.uniform(-1, 1, (self.n, self.c, self.h, self.w)).astype(self.dtype)}

    def _reference(self, inputs):
        cp = self.conv
        x = inputs["x"].astype(np.float64)
        pd, st = self.pad, self.stride
        xp = np.zeros((self.n, self.c, self.h + 2 * pd, self.w + 2 * pd))
        xp[:, :, pd:pd + self.h, pd:pd + self.w] = x
        col = np.zeros((self.n, cp.p, cp.q, self.c, self.r, self.s))
        for i in range(self.r):
            for j in range(self.s):
                patch = xp[:, :, i:i + st * (cp.p - 1) + 1:st, j:j + st * (cp.q - 1) + 1:st]  # n c p q
                col[:, :, :, :, i, j] = patch.transpose(0, 2, 3, 1)
        return col.reshape(self.n * cp.p * cp.q, self.c * self.r * self.s)

    @property
    def flops(self):
        return 0.0

    @property
    def label(self) -> str:
        return _label(self.conv)


IM2COL_ARGS = "(x, col, N, C, H, W, R, S, P, Q, stride, pad)"


@dataclass(frozen=True)
class LearnerIm2col(LearnerVariant):
    name: ClassVar[str] = "learner_im2col"

    def plan(self, problem, bufs):
        cp = problem.conv
        total = problem.n * cp.p * cp.q * problem.c * problem.r * problem.s
        return [Launch(self._kernel(), -(-total // BLOCK), BLOCK,
                       (bufs["x"], bufs["col"], problem.n, problem.c, problem.h, problem.w, problem.r, problem.s,
                        cp.p, cp.q, problem.stride, problem.pad))]


@with_rung(LearnerIm2col)
def _im2col_steps(v, seed: int, cc=(9, 0), **_):
    for shape in SHAPES:
        p = Im2col(**shape)
        ok, msg = run_checked(v, p, seed + p.c * p.h * p.w,
                              ": one thread per element of col: i -> row m = i // (C*R*S), column j = i % (C*R*S); "
                              "m -> (b, p, q), j -> (c, r, s); the tap reads x[b, c, p*stride - pad + r, "
                              "q*stride - pad + s], or 0 in the padding")
        yield Check(f"correct at {_label(p.conv)}", ok, msg)
        if not ok:
            if "first at (" in msg:
                yield Check("index math", False, _explain_im2col(p, msg))
            return
    # the buffer times w, flattened as (K, C*R*S), is the convolution (the point of im2col)
    p = Im2col(**SHAPES[1])
    cp = p.conv
    g = np.random.default_rng(seed)
    inputs = {"x": g.uniform(-1, 1, (p.n, p.c, p.h, p.w)).astype("float32"),
              "w": g.uniform(-1, 1, (p.k, p.c, p.r, p.s)).astype("float32")}
    col = np.asarray(v.run(p, {"x": inputs["x"]}), np.float64)
    y = (col @ inputs["w"].astype(np.float64).reshape(p.k, -1).T).reshape(p.n, cp.p, cp.q, p.k).transpose(0, 3, 1, 2)
    res = cp.check(y.astype(np.float32), cp.reference(inputs))
    yield Check("col @ w.reshape(K, C*R*S).T is the convolution", res.ok,
                "y matches conv2d(x, w)" if res.ok else res.message)
    yield from register_budget(v, Im2col(n=32, c=64, h=56, w=56, k=64, r=3, s=3, pad=1), cc, 40, local=None)


def _explain_im2col(p: Im2col, msg: str) -> str:
    """Name the (b, p, q) and (c, r, s) of the first wrong element of col."""
    import re

    m = re.search(r"first at \((\d+), (\d+)\)", msg)
    if not m:
        return msg
    row, j = int(m.group(1)), int(m.group(2))
    cp = p.conv
    b, rem = divmod(row, cp.p * cp.q)
    pp, q = divmod(rem, cp.q)
    c, rem = divmod(j, p.r * p.s)
    r, s = divmod(rem, p.s)
    ih, iw = pp * p.stride - p.pad + r, q * p.stride - p.pad + s
    where = ("in the padding, so it must be 0" if not (0 <= ih < p.h and 0 <= iw < p.w)
             else f"x[{b}, {c}, {ih}, {iw}]")
    return (f"col[{row}, {j}] is output pixel (b, p, q) = ({b}, {pp}, {q}) under tap (c, r, s) = ({c}, {r}, {s}): "
            f"input row ih = p*stride - pad + r = {ih}, column iw = q*stride - pad + s = {iw}: {where}")


register(Exercise(
    name="03.im2col", notebook="03_convolution", title="the im2col index math",
    task=(f"Write im2col{IM2COL_ARGS} for NCHW float32 x: col has one row per output pixel m = (b, p, q) "
          "and one column per filter tap j = (c, r, s) (w's order), col[m, j] = x[b, c, p*stride - pad + r, "
          "q*stride - pad + s], or 0 where that falls in the padding. One thread per element of col; the "
          f"grader launches ceil(N*P*Q*C*R*S / {BLOCK}) blocks of {BLOCK}."),
    checks=["correct at three awkward shapes (stride 2, padding, a filter wider than the input)",
            "col @ w.reshape(K, C*R*S).T is the convolution", "registers <= 40"],
    steps=_im2col_steps, solution="perfkit.exercises.solutions.nb03:im2col"))


# --- 03.direct ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerDirect(LearnerVariant):
    name: ClassVar[str] = "learner_direct"

    def plan(self, problem, bufs):
        total = problem.n * problem.k * problem.p * problem.q
        return [Launch(self._kernel(), -(-total // BLOCK), BLOCK,
                       (bufs["x"], bufs["w"], bufs["y"], problem.n, problem.c, problem.h, problem.w, problem.k,
                        problem.r, problem.s, problem.p, problem.q, problem.stride, problem.pad))]


@with_rung(LearnerDirect)
def _direct_steps(v, seed: int, cc=(9, 0), **_):
    for shape in SHAPES:
        p = conv.Problem(**shape)
        ok, msg = run_checked(v, p, seed + p.c * p.h * p.w,
                              ": one thread per element of y in memory order: i -> (b, k, p, q) with q "
                              "fastest")
        if not ok and "elements off" in msg and p.pad:
            msg += (". The padding contributes zeros: test 0 <= ih < H and 0 <= iw < W before reading x "
                    "(a negative index wraps around to the other edge instead of failing)")
        yield Check(f"correct at {_label(p)}", ok, msg)
        if not ok:
            return
    yield from register_budget(v, conv.Problem(32, 64, 56, 56, 64, 3, 3, 1, 1), cc, 64)


register(Exercise(
    name="03.direct", notebook="03_convolution", title="the direct convolution",
    task=("Write conv_direct(x, w, y, N, C, H, W, K, R, S, P, Q, stride, pad) for NCHW float32: "
          "y[b, k, p, q] = sum over (c, r, s) of x[b, c, p*stride - pad + r, q*stride - pad + s] * w[k, c, r, s], "
          "taps in the padding contributing 0. One thread per element of y, in y's memory order (q fastest); "
          f"the grader launches ceil(N*K*P*Q / {BLOCK}) blocks of {BLOCK}."),
    checks=["correct at three awkward shapes (stride 2, padding, a filter wider than the input)",
            "registers <= 64", "no local memory"],
    steps=_direct_steps, solution="perfkit.exercises.solutions.nb03:conv_direct"))
