"""``perfkit model validate``: every record against the estimate of the code it measured,
per level against the Nsight Compute table of its GPU, and the summary lines."""
from __future__ import annotations

from pathlib import Path

from .. import model as _pkg  # rates() and estimate() through the package, as tests monkeypatch them
from .. import paths
from ..kernels import registry
from .equations import Estimate, write_seconds
from .inputs import ncu_tables, spec_key


def _find_variant(op: str, rung: int, name: str, config: dict):
    from ..kernels import peers as _peers

    mod = registry.module(op)
    if rung < 0:
        cands = list(getattr(mod, "PEERS", []) or []) + list((getattr(_peers, "PEERS", {}) or {}).get(op, []))
        for v in cands:
            if v.name == name:
                return v, mod
        return None, mod
    for v in mod.LADDER:
        if v.name == name:
            try:
                return type(v)(**config) if config and list(config) == list(v.config) else v, mod
            except Exception:  # noqa: BLE001
                return v, mod
    return None, mod


def variant_as_recorded(v, mod, op, name, config, commit):
    """The rung as it was when the record was made: today's when its kernel code is unchanged
    since ``commit`` (:func:`perfkit.history.source_changed_since`), else the rung rebuilt from
    that commit (:func:`perfkit.history.variant_at`).  Returns (variant, module, code) with
    code ``"today"``, ``"at <commit>"``, or ``"today (changed since <commit>; <why>)"``."""
    from .. import history as _history

    changed = _history.source_changed_since(v, commit) if v is not None else True
    if changed is False:
        return v, mod, "today"
    old, old_mod = _history.variant_at(commit, op, name, config)
    if old is not None:
        return old, old_mod, f"at {commit[:7]}"
    why = _history.why_not(commit) or "rung not in that commit's ladder"
    return v, mod, f"today (changed since {commit[:7]}; {why})" if changed else "today"


#: the bound of a record left unestimated by a budget (``validate(budget_s=...)``)
NOT_ESTIMATED = "not estimated: past the budget, no stored estimate"


