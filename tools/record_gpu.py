"""Record a GPU session's measurements through perfkit's own recorder, in one command.

A lent GPU comes with 15 minutes of device time in all (the machine's start included) and one
command of at most 10 minutes, so the GPU work is one command that fits a wall-clock budget,
runs what matters most first, and can be run again to go on::

    python tools/record_gpu.py --plan quick --out "$OUT" --budget-s 420 --commit <git hash>

(the README's "Measuring on a lent GPU" gives the whole device call, with the notebook wheels).

**Plans.**  ``--plan quick`` (the default) runs these units, in this order, each with its own
cap (the caps below are at the default 420 s budget and scale with ``--budget-s``):

====================  =====  ==============================================================
unit                  cap s  what
====================  =====  ==============================================================
ceilings                 15  copy bandwidth and FP32 FMA rate, recorded
timer                    35  ``timing.measure`` against ``triton.testing.do_bench``: the
                             softmax and saxpy rungs, GEMM's first tensor-core rung (at its
                             float16 problem), an empty kernel, the hot/cold-L2 copy
ops-gemm-float16         55  GEMM float16 4096^3: every tensor-core rung, cuBLAS, torch, Triton
ops-gemm-float32         70  GEMM float32 4096^3: every SIMT rung, cuBLAS, torch, Triton
ops-<norm>            5x28  softmax, layernorm, rmsnorm, layernorm_bwd at 4096x4096 float32,
                             batchnorm 32x256x56x56 NCHW: every rung and peer
ops-conv-*            2x34  the ResNet-50 stage-2 3x3 layer in float32 NCHW and float16 NHWC
ncu-<op>-<i>          rest  Nsight Compute on the rungs in no table of this GPU
                             (``data/ncu/``), then on those changed since their table,
                             three rungs a unit, while the budget lasts
====================  =====  ==============================================================

``--plan full`` is everything: the test suite on the GPU, the ceilings, the timer over every
op's example problem, every ladder and its peers over each op's ``GPU_SWEEP`` (one unit a
problem), Nsight Compute over every rung; its units take what the budget has left.
``--parts``, ``--ops`` and ``--problems`` (a label substring, a dtype, or an index into the op's
``GPU_SWEEP``) pick units of the plan and run them in the order given.  ``--list`` prints the
plan and exits; ``OUT/plan.json`` always has it.

**Units stop when told.**  Each unit runs in its own child process, in its own process group,
with ``min(its cap, what the budget has left)``; at that limit the whole group is killed (the
unit, pytest's workers, ``ncu`` and the profiled program, bench's fault-recovery child) and the
plan goes on.  The budget counts from this process's start.  ``OUT/summary.md`` (and
``summary.csv``, ``status.json``) says per unit: done, timed out, device fault, failed, skipped
(and why) or not started, with its seconds.

**Every rung on its own kind of problem.**  The timer and ncu units take each rung's
``example(problem)``: float16-only rungs are timed and profiled at their float16 twin.  ``ncu``
runs with ``--clock-control none`` (clocks as in use; the table keeps each row's SM clock).

**Resume.**  A (part, op, problem, rung) already measured for this commit on this GPU (records in
``data/results/``, ``OUT/results/`` or a ``--resume-from`` folder, the timer's and ncu's CSVs
there) is skipped, so a second device call that carries the first call's output goes on.

**Rehearsal.**  ``--rehearse`` runs the same plan through the same code (units, caps, the kill,
resume, records under ``OUT/results/``, the summary) in the CUDA simulator at each op's tiny
``SIM_SWEEP`` twin of every planned problem, with a first unit that sleeps past its cap (and
leaves a grandchild behind) to show the kill.  Records are marked ``simulated`` and filed under
the simulator's own folder; ``perfkit.results.record`` never writes them to ``data/results/``.
``--max-rungs N`` keeps the first N rungs of each (part, op, problem) (a fast rehearsal).

Exit status: 0 when every unit was done or skipped, 3 when one timed out or was not started
(run again with ``--resume-from`` to go on), 4 on a device fault, 1 when a unit failed.
"""
from __future__ import annotations

import time

_T0 = time.monotonic()  # the budget counts from here: before the imports and CUDA's start-up

import argparse  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pkgutil  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if __name__ == "__main__" and "--rehearse" in sys.argv[1:]:
    os.environ["PERFKIT_BACKEND"] = "sim"  # chosen before perfkit loads numba.cuda

import perfkit  # noqa: E402,F401  (chooses the backend first)
from numba import cuda  # noqa: E402  (module level: the simulator swaps only a kernel's globals)
from perfkit import backend  # noqa: E402

