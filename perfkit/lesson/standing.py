"""Where a ladder stands: its best rung against the library (the oracle, rung 0) per problem, dtype
and GPU, as a table, a figure and a paragraph written from the same numbers, so that the text
stays true when the records change.

Records are chosen by code, not recency (:func:`chosen_records`): per (GPU, problem, rung) the
newest record of today's code, older code only where the rung has no record of today's code, and then marked ``*``
(:func:`choose_record`, as the cards choose).  Which rung is best is one rule, :func:`best_by_code`
(notebook 04's :mod:`.bandwidth` reads it too): the fastest of today's code, older code only where
no rung of today's code was recorded, and an older record that ran faster named beside it
(:func:`older_ran_faster`, :func:`older_faster_cell`), never in its place.  Each comparison is one
GPU and one recording run (a GPU and a commit): a rung's record against the library timed in the
same run (:func:`of_run`); where that run timed no library, the library's own newest median is
shown and nothing is divided.  Nothing is averaged across commits or GPUs."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .cards import changed_since_recorded, choose_record
from .formatting import fmt_seconds
from .ncu import fmt_count, library_row, row_of_code
from .matching import label_params, ladder_for, records

_DTYPE_KEYS = ("dtype", "layout")


def chosen_records(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """One record per (GPU, problem, variant) of ``op`` among ``df`` (every record, as
    :func:`records` with ``latest=False`` gives them), chosen by code (:func:`choose_record`: the
    newest of today's code, else the newest), with ``older`` True where the rung's kernel changed
    since the chosen record (:func:`changed_since_recorded`).  The rows keep ``df``'s order (a
    table, pivot or figure drawn from them is laid out as from ``df``)."""
    if df is None or df.empty:
        return pd.DataFrame() if df is None else df.assign(older=pd.Series(dtype=bool))
    try:
        by_name = {v.name: v for v in ladder_for(op)}
    except LookupError:
        by_name = {}
    keep = []
    pos = df.assign(_pos=np.arange(len(df)))
    for (_, _, name), rows in pos.sort_values("utc", kind="stable").groupby(["gpu", "problem", "variant"], sort=False):
        v = by_name.get(name)
        keep.append(choose_record(rows, v) if v is not None else rows.iloc[-1])
    out = pd.DataFrame(keep).sort_values("_pos", kind="stable").drop(columns="_pos").reset_index(drop=True)
    return out.assign(older=changed_since_recorded(out).to_numpy())


def ladder_rungs(chosen: pd.DataFrame) -> pd.DataFrame:
    """The rungs of today's ladder among chosen records that passed their check: no oracle, no
    peer, no rung gone from the ladder (``rung_now``, else the recorded ``rung``, above 0)."""
    if chosen.empty:
        return chosen
    rung = chosen["rung_now"] if "rung_now" in chosen else chosen["rung"]
    ok = chosen["check_ok"].fillna(True).astype(bool) if "check_ok" in chosen else True
    return chosen[(rung > 0) & ok]


def of_run(rows: pd.DataFrame, commit) -> pd.Series | None:
    """Among ``rows`` (one reference's records, the library's or a peer's, at one problem on one
    GPU): its newest record of the recording run at ``commit`` (a run is one GPU and one commit, as
    :func:`.coverage.recording_runs` counts them), else its newest record, of another run: to be
    shown and named, never divided by (:func:`same_run`).  None where it has no record."""
    if rows is None or rows.empty:
        return None
    rows = rows.sort_values("utc", kind="stable")
    same = rows[rows["commit"] == commit] if commit else rows.iloc[0:0]
    return (same if len(same) else rows).iloc[-1]


def same_run(ref: pd.Series | None, rec: pd.Series | None) -> bool:
    """Were ``ref`` and ``rec`` timed in one recording run (one GPU, one known commit)?"""
    return (ref is not None and rec is not None and bool(rec.get("commit")) and ref["commit"] == rec["commit"]
            and ref["gpu"] == rec["gpu"])


def ratio_of_run(ref: pd.Series | None, rec: pd.Series | None) -> float:
    """``ref``'s median over ``rec``'s where both are of one run (:func:`same_run`), else NaN."""
    return float(ref["median_s"]) / float(rec["median_s"]) if same_run(ref, rec) else float("nan")


def _group_of(problem: str) -> str:
    """The dtype (and layout, where the problem has one) of a problem label: the row's group."""
    parts = label_params(problem)
    return " ".join(parts[k] for k in _DTYPE_KEYS if k in parts)


