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
   7 no_bank_conf  padded A^T and swizzled B tiles: shared loads and stores without conflicts
   8 double_buf    two shared buffers: the next tile's loads overlap this tile's FMAs
   9 warptile      warps own 64x64 sub-tiles: better register reuse and shared-load locality
  10 autotuned     warp tiling at the configuration a search picked (see ``search``)
  11 tensor_core   float16 in, float32 accumulate, ``mma.sync.m16n8k16`` through inline PTX

Every rung is correct for every (m, n, k) >= 1: loads outside A or B read zeros and stores
outside C are skipped, so no size needs to be a multiple of a tile.  SIMT rungs take float32;
the tensor-core rung takes float16.  ``supports`` refuses, by arithmetic alone, a launch no GPU
runs: over 1024 threads or 48 KiB of static shared memory per block (a tile configuration), or
over 65535 blocks along grid.y (m beyond 65535 row tiles; the naive rung puts n there).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, ClassVar

import numpy as np
from numba import cuda, float32
from numba.types import float16  # numba.float16 is not exported; the type casts in kernels too

from .. import backend
from ..model import Traffic
from ._ptx import frag_a, frag_b, frag_c, mma_16816  # noqa: F401  (public through gemm too)
from ._vector import load4
from .base import (MAX_STATIC_SHARED, MAX_THREADS_PER_BLOCK, Launch, OracleVariant, Problem, ProblemError,
                   TunableVariant, UnsupportedProblem, Variant, check_launch_shape, registry_check)

__all__ = ["Problem", "LADDER", "EXAMPLE_PROBLEM", "GPU_SWEEP", "LLM_SHAPES", "search", "Candidate"]

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


# --- rung 0 --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Oracle(OracleVariant):
    name: ClassVar[str] = "oracle"
    what: ClassVar[str] = ("cuBLAS through CuPy: SGEMM with TF32 off (CuPy's default) for float32. "
                           "For float16, cublasGemmEx with float16 A and B, a float32 C and "
                           "CUBLAS_COMPUTE_32F: cuBLAS's tensor-core HGEMM with float32 accumulation "
                           "and output, the same contract as the tensor-core rung. "
                           "NumPy in float32 in the simulator.")

    def gpu(self, problem, x, out):
        import cupy as cp

        if problem.dtype == "float32":
            cp.matmul(x["a"], x["b"], out=out["c"])
        else:
            _gemm_ex_f16_f32(x["a"], x["b"], out["c"])

    def host(self, problem, x):
        return x["a"].astype(np.float32) @ x["b"].astype(np.float32)


# --- rung 1 --------------------------------------------------------------------------------
@cuda.jit
def gemm_naive(a, b, c, M, N, K):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # neighbours in a warp: rows
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < M and col < N:
        acc = float32(0)
        for i in range(K):
            acc += a[row, i] * b[i, col]
        c[row, col] = acc


