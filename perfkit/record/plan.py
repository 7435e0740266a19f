"""The plan: which units a session runs, in which order, with which caps, and what each measures.

Ops come from :mod:`perfkit.kernels.registry`; a planned item names its op by the registry's
name (``softmax``), its problem by its fields, its rung or peer by name.  ``rebuild`` turns an
item back into (module, Problem, Variant) in the unit's child."""
from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from perfkit import backend, paths
from perfkit.kernels import registry

PARTS = ("tests", "ceilings", "timer", "ops", "ncu", "tune")
PLANS = ("quick", "full")
#: the quick plan's caps in seconds at its default budget (they scale with --budget-s); the ncu
#: units share what is left of the budget
QUICK_BUDGET_S = 420.0
#: (on the H100 at 6bbc424 a norm unit needed 23-25 s for its rungs and peers, a conv unit over
#: 31 s and GEMM float32 62 s: the caps leave them a margin)
QUICK_CAPS = {"ceilings": 15, "timer": 35, "gemm-float16": 55, "gemm-float16-8192": 30, "gemm-float32": 70,
              "norm": 28, "conv": 34,
              "tune": 210}  # two tune units share a budget of their own (--parts tune)
#: the tune units (``--parts tune``, never in the default quick plan): the rung whose configurations
#: are timed, and the problem, per unit (perfkit.autotune's searches)
TUNE = (("tune-gemm-float16", "tc_deep", "float16"), ("tune-gemm-float32", "simt_wide", "float32"))
#: tune.csv's columns, in order (one row a configuration; the rejected ones with the reason)
TUNE_COLUMNS = ["unit", "op", "rung", "problem", "planned", "config", "default", "model_rank", "registers",
                "occupancy", "model_us", "status", "median_us", "iqr_us", "n_samples", "tflops", "oracle_us",
                "x_oracle", "max_abs_err", "error", "rejected", "simulated", "commit", "gpu"]
QUICK_NORMS = ("softmax", "layernorm", "rmsnorm", "layernorm_bwd", "batchnorm")
#: ncu's order of ops: the rungs that never ran on a GPU first
NCU_ORDER = ("gemm", "conv", "softmax", "layernorm", "rmsnorm", "layernorm_bwd", "batchnorm", "saxpy")
NCU_CHUNK = 3  # rungs per ncu unit: a unit killed at the budget loses no more than these
#: the rehearsal's unit that sleeps past this cap, to show the kill
SLEEP_CAP_S = 5.0  # (3 s was less than a loaded 2-core machine needs to start the child and import perfkit)
#: the Nsight Compute table "new" and "changed since" are told against where this GPU has none in
#: data/ncu/ (the simulator of a rehearsal, a GPU devices.yaml does not list)
LAST_NCU = paths.DATA / "ncu" / "h100-sxm-2026-11-23.csv"


class PlanError(ValueError):
    """A bad --ops, --rungs or --problems: the message names what is allowed."""


# --- what there is to run ------------------------------------------------------------------------
def ladders(only: list[str] | None = None) -> list[tuple[str, object]]:
    """(op, module) of every op in the registry, optionally only those named (``softmax``,
    ``norm.softmax``, or ``norm`` for every norm op), in the order named."""
    found = [(op, registry.module(op)) for op in registry.OPS]
    if not only:
        return found

    def named(o, op):
        return o in (op, registry.OPS[op], registry.OPS[op].split(".")[0])

    unknown = [o for o in only if not any(named(o, op) for op, _ in found)]
    if unknown:
        raise PlanError(f"unknown op(s) {unknown}; there are {list(registry.OPS)}")
    return list(dict.fromkeys((op, m) for o in only for op, m in found if named(o, op)))


def variants_for(mod, problem) -> list:
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
        raise PlanError(f"{mod.__name__} has no SIM_SWEEP to rehearse with")
    for same in (("dtype", "layout"), ("dtype",)):
        for s in sims:
            if all(getattr(s, k, None) == getattr(problem, k, None) for k in same):
                return s
    return sims[0]


