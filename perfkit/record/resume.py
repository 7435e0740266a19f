"""Resume: what is measured already for this commit on this GPU, and the run's CSV files.

A (part, op, problem, rung) measured for the commit on the GPU (records in ``data/results/``,
``OUT/results/`` or a ``--resume-from`` folder; the ceilings', timer's, ncu's and summary's CSVs
there) is not measured again; an item that hung there (``summary.csv``'s ``hung``) is not tried
again unless asked (``--retry-hung``, ``--force``)."""
from __future__ import annotations

import csv
import json
from pathlib import Path


def current_commit() -> str | None:
    from perfkit import results

    return results.git_commit()


def record_root(out: Path) -> Path:
    """Where a run's records go: ``OUT/results/<gpu>/<op>/`` (the layout of ``data/results/``)."""
    return Path(out) / "results"


def results_roots(out: Path, resume: list[Path]) -> list[Path]:
    from perfkit import results

    roots = [results.RESULTS_DIR, record_root(out)]
    for d in resume:
        roots.append(d / "results" if (d / "results").is_dir() else d)
    return roots


def read_rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        if p.exists():
            with open(p) as f:
                rows += list(csv.DictReader(f))
    return rows


def append_rows(path: Path, rows: list[dict]) -> None:
    """Rows added to a CSV (its columns the union): a unit writes row by row, so a kill keeps them."""
    if not rows:
        return
    import pandas as pd

    df = pd.DataFrame(rows)
    if path.exists():
        df = pd.concat([pd.read_csv(path), df], ignore_index=True)
    df.to_csv(path, index=False)


def write_rows(path: Path, rows: list[dict], columns: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def measured(out: Path, resume: list[Path], gpu: str, commit: str | None) -> dict[str, set]:
    """Per part, the (op, problem label, rung or peer name) already measured on ``gpu`` for
    ``commit`` (with no commit known: only what this ``out`` holds)."""
    from perfkit import results

    out = Path(out)
    done = {"ops": set(), "ceilings": set(), "timer": set(), "ncu": set(), "units": set(), "hung": {}}
    for root in results_roots(out, resume):
        if not commit and root != record_root(out):
            continue
        df = results.load(root=root, latest=False)
        for r in df.itertuples():
            if r.gpu != gpu or (commit and getattr(r, "commit", None) != commit):
                continue
            done["ceilings" if r.op == "roofline" else "ops"].add((r.op, r.problem, r.variant))
    folders = [out] + list(resume) if commit else [out]
    for r in read_rows(f / "ceilings.csv" for f in folders):  # simulated ceilings are not records
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit:
            done["ceilings"].add(("roofline", "", r["ceiling"]))
    for r in read_rows(f / "measure_vs_do_bench.csv" for f in folders):
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit:
            done["timer"].add((r["op"], r["problem"], r["variant"]))
    ncu_csvs = [p for f in folders for p in [f / "ncu_metrics_all_rungs.csv", *sorted((f / "ncu").glob("*.metrics.csv"))]]
    for r in read_rows(ncu_csvs):
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit:
            done["ncu"].add((r["op"], r["problem"], r["rung"]))
    for r in read_rows(f / "summary.csv" for f in folders):
        if r.get("gpu") != gpu or (r.get("commit") or None) != commit:
            continue
        if r.get("status") == "done":
            done["units"].add(r["unit"])
        note_hung(done, r["part"], json.loads(r.get("hung") or "[]"))
    return done


def note_hung(done: dict, part: str, hung: list[dict]) -> None:
    """Items that hung are not tried again unless asked; a kernel that hung when timed is not
    profiled either (Nsight Compute replays it: on the H100 on 2026-11-28 an ncu unit spent the
    rest of the budget, 128 s, on the cluster rung that had hung in its ops unit)."""
    for h in hung:
        done["hung"].setdefault(part, set()).add(item_key(part, h))
        if part == "ops":  # by (op, rung), whatever problem: ncu profiles a rung at its own example
            done.setdefault("hung_kernels", set()).add((h["op"], h["rung"]))


def hung_kernel(item: dict, done: dict) -> bool:
    """An ncu item whose rung hung when timed (:func:`note_hung`)."""
    return (item["op"], item["rung"]) in done.get("hung_kernels", set())


def item_key(part: str, item: dict) -> tuple:
    """How ``measured`` names an item: ncu rows by rung label, records by variant name (the
    registry's op is the op its records name)."""
    return (item["op"], item["label"], item["rung"] if part == "ncu" else item["variant"])


def remaining(unit, done: dict, retry_hung: bool = False) -> list[dict]:
    """The unit's items neither measured nor (unless ``retry_hung``) hung in an earlier call."""
    have = done.get(unit.part, set()) | (set() if retry_hung else done.get("hung", {}).get(unit.part, set()))
    return [i for i in unit.items if item_key(unit.part, i) not in have
            and (retry_hung or unit.part != "ncu" or not hung_kernel(i, done))]
