"""Record a GPU session's measurements through perfkit's own recorder, in one command.

A lent GPU machine is held for 30 minutes at most and released after a short idle, so the GPU
work comes as one full command that fits a wall-clock budget and can be run again to go on::

    python tools/record_gpu.py --out "$OUT" --budget-s 540 --commit <git hash of the checkout>

(the README's "Measuring on a lent GPU" gives the whole device call, with the notebook wheels).

Parts (``--parts``, comma-separated, default all, in this order):

* ``tests``    the test suite with ``PERFKIT_BACKEND=gpu`` (``-n auto`` where pytest-xdist is
  installed) into ``OUT/pytest_gpu.log`` and ``OUT/pytest_gpu.xml``;
* ``ceilings`` the roofline ceilings (copy bandwidth, FP32 FMA rate), recorded;
* ``timer``    ``timing.measure`` against ``triton.testing.do_bench`` on the prepared rungs of each
  op's example problem, an empty kernel and the hot/cold-L2 copy: ``OUT/measure_vs_do_bench.csv``;
* ``ops``      ``bench.sweep`` of every ladder (``--ops gemm,softmax,...``, default all) with its
  torch/Triton peers over the op's ``GPU_SWEEP`` problems, one problem at a time, every rung
  recorded: ``OUT/sweeps/sweep_<op>.csv``;
* ``ncu``      Nsight Compute over every rung (one launch each) of each op's example problem: a small
  driver script (written to ``OUT/ncu/ncu_driver.py``) runs under ``ncu --metrics ...``; the
  table ``OUT/ncu_metrics_all_rungs.csv`` has the columns of the first H100 run's table.

Every unit (one part, one op, one problem) runs in its own child process: a device fault or a
hang cannot take the rest with it, and a unit is stopped when the budget runs out.  Records go
through :func:`perfkit.results.record` under ``OUT/results/<gpu>/<op>/`` (the layout of
``data/results/``: copy them there to commit them); nothing is written outside ``OUT``.
Resumable: a (problem, rung) already recorded for this commit (in ``data/results`` or under
``OUT/results``) is not measured again, and finished parts leave a ``OUT/done/<unit>`` mark.

In the simulator it runs the same steps at tiny sizes (``SIM_SWEEP``), records nothing and
skips ``tests`` and ``ncu``: a dry run of the tool itself.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import perfkit  # noqa: E402,F401  (chooses the backend first)
from numba import cuda  # noqa: E402  (module level: the simulator swaps only a kernel's globals)
from perfkit import backend  # noqa: E402

PARTS = ("tests", "ceilings", "timer", "ops", "ncu")
#: seconds a unit needs at least to be worth starting
MIN_UNIT_S = 20.0

#: the first H100 run's Nsight Compute table: our column -> the ncu metric it comes from
NCU_COLUMNS = {
    "time_us": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_bytes": "lts__t_bytes.sum",
    "shared_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "shared_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "warp_instructions": "smsp__inst_executed.sum",
    "ffma_thread_instructions": "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "tensor_pipe_active_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "sm_clock_hz": "sm__cycles_elapsed.avg.per_second",
}
NCU_TABLE = ["op", "problem", "rung", "kernel", "time_us", "dram_read_bytes", "dram_write_bytes", "l2_bytes",
             "shared_wavefronts", "shared_bank_conflicts", "warp_instructions", "ffma_thread_instructions",
             "ffma_share_of_warp_instructions", "achieved_occupancy_pct", "issue_active_pct",
             "dram_throughput_pct", "tensor_pipe_active_pct", "registers_per_thread", "sm_clock_hz"]
NCU_MARKER = "perfkit_ncu_marker"


# --- what there is to run ------------------------------------------------------------------------
def ladders(only: list[str] | None = None):
    """(short name, module) of every op module with a LADDER, optionally only those named."""
    import perfkit.kernels as pk

    found = []
    for info in pkgutil.walk_packages(pk.__path__, "perfkit.kernels."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name.endswith(".base"):
            continue
        mod = importlib.import_module(info.name)
        short = info.name.removeprefix("perfkit.kernels.")
        if getattr(mod, "LADDER", None):
            found.append((short, mod))
    if only:
        unknown = [o for o in only if not any(o in (s, s.split(".")[-1], s.split(".")[0]) for s, _ in found)]
        if unknown:
            raise SystemExit(f"record_gpu: unknown op(s) {unknown}; there are {[s.split('.')[-1] for s, _ in found]}")
        found = [(s, m) for s, m in found if any(o in (s, s.split(".")[-1], s.split(".")[0]) for o in only)]
    return found


def problems_for(mod, tiny: bool):
    if tiny:
        return list(getattr(mod, "SIM_SWEEP", []))
    return list(getattr(mod, "GPU_SWEEP", [])) or [mod.EXAMPLE_PROBLEM]


def example_problem(mod, tiny: bool):
    if tiny:
        return (list(getattr(mod, "SIM_SWEEP", [])) or [None])[0]
    return getattr(mod, "EXAMPLE_PROBLEM", None) or problems_for(mod, False)[0]


def variants_for(mod, problem):
    from perfkit.kernels import peers

    return list(mod.LADDER) + peers.peers_for(problem.op)


# --- resumability -----------------------------------------------------------------------------------
def current_commit() -> str | None:
    from perfkit import results

    return results._static_provenance().get("git_commit")


def recorded_keys(out: Path) -> set[tuple]:
    """(gpu, op, problem, variant) of every record of this commit, in data/results and OUT/results."""
    from perfkit import results

    commit = current_commit()
    keys = set()
    for root in (results.RESULTS_DIR, out / "results"):
        df = results.load(root=root, latest=False)
        if df.empty:
            continue
        for r in df.itertuples():
            same_run = root == out / "results"
            if (commit and getattr(r, "commit", None) == commit) or (same_run and not commit):
                keys.add((r.gpu, r.op, r.problem, r.variant))
    return keys


# --- the parent: units in child processes, within the budget ---------------------------------------
class Budget:
    def __init__(self, seconds: float):
        self.t0, self.seconds = time.monotonic(), float(seconds)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.t0)


def run_unit(args, unit: list[str], budget: Budget, log, name: str) -> str:
    """Run ``record_gpu.py --unit ...`` in a child with what is left of the budget; its status."""
    out = Path(args.out)
    done = out / "done" / name
    if done.exists() and not args.force:
        log(f"[{name}] done before (remove {done} or pass --force to run again)")
        return "skipped"
    left = budget.left()
    if left < MIN_UNIT_S:
        log(f"[{name}] not started: {left:.0f} s of the budget left")
        return "left"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--unit", *unit]
    env = {**os.environ, "PERFKIT_BACKEND": backend.name()}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if args.commit:
        env["PERFKIT_GIT_COMMIT"] = args.commit
    t0 = time.monotonic()
    ulog = out / "logs" / f"{name}.log"
    ulog.parent.mkdir(parents=True, exist_ok=True)
    with open(ulog, "a") as f:
        f.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
        f.flush()
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=left)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = None
    dt = time.monotonic() - t0
    tail = ulog.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    if rc is None:
        log(f"[{name}] stopped at the budget after {dt:.0f} s (what it recorded is kept; run again to go on)")
        return "left"
    if rc == 0:
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {dt:.1f} s\n")
        log(f"[{name}] ok in {dt:.0f} s  {tail[0][:160]}")
        return "ok"
    log(f"[{name}] FAILED (exit {rc}) in {dt:.0f} s: {tail[0][:300]} (see {ulog})")
    return "failed"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/record_gpu", help="folder for everything written (logs, CSVs, records)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--ops", default="", help="comma-separated op modules for ops/timer/ncu (default: all)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget in seconds (default 540)")
    ap.add_argument("--commit", default=None, help="the git commit of this working tree, where it has no .git")
    ap.add_argument("--force", action="store_true", help="run units marked done again")
    ap.add_argument("--unit", nargs="+", help=argparse.SUPPRESS)  # internal: one unit, in a child
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    args.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    if args.commit:
        os.environ["PERFKIT_GIT_COMMIT"] = args.commit
    if args.unit:
        return unit_main(args)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    mods = ladders(ops or None)
    budget = Budget(args.budget_s)
    logf = open(out / "record_gpu.log", "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    tiny = backend.is_simulator()
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} record_gpu: {backend.describe()}; parts {parts}; "
        f"budget {args.budget_s:.0f} s; commit {current_commit()}; out {out}")
    log(json.dumps(backend.device().as_dict(), default=str))
    statuses: dict[str, str] = {}
    for part in PARTS:
        if part not in parts:
            continue
        if part == "tests":
            if tiny:
                log("[tests] skipped: the suite is run on a GPU here (make test runs it in the simulator)")
                continue
            statuses["tests"] = run_unit(args, ["tests"], budget, log, "tests")
        elif part == "ceilings":
            statuses["ceilings"] = run_unit(args, ["ceilings"], budget, log, "ceilings")
        elif part == "timer":
            statuses["timer"] = run_unit(args, ["timer", ",".join(s for s, _ in mods)], budget, log, "timer")
        elif part == "ops":
            for short, mod in mods:
                probs = problems_for(mod, tiny)
                if not probs:
                    log(f"[ops {short}] no problems to sweep here")
                for i, _ in enumerate(probs):
                    name = f"ops-{short}-{i}"
                    statuses[name] = run_unit(args, ["ops", short, str(i)], budget, log, name)
            merge_sweeps(out, log)
        elif part == "ncu":
            if tiny:
                log("[ncu] skipped: Nsight Compute needs a GPU")
                continue
            if not shutil.which("ncu"):
                log("[ncu] skipped: no ncu on PATH")
                statuses["ncu"] = "failed"
                continue
            for short, mod in mods:
                name = f"ncu-{short}"
                statuses[name] = run_unit(args, ["ncu", short], budget, log, name)
            merge_ncu(out, log)
    left = [k for k, v in statuses.items() if v == "left"]
    failed = [k for k, v in statuses.items() if v == "failed"]
    (out / "status.json").write_text(json.dumps({"statuses": statuses, "left": left, "failed": failed,
                                                 "budget_s": args.budget_s, "used_s": args.budget_s - budget.left(),
                                                 "commit": current_commit()}, indent=1))
    log(f"done: {sum(v == 'ok' for v in statuses.values())} ok, {sum(v == 'skipped' for v in statuses.values())} "
        f"done before, {len(failed)} failed {failed}, {len(left)} left for the next run {left}")
    logf.close()
    return 3 if left else (1 if failed else 0)


# --- the units (each in its own process) -----------------------------------------------------------------
def unit_main(args) -> int:
    kind, rest = args.unit[0], args.unit[1:]
    out = Path(args.out)
    tiny = backend.is_simulator()
    print(f"unit {kind} {rest}: {backend.describe()}", flush=True)
    if kind == "tests":
        return unit_tests(out)
    if kind == "ceilings":
        return unit_ceilings(out, tiny)
    if kind == "timer":
        return unit_timer(out, [o for o in rest[0].split(",") if o] if rest else None, tiny)
    if kind == "ops":
        return unit_ops(out, rest[0], int(rest[1]), tiny)
    if kind == "ncu":
        return unit_ncu(out, rest[0])
    if kind == "ncu-driver":  # under ncu: one launch of every rung, a marker kernel before each
        return ncu_driver(rest[0], Path(rest[1]))
    print(f"unknown unit {kind}", file=sys.stderr)
    return 2


def _record_root(out: Path) -> Path:
    return out / "results"


def unit_tests(out: Path) -> int:
    import importlib.util

    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
           f"--junitxml={out / 'pytest_gpu.xml'}", "tests"]
    if importlib.util.find_spec("xdist"):
        cmd[3:3] = ["-n", "auto"]
    env = {**os.environ, "PERFKIT_BACKEND": "gpu"}
    with open(out / "pytest_gpu.log", "w") as f:
        r = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
    last = (out / "pytest_gpu.log").read_text(errors="replace").strip().splitlines()[-1:]
    print(f"pytest exit {r.returncode}: {last[0] if last else ''}")
    return 0  # the log says how it went; a red suite is a result, not a tool failure


def unit_ceilings(out: Path, tiny: bool) -> int:
    from perfkit import roofline

    keys = recorded_keys(out)
    gpu = backend.device().name
    rows = []
    for variant, fn in (("copy", roofline.copy_bandwidth), ("fma", roofline.fp32_rate)):
        if any(k[0] == gpu and k[1] == "roofline" and k[3] == variant for k in keys):
            print(f"{variant}: recorded for this commit already")
            continue
        size = (64 << 10 if variant == "copy" else 2) if tiny else None
        r = fn(size, record=not tiny, results_root=_record_root(out))
        value, unit = ((r["bytes_per_s"] / 1e9, "GB/s") if variant == "copy" else (r["flops_per_s"] / 1e12, "TFLOP/s"))
        m = r["measurement"]
        rows.append({"ceiling": variant, "value": value, "unit": unit, "median_s": m.median_s, "n": m.n,
                     "spin_s": m.extra.get("spin_s"), "below_recorded": json.dumps(r["below_recorded"]),
                     "path": r["path"], "simulated": m.simulated})
        print(f"{variant}: {value:.2f} {unit}  {m}  -> {r['path']}")
    _append_csv(out / "ceilings.csv", rows)
    return 0


def unit_timer(out: Path, only: list[str] | None, tiny: bool) -> int:
    """measure() against do_bench on each op's example problem, plus the empty kernel and hot/cold."""
    import numpy as np

    from perfkit import timing

    try:
        from triton.testing import do_bench
    except Exception as exc:
        do_bench = None
        print(f"triton not available ({exc.__class__.__name__}); measure() alone")
    rows = []

    def compare(op, problem, label, fn, sync, l2="cold"):
        try:
            m = timing.measure(fn, sync=sync, l2=l2)
            db = do_bench(fn, warmup=25, rep=100, return_mode="median") / 1e3 if do_bench and not tiny else float("nan")
            row = {"op": op, "problem": problem, "variant": label, "l2": l2, "measure_s": m.median_s,
                   "n": m.n, "do_bench_s": db, "ratio": m.median_s / db if db == db else float("nan"),
                   "spin_s": m.extra.get("spin_s"), "host_enqueue_median_s":
                   float(np.median(m.extra["host_enqueue_s"])) if m.extra.get("host_enqueue_s") else None,
                   "simulated": m.simulated}
            rows.append(row)
            _append_csv(out / "measure_vs_do_bench.csv", [row])  # row by row: a budget stop keeps them
            print(f"  {op:10s} {label:22s} measure {m.median_s * 1e6:10.2f} us  do_bench {db * 1e6:10.2f} us")
        except Exception as exc:  # one rung failing must not stop the comparison
            print(f"  {op} {label}: {exc.__class__.__name__}: {exc}")
            from perfkit import bench

            if bench.is_device_fault(exc):
                raise

    for short, mod in ladders(only):
        p = example_problem(mod, tiny)
        if p is None:
            continue
        for v in variants_for(mod, p):
            try:
                v.supports(p)
                prep = v.prepare(p, p.make_inputs(0))
            except Exception as exc:
                print(f"  {short} {v.label}: not run ({exc.__class__.__name__}: {exc})")
                continue
            compare(p.op, p.label, v.label, prep, prep.synchronize)
    # the empty kernel and the hot/cold demo of notebook 01
    import warnings

    from perfkit import roofline

    bufs = [cuda.device_array(32, np.float32) for _ in range(4)]
    with warnings.catch_warnings():  # one block on purpose
        warnings.simplefilter("ignore")
        empty = empty_kernel[1, 32]
    compare("timer", "empty kernel, 4 array args", "empty", lambda: empty(*bufs), cuda.synchronize, "hot")
    l2 = backend.device().l2_bytes or (1 << 20)
    n = max(1024, l2 // 4 // 4)  # src + dst = half the L2
    src, dst = cuda.to_device(np.ones(n, np.float32)), cuda.device_array(n, np.float32)
    cp = roofline.copy_launcher(dst, src)
    for l2mode in ("hot", "cold"):
        compare("timer", f"copy n={n} (fits L2)", "copy16", cp, cuda.synchronize, l2mode)
    print(f"{len(rows)} comparisons in {out / 'measure_vs_do_bench.csv'}")
    return 0


def unit_ops(out: Path, short: str, index: int, tiny: bool) -> int:
    """Sweep one problem of one op over the rungs not yet recorded for this commit."""
    from perfkit import bench

    [(short, mod)] = ladders([short])
    p = problems_for(mod, tiny)[index]
    keys = recorded_keys(out)
    gpu = backend.device().name
    todo = [v for v in variants_for(mod, p) if (gpu, p.op, p.label, v.name) not in keys]
    if not todo:
        print(f"{short} {p.label}: every rung recorded for this commit already")
        return 0
    print(f"{short} {p.label}: {len(todo)} rungs and peers to sweep", flush=True)
    table = bench.sweep([p], todo, progress=False, record=not tiny, results_root=_record_root(out))
    table = table.drop(columns=["config", "traceback"], errors="ignore")
    (out / "sweeps").mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sweeps" / f"sweep_{short}_{index}.csv", index=False)
    for r in table.itertuples():
        rate = f"{r.tflops:8.2f} TFLOP/s {r.gbps:8.1f} GB/s" if r.tflops == r.tflops else "(simulated)"
        print(f"  {r.problem:40.40s} {r.label:22s} {r.status:14s} {rate} {r.error or ''}")
    return 0


def merge_sweeps(out: Path, log) -> None:
    import pandas as pd

    parts = sorted((out / "sweeps").glob("sweep_*_*.csv")) if (out / "sweeps").exists() else []
    by_op: dict[str, list] = {}
    for f in parts:
        op = f.stem.removeprefix("sweep_").rsplit("_", 1)[0]
        by_op.setdefault(op, []).append(pd.read_csv(f))
    for op, frames in by_op.items():
        pd.concat(frames, ignore_index=True).to_csv(out / f"sweep_{op}.csv", index=False)
        log(f"[ops] {out / f'sweep_{op}.csv'}: {sum(len(x) for x in frames)} rows")


# --- Nsight Compute ---------------------------------------------------------------------------------
NCU_DRIVER = '''"""Written by tools/record_gpu.py: run every rung of one op once, for Nsight Compute.
Each rung is prepared and run once outside the profiled range (compile, warm-up), then, inside
cudaProfilerStart/Stop, a marker kernel and one launch of the rung.  record_gpu.py's ncu part
runs this under `ncu --profile-from-start off` and splits the kernels at the markers.
Usage: python ncu_driver.py OP MANIFEST"""
import runpy
import sys

sys.argv = [{tool!r}, "--out", {out!r}, "--unit", "ncu-driver"] + sys.argv[1:]
runpy.run_path({tool!r}, run_name="__main__")
'''


@cuda.jit
def perfkit_ncu_marker(x):
    """Launched before each rung under ncu: the kernels after it, up to the next, are that rung's."""
    if cuda.grid(1) == 0:
        x[0] += 1


@cuda.jit
def empty_kernel(a, b, c, d):
    pass


def ncu_driver(short: str, manifest: Path) -> int:
    import numpy as np

    mark = cuda.to_device(np.zeros(1, np.int32))
    [(short, mod)] = ladders([short])
    p = example_problem(mod, backend.is_simulator())  # the simulator: a dry run at a tiny size
    start = getattr(cuda, "profile_start", lambda: None)  # the simulator has no profiler API
    stop = getattr(cuda, "profile_stop", lambda: None)
    with open(manifest, "w") as f:
        for v in variants_for(mod, p):
            try:
                v.supports(p)
                prep = v.prepare(p, p.make_inputs(0))
                prep()  # compile and warm up, not profiled
                prep.synchronize()
            except Exception as exc:
                print(f"{v.label}: not profiled ({exc.__class__.__name__}: {exc})", flush=True)
                from perfkit import bench

                if bench.is_device_fault(exc):
                    return 1
                continue
            start()
            perfkit_ncu_marker[1, 1](mark)
            prep()
            prep.synchronize()
            stop()
            f.write(json.dumps({"op": p.op, "problem": p.label, "rung": v.label}) + "\n")
            f.flush()
    return 0


def unit_ncu(out: Path, short: str) -> int:
    d = out / "ncu"
    d.mkdir(parents=True, exist_ok=True)
    driver = d / "ncu_driver.py"
    driver.write_text(NCU_DRIVER.format(out=str(out), tool=str(Path(__file__).resolve())))
    rep, manifest, raw = d / f"{short}.ncu-rep", d / f"{short}.manifest.jsonl", d / f"{short}.raw.csv"
    cmd = ["ncu", "--profile-from-start", "off", "--target-processes", "all", "--metrics",
           ",".join(NCU_COLUMNS.values()), "-f", "-o", str(rep.with_suffix("")), sys.executable, str(driver),
           short, str(manifest)]
    print(" ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=ROOT)
    if not rep.exists():
        print(f"ncu wrote no report (exit {r.returncode})")
        return 1
    with open(raw, "w") as f:
        subprocess.run(["ncu", "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"],
                       stdout=f, check=True)
    rows = ncu_table(raw.read_text(), [json.loads(l) for l in manifest.read_text().splitlines() if l.strip()])
    _write_csv(d / f"{short}.metrics.csv", rows, NCU_TABLE)
    print(f"{len(rows)} kernel rows for {short}")
    return 0 if r.returncode == 0 else 1


_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}  # -> microseconds


def _to_float(text: str) -> float:
    try:
        return float(str(text).replace(",", "").strip())
    except ValueError:
        return float("nan")


def _base(value: float, unit: str, column: str) -> float:
    """A value in ncu's unit as the table's unit: us for time, bytes, Hz, plain counts and %."""
    u = (unit or "").strip().lower()
    if column == "time_us":
        return value * _TIME.get(u, 1e-3)  # base unit: nsecond
    if column.endswith("_bytes") and u.endswith("byte"):
        return value * _SCALE.get(u[:-4], 1.0)
    if column == "sm_clock_hz":
        if u.endswith("hz"):
            return value * _SCALE.get(u[:-2], 1.0)
        if "/" in u:  # cycle/nsecond, cycle/usecond, cycle/second
            return value / (_TIME.get(u.split("/", 1)[1], 1e6) / 1e6)
    return value


def short_kernel_name(name: str) -> str:
    """``perfkit::kernels::gemm::gemm_naive[abi:v1,cw51...](Array<...>)`` -> ``gemm_naive``;
    library kernels (``sm80_xmma_gemm_...``) keep their name, cut to 60 characters."""
    import re

    head = name.split("(", 1)[0]
    head = re.sub(r"\[abi:[^\]]*\]", "", head)
    head = re.sub(r"<.*>$", "", head)  # template arguments
    head = head.rsplit("::", 1)[-1].split(" ")[-1]
    return head[:60] or name[:60]


def ncu_table(raw_csv: str, manifest: list[dict]) -> list[dict]:
    """Rows of the metrics table from ``ncu --csv --page raw`` output: one per kernel launch,
    attributed to the rung named by the marker launch before it (markers themselves dropped)."""
    lines = [l for l in raw_csv.splitlines() if l.startswith('"')]  # drop ==PROF== and app output
    table = list(csv.reader(lines))
    if len(table) < 2:
        return []
    header, units, body = table[0], table[1], table[2:]
    if units and units[0] and units[0] != "":  # no units row (older ncu): the first row is data
        body, units = table[1:], [""] * len(header)
    col = {h: i for i, h in enumerate(header)}
    name_col = col.get("Kernel Name", col.get("Function Name"))
    id_col = col.get("ID")
    body.sort(key=lambda r: _to_float(r[id_col]) if id_col is not None else 0)
    rows, rung = [], -1
    for r in body:
        kernel = r[name_col] if name_col is not None else ""
        if NCU_MARKER in kernel:
            rung += 1
            continue
        if not 0 <= rung < len(manifest):
            continue  # a kernel outside any marked rung (should not happen)
        row = {**manifest[rung], "kernel": short_kernel_name(kernel)}
        for ours, metric in NCU_COLUMNS.items():
            i = col.get(metric)
            row[ours] = _base(_to_float(r[i]), units[i] if i < len(units) else "", ours) if i is not None else float("nan")
        w, f = row.get("warp_instructions"), row.get("ffma_thread_instructions")
        row["ffma_share_of_warp_instructions"] = f / 32 / w if w and w == w and f == f else float("nan")
        rows.append(row)
    return rows


def merge_ncu(out: Path, log) -> None:
    parts = sorted((out / "ncu").glob("*.metrics.csv")) if (out / "ncu").exists() else []
    rows = []
    for f in parts:
        with open(f) as fh:
            rows += list(csv.DictReader(fh))
    if rows:
        _write_csv(out / "ncu_metrics_all_rungs.csv", rows, NCU_TABLE)
        log(f"[ncu] {out / 'ncu_metrics_all_rungs.csv'}: {len(rows)} kernel rows")


# --- small helpers ------------------------------------------------------------------------------------
def _append_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    import pandas as pd

    df = pd.DataFrame(rows)
    if path.exists():
        df = pd.concat([pd.read_csv(path), df], ignore_index=True)
    df.to_csv(path, index=False)


def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
