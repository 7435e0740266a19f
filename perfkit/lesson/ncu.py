"""The Nsight Compute counters of a rung (``data/ncu/``) beside its card, with the change from the
rung before: the evidence for what a rung did, read from the tables, never computed.

A table has one row per kernel launch of each rung it profiled (one launch each, at the rung's
example problem); a rung of several launches is the sum of its rows (bytes, wavefronts, conflicts,
instructions, time) and the time-weighted mean of its percentages.  A rung's counters on a GPU
come from the newest table of that GPU that profiled it (a session that profiles some rungs
writes a table of those alone)."""
from __future__ import annotations

import functools
import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .formatting import fmt_rate, fmt_seconds
from .matching import matches

#: the counters a card shows: column, label, kind ("count", "bytes", "pct")
COUNTERS = (
    ("dram_bytes", "DRAM bytes", "bytes"),
    ("l2_bytes", "L2 bytes", "bytes"),
    ("shared_wavefronts", "shared wavefronts", "count"),
    ("shared_bank_conflicts", "shared bank conflicts", "count"),
    ("warp_instructions", "warp instructions", "count"),
    ("instructions_per_ffma", "instructions per FFMA", "ratio"),
    ("instructions_per_mma", "warp instructions per mma (16x8x16)", "ratio"),
    ("issue_active_pct", "issue active", "pct"),
    ("achieved_occupancy_pct", "achieved occupancy", "pct"),
    ("tensor_pipe_active_pct", "tensor pipe active", "pct"),
)
#: FLOPs of one mma.sync.m16n8k16 (2 x 16 x 8 x 16): a tensor-core rung's work counted in those
#: (a wgmma of 64xNx16 is N/2 of them), so its warp instructions per mma compare across rungs
MMA_FLOPS = 2 * 16 * 8 * 16
_SUMMED = ("time_us", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "shared_wavefronts",
           "shared_bank_conflicts", "warp_instructions", "ffma_thread_instructions")
_PCTS = ("issue_active_pct", "achieved_occupancy_pct", "tensor_pipe_active_pct", "dram_throughput_pct")
#: why warps did not issue (a table's ``stall_<reason>`` columns, from 2026-11-28 on): warps stalled
#: for each reason per cycle a scheduler issued; a card shows the rung's largest few, each by its
#: label here (a reason not listed by its name; ``selected`` is the issuing warp itself, no stall)
STALLS = {"long_scoreboard": "global/local memory (long scoreboard)", "short_scoreboard": "shared memory, MUFU (short scoreboard)",
          "wait": "fixed latency (wait)", "barrier": "barrier", "mio_throttle": "shared-memory queue (MIO throttle)",
          "lg_throttle": "global-memory queue (LG throttle)", "math_pipe_throttle": "math pipe busy",
          "not_selected": "eligible, not selected", "no_instruction": "no instruction fetched",
          "dispatch_stall": "dispatch", "branch_resolving": "branch resolving", "membar": "memory barrier",
          "sleeping": "sleeping", "tex_throttle": "texture queue", "drain": "drain", "misc": "misc",
          "imc_miss": "constant cache miss"}
STALLS_SHOWN = 3
#: counters whose change can explain a time (the percentages follow the time, they do not cause it)
_CAUSES = ("dram_bytes", "l2_bytes", "shared_wavefronts", "shared_bank_conflicts", "warp_instructions")


@dataclass
class Counters:
    """One rung's Nsight Compute counters on one GPU (summed over its launches)."""

    op: str
    variant: str
    problem: str
    gpu: str
    commit: str | None
    table: str
    kernels: int
    time_s: float
    values: dict = field(default_factory=dict)

    def get(self, key) -> float:
        v = self.values.get(key)
        return float(v) if v is not None and np.isfinite(v) else float("nan")


@functools.lru_cache(maxsize=16)
def _table(path: str) -> pd.DataFrame:
    df = pd.read_csv(path)
    df["name"] = df["rung"].astype(str).str.split(n=1).str[-1]
    return df


@functools.lru_cache(maxsize=8)
def _tables(gpu_key: str) -> tuple:
    from ..model import ncu_tables

    try:
        return tuple((str(p), c) for p, c in ncu_tables(gpu_key))
    except Exception:  # noqa: BLE001  (a GPU devices.yaml does not know: no tables)
        return ()


def counters(op: str, problem: str, variant: str, gpu: str | None) -> Counters | None:
    """The counters of ``variant`` at ``problem`` (a label) on ``gpu`` (a recorded GPU's name or a
    devices.yaml key) from the newest Nsight Compute table of that GPU that has it; None where
    none has."""
    every = all_counters(op, problem, variant, gpu)
    return every[0] if every else None


