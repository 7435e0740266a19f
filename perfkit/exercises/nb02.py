"""Exercises of notebook 02 (GEMM): the shared-memory tile loop, and a padded shared tile with
no bank conflicts."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import backend
from ..kernels import gemm
from ..kernels.base import Launch
from ._core import (Check, Exercise, answer_error, inspect_rung, kernel_rung, register, register_check, run_checked,
                    with_rung)
from .nb01 import LearnerVariant, Rows


def _shared_load_count(mix: dict) -> int:
    return sum(v for k, v in mix.items() if k.startswith("shared load"))


# --- 02.smem_tile -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TiledGemm(LearnerVariant):
    tile: int = 16

    name: ClassVar[str] = "learner_smem_tile"

    def plan(self, problem, bufs):
        T = self.tile
        grid = (-(-problem.n // T), -(-problem.m // T))
        return [Launch(self._kernel(), grid, (T, T), (bufs["a"], bufs["b"], bufs["c"], problem.m, problem.n, problem.k))]


def _smem_tile_steps(answer, seed: int, cc=(9, 0), tile: int = 16, **_):
    bad_tile = not isinstance(tile, int) or isinstance(tile, bool) or not 1 <= tile <= 32
    if bad_tile and answer_error(answer, "kernel") is None:  # a wrong kind of answer is named first
        yield Check("a kernel", False, f"tile must be an int from 1 to 32 (a tile x tile block <= 1024 threads), got {tile!r}")
        return
    v, failed = kernel_rung(answer, functools.partial(TiledGemm, tile=tile))
    if failed:
        yield failed
        return
    for m, n, k in ((1, 1, 1), (19, 21, 18), (3, 35, 2 * tile + 1)):
        ok, msg = run_checked(v, gemm.Problem(m, n, k), seed + m * n * k,
                              f": block ({tile}, {tile}) owns the {tile}x{tile} tile of C at "
                              f"(blockIdx.y * {tile}, blockIdx.x * {tile}); do the bounds checks keep the edge "
                              "threads in the loop (they must still load their tile element and reach every syncthreads)?")
        yield Check(f"correct at m, n, k = {m}, {n}, {k}", ok, msg)
        if not ok:
            return
    rep = inspect_rung(v, gemm.Problem(4096, 4096, 4096), cc)
    if isinstance(rep, str):
        yield Check("stages tiles in shared memory", False, rep)
        return
    need = 2 * tile * tile * 4
    have = rep.shared_bytes - rep.reserved_shared_bytes
    yield Check("stages tiles in shared memory", have >= need and _shared_load_count(rep.mix) > 0,
                f"{have} B of shared memory per block (a {tile}x{tile} tile of A and of B is {need} B), "
                f"{_shared_load_count(rep.mix)} shared loads in the SASS"
                + ("" if have >= need else ": declare As and Bs with cuda.shared.array((TILE, TILE), float32)"))
    yield register_check(rep, 64)
    spills = rep.spill_store_bytes + rep.spill_load_bytes  # a stack frame is allowed here: spills only
    yield Check("no spills", spills == 0, f"{spills} B of spills")


register(Exercise(
    name="02.smem_tile", notebook="02_gemm", title="the shared-memory tile loop",
    task=("Write gemm_tiled(a, b, c, M, N, K): C = A @ B (float32, row-major) with TILE x TILE "
          "tiles of A and B staged in shared memory. The grader launches blocks of (TILE, TILE) "
          "threads on a grid of (ceil(N / TILE), ceil(M / TILE)) and passes tile=TILE; sizes are not "
          "multiples of the tile, so zero-fill the parts of a tile outside A or B."),
    checks=["correct at (1,1,1), (19,21,18), (3,35,2*TILE+1)", "stages tiles in shared memory (anatomy)",
            "registers <= 64", "no spills"],
    steps=_smem_tile_steps, solution="perfkit.exercises.solutions.nb02:gemm_tiled"))


# --- 02.pad -------------------------------------------------------------------------------------
TILE = 32
ROWS_PER_PASS = 8  # blocks of (32, 8) threads: each thread moves 4 elements of a 32x32 tile


@dataclass(frozen=True)
class Transpose(Rows):
    """``out (cols, rows) = inp (rows, cols).T``, float32."""

    op: ClassVar[str] = "exercise.transpose"
    source: ClassVar[str] = "inp"
    who: ClassVar[str] = "transpose"

    def output_specs(self):
        return {"out": ((self.cols, self.rows), self.dtype)}

    def _reference(self, inputs):
        return np.ascontiguousarray(inputs["inp"].astype(np.float64).T)

    @property
    def flops(self):
        return 0.0


@dataclass(frozen=True)
class LearnerTranspose(LearnerVariant):
    name: ClassVar[str] = "learner_transpose"

    def plan(self, problem, bufs):
        grid = (-(-problem.cols // TILE), -(-problem.rows // TILE))
        return [Launch(self._kernel(), grid, (TILE, ROWS_PER_PASS), (bufs["out"], bufs["inp"], problem.rows, problem.cols))]


@dataclass
class Site:
    """Warp-wide shared accesses of one source line and direction, from one simulated launch."""

    filename: str
    lineno: int
    kind: str          # "load" or "store"
    accesses: int
    wavefronts: int
    ideal: int
    text: str = ""     # the line's source, when it was read in another process

    @property
    def degree(self) -> float:
        """Wavefronts per access over the ideal: 1 is conflict free, 32 a 32-way conflict."""
        return self.wavefronts / self.ideal if self.ideal else 1.0

    @property
    def source(self) -> str:
        import linecache

        if self.text:
            return self.text
        import sys

        text = linecache.getline(self.filename, self.lineno).strip()
        if not text:  # perfkit.banks keeps the file's base name: find the full one
            files = list(linecache.cache) + [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
            for full in files:
                if full.endswith("/" + self.filename):
                    text = linecache.getline(full, self.lineno).strip()
                    if text:
                        break
        return text or f"line {self.lineno}"


def count_bank_conflicts(variant, problem, seed: int, child: bool | None = None) -> tuple[list[Site], str]:
    """Per source line of the kernel: warp-wide shared accesses and their wavefronts, from one
    simulated launch: perfkit.banks when it is there, else the graders' own recorder.  Returns
    the sites and the name of the counter.  A process on a GPU (or ``child=True``) counts in a
    child process that runs the simulator, on the learner's kernel as written out by carry()."""
    if child is None:
        child = not backend.is_simulator()
    if child:
        return _count_in_child(variant, problem, seed)
    try:
        from .. import banks
    except ImportError:
        banks = None
    if banks is not None:
        rep = banks.count(variant, problem, max_blocks=None, seed=seed, cache=False)
        return [Site(s["file"], int(s["line"]), s["kind"], int(s["accesses"]), int(s["wavefronts"]), int(s["ideal"]))
                for s in rep.sites], "perfkit.banks"
    from . import _smem

    inputs = problem.make_inputs(seed)
    with _smem.record() as rec:
        variant.run(problem, inputs)
    return [Site(s.filename, s.lineno, s.kind, s.accesses, s.wavefronts, s.accesses) for s in rec.lines()], \
        "the graders' recorder"