def validate(gpu: str = "h100-sxm", results_root=None, ncu_path=None, *, banks: bool = True,
             ops=None, problems=None, history: bool = True, budget_s: float | None = None):
    """Estimate every recorded (problem, rung) and compare.  Returns ``(table, line, levels)``:
    the per-record table, the summary line, and per-level counts against Nsight Compute.
    ``ops`` / ``problems``: keep only records of these ops / problem labels.

    A record is compared with the code it measured: where a rung's kernel code changed since
    the record's commit, the rung is rebuilt as it was then (:mod:`perfkit.history`; column
    ``code`` says ``at <commit>``).  ``history=False`` estimates today's kernels throughout.
    Only records made on ``gpu`` are compared (an H200 record is no test of an H100 estimate).
    The levels are checked against every Nsight Compute table of ``gpu`` (:func:`ncu_tables`),
    a rung's newest counts winning, each against the code at its table's commit; ``ncu_path``
    names one table instead.

    ``budget_s`` (a notebook's, where records of problems the static store has no estimate for
    would each take seconds to compile and estimate): past that many seconds, only estimates
    already kept are used, the other records are listed with ``bound`` :data:`NOT_ESTIMATED` and
    left out of the line, which says how many."""
    import glob
    import json
    import time

    from . import stored

    t0 = time.monotonic()

    def kept_only(v, p, ahead) -> bool:  # past the budget and nothing kept: not estimated here
        return budget_s is not None and time.monotonic() - t0 > budget_s \
            and stored.load(stored.key(v, p, gpu, r, banks, ahead), r) is None

    import numpy as np
    import pandas as pd

    root = Path(results_root or paths.DATA / "results")
    r = _pkg.rates(gpu)
    want = spec_key(gpu)
    if ncu_path is None:
        tables = ncu_tables(gpu)
    else:
        meta = Path(ncu_path).with_suffix(".json")
        tables = [(Path(ncu_path), json.loads(meta.read_text()).get("commit") if meta.is_file() else None)]
    rows = []
    cache = {}
    commits: set = set()
    for f in sorted(glob.glob(str(root / "**" / "*.json"), recursive=True)):
        d = json.loads(Path(f).read_text())
        if d.get("simulated"):
            continue
        prov = d.get("provenance") or {}
        if spec_key(prov.get("gpu") or (prov.get("device") or {}).get("name")) != want:
            continue
        op, rung, name = d["op"], int(d["rung"]), d.get("variant", "")
        if not registry.has(op):  # a ceiling record (op "roofline") is no rung
            continue
        if (ops and op not in ops) or (problems and d["problem"] not in problems):
            continue
        v, mod = _find_variant(op, rung, name, d.get("config") or {})
        commit = ((d.get("provenance") or {}).get("git_commit") or "")
        if commit and rung > 0:
            commits.add(commit)
        code = "today"
        if rung > 0 and commit and history:
            v, mod, code = variant_as_recorded(v, mod, op, name, d.get("config") or {}, commit)
        row = {"op": op, "problem": d["problem"], "rung": f"{rung:02d} {name}" if rung >= 0 else f"peer {name}",
               "measured_s": d["timing"]["median_s"], "kind": "oracle/peer" if rung <= 0 else "rung", "code": code,
               "_commit": commit}
        if v is None:
            row.update(predicted_s=np.nan, bound="rung not in ladder")
            rows.append(row)
            continue
        try:
            p = mod.Problem(**d["params"])
            ahead = record_ahead(d.get("timing") or {}, r)
            key = (op, code, json.dumps(d["params"], sort_keys=True), name, json.dumps(v.config, sort_keys=True, default=str),
                   round(ahead * 1e7) if ahead is not None else None)
            if key not in cache:
                if kept_only(v, p, ahead):
                    row.update(predicted_s=np.nan, bound=NOT_ESTIMATED)
                    rows.append(row)
                    continue
                cache[key] = _pkg.estimate(v, p, gpu, banks=banks, ahead_s=ahead)
            e = cache[key]
            row.update(predicted_s=e.seconds, bound=e.bound)
            row["_estimate"] = e
        except Exception as exc:  # noqa: BLE001
            row.update(predicted_s=np.nan, bound=f"error: {exc.__class__.__name__}: {str(exc)[:60]}")
        rows.append(row)
    cols = ["op", "problem", "rung", "code", "kind", "measured_s", "predicted_s", "bound"]
    table = pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols)  # no records: an empty table
    table["ratio"] = table["predicted_s"] / table["measured_s"]
    line = summary_line(table[table["kind"] == "rung"]["ratio"])
    skipped = int((table["bound"] == NOT_ESTIMATED).sum()) if len(table) else 0
    if skipped:
        line += (f"; {skipped} records not estimated within {budget_s:.0f} s (no stored estimate of their"
                 " problem: `perfkit model validate` estimates every one)")

    def unrecorded(op, label, rung_label, commit=None):
        """An Nsight Compute row no record of its commit has (saxpy, the NHWC batchnorm rows,
        a rung profiled at a commit it was not timed at): the rung as of ``commit``, the
        table's (else of the records' commit, where they share one), estimated at the row's
        problem."""
        num, _, name = str(rung_label).partition(" ")
        commit = commit or (next(iter(commits)) if len(commits) == 1 else None)
        if not commit or not num.isdigit() or int(num) <= 0 \
                or (ops and op not in ops) or (problems and label not in problems):
            return None
        try:  # an op perfkit has no ladder for, or a rung no commit has: left out
            v, mod = _find_variant(op, int(num), name, {})
            if history:
                v, mod, _ = variant_as_recorded(v, mod, op, name, {}, commit)
        except Exception:  # noqa: BLE001
            return None
        if v is None:
            return None
        kw = {}
        for tok in str(label).split():
            k, _, val = tok.partition("=")
            for cast in (int, float):
                try:
                    val = cast(val)
                    break
                except ValueError:
                    pass
            kw[k] = val
        try:
            p = mod.Problem(**kw)
            return None if kept_only(v, p, None) else _pkg.estimate(v, p, gpu, banks=banks)
        except Exception:  # noqa: BLE001  (a row the model cannot take: left out)
            return None

    levels = _levels(table, tables, unrecorded)
    return table, line, levels


def record_ahead(timing: dict, r) -> float | None:
    """Seconds of GPU work a record's timer queued ahead of each sample: its L2 flush
    (``flush_bytes`` at the effective DRAM rate) plus its spin kernel (``extra["spin_s"]``,
    timers from 2026-11-24 on); None where the record does not say (the default applies).
    ``r``: the GPU's rates (``model.rates``) or its key.  A card that shows a record estimates
    it with this, as ``validate`` does, so the two agree."""
    if "flush_bytes" not in timing or timing.get("flush_bytes") is None or timing.get("flush_bytes") != timing.get("flush_bytes"):
        return None
    if isinstance(r, str):
        r = _pkg.rates(r)
    spin = float((timing.get("extra") or {}).get("spin_s") or 0.0)
    spin = 0.0 if spin != spin else spin  # a frame's empty cell (NaN): no spin recorded
    return write_seconds(float(timing.get("flush_bytes") or 0), r) + spin


