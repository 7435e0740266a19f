"""Small rungs that exist to show (and test) what the anatomy view reports: a 128-bit load,
local memory from a dynamically indexed array, register spills under a register cap, and a
grid-wide barrier (a kernel Numba links with cudadevrt).
They are compiled by :func:`perfkit.anatomy.inspect`, never part of a ladder."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from numba import cuda, float32

from . import backend
from .kernels.intrinsics import load4
from .kernels.base import Launch, Problem, Variant

# the simulator's jit takes no register cap; the compiler process (and a GPU) honour it
_capped = cuda.jit if backend.is_simulator() else cuda.jit(max_registers=32)

Base = Problem


@dataclass(frozen=True)
class Problem(Base):
    """``out[i] = f(x[i])`` for ``n`` elements of ``dtype``."""

    n: int = 1024
    dtype: str = "complex128"

    op: ClassVar[str] = "anatomy-example"
    dtypes: ClassVar[tuple[str, ...]] = ("complex128", "float32")

    def input_specs(self):
        return {"x": ((self.n,), self.dtype)}

    def output_specs(self):
        return {"out": ((self.n,), self.dtype)}

    @property
    def flops(self) -> float:
        return 0.0


@cuda.jit
def copy_wide(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]  # one complex128 element: 16 bytes, a single 128-bit load and store


@cuda.jit
def local_array(out, x):
    i = cuda.grid(1)
    buf = cuda.local.array(64, float32)
    for j in range(64):
        buf[j] = x[(i + j) % x.size]
    if i < x.size:
        out[i] = buf[(i * 7) % 64]  # an index known only at run time: buf lives in local memory


@_capped
def register_hungry(out, x):
    i = cuda.grid(1)
    n = x.size
    acc = cuda.local.array(48, float32)
    for j in range(48):  # constant trip count and indices: 48 live values wanted in registers
        acc[j] = x[(i + j) % n]
    for r in range(8):
        for j in range(48):
            acc[j] = acc[j] * acc[(j + 1) % 48] + float32(r)
    s = float32(0)
    for j in range(48):
        s += acc[j]
    if i < n:
        out[i] = s


@cuda.jit
def grid_sync(out, x):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]
    g.sync()  # a cooperative launch: Numba links cudadevrt into the kernel


@dataclass(frozen=True)
class _Example(Variant):
    kernel_name: ClassVar[str] = ""
    rung: ClassVar[int] = 1

    def plan(self, problem, bufs):
        k = globals()[self.kernel_name]
        return [Launch(k, -(-problem.n // 128), 128, (bufs["out"], bufs["x"]))]


# each example only names itself and its kernel: class attributes, no fields of its own
class WideLoad(_Example):
    name, kernel_name = "wide_load", "copy_wide"


class LocalArray(_Example):
    name, kernel_name = "local_array", "local_array"


class Spills(_Example):
    name, kernel_name = "spills", "register_hungry"


class GridSync(_Example):
    name, kernel_name = "grid_sync", "grid_sync"


@cuda.jit
def fma_chains(out, x):
    """Four independent FMA chains per iteration, for a trip count known only at run time
    (x.size // 8): the hot loop does FMAs in multiples of 4 per iteration (ptxas may unroll
    it, by a factor that keeps the multiple), one global load per element."""
    i = cuda.grid(1)
    n = x.size
    a0 = a1 = a2 = a3 = float32(0)
    for k in range(n // 8):
        v = x[(i + k) % n]
        a0 = a0 * v + float32(1.5)
        a1 = a1 * v + float32(2.5)
        a2 = a2 * v + float32(3.5)
        a3 = a3 * v + float32(4.5)
    if i < n:
        out[i] = a0 + a1 + a2 + a3


@dataclass(frozen=True)
class FmaChains(_Example):
    name: ClassVar[str] = "fma_chains"
    kernel_name: ClassVar[str] = "fma_chains"


FMA_LOOP = (FmaChains(), Problem(n=1024, dtype="float32"))
WIDE = (WideLoad(), Problem(n=1024, dtype="complex128"))
LOCAL = (LocalArray(), Problem(n=1024, dtype="float32"))
SPILLS = (Spills(), Problem(n=1024, dtype="float32"))
GRID_SYNC = (GridSync(), Problem(n=1024, dtype="float32"))


@cuda.jit
def copy_vec4(out, x):
    r = cuda.blockIdx.x
    j = cuda.threadIdx.x * 4
    if r < x.shape[0] and j + 3 < x.shape[1]:
        a, b, c, d = load4(x, r, j)  # one 128-bit load
        out[r, j] = a
        out[r, j + 1] = b
        out[r, j + 2] = c
        out[r, j + 3] = d


@dataclass(frozen=True)
class Problem2D(Base):
    rows: int = 64
    cols: int = 128
    dtype: str = "float32"

    op: ClassVar[str] = "anatomy-example-2d"
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)

    def input_specs(self):
        return {"x": ((self.rows, self.cols), self.dtype)}

    def output_specs(self):
        return {"out": ((self.rows, self.cols), self.dtype)}

    @property
    def flops(self) -> float:
        return 0.0


@dataclass(frozen=True)
class Vec4Load(Variant):
    name: ClassVar[str] = "vec4_load"
    rung: ClassVar[int] = 1

    def plan(self, problem, bufs):
        return [Launch(copy_vec4, problem.rows, problem.cols // 4, (bufs["out"], bufs["x"]))]


VEC4 = (Vec4Load(), Problem2D())


@cuda.jit
def does_not_compile(out, x):
    i = cuda.grid(1)
    out[i] = x[i] + "a string"  # a typing error: float32 + str


@dataclass(frozen=True)
class Broken(_Example):
    name: ClassVar[str] = "broken"
    kernel_name: ClassVar[str] = "does_not_compile"
