"""The parent: each unit in its own child process and process group, within its cap and the budget.

At a unit's limit the whole group is killed (the unit, pytest's workers, ``ncu`` and the profiled
program, bench's fault-recovery child) and the plan goes on; after a normal exit the group is
killed too, so nothing a unit started outlives it.  While a unit runs, its progress
(:mod:`perfkit.record.progress`) says which item it is on: an item past the stall limit is marked
hung, the group is killed, and a fresh child goes on with the items not yet measured, within what
is left of the unit's limit."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from perfkit import backend
from perfkit.record import ncu, orphan, progress, resume, units
from perfkit.record.ncu import EXIT_FAULT, package_parent
from perfkit.record.plan import Unit

#: seconds a unit needs at least to be worth starting
MIN_UNIT_S = 5.0
#: the summary's columns (summary.csv; status.json has the rows); ``hung``: a JSON list of the
#: unit's items that hung (what ``--resume-from`` skips)
SUMMARY_COLUMNS = ["unit", "part", "status", "seconds", "cap_s", "stages", "note", "hung", "commit", "gpu"]
#: the stall limit's default: an item running longer than max(STALL_MIN_S, cap * STALL_SHARE) is hung
STALL_MIN_S, STALL_SHARE = 15.0, 1 / 3
#: seconds between two looks at a running unit's progress
POLL_S = 0.25


class Budget:
    """Seconds of wall clock from ``t0`` (the process's start, before its imports)."""

    def __init__(self, seconds: float, t0: float | None = None):
        self.t0, self.seconds = time.monotonic() if t0 is None else t0, float(seconds)

    def used(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.seconds - self.used()


def kill_group(pgid: int, grace_s: float = 2.0) -> None:
    """SIGTERM to every process of the group, SIGKILL to what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if sig == signal.SIGTERM:
            t = time.monotonic()
            while time.monotonic() - t < grace_s:
                try:
                    os.killpg(pgid, 0)
                except (ProcessLookupError, PermissionError):
                    return
                time.sleep(0.05)


def run_child(cmd: list[str], env: dict, log_path: Path, timeout: float, on_start=None, watch=None) -> int | None:
    """Run ``cmd`` in a new session (its own process group); at ``timeout``, or as soon as
    ``watch()`` (asked every POLL_S) returns true, kill the group.
    Returns the exit code, or None when it was killed.  The group is killed after
    a normal exit too: nothing the unit started outlives it, nor this process's death
    (:mod:`perfkit.record.orphan`).  ``on_start(pid)`` is told the
    group's id as soon as it exists (a cluster worker notes it, so that a retry after the
    worker's death can kill what is left of it)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as f:
        f.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
        f.flush()
        env = {**env, orphan.PARENT_ENV: str(os.getpid())}  # the child dies with this process
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=package_parent(),
                                start_new_session=True)
        if on_start is not None:
            on_start(proc.pid)
        deadline = time.monotonic() + max(timeout, 0.1)
        rc = None
        try:
            while rc is None:
                try:
                    rc = proc.wait(timeout=max(min(POLL_S, deadline - time.monotonic()), 0.01))
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline or (watch is not None and watch()):
                        break
        finally:
            kill_group(proc.pid)
            proc.wait()
    return rc


def unit_env(commit: str | None, extra: dict | None = None) -> dict:
    """The child's environment: this process's backend, this perfkit first on its path."""
    env = {**os.environ, "PERFKIT_BACKEND": backend.name(), **(extra or {})}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(package_parent())] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if commit:
        env["PERFKIT_GIT_COMMIT"] = commit
    return env


def write_spec(out: Path, unit: Unit, todo: list, tiny: bool, commit, gpu, resume_dirs, attempt: int = 1,
               hang: dict | None = None, precompile: int | None = None, limit_s: float | None = None) -> Path:
    """The unit's spec for its child; ``attempt``: 1, then 2, ... for the children started again
    after a hung item; ``hang`` (a rehearsal): the item whose variant sleeps, and how long;
    ``precompile``: an ops unit's compiler workers (None: cores - 1; 0: none); ``limit_s``: the
    seconds this child has (its cap or what the budget has left, less what earlier children used)."""
    spec = out / "units" / f"{unit.name}.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({**dataclasses.asdict(unit), "items": todo, "tiny": tiny, "attempt": attempt,
                                "hang": hang, "commit": commit, "gpu": gpu, "resume": resume_dirs,
                                "precompile": precompile, "limit_s": limit_s},
                               indent=1, default=str))
    return spec


