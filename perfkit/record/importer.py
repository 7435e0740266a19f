"""Bring a device session's output into the repository, unchanged: ``perfkit record import RUN``
(``tools/import_gpu_run.py RUN``, its shim).

``RUN`` is the ``--out`` folder of ``perfkit record`` or the file its ``--pack`` wrote. Copies

* the records, ``results/<gpu>/<op>/*.json`` -> ``data/results/<gpu>/<op>/`` (a record already
  there is left alone; one of the same name with other content stops the import);
* the Nsight Compute table -> ``data/ncu/<gpu key>-<date>.csv``, the timer check ->
  ``data/timer/<gpu key>-<date>.csv``, the tune table -> ``data/tuning/<gpu key>-<date>.csv`` (a
  fleet's table, whose ``gpu`` column names several GPUs, a file for each; a second run's table of
  the same day ``<gpu key>-<date>b.csv``, named to sort after the first), each with a provenance ``.json`` beside it written from the
  records' own provenance (GPU, driver, CUDA, packages, commit, date);
* ``summary.md`` -> ``docs/device-runs/<date>-<gpu key>-summary.md``.

A rehearsal (simulated records) is refused: nothing simulated ever enters ``data/``.  A run
with no records (``--parts tune``, ``--parts ncu``) brings its tables, dated and attributed by its plan and log.
Exit status 0 on success, 2 on bad input (nothing written).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from perfkit import paths


class ImportRefused(Exception):
    pass


#: the tables a run may write beside its records (a run of ``--parts ncu`` or ``tune`` writes one alone)
TABLES = ("ncu_metrics_all_rungs.csv", "measure_vs_do_bench.csv", "tune.csv")


def find_run(path: Path, scratch: Path) -> Path:
    """The folder holding ``results/`` (and ``summary.md``) inside a folder or a packed file."""
    if path.is_file():
        with tarfile.open(path) as tar:
            tar.extractall(scratch, filter="data")
        path = scratch
    hits = sorted(p.parent for p in path.rglob("results") if p.is_dir() and p.parent.joinpath("plan.json").exists())
    if not hits:
        hits = sorted(p.parent for p in path.rglob("results") if p.is_dir())
    if not hits:  # a run that records nothing (--parts tune, --parts ncu): its plan and its tables
        hits = sorted(p.parent for p in path.rglob("plan.json") if any(p.parent.joinpath(t).exists() for t in TABLES))
    if not hits:
        raise ImportRefused(f"{path}: no results/ folder (is this a record_gpu --out?)")
    return hits[0]


def _run_provenance(run: Path) -> dict:
    """A run with no records (``--parts tune`` or ``ncu``): the GPU and commit its plan names, the date its
    log began (the records' own provenance is richer: used wherever there are records)."""
    import datetime

    doc = json.loads((run / "plan.json").read_text())
    log = run / "record_gpu.log"
    head = log.read_text(errors="replace").splitlines()[:5] if log.exists() else []
    try:
        date = datetime.date.fromisoformat(head[0][:10] if head else "").isoformat()
    except ValueError:
        date = datetime.datetime.fromtimestamp((run / "plan.json").stat().st_mtime, datetime.timezone.utc).date().isoformat()
    prov = {"gpu": doc.get("gpu"), "utc": date, "git_commit": doc.get("commit")}
    for line in head:
        if line.startswith("{"):  # the log's second line: the device as the backend saw it
            try:
                dev = json.loads(line)
            except ValueError:
                continue
            prov.update(driver_version=dev.get("driver_version"), runtime_version=dev.get("runtime_version"))
            break
    return prov


def _records(run: Path) -> list[Path]:
    return sorted((run / "results").glob("*/*/*.json"))


def plan(run: Path, data: Path, docs: Path) -> list[tuple[Path, Path | str]]:
    """(destination, source file or text) pairs; raises ImportRefused before anything is written."""
    from perfkit import specs

    if (run / "REHEARSAL.txt").exists():
        raise ImportRefused(f"{run} is a rehearsal: its records are simulated")
    recs = _records(run)
    if not recs and not any((run / t).exists() for t in TABLES):
        raise ImportRefused(f"{run}/results: no records and no table")
    first = None if recs else _run_provenance(run)
    if (run / "tune.csv").exists():
        import csv

        with open(run / "tune.csv") as f:
            if any(str(r.get("simulated")).lower() == "true" for r in csv.DictReader(f)):
                raise ImportRefused(f"{run}/tune.csv: simulated rows")
    todo: list[tuple[Path, Path | str]] = []
    by_gpu: dict = {}  # each GPU's first record's provenance (a fleet's run holds several GPUs)
    for f in recs:
        d = json.loads(f.read_text())
        prov = d.get("provenance") or {}
        if d.get("simulated") or prov.get("simulated"):
            raise ImportRefused(f"{f}: a simulated record")
        first = first or prov
        by_gpu.setdefault(prov.get("gpu") or (prov.get("device") or {}).get("name"), prov)
        dest = data / "results" / f.relative_to(run / "results")
        if dest.exists():
            if not filecmp.cmp(dest, f, shallow=False):
                raise ImportRefused(f"{dest} exists with other content")
            continue
        todo.append((dest, f))
    gpu = first.get("gpu") or (first.get("device") or {}).get("name")
    try:
        key = specs.get(gpu).key
    except specs.SpecError as exc:  # a plan with no GPU, or one devices.yaml does not list
        raise ImportRefused(f"{run}: the run's GPU {gpu!r} is not one data/devices.yaml knows ({exc})") from exc
    date = str(first.get("utc", ""))[:10]

    def meta(prov: dict, name: str) -> dict:
        pk = prov.get("packages") or {}
        return {"gpu": name, "gpu_slug": prov.get("gpu_slug"), "date": str(prov.get("utc", date))[:10] or date,
                "commit": prov.get("git_commit"), "cuda_driver": prov.get("driver_version"),
                "cuda_runtime": prov.get("runtime_version"), "packages": {k: pk[k] for k in sorted(pk)}}

    base = meta(first, gpu)
    source = f"perfkit record output ({run.name}), copied unchanged by perfkit record import"
    tables = [("ncu_metrics_all_rungs.csv", "ncu",
               "Nsight Compute (--clock-control none: clocks not locked, column sm_clock_hz), one launch of "
               "each rung the plan chose at its example problem; one row per kernel launch; where ncu gave them, "
               "stall_<reason>: warps stalled for that reason per issue cycle (smsp__average_warps_issue_stalled_"
               "<reason>_per_issue_active.ratio)."),
              ("measure_vs_do_bench.csv", "timer",
               "perfkit.timing.measure against triton.testing.do_bench (cold L2) on the same prepared rungs "
               "at their example problems, an empty kernel, the hot/cold copy. Seconds."),
              ("tune.csv", "tuning",
               "perfkit record --parts tune: a GEMM rung's configurations, each compiled and estimated by "
               "perfkit.model for this GPU before any was timed (model_us, model_rank), then checked and timed "
               "(median_us) against the oracle (x_oracle); rejected ones with the reason. Not records.")]
    for name, folder, what in tables:
        src = run / name
        if not src.exists():
            continue
        parts = _split_by_gpu(src)  # one GPU (a local session): the file itself
        for g in (g for g, _ in parts if g is not None):
            try:
                specs.get(g)
            except specs.SpecError:
                raise ImportRefused(f"{src}: its gpu column names {g!r}, which data/devices.yaml does not know")
        for g, content in parts:
            if g is None or specs.get(g).key == key:
                m = base
            else:
                prov = _provenance_of(by_gpu, g)
                m = meta(prov, prov.get("gpu") or g)
            stem, n = f"{specs.get(m['gpu']).key}-{m['date']}", 0
            dest = data / folder / f"{stem}.csv"
            # a second run the same day (say a short --parts ncu call after the window) gets its own
            # table beside the first, <stem>b.csv (then c, ...: a later table's name sorts after the
            # earlier's, as the dates do); the same run imported again finds its own, changes nothing
            while dest.exists() and not (filecmp.cmp(dest, content, shallow=False) if isinstance(content, Path)
                                         else dest.read_text() == content):
                n += 1
                if n > 25:
                    raise ImportRefused(f"{data / folder}: 26 tables of {stem} already, each with other content")
                dest = data / folder / f"{stem}{chr(ord('a') + n)}.csv"
            todo.append((dest, content))
            todo.append((dest.with_suffix(".json"),
                         json.dumps({"table": dest.name, **m, "what": what, "source": source}, indent=1) + "\n"))
    if (run / "summary.md").exists():
        dest = docs / f"{date}-{key}-summary.md"
        n = 2  # a second run the same day gets its own file: a summary is a record too
        while dest.exists() and not filecmp.cmp(dest, run / "summary.md", shallow=False):
            dest, n = docs / f"{date}-{key}-{n}-summary.md", n + 1
        todo.append((dest, run / "summary.md"))
    return todo


def _split_by_gpu(src: Path) -> list[tuple[str | None, Path | str]]:
    """A table's rows by its ``gpu`` column: [(None, the file)] where it names one GPU or none (a
    local session's table, copied unchanged), else [(gpu, its rows as CSV text)] (a fleet's run)."""
    import csv
    import io

    with open(src, newline="") as f:
        reader = csv.DictReader(f)
        rows, fields = list(reader), reader.fieldnames or []
    gpus = list(dict.fromkeys(r.get("gpu") for r in rows)) if "gpu" in fields else []
    if len(gpus) <= 1:
        return [(None, src)]
    out = []
    for g in gpus:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(r for r in rows if r.get("gpu") == g)
        out.append((g, buf.getvalue()))
    return out


def _provenance_of(by_gpu: dict, gpu: str) -> dict:
    """The records' provenance of ``gpu`` (a table's ``gpu`` may be a device name or a devices.yaml
    key: a fleet's units name their kind); a bare one where no record of it came."""
    from perfkit import specs

    want = specs.get(gpu).key
    for name, prov in by_gpu.items():
        if name and specs.get(name).key == want:
            return {**prov, "gpu": name}
    return {}


def main(argv=None, prog: str = "perfkit record import") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="record_gpu's --out folder, or the file its --pack wrote")
    ap.add_argument("--data", default=str(paths.DATA), help="data folder (default the repository's)")
    ap.add_argument("--docs", default=str(paths.repo_root() / "docs" / "device-runs"), help="where the run's summary goes")
    ap.add_argument("--dry-run", action="store_true", help="say what would be copied")
    args = ap.parse_args(argv)
    src = Path(args.run)
    if not src.exists():
        print(f"import_gpu_run: no such file or folder {src}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        try:
            run = find_run(src, Path(tmp))
            todo = plan(run, Path(args.data), Path(args.docs))
        except (ImportRefused, tarfile.TarError) as exc:
            print(f"import_gpu_run: {exc}; nothing copied", file=sys.stderr)
            return 2
        n_rec = 0
        for dest, what in todo:
            if args.dry_run:
                print(f"would write {dest}")
                continue
            if dest.suffix == ".csv" and dest.stem[-1].isalpha() and dest.stem[-2].isdigit():
                print(f"a table of that day was there already, with other content: this run's goes beside it, "
                      f"{dest.name}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(what, Path):
                shutil.copyfile(what, dest)
            else:
                dest.write_text(what)
            n_rec += dest.suffix == ".json" and "results" in dest.parts
        print(f"{'would copy' if args.dry_run else 'copied'} {len(todo)} files ({n_rec} records) from {run}")
    return 0
