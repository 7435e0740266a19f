"""Recorded measurements matched to rungs (:data:`MATCH_RULE`): the records frame with today's
labels, the GPU a notebook shows, and the check that no card claims "no record" falsely."""
from __future__ import annotations

import functools
import re
import weakref

import numpy as np
import pandas as pd

from ..kernels import registry
from ..kernels.base import Problem, Variant
from .formatting import metric_for


MATCH_RULE = ("a record matches a rung when its op and variant name are the rung's and every problem "
              "parameter it carries equals the problem's (a parameter added to the problem since, at its "
              "default value, is ignored); the rung number is not used, since ladders are renumbered")


# --- recorded measurements, matched to rungs --------------------------------------------------
def ladder_for(op: str) -> list[Variant]:
    """The current ladder of an op (:mod:`perfkit.kernels.registry`); LookupError if it has none."""
    return registry.ladder(op)


@functools.lru_cache(maxsize=16)
def _load(op: str | None, root: str | None) -> pd.DataFrame:
    from .. import results

    return results.load(op=op, root=root, latest=False)


def records(op: str, ladder: list[Variant] | None = None, *, root=None, gpu: str | None = None,
            latest: bool = True, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Results recorded on real GPUs for ``op`` (``perfkit.results.load``), with ``label`` (the
    *current* ladder's label of the variant, matched by name: ``"08 double_buffer"``; peers
    ``"peer torch"``; a variant no longer in the ladder keeps its recorded number and says so),
    ``rate`` in the op's unit, and ``date``.  The newest record per (gpu, problem, variant) (with
    ``latest=False``, every record).  ``frame``: raw records to label instead of data/results/."""
    if frame is not None:
        return _records(op, ladder, root, gpu, latest, frame)
    return shared_records(op, ladder, root=root, gpu=gpu, latest=latest).copy()


def shared_records(op: str, ladder: list[Variant] | None = None, *, root=None, gpu: str | None = None,
                   latest: bool = True) -> pd.DataFrame:
    """:func:`records` of data/results/, one frame per arguments until :func:`reload`: a page of
    cards asks for the same records for every rung.  Read it, never change it."""
    try:
        ladder = ladder if ladder is not None else ladder_for(op)
    except LookupError:
        ladder = []
    sig = tuple((v.name, v.label, v.rung) for v in ladder)
    key = (op, sig, str(root) if root is not None else None, gpu, latest)
    hit = _SHARED.get(key)
    if hit is None:
        hit = _SHARED[key] = _records(op, ladder, root, gpu, latest, None)
    return hit


_SHARED: dict = {}


def runs_as_is(v: Variant, p: Problem) -> bool:
    """Does rung ``v`` run problem ``p`` as it is (not its twin), by its own ``supports``?"""
    from ..kernels.base import UnsupportedProblem

    if not hasattr(v, "example") or v.example(p).label != p.label:
        return False
    try:
        v.supports(p)
    except UnsupportedProblem:
        return False
    return True


def runs(v: Variant, p: Problem) -> bool:
    """Does rung ``v`` run problem ``p`` at all, by its own ``supports``, even where its example is
    another problem (conv's ``igemm_regblock`` is shown in NHWC but runs, and was recorded in, NCHW)?"""
    from ..kernels.base import UnsupportedProblem

    try:
        v.supports(p)
    except UnsupportedProblem:
        return False
    return True


def _records(op, ladder, root, gpu, latest, frame) -> pd.DataFrame:
    df = (_load(op, str(root) if root is not None else None) if frame is None else frame[frame["op"] == op]).copy()
    if df.empty:
        return df.assign(label=pd.Series(dtype=object), rate=pd.Series(dtype=float), date=pd.Series(dtype=object))
    if "simulated" in df:
        df = df[~df["simulated"].fillna(False).astype(bool)]
    if "commit" in df:  # a record with no commit (a copy with no .git) is NaN in pandas' string column:
        df["commit"] = df["commit"].fillna("")  # "" reads as no commit where `commit or ...` is asked
    if gpu is not None:
        g = gpu.lower()
        df = df[(df["gpu"].astype(str).str.lower() == g) | (df["gpu_slug"].astype(str).str.lower() == g)]
    if latest and not df.empty:
        df = df.sort_values("utc").drop_duplicates(["gpu", "problem", "variant"], keep="last")
    try:
        ladder = ladder if ladder is not None else ladder_for(op)
    except LookupError:
        ladder = []
    by_name = {v.name: v for v in ladder}

    def label(r):
        v = by_name.get(r["variant"])
        if v is not None:
            return v.label
        if int(r["rung"]) < 0:
            return f"peer {r['variant']}"
        return f"{int(r['rung']):02d} {r['variant']} (not in today's ladder)"

    df["label"] = df.apply(label, axis=1) if not df.empty else []
    df["rung_now"] = [by_name[n].rung if n in by_name else (r if r < 0 else np.nan)
                      for n, r in zip(df["variant"], df["rung"])]
    metric = metric_for(op)
    df["rate"] = df[metric] if metric in df else np.nan
    df["date"] = df["utc"].astype(str).str[:10]
    sort = [c for c in ("problem", "rung_now", "rung") if c in df]
    return df.sort_values(sort).reset_index(drop=True)


_PARAM_RE = re.compile(r"(\w+)=(\S+)")


def _same_value(a, b) -> bool:
    if str(a) == str(b):
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def label_params(label) -> dict[str, str]:
    """A problem label's parameters as text: ``"rows=4096 cols=1024 dtype=float32"`` ->
    ``{"rows": "4096", "cols": "1024", "dtype": "float32"}`` (a Problem: its label's)."""
    return dict(_PARAM_RE.findall(str(getattr(label, "label", label))))


def matches(problem: Problem | str | dict, record_label: str) -> bool:
    rec = label_params(record_label)
    if isinstance(problem, str):
        want = label_params(problem)
        defaults = {}
    elif isinstance(problem, dict):
        want, defaults = problem, {}
    else:
        want = problem.params
        import dataclasses

        defaults = {f.name: f.default for f in dataclasses.fields(problem)
                    if f.default is not dataclasses.MISSING}
    if not rec:
        return False
    for k, v in rec.items():
        if k not in want or not _same_value(want[k], v):
            return False
    for k, v in want.items():
        if k not in rec and not (k in defaults and _same_value(defaults[k], v)):
            return False
    return True


def match_rows(df: pd.DataFrame, problem, variant_name: str) -> pd.DataFrame:
    """The records in ``df`` of ``variant_name`` at ``problem`` (:data:`MATCH_RULE`), oldest first."""
    if df.empty:
        return df
    pos = _variant_positions(df).get(variant_name)
    if pos is None:
        return df.iloc[:0]
    labels = df["problem"].to_numpy()
    pos = pos[[_matches_cached(problem, labels[i]) for i in pos]]
    if "utc" in df and len(pos) > 1:  # oldest first, records with no time last (one take, not three)
        utc = pd.Series(df["utc"].to_numpy()[pos])
        pos = pos[utc.sort_values(na_position="last", kind="stable").index.to_numpy()]
    return df.iloc[pos]


def _variant_positions(df: pd.DataFrame) -> dict:
    """Each variant's row positions in ``df``: a card asks one table for many (rung, problem) pairs."""
    def make(d: pd.DataFrame) -> dict:
        groups: dict = {}
        for i, name in enumerate(d["variant"].tolist()):
            groups.setdefault(name, []).append(i)
        return {name: np.asarray(ix, dtype=np.intp) for name, ix in groups.items()}
    return derived(df, "variant positions", make)


def derived(df: pd.DataFrame, key, make):
    """``make(df)``, computed once per table and ``key`` (the rows of one op, of one GPU...) while
    the table lives: a card filters the same table the same ways for each rung it looks at."""
    slot = _DERIVED.get(id(df))
    if slot is None or slot[0]() is not df or slot[1] != len(df):
        k = id(df)
        slot = _DERIVED[k] = (weakref.ref(df, lambda _, k=k: _DERIVED.pop(k, None)), len(df), {})
    if key not in slot[2]:
        out = make(df)
        if out is df:  # nothing filtered: holding it here would keep the table alive
            return out
        slot[2][key] = out
    return slot[2][key]


_DERIVED: dict[int, tuple] = {}


def _matches_cached(problem, label) -> bool:
    try:
        return _matches_memo(problem, label)
    except TypeError:  # an unhashable problem (a dict)
        return matches(problem, label)


@functools.lru_cache(maxsize=65536)
def _matches_memo(problem, label) -> bool:
    return matches(problem, label)


def shown_gpu(want: str | None = None, ops=()) -> str | None:
    """The GPU whose records a notebook shows (its cards, tables, plots and ceilings are of one
    GPU): the recorded GPU ``want`` names (a name or slug, case-insensitive), else the GPU of the
    newest real record of ``ops`` among the GPUs devices.yaml knows (an unknown one has no
    ceilings to draw its records against), of any GPU where none is known; None when there is none."""
    frames = []
    for op in ops:
        df = _load(op, None)
        if not df.empty:
            frames.append(df[~df["simulated"].fillna(False).astype(bool)] if "simulated" in df else df)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if df.empty:
        return want
    if want:
        w = str(want).lower()
        hit = df[(df["gpu"].astype(str).str.lower() == w) | (df["gpu_slug"].astype(str).str.lower() == w)]
        if hit.empty:
            raise LookupError(f"no records of GPU {want!r}; recorded: {', '.join(sorted(set(df['gpu'])))}")
        return str(hit["gpu"].iloc[0])
    df = df.sort_values("utc")
    known = df[[_known(g) for g in df["gpu"]]]
    return str((known if not known.empty else df)["gpu"].iloc[-1])


@functools.lru_cache(maxsize=64)
def _known(gpu_name) -> bool:
    """Whether devices.yaml lists the GPU (:func:`spec_key` with no default)."""
    return bool(_spec_key(str(gpu_name), ""))


def recorded_gpus(ops=(), first: str | None = None) -> list[str]:
    """Every GPU with real records of ``ops``: ``first`` (the GPU a notebook shows) first, then by
    name (a where-we-stand table per dtype and GPU)."""
    names = set()
    for op in ops:
        df = _load(op, None)
        if not df.empty:
            df = df[~df["simulated"].fillna(False).astype(bool)] if "simulated" in df else df
            names |= set(df["gpu"].dropna().astype(str))
    return [g for g in [first] if g] + sorted(names - {first})


def spec_key(gpu_name: str | None, default: str = "h100-sxm") -> str:
    """devices.yaml key of a recorded GPU's name (``default`` when it is unknown or None)."""
    return _spec_key(gpu_name, default)


def _spec_key(gpu_name: str | None, default: str) -> str:
    from .. import specs

    for name in (gpu_name, default):
        if not name:
            continue
        try:
            return specs.get(name).key
        except Exception:
            continue
    return default


# --- a check for the notebooks: no "no record" where there is one ------------------------------
_NO_RECORD_RE = re.compile(r"no record of (\d+) (\w+) at ((?:\w+=[^\s<\"\\]+ ?)+?) on a real GPU")


def false_no_record_claims(text: str, *, root=None) -> list[str]:
    """Every "no record of <rung> at <problem> on a real GPU" in ``text`` (a rendered notebook,
    a card) for which a matching record exists (:data:`MATCH_RULE`): the claims that are false."""
    all_rows = _load(None, str(root) if root is not None else None)
    if all_rows.empty:
        return []
    if "simulated" in all_rows:
        all_rows = all_rows[~all_rows["simulated"].fillna(False).astype(bool)]
    bad = []
    for _, name, plabel in set(_NO_RECORD_RE.findall(text)):
        if not match_rows(all_rows, plabel.strip(), name).empty:
            bad.append(f"{name} at {plabel.strip()}")
    return sorted(bad)


def reload() -> None:
    """Forget the cached records (after a sweep recorded new ones)."""
    _load.cache_clear()
    _SHARED.clear()
