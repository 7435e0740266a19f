"""Autotuning: search a rung's configurations, above the kernels and the model.

* :func:`search_gemm`: the warp-tiling GEMM (rung 10/11; with ``wide=True`` rung 19's one-block-
  an-SM space too).  Legal tilings (``gemm.search_space``) ranked by a static estimate (:func:`gemm_static_estimate`, no
  compile), the best ``keep`` compiled for the target with no GPU (``anatomy.inspect``) and
  dropped if they spill or starve occupancy, the survivors ranked by ``model.estimate`` of the
  compiled kernel, or timed with ``time_fn`` on a GPU.
* :func:`search_tc_deep`: the mma.sync rung 18's space (:func:`tc_deep_space`: warp grid, warp
  tile, k-tile depth, stages), every legal configuration compiled and ranked by ``model.estimate``,
  or timed with ``time_fn`` on a GPU.
* :func:`search_norm`: a row kernel's launch shapes (threads per row, rows per block, vector
  width), timed with ``time_fn`` or ranked by closeness to the rung's rule.

All return :class:`Candidate` lists, best first, rejected ones last with the reason.  Both take
an ``executor`` (``concurrent.futures``: a local process pool, or a Dask cluster's
``client.get_executor(resources={"CPU": 1})``, :mod:`perfkit.cluster`): GEMM's compiles and
estimates then run on it; a norm's candidates are timed through it (``time_fn`` must be
picklable there).  With none, everything runs in this process."""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Callable

from . import anatomy, model, occupancy, specs
from .kernels import gemm

__all__ = ["Candidate", "search_gemm", "gemm_static_estimate", "search_norm", "warp_chunks", "compiled",
           "tc_deep_space", "search_tc_deep"]


@dataclass(frozen=True)
class Candidate:
    variant: object
    estimate_s: float | None = None   # the static estimate that ranks before compiling
    registers: int | None = None
    spills: int | None = None
    occupancy: float | None = None
    seconds: float | None = None      # measured on a GPU (time_fn), else None
    rejected: str | None = None
    model_s: float | None = None      # perfkit.model.estimate of the compiled kernel (survivors)

    @property
    def static_score(self) -> float:
        """Higher is better: the inverse of the static estimate (used when nothing is timed)."""
        return 1.0 / self.estimate_s if self.estimate_s else 0.0


def gemm_static_estimate(v, problem, device: str = "h100-sxm", registers: int | None = None) -> dict:
    """A static time estimate for one warp-tiling configuration on ``device`` (published figures
    from data/devices.yaml): the slowest of
    * issue: the FFMAs at the FP32 rate, divided by the FFMA share of the k-step's instructions
      (TM*TN FFMAs, TM/4 + TN/4 LDS.128, ~2 of loop overhead, plus the tile's loads and stores
      spread over BK steps) -- the leg that bound rungs 6-10 on the H100;
    * L2: the panels of A and B each block reads (the rung's ``traffic``) at ~4x DRAM bandwidth;
    * DRAM: the minimal bytes;
    times the tail-wave loss (blocks over SMs x resident blocks) and a latency penalty below
    8 warps per SM (fewer cannot hide shared-load latency with this ILP).
    ``registers`` defaults to a guess (accumulators, operands, staging, ~40 for addresses).
    Rough by design: it ranks configurations for the search; the timing decides on a GPU."""
    d = specs.get(device)
    m, n = problem.m, problem.n
    nt = v.threads()
    na = v.BM * v.BK // 4 // nt
    nb = v.BK * v.BN // 4 // nt
    per_k = v.TM * v.TN + v.TM / 4 + v.TN / 4 + 2 + (6 * na + 3 * nb + 4 * na + nb + 8) / v.BK
    ffma_share = v.TM * v.TN / per_k
    t = v.traffic(problem)
    dram_bw = d.dram_bw
    cap = 65536 // (nt * v.MIN_BLOCKS) // 8 * 8  # what launch_bounds lets ptxas use
    regs = registers or min(v.TM * v.TN + v.TM + v.TN + 8 * (na + nb) + 40, cap, 255)
    o = occupancy.occupancy(d.compute_capability, nt, min(regs, 255), v.shared_bytes(), opt_in=False)
    bps = max(o.blocks_per_sm, 0)
    if bps == 0:
        return {"seconds": math.inf, "ffma_share": ffma_share, "blocks_per_sm": 0, "limiter": "does not fit"}
    tiles = math.ceil(m / v.BM) * math.ceil(n / v.BN)
    waves = math.ceil(tiles / (d.sm_count * bps))
    wave_eff = tiles / (waves * d.sm_count * bps)
    warps = bps * nt // 32
    latency = min(1.0, warps / 8)
    legs = {"issue": problem.flops / (d.fp32_flops * ffma_share), "l2": t.l2_bytes / (4 * dram_bw),
            "dram": t.dram_bytes / dram_bw}
    lim = max(legs, key=legs.get)
    return {"seconds": legs[lim] / (wave_eff * latency), "ffma_share": ffma_share, "blocks_per_sm": bps,
            "limiter": lim, "wave_efficiency": wave_eff, "warps_per_sm": warps, "registers": regs}