def repeat_line(table) -> str:
    """How far apart records of the same rung, problem and code are (the measurements' own
    spread, a floor under any model's error): ``repeated records: median spread X% over N
    pairs (max Y%)``, the spread of a pair being max/min - 1."""
    import numpy as np

    t = table[table["kind"] == "rung"]
    spreads = []
    for _, g in t.groupby(["op", "problem", "rung", "code"]):
        v = sorted(float(x) for x in g["measured_s"] if x == x and x > 0)
        if len(v) > 1:
            spreads.append(v[-1] / v[0] - 1)
    if not spreads:
        return "repeated records: none"
    return (f"repeated records: median spread {100 * np.median(spreads):.0f}% over {len(spreads)} pairs "
            f"(max {100 * max(spreads):.0f}%)")


def levels_line(levels) -> str:
    """``per-level within 25% of Nsight Compute: dram_bytes K/N, ...`` of the per-level table
    (model / ncu ratios; a level where both counts are zero agrees)."""
    parts = []
    for lvl, g in levels.groupby("level", sort=True):
        both0 = (g["ncu"] == 0) & (g["model"] == 0)
        ok = int((((g["ratio"] - 1).abs() <= 0.25) | both0).sum())
        parts.append(f"{lvl} {ok}/{len(g)}")
    return "per-level within 25% of Nsight Compute: " + ", ".join(parts)


def summary_line(ratios) -> str:
    """``median abs error X% over N; worst ratio Y; within 2x: K/N`` of predicted/measured
    ratios (NaN ratios, rungs the model could not estimate, are left out)."""
    import numpy as np

    r = np.asarray([x for x in ratios if x == x], dtype=float)
    n = len(r)
    if not n:
        return "median abs error nan% over 0; worst ratio nan; within 2x: 0/0"
    err = np.abs(r - 1)
    worst = r[int(np.argmax(np.abs(np.log(r))))]
    within = int(((r <= 2) & (r >= 0.5)).sum())
    return f"median abs error {100 * np.median(err):.0f}% over {n}; worst ratio {worst:.2f}; within 2x: {within}/{n}"


def _levels(table, tables=None, unrecorded=None):
    """Per-level counts of the estimates against the Nsight Compute tables (where one has the
    rung at the same problem): DRAM bytes, L2 bytes, shared wavefronts, warp instructions, FFMA.
    ``tables``: ``(path, commit)`` pairs, newest first; a rung's counts come from the newest
    table that has it, and are compared with a record's estimate only where that record
    measured the table's commit (its ``_commit`` column; any record where the table names
    none).  ``unrecorded(op, problem, rung, commit)``, where given, estimates the rest (column
    ``record`` False)."""
    import pandas as pd

    if isinstance(tables, (str, Path)):  # one table, as before
        tables = [(Path(tables), None)]
    parts = []
    for path, commit in tables or []:
        path = Path(path)
        if not path.exists():
            continue
        ncu = pd.read_csv(path)
        ncu["dram_bytes"] = ncu["dram_read_bytes"] + ncu["dram_write_bytes"]
        g = ncu.groupby(["op", "problem", "rung"], as_index=False, sort=False)[
            ["dram_bytes", "l2_bytes", "shared_wavefronts", "warp_instructions", "ffma_thread_instructions"]].sum()
        parts.append(g.assign(_commit=commit or ""))
    if not parts:
        return pd.DataFrame()
    agg = pd.concat(parts, ignore_index=True)
    # a rung renumbered since an older table ("09 warptile" then, "10 warptile" now) is one rung
    agg = agg.assign(_name=agg["rung"].astype(str).str.split(" ", n=1).str[-1])
    agg = agg.drop_duplicates(["op", "problem", "_name"], keep="first").drop(columns="_name")

    def same_commit(a, b):
        return not b or (bool(a) and (str(a).startswith(b) or str(b).startswith(str(a))))

    out = []
    seen = set()

    def add(op, problem, rung, e, m, record):
        est = {"dram_bytes": sum(p.get("dram_bytes_profiled", p["dram_bytes"]) for p in e.launches),
               "l2_bytes": sum(p.get("l2_tag_bytes", p["l2_bytes"]) for p in e.launches),
               "shared_wavefronts": sum(p["smem_wavefronts"] for p in e.launches),
               "warp_instructions": sum(p["warp_instructions"] for p in e.launches),
               "ffma_thread_instructions": sum(p["ffma"] for p in e.launches)}
        for lvl, val in est.items():
            meas = float(m[lvl])
            out.append({"op": op, "problem": problem, "rung": rung, "level": lvl, "ncu": meas, "model": val,
                        "ratio": val / meas if meas else float("nan"), "record": record})

    for _, row in table.iterrows():
        e = row.get("_estimate")
        if e is None or not isinstance(e, Estimate) or not e.launches:
            continue
        key = (row["op"], row["problem"], row["rung"])
        if key in seen:
            continue
        m = agg[(agg["op"] == row["op"]) & (agg["problem"] == row["problem"]) & (agg["rung"] == row["rung"])]
        library = row.get("kind") == "oracle/peer"  # cuBLAS, cuDNN, torch, Triton: no commit of ours changes them
        if m.empty or not (library or same_commit(row.get("_commit"), m.iloc[0]["_commit"])):
            continue
        seen.add(key)
        add(row["op"], row["problem"], row["rung"], e, m.iloc[0], True)
    if unrecorded is not None and len(table):
        for _, m in agg.iterrows():
            key = (m["op"], m["problem"], m["rung"])
            if key in seen:
                continue
            e = unrecorded(*key, m["_commit"] or None)
            if isinstance(e, Estimate) and e.launches:
                add(*key, e, m, False)
    return pd.DataFrame(out)