@functools.lru_cache(maxsize=4096)  # a page asks for a rung's counters for its card and the next's
def all_counters(op: str, problem: str, variant: str, gpu: str | None) -> tuple[Counters, ...]:
    """The counters of ``variant`` at ``problem`` on ``gpu`` from every Nsight Compute table of
    that GPU that has it, newest table first (a card takes the row of the code it explains)."""
    from .matching import spec_key

    if not gpu:
        return ()
    key = spec_key(gpu, "")
    if not key:
        return ()
    out = []
    for path, commit in _tables(key):
        df = _table(path)
        rows = df[(df["op"] == op) & (df["name"] == variant)]
        rows = rows[[matches(problem, p) for p in rows["problem"]]] if not rows.empty else rows
        if rows.empty:
            continue
        s = {c: float(rows[c].sum()) for c in _SUMMED if c in rows}
        w = rows["time_us"].to_numpy(float) if "time_us" in rows else np.ones(len(rows))
        for c in _PCTS + tuple(c for c in rows.columns if c.startswith("stall_")):  # what the table has
            if c in rows and rows[c].notna().any():
                s[c] = float(np.average(rows[c].to_numpy(float), weights=w if w.sum() > 0 else None))
        vals = {"dram_bytes": s.get("dram_read_bytes", np.nan) + s.get("dram_write_bytes", np.nan)}
        vals.update({c: s[c] for c in ("dram_read_bytes", "dram_write_bytes") if c in s})
        vals.update({c: s[c] for c in ("l2_bytes", "shared_wavefronts", "shared_bank_conflicts",
                                       "warp_instructions") if c in s})
        if s.get("ffma_thread_instructions", 0) > 0 and "warp_instructions" in s:
            # every thread instruction per FFMA a thread issues (32 threads a warp instruction)
            vals["instructions_per_ffma"] = 32 * s["warp_instructions"] / s["ffma_thread_instructions"]
        vals.update({c: s[c] for c in _PCTS if c in s})
        vals.update({c: s[c] for c in s if c.startswith("stall_")})
        gpu_name = str(rows["gpu"].iloc[0]) if "gpu" in rows and pd.notna(rows["gpu"].iloc[0]) else str(gpu)
        row_commit = str(rows["commit"].iloc[0]) if "commit" in rows and pd.notna(rows["commit"].iloc[0]) else commit
        out.append(Counters(op, variant, problem, gpu_name, row_commit, path.rsplit("/", 1)[-1], len(rows),
                            s.get("time_us", np.nan) * 1e-6, vals))
    return tuple(out)


def fmt_count(x: float, kind: str) -> str:
    if x is None or not np.isfinite(x):
        return "—"
    if kind == "pct":
        return f"{x:.1f}%"
    if kind == "ratio":
        return f"{x:.2f}"
    unit = "B" if kind == "bytes" else ""
    for div, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _per_mma(c: Counters | None, flops: float | None, tensor: bool | None) -> float:
    """Warp instructions per m16n8k16-sized mma of ``flops`` (the problem's work), for a rung whose
    SASS issues tensor-core instructions (``tensor``; unknown: its tensor pipe at 5% or more); NaN
    otherwise, or where the row or the work is missing."""
    if c is None or not flops or not np.isfinite(flops) or flops <= 0:
        return float("nan")
    if tensor is False or (tensor is None and not c.get("tensor_pipe_active_pct") >= 5):
        return float("nan")
    return c.get("warp_instructions") / (flops / MMA_FLOPS)


def counter_rows(cur: Counters, prev: Counters | None, *, tensor: bool | None = None,
                 flops: float | None = None) -> list[dict]:
    """One row per counter: this rung's value, the rung before's and the factor between them.
    ``tensor``: whether the rung's SASS issues tensor-core instructions (its anatomy), where known:
    a kernel that issues none shows no tensor-pipe row (the counter's few percent is its floor).
    ``flops``: the problem's work, for a tensor-core rung's warp instructions per mma (the rung
    before's beside it where that one used the tensor pipe too; both rungs run problems of the
    same shape, so of the same work)."""
    out = []
    for key, label, kind in COUNTERS:
        a = cur.get(key) if key != "instructions_per_mma" else _per_mma(cur, flops, tensor)
        if not np.isfinite(a):
            continue
        b = (prev.get(key) if key != "instructions_per_mma" else _per_mma(prev, flops, None)) \
            if prev is not None else float("nan")
        if key == "tensor_pipe_active_pct" and tensor is False:
            continue
        if key == "tensor_pipe_active_pct" and tensor is None and a < 5 and not (np.isfinite(b) and b >= 5):
            continue  # a SIMT kernel's few percent: the counter's floor, not tensor-core work
        change = ""
        if np.isfinite(b):
            if kind == "pct":
                change = f"{a - b:+.1f} points"
            elif b > 0:
                change = f"x{fmt_rate(a / b)}"  # no exponent: x4840, not x4.84e+03
        out.append({"counter": label, "this rung": fmt_count(a, kind),
                    "rung before": fmt_count(b, kind) if prev is not None else "",
                    "change": change})
    return out + stall_rows(cur, prev)