@dataclasses.dataclass
class Unit:
    """One piece of the plan, run in its own process group with its own cap."""

    name: str
    part: str
    cap_s: float | None  # None: what the budget has left
    what: str = ""
    #: what it measures: {"op": registry op, "problem": Problem fields, "label": problem label,
    #: "variant": rung or peer name, "rung": its label, "sweep_index": index in GPU_SWEEP,
    #: "planned": the GPU problem's label (in a rehearsal "problem" is its tiny twin)}
    items: list = dataclasses.field(default_factory=list)
    extra: dict = dataclasses.field(default_factory=dict)

    def ops(self) -> list[str]:
        return list(dict.fromkeys(i["op"] for i in self.items))


def item(op, mod, problem, v, tiny: bool) -> dict:
    """A planned (op, problem, rung); in a rehearsal the problem is its tiny twin."""
    p = tiny_twin(mod, problem) if tiny else problem
    sweep = list(getattr(mod, "GPU_SWEEP", []))
    return {"op": op, "problem": p.params, "label": p.label, "variant": v.name, "rung": v.label,
            "sweep_index": sweep.index(problem) if problem in sweep else None, "planned": problem.label}


def rebuild(it: dict):
    """(module, Problem, Variant) of a planned item, rebuilt in this process."""
    mod = registry.module(it["op"])
    p = mod.Problem(**it["problem"])
    return mod, p, variant_named(mod, p, it["variant"])


class Inputs:
    """Each problem's seeded inputs, made once and handed out as copies."""

    def __init__(self):
        self._made: dict = {}

    def __call__(self, p, seed: int = 0) -> dict:
        key = (p, seed)
        if key not in self._made:
            self._made = {key: p.make_inputs(seed)}  # one problem at a time: large inputs go
        return {k: v.copy() for k, v in self._made[key].items()}


def _ops_unit(name, op, mod, problem, variants, cap, tiny, what="") -> Unit:
    return Unit(name, "ops", cap, what or f"{op} {problem.label}: {len(variants)} rungs and peers",
                [item(op, mod, problem, v, tiny) for v in variants])


# --- Nsight Compute: which rungs are worth a profile ------------------------------------------------
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


def problems_profiled(tables: list | None = None) -> dict:
    """(op, rung name) -> the problem labels of its rows in this GPU's tables: a card shows the row
    at its own problem, so a rung profiled only at another (conv's igemm_regblock in NHWC, its card
    in NCHW; cuBLAS SGEMM, not HGEMM; cuDNN's float32 FFT, not its float16 implicit GEMM) still
    lacks one there."""
    have: dict = {}
    for path, _ in tables if tables is not None else ncu_tables_for(backend.device().name):
        if not Path(path).exists():
            continue
        with open(path) as f:
            for r in csv.DictReader(f):
                have.setdefault((r["op"], r["rung"].split(" ", 1)[-1]), set()).add(r["problem"])
    return have


def profiled_anywhere() -> set:
    """(op, rung name) of every row of every Nsight Compute table in data/ncu/, of any GPU: a
    rung in none of them has a card with no counters at all (its "new" units go first)."""
    return set(last_ncu_table([(path, None) for path in sorted(LAST_NCU.parent.glob("*.csv"))]))


def recorded_anywhere(results_root=None) -> set[tuple[str, str]]:
    """(op, variant) of every record of any GPU."""
    from perfkit import results

    try:
        df = results.load(root=results_root)
    except Exception:  # noqa: BLE001  (no records at all)
        return set()
    return set() if df.empty else {(str(o), str(v)) for o, v in zip(df["op"], df["variant"])}


def ncu_targets(op, mod, problem) -> dict[str, list]:
    """Rungs for Nsight Compute by tier: ``new`` (no rung of that name in any table of this GPU),
    ``library`` (the oracle, as (rung, why, problem), at each other dtype the ladder's rungs run
    with no row of that dtype: cuBLAS HGEMM, cuDNN at the float16 NHWC layer),
    ``changed`` (its kernel code changed since the commit of the newest table that has it), ``unknown`` (whether it
    changed no one can tell here: no git, as in a copy on a GPU machine).  Library peers and
    oracles already in the table are left out: our commits do not change their kernels."""
    from perfkit import history
    from perfkit.kernels.base import OracleVariant

    have = last_ncu_table()
    at = problems_profiled()
    tiers: dict[str, list] = {"new": [], "changed": [], "unknown": [], "library": []}
    for v in variants_for(mod, problem):
        key = (problem.op, v.label.split(" ", 1)[-1])
        if getattr(v, "oracle", False):  # the library a ladder is taught against, at each dtype its rungs run
            twins = {}
            for r in mod.LADDER:
                t = r.example(problem)
                twins.setdefault(t.dtype, t)
            for dt, twin in twins.items():
                if dt != problem.dtype and twin.label not in at.get(key, ()):
                    tiers["library"].append((v, f"no {dt} row in any table of this GPU", twin))
        if key not in have:
            tiers["new"].append((v, "in no table of this GPU"))
        elif isinstance(v, OracleVariant):  # the oracle and the torch/Triton peers
            continue
        elif v.example(problem).label not in at.get(key, ()):  # profiled, but not where its card is
            tiers["new"].append((v, f"no row at {v.example(problem).label} in any table of this GPU"))
        else:
            commit = have[key]
            c = history.source_changed_since(v, commit)
            if c:
                tiers["changed"].append((v, f"changed since {commit}"))
            elif c is None:
                tiers["unknown"].append((v, f"unknown whether changed since {commit} (no git here)"))
    return tiers


