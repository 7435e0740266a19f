"""Where memory-bound ladders stand on one GPU: per op, every recorded problem (shape and dtype)
with its best checked rung, torch, Triton, the best rung's speed over torch's and its fraction of
the measured copy ceiling, as a table, a bandwidth-against-width figure and a paragraph written
from the same numbers (so the prose stays true when the records change).

Records are chosen by code, not recency: per (op, problem, rung) on the GPU the newest record of
today's code, older code only where the rung has no record of today's code (:func:`.standing.chosen_records`, as
notebooks 02 and 03 and the cards choose), and then marked ``*``.  The best rung of a problem is
the standings' rule of notebooks 02 and 03 (:func:`.standing.best_by_code`): the fastest of
today's code, older code (marked) only where no rung of today's code was recorded there, and a
record of older code that ran faster named beside it (``older faster``), never in its place.
torch and Triton are taken from the rung's run (:func:`.standing.of_run`: the same GPU and
commit) where they were timed there, else their newest record, shown and not compared, and the
row's ``commits`` says so.  Nothing is averaged, and the figure draws points only (no line joins two
records).  :class:`WhereTheyStand` is the notebooks' one call."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .cards import CHANGED_MARK_NOTE
from .formatting import fmt_seconds
from .matching import label_params, ladder_for, records
from .ncu import fmt_count, library_row, row_of_code
from .prompts import Rendered, fold, paragraph
from .standing import (best_by_code, chosen_records, ladder_rungs, of_run, older_faster_cell, older_ran_faster,
                       ratio_of_run, same_run)
from .view import fold_figure

#: what the table's ``x torch`` and ``of copy`` columns mean (the caption)
COLUMNS_NOTE = ("x torch / x Triton: their median over the best rung's, both of one run (above 1 the ladder "
                "wins; a peer recorded only in another run is shown and not compared); "
                "of copy: the best rung's useful bytes per second (problem.bytes / median) over the "
                "measured copy bandwidth of the same GPU")
_PEERS = {"torch": "oracle", "Triton": "triton"}


def shape_of(problem: str) -> str:
    """``rows=4096 cols=1024 dtype=float32 ...`` -> ``4096 x 1024``; batchnorm ``32x256x56x56 NCHW``."""
    p = label_params(problem)
    if "cols" in p:
        return f"{p.get('rows', '?')} x {p['cols']}"
    dims = "x".join(p[k] for k in ("n", "c", "h", "w") if k in p)
    return (dims + (f" {p['layout']}" if "layout" in p else "")).strip() or str(problem)


def width_of(problem: str) -> float:
    """The figure's x: the row width (``cols``), or H*W for batchnorm (a channel's contiguous run in NCHW)."""
    p = label_params(problem)
    if "cols" in p:
        return float(p["cols"])
    if "h" in p and "w" in p:
        return float(p["h"]) * float(p["w"])
    return float("nan")


def chosen(op: str, gpu: str, *, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One record per (problem, variant) of ``op`` on ``gpu``, chosen by code as 02 and 03 choose
    (:func:`.standing.chosen_records`), labelled (:func:`records`), with ``older``."""
    return chosen_records(records(op, gpu=gpu, latest=False, frame=frame), op)


