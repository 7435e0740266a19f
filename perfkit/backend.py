"""GPU or Numba's CUDA simulator, chosen once, before ``numba.cuda`` is first imported.

Numba reads ``NUMBA_ENABLE_CUDASIM`` when ``numba.cuda`` is first imported; setting it later
has no effect.  ``import perfkit`` therefore decides here, first thing:

* ``PERFKIT_BACKEND=gpu`` forces the real GPU (and raises :class:`BackendError` if none is
  usable), ``PERFKIT_BACKEND=sim`` forces the simulator, unset or ``auto`` probes the driver.
* ``PERFKIT_BACKEND=compile`` is for the anatomy tool's compiler process: the real
  ``numba.cuda`` (which compiles with no GPU present), no probe, nothing to run kernels on.
* The probe is ``cuInit(0)`` through ``cuda.bindings`` plus a device count; a missing
  ``libcuda`` or any failure there means "no GPU".

The decision is announced in one line on stderr and is available as :func:`name`.
"""
from __future__ import annotations

import contextlib

import os
import sys
from dataclasses import asdict, dataclass, field

__all__ = ["BackendError", "DeviceInfo", "choose", "name", "is_simulator", "device", "describe", "probe_gpu"]

_VALID = ("auto", "gpu", "sim", "compile")
_choice: str | None = None
_reason: str = ""


class BackendError(RuntimeError):
    """The requested backend cannot be used here."""


def probe_gpu() -> tuple[bool, str]:
    """(True, '') if the CUDA driver initialises and reports at least one device."""
    try:
        from cuda.bindings import driver
    except Exception as exc:  # no cuda-bindings, or libcuda missing at load time
        return False, f"cuda.bindings unavailable ({exc.__class__.__name__}: {exc})"
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"cuInit(0) returned {err.name}"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            return False, "the driver reports no CUDA device"
    except Exception as exc:  # libcuda.so absent: cuda.bindings raises on first call
        first = str(exc).split(". ")[0]  # the banner prints once per notebook: the cause, not the advice
        return False, f"CUDA driver unavailable ({exc.__class__.__name__}: {first})"
    return True, ""


def _already_imported_choice() -> str | None:
    """If numba.cuda is already loaded, the choice was made by whoever loaded it."""
    if "numba.cuda" not in sys.modules:
        return None
    from numba.core import config

    return "sim" if config.ENABLE_CUDASIM else "gpu"


def choose(verbose: bool = True) -> str:
    """Decide between ``'gpu'`` and ``'sim'`` (once per process) and return the choice."""
    global _choice, _reason
    if _choice is not None:
        return _choice
    wanted = os.environ.get("PERFKIT_BACKEND", "auto").strip().lower() or "auto"
    if wanted not in _VALID:
        raise BackendError(
            f"PERFKIT_BACKEND={wanted!r} is not valid; use one of {', '.join(_VALID)}"
        )
    loaded = _already_imported_choice()
    if loaded == "gpu" and wanted == "compile":  # compiling needs only the real numba.cuda
        _choice, _reason = "compile", "compile only: real numba.cuda, no device used"
    elif loaded is not None:
        if wanted != "auto" and wanted != loaded:
            raise BackendError(
                f"PERFKIT_BACKEND={wanted} but numba.cuda was already imported in "
                f"{'simulator' if loaded == 'sim' else 'GPU'} mode; import perfkit (or set "
                "NUMBA_ENABLE_CUDASIM) before the first `from numba import cuda`"
            )
        if loaded == "gpu":  # whoever imported numba.cuda assumed a GPU: check there is one
            ok, why = probe_gpu()
            if not ok:
                raise BackendError(
                    f"numba.cuda was imported before perfkit, in GPU mode, but there is no usable "
                    f"GPU ({why}); import perfkit first (it then picks the simulator), or set "
                    "NUMBA_ENABLE_CUDASIM=1 before the first `from numba import cuda`")
        _choice, _reason = loaded, "numba.cuda was already imported"
    elif wanted == "sim":
        _choice, _reason = "sim", "forced by PERFKIT_BACKEND=sim"
    elif wanted == "compile":
        _choice, _reason = "compile", "compile only: real numba.cuda, no device used"
    else:
        ok, why = probe_gpu()
        if wanted == "gpu" and not ok:
            raise BackendError(f"PERFKIT_BACKEND=gpu but no usable GPU: {why}")
        _choice = "gpu" if ok else "sim"
        _reason = "forced by PERFKIT_BACKEND=gpu" if wanted == "gpu" else (why or "GPU found")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if _choice == "sim" else "0"
    if "numba" in sys.modules and loaded is None:  # numba read its config already
        from numba.core import config

        config.ENABLE_CUDASIM = 1 if _choice == "sim" else 0
    if verbose:
        print(f"perfkit: {describe()}", file=sys.stderr)
    return _choice


