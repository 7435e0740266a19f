"""Where a ladder stands: its best rung against the library (the oracle, rung 0) per problem, dtype
and GPU, as a table, a figure and a paragraph written from the same numbers, so that the text
stays true when the records change.  Each comparison is one GPU and one problem: the best rung's
record (the newest of each rung, as :func:`records` keeps) against the oracle's on that GPU;
nothing is averaged across commits or GPUs.  Which rung is best is one rule, :func:`best_by_code`
(notebook 04's :mod:`.bandwidth` reads it too): the fastest of today's code, older code only where
no rung of today's code was recorded, and an older record that ran faster named beside it
(:func:`older_ran_faster`), never in its place."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .cards import changed_since_recorded
from .formatting import fmt_seconds
from .ncu import fmt_count, library_row, row_of_code
from .matching import label_params, ladder_for, records

_DTYPE_KEYS = ("dtype", "layout")


def _group_of(problem: str) -> str:
    """The dtype (and layout, where the problem has one) of a problem label: the row's group."""
    parts = label_params(problem)
    return " ".join(parts[k] for k in _DTYPE_KEYS if k in parts)


def best_by_code(ours: pd.DataFrame, older: str = "changed") -> tuple[pd.Series | None, pd.Series | None]:
    """The best rung of one GPU and one problem among ``ours`` (one record per rung; ``older`` the
    boolean column, True where the rung's kernel changed since its record): the fastest record of
    today's code, the fastest of older code only where no rung of today's code was recorded (what
    the ladder can do now, as a card shows today's code first); and the fastest record of older
    code where it ran faster than that (to be named beside it, never in its place), else None."""
    if ours is None or ours.empty:
        return None, None
    old = ours[older].fillna(False).astype(bool)
    now, was = ours[~old], ours[old]
    among = now if len(now) else was
    pick = among.loc[among["median_s"].idxmin()]
    faster = was.loc[was["median_s"].idxmin()] if len(now) and len(was) else None
    if faster is not None and not float(faster["median_s"]) < float(pick["median_s"]):
        faster = None
    return pick, faster


def older_ran_faster(where: str, rung: str, ratio: float, commit: str, of: str = "",
                     median_s: float = float("nan")) -> str:
    """The clause that names a record of older code that ran faster than today's best: ``ratio``
    the reference's time over its own, both of its run (``of``: the reference, where the sentence
    has not said it; notebook 04's "torch"); NaN where the reference was not timed in that run,
    then its median (``median_s``) and no ratio: no ratio across runs."""
    whose = f" {of}'s speed" if of else ""
    speed = (f"x{ratio:.2f}{whose}" if np.isfinite(ratio) else
             f"{fmt_seconds(median_s)} (no {of or 'reference'} timed in its run)")
    return (f"at {where} a record of older code ran faster: {rung} at {speed} (commit {str(commit).rstrip('*')}, "
            "its kernel changed since)")