def run_spec(out: Path, spec: Path, limit: float, env: dict, on_start=None, watch=None) -> tuple[int | None, float, Path]:
    """One unit's child (``python -m perfkit.record --out OUT --unit SPEC``): (exit code or None
    when killed at ``limit`` or by ``watch``, seconds, its log)."""
    name = spec.stem
    cmd = [sys.executable, "-m", "perfkit.record", "--out", str(out), "--unit", str(spec)]
    t0 = time.monotonic()
    ulog = out / "logs" / f"{name}.log"
    rc = run_child(cmd, env, ulog, limit, on_start, watch)
    return rc, time.monotonic() - t0, ulog


def stall_limit(stall_s: float | None, cap: float) -> float | None:
    """Seconds an item may run before it counts as hung: ``stall_s`` (``--stall-s``; 0: no
    limit), else max(STALL_MIN_S, cap * STALL_SHARE)."""
    if stall_s is not None:
        return stall_s if stall_s > 0 else None
    return max(STALL_MIN_S, cap * STALL_SHARE)


def run_items(out: Path, unit: Unit, todo: list, limit: float, env: dict, spec_args: dict,
              stall: float | None, on_start=None) -> dict:
    """Run a unit's child on ``todo`` within ``limit`` seconds; when the item in flight passes the
    stall limit, kill the group, mark the item hung and start a child again on the items neither
    done nor hung, while the limit lasts.  Returns ``rc`` (None: killed at the limit), ``seconds``,
    ``log``, ``done`` (progress entries of the items ended), ``hung`` (the items, each with its
    ``seconds``) and ``in_flight`` (the item a unit killed at its limit was on, with its seconds)."""
    t0 = time.monotonic()
    done, hung, attempt, in_flight, phases = [], [], 0, None, {}
    while True:
        attempt += 1
        spec = write_spec(out, unit, todo, attempt=attempt, limit_s=round(limit - (time.monotonic() - t0), 1),
                          **spec_args)
        progress.path(out, unit.name).unlink(missing_ok=True)  # only this child's progress counts
        stalled: dict = {}

        def watch() -> bool:
            doc = progress.read(out, unit.name) or {}
            f = doc.get("in_flight")
            if stall and f and f.get("watch") and f.get("ident") and time.time() - f["since"] > stall:
                stalled.update(f, seconds=time.time() - f["since"])
                return True
            return False

        rc, _, ulog = run_spec(out, spec, limit - (time.monotonic() - t0), env, on_start, watch)
        doc = progress.read(out, unit.name) or {}
        done += doc.get("done", [])
        for name, v in (doc.get("phases") or {}).items():  # each child's own (its precompile), summed
            phases[name] = phases.get(name, 0.0) + v
        if not stalled:
            f = doc.get("in_flight") if rc is None else None
            in_flight = {**f, "seconds": time.time() - f["since"]} if f else None
            break
        item = next(i for i in todo if progress.ident(i) == stalled["ident"])
        hung.append({**item, "seconds": round(stalled["seconds"], 1)})
        ended = {d["ident"] for d in done} | {progress.ident(h) for h in hung}
        todo = [i for i in todo if progress.ident(i) not in ended]
        left = limit - (time.monotonic() - t0)
        with open(ulog, "a") as f:
            f.write(f"=== {progress.label(item)} hung: on it {stalled['seconds']:.0f} s, past the stall limit "
                    f"({stall:.0f} s); its group killed; {len(todo)} left to measure in {left:.0f} s of the unit's limit\n")
        if not todo or left < 1.0:
            rc = 0 if not todo else None
            break
    return {"rc": rc, "seconds": time.monotonic() - t0, "log": ulog, "done": done, "hung": hung,
            "in_flight": in_flight, "attempts": attempt, "stall_s": stall, "phases": phases}