def levels_table(levels):
    """The per-level ratios as a table: a row per (op, rung, problem), a column per level;
    ``*`` marks a row of an Nsight Compute table no record of its commit has."""
    t = levels.assign(ratio=levels["ratio"].round(2),
                      problem=[("" if rec else "* ") + " ".join(w for w in str(p).split()
                                                                 if not w.startswith(("eps=", "momentum=", "axis=", "alpha=")))
                               for p, rec in zip(levels["problem"], levels.get("record", [True] * len(levels)))])
    return t.pivot_table(index=["op", "rung", "problem"], columns="level", values="ratio").round(2)


def validate_cli(argv=None) -> int:
    """``perfkit model validate [--gpu SLUG] [--no-banks] [--levels]``."""
    import argparse

    import pandas as pd

    ap = argparse.ArgumentParser(prog="perfkit model", description="the performance model")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="estimate every recorded rung and compare with the measurement")
    v.add_argument("--gpu", default="h100-sxm", help="devices.yaml key or alias (default h100-sxm)")
    v.add_argument("--results", default=None, help="records folder (default data/results)")
    v.add_argument("--ncu", default=None, help="one Nsight Compute table (default: every table of --gpu in data/ncu/, a rung's newest row)")
    v.add_argument("--no-banks", action="store_true", help="skip the bank-conflict simulation")
    v.add_argument("--today", action="store_true",
                   help="estimate today's kernels even where a rung's code changed since its record")
    args = ap.parse_args(argv)
    import sys

    from ..specs import SpecError

    if args.results is not None and not Path(args.results).is_dir():
        print(f"perfkit model validate: no records folder {args.results!r}", file=sys.stderr)
        return 2
    if args.ncu is not None and not Path(args.ncu).is_file():
        print(f"perfkit model validate: no Nsight Compute table {args.ncu!r}", file=sys.stderr)
        return 2
    try:
        table, line, levels = validate(args.gpu, args.results, args.ncu, banks=not args.no_banks,
                                       history=not args.today)
    except SpecError as exc:
        print(f"perfkit model validate: {exc}", file=sys.stderr)
        return 2
    if not len(table):
        print(f"perfkit model validate: no GPU records of {args.gpu} (JSON, not simulated) under "
              f"{args.results or 'data/results'}", file=sys.stderr)
        return 1
    show = table.drop(columns=[c for c in table.columns if c.startswith("_") or c == "kind"])
    show = show.assign(measured_us=(show.pop("measured_s") * 1e6).round(1),
                       predicted_us=(show.pop("predicted_s") * 1e6).round(1), ratio=show["ratio"].round(2))
    show = show[["op", "problem", "rung", "code", "measured_us", "predicted_us", "ratio", "bound"]]
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 48):
        print(show.to_string(index=False))
        if len(levels):
            print()
            print("per-level counts against Nsight Compute (model / ncu; * a row no record has):")
            print(levels_table(levels).to_string())
            print(levels_line(levels))
    print(repeat_line(table))
    print(line)
    return 0
