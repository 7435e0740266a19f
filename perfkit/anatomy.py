"""Kernel anatomy: what the compiler made of a rung, for any target GPU, with no GPU present.

``inspect(variant, problem, cc=(9, 0))`` builds the rung's kernels for that compute
capability the way Numba builds them for a launch (its own kernel compiler with the kernel's
target options: NVVM -> LTO-IR -> nvJitLink with link-time optimisation when nvJitLink is
present, as it is with ``numba-cuda[cu13]``; the arch-specific target sm_90a/sm_100a/... from
9.0 on, as Numba picks on a real device), minus the driver, and reads back:

* registers per thread, static shared memory, stack: ``cuobjdump -res-usage`` on that cubin;
  spill stores and loads from ptxas's report (the same inputs linked again with ``-verbose``);
* the launch's block size and dynamic shared memory, and the theoretical occupancy they give
  (:mod:`perfkit.occupancy`);
* the SASS (``cuobjdump -sass``) and its static instruction mix by class.

Compilation happens in a child process started with ``PERFKIT_BACKEND=compile``: in a process
that chose the CUDA simulator, kernels are simulator objects and the real compiler cannot see
them.  Results are cached on disk (under ``anatomy/`` in ``PERFKIT_CACHE_DIR``, default
``~/.cache/perfkit``), keyed by the source of ``perfkit.kernels`` and of the rung's module,
its configuration, the problem, the target and the tool versions, so a warm report takes
milliseconds.  Each kernel's build is also kept on its own (``anatomy/kernels/``), keyed by
what Numba compiles: the kernel's code, its closure's values, the globals it names
(recursively), its argument types, target options and target, and the rung's source; a rung
at another problem that launches the same kernel with the same argument types (most do: a GEMM
rung at any size) reuses the build.  A kernel that names an object of a kind the key cannot
write down (see ``_fingerprint``) is built every time.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import functools
import hashlib
import html
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path

from . import cache
from . import occupancy as occ
from . import static
from .static import source_hash  # noqa: F401  (the key of every cached build)
from .kernels.base import Problem, UnsupportedProblem, Variant

__all__ = ["AnatomyError", "UnsupportedRung", "Report", "Diff", "Loop", "inspect", "diff", "classify", "instruction_mix",
           "sass_lines", "source_hash", "static_key",
           "find_loops", "hot_loop_of",
           "cli", "SUPPORTED_CC", "MIX_CLASSES", "tool_path"]

SUPPORTED_CC = [cc for cc in occ.LIMITS if cc >= (7, 5)]  # numba-cuda 0.30 compiles 7.5 and up


class AnatomyError(RuntimeError):
    """A rung cannot be inspected for the asked target; the message names both."""


class UnsupportedRung(AnatomyError, UnsupportedProblem):
    """The rung cannot take this (valid) problem at all (its ``supports`` says no): both an
    :class:`AnatomyError` and the rung's own :class:`~perfkit.kernels.base.UnsupportedProblem`,
    so a caller that skips unsupported problems (``except UnsupportedProblem``) skips it in
    ``inspect`` and ``model.estimate`` alike."""


# --- target and tools ------------------------------------------------------------------------
def _check_cc(cc) -> tuple[int, int]:
    try:
        cc = tuple(int(x) for x in (cc.split(".") if isinstance(cc, str) else cc))
    except (TypeError, ValueError, AttributeError):
        raise AnatomyError(f"target compute capability {cc!r} is malformed; use e.g. (9, 0) or '9.0'") from None
    if len(cc) != 2 or cc not in SUPPORTED_CC:
        why = " (CUDA 13 and numba-cuda 0.30 no longer build for sm_70)" if cc == (7, 0) else ""
        raise AnatomyError(f"target compute capability {'.'.join(map(str, cc))} is not supported{why}; "
                           f"supported: {', '.join(f'{a}.{b}' for a, b in SUPPORTED_CC)}")
    return cc


def tool_path(name: str) -> str:
    """``cuobjdump`` / ``nvdisasm`` from the nvidia-cuda-* wheels (or PATH)."""
    import nvidia

    for base in nvidia.__path__:
        for sub in ("cu13", "cuda_cuobjdump", "cuda_nvdisasm"):
            p = Path(base) / sub / "bin" / name
            if p.exists():
                return str(p)
    import shutil

    found = shutil.which(name)
    if not found:
        raise AnatomyError(f"{name} not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    return found


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for pkg in ("numba", "numba-cuda", "cuda-bindings", "cuda-core", "nvidia-nvjitlink", "nvidia-nvvm",
                "nvidia-cuda-cuobjdump", "llvmlite"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


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


class _Uncacheable(Exception):
    """A kernel whose identity cannot be written down (it names an object of a kind not known)."""


def _code_fp(code, depth: int, seen: dict) -> list:
    """A code object by its bytecode, flags, argument counts, names and constants (nested code
    objects: the same)."""
    consts = []
    for c in code.co_consts:
        consts.append(_code_fp(c, depth + 1, seen) if hasattr(c, "co_code") else _fingerprint(c, depth + 1, seen))
    return [hashlib.sha256(code.co_code).hexdigest(), code.co_flags, code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, list(code.co_names), list(code.co_varnames), list(code.co_freevars),
            list(code.co_cellvars), consts]


def _code_names(code) -> set:
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            out |= _code_names(c)
    return out


#: modules a kernel may name whose contents are pinned by their versions (in the key's tools)
#: or by the language: named, not walked
_LIBRARY_MODULES = ("numba", "llvmlite", "numpy", "math", "cmath", "operator", "cuda", "builtins", "functools")


def _is_library(modname: str) -> bool:
    return modname.split(".")[0] in _LIBRARY_MODULES


def _func_fp(fn, depth: int, seen: dict) -> list:
    """A Python function as Numba compiles it: its code, its closure's values, its defaults and
    the values of the globals it names (functions and kernels it calls: the same, recursively;
    a module of the project: the attributes the code names).  A function met again is named
    by the order it was first met in, which tells apart two functions of one name (a factory's)."""
    if id(fn) in seen:
        return ["again", seen[id(fn)]]
    seen[id(fn)] = len(seen)
    code = fn.__code__
    names = _code_names(code)

    def value(v):
        if isinstance(v, types.ModuleType) and not _is_library(v.__name__):
            # Numba freezes ``mod.ATTR`` as a constant: the attributes the code names
            return ["module", v.__name__, [[a, _fingerprint(getattr(v, a), depth + 1, seen)]
                                           for a in sorted(names) if hasattr(v, a)]]
        return _fingerprint(v, depth + 1, seen)

    cells = [value(c.cell_contents) if _cell_full(c) else "empty" for c in (fn.__closure__ or ())]
    g = fn.__globals__
    out = [[n, value(g[n])] for n in sorted(x for x in names if x in g)]
    return ["function", fn.__module__, fn.__qualname__, _code_fp(code, depth, seen), cells,
            _fingerprint(fn.__defaults__, depth + 1, seen), _fingerprint(getattr(fn, "__kwdefaults__", None), depth + 1, seen),
            out]


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _fingerprint(obj, depth: int = 0, seen: dict | None = None):
    """What identifies ``obj`` to the compiler, as JSON-able data; raises :class:`_Uncacheable`
    where it cannot say.  Only kinds of object whose identity can be written down are taken:
    plain values and containers, NumPy scalars, dtypes and arrays (with their layout), Numba
    types and llvmlite IR types, enums and dataclass instances by their fields, modules,
    classes, functions, Numba dispatchers (with the signatures of one compiled eagerly) and
    intrinsics; anything else makes the kernel uncacheable (built every time)."""
    import dataclasses as _dc
    import enum

    import numpy as np

    seen = {} if seen is None else seen
    if depth > 40:
        raise _Uncacheable("nested too deep")
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return [type(obj).__name__, repr(obj)]
    if isinstance(obj, (tuple, list)):
        return [type(obj).__name__, [_fingerprint(x, depth + 1, seen) for x in obj]]
    if isinstance(obj, (set, frozenset)):
        return [type(obj).__name__, sorted(json.dumps(_fingerprint(x, depth + 1, seen)) for x in obj)]
    if isinstance(obj, dict):
        return ["dict", sorted([repr(k), _fingerprint(v, depth + 1, seen)] for k, v in obj.items())]
    if isinstance(obj, types.ModuleType):
        return ["module", obj.__name__]
    if isinstance(obj, np.dtype):
        return ["dtype", str(obj)]
    if isinstance(obj, np.generic):
        return ["scalar", str(obj.dtype), repr(obj)]
    if isinstance(obj, np.ndarray):
        import numba

        return ["ndarray", str(numba.typeof(obj)), list(obj.shape), list(obj.strides),
                hashlib.sha256(obj.tobytes(order="A")).hexdigest()]
    if isinstance(obj, enum.Enum):
        return ["enum", _fingerprint(type(obj), depth + 1, seen), obj.name, _fingerprint(obj.value, depth + 1, seen)]
    if isinstance(obj, type):
        if issubclass(obj, enum.Enum):
            return ["enumtype", obj.__module__, obj.__qualname__,
                    [[m.name, _fingerprint(m.value, depth + 1, seen)] for m in obj]]
        if _is_library(obj.__module__):
            return ["type", obj.__module__, obj.__qualname__]
        if id(obj) in seen:
            return ["again", seen[id(obj)]]
        seen[id(obj)] = len(seen)
        return ["class", obj.__module__, obj.__qualname__,
                [[k, _fingerprint(v, depth + 1, seen)] for k, v in sorted(vars(obj).items())
                 if not (k.startswith("__") and k.endswith("__"))]]
    py = getattr(obj, "py_func", None)
    if isinstance(py, types.FunctionType):  # a Numba dispatcher (kernel or device function)
        sigs = [] if getattr(obj, "_can_compile", True) else [str(x) for x in getattr(obj, "signatures", [])]
        return ["dispatcher", type(obj).__qualname__, _fingerprint(dict(getattr(obj, "targetoptions", {}) or {}), depth + 1, seen),
                sigs, _func_fp(py, depth + 1, seen)]
    defn = getattr(obj, "_defn", None)
    if isinstance(defn, types.FunctionType):  # a Numba @intrinsic (inline PTX)
        return ["intrinsic", _func_fp(defn, depth + 1, seen)]
    if isinstance(obj, types.FunctionType):
        return _func_fp(obj, depth + 1, seen)
    if isinstance(obj, functools.partial):
        return ["partial", _fingerprint(obj.func, depth + 1, seen), _fingerprint(obj.args, depth + 1, seen),
                _fingerprint(obj.keywords, depth + 1, seen)]
    if _dc.is_dataclass(obj):
        return ["dataclass", _fingerprint(type(obj), depth + 1, seen),
                [[f.name, _fingerprint(getattr(obj, f.name), depth + 1, seen)] for f in _dc.fields(obj)]]
    from numba.core import types as nbtypes

    if isinstance(obj, nbtypes.Type):  # a Numba type names itself fully (float32, array(...), ...)
        return ["nbtype", type(obj).__qualname__, str(obj)]
    if type(obj).__module__.split(".")[0] == "llvmlite" and type(obj).__module__.endswith("types"):
        return ["llvmtype", type(obj).__qualname__, str(obj)]
    raise _Uncacheable(f"{type(obj).__module__}.{type(obj).__qualname__}")


def _kernel_cache_key(fn, sig, opts: dict, full_cc, job: dict) -> str | None:
    """The key of one kernel's build in the per-kernel cache, or None where the kernel cannot
    be named (then it is built every time).  Rungs at different problems, and different rungs,
    often launch the same kernel with the same argument types (a GEMM rung at two sizes; the
    tuned rung at the multirow rung's shape): one build serves them all."""
    try:
        links = [hashlib.sha256(Path(str(f)).read_bytes()).hexdigest() for f in (opts.get("link") or [])]
        doc = {"fn": _fingerprint(fn), "sig": [str(t) for t in sig], "opts": _fingerprint(opts), "links": links,
               "cc": [str(c) for c in full_cc], "source": job.get("source"), "tools": _versions(), "v": 1}
        text = json.dumps(doc, sort_keys=True, default=str)
    except Exception:  # noqa: BLE001  (_Uncacheable, or any kernel this cannot describe: built every time)
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:32]