def best_by_code(ours: pd.DataFrame, older: str = "older") -> tuple[pd.Series | None, pd.Series | None]:
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


def older_faster_cell(rung: str, ratio: float, median_s: float, commit: str) -> str:
    """A table's cell naming a record of older code that ran faster than today's best: its rung,
    its ratio to the reference of its own run (else its median), and its commit, marked *; "" where
    there is none."""
    if not rung:
        return ""
    return (f"{rung}, " + (f"x{ratio:.2f}" if np.isfinite(ratio) else fmt_seconds(median_s))
            + f" ({str(commit).rstrip('*')}*)")


def standing(op: str, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (GPU, problem) where a rung is recorded: the best rung by :func:`best_by_code`
    among records chosen by code (:func:`chosen_records`; ``table``: every record, as
    ``records(op, latest=False)`` gives them, the default), its median and commit (marked * where
    its kernel changed since: no rung of today's code was recorded there), the library's record of
    the same run (:func:`of_run`) and ``of library`` (the library's time over the rung's: above 1,
    the ladder beats the library; NaN where that run timed no library, whose newest median is then
    shown, ``library other run`` True); and ``older faster ...``: the record of older code that ran
    faster, against the library of its own run."""
    df = records(op, latest=False) if table is None else table
    if df is None or df.empty:
        return pd.DataFrame()
    df = df[df["op"] == op] if "op" in df else df
    if "simulated" in df:
        df = df[~df["simulated"].fillna(False).astype(bool)]
    if df.empty:
        return pd.DataFrame()
    every = df
    ch = chosen_records(df, op)
    rows = []
    for (gpu, problem), g in ch.groupby(["gpu", "problem"], sort=True):
        pick, faster = best_by_code(ladder_rungs(g), "older")
        if pick is None:
            continue
        here = every[(every["gpu"] == gpu) & (every["problem"] == problem)]
        lib_rows = here[here["rung"] == 0]
        o = of_run(lib_rows, pick.get("commit"))
        of = of_run(lib_rows, faster.get("commit")) if faster is not None else None
        rows.append({"op": op, "gpu": gpu, "group": _group_of(problem), "problem": problem,
                     "best rung": pick["label"], "variant": pick["variant"], "best median_s": float(pick["median_s"]),
                     "commit": str(pick.get("commit") or "")[:7] + ("*" if bool(pick["older"]) else ""),
                     "library median_s": float(o["median_s"]) if o is not None else float("nan"),
                     "library commit": str(o.get("commit") or "")[:7] if o is not None else "",
                     "library other run": o is not None and not same_run(o, pick),
                     "of library": ratio_of_run(o, pick),
                     "older faster rung": faster["label"] if faster is not None else "",
                     "older faster variant": faster["variant"] if faster is not None else "",
                     "older faster median_s": float(faster["median_s"]) if faster is not None else float("nan"),
                     "older faster commit": str(faster.get("commit") or "")[:7] if faster is not None else "",
                     "older faster of library": ratio_of_run(of, faster)})
    return pd.DataFrame(rows)


def _commit_cell(r, library: str) -> str:
    """The table's commit: the best rung's (marked * where of older code), and the library's where
    it is of another run (shown, not compared)."""
    s = str(r["commit"])
    if r.get("library other run"):
        s += f" ({library} {r['library commit']}, another run: not compared)"
    elif not r.get("library commit"):
        s += f" (no {library} recorded)"
    return s


def standing_table(st: pd.DataFrame, library: str = "library"):
    """The standing table as a reader reads it (times in units, the ratio as x): per GPU and
    problem the best rung of today's code first, the library of its run, and where a record of
    older code ran faster, that record beside it ("older code ran faster")."""
    if st.empty:
        return st
    t = pd.DataFrame({"op": st["op"], "gpu": st["gpu"], "group": st["group"], "problem": st["problem"],
                      "best rung": st["best rung"], "best rung's median": st["best median_s"].map(fmt_seconds),
                      "commit": [_commit_cell(r, library) for _, r in st.iterrows()],
                      f"{library}'s median": st["library median_s"].map(fmt_seconds),
                      f"x {library}": st["of library"]})
    if (st["older faster rung"] != "").any():
        t["older code ran faster"] = [older_faster_cell(r["older faster rung"], r["older faster of library"],
                                                        r["older faster median_s"], r["older faster commit"])
                                      for _, r in st.iterrows()]
    return t.style.format({f"x {library}": "{:.2f}"}, na_rep="—").hide(axis="index")


def standing_figure(st: pd.DataFrame, library: str = "library", title: str | None = None, ax=None):
    """One bar per comparison (GPU, problem), grouped by dtype: the best rung's speed (today's code
    first; hatched where only older code was recorded) as a fraction of the library's of the same
    run, with the parity line, and a hollow diamond where a record of older code ran faster (against
    the library of its own run).  Bars and points, never lines: no mark joins two records, and no
    bar divides by a library of another run (the row says so instead)."""
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
    x = st["of library"].astype(float)
    bars = ax.barh(range(len(st)), x.fillna(0.0), color=[colours[g] for g in st["gpu"]])
    for bar, o in zip(bars, old):
        if o:  # only older code recorded there: hatched, and the legend says so
            bar.set_hatch("//")
            bar.set_alpha(0.5)
    faster = st["older faster rung"] != ""
    fx = st["older faster of library"].astype(float)
    for i in np.flatnonzero(faster & np.isfinite(fx)):
        ax.plot([fx[i]], [i], ls="none", marker="D", ms=5, mfc="white", color=colours[st["gpu"][i]])
    finite = np.concatenate([x[np.isfinite(x)], fx[np.isfinite(fx)], [1.0]])
    lo, hi = float(finite.min()), float(finite.max())
    ax.set_xscale("log")
    ax.set_xlim(lo / 1.5, hi * 1.5)
    for i in np.flatnonzero(~np.isfinite(x)):
        ax.text(lo / 1.45, i, f"no {library} in its run ({fmt_seconds(st['best median_s'][i])})",
                va="center", fontsize=6)
    ax.set_yticks(range(len(st)), labels, fontsize=7)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xlabel(f"best rung's speed / {library}'s of the same run (1: parity; right of it the ladder wins)")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=colours[g], label=g) for g in gpus]
    if old.any():
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//",
                             label="older code only (kernel changed since)"))
    if (faster & np.isfinite(fx)).any():
        handles.append(Line2D([], [], ls="none", marker="D", ms=5, mfc="white", color="grey",
                              label="older code that ran faster"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.invert_yaxis()
    ax.set_title(title or "where the ladder stands: today's code", fontsize=9)
    return ax


def _goal_of(goals: dict | None, group: str) -> float | None:
    """The goal of a group ("float16 NHWC"): keyed by the group itself or by its dtype."""
    if not goals:
        return None
    g = goals.get(group, goals.get(group.split()[0] if group else "", None))
    return float(g) if g is not None else None


def takeaway(st: pd.DataFrame, library: str = "the library", goals: dict | None = None) -> str:
    """A paragraph from the standing table, for today's code: per dtype and GPU, the range of the
    best rung's fraction of the library of its run, what is won (at or above parity) and what is
    not, and for the widest gap the best rung's Nsight Compute counters on that GPU where a table
    has them.  Problems with no rung of today's code (marked *) are left out where today's code was
    recorded elsewhere in the group, and so are problems whose run timed no library (said); a
    record of older code that ran faster is named after them.  ``goals``: the fraction of the
    library each dtype (or "dtype layout" group) aims at; the paragraph says whether each GPU's
    records meet it."""
    if st.empty:
        return f"No problem has both a rung and {library} recorded on one GPU: nothing to say yet."
    out = []
    several = st["op"].nunique() > 1
    for (op, group, gpu), full in st.groupby(["op", "group", "gpu"], sort=True):
        # today's code speaks where it was recorded; older code only where no rung of today's code
        # was recorded in this group on this GPU at all
        old = full["commit"].astype(str).str.endswith("*")
        today = full[~old]
        older = int(old.sum()) if len(today) else 0
        g = today if len(today) else full
        unpaired = g[~np.isfinite(g["of library"].astype(float))]
        g = g[np.isfinite(g["of library"].astype(float))]
        s = (f"{op} " if several else "") + f"{group or 'all'} on {gpu}: "
        if g.empty:
            s += f"no rung recorded with {library} in its own run"
        else:
            lo, hi = g["of library"].min(), g["of library"].max()
            won = g[g["of library"] >= 1.0]
            rng = f"x{lo:.2f}" if np.isclose(lo, hi, rtol=0.005) else f"x{lo:.2f} to x{hi:.2f}"
            s += f"the best rung runs at {rng} {library}'s speed over {len(g)} problem{'s' if len(g) != 1 else ''}"
            if len(won) == len(g):
                s += " (won everywhere)" if len(g) > 1 else " (won)"
            elif len(won):
                s += f" (won at {len(won)}: {', '.join(sorted(set(won['best rung'])))})"
            else:
                worst = g.loc[g["of library"].idxmin()]
                gap = "widest gap" if len(g) > 1 else "the gap"  # one problem: no "widest" of one
                s += f" (not won; {gap} at {worst['problem'].split(' dtype')[0]}, {worst['best rung']})"
                s += _counters_clause(worst, gpu, st, library)
        goal = _goal_of(goals, group)
        if goal is not None and len(g):
            short = g[g["of library"] < goal]
            s += (f"; the goal, x{goal:.2f} {library}'s speed, is met" if short.empty else
                  f"; the goal, x{goal:.2f} {library}'s speed, is missed"
                  + (f" at {len(short)} of {len(g)} problems" if len(g) > 1 else "")
                  + f" (best x{g['of library'].max():.2f})")
        for _, r in unpaired.iterrows():  # a rung's run without the library: its median, no ratio across runs
            s += (f"; at {r['problem'].split(' dtype')[0]} {r['best rung']} took {fmt_seconds(r['best median_s'])} "
                  f"(commit {r['commit']}), and no {library} was timed in its run")
        if older:
            s += (f"; {older} problem{'s' if older != 1 else ''} with no record of today's code left out "
                  "(in the table, marked *)")
        # a record of older code faster than today's best at the same problem: named, with its goal
        for _, r in full[(full["older faster rung"] != "") & ~old].iterrows():
            ratio = float(r["older faster of library"])
            s += "; " + older_ran_faster(r["problem"].split(" dtype")[0], r["older faster rung"], ratio,
                                         r["older faster commit"], library, r["older faster median_s"])
            if goal is not None and np.isfinite(ratio):
                s += f", {'over' if ratio >= goal else 'under'} the goal"
        out.append(s + ".")
    text = " ".join(out)
    # the footnote explains a * the paragraph itself shows (a clause naming older code says so in
    # words, and the table explains its own *): none where the text has no *
    return text + (" (* a record of a kernel that changed since: not today's code.)" if "*" in text else "")


def _counters_clause(worst: pd.Series, gpu: str, st: pd.DataFrame, library: str) -> str:
    """The widest gap's Nsight Compute row (only a row of the record's code, :func:`.ncu.same_code`:
    another kernel took another time), beside the library's own row on the same GPU where one
    exists (its kernel does not change with ours): the contrast is the explanation."""
    v = next((x for x in ladder_for(worst["op"]) if x.name == worst["variant"]), None)
    c = (row_of_code(worst["op"], worst["problem"], v, str(worst["commit"]).rstrip("*"),
                     [gpu, *sorted(set(st["gpu"]))])[0] if v is not None else None)
    if c is None:
        return ""
    lib = next((x for x in ladder_for(worst["op"]) if x.oracle), None)
    # the library's row on the rung row's GPU, else on another recorded GPU (named once, after them)
    o = (library_row(worst["op"], worst["problem"], lib.name, [c.gpu, gpu, *sorted(set(st["gpu"]))])
         if lib is not None else None)
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
    if not bits:
        return ""
    there = "" if c.gpu == gpu else f", from {c.gpu}: {gpu} has no row of this code"
    s = f"; its Nsight Compute row ({c.table}, commit {(c.commit or '?')[:7]}{there}): {', '.join(bits)}"
    if o is not None and any(f"({who}: " in x for x in bits):
        # the library's figures name their own table: its newest row may be of another run (the
        # H100's cuBLAS row of 2026-11-23 beside a rung's row of 2026-11-28)
        where = ("the same table" if o.table == c.table and o.gpu == c.gpu
                 else f"{o.table}, commit {(o.commit or '?')[:7]}")
        if o.gpu != c.gpu:
            s += (f" ({library}'s numbers are {o.gpu}'s: {c.gpu} has no Nsight Compute row of "
                  f"{library} at this problem; {library}'s row: {where})")
        else:
            s += f" ({library}'s row: {where})"
    return s
