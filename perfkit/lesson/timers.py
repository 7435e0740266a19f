"""What the timer hides (notebook 06's what-if): a rung on every GPU as the model sees it under two
timers.  A cold-L2 timing with only the flush queued ahead of the kernel leaves part of the host's
launch through Numba inside the timed window (the model's ``launch`` leg); today's
``timing.measure`` queues a spin kernel longer than the host's enqueue ahead of every sample, so
that part is hidden and only the launch latency stays.  Both estimates are the model's.

The recorded timer checks (``data/timer/``, ``tools/record_gpu.py --parts timer``): :func:`timer_runs`,
:func:`timer_check`, and what notebook 01 shows of them in the simulator (:func:`timer_vs_do_bench`,
:func:`hot_cold_lines`, :func:`empty_kernel_lines`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .formatting import fmt_seconds


def what_if_timers(variant, problem, gpus=None, *, banks: bool = True) -> pd.DataFrame:
    """One row per GPU: the estimate with the cold-L2 flush only ahead (``flush_us``, its bound and
    launch leg) and behind today's spin as well (``spin_us``, ...: the model's default, the spin
    that :func:`perfkit.timing.spin_length` gives for the sequence's modelled host cost), and
    ``hidden_us``, the launch time the spin hides; ``host_us``: that host cost."""
    from .. import model, specs

    rows = []
    for g in gpus or specs.names():
        try:
            spun = model.estimate(variant, problem, g, banks=banks)  # the default: today's timer
            host = sum(float(l.get("host_s") or 0.0) for l in spun.launches)
            flush = model.flush_seconds(model.rates(g))
            # the flush-only timer; where the L2 size is unknown, the flush taken as long as the
            # first launch's host cost
            first = float(spun.launches[0].get("host_s") or 0.0) if spun.launches else 0.0
            cold = model.estimate(variant, problem, g, banks=banks, ahead_s=first if flush is None else flush)
        except Exception as exc:  # noqa: BLE001  (a target the compiler cannot build)
            rows.append({"gpu": g, "error": f"{exc.__class__.__name__}: {exc}"[:120]})
            continue
        rows.append({"gpu": g, "flush_us": cold.seconds * 1e6, "flush_bound": cold.bound,
                     "flush_launch_us": cold.legs.get("launch", 0.0) * 1e6,
                     "spin_us": spun.seconds * 1e6, "spin_bound": spun.bound,
                     "spin_launch_us": spun.legs.get("launch", 0.0) * 1e6,
                     "hidden_us": (cold.legs.get("launch", 0.0) - spun.legs.get("launch", 0.0)) * 1e6,
                     "host_us": host * 1e6})
    return pd.DataFrame(rows)


def timers_paragraph(t: pd.DataFrame, label: str) -> str:
    """What the table says, in words, from its numbers: where the launch leg binds under the
    flush-only timer, how much the spin hides, and the fastest GPU under each."""
    t = t.dropna(subset=["flush_us", "spin_us"]) if "flush_us" in t else t.iloc[0:0]
    if t.empty:
        return f"No GPU could be estimated for {label}."
    by_launch = t.loc[t["flush_bound"] == "launch", "gpu"].tolist()
    fast_flush = t.sort_values("flush_us")["gpu"].iloc[0]
    fast_spin = t.sort_values("spin_us")["gpu"].iloc[0]
    parts = []
    if by_launch:
        parts.append(f"With only the cold-L2 flush queued ahead, the launch leg binds {label} on {', '.join(by_launch)}: "
                     f"the host's launch through Numba (modelled at {fmt_seconds(t['host_us'].max() / 1e6)}, data/rates.yaml) "
                     "outlasts the flush, and a GPU that flushes its L2 sooner shows more of it, so the ranking is "
                     "partly the timer's, not the GPU's.")
    else:
        parts.append(f"With only the cold-L2 flush queued ahead, no GPU is bound by the launch leg for {label}.")
    hid = t.set_index("gpu")["hidden_us"]
    hidden = hid[hid > 0].sort_values(ascending=False)
    left = sorted({fmt_seconds(x / 1e6) for x in t["spin_launch_us"]})
    parts.append(("Behind today's spin the timer hides "
                  + ", ".join(f"{fmt_seconds(x / 1e6)} on {g}" for g, x in hidden.items())
                  + " of launch time" if len(hidden) else "Behind today's spin no GPU's estimate changes")
                 + f"; the launch leg left is {' to '.join(left[:1] + left[-1:]) if len(left) > 1 else left[0]} "
                 "(the launch latency), and " + _bounds_then(t) + ".")
    parts.append(f"Fastest in the model: {fast_flush} under the flush-only timer, {fast_spin} behind the spin"
                 + (" (the same GPU)." if fast_flush == fast_spin else "."))
    return " ".join(parts)


def _bounds_then(t: pd.DataFrame) -> str:
    """Behind the spin, each GPU's bound, said as a change only where it changed ("the bounds
    become" where none moved read as if they had)."""
    moved = t["flush_bound"] != t["spin_bound"]
    same = ", ".join(f"{g} {b}" for g, b in zip(t.loc[~moved, "gpu"], t.loc[~moved, "spin_bound"]))
    if not moved.any():
        return f"no GPU's bound changes ({same})"
    changed = ", ".join(f"{g} {b} (was {a})" for g, a, b in
                        zip(t.loc[moved, "gpu"], t.loc[moved, "flush_bound"], t.loc[moved, "spin_bound"]))
    return f"the bound changes on {changed}" + (f" and stays on {same}" if same else "")