def ncu_units(mods, tiny: bool, cap=None) -> list[Unit]:
    """Nsight Compute units, NCU_CHUNK rungs each: every op's new rungs first (those in no table
    of any GPU before those another GPU has profiled: a window cut by its budget has given
    counters to the cards that had none), the library at the dtypes it lacks, rungs no GPU has
    timed, then the changed, then the unknown, each tier in the order of ``mods``."""
    found = {op: ncu_targets(op, mod, mod.EXAMPLE_PROBLEM) for op, mod in mods}
    seen = profiled_anywhere()
    timed = recorded_anywhere()
    for op, tiers in found.items():
        tiers.setdefault("library", [])  # (rung, why, problem): a library at a dtype of the ladder's it lacks
        new = tiers.pop("new")
        unseen = [v for v, _ in new if (op, v.name) not in seen]
        tiers["unseen"] = [(v, "in no table of any GPU") for v in unseen if (op, v.name) in timed]
        # a rung no GPU has timed has no card to give counters to yet, and may be one that hangs
        # (an ncu unit has no stall limit): after the rungs this GPU has not profiled
        tiers["untimed"] = [(v, "in no table and no record of any GPU") for v in unseen if (op, v.name) not in timed]
        tiers["new"] = [(v, why) for v, why in new if (op, v.name) in seen]
    units = []
    for tier in ("unseen", "new", "library", "untimed", "changed", "unknown"):
        for op, mod in mods:
            p = mod.EXAMPLE_PROBLEM
            targets = found[op][tier]
            for k in range(0, len(targets), NCU_CHUNK):
                chunk = targets[k:k + NCU_CHUNK]
                items = [{**item(op, mod, t[2] if len(t) > 2 else t[0].example(p), t[0], tiny), "why": t[1]}
                         for t in chunk]
                units.append(Unit(f"ncu-{op}-{tier}-{k // NCU_CHUNK + 1}", "ncu", cap,
                                  f"Nsight Compute ({tier}): {', '.join(t[0].label for t in chunk)}", items))
    return units


# --- the plans ------------------------------------------------------------------------------------------
def newest_first(variants: list) -> list:
    """The oracle, then the ladder's rungs from the newest back, then the peers: a unit cut by its
    cap has measured the rungs that have no record yet (the old, slow ones come last)."""
    oracle = [v for v in variants if getattr(v, "oracle", False)]
    rungs = [v for v in variants if v not in oracle and v.rung > 0]  # a peer's rung is -1
    rest = [v for v in variants if v not in oracle and v not in rungs]
    return oracle + sorted(rungs, key=lambda v: -v.rung) + rest