def standing_rows(op: str, gpu: str, *, frame: pd.DataFrame | None = None, copy_gbps: float | None = None
                  ) -> pd.DataFrame:
    """One row per recorded problem of ``op`` on ``gpu`` (numbers, as recorded): the best checked
    rung of today's ladder among the chosen records (:func:`chosen`), by :func:`best_by_code` (today's
    code first), and torch's and Triton's records (:func:`.standing.of_run`); ``older faster ...``: a checked
    record of older code that ran faster, with its x torch of its own run (empty / NaN where none);
    ``copy_gbps`` the ceiling for ``of copy`` (NaN without one)."""
    ch = chosen(op, gpu, frame=frame)
    all_rows = records(op, gpu=gpu, latest=False, frame=frame)
    out = []
    if ch.empty:
        return pd.DataFrame()
    for problem, g in ch.groupby("problem", sort=False):
        # today's code first; b None: only peers recorded here
        b, faster = best_by_code(ladder_rungs(g), "older")
        commit = b["commit"] if b is not None else None
        here = all_rows[all_rows["problem"] == problem]
        p = label_params(problem)
        row = {"op": op, "gpu": gpu, "problem": problem, "shape": shape_of(problem),
               "dtype": p.get("dtype", ""), "group": " ".join(p[k] for k in ("dtype", "layout") if k in p),
               "width": width_of(problem),
               "best rung": b["label"] if b is not None else "no rung recorded",
               "best median_s": float(b["median_s"]) if b is not None else float("nan"),
               "best gbps": float(b["gbps"]) if b is not None else float("nan"),
               "best variant": b["variant"] if b is not None else "", "bytes": float(b["bytes"]) if b is not None else float("nan"),
               "commit": str(commit)[:7] if b is not None else "", "older": bool(b["older"]) if b is not None else False}
        others = []
        for peer, variant in _PEERS.items():
            r = of_run(here[here["variant"] == variant], commit)
            row[f"{peer} median_s"] = float(r["median_s"]) if r is not None else float("nan")
            row[f"{peer} gbps"] = float(r["gbps"]) if r is not None else float("nan")
            row[f"{peer} commit"] = str(r["commit"])[:7] if r is not None else ""
            # a ratio only within one run (one GPU, one commit): a peer timed in another run is
            # shown, named, and not compared
            row[f"{peer} other run"] = r is not None and not same_run(r, b)
            row[f"x {peer}"] = ratio_of_run(r, b)
            if row[f"{peer} other run"]:
                others.append(f"{peer} {str(r['commit'])[:7]}, another run: not compared")
        row["of copy"] = row["best gbps"] / copy_gbps if copy_gbps else float("nan")
        # the older record that ran faster: its own numbers, against torch of its own run only
        t = of_run(here[here["variant"] == _PEERS["torch"]], faster["commit"]) if faster is not None else None
        row["older faster rung"] = faster["label"] if faster is not None else ""
        row["older faster median_s"] = float(faster["median_s"]) if faster is not None else float("nan")
        row["older faster gbps"] = float(faster["gbps"]) if faster is not None else float("nan")
        row["older faster commit"] = str(faster["commit"])[:7] if faster is not None else ""
        row["older faster x torch"] = ratio_of_run(t, faster)
        row["commits"] = (row["commit"] + ("*" if row["older"] else "") + (f" ({', '.join(others)})" if others else "")).strip()
        out.append(row)
    df = pd.DataFrame(out)
    if df.empty:
        return df
    # float32 first (the ladders' home dtype), then by width
    return (df.assign(_k=df["dtype"] != "float32").sort_values(["_k", "dtype", "width", "shape"])
            .drop(columns="_k").reset_index(drop=True))


def copy_ceiling(gpu: str, *, frame: pd.DataFrame | None = None) -> pd.Series | None:
    """The newest ``copy`` record of the roofline op on ``gpu`` (its ``gbps``, commit, date); None without one."""
    if frame is None:
        from .. import results

        frame = results.load(op="roofline", latest=False)
    if frame is None or frame.empty or "variant" not in frame:
        return None
    g = gpu.lower()
    c = frame[(frame["variant"] == "copy") & ((frame["gpu"].astype(str).str.lower() == g)
                                              | (frame.get("gpu_slug", frame["gpu"]).astype(str).str.lower() == g))]
    if "simulated" in c:
        c = c[~c["simulated"].fillna(False).astype(bool)]
    return c.sort_values("utc").iloc[-1] if len(c) else None