def hung_note(hung: list[dict], stall: float | None) -> str:
    return "; ".join(f"{progress.label(h)} hung ({h['seconds']:.0f} s, past the stall limit of {stall:.0f} s; "
                     f"not recorded, the unit went on without it)" for h in hung)


def status_of(rc: int | None, ulog: Path) -> tuple[str, str]:
    tail = (ulog.read_text(errors="replace").strip().splitlines() or [""])[-1][:200] if ulog.exists() else ""
    if rc is None:
        return "timed out", ""
    if rc == 0:
        return "done", ""
    if rc == EXIT_FAULT:
        return "device fault", f"{tail} (rest of the unit ran in fresh processes; see {ulog})"
    return "failed", f"exit {rc}: {tail} (see {ulog})"


def skip_reason(args, unit: Unit, done: dict) -> tuple[str, list] | tuple[None, list]:
    """(why the unit is skipped, or None; the items it still has to measure)."""
    if unit.part == "tests" and args.tiny:
        return "the suite runs on a GPU here (make test runs it in the simulator)", []
    if unit.part == "ncu" and not args.tiny and not shutil.which("ncu"):
        return "no ncu on PATH", []
    if unit.part in ("tests", "tune") and unit.name in done["units"] and not args.force:  # no records to go by
        return "done for this commit (resume)", []
    if unit.part == "ceilings" and {"copy", "fma"} <= {k[2] for k in done["ceilings"]} and not args.force:
        return "both ceilings measured for this commit (resume)", []
    todo = resume.remaining(unit, done, getattr(args, "retry_hung", False)) if unit.items and not args.force \
        else unit.items
    if unit.items and not todo and not unit.extra:
        timed_hung = [i for i in unit.items if unit.part == "ncu" and resume.hung_kernel(i, done)]
        if timed_hung:
            return (f"not profiled: {', '.join(i['rung'] for i in timed_hung)} hung when timed"
                    + (f" ({len(unit.items) - len(timed_hung)} other(s) measured for this commit)"
                       if len(timed_hung) < len(unit.items) else "") + " (--retry-hung tries them)"), []
        hung = sum(resume.item_key(unit.part, i) in done.get("hung", {}).get(unit.part, set()) for i in unit.items)
        return (f"all {len(unit.items)} measured for this commit (resume)" if not hung else
                f"all {len(unit.items)} measured ({hung} of them hung) for this commit (resume; --retry-hung "
                f"tries the hung again)"), []
    return None, todo


def run_unit(args, unit: Unit, budget: Budget, done: dict) -> dict:
    """Run one unit; its summary row."""
    out = Path(args.out)
    row = {"unit": unit.name, "part": unit.part, "cap_s": unit.cap_s, "seconds": 0.0, "status": "", "note": "",
           "stages": "", "hung": ""}
    why, todo = skip_reason(args, unit, done)
    if why:
        return {**row, "status": "skipped", "note": why}
    left = budget.left()
    limit = left if unit.cap_s is None else min(unit.cap_s, left)
    if left < min(MIN_UNIT_S, unit.cap_s or MIN_UNIT_S) or limit < 1.0:
        return {**row, "status": "not started", "note": f"{left:.0f} s of the budget left"}
    hang = getattr(args, "hang", None)
    spec_args = dict(tiny=args.tiny, commit=args.commit_id, gpu=args.gpu, resume_dirs=args.resume_dirs,
                     hang={"variant": hang, "seconds": 600} if hang and args.tiny else None,
                     precompile=getattr(args, "precompile", None))
    stall = stall_limit(getattr(args, "stall_s", None), unit.cap_s if unit.cap_s is not None else limit)
    r = run_items(out, unit, todo, limit, unit_env(args.commit), spec_args, stall)
    rc, dt, ulog = r["rc"], r["seconds"], r["log"]
    status, note = status_of(rc, ulog)
    skipped = len(unit.items) - len(todo)
    before = done.get("hung", {}).get(unit.part, set())
    retry = args.force or getattr(args, "retry_hung", False)
    hung_before = 0 if retry else sum(resume.item_key(unit.part, i) in before for i in unit.items)
    counts = (f"{len(todo)} to measure, {skipped - hung_before} measured before"
              + (f", {hung_before} hung before (skipped; --retry-hung tries them)" if hung_before else "")
              if unit.items else "")
    if rc is None:
        why = "its cap" if unit.cap_s is not None and unit.cap_s <= left else "the budget"
        f = r["in_flight"]
        on = f" while on {f['label']} ({f['seconds']:.0f} s)" if f else ""
        note = f"killed with its children at {why} ({limit:.0f} s){on}; what it recorded is kept. {counts}"
    elif rc == 0:
        note = counts
    if r["hung"]:
        note = f"{hung_note(r['hung'], r['stall_s'])}. {note}"
    spent = progress.stages(r["done"], r.get("phases")) if unit.part == "ops" else {}
    if r["hung"]:
        spent["hung"] = round(sum(h["seconds"] for h in r["hung"]), 1)
    if rc is None and r["in_flight"]:
        spent["in flight"] = round(r["in_flight"]["seconds"], 1)
    hung = [{k: h[k] for k in ("op", "label", "variant", "rung", "seconds")} for h in r["hung"]]
    return {**row, "seconds": round(dt, 1), "status": status, "note": note, "stages": progress.stages_text(spent),
            "hung": json.dumps(hung) if hung else ""}