#: what a kept kernel build holds
_BUILD_KEYS = {"arch", "lto", "ptx", "cubin_b64", "ptxas_log", "res_usage", "sass"}


def _compile_job(job: dict) -> dict:
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
        kkey = _kernel_cache_key(fn, sig, opts, full_cc, job) if job.get("source") else None
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


def _worker_main(job_path: str, out_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        result = _compile_job(job)
    except AnatomyError as exc:
        result = {"error": str(exc)}
    except Exception as exc:  # the parent turns this into an AnatomyError with the message
        import traceback

        result = {"error": f"{exc.__class__.__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}
    Path(out_path).write_text(json.dumps(result))
    return 0


# --- parsing -------------------------------------------------------------------------------
def _parse_res_usage(text: str) -> dict[str, dict]:
    """``cuobjdump -res-usage``: {function: {REG, STACK, SHARED, LOCAL, ...}}."""
    funcs, current = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            current = m.group(1)
            continue
        if current and "REG:" in line:
            funcs[current] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            current = None
    return funcs


def _entry_name(ptx: str) -> str:
    m = re.search(r"\.entry\s+([\w$.]+)\s*\(", ptx)
    if not m:
        raise AnatomyError("no .entry in the PTX")
    return m.group(1)


def _parse_ptxas(log: str, entry: str | None = None) -> dict:
    """Registers, stack and spills from ptxas's report, for the entry function when named
    (the log also reports every called device function)."""
    if entry is not None:
        i = log.find(f"Compiling entry function '{entry}'")
        if i >= 0:
            j = log.find("Compiling ", i + 10)
            log = log[i:j if j > 0 else None]
    out = {}
    m = re.search(r"Used (\d+) registers", log)
    if m:
        out["registers"] = int(m.group(1))
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        out["stack_bytes"], out["spill_store_bytes"], out["spill_load_bytes"] = map(int, m.groups())
    m = re.search(r"Used \d+ registers.*?(\d+) bytes smem", log)
    out["static_shared_bytes"] = int(m.group(1)) if m else 0
    return out


#: instruction classes of the mix, in display order
MIX_CLASSES = [
    "fp32 fma", "fp32 add", "fp32 mul", "fp32 other", "fp64", "fp16/bf16", "tensor mma",
    "global load 8", "global load 16", "global load 32", "global load 64", "global load 128", "global load 256",
    "global store 8", "global store 16", "global store 32", "global store 64", "global store 128",
    "global store 256",
    "shared load 32", "shared load 64", "shared load 128", "shared load other",
    "shared store 32", "shared store 64", "shared store 128", "shared store other",
    "async copy", "local load/store", "shuffle", "atomic", "barrier", "branch/control",
    "integer/address", "conversion", "special function", "move/other",
]
_INT = {"IMAD", "IADD3", "IADD", "LEA", "SHF", "LOP3", "ISETP", "IMNMX", "SEL", "IABS", "SHL", "SHR",
        "LOP", "IMUL", "XMAD", "FLO", "POPC", "BREV", "PRMT", "BMSK", "SGXT", "IDP", "UIADD3", "UIMAD",
        "ULEA", "USHF", "ULOP3", "UISETP", "USEL", "UPRMT", "ULDC", "VIADD", "VIMNMX", "IMNMX3", "R2UR"}
_CONTROL = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "BPT",
            "YIELD", "NANOSLEEP", "BMOV", "BREAK", "KILL", "ACQBULK", "ELECT", "PLOP3", "PSETP"}


def _width(mods: list[str]) -> int:
    for m in mods:
        if m in ("256", "128", "64", "32"):
            return int(m)
        if m in ("U8", "S8"):
            return 8
        if m in ("U16", "S16"):
            return 16
    return 32


def classify(instr: str) -> str:
    """Class of one SASS instruction, e.g. ``@P0 LDG.E.128 R4, desc[UR4][R2.64] ;``."""
    text = instr.strip()
    if text.startswith("@"):
        text = text.split(None, 1)[1] if " " in text else ""
    opcode = text.split(None, 1)[0].rstrip(";") if text else ""
    base, *mods = opcode.split(".")
    # FFMA2/FADD2/FMUL2 (sm_100+): two fp32 operations in one instruction, counted once here
    if base in ("FFMA", "FFMA2"):
        return "fp32 fma"
    if base in ("FADD", "FADD2"):
        return "fp32 add"
    if base in ("FMUL", "FMUL2"):
        return "fp32 mul"
    if base in ("FSETP", "FMNMX", "FSEL", "FCHK", "FSET", "FSWZADD", "FMNMX3"):
        return "fp32 other"
    if base in ("DFMA", "DADD", "DMUL", "DSETP", "DMNMX"):
        return "fp64"
    if base.startswith(("HADD", "HFMA", "HMUL", "HSET", "HMNMX")):
        ops = [o.strip() for o in text.split(None, 1)[1].split(",")] if " " in text else []
        if base == "HFMA2" and ops[1:3] == ["-RZ", "RZ"]:
            # -0 * 0 + (imm, imm): ptxas's idiom for loading a 32-bit constant, not fp16 math
            return "move/other"
        return "fp16/bf16"
    if base.endswith("MMA") or base in ("HGMMA", "QGMMA", "IGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA"):
        return "tensor mma"
    if base in ("LDG", "STG"):
        return f"global {'load' if base == 'LDG' else 'store'} {_width(mods)}"
    if base in ("LDS", "STS"):
        w = _width(mods)
        kind = "load" if base == "LDS" else "store"
        return f"shared {kind} {w}" if w in (32, 64, 128) else f"shared {kind} other"
    if base in ("LDSM", "STSM"):
        return "shared load other" if base == "LDSM" else "shared store other"
    if base in ("LDGSTS", "LDGDEPBAR", "DEPBAR", "UBLKCP", "UTMALDG", "UTMASTG", "SYNCS"):
        return "async copy"
    if base in ("LDL", "STL"):
        return "local load/store"
    if base == "SHFL":
        return "shuffle"
    if base in ("ATOM", "ATOMS", "ATOMG", "RED", "REDUX"):
        return "atomic"
    if base in ("BAR", "MEMBAR", "ERRBAR", "CCTL", "FENCE"):
        return "barrier"
    if base in _CONTROL:
        return "branch/control"
    if base in _INT or base.startswith("U") and base[1:] in _INT:
        return "integer/address"
    if base in ("F2F", "I2F", "F2I", "I2I", "F2FP", "I2FP", "F2IP", "FRND"):
        return "conversion"
    if base == "MUFU":
        return "special function"
    return "move/other"


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def instruction_mix(sass: str) -> dict[str, int]:
    """Static count of SASS instructions by class (NOPs left out)."""
    mix = dict.fromkeys(MIX_CLASSES, 0)
    for m in _SASS_LINE.finditer(sass):
        instr = m.group(1)
        if re.match(r"(@!?U?P\w+\s+)?NOP\b", instr):
            continue
        mix[classify(instr)] += 1
    return mix


# --- loops ----------------------------------------------------------------------------------
_SASS_ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def sass_lines(sass: str) -> list[tuple[int, str]]:
    """(address, instruction) for every SASS instruction of the listing, NOPs included."""
    return [(int(m.group(1), 16), m.group(2)) for m in _SASS_ADDR.finditer(sass)]


@dataclass
class Loop:
    """A loop of the SASS, found from its back edge (a branch to an earlier address).

    ``mix``: instructions per iteration by class (the whole body, nested loops included, NOPs
    left out); ``own_mix``: the body minus the nested loops' bodies; ``depth``: 0 for an
    outermost loop; ``parent``: index of the enclosing loop in ``Report.loops`` (or None);
    ``innermost``: no loop inside.  ``trips`` is filled by :func:`perfkit.model.dynamic_mix`
    (warp-iterations over the whole launch) when a problem is known.
    """

    start: int
    end: int
    mix: dict
    own_mix: dict
    depth: int = 0
    parent: int | None = None
    innermost: bool = True
    body: list = field(default_factory=list, repr=False)  # the instructions, in order

    @property
    def instructions(self) -> int:
        return sum(self.mix.values())

    def __str__(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in sorted(self.mix.items(), key=lambda kv: -kv[1]) if v)
        return f"loop 0x{self.start:04x}-0x{self.end:04x} (depth {self.depth}): {self.instructions} instr/iter: {top}"


def find_loops(sass: str) -> list[Loop]:
    """Every loop of a SASS listing (one per back edge; several back edges to one header
    are one loop), outermost first.  A branch to itself (the trap after EXIT) is not a loop."""
    lines = sass_lines(sass)
    spans: dict[int, int] = {}
    for addr, instr in lines:
        # the predicate may be a guard (@P0 BRA) or an operand (BRA.U UP0, 0x730: sm_100's
        # uniform back edges; @!P1 BRA !P3, 0x3030)
        m = re.match(r"(?:@!?U?P\w+\s+)?BRA(?:\.\S+)?\s+(?:!?U?P\w+\s*,\s*)?(?:`\(\S+\)\s*)?(0x[0-9a-f]+)", instr)
        if m:
            target = int(m.group(1), 16)
            if target < addr:
                spans[target] = max(spans.get(target, 0), addr)
    ordered = sorted(spans.items(), key=lambda se: (se[0], -se[1]))
    loops: list[Loop] = []
    for start, end in ordered:
        body = [ins for a, ins in lines if start <= a <= end and not re.match(r"(@!?U?P\w+\s+)?NOP\b", ins)]
        mix = {}
        for ins in body:
            c = classify(ins)
            mix[c] = mix.get(c, 0) + 1
        loops.append(Loop(start=start, end=end, mix=mix, own_mix=dict(mix), body=body))
    for i, lp in enumerate(loops):  # nesting: the tightest enclosing loop is the parent
        encl = [j for j, o in enumerate(loops) if j != i and o.start <= lp.start and lp.end <= o.end
                and (o.start, o.end) != (lp.start, lp.end)]
        if encl:
            lp.parent = min(encl, key=lambda j: loops[j].end - loops[j].start)
    for i, lp in enumerate(loops):
        d, p = 0, lp.parent
        while p is not None:
            d, p = d + 1, loops[p].parent
        lp.depth = d
        kids = [o for o in loops if o.parent == i]
        lp.innermost = not kids
        for k in kids:
            for c, n in k.mix.items():
                lp.own_mix[c] = lp.own_mix.get(c, 0) - n
    return loops


def _math(m: dict) -> int:
    return sum(v for k, v in m.items() if k.startswith(("fp32", "fp16", "fp64")))


def _mem(m: dict) -> int:
    return sum(v for k, v in m.items() if k.startswith(("global", "shared")))


def hot_loop_of(loops: list[Loop]) -> Loop | None:
    """The hot loop: the innermost loop doing the arithmetic work.

    Among the innermost loops, the one doing the most arithmetic (tensor mma, then
    fp32/fp16/fp64 math), then the one moving the most memory, then the largest body.  But the
    work may sit in a loop that is not innermost: a tensor-core k-loop whose tile loads are
    loops of their own (nested, innermost, with no mma).  So, kind by kind (tensor mma first,
    then the float math): if the best innermost loop does none of that kind while some loop's
    OWN body (its nested loops' bodies left out) does, the hot loop is the deepest such loop
    (then the most of that kind, the most memory, the largest body).  ``mix`` stays the whole
    body per iteration, nested loops included."""
    inner = [lp for lp in loops if lp.innermost]
    if not inner:
        return None

    def weight(lp):
        m = lp.mix
        return (m.get("tensor mma", 0), _math(m), _mem(m), lp.instructions)

    best = max(inner, key=weight)
    for score in (lambda m: m.get("tensor mma", 0), _math):
        if score(best.mix) > 0:
            return best
        doing = [lp for lp in loops if score(lp.own_mix) > 0]
        if doing:
            return max(doing, key=lambda lp: (lp.depth, score(lp.own_mix), _mem(lp.own_mix), lp.instructions))
    return best


# --- the report -----------------------------------------------------------------------------
@dataclass
class Report:
    variant: str
    kernel_name: str
    cc: tuple[int, int]
    registers: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    local_bytes: int
    block: tuple[int, ...]
    grid: tuple[int, ...]
    occupancy: occ.Occupancy
    mix: dict
    ptx: str = field(repr=False)
    cubin: bytes = field(repr=False)
    sass: str = field(repr=False)
    ptxas_log: str = field(repr=False)
    signature: list = field(default_factory=list)
    launches: list = field(default_factory=list)  # one summary per kernel the rung launches
    arch: str = ""                  # the target built for: sm_90a from 9.0 on, as Numba builds it
    reserved_shared_bytes: int = 0  # of static_shared_bytes: the system's 1 KiB the sm_90+ cubin holds

    def __getattribute__(self, name):
        # a report from the static store has no PTX or cubin: the first read builds them
        if name in ("ptx", "cubin") and object.__getattribute__(self, "__dict__").get("_full") is not None:
            d = object.__getattribute__(self, "__dict__")
            full, d["_full"] = d["_full"], None
            launch = full()
            d["ptx"], d["cubin"] = launch["ptx"], base64.b64decode(launch["cubin_b64"])
        return object.__getattribute__(self, name)

    @property
    def shared_bytes(self) -> int:
        return self.static_shared_bytes + self.dynamic_shared_bytes

    @property
    def threads_per_block(self) -> int:
        n = 1
        for b in self.block:
            n *= b
        return n

    @property
    def instructions(self) -> int:
        return sum(self.mix.values())

    @property
    def loops(self) -> list:
        """Every loop of the SASS (:class:`Loop`), outermost first."""
        if getattr(self, "_loops", None) is None:
            self._loops = find_loops(self.sass)
        return self._loops

    @property
    def hot_loop(self):
        """The innermost loop that does the most work (:class:`Loop`: ``.mix`` is instructions
        per iteration by class), or None when the kernel has no loop."""
        return hot_loop_of(self.loops)

    def summary(self) -> dict:
        return {"variant": self.variant, "kernel": self.kernel_name, "cc": f"{self.cc[0]}.{self.cc[1]}",
                "arch": self.arch, "reserved_shared_bytes": self.reserved_shared_bytes,
                "registers": self.registers, "shared_bytes": self.shared_bytes,
                "static_shared_bytes": self.static_shared_bytes, "dynamic_shared_bytes": self.dynamic_shared_bytes,
                "stack_bytes": self.stack_bytes, "spill_store_bytes": self.spill_store_bytes,
                "spill_load_bytes": self.spill_load_bytes, "threads_per_block": self.threads_per_block,
                "occupancy": round(self.occupancy.ratio, 4), "blocks_per_sm": self.occupancy.blocks_per_sm,
                "limiter": self.occupancy.limiter, "instructions": self.instructions}

    def _rows(self) -> list[tuple[str, str]]:
        o = self.occupancy
        return [
            ("kernel", f"{self.kernel_name} ({self.arch or f'sm_{self.cc[0]}{self.cc[1]}'})"),
            ("block / grid", f"{'x'.join(map(str, self.block))} threads / {'x'.join(map(str, self.grid))} blocks"),
            ("registers / thread", str(self.registers)),
            ("shared memory / block", f"{self.shared_bytes} B (static {self.static_shared_bytes}"
             + (f", of which {self.reserved_shared_bytes} the system's reservation" if self.reserved_shared_bytes else "")
             + f", dynamic {self.dynamic_shared_bytes})"),
            ("stack / spills", f"{self.stack_bytes} B stack, {self.spill_store_bytes} B spill stores, {self.spill_load_bytes} B spill loads"),
            ("occupancy", str(o)),
            ("blocks/SM allowed by", ", ".join(f"{k} {v if v is not None else '-'}" for k, v in o.limits.items())),
            ("SASS instructions", f"{self.instructions} (static count)"),
        ]

    def __str__(self) -> str:
        w = max(len(k) for k, _ in self._rows())
        lines = [f"anatomy of {self.variant}"] + [f"  {k:<{w}}  {v}" for k, v in self._rows()]
        lines.append("  instruction mix: " + ", ".join(f"{k} {v}" for k, v in self.mix.items() if v))
        if len(self.launches) > 1:
            lines.append("  launches: " + "; ".join(f"{l['kernel']} ({l['registers']} regs)" for l in self.launches))
        return "\n".join(lines)

    def plot_mix(self, ax=None, title: str | None = None):
        return _plot_mixes({self.variant: self.mix}, ax=ax, title=title or f"instruction mix: {self.variant}")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(v)}</td></tr>" for k, v in self._rows())
        return (f"<div><b>anatomy of {html.escape(self.variant)}</b><table>{rows}</table>"
                f"{_fig_html(self.plot_mix)}</div>")


