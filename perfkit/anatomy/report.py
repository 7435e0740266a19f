"""The anatomy report of a rung (:func:`inspect`), its rendering, and :func:`diff` of two."""
from __future__ import annotations

import base64
import functools
import html
from dataclasses import dataclass, field

from .. import occupancy as occ
from ..kernels.base import Problem, UnsupportedProblem, Variant
from .build import compile_rung
from .sass import MIX_CLASSES, entry_name, find_loops, hot_loop_of, instruction_mix, parse_ptxas, parse_res_usage
from .target import AnatomyError, UnsupportedRung, check_cc


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
                f"{_mix_html({self.variant: self.mix}, 'instruction mix')}</div>")


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


# One colour per compared variant, as matplotlib's first two default colours (plot_mix's bars).
_MIX_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def _mix_html(mixes: dict[str, dict], title: str) -> str:
    """The instruction mix as bars drawn in HTML: the same numbers as ``plot_mix``, with each count
    written beside its bar, and no figure to render (a card holds one per rung, and a PNG of one
    took 0.6 s: a third of a ladder notebook's run)."""
    classes = [c for c in MIX_CLASSES if any(m.get(c) for m in mixes.values())]
    top = max((m.get(c, 0) for m in mixes.values() for c in classes), default=0) or 1
    rows = []
    for c in classes:
        bars = "".join(
            f"<div style='display:flex;align-items:center;height:9px;margin:1px 0'>"
            f"<div style='background:{_MIX_COLOURS[i % len(_MIX_COLOURS)]};height:8px;"
            f"width:{240 * m.get(c, 0) / top:.0f}px'></div>"
            f"<span style='font-size:8px;margin-left:3px'>{m.get(c, 0)}</span></div>"
            for i, m in enumerate(mixes.values()))
        rows.append(f"<tr><td style='text-align:right;font-size:8pt;padding:0 4px'>{html.escape(c)}</td>"
                    f"<td style='text-align:left;padding:0'>{bars}</td></tr>")
    legend = ("" if len(mixes) < 2 else " (" + ", ".join(
        f"<span style='color:{_MIX_COLOURS[i % len(_MIX_COLOURS)]}'>&#9632;</span> {html.escape(n)}"
        for i, n in enumerate(mixes)) + ")")
    return (f"<div style='margin-top:4px'><span style='font-size:9pt'>{html.escape(title)}: static SASS "
            f"instructions by class{legend}</span><table style='border-collapse:collapse'>"
            f"{''.join(rows)}</table></div>")


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
        names = (self.a.variant, self.b.variant)
        if names[0] == names[1]:  # one rung at two targets: name the bars by target
            names = tuple(f"{r.variant} ({r.arch or f'sm_{r.cc[0]}{r.cc[1]}'})" for r in (self.a, self.b))
        mix = _mix_html({names[0]: self.a.mix, names[1]: self.b.mix}, "instruction mix")
        return f"<div><b>anatomy diff</b><table>{head}{body}</table>{mix}</div>"


def diff(a: Report, b: Report) -> Diff:
    """What changed from report ``a`` to report ``b`` (two rungs, or one rung at two targets)."""
    def delta(x, y):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            d = y - x
            return f"{d:+.0%}" if isinstance(d, float) else f"{d:+d}"
        return "" if x == y else "changed"

    fields_ = [("target", lambda r: r.arch or f"sm_{r.cc[0]}{r.cc[1]}"), ("registers", lambda r: r.registers),
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



def _launch_entry(launch: dict) -> str:
    return launch["entry"] if "entry" in launch else entry_name(launch["ptx"])


def _entry_usage(launch: dict) -> dict:
    usage = parse_res_usage(launch["res_usage"])
    entry = _launch_entry(launch)
    if entry not in usage:
        raise AnatomyError(f"cuobjdump -res-usage does not list the entry {entry}; it has {list(usage)}")
    return usage[entry]


def reserved_in_cubin(cc, shared: int, ptxas: dict, cubin: bytes = b"") -> int:
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


def _mix_of(sass: str) -> dict:
    """:func:`instruction_mix` of a listing, each listing classified once per process (the model
    inspects the same build once per problem it estimates: validate, a ladder's cards); a copy,
    which the caller may change."""
    return dict(_mix_once(sass))


@functools.lru_cache(maxsize=256)
def _mix_once(sass: str) -> dict:
    return instruction_mix(sass)


def _report(variant: Variant, cc, launch: dict, summaries: list) -> Report:
    entry = _launch_entry(launch)
    ptxas = parse_ptxas(launch["ptxas_log"], entry)
    u = _entry_usage(launch)
    regs, static_smem, stack = u["REG"], u["SHARED"], u["STACK"]
    threads = 1
    for b in launch["block"]:
        threads *= b
    try:
        section = (b".nv.reservedSmem" if launch["reserved_section"] else b"") if "reserved_section" in launch \
            else base64.b64decode(launch["cubin_b64"])
        reserved = reserved_in_cubin(cc, static_smem, ptxas, section)
        user_smem = static_smem - reserved
        # a launch opts in to dynamic shared memory above 48 KiB (kernels._dynsmem); static
        # shared memory stays under 48 KiB
        o = occ.occupancy(cc, threads, regs, user_smem + launch["dynamic_shared_bytes"],
                          opt_in=launch["dynamic_shared_bytes"] > 0)
    except occ.OccupancyError as exc:
        raise AnatomyError(f"{variant.label} on sm_{cc[0]}{cc[1]}: {exc}") from None
    return Report(variant=variant.label, kernel_name=launch["kernel_name"], cc=tuple(cc), registers=regs,
                  static_shared_bytes=static_smem, dynamic_shared_bytes=launch["dynamic_shared_bytes"],
                  stack_bytes=stack, spill_store_bytes=ptxas.get("spill_store_bytes", 0),
                  spill_load_bytes=ptxas.get("spill_load_bytes", 0), local_bytes=u.get("LOCAL", 0),
                  block=tuple(launch["block"]), grid=tuple(launch["grid"]), occupancy=o,
                  mix=_mix_of(launch["sass"]), ptx=launch.get("ptx", ""),
                  cubin=base64.b64decode(launch["cubin_b64"]) if "cubin_b64" in launch else b"", sass=launch["sass"],
                  ptxas_log=launch["ptxas_log"], signature=launch["signature"], launches=summaries,
                  arch=launch.get("arch", ""), reserved_shared_bytes=reserved)


def inspect(variant: Variant, problem: Problem, cc=(9, 0), kernel: int = 0) -> Report:
    """Compile ``variant``'s launches for ``problem`` at compute capability ``cc`` and report on
    launch number ``kernel`` (``report.launches`` summarises all of them)."""
    cc = check_cc(cc)
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
    result = compile_rung(variant, problem, cc)
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
        rep.__dict__["_full"] = lambda: compile_rung(variant, problem, cc, store=False)["launches"][kernel]
    return rep