def stall_rows(cur: Counters, prev: Counters | None) -> list[dict]:
    """This rung's largest stall reasons (warps stalled per issue cycle), each beside the rung
    before's figure for the same reason; none where the table has no stall columns."""
    have = {k.removeprefix("stall_"): cur.get(k) for k in cur.values
            if k.startswith("stall_") and k != "stall_selected"}  # the issuing warp is no stall
    top = sorted((r for r, v in have.items() if np.isfinite(v) and v > 0), key=lambda r: -have[r])[:STALLS_SHOWN]
    out = []
    for r in top:
        a, b = have[r], prev.get(f"stall_{r}") if prev is not None else float("nan")
        out.append({"counter": f"stalled: {STALLS.get(r, r.replace('_', ' '))}, warps per issue", "this rung": fmt_count(a, "ratio"),
                    "rung before": fmt_count(b, "ratio") if prev is not None else "",
                    "change": f"x{fmt_rate(a / b)}" if np.isfinite(b) and b > 0 else ""})
    return out


def same_code(variant, a: str | None, b: str | None) -> bool:
    """Were ``variant``'s kernels the same code at commits ``a`` and ``b``?  Yes at one commit, or
    where neither changed since (both today's code); otherwise not known, so no.  The one rule by
    which a counter row may explain a record (cards, takeaways, where-they-stand)."""
    from ..history import source_changed_since

    if not a or not b:
        return False
    if a[:7] == b[:7]:
        return True
    return source_changed_since(variant, a) is False and source_changed_since(variant, b) is False


def row_of_code(op: str, problem: str, variant, commit: str | None, gpus) -> tuple[Counters | None, Counters | None]:
    """The Nsight Compute row that can explain a record of ``variant`` (a Variant) at ``commit``:
    the newest row of the same code (:func:`same_code`) on the first of ``gpus`` that has one (the
    record's own GPU first: another GPU's row of the same code is the same kernel's behaviour there,
    and the card names that GPU).  Where none fits: (None, the newest row on the first GPU, of
    other code, for the card to name as not explaining it)."""
    gpus = [g for g in dict.fromkeys(gpus) if g]
    for g in gpus:
        fit = next((c for c in all_counters(op, problem, variant.name, g) if same_code(variant, c.commit, commit)), None)
        if fit is not None:
            return fit, None
    first = all_counters(op, problem, variant.name, gpus[0]) if gpus else ()
    return None, (first[0] if first else None)


def library_row(op: str, problem: str, library: str, gpus) -> Counters | None:
    """The library's (the oracle's) newest row at ``problem`` on the first of ``gpus`` that has
    one: its kernel does not change with ours, so any commit's row is its behaviour."""
    for g in dict.fromkeys(gpus):
        rows = all_counters(op, problem, library, g) if g else ()
        if rows:
            return rows[0]
    return None


#: the rate at which each counter that can cost time is served, a named figure of ``data/rates.yaml``
#: (per SM per clock, multiplied out; DRAM: the datasheet's bytes per second): the weight by which
#: :func:`moved` compares changes of unlike counters (a bank conflict is one more shared wavefront)
_SERVED_BY = {"dram_bytes": ("dram_bw", None, "DRAM time"), "l2_bytes": ("l2_bytes_per_sm_per_clk", "per_clk", "L2 time"),
              "shared_wavefronts": ("smem_wavefronts_per_sm_per_clk", "per_clk", "shared-memory cycles"),
              "shared_bank_conflicts": ("smem_wavefronts_per_sm_per_clk", "per_clk", "shared-memory cycles"),
              "warp_instructions": ("issue_per_sm_per_clk", "per_clk", "issue cycles")}


