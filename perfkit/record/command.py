"""``perfkit record ...`` (and ``tools/record_gpu.py``, its shim): parse, plan, run the units, summarize."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from perfkit import backend
from perfkit.record import plan as plans
from perfkit.record import resume, supervise
from perfkit.record.plan import PARTS, PLANS, QUICK_BUDGET_S, SLEEP_CAP_S, PlanError, Unit


def parser(prog: str = "perfkit record") -> argparse.ArgumentParser:
    from perfkit import record

    ap = argparse.ArgumentParser(prog=prog, description=record.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", choices=PLANS, default="quick", help="quick (the default; a 15-minute lease) or full")
    ap.add_argument("--out", default=None, help="folder for everything written (default runs/record_gpu, "
                                                "runs/rehearsal with --rehearse)")
    ap.add_argument("--parts", default="", help=f"comma-separated, of {', '.join(PARTS)}, run in the order given")
    ap.add_argument("--ops", default="", help="comma-separated ops (perfkit.kernels.registry), run in the order "
                                              "given (default: all)")
    ap.add_argument("--problems", default="", help="comma-separated: label substrings, dtypes or GPU_SWEEP indices")
    ap.add_argument("--rungs", default="", help="comma-separated rung or peer names or rung numbers: only these "
                                                "(and the oracle)")
    ap.add_argument("--best", action="store_true", help="only the rungs a card calls best (the fastest recorded "
                                                        "on this GPU, the ladder's last) with the oracle and peers")
    ap.add_argument("--new", action="store_true", help="ops units: only the rungs and peers no record of this GPU "
                                                       "has at the problem (any commit), with the oracle")
    ap.add_argument("--budget-s", type=float, default=QUICK_BUDGET_S,
                    help=f"wall-clock budget in seconds from this process's start (default {QUICK_BUDGET_S:.0f})")
    ap.add_argument("--commit", default=None, help="the git commit of this working tree, where it has no .git")
    ap.add_argument("--resume-from", action="append", default=[], metavar="DIR",
                    help="an earlier call's --out (or a records folder): what it measured is not measured again")
    ap.add_argument("--rehearse", action="store_true", help="run the plan in the simulator at tiny shapes")
    ap.add_argument("--max-rungs", type=int, default=None, help="at most N rungs of each (part, op, problem)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    ap.add_argument("--force", action="store_true", help="measure again what is measured (or hung) for this commit")
    ap.add_argument("--stall-s", type=float, default=None, metavar="S",
                    help="an item (rung or peer) running longer than S seconds is hung: its unit's group is killed "
                         "and a fresh child goes on with the items left (default: max(15, the unit's cap / 3); "
                         "0: no limit)")
    ap.add_argument("--retry-hung", action="store_true",
                    help="with --resume-from: try again the items that hung there (the rest measured stays skipped)")
    ap.add_argument("--hang", default=None, metavar="NAME",
                    help="with --rehearse: the rung or peer NAME sleeps in every ops unit, to show the stall limit")
    ap.add_argument("--precompile", type=int, default=None, metavar="K",
                    help="ops units: compile the rungs in K worker processes before checking and timing them "
                         "(default: the cores less one, at most one a rung; 0: off, Numba compiles each rung at "
                         "its first launch; nothing to compile in the simulator)")
    ap.add_argument("--pack", default=None, metavar="FILE.tgz",
                    help="at the end, pack the whole --out folder into this one file (the device tool brings "
                         "back at most 8 files, 2 folders deep); unpack here with perfkit record import")
    ap.add_argument("--cluster", default=None, metavar="SPEC",
                    help="run the units as tasks on a Dask cluster (perfkit.cluster: local-sim:N, local-cuda, "
                         "tcp://HOST:PORT, scheduler-file:PATH, slurm:..., k8s:NAME); needs perfkit[cluster]")
    ap.add_argument("--kinds", default="", help="with --cluster: comma-separated GPU kinds (devices.yaml keys); "
                                                "each unit runs once on each")
    ap.add_argument("--unit", help=argparse.SUPPRESS)  # internal: one unit's spec, in a child
    return ap


def _split(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _rehearse_in_simulator(argv: list[str]) -> int:
    """``--rehearse`` where this process already chose a GPU: the same command in a fresh
    process that chooses the simulator before numba.cuda loads."""
    env = {**os.environ, "PERFKIT_BACKEND": "sim"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(supervise.package_parent())] +
                                        [p for p in [os.environ.get("PYTHONPATH")] if p])
    import subprocess

    return subprocess.call([sys.executable, "-m", "perfkit.record", *argv], env=env)


def main(argv: list[str] | None = None, t0: float | None = None, prog: str = "perfkit record") -> int:
    """The command; ``t0``: when the budget started (the caller's start, before its imports)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser(prog)
    args = ap.parse_args(argv)
    if args.commit:
        os.environ["PERFKIT_GIT_COMMIT"] = args.commit
    if args.unit:
        from perfkit.record import units

        return units.unit_main(args.unit, args.out)
    if args.rehearse and not backend.is_simulator():
        return _rehearse_in_simulator(argv)
    if not args.rehearse and backend.is_simulator() and not args.list and not args.cluster:
        ap.error("no GPU here: --rehearse runs the plan in the simulator at tiny shapes (--list shows it)")
    parts, ops, problems, rungs = _split(args.parts), _split(args.ops), _split(args.problems), _split(args.rungs)
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    if args.max_rungs is not None and args.max_rungs < 1:
        ap.error("--max-rungs must be >= 1")
    if args.hang and not args.rehearse:
        ap.error("--hang is a rehearsal's (--rehearse): a real rung hangs on its own")
    if args.stall_s is not None and args.stall_s < 0:
        ap.error("--stall-s must be >= 0 (0: no stall limit)")
    if args.precompile is not None and args.precompile < 0:
        ap.error("--precompile must be >= 0 (0: off)")
    if args.kinds and not args.cluster:
        ap.error("--kinds needs --cluster")
    if args.cluster and args.cluster.startswith("local-sim") and not args.rehearse:
        ap.error("--cluster local-sim runs the simulator: add --rehearse (tiny shapes)")
    resume_dirs = [Path(d).resolve() for d in args.resume_from]
    for d in resume_dirs:
        if not d.is_dir():
            ap.error(f"--resume-from {d}: no such folder")
    args.tiny = args.rehearse
    args.resume_dirs = [str(d) for d in resume_dirs]
    out = Path(args.out or ("runs/rehearsal" if args.rehearse else "runs/record_gpu")).resolve()
    args.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    budget = supervise.Budget(args.budget_s, t0)
    args.gpu = backend.device().name
    try:
        units = plans.make(args.plan, args.budget_s, args.tiny, parts or None)
        if rungs:
            plans.check_rungs(units, rungs)
        best = plans.best_rungs(args.gpu) if args.best else None
        new = plans.recorded_rungs(args.gpu) if args.new else None
        units = plans.select(units, parts or None, ops or None, problems or None, args.max_rungs, rungs or None, best,
                             new)
    except PlanError as exc:
        ap.error(str(exc))
    if args.rehearse and not (parts or ops or problems or rungs or args.best or args.new or args.cluster):
        units.insert(0, Unit("rehearsal-kill", "rehearsal", SLEEP_CAP_S,
                             "sleeps past its cap with a grandchild: both must be killed", extra={"sleep": 600}))
    table = plans.table(units, args.budget_s)
    args.commit_id = resume.current_commit()
    (out / "plan.json").write_text(json.dumps(
        {"plan": args.plan, "rehearse": args.rehearse, "budget_s": args.budget_s, "commit": args.commit_id,
         "gpu": args.gpu, "units": [dataclasses.asdict(u) for u in units]}, indent=1, default=str))
    if args.list:
        print(table)
        return 0
    if args.cluster:
        from perfkit.record import fleet

        return fleet.run(args, units, _split(args.kinds))
    logf = open(out / "record_gpu.log", "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} record_gpu --plan {args.plan}{' --rehearse' if args.rehearse else ''}: "
        f"{backend.describe()}; budget {args.budget_s:.0f} s ({budget.used():.1f} s used by start-up); "
        f"commit {args.commit_id}; out {out}")
    log(json.dumps(backend.device().as_dict(), default=str))
    log(table)
    if args.rehearse:
        (out / "REHEARSAL.txt").write_text("A rehearsal in the CUDA simulator: every record here is simulated. "
                                           "Never copy these into data/results.\n")
    done = resume.measured(out, resume_dirs, args.gpu, args.commit_id)
    rows = []
    for u in units:
        row = supervise.run_unit(args, u, budget, done)
        row.update(commit=args.commit_id, gpu=args.gpu)
        rows.append(row)
        resume.note_hung(done, u.part, json.loads(row.get("hung") or "[]"))
        log(f"[{u.name}] {row['status']} in {row['seconds']:.0f} s  {row['note']}"
            + (f"  ({row['stages']})" if row.get("stages") else ""))
        resume.write_rows(out / "summary.csv", rows, supervise.SUMMARY_COLUMNS)
    try:
        return supervise.finish(args, rows, budget, log, expected=["rehearsal-kill"] if args.rehearse else [])
    finally:
        logf.close()
