"""The model's equations, in the order a launch's time is put together.

1. Legs (:func:`resource_legs`): the seconds each resource of the SM or the memory system
   needs for a launch if nothing else limited it, from the launch's counts and the rates.
2. Latency (:mod:`perfkit.model.latency`): per loop, iterations per warp x max(one warp's
   cycles per iteration, the issue cycles of the warps sharing a scheduler) (Little's law with
   the resident warps), summed, times the waves of blocks.
3. Combination (:func:`combine`): ``max(legs) + overlap x second_largest(legs)``.
4. The launch sequence (:func:`launch_sequence`): the host queues launches while the GPU works
   through what was queued ahead; the GPU runs them in order.

Plus the plain roofline bound of a :class:`Traffic` (:func:`predict`) and the result types."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..kernels.base import Traffic  # the rungs' contract (older kernels import it from perfkit.model)


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


def resource_legs(c: dict, *, dram_bytes: float, l2_bytes: float, wavefronts: float, lsu_wavefronts: float,
                  tail: float, r) -> dict:
    """Legs (seconds) of one launch, each the time one resource needs if nothing else limited
    it, from the launch's dynamic counts ``c`` (:func:`perfkit.model.trips.dynamic_mix`), its
    traffic (:mod:`perfkit.model.memory`) and the rates ``r``:

    ========  ================================================================================
    dram      DRAM bytes / (datasheet bandwidth x ``dram_efficiency``)
    l2        L2 bytes (what misses L1) / (L2->SM bytes per clock per SM x SMs x clock)
    smem      shared wavefronts / (1 wavefront per clock per SM)
    lsu       global/local memory instructions x L1 wavefronts (lines) each / (1 per clock per SM)
    issue     warp instructions / (4 per clock per SM)
    fp32      (FFMA + FADD + FMUL + 2 x IMAD) / (128 lanes / 32 per clock per SM)
    alu       (integer and compare + 4 x MUFU/conversions) / (2 warp instructions per clock per SM)
    tensor    mma.sync FLOPs (4096 per m16n8k16) / (dense tensor peak x ``mma_sync_fraction``)
              + wgmma FLOPs (HGMMA.MxNxK: 2MNK / 4 per warp) / (dense tensor peak x ``wgmma_fraction``)
    ========  ================================================================================

    The SM-side legs (smem, lsu, issue, fp32, alu) are multiplied by ``tail``, the last wave's:
    the busiest SM runs ``ceil(blocks / SMs)`` blocks, not ``blocks / SMs``.  The latency leg
    is :func:`latency_leg`.  Worked case: 1 GB of DRAM traffic on an H100 (3.35 TB/s x the
    fitted efficiency) is a dram leg of about 0.3 / efficiency ms."""
    sms, clk = r["sm_count"]["value"], r["clock_hz"]["value"]
    return {
        "dram": dram_bytes / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"]),
        "l2": l2_bytes / (r["l2_bytes_per_sm_per_clk"]["value"] * sms * clk),
        "smem": wavefronts / (r["smem_wavefronts_per_sm_per_clk"]["value"] * sms * clk) * tail,
        "lsu": lsu_wavefronts / (r["lsu_per_sm_per_clk"]["value"] * sms * clk) * tail,
        "issue": c["instr"] / (r["issue_per_sm_per_clk"]["value"] * sms * clk) * tail,
        "fp32": (c["fma"] + 2 * c["imad"]) / (r["fp32_lanes_per_sm"]["value"] / 32 * sms * clk) * tail,
        "alu": (c["alu"] + c["xu"] * 4) / (2.0 * sms * clk) * tail,
        "tensor": ((c.get("mma_flops", 4096.0 * c["mma"]) / r["mma_sync_fraction"]["value"]
                    + c.get("wgmma_flops", 0.0) / r["wgmma_fraction"]["value"]) / r["tensor_fp16_flops"]["value"]
                   if c["mma"] and r["tensor_fp16_flops"]["value"] else 0.0),
    }


def latency_leg(loops: list, waves: int, clock_hz: float) -> float:
    """The latency leg (seconds): per loop (and once for the straight-line code), iterations per
    warp x max(one warp's cycles per iteration, the issue cycles of the warps sharing a
    scheduler), summed, times the waves of resident blocks.  ``loops``: (iterations per warp,
    warp cycles, issue cycles) each.  This is Little's law with the resident warps: few warps,
    or loads used right after they issue, leave latency exposed; many warps hide it behind
    their issue cycles.  One warp's cycles come from the scoreboard
    (:func:`perfkit.model.latency.warp_cycles`).  Worked case: a loop run 16 times a warp at
    400 cycles an iteration with 8 warps of 20 instructions on a scheduler (160 issue cycles),
    in 2 waves at 1.98 GHz: 2 x 16 x 400 / 1.98e9 = 6.5 us."""
    cycles = 0.0
    for n, cyc, issue in loops:
        cycles += n * max(cyc, issue)
    return waves * cycles / clock_hz


def combine(legs: dict, overlap: float, *, lock_step: bool = False, fp32_in_issue: bool = False) -> tuple[float, float]:
    """The combination, the model's one assumption about overlap: a launch takes
    ``max(legs) + overlap x second_largest(legs)``, ``overlap`` a fitted constant (0: perfect
    overlap of all resources, 1: the two slowest serialize).  Returns (seconds, overlap used).

    * When latency or issue is the largest leg, the other is not the second: the latency leg
      already holds the issue cycles of the warps sharing a scheduler.  L1's wavefronts (lsu)
      are a resource of their own: the SM's L1 serves all its warps' requests, so a warp also
      waits behind the others' wavefronts, which one warp's latency chain does not hold
      (batchnorm NHWC, 32 lines a request: 0.46 -> 0.55 of the measured time).
    * ``fp32_in_issue`` (the FP32 pipe takes a warp instruction a clock per scheduler, as fast as
      issue: 128 FP32 lanes an SM on Hopper, Ada, Blackwell; not the A100's 64): when latency or
      issue is the largest leg, the FP32 leg is not the second either: every FFMA takes an issue
      slot, so the pipe's time is inside the issue cycles those legs hold and cannot follow them.
      Test ``test_the_fp32_pipe_is_inside_the_issue_leg_where_it_takes_a_warp_instruction_a_clock``;
      evidence (2026-11-27): the SIMT GEMM rungs 7-11 at four shapes on the H200 and 4096^3 on the
      H100 go from 1.00-1.23 of their measured times to 0.91-1.07, simt_wide (one block an SM, never
      fitted) from 1.51 to 1.08; validate H200 15% -> 11%, H100 13% (unchanged), within 2x unchanged.
    * ``lock_step`` (one block per SM, with barriers): the phases between barriers cannot
      overlap with another block's: the two slowest legs add (overlap 1).
    * When DRAM is the largest leg and the second is not latency, the second hides under it
      (overlap 0: the roofline's max of memory and compute time); exposed latency does not
      (too few loads in flight to keep DRAM busy).  Added after the batched load latencies, it
      took validate's median error on the H100 records from 16% to 15%, within 2x unchanged.

    Worked case: legs dram 10, fp32 4, latency 6 us: DRAM largest, latency second: 10 +
    overlap x 6; legs latency 10, issue 8, fp32 3: 10 + overlap x 3."""
    top = max(legs, key=legs.get)
    grp = ("latency", "issue")
    inside = grp + ("fp32",) if fp32_in_issue else grp
    ranked = sorted(((v, k) for k, v in legs.items() if not (top in grp and k in inside and k != top)), reverse=True)
    ranked = ranked + [(0.0, "")] * (2 - len(ranked))
    ordered = [v for v, _ in ranked]
    if lock_step:
        overlap = 1.0
    elif ranked[0][1] == "dram" and ranked[1][1] != "latency":
        overlap = 0.0
    return ordered[0] + overlap * ordered[1], overlap


def launch_sequence(host_s: list, kernel_s: list, ahead: float, launch_latency: float) -> float:
    """Seconds of one launch sequence, from the start event.  The host issues launches back to
    back (perfkit's launch cost on the H100 machine of the records: 37 us + 4.6 us per array
    argument, derived from the records against Nsight Compute's kernel times,
    ``data/rates.yaml``; numba-cuda PR #288 timed Numba's dispatch alone at 6.6 us + 3.7 us per
    array elsewhere); the GPU runs them in order.  The sequence ends at ``end_i = max(H_i,
    end_{i-1}) + kernel_i``, with ``H_i = h_0 + ... + h_i - ahead`` the time launch i is
    queued: the host launches while the GPU works through what was queued ahead of the
    sequence (``ahead``: the timer's cold-L2 flush, :func:`flush_seconds`, 43 us on the H100 of
    ``devices.yaml``, 45 us for the records' 2 x 50 MiB; plus the spin kernel of timers that
    queue one); plus ``launch_latency`` once.  Host cost shows where it outlasts the work
    ahead, or the kernels before it.  Worked case: two launches of 40 us host cost and 10 us
    each behind a 45 us flush: H = -5, 35 us; ends 10, 45 us; + the launch latency."""
    host = -ahead
    end = 0.0
    for h, k in zip(host_s, kernel_s):
        host += h
        end = max(host, end) + k
    return end + launch_latency


def flush_seconds(r) -> float | None:
    """Seconds the GPU spends on perfkit's cold-L2 flush (:func:`perfkit.timing.measure` writes
    2 x L2, at least 8 MiB, ahead of each sample) at the effective DRAM rate of ``r``
    (:func:`rates`); None where ``devices.yaml`` does not give the L2 size (the timer sizes its
    flush from the device it runs on)."""
    from ..timing import flush_bytes_for

    if not r["l2_size_bytes"]["value"]:
        return None
    return write_seconds(flush_bytes_for(r["l2_size_bytes"]["value"]), r)


def write_seconds(nbytes: float, r) -> float:
    """Seconds to write ``nbytes`` to DRAM at the effective rate of ``r`` (a flush)."""
    return nbytes / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"])