def _peak_seconds(gpu: str) -> tuple[str, dict]:
    """(whose rates, counter -> seconds one unit of it takes at that GPU's peak rate); a GPU
    devices.yaml does not know is weighed at the H100's rates, and the text says so."""
    from ..model import rates
    from .matching import spec_key

    key = spec_key(gpu, "")
    who = f"{gpu}'s" if key else "the h100-sxm's (its own are not in devices.yaml)"
    r = rates(key or "h100-sxm")
    per_clk = r["sm_count"]["value"] * r["clock_hz"]["value"]
    return who, {c: 1.0 / (r[name]["value"] * (per_clk if kind else 1.0)) for c, (name, kind, _) in _SERVED_BY.items()}


def moved(cur: Counters, prev: Counters | None) -> str:
    """The counter whose change weighs most, and whether the time in the same tables followed it;
    "" where there is nothing to compare.

    Rule (*weighed at peak*): counts of unlike things (bytes at DRAM or L2, shared wavefronts, warp
    instructions) are compared as the time their change takes at the GPU's peak rate for that
    level (``data/rates.yaml``); a ratio alone would pick a counter that went from 384 to 1.86 M
    while costing 7 us of a 80 us kernel.  Among changes within 10% of the largest, the one that
    changed by the largest factor is named (bank conflicts, not the wavefronts they are part of).
    The time "followed" the counter where that change, served at peak, is half to 1.5 times the
    time saved (or lost); above, most of it overlapped other work; under a tenth, no count
    explains it.  Where the time did not move by 10%, the counter was not the limit.  Occupancy
    and issue-active moves of 5 points or more the way the time went are named as what the counts
    do not show."""
    if prev is None:
        return ""
    whose, per_unit = _peak_seconds(cur.gpu)
    cand = []
    for key in _CAUSES:
        a, b = cur.get(key), prev.get(key)
        if np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0:
            cand.append((abs(a - b) * per_unit[key], abs(np.log(a / b)), key, a / b, a, b))
    if not cand or not (np.isfinite(cur.time_s) and np.isfinite(prev.time_s) and cur.time_s > 0):
        return ""
    top = max(c[0] for c in cand)
    weight, _, key, f, a, b = max((c for c in cand if c[0] >= 0.9 * top), key=lambda c: c[1])
    label, kind = next((lab, k) for c, lab, k in COUNTERS if c == key)
    t = prev.time_s / cur.time_s  # > 1: this rung faster
    dt, verb = abs(prev.time_s - cur.time_s), ("saved" if t > 1 else "lost")
    head = (f"The counter that moved most, weighed as time at {whose} peak rates: {label} {fmt_count(b, kind)} -> "
            f"{fmt_count(a, kind)} (x{fmt_rate(f)}; the change is {fmt_seconds(weight)} of {_SERVED_BY[key][2]} at peak); "
            f"the profiled time x{t:.2f} ({fmt_seconds(prev.time_s)} -> {fmt_seconds(cur.time_s)}) on {cur.gpu}")
    rest = _how_busy(cur, prev, t)  # what the counts cannot show: how busy the SMs were kept
    unseen = f": {rest}" if rest else " (latency, stalls, the sectors each memory instruction touches)"
    if abs(np.log(t)) < np.log(1.1):  # the time did not move
        if weight < 0.1 * max(cur.time_s, prev.time_s):
            return (head + ": the time moved less than 10%, and no counter's change is worth a tenth of it at peak"
                    + (f" ({rest})" if rest else "") + ".")
        return head + f": the time hardly moved, so {label} was not the limit" + (f" ({rest})" if rest else "") + "."
    if (f < 1) != (t > 1):
        return head + f": the time went the other way, so something else dominated{unseen}."
    # how much of the time that changed the counter's change accounts for, served at peak
    share = (f"at peak that is {fmt_seconds(weight)} of the {fmt_seconds(dt)} {verb}" if weight <= dt else
             f"at peak that alone is {fmt_seconds(weight)}, more than the {fmt_seconds(dt)} {verb}")
    whom = "the rung before" if t > 1 else "this rung"
    if weight > 1.5 * dt:
        return (head + f": {share}, so most of it overlapped other work; {label} was only part of what bound {whom}.")
    if weight >= 0.5 * dt:
        return head + f": the time followed it ({share}); {label} was part of what bound {whom}."
    if weight >= 0.1 * dt:
        return head + f": {share}, so most of the change is what these counts do not show{unseen}."
    return (head + f": {share}, under a tenth, so none of these counts explains it; the time went to what they do "
            f"not count{unseen}.")


def _how_busy(cur: Counters, prev: Counters, t: float) -> str:
    """The percentages that moved by 5 points or more the way the time did (up where the rung is
    faster, ``t`` > 1): how busy the SMs were kept, which the counts of bytes and instructions do
    not show (an occupancy that fell while the time fell explains nothing)."""
    out = []
    for key, label in (("achieved_occupancy_pct", "achieved occupancy"), ("issue_active_pct", "issue active")):
        a, b = cur.get(key), prev.get(key)
        if np.isfinite(a) and np.isfinite(b) and abs(a - b) >= 5 and (a - b) * (t - 1) > 0:
            out.append(f"{label} {b:.0f}% -> {a:.0f}%")
    return ", ".join(out)


