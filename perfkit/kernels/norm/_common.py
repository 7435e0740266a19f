"""Shared pieces of the normalization ladders.

* Reductions as ``@cuda.jit(device=True)`` functions: the classic shared-memory tree
  (rung 2), warp shuffles (rung 3 on), and the *group* reductions of rung 5, where a block holds
  several rows and ``G`` consecutive threads (a power of two) own one row.  Every thread of a
  block must call a reduction (they contain barriers and full-mask shuffles), so kernels never
  return early: threads with nothing to do reduce the identity.
* Merges for single-pass statistics: online softmax ``(max, sum)`` and Welford / Chan
  ``(count, mean, M2)``.
* ``shfl_xor`` / ``shfl_down``: ``cuda.shfl_xor_sync`` / ``cuda.shfl_down_sync`` on a GPU.  The
  CUDA simulator (numba-cuda 0.30) has no warp shuffles at all (``FakeCUDAModule`` lacks them),
  so there the same names are an exact emulation through a shared-memory exchange between two
  barriers; the kernels that call them are identical in both worlds.
* Host helpers: dtype checks, the static launch-shape rule and the search of rung 6.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, float32

from ... import backend
from ..base import TOLERANCES, Problem, ProblemError, UnsupportedProblem

FULL_MASK = 0xFFFFFFFF
NEG_INF = np.float32(-np.inf)
ZERO = np.float32(0.0)
ONE = np.float32(1.0)

BF16_MSG = ("bfloat16 is not supported: NumPy has no bfloat16 dtype and Numba CUDA arrays cannot "
            "hold it, so there is nothing to pass to these kernels; use float16 or float32")


# --- host-side validation helpers ---------------------------------------------------------------
def check_dtype(op: str, dtype, allowed=("float32", "float16")) -> str:
    """Canonical dtype name, or ProblemError (bfloat16 gets its own explanation)."""
    if isinstance(dtype, str) and dtype.lower().replace("_", "") in ("bfloat16", "bf16"):
        raise ProblemError(f"{op}: {BF16_MSG}")
    try:
        name = np.dtype(dtype).name
    except TypeError as exc:
        raise ProblemError(f"{op}: unknown dtype {dtype!r}; allowed: {', '.join(allowed)}") from exc
    if name not in allowed:
        raise ProblemError(f"{op}: dtype {name!r} is not supported; allowed: {', '.join(allowed)}")
    return name


def check_count(op: str, name: str, v) -> None:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise ProblemError(f"{op}: {name} must be an int, got {v!r}")
    if v < 1:
        raise ProblemError(f"{op}: {name} must be >= 1, got {v} (an empty array has nothing to normalize)")


def check_eps(op: str, eps) -> None:
    try:
        ok = float(eps) > 0 and math.isfinite(float(eps))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ProblemError(f"{op}: eps must be a finite number > 0, got {eps!r}")


def check_axis(op: str, axis) -> None:
    if axis not in (-1, 1) or isinstance(axis, bool):
        raise ProblemError(f"{op}: axis={axis!r} is not supported; only the last axis (-1) is "
                           "normalized (rows are contiguous); transpose the input to reduce another axis")


def shape2d(op: str, shape) -> tuple[int, int]:
    """(rows, cols) from a shape tuple that must be 2-D."""
    try:
        t = tuple(int(s) for s in shape)
    except TypeError as exc:
        raise ProblemError(f"{op}: shape must be a tuple (rows, cols), got {shape!r}") from exc
    if len(t) != 2:
        raise ProblemError(f"{op}: needs a 2-D (rows, cols) array, got a {len(t)}-D shape {t}; "
                           "reshape to (-1, last_dim) first")
    return t


def scaled_tolerance(base: tuple[float, float], n: int) -> tuple[float, float]:
    """Tolerance for a reduction over ``n`` terms: float32 partial sums lose ~sqrt(n) ulps."""
    f = max(1.0, math.sqrt(n / 4096.0))
    return base[0] * f, base[1] * f


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def row_elems_bytes(rows: int, cols: int, dtype: str) -> float:
    return float(rows) * cols * np.dtype(dtype).itemsize


class RowProblem(Problem):
    """What the row-wise ops (softmax, layernorm, layernorm_bwd, rmsnorm) share: an array of
    shape (rows, cols) reduced along its last, contiguous axis.  Each op's ``Problem`` is a frozen
    dataclass subclass that declares its fields (``rows, cols, dtype[, eps], axis``) in its own
    positional order, and its inputs, outputs, reference and FLOPs."""

    dtypes = ("float32", "float16")

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", check_dtype(self.op, self.dtype, self.dtypes))
        super().__post_init__()

    @classmethod
    def from_shape(cls, shape, *args, **kwargs):
        """The problem for an array of ``shape`` (rows, cols); further arguments as the fields."""
        rows, cols = shape2d(cls.op, shape)
        return cls(rows, cols, *args, **kwargs)

    def validate(self) -> None:
        check_count(self.op, "rows", self.rows)
        check_count(self.op, "cols", self.cols)
        if hasattr(self, "eps"):
            check_eps(self.op, self.eps)
        check_axis(self.op, self.axis)

    def tolerance(self):
        return scaled_tolerance(TOLERANCES[self.dtype], self.cols)

    @property
    def elem_bytes(self) -> float:
        """Bytes of one (rows, cols) array in the problem's dtype."""
        return row_elems_bytes(self.rows, self.cols, self.dtype)


