"""Which records exist, in words written from the records when the notebook runs: which GPU timed
a rung, where and when (:func:`recorded_where`), each GPU's recording runs (:func:`runs_sentence`),
what the copy kernel reached (:func:`copy_sentence`), and a comparison of two selections that says
why when one of them is not here (:func:`comparison`).

Prose that names records goes stale when records are added (or a copy holds fewer), so the
notebooks print these sentences instead of stating it in markdown.  Every sentence is read from
the same frame the cards read (:func:`perfkit.lesson.records`: real GPUs only, today's labels)."""
from __future__ import annotations

import pandas as pd

from .formatting import plural
from .matching import label_params, match_rows, records

#: problem parameters a sentence leaves out (defaults no record varies)
_QUIET = ("eps", "axis", "momentum", "alpha")


def problem_words(label, among=None) -> str:
    """A problem as prose: ``4096 x 1024 float32`` (rows x cols), ``4096³ float16`` (GEMM m = n = k),
    ``8192 x 1024 x 4096 float32`` (m x n x k), else its parameters without the quiet ones, with
    dtype and layout last.  ``among``: problems it is told apart from (labels); of a problem named
    by its parameters, only those that differ among them are said (``float16 NHWC``)."""
    label = getattr(label, "label", label)
    p = label_params(label)
    if among is not None and not ("cols" in p or ({"m", "n", "k"} <= set(p) and "c" not in p)):
        others = [label_params(o) for o in among]
        p = {k: v for k, v in p.items() if any(o.get(k) != v for o in others)} or p
    tail = " ".join(p[k] for k in ("dtype", "layout") if k in p)
    if "cols" in p:
        head = f"{p.get('rows', '?')} x {p['cols']}"
    elif {"m", "n", "k"} <= set(p) and "c" not in p:
        head = f"{p['m']}³" if p["m"] == p["n"] == p["k"] else f"{p['m']} x {p['n']} x {p['k']}"
    else:
        head = " ".join(f"{k}={v}" for k, v in p.items() if k not in (*_QUIET, "dtype", "layout"))
    return f"{head} {tail}".strip() or str(label)


