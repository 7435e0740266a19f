"""Analytical models of a rung's work and time.

Two layers:

* :class:`Traffic` (declared by each rung) and :func:`predict`: FLOPs and bytes per memory level
  turned into the plain roofline bound ``max(flops / peak, bytes_level / bandwidth_level)``.
* :func:`estimate` (``estimate(variant, problem, gpu="h100-sxm") -> Estimate``): a prediction of
  the median time of one launch sequence of the rung on a GPU, from static inputs only: the
  kernels compiled for that GPU's compute capability (:mod:`perfkit.anatomy`: registers,
  occupancy, the SASS and its loops), the launch shapes, the rung's :class:`Traffic`, the
  shared-memory bank conflicts of its access pattern (:mod:`perfkit.banks`, simulated on a
  small twin of the problem), the device's datasheet (``data/devices.yaml``) and effective rates
  the datasheet lacks (``data/rates.yaml``, each with its source).

The model of one kernel launch
------------------------------
1. **Dynamic instruction mix.**  The SASS is cut into loops at its back edges
   (:func:`perfkit.anatomy.find_loops`).  Straight-line code runs once per warp.  Each loop's
   total warp-iterations over the launch (its *trips*) follow from the work it must do:

   * a loop holding tensor ``mma`` or FP32 FMAs in an arithmetic-dense op (FLOP/byte > 8) runs
     ``flops / 2 / (32 * fma_per_iteration)`` times (``mma``: 4096 FLOPs per m16n8k16); sibling
     loops with the same FMA count are alternative paths (vector / scalar) and the shortest
     body is taken; a loop with fewer FMAs per iteration than the main one (the checked tail of
     k after the full tiles) runs once per warp; code of such a loop that a branch skips
     together with a nested loop moving global memory is that loader's peeled remainder and
     does not run (a power-of-two tile divides evenly among the threads);
   * a loop whose only global accesses store zero clears the workspace the launch is passed
     (partial sums, before a persistent grid accumulates into them): ``workspace bytes /
     (32 * bytes per iteration)``, its remainder loop ``(k - 1) / 2`` per warp, once per warp
     without a workspace; one that falls through to EXIT is the compiler's copy for an empty
     inner range (below);
   * a loop that loads or stores global memory (cp.async included) sweeps the launch's share
     of the bytes the rung's global instructions move (``Traffic.l1_bytes``, else its L2
     bytes), less what the arithmetic loops already move: ``trips = bytes /
     (32 * bytes per thread per iteration, summed over the sweeping loops)``, at least once per
     warp; a launch's share is what the bank simulation's block of a small twin accessed, times
     the twin's blocks (once for a grid-stride launch that one block ran whole), scaled by the
     bytes of the arrays each launch is passed (without a simulation: those bytes); a sibling
     loop right beside an unrolled sweep that repeats its accesses k times fewer is its
     remainder loop: where all sweeping loops are such pairs at the top level, the elements a
     thread handles per pass (n: the problem's elements over the threads where the remainder
     moves one item per access, else bytes / (threads x bytes per element summed over the
     passes)) give both counts when n is whole (n // k and n % k per warp), else the remainder runs
     (k - 1) / 2 times per warp; a sweeping loop around another
     sweeping loop (a grid-stride loop over columns around the walk down the rows) runs once per
     warp and the inner one carries the bytes (not a dense op's tile loop that holds the
     arithmetic loop: it sweeps the tiles' bytes with its loaders), unless it holds the inner loop's peeled
     remainder (the inner loop unrolled k times, its k - 1 leftover elements in the outer body,
     each branched to one exit): a walk over a 2-D range whose inner loop runs over B, the
     last dimension of the launch's largest 2-D argument (batchnorm's naive rung: H*W in NCHW,
     1 in NHWC), so the outer loop runs once per B of a thread's elements, the inner B // k
     times per outer trip and the first B % k remainder blocks run (where B < k the inner
     loop's set-up, branched around with it, does not); a store-only sibling of such an outer loop is the
     compiler's unswitched copy for an empty inner range and does not run; sweeps left that
     pass over the same elements at different strides (one unrolled twice as far as another:
     the stride is a loop's smallest group of same-kind, same-width accesses, in elements)
     split the bytes so that each covers every element (:func:`_elements_per_iteration`); a
     top-level sweep unrolled k times whose odd iterations the compiler peeled into a block
     after it (branched around, its accesses the loop's k times fewer) runs s // k times per
     thread and the block s % k times, s the thread's elements per pass over the block's
     (where s is not whole: the block (k - 1) / 2 times);
   * an outer loop with no global accesses of its own whose body reduces by shuffles and no
     barrier walks rows (``problem.rows``): ``rows x 2^L / 32`` warp-iterations, L its
     butterfly offsets (a group of 2^L lanes finishes a row an iteration); with barriers and
     the warps' partials through shared memory (each warp storing its own, loading the W of
     its group back): ``rows x W``, W its shared loads over its shared stores;
   * a loop that only reads shared memory after its parent (or the straight code) stored
     partials and passed a barrier reads them back: stores one lane makes (predicated or
     branched around: a warp's partial) are read by every warp, ``W x stores / loads`` times
     per parent iteration (W the block's warps); stores every lane makes are gathered by one
     reader, ``W x 32 x stores / loads`` times per block (``32 x stores / loads`` a warp);
   * another outer loop runs as often as its least frequent inner loop; any other loop (a
     reduction tree) runs ``log2(threads per block)`` times per warp.

   Each if/else in a body counts one arm (:func:`_one_path`): the shorter, which is a full
   tile's vector path in a bounds-checked kernel; an arm that CALLs a routine counts as longer;
   where the branch tests a value against zero, the nonzero arm (the zero case is the
   compiler's specialisation for a zero divisor or an empty range); where it compares a float
   with a constant (``x != -inf``), the longer arm (the special value's is the short one); where
   it compares two float registers (online softmax's new-max test), both arms: the lanes
   disagree, the warp issues both and each thread runs one (the thread-level FFMA count, which
   Nsight Compute reports, takes the mean of the two).  Straight-line blocks the SASS branches
   around (no else) count only for the warps that take them where the bank simulation can tell
   (:func:`_guarded_activity`: shared accesses).

2. **Legs** (seconds), each the time one resource needs if nothing else limited:

   ========  ====================================================================================
   dram      DRAM bytes (Traffic.dram_bytes share) / (datasheet bandwidth x ``dram_efficiency``);
             a tiled matrix product (2-D grid over C) reads its A and B panels once per wave of
             resident blocks (:func:`_panel_reads`), which is what Nsight Compute counted on the
             H100 for the 64x64 and 128x128 tile rungs (2182, 619 MB at 4096^3 fp32); a
             streaming op whose blocks read their rows again (the bank simulation's global
             recording: :mod:`perfkit.banks`) re-reads them from L2 only while the
             rows of the resident blocks (and the workspace the launch keeps live: a
             persistent grid's partial sums) fit in ``l2_reuse_fraction`` of L2; past that
             the re-reads miss in proportion up to the whole L2, and past the whole L2 every
             read of a row goes to DRAM (the 7c7b2e0 multirow rungs: Nsight Compute counted x
             read twice; layernorm backward's tuned rung, 38 MB: a third); stores that fill only part of each sector
             (the simulated block's store fill: NHWC batchnorm, 1/8), over more than L2 keeps,
             read the unfilled part from DRAM (L2 completes a sector that leaves before the
             other blocks' parts arrive)
   l2        L2 bytes (what misses L1) / (L2->SM bytes per clock per SM x SMs x clock).  The
             per-level count compared with Nsight Compute's ``lts__t_bytes`` is the L2 *tag*
             traffic: these bytes plus ``l2_fabric_fraction`` (H100: 0.5, measured on streaming
             kernels) of the first touches, which on a two-partition L2 cross the fabric when
             the line lives in the far partition and are counted again (all L2 bytes of a
             streaming op, times the simulated block's sector fill where blocks share sectors:
             NHWC batchnorm's eight channel blocks to a sector cross once; the DRAM bytes of a
             tiled product, whose panels are re-read from L2)
   smem      shared wavefronts / (1 wavefront per clock per SM); wavefronts = shared instructions
             of each kind and width x the wavefronts per access :mod:`perfkit.banks` simulated
             for that kind and width (half-warp phases for 64/128-bit: a warp-uniform LDS.128 is
             2), plus one per warp shuffle (shuffles cross the same pipe) and one per read of the
             thread index (``S2R SR_TID.*``; Nsight Compute's table on the H100: 1 per warp in
             kernels that read threadIdx.x once and have neither, 2 in the 2-D-block naive
             GEMMs and in batchnorm's kernels that read it again after a call).  Straight-line
             blocks the SASS branches around (a tree reduction's ``if t < s:``) count only for
             the warps that take them, a share read from the simulated block
             (:func:`_guarded_activity`); predicated ones (``@P0 LDS``) count for every warp
   lsu       global/local memory instructions x L1 wavefronts each: the 128-byte lines each
             warp-wide request touches, from the addresses of a simulated block
             (:meth:`perfkit.banks.BankReport.coalescing`; 32 for a warp whose threads walk rows;
             simulated where the bank simulation runs anyway or the rung's L2 bytes say its
             accesses are not coalesced), else guessed from the rung's L2 bytes / (1 per clock
             per SM)
   issue     warp instructions / (4 per clock per SM)
   fp32      FP32 pipe: (FFMA + FADD + FMUL + 2 x IMAD) / 4 per clock per SM (128 lanes)
   alu       integer and compare pipe: 2 warp instructions per clock per SM (64 lanes)
   tensor    mma FLOPs / (dense tensor peak x ``mma_sync_fraction``)
   latency   per loop, iterations per warp x max(one warp's cycles per iteration, the issue
             cycles of the warps sharing a scheduler), summed, times the waves of blocks.  A
             warp's cycles come from an in-order scoreboard over the SASS body
             (:func:`_warp_cycles`): an instruction issues when the registers and predicates it
             reads are ready; results are ready after the latencies of ``rates.yaml`` (ALU,
             MUFU/conversions, shared x conflict degree, shuffle, mma, barrier).  Global loads
             in flight are waited for as a batch: back from L1 if all hit (the simulated
             block's hit rate: a thread touching its own sectors again), else from L2 or, for
             the DRAM share of L2's traffic, from DRAM, where a request that touches n lines
             waits for the slowest (``latency_dram_clk``, the idle latency, + the fitted
             ``dram_latency_spread_clk`` x H(n), H the harmonic number: the expected largest of
             n exponential waits).  Little's law with the resident warps: few warps, or loads
             used right after they issue, leave latency exposed
   ========  ====================================================================================

   SM-side legs (smem, lsu, issue, fp32, alu, latency) are multiplied by the tail of the last
   wave: the busiest SM runs ``ceil(blocks / SMs)`` blocks, not ``blocks / SMs``.

3. **Combination** (the model's one assumption about overlap): a launch takes
   ``max(legs) + overlap * second_largest(legs)``, ``overlap`` a fitted constant (0: perfect
   overlap of all resources, 1: the two slowest serialize); when latency or issue is the
   largest leg, the other is not the second (the latency leg already holds the issue cycles).
   L1's wavefronts (lsu) are a resource of their own: the SM's L1 serves all its warps'
   requests, so a warp also waits behind the others' wavefronts, which one warp's latency
   chain does not hold (batchnorm NHWC, 32 lines a request: 0.46 -> 0.55 of the measured
   time).  When DRAM is the
   largest leg and the second is not latency, the second hides under it (overlap 0: the
   roofline's max of memory and compute time); exposed latency does not (too few loads in
   flight to keep DRAM busy).  Added after the batched load latencies, it took validate's
   median error on the H100 records from 16% to 15%, within 2x unchanged.

4. **The launch sequence.**  The host issues launches back to back (perfkit's launch cost on
   the H100 machine of the records: 37 us + 4.6 us per array argument, derived from the
   records against Nsight Compute's kernel times, ``data/rates.yaml``; numba-cuda PR #288 timed
   Numba's dispatch alone at 6.6 us + 3.7 us per array elsewhere); the GPU runs them in order.  The
   sequence ends at ``end_i = max(H_i, end_{i-1}) + kernel_i`` over launches i, with
   ``H_i = h_0 + ... + h_i - ahead`` the time launch i is queued, counted from the start event:
   the host launches while the GPU works through what was queued ahead of the sequence
   (``ahead``: the timer's cold-L2 flush, 2 x L2 written at the effective DRAM rate, 43 us on
   the H100 of ``devices.yaml``, 45 us for the records' 2 x 50 MiB; plus the spin kernel of
   timers that queue one), plus ``launch_latency_s`` once.
   Host cost shows where it outlasts the work ahead, or the kernels before it.
   Where only one block fits on an SM and the kernel has barriers, the phases between
   barriers cannot overlap with another block's: the two slowest legs add (overlap 1).  Oracles and peers (library calls) get a roofline
   estimate (their Traffic over the datasheet peaks) plus one library call's cost, bound
   ``"library (roofline)"``.

Launch plans are made for the target GPU (:func:`perfkit.backend.planning_for`: a plan that
sizes its grid from the SM count gets the target's).

Fitted constants (``data/rates.yaml`` ``fitted``): ``dram_efficiency``, ``overlap``,
``launch_latency_s`` and ``dram_latency_spread_clk``, nothing per rung or per op; the host's
launch cost (``host_base_s``, ``host_per_array_arg_s``) is derived from the records by the rule
its note states, not tuned on validate.  ``Estimate.inputs`` lists every number used
with its source.

:func:`validate` compares each record with the code it measured: a rung whose kernel code
changed since the record's commit is rebuilt from that commit (:mod:`perfkit.history`).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import paths
from .kernels import registry
from .kernels.base import Traffic  # the rungs' contract; re-exported here (older kernels import it from model)

__all__ = ["Traffic", "Prediction", "predict", "Estimate", "estimate", "flush_seconds", "what_if", "plot_what_if",
           "validate", "summary_line", "levels_line", "levels_table", "repeat_line", "dynamic_mix", "rates", "LEGS", "RATES_PATH"]

RATES_PATH = paths.DATA / "rates.yaml"
#: the Nsight Compute table validate checks the levels against (H100 SXM, commit 7c7b2e0; its
#: provenance in the .json beside it), in the repository so that every clone has it
NCU_PATH = RATES_PATH.parent / "ncu" / "h100-sxm-2026-11-23.csv"


def ncu_table(gpu: str = "h100-sxm") -> Path | None:
    """The newest Nsight Compute table in ``data/ncu/`` taken on ``gpu`` (a devices.yaml key or
    alias), from the ``gpu`` its provenance .json names; None where there is none."""
    import json

    from . import specs

    want = specs.get(gpu).key
    found = []
    for meta in sorted(NCU_PATH.parent.glob("*.json")):
        d = json.loads(meta.read_text())
        if _spec_key(d.get("gpu")) == want and (meta.parent / d.get("table", "")).is_file():
            found.append((str(d.get("date", "")), meta.parent / d["table"]))
    return max(found)[1] if found else None


def _spec_key(name) -> str | None:
    """devices.yaml key of a GPU name as a record or table writes it; None if unknown."""
    from . import specs

    try:
        return specs.get(str(name)).key if name else None
    except Exception:  # noqa: BLE001  (a GPU devices.yaml does not list)
        return None
LEGS = ("dram", "l2", "smem", "lsu", "issue", "fp32", "alu", "tensor", "latency", "launch")


@dataclass(frozen=True)
class Prediction:
    seconds: float
    limiter: str
    per_level: dict

    def as_dict(self) -> dict:
        return asdict(self)


def predict(traffic: Traffic, *, peak_flops: float, dram_bw: float,
            l2_bw: float | None = None, smem_bw: float | None = None) -> Prediction:
    """Lower bound on the time of a launch: the slowest of its compute and memory legs.

    Rates are in FLOP/s and byte/s.  Levels whose traffic or bandwidth is unknown are skipped.
    """
    if peak_flops <= 0 or dram_bw <= 0:
        raise ValueError(f"ceilings must be positive, got peak_flops={peak_flops}, dram_bw={dram_bw}")
    legs = {"compute": traffic.flops / peak_flops, "dram": traffic.dram_bytes / dram_bw}
    if traffic.l2_bytes is not None and l2_bw:
        legs["l2"] = traffic.l2_bytes / l2_bw
    if traffic.smem_bytes is not None and smem_bw:
        legs["smem"] = traffic.smem_bytes / smem_bw
    limiter = max(legs, key=legs.get)
    return Prediction(seconds=legs[limiter], limiter=limiter, per_level=legs)


# --- the estimate ----------------------------------------------------------------------------
@dataclass
class Estimate:
    """``seconds``: predicted median time of one launch sequence; ``bound``: the leg that limits
    (the largest, summed over launches); ``legs``: leg -> seconds (summed over launches);
    ``inputs``: every number used, name -> ``{"value", "source"}``; ``launches``: per-launch
    details (legs, bound, waves, dynamic mix, trips)."""

    seconds: float
    bound: str
    legs: dict
    inputs: dict
    launches: list = field(default_factory=list)
    gpu: str = ""
    variant: str = ""
    problem: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        legs = ", ".join(f"{k} {v * 1e6:.1f}" for k, v in sorted(self.legs.items(), key=lambda kv: -kv[1]) if v > 0)
        return (f"estimate of {self.variant} at {self.problem} on {self.gpu}: {self.seconds * 1e6:.1f} us, "
                f"bound by {self.bound} (legs, us: {legs})")


class _Inputs(dict):
    def put(self, name, value, source):
        self[name] = {"value": value, "source": source}
        return value


def _load_rates(path=None) -> dict:
    import yaml

    path = Path(path or RATES_PATH)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or doc.get("schema") != 1:
        raise ValueError(f"{path.name}: expected 'schema: 1'")
    return doc


@functools.lru_cache(maxsize=8)
def _rates_doc(path: str, stamp: int) -> dict:
    return _load_rates(path)


def rates(gpu: str = "h100-sxm") -> dict:
    """Every rate :func:`estimate` uses for ``gpu``: name -> {value, source} (SI units; per-SM
    figures already multiplied out)."""
    from . import specs

    s = specs.get(gpu)
    p = RATES_PATH
    doc = _rates_doc(str(p), p.stat().st_mtime_ns)
    ccs = f"{s.compute_capability[0]}.{s.compute_capability[1]}"
    arch = dict(doc["arch"]["default"])
    arch.update(doc["arch"].get(ccs, {}))
    out = _Inputs()
    out.put("sm_count", s.sm_count, s.sources.get("sm_count"))
    lanes = arch["fp32_lanes_per_sm"]["value"]
    if s.boost_clock_mhz:
        clock = out.put("clock_hz", s.boost_clock_mhz * 1e6, s.sources.get("boost_clock"))
    else:
        clock = out.put("clock_hz", s.fp32_flops / (2 * lanes * s.sm_count),
                        f"derived: fp32 peak / (2 x {lanes} lanes x SMs) ({s.sources.get('fp32_flops')})")
    out.put("compute_capability", s.compute_capability, "devices.yaml")
    out.put("fp32_flops", s.fp32_flops, s.sources.get("fp32_flops"))
    out.put("dram_bw", s.dram_bw, s.sources.get("dram_bw"))
    out.put("tensor_fp16_flops", s.tensor_flops.get("fp16"), s.sources.get("tensor_flops.fp16"))
    out.put("max_warps_per_sm", s.max_warps_per_sm, s.sources.get("max_warps_per_sm"))
    out.put("l2_size_bytes", s.l2_bytes, s.sources.get("l2_size"))
    for k, fig in arch.items():
        out.put(k, fig["value"], fig["source"])
    for k, fig in doc["launch"].items():
        out.put(k, fig["value"], fig["source"])
    for k, fig in doc["fitted"].items():
        out.put(k, fig["value"], f"fitted: {fig.get('note', '')} ({fig['source']})")
    out.put("fp32_lanes_per_sm", lanes, arch["fp32_lanes_per_sm"]["source"])
    return out


# --- SASS -> pipes -------------------------------------------------------------------------


def _opcode(ins: str) -> str:
    t = ins.strip()
    if t.startswith("@"):
        t = t.split(None, 1)[1] if " " in t else ""
    return t.split(None, 1)[0] if t else ""


def _pipe_counts(body: list[str]) -> dict:
    """Per-iteration counts the legs need, from a list of SASS instructions."""
    from .anatomy import classify

    c = {"instr": 0, "fma": 0, "ffma": 0, "imad": 0, "alu": 0, "xu": 0, "fp64": 0, "mma": 0, "gmem": 0, "gmem_bytes": 0,
         "gload_bytes": 0, "lds": {4: 0, 8: 0, 16: 0}, "sts": {4: 0, 8: 0, 16: 0}, "ldsm": 0, "bar": 0,
         "shfl": 0, "local": 0, "gwide": 0, "s2r_tid": 0, "gw": {}}
    for ins in body:
        cls = classify(ins)
        op = _opcode(ins)
        base = op.split(".")[0]
        if cls == "move/other" and base in ("NOP",):
            continue
        c["instr"] += 1
        if cls in ("fp32 fma", "fp32 add", "fp32 mul"):
            c["fma"] += 2 if base.endswith("2") else 1
            if cls == "fp32 fma":
                c["ffma"] += 2 if base.endswith("2") else 1
        elif cls == "integer/address":
            if base.lstrip("U") in ("IMAD", "IMUL", "IDP") and not base.startswith("U"):
                c["imad"] += 1
            elif not base.startswith("U"):
                c["alu"] += 1
        elif cls == "fp32 other":
            c["alu"] += 1
        elif cls in ("special function", "conversion"):
            c["xu"] += 1
        elif cls == "fp64":
            c["fp64"] += 1
        elif cls == "tensor mma":
            c["mma"] += 1
        elif cls.startswith("global"):
            w = int(cls.rsplit(" ", 1)[1]) // 8
            c["gmem"] += 1
            c["gmem_bytes"] += w
            c["gwide"] += w >= 8
            key = ("load" if "load" in cls else "store", w)
            c["gw"][key] = c["gw"].get(key, 0) + 1
            if "load" in cls:
                c["gload_bytes"] += w
        elif cls.startswith("shared"):
            kind = "lds" if "load" in cls else "sts"
            if cls.endswith("other"):
                if base == "LDSM":
                    c["ldsm"] += 1
                else:
                    c[kind][4] += 1
            else:
                c[kind][int(cls.rsplit(" ", 1)[1]) // 8] += 1
        elif cls == "barrier" and base == "BAR":
            c["bar"] += 1
        elif cls == "shuffle":
            c["shfl"] += 1
        elif base == "S2R" and "SR_TID" in ins:
            c["s2r_tid"] += 1
        elif base == "LDGSTS":  # cp.async: a global load that lands in shared memory
            w = 16 if ".128" in op else 8 if ".64" in op else 4
            c["gmem"] += 1
            c["gmem_bytes"] += w
            c["gload_bytes"] += w
        elif cls == "local load/store":
            c["local"] += 1
            c["gmem"] += 1
    return c


def _add(a: dict, b: dict, f: float = 1.0) -> dict:
    for k, v in b.items():
        if isinstance(v, dict):
            a.setdefault(k, {})
            for kk, vv in v.items():
                a[k][kk] = a[k].get(kk, 0) + f * vv
        else:
            a[k] = a.get(k, 0) + f * v
    return a


# --- per launch ---------------------------------------------------------------------------
def _array_bytes(args) -> tuple[int, int, float]:
    """(array args, scalar args, bytes of the arrays) of a launch's arguments."""
    import numpy as np

    arrays = scalars = 0
    nbytes = 0.0
    for a in args:
        shape = getattr(a, "shape", None)
        if shape is not None and hasattr(a, "dtype") and len(shape) > 0:
            arrays += 1
            nbytes += float(np.prod(shape)) * np.dtype(a.dtype).itemsize
        else:
            scalars += 1
    return arrays, scalars, nbytes