def warp_chunks(v) -> int:
    """Distinct 16-byte shared chunks a warp's lanes read per k step (A and B): the fewer, the
    fewer shared wavefronts; the tie-breaker between warp shapes the estimate does not tell apart."""
    return (v.TM // 4) * v.LR + (v.TN // 4) * v.LC


def compiled(v, problem, cc, gpu: str = "h100-sxm") -> dict:
    """One candidate's build for ``cc`` and, where it spills nothing, the full model's estimate
    on ``gpu`` (compiled SASS, dynamic mix, waves), as plain data: a task for an executor."""
    try:
        rep = anatomy.inspect(v, problem, cc=cc)
    except Exception as exc:  # noqa: BLE001  (a config the compiler or the SM cannot take)
        return {"error": f"{exc.__class__.__name__}: {exc}"}
    spills = rep.spill_store_bytes + rep.spill_load_bytes
    return {"registers": rep.registers, "spills": spills, "occupancy": rep.occupancy.ratio,
            "model_s": None if spills else model.estimate(v, problem, gpu, banks=False).seconds}


def search_gemm(problem, candidates: list | None = None, cc=(9, 0),
                time_fn: Callable[[object], float] | None = None, min_occupancy: float = 0.125,
                keep: int = 8, compile: bool = True, progress: bool = False, executor=None,
                wide: bool = False, gpu: str = "h100-sxm") -> list[Candidate]:
    """Autotune the warp-tiling kernel for ``problem``.

    1. keep only legal configurations (``WarpTile.constraints``);
    2. rank them by :func:`gemm_static_estimate` (no compile) and keep the best ``keep``;
    3. compile those for ``cc`` with :func:`perfkit.anatomy.inspect` (no GPU needed) and drop
       the ones that spill registers or fall below ``min_occupancy``; re-estimate with the real
       register count;
    4. time the survivors with ``time_fn(variant) -> seconds`` when given (on a GPU, e.g.
       ``lambda v: bench.sweep(problem, v).median_s[0]``); else rank them by
       :func:`perfkit.model.estimate` of the compiled kernel (``model_s``), then the estimate.

    With an ``executor``, step 3 runs on it, one candidate a task (:func:`compiled`).
    ``wide``: the default candidates include rung 19's space too (``gemm.search_space_wide()``:
    one block an SM, up to 255 registers, 8x16 thread tiles).  ``gpu``: the device the static
    estimate and the model speak of (a devices.yaml key).

    Returns every candidate, best first, with why the rejected ones were rejected."""
    cands = list(candidates or gemm.search_space() + (gemm.search_space_wide() if wide else []))
    out, legal = [], []
    for v in cands:
        bad = v.constraints()
        if bad:
            out.append(Candidate(v, rejected="; ".join(bad)))
        else:
            legal.append(Candidate(v, estimate_s=gemm_static_estimate(v, problem, gpu)["seconds"]))
    legal.sort(key=lambda c: (c.estimate_s, warp_chunks(c.variant)))
    for c in legal[keep:]:
        out.append(dataclasses.replace(c, rejected=f"pruned by the model: estimate {c.estimate_s * 1e3:.3f} ms, "
                                                   f"not among the best {keep}"))
    it = legal[:keep]
    if progress and executor is None:
        from tqdm.auto import tqdm

        it = list(tqdm(it, desc="autotune", leave=False))
    ok = []
    if compile:  # every build at once where an executor is given (the compiles are independent)
        builds = (list(executor.map(compiled, [c.variant for c in it], [problem] * len(it), [cc] * len(it),
                                    [gpu] * len(it)))
                  if executor is not None else None)
    for k, c in enumerate(it):
        v = c.variant
        if compile:
            b = builds[k] if builds is not None else compiled(v, problem, cc, gpu)
            if "error" in b:  # a config the compiler or the SM cannot take
                out.append(dataclasses.replace(c, rejected=b["error"]))
                continue
            c = dataclasses.replace(c, registers=b["registers"], spills=b["spills"], occupancy=b["occupancy"],
                                    estimate_s=gemm_static_estimate(v, problem, gpu, registers=b["registers"])["seconds"])
            if b["spills"]:
                out.append(dataclasses.replace(c, rejected=f"spills {b['spills']} bytes"))
                continue
            if b["occupancy"] < min_occupancy:
                out.append(dataclasses.replace(c, rejected=f"occupancy {b['occupancy']:.0%} < {min_occupancy:.0%}"))
                continue
            c = dataclasses.replace(c, model_s=b["model_s"])
        if time_fn is not None:
            c = dataclasses.replace(c, seconds=float(time_fn(v)))
        ok.append(c)
    # estimates within 10 us are ties (the model cannot tell them apart): fewer shared chunks wins
    ok.sort(key=(lambda c: c.seconds) if time_fn is not None
            else (lambda c: (round((c.model_s or c.estimate_s) * 1e5), warp_chunks(c.variant), c.estimate_s)))
    return ok + out


#: rung 18's space: warp grids of 4 or 8 warps, warp tiles of 64x64, 32x64 and 64x32 (MT x 16 by
#: NT8 x 8), k-tiles 32 or 64 deep in a ring of 3 or 4 stages; 128x256 at 8 warps of 64x64 is the
#: block CUTLASS's Ampere GEMMs default to (its ``cutlass_profiler`` lists 128x256x32, 3 stages)
TC_DEEP_WARPS = ((2, 2), (2, 4), (4, 2))
TC_DEEP_WARP_TILES = ((4, 8), (2, 8), (4, 4))
TC_DEEP_DEPTHS = ((32, 3), (32, 4), (64, 3), (64, 4))


def tc_deep_space(problem=None) -> list:
    """Rung 18's configurations for :func:`search_tc_deep`, the rung's own first (its ``supports``
    leaves out what exceeds the opt-in shared memory or its own rules; ``problem``: a float16
    problem to check against, default 4096^3)."""
    from .kernels.base import UnsupportedProblem

    problem = problem or gemm.Problem(4096, 4096, 4096, "float16")
    default = gemm.TCDeep()
    out = [default]
    for (wm, wn), (mt, nt8), (bk, st) in itertools.product(TC_DEEP_WARPS, TC_DEEP_WARP_TILES, TC_DEEP_DEPTHS):
        v = gemm.TCDeep(WARPS_M=wm, WARPS_N=wn, MT=mt, NT8=nt8, BK=bk, STAGES=st)
        if v == default:
            continue
        try:
            v.supports(problem)
        except UnsupportedProblem:
            continue
        out.append(v)
    return out


def search_tc_deep(problem, candidates: list | None = None, cc=(9, 0), time_fn: Callable[[object], float] | None = None,
                   keep: int | None = None, compile: bool = True, executor=None, gpu: str = "h100-sxm") -> list[Candidate]:
    """Autotune the mma.sync rung 18 for ``problem`` (float16).

    1. the candidates (default :func:`tc_deep_space`) that ``supports`` the problem;
    2. each compiled for ``cc`` (:func:`compiled`, no GPU; through ``executor`` where given) and
       dropped if it spills (a spill in the k-loop costs more than any tile shape wins); the
       rest ranked by the model's estimate on ``gpu`` (ties: the listed order, the rung's own
       configuration first);
    3. the best ``keep`` (all when None) timed with ``time_fn(variant) -> seconds`` where given,
       then ranked by that.

    Returns every candidate, best first, the rejected last with the reason."""
    from .kernels.base import UnsupportedProblem

    out, legal = [], []
    for v in list(candidates or tc_deep_space(problem)):
        try:
            v.supports(problem)
        except UnsupportedProblem as exc:
            out.append(Candidate(v, rejected=str(exc)))
            continue
        legal.append(Candidate(v))
    if compile:
        vs = [c.variant for c in legal]
        builds = (list(executor.map(compiled, vs, [problem] * len(vs), [cc] * len(vs), [gpu] * len(vs)))
                  if executor is not None else [compiled(v, problem, cc, gpu) for v in vs])
        ok = []
        for c, b in zip(legal, builds):
            if "error" in b:
                out.append(dataclasses.replace(c, rejected=b["error"]))
            elif b["spills"]:
                out.append(dataclasses.replace(c, registers=b["registers"], spills=b["spills"],
                                               occupancy=b["occupancy"], rejected=f"spills {b['spills']} bytes"))
            else:
                ok.append(dataclasses.replace(c, registers=b["registers"], spills=0, occupancy=b["occupancy"],
                                              model_s=b["model_s"]))
        ok.sort(key=lambda c: c.model_s)  # stable: ties keep the listed order
    else:
        ok = legal
    if keep is not None:
        out = [dataclasses.replace(c, rejected=f"not among the model's best {keep}") for c in ok[keep:]] + out
        ok = ok[:keep]
    if time_fn is not None:
        ok = sorted((dataclasses.replace(c, seconds=float(time_fn(c.variant))) for c in ok), key=lambda c: c.seconds)
    return ok + out


def search_norm(op_module, problem, time_fn: Callable[[object], float] | None = None,
                candidates: list | None = None, executor=None) -> list[Candidate]:
    """The launch shapes of a row op's tuned rung (``op_module.search``), as candidates: timed
    (``seconds``) with ``time_fn`` on a GPU (through ``executor`` where given, one shape a task),
    else ordered by closeness to the rung's rule."""
    if time_fn is not None and executor is not None:
        # the shapes in the order the timed search takes them (a constant time keeps it), so ties rank alike
        shapes = [v for v, _ in op_module.search(problem, time_fn=lambda v: 0.0, candidates=candidates)]
        timed = sorted(zip(shapes, executor.map(time_fn, shapes)), key=lambda p: p[1])
        return [Candidate(v, seconds=float(s)) for v, s in timed]
    return [Candidate(v, seconds=s) for v, s in op_module.search(problem, time_fn=time_fn, candidates=candidates)]