def _plot_mixes(mixes: dict[str, dict], ax=None, title: str = ""):
    import matplotlib.pyplot as plt
    import numpy as np

    classes = [c for c in MIX_CLASSES if any(m.get(c) for m in mixes.values())]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.22 * max(len(classes), 3) + 1.0))
    y = np.arange(len(classes))
    h = 0.8 / max(len(mixes), 1)
    for i, (name, mix) in enumerate(mixes.items()):
        ax.barh(y + i * h, [mix.get(c, 0) for c in classes], height=h, label=name)
    ax.set_yticks(y + h * (len(mixes) - 1) / 2, classes, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("static SASS instructions")
    ax.set_title(title, fontsize=10)
    if len(mixes) > 1:
        ax.legend(fontsize=8)
    return ax


def _fig_html(draw) -> str:
    import matplotlib.pyplot as plt

    ax = draw()
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(ax.figure)
    return f"<img src='data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}'/>"


@dataclass
class Diff:
    a: Report
    b: Report
    rows: list  # (what, before, after, delta)
    mix: dict   # class -> (before, after, delta), changed classes only

    def __str__(self) -> str:
        lines = [f"anatomy diff: {self.a.variant} ({self.a.arch or self.a.cc}) -> "
                 f"{self.b.variant} ({self.b.arch or self.b.cc})"]
        for what, x, y, d in self.rows:
            lines.append(f"  {what:<22} {x!s:>10} -> {y!s:<10} {d}")
        if self.mix:
            lines.append("  instruction mix: " + ", ".join(f"{k} {x}->{y}" for k, (x, y, _) in self.mix.items()))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(w)}</th><td>{html.escape(str(x))}</td>"
                       f"<td>{html.escape(str(y))}</td><td>{html.escape(str(d))}</td></tr>"
                       for w, x, y, d in self.rows + [(k, *v) for k, v in self.mix.items()])
        head = f"<tr><th></th><th>{html.escape(self.a.variant)}</th><th>{html.escape(self.b.variant)}</th><th>change</th></tr>"
        draw = lambda: _plot_mixes({self.a.variant: self.a.mix, self.b.variant: self.b.mix},  # noqa: E731
                                   title="instruction mix")
        return f"<div><b>anatomy diff</b><table>{head}{body}</table>{_fig_html(draw)}</div>"


