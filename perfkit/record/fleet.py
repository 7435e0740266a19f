"""``perfkit record --cluster SPEC --kinds A,B``: the plan's units as Dask tasks, one per (unit, GPU kind).

On the worker a task runs its unit through the same child runner as a local session (its own
process group, its cap, the group killed after it) in a fresh folder, then returns what the unit
wrote: records, CSV rows, the log's tail and a status.  A timeout or a device fault is a status,
not a retry; the scheduler reruns a task once when its worker dies, and the rerun first kills
what is left of the dead worker's unit (its process group, noted on the host when it started).
An item past the stall limit is handled on the worker as in a local session
(:func:`perfkit.record.supervise.run_items`): marked hung, the unit going on without it.

The client writes each record as it arrives, atomically, under a content key (sweep, commit, GPU,
op, problem, variant): a repeated task never duplicates a record.  A (unit, kind) whose task
finished is marked done under ``OUT/fleet/``, so a second call runs only what is missing.  A kind
no worker advertises is reported at once, never left waiting.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from perfkit import cluster
from perfkit.record import supervise
from perfkit.record.plan import Unit

#: the files of a unit's folder that come back to the client (records come apart)
RETURNED = ("*.csv", "sweeps/*.csv", "ncu/*.csv", "progress/*.json", "*.pids")


def default_work_root() -> Path:
    return Path(tempfile.gettempdir()) / "perfkit-fleet"


def content_key(sweep: str, commit: str | None, gpu: str, doc: dict) -> str:
    """A record's name in the fleet's store: the same measurement task gives the same key."""
    ident = [sweep, commit or "", gpu, doc.get("op"), doc.get("problem"), doc.get("variant")]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_orphans(groups: Path) -> list[int]:
    """Kill the unit groups whose worker is gone (a worker killed mid-unit leaves its unit's
    child running, in its own group); the pgids killed."""
    killed = []
    for f in sorted(groups.glob("*.json")) if groups.exists() else []:
        try:
            note = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not _alive(note["owner"]):
            supervise.kill_group(note["pgid"])
            killed.append(note["pgid"])
            f.unlink(missing_ok=True)
    return killed


def run_task(spec: dict, kind: str, limit: float, commit: str | None, work_root: str, backend: str) -> dict:
    """On a worker: one unit through the child runner; what it wrote, as data."""
    root = Path(work_root)
    groups = root / "groups"
    groups.mkdir(parents=True, exist_ok=True)
    killed = kill_orphans(groups)
    out = root / kind / spec["name"] / uuid.uuid4().hex[:8]
    unit = Unit(**{k: spec[k] for k in ("name", "part", "cap_s", "what", "items", "extra")})
    extra = {"PERFKIT_BACKEND": backend}
    if os.environ.get(cluster.GPU_INDEX_ENV):  # pinned before the child starts: Numba reads it at start-up
        extra["CUDA_VISIBLE_DEVICES"] = os.environ[cluster.GPU_INDEX_ENV]
    note = groups / f"{spec['name']}-{kind}-{uuid.uuid4().hex[:8]}.json"

    def noted(pgid: int) -> None:
        note.write_text(json.dumps({"pgid": pgid, "owner": os.getpid()}))

    stall = supervise.stall_limit(spec.get("stall_s"), limit)
    r = supervise.run_items(out, unit, spec["items"], limit, supervise.unit_env(commit, extra),
                            dict(tiny=spec["tiny"], commit=commit, gpu=kind, resume_dirs=[]), stall, noted)
    rc, seconds, log = r["rc"], r["seconds"], r["log"]
    note.unlink(missing_ok=True)
    status, why = supervise.status_of(rc, log)
    if r["hung"]:  # a hung item is the unit's news, not a retry: its group was killed and the unit went on
        why = f"{supervise.hung_note(r['hung'], stall)}. {why}".strip()
    records = [{"path": str(p.relative_to(out)), "text": p.read_text()} for p in sorted((out / "results").glob("*/*/*.json"))]
    files = {str(p.relative_to(out)): p.read_text() for pat in RETURNED for p in sorted(out.glob(pat))}
    tail = log.read_text(errors="replace").strip().splitlines()[-20:] if log.exists() else []
    return {"unit": spec["name"], "kind": kind, "status": status, "note": why, "seconds": round(seconds, 1),
            "hung": r["hung"],
            "records": records, "files": files, "log": "\n".join(tail), "orphans_killed": killed,
            "worker_pid": os.getpid(), "folder": str(out)}


def write_atomic(path: Path, text: str, replace: bool = True) -> bool:
    """``text`` at ``path`` all at once; with ``replace=False`` an existing file is kept (False)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # fails rather than overwrite
            return True
        except FileExistsError:
            return False
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def store(out: Path, result: dict, sweep: str, commit: str | None) -> int:
    """The client's side of a finished task: its records under content keys (a repeat writes
    none), its files under ``OUT/fleet/<kind>/<unit>/``, then its done mark.  New records."""
    new = 0
    for rec in result["records"]:
        doc = json.loads(rec["text"])
        prov = doc.get("provenance") or {}
        gpu = prov.get("gpu_slug") or result["kind"]
        key = content_key(sweep, commit, gpu, doc)
        path = out / "results" / gpu / str(doc.get("op")) / f"r{doc.get('rung', 'x')}-{doc.get('variant')}-{key}.json"
        new += write_atomic(path, rec["text"], replace=False)
    folder = out / "fleet" / result["kind"] / result["unit"]
    for rel, text in result["files"].items():
        write_atomic(folder / rel, text)
    write_atomic(folder / "log.txt", result["log"] + "\n")
    if result["status"] == "done":
        mark = {k: result[k] for k in ("unit", "kind", "status", "seconds")}
        write_atomic(out / "fleet" / result["kind"] / f"{result['unit']}.done.json", json.dumps(mark))
    return new