@dataclass(frozen=True)
class Naive(_Tunable):
    block: int = 32

    rung: ClassVar[int] = 1
    name: ClassVar[str] = "naive"
    what: ClassVar[str] = (
        "One thread per element of C, looping over k. threadIdx.x indexes rows, so the 32 "
        "threads of a warp read 32 different rows of A (32 transactions where one would do) "
        "and write a column of C: nothing coalesces.")

    def supports(self, problem):
        _require_float32(self, problem)
        _check_launch(self, problem, self.grid(problem), (self.block, self.block))

    def grid(self, problem):
        return -(-problem.m // self.block), -(-problem.n // self.block)  # rows of C along grid.x

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        return [Launch(gemm_naive, self.grid(problem), (self.block, self.block),
                       (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        m, n, k = _dims(problem)
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=2.0 * m * n * k * F32 * 8,
                       limiter="l2/lsu",
                       notes="uncoalesced: each warp load of A touches 32 sectors; expect ~1% of cuBLAS")


# --- rung 2 --------------------------------------------------------------------------------
@cuda.jit
def gemm_coalesced(a, b, c, M, N, K):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # neighbours in a warp: columns
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < M and col < N:
        acc = float32(0)
        for i in range(K):
            acc += a[row, i] * b[i, col]  # a[row, i]: one broadcast; b[i, col]: one 128-B line
        c[row, col] = acc


@dataclass(frozen=True)
class Coalesced(Naive):
    rung: ClassVar[int] = 2
    name: ClassVar[str] = "coalesced"
    what: ClassVar[str] = (
        "Swap the roles of threadIdx.x and threadIdx.y: a warp now covers 32 consecutive "
        "columns of C, so its loads of B and stores of C are single coalesced transactions "
        "and its load of A is a broadcast. Same arithmetic, far fewer memory transactions.")

    def grid(self, problem):
        return _tile_grid(problem, self.block, self.block)

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        return [Launch(gemm_coalesced, self.grid(problem), (self.block, self.block),
                       (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        m, n, k = _dims(problem)
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=m * n * k * F32 * (1 / 32 + 1),
                       limiter="l2", notes="coalesced B loads: ~6-8x the naive rung; still one load per FMA")


# --- rung 3 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _smem_kernel(T: int):
    @cuda.jit
    def gemm_smem_tiling(a, b, c, M, N, K):
        As = cuda.shared.array((T, T), float32)  # (BM, BK) tile of A
        Bs = cuda.shared.array((T, T), float32)  # (BK, BN) tile of B
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * T + ty
        col = cuda.blockIdx.x * T + tx
        acc = float32(0)
        for k0 in range(0, K, T):
            As[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0)
            Bs[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0)
            cuda.syncthreads()
            for kk in range(T):
                acc += As[ty, kk] * Bs[kk, tx]
            cuda.syncthreads()
        if row < M and col < N:
            c[row, col] = acc

    return gemm_smem_tiling


@dataclass(frozen=True)
class SmemTiling(_Tunable):
    tile: int = 32

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "smem_tiling"
    what: ClassVar[str] = (
        "Blocks stage a 32x32 tile of A and of B in shared memory, then every thread reads "
        "its operands from there: each global element is fetched once per block instead of "
        "once per thread. Partial tiles are zero-filled, so any size works.")

    def supports(self, problem):
        _require_float32(self, problem)
        T = self.tile
        _check_launch(self, problem, _tile_grid(problem, T, T), (T, T), self.shared_bytes())

    def shared_bytes(self) -> int:
        return 2 * self.tile * self.tile * F32  # As and Bs

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        T = self.tile
        return [Launch(_smem_kernel(T), _tile_grid(problem, T, T), (T, T), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        T = self.tile
        return _tiled_traffic(problem, T, T, T, 2 * F32, "smem",
                              "global traffic / 32; now 2 shared loads per FMA bound it: ~2x rung 2")


# --- rung 4 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _blocktile_1d_kernel(BM: int, BN: int, BK: int, TM: int):
    NT = BM * BN // TM

    @cuda.jit
    def gemm_blocktile_1d(a, b, c, M, N, K):
        As = cuda.shared.array((BM, BK), float32)
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TM, float32)  # TM results of one column: registers
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % BN
        t_row = t // BN  # this thread's rows: t_row * TM ... + TM - 1
        for i in range(TM):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for idx in range(t, BM * BK, NT):
                r = idx // BK
                q = idx % BK
                As[r, q] = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
            for idx in range(t, BK * BN, NT):
                r = idx // BN
                q = idx % BN
                Bs[r, q] = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
            cuda.syncthreads()
            for kk in range(BK):
                bt = Bs[kk, t_col]  # one shared load of B feeds TM FMAs
                for i in range(TM):
                    acc[i] += As[t_row * TM + i, kk] * bt
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            if r < M and bn + t_col < N:
                c[r, bn + t_col] = acc[i]

    return gemm_blocktile_1d


@dataclass(frozen=True)
class Blocktile1D(_Tunable):
    BM: int = 64
    BN: int = 64
    BK: int = 8
    TM: int = 8

    rung: ClassVar[int] = 4
    name: ClassVar[str] = "blocktile_1d"
    what: ClassVar[str] = (
        "Each thread computes TM=8 results down a column of C. A value of B read from shared "
        "memory is kept in a register and used for 8 FMAs, so shared loads per FMA fall from "
        "2 to about 1.1, and the block tile grows to 64x64.")

    def supports(self, problem):
        _require_float32(self, problem)
        if self.BM % self.TM:
            raise UnsupportedProblem(f"{self.label}: BM={self.BM} must be a multiple of TM={self.TM}")
        _check_launch(self, problem, _tile_grid(problem, self.BM, self.BN), self.threads(), self.shared_bytes())

    def threads(self) -> int:
        return self.BM * self.BN // self.TM

    def shared_bytes(self) -> int:
        return (self.BM * self.BK + self.BK * self.BN) * F32

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        kern = _blocktile_1d_kernel(self.BM, self.BN, self.BK, self.TM)
        grid = _tile_grid(problem, self.BM, self.BN)
        return [Launch(kern, grid, self.threads(), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        return _tiled_traffic(problem, self.BM, self.BN, self.BK, (1 + 1 / self.TM) * F32, "smem",
                              "~1.1 shared loads per FMA: ~2-3x rung 3")


# --- rung 5 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _blocktile_2d_kernel(BM: int, BN: int, BK: int, TM: int, TN: int):
    NT = (BM // TM) * (BN // TN)
    TMN = TM * TN  # array shapes must be compile-time constants: computed here, not in the kernel

    @cuda.jit
    def gemm_blocktile_2d(a, b, c, M, N, K):
        As = cuda.shared.array((BM, BK), float32)
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)  # (TM, TN) tile of C in registers
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % (BN // TN)
        t_row = t // (BN // TN)
        for i in range(TM * TN):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for idx in range(t, BM * BK, NT):
                r = idx // BK
                q = idx % BK
                As[r, q] = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
            for idx in range(t, BK * BN, NT):
                r = idx // BN
                q = idx % BN
                Bs[r, q] = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    reg_m[i] = As[t_row * TM + i, kk]
                for j in range(TN):
                    reg_n[j] = Bs[kk, t_col * TN + j]
                for i in range(TM):  # outer product: TM + TN loads feed TM * TN FMAs
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < N:
                    c[r, q] = acc[i * TN + j]

    return gemm_blocktile_2d


@dataclass(frozen=True)
class Blocktile2D(_Tunable):
    BM: int = 128
    BN: int = 128
    BK: int = 8
    TM: int = 8
    TN: int = 8

    rung: ClassVar[int] = 5
    name: ClassVar[str] = "blocktile_2d"
    what: ClassVar[str] = (
        "Each thread computes an 8x8 tile of C as a sum of outer products: per k step it loads "
        "8 values of A and 8 of B into registers and does 64 FMAs. Shared loads per FMA fall "
        "to 0.25; the 128x128 block tile halves L2 traffic again.")

    def supports(self, problem):
        _require_float32(self, problem)
        if self.BM % self.TM or self.BN % self.TN:
            raise UnsupportedProblem(f"{self.label}: BM, BN must be multiples of TM, TN")
        _check_launch(self, problem, _tile_grid(problem, self.BM, self.BN), self.threads(), self.shared_bytes())

    def _kernel(self):
        return _blocktile_2d_kernel(self.BM, self.BN, self.BK, self.TM, self.TN)

    def threads(self) -> int:
        return (self.BM // self.TM) * (self.BN // self.TN)

    def shared_bytes(self) -> int:
        return (self.BM * self.BK + self.BK * self.BN) * F32

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        grid = _tile_grid(problem, self.BM, self.BN)
        return [Launch(self._kernel(), grid, self.threads(), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        return _tiled_traffic(problem, self.BM, self.BN, self.BK, (1 / self.TN + 1 / self.TM) * F32, "fma",
                              "0.25 shared loads per FMA: FMA-bound at last, ~2x rung 4")


# --- rung 6 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _vectorized_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, PAD: int, SWIZZLE: bool):
    """Rungs 6 and 7: 128-bit global loads, A^T in shared memory (rung 7 adds PAD and SWIZZLE)."""
    NT = (BM // TM) * (BN // TN)
    TCOLS = BN // TN  # threads along a row of the block tile
    TMN = TM * TN
    BMP = BM + PAD

    @cuda.jit
    def gemm_vectorized(a, b, c, M, N, K, vec_a, vec_b):
        AsT = cuda.shared.array((BK, BMP), float32)  # A tile stored transposed: (BK, BM + PAD)
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % TCOLS
        t_row = t // TCOLS
        for i in range(TM * TN):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for v in range(t, BM * BK // 4, NT):  # 4 consecutive k of one row of A per load
                r = v // (BK // 4)
                q = (v % (BK // 4)) * 4
                if vec_a and bm + r < M and k0 + q + 3 < K:
                    x0, x1, x2, x3 = load4(a, bm + r, k0 + q)  # one 128-bit load
                else:
                    x0 = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
                    x1 = a[bm + r, k0 + q + 1] if bm + r < M and k0 + q + 1 < K else float32(0)
                    x2 = a[bm + r, k0 + q + 2] if bm + r < M and k0 + q + 2 < K else float32(0)
                    x3 = a[bm + r, k0 + q + 3] if bm + r < M and k0 + q + 3 < K else float32(0)
                AsT[q, r] = x0
                AsT[q + 1, r] = x1
                AsT[q + 2, r] = x2
                AsT[q + 3, r] = x3
            for v in range(t, BK * BN // 4, NT):  # 4 consecutive columns of one row of B
                r = v // (BN // 4)
                q = (v % (BN // 4)) * 4
                if vec_b and k0 + r < K and bn + q + 3 < N:
                    y0, y1, y2, y3 = load4(b, k0 + r, bn + q)
                else:
                    y0 = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
                    y1 = b[k0 + r, bn + q + 1] if k0 + r < K and bn + q + 1 < N else float32(0)
                    y2 = b[k0 + r, bn + q + 2] if k0 + r < K and bn + q + 2 < N else float32(0)
                    y3 = b[k0 + r, bn + q + 3] if k0 + r < K and bn + q + 3 < N else float32(0)
                if SWIZZLE:  # column (tc * TN + j) is stored at (j * TCOLS + tc)
                    Bs[r, ((q) % TN) * TCOLS + (q) // TN] = y0
                    Bs[r, ((q + 1) % TN) * TCOLS + (q + 1) // TN] = y1
                    Bs[r, ((q + 2) % TN) * TCOLS + (q + 2) // TN] = y2
                    Bs[r, ((q + 3) % TN) * TCOLS + (q + 3) // TN] = y3
                else:
                    Bs[r, q] = y0
                    Bs[r, q + 1] = y1
                    Bs[r, q + 2] = y2
                    Bs[r, q + 3] = y3
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    reg_m[i] = AsT[kk, t_row * TM + i]  # consecutive: one broadcast per warp
                for j in range(TN):
                    if SWIZZLE:
                        reg_n[j] = Bs[kk, j * TCOLS + t_col]  # 16 consecutive words: no conflict
                    else:
                        reg_n[j] = Bs[kk, t_col * TN + j]  # stride TN words: 4-way conflicts
                for i in range(TM):
                    for j in range(TN):
                        acc[i * TN + j] += reg_m[i] * reg_n[j]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < N:
                    c[r, q] = acc[i * TN + j]

    return gemm_vectorized


@dataclass(frozen=True)
class Vectorized(Blocktile2D):
    rung: ClassVar[int] = 6
    name: ClassVar[str] = "vectorized"
    what: ClassVar[str] = (
        "Global loads become 128-bit: load4() (perfkit.kernels._vector) reads 4 floats with one "
        "ld.global.v4.f32, which Numba cannot spell otherwise, when k (for A) or n (for B) is a "
        "multiple of 4 so rows stay 16-byte aligned; other sizes take the scalar path. A is "
        "stored transposed so each thread's 8 values of A are consecutive in shared memory.")
    PAD: ClassVar[int] = 0
    SWIZZLE: ClassVar[bool] = False

    def supports(self, problem):
        super().supports(problem)
        if self.BK % 4 or self.BN % 4:
            raise UnsupportedProblem(f"{self.label}: BK and BN must be multiples of 4 (vector loads)")

    def _kernel(self):
        return _vectorized_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, self.PAD, self.SWIZZLE)

    def shared_bytes(self) -> int:
        return self.BK * (self.BM + self.PAD + self.BN) * F32  # AsT (padded) and Bs

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        grid = _tile_grid(problem, self.BM, self.BN)
        args = (bufs["a"], bufs["b"], bufs["c"], m, n, k, k % 4 == 0, n % 4 == 0)
        return [Launch(self._kernel(), grid, self.threads(), args)]

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "4x fewer global load instructions; same bytes: ~+10%"})


# --- rung 7 --------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoBankConflicts(Vectorized):
    rung: ClassVar[int] = 7
    name: ClassVar[str] = "no_bank_conflicts"
    what: ClassVar[str] = (
        "Shared memory has 32 banks of 4 bytes. Reading Bs[kk, t_col*8 + j], 16 threads hit "
        "addresses 8 words apart: threads 0, 4, 8, 12 share a bank (4-way conflict). Storing B "
        "swizzled (column t_col*8 + j at j*16 + t_col) makes those reads 16 consecutive words; "
        "padding each A^T row by 4 words spreads the transposing stores over all banks.")
    PAD: ClassVar[int] = 4
    SWIZZLE: ClassVar[bool] = True

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "same bytes, no 4-way replays of shared loads: ~+10-20%"})


# --- rung 8 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _double_buffer_kernel(BM: int, BN: int, BK: int, TM: int, TN: int):
    NT = (BM // TM) * (BN // TN)
    TCOLS = BN // TN
    NA = BM * BK // 4 // NT  # 4-vectors of A each thread loads per tile
    NB = BK * BN // 4 // NT
    PAD = 4
    BMP = BM + PAD
    TMN = TM * TN
    NA4, NB4 = NA * 4, NB * 4

    @cuda.jit
    def gemm_double_buffer(a, b, c, M, N, K, vec_a, vec_b):
        AsT = cuda.shared.array((2, BK, BMP), float32)  # two buffers of the A^T tile
        Bs = cuda.shared.array((2, BK, BN), float32)
        ra = cuda.local.array(NA4, float32)  # the next tile, staged in registers
        rb = cuda.local.array(NB4, float32)
        acc = cuda.local.array(TMN, float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        t_col = t % TCOLS
        t_row = t // TCOLS
        for i in range(TM * TN):
            acc[i] = float32(0)
        n_tiles = (K + BK - 1) // BK
        for tile in range(n_tiles + 1):
            # 1. global -> registers for tile `tile` (if any)
            if tile < n_tiles:
                k0 = tile * BK
                for s in range(NA):
                    v = t + s * NT
                    r = v // (BK // 4)
                    q = (v % (BK // 4)) * 4
                    if vec_a and bm + r < M and k0 + q + 3 < K:
                        ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = load4(a, bm + r, k0 + q)
                    else:
                        for e in range(4):
                            ra[4 * s + e] = a[bm + r, k0 + q + e] if bm + r < M and k0 + q + e < K else float32(0)
                for s in range(NB):
                    v = t + s * NT
                    r = v // (BN // 4)
                    q = (v % (BN // 4)) * 4
                    if vec_b and k0 + r < K and bn + q + 3 < N:
                        rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = load4(b, k0 + r, bn + q)
                    else:
                        for e in range(4):
                            rb[4 * s + e] = b[k0 + r, bn + q + e] if k0 + r < K and bn + q + e < N else float32(0)
            # 2. compute on tile - 1 (its buffer was filled and synchronised last iteration),
            #    while the loads above are still in flight
            if tile > 0:
                cur = (tile - 1) % 2
                for kk in range(BK):
                    for i in range(TM):
                        reg_m[i] = AsT[cur, kk, t_row * TM + i]
                    for j in range(TN):
                        reg_n[j] = Bs[cur, kk, j * TCOLS + t_col]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i * TN + j] += reg_m[i] * reg_n[j]
            # 3. registers -> the other buffer; one barrier per tile
            if tile < n_tiles:
                nxt = tile % 2
                for s in range(NA):
                    v = t + s * NT
                    r = v // (BK // 4)
                    q = (v % (BK // 4)) * 4
                    for e in range(4):
                        AsT[nxt, q + e, r] = ra[4 * s + e]
                for s in range(NB):
                    v = t + s * NT
                    r = v // (BN // 4)
                    q = (v % (BN // 4)) * 4
                    for e in range(4):
                        Bs[nxt, r, ((q + e) % TN) * TCOLS + (q + e) // TN] = rb[4 * s + e]
            cuda.syncthreads()
        for i in range(TM):
            r = bm + t_row * TM + i
            for j in range(TN):
                q = bn + t_col * TN + j
                if r < M and q < N:
                    c[r, q] = acc[i * TN + j]

    return gemm_double_buffer


@dataclass(frozen=True)
class DoubleBuffer(Blocktile2D):
    rung: ClassVar[int] = 8
    name: ClassVar[str] = "double_buffer"
    what: ClassVar[str] = (
        "Two shared buffers: while the block multiplies tile t from one, the loads of tile t+1 "
        "are already issued into registers and land in the other, so global latency hides "
        "behind FMAs and each tile needs one barrier instead of two.")

    def supports(self, problem):
        super().supports(problem)
        nt = self.threads()
        if (self.BM * self.BK // 4) % nt or (self.BK * self.BN // 4) % nt or self.BK % 4 or self.BN % 4:
            raise UnsupportedProblem(f"{self.label}: the A and B tiles must split into whole 4-vectors "
                                     f"per thread ({nt} threads)")

    def _kernel(self):
        return _double_buffer_kernel(self.BM, self.BN, self.BK, self.TM, self.TN)

    def shared_bytes(self) -> int:
        return 2 * self.BK * (self.BM + 4 + self.BN) * F32  # two buffers of AsT (padded) and Bs

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        grid = _tile_grid(problem, self.BM, self.BN)
        args = (bufs["a"], bufs["b"], bufs["c"], m, n, k, k % 4 == 0, n % 4 == 0)
        return [Launch(self._kernel(), grid, self.threads(), args)]

    def traffic(self, problem):
        t = super().traffic(problem)
        return Traffic(**{**t.as_dict(), "notes": "same bytes, overlapped: gains where latency, not "
                                                  "issue rate, limited rung 7 (~0-10%)"})


# --- rung 9 --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _warptile_kernel(BM: int, BN: int, BK: int, WM: int, WN: int, WNITER: int, TM: int, TN: int, NT: int):
    WMITER = (WM * WN) // (32 * TM * TN * WNITER)
    WSUBM = WM // WMITER  # a warp's tile is WMITER x WNITER sub-tiles of (WSUBM, WSUBN)
    WSUBN = WN // WNITER
    WARPS_N = BN // WN
    PAD = 4
    BMP = BM + PAD
    NACC = WMITER * TM * WNITER * TN
    NRM, NRN = WMITER * TM, WNITER * TN

    @cuda.jit
    def gemm_warptile(a, b, c, M, N, K, vec_a, vec_b):
        AsT = cuda.shared.array((BK, BMP), float32)
        Bs = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(NACC, float32)
        reg_m = cuda.local.array(NRM, float32)
        reg_n = cuda.local.array(NRN, float32)
        t = cuda.threadIdx.x
        warp = t // 32
        lane = t % 32
        w_row = (warp // WARPS_N) * WM  # this warp's (WM, WN) tile inside the block tile
        w_col = (warp % WARPS_N) * WN
        l_col = lane % (WSUBN // TN)  # this lane's (TM, TN) tile inside each sub-tile
        l_row = lane // (WSUBN // TN)
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        for i in range(WMITER * TM * WNITER * TN):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for v in range(t, BM * BK // 4, NT):
                r = v // (BK // 4)
                q = (v % (BK // 4)) * 4
                if vec_a and bm + r < M and k0 + q + 3 < K:
                    x0, x1, x2, x3 = load4(a, bm + r, k0 + q)
                else:
                    x0 = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float32(0)
                    x1 = a[bm + r, k0 + q + 1] if bm + r < M and k0 + q + 1 < K else float32(0)
                    x2 = a[bm + r, k0 + q + 2] if bm + r < M and k0 + q + 2 < K else float32(0)
                    x3 = a[bm + r, k0 + q + 3] if bm + r < M and k0 + q + 3 < K else float32(0)
                AsT[q, r] = x0
                AsT[q + 1, r] = x1
                AsT[q + 2, r] = x2
                AsT[q + 3, r] = x3
            for v in range(t, BK * BN // 4, NT):
                r = v // (BN // 4)
                q = (v % (BN // 4)) * 4
                if vec_b and k0 + r < K and bn + q + 3 < N:
                    y0, y1, y2, y3 = load4(b, k0 + r, bn + q)
                else:
                    y0 = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float32(0)
                    y1 = b[k0 + r, bn + q + 1] if k0 + r < K and bn + q + 1 < N else float32(0)
                    y2 = b[k0 + r, bn + q + 2] if k0 + r < K and bn + q + 2 < N else float32(0)
                    y3 = b[k0 + r, bn + q + 3] if k0 + r < K and bn + q + 3 < N else float32(0)
                Bs[r, q] = y0
                Bs[r, q + 1] = y1
                Bs[r, q + 2] = y2
                Bs[r, q + 3] = y3
            cuda.syncthreads()
            for kk in range(BK):
                for wm in range(WMITER):
                    for i in range(TM):
                        reg_m[wm * TM + i] = AsT[kk, w_row + wm * WSUBM + l_row * TM + i]
                for wn in range(WNITER):
                    for j in range(TN):
                        reg_n[wn * TN + j] = Bs[kk, w_col + wn * WSUBN + l_col * TN + j]
                for wm in range(WMITER):
                    for wn in range(WNITER):
                        for i in range(TM):
                            for j in range(TN):
                                acc[(wm * TM + i) * (WNITER * TN) + wn * TN + j] += \
                                    reg_m[wm * TM + i] * reg_n[wn * TN + j]
            cuda.syncthreads()
        for wm in range(WMITER):
            for wn in range(WNITER):
                for i in range(TM):
                    r = bm + w_row + wm * WSUBM + l_row * TM + i
                    for j in range(TN):
                        q = bn + w_col + wn * WSUBN + l_col * TN + j
                        if r < M and q < N:
                            c[r, q] = acc[(wm * TM + i) * (WNITER * TN) + wn * TN + j]

    return gemm_warptile


@dataclass(frozen=True)
class WarpTile(_Tunable):
    BM: int = 128
    BN: int = 128
    BK: int = 16
    WM: int = 64
    WN: int = 64
    WNITER: int = 4
    TM: int = 8
    TN: int = 4
    NT: int = 128

    rung: ClassVar[int] = 9
    name: ClassVar[str] = "warptile"
    what: ClassVar[str] = (
        "A level between block and thread: each warp owns a 64x64 tile of C, split into "
        "sub-tiles that its 32 lanes sweep together. A warp's shared loads then touch few, "
        "contiguous addresses (broadcasts, no conflicts), and the register tile (8x4 per "
        "sub-tile, 128 results per thread) maximises reuse, as CUTLASS does.")

    def constraints(self) -> list[str]:
        """Tile constraints, each stated as the check it is (empty when the config is legal)."""
        bad = []
        warps = self.NT // 32
        if self.NT % 32:
            bad.append(f"NT={self.NT} is not a whole number of warps")
        if self.BM % self.WM or self.BN % self.WN or (self.BM // self.WM) * (self.BN // self.WN) != warps:
            bad.append(f"(BM/WM)*(BN/WN) = {(self.BM // self.WM) * (self.BN // self.WN)} warp tiles != {warps} warps")
        sub = 32 * self.TM * self.TN * self.WNITER
        if (self.WM * self.WN) % sub:
            bad.append(f"WM*WN={self.WM * self.WN} is not a multiple of 32*TM*TN*WNITER={sub}")
        else:
            wmiter = self.WM * self.WN // sub
            if self.WM % wmiter or self.WN % self.WNITER:
                bad.append("WM/WMITER and WN/WNITER must be whole")
            elif (self.WN // self.WNITER) % self.TN or (self.WM // wmiter) % self.TM:
                bad.append("sub-tiles must be whole multiples of TM, TN")
            elif ((self.WN // self.WNITER) // self.TN) * ((self.WM // wmiter) // self.TM) != 32:
                bad.append("the lanes must tile a sub-tile exactly (32 lanes)")
        if self.BK % 4 or self.BN % 4:
            bad.append("BK and BN must be multiples of 4 (vector loads)")
        if self.NT > MAX_THREADS_PER_BLOCK:
            bad.append(f"NT={self.NT} > {MAX_THREADS_PER_BLOCK} threads per block")
        if self.shared_bytes() > MAX_STATIC_SHARED:
            bad.append(f"{self.shared_bytes()} bytes of static shared memory per block > {MAX_STATIC_SHARED} "
                       "(48 KiB), the static limit")
        return bad

    def supports(self, problem):
        _require_float32(self, problem)
        bad = self.constraints()
        if bad:
            raise UnsupportedProblem(f"{self.label} {self.config}: " + "; ".join(bad))
        _check_launch(self, problem, _tile_grid(problem, self.BM, self.BN), self.NT, self.shared_bytes())

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        kern = _warptile_kernel(self.BM, self.BN, self.BK, self.WM, self.WN, self.WNITER, self.TM, self.TN, self.NT)
        grid = _tile_grid(problem, self.BM, self.BN)
        return [Launch(kern, grid, self.NT, (bufs["a"], bufs["b"], bufs["c"], m, n, k, k % 4 == 0, n % 4 == 0))]

    def shared_bytes(self) -> int:
        return self.BK * (self.BM + 4 + self.BN) * F32

    def traffic(self, problem):
        return _tiled_traffic(problem, self.BM, self.BN, self.BK, (1 / self.TN + 1 / self.TM) * F32, "fma",
                              "fewer shared-load instructions per FMA and better ILP: ~+10-20% over rung 8")


# --- rung 10 -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    variant: "WarpTile"
    registers: int | None = None
    spills: int | None = None
    occupancy: float | None = None
    seconds: float | None = None
    rejected: str | None = None

    @property
    def static_score(self) -> float:
        """Documented static rule: prefer more FMAs per shared load and per L2 byte (bigger
        thread and block tiles), then higher occupancy; used when nothing can be timed."""
        v = self.variant
        reuse = (v.TM * v.TN) / (v.TM + v.TN)
        tile = (v.BM * v.BN) / (v.BM + v.BN)
        return reuse * tile * (0.5 + (self.occupancy or 0.0))


def search_space() -> list[WarpTile]:
    """Legal warp-tiling configurations (the tile constraints are WarpTile.constraints())."""
    out = []
    for BM, BN, BK, WM, WN, WNITER, TM, TN, NT in itertools.product(
            (64, 128), (64, 128, 256), (8, 16), (32, 64), (32, 64), (1, 2, 4), (4, 8), (4, 8), (128, 256)):
        v = WarpTile(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, WNITER=WNITER, TM=TM, TN=TN, NT=NT)
        if not v.constraints():  # shared memory within 48 KiB included
            out.append(v)
    return out


def search(problem: Problem, candidates: list[WarpTile] | None = None, cc=(9, 0),
           time_fn: Callable[[WarpTile], float] | None = None, min_occupancy: float = 0.125,
           progress: bool = False) -> list[Candidate]:
    """Autotune the warp-tiling kernel for ``problem``.

    1. keep only legal configurations (``WarpTile.constraints``);
    2. compile each for ``cc`` with :func:`perfkit.anatomy.inspect` (no GPU needed) and drop
       those that spill registers or fall below ``min_occupancy``;
    3. time the survivors with ``time_fn(variant) -> seconds`` when given (on a GPU, e.g.
       ``lambda v: bench.sweep(problem, v).median_s[0]``), else rank by ``static_score``.

    Returns every candidate, best first, with why the rejected ones were rejected.
    """
    from .. import anatomy

    cands = [v for v in (candidates or search_space())]
    out = []
    it = cands
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(cands, desc="autotune", leave=False)
    for v in it:
        bad = v.constraints()
        if bad:
            out.append(Candidate(v, rejected="; ".join(bad)))
            continue
        try:
            rep = anatomy.inspect(v, problem, cc=cc)
        except Exception as exc:  # a config the compiler or the SM cannot take
            out.append(Candidate(v, rejected=f"{exc.__class__.__name__}: {exc}"))
            continue
        spills = rep.spill_store_bytes + rep.spill_load_bytes
        c = Candidate(v, registers=rep.registers, spills=spills, occupancy=rep.occupancy.ratio)
        if spills:
            c = dataclasses_replace(c, rejected=f"spills {spills} bytes")
        elif rep.occupancy.ratio < min_occupancy:
            c = dataclasses_replace(c, rejected=f"occupancy {rep.occupancy.ratio:.0%} < {min_occupancy:.0%}")
        elif time_fn is not None:
            c = dataclasses_replace(c, seconds=float(time_fn(v)))
        out.append(c)
    ok = [c for c in out if c.rejected is None]
    ok.sort(key=(lambda c: c.seconds) if time_fn is not None else (lambda c: -c.static_score))
    return ok + [c for c in out if c.rejected is not None]


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


@dataclass(frozen=True)
class Autotuned(WarpTile):
    # The pick of search(EXAMPLE_PROBLEM, cc=(9, 0)) by its static rule (no GPU was available to
    # time candidates when this was chosen); rerun search() with time_fn on a GPU to retune.
    BM: int = 128
    BN: int = 128
    BK: int = 8
    WM: int = 64
    WN: int = 32
    WNITER: int = 1
    TM: int = 8
    TN: int = 8
    NT: int = 256

    rung: ClassVar[int] = 10
    name: ClassVar[str] = "autotuned"
    what: ClassVar[str] = (
        "The warp-tiling kernel at the configuration search() picked: every legal tiling is "
        "compiled for the target with no GPU, those that spill or starve occupancy are pruned "
        "from the anatomy report, and the rest are timed on a GPU (or ranked by a static "
        "reuse-and-occupancy score without one).")


# --- rung 11: tensor cores -------------------------------------------------------------------
# mma_16816 and the fragment maps live in perfkit.kernels._ptx (shared with the conv ladder).


@lru_cache(maxsize=None)
def _tensor_core_kernel(WARPS_M: int, WARPS_N: int, NTILES: int):
    """Block = WARPS_M x WARPS_N warps; each warp owns a 16 x (8 * NTILES) tile of C."""
    BM = 16 * WARPS_M
    BN = 8 * NTILES * WARPS_N
    BK = 16
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    NACC = NTILES * 4

    @cuda.jit
    def gemm_tensor_core(a, b, c, M, N, K):
        As = cuda.shared.array((BM, BK), float16)  # (BM, BK) tile of A, float16
        Bs = cuda.shared.array((BK, BN), float16)  # (BK, BN) tile of B
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's mma only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        acc = cuda.local.array(NACC, float32)
        fa = cuda.local.array(8, float16)
        fb = cuda.local.array(4, float16)
        t = cuda.threadIdx.x
        lane = t % 32
        warp = t // 32
        wm = (warp // WARPS_N) * 16
        wn = (warp % WARPS_N) * (8 * NTILES)
        bm = cuda.blockIdx.y * BM
        bn = cuda.blockIdx.x * BN
        for i in range(NTILES * 4):
            acc[i] = float32(0)
        for k0 in range(0, K, BK):
            for idx in range(t, BM * BK, NT):
                r = idx // BK
                q = idx % BK
                As[r, q] = a[bm + r, k0 + q] if bm + r < M and k0 + q < K else float16(0)
            for idx in range(t, BK * BN, NT):
                r = idx // BN
                q = idx % BN
                Bs[r, q] = b[k0 + r, bn + q] if k0 + r < K and bn + q < N else float16(0)
            cuda.syncthreads()
            for i in range(8):
                r, q = frag_a(lane, i)
                fa[i] = As[wm + r, q]
            for nt in range(NTILES):
                for i in range(4):
                    r, q = frag_b(lane, i)
                    fb[i] = Bs[r, wn + nt * 8 + q]
                acc[nt * 4], acc[nt * 4 + 1], acc[nt * 4 + 2], acc[nt * 4 + 3] = mma_16816(
                    fa[0], fa[1], fa[2], fa[3], fa[4], fa[5], fa[6], fa[7], fb[0], fb[1], fb[2], fb[3],
                    acc[nt * 4], acc[nt * 4 + 1], acc[nt * 4 + 2], acc[nt * 4 + 3], scr_a, scr_b)
            cuda.syncthreads()
        for nt in range(NTILES):
            for i in range(4):
                r, q = frag_c(lane, i)
                row = bm + wm + r
                col = bn + wn + nt * 8 + q
                if row < M and col < N:
                    c[row, col] = acc[nt * 4 + i]

    return gemm_tensor_core


@dataclass(frozen=True)
class TensorCore(_Tunable):
    WARPS_M: int = 4
    WARPS_N: int = 2
    NTILES: int = 4

    rung: ClassVar[int] = 11
    name: ClassVar[str] = "tensor_core"
    what: ClassVar[str] = (
        "float16 inputs, float32 accumulation on the tensor cores: each warp issues "
        "mma.sync.m16n8k16 (one 16x8x16 matrix multiply-accumulate per instruction, HMMA in "
        "SASS) through an inline-PTX intrinsic, since Numba has no tensor-core API. Operands "
        "are gathered from shared memory into the instruction's fragment layout. In the "
        "simulator the same kernel runs with an exact emulation of the instruction that places "
        "values with the same layout maps, so the indexing is checked without a GPU.")

    def example(self, problem):
        return problem if problem.dtype == "float16" else Problem(problem.m, problem.n, problem.k, "float16")

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate); got {problem.dtype}")
        _check_launch(self, problem, self.grid(problem), self.threads(), self.shared_bytes())

    def threads(self) -> int:
        return 32 * self.WARPS_M * self.WARPS_N

    def grid(self, problem):
        return _tile_grid(problem, 16 * self.WARPS_M, 8 * self.NTILES * self.WARPS_N)

    def shared_bytes(self) -> int:
        """As and Bs in float16.  The scratch arrays feed only the simulator's mma; on a GPU the
        instruction ignores them and the compiler drops them."""
        return (16 * self.WARPS_M * 16 + 16 * 8 * self.NTILES * self.WARPS_N) * 2

    def plan(self, problem, bufs):
        m, n, k = _dims(problem)
        kern = _tensor_core_kernel(self.WARPS_M, self.WARPS_N, self.NTILES)
        return [Launch(kern, self.grid(problem), self.threads(), (bufs["a"], bufs["b"], bufs["c"], m, n, k))]

    def traffic(self, problem):
        m, n, k = _dims(problem)
        BM, BN = 16 * self.WARPS_M, 8 * self.NTILES * self.WARPS_N
        l2 = (m * k * math.ceil(n / BN) + k * n * math.ceil(m / BM)) * 2 + m * n * F32
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, l2_bytes=l2, limiter="l2/smem",
                       notes="tensor-core math is ~15x the FP32 rate; a 64x64 tile without ldmatrix or "
                             "cp.async pipelining leaves it bound by operand traffic",
                       extra={"peak": "tensor.fp16"})


LADDER: list[Variant] = [Oracle(), Naive(), Coalesced(), SmemTiling(), Blocktile1D(), Blocktile2D(),
                         Vectorized(), NoBankConflicts(), DoubleBuffer(), WarpTile(), Autotuned(), TensorCore()]
registry_check(LADDER)

EXAMPLE_PROBLEM = Problem(4096, 4096, 4096)
LLM_SHAPES = [Problem(4096, 4096, 11008), Problem(8192, 1024, 4096), Problem(4096, 11008, 4096)]
GPU_SWEEP = [Problem(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)] + LLM_SHAPES \
    + [Problem(s, s, s, "float16") for s in (1024, 4096, 8192)]
SIM_SWEEP = [Problem(37, 41, 29), Problem(37, 41, 29, "float16")]