def diff(a: Report, b: Report) -> Diff:
    """What changed from report ``a`` to report ``b`` (two rungs, or one rung at two targets)."""
    def delta(x, y):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            d = y - x
            return f"{d:+.0%}" if isinstance(d, float) else f"{d:+d}"
        return "" if x == y else "changed"

    fields_ = [("target", lambda r: f"sm_{r.cc[0]}{r.cc[1]}"), ("registers", lambda r: r.registers),
               ("shared bytes", lambda r: r.shared_bytes), ("stack bytes", lambda r: r.stack_bytes),
               ("spill stores", lambda r: r.spill_store_bytes), ("spill loads", lambda r: r.spill_load_bytes),
               ("threads/block", lambda r: r.threads_per_block),
               ("occupancy", lambda r: round(r.occupancy.ratio, 3)),
               ("blocks/SM", lambda r: r.occupancy.blocks_per_sm), ("limiter", lambda r: r.occupancy.limiter),
               ("instructions", lambda r: r.instructions)]
    rows = [(w, f(a), f(b), delta(f(a), f(b))) for w, f in fields_]
    mix = {c: (a.mix.get(c, 0), b.mix.get(c, 0), b.mix.get(c, 0) - a.mix.get(c, 0)) for c in MIX_CLASSES
           if a.mix.get(c, 0) != b.mix.get(c, 0)}
    return Diff(a, b, rows, mix)


