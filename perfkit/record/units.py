"""The units, each run in its own child process (``python -m perfkit.record --out OUT --unit SPEC``):
the rehearsal's sleeper, the test suite, the ceilings, the timer against do_bench, an ops sweep,
Nsight Compute (:mod:`perfkit.record.ncu`), a rung's configurations timed (tune)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from numba import cuda  # module level: the simulator swaps only a kernel's globals

from perfkit import backend
from perfkit.record import ncu, orphan, precompile, progress, resume
from perfkit.record.ncu import EXIT_FAULT, package_parent
from perfkit.record.plan import TUNE_COLUMNS, Inputs, is_peer, rebuild, variant_named
from perfkit.record.resume import append_rows, record_root

#: measure() settings of a rehearsal's sweeps: one timed sample (a simulated time means nothing)
REHEARSAL_TIMER = dict(warmup_s=0.0, min_samples=1, max_samples=1, min_time_s=0.0, max_time_s=0.0)


@cuda.jit
def empty_kernel(a, b, c, d):
    pass


def unit_main(spec_path: str, out: str) -> int:
    """The child's entry: run the unit ``spec_path`` describes, writing under ``out``."""
    orphan.die_with_parent()  # a parent killed mid-unit (a lost cluster worker) takes this group along
    spec = json.loads(Path(spec_path).read_text())
    out = Path(out)
    part, items, tiny = spec["part"], spec["items"], spec["tiny"]
    print(f"unit {spec['name']} ({part}, {len(items)} items): {backend.describe()}", flush=True)
    if part == "rehearsal":
        return unit_sleep(out, spec["extra"]["sleep"])
    if part == "tests":
        return unit_tests(out)
    if part == "ceilings":
        return unit_ceilings(out, spec, tiny)
    if part == "timer":
        return unit_timer(out, spec, tiny)
    if part == "ops":
        return unit_ops(out, spec, tiny)
    if part == "ncu":
        return ncu.unit_ncu(out, spec, tiny)
    if part == "tune":
        rc = unit_tune(out, spec, tiny)
        if any(not f.done() for f in _LATE):  # a late build's thread would hold the exit until it ends
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        return rc
    if part == "ncu-driver":  # under ncu: one launch of every rung, a marker kernel before each
        return ncu.ncu_driver(items, Path(spec["manifest"]), progress.Progress(out, spec["name"], spec.get("attempt", 1)))
    print(f"unknown unit part {part}", file=sys.stderr)
    return 2


def unit_sleep(out: Path, seconds: float) -> int:
    """The rehearsal's proof of the kill: a grandchild and this process both sleep past the cap."""
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    # written whole then renamed: a watcher that sees the file must never read it empty
    tmp = out / "rehearsal-kill.pids.tmp"
    tmp.write_text(f"{os.getpid()} {child.pid}\n")
    tmp.replace(out / "rehearsal-kill.pids")
    print(f"sleeping {seconds} s with grandchild {child.pid}", flush=True)
    time.sleep(seconds)
    return 0


def unit_tests(out: Path) -> int:
    import importlib.util

    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
           f"--junitxml={out / 'pytest_gpu.xml'}", "tests"]
    if importlib.util.find_spec("xdist"):
        cmd[3:3] = ["-n", "auto"]
    env = {**os.environ, "PERFKIT_BACKEND": "gpu"}
    with open(out / "pytest_gpu.log", "w") as f:
        r = subprocess.run(cmd, cwd=package_parent(), stdout=f, stderr=subprocess.STDOUT, env=env)
    last = (out / "pytest_gpu.log").read_text(errors="replace").strip().splitlines()[-1:]
    print(f"pytest exit {r.returncode}: {last[0] if last else ''}")
    return 0  # the log says how it went; a red suite is a result, not a tool failure


def _done_here(out: Path, spec: dict, part: str) -> set:
    return resume.measured(out, [Path(d) for d in spec.get("resume", [])], spec["gpu"], spec["commit"])[part]


