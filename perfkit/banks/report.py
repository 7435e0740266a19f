"""What a simulation found: :class:`BankReport` (shared wavefronts per site, global requests,
sectors and lines per launch and per site) and :class:`BankError`."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class BankError(RuntimeError):
    """The rung cannot be simulated for bank counting (the message says why)."""


@dataclass
class BankReport:
    """Shared-memory accesses of the simulated blocks, as warp-wide instructions."""

    variant: str
    problem: str
    blocks: int                   # blocks simulated (over all launches)
    accesses: int = 0             # warp-wide shared instructions
    wavefronts: int = 0
    ideal: int = 0
    load_accesses: int = 0
    load_wavefronts: int = 0
    load_ideal: int = 0
    store_accesses: int = 0
    store_wavefronts: int = 0
    store_ideal: int = 0
    sites: list = field(default_factory=list)  # dicts: file, line, kind, width, accesses, wavefronts, ideal
    # global memory, from the same simulation: per launch, warp-wide requests and the 32-byte
    # sectors and 128-byte lines they touch (``gsites``: the same per source line)
    global_launches: list = field(default_factory=list)  # dicts: requests, sectors, lines, ideal_sectors (load_/store_)
    gsites: list = field(default_factory=list)           # dicts: file, line, kind, width, requests, sectors, lines

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal

    @property
    def degree(self) -> float:
        return self.wavefronts / self.ideal if self.ideal else 1.0

    @property
    def load_degree(self) -> float:
        return self.load_wavefronts / self.load_ideal if self.load_ideal else 1.0

    @property
    def store_degree(self) -> float:
        return self.store_wavefronts / self.store_ideal if self.store_ideal else 1.0

    def coalescing(self, launch: int | None = None) -> dict:
        """Global-memory requests of the simulated blocks (one launch, or all): ``requests``,
        ``sectors`` and ``lines`` touched, ``sectors_per_request``, ``lines_per_request`` (1-4 for
        a coalesced warp, up to 32 when every thread has its own line) and ``efficiency``
        (ideal sectors / sectors: 1.0 when no byte of a fetched sector goes unused)."""
        ls = self.global_launches if launch is None else self.global_launches[launch:launch + 1]
        out = {}
        for pre in ("", "load_", "store_"):
            for k in ("requests", "sectors", "lines", "ideal_sectors"):
                out[pre + k] = sum(d.get(pre + k, 0) for d in ls)
        r = max(out["requests"], 1)
        out["sectors_per_request"] = out["sectors"] / r
        out["lines_per_request"] = out["lines"] / r
        out["load_lines_per_request"] = out["load_lines"] / max(out["load_requests"], 1)
        out["store_lines_per_request"] = out["store_lines"] / max(out["store_requests"], 1)
        out["efficiency"] = out["ideal_sectors"] / out["sectors"] if out["sectors"] else 1.0
        return out

    def table(self) -> str:
        """Per source line, the shared accesses (wavefronts per access: 1 is conflict free) and
        the global requests (sectors and 128-byte lines per request), as text."""
        out = [str(self)]
        if self.global_launches:
            co = self.coalescing()
            out.append(f"global memory: {co['requests']:g} warp requests, {co['sectors_per_request']:.2f} sectors "
                       f"and {co['lines_per_request']:.2f} lines per request (loads {co['load_lines_per_request']:.2f}, "
                       f"stores {co['store_lines_per_request']:.2f}), sector efficiency {co['efficiency']:.2f}")
        rows = [(s["file"], s["line"], "shared " + s["kind"], s["width"], s["accesses"],
                 f"{s['wavefronts'] / max(s['accesses'], 1):.2f} wavefronts/access") for s in self.sites]
        rows += [(s["file"], s["line"], "global " + s["kind"], s["width"], s["requests"],
                  f"{s['sectors'] / max(s['requests'], 1):.2f} sectors, {s['lines'] / max(s['requests'], 1):.2f} lines/request")
                 for s in self.gsites]
        for f, ln, kind, w, n, what in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
            out.append(f"  {f}:{ln:<5d} {kind:13s} {w:>2d} B x {n:>7g}  {what}")
        return "\n".join(out)

    def scaled(self, factor: float) -> "BankReport":
        """Every count multiplied by ``factor`` (sites too), e.g. blocks in the grid / blocks run."""
        d = dataclasses.asdict(self)
        for k in ("accesses", "wavefronts", "ideal", "load_accesses", "load_wavefronts", "load_ideal",
                  "store_accesses", "store_wavefronts", "store_ideal"):
            d[k] = d[k] * factor
        d["sites"] = [{**s, **{k: s[k] * factor for k in ("accesses", "wavefronts", "ideal")}} for s in self.sites]
        d["global_launches"] = [{k: v * factor for k, v in g.items()} for g in self.global_launches]
        d["gsites"] = [{**s, **{k: s[k] * factor for k in ("requests", "sectors", "lines")}} for s in self.gsites]
        return BankReport(**d)

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "conflicts": self.conflicts, "degree": self.degree}

    def __str__(self) -> str:
        return (f"shared memory of {self.variant} at {self.problem} ({self.blocks} block(s) simulated): "
                f"{self.accesses:g} warp accesses, {self.wavefronts:g} wavefronts, ideal {self.ideal:g}, "
                f"conflicts {self.conflicts:g} (degree {self.degree:.2f}; loads {self.load_degree:.2f}, "
                f"stores {self.store_degree:.2f})")