def _planning_for_target(r):
    """A context in which :func:`perfkit.backend.device` answers the target GPU of the rates
    ``r`` (its SM count and compute capability), for plans and traffic models that size their
    grids or workspaces from the device."""
    from . import backend

    info = backend.DeviceInfo(name=f"model target ({r['sm_count']['value']} SMs)", simulated=False,
                              compute_capability=tuple(r["compute_capability"]["value"]),
                              sm_count=int(r["sm_count"]["value"]))
    return backend.planning_for(info)


def _plan_launches(variant, problem, r=None):
    """The rung's launches with stand-in buffers of the real shapes (nothing allocated), planned
    for the target GPU of the rates ``r`` (its SM count and compute capability, for plans that
    size their grids from the device)."""
    if r is None:
        return _plan_launches_here(variant, problem)
    with _planning_for_target(r):
        return _plan_launches_here(variant, problem)


def _traffic_for(variant, problem, r):
    """The rung's traffic model evaluated for the target GPU of the rates ``r``: a rung whose
    launch shape follows the device (a persistent grid of a few blocks per SM, one partial-sum
    row per slot) sizes its workspace, and so its traffic, from the target's SM count, as its
    launch plan does (:func:`_plan_launches`), not from the machine the model runs on."""
    with _planning_for_target(r):
        return variant.traffic(problem)


def _is_dense(problem) -> bool:
    """A dense op (a matrix product, a convolution): more than 8 FLOPs per byte of its arrays."""
    return problem.flops / max(problem.bytes, 1.0) > 8.0


