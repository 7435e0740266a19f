"""Careful GPU timing: ``measure(fn)``.

Why each piece is there:

* **Device events, not host clocks.**  A kernel launch returns to the host as soon as it is
  queued; a host clock around it measures the launch, not the kernel.  CUDA events are
  recorded on the stream and time what the GPU did between them.
* **Only GPU time inside the event window.**  An event is stamped when the GPU reaches it in
  the stream.  If the GPU is idle when the start event is recorded, it is stamped at once, and
  the window then also holds the host's time to launch ``fn``'s kernels (tens of microseconds
  through Numba with several array arguments): on the H100 that made an 80 us kernel read
  1.4x its time and an empty kernel "take" 26 us.  So each sample first queues a one-thread
  *spin kernel* that busy-waits on the GPU's ``%globaltimer`` for ``spin_s``, longer than the
  host needs to launch ``fn`` (measured during warm-up; grown if a sample shows the host was
  slower); the start event waits behind it, ``fn``'s launches queue up meanwhile, and the GPU
  runs them back to back once the spin ends.  The window [start, end] then holds: ``fn``'s
  kernels as the GPU runs them, the gaps between them that the GPU itself takes (a few
  microseconds per kernel, not the host's launch time), and nothing else.  This is NVBench's
  idea (its blocking kernel), with a fixed-length spin instead of a host-released flag.
  ``extra`` keeps the spin length and every sample's host enqueue time.  A sample where the
  host took longer than the spin is taken again, with a longer spin if it happens twice running
  (``extra["retaken_with_longer_spin"]`` counts them); only at the longest spin (``SPIN_MAX_S``) is such a
  sample kept, and counted in ``extra["host_exceeded_spin"]`` (it should be 0).
* **Warm-up by time budget.**  The first calls pay for JIT compilation, module loading, clock
  ramp-up and cold TLBs.  We call ``fn`` until ``warmup_s`` has passed (at least once on a GPU; in
  the simulator, which compiles nothing, not at all when ``warmup_s`` is 0).
* **L2 flush between samples** (``l2="cold"``, the default).  A kernel timed right after
  itself finds its inputs in L2 and flatters itself: we write a buffer of at least twice the
  device's L2 before every sample (outside the timed region).  ``l2="hot"`` skips the flush.
* **A stopping rule on noise.**  Samples are taken until there are at least ``min_samples``
  and ``min_time_s`` of them, then until the 95% confidence interval of the median (from order
  statistics, no normality assumed) is narrower than ``rel_ci`` of the median, or the wall-clock
  cap ``max_time_s`` or ``max_samples`` is reached.  ``stop_reason`` says which.  The cap is a
  hard bound: if it ends a run before ``min_samples``, ``stop_reason`` says so and a warning is
  raised.
* **Robust statistics.**  Median, IQR, min and CV are reported and the raw samples are kept.
* **Clocks and throttling.**  The SM clock and the throttle reasons are read through NVML
  before and after, where NVML is available, so a throttled run can be recognised.

In the simulator there is no device: ``fn`` is timed with the host clock and the result is
marked ``simulated=True``.  Such a number measures the Python simulator, not a GPU; nothing
downstream may plot it as speed.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from . import backend

__all__ = ["Measurement", "measure", "median_ci", "nvml_snapshot", "spin_length", "L2_MODES"]

L2_MODES = ("cold", "hot")


@dataclass
class Measurement:
    """The outcome of :func:`measure`: raw samples (seconds) and robust statistics."""

    samples: list[float]
    median_s: float
    iqr_s: float
    min_s: float
    mean_s: float
    cv: float
    ci_low_s: float
    ci_high_s: float
    stop_reason: str
    simulated: bool
    clock: str
    l2: str
    flush_bytes: int
    warmup_calls: int
    settings: dict
    nvml_before: dict | None = None
    nvml_after: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def rel_ci(self) -> float:
        return (self.ci_high_s - self.ci_low_s) / self.median_s if self.median_s > 0 else math.inf

    def as_dict(self) -> dict:
        d = asdict(self)
        d["n"] = self.n
        return d

    def __str__(self) -> str:
        tag = " [SIMULATED: host clock around the CPU simulator, not GPU speed]" if self.simulated else ""
        return (f"median {self.median_s * 1e6:.2f} us (IQR {self.iqr_s * 1e6:.2f} us, "
                f"min {self.min_s * 1e6:.2f} us, CV {self.cv:.1%}, n={self.n}, "
                f"l2={self.l2}, stop: {self.stop_reason}){tag}")


def median_ci(samples, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    The number of samples below the true median is Binomial(n, 1/2); with the normal
    approximation the interval runs from the j-th to the k-th order statistic with
    j, k = n/2 -/+ z * sqrt(n) / 2.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("median_ci of no samples")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    j = max(0, int(math.floor(n / 2 - z * math.sqrt(n) / 2)))
    k = min(n - 1, int(math.ceil(n / 2 + z * math.sqrt(n) / 2)))
    return float(x[j]), float(x[k])


# --- NVML: SM clock and throttle reasons ---------------------------------------------------
_THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


def nvml_snapshot() -> dict | None:
    """SM clock (MHz), temperature, power and active throttle reasons of the GPU in use,
    or None where NVML is unavailable (the simulator, no driver)."""
    if backend.is_simulator():
        return None
    try:
        import pynvml as nv

        nv.nvmlInit()
        from numba import cuda

        bus = cuda.get_current_device().PCI_BUS_ID
        handle = None
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            if nv.nvmlDeviceGetPciInfo(h).bus == bus:
                handle = h
                break
        handle = handle or nv.nvmlDeviceGetHandleByIndex(0)
        get_reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        bits = int(get_reasons(handle))
        return {
            "sm_clock_mhz": nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM),
            "max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM),
            "temperature_c": nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU),
            "power_w": nv.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "throttle_bits": bits,
            "throttle_reasons": [name for bit, name in _THROTTLE_BITS.items() if bits & bit],
        }
    except Exception as exc:  # NVML missing or refused: timing goes on without it
        return {"error": f"{exc.__class__.__name__}: {exc}"}


# --- the spin kernel that hides the host's launch time ---------------------------------------
#: shortest and longest spin (seconds) ahead of a timed sample, and the margin over the
#: host's enqueue time (spin = max(SPIN_MIN_S, SPIN_FACTOR * host + SPIN_MARGIN_S), at most SPIN_MAX_S)
SPIN_MIN_S, SPIN_MAX_S, SPIN_FACTOR, SPIN_MARGIN_S = 20e-6, 20e-3, 2.0, 10e-6


def spin_length(host_enqueue_s) -> float:
    """Seconds the GPU should spin ahead of a sample whose host enqueue takes ``host_enqueue_s``
    (the largest of a few observations): comfortably longer, within [SPIN_MIN_S, SPIN_MAX_S]."""
    h = max((float(x) for x in np.atleast_1d(host_enqueue_s)), default=0.0)
    if not math.isfinite(h) or h < 0:
        h = SPIN_MAX_S
    return float(min(SPIN_MAX_S, max(SPIN_MIN_S, SPIN_FACTOR * h + SPIN_MARGIN_S)))


_spin_cache: list = []


def _spin_kernel():
    """A one-thread kernel that busy-waits ``ns`` nanoseconds of the GPU's global timer."""
    if _spin_cache:
        return _spin_cache[0]
    from llvmlite import ir
    from numba import cuda, types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def globaltimer(typingctx):
        """The GPU's nanosecond timer (``%globaltimer``), read with a side effect so no read
        is hoisted out of the loop."""
        sig = types.uint64()

        def codegen(context, builder, signature, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(64), []), "mov.u64 $0, %globaltimer;", "=l",
                               side_effect=True)
            return builder.call(asm, [])

        return sig, codegen

    @cuda.jit
    def spin(ns):
        t0 = globaltimer()
        while globaltimer() - t0 < ns:
            pass

    _spin_cache.append(spin)
    return spin


