"""The two shapes every op shares: :class:`Problem` (one operation at one shape and dtype) and
:class:`Variant` (one rung of a ladder).

The contract every op keeps::

    problem = op.Problem(...)                  # rejects bad shapes and dtypes: ProblemError
    inputs = problem.make_inputs(seed)         # dict of C-contiguous NumPy arrays
    ref = problem.reference(inputs)            # NumPy, computed in float64
    out = op.LADDER[i].run(problem, inputs)    # NumPy array (a dict if the op has several outputs)
    problem.flops, problem.bytes               # the minimal work
    problem.check(out, ref)                    # CheckResult: tolerance by dtype, NaN never passes

``op.LADDER[0]`` is the oracle (cuBLAS / a vendor library through CuPy on a GPU, NumPy on the
host in the simulator).  Both classes are frozen dataclasses so that a Problem and a Variant
can be rebuilt from their fields in another process (the anatomy compiler does this).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np


__all__ = [
    "ProblemError", "UnsupportedProblem", "CheckResult", "Problem", "Launch", "Variant",
    "OracleVariant", "Prepared", "TOLERANCES", "as_outputs", "rng", "TunableVariant", "check_launch_shape",
    "MAX_THREADS_PER_BLOCK", "MAX_STATIC_SHARED", "MAX_GRID", "Traffic", "Peer",
]

#: what any CUDA GPU launches (CUDA C++ Programming Guide, "Technical Specifications per Compute
#: Capability"): threads per block, static shared memory per block (more needs dynamic shared
#: memory and an opt-in, which Numba never makes), blocks along grid.x, grid.y, grid.z
MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SHARED = 48 * 1024
MAX_GRID = (2**31 - 1, 65535, 65535)

@dataclass(frozen=True)
class Traffic:
    """Work a kernel does for one problem.  Bytes are totals over the whole launch.

    ``dram_bytes`` is what must cross the DRAM interface, ``l2_bytes`` what the SMs request
    from L2 (loads that miss L1, and stores: L1 writes through, a 32-byte sector for each sector
    a warp's store touches), ``l1_bytes`` what the threads' global instructions ask of L1 in
    32-byte sectors before any hit (default: ``l2_bytes``; larger where L1 catches re-reads),
    ``smem_bytes`` shared-memory traffic.  ``None`` means the model does not say.  ``limiter``
    is the resource the rung's author expects to bind.

    Optional per-level counts (all default ``None``: :func:`estimate` then derives them from the
    compiled kernel): ``smem_wavefronts`` (shared-memory wavefronts, bank-conflict replays
    included), ``smem_conflicts`` (the replays alone), ``local_bytes`` (local-memory traffic:
    spills and local arrays), ``warp_instructions`` and ``ffma`` (thread-level FFMA count).
    """

    flops: float
    dram_bytes: float
    l2_bytes: float | None = None
    smem_bytes: float | None = None
    limiter: str | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict)
    smem_wavefronts: float | None = None
    smem_conflicts: float | None = None
    local_bytes: float | None = None
    warp_instructions: float | None = None
    ffma: float | None = None
    l1_bytes: float | None = None

    @property
    def intensity(self) -> float:
        """Arithmetic intensity against DRAM, FLOP/byte."""
        return self.flops / self.dram_bytes if self.dram_bytes else float("inf")

    def as_dict(self) -> dict:
        return asdict(self)



#: (rtol, atol) by output dtype, for a result that is O(1); ops scale them (e.g. GEMM by sqrt(k)).
TOLERANCES = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (5e-3, 5e-3),
}


class ProblemError(ValueError):
    """A problem or its inputs are not valid: wrong dtype, shape, layout, or empty."""


class UnsupportedProblem(ValueError):
    """A rung cannot run this (valid) problem, e.g. a tile constraint is not met."""


def rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)


def as_outputs(x: Any, names: list[str]) -> dict[str, np.ndarray]:
    """Normalise a result (one array or a dict of arrays) to a dict keyed by output name."""
    if isinstance(x, dict):
        missing = [n for n in names if n not in x]
        if missing:
            raise ProblemError(f"result lacks outputs {missing}; expected {names}")
        return {n: np.asarray(x[n]) for n in names}
    if len(names) != 1:
        raise ProblemError(f"expected a dict with outputs {names}, got {type(x).__name__}")
    return {names[0]: np.asarray(x)}


@dataclass(frozen=True)
class CheckResult:
    """Outcome of comparing a rung's output with the float64 reference."""

    ok: bool
    max_abs_err: float
    max_rel_err: float
    n_bad: int
    n_nan: int
    rtol: float
    atol: float
    message: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def __bool__(self) -> bool:
        return self.ok


def _canon_dtype(dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError as exc:
        raise ProblemError(f"unknown dtype {dtype!r}") from exc


@dataclass(frozen=True)
class Problem:
    """One operation at one shape and dtype.  Subclasses are frozen dataclasses that define:

    * ``op`` (class attribute): the op's name, e.g. ``"copy"``, ``"gemm"``;
    * ``dtypes`` (class attribute): the input dtypes the op accepts;
    * :meth:`input_specs` and :meth:`output_specs`: ``{name: (shape, dtype)}``;
    * :meth:`_make` (seeded inputs) and :meth:`_reference` (float64 NumPy);
    * :attr:`flops`.  :attr:`bytes` defaults to reading every input and writing every output once.
    """

    op: ClassVar[str] = "abstract"
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)

    def __post_init__(self) -> None:
        if hasattr(self, "dtype"):
            canon = _canon_dtype(self.dtype)
            if canon not in self.dtypes:
                raise ProblemError(
                    f"{self.op}: dtype {self.dtype!r} is not supported; allowed: {', '.join(self.dtypes)}"
                )
            object.__setattr__(self, "dtype", canon)
        self.validate()

    # --- to be defined by each op -------------------------------------------------------
    def validate(self) -> None:
        """Raise ProblemError naming what is wrong with the parameters."""

    def input_specs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        raise NotImplementedError

    def output_specs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        raise NotImplementedError

    def _make(self, g: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _reference(self, inputs: dict[str, np.ndarray]) -> Any:
        raise NotImplementedError

    @property
    def flops(self) -> float:
        raise NotImplementedError

    # --- shared behaviour ---------------------------------------------------------------
    @property
    def bytes(self) -> float:
        """Minimal DRAM traffic: every input read once, every output written once."""
        specs = list(self.input_specs().values()) + list(self.output_specs().values())
        return float(sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in specs))

    @property
    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items())

    def make_inputs(self, seed: int | None = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs as C-contiguous NumPy arrays of the problem's dtypes."""
        inputs = self._make(rng(seed))
        self.check_inputs(inputs)
        return inputs

    def check_inputs(self, inputs: dict[str, np.ndarray]) -> None:
        """Raise ProblemError if inputs do not match the specs (names, shape, dtype, layout)."""
        if not isinstance(inputs, dict):
            raise ProblemError(f"{self.op}: inputs must be a dict of arrays, got {type(inputs).__name__}")
        specs = self.input_specs()
        missing = sorted(set(specs) - set(inputs))
        extra = sorted(set(inputs) - set(specs))
        if missing or extra:
            raise ProblemError(f"{self.op}: inputs must be {sorted(specs)}; missing {missing}, unexpected {extra}")
        for name, (shape, dtype) in specs.items():
            a = inputs[name]
            if not isinstance(a, np.ndarray):
                raise ProblemError(f"{self.op}: input {name!r} must be a NumPy array, got {type(a).__name__}")
            if a.dtype != np.dtype(dtype):
                raise ProblemError(f"{self.op}: input {name!r} has dtype {a.dtype}, expected {dtype}")
            if tuple(a.shape) != tuple(shape):
                raise ProblemError(f"{self.op}: input {name!r} has shape {a.shape}, expected {tuple(shape)}")
            if not a.flags.c_contiguous:
                raise ProblemError(
                    f"{self.op}: input {name!r} is not C-contiguous (strides {a.strides}); "
                    "pass np.ascontiguousarray(x)"
                )

    def reference(self, inputs: dict[str, np.ndarray]) -> Any:
        """The result computed independently in float64 NumPy."""
        self.check_inputs(inputs)
        return self._reference(inputs)

    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol) for comparing with the reference; ops may scale with reduction length."""
        specs = list(self.input_specs().values()) + list(self.output_specs().values())
        floats = [np.dtype(d) for _, d in specs if np.issubdtype(np.dtype(d), np.floating)]
        least = min(floats, key=lambda d: d.itemsize)  # the least precise float sets the bar
        return TOLERANCES[least.name]

    def check(self, out: Any, ref: Any | None = None, inputs: dict | None = None) -> CheckResult:
        """Compare ``out`` with ``ref`` (or the reference of ``inputs``).

        Passes when every element satisfies ``|out - ref| <= atol + rtol * |ref|`` and ``out`` is
        NaN exactly where ``ref`` is NaN (infinities must match too).  A NaN where the reference
        is finite never passes, so an unwritten element of a NaN-poisoned output shows, and its
        error is infinite.  An output whose dtype is not the problem's fails (float64, the
        reference's precision, is accepted).
        """
        if ref is None:
            if inputs is None:
                raise ValueError("check() needs ref or inputs")
            ref = self.reference(inputs)
        specs = self.output_specs()
        names = list(specs)
        outs, refs = as_outputs(out, names), as_outputs(ref, names)
        rtol, atol = self.tolerance()
        for name in names:  # a rung returns the problem's dtype (float64: a reference, accepted)
            want, got = np.dtype(specs[name][1]), outs[name].dtype
            if got != want and got != np.float64:
                return CheckResult(False, np.inf, np.inf, int(outs[name].size), 0, rtol, atol,
                                   f"{name}: dtype {got}, expected {want}")
        worst_abs = worst_rel = 0.0
        n_bad = n_nan = 0
        msgs = []
        for name in names:
            o = np.asarray(outs[name], dtype=np.float64)
            r = np.asarray(refs[name], dtype=np.float64)
            if o.shape != r.shape:
                return CheckResult(False, np.inf, np.inf, int(r.size), 0, rtol, atol,
                                   f"{name}: shape {o.shape} != reference {r.shape}")
            r_nan, o_nan = np.isnan(r), np.isnan(o)
            nan_bad = o_nan != r_nan
            both_inf = np.isinf(r) & (o == r)
            finite = ~r_nan & ~o_nan & ~both_inf
            err = np.zeros_like(r)
            with np.errstate(invalid="ignore", over="ignore"):
                err[finite] = np.abs(o[finite] - r[finite])
                bad = nan_bad | (finite & ~(err <= atol + rtol * np.abs(r)))
                rel = err[finite] / np.maximum(np.abs(r[finite]), atol)
            n_nan += int((o_nan & ~r_nan).sum())
            n_bad += int(bad.sum())
            if nan_bad.any():  # a NaN where a number belongs (or the reverse): unbounded error
                worst_abs = worst_rel = np.inf
            elif err.size:
                worst_abs = max(worst_abs, float(err[finite].max(initial=0.0)))
                worst_rel = max(worst_rel, float(rel.max(initial=0.0)))
            if bad.any():
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                msgs.append(f"{name}: {int(bad.sum())}/{bad.size} elements off, first at {idx}: "
                            f"got {float(o[idx])!r}, expected {float(r[idx])!r}")
        ok = n_bad == 0
        return CheckResult(ok, worst_abs, worst_rel, n_bad, n_nan, rtol, atol,
                           "ok" if ok else "; ".join(msgs))


@dataclass(frozen=True)
class Launch:
    """One kernel launch: ``kernel[grid, block, 0, shared_bytes](*args)``."""

    kernel: Any
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple
    shared_bytes: int = 0  # dynamic shared memory, bytes

    def __post_init__(self):
        object.__setattr__(self, "grid", _dim3(self.grid, "grid"))
        object.__setattr__(self, "block", _dim3(self.block, "block"))

    @property
    def name(self) -> str:
        fn = getattr(self.kernel, "py_func", None) or getattr(self.kernel, "fn", None)
        return getattr(fn, "__name__", repr(self.kernel))

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    def __call__(self) -> None:
        self.kernel[self.grid, self.block, 0, self.shared_bytes](*self.args)


def _dim3(d, what: str) -> tuple[int, ...]:
    t = (int(d),) if np.isscalar(d) else tuple(int(x) for x in d)
    if not 1 <= len(t) <= 3 or any(x < 1 for x in t):
        raise ValueError(f"launch {what} must be 1 to 3 positive ints, got {d!r}")
    return t


class Prepared:
    """A rung bound to device-resident inputs and (NaN-poisoned) outputs, ready to be timed.

    ``prepared()`` enqueues the work (asynchronously on a GPU); ``prepared.output()`` waits for
    it and copies the outputs back as NumPy arrays (a single array if the op has one output).
    """

    def __init__(self, launch: Callable[[], None], fetch: Callable[[], dict], names: list[str],
                 sync: Callable[[], None] | None = None, launches: list[Launch] | None = None):
        self._launch, self._fetch, self._names = launch, fetch, names
        self._sync = sync or (lambda: None)
        self.launches = launches or []

    def __call__(self) -> None:
        self._launch()

    def synchronize(self) -> None:
        self._sync()

    def output(self):
        self._sync()
        outs = self._fetch()
        return outs[self._names[0]] if len(self._names) == 1 else outs


def check_launch_shape(who: str, grid, block, static_shared: int = 0, problem_label: str = "") -> None:
    """Raise UnsupportedProblem for a launch no GPU can run: more than 1024 threads or 48 KiB of
    static shared memory per block, or more blocks than the grid allows along an axis (2**31 - 1
    along x, 65535 along y and z).  Arithmetic on the plan's shape only: no compile, no GPU."""
    grid = (int(grid),) if np.isscalar(grid) else tuple(int(g) for g in grid)
    block = (int(block),) if np.isscalar(block) else tuple(int(b) for b in block)
    threads = int(np.prod(block))
    if threads > MAX_THREADS_PER_BLOCK:
        raise UnsupportedProblem(f"{who}: {threads} threads per block (block {'x'.join(map(str, block))}) "
                                 f"> {MAX_THREADS_PER_BLOCK}, the most a block can have")
    if static_shared > MAX_STATIC_SHARED:
        raise UnsupportedProblem(f"{who}: {static_shared} bytes of static shared memory per block "
                                 f"> {MAX_STATIC_SHARED} (48 KiB), the static limit")
    for axis, blocks, most in zip("xyz", grid, MAX_GRID):
        if blocks > most:
            raise UnsupportedProblem(f"{who}: grid.{axis} = {blocks} blocks"
                                     f"{' for ' + problem_label if problem_label else ''} > {most}, "
                                     f"the most grid.{axis} can have")


