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
write down (see ``fingerprint_of``) is built every time.

The package, by concern: ``target`` (compute capabilities, tools, errors), ``build`` (the
compiler child and the cached compile), ``fingerprint`` (the per-kernel cache key), ``sass``
(parsing, instruction mix, loops), ``report`` (``inspect``, ``Report``, ``diff``), ``command``
(the command line); ``python -m perfkit.anatomy`` is ``__main__``.
"""
from __future__ import annotations

from ..static import source_hash  # noqa: F401  (the key of every cached build)
from .build import compile_job, compile_rung, rung_job, static_key, worker_main
from .command import cli, op_module
from .fingerprint import Uncacheable, fingerprint_of, kernel_cache_key
from .report import Diff, Report, diff, inspect, reserved_in_cubin
from .sass import (MIX_CLASSES, Loop, classify, entry_name, find_loops, hot_loop_of, instruction_mix, parse_ptxas,
                   parse_res_usage, sass_lines)
from .target import SUPPORTED_CC, AnatomyError, UnsupportedRung, check_cc, tool_path, versions

__all__ = ["AnatomyError", "UnsupportedRung", "Report", "Diff", "Loop", "inspect", "diff", "classify", "instruction_mix",
           "sass_lines", "source_hash", "static_key",
           "find_loops", "hot_loop_of",
           "cli", "SUPPORTED_CC", "MIX_CLASSES", "tool_path"]

# the names these had when anatomy was one module (tests and older callers use them)
_check_cc, _versions, _entry_name = check_cc, versions, entry_name
_parse_res_usage, _parse_ptxas = parse_res_usage, parse_ptxas
_fingerprint, _Uncacheable, _kernel_cache_key = fingerprint_of, Uncacheable, kernel_cache_key
_compile, _compile_job, _job, _worker_main = compile_rung, compile_job, rung_job, worker_main
_reserved_in_cubin, _op_module = reserved_in_cubin, op_module
