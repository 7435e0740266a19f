"""What every GEMM rung shares: the Problem, the launch and dtype checks, the traffic of a
tiled kernel, the tunable base and the jit options (:mod:`perfkit.kernels.gemm`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import cuda

from ... import backend
from ..base import Problem, ProblemError, Traffic, TunableVariant, UnsupportedProblem, Variant, check_launch_shape

__all__ = ["Problem", "F32", "I32_LIMIT"]

Base = Problem
F32 = 4  # bytes


@dataclass(frozen=True)
class Problem(Base):
    """``C (m, n) = A (m, k) @ B (k, n)``, row-major; float32 output and accumulation."""

    m: int
    n: int
    k: int
    dtype: str = "float32"

    op: ClassVar[str] = "gemm"
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float16")

    def validate(self) -> None:
        for name in ("m", "n", "k"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ProblemError(f"gemm: {name} must be an int, got {v!r}")
            if v < 1:
                raise ProblemError(f"gemm: {name} must be >= 1, got {v} (empty matrices have nothing to multiply)")

    def input_specs(self):
        return {"a": ((self.m, self.k), self.dtype), "b": ((self.k, self.n), self.dtype)}

    def output_specs(self):
        return {"c": ((self.m, self.n), "float32")}

    def _make(self, g):
        return {"a": g.uniform(-1, 1, (self.m, self.k)).astype(self.dtype),
                "b": g.uniform(-1, 1, (self.k, self.n)).astype(self.dtype)}

    def _reference(self, inputs):
        return inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)

    def tolerance(self) -> tuple[float, float]:
        # A thread that sums k products in float32, one after another, rounds each partial sum;
        # the partial sums of O(1) random inputs grow like sqrt(k), so the absolute error of an
        # element grows like eps * k (measured: max |err| over 2e5 sums of uniform(-1, 1)
        # products is 1.8e-6 at k=29, 5.5e-5 at k=1024, 2.2e-4 at k=4096).  Elements near zero
        # get no help from rtol, so atol carries a k term too.  float16 products are exact in
        # float32, so the same bound holds for the tensor-core rung.  A wrong element (a
        # missing or doubled term) is off by O(1), far above these.
        tol = 1e-5 * math.sqrt(self.k) + 1e-5
        return tol, tol + 1e-7 * self.k

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


def _require_float32(variant: Variant, problem: Problem) -> None:
    if problem.dtype != "float32":
        raise UnsupportedProblem(f"{variant.label} is a float32 (SIMT) rung; got {problem.dtype}: "
                                 "use the tensor_core rung for float16")


def _dims(problem: Problem):
    return problem.m, problem.n, problem.k


def _tile_grid(problem: Problem, bm: int, bn: int) -> tuple[int, int]:
    """Blocks owning (bm, bn) tiles of C: columns of tiles along grid.x, rows along grid.y."""
    return -(-problem.n // bn), -(-problem.m // bm)


def _check_launch(v: Variant, problem: Problem, grid, block, shared: int = 0) -> None:
    check_launch_shape(f"{v.label} {v.config}", grid, block, shared, problem.label)


@dataclass(frozen=True)
class _Tunable(TunableVariant):
    def shared_bytes(self) -> int:
        """Static shared memory per block, as the kernel declares it."""
        return 0


def _l1_tiled_l2(m: int, n: int, k: int, t: int) -> float:
    """L2 bytes of the loads of a kernel with one thread per element of C in (t, t) blocks and no
    shared memory: L1 serves the block's warps as a shared tile would, so each block fetches the
    t rows of A and t columns of B it needs once per k (a row of A: one 32-byte sector per 8 k,
    kept in L1 meanwhile).  At 4096^3 (t = 32) this gives 17.2 GB; Nsight Compute on the H100
    counted 22.2 and 19.1 GB of L2 tag traffic for the naive and coalesced rungs (with C's
    stores and the partition fabric: model 19.9 and 19.4 GB)."""
    return float(m * k * math.ceil(n / t) + k * n * math.ceil(m / t)) * F32


def _tiled_traffic(problem: Problem, bm: int, bn: int, bk: int, smem_per_fma: float, limiter: str,
                   notes: str) -> Traffic:
    """Traffic of a kernel whose blocks own (bm, bn) tiles of C and sweep k in steps of bk.

    Every block reads a (bm x k) panel of A and a (k x bn) panel of B from L2, so A is read
    ceil(n/bn) times and B ceil(m/bm) times.  DRAM sees each input once if the panels stay in L2
    (true for these sizes on 40-50 MB L2s).  ``smem_per_fma`` is shared-memory bytes read per FMA.
    """
    m, n, k = _dims(problem)
    l2 = (m * k * math.ceil(n / bn) + k * n * math.ceil(m / bm)) * F32 + m * n * F32
    return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2,
                   smem_bytes=smem_per_fma * m * n * k + (l2 - m * n * F32), limiter=limiter, notes=notes)


def _gemm_ex_f16_f32(a, b, c) -> None:
    """c (float32, m x n) = a (float16, m x k) @ b (float16, k x n), all row-major, through
    cublasGemmEx (Atype = Btype = CUDA_R_16F, Ctype = CUDA_R_32F, CUBLAS_COMPUTE_32F).

    cuBLAS is column-major: a row-major (r x s) array is its column-major transpose, so we ask
    for C^T (n x m) = B^T (n x k) @ A^T (k x m) with leading dimensions n, k and n.
    """
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = b.shape[1]
    for name, arr in (("a", a), ("b", b), ("c", c)):
        if not arr.flags.c_contiguous:
            raise ValueError(f"gemmEx: {name} must be C-contiguous")
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    cuda_r_16f, cuda_r_32f = 2, 0                            # cudaDataType_t (library_types.h)
    compute_32f = getattr(cublas, "CUBLAS_COMPUTE_32F", 68)  # cublasComputeType_t
    algo = getattr(cublas, "CUBLAS_GEMM_DEFAULT", -1)
    handle = cp.cuda.device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)  # alpha, beta on the host
    try:
        cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
                      one.ctypes.data, b.data.ptr, cuda_r_16f, n, a.data.ptr, cuda_r_16f, k,
                      zero.ctypes.data, c.data.ptr, cuda_r_32f, n, compute_32f, algo)
    finally:
        cublas.setPointerMode(handle, mode)


def _jit(**opts):
    """cuda.jit with target options (launch_bounds, max_registers, forceinline) the simulator
    does not take."""
    if backend.is_simulator():
        return cuda.jit(device=opts.get("device", False))
    return cuda.jit(**opts)


#: rungs 9-11 and 13-17 index with 32-bit offsets: every element must be reachable by one
I32_LIMIT = 2**31 - 1