def plan_quick(budget_s: float, tiny: bool, ncu: bool = True) -> list[Unit]:
    """The quick plan (perfkit.record's docstring), its caps scaled to ``budget_s``; with
    ``ncu=False`` without its Nsight Compute units (choosing them asks git about every rung)."""
    from perfkit.kernels import conv

    s = budget_s / QUICK_BUDGET_S
    units = [Unit("ceilings", "ceilings", QUICK_CAPS["ceilings"] * s, "copy bandwidth and FP32 FMA rate")]
    items = []
    for op in ("softmax", "saxpy"):
        mod = registry.module(op)
        p = mod.EXAMPLE_PROBLEM
        items += [item(op, mod, v.example(p), v, tiny) for v in variants_for(mod, p)]
    g = registry.module("gemm")
    p32 = g.EXAMPLE_PROBLEM
    p16 = g.Problem(p32.m, p32.n, p32.k, "float16")
    f16_only = [v for v in g.LADDER if not v.oracle and v.example(p32).dtype == "float16"]
    simt = [v for v in g.LADDER if not v.oracle and v.example(p32).dtype == "float32"]
    oracle = [v for v in g.LADDER if v.oracle]
    items.append(item("gemm", g, f16_only[0].example(p32), f16_only[0], tiny))
    units.append(Unit("timer", "timer", QUICK_CAPS["timer"] * s,
                      "measure() against do_bench: softmax, saxpy, the first tensor-core rung, an empty "
                      "kernel, the hot/cold copy", items, {"empty": True, "copy": True}))
    peers = variants_for(g, p32)[len(g.LADDER):]
    units.append(_ops_unit("ops-gemm-float16", "gemm", g, p16, newest_first(oracle + f16_only + peers),
                           QUICK_CAPS["gemm-float16"] * s, tiny))
    # 8192^3, where B outgrows L2 and mma.sync fell to 0.51 of cuBLAS: the rungs built for it
    # (rung 18 on: deeper k-tiles, grouped rasterization, then Hopper's) and cuBLAS, newest first
    big = g.Problem(2 * p16.m, 2 * p16.n, 2 * p16.k, "float16")
    units.append(_ops_unit("ops-gemm-float16-8192", "gemm", g, big,
                           newest_first(oracle + [v for v in f16_only if v.rung >= 18]),
                           QUICK_CAPS["gemm-float16-8192"] * s, tiny))
    units.append(_ops_unit("ops-gemm-float32", "gemm", g, p32, newest_first(oracle + simt + peers),
                           QUICK_CAPS["gemm-float32"] * s, tiny))
    for op in QUICK_NORMS:
        mod = registry.module(op)
        p = mod.EXAMPLE_PROBLEM
        units.append(_ops_unit(f"ops-{op}", op, mod, p, newest_first(variants_for(mod, p)), QUICK_CAPS["norm"] * s, tiny))
    c32 = conv.EXAMPLE_PROBLEM
    c16 = conv.to_layout(c32, "NHWC", "float16")
    for tag, p in (("float32-nchw", c32), ("float16-nhwc", c16)):
        units.append(_ops_unit(f"ops-conv-{tag}", "conv", conv, p, newest_first(variants_for(conv, p)),
                               QUICK_CAPS["conv"] * s, tiny))
    if ncu:
        units += ncu_units(ladders(list(NCU_ORDER)), tiny, None)
    return units


def tune_units(tiny: bool, cap: float | None) -> list[Unit]:
    """Each tunable GEMM rung's configurations, compiled and ranked by the model, then checked and
    timed on the GPU in that order (:func:`perfkit.record.units.unit_tune`): the oracle and the
    rung's own configuration are the unit's items (what ``--ops``/``--problems`` pick by)."""
    g = registry.module("gemm")
    out = []
    for name, rung, dtype in TUNE:
        p = g.Problem(g.EXAMPLE_PROBLEM.m, g.EXAMPLE_PROBLEM.n, g.EXAMPLE_PROBLEM.k, dtype)
        oracle = next(v for v in g.LADDER if v.oracle)
        v = next(v for v in g.LADDER if v.name == rung)
        out.append(Unit(name, "tune", cap, f"{rung}'s configurations at {p.label}: in the model's order, "
                                           "each checked then timed, against the oracle",
                        [item("gemm", g, p, oracle, tiny), item("gemm", g, p, v, tiny)],
                        {"rung": rung, "problem": p.params}))
    return out


def plan_full(tiny: bool, ncu: bool = True) -> list[Unit]:
    """Everything: the suite, the ceilings, the timer on every op, every GPU_SWEEP problem, ncu."""
    mods = ladders()
    units = [Unit("tests", "tests", None, "the test suite on the GPU"),
             Unit("ceilings", "ceilings", None, "copy bandwidth and FP32 FMA rate")]
    items = []
    for op, mod in mods:
        p = mod.EXAMPLE_PROBLEM
        items += [item(op, mod, v.example(p), v, tiny) for v in variants_for(mod, p)]
    units.append(Unit("timer", "timer", None, "measure() against do_bench on every op's example problem",
                      items, {"empty": True, "copy": True}))
    for op, mod in mods:
        for i, p in enumerate(list(getattr(mod, "GPU_SWEEP", [])) or [mod.EXAMPLE_PROBLEM]):
            units.append(_ops_unit(f"ops-{op}-{i}", op, mod, p, variants_for(mod, p), None, tiny))
    if ncu:
        units += ncu_units(mods, tiny, None)
    return units + tune_units(tiny, None)