def elsewhere(cur: Counters, gpu: str | None, record_there: str | None) -> str:
    """Where a card's counters come from another GPU than its record's: says so, and the same
    code's record on that GPU (so the profiled time is read beside a time of its own GPU)."""
    if cur is None or not gpu or cur.gpu == gpu:
        return ""
    return (f"{gpu} has no Nsight Compute row of this code, so these are {cur.gpu}'s rows of the same code"
            + (f" (its record there: {record_there})" if record_there else ""))


def counters_html(cur: Counters | None, prev: Counters | None, *, prev_label: str | None = None,
                  gpu: str | None = None, changed_since: bool | None = None, other: Counters | None = None,
                  record_commit: str | None = None, note: str = "", searched: tuple = (),
                  tensor: bool | None = None, flops: float | None = None) -> str:
    """The counters block of a card (HTML); ``other``: a row of other code than the record's,
    named where ``cur`` is None; ``note``: where the rows come from another GPU than ``gpu`` (the
    card's), which and why (:func:`elsewhere`)."""
    if cur is None and other is not None:
        return (f"<p><i>No Nsight Compute row of the code this record measured on "
                f"{html.escape(str(gpu or 'the shown GPU'))}: the row there ({html.escape(other.table)}, commit "
                f"{html.escape((other.commit or '?')[:7])}) is of other code, so it cannot explain this time."
                "</i></p>")
    if cur is None:
        where = " or ".join(searched) if searched else str(gpu or "the shown GPU")
        return (f"<p><i>No Nsight Compute row of this rung at this problem on {html.escape(where)} "
                "in data/ncu/.</i></p>")
    rows = counter_rows(cur, prev, tensor=tensor, flops=flops)
    same = (f", the same code as the record's {record_commit[:7]}"
            if record_commit and cur.commit and record_commit[:7] != cur.commit[:7] and not changed_since else "")
    head = (f"Nsight Compute on {cur.gpu} ({cur.table}, commit {(cur.commit or '?')[:7]}{same}"
            + (", kernel changed since" if changed_since else "") + f"; {cur.kernels} launch"
            + ("es" if cur.kernels != 1 else "") + f", {fmt_seconds(cur.time_s)} profiled)")
    if prev is not None and prev_label:
        head += f", against {prev_label}"
        if prev.table != cur.table:  # a row of the same code from another run: named, as this rung's is
            head += f" (its row: {prev.table}, commit {(prev.commit or '?')[:7]})"
    if note:
        head += f"; {note}"
    body = pd.DataFrame(rows).to_html(index=False, border=0) if rows else ""
    why = moved(cur, prev)
    return (f"<p><b>{html.escape(head)}</b></p>{body}" + (f"<p>{html.escape(why)}</p>" if why else ""))


def counters_text(cur: Counters | None, prev: Counters | None, *, tensor: bool | None = None,
                  flops: float | None = None) -> str:
    if cur is None:
        return "no Nsight Compute row"
    rows = counter_rows(cur, prev, tensor=tensor, flops=flops)
    listed = "; ".join(f"{r['counter']} {r['this rung']}" + (f" ({r['change']})" if r["change"] else "")
                       for r in rows)
    why = moved(cur, prev) if prev is not None else ""
    # the list ends as a sentence before the next one begins (it read "...99.9% (+0.7 points) The counter...")
    return listed + (". " + why if why and listed else why)


def kernels(op: str, problem: str, variant: str, gpu: str | None) -> list[tuple[str, float]]:
    """(kernel name, profiled seconds) of each launch of ``variant`` at ``problem`` in the newest
    Nsight Compute table of ``gpu`` that has it (a library's rows name the algorithm it chose:
    cuDNN's ``fft2d_r2c`` is an FFT convolution); [] where none has."""
    from .matching import spec_key

    key = spec_key(gpu, "") if gpu else ""
    for path, _ in _tables(key) if key else ():
        df = _table(path)
        rows = df[(df["op"] == op) & (df["name"] == variant)]
        rows = rows[[matches(problem, p) for p in rows["problem"]]] if not rows.empty else rows
        if not rows.empty:
            return [(str(k).split("[", 1)[0].split("(", 1)[0], float(t) * 1e-6)
                    for k, t in zip(rows["kernel"], rows["time_us"])]
    return []