def name() -> str:
    return choose(verbose=False) if _choice is None else _choice


def is_simulator() -> bool:
    return name() == "sim"


def describe() -> str:
    if _choice == "sim":
        return (f"backend = Numba CUDA simulator ({_reason}); kernels run on the CPU, "
                "every timing is marked simulated")
    if _choice == "compile":
        return f"backend = compiler only ({_reason})"
    return f"backend = GPU ({_reason})"


@dataclass(frozen=True)
class DeviceInfo:
    """Facts of the device in use.  ``simulated`` is True for Numba's CUDA simulator."""

    name: str
    simulated: bool
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    memory_bus_bits: int | None = None
    memory_bytes: int | None = None
    l2_bytes: int | None = None
    shared_per_block_optin: int | None = None
    driver_version: str | None = None
    runtime_version: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def slug(self) -> str:
        """File-system friendly GPU name, used as the folder under data/results/."""
        import re

        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def as_dict(self) -> dict:
        return asdict(self)


_device_cache: DeviceInfo | None = None


_device_override: list = []


@contextlib.contextmanager
def planning_for(info: DeviceInfo):
    """Within the block, :func:`device` answers ``info``: a launch plan that sizes its grid from
    the device's SM count is planned for that device (the model's estimates of a target GPU),
    whatever runs the process.  Nothing is launched."""
    _device_override.append(info)
    try:
        yield info
    finally:
        _device_override.pop()


def device() -> DeviceInfo:
    """The device in use (cached).  In the simulator, a DeviceInfo that says so."""
    global _device_cache
    if _device_override:
        return _device_override[-1]
    if _device_cache is not None:
        return _device_cache
    choose()
    if _choice == "compile":  # the anatomy compiler: launch plans may ask, nothing is there
        return DeviceInfo(name="compile-only (no device)", simulated=False)
    if is_simulator():
        _device_cache = DeviceInfo(name="Numba CUDA simulator", simulated=True,
                                   l2_bytes=0, extra={"note": "no GPU; kernels run on the CPU"})
        return _device_cache
    from numba import cuda
    from numba.cuda.cudadrv import driver as cu_driver, runtime as cu_runtime

    dev = cuda.get_current_device()
    attr = lambda a: getattr(dev, a, None)  # noqa: E731
    drv = cu_driver.get_version()
    rt = cu_runtime.get_version()
    mem_total = cuda.current_context().get_memory_info().total
    _device_cache = DeviceInfo(
        name=dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
        simulated=False,
        compute_capability=tuple(dev.compute_capability),
        sm_count=attr("MULTIPROCESSOR_COUNT"),
        sm_clock_mhz=(attr("CLOCK_RATE") or 0) / 1000.0,
        memory_clock_mhz=(attr("MEMORY_CLOCK_RATE") or 0) / 1000.0,
        memory_bus_bits=attr("GLOBAL_MEMORY_BUS_WIDTH"),
        memory_bytes=int(mem_total),
        l2_bytes=attr("L2_CACHE_SIZE"),
        shared_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        driver_version=".".join(map(str, drv)),
        runtime_version=".".join(map(str, rt)),
    )
    return _device_cache
