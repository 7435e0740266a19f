"""Compile an ops unit's rungs in parallel before it checks and times them (issue 44).

On a GPU an ops unit spent most of its cap compiling: Numba compiles a rung's kernels at their
first launch, in the unit's one process, ~3 s a rung on an H200 (``docs/device-runs/
2026-11-27-h200-5-summary.md``: compile+check 19.0 s, timing 3.1 s).  Compiling needs no GPU,
only the target's compute capability, so here K worker processes (:func:`worker_main`, started
with ``PERFKIT_BACKEND=compile``) build
each rung's launch kernels the way Numba builds them for a launch (``numba.cuda.dispatcher.
_Kernel`` with the dispatcher's own target options, as :mod:`perfkit.anatomy.build` does), link
the cubin for the device's target (``sm_90a`` on an H100 or H200: the key
``CUDACodeLibrary._ensure_cc`` gives the current device), and send each kernel back pickled
(numba-cuda's own disk cache stores kernels the same way: the PTX and the cubins by target).
The unit's process then hands each kernel to the dispatcher object the rung launches, through
``CUDADispatcher.add_overload`` (what ``compile`` does with a kernel it built or loaded from the
disk cache), under the argument types a launch looks it up by, so the check and the timing load a
cubin and compile nothing.

Which dispatcher: the one ``variant.plan(problem, host stand-ins)`` names, launch by launch, as
the anatomy compiles them; :meth:`Variant.prepare` calls ``plan`` again with device buffers, and
a rung's kernel factories are cached per configuration, so it launches the same objects.  A rung
whose ``plan`` gives other dispatcher objects on a second call (a factory without a cache) is
not precompiled: an inserted kernel would never be found.  The argument types are
``dispatcher.typeof_pyval`` of the stand-ins' launch arguments; host stand-ins type as the device
buffers do (same dtype, rank and layout; TMA maps as ``uint64[16]``), and a launch whose types
differ anyway compiles as before (``compiled`` in the sweep's row counts it).

Anything that goes wrong for a rung (it cannot be pickled, its worker fails or dies, the time
limit passes, its kernels do not match the plan) leaves that rung to Numba's own compile at its
first launch, as before, with a line in the unit's log; it never stops the unit.  In the
simulator there is nothing to compile: :func:`precompile` says so and returns.
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from perfkit import backend, static
from perfkit.kernels.base import OracleVariant

__all__ = ["Precompiled", "precompile", "default_workers", "compiles", "target_key", "building_for", "plan_kernels",
           "build_job", "dump_kernel", "load_kernel", "install", "worker_main", "WORKER"]

#: the pickle protocol of a worker's results
PROTOCOL = 5
#: a worker's program (``python -c WORKER JOBS DIR``, not ``-m``: the package imports this module first)
WORKER = "import sys; from perfkit.record.precompile import worker_main; sys.exit(worker_main(sys.argv[1], sys.argv[2]))"


def target_key(cc) -> tuple:
    """The key Numba files a cubin under for a device of compute capability ``cc``: the
    arch-specific target from 9.0 on (``(9, 0, 'a')``: sm_90a), as ``CUDACodeLibrary._ensure_cc``."""
    cc = (int(cc[0]), int(cc[1]))
    return (cc[0], cc[1], "a" if cc >= (9, 0) else "")


@contextlib.contextmanager
def building_for(cc):
    """Numba builds for ``cc`` with no device: "the current device" (whose compute capability a
    kernel's compile reads) and the target of a library's cubin are ``cc``'s, as in the anatomy's
    compiler child.  Only in a process with the real ``numba.cuda`` and no GPU in use."""
    import numba.cuda.dispatcher as dispatcher
    from numba.cuda import codegen

    cc2, key = (int(cc[0]), int(cc[1])), target_key(cc)
    saved = dispatcher.get_current_device, codegen.CUDACodeLibrary._ensure_cc
    dispatcher.get_current_device = lambda: type("TargetDevice", (), {"compute_capability": cc2})()
    codegen.CUDACodeLibrary._ensure_cc = lambda self, c: key if c is None else c
    try:
        yield key
    finally:
        dispatcher.get_current_device, codegen.CUDACodeLibrary._ensure_cc = saved


def plan_kernels(variant, problem) -> list[tuple[int, object, tuple]]:
    """(launch index, dispatcher, argument types) of each distinct kernel the rung launches,
    from ``plan`` with host stand-ins; raises ValueError where a second ``plan`` gives other
    dispatcher objects (a kernel put into the first would never be launched)."""
    first = variant.plan(problem, variant.host_buffers(problem))
    again = variant.plan(problem, variant.host_buffers(problem))
    if len(first) != len(again) or any(a.kernel is not b.kernel for a, b in zip(first, again)):
        raise ValueError("plan() builds new dispatcher objects on every call: a kernel inserted into one "
                         "would never be launched")
    out, seen = [], set()
    for i, launch in enumerate(first):
        d = launch.kernel
        if not hasattr(d, "add_overload") or not hasattr(d, "py_func"):
            raise ValueError(f"launch {i} is not a cuda.jit kernel ({type(d).__name__})")
        sig = tuple(d.typeof_pyval(a) for a in launch.args)
        if (id(d), sig) not in seen:
            seen.add((id(d), sig))
            out.append((i, d, sig))
    return out


# --- the worker's side -----------------------------------------------------------------------
def dump_kernel(kernel) -> tuple[bytes, list[str]]:
    """A built kernel pickled, with the paths of the files linked into its cubin apart: Numba
    refuses to pickle a library with linked files (a cubin for another target would need them
    again), but the cubin for this target holds them already; the paths go along and are put
    back on load, so the library is as it was built."""
    lib = kernel._codelibrary
    files = set(lib._linking_files)
    if any(not isinstance(f, str) for f in files):
        raise TypeError(f"linked code other than files: {[type(f).__name__ for f in files if not isinstance(f, str)]}")
    lib._linking_files = set()
    try:
        return pickle.dumps(kernel, protocol=PROTOCOL), sorted(files)
    finally:
        lib._linking_files = files


def build_job(job: dict) -> list[dict]:
    """In a worker (real ``numba.cuda``, no device): the rung's launch kernels for ``job['cc']``,
    each with its cubin, pickled."""
    from numba.cuda.dispatcher import _Kernel

    variant, problem = static.rebuild(job)
    out = []
    with building_for(job["cc"]) as key:
        for i, d, sig in plan_kernels(variant, problem):
            kernel = _Kernel(d.py_func, sig, **d.targetoptions)  # what CUDADispatcher.compile builds
            kernel._codelibrary.get_cubin()  # linked now, for the target: the GPU process only loads it
            blob, files = dump_kernel(kernel)
            out.append({"launch": i, "name": d.py_func.__qualname__, "signature": [str(t) for t in sig],
                        "target": list(key), "kernel": blob, "files": files})
    return out


def _die_with_parent() -> None:
    """A worker never outlives the unit's process (prctl's death signal; Linux only)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def worker_main(jobs_path: str, out_dir: str) -> int:
    """Take the jobs in order, each claimed by creating ``<i>.claim`` (so K workers share one
    list, the first rungs first), and write each result to ``<i>.pkl`` whole (renamed into place)."""
    _die_with_parent()
    jobs = json.loads(Path(jobs_path).read_text())
    out = Path(out_dir)
    for i, job in enumerate(jobs):
        try:
            os.close(os.open(out / f"{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        t0 = time.perf_counter()
        try:
            result = {"kernels": build_job(job)}
        except Exception as exc:  # the parent falls back to Numba's compile for this rung
            result = {"error": f"{exc.__class__.__name__}: {exc}"}
        result.update(seconds=time.perf_counter() - t0, pid=os.getpid())
        tmp = out / f"{i}.pkl.tmp-{os.getpid()}"
        tmp.write_bytes(pickle.dumps(result, protocol=PROTOCOL))
        tmp.replace(out / f"{i}.pkl")
    return 0


# --- the unit's side -------------------------------------------------------------------------
def load_kernel(entry: dict):
    """A worker's kernel, unpickled, its linked files put back."""
    kernel = pickle.loads(entry["kernel"])
    if entry.get("files"):
        kernel._codelibrary._linking_files = set(entry["files"])
    return kernel


def install(variant, problem, kernels: list[dict], target) -> list:
    """Put a rung's built kernels into the dispatchers its launches use; returns the dispatchers
    given one.  Raises ValueError where the build does not match this process's plan (the
    kernels put in before the error stay: each is right for its dispatcher and types)."""
    planned = {i: (d, sig) for i, d, sig in plan_kernels(variant, problem)}
    target = tuple(target)
    given = []
    for entry in kernels:
        if entry["launch"] not in planned:
            raise ValueError(f"launch {entry['launch']} ({entry['name']}) is not in this process's plan")
        d, sig = planned[entry["launch"]]
        if d.py_func.__qualname__ != entry["name"]:
            raise ValueError(f"launch {entry['launch']}: built {entry['name']}, the plan launches "
                             f"{d.py_func.__qualname__}")
        if tuple(entry["target"]) != target:
            raise ValueError(f"{entry['name']}: built for {tuple(entry['target'])}, the device is {target}")
        kernel = load_kernel(entry)
        if tuple(kernel.signature.args) != sig:
            raise ValueError(f"{entry['name']}: built for {kernel.signature.args}, the plan launches {sig}")
        if target not in kernel._codelibrary._cubin_cache:
            raise ValueError(f"{entry['name']}: no cubin for {target} in the build")
        if sig not in d.overloads:  # one compiled here already (an earlier rung's) stays
            d.add_overload(kernel, sig)
        given.append(d)
    return given


def default_workers(pairs: int) -> int:
    """Cores - 1 (the unit's own process keeps one), at most one a rung; 0 below two: one worker
    compiles one rung at a time, as the unit itself would."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    k = min(cores - 1, pairs)
    return k if k >= 2 else 0


def compiles(dispatchers) -> int:
    """Kernels these dispatchers compiled so far (Numba counts a miss per compile)."""
    return sum(sum(d.stats.cache_misses.values()) for d in dispatchers)


@dataclass
class Precompiled:
    """What :func:`precompile` did: the seconds, the workers, per pair (by index) the dispatchers
    given a kernel, the pairs left to Numba's own compile and why, and the lines it logged."""
    seconds: float = 0.0
    workers: int = 0
    given: dict = field(default_factory=dict)
    fallback: dict = field(default_factory=dict)
    planned: dict = field(default_factory=dict)  # pair index -> every dispatcher the rung launches
    lines: list = field(default_factory=list)

    @property
    def kernels(self) -> int:
        return sum(len(v) for v in self.given.values())


def _child_env() -> dict:
    from perfkit.record.ncu import package_parent

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PERFKIT_BACKEND"] = "compile"  # the real numba.cuda, no device: a worker never touches the GPU
    env["PYTHONPATH"] = os.pathsep.join([str(package_parent())] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


def precompile(pairs: list, cc=None, workers: int | None = None, timeout_s: float = 60.0, log=print) -> Precompiled:
    """Build ``pairs`` ((variant, problem), in the order they will run) for compute capability
    ``cc`` (default: the current device's) in ``workers`` processes (None: :func:`default_workers`;
    0: off) within ``timeout_s``, and put each rung's kernels into its dispatchers; what fails
    is logged and left to Numba's compile at the rung's first launch."""
    res = Precompiled()
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        res.lines.append(msg)
        log(f"precompile: {msg}")

    if backend.is_simulator():
        say("nothing to compile in the simulator (kernels run as Python); no-op")
        return res
    todo = []
    for n, (v, p) in enumerate(pairs):
        if isinstance(v, OracleVariant):  # a library call (oracle, peer): no kernel of ours; and its
            continue  # supports() may import torch, whose seconds are the peers', not the precompile's
        try:
            v.supports(p)
        except Exception:  # the sweep says why (an unsupported rung, a peer whose library is missing)
            continue
        try:
            planned = plan_kernels(v, p)
        except Exception as exc:
            res.fallback[n] = f"not planned here ({exc.__class__.__name__}: {exc})"
            continue
        if planned:
            res.planned[n] = [d for _, d, _ in planned]
            todo.append(n)
    k = default_workers(len(todo)) if workers is None else min(int(workers), len(todo))
    if k <= 0 or not todo:
        why = ("no rung of ours to compile" if not todo else "--precompile 0" if workers == 0 else
               "one rung: nothing to compile beside it" if len(todo) == 1 else "fewer than 3 cores")
        say(f"off ({why}); Numba compiles each rung at its first launch")
        res.seconds = time.perf_counter() - t0
        return res
    if cc is None:
        from numba import cuda

        cc = cuda.get_current_device().compute_capability
    key = target_key(cc)
    res.workers = k
    with tempfile.TemporaryDirectory(prefix="perfkit-precompile-") as tmp:
        tmp = Path(tmp)
        jobs = [static.job(pairs[n][0], pairs[n][1], key[:2]) for n in todo]
        (tmp / "jobs.json").write_text(json.dumps(jobs, default=str))
        cmd = [sys.executable, "-c", WORKER, str(tmp / "jobs.json"), str(tmp)]
        procs = []
        for w in range(k):
            with open(tmp / f"worker{w}.log", "w") as errf:
                procs.append(subprocess.Popen(cmd, env=_child_env(), stdout=errf, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        late = [p for p in procs if p.poll() is None]
        for p in late:  # past the limit: their rungs compile at first launch instead
            p.kill()
            p.wait()
        for j, n in enumerate(todo):
            v, p = pairs[n]
            f = tmp / f"{j}.pkl"
            if not f.exists():
                if late:
                    why = f"not built within {timeout_s:.0f} s"
                elif (tmp / f"{j}.claim").exists():
                    why = f"its worker died while building it ({_tail(tmp, k)})"
                else:
                    why = f"no worker took it ({_tail(tmp, k)})"
                res.fallback[n] = why
                continue
            try:
                result = pickle.loads(f.read_bytes())
                if "error" in result:
                    raise ValueError(f"build failed: {result['error']}")
                res.given[n] = install(v, p, result["kernels"], key)
            except Exception as exc:
                res.fallback[n] = f"{exc.__class__.__name__}: {exc}"[:400]
    res.seconds = time.perf_counter() - t0
    for n, why in res.fallback.items():
        say(f"{pairs[n][0].label}: compiled at its first launch instead ({why})")
    say(f"{len(res.given)} of {len(todo)} rungs ({res.kernels} kernels, sm_{key[0]}{key[1]}{key[2]}) in "
        f"{res.seconds:.1f} s with {k} workers")
    return res


def _tail(tmp: Path, k: int) -> str:
    lines = []
    for w in range(k):
        f = tmp / f"worker{w}.log"
        if f.exists():
            lines += [ln for ln in f.read_text(errors="replace").strip().splitlines() if ln][-2:]
    return " | ".join(lines[-3:]) or "no output"

