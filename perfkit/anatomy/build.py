"""Building a rung for a target: the compiler child (``python -m perfkit.anatomy --worker``,
started with ``PERFKIT_BACKEND=compile``), which builds each launch's kernel the way Numba does
and disassembles it, and :func:`compile_rung`, which looks in the local cache and the static
store before starting it."""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import cache, static
from ..kernels.base import Problem, Variant
from ..static import source_hash
from .fingerprint import kernel_cache_key
from .sass import entry_name, sass_lines
from .target import AnatomyError, check_cc, tool_path, versions


# --- the child process: compile, link, disassemble -------------------------------------------
def _arch(cc: tuple) -> str:
    """Numba's target name: on a real device it builds for the arch-specific 'a' variant from
    9.0 on (sm_90a, sm_100a, ...; ``CUDACodeLibrary._ensure_cc``)."""
    return f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"


def _numba_cc(cc: tuple[int, int]) -> tuple:
    return (cc[0], cc[1], "a" if tuple(cc) >= (9, 0) else "")


def _cuobjdump(cubin: bytes, *flags: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        r = subprocess.run([tool_path("cuobjdump"), *flags, f.name], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        raise AnatomyError(f"cuobjdump {' '.join(flags)} failed: {r.stderr.strip()}")
    return r.stdout


@contextlib.contextmanager
def _verbose_linker(driver):
    """Numba's ``_Linker`` with ptxas's ``-verbose`` report switched on."""
    orig = driver._Linker._get_linker_options

    def verbose(self, ptx):
        opts = orig(self, ptx)
        return dataclasses.replace(opts, verbose=True)

    driver._Linker._get_linker_options = verbose
    try:
        yield
    finally:
        driver._Linker._get_linker_options = orig


#: what a kept kernel build holds
_BUILD_KEYS = {"arch", "lto", "ptx", "cubin_b64", "ptxas_log", "res_usage", "sass"}


def compile_job(job: dict) -> dict:
    """Runs in the child (real numba.cuda): rebuild the rung and build every launch's kernel
    the way Numba builds it for a launch (``numba.cuda.dispatcher._Kernel`` with the kernel's own
    target options: LTO when nvJitLink is there, fastmath, max_registers, launch bounds,
    linked files), for the target instead of the current device."""
    import numba
    import numba.cuda.dispatcher as cuda_dispatcher
    from numba.cuda import codegen
    from numba.cuda.cudadrv import driver

    cc = tuple(job["cc"])
    full_cc = _numba_cc(cc)
    # Numba asks "the current device" for its compute capability; with no device here, it is
    # the target being inspected.
    cuda_dispatcher.get_current_device = lambda: type("TargetDevice", (), {"compute_capability": cc})()
    codegen.CUDACodeLibrary._ensure_cc = lambda self, c: full_cc if c is None else c

    variant, problem = static.rebuild(job)
    launches = variant.plan(problem, variant.host_buffers(problem))
    out = []
    for launch in launches:
        fn = launch.kernel.py_func
        sig = tuple(numba.typeof(a) for a in launch.args)
        opts = dict(getattr(launch.kernel, "targetoptions", {}) or {})
        kkey = kernel_cache_key(fn, sig, opts, full_cc, job) if job.get("source") else None
        kpath = _cache_dir() / "kernels" / f"{kkey}.json" if kkey else None
        built = None
        if kpath is not None and kpath.exists():
            try:
                built = json.loads(kpath.read_text())
            except (OSError, ValueError):
                built = None  # a damaged entry is rebuilt
            if not (isinstance(built, dict) and _BUILD_KEYS <= set(built)):
                built = None
        if built is None:
            built = _build_kernel(cuda_dispatcher, driver, fn, sig, opts, full_cc)
            if kpath is not None:
                try:
                    _write_atomic(kpath, built)
                except OSError:
                    pass  # an unwritable cache costs the next build, not this report
        out.append({"kernel_name": fn.__name__, "signature": [str(t) for t in sig], "grid": list(launch.grid),
                    "block": list(launch.block), "dynamic_shared_bytes": int(launch.shared_bytes), **built})
    return {"launches": out}


def _build_kernel(cuda_dispatcher, driver, fn, sig, opts: dict, full_cc) -> dict:
    """One kernel built for the target: PTX, cubin, ptxas's report, res-usage and SASS."""
    try:
        kernel = cuda_dispatcher._Kernel(fn, sig, **opts)
        lib = kernel._codelibrary
        ptx = lib.get_asm_str()
        cubin = bytes(lib.get_cubin().code)  # what the driver would load
        # the same link (Numba's linker, every input: LTO-IR or PTX, cudadevrt, linked
        # files) again with -verbose, for ptxas's report of spills; -verbose changes the
        # cubin's bytes, not its code, so the cubin above is the one reported
        lib._cubin_cache.clear()
        with _verbose_linker(driver):
            lib.get_cubin()
        log = (lib.get_linkerinfo(full_cc) or "").replace("\x00", "")  # a C string
        lto = bool(lib._lto)
    except Exception as exc:
        raise AnatomyError(f"compiling {fn.__name__} for {_arch(full_cc)} failed: "
                           f"{exc.__class__.__name__}: {exc}") from None
    return {"arch": _arch(full_cc), "lto": lto,
            "ptx": ptx, "cubin_b64": base64.b64encode(cubin).decode(), "ptxas_log": log,
            "res_usage": _cuobjdump(cubin, "-res-usage"), "sass": _cuobjdump(cubin, "-sass")}


def _write_atomic(path: Path, doc) -> None:
    """Write JSON so that a reader (another test worker) sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmpname = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    os.replace(tmpname, path)


def worker_main(job_path: str, out_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        result = compile_job(job)
    except AnatomyError as exc:
        result = {"error": str(exc)}
    except Exception as exc:  # the parent turns this into an AnatomyError with the message
        import traceback

        result = {"error": f"{exc.__class__.__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}
    Path(out_path).write_text(json.dumps(result))
    return 0


# --- compile (cached) ----------------------------------------------------------------------
def _cache_dir() -> Path:
    return cache.folder("anatomy")


def rung_job(variant: Variant, problem: Problem, cc) -> dict:
    return static.job(variant, problem, cc)


def static_key(variant: Variant, problem: Problem, cc) -> str:
    """The key of this build in the static store (:mod:`perfkit.static`): the job and the
    rung's source closure, not the tool versions (the entry carries those)."""
    return static.build_key(variant, problem, check_cc(cc))


def _compact(result: dict) -> dict:
    """A build as the store keeps it: the SASS as (address, instruction) lines, the entry's name
    and whether the cubin holds the system's shared reservation; not the PTX and cubin (~130 KB a
    kernel), which a report rebuilds when asked for them."""
    out = []
    for launch in result["launches"]:
        lo = {k: launch[k] for k in launch if k not in ("ptx", "cubin_b64", "sass")}
        lo["entry"] = entry_name(launch["ptx"])
        lo["reserved_section"] = b".nv.reservedSmem" in base64.b64decode(launch["cubin_b64"])
        lo["sass"] = [f"/*{a:04x}*/ {i} ;" for a, i in sass_lines(launch["sass"])]  # a line each: diffable
        out.append(lo)
    return {"launches": out}


def compile_rung(variant: Variant, problem: Problem, cc, *, store: bool = True) -> dict:
    """The build of every launch (local cache -> static store -> the compiler in a child)."""
    job = rung_job(variant, problem, cc)
    source = source_hash(variant)
    key_doc = json.dumps({"job": job, "source": source, "tools": versions(),
                          "code": static.producer_version("anatomy")}, sort_keys=True, default=str)
    key = hashlib.sha256(key_doc.encode()).hexdigest()[:32]
    path = _cache_dir() / f"{key}.json"
    skey = static.build_key(variant, problem, cc, source)  # the closure hashed once, above
    what = f"{variant.label} @ {problem.label} sm_{cc[0]}{cc[1]}"
    if path.exists():
        try:
            result = json.loads(path.read_text())
            if static.writing():  # rewritten: refresh keeps what it touched
                static.put("anatomy", skey, _compact(result), what=what, tools=versions())
            if store or "ptx" in result["launches"][0]:
                return result
        except (OSError, json.JSONDecodeError, KeyError, IndexError):
            pass  # a damaged entry is rebuilt
    if store and not static.writing():
        hit = static.get("anatomy", skey, versions())
        if hit is not None:
            for launch in hit["launches"]:
                launch["sass"] = "\n".join(launch["sass"])
            return hit
    with tempfile.TemporaryDirectory() as tmp:
        jp, op = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jp.write_text(json.dumps({**job, "source": source}, default=str))  # the source: for the kernels' cache
        env = {**os.environ, "PERFKIT_BACKEND": "compile", "NUMBA_ENABLE_CUDASIM": "0"}
        r = subprocess.run([sys.executable, "-m", "perfkit.anatomy", "--worker", str(jp), str(op)],
                           capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0 or not op.exists():
            raise AnatomyError(f"the compiler process for {variant.label} at sm_{cc[0]}{cc[1]} failed: "
                               f"{r.stderr.strip()[-2000:]}")
        result = json.loads(op.read_text())
    if "error" in result:
        raise AnatomyError(f"{variant.label} for sm_{cc[0]}{cc[1]}: {result['error']}")
    _write_atomic(path, result)  # atomic: readers see the old entry or the new one
    static.put("anatomy", skey, _compact(result), what=what, tools=versions())
    return result