# --- compile (cached) and report ------------------------------------------------------------
def _cache_dir() -> Path:
    return cache.folder("anatomy")


def _job(variant: Variant, problem: Problem, cc) -> dict:
    return static.job(variant, problem, cc)


def static_key(variant: Variant, problem: Problem, cc) -> str:
    """The key of this build in the static store (:mod:`perfkit.static`): the job and the
    rung's source closure, not the tool versions (the entry carries those)."""
    return static.build_key(variant, problem, _check_cc(cc))


def _compact(result: dict) -> dict:
    """A build as the store keeps it: the SASS as (address, instruction) lines, the entry's name
    and whether the cubin holds the system's shared reservation; not the PTX and cubin (~130 KB a
    kernel), which a report rebuilds when asked for them."""
    out = []
    for launch in result["launches"]:
        lo = {k: launch[k] for k in launch if k not in ("ptx", "cubin_b64", "sass")}
        lo["entry"] = _entry_name(launch["ptx"])
        lo["reserved_section"] = b".nv.reservedSmem" in base64.b64decode(launch["cubin_b64"])
        lo["sass"] = [f"/*{a:04x}*/ {i} ;" for a, i in sass_lines(launch["sass"])]  # a line each: diffable
        out.append(lo)
    return {"launches": out}


def _compile(variant: Variant, problem: Problem, cc, *, store: bool = True) -> dict:
    """The build of every launch (local cache -> static store -> the compiler in a child)."""
    job = _job(variant, problem, cc)
    source = source_hash(variant)
    key_doc = json.dumps({"job": job, "source": source, "tools": _versions(), "v": 4},
                         sort_keys=True, default=str)
    key = hashlib.sha256(key_doc.encode()).hexdigest()[:32]
    path = _cache_dir() / f"{key}.json"
    skey = static.build_key(variant, problem, cc, source)  # the closure hashed once, above
    what = f"{variant.label} @ {problem.label} sm_{cc[0]}{cc[1]}"
    if path.exists():
        try:
            result = json.loads(path.read_text())
            if static.writing():  # rewritten: refresh keeps what it touched
                static.put("anatomy", skey, _compact(result), what=what, tools=_versions())
            if store or "ptx" in result["launches"][0]:
                return result
        except (OSError, json.JSONDecodeError, KeyError, IndexError):
            pass  # a damaged entry is rebuilt
    if store and not static.writing():
        hit = static.get("anatomy", skey, _versions())
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
    static.put("anatomy", skey, _compact(result), what=what, tools=_versions())
    return result