def _count_in_child(variant, problem, seed: int) -> tuple[list[Site], str]:
    import json
    import os
    import subprocess
    import sys

    job = json.dumps({"config": variant.config, "problem": problem.params, "seed": seed})
    code = ("import json, sys; from perfkit.exercises import nb02; print('RESULT ' + json.dumps("
            "nb02._child_main(json.loads(sys.argv[1]))))")
    env = {**os.environ, "PERFKIT_BACKEND": "sim", "NUMBA_ENABLE_CUDASIM": "1"}
    r = subprocess.run([sys.executable, "-c", code, job], capture_output=True, text=True, env=env, timeout=600)
    line = next((l for l in reversed(r.stdout.splitlines()) if l.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"the simulator process failed: {(r.stderr or r.stdout).strip()[-1500:]}")
    out = json.loads(line[len("RESULT "):])
    return [Site(**d) for d in out["sites"]], out["counter"] + ", in a simulator process"


def _child_main(job: dict) -> dict:
    """In the simulator child: rebuild the rung (its kernel imported from carry()'s module)."""
    import dataclasses

    variant = LearnerTranspose(**job["config"])
    problem = Transpose(**job["problem"])
    sites, counter = count_bank_conflicts(variant, problem, job["seed"], child=False)
    return {"sites": [{**dataclasses.asdict(s), "text": s.source} for s in sites], "counter": counter}


@with_rung(LearnerTranspose)
def _pad_steps(v, seed: int, cc=(9, 0), **_):
    for rows, cols in ((1, 1), (37, 45), (33, 64)):
        ok, msg = run_checked(v, Transpose(rows, cols), seed + rows * cols,
                              f": block (32, 8) at blockIdx (x, y) owns the 32x32 tile of inp at rows "
                              "32 * blockIdx.y ..., columns 32 * blockIdx.x ...; each thread moves 4 of its "
                              "elements (rows ty, ty + 8, ty + 16, ty + 24)")
        yield Check(f"correct at {rows}x{cols}", ok, msg)
        if not ok:
            return
    rep = inspect_rung(v, Transpose(4096, 4096), cc)
    if isinstance(rep, str):
        yield Check("stages the tile in shared memory", False, rep)
        return
    have = rep.shared_bytes - rep.reserved_shared_bytes
    yield Check("stages the tile in shared memory", have >= TILE * TILE * 4 and _shared_load_count(rep.mix) > 0,
                f"{have} B of shared memory per block, {_shared_load_count(rep.mix)} shared loads in the SASS"
                + ("" if have >= TILE * TILE * 4 else ": read rows of inp into a 32x32 shared tile, write rows of out "
                   "from its columns (both global accesses coalesced)"))
    try:
        sites, counter = count_bank_conflicts(v, Transpose(TILE, 2 * TILE), seed)
    except Exception as exc:
        yield Check("no bank conflicts", False, f"the counting run raised {exc.__class__.__name__}: {exc}")
        return
    bad = [s for s in sites if s.wavefronts > s.ideal]
    if not sites:
        yield Check("no bank conflicts", False, "no shared-memory access was recorded")
    elif not bad:
        yield Check("no bank conflicts", True, f"every warp-wide shared access is one wavefront ({counter}): "
                    + "; ".join(f"{s.kind} `{s.source}` x{s.accesses}" for s in sites))
    else:
        s = max(bad, key=lambda s: s.degree)
        yield Check("no bank conflicts", False,
                    f"{s.degree:.0f}-way bank conflicts on the shared {s.kind} `{s.source}` (line {s.lineno}): its "
                    f"{s.accesses} warp-wide accesses take {s.wavefronts} wavefronts ({counter}). The bank of a "
                    "4-byte word is its word index mod 32: work out the bank of each lane's address in that "
                    "access, and what about the tile's layout puts them all in the same one")


register(Exercise(
    name="02.pad", notebook="02_gemm", title="pad a shared tile: no bank conflicts",
    task=("Write transpose(out, inp, rows, cols): out = inp.T (float32), through a 32x32 shared tile: "
          "read a tile of inp row by row (coalesced), then write out row by row from the tile's columns "
          "(coalesced too). The grader launches blocks of (32, 8) threads on a grid of (ceil(cols / 32), "
          "ceil(rows / 32)). Reading a column of a 32 x 32 float32 tile puts all 32 lanes of a warp in "
          "one bank; pad the tile so it does not."),
    checks=["correct at 1x1, 37x45, 33x64", "stages the tile in shared memory (anatomy)",
            "no bank conflicts (counted from a simulated launch)"],
    steps=_pad_steps, solution="perfkit.exercises.solutions.nb02:transpose"))