def eps32(problem) -> np.float32:
    """The problem's eps as the float32 scalar the kernels take."""
    return np.float32(problem.eps)


#: Rows a GPU keeps in flight at once (about 132 SMs x 8 blocks); their bytes decide whether
#: a second sweep over a row hits L1/L2 or goes back to DRAM.
ROWS_IN_FLIGHT = 1024
ONCHIP_BYTES = 32 * 2**20  # what we trust L2 (50 MB on an H100) to hold for re-reads
#: what we trust one SM's L1 to hold for re-reads of the rows its blocks work on (an H100 SM has
#: 256 KB of L1 and shared memory, an A100 SM 192 KB; these kernels ask little shared memory)
L1_BYTES = 192 * 2**10


def _rows_fit_l1(rows: int, cols: int, dtype: str) -> bool:
    row = cols * np.dtype(dtype).itemsize
    per_sm = max(1, min(rows, ROWS_IN_FLIGHT) // DEFAULT_SMS)
    return row * per_sm <= L1_BYTES


def sweep_l2(rows: int, cols: int, dtype: str, sweeps: int) -> float:
    """Bytes the SMs request from L2 to read a (rows, cols) array ``sweeps`` times, one row at a
    time: once when the rows an SM keeps in flight (``ROWS_IN_FLIGHT`` over the SMs) fit in its
    L1 (later sweeps hit L1), every sweep otherwise.  (Nsight Compute on the H100 at 4096x4096
    fp32: the three-sweep softmax, layernorm and rmsnorm rungs request x once.)"""
    e = row_elems_bytes(rows, cols, dtype)
    return e if _rows_fit_l1(rows, cols, dtype) else e * sweeps


def reread_l2(nbytes: float, rows: int, cols: int, dtype: str) -> float:
    """L2 bytes of a small array every row reads again (gamma, beta): once per SM while the rows
    in flight leave it room in L1, once per row otherwise."""
    return nbytes * (min(rows, DEFAULT_SMS) if _rows_fit_l1(rows, cols, dtype) else rows)


def scattered_store_l2(nbytes: float, dtype: str) -> float:
    """L2 bytes of stores where neighbouring threads write a row apart (one row per thread): L1
    writes through, and each element is its own 32-byte sector write (Nsight Compute on the H100:
    the naive rungs' write kernels request ~8x the bytes of y at fp32)."""
    return nbytes * 32.0 / np.dtype(dtype).itemsize


def sweep_dram(rows: int, cols: int, dtype: str, sweeps: int) -> float:
    """DRAM bytes to read a (rows, cols) array ``sweeps`` times, one row at a time: once when
    the rows in flight fit on chip (later sweeps hit L1/L2), every sweep otherwise."""
    e = row_elems_bytes(rows, cols, dtype)
    row = cols * np.dtype(dtype).itemsize
    return e if row * min(rows, ROWS_IN_FLIGHT) <= ONCHIP_BYTES else e * sweeps


#: SMs assumed where no GPU is present (the simulator, the anatomy compiler, the model): an H100
#: SXM's 132, so plans made here (persistent grids, split counts) are the ones an H100 runs.
#: Grids stay bounded by the problem (rows, columns), so tiny test problems stay tiny.
DEFAULT_SMS = 132


def sm_count() -> int:
    """SMs of the GPU in use, or :data:`DEFAULT_SMS` without one."""
    try:
        d = backend.device()
        if not getattr(d, "simulated", False) and d.sm_count:
            return int(d.sm_count)
    except Exception:
        pass
    return DEFAULT_SMS


# --- kernels with a fixed block size ---------------------------------------------------------
def block_reg_cap(threads: int) -> int:
    """Registers per thread that let one block of ``threads`` threads launch: the block's warps
    share 65536 registers (every cc >= 7.5), allocated per warp in units of 256 (8 per thread),
    and no thread may use more than 255: 64 at 1024 threads, 80 at 768, 128 at 512."""
    return min(255, (65536 // int(threads)) // 8 * 8)


def jit_block(threads: int):
    """``cuda.jit`` for a kernel that is always launched with ``threads`` threads per block.

    On a GPU it caps the registers per thread at :func:`block_reg_cap` (ptxas
    ``-maxrregcount``; ``max_registers`` is also what the anatomy compiler applies).  Without the
    cap ptxas may use more than a big block can get (several rungs take 70-85 registers at 1024
    threads), and the launch fails with "too many resources requested"; the simulator has no
    register file and no such limit, so only a GPU would show it.  Blocks of 256 threads or
    fewer get the default cap (255): their code is unchanged."""
    if backend.is_simulator():
        return cuda.jit
    cap = block_reg_cap(threads)
    return cuda.jit(max_registers=cap if cap < 255 else None)


# --- warp shuffles (simulator: exact emulation) -----------------------------------------------
if backend.is_simulator():
    @cuda.jit(device=True)
    def shfl_xor(v, off):
        """Lane ``lane ^ off``'s value (simulator: exchange through shared memory)."""
        scr = cuda.shared.array(1024, float32)
        t = cuda.threadIdx.x
        cuda.syncthreads()
        scr[t] = v
        cuda.syncthreads()
        return scr[t ^ off]

    @cuda.jit(device=True)
    def shfl_down(v, off):
        """Lane ``lane + off``'s value, own value past the warp's end (simulator emulation)."""
        scr = cuda.shared.array(1024, float32)
        t = cuda.threadIdx.x
        cuda.syncthreads()
        scr[t] = v
        cuda.syncthreads()
        if t % 32 + off < 32:
            return scr[t + off]
        return v
else:
    @cuda.jit(device=True)
    def shfl_xor(v, off):
        """Lane ``lane ^ off``'s value: a register exchange inside the warp (SHFL.BFLY)."""
        return cuda.shfl_xor_sync(FULL_MASK, v, off)

    @cuda.jit(device=True)
    def shfl_down(v, off):
        """Lane ``lane + off``'s value (SHFL.DOWN); lanes past the end keep their own."""
        return cuda.shfl_down_sync(FULL_MASK, v, off)


# --- rung 2: shared-memory tree over the whole block -----------------------------------------
@cuda.jit(device=True)
def tree_sum(v, sh, nthreads):
    """Sum of ``v`` over a block of ``nthreads`` (a power of two), via ``sh[nthreads]``:
    log2(nthreads) halving steps, a barrier after each.  Every thread gets the result."""
    t = cuda.threadIdx.x
    sh[t] = v
    cuda.syncthreads()
    s = nthreads // 2
    while s > 0:
        if t < s:
            sh[t] = sh[t] + sh[t + s]
        cuda.syncthreads()
        s //= 2
    r = sh[0]
    cuda.syncthreads()  # sh is reused by the next reduction
    return r


@cuda.jit(device=True)
def tree_max(v, sh, nthreads):
    t = cuda.threadIdx.x
    sh[t] = v
    cuda.syncthreads()
    s = nthreads // 2
    while s > 0:
        if t < s:
            sh[t] = max(sh[t], sh[t + s])
        cuda.syncthreads()
        s //= 2
    r = sh[0]
    cuda.syncthreads()
    return r


# --- rung 3 on: butterflies inside a warp, then across the warps of a group -------------------
@cuda.jit(device=True)
def warp_sum(v, width):
    """Butterfly (xor) all-reduce over aligned groups of ``width`` lanes (power of two <= 32)."""
    off = width // 2
    while off > 0:
        v += shfl_xor(v, off)
        off //= 2
    return v


@cuda.jit(device=True)
def warp_max(v, width):
    off = width // 2
    while off > 0:
        v = max(v, shfl_xor(v, off))
        off //= 2
    return v


@cuda.jit(device=True)
def group_sum(v, G, scr):
    """Sum over the ``G`` consecutive threads that own one row (``G`` a power of two).

    G <= 32: shuffles only.  G > 32: each warp reduces by shuffles, lane 0 parks the partial in
    ``scr[warp]`` (``scr`` holds 32 floats), one barrier, every thread adds its group's
    ``G/32`` partials (broadcast reads), a second barrier before ``scr`` is reused."""
    v = warp_sum(v, min(G, 32))
    if G > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr[t // 32] = v
        cuda.syncthreads()
        first = (t // G) * (G // 32)
        acc = ZERO
        for i in range(G // 32):
            acc += scr[first + i]
        cuda.syncthreads()
        v = acc
    return v



@cuda.jit(device=True)
def group_sum2(a, b, G, scr):
    """Sums of two values over the ``G`` threads of a row at once (``scr``: a (2, 32) shared
    array): the butterflies of both interleaved, one pair of barriers for both when G > 32."""
    off = min(G, 32) // 2
    while off > 0:
        a += shfl_xor(a, off)
        b += shfl_xor(b, off)
        off //= 2
    if G > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr[0, t // 32] = a
            scr[1, t // 32] = b
        cuda.syncthreads()
        first = (t // G) * (G // 32)
        a = ZERO
        b = ZERO
        for i in range(G // 32):
            a += scr[0, first + i]
            b += scr[1, first + i]
        cuda.syncthreads()
    return a, b

@cuda.jit(device=True)
def group_max(v, G, scr):
    v = warp_max(v, min(G, 32))
    if G > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr[t // 32] = v
        cuda.syncthreads()
        first = (t // G) * (G // 32)
        acc = scr[first]
        for i in range(1, G // 32):
            acc = max(acc, scr[first + i])
        cuda.syncthreads()
        v = acc
    return v


# --- single-pass statistics: online softmax ---------------------------------------------------
@cuda.jit(device=True)
def softmax_merge(m1, s1, m2, s2):
    """Merge two partial (running max, sum of exp(x - max)) pairs.  An empty part has
    m = -inf, s = 0 and contributes nothing (no exp(-inf - -inf) = NaN); a NaN in either part
    makes the sum NaN, so a poisoned row stays poisoned.  A NaN never raises a max (the GPU's
    max is fmaxf, which skips NaN), so a part that saw only NaN (and -inf) has m = -inf and
    s = NaN: ``s * 0`` keeps that NaN instead of dropping the part."""
    m = max(m1, m2)
    if m == NEG_INF:
        return m, s1 + s2
    a = s1 * math.exp(m1 - m) if m1 != NEG_INF else s1 * ZERO
    b = s2 * math.exp(m2 - m) if m2 != NEG_INF else s2 * ZERO
    return m, a + b


@cuda.jit(device=True)
def group_softmax_stats(m, s, G, scr_m, scr_s):
    """All-reduce of (max, sum) pairs over a group of G threads."""
    off = min(G, 32) // 2
    while off > 0:
        mo = shfl_xor(m, off)
        so = shfl_xor(s, off)
        m, s = softmax_merge(m, s, mo, so)
        off //= 2
    if G > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr_m[t // 32] = m
            scr_s[t // 32] = s
        cuda.syncthreads()
        first = (t // G) * (G // 32)
        m = NEG_INF
        s = ZERO
        for i in range(G // 32):
            m, s = softmax_merge(m, s, scr_m[first + i], scr_s[first + i])
        cuda.syncthreads()
    return m, s


# --- single-pass statistics: Welford / Chan ---------------------------------------------------
@cuda.jit(device=True)
def welford_push(n, mean, m2, x):
    """Add one sample: n += 1, mean += d / n, M2 += d * (x - new mean)."""
    n += ONE
    d = x - mean
    mean += d / n
    m2 += d * (x - mean)
    return n, mean, m2


@cuda.jit(device=True)
def chan_merge(na, ma, qa, nb, mb, qb):
    """Chan et al.: merge (count, mean, M2) of two disjoint parts; an empty part is a no-op."""
    n = na + nb
    if n == ZERO:
        return ZERO, ZERO, ZERO
    d = mb - ma
    wb = nb / n
    return n, ma + d * wb, qa + qb + d * d * na * wb


@cuda.jit(device=True)
def group_welford(n, mean, m2, G, scr_n, scr_m, scr_q):
    """All-reduce of Welford triples over a group of G threads (shuffle butterflies, then the
    warps' partials through shared memory when G > 32)."""
    off = min(G, 32) // 2
    while off > 0:
        no = shfl_xor(n, off)
        mo = shfl_xor(mean, off)
        qo = shfl_xor(m2, off)
        n, mean, m2 = chan_merge(n, mean, m2, no, mo, qo)
        off //= 2
    if G > 32:
        t = cuda.threadIdx.x
        if t % 32 == 0:
            scr_n[t // 32] = n
            scr_m[t // 32] = mean
            scr_q[t // 32] = m2
        cuda.syncthreads()
        first = (t // G) * (G // 32)
        n = ZERO
        mean = ZERO
        m2 = ZERO
        for i in range(G // 32):
            n, mean, m2 = chan_merge(n, mean, m2, scr_n[first + i], scr_m[first + i], scr_q[first + i])
        cuda.syncthreads()
    return n, mean, m2


# --- rung 5 / 6 launch shapes ------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """Launch shape of the multi-row rungs: ``G`` threads per row, ``R`` rows per block,
    ``V`` elements per thread per loop trip."""

    G: int
    R: int
    V: int

    @property
    def block(self) -> int:
        return self.G * self.R


def check_shape(G: int, R: int, V: int) -> list[str]:
    bad = []
    if G < 1 or G & (G - 1) or G > 1024:
        bad.append(f"threads_per_row={G} must be a power of two <= 1024")
    if R < 1 or G * R > 1024:
        bad.append(f"rows_per_block={R}: threads_per_row * rows_per_block = {G * R} must be 1..1024")
    elif G < 32 and (G * R) % 32:
        bad.append(f"threads_per_row * rows_per_block = {G * R} must fill whole warps when threads_per_row < 32")
    if V < 1 or V > 16:
        bad.append(f"vec={V} must be 1..16")
    return bad


class MultiRowShape:
    """The launch-shape methods of the multi-row rungs (softmax, layernorm, rmsnorm and
    layernorm backward's rung 5, and the tuned rungs built on them): the rung's fields
    ``threads_per_row``, ``rows_per_block`` and ``vec`` as a :class:`Shape`, checked by
    :func:`check_shape`, and the compiled kernel's constants.  A tuned rung overrides ``shape``."""

    def shape(self, problem) -> Shape:
        return Shape(self.threads_per_row, self.rows_per_block, self.vec)

    def supports(self, problem):
        s = self.shape(problem)
        bad = check_shape(s.G, s.R, s.V)
        if bad:
            raise UnsupportedProblem(f"{self.name}: " + "; ".join(bad))

    def kernel_params(self, problem) -> tuple[int, int, int, int, int]:
        """(G, R, V, W, NC): the compiled kernel's constants."""
        s = self.shape(problem)
        W = vec_width(problem.cols, problem.dtype)
        return s.G, s.R, s.V, W, cached_chunks(problem.cols, s.G, W, s.block)


def static_shape(cols: int, V: int = 4) -> Shape:
    """The documented rule used when nothing can be timed: enough threads per row that each
    thread makes about 4 trips of ``V`` elements (so loads stay in flight without a long serial
    tail), at least a warp and at most 1024; then enough rows per block to make >= 128 threads,
    so blocks of narrow rows are not tiny (the SM's block-slot limit would cap occupancy)."""
    G = min(1024, max(32, next_pow2(-(-cols // (4 * V)))))
    R = max(1, 128 // G)
    return Shape(G, R, V)


def search_space(cols: int) -> list[Shape]:
    out = []
    for G in (32, 64, 128, 256, 512, 1024):
        for R in (1, 2, 4, 8):
            for V in (1, 2, 4, 8):
                if not check_shape(G, R, V) and G <= max(32, next_pow2(cols)):
                    out.append(Shape(G, R, V))
    return out


def search(make_variant: Callable[[Shape], object], cols: int,
           time_fn: Callable[[object], float] | None = None,
           candidates: list[Shape] | None = None, pick: Shape | None = None) -> list[tuple[object, float | None]]:
    """Rank launch shapes for rows of ``cols``: timed with ``time_fn(variant) -> seconds`` when
    given (on a GPU), else by closeness to ``pick`` (default :func:`static_shape`; the tuned
    rungs pass their rule, :func:`tuned_shape`), which comes first.
    Returns ``[(variant, seconds_or_None), ...]`` best first."""
    cands = candidates or search_space(cols)
    if time_fn is not None:
        timed = [(make_variant(s), float(time_fn(make_variant(s)))) for s in cands]
        return sorted(timed, key=lambda p: p[1])
    pick = pick or static_shape(cols)
    if pick not in cands and not check_shape(pick.G, pick.R, pick.V):
        cands = [pick] + list(cands)

    def dist(s: Shape) -> float:
        return (abs(math.log2(s.G / pick.G)) + abs(math.log2(s.R / pick.R)) + abs(math.log2(s.V / pick.V)))

    return [(make_variant(s), None) for s in sorted(cands, key=dist)]


def view(buf, shape: tuple[int, ...]):
    """``buf`` reshaped to ``shape`` (a C-contiguous view).  The host stand-ins that
    ``Variant.host_buffers`` makes for compiling a plan hold one element: they get the right
    rank instead, which is all a compilation needs."""
    n = int(np.prod(shape))
    if getattr(buf, "size", None) == n:
        return buf.reshape(shape)
    return buf.reshape((1,) * len(shape))


# --- register-cached rows (the multirow / tuned rungs) ----------------------------------------
#: floats of a row one thread may keep in registers between the statistics and the write: the
#: whole row when cols <= threads_per_row * CACHE_FLOATS, so x leaves DRAM exactly once.  32
#: floats are 32 of a thread's registers; at 1024 threads per block (64 registers each) only 24.
CACHE_FLOATS = 32


def cached_reg_cap(threads: int, cached: int) -> int:
    """Register cap of a kernel that keeps ``cached`` floats of its row per thread: 64 up to 16
    cached floats (four 256-thread blocks per SM: half occupancy; left alone, ptxas takes 55-70
    registers there and gets three), then 32 more than twice the cache, never over what the
    block may have."""
    return min(block_reg_cap(threads), max(64, 2 * int(cached) + 32))


def jit_cached(threads: int, cached: int):
    """``cuda.jit`` for a register-cached row kernel (see :func:`cached_reg_cap`)."""
    if backend.is_simulator():
        return cuda.jit
    cap = cached_reg_cap(threads, cached)
    return cuda.jit(max_registers=cap if cap < 255 else None)


def vec_width(cols: int, dtype: str) -> int:
    """Elements per vector load/store: the widest of 16/8/4/2 bytes that divides the row (so
    every row starts aligned): 4 floats (128 bits) or 8 halves (128 bits) when cols allows,
    else a half2 pair (32 bits), else scalars."""
    from ._vec import widths

    return next(w for w in widths(dtype) if cols % w == 0)


def cache_floats(block: int, arrays: int = 1) -> int:
    """Floats per thread per cached array (``arrays`` arrays share the budget)."""
    return max(1, min(CACHE_FLOATS, block_reg_cap(block) // 2 - 8) // arrays)


def cached_chunks(cols: int, G: int, W: int, block: int, arrays: int = 1) -> int:
    """W-element chunks per thread kept in registers: enough for the whole row when it fits in
    the cache, else as many as fit (the rest of the row is read twice)."""
    need = -(-cols // (G * W))
    return max(1, min(need, cache_floats(block, arrays) // W))


def cached_cols(cols: int, G: int, W: int, NC: int) -> int:
    """Columns of a row that stay in registers (the rest are swept twice)."""
    return min(cols, G * W * NC)


def tail_dram(rows: int, cols: int, dtype: str, uncached_cols: int, R: int, block: int) -> float:
    """DRAM bytes of the second read of the uncached tail of every row: none when the tails of
    the rows in flight fit on chip (they are re-read from L1/L2), the tails' bytes otherwise."""
    if uncached_cols <= 0:
        return 0.0
    it = np.dtype(dtype).itemsize
    tail = float(rows) * uncached_cols * it
    in_flight = min(rows, 132 * max(1, 2048 // int(block)) * R)  # an H100 full of these blocks
    return 0.0 if uncached_cols * it * in_flight <= ONCHIP_BYTES else tail


#: elements of its row each thread of the tuned rungs holds in registers (and has in flight at
#: once): what the fastest measured row kernel held (softmax ``tuned`` at 4096x4096 fp32 on the
#: H100: 256 threads x 16 floats, 60 us, 67 MB of DRAM reads, the one configuration that read x
#: once).  Held as float32 whatever the input dtype, so the same count for float16.
TUNED_ELEMS_PER_THREAD = 16
TUNED_MAX_G = 512  # 1024-thread rows lost where measured (softmax 16384: 535 us vs 371-423 us)
TUNED_BLOCK = 256


def tuned_shape(cols: int, dtype: str, arrays: int = 1) -> Shape:
    """The tuned rungs' launch shape, a rule (see each ``Tuned.what``): every thread holds about
    ``TUNED_ELEMS_PER_THREAD`` elements of its row (no more than the register cache takes for
    ``arrays`` cached arrays), so threads_per_row = next_pow2(cols / that), clamped to 32..512;
    rows per block fill 256 threads; 4 vector loads per trip for rows wider than the cache."""
    per = max(1, min(TUNED_ELEMS_PER_THREAD, cache_floats(TUNED_BLOCK, arrays)))
    G = min(TUNED_MAX_G, max(32, next_pow2(-(-cols // per))))
    return Shape(G, max(1, TUNED_BLOCK // G), 4)