def _join(items) -> str:
    items = [str(x) for x in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _names(variants) -> str:
    """Rungs named for printed text (a code span's backticks would show as they are)."""
    variants = list(variants)
    return ("the rung " if len(variants) == 1 else "the rungs ") + _join(variants)


def _run(row) -> str:
    """``(2026-11-27, commit 6ba0514)`` of a record."""
    commit = str(row.get("commit") or "")[:7] or "?"
    return f"({str(row.get('utc', ''))[:10]}, commit {commit})"


def _problems(df: pd.DataFrame, limit: int = 4) -> str:
    """The distinct problems of ``df`` in words: "at P only", "at P and Q", "at 9 problems (P, Q, ...)"."""
    words = list(dict.fromkeys(problem_words(p) for p in df.sort_values("problem")["problem"]))
    if len(words) == 1:
        return f"at {words[0]} only"
    if len(words) <= limit:
        return f"at {_join(words)}"
    return f"at {len(words)} problems ({', '.join(words[:limit])}, ...)"


def _real(op: str, gpu: str | None, frame: pd.DataFrame | None) -> pd.DataFrame:
    df = records(op, gpu=gpu, latest=False, frame=frame)
    return df.sort_values("utc", kind="stable") if not df.empty else df


def recorded_where(op: str, variants, *, at=None, gpu: str | None = None,
                   frame: pd.DataFrame | None = None) -> str:
    """Where and when the rungs ``variants`` (a name or names) of ``op`` were timed on real GPUs,
    in one sentence from the records: "No GPU has timed the rung packed yet." or "The rungs
    smem_row and persist were first recorded on A (date, commit), then on B (...), at 4096 x 4096
    float32 only."  ``at``: the problem a reader expects (a Problem or label); where none of them has a
    record there, the sentence says so first.  ``gpu``: one GPU's records (a notebook's pinned
    ``records_gpu``); ``frame``: raw records instead of data/results/."""
    vs = [variants] if isinstance(variants, str) else list(variants)
    df = _real(op, gpu, frame)
    df = df[df["variant"].isin(vs)] if not df.empty else df
    if df.empty:
        return f"{gpu} has not timed {_names(vs)} yet." if gpu else f"No GPU has timed {_names(vs)} yet."
    head = ""
    if at is not None and all(match_rows(df, at, v).empty for v in vs):
        there = f"{gpu} has not timed" if gpu else "No GPU has timed"
        head = f"{there} {_names(vs)} at {problem_words(at)} yet: "
    firsts = df.drop_duplicates("gpu", keep="first")
    done = [v for v in vs if v in set(df["variant"])]
    verb = "was" if len(done) == 1 else "were"
    where = [f"on {r['gpu']} {_run(r)}" for _, r in firsts.iterrows()]
    several = len(df.drop_duplicates(["gpu", "commit"])) > 1
    s = f"{_names(done)} {verb} {'first ' if several else ''}recorded {where[0]}" + "".join(f", then {w}" for w in where[1:])
    s = s if head else s[0].upper() + s[1:]  # a sentence's start; after the head's colon, as it is
    s += f", {_problems(df)}"
    newest = df.iloc[-1]
    if not ((firsts["gpu"] == newest["gpu"]) & (firsts["commit"] == newest["commit"])).any():
        s += f"; the newest record is {newest['gpu']}'s {_run(newest)}"
    missing = [v for v in vs if v not in done]
    if missing:
        s += f"; {_names(missing)} {'has' if len(missing) == 1 else 'have'} no record yet"
    return head + s + "."


def _rung_ranges(numbers) -> str:
    """``[1, 2, 3, 4, 11, 14]`` -> ``1-4, 11, 14``."""
    ns = sorted({int(n) for n in numbers})
    out, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out.append(f"{ns[i]}-{ns[j]}" if j > i else f"{ns[i]}")
        i = j + 1
    return ", ".join(out)


def recording_runs(ops, *, gpu: str | None = None, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per recording run (a GPU and a commit) of ``ops``, oldest first: ``gpu``,
    ``commit``, ``date`` (of its first record), ``ops``, ``rungs`` (today's rung numbers it
    timed, peers and the oracle left out), ``problems`` and ``records`` (how many)."""
    ops = [ops] if isinstance(ops, str) else list(ops)
    parts = [_real(op, gpu, frame) for op in ops]
    parts = [p for p in parts if not p.empty]
    cols = ["gpu", "commit", "date", "ops", "rungs", "problems", "records"]
    if not parts:
        return pd.DataFrame(columns=cols)
    df = pd.concat(parts, ignore_index=True).sort_values("utc", kind="stable")
    rows = []
    for (g, c), r in df.groupby(["gpu", "commit"], sort=False):
        mine = r[r["rung_now"] > 0] if "rung_now" in r else r.iloc[:0]
        rows.append({"gpu": g, "commit": str(c)[:7] or "?", "date": str(r["utc"].iloc[0])[:10],
                     "ops": list(dict.fromkeys(r["op"])), "rungs": sorted({int(x) for x in mine["rung_now"]}),
                     "problems": sorted(set(r["problem"])), "records": len(r)})
    return pd.DataFrame(rows, columns=cols)


def runs_sentence(ops, *, gpu: str | None = None, frame: pd.DataFrame | None = None) -> str:
    """Each GPU's recording runs of ``ops`` in words, from :func:`recording_runs`: for one op,
    today's rung numbers of each run ("NVIDIA H200: rungs 1-8 on 2026-11-26 (commit ed6ffd5),
    rungs 1-15 on 2026-11-27 (commit 6ba0514)") and the problems of them all; for several, each
    run's date, commit and number of records."""
    ops = [ops] if isinstance(ops, str) else list(ops)
    runs = recording_runs(ops, gpu=gpu, frame=frame)
    if runs.empty:
        return (f"{gpu} has not" if gpu else "No GPU has") + f" timed {_join(ops)} yet (data/results/ holds no record of it)."
    one = len(ops) == 1
    per_gpu = []
    for g, r in runs.groupby("gpu", sort=False):
        bits = []
        for _, x in r.iterrows():
            rungs = f"rungs {_rung_ranges(x['rungs'])}" if one and x["rungs"] else plural(x["records"], "record")
            bits.append(f"{rungs} on {x['date']} (commit {x['commit']})")
        per_gpu.append(f"On {g}: {_join(bits)}.")
    what = _join(dict.fromkeys(o for os_ in runs["ops"] for o in os_))
    s = f"Recorded on real GPUs ({what}), run by run. " + " ".join(per_gpu)
    if one:
        df = pd.DataFrame({"problem": sorted({p for ps in runs["problems"] for p in ps})})
        s += f" Every record is {_problems(df)}." if len(df) == 1 else f" The records are {_problems(df)}."
    return s


def copy_sentence(gpus=None, *, frame: pd.DataFrame | None = None) -> str:
    """What perfkit's copy kernel reached on each GPU, from its newest copy record there
    (:func:`perfkit.lesson.copy_ceiling`), as a share of the published bandwidth
    (``data/devices.yaml``): "perfkit's copy kernel reached 84% of the published 3.35 TB/s on
    NVIDIA H100 80GB HBM3 (2.82 TB/s, 2026-11-28, commit 516b940) ...".  ``gpus``: the GPUs to
    quote (default: every GPU with a copy record)."""
    from .. import specs
    from .bandwidth import copy_ceiling

    if frame is None:
        from .. import results

        frame = results.load(op="roofline", latest=False)
    if gpus is None:
        c = frame[frame["variant"] == "copy"] if not frame.empty and "variant" in frame else frame.iloc[:0]
        if "simulated" in c:
            c = c[~c["simulated"].fillna(False).astype(bool)]
        gpus = sorted(set(c["gpu"].dropna().astype(str))) if len(c) else []
    gpus = [gpus] if isinstance(gpus, str) else list(gpus)
    parts = []
    for g in gpus:
        c = copy_ceiling(g, frame=frame)
        if c is None:
            continue
        bw = float(c["gbps"]) * 1e9
        when = f"{str(c['utc'])[:10]}, commit {str(c.get('commit') or '')[:7] or '?'}"
        try:
            pub = specs.get(str(c["gpu"])).dram_bw
        except Exception:  # noqa: BLE001  (a GPU data/devices.yaml does not know: no share to quote)
            parts.append(f"{bw / 1e12:.2f} TB/s on {c['gpu']} ({when}; no published figure in data/devices.yaml)")
            continue
        parts.append(f"{bw / pub:.0%} of the published {pub / 1e12:.2f} TB/s on {c['gpu']} ({bw / 1e12:.2f} TB/s, {when})")
    if not parts:
        where = f" on {_join(gpus)}" if gpus else ""
        return f"No copy kernel has been timed on a real GPU{where} here (data/results/ holds no copy record)."
    return ("perfkit's copy kernel reached " + _join(parts)
            + (": the newest copy record of each GPU." if len(parts) > 1 else ": its newest copy record."))


def comparison(base: str, new: str, **kw):
    """:func:`perfkit.compare.compare` of two selections, or None, having printed why, where a side
    selects no record here (a copy of data/results/ without that GPU or that run)."""
    from .. import compare, paths

    try:
        return compare.compare(base, new, **kw)
    except compare.CompareError as exc:  # the folder as the repository names it, not this machine's path
        why = str(exc).replace(f"{paths.repo_root()}/", "")
        print(f"Nothing to compare [{base}] with [{new}]: {why}.")
        return None