def _launch_entry(launch: dict) -> str:
    return launch["entry"] if "entry" in launch else _entry_name(launch["ptx"])


def _entry_usage(launch: dict) -> dict:
    usage = _parse_res_usage(launch["res_usage"])
    entry = _launch_entry(launch)
    if entry not in usage:
        raise AnatomyError(f"cuobjdump -res-usage does not list the entry {entry}; it has {list(usage)}")
    return usage[entry]


def _reserved_in_cubin(cc, shared: int, ptxas: dict, cubin: bytes = b"") -> int:
    """From sm_90 on, a kernel that uses shared memory carries the system's 1 KiB reservation in
    its shared section (``.nv.reservedSmem``), so ``cuobjdump -res-usage`` SHARED is ptxas's
    "bytes smem" + 1024. The occupancy calculator adds the reservation itself; counting it
    twice would charge 2 KiB per block.

    ptxas's figure cannot always be subtracted: on the H100 machine (a driver present, CUDA 13.0)
    the report found no reservation (either no "bytes smem" figure, parsed as 0, or one that held
    the 1 KiB already; its log was not kept), so the whole 9216 counted as the kernel's and the
    reservation was charged twice (10240).  So on sm_90+ a cubin that holds ``.nv.reservedSmem``
    and a shared section of at least the reservation is taken to carry it, whatever ptxas said."""
    reservation = occ.limits_for(cc).reserved_shared_per_block
    extra = shared - ptxas.get("static_shared_bytes", shared)
    if 0 < extra <= reservation:
        return extra
    if tuple(cc) >= (9, 0) and shared >= reservation > 0 and b".nv.reservedSmem" in cubin:
        return reservation
    return 0