def summary_table(rows: list[dict]) -> str:
    lines = ["| unit | part | status | s | cap s | where the seconds went | note |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cap = "rest" if r["cap_s"] is None else f"{r['cap_s']:.0f}"
        lines.append(f"| {r['unit']} | {r['part']} | {r['status']} | {r['seconds']:.1f} | {cap} | "
                     f"{r.get('stages') or ''} | {r['note']} |")
    return "\n".join(lines)


def pack(out: Path, dest: Path) -> None:
    """``out`` as one gzipped tar (its top folder named ``record_gpu``), written to ``dest``."""
    import tarfile

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(out, arcname="record_gpu")
    print(f"packed {out} into {dest} ({dest.stat().st_size / 1e6:.1f} MB)", flush=True)


def finish(args, rows: list[dict], budget: Budget, log, expected=()) -> int:
    """Merged tables, ``summary.md`` and ``status.json``; the exit status (3: some left, 4: a
    device fault, 1: a failure, else 0)."""
    out = Path(args.out)
    if (out / "ncu").exists():
        ncu.merge_ncu(out, log)
    units.merge_sweeps(out, log)
    text = summary_table(rows)
    (out / "summary.md").write_text(f"# record_gpu --plan {args.plan} ({args.gpu}, commit {args.commit_id}, "
                                    f"{budget.used():.0f} s of {args.budget_s:.0f})\n\n{text}\n")
    left = [r["unit"] for r in rows if r["status"] in ("timed out", "not started") and r["unit"] not in expected]
    failed = [r["unit"] for r in rows if r["status"] == "failed"]
    faults = [r["unit"] for r in rows if r["status"] == "device fault"]
    hung = [{"unit": r["unit"], **h} for r in rows for h in json.loads(r.get("hung") or "[]")]
    (out / "status.json").write_text(json.dumps({"rows": rows, "left": left, "failed": failed, "faults": faults,
                                                 "hung": hung,
                                                 "budget_s": args.budget_s, "used_s": budget.used(),
                                                 "commit": args.commit_id, "gpu": args.gpu}, indent=1))
    log(text)
    log(f"used {budget.used():.0f} s of {args.budget_s:.0f}: {sum(r['status'] == 'done' for r in rows)} done, "
        f"{sum(r['status'] == 'skipped' for r in rows)} skipped, {len(left)} left {left}, {len(faults)} device "
        f"fault {faults}, {len(failed)} failed {failed}, {len(hung)} items hung "
        f"{[progress.label(h) for h in hung]}")
    if args.pack:
        pack(out, Path(args.pack))
    return 3 if left else (EXIT_FAULT if faults else (1 if failed else 0))