def finished(out: Path, unit: str, kind: str) -> bool:
    return (out / "fleet" / kind / f"{unit}.done.json").exists()


def dashboard_note(client, stream=None) -> str:
    """"; dashboard LINK" where the output is a terminal (``stream``: standard output), whose reader
    can open the link while the cluster lives; elsewhere (an executed notebook's saved output, a
    file) nothing: the link dies with the run, and a dead link there is noise."""
    isatty = getattr(stream if stream is not None else sys.stdout, "isatty", None)
    try:
        shown = bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        shown = False
    return f"; dashboard {cluster.dashboard(client)}" if shown else ""


def run(args, units: list[Unit], kinds: list[str], work_root: str | None = None, on_submit=None) -> int:
    """Every unit once on every kind; the summary rows. ``on_submit(client, futures)`` (tests):
    called once the tasks are submitted."""
    out = Path(args.out)
    sweep = f"{args.plan}{'-rehearsal' if args.tiny else ''}"
    work = str(work_root or default_work_root())
    rows: list[dict] = []
    t0 = time.monotonic()
    if kinds and not args.force and all(finished(out, u.name, k) for u in units for k in kinds):
        rows = [{"unit": u.name, "part": u.part, "kind": k, "cap_s": u.cap_s, "seconds": 0.0, "status": "skipped",
                 "note": "done in an earlier call (resume)"} for k in kinds for u in units]
        return _finish(out, rows, kinds, args.cluster, t0)  # nothing to run: no cluster started
    with cluster.connect(args.cluster) as client:
        present = cluster.kinds_present(client)
        kinds = kinds or sorted(present) or [cluster.SIM_KIND]
        print(f"perfkit record --cluster {args.cluster}: kinds {kinds}; workers by kind {present}"
              f"{dashboard_note(client)}", flush=True)
        futures = {}
        for kind in kinds:
            for u in units:
                row = {"unit": u.name, "part": u.part, "kind": kind, "cap_s": u.cap_s, "seconds": 0.0, "note": ""}
                if kind not in present:
                    rows.append({**row, "status": "no worker", "note": f"no worker advertises {kind}; there are "
                                                                        f"{sorted(present) or 'none'}"})
                elif finished(out, u.name, kind) and not args.force:
                    rows.append({**row, "status": "skipped", "note": "done in an earlier call (resume)"})
                else:
                    spec = {**dataclasses.asdict(u), "tiny": args.tiny, "stall_s": getattr(args, "stall_s", None)}
                    limit = u.cap_s if u.cap_s is not None else args.budget_s
                    backend = "sim" if kind == cluster.SIM_KIND else "gpu"
                    fut = client.submit(run_task, spec, kind, limit, args.commit_id, work, backend,
                                        resources=cluster.gpu_resources(kind), pure=False,
                                        key=f"unit-{kind}-{u.name}-{uuid.uuid4().hex[:6]}")
                    futures[fut] = row
        for row in rows:
            print(f"[{row['unit']} @ {row['kind']}] {row['status']}  {row['note']}", flush=True)
        if on_submit is not None:
            on_submit(client, list(futures))
        dd = cluster.distributed()
        for fut in dd.as_completed(list(futures)):
            row = futures[fut]
            try:
                result = fut.result()
            except Exception as exc:  # noqa: BLE001  (the worker died twice: the task is lost)
                rows.append({**row, "status": "lost", "note": f"{exc.__class__.__name__}: {exc}"})
                continue
            new = store(out, result, sweep, args.commit_id)
            rows.append({**row, "status": result["status"], "seconds": result["seconds"],
                         "note": f"{new} new records of {len(result['records'])}. {result['note']}".strip()})
            print(f"[{row['unit']} @ {row['kind']}] {result['status']} in {result['seconds']:.0f} s, "
                  f"{new} new records", flush=True)
    return _finish(out, rows, kinds, args.cluster, t0)


def merge_tables(out: Path) -> None:
    """The tables the units sent back (``OUT/fleet/<kind>/<unit>/``) merged at the top of ``OUT``
    as a local session writes them: ``tune.csv`` and Nsight Compute's ``ncu_metrics_all_rungs.csv``,
    every kind's rows with its ``gpu`` column (``perfkit record import`` files them by GPU)."""
    from perfkit.record import ncu
    from perfkit.record.plan import TUNE_COLUMNS
    from perfkit.record.resume import read_rows, write_rows

    tune = read_rows(sorted(out.glob("fleet/*/*/tune.csv")))
    if tune:
        write_rows(out / "tune.csv", tune, TUNE_COLUMNS)
    rows = read_rows(sorted(out.glob("fleet/*/*/ncu/*.metrics.csv")))
    if rows:
        write_rows(out / "ncu_metrics_all_rungs.csv", rows, ncu.NCU_WRITTEN)


def _finish(out: Path, rows: list[dict], kinds: list[str], spec: str, t0: float) -> int:
    """The returned tables merged (:func:`merge_tables`), ``fleet_summary.csv`` and
    ``fleet_status.json``; the exit status (3: a unit left or a kind with no worker, 1: a failure)."""
    from perfkit.record import resume

    merge_tables(out)

    resume.write_rows(out / "fleet_summary.csv", rows, ["unit", "kind", "part", "status", "seconds", "cap_s", "note"])
    (out / "fleet_status.json").write_text(json.dumps({"rows": rows, "kinds": kinds, "cluster": spec,
                                                       "seconds": time.monotonic() - t0}, indent=1))
    bad = [r for r in rows if r["status"] not in ("done", "skipped")]
    return 0 if not bad else (3 if any(r["status"] in ("no worker", "timed out", "lost") for r in bad) else 1)