# --- the L2 flush --------------------------------------------------------------------------
_flush_cache: dict = {}


#: the cold-L2 flush writes max(FLUSH_FACTOR x L2, FLUSH_MIN_BYTES) bytes (flush_factor's default)
FLUSH_FACTOR, FLUSH_MIN_BYTES = 2, 8 << 20


def flush_bytes_for(l2_bytes, factor: int = FLUSH_FACTOR, minimum: int = FLUSH_MIN_BYTES) -> int:
    """Bytes the cold-L2 flush writes on a device with ``l2_bytes`` of L2."""
    return max(factor * int(l2_bytes or 0), minimum)


def _flusher(l2_bytes: int, factor: int = FLUSH_FACTOR, minimum: int = FLUSH_MIN_BYTES):
    """A callable that writes a buffer of max(factor * L2, minimum) bytes on the device."""
    nbytes = flush_bytes_for(l2_bytes, factor, minimum)
    if nbytes in _flush_cache:
        return _flush_cache[nbytes], nbytes
    from numba import cuda

    @cuda.jit
    def _touch(buf, value):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < buf.size:
            buf[i] = value
            i += stride

    buf = cuda.device_array(nbytes // 4, dtype=np.int32)
    counter = [0]

    def flush():
        counter[0] += 1  # a new value each time so no write can be elided
        _touch[1024, 256](buf, np.int32(counter[0]))

    _flush_cache[nbytes] = flush
    return flush, nbytes


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _check_args(l2, warmup_s, min_samples, max_samples, min_time_s, max_time_s, rel_ci, confidence,
                flush_factor):
    if l2 not in L2_MODES:
        raise ValueError(f"l2 must be one of {L2_MODES}, got {l2!r}")
    for name, v in (("min_samples", min_samples), ("max_samples", max_samples), ("flush_factor", flush_factor)):
        if not _is_int(v):
            raise TypeError(f"{name} must be an integer, got {v!r}")
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError(f"need 1 <= min_samples <= max_samples, got {min_samples}, {max_samples}")
    for name, v in (("warmup_s", warmup_s), ("min_time_s", min_time_s), ("max_time_s", max_time_s),
                    ("rel_ci", rel_ci), ("confidence", confidence)):
        if not _is_real(v):
            raise TypeError(f"{name} must be a number, got {v!r}")
    for name, v in (("warmup_s", warmup_s), ("min_time_s", min_time_s)):
        if not 0 <= v < math.inf:
            raise ValueError(f"{name} must be finite and >= 0, got {v}")
    if not max_time_s >= 0:  # inf: no wall-clock cap
        raise ValueError(f"max_time_s must be >= 0, got {max_time_s}")
    if min_time_s > max_time_s:
        raise ValueError(f"min_time_s ({min_time_s}) must not exceed max_time_s ({max_time_s})")
    if not 0 < rel_ci:
        raise ValueError(f"rel_ci must be > 0, got {rel_ci}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if flush_factor < 2:
        raise ValueError(f"flush_factor must be >= 2 (the flush buffer is at least twice the L2), "
                         f"got {flush_factor}")


#: Defaults of :func:`measure` on a GPU and in the simulator (where one kernel takes seconds
#: and its time means nothing, so a couple of samples suffice).
DEFAULTS = {
    "gpu": dict(warmup_s=0.05, min_samples=10, max_samples=2000, min_time_s=0.05, max_time_s=2.0),
    "sim": dict(warmup_s=0.0, min_samples=1, max_samples=3, min_time_s=0.0, max_time_s=0.5),
}


def measure(fn: Callable[[], None], *, l2: str = "cold", warmup_s: float | None = None,
            min_samples: int | None = None, max_samples: int | None = None,
            min_time_s: float | None = None, max_time_s: float | None = None,
            rel_ci: float = 0.02, confidence: float = 0.95, flush_factor: int = 2,
            sync: Callable[[], None] | None = None) -> Measurement:
    """Time ``fn()`` (which enqueues GPU work) and return a :class:`Measurement`.

    ``fn`` must be repeatable: every call does the same work.  See the module docstring for
    the method; all its knobs are keyword arguments and are stored in ``settings``.  Knobs left
    as None take :data:`DEFAULTS` for the backend in use.

    **What one sample's event window holds** (on a GPU): per sample, the L2 flush (``l2="cold"``)
    and a spin kernel of ``extra["spin_s"]`` seconds are queued first, outside the window; then
    the start event, ``fn()``, the end event.  Because the GPU is still spinning while the host
    launches ``fn``'s kernels, the window holds only what the GPU does for ``fn``: its kernels
    and the GPU's own gaps between them, not the host's launch time (see the module docstring).
    A sample whose host enqueue outlasted the spin is taken again with a longer spin.  ``samples`` are the raw windows, in seconds;
    ``extra["host_enqueue_s"]`` the host's time per sample to enqueue ``fn`` (and the events).
    ``fn`` must not synchronise the device itself (that would wait out the spin).

    In the simulator there are no events: a sample is the host clock around ``fn(); sync()``.
    """
    if not callable(fn):
        raise TypeError(f"measure() needs a callable, got {type(fn).__name__}")
    sim = backend.is_simulator()
    given = dict(warmup_s=warmup_s, min_samples=min_samples, max_samples=max_samples,
                 min_time_s=min_time_s, max_time_s=max_time_s)
    d = {k: (DEFAULTS["sim" if sim else "gpu"][k] if v is None else v) for k, v in given.items()}
    # a default never conflicts with an explicit value: it gives way (only two explicit values
    # that contradict each other are an error)
    for lo, hi in (("min_samples", "max_samples"), ("min_time_s", "max_time_s")):
        if _is_real(d[lo]) and _is_real(d[hi]):
            if given[hi] is None and given[lo] is not None:
                d[hi] = max(d[hi], d[lo])
            elif given[lo] is None and given[hi] is not None and d[hi] >= 0:
                d[lo] = min(d[lo], d[hi])
    warmup_s, min_samples, max_samples, min_time_s, max_time_s = (
        d["warmup_s"], d["min_samples"], d["max_samples"], d["min_time_s"], d["max_time_s"])
    _check_args(l2, warmup_s, min_samples, max_samples, min_time_s, max_time_s, rel_ci, confidence,
                flush_factor)
    settings = dict(l2=l2, warmup_s=warmup_s, min_samples=min_samples, max_samples=max_samples,
                    min_time_s=min_time_s, max_time_s=max_time_s, rel_ci=rel_ci,
                    confidence=confidence, flush_factor=flush_factor)
    if sim:
        flush, flush_bytes = (lambda: None), 0
        sync = sync or (lambda: None)
        clock = "host perf_counter (simulator)"
    else:
        from numba import cuda

        sync = sync or cuda.synchronize
        dev = backend.device()
        flush, flush_bytes = _flusher(dev.l2_bytes, flush_factor) if l2 == "cold" else ((lambda: None), 0)
        start_ev, end_ev = cuda.event(timing=True), cuda.event(timing=True)
        clock = "cuda events"

    host_enqueue: list[float] = []
    spin = {"s": 0.0, "exceeded": 0, "retaken": 0, "misses": 0, "history": []}

    def one_sample() -> float:
        flush()
        if sim:
            t0 = time.perf_counter()
            fn()
            sync()
            return time.perf_counter() - t0
        launch_spin(np.uint64(int(spin["s"] * 1e9)))  # the GPU is busy while the host launches
        t0 = time.perf_counter()
        start_ev.record()
        fn()
        end_ev.record()
        t_host = time.perf_counter() - t0
        end_ev.synchronize()
        host_enqueue.append(t_host)
        if t_host > spin["s"]:  # the host outlasted the spin: this window may hold launch time
            if spin["s"] < SPIN_MAX_S:  # take the sample again (with a longer spin if it happens twice
                spin["retaken"] += 1      # running: one slow host moment, a GC pause, is no reason)
                spin["misses"] += 1
                if spin["misses"] >= 2:
                    spin["s"] = spin_length(t_host)
                    spin["history"].append(spin["s"])
                return None
            spin["exceeded"] += 1  # at the longest spin: kept, and counted
        spin["misses"] = 0
        return cuda.event_elapsed_time(start_ev, end_ev) / 1e3

    before = nvml_snapshot()
    # warm-up: at least one call on a GPU (the first launch compiles, the clocks ramp), then until
    # the budget is spent; the simulator compiles nothing, so with no budget it takes none (a
    # simulated call of a big block costs seconds: a rehearsal's unit ran each rung three times)
    t_start = time.perf_counter()
    warm = 0
    while not (sim and warmup_s <= 0):
        flush()
        fn()
        sync()
        warm += 1
        if time.perf_counter() - t_start >= warmup_s:
            break
    if not sim:  # the host's enqueue time of fn (after the warm-up, so no compile in it) sets the spin
        with warnings.catch_warnings():  # one thread is the point: no low-occupancy warning
            warnings.simplefilter("ignore")
            launch_spin = _spin_kernel()[1, 1]
        launch_spin(np.uint64(0))
        probes = []
        for _ in range(3):
            sync()
            t0 = time.perf_counter()
            fn()
            probes.append(time.perf_counter() - t0)
        sync()
        spin["s"] = spin_length(probes)
        spin["history"].append(spin["s"])

    samples: list[float] = []
    t0 = time.perf_counter()
    reason = "max_samples"
    while len(samples) < max_samples:
        sample = one_sample()
        elapsed = time.perf_counter() - t0
        if sample is None:  # retaken with a longer spin, unless the cap says stop
            if elapsed >= max_time_s and samples:
                reason = "max_time_s (wall-clock cap)"
                break
            continue
        samples.append(sample)
        if elapsed >= max_time_s:
            reason = "max_time_s (wall-clock cap)"
            if len(samples) < min_samples:  # the cap is a hard bound; say what it cost
                reason += f" before min_samples ({len(samples)} of {min_samples})"
                warnings.warn(f"measure(): the wall-clock cap max_time_s={max_time_s:g} s ended the run "
                              f"after {len(samples)} of min_samples={min_samples} samples; raise "
                              "max_time_s for a slow kernel", RuntimeWarning, stacklevel=2)
            break
        # the CI of a median needs a few samples before it means anything
        if len(samples) >= max(min_samples, 3) and sum(samples) >= min_time_s:
            lo, hi = median_ci(samples, confidence)
            med = float(np.median(samples))
            if hi == lo or (med > 0 and (hi - lo) / med < rel_ci):  # a point interval: converged
                reason = f"ci < {rel_ci:g} of median"
                break
    after = nvml_snapshot()

    x = np.asarray(samples)
    med = float(np.median(x))
    q1, q3 = np.percentile(x, [25, 75])
    lo, hi = median_ci(x, confidence)
    mean = float(x.mean())
    return Measurement(
        samples=[float(s) for s in x], median_s=med, iqr_s=float(q3 - q1), min_s=float(x.min()),
        mean_s=mean, cv=float(x.std(ddof=1) / mean) if x.size > 1 and mean > 0 else 0.0,
        ci_low_s=lo, ci_high_s=hi, stop_reason=reason, simulated=sim, clock=clock, l2=l2,
        flush_bytes=int(flush_bytes), warmup_calls=warm, settings=settings,
        nvml_before=before, nvml_after=after,
        extra={} if sim else {
            "window": "spin kernel, then [start event, fn(), end event]: GPU time of fn only",
            "spin_s": spin["s"], "spin_history_s": spin["history"], "host_enqueue_s": host_enqueue,
            "retaken_with_longer_spin": spin["retaken"], "host_exceeded_spin": spin["exceeded"]},
    )
