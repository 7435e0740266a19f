"""The simulation itself: :func:`count` runs a rung in Numba's CUDA simulator (in a child
process where this one drives a GPU), records its accesses, tallies them and caches the report
(local cache, then the static store); :func:`small_problem` picks the twin to simulate.

Cost: the simulator runs every thread as a Python thread, so simulate a small problem
(:func:`small_problem`) and at most ``max_blocks`` blocks of each launch; the conflict DEGREE
per access site does not depend on the size, and :mod:`perfkit.model` multiplies it by the
number of shared-memory instructions the compiled kernel executes at the real size."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np

from .. import cache, static
from . import record, tally
from .report import BankError, BankReport


# --- the problem to simulate -----------------------------------------------------------------
def plan_shape(variant, problem):
    launches = variant.plan(problem, variant.host_buffers(problem))
    return [(getattr(l.kernel, "py_func", l.kernel), tuple(l.block)) for l in launches]


def small_problem(variant, problem, budget_bytes: float = 96 * 1024, floor: int = 32):
    """A twin of ``problem`` with its integer sizes halved (largest first) while the rung
    still supports it, launches the same kernels with the same block shapes, every size
    stays >= ``floor`` (or its own value when smaller), and until ``problem.bytes`` is under
    ``budget_bytes``; where that cannot reach the budget, the sizes still whole are halved
    down to 16.  Conflicts per access depend on the index arithmetic, not the size."""
    from ..kernels.base import ProblemError, UnsupportedProblem

    try:
        shape0 = plan_shape(variant, problem)
    except Exception:
        shape0 = None
    fields = [f.name for f in dataclasses.fields(problem)
              if isinstance(getattr(problem, f.name), (int, np.integer)) and not isinstance(getattr(problem, f.name), bool)]
    cur = problem
    frozen: set = set()
    low = min(floor, 16)
    while cur.bytes > budget_bytes:
        cands = [f for f in fields if f not in frozen and getattr(cur, f) // 2 >= min(floor, getattr(problem, f))
                 and getattr(cur, f) > 1]
        if not cands:
            # still too big with every size at the floor (batchnorm: n=32, h=w=56): halve the
            # sizes not halved yet down to 16 (a channel of n x h x w values stays far longer
            # than a block, and a plane of 28 x 28 floats is still a whole number of 32-byte
            # sectors, as 56 x 56 is, so the lanes of a warp cross sectors together; the sizes a
            # kernel tiles keep the floor)
            cands = [f for f in fields if f not in frozen and getattr(cur, f) == getattr(problem, f)
                     and getattr(cur, f) // 2 >= low]
            cands = cands or [f for f in fields if f not in frozen and getattr(cur, f) // 2 >= low
                              and getattr(cur, f) < getattr(problem, f) and getattr(cur, f) < floor]
        if not cands:
            break
        f = max(cands, key=lambda f: getattr(cur, f))
        try:
            nxt = dataclasses.replace(cur, **{f: getattr(cur, f) // 2})
            variant.supports(nxt)
            if shape0 is not None:
                s = plan_shape(variant, nxt)
                if [b for _, b in s] != [b for _, b in shape0] or len(s) != len(shape0):
                    raise UnsupportedProblem("plan changed")
        except (ProblemError, UnsupportedProblem, ValueError):
            frozen.add(f)
            continue
        cur = nxt
    return cur


def _cache_key(variant, problem, max_blocks, vectorize=True) -> str:
    """Local cache and static store key of one simulation (path-independent: the source closure
    is hashed by package paths)."""
    return static.key({"v": type(variant).__module__ + "." + type(variant).__qualname__, "config": variant.config,
                       "problem": type(problem).__qualname__, "params": problem.params, "max_blocks": max_blocks,
                       "vectorize": vectorize, "source": static.source_hash(variant),
                       "code": static.producer_version("banks")})


def _cache_path(variant, problem, max_blocks, vectorize=True) -> Path:
    return cache.root() / "banks" / f"{_cache_key(variant, problem, max_blocks, vectorize)}.json"


def count(variant, problem, *, max_blocks: int | None = 1, seed: int = 0, cache: bool = True,
          vectorize: bool = True) -> BankReport:
    """Simulate ``variant`` on ``problem`` (in Numba's CUDA simulator) and count the wavefronts of
    its shared-memory accesses, launch by launch, for the first ``max_blocks`` blocks of each
    launch (``None``: every block).  Counts are for the simulated blocks; ``scaled`` them to a
    grid.  Works only in a process that runs the simulator (``PERFKIT_BACKEND=sim`` or no GPU);
    on a GPU, ask Nsight Compute.  Pass a small problem (:func:`small_problem`).
    ``vectorize=False`` counts every element access as its own instruction (what the SASS does
    where the compiler did not merge a run of accesses into one 64/128-bit access)."""
    from .. import backend

    if variant.oracle:
        raise BankError(f"{variant.label} is a library call: no kernel of ours to simulate")
    path = _cache_path(variant, problem, max_blocks, vectorize) if cache else None
    if path is not None and path.exists():
        try:
            d = json.loads(path.read_text())
            if static.writing():
                static.put("banks", path.stem, d, what=f"{variant.label} @ {problem.label}")
            return BankReport(**d)
        except (OSError, ValueError, TypeError):
            pass
    if path is not None and not static.writing():
        d = static.get("banks", path.stem)
        if d is not None:
            return BankReport(**d)
    if not backend.is_simulator():
        # a GPU process cannot also run the simulator (numba.cuda is one or the other per
        # process): the simulation runs in a child that chose the simulator, so a notebook on a
        # GPU shows the same access counts (and estimates) as one on a laptop
        return _count_in_child(variant, problem, max_blocks, seed, path, vectorize)
    record.install()
    variant.supports(problem)
    inputs = problem.make_inputs(seed)
    prepared = variant.prepare(problem, inputs)
    # one simulation run serves both settings of ``vectorize`` (the run is the cost; the
    # grouping of its recorded accesses into instructions is cheap): both are cached
    reports = {vec: BankReport(variant=variant.label, problem=problem.label, blocks=0)
               for vec in ((vectorize, not vectorize) if path is not None else (vectorize,))}
    with _LOCK:
        for launch in prepared.launches:
            grid = launch.grid
            if max_blocks is not None:
                keep, g = max_blocks, []
                for d in (tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)):
                    take = max(1, min(int(d), keep))  # first blocks along x, then y, then z
                    g.append(take)
                    keep = max(1, keep // take)
                grid = tuple(g)
            with record.recording() as rec:
                args = [record.recording_arg(a) for a in launch.args]
                # the launch keeps its grid (a persistent kernel sizes its work by gridDim: one
                # block of a 16-block grid handles a sixteenth of the rows, not all of them);
                # only the blocks inside ``grid`` run
                with record.only_blocks(grid if max_blocks is not None else None):
                    launch.kernel[launch.grid, launch.block, 0, launch.shared_bytes](*args)
            tpb = int(np.prod(launch.block))
            both = {**tally.rereads(rec), **tally.l1_hits(rec, tpb)}
            for vec, rep in reports.items():
                rep.blocks += int(np.prod(grid))
                before = (rep.load_accesses, rep.store_accesses)
                tally.tally_shared(rec, tpb, rep, vec)
                tally.tally_global(rec, tpb, rep, vec, both)
                # this launch's warp-wide shared accesses (the totals add up every launch)
                rep.global_launches[-1]["smem_load_accesses"] = rep.load_accesses - before[0]
                rep.global_launches[-1]["smem_store_accesses"] = rep.store_accesses - before[1]
                rep.global_launches[-1]["blocks"] = int(np.prod(grid))
                # the launch's whole grid and the bytes of the arrays it is passed (to scale the
                # simulated blocks' accesses to the launch)
                rep.global_launches[-1]["launch_blocks"] = int(np.prod(launch.grid))
                rep.global_launches[-1]["arg_bytes"] = int(sum(getattr(a, "nbytes", 0) for a in launch.args
                                                              if getattr(a, "ndim", 0) > 0))
    if path is not None:
        for vec, rep in reports.items():
            pth = path if vec == vectorize else _cache_path(variant, problem, max_blocks, vec)
            pth.parent.mkdir(parents=True, exist_ok=True)
            tmp = pth.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(dataclasses.asdict(rep)))
            os.replace(tmp, pth)
            static.put("banks", pth.stem, dataclasses.asdict(rep), what=f"{variant.label} @ {problem.label}")
    return reports[vectorize]


_LOCK = threading.Lock()


def _count_in_child(variant, problem, max_blocks, seed, path, vectorize) -> BankReport:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        jp, op = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jp.write_text(json.dumps({**static.job(variant, problem, ()), "max_blocks": max_blocks, "seed": seed,
                                  "cache": path is not None, "vectorize": vectorize}, default=str))
        env = {**os.environ, "PERFKIT_BACKEND": "sim", "NUMBA_ENABLE_CUDASIM": "1"}
        r = subprocess.run([sys.executable, "-m", "perfkit.banks", "--worker", str(jp), str(op)],
                           capture_output=True, text=True, env=env, timeout=1800)
        if r.returncode != 0 or not op.exists():
            raise BankError(f"the simulator process for {variant.label} failed: {r.stderr.strip()[-2000:]}")
        d = json.loads(op.read_text())
    if "error" in d:
        raise BankError(d["error"])
    return BankReport(**d)


def worker_main(job_path: str, out_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        variant, problem = static.rebuild(job)
        rep = count(variant, problem, max_blocks=job["max_blocks"], seed=job["seed"], cache=job["cache"],
                    vectorize=job["vectorize"])
        out = dataclasses.asdict(rep)
    except Exception as exc:  # the parent raises BankError with the message
        out = {"error": f"{exc.__class__.__name__}: {exc}"}
    Path(out_path).write_text(json.dumps(out))
    return 0
