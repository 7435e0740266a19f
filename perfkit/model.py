"""Analytical traffic and time models: FLOPs, bytes per memory level, and the expected limiter.

Every rung declares its work as data (in the spirit of nvbench's ``add_global_memory_reads``):
a :class:`Traffic` says how many FLOPs it does and how many bytes it moves at each level of
the memory hierarchy.  :func:`predict` turns that into a time on a device from its ceilings
(published ones from ``data/devices.yaml`` or measured ones): the simplest roofline model,
``time = max(flops / peak_flops, bytes_level / bandwidth_level)`` over the levels it knows.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Traffic:
    """Work a kernel does for one problem.  Bytes are totals over the whole launch.

    ``dram_bytes`` is what must cross the DRAM interface, ``l2_bytes`` what the SMs request
    from L2 (loads that miss L1), ``smem_bytes`` shared-memory traffic.  ``None`` means the
    model does not say.  ``limiter`` is the resource the rung's author expects to bind.
    """

    flops: float
    dram_bytes: float
    l2_bytes: float | None = None
    smem_bytes: float | None = None
    limiter: str | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def intensity(self) -> float:
        """Arithmetic intensity against DRAM, FLOP/byte."""
        return self.flops / self.dram_bytes if self.dram_bytes else float("inf")

    def as_dict(self) -> dict:
        return asdict(self)


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