def make(plan: str, budget_s: float, tiny: bool, parts: list[str] | None = None) -> list[Unit]:
    """The plan; its Nsight Compute units only where ``parts`` (all when None) has ncu; the quick
    plan's tune units only where ``parts`` names tune (a 15-minute window spends its default call
    on records)."""
    ncu = not parts or "ncu" in parts
    if plan != "quick":
        return plan_full(tiny, ncu)
    units = plan_quick(budget_s, tiny, ncu)
    if parts and "tune" in parts:
        units += tune_units(tiny, QUICK_CAPS["tune"] * budget_s / QUICK_BUDGET_S)
    return units


# --- picking units and rungs --------------------------------------------------------------------------
def problem_matches(it: dict, spec: str) -> bool:
    """``--problems`` spec: an index into the op's GPU_SWEEP, a dtype, or a label substring."""
    if spec.isdigit():
        return it.get("sweep_index") == int(spec)
    if spec in ("float16", "float32", "float64", "bfloat16"):
        return it["problem"].get("dtype") == spec
    return spec in it["planned"] or spec in it["label"]


def is_peer(it: dict) -> bool:
    return it["rung"].startswith("peer")


def is_oracle(it: dict) -> bool:
    return it["rung"].split(" ", 1)[0] == "00"


def rung_matches(it: dict, spec: str) -> bool:
    """``--rungs`` spec: a rung's or peer's name (``tuned``, ``triton``) or a rung number (``6``, ``06``)."""
    if spec.isdigit():
        head = it["rung"].split(" ", 1)[0]
        return head.isdigit() and int(head) == int(spec)
    return it["variant"] == spec


def check_rungs(units: list[Unit], rungs: list[str]) -> None:
    """Every ``--rungs`` spec names something in the plan (a typo must not measure only the oracle)."""
    items = [i for u in units for i in u.items]
    unknown = [sp for sp in rungs if not any(rung_matches(i, sp) for i in items)]
    if unknown:
        names = sorted({i["variant"] for i in items})
        raise PlanError(f"--rungs: no rung or peer {unknown} in the plan; there are {names}")


def best_rungs(gpu: str | None, results_root=None) -> dict[tuple[str, str], set[str]]:
    """(op, problem label) -> the rung names a card calls best there: the fastest recorded rung
    on ``gpu`` at that problem (each rung's newest record; ``lesson``'s "fastest rung"), and every
    ladder's last rung (the newest, which no record may have yet).  Keyed ``(op, "")`` for the
    last rung, which holds at every problem."""
    from perfkit import results

    best: dict[tuple[str, str], set[str]] = {}
    for op, mod in ladders():
        best[(op, "")] = {mod.LADDER[-1].name}
    if not gpu:
        return best
    try:
        df = results.load(gpu=gpu, root=results_root)  # each rung's newest record: its code today
    except Exception:  # noqa: BLE001  (no records of this GPU: the last rungs alone)
        return best
    if df.empty or "median_s" not in df:
        return best
    rungs = df[~df["variant"].isin(["oracle"]) & df["median_s"].notna()]
    for (op, problem), g in rungs.groupby(["op", "problem"]):
        if op in registry.OPS:
            ladder_names = {v.name for v in registry.module(op).LADDER}
            g = g[g["variant"].isin(ladder_names)]
            if not g.empty:
                best.setdefault((op, problem), set()).add(str(g.loc[g["median_s"].idxmin(), "variant"]))
    return best


def keep_best(it: dict, best: dict) -> bool:
    if is_oracle(it) or is_peer(it):
        return True
    names = best.get((it["op"], ""), set()) | best.get((it["op"], it["planned"]), set())
    return it["variant"] in names