class WhereTheyStand:
    """The standing of several memory-bound ops on one GPU or several (``gpu``: a name, or a list
    of names: one table per op and GPU, never a number across two): ``rows`` (one per GPU, op and
    problem), :meth:`table`, :meth:`figure`, :meth:`takeaway`, and :meth:`folded` (all three,
    folded)."""

    def __init__(self, ops, gpu, *, frame: pd.DataFrame | None = None,
                 copy_frame: pd.DataFrame | None = None):
        self.ops = list(ops)
        self.gpus = [g for g in ([gpu] if gpu is None or isinstance(gpu, str) else list(gpu)) if g]
        self.gpu = self.gpus[0] if self.gpus else None
        self.copies = {g: copy_ceiling(g, frame=copy_frame) for g in self.gpus}
        self.copy = self.copies.get(self.gpu)
        self.copy_gbps = self._gbps(self.gpu)
        parts = [standing_rows(op, g, frame=frame, copy_gbps=self._gbps(g)) for g in self.gpus for op in self.ops]
        parts = [p for p in parts if len(p)]
        self.rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def _gbps(self, gpu) -> float | None:
        c = self.copies.get(gpu)
        return float(c["gbps"]) if c is not None else None

    def _copy_note(self, gpu=None) -> str:
        gpu = gpu or self.gpu
        c = self.copies.get(gpu)
        if c is None:
            return f"no copy bandwidth recorded on {gpu}: no fraction of copy"
        return (f"copy ceiling {float(c['gbps']):.0f} GB/s, measured on {gpu} "
                f"({str(c['utc'])[:10]}, commit {str(c['commit'])[:7]})")

    def _where(self) -> str:
        return " and ".join(self.gpus) if self.gpus else "no GPU"

    def notes(self) -> str:
        """What the columns mean, where the ceilings come from, and the * mark where it is used."""
        marked = not self.rows.empty and bool(self.rows["older"].any() or (self.rows["older faster rung"] != "").any())
        return "; ".join([COLUMNS_NOTE] + [self._copy_note(g) for g in self.gpus]
                         + ([CHANGED_MARK_NOTE] if marked else []))

    def _of(self, op=None, gpu=None) -> pd.DataFrame:
        t = self.rows
        if t.empty:
            return t
        if op is not None:
            t = t[t["op"] == op]
        if gpu is not None:
            t = t[t["gpu"] == gpu]
        return t

    def table(self, op: str | None = None, gpu: str | None = None):
        """The rows as a reader reads them (times in units, ratios as x, fractions as %); of one
        GPU (the first, unless named)."""
        gpu = gpu or self.gpu
        t = self._of(op, gpu)
        if t.empty:
            return pd.DataFrame()
        show = pd.DataFrame({
            "op": t["op"], "problem": t["shape"], "dtype": t["dtype"], "best checked rung": t["best rung"],
            "its median": t["best median_s"].map(fmt_seconds), "torch": t["torch median_s"].map(fmt_seconds),
            "Triton": t["Triton median_s"].map(fmt_seconds), "x torch": t["x torch"], "x Triton": t["x Triton"],
            "of copy": t["of copy"], "commit": t["commits"]})
        if (t["older faster rung"] != "").any():
            # where a record of older code ran faster than today's best, it is named beside it (02 and 03 alike)
            show["older code ran faster"] = [
                older_faster_cell(r["older faster rung"], r["older faster x torch"], r["older faster median_s"],
                                  r["older faster commit"]) for _, r in t.iterrows()]
        if op is not None:
            show = show.drop(columns="op")  # the caption names it
        cap = f"{op} on {gpu}" if op else f"{gpu}: {self.notes()}"
        return (show.style.format({"x torch": "{:.2f}", "x Triton": "{:.2f}", "of copy": "{:.2f}"}, na_rep="—")
                .hide(axis="index").set_caption(cap))

    def figure(self):
        """Per GPU (a row of panels) and op (a panel), GB/s against the width: the best rung (its
        number beside each point), torch and Triton, one marker per dtype and layout (hollow: older
        code), a hollow diamond where a record of older code ran faster, that GPU's copy ceiling as
        a dashed line.  Points only: each point is one record,
        and no line joins two records."""
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D

        ops = [op for op in self.ops if not self.rows.empty and (self.rows["op"] == op).any()] or self.ops[:1]
        gpus = self.gpus or [None]
        fig, axes = plt.subplots(len(gpus), len(ops), figsize=(3.2 * len(ops), 3.0 * len(gpus)), squeeze=False)
        groups = sorted(set(self.rows["group"]), key=lambda g: (not g.startswith("float32"), g)) if len(self.rows) else []
        markers = dict(zip(groups, "os^DvP<>"))  # one marker per dtype (and layout)
        series = {"best rung": ("best gbps", "C0"), "torch": ("torch gbps", "C3"), "Triton": ("Triton gbps", "C2")}
        cols = [c for c, _ in series.values()]
        for axrow, gpu in zip(axes, gpus):
            ceiling = self._gbps(gpu)
            for ax, op in zip(axrow, ops):
                t = self._of(op, gpu)
                if ceiling:
                    ax.axhline(ceiling, color="black", lw=1, ls="--")
                for name, (col, colour) in series.items():
                    for _, r in (t.dropna(subset=[col]).iterrows() if len(t) else []):
                        hollow = r["older"] if name == "best rung" else r[f"{name} other run"]
                        ax.plot([r["width"]], [r[col]], ls="none", marker=markers.get(r["group"], "X"), color=colour,
                                mfc="white" if hollow else colour, ms=6)
                        if name == "best rung":
                            ax.annotate(str(r["best rung"]).split()[0], (r["width"], r[col]), fontsize=6,
                                        xytext=(4, -3), textcoords="offset points")
                # a record of older code that ran faster: a hollow diamond, as in 02 and 03's figure
                for _, r in (t.dropna(subset=["older faster gbps"]).iterrows() if len(t) else []):
                    ax.plot([r["width"]], [r["older faster gbps"]], ls="none", marker="D", ms=5, mfc="white",
                            color="C0")
                ax.set_xscale("log", base=2)
                ax.set_xlabel("H·W" if op == "batchnorm" else "row width (cols)", fontsize=8)
                ax.set_ylabel("GB/s (useful bytes)", fontsize=8)
                ax.set_title(f"{op} on {gpu}" if len(gpus) > 1 else op, fontsize=8 if len(gpus) > 1 else 9)
                top = float(np.nanmax(t[cols].to_numpy())) if len(t) and np.isfinite(t[cols].to_numpy()).any() else 1
                ax.set_ylim(0, 1.1 * max(ceiling or 0, top))
                ax.tick_params(labelsize=7)
        handles = [Line2D([], [], ls="none", marker="o", color=c, label=n) for n, (_, c) in series.items()]
        handles += [Line2D([], [], ls="none", marker=m, color="grey", label=g) for g, m in markers.items()]
        handles += [Line2D([], [], ls="none", marker="o", color="C0", mfc="white",
                           label="hollow: older code (*) or a peer of another run"),
                    Line2D([], [], color="black", ls="--", label="measured copy")]
        if len(self.rows) and np.isfinite(self.rows["older faster gbps"].astype(float)).any():
            handles.insert(-1, Line2D([], [], ls="none", marker="D", ms=5, mfc="white", color="C0",
                                      label="older code that ran faster"))
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7, frameon=False,
                   bbox_to_anchor=(0.5, -0.06 / len(gpus)))
        fig.suptitle("; ".join(f"{g}: {self._copy_note(g)}" if len(gpus) > 1 else f"{g}: GB/s against the width "
                               f"({self._copy_note(g)})" for g in gpus) + "; the number: the best rung", fontsize=8)
        fig.tight_layout()
        return fig

    def takeaway(self) -> str:
        """Sentences from the rows, per GPU: per op and dtype, where the best rung beats torch (and
        by how much, at what fraction of copy) and where it does not; then per op one sentence of
        the Nsight Compute counters that explain it, where that GPU has a row of the best rung's
        code (:meth:`_counters`), or that it has none where the op loses."""
        if self.rows.empty:
            return f"No problem has a checked rung recorded on {self._where() if self.gpus else 'any GPU'}: nothing to say yet."
        return "\n\n".join(self._takeaway(g) for g in self.gpus if not self._of(gpu=g).empty)

    def _takeaway(self, gpu) -> str:
        rows = self._of(gpu=gpu)
        out = []
        for op, of_op in rows.groupby("op", sort=False):
            for dtype, g in of_op.groupby("dtype", sort=False):
                out.append(self._standing(op, dtype, g))
            said = self._counters(of_op)  # one sentence per op: the counters behind its standing
            if said:
                out.append(said)
        n_won = int((rows["x torch"] >= 1.0).sum())
        n = int(np.isfinite(rows["x torch"]).sum())
        head = f"On {gpu}, the best checked rung beats torch at {n_won} of {n} recorded problems. "
        body = " ".join(out)
        # the footnote explains a * the paragraph shows ("older code*"); a record of older code that
        # ran faster is named in words, with no *: no footnote for it alone
        tail = " (* a record of a kernel that changed since: not today's code.)" if "*" in body else ""
        return head + body + tail

    @staticmethod
    def _standing(op, dtype, g) -> str:
        """One op and dtype: where the best rung beats torch and where it does not."""
        def say(r):
            cp = f", {r['of copy']:.2f} of copy" if np.isfinite(r["of copy"]) else ""
            return f"{r['shape']} (x{r['x torch']:.2f}{cp}{', older code*' if r['older'] else ''})"
        bare = g[g["best median_s"].isna()]
        g = g[g["best median_s"].notna()]
        vs = g[np.isfinite(g["x torch"])]
        won, lost = vs[vs["x torch"] >= 1.0], vs[vs["x torch"] < 1.0]
        s = f"{op} {dtype}: "
        if len(won):
            s += f"beats torch at {', '.join(say(r) for _, r in won.iterrows())}"
        if len(lost):
            s += ("; " if len(won) else "") + f"loses to torch at {', '.join(say(r) for _, r in lost.iterrows())}"
        if vs.empty and len(g):
            s += "no torch record to compare with"
        if len(bare):
            s += ("; " if len(g) else "") + f"no rung recorded at {', '.join(bare['shape'])} (torch only)"
        tri = g[np.isfinite(g["x Triton"])]
        if len(tri):
            s += f"; beats Triton at {int((tri['x Triton'] >= 1.0).sum())} of {len(tri)}"
        for _, r in g[g["older faster rung"] != ""].iterrows():  # named, never in today's place
            s += "; " + older_ran_faster(r["shape"], r["older faster rung"], r["older faster x torch"],
                                         r["older faster commit"], "torch", r["older faster median_s"])
        return s + "."

    @staticmethod
    def row_of(r):
        """(the Nsight Compute row of row ``r``'s best rung at its problem on its GPU, of the
        record's code as the cards decide (:func:`.ncu.row_of_code`), or None; a row there of
        other code, or None); never another GPU's row: a percentage of peak is its own GPU's."""
        v = next((x for x in ladder_for(r["op"]) if x.name == r["best variant"]), None)
        if v is None or not r["commit"]:
            return None, None
        return row_of_code(r["op"], r["problem"], v, r["commit"], [r["gpu"]])

    def _counters(self, rows) -> str:
        """One sentence for an op on a GPU: the Nsight Compute row of the best rung (of the
        record's code, on that GPU) at the widest loss to torch and at the largest win that have
        one, each figure beside torch's row on the same GPU where one exists: DRAM throughput as a
        percentage of peak, the DRAM bytes read and written against the ideal bytes (the problem's
        useful bytes: above 1, a tensor read twice), achieved occupancy, issue active.  The problems
        where the op loses with no such row are named, as having none; "" where nothing is to say."""
        rows = rows[rows["best median_s"].notna()]
        if rows.empty:
            return ""
        op = rows["op"].iloc[0]
        label = lambda r: f"{r['shape']} {r['dtype']}".strip()  # noqa: E731  (4096 x 4096 is in two dtypes)
        found = {i: self.row_of(r) for i, r in rows.iterrows()}
        has = rows[[found[i][0] is not None for i in rows.index]]
        vs = has[np.isfinite(has["x torch"])]
        pick = [vs["x torch"].idxmin()] if (vs["x torch"] < 1).any() else []
        pick += [vs["x torch"].idxmax()] if (vs["x torch"] >= 1).any() else []
        pick = [i for i in has.index if i in pick] or list(has.index[:1])  # the table's order
        lib = next((x for x in ladder_for(op) if x.oracle), None)
        said = []
        for i in pick:
            r, c = rows.loc[i], found[i][0]
            o = library_row(op, r["problem"], lib.name, [c.gpu]) if lib is not None else None

            def both(label, key, fmt, short=None, c=c, o=o):
                """``label`` and this rung's figure, torch's beside it (``short``: torch's, shorter)."""
                mine, theirs = c.get(key), (o.get(key) if o is not None else float("nan"))
                if not np.isfinite(mine):
                    return None
                return (f"{label} {fmt(mine)}"
                        + (f" (torch: {(short or fmt)(theirs)})" if np.isfinite(theirs) else ""))

            ideal = float(r["bytes"])
            bits = [b for b in (
                both("DRAM throughput", "dram_throughput_pct", lambda x: f"{x:.0f}% of peak"),
                both("DRAM", "dram_bytes", lambda x: (f"{fmt_count(c.get('dram_read_bytes'), 'bytes')} read + "
                                                      f"{fmt_count(c.get('dram_write_bytes'), 'bytes')} written = "
                                                      f"{x / ideal:.2f}x the ideal {fmt_count(ideal, 'bytes')}"),
                     lambda x: f"{x / ideal:.2f}x the ideal") if ideal > 0 else None,
                both("achieved occupancy", "achieved_occupancy_pct", lambda x: f"{x:.0f}%"),
                both("issue active", "issue_active_pct", lambda x: f"{x:.0f}%")) if b]
            if not bits:
                continue
            same = "" if str(c.commit or "")[:7] == r["commit"] else f", the same code as the record's {r['commit']}"
            said.append(f"at {label(r)}, {r['best rung']} ({c.table}, commit {str(c.commit or '?')[:7]}{same}): "
                        + ", ".join(bits))
        lost = rows[np.isfinite(rows["x torch"]) & (rows["x torch"] < 1)]
        none = [label(r) for i, r in lost.iterrows() if found[i][0] is None and found[i][1] is None]
        other = [label(r) for i, r in lost.iterrows() if found[i][0] is None and found[i][1] is not None]
        gaps = ([f"no Nsight Compute row at {', '.join(none)}"] if none else []) + (
            [f"the Nsight Compute row at {', '.join(other)} is of other code than the record's"] if other else [])
        if gaps:
            gaps[-1] += " (where it loses)"
        if not said and not gaps:
            return ""
        return f"{op}'s counters: " + "; ".join(said + gaps) + "."

    def folded(self, what: str = "the ladders") -> list[Rendered]:
        """The tables, the figure and the takeaway, each folded (open them after predicting)."""
        tables = [self.table(op, g) for g in self.gpus for op in self.ops if not self._of(op, g).empty]
        tables = [Rendered(t.to_html(), f"{t.caption}\n{t.to_string(delimiter='  ')}") for t in tables]
        return [fold(paragraph(self.notes()), *(tables or [self.takeaway()]),
                     summary=f"where {what} stand on {self._where()}: every recorded problem, per op"),
                fold_figure(self.figure(), "the same against the width, with the copy ceiling"),
                fold(*(paragraph(p) for p in self.takeaway().split("\n\n")), summary="what the table says, in words")]