def unit_ceilings(out: Path, spec: dict, tiny: bool) -> int:
    from perfkit import roofline

    done = _done_here(out, spec, "ceilings")
    rows = []
    for variant, fn in (("copy", roofline.copy_bandwidth), ("fma", roofline.fp32_rate)):
        if any(k[0] == "roofline" and k[2] == variant for k in done):
            print(f"{variant}: recorded for this commit already")
            continue
        size = (64 << 10 if variant == "copy" else 2) if tiny else None
        r = fn(size, record=True, results_root=record_root(out))
        value, unit = ((r["bytes_per_s"] / 1e9, "GB/s") if variant == "copy" else (r["flops_per_s"] / 1e12, "TFLOP/s"))
        m = r["measurement"]
        rows.append({"ceiling": variant, "value": value, "unit": unit, "median_s": m.median_s, "n": m.n,
                     "spin_s": m.extra.get("spin_s"), "below_recorded": json.dumps(r["below_recorded"]),
                     "path": r["path"], "simulated": m.simulated, "commit": spec["commit"], "gpu": spec["gpu"]})
        print(f"{variant}: {value:.2f} {unit}  {m}  -> {r['path']}", flush=True)
    append_rows(out / "ceilings.csv", rows)
    return 0


def unit_timer(out: Path, spec: dict, tiny: bool) -> int:
    """measure() against do_bench on each planned rung at its own example problem, plus the
    empty kernel and the hot/cold copy; a row at a time into OUT/measure_vs_do_bench.csv."""
    import numpy as np

    from perfkit import bench, timing

    try:
        from triton.testing import do_bench
    except Exception as exc:
        do_bench = None
        print(f"triton not available ({exc.__class__.__name__}); measure() alone")
    done = _done_here(out, spec, "timer")
    inputs = Inputs()
    fault = False

    def compare(op, problem, variant, label, fn, sync, l2="cold"):
        nonlocal fault
        if (op, problem, variant) in done:
            print(f"  {op} {label}: measured for this commit already")
            return
        try:
            m = timing.measure(fn, sync=sync, l2=l2)
            db = do_bench(fn, warmup=25, rep=100, return_mode="median") / 1e3 if do_bench and not tiny else float("nan")
            row = {"op": op, "problem": problem, "variant": variant, "label": label, "l2": l2,
                   "measure_s": m.median_s, "n": m.n, "do_bench_s": db,
                   "ratio": m.median_s / db if db == db else float("nan"), "spin_s": m.extra.get("spin_s"),
                   "host_enqueue_median_s": float(np.median(m.extra["host_enqueue_s"]))
                   if m.extra.get("host_enqueue_s") else None, "simulated": m.simulated,
                   "commit": spec["commit"], "gpu": spec["gpu"]}
            append_rows(out / "measure_vs_do_bench.csv", [row])  # row by row: a kill keeps them
            print(f"  {op:10s} {label:22s} measure {m.median_s * 1e6:10.2f} us  do_bench {db * 1e6:10.2f} us",
                  flush=True)
        except Exception as exc:  # one rung failing must not stop the comparison
            print(f"  {op} {label}: {exc.__class__.__name__}: {exc}", flush=True)
            if bench.is_device_fault(exc):
                fault = True
                raise

    prog = progress.Progress(out, spec["name"], spec.get("attempt", 1))
    for item in spec["items"]:
        prog.start(item)
        try:
            mod, p, v = rebuild(item)
            v.supports(p)
            prep = v.prepare(p, inputs(p))
        except Exception as exc:
            print(f"  {item['op']} {item['rung']} @ {item['label']}: not run ({exc.__class__.__name__}: {exc})")
            prog.end(item, "not run")
            if bench.is_device_fault(exc):
                return EXIT_FAULT
            continue
        try:
            compare(p.op, p.label, v.name, v.label, prep, prep.synchronize)
        except Exception:
            return EXIT_FAULT
        prog.end(item, "done")
    if spec["extra"].get("empty"):
        prog.start(None, "the empty kernel and the hot/cold copy", watch=False)  # not an item: no stall limit
        import warnings

        from perfkit import roofline

        bufs = [cuda.device_array(32, np.float32) for _ in range(4)]
        with warnings.catch_warnings():  # one block on purpose
            warnings.simplefilter("ignore")
            empty = empty_kernel[1, 32]
        try:
            compare("timer", "empty kernel, 4 array args", "empty", "empty", lambda: empty(*bufs), cuda.synchronize, "hot")
            l2 = backend.device().l2_bytes or (1 << 20)
            n = 4096 if tiny else max(1024, l2 // 4 // 4)  # src + dst = half the L2
            src, dst = cuda.to_device(np.ones(n, np.float32)), cuda.device_array(n, np.float32)
            cp = roofline.copy_launcher(dst, src)
            for l2mode in ("hot", "cold"):
                compare("timer", f"copy n={n} (fits L2) l2={l2mode}", "copy16", f"copy16 {l2mode}", cp,
                        cuda.synchronize, l2mode)
        except Exception:
            return EXIT_FAULT
    prog.start(None)
    print(f"timer: rows in {out / 'measure_vs_do_bench.csv'}")
    return 0


def unit_ops(out: Path, spec: dict, tiny: bool) -> int:
    """Sweep one problem over the planned rungs not yet measured for this commit, an item at a
    time in the log and ``OUT/progress/`` (:mod:`perfkit.record.progress`), each row appended to
    ``OUT/sweeps/`` as it comes: a unit killed mid-way keeps what it measured and says what it was on."""
    from perfkit import bench

    items = spec["items"]
    if not items:
        print("nothing to sweep")
        return 0
    prog = progress.Progress(out, spec["name"], spec.get("attempt", 1))
    mod, p, _ = rebuild(items[0])
    todo = [variant_named(mod, p, i["variant"]) for i in items]
    print(f"{items[0]['op']} {p.label}: {len(todo)} rungs and peers to sweep", flush=True)
    sweep_csv = out / "sweeps" / f"sweep_{spec['name'].removeprefix('ops-')}.csv"
    sweep_csv.parent.mkdir(parents=True, exist_ok=True)
    if spec.get("attempt", 1) == 1:
        sweep_csv.unlink(missing_ok=True)  # a unit's first child starts the table; a restart adds to it
    hang = spec.get("hang") if tiny else None  # the rehearsal's stand-in for a kernel that never returns
    pre = precompile_unit(prog, spec, [(v, p) for v in todo])
    ended: list = []
    faulted = False
    compiled_before = [0]  # the Numba compiles of the rung in flight's kernels when it started

    def begin(k: int) -> None:
        if k >= len(items):
            prog.start(None)
            return
        compiled_before[0] = precompile.compiles(pre.planned.get(k, []))
        prog.start(items[k])
        if hang and items[k]["variant"] == hang["variant"]:
            print(f"rehearsal: {items[k]['variant']} sleeps {hang['seconds']} s", flush=True)
            time.sleep(hang["seconds"])

    def on_row(row: dict) -> None:
        nonlocal faulted
        k = len(ended)
        it = items[k]
        ended.append(row)
        stages = progress.row_stages(row)
        if k in pre.planned and not faulted:  # a fresh process's rows (after a fault): its compiles are its own
            # kernels given by the precompile, and those Numba compiled all the same during this rung
            # (a launch with other argument types than the plan's stand-ins); check_s holds no
            # compile where it compiled none
            row["precompiled"] = len(pre.given.get(k, []))
            row["compiled"] = precompile.compiles(pre.planned[k]) - compiled_before[0]
            if row["precompiled"] and not row["compiled"]:
                stages[progress.LOADED] = stages.pop("compile+check")
        r = bench.table([row]).drop(columns=["config", "traceback"], errors="ignore")
        r["commit"], r["gpu"] = spec["commit"], spec["gpu"]
        append_rows(sweep_csv, r.to_dict("records"))
        x = r.iloc[0]
        rate = (f"{x.tflops:8.2f} TFLOP/s {x.gbps:8.1f} GB/s" if x.tflops == x.tflops else
                "(simulated)" if row.get("simulated") else "")
        note = (f"precompiled, {row['compiled']} compiled at launch" if row.get("precompiled") else
                f"{row['compiled']} kernels compiled at launch" if "compiled" in row else "")
        prog.end(it, row["status"], stages, is_peer(it), " ".join(x for x in (rate, note, row.get("error") or "") if x))
        if row["status"] == bench.FAULT_STATUS:  # the rest runs in a fresh process that reports at its end
            faulted = True
            if len(ended) < len(items):
                prog.start(None, "the rest, in a fresh process after a device fault", watch=False)
        elif not faulted:
            begin(len(ended))

    begin(0)
    bench.sweep([p], todo, progress=False, record=True, results_root=record_root(out),
                timer=REHEARSAL_TIMER if tiny else None, on_row=on_row)
    prog.start(None)
    return EXIT_FAULT if faulted else 0


#: a rehearsal times the rung's own configuration and the model's first two (its compiles are the slow part)
TUNE_REHEARSAL_KEEP = 3


class _Deadline:
    """An executor's ``map`` that waits at most ``seconds`` in all: a task not done by then
    gives ``{"error": ...}`` (what :func:`perfkit.autotune.compiled` returns for a failed build);
    ``late`` keeps the ones still running (their threads would hold the process at its exit)."""

    def __init__(self, pool, seconds: float):
        self.pool, self.end, self.late = pool, time.monotonic() + seconds, []

    def map(self, fn, *iterables):
        import concurrent.futures as cf

        futs = [self.pool.submit(fn, *args) for args in zip(*iterables)]
        cf.wait(futs, timeout=max(0.0, self.end - time.monotonic()))
        out = []
        for f in futs:
            if not f.done():  # queued (cancelled here) or running (left to finish unwatched)
                if not f.cancel():
                    self.late.append(f)
                out.append({"error": "not built within the unit's compile time"})
            elif f.exception() is not None:
                e = f.exception()
                out.append({"error": f"{e.__class__.__name__}: {e}"})
            else:
                out.append(f.result())
        return out


#: builds still running when a tune unit's compile time ran out (unit_main exits without them)
_LATE: list = []


class _Fault(Exception):
    """A device fault in the timing: this process's CUDA context is gone."""


def unit_tune(out: Path, spec: dict, tiny: bool) -> int:
    """A rung's configurations (``perfkit.autotune``'s searches): every one compiled for this
    device with no GPU and estimated by the model for the planned problem (the prediction, made
    before any is timed), then checked and timed here in the model's order, the rung's own
    configuration and the oracle first; a row at a time into ``OUT/tune.csv``, so a unit cut by its
    cap keeps what it timed.  Nothing is recorded in ``results/``: a configuration that wins
    becomes the rung's own in a later commit, and is recorded then."""
    import concurrent.futures as cf

    from perfkit import autotune, bench, specs

    items, extra = spec["items"], spec["extra"]
    mod, p, oracle = rebuild(items[0])
    rung = extra["rung"]
    planned = mod.Problem(**extra["problem"])
    own = variant_named(mod, p, rung)
    dev = backend.device()
    cc = dev.compute_capability or (9, 0)
    try:
        key = specs.get(dev.name).key
    except Exception:  # noqa: BLE001  (the simulator, a GPU devices.yaml lacks: the model speaks of the H100)
        key = "h100-sxm"
    prog = progress.Progress(out, spec["name"], spec.get("attempt", 1))
    t0 = time.perf_counter()
    prog.start(None, f"{rung}: compiling its configurations for sm_{cc[0]}{cc[1]}", watch=False)
    if rung == "simt_wide":  # its own, the wide space at up to 256 threads (more cap the registers at 128), rung 11
        from perfkit.kernels.gemm import Autotuned, search_space_wide

        space = [own] + [v for v in search_space_wide() if v.threads() <= 256 and v != own] + [Autotuned()]
        search = lambda ex, cands: autotune.search_gemm(planned, cands, cc=cc, keep=len(cands),  # noqa: E731
                                                        executor=ex, gpu=key)
    elif rung == "tc_deep":
        space = autotune.tc_deep_space(planned)
        search = lambda ex, cands: autotune.search_tc_deep(planned, cands, cc=cc, executor=ex, gpu=key)  # noqa: E731
    else:
        print(f"tune: no search for {rung}", file=sys.stderr)
        return 2
    if tiny:
        space = space[:TUNE_REHEARSAL_KEEP]
    workers = max(1, min(precompile.default_workers(len(space)), len(space)))
    # the compiles are child processes (perfkit.anatomy), so threads run them side by side; what is
    # not built within 40% of the unit's limit is left out (its child finishes unwatched), so the
    # unit always keeps time to check and time what was
    limit = spec.get("limit_s") or spec.get("cap_s") or 240.0
    pool = cf.ThreadPoolExecutor(workers)
    deadline = _Deadline(pool, 0.4 * limit)
    try:
        ranked = search(deadline, space)
    finally:  # not waiting for a late build: the unit goes on
        pool.shutdown(wait=False, cancel_futures=True)
    ok = [c for c in ranked if not c.rejected]
    if not ok and ranked and not any(c.rejected.startswith(("spills", "occupancy")) for c in ranked):
        # every build failed (no cuobjdump, a compiler child that died): no estimate to order by,
        # but the GPU can still time them, in the listed order (the rung's own first)
        print(f"tune {rung}: no configuration compiled for the model ({ranked[0].rejected[:200]}); "
              "timing them in the listed order, unranked", flush=True)
        ok = [dataclasses.replace(c, rejected=None) for c in ranked]
        ranked = ok
    ok.sort(key=lambda c: (c.variant != own, c.model_s if c.model_s is not None else math.inf))  # its own first
    prog.phase("compile+estimate", time.perf_counter() - t0)
    by_model = sorted((c for c in ok if c.model_s is not None), key=lambda c: c.model_s)
    rank = {id(c): k + 1 for k, c in enumerate(by_model)}
    print(f"tune {rung}: {len(space)} configurations, {len(ok)} compiled without spills in "
          f"{time.perf_counter() - t0:.0f} s ({workers} at a time); the model's best: "
          + ", ".join(f"{c.variant.config} {c.model_s * 1e6:.0f} us" for c in by_model[:3]), flush=True)
    tune_csv = out / "tune.csv"
    base = {"unit": spec["name"], "op": items[0]["op"], "problem": p.label, "planned": planned.label,
            "commit": spec["commit"], "gpu": spec["gpu"]}

    def row_of(c, **kw) -> dict:
        r = {**base, "rung": c.variant.label,  # rung 11 sits in rung 19's unit as itself
             "config": json.dumps(c.variant.config, sort_keys=True), "default": c.variant == own,
             "model_rank": rank.get(id(c)), "registers": c.registers, "occupancy": c.occupancy,
             "model_us": None if c.model_s is None else c.model_s * 1e6, "rejected": c.rejected, **kw}
        return {k: r.get(k) for k in TUNE_COLUMNS}

    append_rows(tune_csv, [row_of(c) for c in ranked if c.rejected])
    # the oracle's time: the fraction each configuration reaches
    oracle_us = [math.nan]

    def on_row(row: dict) -> None:
        k = len(timed)
        timed.append(row)
        sim = bool(row.get("simulated"))
        med = row.get("median_s")
        us = med * 1e6 if med == med and med is not None else math.nan
        if k == 0:
            oracle_us[0] = us
            return
        c = ok[k - 1]
        iqr = row.get("iqr_s")
        r = row_of(c, status=row["status"], median_us=us, iqr_us=math.nan if iqr is None else iqr * 1e6,
                   n_samples=row.get("n_samples"), tflops=math.nan if sim else p.flops / (us * 1e-6) / 1e12,
                   oracle_us=oracle_us[0], x_oracle=math.nan if sim else oracle_us[0] / us,
                   max_abs_err=row.get("max_abs_err"), error=row.get("error"), simulated=sim)
        append_rows(tune_csv, [r])
        if row["status"] == bench.FAULT_STATUS:  # the context is gone: the rest say so, the unit ends
            append_rows(tune_csv, [row_of(x, status="not run", error="a device fault in an earlier configuration")
                                   for x in ok[k:]])
            print(f"  {c.variant.config}: device fault; {len(ok) - k} configurations not run", flush=True)
            raise _Fault
        note = "(simulated)" if sim else f"{us:9.1f} us  x{oracle_us[0] / us:.2f} of the oracle"
        print(f"  {c.variant.config}: {row['status']} {note}  model {(c.model_s or math.nan) * 1e6:.0f} us",
              flush=True)
        if k < len(ok):  # the next one (k is 1-based here: row 0 was the oracle's)
            prog.start(None, f"{rung}: timing configuration {k + 1} of {len(ok)}", watch=False)

    timed: list = []
    # the precompile gets half of what the unit has left after the model's compiles (its limit
    # counts from the unit's start), so the timing always has the other half
    left = limit - (time.perf_counter() - t0)
    # (the kernels it builds go into the dispatchers the sweep launches)
    precompile_unit(prog, {**spec, "limit_s": max(left, 2.0)}, [(c.variant, p) for c in ok])
    prog.start(None, f"{rung}: the oracle, then {len(ok)} configurations", watch=False)
    rc = 0
    try:
        bench.sweep([p], [oracle] + [c.variant for c in ok], progress=False, record=False,
                    timer=REHEARSAL_TIMER if tiny else None, on_row=on_row)
    except _Fault:
        rc = EXIT_FAULT
    prog.start(None)
    _LATE.extend(deadline.late)
    return rc


def precompile_unit(prog, spec: dict, pairs: list):
    """The unit's rungs compiled in worker processes before the sweep (:mod:`perfkit.record.precompile`),
    within half the seconds this child has; its seconds are the unit's ``precompile`` phase.  In
    the simulator a no-op (its line says so)."""
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    if backend.is_simulator():
        return precompile.precompile(pairs, log=log)
    limit = spec.get("limit_s") or spec.get("cap_s") or 240.0
    prog.start(None, f"precompile of {len(pairs)} rungs and peers", watch=False)  # not an item: no stall limit
    t0 = time.perf_counter()
    try:
        pre = precompile.precompile(pairs, workers=spec.get("precompile"), timeout_s=0.5 * limit, log=log)
    except Exception as exc:  # never the unit's end: what went in stays, the rest compiles at its launch
        log(f"precompile: failed ({exc.__class__.__name__}: {exc}); Numba compiles each rung at its first launch")
        pre = precompile.Precompiled(seconds=time.perf_counter() - t0, workers=1)
    if pre.workers:
        prog.phase("precompile", pre.seconds)
    return pre


def merge_sweeps(out: Path, log) -> None:
    import pandas as pd

    parts = sorted((out / "sweeps").glob("sweep_*.csv")) if (out / "sweeps").exists() else []
    by_op: dict[str, list] = {}
    for f in parts:
        df = pd.read_csv(f)
        if not df.empty:
            by_op.setdefault(str(df["op"].iloc[0]), []).append(df)
    for op, frames in by_op.items():
        pd.concat(frames, ignore_index=True).to_csv(out / f"sweep_{op}.csv", index=False)
        log(f"[ops] {out / f'sweep_{op}.csv'}: {sum(len(x) for x in frames)} rows")