def standing(op: str, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (GPU, problem) where the oracle and at least one rung are recorded: the best
    rung (fastest record), its median and commit, the oracle's median, and ``of library`` (the
    oracle's time over the best rung's: above 1, the ladder beats the library)."""
    df = records(op) if table is None else table
    if df is None or df.empty:
        return pd.DataFrame()
    df = df[df["op"] == op] if "op" in df else df
    if "simulated" in df:
        df = df[~df["simulated"].fillna(False).astype(bool)]
    df = df.assign(changed=changed_since_recorded(df))
    rows = []
    for (gpu, problem), g in df.groupby(["gpu", "problem"], sort=True):
        orc = g[g["rung"] == 0]
        ours = g[g["rung"] > 0]
        if orc.empty or ours.empty:
            continue
        o = orc.sort_values("utc").iloc[-1]
        # the fastest rung of today's code (a kernel unchanged since its record), which may be
        # slower than an older kernel's record: what the ladder can do now (best_by_code, the
        # rule notebook 04 reads too); b the fastest record, of either
        pick, faster = best_by_code(ours)
        b = faster if faster is not None else pick
        t = pick if not bool(pick["changed"]) else None
        rows.append({"op": op, "gpu": gpu, "group": _group_of(problem), "problem": problem,
                     "best rung": b["label"], "best median_s": float(b["median_s"]),
                     "commit": str(b.get("commit") or "")[:7] + ("*" if bool(b["changed"]) else ""),
                     "library median_s": float(o["median_s"]), "of library": float(o["median_s"] / b["median_s"]),
                     "variant": b["variant"],
                     "today rung": t["label"] if t is not None else None,
                     "today variant": t["variant"] if t is not None else None,
                     "today commit": str(t.get("commit") or "")[:7] if t is not None else None,
                     "today of library": float(o["median_s"] / t["median_s"]) if t is not None else float("nan")})
    return pd.DataFrame(rows)


def standing_table(st: pd.DataFrame, library: str = "library"):
    """The standing table as a reader reads it (times in units, the fraction as x)."""
    if st.empty:
        return st
    t = st.drop(columns=[c for c in ("variant", "today variant", "today commit", "today rung", "today of library")
                         if c in st]).rename(columns={"of library": f"x {library}"})
    t["best median_s"] = t["best median_s"].map(fmt_seconds)
    t["library median_s"] = t["library median_s"].map(fmt_seconds)
    if "today rung" in st and (st["today rung"] != st["best rung"]).any():
        # where the fastest record is of a kernel changed since, what today's code reached beside it
        t[f"today's code: best rung, x {library}"] = [
            "same" if r["today rung"] == r["best rung"] else
            "none recorded" if r["today rung"] is None else f"{r['today rung']}, x{r['today of library']:.2f}"
            for _, r in st.iterrows()]
    t = t.rename(columns={"best median_s": "best rung's median", "library median_s": f"{library}'s median"})
    return t.style.format({f"x {library}": "{:.2f}"}).hide(axis="index")


def standing_figure(st: pd.DataFrame, library: str = "library", title: str | None = None, ax=None):
    """One bar per comparison (GPU, problem), grouped by dtype: the best rung's speed as a fraction
    of the library's, with the parity line.  Bars, never lines: no mark joins two records."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.32 * max(len(st), 3) + 1.2))
    if st.empty:
        ax.text(0.5, 0.5, "no comparison recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return ax
    st = st.sort_values(["op", "group", "gpu", "problem"]).reset_index(drop=True)
    gpus = sorted(st["gpu"].unique())
    colours = {g: f"C{i}" for i, g in enumerate(gpus)}
    several = st["op"].nunique() > 1
    labels = [(f"{r.op} " if several else "") + f"{r.group} · "
              + " ".join(p for p in r.problem.split() if not p.startswith(("dtype=", "layout=", "eps=", "momentum=", "axis=")))
              for r in st.itertuples()]
    old = st["commit"].astype(str).str.endswith("*")
    bars = ax.barh(range(len(st)), st["of library"], color=[colours[g] for g in st["gpu"]])
    for bar, o in zip(bars, old):
        if o:  # a record of a kernel that changed since: hatched, and the legend says so
            bar.set_hatch("//")
            bar.set_alpha(0.5)
    ax.set_yticks(range(len(st)), labels, fontsize=7)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel(f"best rung's speed / {library}'s (1: parity; right of it the ladder wins)")
    from matplotlib.patches import Patch

    handles = [Patch(color=colours[g], label=g) for g in gpus]
    if old.any():
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//", label="older code (kernel changed since)"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.invert_yaxis()
    ax.set_title(title or "where the ladder stands", fontsize=9)
    return ax


def _goal_of(goals: dict | None, group: str) -> float | None:
    """The goal of a group ("float16 NHWC"): keyed by the group itself or by its dtype."""
    if not goals:
        return None
    g = goals.get(group, goals.get(group.split()[0] if group else "", None))
    return float(g) if g is not None else None


def takeaway(st: pd.DataFrame, library: str = "the library", goals: dict | None = None) -> str:
    """A paragraph from the standing table: per dtype and GPU, the range of the best rung's fraction
    of the library, what is won (at or above parity) and what is not, and for the widest gap the
    best rung's Nsight Compute counters on that GPU where a table has them.  ``goals``: the
    fraction of the library each dtype (or "dtype layout" group) aims at; the paragraph says
    whether each GPU's records meet it."""
    if st.empty:
        return f"No problem has both a rung and {library} recorded on one GPU: nothing to say yet."
    out = []
    several = st["op"].nunique() > 1
    for (op, group, gpu), g in st.groupby(["op", "group", "gpu"], sort=True):
        # today's code speaks where it was recorded: per problem its fastest rung of today's code
        # (not only the problems whose fastest record is of today's code); older code only where
        # no rung of today's code was recorded on this GPU at all
        full = g
        if "today of library" in g:
            today = g[np.isfinite(g["today of library"].astype(float))]
            today = today.assign(**{"of library": today["today of library"], "best rung": today["today rung"],
                                    "variant": today["today variant"], "commit": today["today commit"]})
        else:
            today = g[~g["commit"].astype(str).str.endswith("*")]
        older = len(g) - len(today)
        g = today if len(today) else g
        lo, hi = g["of library"].min(), g["of library"].max()
        won = g[g["of library"] >= 1.0]
        rng = f"x{lo:.2f}" if np.isclose(lo, hi, rtol=0.005) else f"x{lo:.2f} to x{hi:.2f}"
        s = ((f"{op} " if several else "") + f"{group or 'all'} on {gpu}: the best rung runs at {rng} {library}'s speed over {len(g)} "
             f"problem{'s' if len(g) != 1 else ''}")
        if len(won) == len(g):
            s += " (won everywhere)"
        elif len(won):
            s += f" (won at {len(won)}: {', '.join(sorted(set(won['best rung'])))})"
        else:
            worst = g.loc[g["of library"].idxmin()]
            s += f" (not won; widest gap at {worst['problem'].split(' dtype')[0]}, {worst['best rung']})"
            # only a row of the record's code (ncu.same_code): another kernel took another time
            v = next((x for x in ladder_for(worst["op"]) if x.name == worst["variant"]), None)
            c = (row_of_code(worst["op"], worst["problem"], v, str(worst["commit"]).rstrip("*"),
                             [gpu, *sorted(set(st["gpu"]))])[0] if v is not None else None)
            if c is not None:
                # beside the library's own row on the same GPU (its kernel does not change with
                # ours): the contrast is the explanation
                lib = next((x for x in ladder_for(worst["op"]) if x.oracle), None)
                # the library's row on the rung row's GPU, else on another recorded GPU (named)
                o = (library_row(worst["op"], worst["problem"], lib.name, [c.gpu, gpu, *sorted(set(st["gpu"]))])
                     if lib is not None else None)
                # the library's numbers beside the rung's are of the rung row's GPU where it has a row of
                # the library (library_row tries that GPU first); else another GPU's, said once, after them
                who = library
                bits = []
                for k, lab in (("warp_instructions", "warp instructions"), ("issue_active_pct", "issue active"),
                               ("tensor_pipe_active_pct", "tensor pipe active"),
                               ("achieved_occupancy_pct", "achieved occupancy")):
                    mine, theirs = c.get(k), o.get(k) if o is not None else float("nan")
                    if not np.isfinite(mine) or (k == "tensor_pipe_active_pct" and max(mine, theirs if np.isfinite(theirs) else 0) < 5):
                        continue
                    show = (lambda x: fmt_count(x, "count")) if k == "warp_instructions" else (lambda x: f"{x:.0f}%")
                    bits.append(f"{lab} {show(mine)}" + (f" ({who}: {show(theirs)})" if np.isfinite(theirs) else ""))
                if bits:
                    there = "" if c.gpu == gpu else f", from {c.gpu}: {gpu} has no row of this code"
                    s += f"; its Nsight Compute row (commit {(c.commit or '?')[:7]}{there}): {', '.join(bits)}"
                    if o is not None and o.gpu != c.gpu and any(f"({who}: " in x for x in bits):
                        s += (f" ({library}'s numbers are {o.gpu}'s: {c.gpu} has no Nsight Compute row of "
                              f"{library} at this problem)")
        goal = _goal_of(goals, group)
        if goal is not None:
            short = g[g["of library"] < goal]
            s += (f"; the goal, x{goal:.2f} {library}'s speed, is met" if short.empty else
                  f"; the goal, x{goal:.2f} {library}'s speed, is missed"
                  + (f" at {len(short)} of {len(g)} problems" if len(g) > 1 else "")
                  + f" (best x{g['of library'].max():.2f})")
        if older and len(today):
            s += (f"; {older} problem{'s' if older != 1 else ''} with no record of today's code left out "
                  "(in the table, marked *)")
        if len(today) and "today of library" in full:
            # an older kernel's record faster than today's best at the same problem: said, with its goal
            ahead = full[full["commit"].astype(str).str.endswith("*") & np.isfinite(full["today of library"].astype(float))
                         & (full["of library"] > full["today of library"])]
            for _, r in ahead.iterrows():
                s += "; " + older_ran_faster(r["problem"].split(" dtype")[0], r["best rung"], r["of library"], r["commit"])
                if goal is not None:
                    s += f", {'over' if r['of library'] >= goal else 'under'} the goal"
        out.append(s + ".")
    marked = st["commit"].astype(str).str.endswith("*").any()
    return " ".join(out) + (" (* a record of a kernel that changed since: not today's code.)" if marked else "")