@dataclass(frozen=True)
class Variant:
    """One rung of a ladder.  Subclasses are frozen dataclasses whose fields are the rung's
    tunable parameters (so ``type(v)(**v.config)`` rebuilds it, in any process) and define:

    * ``rung``, ``name``, ``what`` (class attributes): number, short name, "what changed and why";
    * :meth:`plan`: the launches for a problem, given buffers by name (device arrays when run,
      host stand-ins of the right dtype and rank when compiled for inspection);
    * :meth:`traffic`: the rung's analytical model of its own work;
    * optionally :meth:`supports` (tile constraints, raising UnsupportedProblem) and
      :meth:`workspace` (temporaries beyond the outputs).
    """

    rung: ClassVar[int] = -1
    name: ClassVar[str] = "abstract"
    what: ClassVar[str] = ""
    oracle: ClassVar[bool] = False

    # --- to be defined by each rung -----------------------------------------------------
    def plan(self, problem: Problem, bufs: dict) -> list[Launch]:
        raise NotImplementedError

    def traffic(self, problem: Problem) -> Traffic:
        return Traffic(flops=problem.flops, dram_bytes=problem.bytes, limiter="unknown")

    def supports(self, problem: Problem) -> None:
        """Raise UnsupportedProblem naming the constraint this problem breaks."""

    def workspace(self, problem: Problem) -> dict[str, tuple[tuple[int, ...], str]]:
        return {}

    def example(self, problem: Problem) -> Problem:
        """The problem to show this rung on, given the op's example (a rung that needs, say,
        float16 inputs returns the float16 twin)."""
        return problem

    # --- shared behaviour ---------------------------------------------------------------
    @property
    def config(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def label(self) -> str:
        return f"{self.rung:02d} {self.name}"

    def __str__(self) -> str:
        return self.label

    def prepare(self, problem: Problem, inputs: dict[str, np.ndarray]) -> Prepared:
        """Move inputs to the device and allocate NaN-poisoned outputs and workspace."""
        from numba import cuda

        problem.check_inputs(inputs)
        self.supports(problem)
        bufs: dict[str, Any] = {k: cuda.to_device(v) for k, v in inputs.items()}
        outs = problem.output_specs()
        for name, (shape, dtype) in {**outs, **self.workspace(problem)}.items():
            bufs[name] = cuda.to_device(np.full(shape, np.nan, dtype=dtype))
        launches = self.plan(problem, bufs)

        def launch() -> None:
            for l in launches:
                l()

        def fetch() -> dict:
            return {n: bufs[n].copy_to_host() for n in outs}

        return Prepared(launch, fetch, list(outs), sync=cuda.synchronize, launches=launches)

    def run(self, problem: Problem, inputs: dict[str, np.ndarray]):
        """Run once and return the output as NumPy (a dict if the op has several outputs)."""
        p = self.prepare(problem, inputs)
        p()
        return p.output()

    def host_buffers(self, problem: Problem) -> dict[str, np.ndarray]:
        """Tiny host arrays with the dtype and rank of every buffer, for compiling a plan."""
        specs = {**problem.input_specs(), **problem.output_specs(), **self.workspace(problem)}
        return {n: np.zeros((1,) * len(s), dtype=d) for n, (s, d) in specs.items()}


@dataclass(frozen=True)
class TunableVariant(Variant):
    """A rung whose fields are sizes and counts (block, tile, unroll): each must be an int >= 1,
    checked when the rung is built, so that no 0 reaches a division or a shared-array shape."""

    def __post_init__(self) -> None:
        for name, value in self.config.items():
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise UnsupportedProblem(f"{self.label}: {name} must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class OracleVariant(Variant):
    """Rung 0: the vendor library (through CuPy or PyTorch) on a GPU; NumPy on the host in
    the simulator.  Subclasses define :meth:`gpu` (CuPy inputs -> outputs, written into the
    given CuPy output arrays, or returned as a dict of arrays or tensors the library allocated,
    so that no copy of ours is timed with the library's kernel) and :meth:`host` (NumPy inputs
    -> outputs in the problem's dtype).
    """

    rung: ClassVar[int] = 0
    oracle: ClassVar[bool] = True

    def gpu(self, problem: Problem, x: dict, out: dict) -> None:
        raise NotImplementedError

    def host(self, problem: Problem, x: dict) -> dict:
        raise NotImplementedError

    def prepare(self, problem: Problem, inputs: dict[str, np.ndarray]) -> Prepared:
        from .. import backend

        problem.check_inputs(inputs)
        outs = problem.output_specs()
        if backend.is_simulator():
            result: dict = {}

            def launch() -> None:
                result.update(as_outputs(self.host(problem, inputs), list(outs)))

            return Prepared(launch, lambda: dict(result), list(outs))
        import cupy as cp

        x = {k: cp.asarray(v) for k, v in inputs.items()}
        o = {n: cp.full(s, np.nan, dtype=d) for n, (s, d) in outs.items()}
        held: dict = {}  # outputs the library allocated itself (returned by gpu(), not copied)

        def launch() -> None:
            res = self.gpu(problem, x, o)
            if res:
                held.update(res)

        def fetch() -> dict:
            got = {}
            for n, (shape, dtype) in outs.items():
                a = held.get(n, o[n])
                a = a.detach().cpu().numpy() if hasattr(a, "detach") else cp.asnumpy(a)  # torch or CuPy
                got[n] = np.ascontiguousarray(a.reshape(shape), dtype=dtype)
            return got

        return Prepared(launch, fetch, list(outs), sync=cp.cuda.get_current_stream().synchronize)

    def plan(self, problem: Problem, bufs: dict) -> list[Launch]:
        return []  # a library call: nothing of ours to compile or inspect


def registry_check(ladder: list[Variant]) -> None:
    """Rung numbers are 0..n-1 in order, names unique, and rung 0 is the oracle."""
    if not ladder or not ladder[0].oracle:
        raise AssertionError("rung 0 of a ladder must be the oracle")
    for i, v in enumerate(ladder):
        if v.rung != i:
            raise AssertionError(f"ladder position {i} holds rung {v.rung} ({v.name})")
    names = [v.name for v in ladder]
    if len(set(names)) != len(names):
        raise AssertionError(f"rung names repeat: {names}")


@dataclass(frozen=True)
class Peer(OracleVariant):
    """A library kernel timed beside the ladder.  Subclasses define ``gpu`` and ``library``."""

    rung: ClassVar[int] = -1
    oracle: ClassVar[bool] = False
    library: ClassVar[str] = ""
    ops: ClassVar[tuple[str, ...]] = ()

    @property
    def label(self) -> str:
        return f"peer {self.name}"

    def supports(self, problem: Problem) -> None:
        from .. import backend

        if problem.op not in self.ops:
            raise UnsupportedProblem(f"{self.name}: a peer for {', '.join(self.ops)}, not {problem.op}")
        if backend.is_simulator():
            raise UnsupportedProblem(f"{self.name}: a GPU-only peer ({self.library} does not run in "
                                     "Numba's CUDA simulator)")
        for lib in ("torch", self.library):
            try:
                importlib.import_module(lib)
            except ImportError as exc:
                raise UnsupportedProblem(f"{self.name}: {lib} is not installed ({exc})") from exc

    def host(self, problem, x):
        self.supports(problem)  # raises: a peer has no host path
        raise UnsupportedProblem(f"{self.name} has no host path")

    def prepare(self, problem, inputs):
        self.supports(problem)
        return super().prepare(problem, inputs)