def recorded_rungs(gpu: str | None, results_root=None) -> set[tuple[str, str, str]]:
    """(op, problem label, variant) of every record of ``gpu``, any commit: what ``--new`` leaves
    out (a GPU window spent on what no record of that GPU has yet; the 2026-11-27 H200 window
    needed four calls of hand-listed ``--rungs`` for it)."""
    from perfkit import results

    if not gpu:
        return set()
    try:
        df = results.load(gpu=gpu, root=results_root, latest=False)
    except Exception:  # noqa: BLE001  (no records of this GPU: everything is new)
        return set()
    if df.empty:
        return set()
    return {(str(o), str(p), str(v)) for o, p, v in zip(df["op"], df["problem"], df["variant"])}


def keep_new(it: dict, recorded: set) -> bool:
    """The oracle, or a rung or peer with no record of this GPU at the problem that can serve it
    (a float16-only rung in a float32 unit can never be recorded there: not new, just refused)."""
    if is_oracle(it):
        return True
    if (it["op"], it["planned"], it["variant"]) in recorded:
        return False
    from perfkit.kernels.base import UnsupportedProblem

    try:
        _, p, v = rebuild(it)  # a rehearsal's twin keeps the dtype and layout supports() reads
        v.supports(p)
    except UnsupportedProblem:
        return False
    except Exception:  # noqa: BLE001  (cannot tell here: measure it and let the unit say)
        return True
    return True


def select(units: list[Unit], parts=None, ops=None, problems=None, max_rungs: int | None = None,
           rungs: list[str] | None = None, best: dict | None = None, new: set | None = None) -> list[Unit]:
    """The units of a plan that ``--parts``/``--ops``/``--problems`` pick, in the order given
    (parts first, then ops, then problems); items cut to ``rungs`` (by name or number, plus the
    oracle) or to the ``best`` ones (:func:`best_rungs`, plus the oracle and peers); an ops unit's
    items cut to those with no record of this GPU at the problem (``new``: :func:`recorded_rungs`,
    the oracle kept); then to the first ``max_rungs`` of each (part, op, problem)."""
    ops_full = [op for op, _ in ladders(ops)] if ops else None
    picking = ops_full is not None or bool(problems)
    filtering = bool(rungs) or best is not None or new is not None
    keyed, taken = [], {}
    for n, u in enumerate(units):
        if parts and u.part not in parts:
            continue
        items = u.items
        if ops_full is not None:
            items = [i for i in items if i["op"] in ops_full]
        if problems:
            items = [i for i in items if any(problem_matches(i, sp) for sp in problems)]
        if rungs:
            items = [i for i in items if is_oracle(i) or any(rung_matches(i, sp) for sp in rungs)]
            items = items if any(not is_oracle(i) for i in items) else []  # never the oracle alone
        if best is not None:
            items = [i for i in items if keep_best(i, best)]
        if new is not None and u.part == "ops":  # (ncu units keep their own choice: rungs in no table)
            items = [i for i in items if keep_new(i, new)]
            items = items if any(not is_oracle(i) for i in items) else []  # never the oracle alone
        if (picking or filtering) and u.items and not items:
            continue
        if picking and not u.items and u.part not in ("tests", "ceilings"):
            continue
        extra = u.extra if not picking or u.part == "tune" else {}  # a tune unit's extra names its rung
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
               min((ops_full.index(i["op"]) for i in items), default=0) if ops_full else 0,
               min((k for k, sp in enumerate(problems) for i in items if problem_matches(i, sp)), default=0)
               if problems else 0, n)
        keyed.append((key, dataclasses.replace(u, items=items, extra=extra)))
    return [u for _, u in sorted(keyed, key=lambda t: t[0])]


def table(units: list[Unit], budget_s: float) -> str:
    fixed = sum(u.cap_s for u in units if u.cap_s is not None)
    lines = [f"{'#':>2}  {'unit':24s} {'cap s':>7}  what"]
    for k, u in enumerate(units, 1):
        cap = f"{u.cap_s:7.1f}" if u.cap_s is not None else "   rest"
        lines.append(f"{k:2d}  {u.name:24s} {cap}  {u.what}")
        for i in u.items:
            if u.part in ("timer", "ncu"):
                lines.append(f"{'':37s}- {i['op']} {i['rung']} @ {i['label']}")
    lines.append(f"caps {fixed:.0f} s of a {budget_s:.0f} s budget; 'rest': what the budget has left")
    return "\n".join(lines)