PARTS = ("tests", "ceilings", "timer", "ops", "ncu")
PLANS = ("quick", "full")
#: the quick plan's caps in seconds at its default budget (they scale with --budget-s); the ncu
#: units share what is left of the budget
QUICK_BUDGET_S = 420.0
#: (on the H100 at 6bbc424 a norm unit needed 23-25 s for its rungs and peers, a conv unit over
#: 31 s and GEMM float32 62 s: the caps leave them a margin)
QUICK_CAPS = {"ceilings": 15, "timer": 35, "gemm-float16": 55, "gemm-float32": 70, "norm": 28, "conv": 34}
QUICK_NORMS = ("softmax", "layernorm", "rmsnorm", "layernorm_bwd", "batchnorm")
#: ncu's order of ops: the rungs that never ran on a GPU first
NCU_ORDER = ("gemm", "conv", "softmax", "layernorm", "rmsnorm", "layernorm_bwd", "batchnorm", "saxpy")
NCU_CHUNK = 3  # rungs per ncu unit: a unit killed at the budget loses no more than these
#: seconds a unit needs at least to be worth starting
MIN_UNIT_S = 5.0
#: the rehearsal's unit that sleeps past this cap, to show the kill
SLEEP_CAP_S = 3.0
#: the Nsight Compute table "new" and "changed since" are told against where this GPU has none in
#: data/ncu/ (the simulator of a rehearsal, a GPU devices.yaml does not list)
LAST_NCU = ROOT / "data" / "ncu" / "h100-sxm-2026-11-23.csv"
#: measure() settings of a rehearsal's sweeps: one timed sample (a simulated time means nothing)
REHEARSAL_TIMER = dict(warmup_s=0.0, min_samples=1, max_samples=1, min_time_s=0.0, max_time_s=0.0)
EXIT_FAULT = 4


