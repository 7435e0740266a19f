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