def _plan_launches_here(variant, problem):
    import numpy as np

    specs = {**problem.input_specs(), **problem.output_specs(), **variant.workspace(problem)}

    work = set(variant.workspace(problem))

    class _Buf:  # shape and dtype only, like a device array's (and whether it is workspace)
        def __init__(self, shape, dtype, workspace=False):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
            self.ndim = len(self.shape)
            self.size = int(np.prod(self.shape))
            self.workspace = workspace

        def reshape(self, *shape):
            shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
            shape = tuple(int(x) for x in shape)
            if -1 in shape:
                known = int(np.prod([x for x in shape if x != -1]))
                shape = tuple(self.size // max(known, 1) if x == -1 else x for x in shape)
            if int(np.prod(shape)) != self.size:
                raise ValueError(f"cannot reshape {self.shape} to {shape}")
            return _Buf(shape, self.dtype, self.workspace)

        def ravel(self):
            return _Buf((self.size,), self.dtype, self.workspace)

    try:
        return variant.plan(problem, {n: _Buf(s, d, n in work) for n, (s, d) in specs.items()})
    except Exception:  # noqa: BLE001  (a plan that needs real arrays: host stand-ins)
        hb = variant.host_buffers(problem)
        launches = variant.plan(problem, hb)

        def real(a):
            for n, b in hb.items():
                if a is b:
                    return _Buf(*specs[n], n in work)
            return a

        class _L:
            def __init__(self, l):
                self.grid, self.block, self.shared_bytes = l.grid, l.block, l.shared_bytes
                self.args = tuple(real(a) for a in l.args)

        return [_L(l) for l in launches]


_BRA = re.compile(r"^(@!?U?P\w+\s+)?BRA(?:\.\w+)*\s+(!?U?P\w+\s*,\s*)?(?:`\()?(0x[0-9a-fA-F]+)")


_MEM_OP = re.compile(r"\b(LDG|STG|LDS|STS|LDGSTS|LD|ST)\b")
_MEM_WIDTH = re.compile(r"\b(?:LDG|STG|LDS|STS|LDGSTS|LD|ST)(?:\.\w+)*?\.(128|64)\b")


#: a test of a value against zero: in a register, a uniform register, or (sm_80/86/89, where a
#: kernel parameter is compared in place) the constant bank, ``c[0x0][0x284]``; sm_100 tests a
#: kernel parameter with the uniform datapath (``UISETP ... UP0``, branched on by ``BRA.U UP0``)
_ISETP_NE_ZERO = re.compile(r"^U?ISETP\.NE\.(?:U32\.)?AND(?:\.EX)?\s+(U?P\w+)\s*,\s*U?PT\s*,\s*"
                            r"(?:U?RZ\s*,\s*(?:U?R\w+\b|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])"
                            r"|(?:U?R\w+|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])\s*,\s*U?RZ\b)")


#: a predicate copied from another (``PLOP3.LUT P3, PT, PT, PT, UP0, 0x80, 0x0``: P3 = UP0, as
#: sm_89 moves a uniform test into a predicate register before branching on it)
_PLOP3_COPY = re.compile(r"^PLOP3\.LUT\s+U?P\w+\s*,\s*U?PT\s*,\s*U?PT\s*,\s*U?PT\s*,\s*(!?U?P\w+)\s*,\s*0x80\s*,\s*0x0$")


def _predicate_setter(full: list[tuple[int, str]], at: int, pred: str) -> tuple[str, list[str], bool] | None:
    """The last unguarded instruction before address ``at`` whose first operand is ``pred``
    (the instruction that set a branch's predicate), followed through predicate copies
    (:data:`_PLOP3_COPY`): (text, operands, negated), ``negated`` where a copy inverted it; or
    None."""
    neg = False
    for _ in range(4):
        hit = None
        for a, ins in reversed(full):
            if a >= at:
                continue
            text = ins.strip().rstrip(";").strip()
            if text.startswith("@"):
                continue
            ops = text.split(None, 1)
            if len(ops) == 2 and ops[1].split(",")[0].strip() == pred:
                hit = (a, text, [x.strip() for x in ops[1].split(",")])
                break
        if hit is None:
            return None
        m = _PLOP3_COPY.match(hit[1])
        if not m:
            return hit[1], hit[2], neg
        src = m.group(1)
        neg ^= src.startswith("!")
        pred, at = src.lstrip("!"), hit[0]
    return None


def _zero_guard(full: list[tuple[int, str]], at: int, guard: str) -> int:
    """Whether the conditional branch at address ``at`` (guard ``@P0`` / ``@!P0``) tests a value
    against zero (``ISETP.NE ... RZ``, the compiler's specialisation for a zero divisor or an
    empty range): +1 when the branch is taken for a nonzero value (the fall-through arm is the
    zero case), -1 when it is taken for zero, 0 when it is not such a test."""
    g = guard.rstrip(",").strip().lstrip("@")
    neg = g.startswith("!")
    pred = g.lstrip("!")
    if not pred or pred in ("PT", "UPT"):
        return 0
    setter = _predicate_setter(full, at, pred)
    if setter is None:
        return 0
    if _ISETP_NE_ZERO.match(setter[0]):
        return -1 if neg ^ setter[2] else 1
    m = _ISETP_SIZE.match(setter[0])
    if not m:
        return 0
    cmp, a, b = m.group(1), m.group(3).strip(), m.group(4).strip()
    sign = _SIZE_TESTS.get((cmp, a in ("RZ", "URZ"), b in ("RZ", "URZ")), 0)  # one side zero
    if not sign:
        return 0
    return -sign if neg ^ setter[2] else sign


#: a size (a kernel parameter or a uniform value: a uniform register or the constant bank)
#: compared with zero: ``0 < n`` / ``n > 0`` (+1: true for a nonempty range), ``0 >= n`` /
#: ``n <= 0`` / ``n == 0`` (-1: true for an empty one); the tensor-core GEMMs' "no k tiles" test
_ISETP_SIZE = re.compile(r"^U?ISETP\.(LT|GT|GE|LE|EQ)\.(U32\.)?AND(?:\.EX)?\s+U?P\w+\s*,\s*U?PT\s*,\s*"
                         r"(U?RZ|UR\d+|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])\s*,\s*"
                         r"(U?RZ|UR\d+|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])\s*,\s*(?:U?PT|!?U?P\w+)(?:\s*,\s*!?U?P\w+)?$")
_SIZE_TESTS = {("LT", True, False): 1, ("GT", False, True): 1, ("GE", True, False): -1,
               ("LE", False, True): -1, ("EQ", True, False): -1, ("EQ", False, True): -1}


_SHFL_BFLY = re.compile(r"\bSHFL\.BFLY\b[^;]*?,\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*0x1f")
_REG_OPERAND = re.compile(r"^-?\|?R\d+\|?(?:\.\w+)*$")


def _data_guard(full: list[tuple[int, str]], at: int, guard: str) -> str | None:
    """What sets the predicate of the conditional branch at ``at``: ``"data"`` for a float
    comparison of two registers (``FSETP.GT.AND P1, PT, R11, R16, PT``: a loaded value against
    a running max: the lanes of a warp hold different values, so the warp diverges and runs
    both arms), ``"special"`` for a float comparison with a constant (``R4`` against ``-INF``:
    a special value, whose arm is the short one that returns a constant or calls a slow
    path), None otherwise."""
    g = guard.rstrip(",").strip().lstrip("@").lstrip("!")
    if not g or g in ("PT", "UPT"):
        return None
    setter = _predicate_setter(full, at, g)
    if setter is None or not setter[0].startswith("FSETP"):
        return None
    args = setter[1]
    regs = len(args) >= 4 and all(_REG_OPERAND.match(x) and x.strip("-|") != "RZ" for x in args[2:4])
    return "data" if regs else "special"


def _one_path(body: list[tuple[int, str]], full: list[tuple[int, str]] | None = None,
              dropped: list | None = None, divergent: list | None = None) -> list[tuple[int, str]]:
    """A body with each if/else of the SASS reduced to one arm: a conditional forward branch
    whose skipped block ends in an unconditional forward branch over a second block (the
    compiler's if/else) runs one of the two blocks, not both.  The arm kept is the fast path a
    full tile takes: the one whose memory instructions are wider (16-byte vectors rather than an
    element-by-element edge path), else the shorter; an arm holding a CALL is never preferred
    (the called routine's instructions are not in the listing).  Where the branch tests a value
    against zero (:func:`_zero_guard`), the zero case is the arm left out, whatever its size:
    the compiler's copy of a loop for a zero divisor or an empty range (an arm that ends in
    EXIT counts as one of the two here).  Where it compares two float registers
    (:func:`_data_guard`: online softmax's new-max test), both arms are kept: the warp diverges;
    where it compares a float with a constant (``x != -inf``), the longer arm is kept.

    ``full``: the whole listing of the range (nested loops included), used to size the arms;
    ``dropped`` receives the (start, end) address ranges left out, so that a nested loop inside
    a dropped arm can be told it does not run; ``divergent`` the two arms of each branch kept
    whole (a warp issues both, each thread runs one)."""
    import bisect

    full = full or body
    faddrs = [a for a, _ in full]
    ranges: list = []

    def gone(a: int) -> bool:
        return any(lo <= a < hi for lo, hi in ranges)

    def size(lo: int, hi: int) -> tuple:
        """(calls, -bytes per memory instruction, instructions): smaller is the arm taken."""
        arm = [ins for a, ins in full if lo <= a < hi and not gone(a)]
        if any("CALL" in ins for ins in arm):
            return (1, 0.0, float("inf"))
        n = float(sum(1 for ins in arm if not ins.strip().startswith("NOP")))
        mem = [_MEM_WIDTH.search(ins) for ins in arm if _MEM_OP.search(ins)]
        widths = [int(m.group(1)) // 8 if m else 4 for m in mem]
        per = sum(widths) / len(widths) if widths else 0.0
        return (0, -per, n)

    for a, ins in body:
        if gone(a):
            continue
        m = _BRA.match(ins.strip())
        if not m or not (m.group(1) or m.group(2)):  # conditional: a guard or a predicate operand
            continue
        t = int(m.group(3), 16)
        if t <= a or not faddrs or t > faddrs[-1]:
            continue
        j = bisect.bisect_left(faddrs, t) - 1  # the instruction just before the branch target
        if j < 0 or faddrs[j] <= a:
            continue
        z = _zero_guard(full, a, (m.group(1) or m.group(2) or "").strip())
        prev = full[j][1].strip().rstrip(";").strip()
        if z and prev == "EXIT":
            # the arm before the target ends the kernel: the other runs from the target to the
            # next EXIT
            ends = [fa for fa, fi in full if fa >= t and fi.strip().rstrip(";").strip() == "EXIT"]
            e = (ends[0] + 1) if ends else faddrs[-1] + 1
            ranges.append((a + 1, t) if z > 0 else (t, e))
            continue
        m2 = _BRA.match(full[j][1].strip())
        if not m2 or m2.group(1) or m2.group(2):
            continue
        e = int(m2.group(3), 16)
        if z > 0 and a < e < t:
            # the zero case falls through into a copy that ends in a loop's unconditional back
            # edge (its exit jumps past the other arm: sm_100's conv k loop for C == 0); the
            # branch, taken for a nonzero value, skips it
            ranges.append((a + 1, t))
            continue
        if e <= t:
            continue
        fcmp = _data_guard(full, a, (m.group(1) or m.group(2) or "").strip())
        if fcmp == "data":
            # lanes disagree: the warp runs both arms, each lane one of them
            if divergent is not None:
                divergent.extend([(a + 1, t), (t, e)])
            continue
        a_arm, b_arm = (a + 1, t), (t, e)
        if z:  # one arm is the case of a value equal to zero (a divisor, a size): the other runs
            ranges.append(a_arm if z > 0 else b_arm)
            continue
        sa, sb = size(*a_arm), size(*b_arm)
        if sa[0] and sb[0]:
            continue
        if fcmp == "special" and not (sa[0] or sb[0]):
            # a special value's arm is the short one: the common case is the longer
            ranges.append(a_arm if sa[2] < sb[2] else b_arm)
            continue
        ranges.append(a_arm if sa > sb else b_arm)
    if dropped is not None:
        dropped.extend(ranges)
    return [(a, ins) for a, ins in body if not gone(a)]


def _forward_spans(pairs: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(branch address, target) of each conditional forward branch in ``pairs``."""
    spans = []
    for a, ins in pairs:
        m = _BRA.match(ins.strip())
        if m and (m.group(1) or m.group(2)):
            t = int(m.group(3), 16)
            if t > a:
                spans.append((a, t))
    return spans


def _guarded(pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The instructions of ``pairs`` that a conditional forward branch of ``pairs`` jumps over
    (the body of an ``if`` without ``else`` that the compiler branched around, rather than
    predicated): a warp whose threads all fail the test skips them."""
    spans = _forward_spans(pairs)
    # a predicated EXIT before shared accesses (``if grp == 0:`` after a barrier, compiled as
    # ``@P0 EXIT``: batchnorm split's merge of the groups' partials): the warps whose threads
    # all leave there skip the rest of the code
    for a, ins in pairs:
        if re.match(r"@!?U?P\d+\s+EXIT\b", ins.strip()) and any(
                b > a and _opcode(i).split(".")[0] in ("LDS", "STS", "LDSM") for b, i in pairs):
            spans.append((a, float("inf")))
    return [(a, ins) for a, ins in pairs if any(lo < a < hi for lo, hi in spans)]


def _bodies(lines, loops, dropped: list | None = None, divergent: list | None = None):
    """Each loop's own body (its nested loops' bodies left out) and the straight-line code, as
    (address, instruction) lists, each if/else reduced to one arm (:func:`_one_path`);
    ``dropped`` receives the address ranges of the arms left out, ``divergent`` those of the
    data-dependent if/else kept whole."""
    in_loop = set()
    for lp in loops:
        for a, _ in lines:
            if lp.start <= a <= lp.end:
                in_loop.add(a)
    own = []
    for i, lp in enumerate(loops):
        kids = [o for o in loops if o.parent == i]
        full = [(a, ins) for a, ins in lines if lp.start <= a <= lp.end]
        own.append(_one_path([(a, ins) for a, ins in full if not any(k.start <= a <= k.end for k in kids)],
                             full, dropped, divergent))
    straight = _one_path([(a, ins) for a, ins in lines if a not in in_loop], lines, dropped, divergent)
    return own, straight


def _panel_reads(problem, grid, blocks_per_sm: int, sms: int) -> dict | None:
    """DRAM reads of a tiled matrix product C[m, n] = A[m, k] @ B[k, n] whose 2-D grid of
    blocks tiles C (``grid = (n / BN, m / BM)``, blockIdx.x fastest): the blocks resident at
    once (a wave: SMs x blocks per SM, in launch order) read the A panels (BM x k) of their
    distinct block rows and the B panels (k x BN) of their distinct block columns from DRAM
    once, sharing them through L2 while they walk k together; the next wave reads its panels
    again.  None where the launch is not such a grid (or the problem has no m, n, k)."""
    try:
        m, n, k = int(problem.m), int(problem.n), int(problem.k)
        import numpy as np

        es = int(np.dtype(problem.dtype).itemsize)
    except (AttributeError, TypeError, ValueError):
        return None
    if not isinstance(grid, (tuple, list)) or len(grid) < 2:
        return None  # a 1-D grid: the block -> tile mapping is the kernel's own
    g = [int(x) for x in (list(grid) + [1, 1])[:3]]
    gx, gy = g[0], g[1]
    if g[2] != 1 or gx < 1 or gy < 1 or gx * gy < 2:
        return None
    bn, bm = -(-n // gx), -(-m // gy)
    if (gx - 1) * bn >= n or (gy - 1) * bm >= m:  # not a tiling of C
        return None
    blocks = gx * gy
    per_wave = max(1, int(sms) * max(int(blocks_per_sm), 1))
    reads = 0.0
    waves = 0
    for b in range(0, blocks, per_wave):
        e = min(blocks, b + per_wave)
        # distinct block rows and columns among blocks b .. e-1 (row-major over the grid)
        rows = (e - 1) // gx - b // gx + 1
        if e - b >= gx:
            cols = gx
        elif rows == 1:
            cols = (e - 1) % gx - b % gx + 1
        else:  # wraps once onto the next block row
            cols = min(gx, (gx - b % gx) + (e - 1) % gx + 1)
        reads += (min(rows * bm, m) * k + min(cols * bn, n) * k) * es
        waves += 1
    return {"reads": reads, "compulsory": float((m * k + k * n) * es), "waves": waves,
            "per_wave": per_wave, "tile": (bm, bn)}


def _elements_per_thread(problem, remainders: list, warps: int) -> float | None:
    """Elements of the problem's main array per thread of the launch (``elem_bytes`` over the
    item size, over the threads), where every remainder loop moves one element per access (its
    global accesses are all one item wide); None where the problem does not say."""
    try:
        import numpy as np

        it = np.dtype(problem.dtype).itemsize
        elems = float(problem.elem_bytes) / it
    except (AttributeError, TypeError, ValueError):
        return None
    if warps <= 0 or not all(c["gmem"] and c["gmem_bytes"] == c["gmem"] * it for c in remainders):
        return None
    return elems / (32.0 * warps)


def _elements_per_iteration(c: dict, problem) -> float | None:
    """Elements of the problem's dtype one iteration of a sweeping loop covers per thread:
    its smallest group of global accesses of one kind and width, in elements (a group may hold
    several arrays: gamma's and beta's scalar loads beside x's 128-bit ones); None where the
    problem names no dtype."""
    try:
        import numpy as np

        it = np.dtype(problem.dtype).itemsize
    except (AttributeError, TypeError, ValueError):
        return None
    groups = c.get("gw") or {}
    return min((n * w / it for (_, w), n in groups.items() if n), default=None)


def _nested_in(loops, j: int, i: int) -> bool:
    """Whether loop ``j`` lies (at any depth) inside loop ``i``."""
    p = loops[j].parent
    while p is not None:
        if p == i:
            return True
        p = loops[p].parent
    return False


def _remainder_factor(inner: dict, outer: dict) -> int | None:
    """k where ``outer``'s own global accesses are ``inner``'s times (k - 1) / k, kind by kind
    and width by width (an inner loop unrolled k times, its k - 1 leftover elements peeled
    into the loop around it); else None."""
    gi, go = inner.get("gw") or {}, outer.get("gw") or {}
    if not gi or set(gi) != set(go):
        return None
    ks = set()
    for g, n in gi.items():
        m = n - go[g]  # accesses per element group
        if m <= 0 or n % m:
            return None
        ks.add(n // m)
    k = ks.pop() if len(ks) == 1 else None
    return k if k and k >= 2 else None


def _remainder_blocks(pairs: list[tuple[int, str]]) -> list[tuple[int, int, int]]:
    """The peeled remainder of an unrolled loop in ``pairs``: two or more conditional forward
    branches to one target with global accesses between them, as (start, end, element
    groups) in order (each block after its branch, up to the next branch or the target; a
    block's groups are its global accesses of the commonest kind and width)."""
    spans = _forward_spans(pairs)
    by_t: dict = {}
    for a, t in spans:
        by_t.setdefault(t, []).append(a)
    best = []
    for t, starts in by_t.items():
        starts = sorted(starts)
        if len(starts) < 2:
            continue
        out = []
        for n, a in enumerate(starts):
            end = starts[n + 1] if n + 1 < len(starts) else t
            seg = [ins for b, ins in pairs if a < b < end]
            c = _pipe_counts(seg)
            groups = max((c.get("gw") or {}).values(), default=0)
            if not groups:
                out = []
                break
            out.append((a, end, int(groups)))
        if len(out) > len(best):
            best = out
    return best


def dynamic_mix(report, problem, *, launch_bytes: float, dense: bool, warps: int, threads_per_block: int,
                inner_extent: int | None = None, clear_bytes: float | None = None) -> dict:
    """Dynamic per-pipe counts of one launch (warp instructions over the whole launch) and the
    trips of each loop; see the module docstring for the trip rules."""
    loops = report.loops
    from .anatomy import sass_lines

    lines = sass_lines(report.sass)
    dropped: list = []
    divergent: list = []
    own_pairs, straight_pairs = _bodies(lines, loops, dropped, divergent)
    straight = [ins for _, ins in straight_pairs]
    own_bodies = [[ins for _, ins in b] for b in own_pairs]
    own = [_pipe_counts(b) for b in own_bodies]

    def thread_ffma(pairs, c):
        # a data-dependent if/else: the warp issues both arms, each thread runs one; the FFMA
        # a thread executes there (Nsight Compute's thread-level count) is one arm's, taken
        # as the mean of the two
        arms = [ins for a, ins in pairs if any(lo <= a < hi for lo, hi in divergent)]
        c["ffma_thread"] = c["ffma"] - 0.5 * _pipe_counts(arms)["ffma"] if arms else c["ffma"]
        return c

    own = [thread_ffma(p, c) for p, c in zip(own_pairs, own)]
    trips = [None] * len(loops)
    rules = [""] * len(loops)
    # a loop inside the arm of an if/else that is not taken does not run
    for i, lp in enumerate(loops):
        if any(lo <= lp.start and lp.end < hi for lo, hi in dropped):
            trips[i], rules[i] = 0.0, "alternative path (not taken)"
    # 1. arithmetic loops of dense ops
    flops = float(problem.flops)
    if dense:
        mma_loops = [i for i, c in enumerate(own) if c["mma"] > 0 and trips[i] is None]
        fma_loops = [i for i, c in enumerate(own) if c["ffma"] > 0 and trips[i] is None and not mma_loops]
        group = mma_loops or fma_loops
        key = "mma" if mma_loops else "ffma"
        per = 4096.0 if mma_loops else 64.0  # FLOPs per warp instruction (mma.m16n8k16; 32 FMAs)
        if group:
            # alternative paths: loops with the same count per iteration, not nested: keep the shortest
            by_count: dict = {}
            for i in group:
                by_count.setdefault(own[i][key], []).append(i)
            chosen = []
            for cnt, idx in by_count.items():
                best = min(idx, key=lambda i: own[i]["instr"])
                chosen.append(best)
                for i in idx:
                    if i != best:
                        trips[i], rules[i] = 0.0, "alternative path (not taken)"
            # the loop with the most work per iteration carries it; a loop with less (the checked
            # tail of k after the full tiles, a remainder) runs about once per warp
            main = max(chosen, key=lambda i: own[i][key])
            for i in chosen:
                if i != main and not _nested_in(loops, i, main) and not _nested_in(loops, main, i):
                    trips[i], rules[i] = float(warps), f"tail: fewer {key} per iteration than loop {main}: once per warp"
            chosen = [i for i in chosen if trips[i] is None]
            total = max(flops / per - sum(trips[i] * own[i][key] for i in group if trips[i]), 0.0) / sum(
                own[i][key] for i in chosen)
            for i in chosen:
                trips[i], rules[i] = total, f"{key} work: flops / ({per:g} x {key} per iteration)"
    # a work loop's code that a branch skips together with a nested loop that moves global
    # memory is that loader's prologue (the peeled remainder of its unrolled copies): a tile of
    # a power-of-two size divides evenly, so it does not run, and its loads are not the tile's
    for i in range(len(loops)):
        if not (trips[i] and rules[i].startswith(("mma work", "ffma work"))):
            continue
        kids = [j for j, o in enumerate(loops) if o.parent == i and own[j]["gmem"]]
        spans = [(a, t) for a, t in _forward_spans(own_pairs[i])
                 if any(a < loops[j].start and loops[j].end < t for j in kids)]
        if spans:
            kept = [(a, ins) for a, ins in own_pairs[i] if not any(lo < a < hi for lo, hi in spans)]
            if len(kept) < len(own_pairs[i]):
                own_pairs[i] = kept
                own[i] = thread_ffma(kept, _pipe_counts([ins for _, ins in kept]))
    # 2. sweeping loops
    # a loop whose only global accesses store zero (RZ) clears a workspace (partial sums set to
    # zero before a persistent grid accumulates into them): it stores the workspace the launch
    # is passed (``clear_bytes``), not the launch's streamed bytes; an unrolled one beside its
    # remainder loop (k times its stores) carries them, the remainder (k - 1) / 2 per warp.
    # Without a workspace, once per warp.  (Layernorm backward's persistent rows at 7c7b2e0
    # clear each slot's whole partial row: 32 iterations a warp at 4096 columns, where the
    # sweep rule had given them 69 and the row's sweeps 46 for Nsight Compute's ~62 (its
    # FFMA: 0.76 -> 0.95); today's clear only the columns past the register cache, none at
    # 4096: an overcount there)
    zero = []
    for i, body in enumerate(own_bodies):
        g = [ins for ins in body if re.match(r"(@!?U?P\w+\s+)?(LDG|STG|LD|ST|RED|ATOM)\.", ins.strip())]
        if trips[i] is None and g and all(re.match(r"(@!?U?P\w+\s+)?STG\.\S*\s.*,\s*RZ\s*$", ins.strip()) for ins in g):
            zero.append(i)
    # the compiler's copy of a loop for an empty inner range (unswitched: its sums stay zero,
    # so it stores RZ) ends the kernel: it falls through to EXIT.  It and its siblings are left
    # to the unswitched-copy rule below
    def _ends_kernel(i):
        nxt = [ins.strip() for a, ins in lines if a > loops[i].end and not ins.strip().startswith(("BSYNC", "NOP"))]
        return bool(nxt) and nxt[0] == "EXIT"

    if any(_ends_kernel(i) for i in zero):
        zero = []
    rem = {i for i in zero for j in zero if j != i and own[j]["gmem_bytes"] >= 2 * own[i]["gmem_bytes"]
           and loops[i].parent == loops[j].parent}
    carry = [i for i in zero if i not in rem]
    for i in zero:
        if not clear_bytes or not carry:
            trips[i], rules[i] = float(warps), "clears a workspace (stores zero only): once per warp"
        elif i in rem:
            k = max(own[j]["gmem_bytes"] for j in carry) / own[i]["gmem_bytes"]
            trips[i], rules[i] = warps * (k - 1) / 2, "remainder of a workspace-clearing loop: (k - 1) / 2 per warp"
        else:
            t = max(clear_bytes / (32.0 * sum(own[j]["gmem_bytes"] for j in carry)), float(warps))
            trips[i], rules[i] = t, f"clears the launch's workspace ({clear_bytes / 1e6:.3g} MB, stores zero only)"
    # (the launch's bytes stay with the sweeps: a small twin's slots clear little of what the
    # problem's do, so its scaled bytes hold next to none of this clearing)
    sweep = [i for i, c in enumerate(own) if trips[i] is None and c["gmem_bytes"] > 0]
    # a remainder loop: the sibling right before or after an unrolled loop whose global
    # accesses it repeats k (>= 2) times fewer; each thread runs it fewer than k times per pass
    pairs = []
    for i in list(sweep):
        for j in (i - 1, i + 1):
            if j in sweep and j != i and loops[j].parent == loops[i].parent and all(j != q for _, q, _ in pairs):
                a, b = own[i], own[j]
                k = b["gmem_bytes"] / a["gmem_bytes"]
                if k >= 2 and k == int(k) and b["gload_bytes"] * a["gmem_bytes"] == a["gload_bytes"] * b["gmem_bytes"]:
                    pairs.append((i, j, int(k)))
                    sweep.remove(i)
                    break
    # where every sweeping loop is such a pair at the top level, each thread's elements per pass
    # follow from the bytes: n = bytes / (threads x bytes per element, over the passes); when n
    # is whole, the unrolled loop runs n // k times and the remainder n % k (0 for 16 elements a
    # thread, the 4096-column rows of 256 threads); else the remainder runs (k - 1) / 2 times
    exact = None
    if pairs and not [q for q in sweep if all(q != j for _, j, _ in pairs)] \
            and all(loops[i].parent is None and loops[j].parent is None for i, j, _ in pairs):
        by_bytes = launch_bytes / (sum(own[i]["gmem_bytes"] for i, _, _ in pairs) * 32.0 * warps)
        n = _elements_per_thread(problem, [own[i] for i, _, _ in pairs], warps)
        # the problem's shape where this launch sweeps the main array (its bytes agree within 4x;
        # a small launch over partial sums does not), else the bytes
        if n is None or not (0.25 * by_bytes <= n <= 4.0 * by_bytes):
            n = by_bytes
        if n >= 0.98 and abs(n - round(n)) <= 0.02 * n:
            exact = int(round(n))
    for i, j, k in pairs:
        a, b = own[i], own[j]
        if exact is not None:
            trips[i], rules[i] = float(warps * (exact % k)), \
                f"remainder of loop {j} (unrolled x{k}): {exact} elements a thread per pass, {exact % k} per warp"
            trips[j], rules[j] = float(warps * (exact // k)), \
                f"unrolled x{k}: {exact} elements a thread per pass, {exact // k} per warp"
            sweep.remove(j)
            launch_bytes = max(launch_bytes - trips[i] * 32 * a["gmem_bytes"] - trips[j] * 32 * b["gmem_bytes"], 0.0)
        else:
            trips[i], rules[i] = warps * (k - 1) / 2, f"remainder of loop {j} (unrolled x{k:g}): (k - 1) / 2 per warp"
            launch_bytes = max(launch_bytes - trips[i] * 32 * a["gmem_bytes"], 0.0)
    # a peeled remainder: the block the SASS branches around right after a top-level sweeping
    # loop, whose global accesses are the loop's k (>= 2) times fewer, kind by kind and width by
    # width (the loop unrolled twice, the odd iteration after it).  Where the problem gives each
    # thread's elements per pass, a thread runs s = elements / (elements per block) source
    # iterations: the loop s // k times and the block s % k times (rms tuned at 4096 columns:
    # 16 elements a thread, 16 per block: the loop never runs, the block once), else about
    # (k - 1) / 2 times.  The block, counted once per warp with the straight code, is taken
    # back where it does not run.  (The sweeps below still size the other loops with this one
    # among them: the elements a pass covers are the same)
    peeled_back = []
    try:
        import numpy as np

        n = float(problem.elem_bytes) / np.dtype(problem.dtype).itemsize / (32.0 * warps)
    except (AttributeError, TypeError, ValueError):
        n = None
    for i in [q for q in sweep if n is not None and loops[q].parent is None and own[q]["gw"]]:
        after = [(a, t) for a, t in _forward_spans(straight_pairs) if a > loops[i].end]
        if not after:
            continue
        a0, t0 = min(after)
        if sum(1 for a, _ in straight_pairs if loops[i].end < a < a0) > 4:
            continue
        blk = [(a, ins) for a, ins in straight_pairs if a0 < a < t0]
        cb = _pipe_counts([ins for _, ins in blk])
        if not cb["gw"] or set(cb["gw"]) != set(own[i]["gw"]):
            continue
        ks = {own[i]["gw"][g] / cb["gw"][g] for g in cb["gw"] if cb["gw"][g]}
        if len(ks) != 1:
            continue
        k = ks.pop()
        per_block = _elements_per_iteration(cb, problem)
        if k < 2 or k != int(k) or not per_block:
            continue
        k = int(k)
        src = n / per_block
        if src >= 0.98 and abs(src - round(src)) <= 0.02 * src:
            runs, loop_runs = float(int(round(src)) % k), float(int(round(src)) // k)
            how = f"{int(round(src))} source iterations a thread per pass"
        else:
            runs, loop_runs = (k - 1) / 2.0, max(src - (k - 1) / 2.0, 0.0) / k
            how = f"{src:.2f} source iterations a thread per pass (not whole: (k - 1) / 2 in the block)"
        cb["ffma_thread"] = cb["ffma"]
        peeled_back.append((i, warps * loop_runs, f"unrolled x{k} with a peeled remainder block: {how}, "
                                                  f"{loop_runs:g} per warp", cb, -(1.0 - runs) * warps))
    # bytes the arithmetic loops already move (a GEMM's k-loop loads its tiles) are not swept again
    covered = sum(trips[i] * 32 * own[i]["gmem_bytes"] for i in range(len(loops)) if trips[i] and i not in zero)
    launch_bytes = max(launch_bytes - covered, 0.0)
    # loaders nested in an arithmetic loop carry its traffic; sweeping loops outside it (a
    # pipeline's prologue, an epilogue) run about once per warp
    work = {i for i in range(len(loops)) if trips[i] and rules[i].startswith(("mma work", "ffma work"))}

    def inside_work(i):
        j = loops[i].parent
        while j is not None:
            if j in work:
                return True
            j = loops[j].parent
        return False

    if work and any(inside_work(i) for i in sweep):
        for i in [i for i in sweep if not inside_work(i)]:
            trips[i], rules[i] = float(warps), "outside the arithmetic loop: once per warp"
            sweep.remove(i)
            launch_bytes = max(launch_bytes - warps * 32 * own[i]["gmem_bytes"], 0.0)
    # a sweeping loop around another sweeping loop (a grid-stride loop over columns around the
    # walk down the rows) passes its own accesses about once per warp; the inner loop sweeps
    def has_inner_sweep(i):
        return any(j != i and _nested_in(loops, j, i) for j in sweep)

    # (not a tiled product's tile loop: one that holds the arithmetic loop runs once per tile,
    # as its loaders do, and sweeps the tiles' bytes with them)
    outer = [i for i in sweep if has_inner_sweep(i) and not any(_nested_in(loops, j, i) for j in work)]
    # unless the outer loop holds the inner one's peeled remainder (the inner loop unrolled k
    # times, the k - 1 leftover elements in the outer body after it, each branched to the
    # same exit): a walk over a 2-D range, the inner loop over its last dimension (batchnorm's
    # naive rung over x viewed as (N, C, H*W), or (N*H*W, C, 1) in NHWC).  A thread's elements
    # over the launch's largest 2-D argument's last dimension (B) give the outer trips; per
    # outer trip the inner loop runs B // k times and the first B % k remainder blocks run
    for i in outer:
        kids = [j for j in sweep if loops[j].parent == i]
        if len(kids) != 1 or not inner_extent or len(sweep) != 2:
            continue
        j = kids[0]
        k = _remainder_factor(own[j], own[i])
        segs = _remainder_blocks(own_pairs[i]) if k else []
        if not segs:
            continue
        bpe = own[j]["gmem_bytes"] / k  # bytes a thread moves per element
        per_thread = launch_bytes / (32.0 * warps * bpe)
        B = int(inner_extent)
        runs = float(per_thread) / B * warps  # outer warp-iterations
        r = B % k
        done, cut = 0, []
        for lo, hi, n in segs:  # a block runs while elements are left for it
            if done >= r:
                cut.append((lo, hi))
            done += n
        if B < k:  # the inner loop never runs: nor does its set-up, branched around with it
            cut += [(a, t) for a, t in _forward_spans(own_pairs[i]) if a < loops[j].start and loops[j].end < t]
        own_pairs[i] = [(a, ins) for a, ins in own_pairs[i] if not any(lo < a < hi for lo, hi in cut)]
        own[i] = thread_ffma(own_pairs[i], _pipe_counts([ins for _, ins in own_pairs[i]]))
        trips[i], rules[i] = runs, (f"outer walk holding loop {j}'s remainder: {per_thread:.0f} elements a "
                                    f"thread over runs of {B} (the largest 2-D argument's last dimension)")
        trips[j], rules[j] = runs * (B // k), f"unrolled x{k} inner walk: {B // k} per outer trip"
        launch_bytes = 0.0
    for i in [i for i in outer if trips[i] is None]:
        trips[i], rules[i] = float(warps), "around an inner sweep: once per warp"
        launch_bytes = max(launch_bytes - warps * 32 * own[i]["gmem_bytes"], 0.0)
    # the compiler's copy of such an outer loop for an empty inner range (loop unswitching on
    # rows <= 0): a sibling that only stores; it and its remainder loop do not run
    for i in [i for i in sweep if trips[i] is None and own[i]["gload_bytes"] == 0]:
        if any(loops[o].parent == loops[i].parent for o in outer):
            trips[i], rules[i] = 0.0, "unswitched copy for an empty inner loop (not taken)"
            for j in range(len(loops)):
                if rules[j].startswith(f"remainder of loop {i} "):
                    launch_bytes += trips[j] * 32 * own[j]["gmem_bytes"]
                    trips[j], rules[j] = 0.0, "unswitched copy for an empty inner loop (not taken)"
    sweep = [i for i in sweep if trips[i] is None]
    if sweep:
        # the sweeps pass over the same elements (each pass of a row walks all of it), each
        # loop a stride of its own: the elements an iteration covers is its smallest group of
        # same-kind, same-width accesses (4 LDG.128 of float32: 16; 32 scalar loads of gamma
        # and beta beside them: 32, two arrays), so a loop unrolled twice as far runs half as often
        stride = {i: _elements_per_iteration(own[i], problem) for i in sweep}
        if all(stride.values()) and len(set(stride.values())) > 1:
            elems = launch_bytes / (32.0 * sum(own[i]["gmem_bytes"] / stride[i] for i in sweep))
            ts = {i: elems / stride[i] for i in sweep}
            why = "sweep: the elements every pass covers / the loop's elements per iteration"
        else:
            t = launch_bytes / (sum(own[i]["gmem_bytes"] for i in sweep) * 32)
            ts = {i: t for i in sweep}
            why = "sweep: launch bytes / (32 x bytes per iteration)"
        if max(ts.values()) < warps:  # prologue / epilogue loops around the work: at least once per warp
            ts = {i: float(warps) for i in sweep}
            why = "once per warp (the bytes left after the arithmetic loops are fewer)"
        for i in sweep:
            trips[i], rules[i] = ts[i], why
    for i, t, why, _, _ in peeled_back:
        trips[i], rules[i] = t, why
    # 3. outer loops, then the rest.  An outer loop with no global accesses of its own, around
    # sweeps, whose body reduces across lanes by shuffles and no barrier (a row's statistics
    # in a warp: butterfly offsets 16..1, L of them) walks rows: each iteration a group of 2^L
    # lanes finishes one row, so the launch runs rows x 2^L / 32 warp-iterations of it
    rows = getattr(problem, "rows", None)
    row_loops: list = []  # the loops that walk rows
    for i, c in enumerate(own):
        if trips[i] is None and isinstance(rows, (int,)) and rows > 0 and c["shfl"] and not c["bar"] \
                and not c["gmem"] and any(trips[j] for j in range(len(loops)) if loops[j].parent == i):
            offs = {m.group(1) for ins in own_bodies[i] for m in [_SHFL_BFLY.search(ins)] if m}
            lanes = 2 ** len(offs) if offs else 32
            trips[i] = max(float(rows) * min(lanes, 32) / 32.0, float(warps))
            rules[i] = f"outer: one row per {min(lanes, 32)} lanes an iteration (a shuffle reduction, no barrier)"
            row_loops.append(i)
    # the same loop whose reduction crosses warps (shuffles, then each warp's partials through
    # shared memory between barriers, every warp of the group reading all of them back): each
    # warp stores its partials once and loads those of the W warps of its group, so W = the
    # body's shared loads over its shared stores; each iteration the group's W warps finish one
    # row: rows x W warp-iterations (layernorm backward tuned at 7c7b2e0, 256 threads a row:
    # 40 loads, 5 stores, W = 8)
    for i, c in enumerate(own):
        nld, nst = sum(c["lds"].values()), sum(c["sts"].values())
        if trips[i] is None and isinstance(rows, (int,)) and rows > 0 and c["shfl"] and c["bar"] \
                and nld and nst and not c["gmem"] and not c["mma"] \
                and any(trips[j] for j in range(len(loops)) if loops[j].parent == i):
            wpg = min(max(round(nld / nst), 1), max(threads_per_block // 32, 1))
            trips[i] = max(float(rows) * wpg, float(warps))
            rules[i] = (f"outer: one row per {wpg} warps an iteration (a reduction across warps: "
                        f"{nld} shared loads, {nst} stores)")
            row_loops.append(i)
    # a loop that only reads shared memory (no global access, barrier or shuffle) after its
    # parent's body (or the straight code) stored partials and passed a barrier reads those
    # partials back.  A store that one lane makes (predicated: a warp's partial after its
    # shuffles) leaves one value a warp, and every warp reads all W = threads / 32 warps'
    # values: W x stores / loads an iteration per warp (layernorm backward's persistent rows,
    # a co-moment of 5 values per warp merged over 16 warps, unrolled x4: 4 a row).  A store
    # every lane makes leaves 32 values a warp, which one reader gathers (each warp reading
    # them all would be all-pairs work): W x 32 x stores / loads iterations for the block, 32 x
    # stores / loads per warp on average (batchnorm split's statistics in NCHW: 256 threads'
    # (n, mean, M2) merged by thread 0, 12 loads an iteration: 8 a warp, Nsight Compute's 806
    # shared wavefronts a block against 792).  Where a block holds several groups,
    # each reading only its own warps', the first case counts all of them (an upper bound)
    for i, c in enumerate(own):
        nld, par = sum(c["lds"].values()), loops[i].parent
        if trips[i] is not None or not nld or sum(c["sts"].values()) or c["gmem"] or c["bar"] \
                or c["shfl"] or c["mma"] or (par is not None and not trips[par]):
            continue
        pairs_p = straight_pairs if par is None else own_pairs[par]
        if not _pipe_counts([ins for _, ins in pairs_p])["bar"]:
            continue
        spans = _forward_spans(pairs_p)
        # (address, conditional): predicated, or inside an if the compiler branched around
        sts = [(a, ins.strip().startswith("@") or any(lo < a < hi for lo, hi in spans))
               for a, ins in pairs_p if re.match(r"(@!?U?P\w+\s+)?STS\b", ins.strip())]
        if not sts:
            continue
        wpb = max(threads_per_block // 32, 1)
        one_lane = all(cond for _, cond in sts)
        per = wpb * len(sts) / nld if one_lane else 32.0 * len(sts) / nld
        base = float(warps) if par is None else trips[par]
        trips[i] = base * max(per, 1.0 / wpb)
        how = (f"one lane each: every warp reads all {wpb} warps'" if one_lane
               else "every lane: one reader gathers them")
        rules[i] = (f"reads back the partials stored before a barrier ({len(sts)} stores, {how}, {nld} "
                    f"loads an iteration): {per:g} per {'warp' if par is None else f'iteration of loop {par}'}")
    for _ in range(len(loops)):
        for i, lp in enumerate(loops):
            if trips[i] is None:
                kids = [j for j, o in enumerate(loops) if o.parent == i and trips[j] is not None and trips[j] > 0]
                if kids:
                    trips[i], rules[i] = min(trips[j] for j in kids), "outer: as its least frequent inner loop"
    for i in range(len(loops)):
        if trips[i] is None:
            trips[i], rules[i] = warps * max(math.log2(max(threads_per_block, 2)), 1.0), "other: log2(threads) per warp"
    total = _add({}, thread_ffma(straight_pairs, _pipe_counts(straight)), float(warps))
    for _, _, _, cb, f in peeled_back:
        _add(total, cb, f)
    for i in range(len(loops)):
        _add(total, own[i], trips[i])
    # rows a warp walks one after another (an outer row loop's iterations per warp): what a
    # block re-reads within one row is in flight for that row only
    walks = [trips[i] / warps for i in row_loops if warps]
    return {"counts": total, "trips": trips, "rules": rules, "own": own,
            "straight": thread_ffma(straight_pairs, _pipe_counts(straight)),
            "bodies": (own_pairs, straight_pairs), "rows_in_turn": max(walks + [1.0])}


def _wavefronts(counts: dict, ld_degree: float, st_degree: float, per_access: dict | None = None) -> float:
    """Shared wavefronts of the SASS counts: per instruction of a width, the simulated
    wavefronts per access of that kind and width where the simulation has such accesses
    (``per_access``: (kind, width) -> wavefronts per access), else the conflict-free phases
    (1, 2, 4 for 32/64/128-bit) times the kind's degree."""
    phases = {4: 1, 8: 2, 16: 4}
    per_access = per_access or {}
    ld = sum(n * per_access.get(("load", w), phases[w] * ld_degree) for w, n in counts["lds"].items())
    st = sum(n * per_access.get(("store", w), phases[w] * st_degree) for w, n in counts["sts"].items())
    return ld + 4 * counts["ldsm"] * ld_degree + st


@functools.lru_cache(maxsize=4096)
def _bank_report(variant, problem, vectorize: bool = True):
    """``(report, twin, why)``: the bank simulation of the problem's small twin
    (:func:`perfkit.banks.count`, cached on disk and here, read-only), or ``(None, None,
    why)`` where it cannot be simulated (the simulation failed).  A GPU process gets it too:
    banks.count runs the simulation in a simulator child there."""
    from . import banks

    try:
        small = banks.small_problem(variant, problem)
        return banks.count(variant, small, vectorize=vectorize), small, ""
    except Exception as exc:  # noqa: BLE001
        return None, None, f"not simulated ({exc.__class__.__name__})"


@functools.lru_cache(maxsize=4096)
def _bank_per_access(variant, problem, vectorize: bool = True) -> dict:
    """{"wavefronts": {(kind, width): per access}, "ideal": {...}}: the simulated wavefronts
    (and conflict-free ones) per warp-wide shared access of that kind and width, from the
    small twin's bank simulation; {} where it cannot be simulated."""
    rep = _bank_report(variant, problem, vectorize)[0]
    if rep is None:
        return {}
    acc: dict = {}
    for site in rep.sites:
        a = acc.setdefault((site["kind"], int(site["width"])), [0, 0, 0])
        a[0] += site["wavefronts"]
        a[1] += site["ideal"]
        a[2] += site["accesses"]
    return {"wavefronts": {k: wf / n for k, (wf, _, n) in acc.items() if n},
            "ideal": {k: i / n for k, (_, i, n) in acc.items() if n},
            "accesses": {k: n for k, (_, _, n) in acc.items()}}


@functools.lru_cache(maxsize=4096)
def _bank_degrees(variant, problem, vectorize: bool = True) -> tuple[float, float, str]:
    """(load degree, store degree, source) of the rung's shared accesses (simulated on a small
    twin of the problem, cached on disk); (1, 1) where it cannot be simulated."""
    rep, small, why = _bank_report(variant, problem, vectorize)
    if rep is None:
        return 1.0, 1.0, f"{why}: conflict free assumed"
    return (rep.load_degree, rep.store_degree,
            f"perfkit.banks simulated at {small.label}" + ("" if vectorize else " (scalar accesses, as the SASS has)"))


def _kernel_key(variant, problem):
    launches = variant.plan(problem, variant.host_buffers(problem))
    return [(id(getattr(l.kernel, "py_func", l.kernel)), tuple(l.block), int(l.shared_bytes),
             tuple((getattr(a, "dtype", type(a)), getattr(a, "ndim", 0)) for a in l.args)) for l in launches]


@functools.lru_cache(maxsize=4096)
def _compile_problem(variant, problem):
    """The problem to compile for: a small twin (:func:`perfkit.banks.small_problem`) when its
    plan launches the very same kernels with the same blocks, shared memory and argument
    types (the SASS then cannot differ: sizes are run-time arguments), so that every size of a
    rung shares one compile; else the problem itself."""
    from . import banks

    try:
        small = banks.small_problem(variant, problem)
        if small != problem and _kernel_key(variant, small) == _kernel_key(variant, problem):
            return small
    except Exception:  # noqa: BLE001
        pass
    return problem


def _inspect(variant, problem, cc, k):
    from . import anatomy

    return anatomy.inspect(variant, _compile_problem(variant, problem), cc=cc, kernel=k)


_NO_DST = ("ST", "STG", "STS", "STL", "BRA", "BAR", "EXIT", "RET", "BSYNC", "BSSY", "WARPSYNC", "DEPBAR",
           "LDGDEPBAR", "NOP", "RED", "CALL", "YIELD", "MEMBAR", "ERRBAR", "CCTL", "BPT", "BREAK", "JMP", "BRX",
           "LDGSTS", "ARRIVES", "SYNCS", "VOTEU", "NANOSLEEP", "REDG", "STSM")
_XU = ("MUFU", "I2F", "F2I", "F2F", "I2I", "FRND", "POPC", "FLO", "BREV", "I2FP", "F2IP")
_OPERAND_REG = re.compile(r"\b(U?P\d|U?PT|UR\d+|URZ|R\d+|RZ)(\.64)?\b")


def _operand_regs(text: str) -> list[str]:
    out = []
    for m in _OPERAND_REG.finditer(text):
        name = m.group(1)
        if name in ("RZ", "URZ", "PT", "UPT"):
            continue
        out.append(name)
        if m.group(2) and name[0] in "RU" and not name.startswith("UP"):
            pre = "UR" if name.startswith("UR") else "R"
            out.append(f"{pre}{int(name[len(pre):]) + 1}")
    return out


def _latencies(r, miss: float, bank_degree: float = 1.0) -> dict:
    """Cycles from issue to a result a dependent instruction can use, by kind (Hopper figures
    from ``data/rates.yaml``); a global access's (atomics; loads outside a batch) is the L2 hit
    latency plus the DRAM miss rate times the difference."""
    g = r["latency_l2_clk"]["value"] + miss * (r["latency_dram_clk"]["value"] - r["latency_l2_clk"]["value"])
    return {"alu": r["latency_alu_clk"]["value"], "xu": r["latency_xu_clk"]["value"],
            "global": g, "local": r["latency_l1_clk"]["value"],
            "shared": r["latency_smem_clk"]["value"] * max(bank_degree, 1.0),
            "ldsm": r["latency_smem_clk"]["value"], "shfl": r["latency_shuffle_clk"]["value"],
            "bar": r["latency_barrier_clk"]["value"], "mma": r["latency_mma_clk"]["value"],
            "fp64": r["latency_fp64_clk"]["value"]}


def _warp_cycles(body: list[str], lat: dict, *, loop: bool) -> float:
    """Cycles one warp alone needs per pass over ``body`` (SASS instructions, in order): an
    in-order scoreboard where an instruction issues one cycle after the one before, or when the
    registers and predicates it reads are ready, whichever is later; its destinations are ready
    its latency later.  A loop body is run twice and the second pass counted (the steady state,
    with the dependences an iteration carries into the next).

    Global loads (when ``lat`` has ``miss_p``): the loads in flight form a batch; the first
    instruction that reads one of them waits for the whole batch, which is back at
    ``global_hit`` (L1) after the last was issued if every load hit L1, else at ``global_miss``:
    a batch of n loads misses with probability min(1, n x ``miss_p``) (a thread's consecutive
    loads share sectors, so at most one of a run misses).  A walk along a row with four loads a
    trip waits for a miss every other trip; four rows read one after the other wait four times."""
    ready: dict = {}
    batched = "miss_p" in lat
    inflight: list = []   # (issue time, registers) of global loads not yet waited for
    inflight_regs: set = set()
    t = 0.0
    passes = 2 if loop else 1
    first = 0.0
    for p in range(passes):
        t0 = t
        for ins in body:
            text = ins.strip().rstrip(";").strip()
            guard = []
            if text.startswith("@"):
                g, _, text = text.partition(" ")
                guard = [g.lstrip("@!")]
            op, _, rest = text.partition(" ")
            base = op.split(".")[0]
            if base == "NOP":
                continue
            ops = [o.strip() for o in rest.split(",")] if rest.strip() else []
            writes = base not in _NO_DST and bool(ops)
            dst = _operand_regs(ops[0]) if writes else []
            srcs = guard + [x for o in (ops[1:] if writes else ops) for x in _operand_regs(o)]
            if writes and "[" in ops[0]:  # an address in the first operand is read
                srcs += dst
                dst = []
            if batched and inflight and any(x in inflight_regs for x in srcs):
                n = len(inflight)
                p_miss = min(1.0, n * lat["miss_p"])
                back = max(i for i, _ in inflight) + lat["global_hit"] + p_miss * (lat["global_miss"] - lat["global_hit"])
                for _, regs_ in inflight:
                    for x in regs_:
                        ready[x] = back
                inflight, inflight_regs = [], set()
            issue = max([t + 1.0] + [ready.get(x, 0.0) for x in srcs])
            if base == "BAR":
                issue += lat["bar"]
            if base in ("LDG", "LD", "ATOMG", "ATOM"):
                lt = lat["global"]
            elif base == "LDL":
                lt = lat["local"]
            elif base in ("LDS", "ATOMS"):
                lt = lat["shared"]
            elif base == "LDSM":
                lt = lat["ldsm"]
            elif base == "SHFL":
                lt = lat["shfl"]
            elif base.endswith("MMA"):
                lt = lat["mma"]
            elif base in _XU:
                lt = lat["xu"]
            elif base.startswith("D") and base[1:] in ("FMA", "ADD", "MUL", "SETP"):
                lt = lat["fp64"]
            else:
                lt = lat["alu"]
            width = 4 if ".128" in op else 2 if (".64" in op or ".WIDE" in op) else 1
            if base.endswith("MMA"):
                width = 4
            regs = list(dst)
            if dst and dst[0].startswith("R") and width > 1:
                b = int(dst[0][1:])
                regs += [f"R{b + k}" for k in range(1, width)]
            if batched and base in ("LDG", "LD"):
                inflight.append((issue, regs))
                inflight_regs.update(regs)
                for x in regs:
                    ready.pop(x, None)
            else:
                for x in regs:
                    ready[x] = issue + lt
                    inflight_regs.discard(x)
            t = issue
        if p == 0:
            first = t - t0
    return (t - t0) if loop else first


def _launch_estimate(variant, problem, launch, k, r: _Inputs, traffic, share, *, use_banks: bool,
                     launch_l1: float | None = None) -> dict:
    cc = r["compute_capability"]["value"]
    rep = _inspect(variant, problem, cc, k)
    sms, clk = r["sm_count"]["value"], r["clock_hz"]["value"]
    blocks = 1
    for g in launch.grid:
        blocks *= int(g)
    tpb = 1
    for b in launch.block:
        tpb *= int(b)
    wpb = -(-tpb // 32)
    warps = blocks * wpb
    bps = max(rep.occupancy.blocks_per_sm, 1)
    per_sm = blocks / sms
    busiest = math.ceil(per_sm)
    tail = busiest / per_sm if per_sm > 0 else 1.0
    waves = math.ceil(blocks / (sms * bps))
    resident_blocks = min(bps, busiest)
    warps_per_sched = max(resident_blocks * wpb / 4.0, 1e-9)
    dense = _is_dense(problem)
    l2_total = traffic.l2_bytes if traffic.l2_bytes is not None else traffic.dram_bytes
    # what the global instructions move (the trip counts of sweeping loops), before L1 hits
    l1_total = traffic.l1_bytes if traffic.l1_bytes is not None else l2_total
    # the extent of a 2-D walk's inner loop: the last dimension of the largest 2-D argument
    two_d = [a for a in launch.args if len(getattr(a, "shape", ()) or ()) >= 2]
    inner_extent = int(max(two_d, key=lambda a: math.prod(a.shape)).shape[-1]) if two_d else None
    # the bytes this launch's global instructions move: from the simulation where it says
    # (each launch's own accesses scaled to the problem), else the launch's share of the rung's
    # the workspace this launch is passed (partial sums a loop may clear before accumulating)
    clear = _array_bytes([a for a in launch.args if getattr(a, "workspace", False)])[2]
    dyn = dynamic_mix(rep, problem, launch_bytes=launch_l1 if launch_l1 else l1_total * share, dense=dense,
                      warps=warps, threads_per_block=tpb, inner_extent=inner_extent, clear_bytes=clear)
    c = dyn["counts"]
    has_smem = (sum(c["lds"].values()) + sum(c["sts"].values())) > 0
    ld_vec = False
    if use_banks and has_smem:
        # the SASS decides whether runs of a thread's accesses became 64/128-bit instructions
        # (loads and stores apart): the simulated grouping (merged runs or one access per
        # element) whose share of wide accesses is nearer the executed SASS's
        def merged(kind, counts):
            wide = (counts[8] + counts[16]) / max(sum(counts.values()), 1e-9)
            sim = {vec: _bank_per_access(variant, problem, vec).get("accesses", {}) for vec in (True, False)}

            def share(a):
                tot = sum(n for (k, _), n in a.items() if k == kind)
                return sum(n for (k, w), n in a.items() if k == kind and w >= 8) / tot if tot else 0.0
            if not sim[True]:
                return wide > 0.25
            return abs(share(sim[True]) - wide) < abs(share(sim[False]) - wide)
        ld_vec = merged("load", c["lds"])
        st_vec = merged("store", c["sts"])
        ldd, _, bsrc = _bank_degrees(variant, problem, ld_vec)
        _, std, bsrc2 = _bank_degrees(variant, problem, st_vec)
        bsrc = bsrc if bsrc == bsrc2 else f"loads: {bsrc}; stores: {bsrc2}"
    else:
        ldd, std, bsrc = 1.0, 1.0, "no shared accesses" if use_banks else "banks off: conflict free assumed"
    # the shared-memory pipe (MIO) also carries every warp shuffle (one wavefront each), and
    # Nsight Compute counts one more per read of the thread index (S2R SR_TID.*: 1 per warp in
    # kernels with no shared accesses or shuffles that read threadIdx.x once, 2 in the naive
    # GEMMs, which read .x and .y; shuffles + 1 per warp in the multirow row norms)
    mio_extra = c["shfl"] + c["s2r_tid"]
    guarded = _guarded_activity(variant, problem, k, dyn, wpb, ld_vec, st_vec) if use_banks and has_smem else None
    if guarded is not None:
        # the warps that branch around a guarded block skip all of it
        _add(c, guarded["counts"], -(1.0 - guarded["active"]) * warps)
    per_access = {"wavefronts": {}, "ideal": {}}
    if use_banks and has_smem:
        for kind, vec in (("load", ld_vec), ("store", st_vec)):
            sim = _bank_per_access(variant, problem, vec)
            for what in per_access:
                per_access[what].update({k: v for k, v in sim.get(what, {}).items() if k[0] == kind})
    wavefronts = _wavefronts(c, ldd, std, per_access["wavefronts"]) + mio_extra
    ideal = _wavefronts(c, 1.0, 1.0, per_access["ideal"]) + mio_extra
    dram_bytes = traffic.dram_bytes * share
    panel = _panel_reads(problem, launch.grid, bps, sms) if dense else None
    dram_src = "the rung's traffic model"
    if panel is not None:
        # a tiled matrix product: each wave of resident blocks reads its distinct A and B panels
        dram_bytes += max(0.0, panel["reads"] - panel["compulsory"]) * share
        dram_src = (f"panels per wave: {panel['waves']} waves of {panel['per_wave']} blocks "
                    f"({panel['tile'][0]}x{panel['tile'][1]} tiles) read {panel['reads'] / 1e6:.0f} MB of A and B")
    l2_bytes = l2_total * share
    l1_bytes = l1_total * share
    # the bytes the instructions ask for (the simulated twin's, scaled) where known: the rung's
    # L1 bytes may count sectors (NHWC batchnorm: 8 of them per useful float)
    asked = launch_l1 if launch_l1 else l1_bytes
    # the simulated twin's tallies of this launch (re-reads, store fill, sector fill, L1 hits)
    gsim = _simulated_launch(variant, problem, k) if use_banks and not dense else None
    reread_to_dram = None
    if not dense and l1_bytes > dram_bytes * 1.05 and r["l2_size_bytes"]["value"] and use_banks:
        # re-reads (a second sweep over a row) find the row in L2 only while the rows the
        # resident blocks work on fit: the launch's distinct bytes of re-read (streamed) arrays,
        # their share of the simulated block's bytes scaled to the launch's L1 bytes, times the
        # share of blocks resident at once, against what L2 keeps for re-reads.  Where they do
        # not fit (every row in flight at once), DRAM moves what the simulated block reads and
        # writes with every read of a streamed array a miss, scaled the same way
        resident = min(blocks, sms * bps)
        keep = r["l2_size_bytes"]["value"] * r["l2_reuse_fraction"]["value"]
        g = gsim
        if g and g.get("streamed_reread", 0) > 0 and g.get("bytes", 0) > 0:
            # a warp that walks its rows one after another (an outer row loop) re-reads within
            # one row: only that row of its share is in flight
            footprint = asked * g["streamed_distinct"] / g["bytes"] * resident / blocks / max(dyn.get("rows_in_turn", 1.0), 1.0)
            # plus the workspace the launch read-modify-writes, which every slot keeps live (a
            # persistent grid's partial sums: layernorm backward's tuned rung at 7c7b2e0, 17 MB
            # of rows in flight and 17 MB of partials)
            footprint += clear
            if footprint > keep:
                # the arrays every block reads (parameters) stay in L2: their bytes as declared.
                # Between what L2 keeps for re-reads and its whole size the re-reads miss in
                # proportion (the part of the footprint past what is kept, over the rest of
                # L2); past the whole L2, all of them (tuned above, 38 MB: a third; Nsight
                # Compute: 174 MB beyond x, dy and dx, of 346 MB that could miss)
                frac = min(1.0, (footprint - keep) / max(r["l2_size_bytes"]["value"] - keep, 1.0))
                miss_bytes = dram_bytes + frac * (asked * g["bytes_if_rereads_miss"] / g["bytes"] - dram_bytes)
                if miss_bytes > dram_bytes:
                    dram_src = (f"re-reads miss L2: {resident} resident blocks of {blocks} work on "
                                f"{footprint / 1e6:.0f} MB at once, L2 keeps {keep / 1e6:.0f} MB; "
                                + ("the simulated block's reads of its rows all go to DRAM" if frac >= 1 else
                                   f"{frac:.2f} of the simulated block's re-reads go to DRAM"))
                    dram_bytes = miss_bytes
                    # the loads that wait on DRAM: every read of a streamed array (the first
                    # touch and the re-reads), not the parameters every block reads
                    streamed = g["streamed_distinct"] + g["streamed_reread"]
                    params = g["bytes"] - g["bytes_if_rereads_miss"]
                    reread_to_dram = frac * streamed / max(streamed + params, 1e-9)
    # stores that fill only part of each sector, the rest written by other blocks (NHWC
    # batchnorm's channel blocks: a float of each 32-byte sector, eight blocks to a sector),
    # over more than L2 keeps: the blocks drift apart, a sector leaves L2 before all its parts
    # arrive, and L2 completes it from DRAM: the unfilled part of the stored bytes is read
    # (Nsight Compute, NHWC 32x256x56x56: 72 MB read and 45 MB written beyond x and y, for
    # 90 MB unfilled, in each of the fused, warp and welford rungs)
    if gsim and r["l2_size_bytes"]["value"]:
        sf = float(gsim.get("store_fill", 1.0))
        req = _requested_bytes(variant, problem, k, _array_bytes(launch.args)[2])
        if req and sf < 0.75 and gsim.get("bytes"):
            stored = req * gsim.get("store_bytes", 0) / gsim["bytes"]
            if stored > r["l2_size_bytes"]["value"] * r["l2_reuse_fraction"]["value"]:
                dram_bytes += stored * (1.0 - sf)
                dram_src += f"; + {stored * (1.0 - sf) / 1e6:.0f} MB completing partly written sectors (store fill {sf:.2f})"
    # L2 tag traffic (Nsight Compute's lts__t_bytes): on a GPU whose L2 is two partitions
    # (H100), a request whose line lives in the far partition and is not yet copied in the near
    # one crosses the fabric and is counted again: first touches, about half of them far.  A
    # streaming op touches each requested byte once; a tiled product re-reads its panels from
    # L2, and only what comes from DRAM is a first touch.  Where blocks share sectors (each
    # takes a part: NHWC batchnorm's channel blocks, a float of each sector, eight blocks to
    # a sector) a sector crosses once for all of them: the requests times the simulated
    # block's sector fill (Nsight Compute at 32x256x56x56 NHWC: 3457 MB of L2 for 3289 MB of
    # requests, where 1.5x would be 4933; a block's own repeated requests, as the naive rows'
    # element-by-element writes, cross each time: 911 MB for 604 MB)
    fabric = r["l2_fabric_fraction"]["value"]
    fill = min(max(float((gsim or {}).get("sector_fill", 1.0)), 1.0 / 32), 1.0)
    l2_tag_bytes = l2_bytes + fabric * (min(dram_bytes, l2_bytes) if dense else l2_bytes * fill)
    # lines per global request: simulated where the bank simulation runs anyway (shared accesses)
    # or where the rung's L1 bytes say its accesses are not coalesced; else 1 per those bytes
    guess = _coalesce_factor(traffic, c, l1_bytes)
    lines, lsrc = None, "banks off" if not use_banks else "coalesced by the rung's L2 bytes: not simulated"
    if use_banks and (has_smem or guess > 1.0):
        lines, lsrc = _lines_per_request(variant, problem, k, c, vectorize=ld_vec if has_smem else None)
    if lines is None:
        lines, lsrc = guess, f"from the rung's L2 bytes ({lsrc})"
    lsu_wavefronts = c["gmem"] * lines
    legs = {
        "dram": dram_bytes / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"]),
        "l2": l2_bytes / (r["l2_bytes_per_sm_per_clk"]["value"] * sms * clk),
        "smem": wavefronts / (r["smem_wavefronts_per_sm_per_clk"]["value"] * sms * clk) * tail,
        "lsu": lsu_wavefronts / (r["lsu_per_sm_per_clk"]["value"] * sms * clk) * tail,
        "issue": c["instr"] / (r["issue_per_sm_per_clk"]["value"] * sms * clk) * tail,
        "fp32": (c["fma"] + 2 * c["imad"]) / (r["fp32_lanes_per_sm"]["value"] / 32 * sms * clk) * tail,
        "alu": (c["alu"] + c["xu"] * 4) / (2.0 * sms * clk) * tail,
        "tensor": (c["mma"] * 4096.0 / (r["tensor_fp16_flops"]["value"] * r["mma_sync_fraction"]["value"])
                   if c["mma"] and r["tensor_fp16_flops"]["value"] else 0.0),
    }
    # latency: one warp's cycles per iteration of each loop (an in-order scoreboard over the
    # SASS: an instruction issues when its operands are ready), against the issue cycles of the
    # warps sharing a scheduler; waves of resident blocks
    miss = min(1.0, max(0.0, dram_bytes / l1_bytes)) if l1_bytes else 1.0
    lat = _latencies(r, miss, ldd)
    # global loads: L1 hits from the simulated block's accesses (a thread's own sectors touched
    # again soon), else from the bytes; a miss goes to L2, and to DRAM for the DRAM share of what
    # reaches L2, where a request waits for the slowest of its lines
    sim = gsim
    pre = "l1v_" if _wide_global(c, loads=True) else "l1s_"
    nreq = (sim.get(pre + "load_requests_hit", 0) + sim.get(pre + "load_miss_requests", 0)) if sim else 0
    if nreq:
        nmiss = sim[pre + "load_miss_requests"]
        miss_p = nmiss / nreq
        miss_lines = sim[pre + "load_miss_lines"] / nmiss if nmiss else 1.0
        to_dram = sim[pre + "load_miss_dram"] / nmiss if nmiss else 0.0
        # the simulated twin fits in L2, so its re-reads hit there; where the launch's do not
        # (the re-read rule above, or a traffic model whose DRAM bytes are what the
        # instructions ask for: every sweep from DRAM), they wait on DRAM as the first reads do
        if reread_to_dram is not None:
            to_dram = max(to_dram, reread_to_dram)
        if asked:
            to_dram = max(to_dram, min(1.0, dram_bytes / asked))
    else:
        miss_p = min(1.0, max(0.0, l2_bytes / l1_bytes)) if l1_bytes else 1.0
        miss_lines = min(max(lines, 1.0), 32.0)
        to_dram = min(1.0, max(0.0, dram_bytes / l2_bytes)) if l2_bytes else 1.0
    harmonic = sum(1.0 / i for i in range(1, int(round(miss_lines)) + 1))
    l_dram = r["latency_dram_clk"]["value"] + r["dram_latency_spread_clk"]["value"] * harmonic
    lat.update(global_hit=r["latency_l1_clk"]["value"], miss_p=miss_p,
               global_miss=r["latency_l2_clk"]["value"] + to_dram * (l_dram - r["latency_l2_clk"]["value"]))
    w = warps_per_sched
    loops = rep.loops
    own_pairs, straight_pairs = dyn["bodies"]  # each loop's own body, one arm per if/else
    sched_cycles = 0.0
    per_loop = []
    for i, lp in enumerate(loops):
        t = dyn["trips"][i]
        if not t:
            continue
        body = [ins for _, ins in own_pairs[i]]
        cyc = _warp_cycles(body, lat, loop=True)
        n = t / warps
        n_instr = dyn["own"][i]["instr"]
        sched_cycles += n * max(cyc, w * n_instr)
        per_loop.append({"loop": i, "iterations_per_warp": n, "warp_cycles": cyc, "issue_cycles": w * n_instr})
    sbody = [ins for _, ins in straight_pairs]
    cyc = _warp_cycles(sbody, lat, loop=False)
    sched_cycles += max(cyc, w * dyn["straight"]["instr"])
    per_loop.append({"loop": "straight", "iterations_per_warp": 1, "warp_cycles": cyc,
                     "issue_cycles": w * dyn["straight"]["instr"]})
    legs["latency"] = waves * sched_cycles / clk
    top = max(legs, key=legs.get)
    # the latency leg already holds the issue cycles of the warps sharing a scheduler: of
    # latency and issue only the larger counts.  L1's wavefronts (lsu) are a resource of their
    # own: the SM's L1 serves every warp's requests one wavefront a cycle, so where requests
    # touch many lines (NHWC batchnorm: 32 a request) a warp also waits behind the other
    # warps' wavefronts, which the latency leg (one warp's own chain) does not hold; it
    # combines with the others by the overlap rule (batchnorm NHWC fused/warp/welford at
    # 7c7b2e0, latency 432 us and lsu 402 us: 0.46 -> 0.55 of the measured 1157 us; the 105
    # recorded runs unchanged)
    _grp = ("latency", "issue")
    ranked = sorted(((v, k) for k, v in legs.items() if not (top in _grp and k in _grp and k != top)), reverse=True)
    ranked = ranked + [(0.0, "")] * (2 - len(ranked))
    ordered = [v for v, _ in ranked]
    overlap = r["overlap"]["value"]
    has_barrier = any(c2["bar"] for c2 in dyn["own"]) or dyn["straight"]["bar"]
    if resident_blocks <= 1 and has_barrier:
        # one block per SM and barriers: its warps load, wait and compute in lock step, so the
        # phases between barriers do not overlap with another block's: the two slowest legs add
        overlap = 1.0
    elif ranked[0][1] == "dram" and ranked[1][1] != "latency":
        # DRAM the slowest: the pipes' work and the other levels' traffic run while it streams
        # (the roofline's max); only exposed latency (too few loads in flight to keep DRAM busy)
        # adds to it
        overlap = 0.0
    seconds = ordered[0] + overlap * ordered[1]
    bound = max(legs, key=legs.get)
    return {"kernel": rep.kernel_name, "grid": tuple(launch.grid), "block": tuple(launch.block), "blocks": blocks,
            "warps": warps, "registers": rep.registers, "blocks_per_sm": bps, "occupancy": rep.occupancy.ratio,
            "waves": waves, "tail": tail, "overlap": overlap, "dram_source": dram_src, "rows_in_turn": dyn.get("rows_in_turn", 1.0), "warps_per_scheduler": warps_per_sched, "share": share,
            "legs": legs, "seconds": seconds, "bound": bound,
            "warp_instructions": c["instr"], "ffma": c.get("ffma_thread", c["ffma"]) * 32, "smem_wavefronts": wavefronts,
            "smem_ideal": ideal, "smem_conflicts": wavefronts - ideal, "bank_degree_load": ldd,
            "bank_degree_store": std, "bank_source": bsrc, "dram_bytes": dram_bytes, "l2_bytes": l2_bytes,
            "l1_bytes": l1_bytes, "l2_tag_bytes": l2_tag_bytes,
            "lsu_wavefronts": lsu_wavefronts, "trips": dyn["trips"], "trip_rules": dyn["rules"],
            "hot_loop": str(rep.hot_loop) if rep.hot_loop else None, "latency_detail": per_loop,
            "latencies_clk": lat}


def _lines_per_request(variant, problem, k: int, c: dict, vectorize: bool | None = None) -> tuple[float | None, str]:
    """L1 wavefronts per global warp instruction of launch ``k``: the 128-byte lines each
    warp-wide request touches, from the addresses the threads of a simulated block used
    (:meth:`perfkit.banks.BankReport.coalescing`; 1 for a coalesced 4-byte warp access, 32 when
    every thread walks its own row).  Runs of a thread's accesses count as one 64/128-bit
    access only where the SASS has wide global accesses.  (None, why) where not simulated."""
    wide = _wide_global(c) if vectorize is None else vectorize
    rep, small, why = _bank_report(variant, problem, wide)
    if rep is None:
        return None, why
    if k >= len(rep.global_launches) or not rep.global_launches[k].get("requests"):
        return None, "no global requests simulated"
    co = rep.coalescing(k)
    return co["lines_per_request"], f"perfkit.banks simulated at {small.label}"


def _launch_weights(variant, problem, sizes) -> list[float] | None:
    """Each launch's part of the bytes the rung's global instructions move, from the bank
    simulation of a small twin of the problem (:func:`_requested_bytes`).  None where there is
    one launch or no simulation (then the share follows the bytes of the arrays passed)."""
    if len(sizes) < 2:
        return None
    out = []
    for k, (_, _, nb) in enumerate(sizes):
        total = _requested_bytes(variant, problem, k, nb)
        if total is None:
            return None
        out.append(total)
    return out


def _requested_bytes(variant, problem, k: int, nb: float) -> float | None:
    """The bytes launch ``k``'s global instructions ask for (elements x their size, before
    any coalescing into sectors), from the bank simulation of a small twin: the simulated
    block's accesses times the twin launch's blocks (the simulated block sees the launch's
    whole grid, so a grid-stride loop does its own share there), or once where that block
    alone touched at least half of the bytes it was passed (the whole launch in one block),
    scaled by ``nb``, the bytes of the arrays the launch is passed, over the twin's.  None
    where not simulated."""
    g = _simulated_launch(variant, problem, k)
    if not g or not g.get("arg_bytes") or not g.get("launch_blocks") or not g.get("bytes"):
        return None
    block = float(g["bytes"])
    total = block if block >= 0.5 * g["arg_bytes"] else block * g["launch_blocks"]
    return total * nb / g["arg_bytes"]


def _guarded_activity(variant, problem, k: int, dyn: dict, wpb: int, ld_vec: bool, st_vec: bool) -> dict | None:
    """Where a launch's shared accesses are all in straight-line code and some sit in blocks
    the SASS branches around (``if t < s:`` in a tree reduction: the warps with no thread
    below ``s`` skip the step), the share of warps that take those blocks, from the simulated
    block's count of warp-wide shared accesses (the block shape and so the count per block are
    the problem's own): ``{"active": share, "counts": the guarded instructions' counts}``.
    None where it does not apply: shared accesses in loops, none guarded, predicated ones
    (``@P0 LDS``: every warp issues those, and Nsight Compute counts them, while the simulation
    sees only the warps with an active thread), or no simulation."""
    def nshared(cc):
        return sum(cc["lds"].values()) + sum(cc["sts"].values()) + cc["ldsm"]

    if any(t and nshared(o) for t, o in zip(dyn["trips"], dyn["own"])):
        return None
    straight = dyn["bodies"][1]
    gpairs = _guarded(straight)
    cg = _pipe_counts([ins for _, ins in gpairs])
    cg["ffma_thread"] = cg["ffma"]
    ng, ns = nshared(cg), nshared(dyn["straight"])
    if not ng or any(ins.strip().startswith("@") and _opcode(ins).split(".")[0] in ("LDS", "STS", "LDSM")
                     for _, ins in straight):
        return None
    reps = {vec: _bank_report(variant, problem, vec)[0] for vec in {ld_vec, st_vec}}
    if any(r is None or k >= len(r.global_launches) for r in reps.values()):
        return None
    g = {vec: r.global_launches[k] for vec, r in reps.items()}
    if not g[ld_vec].get("blocks"):
        return None
    per_block = (g[ld_vec].get("smem_load_accesses", 0) + g[st_vec].get("smem_store_accesses", 0)) / g[ld_vec]["blocks"]
    active = (per_block - wpb * (ns - ng)) / (wpb * ng)
    return {"active": min(1.0, max(0.0, active)), "counts": cg}


def _wide_global(c: dict, loads: bool = False) -> bool:
    """Whether the SASS made runs of a thread's global accesses (its loads, with ``loads``)
    into 64/128-bit instructions: a quarter of the executed ones wide."""
    if loads and c.get("gw"):
        n = {w: v for (kind, w), v in c["gw"].items() if kind == "load"}
        return sum(v for w, v in n.items() if w >= 8) > 0.25 * max(sum(n.values()), 1e-9)
    return c.get("gwide", 0) > 0.25 * max(c["gmem"], 1e-9)


def _simulated_launch(variant, problem, k: int) -> dict | None:
    """Launch ``k``'s global-memory tallies (re-reads, L1 hits, first touches, its blocks and
    arguments' bytes) from the bank simulation of a small twin of the problem, or None where it
    cannot be simulated.  They come from the raw element accesses, the same for either
    ``vectorize`` setting, and one run caches both (:func:`perfkit.banks.count`)."""
    rep = _bank_report(variant, problem, True)[0]
    if rep is None:
        return None
    return rep.global_launches[k] if k < len(rep.global_launches) else None


def _coalesce_factor(traffic, c, l2_bytes) -> float:
    """L1 wavefronts per global warp instruction: the rung's L2 bytes over the bytes its warp
    instructions ask for, in 32-byte sectors per 128-byte line (1: every warp access is one
    line; up to 32: every thread its own line)."""
    asked = c["gmem_bytes"] * 32
    if asked <= 0:
        return 1.0
    return float(min(32.0, max(1.0, l2_bytes / asked * 4.0))) if l2_bytes > asked * 1.5 else 1.0


def _library_estimate(variant, problem, r: _Inputs, traffic) -> Estimate:
    peak = r["fp32_flops"]["value"]
    pk = (traffic.extra or {}).get("peak", "fp32")
    if str(pk).startswith("tensor") or getattr(problem, "dtype", "float32") == "float16" and _is_dense(problem):
        peak = r["tensor_fp16_flops"]["value"] or peak
    legs = {k: 0.0 for k in LEGS}
    legs["dram"] = traffic.dram_bytes / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"])
    legs["fp32" if peak == r["fp32_flops"]["value"] else "tensor"] = traffic.flops / peak
    legs["launch"] = r["library_call_s"]["value"]
    secs = max(legs["dram"], legs["fp32"], legs["tensor"]) + legs["launch"]
    return Estimate(seconds=secs, bound="library (roofline)", legs=legs, inputs=dict(r), launches=[],
                    variant=variant.label, problem=problem.label)


def flush_seconds(r) -> float | None:
    """Seconds the GPU spends on perfkit's cold-L2 flush (:func:`perfkit.timing.measure` writes
    2 x L2, at least 8 MiB, ahead of each sample) at the effective DRAM rate of ``r``
    (:func:`rates`); None where ``devices.yaml`` does not give the L2 size (the timer sizes its
    flush from the device it runs on)."""
    from .timing import flush_bytes_for

    if not r["l2_size_bytes"]["value"]:
        return None
    return _write_seconds(flush_bytes_for(r["l2_size_bytes"]["value"]), r)


def _write_seconds(nbytes: float, r) -> float:
    """Seconds to write ``nbytes`` to DRAM at the effective rate of ``r`` (a flush)."""
    return nbytes / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"])


def estimate(variant, problem, gpu: str = "h100-sxm", *, banks: bool = True,
             ahead_s: float | None = None) -> Estimate:
    """Predicted median time of one launch sequence of ``variant`` on ``problem`` on ``gpu``
    (a key or alias of ``data/devices.yaml``), from static inputs only; see the module
    docstring for the model.  ``banks=False`` skips the bank-conflict simulation (conflict-free
    shared memory assumed).  ``ahead_s``: seconds of GPU work queued ahead of the sequence
    while the host launches it, which hide that much of the host's launch cost (default: the
    cold-L2 flush, :func:`flush_seconds`; a record taken behind a spin kernel adds its
    ``extra["spin_s"]``)."""
    from .kernels.base import Problem, Variant

    if not isinstance(variant, Variant) or not isinstance(problem, Problem):
        raise TypeError("estimate(variant, problem, gpu): pass a perfkit Variant and Problem")
    r = rates(gpu)
    traffic = _traffic_for(variant, problem, r)
    if variant.oracle:
        e = _library_estimate(variant, problem, r, traffic)
        e.gpu = gpu
        return e
    launches = _plan_launches(variant, problem, r)
    if not launches:
        e = _library_estimate(variant, problem, r, traffic)
        e.gpu = gpu
        return e
    sizes = [_array_bytes(l.args) for l in launches]
    weights = _launch_weights(variant, problem, sizes) if banks else None
    if weights is None and banks and len(sizes) == 1 and traffic.l1_bytes is None and not _is_dense(problem):
        # one launch of a streaming op whose traffic model gives L2 bytes only: where its
        # accesses do not coalesce (NHWC batchnorm: one useful float per 32-byte sector) those
        # are several times what its instructions ask for, and would multiply its loops' trips;
        # the simulated twin's requested bytes scaled to the problem count them instead.  (A
        # tiled matrix product's tile loads are what its traffic model counts: kept)
        w = _requested_bytes(variant, problem, 0, sizes[0][2])
        weights = [w] if w else None
    simulated = weights is not None
    if weights is None:
        weights = [s[2] for s in sizes]
    tot = sum(weights) or 1.0
    per = []
    for k, (l, (na, ns, nb)) in enumerate(zip(launches, sizes)):
        per.append(_launch_estimate(variant, problem, l, k, r, traffic, weights[k] / tot, use_banks=banks,
                                    launch_l1=weights[k] if simulated else None))
        per[-1]["host_s"] = r["host_base_s"]["value"] + na * r["host_per_array_arg_s"]["value"] \
            + ns * r["host_per_scalar_arg_s"]["value"]
    # the launch sequence: the host issues launches back to back while the GPU works through
    # what was queued ahead of them (the L2 flush of a cold-L2 timing: ``ahead``), then runs
    # them in order; launch i is queued at H_i = h_0 + ... + h_i - ahead (time 0: the start
    # event, when the GPU finishes the work ahead) and starts at max(H_i, end of launch i-1).
    # Host cost shows where it outlasts the work ahead (first launch) or the kernels before
    ahead = flush_seconds(r) if ahead_s is None else max(float(ahead_s), 0.0)
    ahead_src = "the cold-L2 flush, 2 x L2 at dram_bw x dram_efficiency" if ahead_s is None else "given"
    if ahead is None:  # L2 size unknown: the flush taken as long as the first launch's host cost
        ahead = per[0]["host_s"] if per else 0.0
        ahead_src = "the cold-L2 flush, its length unknown (no L2 size in devices.yaml): as long as the first launch's host cost"
    host = -ahead
    end = 0.0
    for p in per:
        host += p["host_s"]
        end = max(host, end) + p["seconds"]
    end += r["launch_latency_s"]["value"]
    busy = sum(p["seconds"] for p in per)
    legs = {k: sum(p["legs"].get(k, 0.0) for p in per) for k in LEGS if k != "launch"}
    legs["launch"] = end - busy
    bound = max(legs, key=legs.get)
    inputs = dict(r)
    inputs["traffic"] = {"value": traffic.as_dict(), "source": f"{variant.label}.traffic(problem)"}
    inputs["ahead_s"] = {"value": ahead, "source": "GPU work queued ahead of the sequence: " + ahead_src}
    for i, p in enumerate(per):
        inputs[f"launch{i}"] = {"value": {k: v for k, v in p.items() if k not in ("legs",)},
                                "source": "perfkit.anatomy (compiled for sm_%d%d) and perfkit.banks" % tuple(r["compute_capability"]["value"])}
    return Estimate(seconds=end, bound=bound, legs=legs, inputs=inputs, launches=per, gpu=gpu,
                    variant=variant.label, problem=problem.label)


# --- what-if across devices -------------------------------------------------------------------
def what_if(variant, problem, gpus=None, **kw):
    """The estimate of one rung on every device of ``devices.yaml`` (or ``gpus``): a DataFrame
    with one row per device (seconds, bound, and one column per leg)."""
    import pandas as pd

    from . import specs

    rows = []
    for g in gpus or specs.names():
        try:
            e = estimate(variant, problem, g, **kw)
            rows.append({"gpu": g, "seconds": e.seconds, "bound": e.bound, **{f"leg_{k}": v for k, v in e.legs.items()}})
        except Exception as exc:  # noqa: BLE001  (a target the compiler cannot build)
            rows.append({"gpu": g, "seconds": float("nan"), "bound": f"error: {exc.__class__.__name__}: {exc}"[:120]})
    return pd.DataFrame(rows)


def plot_what_if(df, ax=None, title: str | None = None):
    """Stacked legs per device (each leg's seconds, the combination is the dot)."""
    import matplotlib.pyplot as plt

    legs = [c for c in df.columns if c.startswith("leg_") and df[c].fillna(0).sum() > 0]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    bottom = [0.0] * len(df)
    for c in legs:
        vals = (df[c].fillna(0) * 1e6).tolist()
        ax.bar(df["gpu"], vals, bottom=bottom, label=c[4:])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(df["gpu"], df["seconds"] * 1e6, "ko", label="estimate")
    ax.set_ylabel("microseconds (legs stacked)")
    ax.set_title(title or "which GPU would this kernel like, and why", fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=7, ncol=2)
    return ax


# --- validation against the records -------------------------------------------------------
def _find_variant(op: str, rung: int, name: str, config: dict):
    from .kernels import peers as _peers

    mod = registry.module(op)
    if rung < 0:
        cands = list(getattr(mod, "PEERS", []) or []) + list((getattr(_peers, "PEERS", {}) or {}).get(op, []))
        for v in cands:
            if v.name == name:
                return v, mod
        return None, mod
    for v in mod.LADDER:
        if v.name == name:
            try:
                return type(v)(**config) if config and list(config) == list(v.config) else v, mod
            except Exception:  # noqa: BLE001
                return v, mod
    return None, mod


def _variant_as_recorded(v, mod, op, name, config, commit):
    """The rung as it was when the record was made: today's when its kernel code is unchanged
    since ``commit`` (:func:`perfkit.history.source_changed_since`), else the rung rebuilt from
    that commit (:func:`perfkit.history.variant_at`).  Returns (variant, module, code) with
    code ``"today"``, ``"at <commit>"``, or ``"today (changed since <commit>; <why>)"``."""
    from . import history as _history

    changed = _history.source_changed_since(v, commit) if v is not None else True
    if changed is False:
        return v, mod, "today"
    old, old_mod = _history.variant_at(commit, op, name, config)
    if old is not None:
        return old, old_mod, f"at {commit[:7]}"
    why = _history.why_not(commit) or "rung not in that commit's ladder"
    return v, mod, f"today (changed since {commit[:7]}; {why})" if changed else "today"


def validate(gpu: str = "h100-sxm", results_root=None, ncu_path=None, *, banks: bool = True,
             ops=None, problems=None, history: bool = True):
    """Estimate every recorded (problem, rung) and compare.  Returns ``(table, line, levels)``:
    the per-record table, the summary line, and per-level counts against Nsight Compute.
    ``ops`` / ``problems``: keep only records of these ops / problem labels.

    A record is compared with the code it measured: where a rung's kernel code changed since
    the record's commit, the rung is rebuilt as it was then (:mod:`perfkit.history`; column
    ``code`` says ``at <commit>``).  ``history=False`` estimates today's kernels throughout.
    Only records made on ``gpu`` are compared (an H200 record is no test of an H100 estimate);
    ``ncu_path`` defaults to the newest Nsight Compute table of ``gpu`` (:func:`ncu_table`)."""
    import glob
    import json

    import numpy as np
    import pandas as pd

    root = Path(results_root or paths.DATA / "results")
    r = rates(gpu)
    want = _spec_key(gpu)
    if ncu_path is None:
        ncu_path = ncu_table(gpu)
    rows = []
    cache = {}
    commits: set = set()
    for f in sorted(glob.glob(str(root / "**" / "*.json"), recursive=True)):
        d = json.loads(Path(f).read_text())
        if d.get("simulated"):
            continue
        prov = d.get("provenance") or {}
        if _spec_key(prov.get("gpu") or (prov.get("device") or {}).get("name")) != want:
            continue
        op, rung, name = d["op"], int(d["rung"]), d.get("variant", "")
        if not registry.has(op):  # a ceiling record (op "roofline") is no rung
            continue
        if (ops and op not in ops) or (problems and d["problem"] not in problems):
            continue
        v, mod = _find_variant(op, rung, name, d.get("config") or {})
        commit = ((d.get("provenance") or {}).get("git_commit") or "")
        if commit and rung > 0:
            commits.add(commit)
        code = "today"
        if rung > 0 and commit and history:
            v, mod, code = _variant_as_recorded(v, mod, op, name, d.get("config") or {}, commit)
        row = {"op": op, "problem": d["problem"], "rung": f"{rung:02d} {name}" if rung >= 0 else f"peer {name}",
               "measured_s": d["timing"]["median_s"], "kind": "oracle/peer" if rung <= 0 else "rung", "code": code}
        if v is None:
            row.update(predicted_s=np.nan, bound="rung not in ladder")
            rows.append(row)
            continue
        try:
            p = mod.Problem(**d["params"])
            ahead = _record_ahead(d.get("timing") or {}, r)
            key = (op, code, json.dumps(d["params"], sort_keys=True), name, json.dumps(v.config, sort_keys=True, default=str),
                   round(ahead * 1e7) if ahead is not None else None)
            if key not in cache:
                cache[key] = estimate(v, p, gpu, banks=banks, ahead_s=ahead)
            e = cache[key]
            row.update(predicted_s=e.seconds, bound=e.bound)
            row["_estimate"] = e
        except Exception as exc:  # noqa: BLE001
            row.update(predicted_s=np.nan, bound=f"error: {exc.__class__.__name__}: {str(exc)[:60]}")
        rows.append(row)
    cols = ["op", "problem", "rung", "code", "kind", "measured_s", "predicted_s", "bound"]
    table = pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols)  # no records: an empty table
    table["ratio"] = table["predicted_s"] / table["measured_s"]
    line = summary_line(table[table["kind"] == "rung"]["ratio"])

    def unrecorded(op, label, rung_label):
        """An Nsight Compute row no record has (saxpy, the NHWC batchnorm rows): the rung as of
        the records' commit (where they share one), estimated at the row's problem."""
        num, _, name = str(rung_label).partition(" ")
        if len(commits) != 1 or not num.isdigit() or int(num) <= 0 \
                or (ops and op not in ops) or (problems and label not in problems):
            return None
        try:  # an op perfkit has no ladder for, or a rung no commit has: left out
            v, mod = _find_variant(op, int(num), name, {})
            if history:
                v, mod, _ = _variant_as_recorded(v, mod, op, name, {}, next(iter(commits)))
        except Exception:  # noqa: BLE001
            return None
        if v is None:
            return None
        kw = {}
        for tok in str(label).split():
            k, _, val = tok.partition("=")
            for cast in (int, float):
                try:
                    val = cast(val)
                    break
                except ValueError:
                    pass
            kw[k] = val
        try:
            return estimate(v, mod.Problem(**kw), gpu, banks=banks)
        except Exception:  # noqa: BLE001  (a row the model cannot take: left out)
            return None

    levels = _levels(table, ncu_path, unrecorded)
    return table, line, levels


def _record_ahead(timing: dict, r) -> float | None:
    """Seconds of GPU work a record's timer queued ahead of each sample: its L2 flush
    (``flush_bytes`` at the effective DRAM rate) plus its spin kernel (``extra["spin_s"]``,
    timers from 2026-11-24 on); None where the record does not say (the default applies)."""
    if "flush_bytes" not in timing:
        return None
    spin = float((timing.get("extra") or {}).get("spin_s") or 0.0)
    return _write_seconds(float(timing.get("flush_bytes") or 0), r) + spin


def repeat_line(table) -> str:
    """How far apart records of the same rung, problem and code are (the measurements' own
    spread, a floor under any model's error): ``repeated records: median spread X% over N
    pairs (max Y%)``, the spread of a pair being max/min - 1."""
    import numpy as np

    t = table[table["kind"] == "rung"]
    spreads = []
    for _, g in t.groupby(["op", "problem", "rung", "code"]):
        v = sorted(float(x) for x in g["measured_s"] if x == x and x > 0)
        if len(v) > 1:
            spreads.append(v[-1] / v[0] - 1)
    if not spreads:
        return "repeated records: none"
    return (f"repeated records: median spread {100 * np.median(spreads):.0f}% over {len(spreads)} pairs "
            f"(max {100 * max(spreads):.0f}%)")


def levels_line(levels) -> str:
    """``per-level within 25% of Nsight Compute: dram_bytes K/N, ...`` of the per-level table
    (model / ncu ratios; a level where both counts are zero agrees)."""
    parts = []
    for lvl, g in levels.groupby("level", sort=True):
        both0 = (g["ncu"] == 0) & (g["model"] == 0)
        ok = int((((g["ratio"] - 1).abs() <= 0.25) | both0).sum())
        parts.append(f"{lvl} {ok}/{len(g)}")
    return "per-level within 25% of Nsight Compute: " + ", ".join(parts)


def summary_line(ratios) -> str:
    """``median abs error X% over N; worst ratio Y; within 2x: K/N`` of predicted/measured
    ratios (NaN ratios, rungs the model could not estimate, are left out)."""
    import numpy as np

    r = np.asarray([x for x in ratios if x == x], dtype=float)
    n = len(r)
    if not n:
        return "median abs error nan% over 0; worst ratio nan; within 2x: 0/0"
    err = np.abs(r - 1)
    worst = r[int(np.argmax(np.abs(np.log(r))))]
    within = int(((r <= 2) & (r >= 0.5)).sum())
    return f"median abs error {100 * np.median(err):.0f}% over {n}; worst ratio {worst:.2f}; within 2x: {within}/{n}"


def _levels(table, ncu_path=None, unrecorded=None):
    """Per-level counts of the estimates against the Nsight Compute table (where it has the
    rung at the same problem): DRAM bytes, L2 bytes, shared wavefronts, warp instructions, FFMA.
    ``unrecorded(op, problem, rung)``, where given, estimates a row of the table that no record
    has (column ``record`` False)."""
    import pandas as pd

    if ncu_path is None:
        return pd.DataFrame()
    path = Path(ncu_path)
    if not path.exists():
        return pd.DataFrame()
    ncu = pd.read_csv(path)
    ncu["dram_bytes"] = ncu["dram_read_bytes"] + ncu["dram_write_bytes"]
    agg = ncu.groupby(["op", "problem", "rung"], as_index=False)[
        ["dram_bytes", "l2_bytes", "shared_wavefronts", "warp_instructions", "ffma_thread_instructions"]].sum()
    out = []
    seen = set()

    def add(op, problem, rung, e, m, record):
        est = {"dram_bytes": sum(p["dram_bytes"] for p in e.launches),
               "l2_bytes": sum(p.get("l2_tag_bytes", p["l2_bytes"]) for p in e.launches),
               "shared_wavefronts": sum(p["smem_wavefronts"] for p in e.launches),
               "warp_instructions": sum(p["warp_instructions"] for p in e.launches),
               "ffma_thread_instructions": sum(p["ffma"] for p in e.launches)}
        for lvl, val in est.items():
            meas = float(m[lvl])
            out.append({"op": op, "problem": problem, "rung": rung, "level": lvl, "ncu": meas, "model": val,
                        "ratio": val / meas if meas else float("nan"), "record": record})

    for _, row in table.iterrows():
        e = row.get("_estimate")
        if e is None or not isinstance(e, Estimate) or not e.launches:
            continue
        key = (row["op"], row["problem"], row["rung"])
        if key in seen:
            continue
        seen.add(key)
        m = agg[(agg["op"] == row["op"]) & (agg["problem"] == row["problem"]) & (agg["rung"] == row["rung"])]
        if m.empty:
            continue
        add(row["op"], row["problem"], row["rung"], e, m.iloc[0], True)
    if unrecorded is not None and len(table):
        for _, m in agg.iterrows():
            key = (m["op"], m["problem"], m["rung"])
            if key in seen:
                continue
            e = unrecorded(*key)
            if isinstance(e, Estimate) and e.launches:
                add(*key, e, m, False)
    return pd.DataFrame(out)


def levels_table(levels):
    """The per-level ratios as a table: a row per (op, rung, problem), a column per level;
    ``*`` marks a row of the Nsight Compute table no record has."""
    t = levels.assign(ratio=levels["ratio"].round(2),
                      problem=[("" if rec else "* ") + " ".join(w for w in str(p).split()
                                                                 if not w.startswith(("eps=", "momentum=", "axis=", "alpha=")))
                               for p, rec in zip(levels["problem"], levels.get("record", [True] * len(levels)))])
    return t.pivot_table(index=["op", "rung", "problem"], columns="level", values="ratio").round(2)


def validate_cli(argv=None) -> int:
    """``perfkit model validate [--gpu SLUG] [--no-banks] [--levels]``."""
    import argparse

    import pandas as pd

    ap = argparse.ArgumentParser(prog="perfkit model", description="the performance model")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="estimate every recorded rung and compare with the measurement")
    v.add_argument("--gpu", default="h100-sxm", help="devices.yaml key or alias (default h100-sxm)")
    v.add_argument("--results", default=None, help="records folder (default data/results)")
    v.add_argument("--ncu", default=None, help="Nsight Compute table (default: the newest of --gpu in data/ncu/)")
    v.add_argument("--no-banks", action="store_true", help="skip the bank-conflict simulation")
    v.add_argument("--today", action="store_true",
                   help="estimate today's kernels even where a rung's code changed since its record")
    args = ap.parse_args(argv)
    import sys

    from .specs import SpecError

    if args.results is not None and not Path(args.results).is_dir():
        print(f"perfkit model validate: no records folder {args.results!r}", file=sys.stderr)
        return 2
    if args.ncu is not None and not Path(args.ncu).is_file():
        print(f"perfkit model validate: no Nsight Compute table {args.ncu!r}", file=sys.stderr)
        return 2
    try:
        table, line, levels = validate(args.gpu, args.results, args.ncu, banks=not args.no_banks,
                                       history=not args.today)
    except SpecError as exc:
        print(f"perfkit model validate: {exc}", file=sys.stderr)
        return 2
    if not len(table):
        print(f"perfkit model validate: no GPU records (JSON, not simulated) under "
              f"{args.results or 'data/results'}", file=sys.stderr)
        return 1
    show = table.drop(columns=[c for c in table.columns if c.startswith("_") or c == "kind"])
    show = show.assign(measured_us=(show.pop("measured_s") * 1e6).round(1),
                       predicted_us=(show.pop("predicted_s") * 1e6).round(1), ratio=show["ratio"].round(2))
    show = show[["op", "problem", "rung", "code", "measured_us", "predicted_us", "ratio", "bound"]]
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 48):
        print(show.to_string(index=False))
        if len(levels):
            print()
            print("per-level counts against Nsight Compute (model / ncu; * a row no record has):")
            print(levels_table(levels).to_string())
            print(levels_line(levels))
    print(repeat_line(table))
    print(line)
    return 0