def timer_runs() -> pd.DataFrame:
    """Every timer check in ``data/timer/`` (``tools/record_gpu.py --parts timer``), oldest first:
    ``name`` (its file's stem, for :func:`timer_check`), ``gpu``, ``date``, ``commit`` (7 digits),
    ``spin`` (taken behind the spin kernel: its table has a ``spin_s`` column) and ``when``, the run
    in words ("NVIDIA H200 (2026-11-26, commit ed6ffd5), with the spin kernel")."""
    import json

    from .. import paths

    rows = []
    for meta in sorted((paths.DATA / "timer").glob("*.json")):
        try:
            d = json.loads(meta.read_text())
            table = meta.parent / d.get("table", meta.stem + ".csv")
            with open(table) as f:
                spin = "spin_s" in f.readline().strip().split(",")
        except (OSError, ValueError):
            continue  # a table this copy lacks, or an unreadable description: not a run here
        commit = str(d.get("commit") or "")[:7]
        rows.append({"name": table.stem, "gpu": str(d.get("gpu") or meta.stem), "date": str(d.get("date") or ""),
                     "commit": commit, "spin": spin,
                     "when": f"{d.get('gpu') or meta.stem} ({d.get('date') or '?'}"
                             + (f", commit {commit}" if commit else "") + ")"
                             + (", with the spin kernel" if spin else ", before the spin kernel")})
    cols = ["name", "gpu", "date", "commit", "spin", "when"]
    return pd.DataFrame(rows, columns=cols).sort_values(["date", "name"], kind="stable").reset_index(drop=True)


def newest_timer_runs(spin: bool = True) -> pd.DataFrame:
    """The newest timer check of each GPU (behind the spin kernel, with ``spin``), GPUs by name."""
    t = timer_runs()
    t = t[t["spin"].astype(bool)] if spin else t  # (astype: an empty column is of objects, not a mask)
    return t.groupby("gpu", sort=True).tail(1).sort_values("gpu").reset_index(drop=True)


def timer_check(name: str, what: str) -> pd.DataFrame | None:
    """The timer check recorded as ``data/timer/<name>.csv`` (``tools/record_gpu.py --parts timer``),
    or None, having printed that it is not here (a copy of data/ without it): ``what`` names the
    run in that sentence.  ``variant`` is the rung's name alone: the first run (2026-11-23) wrote
    that run's numbers before it ("09 warptile", where today 09 is another rung), the later runs
    the bare name; ``label_then`` keeps what the run wrote."""
    t = _read_check(name, what)
    if isinstance(t, str):
        print(t)
        return None
    return t