def _report(variant: Variant, cc, launch: dict, summaries: list) -> Report:
    entry = _launch_entry(launch)
    ptxas = _parse_ptxas(launch["ptxas_log"], entry)
    u = _entry_usage(launch)
    regs, static_smem, stack = u["REG"], u["SHARED"], u["STACK"]
    threads = 1
    for b in launch["block"]:
        threads *= b
    try:
        section = (b".nv.reservedSmem" if launch["reserved_section"] else b"") if "reserved_section" in launch \
            else base64.b64decode(launch["cubin_b64"])
        reserved = _reserved_in_cubin(cc, static_smem, ptxas, section)
        user_smem = static_smem - reserved
        # Numba never raises a kernel's dynamic shared-memory limit: 48 KiB per block at most
        o = occ.occupancy(cc, threads, regs, user_smem + launch["dynamic_shared_bytes"], opt_in=False)
    except occ.OccupancyError as exc:
        raise AnatomyError(f"{variant.label} on sm_{cc[0]}{cc[1]}: {exc}") from None
    return Report(variant=variant.label, kernel_name=launch["kernel_name"], cc=tuple(cc), registers=regs,
                  static_shared_bytes=static_smem, dynamic_shared_bytes=launch["dynamic_shared_bytes"],
                  stack_bytes=stack, spill_store_bytes=ptxas.get("spill_store_bytes", 0),
                  spill_load_bytes=ptxas.get("spill_load_bytes", 0), local_bytes=u.get("LOCAL", 0),
                  block=tuple(launch["block"]), grid=tuple(launch["grid"]), occupancy=o,
                  mix=instruction_mix(launch["sass"]), ptx=launch.get("ptx", ""),
                  cubin=base64.b64decode(launch["cubin_b64"]) if "cubin_b64" in launch else b"", sass=launch["sass"],
                  ptxas_log=launch["ptxas_log"], signature=launch["signature"], launches=summaries,
                  arch=launch.get("arch", ""), reserved_shared_bytes=reserved)