# --- what there is to run ------------------------------------------------------------------------
def ladders(only: list[str] | None = None):
    """(short name, module) of every op module with a LADDER, optionally only those named, in
    the order named."""
    import perfkit.kernels as pk

    found = []
    for info in pkgutil.walk_packages(pk.__path__, "perfkit.kernels."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name.endswith(".base"):
            continue
        mod = importlib.import_module(info.name)
        short = info.name.removeprefix("perfkit.kernels.")
        if getattr(mod, "LADDER", None):
            found.append((short, mod))
    if not only:
        return found

    def named(o, s):
        return o in (s, s.split(".")[-1], s.split(".")[0])

    unknown = [o for o in only if not any(named(o, s) for s, _ in found)]
    if unknown:
        raise SystemExit(f"record_gpu: unknown op(s) {unknown}; there are {[s.split('.')[-1] for s, _ in found]}")
    return [(s, m) for o in only for s, m in found if named(o, s)]


def op_module(short: str):
    [(_, mod)] = ladders([short])
    return mod


def op_name(short: str) -> str:
    return short.split(".")[-1]


def variants_for(mod, problem):
    from perfkit.kernels import peers

    return list(mod.LADDER) + peers.peers_for(problem.op)


def variant_named(mod, problem, name: str):
    for v in variants_for(mod, problem):
        if v.name == name:
            return v
    raise LookupError(f"{problem.op}: no rung or peer named {name!r}")


def tiny_twin(mod, problem):
    """The rehearsal's stand-in for ``problem``: the op's SIM_SWEEP problem of the same dtype (and
    layout, where the op has one), else its first."""
    sims = list(getattr(mod, "SIM_SWEEP", []))
    if not sims:
        raise SystemExit(f"record_gpu: {mod.__name__} has no SIM_SWEEP to rehearse with")
    for same in (("dtype", "layout"), ("dtype",)):
        for s in sims:
            if all(getattr(s, k, None) == getattr(problem, k, None) for k in same):
                return s
    return sims[0]


def problems_for(mod, tiny: bool):
    if tiny:
        return list(getattr(mod, "SIM_SWEEP", []))
    return list(getattr(mod, "GPU_SWEEP", [])) or [mod.EXAMPLE_PROBLEM]


@dataclasses.dataclass
class Unit:
    """One piece of the plan, run in its own process group with its own cap."""

    name: str
    part: str
    cap_s: float | None  # None: what the budget has left
    what: str = ""
    #: what it measures: {"op": module short name, "problem": Problem fields, "label": problem
    #: label, "variant": rung or peer name, "rung": its label, "sweep_index": index in GPU_SWEEP}
    items: list = dataclasses.field(default_factory=list)
    extra: dict = dataclasses.field(default_factory=dict)

    def ops(self) -> list[str]:
        return list(dict.fromkeys(i["op"] for i in self.items))


def _item(short, mod, problem, v, tiny: bool) -> dict:
    """A planned (op, problem, rung); in a rehearsal the problem is its tiny twin."""
    p = tiny_twin(mod, problem) if tiny else problem
    sweep = list(getattr(mod, "GPU_SWEEP", []))
    return {"op": short, "problem": p.params, "label": p.label, "variant": v.name, "rung": v.label,
            "sweep_index": sweep.index(problem) if problem in sweep else None, "planned": problem.label}


def _ops_unit(name, short, mod, problem, variants, cap, tiny, what="") -> Unit:
    return Unit(name, "ops", cap, what or f"{op_name(short)} {problem.label}: {len(variants)} rungs and peers",
                [_item(short, mod, problem, v, tiny) for v in variants])


def ncu_tables_for(gpu: str | None) -> list[tuple[Path, str | None]]:
    """Every Nsight Compute table in data/ncu/ taken on ``gpu`` (a device name), newest first,
    with its commit; else LAST_NCU alone (the simulator, a GPU with no table yet)."""
    from perfkit import model

    try:
        tables = model.ncu_tables(gpu) if gpu else []
    except Exception:  # noqa: BLE001  (the simulator, a GPU devices.yaml does not list)
        tables = []
    if tables:
        return tables
    meta = LAST_NCU.with_suffix(".json")
    return [(LAST_NCU, json.loads(meta.read_text()).get("commit") if meta.exists() else None)]


def last_ncu_table(tables: list | None = None) -> dict:
    """(op, rung name) -> the commit of the newest table of this GPU that has the rung (by
    name: a rung renumbered since is the same kernel).  A session that profiled only some
    rungs wrote a table of those alone, so every table counts, the newest winning."""
    have: dict = {}
    for path, commit in tables if tables is not None else ncu_tables_for(backend.device().name):
        if not Path(path).exists():
            continue
        with open(path) as f:
            for r in csv.DictReader(f):
                have.setdefault((r["op"], r["rung"].split(" ", 1)[-1]), commit)
    return have


def ncu_targets(short, mod, problem) -> dict[str, list]:
    """Rungs for Nsight Compute by tier: ``new`` (no rung of that name in any table of this GPU),
    ``changed`` (its kernel code changed since the commit of the newest table that has it), ``unknown`` (whether it
    changed no one can tell here: no git, as in a copy on a GPU machine).  Library peers and
    oracles already in the table are left out: our commits do not change their kernels."""
    from perfkit import history
    from perfkit.kernels.base import OracleVariant

    have = last_ncu_table()
    tiers: dict[str, list] = {"new": [], "changed": [], "unknown": []}
    for v in variants_for(mod, problem):
        key = (problem.op, v.label.split(" ", 1)[-1])
        if key not in have:
            tiers["new"].append((v, "in no table of this GPU"))
        elif isinstance(v, OracleVariant):  # the oracle and the torch/Triton peers
            continue
        else:
            commit = have[key]
            c = history.source_changed_since(v, commit)
            if c:
                tiers["changed"].append((v, f"changed since {commit}"))
            elif c is None:
                tiers["unknown"].append((v, f"unknown whether changed since {commit} (no git here)"))
    return tiers


def ncu_units(mods, tiny: bool, cap=None) -> list[Unit]:
    """Nsight Compute units, NCU_CHUNK rungs each: every op's new rungs first, then the changed,
    then the unknown, each tier in the order of ``mods``."""
    found = {short: ncu_targets(short, mod, mod.EXAMPLE_PROBLEM) for short, mod in mods}
    units = []
    for tier in ("new", "changed", "unknown"):
        for short, mod in mods:
            p = mod.EXAMPLE_PROBLEM
            targets = found[short][tier]
            for k in range(0, len(targets), NCU_CHUNK):
                chunk = targets[k:k + NCU_CHUNK]
                items = [{**_item(short, mod, v.example(p), v, tiny), "why": why} for v, why in chunk]
                units.append(Unit(f"ncu-{op_name(short)}-{tier}-{k // NCU_CHUNK + 1}", "ncu", cap,
                                  f"Nsight Compute ({tier}): {', '.join(v.label for v, _ in chunk)}", items))
    return units


def plan_quick(budget_s: float, tiny: bool) -> list[Unit]:
    """The quick plan (module docstring), its caps scaled to ``budget_s``."""
    from perfkit.kernels import conv

    s = budget_s / QUICK_BUDGET_S
    units = [Unit("ceilings", "ceilings", QUICK_CAPS["ceilings"] * s, "copy bandwidth and FP32 FMA rate")]
    items = []
    for short in ("norm.softmax", "saxpy"):
        mod = op_module(short)
        p = mod.EXAMPLE_PROBLEM
        items += [_item(short, mod, v.example(p), v, tiny) for v in variants_for(mod, p)]
    g = op_module("gemm")
    p32 = g.EXAMPLE_PROBLEM
    p16 = g.Problem(p32.m, p32.n, p32.k, "float16")
    f16_only = [v for v in g.LADDER if not v.oracle and v.example(p32).dtype == "float16"]
    simt = [v for v in g.LADDER if not v.oracle and v.example(p32).dtype == "float32"]
    oracle = [v for v in g.LADDER if v.oracle]
    items.append(_item("gemm", g, f16_only[0].example(p32), f16_only[0], tiny))
    units.append(Unit("timer", "timer", QUICK_CAPS["timer"] * s,
                      "measure() against do_bench: softmax, saxpy, the first tensor-core rung, an empty "
                      "kernel, the hot/cold copy", items, {"empty": True, "copy": True}))
    peers = variants_for(g, p32)[len(g.LADDER):]
    units.append(_ops_unit("ops-gemm-float16", "gemm", g, p16, oracle + f16_only + peers,
                           QUICK_CAPS["gemm-float16"] * s, tiny))
    units.append(_ops_unit("ops-gemm-float32", "gemm", g, p32, oracle + simt + peers,
                           QUICK_CAPS["gemm-float32"] * s, tiny))
    for name in QUICK_NORMS:
        short = f"norm.{name}"
        mod = op_module(short)
        p = mod.EXAMPLE_PROBLEM
        units.append(_ops_unit(f"ops-{name}", short, mod, p, variants_for(mod, p), QUICK_CAPS["norm"] * s, tiny))
    c32 = conv.EXAMPLE_PROBLEM
    c16 = conv.to_layout(c32, "NHWC", "float16")
    for tag, p in (("float32-nchw", c32), ("float16-nhwc", c16)):
        units.append(_ops_unit(f"ops-conv-{tag}", "conv", conv, p, variants_for(conv, p), QUICK_CAPS["conv"] * s, tiny))
    units += ncu_units([(short, op_module(short)) for short in
                        [next(s for s, _ in ladders([o])) for o in NCU_ORDER]], tiny, None)
    return units


def plan_full(tiny: bool) -> list[Unit]:
    """Everything: the suite, the ceilings, the timer on every op, every GPU_SWEEP problem, ncu."""
    mods = ladders()
    units = [Unit("tests", "tests", None, "the test suite on the GPU"),
             Unit("ceilings", "ceilings", None, "copy bandwidth and FP32 FMA rate")]
    items = []
    for short, mod in mods:
        p = mod.EXAMPLE_PROBLEM
        items += [_item(short, mod, v.example(p), v, tiny) for v in variants_for(mod, p)]
    units.append(Unit("timer", "timer", None, "measure() against do_bench on every op's example problem",
                      items, {"empty": True, "copy": True}))
    for short, mod in mods:
        for i, p in enumerate(list(getattr(mod, "GPU_SWEEP", [])) or [mod.EXAMPLE_PROBLEM]):
            units.append(_ops_unit(f"ops-{op_name(short)}-{i}", short, mod, p, variants_for(mod, p), None, tiny))
    units += ncu_units(mods, tiny, None)
    return units


def problem_matches(item: dict, spec: str) -> bool:
    """``--problems`` spec: an index into the op's GPU_SWEEP, a dtype, or a label substring."""
    if spec.isdigit():
        return item.get("sweep_index") == int(spec)
    if spec in ("float16", "float32", "float64", "bfloat16"):
        return item["problem"].get("dtype") == spec
    return spec in item["planned"] or spec in item["label"]


def select(units: list[Unit], parts=None, ops=None, problems=None, max_rungs: int | None = None) -> list[Unit]:
    """The units of a plan that ``--parts``/``--ops``/``--problems`` pick, in the order given
    (parts first, then ops, then problems); items cut to the first ``max_rungs`` of each
    (part, op, problem)."""
    ops_full = [op_name(s) for s, _ in ladders(ops)] if ops else None
    keyed, taken = [], {}
    for n, u in enumerate(units):
        if parts and u.part not in parts:
            continue
        items = u.items
        if ops_full is not None:
            items = [i for i in items if op_name(i["op"]) in ops_full]
        if problems:
            items = [i for i in items if any(problem_matches(i, sp) for sp in problems)]
        if (ops_full is not None or problems) and u.items and not items:
            continue
        if (ops_full is not None or problems) and not u.items and u.part not in ("tests", "ceilings"):
            continue
        extra = u.extra if ops_full is None and not problems else {}
        if max_rungs:  # per (part, op, problem): ncu's later chunks of the same problem go
            kept = []
            for i in items:
                key = (u.part, i["op"], i["planned"])
                taken[key] = taken.get(key, 0) + 1
                if taken[key] <= max_rungs:
                    kept.append(i)
            if u.items and not kept:
                continue
            items = kept
        key = (parts.index(u.part) if parts else 0,
               min((ops_full.index(op_name(i["op"])) for i in items), default=0) if ops_full else 0,
               min((k for k, sp in enumerate(problems) for i in items if problem_matches(i, sp)), default=0)
               if problems else 0, n)
        keyed.append((key, dataclasses.replace(u, items=items, extra=extra)))
    return [u for _, u in sorted(keyed, key=lambda t: t[0])]


def plan_table(units: list[Unit], budget_s: float) -> str:
    fixed = sum(u.cap_s for u in units if u.cap_s is not None)
    lines = [f"{'#':>2}  {'unit':24s} {'cap s':>7}  what"]
    for k, u in enumerate(units, 1):
        cap = f"{u.cap_s:7.1f}" if u.cap_s is not None else "   rest"
        lines.append(f"{k:2d}  {u.name:24s} {cap}  {u.what}")
        for i in u.items:
            if u.part in ("timer", "ncu"):
                lines.append(f"{'':37s}- {op_name(i['op'])} {i['rung']} @ {i['label']}")
    lines.append(f"caps {fixed:.0f} s of a {budget_s:.0f} s budget; 'rest': what the budget has left")
    return "\n".join(lines)


# --- resume: what is measured already for this commit on this GPU ----------------------------------
def current_commit() -> str | None:
    from perfkit import results

    return results.git_commit()


def _results_roots(out: Path, resume: list[Path]) -> list[Path]:
    from perfkit import results

    roots = [results.RESULTS_DIR, out / "results"]
    for d in resume:
        roots.append(d / "results" if (d / "results").is_dir() else d)
    return roots


def _csv_rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        if p.exists():
            with open(p) as f:
                rows += list(csv.DictReader(f))
    return rows


def measured(out: Path, resume: list[Path], gpu: str, commit: str | None) -> dict[str, set]:
    """Per part, the (op, problem label, rung or peer name) already measured on ``gpu`` for
    ``commit`` (with no commit known: only what this ``out`` holds)."""
    from perfkit import results

    done = {"ops": set(), "ceilings": set(), "timer": set(), "ncu": set(), "units": set()}
    for root in _results_roots(out, resume):
        if not commit and root != out / "results":
            continue
        df = results.load(root=root, latest=False)
        for r in df.itertuples():
            if r.gpu != gpu or (commit and getattr(r, "commit", None) != commit):
                continue
            done["ceilings" if r.op == "roofline" else "ops"].add((r.op, r.problem, r.variant))
    folders = [out] + list(resume) if commit else [out]
    for r in _csv_rows(f / "ceilings.csv" for f in folders):  # simulated ceilings are not records
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit:
            done["ceilings"].add(("roofline", "", r["ceiling"]))
    for r in _csv_rows(f / "measure_vs_do_bench.csv" for f in folders):
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit:
            done["timer"].add((r["op"], r["problem"], r["variant"]))
    ncu_csvs = [p for f in folders for p in [f / "ncu_metrics_all_rungs.csv", *sorted((f / "ncu").glob("*.metrics.csv"))]]
    for r in _csv_rows(ncu_csvs):
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit:
            done["ncu"].add((r["op"], r["problem"], r["rung"]))
    for r in _csv_rows(f / "summary.csv" for f in folders):
        if r.get("gpu") == gpu and (r.get("commit") or None) == commit and r.get("status") == "done":
            done["units"].add(r["unit"])
    return done


def item_key(part: str, item: dict, op: str) -> tuple:
    """How ``measured`` names an item: ncu rows by rung label, records by variant name."""
    return (op, item["label"], item["rung"] if part == "ncu" else item["variant"])


def remaining(unit: Unit, done: dict, ops_of: dict) -> list[dict]:
    have = done.get(unit.part, set())
    return [i for i in unit.items if item_key(unit.part, i, ops_of[i["op"]]) not in have]


# --- the parent: units in their own process groups, within the budget -----------------------------
class Budget:
    def __init__(self, seconds: float, t0: float = _T0):
        self.t0, self.seconds = t0, float(seconds)

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


def run_child(cmd: list[str], env: dict, log_path: Path, timeout: float) -> int | None:
    """Run ``cmd`` in a new session (its own process group); at ``timeout`` kill the group.
    Returns the exit code, or None when it was killed at the limit.  The group is killed after
    a normal exit too: nothing the unit started outlives it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as f:
        f.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            kill_group(proc.pid)
            proc.wait()
    return rc


def run_unit(args, unit: Unit, budget: Budget, done: dict, ops_of: dict, log) -> dict:
    """Run one unit; its summary row."""
    out = Path(args.out)
    row = {"unit": unit.name, "part": unit.part, "cap_s": unit.cap_s, "seconds": 0.0, "status": "", "note": ""}
    if unit.part == "tests" and args.tiny:
        return {**row, "status": "skipped", "note": "the suite runs on a GPU here (make test runs it in the simulator)"}
    if unit.part == "ncu" and not args.tiny and not shutil.which("ncu"):
        return {**row, "status": "skipped", "note": "no ncu on PATH"}
    if unit.part == "tests" and unit.name in done["units"] and not args.force:  # no records to go by
        return {**row, "status": "skipped", "note": "done for this commit (resume)"}
    if unit.part == "ceilings" and {"copy", "fma"} <= {k[2] for k in done["ceilings"]} and not args.force:
        return {**row, "status": "skipped", "note": "both ceilings measured for this commit (resume)"}
    todo = remaining(unit, done, ops_of) if unit.items and not args.force else unit.items
    if unit.items and not todo and not unit.extra:
        return {**row, "status": "skipped", "note": f"all {len(unit.items)} measured for this commit (resume)"}
    left = budget.left()
    limit = left if unit.cap_s is None else min(unit.cap_s, left)
    if left < min(MIN_UNIT_S, unit.cap_s or MIN_UNIT_S) or limit < 1.0:
        return {**row, "status": "not started", "note": f"{left:.0f} s of the budget left"}
    spec = out / "units" / f"{unit.name}.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({**dataclasses.asdict(unit), "items": todo, "tiny": args.tiny,
                                "commit": args.commit_id, "gpu": args.gpu, "resume": args.resume_dirs},
                               indent=1, default=str))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--unit", str(spec)]
    env = {**os.environ, "PERFKIT_BACKEND": backend.name()}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if args.commit:
        env["PERFKIT_GIT_COMMIT"] = args.commit
    t0 = time.monotonic()
    ulog = out / "logs" / f"{unit.name}.log"
    rc = run_child(cmd, env, ulog, limit)
    dt = time.monotonic() - t0
    tail = (ulog.read_text(errors="replace").strip().splitlines() or [""])[-1][:200]
    skipped = len(unit.items) - len(todo)
    note = f"{len(todo)} to measure, {skipped} measured before" if unit.items else ""
    if rc is None:
        why = "its cap" if unit.cap_s is not None and unit.cap_s <= left else "the budget"
        status, note = "timed out", f"killed with its children at {why} ({limit:.0f} s); what it recorded is kept. {note}"
    elif rc == 0:
        status = "done"
    elif rc == EXIT_FAULT:
        status, note = "device fault", f"{tail} (rest of the unit ran in fresh processes; see {ulog})"
    else:
        status, note = "failed", f"exit {rc}: {tail} (see {ulog})"
    return {**row, "seconds": round(dt, 1), "status": status, "note": note}


def summary_table(rows: list[dict]) -> str:
    lines = ["| unit | part | status | s | cap s | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        cap = "rest" if r["cap_s"] is None else f"{r['cap_s']:.0f}"
        lines.append(f"| {r['unit']} | {r['part']} | {r['status']} | {r['seconds']:.1f} | {cap} | {r['note']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", choices=PLANS, default="quick", help="quick (the default; a 15-minute lease) or full")
    ap.add_argument("--out", default=None, help="folder for everything written (default runs/record_gpu, "
                                                "runs/rehearsal with --rehearse)")
    ap.add_argument("--parts", default="", help=f"comma-separated, of {', '.join(PARTS)}, run in the order given")
    ap.add_argument("--ops", default="", help="comma-separated op modules, run in the order given (default: all)")
    ap.add_argument("--problems", default="", help="comma-separated: label substrings, dtypes or GPU_SWEEP indices")
    ap.add_argument("--budget-s", type=float, default=QUICK_BUDGET_S,
                    help=f"wall-clock budget in seconds from this process's start (default {QUICK_BUDGET_S:.0f})")
    ap.add_argument("--commit", default=None, help="the git commit of this working tree, where it has no .git")
    ap.add_argument("--resume-from", action="append", default=[], metavar="DIR",
                    help="an earlier call's --out (or a records folder): what it measured is not measured again")
    ap.add_argument("--rehearse", action="store_true", help="run the plan in the simulator at tiny shapes")
    ap.add_argument("--max-rungs", type=int, default=None, help="at most N rungs of each (part, op, problem)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    ap.add_argument("--force", action="store_true", help="measure again what is measured for this commit")
    ap.add_argument("--pack", default=None, metavar="FILE.tgz",
                    help="at the end, pack the whole --out folder into this one file (the device tool brings "
                         "back at most 8 files, 2 folders deep); unpack here with tools/import_gpu_run.py")
    ap.add_argument("--unit", help=argparse.SUPPRESS)  # internal: one unit's spec, in a child
    args = ap.parse_args(argv)
    if args.commit:
        os.environ["PERFKIT_GIT_COMMIT"] = args.commit
    if args.unit:
        return unit_main(args)
    if args.rehearse and not backend.is_simulator():
        ap.error("--rehearse runs in the simulator: start it as a script (the backend is chosen on import)")
    if not args.rehearse and backend.is_simulator() and not args.list:
        ap.error("no GPU here: --rehearse runs the plan in the simulator at tiny shapes (--list shows it)")
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    parts, ops, problems = split(args.parts), split(args.ops), split(args.problems)
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    if args.max_rungs is not None and args.max_rungs < 1:
        ap.error("--max-rungs must be >= 1")
    resume = [Path(d).resolve() for d in args.resume_from]
    for d in resume:
        if not d.is_dir():
            ap.error(f"--resume-from {d}: no such folder")
    args.tiny = args.rehearse
    args.resume_dirs = [str(d) for d in resume]
    out = Path(args.out or ("runs/rehearsal" if args.rehearse else "runs/record_gpu")).resolve()
    args.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s)
    units = plan_quick(args.budget_s, args.tiny) if args.plan == "quick" else plan_full(args.tiny)
    units = select(units, parts or None, ops or None, problems or None, args.max_rungs)
    if args.rehearse and not (parts or ops or problems):
        units.insert(0, Unit("rehearsal-kill", "rehearsal", SLEEP_CAP_S,
                             "sleeps past its cap with a grandchild: both must be killed", extra={"sleep": 600}))
    table = plan_table(units, args.budget_s)
    args.commit_id = current_commit()
    args.gpu = backend.device().name
    (out / "plan.json").write_text(json.dumps(
        {"plan": args.plan, "rehearse": args.rehearse, "budget_s": args.budget_s, "commit": args.commit_id,
         "gpu": args.gpu, "units": [dataclasses.asdict(u) for u in units]}, indent=1, default=str))
    if args.list:
        print(table)
        return 0
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
    ops_of = {s: m.EXAMPLE_PROBLEM.op for s, m in ladders()}  # module -> the op its records name
    done = measured(out, resume, args.gpu, args.commit_id)
    rows = []
    for u in units:
        row = run_unit(args, u, budget, done, ops_of, log)
        row.update(commit=args.commit_id, gpu=args.gpu)
        rows.append(row)
        log(f"[{u.name}] {row['status']} in {row['seconds']:.0f} s  {row['note']}")
        _write_csv(out / "summary.csv", rows, ["unit", "part", "status", "seconds", "cap_s", "note", "commit", "gpu"])
    if any(u.part == "ncu" for u in units):
        merge_ncu(out, log)
    merge_sweeps(out, log)
    text = summary_table(rows)
    (out / "summary.md").write_text(f"# record_gpu --plan {args.plan} ({args.gpu}, commit {args.commit_id}, "
                                    f"{budget.used():.0f} s of {args.budget_s:.0f})\n\n{text}\n")
    left = [r["unit"] for r in rows if r["status"] in ("timed out", "not started")]
    failed = [r["unit"] for r in rows if r["status"] == "failed"]
    faults = [r["unit"] for r in rows if r["status"] == "device fault"]
    expected = ["rehearsal-kill"] if args.rehearse else []
    left = [u for u in left if u not in expected]
    (out / "status.json").write_text(json.dumps({"rows": rows, "left": left, "failed": failed, "faults": faults,
                                                 "budget_s": args.budget_s, "used_s": budget.used(),
                                                 "commit": args.commit_id, "gpu": args.gpu}, indent=1))
    log(text)
    log(f"used {budget.used():.0f} s of {args.budget_s:.0f}: {sum(r['status'] == 'done' for r in rows)} done, "
        f"{sum(r['status'] == 'skipped' for r in rows)} skipped, {len(left)} left {left}, {len(faults)} device "
        f"fault {faults}, {len(failed)} failed {failed}")
    logf.close()
    if args.pack:
        pack(out, Path(args.pack))
    return 3 if left else (EXIT_FAULT if faults else (1 if failed else 0))


def pack(out: Path, dest: Path) -> None:
    """``out`` as one gzipped tar (its top folder named ``record_gpu``), written to ``dest``."""
    import tarfile

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(out, arcname="record_gpu")
    print(f"packed {out} into {dest} ({dest.stat().st_size / 1e6:.1f} MB)", flush=True)


# --- the units (each in its own process group) -----------------------------------------------------
def unit_main(args) -> int:
    spec = json.loads(Path(args.unit).read_text())
    out = Path(args.out)
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
        return unit_ncu(out, spec, tiny)
    if part == "ncu-driver":  # under ncu: one launch of every rung, a marker kernel before each
        return ncu_driver(items, Path(spec["manifest"]))
    print(f"unknown unit part {part}", file=sys.stderr)
    return 2


def rebuild(item: dict):
    """(module, Problem, Variant) of a planned item, rebuilt in this process."""
    mod = op_module(item["op"])
    p = mod.Problem(**item["problem"])
    return mod, p, variant_named(mod, p, item["variant"])


class Inputs:
    """Each problem's seeded inputs, made once and handed out as copies."""

    def __init__(self):
        self._made: dict = {}

    def __call__(self, p, seed: int = 0) -> dict:
        key = (p, seed)
        if key not in self._made:
            self._made = {key: p.make_inputs(seed)}  # one problem at a time: large inputs go
        return {k: v.copy() for k, v in self._made[key].items()}


def unit_sleep(out: Path, seconds: float) -> int:
    """The rehearsal's proof of the kill: a grandchild and this process both sleep past the cap."""
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    (out / "rehearsal-kill.pids").write_text(f"{os.getpid()} {child.pid}\n")
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
        r = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
    last = (out / "pytest_gpu.log").read_text(errors="replace").strip().splitlines()[-1:]
    print(f"pytest exit {r.returncode}: {last[0] if last else ''}")
    return 0  # the log says how it went; a red suite is a result, not a tool failure


def _record_root(out: Path) -> Path:
    return out / "results"


def _done_here(out: Path, spec: dict, part: str) -> set:
    return measured(out, [Path(d) for d in spec.get("resume", [])], spec["gpu"], spec["commit"])[part]


def unit_ceilings(out: Path, spec: dict, tiny: bool) -> int:
    from perfkit import roofline

    done = _done_here(out, spec, "ceilings")
    rows = []
    for variant, fn in (("copy", roofline.copy_bandwidth), ("fma", roofline.fp32_rate)):
        if any(k[0] == "roofline" and k[2] == variant for k in done):
            print(f"{variant}: recorded for this commit already")
            continue
        size = (64 << 10 if variant == "copy" else 2) if tiny else None
        r = fn(size, record=True, results_root=_record_root(out))
        value, unit = ((r["bytes_per_s"] / 1e9, "GB/s") if variant == "copy" else (r["flops_per_s"] / 1e12, "TFLOP/s"))
        m = r["measurement"]
        rows.append({"ceiling": variant, "value": value, "unit": unit, "median_s": m.median_s, "n": m.n,
                     "spin_s": m.extra.get("spin_s"), "below_recorded": json.dumps(r["below_recorded"]),
                     "path": r["path"], "simulated": m.simulated, "commit": spec["commit"], "gpu": spec["gpu"]})
        print(f"{variant}: {value:.2f} {unit}  {m}  -> {r['path']}", flush=True)
    _append_csv(out / "ceilings.csv", rows)
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
            _append_csv(out / "measure_vs_do_bench.csv", [row])  # row by row: a kill keeps them
            print(f"  {op:10s} {label:22s} measure {m.median_s * 1e6:10.2f} us  do_bench {db * 1e6:10.2f} us",
                  flush=True)
        except Exception as exc:  # one rung failing must not stop the comparison
            print(f"  {op} {label}: {exc.__class__.__name__}: {exc}", flush=True)
            if bench.is_device_fault(exc):
                fault = True
                raise

    for item in spec["items"]:
        try:
            mod, p, v = rebuild(item)
            v.supports(p)
            prep = v.prepare(p, inputs(p))
        except Exception as exc:
            print(f"  {item['op']} {item['rung']} @ {item['label']}: not run ({exc.__class__.__name__}: {exc})")
            if bench.is_device_fault(exc):
                return EXIT_FAULT
            continue
        try:
            compare(p.op, p.label, v.name, v.label, prep, prep.synchronize)
        except Exception:
            return EXIT_FAULT
    if spec["extra"].get("empty"):
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
    print(f"timer: rows in {out / 'measure_vs_do_bench.csv'}")
    return 0


def unit_ops(out: Path, spec: dict, tiny: bool) -> int:
    """Sweep one problem over the planned rungs not yet measured for this commit."""
    from perfkit import bench

    items = spec["items"]
    if not items:
        print("nothing to sweep")
        return 0
    mod, p, _ = rebuild(items[0])
    todo = [variant_named(mod, p, i["variant"]) for i in items]
    print(f"{op_name(items[0]['op'])} {p.label}: {len(todo)} rungs and peers to sweep", flush=True)
    table = bench.sweep([p], todo, progress=False, record=True, results_root=_record_root(out),
                        timer=REHEARSAL_TIMER if tiny else None)
    table = table.drop(columns=["config", "traceback"], errors="ignore")
    table["commit"], table["gpu"] = spec["commit"], spec["gpu"]
    (out / "sweeps").mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sweeps" / f"sweep_{spec['name'].removeprefix('ops-')}.csv", index=False)
    for r in table.itertuples():
        rate = f"{r.tflops:8.2f} TFLOP/s {r.gbps:8.1f} GB/s" if r.tflops == r.tflops else "(simulated)"
        print(f"  {r.problem:40.40s} {r.label:22s} {r.status:14s} {rate} {r.error or ''}")
    return EXIT_FAULT if (table["status"] == bench.FAULT_STATUS).any() else 0


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


# --- Nsight Compute ---------------------------------------------------------------------------------
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
#: the first table's columns, then where and how this row was taken
NCU_TABLE = ["op", "problem", "rung", "kernel", "time_us", "dram_read_bytes", "dram_write_bytes", "l2_bytes",
             "shared_wavefronts", "shared_bank_conflicts", "warp_instructions", "ffma_thread_instructions",
             "ffma_share_of_warp_instructions", "achieved_occupancy_pct", "issue_active_pct",
             "dram_throughput_pct", "tensor_pipe_active_pct", "registers_per_thread", "sm_clock_hz"]
NCU_EXTRA = ["clock_control", "commit", "gpu"]
NCU_MARKER = "perfkit_ncu_marker"
#: clocks as in use (boost), as the first table was taken; ncu's default locks them to base
NCU_CLOCK_CONTROL = "none"

NCU_DRIVER = '''"""Written by tools/record_gpu.py: run every planned rung once, for Nsight Compute.
Each rung is prepared and run once outside the profiled range (compile, warm-up), then, inside
cudaProfilerStart/Stop, a marker kernel and one launch of the rung.  record_gpu.py's ncu units
run this under `ncu --profile-from-start off` and split the kernels at the markers.
Usage: python ncu_driver.py SPEC (a unit spec whose part is ncu-driver)"""
import runpy
import sys

sys.argv = [{tool!r}, "--out", {out!r}, "--unit"] + sys.argv[1:]
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


def ncu_driver(items: list[dict], manifest: Path) -> int:
    """One profiled launch of each item's rung at its own problem, a marker before each; the
    manifest gets a line per rung profiled, in order."""
    import numpy as np

    from perfkit import bench

    mark = cuda.to_device(np.zeros(1, np.int32))
    start = getattr(cuda, "profile_start", lambda: None)  # the simulator has no profiler API
    stop = getattr(cuda, "profile_stop", lambda: None)
    inputs = Inputs()
    with open(manifest, "w") as f:
        for item in items:
            try:
                _, p, v = rebuild(item)
                v.supports(p)
                prep = v.prepare(p, inputs(p))
                prep()  # compile and warm up, not profiled
                prep.synchronize()
            except Exception as exc:
                print(f"{item['rung']} @ {item['label']}: not profiled ({exc.__class__.__name__}: {exc})", flush=True)
                if bench.is_device_fault(exc):
                    return EXIT_FAULT
                continue
            start()
            perfkit_ncu_marker[1, 1](mark)
            prep()
            prep.synchronize()
            stop()
            f.write(json.dumps({"op": p.op, "problem": p.label, "rung": v.label}) + "\n")
            f.flush()
            print(f"{v.label} @ {p.label}: profiled", flush=True)
    return 0


def unit_ncu(out: Path, spec: dict, tiny: bool) -> int:
    d = out / "ncu"
    d.mkdir(parents=True, exist_ok=True)
    name = spec["name"]
    manifest = d / f"{name}.manifest.jsonl"
    dspec = d / f"{name}.driver.json"
    dspec.write_text(json.dumps({**spec, "part": "ncu-driver", "manifest": str(manifest)}, default=str))
    if tiny:  # no Nsight Compute in the simulator: the same driver, run directly
        rc = ncu_driver(spec["items"], manifest)
        ran = [json.loads(l) for l in manifest.read_text().splitlines() if l.strip()]
        # a row per rung the driver ran, every metric empty, so that resume and the merged table
        # go through the same code as on a GPU
        rows = [{**r, "kernel": "(rehearsal: not profiled)", "clock_control": "rehearsal, no ncu",
                 "commit": spec["commit"], "gpu": spec["gpu"]} for r in ran]
        _write_csv(d / f"{name}.metrics.csv", rows, NCU_TABLE + NCU_EXTRA)
        print(f"rehearsal: the driver ran {len(ran)} rungs without Nsight Compute (exit {rc}); no metrics")
        return rc
    driver = d / "ncu_driver.py"
    driver.write_text(NCU_DRIVER.format(out=str(out), tool=str(Path(__file__).resolve())))
    rep, raw = d / f"{name}.ncu-rep", d / f"{name}.raw.csv"
    cmd = ["ncu", "--profile-from-start", "off", "--target-processes", "all", "--clock-control", NCU_CLOCK_CONTROL,
           "--metrics", ",".join(NCU_COLUMNS.values()), "-f", "-o", str(rep.with_suffix("")),
           sys.executable, str(driver), str(dspec)]
    print(" ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=ROOT)
    if not rep.exists():
        print(f"ncu wrote no report (exit {r.returncode})")
        return 1
    with open(raw, "w") as f:
        subprocess.run(["ncu", "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"],
                       stdout=f, check=True)
    rows = ncu_table(raw.read_text(), [json.loads(l) for l in manifest.read_text().splitlines() if l.strip()])
    for row in rows:
        row.update(clock_control=NCU_CLOCK_CONTROL, commit=spec["commit"], gpu=spec["gpu"])
    _write_csv(d / f"{name}.metrics.csv", rows, NCU_TABLE + NCU_EXTRA)
    print(f"{len(rows)} kernel rows for {name}")
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
    rows = _csv_rows(parts)
    if rows:
        _write_csv(out / "ncu_metrics_all_rungs.csv", rows, NCU_TABLE + NCU_EXTRA)
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