def _read_check(name: str, what: str) -> pd.DataFrame | str:
    """:func:`timer_check`'s table, or the sentence saying it is not here (returned, not printed)."""
    from .. import paths

    path = paths.DATA / "timer" / f"{name}.csv"
    if not path.exists():
        return f"No timer check of {what} here (data/timer/{name}.csv is not in this copy)."
    t = pd.read_csv(path)
    if "variant" in t:
        t["label_then"] = t["variant"]
        t["variant"] = t["variant"].astype(str).str.replace(r"^\d+\s+", "", regex=True)
    return t


# --- what notebook 01 shows of the timer checks, in the simulator -------------------------------
def timer_vs_do_bench() -> list[tuple[str, object]]:
    """Notebook 01, section 1: the same prepared rungs timed by events around the launch
    (``measure``) and by ``triton.testing.do_bench``, in the first timer's run (before the spin
    kernel) and then each GPU's newest run (behind it).  One ``(sentence, table)`` per run: the
    sentence gives the range of measure / do_bench, the table (folded: its times answer
    predictions further on) each rung's two times in us and their ratio; ``table`` is None where
    there is only a sentence (no timer check here, or this run's table missing)."""
    from .prompts import fold

    runs = timer_runs()
    shown = pd.concat([runs[~runs["spin"].astype(bool)].head(1), newest_timer_runs()], ignore_index=True)
    if shown.empty:
        return [("No timer check in data/timer/ here (tools/record_gpu.py --parts timer records one).", None)]
    out: list[tuple[str, object]] = []
    for name, when in zip(shown["name"], shown["when"]):
        t = _read_check(name, when)
        if isinstance(t, str):
            out.append((t, None))
            continue
        t = t[t["op"] != "timer"].copy()  # the same prepared rungs under both timers (the timer's own demos: apart)
        t["measure / do_bench"] = t["ratio"]
        t["measure us"], t["do_bench us"] = t["measure_s"] * 1e6, t["do_bench_s"] * 1e6
        sentence = (f"Recorded on {when}: events around the launch against triton's do_bench, "
                    f"measure / do_bench from {t.ratio.min():.2f} to {t.ratio.max():.2f} over {len(t)} rungs")
        table = fold(t[["op", "variant", "measure us", "do_bench us", "measure / do_bench"]].round(2),
                     summary=f"the {len(t)} rungs' times on {when.split(' (')[0]} (open after the predictions below)")
        out.append((sentence, table))
    return out


def _timer_demo(variant: str) -> list[tuple[str, pd.DataFrame | str]]:
    """(when, rows of the timer's own demo ``variant`` or the sentence that its check is not here)
    of each GPU's newest timer check behind the spin kernel."""
    out = []
    for name, when in zip(*newest_timer_runs()[["name", "when"]].T.values):
        t = _read_check(name, when)
        out.append((when, t if isinstance(t, str) else t[(t["op"] == "timer") & (t["variant"] == variant)]))
    return out


def hot_cold_lines() -> list[str]:
    """Notebook 01, section 3: one line per GPU (its newest timer check) with the same L2-sized
    16-byte copy timed with a hot and a cold L2 and hot / cold, or why there is none."""
    lines = []
    for when, d in _timer_demo("copy16"):
        if isinstance(d, str):
            lines.append(d)
            continue
        hc = d.set_index("l2")["measure_s"]
        if not {"hot", "cold"} <= set(hc.index):
            lines.append(f"  {when}: its timer check holds no hot/cold pair of the copy")
            continue
        lines.append(f"  {when}: the same L2-sized copy, hot {hc['hot'] * 1e6:.2f} us, cold {hc['cold'] * 1e6:.2f} us "
                     f"(hot / cold = {hc['hot'] / hc['cold']:.2f})")
    return lines


def empty_kernel_lines() -> list[str]:
    """Notebook 01, section 4: one line per GPU (its newest timer check) with the empty kernel's
    time by events behind the spin (the GPU's part of a launch) and by do_bench, or why there is none."""
    lines = []
    for when, d in _timer_demo("empty"):
        if isinstance(d, str):
            lines.append(d)
        elif d.empty:
            lines.append(f"On {when}: its timer check holds no empty kernel.")
        else:
            e = d.iloc[0]
            lines.append(f"On {when}: {e.measure_s * 1e6:.2f} us by events "
                         f"(do_bench: {e.do_bench_s * 1e6:.2f} us), the GPU's part of a launch.")
    return lines
