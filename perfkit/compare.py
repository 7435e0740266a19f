"""``perfkit compare BASE NEW``: what changed between two sets of GPU records, with the noise
taken into account (after NVBench's ``nvbench_compare.py``: per benchmark both medians, their
ratio, its noise, a verdict).

A side (``BASE`` or ``NEW``) selects records of ``data/results/`` (or ``--results DIR``) by
comma-separated terms, each ``key=value`` or a bare value recognised by its form:

* ``commit=7c7b2e0`` (or a bare hex string of 7-40 characters): records made at that commit;
* ``gpu=h100`` (or any other bare word): the GPU name or folder contains it;
* ``date=2026-11-23`` (or a bare ``YYYY-MM-DD``): recorded that UTC day;
* ``after=2026-11-23T10:24`` / ``before=...``: recorded at or after / before that UTC time;
* ``dir=PATH`` (or a bare path to a folder): the records under that folder instead.

Pairs are (op, problem, rung or peer) present on both sides, on the same GPU; when the two sides
are on different GPUs the pairs ignore the GPU, and the verdict is left out unless asked
(``--verdict-across-gpus``: noise on one machine says nothing about two).  Per pair: both medians,
``ratio`` = new / base (> 1: slower), a bootstrap interval of the ratio of medians from the raw
samples, and the verdict: **slower** when the whole interval lies above 1 and the ratio exceeds
``1 + threshold``, **faster** the mirror image, else **same within noise**.  A pair whose rung's
kernel code differs between the two commits is marked (``code``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["CompareError", "Comparison", "select", "default_sides", "ratio_interval", "compare", "plot", "cli",
           "THRESHOLD", "FAIL_ABOVE"]

#: a change smaller than this (relative) is never called faster or slower
THRESHOLD = 0.02
#: the default of ``--fail-above``: a pair slower beyond noise by more than this fails the command
FAIL_ABOVE = 0.05
_KEYS = ("commit", "gpu", "date", "after", "before", "dir")


class CompareError(ValueError):
    """A side selects nothing, or the selection cannot be understood."""


def _terms(spec: str) -> list[tuple[str, str]]:
    out = []
    for part in (p.strip() for p in str(spec).split(",")):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            k = k.strip().lower()
            if k not in _KEYS:
                raise CompareError(f"unknown selector {k!r} in {spec!r}; use {', '.join(_KEYS)}")
            out.append((k, v.strip()))
        elif Path(part).is_dir():
            out.append(("dir", part))
        elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", part):
            out.append(("date", part))
        elif re.fullmatch(r"[0-9a-f]{7,40}", part):
            out.append(("commit", part))
        else:
            out.append(("gpu", part))
    if not out:
        raise CompareError(f"an empty selection: {spec!r}")
    return out


def select(spec: str, root=None) -> pd.DataFrame:
    """The real-GPU records a side selects (one row per record file, every sample kept in
    ``samples``); raises :class:`CompareError` naming the selection when it selects none."""
    from . import results

    terms = _terms(spec)
    dirs = [v for k, v in terms if k == "dir"]
    if len(dirs) > 1:
        raise CompareError(f"{spec!r} names two folders")
    folder = Path(dirs[0]) if dirs else Path(root) if root is not None else results.RESULTS_DIR
    df = results.load(root=folder, latest=False)
    if not df.empty:
        df = df[~df["simulated"].fillna(False).astype(bool)]  # a simulated time is no speed
    for k, v in terms:
        if df.empty:
            break
        if k == "commit":
            df = df[df["commit"].fillna("").str.startswith(v)]
        elif k == "gpu":
            v = v.lower()
            df = df[df["gpu"].fillna("").str.lower().str.contains(v, regex=False)
                    | df["gpu_slug"].fillna("").str.lower().str.contains(v, regex=False)]
        elif k == "date":
            df = df[df["utc"].fillna("").str.startswith(v)]
        elif k == "after":
            df = df[df["utc"].fillna("") >= v]
        elif k == "before":
            df = df[df["utc"].fillna("") < v]
    if df.empty:
        raise CompareError(f"no real-GPU record in {folder} matches {spec!r}")
    df = df.copy()
    df["samples"] = [_samples(p) for p in df["path"]]
    return df


def _samples(path) -> np.ndarray:
    try:
        t = json.loads(Path(path).read_text()).get("timing") or {}
    except (OSError, json.JSONDecodeError):
        return np.array([])
    s = np.asarray([x for x in (t.get("samples") or []) if x is not None], dtype=float)
    return s[np.isfinite(s) & (s > 0)]


def default_sides(root=None) -> tuple[str, str]:
    """(BASE, NEW) when none are given: the two newest commits recorded on one GPU (the GPU with
    the newest record that has two)."""
    from . import results

    df = results.load(root=root, latest=False)
    df = df[~df["simulated"].fillna(False).astype(bool)] if not df.empty else df
    if df.empty:
        raise CompareError("no real-GPU records to compare")
    for gpu, g in sorted(df.groupby("gpu"), key=lambda kv: kv[1]["utc"].max(), reverse=True):
        newest = g.groupby("commit")["utc"].max().sort_values(ascending=False)
        if len(newest) >= 2:
            return f"gpu={gpu},commit={newest.index[1]}", f"gpu={gpu},commit={newest.index[0]}"
    gpus = ", ".join(f"{g} ({', '.join(sorted(set(x['commit'].str[:7])))})" for g, x in df.groupby("gpu"))
    raise CompareError(f"no GPU has records of two commits ({gpus}): name BASE and NEW, e.g. "
                       "'commit=A' 'commit=B', two GPUs, or 'before=TIME' 'after=TIME'")


def ratio_interval(base: np.ndarray, new: np.ndarray, *, confidence: float = 0.95, n_boot: int = 2000,
                   seed: int = 0) -> tuple[float, float]:
    """A percentile-bootstrap interval of median(new) / median(base), resampling each side's raw
    samples; (nan, nan) when either side has fewer than 3 samples."""
    base, new = np.asarray(base, float), np.asarray(new, float)
    if len(base) < 3 or len(new) < 3:
        return float("nan"), float("nan")
    g = np.random.default_rng(seed)
    mb = np.median(g.choice(base, (n_boot, len(base))), axis=1)
    mn = np.median(g.choice(new, (n_boot, len(new))), axis=1)
    r = mn / mb
    a = (1 - confidence) / 2
    return float(np.quantile(r, a)), float(np.quantile(r, 1 - a))


def verdict(ratio: float, lo: float, hi: float, threshold: float = THRESHOLD) -> str:
    """slower / faster / same within noise (the rule of the module docstring)."""
    if not np.isfinite(lo):
        return "no samples"
    if lo > 1 and ratio > 1 + threshold:
        return "slower"
    if hi < 1 and ratio < 1 - threshold:
        return "faster"
    return "same within noise"


@dataclass
class Comparison:
    """What :func:`compare` returns: the pairs, the records present on one side only, and the
    settings it ruled with.  ``failed`` lists the pairs slower beyond ``fail_above``."""

    table: pd.DataFrame
    only_base: pd.DataFrame
    only_new: pd.DataFrame
    base: str
    new: str
    threshold: float
    fail_above: float
    across_gpus: bool
    notes: list = field(default_factory=list)

    @property
    def failed(self) -> pd.DataFrame:
        t = self.table
        return t[(t["verdict"] == "slower") & (t["ratio"] > 1 + self.fail_above)] if not t.empty else t

    def header(self) -> str:
        h = (f"perfkit compare: BASE [{self.base}] -> NEW [{self.new}]; ratio = new / base median (> 1 slower), "
             f"95% bootstrap interval from the raw samples; slower/faster when the interval excludes 1 and the "
             f"change exceeds {self.threshold:.0%}")
        if self.across_gpus:
            h += "; two different GPUs: " + ("verdicts asked for (--verdict-across-gpus)" if
                                             (self.table["verdict"] != "—").any() else "no verdict on noise")
        return h

    def __str__(self) -> str:
        lines = [self.header()]
        if not self.table.empty:
            t = self.table.assign(base_us=self.table["base_median_s"] * 1e6, new_us=self.table["new_median_s"] * 1e6)
            cols = ["op", "problem", "variant", "base_us", "new_us", "ratio", "ci_low", "ci_high", "verdict", "code"]
            lines.append(t[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        for name, df in (("only in BASE", self.only_base), ("only in NEW", self.only_new)):
            if not df.empty:
                lines.append(f"{name} ({len(df)}): " + "; ".join(f"{r.op} {r.variant} @ {r.problem}"
                                                               for r in df.head(12).itertuples())
                             + (" ..." if len(df) > 12 else ""))
        counts = self.table["verdict"].value_counts().to_dict() if not self.table.empty else {}
        lines.append(f"{len(self.table)} pairs: " + ", ".join(f"{v} {k}" for k, v in counts.items())
                     + (f"; FAIL: {len(self.failed)} slower by more than {self.fail_above:.0%}" if len(self.failed) else ""))
        lines += self.notes
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


def _newest(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.sort_values("utc").drop_duplicates(keys, keep="last")


def compare(base: str | None = None, new: str | None = None, *, root=None, threshold: float = THRESHOLD,
            fail_above: float = FAIL_ABOVE, verdict_across_gpus: bool = False, n_boot: int = 2000,
            seed: int = 0) -> Comparison:
    """Compare two selections of records (module docstring); with neither given, the two newest
    commits recorded on one GPU (:func:`default_sides`)."""
    if (base is None) != (new is None):
        raise CompareError("give both BASE and NEW, or neither")
    if base is None:
        base, new = default_sides(root)
    if not 0 <= threshold < 1 or not 0 <= fail_above:
        raise CompareError("threshold must be in [0, 1) and fail_above >= 0")
    a, b = select(base, root), select(new, root)
    across = set(a["gpu"]) != set(b["gpu"])
    keys = ["op", "problem", "variant"] + ([] if across else ["gpu"])
    a, b = _newest(a, keys), _newest(b, keys)  # a side that holds repeats: its newest record
    m = a.merge(b, on=keys, suffixes=("_base", "_new"), how="outer", indicator=True)
    pairs = m[m["_merge"] == "both"]
    rows = []
    for r in pairs.itertuples(index=False):
        r = r._asdict()
        sb, sn = r["samples_base"], r["samples_new"]
        ratio = float(r["median_s_new"]) / float(r["median_s_base"])
        lo, hi = ratio_interval(sb, sn, n_boot=n_boot, seed=seed)
        v = verdict(ratio, lo, hi, threshold) if (not across or verdict_across_gpus) else "—"
        rows.append({"op": r["op"], "problem": r["problem"], "variant": r["variant"],
                     "gpu_base": r.get("gpu_base", r.get("gpu")), "gpu_new": r.get("gpu_new", r.get("gpu")),
                     "commit_base": r["commit_base"], "commit_new": r["commit_new"],
                     "base_median_s": float(r["median_s_base"]), "new_median_s": float(r["median_s_new"]),
                     "n_base": len(sb), "n_new": len(sn), "ratio": ratio, "ci_low": lo, "ci_high": hi,
                     "verdict": v})
    table = pd.DataFrame(rows, columns=["op", "problem", "variant", "gpu_base", "gpu_new", "commit_base",
                                        "commit_new", "base_median_s", "new_median_s", "n_base", "n_new", "ratio",
                                        "ci_low", "ci_high", "verdict"])
    table["code"] = [_code_changed(r) for r in table.itertuples()]
    table = table.sort_values(["op", "problem", "variant"]).reset_index(drop=True)
    side = ["op", "problem", "variant"]
    only_base = m[m["_merge"] == "left_only"][side].reset_index(drop=True)
    only_new = m[m["_merge"] == "right_only"][side].reset_index(drop=True)
    return Comparison(table, only_base, only_new, base, new, threshold, fail_above, across)


def _code_changed(r) -> str:
    """'changed' when the rung's kernel code differs between the two records' commits, 'same'
    when it does not, '' when that cannot be told (a peer, no git, one commit unknown)."""
    ca, cb = str(r.commit_base or ""), str(r.commit_new or "")
    if not ca or not cb:
        return ""
    if ca[:7] == cb[:7]:
        return "same"
    from . import history
    from .kernels import registry

    try:
        v = next(x for x in registry.ladder(r.op) if x.name == r.variant)
    except (LookupError, StopIteration):
        return ""
    if v.oracle:
        return ""
    sa, sb = history.source_changed_since(v, ca), history.source_changed_since(v, cb)
    if sa is None or sb is None:
        return ""
    # each is compared with today's tree: one changed and the other not tells; both changed may
    # or may not be the same code between them, which this cannot tell
    if sa and sb:
        return ""
    return "changed" if sa != sb else "same"


def plot(c: Comparison, ax=None):
    """The ratio and its interval per pair, grouped by op; colour by verdict, 1 dashed."""
    import matplotlib.pyplot as plt

    from .plots import placeholder

    t = c.table
    if t.empty:
        return placeholder("no pairs to compare", ax=ax, title="perfkit compare")
    t = t.sort_values(["op", "problem", "variant"]).reset_index(drop=True)
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.28 * len(t) + 1.5))
    colour = {"slower": "#cf222e", "faster": "#1a7f37", "same within noise": "#57606a"}
    ys = np.arange(len(t))
    for verdict_, g in t.groupby("verdict"):
        idx = g.index.to_numpy()
        lo = (g["ratio"] - g["ci_low"]).clip(lower=0).fillna(0)
        hi = (g["ci_high"] - g["ratio"]).clip(lower=0).fillna(0)
        ax.errorbar(g["ratio"], ys[idx], xerr=[lo, hi], fmt="o", ms=4, capsize=2,
                    color=colour.get(verdict_, "#0969da"), label=verdict_)
    ax.axvline(1.0, ls="--", color="black", lw=0.8)
    ax.set_yticks(ys, [f"{r.op} · {r.variant} · {_short(r.problem)}" for r in t.itertuples()], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    _ratio_ticks(ax)
    ax.set_xlabel("new / base median (log; > 1 slower), 95% bootstrap interval")
    ax.set_title(f"compare: [{c.base}] -> [{c.new}]", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


#: ratios a log axis of new / base may label (a log axis within one decade labels only its power
#: of ten: notebook 01's comparison reached x1.66 with no label above 1)
_TICKS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0,
          7.5, 10.0)


def _ratio_ticks(ax, most: int = 9) -> None:
    """Label the x axis (a log axis of ratios) at round ratios within its limits, as plain numbers:
    1 always, and at most ``most`` of them, spread over the range (a range beyond the list keeps
    matplotlib's own log ticks)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    lo, hi = sorted(ax.get_xlim())
    ticks = [t for t in _TICKS if lo <= t <= hi]
    if lo < _TICKS[0] or hi > _TICKS[-1] or len(ticks) < 2:
        return
    while len(ticks) > most:  # thin out, keeping 1 and both ends
        keep = {0, len(ticks) - 1, ticks.index(1.0) if 1.0 in ticks else 0}
        ticks = [t for i, t in enumerate(ticks) if i in keep or i % 2 == 0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(lo, hi)


def _short(problem: str) -> str:
    return " ".join(p for p in str(problem).split() if not p.startswith(("eps=", "axis=", "momentum=", "alpha=")))


def cli(argv=None) -> int:
    """``perfkit compare [BASE NEW] [--results DIR] [--threshold F] [--fail-above F] [--out CSV]
    [--plot PNG] [--verdict-across-gpus]``; exit 1 when a pair is slower beyond ``--fail-above``.
    ``perfkit compare --static [--update] [--ops ...]``: the static guard (:mod:`perfkit.guard`)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="perfkit compare", description=__doc__.split("\n\n")[0],
                                 epilog="selectors: " + ", ".join(f"{k}=..." for k in _KEYS)
                                        + " (comma-separated; bare values recognised by form)")
    ap.add_argument("sides", nargs="*", metavar="BASE NEW", help="two selections (default: the two newest "
                                                                 "commits recorded on one GPU)")
    ap.add_argument("--results", default=None, help="records folder (default data/results)")
    ap.add_argument("--threshold", type=float, default=THRESHOLD, help=f"smallest change called a change "
                                                                       f"(default {THRESHOLD})")
    ap.add_argument("--fail-above", type=float, default=FAIL_ABOVE,
                    help=f"exit 1 when a pair is slower beyond noise by more than this (default {FAIL_ABOVE})")
    ap.add_argument("--verdict-across-gpus", action="store_true", help="rule on noise across two GPUs too")
    ap.add_argument("--out", default=None, help="write the pairs as CSV")
    ap.add_argument("--plot", default=None, help="write the ratio plot (PNG)")
    ap.add_argument("--static", action="store_true", help="no records: every rung's build and estimate against "
                                                          "data/static/baseline.csv (perfkit.guard)")
    ap.add_argument("--update", action="store_true", help="with --static: write the baseline (an intended change)")
    ap.add_argument("--ops", default="", help="with --static: comma-separated ops (default all)")
    args = ap.parse_args(argv)
    if args.static:
        from . import guard

        if args.sides:
            ap.error("--static compares today's rungs with the committed baseline: no BASE NEW")
        return guard.cli([o for o in args.ops.split(",") if o.strip()] or None, update=args.update)
    if args.update:
        ap.error("--update goes with --static")
    if len(args.sides) not in (0, 2):
        ap.error("give BASE and NEW, or neither")
    try:
        c = compare(*(args.sides or (None, None)), root=args.results, threshold=args.threshold,
                    fail_above=args.fail_above, verdict_across_gpus=args.verdict_across_gpus)
    except CompareError as exc:
        print(f"perfkit compare: {exc}", file=sys.stderr)
        return 2
    print(c)
    if args.out:
        c.table.to_csv(args.out, index=False)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        ax = plot(c)
        ax.figure.savefig(args.plot, dpi=120, bbox_inches="tight")
    return 1 if len(c.failed) else 0