def inspect(variant: Variant, problem: Problem, cc=(9, 0), kernel: int = 0) -> Report:
    """Compile ``variant``'s launches for ``problem`` at compute capability ``cc`` and report on
    launch number ``kernel`` (``report.launches`` summarises all of them)."""
    cc = _check_cc(cc)
    if not isinstance(variant, Variant) or not isinstance(problem, Problem):
        raise TypeError("inspect(variant, problem, cc): pass a perfkit Variant and Problem")
    if variant.oracle:
        raise AnatomyError(f"{variant.label} is the oracle, a library call (cuBLAS / CuPy / PyTorch): "
                           "there is no kernel of ours to inspect")
    try:
        variant.supports(problem)
    except UnsupportedProblem as exc:
        raise UnsupportedRung(f"{variant.label} cannot take {problem.label}: {exc} "
                           f"(variant.example(problem) gives one it can)") from None
    result = _compile(variant, problem, cc)
    launches = result["launches"]
    if not launches:
        raise AnatomyError(f"{variant.label} launches no kernel for {problem.label}")
    if not 0 <= kernel < len(launches):
        raise AnatomyError(f"{variant.label} has {len(launches)} launch(es); kernel={kernel} is out of range")
    summaries = []
    for launch in launches:
        u = _entry_usage(launch)
        summaries.append({"kernel": launch["kernel_name"], "registers": u["REG"], "shared_bytes": u["SHARED"]
                          + launch["dynamic_shared_bytes"], "block": launch["block"], "grid": launch["grid"]})
    rep = _report(variant, cc, launches[kernel], summaries)
    if "ptx" not in launches[kernel]:  # from the static store: the PTX and cubin are built when asked for
        rep.__dict__["_full"] = lambda: _compile(variant, problem, cc, store=False)["launches"][kernel]
    return rep


# --- command line ---------------------------------------------------------------------------
def _find_rung(ladder, rung: str):
    for v in ladder:
        if rung == str(v.rung) or rung == v.name or rung == v.label:
            return v
    raise AnatomyError(f"no rung {rung!r}; have: {', '.join(v.label for v in ladder)}")


def _op_module(op: str):
    """``perfkit.kernels.<op>``, or ``perfkit.kernels.norm.<op>`` for the normalization ops
    (``softmax`` as well as ``norm.softmax``); an unknown op says which exist."""
    from .kernels import registry

    try:
        return registry.module(op)
    except LookupError as exc:
        raise AnatomyError(str(exc)) from None


def cli(argv: list[str] | None = None) -> int:
    """``perfkit anatomy OP RUNG [--cc 9.0] [--size k=v ...] [--diff RUNG2] [--sass]``."""
    ap = argparse.ArgumentParser(prog="perfkit anatomy", description="what the compiler made of a rung")
    ap.add_argument("op", help="op module under perfkit.kernels, e.g. saxpy, gemm, softmax (= norm.softmax)")
    ap.add_argument("rung", help="rung number or name")
    ap.add_argument("--cc", default="9.0", help="target compute capability (default 9.0)")
    ap.add_argument("--size", action="append", default=[], metavar="K=V", help="problem field override")
    ap.add_argument("--diff", metavar="RUNG2", help="compare with another rung")
    ap.add_argument("--diff-cc", metavar="CC", help="compare with the same rung at another target")
    ap.add_argument("--sass", action="store_true", help="print the SASS too")
    ap.add_argument("--access", action="store_true",
                    help="simulate one block of a small twin of the problem and print its shared-memory bank "
                         "conflicts and global coalescing per source line (perfkit.banks; no GPU needed)")
    args = ap.parse_args(argv)
    try:
        mod = _op_module(args.op)
        ladder = getattr(mod, "LADDER")
        problem = getattr(mod, "EXAMPLE_PROBLEM", None)
        if args.size:
            import yaml

            kw = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.size)}
            problem = dataclasses.replace(problem, **kw) if problem is not None else mod.Problem(**kw)
        if problem is None:
            raise AnatomyError(f"{args.op} has no EXAMPLE_PROBLEM: give its fields with --size k=v")
        v = _find_rung(ladder, args.rung)
        problem = v.example(problem)
        rep = inspect(v, problem, cc=args.cc)
        print(rep)
        if args.diff or args.diff_cc:
            w = _find_rung(ladder, args.diff) if args.diff else v
            other = inspect(w, w.example(problem), cc=args.diff_cc or args.cc)
            print(diff(rep, other))
        if args.sass:
            print(rep.sass)
        if args.access:
            from . import banks

            small = banks.small_problem(v, problem)
            try:
                print(banks.count(v, small).table())
            except banks.BankError as exc:
                print(f"perfkit anatomy --access: {exc}", file=sys.stderr)
                return 2
    except (AnatomyError, ModuleNotFoundError, AttributeError, TypeError, ValueError) as exc:
        print(f"perfkit anatomy: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        import perfkit  # noqa: F401  (PERFKIT_BACKEND=compile: the real numba.cuda)

        sys.exit(_worker_main(sys.argv[2], sys.argv[3]))
    sys.exit(cli(sys.argv[1:]))
